/* Unit tests for fs/ns.c, the namespace, with a real catalog, node table,
 * generation policy and writer (no FUSE, no ops.c): files created, written
 * and closed through ns land in the catalog byte for byte; the generation
 * rules fire from the namespace's own calls — a trigger file's close, a
 * rename of a finished temporary directory to a step name — and wait for
 * open write handles; a rewrite of a committed save makes a new version; an
 * unlinked open file stays readable; the kernel's lookups are counted and
 * forgotten.
 *
 * The writers put their chunks through a real chunk put (fs/chunkput.c) over
 * the test's catalog, store and recent, with no cache (chunkput.h: a NULL
 * cache handle calls nothing) and the fake reader below. */
#include <criterion/criterion.h>

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_internal.h" /* the catalog's connection: a hook at the change (invariant 6) */
#include "chunkput.h"
#include "gen.h"
#include "generation.h"
#include "node.h"
#include "ns.h"
#include "recent.h"
#include "store.h"
#include "support.h"

#define TN_KiB ((size_t)1 << 10)

static struct {
	char dir[128];
	char cat_path[192];
	struct {
		struct cat *cat;
		struct store *store;
		struct recent *recent;
		struct chunker_params chunking;
		char staging_dir[192];
	} fs;
	struct chunkput *cp; /* the writers' chunk put */
	struct node_table *nodes;
	struct gen_policy *g;
	struct ns *ns;
	int reads; /* reads of committed bytes asked of the fake reader */
} tns;

static const struct ns_cred tns_cred = { .uid = 0, .gid = 0, .pid = 0 };

/* The fake reader: committed bytes are not readable here (a file being
 * written is read from its writer, which is real). */
static int tns_map(void *arg, uint64_t ino, uint64_t off, size_t len, struct reader_map *m)
{
	tns.reads++;
	return -EIO;
}

static void tns_unmap(void *arg, struct reader_map *m)
{
}

static int tns_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	tns.reads++;
	return -EIO;
}

static int tns_proof_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return -EIO;
}

/* The chunk put's reader (a writer starting on committed bytes): likewise. */
static int tns_cp_read(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off,
		       size_t len, char *out)
{
	tns.reads++;
	return -EIO;
}

static int tns_cp_copy_extent(struct reader *r, uint64_t ino, const struct cat_extent *ext,
			      uint64_t chunk_off, size_t len, char *out)
{
	tns.reads++;
	return -EIO;
}

static void tns_setup(void)
{
	memset(&tns, 0, sizeof(tns));
	ts_tmpdir_make(tns.dir, sizeof(tns.dir), "ns");
	ts_cat_open_in(tns.dir, "catalog.db", tns.cat_path, sizeof(tns.cat_path), &tns.fs.cat);
	char path[256];
	snprintf(path, sizeof(path), "%s/store", tns.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	OK(store_open(path, &tns.fs.store));
	snprintf(tns.fs.staging_dir, sizeof(tns.fs.staging_dir), "%s/staging", tns.dir);
	cr_assert_eq(mkdir(tns.fs.staging_dir, 0700), 0);
	tns.fs.chunking = (struct chunker_params){ .min_size = 64 * TN_KiB, .avg_size = 128 * TN_KiB,
						   .max_size = 512 * TN_KiB };
	OK(recent_new(16 << 20, &tns.fs.recent));
	struct chunkput_config cpc = { .chunking = tns.fs.chunking,
				       .staging_dir = tns.fs.staging_dir };
	struct chunkput_cache no_cache = { NULL, NULL, NULL, NULL, NULL };
	struct chunkput_kick no_kick = { NULL, NULL };
	struct chunkput_reader cpr = { NULL, tns_cp_read, tns_cp_copy_extent };
	OK(chunkput_new(&cpc, tns.fs.cat, tns.fs.store, NULL, tns.fs.recent, &no_cache, &no_kick,
			&cpr, &tns.cp));

	OK(node_table_new(tns.fs.cat, &tns.nodes));
	struct gen_options o = { .quiet_s = 60 }; /* no thread: rules run in the caller */
	struct gen_deps gd = { .cat = tns.fs.cat, .nodes = tns.nodes, .read = tns_proof_read };
	OK(gen_policy_new(&gd, &o, &tns.g));
	struct ns_deps d = { .cat = tns.fs.cat, .nodes = tns.nodes, .gen = tns.g,
			     .store = tns.fs.store,
			     .reader = { tns_map, tns_unmap, tns_read, NULL },
			     .chunkput = tns.cp };
	struct ns_config cfg = { .sync_backing = false };
	OK(ns_new(&d, &cfg, &tns.ns));
}

static void tns_teardown(void)
{
	ns_free(tns.ns);
	gen_policy_shutdown(tns.g);
	gen_policy_free(tns.g);
	node_table_free(tns.nodes);
	chunkput_free(tns.cp);
	recent_free(tns.fs.recent);
	store_close(tns.fs.store);
	ts_cat_close_checked(&tns.fs.cat);
	ts_tmpdir_remove(tns.dir);
}

TestSuite(ns, .init = tns_setup, .fini = tns_teardown);

/* Creates parent/name, writes len bytes of seed in 1 MiB writes, closes it
 * (both halves of a release); returns its inode. */
static uint64_t tns_write_file(uint64_t parent, const char *name, size_t len, unsigned seed)
{
	struct ns_file *f;
	struct cat_inode in;
	uint8_t *b = ts_random(len ? len : 1, seed);
	OK(ns_create(tns.ns, &tns_cred, parent, name, 0644, O_WRONLY | O_CREAT, &f, &in));
	for (size_t off = 0; off < len; off += 1 << 20) {
		size_t n = len - off < (1u << 20) ? len - off : (1u << 20);
		OK(ns_write(tns.ns, &tns_cred, f, b + off, n, off, false, false));
	}
	OK(ns_flush(tns.ns, f));
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
	free(b);
	return in.ino;
}

static uint64_t tns_mkdir(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(ns_make(tns.ns, &tns_cred, parent, name, S_IFDIR | 0755, 0, NULL, &in));
	return in.ino;
}

static int tns_gen_state(const char *name, struct cat_gen *gen)
{
	int rc = cat_gen_find(tns.fs.cat, CAT_ROOT_INO, name, gen);
	return rc == 0 ? gen->state : rc;
}

/* The catalog's committed bytes of ino are the seed's, byte for byte. */
static void tns_expect_bytes(uint64_t ino, size_t len, unsigned seed)
{
	struct cat_inode in;
	struct cat_extent e[64];
	uint8_t *want = ts_random(len, seed);
	uint8_t *chunk = malloc(tns.fs.chunking.max_size);
	OK(cat_getattr(tns.fs.cat, ino, &in));
	cr_assert_eq(in.size, len);
	uint64_t pos = 0;
	while (pos < len) {
		int n = cat_extents(tns.fs.cat, ino, pos, e, 64);
		cr_assert_gt(n, 0);
		for (int i = 0; i < n; i++) {
			size_t got = 0;
			OK(store_get(tns.fs.store, e[i].hash, chunk, e[i].chunk_len, &got));
			cr_assert_eq(got, e[i].chunk_len);
			cr_assert_eq(memcmp(chunk + e[i].chunk_off, want + e[i].off, e[i].len), 0,
				     "bytes at %llu", (unsigned long long)e[i].off);
			pos = e[i].off + e[i].len;
		}
	}
	free(chunk);
	free(want);
}

Test(ns, test_create_write_close_lands_in_the_catalog_byte_for_byte)
{
	uint64_t ino = tns_write_file(CAT_ROOT_INO, "plain.bin", 3u << 20 | 12345, 1);
	tns_expect_bytes(ino, 3u << 20 | 12345, 1);
	struct cat_inode in;
	OK(ns_lookup(tns.ns, CAT_ROOT_INO, "plain.bin", &in));
	cr_assert_eq(in.ino, ino);
	ns_forget(tns.ns, ino, 2); /* ns_create's lookup and this one */
	cr_assert_eq(node_count(tns.nodes), 0);
}

Test(ns, test_a_file_being_written_reads_from_its_writer)
{
	struct ns_file *f;
	struct cat_inode in;
	struct ns_read_out o;
	uint8_t *b = ts_random(300000, 2);
	OK(ns_create(tns.ns, &tns_cred, CAT_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &f, &in));
	OK(ns_write(tns.ns, &tns_cred, f, b, 300000, 0, false, false));
	OK(ns_getattr(tns.ns, in.ino, &in));
	cr_assert_eq(in.size, 300000, "the writer's size wins");
	OK(ns_read(tns.ns, f, 1000, 299500, &o));
	cr_assert_eq(o.got, 500);
	cr_assert_not_null(o.buf);
	cr_assert_eq(memcmp(o.buf, b + 299500, 500), 0);
	ns_read_done(tns.ns, &o);
	cr_assert_eq(tns.reads, 0, "not from the committed extents");
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
	free(b);
}

Test(ns, test_a_trigger_files_close_commits_the_generation)
{
	struct cat_gen gen;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-100");
	cr_assert_eq(tns_gen_state("step-100", &gen), GEN_OPEN, "a step name starts a generation");
	tns_write_file(root, "shard-0.dat", 1u << 20, 3);
	cr_assert_eq(tns_gen_state("step-100", &gen), GEN_OPEN);
	tns_write_file(root, "metadata.json", 2, 4);
	cr_assert_eq(tns_gen_state("step-100", &gen), GEN_COMMITTED);
	cr_assert_str_eq(gen.rule, "metadata-json");
}

/* A trigger file the daemon has no node for (made earlier, then forgotten
 * by the kernel, as after a remount): found by a lookup, written, closed,
 * it still commits. */
Test(ns, test_a_trigger_found_by_lookup_and_written_commits)
{
	struct cat_gen gen;
	struct cat_inode in;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-500");
	tns_write_file(root, "shard-0.dat", 4096, 10);
	OK(ns_make(tns.ns, &tns_cred, root, "metadata.json", S_IFREG | 0644, 0, NULL, &in));
	ns_forget(tns.ns, in.ino, 1);
	ns_forget(tns.ns, root, 1);
	cr_assert_eq(tns_gen_state("step-500", &gen), GEN_OPEN);
	uint64_t before = node_count(tns.nodes);
	OK(ns_lookup(tns.ns, root, "metadata.json", &in));
	cr_assert_eq(node_count(tns.nodes), before + 1, "the lookup made the node");
	struct ns_file *f;
	OK(ns_open(tns.ns, &tns_cred, in.ino, O_WRONLY | O_TRUNC, &f, &in));
	OK(ns_write(tns.ns, &tns_cred, f, "{}", 2, 0, false, false));
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
	cr_assert_eq(tns_gen_state("step-500", &gen), GEN_COMMITTED);
	cr_assert_str_eq(gen.rule, "metadata-json");
}

Test(ns, test_a_trigger_waits_for_a_write_handle_still_open)
{
	struct cat_gen gen;
	struct ns_file *f;
	struct cat_inode in;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-200");
	uint8_t *b = ts_random(4096, 5);
	OK(ns_create(tns.ns, &tns_cred, root, "shard-1.dat", 0644, O_WRONLY | O_CREAT, &f, &in));
	OK(ns_write(tns.ns, &tns_cred, f, b, 4096, 0, false, false));
	tns_write_file(root, ".ckptfs-commit", 0, 6);
	cr_assert_eq(tns_gen_state("step-200", &gen), GEN_OPEN, "shard-1 is still open");
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
	cr_assert_eq(tns_gen_state("step-200", &gen), GEN_COMMITTED, "at the last close");
	cr_assert_str_eq(gen.rule, "marker");
	free(b);
}

Test(ns, test_renaming_a_finished_temporary_directory_commits_it)
{
	struct cat_gen gen;
	uint64_t tmp = tns_mkdir(CAT_ROOT_INO, "tmp-save");
	uint64_t ino = tns_write_file(tmp, "model.dat", 700000, 7);
	cr_assert_eq(tns_gen_state("tmp-save", &gen), -ENOENT, "not a generation name");
	OK(ns_rename(tns.ns, &tns_cred, CAT_ROOT_INO, "tmp-save", CAT_ROOT_INO, "step-300", 0));
	cr_assert_eq(tns_gen_state("step-300", &gen), GEN_COMMITTED);
	cr_assert_str_eq(gen.rule, "rename");
	tns_expect_bytes(ino, 700000, 7);
}

Test(ns, test_rewriting_a_committed_save_makes_a_new_version)
{
	struct cat_gen gen;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-400");
	tns_write_file(root, "model.dat", 100000, 8);
	tns_write_file(root, ".ckptfs-commit", 0, 9);
	cr_assert_eq(tns_gen_state("step-400", &gen), GEN_COMMITTED);
	cr_assert_eq(gen.version, 1);
	struct ns_file *f;
	struct cat_inode in;
	OK(ns_lookup(tns.ns, root, "model.dat", &in));
	OK(ns_open(tns.ns, &tns_cred, in.ino, O_WRONLY | O_TRUNC, &f, &in));
	cr_assert_eq(tns_gen_state("step-400", &gen), GEN_OPEN, "O_TRUNC reopened it");
	cr_assert_eq(gen.version, 2);
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
	OK(ns_gen_commit(tns.ns, &tns_cred, root));
	cr_assert_eq(tns_gen_state("step-400", &gen), GEN_COMMITTED);
	cr_assert_eq(gen.version, 2);
}

Test(ns, test_an_unlinked_open_file_lives_until_its_last_close)
{
	struct ns_file *f;
	struct cat_inode in;
	uint8_t *b = ts_random(5000, 10);
	OK(ns_create(tns.ns, &tns_cred, CAT_ROOT_INO, "f", 0644, O_RDWR | O_CREAT, &f, &in));
	uint64_t ino = in.ino;
	OK(ns_write(tns.ns, &tns_cred, f, b, 5000, 0, false, false));
	OK(ns_remove(tns.ns, &tns_cred, CAT_ROOT_INO, "f", false));
	FAILS(ns_lookup(tns.ns, CAT_ROOT_INO, "f", &in), ENOENT);
	ns_forget(tns.ns, ino, 1);
	OK(ns_getattr(tns.ns, ino, &in));
	cr_assert_eq(in.nlink, 0);
	cr_assert_eq(in.size, 5000);
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
	FAILS(ns_getattr(tns.ns, ino, &in), ENOENT);
	cr_assert_eq(node_count(tns.nodes), 0);
	free(b);
}

Test(ns, test_only_root_or_the_owner_steers_a_generation_by_hand)
{
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-500");
	struct ns_cred other = { .uid = getuid() + 4242, .gid = 4242, .pid = 0 };
	FAILS(ns_gen_commit(tns.ns, &other, root), EPERM);
	FAILS(ns_gen_pin(tns.ns, &tns_cred, CAT_ROOT_INO, true), EINVAL); /* in none */
	OK(ns_gen_pin(tns.ns, &tns_cred, root, true));
	char line[512];
	OK(ns_gen_describe(tns.ns, root, line, sizeof(line)));
	cr_assert(strstr(line, "name=step-500 ") && strstr(line, "pinned=1"), "%s", line);
}

/* ---- a writer is registered before what it changes is seen (ns.h invariant 6) ---- */

/* The moment the catalog changes a row of inodes: what a commit rule firing
 * then on another thread would see. The hook runs inside the change, with
 * the catalog's lock held, so it only looks at the node table (the list
 * every commit path asks, gen.c gen_files_being_written). */
static struct {
	sqlite3_int64 row; /* the inode watched */
	int op;            /* SQLITE_INSERT (a create) or SQLITE_UPDATE (a truncate) */
	uint64_t writer;   /* the inode expected among the writers at that moment */
	int seen;          /* changes of row seen */
	int held;          /* of them, with writer registered */
} tns_gap;

static void tns_gap_hook(void *arg, int op, const char *db, const char *table, sqlite3_int64 row)
{
	if (op != tns_gap.op || strcmp(table, "inodes") != 0 ||
	    (tns_gap.row && row != tns_gap.row))
		return;
	uint64_t inos[64];
	size_t n = node_writing(tns.nodes, inos, 64);
	tns_gap.seen++;
	for (size_t i = 0; i < n; i++)
		if (inos[i] == tns_gap.writer) {
			tns_gap.held++;
			break;
		}
}

static void tns_gap_watch(int op, uint64_t row, uint64_t writer)
{
	tns_gap = (typeof(tns_gap)){ .row = (sqlite3_int64)row, .op = op, .writer = writer };
	sqlite3_update_hook(tns.fs.cat->db, tns_gap_hook, NULL);
}

static void tns_gap_unwatch(void)
{
	sqlite3_update_hook(tns.fs.cat->db, NULL, NULL);
}

static void tns_close(struct ns_file *f)
{
	int rc = ns_release(tns.ns, f);
	OK(rc);
	ns_release_done(tns.ns, f, rc);
}

/* F11 of the s28 review: an O_TRUNC open emptied the file before its
 * handle counted among the writers, so a commit in between (a marker on
 * another thread, the quiet period) committed the save with the file empty. */
Test(ns, test_an_o_trunc_open_is_a_writer_before_it_empties_the_file)
{
	struct cat_gen gen;
	struct ns_file *f;
	struct cat_inode in;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-700");
	uint64_t ino = tns_write_file(root, "shard-0.dat", 200000, 11);
	tns_gap_watch(SQLITE_UPDATE, ino, ino);
	OK(ns_open(tns.ns, &tns_cred, ino, O_WRONLY | O_TRUNC, &f, &in));
	tns_gap_unwatch();
	cr_assert_gt(tns_gap.seen, 0, "the truncate changed the inode's row");
	cr_assert_eq(tns_gap.held, tns_gap.seen, "the file was not yet a writer when emptied");
	tns_write_file(root, ".ckptfs-commit", 0, 12);
	cr_assert_eq(tns_gen_state("step-700", &gen), GEN_OPEN, "the truncating handle holds it");
	tns_close(f);
	cr_assert_eq(tns_gen_state("step-700", &gen), GEN_COMMITTED);
	OK(cat_getattr(tns.fs.cat, ino, &in));
	cr_assert_eq(in.size, 0);
}

/* The same for a create: the new (empty) file is in the generation from
 * the create's transaction; its directory is a writer of the generation
 * from before it until the file's own handle is. */
Test(ns, test_a_create_for_writing_holds_its_generation_before_the_file_is_seen)
{
	struct cat_gen gen;
	struct ns_file *f;
	struct cat_inode in;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-800");
	tns_gap_watch(SQLITE_INSERT, 0, root);
	OK(ns_create(tns.ns, &tns_cred, root, "shard-1.dat", 0644, O_WRONLY | O_CREAT, &f, &in));
	tns_gap_unwatch();
	cr_assert_eq(tns_gap.seen, 1, "one inode made");
	cr_assert_eq(tns_gap.held, 1, "its generation had no writer when the file appeared");
	uint64_t inos[8];
	cr_assert_eq(node_writing(tns.nodes, inos, 8), 1, "only the file is a writer now");
	cr_assert_eq(inos[0], in.ino);
	tns_write_file(root, ".ckptfs-commit", 0, 13);
	cr_assert_eq(tns_gen_state("step-800", &gen), GEN_OPEN, "the new file's handle holds it");
	uint8_t *b = ts_random(70000, 14);
	OK(ns_write(tns.ns, &tns_cred, f, b, 70000, 0, false, false));
	tns_close(f);
	cr_assert_eq(tns_gen_state("step-800", &gen), GEN_COMMITTED);
	tns_expect_bytes(in.ino, 70000, 14);
	free(b);
}

/* An open that fails after it registered (here its truncate, refused by a
 * trigger) leaves no writer behind: the commit it held may run. */
Test(ns, test_an_open_that_fails_after_registering_is_no_writer)
{
	struct cat_gen gen;
	struct ns_file *f = NULL;
	struct cat_inode in;
	char sql[256];
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-900");
	uint64_t ino = tns_write_file(root, "shard-0.dat", 100000, 15);
	snprintf(sql, sizeof(sql), "CREATE TEMP TRIGGER tns_no_truncate BEFORE UPDATE ON inodes"
		 " WHEN NEW.ino = %llu AND NEW.size = 0 BEGIN SELECT RAISE(ABORT, 'refused'); END",
		 (unsigned long long)ino);
	cr_assert_eq(sqlite3_exec(tns.fs.cat->db, sql, NULL, NULL, NULL), SQLITE_OK);
	cr_assert_neq(ns_open(tns.ns, &tns_cred, ino, O_WRONLY | O_TRUNC, &f, &in), 0);
	cr_assert_eq(sqlite3_exec(tns.fs.cat->db, "DROP TRIGGER tns_no_truncate", NULL, NULL, NULL),
		     SQLITE_OK);
	uint64_t inos[8];
	cr_assert_eq(node_writing(tns.nodes, inos, 8), 0, "the failed open is no writer");
	tns_write_file(root, ".ckptfs-commit", 0, 16);
	cr_assert_eq(tns_gen_state("step-900", &gen), GEN_COMMITTED, "nothing holds it");
	tns_expect_bytes(ino, 100000, 15);
}

/* Review 38 F3, catalog_defer.c D10: a file whose create was in a deferred
 * batch that rolled back (SQLite dropped it: an I/O error, a full disk) is
 * gone from the catalog while the trainer holds it open. Its write, flush,
 * fsync and close answer the error that lost it (EIO here), never ENOENT
 * ("No such file" for a file it just created) nor success; its save stays
 * refused to every rule, as before (generation.h G9). */
Test(ns, test_a_create_lost_with_its_batch_answers_the_loss_not_enoent)
{
	struct ns_file *fa, *fb, *fc;
	struct cat_inode a, b, c;
	struct cat_gen gen;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-7");
	cr_assert_eq(tns_gen_state("step-7", &gen), GEN_OPEN);
	cat_defer_window(tns.fs.cat, 60000); /* no flusher commit during the test */
	OK(ns_create(tns.ns, &tns_cred, root, "a.bin", 0644, O_WRONLY | O_CREAT, &fa, &a));
	OK(ns_create(tns.ns, &tns_cred, root, "b.bin", 0644, O_WRONLY | O_CREAT, &fb, &b));
	uint8_t *buf = ts_random(200000, 9);
	OK(ns_write(tns.ns, &tns_cred, fb, buf, 200000, 0, false, false));
	cr_assert(cat_defer_active(tns.fs.cat), "the creates are in the deferred batch");
	pthread_mutex_lock(&tns.fs.cat->lock); /* under the catalog: as SQLite would */
	cr_assert_eq(sqlite3_exec(tns.fs.cat->db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_unlock(&tns.fs.cat->lock);

	/* a.bin: created, not written yet */
	int rc = ns_write(tns.ns, &tns_cred, fa, "x", 1, 0, false, false);
	cr_assert_eq(rc, -EIO, "the write of the lost a.bin answered %d (%s), not EIO", rc,
		     strerror(-rc));
	rc = ns_flush(tns.ns, fa);
	cr_assert_eq(rc, -EIO, "its flush (close) answered %d (%s)", rc, strerror(-rc));
	rc = ns_release(tns.ns, fa);
	cr_assert_eq(rc, -EIO, "its release answered %d (%s)", rc, strerror(-rc));
	ns_release_done(tns.ns, fa, rc);
	/* b.bin: written before the loss, its writer holds the bytes */
	rc = ns_fsync(tns.ns, fb);
	cr_assert_eq(rc, -EIO, "the fsync of the lost b.bin answered %d (%s)", rc, strerror(-rc));
	rc = ns_write(tns.ns, &tns_cred, fb, buf, 1000, 200000, false, false);
	cr_assert_eq(rc, -EIO, "a later write answered %d (%s)", rc, strerror(-rc));
	rc = ns_release(tns.ns, fb);
	cr_assert_eq(rc, -EIO, "its close answered %d (%s)", rc, strerror(-rc));
	ns_release_done(tns.ns, fb, rc);

	/* a file created after the loss is no lost one */
	OK(ns_create(tns.ns, &tns_cred, root, "c.bin", 0644, O_WRONLY | O_CREAT, &fc, &c));
	cr_assert_neq(c.ino, a.ino);
	cr_assert_neq(c.ino, b.ino);
	OK(ns_write(tns.ns, &tns_cred, fc, buf, 1000, 0, false, false));
	OK(ns_flush(tns.ns, fc));
	rc = ns_release(tns.ns, fc);
	OK(rc);
	ns_release_done(tns.ns, fc, rc);
	/* the save: refused to a rule for its loss, as before */
	cr_assert_eq(tns_gen_state("step-7", &gen), GEN_OPEN);
	FAILS(cat_gen_commit(tns.fs.cat, gen.id, "marker"), ENOTRECOVERABLE);
	cr_assert_eq(tns_gen_state("step-7", &gen), GEN_OPEN);
	free(buf);
}

/* invariant 12, generation.h G11 (review 42 F5): keep-latest-k's expire of
 * a committed save, run by the hook at a chosen point of an open for
 * writing of a file of it (the node table's write handles handed to the
 * expire, as fs/gen.c does). */
static struct {
	uint64_t ino, gen;
	const char *point;
	int rc; /* the expire's answer */
	bool ran;
} tns_race;

static int tns_writing(void *arg, struct cat_id_vec *inos)
{
	uint64_t v[16];
	size_t n = node_writing(tns.nodes, v, 16);
	for (size_t i = 0; i < n; i++)
		OK(cat_id_vec_push(inos, v[i]));
	return 0;
}

static void tns_expire_at(const char *point, uint64_t ino)
{
	if (ino != tns_race.ino || strcmp(point, tns_race.point) != 0 || tns_race.ran)
		return;
	tns_race.ran = true;
	struct cat_id_vec removed = { 0 };
	tns_race.rc = cat_gen_expire_if(tns.fs.cat, tns_race.gen, 0, "keep", tns_writing, NULL,
					cat_id_vec_add_ino, &removed);
	if (tns_race.rc == 0)
		node_unlinked_many(tns.nodes, removed.v, removed.n);
	cat_id_vec_free(&removed);
}

/* The expire's transaction runs after the open read the file (in its save)
 * and before its handle is counted: it sees no writer and deletes the save;
 * the open then finds the file gone from it, unlinked, and fails ENOENT
 * before it truncates or writes (the old code opened it: a write into a
 * file nothing names). Run after the handle is counted, the expire sees
 * it and keeps the save (-ETXTBSY); the handle's truncate then reopens it. */
Test(ns, test_an_open_for_writing_racing_keeps_expire_is_refused_or_keeps_the_save)
{
	struct cat_gen gen;
	struct ns_file *f = NULL;
	struct cat_inode in;
	uint64_t root = tns_mkdir(CAT_ROOT_INO, "step-1000");
	uint64_t ino = tns_write_file(root, "model.dat", 100000, 21);
	tns_write_file(root, ".ckptfs-commit", 0, 22);
	cr_assert_eq(tns_gen_state("step-1000", &gen), GEN_COMMITTED);
	OK(ns_lookup(tns.ns, root, "model.dat", &in));
	tns_race = (typeof(tns_race)){ .ino = ino, .gen = gen.id, .point = "counting" };
	ns_test_hook = tns_expire_at;
	int rc = ns_open(tns.ns, &tns_cred, ino, O_RDWR | O_TRUNC, &f, &in);
	ns_test_hook = NULL;
	cr_assert(tns_race.ran);
	OK(tns_race.rc);
	cr_assert_eq(rc, -ENOENT, "an open into a removed save: %d", rc);
	uint64_t inos[8];
	cr_assert_eq(node_writing(tns.nodes, inos, 8), 0, "the refused open is no writer");
	OK(cat_gen_get_brief(tns.fs.cat, gen.id, &gen));
	cr_assert_eq(gen.state, GEN_DELETED);

	root = tns_mkdir(CAT_ROOT_INO, "step-1100");
	ino = tns_write_file(root, "model.dat", 100000, 23);
	tns_write_file(root, ".ckptfs-commit", 0, 24);
	cr_assert_eq(tns_gen_state("step-1100", &gen), GEN_COMMITTED);
	OK(ns_lookup(tns.ns, root, "model.dat", &in));
	tns_race = (typeof(tns_race)){ .ino = ino, .gen = gen.id, .point = "counted" };
	ns_test_hook = tns_expire_at;
	OK(ns_open(tns.ns, &tns_cred, ino, O_RDWR | O_TRUNC, &f, &in));
	ns_test_hook = NULL;
	cr_assert(tns_race.ran);
	cr_assert_eq(tns_race.rc, -ETXTBSY, "the expire saw the writer: %d", tns_race.rc);
	cr_assert_eq(tns_gen_state("step-1100", &gen), GEN_OPEN, "O_TRUNC reopened it");
	cr_assert_eq(gen.version, 2);
	tns_close(f);
}
