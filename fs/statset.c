/* statset — named statistics and their Prometheus form (see statset.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "generation.h"
#include "catalog_pack.h"
#include "statset.h"
#include "upload.h"

#define G STATSET_GAUGE
#define C STATSET_COUNTER
#define R STATSET_RATIO

const struct statset_desc statset_desc[SS_COUNT] = {
	[SS_INODES] = { "inodes", "inodes", "Inodes in the catalog.", G, false, 1 },
	[SS_FILES] = { "files", "files", "Regular files.", G, false, 1 },
	[SS_LOGICAL] = { "logical_bytes", "logical_bytes", "Sum of regular file sizes.", G, true, 1 },
	[SS_REFERENCED] = { "referenced_bytes", "referenced_bytes",
			    "Bytes of file contents held in chunks (holes excluded).", G, true, 1 },
	[SS_CHUNKS] = { "chunks", "chunks", "Distinct chunks.", G, false, 1 },
	[SS_UNIQUE] = { "unique_bytes", "unique_bytes", "Plain bytes of distinct chunks (after dedup).",
			G, true, 1 },
	[SS_STORED] = { "stored_bytes", "stored_bytes",
			"Stored bytes of chunk objects (after compression).", G, true, 1 },
	[SS_DEDUP] = { "dedup_ratio", "dedup_ratio", "referenced_bytes / unique_bytes.", R, false, 1 },
	[SS_COMPRESSION] = { "compression_ratio", "compression_ratio", "unique_bytes / stored_bytes.",
			     R, false, 1 },
	[SS_GEN_OPEN] = { "generations_open", "generations_open", "Generations being written.", G,
			  false, 1 },
	[SS_GEN_COMMITTED] = { "generations_committed", "generations_committed",
			       "Committed generations.", G, false, 1 },
	[SS_GEN_PINNED] = { "generations_pinned", "generations_pinned", "Pinned generations.", G, false,
			    1 },
	[SS_GEN_ENDED] = { "generations_ended", "generations_ended",
			   "Aborted or deleted generations (history).", G, false, 1 },
	[SS_GEN_HELD] = { "generations_held", "generations_held",
			  "Held generations: not proven complete, kept until a decision.", G, false, 1 },
	[SS_CC_BYTES] = { "chunk_cache_bytes", "chunk_cache_bytes",
			  "Decoded chunks held in the daemon's memory cache.", G, true, 1 },
	[SS_CC_BUDGET] = { "chunk_cache_budget", "chunk_cache_budget_bytes",
			   "Bound of the memory chunk cache (-o chunk_cache).", G, true, 1 },
	[SS_CC_HITS] = { "chunk_cache_hits", "chunk_cache_hits_total",
			 "Chunk reads served from the memory cache.", C, false, 1 },
	[SS_CC_MISSES] = { "chunk_cache_misses", "chunk_cache_misses_total",
			   "Chunk reads that went to the store.", C, false, 1 },
	[SS_CC_HIT_RATE] = { "chunk_cache_hit_rate", "chunk_cache_hit_ratio",
			     "chunk_cache_hits / (hits + misses).", R, false, 1 },
	[SS_WRITE_BACK] = { "write_back", "write_back", "1 if the daemon has a write-back cache.", G,
			    false, 1 },
	[SS_CACHED_CHUNKS] = { "cached_chunks", "cached_chunks", "Chunk objects in the local cache.",
			       G, false, 1 },
	[SS_CACHED_BYTES] = { "cache_bytes", "cache_bytes",
			      "Stored bytes of chunk objects in the local cache.", G, true, 1 },
	[SS_CACHE_BOUND] = { "cache_bound", "cache_bound_bytes",
			     "Bound of the cache in force (-o cache_size, else 90% of what its disk "
			     "held at the mount).", G, true, 1 },
	[SS_DIRTY_CHUNKS] = { "dirty_chunks", "dirty_chunks", "Chunks in the cache not yet on BACKING.",
			      G, false, 1 },
	[SS_DIRTY_BYTES] = { "dirty_bytes", "dirty_bytes", "Stored bytes not yet on BACKING.", G, true,
			     1 },
	[SS_DIRTY_BOUND] = { "dirty_bound", "dirty_bound_bytes",
			     "Dirty bytes in force before writers wait (-o dirty_max, else 3/4 of the "
			     "cache bound).", G, true, 1 },
	[SS_BACKING_CHUNKS] = { "backing_chunks", "backing_chunks", "Chunk objects on BACKING.", G,
				false, 1 },
	[SS_BACKING_BYTES] = { "backing_bytes", "backing_bytes",
			       "Stored bytes of chunk objects on BACKING.", G, true, 1 },
	[SS_BACKING_PACKS] = { "backing_packs", "backing_packs",
			       "Pack files on BACKING (-o packs=on), with a member in use.", G, false,
			       1 },
	[SS_BACKING_PACK_BYTES] = { "backing_pack_bytes", "backing_pack_bytes",
				    "Bytes of those pack files.", G, true, 1 },
	[SS_BACKING_PACK_LIVE] = { "backing_pack_live_bytes", "backing_pack_live_bytes",
				   "Of backing_pack_bytes, the members still in use (the rest is freed"
				   " when a pack's last member goes).", G, true, 1 },
	[SS_QUEUE] = { "upload_queue", "upload_queue", "Rows in the upload queue.", G, false, 1 },
	[SS_LAG] = { "upload_lag_seconds", "upload_lag_seconds", "Age of the oldest queued upload.", G,
		     false, 1 },
	[SS_GEN_DURABLE] = { "generations_durable", "generations_durable",
			     "Committed generations durable on BACKING.", G, false, 1 },
	[SS_CACHE_HITS] = { "cache_hits", "cache_hits_total", "Chunk reads served by the local cache.",
			    C, false, 1 },
	[SS_CACHE_MISSES] = { "cache_misses", "cache_misses_total", "Chunk reads fetched from BACKING.",
			      C, false, 1 },
	[SS_CACHE_HIT_RATE] = { "cache_hit_rate", "cache_hit_ratio",
				"cache_hits / (cache_hits + cache_misses).", R, false, 1 },
	[SS_FETCHED] = { "fetched_bytes", "fetched_bytes_total", "Bytes fetched from BACKING.", C, true,
			 1 },
	[SS_FETCH_ERRORS] = { "fetch_errors", "fetch_errors_total", "Fetches from BACKING that failed.",
			      C, false, 1 },
	[SS_EVICTED_CHUNKS] = { "evicted_chunks", "evicted_chunks_total",
				"Chunks evicted from the cache.", C, false, 1 },
	[SS_EVICTED_BYTES] = { "evicted_bytes", "evicted_bytes_total", "Bytes evicted from the cache.",
			       C, true, 1 },
	[SS_DIRTY_WAITS] = { "dirty_waits", "dirty_waits_total",
			     "Writes that waited for uploads (dirty bound).", C, false, 1 },
	[SS_WRITEBUF_BYTES] = { "writebuf_bytes", "writebuf_bytes",
				"Memory held by writers' buffers (bytes not yet cut into chunks).", G,
				true, 1 },
	[SS_WRITEBUF_BOUND] = { "writebuf_bound", "writebuf_bound_bytes",
				"Bound of writers' buffers (-o writebuf); 0: none.", G, true, 1 },
	[SS_WRITEBUF_PEAK] = { "writebuf_peak", "writebuf_peak_bytes",
			       "Most memory writers' buffers held at once since the mount.", G, true,
			       1 },
	[SS_WRITEBUF_STAGED] = { "writebuf_staged", "writebuf_staged_total",
				 "Writers moved to a local staging file at the writebuf bound.", C,
				 false, 1 },
	[SS_WRITEBUF_COPIED] = { "writebuf_copied", "writebuf_copied_bytes_total",
				 "Stored bytes copied back into staging files (a staged file rewritten"
				 " below where it was staged).", C, true, 1 },
	[SS_UP_CHUNKS] = { "uploaded_chunks", "uploaded_chunks_total", "Chunks uploaded since the mount.",
			   C, false, 1 },
	[SS_UP_BYTES] = { "uploaded_bytes", "uploaded_bytes_total", "Bytes uploaded since the mount.", C,
			  true, 1 },
	[SS_UP_MANIFESTS] = { "uploaded_manifests", "uploaded_manifests_total",
			      "Manifests written since the mount.", C, false, 1 },
	[SS_UP_FAILURES] = { "upload_failures", "upload_failures_total",
			     "Failed upload attempts since the mount.", C, false, 1 },
	[SS_BACKING_DOWN] = { "backing_down", "backing_down", "1 while BACKING does not answer.", G,
			      false, 1 },
	[SS_HASH_REUSED] = { "chunk_hashes_reused", "chunk_hashes_reused_total",
			     "Chunks of 64 KiB or more whose SHA-256 came from a byte-equal chunk "
			     "hashed moments before (replicated saves).", C, false, 1 },
	[SS_HASH_COMPUTED] = { "chunk_hashes_computed", "chunk_hashes_computed_total",
			       "Chunks of 64 KiB or more hashed by the writers.", C, false, 1 },
	[SS_FOLLOWS] = { "chunk_follows", "chunk_follows_total",
			 "Of chunk_hashes_reused: chunks a writer predicted from another writer of "
			 "the same bytes (compared byte for byte; neither chunked nor hashed).", C,
			 false, 1 },
	[SS_FOLLOW_WAITS] = { "chunk_follow_waits", "chunk_follow_waits_total",
			      "Writers that waited for another writer chunking the same bytes.", C,
			      false, 1 },
	[SS_FOLLOW_TAKEOVERS] = { "chunk_follow_takeovers", "chunk_follow_takeovers_total",
				  "Of those waits: writers that waited too long and chunked the "
				  "bytes themselves.", C, false, 1 },
	[SS_FOLLOW_WAIT_MS] = { "chunk_follow_wait_ms", "chunk_follow_wait_seconds_total",
				"Time those writers waited, in all.", C, false, 0.001 },
	[SS_PG_ROUND_TRIPS] = { "pg_round_trips", "pg_round_trips_total",
				"Round trips to the shared catalog's PostgreSQL (-o meta=; the FUSE "
				"path's connection).", C, false, 1 },
	[SS_PG_TXNS] = { "pg_transactions", "pg_transactions_total",
			 "Transactions on the shared catalog (-o meta=).", C, false, 1 },
	[SS_PG_RETRIES] = { "pg_retries", "pg_retries_total",
			    "Shared-catalog transactions run again whole (lost connection, "
			    "serialization failure, deadlock).", C, false, 1 },
	[SS_PG_RECONNECTS] = { "pg_reconnects", "pg_reconnects_total",
			       "Connections to the shared catalog made anew.", C, false, 1 },
};

#undef G
#undef C
#undef R

static void statset_set(struct statset *s, int k, uint64_t v)
{
	s->have[k] = true;
	s->v[k] = v;
}

static void statset_ratio(struct statset *s, int k, uint64_t a, uint64_t b)
{
	s->have[k] = true;
	s->ratio[k] = b ? (double)a / (double)b : 0.0;
}

struct statset_gens {
	uint64_t open, committed, pinned, ended, held;
};

static int statset_count_gen(void *arg, const struct cat_gen *g)
{
	struct statset_gens *c = arg;
	if (g->state == GEN_OPEN)
		c->open++;
	else if (g->state == GEN_COMMITTED)
		c->committed++;
	else if (g->state == GEN_HELD)
		c->held++;
	else
		c->ended++;
	if (g->pinned && (g->state == GEN_OPEN || g->state == GEN_COMMITTED || g->state == GEN_HELD))
		c->pinned++;
	return 0;
}

int statset_from_catalog(struct statset *s, struct cat *cat)
{
	struct cat_stats st;
	struct cat_cache_stats cs;
	struct statset_gens gc = { 0 };
	int rc = cat_stats(cat, &st);
	if (rc == 0)
		rc = cat_cache_stats(cat, &cs);
	if (rc == 0)
		rc = cat_gen_list_brief(cat, 0, true, statset_count_gen, &gc);
	if (rc != 0)
		return rc;
	statset_set(s, SS_INODES, st.inodes);
	statset_set(s, SS_FILES, st.files);
	statset_set(s, SS_LOGICAL, st.logical_bytes);
	statset_set(s, SS_REFERENCED, st.referenced_bytes);
	statset_set(s, SS_CHUNKS, st.chunks);
	statset_set(s, SS_UNIQUE, st.chunk_plain_bytes);
	statset_set(s, SS_STORED, st.chunk_stored_bytes);
	statset_set(s, SS_GEN_OPEN, gc.open);
	statset_set(s, SS_GEN_COMMITTED, gc.committed);
	statset_set(s, SS_GEN_PINNED, gc.pinned);
	statset_set(s, SS_GEN_ENDED, gc.ended);
	statset_set(s, SS_GEN_HELD, gc.held);
	statset_set(s, SS_GEN_DURABLE, cs.durable_gens);
	statset_set(s, SS_CACHED_CHUNKS, cs.cached_chunks);
	statset_set(s, SS_CACHED_BYTES, cs.cached_bytes);
	statset_set(s, SS_DIRTY_CHUNKS, cs.dirty_chunks);
	statset_set(s, SS_DIRTY_BYTES, cs.dirty_bytes);
	statset_set(s, SS_BACKING_CHUNKS, cs.uploaded_chunks);
	statset_set(s, SS_BACKING_BYTES, cs.uploaded_bytes);
	struct cat_pack_stats ps;
	if (cat_pack_stats(cat, &ps) == 0) {
		statset_set(s, SS_BACKING_PACKS, ps.packs);
		statset_set(s, SS_BACKING_PACK_BYTES, ps.bytes);
		statset_set(s, SS_BACKING_PACK_LIVE, ps.live_bytes);
	}
	statset_set(s, SS_QUEUE, cs.queued);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	statset_set(s, SS_LAG, cs.queued && cs.oldest_queued_ns > 0 && now_ns > cs.oldest_queued_ns
				       ? (uint64_t)((now_ns - cs.oldest_queued_ns) / 1000000000)
				       : 0);
	return 0;
}

void statset_put(struct statset *s, const char *key, const char *value)
{
	if (strcmp(key, "upload_last_error") == 0) {
		snprintf(s->last_error, sizeof(s->last_error), "%s", value);
		return;
	}
	for (int k = 0; k < SS_COUNT; k++)
		if (strcmp(statset_desc[k].key, key) == 0 && statset_desc[k].kind != STATSET_RATIO)
			statset_set(s, k, strtoull(value, NULL, 10));
}

void statset_finish(struct statset *s)
{
	/* the catalog's, from the catalog file or a shared node's daemon */
	if (s->have[SS_REFERENCED] && s->have[SS_UNIQUE])
		statset_ratio(s, SS_DEDUP, s->v[SS_REFERENCED], s->v[SS_UNIQUE]);
	if (s->have[SS_UNIQUE] && s->have[SS_STORED])
		statset_ratio(s, SS_COMPRESSION, s->v[SS_UNIQUE], s->v[SS_STORED]);
	if (s->have[SS_CC_HITS] && s->have[SS_CC_MISSES])
		statset_ratio(s, SS_CC_HIT_RATE, s->v[SS_CC_HITS], s->v[SS_CC_HITS] + s->v[SS_CC_MISSES]);
	if (s->have[SS_CACHE_HITS] && s->have[SS_CACHE_MISSES])
		statset_ratio(s, SS_CACHE_HIT_RATE, s->v[SS_CACHE_HITS],
			      s->v[SS_CACHE_HITS] + s->v[SS_CACHE_MISSES]);
}

/* A label value: backslash, double quote and newline escaped, nothing else
 * (the exposition format has no other escapes). */
static void statset_label(FILE *f, const char *name, const char *value, bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", name);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void statset_labels(FILE *f, const char *cache, const char *mountpoint)
{
	fputc('{', f);
	if (cache)
		statset_label(f, "cache", cache, true);
	if (mountpoint)
		statset_label(f, "mountpoint", mountpoint, !cache);
	fputc('}', f);
}

void statset_prometheus(const struct statset *s, FILE *f, const char *cache, const char *mountpoint,
			bool daemon_up)
{
	for (int k = 0; s && k < SS_COUNT; k++) {
		const struct statset_desc *d = &statset_desc[k];
		if (!s->have[k])
			continue;
		fprintf(f, "# HELP ckptfs_%s %s\n# TYPE ckptfs_%s %s\nckptfs_%s", d->prom, d->help,
			d->prom, d->kind == STATSET_COUNTER ? "counter" : "gauge", d->prom);
		statset_labels(f, cache, mountpoint);
		if (d->kind == STATSET_RATIO)
			fprintf(f, " %.6f\n", s->ratio[k]);
		else if (d->prom_scale != 1)
			fprintf(f, " %.6f\n", (double)s->v[k] * d->prom_scale);
		else
			fprintf(f, " %" PRIu64 "\n", s->v[k]);
	}
	fputs("# HELP ckptfs_daemon_up 1 if the daemon answered, 0 if it is not running (stale "
	      "mount, or offline).\n# TYPE ckptfs_daemon_up gauge\nckptfs_daemon_up",
	      f);
	statset_labels(f, cache, mountpoint);
	fprintf(f, " %d\n", daemon_up ? 1 : 0);
}
