/* Unit tests for fs/lib/pack.c (pack.h P1-P7): packs of 1, 2 and 1 000
 * members come back byte for byte (each member image as the store wrote it,
 * its plain bytes through the member check), the same members in another
 * order make the same pack (P2); every field of header, index and trailer
 * made wrong (its CRCs made right again, so that the field's own rule
 * speaks) is -EBADMSG with its reason, a newer version -EPROTONOSUPPORT;
 * every single byte of a small pack flipped is caught at open or by that
 * member's check, and no other member changes (P3); every truncation and an
 * extension are refused; a duplicate hash and an empty pack are refused by
 * the builder; a member image that fails store_object_check (its own CRC made
 * right) is found by the member check; the tail-only index read asks for the
 * tail it needs, then finds every member where the whole read does. Member
 * images are real chunk objects, written by a store in a temporary directory
 * and read back. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "crc32c.h"
#include "hash.h"
#include "pack.h"
#include "store.h"
#include "support.h"

struct pk_member {
	uint8_t hash[HASH_LEN];
	uint8_t *plain, *image;
	size_t plain_len, image_len;
};

static struct {
	char dir[64];
	struct store *st;
	struct pk_member *m;
	size_t n;
	uint8_t *pack;
	size_t len;
	uint8_t name[HASH_LEN];
} fx;

static void setup(void)
{
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "pack");
	OK(store_open(fx.dir, &fx.st));
}

static void teardown(void)
{
	for (size_t i = 0; i < fx.n; i++) {
		free(fx.m[i].plain);
		free(fx.m[i].image);
	}
	free(fx.m);
	free(fx.pack);
	store_close(fx.st);
	ts_tmpdir_remove(fx.dir);
	memset(&fx, 0, sizeof(fx));
}

TestSuite(pack, .init = setup, .fini = teardown);

/* n members: chunk objects written by the store and read back; every third
 * one compressible (an LZ4 or blosc image), the others random (raw). */
static void pk_members(size_t n, size_t base_len)
{
	fx.m = calloc(n, sizeof(*fx.m));
	cr_assert_not_null(fx.m);
	fx.n = n;
	for (size_t i = 0; i < n; i++) {
		struct pk_member *m = &fx.m[i];
		m->plain_len = base_len + (i * 37) % 301;
		m->plain = ts_random(m->plain_len, i + 1);
		if (i % 3 == 2)
			for (size_t k = 0; k < m->plain_len; k++)
				m->plain[k] = (uint8_t)("layer.weight 0.25\n"[k % 18] + (k == 0 ? i : 0));
		hash_sha256(m->plain, m->plain_len, m->hash);
		OK(store_put(fx.st, m->hash, m->plain, m->plain_len, 0, NULL));
		size_t cap = STORE_HEADER_LEN + codec_bound(m->plain_len);
		m->image = malloc(cap);
		cr_assert_not_null(m->image);
		OK(store_read_object(fx.st, m->hash, m->image, cap, &m->image_len));
	}
}

/* The pack of fx's members added in order (step 1) or reversed (-1). */
static void pk_build(int step, uint8_t **out, size_t *len, uint8_t name[HASH_LEN])
{
	struct pack_builder b;
	pack_builder_init(&b);
	const char *why = NULL;
	for (size_t k = 0; k < fx.n; k++) {
		size_t i = step > 0 ? k : fx.n - 1 - k;
		int rc = pack_builder_add(&b, fx.m[i].hash, fx.m[i].image, fx.m[i].image_len, &why);
		cr_assert_eq(rc, 0, "add %zu: %d (%s)", i, rc, why ? why : "-");
	}
	cr_assert_eq(pack_builder_count(&b), fx.n);
	uint64_t size = pack_builder_size(&b);
	OK(pack_builder_finish(&b, out, len, name, &why));
	cr_assert_eq(*len, size);
	pack_builder_free(&b);
}

/* Member i of view v is its image byte for byte and checks to its plain bytes. */
static void pk_assert_member(const struct pack_view *v, size_t i)
{
	struct pack_entry e;
	OK(pack_find(v, fx.m[i].hash, &e));
	cr_assert_eq(e.len, fx.m[i].image_len, "member %zu length", i);
	if (v->base)
		cr_assert(memcmp(v->base + e.off, fx.m[i].image, e.len) == 0, "member %zu bytes", i);
	uint8_t *plain = malloc(fx.m[i].plain_len + 1);
	cr_assert_not_null(plain);
	size_t got = 0;
	const char *why = NULL;
	int rc = v->base ? pack_member_check(v, &e, plain, fx.m[i].plain_len + 1, &got, &why)
			 : pack_member_verify(&e, fx.pack + e.off, e.len, plain,
					      fx.m[i].plain_len + 1, &got, &why);
	cr_assert_eq(rc, 0, "member %zu: %d (%s)", i, rc, why ? why : "-");
	cr_assert_eq(got, fx.m[i].plain_len);
	cr_assert(memcmp(plain, fx.m[i].plain, got) == 0, "member %zu plain bytes", i);
	free(plain);
}

static void pk_round_trip(size_t n)
{
	pk_members(n, 40);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	struct pack_view v;
	const char *why = NULL;
	int rc = pack_open(fx.pack, fx.len, &v, &why);
	cr_assert_eq(rc, 0, "open: %d (%s)", rc, why ? why : "-");
	cr_assert_eq(v.n, n);
	OK(pack_check_name(&v, fx.name, &why));
	size_t images = 0;
	for (size_t i = 0; i < n; i++) {
		pk_assert_member(&v, i);
		images += fx.m[i].image_len;
	}
	cr_assert_eq(fx.len, PACK_HEADER_LEN + images + n * PACK_ENTRY_LEN + PACK_TRAILER_LEN);
	uint8_t other[HASH_LEN] = { 0 };
	struct pack_entry e;
	FAILS(pack_find(&v, other, &e), ENOENT);
	/* P2: the same members added the other way round make the same pack */
	uint8_t *again, name2[HASH_LEN];
	size_t len2;
	pk_build(-1, &again, &len2, name2);
	cr_assert_eq(len2, fx.len);
	cr_assert(memcmp(again, fx.pack, fx.len) == 0, "another order made other bytes");
	cr_assert(memcmp(name2, fx.name, HASH_LEN) == 0);
	free(again);
}

Test(pack, one_member_comes_back_byte_for_byte)
{
	pk_round_trip(1);
}

Test(pack, two_members_come_back_byte_for_byte)
{
	pk_round_trip(2);
}

Test(pack, a_thousand_members_come_back_byte_for_byte)
{
	pk_round_trip(1000);
}

Test(pack, the_name_and_path_are_the_sha256_of_the_bytes)
{
	pk_members(2, 40);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	uint8_t h[HASH_LEN];
	hash_sha256(fx.pack, fx.len, h);
	cr_assert(memcmp(h, fx.name, HASH_LEN) == 0);
	char hex[HASH_HEX_LEN + 1], want[PACK_RELPATH_LEN], rel[PACK_RELPATH_LEN];
	hash_to_hex(fx.name, hex);
	snprintf(want, sizeof(want), "packs/%.2s/%s.ckp", hex, hex);
	pack_relpath(fx.name, rel, sizeof(rel));
	cr_assert_str_eq(rel, want);
	uint8_t back[HASH_LEN];
	OK(pack_name_parse(rel + strlen("packs/ab/"), back));
	cr_assert(memcmp(back, fx.name, HASH_LEN) == 0);
	char bad[PACK_RELPATH_LEN];
	snprintf(bad, sizeof(bad), "%s.ckq", hex);
	FAILS(pack_name_parse(bad, back), EINVAL);
	snprintf(bad, sizeof(bad), "%s.ckp", hex);
	bad[3] = 'A'; /* upper case: another name of the same pack */
	FAILS(pack_name_parse(bad, back), EINVAL);
	FAILS(pack_name_parse("0123.ckp", back), EINVAL);
	FAILS(pack_name_parse(".ckp", back), EINVAL);
	struct pack_view v;
	const char *why = NULL;
	OK(pack_open(fx.pack, fx.len, &v, &why));
	h[5] ^= 1;
	FAILS(pack_check_name(&v, h, &why), EBADMSG);
	cr_assert_not_null(strstr(why, "SHA-256"));
}

/* ---- fields made wrong, their CRCs made right again ---- */

static void pk_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t pk_rd(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#define PK_FIX_HEADER 1
#define PK_FIX_INDEX 2
#define PK_FIX_TRAILER 4
#define PK_FIX_ALL 7

/* The CRCs of p (a copy of fx.pack, of its geometry) written again. */
static void pk_fix(uint8_t *p, size_t len, int what)
{
	uint32_t n = (uint32_t)fx.n;
	uint64_t index_off = len - PACK_TRAILER_LEN - (uint64_t)n * PACK_ENTRY_LEN;
	uint8_t *t = p + len - PACK_TRAILER_LEN;
	if (what & PK_FIX_HEADER)
		pk_le(p + 28, crc32c(0, p, 28), 4);
	if (what & PK_FIX_INDEX)
		pk_le(t + 20, crc32c(0, p + index_off, (size_t)n * PACK_ENTRY_LEN), 4);
	if (what & PK_FIX_TRAILER)
		pk_le(t + 28, crc32c(0, t, 28), 4);
}

struct pk_case {
	const char *what;
	size_t at;     /* from the start; (size_t)-N: N bytes from the end */
	int bytes;     /* the field's width */
	int64_t add;   /* added to the field (0: xor 0x5a on its first byte) */
	int fix;       /* CRCs made right again */
	int err;       /* expected */
	const char *why;
};

static size_t pk_pos(size_t at, size_t len)
{
	return (int64_t)at < 0 ? len - (size_t)(-(int64_t)at) : at;
}

static void pk_expect(const uint8_t *p, size_t len, const struct pk_case *c)
{
	struct pack_view v;
	const char *why = NULL;
	int rc = pack_open(p, len, &v, &why);
	cr_assert_eq(rc, -c->err, "%s: %d (%s), expected %d", c->what, rc, why ? why : "-",
		     -c->err);
	cr_assert_not_null(why, "%s: no reason", c->what);
	cr_assert_not_null(strstr(why, c->why), "%s: reason '%s', expected '%s'", c->what, why,
			   c->why);
}

Test(pack, every_field_made_wrong_is_refused_with_its_reason)
{
	pk_members(3, 40);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	size_t idx = fx.len - PACK_TRAILER_LEN - 3 * PACK_ENTRY_LEN; /* entry 0 */
	size_t e1 = idx + PACK_ENTRY_LEN, e2 = idx + 2 * PACK_ENTRY_LEN;
	const size_t T = (size_t)-PACK_TRAILER_LEN; /* the trailer's first byte */
	const struct pk_case cases[] = {
		{ "header magic", 0, 1, 0, PK_FIX_ALL, EBADMSG, "header without its magic" },
		{ "header CRC", 28, 4, 1, 0, EBADMSG, "header CRC-32C" },
		{ "header version", 8, 2, 1, PK_FIX_ALL, EBADMSG, "header version" },
		{ "header reserved 10", 10, 2, 1, PK_FIX_ALL, EBADMSG, "header reserved" },
		{ "header reserved 20", 20, 4, 1, PK_FIX_ALL, EBADMSG, "header reserved" },
		{ "header reserved 24", 24, 4, 1, PK_FIX_ALL, EBADMSG, "header reserved" },
		{ "header length", 12, 4, 32, PK_FIX_ALL, EBADMSG, "header length" },
		{ "header count", 16, 4, 1, PK_FIX_ALL, EBADMSG, "header member count" },
		{ "index: hash order", e1, 1, 0, PK_FIX_ALL, EBADMSG, "" }, /* set below */
		{ "index: offset", e1 + 32, 8, 1, PK_FIX_ALL, EBADMSG, "offset is not where" },
		{ "index: first offset", idx + 32, 8, -1, PK_FIX_ALL, EBADMSG, "offset is not where" },
		{ "index: length short", e2 + 40, 4, -1, PK_FIX_ALL, EBADMSG, "end before the index" },
		{ "index: length long", e2 + 40, 4, 1, PK_FIX_ALL, EBADMSG, "runs past the index" },
		{ "index: length tiny", idx + 40, 4, 0, PK_FIX_ALL, EBADMSG, "" }, /* set below */
		{ "index: a byte", idx + 3, 1, 0, PK_FIX_HEADER | PK_FIX_TRAILER, EBADMSG,
		  "index CRC-32C" },
		{ "index CRC", T + 20, 4, 1, PK_FIX_HEADER | PK_FIX_TRAILER, EBADMSG,
		  "index CRC-32C" },
		{ "trailer magic", T + 32, 1, 0, PK_FIX_ALL, EBADMSG, "trailer without its magic" },
		{ "trailer CRC", T + 28, 4, 1, 0, EBADMSG, "trailer CRC-32C" },
		{ "trailer version newer", T + 24, 2, 1, PK_FIX_ALL, EPROTONOSUPPORT, "newer version" },
		{ "trailer version 0", T + 24, 2, -1, PK_FIX_ALL, EBADMSG, "trailer version 0" },
		{ "trailer reserved", T + 26, 2, 1, PK_FIX_ALL, EBADMSG, "trailer reserved" },
		{ "trailer pack length", T + 8, 8, 1, PK_FIX_ALL, EBADMSG, "pack length" },
		{ "trailer count 0", T + 16, 4, -3, PK_FIX_ALL, EBADMSG, "member count out of bounds" },
		{ "trailer count huge", T + 16, 4, PACK_MEMBERS_MAX, PK_FIX_ALL, EBADMSG,
		  "member count out of bounds" },
		{ "trailer count +1", T + 16, 4, 1, PK_FIX_ALL, EBADMSG, "index offset" },
		{ "trailer index offset", T, 8, 1, PK_FIX_ALL, EBADMSG, "index offset" },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct pk_case c = cases[k];
		uint8_t *p = malloc(fx.len);
		cr_assert_not_null(p);
		memcpy(p, fx.pack, fx.len);
		size_t at = pk_pos(c.at, fx.len);
		if (strcmp(c.what, "index: hash order") == 0) {
			/* entry 1 takes entry 0's hash: a duplicate, not ascending */
			memcpy(p + e1, p + idx, HASH_LEN);
			c.why = "not strictly ascending";
		} else if (strcmp(c.what, "index: length tiny") == 0) {
			pk_le(p + at, PACK_MEMBER_MIN - 1, 4);
			c.why = "member length out of bounds";
		} else if (c.add == 0) {
			p[at] ^= 0x5a;
		} else {
			pk_le(p + at, pk_rd(p + at, c.bytes) + (uint64_t)c.add, c.bytes);
		}
		pk_fix(p, fx.len, c.fix);
		pk_expect(p, fx.len, &c);
		free(p);
	}
}

Test(pack, an_entry_crc_made_wrong_is_found_by_that_members_check)
{
	pk_members(3, 40);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	size_t idx = fx.len - PACK_TRAILER_LEN - 3 * PACK_ENTRY_LEN;
	fx.pack[idx + PACK_ENTRY_LEN + 44] ^= 1; /* entry 1's image CRC */
	pk_fix(fx.pack, fx.len, PK_FIX_INDEX | PK_FIX_TRAILER);
	struct pack_view v;
	const char *why = NULL;
	OK(pack_open(fx.pack, fx.len, &v, &why)); /* the index is what was written */
	for (uint32_t i = 0; i < v.n; i++) {
		struct pack_entry e;
		pack_entry_at(&v, i, &e);
		uint8_t plain[512];
		size_t got;
		int rc = pack_member_check(&v, &e, plain, sizeof(plain), &got, &why);
		if (i == 1) {
			cr_assert_eq(rc, -EBADMSG);
			cr_assert_str_eq(why, "member image CRC-32C mismatch");
			cr_assert_eq(got, 0);
		} else {
			cr_assert_eq(rc, 0, "member %u: %s", i, why ? why : "-");
		}
	}
}

/* The member of v (whole) whose image holds byte pos, or -1. */
static int pk_member_at(const struct pack_view *v, size_t pos)
{
	for (uint32_t i = 0; i < v->n; i++) {
		struct pack_entry e;
		pack_entry_at(v, i, &e);
		if (pos >= e.off && pos < e.off + e.len)
			return (int)i;
	}
	return -1;
}

/* The fixture's member of hash. */
static const struct pk_member *pk_by_hash(const uint8_t hash[HASH_LEN])
{
	for (size_t i = 0; i < fx.n; i++)
		if (memcmp(fx.m[i].hash, hash, HASH_LEN) == 0)
			return &fx.m[i];
	return NULL;
}

Test(pack, every_byte_flipped_never_hands_out_a_wrong_member)
{
	pk_members(3, 30);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	for (int flip = 0; flip < 2; flip++) {
		uint8_t mask = flip ? 0x80 : 0x01;
		for (size_t pos = 0; pos < fx.len; pos++) {
			fx.pack[pos] ^= mask;
			struct pack_view v;
			const char *why = NULL;
			int rc = pack_open(fx.pack, fx.len, &v, &why);
			if (rc != 0) {
				cr_assert_eq(rc, -EBADMSG, "byte %zu: %d", pos, rc);
				cr_assert_not_null(why, "byte %zu: no reason", pos);
				fx.pack[pos] ^= mask;
				continue;
			}
			/* only a member image byte passes the open (P3) */
			int hit = pk_member_at(&v, pos);
			cr_assert_geq(hit, 0, "byte %zu outside every member passed the open", pos);
			for (uint32_t i = 0; i < v.n; i++) {
				struct pack_entry e;
				pack_entry_at(&v, i, &e);
				const struct pk_member *m = pk_by_hash(e.hash);
				cr_assert_not_null(m, "byte %zu: entry %u names no member", pos, i);
				uint8_t plain[512];
				size_t got = 99;
				rc = pack_member_check(&v, &e, plain, sizeof(plain), &got, &why);
				if ((int)i == hit) {
					cr_assert_eq(rc, -EBADMSG, "byte %zu: member %u: %d", pos, i,
						     rc);
					cr_assert_not_null(why);
					cr_assert_eq(got, 0);
				} else {
					cr_assert_eq(rc, 0, "byte %zu: member %u: %s", pos, i,
						     why ? why : "-");
					cr_assert_eq(got, m->plain_len);
					cr_assert(memcmp(plain, m->plain, got) == 0);
				}
			}
			fx.pack[pos] ^= mask;
		}
	}
}

Test(pack, every_truncation_and_an_extension_are_refused)
{
	pk_members(3, 30);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	for (size_t len = 0; len < fx.len; len++) {
		struct pack_view v;
		const char *why = NULL;
		int rc = pack_open(fx.pack, len, &v, &why);
		cr_assert_eq(rc, -EBADMSG, "truncated to %zu: %d", len, rc);
		cr_assert_not_null(why);
		/* the tail-only read of the cut pack: its last bytes, as a rebuild has them */
		size_t tl = len < 4096 ? len : 4096;
		uint64_t need = 0;
		rc = pack_open_tail(fx.pack + len - tl, tl, len, &v, &need, &why);
		cr_assert(rc == -EBADMSG || (rc == -ENODATA && tl < PACK_TRAILER_LEN),
			  "tail of the pack cut to %zu: %d", len, rc);
	}
	uint8_t *longer = malloc(fx.len + 1);
	cr_assert_not_null(longer);
	memcpy(longer, fx.pack, fx.len);
	longer[fx.len] = 0;
	struct pack_view v;
	const char *why = NULL;
	FAILS(pack_open(longer, fx.len + 1, &v, &why), EBADMSG);
	free(longer);
}

Test(pack, the_builder_refuses_a_duplicate_an_empty_pack_and_a_misnamed_image)
{
	pk_members(2, 40);
	struct pack_builder b;
	pack_builder_init(&b);
	const char *why = NULL;
	uint8_t *out = (uint8_t *)1;
	size_t len = 1;
	uint8_t name[HASH_LEN];
	FAILS(pack_builder_finish(&b, &out, &len, name, &why), EINVAL);
	cr_assert_str_eq(why, "an empty pack (no member)");
	cr_assert_null(out);
	OK(pack_builder_add(&b, fx.m[0].hash, fx.m[0].image, fx.m[0].image_len, &why));
	uint64_t size = pack_builder_size(&b);
	FAILS(pack_builder_add(&b, fx.m[0].hash, fx.m[0].image, fx.m[0].image_len, &why), EEXIST);
	cr_assert_not_null(strstr(why, "in the pack already"));
	cr_assert_eq(pack_builder_count(&b), 1);
	cr_assert_eq(pack_builder_size(&b), size); /* unchanged */
	/* member 1's image under member 0's... no: under a third hash */
	uint8_t other[HASH_LEN];
	memcpy(other, fx.m[1].hash, HASH_LEN);
	other[0] ^= 1;
	FAILS(pack_builder_add(&b, other, fx.m[1].image, fx.m[1].image_len, &why), EBADMSG);
	cr_assert_str_eq(why, "member image names another chunk than its index entry");
	FAILS(pack_builder_add(&b, fx.m[1].hash, fx.m[1].image, fx.m[1].image_len - 1, &why),
	      EBADMSG);
	cr_assert_not_null(strstr(why, "length"));
	FAILS(pack_builder_add(&b, fx.m[1].hash, fx.m[1].image, 10, &why), EBADMSG);
	cr_assert_not_null(strstr(why, "shorter than a chunk object's header"));
	cr_assert_eq(pack_builder_count(&b), 1);
	OK(pack_builder_add(&b, fx.m[1].hash, fx.m[1].image, fx.m[1].image_len, &why));
	OK(pack_builder_finish(&b, &out, &len, name, &why));
	struct pack_view v;
	OK(pack_open(out, len, &v, &why));
	cr_assert_eq(v.n, 2);
	free(out);
	pack_builder_free(&b);
}

Test(pack, a_member_failing_store_object_check_is_found_by_the_member_check)
{
	pk_members(3, 200);
	/* member 0 is random, so raw: a payload byte changed and the image's own
	 * payload CRC (header bytes 64-67) made right again leaves only the
	 * SHA-256 of the plain bytes to tell */
	struct pk_member *m = &fx.m[0];
	cr_assert_eq(m->image[10], CODEC_RAW);
	m->image[STORE_HEADER_LEN + 7] ^= 0x10;
	pk_le(m->image + 64, crc32c(0, m->image + STORE_HEADER_LEN, m->image_len - STORE_HEADER_LEN),
	      4);
	pk_build(1, &fx.pack, &fx.len, fx.name); /* the builder checks framing only */
	struct pack_view v;
	const char *why = NULL;
	OK(pack_open(fx.pack, fx.len, &v, &why)); /* and so the pack is whole */
	struct pack_entry e;
	OK(pack_find(&v, m->hash, &e));
	uint8_t plain[1024];
	size_t got = 5;
	FAILS(pack_member_check(&v, &e, plain, sizeof(plain), &got, &why), EBADMSG);
	cr_assert_not_null(why);
	cr_assert_eq(got, 0);
	pk_assert_member(&v, 1);
	pk_assert_member(&v, 2);
}

Test(pack, the_tail_alone_gives_the_index)
{
	pk_members(1000, 40);
	pk_build(1, &fx.pack, &fx.len, fx.name);
	struct pack_view whole, tail;
	const char *why = NULL;
	OK(pack_open(fx.pack, fx.len, &whole, &why));
	uint64_t need = 0;
	/* too little: first the trailer, then as much as it says */
	FAILS(pack_open_tail(fx.pack + fx.len - 10, 10, fx.len, &tail, &need, &why), ENODATA);
	cr_assert_eq(need, PACK_TRAILER_LEN);
	FAILS(pack_open_tail(fx.pack + fx.len - 4096, 4096, fx.len, &tail, &need, &why), ENODATA);
	uint64_t want = fx.len - whole.index_off;
	cr_assert_eq(need, want);
	cr_assert_eq(want, 1000 * PACK_ENTRY_LEN + PACK_TRAILER_LEN);
	FAILS(pack_open_tail(fx.pack + fx.len - (want - 1), want - 1, fx.len, &tail, &need, &why),
	      ENODATA);
	OK(pack_open_tail(fx.pack + fx.len - want, want, fx.len, &tail, &need, &why));
	cr_assert_null(tail.base);
	cr_assert_eq(tail.n, 1000);
	cr_assert_eq(tail.index_off, whole.index_off);
	for (size_t i = 0; i < fx.n; i++) {
		struct pack_entry a, b;
		OK(pack_find(&whole, fx.m[i].hash, &a));
		OK(pack_find(&tail, fx.m[i].hash, &b));
		cr_assert(memcmp(&a, &b, sizeof(a)) == 0, "member %zu: entries differ", i);
		if (i % 50 == 0)
			pk_assert_member(&tail, i); /* a range read at its entry */
	}
	/* a tail-only view has no bytes to check by name or by member */
	FAILS(pack_check_name(&tail, fx.name, &why), EINVAL);
	struct pack_entry e;
	pack_entry_at(&tail, 0, &e);
	uint8_t plain[512];
	size_t got;
	FAILS(pack_member_check(&tail, &e, plain, sizeof(plain), &got, &why), EINVAL);
	/* a byte of the index damaged: the same verdict as the whole read's */
	uint8_t *t = malloc(want);
	cr_assert_not_null(t);
	memcpy(t, fx.pack + fx.len - want, want);
	t[PACK_ENTRY_LEN * 500 + 33] ^= 4;
	FAILS(pack_open_tail(t, want, fx.len, &tail, &need, &why), EBADMSG);
	cr_assert_str_eq(why, "pack index CRC-32C mismatch");
	free(t);
	/* a tail of a length other than the pack's */
	FAILS(pack_open_tail(fx.pack + fx.len - want, want, fx.len + 1, &tail, &need, &why),
	      EBADMSG);
	cr_assert_not_null(strstr(why, "pack length"));
}
