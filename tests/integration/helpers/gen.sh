# Shell helpers of the generation groups (t_generations, t_keep, t_moved),
# sourced after lib.sh: the scripted trainers of helpers/gen_trainers.py and
# the checks on their saves.

# GT ARGS: a scripted trainer save (helpers/gen_trainers.py), bytes kept in CK_REF too
GT() { "$PY" "$CK_HELPERS/gen_trainers.py" --root "$CK_MNT" --ref "$CK_REF" "$@"; }
# gen_expect PATH KEY=VAL... [--wait S] [--stable S]: the generation line of PATH
gen_expect() {
	local out
	out=$("$PY" "$CK_HELPERS/gen_trainers.py" expect "$@" 2>&1) || ck_fail "$out"
}
# same REL: the mount's REL has exactly the reference's bytes and entries
same() {
	local out
	out=$(diff -r --no-dereference "$CK_REF/$1" "$CK_MNT/$1" 2>&1) ||
		ck_fail "$CK_MNT/$1 differs from what the trainer wrote: $(echo "$out" | head -n 5 | tr '\n' '|')"
}
