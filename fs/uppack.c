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

/* Q2 for a pack whose put or T2 did not end (why), by the state T1 left:
 * putting — the row forgotten while no chunk row names it, then the file
 * removed (a crash between leaves a file no row knows: gc's); putting
 * again — the old file may be what a manifest needs (catalog_pack.h K5):
 * back to removing, file kept; live — members name it: left as it is. */
static void uppack_leave(struct uppack *p, struct cat *cat, struct backing *bk, const char *what,
			 int why)
{
	char hex[HASH_HEX_LEN + 1], rel[PACK_RELPATH_LEN];
	hash_to_hex(p->name, hex);
	pack_relpath(p->name, rel, sizeof(rel));
	int rc = 0;
	const char *then = "";
	if (p->state == CAT_PACK_PUTTING) {
		rc = cat_pack_forget(cat, p->name);
		if (rc == 0)
			rc = backing_remove(bk, rel);
		then = rc == 0 ? " and the pack was removed"
			       : ", and the pack is removed at the next stop or mount, or by gc";
	} else if (p->state == CAT_PACK_PUTTING_AGAIN) {
		rc = cat_pack_unrevive(cat, p->name);
		then = rc == 0 ? " and the pack goes back to its removal"
			       : ", and the pack goes back to its removal at the next stop or mount";
	}
	log_warn("BACKING %s: pack %s of %" PRIu32 " chunks %s (%s); its chunks stay queued%s",
		 backing_spec(bk), hex, p->n, what, strerror(-why), then);
}

int uppack_put(struct uppack *p, struct cat *cat, struct backing *bk)
{
	assert(p->bytes != NULL);
	int rc = cat_pack_begin(cat, p->name, p->len, p->n, &p->state);
	if (rc != 0)
		return rc; /* T1 failed: nothing put, nothing named */
	/* put even when a live pack has the name: the same bytes (pack.h P1),
	 * but the copy there may be the damaged one its members are put again
	 * for (upload.h U13); a put replaces it whole (review 51 F1) */
	char rel[PACK_RELPATH_LEN];
	pack_relpath(p->name, rel, sizeof(rel));
	rc = backing_put(bk, rel, p->bytes, p->len);
	if (rc != 0)
		uppack_leave(p, cat, bk, "could not be put", rc);
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
	uppack_leave(p, cat, bk, "was put but could not be recorded", why);
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
	bool superseded = false; /* K4, U4: a later removal of it governs */
	rc = cat_upload_removal_superseded(cat, row, &superseded);
	if (rc != 0 || superseded)
		return rc ? rc : 1;
	char rel[PACK_RELPATH_LEN];
	pack_relpath(row->hash, rel, sizeof(rel));
	rc = backing_remove(bk, rel);
	return rc == -ENOENT ? 0 : rc;
}

int uppack_orphans(struct cat *cat, struct backing *bk)
{
	uint8_t names[64][HASH_LEN];
	int states[64];
	size_t n = 0;
	int removed = 0;
	do {
		int rc = cat_pack_orphans(cat, names, states, 64, &n);
		if (rc != 0)
			return rc;
		for (size_t i = 0; i < n; i++) {
			char rel[PACK_RELPATH_LEN];
			pack_relpath(names[i], rel, sizeof(rel));
			if (states[i] == CAT_PACK_PUTTING_AGAIN) /* K5: its file kept, removing again */
				rc = cat_pack_unrevive(cat, names[i]);
			else if ((rc = backing_remove(bk, rel)) == 0 || rc == -ENOENT)
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
		log_info("BACKING %s: %d packs whose put a crash or failure interrupted: removed"
			 " (nothing named them), or back to their removal", backing_spec(bk), removed);
	return removed;
}
