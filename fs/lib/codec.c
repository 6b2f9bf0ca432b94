/* codec — stores a chunk as LZ4 when that saves space, raw when not.
 *
 * Checkpoint chunks are mostly fp32/bf16 weights, which LZ4 cannot shrink, so
 * encode first compresses a sample (the first CODEC_SAMPLE_LEN bytes) and
 * stores raw at once if the sample does not save CODEC_MIN_SAVING_PCT percent:
 * incompressible input costs one sample's compression plus a memcpy. Both
 * compressions run with the output capacity capped at the size worth keeping,
 * so LZ4 itself gives up as soon as the result would be too large.
 *
 * Invariants (see codec.h):
 *  1. decode(encode(x)) == x; a RAW encoding is a byte copy of the input.
 *  2. CODEC_LZ4 only if out_len <= len * (100 - CODEC_MIN_SAVING_PCT) / 100.
 *  3. decode writes at most plain_len bytes and succeeds only when it
 *     produced exactly plain_len of them. */
#include "codec.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <lz4.h>

/* Large enough to judge (LZ4's window is 64 KiB), small next to a 1 MiB chunk. */
#define CODEC_SAMPLE_LEN (64 * 1024)

/* The largest LZ4 output worth keeping for len plain bytes. */
static size_t codec_lz4_limit(size_t len)
{
	assert(len <= LZ4_MAX_INPUT_SIZE);
	return len * (100 - CODEC_MIN_SAVING_PCT) / 100;
}

/* Compresses src into at most codec_lz4_limit(len) bytes of dst. Returns the
 * compressed size, or 0 when it would not fit (not worth keeping). */
static size_t codec_lz4_try(const void *src, size_t len, void *dst)
{
	size_t limit = codec_lz4_limit(len);
	int out;

	if (limit == 0)
		return 0;
	out = LZ4_compress_default(src, dst, (int)len, (int)limit);
	assert(out >= 0 && (size_t)out <= limit);
	return out > 0 ? (size_t)out : 0;
}

size_t codec_bound(size_t plain_len)
{
	/* LZ4_compressBound is 0 past LZ4_MAX_INPUT_SIZE; such input goes raw. */
	size_t lz4_bound = plain_len <= LZ4_MAX_INPUT_SIZE ?
			   (size_t)LZ4_compressBound((int)plain_len) : 0;

	return lz4_bound > plain_len ? lz4_bound : plain_len;
}

size_t codec_probe_bound(void)
{
	return codec_bound(CODEC_SAMPLE_LEN);
}

bool codec_worth_trying(const void *src, size_t len, void *scratch)
{
	if (len == 0 || len > LZ4_MAX_INPUT_SIZE)
		return false;
	return len <= CODEC_SAMPLE_LEN || codec_lz4_try(src, CODEC_SAMPLE_LEN, scratch) > 0;
}

bool codec_compress(const void *src, size_t len, void *dst, size_t cap, size_t *out_len)
{
	size_t lz4_len = 0;

	assert(cap >= codec_bound(len));
	assert(src != NULL || len == 0);

	/* dst doubles as the sample's scratch: its capacity covers
	 * codec_bound(len), which exceeds any limit used below. */
	if (codec_worth_trying(src, len, dst))
		lz4_len = codec_lz4_try(src, len, dst);
	if (lz4_len == 0)
		return false;
	assert(lz4_len <= codec_lz4_limit(len));
	*out_len = lz4_len;
	return true;
}

int codec_encode(const void *src, size_t len, void *dst, size_t cap,
		 uint8_t *codec, size_t *out_len)
{
	if (codec_compress(src, len, dst, cap, out_len)) {
		*codec = CODEC_LZ4;
	} else {
		if (len > 0)
			memcpy(dst, src, len);
		*codec = CODEC_RAW;
		*out_len = len;
	}
	return 0;
}

int codec_decode(uint8_t codec, const void *src, size_t src_len, void *dst,
		 size_t plain_len)
{
	int got;

	switch (codec) {
	case CODEC_RAW:
		if (src_len != plain_len)
			return -EIO;
		if (plain_len > 0)
			memcpy(dst, src, plain_len);
		return 0;
	case CODEC_LZ4:
		if (src_len == 0 || src_len > LZ4_MAX_INPUT_SIZE ||
		    plain_len > LZ4_MAX_INPUT_SIZE)
			return -EIO;
		/* dst's capacity is plain_len: _safe never writes past it. */
		got = LZ4_decompress_safe(src, dst, (int)src_len, (int)plain_len);
		if (got < 0 || (size_t)got != plain_len)
			return -EIO;
		return 0;
	default:
		return -EINVAL;
	}
}

const char *codec_name(uint8_t codec)
{
	switch (codec) {
	case CODEC_RAW:
		return "raw";
	case CODEC_LZ4:
		return "lz4";
	default:
		return "unknown";
	}
}
