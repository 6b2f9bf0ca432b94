/* Tests of fs/rebuild.c over a directory BACKING: manifests of a source
 * catalog are put on BACKING, a fresh catalog is rebuilt from them alone and
 * compared with the source in full; the newest readable version of each
 * generation wins (a corrupt newest one falls back), the newest readable
 * tree manifest wins, missing chunks are reported per file, a newer format
 * stops the rebuild, and rebuild_backing_has_data tells a used BACKING from
 * an empty one. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin_query.h"
#include "backing.h"
#include "catalog.h"
#include "claim.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "rebuild.h"
#include "store.h"
#include "support.h"
#include "upload.h"
#include "uploader.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define HASH_FILL 0x3c /* the fill of this file's chunk hashes (ts_hash) */

static struct fixture {
	char dir[64];
	char src_path[128], dst_path[128], backing[128];
	struct cat *src, *dst;
	struct backing *b;
} fx;

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "rb");
	snprintf(fx.backing, sizeof(fx.backing), "%s/backing", fx.dir);
	cr_assert_eq(mkdir(fx.backing, 0755), 0);
	ts_cat_open_in(fx.dir, "src.db", fx.src_path, sizeof(fx.src_path), &fx.src);
	ts_cat_open_in(fx.dir, "dst.db", fx.dst_path, sizeof(fx.dst_path), &fx.dst);
	OK(backing_open(fx.backing, 5000, &fx.b));
}

static void teardown(void)
{
	ts_cat_close_checked(&fx.src);
	ts_cat_close_checked(&fx.dst);
	backing_close(fx.b);
	fx.b = NULL;
	ts_tmpdir_remove(fx.dir);
}

/* Puts a chunk object of stored_len bytes on BACKING (its bytes do not
 * matter to a rebuild, only its name and size). */
static void put_chunk(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t stored_len)
{
	char hex[HASH_HEX_LEN + 1], path[128];
	hash_to_hex(hash, hex);
	snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
	char *obj = calloc(1, STORE_HEADER_LEN + stored_len);
	OK(backing_put(fx.b, path, obj, STORE_HEADER_LEN + stored_len));
	free(obj);
}

/* n whole chunks of len bytes, seeds seed, seed+1, …; their objects (of
 * stored length len/2 + 1) are put on BACKING too. */
static void write_chunks(uint64_t ino, int seed, int n, uint64_t len)
{
	ts_write_chunks(fx.src, ino, HASH_FILL, seed, n, len, put_chunk, NULL);
}

static void put_gen(uint64_t id, uint32_t version)
{
	char *p, path[MANIFEST_PATH_MAX];
	size_t len;
	OK(manifest_gen_build(fx.src, id, version, &p, &len));
	manifest_gen_path(id, version, path, sizeof(path));
	OK(backing_put(fx.b, path, p, len));
	free(p);
}

static void put_tree(uint64_t seq)
{
	char *p, path[MANIFEST_PATH_MAX];
	size_t len;
	OK(manifest_tree_build(fx.src, &p, &len));
	manifest_tree_path(seq, path, sizeof(path));
	OK(backing_put(fx.b, path, p, len));
	free(p);
}

/* Flips a byte in the middle of a file on BACKING. */
static void corrupt(const char *path)
{
	static char buf[1 << 20];
	size_t len;
	OK(backing_get(fx.b, path, buf, sizeof(buf), &len));
	buf[len / 2] ^= 0x20;
	OK(backing_put(fx.b, path, buf, len));
}

/* ---- rebuilds ---- */

struct progress {
	int calls;
	uint64_t done, total;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct progress *p = arg;
	cr_assert_leq(done, total);
	cr_assert(p->calls == 0 || done >= p->done, "progress goes forward");
	p->calls++;
	p->done = done;
	p->total = total;
}

/* run/ckpt with three generations (the third rewritten to version 2, both
 * versions' manifests on BACKING), a `latest` symlink and a notes file. */
static void populate(uint64_t ids[3])
{
	uint64_t run = ts_mk(fx.src, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(fx.src, run, "ckpt", S_IFDIR | 0755, NULL);
	for (int i = 0; i < 3; i++) {
		char name[32];
		uint64_t root;
		snprintf(name, sizeof(name), "step-%d", (i + 1) * 100);
		ids[i] = ts_mkgen(fx.src, series, name, (uint64_t)(i + 1) * 100, true, &root);
		uint64_t sub = ts_mk(fx.src, root, "shards", S_IFDIR | 0755, NULL);
		for (int k = 0; k < 2; k++) {
			char f[16];
			snprintf(f, sizeof(f), "rank%d.pt", k);
			uint64_t rank = ts_mk(fx.src, sub, f, S_IFREG | 0644, NULL);
			write_chunks(rank, 10 * i + 3 * k, 3, 4096);
		}
		ts_mk(fx.src, root, ".metadata", S_IFREG | 0644, NULL);
		OK(cat_gen_commit(fx.src, ids[i], "dcp-metadata"));
		put_gen(ids[i], 1);
	}
	/* version 2 of the third */
	OK(cat_gen_reopen(fx.src, ids[2]));
	struct cat_inode in;
	OK(cat_lookup(fx.src, series, "step-300", &in));
	write_chunks(ts_mk(fx.src, in.ino, "extra.pt", S_IFREG | 0644, NULL), 900, 2, 4096);
	OK(cat_gen_commit(fx.src, ids[2], "dcp-metadata"));
	put_gen(ids[2], 2);
	ts_mk(fx.src, series, "latest", S_IFLNK | 0777, "step-300");
	uint64_t notes = ts_mk(fx.src, ROOT, "notes.txt", S_IFREG | 0600, NULL);
	write_chunks(notes, 700, 1, 100);
	put_tree(1);
}

Test(rebuild, a_fresh_catalog_from_backing_alone_equals_the_source, .init = setup,
     .fini = teardown)
{
	uint64_t ids[3];
	populate(ids);
	struct rebuild_report rep;
	struct progress prog = { 0 };
	OK(rebuild_catalog(fx.b, fx.dst, REBUILD_CHECK_CHUNKS, on_progress, &prog, &rep));
	OK(cat_gen_check(fx.dst));
	ts_expect_same(fx.src, fx.dst);
	cr_assert(rep.tree_applied);
	cr_assert_eq(rep.tree_seq, 1);
	cr_assert_eq(rep.generations, 3);
	cr_assert_eq(rep.manifests_seen, 5);
	cr_assert_eq(rep.manifests_older, 1, "version 1 of the third is not applied");
	cr_assert_eq(rep.manifests_corrupt, 0);
	cr_assert_eq(rep.generations_lost, 0);
	cr_assert_eq(rep.files, 1 + 3 * 3 + 1, "notes.txt, 3 × (2 ranks + .metadata), extra.pt");
	cr_assert_eq(rep.bytes, 100 + 3 * 2 * 3 * 4096 + 2 * 4096);
	cr_assert_eq(rep.chunks_checked, 1 + 3 * 2 * 3 + 2, "distinct chunks");
	cr_assert_eq(rep.chunks_missing, 0);
	cr_assert_eq(prog.total, 4);
	cr_assert_eq(prog.done, 4);
	struct cat_gen g;
	OK(cat_gen_get(fx.dst, ids[2], &g));
	cr_assert_eq(g.version, 2);
}

Test(rebuild, a_corrupt_newest_version_falls_back_to_the_older_one, .init = setup,
     .fini = teardown)
{
	uint64_t ids[3];
	populate(ids);
	char path[MANIFEST_PATH_MAX];
	manifest_gen_path(ids[2], 2, path, sizeof(path));
	corrupt(path);
	put_tree(2);
	manifest_tree_path(2, path, sizeof(path));
	corrupt(path);
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep));
	OK(cat_gen_check(fx.dst));
	cr_assert_eq(rep.manifests_corrupt, 2);
	cr_assert_eq(rep.tree_seq, 1, "the older tree manifest");
	cr_assert_eq(rep.generations, 3);
	cr_assert_eq(rep.manifests_older, 0);
	struct cat_gen g;
	OK(cat_gen_get(fx.dst, ids[2], &g));
	cr_assert_eq(g.version, 1, "version 1 came back");
	cr_assert_eq(g.state, GEN_COMMITTED);
	struct cat_inode run, series, root, in;
	OK(cat_lookup(fx.dst, ROOT, "run", &run));
	OK(cat_lookup(fx.dst, run.ino, "ckpt", &series));
	OK(cat_lookup(fx.dst, series.ino, "step-300", &root));
	FAILS(cat_lookup(fx.dst, root.ino, "extra.pt", &in), ENOENT);

	/* every version corrupt: the generation is lost, the others come back */
	struct cat *again;
	char p2[160];
	snprintf(p2, sizeof(p2), "%s/again.db", fx.dir);
	OK(cat_open(p2, 0, 0, NULL, NULL, &again));
	manifest_gen_path(ids[2], 1, path, sizeof(path));
	corrupt(path);
	OK(rebuild_catalog(fx.b, again, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.generations, 2);
	cr_assert_eq(rep.generations_lost, 1);
	cr_assert_eq(rep.manifests_corrupt, 3);
	OK(cat_check(again));
	cat_close(again);
}

/* What populate_rejected adds to the rejected save, or to the tree. */
#define PR_CHUNKS (1u << 0)  /* model.pt: chunks 400..402, named by no other save */
#define PR_SHARED (1u << 1)  /* shared.pt: chunk 20, which step-300's rank0.pt names too */
#define PR_NO_HOLD (1u << 2) /* the tree takes step-400.rebuild-ID as well (M4 refuses) */

/* populate, then a generation run/ckpt/step-400 whose manifest a rebuild
 * rejects at its name: deleted after its manifest was put, its name reused
 * by a directory in the newest tree manifest. It holds an empty .metadata
 * and what flags add (objects on BACKING). *dump (if dump is not NULL) gets
 * ts_dump_from of its tree before the delete. Returns its id. */
static uint64_t populate_rejected(uint64_t ids[3], unsigned flags, char **dump)
{
	uint64_t root4;
	populate(ids);
	struct cat_inode run, series;
	OK(cat_lookup(fx.src, ROOT, "run", &run));
	OK(cat_lookup(fx.src, run.ino, "ckpt", &series));
	uint64_t id4 = ts_mkgen(fx.src, series.ino, "step-400", 400, true, &root4);
	ts_mk(fx.src, root4, ".metadata", S_IFREG | 0644, NULL);
	if (flags & PR_CHUNKS)
		write_chunks(ts_mk(fx.src, root4, "model.pt", S_IFREG | 0644, NULL), 400, 3, 4096);
	if (flags & PR_SHARED)
		write_chunks(ts_mk(fx.src, root4, "shared.pt", S_IFREG | 0644, NULL), 20, 1, 4096);
	OK(cat_gen_commit(fx.src, id4, "dcp-metadata"));
	put_gen(id4, 1);
	if (dump)
		*dump = ts_dump_from(fx.src, root4, "step-400", false);
	struct cat_id_vec gone = { 0 };
	OK(cat_gen_delete(fx.src, id4, "rm", cat_id_vec_add_ino, &gone));
	cat_id_vec_free(&gone);
	ts_mk(fx.src, series.ino, "step-400", S_IFDIR | 0755, NULL); /* the name, reused */
	if (flags & PR_NO_HOLD) {
		char held[64];
		snprintf(held, sizeof(held), "step-400" MANIFEST_HELD_SUFFIX "%llu",
			 (unsigned long long)id4);
		ts_mk(fx.src, series.ino, held, S_IFREG | 0644, NULL);
	}
	put_tree(2);
	return id4;
}

static void chunk_path(int seed, char *path, size_t size)
{
	uint8_t h[CAT_HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	ts_hash(h, HASH_FILL, seed);
	hash_to_hex(h, hex);
	snprintf(path, size, "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
}

/* rebuild.c invariant 7 (manifest.h M4): a save whose manifest conflicts
 * with the rebuilt catalog by its name comes back HELD under
 * step-400.rebuild-ID, its files as they were, its chunks counted. So when
 * the live save it shares a chunk with is deleted (keep-latest-k, rm), the
 * catalog's reclaim and the uploader's removal leave that chunk's object on
 * BACKING (before: its count reached zero and the object went, the rejected
 * save's manifest naming a missing chunk). Then an admin's rm ends it. */
Test(rebuild, a_rejected_save_comes_back_held_and_its_shared_chunk_stays, .init = setup,
     .fini = teardown)
{
	uint64_t ids[3];
	char *want = NULL;
	uint64_t id4 = populate_rejected(ids, PR_CHUNKS | PR_SHARED, &want);
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, REBUILD_CHECK_CHUNKS, NULL, NULL, &rep));
	cr_assert_eq(rep.manifests_rejected, 1, "its name is taken");
	cr_assert_eq(rep.generations_held, 1, "the rejected save was left out");
	cr_assert_eq(rep.generations, 3);
	cr_assert_eq(rep.generations_lost, 0);
	cr_assert_eq(rep.chunks_missing, 0);
	OK(cat_check(fx.dst));
	OK(cat_gen_check(fx.dst));

	struct cat_gen g;
	char name[64], why[256];
	OK(cat_gen_get(fx.dst, id4, &g));
	snprintf(name, sizeof(name), "step-400.rebuild-%llu", (unsigned long long)id4);
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.name, name);
	cr_assert_eq(g.step, 400);
	cr_assert_eq(g.version, 1);
	cr_assert_str_eq(g.rule, "rebuild");
	snprintf(why, sizeof(why), "rebuild: manifests/gen/%llu.1.ckm conflicts with the catalog"
		 " at run/ckpt/step-400 (line 2: \"run/ckpt/step-400\" exists in the catalog as"
		 " inode ", (unsigned long long)id4);
	cr_assert(strncmp(g.held, why, strlen(why)) == 0, "held: %s", g.held);
	struct cat_inode run, series, root, dir;
	OK(cat_lookup(fx.dst, ROOT, "run", &run));
	OK(cat_lookup(fx.dst, run.ino, "ckpt", &series));
	OK(cat_lookup(fx.dst, series.ino, name, &root));
	cr_assert_eq(root.ino, g.root);
	OK(cat_lookup(fx.dst, series.ino, "step-400", &dir));
	cr_assert_neq(dir.ino, g.root, "the tree's directory keeps its name");
	/* its files through the catalog: the same entries, attributes, extents */
	char *got = ts_dump_from(fx.dst, g.root, "step-400", false);
	cr_assert_str_eq(got, want);
	free(got);
	free(want);
	/* counted: chunk 20 by step-300 and by it, 400..402 by it alone */
	for (int seed = 400; seed <= 403; seed++) {
		uint8_t h[CAT_HASH_LEN];
		struct cat_chunk_where w;
		ts_hash(h, HASH_FILL, seed == 403 ? 20 : seed);
		OK(cat_chunk_where(fx.dst, h, &w));
		cr_assert_eq(w.refcount, seed == 403 ? 2 : 1, "chunk %d", seed == 403 ? 20 : seed);
	}

	/* the live save that shares chunk 20 goes; the catalog reclaims what
	 * it alone named and the uploader removes those objects */
	struct store *st;
	char cache[160];
	snprintf(cache, sizeof(cache), "%s/cache", fx.dir);
	cr_assert_eq(mkdir(cache, 0700), 0);
	OK(store_open(cache, &st));
	struct cat_id_vec gone = { 0 };
	OK(cat_gen_delete(fx.dst, ids[2], "keep", cat_id_vec_add_ino, &gone));
	OK(cat_inodes_release(fx.dst, gone.v, gone.n));
	cat_id_vec_free(&gone);
	struct uploader_config cfg = { .threads = 1, .deadline_s = 600, .chunk_max = 1 << 20 };
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", cache);
	struct uploader *u;
	OK(uploader_start(&cfg, fx.dst, st, fx.b, NULL, NULL, NULL, &u));
	uploader_kick(u);
	uploader_stop(u, true); /* drained: every removal ran */

	char path[128], mpath[MANIFEST_PATH_MAX];
	uint64_t size;
	chunk_path(21, path, sizeof(path));
	FAILS(backing_stat(fx.b, path, &size), ENOENT); /* step-300's own chunk: reclaimed */
	manifest_gen_path(ids[2], 2, mpath, sizeof(mpath));
	FAILS(backing_stat(fx.b, mpath, &size), ENOENT); /* step-300's manifest: removed */
	chunk_path(20, path, sizeof(path));
	OK(backing_stat(fx.b, path, &size)); /* the shared chunk: kept */
	cr_assert_eq(size, STORE_HEADER_LEN + 4096 / 2 + 1);
	for (int seed = 400; seed < 403; seed++) {
		chunk_path(seed, path, sizeof(path));
		OK(backing_stat(fx.b, path, &size));
	}
	manifest_gen_path(id4, 1, mpath, sizeof(mpath));
	OK(backing_stat(fx.b, mpath, &size)); /* the held save's manifest: its own */
	OK(cat_gen_get(fx.dst, id4, &g));
	cr_assert_eq(g.state, GEN_HELD);

	/* an admin's rm decides: its manifest and its chunks go */
	OK(cat_gen_delete(fx.dst, id4, "admin", cat_id_vec_add_ino, &gone));
	OK(cat_inodes_release(fx.dst, gone.v, gone.n));
	cat_id_vec_free(&gone);
	OK(uploader_start(&cfg, fx.dst, st, fx.b, NULL, NULL, NULL, &u));
	uploader_kick(u);
	uploader_stop(u, true);
	FAILS(backing_stat(fx.b, mpath, &size), ENOENT);
	chunk_path(20, path, sizeof(path));
	FAILS(backing_stat(fx.b, path, &size), ENOENT);
	chunk_path(400, path, sizeof(path));
	FAILS(backing_stat(fx.b, path, &size), ENOENT);
	store_close(st);
}

/* Invariant 7: an admin's commit of a save a rebuild held shows it under
 * its new name, and the uploader writes its manifest again with that name
 * (the same id and version, in place of the old one): the next rebuild
 * brings it back committed, in conflict with nothing. */
Test(rebuild, a_held_save_committed_comes_back_committed_under_its_new_name, .init = setup,
     .fini = teardown)
{
	uint64_t ids[3];
	uint64_t id4 = populate_rejected(ids, PR_CHUNKS, NULL);
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.generations_held, 1);
	OK(cat_gen_commit(fx.dst, id4, "admin"));
	struct store *st;
	char cache[160];
	snprintf(cache, sizeof(cache), "%s/cache", fx.dir);
	cr_assert_eq(mkdir(cache, 0700), 0);
	OK(store_open(cache, &st));
	struct uploader_config cfg = { .threads = 1, .deadline_s = 600, .chunk_max = 1 << 20 };
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", cache);
	struct uploader *u;
	OK(uploader_start(&cfg, fx.dst, st, fx.b, NULL, NULL, NULL, &u));
	uploader_kick(u);
	uploader_stop(u, true);
	store_close(st);

	struct cat *again;
	char p2[160], name[64];
	snprintf(p2, sizeof(p2), "%s/again.db", fx.dir);
	OK(cat_open(p2, 0, 0, NULL, NULL, &again));
	OK(rebuild_catalog(fx.b, again, REBUILD_CHECK_CHUNKS, NULL, NULL, &rep));
	cr_assert_eq(rep.manifests_rejected, 0);
	cr_assert_eq(rep.generations_held, 0);
	cr_assert_eq(rep.generations, 4);
	cr_assert_eq(rep.chunks_missing, 0);
	struct cat_gen g;
	OK(cat_gen_get(again, id4, &g));
	snprintf(name, sizeof(name), "step-400.rebuild-%llu", (unsigned long long)id4);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_str_eq(g.name, name);
	cr_assert_eq(g.version, 1);
	struct cat_gen g_dst;
	OK(cat_gen_get(fx.dst, id4, &g_dst));
	char *want = ts_dump_from(fx.dst, g_dst.root, "s", false);
	char *got = ts_dump_from(again, g.root, "s", false);
	cr_assert_str_eq(got, want);
	free(want);
	free(got);
	OK(cat_check(again));
	OK(cat_gen_check(again));
	cat_close(again);
}

/* A manifest the rebuild rejects and cannot apply held either (its name and
 * its held name are taken in the rebuilt tree: a save deleted while its
 * manifest removal was still queued, its name reused; rebuild.c invariant
 * 7's fallback) stays on BACKING, the only copy of that save; the rebuilt catalog never
 * hands out its id again, so no new generation's manifest
 * (manifests/gen/ID.V.ckm) overwrites it, nor a later rebuild takes one for
 * the other. The same for a generation none of whose manifests could be
 * read. */
Test(rebuild, a_rejected_manifests_id_is_never_handed_out_again, .init = setup, .fini = teardown)
{
	uint64_t ids[3], root5;
	uint64_t id4 = populate_rejected(ids, PR_NO_HOLD, NULL);
	struct cat_inode run, series;

	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.manifests_rejected, 1);
	cr_assert_eq(rep.generations_held, 0);
	cr_assert_eq(rep.generations_lost, 1);
	cr_assert_eq(rep.generations, 3);
	OK(cat_lookup(fx.dst, ROOT, "run", &run));
	OK(cat_lookup(fx.dst, run.ino, "ckpt", &series));
	uint64_t id5 = ts_mkgen(fx.dst, series.ino, "step-500", 500, true, &root5);
	cr_assert_gt(id5, id4, "new generation %llu after a rebuild that rejected %llu",
		     (unsigned long long)id5, (unsigned long long)id4);

	/* every version of the newest id unreadable: its id is not reused either */
	struct cat *again;
	char p2[160], path[MANIFEST_PATH_MAX];
	snprintf(p2, sizeof(p2), "%s/again.db", fx.dir);
	OK(cat_open(p2, 0, 0, NULL, NULL, &again));
	manifest_gen_path(id4, 1, path, sizeof(path));
	corrupt(path);
	OK(rebuild_catalog(fx.b, again, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.generations_lost, 1);
	OK(cat_lookup(again, ROOT, "run", &run));
	OK(cat_lookup(again, run.ino, "ckpt", &series));
	id5 = ts_mkgen(again, series.ino, "step-500", 500, true, &root5);
	cr_assert_gt(id5, id4, "new generation %llu after a rebuild that lost %llu",
		     (unsigned long long)id5, (unsigned long long)id4);
	OK(cat_check(again));
	cat_close(again);
}

/* admin_query.h 3 (review finding 3): the chunks of a save the rebuild left
 * out have no row in the rebuilt catalog, so the catalog alone calls them
 * orphans; gc reads BACKING's manifests first and keeps them, objects
 * untouched. A manifest that does not parse fails the load, naming it, and a
 * BACKING walk without the set is refused. */
Test(rebuild, gc_keeps_the_chunks_only_a_rejected_manifest_names, .init = setup,
     .fini = teardown)
{
	uint64_t ids[3];
	populate_rejected(ids, PR_CHUNKS | PR_NO_HOLD, NULL);
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.manifests_rejected, 1);
	cr_assert_eq(rep.generations_held, 0);

	struct aq *q;
	OK(aq_open(fx.dst, &q));
	struct aq_named *named;
	char err[512] = "";
	OK(aq_named_load(fx.b, &named, err, sizeof(err)));
	cr_assert_eq(aq_named_manifests(named), 7, "5 generation manifests, 2 tree manifests");
	for (int seed = 400; seed < 403; seed++) {
		uint8_t h[CAT_HASH_LEN];
		bool orphan;
		ts_hash(h, HASH_FILL, seed);
		OK(aq_gc_check(q, h, true, true, NULL, NULL, &orphan));
		cr_assert(orphan, "chunk %d: the rebuilt catalog has a row for it", seed);
		cr_assert(aq_named_has(named, h), "chunk %d: not in the manifests' set", seed);
	}
	uint8_t tree_chunk[CAT_HASH_LEN], none[CAT_HASH_LEN];
	ts_hash(tree_chunk, HASH_FILL, 700); /* notes.txt: a tree manifest's */
	ts_hash(none, HASH_FILL, 999);
	cr_assert(aq_named_has(named, tree_chunk));
	cr_assert(!aq_named_has(named, none));

	struct aq_objects o = aq_objects_backing(fx.b, named, NULL);
	struct aq_gc_result r;
	OK(aq_gc_walk(q, &o, false, NULL, NULL, &r));
	cr_assert_eq(r.manifest_kept, 3);
	cr_assert_eq(r.orphans, 0);
	cr_assert_eq(r.removed, 0);
	for (int seed = 400; seed < 403; seed++) {
		uint8_t h[CAT_HASH_LEN];
		char hex[HASH_HEX_LEN + 1], path[128];
		uint64_t size;
		ts_hash(h, HASH_FILL, seed);
		hash_to_hex(h, hex);
		snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
		OK(backing_stat(fx.b, path, &size));
		cr_assert_eq(size, STORE_HEADER_LEN + 4096 / 2 + 1, "%s", path);
	}
	aq_named_free(named);

	struct aq_objects blind = aq_objects_backing(fx.b, NULL, NULL);
	FAILS(aq_gc_walk(q, &blind, false, NULL, NULL, &r), EINVAL);
	OK(backing_put(fx.b, "manifests/gen/999.1.ckm", "not a manifest\n", 15));
	FAILS(aq_named_load(fx.b, &named, err, sizeof(err)), EBADMSG);
	cr_assert_null(named);
	cr_assert(strstr(err, "manifests/gen/999.1.ckm cannot be parsed"), "err: %s", err);
	aq_close(q);
}

Test(rebuild, missing_chunks_are_reported_by_file, .init = setup, .fini = teardown)
{
	uint64_t ids[3];
	populate(ids);
	/* chunk 10 (step-200's rank0.pt, first chunk) is gone; chunk 11 truncated */
	uint8_t h[CAT_HASH_LEN];
	char hex[HASH_HEX_LEN + 1], path[128];
	ts_hash(h, HASH_FILL, 10);
	hash_to_hex(h, hex);
	snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
	OK(backing_remove(fx.b, path));
	ts_hash(h, HASH_FILL, 11);
	hash_to_hex(h, hex);
	snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
	OK(backing_put(fx.b, path, "short", 5));
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, REBUILD_CHECK_CHUNKS, NULL, NULL, &rep));
	cr_assert_eq(rep.chunks_missing, 2);
	cr_assert_eq(rep.files_damaged, 1, "both chunks are in one file");
	cr_assert_eq(rep.generations, 3, "the metadata still comes back");
	/* without the check nothing is looked up */
	struct cat *again;
	char p2[160];
	snprintf(p2, sizeof(p2), "%s/again.db", fx.dir);
	OK(cat_open(p2, 0, 0, NULL, NULL, &again));
	OK(rebuild_catalog(fx.b, again, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.chunks_checked, 0);
	cr_assert_eq(rep.chunks_missing, 0);
	cat_close(again);
}

Test(rebuild, a_newer_manifest_format_stops_the_rebuild, .init = setup, .fini = teardown)
{
	uint64_t ids[3];
	populate(ids);
	static char buf[1 << 20];
	char path[MANIFEST_PATH_MAX];
	size_t len;
	manifest_gen_path(ids[0], 1, path, sizeof(path));
	OK(backing_get(fx.b, path, buf, sizeof(buf), &len));
	buf[strlen("ckptfs-manifest ")] = '2';
	OK(backing_put(fx.b, path, buf, len));
	struct rebuild_report rep;
	FAILS(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep), EPROTONOSUPPORT);
}

Test(rebuild, has_data_tells_a_used_backing_from_an_empty_one, .init = setup, .fini = teardown)
{
	bool has = true;
	OK(rebuild_backing_has_data(fx.b, &has));
	cr_assert(!has, "an empty BACKING");
	OK(backing_put(fx.b, "manifests/gen/README", "x", 1));
	OK(rebuild_backing_has_data(fx.b, &has));
	cr_assert(!has, "a stray file is not a manifest");
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep));
	cr_assert_eq(rep.names_ignored, 1);
	cr_assert_eq(rep.generations, 0);
	cr_assert(!rep.tree_applied);
	put_tree(7);
	OK(rebuild_backing_has_data(fx.b, &has));
	cr_assert(has);
	OK(backing_remove(fx.b, "manifests/tree/00000000000000000007.ckm"));
	uint64_t root;
	uint64_t series = ts_mk(fx.src, ROOT, "s", S_IFDIR | 0755, NULL);
	uint64_t id = ts_mkgen(fx.src, series, "model-5.pt", 5, false, &root);
	write_chunks(root, 1, 1, 10);
	OK(cat_gen_commit(fx.src, id, "trainer"));
	put_gen(id, 1);
	OK(rebuild_backing_has_data(fx.b, &has));
	cr_assert(has);
	/* a generation without any tree manifest: its series is made */
	OK(rebuild_catalog(fx.b, fx.dst, REBUILD_CHECK_CHUNKS, NULL, NULL, &rep));
	cr_assert_eq(rep.generations, 1);
	struct cat_inode s, f;
	OK(cat_lookup(fx.dst, ROOT, "s", &s));
	OK(cat_lookup(fx.dst, s.ino, "model-5.pt", &f));
	cr_assert_eq(f.size, 10);
	OK(cat_gen_check(fx.dst));
}

Test(rebuild, a_sparse_huge_manifest_is_refused_by_its_size_unread, .init = setup,
     .fini = teardown)
{
	uint64_t ids[3];
	populate(ids);
	/* a 3 GB sparse version 2 of the first generation: judged by its size
	 * (MANIFEST_SIZE_MAX), never read into memory; version 1 comes back */
	char path[MANIFEST_PATH_MAX], full[512];
	manifest_gen_path(ids[0], 2, path, sizeof(path));
	snprintf(full, sizeof(full), "%s/%s", fx.backing, path);
	FILE *f = fopen(full, "w");
	cr_assert_not_null(f);
	cr_assert_eq(ftruncate(fileno(f), (off_t)3 << 30), 0);
	fclose(f);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct rebuild_report rep;
	OK(rebuild_catalog(fx.b, fx.dst, 0, NULL, NULL, &rep));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	cr_assert_eq(rep.manifests_corrupt, 1);
	cr_assert_eq(rep.generations, 3);
	cr_assert_lt(secs, 2.0, "%.1f s: the 3 GB were read", secs);
	struct cat_gen g;
	OK(cat_gen_get(fx.dst, ids[0], &g));
	cr_assert_eq(g.version, 1);
}

/* admin_query.h invariant 5 (review3 F3): gc asks the claim at each BACKING
 * removal, not once before its walk. A process that lost the claim during
 * a long walk (stopped past the timeout; a taker uploaded meanwhile)
 * removes nothing more there: the walk stops with EROFS, the objects stay. */
Test(rebuild, gc_on_backing_removes_nothing_once_its_claim_is_lost, .init = setup,
     .fini = teardown)
{
	char paths[2][128];
	for (int i = 0; i < 2; i++) { /* objects no row and no manifest names */
		uint8_t h[CAT_HASH_LEN];
		char hex[HASH_HEX_LEN + 1];
		ts_hash(h, HASH_FILL, 900 + i);
		hash_to_hex(h, hex);
		snprintf(paths[i], sizeof(paths[i]), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
		OK(backing_put(fx.b, paths[i], "taker's", 7));
	}
	struct aq *q;
	OK(aq_open(fx.dst, &q));
	struct aq_named *named;
	char err[512] = "", msg[PATH_MAX + 512];
	OK(aq_named_load(fx.b, &named, err, sizeof(err)));
	struct claim *c = NULL;
	cr_assert_eq(claim_acquire(fx.b, "abababababababababababababababab", false, true, fx.dir, 60,
				   &c, msg, sizeof(msg)), 0, "%s", msg);
	struct aq_objects o = aq_objects_backing(fx.b, named, c);
	struct aq_gc_result r;
	OK(aq_gc_walk(q, &o, true, NULL, NULL, &r)); /* the claim sure: both are orphans */
	cr_assert_eq(r.orphans, 2);

	uint64_t broke = 0; /* taken from it (here: broken by hand, a larger epoch) */
	cr_assert_eq(claim_break(fx.b, &broke, msg, sizeof(msg)), 0, "%s", msg);
	OK(claim_start(c)); /* its first renewal finds it gone: lost */
	cr_assert(!claim_may_write(c));
	FAILS(aq_gc_walk(q, &o, false, NULL, NULL, &r), EROFS);
	cr_assert_eq(r.removed, 0, "a process that lost the claim removed %llu objects",
		     (unsigned long long)r.removed);
	for (int i = 0; i < 2; i++) {
		uint64_t size = 0;
		OK(backing_stat(fx.b, paths[i], &size));
		cr_assert_eq(size, 7, "%s", paths[i]);
	}
	OK(aq_gc_walk(q, &o, true, NULL, NULL, &r)); /* a dry run removes nothing: it goes on */
	claim_end(c, false);
	aq_named_free(named);
	aq_close(q);
}
