/* admin_gc — gc: remove chunk objects that nothing names, in the cache
 * (CACHE/chunks) and on BACKING. Left by a crash between writing an object
 * and recording it, or by a failed removal: chunks whose count reaches zero
 * are reclaimed by the catalog itself (cache copy at once, BACKING copy
 * through the upload queue, after the manifests that name it).
 *
 * With the daemon running, the daemon walks both (control verb gc) so each
 * "named by nothing → remove" decision is taken under its catalog lock
 * (admin_query.h, invariant 2). Offline, the tool does the same walks against
 * the catalog it opened read-write under the cache lock. On BACKING an object
 * is kept while the upload queue has work on it or a manifest removal queued,
 * and whenever a manifest on BACKING names it (admin_query.h 3: a save a
 * rebuild left out has no rows; its manifest is read first, and one that
 * cannot be read stops gc before anything is removed).
 * The cache's small objects are rows of CACHE/small.db (fs/lib/storesmall.h),
 * walked as if they were files (T6) and counted with the cache's files.
 * A dry run only reads (admin.c opens it as a reading command): offline it
 * takes no cache lock, opens the catalog read-only (a save a crash left open
 * stays open and its chunks count as named) and claims nothing. Without the
 * claim it cannot be sure BACKING's objects are this catalog's to judge: if
 * BACKING's claim names another catalog, or cannot be read, it says so and
 * skips BACKING ("skipped: REASON") rather than count them as orphans. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "backing.h"
#include "claim.h"
#include "storesmall.h"

struct admin_gc {
	struct aq_gc_result side[2]; /* cache, BACKING */
	char backing_skipped[256];   /* why the daemon left BACKING alone ("": it did not) */
};

static void admin_gc_data(void *arg, const char *key, const char *value)
{
	struct admin_gc *g = arg;
	if (strcmp(key, "backing_skipped") == 0) {
		snprintf(g->backing_skipped, sizeof(g->backing_skipped), "%s", value);
		return;
	}
	int i = strcmp(key, "cache") == 0 ? 0 : strcmp(key, "backing") == 0 ? 1 : -1;
	if (i < 0)
		return;
	struct aq_gc_result *r = &g->side[i];
	unsigned long long v[7] = { 0 };
	if (sscanf(value, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		   &v[5], &v[6]) >= 6)
		*r = (struct aq_gc_result){ v[0], v[1], v[2], v[3], v[4], v[5], v[6] };
}

static void admin_gc_progress(void *arg, uint64_t done, uint64_t total)
{
	admin_progress(arg, done, total);
}

/* The rows of the cache's small.db, walked as its files are and added to the
 * cache's counts (none without a small.db). */
static int admin_gc_small(struct admin *a, struct aq_gc_result *cache)
{
	struct storesmall *ss;
	int rc = storesmall_open(a->cache, false, &ss);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0) {
		admin_err("gc of the cache's small.db: cannot open it: %s", strerror(-rc));
		return admin_exit_for(rc);
	}
	const struct aq_objects rows = aq_objects_small(ss);
	struct aq_gc_result r;
	rc = aq_gc_walk(a->aq, &rows, a->dry_run, admin_gc_progress, "gc small.db", &r);
	admin_progress_end();
	storesmall_close(ss);
	if (rc != 0) {
		admin_err("gc of the cache's small.db: stopped: %s", strerror(-rc));
		return admin_exit_for(rc);
	}
	aq_gc_result_add(cache, &r);
	return ADMIN_OK;
}

/* An offline dry run holds no claim: "" if BACKING's objects are this
 * catalog's to count (the claim is its own, or there is none), else why not
 * in why. */
static void admin_gc_dry_claim(struct admin *a, char *why, size_t size)
{
	struct claim_rec rec;
	char id[CLAIM_ID_LEN + 1];
	why[0] = '\0';
	int err = admin_claim_get(a->bk, &rec);
	if (err == -ENOENT)
		return;
	if (err != 0) {
		snprintf(why, size, "a dry run claims nothing, and BACKING's claim (" CLAIM_DIR "/)"
			 " cannot be read (%s): whether its objects are this catalog's is not known",
			 strerror(-err));
		return;
	}
	err = cat_catalog_id(a->cat, id, sizeof(id));
	if (err != 0)
		snprintf(why, size, "a dry run claims nothing, and the catalog's id cannot be read (%s)",
			 strerror(-err));
	else if (strcmp(rec.catalog, id) != 0)
		snprintf(why, size, "BACKING's claim names another catalog (%s, cache %s): its objects"
			 " are not this catalog's to count (gc --delete claims BACKING first, refused"
			 " while that catalog holds it)", rec.catalog, rec.cache);
}

int admin_cmd_gc(struct admin *a)
{
	if (a->npos != 0) {
		admin_err("gc: takes no argument besides --delete");
		return ADMIN_USAGE;
	}
	struct admin_gc g;
	memset(&g, 0, sizeof(g));
	static const char *const names[2] = { "cache", "BACKING" };
	if (a->daemon) {
		char msg[1024];
		int rc = admin_ctl(a, a->dry_run ? "gc dry" : "gc run", admin_gc_data, &g, msg,
				   sizeof(msg));
		if (rc != 0) {
			admin_err("gc: %s", msg);
			return rc < 0 ? ADMIN_NO_DAEMON : admin_exit_for(rc);
		}
	} else {
		struct aq_named *named = NULL;
		char err[768];
		int rc = 0;
		if (a->dry_run)
			admin_gc_dry_claim(a, g.backing_skipped, sizeof(g.backing_skipped));
		if (!g.backing_skipped[0]) /* admin_query.h 3 */
			rc = aq_named_load(a->bk, &named, err, sizeof(err));
		if (rc != 0) {
			admin_err("gc: %s; %s", err, AQ_NAMED_ADVICE);
			return admin_exit_for(rc);
		}
		const struct aq_objects sides[2] = { aq_objects_dir(a->cache),
						     aq_objects_backing(a->bk, named, a->claim) };
		for (int i = 0; i < (g.backing_skipped[0] ? 1 : 2) && rc == ADMIN_OK; i++) {
			rc = aq_gc_walk(a->aq, &sides[i], a->dry_run, admin_gc_progress,
					i ? "gc BACKING" : "gc cache", &g.side[i]);
			admin_progress_end();
			if (rc != 0) {
				admin_err("gc of %s%s: stopped: %s", i ? "" : "the ", names[i],
					  rc == -EROFS && i ? "BACKING's claim could not be renewed lately"
							      " or was taken (EROFS; admin_query.h 5):"
							      " nothing more removed there"
							    : strerror(-rc));
				rc = admin_exit_for(rc);
			} else if (i == 0) {
				rc = admin_gc_small(a, &g.side[0]);
			}
		}
		aq_named_free(named);
		if (rc != ADMIN_OK)
			return rc;
	}
	uint64_t failed = g.side[0].failed + g.side[1].failed;
	if (a->json) {
		printf("{\"dry_run\": %s, \"mode\": \"%s\"", a->dry_run ? "true" : "false",
		       a->daemon ? "online" : "offline");
		for (int i = 0; i < 2; i++) {
			const struct aq_gc_result *r = &g.side[i];
			printf(", \"%s\": {\"objects\": %" PRIu64 ", \"orphans\": %" PRIu64
			       ", \"orphan_bytes\": %" PRIu64 ", \"removed\": %" PRIu64
			       ", \"freed_bytes\": %" PRIu64 ", \"failed\": %" PRIu64, i ? "backing" : "cache",
			       r->objects, r->orphans, r->orphan_bytes, r->removed, r->freed_bytes,
			       r->failed);
			if (i == 1)
				printf(", \"manifest_kept\": %" PRIu64, r->manifest_kept);
			printf("}");
		}
		if (g.backing_skipped[0]) {
			printf(", \"backing_skipped\": ");
			admin_json_str(stdout, g.backing_skipped);
		}
		printf(", \"freed_bytes\": %" PRIu64 "}\n", g.side[0].freed_bytes + g.side[1].freed_bytes);
	} else {
		for (int i = 0; i < 2; i++) {
			const struct aq_gc_result *r = &g.side[i];
			char s1[32], s2[32];
			if (i == 1 && g.backing_skipped[0]) {
				printf("gc %-7s: skipped: %s\n", names[i], g.backing_skipped);
				continue;
			}
			printf("gc %-7s: %" PRIu64 " chunk objects, %" PRIu64 " named by nothing (%s); ",
			       names[i], r->objects, r->orphans, admin_size(r->orphan_bytes, s1));
			if (a->dry_run)
				printf("dry run: would free %s\n", s1);
			else
				printf("removed %" PRIu64 ", freed %s\n", r->removed,
				       admin_size(r->freed_bytes, s2));
			if (r->manifest_kept)
				printf("gc %-7s: %" PRIu64 " chunk objects named by no catalog row but by a"
				       " manifest on BACKING (a save a rebuild left out): kept\n",
				       names[i], r->manifest_kept);
		}
		if (a->dry_run)
			printf("dry run: nothing removed; ckptfs-admin gc --delete removes them\n");
		if (!a->daemon)
			printf("(offline: no daemon was running)\n");
		if (failed)
			printf("%" PRIu64 " removals failed (see above)\n", failed);
	}
	return failed ? ADMIN_PROBLEM : ADMIN_OK;
}
