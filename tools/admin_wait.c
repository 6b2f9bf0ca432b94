/* admin_wait — wait [GEN] [--timeout S] and rebuild.
 *
 * wait blocks until a generation is durable on BACKING: for job scripts
 * before they exit. Durable means COMMITTED with its manifest and every chunk
 * it names on BACKING (meta/upload.h, U3: cat_gen_durable). It polls the
 * catalog read-only (each question is a new read transaction, so it sees the
 * uploader's progress), so it needs no daemon request and never holds one
 * up. Waiting on an OPEN generation waits for its commit, then its upload.
 * The progress bar counts bytes: the stored bytes of the distinct chunks the
 * waited generations name, and how many of them are on BACKING (a big save
 * moves the bar while it uploads, not only when it is done).
 * Without GEN it waits for every generation that is COMMITTED when it starts;
 * OPEN and HELD ones are named on stderr (and listed under "not_waited" with
 * --json) and not waited for: they are not saved. When everything waited for
 * is durable but such ones exist, the exit code is ADMIN_UNSAVED (11), so a
 * job script does not take its last save for safe. Without GEN it also waits
 * for the files outside generations (`latest`, `last.ckpt`, a final model:
 * no generation names them, review 35 F1): until no chunk such a file names
 * is dirty (meta/admin_query.h aq_tree_dirty, the catalog's own answer to
 * the uploader's "all uploaded?") and a tree manifest describing the tree
 * as it is now is on BACKING (meta/upload.h U11, review 36 F4a: a rebuild
 * or a new cache applies the newest tree manifest, so chunks alone are not
 * saved; the daemon writes it within about a second, busy or idle,
 * fs/uploader.c T7); the timeout message names how many files, a few of
 * them by path, and the bytes left, or the tree manifest (exit 9). Offline
 * (no daemon) nothing uploads: wait then only reports, and times out if
 * something is not durable.
 * On a node of a shared catalog (-o meta=) the local catalog file holds no
 * generations: wait asks the daemon instead (control verb `durable`, which
 * answers from PostgreSQL), so any node waits for a generation whichever
 * node committed it; GEN is then a generation id or name. There too the
 * newest waited-for generation's manifest must be on BACKING before
 * "durable" (the daemon names its version, fs/main.c M3). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "backing.h"
#include "manifest.h"
#include "upload.h"

static double admin_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct admin_wait_list {
	struct cat_id_vec ids; /* the generations waited for */
	struct cat_gen_vec unsaved; /* OPEN or HELD: not waited for */
	struct admin *a;
};

static int admin_wait_add(void *arg, const struct cat_gen *g)
{
	struct admin_wait_list *l = arg;
	if (g->state == GEN_OPEN || g->state == GEN_HELD) {
		char label[PATH_MAX + CAT_NAME_MAX + 2];
		admin_gen_label(l->a, g, label, sizeof(label));
		if (g->state == GEN_OPEN)
			fprintf(stderr, "ckptfs-admin: wait: %s is open (not committed): not waited"
				" for\n", label);
		else
			fprintf(stderr, "ckptfs-admin: wait: %s is held (%s): not waited for\n",
				label, g->held);
		return cat_gen_vec_add(&l->unsaved, g);
	}
	return cat_id_vec_push(&l->ids, g->id);
}

/* The --json list of what was not waited for. */
static void admin_wait_json_unsaved(struct admin_wait_list *l)
{
	printf("[");
	for (size_t i = 0; i < l->unsaved.n; i++) {
		const struct cat_gen *g = &l->unsaved.v[i];
		char label[PATH_MAX + CAT_NAME_MAX + 2];
		admin_gen_label(l->a, g, label, sizeof(label));
		printf("%s{\"id\": %" PRIu64 ", \"generation\": ", i ? ", " : "", g->id);
		admin_json_str(stdout, label);
		printf(", \"state\": \"%s\", \"reason\": ", cat_gen_state_name(g->state));
		admin_json_str(stdout, g->state == GEN_HELD ? g->held : "not committed yet");
		printf("}");
	}
	printf("]");
}

/* "; N files outside generations (PATH, ...) name M chunks (SIZE) not on
 * BACKING yet" for the timeout message. */
static void admin_wait_tree_names(struct admin *a, const struct aq_tree_dirty *td, char *buf,
				  size_t size)
{
	char names[768] = "", path[PATH_MAX], sz[32];
	for (uint64_t i = 0; i < td->files && i < AQ_TREE_DIRTY_NAMED; i++) {
		size_t len = strlen(names);
		if (aq_path(a->aq, td->ino[i], path, sizeof(path)) != 0)
			snprintf(path, sizeof(path), "inode %" PRIu64, td->ino[i]);
		snprintf(names + len, sizeof(names) - len, "%s%s", len ? ", " : "", path + (path[0] == '/'));
	}
	snprintf(buf, size, "; %" PRIu64 " file%s outside generations (%s%s) name%s %" PRIu64
		 " chunk%s (%s) not on BACKING yet", td->files, td->files == 1 ? "" : "s", names,
		 td->files > AQ_TREE_DIRTY_NAMED ? ", ..." : "", td->files == 1 ? "s" : "",
		 td->chunks, td->chunks == 1 ? "" : "s", admin_size(td->bytes, sz));
}

/* ---- on a node of a shared catalog: the daemon's `durable` ---- */

struct admin_wait_shared {
	size_t n, durable;       /* gen lines, durable ones */
	const char *want;        /* NULL, or the GEN whose id is sought */
	uint64_t ids[256];       /* COMMITTED (or the sought OPEN one) when listing */
	size_t n_ids;
	char held[256];
	bool bytes;              /* "bytes ID TOTAL LEFT" came (a daemon that sends it) */
	uint64_t total, left;
	uint32_t version;        /* "version ID VERSION" (0: an older daemon sent none) */
	bool quiet;              /* names no generation not waited for */
};

/* "gen ID STATE DURABLE NAME" */
static void admin_wait_gen_fn(void *arg, const char *key, const char *value)
{
	struct admin_wait_shared *w = arg;
	if (strcmp(key, "held") == 0) {
		snprintf(w->held, sizeof(w->held), "%s", value);
		return;
	}
	unsigned long long bid, total, left;
	unsigned ver;
	if (strcmp(key, "version") == 0 && sscanf(value, "%llu %u", &bid, &ver) == 2) {
		w->version = ver;
		return;
	}
	if (strcmp(key, "bytes") == 0 && sscanf(value, "%llu %llu %llu", &bid, &total, &left) == 3) {
		w->bytes = true;
		w->total = total;
		w->left = left;
		return;
	}
	unsigned long long id;
	char state[32], name[CAT_NAME_MAX + 1];
	int durable;
	if (strcmp(key, "gen") != 0 ||
	    sscanf(value, "%llu %31s %d %255[^\n]", &id, state, &durable, name) != 4)
		return;
	w->n++;
	bool committed = strcmp(state, "committed") == 0;
	if (w->want) { /* listing, to find GEN and what to wait for */
		char idtext[24];
		snprintf(idtext, sizeof(idtext), "%llu", id);
		const char *base = strrchr(w->want, '/'); /* MOUNT/series/name */
		base = base ? base + 1 : w->want;
		if ((strcmp(w->want, idtext) == 0 || strcmp(base, name) == 0) &&
		    w->n_ids < sizeof(w->ids) / sizeof(w->ids[0]))
			w->ids[w->n_ids++] = id;
		return;
	}
	if (committed && w->n_ids < sizeof(w->ids) / sizeof(w->ids[0]))
		w->ids[w->n_ids++] = id;
	else if (!committed && !w->quiet)
		fprintf(stderr, "ckptfs-admin: wait: generation %llu (%s) is %s: not waited for\n",
			id, name, state);
	w->durable += committed && durable;
}

/* One generation's state through the daemon: 0, or an exit code; its
 * bytes to upload are added to *total and *left, *bytes cleared if the
 * daemon sends none. */
static int admin_wait_one(struct admin *a, uint64_t id, bool *durable, bool *bytes,
			  uint64_t *total, uint64_t *left)
{
	struct admin_wait_shared w = { 0 };
	char req[64], msg[256] = "";
	snprintf(req, sizeof(req), "durable %" PRIu64, id);
	int rc = admin_ctl(a, req, admin_wait_gen_fn, &w, msg, sizeof(msg));
	if (rc != 0) {
		admin_err("wait: generation %" PRIu64 ": %s", id, rc > 0 ? msg : strerror(-rc));
		return rc == ENOENT ? ADMIN_PROBLEM : admin_exit_for(rc > 0 ? -rc : rc);
	}
	if (w.held[0]) {
		admin_err("wait: generation %" PRIu64 " is held (%s): it is not saved until"
			  " `ckptfs-admin commit`", id, w.held);
		return ADMIN_UNSAVED;
	}
	*durable = w.durable == 1;
	*bytes = *bytes && w.bytes;
	*total += w.total;
	*left += w.left;
	return ADMIN_OK;
}

/* The largest of the n generation ids (0: none). */
static uint64_t admin_wait_newest_id(const uint64_t *ids, size_t n)
{
	uint64_t newest = 0;
	for (size_t i = 0; i < n; i++)
		if (ids[i] > newest)
			newest = ids[i];
	return newest;
}

/* Before "durable": version `version` of generation id, named `label`, has
 * its manifest on BACKING, which `catalog` calls durable (fs/main.c M1, M3). */
static int admin_wait_stat_manifest(struct admin *a, uint64_t id, uint32_t version,
				    const char *label, const char *catalog)
{
	int rc = a->bk ? 0 : backing_open(a->backing, 0, &a->bk);
	char man[128];
	uint64_t size = 0;
	manifest_gen_path(id, version, man, sizeof(man));
	if (rc == 0)
		rc = backing_stat(a->bk, man, &size);
	if (rc == -ENOENT) {
		admin_err("wait: BACKING %s has no %s, the manifest of %s, which %s calls durable: is "
			  "it mounted? wiped? restored from an older copy?", a->backing, man, label,
			  catalog);
		return ADMIN_PROBLEM;
	}
	if (rc != 0) {
		admin_err("wait: BACKING %s: cannot stat %s: %s", a->backing, man, strerror(-rc));
		return admin_exit_for(rc);
	}
	return ADMIN_OK;
}

/* Before "durable" on a node of a shared catalog: the newest waited-for
 * generation's manifest is on BACKING (fs/main.c M3), as alone
 * (admin_wait_check_newest): its version as the daemon calls durable now. */
static int admin_wait_check_newest_shared(struct admin *a, const uint64_t *ids, size_t n)
{
	uint64_t newest = admin_wait_newest_id(ids, n);
	struct admin_wait_shared w = { .quiet = true };
	char req[64], msg[256] = "", label[48];
	snprintf(req, sizeof(req), "durable %" PRIu64, newest);
	if (newest == 0 || admin_ctl(a, req, admin_wait_gen_fn, &w, msg, sizeof(msg)) != 0 ||
	    w.durable != 1 || w.version == 0)
		return ADMIN_OK; /* ended or rewritten since, or an older daemon */
	snprintf(label, sizeof(label), "generation %" PRIu64, newest);
	return admin_wait_stat_manifest(a, newest, w.version, label, "the shared catalog");
}

static int admin_wait_shared(struct admin *a)
{
	struct admin_wait_shared w = { .want = a->npos == 1 ? a->pos[0] : NULL };
	char msg[256] = "";
	/* what to wait for: GEN (by id or name), or every COMMITTED one now */
	int rc = admin_ctl(a, "durable", admin_wait_gen_fn, &w, msg, sizeof(msg));
	if (rc != 0) {
		admin_err("wait: the daemon cannot list generations: %s", rc > 0 ? msg : strerror(-rc));
		return admin_exit_for(rc > 0 ? -rc : rc);
	}
	if (w.want && w.n_ids != 1) {
		admin_err("wait %s: %s", w.want, w.n_ids ? "names several generations: give its id"
							 : "no such live generation");
		return w.n_ids ? ADMIN_USAGE : ADMIN_PROBLEM;
	}
	size_t unsaved = w.want ? 0 : w.n - w.n_ids;
	double start = admin_now();
	size_t durable = 0;
	int ec = ADMIN_OK;
	for (;;) {
		durable = 0;
		bool bytes = true;
		uint64_t total = 0, left = 0;
		for (size_t i = 0; i < w.n_ids && ec == ADMIN_OK; i++) {
			bool d = false;
			ec = admin_wait_one(a, w.ids[i], &d, &bytes, &total, &left);
			durable += d;
		}
		if (bytes) /* as alone: the generations' chunk bytes on BACKING */
			admin_progress_bytes("wait", total - left, total);
		else
			admin_progress("wait", durable, w.n_ids);
		if (ec != ADMIN_OK || durable == w.n_ids)
			break;
		if (a->timeout_s >= 0 && admin_now() - start >= a->timeout_s) {
			admin_err("wait: %zu of %zu generations durable after %.1f s (--timeout)",
				  durable, w.n_ids, a->timeout_s);
			ec = ADMIN_TIMEOUT;
			break;
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	admin_progress_end();
	if (ec == ADMIN_OK)
		ec = admin_wait_check_newest_shared(a, w.ids, w.n_ids);
	if (ec != ADMIN_OK)
		return ec;
	if (a->json)
		printf("{\"durable\": %zu, \"waited_s\": %.3f, \"not_waited\": %zu}\n", durable,
		       admin_now() - start, unsaved);
	else
		printf("%zu generation%s durable on BACKING\n", durable, durable == 1 ? "" : "s");
	if (unsaved > 0) {
		admin_err("wait: %zu generation%s open or held, not saved (exit %d)", unsaved,
			  unsaved == 1 ? " is" : "s are", ADMIN_UNSAVED);
		return ADMIN_UNSAVED;
	}
	return ADMIN_OK;
}

/* Before "durable": the newest waited-for generation's manifest is on the
 * BACKING found (fs/main.c M1; review 40 F3): the catalog's marks alone say
 * nothing of a BACKING wiped or restored from an older copy since. */
static int admin_wait_check_newest(struct admin *a, const struct cat_id_vec *ids)
{
	uint64_t newest = admin_wait_newest_id(ids->v, ids->n);
	struct cat_gen g;
	bool durable = false;
	/* its version as it is now: a late file may have made a new one since
	 * the loop saw it durable, whose manifest is not put yet (review 41 F4):
	 * only a version the catalog calls durable now is looked for */
	if (newest == 0 || cat_gen_get_brief(a->cat, newest, &g) != 0 || g.state != GEN_COMMITTED ||
	    cat_gen_durable(a->cat, g.id, &durable) != 0 || !durable)
		return ADMIN_OK;
	char label[PATH_MAX + CAT_NAME_MAX + 2];
	admin_gen_label(a, &g, label, sizeof(label));
	return admin_wait_stat_manifest(a, g.id, g.version, label, "the catalog");
}

int admin_cmd_wait(struct admin *a)
{
	if (a->npos > 1) {
		admin_err("wait: expected at most one GEN");
		return ADMIN_USAGE;
	}
	if (admin_shared(a))
		return admin_wait_shared(a);
	struct admin_wait_list l = { .a = a };
	int rc;
	if (a->npos == 1) {
		struct cat_gen g;
		if ((rc = admin_resolve_gen(a, a->pos[0], &g)) != ADMIN_OK)
			return rc;
		if (g.state == GEN_HELD) {
			char label[PATH_MAX + CAT_NAME_MAX + 2];
			admin_gen_label(a, &g, label, sizeof(label));
			admin_err("wait %s: it is held (%s): it is not saved until `ckptfs-admin commit`",
				  label, g.held);
			return ADMIN_UNSAVED;
		}
		if (g.state != GEN_OPEN && g.state != GEN_COMMITTED) {
			char label[PATH_MAX + CAT_NAME_MAX + 2];
			admin_gen_label(a, &g, label, sizeof(label));
			admin_err("wait %s: it is %s (rule %s): it will never be durable", label,
				  cat_gen_state_name(g.state), g.rule[0] ? g.rule : "-");
			return ADMIN_PROBLEM;
		}
		if (cat_id_vec_push(&l.ids, g.id) != 0)
			return ADMIN_PROBLEM;
	} else if ((rc = cat_gen_list_brief(a->cat, 0, false, admin_wait_add, &l)) != 0) {
		admin_err("wait: cannot read the catalog: %s", strerror(-rc));
		cat_id_vec_free(&l.ids);
		cat_gen_vec_free(&l.unsaved);
		return admin_exit_for(rc);
	}
	double start = admin_now();
	size_t durable = 0;
	int ec = ADMIN_OK;
	bool tree = a->npos == 0; /* without GEN: the files outside generations too */
	struct aq_tree_dirty td = { 0 };
	bool tree_current = !tree; /* U11: the tree manifest on BACKING describes the tree now */
	uint64_t tree_total = 0;
	for (;;) {
		uint64_t total = 0, left = 0;
		durable = 0;
		if (tree && ((rc = aq_tree_dirty(a->aq, &td)) != 0 ||
			     (rc = cat_tree_described_current(a->cat, &tree_current)) != 0)) {
			admin_err("wait: cannot read the catalog: %s", strerror(-rc));
			ec = admin_exit_for(rc);
			break;
		}
		if (td.bytes > tree_total) /* the bar's share of them: the most seen left */
			tree_total = td.bytes;
		total += tree_total;
		left += td.bytes;
		for (size_t i = 0; i < l.ids.n && ec == ADMIN_OK; i++) {
			bool d = false;
			struct cat_gen g;
			/* cat_gen_durable says "nothing left to upload": only a COMMITTED one counts */
			rc = cat_gen_get_brief(a->cat, l.ids.v[i], &g);
			if (rc == 0 && g.state == GEN_COMMITTED)
				rc = cat_gen_durable(a->cat, l.ids.v[i], &d);
			if (rc == 0 && g.state != GEN_OPEN && g.state != GEN_COMMITTED) {
				char label[PATH_MAX + CAT_NAME_MAX + 2];
				admin_gen_label(a, &g, label, sizeof(label));
				admin_err("wait: %s was %s (%s) while waiting", label,
					  cat_gen_state_name(g.state),
					  g.state == GEN_HELD ? g.held : g.rule[0] ? g.rule : "-");
				ec = g.state == GEN_HELD ? ADMIN_UNSAVED : ADMIN_PROBLEM;
			} else if (rc != 0) {
				admin_err("wait: cannot read the catalog: %s", strerror(-rc));
				ec = admin_exit_for(rc);
			}
			durable += d;
			uint64_t t = 0, n = 0;
			if (ec == ADMIN_OK && cat_gen_upload_bytes(a->cat, l.ids.v[i], &t, &n) == 0) {
				total += t;
				left += d ? 0 : n;
			}
		}
		admin_progress_bytes("wait", total - left, total);
		if (ec != ADMIN_OK || (durable == l.ids.n && td.files == 0 && tree_current))
			break;
		if (a->timeout_s >= 0 && admin_now() - start >= a->timeout_s) {
			char files[1024] = "";
			if (td.files > 0)
				admin_wait_tree_names(a, &td, files, sizeof(files));
			else if (!tree_current) /* U11: their chunks are there, no manifest names them yet */
				snprintf(files, sizeof(files), "; the files outside generations (`latest`,"
					 " `last.ckpt`, a final model) are not described on BACKING yet:"
					 " no tree manifest there names them as they are now (%s)",
					 a->daemon ? "the daemon writes it within about a second once"
						     " BACKING takes it; see its log"
						   : "no daemon runs to write it: mount the cache");
			admin_err("wait: %zu of %zu generations durable after %.1f s (--timeout)%s",
				  durable, l.ids.n, a->timeout_s, files);
			ec = ADMIN_TIMEOUT;
			break;
		}
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	admin_progress_end();
	if (ec == ADMIN_OK)
		ec = admin_wait_check_newest(a, &l.ids);
	cat_id_vec_free(&l.ids);
	if (ec == ADMIN_OK) {
		if (a->json) {
			printf("{\"durable\": %zu, \"waited_s\": %.3f, \"not_waited\": ", durable,
			       admin_now() - start);
			admin_wait_json_unsaved(&l);
			printf("}\n");
		} else {
			printf("%zu generation%s durable on BACKING%s\n", durable, durable == 1 ? "" : "s",
			       tree ? "; the files outside generations are on BACKING" : "");
		}
		if (l.unsaved.n > 0) {
			admin_err("wait: %zu generation%s open or held, not saved (exit %d)",
				  l.unsaved.n, l.unsaved.n == 1 ? " is" : "s are", ADMIN_UNSAVED);
			ec = ADMIN_UNSAVED;
		}
	}
	cat_gen_vec_free(&l.unsaved);
	return ec;
}
