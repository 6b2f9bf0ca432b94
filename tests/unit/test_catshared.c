/* Unit tests for meta/catalog_shared.c, the catalog's shared engine: two
 * struct cat opened with cat_open_shared on one private PostgreSQL
 * (tests/unit/pgtest.h), each with its own local SQLite file, are two nodes.
 *
 * Names made through one are seen through the other with the same inode
 * numbers, and every namespace call of catalog.h goes to the shared
 * namespace (the local file's namespace stays empty); batched releases give
 * the references back (pgns N1); both nodes name the same catalog id; a bad
 * URL and an absent server are one clear error naming the URL without its
 * password; cat_close releases the lease (as expired, settled by the next
 * sweep, when uploads were left queued: lease.h L9); a node past its lease is swept
 * by the other, which adopts the chunks it wrote that its own cache holds,
 * and changes nothing after; reopening keeps the local cache copies and
 * queues no removal from BACKING; a file open for writing holds its
 * generation's commit (cat_writing); alone, the shared-only calls do nothing. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_internal.h"
#include "pggen.h"
#include "pgns.h"
#include "pgtest.h"
#include "store.h"
#include "support.h"

TestSuite(catshared, .init = pt_start, .fini = pt_stop, .timeout = 90);
TestSuite(catshared_alone, .timeout = 30);

/* Checks both sides of the node (its local file, the shared namespace), closes. */
static void tc_close(struct pt_cat *n)
{
	if (n->cat)
		OK(cat_check(n->cat));
	pt_cat_close(n);
}

struct tc_names {
	char names[16][64];
	uint64_t inos[16];
	int n;
};

static int tc_collect(void *arg, const char *name, const struct cat_inode *attr, uint64_t next)
{
	(void)next;
	struct tc_names *t = arg;
	if (t->n < 16) {
		snprintf(t->names[t->n], 64, "%s", name);
		t->inos[t->n++] = attr->ino;
	}
	return 0;
}

/* The inode of name in t, 0 if it is not listed. */
static uint64_t tc_listed(const struct tc_names *t, const char *name)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->names[i], name) == 0)
			return t->inos[i];
	return 0;
}

/* One state of a node in `ckptfs-admin nodes`, through b's connection. */
static void tc_node_state(struct pt_cat *through, uint64_t id, char *state, size_t size)
{
	struct lease_node nodes[8];
	size_t n = 0;
	OK(lease_list(cat_shared_ns(through->cat)->lease, nodes, 8, &n));
	snprintf(state, size, "(none)");
	for (size_t i = 0; i < n; i++)
		if (nodes[i].id == id)
			snprintf(state, size, "%s", nodes[i].state);
}

Test(catshared, names_made_through_one_node_are_seen_through_the_other_with_the_same_inodes)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	cr_assert_neq(cat_node_id(a.cat), cat_node_id(b.cat));

	struct cat_inode d, f, got;
	OK(cat_create(a.cat, CAT_ROOT_INO, "d", S_IFDIR | 0755, 1000, 1000, 0, NULL, &d));
	OK(cat_create(a.cat, d.ino, "f", S_IFREG | 0644, 1000, 1000, 0, NULL, &f));
	cr_assert_gt(d.ino, CAT_ROOT_INO);
	OK(cat_lookup(b.cat, CAT_ROOT_INO, "d", &got));
	cr_assert_eq(got.ino, d.ino);
	cr_assert_eq(got.nlink, 2);
	OK(cat_lookup(b.cat, d.ino, "f", &got));
	cr_assert_eq(got.ino, f.ino);
	cr_assert_eq(got.uid, 1000);
	OK(cat_getattr(b.cat, f.ino, &got));
	cr_assert_eq(got.mode, S_IFREG | 0644);
	OK(cat_lookup(b.cat, d.ino, ".", &got));
	cr_assert_eq(got.ino, d.ino);
	OK(cat_lookup(b.cat, d.ino, "..", &got));
	cr_assert_eq(got.ino, CAT_ROOT_INO);
	FAILS(cat_lookup(b.cat, f.ino, "x", &got), ENOTDIR);
	FAILS(cat_lookup(b.cat, d.ino, "x", &got), ENOENT);
	FAILS(cat_create(b.cat, d.ino, "f", S_IFREG | 0644, 0, 0, 0, NULL, &got), EEXIST);

	/* a name made on b gets the next number of the one sequence */
	struct cat_inode l;
	OK(cat_create(b.cat, d.ino, "l", S_IFLNK | 0777, 0, 0, 0, "f", &l));
	cr_assert_gt(l.ino, f.ino);
	char target[16];
	OK(cat_readlink(a.cat, l.ino, target, sizeof(target)));
	cr_assert_str_eq(target, "f");
	FAILS(cat_readlink(a.cat, f.ino, target, sizeof(target)), EINVAL);
	struct tc_names names = { .n = 0 };
	OK(cat_readdir(a.cat, d.ino, 0, tc_collect, &names));
	cr_assert_eq(names.n, 4, ". .. f l");
	cr_assert_eq(tc_listed(&names, "f"), f.ino);
	cr_assert_eq(tc_listed(&names, "l"), l.ino);
	cr_assert_eq(tc_listed(&names, ".."), CAT_ROOT_INO);

	/* rename and unlink on b, seen on a; release ends the inode */
	uint64_t replaced = 99, gone = 0;
	OK(cat_rename(b.cat, d.ino, "f", CAT_ROOT_INO, "g", 0, &replaced));
	cr_assert_eq(replaced, 0);
	FAILS(cat_lookup(a.cat, d.ino, "f", &got), ENOENT);
	OK(cat_lookup(a.cat, CAT_ROOT_INO, "g", &got));
	cr_assert_eq(got.ino, f.ino);
	OK(cat_unlink(a.cat, CAT_ROOT_INO, "g", &gone));
	cr_assert_eq(gone, f.ino);
	OK(cat_getattr(b.cat, f.ino, &got));
	cr_assert_eq(got.nlink, 0);
	OK(cat_inode_release(b.cat, f.ino));
	FAILS(cat_getattr(a.cat, f.ino, &got), ENOENT);
	FAILS(cat_unlink(a.cat, CAT_ROOT_INO, "d", NULL), EISDIR);
	FAILS(cat_rmdir(a.cat, CAT_ROOT_INO, "d", NULL), ENOTEMPTY);
	OK(cat_unlink(a.cat, d.ino, "l", NULL));
	OK(cat_rmdir(b.cat, CAT_ROOT_INO, "d", &gone));
	cr_assert_eq(gone, d.ino);
	FAILS(cat_lookup(a.cat, CAT_ROOT_INO, "d", &got), ENOENT);

	/* S2: the local files' namespaces stayed as cat_open made them */
	cr_assert_eq(pt_cat_local_rows(&a, "inodes", NULL), 1, "only the local root");
	cr_assert_eq(pt_cat_local_rows(&b, "dirents", NULL), 0);
	tc_close(&a);
	tc_close(&b);
}

Test(catshared, links_attributes_counts_and_batched_releases_go_to_the_shared_namespace)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	struct cat_inode f, got, in = { .mode = 0600, .uid = 7, .mtime_ns = 12345 };
	OK(cat_create(a.cat, CAT_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, NULL, &f));
	OK(cat_link(b.cat, f.ino, CAT_ROOT_INO, "f2", &got));
	cr_assert_eq(got.nlink, 2);
	OK(cat_setattr(b.cat, f.ino, CAT_SET_MODE | CAT_SET_UID | CAT_SET_MTIME, &in, NULL));
	OK(cat_lookup(a.cat, CAT_ROOT_INO, "f2", &got));
	cr_assert_eq(got.ino, f.ino);
	cr_assert_eq(got.mode, S_IFREG | 0600);
	cr_assert_eq(got.uid, 7);
	cr_assert_eq(got.mtime_ns, 12345);

	/* content published on a (what cat_file_commit will do), counted on b */
	struct cat_extent ext[2];
	struct pgns_chunk chunks[2];
	for (int i = 0; i < 2; i++) {
		ts_hash(chunks[i].hash, 0xc5, i);
		chunks[i].plain_len = 1000;
		chunks[i].stored_len = 600;
		chunks[i].codec = 2;
		ext[i] = (struct cat_extent){ .off = (uint64_t)i * 1000, .len = 1000,
					      .chunk_len = 1000 };
		memcpy(ext[i].hash, chunks[i].hash, CAT_HASH_LEN);
	}
	OK(pgns_file_commit(cat_shared_ns(a.cat), f.ino, 2000, 1, ext, 2, chunks, 2));
	struct cat_stats sa, sb;
	OK(cat_stats(a.cat, &sa));
	OK(cat_stats(b.cat, &sb));
	cr_assert_eq(sb.inodes, 2, "the root and f");
	cr_assert_eq(sb.files, 1);
	cr_assert_eq(sb.logical_bytes, 2000);
	cr_assert_eq(sb.referenced_bytes, 2000);
	cr_assert_eq(sb.chunks, 0, "b's cache holds nothing");
	cr_assert_eq(sa.inodes, sb.inodes);
	cr_assert_eq(sa.logical_bytes, sb.logical_bytes);

	/* unlinked on b; its data dropped in a batch on a: references back, size 0 */
	OK(cat_unlink(b.cat, CAT_ROOT_INO, "f", NULL));
	uint64_t batch[] = { f.ino };
	OK(cat_inodes_drop_data(a.cat, batch, 1));
	OK(cat_getattr(a.cat, f.ino, &got));
	cr_assert_eq(got.size, 2000, "f still has a link: its data stays");
	OK(cat_unlink(b.cat, CAT_ROOT_INO, "f2", NULL));
	OK(cat_inodes_drop_data(a.cat, batch, 1));
	OK(cat_getattr(b.cat, f.ino, &got));
	cr_assert_eq(got.size, 0);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(b.cat), chunks[0].hash, &row));
	cr_assert_eq(row.refcount, 0);

	/* many unlinked inodes released in one call; a linked one is skipped */
	uint64_t inos[5];
	char name[16];
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		OK(cat_create(a.cat, CAT_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, NULL, &got));
		inos[i] = got.ino;
		if (i < 4)
			OK(cat_unlink(b.cat, CAT_ROOT_INO, name, NULL));
	}
	OK(cat_inodes_release(b.cat, inos, 5));
	for (int i = 0; i < 4; i++)
		FAILS(cat_getattr(a.cat, inos[i], &got), ENOENT);
	OK(cat_getattr(a.cat, inos[4], &got));
	uint64_t f_only[] = { f.ino };
	OK(cat_inodes_release(a.cat, f_only, 1));
	FAILS(cat_getattr(b.cat, f.ino, &got), ENOENT);
	OK(cat_sync(a.cat));

	/* S4: one catalog id for both nodes */
	char ida[40], idb[40];
	OK(cat_catalog_id(a.cat, ida, sizeof(ida)));
	OK(cat_catalog_id(b.cat, idb, sizeof(idb)));
	cr_assert_str_eq(ida, idb);
	cr_assert_eq(strlen(ida), 32);
	cr_assert_eq(strspn(ida, "0123456789abcdef"), 32);
	tc_close(&a);
	tc_close(&b);
}

Test(catshared, a_bad_url_or_an_absent_server_is_one_error_naming_the_url_without_password)
{
	struct pt_cat n = { .cat = NULL };
	char err[512] = "";
	int rc = pt_cat_try_open(&n, "bad", "mysql://ann:s3cret@db.example/ckpt", 5000, NULL, NULL,
				 err, sizeof(err));
	cr_assert_eq(rc, -EINVAL, "%d %s", rc, err);
	cr_assert_null(n.cat);
	cr_assert(strstr(err, "mysql://ann@db.example/ckpt") != NULL, "%s", err);
	cr_assert(strstr(err, "s3cret") == NULL, "%s", err);
	ts_tmpdir_remove(n.dir);

	err[0] = '\0';
	rc = pt_cat_try_open(&n, "bad", "postgresql://ann:s3cret@db.example/ckpt?nosuchkey=1",
			     5000, NULL, NULL, err, sizeof(err));
	cr_assert_eq(rc, -EINVAL, "%d %s", rc, err);
	cr_assert(strstr(err, "nosuchkey") != NULL, "%s", err);
	cr_assert(strstr(err, "s3cret") == NULL, "%s", err);
	ts_tmpdir_remove(n.dir);

	/* a socket directory where no server listens */
	char url[512];
	snprintf(url, sizeof(url), "postgresql://ann:s3cret@/ckpt?host=%s/nowhere&port=1", pt_dir);
	err[0] = '\0';
	rc = pt_cat_try_open(&n, "absent", url, 5000, NULL, NULL, err, sizeof(err));
	cr_assert_eq(rc, -EHOSTUNREACH, "%d %s", rc, err);
	cr_assert_null(n.cat);
	cr_assert(strstr(err, "postgresql://ann@/ckpt") != NULL, "%s", err);
	cr_assert(strstr(err, "cannot connect") != NULL, "%s", err);
	cr_assert(strstr(err, "s3cret") == NULL, "%s", err);
	cr_assert_eq(strchr(err, '\n'), NULL, "one line: %s", err);
	ts_tmpdir_remove(n.dir);
}

Test(catshared, cat_close_releases_the_lease)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	uint64_t id = cat_node_id(a.cat);
	char state[16];
	tc_node_state(&b, id, state, sizeof(state));
	cr_assert_str_eq(state, "live");
	OK(cat_lease_renew(a.cat));
	tc_close(&a);
	tc_node_state(&b, id, state, sizeof(state));
	cr_assert_str_eq(state, "gone");
	size_t swept = 9;
	OK(cat_lease_sweep(b.cat, &swept));
	cr_assert_eq(swept, 0, "a node that left is not swept");
	tc_close(&b);
}

/* A local chunk row as this node's cache keeps one: written, uploaded,
 * unreferenced (a cache copy), inserted with the test's own connection. */
static void tc_cache_chunk(const struct pt_cat *n, const uint8_t hash[CAT_HASH_LEN])
{
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(n->path, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	sqlite3_stmt *st;
	cr_assert_eq(sqlite3_prepare_v2(db,
					"INSERT INTO chunks(hash, plain_len, codec, stored_len,"
					" refcount, cached, uploaded) VALUES (?1, 1000, 2, 600, 0, 1, 1)",
					-1, &st, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_bind_blob(st, 1, hash, CAT_HASH_LEN, SQLITE_STATIC);
	cr_assert_eq(sqlite3_step(st), SQLITE_DONE, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

Test(catshared, a_node_past_its_lease_is_swept_by_the_other_which_adopts_what_it_caches)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 1000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	uint64_t id_a = cat_node_id(a.cat), id_b = cat_node_id(b.cat);
	struct cat_inode f;
	OK(cat_create(a.cat, CAT_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, NULL, &f));
	/* a publishes two chunks it has not uploaded; b's cache has the first */
	struct cat_extent ext[2];
	struct pgns_chunk chunks[2];
	for (int i = 0; i < 2; i++) {
		ts_hash(chunks[i].hash, 0xc6, i);
		chunks[i].plain_len = 1000;
		chunks[i].stored_len = 600;
		chunks[i].codec = 2;
		ext[i] = (struct cat_extent){ .off = (uint64_t)i * 1000, .len = 1000,
					      .chunk_len = 1000 };
		memcpy(ext[i].hash, chunks[i].hash, CAT_HASH_LEN);
	}
	OK(pgns_file_commit(cat_shared_ns(a.cat), f.ino, 2000, 1, ext, 2, chunks, 2));
	tc_cache_chunk(&b, chunks[0].hash);

	size_t swept = 9;
	OK(cat_lease_sweep(b.cat, &swept));
	cr_assert_eq(swept, 0, "a's lease has time left");
	usleep(2300 * 1000); /* a stops renewing: its lease runs out, and its grace (L4) */
	OK(cat_lease_sweep(b.cat, &swept));
	cr_assert_eq(swept, 1);
	char state[16];
	tc_node_state(&b, id_a, state, sizeof(state));
	cr_assert_str_eq(state, "expired");
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(b.cat), chunks[0].hash, &row));
	cr_assert_eq(row.holder, id_b, "b's cache has it: b holds it now");
	OK(pgns_chunk_get(cat_shared_ns(b.cat), chunks[1].hash, &row));
	cr_assert_eq(row.holder, id_a, "only a had it");

	/* L1, N4: a can neither come back nor change anything */
	FAILS(cat_lease_renew(a.cat), ESTALE);
	struct cat_inode got;
	FAILS(cat_create(a.cat, CAT_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, NULL, &got), ESTALE);
	FAILS(cat_unlink(a.cat, CAT_ROOT_INO, "f", NULL), ESTALE);
	OK(cat_lookup(a.cat, CAT_ROOT_INO, "f", &got)); /* reading changes nothing */
	OK(cat_lease_sweep(b.cat, &swept));
	cr_assert_eq(swept, 0, "swept once");
	tc_close(&a);
	tc_close(&b);
}

Test(catshared, reopening_keeps_the_local_cache_copies_and_queues_no_removal_from_backing)
{
	struct pt_cat a;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	uint8_t hash[CAT_HASH_LEN];
	ts_hash(hash, 0xc7, 1);
	tc_cache_chunk(&a, hash);
	uint64_t first_id = cat_node_id(a.cat);
	cat_close(a.cat);
	char err[512] = "";
	struct cat_shared_cfg cfg = { .url = pt_url, .node_name = "a", .lease_ms = 30000,
				      .timeout_ms = 5000 };
	int rc = cat_open_shared(a.path, &cfg, 0, 0, NULL, NULL, &a.cat, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_neq(cat_node_id(a.cat), first_id, "a new mount is a new node");
	/* S4: a count-0 row is a cache copy of a shared object, not garbage */
	cr_assert_eq(pt_cat_local_rows(&a, "chunks", NULL), 1);
	cr_assert_eq(pt_cat_local_rows(&a, "uploads", NULL), 0, "no removal from BACKING queued");
	tc_close(&a);
}

Test(catshared, a_file_open_for_writing_on_one_node_holds_its_generations_commit)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "a", 30000, NULL, NULL);
	pt_cat_open(&b, "b", 30000, NULL, NULL);
	struct cat_inode run, root, shard;
	OK(cat_create(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, 0, 0, 0, NULL, &run));
	struct cat_gen_spec spec = { "step-1", 1 };
	uint64_t gen = 0, writers = 0;
	OK(pggen_create_root(cat_shared_ns(a.cat), run.ino, &spec, S_IFDIR | 0755, 0, 0, &root,
			     &gen));
	OK(cat_create(b.cat, root.ino, "shard", S_IFREG | 0644, 0, 0, 0, NULL, &shard));
	OK(cat_writing(b.cat, shard.ino, true));
	FAILS(pggen_commit(cat_shared_ns(a.cat), gen, "test", false, &writers), EBUSY);
	cr_assert_eq(writers, 1);
	OK(cat_writing(b.cat, shard.ino, false));
	OK(pggen_commit(cat_shared_ns(a.cat), gen, "test", false, &writers));
	tc_close(&a);
	tc_close(&b);
}

Test(catshared_alone, alone_the_shared_calls_do_nothing)
{
	char dir[64], path[160];
	struct cat *cat;
	ts_tmpdir_make(dir, sizeof(dir), "alone");
	ts_cat_open_in(dir, "catalog.db", path, sizeof(path), &cat);
	cr_assert_not(cat_is_shared(cat));
	cr_assert_eq(cat_node_id(cat), 0);
	uint64_t f = ts_mk(cat, CAT_ROOT_INO, "f", S_IFREG | 0644, NULL);
	OK(cat_writing(cat, f, true));
	OK(cat_writing(cat, f, false));
	OK(cat_lease_renew(cat));
	size_t swept = 9;
	OK(cat_lease_sweep(cat, &swept));
	cr_assert_eq(swept, 0);
	OK(cat_lease_sweep(cat, NULL));
	struct cat_inode got;
	OK(cat_lookup(cat, CAT_ROOT_INO, "f", &got));
	cr_assert_eq(got.ino, f, "the SQLite namespace, as ever");
	ts_cat_close_checked(&cat);
	ts_tmpdir_remove(dir);
}

/* ---- settling an expired node (lease.h L7, catalog_shared.c S6) and the
 * verdict lost re-checked (pggen.h X10); ported from the s28 review's
 * repros F1, F1b and F2 ---- */

#define TC_LEN 1000

/* A file name in dir on n, written as chunks fill/seed.. and closed (its
 * writing row added and removed, as the daemon does). */
static uint64_t tc_file(struct pt_cat *n, uint64_t dir, const char *name, uint8_t fill, int seed,
			int chunks)
{
	uint64_t f = ts_mk(n->cat, dir, name, S_IFREG | 0644, NULL);
	OK(cat_writing(n->cat, f, true));
	ts_write_chunks(n->cat, f, fill, seed, chunks, TC_LEN, NULL, NULL);
	OK(cat_writing(n->cat, f, false));
	return f;
}

/* What settling dead b must have done: step-100 (b's chunks, only in its
 * cache) lost and hidden from a resume, step-200 (b's shard open) held. */
static void tc_settled(struct pt_cat *a, uint64_t run, uint64_t g100, uint64_t g200)
{
	struct cat_gen g;
	OK(cat_gen_get(a->cat, g100, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-100 names chunks only dead b had, yet it is %s",
		     cat_gen_state_name(g.state));
	FAILS(cat_gen_find_step(a->cat, run, 100, &g), ENOENT);
	OK(cat_gen_get(a->cat, g200, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-200 with b's unfinished shard is %s",
		     cat_gen_state_name(g.state));
}

/* step-90 by a on BACKING, step-100 by b only in b's cache, step-200 with
 * a shard b has open; then b stops renewing and its lease runs out. */
static void tc_b_dies_mid_save(struct pt_cat *a, struct pt_cat *b, uint64_t *run, uint64_t *g100,
			       uint64_t *g200)
{
	*run = ts_mk(a->cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t r90, r100, r200;
	uint64_t g90 = ts_mkgen(a->cat, *run, "step-90", 90, true, &r90);
	tc_file(a, r90, "__0_0.distcp", 0x61, 0, 2);
	cr_assert_eq(pt_cat_upload_chunks(a, NULL, NULL), 2);
	OK(cat_gen_commit(a->cat, g90, "dcp-metadata"));
	*g100 = ts_mkgen(b->cat, *run, "step-100", 100, true, &r100);
	tc_file(b, r100, "__0_0.distcp", 0x62, 0, 2);
	OK(cat_gen_commit(b->cat, *g100, "dcp-metadata"));
	*g200 = ts_mkgen(a->cat, *run, "step-200", 200, true, &r200);
	tc_file(a, r200, "__0_0.distcp", 0x63, 0, 1);
	uint64_t f1 = ts_mk(b->cat, r200, "__1_0.distcp", S_IFREG | 0644, NULL);
	OK(cat_writing(b->cat, f1, true));
	usleep((1000 * 2 + 300) * 1000); /* b's lease and its grace (L4) run out */
}

/* F1: a sweeper that expired b and died before settling it (killed -9: no
 * adoption, no pggen_node_lost) leaves b to the next sweep, by any node. */
Test(catshared, an_expired_node_whose_sweeper_died_before_settling_it_is_settled_by_the_next_sweep)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "f1a", 30000, NULL, NULL);
	pt_cat_open(&b, "f1b", 1000, NULL, NULL);
	uint64_t run, g100, g200;
	tc_b_dies_mid_save(&a, &b, &run, &g100, &g200);
	struct pt_node s;
	pt_join(&s, "f1-sweeper", 30000);
	uint64_t ids[8];
	size_t n = 0;
	OK(lease_sweep(&s.lease, ids, 8, &n));
	cr_assert_eq(n, 1, "s expired b");
	pt_leave(&s);

	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1, "a settled b, which s had expired");
	tc_settled(&a, run, g100, g200);
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 0, "settled once");
	pt_cat_close(&b);
	tc_close(&a);
}

/* F1b: a's own sweep committed b's expiry but its reply was lost (pg.h P2:
 * pg_txn runs the body again, which then finds b expired already and
 * reports nothing). Played by running a's expiry through a connection of
 * the test's own as node a, then a's sweep. */
Test(catshared, a_sweep_whose_expiry_reply_was_lost_still_settles_the_node)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "f1ba", 30000, NULL, NULL);
	pt_cat_open(&b, "f1bb", 1000, NULL, NULL);
	uint64_t run, g100, g200;
	tc_b_dies_mid_save(&a, &b, &run, &g100, &g200);
	char err[512] = "";
	struct pg *pg = NULL;
	cr_assert_eq(pg_open(pt_url, 5000, lease_stmts, lease_nstmts, &pg, err, sizeof(err)), 0,
		     "%s", err);
	struct lease as_a = { .pg = pg, .node_id = cat_node_id(a.cat), .lease_ms = 30000 };
	uint64_t ids[8];
	size_t n = 0;
	OK(lease_sweep(&as_a, ids, 8, &n)); /* the first run: committed, its reply lost */
	cr_assert_eq(n, 1);
	pg_close(pg);

	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept)); /* the run again: expires nobody */
	cr_assert_eq(swept, 1, "b is settled all the same");
	tc_settled(&a, run, g100, g200);
	pt_cat_close(&b);
	tc_close(&a);
}

/* b and c wrote the same replica bytes (same hashes, b's publish first:
 * holder b) into step-100, which a commits; then b dies before uploading. */
static uint64_t tc_replica_save(struct pt_cat *a, struct pt_cat *b, struct pt_cat *c, uint64_t *run)
{
	*run = ts_mk(a->cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t r100;
	uint64_t g100 = ts_mkgen(a->cat, *run, "step-100", 100, true, &r100);
	tc_file(b, r100, "__0_0.distcp", 0x72, 0, 2);
	tc_file(c, r100, "__0_0.replica", 0x72, 0, 2);
	OK(cat_gen_commit(a->cat, g100, "dcp-metadata"));
	usleep((1000 * 2 + 300) * 1000);
	return g100;
}

/* F2: a's sweep finds step-100 lost (a caches none of b's chunks); c, not
 * the sweeper, then uploads its copies of the same bytes: every chunk of
 * step-100 is on BACKING, so it is COMMITTED and found by a resume again,
 * and the next sweep clears the mark and queues its manifest. */
Test(catshared, a_save_lost_with_its_node_is_committed_again_once_another_node_uploads_its_chunks)
{
	struct pt_cat a, b, c;
	pt_cat_open(&a, "f2a", 30000, NULL, NULL);
	pt_cat_open(&b, "f2b", 1000, NULL, NULL);
	pt_cat_open(&c, "f2c", 30000, NULL, NULL);
	uint64_t run;
	uint64_t g100 = tc_replica_save(&a, &b, &c, &run);
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1);
	struct cat_gen g;
	OK(cat_gen_get(a.cat, g100, &g));
	cr_assert_eq(g.state, GEN_HELD, "lost while b's chunks are nowhere else known");
	cr_assert_eq(pt_cat_upload_chunks(&c, NULL, NULL), 2, "c uploads both chunks");

	OK(cat_gen_get(a.cat, g100, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "every chunk of step-100 is on BACKING, yet it is %s",
		     cat_gen_state_name(g.state));
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.id, g100);
	uint64_t undurable = 9, ids[4];
	uint32_t versions[4];
	size_t n = 9;
	OK(pggen_undurable(cat_shared_ns(a.cat), ids, versions, 4, &n));
	cr_assert_eq(n, 0, "marked lost: no node writes its manifest yet");
	OK(pggen_not_durable(cat_shared_ns(a.cat), g100, &undurable));
	cr_assert_eq(undurable, 1, "marked lost: not durable (review 33 F4)");
	OK(cat_lease_sweep(a.cat, &swept));
	OK(pggen_not_durable(cat_shared_ns(a.cat), g100, &undurable));
	cr_assert_eq(undurable, 1, "the sweep cleared the mark: its manifest is to be written");
	OK(pggen_undurable(cat_shared_ns(a.cat), ids, versions, 4, &n));
	cr_assert(n == 1 && ids[0] == g100, "the sweep cleared the mark: its manifest is to be"
		  " written");
	pt_cat_close(&b);
	tc_close(&a);
	tc_close(&c);
}

/* X10: c caches b's chunks (the replica) but has not uploaded them yet; at
 * its own sweep c adopts them, and step-100, lost at a's, is committed
 * again: a live node holds every chunk of it. */
Test(catshared, a_live_node_that_caches_the_chunks_of_a_lost_save_adopts_them_at_its_sweep)
{
	struct pt_cat a, b, c;
	pt_cat_open(&a, "x10a", 30000, NULL, NULL);
	pt_cat_open(&b, "x10b", 1000, NULL, NULL);
	pt_cat_open(&c, "x10c", 30000, NULL, NULL);
	uint64_t run;
	uint64_t g100 = tc_replica_save(&a, &b, &c, &run);
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1);
	struct cat_gen g;
	FAILS(cat_gen_find_step(a.cat, run, 100, &g), ENOENT);

	OK(cat_lease_sweep(c.cat, &swept));
	cr_assert_eq(swept, 0, "b is settled already");
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, 0x72, 1);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(a.cat), h, &row));
	cr_assert_eq(row.holder, cat_node_id(c.cat), "c holds b's chunk now");
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	bool lost = true;
	OK(pggen_get(cat_shared_ns(a.cat), g100, &g, &lost));
	cr_assert(!lost);
	pt_cat_close(&b);
	tc_close(&a);
	tc_close(&c);
}

/* step-90 by a on BACKING; step-100 committed by b, its chunks (chunks of
 * them: 0x67, 0..) only in b's cache (its uploads still queued). */
static uint64_t tc_b_saves_unuploaded_n(struct pt_cat *a, struct pt_cat *b, uint64_t *run,
					int chunks)
{
	*run = ts_mk(a->cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t r90, r100;
	uint64_t g90 = ts_mkgen(a->cat, *run, "step-90", 90, true, &r90);
	tc_file(a, r90, "__0_0.distcp", 0x66, 0, 1);
	cr_assert_eq(pt_cat_upload_chunks(a, NULL, NULL), 1);
	OK(cat_gen_commit(a->cat, g90, "dcp-metadata"));
	uint64_t g100 = ts_mkgen(b->cat, *run, "step-100", 100, true, &r100);
	tc_file(b, r100, "__0_0.distcp", 0x67, 0, chunks);
	OK(cat_gen_commit(b->cat, g100, "dcp-metadata"));
	return g100;
}

static uint64_t tc_b_saves_unuploaded(struct pt_cat *a, struct pt_cat *b, uint64_t *run)
{
	return tc_b_saves_unuploaded_n(a, b, run, 2);
}

/* F6: b unmounts with its uploads left queued (fs/main.c: uploader_stop
 * leaves them for the next mount). Its row is not 'gone' but expired,
 * settled by a's sweep like a dead node's: step-100, whose chunks only b's
 * cache holds, is lost and hidden from a resume, not offered to one that
 * would wait backing_timeout, then EIO, on every read. */
Test(catshared, a_node_that_unmounts_with_uploads_queued_is_settled_like_a_dead_one)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "f6a", 30000, NULL, NULL);
	pt_cat_open(&b, "f6b", 1000, NULL, NULL);
	uint64_t run;
	uint64_t g100 = tc_b_saves_unuploaded(&a, &b, &run);
	uint64_t bid = cat_node_id(b.cat);
	pt_cat_close(&b);
	char state[16];
	tc_node_state(&a, bid, state, sizeof(state));
	cr_assert_str_eq(state, "expired", "b left holding chunks not on BACKING");
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1, "a settles b at once: no lease to wait for");
	struct cat_gen g;
	FAILS(cat_gen_find_step(a.cat, run, 100, &g), ENOENT);
	OK(cat_gen_get(a.cat, g100, &g));
	cr_assert_eq(g.state, GEN_HELD, "lost (shown held), kept: %s", cat_gen_state_name(g.state));
	OK(cat_gen_find_step(a.cat, run, 90, &g));
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 0, "settled once");
	tc_close(&a);
}

/* F6, the way back (X10): b mounts the same cache again (a new node) and
 * its queued uploads finish: step-100 names no missing chunk any more and
 * is COMMITTED again, found by a resume; the next sweep clears the mark. */
Test(catshared, a_save_lost_when_its_node_left_is_committed_again_once_that_cache_uploads)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "f6ra", 30000, NULL, NULL);
	pt_cat_open(&b, "f6rb", 30000, NULL, NULL);
	uint64_t run;
	uint64_t g100 = tc_b_saves_unuploaded(&a, &b, &run);
	uint64_t bid = cat_node_id(b.cat);
	pt_cat_reopen(&b, "f6rb", 30000, NULL, NULL);
	cr_assert_neq(cat_node_id(b.cat), bid);
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1, "a settles the node b was");
	struct cat_gen g;
	FAILS(cat_gen_find_step(a.cat, run, 100, &g), ENOENT);

	cr_assert_eq(pt_cat_upload_chunks(&b, NULL, NULL), 2, "b's queue survived its unmount");
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.id, g100);
	cr_assert_eq(g.state, GEN_COMMITTED);
	OK(cat_lease_sweep(a.cat, &swept));
	bool lost = true;
	OK(pggen_get(cat_shared_ns(a.cat), g100, &g, &lost));
	cr_assert(!lost, "the sweep cleared the mark");
	uint64_t bid2 = cat_node_id(b.cat);
	tc_close(&b);
	char state[16];
	tc_node_state(&a, bid2, state, sizeof(state));
	cr_assert_str_eq(state, "gone", "everything uploaded: b leaves for good");
	tc_close(&a);
}

/* ---- X11: chunks of a lost save whose object BACKING has whole ---- */

/* A BACKING check (cat_backing_check_fn) that answers from a table: chunk
 * ts_hash(fill, seed) is damaged for seed == damaged, absent for seed ==
 * absent, else whole; the calls are counted. */
struct tc_check {
	uint8_t fill;
	int damaged, absent;
	int calls;
};

static int tc_check_fn(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
		       const char **why)
{
	struct tc_check *c = arg;
	c->calls++;
	cr_assert_eq(plain_len, TC_LEN, "the row's plain length is what the check verifies");
	for (int seed = 0; seed < 64; seed++) {
		uint8_t h[CAT_HASH_LEN];
		ts_hash(h, c->fill, seed);
		if (memcmp(h, hash, CAT_HASH_LEN) != 0)
			continue;
		if (seed == c->damaged) {
			*why = "SHA-256 mismatch";
			return -EIO;
		}
		return seed == c->absent ? 0 : 1;
	}
	cr_assert_fail("a chunk not of the lost save was looked for on BACKING");
	return 0;
}

static bool tc_uploaded(struct pt_cat *n, uint8_t fill, int seed)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, fill, seed);
	struct pgns_chunk_row row;
	OK(pgns_chunk_get(cat_shared_ns(n->cat), h, &row));
	return row.uploaded;
}

/* a and b open as tag-a and tag-b; b saves step-100 (chunks of it) as
 * tc_b_saves_unuploaded_n and leaves with its uploads queued. */
static uint64_t tc_b_left(struct pt_cat *a, const char *tag, int chunks, uint64_t *run)
{
	char name[32];
	struct pt_cat b;
	snprintf(name, sizeof(name), "%s-a", tag);
	pt_cat_open(a, name, 30000, NULL, NULL);
	snprintf(name, sizeof(name), "%s-b", tag);
	pt_cat_open(&b, name, 1000, NULL, NULL);
	uint64_t g100 = tc_b_saves_unuploaded_n(a, &b, run, chunks);
	pt_cat_close(&b);
	return g100;
}

/* b committed step-100 and left with its uploads queued; its objects are on
 * BACKING whole all the same (b put them there, then died before it marked
 * them): a's sweep with a BACKING check marks them uploaded, so step-100 is
 * COMMITTED again, found by a resume, its manifest to be written. */
Test(catshared, a_lost_save_whose_objects_are_whole_on_backing_is_found_whole_by_the_sweep)
{
	struct pt_cat a;
	uint64_t run;
	uint64_t g100 = tc_b_left(&a, "x11", 2, &run);
	struct tc_check chk = { .fill = 0x67, .damaged = -1, .absent = -1 };
	size_t swept = 0;
	OK(cat_lease_sweep_backing(a.cat, tc_check_fn, &chk, &swept));
	cr_assert_eq(swept, 1);
	cr_assert_eq(chk.calls, 2, "each chunk of step-100 looked for once: %d", chk.calls);
	cr_assert(tc_uploaded(&a, 0x67, 0) && tc_uploaded(&a, 0x67, 1));
	struct cat_gen g;
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.id, g100);
	cr_assert_eq(g.state, GEN_COMMITTED);
	bool lost = true;
	OK(pggen_get(cat_shared_ns(a.cat), g100, &g, &lost));
	cr_assert(!lost, "the same sweep cleared the mark");
	uint64_t undurable = 0;
	OK(pggen_not_durable(cat_shared_ns(a.cat), g100, &undurable));
	cr_assert_eq(undurable, 1, "its manifest is to be written");
	chk.calls = 0;
	OK(cat_lease_sweep_backing(a.cat, tc_check_fn, &chk, &swept));
	cr_assert_eq(chk.calls, 0, "nothing lost is left to look for");
	tc_close(&a);
}

/* One object of step-100 on BACKING is damaged (or absent): it is not
 * counted as uploaded, so step-100 stays lost, hidden from a resume; the
 * whole one is marked (it is on BACKING). */
static void tc_lost_stays_lost(bool damaged)
{
	struct pt_cat a;
	uint64_t run;
	uint64_t g100 = tc_b_left(&a, damaged ? "x11d" : "x11m", 2, &run);
	struct tc_check chk = { .fill = 0x67, .damaged = damaged ? 1 : -1,
				.absent = damaged ? -1 : 1 };
	size_t swept = 0;
	OK(cat_lease_sweep_backing(a.cat, tc_check_fn, &chk, &swept));
	OK(cat_lease_sweep_backing(a.cat, tc_check_fn, &chk, &swept));
	/* the second sweep looks again at an absent one, not at a damaged one */
	cr_assert_eq(chk.calls, damaged ? 2 : 3, "objects read by two sweeps: %d", chk.calls);
	cr_assert(tc_uploaded(&a, 0x67, 0));
	cr_assert(!tc_uploaded(&a, 0x67, 1), "a %s object counted as uploaded",
		  damaged ? "damaged" : "absent");
	struct cat_gen g;
	FAILS(cat_gen_find_step(a.cat, run, 100, &g), ENOENT);
	bool lost = false;
	OK(pggen_get(cat_shared_ns(a.cat), g100, &g, &lost));
	cr_assert(lost);
	tc_close(&a);
}

Test(catshared, a_lost_save_with_a_damaged_object_on_backing_stays_lost)
{
	tc_lost_stays_lost(true);
}

Test(catshared, a_lost_save_with_an_object_absent_from_backing_stays_lost)
{
	tc_lost_stays_lost(false);
}

/* The look on BACKING is bounded: a lost save of 20 chunks is looked at 8
 * objects a sweep, round robin, and found whole after three sweeps. */
Test(catshared, a_sweep_reads_a_bounded_batch_of_objects_from_backing)
{
	struct pt_cat a;
	uint64_t run;
	uint64_t g100 = tc_b_left(&a, "x11b", 20, &run);
	struct tc_check chk = { .fill = 0x67, .damaged = -1, .absent = -1 };
	size_t swept = 0;
	struct cat_gen g;
	int calls[3];
	for (int i = 0; i < 3; i++) {
		chk.calls = 0;
		OK(cat_lease_sweep_backing(a.cat, tc_check_fn, &chk, &swept));
		calls[i] = chk.calls;
		if (i < 2) /* some of its chunks not looked for yet */
			FAILS(cat_gen_find_step(a.cat, run, 100, &g), ENOENT);
	}
	cr_assert(calls[0] == 8 && calls[1] == 8 && calls[2] == 4, "objects read a sweep: %d %d %d",
		  calls[0], calls[1], calls[2]);
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.id, g100);
	tc_close(&a);
}

/* F9: an OPEN save marked lost (b died with a closed shard not uploaded)
 * whose shard the live ranks write again through a, every chunk then on
 * BACKING, is committed at its completion signal (X10: a commit refused as
 * lost re-checks first). */
Test(catshared, an_open_save_marked_lost_is_committed_once_its_lost_shard_is_rewritten)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "f9a", 30000, NULL, NULL);
	pt_cat_open(&b, "f9b", 1000, NULL, NULL);
	uint64_t run = ts_mk(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t r100;
	uint64_t g100 = ts_mkgen(a.cat, run, "step-100", 100, true, &r100);
	tc_file(&a, r100, "__0_0.distcp", 0x68, 0, 1);
	uint64_t f1 = tc_file(&b, r100, "__1_0.distcp", 0x69, 0, 2); /* closed, not uploaded */
	usleep((1000 * 2 + 300) * 1000);
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept)); /* b had nothing open: step-100 stays OPEN, lost */
	cr_assert_eq(swept, 1);
	bool lost = false;
	struct cat_gen g;
	OK(pggen_get(cat_shared_ns(a.cat), g100, &g, &lost));
	cr_assert(lost && g.state == GEN_OPEN, "OPEN, lost: %s", cat_gen_state_name(g.state));
	OK(cat_writing(a.cat, f1, true));
	ts_write_chunks(a.cat, f1, 0x6a, 0, 2, TC_LEN, NULL, NULL);
	OK(cat_writing(a.cat, f1, false));
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 3, "every chunk of step-100 on BACKING");
	int rc = cat_gen_commit(a.cat, g100, "dcp-metadata");
	cr_assert_eq(rc, 0, "step-100 names no lost chunk any more: %s", strerror(-rc));
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	pt_cat_close(&b);
	tc_close(&a);
}

/* lease.h L10, catalog_shared.c S17: a catalog opened under its cache's lock
 * (cache_locked: the daemon's) records its cache id; opened again on the
 * same cache (a daemon killed -9 and restarted at once), it expires and
 * settles the earlier node before cat_open_shared returns, as a sweep
 * would, though that node's lease has 30 s left: its open save held, its
 * writing row gone, its chunks not uploaded adopted by the new node (the
 * same cache has them), so its committed save is not lost. A node of
 * another cache is untouched. */
static void tc_open_locked_store(struct pt_cat *n, const char *name, bool fresh,
				 struct store *store)
{
	if (fresh) {
		ts_tmpdir_make(n->dir, sizeof(n->dir), name);
		snprintf(n->path, sizeof(n->path), "%s/catalog.db", n->dir);
	}
	char lock[sizeof(n->dir) + 8];
	snprintf(lock, sizeof(lock), "%s/lock", n->dir); /* S19: its inode is the cache's */
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0, "%s: %s", lock, strerror(errno));
	struct cat_shared_cfg cfg = { .url = pt_url, .node_name = name, .lease_ms = 30000,
				      .timeout_ms = 5000, .cache_locked = true, .cache_lock_fd = fd,
				      .cache_store = store };
	char err[512] = "";
	int rc = cat_open_shared(n->path, &cfg, 0, 0, NULL, NULL, &n->cat, err, sizeof(err));
	close(fd);
	cr_assert_eq(rc, 0, "cat_open_shared: %d %s", rc, err);
}

static void tc_open_locked(struct pt_cat *n, const char *name, bool fresh)
{
	tc_open_locked_store(n, name, fresh, NULL);
}

Test(catshared, a_cache_opened_again_under_its_lock_settles_its_earlier_node_at_once)
{
	struct pt_cat a, b, b2;
	tc_open_locked(&a, "l10a", true);
	tc_open_locked(&b, "l10b", true);
	uint64_t run = ts_mk(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t r100, r200;
	uint64_t g100 = ts_mkgen(b.cat, run, "step-100", 100, true, &r100);
	tc_file(&b, r100, "__0_0.distcp", 0x71, 0, 2); /* not uploaded: only b's cache */
	OK(cat_gen_commit(b.cat, g100, "dcp-metadata"));
	uint64_t g200 = ts_mkgen(a.cat, run, "step-200", 200, true, &r200);
	uint64_t f1 = ts_mk(b.cat, r200, "__1_0.distcp", S_IFREG | 0644, NULL);
	OK(cat_writing(b.cat, f1, true));
	uint64_t old = cat_node_id(b.cat), ida = cat_node_id(a.cat);
	/* b's daemon dies (its catalog is left as it is) and the cache is
	 * mounted again at once */
	memcpy(&b2, &b, sizeof(b2));
	tc_open_locked(&b2, "l10b", false);
	char state[16];
	tc_node_state(&a, old, state, sizeof(state));
	cr_assert_str_eq(state, "expired", "the earlier node of b's cache, at once");
	tc_node_state(&a, ida, state, sizeof(state));
	cr_assert_str_eq(state, "live", "a node of another cache");
	FAILS(cat_lease_renew(b.cat), ESTALE);
	struct cat_gen g;
	OK(cat_gen_get(a.cat, g200, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-200 with b's file open: %s", cat_gen_state_name(g.state));
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "step-100's chunks adopted by the same cache's new node");
	size_t swept = 9;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 0, "settled at mount, once");
	cat_close(b.cat); /* the dead incarnation's handle: its release changes nothing */
	tc_node_state(&a, cat_node_id(b2.cat), state, sizeof(state));
	cr_assert_str_eq(state, "live");
	tc_close(&b2);
	tc_close(&a);
}

/* catalog_shared.c S20 (multinode t_keep2): b left with step-10 only in its
 * cache (uploads queued, lease.h L9), settled by a's sweep: lost. c then
 * left the same way with the newer step-20, expired and not settled. b's
 * cache opened again takes back and adopts step-10's chunks at mount; it
 * settles c first, so step-20 is lost before step-10 is whole (else a keep
 * pass would count step-20 as newer and end step-10 for it), and step-10's
 * mark is cleared at mount, its manifest to be written. */
Test(catshared, a_cache_opened_again_settles_the_expired_nodes_before_its_take_back)
{
	struct pt_cat a, b, c;
	tc_open_locked(&a, "s19a", true);
	tc_open_locked(&b, "s19b", true);
	uint64_t run = ts_mk(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t r10, r20;
	uint64_t g10 = ts_mkgen(b.cat, run, "step-10", 10, true, &r10);
	tc_file(&b, r10, "__0_0.distcp", 0x73, 0, 2); /* not uploaded: only b's cache */
	OK(cat_gen_commit(b.cat, g10, "dcp-metadata"));
	cat_close(b.cat); /* its catalog kept, its uploads left queued */
	b.cat = NULL;
	size_t swept = 0;
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 1, "a settles the node b was");
	struct cat_gen g;
	OK(cat_gen_get(a.cat, g10, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-10, b away: %s", cat_gen_state_name(g.state));
	tc_open_locked(&c, "s19c", true);
	uint64_t g20 = ts_mkgen(c.cat, run, "step-20", 20, true, &r20);
	tc_file(&c, r20, "__0_0.distcp", 0x74, 0, 2);
	OK(cat_gen_commit(c.cat, g20, "dcp-metadata"));
	uint64_t cid = cat_node_id(c.cat);
	pt_cat_close(&c);
	char state[16];
	tc_node_state(&a, cid, state, sizeof(state));
	cr_assert_str_eq(state, "expired", "c left holding chunks not on BACKING");
	OK(cat_gen_get(a.cat, g20, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "step-20 before any sweep: %s",
		     cat_gen_state_name(g.state));

	tc_open_locked(&b, "s19b", false);
	OK(cat_gen_get(a.cat, g20, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-20, c settled at b's mount before the take-back: %s",
		     cat_gen_state_name(g.state));
	OK(cat_gen_find_step(a.cat, run, 10, &g));
	cr_assert(g.id == g10 && g.state == GEN_COMMITTED, "step-10, taken back: %s",
		  cat_gen_state_name(g.state));
	uint64_t ids[4];
	uint32_t versions[4];
	size_t n = 9;
	OK(pggen_undurable(cat_shared_ns(a.cat), ids, versions, 4, &n));
	cr_assert(n == 1 && ids[0] == g10, "step-10's mark cleared at mount (%zu undurable)", n);
	OK(cat_lease_sweep(a.cat, &swept));
	cr_assert_eq(swept, 0, "c settled once, at b's mount");
	tc_close(&b);
	tc_close(&a);
}

/* catalog_shared.c S18 (review 47 F4): the earlier daemon of b's cache wrote
 * step-100 and step-110 into its cache's store and committed them, not
 * uploaded; its local catalog then forgot every chunk row and upload (its
 * WAL lost with a crash). Opened again under the cache's lock with the
 * store, the new node takes back the objects that pass SHA-256 (cached,
 * dirty, their uploads queued) and adopts them before it settles the dead
 * one: step-100 is never lost, and its chunks upload. Of step-110 one object
 * is damaged and one absent: neither is taken back, the save is lost
 * (HELD), and the damaged object stays where it is. */
struct tc_hashes {
	uint8_t h[4][CAT_HASH_LEN];
};

static void tc_keep_hash(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	struct tc_hashes *t = arg;
	if (k < 4)
		memcpy(t->h[k], hash, CAT_HASH_LEN);
}

/* A committed save step of n's, two chunks of seed in store; their hashes in t. */
static uint64_t tc_stored_save(struct pt_cat *n, struct store *store, uint64_t run,
			       const char *name, uint64_t step, int seed, struct tc_hashes *t)
{
	uint64_t root;
	uint64_t g = ts_mkgen(n->cat, run, name, step, true, &root);
	uint64_t f = ts_mk(n->cat, root, "__0_0.distcp", S_IFREG | 0644, NULL);
	OK(cat_writing(n->cat, f, true));
	ts_store_file(n->cat, store, f, seed, 2, 5000, tc_keep_hash, t);
	OK(cat_writing(n->cat, f, false));
	OK(cat_gen_commit(n->cat, g, "dcp-metadata"));
	return g;
}

/* n's local catalog forgets its chunk rows and its queue, as a rollback
 * to before them would (another connection: n's handle is left open). */
static void tc_forget_chunks(const struct pt_cat *n)
{
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(n->path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "DELETE FROM chunks; DELETE FROM uploads;", NULL, NULL, NULL),
		     SQLITE_OK, "%s", sqlite3_errmsg(db));
	sqlite3_close(db);
}

Test(catshared, a_cache_whose_catalog_forgot_its_dirty_chunks_takes_them_back_at_its_next_open)
{
	struct pt_cat a, b, b2;
	struct store *store;
	struct tc_hashes h100, h110;
	tc_open_locked(&a, "s18a", true);
	tc_open_locked(&b, "s18b", true);
	OK(store_open(b.dir, &store));
	uint64_t run = ts_mk(a.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t g100 = tc_stored_save(&b, store, run, "step-100", 100, 1800, &h100);
	uint64_t g110 = tc_stored_save(&b, store, run, "step-110", 110, 1900, &h110);
	char obj[PATH_MAX];
	store_object_path(store, h110.h[0], obj, sizeof(obj));
	FILE *f = fopen(obj, "r+b");
	cr_assert_not_null(f, "%s", obj);
	cr_assert_eq(fseek(f, STORE_HEADER_LEN + 100, SEEK_SET), 0);
	int c = fgetc(f);
	cr_assert_eq(fseek(f, STORE_HEADER_LEN + 100, SEEK_SET), 0);
	fputc(c ^ 0x5a, f);
	cr_assert_eq(fclose(f), 0);
	OK(store_remove(store, h110.h[1]));
	tc_forget_chunks(&b);
	uint64_t old = cat_node_id(b.cat);
	memcpy(&b2, &b, sizeof(b2));
	tc_open_locked_store(&b2, "s18b", false, store);
	struct cat_gen g;
	OK(cat_gen_find_step(a.cat, run, 100, &g));
	cr_assert(g.id == g100 && g.state == GEN_COMMITTED, "step-100, whole in b's cache: %s",
		  cat_gen_state_name(g.state));
	OK(cat_gen_get(a.cat, g110, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-110, one object damaged, one absent: %s",
		     cat_gen_state_name(g.state));
	cr_assert_eq(pt_cat_local_rows(&b2, "chunks", "cached = 1 AND uploaded = 0"), 2,
		     "step-100's chunks taken back, dirty; none of step-110's");
	cr_assert_eq(pt_cat_local_rows(&b2, "uploads", "kind = 1"), 2, "their uploads queued");
	struct stat sb;
	cr_assert_eq(stat(obj, &sb), 0, "the damaged object is left where it is");
	uint8_t (*held)[CAT_HASH_LEN] = calloc(8, CAT_HASH_LEN);
	size_t n = 9;
	OK(pgns_unuploaded_of(cat_shared_ns(a.cat), cat_node_id(b2.cat), NULL, held, 8, &n));
	cr_assert_eq(n, 2, "the new node holds step-100's chunks");
	OK(pgns_unuploaded_of(cat_shared_ns(a.cat), old, NULL, held, 8, &n));
	cr_assert_eq(n, 2, "step-110's stay the dead node's");
	free(held);
	cr_assert_eq(pt_cat_upload_chunks(&b2, NULL, NULL), 2, "b2 uploads step-100's chunks");
	cat_close(b.cat); /* the dead incarnation's handle */
	store_close(store);
	tc_close(&b2);
	tc_close(&a);
}
