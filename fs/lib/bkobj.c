/* bkobj — a chunk object read from BACKING and checked; the contract (B1-B3)
 * is in bkobj.h. */
#include "bkobj.h"

#include <assert.h>
#include <errno.h>

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

int bkobj_get(struct backing *b, const uint8_t hash[HASH_LEN], struct bkobj_read *r,
	      const char **why)
{
	*why = NULL;
	r->obj_len = r->plain_len = 0;
	void *obj = r->obj;
	if (r->fetch) {
		assert(r->fetch->image && r->obj_cap <= r->fetch->image_map);
		obj = r->fetch->image;
	}
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	size_t len = 0;
	int rc = backing_get(b, rel, obj, r->obj_cap, &len);
	if (r->fetch) /* a failed read may have written anywhere (S9) */
		store_fetch_filled(r->fetch, rc == 0 ? len : r->obj_cap);
	if (rc == -EFBIG) { /* a verdict: no chunk's object is that large */
		*why = "larger than a chunk's object can be";
		return -EBADMSG;
	}
	if ((*why = bkobj_planted(rc))) /* B4: something else at its name */
		return -EBADMSG;
	if (rc != 0) /* B1: BACKING could not be read, or has no such object */
		return rc == -EBADMSG ? -EIO : rc;
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
