/* storesmall — small chunk objects of a local store kept in one SQLite file
 * (ROOT/small.db) instead of one file each.
 *
 * A small file's chunk object in chunks/ab/cd/ cost an inode (and, on a
 * fresh store, two shard directories) per file: ext4's inode allocation was
 * most of the daemon's time for creates of small files (docs/BENCH.md, issue
 * 20 part 3). Here an object image is one row: the same bytes, header and
 * all, that its file would hold (docs/FORMAT.md), keyed by its hash.
 *
 * Invariants:
 *  T1. A row's image is the whole object image of the hash it is keyed by, as
 *      store.c would have written it to chunks/ab/cd/HASH; nothing here
 *      checks it: store.c checks every image it reads back (store.h 2).
 *  T2. A put returns after the row is committed to the WAL (written, not
 *      fsync'd): it survives a kill -9 of the process like a written file
 *      does; storesmall_sync makes every committed row durable. With
 *      batching on (T8) a put returns with its row in the open batch, and
 *      T2 holds at the batch's commit, which comes before any commit of
 *      the catalog after the put (T8), at storesmall_sync, _remove and
 *      _close, and at STORESMALL_BATCH_MAX puts.
 *  T3. Only local stores hold one (the daemon's cache turns it on); a store
 *      on BACKING never does: BACKING's format is objects in files.
 *  T4. Space freed by removals goes back to the filesystem (incremental
 *      vacuum), so the cache's evictor frees disk as it did with files.
 *  T5. Beside its rows, small.db holds a WAL of at most
 *      STORESMALL_WAL_TARGET bytes at rest (cut back to it after each
 *      checkpoint); a checkpoint held up by a reader lets it grow past that
 *      for the reader's time. The cache's accounting counts the WAL's size as
 *      it is on disk (fs/cache.c, cache_resync): evicting objects makes room
 *      for it, as for any object.
 *  T6. A row is named as its file would be (chunks/ab/cd/HEX, store.h's
 *      store_object_relpath): storesmall_list/_stat/_remove_rel show the rows
 *      as such a tree, so a walk over the files of a store (ckptfs-admin gc,
 *      meta/admin_query.h's aq_objects) walks the rows the same way.
 *  T7. While the connection is open, this process never opens small.db or
 *      its -wal/-shm by path: close() of any descriptor of a file drops every
 *      fcntl lock the process holds on it (POSIX), and without the
 *      connection's SHARED lock another process's close (ckptfs-admin, the
 *      sqlite3 shell) checkpoints and unlinks the WAL the daemon still
 *      writes. storesmall_sync syncs through SQLite's own descriptors.
 *  T8. Batching (storesmall_batch; the daemon turns it on for the SQLite
 *      catalog only, fs/main.c): puts join one open write transaction of
 *      small.db (the batch), committed by storesmall_commit. The daemon
 *      calls storesmall_commit from the catalog's commit hook
 *      (catalog.h cat_commit_first), before EVERY commit of the catalog's
 *      connection: a catalog row naming an object (cat_chunk_stored, a
 *      file's extents) is added after the put returned, so the commit that
 *      makes it durable commits the object first (chunkput.h P2,
 *      catalog_defer.c D7). A kill -9 loses the batch with the catalog's
 *      uncommitted changes, never an object a committed row names. Lock
 *      order: the catalog's lock, then small.db's (nothing here calls out
 *      while holding it). Committing a batch early (_sync, _remove, _close,
 *      STORESMALL_BATCH_MAX, a checkpoint) is always safe. On -o meta=
 *      there is no such hook: puts commit one by one there (T2).
 *  T9. Fail-stop: a batch whose COMMIT fails (a full disk: SQLite rolls the
 *      whole transaction back), or that SQLite drops at a failed put, took
 *      rows a writer may already hold as stored, between its put and its
 *      cat_chunk_stored, and that the store's checked set vouches for
 *      (store.c S10). So from then on every put and every removal fails,
 *      and storesmall_commit fails with the batch's error, which makes the
 *      catalog refuse every later commit until the daemon restarts: no row
 *      naming a rolled-back object is ever committed, and nothing committed
 *      before is touched. One error line says so; reads go on. A restart
 *      is a kill -9 at that moment (T8; D7's journal reclaims what small.db
 *      kept and no row names).
 *  T10. With batching on, the checkpoint (T5) never runs in the catalog's
 *      commit hook (under the catalog's lock): a commit only notes that it
 *      is due (the WAL hook), and the next put or removal commits the batch
 *      and checkpoints, on its own thread.
 *
 * Thread safety: one connection, serialized by a mutex. */
#ifndef CKPTFS_STORESMALL_H
#define CKPTFS_STORESMALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "hash.h"

#define STORESMALL_FILE "small.db"
/* T5: the WAL's size at rest (a checkpoint every this many bytes of it) */
#define STORESMALL_WAL_TARGET ((uint64_t)16 << 20)

struct storesmall;

/* Opens ROOT/small.db through root_fd's path root. create false: -ENOENT
 * when there is none (a store that never held small objects). */
int storesmall_open(const char *root, bool create, struct storesmall **out);
void storesmall_close(struct storesmall *s);

/* T8: puts join an open batch from now on (before any put). */
void storesmall_batch(struct storesmall *s);
/* T8: commits the open batch (0 without one). T9: a failure, now or
 * earlier, is returned (-ENOSPC, -EIO) each time after it, logged once. */
int storesmall_commit(struct storesmall *s);

/* Stores the image given as cnt pieces (T2, T8); an existing row of the hash
 * is replaced (the same bytes: store.h 3). -ENOSPC on a full disk; T9: the
 * batch's error once it failed. */
int storesmall_put(struct storesmall *s, const uint8_t hash[HASH_LEN], const struct iovec *iov,
		   int cnt);

/* Copies the image into buf (capacity cap) and sets *len. -ENOENT if absent,
 * -EFBIG (with *len set) if larger than cap. */
int storesmall_get(struct storesmall *s, const uint8_t hash[HASH_LEN], void *buf, size_t cap,
		   size_t *len);

/* The image's length: 0, or -ENOENT if absent. */
int storesmall_len(struct storesmall *s, const uint8_t hash[HASH_LEN], size_t *len);

/* Removes the row, committed (with the open batch, T8) when it returns;
 * absent is success. */
int storesmall_remove(struct storesmall *s, const uint8_t hash[HASH_LEN]);

/* T2: every row committed so far is on stable storage. */
int storesmall_sync(struct storesmall *s);

struct sqlite3;
/* T2, T7 for any SQLite database in WAL mode (also the catalog's,
 * meta/catalog.c cat_sync): syncs the WAL, then the main file, through the
 * connection's own descriptors, so every transaction committed so far is on
 * stable storage, whatever its synchronous setting. A COMMIT cannot promise
 * that by itself: SQLite writes no WAL frame, and syncs nothing, for a
 * transaction that changes no byte. The caller keeps checkpoints out
 * meanwhile (holds the connection). SQLITE_OK, or the SQLite code of the
 * first failure with *what naming the step ("sync its WAL", ...). */
int storesmall_sync_own(struct sqlite3 *db, const char **what);

/* T5: the bytes ROOT/small.db-wal holds on disk now (0 without one). */
int storesmall_wal_bytes(const char *root, uint64_t *out);

/* ---- the rows as a tree of object files (T6) ---- */

/* The names in reldir as if every row were its file: "chunks" lists the
 * first-level shards "ab" that rows fall in, "chunks/ab" the second-level
 * "cd", "chunks/ab/cd" the 64-hex-digit names. fn(arg, name) per name, in
 * order; a non-zero return stops the listing and is returned. -ENOENT for a
 * reldir that is none of those. Each step is its own short read (no
 * snapshot is held across fn, which may take its time). */
int storesmall_list(struct storesmall *s, const char *reldir, int (*fn)(void *, const char *),
		    void *arg);
/* The image's length of the row relpath (chunks/ab/cd/HEX) names; -ENOENT
 * if absent or not such a name. */
int storesmall_stat(struct storesmall *s, const char *relpath, uint64_t *size);
/* Removes the row relpath names (absent is success; -ENOENT if not such a name). */
int storesmall_remove_rel(struct storesmall *s, const char *relpath);

#endif
