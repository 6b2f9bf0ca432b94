/* admin_shared — naming, listing and showing generations on a node of a
 * shared catalog (-o meta=, docs/MULTINODE.md).
 *
 * There the node's local catalog file holds no generations: they are in
 * PostgreSQL, which only the daemon reaches. So GEN is resolved, and list
 * and show answered, by the daemon (control verbs `gen`, `list` and `show`,
 * fs/lib/control_proto.h), in the format admin_gen.c prints a lone
 * catalog's in, and commit, pin, unpin and rm then send the id to
 * it as they do on a single node: the daemon runs the same catalog calls
 * (fs/gen.c), fenced by its lease. Without a daemon nothing here applies: a
 * shared catalog is never read or changed offline, and admin.c refuses a
 * node's cache then (admin_node_offline), but for umount. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "control_proto.h"

static void admin_shared_hello(void *arg, const char *key, const char *value)
{
	bool *shared = arg;
	if (strcmp(key, "shared") == 0 && strcmp(value, "1") == 0)
		*shared = true;
}

bool admin_shared(struct admin *a)
{
	if (!a->daemon)
		return false;
	if (!a->shared_asked) {
		char msg[256];
		bool shared = false;
		a->shared = admin_ctl(a, "hello", admin_shared_hello, &shared, msg, sizeof(msg)) == 0 &&
			    shared;
		a->shared_asked = true;
	}
	return a->shared;
}

/* ---- the answer of `gen` and `list` ---- */

struct admin_sh_gen {
	struct cat_gen g;
	bool durable;
	bool has_usage; /* a "usage" line came (list: ALONE and DEDUP, else "-") */
	struct aq_gen_usage u;
};

struct admin_sh_series {
	uint64_t ino;
	char *path; /* "/run1" */
};

struct admin_sh_answer {
	struct admin_sh_gen *v;
	size_t n, cap;
	struct admin_sh_series *s;
	size_t ns, scap;
	struct admin_show show; /* show's files and shares */
	size_t fcap, scap2;
	int err; /* -ENOMEM once a line could not be kept */
};

static void admin_sh_free(struct admin_sh_answer *ans)
{
	for (size_t i = 0; i < ans->ns; i++)
		free(ans->s[i].path);
	free(ans->s);
	free(ans->v);
	admin_show_free(&ans->show);
	memset(ans, 0, sizeof(*ans));
}

static int admin_sh_state(const char *name)
{
	for (int s = GEN_OPEN; s <= GEN_HELD; s++)
		if (strcmp(cat_gen_state_name(s), name) == 0)
			return s;
	return -1;
}

static struct admin_sh_gen *admin_sh_find(struct admin_sh_answer *ans, const char *value)
{
	unsigned long long id = strtoull(value, NULL, 10);
	for (size_t i = ans->n; i > 0; i--)
		if (ans->v[i - 1].g.id == id)
			return &ans->v[i - 1];
	return NULL;
}

/* v (n used of *cap elements of elem bytes) with room for one more: v
 * itself, or v grown; NULL (ans->err set, v unchanged) if it cannot grow. */
static void *admin_sh_room(struct admin_sh_answer *ans, void *v, size_t n, size_t *cap,
			   size_t elem)
{
	if (n < *cap)
		return v;
	size_t c = *cap ? *cap * 2 : 16;
	void *p = realloc(v, c * elem);
	if (!p) {
		ans->err = -ENOMEM;
		return NULL;
	}
	*cap = c;
	return p;
}

static void admin_sh_series_add(struct admin_sh_answer *ans, const char *value)
{
	char *end;
	unsigned long long ino = strtoull(value, &end, 10);
	if (*end != ' ')
		return;
	struct admin_sh_series *s = admin_sh_room(ans, ans->s, ans->ns, &ans->scap, sizeof(*s));
	if (!s)
		return;
	ans->s = s;
	char *path = strdup(end + 1);
	if (!path) {
		ans->err = -ENOMEM;
		return;
	}
	ans->s[ans->ns++] = (struct admin_sh_series){ ino, path };
}

/* "ID STATE DURABLE PINNED STEP FILES LOGICAL COMMITTED_NS SERIES NAME" */
static void admin_sh_gen_add(struct admin_sh_answer *ans, const char *value)
{
	struct admin_sh_gen e = { 0 };
	unsigned long long id, step, files, logical, series;
	long long committed;
	int durable, pinned, name_at = 0;
	char state[32];
	if (sscanf(value, "%llu %31s %d %d %llu %llu %llu %lld %llu %n", &id, state, &durable,
		   &pinned, &step, &files, &logical, &committed, &series, &name_at) != 9 ||
	    !name_at || admin_sh_state(state) < 0)
		return;
	e.g.id = id;
	e.g.state = admin_sh_state(state);
	e.durable = durable;
	e.g.pinned = pinned;
	e.g.step = step;
	e.g.files = files;
	e.g.logical_bytes = logical;
	e.g.committed_ns = committed;
	e.g.series = series;
	snprintf(e.g.name, sizeof(e.g.name), "%s", value + name_at);
	struct admin_sh_gen *v = admin_sh_room(ans, ans->v, ans->n, &ans->cap, sizeof(*v));
	if (!v)
		return;
	ans->v = v;
	ans->v[ans->n++] = e;
}

/* "ID EXTENTS CHUNKS UNIQUE_BYTES ALONE_CHUNKS ALONE_BYTES ALONE_STORED" */
static void admin_sh_usage(struct admin_sh_answer *ans, const char *value)
{
	unsigned long long v[6];
	struct admin_sh_gen *e = admin_sh_find(ans, value);
	const char *rest = strchr(value, ' ');
	if (!e || !rest ||
	    sscanf(rest, "%llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) !=
		    6)
		return;
	e->u = (struct aq_gen_usage){ v[0], v[1], v[2], v[3], v[4], v[5] };
	e->has_usage = true;
}

/* "ID VERSION CREATED_NS ENDED_NS" */
static void admin_sh_times(struct admin_sh_answer *ans, const char *value)
{
	unsigned long long id;
	unsigned version;
	long long created, ended;
	struct admin_sh_gen *e = admin_sh_find(ans, value);
	if (!e || sscanf(value, "%llu %u %lld %lld", &id, &version, &created, &ended) != 4)
		return;
	e->g.version = version;
	e->g.created_ns = created;
	e->g.ended_ns = ended;
}

/* The daemon's %XX-escaped name as a malloc'd string: decoded, or as it
 * came if it does not decode (the daemon never sends such a name). */
static char *admin_sh_unescape(const char *s)
{
	char *out = strdup(s);
	if (out && control_proto_unescape(out) != 0)
		strcpy(out, s);
	return out;
}

/* "SIZE EXTENTS CHUNKS PATH" */
static void admin_sh_file(struct admin_sh_answer *ans, const char *value)
{
	unsigned long long size, extents, chunks;
	int at = 0;
	struct admin_show *s = &ans->show;
	if (sscanf(value, "%llu %llu %llu %n", &size, &extents, &chunks, &at) != 3 || !at)
		return;
	struct admin_show_file *v = admin_sh_room(ans, s->files, s->nfiles, &ans->fcap, sizeof(*v));
	if (!v)
		return;
	s->files = v;
	char *path = admin_sh_unescape(value + at);
	if (!path) {
		ans->err = -ENOMEM;
		return;
	}
	s->files[s->nfiles++] = (struct admin_show_file){ size, extents, chunks, path };
}

/* "ID CHUNKS BYTES LABEL" (LABEL "" for files outside generations) */
static void admin_sh_share(struct admin_sh_answer *ans, const char *value)
{
	unsigned long long id, chunks, bytes;
	int at = 0;
	struct admin_show *s = &ans->show;
	if (sscanf(value, "%llu %llu %llu%n", &id, &chunks, &bytes, &at) != 3 || !at)
		return;
	struct admin_show_share *v = admin_sh_room(ans, s->shares, s->nshares, &ans->scap2,
						   sizeof(*v));
	if (!v)
		return;
	s->shares = v;
	const char *label = value[at] == ' ' ? value + at + 1 : "";
	char *l = label[0] ? admin_sh_unescape(label) : NULL;
	if (label[0] && !l) {
		ans->err = -ENOMEM;
		return;
	}
	s->shares[s->nshares++] = (struct admin_show_share){ id, chunks, bytes, l };
}

static void admin_sh_data(void *arg, const char *key, const char *value)
{
	struct admin_sh_answer *ans = arg;
	struct admin_sh_gen *e;
	const char *rest = strchr(value, ' ');
	if (strcmp(key, "series") == 0)
		admin_sh_series_add(ans, value);
	else if (strcmp(key, "generation") == 0)
		admin_sh_gen_add(ans, value);
	else if (strcmp(key, "rule") == 0 && rest && (e = admin_sh_find(ans, value)) != NULL)
		snprintf(e->g.rule, sizeof(e->g.rule), "%s", rest + 1);
	else if (strcmp(key, "held") == 0 && rest && (e = admin_sh_find(ans, value)) != NULL)
		snprintf(e->g.held, sizeof(e->g.held), "%s", rest + 1);
	else if (strcmp(key, "usage") == 0)
		admin_sh_usage(ans, value);
	else if (strcmp(key, "times") == 0)
		admin_sh_times(ans, value);
	else if (strcmp(key, "file") == 0)
		admin_sh_file(ans, value);
	else if (strcmp(key, "share") == 0)
		admin_sh_share(ans, value);
}

static const char *admin_sh_path(const struct admin_sh_answer *ans, uint64_t series)
{
	for (size_t i = 0; i < ans->ns; i++)
		if (ans->s[i].ino == series)
			return ans->s[i].path;
	return "/?";
}

/* One request whose answer is generation lines; 0, or the exit code (the
 * error printed, prefixed by what). */
static int admin_sh_ask(struct admin *a, const char *what, const char *req,
			struct admin_sh_answer *ans)
{
	char msg[512] = "";
	int rc = admin_ctl(a, req, admin_sh_data, ans, msg, sizeof(msg));
	if (rc == 0 && ans->err)
		rc = ans->err;
	if (rc == 0)
		return ADMIN_OK;
	if (rc == ENOENT) {
		admin_err("%s: no such generation in %s (see ckptfs-admin list)", what, a->mount);
		return ADMIN_NO_GEN;
	}
	admin_err("%s: %s", what, rc > 0 ? msg : strerror(-rc));
	return rc < 0 && rc != -ENOMEM ? ADMIN_NO_DAEMON : admin_exit_for(rc);
}

/* A series path from the daemon ("/run1", "/" the root) or a generation's
 * name (one part) that stays under the mount: no empty, "." or ".." part.
 * What the tool builds from them is a path (export's source in the mount
 * and its target in DIR): a server on the control channel must not steer
 * it outside (admin_ctl.c 2). */
static bool admin_sh_inside(const char *p, bool one_part)
{
	if (!one_part && *p++ != '/')
		return false;
	if (!one_part && !*p)
		return true;
	for (;;) {
		size_t len = strcspn(p, "/");
		if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!p[len])
			return true;
		if (one_part)
			return false;
		p += len + 1;
	}
}

int admin_shared_resolve(struct admin *a, const char *spec, const char *rel, struct cat_gen *out)
{
	char req[PATH_MAX * 3 + 16], esc[PATH_MAX * 3];
	control_proto_escape(rel ? rel : spec, false, esc, sizeof(esc));
	snprintf(req, sizeof(req), "gen %s", esc);
	struct admin_sh_answer ans = { 0 };
	char what[PATH_MAX + 8];
	snprintf(what, sizeof(what), "GEN '%s'", spec);
	int rc = admin_sh_ask(a, what, req, &ans);
	if (rc == ADMIN_OK && ans.n != 1) {
		admin_err("%s: the daemon's answer names no generation", what);
		rc = ADMIN_PROBLEM;
	}
	const char *series = rc == ADMIN_OK ? admin_sh_path(&ans, ans.v[0].g.series) : "";
	if (rc == ADMIN_OK && (!admin_sh_inside(series, false) ||
			       !admin_sh_inside(ans.v[0].g.name, true))) {
		admin_err("%s: control channel %s: the answer names generation '%s' of series '%s', "
			  "a path outside the mount: not trusted", what, a->sock, ans.v[0].g.name,
			  series);
		rc = ADMIN_PERM;
	}
	if (rc == ADMIN_OK) {
		*out = ans.v[0].g;
		a->sh_series = out->series;
		snprintf(a->sh_series_path, sizeof(a->sh_series_path), "%s",
			 admin_sh_path(&ans, out->series));
	}
	admin_sh_free(&ans);
	return rc;
}

/* ---- list and show ---- */

static const char *admin_sh_state_of(const struct admin_sh_gen *e)
{
	return e->g.state == GEN_COMMITTED && e->durable ? "durable"
							 : cat_gen_state_name(e->g.state);
}

/* As admin_cmd_list, from the daemon, which adds each generation's usage
 * (ALONE, DEDUP) from the shared catalog (a daemon that sends none: "-",
 * and no usage fields in --json). */
int admin_shared_list(struct admin *a, const char *series_rel)
{
	char req[PATH_MAX * 3 + 32], esc[PATH_MAX * 3];
	control_proto_escape(series_rel ? series_rel : "", false, esc, sizeof(esc));
	snprintf(req, sizeof(req), "list %s%s%s", a->all ? "all" : "live", series_rel ? " " : "",
		 esc);
	struct admin_sh_answer ans = { 0 };
	int rc = admin_sh_ask(a, series_rel ? "list SERIES" : "list", req, &ans);
	if (rc != ADMIN_OK) {
		admin_sh_free(&ans);
		return rc;
	}
	if (a->json)
		printf("[");
	else
		admin_list_header();
	size_t shown = 0;
	for (size_t i = 0; i < ans.n; i++) {
		const struct admin_sh_gen *e = &ans.v[i];
		if (e->g.state == GEN_HELD && !a->all)
			continue; /* held: not shown, like in directory listings (list --all) */
		const char *series = admin_sh_path(&ans, e->g.series);
		const struct aq_gen_usage *u = e->has_usage ? &e->u : NULL;
		if (a->json) {
			printf("%s\n  ", shown++ ? "," : "");
			admin_json_gen_obj(series + 1, &e->g, admin_sh_state_of(e), e->durable, u);
			continue;
		}
		admin_list_row(series, &e->g, admin_sh_state_of(e), u);
	}
	if (a->json)
		printf("%s]\n", shown ? "\n" : "");
	admin_sh_free(&ans);
	return ADMIN_OK;
}

/* As admin_cmd_show, from the daemon (control verb `show`). */
int admin_shared_show(struct admin *a, const struct cat_gen *g)
{
	char req[64];
	snprintf(req, sizeof(req), "show %" PRIu64, g->id);
	struct admin_sh_answer ans = { 0 };
	int rc = admin_sh_ask(a, "show", req, &ans);
	struct admin_sh_gen *e = rc == ADMIN_OK ? admin_sh_find(&ans, req + 5) : NULL;
	if (rc == ADMIN_OK && (!e || !e->has_usage)) {
		admin_err("show: the daemon's answer has no generation %" PRIu64 " with its usage"
			  " (a daemon older than this tool?)", g->id);
		rc = ADMIN_PROBLEM;
	}
	if (rc == ADMIN_OK) {
		char label[PATH_MAX + CAT_NAME_MAX + 2];
		const char *series = admin_sh_path(&ans, e->g.series);
		snprintf(label, sizeof(label), "%s%s%s", series + 1, series[1] ? "/" : "", e->g.name);
		ans.show.g = &e->g;
		ans.show.state = admin_sh_state_of(e);
		ans.show.durable = e->durable;
		ans.show.label = label;
		ans.show.series = series + 1;
		ans.show.u = &e->u;
		admin_show_print(a, &ans.show);
	}
	admin_sh_free(&ans);
	return rc;
}
