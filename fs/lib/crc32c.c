/* crc32c — CRC-32C of payloads; see crc32c.h.
 *
 * Two hardware paths on x86-64, chosen at run time; both give the table's
 * results (tests/unit/test_crc32c.c compares each path with the table).
 *
 * Three chains (SSE 4.2): the crc32 instruction works 8 bytes at a time. Its
 * latency is 3 cycles and its throughput one per cycle, so one dependency
 * chain runs at a third of what the CPU can do. Long buffers are cut into
 * three blocks whose CRCs run as three independent chains in one loop, then
 * are combined: the CRC register of A‖B is the register of A "shifted" by
 * len(B) zero bytes (a linear map over GF(2), applied with four tables of
 * 256 entries) xor the register of B from 0. This is Mark Adler's method
 * (crc32c.c, zlib license, 2013). Measured here: ~3× the single chain.
 *
 * Folding (VPCLMULQDQ on 512-bit registers, AVX-512F): a CRC is the
 * remainder of the message times x^32 modulo P, so any block may be replaced
 * by one that is congruent to it modulo P and ends at the same place. Carry-less
 * multiplication folds 16 bytes forward by D bits: the block's two 64-bit
 * halves times x^(D+32) and x^(D-32) mod P (bit-reflected, as the register
 * is) give 16 bytes congruent to it D bits later, which are xored into the
 * data there. Four 64-byte accumulators fold over 256-byte strides, are
 * folded into one, its four 16-byte lanes into one, and the 16 bytes left
 * are fed to the crc32 instruction from a zero register: their CRC is the
 * message's so far. Intel's white paper "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ" (2009) and zlib-ng's crc32_fold use the same
 * folds; the constants here are computed at start-up from the polynomial
 * (crc32c_fold_k), not pasted. Why: the object writes of a large save
 * compute one CRC over every byte, and the three chains are bound by the
 * crc32 instruction: measured here 29-33 GB/s against the folds' 63-66 in
 * cache, 14 against 30 GB per CPU-second from memory (docs/BENCH.md, issue
 * 20 part 2, s28-cpu20). */
#include "crc32c.h"

#include <pthread.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdbool.h>
#include <string.h>

#define CRC32C_POLY 0x82f63b78u /* Castagnoli, reflected */

/* Block lengths of the three-way hardware loop: LONG for long buffers,
 * SHORT for what is left of them (and short ones). */
#define CRC32C_LONG 8192
#define CRC32C_SHORT 256

static uint32_t crc32c_table[256];
static uint32_t crc32c_long[4][256];  /* shift a register by CRC32C_LONG zero bytes */
static uint32_t crc32c_short[4][256]; /* ... by CRC32C_SHORT zero bytes */
static bool crc32c_hw;
static bool crc32c_clmul; /* VPCLMULQDQ and AVX-512F: the folding path */
/* Folding constants (see the top): for a distance of D bits, the pair
 * { x^(D-32), x^(D+32) } mod P, each bit-reflected and shifted left by one. */
static uint64_t crc32c_fold_2048[2]; /* four accumulators: 256 bytes */
static uint64_t crc32c_fold_512[2];  /* one accumulator into the next: 64 bytes */
static uint64_t crc32c_fold_128[2];  /* one lane into the next: 16 bytes */
/* The folding path needs four accumulators' worth of bytes; from there on
 * it is faster than the chains (measured: 25 ns against 35-55 ns at 256
 * bytes, 2.5x at 4 KiB). */
#define CRC32C_FOLD_MIN 256
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

/* A 32x32 matrix over GF(2) (mat[n] is the image of bit n) times vec. */
static uint32_t crc32c_gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	for (; vec; vec >>= 1, mat++)
		if (vec & 1)
			sum ^= *mat;
	return sum;
}

static void crc32c_gf2_square(uint32_t *square, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		square[n] = crc32c_gf2_times(mat, mat[n]);
}

/* The operator that feeds len zero bytes (a power of two) to a register. */
static void crc32c_zeros_op(uint32_t *even, size_t len)
{
	uint32_t odd[32];
	odd[0] = CRC32C_POLY; /* one zero bit */
	for (int n = 1; n < 32; n++)
		odd[n] = 1u << (n - 1);
	crc32c_gf2_square(even, odd); /* two zero bits */
	crc32c_gf2_square(odd, even); /* four */
	for (;;) { /* eight (one byte), then doubling until len */
		crc32c_gf2_square(even, odd);
		len >>= 1;
		if (len == 0)
			return;
		crc32c_gf2_square(odd, even);
		len >>= 1;
		if (len == 0)
			break;
	}
	memcpy(even, odd, sizeof(odd));
}

/* Four tables applying the operator for len zero bytes a byte at a time. */
static void crc32c_zeros(uint32_t zeros[4][256], size_t len)
{
	uint32_t op[32];
	crc32c_zeros_op(op, len);
	for (uint32_t n = 0; n < 256; n++)
		for (int k = 0; k < 4; k++)
			zeros[k][n] = crc32c_gf2_times(op, n << (8 * k));
}

/* x^n mod P in the register's bit order (bit 31 is x^0), shifted left by one
 * as a 64-bit multiplier of carry-less products of reflected operands. */
static uint64_t crc32c_fold_k(unsigned n)
{
	uint32_t r = 0x80000000u; /* x^0, reflected */
	while (n--)
		r = r & 1 ? (r >> 1) ^ CRC32C_POLY : r >> 1;
	return (uint64_t)r << 1;
}

static void crc32c_fold_pair(uint64_t pair[2], unsigned distance_bits)
{
	pair[0] = crc32c_fold_k(distance_bits - 32);
	pair[1] = crc32c_fold_k(distance_bits + 32);
}

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		crc32c_table[i] = c;
	}
	crc32c_zeros(crc32c_long, CRC32C_LONG);
	crc32c_zeros(crc32c_short, CRC32C_SHORT);
#if defined(__x86_64__)
	crc32c_hw = __builtin_cpu_supports("sse4.2");
	crc32c_clmul = crc32c_hw && __builtin_cpu_supports("avx512f") &&
		       __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul");
#endif
	crc32c_fold_pair(crc32c_fold_2048, 2048);
	crc32c_fold_pair(crc32c_fold_512, 512);
	crc32c_fold_pair(crc32c_fold_128, 128);
}

/* The register c followed by the zero bytes the table stands for. */
static inline uint32_t crc32c_shift(const uint32_t zeros[4][256], uint32_t c)
{
	return zeros[0][c & 0xff] ^ zeros[1][(c >> 8) & 0xff] ^ zeros[2][(c >> 16) & 0xff] ^
	       zeros[3][c >> 24];
}

/* The running register (not inverted) over bytes, by table. */
static uint32_t crc32c_sw_run(uint32_t c, const uint8_t *p, size_t len)
{
	while (len--)
		c = crc32c_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc32c_once, crc32c_init);
	return ~crc32c_sw_run(~crc, data, len);
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static inline uint64_t crc32c_hw_word(uint64_t c,
									const uint8_t *p)
{
	uint64_t w;
	memcpy(&w, p, 8);
	return __builtin_ia32_crc32di(c, w);
}

/* Three chains over the blocks p[0..blk), p[blk..2 blk), p[2 blk..3 blk),
 * combined into c; zeros shifts by blk bytes. */
__attribute__((target("sse4.2"))) static inline uint64_t
crc32c_hw_three(uint64_t c0, const uint8_t *p, size_t blk, const uint32_t zeros[4][256])
{
	uint64_t c1 = 0, c2 = 0;
	for (const uint8_t *end = p + blk; p < end; p += 8) {
		c0 = crc32c_hw_word(c0, p);
		c1 = crc32c_hw_word(c1, p + blk);
		c2 = crc32c_hw_word(c2, p + 2 * blk);
	}
	c0 = crc32c_shift(zeros, (uint32_t)c0) ^ c1;
	return crc32c_shift(zeros, (uint32_t)c0) ^ c2;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_run(uint32_t c, const uint8_t *p,
								 size_t len)
{
	for (; len && ((uintptr_t)p & 7); len--, p++) /* to an 8-byte boundary */
		c = __builtin_ia32_crc32qi(c, *p);
	uint64_t c64 = c;
	for (; len >= 3 * CRC32C_LONG; len -= 3 * CRC32C_LONG, p += 3 * CRC32C_LONG)
		c64 = crc32c_hw_three(c64, p, CRC32C_LONG, crc32c_long);
	for (; len >= 3 * CRC32C_SHORT; len -= 3 * CRC32C_SHORT, p += 3 * CRC32C_SHORT)
		c64 = crc32c_hw_three(c64, p, CRC32C_SHORT, crc32c_short);
	for (; len >= 8; len -= 8, p += 8)
		c64 = crc32c_hw_word(c64, p);
	c = (uint32_t)c64;
	for (; len; len--, p++)
		c = __builtin_ia32_crc32qi(c, *p);
	return c;
}

#define CRC32C_FOLD_TARGET __attribute__((target("sse4.2,avx512f,pclmul,vpclmulqdq")))

/* x folded forward by the pair's distance (see the top) and xored into d:
 * in every 16-byte lane, its low half times x^(D+32), its high half times
 * x^(D-32). */
CRC32C_FOLD_TARGET static inline __m512i crc32c_fold512(__m512i x, __m512i k, __m512i d)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x01),
					 _mm512_clmulepi64_epi128(x, k, 0x10), d, 0x96);
}

CRC32C_FOLD_TARGET static inline __m128i crc32c_fold128(__m128i x, __m128i k, __m128i d)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x01),
					   _mm_clmulepi64_si128(x, k, 0x10)),
			     d);
}

CRC32C_FOLD_TARGET static inline __m128i crc32c_pair128(const uint64_t pair[2])
{
	return _mm_set_epi64x((long long)pair[1], (long long)pair[0]);
}

/* The register c over p[0..len), len >= CRC32C_FOLD_MIN: folds whole
 * 256-byte strides, then 64-byte ones, and leaves the last len % 64 bytes to
 * the chains. */
CRC32C_FOLD_TARGET static uint32_t crc32c_fold_run(uint32_t c, const uint8_t *p, size_t len)
{
	const __m512i *v = (const __m512i *)p;
	__m512i x0 = _mm512_loadu_si512(v), x1 = _mm512_loadu_si512(v + 1);
	__m512i x2 = _mm512_loadu_si512(v + 2), x3 = _mm512_loadu_si512(v + 3);
	/* the register in, as if xored into the first four bytes */
	x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c)));
	v += 4;
	len -= 256;
	__m512i k = _mm512_broadcast_i32x4(crc32c_pair128(crc32c_fold_2048));
	for (; len >= 256; len -= 256, v += 4) {
		x0 = crc32c_fold512(x0, k, _mm512_loadu_si512(v));
		x1 = crc32c_fold512(x1, k, _mm512_loadu_si512(v + 1));
		x2 = crc32c_fold512(x2, k, _mm512_loadu_si512(v + 2));
		x3 = crc32c_fold512(x3, k, _mm512_loadu_si512(v + 3));
	}
	k = _mm512_broadcast_i32x4(crc32c_pair128(crc32c_fold_512));
	__m512i x = crc32c_fold512(x0, k, x1);
	x = crc32c_fold512(x, k, x2);
	x = crc32c_fold512(x, k, x3);
	for (; len >= 64; len -= 64, v++)
		x = crc32c_fold512(x, k, _mm512_loadu_si512(v));
	__m128i k128 = crc32c_pair128(crc32c_fold_128);
	__m128i y = crc32c_fold128(_mm512_castsi512_si128(x), k128, _mm512_extracti32x4_epi32(x, 1));
	y = crc32c_fold128(y, k128, _mm512_extracti32x4_epi32(x, 2));
	y = crc32c_fold128(y, k128, _mm512_extracti32x4_epi32(x, 3));
	/* y is congruent to everything so far and ends where it ends */
	uint64_t c64 = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(y));
	c64 = __builtin_ia32_crc32di(c64, (uint64_t)_mm_extract_epi64(y, 1));
	return crc32c_hw_run((uint32_t)c64, (const uint8_t *)v, len);
}
#endif

uint32_t crc32c(uint32_t crc, const void *data, size_t len)
{
	pthread_once(&crc32c_once, crc32c_init);
#if defined(__x86_64__)
	if (crc32c_clmul && len >= CRC32C_FOLD_MIN)
		return ~crc32c_fold_run(~crc, data, len);
	if (crc32c_hw)
		return ~crc32c_hw_run(~crc, data, len);
#endif
	return ~crc32c_sw_run(~crc, data, len);
}

int crc32c_by(enum crc32c_path path, uint32_t crc, const void *data, size_t len, uint32_t *out)
{
	pthread_once(&crc32c_once, crc32c_init);
	switch (path) {
	case CRC32C_TABLE:
		*out = ~crc32c_sw_run(~crc, data, len);
		return 0;
#if defined(__x86_64__)
	case CRC32C_CHAINS:
		if (!crc32c_hw)
			return -1;
		*out = ~crc32c_hw_run(~crc, data, len);
		return 0;
	case CRC32C_FOLD:
		if (!crc32c_clmul)
			return -1;
		*out = len >= CRC32C_FOLD_MIN ? ~crc32c_fold_run(~crc, data, len)
					      : ~crc32c_hw_run(~crc, data, len);
		return 0;
#endif
	default:
		return -1;
	}
}
