/* fuzz_manifest_apply — what manifest_parse accepts, manifest_apply_parsed
 * must insert (meta/manifest.c invariant 1: the parser accepts exactly what
 * the builder can write). Each input is parsed with a correct "sum" line put
 * in place of its last line (as fuzz_manifest does); one that parses is
 * applied into a fresh catalog in a private temporary directory, which must
 * succeed and leave cat_check and cat_gen_check holding (M3). A value the
 * parser lets through and SQLite or the catalog then refuses (an integer
 * overflow in a sum, a constraint) is a finding. */
#define _GNU_SOURCE
#include <assert.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_dir[64], fz_db[96];

static int fz_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void fz_cleanup(void)
{
	nftw(fz_dir, fz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(stderr, LOG_LVL_OFF);
	/* /dev/shm when there is one: a catalog per accepted input */
	snprintf(fz_dir, sizeof(fz_dir), "%s/ckptfs-fuzz-apply-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (mkdtemp(fz_dir) == NULL)
		return 1;
	snprintf(fz_db, sizeof(fz_db), "%s/catalog.db", fz_dir);
	atexit(fz_cleanup);
	return 0;
}

static void fz_fresh(void)
{
	static const char *const tails[] = { "", "-wal", "-shm", "-journal", "-defer" };
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path), "%s%s", fz_db, tails[i]);
		unlink(path);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t body = size;
	if (body > 0 && data[body - 1] == '\n') {
		body--;
		while (body > 0 && data[body - 1] != '\n')
			body--;
		if (size - body < 4 || memcmp(data + body, "sum ", 4) != 0)
			body = size;
	}
	size_t len = body + 4 + HASH_HEX_LEN + 1;
	char *buf = malloc(len);
	memcpy(buf, data, body);
	uint8_t h[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	hash_sha256(buf, body, h);
	hash_to_hex(h, hex);
	memcpy(buf + body, "sum ", 4);
	memcpy(buf + body + 4, hex, HASH_HEX_LEN);
	buf[len - 1] = '\n';

	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX];
	if (manifest_parse(buf, len, &m, err, sizeof(err)) == 0) {
		struct cat *cat = NULL;
		fz_fresh();
		int rc = cat_open(fz_db, 0, 0, NULL, NULL, &cat);
		assert(rc == 0);
		rc = manifest_apply_parsed(cat, m, err, sizeof(err));
		if (rc != 0) {
			fprintf(stderr, "fuzz_manifest_apply: a parsed manifest does not apply: %d %s\n",
				rc, err);
			abort();
		}
		assert(cat_check(cat) == 0);
		assert(cat_gen_check(cat) == 0);
		cat_close(cat);
		manifest_free(m);
	}
	free(buf);
	return 0;
}
