/* bkobj — a chunk object read from BACKING and checked; the contract (B1-B5)
 * is in bkobj.h. */
#include "bkobj.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>

#include "pack.h"

/* B4: backing_get's answer for a name that holds no regular file, as the
 * verdict's reason; NULL for every other answer. */
static const char *bkobj_planted(int rc)
{
	switch (rc) {
	case -ELOOP: return BKOBJ_WHY_SYMLINK;
	case -ENOTDIR: return BKOBJ_WHY_NOTDIR;
	case -EISDIR: /* a directory */
	case -EINVAL: return BKOBJ_WHY_NOTREG; /* a FIFO, socket or device (the path is valid) */
	default: return NULL;
	}
}

void bkobj_where_name(const uint8_t hash[HASH_LEN], const struct bkobj_where *where, char *buf,
		      size_t size)
{
	if (!where) {
		store_object_relpath(hash, buf, size);
		return;
	}
	char rel[PACK_RELPATH_LEN];
	pack_relpath(where->pack, rel, sizeof(rel));
	snprintf(buf, size, "%s at %llu, %u bytes", rel, (unsigned long long)where->off,
		 (unsigned)where->len);
}

/* The image's bytes into obj (capacity cap), *len its length: the loose
 * object whole, or exactly the member's bytes of its pack (B5). A read's
 * answer that is a verdict (B4, B5, too large) is -EBADMSG with *why. */
static int bkobj_read_image(struct backing *b, const uint8_t hash[HASH_LEN],
			    const struct bkobj_where *where, void *obj, size_t cap, size_t *len,
			    const char **why)
{
	int rc;
	char rel[128];
	if (!where) {
		store_object_relpath(hash, rel, sizeof(rel));
		rc = backing_get(b, rel, obj, cap, len);
	} else if (where->len > cap) {
		rc = -EFBIG; /* not read: no chunk's object is that large */
	} else {
		pack_relpath(where->pack, rel, sizeof(rel));
		rc = backing_get_range(b, rel, where->off, where->len, obj);
		*len = where->len;
	}
	if (rc == -EFBIG) { /* a verdict: no chunk's object is that large */
		*why = BKOBJ_WHY_TOO_LARGE;
		return -EBADMSG;
	}
	if (where && rc == -ERANGE) { /* B5: the pack does not hold that place */
		*why = BKOBJ_WHY_RANGE;
		return -EBADMSG;
	}
	if ((*why = bkobj_planted(rc))) /* B4: something else at its name */
		return -EBADMSG;
	return rc == -EBADMSG ? -EIO : rc; /* B1: BACKING could not be read, or has no such object */
}

int bkobj_get(struct backing *b, const uint8_t hash[HASH_LEN], const struct bkobj_where *where,
	      struct bkobj_read *r, const char **why)
{
	*why = NULL;
	r->obj_len = r->plain_len = 0;
	void *obj = r->obj;
	if (r->fetch) {
		assert(r->fetch->image && r->obj_cap <= r->fetch->image_map);
		obj = r->fetch->image;
	}
	size_t len = 0;
	int rc = bkobj_read_image(b, hash, where, obj, r->obj_cap, &len, why);
	if (r->fetch) /* a failed read may have written anywhere (S9) */
		store_fetch_filled(r->fetch, rc == 0 ? len : r->obj_cap);
	if (rc != 0)
		return rc;
	size_t plain_len = 0;
	if (r->fetch) {
		rc = store_fetch_check(hash, r->fetch, len, r->plain_cap, why); /* B2 */
		plain_len = r->fetch->len;
	} else {
		rc = store_object_check(hash, obj, len, r->plain, r->plain_cap, &plain_len, why);
	}
	if (rc != 0 && r->fetch) { /* B2 */
		r->fetch->plain = NULL;
		r->fetch->len = 0;
	}
	if (rc == -EIO) { /* both checks' verdict (store.h): B1's */
		if (!*why)
			*why = "damaged";
		return -EBADMSG;
	}
	if (rc != 0) {
		*why = NULL; /* -ENOMEM: no verdict */
		return rc;
	}
	r->obj_len = len;
	r->plain_len = plain_len;
	return 0;
}
