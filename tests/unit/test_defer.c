/* Tests of meta/catalog_defer.c: removals, creates and the small files'
 * contents inside an OPEN generation are group committed (D1-D7), every
 * other change commits before it returns, and a crash that loses deferred
 * changes leaves the catalog as recovery would have left it anyway: the
 * generation rolled back, nothing leaked, no referenced object removed, no
 * inode number handed out twice. "Another process" is a plain sqlite3
 * connection on the same file, which sees only what is committed. A crash is
 * a child process that _exits with its changes still deferred (a window of
 * 60 s). */
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
#include "catalog_internal.h" /* a transaction dropped under the catalog (D4) */
#include "generation.h"
#include "log.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define FILL 0xd3
#define NFILES 40
#define LONG_WINDOW_MS 60000

#define MAX_RECLAIMED 256

static struct fixture {
	char dir[64];
	char path[128];
	struct cat *cat;
	int reclaimed;
	uint8_t reclaimed_hash[MAX_RECLAIMED][CAT_HASH_LEN];
} fx;

static int count_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	int *n = arg;
	if (*n < MAX_RECLAIMED)
		memcpy(fx.reclaimed_hash[*n], hash, CAT_HASH_LEN);
	(*n)++;
	return 0;
}

/* How many times the object of chunk seed was reclaimed. */
static int reclaimed_times(int seed)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, FILL, seed);
	int n = 0;
	for (int i = 0; i < fx.reclaimed && i < MAX_RECLAIMED; i++)
		n += memcmp(fx.reclaimed_hash[i], h, CAT_HASH_LEN) == 0;
	return n;
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

/* fsync of a file (a durable commit) and of a directory commit the
 * deferred transaction first, then sync the WAL. */
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
	cr_assert_eq(gen_get(id).state, GEN_HELD, "the generation was open at the stop: held");
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

/* ---- small files inside an OPEN generation (D1 a-c, D5-D7) ---- */

/* What a writer of one small file does, as fs/writer.c and fs/ops.c call the
 * catalog: create (or open), one chunk of 100 bytes (seed), the object stored
 * if asked, the commit at close, the drop of pending at the last release. 0
 * or the first failure; *stored says whether an object was written. No
 * assertions: it runs in crashing children too. */
static int small_file_sync(struct cat *c, uint64_t parent, const char *name, int seed,
			   bool durable, bool *stored, uint64_t *ino_out)
{
	struct cat_inode in;
	int rc = cat_lookup(c, parent, name, &in);
	if (rc == -ENOENT)
		rc = cat_create(c, parent, name, S_IFREG | 0644, 1000, 1001, 0, NULL, &in);
	if (rc == 0)
		rc = cat_pending_from_committed(c, in.ino);
	if (rc == 0)
		rc = cat_pending_truncate(c, in.ino, 0); /* rewritten from the start */
	struct cat_extent e = { .off = 0, .len = 100, .chunk_len = 100 };
	bool must = false;
	ts_hash(e.hash, FILL, seed);
	if (rc == 0)
		rc = cat_pending_add(c, in.ino, &e, &must);
	if (rc == 0 && must) /* the object is written here, after the journal line (D7) */
		rc = cat_chunk_stored(c, e.hash, 0, 100);
	if (rc == 0) /* fsync, or close */
		rc = cat_file_commit(c, in.ino, 100, ts_now_ns(), durable);
	if (rc == 0)
		rc = cat_pending_drop(c, in.ino);
	if (stored)
		*stored = must;
	if (ino_out)
		*ino_out = in.ino;
	return rc;
}

static int small_file(struct cat *c, uint64_t parent, const char *name, int seed, bool *stored,
		      uint64_t *ino_out)
{
	return small_file_sync(c, parent, name, seed, false, stored, ino_out);
}

/* A committed extent of ino at 0 names chunk seed, with size 100. */
static bool committed_small_file(uint64_t ino, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	char hex[2 * CAT_HASH_LEN + 1], sql[256];
	ts_hash(h, FILL, seed);
	cat_hex(h, hex);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM extents e JOIN inodes i ON i.ino = e.ino"
		 " WHERE e.ino = %llu AND e.off = 0 AND hex(e.hash) = upper('%s') AND i.size = 100",
		 (unsigned long long)ino, hex);
	return committed(sql) == 1;
}

static int64_t committed_uploads(void)
{
	return committed("SELECT count(*) FROM uploads");
}

Test(defer, small_files_inside_an_open_generation_are_group_committed, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root;
	uint64_t id = ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	int64_t uploads0 = committed_uploads();
	uint64_t ino[NFILES];
	for (int i = 0; i < NFILES; i++) {
		char name[16];
		bool stored;
		name_of(name, sizeof(name), i);
		OK(small_file(fx.cat, root, name, 100 + i, &stored, &ino[i]));
		cr_assert(stored);
	}
	struct cat_inode in;
	OK(cat_lookup(fx.cat, root, "f000", &in)); /* this connection sees them, as FUSE was told */
	cr_assert_eq(in.size, 100);
	cr_assert_eq(committed_entries(root), 0, "nothing committed yet");
	cr_assert_eq(committed_uploads(), uploads0);
	/* D6: the upload rows of the deferred chunks are hidden from the uploader */
	struct cat_upload u[NFILES + 1];
	cr_assert_eq(cat_upload_list(fx.cat, 0, u, NFILES + 1), uploads0);
	cr_assert_eq(gen_get(id).files, NFILES, "reads see them");
	cr_assert_eq(committed_entries(root), 0, "reads commit nothing");
	cr_assert(cat_defer_active(fx.cat), "the writer does not announce these chunks");

	OK(cat_defer_commit(fx.cat));
	cr_assert(!cat_defer_active(fx.cat));
	cr_assert_eq(committed_entries(root), NFILES);
	for (int i = 0; i < NFILES; i++)
		cr_assert(committed_small_file(ino[i], 100 + i), "file %d", i);
	cr_assert_eq(cat_upload_list(fx.cat, 0, u, NFILES + 1), uploads0 + NFILES);
	cr_assert_eq(committed("SELECT count(*) FROM pending"), 0);
	char jpath[160];
	struct stat sb;
	snprintf(jpath, sizeof(jpath), "%s-defer", fx.path);
	cr_assert(stat(jpath, &sb) == 0 && sb.st_size == 0, "the intent journal is emptied");
}

Test(defer, small_files_outside_generations_and_durable_commits_commit_before_returning,
     .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root, ino, latest;
	ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	OK(small_file(fx.cat, root, "a", 1, NULL, &ino));
	cr_assert_eq(committed_entries(root), 0);
	/* latest, beside the generation: committed when its commit returns,
	 * and everything answered before it with it (D2) */
	OK(small_file(fx.cat, series, "latest", 2, NULL, &latest));
	cr_assert(committed_small_file(latest, 2));
	cr_assert(committed_small_file(ino, 1));
	/* its create, already: before the contents */
	struct cat_inode in;
	OK(cat_create(fx.cat, series, "config.json", S_IFREG | 0644, 0, 0, 0, NULL, &in));
	cr_assert_eq(committed_entries(series), 3);

	/* inside the generation: deferred, until an fsync (a durable commit) */
	OK(small_file(fx.cat, root, "b", 3, NULL, &ino));
	cr_assert_eq(committed_entries(root), 1);
	OK(small_file_sync(fx.cat, root, "b2", 5, true, NULL, &ino));
	cr_assert(committed_small_file(ino, 5));
	cr_assert_eq(committed_entries(root), 3, "and b before it");
	OK(small_file(fx.cat, root, "c", 4, NULL, &ino));
	OK(cat_sync(fx.cat)); /* fsync of a directory, or of a file without a writer */
	cr_assert(committed_small_file(ino, 4));
	/* a generation's commit commits what was answered before it */
	OK(small_file(fx.cat, root, "d", 6, NULL, &ino));
	uint64_t id2, root2;
	id2 = ts_mkgen(fx.cat, series, "step-2", 2, true, &root2);
	OK(cat_gen_commit(fx.cat, id2, "explicit"));
	cr_assert(committed_small_file(ino, 6));
	cr_assert_eq(committed_entries(root), 5, "the commit of another generation committed it too");
}

/* D5: a count that a deferred change drops to zero is swept only after the
 * commit that dropped it. */
Test(defer, chunks_freed_inside_an_open_generation_are_reclaimed_after_the_commit, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root, ino;
	ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	OK(small_file(fx.cat, root, "a", 1, NULL, &ino));
	OK(small_file(fx.cat, root, "a", 2, NULL, &ino)); /* rewritten: chunk 1 has no reference */
	cr_assert_eq(fx.reclaimed, 0, "not before the commit");
	OK(cat_defer_commit(fx.cat));
	cr_assert_eq(fx.reclaimed, 1);
	cr_assert_eq(reclaimed_times(1), 1);
	cr_assert(committed_small_file(ino, 2));
	OK(cat_check(fx.cat));
}

enum { CHILD_NEW = 1000, CHILD_LATEST = 2000, CHILD_SHARED = 4000, CHILD_LOST = 3000, NCHILD = 8 };

/* The child's save of small files into step-2, cut by a kill -9. Writes the
 * highest inode number it was given to fd. */
static void crash_during_small_files(uint64_t series, int fd)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct cat *c = NULL;
		uint64_t root, ino, max_ino = 0, id = 0;
		char name[16];
		if (cat_open(fx.path, 0, 0, NULL, NULL, &c) != 0)
			_exit(2);
		cat_defer_window(c, LONG_WINDOW_MS);
		struct cat_gen_spec spec = { .name = "step-2", .step = 2 };
		struct cat_inode in;
		int rc = cat_create_in_gen(c, series, "step-2", S_IFDIR | 0755, 0, 0, 0, NULL, &spec,
					   &in, &id);
		root = in.ino;
		/* T1: new chunks, and two deduplicated against committed files */
		for (int i = 0; i < NCHILD && rc == 0; i++) {
			snprintf(name, sizeof(name), "new%d", i);
			rc = small_file(c, root, name, CHILD_NEW + i, NULL, &ino);
		}
		if (rc == 0)
			rc = small_file(c, root, "dup-step1", 1, NULL, &ino);
		if (rc == 0)
			rc = small_file(c, root, "dup-notes", 500, NULL, &ino);
		/* outside generations: commits T1 before it (D2) */
		if (rc == 0)
			rc = small_file(c, series, "latest", CHILD_LATEST, NULL, &ino);
		/* T2: a new chunk, then a file outside generations naming it too */
		if (rc == 0)
			rc = small_file(c, root, "shared", CHILD_SHARED, NULL, &ino);
		if (rc == 0)
			rc = small_file(c, series, "latest2", CHILD_SHARED, NULL, &ino);
		/* T3, lost: new chunks whose rows never commit, objects written */
		for (int i = 0; i < NCHILD && rc == 0; i++) {
			snprintf(name, sizeof(name), "lost%d", i);
			rc = small_file(c, root, name, CHILD_LOST + i, NULL, &ino);
			max_ino = ino;
		}
		if (rc == 0 && write(fd, &max_ino, sizeof(max_ino)) != sizeof(max_ino))
			rc = -EIO;
		_exit(rc == 0 ? 0 : 3); /* kill -9: no close, T3 never commits */
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

Test(defer, a_crash_during_small_files_leaks_no_object_and_removes_none_still_named,
     .init = setup, .fini = teardown)
{
	uint64_t root1, sub, notes;
	uint64_t id1 = make_tree(false, &root1, &sub, &notes); /* step-1 committed, seeds 1.. */
	uint64_t series = gen_get(id1).series;
	ts_write_chunks(fx.cat, notes, FILL, 500, 1, 100, NULL, NULL);
	struct cat_stats st0;
	OK(cat_stats(fx.cat, &st0));
	cat_close(fx.cat);
	fx.cat = NULL;

	int p[2];
	cr_assert_eq(pipe(p), 0);
	crash_during_small_files(series, p[1]);
	uint64_t max_ino = 0;
	cr_assert_eq(read(p[0], &max_ino, sizeof(max_ino)), (ssize_t)sizeof(max_ino));
	close(p[0]);
	close(p[1]);
	char jpath[160];
	struct stat sb;
	snprintf(jpath, sizeof(jpath), "%s-defer", fx.path);
	cr_assert(stat(jpath, &sb) == 0 && sb.st_size > 0, "the child left its intent journal");

	open_catalog(); /* recovery: G4 holds step-2; D7 reclaims T3's objects */
	cr_assert(stat(jpath, &sb) != 0 && errno == ENOENT, "the journal is read and removed");
	struct cat_inode in, step2;
	OK(cat_lookup(fx.cat, series, "step-2", &step2));
	for (int i = 0; i < NCHILD; i++) { /* T1 committed: held as it was */
		char name[16];
		snprintf(name, sizeof(name), "new%d", i);
		OK(cat_lookup(fx.cat, step2.ino, name, &in));
		cr_assert(committed_small_file(in.ino, CHILD_NEW + i));
		snprintf(name, sizeof(name), "lost%d", i); /* T3 was lost */
		FAILS(cat_lookup(fx.cat, step2.ino, name, &in), ENOENT);
	}
	struct cat_gen g = gen_get(id1);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.files, NFILES);
	OK(cat_lookup(fx.cat, series, "latest", &in));
	cr_assert(committed_small_file(in.ino, CHILD_LATEST), "latest was committed when it returned");
	OK(cat_lookup(fx.cat, series, "latest2", &in));
	cr_assert(committed_small_file(in.ino, CHILD_SHARED), "latest2 too, and its chunk");
	OK(cat_lookup(fx.cat, series, "notes", &in));
	cr_assert(committed_small_file(in.ino, 500));
	for (int i = 0; i < NCHILD; i++) {
		/* T1's objects: their rows committed, and step-2 is held: kept */
		cr_assert_eq(reclaimed_times(CHILD_NEW + i), 0, "chunk %d", CHILD_NEW + i);
		/* T3's: their rows were lost, the journal named them (D7) */
		cr_assert_eq(reclaimed_times(CHILD_LOST + i), 1, "chunk %d", CHILD_LOST + i);
	}
	cr_assert_eq(fx.reclaimed, NCHILD, "and nothing else: %d reclaimed", fx.reclaimed);
	struct cat_stats st1;
	OK(cat_stats(fx.cat, &st1));
	cr_assert_eq(st1.chunks, st0.chunks + 2 + NCHILD, "latest's, latest2's and the held step-2's new chunks");
	OK(cat_check(fx.cat));
	/* invariant 5: no inode number FUSE was given comes back */
	uint64_t fresh = ts_mk(fx.cat, series, "after", S_IFREG | 0644, NULL);
	cr_assert_gt(fresh, max_ino, "a new inode %llu, the child handed out up to %llu",
		     (unsigned long long)fresh, (unsigned long long)max_ino);
}

/* D4: SQLite drops the deferred transaction (an I/O error, a full disk):
 * what was answered inside the generation is gone, so the generation must
 * not commit; its numbers are skipped; its objects wait for the next open. */
Test(defer, a_lost_deferred_transaction_keeps_its_generation_from_committing, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root, ino = 0;
	uint64_t id = ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	uint64_t other_root;
	uint64_t other = ts_mkgen(fx.cat, series, "step-0", 0, true, &other_root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	for (int i = 0; i < 4; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		OK(small_file(fx.cat, root, name, 100 + i, NULL, &ino));
	}
	pthread_mutex_lock(&fx.cat->lock); /* under the catalog: as SQLite would */
	cr_assert_eq(sqlite3_exec(fx.cat->db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_unlock(&fx.cat->lock);

	FAILS(cat_gen_commit(fx.cat, id, "explicit"), EIO);
	struct cat_inode in;
	FAILS(cat_lookup(fx.cat, root, "f000", &in), ENOENT);
	cr_assert_eq(gen_get(id).state, GEN_OPEN, "it stays open, to be rolled back");
	OK(cat_gen_commit(fx.cat, other, "explicit")); /* another generation is not affected */
	uint64_t fresh = ts_mk(fx.cat, root, "again", S_IFREG | 0644, NULL);
	cr_assert_gt(fresh, ino, "numbers handed out before are skipped");
	FAILS(cat_gen_commit(fx.cat, id, "explicit"), EIO);
	OK(cat_check(fx.cat));
	cr_assert_eq(fx.reclaimed, 0);

	cat_close(fx.cat);
	fx.cat = NULL;
	open_catalog();
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_HELD, "held at the next open, as left by the rollback");
	/* generation.h G7: the loss was recorded in the catalog, so the restart
	 * knows it too: held for a decision, never for the content rule */
	cr_assert(strncmp(g.held, GEN_LOST_REASON, strlen(GEN_LOST_REASON)) == 0, "held: %s", g.held);
	cr_assert(strncmp(gen_get(other).held, GEN_LOST_REASON, strlen(GEN_LOST_REASON)) != 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(reclaimed_times(100 + i), 1, "the lost rows' objects: chunk %d", 100 + i);
	OK(cat_check(fx.cat));
}

/* D10 (review 38 F3): the files a lost transaction created are told to
 * their handles with its error; a file committed before, one outside the
 * generation and one created after are not lost. */
Test(defer, the_files_a_lost_transaction_created_answer_its_error, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root;
	(void)ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	uint64_t before = ts_mk(fx.cat, root, "before", S_IFREG | 0644, NULL);
	OK(cat_defer_commit(fx.cat));
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	uint64_t lost[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		OK(small_file(fx.cat, root, name, 100 + i, NULL, &lost[i]));
		cr_assert_eq(cat_file_lost(fx.cat, lost[i]), 0, "not lost while deferred");
	}
	uint64_t outside = ts_mk(fx.cat, ROOT, "latest", S_IFREG | 0644, NULL); /* D2: commits them */
	uint64_t lost2 = ts_mk(fx.cat, root, "lost", S_IFREG | 0644, NULL);
	cr_assert(cat_defer_active(fx.cat));
	pthread_mutex_lock(&fx.cat->lock); /* under the catalog: as SQLite would */
	cr_assert_eq(sqlite3_exec(fx.cat->db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_unlock(&fx.cat->lock);
	struct cat_inode in;
	FAILS(cat_lookup(fx.cat, root, "lost", &in), ENOENT); /* the loss is found */
	FAILS(cat_file_lost(fx.cat, lost2), EIO);
	for (int i = 0; i < 3; i++) /* committed with `latest` before the loss */
		cr_assert_eq(cat_file_lost(fx.cat, lost[i]), 0);
	cr_assert_eq(cat_file_lost(fx.cat, before), 0);
	cr_assert_eq(cat_file_lost(fx.cat, outside), 0);
	uint64_t after = ts_mk(fx.cat, root, "after", S_IFREG | 0644, NULL);
	cr_assert_eq(cat_file_lost(fx.cat, after), 0);
	FAILS(cat_file_lost(fx.cat, lost2), EIO); /* still told: every later call */
	OK(cat_check(fx.cat));
}

/* D4 and catalog.c invariant 10 (review3 F6): fsync commits the deferred
 * transaction, then syncs the WAL. When that commit fails (SQLite dropped
 * the transaction) the fsync answers the error: the changes it was to make
 * durable are gone. */
Test(defer, a_lost_deferred_transaction_fails_the_fsync, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root, ino = 0;
	(void)ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	OK(small_file(fx.cat, root, "f000", 100, NULL, &ino));
	pthread_mutex_lock(&fx.cat->lock); /* under the catalog: as SQLite would */
	cr_assert_eq(sqlite3_exec(fx.cat->db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_unlock(&fx.cat->lock);

	int rc = cat_sync(fx.cat);
	cr_assert_lt(rc, 0, "fsync answered %d after its changes were rolled back", rc);
	OK(cat_sync(fx.cat)); /* nothing is deferred now: the next one syncs */
	OK(cat_check(fx.cat));
}

/* ---- the intent journal read back is bounded (DESIGN invariant 7) ---- */

/* Closes the catalog, writes text as its intent journal (then makes the
 * file size bytes long, sparse, when size > len), reopens it (recovery) and
 * returns the seconds the open took. */
static double reopen_with_journal(const char *text, size_t len, off_t size)
{
	cat_close(fx.cat);
	fx.cat = NULL;
	char jpath[160];
	snprintf(jpath, sizeof(jpath), "%s-defer", fx.path);
	FILE *f = fopen(jpath, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	cr_assert_eq(fflush(f), 0);
	if (size > (off_t)len)
		cr_assert_eq(ftruncate(fileno(f), size), 0);
	fclose(f);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	open_catalog();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	struct stat sb;
	cr_assert(stat(jpath, &sb) != 0 && errno == ENOENT, "the journal is read and removed");
	return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static size_t object_line(char *buf, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	char hex[2 * CAT_HASH_LEN + 1];
	ts_hash(h, FILL, seed);
	cat_hex(h, hex);
	return (size_t)sprintf(buf, "object %s\n", hex);
}

Test(defer, a_huge_sparse_intent_journal_is_refused_by_its_size_unread, .init = setup,
     .fini = teardown)
{
	char text[256];
	size_t len = (size_t)sprintf(text, "begin\n");
	len += object_line(text + len, 900);
	uint64_t before = ts_mk(fx.cat, ROOT, "before", S_IFREG | 0644, NULL);
	double secs = reopen_with_journal(text, len, (off_t)1 << 30);
	cr_assert_lt(secs, 0.5, "%.2f s: the 1 GiB journal was read", secs);
	cr_assert_eq(fx.reclaimed, 0, "a journal refused whole names nothing");
	/* its numbers are still skipped (D7) */
	uint64_t after = ts_mk(fx.cat, ROOT, "after", S_IFREG | 0644, NULL);
	cr_assert_gt(after, before + 1000);
	OK(cat_check(fx.cat));
}

Test(defer, only_whole_object_lines_of_the_journal_are_read, .init = setup, .fini = teardown)
{
	static char text[3 << 20];
	size_t len = (size_t)sprintf(text, "begin\n");
	len += object_line(text + len, 901);                   /* a record */
	len += object_line(text + len, 902);
	text[len - 1] = 0; /* "object <hex>\0junk": not a record */
	len += (size_t)sprintf(text + len, "junk\n");
	len += object_line(text + len, 903);
	text[len - 1] = 'x'; /* a long line starting like a record */
	memset(text + len, 'y', 2 << 20);
	len += 2 << 20;
	text[len++] = '\n';
	len += object_line(text + len, 904); /* a record after it, as cat_defer_intent writes it */
	text[len - 1] = 0;
	text[len++] = '\n';
	len += object_line(text + len, 905) - 1; /* torn: no newline, all its digits */
	reopen_with_journal(text, len, 0);
	cr_assert_eq(reclaimed_times(901), 1);
	cr_assert_eq(reclaimed_times(902), 0, "bytes after the digits' NUL: not a record");
	cr_assert_eq(reclaimed_times(903), 0, "a record is one line of its exact length");
	cr_assert_eq(reclaimed_times(904), 1);
	cr_assert_eq(reclaimed_times(905), 1, "a last line cut before its newline");
	cr_assert_eq(fx.reclaimed, 3);
}

/* What the catalog does for one small file of a save in an OPEN generation,
 * in the order the daemon calls it: the create, the writer's start, its one
 * chunk (referenced, then stored), the commit at close, the drop at the last
 * release. Returns the statements they ran (cat_statements_run). */
static uint64_t small_file_statements(uint64_t dir, const char *name, int seed, uint64_t *ino)
{
	uint64_t before = cat_statements_run(fx.cat);
	struct cat_inode in;
	uint64_t gen = 0;
	OK(cat_create_in_gen(fx.cat, dir, name, S_IFREG | 0644, 1000, 1001, 0, NULL, NULL, &in,
			     &gen));
	cr_assert_neq(gen, 0, "created inside the generation");
	bool rows = true;
	OK(cat_pending_start(fx.cat, in.ino, &rows)); /* fs/writer.c's writer_new */
	cr_assert_not(rows, "a new file: no rows, so the writer lists none");
	struct cat_extent e = { .off = 0, .len = 4096, .chunk_len = 4096 };
	ts_hash(e.hash, FILL, seed);
	bool must = false;
	OK(cat_pending_add(fx.cat, in.ino, &e, &must));
	cr_assert(must, "a new chunk is to be stored");
	OK(cat_chunk_stored(fx.cat, e.hash, 1, 4096 + 72));
	OK(cat_file_commit(fx.cat, in.ino, 4096, ts_now_ns(), false));
	OK(cat_pending_drop_unmark(fx.cat, in.ino)); /* fs/ns.c's last release */
	*ino = in.ino;
	return cat_statements_run(fx.cat) - before;
}

/* The statements a small file costs bound the daemon's CPU per file (docs/
 * BENCH.md, issue 20 part 3): 51 before the writer's start on a file without
 * extent rows became two reads (from 9), the check whether a change may be
 * deferred one statement (from 2, four times) and a drop at 0 two (from 3);
 * 39, then 45 with generation.h G7's being-written mark (a read at the
 * writer's start, the mark itself rides the create's row; the clear at the
 * last release a read and a deferred change of 4); 40 since the drop of the
 * writer's rows and that clear are one change (cat_pending_drop_unmark: no
 * read of the mark, one check whether it may be deferred, one savepoint)
 * and the create reads its parent and the parent's generation in one
 * statement (and the writer's start tells the writer that a new file has no
 * pending rows to list: one statement fewer in fs/writer.c, not counted
 * here before either); 38 since the writer's start reads the file's mode,
 * its mark, its generation's state and whether it has extent rows in one
 * statement (S_WRITER_START, from three). The file still ends with its one extent, its writer's rows
 * gone. */
Test(defer, a_small_file_in_an_open_generation_costs_at_most_38_statements, .init = setup,
     .fini = teardown)
{
	uint64_t root;
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t id = ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	uint64_t ino, n = 0;
	for (int i = 0; i < 4; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		n = small_file_statements(root, name, 200 + i, &ino); /* the first opens the deferral */
	}
	cr_assert_leq(n, 38, "a small file ran %llu statements", (unsigned long long)n);
	struct cat_extent got[2];
	cr_assert_eq(cat_extents(fx.cat, ino, 0, got, 2), 1);
	cr_assert_eq(got[0].len, 4096);
	cr_assert_eq(cat_pending_extents(fx.cat, ino, 0, got, 2), 0, "the writer's rows are gone");
	struct cat_inode in;
	OK(cat_getattr(fx.cat, ino, &in));
	cr_assert_eq(in.size, 4096);
	OK(cat_gen_commit(fx.cat, id, "explicit"));
	cr_assert_eq(committed_entries(root), 4);
}

/* generation.h G7 with cat_pending_drop_unmark: the writer's end at the
 * last release drops its pending rows and clears the being-written mark in
 * one change, so that a stop after it holds the save for the crash only (the
 * content rule may judge it), while a file whose last handle was never
 * released still holds its save for a decision, named. */
Test(defer, a_writers_end_drops_its_rows_and_clears_its_mark_in_one_change, .init = setup,
     .fini = teardown)
{
	uint64_t root1, root2, a, b;
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t id1 = ts_mkgen(fx.cat, series, "step-1", 1, true, &root1);
	uint64_t id2 = ts_mkgen(fx.cat, series, "step-2", 2, true, &root2);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	small_file_statements(root1, "a", 500, &a); /* released */
	struct cat_inode in;
	uint64_t gen = 0;
	OK(cat_create_in_gen(fx.cat, root2, "b", S_IFREG | 0644, 1000, 1001, 0, NULL, NULL, &in,
			     &gen));
	b = in.ino;
	OK(cat_pending_from_committed(fx.cat, b));
	struct cat_extent e = { .off = 0, .len = 4096, .chunk_len = 4096 };
	ts_hash(e.hash, FILL, 501);
	bool must = false;
	OK(cat_pending_add(fx.cat, b, &e, &must));
	OK(cat_chunk_stored(fx.cat, e.hash, 1, 4096 + 72));
	OK(cat_file_commit(fx.cat, b, 4096, ts_now_ns(), false)); /* closed, not released */
	struct cat_extent got[2];
	cr_assert_eq(cat_pending_extents(fx.cat, a, 0, got, 2), 0, "a's writer rows are gone");
	cr_assert_eq(cat_pending_extents(fx.cat, b, 0, got, 2), 1, "b's writer still has its row");

	ts_cat_close_checked(&fx.cat); /* the daemon stops with both saves OPEN */
	open_catalog();
	struct cat_gen g = gen_get(id1);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert(strncmp(g.held, GEN_CRASH_REASON, strlen(GEN_CRASH_REASON)) == 0,
		  "a released file leaves no mark: %s", g.held);
	g = gen_get(id2);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert(strncmp(g.held, GEN_UNCLOSED_REASON, strlen(GEN_UNCLOSED_REASON)) == 0, "%s",
		  g.held);
	cr_assert(strstr(g.held, "\"b\"") != NULL, "the file is named: %s", g.held);
	cr_assert_eq(cat_extents(fx.cat, a, 0, got, 2), 1);
	cr_assert_eq(got[0].len, 4096, "a's bytes as committed");
	OK(cat_check(fx.cat));
}

/* The start of a writer reads before it changes anything: a file with
 * committed extents still gets them as pending, a directory or a missing
 * inode is still refused. */
Test(defer, a_writer_start_copies_committed_extents_and_refuses_non_files, .init = setup,
     .fini = teardown)
{
	uint64_t root;
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	uint64_t ino;
	small_file_statements(root, "f", 300, &ino);
	OK(cat_pending_from_committed(fx.cat, ino));
	struct cat_extent got[2];
	cr_assert_eq(cat_pending_extents(fx.cat, ino, 0, got, 2), 1, "committed extent copied");
	OK(cat_pending_drop(fx.cat, ino));
	FAILS(cat_pending_from_committed(fx.cat, root), EISDIR);
	FAILS(cat_pending_from_committed(fx.cat, 999999), ENOENT);
}

/* D9 (review 38 F2): the lost mark fails too (the full disk that lost the
 * transaction; here the connection made read-only): it stays pending, every
 * later write transaction is refused until it lands, and once room is back
 * it is written before anything else commits, so the next open holds the
 * generation for its loss, never as a plain crash (provable by content). */
Test(defer, a_lost_mark_that_fails_is_retried_before_any_later_write, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, ROOT, "run", S_IFDIR | 0755, NULL), root, ino = 0;
	uint64_t id = ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	cat_defer_window(fx.cat, LONG_WINDOW_MS);
	for (int i = 0; i < 2; i++) {
		char name[16];
		name_of(name, sizeof(name), i);
		OK(small_file(fx.cat, root, name, 100 + i, NULL, &ino));
	}
	pthread_mutex_lock(&fx.cat->lock); /* under the catalog: as SQLite would */
	cr_assert_eq(sqlite3_exec(fx.cat->db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(fx.cat->db, "PRAGMA query_only = 1", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_unlock(&fx.cat->lock);

	/* the loss is found, its mark cannot be written: nothing commits */
	cr_assert_neq(cat_gen_commit(fx.cat, id, "explicit"), 0);
	struct cat_inode in;
	cr_assert_neq(cat_create(fx.cat, ROOT, "outside", S_IFREG | 0644, 0, 0, 0, NULL, &in), 0,
		      "a write outside generations waits for the mark too");
	cr_assert_eq(gen_get(id).state, GEN_OPEN);

	pthread_mutex_lock(&fx.cat->lock); /* room is back */
	cr_assert_eq(sqlite3_exec(fx.cat->db, "PRAGMA query_only = 0", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_unlock(&fx.cat->lock);
	ts_mk(fx.cat, ROOT, "outside", S_IFREG | 0644, NULL);
	sqlite3_stmt *st;
	pthread_mutex_lock(&fx.cat->lock);
	cr_assert_eq(sqlite3_prepare_v2(fx.cat->db, "SELECT writing FROM inodes WHERE ino ="
				       " (SELECT root FROM generations WHERE name = 'step-1')", -1,
				       &st, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	int mark = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	pthread_mutex_unlock(&fx.cat->lock);
	cr_assert_eq(mark, 2, "the mark landed first");
	/* a rule's commit is refused for the loss (generation.h G9) */
	FAILS(cat_gen_commit(fx.cat, id, "marker"), ENOTRECOVERABLE);

	cat_close(fx.cat);
	fx.cat = NULL;
	open_catalog();
	struct cat_gen g = gen_get(id);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert(strncmp(g.held, GEN_LOST_REASON, strlen(GEN_LOST_REASON)) == 0, "held: %s", g.held);
	OK(cat_check(fx.cat));
}
