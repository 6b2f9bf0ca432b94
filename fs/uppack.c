/* uppack — the uploader's packs; see uppack.h. */
#define _GNU_SOURCE
#include "uppack.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "backing.h"
#include "catalog.h"
#include "catalog_pack.h"
#include "log.h"

void uppack_init(struct uppack *p)
{
	memset(p, 0, sizeof(*p));
	pack_builder_init(&p->b);
}

void uppack_reset(struct uppack *p)
{
	pack_builder_free(&p->b);
	free(p->bytes);
	uppack_init(p);
}

int uppack_add(struct uppack *p, const struct cat_upload *row, const void *image, size_t len)
{
	assert(row->kind == UP_CHUNK && p->bytes == NULL);
	if (p->n >= UPPACK_ROWS_MAX)
		return -E2BIG;
	const char *why = NULL;
	int rc = pack_builder_add(&p->b, row->hash, image, len, &why);
	if (rc != 0) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(row->hash, hex);
		log_warn("pack: chunk %s is put as a loose object: %s", hex, why ? why : strerror(-rc));
		return rc;
	}
	p->rows[p->n++] = *row;
	return 0;
}

bool uppack_full(const struct uppack *p)
{
	return p->n >= UPPACK_ROWS_MAX || pack_builder_size(&p->b) >= UPPACK_BYTES;
}

int uppack_build(struct uppack *p)
{
	assert(p->n >= 1 && p->bytes == NULL);
	const char *why = NULL;
	int rc = pack_builder_finish(&p->b, &p->bytes, &p->len, p->name, &why);
	if (rc != 0)
		log_warn("pack: cannot build a pack of %" PRIu32 " members: %s", p->n,
			 why ? why : strerror(-rc));
	return rc;
}

/* Q2: the put failed; nothing may stay named. */
static void uppack_abandon(struct uppack *p, struct cat *cat, struct backing *bk,
			   const char *rel, int why)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(p->name, hex);
	int rc = backing_remove(bk, rel);
	if (rc == 0 || rc == -ENOENT)
		rc = cat_pack_forget(cat, p->name);
	log_warn("BACKING %s: pack %s of %" PRIu32 " chunks could not be put (%s); its chunks"
		 " stay queued%s", backing_spec(bk), hex, p->n, strerror(-why),
		 rc == 0 ? "" : ", and the pack is removed at the next mount");
}

int uppack_put(struct uppack *p, struct cat *cat, struct backing *bk)
{
	assert(p->bytes != NULL);
	int rc = cat_pack_begin(cat, p->name, p->len, p->n, &p->present);
	if (rc != 0 || p->present)
		return rc; /* T1 failed: nothing put, nothing named */
	char rel[PACK_RELPATH_LEN];
	pack_relpath(p->name, rel, sizeof(rel));
	rc = backing_put(bk, rel, p->bytes, p->len);
	if (rc != 0)
		uppack_abandon(p, cat, bk, rel, rc);
	return rc;
}

int uppack_done(struct uppack *p, struct cat *cat, const struct cat_upload *loose,
		size_t n_loose, size_t *taken)
{
	struct pack_view v;
	const char *why = NULL;
	int rc = pack_open(p->bytes, p->len, &v, &why);
	assert(rc == 0); /* the builder's own pack */
	struct cat_pack_member *m = calloc(p->n, sizeof(*m));
	if (!m)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n && rc == 0; i++) {
		struct pack_entry e;
		rc = pack_find(&v, p->rows[i].hash, &e);
		memcpy(m[i].hash, e.hash, HASH_LEN);
		m[i].off = e.off;
		m[i].len = e.len;
	}
	assert(rc == 0);
	rc = cat_pack_done(cat, p->name, m, p->rows, p->n, loose, n_loose, taken);
	free(m);
	return rc;
}

void uppack_unnamed(struct uppack *p, struct cat *cat, struct backing *bk, int why)
{
	char hex[HASH_HEX_LEN + 1], rel[PACK_RELPATH_LEN];
	hash_to_hex(p->name, hex);
	pack_relpath(p->name, rel, sizeof(rel));
	/* the row first, and only while no chunk row names the pack (K5): a
	 * file left by a crash between is a pack no row knows, never one a row
	 * names gone */
	int rc = p->present ? -EBUSY : cat_pack_forget(cat, p->name);
	if (rc == 0)
		rc = backing_remove(bk, rel);
	if (!p->present)
		log_warn("BACKING %s: pack %s of %" PRIu32 " chunks was put but could not be"
			 " recorded (%s); its chunks stay queued%s", backing_spec(bk), hex, p->n,
			 strerror(-why), rc == 0 ? " and the pack was removed"
					   : ", the pack is removed at the next stop or mount");
}

int uppack_remove(struct cat *cat, struct backing *bk, const struct cat_upload *row)
{
	assert(row->kind == UP_DELETE_PACK);
	bool removable = false;
	int rc = cat_pack_removable(cat, row->hash, &removable);
	if (rc != 0)
		return rc;
	if (!removable)
		return 1; /* put again, or named again (K4): moot */
	char rel[PACK_RELPATH_LEN];
	pack_relpath(row->hash, rel, sizeof(rel));
	rc = backing_remove(bk, rel);
	return rc == -ENOENT ? 0 : rc;
}

int uppack_orphans(struct cat *cat, struct backing *bk)
{
	uint8_t names[64][HASH_LEN];
	size_t n = 0;
	int removed = 0;
	do {
		int rc = cat_pack_orphans(cat, names, 64, &n);
		if (rc != 0)
			return rc;
		for (size_t i = 0; i < n; i++) {
			char rel[PACK_RELPATH_LEN];
			pack_relpath(names[i], rel, sizeof(rel));
			rc = backing_remove(bk, rel);
			if (rc == 0 || rc == -ENOENT)
				rc = cat_pack_forget(cat, names[i]);
			if (rc != 0) {
				char hex[HASH_HEX_LEN + 1];
				hash_to_hex(names[i], hex);
				log_warn("BACKING %s: pack %s, whose put a crash or failure interrupted,"
					 " could not be removed (%s); the next mount tries again",
					 backing_spec(bk), hex, strerror(-rc));
				return rc;
			}
			removed++;
		}
	} while (n == 64);
	if (removed > 0)
		log_info("BACKING %s: removed %d packs whose put a crash or failure interrupted"
			 " (nothing named them)", backing_spec(bk), removed);
	return removed;
}
