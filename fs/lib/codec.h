/* codec — how a chunk's bytes are stored: compressed when that saves space,
 * raw when not.
 *
 * Checkpoints are mostly floats (bf16, fp32), which LZ4 alone cannot shrink;
 * grouped by bit or byte position within each element (shuffled: the
 * exponents together) they compress. The shuffled codecs are c-blosc frames
 * (LZ4; zstd before 2026-11-27 22:30) and zstd frames of byte planes (zstd).
 *
 * Invariants:
 *  1. decode(encode(x)) == x for every x, and the codec id is recorded with the
 *     chunk, so chunks of different codecs coexist in one store.
 *  2. A compressed encoding is chosen only if it is smaller than the plain
 *     bytes by at least CODEC_MIN_SAVING_PCT percent; incompressible input
 *     (random bytes) is detected from a sample and costs little CPU.
 *  3. Decoding never writes past plain_len and fails (-EIO) on malformed input,
 *     whatever its bytes; every field of a blosc frame header is bounded
 *     before the frame is decoded.
 *  4. -EIO and -EINVAL are the payload's verdict (codec_decode_bad); any
 *     other error (-ENOMEM: codec 4's scratch buffer) is this machine's and
 *     says nothing of the bytes: a caller must not call them corrupt for it
 *     (review 36 F2b: store.c S12). */
#ifndef CKPTFS_CODEC_H
#define CKPTFS_CODEC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Recorded in each chunk object (docs/FORMAT.md); never renumbered. */
enum codec_id {
	CODEC_RAW = 0,
	CODEC_LZ4 = 1,        /* one LZ4 block */
	CODEC_BLOSC_LZ4 = 2,  /* one c-blosc frame (format 2) of LZ4 blocks */
	CODEC_BLOSC_ZSTD = 3, /* one c-blosc frame (format 2) of zstd blocks */
	CODEC_ZSTD_PLANES = 4, /* a width byte, then one zstd frame of rotated byte planes */
};

/* What a store compresses with (-o codec=lz4|zstd). Both shuffle floats;
 * CODEC_FAMILY_LZ4 (the default) is the faster, zstd the smaller. */
enum codec_family {
	CODEC_FAMILY_LZ4 = 0,
	CODEC_FAMILY_ZSTD = 1,
};

#define CODEC_MIN_SAVING_PCT 3

/* Parses "lz4" or "zstd". 0, or -EINVAL. */
int codec_family_parse(const char *name, enum codec_family *out);
const char *codec_family_name(enum codec_family family);

/* Capacity the caller must give encode's dst for plain_len input bytes. */
size_t codec_bound(size_t plain_len);

/* Is codec an id this version decodes? (Ids read back from disk are checked
 * with it before use: shared invariant 7.) */
bool codec_known(uint8_t codec);

/* Encodes src into dst (capacity >= codec_bound(len)) as family says. Sets
 * *codec and *out_len. When the choice is CODEC_RAW, dst holds a copy of
 * src. Returns 0. codec_encode is codec_encode_as(CODEC_FAMILY_LZ4, ...). */
int codec_encode(const void *src, size_t len, void *dst, size_t cap,
		 uint8_t *codec, size_t *out_len);
int codec_encode_as(enum codec_family family, const void *src, size_t len, void *dst, size_t cap,
		    uint8_t *codec, size_t *out_len);

/* The same choice without the copy: the codec id of the encoding that dst
 * (capacity >= codec_bound(len)) now holds, *out_len bytes long; or
 * CODEC_RAW (0) if the bytes are best stored raw (dst then holds nothing
 * useful). */
uint8_t codec_compress(enum codec_family family, const void *src, size_t len, void *dst,
		       size_t cap, size_t *out_len);

/* The sample test of codec_compress alone: false when src is best stored raw
 * without trying (no way of encoding its sample saved enough), true when
 * codec_compress would try all of it. scratch holds codec_probe_bound() bytes. */
size_t codec_probe_bound(void);
bool codec_worth_trying(const void *src, size_t len, void *scratch);

/* Tests only: true makes the zstd family write codec 3 as if codec 4's
 * encoder had failed its self-test (codec.c invariant 6). */
void codec_planes_disable_for_test(bool off);

/* Tests only: true makes codec 4's decode fail its scratch allocation
 * (-ENOMEM), as malloc does when memory runs out. */
void codec_fail_alloc_for_test(bool fail);

/* Decodes exactly plain_len bytes into dst. Returns 0, -EIO on malformed or
 * short input, -EINVAL on an unknown codec, -ENOMEM when codec 4's scratch
 * copy of the planes (plain_len bytes) cannot be allocated (invariant 4). */
int codec_decode(uint8_t codec, const void *src, size_t src_len, void *dst,
		 size_t plain_len);

/* Invariant 4: whether codec_decode's rc is a verdict on the payload (it
 * does not decode), not an error of this machine's. */
static inline bool codec_decode_bad(int rc)
{
	return rc == -EIO || rc == -EINVAL;
}

const char *codec_name(uint8_t codec);

#endif
