/* catalog_pack — the catalog's record of pack objects on BACKING (schema 7;
 * the format: fs/lib/pack.h, docs/FORMAT.md "Pack object"; the uploader
 * that writes them: fs/uploader.c, invariant P of uploader.h). One node
 * (the SQLite engine) only: a shared catalog's nodes put loose objects.
 *
 * Table packs: name (the pack's SHA-256), size, members, live and
 * live_bytes (the chunk rows that name it and their images' bytes), state:
 *
 *   putting (0) ──cat_pack_done──▶ live (1) ──last member gone──▶ removing (2)
 *      └─ failed: cat_pack_forget (K5)   ▲   (begin of a live one:     │   │
 *                                        │    put again, U13)          │   └─ UP_DELETE_PACK:
 *             cat_pack_done ─────────────┘                             │      row gone
 *   putting again (3) ◀──── cat_pack_begin of the same name (P2) ──────┘
 *      └─ failed: cat_pack_unrevive ──▶ removing (2), a removal row of its own
 *
 * Invariants:
 *  K1. packs.live and live_bytes are the number of chunk rows naming the
 *      pack and the sum of their pack_len, whatever path deletes a row or
 *      moves its object: triggers of schema 7 keep them (catalog.c), and
 *      cat_check verifies them.
 *  K2. A chunk row names a pack (pack, pack_off, pack_len) only once that
 *      pack is durable on BACKING: cat_pack_done sets the members and the
 *      state live in one transaction, after the put and its sync, and only
 *      on rows still dirty with an object (a row reclaimed or re-stored
 *      meanwhile is left as it is). A loose upload (cat_upload_done of an
 *      UP_CHUNK row) clears the three columns: the object is loose.
 *  K3. A chunk whose loose object is on BACKING is put loose again when it
 *      becomes dirty again (re-stored after its count fell to 0 before the
 *      sweep, or upload.h U13's reput of a damaged copy): pack_off -1 with
 *      pack NULL says so (cat_chunk_where's loose_only). A put replaces a
 *      loose object by its name; a pack member beside a damaged loose copy
 *      would leave that copy, which a rebuild finds first. The uploader
 *      marks a small object it puts loose after all (a pack of one)
 *      before the put (cat_pack_loose): a crash before its row ends would
 *      otherwise let the retry pack it and leave the loose copy for ever
 *      (no removal is queued for a packed row).
 *  K4. Nothing removes a pack a chunk row names, nor one being put. A pack
 *      leaves BACKING only through its UP_DELETE_PACK row (uploads.kind 5,
 *      hash = its name), which a trigger queues, with state removing, when
 *      its live count reaches 0 in state live. The row is ready as an
 *      UP_DELETE_CHUNK row is (upload.h U5 a-c: no manifest a rebuild would
 *      apply names its members) and after a WAL sync (U12's reason); just
 *      before the removal the uploader asks cat_pack_removable (removing,
 *      and no chunk row names it) and ends the row moot otherwise. A put of
 *      the same name (the builder is deterministic, pack.h P2) sets it to
 *      putting again (3, cat_pack_begin), and the uploader never runs a put
 *      and a removal of one name at once (its busy set, upload.h U4). A
 *      removal row with a later removal row of the same pack queued is
 *      stale (U4 by the pack's name): between the two the pack lived again
 *      and manifests may name its members, which only the later row's U5
 *      wait covers; the uploader asks again just before it removes.
 *  K5. A pack in state putting names no member: a put in flight, or one a
 *      crash or failure interrupted (its file may or may not be on
 *      BACKING). The uploader whose put or T2 failed forgets the row and
 *      removes the file (fs/uppack.h Q2); at mount, before the uploader
 *      starts, and at the end of a draining stop, with the claim held,
 *      every putting row is removed the same way (cat_pack_orphans, then
 *      cat_pack_forget after backing_remove). A pack putting again (3) was
 *      removing when its put began: its old file may still be what a
 *      manifest a rebuild would apply needs, so a put of it that does not
 *      end never removes the file: it goes back to removing with a removal
 *      row of its own (cat_pack_unrevive), which waits for U5 like any.
 *
 * Calls follow catalog.h's rules: one transaction each, 0 or a negative
 * errno. Tested by tests/unit/test_catalog_pack.c. */
#ifndef CKPTFS_CATALOG_PACK_H
#define CKPTFS_CATALOG_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "upload.h"

enum cat_pack_state {
	CAT_PACK_PUTTING = 0,
	CAT_PACK_LIVE = 1,
	CAT_PACK_REMOVING = 2,
	CAT_PACK_PUTTING_AGAIN = 3, /* put again while it was removing (K4, K5) */
};

/* A member of a pack: its chunk and where its image is in the pack. */
struct cat_pack_member {
	uint8_t hash[CAT_HASH_LEN];
	uint64_t off, len;
};

/* Before a pack's put: its row, putting (K5). *state: the row's state now:
 * putting (new, or left putting), live (a live pack of that name: it is
 * put again all the same, replacing a copy that may be damaged, U13), or
 * putting again (it was removing, K4/K5). */
int cat_pack_begin(struct cat *cat, const uint8_t name[CAT_HASH_LEN], uint64_t size,
		   uint32_t members, int *state);

/* After the put and the batch's sync, one transaction (K2): members m[i]
 * (whose UP_CHUNK rows are member_rows[i]) name the pack where their row is
 * still dirty with an object, the pack becomes live (a live pack no member
 * took is removing at once, K4), member_rows end (removed, nothing else
 * marked), and loose_rows end as cat_upload_done_many ends them. *taken:
 * the members that took it. */
int cat_pack_done(struct cat *cat, const uint8_t name[CAT_HASH_LEN],
		  const struct cat_pack_member *m, const struct cat_upload *member_rows, size_t n,
		  const struct cat_upload *loose_rows, size_t n_loose, size_t *taken);

/* K5: up to max putting and putting-again packs (states[i] says which),
 * forgetting a putting one (its file removed from BACKING first; a row a
 * member names is kept: -EBUSY), and returning a putting-again one to
 * removing with a removal row (-EBUSY if it is not putting again). */
int cat_pack_orphans(struct cat *cat, uint8_t (*names)[CAT_HASH_LEN], int *states, size_t max,
		     size_t *n);
int cat_pack_forget(struct cat *cat, const uint8_t name[CAT_HASH_LEN]);
int cat_pack_unrevive(struct cat *cat, const uint8_t name[CAT_HASH_LEN]);

/* K4: whether the pack may leave BACKING now (removing, no row names it).
 * Once it left, cat_upload_done of its UP_DELETE_PACK row forgets it. */
int cat_pack_removable(struct cat *cat, const uint8_t name[CAT_HASH_LEN], bool *removable);

/* A rebuild (fs/rbpack.h): chunk hash, which a manifest applied as a loose
 * object (uploaded, pack NULL) and whose bytes BACKING holds only as the
 * member [off, off + len) of pack name, names it; the pack gets a live row
 * if it had none (counts by trigger, K1). -ENOENT if no such row. */
int cat_pack_place(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
		   const uint8_t name[CAT_HASH_LEN], uint64_t size, uint32_t members,
		   uint64_t off, uint64_t len);

/* K3: chunk hash, dirty and not in a pack, is about to be put loose. */
int cat_pack_loose(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);

struct cat_pack_stats {
	uint64_t packs, bytes;           /* live packs and their sizes */
	uint64_t members, live_bytes;    /* their live members and those images' bytes */
	uint64_t putting, removing;      /* packs in those states */
};
int cat_pack_stats(struct cat *cat, struct cat_pack_stats *out);

#endif
