/* bkobj — a chunk object read from BACKING and checked, with one error
 * contract for everyone who does that: the cache's fetches (fs/cache.c), the
 * lease sweep's look at a dead node's uploads (fs/leasekeep.c) and
 * `ckptfs-admin verify` / `export --cache` (tools/admin_verify.c). The
 * object is the loose file chunks/ab/cd/<hex>, or a member of a pack file
 * packs/ab/<hex>.ckp at the place the caller names (B5, fs/lib/pack.h).
 *
 * Invariants:
 *  B1. One place tells a verdict on the bytes from a failure to read them.
 *      bkobj_get returns
 *        0        the object is whole: SHA-256 of its plain bytes is its name,
 *                 its header, lengths and CRC-32C hold (store_object_check);
 *        -ENOENT  BACKING has no object of that name, or no pack file of
 *                 the name given (not logged);
 *        -EBADMSG a verdict on the bytes BACKING gave: damaged (header,
 *                 length, CRC-32C, decoding, SHA-256, or larger than a
 *                 chunk's object can be), or on what is at its name (B4),
 *                 or a member place past its pack file's end (B5), with
 *                 *why saying how. Reading it
 *                 again gives the same bytes: nobody retries a verdict;
 *        other    BACKING could not be read (backing.h: -ETIMEDOUT for an NFS
 *                 server that does not answer, -EIO for a lost connection or
 *                 a directory BACKING's read error, ...): no verdict on the
 *                 object, try again later. -ENOMEM is one of these.
 *      backing_get (backing_get_range) never answers -EBADMSG for a verdict;
 *      should it answer -EBADMSG at all, that is returned as -EIO (B1 holds
 *      whatever it says).
 *  B2. No byte is handed out before the check: on any error the plain bytes
 *      are unspecified and the fetch's chunk has none (plain NULL, len 0);
 *      it is only to be released (store_chunk_free).
 *  B3. Each caller keeps its own buffers (no copy is added): the cache reads
 *      into store_fetch_image's buffer and keeps a raw chunk's plain bytes
 *      where they lie (store.h S9); the others read into a buffer of theirs
 *      and decode into another.
 *  B4. A name on BACKING that holds no regular file where the object should
 *      be is a verdict too (-EBADMSG), not "BACKING could not be read": a
 *      symlink at the object's path or on its way (BKOBJ_WHY_SYMLINK), a
 *      non-directory on its way (BKOBJ_WHY_NOTDIR), a directory, FIFO,
 *      socket or device at it (BKOBJ_WHY_NOTREG). backing_get answers each
 *      by its own code without following or reading it (backing.h), so
 *      asking again gives the same answer, as for damaged bytes: a read
 *      fails EIO at once, verify counts it damaged; nothing reads through
 *      it or removes it. Like any damaged object on BACKING it is only ever
 *      replaced by a rename over its name (a put: the uploader's, or
 *      verify's put-again of a good cache copy, upload.h U13), which
 *      replaces the name and never writes through it. ckptfs makes no such thing on BACKING:
 *      it was planted (or made by a tool), like a damaged object. The same
 *      holds for a pack file's name (B5): what is there is no regular file.
 *  B5. A member of a pack (where non-NULL: the pack's name, the member
 *      image's offset and length, as the catalog keeps them) is read by
 *      backing_get_range of exactly those bytes of packs/ab/<hex>.ckp
 *      (backing.h 4: nothing else of the pack is read) into the same
 *      buffers as a loose object (B3), and checked exactly as a loose
 *      object is (store_fetch_check / store_object_check: B2, nothing
 *      handed out before SHA-256): a member image is byte for byte the
 *      loose object (pack.h). A place the pack file does not hold (it ends
 *      before off+len: backing_get_range's -ERANGE) is a verdict
 *      (BKOBJ_WHY_RANGE), as is a len past obj_cap (the same reason as a
 *      loose object too large); a wrong place inside the file gives bytes
 *      that fail the check (a verdict too). The pack is never read whole
 *      and its index is not consulted: the SHA-256 of the plain bytes
 *      against hash is the proof, as for a loose object.
 *
 * Tested by tests/unit/test_bkobj.c (a directory BACKING: absent, whole,
 * damaged, too large, a symlink, FIFO or directory at its name, unreadable;
 * members of a real pack: each whole by its place, a flipped byte, a place
 * past the end, a planted pack name) and tests/integration/t_integrity.sh
 * (a read and verify of such a chunk). */
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

/* B5: where a chunk's object lies inside a pack file. */
struct bkobj_where {
	uint8_t pack[HASH_LEN]; /* the pack's name (pack.h P1): packs/ab/<hex>.ckp */
	uint64_t off;		/* the member image's first byte in the pack */
	uint32_t len;		/* the member image's length */
};

/* B4's and B5's reasons (*why) */
#define BKOBJ_WHY_SYMLINK "a symlink at its path or on its way, not followed"
#define BKOBJ_WHY_NOTDIR "a non-directory on its path"
#define BKOBJ_WHY_NOTREG "not a regular file but a directory, FIFO, socket or device"
#define BKOBJ_WHY_RANGE "its place lies past the end of its pack file"
#define BKOBJ_WHY_TOO_LARGE "larger than a chunk's object can be"

/* B1: reads chunk hash's object from BACKING b as r says and checks it:
 * the loose object (where NULL) or the pack member at where (B5).
 * why: set for -EBADMSG (a static string), NULL otherwise. */
int bkobj_get(struct backing *b, const uint8_t hash[HASH_LEN], const struct bkobj_where *where,
	      struct bkobj_read *r, const char **why);

/* For a caller's log line: "packs/ab/<hex>.ckp at OFF, LEN bytes", or the
 * loose object's "chunks/ab/cd/<hex>" when where is NULL (hash's). */
void bkobj_where_name(const uint8_t hash[HASH_LEN], const struct bkobj_where *where, char *buf,
		      size_t size);

#endif
