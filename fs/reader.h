/* reader — file bytes from chunk lists, through a small cache of decoded chunks.
 *
 * Invariants:
 *  1. Bytes handed out come from store_get, which verified them against their
 *     hash; a chunk that fails is an -EIO for the read, logged with the file
 *     (inode), the offset and the chunk.
 *  2. The cache holds at most its byte budget of decoded chunks that no reader
 *     is using; an entry in use is never freed. Memory does not grow with file
 *     size. */
#ifndef CKPTFS_READER_H
#define CKPTFS_READER_H

#include <stddef.h>
#include <stdint.h>

#include "catalog.h"

struct ckptfs;
struct chunk_cache;

int chunk_cache_new(uint64_t budget_bytes, struct chunk_cache **out);
void chunk_cache_free(struct chunk_cache *cc);

/* Copies chunk bytes [chunk_off, chunk_off+len) of ext's chunk into out. */
int reader_copy_extent(struct ckptfs *fs, uint64_t ino, const struct cat_extent *ext,
		       uint64_t chunk_off, size_t len, char *out);

/* Fills out with file bytes [off, off+len) of ino, from the committed extents
 * (or the writer's pending ones); holes read as zeros. The caller has clamped
 * len to the file size. */
enum reader_source { READER_COMMITTED, READER_PENDING };
int reader_read(struct ckptfs *fs, uint64_t ino, enum reader_source src, uint64_t off,
		size_t len, char *out);

struct chunk_cache_stats {
	uint64_t hits, misses, bytes;
};
void chunk_cache_stats(struct chunk_cache *cc, struct chunk_cache_stats *out);

#endif
