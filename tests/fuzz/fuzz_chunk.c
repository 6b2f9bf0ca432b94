/* fuzz_chunk — the chunk object decoder (fs/lib/store.c) over an object image
 * in memory, as a fetch from BACKING or an upload's read hands it over:
 * store_object_check (SHA-256) and store_object_verify (CRC, header only).
 *
 * The hash the object is checked against is the one its header names (bytes
 * 32..63), so that mutations get past "header names another chunk". An
 * object that checks must be what S5 promises: bounded lengths, its plain
 * bytes hashing to its name. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "codec.h"
#include "hash.h"
#include "log.h"
#include "store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *fz_plain;
static size_t fz_cap;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(stderr, LOG_LVL_OFF);
	fz_cap = chunker_default_params.max_size;
	fz_plain = malloc(fz_cap);
	return fz_plain ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hash[HASH_LEN] = { 0 };
	if (size >= 64)
		memcpy(hash, data + 32, HASH_LEN);
	uint8_t *obj = malloc(size ? size : 1); /* exactly size bytes, for ASan */
	memcpy(obj, data, size);
	size_t plain_len = 0;
	const char *why = NULL;
	int rc = store_object_check(hash, obj, size, fz_plain, fz_cap, &plain_len, &why);
	assert(rc == 0 || (rc == -EIO && why != NULL));
	if (rc == 0) {
		uint8_t got[HASH_LEN];
		assert(plain_len <= fz_cap);
		hash_sha256(fz_plain, plain_len, got);
		assert(memcmp(got, hash, HASH_LEN) == 0);
		assert(store_object_header_len(obj) <= size);
	}
	static const enum store_check how[] = { STORE_CHECK_HEADER, STORE_CHECK_CRC,
						STORE_CHECK_SHA };
	for (size_t i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
		why = NULL;
		int v = store_object_verify(hash, obj, size, fz_plain, fz_cap, how[i], &plain_len,
					    &why);
		assert(v == 0 || (v == -EIO && why != NULL));
		assert(how[i] != STORE_CHECK_SHA || v == rc); /* the same verdict as check */
	}
	free(obj);
	return 0;
}
