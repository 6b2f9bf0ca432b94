/* Unit tests for the tree manifest of the shared engine (manifest_shared.h
 * D4): nodes A and B are two struct cat opened with cat_open_shared on one
 * private PostgreSQL (tests/unit/pgtest.h).
 *
 * A writes run/latest (a file) and a symlink, B a file beside them and a
 * generation in a series under run; the tree manifest built from
 * PostgreSQL waits for every chunk those files name to be uploaded, holds
 * what both nodes wrote outside generations and nothing of the generation,
 * and, applied into a fresh (emptied) database, gives back the same names,
 * modes, owners, symlink target, sizes and extents, and the same manifest
 * byte for byte. The fingerprint changes with a name, an attribute or a
 * file's contents outside generations, and not with a generation's files.
 *
 * The writer (fs/uploader.c T1-T3), two uploaders on one BACKING: one tree
 * manifest, written by one node, named above the root-only ones nodes wrote
 * before (one named by a clock an hour ahead), which are gone once it is
 * there; a change makes one newer and removes the older; the drains write
 * the last change and leave the duty free. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <libpq-fe.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "manifest.h"
#include "manifest_shared.h"
#include "pgns.h"
#include "pgtest.h"
#include "store.h"
#include "support.h"
#include "uploader.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define MT_LEN 1000

/* The shared catalog's tables dropped: a fresh database. */
static void mt_drop_all(void)
{
	PGconn *c = PQconnectdb(pt_url);
	cr_assert_eq(PQstatus(c), CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, "SET client_min_messages = warning; DO $$ DECLARE t text; BEGIN FOR t"
			     " IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' LOOP"
			     " EXECUTE 'DROP TABLE ' || quote_ident(t) || ' CASCADE'; END LOOP; END $$;"
			     " DROP SEQUENCE IF EXISTS ns_ino_seq;");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
}

/* path's inode on n (components '/'-separated from the root). */
static int mt_lookup(struct pt_cat *n, const char *path, struct cat_inode *in)
{
	char buf[256], *save = NULL;
	int rc = cat_getattr(n->cat, ROOT, in);
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *t = strtok_r(buf, "/", &save); rc == 0 && t; t = strtok_r(NULL, "/", &save))
		rc = cat_lookup(n->cat, in->ino, t, in);
	return rc;
}

/* The local id of the inode named path in m, or -1. */
static int64_t mt_find(const struct manifest *m, const char *path)
{
	char buf[256];
	for (size_t i = 1; i < m->n_inodes; i++) {
		manifest_inode_path(m, i, buf, sizeof(buf));
		if (strcmp(buf, path) == 0)
			return (int64_t)i;
	}
	return -1;
}

static void mt_fp(struct pt_cat *n, char *fp, size_t size, bool *all_uploaded)
{
	int64_t clock_ns = 0;
	OK(manifest_shared_tree_fingerprint(n->cat, fp, size, all_uploaded, &clock_ns));
	cr_assert_gt(clock_ns, 0, "the server's clock");
}

/* What a file outside generations is, to compare across the rebuild. */
struct mt_file {
	const char *path;
	struct cat_inode in;
	struct cat_extent x[8];
	int n;
};

static void mt_file_read(struct pt_cat *n, struct mt_file *f)
{
	OK(mt_lookup(n, f->path, &f->in));
	f->n = S_ISREG(f->in.mode) ? cat_extents(n->cat, f->in.ino, 0, f->x, 8) : 0;
	cr_assert_geq(f->n, 0);
}

static void mt_file_same(struct pt_cat *n, const struct mt_file *before)
{
	struct mt_file after = { .path = before->path };
	mt_file_read(n, &after);
	const struct cat_inode *a = &after.in, *b = &before->in;
	cr_assert_eq(a->mode, b->mode, "%s: mode %o, was %o", before->path, a->mode, b->mode);
	cr_assert_eq(a->uid, b->uid, "%s", before->path);
	cr_assert_eq(a->gid, b->gid, "%s", before->path);
	cr_assert_eq(a->size, b->size, "%s", before->path);
	cr_assert_eq(a->mtime_ns, b->mtime_ns, "%s", before->path);
	cr_assert_eq(after.n, before->n, "%s: %d extents, was %d", before->path, after.n, before->n);
	for (int i = 0; i < before->n; i++) {
		cr_assert_eq(after.x[i].off, before->x[i].off);
		cr_assert_eq(after.x[i].len, before->x[i].len);
		cr_assert_eq(after.x[i].chunk_off, before->x[i].chunk_off);
		cr_assert_eq(memcmp(after.x[i].hash, before->x[i].hash, CAT_HASH_LEN), 0);
	}
}

TestSuite(manifest_shared_tree, .init = pt_start, .fini = pt_stop, .timeout = 120);

Test(manifest_shared_tree, built_from_both_nodes_and_applied_into_an_empty_database_gives_the_same_tree)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "mta", 30000, NULL, NULL);
	pt_cat_open(&b, "mtb", 30000, NULL, NULL);
	char fp0[128], fp[128];
	bool all = false;
	mt_fp(&a, fp0, sizeof(fp0), &all);
	cr_assert(all, "an empty tree names no chunk");

	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0750, NULL);
	uint64_t latest = ts_mk(a.cat, run, "latest", S_IFREG | 0644, NULL);
	ts_write_chunks(a.cat, latest, 0x41, 0, 2, MT_LEN, NULL, NULL);
	ts_mk(a.cat, run, "last-ckpt", S_IFLNK | 0777, "ckpt/step-7");
	uint64_t notes = ts_mk(b.cat, run, "notes.txt", S_IFREG | 0600, NULL);
	ts_write_chunks(b.cat, notes, 0x42, 0, 1, MT_LEN, NULL, NULL);
	uint64_t series = ts_mk(b.cat, run, "ckpt", S_IFDIR | 0700, NULL);
	uint64_t groot;
	uint64_t gen = ts_mkgen(b.cat, series, "step-7", 7, true, &groot);
	uint64_t shard = ts_mk(b.cat, groot, "rank0.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(b.cat, shard, 0x43, 0, 3, MT_LEN, NULL, NULL);
	OK(cat_gen_commit(b.cat, gen, "test"));

	/* D4: not before every chunk outside generations is on BACKING */
	mt_fp(&b, fp, sizeof(fp), &all);
	cr_assert_str_neq(fp, fp0, "the fingerprint did not change with the files outside generations");
	cr_assert_not(all, "all uploaded before any upload");
	char *text = NULL, built_fp[128];
	size_t len = 0;
	int64_t now_ns = 0;
	cr_assert_eq(manifest_shared_tree_build(a.cat, &text, &len, built_fp, sizeof(built_fp), &now_ns),
		     -EAGAIN);
	cr_assert_eq(pt_cat_upload_chunks(&a, NULL, NULL), 2);
	cr_assert_eq(manifest_shared_tree_build(a.cat, &text, &len, built_fp, sizeof(built_fp), &now_ns),
		     -EAGAIN, "built while B's chunk of notes.txt is not uploaded");
	cr_assert_eq(pt_cat_upload_chunks(&b, NULL, NULL), 4);

	/* the generation's files do not change the fingerprint */
	char fp_before_gen[128];
	mt_fp(&a, fp_before_gen, sizeof(fp_before_gen), &all);
	cr_assert(all);
	OK(manifest_shared_tree_build(a.cat, &text, &len, built_fp, sizeof(built_fp), &now_ns));
	cr_assert_str_eq(built_fp, fp_before_gen, "the build's snapshot and the fingerprint differ");
	cr_assert_gt(now_ns, ts_now_ns() - 60 * 1000000000LL, "the server's clock");

	char err[MANIFEST_ERR_MAX];
	struct manifest *m = NULL;
	cr_assert_eq(manifest_parse(text, len, &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(m->kind, MANIFEST_TREE);
	cr_assert_eq(m->n_inodes, 6, "root, run, latest, last-ckpt, notes.txt, ckpt: %zu", m->n_inodes);
	cr_assert_geq(mt_find(m, "run/latest"), 0);
	cr_assert_geq(mt_find(m, "run/notes.txt"), 0);
	cr_assert_geq(mt_find(m, "run/last-ckpt"), 0);
	cr_assert_geq(mt_find(m, "run/ckpt"), 0);
	cr_assert_eq(mt_find(m, "run/ckpt/step-7"), -1, "the generation's root is in the tree manifest");
	cr_assert_eq(m->n_chunks, 3, "latest's two chunks and notes.txt's one");
	cr_assert_eq(m->files, 2);

	struct mt_file files[] = { { .path = "run" },	    { .path = "run/latest" },
				   { .path = "run/last-ckpt" }, { .path = "run/notes.txt" },
				   { .path = "run/ckpt" } };
	size_t nf = sizeof(files) / sizeof(files[0]);
	for (size_t i = 0; i < nf; i++)
		mt_file_read(&a, &files[i]);
	cr_assert_eq(files[1].n, 2);
	pt_cat_close(&b);
	pt_cat_close(&a);

	/* the database is lost: a fresh one refilled from the tree manifest */
	mt_drop_all();
	struct pt_cat c;
	pt_cat_open(&c, "mtc", 30000, NULL, NULL);
	char why[256];
	OK(manifest_shared_empty(c.cat, why, sizeof(why)));
	cr_assert_eq(manifest_apply_parsed(c.cat, m, err, sizeof(err)), 0, "%s", err);
	int violations = -1;
	OK(pgns_check(cat_shared_ns(c.cat), &violations));
	cr_assert_eq(violations, 0);
	for (size_t i = 0; i < nf; i++)
		mt_file_same(&c, &files[i]);
	char target[64] = "";
	struct cat_inode link;
	OK(mt_lookup(&c, "run/last-ckpt", &link));
	OK(cat_readlink(c.cat, link.ino, target, sizeof(target)));
	cr_assert_str_eq(target, "ckpt/step-7");
	struct cat_inode gone;
	cr_assert_eq(mt_lookup(&c, "run/ckpt/step-7", &gone), -ENOENT);

	/* the tree manifest built again from the rebuilt tables: the same bytes */
	char *again = NULL;
	size_t again_len = 0;
	OK(manifest_shared_tree_build(c.cat, &again, &again_len, built_fp, sizeof(built_fp), &now_ns));
	cr_assert_eq(again_len, len);
	cr_assert_eq(memcmp(again, text, len), 0, "%s\n----\n%s", text, again);
	free(again);

	/* a change outside generations changes the fingerprint: a rename, a mode */
	mt_fp(&c, fp0, sizeof(fp0), &all);
	struct cat_inode run_in;
	OK(mt_lookup(&c, "run", &run_in));
	uint64_t replaced = 0;
	OK(cat_rename(c.cat, run_in.ino, "notes.txt", run_in.ino, "notes.old", 0, &replaced));
	mt_fp(&c, fp, sizeof(fp), &all);
	cr_assert_str_neq(fp, fp0, "a rename outside generations left the fingerprint alone");
	manifest_free(m);
	free(text);
	pt_cat_close(&c);
}

/* ---- the writer: fs/uploader.c's shared tree part (T1-T3) ---- */

#define MT_SEQ_MAX 16

struct mt_seqs {
	uint64_t seq[MT_SEQ_MAX];
	int n;
};

static int mt_seq_fn(void *arg, const char *name)
{
	struct mt_seqs *l = arg;
	uint64_t seq;
	if (manifest_tree_name_parse(name, &seq) == 0 && l->n < MT_SEQ_MAX)
		l->seq[l->n++] = seq;
	return 0;
}

static struct mt_seqs mt_tree_list(struct backing *bk)
{
	struct mt_seqs l = { .n = 0 };
	int rc = backing_list(bk, "manifests/tree", mt_seq_fn, &l);
	cr_assert(rc == 0 || rc == -ENOENT, "list manifests/tree: %d", rc);
	return l;
}

/* Whether the one tree manifest on bk names every one of names (escaped
 * names are plain here); *seq gets its seq. */
static bool mt_one_naming(struct backing *bk, const char *const *names, int n, uint64_t *seq)
{
	struct mt_seqs l = mt_tree_list(bk);
	if (l.n != 1)
		return false;
	char path[MANIFEST_PATH_MAX], buf[8192];
	size_t len = 0;
	manifest_tree_path(l.seq[0], path, sizeof(path));
	if (backing_get(bk, path, buf, sizeof(buf) - 1, &len) != 0)
		return false;
	buf[len] = 0;
	for (int i = 0; i < n; i++)
		if (strstr(buf, names[i]) == NULL)
			return false;
	*seq = l.seq[0];
	return true;
}

static void mt_until_one_naming(struct backing *bk, const char *const *names, int n, uint64_t *seq)
{
	for (int i = 0; i < 200 && !mt_one_naming(bk, names, n, seq); i++)
		usleep(50 * 1000);
	struct mt_seqs l = mt_tree_list(bk);
	cr_assert(mt_one_naming(bk, names, n, seq),
		  "not one tree manifest naming %s.. within 10 s (%d on BACKING)", names[0], l.n);
}

static void mt_uploader(struct pt_cat *n, struct store *st, struct backing *bk, struct uploader **u)
{
	struct uploader_config cfg = { .threads = 1, .deadline_s = 600, .chunk_max = 256u << 10 };
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", n->dir);
	OK(uploader_start(&cfg, n->cat, st, bk, NULL, NULL, NULL, u));
}

Test(manifest_shared_tree, one_node_writes_it_above_every_seq_and_removes_the_older_once_it_is_there)
{
	struct pt_cat a, b;
	pt_cat_open(&a, "mwa", 30000, NULL, NULL);
	pt_cat_open(&b, "mwb", 30000, NULL, NULL);
	char dir[64], bdir[96];
	ts_tmpdir_make(dir, sizeof(dir), "mtback");
	snprintf(bdir, sizeof(bdir), "%s/backing", dir);
	cr_assert_eq(mkdir(bdir, 0700), 0);
	struct backing *bk;
	struct store *sa, *sb;
	OK(backing_open(bdir, 2000, &bk));
	OK(store_open(a.dir, &sa));
	OK(store_open(b.dir, &sb));
	/* root-only tree manifests nodes wrote from their local catalogs before:
	 * one named by a clock an hour ahead, and a low one */
	char path[MANIFEST_PATH_MAX];
	uint64_t ahead = (uint64_t)ts_now_ns() + 3600ull * 1000000000ull;
	manifest_tree_path(ahead, path, sizeof(path));
	OK(backing_put(bk, path, "old", 3));
	manifest_tree_path(7, path, sizeof(path));
	OK(backing_put(bk, path, "old", 3));

	uint64_t run = ts_mk(a.cat, ROOT, "run", S_IFDIR | 0755, NULL);
	ts_mk(a.cat, run, "latest", S_IFLNK | 0777, "step-1");
	ts_mk(b.cat, run, "empty.txt", S_IFREG | 0644, NULL);
	struct uploader *ua, *ub;
	mt_uploader(&a, sa, bk, &ua);
	mt_uploader(&b, sb, bk, &ub);
	uint64_t first = 0, second = 0;
	const char *names[] = { "latest", "empty.txt", "step-1", "notes" };
	mt_until_one_naming(bk, names, 3, &first);
	cr_assert_gt(first, ahead, "seq %" PRIu64 " not above the manifest already there", first);

	/* a change on B: one newer manifest, the older one removed */
	ts_mk(b.cat, run, "notes", S_IFREG | 0600, NULL);
	mt_until_one_naming(bk, names, 4, &second);
	cr_assert_gt(second, first);
	struct uploader_stats sta, stb;
	uploader_get_stats(ua, &sta);
	uploader_get_stats(ub, &stb);
	cr_assert((sta.manifests == 0) != (stb.manifests == 0),
		  "both nodes wrote tree manifests (%" PRIu64 " and %" PRIu64 "): one holds the duty",
		  sta.manifests, stb.manifests);

	/* a change just before the unmounts: written by the drain, duty dropped */
	ts_mk(a.cat, run, "final", S_IFREG | 0600, NULL);
	uploader_stop(ua, true);
	uploader_stop(ub, true);
	const char *last[] = { "latest", "notes", "final" };
	uint64_t third = 0;
	cr_assert(mt_one_naming(bk, last, 3, &third), "the drains left no single tree manifest naming final");
	cr_assert_geq(third, second);
	PGconn *c = PQconnectdb(pt_url);
	PGresult *r = PQexec(c, "SELECT count(*) FROM ckpt_duties WHERE name = 'tree'");
	cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(c));
	cr_assert_str_eq(PQgetvalue(r, 0, 0), "0", "duty 'tree' held after both drains");
	PQclear(r);
	PQfinish(c);
	store_close(sa);
	store_close(sb);
	backing_close(bk);
	ts_tmpdir_remove(dir);
	pt_cat_close(&b);
	pt_cat_close(&a);
}
