/* admin_stats — stats: what the catalog holds (files, bytes, dedup and
 * compression, generations, the write-back cache's use, dirty bytes, upload
 * queue and lag — all read from the catalog, so offline too) and, when the
 * daemon runs, its live counters (cache bounds and hit rates, fetches,
 * evictions, uploads, BACKING health). On a node of a shared catalog the
 * daemon also sends the counts of files, bytes and generations from
 * PostgreSQL, which the local file does not hold. Three forms: "key value" lines (exact
 * numbers, a human size after byte counts), --json, and --prometheus (text
 * exposition format for node_exporter's textfile collector). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "statset.h"

static struct statset admin_stats_set;

/* "data KEY VALUE" of the daemon's stats verb; on a node of a shared
 * catalog its catalog counts replace the local file's (fs/control.c), and
 * statset_finish derives the ratios from whichever is there. */
static void admin_stats_daemon(void *arg, const char *key, const char *value)
{
	statset_put(arg, key, value);
}

int admin_cmd_stats(struct admin *a)
{
	if (a->npos != 0) {
		admin_err("stats: takes no argument besides --prometheus");
		return ADMIN_USAGE;
	}
	struct statset *ss = &admin_stats_set;
	int rc = statset_from_catalog(ss, a->cat);
	if (rc != 0) {
		admin_err("stats: cannot read the catalog: %s", strerror(-rc));
		return admin_exit_for(rc);
	}
	if (a->daemon) {
		char msg[512];
		rc = admin_ctl(a, "stats", admin_stats_daemon, ss, msg, sizeof(msg));
		if (rc != 0)
			fprintf(stderr, "ckptfs-admin: stats: no live counters from the daemon: %s\n", msg);
	}
	statset_finish(ss);
	const char *mode = a->daemon ? "online" : "offline";
	if (a->prometheus) {
		statset_prometheus(ss, stdout, a->cache, a->mount[0] ? a->mount : NULL, a->daemon);
		return ADMIN_OK;
	}
	if (a->json) {
		printf("{\"mode\": \"%s\", \"cache\": ", mode);
		admin_json_str(stdout, a->cache);
		printf(", \"backing\": ");
		admin_json_str(stdout, a->backing);
	} else {
		printf("mode %s\ncache %s\nbacking %s\n", mode, a->cache, a->backing);
	}
	for (int k = 0; k < SS_COUNT; k++) {
		const struct statset_desc *d = &statset_desc[k];
		if (!ss->have[k])
			continue;
		char sz[32];
		if (a->json && d->kind == STATSET_RATIO)
			printf(", \"%s\": %.6f", d->key, ss->ratio[k]);
		else if (a->json)
			printf(", \"%s\": %" PRIu64, d->key, ss->v[k]);
		else if (d->kind == STATSET_RATIO)
			printf("%s %.3f\n", d->key, ss->ratio[k]);
		else if (d->bytes)
			printf("%s %" PRIu64 " (%s)\n", d->key, ss->v[k], admin_size(ss->v[k], sz));
		else
			printf("%s %" PRIu64 "\n", d->key, ss->v[k]);
	}
	if (a->json && ss->last_error[0]) {
		printf(", \"upload_last_error\": ");
		admin_json_str(stdout, ss->last_error);
	} else if (ss->last_error[0]) {
		printf("upload_last_error %s\n", ss->last_error);
	}
	if (a->json)
		printf("}\n");
	return ADMIN_OK;
}

/* A stale mount (the daemon died; the cache is unknown): --prometheus still
 * says so, for a scrape that would otherwise see nothing. */
void admin_stats_stale(const char *mountpoint)
{
	statset_prometheus(NULL, stdout, NULL, mountpoint, false);
}
