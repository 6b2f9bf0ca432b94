/* recent — the SHA-256 of chunks hashed moments ago, found again by comparing
 * bytes instead of hashing them.
 *
 * Data-parallel ranks save the same state at the same time: 8 writers send
 * the same bytes, and every chunk would be hashed 8 times. The writers ask
 * here first. A chunk equal byte for byte to one hashed recently gets that
 * hash, which is exactly its SHA-256: nothing is trusted that was not
 * compared in full. A memcmp costs a tenth of a SHA-256 pass.
 *
 * Invariants:
 *  R1. An entry holds a private copy of the bytes it was hashed from and
 *      their SHA-256: recent_lookup returns a hash only after memcmp of all
 *      len bytes against that copy.
 *  R2. While one writer hashes a chunk (a ticket is out), a writer with the
 *      same fingerprint waits for it (bounded) instead of hashing the same
 *      bytes as well; a ticket always ends with recent_publish or
 *      recent_abandon.
 *  R3. Copies use at most the byte budget given at creation; the oldest
 *      published entries go first. Up to two buffers of evicted copies are
 *      kept for the next copies (no fresh mapping per chunk).
 *
 * Thread-safe. Chunks under RECENT_MIN_LEN are not worth it and always miss. */
#ifndef CKPTFS_RECENT_H
#define CKPTFS_RECENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"

#define RECENT_MIN_LEN (64 * 1024)

struct recent;

/* A claim on hashing one chunk (R2); opaque. */
struct recent_ticket {
	int slot; /* -1: nothing to publish */
	uint64_t epoch;
};

/* budget: bytes of chunk copies kept (0: a default of 16 MiB). */
int recent_new(size_t budget, struct recent **out);
void recent_free(struct recent *r); /* NULL is allowed */

/* true: data[0..len) equals a chunk hashed recently; its SHA-256 is in hash.
 * false: the caller hashes the bytes itself and then calls recent_publish
 * (or recent_abandon) with *ticket. */
bool recent_lookup(struct recent *r, const uint8_t *data, size_t len, uint8_t hash[HASH_LEN],
		   struct recent_ticket *ticket);
void recent_publish(struct recent *r, const struct recent_ticket *ticket, const uint8_t *data,
		    size_t len, const uint8_t hash[HASH_LEN]);
void recent_abandon(struct recent *r, const struct recent_ticket *ticket);

struct recent_stats {
	uint64_t hits, misses, waits;
};
void recent_stats(struct recent *r, struct recent_stats *out);

#endif
