/* hash — SHA-256 of chunk contents and its hex form.
 *
 * The digest comes from OpenSSL libcrypto's EVP one-shot interface (the
 * non-deprecated path on OpenSSL 3; it picks SHA-NI/AVX code at run time).
 *
 * Invariants:
 *  1. hash_to_hex writes exactly HASH_HEX_LEN lower-case digits and a NUL, so
 *     one hash has one file name.
 *  2. hash_from_hex accepts exactly HASH_HEX_LEN hex digits followed by the
 *     string's end, in either case, and leaves out untouched when it fails.
 *  3. hash_from_hex(hash_to_hex(h)) == h. */
#include "hash.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

void hash_sha256(const void *data, size_t len, uint8_t out[HASH_LEN])
{
	unsigned int out_len = 0;

	assert(data != NULL || len == 0);
	/* The signature has no error path and a wrong chunk name would corrupt the
	 * store; EVP_Digest fails only when libcrypto itself is broken (no SHA-256
	 * provider, out of memory), so stop loudly instead. */
	if (EVP_Digest(len ? data : "", len, out, &out_len, EVP_sha256(), NULL) != 1 ||
	    out_len != HASH_LEN) {
		fprintf(stderr, "ckptfs: hash: EVP_Digest(SHA-256) of %zu bytes failed\n", len);
		abort();
	}
}

static void hash_fail(const char *what)
{
	fprintf(stderr, "ckptfs: hash: %s (SHA-256) failed\n", what);
	abort();
}

void hash_stream_begin(struct hash_stream *s)
{
	if (!s->ctx && !(s->ctx = EVP_MD_CTX_new()))
		hash_fail("EVP_MD_CTX_new");
	if (EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1)
		hash_fail("EVP_DigestInit_ex");
}

void hash_stream_add(struct hash_stream *s, const void *data, size_t len)
{
	assert(s->ctx != NULL);
	if (len && EVP_DigestUpdate(s->ctx, data, len) != 1)
		hash_fail("EVP_DigestUpdate");
}

void hash_stream_end(struct hash_stream *s, uint8_t out[HASH_LEN])
{
	unsigned int out_len = 0;

	assert(s->ctx != NULL);
	if (EVP_DigestFinal_ex(s->ctx, out, &out_len) != 1 || out_len != HASH_LEN)
		hash_fail("EVP_DigestFinal_ex");
}

void hash_stream_free(struct hash_stream *s)
{
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}

void hash_to_hex(const uint8_t hash[HASH_LEN], char out[HASH_HEX_LEN + 1])
{
	static const char hash_digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < HASH_LEN; i++) {
		out[2 * i] = hash_digits[hash[i] >> 4];
		out[2 * i + 1] = hash_digits[hash[i] & 0x0f];
	}
	out[HASH_HEX_LEN] = '\0';
}

/* Returns the value of one hex digit, or -1. Not isxdigit(): no locale. */
static int hash_hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int hash_from_hex(const char *hex, uint8_t out[HASH_LEN])
{
	uint8_t parsed[HASH_LEN];
	size_t i;

	if (hex == NULL)
		return -EINVAL;
	/* Stops at a NUL before reading past it: a short string is rejected at its
	 * end, never read beyond. */
	for (i = 0; i < HASH_LEN; i++) {
		int hi = hash_hex_value(hex[2 * i]);
		int lo = hi < 0 ? -1 : hash_hex_value(hex[2 * i + 1]);

		if (lo < 0)
			return -EINVAL;
		parsed[i] = (uint8_t)(hi << 4 | lo);
	}
	if (hex[HASH_HEX_LEN] != '\0')
		return -EINVAL;
	memcpy(out, parsed, HASH_LEN);
	return 0;
}
