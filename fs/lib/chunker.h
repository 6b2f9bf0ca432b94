/* chunker — content-defined chunking (FastCDC, normalized chunking).
 *
 * Cuts a byte stream into chunks whose boundaries depend only on the bytes
 * near them, so the same content at a shifted offset (torch.save archives of
 * different names) is cut the same way and deduplicates.
 *
 * Invariants:
 *  1. Boundaries are a pure function of the bytes and the parameters: feeding
 *     the same stream in pieces of any sizes yields the same chunks.
 *  2. Every chunk is min_size <= len <= max_size, except the stream's last.
 *  3. The gear table is fixed forever (changing it changes every chunk name
 *     and loses dedup against existing stores).
 *  4. No allocation: the chunker keeps O(1) state; the caller owns the bytes. */
#ifndef CKPTFS_CHUNKER_H
#define CKPTFS_CHUNKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct chunker_params {
	size_t min_size; /* no boundary before this many bytes */
	size_t avg_size; /* power of two; normalized chunking target */
	size_t max_size; /* forced boundary here */
};

/* The store's parameters: 512 KiB / 1 MiB / 4 MiB. */
extern const struct chunker_params chunker_default_params;

struct chunker {
	struct chunker_params params;
	uint64_t mask_small; /* harder mask, used before avg_size */
	uint64_t mask_large; /* easier mask, used after avg_size */
	uint64_t fp;         /* rolling gear fingerprint */
	size_t pos;          /* bytes of the current chunk seen so far */
};

/* Returns 0, or -EINVAL if the parameters are not 0 < min <= avg <= max with
 * avg a power of two. */
int chunker_init(struct chunker *c, const struct chunker_params *p);

/* Starts a new chunk (after a boundary, or a forced cut by the caller). */
void chunker_reset(struct chunker *c);

/* Scans len bytes that continue the current chunk. Returns how many of them
 * belong to the current chunk: if *boundary is set, the chunk ends after that
 * many bytes and the chunker has been reset for the next one; otherwise the
 * return is len and the chunk continues. */
size_t chunker_scan(struct chunker *c, const uint8_t *data, size_t len, bool *boundary);

#endif
