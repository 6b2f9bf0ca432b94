/* fuzz_journal — the intent journal decoder of meta/catalog_defer.c (D7,
 * D8): each input is written as the journal of a catalog in a private
 * temporary directory, then cat_defer_recover reads it back, as an open
 * after a crash does.
 *
 * Whatever the journal holds, recovery returns 0, reclaims only hashes the
 * journal names as whole records (the reclaim callback checks that the hex
 * of each is in the input), and removes the journal. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_internal.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_dir[64], fz_db[96], fz_journal[128];
static struct cat *fz_cat;
static const uint8_t *fz_input;
static size_t fz_input_len;

static int fz_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void fz_cleanup(void)
{
	cat_close(fz_cat);
	nftw(fz_dir, fz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Every hash reclaimed is named, in lower-case hex, by the input. */
static int fz_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(void)arg;
	char hex[2 * CAT_HASH_LEN + 1];
	cat_hex(hash, hex);
	assert(memmem(fz_input, fz_input_len, hex, 2 * CAT_HASH_LEN) != NULL);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(stderr, LOG_LVL_OFF);
	snprintf(fz_dir, sizeof(fz_dir), "/tmp/ckptfs-fuzz-journal-XXXXXX");
	if (mkdtemp(fz_dir) == NULL)
		return 1;
	snprintf(fz_db, sizeof(fz_db), "%s/catalog.db", fz_dir);
	snprintf(fz_journal, sizeof(fz_journal), "%s-defer", fz_db);
	if (cat_open(fz_db, 0, 0, fz_reclaim, NULL, &fz_cat) != 0)
		return 1;
	atexit(fz_cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = open(fz_journal, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert(fd >= 0);
	assert(write(fd, data, size) == (ssize_t)size);
	close(fd);
	fz_input = data;
	fz_input_len = size;
	pthread_mutex_lock(&fz_cat->lock);
	int rc = cat_defer_recover(fz_cat);
	pthread_mutex_unlock(&fz_cat->lock);
	assert(rc == 0);
	struct stat sb;
	assert(stat(fz_journal, &sb) != 0 && errno == ENOENT); /* read and removed */
	return 0;
}
