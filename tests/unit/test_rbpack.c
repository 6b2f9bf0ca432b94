/* Unit tests for fs/rbpack.c (rbpack.h R1-R3) over a directory BACKING and a
 * real catalog: real chunk objects made by a store on BACKING's directory,
 * put into real packs (pack_builder), their loose files removed. A chunk
 * row the catalog calls uploaded (as a rebuild's manifest leaves it) is
 * placed in the pack that holds it; a loose object wins over a pack (R2);
 * of two packs holding one chunk the one whose member passes its CRC is
 * taken (R3); names that are no pack's, packs in another's shard and cut
 * packs are not used (R1). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_pack.h"
#include "hash.h"
#include "pack.h"
#include "rbpack.h"
#include "store.h"
#include "support.h"
#include "upload.h"

#define RP_N 3

static struct {
	struct ts_stack s; /* BACKING's directory is also the store's */
	struct store *st;
	uint8_t hash[RP_N][HASH_LEN];
	uint8_t *img[RP_N];
	size_t img_len[RP_N], plain_len[RP_N];
} fx;

static void setup(void)
{
	ts_stack_open(&fx.s, "rbpack");
	OK(store_open(fx.s.backing, &fx.st));
	for (int i = 0; i < RP_N; i++) {
		size_t len = 1000 + 3000 * (size_t)i;
		uint8_t *plain = ts_random(len, 40 + i);
		hash_sha256(plain, len, fx.hash[i]);
		struct store_object_info info;
		OK(store_put(fx.st, fx.hash[i], plain, len, STORE_SYNC, &info));
		char rel[128], path[300];
		store_object_relpath(fx.hash[i], rel, sizeof(rel));
		snprintf(path, sizeof(path), "%s/%s", fx.s.backing, rel);
		int fd = open(path, O_RDONLY);
		cr_assert_geq(fd, 0);
		struct stat sb;
		cr_assert_eq(fstat(fd, &sb), 0);
		fx.img_len[i] = (size_t)sb.st_size;
		fx.img[i] = malloc(fx.img_len[i]);
		cr_assert_eq(pread(fd, fx.img[i], fx.img_len[i], 0), (ssize_t)fx.img_len[i]);
		close(fd);
		cr_assert_eq(unlink(path), 0); /* only packs hold it from now on */
		fx.plain_len[i] = len;
		free(plain);
		/* the row a rebuild's manifest leaves: uploaded, not cached, loose */
		uint64_t ino = ts_mk(fx.s.cat, CAT_ROOT_INO, (char[]){ 'f', (char)('0' + i), 0 },
				     0100644, NULL);
		struct cat_extent e = { .off = 0, .len = len, .chunk_len = len };
		memcpy(e.hash, fx.hash[i], HASH_LEN);
		bool must = false;
		OK(cat_pending_add(fx.s.cat, ino, &e, &must));
		OK(cat_chunk_stored(fx.s.cat, e.hash, info.codec, info.stored_len));
		OK(cat_file_commit(fx.s.cat, ino, len, ts_now_ns(), false));
		OK(cat_pending_drop(fx.s.cat, ino));
		struct cat_upload rows[4];
		cr_assert_eq(cat_upload_list(fx.s.cat, 0, rows, 4), 1);
		OK(cat_upload_done_many(fx.s.cat, rows, 1));
	}
}

static void teardown(void)
{
	for (int i = 0; i < RP_N; i++)
		free(fx.img[i]);
	store_close(fx.st);
	ts_stack_close(&fx.s);
}

TestSuite(rbpack, .init = setup, .fini = teardown);

/* A pack of the members idx[0..n) on BACKING; its name, and its path in path. */
static void rp_pack(const int *idx, int n, uint8_t name[HASH_LEN], char *path, size_t size)
{
	struct pack_builder pb;
	pack_builder_init(&pb);
	const char *why = NULL;
	for (int i = 0; i < n; i++)
		OK(pack_builder_add(&pb, fx.hash[idx[i]], fx.img[idx[i]], fx.img_len[idx[i]], &why));
	uint8_t *bytes;
	size_t len;
	OK(pack_builder_finish(&pb, &bytes, &len, name, &why));
	pack_builder_free(&pb);
	char rel[PACK_RELPATH_LEN];
	pack_relpath(name, rel, sizeof(rel));
	OK(backing_put(fx.s.b, rel, bytes, len));
	free(bytes);
	if (path) {
		snprintf(path, size, "%s/%s", fx.s.backing, rel);
		cr_assert_eq(chmod(path, 0600), 0);
	}
}

static void rp_where(int i, struct cat_chunk_where *w)
{
	OK(cat_chunk_where(fx.s.cat, fx.hash[i], w));
}

Test(rbpack, rows_are_placed_in_the_pack_that_holds_them_and_counts_follow)
{
	uint8_t name[HASH_LEN];
	rp_pack((int[]){ 0, 1, 2 }, 3, name, NULL, 0);
	struct rbpack_map map;
	OK(rbpack_load(fx.s.b, &map));
	cr_assert_eq(map.packs, 1);
	cr_assert_eq(map.n, 3);
	size_t n = 0;
	cr_assert_not_null(rbpack_find(&map, fx.hash[1], &n));
	cr_assert_eq(n, 1);
	uint64_t placed = 0;
	OK(rbpack_place(fx.s.b, fx.s.cat, &map, &placed));
	cr_assert_eq(placed, 3);
	for (int i = 0; i < RP_N; i++) {
		struct cat_chunk_where w;
		rp_where(i, &w);
		cr_assert(w.packed && w.uploaded);
		cr_assert_eq(memcmp(w.pack, name, HASH_LEN), 0);
		cr_assert_eq(w.pack_len, fx.img_len[i]);
	}
	struct cat_pack_stats ps;
	OK(cat_pack_stats(fx.s.cat, &ps));
	cr_assert_eq(ps.packs, 1);
	cr_assert_eq(ps.members, 3);
	rbpack_free(&map);
	OK(cat_check(fx.s.cat)); /* K1: the live count the triggers kept */
}

/* R2: a chunk whose loose object is on BACKING keeps it. */
Test(rbpack, a_loose_object_wins_over_a_pack)
{
	uint8_t name[HASH_LEN];
	rp_pack((int[]){ 0, 1 }, 2, name, NULL, 0);
	char rel[128], path[300];
	store_object_relpath(fx.hash[0], rel, sizeof(rel));
	OK(backing_put(fx.s.b, rel, fx.img[0], fx.img_len[0]));
	(void)path;
	struct rbpack_map map;
	OK(rbpack_load(fx.s.b, &map));
	uint64_t placed = 0;
	OK(rbpack_place(fx.s.b, fx.s.cat, &map, &placed));
	cr_assert_eq(placed, 1);
	struct cat_chunk_where w;
	rp_where(0, &w);
	cr_assert(!w.packed, "chunk 0 has a loose object: it stays loose");
	rp_where(1, &w);
	cr_assert(w.packed);
	rbpack_free(&map);
}

/* R3: the same chunk in two packs, its member damaged in one: the other. */
Test(rbpack, of_two_packs_holding_a_chunk_the_whole_member_is_taken)
{
	uint8_t a[HASH_LEN], b[HASH_LEN];
	char apath[300];
	rp_pack((int[]){ 0, 1 }, 2, a, apath, sizeof(apath));
	rp_pack((int[]){ 0, 2 }, 2, b, NULL, 0);
	/* damage chunk 0's member in pack a (its last byte: the payload) */
	struct rbpack_map map;
	OK(rbpack_load(fx.s.b, &map));
	size_t n = 0;
	const struct rbpack_member *m = rbpack_find(&map, fx.hash[0], &n);
	cr_assert_eq(n, 2);
	uint64_t at = 0;
	for (size_t i = 0; i < n; i++)
		if (memcmp(m[i].pack, a, HASH_LEN) == 0)
			at = m[i].off + m[i].len - 1;
	rbpack_free(&map);
	int fd = open(apath, O_RDWR);
	cr_assert_geq(fd, 0);
	uint8_t byte;
	cr_assert_eq(pread(fd, &byte, 1, (off_t)at), 1);
	byte ^= 0xff;
	cr_assert_eq(pwrite(fd, &byte, 1, (off_t)at), 1);
	close(fd);
	OK(rbpack_load(fx.s.b, &map)); /* the index is whole: both still listed */
	uint64_t placed = 0;
	OK(rbpack_place(fx.s.b, fx.s.cat, &map, &placed));
	cr_assert_eq(placed, 3);
	struct cat_chunk_where w;
	rp_where(0, &w);
	cr_assert(w.packed);
	cr_assert_eq(memcmp(w.pack, b, HASH_LEN), 0, "chunk 0 placed in the pack whose member is damaged");
	rbpack_free(&map);
}

/* R1: what is not a pack's name, not in its shard, or not a whole pack's
 * tail is not used; the rest is. */
Test(rbpack, names_and_tails_that_are_no_packs_are_not_used)
{
	uint8_t name[HASH_LEN];
	char path[300];
	rp_pack((int[]){ 0 }, 1, name, path, sizeof(path));
	uint8_t other[HASH_LEN];
	char opath[300];
	rp_pack((int[]){ 1, 2 }, 2, other, opath, sizeof(opath));
	char hex[HASH_HEX_LEN + 1], dir[400], moved[500];
	hash_to_hex(name, hex);
	/* the first pack moved into another shard */
	snprintf(dir, sizeof(dir), "%s/packs/%c%c", fx.s.backing, hex[0] == 'f' ? '0' : 'f', hex[1]);
	mkdir(dir, 0700);
	snprintf(moved, sizeof(moved), "%s/%s.ckp", dir, hex);
	cr_assert_eq(rename(path, moved), 0);
	/* a file with another name beside it */
	char junk[500];
	snprintf(junk, sizeof(junk), "%s/notapack.ckp", dir);
	FILE *f = fopen(junk, "w");
	cr_assert_not_null(f);
	fputs("junk", f);
	fclose(f);
	/* the second pack cut short: its trailer and index gone */
	cr_assert_eq(truncate(opath, (off_t)(fx.img_len[1] + fx.img_len[2])), 0);
	struct rbpack_map map;
	OK(rbpack_load(fx.s.b, &map));
	cr_assert_eq(map.packs, 0);
	cr_assert_eq(map.skipped, 3);
	cr_assert_eq(map.n, 0);
	uint64_t placed = 9;
	OK(rbpack_place(fx.s.b, fx.s.cat, &map, &placed));
	cr_assert_eq(placed, 0);
	rbpack_free(&map);
}
