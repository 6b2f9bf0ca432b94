/* pack — the pack object's format; layout and invariants P1-P7 in pack.h. */
#include "pack.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "store.h"

static void pk_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void pk_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static void pk_put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t pk_get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t pk_get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}
static uint64_t pk_get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* A verdict (P7). */
static int pk_bad(const char **why, const char *reason)
{
	*why = reason;
	return -EBADMSG;
}

/* The framing of a chunk object image named hash (store.h): magic, a known
 * (version, header length) pair, the hash field, header + payload = len.
 * NULL when it holds, else the reason. */
static const char *pk_framing(const uint8_t hash[HASH_LEN], const uint8_t *img, size_t len)
{
	if (len < STORE_HEADER_LEN_V1)
		return "member image shorter than a chunk object's header";
	if (memcmp(img, STORE_MAGIC, 8) != 0)
		return "member image without the chunk object magic";
	uint16_t version = pk_get16(img + 8);
	uint32_t hlen = pk_get32(img + 12);
	if (!((version == STORE_FORMAT_VERSION && hlen == STORE_HEADER_LEN) ||
	      (version == 1 && hlen == STORE_HEADER_LEN_V1)))
		return "member image of an unknown chunk object version or header length";
	if (memcmp(img + 32, hash, HASH_LEN) != 0)
		return "member image names another chunk than its index entry";
	uint64_t payload = pk_get64(img + 24);
	if (payload > len || hlen + payload != len)
		return "member image length is not its header's plus its payload's";
	return NULL;
}

/* ---- builder ---- */

void pack_builder_init(struct pack_builder *b)
{
	memset(b, 0, sizeof(*b));
}

void pack_builder_free(struct pack_builder *b)
{
	free(b->m);
	free(b->arena);
	free(b->set);
	pack_builder_init(b);
}

uint32_t pack_builder_count(const struct pack_builder *b)
{
	return b->n;
}

uint64_t pack_builder_size(const struct pack_builder *b)
{
	return PACK_HEADER_LEN + (uint64_t)b->arena_len + (uint64_t)b->n * PACK_ENTRY_LEN +
	       PACK_TRAILER_LEN;
}

static uint32_t pk_slot(const uint8_t hash[HASH_LEN], uint32_t cap)
{
	return pk_get32(hash) & (cap - 1); /* SHA-256 bytes are uniform */
}

/* The set's slot holding hash, or the free slot where it would go. */
static uint32_t pk_set_find(const struct pack_builder *b, const uint8_t hash[HASH_LEN])
{
	uint32_t i = pk_slot(hash, b->set_cap);
	while (b->set[i] && memcmp(b->m[b->set[i] - 1].hash, hash, HASH_LEN) != 0)
		i = (i + 1) & (b->set_cap - 1);
	return i;
}

/* Room for one more member: the entry array, and a set at most half full. */
static int pk_grow(struct pack_builder *b, size_t len)
{
	if (b->n == b->cap) {
		uint32_t cap = b->cap ? 2 * b->cap : 16;
		struct pack_entry *m = realloc(b->m, (size_t)cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		b->m = m;
		b->cap = cap;
	}
	if (b->arena_len + len > b->arena_cap) {
		size_t cap = b->arena_cap ? b->arena_cap : 64 * 1024;
		while (cap < b->arena_len + len)
			cap *= 2;
		uint8_t *a = realloc(b->arena, cap);
		if (!a)
			return -ENOMEM;
		b->arena = a;
		b->arena_cap = cap;
	}
	if (2 * ((uint64_t)b->n + 1) < b->set_cap)
		return 0;
	uint32_t cap = b->set_cap ? 2 * b->set_cap : 64;
	uint32_t *set = calloc(cap, sizeof(*set));
	if (!set)
		return -ENOMEM;
	free(b->set);
	b->set = set;
	b->set_cap = cap;
	for (uint32_t k = 0; k < b->n; k++)
		b->set[pk_set_find(b, b->m[k].hash)] = k + 1;
	return 0;
}

int pack_builder_add(struct pack_builder *b, const uint8_t hash[HASH_LEN], const void *image,
		     size_t len, const char **why)
{
	*why = NULL;
	const char *bad = pk_framing(hash, image, len);
	if (bad)
		return pk_bad(why, bad);
	if (len > PACK_MEMBER_MAX) {
		*why = "member image larger than a pack member can be";
		return -E2BIG;
	}
	if (b->n >= PACK_MEMBERS_MAX) {
		*why = "a pack has as many members as it can hold";
		return -E2BIG;
	}
	if (pack_builder_size(b) + len + PACK_ENTRY_LEN > PACK_SIZE_MAX) {
		*why = "the pack would be larger than a pack can be";
		return -E2BIG;
	}
	if (b->set_cap && b->set[pk_set_find(b, hash)]) {
		*why = "a member of this hash is in the pack already";
		return -EEXIST;
	}
	int rc = pk_grow(b, len);
	if (rc)
		return rc;
	struct pack_entry *e = &b->m[b->n];
	memcpy(e->hash, hash, HASH_LEN);
	e->off = b->arena_len;
	e->len = (uint32_t)len;
	e->crc = crc32c(0, image, len);
	memcpy(b->arena + b->arena_len, image, len);
	b->arena_len += len;
	b->set[pk_set_find(b, hash)] = ++b->n;
	return 0;
}

static int pk_by_hash(const void *a, const void *b)
{
	return memcmp(((const struct pack_entry *)a)->hash, ((const struct pack_entry *)b)->hash,
		      HASH_LEN);
}

static void pk_header(uint8_t *h, uint32_t n)
{
	memset(h, 0, PACK_HEADER_LEN);
	memcpy(h, PACK_MAGIC, 8);
	pk_put16(h + 8, PACK_VERSION);
	pk_put32(h + 12, PACK_HEADER_LEN);
	pk_put32(h + 16, n);
	pk_put32(h + 28, crc32c(0, h, 28));
}

static void pk_trailer(uint8_t *t, uint64_t index_off, uint64_t len, uint32_t n,
		       uint32_t index_crc)
{
	memset(t, 0, PACK_TRAILER_LEN);
	pk_put64(t, index_off);
	pk_put64(t + 8, len);
	pk_put32(t + 16, n);
	pk_put32(t + 20, index_crc);
	pk_put16(t + 24, PACK_VERSION);
	pk_put32(t + 28, crc32c(0, t, 28));
	memcpy(t + 32, PACK_END_MAGIC, 8);
}

int pack_builder_finish(const struct pack_builder *b, uint8_t **out, size_t *out_len,
			uint8_t name[HASH_LEN], const char **why)
{
	*why = NULL;
	*out = NULL;
	*out_len = 0;
	if (b->n == 0) {
		*why = "an empty pack (no member)";
		return -EINVAL;
	}
	size_t len = (size_t)pack_builder_size(b);
	uint8_t *p = malloc(len);
	struct pack_entry *order = malloc((size_t)b->n * sizeof(*order));
	if (!p || !order) {
		free(p);
		free(order);
		return -ENOMEM;
	}
	memcpy(order, b->m, (size_t)b->n * sizeof(*order));
	qsort(order, b->n, sizeof(*order), pk_by_hash); /* P2, P4 */
	pk_header(p, b->n);
	uint64_t at = PACK_HEADER_LEN;
	uint64_t index_off = PACK_HEADER_LEN + b->arena_len;
	for (uint32_t i = 0; i < b->n; i++) {
		memcpy(p + at, b->arena + order[i].off, order[i].len);
		uint8_t *e = p + index_off + (uint64_t)i * PACK_ENTRY_LEN;
		memcpy(e, order[i].hash, HASH_LEN);
		pk_put64(e + 32, at);
		pk_put32(e + 40, order[i].len);
		pk_put32(e + 44, order[i].crc);
		at += order[i].len;
	}
	free(order);
	uint64_t index_len = (uint64_t)b->n * PACK_ENTRY_LEN;
	pk_trailer(p + index_off + index_len, index_off, len, b->n,
		   crc32c(0, p + index_off, index_len));
	hash_sha256(p, len, name);
	*out = p;
	*out_len = len;
	return 0;
}

/* ---- reader ---- */

/* The trailer t (its last PACK_TRAILER_LEN bytes) of a pack pack_len long:
 * P6's fields first, then P4's bounds. Sets *n and *index_off. */
static int pk_trailer_parse(const uint8_t *t, uint64_t pack_len, uint32_t *n,
			    uint64_t *index_off, uint32_t *index_crc, const char **why)
{
	if (memcmp(t + 32, PACK_END_MAGIC, 8) != 0)
		return pk_bad(why, "pack trailer without its magic (truncated, or not a pack)");
	if (pk_get32(t + 28) != crc32c(0, t, 28))
		return pk_bad(why, "pack trailer CRC-32C mismatch");
	if (pk_get16(t + 24) > PACK_VERSION) {
		*why = "pack of a newer version than this ckptfs reads";
		return -EPROTONOSUPPORT;
	}
	if (pk_get16(t + 24) != PACK_VERSION)
		return pk_bad(why, "pack trailer version 0");
	if (pk_get16(t + 26) != 0)
		return pk_bad(why, "pack trailer reserved field not zero");
	if (pk_get64(t + 8) != pack_len)
		return pk_bad(why, "pack length is not the trailer's (truncated or extended)");
	*n = pk_get32(t + 16);
	if (*n == 0 || *n > PACK_MEMBERS_MAX)
		return pk_bad(why, "pack trailer member count out of bounds");
	*index_off = pk_get64(t);
	uint64_t index_len = (uint64_t)*n * PACK_ENTRY_LEN;
	if (pack_len < PACK_HEADER_LEN + (uint64_t)*n * PACK_MEMBER_MIN + index_len +
			       PACK_TRAILER_LEN)
		return pk_bad(why, "pack shorter than its member count needs");
	if (*index_off != pack_len - PACK_TRAILER_LEN - index_len)
		return pk_bad(why, "pack index offset is not where the trailer's count puts it");
	*index_crc = pk_get32(t + 20);
	return 0;
}

/* P4 over the index (n entries at idx, of CRC index_crc), ending at index_off. */
static int pk_index_check(const uint8_t *idx, uint32_t n, uint64_t index_off, uint32_t index_crc,
			  const char **why)
{
	if (crc32c(0, idx, (size_t)n * PACK_ENTRY_LEN) != index_crc)
		return pk_bad(why, "pack index CRC-32C mismatch");
	uint64_t at = PACK_HEADER_LEN;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *e = idx + (size_t)i * PACK_ENTRY_LEN;
		if (i > 0 && memcmp(e - PACK_ENTRY_LEN, e, HASH_LEN) >= 0)
			return pk_bad(why, "pack index hashes not strictly ascending (a duplicate?)");
		uint32_t len = pk_get32(e + 40);
		if (len < PACK_MEMBER_MIN || len > PACK_MEMBER_MAX)
			return pk_bad(why, "pack index member length out of bounds");
		if (pk_get64(e + 32) != at)
			return pk_bad(why, "pack index member offset is not where the previous ends");
		at += len;
		if (at > index_off)
			return pk_bad(why, "pack index member runs past the index");
	}
	if (at != index_off)
		return pk_bad(why, "pack index members end before the index");
	return 0;
}

static int pk_header_check(const uint8_t *h, uint32_t n, const char **why)
{
	if (memcmp(h, PACK_MAGIC, 8) != 0)
		return pk_bad(why, "pack header without its magic");
	if (pk_get32(h + 28) != crc32c(0, h, 28))
		return pk_bad(why, "pack header CRC-32C mismatch");
	if (pk_get16(h + 8) != PACK_VERSION) /* the trailer's version was read first (P6) */
		return pk_bad(why, "pack header version is not the trailer's");
	if (pk_get16(h + 10) != 0 || pk_get32(h + 20) != 0 || pk_get32(h + 24) != 0)
		return pk_bad(why, "pack header reserved field not zero");
	if (pk_get32(h + 12) != PACK_HEADER_LEN)
		return pk_bad(why, "pack header length is not 32");
	if (pk_get32(h + 16) != n)
		return pk_bad(why, "pack header member count is not the trailer's");
	return 0;
}

int pack_open(const void *buf, size_t len, struct pack_view *v, const char **why)
{
	*why = NULL;
	memset(v, 0, sizeof(*v));
	const uint8_t *p = buf;
	if (len < PACK_HEADER_LEN + PACK_MEMBER_MIN + PACK_ENTRY_LEN + PACK_TRAILER_LEN)
		return pk_bad(why, "pack shorter than the smallest pack");
	if (len > PACK_SIZE_MAX)
		return pk_bad(why, "pack larger than a pack can be");
	uint32_t n, index_crc;
	uint64_t index_off;
	int rc = pk_trailer_parse(p + len - PACK_TRAILER_LEN, len, &n, &index_off, &index_crc, why);
	if (rc == 0)
		rc = pk_header_check(p, n, why);
	if (rc == 0)
		rc = pk_index_check(p + index_off, n, index_off, index_crc, why);
	if (rc != 0)
		return rc;
	*v = (struct pack_view){ .base = p, .len = len, .n = n, .index_off = index_off,
				 .index = p + index_off };
	return 0;
}

int pack_open_tail(const void *tail, size_t tail_len, uint64_t pack_len, struct pack_view *v,
		   uint64_t *need, const char **why)
{
	*why = NULL;
	*need = 0;
	memset(v, 0, sizeof(*v));
	if (pack_len < PACK_HEADER_LEN + PACK_MEMBER_MIN + PACK_ENTRY_LEN + PACK_TRAILER_LEN)
		return pk_bad(why, "pack shorter than the smallest pack");
	if (pack_len > PACK_SIZE_MAX)
		return pk_bad(why, "pack larger than a pack can be");
	if (tail_len > pack_len) {
		*why = "more tail than pack";
		return -EINVAL;
	}
	if (tail_len < PACK_TRAILER_LEN) {
		*need = PACK_TRAILER_LEN;
		return -ENODATA;
	}
	const uint8_t *end = (const uint8_t *)tail + tail_len; /* the pack's end */
	uint32_t n, index_crc;
	uint64_t index_off;
	int rc = pk_trailer_parse(end - PACK_TRAILER_LEN, pack_len, &n, &index_off, &index_crc,
				  why);
	if (rc != 0)
		return rc;
	if (tail_len < pack_len - index_off) {
		*need = pack_len - index_off;
		return -ENODATA;
	}
	const uint8_t *idx = end - (pack_len - index_off);
	rc = pk_index_check(idx, n, index_off, index_crc, why);
	if (rc != 0)
		return rc;
	*v = (struct pack_view){ .base = NULL, .len = pack_len, .n = n, .index_off = index_off,
				 .index = idx };
	return 0;
}

int pack_check_name(const struct pack_view *v, const uint8_t name[HASH_LEN], const char **why)
{
	*why = NULL;
	if (!v->base) {
		*why = "a tail-only view has no bytes to hash";
		return -EINVAL;
	}
	uint8_t h[HASH_LEN];
	hash_sha256(v->base, (size_t)v->len, h);
	if (memcmp(h, name, HASH_LEN) != 0)
		return pk_bad(why, "pack bytes are not those its name says (SHA-256 mismatch)");
	return 0;
}

void pack_entry_at(const struct pack_view *v, uint32_t i, struct pack_entry *e)
{
	const uint8_t *p = v->index + (size_t)i * PACK_ENTRY_LEN;
	memcpy(e->hash, p, HASH_LEN);
	e->off = pk_get64(p + 32);
	e->len = pk_get32(p + 40);
	e->crc = pk_get32(p + 44);
}

int pack_find(const struct pack_view *v, const uint8_t hash[HASH_LEN], struct pack_entry *e)
{
	uint32_t lo = 0, hi = v->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = memcmp(v->index + (size_t)mid * PACK_ENTRY_LEN, hash, HASH_LEN);
		if (c == 0) {
			pack_entry_at(v, mid, e);
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENOENT;
}

int pack_member_verify(const struct pack_entry *e, const void *image, size_t len, void *plain,
		       size_t cap, size_t *plain_len, const char **why)
{
	*why = NULL;
	*plain_len = 0;
	if (len != e->len)
		return pk_bad(why, "member image is not its index entry's length");
	if (crc32c(0, image, len) != e->crc)
		return pk_bad(why, "member image CRC-32C mismatch");
	const char *bad = pk_framing(e->hash, image, len);
	if (bad)
		return pk_bad(why, bad);
	const char *what = NULL;
	int rc = store_object_check(e->hash, image, len, plain, cap, plain_len, &what);
	if (rc == -EIO) {
		*plain_len = 0;
		return pk_bad(why, what ? what : "member image damaged");
	}
	if (rc != 0)
		*plain_len = 0; /* -ENOMEM: no verdict */
	return rc;
}

int pack_member_check(const struct pack_view *v, const struct pack_entry *e, void *plain,
		      size_t cap, size_t *plain_len, const char **why)
{
	if (!v->base) {
		*why = "a tail-only view has no member bytes";
		*plain_len = 0;
		return -EINVAL;
	}
	/* P4 puts every entry of a validated view inside the pack */
	return pack_member_verify(e, v->base + e->off, e->len, plain, cap, plain_len, why);
}

void pack_relpath(const uint8_t name[HASH_LEN], char *buf, size_t size)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(name, hex);
	snprintf(buf, size, "packs/%.2s/%s%s", hex, hex, PACK_SUFFIX);
}

int pack_name_parse(const char *file, uint8_t name[HASH_LEN])
{
	size_t n = strlen(file);
	if (n != HASH_HEX_LEN + strlen(PACK_SUFFIX) || strcmp(file + HASH_HEX_LEN, PACK_SUFFIX) != 0)
		return -EINVAL;
	char hex[HASH_HEX_LEN + 1];
	for (size_t i = 0; i < HASH_HEX_LEN; i++) {
		char c = file[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -EINVAL; /* lower case only: one name per pack */
		hex[i] = c;
	}
	hex[HASH_HEX_LEN] = '\0';
	return hash_from_hex(hex, name);
}

int pack_read_tail(pack_read_fn *read, void *arg, uint64_t size, uint8_t **tail,
		   struct pack_view *v, const char **why)
{
	uint64_t want = size < PACK_TAIL_FIRST ? size : PACK_TAIL_FIRST, need = 0;
	int rc = -ENODATA;
	*tail = NULL;
	*why = "no pack fits in its size";
	for (int round = 0; round < 2 && rc == -ENODATA; round++) {
		free(*tail);
		*tail = NULL;
		if (want == 0 || want > size || want > PACK_SIZE_MAX)
			return -EBADMSG;
		*tail = malloc(want);
		if (!*tail)
			return -ENOMEM;
		rc = read(arg, size - want, (size_t)want, *tail);
		if (rc == 0)
			rc = pack_open_tail(*tail, (size_t)want, size, v, &need, why);
		want = need;
	}
	return rc == -ENODATA ? -EBADMSG : rc;
}
