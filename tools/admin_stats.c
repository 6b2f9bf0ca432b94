/* admin_stats — stats: what the catalog holds (files, bytes, dedup and
 * compression, generations, the write-back cache's use, dirty bytes, upload
 * queue and lag — all read from the catalog, so offline too) and, when the
 * daemon runs, its live counters (cache bounds and hit rates, fetches,
 * evictions, uploads, BACKING health). Three forms: "key value" lines (exact
 * numbers, a human size after byte counts), --json, and --prometheus (text
 * exposition format for node_exporter's textfile collector). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "upload.h"

enum admin_stat_kind { ST_GAUGE, ST_COUNTER, ST_RATIO };

struct admin_stat {
	const char *key;
	const char *help;
	enum admin_stat_kind kind;
	bool bytes;
	bool have;
	uint64_t v;
	double r;
};

enum {
	K_INODES, K_FILES, K_LOGICAL, K_REFERENCED, K_CHUNKS, K_UNIQUE, K_STORED, K_DEDUP,
	K_COMPRESSION, K_GEN_OPEN, K_GEN_COMMITTED, K_GEN_PINNED, K_GEN_ENDED, K_CC_BYTES,
	K_CC_BUDGET, K_CC_HITS, K_CC_MISSES, K_CC_HIT_RATE, K_WRITE_BACK,
	K_CACHED_CHUNKS, K_CACHED_BYTES, K_CACHE_BOUND, K_DIRTY_CHUNKS, K_DIRTY_BYTES, K_DIRTY_BOUND,
	K_UPLOADED_CHUNKS_CAT, K_UPLOADED_BYTES_CAT, K_QUEUE, K_LAG, K_GEN_DURABLE,
	K_CACHE_HITS, K_CACHE_MISSES, K_CACHE_HIT_RATE, K_FETCHED, K_FETCH_ERRORS, K_EVICTED_CHUNKS,
	K_EVICTED_BYTES, K_DIRTY_WAITS, K_UP_CHUNKS, K_UP_BYTES, K_UP_MANIFESTS, K_UP_FAILURES,
	K_BACKING_DOWN, K_HASH_REUSED, K_HASH_COMPUTED, K_FOLLOWS, K_FOLLOW_WAITS,
	K_FOLLOW_TAKEOVERS, K_FOLLOW_WAIT_MS, K_COUNT
};

static struct admin_stat admin_stats_table[K_COUNT] = {
	[K_INODES] = { "inodes", "Inodes in the catalog.", ST_GAUGE, false, false, 0, 0 },
	[K_FILES] = { "files", "Regular files.", ST_GAUGE, false, false, 0, 0 },
	[K_LOGICAL] = { "logical_bytes", "Sum of regular file sizes.", ST_GAUGE, true, false, 0, 0 },
	[K_REFERENCED] = { "referenced_bytes", "Bytes of file contents held in chunks (holes excluded).",
			   ST_GAUGE, true, false, 0, 0 },
	[K_CHUNKS] = { "chunks", "Distinct chunks.", ST_GAUGE, false, false, 0, 0 },
	[K_UNIQUE] = { "unique_bytes", "Plain bytes of distinct chunks (after dedup).", ST_GAUGE, true,
		       false, 0, 0 },
	[K_STORED] = { "stored_bytes", "Stored bytes of chunk objects (after compression).", ST_GAUGE,
		       true, false, 0, 0 },
	[K_DEDUP] = { "dedup_ratio", "referenced_bytes / unique_bytes.", ST_RATIO, false, false, 0, 0 },
	[K_COMPRESSION] = { "compression_ratio", "unique_bytes / stored_bytes.", ST_RATIO, false, false,
			    0, 0 },
	[K_GEN_OPEN] = { "generations_open", "Generations being written.", ST_GAUGE, false, false, 0, 0 },
	[K_GEN_COMMITTED] = { "generations_committed", "Committed generations.", ST_GAUGE, false, false,
			      0, 0 },
	[K_GEN_PINNED] = { "generations_pinned", "Pinned generations.", ST_GAUGE, false, false, 0, 0 },
	[K_GEN_ENDED] = { "generations_ended", "Aborted or deleted generations (history).", ST_GAUGE,
			  false, false, 0, 0 },
	[K_CC_BYTES] = { "chunk_cache_bytes", "Decoded chunks held in the daemon's memory cache.",
			 ST_GAUGE, true, false, 0, 0 },
	[K_CC_BUDGET] = { "chunk_cache_budget", "Bound of the memory chunk cache (-o chunk_cache).",
			  ST_GAUGE, true, false, 0, 0 },
	[K_CC_HITS] = { "chunk_cache_hits", "Chunk reads served from the memory cache.", ST_COUNTER,
			false, false, 0, 0 },
	[K_CC_MISSES] = { "chunk_cache_misses", "Chunk reads that went to the store.", ST_COUNTER, false,
			  false, 0, 0 },
	[K_CC_HIT_RATE] = { "chunk_cache_hit_rate", "hits / (hits + misses).", ST_RATIO, false, false, 0,
			    0 },
	[K_WRITE_BACK] = { "write_back", "1 if the daemon has a write-back cache.", ST_GAUGE, false,
			   false, 0, 0 },
#define S(k, key, help, kind, bytes) [k] = { key, help, kind, bytes, false, 0, 0 }
	S(K_CACHED_CHUNKS, "cached_chunks", "Chunk objects in the local cache.", ST_GAUGE, false),
	S(K_CACHED_BYTES, "cache_bytes", "Stored bytes of chunk objects in the local cache.", ST_GAUGE,
	  true),
	S(K_CACHE_BOUND, "cache_bound", "Bound of the cache (-o cache_size; 0: the disk).", ST_GAUGE,
	  true),
	S(K_DIRTY_CHUNKS, "dirty_chunks", "Chunks in the cache not yet on BACKING.", ST_GAUGE, false),
	S(K_DIRTY_BYTES, "dirty_bytes", "Stored bytes not yet on BACKING.", ST_GAUGE, true),
	S(K_DIRTY_BOUND, "dirty_bound", "Dirty bytes before writers wait (-o dirty_max).", ST_GAUGE,
	  true),
	S(K_UPLOADED_CHUNKS_CAT, "backing_chunks", "Chunk objects on BACKING.", ST_GAUGE, false),
	S(K_UPLOADED_BYTES_CAT, "backing_bytes", "Stored bytes of chunk objects on BACKING.", ST_GAUGE,
	  true),
	S(K_QUEUE, "upload_queue", "Rows in the upload queue.", ST_GAUGE, false),
	S(K_LAG, "upload_lag_seconds", "Age of the oldest queued upload.", ST_GAUGE, false),
	S(K_GEN_DURABLE, "generations_durable", "Committed generations durable on BACKING.", ST_GAUGE,
	  false),
	S(K_CACHE_HITS, "cache_hits", "Chunk reads served by the local cache.", ST_COUNTER, false),
	S(K_CACHE_MISSES, "cache_misses", "Chunk reads fetched from BACKING.", ST_COUNTER, false),
	S(K_CACHE_HIT_RATE, "cache_hit_rate", "cache_hits / (cache_hits + cache_misses).", ST_RATIO,
	  false),
	S(K_FETCHED, "fetched_bytes", "Bytes fetched from BACKING.", ST_COUNTER, true),
	S(K_FETCH_ERRORS, "fetch_errors", "Fetches from BACKING that failed.", ST_COUNTER, false),
	S(K_EVICTED_CHUNKS, "evicted_chunks", "Chunks evicted from the cache.", ST_COUNTER, false),
	S(K_EVICTED_BYTES, "evicted_bytes", "Bytes evicted from the cache.", ST_COUNTER, true),
	S(K_DIRTY_WAITS, "dirty_waits", "Writes that waited for uploads (dirty bound).", ST_COUNTER,
	  false),
	S(K_UP_CHUNKS, "uploaded_chunks", "Chunks uploaded since the mount.", ST_COUNTER, false),
	S(K_UP_BYTES, "uploaded_bytes", "Bytes uploaded since the mount.", ST_COUNTER, true),
	S(K_UP_MANIFESTS, "uploaded_manifests", "Manifests written since the mount.", ST_COUNTER,
	  false),
	S(K_UP_FAILURES, "upload_failures", "Failed upload attempts since the mount.", ST_COUNTER,
	  false),
	S(K_BACKING_DOWN, "backing_down", "1 while BACKING does not answer.", ST_GAUGE, false),
	S(K_HASH_REUSED, "chunk_hashes_reused",
	  "Chunks of 64 KiB or more whose SHA-256 came from a byte-equal chunk hashed moments"
	  " before (replicated saves).", ST_COUNTER, false),
	S(K_HASH_COMPUTED, "chunk_hashes_computed",
	  "Chunks of 64 KiB or more hashed by the writers.", ST_COUNTER, false),
	S(K_FOLLOWS, "chunk_follows",
	  "Of chunk_hashes_reused: chunks a writer predicted from another writer of the same"
	  " bytes (compared byte for byte; neither chunked nor hashed).", ST_COUNTER, false),
	S(K_FOLLOW_WAITS, "chunk_follow_waits",
	  "Writers that waited for another writer chunking the same bytes.", ST_COUNTER, false),
	S(K_FOLLOW_TAKEOVERS, "chunk_follow_takeovers",
	  "... of them that waited too long and chunked the bytes themselves.", ST_COUNTER, false),
	S(K_FOLLOW_WAIT_MS, "chunk_follow_wait_ms",
	  "Milliseconds those writers waited, in all.", ST_COUNTER, false),
#undef S
};

static void admin_stat_set(int k, uint64_t v)
{
	admin_stats_table[k].have = true;
	admin_stats_table[k].v = v;
}

static void admin_stat_ratio(int k, uint64_t a, uint64_t b)
{
	admin_stats_table[k].have = true;
	admin_stats_table[k].r = admin_ratio(a, b);
}

static char admin_last_error[256];

static void admin_stats_daemon(void *arg, const char *key, const char *value)
{
	if (strcmp(key, "upload_last_error") == 0)
		snprintf(admin_last_error, sizeof(admin_last_error), "%s", value);
	for (int k = 0; k < K_COUNT; k++)
		if (strcmp(admin_stats_table[k].key, key) == 0 && admin_stats_table[k].kind != ST_RATIO)
			admin_stat_set(k, strtoull(value, NULL, 10));
}

struct admin_gen_counts {
	uint64_t open, committed, pinned, ended;
};

static int admin_count_gen(void *arg, const struct cat_gen *g)
{
	struct admin_gen_counts *c = arg;
	if (g->state == GEN_OPEN)
		c->open++;
	else if (g->state == GEN_COMMITTED)
		c->committed++;
	else
		c->ended++;
	if (g->pinned && (g->state == GEN_OPEN || g->state == GEN_COMMITTED))
		c->pinned++;
	return 0;
}

int admin_cmd_stats(struct admin *a)
{
	if (a->npos != 0) {
		admin_err("stats: takes no argument besides --prometheus");
		return ADMIN_USAGE;
	}
	struct cat_stats s;
	struct cat_cache_stats cs;
	struct admin_gen_counts gc = { 0 };
	int rc = cat_stats(a->cat, &s);
	if (rc == 0)
		rc = cat_cache_stats(a->cat, &cs);
	if (rc == 0)
		rc = cat_gen_list_brief(a->cat, 0, true, admin_count_gen, &gc);
	if (rc != 0) {
		admin_err("stats: cannot read the catalog: %s", strerror(-rc));
		return admin_exit_for(rc);
	}
	admin_stat_set(K_INODES, s.inodes);
	admin_stat_set(K_FILES, s.files);
	admin_stat_set(K_LOGICAL, s.logical_bytes);
	admin_stat_set(K_REFERENCED, s.referenced_bytes);
	admin_stat_set(K_CHUNKS, s.chunks);
	admin_stat_set(K_UNIQUE, s.chunk_plain_bytes);
	admin_stat_set(K_STORED, s.chunk_stored_bytes);
	admin_stat_ratio(K_DEDUP, s.referenced_bytes, s.chunk_plain_bytes);
	admin_stat_ratio(K_COMPRESSION, s.chunk_plain_bytes, s.chunk_stored_bytes);
	admin_stat_set(K_GEN_OPEN, gc.open);
	admin_stat_set(K_GEN_COMMITTED, gc.committed);
	admin_stat_set(K_GEN_PINNED, gc.pinned);
	admin_stat_set(K_GEN_ENDED, gc.ended);
	admin_stat_set(K_GEN_DURABLE, cs.durable_gens);
	admin_stat_set(K_CACHED_CHUNKS, cs.cached_chunks);
	admin_stat_set(K_CACHED_BYTES, cs.cached_bytes);
	admin_stat_set(K_DIRTY_CHUNKS, cs.dirty_chunks);
	admin_stat_set(K_DIRTY_BYTES, cs.dirty_bytes);
	admin_stat_set(K_UPLOADED_CHUNKS_CAT, cs.uploaded_chunks);
	admin_stat_set(K_UPLOADED_BYTES_CAT, cs.uploaded_bytes);
	admin_stat_set(K_QUEUE, cs.queued);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	admin_stat_set(K_LAG, cs.queued && cs.oldest_queued_ns > 0 && now_ns > cs.oldest_queued_ns
				      ? (uint64_t)((now_ns - cs.oldest_queued_ns) / 1000000000)
				      : 0);
	if (a->daemon) {
		char msg[512];
		rc = admin_ctl(a, "stats", admin_stats_daemon, NULL, msg, sizeof(msg));
		if (rc != 0)
			fprintf(stderr, "ckptfs-admin: stats: no live counters from the daemon: %s\n", msg);
		struct admin_stat *h = &admin_stats_table[K_CC_HITS], *m = &admin_stats_table[K_CC_MISSES];
		if (h->have && m->have)
			admin_stat_ratio(K_CC_HIT_RATE, h->v, h->v + m->v);
		h = &admin_stats_table[K_CACHE_HITS];
		m = &admin_stats_table[K_CACHE_MISSES];
		if (h->have && m->have)
			admin_stat_ratio(K_CACHE_HIT_RATE, h->v, h->v + m->v);
	}
	const char *mode = a->daemon ? "online" : "offline";
	if (a->prometheus) {
		for (int k = 0; k < K_COUNT; k++) {
			struct admin_stat *st = &admin_stats_table[k];
			if (!st->have)
				continue;
			printf("# HELP ckptfs_%s %s\n# TYPE ckptfs_%s %s\n", st->key, st->help, st->key,
			       st->kind == ST_COUNTER ? "counter" : "gauge");
			printf("ckptfs_%s{cache=", st->key);
			admin_json_str(stdout, a->cache); /* label values escape like JSON strings */
			if (st->kind == ST_RATIO)
				printf("} %.6f\n", st->r);
			else
				printf("} %" PRIu64 "\n", st->v);
		}
		printf("# HELP ckptfs_daemon_up 1 if the daemon answered on its control channel.\n"
		       "# TYPE ckptfs_daemon_up gauge\nckptfs_daemon_up{cache=");
		admin_json_str(stdout, a->cache);
		printf("} %d\n", a->daemon ? 1 : 0);
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
	for (int k = 0; k < K_COUNT; k++) {
		struct admin_stat *st = &admin_stats_table[k];
		if (!st->have)
			continue;
		char sz[32];
		if (a->json && st->kind == ST_RATIO)
			printf(", \"%s\": %.6f", st->key, st->r);
		else if (a->json)
			printf(", \"%s\": %" PRIu64, st->key, st->v);
		else if (st->kind == ST_RATIO)
			printf("%s %.3f\n", st->key, st->r);
		else if (st->bytes)
			printf("%s %" PRIu64 " (%s)\n", st->key, st->v, admin_size(st->v, sz));
		else
			printf("%s %" PRIu64 "\n", st->key, st->v);
	}
	if (a->json && admin_last_error[0]) {
		printf(", \"upload_last_error\": ");
		admin_json_str(stdout, admin_last_error);
	} else if (admin_last_error[0]) {
		printf("upload_last_error %s\n", admin_last_error);
	}
	if (a->json)
		printf("}\n");
	return ADMIN_OK;
}
