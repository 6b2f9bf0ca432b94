/* hash — SHA-256 of chunk contents (OpenSSL libcrypto) and its hex form.
 *
 * A chunk is named by the SHA-256 of its plain (uncompressed) bytes. The hex
 * form is lower-case, 64 characters, and is the chunk object's file name. */
#ifndef CKPTFS_HASH_H
#define CKPTFS_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_LEN 32
#define HASH_HEX_LEN 64

void hash_sha256(const void *data, size_t len, uint8_t out[HASH_LEN]);

/* A SHA-256 taken piece by piece (the writer hashes each piece while it is
 * in the CPU's cache, writer.h invariant 7). Starts zeroed; hash_stream_begin
 * (re)starts it, hash_stream_end writes the digest of every byte added since.
 * Like hash_sha256, a libcrypto failure aborts: a wrong name would corrupt
 * the store. */
struct hash_stream {
	void *ctx; /* EVP_MD_CTX, made at the first begin */
};
void hash_stream_begin(struct hash_stream *s);
void hash_stream_add(struct hash_stream *s, const void *data, size_t len);
void hash_stream_end(struct hash_stream *s, uint8_t out[HASH_LEN]);
void hash_stream_free(struct hash_stream *s); /* zeroed again */

/* Writes HASH_HEX_LEN characters and a NUL. */
void hash_to_hex(const uint8_t hash[HASH_LEN], char out[HASH_HEX_LEN + 1]);

/* Parses exactly 64 hex digits (either case). Returns 0 or -EINVAL. */
int hash_from_hex(const char *hex, uint8_t out[HASH_LEN]);

#endif
