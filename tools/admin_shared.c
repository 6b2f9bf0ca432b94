/* admin_shared — naming and listing generations on a node of a shared
 * catalog (-o meta=, docs/MULTINODE.md).
 *
 * There the node's local catalog file holds no generations: they are in
 * PostgreSQL, which only the daemon reaches. So GEN is resolved, and list
 * answered, by the daemon (control verbs `gen` and `list`,
 * fs/lib/control_proto.h), and commit, pin, unpin and rm then send the id to
 * it as they do on a single node: the daemon runs the same catalog calls
 * (fs/gen.c), fenced by its lease. Without a daemon nothing here applies: a
 * shared catalog is never changed offline. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"

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
	int err; /* -ENOMEM once a line could not be kept */
};

static void admin_sh_free(struct admin_sh_answer *ans)
{
	for (size_t i = 0; i < ans->ns; i++)
		free(ans->s[i].path);
	free(ans->s);
	free(ans->v);
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

static void admin_sh_series_add(struct admin_sh_answer *ans, const char *value)
{
	char *end;
	unsigned long long ino = strtoull(value, &end, 10);
	if (*end != ' ')
		return;
	if (ans->ns == ans->scap) {
		size_t cap = ans->scap ? ans->scap * 2 : 8;
		struct admin_sh_series *s = realloc(ans->s, cap * sizeof(*s));
		if (!s) {
			ans->err = -ENOMEM;
			return;
		}
		ans->s = s;
		ans->scap = cap;
	}
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
	if (ans->n == ans->cap) {
		size_t cap = ans->cap ? ans->cap * 2 : 16;
		struct admin_sh_gen *v = realloc(ans->v, cap * sizeof(*v));
		if (!v) {
			ans->err = -ENOMEM;
			return;
		}
		ans->v = v;
		ans->cap = cap;
	}
	ans->v[ans->n++] = e;
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
}

static const char *admin_sh_path(const struct admin_sh_answer *ans, uint64_t series)
{
	for (size_t i = 0; i < ans->ns; i++)
		if (ans->s[i].ino == series)
			return ans->s[i].path;
	return "/?";
}

/* rel with the bytes the request line would split or end at as %XX. */
static void admin_sh_escape(const char *rel, char *out, size_t size)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)rel; *p && n + 4 < size; p++) {
		if (*p <= ' ' || *p == '%' || *p == 0x7f)
			n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
		else
			out[n++] = (char)*p;
	}
	out[n] = '\0';
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

int admin_shared_resolve(struct admin *a, const char *spec, const char *rel, struct cat_gen *out)
{
	char req[PATH_MAX * 3 + 16], esc[PATH_MAX * 3];
	admin_sh_escape(rel ? rel : spec, esc, sizeof(esc));
	snprintf(req, sizeof(req), "gen %s", esc);
	struct admin_sh_answer ans = { 0 };
	char what[PATH_MAX + 8];
	snprintf(what, sizeof(what), "GEN '%s'", spec);
	int rc = admin_sh_ask(a, what, req, &ans);
	if (rc == ADMIN_OK && ans.n != 1) {
		admin_err("%s: the daemon's answer names no generation", what);
		rc = ADMIN_PROBLEM;
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

/* ---- list ---- */

static void admin_sh_json(const struct admin_sh_answer *ans, const struct admin_sh_gen *e)
{
	const struct cat_gen *g = &e->g;
	const char *state = g->state == GEN_COMMITTED && e->durable ? "durable"
								    : cat_gen_state_name(g->state);
	printf("{\"id\": %" PRIu64 ", \"series\": ", g->id);
	admin_json_str(stdout, admin_sh_path(ans, g->series) + 1);
	printf(", \"name\": ");
	admin_json_str(stdout, g->name);
	printf(", \"step\": %" PRIu64 ", \"state\": \"%s\", \"durable\": %s, \"pinned\": %s"
	       ", \"files\": %" PRIu64 ", \"logical_bytes\": %" PRIu64 ", \"committed_ns\": %" PRId64
	       ", \"committed\": ",
	       g->step, state, e->durable ? "true" : "false", g->pinned ? "true" : "false", g->files,
	       g->logical_bytes, g->committed_ns);
	admin_json_gen_end(g);
}

/* As admin_cmd_list, from the daemon: the columns that need the chunk
 * tables of the local catalog (ALONE, DEDUP) are "-" (not in --json). */
int admin_shared_list(struct admin *a, const char *series_rel)
{
	char req[PATH_MAX * 3 + 32], esc[PATH_MAX * 3];
	admin_sh_escape(series_rel ? series_rel : "", esc, sizeof(esc));
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
		printf("%-20s %-24s %8s %-9s %3s %6s %10s %10s %6s %-19s %s\n", "SERIES", "NAME", "STEP",
		       "STATE", "PIN", "FILES", "LOGICAL", "ALONE", "DEDUP", "COMMITTED", "RULE");
	size_t shown = 0;
	for (size_t i = 0; i < ans.n; i++) {
		const struct cat_gen *g = &ans.v[i].g;
		if (g->state == GEN_HELD && !a->all)
			continue; /* held: not shown, like in directory listings (list --all) */
		if (a->json) {
			printf("%s\n  ", shown++ ? "," : "");
			admin_sh_json(&ans, &ans.v[i]);
			continue;
		}
		const char *series = admin_sh_path(&ans, g->series);
		char s1[32], t[32];
		printf("%-20s %-24s %8" PRIu64 " %-9s %3s %6" PRIu64 " %10s %10s %6s %-19s %s%s%s\n",
		       series[1] ? series + 1 : "/", g->name, g->step,
		       g->state == GEN_COMMITTED && ans.v[i].durable ? "durable"
								 : cat_gen_state_name(g->state),
		       g->pinned ? "yes" : "-", g->files, admin_size(g->logical_bytes, s1), "-", "-",
		       admin_time(g->committed_ns, t), g->rule[0] ? g->rule : "-",
		       g->state == GEN_HELD ? ": " : "", g->state == GEN_HELD ? g->held : "");
	}
	if (a->json)
		printf("%s]\n", shown ? "\n" : "");
	admin_sh_free(&ans);
	return ADMIN_OK;
}
