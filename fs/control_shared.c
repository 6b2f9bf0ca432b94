/* control_shared — the control verbs of a node of a shared catalog
 * (-o meta=, docs/MULTINODE.md): gen, list, show, check and stats' catalog
 * counts, answered from the daemon's catalog, which is PostgreSQL's there.
 *
 * The node's local catalog file holds no namespace and no generations, so
 * ckptfs-admin (tools/admin_shared.c) asks the daemon for what it would
 * otherwise read itself; alone, gen, list, show and check answer ENOSYS
 * (the tool reads the catalog file). control.c owns the channel and the
 * dispatch and hands each verb the catalog and the connection; the lines
 * are control_proto.h's. Nothing here changes state: commit, pin and rm
 * stay control.c's, the same verbs alone and shared. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin_query.h"
#include "catalog_shared_admin.h"
#include "control_proto.h"
#include "control_shared.h"
#include "generation.h"
#include "statset.h"
#include "upload.h"

/* ---- naming generations for ckptfs-admin on a node of a shared catalog,
 * whose local catalog file holds no generations (gen, list) ---- */

/* The inode that rel (names relative to the root, '/' between) names. */
static int control_shared_walk(struct cat *cat, char *rel, uint64_t *ino)
{
	uint64_t at = CAT_ROOT_INO;
	char *save = NULL;
	for (char *t = strtok_r(rel, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		struct cat_inode in;
		if (strcmp(t, ".") == 0 || strcmp(t, "..") == 0)
			return -EINVAL; /* a name never leaves the mount */
		int rc = cat_lookup(cat, at, t, &in);
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
struct control_shared_describe {
	struct cat *cat;
	int fd;
	uint64_t last_series;
	struct cat_id_vec ids; /* the generations described, for their usage (list) */
	int err;               /* -ENOMEM once an id could not be kept */
};

static int control_shared_describe_gen(void *arg, const struct cat_gen *g)
{
	struct control_shared_describe *d = arg;
	char path[PATH_MAX];
	bool durable = false;
	if (g->series != d->last_series) {
		if (cat_shared_path(d->cat, g->series, path, sizeof(path)) != 0)
			snprintf(path, sizeof(path), "/?"); /* a series since unlinked */
		control_proto_send(d->fd, "data series %" PRIu64 " %s", g->series, path);
		d->last_series = g->series;
	}
	int rc = g->state == GEN_COMMITTED ? cat_gen_durable(d->cat, g->id, &durable) : 0;
	if (rc != 0)
		return rc;
	control_proto_send(d->fd, "data generation %" PRIu64 " %s %d %d %" PRIu64 " %" PRIu64 " %" PRIu64
			   " %" PRId64 " %" PRIu64 " %s", g->id, cat_gen_state_name(g->state),
			   durable ? 1 : 0, g->pinned ? 1 : 0, g->step, g->files, g->logical_bytes,
			   g->committed_ns, g->series, g->name);
	if (g->rule[0])
		control_proto_send(d->fd, "data rule %" PRIu64 " %s", g->id, g->rule);
	if (g->state == GEN_HELD)
		control_proto_send(d->fd, "data held %" PRIu64 " %s", g->id, g->held);
	control_proto_send(d->fd, "data times %" PRIu64 " %u %" PRId64 " %" PRId64, g->id, g->version,
			   g->created_ns, g->ended_ns);
	if (cat_id_vec_push(&d->ids, g->id) != 0)
		d->err = -ENOMEM;
	return 0;
}

/* ---- what generations hold, for list and show (catalog_shared_admin.h) ---- */

static void control_shared_usage_line(int fd, uint64_t id, const struct aq_gen_usage *u)
{
	control_proto_send(fd, "data usage %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
			   " %" PRIu64 " %" PRIu64, id, u->extents, u->chunks, u->unique_bytes,
			   u->exclusive_chunks, u->exclusive_bytes, u->exclusive_stored);
}

struct control_shared_usages {
	int fd;
	const uint64_t *ids; /* those described, in order */
	size_t n, next;
};

/* The rows come ordered by id and control_shared_send_usage sorted the ids: the
 * two are merged, so every described generation gets one line, zeros for
 * one that names no chunk (it has no row). */
static int control_shared_usage_cb(void *arg, uint64_t gen_id, const struct aq_gen_usage *u)
{
	struct control_shared_usages *us = arg;
	static const struct aq_gen_usage zero;
	for (; us->next < us->n && us->ids[us->next] < gen_id; us->next++)
		control_shared_usage_line(us->fd, us->ids[us->next], &zero);
	if (us->next < us->n && us->ids[us->next] == gen_id)
		control_shared_usage_line(us->fd, us->ids[us->next++], u);
	return 0;
}

static int control_shared_u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* "data usage ID EXTENTS CHUNKS UNIQUE_BYTES ALONE_CHUNKS ALONE_BYTES
 * ALONE_STORED" for every generation d described, in one statement. */
static int control_shared_send_usage(struct control_shared_describe *d)
{
	if (d->err)
		return d->err;
	qsort(d->ids.v, d->ids.n, sizeof(*d->ids.v), control_shared_u64_cmp);
	struct control_shared_usages us = { d->fd, d->ids.v, d->ids.n, 0 };
	int rc = cat_shared_gen_usage(d->cat, d->ids.v, d->ids.n, control_shared_usage_cb, &us);
	if (rc == 0)
		control_shared_usage_cb(&us, UINT64_MAX, NULL); /* the ones after the last row */
	return rc;
}

struct control_shared_root {
	int fd;
	char root[PATH_MAX]; /* the generation root's path from the mount's root */
};

static int control_shared_show_file(void *arg, const struct aq_file *f, const char *relpath)
{
	struct control_shared_root *sh = arg;
	char path[PATH_MAX * 2], esc[CONTROL_LINE_MAX];
	snprintf(path, sizeof(path), "%s%s", sh->root, relpath);
	control_proto_escape(path, true, esc, sizeof(esc));
	control_proto_send(sh->fd, "data file %" PRIu64 " %" PRIu64 " %" PRIu64 " %s", f->size,
			   f->extents, f->chunks, esc);
	return 0;
}

/* "series/name" of generation id, as ckptfs-admin labels one ("" if gone). */
static void control_shared_gen_label(struct cat *cat, uint64_t id, char *buf, size_t size)
{
	struct cat_gen o;
	char series[PATH_MAX];
	buf[0] = '\0';
	if (id == 0 || cat_gen_get(cat, id, &o) != 0)
		return;
	if (cat_shared_path(cat, o.series, series, sizeof(series)) != 0)
		snprintf(series, sizeof(series), "/?");
	snprintf(buf, size, "%s%s%s", series + 1, series[1] ? "/" : "", o.name);
}

/* show GEN_ID: the generation's lines as gen answers them, its usage, then
 *   data file SIZE EXTENTS CHUNKS PATH      (each regular file, by inode)
 *   data share ID CHUNKS BYTES LABEL        (each other generation naming
 *                                            some of its chunks; ID 0: files
 *                                            outside generations, LABEL "")
 * PATH and LABEL %XX-escaped (control_proto_escape, spaces kept). Shared catalogs only. */
void control_shared_show(struct cat *cat, int fd, char **argv, int argc)
{
	struct cat_gen g;
	uint64_t id;
	if (!cat_is_shared(cat)) {
		control_proto_error(fd, ENOSYS, "not a node of a shared catalog: read the catalog file");
		return;
	}
	if (argc != 2 || control_proto_parse_id(argv[1], &id) != 0) {
		control_proto_error(fd, EINVAL, "expected show GEN_ID");
		return;
	}
	int rc = cat_gen_get(cat, id, &g);
	if (rc == -ENOENT) {
		control_proto_error(fd, ENOENT, "no such generation");
		return;
	}
	struct control_shared_describe d = { .cat = cat, .fd = fd };
	struct control_shared_root sh = { fd, "" };
	struct aq_share *shares = NULL;
	size_t nshares = 0;
	if (rc == 0)
		rc = control_shared_describe_gen(&d, &g);
	if (rc == 0)
		rc = control_shared_send_usage(&d);
	if (rc == 0 && cat_shared_path(cat, g.series, sh.root, sizeof(sh.root)) != 0)
		snprintf(sh.root, sizeof(sh.root), "/?");
	if (rc == 0) {
		size_t len = strlen(sh.root);
		snprintf(sh.root + len, sizeof(sh.root) - len, "%s%s", len > 1 ? "/" : "", g.name);
		rc = cat_shared_gen_files(cat, g.id, control_shared_show_file, &sh);
	}
	if (rc == 0)
		rc = cat_shared_gen_shares(cat, g.id, &shares, &nshares);
	for (size_t i = 0; rc == 0 && i < nshares; i++) {
		char label[PATH_MAX + CAT_NAME_MAX + 2], esc[CONTROL_LINE_MAX];
		control_shared_gen_label(cat, shares[i].gen_id, label, sizeof(label));
		control_proto_escape(label, true, esc, sizeof(esc));
		control_proto_send(fd, "data share %" PRIu64 " %" PRIu64 " %" PRIu64 " %s", shares[i].gen_id,
				   shares[i].chunks, shares[i].bytes, esc);
	}
	free(shares);
	cat_id_vec_free(&d.ids);
	control_proto_done(fd, rc);
}

/* gen id:N | gen PATH (escaped): the generation, in any state, that PATH or
 * a file inside it names. Shared catalogs only: alone, the tool reads the
 * catalog file. */
void control_shared_gen(struct cat *cat, int fd, char **argv, int argc)
{
	struct cat_gen g;
	uint64_t id = 0, ino;
	int rc;
	if (!cat_is_shared(cat)) {
		control_proto_error(fd, ENOSYS, "not a node of a shared catalog: read the catalog file");
		return;
	}
	if (argc != 2 || control_proto_unescape(argv[1]) != 0) {
		control_proto_error(fd, EINVAL, "expected gen id:N or gen PATH");
		return;
	}
	if (strncmp(argv[1], "id:", 3) == 0)
		rc = control_proto_parse_id(argv[1] + 3, &id);
	else if ((rc = control_shared_walk(cat, argv[1], &ino)) == 0)
		rc = cat_gen_of(cat, ino, &id);
	if (rc == 0 && id == 0)
		rc = -ENOENT;
	if (rc == 0)
		rc = cat_gen_get(cat, id, &g);
	if (rc == -ENOENT || rc == -ENOTDIR) {
		control_proto_error(fd, ENOENT, "no such generation");
		return;
	}
	struct control_shared_describe d = { .cat = cat, .fd = fd };
	if (rc == 0)
		rc = control_shared_describe_gen(&d, &g);
	cat_id_vec_free(&d.ids);
	control_proto_done(fd, rc);
}

/* list live|all [SERIES (escaped)]: as cat_gen_list, every series or one,
 * then the usage of every generation listed ("data usage", control_shared_show). */
void control_shared_list(struct cat *cat, int fd, char **argv, int argc)
{
	uint64_t series = 0;
	int rc = 0;
	if (!cat_is_shared(cat)) {
		control_proto_error(fd, ENOSYS, "not a node of a shared catalog: read the catalog file");
		return;
	}
	bool all = argc > 1 && strcmp(argv[1], "all") == 0;
	if (argc < 2 || argc > 3 || (!all && strcmp(argv[1], "live") != 0) ||
	    (argc == 3 && control_proto_unescape(argv[2]) != 0)) {
		control_proto_error(fd, EINVAL, "expected list live|all [SERIES]");
		return;
	}
	if (argc == 3 && (rc = control_shared_walk(cat, argv[2], &series)) != 0) {
		control_proto_error(fd, rc == -ENOTDIR ? ENOENT : -rc, "no such series directory");
		return;
	}
	struct control_shared_describe d = { .cat = cat, .fd = fd };
	rc = cat_gen_list(cat, series, all, control_shared_describe_gen, &d);
	if (rc == 0)
		rc = control_shared_send_usage(&d); /* one statement for the whole list */
	cat_id_vec_free(&d.ids);
	control_proto_done(fd, rc);
}

/* check: the daemon's catalog's invariants (cat_check: on a node of a
 * shared catalog, PostgreSQL's N1, N2 and generations' and this node's
 * cache rows), each violation a line of the daemon's log. Shared catalogs
 * only: alone, the tool checks the catalog file itself. */
void control_shared_check(struct cat *cat, int fd)
{
	if (!cat_is_shared(cat)) {
		control_proto_error(fd, ENOSYS, "not a node of a shared catalog: check the catalog file");
		return;
	}
	int rc = cat_check(cat);
	if (rc == -EUCLEAN)
		control_proto_error(fd, EUCLEAN, "the shared catalog has problems: each is a line of the"
				    " daemon's log");
	else if (rc != 0)
		control_proto_error(fd, -rc, "the check could not run (see the daemon's log)");
	else
		control_proto_send(fd, "ok");
}

/* On a node of a shared catalog the tool's catalog file holds no namespace
 * and no generations: the daemon sends the counts of its catalog
 * (PostgreSQL's) that are the catalog's, SS_INODES to SS_GEN_HELD, which
 * replace the tool's (statset_put). The cache's and upload queue's stay the
 * tool's reading of the local file, which is where they are. */
void control_shared_stats(struct cat *cat, int fd)
{
	struct statset ss;
	memset(&ss, 0, sizeof(ss));
	if (statset_from_catalog(&ss, cat) != 0)
		return; /* logged by the catalog; the tool keeps its own figures */
	for (int k = SS_INODES; k <= SS_GEN_HELD; k++)
		if (ss.have[k] && statset_desc[k].kind != STATSET_RATIO)
			control_proto_send(fd, "data %s %" PRIu64, statset_desc[k].key, ss.v[k]);
	control_proto_send(fd, "data shared 1");
}

