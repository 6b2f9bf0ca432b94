/* Unit tests for fs/lib/crc32c.c: the published check values of CRC-32C, the
 * hardware and table versions agree on every length and alignment, a
 * checksum continues across pieces, and it sees every single-bit error. */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

static uint64_t tc_state = 0x1234567887654321ull;

static uint8_t tc_byte(void)
{
	tc_state = tc_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint8_t)(tc_state >> 56);
}

Test(crc32c, published_check_values)
{
	/* RFC 3720 (iSCSI) B.4 and the usual "123456789" check value */
	uint8_t zeros[32] = { 0 }, ones[32], inc[32], dec[32];

	memset(ones, 0xff, sizeof(ones));
	for (int i = 0; i < 32; i++) {
		inc[i] = (uint8_t)i;
		dec[i] = (uint8_t)(31 - i);
	}
	cr_assert_eq(crc32c(0, "123456789", 9), 0xe3069283u);
	cr_assert_eq(crc32c(0, zeros, 32), 0x8a9136aau);
	cr_assert_eq(crc32c(0, ones, 32), 0x62a8ab43u);
	cr_assert_eq(crc32c(0, inc, 32), 0x46dd794eu);
	cr_assert_eq(crc32c(0, dec, 32), 0x113fdb5cu);
	cr_assert_eq(crc32c_sw(0, "123456789", 9), 0xe3069283u);
	cr_assert_eq(crc32c(0, "", 0), 0);
}

Test(crc32c, fast_and_table_versions_agree_on_every_length_and_alignment)
{
	enum { N = 700 };
	static uint8_t buf[N + 16];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = tc_byte();
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len <= N; len += off % 2 ? 1 : 7)
			cr_assert_eq(crc32c(0, buf + off, len), crc32c_sw(0, buf + off, len),
				     "offset %zu, length %zu", off, len);
}

/* The hardware path runs three chains over blocks of 3 x 256 and 3 x 8192
 * bytes and combines them: lengths at and around those block sizes, and
 * long random ones, at every alignment. */
Test(crc32c, three_way_blocks_agree_with_the_table_version)
{
	enum { N = 200000 };
	uint8_t *buf = malloc(N + 16);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < N + 16; i++)
		buf[i] = tc_byte();
	static const size_t base[] = { 768, 1536, 24576, 24576 + 768, 49152, 73728, 98304 };
	for (size_t off = 0; off < 16; off++) {
		for (size_t b = 0; b < sizeof(base) / sizeof(base[0]); b++)
			for (size_t len = base[b] - 9; len <= base[b] + 9; len++)
				cr_assert_eq(crc32c(0, buf + off, len), crc32c_sw(0, buf + off, len),
					     "offset %zu, length %zu", off, len);
		for (int k = 0; k < 8; k++) {
			size_t len = (size_t)tc_byte() << 9 | tc_byte();
			len = len % N;
			cr_assert_eq(crc32c(0x12345678u, buf + off, len),
				     crc32c_sw(0x12345678u, buf + off, len), "offset %zu, length %zu",
				     off, len);
		}
	}
	free(buf);
}

Test(crc32c, a_checksum_continues_across_pieces)
{
	enum { N = 100000 };
	uint8_t *buf = malloc(N);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < N; i++)
		buf[i] = tc_byte();
	uint32_t whole = crc32c(0, buf, N);
	static const size_t cuts[] = { 0, 1, 7, 8, 9, 4096, 65537, N - 1, N };
	for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
		size_t c = cuts[k];
		cr_assert_eq(crc32c(crc32c(0, buf, c), buf + c, N - c), whole, "cut at %zu", c);
	}
	free(buf);
}

Test(crc32c, every_single_bit_flip_changes_it)
{
	enum { N = 1024 };
	uint8_t buf[N];

	for (size_t i = 0; i < N; i++)
		buf[i] = tc_byte();
	uint32_t good = crc32c(0, buf, N);
	for (size_t bit = 0; bit < N * 8; bit++) {
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		cr_assert_neq(crc32c(0, buf, N), good, "bit %zu flipped unseen", bit);
		buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
}

/* Every path this CPU has (crc32c_by) against the table: the folding path's
 * constants are computed at start-up, and a wrong one, a wrong lane order or
 * a wrong register hand-over changes the result at most lengths. Lengths
 * around its strides (256 bytes, then 64, then the 16-byte lanes and the
 * chains' tail), long random ones, every alignment, and a register carried
 * in. The test fails if this CPU has no hardware path at all. */
Test(crc32c, every_path_agrees_with_the_table_on_every_length_and_alignment)
{
	enum { N = 70000 };
	uint8_t *buf = malloc(N + 64);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < N + 64; i++)
		buf[i] = tc_byte();
	static const size_t base[] = { 256, 320, 512, 576, 1024, 4096, 65536 };
	int paths = 0;
	for (int path = CRC32C_CHAINS; path <= CRC32C_FOLD; path++) {
		uint32_t got;
		if (crc32c_by((enum crc32c_path)path, 0, buf, 1, &got) != 0)
			continue;
		paths++;
		for (size_t off = 0; off < 64; off += off < 16 ? 1 : 16) {
			const uint8_t *p = buf + off;
			for (size_t b = 0; b < sizeof(base) / sizeof(base[0]); b++)
				for (size_t len = base[b] - 70; len <= base[b] + 70; len++) {
					uint32_t want = crc32c_sw(0x9e3779b9u, p, len);
					cr_assert_eq(crc32c_by((enum crc32c_path)path, 0x9e3779b9u, p, len, &got), 0);
					cr_assert_eq(got, want, "path %d, offset %zu, length %zu", path, off, len);
					cr_assert_eq(crc32c(0x9e3779b9u, p, len), want, "offset %zu, length %zu", off,
						     len);
				}
			for (int k = 0; k < 8; k++) {
				size_t len = ((size_t)tc_byte() << 9 | tc_byte()) % N;
				cr_assert_eq(crc32c_by((enum crc32c_path)path, 0, p, len, &got), 0);
				cr_assert_eq(got, crc32c_sw(0, p, len), "path %d, offset %zu, length %zu", path,
					     off, len);
			}
		}
	}
#if defined(__x86_64__)
	cr_assert_gt(paths, 0, "no hardware path on this x86-64 CPU");
#endif
	uint32_t t;
	cr_assert_eq(crc32c_by(CRC32C_TABLE, 0, "123456789", 9, &t), 0);
	cr_assert_eq(t, 0xe3069283u);
	free(buf);
}

/* The folding path on the sizes the store writes (a ~1 MiB chunk object's
 * payload), where a single flipped bit anywhere must change the checksum:
 * a fold that dropped a lane or an accumulator would miss flips in it. */
Test(crc32c, the_folding_path_sees_a_flip_in_every_lane_of_a_large_buffer)
{
	enum { N = (1 << 20) + 333 };
	uint8_t *buf = malloc(N);

	cr_assert_not_null(buf);
	for (size_t i = 0; i < N; i++)
		buf[i] = tc_byte();
	uint32_t good = crc32c(0, buf, N);
	cr_assert_eq(good, crc32c_sw(0, buf, N));
	for (size_t at = 0; at < N; at += 4093) {
		buf[at] ^= 0x10;
		uint32_t bad = crc32c(0, buf, N);
		cr_assert_neq(bad, good, "flip at %zu unseen", at);
		cr_assert_eq(bad, crc32c_sw(0, buf, N), "flip at %zu", at);
		buf[at] ^= 0x10;
	}
	free(buf);
}
