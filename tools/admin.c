/* ckptfs-admin — look into a ckptfs catalog and store.
 *
 *   ckptfs-admin stats  (MOUNTPOINT | --cache DIR)   totals: files, bytes, dedup, compression
 *   ckptfs-admin check  (MOUNTPOINT | --cache DIR)   catalog invariants (counts, extents)
 *   ckptfs-admin verify (MOUNTPOINT | --cache DIR)   re-hash every chunk object on BACKING
 *
 * The catalog is opened read-only, so these work while the filesystem is
 * mounted (SQLite WAL readers do not block the daemon) and offline alike.
 * Exit codes: 0 ok, 1 a check found a problem, 2 bad usage, 3 not a ckptfs
 * mount or cache. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "catalog.h"
#include "log.h"
#include "store.h"

#define ADMIN_OK 0
#define ADMIN_PROBLEM 1
#define ADMIN_USAGE 2
#define ADMIN_NOT_CKPTFS 3

static void admin_usage(FILE *f)
{
	fprintf(f, "usage: ckptfs-admin COMMAND (MOUNTPOINT | --cache DIR)\n"
		   "\n"
		   "commands:\n"
		   "  stats    files, logical bytes, unique and stored bytes, dedup and compression\n"
		   "  check    check the catalog's invariants (reference counts, extents)\n"
		   "  verify   re-read and re-hash every chunk object on BACKING\n"
		   "\n"
		   "exit codes: 0 ok, 1 a problem was found, 2 bad usage, 3 not a ckptfs mount/cache\n");
}

struct admin_ctx {
	char cache[PATH_MAX];
	char backing[PATH_MAX];
	struct cat *cat;
};

static int admin_locate(const char *target, int by_cache, struct admin_ctx *a)
{
	if (by_cache) {
		snprintf(a->cache, sizeof(a->cache), "%s", target);
	} else {
		ssize_t n = getxattr(target, "user.ckptfs.cache", a->cache, sizeof(a->cache) - 1);
		if (n < 0) {
			fprintf(stderr, "ckptfs-admin: %s: not a ckptfs mount (%s)\n", target,
				strerror(errno == ENODATA || errno == ENOTSUP ? EINVAL : errno));
			return ADMIN_NOT_CKPTFS;
		}
		a->cache[n] = '\0';
	}
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/backing", a->cache);
	FILE *f = fopen(path, "re");
	if (!f || !fgets(a->backing, sizeof(a->backing), f)) {
		fprintf(stderr, "ckptfs-admin: cache %s: not a ckptfs cache (no %s)\n", a->cache, path);
		if (f)
			fclose(f);
		return ADMIN_NOT_CKPTFS;
	}
	fclose(f);
	a->backing[strcspn(a->backing, "\n")] = '\0';
	snprintf(path, sizeof(path), "%s/catalog.db", a->cache);
	int rc = cat_open_readonly(path, &a->cat);
	if (rc != 0) {
		fprintf(stderr, "ckptfs-admin: catalog %s: cannot open: %s\n", path, strerror(-rc));
		return ADMIN_NOT_CKPTFS;
	}
	return ADMIN_OK;
}

static double admin_ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static int admin_stats(struct admin_ctx *a)
{
	struct cat_stats s;
	int rc = cat_stats(a->cat, &s);
	if (rc != 0) {
		fprintf(stderr, "ckptfs-admin: stats: %s\n", strerror(-rc));
		return ADMIN_PROBLEM;
	}
	printf("cache %s\n", a->cache);
	printf("backing %s\n", a->backing);
	printf("inodes %" PRIu64 "\n", s.inodes);
	printf("files %" PRIu64 "\n", s.files);
	printf("logical_bytes %" PRIu64 "\n", s.logical_bytes);
	printf("referenced_bytes %" PRIu64 "\n", s.referenced_bytes);
	printf("chunks %" PRIu64 "\n", s.chunks);
	printf("unique_bytes %" PRIu64 "\n", s.chunk_plain_bytes);
	printf("stored_bytes %" PRIu64 "\n", s.chunk_stored_bytes);
	printf("dedup_ratio %.3f\n", admin_ratio(s.referenced_bytes, s.chunk_plain_bytes));
	printf("compression_ratio %.3f\n", admin_ratio(s.chunk_plain_bytes, s.chunk_stored_bytes));
	return ADMIN_OK;
}

static int admin_check(struct admin_ctx *a)
{
	int rc = cat_check(a->cat);
	if (rc != 0) {
		fprintf(stderr, "ckptfs-admin: check: the catalog has problems (see the lines above)\n");
		return ADMIN_PROBLEM;
	}
	printf("catalog ok\n");
	return ADMIN_OK;
}

struct admin_verify {
	struct store *store;
	uint64_t ok, bad, skipped;
	char *buf;
	size_t cap;
};

static int admin_verify_one(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			    uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct admin_verify *v = arg;
	if (stored_len < 0 || refcount == 0) { /* being written, or about to go */
		v->skipped++;
		return 0;
	}
	if (v->cap < plain_len) {
		char *nb = realloc(v->buf, plain_len ? plain_len : 1);
		if (!nb)
			return -ENOMEM;
		v->buf = nb;
		v->cap = plain_len;
	}
	size_t got;
	char hex[HASH_HEX_LEN + 1];
	int rc = store_get(v->store, hash, v->buf, v->cap, &got);
	if (rc == 0 && got == plain_len) {
		v->ok++;
		return 0;
	}
	hash_to_hex(hash, hex);
	printf("corrupt chunk %s (%s)\n", hex, rc ? strerror(-rc) : "wrong length");
	v->bad++;
	return 0;
}

static int admin_verify_store(struct admin_ctx *a)
{
	struct admin_verify v = { 0 };
	int rc = store_open(a->backing, &v.store);
	if (rc != 0) {
		fprintf(stderr, "ckptfs-admin: BACKING %s: cannot open: %s\n", a->backing, strerror(-rc));
		return ADMIN_PROBLEM;
	}
	rc = cat_chunks(a->cat, admin_verify_one, &v);
	store_close(v.store);
	free(v.buf);
	printf("chunks_ok %" PRIu64 "\nchunks_bad %" PRIu64 "\nchunks_skipped %" PRIu64 "\n", v.ok,
	       v.bad, v.skipped);
	if (rc != 0) {
		fprintf(stderr, "ckptfs-admin: verify: %s\n", strerror(-rc));
		return ADMIN_PROBLEM;
	}
	return v.bad ? ADMIN_PROBLEM : ADMIN_OK;
}

int main(int argc, char **argv)
{
	log_setup(stderr, LOG_LVL_WARN);
	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		admin_usage(stdout);
		return ADMIN_OK;
	}
	const char *cmd = argc >= 2 ? argv[1] : NULL, *target = NULL;
	int by_cache = 0;
	if (argc == 3) {
		target = argv[2];
	} else if (argc == 4 && strcmp(argv[2], "--cache") == 0) {
		target = argv[3];
		by_cache = 1;
	}
	int (*fn)(struct admin_ctx *) = NULL;
	if (cmd && strcmp(cmd, "stats") == 0)
		fn = admin_stats;
	else if (cmd && strcmp(cmd, "check") == 0)
		fn = admin_check;
	else if (cmd && strcmp(cmd, "verify") == 0)
		fn = admin_verify_store;
	if (!fn || !target) {
		if (cmd && !fn)
			fprintf(stderr, "ckptfs-admin: unknown command '%s' (see ckptfs-admin --help)\n", cmd);
		else
			fprintf(stderr, "ckptfs-admin: expected COMMAND and MOUNTPOINT or --cache DIR "
					"(see ckptfs-admin --help)\n");
		return ADMIN_USAGE;
	}
	struct admin_ctx a = { 0 };
	int rc = admin_locate(target, by_cache, &a);
	if (rc == ADMIN_OK)
		rc = fn(&a);
	cat_close(a.cat);
	return rc;
}
