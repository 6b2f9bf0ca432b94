/* Unit tests for fs/lib/codec.c: every input round-trips byte for byte, LZ4 is
 * kept only when it saves CODEC_MIN_SAVING_PCT, incompressible input is stored
 * raw, and malformed input fails with -EIO without writing past plain_len. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <lz4.h>
#include <zstd.h>

#include "codec.h"

#define MiB ((size_t)1024 * 1024)
#define KiB ((size_t)1024)
#define CANARY_LEN 64
#define CANARY_BYTE 0xA5

/* ---- helpers ---- */

static uint64_t tk_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void tk_fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t state = seed;
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(tk_splitmix64(&state) >> 56);
}

static uint8_t *tk_alloc(size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);

	cr_assert_not_null(buf);
	return buf;
}

/* Text-like data: words from a small vocabulary in a pseudo-random order. */
static void tk_fill_text(uint8_t *buf, size_t len, uint64_t seed)
{
	static const char *const words[] = { "model.", "layers.", "weight ", "bias ",
					     "attn.q_proj ", "mlp.up ", "norm ", "0.125 " };
	uint64_t state = seed;
	size_t off = 0;

	while (off < len) {
		const char *w = words[tk_splitmix64(&state) % 8];
		size_t n = strlen(w);

		if (n > len - off)
			n = len - off;
		memcpy(buf + off, w, n);
		off += n;
	}
}

struct tk_encoded {
	uint8_t *data;
	size_t len;
	uint8_t codec;
};

static struct tk_encoded tk_encode(const uint8_t *src, size_t len)
{
	struct tk_encoded enc = { 0 };
	size_t cap = codec_bound(len);

	enc.data = tk_alloc(cap);
	enc.codec = 0xEE;
	enc.len = (size_t)-1;
	cr_assert_eq(codec_encode(src, len, enc.data, cap, &enc.codec, &enc.len), 0);
	cr_assert(enc.codec <= CODEC_ZSTD_PLANES, "codec %u", enc.codec);
	cr_assert(enc.len <= cap);
	if (enc.codec == CODEC_RAW) {
		cr_assert_eq(enc.len, len);
		if (len)
			cr_assert_arr_eq(enc.data, src, len, "RAW must be a byte copy");
	}
	return enc;
}

/* Decodes into a buffer of exactly plain_len bytes followed by a canary, so a
 * write past plain_len shows even without ASan. */
static int tk_decode_guarded(uint8_t codec, const uint8_t *src, size_t src_len,
			     size_t plain_len, uint8_t **out)
{
	uint8_t *dst = tk_alloc(plain_len + CANARY_LEN);
	size_t i;
	int rc;

	memset(dst + plain_len, CANARY_BYTE, CANARY_LEN);
	rc = codec_decode(codec, src, src_len, dst, plain_len);
	for (i = 0; i < CANARY_LEN; i++)
		cr_assert_eq(dst[plain_len + i], CANARY_BYTE, "decode wrote past plain_len");
	if (out)
		*out = dst;
	else
		free(dst);
	return rc;
}

/* Encodes, decodes, and asserts the bytes came back; returns the encoding. */
static struct tk_encoded tk_round_trip(const uint8_t *src, size_t len)
{
	struct tk_encoded enc = tk_encode(src, len);
	uint8_t *plain;

	cr_assert_eq(tk_decode_guarded(enc.codec, enc.data, enc.len, len, &plain), 0);
	if (len)
		cr_assert_arr_eq(plain, src, len, "decoded bytes differ");
	free(plain);
	return enc;
}

static void tk_assert_saves_min_pct(const struct tk_encoded *enc, size_t len)
{
	cr_assert_neq(enc->codec, CODEC_RAW);
	cr_assert(enc->len <= len * (100 - CODEC_MIN_SAVING_PCT) / 100,
		  "LZ4 kept at %zu of %zu bytes", enc->len, len);
}

/* A small, valid LZ4 encoding of compressible data, for corruption tests. */
static struct tk_encoded tk_lz4_sample(uint8_t **plain, size_t *plain_len)
{
	struct tk_encoded enc;

	*plain_len = 64 * KiB;
	*plain = tk_alloc(*plain_len);
	tk_fill_text(*plain, *plain_len, 8);
	enc = tk_encode(*plain, *plain_len);
	cr_assert_eq(enc.codec, CODEC_LZ4);
	return enc;
}

/* ---- round trips and the codec choice ---- */

Test(codec, empty_input_round_trips_as_raw)
{
	struct tk_encoded enc = tk_round_trip(NULL, 0);

	cr_assert_eq(enc.codec, CODEC_RAW);
	cr_assert_eq(enc.len, 0);
	free(enc.data);
}

Test(codec, one_byte_round_trips_as_raw)
{
	uint8_t byte = 0x42;
	struct tk_encoded enc = tk_round_trip(&byte, 1);

	cr_assert_eq(enc.codec, CODEC_RAW);
	cr_assert_eq(enc.len, 1);
	cr_assert_eq(enc.data[0], 0x42);
	free(enc.data);
}

Test(codec, random_1mib_is_stored_raw)
{
	uint8_t *src = tk_alloc(MiB);
	struct tk_encoded enc;

	tk_fill_random(src, MiB, 1);
	enc = tk_round_trip(src, MiB);
	cr_assert_eq(enc.codec, CODEC_RAW);
	cr_assert_eq(enc.len, MiB);
	free(enc.data);
	free(src);
}

Test(codec, zeros_1mib_choose_lz4_and_shrink)
{
	uint8_t *src = calloc(1, MiB);
	struct tk_encoded enc;

	cr_assert_not_null(src);
	enc = tk_round_trip(src, MiB);
	tk_assert_saves_min_pct(&enc, MiB);
	cr_assert_lt(enc.len, MiB / 100);
	free(enc.data);
	free(src);
}

Test(codec, repeated_text_chooses_lz4_and_shrinks)
{
	size_t len = MiB + 13;
	uint8_t *src = tk_alloc(len);
	struct tk_encoded enc;

	tk_fill_text(src, len, 2);
	enc = tk_round_trip(src, len);
	tk_assert_saves_min_pct(&enc, len);
	cr_assert_lt(enc.len, len / 2);
	free(enc.data);
	free(src);
}

Test(codec, small_compressible_input_below_sample_size_chooses_lz4)
{
	size_t len = 1000;
	uint8_t *src = tk_alloc(len);
	struct tk_encoded enc;

	tk_fill_text(src, len, 3);
	enc = tk_round_trip(src, len);
	tk_assert_saves_min_pct(&enc, len);
	free(enc.data);
	free(src);
}

Test(codec, interleaved_random_and_zero_blocks_round_trip_as_lz4)
{
	size_t len = MiB, block = 4 * KiB, off;
	uint8_t *src = calloc(1, len);
	struct tk_encoded enc;

	cr_assert_not_null(src);
	for (off = 0; off < len; off += 2 * block)
		tk_fill_random(src + off, block, off);
	enc = tk_round_trip(src, len);
	tk_assert_saves_min_pct(&enc, len);
	cr_assert_lt(enc.len, len * 6 / 10);
	free(enc.data);
	free(src);
}

Test(codec, mixed_sizes_and_contents_all_round_trip)
{
	static const size_t sizes[] = { 2, 3, 15, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1,
					300 * KiB, 4 * MiB };
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		uint8_t *src = tk_alloc(len);
		struct tk_encoded enc;

		/* Thirds: text, random, zeros. */
		tk_fill_text(src, len / 3, i);
		tk_fill_random(src + len / 3, len / 3, i);
		memset(src + 2 * (len / 3), 0, len - 2 * (len / 3));
		enc = tk_round_trip(src, len);
		free(enc.data);
		free(src);
	}
}

Test(codec, incompressible_sample_stores_raw_without_compressing_the_rest)
{
	/* Judged by its first 64 KiB: a random head means raw, even though the
	 * zeros after it would compress. This is the price of the cheap test. */
	size_t len = MiB;
	uint8_t *src = calloc(1, len);
	struct tk_encoded enc;

	cr_assert_not_null(src);
	tk_fill_random(src, 64 * KiB, 4);
	enc = tk_round_trip(src, len);
	cr_assert_eq(enc.codec, CODEC_RAW);
	free(enc.data);
	free(src);
}

/* codec_worth_trying is codec_compress's sample test alone: false exactly
 * when codec_compress would store raw without trying LZ4 on the whole. */
Test(codec, worth_trying_says_what_the_sample_test_of_compress_says)
{
	size_t len = MiB;
	uint8_t *scratch = tk_alloc(codec_probe_bound());
	uint8_t *src = tk_alloc(len);
	uint8_t *dst = tk_alloc(codec_bound(len));
	size_t out;

	cr_assert_geq(codec_probe_bound(), 64 * KiB);
	tk_fill_random(src, len, 5); /* incompressible */
	cr_assert_not(codec_worth_trying(src, len, scratch));
	cr_assert_eq(codec_compress(CODEC_FAMILY_LZ4, src, len, dst, codec_bound(len), &out), CODEC_RAW);
	memset(src + 64 * KiB, 0, len - 64 * KiB); /* judged by the head only */
	cr_assert_not(codec_worth_trying(src, len, scratch));
	tk_fill_text(src, len, 6); /* compressible */
	cr_assert(codec_worth_trying(src, len, scratch));
	cr_assert_neq(codec_compress(CODEC_FAMILY_LZ4, src, len, dst, codec_bound(len), &out), CODEC_RAW);
	tk_fill_random(src, 1000, 7); /* at most a sample long: always tried */
	cr_assert(codec_worth_trying(src, 1000, scratch));
	cr_assert_not(codec_worth_trying(src, 0, scratch));
	free(scratch);
	free(src);
	free(dst);
}

Test(codec, lz4_kept_only_when_it_saves_the_minimum_percent)
{
	size_t len = MiB;
	uint8_t *src = tk_alloc(len);
	struct tk_encoded enc;

	/* 16 KiB of zeros then random: the sample looks good, but the whole saves
	 * about 1.5% < CODEC_MIN_SAVING_PCT, so raw. */
	tk_fill_random(src, len, 5);
	memset(src, 0, 16 * KiB);
	enc = tk_round_trip(src, len);
	cr_assert_eq(enc.codec, CODEC_RAW);
	free(enc.data);

	/* 128 KiB of zeros saves about 12%: LZ4. */
	memset(src, 0, 128 * KiB);
	enc = tk_round_trip(src, len);
	tk_assert_saves_min_pct(&enc, len);
	free(enc.data);
	free(src);
}

Test(codec, bound_covers_input_and_lz4_worst_case)
{
	static const size_t sizes[] = { 0, 1, 100, 64 * KiB, MiB, 4 * MiB };
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		cr_assert_geq(codec_bound(sizes[i]), sizes[i]);
		cr_assert_geq(codec_bound(sizes[i]), (size_t)LZ4_compressBound((int)sizes[i]));
	}
}

/* ---- malformed input ---- */

Test(codec, truncated_lz4_returns_eio_at_every_length)
{
	uint8_t *plain;
	size_t plain_len, cut;
	struct tk_encoded enc = tk_lz4_sample(&plain, &plain_len);

	for (cut = 0; cut < enc.len; cut++)
		cr_assert_eq(tk_decode_guarded(CODEC_LZ4, enc.data, cut, plain_len, NULL), -EIO,
			     "truncated to %zu of %zu bytes", cut, enc.len);
	free(enc.data);
	free(plain);
}

Test(codec, corrupted_lz4_never_writes_past_plain_len)
{
	uint8_t *plain, *bad;
	size_t plain_len, trial, failures = 0;
	struct tk_encoded enc = tk_lz4_sample(&plain, &plain_len);
	uint64_t rng = 6;

	/* LZ4 has no checksum: a flipped literal decodes "fine" to wrong bytes
	 * (the chunk's SHA-256 catches that). What must hold is: 0 or -EIO, and
	 * nothing written outside dst. */
	bad = tk_alloc(enc.len);
	for (trial = 0; trial < 2000; trial++) {
		size_t flips = 1 + tk_splitmix64(&rng) % 4, f;
		int rc;

		memcpy(bad, enc.data, enc.len);
		for (f = 0; f < flips; f++)
			bad[tk_splitmix64(&rng) % enc.len] ^= (uint8_t)(1 + tk_splitmix64(&rng) % 255);
		rc = tk_decode_guarded(CODEC_LZ4, bad, enc.len, plain_len, NULL);
		cr_assert(rc == 0 || rc == -EIO, "rc %d", rc);
		failures += rc == -EIO;
	}
	cr_assert_gt(failures, 0, "no corruption was ever detected");
	free(bad);
	free(enc.data);
	free(plain);
}

Test(codec, lz4_with_impossible_lengths_or_offsets_returns_eio)
{
	/* Token says 15+255+255 literals, but only a few bytes follow. */
	static const uint8_t long_literals[] = { 0xF0, 0xFF, 0xFF, 0x00, 'a', 'b', 'c' };
	/* One literal, then a match 0xFFFF bytes back: before the output's start. */
	static const uint8_t far_offset[] = { 0x14, 'a', 0xFF, 0xFF, 0x50, 'x', 'y', 'z', 'w', 'v' };
	/* Valid block of 5 literals, decoded into a smaller plain_len. */
	static const uint8_t five_literals[] = { 0x50, 'h', 'e', 'l', 'l', 'o' };

	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, long_literals, sizeof(long_literals), 600, NULL),
		     -EIO);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, far_offset, sizeof(far_offset), 14, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, five_literals, sizeof(five_literals), 5, NULL), 0);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, five_literals, sizeof(five_literals), 4, NULL),
		     -EIO);
}

Test(codec, wrong_plain_len_returns_eio)
{
	uint8_t *plain;
	size_t plain_len;
	struct tk_encoded enc = tk_lz4_sample(&plain, &plain_len);

	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, enc.data, enc.len, plain_len - 1, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, enc.data, enc.len, plain_len + 1, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, enc.data, enc.len, 0, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, enc.data, enc.len, plain_len, NULL), 0);
	/* RAW: the stored bytes are the plain bytes, so lengths must match. */
	cr_assert_eq(tk_decode_guarded(CODEC_RAW, plain, plain_len, plain_len - 1, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(CODEC_RAW, plain, plain_len - 1, plain_len, NULL), -EIO);
	free(enc.data);
	free(plain);
}

Test(codec, empty_lz4_input_returns_eio)
{
	uint8_t dummy = 0;

	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, &dummy, 0, 10, NULL), -EIO);
}

Test(codec, unknown_codec_returns_einval)
{
	uint8_t src[4] = { 1, 2, 3, 4 };

	cr_assert_eq(tk_decode_guarded(5, src, sizeof(src), sizeof(src), NULL), -EINVAL);
	cr_assert_eq(tk_decode_guarded(255, src, sizeof(src), sizeof(src), NULL), -EINVAL);
}

Test(codec, names_are_raw_lz4_blosc_unknown)
{
	cr_assert_str_eq(codec_name(CODEC_RAW), "raw");
	cr_assert_str_eq(codec_name(CODEC_LZ4), "lz4");
	cr_assert_str_eq(codec_name(CODEC_BLOSC_LZ4), "blosc-lz4");
	cr_assert_str_eq(codec_name(CODEC_BLOSC_ZSTD), "blosc-zstd");
	cr_assert_str_eq(codec_name(CODEC_ZSTD_PLANES), "zstd-planes");
	cr_assert_str_eq(codec_name(5), "unknown");
	cr_assert_str_eq(codec_name(255), "unknown");
}

/* ---- shuffled codecs (c-blosc frames) ---- */

/* Weights-like floats: fp32 values spread like a trained layer's (a random
 * sign, magnitudes over a few octaves below 0.05). As bf16 (width 2), the
 * high halves of the same values. */
static void tk_fill_floats(uint8_t *buf, size_t len, size_t width, uint64_t seed)
{
	uint64_t state = seed;
	size_t off = 0;

	while (off < len) {
		uint64_t r = tk_splitmix64(&state);
		float v = (float)((double)(r >> 11) / (double)(1ull << 53)) * 0.05f;
		uint32_t bits;
		uint8_t b[4];
		size_t n;

		v *= (float)(1 + (r & 7)) / 8.0f;
		if (r & 8)
			v = -v;
		memcpy(&bits, &v, 4);
		if (width == 2)
			bits >>= 16;
		memcpy(b, &bits, 4);
		n = width < len - off ? width : len - off;
		memcpy(buf + off, b, n);
		off += n;
	}
}

static struct tk_encoded tk_encode_as(enum codec_family family, const uint8_t *src, size_t len)
{
	struct tk_encoded enc = { 0 };
	size_t cap = codec_bound(len);

	enc.data = tk_alloc(cap);
	enc.codec = 0xEE;
	cr_assert_eq(codec_encode_as(family, src, len, enc.data, cap, &enc.codec, &enc.len), 0);
	cr_assert(enc.codec <= CODEC_ZSTD_PLANES, "codec %u", enc.codec);
	if (enc.codec == CODEC_RAW)
		cr_assert_eq(enc.len, len);
	else
		cr_assert(enc.len <= len * (100 - CODEC_MIN_SAVING_PCT) / 100);
	if (family == CODEC_FAMILY_LZ4)
		cr_assert(enc.codec != CODEC_BLOSC_ZSTD && enc.codec != CODEC_ZSTD_PLANES, "codec %u",
			  enc.codec);
	else
		cr_assert(enc.codec == CODEC_RAW || enc.codec == CODEC_BLOSC_ZSTD ||
				  enc.codec == CODEC_ZSTD_PLANES,
			  "codec %u", enc.codec);
	return enc;
}

/* A codec 3 object as the zstd family wrote shuffled floats until
 * 2026-11-27 22:30 (codec.c invariant 4): a blosc frame of the first
 * len - len % 32 bytes, byte shuffle at zstd level 3 (blosc clevel 2) or 1
 * (clevel 1), then the rest raw. */
static struct tk_encoded tk_blosc_zstd_object(const uint8_t *src, size_t len, size_t width,
					       int clevel)
{
	size_t tail = len % 32, body = len - tail;
	struct tk_encoded enc = { .data = tk_alloc(codec_bound(len)), .codec = CODEC_BLOSC_ZSTD };
	int n = blosc_compress_ctx(clevel, BLOSC_SHUFFLE, width, body, src, enc.data,
				   codec_bound(len), BLOSC_ZSTD_COMPNAME, MiB, 1);

	cr_assert_gt(n, 0);
	cr_assert_eq(enc.data[2] & BLOSC_MEMCPYED, 0, "size %zu: stored uncompressed", len);
	memcpy(enc.data + n, src + body, tail);
	enc.len = (size_t)n + tail;
	return enc;
}

/* A blosc frame of float-like data, for the corruption tests: codec 2 as the
 * LZ4 family writes it, codec 3 as the zstd family wrote it. */
static struct tk_encoded tk_blosc_sample(enum codec_family family, uint8_t **plain, size_t *plain_len)
{
	struct tk_encoded enc;

	*plain_len = 96 * KiB + 3;
	*plain = tk_alloc(*plain_len);
	tk_fill_floats(*plain, *plain_len, 4, 21);
	if (family == CODEC_FAMILY_ZSTD)
		return tk_blosc_zstd_object(*plain, *plain_len, 4, 1);
	enc = tk_encode_as(family, *plain, *plain_len);
	cr_assert_eq(enc.codec, CODEC_BLOSC_LZ4);
	return enc;
}

Test(codec, every_family_round_trips_floats_random_and_zeros_at_odd_sizes)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 5, 127, 128, 129, 1001, 64 * KiB - 1,
					64 * KiB + 3, 300 * KiB + 1, MiB + 3, 4 * MiB - 1, 4 * MiB };
	enum codec_family families[] = { CODEC_FAMILY_LZ4, CODEC_FAMILY_ZSTD };

	for (size_t f = 0; f < 2; f++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			for (int kind = 0; kind < 4; kind++) {
				size_t len = sizes[i];
				uint8_t *src = tk_alloc(len), *plain;
				struct tk_encoded enc;

				if (kind == 0 || kind == 1)
					tk_fill_floats(src, len, kind == 0 ? 4 : 2, i);
				else if (kind == 2)
					tk_fill_random(src, len, i);
				else
					memset(src, 0, len);
				enc = tk_encode_as(families[f], src, len);
				cr_assert_eq(tk_decode_guarded(enc.codec, enc.data, enc.len, len, &plain), 0,
					     "family %zu size %zu kind %d codec %u", f, len, kind, enc.codec);
				if (len)
					cr_assert_arr_eq(plain, src, len, "family %zu size %zu kind %d", f,
							 len, kind);
				if (kind == 2 && len > 64 * KiB)
					cr_assert_eq(enc.codec, CODEC_RAW);
				if (kind == 3 && len > 1000)
					cr_assert_lt(enc.len, len / 10);
				free(plain);
				free(enc.data);
				free(src);
			}
}

Test(codec, bf16_and_fp32_tensors_choose_a_shuffled_codec_smaller_than_lz4)
{
	size_t len = MiB;
	uint8_t *src = tk_alloc(len), *lz4 = tk_alloc(codec_bound(len));

	for (size_t width = 2; width <= 4; width += 2) {
		tk_fill_floats(src, len, width, 30 + width);
		int lz4_len = LZ4_compress_default((const char *)src, (char *)lz4, (int)len,
						   (int)codec_bound(len));
		cr_assert_gt(lz4_len, 0);
		struct tk_encoded enc = tk_encode_as(CODEC_FAMILY_LZ4, src, len);
		cr_assert_eq(enc.codec, CODEC_BLOSC_LZ4, "width %zu: codec %u", width, enc.codec);
		cr_assert_lt(enc.len, (size_t)lz4_len * 95 / 100, "width %zu: %zu vs LZ4 %d", width,
			     enc.len, lz4_len);
		struct tk_encoded z = tk_encode_as(CODEC_FAMILY_ZSTD, src, len);
		cr_assert_eq(z.codec, CODEC_ZSTD_PLANES);
		cr_assert_lt(z.len, (size_t)lz4_len * 95 / 100);
		free(z.data);
		free(enc.data);
	}
	free(lz4);
	free(src);
}

/* codec.c invariant 5: the zstd family writes floats as codec 4, smaller
 * than the codec 3 frames it wrote before (zstd level 3 until 2026-11-27
 * 05:40, level 1 until 22:30), whatever the chunk's alignment to the
 * elements. */
Test(codec, zstd_family_writes_float_planes_smaller_than_its_old_blosc_frames)
{
	size_t len = MiB + 7;
	uint8_t *buf = tk_alloc(len + 3), *plain;

	for (size_t width = 2; width <= 4; width += 2)
		for (size_t skew = 0; skew < width; skew++) {
			const uint8_t *src = buf + skew; /* a chunk cut mid-element */
			tk_fill_floats(buf, len + 3, width, 70 + width);
			struct tk_encoded z = tk_encode_as(CODEC_FAMILY_ZSTD, src, len);
			cr_assert_eq(z.codec, CODEC_ZSTD_PLANES, "width %zu skew %zu: codec %u", width,
				     skew, z.codec);
			cr_assert_eq(z.data[0], (uint8_t)width, "width %zu skew %zu: width byte %u",
				     width, skew, z.data[0]);
			for (int clevel = 1; clevel <= 2; clevel++) {
				struct tk_encoded old = tk_blosc_zstd_object(src, len, width, clevel);
				cr_assert_lt(z.len, old.len, "width %zu skew %zu: %zu bytes, clevel %d gave %zu",
					     width, skew, z.len, clevel, old.len);
				free(old.data);
			}
			cr_assert_eq(tk_decode_guarded(z.codec, z.data, z.len, len, &plain), 0);
			cr_assert_arr_eq(plain, src, len);
			free(plain);
			free(z.data);
		}
	free(buf);
}

/* Objects of codec 3 written before 2026-11-27 22:30 (zstd level 3, then
 * level 1, the same frame layout: a blosc frame of the first len - len % 32
 * bytes, then the rest raw) still decode, byte for byte. */
Test(codec, zstd_objects_of_the_old_blosc_frames_still_decode)
{
	static const size_t sizes[] = { 96 * KiB + 3, MiB, 2 * MiB + 31 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t width = 2; width <= 4; width += 2)
			for (int clevel = 1; clevel <= 2; clevel++) {
				size_t len = sizes[i];
				uint8_t *src = tk_alloc(len), *plain;

				tk_fill_floats(src, len, width, 80 + i);
				struct tk_encoded old = tk_blosc_zstd_object(src, len, width, clevel);
				cr_assert_eq(tk_decode_guarded(CODEC_BLOSC_ZSTD, old.data, old.len, len,
							       &plain), 0,
					     "size %zu width %zu clevel %d", len, width, clevel);
				cr_assert_arr_eq(plain, src, len, "size %zu", len);
				free(plain);
				free(old.data);
				free(src);
			}
}

/* A codec 4 payload of float-like data, for the corruption tests. */
static struct tk_encoded tk_planes_sample(uint8_t **plain, size_t *plain_len, size_t width)
{
	struct tk_encoded enc;

	*plain_len = 96 * KiB + 3;
	*plain = tk_alloc(*plain_len);
	tk_fill_floats(*plain, *plain_len, width, 22);
	enc = tk_encode_as(CODEC_FAMILY_ZSTD, *plain, *plain_len);
	cr_assert_eq(enc.codec, CODEC_ZSTD_PLANES);
	return enc;
}

/* enc cut short at every length (every 97th past 64 bytes), and whole
 * against a plain length off by one or zero: -EIO each time; whole: 0. */
static void tk_assert_truncations_eio(const struct tk_encoded *enc, size_t plain_len)
{
	for (size_t cut = 0; cut < enc->len; cut += cut < 64 ? 1 : 97)
		cr_assert_eq(tk_decode_guarded(enc->codec, enc->data, cut, plain_len, NULL), -EIO,
			     "truncated to %zu of %zu bytes", cut, enc->len);
	cr_assert_eq(tk_decode_guarded(enc->codec, enc->data, enc->len, plain_len - 1, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(enc->codec, enc->data, enc->len, plain_len + 1, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(enc->codec, enc->data, enc->len, 0, NULL), -EIO);
	cr_assert_eq(tk_decode_guarded(enc->codec, enc->data, enc->len, plain_len, NULL), 0);
}

/* 1500 copies of enc with 1-4 bytes changed (half of them in the first 256
 * bytes: the headers) decode to 0 or -EIO, never past plain_len (the
 * canary), and some of them are caught. */
static void tk_assert_corruptions_caught(const struct tk_encoded *enc, size_t plain_len,
					 uint64_t seed)
{
	uint8_t *bad = tk_alloc(enc->len);
	size_t failures = 0;
	uint64_t rng = seed;

	for (int trial = 0; trial < 1500; trial++) {
		size_t flips = 1 + tk_splitmix64(&rng) % 4;
		size_t span = trial % 2 ? enc->len : (enc->len < 256 ? enc->len : 256);
		int rc;

		memcpy(bad, enc->data, enc->len);
		for (size_t k = 0; k < flips; k++)
			bad[tk_splitmix64(&rng) % span] ^= (uint8_t)(1 + tk_splitmix64(&rng) % 255);
		rc = tk_decode_guarded(enc->codec, bad, enc->len, plain_len, NULL);
		cr_assert(rc == 0 || rc == -EIO, "rc %d", rc);
		failures += rc == -EIO;
	}
	cr_assert_gt(failures, 0, "no corruption was ever detected");
	free(bad);
}

/* The planes of src as codec 4 defines them (docs/FORMAT.md): each element
 * rotated left one bit, byte b of element i at b * n + i, the rest after. */
static void tk_planes_of(const uint8_t *src, size_t len, uint8_t *planes)
{
	size_t n = len / 4;

	for (size_t i = 0; i < n; i++) {
		uint32_t v;
		memcpy(&v, src + 4 * i, 4);
		v = v << 1 | v >> 31; /* the exponent a whole byte */
		for (size_t b = 0; b < 4; b++)
			planes[b * n + i] = (uint8_t)(v >> (8 * b));
	}
	memcpy(planes + 4 * n, src + 4 * n, len - 4 * n);
}

/* Codec 4 is a width byte and any standard zstd frames of the planes, cut
 * anywhere: one frame made by plain ZSTD_compress (matches and all), or
 * three of arbitrary lengths, decode too; and the encoder's frames decode
 * to the same planes. */
Test(codec, planes_payload_is_a_width_byte_and_standard_zstd_frames)
{
	size_t len = 200 * KiB + 3;
	uint8_t *src = tk_alloc(len), *planes = tk_alloc(len), *plain;
	size_t cap = 1 + 3 * ZSTD_compressBound(len);
	uint8_t *obj = tk_alloc(cap);
	const size_t cuts[][2] = { { len, len }, { 1000, 150 * KiB } };

	tk_fill_floats(src, len, 4, 23);
	tk_planes_of(src, len, planes);
	for (size_t c = 0; c < 2; c++) {
		size_t pos = 1, from = 0;
		obj[0] = 4;
		for (size_t k = 0; k <= 2 && from < len; k++) {
			size_t to = k < 2 ? cuts[c][k] : len;
			size_t r = ZSTD_compress(obj + pos, cap - pos, planes + from, to - from, 19);
			cr_assert(!ZSTD_isError(r));
			pos += r;
			from = to;
		}
		cr_assert_eq(tk_decode_guarded(CODEC_ZSTD_PLANES, obj, pos, len, &plain), 0, "cut %zu", c);
		cr_assert_arr_eq(plain, src, len, "cut %zu: decoded bytes differ", c);
		free(plain);
		/* the frames add up short of, or past, the plain length */
		cr_assert_eq(tk_decode_guarded(CODEC_ZSTD_PLANES, obj, pos, len + 1, NULL), -EIO);
		cr_assert_eq(tk_decode_guarded(CODEC_ZSTD_PLANES, obj, pos, len - 1, NULL), -EIO);
	}
	struct tk_encoded enc = tk_encode_as(CODEC_FAMILY_ZSTD, src, len);
	cr_assert_eq(enc.codec, CODEC_ZSTD_PLANES);
	uint8_t *back = tk_alloc(len);
	cr_assert_eq(ZSTD_decompress(back, len, enc.data + 1, enc.len - 1), len);
	cr_assert_arr_eq(back, planes, len, "the encoder's planes differ");
	free(back);
	free(enc.data);
	free(obj);
	free(planes);
	free(src);
}

/* Floats with runs (an embedding's Adam state whose rows no batch touched
 * stay exactly zero): codec 4 tries matches on such planes, and stores them
 * no larger than the blosc frame (codec 3, byte shuffle, zstd -1) that the
 * zstd family wrote before; literals alone would take ~1/4 more. */
Test(codec, planes_with_runs_of_zeros_are_no_larger_than_the_old_blosc_frames)
{
	size_t len = 2 * MiB, row = 1 * KiB;
	uint8_t *src = tk_alloc(len), *plain;
	uint64_t rng = 90;

	tk_fill_floats(src, len, 4, 91);
	for (size_t off = 0; off < len; off += row)
		if (tk_splitmix64(&rng) & 1)
			memset(src + off, 0, row);
	struct tk_encoded z = tk_encode_as(CODEC_FAMILY_ZSTD, src, len);
	struct tk_encoded old = tk_blosc_zstd_object(src, len, 4, 1);
	cr_assert_eq(z.codec, CODEC_ZSTD_PLANES, "codec %u", z.codec);
	cr_assert_leq(z.len, old.len, "%zu bytes, the old blosc frame %zu", z.len, old.len);
	cr_assert_eq(tk_decode_guarded(z.codec, z.data, z.len, len, &plain), 0);
	cr_assert_arr_eq(plain, src, len);
	free(plain);
	free(old.data);
	free(z.data);
	free(src);
}

Test(codec, truncated_or_mislabelled_planes_payloads_return_eio)
{
	for (size_t width = 2; width <= 4; width += 2) {
		uint8_t *plain, *bad;
		size_t plain_len;
		struct tk_encoded enc = tk_planes_sample(&plain, &plain_len, width);

		tk_assert_truncations_eio(&enc, plain_len);
		bad = tk_alloc(enc.len + 1);
		static const uint8_t widths[] = { 0, 1, 3, 8, 255 };
		for (size_t i = 0; i < sizeof(widths); i++) {
			memcpy(bad, enc.data, enc.len);
			bad[0] = widths[i];
			cr_assert_eq(tk_decode_guarded(enc.codec, bad, enc.len, plain_len, NULL), -EIO,
				     "width byte %u", widths[i]);
		}
		/* a byte after the frame */
		memcpy(bad, enc.data, enc.len);
		bad[enc.len] = 0;
		cr_assert_eq(tk_decode_guarded(enc.codec, bad, enc.len + 1, plain_len, NULL), -EIO);
		/* a blosc frame under this id, and this payload under codec 3 */
		uint8_t *bplain;
		size_t bplain_len;
		struct tk_encoded blosc = tk_blosc_sample(CODEC_FAMILY_ZSTD, &bplain, &bplain_len);
		cr_assert_eq(tk_decode_guarded(CODEC_ZSTD_PLANES, blosc.data, blosc.len, bplain_len,
					       NULL), -EIO);
		cr_assert_eq(tk_decode_guarded(CODEC_BLOSC_ZSTD, enc.data, enc.len, plain_len, NULL), -EIO);
		cr_assert_eq(tk_decode_guarded(enc.codec, enc.data, enc.len, plain_len, NULL), 0);
		free(blosc.data);
		free(bplain);
		free(bad);
		free(enc.data);
		free(plain);
	}
}

Test(codec, corrupted_planes_payloads_never_crash_nor_write_past_plain_len)
{
	uint8_t *plain;
	size_t plain_len;
	struct tk_encoded enc = tk_planes_sample(&plain, &plain_len, 4);

	tk_assert_corruptions_caught(&enc, plain_len, 60);
	free(enc.data);
	free(plain);
}

Test(codec, text_keeps_plain_lz4_blocks_as_before)
{
	size_t len = MiB;
	uint8_t *src = tk_alloc(len);

	tk_fill_text(src, len, 40);
	struct tk_encoded enc = tk_round_trip(src, len);
	cr_assert_eq(enc.codec, CODEC_LZ4);
	free(enc.data);
	free(src);
}

/* Objects written before the shuffled codecs hold LZ4 blocks made by
 * LZ4_compress_default (codec id 1): they decode as they always did. */
Test(codec, lz4_block_of_the_old_encoder_still_decodes)
{
	size_t len = 200 * KiB + 7;
	uint8_t *src = tk_alloc(len), *old = tk_alloc(codec_bound(len)), *plain;

	tk_fill_floats(src, len, 4, 41);
	memset(src, 0, 100 * KiB); /* compressible by plain LZ4, as old objects were */
	int n = LZ4_compress_default((const char *)src, (char *)old, (int)len, (int)codec_bound(len));
	cr_assert_gt(n, 0);
	cr_assert_eq(tk_decode_guarded(CODEC_LZ4, old, (size_t)n, len, &plain), 0);
	cr_assert_arr_eq(plain, src, len);
	free(plain);
	free(old);
	free(src);
}

Test(codec, truncated_blosc_frames_return_eio_at_every_length)
{
	for (int f = 0; f < 2; f++) {
		uint8_t *plain;
		size_t plain_len;
		struct tk_encoded enc = tk_blosc_sample(f, &plain, &plain_len);

		tk_assert_truncations_eio(&enc, plain_len);
		free(enc.data);
		free(plain);
	}
}

Test(codec, blosc_frame_header_fields_out_of_bounds_return_eio)
{
	uint8_t *plain, *bad;
	size_t plain_len;
	struct tk_encoded enc = tk_blosc_sample(CODEC_FAMILY_LZ4, &plain, &plain_len);
	/* offset, value: version 0 and 9, flags of another inner codec and a
	 * reserved bit, typesize 0/3/8/255, nbytes, blocksize, cbytes off */
	static const struct { size_t off; uint8_t val; } edits[] = {
		{ 0, 0 }, { 0, 9 }, { 2, 0x01 }, { 2, 0x88 }, { 3, 0 }, { 3, 3 }, { 3, 8 },
		{ 3, 255 }, { 4, 0xFF }, { 7, 0x7F }, { 8, 0 }, { 11, 0x7F }, { 12, 0 }, { 15, 0x7F },
	};

	bad = tk_alloc(enc.len);
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		memcpy(bad, enc.data, enc.len);
		if (bad[edits[i].off] == edits[i].val)
			continue;
		bad[edits[i].off] = edits[i].val;
		if (edits[i].off == 8) /* blocksize 0 */
			memset(bad + 8, 0, 4);
		cr_assert_eq(tk_decode_guarded(enc.codec, bad, enc.len, plain_len, NULL), -EIO,
			     "header byte %zu set to %u", edits[i].off, edits[i].val);
	}
	/* blocks of 1 and 63 bytes: a table of offsets far past the frame */
	for (uint8_t b = 1; b < 64; b += 62) {
		memcpy(bad, enc.data, enc.len);
		bad[8] = b;
		bad[9] = bad[10] = bad[11] = 0;
		cr_assert_eq(tk_decode_guarded(enc.codec, bad, enc.len, plain_len, NULL), -EIO,
			     "block size %u", b);
	}
	/* a frame of the other inner codec under this id */
	cr_assert_eq(tk_decode_guarded(CODEC_BLOSC_ZSTD, enc.data, enc.len, plain_len, NULL), -EIO);
	free(bad);
	free(enc.data);
	free(plain);
}

Test(codec, corrupted_blosc_frames_never_crash_nor_write_past_plain_len)
{
	for (int f = 0; f < 2; f++) {
		uint8_t *plain;
		size_t plain_len;
		struct tk_encoded enc = tk_blosc_sample(f, &plain, &plain_len);

		tk_assert_corruptions_caught(&enc, plain_len, 50 + (uint64_t)f);
		free(enc.data);
		free(plain);
	}
}

Test(codec, family_names_parse_and_print)
{
	enum codec_family f;

	cr_assert_eq(codec_family_parse("lz4", &f), 0);
	cr_assert_eq(f, CODEC_FAMILY_LZ4);
	cr_assert_eq(codec_family_parse("zstd", &f), 0);
	cr_assert_eq(f, CODEC_FAMILY_ZSTD);
	cr_assert_eq(codec_family_parse("gzip", &f), -EINVAL);
	cr_assert_eq(codec_family_parse("", &f), -EINVAL);
	cr_assert_str_eq(codec_family_name(CODEC_FAMILY_ZSTD), "zstd");
	cr_assert_str_eq(codec_family_name(CODEC_FAMILY_LZ4), "lz4");
}

/* codec.c invariant 6: a process whose codec 4 encoder failed its self-test
 * writes floats of the zstd family as codec 3 (shuffled), which decodes;
 * with the encoder back, codec 4 again. */
Test(codec, zstd_family_falls_back_to_codec_3_when_codec_4_is_not_usable)
{
	size_t len = MiB + 5;
	uint8_t *src = tk_alloc(len), *back = tk_alloc(len);

	tk_fill_floats(src, len, 4, 77);
	codec_planes_disable_for_test(true);
	struct tk_encoded z = tk_encode_as(CODEC_FAMILY_ZSTD, src, len);
	codec_planes_disable_for_test(false);
	cr_assert_eq(z.codec, CODEC_BLOSC_ZSTD, "codec %u", z.codec);
	cr_assert_eq(codec_decode(z.codec, z.data, z.len, back, len), 0);
	cr_assert_eq(memcmp(back, src, len), 0);
	struct tk_encoded p = tk_encode_as(CODEC_FAMILY_ZSTD, src, len);
	cr_assert_eq(p.codec, CODEC_ZSTD_PLANES, "codec %u: the self-test failed here", p.codec);
	cr_assert_eq(codec_decode(p.codec, p.data, p.len, back, len), 0);
	cr_assert_eq(memcmp(back, src, len), 0);
	free(p.data);
	free(z.data);
	free(back);
	free(src);
}
