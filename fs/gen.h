/* gen — when checkpoint generations commit, abort and go: the daemon's policy
 * over the catalog's generations (meta/generation.h).
 *
 * Recognition: a name matching the pattern (default below, or -o gen_pattern)
 * created or renamed into a directory outside any generation starts an OPEN
 * generation; the directory is its series. The step is the pattern's last
 * all-digit capture group.
 *
 * Commit rules (docs/GENERATIONS.md has the table per trainer):
 *   dcp-metadata       rename onto `.metadata` inside the generation (not in a
 *                      Lightning `X.ckpt/` dir, which waits for meta.pt)
 *   dcp-rank-metadata  rename onto `__N.metadata`: quiet commit
 *   metadata-json      close of a written `metadata.json` (Megatron torch_dist)
 *   lightning-meta     close of a written `meta.pt` in a `*.ckpt` generation dir
 *   hf-trainer-state   close of a written `trainer_state.json`: quiet commit
 *   tracker            close of a rewritten `latest` / `latest_checkpointed_iteration.txt`
 *                      naming a generation of the same directory, written by
 *                      root or that save's owner (invariants 12, 13); a file
 *                      renamed onto that name outside generations is its
 *                      close, the renamer its writer; at start, a save a
 *                      crash held that such a file names (invariant 17)
 *   rename             a temporary directory or file renamed to a generation name
 *   next-gen           a new generation of the same owner starts in the series
 *                      while this one has no open writer and no sign of an
 *                      unfinished save (invariant 14)
 *   marker / explicit  close of `.ckptfs-commit`, or `setfattr -n user.ckptfs.commit`
 *   unmount            at a clean unmount, for generations with no open writer
 *                      and no sign of an unfinished save (others are held)
 *   added              a rewrite of a committed version that only added closed
 *                      files to it (invariant 15): the quiet tick, abandon or
 *                      the unmount
 * next-gen and unmount are the weak rules: a sign of an unfinished save is a
 * marker layout without its marker, or what proof.h judges BROKEN, EMPTY,
 * MISSING (a self-delimiting or large file of the previous committed save
 * absent) or
 * MIXED (a rewrite part done). The content rule proves a rewrite only by
 * files rewritten in it (proof.h invariant 5).
 * A rule that fires while write handles are open in the generation commits
 * when the last one closes. A quiet commit waits `quiet` seconds after that.
 *
 * Hold: at start (crash), the catalog holds every OPEN generation (a new
 * version gives way to its backup; generation.h G4); once the services are
 * up, gen_policy_ready re-judges those held with GEN_CRASH_REASON by
 * content (rule content) and then by the tracker naming them (rule
 * tracker, invariant 17), never one held for a file being written or lost
 * changes (G7). While running, one with no open write handle, no activity
 * for `abandon` seconds and none of the processes that wrote to it alive
 * is held (abandoned).
 *
 * keep-latest-k: after each commit, and when a generation becomes durable on
 * BACKING, committed generations of the series past the newest `keep` of
 * their owner (by step, then commit time) are deleted, except pinned ones and
 * the owner's newest durable one (while BACKING lags, the last checkpoint
 * that is safe off this node stays). It also runs over every series when the
 * thread starts, which finishes a deletion that a crash or a stop cut short.
 *
 * Invariants:
 *  1. Only gen.c decides state changes; it calls the catalog, never the other
 *     way round. It never calls into the kernel (no entry invalidation: see
 *     gen_after_removal); removed names expire from the kernel's cache.
 *  2. A generation never commits while a write handle in it is open; a
 *     HELD one only while a handle of it has written (invariant 10).
 *  3. keep-latest-k never deletes an OPEN or pinned generation, nor the newest
 *     committed one, nor the newest durable one of its owner (invariant 6),
 *     nor a lost save (a shared catalog's committed save whose node is
 *     away, shown held) before a newer save of its owner is durable
 *     (pggen.h X13: gen_keep_held, and the expire's transaction again),
 *     nor a durable HELD one (a rebuild's conflict, its manifest on
 *     BACKING) before then (generation.h G6: that transaction only).
 *     It decides from a listing
 *     and deletes with cat_gen_expire, which re-checks COMMITTED and unpinned
 *     in the deleting transaction (a rewrite or a pin in between wins), and
 *     that `keep` newer complete saves of the owner still exist there, one
 *     of them durable if the one deleted is durable or lost (invariant 6,
 *     generation.h G6, pggen.h X13):
 *     a stale listing never deletes more, and a rewrite that made the newer
 *     save not durable since keeps the owner's newest durable one. What it
 *     refuses goes in the pass that gen_durable runs once a newer save is
 *     on BACKING. Nor does it delete the owner's most recently committed
 *     save (commit time, then id: gen_keep_latest, and G_KEEP_NEWER in the
 *     deleting transaction, both engines), whatever its step: a resume from
 *     an earlier step keeps its newest save (logged at info once). Only
 *     saves a strong rule committed count among the `keep` newer ones: a
 *     weak rule's commit without proof (rule `unmount` or `next-gen`; with
 *     proof they record `content`) never makes an older save go, though it
 *     goes itself once `keep` counted newer saves exist; a pass that keeps
 *     saves for this says so once per series (gen_keep_said_kept). Nor a
 *     COMMITTED save with a file open for writing (invariant 18).
 *  4. keep-latest-k never runs inside the request that commits (nor in the
 *     uploader's durability callback): they queue the series, and the
 *     generation thread deletes after the reply. Only before the thread
 *     starts and after it stops (unmount) does it run in the caller.
 *  5. A weak rule (next-gen, unmount) never commits a generation that shows
 *     a sign of an unfinished save: one proof_weak_may_commit refuses
 *     (broken, empty, a rank's file missing, a rewrite part done), or a
 *     marker layout without its marker; nor a rewrite (a new version of a
 *     committed save) that its content does not prove COMPLETE and that did
 *     not only add files (invariant 15): the version it would replace is
 *     known complete (review 42 F2). unmount holds it (a rewrite: the
 *     previous version comes back, the rewrite kept held beside it,
 *     generation.h G10); next-gen leaves it open (abandon holds it).
 *  6. keep-latest-k counts per owner: the saves of a series are split by the
 *     owner (uid) of their root, and a committed one is deleted only once
 *     `keep` newer committed ones of the same owner exist (a HELD one: with a
 *     larger step) in the deleting transaction, not only in the listing
 *     (invariant 3; a lost one is no committed save); the newest committed and the newest durable one stay per
 *     owner, the latter until a newer one of the owner is durable in the
 *     deleting transaction too. So a user's saves are never deleted because of another user's
 *     (higher steps planted in a shared sticky series). With one owner this
 *     is the series-wide rule. A pass acts for the committing user's
 *     credentials (gen_may_delete: what they could `rm -rf` by hand); with
 *     none (at start, a save becoming durable), for each save's owner.
 *  7. A commit is durable locally and whole: before the catalog records it
 *     COMMITTED, the objects of the files written in it are on stable
 *     storage (one store_syncfs of the cache, gen_commit_now: files closed
 *     without fsync leave theirs in the page cache), and the commit itself
 *     is on stable storage before cat_gen_commit returns (catalog.c
 *     invariant 10). So a save listed COMMITTED after a power loss reads
 *     back whole. A file of it opened for writing during that syncfs (the
 *     per-generation count gen_writer_opened bumps before the change
 *     reaches the catalog, read before the syncfs and compared inside the
 *     commit's transaction: cat_gen_commit_if) is synced by another round,
 *     or, still open, waited for (gen_sync_and_commit).
 *  8. On a shared catalog, this node's memory of a generation (gen.c's
 *     is_open) never answers whether a change inside it needs a reopen:
 *     another node may have committed or held it since (its marker, an
 *     explicit commit, its unmount or abandon), and nothing tells this
 *     node. gen_before_change (and gen_before_attr_change) read the state
 *     from the catalog each time (pggen.h X12): one round trip per change
 *     that starts (a create, an O_TRUNC open, a writer's first write, a
 *     size change, a name change), never per write. A COMMITTED or HELD
 *     answer reopens it as version+1 with its backup (a late file from a
 *     node that did not commit it included), and corrects the stale
 *     is_open. So does a decision by what this node remembers, before it
 *     acts: the tick's content proof and abandon, next-gen, and the
 *     unmount's (gen_still_open: one read per decision); a generation
 *     another node settled is forgotten here with an info line, never
 *     committed or held again (a rule's commit is answered "committed
 *     already" by the catalog itself). Alone, is_open answers: only this
 *     node settles.
 *  9. A change and a commit of one generation are ordered: a change bumps
 *     the count of invariant 7 before it looks whether a commit of that
 *     generation passed its check, and the commit marks itself (committing)
 *     before its check reads the count. So either the check sees the change
 *     (another round) or the change sees the commit and waits for its
 *     answer (the catalog's transaction and the policy forgetting the open
 *     state, under the commit lock; not its syncfs, which comes before the
 *     check), then finds the generation COMMITTED and reopens it (version+1
 *     with its backup) instead of changing the committed version in place.
 * 10. A HELD generation (a crash at start, abandoned, unfinished at
 *     unmount, a rebuild's conflict: nothing writes into it, as a write
 *     reopens it first) is committed by a decision (an admin's commit, a
 *     marker or tracker naming it, its content at start) while files of it
 *     are open for writing here, as long as none was written through a
 *     handle still open: such a handle changed nothing, and its first
 *     change finds the save COMMITTED and reopens it (invariants 8, 9), so
 *     the committed save never changes in place. A file that was (its node
 *     has a writer, which writes on without asking again: ns.c ns_writer)
 *     refuses the commit, -EBUSY with a warning, until it closes. On a
 *     shared catalog every open writer makes the catalog refuse (pggen.h
 *     X1), and the commit waits as for another node's.
 * 11. A save open at a crash (HELD with GEN_CRASH_REASON, or a new version
 *     of one, which keeps that reason) is committed by its content only if
 *     every chunk its files' extents name has its object: whole in size in
 *     the cache (store_present: a file's header and length, a small.db
 *     row) or uploaded to BACKING by the catalog's word (proof.h invariant
 *     6). The catalog's rows can reach the disk before the objects of a
 *     file closed without fsync (another file's fsync, a WAL sync, SQLite's
 *     checkpoint), so after a power loss the headers may read fine while a
 *     data chunk's object is gone: such a save stays HELD, its reason
 *     naming the chunk and the file, with a warning, and nothing is
 *     committed or deleted for it (an admin's commit or rm decides).
 *     A tracker's commit at start checks it too (invariant 17).
 *     gen_prove applies it wherever a proof of such a save may commit it
 *     (the start's re-judgement, the tick, abandon, unmount). The shared
 *     catalog never holds with GEN_CRASH_REASON (catalog_shared_gen.c S4:
 *     a dead node's saves are held "node-lost", committed only by an
 *     admin), so it never applies there.
 * 12. A tracker commits a save only for root or the save's owner: the uid
 *     that opened the tracker's written handle (ns.c records it at open; a
 *     FUSE release names no caller) must be 0 or the uid of the save's
 *     root, the owner keep-latest-k partitions by (invariant 6). A file
 *     renamed onto a tracker name (an atomic writer's os.replace) is the
 *     tracker's close with the renamer's fsuid as that uid; one renamed
 *     while a write handle of it is open closes with that handle (ns.c
 *     notes the name at the rename). The file judged is the inode the
 *     rename moved, as the catalog's rename transaction reports it
 *     (cat_rename_gen's moved_ino), never the name looked up afterwards:
 *     on -o meta= another node may rename its own file onto the name in
 *     between, which would be judged with this renamer's uid. Anyone
 *     else's tracker naming it (a shared sticky series under allow_other)
 *     gets one warning naming the tracker, its writer's uid and the save,
 *     and changes nothing: otherwise another user could commit a user's
 *     unfinished save and so have keep-latest-k delete that user's older
 *     complete one.
 * 13. A tracker never commits a save holding DCP shards (`*.distcp`) in a
 *     directory without the metadata that completes them there
 *     (`.metadata`, `__N.metadata`, Megatron's `metadata.json`): that
 *     layout names itself complete, and every trainer that writes a
 *     tracker for it (Megatron torch_dist) writes it after the metadata
 *     (TRAINERS.md). It looks at the save's root and the directories up to
 *     2 levels below it (a DCP save in a subdirectory: HF Accelerate's
 *     `pytorch_model_fsdp_0/`, NeMo's `weights/`), at most 64 directories
 *     (gen_dcp_unfinished); what lies past that bound is not looked at. A
 *     save it cannot list (a catalog error) is not committed either: no
 *     more known complete than one listed unfinished. The save stays as it
 *     was (OPEN: its metadata commits it, abandon or the unmount decides;
 *     HELD: an admin decides), with one info line naming the directory or
 *     the error.
 * 14. next-gen commits another OPEN save of the series only if its owner
 *     (its root's uid, invariant 6) is the starting save's owner, root
 *     included: a new save shows that its own trainer finished the
 *     previous one, never another user's trainer. A save whose owner
 *     cannot be read is not committed by it (abandon, unmount decide).
 * 15. A rewrite that only added files to the COMMITTED version it replaces
 *     (proof.h invariant 7: every file of the backup at its path, not
 *     rewritten, and at least one new one, none of them incomplete) is
 *     that complete save plus closed files: with no write handle open in
 *     it, the tick commits it once `quiet` s passed (rule "added"), and
 *     abandon and the unmount commit it instead of holding it, a marker
 *     layout's too (a
 *     late rank's rng_state_1.pth after HF's trainer_state.json, an eval
 *     script's eval_results.json: its marker never comes again). One that
 *     changed or removed a file of that version keeps the marker rule (a
 *     resumed job saving the step again ends with the marker; without it,
 *     abandon and the unmount roll it back), and so does one of a HELD
 *     version (gen_prove: a held save plus files is no more proven). A
 *     real re-save whose first files are ones the old version lacked and
 *     that pauses `quiet` s is so committed as the old version plus those
 *     files: still complete, and its next change opens version+1. A
 *     commit of this rule that had to wait (a file opened for writing
 *     during its sync; on a shared catalog, another node's writer) is
 *     proven again before each try, never committed on a stale proof.
 *     next-gen does not apply it to a marker layout (the tick does).
 * 16. A save with a file whose last close failed (ENOSPC, EIO: its G7 mark
 *     stays, the file is as of its last successful close or fsync), or
 *     whose changes were lost (catalog_defer.c D4), is committed by no
 *     rule but an explicit decision (generation.h G9: the catalog refuses
 *     every other rule with -ENOTRECOVERABLE in the commit's transaction,
 *     after gen_commit_blocked ruled out open write handles). The policy
 *     then holds it (gen_hold_failed), with the reason naming the file —
 *     whatever rule tried: a marker, tracker or metadata (a signal from
 *     another rank says nothing of this file), next-gen, content, abandon,
 *     unmount (gen_policy_shutdown asks before any proof or rewrite rule).
 *     abandon and the unmount ask as gen_hold_failed does (gen_failed_why):
 *     a catalog that cannot say counts as such a file, the save held at
 *     once with the reason naming the error (the safe side).
 *     A HELD one stays held. So keep-latest-k never counts it as a
 *     complete save. A later successful close of the file (a retry)
 *     clears the mark before the hold; after it, a write reopens the held
 *     save as a new version, which a rule commits once no file of it is
 *     marked. The same for a save naming a chunk found lost before its
 *     upload (generation.h G13), refused for every rule but the admin's,
 *     the commit xattr included: held with rule "lost-chunk" and the
 *     reason naming the chunk and the file.
 * 17. At start (gen_policy_ready, one node), a save HELD with
 *     GEN_CRASH_REASON that its content does not prove complete is
 *     committed by rule tracker if a tracker of its series (`latest`,
 *     latest_checkpointed_iteration.txt, read and resolved as at its close:
 *     gen_tracker_target) names it: the commit the tracker's rule asked
 *     for before the kill, which waited for a writer of the save (ns.h
 *     invariant 10), or the kill came between the rule and the commit.
 *     Only then, and only if: its content shows no sign of an unfinished
 *     save (proof_weak_may_commit: not BROKEN, EMPTY, MISSING, MIXED);
 *     invariant 12 holds with the tracker's owner as its writer, which the
 *     start trusts only if nobody else could have written it (no group or
 *     other write bit: else who wrote it last is unknown); the tracker was
 *     last written (mtime) no earlier than the save began (an earlier save
 *     of that name's tracker says nothing of this one); the save is no
 *     version a rollback brought back (rule "*-restored": the tracker may
 *     have been written for the version rolled back, now kept beside it,
 *     generation.h G10; review 46 F3); its series directory is owned by
 *     the tracker's owner or root and, if others may write in it, sticky
 *     (else anyone could have renamed a file onto the tracker's name:
 *     review 46 F5); invariant 13; and
 *     every object it names is here or on BACKING (invariant 11). Else it
 *     stays held, with one line saying why. A save held for any other
 *     reason is not looked at: one a file of which was being written
 *     (GEN_UNCLOSED_REASON: its last close may not be recorded; so is a
 *     trigger file whose release had not come, generation.h G7), lost
 *     changes, a failed close, a sign at unmount or abandon, an admin's
 *     hold, a rebuild's conflict. The shared catalog has no crash hold
 *     (invariant 11): X2 of pggen.h holds a dead node's saves "node-lost"
 *     whether it had a file of them open or only opened them, which only
 *     an admin commits (catalog_shared_gen.c S3), so no tracker commits
 *     them at start there.
 * 18. keep-latest-k never deletes a COMMITTED save while a file of it has a
 *     write handle open (review 42 F5): the handle may still write, which
 *     reopens the save as version+1 (invariants 8, 9), and a tree removed
 *     under it would take the write into a file nothing names while
 *     pwrite, fsync and close all succeed. The expire's transaction decides
 *     (generation.h G11 on one node: gen_writing_inos hands it this
 *     node's table of write handles; -o meta=: pggen.h X12 counts every
 *     node's registered writers and the handles a live node parked at
 *     their flush, ns.h invariant 14), so a listing gone stale never deletes
 *     under a handle opened since; an open for writing counts its handle
 *     before it reads the catalog again (ns.h invariant 12), so it is
 *     either seen or refused (-ENOENT). gen_end says so once per save at
 *     info (-ETXTBSY; -o meta=: -EBUSY, the generic line).
 *     gen_writer_closed asks for keep over the series when the last write
 *     handle of a committed save here closes, so the save goes then if
 *     nothing wrote through it, not only at the next commit; -o meta=, a
 *     save this node remembers as open counts as committed when the
 *     statement of that close (ns_writing's) read it COMMITTED: another
 *     node committed it after this one parked its row (invariant 8). A handle for
 *     reading keeps nothing: it reads the removed file until its close
 *     (node.h invariant 1). A HELD save goes as before (as X12): its open
 *     files are what its hold named, and a write reopens it first.
 * 19. A rule's commit (a marker, the tracker, any rule pending while other
 *     nodes' writers close) that the catalog refuses because the save is
 *     HELD by then — on a shared catalog a sweep (pggen.h X2) held it while
 *     the commit waited, or a hold only a decision ends (node-lost) was
 *     there when the rule fired — is no failure of the policy: one warn line
 *     "generation NAME (...) held meanwhile: REASON; its commit (RULE) does
 *     not end the hold", naming the save, the hold's reason and the rule,
 *     and it stays held for a decision (gen_held_meanwhile), never an
 *     error line with the catalog's EINVAL (review 45 F6). */
#ifndef CKPTFS_GEN_H
#define CKPTFS_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proof.h"

struct store;

#define GEN_DEFAULT_PATTERN                                                          \
	"^((step|checkpoint|ckpt|global_step|iter|iteration)[-_]?|.*[-_]step=)([0-9]+)" \
	"(-v[0-9]+)?(\\.(ckpt|pt|pth|bin|safetensors|npy|npz))?$"

struct cat;
struct node_table;
struct gen_policy;
struct cat_gen_spec;

struct gen_options {
	char pattern[1024]; /* empty: GEN_DEFAULT_PATTERN */
	unsigned keep;      /* 0: keep all */
	double quiet_s;     /* quiet period of quiet commits */
	double abandon_s;   /* inactivity before an unwritten open generation is aborted */
	bool show_open;     /* list OPEN generations in readdir */
};

/* What the policy works on. read reads file bytes (a proof by content,
 * proof.h, and tracker files): the reader's committed extents, with no
 * readahead (READER_PROBE). A callback, so the policy needs nothing of the
 * reader but that one read (and tests hand in a fake). */
struct gen_deps {
	struct cat *cat;
	struct node_table *nodes; /* open writers (gen_files_being_written); removed trees */
	proof_read_fn read;
	void *read_arg;
	/* the cache's objects, synced before each commit (invariant 7); NULL
	 * when there are none to sync (tests of the policy alone) */
	struct store *store;
};

/* Compiles the pattern (-EINVAL with a line naming it if it does not). */
int gen_policy_new(const struct gen_deps *deps, const struct gen_options *o,
		   struct gen_policy **out);
/* The same check without a policy (before mounting: the line reaches the
 * terminal). */
int gen_pattern_check(const struct gen_options *o);
/* Starts the background thread (timers) once mounted and daemonized. */
int gen_policy_start(struct gen_policy *g);
/* Every service is up (cache, uploader, store queue): the thread may now
 * read file contents (the held generations a crash left are judged). */
void gen_policy_ready(struct gen_policy *g);
/* Clean unmount: decides every OPEN generation (commit or abort), stops the thread. */
void gen_policy_shutdown(struct gen_policy *g);
void gen_policy_free(struct gen_policy *g);

/* Does a name start a generation (in a directory outside any)? Sets *step. */
bool gen_name_matches(struct gen_policy *g, const char *name, uint64_t *step);

/* The generation spec for creating or renaming `name` into `parent`, or NULL
 * when the new entry is not a generation root. spec must outlive the call. */
const struct cat_gen_spec *gen_spec_for(struct gen_policy *g, uint64_t parent, const char *name,
					struct cat_gen_spec *spec);

/* Should readdir of `dir` hide the entry `name` (an OPEN generation root)? */
bool gen_hidden(struct gen_policy *g, uint64_t dir, const char *name);

/* Before changing anything inside generation gen_id: a COMMITTED one is
 * reopened as a new version (backup kept). Returns 0 or -errno. */
int gen_before_change(struct gen_policy *g, uint64_t gen_id);

/* Before a change of attributes only (mode, owner, times: no byte, size or
 * name changes) inside generation gen_id: nothing is reopened. A COMMITTED
 * or HELD generation takes the change in place (*in_place = true: the
 * caller then re-queues its manifest, cat_gen_manifest_again); an open one
 * takes it into the version being written. A chmod of a committed save
 * used to reopen it as a rewrite: hidden from its series until `abandon`,
 * then rolled back with the chmod undone. Returns 0 or -errno. */
int gen_before_attr_change(struct gen_policy *g, uint64_t gen_id, bool *in_place);

/* Activity: a write, create or other change in a generation by pid. */
void gen_activity(struct gen_policy *g, uint64_t gen_id, pid_t pid);

/* A new generation was created (or renamed in) in series; by_rename says how. */
void gen_started(struct gen_policy *g, uint64_t gen_id, uint64_t series, bool by_rename, pid_t pid);

/* A file named `name` was created in gen_id (marks like *.distcp). */
void gen_file_created(struct gen_policy *g, uint64_t gen_id, const char *name);

/* Write handles in a generation. committed: the catalog's statement of this
 * close read gen_id COMMITTED (-o meta=: another node's commit, which this
 * node's memory of it as open missed; invariants 8, 18). */
void gen_writer_opened(struct gen_policy *g, uint64_t gen_id);
void gen_writer_closed(struct gen_policy *g, uint64_t gen_id, bool committed);

/* A name was removed from (or renamed out of) parent: live state of a
 * generation whose root it was is dropped (the catalog ended it). */
void gen_root_removed(struct gen_policy *g, uint64_t parent, const char *name);

/* One line describing the generation of an inode (for the xattr). */
int gen_describe(struct gen_policy *g, uint64_t gen_id, char *buf, size_t size);

/* A renamed entry (inode ino, as cat_rename_gen moved it) arrived as `newname` in
 * generation gen_id (0: outside), moved by uid renamer (fsuid). Outside
 * generations, a file renamed onto a tracker name is that tracker's close
 * with renamer as its writer (invariants 12, 13); the caller noted the
 * trigger name for the node (a handle still open closes it later). */
void gen_renamed(struct gen_policy *g, uint64_t gen_id, uint64_t ino, uint64_t newparent,
		 const char *newname, uid_t renamer);

/* A written file was closed (last write handle; a tracker outside
 * generations also at each flush, ns.h invariant 10): name and parent as last seen;
 * writer: the uid (fsuid) that opened the handle which wrote it (a FUSE
 * release carries no caller's credentials). A tracker written by neither
 * root nor the owner of the save it names commits nothing (invariant 12). */
void gen_file_closed(struct gen_policy *g, uint64_t ino, uint64_t parent, const char *name,
		     uint64_t gen_id, uid_t writer);

/* Trigger names the daemon must remember per node (see gen_file_closed). */
bool gen_is_trigger_name(const char *name);

/* Explicit control (xattrs on a generation root, ckptfs-admin). */
int gen_commit_explicit(struct gen_policy *g, uint64_t gen_id, const char *rule);
int gen_pin(struct gen_policy *g, uint64_t gen_id, bool pinned);
int gen_remove(struct gen_policy *g, uint64_t gen_id, bool force);

/* A generation became durable on BACKING: keep-latest-k may now end the
 * older durable one it was keeping (invariant 3). */
void gen_durable(struct gen_policy *g, uint64_t id);
/* Something that kept a COMMITTED save id from keep-latest-k went late
 * (-o meta=: a parked mark a failed last close left, ended once PostgreSQL
 * answered again, ns.h invariant 15): keep is asked again over its series,
 * as invariant 18 asks it at a last close. Nothing if id is not COMMITTED. */
void gen_keep_again(struct gen_policy *g, uint64_t id);

/* For tests only: called at named points ("committed": gen_commit_now has
 * its catalog's answer, before it forgets the generation's open state;
 * invariant 9). NULL in a daemon. */
extern void (*gen_test_hook)(const char *point, uint64_t id);

#endif
