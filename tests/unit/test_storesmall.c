/* Unit tests for small chunk objects as rows of CACHE/small.db (store.c S7,
 * fs/lib/storesmall.c): a small object is a row, not a file, and its image is
 * byte for byte the file an older store writes (T1); every read of the store
 * finds it and checks it (a damaged row is -EIO naming the chunk); objects
 * written as files (an older cache) are still read and removed; rows survive
 * a reopen and are read by a store that does not write them; the uploader's
 * calls say "copy" (no file to link); removals give the disk space back
 * (T4); threads put and read at once. Every test has its own directory. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "store.h"
#include "storesmall.h"
#include "support.h"

#define KiB ((size_t)1024)
#define TS_CAP (8 * 1024 * KiB) /* plain capacity handed to reads */

static struct {
	char dir[64], other[64];
	struct store *st;
	FILE *log;
} fx;

static void setup(void)
{
	fx.log = tmpfile();
	cr_assert_not_null(fx.log);
	log_setup(fx.log, LOG_LVL_DEBUG);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "storesmall");
	ts_tmpdir_make(fx.other, sizeof(fx.other), "storesmall-files");
	OK(store_open(fx.dir, &fx.st));
	OK(store_set_small(fx.st, STORE_SMALL_MAX));
}

static void teardown(void)
{
	store_close(fx.st);
	ts_tmpdir_remove(fx.dir);
	ts_tmpdir_remove(fx.other);
	log_setup(stderr, LOG_LVL_WARN);
	fclose(fx.log);
}

static void tk_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

/* Puts len random bytes of seed; their hash into hash. */
static void tk_put(struct store *st, size_t len, uint64_t seed, uint8_t hash[HASH_LEN])
{
	uint8_t *buf = malloc(len ? len : 1);
	cr_assert_not_null(buf);
	tk_random(buf, len, seed);
	hash_sha256(buf, len, hash);
	OK(store_put(st, hash, buf, len, 0, NULL));
	free(buf);
}

/* Reads the chunk back through store_get and store_load and compares it with
 * the bytes of seed. */
static void tk_expect(struct store *st, const uint8_t hash[HASH_LEN], size_t len, uint64_t seed)
{
	uint8_t *want = malloc(len ? len : 1), *got = malloc(TS_CAP);
	cr_assert(want && got);
	tk_random(want, len, seed);
	size_t n = 0;
	OK(store_get(st, hash, got, TS_CAP, &n));
	cr_assert_eq(n, len);
	cr_assert_eq(memcmp(got, want, len), 0, "store_get: bytes differ");
	struct store_chunk c;
	OK(store_load(st, hash, TS_CAP, &c));
	cr_assert_eq(c.len, len);
	cr_assert_eq(memcmp(c.plain, want, len), 0, "store_load: bytes differ");
	store_chunk_free(&c);
	free(want);
	free(got);
}

static bool tk_file_exists(const char *root, const uint8_t hash[HASH_LEN])
{
	char rel[128], path[256];
	struct stat sb;
	store_object_relpath(hash, rel, sizeof(rel));
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return stat(path, &sb) == 0;
}

static off_t tk_size(const char *root, const char *name)
{
	char path[256];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/%s", root, name);
	return stat(path, &sb) == 0 ? sb.st_size : 0;
}

static bool tk_logged(const char *what)
{
	char text[65536];
	fflush(fx.log);
	rewind(fx.log);
	size_t n = fread(text, 1, sizeof(text) - 1, fx.log);
	text[n] = '\0';
	fseek(fx.log, 0, SEEK_END);
	return strstr(text, what) != NULL;
}

Test(storesmall, a_small_object_is_a_row_not_a_file_and_reads_back_byte_for_byte,
     .init = setup, .fini = teardown)
{
	size_t lens[] = { 0, 1, 4095, 4096, 4097, 60 * KiB };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t h[HASH_LEN];
		tk_put(fx.st, lens[i], i + 1, h);
		cr_assert(!tk_file_exists(fx.dir, h), "a %zu-byte object got a file", lens[i]);
		cr_assert(store_has(fx.st, h));
		struct store_object_info info;
		OK(store_stat(fx.st, h, &info));
		cr_assert_eq(info.plain_len, lens[i]);
		tk_expect(fx.st, h, lens[i], i + 1);
	}
	cr_assert_gt(tk_size(fx.dir, STORESMALL_FILE), 0);
}

Test(storesmall, a_rows_image_is_the_file_an_older_store_writes, .init = setup, .fini = teardown)
{
	struct store *files;
	OK(store_open(fx.other, &files)); /* small off: objects in files, as before */
	uint8_t h[HASH_LEN], h2[HASH_LEN];
	tk_put(fx.st, 4096, 7, h);
	tk_put(files, 4096, 7, h2);
	cr_assert_eq(memcmp(h, h2, HASH_LEN), 0);
	cr_assert(tk_file_exists(fx.other, h));
	uint8_t row[8192], file[8192];
	size_t rn = 0, fn = 0;
	OK(store_read_object(fx.st, h, row, sizeof(row), &rn));
	OK(store_read_object(files, h, file, sizeof(file), &fn));
	cr_assert_eq(rn, fn);
	cr_assert_eq(memcmp(row, file, rn), 0, "the row's image differs from the file's");
	store_close(files);
}

Test(storesmall, an_object_past_the_limit_still_goes_to_a_file, .init = setup, .fini = teardown)
{
	uint8_t h[HASH_LEN];
	tk_put(fx.st, STORE_SMALL_MAX, 3, h); /* raw: image = header + plain > the limit */
	cr_assert(tk_file_exists(fx.dir, h));
	tk_expect(fx.st, h, STORE_SMALL_MAX, 3);
}

Test(storesmall, objects_of_an_older_cache_in_files_are_read_and_removed, .init = setup,
     .fini = teardown)
{
	store_close(fx.st);
	OK(store_open(fx.dir, &fx.st)); /* as an older version: small off */
	OK(store_set_small(fx.st, 0));
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 4096, 11, h);
	cr_assert(tk_file_exists(fx.dir, h));
	store_close(fx.st);
	OK(store_open(fx.dir, &fx.st));
	OK(store_set_small(fx.st, STORE_SMALL_MAX));
	tk_expect(fx.st, h, 4096, 11);
	size_t len;
	cr_assert_eq(store_check_unread(fx.st, h, &len), -EAGAIN); /* not written by this process */
	char rel[128];
	cr_assert_geq(store_object_at(fx.st, h, rel, sizeof(rel)), 0, "a file can be linked");
	OK(store_remove(fx.st, h));
	cr_assert(!tk_file_exists(fx.dir, h));
	cr_assert(!store_has(fx.st, h));
}

Test(storesmall, rows_survive_a_reopen_and_a_store_that_writes_files_reads_them,
     .init = setup, .fini = teardown)
{
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 4096, 5, h);
	store_close(fx.st);
	OK(store_open(fx.dir, &fx.st)); /* small.db exists: read whatever new objects go to */
	tk_expect(fx.st, h, 4096, 5);
	OK(store_set_small(fx.st, 0));
	uint8_t h2[HASH_LEN];
	tk_put(fx.st, 4096, 6, h2);
	cr_assert(tk_file_exists(fx.dir, h2), "with 0 new objects go to files");
	tk_expect(fx.st, h, 4096, 5);
}

Test(storesmall, a_store_without_small_db_creates_none_when_read, .init = setup, .fini = teardown)
{
	struct store *files;
	OK(store_open(fx.other, &files));
	uint8_t h[HASH_LEN] = { 1 };
	cr_assert(!store_has(files, h));
	store_close(files);
	cr_assert_eq(tk_size(fx.other, STORESMALL_FILE), 0);
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", fx.other, STORESMALL_FILE);
	cr_assert_neq(access(path, F_OK), 0, "a BACKING-like store got a small.db (T3)");
}

/* Flips one byte of a row's image at off, through SQLite. */
static void tk_damage_row(const uint8_t hash[HASH_LEN], size_t off)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", fx.dir, STORESMALL_FILE);
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	sqlite3_stmt *st;
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT image FROM objects WHERE hash = ?1", -1, &st,
					NULL), SQLITE_OK);
	sqlite3_bind_blob(st, 1, hash, HASH_LEN, SQLITE_STATIC);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	size_t n = (size_t)sqlite3_column_bytes(st, 0);
	uint8_t *img = malloc(n);
	memcpy(img, sqlite3_column_blob(st, 0), n);
	sqlite3_finalize(st);
	img[off] ^= 0x40;
	cr_assert_eq(sqlite3_prepare_v2(db, "UPDATE objects SET image = ?2 WHERE hash = ?1", -1,
					&st, NULL), SQLITE_OK);
	sqlite3_bind_blob(st, 1, hash, HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_blob(st, 2, img, (int)n, SQLITE_STATIC);
	cr_assert_eq(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(img);
}

Test(storesmall, a_damaged_row_reads_as_eio_naming_the_chunk, .init = setup, .fini = teardown)
{
	uint8_t h[HASH_LEN], buf[8192];
	tk_put(fx.st, 4096, 9, h);
	tk_damage_row(h, STORE_HEADER_LEN + 100); /* a payload byte: the CRC catches it */
	size_t n;
	cr_assert_eq(store_get(fx.st, h, buf, sizeof(buf), &n), -EIO);
	struct store_chunk c;
	cr_assert_eq(store_load(fx.st, h, TS_CAP, &c), -EIO);
	OK(store_read_object(fx.st, h, buf, sizeof(buf), &n)); /* header fine: the caller verifies */
	uint8_t scratch[8192];
	const char *why = NULL;
	size_t plain_len;
	cr_assert_eq(store_object_verify(h, buf, n, scratch, sizeof(scratch),
					 store_local_check(fx.st), &plain_len, &why), -EIO);
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(h, hex);
	cr_assert(tk_logged(hex), "the log names the chunk");

	uint8_t h2[HASH_LEN];
	tk_put(fx.st, 4096, 10, h2);
	tk_damage_row(h2, 20); /* the header's plain length */
	struct store_object_info info;
	cr_assert_eq(store_stat(fx.st, h2, &info), -EIO);
	cr_assert_eq(store_read_object(fx.st, h2, buf, sizeof(buf), &n), -EIO);
	cr_assert_eq(store_get(fx.st, h2, buf, sizeof(buf), &n), -EIO);
}

Test(storesmall, a_row_is_copied_not_linked_by_the_uploader, .init = setup, .fini = teardown)
{
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 4096, 12, h);
	size_t len;
	cr_assert_eq(store_check_unread(fx.st, h, &len), -EAGAIN, "a row is read and verified");
	char rel[128];
	cr_assert_eq(store_object_at(fx.st, h, rel, sizeof(rel)), -EXDEV);
	bool hashed = true;
	uint8_t buf[8192];
	OK(store_read_upload(fx.st, h, buf, sizeof(buf), &len, &hashed));
	cr_assert(!hashed, "S2 never vouches for a row");
	cr_assert_eq(store_read_upload(fx.st, h, buf, 100, &len, &hashed), -EFBIG);
}

Test(storesmall, sync_of_a_row_and_a_synced_put_succeed, .init = setup, .fini = teardown)
{
	uint8_t h[HASH_LEN], buf[4096];
	tk_put(fx.st, 4096, 13, h);
	OK(store_sync(fx.st, h));
	tk_random(buf, sizeof(buf), 14);
	hash_sha256(buf, sizeof(buf), h);
	OK(store_put(fx.st, h, buf, sizeof(buf), STORE_SYNC, NULL));
	cr_assert(!tk_file_exists(fx.dir, h));
	tk_expect(fx.st, h, 4096, 14);
	OK(store_syncfs(fx.st));
	uint8_t absent[HASH_LEN] = { 0xee };
	cr_assert_eq(store_sync(fx.st, absent), -ENOENT);
}

Test(storesmall, removing_rows_makes_them_missing_and_gives_the_space_back, .init = setup,
     .fini = teardown)
{
	enum { N = 600 };
	static uint8_t h[N][HASH_LEN];
	for (int i = 0; i < N; i++)
		tk_put(fx.st, 16 * KiB, 100 + i, h[i]);
	store_close(fx.st); /* the last connection checkpoints: the main file holds all */
	off_t full = tk_size(fx.dir, STORESMALL_FILE);
	cr_assert_gt(full, (off_t)N * 16 * KiB);
	OK(store_open(fx.dir, &fx.st));
	OK(store_set_small(fx.st, STORE_SMALL_MAX));
	for (int i = 0; i < N; i++)
		OK(store_remove(fx.st, h[i]));
	for (int i = 0; i < N; i += 37) {
		cr_assert(!store_has(fx.st, h[i]));
		struct store_chunk c;
		cr_assert_eq(store_load(fx.st, h[i], TS_CAP, &c), -ENOENT);
	}
	store_close(fx.st);
	off_t after = tk_size(fx.dir, STORESMALL_FILE);
	cr_assert_lt(after, full / 10, "small.db kept %lld of %lld bytes", (long long)after,
		     (long long)full);
	OK(store_open(fx.dir, &fx.st));
}

struct tk_thread {
	int id;
	int bad;
};

static void *tk_worker(void *arg)
{
	struct tk_thread *t = arg;
	uint8_t buf[4096], got[4096];
	for (int i = 0; i < 200; i++) {
		uint64_t seed = (uint64_t)t->id * 1000 + (uint64_t)i;
		uint8_t h[HASH_LEN];
		tk_random(buf, sizeof(buf), seed);
		hash_sha256(buf, sizeof(buf), h);
		size_t n = 0;
		if (store_put(fx.st, h, buf, sizeof(buf), 0, NULL) != 0 ||
		    store_get(fx.st, h, got, sizeof(got), &n) != 0 || n != sizeof(buf) ||
		    memcmp(got, buf, n) != 0)
			t->bad++;
	}
	return NULL;
}

Test(storesmall, threads_putting_and_reading_at_once_all_round_trip, .init = setup,
     .fini = teardown)
{
	enum { T = 8 };
	pthread_t th[T];
	struct tk_thread arg[T];
	for (int i = 0; i < T; i++) {
		arg[i] = (struct tk_thread){ .id = i };
		cr_assert_eq(pthread_create(&th[i], NULL, tk_worker, &arg[i]), 0);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(arg[i].bad, 0, "thread %d: %d objects did not round-trip", i, arg[i].bad);
	}
}

Test(storesmall, small_db_is_private_whatever_the_umask, .init = setup, .fini = teardown)
{
	store_close(fx.st);
	mode_t old = umask(0);
	OK(store_open(fx.other, &fx.st));
	OK(store_set_small(fx.st, STORE_SMALL_MAX));
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 4096, 15, h);
	umask(old);
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", fx.other, STORESMALL_FILE);
	struct stat sb;
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0600, "small.db has mode %o", sb.st_mode & 0777);
	snprintf(path, sizeof(path), "%s/%s-wal", fx.other, STORESMALL_FILE);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_mode & 0077, 0, "small.db-wal has mode %o", sb.st_mode & 0777);
}

/* ---- the rows as a tree of files (T6), and the WAL's size (T5) ---- */

struct tk_names {
	char v[256][HASH_HEX_LEN + 1];
	int n;
};

static int tk_name_add(void *arg, const char *name)
{
	struct tk_names *l = arg;
	cr_assert_lt(l->n, 256);
	snprintf(l->v[l->n++], sizeof(l->v[0]), "%s", name);
	return 0;
}

/* Every relpath the listing shows, walked as a gc walks chunks/ab/cd/. */
static int tk_walk(struct storesmall *ss, char out[][128], int max)
{
	struct tk_names *top = calloc(3, sizeof(*top)), *mid = top + 1, *leaf = top + 2;
	cr_assert_not_null(top);
	int n = 0;
	OK(storesmall_list(ss, "chunks", tk_name_add, top));
	for (int a = 0; a < top->n; a++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "chunks/%s", top->v[a]);
		mid->n = 0;
		OK(storesmall_list(ss, rel, tk_name_add, mid));
		cr_assert_gt(mid->n, 0, "%s listed but empty", rel);
		for (int b = 0; b < mid->n; b++) {
			char dir[64];
			snprintf(dir, sizeof(dir), "%s/%s", rel, mid->v[b]);
			leaf->n = 0;
			OK(storesmall_list(ss, dir, tk_name_add, leaf));
			cr_assert_gt(leaf->n, 0, "%s listed but empty", dir);
			for (int i = 0; i < leaf->n && n < max; i++)
				snprintf(out[n++], 128, "%s/%s", dir, leaf->v[i]);
		}
	}
	free(top);
	return n;
}

static int tk_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

Test(storesmall, rows_are_listed_sized_and_removed_by_the_names_of_their_files, .init = setup,
     .fini = teardown)
{
	enum { N = 40 };
	static uint8_t h[N][HASH_LEN];
	static char want[N][128], got[N + 8][128];
	for (int i = 0; i < N; i++) {
		tk_put(fx.st, 1000 + 97 * (size_t)i, 500 + i, h[i]);
		store_object_relpath(h[i], want[i], sizeof(want[i]));
	}
	uint8_t big[HASH_LEN]; /* a file, not a row: never listed here */
	tk_put(fx.st, 256 * KiB, 77, big);
	cr_assert(tk_file_exists(fx.dir, big));
	struct storesmall *ss; /* a second connection, as ckptfs-admin gc opens one */
	OK(storesmall_open(fx.dir, false, &ss));
	int n = tk_walk(ss, got, N + 8);
	cr_assert_eq(n, N, "listed %d rows of %d", n, N);
	qsort(want, N, sizeof(want[0]), tk_cmp);
	qsort(got, (size_t)n, sizeof(got[0]), tk_cmp);
	for (int i = 0; i < N; i++)
		cr_assert_str_eq(got[i], want[i]);
	for (int i = 0; i < N; i++) {
		char rel[128];
		uint64_t size = 0;
		size_t len = 0;
		store_object_relpath(h[i], rel, sizeof(rel));
		OK(storesmall_stat(ss, rel, &size));
		OK(storesmall_len(ss, h[i], &len));
		cr_assert_eq(size, len);
		cr_assert_gt(size, (uint64_t)STORE_HEADER_LEN);
	}
	/* a name that is not exactly a row's file: nothing is found or removed */
	char rel[128], bad[128];
	store_object_relpath(h[3], rel, sizeof(rel));
	snprintf(bad, sizeof(bad), "%s", rel);
	bad[7] = bad[7] == '0' ? '1' : '0'; /* the first shard no longer the hash's */
	uint64_t size;
	cr_assert_eq(storesmall_stat(ss, bad, &size), -ENOENT);
	cr_assert_eq(storesmall_remove_rel(ss, bad), -ENOENT);
	cr_assert_eq(storesmall_list(ss, "chunkz", tk_name_add, &(struct tk_names){ 0 }), -ENOENT);
	cr_assert(store_has(fx.st, h[3]));
	/* removed by its name: gone for the store, the others stay */
	OK(storesmall_remove_rel(ss, rel));
	cr_assert(!store_has(fx.st, h[3]));
	cr_assert_eq(storesmall_stat(ss, rel, &size), -ENOENT);
	OK(storesmall_remove_rel(ss, rel)); /* absent is success */
	cr_assert_eq(tk_walk(ss, got, N + 8), N - 1);
	for (int i = 0; i < N; i++)
		if (i != 3)
			tk_expect(fx.st, h[i], 1000 + 97 * (size_t)i, 500 + (uint64_t)i);
	storesmall_close(ss);
}

Test(storesmall, an_empty_small_db_lists_nothing, .init = setup, .fini = teardown)
{
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 4096, 3, h);
	OK(store_remove(fx.st, h));
	struct storesmall *ss;
	OK(storesmall_open(fx.dir, false, &ss));
	struct tk_names l = { 0 };
	OK(storesmall_list(ss, "chunks", tk_name_add, &l));
	OK(storesmall_list(ss, "chunks/00", tk_name_add, &l));
	OK(storesmall_list(ss, "chunks/ff/ff", tk_name_add, &l));
	cr_assert_eq(l.n, 0);
	storesmall_close(ss);
}

Test(storesmall, the_wal_is_counted_on_disk_and_cut_back_after_checkpoints, .init = setup,
     .fini = teardown)
{
	uint64_t wal = 1;
	OK(storesmall_wal_bytes(fx.other, &wal)); /* no small.db at all */
	cr_assert_eq(wal, 0);
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 16 * KiB, 1, h);
	OK(storesmall_wal_bytes(fx.dir, &wal));
	cr_assert_gt(wal, 16 * KiB, "a put's row is in the WAL until a checkpoint: %llu bytes",
		     (unsigned long long)wal);
	/* 40 MiB of rows: checkpoints come every 16 MiB of WAL and cut it back (T5) */
	for (int i = 0; i < 1280; i++)
		tk_put(fx.st, 32 * KiB, 1000 + (uint64_t)i, h);
	OK(storesmall_wal_bytes(fx.dir, &wal));
	cr_assert_gt(wal, 0);
	cr_assert_leq(wal, STORESMALL_WAL_TARGET + (1u << 20), "WAL of %llu bytes",
		      (unsigned long long)wal);
	char path[128];
	struct stat sb;
	snprintf(path, sizeof(path), "%s/%s-wal", fx.dir, STORESMALL_FILE);
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(wal, (uint64_t)sb.st_blocks * 512);
}

/* store_present (fs/gen.h invariant 11): presence and length only, for a
 * row and a file alike; a file a power loss left empty is damaged. */
Test(storesmall, present_says_whether_an_object_is_here_whole_in_size, .init = setup,
     .fini = teardown)
{
	uint8_t row[HASH_LEN], file[HASH_LEN], none[HASH_LEN];
	char path[512];
	tk_put(fx.st, 1000, 71, row);
	tk_put(fx.st, 256 * KiB, 72, file);
	tk_random(none, HASH_LEN, 73);
	OK(store_present(fx.st, row, 1000));
	OK(store_present(fx.st, file, 256 * KiB));
	cr_assert_eq(store_present(fx.st, none, 1000), -ENOENT);
	cr_assert_eq(store_present(fx.st, row, 999), -EIO, "a row of another length");
	cr_assert_eq(store_present(fx.st, file, 256 * KiB + 1), -EIO, "a file of another length");
	/* what a power loss leaves of an object renamed into place unsynced */
	store_object_path(fx.st, file, path, sizeof(path));
	cr_assert_eq(truncate(path, 0), 0);
	cr_assert_eq(store_present(fx.st, file, 256 * KiB), -EIO, "an empty object file");
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(store_present(fx.st, file, 256 * KiB), -ENOENT, "an object file gone");
	OK(store_remove(fx.st, row));
	cr_assert_eq(store_present(fx.st, row, 1000), -ENOENT, "a row gone");
}

/* T10: with batches (T8) the checkpoint is not the commit's (it would run in
 * the catalog's commit hook): a commit notes it due, the next put commits and
 * checkpoints. The WAL is cut back as without batches (T5), and every row
 * committed reads back through another connection. */
Test(storesmall, batched_puts_checkpoint_on_a_put_and_cut_the_wal_back, .init = setup,
     .fini = teardown)
{
	store_small_batch(fx.st);
	uint8_t h[HASH_LEN], first[HASH_LEN];
	uint64_t wal = 0;
	for (int i = 0; i < 1280; i++) {
		tk_put(fx.st, 32 * KiB, 1000 + (uint64_t)i, i == 0 ? first : h);
		if (i % 8 == 7)
			OK(store_small_commit(fx.st)); /* as the catalog's commit hook does */
	}
	OK(store_small_commit(fx.st));
	OK(storesmall_wal_bytes(fx.dir, &wal));
	cr_assert_gt(wal, 0);
	cr_assert_leq(wal, STORESMALL_WAL_TARGET + (1u << 20), "WAL of %llu bytes",
		      (unsigned long long)wal);
	struct storesmall *other;
	size_t len = 0;
	OK(storesmall_open(fx.dir, false, &other));
	OK(storesmall_len(other, first, &len));
	OK(storesmall_len(other, h, &len));
	storesmall_close(other);
}

/* T8: a batched put is not seen by another connection before its commit,
 * and is after it (what the catalog's commit hook relies on). */
Test(storesmall, a_batched_put_is_committed_by_store_small_commit, .init = setup, .fini = teardown)
{
	store_small_batch(fx.st);
	uint8_t h[HASH_LEN];
	tk_put(fx.st, 4 * KiB, 7, h);
	struct storesmall *other;
	size_t len = 0;
	OK(storesmall_open(fx.dir, false, &other));
	cr_assert_eq(storesmall_len(other, h, &len), -ENOENT, "seen before the batch's commit");
	OK(store_small_commit(fx.st));
	OK(storesmall_len(other, h, &len));
	storesmall_close(other);
}
