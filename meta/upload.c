/* upload — the catalog side of the write-back cache: chunk locations, the
 * upload queue, durable generation versions. See upload.h for the states and
 * the invariants U1–U11; SCHEMA.md for the columns. */
#include "upload.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "catalog_internal.h"
#include "catalog_shared_data.h"
#include "generation.h"
#include "log.h"
#include "manifest_shared.h"

#define U(id) [(id) - S_UP_FIRST]
/* Inodes outside generations, by the partial index inodes_outside_gens. */
#define UP_TREE_INODES "inodes INDEXED BY inodes_outside_gens WHERE gen IS NULL"

const char cat_up_temp_sql[] =
	"CREATE TEMP TABLE IF NOT EXISTS evict_keep(hash BLOB PRIMARY KEY) WITHOUT ROWID;";

const struct cat_sql cat_up_sql[S_REFS_FIRST - S_UP_FIRST] = {
	U(U_ENQ_CHUNK) = { "queue a chunk upload",
			   "INSERT INTO uploads(kind, hash, enqueued_ns) VALUES(1, ?1, ?2)" },
	U(U_ENQ_GEN) = { "queue a manifest",
			 "INSERT INTO uploads(kind, gen, version, enqueued_ns) VALUES(?1, ?2, ?3, ?4)" },
	U(U_ENQ_CHUNK_DELETE) = { "queue a chunk removal",
				  "INSERT INTO uploads(kind, hash, enqueued_ns)"
				  /* a member of a pack has no loose object: its pack
				   * goes as a whole (catalog_pack.h K4) */
				  " SELECT 3, ?1, ?2 FROM chunks WHERE hash = ?1 AND ((uploaded = 1"
				  " AND pack IS NULL) OR EXISTS(SELECT 1 FROM uploads WHERE hash = ?1"
				  " AND kind = 1))" },
	U(U_LIST) = { "list the upload queue",
		      "SELECT seq, kind, hash, gen, version, enqueued_ns, attempts FROM uploads"
		      " WHERE seq > ?1 AND seq <= ?3 ORDER BY seq LIMIT ?2" },
	/* fs/uploader.h B3: UP_CHUNK (1) rows of a writer's pending chunks that
	 * no older row of their hash precedes (U4) */
	U(U_LIST_PENDING) = { "list the upload rows of a writer's chunks",
			      "SELECT u.seq, u.kind, u.hash, u.gen, u.version, u.enqueued_ns,"
			      " u.attempts FROM uploads u WHERE u.kind = 1 AND u.seq <= ?3"
			      " AND u.hash IN (SELECT hash FROM pending WHERE ino = ?1)"
			      " AND NOT EXISTS (SELECT 1 FROM uploads o WHERE o.hash = u.hash"
			      " AND o.seq < u.seq) ORDER BY u.seq LIMIT ?2" },
	U(U_GEN_STATE) = { "read a generation's state",
			   "SELECT state, version FROM generations WHERE id = ?1" },
	U(U_GEN_UNUPLOADED) = { "look for chunks of a generation not on BACKING",
				"SELECT 1 FROM inodes i JOIN extents e ON e.ino = i.ino"
				" JOIN chunks c ON c.hash = e.hash"
				" WHERE i.gen = ?1 AND c.uploaded = 0 LIMIT 1" },
	U(U_OLDER_MANIFEST_ROW) = { "look for an older manifest row",
				    "SELECT 1 FROM uploads WHERE kind IN (2, 4) AND seq < ?1 LIMIT 1" },
	/* U4: a later removal of the same chunk governs */
	U(U_NEWER_REMOVAL_ROW) = { "look for a newer removal of the chunk",
				   "SELECT 1 FROM uploads WHERE hash = ?1 AND kind = ?3 AND seq > ?2"
				   " LIMIT 1" },
	/* live, durable once, and BACKING's manifest of it not its current tree */
	U(U_GEN_OUTDATED) = { "look for a generation whose manifest on BACKING is outdated",
			      "SELECT 1 FROM generations WHERE state IN (0, 1, 4)"
			      " AND durable_version > 0 AND durable_version != version LIMIT 1" },
	/* U8: the ended generation's series is in a live generation's tree whose
	 * manifest on BACKING (if any) is not of its current version */
	U(U_GEN_ABSORBED) = { "look for an ended generation's series inside a save not durable",
			      "SELECT 1 FROM generations e JOIN inodes s ON s.ino = e.series"
			      " JOIN generations a ON a.id = s.gen WHERE e.id = ?1"
			      " AND e.state IN (2, 3) AND a.state IN (0, 1, 4)"
			      " AND NOT (a.state = 1 AND a.durable_version = a.version)" },
	U(U_ROW_DELETE) = { "end an upload", "DELETE FROM uploads WHERE seq = ?1" },
	U(U_CHUNK_UPLOADED) = { "record an uploaded chunk",
				/* a loose object: not a pack member (catalog_pack.h K2) */
				"UPDATE chunks SET uploaded = 1, pack = NULL, pack_off = NULL,"
				" pack_len = NULL WHERE hash = ?1 AND stored_len IS NOT NULL" },
	U(U_GEN_DURABLE_SET) = { "record a durable generation",
				 "UPDATE generations SET durable_version = ?2"
				 " WHERE id = ?1 AND state = 1 AND version = ?2" },
	U(U_FAILED) = { "record a failed upload",
			"UPDATE uploads SET attempts = attempts + 1, error = ?2 WHERE seq = ?1" },
	/* U14: this node's chunk rows found lost before their upload */
	U(U_LOST_HASHES) = { "list the chunks found lost before their upload",
			     "SELECT DISTINCT hash FROM uploads WHERE kind = 1 AND hash IS NOT NULL"
			     " AND error LIKE '" UP_LOST_ERROR "%' ORDER BY hash LIMIT ?1" },
	U(U_WHERE) = { "locate a chunk",
		       "SELECT cached, uploaded, codec, plain_len, stored_len, refcount, pack,"
		       " pack_off, pack_len, EXISTS (SELECT 1 FROM uploads WHERE hash = ?1 AND"
		       " kind = 3) FROM chunks WHERE hash = ?1 AND stored_len IS NOT NULL" },
	U(U_SET_CACHED) = { "record a chunk's presence in the cache",
			    "UPDATE chunks SET cached = ?2 WHERE hash = ?1"
			    " AND stored_len IS NOT NULL AND (?2 = 1 OR uploaded = 1)" },
	/* U13: BACKING's copy damaged, the cache's good: dirty again */
	U(U_CHUNK_REPUT) = { "mark a chunk to be put again",
			     /* catalog_pack.h K3: a loose object is put loose again */
			     "UPDATE chunks SET uploaded = 0, pack_off = CASE WHEN pack IS NULL"
			     " THEN -1 ELSE pack_off END WHERE hash = ?1 AND cached = 1"
			     " AND uploaded = 1 AND stored_len IS NOT NULL" },
	U(U_TOUCH) = { "record a chunk's use", "UPDATE chunks SET used_ns = ?2 WHERE hash = ?1" },
	U(U_KEEP_CLEAR) = { "clear the eviction keep list", "DELETE FROM temp.evict_keep" },
	U(U_KEEP_PINNED) = { "list the chunks of pinned generations",
			     "INSERT OR IGNORE INTO temp.evict_keep(hash) SELECT e.hash"
			     " FROM generations g JOIN inodes i ON i.gen = g.id"
			     " JOIN extents e ON e.ino = i.ino WHERE g.pinned = 1 AND g.state IN (0, 1)" },
	U(U_KEEP_INO) = { "list the chunks of an open file",
			  "INSERT OR IGNORE INTO temp.evict_keep(hash) SELECT hash FROM extents"
			  " WHERE ino = ?1 UNION SELECT hash FROM pending WHERE ino = ?1" },
	U(U_EVICT) = { "list chunks to evict",
		       "SELECT hash, stored_len FROM chunks INDEXED BY chunks_evictable"
		       " WHERE cached = 1 AND uploaded = 1 AND stored_len IS NOT NULL"
		       " AND hash NOT IN (SELECT hash FROM temp.evict_keep)"
		       " ORDER BY used_ns LIMIT ?1" },
	U(U_STATS_CHUNKS) = { "sum up the cache",
			      "SELECT COALESCE(SUM(cached), 0),"
			      " COALESCE(SUM(CASE WHEN cached = 1 THEN stored_len END), 0),"
			      " COALESCE(SUM(cached = 1 AND uploaded = 0), 0),"
			      " COALESCE(SUM(CASE WHEN cached = 1 AND uploaded = 0 THEN stored_len END), 0),"
			      " COALESCE(SUM(uploaded), 0),"
			      " COALESCE(SUM(CASE WHEN uploaded = 1 THEN stored_len END), 0)"
			      " FROM chunks WHERE stored_len IS NOT NULL" },
	U(U_STATS_QUEUE) = { "sum up the upload queue",
			     "SELECT COUNT(*), COALESCE(MIN(enqueued_ns), 0) FROM uploads" },
	U(U_STATS_GENS) = { "count durable generations",
			    "SELECT COALESCE(SUM(durable_version = version), 0), COUNT(*)"
			    " FROM generations WHERE state = 1" },
	U(U_PENDING_UNUPLOADED) = { "look for chunks of a file's writer not on BACKING",
				    "SELECT 1 FROM pending p JOIN chunks c ON c.hash = p.hash"
				    " WHERE p.ino = ?1 AND c.cached = 1 AND c.uploaded = 0 LIMIT 1" },
	U(U_FILE_UNUPLOADED) = { "look for chunks of a file not on BACKING",
				 "SELECT 1 FROM extents e JOIN chunks c ON c.hash = e.hash"
				 " WHERE e.ino = ?1 AND c.uploaded = 0 LIMIT 1" },
	/* upload.h U3: one generation is durable only COMMITTED at its durable
	 * version (a HELD, ended or absent one is not: review 33 F4); with 0,
	 * no OPEN or COMMITTED one is left not durable */
	U(U_GEN_NOT_DURABLE) = { "look for generations not durable",
				 "SELECT CASE WHEN ?1 = 0 THEN (SELECT COUNT(*) FROM generations"
				 " WHERE state = 0 OR (state = 1 AND durable_version != version))"
				 " ELSE NOT EXISTS (SELECT 1 FROM generations WHERE id = ?1 AND state = 1"
				 " AND durable_version = version) END" },
	/* the distinct chunks of a generation's files (not a backup's: it names
	 * the same hashes), their stored bytes, and those not on BACKING yet */
	U(U_GEN_BYTES) = { "sum a generation's chunk bytes to upload",
			   "SELECT COALESCE(SUM(COALESCE(c.stored_len, 0)), 0), COALESCE(SUM(CASE WHEN"
			   " c.uploaded = 0 THEN COALESCE(c.stored_len, 0) ELSE 0 END), 0) FROM chunks c"
			   " WHERE c.hash IN (SELECT e.hash FROM inodes i JOIN extents e ON e.ino = i.ino"
			   " WHERE i.gen = ?1)" },
	U(U_TREE_FP) = { "fingerprint the tree outside generations",
			 "SELECT COUNT(*), COALESCE(MAX(ctime_ns), 0), COALESCE(SUM(ctime_ns % 1000003), 0),"
			 " COALESCE(SUM(size), 0) FROM " UP_TREE_INODES },
	/* the tree manifest's meta rows, by key (?1): tree_unwritten (upload.h
	 * U10), tree_described_fp (U11) */
	U(U_TREE_MARK_GET) = { "read a mark of the tree manifest",
			       "SELECT value FROM meta WHERE key = ?1" },
	U(U_TREE_MARK_SET) = { "mark the tree manifest",
			       "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)" },
	U(U_TREE_MARK_CLEAR) = { "clear a mark of the tree manifest",
				 "DELETE FROM meta WHERE key = ?1" },
	U(U_TREE_UNUPLOADED) = { "look for chunks outside generations not on BACKING",
				 "SELECT 1 FROM " UP_TREE_INODES " AND EXISTS(SELECT 1 FROM extents e"
				 " JOIN chunks c ON c.hash = e.hash WHERE e.ino = inodes.ino"
				 " AND c.uploaded = 0) LIMIT 1" },
};

/* ---- hooks for catalog.c and generation.c (inside their transactions) ---- */

/* Each hook runs in the transaction of the change it queues work for, so the
 * row and the change commit together (U1–U4). */

int cat_up_chunk_stored_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	assert(cat->in_txn);
	int rc = cat_bind(cat, U_ENQ_CHUNK, A_HASH(hash), A_INT(cat_now_ns()));
	return rc == 0 ? cat_run(cat, U_ENQ_CHUNK) : rc;
}

int cat_up_chunk_gone_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	assert(cat->in_txn);
	int rc = cat_bind(cat, U_ENQ_CHUNK_DELETE, A_HASH(hash), A_INT(cat_now_ns()));
	return rc == 0 ? cat_run(cat, U_ENQ_CHUNK_DELETE) : rc;
}

static int up_enqueue_gen(struct cat *cat, int kind, uint64_t gen, uint32_t version)
{
	assert(cat->in_txn);
	assert(kind == UP_GEN_MANIFEST || kind == UP_DELETE_GEN_MANIFEST);
	int rc = cat_bind(cat, U_ENQ_GEN, A_INT(kind), A_INT(gen), A_INT(version),
			  A_INT(cat_now_ns()));
	return rc == 0 ? cat_run(cat, U_ENQ_GEN) : rc;
}

int cat_up_gen_committed_txn(struct cat *cat, uint64_t gen, uint32_t version)
{
	return up_enqueue_gen(cat, UP_GEN_MANIFEST, gen, version);
}

int cat_up_gen_deleted_txn(struct cat *cat, uint64_t gen, uint32_t version)
{
	return up_enqueue_gen(cat, UP_DELETE_GEN_MANIFEST, gen, version);
}

/* ---- small helpers ---- */

/* Runs a statement bound to one integer and tells whether it gave a row. */
/* Steps statement id, bound with result rc, and tells whether it gave a row. */
static int up_found(struct cat *cat, enum cat_sid id, int rc, bool *found)
{
	if (rc == 0)
		rc = cat_next(cat, id);
	cat_reset(cat, id);
	if (rc >= 0)
		*found = rc == 1;
	return rc < 0 ? rc : 0;
}

static int up_exists(struct cat *cat, enum cat_sid id, int64_t arg, bool *found)
{
	return up_found(cat, id, cat_bind(cat, id, A_INT(arg)), found);
}

/* Runs a statement without arguments and tells whether it gave a row. */
static int up_any(struct cat *cat, enum cat_sid id, bool *found)
{
	int rc = cat_next(cat, id);
	cat_reset(cat, id);
	if (rc >= 0)
		*found = rc == 1;
	return rc < 0 ? rc : 0;
}

/* A read call: lock, read transaction, fn, end. */
#define UP_READ(cat, expr)                         \
	({                                         \
		cat_lock(cat);                     \
		int up_rc_ = cat_begin_read(cat);  \
		if (up_rc_ == 0)                   \
			up_rc_ = (expr);           \
		up_rc_ = cat_end(cat, up_rc_);     \
		cat_unlock(cat);                   \
		up_rc_;                            \
	})

/* ---- the queue ---- */

/* U_LIST (arg: after) or U_LIST_PENDING (arg: the inode) */
static int up_list_txn(struct cat *cat, enum cat_sid id, uint64_t arg, struct cat_upload *out,
		       int max)
{
	int n = 0;
	/* rows of the deferred transaction stay hidden until it commits (catalog_defer.c D6) */
	int rc = cat_bind(cat, id, A_INT(arg), A_INT(max), A_INT(cat_defer_upload_floor(cat)));
	sqlite3_stmt *st = cat->stmt[id];
	while (rc == 0 && n < max && (rc = cat_next(cat, id)) == 1) {
		struct cat_upload *u = &out[n];
		memset(u, 0, sizeof(*u));
		u->seq = (uint64_t)sqlite3_column_int64(st, 0);
		u->kind = sqlite3_column_int(st, 1);
		if (sqlite3_column_bytes(st, 2) == CAT_HASH_LEN)
			memcpy(u->hash, sqlite3_column_blob(st, 2), CAT_HASH_LEN);
		u->gen = (uint64_t)sqlite3_column_int64(st, 3);
		u->version = (uint32_t)sqlite3_column_int64(st, 4);
		u->enqueued_ns = sqlite3_column_int64(st, 5);
		u->attempts = (uint32_t)sqlite3_column_int64(st, 6);
		n++;
		rc = 0;
	}
	cat_reset(cat, id);
	return rc < 0 ? rc : n;
}

int cat_upload_list(struct cat *cat, uint64_t after, struct cat_upload *out, int max)
{
	if (max <= 0)
		return 0;
	return UP_READ(cat, up_list_txn(cat, U_LIST, after, out, max));
}

int cat_upload_list_pending(struct cat *cat, uint64_t ino, struct cat_upload *out, int max)
{
	if (max <= 0)
		return 0;
	return UP_READ(cat, up_list_txn(cat, U_LIST_PENDING, ino, out, max));
}

/* Is the generation COMMITTED at exactly this version? */
static int up_gen_current(struct cat *cat, uint64_t gen, uint32_t version, bool *current)
{
	int rc = cat_bind(cat, U_GEN_STATE, A_INT(gen));
	if (rc == 0)
		rc = cat_next(cat, U_GEN_STATE);
	*current = rc == 1 && cat_col_int(cat, U_GEN_STATE, 0) == GEN_COMMITTED &&
		   cat_col_int(cat, U_GEN_STATE, 1) == (int64_t)version;
	cat_reset(cat, U_GEN_STATE);
	return rc < 0 ? rc : 0;
}

/* A tree manifest describing the tree after row seq was queued is on
 * BACKING (U5 c, U6). */
static bool up_tree_covers(struct cat *cat, uint64_t seq)
{
	return seq <= cat->up_tree_described;
}

/* U4: is a removal of the same chunk queued after row u (u superseded)? */
static int up_newer_removal(struct cat *cat, const struct cat_upload *u, bool *found)
{
	return up_found(cat, U_NEWER_REMOVAL_ROW,
			cat_bind(cat, U_NEWER_REMOVAL_ROW, A_HASH(u->hash), A_INT((int64_t)u->seq),
				 A_INT(u->kind)),
			found);
}

int cat_upload_removal_superseded(struct cat *cat, const struct cat_upload *u, bool *superseded)
{
	assert(u->kind == UP_DELETE_CHUNK || u->kind == UP_DELETE_PACK);
	*superseded = false;
	return UP_READ(cat, up_newer_removal(cat, u, superseded));
}

/* U5: no manifest a rebuild would apply may still name the chunk. */
static int up_chunk_removal_ready(struct cat *cat, const struct cat_upload *u, bool *ready)
{
	assert(u->kind == UP_DELETE_CHUNK || u->kind == UP_DELETE_PACK);
	*ready = false;
	if (!up_tree_covers(cat, u->seq)) /* U5 c, first: it costs no query */
		return 0;
	bool found = false;
	int rc = up_exists(cat, U_OLDER_MANIFEST_ROW, (int64_t)u->seq, &found); /* U5 a */
	if (rc == 0 && !found)
		rc = up_any(cat, U_GEN_OUTDATED, &found); /* U5 b */
	*ready = rc == 0 && !found;
	return rc;
}

static int up_ready_txn(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale)
{
	bool found = false;
	int rc = 0;
	*ready = true;
	*stale = false;
	switch (u->kind) {
	case UP_GEN_MANIFEST:
		rc = up_gen_current(cat, u->gen, u->version, &found);
		if (rc == 0 && !found)
			*stale = true;
		else if (rc == 0)
			rc = up_exists(cat, U_GEN_UNUPLOADED, (int64_t)u->gen, &found);
		if (rc == 0 && !*stale)
			*ready = !found;
		break;
	case UP_DELETE_CHUNK:
		rc = up_newer_removal(cat, u, stale); /* U4 */
		if (rc == 0 && *stale)
			*ready = false;
		else if (rc == 0)
			rc = up_chunk_removal_ready(cat, u, ready);
		break;
	case UP_DELETE_PACK: /* catalog_pack.h K4: as a chunk's removal, WAL synced */
		rc = up_newer_removal(cat, u, stale); /* U4, by the pack's name */
		if (rc == 0 && *stale)
			*ready = false;
		else if (rc == 0)
			rc = up_chunk_removal_ready(cat, u, ready);
		if (rc == 0 && *ready)
			rc = cat_wal_sync(cat);
		*ready = *ready && rc == 0;
		break;
	case UP_DELETE_GEN_MANIFEST:
		*ready = up_tree_covers(cat, u->seq); /* U6 */
		if (*ready) /* U8 */
			rc = up_exists(cat, U_GEN_ABSORBED, (int64_t)u->gen, &found);
		*ready = *ready && rc == 0 && !found;
		if (*ready) /* U12: the expire that queued it is durable first */
			rc = cat_wal_sync(cat);
		*ready = *ready && rc == 0;
		break;
	default:
		break;
	}
	return rc;
}

int cat_upload_ready(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale)
{
	if (cat->shared && u->kind == UP_CHUNK) return catsh_upload_ready(cat, u, ready, stale);
	if (cat->shared && u->kind == UP_GEN_MANIFEST) return catshd_upload_ready(cat, u, ready, stale);
	return UP_READ(cat, up_ready_txn(cat, u, ready, stale));
}

int cat_upload_ready_many(struct cat *cat, const struct cat_upload *rows, size_t n, bool *ready,
			  bool *stale)
{
	if (cat->shared) return catsh_upload_ready_many(cat, rows, n, ready, stale);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = cat_upload_ready(cat, &rows[i], &ready[i], &stale[i]);
	return rc;
}

int cat_up_done_txn(struct cat *cat, const struct cat_upload *u)
{
	assert(cat->in_txn);
	assert(u->seq != 0); /* a row cat_upload_list gave (AUTOINCREMENT starts at 1) */
	int rc = cat_bind(cat, U_ROW_DELETE, A_INT(u->seq));
	if (rc == 0)
		rc = cat_run(cat, U_ROW_DELETE);
	if (rc == 0 && u->kind == UP_CHUNK) {
		rc = cat_bind(cat, U_CHUNK_UPLOADED, A_HASH(u->hash));
		if (rc == 0)
			rc = cat_run(cat, U_CHUNK_UPLOADED);
		cat->uploaded_unsynced = true; /* catalog.c invariant 12 */
	}
	if (rc == 0 && u->kind == UP_GEN_MANIFEST) {
		rc = cat_bind(cat, U_GEN_DURABLE_SET, A_INT(u->gen), A_INT(u->version));
		if (rc == 0)
			rc = cat_run(cat, U_GEN_DURABLE_SET);
	}
	if (rc == 0 && u->kind == UP_DELETE_PACK) { /* catalog_pack.h K4: it left BACKING */
		rc = cat_bind(cat, P_REMOVED, A_HASH(u->hash));
		if (rc == 0)
			rc = cat_run(cat, P_REMOVED);
	}
	return rc;
}

/* U7: the caller's word that the row's work is on BACKING (or moot). */
int cat_upload_done(struct cat *cat, const struct cat_upload *u)
{
	if (cat->shared) return catshd_upload_done_many(cat, u, 1);
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_up_done_txn(cat, u);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_upload_done_many(struct cat *cat, const struct cat_upload *rows, size_t n)
{
	if (cat->shared) return catshd_upload_done_many(cat, rows, n);
	cat_lock(cat);
	int rc = cat_begin(cat);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = cat_up_done_txn(cat, &rows[i]);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* U7: nothing was put for these rows; nothing is marked. */
int cat_upload_moot_many(struct cat *cat, const struct cat_upload *rows, size_t n)
{
	if (cat->shared) return catsh_upload_moot_many(cat, rows, n);
	cat_lock(cat);
	int rc = cat_begin(cat);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		assert(rows[i].seq != 0);
		rc = cat_bind(cat, U_ROW_DELETE, A_INT(rows[i].seq));
		if (rc == 0)
			rc = cat_run(cat, U_ROW_DELETE);
	}
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_upload_failed(struct cat *cat, uint64_t seq, const char *error)
{
	cat_lock(cat);
	int rc = cat_bind(cat, U_FAILED, A_INT(seq), A_TEXT(error ? error : ""));
	if (rc == 0)
		rc = cat_run(cat, U_FAILED);
	cat_unlock(cat);
	return rc;
}

int cat_upload_lost_hashes(struct cat *cat, uint8_t (*hashes)[CAT_HASH_LEN], size_t max,
			   size_t *n)
{
	*n = 0;
	cat_lock(cat);
	int rc = cat_bind(cat, U_LOST_HASHES, A_INT((int64_t)max));
	while (rc == 0 && (rc = cat_next(cat, U_LOST_HASHES)) == 1) {
		sqlite3_stmt *st = cat->stmt[U_LOST_HASHES];
		rc = 0;
		if (*n < max && sqlite3_column_bytes(st, 0) == CAT_HASH_LEN)
			memcpy(hashes[(*n)++], sqlite3_column_blob(st, 0), CAT_HASH_LEN);
	}
	cat_reset(cat, U_LOST_HASHES);
	cat_unlock(cat);
	return rc < 0 ? rc : 0;
}

/* ---- chunk locations and eviction ---- */

int cat_chunk_reput(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	if (cat->shared)
		return -EOPNOTSUPP; /* PostgreSQL's row says uploaded: U7's moot check would end it */
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_bind(cat, U_CHUNK_REPUT, A_HASH(hash));
	if (rc == 0)
		rc = cat_run(cat, U_CHUNK_REPUT);
	if (rc == 0 && cat_changes(cat) != 1)
		rc = -ENOENT;
	if (rc == 0)
		rc = cat_bind(cat, U_ENQ_CHUNK, A_HASH(hash), A_INT(cat_now_ns()));
	if (rc == 0)
		rc = cat_run(cat, U_ENQ_CHUNK);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

void cat_where_row(struct cat *cat, struct cat_chunk_where *out)
{
	sqlite3_stmt *st = cat->stmt[U_WHERE];
	memset(out, 0, sizeof(*out));
	out->cached = cat_col_int(cat, U_WHERE, 0) != 0;
	out->uploaded = cat_col_int(cat, U_WHERE, 1) != 0;
	out->codec = (uint8_t)cat_col_int(cat, U_WHERE, 2);
	out->plain_len = (uint64_t)cat_col_int(cat, U_WHERE, 3);
	out->stored_len = (uint64_t)cat_col_int(cat, U_WHERE, 4);
	out->refcount = (uint64_t)cat_col_int(cat, U_WHERE, 5);
	out->packed = sqlite3_column_bytes(st, 6) == CAT_HASH_LEN;
	if (out->packed) {
		memcpy(out->pack, sqlite3_column_blob(st, 6), CAT_HASH_LEN);
		out->pack_off = (uint64_t)cat_col_int(cat, U_WHERE, 7);
		out->pack_len = (uint64_t)cat_col_int(cat, U_WHERE, 8);
	}
	/* K3: put loose again — marked so, or a removal of its loose object is
	 * queued (the object an older row put; a put of the same name is what
	 * that removal finds referenced and keeps) */
	out->loose_only = !out->packed && ((sqlite3_column_type(st, 7) != SQLITE_NULL &&
					    cat_col_int(cat, U_WHERE, 7) == -1) ||
					   cat_col_int(cat, U_WHERE, 9) != 0);
}

int cat_chunk_where(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], struct cat_chunk_where *out)
{
	if (cat->shared) return catsh_chunk_where(cat, hash, out);
	cat_lock(cat);
	int rc = cat_bind(cat, U_WHERE, A_HASH(hash));
	if (rc == 0)
		rc = cat_next(cat, U_WHERE);
	if (rc == 1) {
		cat_where_row(cat, out);
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, U_WHERE);
	cat_unlock(cat);
	return rc;
}

int cat_chunk_lost(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	if (cat->shared) return catsh_chunk_lost(cat, hash);
	struct cat_chunk_where w;
	int rc = cat_chunk_where(cat, hash, &w);
	if (rc == -ENOENT)
		return 0;
	return rc != 0 ? rc : w.refcount > 0 && !w.uploaded;
}

int cat_chunk_fetched(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	if (cat->shared) return catsh_chunk_fetched(cat, hash);
	cat_lock(cat);
	int rc = cat_bind(cat, U_SET_CACHED, A_HASH(hash), A_INT(1));
	if (rc == 0)
		rc = cat_run(cat, U_SET_CACHED);
	if (rc == 0 && cat_changes(cat) == 0)
		rc = -ENOENT; /* no such chunk, or dirty (U1: never evicted) */
	cat_unlock(cat);
	return rc;
}

int cat_chunks_touch(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], int n, int64_t now_ns)
{
	cat_lock(cat);
	int rc = cat_begin(cat);
	for (int i = 0; i < n && rc == 0; i++) {
		rc = cat_bind(cat, U_TOUCH, A_HASH(hashes[i]), A_INT(now_ns));
		if (rc == 0)
			rc = cat_run(cat, U_TOUCH);
	}
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

static int up_evict_txn(struct cat *cat, const uint64_t *open_inos, int n_open,
			uint8_t (*out)[CAT_HASH_LEN], uint64_t *lens, int max)
{
	int rc = cat_run(cat, U_KEEP_CLEAR);
	if (rc == 0)
		rc = cat_run(cat, U_KEEP_PINNED);
	for (int i = 0; i < n_open && rc == 0; i++) {
		rc = cat_bind(cat, U_KEEP_INO, A_INT(open_inos[i]));
		if (rc == 0)
			rc = cat_run(cat, U_KEEP_INO);
	}
	int n = 0;
	if (rc == 0)
		rc = cat_bind(cat, U_EVICT, A_INT(max));
	sqlite3_stmt *st = cat->stmt[U_EVICT];
	while (rc == 0 && n < max && (rc = cat_next(cat, U_EVICT)) == 1) {
		if (sqlite3_column_bytes(st, 0) == CAT_HASH_LEN) {
			memcpy(out[n], sqlite3_column_blob(st, 0), CAT_HASH_LEN);
			lens[n] = (uint64_t)sqlite3_column_int64(st, 1);
			n++;
		}
		rc = 0;
	}
	cat_reset(cat, U_EVICT);
	return rc < 0 ? rc : n;
}

int cat_evict_candidates(struct cat *cat, const uint64_t *open_inos, int n_open,
			 uint8_t (*out)[CAT_HASH_LEN], uint64_t *lens, int max)
{
	/* A write transaction: the keep list is a temp table. */
	cat_lock(cat);
	int rc = cat_begin(cat);
	int n = rc == 0 ? up_evict_txn(cat, open_inos, n_open, out, lens, max) : rc;
	rc = cat_end(cat, n < 0 ? n : 0);
	cat_unlock(cat);
	return rc < 0 ? rc : n;
}

/* ---- accounting ---- */

static int up_stats_txn(struct cat *cat, struct cat_cache_stats *o)
{
	memset(o, 0, sizeof(*o));
	int rc = cat_next(cat, U_STATS_CHUNKS);
	if (rc == 1) {
		o->cached_chunks = (uint64_t)cat_col_int(cat, U_STATS_CHUNKS, 0);
		o->cached_bytes = (uint64_t)cat_col_int(cat, U_STATS_CHUNKS, 1);
		o->dirty_chunks = (uint64_t)cat_col_int(cat, U_STATS_CHUNKS, 2);
		o->dirty_bytes = (uint64_t)cat_col_int(cat, U_STATS_CHUNKS, 3);
		o->uploaded_chunks = (uint64_t)cat_col_int(cat, U_STATS_CHUNKS, 4);
		o->uploaded_bytes = (uint64_t)cat_col_int(cat, U_STATS_CHUNKS, 5);
		rc = cat_next(cat, U_STATS_QUEUE);
	}
	if (rc == 1) {
		o->queued = (uint64_t)cat_col_int(cat, U_STATS_QUEUE, 0);
		o->oldest_queued_ns = cat_col_int(cat, U_STATS_QUEUE, 1);
		rc = cat_next(cat, U_STATS_GENS);
	}
	if (rc == 1) {
		o->durable_gens = (uint64_t)cat_col_int(cat, U_STATS_GENS, 0);
		o->committed_gens = (uint64_t)cat_col_int(cat, U_STATS_GENS, 1);
		rc = 0;
	}
	cat_reset(cat, U_STATS_CHUNKS);
	cat_reset(cat, U_STATS_QUEUE);
	cat_reset(cat, U_STATS_GENS);
	return rc < 0 ? rc : 0;
}

int cat_cache_stats(struct cat *cat, struct cat_cache_stats *out)
{
	return UP_READ(cat, up_stats_txn(cat, out));
}

int cat_file_uploaded(struct cat *cat, uint64_t ino, bool *uploaded)
{
	if (cat->shared) return catsh_file_uploaded(cat, ino, uploaded);
	bool missing = true;
	int rc = UP_READ(cat, up_exists(cat, U_FILE_UNUPLOADED, (int64_t)ino, &missing));
	if (rc == 0)
		*uploaded = !missing;
	return rc;
}

/* Both engines: a writer's pending rows and their chunk rows are this
 * node's (catalog_shared_data.c S1, S5: a local uploaded mark is this
 * node's own upload, or PostgreSQL's word at the upload's readiness check).
 * Only chunks whose object is in this node's cache count: one named with no
 * copy here (a write on top of another node's content, S7) is that node's
 * to upload, not this one's. */
int cat_pending_uploaded(struct cat *cat, uint64_t ino, bool *uploaded)
{
	bool missing = true;
	int rc = UP_READ(cat, up_exists(cat, U_PENDING_UNUPLOADED, (int64_t)ino, &missing));
	if (rc == 0)
		*uploaded = !missing;
	return rc;
}

int cat_gen_durable(struct cat *cat, uint64_t gen, bool *durable)
{
	if (cat->shared) return catshd_gen_durable(cat, gen, durable);
	cat_lock(cat);
	int rc = cat_bind(cat, U_GEN_NOT_DURABLE, A_INT(gen));
	if (rc == 0)
		rc = cat_next(cat, U_GEN_NOT_DURABLE);
	if (rc == 1) {
		*durable = cat_col_int(cat, U_GEN_NOT_DURABLE, 0) == 0;
		rc = 0;
	}
	cat_reset(cat, U_GEN_NOT_DURABLE);
	cat_unlock(cat);
	return rc;
}

int cat_gen_upload_bytes(struct cat *cat, uint64_t gen, uint64_t *total, uint64_t *left)
{
	if (cat->shared) return catshd_gen_upload_bytes(cat, gen, total, left);
	*total = *left = 0;
	cat_lock(cat);
	int rc = cat_bind(cat, U_GEN_BYTES, A_INT(gen));
	if (rc == 0)
		rc = cat_next(cat, U_GEN_BYTES);
	if (rc == 1) {
		*total = (uint64_t)cat_col_int(cat, U_GEN_BYTES, 0);
		*left = (uint64_t)cat_col_int(cat, U_GEN_BYTES, 1);
		rc = 0;
	}
	cat_reset(cat, U_GEN_BYTES);
	cat_unlock(cat);
	return rc;
}

int cat_tree_fingerprint_txn(struct cat *cat, char *buf, size_t size, bool *all_uploaded)
{
	int rc = cat_next(cat, U_TREE_FP);
	if (rc == 1) {
		snprintf(buf, size, "%" PRId64 ":%" PRId64 ":%" PRId64 ":%" PRId64,
			 cat_col_int(cat, U_TREE_FP, 0), cat_col_int(cat, U_TREE_FP, 1),
			 cat_col_int(cat, U_TREE_FP, 2), cat_col_int(cat, U_TREE_FP, 3));
		rc = cat_next(cat, U_TREE_UNUPLOADED);
		if (rc >= 0)
			*all_uploaded = rc == 0;
	}
	cat_reset(cat, U_TREE_FP);
	cat_reset(cat, U_TREE_UNUPLOADED);
	return rc < 0 ? rc : 0;
}

int cat_tree_fingerprint(struct cat *cat, char *buf, size_t size, bool *all_uploaded)
{
	return UP_READ(cat, cat_tree_fingerprint_txn(cat, buf, size, all_uploaded));
}

static int up_horizon_txn(struct cat *cat, uint64_t *seq)
{
	int rc = cat_next(cat, S_UPLOAD_SEQ);
	if (rc == 1) {
		int64_t newest = cat_col_int(cat, S_UPLOAD_SEQ, 0);
		int64_t floor = cat_defer_upload_floor(cat); /* rows above it may yet roll back */
		*seq = (uint64_t)(newest < floor ? newest : floor);
		rc = 0;
	}
	cat_reset(cat, S_UPLOAD_SEQ);
	return rc;
}

int cat_tree_horizon(struct cat *cat, uint64_t *seq)
{
	*seq = 0;
	return UP_READ(cat, up_horizon_txn(cat, seq));
}

void cat_tree_described(struct cat *cat, uint64_t seq)
{
	cat_lock(cat);
	if (seq > cat->up_tree_described) /* an older manifest's call may come late */
		cat->up_tree_described = seq;
	cat_unlock(cat);
}

#define UP_MARK_UNWRITTEN "tree_unwritten"   /* U10 */
#define UP_MARK_DESCRIBED "tree_described_fp" /* U11 */

static int up_mark_set(struct cat *cat, const char *key, const char *value)
{
	cat_lock(cat);
	int rc = value ? cat_bind(cat, U_TREE_MARK_SET, A_TEXT(key), A_TEXT(value))
		       : cat_bind(cat, U_TREE_MARK_CLEAR, A_TEXT(key));
	if (rc == 0)
		rc = cat_run(cat, value ? U_TREE_MARK_SET : U_TREE_MARK_CLEAR);
	cat_unlock(cat);
	return rc;
}

/* The meta row key: its value in buf (or empty as none), *found. */
static int up_mark_txn(struct cat *cat, const char *key, char *buf, size_t size, bool *found)
{
	buf[0] = '\0';
	*found = false;
	int rc = cat_bind(cat, U_TREE_MARK_GET, A_TEXT(key));
	if (rc == 0)
		rc = cat_next(cat, U_TREE_MARK_GET);
	if (rc == 1) {
		const unsigned char *v = sqlite3_column_text(cat->stmt[U_TREE_MARK_GET], 0);
		snprintf(buf, size, "%s", v ? (const char *)v : "");
		*found = true;
		rc = 0;
	}
	cat_reset(cat, U_TREE_MARK_GET);
	return rc;
}

int cat_tree_unwritten_set(struct cat *cat, const char *why)
{
	return up_mark_set(cat, UP_MARK_UNWRITTEN, why);
}

static int up_tree_unwritten_txn(struct cat *cat, char *why, size_t size)
{
	bool found = false;
	int rc = up_mark_txn(cat, UP_MARK_UNWRITTEN, why, size, &found);
	if (rc == 0 && found && !why[0])
		snprintf(why, size, "(no reason recorded)");
	return rc;
}

int cat_tree_unwritten(struct cat *cat, char *why, size_t size)
{
	assert(size > 0);
	why[0] = '\0';
	return UP_READ(cat, up_tree_unwritten_txn(cat, why, size));
}

int cat_tree_described_fp_set(struct cat *cat, const char *fp)
{
	assert(fp && fp[0]);
	return up_mark_set(cat, UP_MARK_DESCRIBED, fp);
}

/* U11: the fingerprint now and the one described, in one snapshot. */
static int up_tree_current_txn(struct cat *cat, bool *current)
{
	char fp[128], described[128];
	bool all_uploaded = false, found = false;
	int rc = cat_tree_fingerprint_txn(cat, fp, sizeof(fp), &all_uploaded);
	if (rc == 0)
		rc = up_mark_txn(cat, UP_MARK_DESCRIBED, described, sizeof(described), &found);
	if (rc == 0)
		*current = found && all_uploaded && strcmp(fp, described) == 0;
	return rc;
}

int cat_tree_described_current(struct cat *cat, bool *current)
{
	*current = false;
	return UP_READ(cat, up_tree_current_txn(cat, current));
}
