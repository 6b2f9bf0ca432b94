/* fuzz_chunk_file — the chunk object decoder of fs/lib/store.c over an object
 * file in the cache (what a crash, a bad disk or another process may leave
 * there): store_stat, store_get, store_load and store_read_object read it
 * back from a store in a private temporary directory.
 *
 * Each input is written as the object its header names (bytes 32..63), so
 * that mutations get past "header names another chunk". Whatever the file
 * holds, each call returns 0, -EIO or -EFBIG (store_read_object, a small
 * buffer), and a success hands out bytes that hash to the name. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunker.h"
#include "hash.h"
#include "log.h"
#include "store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_dir[64];
static struct store *fz_st;
static uint8_t *fz_buf;
static size_t fz_cap;

static int fz_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void fz_cleanup(void)
{
	store_close(fz_st);
	nftw(fz_dir, fz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(stderr, LOG_LVL_OFF);
	snprintf(fz_dir, sizeof(fz_dir), "/tmp/ckptfs-fuzz-chunk-XXXXXX");
	if (mkdtemp(fz_dir) == NULL || store_open(fz_dir, &fz_st) != 0)
		return 1;
	atexit(fz_cleanup);
	/* a success must hash to its name: no CRC-only check (S4) */
	store_set_local_check(fz_st, STORE_CHECK_SHA);
	fz_cap = chunker_default_params.max_size;
	fz_buf = malloc(fz_cap);
	return fz_buf ? 0 : 1;
}

static void fz_write(const uint8_t hash[HASH_LEN], const uint8_t *data, size_t size)
{
	char rel[160], path[256];
	store_object_relpath(hash, rel, sizeof(rel));
	snprintf(path, sizeof(path), "%s/%s", fz_dir, rel);
	char *slash = strrchr(path, '/');
	*slash = 0;
	char *mid = strrchr(path, '/');
	*mid = 0;
	mkdir(path, 0700); /* chunks/ab */
	*mid = '/';
	mkdir(path, 0700); /* chunks/ab/cd */
	*slash = '/';
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert(fd >= 0);
	assert(write(fd, data, size) == (ssize_t)size);
	close(fd);
}

static void fz_hashes_to(const uint8_t hash[HASH_LEN], const uint8_t *plain, size_t len)
{
	uint8_t got[HASH_LEN];
	hash_sha256(plain, len, got);
	assert(memcmp(got, hash, HASH_LEN) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t hash[HASH_LEN] = { 0 };
	if (size >= 64)
		memcpy(hash, data + 32, HASH_LEN);
	fz_write(hash, data, size);

	struct store_object_info info;
	int rc = store_stat(fz_st, hash, &info);
	assert(rc == 0 || rc == -EIO);
	if (rc == 0)
		assert(info.plain_len <= fz_cap && info.header_len + info.stored_len == size);

	size_t len = 0;
	rc = store_get(fz_st, hash, fz_buf, fz_cap, &len);
	assert(rc == 0 || rc == -EIO);
	if (rc == 0)
		fz_hashes_to(hash, fz_buf, len);

	struct store_chunk c;
	rc = store_load(fz_st, hash, fz_cap, &c);
	assert(rc == 0 || rc == -EIO);
	if (rc == 0) {
		fz_hashes_to(hash, c.plain, c.len);
		store_chunk_free(&c);
	}

	uint8_t small[4096];
	rc = store_read_object(fz_st, hash, small, sizeof(small), &len);
	assert(rc == 0 || rc == -EIO || rc == -EFBIG);
	if (rc == 0)
		assert(len == size && memcmp(small, data, size) == 0);
	store_remove(fz_st, hash);
	return 0;
}
