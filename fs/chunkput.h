/* chunkput — putting a chunk: its object into the store, once, and its
 * "stored" record into the catalog, with the cache's dirty accounting and
 * the uploader told.
 *
 * The writer (writer.c) cuts and hashes chunks and adds them to a file's
 * pending extents; when the catalog says a chunk must be stored, it hands
 * the chunk here (chunkput_store) and goes on. The chunk is then stored in
 * one of three ways: by this call, behind the writer on a store-queue
 * thread (storeq.h) from recent's pinned copy, or by another writer that
 * is storing the same bytes right now (a flight, flight.h). In the last two
 * cases the writer holds an await, which it collects (chunkput_reap) before
 * anything reads, truncates, stages, commits or drops its pending chunks.
 *
 * Invariants:
 *  P1. One object per flight: writers of one hash at once write its object
 *      once (flight.h F1); a writer told to store a chunk that landed after
 *      that answer does not write it again (F3).
 *  P2. A chunk is recorded as stored (cat_chunk_stored) only after its
 *      object was written, and counted dirty (dirty_add) only once recorded.
 *  P3. The cache's backpressure (dirty_wait) is the writer's, before it
 *      hands a chunk over: a store-queue job never waits for uploads, so
 *      that stopping the queue cannot wait for BACKING.
 *  P4. A failed put is the result of every await on it: the writers that
 *      share the chunk fail, and the next writer of the hash stores it
 *      again (F3).
 *  P5. At most CHUNKPUT_AWAITS awaits per writer: a writer that holds them
 *      all collects them (waiting) before it takes another.
 *  P6. A chunk put from recent's pinned copy (large enough to be written
 *      from it, store.h STORE_DIRECT_MIN) has the CRC-32C of that copy
 *      computed here, on the writer's thread, by the writer that leads its
 *      flight, and carried with the pin (recent.h R7) to the object's write
 *      (store.c S11): the writer has just hashed those bytes, so they are
 *      still in its CPU's cache; a store-queue thread would read them from
 *      memory. Followers of a flight compute nothing.
 *  P7. P2 with small.db's puts batched (fs/lib/storesmall.h T8): the batch
 *      is turned on only together with the catalog's commit hook that
 *      commits it before every commit of the catalog (catalog.c invariant
 *      14), in chunkput_small_batch, so "written" in P2 means "committed no
 *      later than any catalog commit that names it". A failed batch stops
 *      the catalog's commits for good (T9). On the shared engine (-o meta=)
 *      it is left off: puts commit one by one there.
 *
 * Thread-safe; an awaits set belongs to one writer (under its node's lock). */
#ifndef CKPTFS_CHUNKPUT_H
#define CKPTFS_CHUNKPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "chunker.h"
#include "flight.h"
#include "hash.h"
#include "reader.h"

struct chunkput;
struct cache;
struct recent;
struct recent_pred;
struct reader;
struct store;
struct storeq;
struct uploader;
struct wbuf;

#define CHUNKPUT_AWAITS 8 /* flights one writer waits for at most (P5) */

/* What the chunk put and its writers read of the daemon's options. */
struct chunkput_config {
	struct chunker_params chunking;
	const char *staging_dir; /* CACHE/staging: copied */
	uint64_t writebuf;       /* the writers' buffers' budget (wbuf.h); 0: no bound */
};

/* The cache's accounting (cache.h): main.c passes cache_dirty_wait, ... and
 * the cache; the unit tests a fake. c may be NULL (then nothing is called). */
struct chunkput_cache {
	struct cache *c;
	int (*dirty_wait)(struct cache *c, uint64_t len);
	void (*dirty_add)(struct cache *c, uint64_t stored_len);
	int (*disk_wait)(struct cache *c, uint64_t len);
	int (*make_room)(struct cache *c, uint64_t len);
};

/* The uploader: told when a chunk was recorded (main.c: uploader_kick). */
struct chunkput_kick {
	struct uploader *u;
	void (*kick)(struct uploader *u);
};

/* The reader, for writers that read back their committed and pending bytes
 * (reader.h's reader_read and reader_copy_extent). */
struct chunkput_reader {
	struct reader *r;
	int (*read)(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off,
		    size_t len, char *out);
	int (*copy_extent)(struct reader *r, uint64_t ino, const struct cat_extent *ext,
			   uint64_t chunk_off, size_t len, char *out);
};

/* The handles a writer works with, as chunkput_new got them. */
struct chunkput_env {
	struct chunker_params chunking;
	const char *staging_dir;
	struct cat *cat;
	struct store *store;
	struct recent *recent; /* NULL: every chunk is hashed */
	struct chunkput_reader reader;
	struct wbuf *wbuf;     /* the writers' buffers' budget, the chunk put's */
};

/* A writer's chunks stored elsewhere that it awaits (P5); starts zeroed. */
struct chunkput_awaits {
	struct flight ref[CHUNKPUT_AWAITS];
	size_t n;
};

/* storeq may be NULL (every chunk is stored by its writer). The caller
 * started it; chunkput_stop_queue stops it (chunkput_free does not). */
int chunkput_new(const struct chunkput_config *cfg, struct cat *cat, struct store *store,
		 struct storeq *storeq, struct recent *recent, const struct chunkput_cache *cache,
		 const struct chunkput_kick *kick, const struct chunkput_reader *reader,
		 struct chunkput **out);
/* After every writer is gone. NULL is allowed. */
void chunkput_free(struct chunkput *cp);

const struct chunkput_env *chunkput_env(const struct chunkput *cp);

/* P7: small.db's puts into store batched behind cat's commit hook; 0, or
 * -ENOTSUP (nothing changed) on the shared engine. Before any put. */
int chunkput_small_batch(struct cat *cat, struct store *store);

/* Landings so far: read right after the catalog said "store it" (P1). */
uint64_t chunkput_lands(struct chunkput *cp);

/* Puts the chunk hash = SHA-256(data[0..len)) that the catalog said must be
 * stored when `since` puts had landed. pin: the bytes pinned in recent's
 * copy (data == pin->copy), which the object is written from without a
 * copy, and maybe behind the writer; or NULL. 0 does not mean stored: it
 * may be awaited in aw (collect with chunkput_reap). */
int chunkput_store(struct chunkput *cp, struct chunkput_awaits *aw, const uint8_t hash[HASH_LEN],
		   const uint8_t *data, size_t len, const struct recent_pred *pin, uint64_t since);

/* Ends the awaits whose puts landed (all, with wait); the first failure. */
int chunkput_reap(struct chunkput *cp, struct chunkput_awaits *aw, bool wait);
/* Waits until every put aw awaits has landed, keeping the awaits (readers
 * of a writer's pending chunks, which do not change the writer). */
void chunkput_wait(struct chunkput *cp, const struct chunkput_awaits *aw);

/* Writers awaiting the put of hash in flight now (0: none in flight). */
int chunkput_awaiting(struct chunkput *cp, const uint8_t hash[HASH_LEN]);

/* A write of len bytes to the cache's disk other than a chunk (a staging
 * file): waits for the disk's reserve (cache_disk_wait). */
int chunkput_disk_wait(struct chunkput *cp, uint64_t len);
/* A write met a full disk: evict clean chunks (cache_make_room). */
int chunkput_make_room(struct chunkput *cp, uint64_t len);

/* Daemon teardown. The store queue stops (storeq_stop: every chunk queued
 * lands); puts after it are written by their writers. */
void chunkput_stop_queue(struct chunkput *cp);
/* The cache and the uploader stop: puts after it (writers committed at the
 * very end) neither wait, count nor kick. */
void chunkput_detach(struct chunkput *cp);

#endif
