/* fuzz_pack — the pack object's reader (fs/lib/pack.c, pack.h P1-P7) over a
 * pack in memory, as a whole read (pack_open) and as a rebuild's tail-only
 * read (pack_open_tail), then every member's check.
 *
 * Each input is checked as is, and again with every CRC-32C made right
 * (each member's in its entry, where the entry lies inside the input, then
 * the header's, the index's and the trailer's), so that mutations get past
 * the checksums to the rules behind them. A pack that opens must be what
 * P3/P4 promise: its entries inside it, found by hash, the tail-only read
 * agreeing; a member that checks hashes to its entry; and, when every member
 * holds its CRC and is framed as a chunk object, the builder given those
 * members makes exactly the input's bytes (the format has one encoding per
 * set of members: P2). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "crc32c.h"
#include "hash.h"
#include "log.h"
#include "pack.h"
#include "store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *fz_plain;
static size_t fz_cap;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(stderr, LOG_LVL_OFF);
	fz_cap = chunker_default_params.max_size;
	fz_plain = malloc(fz_cap);
	return fz_plain ? 0 : 1;
}

static uint64_t fz_get(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void fz_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Every CRC made right where the trailer's geometry fits in the input. */
static void fz_fix(uint8_t *p, size_t size)
{
	if (size < PACK_HEADER_LEN + PACK_TRAILER_LEN)
		return;
	uint8_t *t = p + size - PACK_TRAILER_LEN;
	uint64_t n = fz_get(t + 16, 4), index_off = fz_get(t, 8);
	if (n > PACK_MEMBERS_MAX || index_off > size - PACK_TRAILER_LEN ||
	    n * PACK_ENTRY_LEN > size - PACK_TRAILER_LEN - index_off)
		return;
	for (uint64_t i = 0; i < n; i++) {
		uint8_t *e = p + index_off + i * PACK_ENTRY_LEN;
		uint64_t off = fz_get(e + 32, 8), len = fz_get(e + 40, 4);
		if (off <= size && len <= size - off)
			fz_put32(e + 44, crc32c(0, p + off, (size_t)len));
	}
	fz_put32(p + 28, crc32c(0, p, 28));
	fz_put32(t + 20, crc32c(0, p + index_off, (size_t)(n * PACK_ENTRY_LEN)));
	fz_put32(t + 28, crc32c(0, t, 28));
}

/* P2: the builder given the members of v makes v's bytes, when every
 * member's CRC holds (pack_open leaves those to the member checks) and the
 * builder takes them all. */
static void fz_rebuild(const struct pack_view *v)
{
	struct pack_builder b;
	pack_builder_init(&b);
	const char *why = NULL;
	for (uint32_t i = 0; i < v->n; i++) {
		struct pack_entry e;
		pack_entry_at(v, i, &e);
		if (crc32c(0, v->base + e.off, e.len) != e.crc) {
			pack_builder_free(&b);
			return;
		}
		int rc = pack_builder_add(&b, e.hash, v->base + e.off, e.len, &why);
		assert(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
		if (rc != 0) { /* a member not framed as a chunk object: no round trip */
			pack_builder_free(&b);
			return;
		}
	}
	uint8_t *out, name[HASH_LEN];
	size_t len;
	if (pack_builder_finish(&b, &out, &len, name, &why) == 0) {
		assert(len == v->len && memcmp(out, v->base, len) == 0);
		assert(pack_check_name(v, name, &why) == 0);
		free(out);
	}
	pack_builder_free(&b);
}

static void fz_check(const uint8_t *p, size_t size)
{
	struct pack_view v, t;
	const char *why = NULL;
	int rc = pack_open(p, size, &v, &why);
	assert(rc == 0 || ((rc == -EBADMSG || rc == -EPROTONOSUPPORT) && why != NULL));
	uint64_t need = 0;
	const char *twhy = NULL;
	int trc = pack_open_tail(p, size, size, &t, &need, &twhy); /* the whole input as tail */
	assert(trc == 0 || ((trc == -EBADMSG || trc == -EPROTONOSUPPORT) && twhy != NULL) ||
	       (trc == -ENODATA && need > size));
	if (rc != 0)
		return;
	assert(trc == 0 && t.n == v.n && t.index_off == v.index_off && t.base == NULL);
	assert(v.n >= 1 && v.n <= PACK_MEMBERS_MAX && v.len == size);
	for (uint32_t i = 0; i < v.n; i++) {
		struct pack_entry e, f;
		pack_entry_at(&v, i, &e);
		assert(e.off >= PACK_HEADER_LEN && e.off + e.len <= v.index_off);
		assert(e.len >= PACK_MEMBER_MIN && e.len <= PACK_MEMBER_MAX);
		assert(pack_find(&v, e.hash, &f) == 0 && memcmp(&e, &f, sizeof(e)) == 0);
		size_t plain_len = 1;
		why = NULL;
		int m = pack_member_check(&v, &e, fz_plain, fz_cap, &plain_len, &why);
		assert(m == 0 || (m == -EBADMSG && why != NULL && plain_len == 0) || m == -ENOMEM);
		if (m == 0) {
			uint8_t got[HASH_LEN];
			assert(plain_len <= fz_cap);
			hash_sha256(fz_plain, plain_len, got);
			assert(memcmp(got, e.hash, HASH_LEN) == 0);
		}
	}
	fz_rebuild(&v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1); /* exactly size bytes, for ASan */
	memcpy(p, data, size);
	fz_check(p, size);
	fz_fix(p, size);
	fz_check(p, size);
	free(p);
	return 0;
}
