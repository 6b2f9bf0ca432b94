/* ns — the namespace: what a file system call means for the catalog, the
 * in-memory inodes, the file's writer and its checkpoint generation.
 *
 * The FUSE adapter (ops.c) decodes a request, calls one ns_* function and
 * replies; ns calls the catalog, the node table, the writer and reader, and
 * the generation rules (gen.h) itself, so what a create, write, close or
 * rename means for a generation reads here, in one place
 * (docs/GENERATIONS.md). ns knows nothing of FUSE.
 *
 * The catalog interface the namespace needs (a second catalog engine,
 * issue 18, implements this set; gen.c and node.c add theirs below):
 *   names      cat_lookup, cat_readdir, cat_readlink, cat_link, cat_unlink,
 *              cat_rmdir, cat_create_in_gen, cat_rename_gen
 *   inodes     cat_getattr, cat_setattr, cat_file_truncate, cat_stats, cat_sync
 *   generations cat_gen_of (which generation an inode is in), cat_getattr_gen
 *              (both in one read)
 *   gen.c      cat_gen_get_brief, cat_gen_list_brief, cat_gen_find,
 *              cat_gen_find_step, cat_gen_commit, cat_gen_abort, cat_gen_delete,
 *              cat_gen_expire, cat_gen_hold, cat_gen_reopen, cat_gen_pin,
 *              cat_gen_durable, cat_gen_of, cat_getattr (+ proof.c's reads)
 *   node.c     cat_inodes_release, cat_inodes_drop_data
 * (file data goes through writer.c and reader.c, which have their own set.)
 *
 * Credentials: a call that acts for a process takes a struct ns_cred
 * (uid, gid, pid, and the process's supplementary groups on demand). The
 * groups are a callback, not a list, because reading them costs a /proc read
 * per request and only the setgid rules need them (rarely).
 *
 * Locking order: node->rw, then the catalog's mutex (inside cat_*). The node
 * table lock is never held across either; the open-file registry's lock is a
 * leaf, held only to link or unlink a file.
 *
 * Invariants:
 *  1. Every open file handed out (ns_open, ns_create) is in the registry
 *     until ns_release unlinks and frees it, or, for those the kernel never
 *     releases (SIGTERM, or a lazy unmount, with a file open), until ns_free
 *     at teardown.
 *  2. At teardown (no call runs) a file still open is only freed: nothing a
 *     close does happens, since the file was never closed. It still counts as
 *     an open writer, so gen_policy_shutdown holds an OPEN generation it
 *     writes in (docs/GENERATIONS.md); no commit rule fires; node_table_free
 *     ends its node and writer.
 *  3. Setuid and setgid are cleared as the kernel clears them on a local
 *     filesystem (see ns_killpriv_mode). Only regular files.
 *  4. Before anything inside a committed generation changes, gen_before_change
 *     reopens it (a new version); every change notes activity by its pid.
 *     A change of attributes only (setattr without a size: chmod, chown,
 *     touch, cp -p) reopens nothing: a committed or held save takes it in
 *     place and its manifest is queued again (gen_before_attr_change), an
 *     open one within the version being written.
 *  5. No catalog answer is kept between calls: a call reads what it needs,
 *     in as few catalog reads as the answers allow — a lookup's entry
 *     carries its attributes (no getattr after it), a change reads its
 *     inode's attributes and generation together (cat_getattr_gen), a
 *     create says which generation the new file is in and its open uses
 *     that. With a shared catalog, a change made on another node is seen
 *     at this node's next call; the kernel's timeouts (ops.c, at most 1 s)
 *     bound how late that call comes.
 *  6. A writer holds its generation's commit (gen.h invariant 2; shared,
 *     pggen.h X1) before anything it changes is seen: an open for writing
 *     is counted among the writers (node table and policy, or its
 *     ns_writing row) before its O_TRUNC reopens or empties the file, and a
 *     create for writing counts its directory (when in a generation) from
 *     before the generation is reopened and the entry made until the new
 *     file's handle counts. A call that fails after counting uncounts.
 *  7. A file with no links left and no handle open here is not opened, nor
 *     truncated, by name (-ENOENT, as a removed name on a local file
 *     system): the kernel may keep a removed entry up to its timeout (a
 *     generation removed behind its back: gen.c tells it nothing), and a
 *     handle opened through it would read nothing (its data dropped,
 *     node.h invariant 5) or write bytes into an inode nothing names.
 *     Handles already open keep reading and writing it until their last
 *     close (node.h invariant 1), an ftruncate on one too, and while one is
 *     open the file can be opened again (through /proc/self/fd: `cmp
 *     /dev/fd/N`); its data is kept while a handle is open.
 *  8. A file whose create a rolled-back catalog batch took (catalog_defer.c
 *     D10) answers that batch's error (-ENOSPC, -EIO) at every later write,
 *     truncate, flush, fsync and release of a handle open on it, asked
 *     before the call and after it (a loss the call found): never -ENOENT
 *     nor success, as writer.h invariant 4 keeps a writer's first error.
 *  9. A trigger (gen_is_trigger_name: a completion marker, metadata.json,
 *     trainer_state.json, meta.pt, a tracker) opened for writing commits the
 *     catalog's deferred batch (catalog_defer.c D3) at its flush, before
 *     close(2) returns: once a trainer's completion signal has returned,
 *     every file it closed before it is in the catalog on disk, and a
 *     kill -9 cannot take them out of the save (review 43 F3). Its name is
 *     noted at every LOOKUP, create, rename and READDIRPLUS entry (review 43
 *     F1), since the kernel may open it through any of these dentries.
 * 10. A written tracker outside generations (`latest`,
 *     latest_checkpointed_iteration.txt) fires its rule (gen_file_closed)
 *     at its flush, after its data is committed and before close(2)
 *     returns, as the `.metadata` rename commits before its reply: a
 *     kill -9 right after the trainer's tracker write cannot leave the save
 *     it names open (review 43 F2). The release fires it again only if
 *     the handle was written after its last flush (review 44 F4: a rule
 *     that does not commit logs its line once per close). The rule never waits for the save's writers
 *     (gen_request_commit leaves it pending): a kill -9 while one is still
 *     open (a rank's file whose release has not come) leaves the save held,
 *     and the next start commits it by the tracker (gen.h invariant 17),
 *     unless a file of it was marked being written (generation.h G7).
 *     A trigger inside a generation is itself a writer of its save until
 *     its release, so its rule stays at the release (ns_release_done).
 *     Firing it at its flush would commit nothing sooner: until the
 *     release its handle counts among the save's writers (the rule waits,
 *     invariant 6), its file keeps its being-written mark (G7: a commit
 *     then is refused, and a kill holds the save for that file), its
 *     writer stays attached, so a write through another descriptor of the
 *     same open file after the flush would change a committed save in
 *     place (gen.h invariants 2, 10), and on -o meta= its ns_writing row
 *     makes the catalog refuse the commit (pggen.h X1) — that row alone
 *     goes at its flush (invariant 14), the other three stay. Ending all
 *     four at a flush is a release at every close of a dup'd descriptor;
 *     not done.
 * 11. A file written through the handle being flushed that is at least
 *     NS_FLUSH_COMMIT_BYTES long commits the deferred batch (catalog_defer.c
 *     D3) at its flush, before close(2) returns, as a trigger does (9): a
 *     tensor shard closed without fsync is in the catalog on disk once its
 *     close returned, and a kill -9 right after keeps it byte for byte in
 *     the held save instead of taking its last close (or its create) with
 *     the batch. The cost is one commit (no fsync) per such close; smaller
 *     files keep the group commit, and with it the window of up to
 *     CAT_DEFER_MS in which a kill -9 takes a file closed last (a `latest`
 *     or a marker among them are triggers: 9).
 * 12. A handle open for writing in a committed save keeps keep-latest-k
 *     from deleting that save (generation.h G11; -o meta=: pggen.h X12, a
 *     handle whose row its flush parked included, invariant 14):
 *     on one node it is counted in the node table (node_writers_add)
 *     before the catalog is read again (ns_writer_still_in), while the
 *     expire asks the node table inside its transaction. So either the
 *     expire sees the handle and keeps the save, or the open sees the file
 *     gone from its save with no link left and fails -ENOENT before its
 *     O_TRUNC or any write: no handle opened by name writes into a file a
 *     keep pass removed. A handle for reading keeps nothing (invariant 7).
 * 13. Upload before visible (-o meta=, review 45 F5): the new content of a
 *     file outside generations at most NS_UPLOAD_FIRST_BYTES long (a
 *     tracker: `latest`, latest_checkpointed_iteration.txt; a config) is on
 *     BACKING before the catalog shows it to the other nodes: every commit
 *     of its writer (the flush of every close, fsync, the last release)
 *     waits, once its chunks are stored and before it publishes
 *     (writer_commit_gated), until the chunks of it this node's cache holds
 *     are uploaded (uploader_wait_pending; no linger meanwhile, uploader.h
 *     B3). So when close(2) returns, a kill -9 of this node leaves the new
 *     content readable on every other node; a kill during the close, or
 *     between an O_TRUNC open and the close, leaves the content before it:
 *     an O_TRUNC of such a file (outside generations, shared catalog) cuts
 *     the node's writer, not the catalog (ns_open_truncate), so the other
 *     nodes read the old content until a commit publishes the new one
 *     (review 49 F6), and a close that is not the last publishes no cut to
 *     empty (a dup closed before the write: the close with content, an
 *     fsync or the last release does). This node sees its cut at once. The
 *     wait is bounded: BACKING found not answering (the uploader backs
 *     off, or an earlier wait timed out behind a BACKING call that hangs:
 *     uploader.h B7, so a hung BACKING costs one backing_timeout, not one
 *     per close, until BACKING takes an upload again) or backing_timeout
 *     passed, the content is published anyway with
 *     one warning line naming the inode and saying it is in this node's
 *     cache alone, which S6 of catalog_shared_data.c then covers (other
 *     nodes read it once it is uploaded; if this node dies first, EIO at
 *     once, not a wait). An EIO at close instead would leave the trainer's
 *     new content nowhere. The wait holds the node's n->rw (readers of
 *     this file on this node wait with the close). Larger files outside
 *     generations are published at close, uploaded behind (fsync with
 *     -o sync=backing waits for it); so are files inside generations,
 *     whose save is held "lost" (pggen.h X5, X10) if their node dies
 *     first. One node (no -o meta=) waits for nothing: its cache dies only
 *     with its catalog.
 * 14. -o meta= (pggen.h X15): a node's ns_writing row of a file of a
 *     generation names it whenever this node may still change it, and only
 *     then. close(2) returns after FLUSH, the RELEASE comes later (or never,
 *     if the node dies in between: review 45 F1), so the flush of the
 *     node's only write handle of the file, once it published the file
 *     (ns_commit succeeded, nothing written since), frees the writer and
 *     drops the row ("parks" it: node->writing_parked), an ns_open row
 *     taking over first (pgns.h N14: the handle is still open). Once
 *     close(2) returned no row names the file: a completion signal on
 *     another node commits the save at once, and a death before the
 *     RELEASE holds nothing (X2). While parked, every change through a
 *     handle still open (a dup'd descriptor, an ftruncate, a fallocate, a
 *     truncate by name) makes a new writer
 *     (ns_writer), which puts the row back (cat_writing_resume, under
 *     n->rw) before it reads the file's generation and reopens a save
 *     committed meanwhile (invariant 4, pggen.h X12): the change goes into
 *     version+1, never into the committed save, and a death after it holds
 *     or rolls back that version. A new open for writing puts it back too
 *     (invariant 6); the last close finds it gone. A flush that failed, a
 *     writer written after the flush's commit, another write handle open
 *     here, a handle opened O_RDWR, or a file outside generations keeps the
 *     row to the release as before. O_RDWR because a MAP_SHARED writable
 *     mapping needs a handle open for reading too: its stores reach the
 *     daemon only at write-back (msync, munmap, the kernel's flusher),
 *     after close(2)'s flush, so a parked row would let the save commit
 *     without them, and a death before the write-back would hold nothing
 *     (review 49 F3: numpy.memmap's w+ committed as zeros). The trainers
 *     of TRAINERS.md write with "wb", O_WRONLY, which parks. A parked handle still keeps keep-latest-k from ending its
 *     committed save, as invariant 12 wants of every write handle: the
 *     flush's one statement (cat_writing_park) drops the ns_writing row and
 *     marks the ns_open row parked, the row's return (a resume, a new open)
 *     and the last close end the mark in their statement, and the expire
 *     counts both (pggen.h X12), so it sees the handle at every moment
 *     while no commit (X1) or death (X2) does; a node lost holds nothing by
 *     it. The last close's statement also reads the save's state, and one
 *     another node committed meanwhile has keep asked again then
 *     (gen_writer_closed, gen.h invariant 18). One node (SQLite) has no such
 *     row: its commit waits for the
 *     release in the same daemon, and a death there ends every handle and
 *     pending commit at once (gen.h invariant 17 decides at the next start).
 * 15. -o meta=: a parked mark outlives no last close while this node runs
 *     (review 50 F4). When the last close's statement that ends it
 *     (cat_writing_state, G_WRITING) fails for another reason than a fence
 *     or the inode gone, and the ns_open row's drop did not take the mark
 *     with it, the node is listed (node->park_pending, a reference held)
 *     and a tick every NS_UNPARK_RETRY_MS (after a failed try the next
 *     waits 1, 2, 4 ... up to 30 ticks) ends the mark
 *     (cat_writing_unpark: that one flag, nothing else: the row a reader
 *     here still needs, any ns_writing row and the failed flag of pggen.h
 *     X14 stay as the close left them) once the catalog answers, then asks
 *     keep-latest-k again for a COMMITTED save (gen_keep_again, gen.h
 *     invariant 18). It never ends a mark a handle still needs: the try
 *     runs under n->rw, as every open, park and close of the inode here,
 *     and only while park_pending is set and no write handle of it is open
 *     here; a successful open for writing clears park_pending (its
 *     statement ended the old mark), so the mark a later flush parks is
 *     that handle's and is ended by its own close. A fenced node's marks
 *     count no more (not live); at unmount the list is dropped with the
 *     lease. Until the try succeeds keep keeps the save (space, never
 *     data).
 *
 * Commit points of file data: flush (every close), fsync (durable), and the
 * release of the last handle. */
#ifndef CKPTFS_NS_H
#define CKPTFS_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog.h"
#include "reader.h"

/* invariant 11: a flush of a written file this large commits the batch */
#define NS_FLUSH_COMMIT_BYTES (1024 * 1024)
/* invariant 13: a file outside generations at most this large is on
 * BACKING before a shared catalog shows its new content */
#define NS_UPLOAD_FIRST_BYTES (1024 * 1024)

struct cat;
struct node_table;
struct gen_policy;
struct store;
struct chunkput;
struct ns;
struct ns_file;

/* Who makes a call. getgroups fills up to size supplementary groups and
 * returns how many (or < 0); NULL: none. */
struct ns_cred {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int (*getgroups)(void *arg, int size, gid_t *list);
	void *arg;
};

/* The committed bytes of files: the reader (reader.h), READER_COMMITTED.
 * map/unmap as reader_map/reader_unmap, read as reader_read. Calls, not the
 * reader itself, so ns needs nothing of the chunk cache and tests hand in
 * a fake; main.c wires them to the reader. */
struct ns_reader {
	int (*map)(void *arg, uint64_t ino, uint64_t off, size_t len, struct reader_map *m);
	void (*unmap)(void *arg, struct reader_map *m);
	int (*read)(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf);
	void *arg;
};

struct ns_deps {
	struct cat *cat;
	struct node_table *nodes;
	struct gen_policy *gen;
	struct store *store;       /* fsync of a file with no writer */
	struct ns_reader reader;
	struct chunkput *chunkput; /* writers are made from it */
	/* with sync_backing, fsync waits (at most timeout_ms) until ino is on
	 * BACKING: uploader_wait_file */
	int (*wait_backing)(void *arg, uint64_t ino, unsigned timeout_ms);
	/* invariant 13: waits (at most timeout_ms) until the chunks of ino's
	 * unpublished content that this node's cache holds are on BACKING:
	 * uploader_wait_pending; -ENETDOWN, -ETIMEDOUT as it says. NULL: no
	 * wait (tests) */
	int (*wait_pending)(void *arg, uint64_t ino, unsigned timeout_ms);
	void *wait_arg;
};

struct ns_config {
	bool sync_backing;           /* fsync waits until the file is on BACKING */
	unsigned backing_timeout_ms; /* ... this long at most */
};

int ns_new(const struct ns_deps *deps, const struct ns_config *cfg, struct ns **out);
/* At teardown, once no call runs: frees the files never released
 * (invariant 2), stops invariant 15's tick and drops its list, and frees
 * ns. Not the handles in deps. With a shared catalog ns_new starts that
 * tick (a thread: after daemonizing). */
void ns_free(struct ns *ns);

/* ---- names (each one that returns an entry counts a kernel lookup) ---- */

int ns_lookup(struct ns *ns, uint64_t parent, const char *name, struct cat_inode *out);
/* Counts a kernel lookup of an entry handed out otherwise (readdirplus). */
void ns_lookup_add(struct ns *ns, uint64_t ino);
/* A READDIRPLUS entry of directory parent: counts the lookup and notes a
 * trigger name (gen_is_trigger_name), as ns_lookup does. */
void ns_readdirplus_add(struct ns *ns, uint64_t parent, const char *name, uint64_t ino);
void ns_forget(struct ns *ns, uint64_t ino, uint64_t nlookup);
/* How long the kernel may cache the entry name (0 for generation roots). */
double ns_entry_timeout(struct ns *ns, const char *name, double usual);

/* Makes a file, directory, device, fifo or symlink (target) in parent. */
int ns_make(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
	    mode_t mode, dev_t rdev, const char *target, struct cat_inode *out);
int ns_link(struct ns *ns, const struct ns_cred *c, uint64_t ino, uint64_t newparent,
	    const char *newname, struct cat_inode *out);
int ns_remove(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name, bool dir);
/* flags: CAT_RENAME_NOREPLACE, CAT_RENAME_EXCHANGE. */
int ns_rename(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags);
int ns_readlink(struct ns *ns, uint64_t ino, char *buf, size_t size);

/* Lists dir from cookie off, leaving out what readdir hides (OPEN
 * generations): fn as for cat_readdir. */
int ns_readdir(struct ns *ns, uint64_t dir, uint64_t off, cat_dirent_fn fn, void *arg);
int ns_sync(struct ns *ns);
int ns_inode_count(struct ns *ns, uint64_t *inodes);

/* ---- attributes ---- */

/* The attributes readers see: a writer's size and mtime win. */
int ns_getattr(struct ns *ns, uint64_t ino, struct cat_inode *out);

struct ns_setattr {
	unsigned what;         /* CAT_SET_* */
	struct cat_inode val;  /* mode, uid, gid, atime_ns, mtime_ns as what says */
	bool size_set;
	uint64_t size;
	bool kill_setid;       /* the kernel asked to clear setuid/setgid */
};
/* f: the open file the change came through, if any. */
int ns_setattr(struct ns *ns, const struct ns_cred *c, uint64_t ino, const struct ns_setattr *s,
	       struct ns_file *f, struct cat_inode *out);

/* ---- files ---- */

/* Opens ino (open flags as open(2)); *in gets its attributes. */
int ns_open(struct ns *ns, const struct ns_cred *c, uint64_t ino, int flags, struct ns_file **out,
	    struct cat_inode *in);
/* Creates name in parent and opens it. Without O_EXCL, a name that another
 * node (shared catalog) made after the kernel's lookup is opened instead, as
 * open(2) of an existing file (O_TRUNC applied, its permissions checked):
 * *in is then that file's. */
int ns_create(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
	      mode_t mode, int flags, struct ns_file **out, struct cat_inode *in);

/* What a read hands out: pinned pieces of chunks (m), or a buffer (buf);
 * got bytes. Released by ns_read_done after the reply. */
struct ns_read_out {
	size_t got;
	char *buf;
	struct reader_map m;
};
int ns_read(struct ns *ns, struct ns_file *f, size_t size, uint64_t off, struct ns_read_out *o);
void ns_read_done(struct ns *ns, struct ns_read_out *o);

/* append: at the end, whatever off; from_cache: a write-back of a page
 * (no caller: setid bits are not cleared for it). */
int ns_write(struct ns *ns, const struct ns_cred *c, struct ns_file *f, const void *buf,
	     size_t size, uint64_t off, bool append, bool from_cache);
/* Grows the file to off+len if shorter (fallocate without KEEP_SIZE). */
int ns_extend(struct ns *ns, struct ns_file *f, uint64_t off, uint64_t len);
int ns_flush(struct ns *ns, struct ns_file *f);
int ns_fsync(struct ns *ns, struct ns_file *f);
/* The last close of this handle, in two steps so that a commit it triggers
 * does not delay the close: ns_release commits the file's data and returns
 * what the close returns; after the reply, ns_release_done fires the
 * generation rules a close fires and frees f. */
int ns_release(struct ns *ns, struct ns_file *f);
void ns_release_done(struct ns *ns, struct ns_file *f, int rc);
uint64_t ns_file_ino(const struct ns_file *f);

/* ---- generations as seen through xattrs ---- */

/* The generation line of ino's generation (-ENODATA when in none). */
int ns_gen_describe(struct ns *ns, uint64_t ino, char *buf, size_t size);
bool ns_in_generation(struct ns *ns, uint64_t ino);
/* Explicit commit, or pin (pin true) / unpin, of ino's generation: root or
 * the daemon's owner only (-EPERM); -EINVAL when in none. */
int ns_gen_commit(struct ns *ns, const struct ns_cred *c, uint64_t ino);
int ns_gen_pin(struct ns *ns, const struct ns_cred *c, uint64_t ino, bool pinned);

/* For tests only: called in an open's or create's registration as a
 * writer (ns_writer_enter) with the inode, "counting" before its handle is
 * counted, "counted" after (invariant 12). NULL in a daemon. */
extern void (*ns_test_hook)(const char *point, uint64_t ino);

#endif
