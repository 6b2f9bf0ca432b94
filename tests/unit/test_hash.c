/* Unit tests for fs/lib/hash.c: SHA-256 matches the FIPS 180-2 vectors, hex is
 * lower-case and round-trips, and hash_from_hex takes exactly 64 hex digits. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

/* ---- helpers ---- */

static void th_assert_sha256_hex(const void *data, size_t len, const char *want_hex)
{
	uint8_t h[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];

	hash_sha256(data, len, h);
	hash_to_hex(h, hex);
	cr_assert_str_eq(hex, want_hex);
}

/* ---- SHA-256 ---- */

Test(hash, sha256_of_empty_input_matches_known_vector)
{
	th_assert_sha256_hex("", 0,
			     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	th_assert_sha256_hex(NULL, 0,
			     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

Test(hash, sha256_of_abc_matches_known_vector)
{
	th_assert_sha256_hex("abc", 3,
			     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

Test(hash, sha256_of_two_block_message_matches_known_vector)
{
	const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

	th_assert_sha256_hex(msg, strlen(msg),
			     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(hash, sha256_of_million_a_matches_known_vector)
{
	size_t len = 1000000;
	char *msg = malloc(len);

	cr_assert_not_null(msg);
	memset(msg, 'a', len);
	th_assert_sha256_hex(msg, len,
			     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(msg);
}

/* ---- hex ---- */

Test(hash, to_hex_writes_64_lower_case_digits_and_nul)
{
	uint8_t h[HASH_LEN];
	char hex[HASH_HEX_LEN + 2];
	size_t i;

	for (i = 0; i < HASH_LEN; i++)
		h[i] = (uint8_t)(0xF0 + i * 7);
	memset(hex, 'X', sizeof(hex));
	hash_to_hex(h, hex);
	cr_assert_eq(hex[HASH_HEX_LEN], '\0');
	cr_assert_eq(hex[HASH_HEX_LEN + 1], 'X', "wrote past the NUL");
	cr_assert_str_eq(hex, "f0f7fe050c131a21282f363d444b525960676e757c838a91989fa6adb4bbc2c9");
}

Test(hash, hex_round_trips_every_byte_value)
{
	uint8_t h[HASH_LEN], back[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	unsigned base, i;

	for (base = 0; base < 256; base += HASH_LEN) {
		for (i = 0; i < HASH_LEN; i++)
			h[i] = (uint8_t)(base + i);
		hash_to_hex(h, hex);
		memset(back, 0, sizeof(back));
		cr_assert_eq(hash_from_hex(hex, back), 0);
		cr_assert_arr_eq(back, h, HASH_LEN);
	}
}

Test(hash, from_hex_accepts_upper_and_mixed_case)
{
	const char *upper = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
	const char *mixed = "Ba7816bF8f01CfEa414140De5dAe2223B00361a396177A9cB410fF61f20015aD";
	uint8_t want[HASH_LEN], got[HASH_LEN];

	hash_sha256("abc", 3, want);
	cr_assert_eq(hash_from_hex(upper, got), 0);
	cr_assert_arr_eq(got, want, HASH_LEN);
	memset(got, 0, sizeof(got));
	cr_assert_eq(hash_from_hex(mixed, got), 0);
	cr_assert_arr_eq(got, want, HASH_LEN);
}

Test(hash, from_hex_rejects_wrong_length)
{
	const char *good = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	char buf[HASH_HEX_LEN + 8];
	uint8_t out[HASH_LEN];
	size_t len;

	cr_assert_eq(hash_from_hex("", out), -EINVAL);
	for (len = 1; len < HASH_HEX_LEN; len++) {
		memcpy(buf, good, len);
		buf[len] = '\0';
		cr_assert_eq(hash_from_hex(buf, out), -EINVAL, "%zu digits accepted", len);
	}
	memcpy(buf, good, HASH_HEX_LEN);
	strcpy(buf + HASH_HEX_LEN, "0");
	cr_assert_eq(hash_from_hex(buf, out), -EINVAL, "65 digits accepted");
	strcpy(buf + HASH_HEX_LEN, "\n");
	cr_assert_eq(hash_from_hex(buf, out), -EINVAL, "trailing newline accepted");
	cr_assert_eq(hash_from_hex(NULL, out), -EINVAL);
}

Test(hash, from_hex_rejects_non_hex_characters_and_leaves_output_alone)
{
	static const char bad_chars[] = { 'g', 'G', 'x', ' ', '-', ':', '/', '@', '`' };
	const char *good = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	char buf[HASH_HEX_LEN + 1];
	uint8_t out[HASH_LEN], untouched[HASH_LEN];
	size_t pos, k;

	memset(untouched, 0x5A, sizeof(untouched));
	for (pos = 0; pos < HASH_HEX_LEN; pos++) {
		for (k = 0; k < sizeof(bad_chars); k++) {
			memcpy(buf, good, sizeof(buf));
			buf[pos] = bad_chars[k];
			memcpy(out, untouched, sizeof(out));
			cr_assert_eq(hash_from_hex(buf, out), -EINVAL, "'%c' at %zu accepted",
				     bad_chars[k], pos);
			cr_assert_arr_eq(out, untouched, HASH_LEN, "output changed on failure");
		}
	}
	cr_assert_eq(hash_from_hex("0xa7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
				   out), -EINVAL);
}

/* hash_stream: the digest of bytes added in pieces of any size is the
 * one-shot SHA-256 of all of them; begin starts afresh even after a digest
 * left half done (the writer restarts it at each chunk, writer.h 7). */
Test(hash, a_stream_in_pieces_equals_the_one_shot_digest_and_restarts_clean)
{
	size_t len = 300000;
	uint8_t *data = malloc(len), want[HASH_LEN], got[HASH_LEN];
	cr_assert_not_null(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	hash_sha256(data, len, want);
	struct hash_stream s = { 0 };
	hash_stream_begin(&s);
	hash_stream_add(&s, data, 12345); /* abandoned half way */
	hash_stream_begin(&s);
	static const size_t steps[] = { 1, 63, 64, 65, 4096, 65536, 7 };
	size_t off = 0;
	for (unsigned k = 0; off < len; k++) {
		size_t n = steps[k % 7] < len - off ? steps[k % 7] : len - off;
		hash_stream_add(&s, data + off, n);
		off += n;
	}
	hash_stream_end(&s, got);
	cr_assert_arr_eq(got, want, HASH_LEN, "pieces give another digest");
	hash_stream_begin(&s); /* the empty input */
	hash_stream_end(&s, got);
	hash_sha256("", 0, want);
	cr_assert_arr_eq(got, want, HASH_LEN);
	hash_stream_free(&s);
	cr_assert_null(s.ctx);
	free(data);
}
