/* Tests of meta/manifest.c: manifests of generations and of the tree outside
 * generations are built from one catalog and applied into a fresh one, and
 * the two namespaces are compared in full (names byte for byte, attributes,
 * hard links, symlinks, holes, extents, generation rows); malformed,
 * corrupt, truncated and conflicting manifests are rejected with the catalog
 * unchanged. Every test ends with cat_check and cat_gen_check on both
 * catalogs. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "support.h"
#include "upload.h"

#define ROOT ((uint64_t)CAT_ROOT_INO)
#define HASH_FILL 0x5a /* the fill of this file's chunk hashes (ts_hash) */

static struct fixture {
	char dir[64];
	char src_path[128], dst_path[128];
	struct cat *src, *dst;
} fx;

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "mf");
	ts_cat_open_in(fx.dir, "src.db", fx.src_path, sizeof(fx.src_path), &fx.src);
	ts_cat_open_in(fx.dir, "dst.db", fx.dst_path, sizeof(fx.dst_path), &fx.dst);
}

static void teardown(void)
{
	ts_cat_close_checked(&fx.src);
	ts_cat_close_checked(&fx.dst);
	ts_tmpdir_remove(fx.dir);
}

/* Writes n extents of len bytes each at off, off + stride, … from chunks
 * seed, seed+1, … (each chunk of plain length 2*len, extent at chunk_off
 * len/2), then commits size. A stride > len leaves holes. */
static void write_extents(uint64_t ino, int seed, int n, uint64_t off, uint64_t len,
			  uint64_t stride, uint64_t size)
{
	OK(cat_pending_drop(fx.src, ino));
	for (int i = 0; i < n; i++) {
		struct cat_extent e = { .off = off + (uint64_t)i * stride, .len = len,
					.chunk_off = len / 2, .chunk_len = 2 * len };
		bool must = false;
		ts_hash(e.hash, HASH_FILL, seed + i);
		OK(cat_pending_add(fx.src, ino, &e, &must));
		if (must)
			OK(cat_chunk_stored(fx.src, e.hash, (uint8_t)(i & 1), len + (uint64_t)i));
	}
	OK(cat_file_commit(fx.src, ino, size, ts_now_ns(), false));
	OK(cat_pending_drop(fx.src, ino));
}

/* ---- manifests ---- */

struct text {
	char *p;
	size_t len;
};

static struct text gen_manifest(uint64_t id, uint32_t version)
{
	struct text t;
	OK(manifest_gen_build(fx.src, id, version, &t.p, &t.len));
	cr_assert_eq(strlen(t.p), t.len, "no NUL inside a manifest");
	return t;
}

static struct text tree_manifest(void)
{
	struct text t;
	OK(manifest_tree_build(fx.src, &t.p, &t.len));
	return t;
}

static int apply(struct text t)
{
	char err[MANIFEST_ERR_MAX];
	int rc = manifest_apply(fx.dst, t.p, t.len, err, sizeof(err));
	if (rc != 0)
		cr_log_info("apply: %s", err);
	return rc;
}

static void apply_ok(struct text t)
{
	char err[MANIFEST_ERR_MAX] = "";
	int rc = manifest_apply(fx.dst, t.p, t.len, err, sizeof(err));
	cr_assert_eq(rc, 0, "apply returned %d: %s\n%s", rc, err, t.p);
	OK(cat_check(fx.dst));
	OK(cat_gen_check(fx.dst));
}

/* apply_ok, then frees the text. */
static void apply_take(struct text t)
{
	apply_ok(t);
	free(t.p);
}

/* Rewrites the checksum line after an edit, so the edit itself is judged. */
static void resum(struct text *t)
{
	char *sum = t->p + t->len - (4 + HASH_HEX_LEN + 1);
	cr_assert(memcmp(sum, "sum ", 4) == 0);
	uint8_t h[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	hash_sha256(t->p, (size_t)(sum - t->p), h);
	hash_to_hex(h, hex);
	memcpy(sum + 4, hex, HASH_HEX_LEN);
}

/* Replaces the first occurrence of from by to (any lengths), then resums. */
static void edit(struct text *t, const char *from, const char *to)
{
	char *at = strstr(t->p, from);
	cr_assert_not_null(at, "\"%s\" not in the manifest", from);
	size_t pre = (size_t)(at - t->p), fl = strlen(from), tl = strlen(to);
	char *n = malloc(t->len - fl + tl + 1);
	memcpy(n, t->p, pre);
	memcpy(n + pre, to, tl);
	memcpy(n + pre + tl, at + fl, t->len - pre - fl + 1);
	free(t->p);
	t->p = n;
	t->len = t->len - fl + tl;
	resum(t);
}

/* A generation tree with everything a manifest must carry. Returns its id. */
static const char weird[] = "we\tird\nname %41 \xff\xfe-\x01";

static uint64_t rich_generation(uint64_t *series_out)
{
	uint64_t run = ts_mk(fx.src, ROOT, "run1", S_IFDIR | 0755, NULL);
	uint64_t series = ts_mk(fx.src, run, "ckpt", S_IFDIR | 0700, NULL);
	uint64_t root;
	uint64_t id = ts_mkgen(fx.src, series, "step-100", 100, true, &root);
	uint64_t sub = ts_mk(fx.src, root, "model", S_IFDIR | 0755, NULL);
	uint64_t deep = ts_mk(fx.src, sub, "deep", S_IFDIR | 0711, NULL);
	uint64_t w = ts_mk(fx.src, sub, weird, S_IFREG | 0600, NULL);
	write_extents(w, 1, 3, 0, 1000, 1000, 3000);
	uint64_t sparse = ts_mk(fx.src, deep, "sparse.bin", S_IFREG | 0644, NULL);
	write_extents(sparse, 10, 2, 4096, 500, 100000, 1 << 20); /* holes around */
	ts_mk(fx.src, root, "empty", S_IFREG | 0644, NULL);
	uint64_t shared = ts_mk(fx.src, root, "shared.pt", S_IFREG | 0644, NULL);
	write_extents(shared, 1, 1, 0, 1000, 1000, 1000); /* chunk 1 again */
	struct cat_inode l;
	OK(cat_link(fx.src, w, root, "hardlink", &l));
	OK(cat_link(fx.src, w, deep, "-", &l));
	ts_mk(fx.src, root, "link", S_IFLNK | 0777, "model/we\tird\n ../%");
	ts_mk(fx.src, root, "fifo", S_IFIFO | 0644, NULL);
	ts_mk(fx.src, root, "null", S_IFCHR | 0666, NULL);
	struct cat_inode set = { .mode = 0751, .uid = 42, .gid = 43, .atime_ns = -5,
				 .mtime_ns = 123456789, .ctime_ns = 987654321 };
	OK(cat_setattr(fx.src, root, CAT_SET_MODE | CAT_SET_UID | CAT_SET_GID | CAT_SET_ATIME |
			       CAT_SET_MTIME | CAT_SET_CTIME, &set, &l));
	OK(cat_gen_commit(fx.src, id, "dcp-metadata"));
	OK(cat_gen_pin(fx.src, id, true));
	if (series_out)
		*series_out = series;
	return id;
}

/* ---- round trips ---- */

Test(manifest, generation_and_tree_round_trip_into_a_fresh_catalog, .init = setup,
     .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	uint64_t latest = ts_mk(fx.src, ROOT, "latest", S_IFREG | 0644, NULL);
	write_extents(latest, 1, 1, 0, 1000, 1000, 1000); /* shares chunk 1 with the generation */
	ts_mk(fx.src, ROOT, "latest-link", S_IFLNK | 0777, "run1/ckpt/step-100");
	uint64_t side = ts_mk(fx.src, ROOT, "notes", S_IFDIR | 0755, NULL);
	uint64_t n = ts_mk(fx.src, side, "a", S_IFREG | 0644, NULL);
	struct cat_inode l;
	OK(cat_link(fx.src, n, ROOT, "a-too", &l));

	struct text tree = tree_manifest(), gen = gen_manifest(id, 1);
	cr_assert_null(strstr(tree.p, "step-100 "), "the tree leaves generation roots out:\n%s",
		       tree.p);
	cr_assert_not_null(strstr(gen.p, "\ngen 1 1 100 1 "), "%s", gen.p);
	cr_assert_not_null(strstr(gen.p, " run1/ckpt step-100 dcp-metadata\n"), "%s", gen.p);
	cr_assert_not_null(strstr(gen.p, " we%09ird%0Aname%20%2541%20%FF%FE-%01\n"), "%s", gen.p);
	cr_assert_not_null(strstr(gen.p, " %2D\n"), "a name \"-\" is escaped: %s", gen.p);

	apply_ok(tree);
	apply_ok(gen);
	ts_expect_same(fx.src, fx.dst);

	/* ids given out after a rebuild do not collide with the applied ones */
	struct cat_gen_spec spec = { .name = "step-200", .step = 200 };
	struct cat_inode in;
	uint64_t series, next = 0;
	OK(cat_lookup(fx.dst, ROOT, "run1", &in));
	OK(cat_lookup(fx.dst, in.ino, "ckpt", &in));
	series = in.ino;
	OK(cat_create_in_gen(fx.dst, series, "step-200", S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in,
			     &next));
	cr_assert_gt(next, id);
	free(tree.p);
	free(gen.p);
}

Test(manifest, generation_alone_creates_its_series_directories, .init = setup, .fini = teardown)
{
	uint64_t series;
	uint64_t id = rich_generation(&series);
	struct text gen = gen_manifest(id, 1);
	apply_ok(gen);

	struct cat_inode a, b, s;
	OK(cat_lookup(fx.dst, ROOT, "run1", &a));
	cr_assert(S_ISDIR(a.mode));
	OK(cat_lookup(fx.dst, a.ino, "ckpt", &s));
	cr_assert(S_ISDIR(s.mode));
	cr_assert_eq(s.nlink, 3, "the series counts the generation's root directory");
	OK(cat_lookup(fx.dst, s.ino, "step-100", &b));
	OK(cat_lookup(fx.src, series, "step-100", &a));
	char *x = ts_dump_from(fx.src, a.ino, "", false);
	char *y = ts_dump_from(fx.dst, b.ino, "", false);
	cr_assert_str_eq(x, y);
	struct cat_gen g;
	OK(cat_gen_get(fx.dst, id, &g));
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.series, s.ino);
	cr_assert_eq(g.root, b.ino);
	cr_assert(g.pinned);
	free(x);
	free(y);
	free(gen.p);
}

Test(manifest, a_single_file_generation_round_trips, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.src, ROOT, "lightning", S_IFDIR | 0755, NULL);
	uint64_t f1, f2;
	uint64_t g1 = ts_mkgen(fx.src, series, "epoch=1-step=30.ckpt", 30, false, &f1);
	write_extents(f1, 100, 4, 0, 2048, 2048, 4 * 2048);
	OK(cat_gen_commit(fx.src, g1, "trainer"));
	uint64_t g2 = ts_mkgen(fx.src, series, "epoch=2-step=60.ckpt", 60, false, &f2);
	write_extents(f2, 102, 4, 0, 2048, 2048, 4 * 2048 + 7); /* shares 2 chunks, tail hole */
	OK(cat_gen_commit(fx.src, g2, "trainer"));

	struct text tree = tree_manifest(), m1 = gen_manifest(g1, 1), m2 = gen_manifest(g2, 1);
	apply_ok(tree);
	apply_ok(m2);
	apply_ok(m1);
	ts_expect_same(fx.src, fx.dst);
	free(tree.p);
	free(m1.p);
	free(m2.p);
}

Test(manifest, a_rewritten_generation_is_built_at_its_new_version_only, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.src, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t id = ts_mkgen(fx.src, series, "step-5", 5, true, &root);
	uint64_t f = ts_mk(fx.src, root, "w.pt", S_IFREG | 0644, NULL);
	write_extents(f, 1, 2, 0, 100, 100, 200);
	OK(cat_gen_commit(fx.src, id, "trainer"));
	struct text v1 = gen_manifest(id, 1);

	OK(cat_gen_reopen(fx.src, id));
	char *p;
	size_t len;
	FAILS(manifest_gen_build(fx.src, id, 1, &p, &len), ESTALE);
	FAILS(manifest_gen_build(fx.src, id, 2, &p, &len), ESTALE); /* open */
	write_extents(f, 7, 3, 0, 100, 100, 300);
	OK(cat_gen_commit(fx.src, id, "trainer"));
	FAILS(manifest_gen_build(fx.src, id, 1, &p, &len), ESTALE);
	struct text v2 = gen_manifest(id, 2);
	cr_assert_not_null(strstr(v2.p, "\ngen 1 2 5 0 "), "%s", v2.p);

	apply_take(tree_manifest());
	apply_ok(v2);
	ts_expect_same(fx.src, fx.dst);
	struct cat_gen g;
	OK(cat_gen_get(fx.dst, id, &g));
	cr_assert_eq(g.version, 2);
	cr_assert_eq(g.state, GEN_COMMITTED);
	cr_assert_eq(g.backup_root, 0);
	/* the older version cannot be applied over it: same id */
	FAILS(apply(v1), EEXIST);
	free(v1.p);
	free(v2.p);
}

Test(manifest, only_committed_generations_have_manifests, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.src, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t r1, r2;
	uint64_t open = ts_mkgen(fx.src, series, "step-1", 1, true, &r1);
	uint64_t gone = ts_mkgen(fx.src, series, "step-2", 2, true, &r2);
	OK(cat_gen_commit(fx.src, gone, "trainer"));
	OK(cat_gen_delete(fx.src, gone, "keep", NULL, NULL));
	char *p;
	size_t len;
	FAILS(manifest_gen_build(fx.src, open, 1, &p, &len), ESTALE);
	FAILS(manifest_gen_build(fx.src, gone, 1, &p, &len), ESTALE);
	FAILS(manifest_gen_build(fx.src, 99, 1, &p, &len), ENOENT);
	/* the open generation's root is not in the tree either */
	struct text tree = tree_manifest();
	cr_assert_null(strstr(tree.p, "step-1"), "%s", tree.p);
	OK(cat_gen_abort(fx.src, open, "abandoned", NULL, NULL));
	free(tree.p);
}

Test(manifest, every_byte_of_a_name_round_trips, .init = setup, .fini = teardown)
{
	char name[256];
	int n = 0;
	for (int c = 1; c < 256; c++)
		if (c != '/')
			name[n++] = (char)c;
	name[n] = 0;
	cr_assert_eq(n, 254);
	uint64_t d = ts_mk(fx.src, ROOT, name, S_IFDIR | 0755, NULL);
	ts_mk(fx.src, d, "%", S_IFREG | 0644, NULL);
	ts_mk(fx.src, d, "%%25", S_IFREG | 0644, NULL);
	ts_mk(fx.src, d, " ", S_IFREG | 0644, NULL);
	ts_mk(fx.src, d, "-", S_IFREG | 0644, NULL);
	ts_mk(fx.src, d, "--", S_IFREG | 0644, NULL);
	ts_mk(fx.src, d, "\xc3\x28 not utf-8", S_IFREG | 0644, NULL);
	ts_mk(fx.src, d, "t", S_IFLNK | 0777, name);
	struct text tree = tree_manifest();
	for (const char *c = tree.p; *c; c++)
		cr_assert(*c == '\n' || (*c > 0x20 && *c < 0x7f) || *c == ' ',
			  "only printable ASCII, spaces and newlines");
	apply_ok(tree);
	ts_expect_same(fx.src, fx.dst);
	free(tree.p);
}

Test(manifest, tree_manifest_merges_with_existing_directories, .init = setup, .fini = teardown)
{
	uint64_t series;
	uint64_t id = rich_generation(&series);
	ts_mk(fx.src, series, "latest", S_IFLNK | 0777, "step-100");
	struct cat_inode set = { .mode = 0711, .uid = 7, .gid = 8, .atime_ns = 1, .mtime_ns = 2,
				 .ctime_ns = 3 };
	struct cat_inode out;
	OK(cat_setattr(fx.src, ROOT, CAT_SET_MODE | CAT_SET_UID | CAT_SET_GID | CAT_SET_ATIME |
			       CAT_SET_MTIME | CAT_SET_CTIME, &set, &out));
	struct text tree = tree_manifest(), gen = gen_manifest(id, 1);
	/* generation first: its series directories exist when the tree comes */
	apply_ok(gen);
	apply_ok(tree);
	ts_expect_same(fx.src, fx.dst);
	/* applying the tree again conflicts on its files: rejected whole */
	char *before = ts_dump(fx.dst);
	FAILS(apply(tree), EEXIST);
	char *after = ts_dump(fx.dst);
	cr_assert_str_eq(before, after);
	free(before);
	free(after);
	free(tree.p);
	free(gen.p);
}

/* ---- rejections: the catalog is unchanged ---- */

static void expect_rejected(struct text t, int err, const char *why)
{
	char *before = ts_dump(fx.dst);
	struct cat_stats s0, s1;
	OK(cat_stats(fx.dst, &s0));
	char msg[MANIFEST_ERR_MAX] = "";
	int rc = manifest_apply(fx.dst, t.p, t.len, msg, sizeof(msg));
	cr_assert_eq(rc, -err, "%s: apply returned %d (%s), expected %d", why, rc, msg, -err);
	cr_assert_neq(msg[0], 0, "%s: a message", why);
	char *after = ts_dump(fx.dst);
	cr_assert_str_eq(before, after, "%s: the catalog changed", why);
	OK(cat_stats(fx.dst, &s1));
	cr_assert(memcmp(&s0, &s1, sizeof(s0)) == 0, "%s: stats changed", why);
	OK(cat_check(fx.dst));
	free(before);
	free(after);
}

static struct text copy(struct text t)
{
	struct text c = { .p = malloc(t.len + 1), .len = t.len };
	memcpy(c.p, t.p, t.len + 1);
	return c;
}

Test(manifest, corrupt_or_truncated_manifests_are_rejected, .init = setup, .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct text gen = gen_manifest(id, 1);
	ts_mk(fx.src, ROOT, "already", S_IFDIR | 0755, NULL); /* dst has something to keep */
	OK(cat_create(fx.dst, ROOT, "mine", S_IFREG | 0644, 0, 0, 0, NULL, &(struct cat_inode){ 0 }));

	/* every truncation */
	for (size_t len = 0; len < gen.len; len += (len < 64 || gen.len - len < 80) ? 1 : 37) {
		struct text t = { .p = strndup(gen.p, len), .len = len };
		expect_rejected(t, len < 22 ? EINVAL : EBADMSG, "truncated");
		free(t.p);
	}
	/* a flipped bit anywhere after the header */
	for (size_t at = 30; at < gen.len; at += 53) {
		struct text t = copy(gen);
		t.p[at] ^= 0x04;
		char msg[MANIFEST_ERR_MAX];
		int rc = manifest_apply(fx.dst, t.p, t.len, msg, sizeof(msg));
		cr_assert(rc == -EBADMSG || rc == -EINVAL, "bit flip at %zu: %d", at, rc);
		free(t.p);
	}
	/* trailing garbage after the sum line */
	struct text t = copy(gen);
	t.p = realloc(t.p, t.len + 2);
	strcat(t.p, "x");
	t.len++;
	expect_rejected(t, EBADMSG, "trailing bytes");
	free(t.p);
	free(gen.p);
}

Test(manifest, malformed_manifests_are_rejected_naming_the_line, .init = setup, .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct text gen = gen_manifest(id, 1);
	static const struct {
		const char *from, *to;
		int err;
		const char *why;
	} cases[] = {
		{ "ckptfs-manifest 1 gen", "ckptfs-manifest 2 gen", EPROTONOSUPPORT, "version" },
		{ "ckptfs-manifest 1 gen", "ckptfs-manifest 1 tree", EINVAL, "kind" },
		{ " %2D\n", " a%2Fb\n", EINVAL, "a name with '/'" },
		{ " %2D\n", " ..\n", EINVAL, "a name \"..\"" },
		{ " %2D\n", " .\n", EINVAL, "a name \".\"" },
		{ " %2D\n", " a%00b\n", EINVAL, "a NUL" },
		{ " %2D\n", " a%zzb\n", EINVAL, "a bad escape" },
		{ " %2D\n", " a b\n", EINVAL, "a raw space" },
		{ " %2D\n", " sparse.bin\n", EINVAL, "a duplicate name" },
		{ " run1/ckpt ", " run1/../ckpt ", EINVAL, "a series with .." },
		{ " run1/ckpt ", " /run1/ckpt ", EINVAL, "an absolute series" },
		{ "\nino 0 ", "\nino 1 ", EINVAL, "inode ids out of order" },
		{ "\nent 0 ", "\nent 9999 ", EINVAL, "an entry in a missing inode" },
		{ "\next ", "\next 0 ", EINVAL, "an extra field" },
		{ "\nchunk ", "\nchunk 00", EINVAL, "a short hash" },
		{ "\ngen 1 1 ", "\ngen 1 0 ", EINVAL, "version 0" },
		{ "\ngen 1 1 ", "\ngen 1 1 -", EINVAL, "a negative step" },
		{ "\ngen ", "\nnope ", EINVAL, "an unknown record" },
		{ "\nino 1 ", "\nino  1 ", EINVAL, "an empty field" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct text t = copy(gen);
		edit(&t, cases[i].from, cases[i].to);
		expect_rejected(t, cases[i].err, cases[i].why);
		char msg[MANIFEST_ERR_MAX];
		manifest_apply(fx.dst, t.p, t.len, msg, sizeof(msg));
		if (cases[i].err == EINVAL)
			cr_assert(strncmp(msg, "line ", 5) == 0 || strncmp(msg, "inode ", 6) == 0 ||
					  strncmp(msg, "chunk ", 6) == 0,
				  "%s: \"%s\" names the line or the object", cases[i].why, msg);
		free(t.p);
	}
	/* a chunk that extends past the chunk's plain length */
	struct text t = copy(gen);
	char *x = strstr(t.p, "\next ");
	char *nl = strchr(x + 1, '\n');
	char line[256];
	memcpy(line, x + 1, (size_t)(nl - x - 1));
	line[nl - x - 1] = 0;
	unsigned long long ino, off, len, coff;
	char hex[65];
	cr_assert_eq(sscanf(line, "ext %llu %llu %llu %llu %64s", &ino, &off, &len, &coff, hex), 5);
	char bad[256];
	snprintf(bad, sizeof(bad), "ext %llu %llu %llu %llu %s", ino, off, len, coff + len + 1, hex);
	edit(&t, line, bad);
	expect_rejected(t, EINVAL, "an extent past its chunk");
	free(t.p);
	free(gen.p);
}

Test(manifest, conflicts_with_the_catalog_are_rejected_whole, .init = setup, .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct text gen = gen_manifest(id, 1);
	apply_ok(gen);
	expect_rejected(gen, EEXIST, "the same generation id again");

	struct text other = copy(gen);
	edit(&other, "\ngen 1 ", "\ngen 77 ");
	expect_rejected(other, EEXIST, "the same series/name");
	free(other.p);

	/* a series path through a file */
	struct text t = copy(gen);
	edit(&t, "\ngen 1 ", "\ngen 78 ");
	edit(&t, " run1/ckpt ", " run1/ckpt/step-100/model ");
	expect_rejected(t, EEXIST, "a series inside a generation");
	free(t.p);

	/* a chunk whose plain length disagrees with the catalog's row */
	t = copy(gen);
	edit(&t, "\ngen 1 ", "\ngen 79 ");
	edit(&t, " run1/ckpt ", " run2 ");
	char *c = strstr(t.p, "\nchunk ");
	char hex[65];
	unsigned long long plain;
	cr_assert_eq(sscanf(c + 1, "chunk %64s %llu", hex, &plain), 2);
	char from[128], to[128];
	snprintf(from, sizeof(from), "chunk %s %llu ", hex, plain);
	snprintf(to, sizeof(to), "chunk %s %llu ", hex, plain * 4);
	edit(&t, from, to);
	expect_rejected(t, EIO, "a chunk of another plain length");
	free(t.p);
	free(gen.p);
}

static char held_where[512]; /* where apply_held linked it */

static int apply_held(struct text t, const char *reason, char *err, size_t errsz)
{
	struct manifest *m;
	OK(manifest_parse(t.p, t.len, &m, err, errsz));
	int rc = manifest_apply_held(fx.dst, m, reason, held_where, sizeof(held_where), err, errsz);
	manifest_free(m);
	return rc;
}

/* M4: what conflicts by its name comes back HELD under a name that does
 * not, whole (its tree as the source's, its chunks counted); the same id
 * again, a tree manifest or no reason is refused with nothing changed. */
Test(manifest, a_conflicting_generation_is_applied_held_under_another_name, .init = setup,
     .fini = teardown)
{
	uint64_t series;
	uint64_t id = rich_generation(&series);
	struct text gen = gen_manifest(id, 1);
	apply_ok(gen);
	char err[MANIFEST_ERR_MAX] = "";
	uint8_t h1[CAT_HASH_LEN];
	struct cat_chunk_where w;
	ts_hash(h1, HASH_FILL, 1);
	OK(cat_chunk_where(fx.dst, h1, &w));
	cr_assert_eq(w.refcount, 2, "chunk 1: the weird file and shared.pt");

	/* the same series/name, another id: run1/ckpt/step-100.rebuild-77 */
	struct text other = copy(gen);
	edit(&other, "\ngen 1 ", "\ngen 77 ");
	int rc = apply_held(other, "rebuild: conflicts with run1/ckpt/step-100", err, sizeof(err));
	cr_assert_eq(rc, 0, "apply_held: %d %s", rc, err);
	cr_assert_str_eq(held_where, "run1/ckpt/step-100.rebuild-77");
	OK(cat_check(fx.dst));
	OK(cat_gen_check(fx.dst));
	struct cat_gen g;
	OK(cat_gen_get(fx.dst, 77, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_str_eq(g.name, "step-100.rebuild-77");
	cr_assert_str_eq(g.held, "rebuild: conflicts with run1/ckpt/step-100");
	cr_assert_str_eq(g.rule, MANIFEST_HELD_RULE);
	cr_assert_eq(g.step, 100);
	cr_assert(g.pinned);
	struct cat_inode run, ckpt, root;
	OK(cat_lookup(fx.dst, ROOT, "run1", &run));
	OK(cat_lookup(fx.dst, run.ino, "ckpt", &ckpt));
	OK(cat_lookup(fx.dst, ckpt.ino, "step-100.rebuild-77", &root));
	cr_assert_eq(root.ino, g.root);
	struct cat_gen src_g;
	OK(cat_gen_get(fx.src, id, &src_g));
	char *want = ts_dump_from(fx.src, src_g.root, "x", false);
	char *got = ts_dump_from(fx.dst, g.root, "x", false);
	/* the same but for the gen column (1 there, 77 here) */
	for (char *p = strstr(got, " gen 77"); p; p = strstr(p, " gen 77")) {
		memcpy(p, " gen 1", 6);
		memmove(p + 6, p + 7, strlen(p + 7) + 1);
	}
	cr_assert_str_eq(got, want);
	free(want);
	free(got);
	OK(cat_chunk_where(fx.dst, h1, &w));
	cr_assert_eq(w.refcount, 4, "chunk 1: counted for the held copy too");
	free(other.p);

	/* a series through a generation's root: that component gets a twin */
	struct text t = copy(gen);
	edit(&t, "\ngen 1 ", "\ngen 78 ");
	edit(&t, " run1/ckpt ", " run1/ckpt/step-100/model ");
	rc = apply_held(t, "rebuild: series inside a save", err, sizeof(err));
	cr_assert_eq(rc, 0, "apply_held: %d %s", rc, err);
	cr_assert_str_eq(held_where, "run1/ckpt/step-100.rebuild-78/model/step-100.rebuild-78");
	OK(cat_check(fx.dst));
	OK(cat_gen_check(fx.dst));
	struct cat_inode twin, model;
	OK(cat_lookup(fx.dst, ckpt.ino, "step-100.rebuild-78", &twin));
	OK(cat_lookup(fx.dst, twin.ino, "model", &model));
	OK(cat_lookup(fx.dst, model.ino, "step-100.rebuild-78", &root));
	OK(cat_gen_get(fx.dst, 78, &g));
	cr_assert_eq(g.state, GEN_HELD);
	cr_assert_eq(g.root, root.ino);
	cr_assert_eq(g.series, model.ino);
	free(t.p);

	/* refused, nothing changed: the same id, a tree manifest, no reason */
	char *before = ts_dump(fx.dst);
	FAILS(apply_held(gen, "rebuild: again", err, sizeof(err)), EEXIST);
	cr_assert(strstr(err, "generation 1 is in the catalog already"), "err: %s", err);
	struct text tree = tree_manifest();
	FAILS(apply_held(tree, "rebuild: a tree", err, sizeof(err)), EINVAL);
	free(tree.p);
	t = copy(gen);
	edit(&t, "\ngen 1 ", "\ngen 79 ");
	FAILS(apply_held(t, "", err, sizeof(err)), EINVAL);
	cr_assert(strstr(err, "reason"), "err: %s", err);
	free(t.p);
	char *after = ts_dump(fx.dst);
	cr_assert_str_eq(before, after);
	free(before);
	free(after);
	free(gen.p);
}

Test(manifest, refcounts_add_up_over_shared_chunks, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.src, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t ids[3];
	for (int i = 0; i < 3; i++) {
		char name[32];
		uint64_t root;
		snprintf(name, sizeof(name), "step-%d", i);
		ids[i] = ts_mkgen(fx.src, series, name, (uint64_t)i, true, &root);
		for (int k = 0; k < 3; k++) {
			char fname[16];
			snprintf(fname, sizeof(fname), "rank%d", k);
			uint64_t f = ts_mk(fx.src, root, fname, S_IFREG | 0644, NULL);
			write_extents(f, 500 + i, 4, 0, 64, 64, 256);
		}
		OK(cat_gen_commit(fx.src, ids[i], "trainer"));
	}
	apply_take(tree_manifest());
	for (int i = 2; i >= 0; i--)
		apply_take(gen_manifest(ids[i], 1));
	ts_expect_same(fx.src, fx.dst);
	struct cat_stats a, b;
	OK(cat_stats(fx.src, &a));
	OK(cat_stats(fx.dst, &b));
	cr_assert_eq(a.chunks, b.chunks);
	cr_assert_eq(a.referenced_bytes, b.referenced_bytes);
	cr_assert_eq(a.chunk_stored_bytes, b.chunk_stored_bytes);
	/* deleting in the rebuilt catalog frees exactly what the source would */
	OK(cat_gen_delete(fx.src, ids[0], "keep", NULL, NULL));
	OK(cat_gen_delete(fx.dst, ids[0], "keep", NULL, NULL));
	OK(cat_stats(fx.src, &a));
	OK(cat_stats(fx.dst, &b));
	cr_assert_eq(a.chunks, b.chunks, "%llu chunks, rebuilt %llu", (unsigned long long)a.chunks,
		     (unsigned long long)b.chunks);
	cr_assert_eq(a.referenced_bytes, b.referenced_bytes);
}

struct dst_count {
	uint8_t hash[CAT_HASH_LEN];
	int64_t refcount; /* -1 if there is no row */
};

static int dst_count_fn(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct dst_count *c = arg;
	if (memcmp(hash, c->hash, CAT_HASH_LEN) == 0)
		c->refcount = (int64_t)refcount;
	return 0;
}

/* The count of chunk seed in the destination catalog. */
static int64_t dst_refcount(int seed)
{
	struct dst_count c = { .refcount = -1 };
	ts_hash(c.hash, HASH_FILL, seed);
	OK(cat_chunks(fx.dst, dst_count_fn, &c));
	return c.refcount;
}

static void dst_counts_hold(const char *after)
{
	int rc = cat_check(fx.dst);
	cr_assert_eq(rc, 0, "cat_check of the destination after %s returned %d", after, rc);
}

/* Applying onto chunk rows the catalog has already (the manifest's count is
 * added to theirs: catalog_refs.c's upsert), a rejected apply (no count
 * moves), and the applied tree deleted again: cat_check after each. */
Test(manifest, apply_adds_to_existing_counts_and_a_rejected_one_moves_none, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.src, ROOT, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t id = ts_mkgen(fx.src, series, "step-1", 1, true, &root);
	write_extents(ts_mk(fx.src, root, "a", S_IFREG | 0644, NULL), 600, 4, 0, 64, 64, 256);
	write_extents(ts_mk(fx.src, root, "b", S_IFREG | 0644, NULL), 601, 2, 0, 64, 64, 128);
	OK(cat_gen_commit(fx.src, id, "trainer"));

	/* the destination names chunks 600 and 601 already (plain length 128) */
	uint64_t mine = ts_mk(fx.dst, ROOT, "mine", S_IFREG | 0644, NULL);
	ts_write_chunks(fx.dst, mine, HASH_FILL, 600, 2, 128, NULL, NULL);
	dst_counts_hold("a write");
	cr_assert_eq(dst_refcount(600), 1);

	struct text gen = gen_manifest(id, 1);
	apply_ok(gen);
	dst_counts_hold("the apply");
	cr_assert_eq(dst_refcount(600), 2, "its own and a's");
	cr_assert_eq(dst_refcount(601), 3, "its own, a's and b's");
	cr_assert_eq(dst_refcount(602), 2, "a's and b's");
	cr_assert_eq(dst_refcount(603), 1);

	/* rejected at its last chunk, after the others took their references:
	 * all rolled back */
	struct text bad = copy(gen);
	edit(&bad, "\ngen 1 ", "\ngen 79 ");
	edit(&bad, " run step-1 ", " run2 step-1 ");
	char *c = strstr(bad.p, "\nchunk "), *next;
	while ((next = strstr(c + 1, "\nchunk ")) != NULL)
		c = next;
	char hex[65], from[128], to[128];
	unsigned long long plain;
	cr_assert_eq(sscanf(c + 1, "chunk %64s %llu", hex, &plain), 2);
	snprintf(from, sizeof(from), "chunk %s %llu ", hex, plain);
	snprintf(to, sizeof(to), "chunk %s %llu ", hex, plain * 4);
	edit(&bad, from, to);
	expect_rejected(bad, EIO, "a last chunk of another plain length");
	dst_counts_hold("a rejected apply");
	cr_assert_eq(dst_refcount(601), 3);
	free(bad.p);
	free(gen.p);

	struct text tree = tree_manifest();
	apply_ok(tree);
	free(tree.p);
	dst_counts_hold("the tree manifest");

	struct cat_id_vec removed = { 0 };
	OK(cat_gen_delete(fx.dst, id, "keep", cat_id_vec_add_ino, &removed));
	dst_counts_hold("the delete");
	cr_assert_eq(dst_refcount(603), 1, "until the release");
	OK(cat_inodes_release(fx.dst, removed.v, removed.n));
	dst_counts_hold("the release");
	cr_assert_eq(dst_refcount(603), -1);
	cr_assert_eq(dst_refcount(600), 1, "its own again");
	cr_assert_eq(dst_refcount(601), 1);
	cat_id_vec_free(&removed);
}

Test(manifest, paths_on_backing, .init = setup, .fini = teardown)
{
	char buf[MANIFEST_PATH_MAX];
	uint64_t id, seq;
	uint32_t v;
	manifest_gen_path(12, 3, buf, sizeof(buf));
	cr_assert_str_eq(buf, "manifests/gen/12.3.ckm");
	OK(manifest_gen_name_parse("12.3.ckm", &id, &v));
	cr_assert(id == 12 && v == 3);
	manifest_tree_path(42, buf, sizeof(buf));
	cr_assert_str_eq(buf, "manifests/tree/00000000000000000042.ckm");
	OK(manifest_tree_name_parse(buf + strlen("manifests/tree/"), &seq));
	cr_assert_eq(seq, 42);
	manifest_tree_path(UINT64_MAX, buf, sizeof(buf));
	OK(manifest_tree_name_parse(buf + strlen("manifests/tree/"), &seq));
	cr_assert_eq(seq, UINT64_MAX);
	FAILS(manifest_gen_name_parse("12.ckm", &id, &v), EINVAL);
	FAILS(manifest_gen_name_parse("12.3.ckm.tmp", &id, &v), EINVAL);
	FAILS(manifest_gen_name_parse("0.1.ckm", &id, &v), EINVAL);
	FAILS(manifest_tree_name_parse("42.ckm", &seq), EINVAL);
}

Test(manifest, a_read_only_handle_builds_the_same_manifests, .init = setup, .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct cat *ro;
	OK(cat_open_readonly(fx.src_path, &ro));
	char *p;
	size_t len;
	struct text gen = gen_manifest(id, 1), tree = tree_manifest();
	OK(manifest_gen_build(ro, id, 1, &p, &len));
	cr_assert(len == gen.len && memcmp(p, gen.p, len) == 0);
	free(p);
	OK(manifest_tree_build(ro, &p, &len));
	cr_assert(len == tree.len && memcmp(p, tree.p, len) == 0);
	free(p);
	cat_close(ro);
	free(gen.p);
	free(tree.p);
}

Test(manifest, applied_chunks_are_on_backing_and_generations_durable, .init = setup,
     .fini = teardown)
{
	cr_assert_geq(cat_schema_version(fx.dst), 3);
	uint64_t id = rich_generation(NULL);
	/* dst already has chunk 1 in its cache (a file of its own) */
	struct cat_inode own;
	OK(cat_create(fx.dst, ROOT, "own", S_IFREG | 0644, 0, 0, 0, NULL, &own));
	struct cat_extent e = { .off = 0, .len = 1000, .chunk_off = 500, .chunk_len = 2000 };
	bool must;
	ts_hash(e.hash, HASH_FILL, 1);
	OK(cat_pending_add(fx.dst, own.ino, &e, &must));
	OK(cat_chunk_stored(fx.dst, e.hash, 0, 2000));
	OK(cat_file_commit(fx.dst, own.ino, 1000, ts_now_ns(), false));
	OK(cat_pending_drop(fx.dst, own.ino));
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.dst, e.hash, &w));
	cr_assert(w.cached && !w.uploaded);

	apply_take(gen_manifest(id, 1));
	bool durable = false;
	OK(cat_gen_durable(fx.dst, id, &durable));
	cr_assert(durable, "an applied generation is durable at its version");
	OK(cat_chunk_where(fx.dst, e.hash, &w));
	cr_assert(w.cached, "the cached copy stays");
	cr_assert(w.uploaded, "and it is on BACKING");
	cr_assert_eq(w.codec, 0, "the cached object's codec is kept");
	cr_assert_eq(w.stored_len, 2000);
	cr_assert_eq(w.refcount, 1 + 2, "own + w.bin (one inode, three links) + shared.pt");
	ts_hash(e.hash, HASH_FILL, 2);
	OK(cat_chunk_where(fx.dst, e.hash, &w));
	cr_assert(!w.cached && w.uploaded, "a chunk known only from BACKING");
	cr_assert_eq(w.codec, 1);
	cr_assert_eq(w.stored_len, 1001);
}

/* ---- values read back from BACKING are bounded (DESIGN invariant 7) ---- */

/* Replaces field `field` (0 = the tag) of the first line starting with tag,
 * then resums. */
static void edit_field(struct text *t, const char *tag, int field, const char *to)
{
	char *at = strstr(t->p, tag);
	cr_assert_not_null(at, "no \"%s\" line", tag);
	char *nl = strchr(at, '\n');
	char line[512], out[512];
	cr_assert_lt((size_t)(nl - at), sizeof(line));
	memcpy(line, at, (size_t)(nl - at));
	line[nl - at] = 0;
	size_t o = 0;
	int f = 0;
	for (char *s = strtok(line, " "); s; s = strtok(NULL, " "), f++)
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", f ? " " : "",
				      f == field ? to : s);
	char whole[512];
	memcpy(whole, at, (size_t)(nl - at));
	whole[nl - at] = 0;
	edit(t, whole, out);
}

Test(manifest, absurd_values_with_a_valid_checksum_are_refused_whole, .init = setup,
     .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct text gen = gen_manifest(id, 1);
	static const struct {
		const char *tag;
		int field;
		const char *to, *why;
	} cases[] = {
		{ "\nchunk ", 2, "9223372036854775807", "a chunk's plain_len 2^63-1" },
		{ "\nchunk ", 2, "4194305", "a chunk's plain_len past the chunker's maximum" },
		{ "\nchunk ", 4, "9200000000000000000", "a chunk's stored_len ~9.2e18" },
		{ "\nchunk ", 4, "4300000", "a stored_len past the codec's worst case" },
		{ "\nchunk ", 3, "7", "an unknown codec" },
		{ "\nino 1 ", 5, "9223372036854775807", "a file size of 2^63-1" },
		{ "\next ", 2, "9223372036854000000", "an extent offset near 2^63" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct text t = copy(gen);
		edit_field(&t, cases[i].tag + 1, cases[i].field, cases[i].to);
		expect_rejected(t, EINVAL, cases[i].why);
		char msg[MANIFEST_ERR_MAX];
		manifest_apply(fx.dst, t.p, t.len, msg, sizeof(msg));
		cr_assert(strncmp(msg, "line ", 5) == 0, "%s: \"%s\" names the line", cases[i].why,
			  msg);
		free(t.p);
	}
	free(gen.p);
}

/* The shuffled codecs (2 blosc-lz4, 3 blosc-zstd, 4 zstd-planes) are ones
 * this version knows: a manifest naming them applies (a fresh node restores
 * such saves). */
Test(manifest, chunks_of_every_known_codec_are_accepted, .init = setup, .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct text gen = gen_manifest(id, 1);
	static const char *const codecs[] = { "2", "3", "4" };
	for (size_t i = 0; i < 3; i++) {
		struct text t = copy(gen);
		edit_field(&t, "chunk ", 3, codecs[i]);
		char msg[MANIFEST_ERR_MAX] = "";
		struct manifest *m = NULL;
		int rc = manifest_parse(t.p, t.len, &m, msg, sizeof(msg));
		cr_assert_eq(rc, 0, "codec %s: parse %d (%s)", codecs[i], rc, msg);
		manifest_free(m);
		if (i == 2) { /* and it applies */
			rc = manifest_apply(fx.dst, t.p, t.len, msg, sizeof(msg));
			cr_assert_eq(rc, 0, "codec %s: apply %d (%s)", codecs[i], rc, msg);
			OK(cat_check(fx.dst));
		}
		free(t.p);
	}
	free(gen.p);
}

Test(manifest, a_manifest_shorter_than_its_magic_is_not_read_past_its_end, .init = setup,
     .fini = teardown)
{
	/* exactly len bytes, no NUL after them: ASan sees any over-read */
	for (size_t len = 0; len <= strlen("ckptfs-manifest 1 gen"); len++) {
		char *p = malloc(len ? len : 1);
		memcpy(p, "ckptfs-manifest 1 gen", len);
		struct text t = { .p = p, .len = len };
		expect_rejected(t, EINVAL, "shorter than its header");
		free(p);
	}
}

Test(manifest, an_extent_without_any_chunk_line_is_refused, .init = setup, .fini = teardown)
{
	uint64_t id = rich_generation(NULL);
	struct text t = gen_manifest(id, 1);
	char *c;
	while ((c = strstr(t.p, "\nchunk ")) != NULL) { /* drop every chunk line */
		char *nl = strchr(c + 1, '\n');
		memmove(c, nl, strlen(nl) + 1);
	}
	t.len = strlen(t.p);
	resum(&t);
	expect_rejected(t, EINVAL, "ext lines and no chunk line");
	free(t.p);
}

Test(manifest, a_manifest_larger_than_the_maximum_is_refused_unread)
{
	/* the length alone refuses it: not one byte is looked at */
	static const char small[] = "ckptfs-manifest 1 gen\n";
	struct manifest *m = (struct manifest *)1;
	char msg[MANIFEST_ERR_MAX] = "";
	cr_assert_eq(manifest_parse(small, (size_t)MANIFEST_SIZE_MAX + 1, &m, msg, sizeof(msg)),
		     -EFBIG);
	cr_assert_null(m);
	cr_assert(strstr(msg, "bytes") != NULL, "\"%s\" says how large", msg);
}

Test(manifest, a_deep_chain_of_directories_is_refused_past_the_depth_limit, .init = setup,
     .fini = teardown)
{
	/* a tree manifest of 5000 nested directories, built by hand */
	size_t cap = 1 << 20, len = 0;
	char *p = malloc(cap);
	len += (size_t)sprintf(p + len, "ckptfs-manifest 1 tree\n");
	for (int i = 0; i <= 5000; i++)
		len += (size_t)sprintf(p + len, "ino %d 40755 0 0 0 0 0 0 0 -\n", i);
	for (int i = 1; i <= 5000; i++)
		len += (size_t)sprintf(p + len, "ent %d %d d\n", i - 1, i);
	len += (size_t)sprintf(p + len, "sum %064d\n", 0);
	struct text t = { .p = p, .len = len };
	resum(&t);
	expect_rejected(t, EINVAL, "5000 levels deep");
	free(p);
}
