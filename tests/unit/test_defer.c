/* Tests of meta/catalog_defer.c: removals inside an OPEN generation are group
 * committed (D1-D4), every other change commits before it returns, and a
 * crash that loses deferred removals leaves the catalog as recovery would
 * have left it anyway: the generation rolled back, nothing leaked. "Another
 * process" is a plain sqlite3 connection on the same file, which sees only
 * what is committed. A crash is a child process that _exits with its
 * removals still deferred (a window of 60 s). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "generation.h"
#include "log.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define FILL 0xd3
#define NFILES 40
#define LONG_WINDOW_MS 60000

static struct fixture {
	char dir[64];
	char path[128];
	struct cat *cat;
	int reclaimed;
} fx;

static int count_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	(*(int *)arg)++;
	return 0;
}

static void open_catalog(void)
{
	OK(cat_open(fx.path, 0, 0, count_reclaim, &fx.reclaimed, &fx.cat));
}

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "defer");
	snprintf(fx.path, sizeof(fx.path), "%s/catalog.db", fx.dir);
	fx.reclaimed = 0;
	open_catalog();
}

static void teardown(void)
{
	ts_cat_close_checked(&fx.cat);
	ts_tmpdir_remove(fx.dir);
}

/* One integer from a query on a separate connection: committed state. */
static int64_t committed(const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	cr_assert_eq(sqlite3_open_v2(fx.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql,
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s", sql);
	int64_t v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int64_t committed_entries(uint64_t dir)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM dirents WHERE parent = %llu",
		 (unsigned long long)dir);
	return committed(sql);
}

static int64_t committed_state(uint64_t gen)
{
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT state FROM generations WHERE id = %llu",
		 (unsigned long long)gen);
	return committed(sql);
}

static struct cat_gen gen_get(uint64_t id)
{
	struct cat_gen g;
	OK(cat_gen_get(fx.cat, id, &g));
	return g;
}

static void name_of(char *buf, size_t size, int i)
{
	snprintf(buf, size, "f%03d", i);
}

/* run/step-1 with sub/ holding NFILES files of one chunk each (seeds 1..),
 * and a file outside generations, run/notes; committed unless open. */
static uint64_t make_tree(bool open, uint64_t *root, uint64_t *sub, uint64_t *notes)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t id = ts_mkgen(fx.cat, series, "step-1", 1, true, root);
	*sub = ts_mk(fx.cat, *root, "sub", S_IFDIR | 0755, NULL);
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		uint64_t f = ts_mk(fx.cat, *sub, name, S_IFREG | 0644, NULL);
		ts_write_chunks(fx.cat, f, FILL, 1 + i, 1, 100, NULL, NULL);
		OK(cat_pending_drop(fx.cat, f));
	}
	*notes = ts_mk(fx.cat, series, "notes", S_IFREG | 0644, NULL);
	if (!open)
		OK(cat_gen_commit(fx.cat, id, "explicit"));
	return id;
}

/* What a trainer's rm -rf does before the root: reopen, then files
 * [from, to). */
static void remove_files(uint64_t id, uint64_t sub, int from, int to)
{
	if (gen_get(id).state == GEN_COMMITTED)
		OK(cat_gen_reopen(fx.cat, id));
	for (int i = from; i < to; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		OK(cat_unlink(fx.cat, sub, name, NULL));
	}
}

Test(defer, removals_inside_an_open_generation_commit_within_the_window, .init = setup,
     .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(true, &root, &sub, &notes);
	cat_defer_window(fx.cat, 200);
	remove_files(id, sub, 0, NFILES);
	struct cat_inode in;
	FAILS(cat_lookup(fx.cat, sub, "f000", &in), ENOENT); /* this connection sees them */
	cr_assert_eq(committed_entries(sub), NFILES, "not committed yet");
	usleep(600 * 1000);
	cr_assert_eq(committed_entries(sub), 0, "committed by the flusher within the window");
}

Test(defer, removals_outside_open_generations_commit_before_returning, .init = setup,
     .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(false, &root, &sub, &notes);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	uint64_t series = gen_get(id).series;
	OK(cat_unlink(fx.cat, series, "notes", NULL));
	cr_assert_eq(committed_entries(series), 1, "only step-1 is left, committed");
	/* a committed generation is not open: without a reopen its removal is not deferred */
	OK(cat_unlink(fx.cat, sub, "f000", NULL));
	cr_assert_eq(committed_entries(sub), NFILES - 1);
}

Test(defer, any_other_transaction_commits_the_deferred_removals_first, .init = setup,
     .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(true, &root, &sub, &notes);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	remove_files(id, sub, 0, 3);
	cr_assert_eq(committed_entries(sub), NFILES);
	OK(cat_gen_commit(fx.cat, id, "explicit"));
	cr_assert_eq(committed_entries(sub), NFILES - 3, "committed with, or before, the commit");
	cr_assert_eq(committed_state(id), GEN_COMMITTED);

	remove_files(id, sub, 3, 5); /* reopens it */
	struct cat_inode in;
	OK(cat_getattr(fx.cat, sub, &in)); /* reads answering FUSE do not commit */
	FAILS(cat_lookup(fx.cat, sub, "f004", &in), ENOENT);
	cr_assert_eq(committed_entries(sub), NFILES - 3);
	FAILS(cat_rmdir(fx.cat, gen_get(id).series, "step-1", NULL), ENOTEMPTY);
	cr_assert_eq(committed_entries(sub), NFILES - 5, "a removal outside commits them, failed or not");
}

Test(defer, reads_run_inside_and_a_write_outside_a_transaction_commits_with_them,
     .init = setup, .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(true, &root, &sub, &notes);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	remove_files(id, sub, 0, 2);
	struct cat_gen g = gen_get(id); /* a read transaction */
	cr_assert_eq(g.files, NFILES - 2, "it sees the removals");
	struct cat_upload u;
	cr_assert_eq(cat_upload_list(fx.cat, 0, &u, 1), 1);
	struct cat_stats st;
	OK(cat_stats(fx.cat, &st));
	cr_assert_eq(committed_entries(sub), NFILES, "reads commit nothing");
	OK(cat_upload_failed(fx.cat, u.seq, "test")); /* an autocommit write */
	cr_assert_eq(committed_entries(sub), NFILES - 2, "committed with the write, at unlock");
	char sql[96];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM uploads WHERE seq = %llu AND attempts > 0",
		 (unsigned long long)u.seq);
	cr_assert_eq(committed(sql), 1);
}

/* fsync of a file (a durable commit) and of a directory switch SQLite to
 * synchronous=FULL, which it refuses inside a transaction. */
Test(defer, durable_commits_and_syncs_work_while_removals_are_deferred, .init = setup,
     .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(true, &root, &sub, &notes);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	remove_files(id, sub, 0, 2);
	uint64_t f = ts_mk(fx.cat, root, "shard.pt", S_IFREG | 0644, NULL);
	remove_files(id, sub, 2, 4);
	OK(cat_pending_drop(fx.cat, f));
	struct cat_extent e = { .off = 0, .len = 100, .chunk_len = 100 };
	bool must;
	ts_hash(e.hash, FILL, 99);
	OK(cat_pending_add(fx.cat, f, &e, &must));
	OK(cat_chunk_stored(fx.cat, e.hash, 1, 51));
	remove_files(id, sub, 4, 6);
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), true));
	cr_assert_eq(committed_entries(sub), NFILES - 6);
	remove_files(id, sub, 6, 8);
	OK(cat_sync(fx.cat));
	cr_assert_eq(committed_entries(sub), NFILES - 8);
	OK(cat_pending_drop(fx.cat, f));
}

Test(defer, a_failed_removal_leaves_the_deferred_ones, .init = setup, .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(true, &root, &sub, &notes);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	remove_files(id, sub, 0, 4);
	FAILS(cat_rmdir(fx.cat, root, "sub", NULL), ENOTEMPTY);
	FAILS(cat_unlink(fx.cat, sub, "f000", NULL), ENOENT);
	FAILS(cat_unlink(fx.cat, root, "sub", NULL), EISDIR);
	struct cat_inode in;
	FAILS(cat_lookup(fx.cat, sub, "f003", &in), ENOENT);
	OK(cat_lookup(fx.cat, sub, "f004", &in));
	cat_close(fx.cat); /* commits them */
	fx.cat = NULL;
	cr_assert_eq(committed_entries(sub), NFILES - 4);
	open_catalog();
	cr_assert_eq(gen_get(id).state, GEN_ABORTED, "the generation was open at the stop");
}

/* The child's rm -rf of a committed generation, cut by a crash. */
static void crash_during_rm(uint64_t id, uint64_t sub, uint64_t series)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct cat *c = NULL;
		if (cat_open(fx.path, 0, 0, NULL, NULL, &c) != 0)
			_exit(2);
		cat_defer_window(c, LONG_WINDOW_MS);
		int rc = cat_unlink(c, series, "notes", NULL); /* committed at once */
		if (rc == 0)
			rc = cat_gen_reopen(c, id);
		for (int i = 0; i < NFILES && rc == 0; i++) {
			char name[16];
			name_of(name, sizeof(name), i);
			rc = cat_unlink(c, sub, name, NULL);
		}
		_exit(rc == 0 ? 0 : 3); /* kill -9: no close, the removals never commit */
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

Test(defer, a_crash_loses_only_what_recovery_rolls_back, .init = setup, .fini = teardown)
{
	uint64_t root, sub, notes;
	uint64_t id = make_tree(false, &root, &sub, &notes);
	uint64_t series = gen_get(id).series;
	struct cat_stats st0, st1;
	OK(cat_stats(fx.cat, &st0));
	cat_close(fx.cat);
	fx.cat = NULL;

	crash_during_rm(id, sub, series);
	cr_assert_eq(committed_entries(sub), NFILES, "the deferred removals died with the child");
	cr_assert_eq(committed_state(id), GEN_OPEN, "the reopen was committed");
	cr_assert_eq(committed_entries(series), 1, "notes' removal was committed");

	open_catalog(); /* recovery: the rewrite is rolled back, version 1 restored */
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.version, 1);
	cr_assert_eq(g.files, NFILES);
	struct cat_inode in;
	OK(cat_lookup(fx.cat, series, "step-1", &in));
	uint64_t new_sub;
	OK(cat_lookup(fx.cat, in.ino, "sub", &in));
	new_sub = in.ino;
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		OK(cat_lookup(fx.cat, new_sub, name, &in));
		cr_assert_eq(in.size, 100);
	}
	FAILS(cat_lookup(fx.cat, series, "notes", &in), ENOENT);
	OK(cat_stats(fx.cat, &st1));
	cr_assert_eq(st1.chunks, st0.chunks, "nothing lost");
	cr_assert_eq(st1.inodes, st0.inodes - 1, "nothing leaked: only notes is gone");
	cr_assert_eq(fx.reclaimed, 0);
	OK(cat_check(fx.cat));

	/* The whole rm -rf, root included: the generation is deleted for good. */
	remove_files(id, new_sub, 0, NFILES);
	OK(cat_rmdir(fx.cat, g.root, "sub", NULL));
	OK(cat_rmdir(fx.cat, series, "step-1", NULL));
	cr_assert_eq(committed_state(id), GEN_DELETED, "the root's removal commits before it returns");
	cr_assert_eq(committed_entries(series), 0);
}
