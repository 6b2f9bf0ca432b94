/* catalog_internal — what meta/catalog.c shares with meta/generation.c, and
 * nothing outside meta/ may include: the handle, the ids of the prepared
 * statements, and the helpers that bind, step and wrap transactions.
 *
 * Statements live in one array, cat->stmt, indexed by enum cat_sid. The SQL of
 * catalog.c's statements is in its cat_sql table; generation.c's (the G_ ids)
 * is in cat_gen_sql, indexed from S_GEN_FIRST; upload.c's (U_) in cat_up_sql;
 * catalog_refs.c's (R_), the only ones that change reference counts, in
 * cat_refs_sql; catalog_pack.c's (P_) in cat_pack_sql. All are prepared at open.
 *
 * The *_txn functions run inside a transaction the caller opened with
 * cat_begin (or cat_begin_read) under cat_lock, and leave ending it to the
 * caller: an error rolls everything back. */
#ifndef CKPTFS_CATALOG_INTERNAL_H
#define CKPTFS_CATALOG_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "generation.h"
#include "upload.h"

#define CAT_MAX_ARGS 10

enum cat_sid {
	S_BEGIN, S_BEGIN_READ, S_COMMIT, S_ROLLBACK,
	S_SAVEPOINT, S_RELEASE, S_ROLLBACK_TO,

	S_INODE_GET, S_INODE_GET_GEN, S_INODE_TARGET, S_INODE_INSERT, S_INODE_NLINK, S_DIR_TOUCH,
	S_INODE_SETATTR, S_INODE_SETSIZE, S_INODE_DELETE,

	S_DIRENT_GET, S_LOOKUP, S_DIRENT_INSERT, S_DIRENT_DELETE, S_DIRENT_MOVE, S_DIRENT_SET_INO,
	S_DIRENT_PARENT, S_DIR_HAS_ENTRY, S_READDIR,

	S_X_LIST, S_X_TRUNC_DELETE, S_X_TRUNC_SHORTEN,
	S_P_LIST, S_P_TRUNC_DELETE, S_P_TRUNC_SHORTEN,
	S_P_BEFORE, S_P_INSERT, S_P_UNSTORED, S_P_LAST, S_WRITER_START,
	S_WRITING_GET, S_WRITING_SET, S_WRITING_CLEAR,
	S_TO_X_DELETE, S_TO_X_INSERT, S_TO_P_DELETE, S_TO_P_INSERT,

	S_CHUNK_STORED, S_CHUNK_LIST, S_GARBAGE_LIST, S_GARBAGE_DELETE,
	S_CHUNK_EXISTS, S_UPLOAD_SEQ, S_SEQ_BUMP,

	S_RECOVER_P_DELETE, S_RECOVER_X_DELETE, S_RECOVER_INODES,

	S_REL_X_DELETE, S_REL_P_DELETE, S_REL_INODES_DELETE, S_REL_SETSIZE,

	S_STATS_INODES, S_STATS_CHUNKS, S_STATS_EXTENTS,

	S_CHECK_DANGLING, S_CHECK_UNSTORED, S_CHECK_OVERLAP,
	S_CHECK_BAD_EXTENT, S_CHECK_EXTENT_OWNER, S_CHECK_DIRENT, S_CHECK_NLINK,

	/* generation.c's statements (SQL in its cat_gen_sql) */
	S_GEN_FIRST,
	G_INODE_GEN = S_GEN_FIRST, G_STATE, G_INODE_GEN_STATE, G_SET_INODE_GEN, G_ROOT_OF,
	G_INSERT, G_GET, G_PUT, G_MOVE, G_FIND_NAME, G_FIND_STEP, G_LIST, G_OPEN_IDS,

	G_TREE_CLEAR, G_TREE_FILL, G_TREE_FILL_NUMBERED, G_TREE_IDS, G_TREE_COPY_OF,
	G_TREE_SET_GEN, G_TREE_NEW_BYTES, G_TREE_XDEV, G_TREE_NESTED, G_TREE_UNLINK, G_TREE_DIRENTS_DELETE,
	G_TREE_X_DELETE, G_TREE_P_DELETE, G_TREE_INODES_DELETE,

	G_INODE_SEQ, G_CLONE_INODES, G_CLONE_DIRENTS, G_CLONE_EXTENTS,

	G_STATS_FILES, G_STATS_TREE_FILES, G_STATS_EXCL,

	G_CHECK_ROWS, G_CHECK_TREES, G_SERIES_UNDER, G_ID_SEQ_INSERT, G_ID_SEQ_RAISE, G_ID_SEQ_LAST,
	G_KEEP_NEWER, G_UNSETTLED, G_LOST_MARK, G_LOST_MARK_ALL, G_WRITING_CLEAR_ALL,
	G_WRITING_CLEAR_GEN, G_LOST_CHUNK_GENS, G_LOST_CHUNK_OF_GEN,

	/* upload.c's statements (SQL in its cat_up_sql) */
	S_UP_FIRST,
	U_ENQ_CHUNK = S_UP_FIRST, U_ENQ_GEN, U_ENQ_CHUNK_DELETE, U_LIST, U_LIST_PENDING, U_GEN_STATE,
	U_GEN_UNUPLOADED, U_OLDER_MANIFEST_ROW, U_NEWER_REMOVAL_ROW, U_ROW_DELETE, U_CHUNK_UPLOADED,
	U_GEN_DURABLE_SET, U_FAILED, U_LOST_HASHES, U_WHERE, U_SET_CACHED, U_CHUNK_REPUT, U_TOUCH, U_KEEP_CLEAR,
	U_KEEP_PINNED, U_KEEP_INO, U_EVICT, U_STATS_CHUNKS, U_STATS_QUEUE, U_STATS_GENS,
	U_FILE_UNUPLOADED, U_PENDING_UNUPLOADED, U_GEN_NOT_DURABLE, U_TREE_FP, U_TREE_UNUPLOADED,
	U_GEN_BYTES, U_GEN_OUTDATED, U_GEN_ABSORBED, U_TREE_MARK_GET, U_TREE_MARK_SET, U_TREE_MARK_CLEAR,

	/* catalog_refs.c's statements (SQL in its cat_refs_sql), the only ones
	 * that change chunks.refcount: R_<set>_DROP releases, R_<set>_TAKE takes
	 * the references of a set of extent rows, bound like the DELETE or
	 * INSERT of those rows it accompanies */
	S_REFS_FIRST,
	R_X_FROM_DROP = S_REFS_FIRST, /* extents of ?1 at or past ?2 */
	R_P_FROM_DROP,                /* pending of ?1 at or past ?2 */
	R_X_NOT_P_DROP, R_X_NOT_P_TAKE, /* extents of ?1 without an identical pending row */
	R_P_NOT_X_DROP, R_P_NOT_X_TAKE, /* pending of ?1 without an identical extents row */
	R_X_RELEASED_DROP, R_P_RELEASED_DROP, /* of the unlinked inodes of JSON array ?1 */
	R_P_ALL_DROP, R_X_UNLINKED_DROP,      /* recovery at open: no parameter */
	R_X_TREE_DROP, R_X_TREE_TAKE, R_P_TREE_DROP, /* of the inodes in temp.gen_tree */
	R_TAKE_ONE, /* cat_refs_take_one_txn */
	R_CHECK,    /* rows whose count disagrees: hash, refcount, references */

	/* catalog_pack.c's statements (SQL in its cat_pack_sql) */
	S_PACK_FIRST,
	P_BEGIN = S_PACK_FIRST, P_MEMBER, P_LIVE, P_FORGET, P_ORPHANS, P_REMOVABLE, P_REMOVED,
	P_STATS, P_CHECK_LIVE, P_CHECK_NAMED, P_PLACE_PACK, P_PLACE_CHUNK, P_LOOSE, P_UNREVIVE, P_REMOVAL_ROW,

	S_COUNT
};

struct cat_sql {
	const char *purpose; /* completes "cannot …" in a log line */
	const char *sql;
};

extern const struct cat_sql cat_gen_sql[S_UP_FIRST - S_GEN_FIRST];
extern const struct cat_sql cat_up_sql[S_REFS_FIRST - S_UP_FIRST];
extern const struct cat_sql cat_refs_sql[S_PACK_FIRST - S_REFS_FIRST];
extern const struct cat_sql cat_pack_sql[S_COUNT - S_PACK_FIRST];

/* Temporary tables generation.c's statements use (created at open). */
extern const char cat_gen_temp_sql[];
/* Temporary tables upload.c's statements use (created at open). */
extern const char cat_up_temp_sql[];

struct cat_shared; /* meta/catalog_shared.c: the PostgreSQL engine's state */

struct cat {
	sqlite3 *db;
	char *path;
	pthread_mutex_t lock;
	int (*commit_first)(void *arg); /* invariant 14: before every commit */
	void *commit_first_arg;
	int commit_first_rc; /* its last result: the error of a commit it refused */
	sqlite3_stmt *stmt[S_COUNT];
	cat_reclaim_fn reclaim;
	void *reclaim_arg;
	int schema_version;
	bool in_txn; /* between cat_begin and cat_end */
	/* catalog.c invariant 12: an uploaded mark committed since the last
	 * cat_wal_sync (an eviction syncs first); wal_syncs counts the syncs */
	bool uploaded_unsynced;
	uint64_t wal_syncs;
	/* catalog.c invariant 13: file commits that may name objects not known
	 * durable (counted, under the lock), the count when the last objects
	 * sync that succeeded began, and the sync (NULL: none) */
	uint64_t objects_seq, objects_synced_seq;
	bool objects_syncing; /* a sweep's objects sync runs, the lock released */
	cat_objects_sync_fn objects_sync;
	void *objects_sync_arg;
	bool in_read_of_deferred; /* a cat_begin_read inside the deferred transaction */
	/* the deferred transaction (catalog_defer.c): changes in it, since when */
	unsigned deferred;
	int64_t deferred_since_ns; /* CLOCK_MONOTONIC */
	int64_t deferred_changes;  /* sqlite3_total_changes64 after the last change */
	unsigned defer_ms;         /* the window, if defer_ms_set (cat_defer_window) */
	bool defer_ms_set;
	bool defer_sweep;          /* a change in it may have dropped counts (D5) */
	int64_t defer_upload_floor; /* uploads.seq allocated before it began (D6) */
	/* the newest uploads.seq a tree manifest on BACKING describes the state
	 * after (upload.h U5 c, cat_tree_described) */
	uint64_t up_tree_described;
	/* generations it changed, for D4 (defer_gens_all: more than fit) */
	uint64_t defer_gens[8];
	unsigned n_defer_gens;
	bool defer_gens_all;
	/* generations whose deferred changes were lost (D4): never committed */
	uint64_t *lost_gens;
	size_t n_lost_gens;
	bool lost_gens_all;
	/* D10: files created in the deferred transaction (defer_created),
	 * and those a lost one took, with the error that lost them */
	uint64_t *defer_created;
	unsigned n_defer_created, cap_defer_created;
	struct cat_lost_file { uint64_t ino; int err; } *lost_files;
	size_t n_lost_files; /* read unlocked (atomic) by cat_file_lost's fast path */
	/* D9: their G7 lost mark is not in the catalog yet (it failed):
	 * retried before every later write transaction, which waits for it */
	bool lost_mark_pending;
	/* the intent journal of objects written for deferred chunk rows (D7) */
	int intent_fd;             /* -1 until the first deferral */
	uint64_t intent_len;       /* bytes in it; 0: empty */
	bool intent_sticky;        /* a deferred transaction was lost: kept to the next open */
	pthread_cond_t defer_wake; /* the flusher waits on it with lock */
	pthread_t flusher;
	bool flusher_running, flusher_failed, flusher_stop;
	/* The shared engine (cat_open_shared), NULL alone: then every [engine]
	 * call of this handle goes to PostgreSQL (catalog_shared.c for the
	 * namespace and contents, catalog_shared_gen.c for generations), and
	 * only the [node] calls use db. */
	struct cat_shared *shared;
};

/* The shared engine's namespace handle (catalog_shared.c); shared only. */
struct pgns;
struct pgns *cat_shared_ns(struct cat *cat);
/* catalog_shared_gen.c S8: this node's next lease sweep queues the
 * manifests of every COMMITTED generation not durable; shared only. */
void cat_shared_requeue_later(struct cat *cat);
/* catalog_shared_data.c S11's lock: an eviction's pins (write) against a
 * writer's release (read); shared only. */
pthread_rwlock_t *cat_shared_pins(struct cat *cat);
/* catalog_shared_data.c S12's hashes claimed with no PostgreSQL row;
 * shared only, read and changed under the catalog lock. */
struct csd_absent_set *cat_shared_absent(struct cat *cat);
/* catalog_shared_data.c S16's hashes whose local mark is still to write;
 * shared only, read and changed under the catalog lock. */
struct csd_again_set *cat_shared_again(struct cat *cat);

/* upload.c: ends upload row u inside a transaction (cat_upload_done's work). */
int cat_up_done_txn(struct cat *cat, const struct cat_upload *u);
/* upload.c: the row U_WHERE just stepped to, decoded (both engines' local rows). */
void cat_where_row(struct cat *cat, struct cat_chunk_where *out);

/* A pending extent's fields make sense (lengths, offsets within the chunk). */
bool cat_extent_valid(const struct cat_extent *ext);
/* Adds a pending extent of ino inside a transaction: the overlap check of
 * invariant 3, the chunk's reference (*must_store: its object is to be
 * written), the row. The caller has checked the inode (the SQLite engine
 * against its inodes; the shared one's are PostgreSQL's). */
int cat_pending_insert_txn(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
			   bool *must_store);

/* An argument for cat_bind, typed by the macros below. */
struct cat_arg {
	char type; /* 'i' integer, 't' text, 'b' blob, 'n' null */
	int len;   /* blob length */
	union {
		int64_t i;
		const char *t;
		const void *b;
	};
};
#define A_INT(v) ((struct cat_arg){ .type = 'i', .i = (int64_t)(v) })
#define A_TEXT(v) ((struct cat_arg){ .type = 't', .t = (v) })
#define A_HASH(v) ((struct cat_arg){ .type = 'b', .len = CAT_HASH_LEN, .b = (v) })
#define A_BLOB(v, n) ((struct cat_arg){ .type = 'b', .len = (n), .b = (v) })
#define A_NULL ((struct cat_arg){ .type = 'n' })
/* An integer id where 0 means none: bound as NULL (inodes.gen). */
#define A_ID(v) ((v) != 0 ? A_INT(v) : A_NULL)
#define cat_bind(cat, id, ...)                                                   \
	cat_bind_args((cat), (id), (const struct cat_arg[]){ __VA_ARGS__ },      \
		      (int)(sizeof((const struct cat_arg[]){ __VA_ARGS__ }) /    \
			    sizeof(struct cat_arg)))

/* ---- helpers of catalog.c ---- */

int64_t cat_now_ns(void);
/* generation.h G12: the one warn line for a save held because its chunk (hex)
 * of file name (ino) was lost before its upload; both engines. */
void cat_log_lost_chunk_hold(const struct cat *cat, uint64_t gen_id, const char *hex,
			     const char *name, uint64_t ino);
void cat_hex(const uint8_t *hash, char out[2 * CAT_HASH_LEN + 1]);
void cat_lock(struct cat *cat);
/* Releases the lock; a write made outside a transaction while removals are
 * deferred is committed with them first (catalog_defer.c, D2). */
void cat_unlock(struct cat *cat);

int cat_sql_fail(struct cat *cat, enum cat_sid id, int src);
void cat_reset(struct cat *cat, enum cat_sid id);
int cat_bind_args(struct cat *cat, enum cat_sid id, const struct cat_arg *args, int n);
int cat_next(struct cat *cat, enum cat_sid id);
int cat_run(struct cat *cat, enum cat_sid id);
int64_t cat_col_int(struct cat *cat, enum cat_sid id, int col);
int cat_changes(struct cat *cat);
/* catalog.c invariant 8 under the caller's hold of the lock: cached = 0 on a
 * clean row, then its cache object removed (remove); -ENOENT if no such
 * row was clean and cached. Both engines' evictions end here. */
int cat_chunk_evict_locked(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			   cat_reclaim_fn remove, void *arg);

int cat_begin(struct cat *cat);
int cat_begin_read(struct cat *cat);
int cat_end(struct cat *cat, int rc);
int cat_end_sweep(struct cat *cat, int rc);
/* catalog.c invariant 10: every transaction committed so far is on stable
 * storage (WAL and main file synced through SQLite's own descriptors).
 * Under the lock, outside a transaction. */
int cat_wal_sync(struct cat *cat);
int cat_sync_locked(struct cat *cat);
/* Reclaims chunks at count zero, a batch per transaction (outside one). */
int cat_sweep(struct cat *cat);

int cat_name_check(const char *name);
/* The local chunks table's counts into out (both engines: in shared mode it
 * is this node's cache); in a read, under cat_lock. */
int cat_stats_chunks(struct cat *cat, struct cat_stats *out);
int cat_inode_get(struct cat *cat, uint64_t ino, struct cat_inode *out);
/* cat_inode_get and cat_gen_of_txn in one statement (0 outside generations). */
int cat_inode_get_gen(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id);
int cat_dirent_get(struct cat *cat, uint64_t parent, const char *name, uint64_t *id,
		   struct cat_inode *out);
int cat_dirent_insert(struct cat *cat, uint64_t parent, const char *name, uint64_t ino);
int cat_dirent_delete(struct cat *cat, uint64_t id);
int cat_dir_touch(struct cat *cat, uint64_t dir, int delta, int64_t now);

/* ---- the deferred transaction of catalog_defer.c (lock held) ---- */

/* Commits the deferred transaction, if any (D2; a failure is logged, its
 * changes are lost: D4), then sweeps if a change in it dropped counts (D5). */
int cat_defer_flush(struct cat *cat);
/* At cat_unlock (D2): commits the deferred transaction if anything but
 * deferred changes changed rows in it; notes it if SQLite dropped it. */
void cat_defer_settle(struct cat *cat);
/* Opens a savepoint for one change in the deferred transaction (opening
 * that first), on behalf of generation gen (0: a change no generation owns,
 * cat_chunk_stored's); -EAGAIN if deferring is off or impossible (then
 * commit as usual). */
int cat_defer_begin(struct cat *cat, uint64_t gen);
/* Ends the change: kept in the deferred transaction when rc is 0, rolled
 * back to its savepoint otherwise (D4). Returns rc. */
int cat_defer_end(struct cat *cat, int rc);
/* At close: stops the flusher and commits what is deferred. */
void cat_defer_stop(struct cat *cat);

/* A change to the inode ino, or to an entry of the directory ino: in the
 * deferred transaction when ino is in an OPEN generation (D1), else in a
 * transaction of its own (cat_begin). *deferred says which, for
 * cat_change_end. */
int cat_change_begin(struct cat *cat, uint64_t ino, bool *deferred);
/* Ends what cat_change_begin opened. may_drop: the change may have dropped
 * chunk counts, so a sweep follows its commit (at once, or after the
 * deferred transaction's: D5). Returns rc, or the commit's failure. */
int cat_change_end(struct cat *cat, bool deferred, int rc, bool may_drop);
/* D7: an object is about to be written for a chunk row that exists only in
 * the deferred transaction: its hash goes to the intent journal first.
 * Commits the deferred transaction instead if the journal cannot take it
 * (then the row is committed); -EIO if that fails too (the row is gone). */
int cat_defer_intent(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
/* D7 at open, after recovery: objects of a deferred transaction a crash
 * lost are reclaimed, inode numbers it may have handed out are skipped. */
int cat_defer_recover(struct cat *cat);
/* D6: the highest uploads.seq the uploader may see (the deferred
 * transaction's rows stay hidden until it commits). */
int64_t cat_defer_upload_floor(struct cat *cat);
/* D10: a file created by this change (ino), in the deferred transaction:
 * noted, so that its loss is told to its handles. */
void cat_defer_note_created(struct cat *cat, uint64_t ino);
/* D10: the number ino names a new file (a lost one's numbers reused). */
void cat_defer_reused(struct cat *cat, uint64_t ino);
/* D4: were changes of generation gen lost with a deferred transaction? */
bool cat_defer_gen_lost(struct cat *cat, uint64_t gen);
/* D9: the lost mark D4 could not write, tried again (outside any
 * transaction): 0 once it is in the catalog (or none is pending), else its
 * error (-ENOSPC for a full disk), which the write transaction about to
 * begin answers instead. */
int cat_defer_mark_retry(struct cat *cat);

/* ---- generation bookkeeping of generation.c, called by catalog.c ---- */

/* The generation of ino (0 for none); -ENOENT if there is no such inode. */
int cat_gen_of_txn(struct cat *cat, uint64_t ino, uint64_t *gen_id);
/* Whether ino is in an OPEN generation (*gen_id: which, if so): a crash
 * would undo any change under it (G4), so its changes may be deferred
 * (catalog_defer.c). */
int cat_gen_in_open_txn(struct cat *cat, uint64_t ino, bool *open, uint64_t *gen_id);
/* Starts an OPEN generation rooted at the new inode root, just linked as
 * series/name (cat_create_in_gen). */
int cat_gen_start_txn(struct cat *cat, uint64_t series, uint64_t root, const char *name,
		      uint64_t step, uint64_t *gen_id);
/* After inode `moved` (with attributes *attr) was linked as newparent/newname
 * by a rename: ends a generation it was the root of, starts a new one for
 * spec, and gives its subtree the generation of its new place. A directory
 * moved outside generations queues the manifests of the committed
 * generations whose series it holds again (they name it by path). */
int cat_gen_moved_txn(struct cat *cat, const struct cat_inode *attr, uint64_t newparent,
		      const char *newname, const struct cat_gen_spec *spec, uint64_t *new_gen_id);
/* After ino lost an entry (unlink, rmdir, rename over it): if it was a
 * generation root, that generation is DELETED with rule. */
int cat_gen_unlinked_txn(struct cat *cat, uint64_t ino, const char *rule);
/* G4 at open: holds every OPEN generation (a new version gives way to its
 * backup), with a reason that keeps it from the content rule when a file of
 * it was being written (G7); then clears every mark. */
int cat_gen_recover_txn(struct cat *cat);
/* catalog_defer.c D4: marks the roots of OPEN generations whose deferred
 * changes a failed transaction lost (ids[0..n), or every OPEN one with all),
 * so that the next open holds them as such (G7). Runs on its own (autocommit). */
int cat_gen_mark_lost(struct cat *cat, const uint64_t *ids, size_t n, bool all);
/* G1–G3, counting violations (each logged). */
int cat_gen_check_txn(struct cat *cat, int *violations);

/* ---- reference counts of catalog_refs.c (catalog invariant 1) ---- */

/* The set of rows a change touches and the set whose counts move must be the
 * same (catalog_refs.c invariant 1), so both sides build them from these. */
/* Row A (an alias or table name) has an identical row in table B: a commit
 * and a writer's start touch only the rows that differ (catalog.c's
 * CAT_SQL_SYNC_*, catalog_refs.c's *_NOT_* sets). */
#define CAT_SQL_SAME(A, B)                                                              \
	"EXISTS (SELECT 1 FROM " B " s WHERE s.ino = " A ".ino AND s.off = " A ".off"       \
	" AND s.len = " A ".len AND s.hash = " A ".hash AND s.chunk_off = " A ".chunk_off)"
/* The inodes of the JSON array ?1 that have no link left (batched release,
 * catalog.c; its set of rows, catalog_refs.c). */
#define CAT_SQL_RELEASED \
	"SELECT ino FROM inodes WHERE ino IN (SELECT value FROM json_each(?1)) AND nlink = 0"

/* Takes one reference on chunk hash for a new pending row, creating its row
 * (stored_len unset) if there is none. *row_plain_len gets the row's plain
 * length (the caller compares it with the extent's), *must_store whether
 * the object is not known to be written (no stored_len, or the row was at
 * count 0: catalog invariant 2). */
int cat_refs_take_one_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			  uint64_t plain_len, uint64_t *row_plain_len, bool *must_store);
/* The statement manifest.c prepares to insert a manifest's chunk row and
 * take ?5 references on it (?1 hash, ?2 plain_len, ?3 codec, ?4 stored_len;
 * RETURNING the row's plain_len), for a catalog at schema_version. */
const char *cat_refs_manifest_sql(int schema_version);

/* ---- write-back bookkeeping of upload.c, called by catalog.c and generation.c ---- */

/* A chunk's object was just written to the cache: dirty, queued for upload. */
int cat_up_chunk_stored_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
/* A chunk row is about to be deleted (count zero, object reclaimed from the
 * cache): queue its removal from BACKING if it is or may be there. */
int cat_up_chunk_gone_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
/* A generation was committed at version: queue its manifest. */
int cat_up_gen_committed_txn(struct cat *cat, uint64_t gen, uint32_t version);
/* A generation was deleted: queue removal of its manifests up to version. */
int cat_up_gen_deleted_txn(struct cat *cat, uint64_t gen, uint32_t version);
/* upload.h's cat_tree_fingerprint inside the caller's read transaction
 * (manifest.c's tree build: the fingerprint, the check and the manifest of
 * one snapshot, upload.h U5). */
int cat_tree_fingerprint_txn(struct cat *cat, char *buf, size_t size, bool *all_uploaded);

#endif
