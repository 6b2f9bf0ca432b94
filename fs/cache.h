/* cache — the local disk cache of chunk objects in front of BACKING.
 *
 * The cache is a store (fs/store.c) under CACHE/. Writers put new objects
 * into it (dirty until the uploader has copied them to BACKING); readers get
 * objects from it, and on a miss this module fetches the object from
 * BACKING, checks it against its hash, keeps a copy and hands out the bytes.
 *
 * Invariants:
 *  C1. Bytes handed out always match their hash: a fetched object is checked
 *      (store_object_check) before it is used or kept.
 *  C2. Only clean objects (uploaded) are evicted, never those of a pinned
 *      generation or of a file with an open handle (cat_evict_candidates).
 *      An evicted object that a reader still needed is fetched again.
 *  C3. A writer never fails because the cache is full of dirty data: it waits
 *      (cache_dirty_wait) until uploads bring dirty bytes under the bound.
 *  C4. A read that needs BACKING while it is away waits up to the backing
 *      timeout, then fails with EIO; it never returns other bytes.
 *  C5. A fetch keeps a copy only while the cache is under its high watermark,
 *      and only a copy the catalog records as cached: an object file in the
 *      cache that the catalog does not call cached is a leak (cache_keep_copy). */
#ifndef CKPTFS_CACHE_H
#define CKPTFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "store.h"

struct ckptfs;
struct cache;

struct cache_stats {
	uint64_t hits, misses, fetched_bytes, fetch_errors, evicted_chunks, evicted_bytes;
	uint64_t cached_bytes, dirty_bytes; /* as this module tracks them */
	uint64_t dirty_waits;               /* writers that had to wait */
};

/* Starts the eviction and prefetch threads; reads the byte counts from the
 * catalog. fs->store, fs->backing, fs->cat and fs->nodes must be open. */
int cache_start(struct ckptfs *fs, struct cache **out);
void cache_stop(struct cache *c); /* NULL is allowed */

/* The plain bytes of a chunk (at most cap), in buffers handed to the caller
 * (store_chunk_free): from the cache (store_load), else from BACKING (C1, C4).
 * -EIO (logged with the reason) if the chunk cannot be had. */
int cache_load(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap, struct store_chunk *out);

/* Asks for a chunk to be brought into the cache in the background (readahead);
 * a no-op if it is there, queued, or the queue is full. */
void cache_prefetch(struct cache *c, const uint8_t hash[HASH_LEN]);

/* Writers: before storing a new object of about len bytes, waits while dirty
 * bytes are over the bound (C3); after storing it, counts it. With c NULL (the
 * daemon's teardown, after cache_stop) they do nothing. */
void cache_dirty_wait(struct cache *c, uint64_t len);
void cache_dirty_add(struct cache *c, uint64_t stored_len);
/* The uploader: an object became clean. */
void cache_dirty_done(struct cache *c, uint64_t stored_len);

void cache_get_stats(struct cache *c, struct cache_stats *out);

#endif
