/* recent — the SHA-256 of chunks hashed moments ago, found again by comparing
 * bytes instead of hashing them.
 *
 * Data-parallel ranks save the same state at the same time: 8 writers send
 * the same bytes, and every chunk would be hashed 8 times. The writers ask
 * here first. A chunk equal byte for byte to one hashed recently gets that
 * hash, which is exactly its SHA-256: nothing is trusted that was not
 * compared in full, and a memcmp is much cheaper than a SHA-256 pass.
 *
 * Invariants:
 *  R1. An entry holds a private copy of the bytes it was hashed from and
 *      their SHA-256: recent_lookup returns a hash only after memcmp of all
 *      len bytes against that copy.
 *  R2. While one writer hashes a chunk (a ticket is out: a flight on its
 *      fingerprint, flight.h), a writer with the same fingerprint waits for
 *      it (bounded) instead of hashing the same bytes as well; a ticket
 *      always ends with recent_publish or recent_abandon.
 *  R3. Copies use at most the byte budget given at creation; the oldest
 *      published entries go first. Up to two buffers of evicted copies are
 *      kept for the next copies (no fresh mapping per chunk). An entry that is
 *      pinned (a comparison or a prediction uses its copy) is not evicted.
 *  R4. Chains. Each writer keeps a cursor on the entry of the chunk it emitted
 *      last (recent_chain). The first writer to emit a chunk after entry E,
 *      whatever that chunk is, links it as E's successor. A writer whose
 *      cursor is at E gets E's successor from recent_follow as a prediction of
 *      its next chunk, pinned; only entries whose end the chunker found
 *      (RECENT_END_CHUNKER) are predictions. A link is a hint, never trusted:
 *      the writer compares every byte of its chunk with the prediction's copy
 *      (R1) before it takes the hash (recent_adopt), and takes it only where
 *      its own chunker would have cut (writer.c).
 *  R5. Claims. A writer at E that finds no successor claims it (one claim per
 *      cursor: the successor of the entry it is at) and chunks and hashes its
 *      bytes itself; another writer at E then waits for the link instead of
 *      doing the same work (at most until the claim is RECENT_CLAIM_MS old or
 *      its own wait ends; then it takes the claim over). A waiting writer
 *      holds no claim, so waits cannot form a cycle; a claim ends when its
 *      writer emits its chunk or drops its chain (recent_chain_drop).
 *  R6. Images. A writer fills its chunks in an image buffer taken here
 *      (recent_image_take): the chunk at image + RECENT_HEADROOM, as in an
 *      entry's copy. recent_publish_image makes that buffer the entry's copy
 *      instead of copying it, only while the caller holds a ticket, and
 *      returns it pinned: from then on the buffer is recent's (R1: the bytes
 *      hashed are the bytes kept, and nobody writes them again but the
 *      headroom), and the caller fills a new one. A buffer not kept stays
 *      the caller's. R3's budget counts the bytes of a chunk; an image kept
 *      may be larger (up to the caller's keep), so that reused spares fit
 *      the next chunks, while the slots' slack beyond what copies would
 *      take stays within the budget too.
 *  R7. A pin may carry the CRC-32C of its copy (has_crc), which its holder
 *      computed from the copy itself; recent_pin_again hands it on to the
 *      new pin of the same copy (its bytes do not change: R1, R6), and every
 *      other pin starts without one. The object of the chunk is then written
 *      with it (store.c S11) instead of another pass over the bytes.
 *
 * Thread-safe. Chunks under RECENT_MIN_LEN are not worth it and always miss. */
#ifndef CKPTFS_RECENT_H
#define CKPTFS_RECENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flight.h"
#include "hash.h"
#include "store.h"

#define RECENT_MIN_LEN (64 * 1024)
#define RECENT_HEADROOM STORE_HEADER_LEN

struct recent;

/* A claim on hashing one chunk (R2); opaque. After a hit: the entry hit. */
struct recent_ticket {
	int slot; /* -1: nothing to publish */
	uint64_t epoch;
	bool hit; /* slot is the entry hit, not a claim */
	struct flight flight; /* a claim: what writers of the same fingerprint wait for */
};

/* R4: where a writer's stream is in the chains; opaque. Starts as
 * RECENT_CURSOR_NONE. */
struct recent_cursor {
	int slot; /* -1: none */
	uint64_t epoch;
};
#define RECENT_CURSOR_NONE ((struct recent_cursor){ .slot = -1, .epoch = 0 })

/* How an emitted chunk ended (R4): only a chunk whose end its chunker found,
 * scanning all of its bytes from a chunk start, predicts other writers'
 * chunks: the same bytes from a chunk start end at the same place. */
enum recent_end {
	RECENT_END_OTHER = 0, /* a forced cut: a flush, a gap, a zip record, ... */
	RECENT_END_CHUNKER = 1,
};

/* A pinned entry (a prediction, R4, or recent_pin): its copy stays valid
 * until recent_unpin or recent_adopt. The copy sits at image +
 * RECENT_HEADROOM in a buffer aligned to STORE_IO_ALIGN, so that the chunk's
 * object can be written from it (store_put_headroom); the headroom is the
 * only part of the buffer anyone may write. */
struct recent_pred {
	int slot;
	uint64_t epoch;
	const uint8_t *copy;
	uint8_t *image;
	size_t len;
	uint8_t hash[HASH_LEN];
	bool has_crc; /* R7: crc is the CRC-32C of copy[0..len) */
	uint32_t crc;
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

/* R6: a page-aligned buffer of at least need bytes (*cap: its size) for a
 * writer to fill at RECENT_HEADROOM: the largest spare if it is large
 * enough (no fresh pages to fault), else a new mapping. r may be NULL.
 * NULL: no memory. */
uint8_t *recent_image_take(struct recent *r, size_t need, size_t *cap);
/* Grows an image buffer to at least need bytes, keeping its bytes (it may
 * move). -ENOMEM leaves it as it was. */
int recent_image_grow(uint8_t **image, size_t *cap, size_t need);
/* The capacity recent_image_grow gives a buffer of cap bytes grown to need:
 * known before, so that the caller can count it first (wbuf.h W1). */
size_t recent_image_grow_cap(size_t cap, size_t need);
/* Gives a buffer back: kept as a spare, or unmapped. r may be NULL. */
void recent_image_give(struct recent *r, uint8_t *image, size_t cap);
/* R6: recent_publish of the len bytes at image + RECENT_HEADROOM without a
 * copy. true: the entry keeps the buffer (the caller no longer owns it) and
 * it is pinned in *pin; past max(keep, what a copy would take) it is
 * unmapped (keep: the size the caller's next chunk likely needs, so that a
 * spare made of it is reused without faulting fresh pages; only what a copy
 * would take once the slots' slack reaches the budget). false: the
 * ticket ended, nothing was kept, the buffer is still the caller's (also for
 * a hit, or no ticket). */
bool recent_publish_image(struct recent *r, const struct recent_ticket *ticket, uint8_t *image,
			  size_t cap, size_t len, size_t keep, const uint8_t hash[HASH_LEN],
			  struct recent_pred *pin);

/* R4/R5, for a writer at a chunk start whose cursor is *cur: true with a
 * pinned prediction of its next chunk in *pred; false when it chunks the
 * bytes itself (then it holds the claim on the successor, if it is in a
 * chain). While another writer holds that claim this waits up to wait_ms for
 * its link. */
bool recent_follow(struct recent *r, struct recent_cursor *cur, unsigned wait_ms,
		   struct recent_pred *pred);
/* The caller's chunk is pred's chunk, every byte compared (R1): counts a
 * reused hash, moves the cursor to it and unpins it. */
void recent_adopt(struct recent *r, struct recent_cursor *cur, struct recent_pred *pred);
void recent_unpin(struct recent *r, struct recent_pred *pred);
/* Pins the entry a ticket names (the one hit, or just published), if it is
 * still there; false if not. */
bool recent_pin(struct recent *r, const struct recent_ticket *t, struct recent_pred *out);
/* A second pin of the entry the caller holds pinned in *held (that pin keeps
 * it), with its own recent_unpin: for a job that writes the copy after the
 * caller moved on (writer.c, store-behind). false if held pins nothing. */
bool recent_pin_again(struct recent *r, const struct recent_pred *held, struct recent_pred *out);
/* After emitting a chunk through recent_lookup (+ recent_publish): links the
 * entry the ticket names (a hit, or the one just published) as the successor
 * of *cur if it has none, ends the caller's claim and moves the cursor there
 * (to none if the entry is not kept). end: how the chunk ended. */
void recent_chain(struct recent *r, struct recent_cursor *cur, const struct recent_ticket *t,
		  enum recent_end end);
/* The caller's stream leaves the chains (a chunk not looked up, a cut, a
 * truncate, the writer's end): its claim ends, the cursor becomes none. */
void recent_chain_drop(struct recent *r, struct recent_cursor *cur);

struct recent_stats {
	uint64_t hits, misses, waits;
	uint64_t wait_timeouts; /* waits for a hash that ended at their limit (R2) */
	uint64_t follows;      /* hits by prediction (R4), counted in hits too */
	uint64_t follow_waits; /* waits for another writer's link (R5) */
	uint64_t takeovers;    /* ... that ended with the claim taken over */
	uint64_t follow_wait_ns; /* ... the time they waited, in all */
	uint64_t images;       /* entries that kept a writer's buffer, not a copy (R6) */
};
void recent_stats(struct recent *r, struct recent_stats *out);

#endif
