/* bkobj — a chunk object read from BACKING and checked, with one error
 * contract for everyone who does that: the cache's fetches (fs/cache.c), the
 * lease sweep's look at a dead node's uploads (fs/leasekeep.c) and
 * `ckptfs-admin verify` / `export --cache` (tools/admin_verify.c).
 *
 * Invariants:
 *  B1. One place tells a verdict on the bytes from a failure to read them.
 *      bkobj_get returns
 *        0        the object is whole: SHA-256 of its plain bytes is its name,
 *                 its header, lengths and CRC-32C hold (store_object_check);
 *        -ENOENT  BACKING has no object of that name (not logged);
 *        -EBADMSG a verdict on the bytes BACKING gave: damaged (header,
 *                 length, CRC-32C, decoding, SHA-256, or larger than a
 *                 chunk's object can be), with *why saying how. Reading it
 *                 again gives the same bytes: nobody retries a verdict;
 *        other    BACKING could not be read (backing.h: -ETIMEDOUT for an NFS
 *                 server that does not answer, -EIO for a lost connection or
 *                 a directory BACKING's read error, ...): no verdict on the
 *                 object, try again later. -ENOMEM is one of these.
 *      backing_get never answers -EBADMSG for a verdict; should it answer
 *      -EBADMSG at all, that is returned as -EIO (B1 holds whatever it says).
 *  B2. No byte is handed out before the check: on any error the plain bytes
 *      are unspecified and the fetch's chunk has none (plain NULL, len 0);
 *      it is only to be released (store_chunk_free).
 *  B3. Each caller keeps its own buffers (no copy is added): the cache reads
 *      into store_fetch_image's buffer and keeps a raw chunk's plain bytes
 *      where they lie (store.h S9); the others read into a buffer of theirs
 *      and decode into another.
 *
 * Tested by tests/unit/test_bkobj.c (a directory BACKING: absent, whole,
 * damaged, too large, unreadable). */
#ifndef CKPTFS_BKOBJ_H
#define CKPTFS_BKOBJ_H

#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "hash.h"
#include "store.h"

struct bkobj_read {
	/* in, one of two ways (B3):
	 *  fetch: a chunk whose image store_fetch_image made (obj_cap at most
	 *         its image_map); on success its plain bytes are in its image
	 *         (raw) or in fetch->decoded, as store_fetch_check leaves them,
	 *         and the image stays for store_put_fetched;
	 *  else:  the image is read into obj and decoded into plain. */
	struct store_chunk *fetch;
	void *obj;
	size_t obj_cap; /* the largest object accepted, bytes */
	void *plain;
	size_t plain_cap; /* the largest plain length accepted (both ways) */
	/* out, set on success */
	size_t obj_len;   /* the object's size (its image is obj[0..obj_len)) */
	size_t plain_len; /* its plain bytes */
};

/* B1: reads chunk hash's object from BACKING b as r says and checks it.
 * why: set for -EBADMSG (a static string), NULL otherwise. */
int bkobj_get(struct backing *b, const uint8_t hash[HASH_LEN], struct bkobj_read *r,
	      const char **why);

#endif
