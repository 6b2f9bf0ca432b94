/* catalog — the SQLite catalog behind ckptfs: the namespace (inodes,
 * dirents), file contents as lists of chunk extents (committed in `extents`,
 * a writer's in `pending`), and chunks with reference counts. The public face
 * is catalog.h; the tables, columns and the versioning rule are in SCHEMA.md.
 *
 * One connection, opened SQLITE_OPEN_NOMUTEX, guarded by cat->lock. Every
 * statement is prepared once at open (SQLITE_PREPARE_PERSISTENT) and reused.
 * A public call moves through:
 *
 *     lock ──▶ BEGIN IMMEDIATE ──▶ work ──┬──▶ COMMIT ───▶ sweep? ──▶ unlock
 *                                         └──▶ ROLLBACK ───────────▶ unlock
 *
 * Changes inside an OPEN generation take another path (cat_change_begin):
 * a savepoint in a write transaction left open and committed later, by the
 * flusher or by the next write (catalog_defer.c, D1-D7): removals, creates,
 * a writer's pending extents and chunk references, chunk "stored" records,
 * file commits that are not durable, truncation, attributes. Reads run
 * inside it.
 *
 * Read-only calls run their statements without BEGIN IMMEDIATE (a plain
 * deferred read; one explicit read transaction where several statements must
 * agree). The sweep runs in its own transaction after the commit that dropped
 * counts, so a crash in between leaves only refcount-0 rows, which the next
 * sweep (at the latest, the one at open) finishes.
 *
 * Batched release. cat_inodes_release (and cat_inodes_drop_data) binds a
 * JSON list of inode numbers to a few set statements, CAT_RELEASE_BATCH
 * inodes per transaction, each transaction followed by its sweep: the sweep
 * unlinks one object per chunk freed, under the lock, and an unlink costs
 * up to a few tenths of a millisecond, so a batch bounds how long a FUSE
 * request can wait behind a large deletion.
 *
 * Invariants (numbered as in catalog.h; cat_check verifies 1–3 and the
 * namespace ones below):
 *  1. chunks.refcount == rows of extents + pending naming the hash. Every
 *     statement that adds or removes extent rows is accompanied, in the same
 *     transaction, by catalog_refs.c's statement for the same set of rows
 *     (R_* ids), which alone changes counts, aggregated per hash (a file may
 *     name one chunk many times).
 *  2. Committed extents name only chunks with stored_len set: cat_file_commit
 *     refuses a pending list that names an unstored chunk. A row at refcount 0
 *     may have lost its object already (reclaim ran, then a crash or a failed
 *     reclaim kept the row), so taking a reference on it clears stored_len
 *     and the writer stores the object again.
 *  3. Extents of one inode never overlap, in extents or pending: pending rows
 *     are added only past their predecessor's end, and extents are copies of
 *     pending; truncation only drops or shortens.
 *  4. cat_open drops all pending rows and inodes with nlink 0.
 *  5. Root is inode 1; AUTOINCREMENT keeps inode numbers and dirent ids (the
 *     readdir cookies) from ever being reused.
 *  6. A live directory has exactly one dirent (root none) and nlink 2 + its
 *     subdirectories; a removed one has nlink 0. Other inodes have nlink equal
 *     to their dirents. The root of a generation's backup tree (G3) counts as
 *     having one entry.
 *  7. Generations (generation.h, G1–G4) are kept by generation.c; the
 *     namespace calls here tell it what they did inside their transaction:
 *     a create takes the parent's generation (or starts one), a rename moves
 *     its subtree to the generation of its new place, removing a root ends
 *     its generation, and an inode whose nlink reaches 0 leaves its
 *     generation. A hard link never crosses a generation boundary (-EXDEV).
 *  8. A chunk's cache object is removed only under the catalog lock, in the
 *     same hold that decides it may go (cat_sweep, cat_chunk_evict,
 *     cat_chunk_drop_unclaimed): a writer that stored the same bytes anew in
 *     between would otherwise lose its only copy.
 *  9. A catalog is opened in one role only: alone or as a node's
 *     (cat_role_check).
 * 10. Durability is made, not assumed: a call that promises it (cat_sync for
 *     fsync and fsyncdir, a durable cat_file_commit, cat_gen_commit, the
 *     shared engine's local sync) ends by syncing the WAL and the main file
 *     through SQLite's own descriptors (cat_wal_sync). A COMMIT under
 *     synchronous=FULL is not enough: SQLite writes no frame and syncs
 *     nothing for a transaction that changes no byte (the old `UPDATE meta
 *     SET value = value` of cat_sync), commits under NORMAL (the default
 *     here) are durable only once a later sync is, and a `PRAGMA
 *     synchronous` takes effect when it is prepared, not when it runs (a
 *     statement prepared at open switched nothing: the first fsync of each
 *     mount returned before its commit was on disk).
 * 11. An object is reclaimed only after the commit that dropped its last
 *     reference is durable: cat_sweep syncs the WAL (10) once before its
 *     first reclaim. Otherwise a power loss can keep the unlink and lose
 *     the commit, and the catalog names an object that is gone.
 * 12. The same for an eviction: a chunk's cache object is removed only after
 *     the commit that marked it uploaded is durable (cat_chunk_evict_locked
 *     syncs the WAL first when an uploaded mark was committed since the last
 *     sync: one sync per run of evictions after uploads). Otherwise a power
 *     loss can keep the unlink and lose the mark, and the catalog then calls
 *     the chunk dirty, in the cache only, when only BACKING has it. The
 *     shared engine sets uploaded_unsynced at its local marks too, and its
 *     evictions come here (catalog_shared_data.c S15): PostgreSQL's mark
 *     does not restore the local one before a writer or reader relies on it.
 * 13. An object is reclaimed only after every object named by the commits
 *     its drop depends on is durable: the new content of the file that
 *     replaced it (torch.save to a temporary, then os.replace, no fsync:
 *     TRAINERS.md). 11's WAL sync makes every earlier commit durable, the
 *     one naming the new objects too; with those still in the page cache, a
 *     power loss kept a catalog naming an empty or missing object and the
 *     old one unlinked: EIO where ext4 gives old-or-new (review 32A F3). So
 *     when a file commit that was not durable came since the last objects
 *     sync (objects_seq), cat_sweep has the cache synced (the objects sync:
 *     the store's syncfs) before 11's WAL sync, with the lock released (a
 *     syncfs while a trainer streams takes seconds, and FUSE calls wait on
 *     the lock), and lists the garbage again under the lock (8). A file
 *     commit that came meanwhile may name objects the sync missed, and a
 *     drop after it may depend on them: the sync is repeated, at most
 *     CAT_SWEEP_SYNC_TRIES times; then the rows stay for a later sweep. One
 *     such sync at a time (objects_syncing): a sweep that finds one under
 *     way leaves its rows to it (it lists them after its sync), so a burst
 *     of rewrites during a long sync waits for none. A deferred
 *     transaction open at the sweep keeps the lock held for it (it would be
 *     seen half-done), and cat_begin flushes again one that another call
 *     opened while a flush's sweep had the lock released.
 *     Durable commits sync their own objects first (fs/writer.c) and
 *     generations theirs at their commit (fs/gen.h 7): they do not count.
 *     Only a file commit names new objects (the other extent copies name
 *     committed ones). Not covered: a WAL sync without a reclaim (another
 *     file's fsync, an eviction's, 12, SQLite's checkpoint) can still make
 *     a commit durable before its objects. Its file then comes back after a
 *     power loss naming a missing object (EIO): for a new file POSIX allows
 *     the loss; for a rewrite it is not ext4's old-or-new, but only where
 *     this sweep did not run first (rows kept, above, or old chunks another
 *     file still names), since a drop to zero sweeps at once.
 * 14. What a commit names is committed before it: cat_commit_first's
 *     callback runs in SQLite's commit hook, before every commit of the
 *     connection, under the lock, and a failure refuses the commit (it
 *     becomes a rollback; the failed call returns the callback's error, not
 *     "constraint failed"'s -EIO). The daemon commits small.db's batch there
 *     (fs/lib/storesmall.h T8, T9). Lock order: cat->lock, then small.db's;
 *     the callback never calls back into the catalog, and uses no
 *     connection but its own (SQLite: a commit hook must not use the
 *     connection it is called on).
 *
 * Callbacks of cat_readdir and cat_chunks run with the lock released (rows are
 * fetched in batches), so they may call back into the catalog; the reclaim
 * callback runs under the lock and must not. */
#define _GNU_SOURCE
#include "catalog_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "catalog_shared.h"
#include "catalog_shared_data.h"
#include "catalog_shared_gen.h"
#include "claim.h"
#include "log.h"
#include "storesmall.h"

#define CAT_APPLICATION_ID 0x636b7074 /* 'ckpt' */
#define CAT_BUSY_TIMEOUT_MS 5000
#define CAT_CACHE_KIB 16384
#define CAT_SWEEP_BATCH 64
#define CAT_SWEEP_SYNC_TRIES 3 /* invariant 13: objects syncs per sweep, at most */
#define CAT_READDIR_BATCH 32
#define CAT_CHUNKS_BATCH 128
#define CAT_RELEASE_BATCH 64 /* inodes per transaction of cat_inodes_release: its sweep
			     * unlinks up to as many objects under the lock */
#define CAT_MAX_DEPTH 4096 /* a parent walk longer than this is a cycle */

/* ---- statements ---- */

/* One list for the extent statements of both tables. */
#define CAT_EXTENT_COLS "ino, off, len, hash, chunk_off"
#define CAT_INODE_COLS "ino, mode, uid, gid, nlink, size, rdev, atime_ns, mtime_ns, ctime_ns"
#define CAT_INODE_COLS_I \
	"i.ino, i.mode, i.uid, i.gid, i.nlink, i.size, i.rdev, i.atime_ns, i.mtime_ns, i.ctime_ns"

/* Extents of ?1 that end after ?2, in order, at most ?3 (one more than
 * wanted: the first row may end at or before ?2 and is skipped). */
#define CAT_SQL_LIST(T)                                                                    \
	"SELECT e.off, e.len, e.chunk_off, c.plain_len, e.hash FROM " T " e"               \
	" LEFT JOIN chunks c ON c.hash = e.hash WHERE e.ino = ?1 AND e.off >= COALESCE("   \
	"(SELECT off FROM " T " WHERE ino = ?1 AND off <= ?2 ORDER BY off DESC LIMIT 1), ?2)" \
	" ORDER BY e.off LIMIT ?3"
/* Truncation at ?2: drop the rows at or past it (their counts are released
 * first, R_X_FROM_DROP / R_P_FROM_DROP), shorten the one that straddles it. */
#define CAT_SQL_TRUNC_DELETE(T) "DELETE FROM " T " WHERE ino = ?1 AND off >= ?2"
#define CAT_SQL_TRUNC_SHORTEN(T)                                                   \
	"UPDATE " T " SET len = ?2 - off WHERE ino = ?1 AND off = (SELECT off FROM " T \
	" WHERE ino = ?1 AND off < ?2 ORDER BY off DESC LIMIT 1) AND off + len > ?2"
/* Makes DST of ?1 equal to SRC of ?1 touching only rows that differ: release
 * (R_<DST>_NOT_<SRC>_DROP) and drop DST rows without an identical SRC row,
 * then take references for (R_<SRC>_NOT_<DST>_TAKE) and copy SRC rows
 * without an identical DST row. */
#define CAT_SQL_SYNC_DELETE(DST, SRC) \
	"DELETE FROM " DST " WHERE ino = ?1 AND NOT " CAT_SQL_SAME(DST, SRC)
#define CAT_SQL_SYNC_INSERT(DST, SRC)                                                  \
	"INSERT INTO " DST "(" CAT_EXTENT_COLS ") SELECT " CAT_EXTENT_COLS " FROM " SRC " d" \
	" WHERE d.ino = ?1 AND NOT " CAT_SQL_SAME("d", DST)

/* Batched release: the rows of the released inodes (R_*_RELEASED_DROP
 * first). */
#define CAT_SQL_REL_DELETE(T) "DELETE FROM " T " WHERE ino IN (" CAT_SQL_RELEASED ")"

static const struct cat_sql cat_sql[S_GEN_FIRST] = {
	[S_BEGIN] = { "begin a write transaction", "BEGIN IMMEDIATE" },
	[S_BEGIN_READ] = { "begin a read transaction", "BEGIN" },
	[S_COMMIT] = { "commit", "COMMIT" },
	[S_ROLLBACK] = { "roll back", "ROLLBACK" },
	[S_SAVEPOINT] = { "open a savepoint", "SAVEPOINT cat_op" },
	[S_RELEASE] = { "release a savepoint", "RELEASE cat_op" },
	[S_ROLLBACK_TO] = { "roll back to a savepoint", "ROLLBACK TO cat_op" },

	[S_INODE_GET] = { "read an inode",
			  "SELECT " CAT_INODE_COLS " FROM inodes WHERE ino = ?1" },
	/* an inode and its generation in one read (issue 20 part 3: the create's
	 * parent and a writer's start asked twice) */
	[S_INODE_GET_GEN] = { "read an inode and its generation",
			      "SELECT " CAT_INODE_COLS ", gen FROM inodes WHERE ino = ?1" },
	[S_INODE_TARGET] = { "read a symlink target",
			     "SELECT mode, target FROM inodes WHERE ino = ?1" },
	[S_INODE_INSERT] = { "insert an inode",
			     "INSERT INTO inodes(mode, uid, gid, nlink, size, rdev, atime_ns, mtime_ns,"
			     " ctime_ns, target, gen, writing)"
			     " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?7, ?8, ?9, ?10)" },
	/* An inode without links leaves its generation (G1, G2). */
	[S_INODE_NLINK] = { "change an inode's link count",
			    "UPDATE inodes SET nlink = nlink + ?2, ctime_ns = ?3,"
			    " gen = CASE WHEN nlink + ?2 > 0 THEN gen END WHERE ino = ?1" },
	[S_DIR_TOUCH] = { "update a directory's link count and times",
			  "UPDATE inodes SET nlink = nlink + ?2, mtime_ns = ?3, ctime_ns = ?3"
			  " WHERE ino = ?1" },
	[S_INODE_SETATTR] = { "set inode attributes",
			      "UPDATE inodes SET mode = ?2, uid = ?3, gid = ?4, atime_ns = ?5,"
			      " mtime_ns = ?6, ctime_ns = ?7 WHERE ino = ?1" },
	[S_INODE_SETSIZE] = { "set a file's size and times",
			      "UPDATE inodes SET size = ?2, mtime_ns = ?3, ctime_ns = ?4 WHERE ino = ?1" },
	[S_INODE_DELETE] = { "delete an inode", "DELETE FROM inodes WHERE ino = ?1" },

	[S_DIRENT_GET] = { "look up a directory entry",
			   "SELECT d.id, " CAT_INODE_COLS_I " FROM dirents d"
			   " LEFT JOIN inodes i ON i.ino = d.ino WHERE d.parent = ?1 AND d.name = ?2" },
	/* a lookup: the entry, and the parent's mode and links for a miss (no
	 * such parent, not a directory, or no such name), in one read (issue 20
	 * part 3: a create's lookup of its new name is a miss) */
	[S_LOOKUP] = { "look up a name",
		       "SELECT p.mode, p.nlink, d.id, " CAT_INODE_COLS_I " FROM inodes p"
		       " LEFT JOIN dirents d ON d.parent = p.ino AND d.name = ?2"
		       " LEFT JOIN inodes i ON i.ino = d.ino WHERE p.ino = ?1" },
	[S_DIRENT_INSERT] = { "insert a directory entry",
			      "INSERT INTO dirents(parent, name, ino) VALUES(?1, ?2, ?3)" },
	[S_DIRENT_DELETE] = { "delete a directory entry", "DELETE FROM dirents WHERE id = ?1" },
	[S_DIRENT_MOVE] = { "move a directory entry",
			    "UPDATE dirents SET parent = ?2, name = ?3 WHERE id = ?1" },
	[S_DIRENT_SET_INO] = { "point a directory entry at another inode",
			       "UPDATE dirents SET ino = ?2 WHERE id = ?1" },
	[S_DIRENT_PARENT] = { "find a directory's parent",
			      "SELECT parent FROM dirents WHERE ino = ?1 LIMIT 1" },
	[S_DIR_HAS_ENTRY] = { "test whether a directory is empty",
			      "SELECT 1 FROM dirents WHERE parent = ?1 LIMIT 1" },
	[S_READDIR] = { "list a directory",
			"SELECT d.id, d.name, " CAT_INODE_COLS_I " FROM dirents d"
			" JOIN inodes i ON i.ino = d.ino WHERE d.parent = ?1 AND d.id > ?2"
			" ORDER BY d.id LIMIT ?3" },

	[S_X_LIST] = { "list a file's extents", CAT_SQL_LIST("extents") },
	[S_X_TRUNC_DELETE] = { "delete truncated extents", CAT_SQL_TRUNC_DELETE("extents") },
	[S_X_TRUNC_SHORTEN] = { "shorten the extent at a truncation point",
				CAT_SQL_TRUNC_SHORTEN("extents") },
	[S_P_LIST] = { "list a file's pending extents", CAT_SQL_LIST("pending") },
	[S_P_TRUNC_DELETE] = { "delete truncated pending extents",
			       CAT_SQL_TRUNC_DELETE("pending") },
	[S_P_TRUNC_SHORTEN] = { "shorten the pending extent at a truncation point",
				CAT_SQL_TRUNC_SHORTEN("pending") },
	[S_P_BEFORE] = { "find the pending extent before an offset",
			 "SELECT off, len FROM pending WHERE ino = ?1 AND off < ?2"
			 " ORDER BY off DESC LIMIT 1" },
	[S_P_INSERT] = { "insert a pending extent",
			 "INSERT INTO pending(" CAT_EXTENT_COLS ") VALUES(?1, ?2, ?3, ?4, ?5)" },
	[S_P_UNSTORED] = { "find pending extents whose chunk is not stored",
			   "SELECT p.off, p.hash FROM pending p LEFT JOIN chunks c ON c.hash = p.hash"
			   " WHERE p.ino = ?1 AND c.stored_len IS NULL LIMIT 1" },
	[S_P_LAST] = { "find the end of a file's pending extents",
		       "SELECT off + len FROM pending WHERE ino = ?1 ORDER BY off DESC LIMIT 1" },
	/* a writer's start: the file's mode, its being-written mark
	 * (generation.h G7), its generation's state and whether it has extent
	 * rows, in one read (issue 20 part 3: three before) */
	[S_WRITER_START] = { "read what a writer's start needs of a file",
			     "SELECT i.mode, i.writing, g.state,"
			     " EXISTS(SELECT 1 FROM extents WHERE ino = ?1)"
			     " OR EXISTS(SELECT 1 FROM pending WHERE ino = ?1)"
			     " FROM inodes i LEFT JOIN generations g ON g.id = i.gen"
			     " WHERE i.ino = ?1" },
	/* generation.h G7: a file being written in an OPEN generation */
	[S_WRITING_GET] = { "read whether a file is marked being written",
			    "SELECT i.writing, g.state FROM inodes i"
			    " LEFT JOIN generations g ON g.id = i.gen WHERE i.ino = ?1" },
	[S_WRITING_SET] = { "mark a file being written",
			    "UPDATE inodes SET writing = 1 WHERE ino = ?1 AND writing = 0" },
	[S_WRITING_CLEAR] = { "clear a file's being-written mark",
			      "UPDATE inodes SET writing = 0 WHERE ino = ?1 AND writing = 1" },
	[S_TO_X_DELETE] = { "delete replaced extents", CAT_SQL_SYNC_DELETE("extents", "pending") },
	[S_TO_X_INSERT] = { "copy pending extents to extents",
			    CAT_SQL_SYNC_INSERT("extents", "pending") },
	[S_TO_P_DELETE] = { "delete replaced pending extents",
			    CAT_SQL_SYNC_DELETE("pending", "extents") },
	[S_TO_P_INSERT] = { "copy extents to pending", CAT_SQL_SYNC_INSERT("pending", "extents") },

	[S_CHUNK_STORED] = { "record a stored chunk",
			     "UPDATE chunks SET codec = ?2, stored_len = ?3, cached = 1, uploaded = 0,"
			     /* catalog_pack.h K3: a loose object on BACKING stays loose */
			     " pack_off = CASE WHEN uploaded = 1 AND pack IS NULL THEN -1"
			     " ELSE pack_off END WHERE hash = ?1" },
	[S_CHUNK_LIST] = { "list chunks",
			   "SELECT hash, plain_len, codec, stored_len, refcount FROM chunks"
			   " WHERE hash > ?1 ORDER BY hash LIMIT ?2" },
	[S_GARBAGE_LIST] = { "list unreferenced chunks",
			     "SELECT hash FROM chunks WHERE refcount = 0 AND hash > ?1"
			     " ORDER BY hash LIMIT ?2" },
	[S_GARBAGE_DELETE] = { "delete an unreferenced chunk",
			       "DELETE FROM chunks WHERE hash = ?1 AND refcount = 0" },
	/* catalog_defer.c D6, D7 */
	[S_CHUNK_EXISTS] = { "look for a chunk row", "SELECT 1 FROM chunks WHERE hash = ?1" },
	[S_UPLOAD_SEQ] = { "read the upload queue's sequence",
			   "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'uploads'), 0)" },
	[S_SEQ_BUMP] = { "skip inode and entry numbers",
			 "UPDATE sqlite_sequence SET seq = seq + ?1 WHERE name IN ('inodes', 'dirents')" },

	[S_RECOVER_P_DELETE] = { "delete pending extents", "DELETE FROM pending" },
	[S_RECOVER_X_DELETE] = { "delete the extents of unlinked inodes",
				 "DELETE FROM extents WHERE ino IN (SELECT ino FROM inodes"
				 " WHERE nlink = 0)" },
	[S_RECOVER_INODES] = { "delete unlinked inodes", "DELETE FROM inodes WHERE nlink = 0" },

	/* Batched release (cat_inodes_release): ?1 is a JSON array of inode
	 * numbers; only those with nlink 0 are touched. */
	[S_REL_X_DELETE] = { "delete the extents of unlinked inodes", CAT_SQL_REL_DELETE("extents") },
	[S_REL_P_DELETE] = { "delete the pending extents of unlinked inodes",
			     CAT_SQL_REL_DELETE("pending") },
	[S_REL_INODES_DELETE] = { "delete unlinked inodes",
				  "DELETE FROM inodes WHERE ino IN (" CAT_SQL_RELEASED ")" },
	[S_REL_SETSIZE] = { "empty unlinked files",
			    "UPDATE inodes SET size = 0 WHERE ino IN (" CAT_SQL_RELEASED ")"
			    " AND (mode & 61440) = 32768" },

	[S_STATS_INODES] = { "count inodes",
			     "SELECT COUNT(*), COALESCE(SUM((mode & 61440) = 32768), 0),"
			     " COALESCE(SUM(CASE WHEN (mode & 61440) = 32768 THEN size END), 0)"
			     " FROM inodes" },
	[S_STATS_CHUNKS] = { "count chunks",
			     "SELECT COUNT(*), COALESCE(SUM(plain_len), 0), COALESCE(SUM(stored_len), 0)"
			     " FROM chunks" },
	[S_STATS_EXTENTS] = { "count referenced bytes", "SELECT COALESCE(SUM(len), 0) FROM extents" },

	[S_CHECK_DANGLING] = { "check extents for missing chunks",
			       "SELECT 'extents', ino, off, hash FROM extents WHERE hash NOT IN"
			       " (SELECT hash FROM chunks) UNION ALL SELECT 'pending', ino, off, hash"
			       " FROM pending WHERE hash NOT IN (SELECT hash FROM chunks)" },
	[S_CHECK_UNSTORED] = { "check committed extents for unstored chunks",
			       "SELECT e.ino, e.off, e.hash FROM extents e JOIN chunks c"
			       " ON c.hash = e.hash WHERE c.stored_len IS NULL" },
	[S_CHECK_OVERLAP] = { "check extents for overlaps",
			      "SELECT t, ino, off, prev_end FROM (SELECT 'extents' AS t, ino, off,"
			      " LAG(off + len) OVER (PARTITION BY ino ORDER BY off) AS prev_end"
			      " FROM extents UNION ALL SELECT 'pending', ino, off,"
			      " LAG(off + len) OVER (PARTITION BY ino ORDER BY off) FROM pending)"
			      " WHERE off < prev_end" },
	[S_CHECK_BAD_EXTENT] = { "check extents against their chunks",
				 "SELECT 'extents', e.ino, e.off, e.len, e.chunk_off, c.plain_len"
				 " FROM extents e JOIN chunks c ON c.hash = e.hash WHERE e.off < 0"
				 " OR e.len <= 0 OR e.chunk_off < 0 OR e.chunk_off + e.len > c.plain_len"
				 " UNION ALL SELECT 'pending', e.ino, e.off, e.len, e.chunk_off,"
				 " c.plain_len FROM pending e JOIN chunks c ON c.hash = e.hash"
				 " WHERE e.off < 0 OR e.len <= 0 OR e.chunk_off < 0"
				 " OR e.chunk_off + e.len > c.plain_len" },
	[S_CHECK_EXTENT_OWNER] = { "check extents' inodes",
				   "SELECT t, ino FROM (SELECT DISTINCT 'extents' AS t, ino FROM extents"
				   " UNION ALL SELECT DISTINCT 'pending', ino FROM pending) x"
				   " WHERE NOT EXISTS (SELECT 1 FROM inodes i WHERE i.ino = x.ino"
				   " AND (i.mode & 61440) = 32768)" },
	[S_CHECK_DIRENT] = { "check directory entries",
			     "SELECT d.parent, d.name, d.ino, i.ino IS NULL, p.ino IS NULL"
			     " OR (p.mode & 61440) != 16384 OR p.nlink = 0 FROM dirents d"
			     " LEFT JOIN inodes i ON i.ino = d.ino LEFT JOIN inodes p ON p.ino = d.parent"
			     " WHERE i.ino IS NULL OR p.ino IS NULL OR (p.mode & 61440) != 16384"
			     " OR p.nlink = 0" },
	/* The root of a backup tree (G3) has no entry but counts as linked once. */
	[S_CHECK_NLINK] = { "check link counts",
			    "SELECT i.ino, i.mode, i.nlink, (SELECT COUNT(*) FROM dirents d"
			    " WHERE d.ino = i.ino) + (i.ino IN (SELECT backup_root FROM generations)),"
			    " (SELECT COUNT(*) FROM dirents d JOIN inodes c"
			    " ON c.ino = d.ino WHERE d.parent = i.ino AND (c.mode & 61440) = 16384)"
			    " FROM inodes i" },
};

/* The schema of version 1 (SCHEMA.md). Version fields are set separately. A
 * new catalog runs every step from version 1 up, so it ends up exactly like a
 * migrated one. */
static const char cat_schema_sql[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
	"CREATE TABLE inodes(ino INTEGER PRIMARY KEY AUTOINCREMENT, mode INTEGER NOT NULL,"
	" uid INTEGER NOT NULL, gid INTEGER NOT NULL, nlink INTEGER NOT NULL,"
	" size INTEGER NOT NULL DEFAULT 0, rdev INTEGER NOT NULL DEFAULT 0,"
	" atime_ns INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL,"
	" target TEXT);"
	"CREATE TABLE dirents(id INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER NOT NULL,"
	" name TEXT NOT NULL, ino INTEGER NOT NULL, UNIQUE(parent, name));"
	"CREATE INDEX dirents_by_parent ON dirents(parent, id);"
	"CREATE INDEX dirents_by_ino ON dirents(ino);"
	"CREATE TABLE chunks(hash BLOB PRIMARY KEY, plain_len INTEGER NOT NULL,"
	" codec INTEGER NOT NULL DEFAULT 0, stored_len INTEGER, refcount INTEGER NOT NULL)"
	" WITHOUT ROWID;"
	"CREATE INDEX chunks_unreferenced ON chunks(hash) WHERE refcount = 0;"
	"CREATE TABLE extents(ino INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL,"
	" hash BLOB NOT NULL, chunk_off INTEGER NOT NULL, PRIMARY KEY(ino, off)) WITHOUT ROWID;"
	"CREATE TABLE pending(ino INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL,"
	" hash BLOB NOT NULL, chunk_off INTEGER NOT NULL, PRIMARY KEY(ino, off)) WITHOUT ROWID;";

/* Version 1 → 2: generations (generation.h). Inodes outside generations have
 * gen NULL and stay out of the partial index. */
static const char cat_schema_v2_sql[] =
	"ALTER TABLE inodes ADD COLUMN gen INTEGER;"
	"CREATE INDEX inodes_by_gen ON inodes(gen) WHERE gen IS NOT NULL;"
	"CREATE TABLE generations(id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" series INTEGER NOT NULL, root INTEGER NOT NULL, name TEXT NOT NULL,"
	" step INTEGER NOT NULL, state INTEGER NOT NULL, version INTEGER NOT NULL,"
	" pinned INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL,"
	" committed_ns INTEGER NOT NULL DEFAULT 0, ended_ns INTEGER NOT NULL DEFAULT 0,"
	" rule TEXT NOT NULL DEFAULT '', backup_root INTEGER NOT NULL DEFAULT 0);"
	"CREATE INDEX generations_by_series ON generations(series, state, step);"
	"CREATE INDEX generations_by_root ON generations(root);";

/* Version 2 → 3: the write-back cache (upload.h). A chunk's object may be in
 * the local cache (cached), on BACKING (uploaded), or both; uploads is the
 * queue of work for BACKING, in order. Objects of a version-2 catalog were
 * written straight to BACKING: they are uploaded and not cached, and every
 * committed generation and the tree outside generations still need their
 * manifests (seq order: before anything queued later). */
static const char cat_schema_v3_sql[] =
	"ALTER TABLE chunks ADD COLUMN cached INTEGER NOT NULL DEFAULT 1;"
	"ALTER TABLE chunks ADD COLUMN uploaded INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE chunks ADD COLUMN used_ns INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX chunks_evictable ON chunks(used_ns) WHERE cached = 1 AND uploaded = 1;"
	"CREATE INDEX chunks_dirty ON chunks(hash) WHERE cached = 1 AND uploaded = 0;"
	"ALTER TABLE generations ADD COLUMN durable_version INTEGER NOT NULL DEFAULT 0;"
	"CREATE TABLE uploads(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind INTEGER NOT NULL,"
	" hash BLOB, gen INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL DEFAULT 0,"
	" enqueued_ns INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, error TEXT);"
	"CREATE INDEX uploads_by_hash ON uploads(hash) WHERE hash IS NOT NULL;"
	"CREATE INDEX inodes_outside_gens ON inodes(ctime_ns) WHERE gen IS NULL;"
	"UPDATE chunks SET cached = 0, uploaded = 1 WHERE stored_len IS NOT NULL;"
	"INSERT INTO uploads(kind, gen, version, enqueued_ns)"
	" SELECT 2, id, version, 0 FROM generations WHERE state = 1 ORDER BY committed_ns;";

/* Version 3 → 4: the catalog's random id, which claims BACKING for it
 * (fs/lib/claim.h). A migrated catalog gets its id here, a new one too. */
static const char cat_schema_v4_sql[] =
	"INSERT OR IGNORE INTO meta(key, value) VALUES('catalog_id', lower(hex(randomblob(16))));";

/* Version 4 → 5: held generations (generation.h, GEN_HELD). `held` is the
 * reason a generation is held, or, while it is OPEN as a new version, the
 * reason its backup was held: the state an abort puts back. '' otherwise. */
static const char cat_schema_v5_sql[] =
	"ALTER TABLE generations ADD COLUMN held TEXT NOT NULL DEFAULT '';";

/* Version 5 → 6: the being-written mark (generation.h G7). `writing` is 1
 * while a writer of the file in an OPEN generation may have answered what
 * the catalog does not record yet, 2 on the root of an OPEN generation
 * whose changes a failed transaction lost (catalog_defer.c D4), 0 otherwise.
 * The partial index keeps the few marked rows findable (recovery clears
 * them). */
static const char cat_schema_v6_sql[] =
	"ALTER TABLE inodes ADD COLUMN writing INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX inodes_writing ON inodes(gen) WHERE writing != 0;";

/* Version 6 → 7: pack objects on BACKING (catalog_pack.h, FORMAT.md "Pack
 * object"). A chunk row's object is the loose chunks/ab/cd/HEX (pack NULL)
 * or the member image [pack_off, pack_off + pack_len) of pack `pack`;
 * pack_off -1 with pack NULL says the object is loose on BACKING and must
 * be put loose again (catalog_pack.h K3). The triggers keep each pack's
 * live count and bytes (K1) whatever path deletes a row or moves its
 * object, and queue a pack's removal (uploads.kind 5) once its last member
 * is gone (K4). Rows of older versions are loose. */
static const char cat_schema_v7_sql[] =
	"CREATE TABLE packs(name BLOB PRIMARY KEY, size INTEGER NOT NULL,"
	" members INTEGER NOT NULL, live INTEGER NOT NULL DEFAULT 0,"
	" live_bytes INTEGER NOT NULL DEFAULT 0, state INTEGER NOT NULL,"
	" created_ns INTEGER NOT NULL) WITHOUT ROWID;"
	"ALTER TABLE chunks ADD COLUMN pack BLOB;"
	"ALTER TABLE chunks ADD COLUMN pack_off INTEGER;"
	"ALTER TABLE chunks ADD COLUMN pack_len INTEGER;"
	"CREATE INDEX chunks_by_pack ON chunks(pack) WHERE pack IS NOT NULL;"
	"CREATE TRIGGER chunks_pack_gone AFTER DELETE ON chunks WHEN old.pack IS NOT NULL BEGIN"
	" UPDATE packs SET live = live - 1, live_bytes = live_bytes - old.pack_len"
	" WHERE name = old.pack; END;"
	"CREATE TRIGGER chunks_pack_moved AFTER UPDATE OF pack ON chunks"
	" WHEN old.pack IS NOT new.pack BEGIN"
	" UPDATE packs SET live = live - 1, live_bytes = live_bytes - old.pack_len"
	" WHERE name = old.pack;"
	" UPDATE packs SET live = live + 1, live_bytes = live_bytes + new.pack_len"
	" WHERE name = new.pack; END;"
	"CREATE TRIGGER packs_dead AFTER UPDATE OF live, state ON packs"
	" WHEN new.live <= 0 AND new.state = 1 BEGIN"
	" UPDATE packs SET state = 2 WHERE name = new.name;"
	" INSERT INTO uploads(kind, hash, enqueued_ns) VALUES(5, new.name,"
	" CAST((julianday('now') - 2440587.5) * 86400000000000.0 AS INTEGER)); END;";

/* The migration steps: cat_schema_steps[v] brings version v to v+1. */
static const char *const cat_schema_steps[CAT_SCHEMA_VERSION] = {
	[1] = cat_schema_v2_sql,
	[2] = cat_schema_v3_sql,
	[3] = cat_schema_v4_sql,
	[4] = cat_schema_v5_sql,
	[5] = cat_schema_v6_sql,
	[6] = cat_schema_v7_sql,
};

static const struct cat_sql *cat_sql_of(enum cat_sid id)
{
	assert((unsigned)id < S_COUNT);
	if (id < S_GEN_FIRST)
		return &cat_sql[id];
	if (id < S_UP_FIRST)
		return &cat_gen_sql[id - S_GEN_FIRST];
	if (id < S_REFS_FIRST)
		return &cat_up_sql[id - S_UP_FIRST];
	return id < S_PACK_FIRST ? &cat_refs_sql[id - S_REFS_FIRST] : &cat_pack_sql[id - S_PACK_FIRST];
}

int64_t cat_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void cat_hex(const uint8_t *hash, char out[2 * CAT_HASH_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < CAT_HASH_LEN; i++) {
		out[2 * i] = digits[hash[i] >> 4];
		out[2 * i + 1] = digits[hash[i] & 15];
	}
	out[2 * CAT_HASH_LEN] = 0;
}

void cat_lock(struct cat *cat)
{
	pthread_mutex_lock(&cat->lock);
}

void cat_unlock(struct cat *cat)
{
	assert(!cat->in_txn);
	cat_defer_settle(cat); /* a write outside a transaction commits now (D2) */
	pthread_mutex_unlock(&cat->lock);
}

/* ---- statement helpers ---- */

/* Logs a failed statement with its purpose, its SQL with the bound values
 * (inode, name, hash) and SQLite's message. */
int cat_sql_fail(struct cat *cat, enum cat_sid id, int src)
{
	char *sql = cat->stmt[id] ? sqlite3_expanded_sql(cat->stmt[id]) : NULL;
	log_error("catalog %s: cannot %s: %s (sqlite %d) [%s]", cat->path, cat_sql_of(id)->purpose,
		  sqlite3_errmsg(cat->db), src, sql ? sql : cat_sql_of(id)->sql);
	sqlite3_free(sql);
	int refused = cat->commit_first_rc; /* invariant 14: a refusal's own error, once */
	cat->commit_first_rc = 0;
	if ((src & 0xff) == SQLITE_CONSTRAINT && refused < 0)
		return refused;
	return (src & 0xff) == SQLITE_FULL ? -ENOSPC : -EIO; /* a full disk is no I/O error */
}

/* Invariant 14: SQLite's commit hook; non-zero turns the commit into a rollback. */
static int cat_commit_hook(void *arg)
{
	struct cat *cat = arg;
	cat->commit_first_rc = cat->commit_first(cat->commit_first_arg);
	return cat->commit_first_rc != 0;
}

int cat_commit_first(struct cat *cat, int (*fn)(void *arg), void *arg)
{
	if (cat_is_shared(cat))
		return -ENOTSUP;
	pthread_mutex_lock(&cat->lock);
	cat->commit_first = fn;
	cat->commit_first_arg = arg;
	cat->commit_first_rc = 0;
	sqlite3_commit_hook(cat->db, fn ? cat_commit_hook : NULL, cat);
	pthread_mutex_unlock(&cat->lock);
	return 0;
}

void cat_reset(struct cat *cat, enum cat_sid id)
{
	sqlite3_reset(cat->stmt[id]);
	sqlite3_clear_bindings(cat->stmt[id]);
}

int cat_bind_args(struct cat *cat, enum cat_sid id, const struct cat_arg *args, int n)
{
	sqlite3_stmt *st = cat->stmt[id];
	int src = SQLITE_OK;
	assert(st != NULL);
	assert(n <= CAT_MAX_ARGS && n <= sqlite3_bind_parameter_count(st));
	for (int i = 0; i < n && src == SQLITE_OK; i++) {
		switch (args[i].type) {
		case 'i': src = sqlite3_bind_int64(st, i + 1, args[i].i); break;
		case 't': src = sqlite3_bind_text(st, i + 1, args[i].t, -1, SQLITE_STATIC); break;
		case 'b':
			assert(args[i].b != NULL); /* NULL would bind SQL NULL, not a blob */
			src = sqlite3_bind_blob(st, i + 1, args[i].b, args[i].len, SQLITE_STATIC);
			break;
		default: src = sqlite3_bind_null(st, i + 1); break;
		}
	}
	if (src != SQLITE_OK) {
		int rc = cat_sql_fail(cat, id, src);
		cat_reset(cat, id);
		return rc;
	}
	return 0;
}

/* Steps a statement that yields rows: 1 for a row, 0 at the end, -EIO on a
 * failure (logged). The caller resets the statement when done with it. */
int cat_next(struct cat *cat, enum cat_sid id)
{
	int src = sqlite3_step(cat->stmt[id]);
	if (src == SQLITE_ROW)
		return 1;
	if (src == SQLITE_DONE)
		return 0;
	return cat_sql_fail(cat, id, src);
}

/* Runs a statement to completion and resets it. */
int cat_run(struct cat *cat, enum cat_sid id)
{
	int src;
	do
		src = sqlite3_step(cat->stmt[id]);
	while (src == SQLITE_ROW);
	int rc = src == SQLITE_DONE ? 0 : cat_sql_fail(cat, id, src);
	cat_reset(cat, id);
	return rc;
}

int64_t cat_col_int(struct cat *cat, enum cat_sid id, int col)
{
	return sqlite3_column_int64(cat->stmt[id], col);
}

int cat_changes(struct cat *cat)
{
	return sqlite3_changes(cat->db);
}

/* Reads the ten inode columns starting at col. */
static void cat_col_inode(struct cat *cat, enum cat_sid id, int col, struct cat_inode *out)
{
	sqlite3_stmt *st = cat->stmt[id];
	out->ino = (uint64_t)sqlite3_column_int64(st, col);
	out->mode = (uint32_t)sqlite3_column_int64(st, col + 1);
	out->uid = (uint32_t)sqlite3_column_int64(st, col + 2);
	out->gid = (uint32_t)sqlite3_column_int64(st, col + 3);
	out->nlink = (uint32_t)sqlite3_column_int64(st, col + 4);
	out->size = (uint64_t)sqlite3_column_int64(st, col + 5);
	out->rdev = (uint64_t)sqlite3_column_int64(st, col + 6);
	out->atime_ns = sqlite3_column_int64(st, col + 7);
	out->mtime_ns = sqlite3_column_int64(st, col + 8);
	out->ctime_ns = sqlite3_column_int64(st, col + 9);
}

/* Copies a hash column; -EIO (logged) if it is not a hash. */
static int cat_col_hash(struct cat *cat, enum cat_sid id, int col, uint8_t out[CAT_HASH_LEN])
{
	const void *blob = sqlite3_column_blob(cat->stmt[id], col);
	if (blob == NULL || sqlite3_column_bytes(cat->stmt[id], col) != CAT_HASH_LEN) {
		log_error("catalog %s: corrupt: a hash of %d bytes (%s)", cat->path,
			  sqlite3_column_bytes(cat->stmt[id], col), cat_sql_of(id)->purpose);
		return -EIO;
	}
	memcpy(out, blob, CAT_HASH_LEN);
	return 0;
}

/* ---- transactions ---- */

int cat_begin(struct cat *cat)
{
	assert(!cat->in_txn);
	/* a flush's sweep may release the lock for its objects sync
	 * (invariant 13), and another call may open a deferred transaction
	 * meanwhile: flushed too (each flush ends it, committed or lost) */
	for (int i = 0; cat->deferred > 0 && i < CAT_SWEEP_SYNC_TRIES + 1; i++)
		cat_defer_flush(cat);
	/* catalog_defer.c D9: a lost mark not yet written first */
	int rc = cat->deferred == 0 ? cat_defer_mark_retry(cat) : 0;
	if (rc == 0)
		rc = cat_run(cat, S_BEGIN);
	cat->in_txn = rc == 0;
	return rc;
}

/* Inside a deferred transaction (catalog_defer.c) a read runs in it, with no
 * BEGIN of its own: it sees what FUSE was told, and commits nothing. */
int cat_begin_read(struct cat *cat)
{
	assert(!cat->in_txn);
	cat->in_read_of_deferred = cat->deferred > 0;
	int rc = cat->in_read_of_deferred ? 0 : cat_run(cat, S_BEGIN_READ);
	cat->in_txn = rc == 0;
	return rc;
}

/* Commits when rc is 0, else rolls back; returns rc, or -EIO if the commit
 * fails. Does nothing outside a transaction (cat_begin failed). */
int cat_end(struct cat *cat, int rc)
{
	if (!cat->in_txn)
		return rc;
	if (cat->in_read_of_deferred) { /* cat_begin_read: nothing of its own to end */
		cat->in_read_of_deferred = false;
		cat->in_txn = false;
		return rc;
	}
	if (rc == 0)
		rc = cat_run(cat, S_COMMIT);
	if (rc != 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_run(cat, S_ROLLBACK); /* logs its own failure */
	cat->in_txn = false;
	return rc;
}

/* Invariant 10: every transaction committed so far reaches stable storage,
 * through SQLite's own descriptors (storesmall.h's storesmall_sync_own, T7:
 * never by path). Under the lock, so no checkpoint runs meanwhile. */
int cat_wal_sync(struct cat *cat)
{
	const char *what = NULL;
	int src = storesmall_sync_own(cat->db, &what);
	if (src == SQLITE_OK) {
		cat->uploaded_unsynced = false; /* invariant 12 */
		cat->wal_syncs++;
		return 0;
	}
	log_error("catalog %s: cannot %s: %s (sqlite %d)", cat->path, what, sqlite3_errmsg(cat->db),
		  src);
	return (src & 0xff) == SQLITE_FULL ? -ENOSPC : -EIO;
}

void cat_set_objects_sync(struct cat *cat, cat_objects_sync_fn fn, void *arg)
{
	if (cat->shared)
		return; /* a node's objects go by the cluster's reclaim (reclaimer.h) */
	cat_lock(cat);
	cat->objects_sync = fn;
	cat->objects_sync_arg = arg;
	cat_unlock(cat);
}

/* Invariant 13, under the lock, outside a transaction, before the sweep's
 * first reclaim: 0 when every file commit so far names only durable
 * objects; 1 when the lock was released for the objects sync (the garbage
 * must be listed again); -EAGAIN when file commits kept coming during
 * CAT_SWEEP_SYNC_TRIES syncs, or the error of a sync that failed (logged):
 * nothing may be reclaimed now. */
static int cat_sweep_objects_durable(struct cat *cat, int *tries)
{
	if (cat->objects_sync == NULL || cat->objects_synced_seq == cat->objects_seq)
		return 0;
	if (cat->objects_syncing)
		return -EAGAIN; /* another sweep's sync: it lists the garbage again after it */
	if (*tries >= CAT_SWEEP_SYNC_TRIES) {
		log_info("catalog %s: files were committed during each of %d syncs of the cache;"
			 " unreferenced chunks are kept for a later sweep", cat->path, *tries);
		return -EAGAIN;
	}
	++*tries;
	uint64_t seq = cat->objects_seq;
	int rc;
	if (cat->deferred == 0) { /* no deferred transaction another call would see half-done */
		cat->objects_syncing = true;
		pthread_mutex_unlock(&cat->lock); /* not cat_unlock: nothing to settle */
		rc = cat->objects_sync(cat->objects_sync_arg);
		pthread_mutex_lock(&cat->lock);
		cat->objects_syncing = false;
	} else {
		rc = cat->objects_sync(cat->objects_sync_arg);
	}
	if (rc != 0) {
		log_warn("catalog %s: cannot sync the cache before a reclaim: %s; unreferenced"
			 " chunks are kept for a later sweep", cat->path, strerror(rc < 0 ? -rc : rc));
		return rc;
	}
	if (seq > cat->objects_synced_seq)
		cat->objects_synced_seq = seq;
	return 1;
}

/* Calls reclaim for every chunk whose count is zero and deletes the rows it
 * accepts, a batch per transaction. A refused chunk stays for a later sweep.
 * Failures are logged; the call that triggered the sweep has already
 * committed, so they are not its result. */
int cat_sweep(struct cat *cat)
{
	if (cat->shared) return catsh_sweep(cat);
	bool synced = false;
	int tries = 0;
	uint8_t batch[CAT_SWEEP_BATCH][CAT_HASH_LEN];
	uint8_t after[CAT_HASH_LEN] = { 0 };
	int after_len = 0; /* the empty blob sorts before every hash */
	int n, rc = 0;
	uint64_t reclaimed = 0, kept = 0;

	do {
		n = 0;
		rc = cat_bind(cat, S_GARBAGE_LIST, A_BLOB(after, after_len), A_INT(CAT_SWEEP_BATCH));
		while (rc == 0 && (rc = cat_next(cat, S_GARBAGE_LIST)) == 1) {
			rc = cat_col_hash(cat, S_GARBAGE_LIST, 0, batch[n]);
			n++;
		}
		cat_reset(cat, S_GARBAGE_LIST);
		if (rc != 0 || n == 0)
			break;
		/* invariant 13: the objects those commits name are durable before
		 * the WAL sync that makes them durable too; the lock was released
		 * meanwhile: the batch is listed again */
		if (!synced && (rc = cat_sweep_objects_durable(cat, &tries)) != 0) {
			if (rc < 0)
				return 0; /* logged; the rows stay */
			rc = 0;
			n = CAT_SWEEP_BATCH; /* again, from the same place */
			continue;
		}
		/* invariant 11: the commits that dropped these counts are durable
		 * before the first object goes (one sync per sweep, none when
		 * nothing is to go) */
		if (!synced && (rc = cat_wal_sync(cat)) != 0)
			break;
		synced = true;
		rc = cat_begin(cat);
		for (int i = 0; i < n && rc == 0; i++) {
			int rrc = cat->reclaim ? cat->reclaim(cat->reclaim_arg, batch[i]) : 0;
			if (rrc != 0) {
				char hex[2 * CAT_HASH_LEN + 1];
				cat_hex(batch[i], hex);
				log_warn("catalog %s: chunk %s has no references but reclaiming it"
					 " failed (%s); keeping it for a later sweep",
					 cat->path, hex, strerror(rrc < 0 ? -rrc : rrc));
				kept++;
				continue;
			}
			rc = cat_up_chunk_gone_txn(cat, batch[i]);
			if (rc == 0)
				rc = cat_bind(cat, S_GARBAGE_DELETE, A_HASH(batch[i]));
			if (rc == 0)
				rc = cat_run(cat, S_GARBAGE_DELETE);
			reclaimed += rc == 0;
		}
		rc = cat_end(cat, rc);
		memcpy(after, batch[n - 1], CAT_HASH_LEN);
		after_len = CAT_HASH_LEN;
	} while (rc == 0 && n == CAT_SWEEP_BATCH);

	if (rc != 0)
		log_warn("catalog %s: sweep of unreferenced chunks stopped early; the next one"
			 " finishes it", cat->path);
	else if (reclaimed + kept > 0)
		log_debug("catalog %s: swept %" PRIu64 " unreferenced chunks, kept %" PRIu64,
			  cat->path, reclaimed, kept);
	return rc;
}

/* Ends a transaction that may have dropped counts: commit, then sweep. */
int cat_end_sweep(struct cat *cat, int rc)
{
	rc = cat_end(cat, rc);
	if (rc == 0)
		cat_sweep(cat);
	return rc;
}

/* ---- namespace helpers (inside a transaction or a read) ---- */

static bool cat_is_dir(const struct cat_inode *inode)
{
	return S_ISDIR(inode->mode);
}

/* -EINVAL for "", ".", "..", or a name with '/'; -ENAMETOOLONG. */
int cat_name_check(const char *name)
{
	if (name == NULL)
		return -EINVAL;
	size_t len = strnlen(name, CAT_NAME_MAX + 1);
	if (len > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	if (len == 0 || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
	    strcmp(name, "..") == 0)
		return -EINVAL;
	return 0;
}

/* S_INODE_GET, or S_INODE_GET_GEN with gen_id: one inode's row. */
static int cat_inode_read(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id)
{
	enum cat_sid id = gen_id ? S_INODE_GET_GEN : S_INODE_GET;
	int rc = cat_bind(cat, id, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, id);
	if (rc == 1) {
		cat_col_inode(cat, id, 0, out);
		if (gen_id)
			*gen_id = (uint64_t)cat_col_int(cat, id, 10); /* NULL reads as 0 */
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, id);
	return rc;
}

int cat_inode_get(struct cat *cat, uint64_t ino, struct cat_inode *out)
{
	return cat_inode_read(cat, ino, out, NULL);
}

int cat_inode_get_gen(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id)
{
	*gen_id = 0;
	return cat_inode_read(cat, ino, out, gen_id);
}

/* rc of reading out, then whether out is a live directory. */
static int cat_dir_live(int rc, const struct cat_inode *out)
{
	if (rc == 0 && !cat_is_dir(out))
		rc = -ENOTDIR;
	if (rc == 0 && out->nlink == 0)
		rc = -ENOENT;
	return rc;
}

/* A live directory: -ENOENT if missing or removed, -ENOTDIR. */
static int cat_dir_get(struct cat *cat, uint64_t ino, struct cat_inode *out)
{
	return cat_dir_live(cat_inode_get(cat, ino, out), out);
}

static int cat_dirent_corrupt(struct cat *cat, uint64_t parent, const char *name)
{
	log_error("catalog %s: corrupt: entry %" PRIu64 "/\"%s\" names a missing inode",
		  cat->path, parent, name);
	return -EIO;
}

/* The entry `name` in `parent` and its inode; -ENOENT if absent. */
int cat_dirent_get(struct cat *cat, uint64_t parent, const char *name, uint64_t *id,
		   struct cat_inode *out)
{
	int rc = cat_bind(cat, S_DIRENT_GET, A_INT(parent), A_TEXT(name));
	if (rc == 0)
		rc = cat_next(cat, S_DIRENT_GET);
	if (rc == 1) {
		*id = (uint64_t)cat_col_int(cat, S_DIRENT_GET, 0);
		if (sqlite3_column_type(cat->stmt[S_DIRENT_GET], 1) == SQLITE_NULL) {
			rc = cat_dirent_corrupt(cat, parent, name);
		} else {
			cat_col_inode(cat, S_DIRENT_GET, 1, out);
			rc = 0;
		}
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, S_DIRENT_GET);
	return rc;
}

/* The parent of a directory (the root is its own parent). */
static int cat_parent_of(struct cat *cat, uint64_t dir, uint64_t *parent)
{
	if (dir == CAT_ROOT_INO) {
		*parent = CAT_ROOT_INO;
		return 0;
	}
	int rc = cat_bind(cat, S_DIRENT_PARENT, A_INT(dir));
	if (rc == 0)
		rc = cat_next(cat, S_DIRENT_PARENT);
	if (rc == 1) {
		*parent = (uint64_t)cat_col_int(cat, S_DIRENT_PARENT, 0);
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, S_DIRENT_PARENT);
	return rc;
}

/* 0 if the directory has no entries, -ENOTEMPTY if it has. */
static int cat_dir_empty(struct cat *cat, uint64_t dir)
{
	int rc = cat_bind(cat, S_DIR_HAS_ENTRY, A_INT(dir));
	if (rc == 0)
		rc = cat_next(cat, S_DIR_HAS_ENTRY);
	cat_reset(cat, S_DIR_HAS_ENTRY);
	return rc == 1 ? -ENOTEMPTY : rc;
}

/* -EINVAL if dir is `ancestor` or lies below it. */
static int cat_not_within(struct cat *cat, uint64_t dir, uint64_t ancestor)
{
	for (int depth = 0; depth < CAT_MAX_DEPTH; depth++) {
		if (dir == ancestor)
			return -EINVAL;
		if (dir == CAT_ROOT_INO)
			return 0;
		int rc = cat_parent_of(cat, dir, &dir);
		if (rc == -ENOENT) {
			log_error("catalog %s: corrupt: directory %" PRIu64 " has no entry",
				  cat->path, dir);
			return -EIO;
		}
		if (rc != 0)
			return rc;
	}
	log_error("catalog %s: corrupt: directory %" PRIu64 " is more than %d levels deep"
		  " (a cycle?)", cat->path, dir, CAT_MAX_DEPTH);
	return -EIO;
}

static int cat_nlink_add(struct cat *cat, uint64_t ino, int delta, int64_t now)
{
	int rc = cat_bind(cat, S_INODE_NLINK, A_INT(ino), A_INT(delta), A_INT(now));
	if (rc == 0)
		rc = cat_run(cat, S_INODE_NLINK);
	assert(rc != 0 || cat_changes(cat) == 1);
	return rc;
}

/* A directory's entries changed: mtime, ctime, and nlink by delta. */
int cat_dir_touch(struct cat *cat, uint64_t dir, int delta, int64_t now)
{
	int rc = cat_bind(cat, S_DIR_TOUCH, A_INT(dir), A_INT(delta), A_INT(now));
	if (rc == 0)
		rc = cat_run(cat, S_DIR_TOUCH);
	assert(rc != 0 || cat_changes(cat) == 1);
	return rc;
}

int cat_dirent_insert(struct cat *cat, uint64_t parent, const char *name, uint64_t ino)
{
	int rc = cat_bind(cat, S_DIRENT_INSERT, A_INT(parent), A_TEXT(name), A_INT(ino));
	if (rc == 0)
		rc = cat_run(cat, S_DIRENT_INSERT);
	return rc;
}

int cat_dirent_delete(struct cat *cat, uint64_t id)
{
	int rc = cat_bind(cat, S_DIRENT_DELETE, A_INT(id));
	if (rc == 0)
		rc = cat_run(cat, S_DIRENT_DELETE);
	assert(rc != 0 || cat_changes(cat) == 1);
	return rc;
}

/* ---- open / close ---- */

/* SQLite takes a file shorter than its header for an empty database and would
 * write a catalog over it: refuse any non-empty file without the magic. */
static int cat_sniff(const char *path)
{
	static const char magic[16] = "SQLite format 3";
	char head[sizeof(magic)];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP) {
		log_error("catalog %s: a symlink, not a catalog ckptfs made: refused", path);
		return -ELOOP;
	}
	if (fd < 0)
		return 0; /* missing: created; unreadable: sqlite3_open_v2 reports it */
	ssize_t n = read(fd, head, sizeof(head));
	int err = errno;
	close(fd);
	if (n < 0) {
		log_error("catalog %s: cannot read: %s", path, strerror(err));
		return -err;
	}
	if (n > 0 && (n < (ssize_t)sizeof(magic) || memcmp(head, magic, sizeof(magic)) != 0)) {
		log_error("catalog %s: not a ckptfs catalog: the file is not an SQLite database",
			  path);
		return -EINVAL;
	}
	return 0;
}

/* Reads one integer from a one-off query (schema checks at open). A file that
 * is not an SQLite database fails here with SQLITE_NOTADB → -EINVAL. */
static int cat_query_int(struct cat *cat, const char *what, const char *sql, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int src = sqlite3_prepare_v2(cat->db, sql, -1, &st, NULL);
	if (src == SQLITE_OK) {
		src = sqlite3_step(st);
		if (src == SQLITE_ROW) {
			*out = sqlite3_column_int64(st, 0);
			src = SQLITE_OK;
		} else if (src == SQLITE_DONE) {
			*out = 0;
			src = SQLITE_OK;
		}
	}
	int rc = 0;
	if (src == SQLITE_NOTADB) {
		log_error("catalog %s: not a ckptfs catalog: the file is not an SQLite database",
			  cat->path);
		rc = -EINVAL;
	} else if (src != SQLITE_OK) {
		log_error("catalog %s: cannot read %s: %s (sqlite %d)", cat->path, what,
			  sqlite3_errmsg(cat->db), src);
		rc = -EIO;
	}
	sqlite3_finalize(st);
	return rc;
}

static int cat_exec(struct cat *cat, const char *what, const char *sql)
{
	char *err = NULL;
	int src = sqlite3_exec(cat->db, sql, NULL, NULL, &err);
	if (src != SQLITE_OK) {
		log_error("catalog %s: cannot %s: %s (sqlite %d)", cat->path, what,
			  err ? err : sqlite3_errmsg(cat->db), src);
		sqlite3_free(err);
		return -EIO;
	}
	return 0;
}

/* Creates the schema, the version fields and the root directory. */
static int cat_schema_create(struct cat *cat, uint32_t root_uid, uint32_t root_gid)
{
	int64_t now = cat_now_ns();
	char *sql = sqlite3_mprintf(
		"BEGIN IMMEDIATE;%s%s%s%s%s%s%s"
		"PRAGMA application_id=%d;PRAGMA user_version=%d;"
		"INSERT INTO meta(key, value) VALUES('schema_version', %d),"
		" ('created_ns', %lld), ('application', 'ckptfs');"
		"INSERT INTO inodes(ino, mode, uid, gid, nlink, size, rdev, atime_ns, mtime_ns,"
		" ctime_ns) VALUES(%d, %d, %lld, %lld, 2, 0, 0, %lld, %lld, %lld);"
		"COMMIT;",
		cat_schema_sql, cat_schema_v2_sql, cat_schema_v3_sql, cat_schema_v4_sql, cat_schema_v5_sql,
		cat_schema_v6_sql, cat_schema_v7_sql, CAT_APPLICATION_ID, CAT_SCHEMA_VERSION,
		CAT_SCHEMA_VERSION, (long long)now, CAT_ROOT_INO, S_IFDIR | 0755, (long long)root_uid,
		(long long)root_gid, (long long)now, (long long)now, (long long)now);
	if (sql == NULL) {
		log_error("catalog %s: cannot create the schema: out of memory", cat->path);
		return -ENOMEM;
	}
	int rc = cat_exec(cat, "create the schema", sql);
	sqlite3_free(sql);
	if (rc != 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_exec(cat, "roll back the schema", "ROLLBACK");
	if (rc == 0) {
		cat->schema_version = CAT_SCHEMA_VERSION;
		log_info("catalog %s: created (schema version %d)", cat->path, CAT_SCHEMA_VERSION);
	}
	return rc;
}

/* Tells a ckptfs catalog from anything else, and refuses a newer schema.
 * The versioning rule (SCHEMA.md): application_id, user_version and the meta
 * table keep their meaning in every version. */
static int cat_schema_check(struct cat *cat, uint32_t root_uid, uint32_t root_gid)
{
	int64_t app_id = 0, user_version = 0, tables = 0, version = 0, is_ckptfs = 0;
	int rc = cat_query_int(cat, "the application id", "PRAGMA application_id", &app_id);
	if (rc == 0)
		rc = cat_query_int(cat, "the schema version", "PRAGMA user_version", &user_version);
	if (rc == 0)
		rc = cat_query_int(cat, "the schema", "SELECT COUNT(*) FROM sqlite_master", &tables);
	if (rc != 0)
		return rc;
	if (app_id == 0 && user_version == 0 && tables == 0)
		return cat_schema_create(cat, root_uid, root_gid);
	if (app_id == 0) {
		log_error("catalog %s: not a ckptfs catalog: an SQLite database without a ckptfs"
			  " application_id or meta table", cat->path);
		return -EINVAL;
	}
	if (app_id != CAT_APPLICATION_ID) {
		log_error("catalog %s: not a ckptfs catalog: an SQLite database with application_id"
			  " 0x%08" PRIx64 " (ckptfs uses 0x%08x)", cat->path, (uint64_t)app_id,
			  CAT_APPLICATION_ID);
		return -EINVAL;
	}
	if (user_version > CAT_SCHEMA_VERSION) {
		log_error("catalog %s has schema version %" PRId64 ", this ckptfs understands up"
			  " to %d: upgrade ckptfs", cat->path, user_version, CAT_SCHEMA_VERSION);
		return -EPROTO;
	}
	rc = cat_query_int(cat, "the schema", "SELECT COUNT(*) FROM sqlite_master WHERE"
			   " type = 'table' AND name = 'meta'", &tables);
	if (rc == 0 && tables == 1)
		rc = cat_query_int(cat, "the catalog's application",
				   "SELECT value = 'ckptfs' FROM meta WHERE key = 'application'",
				   &is_ckptfs);
	if (rc == 0 && is_ckptfs == 1)
		rc = cat_query_int(cat, "the catalog's schema version",
				   "SELECT value FROM meta WHERE key = 'schema_version'", &version);
	if (rc != 0)
		return rc;
	if (is_ckptfs != 1) {
		log_error("catalog %s: not a ckptfs catalog: no ckptfs meta table", cat->path);
		return -EINVAL;
	}
	if (version > CAT_SCHEMA_VERSION) {
		log_error("catalog %s has schema version %" PRId64 ", this ckptfs understands up"
			  " to %d: upgrade ckptfs", cat->path, version, CAT_SCHEMA_VERSION);
		return -EPROTO;
	}
	if (version < 1 || version != user_version) {
		log_error("catalog %s: corrupt: schema version %" PRId64 " in meta, %" PRId64
			  " in user_version", cat->path, version, user_version);
		return -EINVAL;
	}
	cat->schema_version = (int)version;
	return 0;
}

/* Brings an older catalog to CAT_SCHEMA_VERSION in one transaction (the
 * versioning rule in SCHEMA.md): every step from its version up. */
static int cat_schema_migrate(struct cat *cat)
{
	if (cat->schema_version == CAT_SCHEMA_VERSION)
		return 0;
	assert(cat->schema_version >= 1 && cat->schema_version < CAT_SCHEMA_VERSION);
	char *steps = sqlite3_mprintf("%s", "");
	for (int v = cat->schema_version; v < CAT_SCHEMA_VERSION && steps; v++) {
		char *more = sqlite3_mprintf("%s%s", steps, cat_schema_steps[v]);
		sqlite3_free(steps);
		steps = more;
	}
	char *sql = steps ? sqlite3_mprintf("BEGIN IMMEDIATE;%sPRAGMA user_version=%d;"
					    "UPDATE meta SET value = %d WHERE key = 'schema_version';"
					    "COMMIT;", steps, CAT_SCHEMA_VERSION, CAT_SCHEMA_VERSION)
			  : NULL;
	sqlite3_free(steps);
	if (sql == NULL) {
		log_error("catalog %s: cannot migrate the schema: out of memory", cat->path);
		return -ENOMEM;
	}
	char what[64];
	snprintf(what, sizeof(what), "migrate the schema from version %d to %d", cat->schema_version,
		 CAT_SCHEMA_VERSION);
	int rc = cat_exec(cat, what, sql);
	sqlite3_free(sql);
	if (rc != 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_exec(cat, "roll back the schema migration", "ROLLBACK");
	if (rc == 0) {
		log_info("catalog %s: migrated from schema version %d to %d", cat->path,
			 cat->schema_version, CAT_SCHEMA_VERSION);
		cat->schema_version = CAT_SCHEMA_VERSION;
	}
	return rc;
}

static int cat_configure(struct cat *cat)
{
	char sql[160];
	snprintf(sql, sizeof(sql),
		 "PRAGMA synchronous=NORMAL;PRAGMA foreign_keys=OFF;PRAGMA cache_size=-%d;"
		 "PRAGMA temp_store=MEMORY;", CAT_CACHE_KIB);
	int rc = cat_exec(cat, "configure the connection", sql);
	if (rc != 0)
		return rc;
	sqlite3_stmt *st = NULL;
	int src = sqlite3_prepare_v2(cat->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		const char *mode = (const char *)sqlite3_column_text(st, 0);
		if (mode == NULL || strcmp(mode, "wal") != 0)
			log_warn("catalog %s: WAL journal unavailable (journal_mode %s): commits are"
				 " slower", cat->path, mode ? mode : "?");
		src = SQLITE_OK;
	}
	if (src != SQLITE_OK) {
		log_error("catalog %s: cannot set journal_mode=WAL: %s (sqlite %d)", cat->path,
			  sqlite3_errmsg(cat->db), src);
		rc = -EIO;
	}
	sqlite3_finalize(st);
	return rc;
}

static int cat_prepare_all(struct cat *cat)
{
	int rc = cat_exec(cat, "create the temporary tables", cat_gen_temp_sql);
	if (rc == 0)
		rc = cat_exec(cat, "create the temporary tables", cat_up_temp_sql);
	if (rc != 0)
		return rc;
	for (int id = 0; id < S_COUNT; id++) {
		const struct cat_sql *q = cat_sql_of(id);
		assert(q->sql != NULL);
		int src = sqlite3_prepare_v3(cat->db, q->sql, -1,
					     SQLITE_PREPARE_PERSISTENT, &cat->stmt[id], NULL);
		if (src != SQLITE_OK) {
			log_error("catalog %s: cannot prepare the statement to %s: %s (sqlite %d)"
				  " [%s]", cat->path, q->purpose, sqlite3_errmsg(cat->db),
				  src, q->sql);
			return -EIO;
		}
	}
	return 0;
}

/* Invariant 4: pending rows belonged to writers of a process that is gone,
 * and inodes with nlink 0 to handles that are closed. G4 first: open
 * generations are rolled back, and the inodes that removes go with the rest.
 * Then, with sweep, the zero-count sweep (invariant 1). Beside a shared
 * namespace (cat_open_node) it is left out: there a local chunk row
 * at count 0 is an object not yet uploaded (the upload queue keeps it) or a
 * cache copy of a shared object, which only the cache policy evicts and
 * only the cluster's reclaim duty removes from BACKING. */
static int cat_recover(struct cat *cat, bool sweep)
{
	int pending = 0, inodes = 0;
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_gen_recover_txn(cat);
	if (rc == 0)
		rc = cat_run(cat, R_P_ALL_DROP);
	if (rc == 0)
		rc = cat_run(cat, S_RECOVER_P_DELETE);
	pending = cat_changes(cat);
	if (rc == 0)
		rc = cat_run(cat, R_X_UNLINKED_DROP);
	if (rc == 0)
		rc = cat_run(cat, S_RECOVER_X_DELETE);
	if (rc == 0)
		rc = cat_run(cat, S_RECOVER_INODES);
	inodes = cat_changes(cat);
	rc = cat_end(cat, rc);
	if (rc == 0 && (pending > 0 || inodes > 0))
		log_info("catalog %s: recovery dropped %d pending extents and %d unlinked inodes",
			 cat->path, pending, inodes);
	if (rc == 0 && sweep)
		rc = cat_sweep(cat);
	return rc;
}

/* Shared invariant 7: a new catalog is made private (0600) before SQLite
 * opens it, and SQLite gives its -wal and -shm the same mode; a symlink is
 * never opened (SQLITE_OPEN_NOFOLLOW). */
static int cat_db_open(struct cat *cat)
{
	int fd = open(cat->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	int src = sqlite3_open_v2(cat->path, &cat->db,
				  SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
					  SQLITE_OPEN_NOFOLLOW,
				  NULL);
	if (src == SQLITE_OK)
		return 0;
	int err = cat->db ? sqlite3_system_errno(cat->db) : 0;
	log_error("catalog %s: cannot open: %s (sqlite %d%s%s)", cat->path,
		  cat->db ? sqlite3_errmsg(cat->db) : sqlite3_errstr(src), src, err ? ", " : "",
		  err ? strerror(err) : "");
	return err > 0 ? -err : -EIO;
}

/* Invariant 9 (one role per catalog): the meta row 'role' says whether this
 * catalog is a catalog alone ('alone': the namespace is here) or a node's
 * local catalog beside a shared one ('node': cat_open_node; the namespace is
 * PostgreSQL's). Opened the other way, it is refused with -EMEDIUMTYPE and
 * one line. Why: a node's local chunk rows at count 0 are its objects not yet
 * uploaded and cache copies of shared objects; opened alone, the sweep would
 * take them for garbage and remove them from the cache and BACKING while
 * PostgreSQL still names them. A catalog alone opened as a node would hide
 * its files. A catalog without the row (an older version, or new) gets the
 * role it is opened with — except that a catalog holding files (inodes
 * beyond the root) never becomes a node's. */
static int cat_role_check(struct cat *cat, bool node)
{
	int64_t role = 0, inodes = 0;
	int rc = cat_query_int(cat, "the catalog's role",
			       "SELECT CASE value WHEN 'alone' THEN 1 WHEN 'node' THEN 2 ELSE 3 END"
			       " FROM meta WHERE key = 'role'", &role);
	if (rc != 0)
		return rc;
	if (role == (node ? 2 : 1))
		return 0;
	if (role == 0 && node)
		rc = cat_query_int(cat, "the catalog's inodes", "SELECT COUNT(*) FROM inodes", &inodes);
	if (rc != 0)
		return rc;
	if (role == 3) {
		log_error("catalog %s: an unknown role in its meta table: written by a newer ckptfs",
			  cat->path);
		return -EPROTO;
	}
	if (role == 2) {
		log_error("catalog %s is the local catalog of a node of a shared catalog: mount this"
			  " cache with the same -o meta=URL as before, or use another (empty) cache for"
			  " a mount without meta= (nothing was changed)", cat->path);
		return -EMEDIUMTYPE;
	}
	if (role == 1 || inodes > 1) {
		log_error("catalog %s holds files of a catalog alone (without -o meta=): mount this"
			  " cache without meta=, or give a node of a shared catalog another (empty)"
			  " cache (nothing was changed)", cat->path);
		return -EMEDIUMTYPE;
	}
	return cat_exec(cat, "the catalog's role",
			node ? "INSERT INTO meta(key, value) VALUES('role', 'node')"
			     : "INSERT INTO meta(key, value) VALUES('role', 'alone')");
}

/* Invariant 9 for a catalog opened read-only, which no open checks: the
 * caller asks (ckptfs-admin refuses to read a node's catalog offline). */
int cat_role_node(struct cat *cat, bool *node)
{
	int64_t role = 0;
	int rc = cat_query_int(cat, "the catalog's role",
			       "SELECT value = 'node' FROM meta WHERE key = 'role'", &role);
	*node = rc == 0 && role == 1;
	return rc;
}

static int cat_open_as(const char *path, uint32_t root_uid, uint32_t root_gid,
		       cat_reclaim_fn reclaim, void *reclaim_arg, bool node_only, struct cat **out)
{
	*out = NULL;
	struct cat *cat = calloc(1, sizeof(*cat));
	if (cat == NULL || (cat->path = strdup(path)) == NULL) {
		log_error("catalog %s: cannot open: out of memory", path);
		free(cat);
		return -ENOMEM;
	}
	pthread_mutex_init(&cat->lock, NULL);
	cat->reclaim = reclaim;
	cat->reclaim_arg = reclaim_arg;
	cat->intent_fd = -1;

	/* a WAL left behind: the last writer did not close (a crash, kill -9) */
	char wal[PATH_MAX + 8];
	struct stat wst;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	bool unclean = stat(wal, &wst) == 0 && wst.st_size > 0;
	int rc = cat_sniff(path);
	if (rc == 0)
		rc = cat_db_open(cat);
	if (rc == 0)
		sqlite3_busy_timeout(cat->db, CAT_BUSY_TIMEOUT_MS);
	if (rc == 0)
		rc = cat_schema_check(cat, root_uid, root_gid);
	if (rc == 0)
		rc = cat_configure(cat);
	if (rc == 0 && unclean)
		log_info("catalog %s was not closed cleanly: full integrity_check", path);
	if (rc == 0 && cat_integrity(cat, unclean) != 0)
		rc = -EIO; /* damaged: rebuilt from BACKING, never written further */
	if (rc == 0)
		rc = cat_schema_migrate(cat);
	if (rc == 0)
		rc = cat_role_check(cat, node_only); /* invariant 9: before recovery sweeps */
	if (rc == 0)
		rc = cat_prepare_all(cat);
	if (rc == 0) {
		cat_lock(cat);
		rc = cat_recover(cat, !node_only);
		if (rc == 0) /* objects of deferred changes a crash lost (catalog_defer.c D7) */
			rc = cat_defer_recover(cat);
		cat_unlock(cat);
	}
	if (rc != 0) {
		cat_close(cat);
		return rc;
	}
	*out = cat;
	return 0;
}

int cat_open(const char *path, uint32_t root_uid, uint32_t root_gid, cat_reclaim_fn reclaim,
	     void *reclaim_arg, struct cat **out)
{
	return cat_open_as(path, root_uid, root_gid, reclaim, reclaim_arg, false, out);
}

int cat_open_node(const char *path, uint32_t root_uid, uint32_t root_gid, cat_reclaim_fn reclaim,
		  void *reclaim_arg, struct cat **out)
{
	return cat_open_as(path, root_uid, root_gid, reclaim, reclaim_arg, true, out);
}

int cat_file_schema_version(const char *path, int *version, char *why, size_t why_size)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, CAT_BUSY_TIMEOUT_MS);
		rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
	}
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		*version = sqlite3_column_int(st, 0);
		rc = SQLITE_OK;
	}
	if (rc != SQLITE_OK && why)
		snprintf(why, why_size, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	sqlite3_finalize(st);
	sqlite3_close(db);
	switch (rc & 0xff) { /* the primary code of an extended one */
	case SQLITE_OK: return 0;
	case SQLITE_NOTADB: return -EINVAL;
	case SQLITE_CANTOPEN:
	case SQLITE_PERM:
	case SQLITE_AUTH: return -EACCES;
	case SQLITE_BUSY:
	case SQLITE_LOCKED: return -EBUSY;
	case SQLITE_NOMEM: return -ENOMEM;
	default: return -EIO; /* SQLITE_CORRUPT, SQLITE_IOERR: damaged or unreadable */
	}
}

int cat_open_readonly(const char *path, struct cat **out)
{
	*out = NULL;
	struct cat *cat = calloc(1, sizeof(*cat));
	if (cat == NULL || (cat->path = strdup(path)) == NULL) {
		free(cat);
		return -ENOMEM;
	}
	pthread_mutex_init(&cat->lock, NULL);
	cat->intent_fd = -1;
	int rc = cat_sniff(path);
	if (rc == 0 && access(path, F_OK) != 0)
		rc = -errno;
	if (rc == 0) {
		int src = sqlite3_open_v2(path, &cat->db,
					  SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
					  NULL);
		if (src != SQLITE_OK) {
			log_error("catalog %s: cannot open read-only: %s", path,
				  cat->db ? sqlite3_errmsg(cat->db) : sqlite3_errstr(src));
			rc = -EIO;
		}
	}
	if (rc == 0) {
		sqlite3_busy_timeout(cat->db, CAT_BUSY_TIMEOUT_MS);
		rc = cat_schema_check(cat, 0, 0);
	}
	if (rc == 0 && cat->schema_version < CAT_SCHEMA_VERSION) {
		log_error("catalog %s has schema version %d: it becomes version %d when ckptfs"
			  " opens it read-write (mount it once); read-only, it cannot be read",
			  path, cat->schema_version, CAT_SCHEMA_VERSION);
		rc = -EPROTO;
	}
	if (rc == 0)
		rc = cat_prepare_all(cat);
	if (rc != 0) {
		cat_close(cat);
		return rc;
	}
	*out = cat;
	return 0;
}

/* Invariant 10, under the lock: D-path changes are committed, then every
 * commit so far is made durable; a deferred commit that failed (rolled
 * back) is the caller's error, not a success. */
int cat_sync_locked(struct cat *cat)
{
	int rc = cat_defer_flush(cat);
	if (rc == 0)
		rc = cat_wal_sync(cat);
	return rc;
}

int cat_sync(struct cat *cat)
{
	if (cat->shared) return catsh_sync(cat);
	cat_lock(cat);
	int rc = cat_sync_locked(cat);
	cat_unlock(cat);
	return rc;
}

void cat_close(struct cat *cat)
{
	if (cat == NULL)
		return;
	if (cat->shared) { catsh_close(cat); return; }
	assert(!cat->in_txn);
	cat_defer_stop(cat);
	for (int id = 0; id < S_COUNT; id++)
		sqlite3_finalize(cat->stmt[id]);
	if (cat->db != NULL && sqlite3_close(cat->db) != SQLITE_OK)
		log_error("catalog %s: cannot close: %s", cat->path, sqlite3_errmsg(cat->db));
	pthread_mutex_destroy(&cat->lock);
	free(cat->path);
	free(cat);
}

uint64_t cat_statements_run(struct cat *cat)
{
	uint64_t n = 0;
	cat_lock(cat);
	for (int id = 0; id < S_COUNT; id++)
		if (cat->stmt[id])
			n += (uint64_t)sqlite3_stmt_status(cat->stmt[id], SQLITE_STMTSTATUS_RUN, 0);
	cat_unlock(cat);
	return n;
}

int cat_schema_version(struct cat *cat)
{
	return cat->schema_version;
}

int cat_store_facts(struct cat *cat, struct cat_store_facts *out)
{
	if (cat->shared) return catsh_store_facts(cat, out);
	return -EOPNOTSUPP;
}

int cat_store_id_offer(struct cat *cat, const char *id, char *held)
{
	if (cat->shared) return catsh_store_id_offer(cat, id, held);
	return -EOPNOTSUPP;
}

int cat_store_marked(struct cat *cat)
{
	if (cat->shared) return catsh_store_marked(cat);
	return -EOPNOTSUPP;
}

int cat_catalog_id(struct cat *cat, char *buf, size_t size)
{
	if (cat->shared) return catsh_catalog_id(cat, buf, size);
	sqlite3_stmt *st = NULL;
	cat_lock(cat);
	int src = sqlite3_prepare_v2(cat->db, "SELECT value FROM meta WHERE key = 'catalog_id'", -1,
				     &st, NULL);
	int rc = -EIO;
	if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
		const char *id = (const char *)sqlite3_column_text(st, 0);
		size_t n = id ? strlen(id) : 0;
		rc = n == 32 && strspn(id, "0123456789abcdef") == n ? 0 : -EINVAL;
		if (rc == 0 && n >= size)
			rc = -ENAMETOOLONG;
		if (rc == 0)
			memcpy(buf, id, n + 1);
	} else if (src == SQLITE_DONE) {
		rc = -ENOENT;
	}
	if (rc != 0)
		log_error("catalog %s: cannot read its catalog_id: %s", cat->path,
			  rc == -EIO ? sqlite3_errmsg(cat->db) : strerror(-rc));
	sqlite3_finalize(st);
	cat_unlock(cat);
	return rc;
}

#define CAT_INTEGRITY_LINES 20

int cat_integrity(struct cat *cat, bool full)
{
	const char *pragma = full ? "PRAGMA integrity_check(" : "PRAGMA quick_check(";
	char sql[64];
	snprintf(sql, sizeof(sql), "%s%d)", pragma, CAT_INTEGRITY_LINES);
	sqlite3_stmt *st = NULL;
	cat_lock(cat);
	int src = sqlite3_prepare_v2(cat->db, sql, -1, &st, NULL);
	int findings = 0;
	while (src == SQLITE_OK || src == SQLITE_ROW) {
		if ((src = sqlite3_step(st)) != SQLITE_ROW)
			break;
		const char *line = (const char *)sqlite3_column_text(st, 0);
		if (line && strcmp(line, "ok") == 0)
			continue;
		findings++;
		log_error("catalog %s: %s found: %s", cat->path, full ? "integrity_check" : "quick_check",
			  line ? line : "(null)");
	}
	if (src != SQLITE_DONE) {
		findings++; /* a check that cannot even run (SQLITE_CORRUPT) is a finding too */
		log_error("catalog %s: %s cannot run: %s (sqlite %d)", cat->path,
			  full ? "integrity_check" : "quick_check", sqlite3_errmsg(cat->db), src);
	}
	sqlite3_finalize(st);
	cat_unlock(cat);
	if (findings > 0)
		log_error("catalog %s is damaged (SQLite %s: %d findings)", cat->path,
			  full ? "integrity_check" : "quick_check", findings);
	return findings > 0 ? -EUCLEAN : 0;
}

/* ---- namespace ---- */

int cat_getattr(struct cat *cat, uint64_t ino, struct cat_inode *out)
{
	if (cat->shared) return catsh_getattr(cat, ino, out);
	cat_lock(cat);
	int rc = cat_inode_get(cat, ino, out);
	cat_unlock(cat);
	return rc;
}

int cat_getattr_gen(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id)
{
	if (cat->shared) return catsh_getattr_gen(cat, ino, out, gen_id);
	*gen_id = 0;
	cat_lock(cat);
	int rc = cat_inode_get_gen(cat, ino, out, gen_id);
	cat_unlock(cat);
	return rc;
}

static int cat_lookup_locked(struct cat *cat, uint64_t parent, const char *name,
			     struct cat_inode *out)
{
	struct cat_inode dir;
	uint64_t up;
	int rc;
	if (strcmp(name, ".") == 0)
		return cat_dir_get(cat, parent, out);
	if (strcmp(name, "..") == 0) {
		rc = cat_dir_get(cat, parent, &dir);
		if (rc == 0)
			rc = cat_parent_of(cat, parent, &up);
		return rc == 0 ? cat_inode_get(cat, up, out) : rc;
	}
	rc = cat_name_check(name);
	if (rc != 0)
		return rc;
	/* a miss tells "no such parent" (or not a directory) from "no such
	 * name" from the same row */
	rc = cat_bind(cat, S_LOOKUP, A_INT(parent), A_TEXT(name));
	if (rc == 0)
		rc = cat_next(cat, S_LOOKUP);
	if (rc == 1) {
		sqlite3_stmt *st = cat->stmt[S_LOOKUP];
		dir = (struct cat_inode){ .mode = (uint32_t)sqlite3_column_int64(st, 0),
					  .nlink = (uint32_t)sqlite3_column_int64(st, 1) };
		if (sqlite3_column_type(st, 2) == SQLITE_NULL) {
			rc = cat_dir_live(0, &dir);
			if (rc == 0)
				rc = -ENOENT;
		} else if (sqlite3_column_type(st, 3) == SQLITE_NULL) {
			rc = cat_dirent_corrupt(cat, parent, name);
		} else {
			cat_col_inode(cat, S_LOOKUP, 3, out);
			rc = 0;
		}
	} else if (rc == 0) {
		rc = -ENOENT; /* no such parent */
	}
	cat_reset(cat, S_LOOKUP);
	return rc;
}

int cat_lookup(struct cat *cat, uint64_t parent, const char *name, struct cat_inode *out)
{
	if (cat->shared) return catsh_lookup(cat, parent, name, out);
	if (name == NULL)
		return -EINVAL;
	cat_lock(cat);
	int rc = cat_lookup_locked(cat, parent, name, out);
	cat_unlock(cat);
	return rc;
}

/* A generation is rooted at a directory or a regular file, named as its
 * entry (spec->name NULL or the same), with a step SQLite can hold. */
static int cat_gen_spec_check(const struct cat_gen_spec *spec, const char *name, uint32_t mode)
{
	if (spec == NULL)
		return 0;
	if (!S_ISDIR(mode) && !S_ISREG(mode))
		return -EINVAL;
	if (spec->name != NULL && strcmp(spec->name, name) != 0)
		return -EINVAL;
	return spec->step > INT64_MAX ? -EINVAL : 0;
}

static int cat_create_txn(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
			  uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
			  const struct cat_gen_spec *spec, struct cat_inode *out, uint64_t *gen)
{
	struct cat_inode dir, old;
	uint64_t id;
	int64_t now = cat_now_ns();
	bool is_dir = S_ISDIR(mode);
	int rc = cat_dir_live(cat_inode_get_gen(cat, parent, &dir, gen), &dir);
	if (rc == 0) {
		rc = cat_dirent_get(cat, parent, name, &id, &old);
		if (rc == 0)
			rc = -EEXIST;
		else if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0 && spec != NULL && *gen != 0)
		rc = -EINVAL; /* a series is outside every generation */
	if (rc != 0)
		return rc;

	*out = (struct cat_inode){ .mode = mode, .uid = uid, .gid = gid,
				   .nlink = is_dir ? 2 : 1, .size = target ? strlen(target) : 0,
				   .rdev = rdev, .atime_ns = now, .mtime_ns = now,
				   .ctime_ns = now };
	/* generation.h G7: a file created in a generation is being written
	 * until its last handle is released (cat_file_unmark) */
	bool writing = S_ISREG(mode) && (*gen != 0 || spec != NULL);
	rc = cat_bind(cat, S_INODE_INSERT, A_INT(mode), A_INT(uid), A_INT(gid), A_INT(out->nlink),
		      A_INT(out->size), A_INT(rdev), A_INT(now), target ? A_TEXT(target) : A_NULL,
		      A_ID(*gen), A_INT(writing));
	if (rc == 0)
		rc = cat_run(cat, S_INODE_INSERT);
	if (rc == 0) {
		out->ino = (uint64_t)sqlite3_last_insert_rowid(cat->db);
		assert(out->ino > CAT_ROOT_INO);
		rc = cat_dirent_insert(cat, parent, name, out->ino);
	}
	if (rc == 0)
		rc = cat_dir_touch(cat, parent, is_dir ? 1 : 0, now);
	if (rc == 0 && spec != NULL)
		rc = cat_gen_start_txn(cat, parent, out->ino, name, spec->step, gen);
	return rc;
}

int cat_create_in_gen(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
		      uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		      const struct cat_gen_spec *gen, struct cat_inode *out, uint64_t *gen_id)
{
	if (cat->shared) return catshg_create_in_gen(cat, parent, name, mode, uid, gid, rdev, target, gen, out, gen_id);
	uint64_t in_gen = 0;
	int rc = cat_name_check(name);
	if (rc == 0)
		rc = cat_gen_spec_check(gen, name, mode);
	if (rc != 0)
		return rc;
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFIFO: case S_IFSOCK: case S_IFCHR: case S_IFBLK:
		if (target != NULL)
			return -EINVAL;
		break;
	case S_IFLNK:
		if (target == NULL || mode != (S_IFLNK | 0777) || target[0] == 0)
			return -EINVAL;
		if (strnlen(target, 4096) >= 4096)
			return -ENAMETOOLONG;
		break;
	default:
		return -EINVAL;
	}
	cat_lock(cat);
	bool deferred = false; /* a new generation root is never deferred (D1) */
	rc = gen ? cat_begin(cat) : cat_change_begin(cat, parent, &deferred);
	if (rc == 0)
		rc = cat_create_txn(cat, parent, name, mode, uid, gid, rdev, target, gen, out,
				    &in_gen);
	if (rc == 0) /* catalog_defer.c D10 */
		cat_defer_reused(cat, out->ino);
	if (rc == 0 && deferred)
		cat_defer_note_created(cat, out->ino);
	rc = cat_change_end(cat, deferred, rc, false);
	cat_unlock(cat);
	if (gen_id != NULL)
		*gen_id = rc == 0 ? in_gen : 0;
	return rc;
}

int cat_create(struct cat *cat, uint64_t parent, const char *name, uint32_t mode, uint32_t uid,
	       uint32_t gid, uint64_t rdev, const char *target, struct cat_inode *out)
{
	if (cat->shared) return catsh_create(cat, parent, name, mode, uid, gid, rdev, target, out);
	return cat_create_in_gen(cat, parent, name, mode, uid, gid, rdev, target, NULL, out, NULL);
}

static int cat_link_txn(struct cat *cat, uint64_t ino, uint64_t newparent, const char *newname,
			struct cat_inode *out)
{
	struct cat_inode dir, old;
	uint64_t id, gen = 0, dir_gen = 0;
	int64_t now = cat_now_ns();
	int rc = cat_inode_get(cat, ino, out);
	if (rc == 0 && cat_is_dir(out))
		rc = -EPERM;
	if (rc == 0 && out->nlink == 0)
		rc = -ENOENT; /* like link(2) of an unlinked file */
	if (rc == 0)
		rc = cat_dir_get(cat, newparent, &dir);
	if (rc == 0) /* G1: all links of an inode lie in its generation */
		rc = cat_gen_of_txn(cat, ino, &gen);
	if (rc == 0)
		rc = cat_gen_of_txn(cat, newparent, &dir_gen);
	if (rc == 0 && gen != dir_gen)
		rc = -EXDEV;
	if (rc == 0) {
		rc = cat_dirent_get(cat, newparent, newname, &id, &old);
		if (rc == 0)
			rc = -EEXIST;
		else if (rc == -ENOENT)
			rc = 0;
	}
	if (rc == 0)
		rc = cat_dirent_insert(cat, newparent, newname, ino);
	if (rc == 0)
		rc = cat_nlink_add(cat, ino, 1, now);
	if (rc == 0)
		rc = cat_dir_touch(cat, newparent, 0, now);
	if (rc == 0) {
		out->nlink++;
		out->ctime_ns = now;
	}
	return rc;
}

int cat_link(struct cat *cat, uint64_t ino, uint64_t newparent, const char *newname,
	     struct cat_inode *out)
{
	if (cat->shared) return catsh_link(cat, ino, newparent, newname, out);
	int rc = cat_name_check(newname);
	if (rc != 0)
		return rc;
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_link_txn(cat, ino, newparent, newname, out);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* unlink and rmdir. */
static int cat_remove_txn(struct cat *cat, uint64_t parent, const char *name, bool want_dir,
			  uint64_t *ino_out)
{
	struct cat_inode dir, victim;
	uint64_t id;
	int64_t now = cat_now_ns();
	int rc = cat_dir_get(cat, parent, &dir);
	if (rc == 0)
		rc = cat_dirent_get(cat, parent, name, &id, &victim);
	if (rc == 0 && want_dir && !cat_is_dir(&victim))
		rc = -ENOTDIR;
	if (rc == 0 && !want_dir && cat_is_dir(&victim))
		rc = -EISDIR;
	if (rc == 0 && want_dir)
		rc = cat_dir_empty(cat, victim.ino);
	if (rc == 0)
		rc = cat_dirent_delete(cat, id);
	if (rc == 0) /* a removed directory drops both its links at once */
		rc = cat_nlink_add(cat, victim.ino, want_dir ? -(int)victim.nlink : -1, now);
	if (rc == 0)
		rc = cat_dir_touch(cat, parent, want_dir ? -1 : 0, now);
	if (rc == 0)
		rc = cat_gen_unlinked_txn(cat, victim.ino, "trainer");
	if (rc == 0 && ino_out)
		*ino_out = victim.ino;
	return rc;
}

static int cat_remove(struct cat *cat, uint64_t parent, const char *name, bool want_dir,
		      uint64_t *ino_out)
{
	int rc;
	if (name != NULL && strcmp(name, "..") == 0 && want_dir)
		return -ENOTEMPTY;
	rc = cat_name_check(name);
	if (rc != 0)
		return rc;
	cat_lock(cat);
	bool deferred = false;
	rc = cat_change_begin(cat, parent, &deferred);
	if (rc == 0)
		rc = cat_remove_txn(cat, parent, name, want_dir, ino_out);
	/* a deferred removal drops no count (the inode keeps its extents until
	 * released); a removed generation root, never deferred, drops its backup */
	rc = cat_change_end(cat, deferred, rc, !deferred);
	cat_unlock(cat);
	return rc;
}

int cat_unlink(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out)
{
	if (cat->shared) return catsh_unlink(cat, parent, name, ino_out);
	return cat_remove(cat, parent, name, false, ino_out);
}

int cat_rmdir(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out)
{
	if (cat->shared) return catsh_rmdir(cat, parent, name, ino_out);
	return cat_remove(cat, parent, name, true, ino_out);
}

/* Directories' nlink changes of a rename: -1 for a directory leaving one,
 * +1 for one arriving; the two parents may be one. */
static int cat_rename_touch(struct cat *cat, uint64_t parent, int parent_delta,
			    uint64_t newparent, int newparent_delta, int64_t now)
{
	if (parent == newparent)
		return cat_dir_touch(cat, parent, parent_delta + newparent_delta, now);
	int rc = cat_dir_touch(cat, parent, parent_delta, now);
	if (rc == 0)
		rc = cat_dir_touch(cat, newparent, newparent_delta, now);
	return rc;
}

static int cat_rename_txn(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
			  const char *newname, unsigned flags, const struct cat_gen_spec *spec,
			  uint64_t *replaced, uint64_t *new_gen, uint64_t *moved_ino)
{
	struct cat_inode pdir, npdir, src, dst;
	uint64_t src_id, dst_id = 0;
	int64_t now = cat_now_ns();
	bool have_dst = false;
	int rc = cat_dir_get(cat, parent, &pdir);
	if (rc == 0)
		rc = cat_dir_get(cat, newparent, &npdir);
	if (rc == 0)
		rc = cat_dirent_get(cat, parent, name, &src_id, &src);
	if (rc == 0) {
		rc = cat_dirent_get(cat, newparent, newname, &dst_id, &dst);
		have_dst = rc == 0;
		if (rc == -ENOENT)
			rc = 0;
	}
	if (rc != 0)
		return rc;
	if (!have_dst && (flags & CAT_RENAME_EXCHANGE))
		return -ENOENT;
	if (have_dst && (flags & CAT_RENAME_NOREPLACE))
		return -EEXIST;
	*moved_ino = src.ino; /* what newname names once this transaction commits */
	if (have_dst && dst.ino == src.ino)
		return 0; /* the same file under both names: POSIX says do nothing */
	rc = cat_gen_spec_check(spec, newname, src.mode);
	if (rc != 0)
		return rc;

	bool src_dir = cat_is_dir(&src), dst_dir = have_dst && cat_is_dir(&dst);
	int moved = parent != newparent;
	if (src_dir && moved)
		rc = cat_not_within(cat, newparent, src.ino);
	if (rc == 0 && dst_dir && moved && (flags & CAT_RENAME_EXCHANGE))
		rc = cat_not_within(cat, parent, dst.ino);
	if (rc != 0)
		return rc;

	if (flags & CAT_RENAME_EXCHANGE) {
		rc = cat_bind(cat, S_DIRENT_SET_INO, A_INT(src_id), A_INT(dst.ino));
		if (rc == 0)
			rc = cat_run(cat, S_DIRENT_SET_INO);
		if (rc == 0)
			rc = cat_bind(cat, S_DIRENT_SET_INO, A_INT(dst_id), A_INT(src.ino));
		if (rc == 0)
			rc = cat_run(cat, S_DIRENT_SET_INO);
		if (rc == 0)
			rc = cat_nlink_add(cat, src.ino, 0, now);
		if (rc == 0)
			rc = cat_nlink_add(cat, dst.ino, 0, now);
		if (rc == 0 && moved)
			rc = cat_rename_touch(cat, parent, dst_dir - src_dir, newparent,
					      src_dir - dst_dir, now);
		else if (rc == 0)
			rc = cat_dir_touch(cat, parent, 0, now);
		if (rc == 0)
			rc = cat_gen_moved_txn(cat, &src, newparent, newname, spec, new_gen);
		if (rc == 0)
			rc = cat_gen_moved_txn(cat, &dst, parent, name, NULL, NULL);
		return rc;
	}

	if (have_dst) {
		if (src_dir && !dst_dir)
			return -ENOTDIR;
		if (!src_dir && dst_dir)
			return -EISDIR;
		if (dst_dir)
			rc = cat_dir_empty(cat, dst.ino);
		if (rc == 0)
			rc = cat_dirent_delete(cat, dst_id);
		if (rc == 0)
			rc = cat_nlink_add(cat, dst.ino, dst_dir ? -(int)dst.nlink : -1, now);
		if (rc == 0)
			rc = cat_gen_unlinked_txn(cat, dst.ino, "replaced");
		if (rc != 0)
			return rc;
		*replaced = dst.ino;
	}
	rc = cat_bind(cat, S_DIRENT_MOVE, A_INT(src_id), A_INT(newparent), A_TEXT(newname));
	if (rc == 0)
		rc = cat_run(cat, S_DIRENT_MOVE);
	if (rc == 0)
		rc = cat_nlink_add(cat, src.ino, 0, now);
	if (rc == 0)
		rc = cat_rename_touch(cat, parent, src_dir && moved ? -1 : 0, newparent,
				      (src_dir && moved ? 1 : 0) - (dst_dir ? 1 : 0), now);
	if (rc == 0)
		rc = cat_gen_moved_txn(cat, &src, newparent, newname, spec, new_gen);
	return rc;
}

int cat_rename_gen(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
		   const char *newname, unsigned flags, const struct cat_gen_spec *gen,
		   uint64_t *replaced_ino, uint64_t *new_gen_id, uint64_t *moved_ino)
{
	if (cat->shared) return catshg_rename_gen(cat, parent, name, newparent, newname, flags, gen, replaced_ino, new_gen_id, moved_ino);
	uint64_t replaced = 0, new_gen = 0, moved = 0;
	int rc = cat_name_check(name);
	if (rc == 0)
		rc = cat_name_check(newname);
	if (rc == 0 && ((flags & ~(CAT_RENAME_NOREPLACE | CAT_RENAME_EXCHANGE)) != 0 ||
			flags == (CAT_RENAME_NOREPLACE | CAT_RENAME_EXCHANGE)))
		rc = -EINVAL;
	if (rc != 0)
		return rc;
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_rename_txn(cat, parent, name, newparent, newname, flags, gen, &replaced,
				    &new_gen, &moved);
	rc = cat_end_sweep(cat, rc); /* an ended generation drops its backup */
	cat_unlock(cat);
	if (replaced_ino)
		*replaced_ino = rc == 0 ? replaced : 0;
	if (new_gen_id)
		*new_gen_id = rc == 0 ? new_gen : 0;
	if (moved_ino)
		*moved_ino = rc == 0 ? moved : 0;
	return rc;
}

int cat_rename(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
	       const char *newname, unsigned flags, uint64_t *replaced_ino)
{
	if (cat->shared) return catsh_rename(cat, parent, name, newparent, newname, flags, replaced_ino);
	return cat_rename_gen(cat, parent, name, newparent, newname, flags, NULL, replaced_ino,
			      NULL, NULL);
}

static int cat_setattr_txn(struct cat *cat, uint64_t ino, unsigned what,
			   const struct cat_inode *in, struct cat_inode *out)
{
	int rc = cat_inode_get(cat, ino, out);
	if (rc != 0)
		return rc;
	if (what & CAT_SET_MODE)
		out->mode = (out->mode & S_IFMT) | (in->mode & 07777);
	if (what & CAT_SET_UID)
		out->uid = in->uid;
	if (what & CAT_SET_GID)
		out->gid = in->gid;
	if (what & CAT_SET_ATIME)
		out->atime_ns = in->atime_ns;
	if (what & CAT_SET_MTIME)
		out->mtime_ns = in->mtime_ns;
	out->ctime_ns = (what & CAT_SET_CTIME) ? in->ctime_ns : cat_now_ns();
	rc = cat_bind(cat, S_INODE_SETATTR, A_INT(ino), A_INT(out->mode), A_INT(out->uid),
		      A_INT(out->gid), A_INT(out->atime_ns), A_INT(out->mtime_ns),
		      A_INT(out->ctime_ns));
	if (rc == 0)
		rc = cat_run(cat, S_INODE_SETATTR);
	return rc;
}

int cat_setattr(struct cat *cat, uint64_t ino, unsigned what, const struct cat_inode *in,
		struct cat_inode *out)
{
	if (cat->shared) return catsh_setattr(cat, ino, what, in, out);
	struct cat_inode scratch;
	if (out == NULL)
		out = &scratch;
	cat_lock(cat);
	bool deferred;
	int rc = cat_change_begin(cat, ino, &deferred);
	if (rc == 0)
		rc = cat_setattr_txn(cat, ino, what, in, out);
	rc = cat_change_end(cat, deferred, rc, false);
	cat_unlock(cat);
	return rc;
}

int cat_readlink(struct cat *cat, uint64_t ino, char *buf, size_t size)
{
	if (cat->shared) return catsh_readlink(cat, ino, buf, size);
	if (size == 0)
		return -EINVAL;
	cat_lock(cat);
	int rc = cat_bind(cat, S_INODE_TARGET, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, S_INODE_TARGET);
	if (rc == 1) {
		const char *target = (const char *)sqlite3_column_text(cat->stmt[S_INODE_TARGET], 1);
		if (!S_ISLNK(cat_col_int(cat, S_INODE_TARGET, 0)) || target == NULL) {
			rc = -EINVAL;
		} else {
			size_t len = strnlen(target, size - 1);
			memcpy(buf, target, len);
			buf[len] = 0;
			rc = 0;
		}
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, S_INODE_TARGET);
	cat_unlock(cat);
	return rc;
}

/* One batch of readdir entries, copied out so the callback runs unlocked. */
struct cat_readdir_ent {
	struct cat_inode attr;
	uint64_t next_cookie;
	char name[CAT_NAME_MAX + 1];
};

/* Copies the entries after cookie, at most max (max > 2). check: verify dir
 * first (always done when "." and ".." are wanted). A removed directory lists
 * "." and ".." only, its ".." being itself. */
static int cat_readdir_fill(struct cat *cat, uint64_t dir, uint64_t cookie, bool check,
			    struct cat_readdir_ent *ents, int max)
{
	struct cat_inode self = { 0 };
	uint64_t up = dir;
	int n = 0;
	int rc = 0;
	assert(max > 2);
	if (check || cookie < 2) {
		rc = cat_inode_get(cat, dir, &self);
		if (rc == 0 && !cat_is_dir(&self))
			rc = -ENOTDIR;
	}
	if (rc == 0 && cookie == 0) {
		ents[n].attr = self;
		strcpy(ents[n].name, ".");
		ents[n++].next_cookie = 1;
	}
	if (rc == 0 && cookie < 2) {
		rc = self.nlink > 0 ? cat_parent_of(cat, dir, &up) : 0;
		if (rc == 0)
			rc = cat_inode_get(cat, up, &ents[n].attr);
		if (rc == 0) {
			strcpy(ents[n].name, "..");
			ents[n++].next_cookie = 2;
		}
	}
	if (rc == 0)
		rc = cat_bind(cat, S_READDIR, A_INT(dir), A_INT(cookie >= 2 ? cookie - 2 : 0),
			      A_INT(max - n));
	while (rc == 0 && n < max && (rc = cat_next(cat, S_READDIR)) == 1) {
		sqlite3_stmt *st = cat->stmt[S_READDIR];
		const char *name = (const char *)sqlite3_column_text(st, 1);
		int len = sqlite3_column_bytes(st, 1);
		if (name == NULL || len > CAT_NAME_MAX) {
			log_error("catalog %s: corrupt: a bad name in directory %" PRIu64,
				  cat->path, dir);
			rc = -EIO;
			break;
		}
		ents[n].next_cookie = (uint64_t)sqlite3_column_int64(st, 0) + 2;
		memcpy(ents[n].name, name, (size_t)len + 1);
		cat_col_inode(cat, S_READDIR, 2, &ents[n].attr);
		n++;
		rc = 0;
	}
	cat_reset(cat, S_READDIR);
	return rc < 0 ? rc : n;
}

int cat_readdir(struct cat *cat, uint64_t dir, uint64_t cookie, cat_dirent_fn fn, void *arg)
{
	if (cat->shared) return catsh_readdir(cat, dir, cookie, fn, arg);
	struct cat_readdir_ent ents[CAT_READDIR_BATCH];
	bool first = true;
	for (;;) {
		cat_lock(cat);
		int n = cat_readdir_fill(cat, dir, cookie, first, ents, CAT_READDIR_BATCH);
		cat_unlock(cat);
		if (n < 0)
			return n;
		first = false;
		for (int i = 0; i < n; i++) {
			if (fn(arg, ents[i].name, &ents[i].attr, ents[i].next_cookie) != 0)
				return 0;
			cookie = ents[i].next_cookie;
		}
		if (n < CAT_READDIR_BATCH)
			return 0;
	}
}

int cat_inode_release(struct cat *cat, uint64_t ino)
{
	if (cat->shared) return catsh_inode_release(cat, ino);
	struct cat_inode inode;
	bool deleted = false;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_inode_get(cat, ino, &inode);
	if (rc == 0 && inode.nlink == 0) {
		assert(ino != CAT_ROOT_INO);
		static const enum cat_sid drop[] = { R_X_FROM_DROP, S_X_TRUNC_DELETE,
						     R_P_FROM_DROP, S_P_TRUNC_DELETE };
		for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]) && rc == 0; i++) {
			rc = cat_bind(cat, drop[i], A_INT(ino), A_INT(0));
			if (rc == 0)
				rc = cat_run(cat, drop[i]);
		}
		if (rc == 0)
			rc = cat_bind(cat, S_INODE_DELETE, A_INT(ino));
		if (rc == 0)
			rc = cat_run(cat, S_INODE_DELETE);
		deleted = rc == 0;
	}
	rc = deleted ? cat_end_sweep(cat, rc) : cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* Writes inos[0..n) as a JSON array (json_each binds a list to one
 * statement: no temporary table, one statement per step for the batch). */
static char *cat_ids_json(const uint64_t *inos, size_t n)
{
	size_t cap = 2 + n * 21, used = 0;
	char *json = malloc(cap);
	if (json == NULL)
		return NULL;
	json[used++] = '[';
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(json + used, cap - used, "%s%" PRIu64, i ? "," : "", inos[i]);
	json[used++] = ']';
	json[used] = '\0';
	return json;
}

/* One batch: the steps, each bound to the same list, in one transaction
 * that ends with a sweep (catalog invariant 1: counts and extent rows move
 * together; objects go only after the commit that dropped their last count). */
static int cat_release_batch(struct cat *cat, const enum cat_sid *steps, size_t nsteps,
			     const uint64_t *inos, size_t n)
{
	char *json = cat_ids_json(inos, n);
	if (json == NULL)
		return -ENOMEM;
	cat_lock(cat);
	int rc = cat_begin(cat);
	for (size_t i = 0; i < nsteps && rc == 0; i++) {
		rc = cat_bind(cat, steps[i], A_TEXT(json));
		if (rc == 0)
			rc = cat_run(cat, steps[i]);
	}
	rc = cat_end_sweep(cat, rc);
	cat_unlock(cat);
	free(json);
	return rc;
}

/* Runs the steps over inos in batches of CAT_RELEASE_BATCH, the lock
 * released between them so that FUSE requests are not held up for long. */
static int cat_release_batches(struct cat *cat, const enum cat_sid *steps, size_t nsteps,
			       const uint64_t *inos, size_t n)
{
	int rc = 0;
	for (size_t at = 0; at < n && rc == 0; at += CAT_RELEASE_BATCH) {
		size_t k = n - at < CAT_RELEASE_BATCH ? n - at : CAT_RELEASE_BATCH;
		rc = cat_release_batch(cat, steps, nsteps, inos + at, k);
		sched_yield(); /* let a waiting request take the lock before the next batch */
	}
	return rc;
}

int cat_inodes_release(struct cat *cat, const uint64_t *inos, size_t n)
{
	if (cat->shared) return catsh_inodes_release(cat, inos, n);
	/* the inode rows last: every step selects by nlink = 0 on them */
	static const enum cat_sid steps[] = { R_X_RELEASED_DROP, S_REL_X_DELETE, R_P_RELEASED_DROP,
					      S_REL_P_DELETE, S_REL_INODES_DELETE };
	return cat_release_batches(cat, steps, sizeof(steps) / sizeof(steps[0]), inos, n);
}

int cat_inodes_drop_data(struct cat *cat, const uint64_t *inos, size_t n)
{
	if (cat->shared) return catsh_inodes_drop_data(cat, inos, n);
	static const enum cat_sid steps[] = { R_X_RELEASED_DROP, S_REL_X_DELETE, S_REL_SETSIZE };
	return cat_release_batches(cat, steps, sizeof(steps) / sizeof(steps[0]), inos, n);
}

/* ---- file contents ---- */

/* A regular file: -ENOENT, -EISDIR, or -EINVAL for other types. */
static int cat_file_get(struct cat *cat, uint64_t ino, struct cat_inode *out)
{
	int rc = cat_inode_get(cat, ino, out);
	if (rc == 0 && cat_is_dir(out))
		rc = -EISDIR;
	if (rc == 0 && !S_ISREG(out->mode))
		rc = -EINVAL;
	return rc;
}

static int cat_list(struct cat *cat, enum cat_sid id, uint64_t ino, uint64_t off,
		    struct cat_extent *out, int max)
{
	if (max < 0 || off > INT64_MAX)
		return -EINVAL;
	if (max == 0)
		return 0;
	cat_lock(cat);
	int n = 0;
	int rc = cat_bind(cat, id, A_INT(ino), A_INT(off), A_INT((int64_t)max + 1));
	while (rc == 0 && n < max && (rc = cat_next(cat, id)) == 1) {
		struct cat_extent *e = &out[n];
		e->off = (uint64_t)cat_col_int(cat, id, 0);
		e->len = (uint64_t)cat_col_int(cat, id, 1);
		e->chunk_off = (uint64_t)cat_col_int(cat, id, 2);
		e->chunk_len = (uint64_t)cat_col_int(cat, id, 3);
		rc = cat_col_hash(cat, id, 4, e->hash);
		if (rc == 0 && sqlite3_column_type(cat->stmt[id], 3) == SQLITE_NULL) {
			char hex[2 * CAT_HASH_LEN + 1];
			cat_hex(e->hash, hex);
			log_error("catalog %s: corrupt: inode %" PRIu64 " offset %" PRIu64
				  " names chunk %s, which has no row", cat->path, ino, e->off, hex);
			rc = -EIO;
		}
		if (rc == 0 && e->off + e->len > off)
			n++; /* else the extent before off ends at or before it */
	}
	cat_reset(cat, id);
	if (rc == 0 && n == 0) {
		struct cat_inode inode;
		rc = cat_inode_get(cat, ino, &inode);
	}
	cat_unlock(cat);
	return rc < 0 ? rc : n;
}

int cat_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out, int max)
{
	if (cat->shared) return catsh_extents(cat, ino, off, out, max);
	return cat_list(cat, S_X_LIST, ino, off, out, max);
}

int cat_pending_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out,
			int max)
{
	if (cat->shared) return catsh_pending_extents(cat, ino, off, out, max);
	return cat_list(cat, S_P_LIST, ino, off, out, max);
}

bool cat_extent_valid(const struct cat_extent *ext)
{
	return ext->len != 0 && ext->off <= INT64_MAX && ext->len <= INT64_MAX - ext->off &&
	       ext->chunk_len <= INT64_MAX && ext->chunk_off <= ext->chunk_len &&
	       ext->len <= ext->chunk_len - ext->chunk_off;
}

int cat_pending_insert_txn(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
			   bool *must_store)
{
	/* The last extent starting before ours ends must end before ours starts;
	 * by invariant 3 every earlier one then does too. */
	int rc = cat_bind(cat, S_P_BEFORE, A_INT(ino), A_INT(ext->off + ext->len));
	if (rc == 0)
		rc = cat_next(cat, S_P_BEFORE);
	if (rc == 1) {
		uint64_t prev_off = (uint64_t)cat_col_int(cat, S_P_BEFORE, 0);
		uint64_t prev_len = (uint64_t)cat_col_int(cat, S_P_BEFORE, 1);
		rc = 0;
		if (prev_off + prev_len > ext->off) {
			log_warn("catalog %s: inode %" PRIu64 ": pending extent [%" PRIu64 ", +%" PRIu64
				 ") overlaps [%" PRIu64 ", +%" PRIu64 ")", cat->path, ino, ext->off,
				 ext->len, prev_off, prev_len);
			rc = -EINVAL;
		}
	}
	cat_reset(cat, S_P_BEFORE);

	uint64_t plain_len = 0;
	if (rc == 0)
		rc = cat_refs_take_one_txn(cat, ext->hash, ext->chunk_len, &plain_len, must_store);
	if (rc == 0 && plain_len != ext->chunk_len) {
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(ext->hash, hex);
		log_error("catalog %s: inode %" PRIu64 ": chunk %s has plain length %" PRIu64
			  ", the extent says %" PRIu64, cat->path, ino, hex, plain_len,
			  ext->chunk_len);
		rc = -EINVAL;
	}

	if (rc == 0)
		rc = cat_bind(cat, S_P_INSERT, A_INT(ino), A_INT(ext->off), A_INT(ext->len),
			      A_HASH(ext->hash), A_INT(ext->chunk_off));
	if (rc == 0)
		rc = cat_run(cat, S_P_INSERT);
	return rc;
}

static int cat_pending_add_txn(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
			       bool *must_store)
{
	struct cat_inode inode;
	int rc = cat_file_get(cat, ino, &inode);
	return rc != 0 ? rc : cat_pending_insert_txn(cat, ino, ext, must_store);
}

int cat_pending_add(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
		    bool *must_store)
{
	if (cat->shared) return catsh_pending_add(cat, ino, ext, must_store);
	if (!cat_extent_valid(ext))
		return -EINVAL;
	bool store = false, deferred;
	cat_lock(cat);
	int rc = cat_change_begin(cat, ino, &deferred);
	if (rc == 0)
		rc = cat_pending_add_txn(cat, ino, ext, &store);
	rc = cat_change_end(cat, deferred, rc, false);
	if (rc == 0 && deferred && store) /* the row may be uncommitted: D7 */
		rc = cat_defer_intent(cat, ext->hash);
	cat_unlock(cat);
	if (rc == 0)
		*must_store = store;
	return rc;
}

int cat_chunk_stored(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], uint8_t codec,
		     uint64_t stored_len)
{
	if (stored_len > INT64_MAX)
		return -EINVAL;
	cat_lock(cat);
	/* joins a deferred transaction (D1 c), whose upload rows stay hidden (D6) */
	bool deferred = cat->deferred > 0 && cat_defer_begin(cat, 0) == 0;
	int rc = deferred ? 0 : cat_begin(cat);
	if (rc == 0)
		rc = cat_bind(cat, S_CHUNK_STORED, A_HASH(hash), A_INT(codec), A_INT(stored_len));
	if (rc == 0)
		rc = cat_run(cat, S_CHUNK_STORED);
	if (rc == 0 && cat_changes(cat) == 0) {
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(hash, hex);
		log_warn("catalog %s: chunk %s was stored but has no row (its references were"
			 " dropped first)", cat->path, hex);
		rc = -ENOENT;
	}
	if (rc == 0)
		rc = cat_up_chunk_stored_txn(cat, hash);
	rc = cat_change_end(cat, deferred, rc, false);
	cat_unlock(cat);
	return rc;
}

/* Runs the four statements that make one extent table equal to the other. */
static int cat_sync_extents(struct cat *cat, const enum cat_sid steps[4], uint64_t ino)
{
	int rc = 0;
	for (int i = 0; i < 4 && rc == 0; i++) {
		rc = cat_bind(cat, steps[i], A_INT(ino));
		if (rc == 0)
			rc = cat_run(cat, steps[i]);
	}
	return rc;
}

/* Cuts extents (or pending) of ino at size. */
static int cat_truncate_extents(struct cat *cat, bool pending, uint64_t ino, uint64_t size)
{
	static const enum cat_sid steps[2][3] = {
		{ R_X_FROM_DROP, S_X_TRUNC_DELETE, S_X_TRUNC_SHORTEN },
		{ R_P_FROM_DROP, S_P_TRUNC_DELETE, S_P_TRUNC_SHORTEN },
	};
	int rc = 0;
	/* at 0 nothing straddles the cut (offsets are >= 0): no shortening */
	int n = size > 0 ? 3 : 2;
	for (int i = 0; i < n && rc == 0; i++) {
		rc = cat_bind(cat, steps[pending][i], A_INT(ino), A_INT(size));
		if (rc == 0)
			rc = cat_run(cat, steps[pending][i]);
	}
	return rc;
}

/* Whether ino has a row in extents or pending; 1 yes, 0 no, or an error. */
/* cat_file_get's checks on ino, then *mark: whether a writer starting on
 * it must mark it being written (generation.h G7: in an OPEN generation and
 * not marked yet); returns whether it has extent rows (1 or 0), or a
 * negative errno. One statement. */
static int cat_writer_start_read(struct cat *cat, uint64_t ino, bool *mark)
{
	*mark = false;
	int rc = cat_bind(cat, S_WRITER_START, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, S_WRITER_START);
	if (rc == 1) {
		sqlite3_stmt *st = cat->stmt[S_WRITER_START];
		struct cat_inode in = { .mode = (uint32_t)sqlite3_column_int64(st, 0) };
		bool open = sqlite3_column_type(st, 2) != SQLITE_NULL &&
			    sqlite3_column_int64(st, 2) == GEN_OPEN;
		*mark = sqlite3_column_int64(st, 1) == 0 && open;
		rc = cat_is_dir(&in) ? -EISDIR : !S_ISREG(in.mode) ? -EINVAL
			: sqlite3_column_int64(st, 3) != 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, S_WRITER_START);
	return rc;
}

/* generation.h G7: ino's being-written mark in *writing, and whether it is
 * in an OPEN generation in *open; -ENOENT when it has no row. The one
 * reader of S_WRITING_GET. */
static int cat_writing_get(struct cat *cat, uint64_t ino, int64_t *writing, bool *open)
{
	int rc = cat_bind(cat, S_WRITING_GET, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, S_WRITING_GET);
	if (rc == 1) {
		sqlite3_stmt *st = cat->stmt[S_WRITING_GET];
		*writing = sqlite3_column_int64(st, 0);
		*open = sqlite3_column_type(st, 1) != SQLITE_NULL &&
			sqlite3_column_int64(st, 1) == GEN_OPEN;
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, S_WRITING_GET);
	return rc;
}

/* generation.h G7: *mark is whether a writer starting on ino must mark it
 * being written (it is in an OPEN generation and not marked yet). */
static int cat_writing_unmarked(struct cat *cat, uint64_t ino, bool *mark)
{
	int64_t writing = 0;
	bool open = false;
	int rc = cat_writing_get(cat, ino, &writing, &open);
	*mark = rc == 0 && writing == 0 && open;
	return rc;
}

int cat_pending_from_committed(struct cat *cat, uint64_t ino)
{
	bool rows;
	return cat_pending_start(cat, ino, &rows);
}

int cat_pending_start(struct cat *cat, uint64_t ino, bool *rows)
{
	*rows = true; /* unless known to be none */
	if (cat->shared) return catsh_pending_from_committed(cat, ino);
	static const enum cat_sid steps[4] = { R_P_NOT_X_DROP, S_TO_P_DELETE, R_X_NOT_P_TAKE,
					       S_TO_P_INSERT };
	struct cat_inode inode;
	bool deferred, mark = false;
	cat_lock(cat);
	/* A file without extent rows (a new one: every small file of a save)
	 * has pending equal to extents already: no change but the mark. */
	int any = cat_writer_start_read(cat, ino, &mark);
	*rows = any != 0;
	if (any < 0 || (any == 0 && !mark)) {
		cat_unlock(cat);
		return any;
	}
	int rc = cat_change_begin(cat, ino, &deferred);
	if (rc == 0)
		rc = cat_file_get(cat, ino, &inode);
	if (rc == 0 && any)
		rc = cat_sync_extents(cat, steps, ino);
	/* G7: in the same transaction as the writer's start, before any of its
	 * rows: a catalog that shows one of them shows the mark */
	if (rc == 0 && mark)
		rc = cat_bind(cat, S_WRITING_SET, A_INT(ino));
	if (rc == 0 && mark)
		rc = cat_run(cat, S_WRITING_SET);
	rc = cat_change_end(cat, deferred, rc, any);
	cat_unlock(cat);
	return rc;
}

/* Cuts ino's pending rows at size; unmark: clears its being-written mark
 * (generation.h G7) in the same change, with no read of it first (the clear
 * is conditional: writing = 1). */
static int cat_pending_cut(struct cat *cat, uint64_t ino, uint64_t size, bool unmark)
{
	struct cat_inode inode;
	if (size > INT64_MAX)
		return -EINVAL;
	bool deferred;
	cat_lock(cat);
	int rc = cat_change_begin(cat, ino, &deferred);
	if (rc == 0)
		rc = cat_file_get(cat, ino, &inode);
	if (rc == 0)
		rc = cat_truncate_extents(cat, true, ino, size);
	if (rc == 0 && unmark)
		rc = cat_bind(cat, S_WRITING_CLEAR, A_INT(ino));
	if (rc == 0 && unmark)
		rc = cat_run(cat, S_WRITING_CLEAR);
	rc = cat_change_end(cat, deferred, rc, true);
	cat_unlock(cat);
	return rc;
}

int cat_file_unmark(struct cat *cat, uint64_t ino)
{
	if (cat->shared)
		return 0; /* the shared engine keeps its writers in ns_writing */
	bool deferred, open;
	int64_t writing = 0;
	cat_lock(cat);
	int rc = cat_writing_get(cat, ino, &writing, &open);
	if (rc == -ENOENT) /* gone (released, unlinked): nothing to clear */
		rc = 0;
	if (rc == 0 && writing == 1) {
		rc = cat_change_begin(cat, ino, &deferred);
		if (rc == 0)
			rc = cat_bind(cat, S_WRITING_CLEAR, A_INT(ino));
		if (rc == 0)
			rc = cat_run(cat, S_WRITING_CLEAR);
		rc = cat_change_end(cat, deferred, rc, false);
	}
	cat_unlock(cat);
	return rc;
}

int cat_pending_drop(struct cat *cat, uint64_t ino)
{
	if (cat->shared) return catsh_pending_drop(cat, ino);
	return cat_pending_cut(cat, ino, 0, false);
}

int cat_pending_drop_unmark(struct cat *cat, uint64_t ino)
{
	if (cat->shared) return catsh_pending_drop(cat, ino); /* no mark: cat_file_unmark */
	return cat_pending_cut(cat, ino, 0, true); /* one change for both (issue 20 part 3) */
}

int cat_pending_truncate(struct cat *cat, uint64_t ino, uint64_t new_size)
{
	if (cat->shared) return catsh_pending_cut(cat, ino, new_size);
	return cat_pending_cut(cat, ino, new_size, false);
}

static int cat_file_commit_txn(struct cat *cat, uint64_t ino, uint64_t size, int64_t mtime_ns)
{
	static const enum cat_sid steps[4] = { R_X_NOT_P_DROP, S_TO_X_DELETE, R_P_NOT_X_TAKE,
					       S_TO_X_INSERT };
	struct cat_inode inode;
	int rc = cat_file_get(cat, ino, &inode);

	/* Invariant 2: every chunk the commit will name must be stored. */
	if (rc == 0)
		rc = cat_bind(cat, S_P_UNSTORED, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, S_P_UNSTORED);
	if (rc == 1) {
		uint8_t hash[CAT_HASH_LEN];
		char hex[2 * CAT_HASH_LEN + 1];
		uint64_t off = (uint64_t)cat_col_int(cat, S_P_UNSTORED, 0);
		rc = cat_col_hash(cat, S_P_UNSTORED, 1, hash);
		if (rc == 0) {
			cat_hex(hash, hex);
			log_error("catalog %s: cannot commit inode %" PRIu64 ": chunk %s at offset %"
				  PRIu64 " is not stored", cat->path, ino, hex, off);
			rc = -EIO;
		}
	}
	cat_reset(cat, S_P_UNSTORED);

	/* Extents past the size would come back as data if the file grew. */
	if (rc == 0)
		rc = cat_bind(cat, S_P_LAST, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, S_P_LAST);
	if (rc == 1) {
		uint64_t end = (uint64_t)cat_col_int(cat, S_P_LAST, 0);
		rc = 0;
		if (end > size) {
			log_error("catalog %s: cannot commit inode %" PRIu64 " at size %" PRIu64
				  ": its pending extents reach %" PRIu64, cat->path, ino, size, end);
			rc = -EINVAL;
		}
	}
	cat_reset(cat, S_P_LAST);

	if (rc == 0)
		rc = cat_sync_extents(cat, steps, ino);
	if (rc == 0)
		rc = cat_bind(cat, S_INODE_SETSIZE, A_INT(ino), A_INT(size), A_INT(mtime_ns),
			      A_INT(cat_now_ns()));
	if (rc == 0)
		rc = cat_run(cat, S_INODE_SETSIZE);
	return rc;
}

int cat_file_commit(struct cat *cat, uint64_t ino, uint64_t size, int64_t mtime_ns, bool durable)
{
	if (cat->shared) return catsh_file_commit(cat, ino, size, mtime_ns, durable);
	if (size > INT64_MAX)
		return -EINVAL;
	cat_lock(cat);
	bool deferred = false;
	/* durable: cat_begin commits the deferred transaction first (D2) */
	int rc = durable ? cat_begin(cat) : cat_change_begin(cat, ino, &deferred);
	if (rc == 0)
		rc = cat_file_commit_txn(cat, ino, size, mtime_ns);
	if (durable) {
		rc = cat_end(cat, rc);
		if (rc == 0) /* invariant 10: made durable, not a pragma's promise */
			rc = cat_wal_sync(cat);
		if (rc == 0)
			cat_sweep(cat);
	} else {
		/* invariant 13: may name objects not yet durable; counted before
		 * the sweep cat_change_end may run */
		if (rc == 0)
			cat->objects_seq++;
		rc = cat_change_end(cat, deferred, rc, true);
	}
	cat_unlock(cat);
	return rc;
}

int cat_file_truncate(struct cat *cat, uint64_t ino, uint64_t new_size)
{
	if (cat->shared) return catsh_file_truncate(cat, ino, new_size);
	struct cat_inode inode;
	if (new_size > INT64_MAX)
		return -EINVAL;
	cat_lock(cat);
	int64_t now = cat_now_ns();
	bool deferred;
	int rc = cat_change_begin(cat, ino, &deferred);
	if (rc == 0)
		rc = cat_file_get(cat, ino, &inode);
	if (rc == 0 && new_size < inode.size)
		rc = cat_truncate_extents(cat, false, ino, new_size);
	if (rc == 0)
		rc = cat_bind(cat, S_INODE_SETSIZE, A_INT(ino), A_INT(new_size), A_INT(now),
			      A_INT(now));
	if (rc == 0)
		rc = cat_run(cat, S_INODE_SETSIZE);
	/* G7: an O_TRUNC open (or ftruncate) in an OPEN generation is writing,
	 * in the same transaction as the cut; the release clears it (a
	 * truncate(2) by path has none: its mark stays to the next open) */
	bool mark = false;
	if (rc == 0)
		rc = cat_writing_unmarked(cat, ino, &mark);
	if (rc == 0 && mark)
		rc = cat_bind(cat, S_WRITING_SET, A_INT(ino));
	if (rc == 0 && mark)
		rc = cat_run(cat, S_WRITING_SET);
	rc = cat_change_end(cat, deferred, rc, true);
	cat_unlock(cat);
	return rc;
}

/* ---- accounting and checks ---- */

int cat_stats_chunks(struct cat *cat, struct cat_stats *out)
{
	int rc = cat_next(cat, S_STATS_CHUNKS);
	if (rc == 1) {
		out->chunks = (uint64_t)cat_col_int(cat, S_STATS_CHUNKS, 0);
		out->chunk_plain_bytes = (uint64_t)cat_col_int(cat, S_STATS_CHUNKS, 1);
		out->chunk_stored_bytes = (uint64_t)cat_col_int(cat, S_STATS_CHUNKS, 2);
		rc = 0;
	}
	cat_reset(cat, S_STATS_CHUNKS);
	return rc;
}

int cat_stats(struct cat *cat, struct cat_stats *out)
{
	if (cat->shared) return catsh_stats(cat, out);
	memset(out, 0, sizeof(*out));
	cat_lock(cat);
	int rc = cat_begin_read(cat);
	if (rc == 0 && (rc = cat_next(cat, S_STATS_INODES)) == 1) {
		out->inodes = (uint64_t)cat_col_int(cat, S_STATS_INODES, 0);
		out->files = (uint64_t)cat_col_int(cat, S_STATS_INODES, 1);
		out->logical_bytes = (uint64_t)cat_col_int(cat, S_STATS_INODES, 2);
		rc = 0;
	}
	cat_reset(cat, S_STATS_INODES);
	if (rc == 0)
		rc = cat_stats_chunks(cat, out);
	if (rc == 0 && (rc = cat_next(cat, S_STATS_EXTENTS)) == 1) {
		out->referenced_bytes = (uint64_t)cat_col_int(cat, S_STATS_EXTENTS, 0);
		rc = 0;
	}
	cat_reset(cat, S_STATS_EXTENTS);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

struct cat_chunk_row {
	uint8_t hash[CAT_HASH_LEN];
	uint64_t plain_len, refcount;
	int64_t stored_len;
	uint8_t codec;
};

int cat_chunks(struct cat *cat, cat_chunk_fn fn, void *arg)
{
	struct cat_chunk_row rows[CAT_CHUNKS_BATCH];
	uint8_t after[CAT_HASH_LEN] = { 0 };
	int after_len = 0;
	int n;
	do {
		n = 0;
		cat_lock(cat);
		int rc = cat_bind(cat, S_CHUNK_LIST, A_BLOB(after, after_len),
				  A_INT(CAT_CHUNKS_BATCH));
		while (rc == 0 && (rc = cat_next(cat, S_CHUNK_LIST)) == 1) {
			struct cat_chunk_row *r = &rows[n++];
			sqlite3_stmt *st = cat->stmt[S_CHUNK_LIST];
			rc = cat_col_hash(cat, S_CHUNK_LIST, 0, r->hash);
			r->plain_len = (uint64_t)sqlite3_column_int64(st, 1);
			r->codec = (uint8_t)sqlite3_column_int64(st, 2);
			r->stored_len = sqlite3_column_type(st, 3) == SQLITE_NULL
						? -1 : sqlite3_column_int64(st, 3);
			r->refcount = (uint64_t)sqlite3_column_int64(st, 4);
		}
		cat_reset(cat, S_CHUNK_LIST);
		cat_unlock(cat);
		if (rc != 0)
			return rc;
		for (int i = 0; i < n; i++) {
			int frc = fn(arg, rows[i].hash, rows[i].plain_len, rows[i].codec,
				     rows[i].stored_len, rows[i].refcount);
			if (frc != 0)
				return frc;
		}
		if (n > 0) {
			memcpy(after, rows[n - 1].hash, CAT_HASH_LEN);
			after_len = CAT_HASH_LEN;
		}
	} while (n == CAT_CHUNKS_BATCH);
	return 0;
}

/* Runs one check query; report logs a row and counts it as a violation. */
static int cat_check_rows(struct cat *cat, enum cat_sid id, int *violations,
			  void (*report)(struct cat *cat, sqlite3_stmt *st, int *violations))
{
	int rc;
	while ((rc = cat_next(cat, id)) == 1)
		report(cat, cat->stmt[id], violations);
	cat_reset(cat, id);
	return rc;
}

static void cat_col_hex(sqlite3_stmt *st, int col, char out[2 * CAT_HASH_LEN + 1])
{
	if (sqlite3_column_bytes(st, col) == CAT_HASH_LEN)
		cat_hex(sqlite3_column_blob(st, col), out);
	else
		snprintf(out, 2 * CAT_HASH_LEN + 1, "(a %d-byte hash)", sqlite3_column_bytes(st, col));
}

static void cat_report_refcount(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	char hex[2 * CAT_HASH_LEN + 1];
	cat_col_hex(st, 0, hex);
	log_error("catalog %s: check: chunk %s has refcount %lld but %lld references", cat->path,
		  hex, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
	(*violations)++;
}

static void cat_report_dangling(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	char hex[2 * CAT_HASH_LEN + 1];
	cat_col_hex(st, 3, hex);
	log_error("catalog %s: check: %s of inode %lld at offset %lld name chunk %s, which has"
		  " no row", cat->path, sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
		  sqlite3_column_int64(st, 2), hex);
	(*violations)++;
}

static void cat_report_unstored(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	char hex[2 * CAT_HASH_LEN + 1];
	cat_col_hex(st, 2, hex);
	log_error("catalog %s: check: committed extent of inode %lld at offset %lld names chunk"
		  " %s, which is not stored", cat->path, sqlite3_column_int64(st, 0),
		  sqlite3_column_int64(st, 1), hex);
	(*violations)++;
}

static void cat_report_overlap(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	log_error("catalog %s: check: %s of inode %lld: the extent at %lld starts before the"
		  " previous one ends (%lld)", cat->path, sqlite3_column_text(st, 0),
		  sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
		  sqlite3_column_int64(st, 3));
	(*violations)++;
}

static void cat_report_bad_extent(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	log_error("catalog %s: check: %s of inode %lld: extent at %lld of %lld bytes from chunk"
		  " offset %lld does not fit its chunk of %lld bytes", cat->path,
		  sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
		  sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
		  sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5));
	(*violations)++;
}

static void cat_report_extent_owner(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	log_error("catalog %s: check: %s belong to inode %lld, which is missing or not a regular"
		  " file", cat->path, sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1));
	(*violations)++;
}

static void cat_report_dirent(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	log_error("catalog %s: check: entry %lld/\"%s\" → inode %lld:%s%s", cat->path,
		  sqlite3_column_int64(st, 0), sqlite3_column_text(st, 1),
		  sqlite3_column_int64(st, 2),
		  sqlite3_column_int(st, 3) ? " the inode is missing" : "",
		  sqlite3_column_int(st, 4) ? " the parent is not a live directory" : "");
	(*violations)++;
}

static void cat_report_nlink(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	int64_t ino = sqlite3_column_int64(st, 0);
	uint32_t mode = (uint32_t)sqlite3_column_int64(st, 1);
	int64_t nlink = sqlite3_column_int64(st, 2);
	int64_t links = sqlite3_column_int64(st, 3);
	int64_t subdirs = sqlite3_column_int64(st, 4);
	int64_t want = links;
	if (S_ISDIR(mode)) {
		bool live = links == 1 || ino == CAT_ROOT_INO;
		want = live ? 2 + subdirs : 0;
		if (links > (ino == CAT_ROOT_INO ? 0 : 1)) {
			log_error("catalog %s: check: directory %lld has %lld entries", cat->path,
				  (long long)ino, (long long)links);
			(*violations)++;
		}
	}
	if (ino == CAT_ROOT_INO && !S_ISDIR(mode)) {
		log_error("catalog %s: check: the root inode is not a directory", cat->path);
		(*violations)++;
	}
	if (nlink != want) {
		log_error("catalog %s: check: inode %lld has nlink %lld, expected %lld (%lld"
			  " entries, %lld subdirectories)", cat->path, (long long)ino,
			  (long long)nlink, (long long)want, (long long)links, (long long)subdirs);
		(*violations)++;
	}
}

static void cat_report_pack_live(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	char hex[2 * CAT_HASH_LEN + 1];
	cat_col_hex(st, 0, hex);
	log_error("catalog %s: check: pack %s (state %lld) counts %lld live members of %lld bytes"
		  " but %lld chunk rows of %lld bytes name it (catalog_pack.h K1)", cat->path, hex,
		  sqlite3_column_int64(st, 5), sqlite3_column_int64(st, 1),
		  sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 2),
		  sqlite3_column_int64(st, 4));
	(*violations)++;
}

static void cat_report_pack_named(struct cat *cat, sqlite3_stmt *st, int *violations)
{
	char hex[2 * CAT_HASH_LEN + 1], pack[2 * CAT_HASH_LEN + 1];
	cat_col_hex(st, 0, hex);
	cat_col_hex(st, 1, pack);
	log_error("catalog %s: check: chunk %s names pack %s, which has no row, or its place in"
		  " it is not recorded (catalog_pack.h K2)", cat->path, hex, pack);
	(*violations)++;
}

/* The checks of cat_check; node: it checks only [node] state (chunk rows
 * and pending extents), so it applies beside a shared namespace too. */
static const struct {
	enum cat_sid id;
	void (*report)(struct cat *, sqlite3_stmt *, int *);
	bool node;
} cat_checks[] = {
	{ R_CHECK, cat_report_refcount, true },
	{ S_CHECK_DANGLING, cat_report_dangling, true },
	{ S_CHECK_UNSTORED, cat_report_unstored, true },
	{ S_CHECK_OVERLAP, cat_report_overlap, true },
	{ S_CHECK_BAD_EXTENT, cat_report_bad_extent, true },
	{ S_CHECK_EXTENT_OWNER, cat_report_extent_owner, false },
	{ S_CHECK_DIRENT, cat_report_dirent, false },
	{ S_CHECK_NLINK, cat_report_nlink, false },
	{ P_CHECK_LIVE, cat_report_pack_live, true },
	{ P_CHECK_NAMED, cat_report_pack_named, true },
};

/* SQLite's integrity_check, then the checks (only the node ones with
 * node_only), counting violations. */
static int cat_check_run(struct cat *cat, bool node_only, int *violations)
{
	struct cat_inode root;
	if (cat_integrity(cat, true) != 0)
		(*violations)++;
	cat_lock(cat);
	int rc = cat_begin_read(cat);
	if (rc == 0 && !node_only) {
		rc = cat_inode_get(cat, CAT_ROOT_INO, &root);
		if (rc == -ENOENT) {
			log_error("catalog %s: check: the root inode is missing", cat->path);
			(*violations)++;
			rc = 0;
		}
	}
	for (size_t i = 0; i < sizeof(cat_checks) / sizeof(cat_checks[0]) && rc == 0; i++)
		if (cat_checks[i].node || !node_only)
			rc = cat_check_rows(cat, cat_checks[i].id, violations, cat_checks[i].report);
	if (rc == 0 && !node_only)
		rc = cat_gen_check_txn(cat, violations);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_check_node(struct cat *cat, int *violations)
{
	return cat_check_run(cat, true, violations);
}

int cat_check(struct cat *cat)
{
	if (cat->shared) return catsh_check(cat);
	int violations = 0;
	int rc = cat_check_run(cat, false, &violations);
	if (rc == 0 && violations > 0) {
		log_error("catalog %s: check found %d violations", cat->path, violations);
		rc = -EUCLEAN;
	}
	return rc;
}

/* claim.h invariant 8: the meta row 'claimed' says this catalog held
 * BACKING's claim at least once (so it has written BACKING, and knows it
 * only as of its last claim). */
int cat_claimed(struct cat *cat, bool *out)
{
	int64_t n = 0;
	cat_lock(cat);
	int rc = cat_query_int(cat, "whether the catalog held a claim",
			       "SELECT COUNT(*) FROM meta WHERE key = 'claimed'", &n);
	cat_unlock(cat);
	*out = n > 0;
	return rc;
}

int cat_claimed_set(struct cat *cat)
{
	cat_lock(cat);
	cat_defer_flush(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_exec(cat, "record the claim",
			      "INSERT OR IGNORE INTO meta(key, value) VALUES('claimed', 1)");
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* claim.h invariant 12: the meta rows 'claim_take' (the last take made)
 * and 'claim_take_next' (a take begun), each "N INSTANCE". key's row into
 * *take, inst (33 bytes); absent: 0, "". */
static int cat_claim_take_get(struct cat *cat, const char *key, uint64_t *take, char *inst)
{
	sqlite3_stmt *st = NULL;
	*take = 0;
	inst[0] = '\0';
	int src = sqlite3_prepare_v2(cat->db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL);
	if (src == SQLITE_OK)
		src = sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (src == SQLITE_OK && (src = sqlite3_step(st)) == SQLITE_ROW) {
		const char *v = (const char *)sqlite3_column_text(st, 0);
		unsigned long long n = 0;
		char id[CLAIM_ID_LEN + 2] = "";
		int got = v ? sscanf(v, "%llu %33s", &n, id) : 0;
		size_t len = strlen(id);
		if (got != 2 || len != CLAIM_ID_LEN || strspn(id, "0123456789abcdef") != len) {
			log_error("catalog %s: meta %s is not \"N INSTANCE\": %s", cat->path, key,
				  v ? v : "(null)");
			sqlite3_finalize(st);
			return -EINVAL;
		}
		*take = n;
		memcpy(inst, id, len + 1);
		src = SQLITE_OK;
	} else if (src == SQLITE_DONE) {
		src = SQLITE_OK;
	}
	if (src != SQLITE_OK)
		log_error("catalog %s: cannot read meta %s: %s", cat->path, key, sqlite3_errmsg(cat->db));
	sqlite3_finalize(st);
	return src == SQLITE_OK ? 0 : -EIO;
}

/* claim.h invariant 12's ledger note: a take begun, then made, in the meta
 * table, each in its own transaction (begun before the create, made after).
 * The begun one is synced before it returns (claim.h 14): one fdatasync per
 * take; the made one need not be (the begun one names the instance). */
static int cat_claim_note(void *arg, bool done, uint64_t take, const char *instance)
{
	struct cat *cat = arg;
	char sql[160];
	if (strlen(instance) != CLAIM_ID_LEN || strspn(instance, "0123456789abcdef") != CLAIM_ID_LEN)
		return -EINVAL;
	snprintf(sql, sizeof(sql), "INSERT OR REPLACE INTO meta(key, value) VALUES('%s', '%" PRIu64
		 " %s')", done ? "claim_take" : "claim_take_next", take, instance);
	cat_lock(cat);
	cat_defer_flush(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_exec(cat, done ? "record a take of the claim" : "record a take begun", sql);
	rc = cat_end(cat, rc);
	if (rc == 0 && !done)
		rc = cat_wal_sync(cat); /* claim.h 14: a power loss keeps the begun take */
	cat_unlock(cat);
	return rc;
}

int cat_claim_ledger(struct cat *cat, struct claim_ledger *out)
{
	memset(out, 0, sizeof(*out));
	if (cat->shared)
		return 0; /* a shared claim is not taken by turns (claim.h 7) */
	uint64_t next_take = 0;
	cat_lock(cat);
	int rc = cat_claim_take_get(cat, "claim_take", &out->take, out->last);
	if (rc == 0)
		rc = cat_claim_take_get(cat, "claim_take_next", &next_take, out->next);
	cat_unlock(cat);
	out->known = out->last[0] || out->next[0];
	if (next_take > out->take) /* a take begun, maybe made: the next one counts on */
		out->take = next_take;
	out->note = cat_claim_note;
	out->arg = cat;
	return rc;
}

/* Invariant 8: the mark and the removal in one hold of the lock. The row's
 * U_SET_CACHED is the same in both engines (an eviction is this node's own). */
int cat_chunk_evict(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], cat_reclaim_fn remove,
		    void *arg)
{
	if (cat->shared) {
		bool evicted = false;
		int why = 0;
		int rc = catsh_chunks_evict(cat, (const uint8_t(*)[CAT_HASH_LEN])hash, 1, remove, arg,
					    &evicted, &why);
		return rc ? rc : why;
	}
	cat_lock(cat);
	int rc = cat_chunk_evict_locked(cat, hash, remove, arg);
	cat_unlock(cat);
	return rc;
}

int cat_chunk_evict_locked(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			   cat_reclaim_fn remove, void *arg)
{
	/* invariant 12: the uploaded mark this eviction relies on is durable */
	int rc = cat->uploaded_unsynced ? cat_wal_sync(cat) : 0;
	if (rc == 0)
		rc = cat_bind(cat, U_SET_CACHED, A_HASH(hash), A_INT(0));
	if (rc == 0)
		rc = cat_run(cat, U_SET_CACHED);
	if (rc == 0 && cat_changes(cat) == 0)
		rc = -ENOENT; /* no such chunk, not stored yet, or dirty (never evicted) */
	if (rc == 0)
		(void)remove(arg, hash); /* a failure is its own to log; gc finds the file */
	return rc;
}

/* Invariant 8 for a copy no row records: the check and the removal in one
 * hold, so a writer's row (and then its object) cannot come in between. */
int cat_chunk_drop_unclaimed(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			     cat_reclaim_fn remove, void *arg)
{
	cat_lock(cat);
	int rc = cat_bind(cat, S_CHUNK_EXISTS, A_HASH(hash));
	if (rc == 0)
		rc = cat_next(cat, S_CHUNK_EXISTS);
	cat_reset(cat, S_CHUNK_EXISTS);
	if (rc == 1)
		rc = -EEXIST; /* a row claims the name: the file may be its writer's */
	else if (rc == 0)
		rc = remove(arg, hash);
	cat_unlock(cat);
	return rc;
}

int cat_chunks_evict(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		     cat_reclaim_fn remove, void *arg, bool *evicted)
{
	if (cat->shared) return catsh_chunks_evict(cat, hashes, n, remove, arg, evicted, NULL);
	for (size_t i = 0; i < n; i++)
		evicted[i] = cat_chunk_evict(cat, hashes[i], remove, arg) == 0;
	return 0;
}
