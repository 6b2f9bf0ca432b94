/* zipcut — chunk cut points of a zip archive being written (torch.save).
 *
 * torch.save writes a zip of stored (uncompressed) records: a local header
 * naming the record ("<archive name>/data/7", the archive name being the
 * file's base name), padding that aligns the data to 64 bytes, then the
 * tensor's bytes. Replicas saved under different names (per-rank files, a
 * renamed save) hold the same tensor bytes behind headers of other lengths,
 * so content-defined chunks that straddle a header differ between them. With
 * cuts forced at the start and the end of every large record's data, the
 * chunks of that data are the same in every replica.
 *
 * The caller streams the file through its chunker and asks, before scanning
 * further, where it must stop: at a forced cut, or at a header whose bytes are
 * not all buffered yet (so the header is parsed before any of it is emitted).
 *
 * Invariants:
 *  1. Cuts are a pure function of the bytes: the same archive content at the
 *     same offsets yields the same cuts, however the stream is fed.
 *  2. Anything that is not a well-formed sequence of stored records (a
 *     compressed record, garbage) turns zipcut off for the rest of the stream:
 *     the chunker alone decides, as for any file. A record whose sizes follow
 *     its data (bit 3, a data descriptor: what torch.save writes) ends where a
 *     descriptor is found whose size field equals the data's length and that
 *     is followed by another header — a chance match in tensor bytes would
 *     need all three.
 *  3. O(1) state, no allocation; the caller holds at most a record's first
 *     min_record bytes (plus a header) before it may scan on. */
#ifndef CKPTFS_ZIPCUT_H
#define CKPTFS_ZIPCUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Records with less data than this get no cuts (small tensors stay inside
 * ordinary chunks: cutting them would make many tiny chunks). */
#define ZIPCUT_MIN_RECORD (64u << 10)

struct zipcut {
	bool active;          /* still following the archive's local headers */
	uint64_t next_header; /* stream offset of the next local header */
	uint64_t cut[2];      /* pending forced cuts, ascending */
	int ncut;
	uint64_t min_record;
	/* a record whose sizes follow its data (a data descriptor, as torch.save
	 * writes them): its end is found by searching for the descriptor */
	bool in_record;
	bool decided;         /* known to be large: cut at data_start queued */
	uint64_t data_start, search_from;
};

void zipcut_init(struct zipcut *z, uint64_t min_record);

/* buf holds stream bytes [base, base+len), where base is the start of the
 * chunk being built, and the caller has scanned up to pos (base <= pos <=
 * base+len). Returns the first offset >= pos where the caller must stop, or
 * UINT64_MAX: with *cut set it is a forced cut (the chunk must end there; at
 * pos: end it now), else a hold (scan up to it; at pos: wait for more bytes). */
uint64_t zipcut_next_stop(struct zipcut *z, const uint8_t *buf, uint64_t base, size_t len,
			  uint64_t pos, bool *cut);

#endif
