/* Unit tests for fs/lib/bkobj.c over a directory BACKING (bkobj.h B1-B3):
 * an absent object is -ENOENT; a whole one (raw or LZ4) gives its plain
 * bytes, both ways — the fetch's (a raw chunk's bytes left inside the image
 * read, S9) and into a caller's buffers; a damaged one (a payload byte, the
 * magic, a cut payload, another chunk's object under its name, a plain
 * length past the caller's) and one larger than the largest object accepted
 * (backing_get's -EFBIG) are -EBADMSG with a reason, and the fetch's chunk
 * then holds no plain bytes; a symlink, FIFO or directory at its name (or a
 * symlink or file on its way) is a verdict too, never followed (B4); a name
 * BACKING cannot read (no fd left) is neither a verdict nor absent. The objects are written by a store opened on the
 * BACKING directory itself (the same chunks/ab/cd/<hex> layout).
 * Pack members (B5): three objects made by that store, their images put
 * into a real pack (pack_builder) at packs/ab/<hex>.ckp and their loose
 * files removed: each is read back whole by its place (both ways); a byte
 * flipped in the pack file, a place past its end, another member's place,
 * a length past obj_cap, a symlink, FIFO or directory at the pack's name
 * are verdicts, an absent pack -ENOENT; a loose read (where NULL) still
 * works beside them. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing.h"
#include "bkobj.h"
#include "codec.h"
#include "hash.h"
#include "pack.h"
#include "store.h"
#include "support.h"

#define KiB ((size_t)1024)
#define BK_CHUNK_MAX (1024 * KiB)                      /* the largest plain length accepted */
#define BK_OBJ_CAP (STORE_HEADER_LEN + 2 * BK_CHUNK_MAX) /* the largest object accepted */

static struct {
	struct ts_stack s; /* its BACKING directory is the one read */
	struct store *st;  /* writes the objects, on BACKING's directory */
	struct backing *b;
} fx;

static void setup(void)
{
	ts_stack_open(&fx.s, "bkobj");
	OK(store_open(fx.s.backing, &fx.st));
	fx.b = fx.s.b;
}

static void teardown(void)
{
	store_close(fx.st);
	ts_stack_close(&fx.s);
}

struct bk_obj {
	uint8_t hash[HASH_LEN];
	char path[256];
	uint8_t *plain;
	size_t len;
	struct store_object_info info;
};

/* Writes plain (owned by the object) as an object on BACKING. */
static struct bk_obj bk_put(uint8_t *plain, size_t len)
{
	struct bk_obj o = { .plain = plain, .len = len };
	hash_sha256(plain, len, o.hash);
	OK(store_put(fx.st, o.hash, plain, len, STORE_SYNC, &o.info));
	char rel[128];
	store_object_relpath(o.hash, rel, sizeof(rel));
	snprintf(o.path, sizeof(o.path), "%s/%s", fx.s.backing, rel);
	cr_assert_eq(chmod(o.path, 0600), 0); /* the cases damage it in place */
	return o;
}

static uint8_t *bk_compressible(size_t len)
{
	uint8_t *p = malloc(len);
	cr_assert_not_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)("layer.weight bias 0.125 norm\n"[i % 29]);
	return p;
}

static void bk_xor(const struct bk_obj *o, off_t pos)
{
	int fd = open(o->path, O_RDWR);
	cr_assert_geq(fd, 0, "open %s: %s", o->path, strerror(errno));
	uint8_t b;
	cr_assert_eq(pread(fd, &b, 1, pos), 1);
	b ^= 0x5a;
	cr_assert_eq(pwrite(fd, &b, 1, pos), 1);
	close(fd);
}

/* bkobj_get the plain way, into buffers of the test's; where as bkobj_get's
 * (NULL: the loose object). */
static int bk_get_plain_at(const struct bk_obj *o, const struct bkobj_where *where,
			   size_t obj_cap, size_t plain_cap, uint8_t **plain, struct bkobj_read *r,
			   const char **why)
{
	*plain = malloc(plain_cap ? plain_cap : 1);
	cr_assert_not_null(*plain);
	memset(r, 0, sizeof(*r));
	r->obj = malloc(obj_cap);
	cr_assert_not_null(r->obj);
	r->obj_cap = obj_cap;
	r->plain = *plain;
	r->plain_cap = plain_cap;
	int rc = bkobj_get(fx.b, o->hash, where, r, why);
	free(r->obj);
	r->obj = NULL;
	return rc;
}

static int bk_get_plain(const struct bk_obj *o, size_t obj_cap, size_t plain_cap, uint8_t **plain,
			struct bkobj_read *r, const char **why)
{
	return bk_get_plain_at(o, NULL, obj_cap, plain_cap, plain, r, why);
}

/* bkobj_get the fetch's way, into a store_fetch_image buffer (c). */
static int bk_get_fetch_at(const struct bk_obj *o, const struct bkobj_where *where,
			   size_t obj_cap, size_t plain_cap, struct store_chunk *c,
			   struct bkobj_read *r, const char **why)
{
	OK(store_fetch_image(c, obj_cap, obj_cap));
	memset(r, 0, sizeof(*r));
	r->fetch = c;
	r->obj_cap = obj_cap;
	r->plain_cap = plain_cap;
	return bkobj_get(fx.b, o->hash, where, r, why);
}

static int bk_get_fetch(const struct bk_obj *o, size_t obj_cap, size_t plain_cap,
			struct store_chunk *c, struct bkobj_read *r, const char **why)
{
	return bk_get_fetch_at(o, NULL, obj_cap, plain_cap, c, r, why);
}

/* Both ways answer -EBADMSG with a reason containing want, and hand out no
 * plain bytes (B2). */
static void bk_assert_damaged_at(const struct bk_obj *o, const struct bkobj_where *where,
				 size_t obj_cap, size_t plain_cap, const char *want,
				 const char *what)
{
	struct bkobj_read r;
	struct store_chunk c;
	const char *why = NULL;
	uint8_t *plain;
	int rc = bk_get_plain_at(o, where, obj_cap, plain_cap, &plain, &r, &why);
	free(plain);
	cr_assert_eq(rc, -EBADMSG, "%s, plain way: %d (%s)", what, rc, strerror(-rc));
	cr_assert_not_null(why, "%s: no reason", what);
	cr_assert_not_null(strstr(why, want), "%s: reason '%s', expected '%s'", what, why, want);
	why = NULL;
	rc = bk_get_fetch_at(o, where, obj_cap, plain_cap, &c, &r, &why);
	cr_assert_eq(rc, -EBADMSG, "%s, fetch way: %d (%s)", what, rc, strerror(-rc));
	cr_assert_not_null(why, "%s: no reason (fetch)", what);
	cr_assert_not_null(strstr(why, want), "%s: reason '%s' (fetch), expected '%s'", what, why,
			   want);
	cr_assert_null(c.plain, "%s: the fetch's chunk holds plain bytes after a verdict", what);
	cr_assert_eq(c.len, 0);
	store_chunk_free(&c);
}

static void bk_assert_damaged(const struct bk_obj *o, size_t obj_cap, size_t plain_cap,
			      const char *want, const char *what)
{
	bk_assert_damaged_at(o, NULL, obj_cap, plain_cap, want, what);
}

/* Both ways give the object's plain bytes, read as where says. */
static void bk_assert_whole_at(const struct bk_obj *o, const struct bkobj_where *where)
{
	struct bkobj_read r;
	struct store_chunk c;
	const char *why = "unset";
	uint8_t *plain;
	size_t obj_len = where ? where->len : 0;
	if (!where) {
		struct stat sb;
		cr_assert_eq(stat(o->path, &sb), 0);
		obj_len = (size_t)sb.st_size;
	}
	OK(bk_get_plain_at(o, where, BK_OBJ_CAP, BK_CHUNK_MAX, &plain, &r, &why));
	cr_assert_null(why);
	cr_assert_eq(r.plain_len, o->len);
	cr_assert_eq(r.obj_len, obj_len);
	cr_assert(memcmp(plain, o->plain, o->len) == 0, "the plain bytes differ");
	free(plain);
	why = "unset";
	OK(bk_get_fetch_at(o, where, BK_OBJ_CAP, BK_CHUNK_MAX, &c, &r, &why));
	cr_assert_null(why);
	cr_assert_eq(r.plain_len, o->len);
	cr_assert_eq(r.obj_len, obj_len);
	cr_assert_eq(c.len, o->len);
	if (o->info.codec == CODEC_RAW) /* S9: left where they lie */
		cr_assert_eq(c.plain, (const uint8_t *)c.image + o->info.header_len);
	else
		cr_assert_eq(c.plain, c.decoded);
	cr_assert(memcmp(c.plain, o->plain, o->len) == 0, "the fetched plain bytes differ");
	store_chunk_free(&c);
}

static void bk_assert_whole(const struct bk_obj *o)
{
	bk_assert_whole_at(o, NULL);
}

TestSuite(bkobj, .init = setup, .fini = teardown);

Test(bkobj, an_absent_object_is_enoent_both_ways)
{
	struct bk_obj o = { .len = 0 };
	memset(o.hash, 0x42, sizeof(o.hash));
	struct bkobj_read r;
	struct store_chunk c;
	const char *why = "unset";
	uint8_t *plain;
	FAILS(bk_get_plain(&o, BK_OBJ_CAP, BK_CHUNK_MAX, &plain, &r, &why), ENOENT);
	cr_assert_null(why);
	free(plain);
	why = "unset";
	FAILS(bk_get_fetch(&o, BK_OBJ_CAP, BK_CHUNK_MAX, &c, &r, &why), ENOENT);
	cr_assert_null(why);
	store_chunk_free(&c);
}

Test(bkobj, whole_raw_and_lz4_objects_give_their_bytes_both_ways)
{
	struct bk_obj raw = bk_put(ts_random(300 * KiB, 7), 300 * KiB);
	struct bk_obj lz4 = bk_put(bk_compressible(200 * KiB), 200 * KiB);
	cr_assert_eq(raw.info.codec, CODEC_RAW);
	cr_assert_neq(lz4.info.codec, CODEC_RAW, "repetitive text was stored raw");
	bk_assert_whole(&raw);
	bk_assert_whole(&lz4);
	free(raw.plain);
	free(lz4.plain);
}

Test(bkobj, damaged_objects_are_a_verdict_with_a_reason)
{
	struct bk_obj o = bk_put(ts_random(64 * KiB, 11), 64 * KiB);
	off_t pay = (off_t)o.info.header_len + 1000;
	bk_xor(&o, pay);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, "CRC-32C", "a payload byte flipped");
	bk_xor(&o, pay);
	bk_assert_whole(&o);
	bk_xor(&o, 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, "magic", "the magic flipped");
	bk_xor(&o, 0);
	cr_assert_eq(truncate(o.path, (off_t)o.info.header_len + 100), 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, "truncated", "the payload cut");
	/* another chunk's whole object under this name */
	struct bk_obj other = bk_put(ts_random(64 * KiB, 12), 64 * KiB);
	cr_assert_eq(rename(other.path, o.path), 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, "another chunk", "another chunk's object");
	free(o.plain);
	free(other.plain);
}

Test(bkobj, a_plain_length_past_the_callers_is_a_verdict)
{
	struct bk_obj o = bk_put(ts_random(64 * KiB, 13), 64 * KiB);
	bk_assert_damaged(&o, BK_OBJ_CAP, 64 * KiB - 1, "larger", "plain length past plain_cap");
	free(o.plain);
}

/* backing_get's -EFBIG: no object of a chunk the caller accepts is that large. */
Test(bkobj, an_object_larger_than_accepted_is_a_verdict_not_efbig)
{
	struct bk_obj o = bk_put(ts_random(64 * KiB, 14), 64 * KiB);
	bk_assert_damaged(&o, 32 * KiB, 32 * KiB, "larger than a chunk's object can be",
			  "an object past obj_cap");
	free(o.plain);
}

/* B4: something other than a regular file at the object's name, or on its
 * way, is a verdict named by what it is, never followed: a symlink to a good
 * copy of the very object, a FIFO (not opened for long: no hang), a
 * directory, a symlink in place of chunks/ab/cd, a regular file there. Each
 * planted thing is left as it was (the symlink's target too). */
Test(bkobj, a_planted_non_file_at_the_name_is_a_verdict_never_followed)
{
	struct bk_obj o = bk_put(ts_random(4 * KiB, 15), 4 * KiB);
	char good[300], dir[300], real[320];
	snprintf(good, sizeof(good), "%s.good", o.path);
	cr_assert_eq(rename(o.path, good), 0);
	cr_assert_eq(symlink(good, o.path), 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_SYMLINK, "a symlink to a good copy");
	struct stat sb;
	cr_assert_eq(lstat(o.path, &sb), 0);
	cr_assert(S_ISLNK(sb.st_mode), "the symlink was removed or replaced");
	cr_assert_eq(unlink(o.path), 0);
	cr_assert_eq(mkfifo(o.path, 0600), 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_NOTREG, "a FIFO");
	cr_assert_eq(lstat(o.path, &sb), 0);
	cr_assert(S_ISFIFO(sb.st_mode), "the FIFO was removed or replaced");
	cr_assert_eq(unlink(o.path), 0);
	cr_assert_eq(mkdir(o.path, 0700), 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_NOTREG, "a directory");
	cr_assert_eq(rmdir(o.path), 0);
	cr_assert_eq(rename(good, o.path), 0);
	bk_assert_whole(&o);
	/* chunks/ab/cd/ a symlink to a directory holding the good object */
	snprintf(dir, sizeof(dir), "%s", o.path);
	*strrchr(dir, '/') = '\0';
	snprintf(real, sizeof(real), "%s.real", dir);
	cr_assert_eq(rename(dir, real), 0);
	cr_assert_eq(symlink(real, dir), 0);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_SYMLINK, "a symlink on the way");
	cr_assert_eq(unlink(dir), 0);
	int fd = open(dir, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	bk_assert_damaged(&o, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_NOTDIR, "a file on the way");
	cr_assert_eq(unlink(dir), 0);
	cr_assert_eq(rename(real, dir), 0);
	bk_assert_whole(&o);
	free(o.plain);
}

/* A name BACKING cannot read for a reason of its own (here: no file
 * descriptor left, EMFILE) is neither a verdict nor absent, so a fetch tries
 * again instead of calling the chunk damaged (B1). */
Test(bkobj, an_unreadable_name_is_neither_a_verdict_nor_absent)
{
	struct bk_obj o = bk_put(ts_random(4 * KiB, 15), 4 * KiB);
	struct bkobj_read r;
	struct store_chunk c;
	const char *why = "unset";
	uint8_t *plain = NULL;
	struct rlimit was, none;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &was), 0);
	int lowest = dup(0); /* every fd below it is taken: the limit leaves none */
	cr_assert_geq(lowest, 0);
	close(lowest);
	none = was;
	none.rlim_cur = (rlim_t)lowest;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &none), 0);
	int rc = bk_get_plain(&o, BK_OBJ_CAP, BK_CHUNK_MAX, &plain, &r, &why);
	int why_null = why == NULL;
	why = "unset";
	OK(store_fetch_image(&c, BK_OBJ_CAP, BK_OBJ_CAP));
	memset(&r, 0, sizeof(r));
	r.fetch = &c;
	r.obj_cap = BK_OBJ_CAP;
	r.plain_cap = BK_CHUNK_MAX;
	int rc2 = bkobj_get(fx.b, o.hash, NULL, &r, &why);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &was), 0);
	free(plain);
	cr_assert_eq(rc, -EMFILE, "plain way: %d (%s)", rc, strerror(-rc));
	cr_assert(why_null);
	cr_assert_eq(rc2, -EMFILE, "fetch way: %d (%s)", rc2, strerror(-rc2));
	cr_assert_null(why);
	cr_assert_null(c.plain);
	store_chunk_free(&c);
	bk_assert_whole(&o);
	free(o.plain);
}

/* ---- pack members (B5) ---- */

#define BK_PACK_N 3

static struct {
	struct bk_obj o[BK_PACK_N];
	struct bkobj_where w[BK_PACK_N];
	char path[300]; /* the pack file */
	size_t len;
} pk;

/* The object's image as the store wrote it on BACKING (*len bytes). */
static uint8_t *bk_image(const struct bk_obj *o, size_t *len)
{
	int fd = open(o->path, O_RDONLY);
	cr_assert_geq(fd, 0, "open %s: %s", o->path, strerror(errno));
	struct stat sb;
	cr_assert_eq(fstat(fd, &sb), 0);
	uint8_t *img = malloc((size_t)sb.st_size);
	cr_assert_not_null(img);
	cr_assert_eq(pread(fd, img, (size_t)sb.st_size, 0), sb.st_size);
	close(fd);
	*len = (size_t)sb.st_size;
	return img;
}

/* Three objects (raw, LZ4, small raw) put by the store, packed by the
 * pack builder, the pack put on BACKING; the loose files removed, so that
 * only the pack holds them. pk.w[i] is each one's place, from the pack's
 * own index (pack_open, pack_find). */
static void bk_pack_setup(void)
{
	pk.o[0] = bk_put(ts_random(300 * KiB, 21), 300 * KiB);
	pk.o[1] = bk_put(bk_compressible(200 * KiB), 200 * KiB);
	pk.o[2] = bk_put(ts_random(5 * KiB, 22), 5 * KiB);
	cr_assert_neq(pk.o[1].info.codec, CODEC_RAW);
	struct pack_builder pb;
	pack_builder_init(&pb);
	const char *why = NULL;
	for (int i = 0; i < BK_PACK_N; i++) {
		size_t len;
		uint8_t *img = bk_image(&pk.o[i], &len);
		OK(pack_builder_add(&pb, pk.o[i].hash, img, len, &why));
		free(img);
	}
	uint8_t *pack, name[HASH_LEN];
	OK(pack_builder_finish(&pb, &pack, &pk.len, name, &why));
	pack_builder_free(&pb);
	char rel[PACK_RELPATH_LEN];
	pack_relpath(name, rel, sizeof(rel));
	OK(backing_put(fx.b, rel, pack, pk.len));
	snprintf(pk.path, sizeof(pk.path), "%s/%s", fx.s.backing, rel);
	cr_assert_eq(chmod(pk.path, 0600), 0); /* the cases damage it in place */
	struct pack_view v;
	OK(pack_open(pack, pk.len, &v, &why));
	for (int i = 0; i < BK_PACK_N; i++) {
		struct pack_entry e;
		OK(pack_find(&v, pk.o[i].hash, &e));
		memcpy(pk.w[i].pack, name, HASH_LEN);
		pk.w[i].off = e.off;
		pk.w[i].len = e.len;
		cr_assert_eq(unlink(pk.o[i].path), 0);
	}
	free(pack);
}

static void bk_pack_free(void)
{
	for (int i = 0; i < BK_PACK_N; i++)
		free(pk.o[i].plain);
}

static void bk_pack_xor(off_t pos)
{
	struct bk_obj f = { .len = 0 };
	snprintf(f.path, sizeof(f.path), "%s", pk.path);
	bk_xor(&f, pos);
}

Test(bkobj, each_pack_member_is_read_whole_by_its_place_both_ways)
{
	bk_pack_setup();
	for (int i = 0; i < BK_PACK_N; i++) {
		cr_assert_gt(pk.w[i].off, 0);
		bk_assert_whole_at(&pk.o[i], &pk.w[i]);
	}
	/* the loose files are gone: where NULL finds nothing, the pack everything */
	struct bkobj_read r;
	uint8_t *plain;
	const char *why = "unset";
	FAILS(bk_get_plain(&pk.o[0], BK_OBJ_CAP, BK_CHUNK_MAX, &plain, &r, &why), ENOENT);
	cr_assert_null(why);
	free(plain);
	char name[200];
	bkobj_where_name(pk.o[2].hash, &pk.w[2], name, sizeof(name));
	char want[64];
	snprintf(want, sizeof(want), " at %llu, %u bytes", (unsigned long long)pk.w[2].off,
		 pk.w[2].len);
	cr_assert(strncmp(name, "packs/", 6) == 0 && strstr(name, ".ckp") && strstr(name, want),
		  "where's name: %s", name);
	bk_pack_free();
}

/* A byte of one member flipped in the pack file: that member is a verdict
 * (its CRC-32C), the others are whole; flipped back, whole again. */
Test(bkobj, a_flipped_byte_in_a_pack_member_is_a_verdict_for_that_member_only)
{
	bk_pack_setup();
	off_t pos = (off_t)pk.w[1].off + (off_t)pk.o[1].info.header_len + 100;
	bk_pack_xor(pos);
	bk_assert_damaged_at(&pk.o[1], &pk.w[1], BK_OBJ_CAP, BK_CHUNK_MAX, "CRC-32C",
			     "a payload byte of member 1 flipped");
	bk_assert_whole_at(&pk.o[0], &pk.w[0]);
	bk_assert_whole_at(&pk.o[2], &pk.w[2]);
	bk_pack_xor(pos);
	bk_assert_whole_at(&pk.o[1], &pk.w[1]);
	bk_pack_xor((off_t)pk.w[2].off); /* the member's magic */
	bk_assert_damaged_at(&pk.o[2], &pk.w[2], BK_OBJ_CAP, BK_CHUNK_MAX, "magic",
			     "member 2's magic flipped");
	bk_pack_free();
}

/* B5: a place the pack file does not hold is a verdict, never a short read;
 * a place inside it that is another member's, or one byte off, fails the
 * check; a length past obj_cap is "too large", not read. */
Test(bkobj, a_member_place_past_the_pack_end_or_wrong_is_a_verdict)
{
	bk_pack_setup();
	struct bkobj_where w = pk.w[2];
	w.off = pk.len - w.len + 1; /* ends one byte past the file */
	bk_assert_damaged_at(&pk.o[2], &w, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_RANGE,
			     "one byte past the end");
	w.off = UINT64_MAX - 10;
	bk_assert_damaged_at(&pk.o[2], &w, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_RANGE,
			     "an offset near 2^64");
	w.off = pk.len;
	bk_assert_damaged_at(&pk.o[2], &w, BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_RANGE,
			     "at the very end");
	w = pk.w[0];
	w.off = pk.w[1].off; /* member 1's bytes for member 0 */
	w.len = pk.w[1].len;
	bk_assert_damaged_at(&pk.o[0], &w, BK_OBJ_CAP, BK_CHUNK_MAX, "another chunk",
			     "another member's place");
	w = pk.w[0];
	w.off += 1;
	bk_assert_damaged_at(&pk.o[0], &w, BK_OBJ_CAP, BK_CHUNK_MAX, "magic", "one byte off");
	w = pk.w[0];
	bk_assert_damaged_at(&pk.o[0], &w, w.len - 1, BK_CHUNK_MAX, BKOBJ_WHY_TOO_LARGE,
			     "a member past obj_cap");
	bk_assert_whole_at(&pk.o[0], &pk.w[0]);
	bk_pack_free();
}

/* B4 for a pack's name: a symlink to the good pack, a FIFO, a directory are
 * verdicts, never followed and left as they were; an absent pack is
 * -ENOENT, no verdict; a loose object (where NULL) reads beside them. */
Test(bkobj, a_planted_or_absent_pack_name_and_a_loose_read_beside_it)
{
	bk_pack_setup();
	struct bk_obj loose = bk_put(ts_random(8 * KiB, 23), 8 * KiB);
	char good[320];
	snprintf(good, sizeof(good), "%s.good", pk.path);
	cr_assert_eq(rename(pk.path, good), 0);
	struct bkobj_read r;
	uint8_t *plain;
	const char *why = "unset";
	FAILS(bk_get_plain_at(&pk.o[0], &pk.w[0], BK_OBJ_CAP, BK_CHUNK_MAX, &plain, &r, &why),
	      ENOENT);
	cr_assert_null(why);
	free(plain);
	cr_assert_eq(symlink(good, pk.path), 0);
	bk_assert_damaged_at(&pk.o[0], &pk.w[0], BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_SYMLINK,
			     "a symlink at the pack's name");
	struct stat sb;
	cr_assert_eq(lstat(pk.path, &sb), 0);
	cr_assert(S_ISLNK(sb.st_mode), "the symlink was removed or replaced");
	cr_assert_eq(unlink(pk.path), 0);
	cr_assert_eq(mkfifo(pk.path, 0600), 0);
	bk_assert_damaged_at(&pk.o[0], &pk.w[0], BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_NOTREG,
			     "a FIFO at the pack's name");
	cr_assert_eq(unlink(pk.path), 0);
	cr_assert_eq(mkdir(pk.path, 0700), 0);
	bk_assert_damaged_at(&pk.o[0], &pk.w[0], BK_OBJ_CAP, BK_CHUNK_MAX, BKOBJ_WHY_NOTREG,
			     "a directory at the pack's name");
	bk_assert_whole(&loose);
	cr_assert_eq(rmdir(pk.path), 0);
	cr_assert_eq(rename(good, pk.path), 0);
	bk_assert_whole_at(&pk.o[0], &pk.w[0]);
	free(loose.plain);
	bk_pack_free();
}
