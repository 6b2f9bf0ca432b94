/* generation — checkpoint generations in the catalog (schema version 2).
 * Every call here is an [engine] call of catalog.h's contract: one
 * transaction each, with the namespace rows it touches.
 *
 * A generation is a directory or a single file whose name carries a step
 * (step-100, checkpoint-500, iter_0000100, epoch=1-step=30.ckpt…), created or
 * renamed into a directory that is not itself inside a generation: its series.
 * Every inode under a generation's root carries the generation's id
 * (inodes.gen); inodes outside generations have gen NULL.
 *
 *          create / rename-in           commit (a trainer's completion signal)
 *   (none) ─────────────────▶ OPEN ──────────────────────────────▶ COMMITTED
 *                            │ │ ▲  hold (crash, abandoned,           ▲ │ write into it
 *            admin abort     │ ▼ │  unfinished at unmount)   commit   │ ▼
 *          ABORTED ◀─────────┘ HELD ──────────────────────────────────┘ delete (keep-k,
 *                               │ write into it: OPEN again (version+1)   trainer, admin)
 *                               └─ delete (admin rm, keep-k once K newer committed) → DELETED
 *
 * HELD is what could not be proven complete: kept byte for byte, linked
 * under its name like an OPEN one (hidden from listings by the daemon), with
 * the reason in `held`. Nothing but an explicit decision ends it: a commit,
 * an admin rm, or keep-latest-k once K newer generations of its series are
 * committed.
 *
 * Writing into a COMMITTED generation makes it OPEN again as version+1, after
 * a backup copy of its committed tree (sharing chunks, no bytes copied) is
 * kept aside; committing the new version drops the backup, aborting it (or a
 * crash) puts the backup back under the same name. So a crash never shows a
 * mix of two versions; and the new version, unless an explicit decision
 * dropped it, is kept HELD beside it (G10).
 *
 * Invariants (cat_gen_check verifies them):
 *  G1. Every OPEN, HELD or COMMITTED generation has exactly one root, linked under its
 *      series with its name; every inode reachable from the root has
 *      inodes.gen = its id, and no other inode does.
 *  G2. ABORTED and DELETED generations own no inode (their rows stay, for
 *      listing with --all).
 *  G3. A backup tree (backup_root != 0) exists only for an OPEN generation of
 *      version > 1; its inodes have gen = the generation's id too but are not
 *      reachable from the namespace.
 *  G4. After cat_open, no generation is OPEN: each was held (a crash proves
 *      nothing about it: its files are kept as their last recorded close left
 *      them), or, as a new version, had its backup restored (COMMITTED or
 *      HELD). Held with GEN_CRASH_REASON, the daemon may still prove it
 *      complete by content (fs/gen.c); held for G7, never by content.
 *  G5. A HELD generation has a non-empty reason; no other state has one,
 *      except an OPEN new version whose backup was HELD.
 *  G6. (kept by cat_gen_expire, not a state cat_gen_check sees) An expire
 *      for keep-latest-k deletes a save only if, in its own transaction, at
 *      least `keep` newer COMMITTED (not lost: pggen.h X5) saves of the same
 *      series whose roots have the same owner (uid) exist: newer by step,
 *      then commit time, then id, as fs/gen.c ranks them; for a HELD one (or
 *      a lost one shown as HELD) by a larger step only. A listing gone stale
 *      (a newer save lost, removed or rolled back since) never deletes more.
 *      A save that is durable (COMMITTED, not lost, durable_version =
 *      version: upload.h U3; or HELD with its manifest on BACKING, a
 *      rebuild's conflict: manifest.h M4, durable_version = version) goes
 *      only if one of those newer saves is
 *      durable too, in that transaction: the owner's newest durable save
 *      stays while the newer ones are only in the cache, whatever a rewrite
 *      (v+1 not durable) or an upload did since the listing. So does a
 *      COMMITTED save that is lost (pggen.h X13: only on the shared engine;
 *      one node has no lost saves), although it is expired as a HELD one. A
 *      refused one goes in the pass that a newer save's durability runs
 *      (fs/gen.h 3). A newer save counts only if a strong rule committed
 *      it: one committed by a weak rule without proof (rule `unmount` or
 *      `next-gen`, GEN_RULES_WEAK_SQL; with proof they record `content`)
 *      never makes an older save go, though it goes itself once `keep`
 *      counted newer saves exist (review 42 F1: a wrong weak guess costs
 *      space, never a save). Nor does a COMMITTED save go while it is the
 *      most recently committed save (commit time, then id) of its owner in
 *      the series, whatever its step (review 42 F3: a resume from an
 *      earlier step keeps the trainer's newest save). A version kept beside
 *      its step's save (G10) and committed by the admin never counts as
 *      newer than another save of its step (review 46 F6: committing it
 *      decides about it, not against the restored one).
 *  G7. A file whose last close may not be recorded is marked in the catalog
 *      (inodes.writing, schema 6), so that any prefix of the catalog's
 *      commits — what a kill -9 or a power loss leaves — shows it. A file
 *      created in a generation is marked by its create (the inode's own
 *      INSERT); a writer that starts on a file of an OPEN generation marks
 *      it in its first change (cat_pending_from_committed), before any row
 *      of its data, and so does a cut without a writer (cat_file_truncate:
 *      an O_TRUNC open). The release of its last handle, after the last close's
 *      commit succeeded, clears it (cat_file_unmark, or with a writer
 *      cat_pending_drop_unmark: in the same change as the drop of its
 *      pending rows), later in the same ordered stream of transactions
 *      than that commit. A lost
 *      deferred transaction (catalog_defer.c D4) marks the root of each
 *      OPEN generation it held changes of (2: lost), in a transaction of its
 *      own. G4 holds an OPEN generation with a marked inode in its tree with
 *      GEN_UNCLOSED_REASON or GEN_LOST_REASON (the file named): kept for an
 *      explicit decision, never proven by content. No fsync is added: the
 *      mark rides the create's row and the writer's first change, the clear
 *      rides the writer's drop at the last release (one statement), or is
 *      one deferred change of its own for a file written without a writer.
 *      After recovery no inode is marked (no writer survives an open).
 *  G8. (kept by cat_rename_gen, one node: cat_gen_moved_txn; -o meta=: pggen.c)
 *      A rename never ends a rewrite: moving the root of an OPEN generation
 *      that has a backup (G3) — renamed, exchanged, or carried with its
 *      series into another generation — is refused with -EBUSY and one log
 *      line, as ending it would drop the backup, the only copy of the
 *      committed version (and, to a generation name, commit the half-written
 *      one by rule "rename"). A HELD root renamed to a generation name is the
 *      same generation under it: same id, state, version and reason; any
 *      other move of a HELD root (an exchange, a name that is no generation
 *      name, carried with its series into a generation) is refused with
 *      -EBUSY and a line, since it would show files never proven complete
 *      as plain ones (ckptfs-admin commit or rm decides first; on -o meta=
 *      so is any move of a save lost with its node, pggen.h X2). Only a
 *      tree in no generation, or an OPEN first version (a temp dir that
 *      matched a name pattern), starts a new generation by a rename, which
 *      rule "rename" commits (fs/gen.c); a COMMITTED root starts one too
 *      (committed again at once). To any other name, a root leaves
 *      generations (rule "renamed"): its files stay, as plain ones.
 *  G9. A save with a file marked being written (G7) while no handle of it
 *      is open for writing — its last close failed (ENOSPC, EIO: the
 *      release keeps the mark, fs/ns.c) and the file is as of its last
 *      successful close or fsync — or whose changes were lost (D4: the
 *      root's mark, or this run's memory of it) is committed only by an
 *      explicit decision (rule "explicit" or "admin"). Every commit passes
 *      gen_commit_txn, which refuses any other rule (a marker, tracker,
 *      metadata, next-gen, content, unmount) with -ENOTRECOVERABLE, in the
 *      commit's own transaction; fs/gen.c then holds the save with the
 *      reason cat_gen_unsettled gives (GEN_FAILED_REASON naming the file,
 *      or GEN_LOST_REASON). The caller rules out open write handles first
 *      (fs/gen.c gen_commit_blocked), so a mark it sees is no live
 *      writer's. A later successful close of that file (a retried write)
 *      clears the mark; so does its removal (the inode leaves the save).
 *      Both engines: on -o meta= the mark is ns_inodes.failed, set by the
 *      failed close before its ns_writing row goes, checked by pggen's
 *      commit in its transaction and outliving a lost node (pggen.h X14).
 *  G10. A new version rolled back without an explicit decision — a crash
 *      (G4), a hold (the unmount's, abandon: cat_gen_hold), a node lost
 *      mid-rewrite on -o meta= (pggen.h X2) — is never deleted if it holds
 *      bytes of its own (a chunk that no file of the version it replaced
 *      names; one that only removed, truncated or renamed files — an rm -rf
 *      of a committed save cut short — holds no byte value the replaced
 *      version lacks and is removed as before; so is one that only wrote
 *      bytes some file of that version already holds, swapped or
 *      duplicated chunks: its layout is lost, no byte value is (review 46
 *      F4, by design)): its tree,
 *      as its last recorded closes left it, becomes a generation of its
 *      own (a new id), HELD, in the same series with the same step, linked
 *      as "<name>" GEN_REWRITE_SUFFIX "<its id>" (cat_gen_suffixed_name:
 *      the name cut short to fit), with a reason naming the version it was
 *      and why it was rolled back (cat_gen_rewrite_reason), while the
 *      version it replaced is back at the name (G3). So fsync'd bytes of a
 *      rewrite never go without a decision (review 42 F4): `ckptfs-admin
 *      commit` makes it a committed save under its own name, `rm` drops it,
 *      keep-latest-k expires it as any HELD one. Only an explicit abort
 *      (ckptfs-admin rm --force, admin-abort) drops a new version's tree.
 *      Both engines; the rollback and the kept row commit in one
 *      transaction. A name taken already (a user's file of that name, a
 *      save of an older catalog after a rebuild) gives way to the next of
 *      cat_gen_kept_name's (review 46 F2: a planted name must not block
 *      the rollback, nor the mount). A tracker naming its step never
 *      commits it: the lookup by step prefers the step's own save
 *      (G_FIND_STEP, both engines) and fs/gen.c refuses a kept one (review
 *      46 F1).
 *  G11. (kept by cat_gen_expire_if, one node; -o meta=: pggen.h X12, with
 *      the handles parked at a flush, X15) An
 *      expire for keep-latest-k never deletes a COMMITTED save while a file
 *      of it (an inode whose gen is its id, read in the expire's
 *      transaction: a directory a create is registered on too) has a write
 *      handle open in the daemon: such a handle may still write, and its
 *      first change reopens the save as version+1 (fs/gen.h invariant 8),
 *      which an unlinked tree would take into a file nothing names
 *      (review 42 F5). -ETXTBSY, nothing changed; the daemon runs keep
 *      again when that save's last write handle closes (fs/gen.c
 *      gen_writer_closed). The handles are the daemon's (fs/node.c
 *      node_writing), asked inside the transaction under the catalog lock.
 *      An open for writing counts its handle first and reads the catalog
 *      after (fs/ns.c ns_writer_enter): either this check sees the handle,
 *      or that read comes after the expire's commit, finds the file gone
 *      from its save with no link left, and the open fails -ENOENT before
 *      any change. A HELD save goes as before (as X12): its files are what
 *      its hold names. An open for reading never keeps a save: it reads
 *      the removed file's bytes until its close (fs/node.h invariant 1).
 *  G12. (kept by cat_gen_hold_lost_chunk; -o meta=: pggen.h X16) A COMMITTED save that
 *      names a chunk lost before its upload (upload.h U7: its cache copy
 *      damaged or missing, BACKING without it) can never become durable:
 *      it is HELD (rule "lost-chunk", the reason naming the chunk and one
 *      file) in the transaction after the uploader finds it (one that
 *      fails is run again until it succeeds: fs/uploader.h B5), so keep-latest-k
 *      never counts it among the K newer saves (G6 counts COMMITTED ones)
 *      and `ckptfs-admin wait` names it as held. On one node it stays HELD
 *      even if the chunk later turns whole again (a later save writes the
 *      same bytes, or BACKING turns out to have it): only an explicit
 *      decision (ckptfs-admin commit or rm) or keep (G6, as any HELD save)
 *      ends it. On -o meta= another node may hold a good copy of the same
 *      bytes: once every chunk of the save is on BACKING the sweep commits
 *      it again (pggen.h X18, rule GEN_WHOLE_AGAIN_RULE).
 *  G13. (kept by the commit's transaction; -o meta=: catalog_shared_gen.c
 *      S9) A save still OPEN when a chunk its files name is found lost is
 *      never committed naming it: while the chunk's upload row says lost
 *      (upload.h U14), every commit but the admin's decision (rule
 *      "admin"), the trainer's commit xattr ("explicit") included, is
 *      refused with -ENOTRECOVERABLE in its transaction, as G9's, and
 *      cat_gen_unsettled gives the G12 reason naming the chunk and the
 *      file; fs/gen.c then holds it with rule "lost-chunk" (fs/gen.h
 *      invariant 16). A crash recovery (G4) holds it with that reason too.
 *
 * Calls follow catalog.h's rules: one transaction each, 0 or a negative errno. */
#ifndef CKPTFS_GENERATION_H
#define CKPTFS_GENERATION_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"

enum cat_gen_state {
	GEN_OPEN = 0,
	GEN_COMMITTED = 1,
	GEN_ABORTED = 2,
	GEN_DELETED = 3,
	GEN_HELD = 4,
};

#define GEN_HELD_MAX 256 /* the reason a generation is held, with its NUL */
/* The reason G4 gives a generation open at a crash (a prefix of it): only
 * such a one may be proven complete by content afterwards (fs/gen.c). */
#define GEN_CRASH_REASON "open when the daemon stopped"
/* G7: the reasons G4 gives one that content must not prove (prefixes). */
#define GEN_UNCLOSED_REASON "a file was being written when the daemon stopped"
#define GEN_LOST_REASON "changes made in it were lost"
/* G9: the reason a save is held whose file failed its last close (a prefix) */
#define GEN_FAILED_REASON "the last close of a file of it failed"

/* G10: a rolled-back new version is kept as "<name>" GEN_REWRITE_SUFFIX "<id>" */
#define GEN_REWRITE_SUFFIX ".rewrite-"

#define GEN_RULE_MAX 32
/* G6: the rules that commit without proof (fs/gen.h 5): their saves never
 * count among the `keep` newer ones */
#define GEN_RULES_WEAK_SQL "('unmount', 'next-gen')"
static inline bool cat_gen_rule_weak(const char *rule)
{
	return __builtin_strcmp(rule, "unmount") == 0 || __builtin_strcmp(rule, "next-gen") == 0;
}

/* G10: is name a rolled-back version kept beside its step's save? */
static inline bool cat_gen_is_kept_name(const char *name)
{
	return __builtin_strstr(name, GEN_REWRITE_SUFFIX) != NULL;
}

/* The rule suffix of a version a rollback brought back ("crash-restored") */
#define GEN_RESTORED_SUFFIX "-restored"
static inline bool cat_gen_rule_restored(const char *rule)
{
	size_t n = __builtin_strlen(rule), s = sizeof(GEN_RESTORED_SUFFIX) - 1;
	return n >= s && __builtin_strcmp(rule + n - s, GEN_RESTORED_SUFFIX) == 0;
}

/* "open", "committed", "aborted", "deleted", "held"; "?" for anything else. */
const char *cat_gen_state_name(int state);

struct cat_gen {
	uint64_t id;
	uint64_t series;      /* directory inode holding the root */
	uint64_t root;        /* root inode (0 once aborted/deleted) */
	char name[CAT_NAME_MAX + 1];
	uint64_t step;
	int state;            /* enum cat_gen_state */
	uint32_t version;     /* 1, then +1 per rewrite of a committed generation */
	bool pinned;
	int64_t created_ns, committed_ns, ended_ns; /* 0 when not (yet) */
	char rule[GEN_RULE_MAX]; /* what committed or ended it: "dcp-metadata", "keep", … */
	uint64_t backup_root; /* G3 */
	/* HELD: why. OPEN with a backup: the backup was HELD (an abort puts back
	 * HELD, not COMMITTED). "" otherwise. */
	char held[GEN_HELD_MAX];
	/* shared engine only (pggen.h X5, X13): a COMMITTED save lost only
	 * because its node is away, shown HELD (state, rule and held as X5 sets
	 * them); keep-held ends it only against a durable newer save. false on
	 * one node (it has no lost saves) and for a truly HELD one. */
	bool lost;
	/* computed by cat_gen_get/cat_gen_list */
	uint64_t files;
	uint64_t logical_bytes;   /* sum of its regular files' sizes */
	uint64_t exclusive_bytes; /* plain bytes of chunks referenced only by this generation */
};

/* Names a generation at creation or rename: its name and step. */
struct cat_gen_spec {
	const char *name;
	uint64_t step;
};

/* cat_create in a directory, with one addition: if gen is non-NULL the new
 * inode becomes the root of a new OPEN generation (series = parent) in the same
 * transaction; if gen is NULL the new inode inherits the parent's gen. Sets
 * *gen_id to the inode's generation (0 for none). */
int cat_create_in_gen(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
		      uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		      const struct cat_gen_spec *gen, struct cat_inode *out, uint64_t *gen_id);

/* cat_rename, plus generation bookkeeping in the same transaction:
 *  - the moved subtree takes the gen of its new parent (0 outside generations);
 *  - if gen is non-NULL (the new name makes it a generation root in a series),
 *    it becomes a new OPEN generation instead, *new_gen_id set — unless it is
 *    the root of a HELD one, which stays that generation under the new name
 *    (G8; *new_gen_id 0);
 *  - a generation root moved to a name or place where it is no longer a root
 *    ends that generation (DELETED, rule "renamed") and its subtree takes the
 *    gen of its new place;
 *  - -EBUSY (nothing changed) if the root of a rewrite (OPEN with a backup)
 *    would move, itself or inside a moved series, or a HELD root would move
 *    other than by a rename to a generation name (G8);
 *  - a generation root renamed over by another one: the replaced generation is
 *    DELETED (rule "replaced").
 * *replaced_ino as in cat_rename. *moved_ino (may be NULL): the inode this
 * rename moved, the one newname names when its transaction commits (for an
 * exchange: the one that was at name; for a rename onto its own inode: that
 * inode), read in that transaction — a caller that needs it never looks
 * newname up again: on -o meta= another node may rename another file onto
 * it in between (fs/gen.h invariant 12). 0 on failure. */
int cat_rename_gen(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
		   const char *newname, unsigned flags, const struct cat_gen_spec *gen,
		   uint64_t *replaced_ino, uint64_t *new_gen_id, uint64_t *moved_ino);

/* The generation an inode belongs to (0 for none). */
int cat_gen_of(struct cat *cat, uint64_t ino, uint64_t *gen_id);

int cat_gen_get(struct cat *cat, uint64_t id, struct cat_gen *out);
/* By series and name, among OPEN, HELD and COMMITTED ones. -ENOENT if none. */
int cat_gen_find(struct cat *cat, uint64_t series, const char *name, struct cat_gen *out);
/* OPEN, HELD or COMMITTED generation of a series with this step (the newest if several). */
int cat_gen_find_step(struct cat *cat, uint64_t series, uint64_t step, struct cat_gen *out);

/* Lists generations: of one series (series != 0) or all; with all == false
 * only OPEN and COMMITTED. Ordered by series, step, id. The callback may call
 * back into the catalog (rows are fetched first). Non-zero stops. all ==
 * false lists OPEN, HELD and COMMITTED ones (those with a tree). */
typedef int (*cat_gen_fn)(void *arg, const struct cat_gen *gen);
int cat_gen_list(struct cat *cat, uint64_t series, bool all, cat_gen_fn fn, void *arg);

/* cat_gen_get and cat_gen_list with exclusive_bytes left 0: files and
 * logical_bytes are an index range, exclusive_bytes costs a chunk lookup
 * per extent of the generation (every chunk it names) under the catalog
 * lock. For hot paths (FUSE callbacks, keep-k after each commit). */
int cat_gen_get_brief(struct cat *cat, uint64_t id, struct cat_gen *out);
int cat_gen_list_brief(struct cat *cat, uint64_t series, bool all, cat_gen_fn fn, void *arg);

typedef void (*cat_ino_fn)(void *arg, uint64_t ino);

/* OPEN or HELD → COMMITTED with the rule; drops the backup tree of a new
 * version and the held reason. A rule other than "explicit" or "admin" is
 * refused with -ENOTRECOVERABLE, nothing changed, while a file of the save
 * is marked being written or its changes were lost (G9: cat_gen_unsettled
 * says which); an explicit one is refused with -EIO only for changes lost
 * in this run (catalog_defer.c D4). Durable on return (catalog.c invariant 10);
 * a WAL sync that fails after the commit is logged ("committed, but not yet
 * durable") and answers 0: the generation is committed, and the catalog's
 * next sync makes it durable. */
int cat_gen_commit(struct cat *cat, uint64_t id, const char *rule);
/* cat_gen_commit, but first, inside its transaction (under the catalog
 * lock, so no change of the catalog comes between), unchanged(arg) is
 * asked: false answers -EAGAIN and commits nothing (fs/gen.h invariant 7:
 * the generation changed since the caller synced its objects). The shared
 * engine asks it just before its transaction. */
typedef bool (*cat_gen_unchanged_fn)(void *arg);
int cat_gen_commit_if(struct cat *cat, uint64_t id, const char *rule,
		      cat_gen_unchanged_fn unchanged, void *arg);

/* G9: why a commit by a rule other than an explicit decision is refused
 * (-ENOTRECOVERABLE) for generation id: GEN_FAILED_REASON naming the file
 * (its name and inode) whose last close failed, or GEN_LOST_REASON; "" if
 * neither (reason has size bytes). Asked while no handle of the save is
 * open for writing (fs/gen.c), so a mark is a failed close, not a writer.
 * The shared engine names a file whose failed flag is set (pggen.h X14).
 * Else G13's: the G12 reason naming a chunk found lost before its upload
 * and a file of it naming it (on -o meta=, one this node's queue records
 * lost: catalog_shared_gen.c S9). */
int cat_gen_unsettled(struct cat *cat, uint64_t id, char *reason, size_t size);

/* OPEN → HELD with the rule (what held it: "abandoned", "unmount", …) and
 * the reason (truncated to GEN_HELD_MAX - 1 bytes): its tree stays, byte for
 * byte. A new version (with a backup) is rolled back instead (its backup
 * restored, COMMITTED or HELD as it was: the previous version is what was
 * proven; rule "<rule>-restored") and kept HELD beside it under a name of
 * its own (G10; rule `rule`, logged at warn with its name); *held_out
 * tells which happened (may be NULL). fn gets the inodes dropped (none
 * since G10: kept for its signature). -EALREADY if already HELD. */
int cat_gen_hold(struct cat *cat, uint64_t id, const char *rule, const char *reason,
		 cat_ino_fn fn, void *arg, bool *held_out);

/* base with suffix and id appended ("step-100" ".rewrite-" 7 →
 * "step-100.rewrite-7"), base cut short so that the whole fits
 * CAT_NAME_MAX: the names G10 and manifest.h M4 keep a save under. */
void cat_gen_suffixed_name(const char *base, const char *suffix, uint64_t id,
			   char out[CAT_NAME_MAX + 1]);
/* G10: the name a rolled-back version with generation id `id` is kept
 * under: "<base>.rewrite-<id>", or, taken (a user's file of that name, a
 * save of an older catalog), "<base>.rewrite-<id>-2", -3, … up to
 * GEN_KEPT_NAME_TRIES; base cut short to fit. taken(arg, name) answers 1
 * (taken), 0 (free) or a negative errno, which is returned. -EEXIST if
 * every name is taken. */
#define GEN_KEPT_NAME_TRIES 1000
typedef int (*cat_name_taken_fn)(void *arg, const char *name);
int cat_gen_kept_name(const char *base, uint64_t id, cat_name_taken_fn taken, void *arg,
		      char out[CAT_NAME_MAX + 1]);
/* G10's reason for version `version` of `name`, rolled back for `why`
 * (cut to GEN_HELD_MAX - 1 bytes). */
void cat_gen_rewrite_reason(const char *name, uint32_t version, const char *why,
			    char out[GEN_HELD_MAX]);

/* G12: every COMMITTED save whose files name the chunk `hash` — lost
 * before its upload (fs/uploader.c up_lost, upload.h U7): its cache copy is
 * damaged or missing and BACKING does not have it — is HELD with rule
 * GEN_LOST_CHUNK_RULE and a reason naming the chunk and one file of it
 * (GEN_LOST_CHUNK_REASON …), one warn line each. Nothing is deleted. Returns
 * how many were held, or a negative errno. On the shared engine the same in
 * PostgreSQL, whichever node committed them (pggen.h X16: none while BACKING
 * has the chunk or another live node holds it). */
#define GEN_LOST_CHUNK_RULE "lost-chunk"
/* pggen.h X18: the rule of a lost-chunk hold ended because every chunk of
 * the save reached BACKING after all (shared engine) */
#define GEN_WHOLE_AGAIN_RULE "whole-again"
#define GEN_LOST_CHUNK_REASON "lost: chunk"
int cat_gen_hold_lost_chunk(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
/* G12, G13: the reason of a save held for the lost chunk hex (lowercase)
 * named by file name (inode ino), with the node that found it (NULL: one
 * node's catalog), into out of size bytes. */
void gen_lost_chunk_reason(const char *hex, const char *name, uint64_t ino, const char *node,
			   char *out, size_t size);

/* A HELD generation's reason replaced (truncated as cat_gen_hold's); its
 * state, rule and tree stay. For fs/gen.c, when the content re-judgement of
 * a save held by a crash finds an object it names missing (gen.h invariant
 * 11): the reason then says which. -EINVAL if it is not HELD or reason is
 * empty (G5). The shared engine holds nothing with GEN_CRASH_REASON
 * (catalog_shared_gen.c S4): -EOPNOTSUPP there. */
int cat_gen_held_reason(struct cat *cat, uint64_t id, const char *reason);

/* Ends a generation: OPEN → ABORTED (its tree is removed; a new version's
 * backup is put back under the name and the generation is COMMITTED again at
 * its previous version), or OPEN/COMMITTED → DELETED (tree and backup removed,
 * root unlinked from the series). The removed inodes get nlink 0: their ids are
 * passed to fn (the caller releases those the kernel does not hold, like
 * after an unlink). rule says why ("crash", "abandoned", "keep", "trainer"). */
int cat_gen_abort(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg);
int cat_gen_delete(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg);
/* cat_gen_delete for keep-latest-k, which decides from a listing before it
 * deletes: in the same transaction the generation must still be COMMITTED or
 * HELD (as listed) and unpinned, and at least `keep` newer saves of its
 * series and owner must still exist (G6), one of them durable if it is,
 * else -EBUSY and nothing changes (a rewrite reopened it, it was pinned, a
 * newer save was lost or removed, or is not on BACKING, since). keep 0: no
 * newer save is asked for (an admin's expire). */
int cat_gen_expire(struct cat *cat, uint64_t id, uint32_t keep, const char *rule, cat_ino_fn fn,
		   void *arg);

/* Fills inos (started zeroed, freed by the caller) with every inode that
 * has a write handle open in this daemon; 0 or -ENOMEM. Called under the
 * catalog lock: it must not call into the catalog. */
struct cat_id_vec;
typedef int (*cat_writing_fn)(void *arg, struct cat_id_vec *inos);
/* cat_gen_expire, and on one node, in the same transaction, -ETXTBSY
 * (nothing changed) for a COMMITTED generation an inode of which writing
 * lists (G11). The shared engine ignores writing: its transaction counts
 * every node's registered writers (pggen.h X12, -EBUSY). writing NULL:
 * cat_gen_expire. */
int cat_gen_expire_if(struct cat *cat, uint64_t id, uint32_t keep, const char *rule,
		      cat_writing_fn writing, void *warg, cat_ino_fn fn, void *arg);

/* COMMITTED or HELD → OPEN as version+1, keeping a backup of its tree (a
 * HELD one keeps its reason, for an abort to put back). */
int cat_gen_reopen(struct cat *cat, uint64_t id);

/* Queues the manifest of a COMMITTED generation's current version again
 * (nothing for any other state): its attributes changed in place
 * (gen.h gen_before_attr_change), so BACKING's copy is rewritten. A
 * rewrite committing meanwhile makes the row moot (the build is -ESTALE). */
int cat_gen_manifest_again(struct cat *cat, uint64_t id);

int cat_gen_pin(struct cat *cat, uint64_t id, bool pinned);

/* Generation ids up to id are never handed out (the shared engine:
 * pggen_rebuild_reserve_ids, for rebuild --meta): a rebuild
 * saw manifests of them on BACKING that it did not apply (rejected,
 * unreadable), and a new generation with such an id would write its
 * manifest over theirs (fs/rebuild.c invariant 6). */
int cat_gen_id_reserve(struct cat *cat, uint64_t id);
/* The highest generation id this catalog ever handed out or reserved (0:
 * none), deleted generations included: AUTOINCREMENT never hands one out
 * twice. Alone only (-ENOSYS shared). fs/main.c M4 compares it with the
 * manifests on BACKING. */
int cat_gen_id_last(struct cat *cat, uint64_t *id);

/* Whether a live node other than this one takes part in generation id (a
 * file of it open for writing, or its policy tracks it: pggen.h X7), so
 * that this node's unmount leaves it OPEN for that node to decide. Alone
 * (one node), false. */
int cat_gen_others_in(struct cat *cat, uint64_t id, bool *others);

/* Checks G1–G3; -EUCLEAN with a log line per violation. */
int cat_gen_check(struct cat *cat);

/* ---- growable lists, for the callbacks above ---- */

/* Ids (of inodes or generations) in the order added. Starts zeroed; freed by
 * cat_id_vec_free. */
struct cat_id_vec {
	uint64_t *v;
	size_t n, cap;
};

/* Appends id; -ENOMEM, the list unchanged, if it cannot grow. */
int cat_id_vec_push(struct cat_id_vec *ids, uint64_t id);

/* A cat_ino_fn into the struct cat_id_vec arg: collects the inodes an abort
 * or delete removed. One it has no memory for is left out; it keeps nlink 0
 * until the next cat_open's recovery releases it. */
void cat_id_vec_add_ino(void *arg, uint64_t ino);

void cat_id_vec_free(struct cat_id_vec *ids);

/* Generation rows in the order listed. Starts zeroed; freed by
 * cat_gen_vec_free. */
struct cat_gen_vec {
	struct cat_gen *v;
	size_t n, cap;
};

/* A cat_gen_fn into the struct cat_gen_vec arg: appends a copy of *gen;
 * -ENOMEM (which stops the listing) if it cannot grow. */
int cat_gen_vec_add(void *arg, const struct cat_gen *gen);

void cat_gen_vec_free(struct cat_gen_vec *gens);

#endif
