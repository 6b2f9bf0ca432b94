/* codec — how a chunk's bytes are stored: LZ4 when that saves space, raw when not.
 *
 * Invariants:
 *  1. decode(encode(x)) == x for every x, and the codec id is recorded with the
 *     chunk, so chunks of different codecs coexist in one store.
 *  2. LZ4 is chosen only if the result is smaller than the plain bytes by at
 *     least CODEC_MIN_SAVING_PCT percent; incompressible input (weights, random)
 *     is detected from a sample and costs little CPU.
 *  3. Decoding never writes past plain_len and fails (-EIO) on malformed input. */
#ifndef CKPTFS_CODEC_H
#define CKPTFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum codec_id {
	CODEC_RAW = 0,
	CODEC_LZ4 = 1,
};

#define CODEC_MIN_SAVING_PCT 3

/* Capacity the caller must give encode's dst for plain_len input bytes. */
size_t codec_bound(size_t plain_len);

/* Encodes src into dst (capacity >= codec_bound(len)). Sets *codec and
 * *out_len. When the choice is CODEC_RAW, dst holds a copy of src. Returns 0. */
int codec_encode(const void *src, size_t len, void *dst, size_t cap,
		 uint8_t *codec, size_t *out_len);

/* The same choice without the copy: true if dst (capacity >=
 * codec_bound(len)) holds an LZ4 block of *out_len bytes worth storing; false
 * if the bytes are best stored raw (dst then holds nothing useful). */
bool codec_compress(const void *src, size_t len, void *dst, size_t cap, size_t *out_len);

/* The sample test of codec_compress alone: false when src is best stored raw
 * without trying (its sample did not compress), true when codec_compress
 * would try LZ4 on all of it. scratch holds codec_probe_bound() bytes. */
size_t codec_probe_bound(void);
bool codec_worth_trying(const void *src, size_t len, void *scratch);

/* Decodes exactly plain_len bytes into dst. Returns 0, -EIO on malformed or
 * short input, -EINVAL on an unknown codec. */
int codec_decode(uint8_t codec, const void *src, size_t src_len, void *dst,
		 size_t plain_len);

const char *codec_name(uint8_t codec);

#endif
