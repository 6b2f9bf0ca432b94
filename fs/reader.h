/* reader — file bytes from chunk lists, through a small cache of decoded chunks.
 *
 * A read is mapped (reader_map) to pieces of cached chunks, pinned while the
 * FUSE reply is written straight from them (fuse_reply_iov: no copy in the
 * daemon), then unpinned (reader_unmap). reader_read copies the same pieces
 * into a buffer, for callers that need one.
 *
 * Invariants:
 *  1. Bytes handed out come from store_load (or a fetch from BACKING), which
 *     verified them against their hash; a chunk that fails is an -EIO for the
 *     read, logged with the file (inode), the offset and the chunk.
 *  2. The cache holds at most its byte budget of decoded chunks that no reader
 *     is using; an entry in use (pinned) is never freed or changed. Memory does
 *     not grow with file size.
 *  3. A slot is free (no chunk, not loading), loading (one thread reads it,
 *     pinned by that thread alone, and leads the flight on its hash,
 *     fs/lib/flight.h: one load per chunk at a time, and readers that want
 *     it meanwhile follow that flight, then look again), or loaded (a chunk,
 *     pinned by `users` readers); it goes free → loading → loaded or free,
 *     loaded → free only unpinned. Every pin is released exactly once
 *     (reader_unmap).
 *  4. Readahead (prefetch) follows sequential readers: per file, a read that
 *     starts near where that file's last read ended (READER_SEQ_SLACK) doubles
 *     its window, from READER_AHEAD_MIN up to -o prefetch chunks; any other
 *     read sets it back to READER_AHEAD_MIN. The chunks of the window are
 *     loaded by the readahead threads, several at once, through the same
 *     cache_get as a read (invariants 1 and 3: verified, one load per chunk,
 *     a read of a chunk being read ahead waits for that load); what the
 *     memory budget has no room for goes to the disk cache's prefetch
 *     (fetch_ahead), which fetches only while the cache has room to keep the
 *     copy (cache.h C5, C11). The window is offered again at every read (a
 *     chunk in memory, loading or queued is not queued twice; one that found
 *     no room before is tried again); the catalog is asked for extents past
 *     the read's own lookup only while what was offered (ahead_end) does not
 *     reach half the window; a queued chunk its reader has passed is
 *     dropped. */
#ifndef CKPTFS_READER_H
#define CKPTFS_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "catalog.h"
#include "hash.h"
#include "store.h"

struct cat;
struct cache;
struct reader;

/* Where chunks come from: in the daemon the disk cache in front of BACKING
 * (cache_load, cache_prefetch of fs/cache.h, called with reader_new's cache
 * handle); a test hands in its own. Callbacks rather than calls so that the
 * reader links without the cache and its threads. */
typedef int (*reader_load_fn)(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
			      struct store_chunk *out);
typedef void (*reader_fetch_ahead_fn)(struct cache *c, const uint8_t hash[HASH_LEN]);

/* -o prefetch: chunks read ahead of a sequential reader of a file at most
 * (invariant 4); 0 in reader_config: this default. */
#define READER_PREFETCH_DEFAULT 8
#define READER_PREFETCH_MAX 64

struct reader_config {
	uint64_t budget_bytes;            /* -o chunk_cache: decoded chunks kept in memory */
	/* -o prefetch: chunks read ahead of a sequential reader, at most
	 * READER_PREFETCH_MAX; 0: READER_PREFETCH_DEFAULT; negative: none */
	int prefetch;
	reader_load_fn load;              /* required */
	/* chunks read ahead that the budget has no room for: into the disk
	 * cache instead (cache_prefetch); NULL: those are not read ahead */
	reader_fetch_ahead_fn fetch_ahead;
};

/* READER_PROBE: the committed extents, with no readahead — a look at a few
 * headers (proof.c, tracker files), not a stream: nothing is fetched or
 * decoded ahead, so nothing comes back into the cache behind a reclaim. */
enum reader_source { READER_COMMITTED, READER_PENDING, READER_PROBE };

/* The reader of the catalog's extents (cat), loading chunks through cfg->load
 * with cache. Its readahead threads start at the first read (after the daemon
 * forked). 0 or -ENOMEM / -EINVAL (no load). */
int reader_new(const struct reader_config *cfg, struct cat *cat, struct cache *cache,
	       struct reader **out);
/* Joins the readahead threads; nothing may be pinned. NULL is allowed. */
void reader_free(struct reader *r);

/* Copies chunk bytes [chunk_off, chunk_off+len) of ext's chunk into out. */
int reader_copy_extent(struct reader *r, uint64_t ino, const struct cat_extent *ext,
		       uint64_t chunk_off, size_t len, char *out);

/* Fills out with file bytes [off, off+len) of ino, from the committed extents
 * (or the writer's pending ones); holes read as zeros. The caller has clamped
 * len to the file size. */
int reader_read(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off,
		size_t len, char *out);

/* One chunk held for a reader: a pinned cache slot, or (the cache full of
 * pinned entries) a private load; READER_PIN_NONE for a piece of a hole. */
#define READER_PIN_NONE (-2)
#define READER_PIN_OWN (-1)
struct reader_pin {
	int slot;
	struct store_chunk own;
};

/* File bytes [off, off+len) as up to READER_MAX_PIECES pieces in file order. */
#define READER_MAX_PIECES 16
struct reader_map {
	int n;
	size_t len; /* bytes mapped: all of the range, or a prefix when pieces ran out */
	struct iovec iov[READER_MAX_PIECES];
	struct reader_pin pin[READER_MAX_PIECES];
};

/* Maps file bytes [off, off+len) of ino (holes as zeros; the caller has
 * clamped len to the file size), and starts readahead of the chunks after
 * them. Returns 0 with m->len > 0 bytes mapped (release with reader_unmap), or
 * a negative errno with nothing pinned. */
int reader_map(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off, size_t len,
	       struct reader_map *m);
void reader_unmap(struct reader *r, struct reader_map *m);

struct reader_stats {
	uint64_t hits, misses, bytes, budget;
	/* where reads waited (invariant 4): chunks loaded ahead, reads that found
	 * their chunk loaded ahead, reads that waited for a load under way (and
	 * how long), reads that loaded their chunk themselves (and how long) */
	uint64_t ahead_loaded, ahead_hits, waits, wait_ns, own_loads, own_load_ns;
};
void reader_stats(struct reader *r, struct reader_stats *out);

#endif
