/* rbpack — the pack members on BACKING, for a rebuild; see rbpack.h. */
#define _GNU_SOURCE
#include "rbpack.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_pack.h"
#include "crc32c.h"
#include "log.h"
#include "pack.h"
#include "store.h"


/* ---- listing ---- */

struct rbpack_names {
	char (*dir)[3];
	size_t n, cap;
};

static int rbpack_dir_fn(void *arg, const char *name)
{
	struct rbpack_names *l = arg;
	bool hex2 = strlen(name) == 2 && strspn(name, "0123456789abcdef") == 2;
	if (!hex2)
		return 0; /* R1: not a shard of packs/ */
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		void *nv = realloc(l->dir, cap * sizeof(*l->dir));
		if (!nv)
			return -ENOMEM;
		l->dir = nv;
		l->cap = cap;
	}
	memcpy(l->dir[l->n++], name, 3);
	return 0;
}

static int rbpack_add(struct rbpack_map *map, const struct rbpack_member *m)
{
	if (map->n == map->cap) {
		size_t cap = map->cap ? 2 * map->cap : 1024;
		void *nv = realloc(map->m, cap * sizeof(*map->m));
		if (!nv)
			return -ENOMEM;
		map->m = nv;
		map->cap = cap;
	}
	map->m[map->n++] = *m;
	return 0;
}

struct rbpack_at {
	struct backing *b;
	const char *rel;
};

static int rbpack_read(void *arg, uint64_t off, size_t len, void *buf)
{
	struct rbpack_at *at = arg;
	return backing_get_range(at->b, at->rel, off, len, buf);
}

/* R1: a pack's tail, validated; its entries into the map. 1 if it is not
 * used (logged), 0, or BACKING's error. */
static int rbpack_read_tail(struct backing *b, struct rbpack_map *map, const char *rel,
			   const uint8_t name[HASH_LEN])
{
	uint64_t size = 0;
	int rc = backing_stat(b, rel, &size);
	if (rc != 0)
		return rc == -ENOENT ? 1 : rc;
	uint8_t *tail = NULL;
	struct pack_view v;
	const char *why = NULL;
	struct rbpack_at at = { b, rel };
	rc = pack_read_tail(rbpack_read, &at, size, &tail, &v, &why);
	if (rc == -ERANGE || rc == -ELOOP || rc == -EISDIR || rc == -EINVAL || rc == -ENOTDIR) {
		rc = -EBADMSG; /* changed meanwhile, or not a regular file: not used */
		why = "not a regular file, or cut since it was listed";
	}
	if (rc == 0) {
		for (uint32_t i = 0; i < v.n && rc == 0; i++) {
			struct pack_entry e;
			pack_entry_at(&v, i, &e);
			struct rbpack_member m = { .off = e.off, .len = e.len, .crc = e.crc,
						   .pack_size = size, .pack_members = v.n };
			memcpy(m.hash, e.hash, HASH_LEN);
			memcpy(m.pack, name, HASH_LEN);
			rc = rbpack_add(map, &m);
		}
		map->packs += rc == 0;
	}
	free(tail);
	if (rc == -EBADMSG || rc == -EPROTONOSUPPORT) {
		log_warn("rebuild: BACKING %s: %s is not used: %s", backing_spec(b), rel,
			 rc == -EBADMSG ? why : "a pack format newer than this ckptfs");
		map->skipped++;
		return 1;
	}
	return rc;
}

struct rbpack_shard {
	struct backing *b;
	struct rbpack_map *map;
	const char *dir;
	int rc;
};

static int rbpack_file_fn(void *arg, const char *file)
{
	struct rbpack_shard *s = arg;
	uint8_t name[HASH_LEN];
	char rel[PACK_RELPATH_LEN], expect[PACK_RELPATH_LEN];
	snprintf(rel, sizeof(rel), "packs/%s/%s", s->dir, file);
	if (pack_name_parse(file, name) != 0) {
		log_warn("rebuild: BACKING %s: %s is not a pack's name; not used", backing_spec(s->b),
			 rel);
		s->map->skipped++;
		return 0;
	}
	pack_relpath(name, expect, sizeof(expect));
	if (strcmp(rel, expect) != 0) { /* R1: in another pack's shard */
		log_warn("rebuild: BACKING %s: %s is not in its directory; not used",
			 backing_spec(s->b), rel);
		s->map->skipped++;
		return 0;
	}
	int rc = rbpack_read_tail(s->b, s->map, rel, name);
	return rc < 0 ? rc : 0;
}

static int rbpack_cmp(const void *a, const void *b)
{
	return memcmp(((const struct rbpack_member *)a)->hash,
		      ((const struct rbpack_member *)b)->hash, HASH_LEN);
}

int rbpack_load(struct backing *b, struct rbpack_map *map)
{
	memset(map, 0, sizeof(*map));
	struct rbpack_names dirs = { 0 };
	int rc = backing_list(b, "packs", rbpack_dir_fn, &dirs);
	if (rc == -ENOENT)
		rc = 0; /* no pack was ever put */
	for (size_t i = 0; i < dirs.n && rc == 0; i++) {
		char reldir[16];
		snprintf(reldir, sizeof(reldir), "packs/%s", dirs.dir[i]);
		struct rbpack_shard s = { b, map, dirs.dir[i], 0 };
		rc = backing_list(b, reldir, rbpack_file_fn, &s);
		if (rc == -ENOENT || rc == -ENOTDIR)
			rc = 0;
	}
	free(dirs.dir);
	if (rc != 0) {
		log_error("rebuild: BACKING %s: cannot read its packs: %s", backing_spec(b),
			  strerror(-rc));
		rbpack_free(map);
		return rc;
	}
	if (map->n > 1) /* (m is NULL with no member: qsort's first argument must not be) */
		qsort(map->m, map->n, sizeof(*map->m), rbpack_cmp);
	if (map->packs + map->skipped > 0)
		log_info("rebuild: BACKING %s: %" PRIu64 " packs of %zu members read, %" PRIu64
			 " not used", backing_spec(b), map->packs, map->n, map->skipped);
	return 0;
}

void rbpack_free(struct rbpack_map *map)
{
	free(map->m);
	memset(map, 0, sizeof(*map));
}

const struct rbpack_member *rbpack_find(const struct rbpack_map *map,
					const uint8_t hash[HASH_LEN], size_t *n)
{
	*n = 0;
	size_t lo = 0, hi = map->n;
	while (lo < hi) { /* the first entry >= hash */
		size_t mid = lo + (hi - lo) / 2;
		if (memcmp(map->m[mid].hash, hash, HASH_LEN) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo + *n < map->n && memcmp(map->m[lo + *n].hash, hash, HASH_LEN) == 0)
		(*n)++;
	return *n ? &map->m[lo] : NULL;
}

/* ---- placing ---- */

/* R3: the first of cand[0..n) whose image matches its entry's CRC-32C
 * (one candidate: it, unread; its reads check it anyway). */
static const struct rbpack_member *rbpack_pick(struct backing *b,
					       const struct rbpack_member *cand, size_t n)
{
	if (n == 1)
		return cand;
	for (size_t i = 0; i < n; i++) {
		uint8_t *buf = cand[i].len <= PACK_MEMBER_MAX ? malloc(cand[i].len) : NULL;
		char rel[PACK_RELPATH_LEN];
		pack_relpath(cand[i].pack, rel, sizeof(rel));
		bool good = buf && backing_get_range(b, rel, cand[i].off, cand[i].len, buf) == 0 &&
			    crc32c(0, buf, cand[i].len) == cand[i].crc;
		free(buf);
		if (good)
			return &cand[i];
	}
	return NULL;
}

struct rbpack_walk {
	struct backing *b;
	struct cat *cat;
	const struct rbpack_map *map;
	uint64_t placed;
};

static int rbpack_place_one(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			    uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct rbpack_walk *w = arg;
	size_t n = 0;
	const struct rbpack_member *cand = rbpack_find(w->map, hash, &n);
	if (!cand || stored_len < 0)
		return 0;
	struct cat_chunk_where where;
	if (cat_chunk_where(w->cat, hash, &where) != 0 || !where.uploaded || where.packed)
		return 0;
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	uint64_t size = 0;
	int rc = backing_stat(w->b, rel, &size);
	if (rc == 0)
		return 0; /* R2: loose on BACKING */
	if (rc != -ENOENT)
		return rc;
	const struct rbpack_member *m = rbpack_pick(w->b, cand, n);
	if (!m) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(hash, hex);
		log_error("rebuild: BACKING %s: chunk %s: none of its %zu copies in packs is whole",
			  backing_spec(w->b), hex, n);
		return 0;
	}
	rc = cat_pack_place(w->cat, hash, m->pack, m->pack_size, m->pack_members, m->off, m->len);
	w->placed += rc == 0;
	return rc == -ENOENT ? 0 : rc;
}

int rbpack_place(struct backing *b, struct cat *cat, const struct rbpack_map *map,
		 uint64_t *placed)
{
	struct rbpack_walk w = { b, cat, map, 0 };
	int rc = map->n ? cat_chunks(cat, rbpack_place_one, &w) : 0;
	*placed = w.placed;
	if (w.placed > 0)
		log_info("rebuild: BACKING %s: %" PRIu64 " chunks found in packs", backing_spec(b),
			 w.placed);
	return rc;
}
