/* catalog — the catalog interface: the namespace, file contents as chunk
 * lists, chunk reference counts. This header (with generation.h, upload.h
 * and manifest.h) is the only way the rest of ckptfs touches the catalog, and
 * it names no type or call of an engine: struct cat is opaque. One engine
 * implements it today, SQLite, one file per node (meta/catalog.c and its
 * siblings; the schema and its versioning in meta/SCHEMA.md). A second one,
 * PostgreSQL shared by several nodes (issue 18), implements the calls marked
 * [engine] below with the same guarantees.
 *
 * ---- The engine contract ----
 *
 * [engine] The namespace's interface: what the namespace layer (fs/ns.c),
 * the generation policy and the reader call. An engine provides all of them.
 *   reads:   cat_getattr, cat_getattr_gen, cat_lookup, cat_readlink, cat_readdir,
 *            cat_extents, cat_pending_extents; generation.h's cat_gen_of, cat_gen_get*,
 *            cat_gen_find*, cat_gen_list*.
 *   changes: cat_create, cat_link, cat_unlink, cat_rmdir, cat_rename,
 *            cat_setattr, cat_inode_release; cat_pending_add,
 *            cat_chunk_stored, cat_pending_from_committed, cat_pending_drop,
 *            cat_pending_truncate, cat_file_commit, cat_file_truncate,
 *            cat_sync; generation.h's cat_create_in_gen, cat_rename_gen and
 *            the state changes cat_gen_commit/hold/abort/delete/expire/
 *            reopen/pin.
 *   batches: cat_inodes_release, cat_inodes_drop_data.
 * Guarantees:
 *  - Atomicity. Each change is one transaction: the namespace rows, their
 *    generation bookkeeping (generation.h G1–G5), the chunk counts of the
 *    extent rows it adds or removes (invariant 1) and the upload rows it
 *    implies (upload.h) commit together or not at all. A failed call changes
 *    nothing. A batch is a few such transactions, each atomic; a crash part
 *    way leaves the rest unlinked (nlink 0) for the next open's recovery.
 *  - Ordering. Calls on one struct cat are serialized: each sees every call
 *    that returned before it began (the SQLite engine: one connection, one
 *    mutex). Callbacks (cat_readdir's, cat_chunks', a generation call's
 *    cat_ino_fn) run with nothing held and may call back in.
 *  - Durability. A change that returned survives a crash of the daemon,
 *    except a change inside an OPEN generation, which may be group committed
 *    a moment later (catalog_defer.c, D1–D7): what a crash leaves is a prefix
 *    of what the calls returned, and recovery rolls those generations back
 *    anyway (G4). cat_file_commit(durable) and cat_sync survive a crash of
 *    the machine.
 *  - Reclaim. A chunk whose count reaches 0 is handed to the reclaim callback
 *    only after the commit that dropped the count, then its row is deleted; a
 *    refused one stays for a later sweep (at the latest at open).
 *  - Errors: 0 or a negative errno (-ENOENT, -EEXIST, -ENOTEMPTY, -ENOTDIR,
 *    -EISDIR, -EINVAL, -EXDEV, ...); -EIO for a failure of the engine, which
 *    is logged.
 *
 * [node] This node's write-back cache state (upload.h: chunk locations,
 * eviction, the upload queue, durable versions): local to a node in every
 * engine (issue 18 keeps it in the node's SQLite beside a shared namespace).
 *
 * [open] Opening and tuning: cat_open, cat_open_readonly, cat_close,
 * cat_catalog_id, cat_stats, cat_chunks, cat_check (invariants 1–3, the
 * namespace's and generation.h's), and the group commit's cat_defer_window,
 * cat_defer_commit, cat_defer_active (an engine without group commit makes
 * them no-ops: nothing is ever deferred). What names the catalog (here a file
 * path) is the engine's.
 *
 * [SQLite] Only this engine's, for tools and tests: cat_integrity (PRAGMA
 * quick_check / integrity_check), cat_schema_version (SCHEMA.md's versions),
 * tools' read-only queries (admin_query.h), and the implementation of
 * manifest.h's build and apply (the rebuild of a catalog from BACKING),
 * which read and write this engine's tables directly; the manifest format
 * (docs/FORMAT.md) belongs to no engine. A second engine brings its own.
 *
 * The SQLite engine: one connection, one mutex; every call is BEGIN
 * IMMEDIATE … COMMIT under the mutex; journal WAL, synchronous=NORMAL (a
 * durable commit then fsyncs the WAL: catalog.c invariant 10). SCHEMA.md lists which of its statements use syntax
 * only SQLite accepts.
 *
 * Invariants (asserted by cat_check):
 *  1. chunks.refcount == number of rows in extents + pending referencing the
 *     hash (kept by one module, meta/catalog_refs.c). A chunk row with
 *     refcount 0 is garbage: the reclaim callback is called for it (the object
 *     is removed) and then the row is deleted — at the end of every call that
 *     can drop a count, and at open.
 *  2. A committed file's extents reference only chunks with stored_len set
 *     (the object is written).
 *  3. Extents of one inode, in extents or in pending, never overlap; bytes of a
 *     file not covered by an extent read as zeros (holes).
 *  4. pending rows belong to writers of this process only: cat_open drops them
 *     all (and the counts they held), and deletes inodes with nlink 0.
 *  5. The root directory is inode 1; inode numbers are never reused. */
#ifndef CKPTFS_CATALOG_H
#define CKPTFS_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CAT_SCHEMA_VERSION 7
#define CAT_ROOT_INO 1
#define CAT_HASH_LEN 32
#define CAT_NAME_MAX 255

struct cat;

struct cat_inode {
	uint64_t ino;
	uint32_t mode;   /* type and permission bits, as in st_mode */
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t size;
	uint64_t rdev;
	int64_t atime_ns, mtime_ns, ctime_ns; /* since the epoch */
};

/* One piece of a file: file bytes [off, off+len) are chunk `hash` bytes
 * [chunk_off, chunk_off+len). */
struct cat_extent {
	uint64_t off;
	uint64_t len;
	uint64_t chunk_off;
	uint64_t chunk_len; /* the chunk's plain length */
	uint8_t hash[CAT_HASH_LEN];
};

/* Called under the catalog mutex, once per chunk whose count reached zero,
 * before its row is deleted. Must remove the object (ENOENT is success). A
 * non-zero return keeps the row for a later sweep. */
typedef int (*cat_reclaim_fn)(void *arg, const uint8_t hash[CAT_HASH_LEN]);
/* Makes every cache object stored so far durable (the store's syncfs); 0 or
 * -errno. The sweep calls it with the catalog mutex released, before the
 * WAL sync that precedes its first reclaim (catalog.c invariant 13). */
typedef int (*cat_objects_sync_fn)(void *arg);

/* ---- open / close [open] ---- */

/* Opens or creates the catalog file at path. Creates the schema and the root
 * directory (mode 0755, owner root_uid/root_gid) on first use. Refuses a
 * catalog whose schema version is newer than CAT_SCHEMA_VERSION with -EPROTO
 * (and a log line naming the file and both versions), and a file that is not a
 * catalog with -EINVAL. Migrates an older catalog in place, in one transaction
 * (SCHEMA.md). A file that fails SQLite's quick_check (cat_integrity) is
 * refused with -EIO before anything is written to it; after an unclean stop
 * (a WAL file left behind) the full integrity_check runs instead. Rolls back
 * open generations (G4 of generation.h), then runs the recovery of invariant
 * 4 and a zero-count sweep (with the reclaim callback, if given). */
int cat_open(const char *path, uint32_t root_uid, uint32_t root_gid,
	     cat_reclaim_fn reclaim, void *reclaim_arg, struct cat **out);
/* Opens an existing catalog read-only (no recovery, no sweep): for tools
 * that look while the daemon runs. Write calls on it fail with -EROFS. An
 * older schema version is refused with -EPROTO (it cannot be migrated
 * read-only). */
int cat_open_readonly(const char *path, struct cat **out);
/* The schema version stored in the catalog file at path (PRAGMA
 * user_version), read-only, logging nothing: whether cat_open_readonly can
 * read it before it says it cannot. When the file cannot be read: -EIO
 * (damaged: SQLite's CORRUPT, IOERR, ...), -EINVAL (not an SQLite
 * database), -EACCES, -EBUSY or -ENOMEM, and why (if not NULL) gets
 * SQLite's reason ("database disk image is malformed"). */
int cat_file_schema_version(const char *path, int *version, char *why, size_t why_size);
/* Whether the catalog is a node's local one (meta role 'node', invariant 9):
 * a read-only open does not check its role. 0, or -errno. */
int cat_role_node(struct cat *cat, bool *node);

struct store;

/* ---- the shared engine (issue 18, docs/MULTINODE.md) [open] ----
 * cat_open_shared opens this node's local SQLite catalog at local_path (its
 * [node] state: cache objects, upload queue, pending extents of its writers)
 * and the shared namespace in PostgreSQL at cfg->url, registers this node's
 * lease there, and returns one struct cat whose [engine] calls go to
 * PostgreSQL (meta/catalog_shared.c) and whose [node] calls stay local. */
struct cat_shared_cfg {
	const char *url;       /* postgresql://… (libpq URL) */
	const char *node_name; /* shown by `ckptfs-admin nodes`: host:pid and cache dir */
	unsigned lease_ms;     /* the node lease's term; renewed by cat_lease_renew */
	unsigned timeout_ms;   /* how long a call rides out an unreachable database */
	/* the caller holds the cache's lock (CACHE/lock) for its life: every
	 * earlier node of this cache is gone, and is expired and settled at once,
	 * before cat_open_shared returns (lease.h L10). false: the node's row
	 * names no cache (a tool's node, with a catalog of its own) */
	bool cache_locked;
	/* with cache_locked: the descriptor of CACHE/lock the caller holds; its
	 * (st_dev, st_ino) is part of the cache's identity, which a copy of the
	 * cache directory does not have (lease.h L10) */
	int cache_lock_fd;
	/* with cache_locked: the cache's chunk store (CACHE/chunks, small.db).
	 * At the take-over, the chunks PostgreSQL says only the earlier nodes of
	 * this cache held and BACKING lacks are taken back from it: each object
	 * whose plain bytes pass SHA-256 becomes this node's, cached and dirty,
	 * its upload queued, though the local catalog forgot it (its WAL lost:
	 * catalog_shared.c S18). NULL: the local catalog's rows alone count */
	struct store *cache_store;
};
int cat_open_shared(const char *local_path, const struct cat_shared_cfg *cfg,
		    uint32_t root_uid, uint32_t root_gid, cat_reclaim_fn reclaim,
		    void *reclaim_arg, struct cat **out, char *err, size_t err_size);
bool cat_is_shared(const struct cat *cat);
/* This node's id in the shared catalog (ckpt_nodes.id); 0 alone. */
uint64_t cat_node_id(const struct cat *cat);
/* This node's lease term in ms (lease_ms); 0 alone. The daemon's reclaim
 * duty runs with the same term (fs/main.c: a turn every third of it). */
unsigned cat_lease_ms(const struct cat *cat);
/* The daemon is stopping [engine]: shared, both connections wait out one
 * outage each from now on, not one per call (pg.h P8); alone, nothing.
 * NULL is allowed. */
void cat_stopping(struct cat *cat);
/* The FUSE path connection's counters (pg.h: round trips, transactions,
 * retries, reconnects) for the daemon's stats; false alone (nothing filled). */
/* The path of directory ino from the mount root ("/run1") [engine], shared
 * only: for the daemon's control answers (ckptfs-admin on a node, whose
 * local catalog holds no namespace); alone -ENOSYS (aq_path). */
int cat_shared_path(struct cat *cat, uint64_t ino, char *buf, size_t size);
struct pg_stats;
bool cat_pg_stats(const struct cat *cat, struct pg_stats *out);
/* A file opened (open = true) or last closed for writing on this node
 * [engine]: shared, its ns_writing row, which holds its generation's commit
 * (pggen.h); alone, nothing (the daemon's node table knows). */
int cat_writing(struct cat *cat, uint64_t ino, bool open);
/* cat_writing, and the generation of ino (*gen_id, 0: none) and its state
 * (*gen_state, -1: none) as the same statement read them [engine]; alone,
 * 0 and -1 (the daemon's policy knows its own commits). Either may be NULL. */
int cat_writing_state(struct cat *cat, uint64_t ino, bool open, uint64_t *gen_id, int *gen_state);
/* cat_writing(open = true) for a handle still open on this node whose flush
 * dropped the row (fs/ns.h invariant 14) and that writes again [engine]:
 * shared, the row back, without the failed flag's clearing an open does
 * (pggen.h X14, X15); alone, nothing. */
int cat_writing_resume(struct cat *cat, uint64_t ino);
/* The flush of this node's only write handle of ino, which published it,
 * parks the handle (fs/ns.h invariant 14) [engine]: shared, its ns_writing
 * row dropped and its ns_open row, marked parked, kept in its place in one
 * statement (pggen.h X12, X15; the next cat_writing or cat_writing_resume
 * ends the mark); alone, nothing. */
int cat_writing_park(struct cat *cat, uint64_t ino);
/* The parked mark of this node's ns_open row of ino, which the last
 * close's statements could not end, ended late (fs/ns.h invariant 15)
 * [engine]: shared, the mark alone (pggen.h X15), and ino's generation
 * (*gen_id, 0: none) and its state (*gen_state, -1: none) as that
 * statement read them; alone, nothing (0 and -1). */
int cat_writing_unpark(struct cat *cat, uint64_t ino, uint64_t *gen_id, int *gen_state);
/* A write or close of ino on this node failed [engine]: shared, its failed
 * flag set, which holds its save from every rule but an explicit decision
 * after its ns_writing row is gone (pggen.h X14); alone, nothing (the
 * being-written mark stays: generation.h G9). */
int cat_file_failed(struct cat *cat, uint64_t ino);
/* The first handle of ino on this node that is not for writing opened
 * (open = true), or the last handle closed, while none for writing is open
 * there [engine]: shared, its ns_open row, which keeps an unlinked inode
 * from being released by another node (pgns.h N14); *release (may be NULL)
 * then says that the inode is unlinked and open nowhere else. Alone,
 * nothing. */
int cat_opened(struct cat *cat, uint64_t ino, bool open, bool *release);
/* The node lease (shared only; alone they return 0 and do nothing):
 * renew it (-ESTALE once another node swept it: the node must stop
 * changing shared state; a lease that ran out but was not swept is renewed,
 * lease.h L1), and sweep other nodes past theirs and the grace (L4), holding their open generations
 * and marking lost the generations that name chunks only they had. */
int cat_lease_renew(struct cat *cat);
int cat_lease_sweep(struct cat *cat, size_t *swept);
/* Whether chunk hash's object on BACKING is whole: read, decoded, its
 * SHA-256 equal to hash and plain_len plain bytes (never its presence or
 * size alone). 1 whole, 0 absent, -EIO damaged (*why says how), another
 * negative errno when BACKING could not be read. */
typedef int (*cat_backing_check_fn)(void *arg, const uint8_t hash[CAT_HASH_LEN],
				    uint64_t plain_len, const char **why);
/* cat_lease_sweep, and a bounded batch of the chunks that lost generations
 * name, whose holder is gone and that the catalog does not call uploaded,
 * looked for on BACKING with check(arg, ...): each found whole is marked
 * uploaded, so a save whose bytes all reached BACKING is found whole again
 * (pggen.h X11). check NULL: cat_lease_sweep. */
int cat_lease_sweep_backing(struct cat *cat, cat_backing_check_fn check, void *arg,
			    size_t *swept);
/* One turn of the cluster's chunk reclaim duty (catalog_shared_reclaim.c;
 * shared only, alone 0 and nothing): takes or extends duty "reclaim" for
 * term_ms; its holder removes from BACKING, with remove(arg, path) (a path
 * relative to BACKING; absent is success), the manifests of ended
 * generations and the objects of chunks no file names and no writer pins
 * (pgns.h N6), once no manifest a rebuild would apply names them (R7), and
 * their rows. A node past its lease removes nothing. */
typedef int (*cat_backing_remove_fn)(void *arg, const char *path);
struct cat_reclaim_report {
	bool held;       /* this node holds the duty */
	uint64_t chunks; /* chunk rows reclaimed */
	uint64_t removed; /* of them, objects removed from BACKING */
	uint64_t failed;  /* removals that failed (kept for the next turn) */
	uint64_t manifests; /* ended generations whose manifests left BACKING */
};
int cat_reclaim_turn(struct cat *cat, unsigned term_ms, cat_backing_remove_fn remove, void *arg,
		     struct cat_reclaim_report *out);
/* A cluster duty (e.g. "keep": keep-latest-k), held by one live node at a
 * time (meta/lease.h L3): take or extend it for term_ms, *taken says whether
 * this node holds it now; drop it when the work is done so another node's
 * turn need not wait for the term. Alone: always taken, drop does nothing.
 * A node past its lease never takes it (-ESTALE). */
int cat_duty_take(struct cat *cat, const char *name, unsigned term_ms, bool *taken);
int cat_duty_drop(struct cat *cat, const char *name);
void cat_close(struct cat *cat); /* NULL is allowed; commits deferred removals */
/* Sets the sweep's objects sync (catalog.c invariant 13) of a catalog alone;
 * without one (tools, tests) the sweep reclaims without syncing objects. */
void cat_set_objects_sync(struct cat *cat, cat_objects_sync_fn fn, void *arg);
/* The group-commit window of changes inside OPEN generations (cat_unlink,
 * cat_create, file contents: meta/catalog_defer.c); 0 commits each on its
 * own. For tests and tuning. */
void cat_defer_window(struct cat *cat, unsigned ms);
/* Commits the changes deferred so far, now (catalog_defer.c): before an
 * unmount drains the upload queue, whose rows of them are hidden until then. */
int cat_defer_commit(struct cat *cat);
/* Whether changes are deferred right now (a hint, read without the lock): a
 * chunk stored now is hidden from the uploader until their commit. */
bool cat_defer_active(struct cat *cat);
int cat_schema_version(struct cat *cat); /* [SQLite] the version stored in the file */
/* The catalog's random id (meta.catalog_id, 32 lowercase hex digits, made
 * when the catalog is created or migrated to version 4): what claims BACKING
 * for this catalog (fs/lib/claim.h). buf needs 33 bytes. */
int cat_catalog_id(struct cat *cat, char *buf, size_t size);
/* [shared] The store id (the id in BACKING's marker ckptfs.store) as the
 * shared catalog records it, and what it calls saved on BACKING (meta/pgns.h
 * N15): id "" when none is recorded; durable generations and the newest
 * (id and the version whose manifest is on BACKING; 0 when none); whether
 * any chunk is marked uploaded. Alone: -EOPNOTSUPP (the cache's
 * CACHE/backing-id keeps it, fs/main.c M1). */
struct cat_store_facts {
	char id[33];
	uint64_t durable;
	uint64_t newest;
	uint32_t version;
	bool uploaded;
	bool marked; /* a node found or wrote BACKING's marker with the id */
};
int cat_store_facts(struct cat *cat, struct cat_store_facts *out);
/* [shared] Records that BACKING's marker carries the recorded store id
 * (after the marker was found or written so): from then on a BACKING
 * without a marker is refused, saves or none. Alone: -EOPNOTSUPP. */
int cat_store_marked(struct cat *cat);
/* [shared] Records id as the store id unless one is recorded already;
 * held (33 bytes) gets the one recorded after: id, or another node's that
 * came first. Alone: -EOPNOTSUPP. */
int cat_store_id_offer(struct cat *cat, const char *id, char *held);
/* [SQLite] Whether this catalog ever held BACKING's claim (meta.claimed), and
 * recording that it did: a catalog that did may take a released or stale
 * claim only if it is its own (fs/lib/claim.h invariant 8). */
int cat_claimed(struct cat *cat, bool *out);
int cat_claimed_set(struct cat *cat);
/* [SQLite] The catalog's ledger of takes of BACKING's claim (fs/lib/claim.h
 * invariant 12: meta rows claim_take and claim_take_next), its note
 * recording new ones in this catalog; a shared catalog's is empty, with no
 * note. 0 or -errno (a row that does not parse: -EINVAL, logged). */
struct claim_ledger;
int cat_claim_ledger(struct cat *cat, struct claim_ledger *out);

/* ---- namespace [engine] ---- */

int cat_getattr(struct cat *cat, uint64_t ino, struct cat_inode *out);
/* cat_getattr and generation.h's cat_gen_of in one read (with a shared
 * catalog one round trip, pgns.h N10): what a change of ino asks first. */
int cat_getattr_gen(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id);
int cat_lookup(struct cat *cat, uint64_t parent, const char *name, struct cat_inode *out);

/* Creates a directory entry and a new inode (regular file, directory, fifo,
 * socket, device node, or symlink when target != NULL — then mode must be
 * S_IFLNK|0777 and size is strlen(target)). Times are now; the parent's mtime
 * and ctime are updated, its nlink too for a directory. -EEXIST if the name
 * exists, -ENOTDIR if parent is not a directory, -ENOENT if it does not exist. */
int cat_create(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
	       uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
	       struct cat_inode *out);

/* Hard link: a new entry for an existing non-directory inode; nlink++.
 * -EXDEV if the inode and newparent are in different generations. */
int cat_link(struct cat *cat, uint64_t ino, uint64_t newparent, const char *newname,
	     struct cat_inode *out);

/* Removes a non-directory entry (-EISDIR for a directory); nlink--. The inode
 * itself stays (nlink may reach 0) until cat_inode_release. *ino_out gets the
 * inode the name referred to.
 *
 * cat_unlink and cat_rmdir with a parent inside an OPEN generation are group
 * committed (meta/catalog_defer.c): the call returns before its commit, which
 * follows within the window (10 ms by default), or before any other
 * transaction. A crash can lose only such removals, and recovery rolls back
 * their generation anyway (G4), so what a crash leaves is unchanged. Every
 * other removal commits before it returns. */
int cat_unlink(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out);

/* Removes an empty directory (-ENOTEMPTY, -ENOTDIR). The inode gets nlink 0
 * and is deleted by cat_inode_release. */
int cat_rmdir(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out);

#define CAT_RENAME_NOREPLACE 1u /* = RENAME_NOREPLACE */
#define CAT_RENAME_EXCHANGE 2u  /* = RENAME_EXCHANGE */

/* POSIX rename, atomically: over an existing target (a file over a file, a
 * directory over an empty directory: else -EISDIR / -ENOTDIR / -ENOTEMPTY), a
 * directory never into its own subtree (-EINVAL), flags as above (-EEXIST for
 * NOREPLACE over an existing name, -ENOENT for EXCHANGE with a missing one).
 * Renaming a name onto itself (same inode) is a no-op success. *replaced_ino
 * gets the inode whose entry was replaced (its nlink dropped), else 0.
 * Generations follow as in cat_rename_gen (generation.h) with no new one;
 * -EXDEV if the move would carry a hard link across a generation boundary. */
int cat_rename(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
	       const char *newname, unsigned flags, uint64_t *replaced_ino);

#define CAT_SET_MODE  (1u << 0)
#define CAT_SET_UID   (1u << 1)
#define CAT_SET_GID   (1u << 2)
#define CAT_SET_ATIME (1u << 3)
#define CAT_SET_MTIME (1u << 4)
#define CAT_SET_CTIME (1u << 5)

/* Sets the fields named in `what` from `in` (mode keeps the file type bits of
 * the inode; only permission bits 07777 are taken from in->mode). ctime is set
 * to now unless CAT_SET_CTIME is given. Size is not set here (cat_file_truncate). */
int cat_setattr(struct cat *cat, uint64_t ino, unsigned what, const struct cat_inode *in,
		struct cat_inode *out);

int cat_readlink(struct cat *cat, uint64_t ino, char *buf, size_t size); /* -EINVAL if not a symlink; truncates like readlink(2), NUL-terminated */

/* Lists directory entries after `cookie` (0 = from the start, including "."
 * and ".."). The callback gets each entry with the cookie that resumes after
 * it, and returns non-zero to stop (buffer full). Cookies are stable across
 * concurrent creates and unlinks. */
typedef int (*cat_dirent_fn)(void *arg, const char *name, const struct cat_inode *attr,
			     uint64_t next_cookie);
int cat_readdir(struct cat *cat, uint64_t dir, uint64_t cookie, cat_dirent_fn fn, void *arg);

/* Deletes the inode if its nlink is 0 (the kernel has forgotten it and no
 * handle is open): its extents are dropped (counts decremented, chunks at zero
 * reclaimed). A no-op for an inode that still has links. */
int cat_inode_release(struct cat *cat, uint64_t ino);

/* cat_inode_release for many inodes at once: those of inos[0..n) with nlink
 * 0 are deleted, others (and missing ones) are skipped. Runs in transactions
 * of a few hundred inodes, each followed by the sweep, with the lock
 * released in between. A crash part way leaves the rest with nlink 0, which
 * the next cat_open releases. */
int cat_inodes_release(struct cat *cat, const uint64_t *inos, size_t n);

/* Drops the committed contents of the unlinked (nlink 0) regular files among
 * inos[0..n), as cat_file_truncate to 0 would, keeping their rows: for
 * inodes the kernel still holds with no handle open, which nothing can read
 * any more. Batched like cat_inodes_release. */
int cat_inodes_drop_data(struct cat *cat, const uint64_t *inos, size_t n);

/* ---- file contents [engine] ---- */

/* Fills up to max extents of the committed file ino that end after `off`,
 * in offset order. Returns how many (0 past the last), or a negative errno. */
int cat_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out, int max);
/* The same for the writer's pending extents. */
int cat_pending_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out,
			int max);

/* Adds a pending extent to a file being written: takes a reference on the
 * chunk (creating its row with stored_len unset if new). *must_store is set
 * when the chunk's object is not known to be written: the caller must write
 * it and then call cat_chunk_stored. */
int cat_pending_add(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
		    bool *must_store);

/* Invariant 14 of catalog.c: fn(arg) runs before every commit of the
 * catalog's connection (the deferred group commit, cat_begin's
 * transactions, autocommit statements), under the catalog's lock, and
 * commits what the rows committed may name (fs/lib/storesmall.h T8:
 * small.db's open batch). A non-zero return (-errno) refuses the commit: it
 * becomes a rollback and the call fails with that error. fn must not call
 * into the catalog. NULL removes it. The SQLite engine only: -ENOTSUP on a
 * node of the shared catalog (-o meta=), whose commits are PostgreSQL's. */
int cat_commit_first(struct cat *cat, int (*fn)(void *arg), void *arg);

/* Records that a chunk's object is written. */
int cat_chunk_stored(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], uint8_t codec,
		     uint64_t stored_len);

/* How many times the catalog's prepared statements have run since open
 * (SQLite's SQLITE_STMTSTATUS_RUN, summed; transaction control included):
 * what a call costs, for tests and measurements. The SQLite engine only. */
uint64_t cat_statements_run(struct cat *cat);

/* Makes pending equal to the committed extents (a writer starting on an
 * existing file), taking references. */
int cat_pending_from_committed(struct cat *cat, uint64_t ino);
/* The same; *rows false when ino had no extent rows (so pending is empty
 * now: a new file), true when it had or the call cannot tell. */
int cat_pending_start(struct cat *cat, uint64_t ino, bool *rows);

/* The error that lost ino's create with a rolled-back deferred transaction
 * (catalog_defer.c D10: -ENOSPC, -EIO), 0 for any other file (and always
 * on the shared engine, which defers nothing). Cheap while nothing was
 * lost: no lock. */
int cat_file_lost(struct cat *cat, uint64_t ino);

/* The last handle of ino is released after its writer's last commit (or
 * with no writer): clears its being-written mark (generation.h G7), a
 * change only if it is marked. Not after a failed commit: the mark stays. */
int cat_file_unmark(struct cat *cat, uint64_t ino);

/* Drops all pending extents of ino (writer gone, or switching to a staging
 * file), releasing their references. */
int cat_pending_drop(struct cat *cat, uint64_t ino);

/* cat_pending_drop, then cat_file_unmark, in one change: a writer's end at
 * the last release after its last commit succeeded. Either both or neither. */
int cat_pending_drop_unmark(struct cat *cat, uint64_t ino);

/* Cuts the pending extents at new_size: drops those at or after it, shortens
 * one that straddles it. */
int cat_pending_truncate(struct cat *cat, uint64_t ino, uint64_t new_size);

/* Commits a writer's state: the committed extents become a copy of pending
 * (pending stays, for the writer to go on from), size and mtime/ctime are set.
 * -EIO if a pending chunk has no stored object. With durable, the commit is
 * fsync'd (the catalog's WAL synced after it, catalog.c invariant 10). */
int cat_file_commit(struct cat *cat, uint64_t ino, uint64_t size, int64_t mtime_ns,
		    bool durable);

/* Sets the size of a file with no writer: extents at or past new_size are
 * dropped, a straddling one shortened; growing leaves a hole. Sets mtime and
 * ctime to now. */
int cat_file_truncate(struct cat *cat, uint64_t ino, uint64_t new_size);

/* Makes every committed transaction durable (fsync of the WAL and database),
 * for fsync/fsyncdir of anything that has no writer. */
int cat_sync(struct cat *cat);

/* ---- accounting and checks [open], [SQLite] where marked ---- */

struct cat_stats {
	uint64_t inodes;
	uint64_t files;
	uint64_t logical_bytes; /* sum of regular file sizes */
	uint64_t chunks;
	uint64_t chunk_plain_bytes;  /* sum of chunks' plain lengths: unique data */
	uint64_t chunk_stored_bytes; /* sum of stored (compressed) lengths */
	uint64_t referenced_bytes;   /* sum of committed extent lengths */
};
int cat_stats(struct cat *cat, struct cat_stats *out);

/* Calls fn for every chunk row (for verification). */
typedef int (*cat_chunk_fn)(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			    uint8_t codec, int64_t stored_len, uint64_t refcount);
int cat_chunks(struct cat *cat, cat_chunk_fn fn, void *arg);

/* [SQLite] SQLite's own check of the file: PRAGMA quick_check (full false: cheap,
 * without index contents; cat_open runs it) or integrity_check (full true:
 * every index row matches its table). 0, or -EUCLEAN with a log line per
 * finding (at most 20) naming the catalog. */
int cat_integrity(struct cat *cat, bool full);

/* Checks the engine's own integrity (SQLite: cat_integrity, full), then
 * invariants 1–3 and the namespace's in full, and generation.h's G1–G3.
 * Returns 0, or -EUCLEAN with a log line per violation. For tests and
 * `ckptfs-admin check`. */
int cat_check(struct cat *cat);

/* An eviction: clears a clean chunk's cached mark and calls remove(arg, hash)
 * for its cache object in the same hold of the catalog lock (invariant 8), so
 * no writer stores the same bytes anew in between. -ENOENT if the chunk has
 * no row, no object yet, or is not on BACKING (dirty: never evicted); in
 * shared mode -EBUSY if a writer names it and it could not be pinned (S11,
 * cat_chunks_evict). The removal's own failure is its to log and leaves the
 * mark cleared. remove runs under the lock and must not call the catalog. */
int cat_chunk_evict(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], cat_reclaim_fn remove,
		    void *arg);
/* cat_chunk_evict of hashes[0..n); evicted[i] says whether hashes[i] went.
 * Shared: a copy a writer of this node names is pinned in PostgreSQL first,
 * one round trip for the batch, and stays if it cannot be (-EBUSY from
 * cat_chunk_evict; catalog_shared_data.c S11). Returns 0 or the catalog's
 * error. */
int cat_chunks_evict(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		     cat_reclaim_fn remove, void *arg, bool *evicted);

/* A cache copy the catalog could not record: calls remove(arg, hash) only
 * if no chunk row names hash, checked in the same hold of the catalog lock
 * (invariant 8), since a row's writer may have stored its object under that
 * name. -EEXIST if a row does (the copy is left: ckptfs-admin gc finds a file
 * no row calls cached), else remove's result or the catalog's error. remove
 * runs under the lock and must not call the catalog. */
int cat_chunk_drop_unclaimed(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			     cat_reclaim_fn remove, void *arg);

#endif
