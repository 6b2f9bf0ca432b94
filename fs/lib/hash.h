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

/* Writes HASH_HEX_LEN characters and a NUL. */
void hash_to_hex(const uint8_t hash[HASH_LEN], char out[HASH_HEX_LEN + 1]);

/* Parses exactly 64 hex digits (either case). Returns 0 or -EINVAL. */
int hash_from_hex(const char *hex, uint8_t out[HASH_LEN]);

#endif
