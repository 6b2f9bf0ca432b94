#!/usr/bin/env python3
"""promcheck.py [FILE] — a strict checker of the Prometheus text exposition
format (0.0.4) and of the naming rules promtool's `check metrics` lints, for
machines without promtool (t_ecosys uses promtool too when it is there).

Checks: every line is a comment, HELP, TYPE or sample; a family has at most
one HELP and one TYPE, both before its first sample; names match
[a-zA-Z_:][a-zA-Z0-9_:]*; label sets parse (only \\\\, \\" and \\n escapes),
no label repeated, no series repeated; values are floats; counters end in
_total and nothing else does; no non-base units (_ms, _milliseconds,
_microseconds, _kilobytes, _megabytes, ...); HELP is not empty. Prints one
line per problem and exits 1 if there is any."""
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
BAD_UNITS = ("_ms", "_milliseconds", "_microseconds", "_nanoseconds", "_minutes", "_hours",
             "_days", "_kilobytes", "_megabytes", "_gigabytes", "_kb", "_mb", "_gb", "_percent")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def parse_labels(s, where, problems):
    labels, pos = [], 0
    while pos < len(s):
        m = LABEL.match(s, pos)
        if not m:
            problems.append("%s: bad label syntax at %r" % (where, s[pos:]))
            return None
        labels.append(m.group(1))
        pos = m.end()
        if pos < len(s):
            if s[pos] != ",":
                problems.append("%s: expected ',' in labels at %r" % (where, s[pos:]))
                return None
            pos += 1
    if len(set(labels)) != len(labels):
        problems.append("%s: a label appears twice" % where)
    return s


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    problems, help_, type_, seen_sample, series = [], {}, {}, set(), set()
    if text and not text.endswith("\n"):
        problems.append("the last line has no newline")
    for n, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
        where = "line %d" % n
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not parts[3].strip():
                problems.append("%s: %s without a name and text" % (where, parts[1]))
                continue
            name, rest = parts[2], parts[3]
            if not NAME.match(name):
                problems.append("%s: bad metric name %r" % (where, name))
            table = help_ if parts[1] == "HELP" else type_
            if name in table:
                problems.append("%s: second %s for %s" % (where, parts[1], name))
            if name in seen_sample:
                problems.append("%s: %s for %s after its samples" % (where, parts[1], name))
            if parts[1] == "TYPE" and rest not in TYPES:
                problems.append("%s: unknown type %r" % (where, rest))
            table[name] = rest
            continue
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?\Z", line)
        if not m:
            problems.append("%s: not a sample: %r" % (where, line))
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        if labels and parse_labels(labels, where, problems) is None:
            continue
        try:
            float(value)
        except ValueError:
            problems.append("%s: value %r is not a number" % (where, value))
        if (name, labels) in series:
            problems.append("%s: series %s{%s} appears twice" % (where, name, labels))
        series.add((name, labels))
        seen_sample.add(name)
        if name not in type_:
            problems.append("%s: %s has no TYPE line before it" % (where, name))
        if name not in help_:
            problems.append("%s: %s has no HELP line" % (where, name))
    for name, t in type_.items():
        if t == "counter" and not name.endswith("_total"):
            problems.append("counter %s should end in _total" % name)
        if t != "counter" and name.endswith("_total"):
            problems.append("%s %s ends in _total but is not a counter" % (t, name))
        for u in BAD_UNITS:
            if name.endswith(u) or (u + "_") in name:
                problems.append("%s: not in base units (%s): use seconds or bytes" % (name, u))
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
