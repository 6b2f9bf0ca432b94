/* upload — the catalog side of the write-back cache (schema version 3): where
 * each chunk's object is, the queue of work for BACKING, and which generation
 * versions are durable. The [node] part of catalog.h's contract: a node's
 * own state, local to it whatever engine holds the namespace.
 *
 * A chunk object is in the local cache (chunks.cached), on BACKING
 * (chunks.uploaded), or both. The queue (table uploads) is served oldest
 * first by fs/uploader.c:
 *
 *   UP_CHUNK              copy the object cache → BACKING; then uploaded = 1
 *   UP_GEN_MANIFEST       write the manifest of generation version (gen, version)
 *                         once all its chunks are uploaded; then durable_version
 *   UP_DELETE_GEN_MANIFEST  remove an ended generation's manifests from BACKING
 *   UP_DELETE_CHUNK       remove an object no file references any more
 *   UP_DELETE_PACK        remove a pack none of whose members is named any
 *                         more (catalog_pack.h K4)
 *
 * A rebuild (fs/rebuild.c) applies what BACKING's manifests say: each
 * generation's newest version and the newest tree manifest. So a removal
 * runs only once no such manifest names what it removes (U5), and the
 * catalog learns from the uploader which tree manifest is on BACKING
 * (cat_tree_horizon, cat_tree_described).
 *
 * Invariants:
 *  U1. A chunk row with stored_len set has cached = 1 or uploaded = 1: its
 *      bytes exist somewhere. Only an uploaded chunk may be evicted (cached 0).
 *  U2. A chunk with cached = 1, uploaded = 0 (dirty) has an UP_CHUNK row queued.
 *  U3. durable_version = version only after the manifest of that version and
 *      every chunk it names are on BACKING.
 *  U4. Work on one hash is done in seq order (the uploader never runs two rows
 *      of one hash at once), and a chunk removal row with a later removal of
 *      the same chunk queued is stale: between the two the chunk was stored
 *      again and may be named by a manifest on BACKING (a tree manifest
 *      written while a file outside generations named it), which only the
 *      later row's U5 wait covers. The uploader asks again just before it
 *      removes (cat_upload_removal_superseded), after the chunk's row was
 *      found gone: the change that dropped it queued the later row in its
 *      transaction (review 35 F6).
 *  U5. BACKING never holds a manifest a rebuild would apply naming a missing
 *      chunk: an UP_DELETE_CHUNK row (seq s) is ready only when
 *      (a) no manifest row (UP_GEN_MANIFEST, UP_DELETE_GEN_MANIFEST) older
 *          than s is queued: the generation manifests written or removed
 *          after the change that freed the chunk are on BACKING (a rewrite's
 *          commit queues the new version's manifest before its sweep frees
 *          the old version's chunks);
 *      (b) no live generation has a durable version other than its version:
 *          BACKING's manifest of it is an older tree, which may name the
 *          chunk (a rewrite in progress, or a new version whose manifest row
 *          went stale before it was written);
 *      (c) a tree manifest describing the tree as of s is on BACKING
 *          (cat_tree_described with a horizon >= s): the change may have
 *          been to a file outside generations.
 *      The manifests themselves name only uploaded chunks: a generation's
 *      is ready once every chunk it names is (U3); the tree manifest is
 *      built in the one read transaction that finds every chunk of the
 *      tree uploaded, else not at all (manifest_tree_build_uploaded,
 *      fs/uploader.c T5; review 35 F4: a fingerprint of its own
 *      transaction let a file committed after it be named dirty).
 *  U6. An ended generation's manifests leave BACKING only once a tree
 *      manifest describing the tree as of the end is on BACKING (an
 *      UP_DELETE_GEN_MANIFEST row waits as U5 c): a save renamed out of its
 *      series is outside generations from then on, and in no manifest but
 *      its generation's until the tree manifest names it. A save moved
 *      into an open generation is U8's.
 *  U7. cat_upload_done of an UP_CHUNK row says its object is on BACKING: it
 *      marks the chunk uploaded, here and in the shared store. A row whose
 *      work was found moot (its chunk gone or uploaded, its generation
 *      changed) ends by cat_upload_moot_many, which marks nothing: by the
 *      time it ends, a writer may have stored the same bytes anew under a
 *      new row (dirty, with its own UP_CHUNK row queued), and a marking
 *      then would call uploaded an object nobody put (review s30 F1). With
 *      a shared catalog a moot chunk row marks its local row uploaded only
 *      where PostgreSQL says the object is on BACKING (uploaded and live),
 *      as the store of record. A row whose object never reached BACKING
 *      (its cache copy lost) is never ended: it stays queued
 *      (fs/uploader.c up_lost).
 *  U8. An ended generation whose series directory is in the tree of a live
 *      generation A not durable at its version (OPEN, HELD, or COMMITTED
 *      with durable_version != version) keeps its manifests on BACKING: its
 *      UP_DELETE_GEN_MANIFEST row waits, as U6 and until A is durable, or
 *      the series is out of A (moved on, or its inode gone). This is a
 *      series moved INTO an open generation (generation.c's G_TREE_NESTED
 *      ends its saves, "renamed"): their files are A's from then on, A's
 *      manifest is on BACKING only once A commits and is durable, and the
 *      tree manifest does not name files inside a generation, so until
 *      then the ended save's own manifest is the only one that does. Read
 *      when the row is, not when it was queued: a series moved on from A
 *      into another open generation B waits for B. A rebuild meanwhile
 *      brings the save back at its old path (its manifest's series), beside
 *      A's older version if A had one; a newer save made since under that
 *      same path and name conflicts with it there (the rebuild applies
 *      lower ids first; the newer one comes back HELD as
 *      "<name>.rebuild-<id>", its manifest staying on BACKING as its own,
 *      rebuild.c invariant 7). While A is HELD (a crash while it was open)
 *      the row waits for the decision, and the chunk removals queued after
 *      it wait too (U5 a).
 *      Not covered: a save whose ROOT is moved straight into an open
 *      generation (it ends as "renamed", and its series, which stays where
 *      it was, does not lead to A): its manifest goes as U6 says. Nor the
 *      shared engine's R8 (catalog_shared_reclaim.c), which removes ended
 *      generations' manifests on the tree horizon alone.
 *  U10. An unmount that ends with the files outside generations not
 *      described on BACKING says so: when the drain's last tree manifest
 *      put fails (fs/uploader.c T6), the catalog's meta row tree_unwritten
 *      holds why, until a tree manifest is put or found current (the next
 *      mount). `ckptfs-admin umount` reads it once the daemon exited and
 *      does not call the unmount complete (tools/admin_umount.c).
 *  U11. "The files outside generations are on BACKING" is said only when a
 *      tree manifest describing the tree as it is now is there (review 36
 *      F4a, F3a): their chunks on BACKING are not enough, a rebuild or a new
 *      cache applies the newest tree manifest, which may predate them. The
 *      meta row tree_described_fp holds the fingerprint
 *      (cat_tree_fingerprint) of the tree the last tree manifest whose put
 *      succeeded describes; it is written after that put, never before
 *      (fs/uploader.c T5, T7). cat_tree_described_current compares it with
 *      the fingerprint now, in one read transaction, with every chunk of
 *      the tree uploaded: `ckptfs-admin wait` (without GEN) returns 0 and
 *      `ckptfs-admin umount` exits 0 only when it holds, read-only, with no
 *      daemon request. No row (a catalog of an older ckptfs, before its
 *      first tree manifest) is not current. Alone only: a node of a shared
 *      catalog writes no tree manifest from its local catalog (T1).
 *  U12. An UP_DELETE_GEN_MANIFEST row is handed out as ready only after the
 *      WAL is synced (catalog.c invariant 10): the expire that queued it is
 *      durable before the manifest leaves BACKING, so a power loss cannot
 *      bring the save back COMMITTED and "durable" with no manifest on
 *      BACKING (review 40 F6: an expire whose chunks are all shared with
 *      newer saves has no sweep that syncs).
 *  U13. (cat_chunk_reput, one node) A chunk whose copy on BACKING is found
 *      damaged while its cache copy passes SHA-256 (ckptfs-admin verify,
 *      through the daemon's verb reput: fs/cache.c cache_reput) is dirty
 *      again (uploaded = 0, an UP_CHUNK row: U2) until the uploader has put
 *      it again; eviction never takes its only good copy meanwhile.
 *  U14. An UP_CHUNK row found lost (U7, fs/uploader.c up_lost) keeps an
 *      error starting with UP_LOST_ERROR until the row ends (an upload or a
 *      moot end at a later try). While it does, no save naming the chunk is
 *      committed but by an admin's decision (generation.h G13): its commit
 *      is refused and the save held (rule "lost-chunk"). The holds of the
 *      COMMITTED saves naming it are asked for at the finding and, if that
 *      call fails, again until one succeeds (fs/uploader.h B5).
 *
 * Calls follow catalog.h's rules: one transaction each, 0 or a negative errno. */
#ifndef CKPTFS_UPLOAD_H
#define CKPTFS_UPLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

enum cat_upload_kind {
	UP_CHUNK = 1,
	UP_GEN_MANIFEST = 2,
	UP_DELETE_CHUNK = 3,
	UP_DELETE_GEN_MANIFEST = 4,
	UP_DELETE_PACK = 5, /* hash: the pack's name (catalog_pack.h K4) */
};

struct cat_upload {
	uint64_t seq;
	int kind;                   /* enum cat_upload_kind */
	uint8_t hash[CAT_HASH_LEN]; /* chunk kinds */
	uint64_t gen;               /* manifest kinds */
	uint32_t version;
	int64_t enqueued_ns;
	uint32_t attempts;
};

/* The oldest queued rows with seq > after, up to max, in seq order. */
int cat_upload_list(struct cat *cat, uint64_t after, struct cat_upload *out, int max);
/* Up to max UP_CHUNK rows of the chunks of ino's pending extents (a
 * writer's), oldest first, but for a hash with an older row of any kind
 * queued (U4: that one goes first); fs/uploader.h B3. */
int cat_upload_list_pending(struct cat *cat, uint64_t ino, struct cat_upload *out, int max);

/* Whether row u may start now: a manifest when every chunk its generation
 * version names is uploaded (and the generation is still COMMITTED at that
 * version: else *stale); removals as U5 and U6 say; others always. */
int cat_upload_ready(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale);

/* cat_upload_ready of rows[0..n): ready[i], stale[i] for rows[i]. With a
 * shared catalog the chunk rows' checks (and upload claims, pgns.h N7) take
 * one PostgreSQL round trip together, whatever n; a failure fails them all. */
int cat_upload_ready_many(struct cat *cat, const struct cat_upload *rows, size_t n, bool *ready,
			  bool *stale);

/* Ends row u: removes it and records the outcome (UP_CHUNK: uploaded = 1 if
 * the chunk row still has stored_len; UP_GEN_MANIFEST: durable_version =
 * version if the generation is still COMMITTED at it). */
int cat_upload_done(struct cat *cat, const struct cat_upload *u);

/* cat_upload_done of n rows in one transaction: all or none. */
int cat_upload_done_many(struct cat *cat, const struct cat_upload *rows, size_t n);

/* Ends rows[0..n) whose work was found moot, in one transaction: removes
 * them and records nothing (U7), but for a shared catalog's chunk rows the
 * local mark of what PostgreSQL has on BACKING. */
int cat_upload_moot_many(struct cat *cat, const struct cat_upload *rows, size_t n);

/* U13: a chunk cached and uploaded whose copy on BACKING was found damaged
 * while the cache's copy is good (the caller checked it: SHA-256) is dirty
 * again: uploaded = 0 and an UP_CHUNK row queued, in one transaction, so the
 * uploader puts it again (a put replaces the object whole, FORMAT.md) and
 * eviction, which takes only uploaded rows, keeps the good copy meanwhile.
 * -ENOENT if the row is not cached and uploaded (nothing to put from);
 * -EOPNOTSUPP on a shared catalog (-o meta=: PostgreSQL's row says the
 * object is on BACKING, and U7 would end the row as moot). */
int cat_chunk_reput(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);

/* Records a failed attempt (attempts + 1, the error text). */
int cat_upload_failed(struct cat *cat, uint64_t seq, const char *error);

/* U14: the error text of an UP_CHUNK row whose chunk was found lost before
 * its upload (fs/uploader.c up_lost: its cache copy damaged or missing,
 * BACKING without it) starts with this. */
#define UP_LOST_ERROR "lost:"
/* U14: up to max hashes of this node's UP_CHUNK rows recorded lost
 * (UP_LOST_ERROR), by hash: this node's local queue, on either engine. */
int cat_upload_lost_hashes(struct cat *cat, uint8_t (*hashes)[CAT_HASH_LEN], size_t max,
			   size_t *n);

/* Where a chunk is. -ENOENT if there is no row (or it has no object yet). */
struct cat_chunk_where {
	bool cached, uploaded;
	uint8_t codec;
	uint64_t plain_len, stored_len;
	uint64_t refcount;
	/* where on BACKING (catalog_pack.h K2): packed, the member image
	 * [pack_off, pack_off + pack_len) of pack `pack`; else the loose object.
	 * loose_only: a loose object of it is on BACKING, so it is put loose
	 * again, never into a pack (K3) */
	bool packed, loose_only;
	uint8_t pack[CAT_HASH_LEN];
	uint64_t pack_off, pack_len;
};
int cat_chunk_where(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], struct cat_chunk_where *out);
/* U4: a later removal of row u's chunk or pack (a row of u's kind,
 * UP_DELETE_CHUNK or UP_DELETE_PACK, of the same hash) is queued. */
int cat_upload_removal_superseded(struct cat *cat, const struct cat_upload *u, bool *superseded);

/* Whether the bytes of a chunk whose object the local cache lacks are lost
 * (fs/writer.c writer_sync_gone): 1 if something names it and neither
 * BACKING nor (shared catalog) another node's cache holds it; 0 if it is
 * on BACKING, or nothing names it (no row, or count 0: reclaimed); a
 * negative errno if the catalog cannot say. The local engine answers from
 * its row (cat_chunk_where); the shared one from this node's row and
 * PostgreSQL's (catalog_shared_data.c S14). Logs nothing. */
int cat_chunk_lost(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);

/* A chunk fetched from BACKING is cached again (-ENOENT: no row, or no
 * object yet). An eviction is cat_chunk_evict (catalog.h), which removes
 * the object in the same hold of the catalog lock. */
int cat_chunk_fetched(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);

/* Records that the chunks were used at now_ns (for least-recently-used eviction). */
int cat_chunks_touch(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], int n, int64_t now_ns);

/* Up to max cached, uploaded chunks least recently used first, that no pinned
 * generation and no inode in open_inos references. *lens gets stored lengths. */
int cat_evict_candidates(struct cat *cat, const uint64_t *open_inos, int n_open,
			 uint8_t (*out)[CAT_HASH_LEN], uint64_t *lens, int max);

struct cat_cache_stats {
	uint64_t cached_chunks, cached_bytes; /* stored bytes of objects in the cache */
	uint64_t dirty_chunks, dirty_bytes;   /* cached and not yet uploaded */
	uint64_t uploaded_chunks, uploaded_bytes;
	uint64_t queued;                      /* rows in the upload queue */
	int64_t oldest_queued_ns;             /* enqueued_ns of the oldest row, 0 if none */
	uint64_t durable_gens, committed_gens;
};
int cat_cache_stats(struct cat *cat, struct cat_cache_stats *out);

/* All chunks of a file's committed extents uploaded? (for fsync with sync=backing) */
int cat_file_uploaded(struct cat *cat, uint64_t ino, bool *uploaded);
/* All chunks of a writer's pending extents of ino (its content not
 * published yet) whose object this node's cache holds uploaded? (fs/ns.h invariant 13: a small file outside
 * generations is on BACKING before a shared catalog shows it) */
int cat_pending_uploaded(struct cat *cat, uint64_t ino, bool *uploaded);

/* Is a generation version durable (COMMITTED with durable_version = version)?
 * With gen 0: are all COMMITTED generations durable? */
int cat_gen_durable(struct cat *cat, uint64_t gen, bool *durable);

/* A generation's chunk objects: the stored bytes of the distinct chunks its
 * files name, and how many of them are not on BACKING yet (for progress in
 * bytes; the manifest is not counted). */
int cat_gen_upload_bytes(struct cat *cat, uint64_t gen, uint64_t *total, uint64_t *left);

/* The tree outside generations: a fingerprint that changes with any change
 * to it, and whether every chunk its files name is uploaded. */
int cat_tree_fingerprint(struct cat *cat, char *buf, size_t size, bool *all_uploaded);

/* The tree manifest's side of U5 c and U6, for its writer (fs/uploader.c): before
 * it takes the fingerprint, *seq = the newest row a tree manifest built
 * from now on describes the state after (not those of a deferred
 * transaction still open, catalog_defer.c D6); once that manifest is on
 * BACKING, or the fingerprint shows the one there is still current,
 * cat_tree_described(seq). Removals queued up to seq may then start. Kept
 * in memory: after an open, removals wait for the first tree manifest. */
int cat_tree_horizon(struct cat *cat, uint64_t *seq);
void cat_tree_described(struct cat *cat, uint64_t seq);

/* U10: the mark of a tree manifest the unmount's drain could not put
 * (fs/uploader.c T6): why (a line naming the error) sets the meta row
 * tree_unwritten, NULL deletes it (the next tree manifest put, or found
 * current). cat_tree_unwritten reads it: why "" if none (`ckptfs-admin
 * umount` reads it once the daemon exited). */
int cat_tree_unwritten_set(struct cat *cat, const char *why);
int cat_tree_unwritten(struct cat *cat, char *why, size_t size);

/* U11: fp, the fingerprint (cat_tree_fingerprint) of the tree a tree
 * manifest just put on BACKING describes, sets the meta row
 * tree_described_fp. cat_tree_described_current: *current if the tree now
 * has that fingerprint and every chunk of it is uploaded (one read
 * transaction); false with no row. */
int cat_tree_described_fp_set(struct cat *cat, const char *fp);
int cat_tree_described_current(struct cat *cat, bool *current);

#endif
