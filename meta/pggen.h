/* pggen — generations across nodes in the shared catalog (issue 18;
 * docs/MULTINODE.md "Generations span nodes").
 *
 * A generation's row is shared. Its root is created on some node; every
 * inode under it carries its id (ns_inodes.gen), whichever node made it.
 * Each node records the files it has open for writing (ns_writing), so the
 * completion signal seen on any node can commit the whole generation with
 * every node's closed files — and only those.
 *
 * States and transitions are those of meta/generation.h (OPEN, COMMITTED,
 * HELD, ...), plus `lost`: a generation naming a chunk that died with its
 * node before it reached BACKING. A lost generation is hidden from listings.
 *
 * Invariants:
 *  X1. A commit succeeds only while no node has a file of the generation
 *      open for writing (-EBUSY, with how many, so the caller can wait up to
 *      its bound) — a node whose lease ran out included, until X2 handled it; the check and the state change are one transaction that
 *      holds the generation's row, and a node opening a file of a generation
 *      for writing takes that row FOR SHARE in its own transaction, so no open
 *      slips in between a commit's check and its change.
 *  X2. A node past its lease (lease.h) is handled once, by one live node,
 *      in one transaction that claims it first (lease.h L7: recorded as
 *      settled there, retried by every later sweep until it is):
 *      its open generations that it had files open in are held (a file
 *      with its writing row: one it may still have changed, X15; their
 *      files are as their last close left them: proven of nothing), and so are
 *      those it opened that no other node writes (its policy was the only
 *      one to decide them: a death between files would leave them OPEN
 *      for ever); its writing
 *      rows are dropped, the chunks it alone held that another live node also
 *      has are adopted by that node (pggen_adopt, before; never one that
 *      node found lost itself, X16's ns_chunks.lost_by: its copy is the
 *      damaged one, review 50 F1), and the
 *      generations naming a chunk still held by it and not uploaded are lost.
 *      A new version (a rewrite) it had files open in, or that it reopened
 *      and no other node writes (it died between files), is rolled back to
 *      its backup instead of held: a crash never shows a mix of two versions;
 *      the version rolled back is kept HELD beside it as a generation of
 *      its own, "<name>.rewrite-<id>" (generation.h G10, rule "node-lost"),
 *      its inodes with it, for an explicit decision. A hold (pggen_hold_ids)
 *      keeps a rolled-back version the same way; only an explicit abort
 *      (pggen_end PGGEN_ABORT) unlinks its tree.
 *  X3. Every change is fenced by its node's lease (L2).
 *  X4. The calls of generation.h below keep G1, G2 and G5 in
 *      ns_generations: a rename, abort, delete or expire changes the
 *      namespace rows and the generation rows in one transaction, taking the
 *      series directory's row before the generation's (as pgns does).
 *  X5. Those calls show a lost COMMITTED generation as HELD (rule
 *      "node-lost", reason PGGEN_LOST_REASON), what a HELD one is on one
 *      node: kept under its name, reachable by name, hidden from directory
 *      listings by the daemon (fs/gen.c gen_hidden) on every node, never
 *      saved (keep-latest-k expires it as a held one, once a newer save of
 *      its owner is durable too: X13). Its row keeps its
 *      state and `lost` (no migration, and rows
 *      lost before this rule are shown the same way); a lost one is never
 *      committed as it is, even by a decision (-ENODATA): a delete ends it,
 *      or a rewrite that replaces what was lost (X6).
 *  X6. As a HELD one on one node, a lost generation may be written into
 *      (a resumed trainer saving the same step again): it opens version+1
 *      with a backup, as any rewrite. Its commit checks, in its
 *      transaction, that the new tree names no chunk that is not on
 *      BACKING and whose holder is not a live node; then it is lost no more
 *      and commits, else -ENODATA and nothing changes (a hold or an abort
 *      puts the lost version back, still lost).
 *  X7. At unmount (fs/gen.c gen_policy_shutdown) a node decides only the
 *      OPEN generations no other live node takes part in; one that another
 *      live node has a file of open for writing (ns_writing) or opened
 *      (opened_by) is left OPEN for that node's policy (its marker, its
 *      unmount, or X2 if it dies) to decide.
 *  X8. A generation's root unlinked or removed (rm -rf, rmdir, unlink:
 *      pggen_remove), as renamed away or over (pggen_rename), ends it in
 *      the transaction of the removal: DELETED, rule "trainer" (renamed,
 *      replaced), its backup dropped, its inodes left to the namespace's
 *      nlink rules, as generation.c does on one node. A row never stays
 *      OPEN or COMMITTED with its root unlinked.
 *  X10. `lost` is a verdict, re-checked, never a deletion: a generation is
 *      lost while its tree names a chunk that is not on BACKING and whose
 *      holder is no live node. Every read of a row (G_COLS: get, find,
 *      lists; a resume's find by step, keep-latest-k's list) re-checks a row
 *      marked lost, so one whose every chunk is on BACKING again (another
 *      node uploaded its copy of the same bytes, an HSDP replica) or held
 *      by a live node shows as it is (COMMITTED, found by step) from that
 *      moment; a commit refused as lost re-checks first. The mark itself is
 *      cleared by pggen_lost_recheck (every sweep, a bounded batch; its
 *      manifest then queued), and a live node that caches a chunk of a
 *      lost generation whose holder is gone adopts it (pggen_orphans, then
 *      pggen_adopt with dead 0; a cache mounted again adopts, at mount, every
 *      chunk its earlier nodes held whose object it has whole, even one its
 *      local catalog forgot, once every node already expired is settled,
 *      then re-checks: catalog_shared.c S18, S20), and a chunk of it
 *      whose object BACKING has whole is marked uploaded (X11). A lost
 *      generation is never counted
 *      as a complete save, and a complete one is never hidden as lost.
 *  X11. A node can die after its object reached BACKING and before it
 *      marked the chunk uploaded (catalog_shared_data.c S13): a sweep with
 *      a BACKING check (cat_lease_sweep_backing) reads, of the chunks
 *      pggen_orphans names, a bounded batch a sweep (round robin), each
 *      claimed first (pgns.h N7), and marks uploaded only those whose
 *      object reads back whole (decoded, SHA-256 equal to the hash); the
 *      re-check (X10) then finds the generation whole. A damaged or absent
 *      object changes nothing: the generation stays lost.
 *  X9. A commit is four round trips: BEGIN; one statement that is its fence
 *      (lease.h L6) and locks the generation's row FOR UPDATE, returning its
 *      state and version; one that counts the writers (X1: a statement of
 *      its own, so its snapshot is taken after the row lock and sees every
 *      registration that held the row before) and changes the state only
 *      if there are none; COMMIT. A rewrite (a backup to drop) or a lost
 *      one runs its steps one statement each, as before. The version
 *      committed is returned (pggen_commit_at), so the committing node
 *      queues its manifest without reading the row again.
 *  X12. A generation's state is only what its row says: a node's daemon
 *      never takes its own memory of a generation being OPEN as the
 *      answer before a change inside it (fs/gen.h invariant 8), as
 *      another node may have committed or held it meanwhile. It reads the
 *      row before each change that starts, and a COMMITTED or HELD one is
 *      reopened (pggen_reopen; -EALREADY when another writer reopened it
 *      first). The change then goes into version+1 with a backup, so a
 *      committed save is never changed in place by a node that did not
 *      commit it, its durable manifest keeps naming what it names, and
 *      keep-latest-k (which expires only a COMMITTED row, re-checked in its
 *      transaction) no longer sees it as a complete save. Nor does an
 *      expire end a COMMITTED save while a node has a file of it open for
 *      writing and has not changed it yet (-EBUSY: kept; the next pass
 *      decides, which the writer's node asks for when its last write handle
 *      of the save closes, fs/gen.h invariant 18; a HELD one goes as
 *      before, its open files named by its hold):
 *      its count is a statement after the row's lock, as a commit's (X1),
 *      of the ns_writing rows and of the handles a live node parked at
 *      their flush (X15: its ns_open row marked parked), which X1 and X2
 *      ignore; the parking and its end are each one statement that moves
 *      the handle between the two, so the count never misses it.
 *      G_KEEP_NEWER keeps generation.h G6 here too: newer saves count only
 *      if a strong rule committed them (rule not in GEN_RULES_WEAK_SQL),
 *      and the owner's most recently committed save (committed_ns, id) in
 *      the series is never expired (review 42 F1, F3).
 *  X13. A lost COMMITTED save (X5: shown HELD, struct cat_gen's lost) is
 *      lost only because the node that holds its chunks is away: dead,
 *      swept after a stall, or unmounted with uploads queued (lease.h L9);
 *      its bytes may come back with that node's cache (X10), and it is
 *      not proven incomplete. keep-latest-k ends it ("keep-held") only
 *      once `keep` newer COMMITTED saves of its owner (by step) exist and
 *      at least one of them is durable (COMMITTED, not lost,
 *      durable_version = version), as G6 keeps the owner's newest durable
 *      save: a save is never deleted for newer ones that are themselves
 *      only in a node's cache. The policy asks it before it expires
 *      (fs/gen.c gen_keep_held), and pggen_expire asks it again in its
 *      transaction (G_KEEP_NEWER, the row's `lost` re-checked there as
 *      X10 does, under its lock), so a listing gone stale never bypasses
 *      it. A truly HELD save (state HELD: a first version its dead node
 *      was writing, held "node-lost" by X2, lost or not) keeps G6's rule
 *      for held ones: it was never proven complete.
 *  X14. (generation.h G9 on this engine; schema 3) A file whose write or
 *      close failed (ENOSPC, EIO: the close's commit of its writer, at the
 *      last handle or a handle for writing, fs/ns.c ns_commit) has its
 *      ns_inodes.failed set (pggen_failed, fenced) before its ns_writing
 *      row goes, so the row (X1) or the flag holds its save at every
 *      moment; the flag outlives the node (a node lost with it leaves it,
 *      X2 drops only its writing rows). While a file of a generation with
 *      nlink > 0 is failed, every commit by a rule other than an explicit
 *      decision ("explicit", "admin": a marker, tracker, metadata, next-gen,
 *      content, unmount) is refused with -ENOTRECOVERABLE in the commit's
 *      own transaction (G_COMMIT_FREE's statement, after its row lock; a
 *      rewrite's or a lost one's G_WRITERS_FAILED), nothing changed; fs/gen.c
 *      then holds it with pggen_unsettled's reason (GEN_FAILED_REASON naming
 *      the file, as one node names it). Cleared by: a later open for
 *      writing of the file on any node (G_WRITING: a retry, whose ns_writing
 *      row holds the save until its close, which sets the flag again if it
 *      fails); its removal (nlink 0: it is no file of the save; the row goes
 *      with the inode); an explicit decision, which takes the save as it is
 *      and clears the flags of its files in its transaction, as one node
 *      does. A close that succeeds after a failed one of another handle of
 *      the same node, without a new open for writing, does not clear it:
 *      the save stays held for a decision (stricter than one node).
 *  X15. A node's ns_writing row of a file of a generation names it while
 *      that node may still change it (fs/ns.h invariant 13): from its first
 *      open for writing to the flush (close(2)) of its only write handle
 *      that published the file, which drops it (then the node's ns_open
 *      row holds the inode, pgns.h N14), and again from the next change
 *      through a handle still open (pggen_writing_resume: the row back
 *      before the change reads the generation's state for a reopen, X12;
 *      the failed flag of X14 left as it is, since that is no new open) or the next
 *      open for writing, to the last close. So X1 and X2 wait for and hold
 *      only files a node may still change: a node killed right after its
 *      close returned, before its RELEASE, holds no save (review 45 F1).
 *      The handle is still open, though, and may write again: so the flush
 *      drops the row and marks the node's ns_open row of the file parked
 *      in one statement (pggen_writing_park, schema 4), and the row's
 *      return or the last close (G_WRITING) clears the mark in theirs;
 *      keep-latest-k's expire counts the marks of live nodes (X12) and
 *      nothing else reads them. A node's death leaves its mark to no one
 *      (not live: not counted; its ns_open rows go with pgns_unpin_lost).
 *      A last close whose statement fails (PostgreSQL away) leaves the
 *      mark; its node ends it late with pggen_writing_unpark, which
 *      changes that flag alone (fs/ns.h invariant 15, review 50 F4).
 *      The last close's statement returns the save's state, unlocked: one
 *      another node committed has that node's policy ask for keep again
 *      (fs/gen.h invariant 18); a close racing the commit leaves it to the
 *      next pass.
 *  X16. (generation.h G12 on this engine; pggen_hold_lost_chunk) A chunk
 *      its writer's node finds lost before its upload (upload.h U7: the
 *      cache copy damaged or missing, BACKING without it) makes every
 *      COMMITTED save naming it, whichever node committed it, HELD (state
 *      4, rule GEN_LOST_CHUNK_RULE, a reason naming the chunk, one file and
 *      the node) in one fenced transaction that locks their rows FOR
 *      UPDATE, 16 a transaction. So G_KEEP_NEWER (which counts state 1 only)
 *      never counts it among the K newer saves and the older intact save
 *      stays, `wait` on any node names it held, and every node hides it.
 *      Not while ns_chunks says BACKING has the chunk (another node put the
 *      same bytes) or another live node holds it (its cache has a copy it
 *      may still upload, catalog_shared_data.c S6): then nothing is lost. A
 *      save held so is a HELD one for X13 and G6 (keep-held ends it once K
 *      newer are committed, one of them durable), a decision (admin commit,
 *      rm) otherwise, until the save is whole on BACKING again (X18).
 *      The same transaction first locks the OPEN saves naming the chunk
 *      (FOR UPDATE) and last records the finding on the chunk's row
 *      (ns_chunks.lost_by, schema 5) for every node's X17: a commit under
 *      way on another node ends before the lock is granted and is then
 *      held here as COMMITTED; one that starts later sees the mark. A
 *      transaction that fails (PostgreSQL away) is run again by the finder
 *      until one succeeds (fs/uploader.h B5): holds and mark come late, not
 *      never.
 *  X17. (generation.h G13; pggen_lost_chunk_of) Whether a file of a save
 *      names a chunk found lost before its upload, by this node (its upload
 *      queue, upload.h U14) or by any node (the chunk row's lost_by, X16),
 *      judged lost as X16 does (not on BACKING, no live node but the finder
 *      holding it). A commit by any rule but the admin's checks the marks
 *      inside its own transaction, under its row lock (G_COMMIT_FREE counts
 *      them: no extra round trip), and this node's queue in one statement
 *      before it (catalog_shared_gen.c S9); refused, it is held with the
 *      reason naming the chunk, a file and the node that found it
 *      (catshg_unsettled, after X14's failed files). A node of schema 4
 *      sees only its own findings.
 *  X18. (pggen_lost_chunk_whole, every sweep: catalog_shared.c S6) A save
 *      HELD by rule lost-chunk is committed again, by rule
 *      GEN_WHOLE_AGAIN_RULE, once every chunk it names is on BACKING
 *      (ns_chunks.uploaded: put by a node whose copy passed SHA-256 —
 *      another node that wrote the same bytes, review 50 F2), with no
 *      failed file, no writer, no lost mark and no backup; the sweep then
 *      queues its manifest. It was complete all along and is now proven
 *      so; hiding it further would hide a complete save. A save with a
 *      chunk no node ever uploads stays held for a decision.
 *
 * Calls return 0 or a negative errno (pgns.h's). */
#ifndef CKPTFS_PGGEN_H
#define CKPTFS_PGGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "generation.h"
#include "pgns.h"

extern const struct pg_stmt pggen_stmts[];
extern const size_t pggen_nstmts;

/* A new directory or file name under parent that is the root of a new OPEN
 * generation of series parent (spec: its name and step), opened by this node. */
int pggen_create_root(struct pgns *ns, uint64_t parent, const struct cat_gen_spec *spec,
		      uint32_t mode, uint32_t uid, uint32_t gid, struct cat_inode *out,
		      uint64_t *gen_id);

/* This node opens ino for writing (open = true) or closed its last writer
 * (false). *gen_state (if not NULL) gets the state of ino's generation
 * (-1 for none): on an open, a COMMITTED one is the caller's to reopen; on a
 * close (read without a lock), a COMMITTED one the caller's keep-latest-k
 * may end now (fs/gen.h invariant 18). */
int pggen_writing(struct pgns *ns, uint64_t ino, bool open, int *gen_state);
/* pggen_writing, and *gen_id (if not NULL) gets ino's generation (0: none),
 * the one *gen_state is of. */
int pggen_writing_gen(struct pgns *ns, uint64_t ino, bool open, uint64_t *gen_id, int *gen_state);
/* X15: this node writes ino again through a handle it kept open after the
 * flush that dropped its row: the row back, ino's failed flag (X14) left as
 * it is (no open for writing, no retry). */
int pggen_writing_resume(struct pgns *ns, uint64_t ino);
/* X15: this node's flush of its only write handle of ino published it: its
 * ns_writing row goes and its ns_open row (added if none) is marked parked,
 * in one statement (-ENOENT: no such inode, nothing changed). The next
 * pggen_writing or pggen_writing_resume of ino by this node ends the mark. */
int pggen_writing_park(struct pgns *ns, uint64_t ino);
/* X15: this node's last close of ino could not end the parked mark of its
 * ns_open row (fs/ns.h invariant 15): the mark ends now, nothing else
 * changes (the row, any ns_writing row and the failed flag stay as they
 * are). *gen_id gets ino's generation (0: none), *gen_state its state (-1:
 * none): a COMMITTED one keep-latest-k may end now. -ESTALE when fenced. */
int pggen_writing_unpark(struct pgns *ns, uint64_t ino, uint64_t *gen_id, int *gen_state);
/* X14: a write or a last close of ino on this node failed: its failed flag
 * set (fenced: -ESTALE if this node is not live). */
int pggen_failed(struct pgns *ns, uint64_t ino);
/* X14 (generation.h G9): GEN_FAILED_REASON naming a file of generation id
 * whose write or last close failed, as one node says it; "" if none. */
int pggen_unsettled(struct pgns *ns, uint64_t id, char *reason, size_t size);

/* OPEN → COMMITTED with rule (X1); HELD too when it is a decision (an admin's
 * commit), never by a rule. -EBUSY with *writers set while files of it are
 * open for writing on any node not yet handled by X2; -ENOTRECOVERABLE,
 * nothing changed, if a file of it failed and rule is no explicit decision
 * ("explicit", "admin": X14); -ENODATA if it is
 * lost (a rewrite of a lost one: if its new tree is, X6); -EINVAL in
 * another state. */
int pggen_commit(struct pgns *ns, uint64_t id, const char *rule, bool decision, uint64_t *writers);
/* pggen_commit, and *version (if not NULL) gets the version it committed
 * (0 on failure): the committing node queues that version's manifest
 * without asking again (X9). */
int pggen_commit_at(struct pgns *ns, uint64_t id, const char *rule, bool decision,
		    uint64_t *writers, uint32_t *version);

/* OPEN → HELD with rule and reason, to which the files of it still open
 * for writing are added, naming their nodes (up to 8, as much as
 * GEN_HELD_MAX holds). -EALREADY if HELD. */
int pggen_hold(struct pgns *ns, uint64_t id, const char *rule, const char *reason);
/* As cat_gen_hold: pggen_hold, except that a new version (a rewrite, with a
 * backup) is rolled back to its previous version instead (*held false; ids,
 * if not NULL, gets the inodes of the dropped version). */
int pggen_hold_ids(struct pgns *ns, uint64_t id, const char *rule, const char *reason,
		   struct cat_id_vec *ids, bool *held);
/* As cat_gen_reopen (a lost one too, X6): COMMITTED or HELD → OPEN as version+1, with a backup
 * copy of its tree (sharing chunks: their counts go up, no bytes copied).
 * Committing the new version drops the backup; aborting it, holding it, or
 * its writer's node lost (X2) puts the backup back under the name. */
int pggen_reopen(struct pgns *ns, uint64_t id);

/* X16 (generation.h G12 on this engine): the COMMITTED saves naming chunk
 * hash, which this node found lost before its upload, HELD with rule
 * GEN_LOST_CHUNK_RULE and a reason naming the chunk, one file of each and
 * this node, up to cap of them in one fenced transaction (their rows
 * locked); hits[0..*n) get them. None if BACKING has the chunk or another
 * live node holds it. Call again while *n == cap. */
struct pggen_lost_hit {
	uint64_t id, ino;
	char name[CAT_NAME_MAX + 1];
};
int pggen_hold_lost_chunk(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN],
			  struct pggen_lost_hit *hits, size_t cap, size_t *n);

/* X17: the G12 reason (gen_lost_chunk_reason, naming this node) for a
 * file of generation id naming one of hashes[0..n), chunks this node found
 * lost before their upload (upload.h U14), as X16 judges them lost; ""
 * if none. One statement. */
int pggen_lost_chunk_of(struct pgns *ns, uint64_t id, const uint8_t (*hashes)[CAT_HASH_LEN],
			size_t n, char *reason, size_t size);

/* X18: up to max saves held by rule lost-chunk whose every chunk is on
 * BACKING now committed again (rule GEN_WHOLE_AGAIN_RULE), one info line
 * each; *n of them. One fenced transaction. */
int pggen_lost_chunk_whole(struct pgns *ns, size_t max, size_t *n);

/* This node holds the bytes of hashes[0..n) in its cache: it takes over
 * holding those of them that node dead held and had not uploaded (X2);
 * dead 0: those whose holder is no live node, whoever it was (X10). */
int pggen_adopt(struct pgns *ns, uint64_t dead, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		size_t *adopted);

/* X2 for node dead (expired by lease_sweep, not settled: lease.h L7): ids
 * of the generations held and of those lost, up to max each. A node
 * settled already (by another node, or a first run whose reply was lost)
 * is left alone: 0, nothing held or lost. */
int pggen_node_lost(struct pgns *ns, uint64_t dead, uint64_t *held, size_t max_held,
		    size_t *n_held, uint64_t *lost, size_t max_lost, size_t *n_lost);

/* X10: up to max lost generations after id *after re-checked, fenced by this
 * node's lease (lease.h L5); *cleared of them lost no more. *after moves on
 * (0 again once the last was looked at): call again for the next batch. */
int pggen_lost_recheck(struct pgns *ns, uint64_t *after, size_t max, size_t *checked,
		       size_t *cleared);

/* X10: up to max chunks, by hash after `after` (NULL: from the start), that
 * lost generations name, not on BACKING, whose holder is no live node. */
int pggen_orphans(struct pgns *ns, const uint8_t *after, uint8_t (*hashes)[CAT_HASH_LEN],
		  size_t max, size_t *n);

/* The reason X5 shows for a lost COMMITTED generation. */
#define PGGEN_LOST_REASON                                                             \
	"lost: chunks of it that only a node since lost had were not on BACKING; its" \
	" files cannot be read back whole"

/* One generation (no sizes: files/logical_bytes/exclusive_bytes are 0), its
 * row as stored (X5 not applied; lost re-checked, X10). */
int pggen_get(struct pgns *ns, uint64_t id, struct cat_gen *out, bool *lost);

/* The generations of series that a trainer may see: OPEN and COMMITTED, not
 * lost, by step. */
int pggen_list(struct pgns *ns, uint64_t series, cat_gen_fn fn, void *arg);

/* ---- generation.h's calls over PostgreSQL (meta/catalog_shared_gen.c) ----
 * Same contracts as generation.h's (G1–G3, G5 hold in ns_generations),
 * except that exclusive_bytes is never computed (0). Each change is one
 * transaction, fenced (X3). */

/* The generation of ino (0 for none, -ENOENT for no inode). */
int pggen_gen_of(struct pgns *ns, uint64_t ino, uint64_t *gen_id);

/* cat_rename_gen: pgns_rename and the generation bookkeeping in one
 * transaction (the moved subtree takes its new parent's generation, a root
 * moved away or renamed over ends its generation, DELETED with rule
 * "renamed" or "replaced"; spec makes the moved inode a new OPEN root).
 * *moved_ino: the inode newname names in that transaction, under the
 * directories' row locks (pgns.h), so never another node's file renamed
 * onto the name after it (generation.h cat_rename_gen). */
int pggen_rename(struct pgns *ns, uint64_t parent, const char *name, uint64_t newparent,
		 const char *newname, unsigned flags, const struct cat_gen_spec *spec,
		 uint64_t *replaced_ino, uint64_t *new_gen_id, uint64_t *moved_ino);

/* cat_unlink (dir false) and cat_rmdir (true): pgns_unlink or pgns_rmdir and
 * the generation bookkeeping in one transaction (X8): a generation rooted at
 * the removed inode ends, DELETED with rule "trainer", as on one node. */
int pggen_remove(struct pgns *ns, uint64_t parent, const char *name, bool dir, uint64_t *ino_out);

/* X7: whether a live node other than this one takes part in generation id
 * (has a file of it open for writing, or opened it: its policy decides it). */
int pggen_others(struct pgns *ns, uint64_t id, bool *others);

/* One generation with files and logical_bytes (X5 applied, as below). */
int pggen_get_sized(struct pgns *ns, uint64_t id, struct cat_gen *out);
/* As cat_gen_find (a lost one too: it still has its tree under its name)
 * and cat_gen_find_step (not a lost one). No sizes. */
int pggen_find(struct pgns *ns, uint64_t series, const char *name, struct cat_gen *out);
int pggen_find_step(struct pgns *ns, uint64_t series, uint64_t step, struct cat_gen *out);
/* As cat_gen_list (series 0: all series), sized; without all, only OPEN,
 * HELD and COMMITTED ones (a lost COMMITTED one as HELD with lost set, X5:
 * keep-latest-k ends it as a held one, once K newer are committed and one
 * of them is durable, X13). */
int pggen_list_all(struct pgns *ns, uint64_t series, bool all, cat_gen_fn fn, void *arg);

/* cat_gen_abort (OPEN → ABORTED), cat_gen_delete (OPEN, COMMITTED or HELD
 * → DELETED) and cat_gen_expire (cat_gen_delete deciding in the same
 * transaction: still COMMITTED or HELD and unpinned, else -EBUSY). The tree
 * is unlinked from its series and its inodes get nlink 0 (ids gets them, if
 * not NULL, for the caller to release). */
enum pggen_end { PGGEN_ABORT, PGGEN_DELETE, PGGEN_EXPIRE };
int pggen_end(struct pgns *ns, uint64_t id, enum pggen_end how, const char *rule,
	      struct cat_id_vec *ids);
/* PGGEN_EXPIRE for keep-latest-k (generation.h G6): also -EBUSY unless, in
 * the same transaction, `keep` newer COMMITTED saves of the series whose
 * roots have its root's owner exist, not lost as X10 re-checks, one of
 * them durable if it is (COMMITTED, not lost, durable_version = version;
 * or HELD with its manifest on BACKING: a rebuild's conflict, generation.h
 * G6) or if it is a lost COMMITTED one (X13);
 * they are locked FOR SHARE, so a lost mark, removal, reopen or rewrite
 * racing it is seen. pggen_end's PGGEN_EXPIRE is this with keep 0. */
int pggen_expire(struct pgns *ns, uint64_t id, uint32_t keep, const char *rule,
		 struct cat_id_vec *ids);

int pggen_pin(struct pgns *ns, uint64_t id, bool pinned);

/* G1, G2 and G5 of generation.h on the shared tables; adds the number of
 * violations (each logged) to *violations. */
int pggen_check(struct pgns *ns, int *violations);

/* ---- durability: a generation's manifest from the shared tree
 * (meta/manifest_shared.c, docs/MULTINODE.md "Durability") ---- */

/* Whether generation id's manifest at version can be written: *stale if it
 * is no longer COMMITTED at exactly that version (or lost, or gone), else
 * *ready once every chunk its files name is on BACKING (ns_chunks.uploaded,
 * whichever node put it there). */
int pggen_durable_state(struct pgns *ns, uint64_t id, uint32_t version, bool *ready, bool *stale);
/* As cat_gen_upload_bytes: the stored bytes of the distinct chunks the
 * inodes of generation id name, and of those not on BACKING yet
 * (ns_chunks.uploaded, whichever node holds them). One statement. */
int pggen_upload_bytes(struct pgns *ns, uint64_t id, uint64_t *total, uint64_t *left);
/* The manifest of id at version is on BACKING (no-op if it changed since). */
int pggen_durable_set(struct pgns *ns, uint64_t id, uint32_t version);
/* id 0: how many generations are OPEN, or COMMITTED without a manifest of
 * their version on BACKING (lost ones left out). Else 0 if id is COMMITTED,
 * not lost, with its version's manifest on BACKING (durable), and 1
 * otherwise (OPEN, HELD, ended, lost or absent: not durable). */
int pggen_not_durable(struct pgns *ns, uint64_t id, uint64_t *count);
/* Up to max COMMITTED generations, not lost, whose manifest of their
 * version is not on BACKING yet, by id. */
int pggen_undurable(struct pgns *ns, uint64_t *ids, uint32_t *versions, size_t max, size_t *n);
/* A generation's rows, read in one transaction with its row FOR SHARE:
 * gen (series, root, name, step, state, version, pinned, created_ns,
 * committed_ns, rule, lost), path (name, parent: the series' components
 * from the mount root down), then its tree as manifest.c walks it, in
 * manifest order: inodes (ino, mode, uid, gid, size, rdev, atime_ns,
 * mtime_ns, ctime_ns, target; the root first), entries (parent, ino,
 * name), chunks (hex hash, plain_len, codec, stored_len; by hash), extents
 * (ino, off, len, chunk_off, hex hash). -ENOENT: no such generation. */
struct pggen_tree {
	PGresult *gen, *path, *inodes, *entries, *chunks, *extents;
};
int pggen_tree_read(struct pgns *ns, uint64_t id, struct pggen_tree *out);
void pggen_tree_clear(struct pggen_tree *t);

/* The path of directory ino from the mount root ("/", "/run1/ckpt"), as
 * manifest_shared.c names a series; -ENOENT if it is not linked there. */
int pggen_path(struct pgns *ns, uint64_t ino, char *buf, size_t size);

/* ---- rebuild --meta (manifest_shared.c's manifest_shared_apply) ---- */

/* What a shared catalog holds besides its root: inodes, generations, chunks
 * (all 0: empty, fit for a rebuild). */
int pggen_rebuild_counts(struct pgns *ns, uint64_t *inodes, uint64_t *gens, uint64_t *chunks);
/* The shared catalog's id becomes id (the one BACKING's claim names). */
int pggen_rebuild_catalog_id(struct pgns *ns, const char *id);
/* Generation ids up to id are never handed out (rebuild.c invariant 6: the
 * ids of manifests the rebuild left out); the sequence is never lowered. */
int pggen_rebuild_reserve_ids(struct pgns *ns, uint64_t id);
/* A parsed manifest (manifest.h) into the shared tables, in one fenced
 * transaction, as manifest_apply_parsed does for SQLite: a generation's
 * series directories made as needed (mkdir -p, 0755, its root's owner),
 * its tree linked as series/name, its row inserted with the same id,
 * COMMITTED and durable at its version; a series component that exists as
 * something other than a directory outside generations is -EEXIST (as
 * manifest.c's); a tree manifest's root merged into
 * inode 1. Chunks are inserted uploaded (or counted up if present), with the
 * references the manifest's extents add (N1). -EEXIST with err for a name
 * or id taken. */
struct manifest;
int pggen_apply_manifest(struct pgns *ns, const struct manifest *m, char *err, size_t errsz);
/* manifest.h M4 over the shared tables: generation manifest m as above, but
 * its root linked as "<name>.rebuild-<id>" (manifest_held_name; a series
 * component that exists as something other than a directory outside
 * generations likewise), its row HELD with reason and rule "rebuild",
 * durable at its version; its chunks counted as above. where (if not NULL)
 * gets the path it is linked at ("" if not applied). -EINVAL for a tree
 * manifest or a bad reason, -EEXIST if its id or renamed path is taken too. */
int pggen_apply_manifest_held(struct pgns *ns, const struct manifest *m, const char *reason,
			      char *where, size_t wheresz, char *err, size_t errsz);

/* ---- the tree outside generations (meta/manifest_shared.c's tree
 * manifest, docs/MULTINODE.md "Durability") ---- */

/* A fingerprint of the inodes of no generation, as upload.c's
 * cat_tree_fingerprint computes it alone (count, newest ctime, a sum of
 * ctimes, sizes): a change of a name, an attribute or a file's contents
 * outside generations changes it. */
struct pggen_outside_fp {
	char text[128];
	bool all_uploaded; /* no file of them names a chunk not on BACKING */
	int64_t now_ns;    /* the server's clock (one clock for every node) */
};
/* The fingerprint alone: one statement. */
int pggen_outside_fp(struct pgns *ns, struct pggen_outside_fp *fp);
/* The fingerprint and, if fp->all_uploaded, the tree outside generations
 * (inodes, entries, chunks, extents of pggen_tree, in manifest order; gen
 * and path NULL), in one REPEATABLE READ transaction: one snapshot. */
int pggen_outside_read(struct pgns *ns, struct pggen_outside_fp *fp, struct pggen_tree *out);

#endif
