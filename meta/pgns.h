/* pgns — the shared namespace in PostgreSQL (issue 18; docs/MULTINODE.md,
 * "Design of the shared namespace").
 *
 * The first slice of the catalog engine for several nodes: inodes, directory
 * entries, committed file extents, and chunks with their reference counts,
 * where each is (uploaded to BACKING, or held by one node's cache) and
 * whether a reclaim is removing it. Same contracts as catalog.h's namespace
 * section where the calls share a name (struct cat_inode, struct cat_extent,
 * errors), so that it can sit behind the catalog interface. Generations and
 * pins come next; nothing here is reachable from a mount yet.
 *
 * Writes stay local until close (close-to-open): a node's writer keeps its
 * pending extents in its own SQLite; pgns_file_commit publishes a file's
 * whole content in one transaction.
 *
 * Invariants (pgns_check counts violations of N1, N2 and N12):
 *  N1. ns_chunks.refcount == the number of ns_extents rows naming the hash.
 *      Counts change only in pgns_file_commit and pgns_inode_release, in the
 *      same transaction as the extents they count, set-based (a commit adds
 *      each chunk's difference of new and old counts in its one statement,
 *      N8; a release drops in one statement, whatever the number of chunks).
 *  N2. Every extent names a chunk row in state live.
 *  N3. A chunk in state reclaiming is never revived: a commit that names it
 *      fails with -EBUSY and changes nothing; once pgns_reclaim_end deleted
 *      the row (after the object was removed from BACKING), the commit inserts
 *      a new row held by its node, which uploads its own copy. So a reclaim's
 *      removal of an object can never land after a new upload of the name.
 *  N4. Every transaction that changes shared state is fenced by its node's
 *      lease (lease.h L2; a change of one statement carries its fence and
 *      is one round trip, L5): a node past its lease changes nothing
 *      (-ESTALE).
 *  N5. The root directory is inode 1; inode numbers come from one sequence
 *      and are never reused.
 *  N6. A chunk pinned by a node's writer (ns_chunks.pins > 0: the node
 *      continues a file from committed extents naming it, pgns_pin) is never
 *      marked reclaiming; a pin is taken only of a live chunk, in the same
 *      row update that a reclaim re-checks, so a pin and a reclaim of one
 *      chunk are serialized. ns_chunks.pins == the number of ns_pins rows
 *      naming the hash; pins go at pgns_unpin (the writer's release) or, for
 *      a node no longer live, at pgns_unpin_lost (the reclaim duty).
 *  N7. A chunk row is marked uploaded on the strength of a node's own
 *      upload only while that node's claim of the hash (ns_upload_claims,
 *      taken by pgns_upload_claim BEFORE the node writes the object) still
 *      exists; pgns_reclaim_end deletes every claim of the hashes it ends,
 *      in the statement that deletes their rows, and the marking consumes
 *      the claim. A claim present at the marking means no reclaim of the
 *      hash ended after the object's write began (a reclaim that ended
 *      earlier removed an older object; one still running holds the row
 *      'reclaiming', which is never marked, N3); a live row already
 *      uploaded needs no claim. A marking refused leaves the row not
 *      uploaded and says so (refused), and the node puts its object again.
 *      Claims of nodes no longer live go at pgns_unpin_lost. The uploader
 *      claims a batch of hashes in one statement (pgns_upload_claims), each
 *      as pgns_upload_claim would: a claim refused or a row missing for one
 *      hash says nothing of the others.
 *      A claim is of use to its node only while the node may still mark
 *      the hash on the strength of it: while an upload of the hash is
 *      queued there (its marking) or a writer there names it (its commit's
 *      marking). A writer's release drops, in the statement that drops its
 *      pins (pgns_unpin_claims), the node's claims of the file's hashes
 *      that no writer of the node names any more and no queued upload of
 *      the node holds: a file never committed (abandoned, or its writer
 *      gone) leaves no claim behind, and a committed one none once its
 *      uploads are marked. A claim dropped too soon (a new writer of the
 *      hash raced the release) only makes a marking refused: the object
 *      is put again, never counted unclaimed.
 *  N8. A file's commit (pgns_file_publish) is one statement, its own
 *      transaction, one round trip: the fence (lease.h L5), the chunk rows
 *      it inserts, the counts (N1), the extents and the inode's size. Every
 *      write in it is conditioned on one answer read first under row locks
 *      held to its end: the node is live, the inode is a regular file
 *      (locked FOR UPDATE), no chunk it names is reclaiming (the rows that
 *      exist locked FOR UPDATE). A row that did not exist for its snapshot
 *      and turns out reclaiming when its insert meets it undoes the whole
 *      statement (pg.h P6): N3 holds as in a transaction. Its writes touch
 *      each row once (an old extent at an offset the new content uses is
 *      updated in place, the others deleted; a chunk row is updated or
 *      inserted, never both), as a statement's data-modifying WITH queries
 *      must. With markings of chunks its node put on BACKING before the
 *      commit (N7) it is BEGIN, the statement, the markings, COMMIT: the
 *      statement's lock of the node's row holds to the COMMIT (L2). Run
 *      alone it carries its call's token (pg_token, as N9's create): run
 *      again after a lost answer (pg.h P5) it finds the token committed,
 *      changes nothing and answers 0. Without it, the run again put the
 *      call's extents back over another node's rewrite or truncate that
 *      committed in between (a lost update; alone, its second run changes
 *      nothing). With markings, pg_txn's COMMIT carries the token (P2).
 *      CockroachDB refuses two data-modifying WITH queries on one table in
 *      a statement unless sql.multiple_modifications_of_table.enabled is
 *      set (N8 changes ns_chunks and ns_extents twice each); PostgreSQL and
 *      YugabyteDB accept them. Not run against either here.
 *  N9. A create (pgns_create) is one statement, one round trip, fenced in
 *      it (lease.h L5): the parent's row locked FOR UPDATE (its mode: the
 *      answer's -ENOENT or -ENOTDIR), the inode (the parent's generation),
 *      its entry, the parent's times and link count, each conditioned on
 *      the node live and the parent a directory; a name taken fails the
 *      statement (-EEXIST) and changes nothing. It carries its call's token
 *      (pg_token, pg.h P2) into ckpt_txns: run again after a lost answer
 *      (pg.h P5), it finds the token committed, changes nothing and answers
 *      with the inode its first run made (not -EEXIST for its own name).
 *      pgns_create_txn, for a caller's transaction, does the same in steps.
 *  N10. A node's writer that names a chunk the node is about to evict its
 *      cache copy of pins it first (pgns_pin_held, catalog_shared_data.c
 *      S11): in one statement, for every writer (ino) of the node that
 *      names it, the pins of N6 on a live row whose object is on BACKING
 *      (uploaded, or the node's claim stands, N7); a hash with no row is
 *      inserted live, refcount 0, pinned, and uploaded on the strength of
 *      the node's claim, which the marking consumes (N7); without the
 *      claim, or a row reclaiming, nothing is pinned and the copy stays.
 *      Its pins go as N6's do (pgns_unpin: the writer's release).
 * N11. A read the daemon makes per FUSE call is one statement, one round
 *      trip (pg.h P5), and answers everything the call needs of one row:
 *      a lookup returns the entry's inode or, for a miss, the parent's mode
 *      and link count that tell -ENOTDIR / -ENOENT apart (two before);
 *      pgns_getattr_gen returns an inode's attributes with its generation
 *      (a getattr and a gen_of before), and pgns_create_gen the new inode's
 *      generation, the parent's it inherited in the statement. Each answer
 *      is one snapshot: nothing is remembered between calls, so a node sees
 *      another's change at its next call (the kernel's timeouts, ops.c,
 *      bound how late that call comes).
 * N12. ns_chunks.free_seen_ns, when a chunk was seen free (the reclaim
 *      horizon, catalog_shared_reclaim.c R7), is set only by
 *      pgns_reclaim_stamp, on a live row with refcount 0 and pins 0, to the
 *      server's clock read after that statement's snapshot (so every change
 *      that freed it committed before the stamp); the statement that adds
 *      references to a row (pgns_file_publish's) sets it NULL in the same
 *      row update. A stamp therefore says: free since before it, and named
 *      by no file since. (A rewrite's backup adds references only to rows
 *      already referenced, never stamped; rebuild --meta fills an empty
 *      database.)
 * N13. A directory renamed (moved, renamed in place, or exchanged) makes
 *      the manifests on BACKING of the COMMITTED generations whose series
 *      is it or under it stale: a manifest names its series by path, and a
 *      rebuild --meta would put them back at the old one (beside, or in
 *      conflict with, a new run there). In the rename's transaction their
 *      durable_version goes to 0 (not lost ones: they have none to write),
 *      so they are not durable until a manifest naming the new path is on
 *      BACKING (manifest_shared.h D3 still holds: the mark only goes down).
 *      So does an OPEN or HELD one's with a version on BACKING (a rewrite):
 *      its rollback restores a COMMITTED version whose manifest names the
 *      old path, and must find it not durable, so that the sweep or the
 *      abort queues it again and `wait` waits for it.
 *      pgns_series_moved_take gives the renaming thread their ids and
 *      versions, which the caller queues on its node (catalog_shared_gen.c
 *      S8); a node lost before it queued them leaves them undurable, which
 *      its sweeper queues (catshd_enqueue_undurable). A file's rename costs
 *      nothing more; a directory's, one statement, which walks each
 *      series of COMMITTED generations up to the root once, only if the
 *      directory is outside generations (a live generation's series always
 *      is).
 * N14. An unlinked inode (nlink 0) is not released (deleted, or emptied of
 *      its data) while a live node other than the releasing one has it
 *      open (NS_HELD_ELSEWHERE): a node has a handle of it (its ns_open
 *      row, taken at the node's first handle that is not for writing while
 *      no write handle is open there, dropped at its last close: one
 *      statement each, pgns_opened, none per read) or a handle for writing
 *      (its ns_writing row, pggen.h X1). So a file open on one node stays
 *      readable after another removes it, as on one node (POSIX). A
 *      release locks the inodes' rows first and checks in its next
 *      statement, and NS_OPEN_ADD holds the row FOR SHARE: an open either
 *      lands before the check (and is seen) or finds the inode gone
 *      (-ENOENT). The last node to close releases it: NS_OPEN_DROP answers
 *      whether the inode is unlinked and open nowhere else, and the caller
 *      drops its data then. A release records the inodes it leaves so
 *      (ns_release_wait, in its own statement: deleted, or emptied); the
 *      reclaim duty (pgns_unpin_lost) releases those open on no live node
 *      any more at its next turn: one whose last holder closed a write
 *      handle, or was lost (whose ns_open rows it deletes first). Other
 *      unlinked inodes are left as before (catalog_shared_gen.c S1). A
 *      release deletes the ns_open, ns_writing and ns_release_wait rows
 *      naming the inodes it deleted. An ns_open row with `parked` set
 *      (schema 4) is also a write handle whose ns_writing row its flush
 *      parked (pggen.h X15): only keep-latest-k's expire reads the flag (X12).
 * N15. The store id (ns_meta key 'store_id', 32 lowercase hex digits: the id
 *      in BACKING's marker ckptfs.store, fs/main.c M3) is set once and never
 *      changed: pgns_store_id_offer inserts it only when no row exists (ON
 *      CONFLICT DO NOTHING) and answers the id the catalog holds after, so
 *      nodes offering different ids at the same moment all get the first
 *      one committed. ns_meta key 'store_marked' is inserted (pgns_store_marked)
 *      only after a node found or wrote BACKING's marker with that id: from
 *      then on a BACKING without a marker is not the store, saves or none.
 *      No version change: an older ckptfs ignores the keys.
 *
 * Calls return 0 or a negative errno: catalog.h's, plus -ESTALE (N4), -EBUSY
 * (N3) and pg.h's (-ENOTCONN, -EIO). */
#ifndef CKPTFS_PGNS_H
#define CKPTFS_PGNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "lease.h"
#include "pg.h"

/* The statements pgns runs (pggen.h has those of generations). */
extern const struct pg_stmt pgns_stmts[];
extern const size_t pgns_nstmts;

/* lease_stmts, then pgns_stmts, then pggen_stmts, then catsha_stmts
 * (catalog_shared_admin.h), for pg_open: lease calls use first 0, pgns calls
 * first lease_nstmts, pggen calls the sum of both, catsha calls that plus
 * pggen_nstmts. */
const struct pg_stmt *pgns_stmts_all(size_t *n);

struct pgns {
	struct pg *pg;
	struct lease *lease; /* this node's; its first is 0 */
	size_t first;        /* where pgns_stmts begin in pg's list: lease_nstmts */
	size_t first_gen;    /* where pggen_stmts begin: lease_nstmts + pgns_nstmts */
	uint64_t claims;     /* statements pgns_upload_claims sent (atomic; fs/uploader.h B1) */
};

/* The tables (and the root directory, owned by root_uid:root_gid);
 * idempotent, safe from several nodes at once. A database of an older
 * schema is brought to this one (ns_meta 'schema'; 1 had no such key). */
#define PGNS_SCHEMA 5
#define PGNS_SCHEMA_TEXT "5"
int pgns_schema(struct pg *pg, uint32_t root_uid, uint32_t root_gid);

int pgns_getattr(struct pgns *ns, uint64_t ino, struct cat_inode *out);
/* pgns_getattr with the inode's generation (0: in none) in one round trip
 * (N11); *gen 0 on failure. */
int pgns_getattr_gen(struct pgns *ns, uint64_t ino, struct cat_inode *out, uint64_t *gen);
/* As cat_lookup: "." and ".." too; a miss in a parent that is not a live
 * directory is -ENOTDIR or -ENOENT. */
int pgns_lookup(struct pgns *ns, uint64_t parent, const char *name, struct cat_inode *out);
int pgns_create(struct pgns *ns, uint64_t parent, const char *name, uint32_t mode, uint32_t uid,
		uint32_t gid, uint64_t rdev, const char *target, struct cat_inode *out);
/* pgns_create that also gives the new inode's generation (0: none; gen NULL:
 * not asked), read in the same statement (N11). */
int pgns_create_gen(struct pgns *ns, uint64_t parent, const char *name, uint32_t mode,
		    uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		    struct cat_inode *out, uint64_t *gen);
/* Removes a non-directory entry; the inode stays with nlink 0 until
 * pgns_inode_release. */
int pgns_unlink(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out);
int pgns_readdir(struct pgns *ns, uint64_t dir, uint64_t cookie, cat_dirent_fn fn, void *arg);
/* As cat_rmdir, cat_link, cat_rename (flags CAT_RENAME_*; no generations
 * yet), cat_setattr, cat_readlink and cat_file_truncate. A change of a
 * directory's entries locks the directory's row (two: in inode order), so
 * changes of one directory from several nodes are serialized. */
int pgns_rmdir(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out);
int pgns_link(struct pgns *ns, uint64_t ino, uint64_t newparent, const char *newname,
	      struct cat_inode *out);
int pgns_rename(struct pgns *ns, uint64_t parent, const char *name, uint64_t newparent,
		const char *newname, unsigned flags, uint64_t *replaced_ino);
int pgns_setattr(struct pgns *ns, uint64_t ino, unsigned what, const struct cat_inode *in,
		 struct cat_inode *out);
int pgns_readlink(struct pgns *ns, uint64_t ino, char *buf, size_t size);
int pgns_file_truncate(struct pgns *ns, uint64_t ino, uint64_t new_size);

/* A chunk a commit names, with what its node's store recorded of it. */
struct pgns_chunk {
	uint8_t hash[CAT_HASH_LEN];
	uint64_t plain_len;
	uint64_t stored_len;
	uint8_t codec;
};

/* Publishes a file's content: its committed extents become ext[0..n), whose
 * chunks are described in chunks[0..nchunks) (each hash once); size and
 * mtime are set, ctime is now. Chunks the store lacks are inserted held by
 * this node, not uploaded. One statement, one round trip (N1, N3, N4, N8). */
int pgns_file_commit(struct pgns *ns, uint64_t ino, uint64_t size, int64_t mtime_ns,
		     const struct cat_extent *ext, size_t n, const struct pgns_chunk *chunks,
		     size_t nchunks);

/* pgns_file_commit, and in the same transaction (N8) marks uploaded the chunks
 * uploaded[0..nuploaded) its node put on BACKING before the commit named
 * them (a writer's chunk is uploaded while the file is still open), each
 * only as N7 allows: refused[i] (nuploaded of them, may be NULL when
 * nuploaded is 0) says uploaded[i] was left not uploaded, its object to be
 * put again. */
int pgns_file_publish(struct pgns *ns, uint64_t ino, uint64_t size, int64_t mtime_ns,
		      const struct cat_extent *ext, size_t n, const struct pgns_chunk *chunks,
		      size_t nchunks, const uint8_t (*uploaded)[CAT_HASH_LEN], size_t nuploaded,
		      bool *refused);

/* The committed extents of ino ending after off, in order (as cat_extents). */
int pgns_extents(struct pgns *ns, uint64_t ino, uint64_t off, struct cat_extent *out, int max);

/* This node put the chunk's object on BACKING. -ENOENT if the store has
 * no such chunk or it is being reclaimed (N3): nothing is marked. */
int pgns_chunk_uploaded(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN]);
/* The same for n chunks in one statement (one round trip, lease.h L5), as
 * N7 allows (this node's claim, consumed); marked[i] says whether hashes[i] is marked (false: as
 * pgns_chunk_uploaded's -ENOENT, or refused); refused[i] (refused may be
 * NULL) that its row is live but this node's claim is gone: a reclaim may
 * have removed the object, which is to be put again. */
int pgns_chunks_uploaded(struct pgns *ns, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
			 bool *marked, bool *refused);

/* What the store records of chunks: io[i].chunk.hash in, the rest out
 * (found false: no row). One round trip for all n. */
struct pgns_chunk_info {
	struct pgns_chunk chunk;
	bool found, uploaded, live; /* live: not being reclaimed */
};
int pgns_chunks_info(struct pgns *ns, struct pgns_chunk_info *io, size_t n);

/* Whether every chunk ino's committed extents name is on BACKING. */
int pgns_file_uploaded(struct pgns *ns, uint64_t ino, bool *uploaded);

/* Deletes ino if its nlink is 0, dropping its extents' references. */
int pgns_inode_release(struct pgns *ns, uint64_t ino);

/* Pins (N6) the live chunks among io[0..n).chunk.hash for this node's
 * writer of ino and, in the same transaction, fills the rest of io as
 * pgns_chunks_info: after it, a chunk found and live is pinned. */
int pgns_pin(struct pgns *ns, uint64_t ino, struct pgns_chunk_info *io, size_t n);
/* Drops this node's pins for ino (none: nothing happens). */
int pgns_unpin(struct pgns *ns, uint64_t ino);
/* pgns_unpin, and in the same statement drops this node's upload claims
 * of hashes[0..n) (N7: the writer's release, for the hashes of no more use
 * to the node); n 0 is pgns_unpin. */
int pgns_unpin_claims(struct pgns *ns, uint64_t ino, const uint8_t (*hashes)[CAT_HASH_LEN],
		      size_t n);
/* Drops the pins, upload claims and ns_open rows of every node that is no
 * longer live, then releases up to 4096 of the inodes a release left to
 * their last holder that no live node has open any more (N14). */
int pgns_unpin_lost(struct pgns *ns);
/* N14: this node's first handle of ino opened (open true; -ENOENT: the
 * inode is gone) or its last one closed; *release (may be NULL) says, on a
 * close, that ino is unlinked and open on no other live node: the caller
 * releases it. One statement, one round trip (lease.h L5). */
int pgns_opened(struct pgns *ns, uint64_t ino, bool open, bool *release);

/* Reclaim (the holder of duty "reclaim", lease.h L3): marks up to max
 * chunks with no reference and no pin (N6) reclaiming and returns them (also those a
 * reclaimer that is no longer live left marked, once its lease ran out two of
 * its terms ago: lease.h L8), of the live ones only those seen free before
 * horizon_ns while every generation manifest on BACKING is current
 * (catalog_shared_reclaim.c R7); the caller removes each object from
 * BACKING and then calls pgns_reclaim_end for them (N3). */
struct pgns_reclaim {
	uint8_t hash[CAT_HASH_LEN];
	bool uploaded;
};
int pgns_reclaim_begin(struct pgns *ns, int64_t horizon_ns, struct pgns_reclaim *out, size_t max,
		       size_t *n);
int pgns_reclaim_end(struct pgns *ns, const struct pgns_reclaim *done, size_t n);

/* An ended generation whose manifests may still be on BACKING. */
struct pgns_ended_gen {
	uint64_t id;
	uint32_t version; /* manifests of versions 1..version may be there */
	bool kept;        /* false: never committed, so none is */
};
/* N12, R8, one statement: stamps with the server's clock the ended
 * generations and the free chunks not stamped yet, reads the tree horizon
 * (*horizon_ns, 0 while none was recorded) and returns up to max ended
 * generations seen ended before it whose manifests were not all removed. */
int pgns_reclaim_stamp(struct pgns *ns, int64_t *horizon_ns, struct pgns_ended_gen *out,
		       size_t max, size_t *n);
/* The ended generations ids[0..n) have no manifest on BACKING any more. */
int pgns_reclaim_gens_done(struct pgns *ns, const uint64_t *ids, size_t n);
/* manifest_shared.h D6: a tree manifest describing every change committed
 * before horizon_ns is on BACKING (the recorded horizon only grows). */
int pgns_tree_horizon_set(struct pgns *ns, int64_t horizon_ns);

/* For meta/pggen.c, inside a pg_txn body: pgns_create's transaction (the new
 * inode inherits its parent's generation), and pgns_create's name check. */
int pgns_create_txn(struct pgns *ns, uint64_t parent, const char *name, uint32_t mode,
		    uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		    struct cat_inode *out);
int pgns_name_check(const char *name);
/* pgns_rename's transaction (for meta/pggen.c's pggen_rename, which adds
 * the generation bookkeeping to it). */
int pgns_rename_txn(struct pgns *ns, uint64_t parent, const char *name, uint64_t newparent,
		    const char *newname, unsigned flags, uint64_t *replaced_ino);
/* N13: the COMMITTED generations (ids[i] at versions[i]) whose durable
 * mark the calling thread's last rename took away, malloc'd (the caller frees both);
 * returns how many. Read only after that rename committed. */
size_t pgns_series_moved_take(uint64_t **ids, uint32_t **versions);
/* pgns_unlink's and pgns_rmdir's transactions (for meta/pggen.c's
 * pggen_remove, which ends a generation rooted at the removed inode in the
 * same transaction). */
int pgns_unlink_txn(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out);
int pgns_rmdir_txn(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out);
/* Now, in ns since the epoch (the times inodes and generations carry). */
int64_t pgns_now_ns(void);
/* The PostgreSQL text array "{hex,hex,...}" of n hashes, the first at first
 * and each stride bytes after the one before: malloc'd into *out. */
int pgns_hex_list(const uint8_t *first, size_t stride, size_t n, char **out);

/* One chunk row, for tests and `verify`. -ENOENT if there is none. */
struct pgns_chunk_row {
	uint64_t refcount;
	bool uploaded;
	uint64_t holder;
	char state[16];
	uint64_t plain_len, stored_len;
	uint8_t codec;
};
int pgns_chunk_get(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN], struct pgns_chunk_row *out);
/* The same, and whether its holder is a live node (lease.h L1: a node row
 * never goes back to live, so a holder not live now never uploads it: its
 * copy is lost unless another node adopts the chunk, pggen.h X2). One
 * round trip. */
int pgns_chunk_get_holder(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN],
			  struct pgns_chunk_row *out, bool *holder_live);
/* N7: this node's claim of hash, taken before it writes the object (writer:
 * a writer of this node names it: claimed unless the store has it live and
 * uploaded; else claimed only if the store has it live and not uploaded),
 * and the row as pgns_chunk_get (-ENOENT: no row; a writer's claim is
 * taken even so). One statement, one round trip. */
int pgns_upload_claim(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN], bool writer,
		      struct pgns_chunk_row *out);
/* pgns_upload_claim of n hashes in one statement, one round trip whatever
 * n (pg.h P5): hashes[i] as a
 * writer's if writer[i]; out[i].found false: the store has no row of it,
 * else out[i].row is that row. */
struct pgns_claim {
	bool found;
	struct pgns_chunk_row row;
};
int pgns_upload_claims(struct pgns *ns, const uint8_t (*hashes)[CAT_HASH_LEN], const bool *writer,
		       size_t n, struct pgns_claim *out);

/* ---- for the shared engine of the catalog (meta/catalog_shared.c) ---- */

/* As cat_inodes_release and cat_inodes_drop_data: of inos[0..n), those
 * with nlink 0 are deleted (or, regular files, emptied to size 0), their
 * extents' references dropped (N1); a transaction per few hundred. */
int pgns_inodes_release(struct pgns *ns, const uint64_t *inos, size_t n);
int pgns_inodes_drop_data(struct pgns *ns, const uint64_t *inos, size_t n);
/* The namespace's counts of struct cat_stats: inodes, files, logical_bytes,
 * referenced_bytes (the other fields are left as they are). */
int pgns_stats(struct pgns *ns, struct cat_stats *out);
/* The shared catalog's random id (ns_meta, made with the schema: 32
 * lowercase hex digits, the same on every node). buf needs 33 bytes. */
int pgns_catalog_id(struct pgns *ns, char *buf, size_t size);
/* N15: the store id ("" when none is recorded) and what the catalog calls
 * saved on BACKING: durable generations (COMMITTED, durable_version > 0),
 * the newest whose current version is the durable one (id, version; 0 when
 * none: as one node's cat_gen_durable, upload.h U3) and whether any chunk
 * is marked uploaded. One statement, read only. A save whose rewrite v+1
 * is committed but not yet durable is not that newest: its upload puts
 * v+1's manifest and removes v's before it records v+1 durable, and a
 * mount in that window must not find v's manifest missing (review 44 F1). */
struct pgns_store_facts {
	char id[33];
	uint64_t durable;
	uint64_t newest;
	uint32_t version;
	bool uploaded;
	bool marked; /* 'store_marked': the marker with the id is on BACKING */
};
int pgns_store_facts(struct pgns *ns, struct pgns_store_facts *out);
/* N15: records that BACKING's marker carries the store id (idempotent). */
int pgns_store_marked(struct pgns *ns);
/* N15: records id (32 lowercase hex digits, else -EINVAL) as the store id if
 * none is; held gets the one recorded after (id, or another node's). */
int pgns_store_id_offer(struct pgns *ns, const char *id, char held[33]);
/* Up to max chunks that node holds and has not uploaded, by hash, after
 * hash `after` (NULL: from the first): what a sweeper may adopt (pggen.h). */
int pgns_unuploaded_of(struct pgns *ns, uint64_t node, const uint8_t *after,
		       uint8_t (*out)[CAT_HASH_LEN], size_t max, size_t *n);
/* As pgns_unuploaded_of, for every node not live whose row names cache
 * cache_id (lease.h L10: the earlier daemons of this node's cache). */
int pgns_unuploaded_of_cache(struct pgns *ns, const char *cache_id, const uint8_t *after,
			     uint8_t (*out)[CAT_HASH_LEN], size_t max, size_t *n);

/* Counts violations of N1, N2 and N12 (logged, one line each). */
int pgns_check(struct pgns *ns, int *violations);

/* N10: pins refs[i].chunk for this node's writer refs[i].ino, each hash's
 * refs together (a row missing is inserted from refs[i].chunk, as N10
 * says), in one statement, one round trip; pinned[i] says whether
 * refs[i].chunk.hash is pinned (false: the cache copy must stay). */
struct pgns_pin_ref {
	uint64_t ino;
	struct pgns_chunk chunk;
};
int pgns_pin_held(struct pgns *ns, const struct pgns_pin_ref *refs, size_t n, bool *pinned);

#endif
