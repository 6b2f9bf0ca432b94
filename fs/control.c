/* control — the daemon's control channel (protocol and rules in control.h).
 *
 * One thread: poll on the listening socket and a stop pipe, accept, check the
 * peer, read one request line, run it through the module that owns the
 * change (gen.c, the catalog, the store), write the answer, close. Requests
 * are served one at a time; a slow client is cut off by a receive timeout. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin_query.h"
#include "backing.h"
#include "cache.h"
#include "cachedir.h"
#include "catalog_shared_admin.h"
#include "control.h"
#include "generation.h"
#include "log.h"
#include "pg.h"
#include "upload.h"
#include "reader.h"
#include "recent.h"
#include "statset.h"
#include "storesmall.h"
#include "uploader.h"

#define CONTROL_RECV_TIMEOUT_S 5
#define CONTROL_MAX_ARGS 8

struct control {
	struct control_deps d;
	struct aq *aq;
	int listen_fd;
	int stop_pipe[2];
	pthread_t thread;
	uint64_t cache_bound, dirty_bound; /* in force (control_note_bounds) */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* ---- answering ---- */

static void control_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void control_send(int fd, const char *fmt, ...)
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

static int control_error(int fd, int err, const char *what)
{
	control_send(fd, "error %d %s", err, what);
	return err;
}

static void control_progress(void *arg, uint64_t done, uint64_t total)
{
	control_send(*(int *)arg, "progress %" PRIu64 " %" PRIu64, done, total);
}

/* ---- verbs ---- */

static int control_parse_id(const char *s, uint64_t *id)
{
	char *end;
	errno = 0;
	unsigned long long v = s ? strtoull(s, &end, 10) : 0;
	if (!s || errno || end == s || *end || v == 0)
		return -EINVAL;
	*id = v;
	return 0;
}

/* A generation that is OPEN, HELD or COMMITTED (the ones a verb may change). */
static int control_live_gen(struct control *c, int fd, const char *arg, struct cat_gen *gen)
{
	uint64_t id;
	if (control_parse_id(arg, &id) != 0)
		return control_error(fd, EINVAL, "expected a generation id");
	int rc = cat_gen_get_brief(c->d.cat, id, gen);
	if (rc == -ENOENT || (rc == 0 && gen->state != GEN_OPEN && gen->state != GEN_COMMITTED &&
			      gen->state != GEN_HELD))
		return control_error(fd, ENOENT, "no such live generation");
	if (rc != 0)
		return control_error(fd, -rc, "catalog error");
	return 0;
}

struct control_gen_list {
	struct control *c;
	int fd;
};

static void control_hello(struct control *c, int fd)
{
	control_send(fd, "data pid %ld", (long)getpid());
	control_send(fd, "data uid %ld", (long)getuid());
	control_send(fd, "data mountpoint %s", c->d.mountpoint);
	control_send(fd, "data cache %s", c->d.cache_dir);
	control_send(fd, "data backing %s", c->d.backing_spec);
	control_send(fd, "data gen_pattern %s", c->d.gen_pattern);
	control_send(fd, "data protocol 1");
	if (cat_is_shared(c->d.cat))
		control_send(fd, "data shared 1");
	control_send(fd, "ok");
}

/* One generation's state and durability, as the daemon's catalog sees
 * them (PostgreSQL's in shared mode): "data gen ID STATE DURABLE NAME";
 * with bytes, also "data bytes ID TOTAL LEFT" (cat_gen_upload_bytes: wait's
 * progress in bytes). */
static int control_gen_line(struct control *c, int fd, const struct cat_gen *g, bool bytes)
{
	bool durable = false;
	uint64_t total = 0, left = 0;
	int rc = g->state == GEN_COMMITTED ? cat_gen_durable(c->d.cat, g->id, &durable) : 0;
	if (rc == 0 && bytes)
		rc = cat_gen_upload_bytes(c->d.cat, g->id, &total, &left);
	if (rc == 0 && bytes)
		control_send(fd, "data bytes %" PRIu64 " %" PRIu64 " %" PRIu64, g->id, total,
			     durable ? 0 : left);
	if (rc == 0)
		control_send(fd, "data gen %" PRIu64 " %s %d %s", g->id, cat_gen_state_name(g->state),
			     durable ? 1 : 0, g->name);
	return rc;
}

static int control_gen_line_cb(void *arg, const struct cat_gen *g)
{
	struct control_gen_list *l = arg;
	int rc = control_gen_line(l->c, l->fd, g, false);
	return rc < 0 ? rc : 0;
}

/* durable [GEN_ID]: for ckptfs-admin wait on a node of a shared catalog,
 * whose local catalog file holds no generations. */
static void control_durable(struct control *c, int fd, char **argv, int argc)
{
	int rc;
	if (argc > 1) {
		struct cat_gen gen;
		if (control_live_gen(c, fd, argv[1], &gen) != 0)
			return;
		if (gen.state == GEN_HELD)
			control_send(fd, "data held %s", gen.held);
		rc = control_gen_line(c, fd, &gen, true);
	} else {
		struct control_gen_list l = { c, fd };
		rc = cat_gen_list_brief(c->d.cat, 0, false, control_gen_line_cb, &l);
	}
	if (rc != 0)
		control_error(fd, -rc, "catalog error");
	else
		control_send(fd, "ok");
}

/* ---- naming generations for ckptfs-admin on a node of a shared catalog,
 * whose local catalog file holds no generations (gen, list) ---- */

/* The inode that rel (names relative to the root, '/' between) names. */
static int control_walk(struct control *c, char *rel, uint64_t *ino)
{
	uint64_t at = CAT_ROOT_INO;
	char *save = NULL;
	for (char *t = strtok_r(rel, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		struct cat_inode in;
		if (strcmp(t, ".") == 0 || strcmp(t, "..") == 0)
			return -EINVAL; /* a name never leaves the mount */
		int rc = cat_lookup(c->d.cat, at, t, &in);
		if (rc != 0)
			return rc;
		at = in.ino;
	}
	*ino = at;
	return 0;
}

/* One generation as ckptfs-admin lists it:
 *   data series INO PATH        (when it differs from the last one sent)
 *   data generation ID STATE DURABLE PINNED STEP FILES LOGICAL COMMITTED_NS SERIES NAME
 *   data rule ID RULE           (when it has one)
 *   data held ID REASON         (HELD)
 *   data times ID VERSION CREATED_NS ENDED_NS */
struct control_describe {
	struct control *c;
	int fd;
	uint64_t last_series;
	struct cat_id_vec ids; /* the generations described, for their usage (list) */
	int err;               /* -ENOMEM once an id could not be kept */
};

static int control_describe_gen(void *arg, const struct cat_gen *g)
{
	struct control_describe *d = arg;
	char path[PATH_MAX];
	bool durable = false;
	if (g->series != d->last_series) {
		if (cat_shared_path(d->c->d.cat, g->series, path, sizeof(path)) != 0)
			snprintf(path, sizeof(path), "/?"); /* a series since unlinked */
		control_send(d->fd, "data series %" PRIu64 " %s", g->series, path);
		d->last_series = g->series;
	}
	int rc = g->state == GEN_COMMITTED ? cat_gen_durable(d->c->d.cat, g->id, &durable) : 0;
	if (rc != 0)
		return rc;
	control_send(d->fd, "data generation %" PRIu64 " %s %d %d %" PRIu64 " %" PRIu64 " %" PRIu64
		     " %" PRId64 " %" PRIu64 " %s", g->id, cat_gen_state_name(g->state),
		     durable ? 1 : 0, g->pinned ? 1 : 0, g->step, g->files, g->logical_bytes,
		     g->committed_ns, g->series, g->name);
	if (g->rule[0])
		control_send(d->fd, "data rule %" PRIu64 " %s", g->id, g->rule);
	if (g->state == GEN_HELD)
		control_send(d->fd, "data held %" PRIu64 " %s", g->id, g->held);
	control_send(d->fd, "data times %" PRIu64 " %u %" PRId64 " %" PRId64, g->id, g->version,
		     g->created_ns, g->ended_ns);
	if (cat_id_vec_push(&d->ids, g->id) != 0)
		d->err = -ENOMEM;
	return 0;
}

/* ---- what generations hold, for list and show (catalog_shared_admin.h) ---- */

static void control_usage_line(int fd, uint64_t id, const struct aq_gen_usage *u)
{
	control_send(fd, "data usage %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		     " %" PRIu64 " %" PRIu64, id, u->extents, u->chunks, u->unique_bytes,
		     u->exclusive_chunks, u->exclusive_bytes, u->exclusive_stored);
}

struct control_usages {
	int fd;
	const uint64_t *ids; /* those described, in order */
	size_t n, next;
};

/* The rows come ordered by id and control_send_usage sorted the ids: the
 * two are merged, so every described generation gets one line, zeros for
 * one that names no chunk (it has no row). */
static int control_usage_cb(void *arg, uint64_t gen_id, const struct aq_gen_usage *u)
{
	struct control_usages *us = arg;
	static const struct aq_gen_usage zero;
	for (; us->next < us->n && us->ids[us->next] < gen_id; us->next++)
		control_usage_line(us->fd, us->ids[us->next], &zero);
	if (us->next < us->n && us->ids[us->next] == gen_id)
		control_usage_line(us->fd, us->ids[us->next++], u);
	return 0;
}

static int control_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* "data usage ID EXTENTS CHUNKS UNIQUE_BYTES ALONE_CHUNKS ALONE_BYTES
 * ALONE_STORED" for every generation d described, in one statement. */
static int control_send_usage(struct control_describe *d)
{
	if (d->err)
		return d->err;
	qsort(d->ids.v, d->ids.n, sizeof(*d->ids.v), control_u64_cmp);
	struct control_usages us = { d->fd, d->ids.v, d->ids.n, 0 };
	int rc = cat_shared_gen_usage(d->c->d.cat, d->ids.v, d->ids.n, control_usage_cb, &us);
	if (rc == 0)
		control_usage_cb(&us, UINT64_MAX, NULL); /* the ones after the last row */
	return rc;
}

struct control_show {
	int fd;
	char root[PATH_MAX]; /* the generation root's path from the mount's root */
};

static int control_show_file(void *arg, const struct aq_file *f, const char *relpath)
{
	struct control_show *sh = arg;
	char path[PATH_MAX * 2], esc[CONTROL_LINE_MAX];
	snprintf(path, sizeof(path), "%s%s", sh->root, relpath);
	control_proto_escape(path, true, esc, sizeof(esc));
	control_send(sh->fd, "data file %" PRIu64 " %" PRIu64 " %" PRIu64 " %s", f->size,
		     f->extents, f->chunks, esc);
	return 0;
}

/* "series/name" of generation id, as ckptfs-admin labels one ("" if gone). */
static void control_gen_label(struct control *c, uint64_t id, char *buf, size_t size)
{
	struct cat_gen o;
	char series[PATH_MAX];
	buf[0] = '\0';
	if (id == 0 || cat_gen_get(c->d.cat, id, &o) != 0)
		return;
	if (cat_shared_path(c->d.cat, o.series, series, sizeof(series)) != 0)
		snprintf(series, sizeof(series), "/?");
	snprintf(buf, size, "%s%s%s", series + 1, series[1] ? "/" : "", o.name);
}

/* show GEN_ID: the generation's lines as gen answers them, its usage, then
 *   data file SIZE EXTENTS CHUNKS PATH      (each regular file, by inode)
 *   data share ID CHUNKS BYTES LABEL        (each other generation naming
 *                                            some of its chunks; ID 0: files
 *                                            outside generations, LABEL "")
 * PATH and LABEL %XX-escaped (control_proto_escape, spaces kept). Shared catalogs only. */
static void control_show(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen g;
	uint64_t id;
	if (!cat_is_shared(c->d.cat)) {
		control_error(fd, ENOSYS, "not a node of a shared catalog: read the catalog file");
		return;
	}
	if (argc != 2 || control_parse_id(argv[1], &id) != 0) {
		control_error(fd, EINVAL, "expected show GEN_ID");
		return;
	}
	int rc = cat_gen_get(c->d.cat, id, &g);
	if (rc == -ENOENT) {
		control_error(fd, ENOENT, "no such generation");
		return;
	}
	struct control_describe d = { .c = c, .fd = fd };
	struct control_show sh = { fd, "" };
	struct aq_share *shares = NULL;
	size_t nshares = 0;
	if (rc == 0)
		rc = control_describe_gen(&d, &g);
	if (rc == 0)
		rc = control_send_usage(&d);
	if (rc == 0 && cat_shared_path(c->d.cat, g.series, sh.root, sizeof(sh.root)) != 0)
		snprintf(sh.root, sizeof(sh.root), "/?");
	if (rc == 0) {
		size_t len = strlen(sh.root);
		snprintf(sh.root + len, sizeof(sh.root) - len, "%s%s", len > 1 ? "/" : "", g.name);
		rc = cat_shared_gen_files(c->d.cat, g.id, control_show_file, &sh);
	}
	if (rc == 0)
		rc = cat_shared_gen_shares(c->d.cat, g.id, &shares, &nshares);
	for (size_t i = 0; rc == 0 && i < nshares; i++) {
		char label[PATH_MAX + CAT_NAME_MAX + 2], esc[CONTROL_LINE_MAX];
		control_gen_label(c, shares[i].gen_id, label, sizeof(label));
		control_proto_escape(label, true, esc, sizeof(esc));
		control_send(fd, "data share %" PRIu64 " %" PRIu64 " %" PRIu64 " %s", shares[i].gen_id,
			     shares[i].chunks, shares[i].bytes, esc);
	}
	free(shares);
	cat_id_vec_free(&d.ids);
	if (rc != 0)
		control_error(fd, -rc, "catalog error");
	else
		control_send(fd, "ok");
}

/* gen id:N | gen PATH (escaped): the generation, in any state, that PATH or
 * a file inside it names. Shared catalogs only: alone, the tool reads the
 * catalog file. */
static void control_gen(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen g;
	uint64_t id = 0, ino;
	int rc;
	if (!cat_is_shared(c->d.cat)) {
		control_error(fd, ENOSYS, "not a node of a shared catalog: read the catalog file");
		return;
	}
	if (argc != 2 || control_proto_unescape(argv[1]) != 0) {
		control_error(fd, EINVAL, "expected gen id:N or gen PATH");
		return;
	}
	if (strncmp(argv[1], "id:", 3) == 0)
		rc = control_parse_id(argv[1] + 3, &id);
	else if ((rc = control_walk(c, argv[1], &ino)) == 0)
		rc = cat_gen_of(c->d.cat, ino, &id);
	if (rc == 0 && id == 0)
		rc = -ENOENT;
	if (rc == 0)
		rc = cat_gen_get(c->d.cat, id, &g);
	if (rc == -ENOENT || rc == -ENOTDIR) {
		control_error(fd, ENOENT, "no such generation");
		return;
	}
	struct control_describe d = { .c = c, .fd = fd };
	if (rc == 0)
		rc = control_describe_gen(&d, &g);
	cat_id_vec_free(&d.ids);
	if (rc != 0)
		control_error(fd, -rc, "catalog error");
	else
		control_send(fd, "ok");
}

/* list live|all [SERIES (escaped)]: as cat_gen_list, every series or one,
 * then the usage of every generation listed ("data usage", control_show). */
static void control_list(struct control *c, int fd, char **argv, int argc)
{
	uint64_t series = 0;
	int rc = 0;
	if (!cat_is_shared(c->d.cat)) {
		control_error(fd, ENOSYS, "not a node of a shared catalog: read the catalog file");
		return;
	}
	bool all = argc > 1 && strcmp(argv[1], "all") == 0;
	if (argc < 2 || argc > 3 || (!all && strcmp(argv[1], "live") != 0) ||
	    (argc == 3 && control_proto_unescape(argv[2]) != 0)) {
		control_error(fd, EINVAL, "expected list live|all [SERIES]");
		return;
	}
	if (argc == 3 && (rc = control_walk(c, argv[2], &series)) != 0) {
		control_error(fd, rc == -ENOTDIR ? ENOENT : -rc, "no such series directory");
		return;
	}
	struct control_describe d = { .c = c, .fd = fd };
	rc = cat_gen_list(c->d.cat, series, all, control_describe_gen, &d);
	if (rc == 0)
		rc = control_send_usage(&d); /* one statement for the whole list */
	cat_id_vec_free(&d.ids);
	if (rc != 0)
		control_error(fd, -rc, "catalog error");
	else
		control_send(fd, "ok");
}

/* check: the daemon's catalog's invariants (cat_check: on a node of a
 * shared catalog, PostgreSQL's N1, N2 and generations' and this node's
 * cache rows), each violation a line of the daemon's log. Shared catalogs
 * only: alone, the tool checks the catalog file itself. */
static void control_check(struct control *c, int fd)
{
	if (!cat_is_shared(c->d.cat)) {
		control_error(fd, ENOSYS, "not a node of a shared catalog: check the catalog file");
		return;
	}
	int rc = cat_check(c->d.cat);
	if (rc == -EUCLEAN)
		control_error(fd, EUCLEAN, "the shared catalog has problems: each is a line of the"
			      " daemon's log");
	else if (rc != 0)
		control_error(fd, -rc, "the check could not run (see the daemon's log)");
	else
		control_send(fd, "ok");
}

/* A change the catalog refused, named for the admin (control_proto.h). */
static void control_change_error(int fd, int rc, const char *verb)
{
	char what[160];
	if (rc == -ESTALE)
		rc = -EROFS; /* the catalog's word for a swept lease (L2): the mount is read-only */
	if (rc == -EROFS)
		snprintf(what, sizeof(what), "%s refused: this node is fenced (another node swept its"
			 " lease): read-only until it is mounted again", verb);
	else if (rc == -EBUSY)
		snprintf(what, sizeof(what), "%s refused: busy (files of it are open for writing, or"
			 " it is pinned)", verb);
	else if (rc == -ENOENT)
		snprintf(what, sizeof(what), "%s: no such generation (it ended meanwhile)", verb);
	else if (rc == -ENODATA)
		snprintf(what, sizeof(what), "%s refused: it is lost (chunks of it died with their"
			 " node)", verb);
	else
		snprintf(what, sizeof(what), "%s failed (see the daemon's log)", verb);
	control_error(fd, -rc, what);
}

static void control_commit(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen gen;
	if (control_live_gen(c, fd, argc > 1 ? argv[1] : NULL, &gen) != 0)
		return;
	if (!c->d.gen_commit) {
		control_error(fd, ENOSYS, "commit is not available in this daemon");
		return;
	}
	int rc = c->d.gen_commit(c->d.gen, gen.id, "admin");
	if (rc != 0) {
		control_change_error(fd, rc, "commit");
		return;
	}
	/* a commit waits for write handles still open in the generation */
	if (cat_gen_get_brief(c->d.cat, gen.id, &gen) == 0)
		control_send(fd, "data state %s", cat_gen_state_name(gen.state));
	control_send(fd, "ok");
}

static void control_pin(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen gen;
	if (control_live_gen(c, fd, argc > 1 ? argv[1] : NULL, &gen) != 0)
		return;
	if (argc < 3 || (strcmp(argv[2], "0") != 0 && strcmp(argv[2], "1") != 0)) {
		control_error(fd, EINVAL, "expected pin GEN_ID 0|1");
		return;
	}
	if (!c->d.gen_pin) {
		control_error(fd, ENOSYS, "pin is not available in this daemon");
		return;
	}
	int rc = c->d.gen_pin(c->d.gen, gen.id, argv[2][0] == '1');
	if (rc != 0) {
		control_change_error(fd, rc, "pin");
		return;
	}
	control_send(fd, "data pinned %c", argv[2][0]);
	control_send(fd, "ok");
}

static void control_rm(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen gen;
	if (control_live_gen(c, fd, argc > 1 ? argv[1] : NULL, &gen) != 0)
		return;
	bool force = argc > 2 && strcmp(argv[2], "force") == 0;
	if (gen.state == GEN_OPEN && !force) {
		control_error(fd, EBUSY, "the generation is open (still being written): use --force");
		return;
	}
	if (!c->d.gen_remove) {
		control_error(fd, ENOSYS, "rm is not available in this daemon");
		return;
	}
	int rc = c->d.gen_remove(c->d.gen, gen.id, force);
	if (rc == 0 && cat_gen_get_brief(c->d.cat, gen.id, &gen) == 0 &&
	    (gen.state == GEN_OPEN || gen.state == GEN_COMMITTED || gen.state == GEN_HELD))
		rc = -EIO; /* gen_end logged why */
	if (rc != 0) {
		control_change_error(fd, rc, "rm");
		return;
	}
	control_send(fd, "data state %s", cat_gen_state_name(gen.state));
	control_send(fd, "ok");
}

static void control_flush_released(struct control *c)
{
	if (c->d.nodes_flush)
		c->d.nodes_flush(c->d.nodes);
}

/* The rows of the cache's small.db (none without one), walked as its files
 * are and added to the cache's counts in *r. */
static int control_gc_small(struct control *c, bool dry, int *fd, struct aq_gc_result *r)
{
	struct storesmall *ss;
	int rc = storesmall_open(c->d.cache_dir, false, &ss);
	if (rc != 0)
		return rc == -ENOENT ? 0 : rc;
	const struct aq_objects rows = aq_objects_small(ss);
	struct aq_gc_result rr;
	rc = aq_gc_walk(c->aq, &rows, dry, control_progress, fd, &rr);
	storesmall_close(ss);
	if (rc == 0)
		aq_gc_result_add(r, &rr);
	return rc;
}

/* gc dry|run: the cache's objects (files and small.db's rows), then
 * BACKING's. On a node of a shared catalog the local catalog names only
 * what this node holds: BACKING's objects are the cluster's, removed by its
 * reclaim duty alone (docs/MULTINODE.md "Reclaim"), so that side is left
 * (answered "data backing_skipped REASON"). */
static void control_gc(struct control *c, int fd, char **argv, int argc)
{
	bool dry = argc > 1 && strcmp(argv[1], "dry") == 0;
	if (argc < 2 || (!dry && strcmp(argv[1], "run") != 0)) {
		control_error(fd, EINVAL, "expected gc dry|run");
		return;
	}
	const struct aq_objects sides[2] = { aq_objects_dir(c->d.cache_dir),
					     aq_objects_backing(c->d.backing) };
	bool shared = cat_is_shared(c->d.cat);
	struct aq_gc_result r[2];
	memset(r, 0, sizeof(r));
	control_flush_released(c); /* objects of released inodes go now, not as orphans */
	for (int i = 0; i < (shared ? 1 : 2); i++) {
		int rc = aq_gc_walk(c->aq, &sides[i], dry, control_progress, &fd, &r[i]);
		if (rc == 0 && i == 0)
			rc = control_gc_small(c, dry, &fd, &r[0]);
		if (rc != 0) {
			control_error(fd, -rc, i ? "gc of BACKING stopped" : "gc of the cache stopped");
			return;
		}
		log_info("gc%s of the %s: %" PRIu64 " objects, %" PRIu64 " orphans (%" PRIu64
			 " bytes), %" PRIu64 " removed, %" PRIu64 " failed",
			 dry ? " (dry run)" : "", sides[i].where, r[i].objects, r[i].orphans,
			 r[i].orphan_bytes, r[i].removed, r[i].failed);
	}
	for (int i = 0; i < 2; i++)
		control_send(fd, "data %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			     " %" PRIu64, i ? "backing" : "cache", r[i].objects, r[i].orphans,
			     r[i].orphan_bytes, r[i].removed, r[i].freed_bytes, r[i].failed);
	if (shared)
		control_send(fd, "data backing_skipped a node of a shared catalog leaves BACKING's"
			     " objects to the cluster's reclaim duty");
	control_send(fd, "ok");
}

/* The cache's bounds in force, by cache_start's rule (cache.c): -o cache_size
 * (main.c resolves "what the disk holds" into it before cache_start), and -o
 * dirty_max, else 3/4 of the bound, never above it. */
static void control_note_bounds(struct control *c)
{
	uint64_t bound = c->d.cache_size ? c->d.cache_size : UINT64_MAX / 2;
	uint64_t dirty = c->d.dirty_max ? c->d.dirty_max : bound / 4 * 3;
	c->cache_bound = bound;
	c->dirty_bound = dirty < bound ? dirty : bound;
}

void control_stats_each(struct control *c, control_stat_fn fn, void *arg)
{
	const struct control_deps *d = &c->d;
	char v[32];
#define PUT(key, val)                                            \
	do {                                                     \
		snprintf(v, sizeof(v), "%" PRIu64, (uint64_t)(val)); \
		fn(arg, key, v);                                 \
	} while (0)
	if (d->reader) {
		struct reader_stats cs;
		reader_stats(d->reader, &cs);
		PUT("chunk_cache_bytes", cs.bytes);
		PUT("chunk_cache_budget", cs.budget);
		PUT("chunk_cache_hits", cs.hits);
		PUT("chunk_cache_misses", cs.misses);
	}
	struct recent_stats rs = { 0 };
	if (d->recent)
		recent_stats(d->recent, &rs);
	PUT("chunk_hashes_reused", rs.hits);
	PUT("chunk_hashes_computed", rs.misses);
	PUT("chunk_follows", rs.follows);
	PUT("chunk_follow_waits", rs.follow_waits);
	PUT("chunk_follow_takeovers", rs.takeovers);
	PUT("chunk_follow_wait_ms", rs.follow_wait_ns / 1000000);
	struct pg_stats ps; /* shared catalog only (-o meta=): the FUSE path's connection */
	if (d->cat && cat_pg_stats(d->cat, &ps)) {
		PUT("pg_round_trips", ps.round_trips);
		PUT("pg_transactions", ps.txns);
		PUT("pg_retries", ps.retries);
		PUT("pg_reconnects", ps.reconnects);
	}
	PUT("write_back", 1);
	PUT("cache_bound", c->cache_bound);
	PUT("dirty_bound", c->dirty_bound);
	if (d->cache && d->cache_stats) {
		struct cache_stats st;
		d->cache_stats(d->cache, &st);
		PUT("cache_hits", st.hits);
		PUT("cache_misses", st.misses);
		PUT("fetched_bytes", st.fetched_bytes);
		PUT("fetch_errors", st.fetch_errors);
		PUT("evicted_chunks", st.evicted_chunks);
		PUT("evicted_bytes", st.evicted_bytes);
		PUT("dirty_waits", st.dirty_waits);
	}
	if (d->uploader && d->uploader_stats) {
		struct uploader_stats us;
		d->uploader_stats(d->uploader, &us);
		PUT("uploaded_chunks", us.chunks);
		PUT("uploaded_bytes", us.chunk_bytes);
		PUT("uploaded_manifests", us.manifests);
		PUT("upload_failures", us.failures);
		PUT("backing_down", us.backing_down ? 1 : 0);
		if (us.last_error[0])
			fn(arg, "upload_last_error", us.last_error);
	}
#undef PUT
}

static void control_stat_send(void *arg, const char *key, const char *value)
{
	control_send(*(int *)arg, "data %s %s", key, value);
}

/* On a node of a shared catalog the tool's catalog file holds no namespace
 * and no generations: the daemon sends the counts of its catalog
 * (PostgreSQL's) that are the catalog's, SS_INODES to SS_GEN_HELD, which
 * replace the tool's (statset_put). The cache's and upload queue's stay the
 * tool's reading of the local file, which is where they are. */
static void control_stats_shared(struct control *c, int fd)
{
	struct statset ss;
	memset(&ss, 0, sizeof(ss));
	if (statset_from_catalog(&ss, c->d.cat) != 0)
		return; /* logged by the catalog; the tool keeps its own figures */
	for (int k = SS_INODES; k <= SS_GEN_HELD; k++)
		if (ss.have[k] && statset_desc[k].kind != STATSET_RATIO)
			control_send(fd, "data %s %" PRIu64, statset_desc[k].key, ss.v[k]);
	control_send(fd, "data shared 1");
}

static void control_stats(struct control *c, int fd)
{
	control_flush_released(c); /* the catalog's counts, as of now */
	control_stats_each(c, control_stat_send, &fd);
	if (cat_is_shared(c->d.cat))
		control_stats_shared(c, fd);
	control_send(fd, "ok");
}

/* ---- serving ---- */

/* Reads one line (without its \n) into buf; -errno on failure or EOF. */
static int control_read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n < size - 1) {
		ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -ECONNRESET : -errno;
		char *nl = memchr(buf + n, '\n', (size_t)r);
		n += (size_t)r;
		if (nl) {
			*nl = '\0';
			return 0;
		}
	}
	return -E2BIG;
}

static bool control_peer_allowed(int fd, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0)
		return false;
	return cred->uid == 0 || cred->uid == getuid();
}

static void control_serve(struct control *c, int fd)
{
	struct ucred cred;
	if (!control_peer_allowed(fd, &cred)) {
		log_warn("control: refused a request from uid %ld (pid %ld): only root and uid %ld may",
			 (long)cred.uid, (long)cred.pid, (long)getuid());
		control_error(fd, EPERM, "only root and the daemon's user may control it");
		return;
	}
	struct timeval tv = { .tv_sec = CONTROL_RECV_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char line[CONTROL_LINE_MAX];
	int rc = control_read_line(fd, line, sizeof(line));
	size_t magic = strlen(CONTROL_MAGIC);
	if (rc != 0 || strncmp(line, CONTROL_MAGIC, magic) != 0 ||
	    (line[magic] != ' ' && line[magic] != '\0')) {
		control_error(fd, EINVAL, rc != 0 ? "no request line" : "not a ckptfs-control 1 request");
		return;
	}
	char *argv[CONTROL_MAX_ARGS], *save = NULL;
	int argc = 0;
	for (char *t = strtok_r(line + magic, " ", &save); t && argc < CONTROL_MAX_ARGS;
	     t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	if (argc == 0) {
		control_error(fd, EINVAL, "no verb");
		return;
	}
	log_info("control: %s%s%s (uid %ld, pid %ld)", argv[0], argc > 1 ? " " : "",
		 argc > 1 ? argv[1] : "", (long)cred.uid, (long)cred.pid);
	if (strcmp(argv[0], "hello") == 0)
		control_hello(c, fd);
	else if (strcmp(argv[0], "commit") == 0)
		control_commit(c, fd, argv, argc);
	else if (strcmp(argv[0], "pin") == 0)
		control_pin(c, fd, argv, argc);
	else if (strcmp(argv[0], "rm") == 0)
		control_rm(c, fd, argv, argc);
	else if (strcmp(argv[0], "gc") == 0)
		control_gc(c, fd, argv, argc);
	else if (strcmp(argv[0], "stats") == 0)
		control_stats(c, fd);
	else if (strcmp(argv[0], "durable") == 0)
		control_durable(c, fd, argv, argc);
	else if (strcmp(argv[0], "gen") == 0)
		control_gen(c, fd, argv, argc);
	else if (strcmp(argv[0], "list") == 0)
		control_list(c, fd, argv, argc);
	else if (strcmp(argv[0], "show") == 0)
		control_show(c, fd, argv, argc);
	else if (strcmp(argv[0], "check") == 0)
		control_check(c, fd);
	else if (strcmp(argv[0], "rebuild") == 0)
		control_error(fd, EBUSY, "the catalog is in use by this daemon: unmount, then rebuild "
					 "offline with --cache");
	else
		control_send(fd, "error %d unknown verb %.64s", EINVAL, argv[0]);
}

static void *control_thread(void *arg)
{
	struct control *c = arg;
	for (;;) {
		struct pollfd p[2] = { { c->listen_fd, POLLIN, 0 }, { c->stop_pipe[0], POLLIN, 0 } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("control %s: poll: %s", c->path, strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		control_serve(c, fd);
		close(fd);
	}
	return NULL;
}

int control_start(const struct control_deps *deps, struct control **out)
{
	*out = NULL;
	struct control *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->d = *deps;
	c->listen_fd = -1;
	c->stop_pipe[0] = c->stop_pipe[1] = -1;
	int n = cachedir_path(deps->cache_dir, CACHEDIR_CONTROL_SOCK, c->path, sizeof(c->path));
	int rc = 0;
	const char *step = "path";
	if (n < 0 || (size_t)n >= sizeof(c->path)) {
		rc = -ENAMETOOLONG;
	} else if ((rc = aq_open(deps->cat, &c->aq)) != 0) {
		step = "queries";
	} else if (pipe2(c->stop_pipe, O_CLOEXEC) != 0) {
		rc = -errno;
		step = "pipe";
	} else if ((c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		rc = -errno;
		step = "socket";
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
		unlink(c->path); /* stale, from a daemon that died: we hold the cache lock */
		if (bind(c->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			rc = -errno;
			step = "bind";
		} else if (chmod(c->path, 0600) != 0) {
			rc = -errno;
			step = "chmod";
		} else if (listen(c->listen_fd, 16) != 0) {
			rc = -errno;
			step = "listen";
		} else if ((rc = -pthread_create(&c->thread, NULL, control_thread, c)) != 0) {
			step = "thread";
		}
	}
	if (rc != 0) {
		log_error("control channel %s: %s failed: %s; ckptfs-admin cannot change this mount",
			  c->path, step, strerror(-rc));
		if (c->listen_fd >= 0 && strcmp(step, "bind") != 0)
			unlink(c->path);
		if (c->listen_fd >= 0)
			close(c->listen_fd);
		if (c->stop_pipe[0] >= 0) {
			close(c->stop_pipe[0]);
			close(c->stop_pipe[1]);
		}
		aq_close(c->aq);
		free(c);
		return rc;
	}
	control_note_bounds(c);
	log_info("control channel %s", c->path);
	*out = c;
	return 0;
}

void control_stop(struct control *c)
{
	if (!c)
		return;
	if (write(c->stop_pipe[1], "x", 1) != 1)
		log_warn("control %s: cannot signal the thread: %s", c->path, strerror(errno));
	pthread_join(c->thread, NULL);
	unlink(c->path);
	close(c->listen_fd);
	close(c->stop_pipe[0]);
	close(c->stop_pipe[1]);
	aq_close(c->aq);
	free(c);
}
