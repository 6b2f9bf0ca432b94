/* control_proto — the %XX encoding of names on the control channel's lines
 * (control_proto.h), one encoder and one decoder for both ends: the tool
 * encodes the names it sends (gen PATH, list SERIES), the daemon those it
 * answers (data file … PATH, data share … LABEL); and the daemon's side of
 * an answer: one line sent whole, the final error line, a GEN_ID argument. */
#define _GNU_SOURCE
#include "control_proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

void control_proto_escape(const char *s, bool keep_spaces, char *out, size_t size)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && n + 4 < size; p++) {
		if (*p < ' ' || (*p == ' ' && !keep_spaces) || *p == '%' || *p == 0x7f)
			n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
		else
			out[n++] = (char)*p;
	}
	out[n] = '\0';
}

int control_proto_unescape(char *s)
{
	char *out = s;
	for (; *s; s++) {
		unsigned v;
		if (*s != '%') {
			*out++ = *s;
			continue;
		}
		if (!s[1] || !s[2] || sscanf(s + 1, "%2x", &v) != 1 || v == 0)
			return -EINVAL;
		*out++ = (char)v;
		s += 2;
	}
	*out = '\0';
	return 0;
}

/* ---- the daemon's side of an answer ---- */

void control_proto_send(int fd, const char *fmt, ...)
{
	char line[CONTROL_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			return; /* the client went away: nothing more to tell it */
		}
		off += (int)w;
	}
}

int control_proto_error(int fd, int err, const char *what)
{
	control_proto_send(fd, "error %d %s", err, what);
	return err;
}

void control_proto_done(int fd, int rc)
{
	if (rc != 0)
		control_proto_error(fd, -rc, "catalog error");
	else
		control_proto_send(fd, "ok");
}

int control_proto_parse_id(const char *s, uint64_t *id)
{
	char *end;
	errno = 0;
	/* digits only: strtoull would take "-1" as its largest value, " 4" as 4 */
	unsigned long long v = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
	if (v == 0 || errno || *end)
		return -EINVAL;
	*id = v;
	return 0;
}
