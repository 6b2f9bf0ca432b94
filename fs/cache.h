/* cache — the local disk cache of chunk objects in front of BACKING.
 *
 * The cache is a store (fs/lib/store.c) under CACHE/. Writers put new objects
 * into it (dirty until the uploader has copied them to BACKING); readers get
 * objects from it, and on a miss this module fetches the object from
 * BACKING, checks it against its hash, keeps a copy and hands out the bytes.
 *
 * Invariants:
 *  C1. Bytes handed out always match their hash: a fetched object is checked
 *      (bkobj_get: store_fetch_check, SHA-256) before it is used or kept.
 *  C2. Only clean objects (uploaded) are evicted, never those of a pinned
 *      generation; those of a file with an open handle only when the disk or
 *      a waiting writer is short of room (cat_evict_candidates). An evicted
 *      object that a reader still needed is fetched again.
 *  C3. A writer does not fail because the cache is full of dirty data: it waits
 *      (cache_dirty_wait) while uploads or evictions make room. Only when
 *      none is made for backing_timeout (BACKING takes nothing and nothing
 *      clean is left) does it fail, with ENOSPC, never EIO.
 *  C4. A read that needs BACKING while it is away waits up to the backing
 *      timeout, then fails with EIO; it never returns other bytes. Away is
 *      any failure to read (no answer, a lost connection, a read error: EIO
 *      too); a damaged object is a verdict, failed at once (bkobj.h B1).
 *  C5. A fetch keeps a copy only while the cache is under its high watermark
 *      and its disk keeps half of its reserve free after the write (C6),
 *      and only a copy the catalog records as cached: an object file in the
 *      cache that the catalog does not call cached is a leak (cache_keep_copy).
 *  C6. A reserve of the cache's disk (1/16, 16 MiB to 1 GiB) is kept out of
 *      the bound and free, for the catalog, staging files and objects being
 *      written: a chunk is stored only while the disk keeps half of it free
 *      after the write, and a store that still meets a full disk evicts and
 *      retries (cache_make_room) before it fails.
 *  C7. One fetch per chunk at a time, whoever asks (readers, prefetchers): a
 *      flight on its hash (fs/lib/flight.h). Others that miss the chunk
 *      meanwhile wait for that fetch to land, then read the copy it kept;
 *      without one (C5, or the fetch failed) one of them fetches again.
 *  C8. The cached bytes the bound is held to count small.db's WAL as it is
 *      on disk (fs/lib/storesmall.h T5: at most 16 MiB at rest, more only
 *      while a checkpoint is held up), re-read at every resync: the evictor
 *      makes room for it by evicting objects, as it does for their bytes.
 *      The rows themselves are counted as the objects they are (their
 *      stored bytes, in the catalog); the file's page slack is not (T4
 *      gives freed pages back).
 *  C9. An object is removed from the cache only under the catalog lock, in
 *      the hold that decides it goes (catalog.c invariant 8): the evictor's
 *      and a damaged copy's through cat_chunk_evict, a fetched copy the
 *      catalog could not record through cat_chunk_drop_unclaimed. Between a
 *      decision and a removal later, a writer could store the same bytes
 *      anew (the row swept meanwhile), and the late removal would take its
 *      only copy.
 * C10. In shared mode (-o meta=) an open file's copy that a local writer
 *      names is evicted only once PostgreSQL pins it for that writer
 *      (cat_chunks_evict: catalog_shared_data.c S11, one round trip per
 *      CACHE_EVICT_STEP candidates that writers name, none otherwise):
 *      PostgreSQL counts no pending reference, and a reclaim elsewhere
 *      would remove BACKING's object, the writer's commit's only one. A
 *      copy that cannot be pinned stays (and the commit puts it on BACKING
 *      again). A file larger than the cache is still written (C3): its
 *      writer's uploaded copies go under pins.
 * C11. A prefetch (cache_prefetch) fetches only while the cache is under its
 *      high watermark by a whole object, so that C5 keeps the copy: one
 *      fetched ahead and not kept would be fetched again by its reader. The
 *      bound (cache_size) is thus also the budget of what is read ahead.
 * C12. A read's fetch from BACKING runs on a job thread (C4: the reader can
 *      give up on a BACKING that hangs); job threads are kept idle for the
 *      next jobs, and a job queued finds an idle thread or starts one, so
 *      that no job waits behind another's hung fetch. Its waiter alone is
 *      woken when it ends. Why: a thread per fetch and every waiter woken
 *      per finished fetch cost a cold restore a clone and a dozen wake-ups
 *      per ~1 MiB chunk (docs/BENCH.md, s31-restore). */
#ifndef CKPTFS_CACHE_H
#define CKPTFS_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "store.h"

struct backing;
struct cache;
struct cat;
struct store;

struct cache_stats {
	uint64_t hits, misses, fetched_bytes, fetch_errors, evicted_chunks, evicted_bytes;
	uint64_t cached_bytes, dirty_bytes; /* as this module tracks them */
	uint64_t dirty_waits;               /* writers that had to wait */
	uint64_t stored_chunks;             /* objects writers stored (cache_dirty_add) */
	uint64_t job_threads_started;       /* C12: fetch job threads started so far */
};

/* The option values the cache reads (main.c fills it from the options). */
struct cache_config {
	char dir[PATH_MAX];          /* CACHE: its disk is asked for free room (C6), logs */
	uint64_t cache_size;         /* bound of cached bytes; 0: 90% of what the disk holds */
	uint64_t dirty_max;          /* bound of bytes not yet on BACKING; 0: 3/4 of the bound */
	unsigned backing_timeout_ms; /* C3, C4 */
	size_t chunk_max;            /* the largest chunk's plain length (chunker params) */
};

/* What the cache asks of the daemon above it, as callbacks (none may call
 * back into the cache). Either may be NULL: never stopping, nothing open. */
struct cache_hooks {
	/* true once the daemon was told to stop: waits only BACKING could end
	 * (C3's backpressure, cache_make_room) give up, since libfuse joins its
	 * workers before anything else stops */
	bool (*stopping)(void *arg);
	void *stopping_arg;
	/* inodes with a handle open, up to max, returns how many: C2 keeps their
	 * chunks until the disk or a waiting writer is short of room */
	size_t (*opened)(void *arg, uint64_t *inos, size_t max);
	void *opened_arg;
};

/* Starts the eviction and prefetch threads; reads the byte counts from the
 * catalog. cat, store and backing must be open and outlive the cache. */
int cache_start(const struct cache_config *cfg, struct cat *cat, struct store *store,
		struct backing *backing, const struct cache_hooks *hooks, struct cache **out);
void cache_stop(struct cache *c); /* NULL is allowed */

/* The plain bytes of a chunk (at most cap), in buffers handed to the caller
 * (store_chunk_free): from the cache (store_load), else from BACKING (C1, C4).
 * -EIO (logged with the reason) if the chunk cannot be had. */
int cache_load(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap, struct store_chunk *out);

/* Asks for a chunk to be brought into the cache in the background (readahead);
 * a no-op if it is there, queued, or the queue is full. */
void cache_prefetch(struct cache *c, const uint8_t hash[HASH_LEN]);

/* Writers: before storing a new object of about len bytes, waits while it
 * would pass the dirty bound or eat into the disk's reserve (C3, C6); 0, or
 * -ENOSPC (logged) after backing_timeout without progress. After
 * storing it, cache_dirty_add counts it. With c NULL (the daemon's teardown,
 * after cache_stop) they do nothing. */
int cache_dirty_wait(struct cache *c, uint64_t len);
void cache_dirty_add(struct cache *c, uint64_t stored_len);
/* Other writes to the cache's disk (staging files): the same wait, for the
 * disk's reserve alone. */
int cache_disk_wait(struct cache *c, uint64_t len);
/* A write of about len bytes met a full disk (ENOSPC: no bytes or no
 * inodes left): evicts clean chunks (open files' too) now, on the caller's
 * thread, whatever the byte counts say; with none, waits up to
 * backing_timeout for an upload to make one evictable (not at all once the
 * daemon stops). 0 if anything was freed (retry the write), else -ENOSPC. */
int cache_make_room(struct cache *c, uint64_t len);
/* upload.h U13: BACKING's copy of a chunk was found damaged (ckptfs-admin
 * verify). If the cache's copy passes SHA-256, the chunk is made dirty again
 * and queued to be put from it (one warn line); the caller kicks the
 * uploader. -ENOENT if not both cached and uploaded, -EIO if the cache's copy
 * is not good (nothing to put from), -EOPNOTSUPP on -o meta=. */
int cache_reput(struct cache *c, const uint8_t hash[HASH_LEN]);
/* The uploader: an object became clean. */
void cache_dirty_done(struct cache *c, uint64_t stored_len);

void cache_get_stats(struct cache *c, struct cache_stats *out);

#endif
