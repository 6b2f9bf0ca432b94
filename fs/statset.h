/* statset — the named statistics of one ckptfs cache, and their Prometheus
 * form: one table for `ckptfs-admin stats` (text, --json, --prometheus) and
 * the daemon's HTTP endpoint (-o metrics=ADDR:PORT, fs/metrics.c), so a
 * metric has the same name, help and unit wherever it is read.
 *
 * A value comes from the catalog (statset_from_catalog: works offline, from a
 * read-only connection) or from the daemon's live counters, as the "KEY
 * VALUE" pairs of its control channel's stats verb (statset_put). Ratios are
 * derived last (statset_finish).
 *
 * Invariants:
 *  1. Every key has a Prometheus name in base units: seconds and bytes, a
 *     counter ends in _total, nothing else does (checked by promtool in
 *     tests/integration/t_ecosys.sh).
 *  2. The text keys are those of `stats` before the Prometheus names were
 *     fixed: scripts reading "key value" lines keep working. */
#ifndef CKPTFS_STATSET_H
#define CKPTFS_STATSET_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct cat;

enum statset_kind { STATSET_GAUGE, STATSET_COUNTER, STATSET_RATIO };

enum statset_key {
	SS_INODES, SS_FILES, SS_LOGICAL, SS_REFERENCED, SS_CHUNKS, SS_UNIQUE, SS_STORED, SS_DEDUP,
	SS_COMPRESSION, SS_GEN_OPEN, SS_GEN_COMMITTED, SS_GEN_PINNED, SS_GEN_ENDED, SS_GEN_HELD, SS_CC_BYTES,
	SS_CC_BUDGET, SS_CC_HITS, SS_CC_MISSES, SS_CC_HIT_RATE, SS_WRITE_BACK, SS_CACHED_CHUNKS,
	SS_CACHED_BYTES, SS_CACHE_BOUND, SS_DIRTY_CHUNKS, SS_DIRTY_BYTES, SS_DIRTY_BOUND,
	SS_BACKING_CHUNKS, SS_BACKING_BYTES, SS_BACKING_PACKS, SS_BACKING_PACK_BYTES,
	SS_BACKING_PACK_LIVE, SS_QUEUE, SS_LAG, SS_GEN_DURABLE, SS_CACHE_HITS,
	SS_CACHE_MISSES, SS_CACHE_HIT_RATE, SS_FETCHED, SS_FETCH_ERRORS, SS_EVICTED_CHUNKS,
	SS_EVICTED_BYTES, SS_DIRTY_WAITS, SS_WRITEBUF_BYTES, SS_WRITEBUF_BOUND,
	SS_WRITEBUF_PEAK, SS_WRITEBUF_STAGED, SS_WRITEBUF_COPIED, SS_UP_CHUNKS, SS_UP_BYTES, SS_UP_MANIFESTS, SS_UP_FAILURES,
	SS_BACKING_DOWN, SS_HASH_REUSED, SS_HASH_COMPUTED, SS_FOLLOWS, SS_FOLLOW_WAITS,
	SS_FOLLOW_TAKEOVERS, SS_FOLLOW_WAIT_MS, SS_PG_ROUND_TRIPS, SS_PG_TXNS,
	SS_PG_RETRIES, SS_PG_RECONNECTS, SS_COUNT
};

struct statset_desc {
	const char *key;  /* text and JSON key */
	const char *prom; /* Prometheus name without the ckptfs_ prefix */
	const char *help;
	enum statset_kind kind;
	bool bytes;       /* text form adds a human size */
	double prom_scale; /* value × scale = the Prometheus value (ms → s) */
};

extern const struct statset_desc statset_desc[SS_COUNT];

struct statset {
	bool have[SS_COUNT];
	uint64_t v[SS_COUNT];
	double ratio[SS_COUNT];
	char last_error[256]; /* upload_last_error, "" if none */
};

/* Fills what the catalog knows (files, bytes, generations, cache and upload
 * queue). 0 or -errno. */
int statset_from_catalog(struct statset *s, struct cat *cat);
/* One "KEY VALUE" of the daemon's stats verb; unknown keys are ignored. */
void statset_put(struct statset *s, const char *key, const char *value);
/* Derives the ratios from what is there. */
void statset_finish(struct statset *s);
/* The Prometheus text exposition format (version 0.0.4): HELP, TYPE and one
 * sample per value present, labelled cache="…" (and mountpoint="…" if not
 * NULL), then ckptfs_daemon_up. cache may be NULL (a stale mount). */
void statset_prometheus(const struct statset *s, FILE *f, const char *cache, const char *mountpoint,
			bool daemon_up);

#endif
