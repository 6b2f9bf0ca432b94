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
 *     not grow with file size. */
#ifndef CKPTFS_READER_H
#define CKPTFS_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "catalog.h"
#include "store.h"

struct ckptfs;
struct chunk_cache;

/* READER_PROBE: the committed extents, with no readahead — a look at a few
 * headers (proof.c, tracker files), not a stream: nothing is fetched or
 * decoded ahead, so nothing comes back into the cache behind a reclaim. */
enum reader_source { READER_COMMITTED, READER_PENDING, READER_PROBE };

int chunk_cache_new(uint64_t budget_bytes, struct chunk_cache **out);
void chunk_cache_free(struct chunk_cache *cc);

/* Copies chunk bytes [chunk_off, chunk_off+len) of ext's chunk into out. */
int reader_copy_extent(struct ckptfs *fs, uint64_t ino, const struct cat_extent *ext,
		       uint64_t chunk_off, size_t len, char *out);

/* Fills out with file bytes [off, off+len) of ino, from the committed extents
 * (or the writer's pending ones); holes read as zeros. The caller has clamped
 * len to the file size. */
int reader_read(struct ckptfs *fs, uint64_t ino, enum reader_source src, uint64_t off,
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
int reader_map(struct ckptfs *fs, uint64_t ino, enum reader_source src, uint64_t off, size_t len,
	       struct reader_map *m);
void reader_unmap(struct ckptfs *fs, struct reader_map *m);

struct chunk_cache_stats {
	uint64_t hits, misses, bytes;
};
void chunk_cache_stats(struct chunk_cache *cc, struct chunk_cache_stats *out);

#endif
