/* codec — stores a chunk compressed when that saves space, raw when not.
 *
 * Checkpoint chunks are mostly floats. Plain LZ4 cannot shrink them, but the
 * same bytes shuffled (bit i of every element together, so the exponent bits,
 * nearly constant across a tensor, form long runs) compress: c-blosc does
 * the shuffle (SIMD) and the compression of each block in one frame, whose
 * own header records the element width, the shuffle and the inner codec.
 *
 * encode first tries each way (plain LZ4, and blosc with elements of 4 and
 * of 2 bytes) on a sample (the first CODEC_SAMPLE_LEN bytes) and keeps the
 * smallest; if none saves CODEC_MIN_SAVING_PCT percent, the chunk is stored
 * raw at once: incompressible input costs the sample's compressions plus a
 * memcpy. The width is found from the bytes alone, so it works on any chunk,
 * whatever its file format or where the chunker cut it (a misaligned start
 * only relabels the byte positions). Every compression runs with the output
 * capacity capped at the size worth keeping, so it gives up as soon as the
 * result would be too large.
 *
 * The zstd family keeps the sample's choice of width (measured with LZ4,
 * which is quick) and writes codec 4 (invariant 5): each element rotated
 * left one bit (the exponent a whole byte), the bytes split into planes, and
 * each plane stored as a zstd frame of literal-only blocks of
 * CODEC_PLANES_BLOCK bytes, each Huffman-coded with its own table (or the
 * previous one), or as plain zstd -1 when that is smaller. Chunks that are
 * not floats (text) stay codec 3, blosc unshuffled at zstd level 3.
 *
 * Invariants (see codec.h):
 *  1. decode(encode(x)) == x; a RAW encoding is a byte copy of the input.
 *  2. A compressed codec only if out_len <= len * (100 - CODEC_MIN_SAVING_PCT) / 100.
 *  3. decode writes at most plain_len bytes and succeeds only when it
 *     produced exactly plain_len of them; a blosc frame is handed to blosc
 *     only after its header was checked against the object (codec_blosc_why),
 *     codec 4 frames only after the width byte, their recorded content sizes
 *     and compressed sizes were checked against the object (codec_planes_why).
 *  4. Codec 3 frames decode whatever zstd level wrote them (the level is not
 *     recorded): shuffled chunks were written at zstd level 3 (blosc clevel 2)
 *     until 2026-11-27 05:40, at level 1 until 2026-11-27 22:30 (invariant 5);
 *     unshuffled chunks (text) are still written at level 3.
 *  5. The zstd family writes shuffled chunks as codec 4 (since 2026-11-27
 *     22:30; store format 4, docs/FORMAT.md). Its frames are standard zstd
 *     frames, decoded by the stable ZSTD_decompress; only the encoder uses
 *     libzstd's advanced API (ZSTD_compressSequences with explicit block
 *     delimiters: every sequence is a block of literals and no match). On
 *     the exponent bytes of a trained tensor — near-random draws from a
 *     skewed distribution that drifts along the tensor — matches mostly cost
 *     more bits than the literals they replace and a Huffman table per 8 KiB
 *     follows the drift; the rotation frees the exponent from the sign bit
 *     (docs/BENCH.md, 2026-11-27 22:30, has the sweep).
 *  6. Codec 4 is written only by a process whose encoder passed a self-test
 *     (a sample of floats decodes back, once, at its first use): the encoder's advanced API is not promised stable across
 *     libzstd versions of a shared library (zstd.h), a mismatch would break
 *     every frame, and the stored CRC covers only what was written. A
 *     failure is logged once and the zstd family writes codec 3 (shuffled,
 *     zstd level 1) as before codec 4 (review 36 F2a). Verifying every
 *     frame instead cost 40 % of the option's encode rate (517 -> 306 MB
 *     per CPU-s, codec-bench ckpt.pt). */
#include "codec.h"
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <lz4.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_compressSequences, for the encoder only (invariant 5) */
#include <zstd.h>

/* Large enough to judge (LZ4's window is 64 KiB), small next to a 1 MiB chunk. */
#define CODEC_SAMPLE_LEN (64 * 1024)
#define CODEC_BLOSC_LZ4_LEVEL 9   /* blosc's LZ4 acceleration 1: LZ4's default */
#define CODEC_BLOSC_ZSTD_PLAIN_LEVEL 2 /* not shuffled (text): zstd level 3, where matches pay */
#define CODEC_BLOSC_ZSTD_LEVEL 1 /* shuffled, when codec 4 failed its self-test (invariant 6) */
#define CODEC_BLOSC_ZSTD_BLOCK (1024 * 1024)
/* Codec 4: literals per zstd block (each its own Huffman table or the
 * previous one's); 4-16 KiB measure alike, 32 KiB and up worse (invariant 5). */
#define CODEC_PLANES_BLOCK (8 * 1024)
#define CODEC_PLANES_LEVEL 1 /* literal-only frames: Huffman-coded literals; others: zstd -1 */
/* A plane is also compressed with matches (zstd -1) when they do better on
 * its first this many bytes than literals alone: runs of zeros (rows of an
 * embedding no batch touched), exponents of Adam's exp_avg_sq that repeat
 * their neighbours'. */
#define CODEC_PLANES_PROBE (64 * 1024)
#define CODEC_PLANES_MATCH_PCT 97
/* A blosc frame covers the chunk's first len - len % CODEC_BLOSC_ALIGN bytes;
 * the rest follows it raw: blosc 1.x gives up on a whole frame (stores it
 * uncompressed) when a bit-shuffled block is not a whole number of 8
 * elements, and content-defined chunks have any length. */
#define CODEC_BLOSC_ALIGN 32
/* blosc never makes a block smaller than 128 bytes unless it is the whole
 * frame; a frame claiming tiny blocks claims a huge table of offsets. */
#define CODEC_BLOSC_MIN_BLOCK 64
#define CODEC_BLOSC_FLAG_CODEC_SHIFT 5 /* bits 5-7 of the frame's flags: the inner codec */
#define CODEC_BLOSC_FLAGS_KNOWN (BLOSC_DOSHUFFLE | BLOSC_MEMCPYED | BLOSC_DOBITSHUFFLE | 0x10 | 0xE0)

/* How a chunk is compressed, chosen from its sample. */
enum codec_way {
	CODEC_WAY_PLAIN,  /* no shuffle: text, zeros, indices */
	CODEC_WAY_WIDTH4, /* 4-byte elements: fp32 (and bf16 pairs) */
	CODEC_WAY_WIDTH2, /* 2-byte elements: bf16, fp16 */
	CODEC_WAYS,
};

/* The largest encoding worth keeping for len plain bytes. */
static size_t codec_limit(size_t len)
{
	assert(len <= LZ4_MAX_INPUT_SIZE);
	return len * (100 - CODEC_MIN_SAVING_PCT) / 100;
}

/* Codec 4 (invariant 5): element i of src, rotated left one bit, goes byte b
 * to plane b, at index i. Separate restrict pointers, shifts instead of a
 * rotate, and gcc's "cheap" cost model (-O2 has "very-cheap", which
 * declines these loops) let gcc vectorize them: the planes' split and join
 * then cost ~1/3 of what they cost byte by byte. */
#if defined(__GNUC__) && !defined(__clang__)
#define CODEC_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=cheap")))
#else
#define CODEC_VECTORIZE
#endif
CODEC_VECTORIZE static void codec_split4(const uint8_t *restrict src, size_t n, uint8_t *restrict p0,
			 uint8_t *restrict p1, uint8_t *restrict p2, uint8_t *restrict p3)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v;
		memcpy(&v, src + 4 * i, 4);
		/* the bytes of v rotated left one bit, without a rotate (which
		 * gcc does not vectorize) */
		p0[i] = (uint8_t)(v << 1 | v >> 31);
		p1[i] = (uint8_t)(v >> 7);
		p2[i] = (uint8_t)(v >> 15);
		p3[i] = (uint8_t)(v >> 23);
	}
}

CODEC_VECTORIZE static void codec_split2(const uint8_t *restrict src, size_t n, uint8_t *restrict p0,
			 uint8_t *restrict p1)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v;
		memcpy(&v, src + 2 * i, 2);
		p0[i] = (uint8_t)(v << 1 | v >> 15);
		p1[i] = (uint8_t)(v >> 7);
	}
}

CODEC_VECTORIZE static void codec_join4(const uint8_t *restrict p0, const uint8_t *restrict p1,
			const uint8_t *restrict p2, const uint8_t *restrict p3, size_t n,
			uint8_t *restrict dst)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v = (uint32_t)p0[i] >> 1 | (uint32_t)p0[i] << 31 | (uint32_t)p1[i] << 7 |
			     (uint32_t)p2[i] << 15 | (uint32_t)p3[i] << 23;
		memcpy(dst + 4 * i, &v, 4);
	}
}

CODEC_VECTORIZE static void codec_join2(const uint8_t *restrict p0, const uint8_t *restrict p1, size_t n,
			uint8_t *restrict dst)
{
	for (size_t i = 0; i < n; i++) {
		uint16_t v = (uint16_t)(p0[i] >> 1 | p0[i] << 15 | p1[i] << 7);
		memcpy(dst + 2 * i, &v, 2);
	}
}

/* planes: plane b of the n = len / width elements at planes + b * n; the
 * len % width bytes left over follow the planes as they are. */
static void codec_planes_split(const uint8_t *src, size_t len, size_t width, uint8_t *planes)
{
	size_t n = len / width;

	if (width == 4)
		codec_split4(src, n, planes, planes + n, planes + 2 * n, planes + 3 * n);
	else
		codec_split2(src, n, planes, planes + n);
	memcpy(planes + n * width, src + n * width, len - n * width);
}

/* The inverse of codec_planes_split. */
static void codec_planes_join(const uint8_t *planes, size_t len, size_t width, uint8_t *dst)
{
	size_t n = len / width;

	if (width == 4)
		codec_join4(planes, planes + n, planes + 2 * n, planes + 3 * n, n, dst);
	else
		codec_join2(planes, planes + n, n, dst);
	memcpy(dst + n * width, planes + n * width, len - n * width);
}

/* A literal-only zstd frame of src (len bytes) into at most cap bytes of dst:
 * blocks of CODEC_PLANES_BLOCK bytes, seqs holding one sequence per block.
 * Its size, or 0 when it does not fit. */
static size_t codec_literal_frame(ZSTD_CCtx *lit, ZSTD_Sequence *seqs, const uint8_t *src,
				  size_t len, uint8_t *dst, size_t cap)
{
	size_t nseq = 0;

	/* a sequence with no match (offset 0, matchLength 0) ends a block */
	for (size_t off = 0; off < len; off += CODEC_PLANES_BLOCK)
		seqs[nseq++] = (ZSTD_Sequence){ .litLength = (unsigned)(len - off < CODEC_PLANES_BLOCK ?
									len - off : CODEC_PLANES_BLOCK) };
	size_t r = ZSTD_compressSequences(lit, dst, cap, seqs, nseq, src, len);
	return ZSTD_isError(r) ? 0 : r;
}

/* One plane (len bytes at src) as a zstd frame into at most cap bytes of
 * dst: literal-only (codec_literal_frame), or plain zstd -1 (matches) when
 * that takes its first CODEC_PLANES_PROBE bytes below CODEC_PLANES_MATCH_PCT
 * percent of the literal-only frame's share for as many bytes, and then
 * does better on the whole plane (tmp holds ZSTD_compressBound(len) bytes).
 * The frame's size, or 0 when neither fits. */
static size_t codec_plane_frame(ZSTD_CCtx *lit, ZSTD_CCtx *lz, ZSTD_Sequence *seqs,
				const uint8_t *src, size_t len, uint8_t *dst, size_t cap,
				uint8_t *tmp)
{
	size_t r = codec_literal_frame(lit, seqs, src, len, dst, cap);
	size_t probe = len < CODEC_PLANES_PROBE ? len : CODEC_PLANES_PROBE;
	size_t share = (r ? r : len) * probe / len; /* what literals take for probe bytes */
	size_t pm = ZSTD_compressCCtx(lz, tmp, ZSTD_compressBound(len), src, probe, CODEC_PLANES_LEVEL);

	if (ZSTD_isError(pm) || pm >= share / 100 * CODEC_PLANES_MATCH_PCT)
		return r; /* matches do not pay here: mantissa bytes, most exponents */
	size_t m = ZSTD_compressCCtx(lz, tmp, ZSTD_compressBound(len), src, len, CODEC_PLANES_LEVEL);
	if (!ZSTD_isError(m) && m <= cap && (r == 0 || m < r)) {
		memcpy(dst, tmp, m);
		return m;
	}
	return r;
}

/* Codec 4's payload into at most limit bytes of dst: the width byte, then one
 * zstd frame per plane (the last one followed by the len % width bytes left
 * over). 0 when it would not fit or libzstd fails (the chunk then goes raw). */
static int codec_planes_decode(const uint8_t *src, size_t src_len, uint8_t *dst, size_t plain_len);

static size_t codec_planes_encode(const uint8_t *src, size_t len, size_t width, uint8_t *dst,
				  size_t limit)
{
	size_t n = len / width, last = len - n * (width - 1), pos = 1, out = 0;
	uint8_t *planes = malloc(len), *tmp = malloc(ZSTD_compressBound(last));
	ZSTD_Sequence *seqs = malloc((last / CODEC_PLANES_BLOCK + 1) * sizeof(*seqs));
	ZSTD_CCtx *lit = ZSTD_createCCtx(), *lz = ZSTD_createCCtx();

	if (planes == NULL || tmp == NULL || seqs == NULL || lit == NULL || lz == NULL ||
	    limit < 2 || n == 0)
		goto done;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(lit, ZSTD_c_compressionLevel, CODEC_PLANES_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(lit, ZSTD_c_blockDelimiters,
						ZSTD_sf_explicitBlockDelimiters)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(lit, ZSTD_c_literalCompressionMode, ZSTD_ps_enable)))
		goto done;
	codec_planes_split(src, len, width, planes);
	dst[0] = (uint8_t)width;
	for (size_t b = 0; b < width; b++) {
		size_t r = codec_plane_frame(lit, lz, seqs, planes + b * n, b + 1 < width ? n : last,
					     dst + pos, limit - pos, tmp);
		if (r == 0)
			goto done;
		pos += r;
	}
	out = pos;
done:
	ZSTD_freeCCtx(lz);
	ZSTD_freeCCtx(lit);
	free(seqs);
	free(tmp);
	free(planes);
	return out;
}

/* Invariant 6: codec 4's encoder, on a sample of skewed floats after a run
 * of zeros (256 KiB), decodes back. Run once per process; true if it did. */
#define CODEC_SELFTEST_LEN (256 * 1024)
static bool codec_planes_selftest(void)
{
	size_t cap = ZSTD_compressBound(CODEC_SELFTEST_LEN) + 16;
	uint8_t *src = malloc(CODEC_SELFTEST_LEN), *enc = malloc(cap),
		*back = malloc(CODEC_SELFTEST_LEN);
	bool ok = false;
	if (src == NULL || enc == NULL || back == NULL)
		goto done;
	uint32_t x = 2463534242u;
	memset(src, 0, CODEC_SELFTEST_LEN / 4); /* a run of zeros: the match path */
	for (size_t i = CODEC_SELFTEST_LEN / 16; i < CODEC_SELFTEST_LEN / 4; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		uint32_t v = (x & 0x807fffffu) | ((120u + x % 7u) << 23); /* skewed exponents */
		memcpy(src + 4 * i, &v, 4);
	}
	size_t n = codec_planes_encode(src, CODEC_SELFTEST_LEN, 4, enc, cap);
	ok = n > 0 && codec_planes_decode(enc, n, back, CODEC_SELFTEST_LEN) == 0 &&
	     memcmp(back, src, CODEC_SELFTEST_LEN) == 0;
done:
	free(back);
	free(enc);
	free(src);
	return ok;
}

static pthread_once_t codec_planes_once = PTHREAD_ONCE_INIT;
static bool codec_planes_ok, codec_planes_off; /* off: codec_planes_disable_for_test */

static void codec_planes_check(void)
{
	codec_planes_ok = codec_planes_selftest();
	if (!codec_planes_ok)
		log_error("codec 4: libzstd %s's encoder failed the self-test (its frame does not"
			  " decode to its input): the zstd family writes codec 3 in this process",
			  ZSTD_versionString());
}

static bool codec_planes_usable(void)
{
	pthread_once(&codec_planes_once, codec_planes_check);
	return codec_planes_ok && !__atomic_load_n(&codec_planes_off, __ATOMIC_RELAXED);
}

void codec_planes_disable_for_test(bool off)
{
	__atomic_store_n(&codec_planes_off, off, __ATOMIC_RELAXED);
}

/* Compresses src the given way into at most codec_limit(len) bytes of dst,
 * as the family says. Returns the size and sets *codec, or 0 when it would
 * not fit (not worth keeping). */
static size_t codec_try(enum codec_family family, enum codec_way way, const void *src,
			size_t len, void *dst, uint8_t *codec)
{
	size_t limit = codec_limit(len);
	size_t width = way == CODEC_WAY_WIDTH4 ? 4 : way == CODEC_WAY_WIDTH2 ? 2 : 1;
	size_t tail = len % CODEC_BLOSC_ALIGN, body = len - tail;
	int out;

	if (limit <= BLOSC_MAX_OVERHEAD + CODEC_BLOSC_ALIGN)
		return 0;
	if (family == CODEC_FAMILY_LZ4 && way == CODEC_WAY_PLAIN) {
		*codec = CODEC_LZ4;
		out = LZ4_compress_default(src, dst, (int)len, (int)limit);
		assert(out <= (int)limit);
		return out > 0 ? (size_t)out : 0;
	}
	if (family == CODEC_FAMILY_LZ4) {
		*codec = CODEC_BLOSC_LZ4;
		out = blosc_compress_ctx(CODEC_BLOSC_LZ4_LEVEL, BLOSC_BITSHUFFLE, width, body, src, dst,
					 limit - tail, BLOSC_LZ4_COMPNAME, 0, 1);
	} else if (way != CODEC_WAY_PLAIN && codec_planes_usable()) { /* invariants 5, 6 */
		*codec = CODEC_ZSTD_PLANES;
		return codec_planes_encode(src, len, width, dst, limit);
	} else {
		bool plain = way == CODEC_WAY_PLAIN; /* else codec 4 failed its self-test */
		*codec = CODEC_BLOSC_ZSTD;
		out = blosc_compress_ctx(plain ? CODEC_BLOSC_ZSTD_PLAIN_LEVEL : CODEC_BLOSC_ZSTD_LEVEL,
					 plain ? BLOSC_NOSHUFFLE : BLOSC_SHUFFLE, width, body, src,
					 dst, limit - tail, BLOSC_ZSTD_COMPNAME,
					 CODEC_BLOSC_ZSTD_BLOCK, 1);
	}
	assert(out <= (int)(limit - tail));
	/* a frame that blosc stored uncompressed is not worth keeping either */
	if (out <= 0 || (((const uint8_t *)dst)[2] & BLOSC_MEMCPYED))
		return 0;
	memcpy((uint8_t *)dst + out, (const uint8_t *)src + body, tail);
	return (size_t)out + tail;
}

/* The way that encodes the sample (the first CODEC_SAMPLE_LEN bytes, or all
 * of a shorter src) smallest with LZ4, or CODEC_WAYS when none is worth
 * keeping. scratch holds codec_probe_bound() bytes. */
static enum codec_way codec_pick(const void *src, size_t len, void *scratch)
{
	size_t sample = len < CODEC_SAMPLE_LEN ? len : CODEC_SAMPLE_LEN;
	enum codec_way best = CODEC_WAYS;
	size_t best_len = SIZE_MAX;
	uint8_t codec;

	for (enum codec_way way = CODEC_WAY_PLAIN; way < CODEC_WAYS; way++) {
		size_t n = codec_try(CODEC_FAMILY_LZ4, way, src, sample, scratch, &codec);
		if (n > 0 && n < best_len) {
			best = way;
			best_len = n;
		}
	}
	return best;
}

int codec_family_parse(const char *name, enum codec_family *out)
{
	if (strcmp(name, "lz4") == 0)
		*out = CODEC_FAMILY_LZ4;
	else if (strcmp(name, "zstd") == 0)
		*out = CODEC_FAMILY_ZSTD;
	else
		return -EINVAL;
	return 0;
}

const char *codec_family_name(enum codec_family family)
{
	return family == CODEC_FAMILY_ZSTD ? "zstd" : "lz4";
}

bool codec_known(uint8_t codec)
{
	return codec == CODEC_RAW || codec == CODEC_LZ4 || codec == CODEC_BLOSC_LZ4 ||
	       codec == CODEC_BLOSC_ZSTD || codec == CODEC_ZSTD_PLANES;
}

size_t codec_bound(size_t plain_len)
{
	/* LZ4_compressBound is 0 past LZ4_MAX_INPUT_SIZE; such input goes raw.
	 * A blosc frame is kept only below codec_limit(plain_len). */
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
	/* the first way that saves enough settles it (codec_pick's answer is
	 * CODEC_WAYS exactly when none does); floats first, the common case */
	static const enum codec_way order[] = { CODEC_WAY_WIDTH4, CODEC_WAY_PLAIN, CODEC_WAY_WIDTH2 };
	uint8_t codec;

	if (len == 0 || len > LZ4_MAX_INPUT_SIZE)
		return false;
	if (len <= CODEC_SAMPLE_LEN)
		return true;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (codec_try(CODEC_FAMILY_LZ4, order[i], src, CODEC_SAMPLE_LEN, scratch, &codec) > 0)
			return true;
	return false;
}

uint8_t codec_compress(enum codec_family family, const void *src, size_t len, void *dst,
		       size_t cap, size_t *out_len)
{
	enum codec_way way;
	uint8_t codec = CODEC_RAW;
	size_t n;

	assert(cap >= codec_bound(len));
	assert(src != NULL || len == 0);
	assert(family == CODEC_FAMILY_LZ4 || family == CODEC_FAMILY_ZSTD);

	if (len == 0 || len > LZ4_MAX_INPUT_SIZE)
		return CODEC_RAW;
	/* dst doubles as the sample's scratch: its capacity covers
	 * codec_bound(len) >= codec_limit(min(len, CODEC_SAMPLE_LEN)). */
	way = codec_pick(src, len, dst);
	if (way == CODEC_WAYS && len > CODEC_SAMPLE_LEN)
		return CODEC_RAW;
	if (way == CODEC_WAYS) /* the sample was all of it: zstd may still do */
		way = CODEC_WAY_PLAIN;
	n = codec_try(family, way, src, len, dst, &codec);
	if (n == 0)
		return CODEC_RAW;
	assert(n <= codec_limit(len) && codec != CODEC_RAW);
	*out_len = n;
	return codec;
}

int codec_encode_as(enum codec_family family, const void *src, size_t len, void *dst, size_t cap,
		    uint8_t *codec, size_t *out_len)
{
	*codec = codec_compress(family, src, len, dst, cap, out_len);
	if (*codec == CODEC_RAW) {
		if (len > 0)
			memcpy(dst, src, len);
		*out_len = len;
	}
	return 0;
}

int codec_encode(const void *src, size_t len, void *dst, size_t cap,
		 uint8_t *codec, size_t *out_len)
{
	return codec_encode_as(CODEC_FAMILY_LZ4, src, len, dst, cap, codec, out_len);
}

static uint32_t codec_le32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Invariant 3: the header of a blosc frame (16 bytes: version, LZ4 version,
 * flags, typesize, u32 nbytes, u32 blocksize, u32 cbytes) must describe
 * exactly this object (a frame of plain_len - tail bytes, then the tail's
 * plain_len % CODEC_BLOSC_ALIGN raw bytes) before blosc reads the rest.
 * NULL or a reason. */
static const char *codec_blosc_why(uint8_t codec, const uint8_t *h, size_t src_len,
				   size_t plain_len)
{
	unsigned inner = codec == CODEC_BLOSC_LZ4 ? BLOSC_LZ4_FORMAT : BLOSC_ZSTD_FORMAT;
	size_t tail = plain_len % CODEC_BLOSC_ALIGN, body = plain_len - tail;
	size_t nbytes = 0;

	if (src_len < BLOSC_MIN_HEADER_LENGTH + tail || src_len > (size_t)INT_MAX ||
	    body == 0 || plain_len > BLOSC_MAX_BUFFERSIZE)
		return "length out of range";
	src_len -= tail; /* the frame's own length */
	plain_len = body;
	if (h[0] == 0 || h[0] > BLOSC_VERSION_FORMAT)
		return "unknown frame version";
	if ((h[2] & ~CODEC_BLOSC_FLAGS_KNOWN) != 0 || (unsigned)(h[2] >> CODEC_BLOSC_FLAG_CODEC_SHIFT) != inner)
		return "frame of another codec";
	if (h[3] != 1 && h[3] != 2 && h[3] != 4)
		return "element width out of range";
	if (codec_le32(h + 4) != plain_len || codec_le32(h + 12) != src_len)
		return "frame lengths differ from the object's";
	uint32_t blocksize = codec_le32(h + 8);
	if (blocksize == 0 || blocksize > plain_len ||
	    (blocksize < CODEC_BLOSC_MIN_BLOCK && blocksize != plain_len))
		return "block size out of range";
	/* the table of block offsets follows the header (not in a copied frame) */
	size_t nblocks = plain_len / blocksize + (plain_len % blocksize != 0);
	if (!(h[2] & BLOSC_MEMCPYED) && BLOSC_MAX_OVERHEAD + nblocks * sizeof(int32_t) > src_len)
		return "block table past the frame";
	if (blosc_cbuffer_validate(h, src_len, &nbytes) != 0 || nbytes != plain_len)
		return "frame does not validate";
	return NULL;
}

/* Invariant 3: a codec 4 payload is a width byte (2 or 4) and whole zstd
 * frames, each recording its content size, which add up to the object's plain
 * length. NULL or a reason. */
static const char *codec_planes_why(const uint8_t *src, size_t src_len, size_t plain_len)
{
	if (src_len < 2 || plain_len == 0)
		return "length out of range";
	if (src[0] != 2 && src[0] != 4)
		return "element width out of range";
	unsigned long long content = 0;
	for (size_t off = 1; off < src_len;) {
		unsigned long long c = ZSTD_getFrameContentSize(src + off, src_len - off);
		if (c == ZSTD_CONTENTSIZE_ERROR || c == ZSTD_CONTENTSIZE_UNKNOWN)
			return "not a zstd frame with its content size";
		size_t frame = ZSTD_findFrameCompressedSize(src + off, src_len - off);
		if (ZSTD_isError(frame) || frame == 0 || frame > src_len - off)
			return "zstd frame past the payload";
		if (c > plain_len - content)
			return "frame content sizes add up past the object's";
		content += c;
		off += frame;
	}
	if (content != plain_len)
		return "frame content sizes add up short of the object's";
	return NULL;
}

static bool codec_alloc_fails; /* codec_fail_alloc_for_test */

void codec_fail_alloc_for_test(bool fail)
{
	codec_alloc_fails = fail;
}

static int codec_planes_decode(const uint8_t *src, size_t src_len, uint8_t *dst, size_t plain_len)
{
	if (codec_planes_why(src, src_len, plain_len) != NULL)
		return -EIO;
	uint8_t *planes = codec_alloc_fails ? NULL : malloc(plain_len);
	if (planes == NULL)
		return -ENOMEM; /* invariant 4: not a verdict on src */
	size_t got = ZSTD_decompress(planes, plain_len, src + 1, src_len - 1);
	int rc = !ZSTD_isError(got) && got == plain_len ? 0 : -EIO;
	if (rc == 0)
		codec_planes_join(planes, plain_len, src[0], dst);
	free(planes);
	return rc;
}

int codec_decode(uint8_t codec, const void *src, size_t src_len, void *dst,
		 size_t plain_len)
{
	size_t tail;
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
	case CODEC_BLOSC_LZ4:
	case CODEC_BLOSC_ZSTD:
		if (codec_blosc_why(codec, src, src_len, plain_len) != NULL)
			return -EIO;
		/* destsize: the frame's part; blosc never writes past it. */
		tail = plain_len % CODEC_BLOSC_ALIGN;
		got = blosc_decompress_ctx(src, dst, plain_len - tail, 1);
		if (got < 0 || (size_t)got != plain_len - tail)
			return -EIO;
		memcpy((uint8_t *)dst + got, (const uint8_t *)src + src_len - tail, tail);
		return 0;
	case CODEC_ZSTD_PLANES:
		return codec_planes_decode(src, src_len, dst, plain_len);
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
	case CODEC_BLOSC_LZ4:
		return "blosc-lz4";
	case CODEC_BLOSC_ZSTD:
		return "blosc-zstd";
	case CODEC_ZSTD_PLANES:
		return "zstd-planes";
	default:
		return "unknown";
	}
}
