/* smallbatch — small.db's puts batched behind the catalog's commit hook
 * (fs/lib/storesmall.h T8-T10, chunkput.h P7, catalog.c invariant 14), over
 * the real store and the real catalog, wired as the daemon wires them
 * (chunkput_small_batch).
 *
 * A kill -9 between a batched put and the catalog's commit, and a full disk
 * at the batch's COMMIT (an SQLite VFS that fails small.db's WAL writes with
 * SQLITE_FULL, as ext4 does when full): afterwards no committed catalog row
 * names an object small.db does not hold, and every file committed before
 * reads back. Without the hook (batches alone) both fail: the catalog
 * commits rows naming objects of a batch that is then lost. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "chunkput.h"
#include "hash.h"
#include "log.h"
#include "store.h"
#include "storesmall.h"
#include "support.h"

#define SB_LEN 4096

static struct {
	char dir[64], cache[128], cat_path[192];
	struct store *st;
	struct cat *cat;
} sb;

/* ---- a VFS that fails small.db's WAL writes on demand ---- */

static atomic_bool sb_wal_full;
static sqlite3_vfs *sb_real;
static sqlite3_vfs sb_vfs;

struct sb_file {
	sqlite3_file base;
	sqlite3_file *real;
	bool small_wal;
};

#define SB_REAL(f) (((struct sb_file *)(f))->real)
static int sb_close(sqlite3_file *f) { return SB_REAL(f)->pMethods->xClose(SB_REAL(f)); }
static int sb_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
	return SB_REAL(f)->pMethods->xRead(SB_REAL(f), b, n, o);
}
static int sb_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	if (((struct sb_file *)f)->small_wal && atomic_load(&sb_wal_full))
		return SQLITE_FULL; /* what unixWrite answers for ENOSPC */
	return SB_REAL(f)->pMethods->xWrite(SB_REAL(f), b, n, o);
}
static int sb_truncate(sqlite3_file *f, sqlite3_int64 s)
{
	return SB_REAL(f)->pMethods->xTruncate(SB_REAL(f), s);
}
static int sb_sync(sqlite3_file *f, int fl) { return SB_REAL(f)->pMethods->xSync(SB_REAL(f), fl); }
static int sb_size(sqlite3_file *f, sqlite3_int64 *s)
{
	return SB_REAL(f)->pMethods->xFileSize(SB_REAL(f), s);
}
static int sb_lock(sqlite3_file *f, int l) { return SB_REAL(f)->pMethods->xLock(SB_REAL(f), l); }
static int sb_unlock(sqlite3_file *f, int l) { return SB_REAL(f)->pMethods->xUnlock(SB_REAL(f), l); }
static int sb_reserved(sqlite3_file *f, int *r)
{
	return SB_REAL(f)->pMethods->xCheckReservedLock(SB_REAL(f), r);
}
static int sb_fcntl(sqlite3_file *f, int op, void *a)
{
	return SB_REAL(f)->pMethods->xFileControl(SB_REAL(f), op, a);
}
static int sb_sector(sqlite3_file *f) { return SB_REAL(f)->pMethods->xSectorSize(SB_REAL(f)); }
static int sb_caps(sqlite3_file *f)
{
	return SB_REAL(f)->pMethods->xDeviceCharacteristics(SB_REAL(f));
}
static int sb_shm_map(sqlite3_file *f, int i, int sz, int ext, void volatile **p)
{
	return SB_REAL(f)->pMethods->xShmMap(SB_REAL(f), i, sz, ext, p);
}
static int sb_shm_lock(sqlite3_file *f, int off, int n, int fl)
{
	return SB_REAL(f)->pMethods->xShmLock(SB_REAL(f), off, n, fl);
}
static void sb_shm_barrier(sqlite3_file *f) { SB_REAL(f)->pMethods->xShmBarrier(SB_REAL(f)); }
static int sb_shm_unmap(sqlite3_file *f, int del)
{
	return SB_REAL(f)->pMethods->xShmUnmap(SB_REAL(f), del);
}
static int sb_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **p)
{
	return SB_REAL(f)->pMethods->xFetch(SB_REAL(f), o, n, p);
}
static int sb_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p)
{
	return SB_REAL(f)->pMethods->xUnfetch(SB_REAL(f), o, p);
}

static const sqlite3_io_methods sb_methods = {
	3,	      sb_close,	   sb_read,	   sb_write,	  sb_truncate,	 sb_sync,
	sb_size,      sb_lock,	   sb_unlock,	   sb_reserved,	  sb_fcntl,	 sb_sector,
	sb_caps,      sb_shm_map,  sb_shm_lock,    sb_shm_barrier, sb_shm_unmap, sb_fetch,
	sb_unfetch,
};

static bool sb_ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && strcmp(s + n - t, tail) == 0;
}

static int sb_open(sqlite3_vfs *v, const char *name, sqlite3_file *f, int flags, int *out)
{
	struct sb_file *p = (struct sb_file *)f;
	p->real = (sqlite3_file *)(p + 1);
	p->small_wal = name && sb_ends_with(name, "/" STORESMALL_FILE "-wal");
	int rc = sb_real->xOpen(sb_real, name, p->real, flags, out);
	p->base.pMethods = rc == SQLITE_OK && p->real->pMethods ? &sb_methods : NULL;
	return rc;
}

static void sb_vfs_install(void)
{
	sb_real = sqlite3_vfs_find(NULL);
	cr_assert_not_null(sb_real);
	sb_vfs = *sb_real;
	sb_vfs.zName = "smallbatch-fault";
	sb_vfs.szOsFile = (int)sizeof(struct sb_file) + sb_real->szOsFile;
	sb_vfs.xOpen = sb_open;
	cr_assert_eq(sqlite3_vfs_register(&sb_vfs, 1), SQLITE_OK); /* the default */
}

/* ---- the store and the catalog, as the daemon opens them ---- */

static int sb_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	return store_remove(arg, hash);
}

static void sb_open_all(bool batch)
{
	OK(store_open(sb.cache, &sb.st));
	OK(store_set_small(sb.st, STORE_SMALL_MAX));
	OK(cat_open(sb.cat_path, 0, 0, sb_reclaim, sb.st, &sb.cat));
	if (batch)
		OK(chunkput_small_batch(sb.cat, sb.st));
}

static void sb_close_all(void)
{
	cat_close(sb.cat);
	store_close(sb.st);
	sb.cat = NULL;
	sb.st = NULL;
}

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	sb_vfs_install();
	ts_tmpdir_make(sb.dir, sizeof(sb.dir), "smallbatch");
	snprintf(sb.cache, sizeof(sb.cache), "%s/cache", sb.dir);
	snprintf(sb.cat_path, sizeof(sb.cat_path), "%s/catalog.db", sb.cache);
	cr_assert_eq(mkdir(sb.cache, 0700), 0);
}

static void teardown(void)
{
	atomic_store(&sb_wal_full, false);
	if (sb.cat || sb.st)
		sb_close_all();
	sqlite3_vfs_unregister(&sb_vfs);
	ts_tmpdir_remove(sb.dir);
}

/* ---- a small file, step by step as a writer does it ---- */

static void sb_bytes(uint8_t buf[SB_LEN], struct cat_extent *e, int seed)
{
	ts_fill(buf, SB_LEN, seed);
	*e = (struct cat_extent){ .off = 0, .len = SB_LEN, .chunk_len = SB_LEN };
	hash_sha256(buf, SB_LEN, e->hash);
}

/* name's inode (created outside generations: every change commits at once) */
static uint64_t sb_create(const char *name)
{
	struct cat_inode in;
	OK(cat_create(sb.cat, CAT_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL, &in));
	return in.ino;
}

/* The writer's pending extent and the object's put: 0 or the first error. */
static int sb_put(uint64_t ino, int seed, struct store_object_info *info)
{
	uint8_t buf[SB_LEN];
	struct cat_extent e;
	sb_bytes(buf, &e, seed);
	bool must = false;
	int rc = cat_pending_add(sb.cat, ino, &e, &must);
	if (rc == 0 && !must)
		return -EEXIST; /* each seed is new */
	return rc == 0 ? store_put(sb.st, e.hash, buf, SB_LEN, 0, info) : rc;
}

/* The record and the file's commit, after sb_put. */
static int sb_record(uint64_t ino, int seed, const struct store_object_info *info)
{
	uint8_t buf[SB_LEN];
	struct cat_extent e;
	sb_bytes(buf, &e, seed);
	int rc = cat_chunk_stored(sb.cat, e.hash, info->codec, info->stored_len);
	if (rc == 0)
		rc = cat_file_commit(sb.cat, ino, SB_LEN, ts_now_ns(), false);
	int drop = cat_pending_drop(sb.cat, ino);
	return rc ? rc : drop;
}

static void sb_file(const char *name, int seed)
{
	struct store_object_info info;
	uint64_t ino = sb_create(name);
	OK(sb_put(ino, seed, &info));
	OK(sb_record(ino, seed, &info));
}

/* ---- what a reopened cache must show ---- */

/* Every chunk the catalog file calls stored has its object (read and checked
 * by the store); returns how many. */
static int sb_every_stored_chunk_is_there(void)
{
	sqlite3 *db;
	sqlite3_stmt *q;
	cr_assert_eq(sqlite3_open_v2(sb.cat_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, "SELECT hash FROM chunks WHERE stored_len IS NOT NULL",
					-1, &q, NULL),
		     SQLITE_OK);
	int n = 0;
	uint8_t *buf = malloc(1 << 20);
	while (sqlite3_step(q) == SQLITE_ROW) {
		uint8_t h[HASH_LEN];
		char hex[HASH_HEX_LEN + 1];
		cr_assert_eq(sqlite3_column_bytes(q, 0), HASH_LEN);
		memcpy(h, sqlite3_column_blob(q, 0), HASH_LEN);
		hash_to_hex(h, hex);
		size_t len = 0;
		int rc = store_get(sb.st, h, buf, 1 << 20, &len);
		cr_expect_eq(rc, 0, "the catalog calls chunk %s stored, and the store has no such object"
				    " (%s)", hex, strerror(-rc));
		n++;
	}
	free(buf);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return n;
}

/* name holds seed's bytes, as the reopened catalog and store read it. */
static void sb_reads_back(const char *name, int seed)
{
	struct cat_inode in;
	uint64_t ino;
	OK(cat_lookup(sb.cat, CAT_ROOT_INO, name, &in));
	ino = in.ino;
	cr_assert_eq(in.size, SB_LEN, "%s: size %ju", name, (uintmax_t)in.size);
	uint8_t want[SB_LEN], got[SB_LEN];
	struct cat_extent e;
	sb_bytes(want, &e, seed);
	size_t len = 0;
	int rc = store_get(sb.st, e.hash, got, sizeof(got), &len);
	cr_assert_eq(rc, 0, "%s (inode %ju), closed before: its chunk reads %s", name,
		     (uintmax_t)ino, strerror(-rc));
	cr_assert(len == SB_LEN && memcmp(want, got, SB_LEN) == 0, "%s: other bytes", name);
}

TestSuite(smallbatch, .init = setup, .fini = teardown, .timeout = 60);

/* kill -9 of a process between its batched puts and the catalog's commit:
 * the files the catalog committed read back, no committed row names a lost
 * object. The child commits files (each one's record commits the batch
 * before the catalog, the hook), then puts one more object, and dies. */
#define SB_KILL_FILES 40
Test(smallbatch, a_kill_between_batched_puts_and_the_catalog_commit_loses_no_named_object)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		sb_open_all(true);
		char name[32];
		for (int i = 0; i < SB_KILL_FILES; i++) {
			snprintf(name, sizeof(name), "f%d", i);
			sb_file(name, 100 + i);
		}
		/* a put after the last catalog commit: the kill takes its batch */
		struct store_object_info info;
		uint64_t late = sb_create("late");
		if (sb_put(late, 900, &info) != 0)
			_exit(3);
		raise(SIGKILL);
		_exit(4);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the child died of %d/%d",
		  WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		  WIFSIGNALED(status) ? WTERMSIG(status) : -1);
	sb_open_all(true);
	int stored = sb_every_stored_chunk_is_there();
	cr_expect_geq(stored, SB_KILL_FILES, "the committed files' chunks are recorded (%d)",
		      stored);
	char name[32];
	for (int i = 0; i < SB_KILL_FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		sb_reads_back(name, 100 + i);
	}
}

/* How many lines of the log file name T9. */
static int sb_t9_lines(FILE *log)
{
	fflush(log);
	rewind(log);
	char line[2048];
	int n = 0;
	while (fgets(line, sizeof(line), log))
		n += strstr(line, "storesmall.h T9") != NULL;
	return n;
}

/* A full disk at the batch's COMMIT: SQLite rolls the batch back, so the
 * commit of the catalog that was to name it is refused, and every later one
 * (fail-stop, T9) with one line, while a writer still holds a put of the
 * lost batch as done. After a restart no row names a lost object and the
 * file closed before reads back. */
Test(smallbatch, a_full_disk_at_the_batch_commit_refuses_every_later_catalog_commit)
{
	FILE *log = tmpfile();
	cr_assert_not_null(log);
	log_setup(log, LOG_LVL_WARN);
	sb_open_all(true);
	sb_file("before", 1); /* closed before the full disk */

	struct store_object_info info_b, info_c;
	uint64_t b = sb_create("b"), c = sb_create("c");
	OK(sb_put(b, 2, &info_b)); /* b's writer: its put is done, its record not yet */
	atomic_store(&sb_wal_full, true);
	/* another writer's change commits the catalog: the hook commits the
	 * batch with b's row first, which fails */
	int rc = sb_put(c, 3, &info_c);
	cr_expect_eq(rc, -ENOSPC, "the catalog commit after a failed batch: %s", strerror(-rc));
	cr_expect_eq(sb_t9_lines(log), 1, "one line says what happened");
	/* b's writer goes on: its record names an object the batch lost */
	rc = sb_record(b, 2, &info_b);
	cr_expect_neq(rc, 0, "b's record of an object of the lost batch is refused");
	rc = store_put(sb.st, (const uint8_t[HASH_LEN]){ 7 }, "x", 1, 0, NULL);
	cr_expect_neq(rc, 0, "a put after the failed batch fails (T9)");
	/* room again: still refused until the restart (T9) */
	atomic_store(&sb_wal_full, false);
	struct cat_inode in;
	rc = cat_create(sb.cat, CAT_ROOT_INO, "d", S_IFREG | 0644, 0, 0, 0, NULL, &in);
	cr_expect_neq(rc, 0, "a catalog change after the failed batch is refused");
	cr_expect_eq(sb_t9_lines(log), 1, "still one line (%d)", sb_t9_lines(log));
	/* what was closed before still reads, the mount goes on reading */
	sb_reads_back("before", 1);
	sb_close_all();
	log_setup(stderr, LOG_LVL_WARN);
	fclose(log);

	sb_open_all(true); /* the restart */
	sb_every_stored_chunk_is_there();
	sb_reads_back("before", 1);
	struct cat_inode gone;
	cr_expect_eq(cat_lookup(sb.cat, CAT_ROOT_INO, "d", &gone), -ENOENT);
	sb_file("after", 4); /* a restarted daemon writes again */
	sb_reads_back("after", 4);
}
