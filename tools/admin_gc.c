/* admin_gc — gc: remove chunk objects on BACKING that no catalog row names
 * (left by a crash between writing an object and recording it, or by a
 * failed removal). Chunks the catalog still counts are reclaimed by the
 * catalog itself the moment their count reaches zero; gc finds the rest.
 *
 * With the daemon running, the daemon walks the store (control verb gc) so
 * each "not named → remove" decision is taken under its catalog lock
 * (admin_query.h, invariant 2). Offline, the tool does the same walk against
 * the catalog it opened read-write under the cache lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "store.h"

static void admin_gc_data(void *arg, const char *key, const char *value)
{
	struct aq_gc_result *r = arg;
	uint64_t v = strtoull(value, NULL, 10);
	if (strcmp(key, "objects") == 0)
		r->objects = v;
	else if (strcmp(key, "orphans") == 0)
		r->orphans = v;
	else if (strcmp(key, "orphan_bytes") == 0)
		r->orphan_bytes = v;
	else if (strcmp(key, "removed") == 0)
		r->removed = v;
	else if (strcmp(key, "failed") == 0)
		r->failed = v;
}

static int admin_gc_remove(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	return store_remove(arg, hash);
}

static void admin_gc_progress(void *arg, uint64_t done, uint64_t total)
{
	admin_progress("gc", done, total);
}

int admin_cmd_gc(struct admin *a)
{
	if (a->npos != 0) {
		admin_err("gc: takes no argument besides --dry-run");
		return ADMIN_USAGE;
	}
	struct aq_gc_result r = { 0 };
	if (a->daemon) {
		char msg[512];
		int rc = admin_ctl(a, a->dry_run ? "gc dry" : "gc run", admin_gc_data, &r, msg,
				   sizeof(msg));
		if (rc != 0) {
			admin_err("gc: %s", msg);
			return rc < 0 ? ADMIN_NO_DAEMON : admin_exit_for(rc);
		}
	} else {
		char dir[PATH_MAX + 16];
		snprintf(dir, sizeof(dir), "%s/chunks", a->backing);
		int rc = aq_gc_walk(a->aq, dir, a->dry_run, admin_gc_remove, a->store,
				    admin_gc_progress, NULL, &r);
		admin_progress_end();
		if (rc != 0) {
			admin_err("gc: stopped: %s", strerror(-rc));
			return admin_exit_for(rc);
		}
	}
	if (a->json) {
		printf("{\"dry_run\": %s, \"mode\": \"%s\", \"objects\": %" PRIu64 ", \"orphans\": %" PRIu64
		       ", \"orphan_bytes\": %" PRIu64 ", \"removed\": %" PRIu64 ", \"freed_bytes\": %" PRIu64
		       ", \"failed\": %" PRIu64 "}\n",
		       a->dry_run ? "true" : "false", a->daemon ? "online" : "offline", r.objects,
		       r.orphans, r.orphan_bytes, r.removed,
		       a->dry_run || r.orphans == 0 ? 0 : r.orphan_bytes * r.removed / r.orphans,
		       r.failed);
	} else {
		char s[32];
		printf("gc%s: %" PRIu64 " chunk objects on BACKING, %" PRIu64
		       " named by no generation or file (%s)\n",
		       a->daemon ? "" : " [offline]", r.objects, r.orphans, admin_size(r.orphan_bytes, s));
		if (a->dry_run)
			printf("dry run: nothing removed; would free %s\n", s);
		else
			printf("removed %" PRIu64 " objects, freed %s%s\n", r.removed,
			       admin_size(r.orphans ? r.orphan_bytes * r.removed / r.orphans : 0, s),
			       r.failed ? " (some removals failed: see above)" : "");
	}
	return r.failed ? ADMIN_PROBLEM : ADMIN_OK;
}
