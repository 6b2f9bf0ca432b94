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
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "rebuild.h"
#include "store.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)

static struct fixture {
	char dir[64];
	char src_path[128], dst_path[128], backing[128];
	struct cat *src, *dst;
	struct backing *b;
} fx;

#define OK(expr)                                                                          \
	do {                                                                              \
		int rc_ = (expr);                                                         \
		cr_assert_eq(rc_, 0, "%s returned %d (%s)", #expr, rc_, strerror(-rc_)); \
	} while (0)
#define FAILS(expr, err)                                                                     \
	do {                                                                                 \
		int rc_ = (expr);                                                            \
		cr_assert_eq(rc_, -(err), "%s returned %d (%s), expected -%s", #expr, rc_,   \
			     strerror(-rc_), #err);                                          \
	} while (0)

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	strcpy(fx.dir, "/tmp/ckptfs-rb-XXXXXX");
	cr_assert_not_null(mkdtemp(fx.dir));
	snprintf(fx.src_path, sizeof(fx.src_path), "%s/src.db", fx.dir);
	snprintf(fx.dst_path, sizeof(fx.dst_path), "%s/dst.db", fx.dir);
	snprintf(fx.backing, sizeof(fx.backing), "%s/backing", fx.dir);
	cr_assert_eq(mkdir(fx.backing, 0755), 0);
	OK(cat_open(fx.src_path, 0, 0, NULL, NULL, &fx.src));
	OK(cat_open(fx.dst_path, 0, 0, NULL, NULL, &fx.dst));
	OK(backing_open(fx.backing, 5000, &fx.b));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	if (fx.src)
		OK(cat_check(fx.src));
	if (fx.dst)
		OK(cat_check(fx.dst));
	cat_close(fx.src);
	cat_close(fx.dst);
	backing_close(fx.b);
	fx.src = fx.dst = NULL;
	fx.b = NULL;
	nftw(fx.dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void mkhash(uint8_t out[CAT_HASH_LEN], int seed)
{
	memset(out, 0x3c, CAT_HASH_LEN);
	out[0] = (uint8_t)(seed >> 8);
	out[1] = (uint8_t)seed;
}

static uint64_t mk(uint64_t parent, const char *name, uint32_t mode, const char *target)
{
	struct cat_inode in;
	OK(cat_create(fx.src, parent, name, mode, 1000, 1001, 0, target, &in));
	return in.ino;
}

static uint64_t mkgen(uint64_t series, const char *name, uint64_t step, bool dir, uint64_t *ino)
{
	struct cat_gen_spec spec = { .name = name, .step = step };
	struct cat_inode in;
	uint64_t id = 0;
	OK(cat_create_in_gen(fx.src, series, name, dir ? S_IFDIR | 0750 : S_IFREG | 0640, 1000,
			     1001, 0, NULL, &spec, &in, &id));
	*ino = in.ino;
	return id;
}

/* n whole chunks of len bytes, seeds seed, seed+1, …; objects of stored
 * length len/2 + 1 are put on BACKING too (their bytes do not matter to a
 * rebuild, only their names and sizes). */
static void write_chunks(uint64_t ino, int seed, int n, uint64_t len)
{
	OK(cat_pending_drop(fx.src, ino));
	for (int i = 0; i < n; i++) {
		struct cat_extent e = { .off = (uint64_t)i * len, .len = len, .chunk_len = len };
		bool must = false;
		mkhash(e.hash, seed + i);
		OK(cat_pending_add(fx.src, ino, &e, &must));
		if (must) {
			uint64_t stored = len / 2 + 1;
			OK(cat_chunk_stored(fx.src, e.hash, 1, stored));
			char hex[HASH_HEX_LEN + 1], path[128];
			hash_to_hex(e.hash, hex);
			snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
			char *obj = calloc(1, STORE_HEADER_LEN + stored);
			OK(backing_put(fx.b, path, obj, STORE_HEADER_LEN + stored));
			free(obj);
		}
	}
	OK(cat_file_commit(fx.src, ino, (uint64_t)n * len, now_ns(), false));
	OK(cat_pending_drop(fx.src, ino));
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

/* ---- a canonical dump of a catalog, for byte-for-byte comparison ---- */

struct dump {
	char *p;
	size_t len;
	FILE *f;
	/* inodes seen, for hard links: catalog inode → first path */
	int n_seen;
	uint64_t seen_ino[1024];
	char *seen_path[1024];
};

struct child {
	char name[CAT_NAME_MAX + 1];
	uint64_t ino;
};

struct children {
	int n;
	struct child c[256];
};

static int collect(void *arg, const char *name, const struct cat_inode *a, uint64_t next)
{
	struct children *l = arg;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	cr_assert_lt(l->n, 256);
	strcpy(l->c[l->n].name, name);
	l->c[l->n++].ino = a->ino;
	return 0;
}

static int child_cmp(const void *a, const void *b)
{
	return strcmp(((const struct child *)a)->name, ((const struct child *)b)->name);
}

static void dump_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= 0x20 || c >= 0x7f || c == '\\')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

static void dump_inode(struct cat *cat, struct dump *d, const char *path, uint64_t ino)
{
	for (int i = 0; i < d->n_seen; i++)
		if (d->seen_ino[i] == ino) {
			fprintf(d->f, "%s => link to %s\n", path, d->seen_path[i]);
			return;
		}
	cr_assert_lt(d->n_seen, 1024);
	d->seen_ino[d->n_seen] = ino;
	d->seen_path[d->n_seen++] = strdup(path);

	struct cat_inode a;
	uint64_t gen = 0;
	OK(cat_getattr(cat, ino, &a));
	OK(cat_gen_of(cat, ino, &gen));
	fprintf(d->f, "%s mode %o uid %u gid %u nlink %u size %llu rdev %llu a %lld m %lld c %lld gen %llu",
		path, a.mode, a.uid, a.gid, a.nlink, (unsigned long long)a.size,
		(unsigned long long)a.rdev, (long long)a.atime_ns, (long long)a.mtime_ns,
		(long long)a.ctime_ns, (unsigned long long)gen);
	if (S_ISLNK(a.mode)) {
		char target[4096];
		OK(cat_readlink(cat, ino, target, sizeof(target)));
		fprintf(d->f, " -> ");
		dump_escaped(d->f, target);
	}
	fputc('\n', d->f);
	if (S_ISREG(a.mode)) {
		struct cat_extent e[64];
		int n = cat_extents(cat, ino, 0, e, 64);
		cr_assert_geq(n, 0);
		cr_assert_lt(n, 64);
		for (int i = 0; i < n; i++) {
			char hex[HASH_HEX_LEN + 1];
			hash_to_hex(e[i].hash, hex);
			fprintf(d->f, "  ext %llu +%llu %s@%llu/%llu\n", (unsigned long long)e[i].off,
				(unsigned long long)e[i].len, hex, (unsigned long long)e[i].chunk_off,
				(unsigned long long)e[i].chunk_len);
		}
	}
	if (!S_ISDIR(a.mode))
		return;
	struct children *l = calloc(1, sizeof(*l));
	OK(cat_readdir(cat, ino, 0, collect, l));
	qsort(l->c, (size_t)l->n, sizeof(l->c[0]), child_cmp);
	for (int i = 0; i < l->n; i++) {
		char *child = NULL;
		char name[4 * CAT_NAME_MAX + 1];
		FILE *nf = fmemopen(name, sizeof(name), "w");
		dump_escaped(nf, l->c[i].name);
		fclose(nf);
		cr_assert_gt(asprintf(&child, "%s/%s", path, name), 0);
		dump_inode(cat, d, child, l->c[i].ino);
		free(child);
	}
	free(l);
}

static int dump_gen(void *arg, const struct cat_gen *g)
{
	struct dump *d = arg;
	fprintf(d->f, "gen %llu name ", (unsigned long long)g->id);
	dump_escaped(d->f, g->name);
	fprintf(d->f, " step %llu state %d version %u pinned %d created %lld committed %lld"
		" ended %lld rule %s backup %llu files %llu logical %llu exclusive %llu\n",
		(unsigned long long)g->step, g->state, g->version, g->pinned,
		(long long)g->created_ns, (long long)g->committed_ns, (long long)g->ended_ns,
		g->rule, (unsigned long long)g->backup_root, (unsigned long long)g->files,
		(unsigned long long)g->logical_bytes, (unsigned long long)g->exclusive_bytes);
	return 0;
}

/* The namespace under ino (as `path`), and, with gens, the live generations. */
static char *dump_from(struct cat *cat, uint64_t ino, const char *path, bool gens)
{
	struct dump *d = calloc(1, sizeof(*d));
	d->f = open_memstream(&d->p, &d->len);
	dump_inode(cat, d, path, ino);
	if (gens)
		OK(cat_gen_list(cat, 0, false, dump_gen, d));
	fclose(d->f);
	for (int i = 0; i < d->n_seen; i++)
		free(d->seen_path[i]);
	char *out = d->p;
	free(d);
	return out;
}

static char *dump(struct cat *cat)
{
	return dump_from(cat, ROOT, "", true);
}

static void expect_same(struct cat *a, struct cat *b)
{
	char *x = dump(a), *y = dump(b);
	cr_assert_str_eq(x, y, "catalogs differ:\n--- source\n%s--- rebuilt\n%s", x, y);
	free(x);
	free(y);
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
	uint64_t run = mk(ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t series = mk(run, "ckpt", S_IFDIR | 0755, NULL);
	for (int i = 0; i < 3; i++) {
		char name[32];
		uint64_t root;
		snprintf(name, sizeof(name), "step-%d", (i + 1) * 100);
		ids[i] = mkgen(series, name, (uint64_t)(i + 1) * 100, true, &root);
		uint64_t sub = mk(root, "shards", S_IFDIR | 0755, NULL);
		for (int k = 0; k < 2; k++) {
			char f[16];
			snprintf(f, sizeof(f), "rank%d.pt", k);
			write_chunks(mk(sub, f, S_IFREG | 0644, NULL), 10 * i + 3 * k, 3, 4096);
		}
		mk(root, ".metadata", S_IFREG | 0644, NULL);
		OK(cat_gen_commit(fx.src, ids[i], "dcp-metadata"));
		put_gen(ids[i], 1);
	}
	/* version 2 of the third */
	OK(cat_gen_reopen(fx.src, ids[2]));
	struct cat_inode in;
	OK(cat_lookup(fx.src, series, "step-300", &in));
	write_chunks(mk(in.ino, "extra.pt", S_IFREG | 0644, NULL), 900, 2, 4096);
	OK(cat_gen_commit(fx.src, ids[2], "dcp-metadata"));
	put_gen(ids[2], 2);
	mk(series, "latest", S_IFLNK | 0777, "step-300");
	uint64_t notes = mk(ROOT, "notes.txt", S_IFREG | 0600, NULL);
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
	expect_same(fx.src, fx.dst);
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

Test(rebuild, missing_chunks_are_reported_by_file, .init = setup, .fini = teardown)
{
	uint64_t ids[3];
	populate(ids);
	/* chunk 10 (step-200's rank0.pt, first chunk) is gone; chunk 11 truncated */
	uint8_t h[CAT_HASH_LEN];
	char hex[HASH_HEX_LEN + 1], path[128];
	mkhash(h, 10);
	hash_to_hex(h, hex);
	snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
	OK(backing_remove(fx.b, path));
	mkhash(h, 11);
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
	uint64_t series = mk(ROOT, "s", S_IFDIR | 0755, NULL);
	uint64_t id = mkgen(series, "model-5.pt", 5, false, &root);
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
