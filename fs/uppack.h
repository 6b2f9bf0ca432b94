/* uppack — the uploader's packs (issue 20): the small chunk objects of one
 * upload batch put on BACKING as ONE pack file (fs/lib/pack.h), instead of
 * a file each; and a dead pack's removal. fs/uploader.c decides which rows
 * join (uploader.h B6) and keeps the busy set; this module builds, puts,
 * records and removes, in the order the first rule needs:
 *
 *   uppack_add ... uppack_put:  build (P2: deterministic), T1 (the row
 *                               putting, catalog_pack.h K5), backing_put
 *                               (temp, one fsync, rename, one directory
 *                               fsync)
 *   (the batch's backing_sync for its loose objects)
 *   uppack_done:                T2 (members name the pack, it is live, the
 *                               batch's rows end: K2), one transaction
 *
 * Invariants:
 *  Q1. The catalog never names a pack that is not durable on BACKING: T2
 *      runs only after uppack_put returned 0 (backing_put is durable on
 *      return, backing.h 1) and the caller's sync of the batch succeeded.
 *  Q2. A failed put, or a put whose T2 failed, leaves nothing named: a
 *      new pack's putting row is forgotten (only while no chunk row names
 *      it) and its file removed, or, if that fails, it is left putting for
 *      the orphans pass at the next draining stop or mount (K5); a pack
 *      that was removing (putting again) goes back to removing with its
 *      file, for its removal row's U5 wait (review 51 F3); a live one of
 *      the same name is left as it is. The batch's rows stay queued and
 *      are put again.
 *  Q3. A pack leaves BACKING only by uppack_remove of its UP_DELETE_PACK
 *      row, which asks cat_pack_removable, and whether a later removal row
 *      of it governs (U4), just before the removal (K4);
 *      the uploader never runs it while a put of the same name is in hand
 *      (uploader.c's pack_busy, U4).
 *  Q4. Members are the bytes of the cache's objects as read and verified
 *      for an upload (uploader.c up_chunk_read: SHA-256 or the store's
 *      S2 vouching), each byte for byte the loose object it replaces
 *      (pack.h), so every reader checks a member exactly as a loose object
 *      (fs/lib/bkobj.h).
 *
 * Tested by tests/unit/test_uppack.c and tests/integration/t_packs.sh. */
#ifndef CKPTFS_UPPACK_H
#define CKPTFS_UPPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "pack.h"
#include "upload.h"

struct backing;
struct cat;

/* Objects whose image is shorter than this go into packs (uploader.h B6):
 * below it the per-file cost on BACKING (an inode, a rename, a directory
 * entry, ~25 operations) outweighs copying the bytes; above it objects are
 * linked or written whole as before. */
#define UPPACK_MEMBER_MAX (256u << 10)
/* A pack is put once its members reach this many bytes. */
#define UPPACK_BYTES (8u << 20)

/* Members of one pack at most (a batch's rows, uploader.c UP_BATCH_MAX). */
#define UPPACK_ROWS_MAX 64

struct uppack {
	struct pack_builder b;
	struct cat_upload rows[UPPACK_ROWS_MAX]; /* the members' rows, as added */
	uint32_t n;
	/* set by uppack_put */
	uint8_t *bytes;
	size_t len;
	uint8_t name[HASH_LEN];
	int state; /* the row's state T1 left (catalog_pack.h: putting, live, putting again) */
};

void uppack_init(struct uppack *p);
/* Drops the members and the pack's bytes (init'ed again). */
void uppack_reset(struct uppack *p);

/* Adds the verified image (len bytes) of row's chunk: 0, or the builder's
 * error (-E2BIG, -ENOMEM, ...): the row is then put loose by the caller. */
int uppack_add(struct uppack *p, const struct cat_upload *row, const void *image, size_t len);

/* Whether more members fit (the batch's limit of rows and bytes). */
bool uppack_full(const struct uppack *p);

/* Builds the pack (its name in p->name): 0, or -ENOMEM. */
int uppack_build(struct uppack *p);

/* T1 and the put (Q1, Q2): 0 once the pack is durable on BACKING (put
 * again over a live one of the same name: it may be damaged), else the
 * error, with Q2's cleanup done. */
int uppack_put(struct uppack *p, struct cat *cat, struct backing *bk);

/* T2 (Q1): after uppack_put and the sync of the batch's loose rows
 * (loose[0..n_loose), ended in the same transaction). *taken: members
 * whose row took the pack. */
int uppack_done(struct uppack *p, struct cat *cat, const struct cat_upload *loose,
		size_t n_loose, size_t *taken);

/* Q2 for a pack put whose T2 failed (why): a putting row is forgotten
 * while no chunk row names it, then its file removed; a putting-again row
 * goes back to removing, its file kept (catalog_pack.h K5); a live one is
 * left alone. Logged. */
void uppack_unnamed(struct uppack *p, struct cat *cat, struct backing *bk, int why);

/* Q3: the work of an UP_DELETE_PACK row: 0 once the pack is gone from
 * BACKING (the caller then ends the row by cat_upload_done), 1 (UP_MOOT's
 * value) if it may not go now (the row ends moot), else the error. */
int uppack_remove(struct cat *cat, struct backing *bk, const struct cat_upload *row);

/* K5 at mount, before any worker runs, and at the end of a draining stop,
 * with the claim held: every putting pack's file is removed from BACKING,
 * then its row. Returns how many were
 * removed, or the first error (the rest wait for the next mount). */
int uppack_orphans(struct cat *cat, struct backing *bk);

#endif
