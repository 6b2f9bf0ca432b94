/* Tests of meta/catalog.c: namespace operations and their POSIX errors, link
 * counts and times, readdir cookies, extents and reference counts, reclaim,
 * crash recovery at open, and refusal of foreign or newer catalog files.
 * Every test works in its own temporary directory and ends with cat_check. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "log.h"
#include "support.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define HASH_FILL 0x5a /* the fill of this file's chunk hashes (ts_hash) */
#define MAX_RECLAIMS 4096

struct reclaims {
	int n;
	int fail_next; /* refuse this many calls with -EIO */
	uint8_t hash[MAX_RECLAIMS][CAT_HASH_LEN];
};

static struct fixture {
	char dir[64];
	char path[128];
	struct cat *cat;
	struct reclaims rec;
} fx;

static int record_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	struct reclaims *r = arg;
	if (r->fail_next > 0) {
		r->fail_next--;
		return -EIO;
	}
	cr_assert_lt(r->n, MAX_RECLAIMS);
	memcpy(r->hash[r->n++], hash, CAT_HASH_LEN);
	return 0;
}

static void open_catalog(void)
{
	OK(cat_open(fx.path, 0, 0, record_reclaim, &fx.rec, &fx.cat));
}

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "catalog");
	snprintf(fx.path, sizeof(fx.path), "%s/catalog.db", fx.dir);
	memset(&fx.rec, 0, sizeof(fx.rec));
	open_catalog();
}

static void teardown(void)
{
	cat_close(fx.cat);
	fx.cat = NULL;
	ts_tmpdir_remove(fx.dir);
}

/* Every test ends here: the invariants hold after whatever it did. */
static void check_invariants(void)
{
	OK(cat_check(fx.cat));
}

static void reopen(void)
{
	cat_close(fx.cat);
	fx.cat = NULL;
	open_catalog();
}

static int times_reclaimed(int seed)
{
	uint8_t h[CAT_HASH_LEN];
	int n = 0;
	ts_hash(h, HASH_FILL, seed);
	for (int i = 0; i < fx.rec.n; i++)
		n += memcmp(fx.rec.hash[i], h, CAT_HASH_LEN) == 0;
	return n;
}

static uint64_t mkfile(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_create(fx.cat, parent, name, S_IFREG | 0644, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

static uint64_t mkdir_(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_create(fx.cat, parent, name, S_IFDIR | 0755, 1000, 1000, 0, NULL, &in));
	return in.ino;
}

static struct cat_inode attr(uint64_t ino)
{
	struct cat_inode in;
	OK(cat_getattr(fx.cat, ino, &in));
	return in;
}

static uint64_t lookup(uint64_t parent, const char *name)
{
	struct cat_inode in;
	OK(cat_lookup(fx.cat, parent, name, &in));
	return in.ino;
}

/* Adds a pending extent of chunk `seed`; stores the chunk when asked to.
 * Returns must_store. */
static bool add_ext(uint64_t ino, uint64_t off, uint64_t len, int seed, uint64_t chunk_off,
		    uint64_t chunk_len, bool store)
{
	struct cat_extent e = { .off = off, .len = len, .chunk_off = chunk_off,
				.chunk_len = chunk_len };
	bool must = false;
	ts_hash(e.hash, HASH_FILL, seed);
	OK(cat_pending_add(fx.cat, ino, &e, &must));
	if (must && store)
		OK(cat_chunk_stored(fx.cat, e.hash, 1, chunk_len / 2 + 1));
	return must;
}

/* Adds a whole stored chunk as an extent. */
static void add_chunk(uint64_t ino, uint64_t off, uint64_t len, int seed)
{
	add_ext(ino, off, len, seed, 0, len, true);
}

struct chunk_find {
	uint8_t hash[CAT_HASH_LEN];
	int64_t refcount; /* -1 if there is no row */
	int64_t stored_len;
};

static int chunk_find_fn(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			 uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct chunk_find *f = arg;
	if (memcmp(hash, f->hash, CAT_HASH_LEN) == 0) {
		f->refcount = (int64_t)refcount;
		f->stored_len = stored_len;
	}
	return 0;
}

static int64_t refcount(int seed)
{
	struct chunk_find f = { .refcount = -1 };
	ts_hash(f.hash, HASH_FILL, seed);
	OK(cat_chunks(fx.cat, chunk_find_fn, &f));
	return f.refcount;
}

static void expect_extent(const struct cat_extent *e, uint64_t off, uint64_t len, int seed,
			  uint64_t chunk_off)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, seed);
	cr_assert_eq(e->off, off, "extent off %lu, want %lu", e->off, off);
	cr_assert_eq(e->len, len, "extent len %lu, want %lu", e->len, len);
	cr_assert_eq(e->chunk_off, chunk_off);
	cr_assert_eq(memcmp(e->hash, h, CAT_HASH_LEN), 0, "extent at %lu has another chunk", off);
}

/* ---- namespace ---- */

Test(catalog, create_lookup_getattr_every_type, .init = setup, .fini = teardown)
{
	static const struct {
		const char *name;
		uint32_t mode;
		uint64_t rdev;
		const char *target;
	} kinds[] = {
		{ "file", S_IFREG | 0640, 0, NULL },
		{ "dir", S_IFDIR | 0750, 0, NULL },
		{ "fifo", S_IFIFO | 0600, 0, NULL },
		{ "sock", S_IFSOCK | 0600, 0, NULL },
		{ "chr", S_IFCHR | 0666, 0x0103, NULL },
		{ "blk", S_IFBLK | 0660, 0x0801, NULL },
		{ "link", S_IFLNK | 0777, 0, "some/where/else" },
	};
	struct cat_inode root0 = attr(ROOT);
	cr_assert_eq(root0.mode, S_IFDIR | 0755);
	cr_assert_eq(root0.nlink, 2);
	cr_assert_eq(cat_schema_version(fx.cat), CAT_SCHEMA_VERSION);

	uint64_t last = ROOT;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		struct cat_inode made, found, got;
		int64_t before = ts_now_ns();
		OK(cat_create(fx.cat, ROOT, kinds[i].name, kinds[i].mode, 42, 43, kinds[i].rdev,
			      kinds[i].target, &made));
		int64_t after = ts_now_ns();
		cr_assert_gt(made.ino, last, "inode numbers grow");
		last = made.ino;
		cr_assert_eq(made.mode, kinds[i].mode);
		cr_assert_eq(made.uid, 42);
		cr_assert_eq(made.gid, 43);
		cr_assert_eq(made.rdev, kinds[i].rdev);
		cr_assert_eq(made.nlink, S_ISDIR(kinds[i].mode) ? 2u : 1u);
		cr_assert_eq(made.size, kinds[i].target ? strlen(kinds[i].target) : 0);
		cr_assert(made.mtime_ns >= before && made.mtime_ns <= after);
		cr_assert_eq(made.atime_ns, made.mtime_ns);
		cr_assert_eq(made.ctime_ns, made.mtime_ns);
		OK(cat_lookup(fx.cat, ROOT, kinds[i].name, &found));
		OK(cat_getattr(fx.cat, made.ino, &got));
		cr_assert_eq(memcmp(&made, &found, sizeof(made)), 0, "lookup of %s", kinds[i].name);
		cr_assert_eq(memcmp(&made, &got, sizeof(made)), 0, "getattr of %s", kinds[i].name);
		struct cat_inode root = attr(ROOT);
		cr_assert(root.mtime_ns >= before && root.mtime_ns <= after);
		cr_assert_eq(root.ctime_ns, root.mtime_ns);
	}
	cr_assert_eq(attr(ROOT).nlink, 3, "one subdirectory");
	uint64_t dir = lookup(ROOT, "dir");
	uint64_t sub = mkdir_(dir, "sub");
	cr_assert_eq(attr(dir).nlink, 3);
	cr_assert_eq(lookup(sub, ".."), dir);
	cr_assert_eq(lookup(sub, "."), sub);
	cr_assert_eq(lookup(ROOT, ".."), ROOT);
	check_invariants();
}

Test(catalog, symlink_target_and_readlink, .init = setup, .fini = teardown)
{
	struct cat_inode in;
	char buf[64];
	OK(cat_create(fx.cat, ROOT, "l", S_IFLNK | 0777, 0, 0, 0, "../target/file", &in));
	cr_assert_eq(in.size, 14);
	OK(cat_readlink(fx.cat, in.ino, buf, sizeof(buf)));
	cr_assert_str_eq(buf, "../target/file");
	OK(cat_readlink(fx.cat, in.ino, buf, 4));
	cr_assert_str_eq(buf, "../", "truncated and NUL-terminated");
	FAILS(cat_readlink(fx.cat, mkfile(ROOT, "f"), buf, sizeof(buf)), EINVAL);
	FAILS(cat_readlink(fx.cat, 9999, buf, sizeof(buf)), ENOENT);
	FAILS(cat_create(fx.cat, ROOT, "bad", S_IFLNK | 0755, 0, 0, 0, "x", &in), EINVAL);
	FAILS(cat_create(fx.cat, ROOT, "bad", S_IFLNK | 0777, 0, 0, 0, NULL, &in), EINVAL);
	FAILS(cat_create(fx.cat, ROOT, "bad", S_IFREG | 0644, 0, 0, 0, "x", &in), EINVAL);
	check_invariants();
}

Test(catalog, namespace_errors, .init = setup, .fini = teardown)
{
	struct cat_inode in;
	uint64_t ino;
	char longname[CAT_NAME_MAX + 2];
	uint64_t file = mkfile(ROOT, "file");
	uint64_t dir = mkdir_(ROOT, "dir");
	mkfile(dir, "inner");

	FAILS(cat_create(fx.cat, ROOT, "file", S_IFREG | 0644, 0, 0, 0, NULL, &in), EEXIST);
	FAILS(cat_create(fx.cat, ROOT, "dir", S_IFDIR | 0755, 0, 0, 0, NULL, &in), EEXIST);
	FAILS(cat_create(fx.cat, 9999, "x", S_IFREG | 0644, 0, 0, 0, NULL, &in), ENOENT);
	FAILS(cat_create(fx.cat, file, "x", S_IFREG | 0644, 0, 0, 0, NULL, &in), ENOTDIR);
	FAILS(cat_create(fx.cat, ROOT, "x", 0644, 0, 0, 0, NULL, &in), EINVAL);
	FAILS(cat_lookup(fx.cat, ROOT, "missing", &in), ENOENT);
	FAILS(cat_lookup(fx.cat, file, "x", &in), ENOTDIR);
	FAILS(cat_lookup(fx.cat, 9999, "x", &in), ENOENT);
	FAILS(cat_getattr(fx.cat, 9999, &in), ENOENT);
	FAILS(cat_unlink(fx.cat, ROOT, "dir", &ino), EISDIR);
	FAILS(cat_unlink(fx.cat, ROOT, "missing", &ino), ENOENT);
	FAILS(cat_rmdir(fx.cat, ROOT, "file", &ino), ENOTDIR);
	FAILS(cat_rmdir(fx.cat, ROOT, "dir", &ino), ENOTEMPTY);
	FAILS(cat_rmdir(fx.cat, ROOT, "missing", &ino), ENOENT);
	FAILS(cat_rmdir(fx.cat, file, "x", &ino), ENOTDIR);

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = 0;
	FAILS(cat_create(fx.cat, ROOT, longname, S_IFREG | 0644, 0, 0, 0, NULL, &in), ENAMETOOLONG);
	longname[CAT_NAME_MAX] = 0;
	OK(cat_create(fx.cat, ROOT, longname, S_IFREG | 0644, 0, 0, 0, NULL, &in));
	FAILS(cat_create(fx.cat, ROOT, "", S_IFREG | 0644, 0, 0, 0, NULL, &in), EINVAL);
	FAILS(cat_create(fx.cat, ROOT, "a/b", S_IFREG | 0644, 0, 0, 0, NULL, &in), EINVAL);
	FAILS(cat_create(fx.cat, ROOT, "..", S_IFDIR | 0755, 0, 0, 0, NULL, &in), EINVAL);

	/* A removed directory takes no new entries. */
	uint64_t gone = mkdir_(ROOT, "gone");
	OK(cat_rmdir(fx.cat, ROOT, "gone", &ino));
	cr_assert_eq(ino, gone);
	FAILS(cat_create(fx.cat, gone, "x", S_IFREG | 0644, 0, 0, 0, NULL, &in), ENOENT);
	check_invariants();
}

Test(catalog, hard_link_counts_and_times, .init = setup, .fini = teardown)
{
	struct cat_inode in;
	uint64_t ino;
	uint64_t dir = mkdir_(ROOT, "dir");
	uint64_t file = mkfile(ROOT, "a");
	int64_t before = ts_now_ns();
	OK(cat_link(fx.cat, file, dir, "b", &in));
	cr_assert_eq(in.ino, file);
	cr_assert_eq(in.nlink, 2);
	cr_assert_geq(in.ctime_ns, before);
	cr_assert_eq(attr(file).nlink, 2);
	cr_assert_geq(attr(dir).mtime_ns, before);
	cr_assert_eq(attr(dir).nlink, 2, "a file link does not count in a directory's nlink");
	cr_assert_eq(lookup(dir, "b"), file);
	FAILS(cat_link(fx.cat, file, dir, "b", &in), EEXIST);
	FAILS(cat_link(fx.cat, dir, ROOT, "dir2", &in), EPERM);
	FAILS(cat_link(fx.cat, 9999, ROOT, "x", &in), ENOENT);
	FAILS(cat_link(fx.cat, file, file, "x", &in), ENOTDIR);

	before = ts_now_ns();
	OK(cat_unlink(fx.cat, ROOT, "a", &ino));
	cr_assert_eq(ino, file);
	in = attr(file);
	cr_assert_eq(in.nlink, 1);
	cr_assert_geq(in.ctime_ns, before);
	cr_assert_geq(attr(ROOT).mtime_ns, before);
	cr_assert_geq(attr(ROOT).ctime_ns, before);
	OK(cat_inode_release(fx.cat, file)); /* still linked: a no-op */
	cr_assert_eq(attr(file).nlink, 1);
	OK(cat_unlink(fx.cat, dir, "b", &ino));
	cr_assert_eq(attr(file).nlink, 0, "kept until released");
	FAILS(cat_link(fx.cat, file, ROOT, "again", &in), ENOENT);
	OK(cat_inode_release(fx.cat, file));
	FAILS(cat_getattr(fx.cat, file, &in), ENOENT);
	check_invariants();
}

Test(catalog, unlink_then_release_drops_chunks_once, .init = setup, .fini = teardown)
{
	struct cat_extent ext[4];
	uint64_t ino;
	uint64_t a = mkfile(ROOT, "a");
	uint64_t b = mkfile(ROOT, "b");
	add_chunk(a, 0, 100, 1);
	add_chunk(a, 100, 100, 2);
	add_chunk(a, 200, 100, 1); /* chunk 1 twice */
	add_chunk(b, 0, 100, 2);   /* chunk 2 shared with b */
	OK(cat_file_commit(fx.cat, a, 300, ts_now_ns(), false));
	OK(cat_file_commit(fx.cat, b, 100, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, a));
	OK(cat_pending_drop(fx.cat, b));
	cr_assert_eq(refcount(1), 2);
	cr_assert_eq(refcount(2), 2);

	OK(cat_unlink(fx.cat, ROOT, "a", &ino));
	cr_assert_eq(ino, a);
	cr_assert_eq(cat_extents(fx.cat, a, 0, ext, 4), 3, "an open unlinked file keeps its data");
	cr_assert_eq(fx.rec.n, 0);
	OK(cat_inode_release(fx.cat, a));
	cr_assert_eq(fx.rec.n, 1);
	cr_assert_eq(times_reclaimed(1), 1);
	cr_assert_eq(times_reclaimed(2), 0);
	cr_assert_eq(refcount(1), -1);
	cr_assert_eq(refcount(2), 1);
	FAILS(cat_extents(fx.cat, a, 0, ext, 4), ENOENT);
	FAILS(cat_inode_release(fx.cat, a), ENOENT);

	OK(cat_unlink(fx.cat, ROOT, "b", &ino));
	OK(cat_inode_release(fx.cat, b));
	cr_assert_eq(times_reclaimed(2), 1);
	cr_assert_eq(fx.rec.n, 2);
	check_invariants();
}

Test(catalog, rmdir_updates_counts_and_release_deletes, .init = setup, .fini = teardown)
{
	struct cat_inode in;
	uint64_t ino;
	uint64_t dir = mkdir_(ROOT, "d");
	cr_assert_eq(attr(ROOT).nlink, 3);
	int64_t before = ts_now_ns();
	OK(cat_rmdir(fx.cat, ROOT, "d", &ino));
	cr_assert_eq(ino, dir);
	cr_assert_eq(attr(ROOT).nlink, 2);
	cr_assert_geq(attr(ROOT).mtime_ns, before);
	in = attr(dir);
	cr_assert_eq(in.nlink, 0);
	cr_assert_geq(in.ctime_ns, before);
	OK(cat_inode_release(fx.cat, dir));
	FAILS(cat_getattr(fx.cat, dir, &in), ENOENT);
	check_invariants();
}

Test(catalog, inode_numbers_are_never_reused, .init = setup, .fini = teardown)
{
	uint64_t ino;
	uint64_t a = mkfile(ROOT, "a");
	OK(cat_unlink(fx.cat, ROOT, "a", &ino));
	OK(cat_inode_release(fx.cat, a));
	reopen();
	uint64_t b = mkfile(ROOT, "a");
	cr_assert_gt(b, a);
	check_invariants();
}

Test(catalog, setattr_fields, .init = setup, .fini = teardown)
{
	struct cat_inode in = { 0 }, out;
	uint64_t f = mkfile(ROOT, "f");
	int64_t before = ts_now_ns();
	in.mode = S_IFDIR | 04711; /* the type bits must be ignored */
	in.uid = 7;
	in.gid = 8;
	in.atime_ns = 1000;
	in.mtime_ns = 2000;
	OK(cat_setattr(fx.cat, f, CAT_SET_MODE | CAT_SET_UID | CAT_SET_ATIME | CAT_SET_MTIME, &in,
		       &out));
	cr_assert_eq(out.mode, S_IFREG | 04711);
	cr_assert_eq(out.uid, 7);
	cr_assert_eq(out.gid, 1000, "gid not asked for");
	cr_assert_eq(out.atime_ns, 1000);
	cr_assert_eq(out.mtime_ns, 2000);
	cr_assert_geq(out.ctime_ns, before);
	struct cat_inode got = attr(f);
	cr_assert_eq(memcmp(&got, &out, sizeof(got)), 0);
	in.ctime_ns = 3000;
	OK(cat_setattr(fx.cat, f, CAT_SET_GID | CAT_SET_CTIME, &in, &out));
	cr_assert_eq(out.gid, 8);
	cr_assert_eq(out.ctime_ns, 3000);
	FAILS(cat_setattr(fx.cat, 9999, CAT_SET_UID, &in, &out), ENOENT);
	check_invariants();
}

/* ---- rename ---- */

Test(catalog, rename_over_file_replaces_it, .init = setup, .fini = teardown)
{
	uint64_t replaced = 77, ino;
	uint64_t d1 = mkdir_(ROOT, "d1");
	uint64_t d2 = mkdir_(ROOT, "d2");
	uint64_t src = mkfile(d1, "src");
	uint64_t dst = mkfile(d2, "dst");
	add_chunk(dst, 0, 10, 5);
	OK(cat_file_commit(fx.cat, dst, 10, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, dst));

	int64_t before = ts_now_ns();
	OK(cat_rename(fx.cat, d1, "src", d2, "dst", 0, &replaced));
	cr_assert_eq(replaced, dst);
	cr_assert_eq(lookup(d2, "dst"), src);
	FAILS(cat_unlink(fx.cat, d1, "src", &ino), ENOENT);
	cr_assert_eq(attr(dst).nlink, 0);
	cr_assert_geq(attr(src).ctime_ns, before);
	cr_assert_geq(attr(d1).mtime_ns, before);
	cr_assert_geq(attr(d1).ctime_ns, before);
	cr_assert_geq(attr(d2).mtime_ns, before);
	cr_assert_eq(attr(d1).nlink, 2);
	cr_assert_eq(attr(d2).nlink, 2);
	cr_assert_eq(times_reclaimed(5), 0);
	OK(cat_inode_release(fx.cat, dst));
	cr_assert_eq(times_reclaimed(5), 1);

	/* Without a target, replaced_ino is 0. */
	OK(cat_rename(fx.cat, d2, "dst", ROOT, "top", 0, &replaced));
	cr_assert_eq(replaced, 0);
	cr_assert_eq(lookup(ROOT, "top"), src);
	FAILS(cat_rename(fx.cat, d2, "dst", ROOT, "x", 0, &replaced), ENOENT);
	check_invariants();
}

Test(catalog, rename_directories_over_directories, .init = setup, .fini = teardown)
{
	uint64_t replaced;
	uint64_t p1 = mkdir_(ROOT, "p1");
	uint64_t p2 = mkdir_(ROOT, "p2");
	uint64_t a = mkdir_(p1, "a");
	mkdir_(a, "child");
	uint64_t empty = mkdir_(p2, "empty");
	uint64_t full = mkdir_(p2, "full");
	mkfile(full, "x");
	mkfile(p2, "file");
	cr_assert_eq(attr(p1).nlink, 3);
	cr_assert_eq(attr(p2).nlink, 4);

	FAILS(cat_rename(fx.cat, p1, "a", p2, "full", 0, &replaced), ENOTEMPTY);
	FAILS(cat_rename(fx.cat, p1, "a", p2, "file", 0, &replaced), ENOTDIR);
	FAILS(cat_rename(fx.cat, p2, "file", p2, "empty", 0, &replaced), EISDIR);
	cr_assert_eq(lookup(p1, "a"), a, "a failed rename changes nothing");

	OK(cat_rename(fx.cat, p1, "a", p2, "empty", 0, &replaced));
	cr_assert_eq(replaced, empty);
	cr_assert_eq(attr(empty).nlink, 0);
	cr_assert_eq(attr(p1).nlink, 2, "p1 lost a subdirectory");
	cr_assert_eq(attr(p2).nlink, 4, "p2 gained one and lost one");
	cr_assert_eq(lookup(a, ".."), p2);
	OK(cat_inode_release(fx.cat, empty));

	/* A directory moving between parents, no target. */
	OK(cat_rename(fx.cat, p2, "empty", p1, "back", 0, &replaced));
	cr_assert_eq(attr(p1).nlink, 3);
	cr_assert_eq(attr(p2).nlink, 3);
	check_invariants();
}

Test(catalog, rename_into_own_subtree_is_einval, .init = setup, .fini = teardown)
{
	uint64_t replaced;
	uint64_t a = mkdir_(ROOT, "a");
	uint64_t b = mkdir_(a, "b");
	uint64_t c = mkdir_(b, "c");
	FAILS(cat_rename(fx.cat, ROOT, "a", c, "a", 0, &replaced), EINVAL);
	FAILS(cat_rename(fx.cat, ROOT, "a", a, "self", 0, &replaced), EINVAL);
	FAILS(cat_rename(fx.cat, a, "b", c, "b", 0, &replaced), EINVAL);
	FAILS(cat_rename(fx.cat, ROOT, "a", c, "x", CAT_RENAME_NOREPLACE, &replaced), EINVAL);
	/* Moving up out of the subtree is fine. */
	OK(cat_rename(fx.cat, b, "c", ROOT, "c", 0, &replaced));
	cr_assert_eq(lookup(c, ".."), ROOT);
	check_invariants();
}

Test(catalog, rename_noreplace, .init = setup, .fini = teardown)
{
	uint64_t replaced;
	uint64_t a = mkfile(ROOT, "a");
	uint64_t b = mkfile(ROOT, "b");
	FAILS(cat_rename(fx.cat, ROOT, "a", ROOT, "b", CAT_RENAME_NOREPLACE, &replaced), EEXIST);
	cr_assert_eq(lookup(ROOT, "b"), b);
	OK(cat_rename(fx.cat, ROOT, "a", ROOT, "c", CAT_RENAME_NOREPLACE, &replaced));
	cr_assert_eq(replaced, 0);
	cr_assert_eq(lookup(ROOT, "c"), a);
	FAILS(cat_rename(fx.cat, ROOT, "c", ROOT, "d", CAT_RENAME_NOREPLACE | CAT_RENAME_EXCHANGE,
			 &replaced), EINVAL);
	FAILS(cat_rename(fx.cat, ROOT, "c", ROOT, "d", 4 /* RENAME_WHITEOUT */, &replaced), EINVAL);
	check_invariants();
}

Test(catalog, rename_exchange, .init = setup, .fini = teardown)
{
	uint64_t replaced = 77;
	uint64_t p1 = mkdir_(ROOT, "p1");
	uint64_t p2 = mkdir_(ROOT, "p2");
	uint64_t file = mkfile(p1, "x");
	uint64_t dir = mkdir_(p2, "y");
	mkfile(dir, "inside");
	cr_assert_eq(attr(p1).nlink, 2);
	cr_assert_eq(attr(p2).nlink, 3);

	int64_t before = ts_now_ns();
	OK(cat_rename(fx.cat, p1, "x", p2, "y", CAT_RENAME_EXCHANGE, &replaced));
	cr_assert_eq(replaced, 0);
	cr_assert_eq(lookup(p1, "x"), dir);
	cr_assert_eq(lookup(p2, "y"), file);
	cr_assert_eq(lookup(dir, ".."), p1);
	cr_assert_eq(attr(p1).nlink, 3);
	cr_assert_eq(attr(p2).nlink, 2);
	cr_assert_eq(attr(file).nlink, 1);
	cr_assert_eq(attr(dir).nlink, 2);
	cr_assert_geq(attr(file).ctime_ns, before);
	cr_assert_geq(attr(dir).ctime_ns, before);
	cr_assert_geq(attr(p1).mtime_ns, before);
	cr_assert_geq(attr(p2).mtime_ns, before);

	FAILS(cat_rename(fx.cat, p1, "x", p2, "missing", CAT_RENAME_EXCHANGE, &replaced), ENOENT);
	/* Exchanging a directory with an entry inside itself would detach it. */
	mkfile(dir, "deep");
	FAILS(cat_rename(fx.cat, p1, "x", dir, "deep", CAT_RENAME_EXCHANGE, &replaced), EINVAL);
	FAILS(cat_rename(fx.cat, dir, "deep", p1, "x", CAT_RENAME_EXCHANGE, &replaced), EINVAL);
	/* Within one directory. */
	uint64_t z = mkfile(p1, "z");
	OK(cat_rename(fx.cat, p1, "x", p1, "z", CAT_RENAME_EXCHANGE, &replaced));
	cr_assert_eq(lookup(p1, "x"), z);
	cr_assert_eq(lookup(p1, "z"), dir);
	cr_assert_eq(attr(p1).nlink, 3);
	check_invariants();
}

Test(catalog, rename_onto_itself_is_a_noop, .init = setup, .fini = teardown)
{
	uint64_t replaced = 77;
	struct cat_inode in;
	uint64_t f = mkfile(ROOT, "f");
	uint64_t d = mkdir_(ROOT, "d");
	OK(cat_link(fx.cat, f, ROOT, "alias", &in));
	struct cat_inode before_f = attr(f), before_root = attr(ROOT);
	OK(cat_rename(fx.cat, ROOT, "f", ROOT, "f", 0, &replaced));
	cr_assert_eq(replaced, 0);
	OK(cat_rename(fx.cat, ROOT, "d", ROOT, "d", 0, &replaced));
	OK(cat_rename(fx.cat, ROOT, "f", ROOT, "alias", 0, &replaced));
	cr_assert_eq(replaced, 0);
	cr_assert_eq(lookup(ROOT, "f"), f, "both names stay (POSIX)");
	cr_assert_eq(lookup(ROOT, "alias"), f);
	struct cat_inode after_f = attr(f), after_root = attr(ROOT);
	cr_assert_eq(memcmp(&before_f, &after_f, sizeof(after_f)), 0);
	cr_assert_eq(memcmp(&before_root, &after_root, sizeof(after_root)), 0);
	OK(cat_rename(fx.cat, ROOT, "d", ROOT, "d", CAT_RENAME_EXCHANGE, &replaced));
	cr_assert_eq(lookup(ROOT, "d"), d);
	check_invariants();
}

/* ---- readdir ---- */

struct listing {
	int n;
	int stop_after; /* 0: never */
	uint64_t last_cookie;
	char names[512][CAT_NAME_MAX + 1];
	uint64_t inos[512];
	uint64_t cookies[512];
	struct cat_inode attrs[512];
	struct cat *reenter; /* getattr from the callback */
};

static int listing_fn(void *arg, const char *name, const struct cat_inode *a, uint64_t next)
{
	struct listing *l = arg;
	if (l->stop_after && l->n == l->stop_after)
		return 1;
	cr_assert_lt(l->n, 512);
	if (l->reenter) {
		struct cat_inode again;
		OK(cat_getattr(l->reenter, a->ino, &again));
		cr_assert_eq(memcmp(&again, a, sizeof(again)), 0);
	}
	strcpy(l->names[l->n], name);
	l->inos[l->n] = a->ino;
	l->cookies[l->n] = next;
	l->attrs[l->n] = *a;
	l->n++;
	l->last_cookie = next;
	return 0;
}

static int listed(const struct listing *l, const char *name)
{
	int n = 0;
	for (int i = 0; i < l->n; i++)
		n += strcmp(l->names[i], name) == 0;
	return n;
}

Test(catalog, readdir_dots_and_attributes, .init = setup, .fini = teardown)
{
	static struct listing l;
	uint64_t dir = mkdir_(ROOT, "dir");
	uint64_t f = mkfile(dir, "f");
	uint64_t s = mkdir_(dir, "s");
	OK(cat_readdir(fx.cat, dir, 0, listing_fn, &l));
	cr_assert_eq(l.n, 4);
	cr_assert_str_eq(l.names[0], ".");
	cr_assert_eq(l.inos[0], dir);
	cr_assert_eq(l.cookies[0], 1);
	cr_assert_str_eq(l.names[1], "..");
	cr_assert_eq(l.inos[1], ROOT);
	cr_assert_eq(l.cookies[1], 2);
	cr_assert_str_eq(l.names[2], "f");
	cr_assert_eq(l.inos[2], f);
	cr_assert_str_eq(l.names[3], "s");
	cr_assert_eq(l.inos[3], s);
	struct cat_inode fa = attr(f);
	cr_assert_eq(memcmp(&l.attrs[2], &fa, sizeof(fa)), 0, "attributes for readdirplus");

	memset(&l, 0, sizeof(l));
	OK(cat_readdir(fx.cat, ROOT, 0, listing_fn, &l));
	cr_assert_eq(l.inos[1], ROOT, "the root's parent is itself");

	/* Resuming after "." and after "..". */
	memset(&l, 0, sizeof(l));
	OK(cat_readdir(fx.cat, dir, 1, listing_fn, &l));
	cr_assert_eq(l.n, 3);
	cr_assert_str_eq(l.names[0], "..");
	memset(&l, 0, sizeof(l));
	OK(cat_readdir(fx.cat, dir, 2, listing_fn, &l));
	cr_assert_eq(l.n, 2);
	cr_assert_str_eq(l.names[0], "f");

	FAILS(cat_readdir(fx.cat, f, 0, listing_fn, &l), ENOTDIR);
	FAILS(cat_readdir(fx.cat, 9999, 0, listing_fn, &l), ENOENT);
	check_invariants();
}

Test(catalog, readdir_cookies_stable_across_inserts_and_deletes, .init = setup,
     .fini = teardown)
{
	static struct listing first, rest;
	char name[32];
	uint64_t ino;
	uint64_t dir = mkdir_(ROOT, "big");
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "e%03d", i);
		mkfile(dir, name);
	}
	first.stop_after = 22; /* ".", "..", e000..e019 */
	first.reenter = fx.cat;
	OK(cat_readdir(fx.cat, dir, 0, listing_fn, &first));
	cr_assert_eq(first.n, 22);
	cr_assert_str_eq(first.names[21], "e019");

	/* Meanwhile: delete read and unread entries, add new ones. */
	OK(cat_unlink(fx.cat, dir, "e005", &ino));
	OK(cat_unlink(fx.cat, dir, "e019", &ino));
	OK(cat_unlink(fx.cat, dir, "e020", &ino));
	OK(cat_unlink(fx.cat, dir, "e050", &ino));
	mkfile(dir, "new1");
	mkfile(dir, "new2");

	rest.reenter = fx.cat;
	OK(cat_readdir(fx.cat, dir, first.last_cookie, listing_fn, &rest));
	cr_assert_eq(rest.n, 100 - 20 - 2 + 2, "e021..e099 without e050, plus two new");
	cr_assert_str_eq(rest.names[0], "e021");
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "e%03d", i);
		int seen = listed(&first, name) + listed(&rest, name);
		int want = i < 20 ? 1 : (i == 20 || i == 50) ? 0 : 1;
		cr_assert_eq(seen, want, "%s seen %d times", name, seen);
	}
	cr_assert_eq(listed(&rest, "new1"), 1);
	cr_assert_eq(listed(&rest, "new2"), 1);
	for (int i = 1; i < rest.n; i++)
		cr_assert_gt(rest.cookies[i], rest.cookies[i - 1], "cookies grow");
	check_invariants();
}

/* ---- file contents ---- */

Test(catalog, extents_lookup_at_offsets, .init = setup, .fini = teardown)
{
	struct cat_extent e[8];
	uint64_t f = mkfile(ROOT, "f");
	/* [0,100) chunk 1; [100,250) bytes 50.. of chunk 2; hole; [400,500) chunk 3. */
	add_chunk(f, 0, 100, 1);
	add_ext(f, 100, 150, 2, 50, 300, true);
	add_chunk(f, 400, 100, 3);
	OK(cat_file_commit(fx.cat, f, 600, 12345, false));
	struct cat_inode in = attr(f);
	cr_assert_eq(in.size, 600);
	cr_assert_eq(in.mtime_ns, 12345);

	static const struct {
		uint64_t off;
		int n;
		uint64_t first;
	} cases[] = {
		{ 0, 3, 0 }, { 50, 3, 0 }, { 99, 3, 0 }, { 100, 2, 100 }, { 120, 2, 100 },
		{ 249, 2, 100 }, { 250, 1, 400 }, { 300, 1, 400 }, { 400, 1, 400 }, { 499, 1, 400 },
		{ 500, 0, 0 }, { 100000, 0, 0 },
	};
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int n = pass == 0 ? cat_extents(fx.cat, f, cases[i].off, e, 8)
					  : cat_pending_extents(fx.cat, f, cases[i].off, e, 8);
			cr_assert_eq(n, cases[i].n, "at %lu: %d extents", cases[i].off, n);
			if (n > 0)
				cr_assert_eq(e[0].off, cases[i].first, "at %lu", cases[i].off);
		}
	}
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 8), 3);
	expect_extent(&e[0], 0, 100, 1, 0);
	expect_extent(&e[1], 100, 150, 2, 50);
	cr_assert_eq(e[1].chunk_len, 300);
	expect_extent(&e[2], 400, 100, 3, 0);
	/* max limits the count, also when the first extent straddles off. */
	cr_assert_eq(cat_extents(fx.cat, f, 50, e, 1), 1);
	expect_extent(&e[0], 0, 100, 1, 0);
	cr_assert_eq(cat_extents(fx.cat, f, 100, e, 1), 1);
	expect_extent(&e[0], 100, 150, 2, 50);
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 0), 0);
	FAILS(cat_extents(fx.cat, 9999, 0, e, 8), ENOENT);
	cr_assert_eq(cat_extents(fx.cat, mkfile(ROOT, "empty"), 0, e, 8), 0);
	check_invariants();
}

Test(catalog, pending_add_rejects_overlaps_and_bad_extents, .init = setup, .fini = teardown)
{
	struct cat_extent e = { .off = 0, .len = 10, .chunk_off = 0, .chunk_len = 10 };
	bool must;
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 200, 100, 1);
	add_chunk(f, 100, 100, 2); /* before, touching: fine */
	ts_hash(e.hash, HASH_FILL, 3);
	static const struct {
		uint64_t off, len;
	} overlapping[] = { { 150, 10 }, { 50, 51 }, { 290, 20 }, { 0, 1000 }, { 299, 1 } };
	for (size_t i = 0; i < sizeof(overlapping) / sizeof(overlapping[0]); i++) {
		e.off = overlapping[i].off;
		e.len = e.chunk_len = overlapping[i].len;
		FAILS(cat_pending_add(fx.cat, f, &e, &must), EINVAL);
	}
	e.off = 300;
	e.len = e.chunk_len = 10;
	OK(cat_pending_add(fx.cat, f, &e, &must));
	cr_assert(must);
	OK(cat_chunk_stored(fx.cat, e.hash, 1, 5));
	e.off = 1000;
	OK(cat_pending_add(fx.cat, f, &e, &must));
	cr_assert_not(must, "a stored chunk need not be written again");

	e.off = 2000;
	e.len = 0;
	FAILS(cat_pending_add(fx.cat, f, &e, &must), EINVAL);
	e.len = 5;
	e.chunk_off = 6; /* 6 + 5 > 10 */
	FAILS(cat_pending_add(fx.cat, f, &e, &must), EINVAL);
	e.chunk_off = 0;
	e.chunk_len = 11; /* the chunk's row says 10 */
	e.len = 5;
	FAILS(cat_pending_add(fx.cat, f, &e, &must), EINVAL);
	e.chunk_len = 10;
	FAILS(cat_pending_add(fx.cat, ROOT, &e, &must), EISDIR);
	FAILS(cat_pending_add(fx.cat, 9999, &e, &must), ENOENT);
	uint8_t unknown[CAT_HASH_LEN];
	ts_hash(unknown, HASH_FILL, 999);
	FAILS(cat_chunk_stored(fx.cat, unknown, 1, 5), ENOENT);
	cr_assert_eq(refcount(3), 2);
	check_invariants();
}

Test(catalog, commit_requires_stored_chunks_and_fitting_size, .init = setup, .fini = teardown)
{
	struct cat_extent e;
	uint64_t f = mkfile(ROOT, "f");
	bool must = add_ext(f, 0, 100, 1, 0, 100, false);
	cr_assert(must);
	FAILS(cat_file_commit(fx.cat, f, 100, ts_now_ns(), false), EIO);
	cr_assert_eq(cat_extents(fx.cat, f, 0, &e, 1), 0, "nothing committed");
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 1);
	OK(cat_chunk_stored(fx.cat, h, 2, 60));
	FAILS(cat_file_commit(fx.cat, f, 99, ts_now_ns(), false), EINVAL);
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), true));
	OK(cat_file_commit(fx.cat, f, 150, ts_now_ns(), false)); /* a hole at the end */
	cr_assert_eq(attr(f).size, 150);
	cr_assert_eq(cat_extents(fx.cat, f, 0, &e, 1), 1);
	FAILS(cat_file_commit(fx.cat, ROOT, 0, ts_now_ns(), false), EISDIR);
	check_invariants();
}

Test(catalog, commit_replaces_extents_and_reclaims_unreferenced, .init = setup,
     .fini = teardown)
{
	struct cat_extent e[4];
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 100, 1);
	add_chunk(f, 100, 100, 2);
	OK(cat_file_commit(fx.cat, f, 200, ts_now_ns(), false));
	cr_assert_eq(refcount(1), 2, "pending + committed");
	/* The writer rewrites the file: chunk 3 replaces chunk 1. */
	OK(cat_pending_drop(fx.cat, f));
	cr_assert_eq(refcount(1), 1);
	add_chunk(f, 0, 100, 3);
	add_chunk(f, 100, 100, 2);
	cr_assert_eq(fx.rec.n, 0);
	OK(cat_file_commit(fx.cat, f, 200, ts_now_ns(), false));
	cr_assert_eq(times_reclaimed(1), 1);
	cr_assert_eq(fx.rec.n, 1);
	cr_assert_eq(refcount(1), -1);
	cr_assert_eq(refcount(2), 2);
	cr_assert_eq(refcount(3), 2);
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 4), 2);
	expect_extent(&e[0], 0, 100, 3, 0);
	expect_extent(&e[1], 100, 100, 2, 0);
	/* Committing again unchanged changes no count. */
	OK(cat_file_commit(fx.cat, f, 200, ts_now_ns(), false));
	cr_assert_eq(refcount(2), 2);
	OK(cat_pending_drop(fx.cat, f));
	cr_assert_eq(refcount(2), 1);
	cr_assert_eq(fx.rec.n, 1);
	check_invariants();
}

Test(catalog, one_chunk_referenced_many_times, .init = setup, .fini = teardown)
{
	enum { N = 1000, LEN = 4096 };
	struct cat_extent e[4];
	uint64_t ino;
	uint64_t f = mkfile(ROOT, "zeros");
	uint64_t g = mkfile(ROOT, "more");
	for (int i = 0; i < N; i++)
		add_chunk(f, (uint64_t)i * LEN, LEN, 7);
	add_chunk(g, 0, LEN, 7);
	cr_assert_eq(refcount(7), N + 1);
	OK(cat_file_commit(fx.cat, f, (uint64_t)N * LEN, ts_now_ns(), false));
	cr_assert_eq(refcount(7), 2 * N + 1);
	cr_assert_eq(cat_extents(fx.cat, f, (uint64_t)N * LEN - 1, e, 4), 1);
	OK(cat_pending_drop(fx.cat, f));
	cr_assert_eq(refcount(7), N + 1);
	OK(cat_pending_drop(fx.cat, g));
	OK(cat_file_truncate(fx.cat, f, LEN * 10 + 5));
	cr_assert_eq(refcount(7), 11);
	OK(cat_unlink(fx.cat, ROOT, "zeros", &ino));
	OK(cat_inode_release(fx.cat, f));
	cr_assert_eq(times_reclaimed(7), 1, "reclaimed exactly once");
	cr_assert_eq(refcount(7), -1);
	check_invariants();
}

Test(catalog, pending_truncate_straddling, .init = setup, .fini = teardown)
{
	struct cat_extent e[4];
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 100, 1);
	add_chunk(f, 100, 100, 2);
	add_ext(f, 200, 100, 3, 0, 100, false); /* never stored */
	OK(cat_pending_truncate(fx.cat, f, 150));
	cr_assert_eq(cat_pending_extents(fx.cat, f, 0, e, 4), 2);
	expect_extent(&e[0], 0, 100, 1, 0);
	expect_extent(&e[1], 100, 50, 2, 0);
	cr_assert_eq(times_reclaimed(3), 1, "the dropped chunk's object is removed");
	cr_assert_eq(refcount(2), 1, "shortening keeps the reference");
	OK(cat_pending_truncate(fx.cat, f, 100)); /* exactly at a boundary */
	cr_assert_eq(cat_pending_extents(fx.cat, f, 0, e, 4), 1);
	cr_assert_eq(times_reclaimed(2), 1);
	OK(cat_pending_truncate(fx.cat, f, 1000)); /* past the end: nothing */
	cr_assert_eq(cat_pending_extents(fx.cat, f, 0, e, 4), 1);
	add_chunk(f, 100, 100, 4); /* the writer goes on from the cut */
	OK(cat_file_commit(fx.cat, f, 200, ts_now_ns(), false));
	OK(cat_pending_truncate(fx.cat, f, 0));
	cr_assert_eq(cat_pending_extents(fx.cat, f, 0, e, 4), 0);
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 4), 2, "committed extents untouched");
	check_invariants();
}

Test(catalog, file_truncate_straddling_and_growing, .init = setup, .fini = teardown)
{
	struct cat_extent e[4];
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 100, 1);
	add_chunk(f, 100, 100, 2);
	add_chunk(f, 200, 100, 3);
	OK(cat_file_commit(fx.cat, f, 300, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, f));
	int64_t before = ts_now_ns();
	OK(cat_file_truncate(fx.cat, f, 150));
	struct cat_inode in = attr(f);
	cr_assert_eq(in.size, 150);
	cr_assert_geq(in.mtime_ns, before);
	cr_assert_geq(in.ctime_ns, before);
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 4), 2);
	expect_extent(&e[1], 100, 50, 2, 0);
	cr_assert_eq(times_reclaimed(3), 1);
	cr_assert_eq(fx.rec.n, 1);
	OK(cat_file_truncate(fx.cat, f, 1 << 20));
	cr_assert_eq(attr(f).size, 1 << 20);
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 4), 2, "growing leaves a hole");
	cr_assert_eq(cat_extents(fx.cat, f, 150, e, 4), 0);
	OK(cat_file_truncate(fx.cat, f, 0));
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 4), 0);
	cr_assert_eq(fx.rec.n, 3);
	FAILS(cat_file_truncate(fx.cat, ROOT, 0), EISDIR);
	check_invariants();
}

Test(catalog, pending_from_committed_copies_and_counts, .init = setup, .fini = teardown)
{
	struct cat_extent e[4];
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 100, 1);
	add_chunk(f, 100, 100, 2);
	OK(cat_file_commit(fx.cat, f, 200, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, f));
	cr_assert_eq(cat_pending_extents(fx.cat, f, 0, e, 4), 0);
	cr_assert_eq(refcount(1), 1);

	/* A stale pending list is replaced, its only chunk reclaimed. */
	add_ext(f, 0, 50, 9, 0, 50, false);
	OK(cat_pending_from_committed(fx.cat, f));
	cr_assert_eq(times_reclaimed(9), 1);
	cr_assert_eq(cat_pending_extents(fx.cat, f, 0, e, 4), 2);
	expect_extent(&e[0], 0, 100, 1, 0);
	expect_extent(&e[1], 100, 100, 2, 0);
	cr_assert_eq(refcount(1), 2);
	cr_assert_eq(refcount(2), 2);
	/* Appending and committing. */
	add_chunk(f, 200, 100, 3);
	OK(cat_file_commit(fx.cat, f, 300, ts_now_ns(), false));
	cr_assert_eq(cat_extents(fx.cat, f, 0, e, 4), 3);
	cr_assert_eq(refcount(3), 2);
	OK(cat_pending_from_committed(fx.cat, f)); /* already equal: no change */
	cr_assert_eq(refcount(1), 2);
	FAILS(cat_pending_from_committed(fx.cat, 9999), ENOENT);
	check_invariants();
}

/* ---- reference counts: catalog_refs.c's statements, one path at a time ---- */

/* The catalog's own check of invariant 1 (and 2, 3) after one step, naming it:
 * a count that drifted from its rows fails the step that moved it. */
static void counts_hold(const char *after)
{
	int rc = cat_check(fx.cat);
	cr_assert_eq(rc, 0, "cat_check after %s returned %d", after, rc);
}
#define STEP(expr)                  \
	do {                        \
		OK(expr);           \
		counts_hold(#expr); \
	} while (0)

/* Every call that moves counts, each followed by cat_check, with the counts
 * it must leave: a write (pending add, commit), an overwrite, a writer's
 * start, cut and drop, truncation, unlink and release, batched release and
 * drop of data, and the recovery at open. */
Test(catalog, every_path_that_moves_counts_keeps_them_equal_to_rows, .init = setup,
     .fini = teardown)
{
	uint64_t ino, inos[2];
	uint64_t f = mkfile(ROOT, "f");
	/* write: one reference per pending row (R_TAKE_ONE), chunk 1 twice */
	add_chunk(f, 0, 100, 1);
	add_chunk(f, 100, 100, 2);
	add_chunk(f, 200, 100, 1);
	counts_hold("pending adds");
	cr_assert_eq(refcount(1), 2);
	STEP(cat_file_commit(fx.cat, f, 300, ts_now_ns(), false)); /* R_P_NOT_X_TAKE */
	cr_assert_eq(refcount(1), 4);
	cr_assert_eq(refcount(2), 2);
	/* overwrite: the writer cuts at 100 (R_P_FROM_DROP) and appends chunk 3 */
	STEP(cat_pending_truncate(fx.cat, f, 100));
	cr_assert_eq(refcount(1), 3);
	cr_assert_eq(refcount(2), 1);
	add_chunk(f, 100, 50, 3);
	counts_hold("a pending add after a cut");
	STEP(cat_file_commit(fx.cat, f, 150, ts_now_ns(), true)); /* R_X_NOT_P_DROP, durable */
	cr_assert_eq(refcount(1), 2);
	cr_assert_eq(refcount(2), -1, "no row names it: reclaimed");
	cr_assert_eq(refcount(3), 2);
	STEP(cat_pending_drop(fx.cat, f));
	cr_assert_eq(refcount(1), 1);
	/* a writer's start over a stale pending list (R_P_NOT_X_DROP, R_X_NOT_P_TAKE) */
	add_ext(f, 0, 10, 4, 0, 10, false);
	STEP(cat_pending_from_committed(fx.cat, f));
	cr_assert_eq(refcount(4), -1);
	cr_assert_eq(refcount(1), 2);
	cr_assert_eq(refcount(3), 2);
	STEP(cat_pending_drop(fx.cat, f));
	/* truncation with no writer (R_X_FROM_DROP): shortened, then dropped */
	STEP(cat_file_truncate(fx.cat, f, 120));
	cr_assert_eq(refcount(3), 1);
	STEP(cat_file_truncate(fx.cat, f, 100));
	cr_assert_eq(refcount(3), -1);
	cr_assert_eq(refcount(1), 1);

	/* unlink keeps the counts until the release (R_X_FROM_DROP, R_P_FROM_DROP) */
	uint64_t g = mkfile(ROOT, "g");
	add_chunk(g, 0, 100, 1);
	add_chunk(g, 100, 100, 5);
	STEP(cat_file_commit(fx.cat, g, 200, ts_now_ns(), false));
	struct cat_inode in;
	STEP(cat_link(fx.cat, g, ROOT, "g2", &in));
	STEP(cat_unlink(fx.cat, ROOT, "g", &ino));
	STEP(cat_inode_release(fx.cat, g)); /* still linked: a no-op */
	STEP(cat_unlink(fx.cat, ROOT, "g2", &ino));
	cr_assert_eq(refcount(5), 2, "pending + committed, until the release");
	STEP(cat_inode_release(fx.cat, g));
	cr_assert_eq(refcount(5), -1);
	cr_assert_eq(refcount(1), 1);

	/* batched release (R_X_RELEASED_DROP, R_P_RELEASED_DROP) and drop of
	 * data, which keeps the writer's pending rows */
	inos[0] = mkfile(ROOT, "h0");
	inos[1] = mkfile(ROOT, "h1");
	for (int i = 0; i < 2; i++) {
		add_chunk(inos[i], 0, 100, 6);
		add_chunk(inos[i], 100, 100, 1);
		STEP(cat_file_commit(fx.cat, inos[i], 200, ts_now_ns(), false));
	}
	STEP(cat_pending_drop(fx.cat, inos[1]));
	STEP(cat_unlink(fx.cat, ROOT, "h0", &ino));
	STEP(cat_unlink(fx.cat, ROOT, "h1", &ino));
	cr_assert_eq(refcount(6), 3);
	STEP(cat_inodes_drop_data(fx.cat, inos, 2));
	cr_assert_eq(refcount(6), 1, "h0's pending row is left");
	STEP(cat_inodes_release(fx.cat, inos, 2));
	cr_assert_eq(refcount(6), -1);
	cr_assert_eq(refcount(1), 1);

	/* recovery at open (R_P_ALL_DROP, R_X_UNLINKED_DROP) */
	uint64_t k = mkfile(ROOT, "k");
	add_chunk(k, 0, 100, 7);
	STEP(cat_file_commit(fx.cat, k, 100, ts_now_ns(), false));
	add_chunk(k, 100, 100, 8);
	add_chunk(f, 100, 100, 8);
	STEP(cat_unlink(fx.cat, ROOT, "k", &ino));
	reopen();
	counts_hold("the recovery at open");
	cr_assert_eq(refcount(7), -1);
	cr_assert_eq(refcount(8), -1);
	cr_assert_eq(refcount(1), 1);
	check_invariants();
}

/* ---- recovery and files that are not catalogs ---- */

Test(catalog, reopen_drops_pending_and_unlinked_inodes, .init = setup, .fini = teardown)
{
	struct cat_extent e[4];
	struct cat_inode in;
	uint64_t ino;
	uint64_t keep = mkfile(ROOT, "keep");
	add_chunk(keep, 0, 100, 1);
	add_chunk(keep, 100, 100, 2);
	OK(cat_file_commit(fx.cat, keep, 200, ts_now_ns(), false));
	add_chunk(keep, 200, 100, 3); /* appended, never committed */
	uint64_t fresh = mkfile(ROOT, "fresh");
	add_ext(fresh, 0, 100, 4, 0, 100, false); /* a writer that never committed */
	add_chunk(fresh, 100, 100, 2);
	uint64_t gone = mkfile(ROOT, "gone");
	add_chunk(gone, 0, 100, 5);
	add_chunk(gone, 100, 100, 1);
	OK(cat_file_commit(fx.cat, gone, 200, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, gone));
	OK(cat_unlink(fx.cat, ROOT, "gone", &ino)); /* open when the daemon died */
	uint64_t dir = mkdir_(ROOT, "d");
	OK(cat_rmdir(fx.cat, ROOT, "d", &ino));
	cr_assert_eq(fx.rec.n, 0);

	reopen(); /* as after a crash: nothing was released */
	cr_assert_eq(times_reclaimed(3), 1);
	cr_assert_eq(times_reclaimed(4), 1);
	cr_assert_eq(times_reclaimed(5), 1);
	cr_assert_eq(fx.rec.n, 3);
	cr_assert_eq(refcount(1), 1);
	cr_assert_eq(refcount(2), 1);
	cr_assert_eq(cat_pending_extents(fx.cat, keep, 0, e, 4), 0);
	cr_assert_eq(cat_pending_extents(fx.cat, fresh, 0, e, 4), 0);
	cr_assert_eq(cat_extents(fx.cat, keep, 0, e, 4), 2);
	cr_assert_eq(attr(keep).size, 200);
	FAILS(cat_getattr(fx.cat, gone, &in), ENOENT);
	FAILS(cat_getattr(fx.cat, dir, &in), ENOENT);
	cr_assert_eq(attr(ROOT).nlink, 2);
	check_invariants();
}

Test(catalog, failed_reclaim_keeps_the_chunk_for_a_later_sweep, .init = setup,
     .fini = teardown)
{
	uint64_t f = mkfile(ROOT, "f");
	add_ext(f, 0, 10, 1, 0, 10, false);
	fx.rec.fail_next = 1;
	OK(cat_pending_drop(fx.cat, f)); /* the call itself succeeded */
	cr_assert_eq(fx.rec.n, 0);
	cr_assert_eq(refcount(1), 0, "kept at zero");
	OK(cat_check(fx.cat));
	reopen();
	cr_assert_eq(times_reclaimed(1), 1, "the sweep at open finishes it");
	cr_assert_eq(refcount(1), -1);
	check_invariants();
}

/* A stored chunk whose reclaim failed may have lost its object: a new
 * reference must store it again. */
Test(catalog, referencing_a_zero_count_chunk_requires_storing_it_again, .init = setup,
     .fini = teardown)
{
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 10, 2);
	OK(cat_file_commit(fx.cat, f, 10, ts_now_ns(), false));
	OK(cat_file_truncate(fx.cat, f, 0));
	fx.rec.fail_next = 1;
	OK(cat_pending_drop(fx.cat, f));
	cr_assert_eq(refcount(2), 0);
	cr_assert(add_ext(f, 0, 10, 2, 0, 10, false), "must store again");
	cr_assert_eq(refcount(2), 1);
	FAILS(cat_file_commit(fx.cat, f, 10, ts_now_ns(), false), EIO);
	OK(cat_pending_drop(fx.cat, f));
	cr_assert_eq(times_reclaimed(2), 1);
	check_invariants();
}

static void write_sql(const char *path, const char *sql)
{
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(path, &db), SQLITE_OK);
	char *err = NULL;
	int src = sqlite3_exec(db, sql, NULL, NULL, &err);
	cr_assert_eq(src, SQLITE_OK, "%s: %s", sql, err ? err : "?");
	sqlite3_close(db);
}

Test(catalog, newer_schema_is_eproto, .init = setup, .fini = teardown)
{
	struct cat *other = NULL;
	cat_close(fx.cat);
	fx.cat = NULL;
	write_sql(fx.path, "UPDATE meta SET value = 8 WHERE key = 'schema_version';"
			   "PRAGMA user_version = 8;");
	FAILS(cat_open(fx.path, 0, 0, NULL, NULL, &other), EPROTO);
	cr_assert_null(other);
	write_sql(fx.path, "PRAGMA user_version = 7;"); /* only meta says 8 */
	FAILS(cat_open(fx.path, 0, 0, NULL, NULL, &other), EPROTO);
	write_sql(fx.path, "UPDATE meta SET value = 7 WHERE key = 'schema_version';");
	open_catalog();
	cr_assert_eq(cat_schema_version(fx.cat), CAT_SCHEMA_VERSION);
	check_invariants();
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

Test(catalog, non_catalog_files_are_einval_and_untouched, .init = setup, .fini = teardown)
{
	struct cat *other = NULL;
	char path[192];
	struct stat st;
	static const char long_text[] = "a text file longer than an SQLite header, which is"
					" one hundred bytes long; this one is longer than that.";
	static const char *const texts[] = { "x", "hello, world\n", long_text };
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		snprintf(path, sizeof(path), "%s/text%zu", fx.dir, i);
		write_file(path, texts[i], strlen(texts[i]));
		FAILS(cat_open(path, 0, 0, NULL, NULL, &other), EINVAL);
		cr_assert_null(other);
		cr_assert_eq(stat(path, &st), 0);
		cr_assert_eq((size_t)st.st_size, strlen(texts[i]), "the file is left alone");
	}
	snprintf(path, sizeof(path), "%s/foreign.db", fx.dir);
	write_sql(path, "PRAGMA application_id = 1234; CREATE TABLE t(x);");
	FAILS(cat_open(path, 0, 0, NULL, NULL, &other), EINVAL);
	snprintf(path, sizeof(path), "%s/nometa.db", fx.dir);
	write_sql(path, "CREATE TABLE t(x);");
	FAILS(cat_open(path, 0, 0, NULL, NULL, &other), EINVAL);
	snprintf(path, sizeof(path), "%s/fakeid.db", fx.dir);
	write_sql(path, "PRAGMA application_id = 1667985524; CREATE TABLE t(x);");
	FAILS(cat_open(path, 0, 0, NULL, NULL, &other), EINVAL);
	snprintf(path, sizeof(path), "%s/no/such/dir.db", fx.dir);
	FAILS(cat_open(path, 0, 0, NULL, NULL, &other), ENOENT);
	/* An empty file becomes a catalog. */
	snprintf(path, sizeof(path), "%s/empty.db", fx.dir);
	write_file(path, "", 0);
	OK(cat_open(path, 5, 6, NULL, NULL, &other));
	struct cat_inode root;
	OK(cat_getattr(other, ROOT, &root));
	cr_assert_eq(root.uid, 5);
	cr_assert_eq(root.gid, 6);
	OK(cat_check(other));
	cat_close(other);
	check_invariants();
}

Test(catalog, check_reports_a_wrong_refcount, .init = setup, .fini = teardown)
{
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 10, 1);
	OK(cat_check(fx.cat));
	cat_close(fx.cat);
	fx.cat = NULL;
	write_sql(fx.path, "UPDATE chunks SET refcount = refcount + 1;"
			   "INSERT INTO extents VALUES(2, 5, 10, x'00', 0);");
	open_catalog();
	FAILS(cat_check(fx.cat), EUCLEAN);
}

/* ---- accounting, iteration, threads ---- */

Test(catalog, stats_and_chunk_iteration, .init = setup, .fini = teardown)
{
	struct cat_stats s;
	uint64_t f = mkfile(ROOT, "f");
	mkdir_(ROOT, "d");
	for (int i = 0; i < 300; i++) /* more than one cat_chunks batch */
		add_chunk(f, (uint64_t)i * 10, 10, 100 + i);
	add_chunk(f, 3000, 10, 100); /* a duplicate */
	add_ext(f, 3010, 10, 999, 0, 20, false); /* not stored */
	OK(cat_pending_truncate(fx.cat, f, 3010));
	OK(cat_file_commit(fx.cat, f, 4000, ts_now_ns(), false));
	OK(cat_stats(fx.cat, &s));
	cr_assert_eq(s.inodes, 3);
	cr_assert_eq(s.files, 1);
	cr_assert_eq(s.logical_bytes, 4000);
	cr_assert_eq(s.chunks, 300);
	cr_assert_eq(s.chunk_plain_bytes, 3000);
	cr_assert_eq(s.chunk_stored_bytes, 300 * 6);
	cr_assert_eq(s.referenced_bytes, 3010);
	cr_assert_eq(refcount(100), 4);
	cr_assert_eq(refcount(399), 2);
	check_invariants();
}

struct creator {
	struct cat *cat;
	int id;
};

static void *create_many(void *arg)
{
	struct creator *c = arg;
	char name[32];
	struct cat_inode in;
	struct cat_extent e = { .len = 10, .chunk_len = 10 };
	bool must;
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "t%d-%d", c->id, i);
		if (cat_create(c->cat, ROOT, name, S_IFREG | 0644, 0, 0, 0, NULL, &in) != 0)
			return (void *)1;
		ts_hash(e.hash, HASH_FILL, i);
		if (cat_pending_add(c->cat, in.ino, &e, &must) != 0)
			return (void *)2;
		if (cat_getattr(c->cat, in.ino, &in) != 0)
			return (void *)3;
	}
	return NULL;
}

Test(catalog, calls_from_threads_are_serialized, .init = setup, .fini = teardown)
{
	pthread_t th[4];
	struct creator c[4];
	struct cat_stats s;
	for (int i = 0; i < 4; i++) {
		c[i] = (struct creator){ .cat = fx.cat, .id = i };
		cr_assert_eq(pthread_create(&th[i], NULL, create_many, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *ret;
		pthread_join(th[i], &ret);
		cr_assert_null(ret, "thread %d failed at step %ld", i, (long)ret);
	}
	OK(cat_stats(fx.cat, &s));
	cr_assert_eq(s.files, 800);
	cr_assert_eq(refcount(0), 4);
	check_invariants();
}

Test(catalog, catalog_id_is_random_and_survives_reopening, .init = setup, .fini = teardown)
{
	char id[CAT_HASH_LEN + 1], again[CAT_HASH_LEN + 1];
	cr_assert_eq(cat_catalog_id(fx.cat, id, sizeof(id)), 0);
	cr_assert_eq(strlen(id), 32);
	cat_close(fx.cat);
	fx.cat = NULL;
	open_catalog();
	cr_assert_eq(cat_catalog_id(fx.cat, again, sizeof(again)), 0);
	cr_assert_str_eq(id, again);
}

/* Index rows missing (the index declared partial while rows moved): quick_check
 * sees nothing, integrity_check does, and cat_check reports it. */
Test(catalog, missing_index_rows_pass_quick_check_fail_check_and_an_open_after_a_crash, .init = setup,
     .fini = teardown)
{
	struct cat_inode in;
	OK(cat_create(fx.cat, CAT_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, NULL, &in));
	OK(cat_create(fx.cat, CAT_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, NULL, &in));
	OK(cat_integrity(fx.cat, true));
	OK(cat_check(fx.cat));
	cat_close(fx.cat);
	fx.cat = NULL;
	write_sql(fx.path, "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql ="
			   " 'CREATE INDEX dirents_by_ino ON dirents(ino) WHERE 0'"
			   " WHERE name = 'dirents_by_ino';");
	write_sql(fx.path, "CREATE TEMP TABLE x AS SELECT parent, name, ino FROM dirents;"
			   "DELETE FROM dirents; INSERT INTO dirents(parent, name, ino) SELECT * FROM x;");
	write_sql(fx.path, "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql ="
			   " 'CREATE INDEX dirents_by_ino ON dirents(ino)' WHERE name = 'dirents_by_ino';");
	open_catalog(); /* quick_check at open: index contents are not its business */
	cr_assert_eq(cat_integrity(fx.cat, false), 0);
	cr_assert_eq(cat_integrity(fx.cat, true), -EUCLEAN);
	cr_assert_eq(cat_check(fx.cat), -EUCLEAN);
	cat_close(fx.cat);
	fx.cat = NULL;

	/* a writer that dies without closing leaves its WAL: the next open runs
	 * the full integrity_check and refuses the file */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		sqlite3 *db = NULL;
		if (sqlite3_open(fx.path, &db) != SQLITE_OK ||
		    sqlite3_exec(db, "INSERT INTO meta(key, value) VALUES('test', 1)", NULL,
				 NULL, NULL) != SQLITE_OK)
			_exit(1);
		_exit(0); /* no sqlite3_close: as after kill -9 */
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char wal[sizeof(fx.path) + 8];
	struct stat st;
	snprintf(wal, sizeof(wal), "%s-wal", fx.path);
	cr_assert(stat(wal, &st) == 0 && st.st_size > 0, "no WAL left behind");
	struct cat *cat = NULL;
	FAILS(cat_open(fx.path, 0, 0, NULL, NULL, &cat), EIO);
	cr_assert_null(cat);
}

/* catalog.c invariant 13: a reclaim after a commit that was not durable
 * waits for the objects sync, which runs with the lock released (it reads
 * the catalog here); a durable commit syncs its own objects and costs none;
 * a sync that fails keeps the rows for a later sweep. */
struct objects_syncs {
	int n, fail_next;
	int reclaims_before; /* fx.rec.n at the last sync */
};

static int record_objects_sync(void *arg)
{
	struct objects_syncs *s = arg;
	struct cat_inode in;
	OK(cat_getattr(fx.cat, ROOT, &in)); /* would deadlock under the lock */
	s->reclaims_before = fx.rec.n;
	if (s->fail_next > 0) {
		s->fail_next--;
		return -EIO;
	}
	s->n++;
	return 0;
}

Test(catalog, a_reclaim_after_a_commit_not_durable_waits_for_the_objects_sync, .init = setup,
     .fini = teardown)
{
	struct objects_syncs s = { 0 };
	cat_set_objects_sync(fx.cat, record_objects_sync, &s);
	uint64_t f = mkfile(ROOT, "f");
	add_chunk(f, 0, 100, 1);
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), true));
	cr_assert_eq(s.n, 0, "nothing to reclaim: no sync");
	/* rewritten without fsync: chunk 2 replaces chunk 1 */
	OK(cat_pending_drop(fx.cat, f));
	add_chunk(f, 0, 100, 2);
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), false));
	cr_assert_eq(s.n, 1, "the objects are synced before the reclaim");
	cr_assert_eq(s.reclaims_before, 0);
	cr_assert_eq(times_reclaimed(1), 1);
	/* rewritten with fsync: its own objects were synced, no second sync */
	OK(cat_pending_drop(fx.cat, f));
	add_chunk(f, 0, 100, 3);
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), true));
	cr_assert_eq(s.n, 1);
	cr_assert_eq(times_reclaimed(2), 1);
	/* a sync that fails: the dropped chunk stays, the next sweep takes it */
	OK(cat_pending_drop(fx.cat, f));
	add_chunk(f, 0, 100, 4);
	s.fail_next = 1;
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), false));
	cr_assert_eq(times_reclaimed(3), 0, "kept: its replacement may not be durable");
	cr_assert_eq(refcount(3), 0);
	OK(cat_pending_drop(fx.cat, f));
	add_chunk(f, 0, 100, 5);
	OK(cat_file_commit(fx.cat, f, 100, ts_now_ns(), false));
	cr_assert_geq(s.n, 2, "the next sweep syncs again");
	cr_assert_eq(times_reclaimed(3), 1);
	cr_assert_eq(times_reclaimed(4), 1);
	check_invariants();
}
