/* catalog_shared_data — file contents and this node's chunk rows in the
 * shared engine (issue 18, docs/MULTINODE.md "Design of the shared
 * namespace"): what catalog.c's and upload.c's calls do for a struct cat
 * with cat->shared set.
 *
 * Writes stay local until close (close-to-open). A writer's pending extents
 * live in this node's SQLite, keyed by the shared inode number (there is no
 * local inode row to check them against: the namespace is in PostgreSQL),
 * with a local chunk row per hash; cat_file_commit publishes the whole file
 * with one fenced PostgreSQL transaction (pgns_file_publish). Committed
 * extents are read from PostgreSQL. The local `extents`, `inodes` and
 * `generations` tables stay empty.
 *
 * A local chunk row moves through (refcount: this node's pending rows):
 *
 *   writer: pending_add ──▶ stored (cached, UP_CHUNK queued) ──▶ uploaded
 *   reader: (no row) ──▶ fetched from BACKING: cached, uploaded ──▶ evicted
 *   pending_from_committed: a hash it lacks ──▶ not cached, uploaded as
 *                                               PostgreSQL says
 *
 * Rules (numbered; the tests in tests/unit/test_catshared_data.c):
 *  S1. Local invariant 1 holds with no extents: chunks.refcount counts this
 *      node's pending rows only; PostgreSQL counts committed extents (N1).
 *  S2. cat_file_commit publishes pending as the file's extents in one
 *      fenced transaction and leaves pending as it is (catalog.h: the
 *      writer goes on from it; its release drops it, or the next cat_open,
 *      invariant 4). A crash at any point loses nothing the commit returned.
 *      With durable, this node's catalog is made durable first, so the node
 *      never forgets a chunk PostgreSQL says it holds.
 *  S3. The local sweep of zero-count rows never removes from BACKING (that
 *      is the reclaim duty's, pgns_reclaim_begin/end) and never queues a
 *      removal: a row not uploaded with an UP_CHUNK row waits for its
 *      upload; an uploaded cached row is a cache copy, the evictor's; an
 *      uploaded row not cached is deleted without the callback (nothing of
 *      it is here); any other row (never published, or another node's
 *      chunk this node never got) is reclaimed from the cache and deleted.
 *  S4. The uploader uploads a chunk only while a local writer references
 *      it or PostgreSQL has it live and not uploaded: one PostgreSQL has on
 *      BACKING already is moot, one it lacks is dropped (stale).
 *  S5. cat_upload_done (an object put) marks a chunk uploaded in
 *      PostgreSQL first (where that can change something, S12), then
 *      locally, and only a chunk whose local row has its object. A row
 *      found moot ends by cat_upload_moot_many instead, which tells
 *      PostgreSQL nothing (upload.h U7: catsh_upload_moot_many). PostgreSQL
 *      lacking it (-ENOENT: not published yet, or reclaimed meanwhile) is
 *      logged; the local row is marked only while a writer references it,
 *      and its commit marks it in PostgreSQL (S2). Either side tells
 *      PostgreSQL again after its own step (csd_done_late after the local
 *      mark, csd_publish_late after the publication), so an upload that
 *      ends while the commit runs is never left unmarked.
 *  S6. cat_chunk_where answers from the local row when it is cached or
 *      uploaded, and -ENOENT (as alone) while a writer stores its object;
 *      otherwise from PostgreSQL: uploaded → on BACKING, not cached; not
 *      uploaded → -EAGAIN while its holder is a live node (its cache has
 *      the only copy and may still upload it: a reader waits up to
 *      backing_timeout), -ENOENT at once, logged, when its holder is not
 *      live (its lease ran out or it left: it never uploads it, lease.h L1;
 *      a reader of a lost save or of a tracker rewritten on a dead node
 *      gets EIO now, not after minutes in D state: review 45 F4, F5; a
 *      small file outside generations reaches this case only if BACKING
 *      failed its upload at close, fs/ns.h invariant 13); no row → -ENOENT.
 *  S7. A writer that starts from a file's committed extents pins their live
 *      chunks in PostgreSQL (pgns_pin, N6: no reclaim removes them) until
 *      its release (cat_pending_drop: pgns_unpin); a chunk it could not pin
 *      (gone or being reclaimed) gets a row with no object (invariant 2).
 *      A commit naming a chunk this node holds no object of checks that
 *      PostgreSQL still has it live: else -EIO, logged with file and chunk,
 *      never a reference to an object nobody has.
 *  S8. No "uploaded" from PostgreSQL for an object a reclaim on another
 *      node removed after this node wrote it (pgns.h N7): the uploader's
 *      readiness check claims the hashes of its rows, a batch of them in
 *      one round trip (cat_upload_ready_many: pgns_upload_claims), before
 *      the objects are written; every marking on
 *      the strength of this node's upload (the commit's, S2; the upload's
 *      own, S5) counts only while the claim stands. One refused (a reclaim
 *      of the hash ended since) is not on BACKING: its local row is set
 *      uploaded = 0 and, cached, queued for upload again (csd_upload_again),
 *      whose next readiness check claims anew. A batch's claims cost one
 *      round trip whatever its size (a refused or missing hash is that
 *      row's answer alone), as its markings do (pgns_chunks_uploaded).
 *  S9. A writer's release (cat_pending_drop) drops, with its pins, this
 *      node's claims of the file's hashes that have no pending reference
 *      left here and no queued upload (pgns.h N7: of no more use): those of
 *      a file never committed go with it; a hash still to be uploaded or
 *      named by another writer keeps its claim for that marking.
 *  S10. A copy fetched from BACKING (another node's upload) never marks a
 *      dirty row (cached = 1, uploaded = 0: a local writer's only copy, its
 *      upload queued) uploaded: that would make the copy evictable, and a
 *      reclaim of the other node's object would then leave the bytes
 *      nowhere. Only this node's own upload marks its row (S5, S8).
 *  S11. A local writer's reference to a chunk this node holds no copy of
 *      is covered in PostgreSQL: PostgreSQL counts no pending reference,
 *      so once the cache copy goes, BACKING's object is all the writer's
 *      commit has, and a reclaim (the last committed reference dropped on
 *      any node) would remove it. So an eviction (cat_chunks_evict) of a
 *      copy that writers of this node name first pins it for each of them
 *      (pgns_pin_held, pgns.h N10: one round trip for the batch, none for
 *      a batch no writer names); a hash PostgreSQL has no row of yet gets
 *      one, live and uploaded on the strength of this node's claim (N7).
 *      One it cannot pin (reclaiming, or no row and no claim: the object
 *      may be gone) keeps its copy. The copy goes only if, in the hold of
 *      the catalog lock that removes it, every writer naming it is one the
 *      pin was taken for; a writer's release (whose unpin drops all of its
 *      inode's pins) waits for the eviction's pins and removals, which hold
 *      cat_shared_pins, so no pin is dropped under a later reference. A
 *      writer that names a chunk with no copy here afterwards (a dedup hit
 *      on the local row) stores its bytes anew, as invariant 2 makes it for
 *      a row at count 0: no pin is taken on the write path. The pins go at
 *      the writers' release with S7's (pgns_unpin).
 *  S12. S5's markings in PostgreSQL are sent only where they can change
 *      something. A writer's chunk whose claim (S8) found no row in
 *      PostgreSQL is remembered with the count of this node's publications
 *      whose last local read (csd_publish_late, run once the publication
 *      succeeded, whatever the steps between gave) had run by then; if, at its
 *      upload's end, none has run since and a writer here still names it,
 *      nothing of this node has published it since the claim, or the one
 *      publishing it reads the local row after the local mark: the row is
 *      marked locally alone, as S5 marks a writer's chunk PostgreSQL lacks,
 *      and the commit marks it (S2). Any other chunk is marked in
 *      PostgreSQL first, as S5 says. S5's second telling (csd_done_late) is
 *      sent only if a publication's last local read ran between the
 *      marking's start and the local mark: otherwise every publication of
 *      the hash either was seen by the marking or reads the mark. The
 *      remembered hashes are bounded (CSD_ABSENT_MAX): one not remembered is
 *      marked in PostgreSQL, as before. A publication whose outcome is
 *      unknown (-ENOTCONN, pg.h P2) runs its last local read as one that
 *      succeeded: it may have published, and its writer publishes no more
 *      (tests/unit/test_pgfault.c).
 *  S13. A chunk is marked uploaded on the strength of BACKING's object that
 *      no upload of this node put there (pggen.h X11, catshd_adopt_backing)
 *      only if it is a chunk of a lost generation whose holder is gone
 *      (pggen_orphans), this node's claim of it (N7) was taken BEFORE its
 *      object was read, the object read back whole (decoded, SHA-256 equal
 *      to its hash: the check's verdict, never presence or size alone), and
 *      the claim still stands at the marking (pgns_chunks_uploaded): so no
 *      reclaim ended between the read and the mark, and the object read is
 *      the one there. One absent or damaged is left as it is (a damaged one
 *      logged, naming it, and not read again by this node while it
 *      remembers it: CSD_BACKING_BAD of them), its claim dropped. At most
 *      CSD_BACKING_MAX objects are read a sweep, round robin over the
 *      orphans by hash.
 *  S14. cat_chunk_lost (a chunk whose object this node's cache lacks, for
 *      fs/writer.c writer_sync_gone) answers as the local engine's rule,
 *      with the references of both sides: lost (1) only if something names
 *      it (this node's pending rows, or PostgreSQL's count of a live row)
 *      and nothing has its bytes: not marked uploaded locally (this node's
 *      own upload, S5, S8), not live and uploaded in PostgreSQL, and not
 *      live with another live node as holder (that node's cache has the
 *      only copy and its uploader puts it on BACKING: its durability is
 *      that node's, which this node cannot sync; a holder no longer live,
 *      this node's own before a restart too, never uploads it: lease.h
 *      L1, pgns_chunk_get_holder). A row being reclaimed counts
 *      as named by nothing in PostgreSQL, and is on BACKING no more. No row
 *      anywhere, or one nothing names: not lost (reclaimed). One round trip
 *      unless the local row says uploaded.
 *  S15. catalog.c invariant 12 holds here too: every local uploaded mark
 *      (csd_done_txn, catsh_upload_moot_many, a dirty row that learns from
 *      PostgreSQL it is on BACKING in csd_take_committed) sets
 *      uploaded_unsynced, and an eviction (catsh_chunks_evict, through
 *      cat_chunk_evict_locked) syncs the WAL first. PostgreSQL's mark does
 *      not make this moot: a power loss that keeps the unlink and loses the
 *      local mark leaves a row cached = 1, uploaded = 0 and its UP_CHUNK row
 *      back, with no object; while a writer of this node names the chunk
 *      (pending rows outlive a restart here) the uploader does not find the
 *      upload moot (S4) and tries to read an object that is gone, and a
 *      reader is sent to the cache for it. A copy fetched from BACKING
 *      (csd_sql_fetched) sets cached with its mark: a lost mark loses both,
 *      and the row says as before.
 *  S16. No local row says "on BACKING" on a guess, so no eviction takes a
 *      copy on one. A marking in PostgreSQL of chunks this node's rows say
 *      it put on BACKING (the publication's, S2; csd_publish_late's and
 *      csd_done_late's, S5) whose outcome is unknown (-ENOTCONN, pg.h P2)
 *      may have been refused for any of them (S8: a reclaim on another node
 *      ended since the claim, and the publication re-inserted the row live
 *      and not uploaded), and its refusals are never read: every chunk it
 *      tried to mark is then taken as refused, its row (with a cache copy:
 *      one evicted under S11's pin was never refusable) set uploaded = 0 and
 *      queued for upload again (csd_upload_again_after); the
 *      upload's readiness check finds it moot if PostgreSQL says it is on
 *      BACKING (S4), and drops it if nothing names it. If that local step
 *      fails (after a marking that answered or not), the hashes are kept in
 *      memory (struct csd_again_set, in the engine's state): every eviction
 *      first tries their marks again and takes none of their copies while
 *      they are there (catsh_chunks_evict). Only out of memory for that set
 *      leaves a row wrong, logged as such. Before, a refused marking lost
 *      with the COMMIT's answer left the row uploaded = 1: the evictor
 *      dropped the only copy of a chunk the committed file names
 *      (tests/unit/test_pgfault.c).
 *  S17. A chunk taken back at mount (catshd_take_back, for catalog_shared.c
 *      S18: an object of this cache whose plain bytes passed SHA-256, of a
 *      chunk PostgreSQL says only an earlier node of this cache held and
 *      BACKING lacks) gets the row a writer's stored chunk has: cached, not
 *      uploaded, the codec and stored length of the object's header, and
 *      an UP_CHUNK row unless one is queued (upload.h U2), in one local
 *      transaction; its count stays this node's pending references (S1). A
 *      row already cached with its object is left as it is; any other row
 *      of the hash (its object forgotten, or marked uploaded here while
 *      PostgreSQL says not) becomes that row. Nothing is removed. */
#define _GNU_SOURCE
#include "catalog_shared_data.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "hash.h"
#include "log.h"
#include "pggen.h"
#include "pgns.h"

#define CSD_EXTENTS_PAGE 256 /* extents per pgns_extents call */
#define CSD_BACKING_MAX 8 /* S13: objects one sweep reads from BACKING */
#define CSD_SWEEP_BATCH 64

/* ---- statements of this file only, prepared per call ----
 * Each runs once per file commit, writer start or sweep batch (never per
 * chunk), so a prepare per call costs nothing worth a slot in every
 * catalog's statement table. */

/* A file's pending extents with what this node knows of their chunks. */
static const char csd_sql_pending_all[] =
	"SELECT p.off, p.len, p.chunk_off, c.plain_len, p.hash, c.codec, c.stored_len,"
	" c.uploaded, c.cached FROM pending p LEFT JOIN chunks c ON c.hash = p.hash"
	" WHERE p.ino = ?1 ORDER BY p.off";
/* S3: zero-count rows the sweep may take (rule d) or delete quietly (c). */
static const char csd_sql_garbage[] =
	"SELECT hash, uploaded FROM chunks c WHERE refcount = 0 AND hash > ?1"
	" AND NOT (uploaded = 1 AND cached = 1) AND NOT (uploaded = 0 AND EXISTS"
	" (SELECT 1 FROM uploads u WHERE u.hash = c.hash AND u.kind = 1))"
	" ORDER BY hash LIMIT ?2";
/* A reference for a committed extent a writer starts from: a hash this node
 * lacks gets PostgreSQL's description; one it has learns whether it is on
 * BACKING. */
static const char csd_sql_take_committed[] =
	"INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount, cached, uploaded)"
	" VALUES(?1, ?2, ?3, ?4, 1, 0, ?5) ON CONFLICT(hash) DO UPDATE SET"
	" refcount = refcount + 1, uploaded = CASE WHEN stored_len IS NOT NULL"
	" THEN MAX(uploaded, excluded.uploaded) ELSE uploaded END";
/* A chunk fetched from BACKING: cached, and on BACKING by definition. */
static const char csd_sql_fetched[] =
	"UPDATE chunks SET cached = 1, uploaded = 1 WHERE hash = ?1 AND stored_len IS NOT NULL"
	" AND NOT (cached = 1 AND uploaded = 0)"; /* S10 */
/* S17 */
static const char csd_sql_take_back[] =
	"INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount, cached, uploaded)"
	" VALUES(?1, ?2, ?3, ?4, 0, 1, 0) ON CONFLICT(hash) DO UPDATE SET codec = ?3,"
	" stored_len = ?4, cached = 1, uploaded = 0"
	" WHERE NOT (cached = 1 AND stored_len IS NOT NULL)";
static const char csd_sql_take_back_queue[] =
	"INSERT INTO uploads(kind, hash, enqueued_ns) SELECT 1, ?1, ?2"
	" WHERE NOT EXISTS (SELECT 1 FROM uploads WHERE hash = ?1 AND kind = 1)";
static const char csd_sql_fetched_new[] =
	"INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount, cached, uploaded)"
	" VALUES(?1, ?2, ?3, ?4, 0, 1, 1) ON CONFLICT(hash) DO NOTHING";
/* S9: a file's hashes, and whether this node may still mark a hash on the
 * strength of its claim (a pending reference or a queued upload: a row). */
static const char csd_sql_pending_hashes[] = "SELECT DISTINCT hash FROM pending WHERE ino = ?1";
static const char csd_sql_claim_used[] =
	"SELECT 1 FROM chunks WHERE hash = ?1 AND refcount > 0 UNION ALL"
	" SELECT 1 FROM uploads WHERE hash = ?1 AND kind = 1 LIMIT 1";
static const char csd_sql_row[] =
	"SELECT refcount, stored_len IS NOT NULL FROM chunks WHERE hash = ?1";
/* S8: a chunk PostgreSQL refused to count as uploaded: not on BACKING here
 * either, and queued again if its object is in the cache and no upload of
 * it is queued yet (the row says whether it is to be queued). */
static const char csd_sql_unupload[] =
	"UPDATE chunks SET uploaded = 0 WHERE hash = ?1 AND (?2 OR cached = 1) RETURNING cached"
	" AND NOT EXISTS (SELECT 1 FROM uploads u WHERE u.hash = ?1 AND u.kind = 1)";

static int csd_prepare(struct cat *cat, const char *sql, sqlite3_stmt **st)
{
	if (sqlite3_prepare_v2(cat->db, sql, -1, st, NULL) == SQLITE_OK)
		return 0;
	log_error("catalog %s: cannot prepare \"%.60s…\": %s", cat->path, sql,
		  sqlite3_errmsg(cat->db));
	return -EIO;
}

/* sqlite3_step: 1 a row, 0 done, -EIO (logged) a failure. */
static int csd_step(struct cat *cat, sqlite3_stmt *st)
{
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		return 1;
	if (src == SQLITE_DONE)
		return 0;
	log_error("catalog %s: \"%.60s…\" failed: %s", cat->path, sqlite3_sql(st),
		  sqlite3_errmsg(cat->db));
	return -EIO;
}

static void csd_bind_hash(sqlite3_stmt *st, int i, const uint8_t hash[CAT_HASH_LEN])
{
	sqlite3_bind_blob(st, i, hash, CAT_HASH_LEN, SQLITE_STATIC);
}

static bool csd_col_hash(sqlite3_stmt *st, int col, uint8_t out[CAT_HASH_LEN])
{
	if (sqlite3_column_bytes(st, col) != CAT_HASH_LEN)
		return false;
	memcpy(out, sqlite3_column_blob(st, col), CAT_HASH_LEN);
	return true;
}

static void csd_log_hash(const char *what, struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	char hex[2 * CAT_HASH_LEN + 1];
	cat_hex(hash, hex);
	log_info("catalog %s: chunk %s %s", cat->path, hex, what);
}

/* This node's pending references of hash (0 without a row), and whether
 * its object is written (*stored: a row with stored_len set). */
static int csd_local_row(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], int64_t *refs,
			 bool *stored)
{
	sqlite3_stmt *st;
	int rc = csd_prepare(cat, csd_sql_row, &st);
	if (rc)
		return rc;
	csd_bind_hash(st, 1, hash);
	rc = csd_step(cat, st);
	*refs = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
	*stored = rc == 1 && sqlite3_column_int(st, 1) != 0;
	sqlite3_finalize(st);
	return rc < 0 ? rc : 0;
}

/* ---- S16: markings that may have been refused ---- */

void csd_again_free(struct csd_again_set *set)
{
	free(set->v);
	set->v = NULL;
	set->n = set->cap = 0;
}

static ssize_t csd_again_find(const struct csd_again_set *set, const uint8_t hash[CAT_HASH_LEN])
{
	for (size_t i = 0; i < set->n; i++)
		if (memcmp(set->v[i], hash, CAT_HASH_LEN) == 0)
			return (ssize_t)i;
	return -1;
}

/* Under the lock: hashes[i] (again NULL: all, else those with again[i])
 * leave S16's set once their local mark is written (written), or join it
 * when it is not. */
static void csd_again_note(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN],
			   const bool *again, size_t n, bool written)
{
	struct csd_again_set *set = cat_shared_again(cat);
	size_t lost = 0;
	for (size_t i = 0; i < n; i++) {
		if (again && !again[i])
			continue;
		ssize_t at = csd_again_find(set, hashes[i]);
		if (written && at >= 0)
			memcpy(set->v[at], set->v[--set->n], CAT_HASH_LEN);
		if (written || at >= 0)
			continue;
		if (set->n == set->cap) {
			size_t cap = set->cap ? 2 * set->cap : 16;
			uint8_t(*v)[CAT_HASH_LEN] = realloc(set->v, cap * CAT_HASH_LEN);
			if (!v) {
				lost++;
				continue;
			}
			set->v = v;
			set->cap = cap;
		}
		memcpy(set->v[set->n++], hashes[i], CAT_HASH_LEN);
	}
	if (lost) /* the last resort: nothing keeps these copies */
		log_error("catalog %s: out of memory: %zu chunks whose rows wrongly say they are on"
			  " BACKING may be evicted", cat->path, lost);
}

/* S8, S16: the chunks hashes[i] (again NULL: all of them, else those with
 * again[i] set) are not on BACKING after all, or may not be (PostgreSQL
 * refused their marking, pgns.h N7, or its outcome is unknown): marked so
 * locally, and queued for upload again. With again NULL only rows with a
 * cache copy change: a copy evicted under S11's pin had PostgreSQL's row
 * live and uploaded, a marking no reclaim can refuse (and there is nothing
 * to put again). If that fails they join S16's set, whose copies no
 * eviction takes until a later try writes the mark; once it is written they
 * leave it. Takes the lock. */
static int csd_upload_again(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN],
			    const bool *again, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += !again || again[i];
	if (k == 0)
		return 0;
	sqlite3_stmt *st = NULL;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = csd_prepare(cat, csd_sql_unupload, &st);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (again && !again[i])
			continue;
		if (again)
			csd_log_hash("may have been removed from BACKING by a reclaim on another node"
				     " since this node put it there: queued for upload again", cat,
				     hashes[i]);
		sqlite3_reset(st);
		csd_bind_hash(st, 1, hashes[i]);
		sqlite3_bind_int(st, 2, again != NULL);
		int src = csd_step(cat, st);
		bool enqueue = src == 1 && sqlite3_column_int(st, 0) != 0;
		rc = src < 0 ? src : 0;
		if (rc == 0 && src == 1)
			rc = csd_step(cat, st) < 0 ? -EIO : 0;
		if (rc == 0 && enqueue)
			rc = cat_bind(cat, U_ENQ_CHUNK, A_HASH(hashes[i]), A_INT(cat_now_ns()));
		if (rc == 0 && enqueue)
			rc = cat_run(cat, U_ENQ_CHUNK);
	}
	sqlite3_finalize(st);
	rc = cat_end(cat, rc);
	csd_again_note(cat, hashes, again, n, rc == 0);
	if (rc != 0)
		log_error("catalog %s: cannot mark %zu chunks as not on BACKING (%s): their cache"
			  " copies stay until a later eviction writes the mark", cat->path, k,
			  strerror(-rc));
	cat_unlock(cat);
	return rc;
}

/* S8, S16: after a marking in PostgreSQL that returned prc: the refused
 * ones (prc 0), or all of them (-ENOTCONN: the outcome unknown, any may
 * have been refused), are not on BACKING for this node. prc, or the local
 * step's failure. */
static int csd_upload_again_after(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN],
				  const bool *refused, size_t n, int prc)
{
	if (prc != 0 && prc != -ENOTCONN)
		return prc;
	if (prc == -ENOTCONN && n > 0)
		log_warn("catalog %s: whether PostgreSQL took the marking of %zu chunks as on BACKING"
			 " is unknown: a reclaim on another node may have removed their objects;"
			 " marked not on BACKING here and queued for upload again", cat->path, n);
	int rc = csd_upload_again(cat, hashes, prc == 0 ? refused : NULL, n);
	return prc ? prc : rc;
}

/* S16: the marks S16's set still lacks, tried again before an eviction. */
static void csd_again_retry(struct cat *cat)
{
	cat_lock(cat);
	struct csd_again_set *set = cat_shared_again(cat);
	size_t n = set->n;
	uint8_t(*hashes)[CAT_HASH_LEN] = n ? malloc(n * CAT_HASH_LEN) : NULL;
	if (hashes)
		memcpy(hashes, set->v, n * CAT_HASH_LEN);
	cat_unlock(cat);
	if (hashes)
		(void)csd_upload_again(cat, (const uint8_t(*)[CAT_HASH_LEN])hashes, NULL, n);
	free(hashes);
}

/* ---- S12: writers' hashes claimed with no PostgreSQL row ---- */

#define CSD_ABSENT_MAX 4096 /* more claims in flight are marked as before */

void csd_absent_free(struct csd_absent_set *set)
{
	free(set->v);
	set->v = NULL;
	set->n = set->cap = 0;
}

static struct csd_absent *csd_absent_find(struct csd_absent_set *set,
					  const uint8_t hash[CAT_HASH_LEN])
{
	for (size_t i = 0; i < set->n; i++)
		if (memcmp(set->v[i].hash, hash, CAT_HASH_LEN) == 0)
			return &set->v[i];
	return NULL;
}

static void csd_absent_drop(struct csd_absent_set *set, const uint8_t hash[CAT_HASH_LEN])
{
	struct csd_absent *a = csd_absent_find(set, hash);
	if (a)
		*a = set->v[--set->n];
}

/* hash claimed with no row when set->published was `published`; not
 * remembered without room (its marking then goes to PostgreSQL). */
static void csd_absent_put(struct csd_absent_set *set, const uint8_t hash[CAT_HASH_LEN],
			   uint64_t published)
{
	struct csd_absent *a = csd_absent_find(set, hash);
	if (!a && set->n == set->cap && set->cap < CSD_ABSENT_MAX) {
		size_t cap = set->cap ? 2 * set->cap : 64;
		struct csd_absent *v = realloc(set->v, cap * sizeof(*v));
		if (v) {
			set->v = v;
			set->cap = cap;
		}
	}
	if (!a && set->n < set->cap)
		a = &set->v[set->n++];
	if (a) {
		memcpy(a->hash, hash, CAT_HASH_LEN);
		a->published = published;
	}
	assert(set->n <= set->cap && set->cap <= CSD_ABSENT_MAX);
}

/* Whether hash's marking may stay local (S12): claimed with no row, no
 * publication's last read since, a writer here names it. Forgets it. */
static bool csd_absent_take(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], int64_t refs)
{
	struct csd_absent_set *set = cat_shared_absent(cat);
	const struct csd_absent *a = csd_absent_find(set, hash);
	bool local = a && a->published == set->published && refs > 0;
	csd_absent_drop(set, hash);
	return local;
}

/* ---- committed extents: PostgreSQL ---- */

int catsh_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out, int max)
{
	if (max < 0 || off > INT64_MAX)
		return -EINVAL;
	return max == 0 ? 0 : pgns_extents(cat_shared_ns(cat), ino, off, out, max);
}

int catsh_file_truncate(struct cat *cat, uint64_t ino, uint64_t new_size)
{
	if (new_size > INT64_MAX)
		return -EINVAL;
	return pgns_file_truncate(cat_shared_ns(cat), ino, new_size);
}

/* ---- a writer's pending extents: this node's SQLite (S1) ---- */

int catsh_pending_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out,
			  int max)
{
	if (max < 0 || off > INT64_MAX)
		return -EINVAL;
	if (max == 0)
		return 0;
	cat_lock(cat);
	int n = 0;
	int rc = cat_bind(cat, S_P_LIST, A_INT(ino), A_INT(off), A_INT((int64_t)max + 1));
	while (rc == 0 && n < max && (rc = cat_next(cat, S_P_LIST)) == 1) {
		sqlite3_stmt *st = cat->stmt[S_P_LIST];
		struct cat_extent *e = &out[n];
		e->off = (uint64_t)sqlite3_column_int64(st, 0);
		e->len = (uint64_t)sqlite3_column_int64(st, 1);
		e->chunk_off = (uint64_t)sqlite3_column_int64(st, 2);
		e->chunk_len = (uint64_t)sqlite3_column_int64(st, 3);
		rc = csd_col_hash(st, 4, e->hash) && sqlite3_column_type(st, 3) != SQLITE_NULL
			     ? 0 : -EIO;
		if (rc)
			log_error("catalog %s: corrupt: pending extent of inode %" PRIu64
				  " at %" PRIu64 " has no chunk row", cat->path, ino, e->off);
		if (rc == 0 && e->off + e->len > off)
			n++; /* else the extent before off ends at or before it */
	}
	cat_reset(cat, S_P_LIST);
	cat_unlock(cat);
	return rc < 0 ? rc : n;
}

/* S11: *none when the chunk's row, stored, has no copy in the cache (evicted,
 * or a continued file's chunk it never had): a writer naming it then stores
 * its bytes anew instead of leaning on pins taken for other writers. */
static int csd_no_copy_here(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], bool *none)
{
	int rc = cat_bind(cat, U_WHERE, A_HASH(hash));
	if (rc == 0)
		rc = cat_next(cat, U_WHERE);
	*none = rc == 1 && cat_col_int(cat, U_WHERE, 0) == 0;
	cat_reset(cat, U_WHERE);
	return rc < 0 ? rc : 0;
}

int catsh_pending_add(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
		      bool *must_store)
{
	if (!cat_extent_valid(ext))
		return -EINVAL;
	bool store = false;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_pending_insert_txn(cat, ino, ext, &store); /* the inode is PostgreSQL's */
	if (rc == 0 && !store)
		rc = csd_no_copy_here(cat, ext->hash, &store); /* S11 */
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	if (rc == 0)
		*must_store = store;
	return rc;
}

/* Drops ino's pending extents at or past size (catalog.c's truncation steps). */
static int csd_pending_cut_txn(struct cat *cat, uint64_t ino, uint64_t size)
{
	static const enum cat_sid steps[3] = { R_P_FROM_DROP, S_P_TRUNC_DELETE,
					       S_P_TRUNC_SHORTEN };
	int rc = 0;
	for (int i = 0; i < 3 && rc == 0; i++) {
		rc = cat_bind(cat, steps[i], A_INT(ino), A_INT(size));
		if (rc == 0)
			rc = cat_run(cat, steps[i]);
	}
	return rc;
}

int catsh_pending_cut(struct cat *cat, uint64_t ino, uint64_t new_size)
{
	if (new_size > INT64_MAX)
		return -EINVAL;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = csd_pending_cut_txn(cat, ino, new_size);
	rc = cat_end_sweep(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* The distinct hashes of ino's pending rows, malloc'd into *out. */
static int csd_pending_hashes(struct cat *cat, uint64_t ino, uint8_t (**out)[CAT_HASH_LEN],
			      size_t *n)
{
	*out = NULL;
	*n = 0;
	size_t cap = 0;
	sqlite3_stmt *st;
	int rc = csd_prepare(cat, csd_sql_pending_hashes, &st);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	while ((rc = csd_step(cat, st)) == 1) {
		if (*n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			uint8_t(*grown)[CAT_HASH_LEN] = realloc(*out, ncap * CAT_HASH_LEN);
			if (!grown) {
				rc = -ENOMEM;
				break;
			}
			*out = grown;
			cap = ncap;
		}
		*n += csd_col_hash(st, 0, (*out)[*n]);
	}
	sqlite3_finalize(st);
	return rc < 0 ? rc : 0;
}

/* S9: of hashes[0..*n), keeps (in place) those this node's upload claims
 * are of no more use for: no pending reference left, no upload queued. */
static int csd_claims_unused(struct cat *cat, uint8_t (*hashes)[CAT_HASH_LEN], size_t *n)
{
	sqlite3_stmt *st = NULL;
	int rc = csd_prepare(cat, csd_sql_claim_used, &st);
	size_t k = 0;
	for (size_t i = 0; rc == 0 && i < *n; i++) {
		sqlite3_reset(st);
		csd_bind_hash(st, 1, hashes[i]);
		int src = csd_step(cat, st);
		rc = src < 0 ? src : 0;
		if (src == 0)
			memmove(hashes[k++], hashes[i], CAT_HASH_LEN);
	}
	sqlite3_finalize(st);
	*n = rc ? 0 : k;
	return rc;
}

/* The writer's release: its pending rows, then its pins (S7) and the
 * claims of no more use (S9), in one round trip. A pin or claim left by a
 * failed unpin only keeps chunks from reclaim (or a claim row) until this
 * node is no longer live (pgns_unpin_lost), so it is logged, not returned. */
int catsh_pending_drop(struct cat *cat, uint64_t ino)
{
	uint8_t(*hashes)[CAT_HASH_LEN] = NULL;
	size_t n = 0;
	pthread_rwlock_rdlock(cat_shared_pins(cat)); /* S11: after an eviction's pins */
	cat_lock(cat);
	int hrc = csd_pending_hashes(cat, ino, &hashes, &n);
	cat_unlock(cat);
	int rc = catsh_pending_cut(cat, ino, 0);
	cat_lock(cat);
	if (hrc == 0 && rc == 0)
		hrc = csd_claims_unused(cat, hashes, &n);
	cat_unlock(cat);
	if (hrc || rc)
		n = 0; /* the claims stay: they go with the hash or the node (N7) */
	int urc = pgns_unpin_claims(cat_shared_ns(cat), ino,
				    (const uint8_t(*)[CAT_HASH_LEN])hashes, n);
	pthread_rwlock_unlock(cat_shared_pins(cat));
	if (urc)
		log_warn("catalog %s: cannot drop the pins of inode %" PRIu64 " (%s); they go"
			 " when this node leaves", cat->path, ino, strerror(-urc));
	free(hashes);
	return rc;
}

/* ---- a writer starting on an existing file ---- */

/* The file's committed extents, all of them, from PostgreSQL. */
static int csd_committed(struct cat *cat, uint64_t ino, struct cat_extent **out, size_t *n)
{
	struct cat_extent *all = NULL;
	size_t count = 0, cap = 0;
	uint64_t off = 0;
	int got;
	do {
		if (cap - count < CSD_EXTENTS_PAGE) {
			struct cat_extent *more = realloc(all, (cap + CSD_EXTENTS_PAGE) * sizeof(*all));
			if (!more) {
				free(all);
				return -ENOMEM;
			}
			all = more;
			cap += CSD_EXTENTS_PAGE;
		}
		got = pgns_extents(cat_shared_ns(cat), ino, off, all + count, CSD_EXTENTS_PAGE);
		if (got > 0) {
			count += (size_t)got;
			off = all[count - 1].off + all[count - 1].len;
		}
	} while (got == CSD_EXTENTS_PAGE);
	if (got < 0) {
		free(all);
		return got;
	}
	*out = all;
	*n = count;
	return 0;
}

/* What PostgreSQL records of each distinct chunk ext[0..n) names. */
static int csd_describe(struct cat *cat, uint64_t ino, const struct cat_extent *ext, size_t n,
			struct pgns_chunk_info **out, size_t *nout)
{
	struct pgns_chunk_info *info = calloc(n ? n : 1, sizeof(*info));
	if (!info)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = memcmp(info[j].chunk.hash, ext[i].hash, CAT_HASH_LEN) == 0;
		if (!seen)
			memcpy(info[k++].chunk.hash, ext[i].hash, CAT_HASH_LEN);
	}
	int rc = pgns_pin(cat_shared_ns(cat), ino, info, k); /* S7 */
	if (rc) {
		free(info);
		return rc;
	}
	*out = info;
	*nout = k;
	return 0;
}

static const struct pgns_chunk_info *csd_info_of(const struct pgns_chunk_info *info, size_t n,
						 const uint8_t hash[CAT_HASH_LEN])
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(info[i].chunk.hash, hash, CAT_HASH_LEN) == 0)
			return &info[i];
	return NULL;
}

/* One committed extent becomes a pending row with its reference. A hash
 * PostgreSQL no longer has live (a commit elsewhere replaced the file since
 * the extents were read, and a reclaim took it: S7) gets a row with no
 * object: the commit refuses it (invariant 2) unless the writer rewrites
 * that range. */
static int csd_take_committed(struct cat *cat, sqlite3_stmt *take, uint64_t ino,
			      const struct cat_extent *e, const struct pgns_chunk_info *info)
{
	if (info && !info->live)
		info = NULL;
	sqlite3_reset(take);
	csd_bind_hash(take, 1, e->hash);
	sqlite3_bind_int64(take, 2, (int64_t)e->chunk_len);
	sqlite3_bind_int(take, 3, info && info->found ? info->chunk.codec : 0);
	if (info && info->found)
		sqlite3_bind_int64(take, 4, (int64_t)info->chunk.stored_len);
	else
		sqlite3_bind_null(take, 4);
	bool uploaded = info && info->found && info->uploaded;
	sqlite3_bind_int(take, 5, uploaded);
	int rc = csd_step(cat, take);
	if (uploaded) /* a dirty row of this node may learn it is on BACKING: S15 */
		cat->uploaded_unsynced = true;
	if (rc == 0)
		rc = cat_bind(cat, S_P_INSERT, A_INT(ino), A_INT(e->off), A_INT(e->len),
			      A_HASH(e->hash), A_INT(e->chunk_off));
	return rc == 0 ? cat_run(cat, S_P_INSERT) : rc < 0 ? rc : -EIO;
}

int catsh_pending_from_committed(struct cat *cat, uint64_t ino)
{
	struct cat_extent *ext = NULL;
	struct pgns_chunk_info *info = NULL;
	size_t n = 0, ninfo = 0;
	int rc = csd_committed(cat, ino, &ext, &n);
	if (rc == 0)
		rc = csd_describe(cat, ino, ext, n, &info, &ninfo);
	sqlite3_stmt *take = NULL;
	cat_lock(cat);
	if (rc == 0)
		rc = csd_prepare(cat, csd_sql_take_committed, &take);
	if (rc == 0)
		rc = cat_begin(cat);
	if (rc == 0) /* pending becomes the committed extents: drop what it had */
		rc = csd_pending_cut_txn(cat, ino, 0);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = csd_take_committed(cat, take, ino, &ext[i], csd_info_of(info, ninfo, ext[i].hash));
	sqlite3_finalize(take);
	rc = cat_end_sweep(cat, rc);
	cat_unlock(cat);
	free(info);
	free(ext);
	return rc;
}

/* ---- cat_file_commit: publish (S2) ---- */

struct csd_publish {
	struct cat_extent *ext;
	size_t n, cap;
	struct pgns_chunk *chunks;   /* distinct */
	size_t nchunks;
	uint8_t (*uploaded)[CAT_HASH_LEN]; /* chunks this node knows are on BACKING */
	size_t nuploaded;
	bool *listed;                   /* chunks[i] is in uploaded (S5) */
	struct pgns_chunk_info *absent; /* chunks this node holds no object of (S7) */
	size_t nabsent;
};

static void csd_publish_free(struct csd_publish *p)
{
	free(p->ext);
	free(p->chunks);
	free(p->uploaded);
	free(p->absent);
	free(p->listed);
}

static int csd_publish_grow(struct csd_publish *p)
{
	if (p->n < p->cap)
		return 0;
	size_t cap = p->cap ? 2 * p->cap : 64;
	struct cat_extent *e = realloc(p->ext, cap * sizeof(*e));
	if (e)
		p->ext = e;
	struct pgns_chunk *c = e ? realloc(p->chunks, cap * sizeof(*c)) : NULL;
	if (c)
		p->chunks = c;
	uint8_t(*u)[CAT_HASH_LEN] = c ? realloc(p->uploaded, cap * CAT_HASH_LEN) : NULL;
	if (u)
		p->uploaded = u;
	struct pgns_chunk_info *a = u ? realloc(p->absent, cap * sizeof(*a)) : NULL;
	if (a)
		p->absent = a;
	bool *l = a ? realloc(p->listed, cap * sizeof(*l)) : NULL;
	if (l)
		p->listed = l;
	if (!l)
		return -ENOMEM;
	p->cap = cap;
	return 0;
}

/* Adds one pending row (statement st at a row) to the publication. */
static int csd_publish_row(struct cat *cat, uint64_t ino, sqlite3_stmt *st, struct csd_publish *p)
{
	int rc = csd_publish_grow(p);
	if (rc)
		return rc;
	struct cat_extent *e = &p->ext[p->n];
	e->off = (uint64_t)sqlite3_column_int64(st, 0);
	e->len = (uint64_t)sqlite3_column_int64(st, 1);
	e->chunk_off = (uint64_t)sqlite3_column_int64(st, 2);
	e->chunk_len = (uint64_t)sqlite3_column_int64(st, 3);
	if (!csd_col_hash(st, 4, e->hash))
		return -EIO;
	if (sqlite3_column_type(st, 6) == SQLITE_NULL) { /* invariant 2 */
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(e->hash, hex);
		log_error("catalog %s: cannot commit inode %" PRIu64 ": chunk %s at offset %" PRIu64
			  " is not stored", cat->path, ino, hex, e->off);
		return -EIO;
	}
	p->n++;
	for (size_t j = 0; j < p->nchunks; j++)
		if (memcmp(p->chunks[j].hash, e->hash, CAT_HASH_LEN) == 0)
			return 0;
	struct pgns_chunk *c = &p->chunks[p->nchunks++];
	memcpy(c->hash, e->hash, CAT_HASH_LEN);
	c->plain_len = e->chunk_len;
	c->codec = (uint8_t)sqlite3_column_int(st, 5);
	c->stored_len = (uint64_t)sqlite3_column_int64(st, 6);
	p->listed[p->nchunks - 1] = sqlite3_column_int(st, 7);
	if (sqlite3_column_int(st, 7)) /* S5: put on BACKING before PostgreSQL knew it */
		memcpy(p->uploaded[p->nuploaded++], e->hash, CAT_HASH_LEN);
	if (!sqlite3_column_int(st, 8)) /* S7: no object here (never had, or evicted: S11) */
		memcpy(p->absent[p->nabsent++].chunk.hash, e->hash, CAT_HASH_LEN);
	return 0;
}

/* S7: every chunk this node holds no object of (taken from committed
 * extents, or its copy evicted under S11's pins) must still be live
 * in PostgreSQL, else the commit would name an object nobody has. One round
 * trip, and none for a file whose chunks are all in the cache. */
static int csd_publish_check(struct cat *cat, uint64_t ino, struct csd_publish *p)
{
	if (p->nabsent == 0)
		return 0;
	int rc = pgns_chunks_info(cat_shared_ns(cat), p->absent, p->nabsent);
	for (size_t i = 0; rc == 0 && i < p->nabsent; i++) {
		if (p->absent[i].found && p->absent[i].live)
			continue;
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(p->absent[i].chunk.hash, hex);
		log_error("catalog %s: cannot commit inode %" PRIu64 ": chunk %s is %s in the shared"
			  " catalog and this node holds no copy of it", cat->path, ino, hex,
			  p->absent[i].found ? "being reclaimed" : "gone");
		rc = -EIO;
	}
	return rc;
}

/* Reads ino's pending extents and their chunks; under the lock. */
static int csd_publish_read(struct cat *cat, uint64_t ino, uint64_t size, struct csd_publish *p)
{
	sqlite3_stmt *st;
	int rc = csd_prepare(cat, csd_sql_pending_all, &st);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	while (rc == 0 && (rc = csd_step(cat, st)) == 1)
		rc = csd_publish_row(cat, ino, st, p);
	sqlite3_finalize(st);
	if (rc == 0 && p->n > 0 && p->ext[p->n - 1].off + p->ext[p->n - 1].len > size) {
		log_error("catalog %s: cannot commit inode %" PRIu64 " at size %" PRIu64
			  ": its pending extents reach %" PRIu64, cat->path, ino, size,
			  p->ext[p->n - 1].off + p->ext[p->n - 1].len);
		rc = -EINVAL;
	}
	return rc;
}

/* This node's catalog durable now (catalog.c's cat_sync, which the shared
 * engine answers from PostgreSQL): its chunk rows and upload rows outlive a
 * crash of the machine before PostgreSQL names the chunks. */
static int csd_local_sync(struct cat *cat)
{
	int rc = cat_sync_locked(cat);
	if (rc != 0)
		log_error("catalog %s: cannot make the catalog durable: %s", cat->path,
			  strerror(-rc));
	return rc;
}

/* S5: chunks of the publication whose upload finished after the commit
 * read the local rows (marked there since, but not in PostgreSQL, which
 * lacked them then): marked now, in one round trip if there are any
 * (p->absent, read by the S7 check already, holds their hashes). */
static int csd_publish_late(struct cat *cat, struct csd_publish *p)
{
	sqlite3_stmt *st = NULL;
	size_t k = 0;
	cat_lock(cat);
	cat_shared_absent(cat)->published++; /* S12: this read, under this hold */
	int rc = csd_prepare(cat, "SELECT uploaded FROM chunks WHERE hash = ?1", &st);
	for (size_t i = 0; rc == 0 && i < p->nchunks; i++) {
		if (p->listed[i])
			continue;
		sqlite3_reset(st);
		csd_bind_hash(st, 1, p->chunks[i].hash);
		int src = csd_step(cat, st);
		if (src < 0)
			rc = src;
		else if (src == 1 && sqlite3_column_int(st, 0))
			memcpy(p->absent[k++].chunk.hash, p->chunks[i].hash, CAT_HASH_LEN);
	}
	sqlite3_finalize(st);
	cat_unlock(cat);
	if (rc || k == 0)
		return rc;
	uint8_t(*hashes)[CAT_HASH_LEN] = calloc(k, CAT_HASH_LEN);
	bool *marked = calloc(k, sizeof(*marked));
	bool *refused = calloc(k, sizeof(*refused));
	rc = hashes && marked && refused ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < k; i++)
		memcpy(hashes[i], p->absent[i].chunk.hash, CAT_HASH_LEN);
	if (rc == 0) {
		rc = pgns_chunks_uploaded(cat_shared_ns(cat), (const uint8_t(*)[CAT_HASH_LEN])hashes, k,
					  marked, refused);
		rc = csd_upload_again_after(cat, (const uint8_t(*)[CAT_HASH_LEN])hashes, refused, k,
					    rc); /* S8, S16 */
	}
	free(hashes);
	free(marked);
	free(refused);
	return rc;
}

int catsh_file_commit(struct cat *cat, uint64_t ino, uint64_t size, int64_t mtime_ns,
		      bool durable)
{
	if (size > INT64_MAX)
		return -EINVAL;
	struct csd_publish p = { 0 };
	cat_lock(cat);
	int rc = durable ? csd_local_sync(cat) : 0;
	if (rc == 0)
		rc = cat_begin_read(cat);
	if (rc == 0)
		rc = csd_publish_read(cat, ino, size, &p);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	/* The writer of ino is the only one changing its pending rows, and it
	 * waits for this call: nothing read above moves while PostgreSQL runs. */
	if (rc == 0)
		rc = csd_publish_check(cat, ino, &p);
	bool *refused = rc == 0 ? calloc(p.nuploaded ? p.nuploaded : 1, sizeof(*refused)) : NULL;
	if (rc == 0 && !refused)
		rc = -ENOMEM;
	bool tried = rc == 0;
	if (tried)
		rc = pgns_file_publish(cat_shared_ns(cat), ino, size, mtime_ns, p.ext, p.n,
				       p.chunks, p.nchunks, (const uint8_t(*)[CAT_HASH_LEN])p.uploaded,
				       p.nuploaded, refused);
	/* S12: unknown, it may have published */
	bool published = tried && (rc == 0 || rc == -ENOTCONN);
	if (published) /* S8, S16 */
		rc = csd_upload_again_after(cat, (const uint8_t(*)[CAT_HASH_LEN])p.uploaded,
					    refused, p.nuploaded, rc);
	free(refused);
	if (published) { /* S5, S12: whatever the step before gave, once published */
		int lrc = csd_publish_late(cat, &p);
		rc = rc ? rc : lrc;
	}
	csd_publish_free(&p);
	return rc;
}

/* ---- the local sweep (S3) ---- */

/* Deletes one zero-count row; reclaim: remove its cache object first. */
static int csd_sweep_one(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], bool reclaim,
			 uint64_t *kept)
{
	int rrc = reclaim && cat->reclaim ? cat->reclaim(cat->reclaim_arg, hash) : 0;
	if (rrc != 0) {
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(hash, hex);
		log_warn("catalog %s: chunk %s has no references but removing it from the cache"
			 " failed (%s); keeping it for a later sweep",
			 cat->path, hex, strerror(rrc < 0 ? -rrc : rrc));
		(*kept)++;
		return 0;
	}
	int rc = cat_bind(cat, S_GARBAGE_DELETE, A_HASH(hash));
	return rc == 0 ? cat_run(cat, S_GARBAGE_DELETE) : rc;
}

/* Lists the next batch after `after`; returns how many, or a negative errno. */
static int csd_sweep_list(struct cat *cat, const uint8_t *after, int after_len,
			  uint8_t (*batch)[CAT_HASH_LEN], bool *uploaded)
{
	sqlite3_stmt *st;
	int rc = csd_prepare(cat, csd_sql_garbage, &st);
	if (rc)
		return rc;
	sqlite3_bind_blob(st, 1, after, after_len, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, CSD_SWEEP_BATCH);
	int n = 0;
	while ((rc = csd_step(cat, st)) == 1 && n < CSD_SWEEP_BATCH) {
		uploaded[n] = sqlite3_column_int(st, 1) != 0;
		n += csd_col_hash(st, 0, batch[n]);
	}
	sqlite3_finalize(st);
	return rc < 0 ? rc : n;
}

int catsh_sweep(struct cat *cat)
{
	uint8_t batch[CSD_SWEEP_BATCH][CAT_HASH_LEN];
	bool uploaded[CSD_SWEEP_BATCH];
	uint8_t after[CAT_HASH_LEN] = { 0 };
	int after_len = 0; /* the empty blob sorts before every hash */
	uint64_t kept = 0;
	int n, rc;
	do {
		n = rc = csd_sweep_list(cat, after, after_len, batch, uploaded);
		if (n <= 0)
			break;
		rc = cat_begin(cat);
		for (int i = 0; i < n && rc == 0; i++) /* S3: uploaded and not cached: no callback */
			rc = csd_sweep_one(cat, batch[i], !uploaded[i], &kept);
		rc = cat_end(cat, rc);
		memcpy(after, batch[n - 1], CAT_HASH_LEN);
		after_len = CAT_HASH_LEN;
	} while (rc == 0 && n == CSD_SWEEP_BATCH);
	if (rc < 0)
		log_warn("catalog %s: sweep of unreferenced chunks stopped early; the next one"
			 " finishes it", cat->path);
	return rc < 0 ? rc : 0;
}

/* ---- the upload queue (S4, S5) ---- */

/* This node's pending references of each chunk row's hash (refs[i] 0 for
 * a row of another kind), read under the catalog lock, and the count of
 * publications' last reads then (S12). */
static int csd_local_refs(struct cat *cat, const struct cat_upload *rows, size_t n, int64_t *refs,
			  uint64_t *published)
{
	int rc = 0;
	cat_lock(cat);
	*published = cat_shared_absent(cat)->published;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		bool stored;
		refs[i] = 0;
		if (rows[i].kind == UP_CHUNK)
			rc = csd_local_row(cat, rows[i].hash, &refs[i], &stored);
	}
	cat_unlock(cat);
	return rc;
}

/* S4 for one chunk row, from its claim's answer. */
static void csd_ready_of(int64_t refs, const struct pgns_claim *c, bool *ready, bool *stale)
{
	*ready = true;
	*stale = false;
	if (refs > 0) /* a local writer references it */
		return;
	if (!c->found || c->row.uploaded || strcmp(c->row.state, "live") != 0) {
		*stale = true; /* unpublished, reclaimed, or on BACKING already: moot */
		*ready = false;
	}
}

/* S12: which of the claimed hashes[0..k) a writer here names and
 * PostgreSQL has no row of, as of `published`; the others forgotten. */
static void csd_absent_note(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN],
			    const bool *writer, const struct pgns_claim *claims, size_t k,
			    uint64_t published)
{
	cat_lock(cat);
	struct csd_absent_set *set = cat_shared_absent(cat);
	for (size_t j = 0; j < k; j++) {
		if (writer[j] && !claims[j].found)
			csd_absent_put(set, hashes[j], published);
		else
			csd_absent_drop(set, hashes[j]);
	}
	cat_unlock(cat);
}

/* S8: the claims of all the chunk rows in one round trip (pgns_upload_claims);
 * rows of other kinds are asked one by one, as cat_upload_ready. */
int catsh_upload_ready_many(struct cat *cat, const struct cat_upload *rows, size_t n, bool *ready,
			    bool *stale)
{
	size_t m = n ? n : 1;
	int64_t *refs = calloc(m, sizeof(*refs));
	uint8_t(*hashes)[CAT_HASH_LEN] = calloc(m, CAT_HASH_LEN);
	bool *writer = calloc(m, sizeof(*writer));
	struct pgns_claim *claims = calloc(m, sizeof(*claims));
	size_t *at = calloc(m, sizeof(*at));
	int rc = refs && hashes && writer && claims && at ? 0 : -ENOMEM;
	uint64_t published = 0;
	if (rc == 0)
		rc = csd_local_refs(cat, rows, n, refs, &published);
	size_t k = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (rows[i].kind != UP_CHUNK) {
			rc = cat_upload_ready(cat, &rows[i], &ready[i], &stale[i]);
			continue;
		}
		memcpy(hashes[k], rows[i].hash, CAT_HASH_LEN);
		writer[k] = refs[i] > 0;
		at[k++] = i;
	}
	if (rc == 0) /* S8: claimed before the objects are written */
		rc = pgns_upload_claims(cat_shared_ns(cat), (const uint8_t(*)[CAT_HASH_LEN])hashes,
					writer, k, claims);
	for (size_t j = 0; rc == 0 && j < k; j++)
		csd_ready_of(refs[at[j]], &claims[j], &ready[at[j]], &stale[at[j]]);
	if (rc == 0 && k > 0)
		csd_absent_note(cat, (const uint8_t(*)[CAT_HASH_LEN])hashes, writer, claims, k,
				published);
	free(refs);
	free(hashes);
	free(writer);
	free(claims);
	free(at);
	return rc;
}

int catsh_upload_ready(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale)
{
	assert(u->kind == UP_CHUNK);
	return catsh_upload_ready_many(cat, u, 1, ready, stale);
}

/* The local half of catalog upload.c's cat_upload_done for one row; the
 * chunk is marked uploaded only when mark. */
static int csd_done_txn(struct cat *cat, const struct cat_upload *u, bool mark)
{
	assert(cat->in_txn && u->seq != 0);
	int rc = cat_bind(cat, U_ROW_DELETE, A_INT(u->seq));
	if (rc == 0)
		rc = cat_run(cat, U_ROW_DELETE);
	if (rc == 0 && mark) {
		rc = cat_bind(cat, U_CHUNK_UPLOADED, A_HASH(u->hash));
		if (rc == 0)
			rc = cat_run(cat, U_CHUNK_UPLOADED);
		cat->uploaded_unsynced = true; /* catalog.c invariant 12, S15 */
	}
	if (rc == 0 && u->kind == UP_GEN_MANIFEST) {
		rc = cat_bind(cat, U_GEN_DURABLE_SET, A_INT(u->gen), A_INT(u->version));
		if (rc == 0)
			rc = cat_run(cat, U_GEN_DURABLE_SET);
	}
	return rc;
}

/* S5: which chunk rows of rows[0..n) to mark uploaded locally, after
 * PostgreSQL was told (one round trip for the batch, none if S12 keeps
 * every marking local). Only a row whose object is written was uploaded:
 * an upload found moot (its row gone, or a writer storing it anew) marks
 * nothing, here as in upload.c. *published: the count of publications'
 * last reads before the marking (S12). */
static int csd_done_marks(struct cat *cat, const struct cat_upload *rows, size_t n, bool *mark,
			  bool *early, bool *again, uint64_t *published)
{
	uint8_t(*hashes)[CAT_HASH_LEN] = calloc(n ? n : 1, CAT_HASH_LEN);
	bool *marked = calloc(n ? n : 1, sizeof(*marked));
	bool *refused = calloc(n ? n : 1, sizeof(*refused));
	size_t *at = calloc(n ? n : 1, sizeof(*at));
	int64_t *refs = calloc(n ? n : 1, sizeof(*refs));
	int rc = hashes && marked && refused && at && refs ? 0 : -ENOMEM;
	size_t k = 0;
	cat_lock(cat);
	*published = cat_shared_absent(cat)->published;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		bool stored = false;
		mark[i] = early[i] = again[i] = false;
		bool local = false;
		if (rows[i].kind == UP_CHUNK)
			rc = csd_local_row(cat, rows[i].hash, &refs[k], &stored);
		if (rc == 0 && rows[i].kind == UP_CHUNK)
			local = csd_absent_take(cat, rows[i].hash, refs[k]);
		if (rc == 0 && stored && local) {
			mark[i] = early[i] = true; /* S12: its commit tells PostgreSQL */
			continue;
		}
		if (rc == 0 && stored) {
			memcpy(hashes[k], rows[i].hash, CAT_HASH_LEN);
			at[k++] = i;
		}
	}
	cat_unlock(cat);
	if (rc == 0 && k > 0)
		rc = pgns_chunks_uploaded(cat_shared_ns(cat), (const uint8_t(*)[CAT_HASH_LEN])hashes,
					  k, marked, refused);
	for (size_t j = 0; rc == 0 && j < k; j++) {
		if (refused[j]) { /* S8: put again, nothing marked */
			again[at[j]] = true;
			continue;
		}
		mark[at[j]] = marked[j] || refs[j] > 0; /* a writer's: its commit tells (S2) */
		early[at[j]] = !marked[j] && refs[j] > 0;
		if (!marked[j])
			csd_log_hash(refs[j] > 0 ? "is on BACKING before its file's commit published it"
						 : "is not in the shared store (never published, or"
						   " reclaimed meanwhile): not marked uploaded",
				     cat, hashes[j]);
	}
	free(hashes);
	free(marked);
	free(refused);
	free(at);
	free(refs);
	return rc;
}

/* S5: a writer's chunk uploaded before its commit published it, now
 * marked locally: told to PostgreSQL once more, in case the commit read
 * the local row before the mark and published in between (the commit's
 * own re-check, csd_publish_late, covers a publication after this). */
static int csd_done_late(struct cat *cat, const struct cat_upload *rows, size_t n,
			 const bool *early)
{
	uint8_t(*hashes)[CAT_HASH_LEN] = NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!early[i])
			continue;
		if (!hashes && !(hashes = calloc(n, CAT_HASH_LEN)))
			return -ENOMEM;
		memcpy(hashes[k++], rows[i].hash, CAT_HASH_LEN);
	}
	bool *marked = k ? calloc(k, sizeof(*marked)) : NULL;
	bool *refused = k ? calloc(k, sizeof(*refused)) : NULL;
	int rc = k == 0 ? 0 : marked && refused ? pgns_chunks_uploaded(cat_shared_ns(cat),
			(const uint8_t(*)[CAT_HASH_LEN])hashes, k, marked, refused) : -ENOMEM;
	if (k > 0) /* S8, S16 */
		rc = csd_upload_again_after(cat, (const uint8_t(*)[CAT_HASH_LEN])hashes, refused, k,
					    rc);
	free(marked);
	free(refused);
	free(hashes);
	return rc;
}

int catsh_upload_done_many(struct cat *cat, const struct cat_upload *rows, size_t n)
{
	bool *mark = calloc(n ? n : 1, sizeof(*mark));
	bool *early = calloc(n ? n : 1, sizeof(*early));
	bool *again = calloc(n ? n : 1, sizeof(*again));
	uint64_t published = 0;
	int rc = mark && early && again
			 ? csd_done_marks(cat, rows, n, mark, early, again, &published)
			 : -ENOMEM;
	cat_lock(cat);
	if (rc == 0)
		rc = cat_begin(cat);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = csd_done_txn(cat, &rows[i], mark[i]);
	rc = cat_end(cat, rc);
	/* S12: no publication read the local rows between the marking and the
	 * local mark: each one saw the marking or reads the mark */
	bool unread = cat_shared_absent(cat)->published == published;
	cat_unlock(cat);
	for (size_t i = 0; rc == 0 && unread && i < n; i++)
		early[i] = false;
	if (rc == 0)
		rc = csd_done_late(cat, rows, n, early);
	for (size_t i = 0; rc == 0 && i < n; i++) /* S8: its row deleted above, queued anew */
		if (again[i])
			rc = csd_upload_again(cat, (const uint8_t(*)[CAT_HASH_LEN])rows[i].hash,
					      &again[i], 1);
	free(mark);
	free(early);
	free(again);
	return rc;
}

/* U7 (upload.h): rows[0..n) found moot, nothing put. They end marking
 * nothing but this: a chunk row whose local row has its object is marked
 * uploaded locally where PostgreSQL says the object is on BACKING and live
 * (one read for the batch, none if no such row), so a copy another node
 * uploaded is not left dirty here with no upload queued (S5). */
int catsh_upload_moot_many(struct cat *cat, const struct cat_upload *rows, size_t n)
{
	struct pgns_chunk_info *io = calloc(n ? n : 1, sizeof(*io));
	size_t *at = calloc(n ? n : 1, sizeof(*at));
	bool *mark = calloc(n ? n : 1, sizeof(*mark));
	int rc = io && at && mark ? 0 : -ENOMEM;
	size_t k = 0;
	cat_lock(cat);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		int64_t refs = 0;
		bool stored = false;
		if (rows[i].kind == UP_CHUNK)
			rc = csd_local_row(cat, rows[i].hash, &refs, &stored);
		if (rc == 0 && stored) {
			memcpy(io[k].chunk.hash, rows[i].hash, CAT_HASH_LEN);
			at[k++] = i;
		}
	}
	cat_unlock(cat);
	if (rc == 0 && k > 0)
		rc = pgns_chunks_info(cat_shared_ns(cat), io, k);
	for (size_t j = 0; rc == 0 && j < k; j++)
		mark[at[j]] = io[j].found && io[j].uploaded && io[j].live;
	cat_lock(cat);
	if (rc == 0)
		rc = cat_begin(cat);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = cat_bind(cat, U_ROW_DELETE, A_INT(rows[i].seq));
		if (rc == 0)
			rc = cat_run(cat, U_ROW_DELETE);
		if (rc == 0 && mark[i])
			rc = cat_bind(cat, U_CHUNK_UPLOADED, A_HASH(rows[i].hash));
		if (rc == 0 && mark[i])
			rc = cat_run(cat, U_CHUNK_UPLOADED);
		if (mark[i])
			cat->uploaded_unsynced = true; /* catalog.c invariant 12, S15 */
	}
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	free(io);
	free(at);
	free(mark);
	return rc;
}

/* ---- chunk locations (S6) ---- */

/* The local row, if it says where the bytes are. */
static int csd_where_local(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			   struct cat_chunk_where *out)
{
	int rc = cat_bind(cat, U_WHERE, A_HASH(hash));
	if (rc == 0)
		rc = cat_next(cat, U_WHERE);
	if (rc == 1) {
		cat_where_row(cat, out);
		rc = out->cached || out->uploaded ? 0 : -ENOENT;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, U_WHERE);
	return rc;
}

int catsh_chunk_where(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
		      struct cat_chunk_where *out)
{
	bool writing = false;
	cat_lock(cat);
	int rc = csd_where_local(cat, hash, out);
	if (rc == -ENOENT) {
		int64_t refs = 0;
		bool stored = false;
		int lrc = csd_local_row(cat, hash, &refs, &stored);
		writing = lrc == 0 && refs > 0 && !stored;
		rc = lrc ? lrc : -ENOENT;
	}
	cat_unlock(cat);
	if (rc != -ENOENT || writing)
		return rc; /* the local answer; a writer storing it has no object yet, as alone */
	struct pgns_chunk_row row;
	bool holder_live = false;
	rc = pgns_chunk_get_holder(cat_shared_ns(cat), hash, &row, &holder_live);
	if (rc == 0 && strcmp(row.state, "live") != 0)
		rc = -ENOENT; /* being reclaimed: no file names it */
	if (rc == 0 && !row.uploaded && !holder_live) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(hash, hex);
		log_warn("chunk %s: its only copy is in the cache of node %" PRIu64 ", which is no"
			 " longer live (its lease ran out): not waited for (a mount of that cache"
			 " brings it back)", hex, row.holder);
		rc = -ENOENT;
	}
	if (rc == 0 && !row.uploaded)
		rc = -EAGAIN; /* its live holder's cache has the only copy */
	if (rc == 0)
		*out = (struct cat_chunk_where){ .cached = false, .uploaded = true,
						 .codec = row.codec, .plain_len = row.plain_len,
						 .stored_len = row.stored_len, .refcount = 0 };
	return rc;
}

/* S14: the local row first (this node's own upload, or the references of
 * this node's writers), then PostgreSQL's row. */
int catsh_chunk_lost(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	struct cat_chunk_where local = { 0 }; /* no row: neither uploaded nor named */
	int64_t refs = 0;
	bool stored = false;
	cat_lock(cat);
	int rc = csd_where_local(cat, hash, &local); /* a row with its object: its fields */
	if (rc == 0 || rc == -ENOENT) /* refs also of a row a writer is storing */
		rc = csd_local_row(cat, hash, &refs, &stored);
	cat_unlock(cat);
	if (rc != 0)
		return rc;
	if (local.uploaded)
		return 0;
	struct pgns_chunk_row row;
	bool holder_live = false;
	rc = pgns_chunk_get_holder(cat_shared_ns(cat), hash, &row, &holder_live);
	if (rc == -ENOENT)
		return refs > 0; /* named by a writer here alone */
	if (rc != 0)
		return rc;
	bool live = strcmp(row.state, "live") == 0;
	if (live && row.uploaded)
		return 0;
	if (live && holder_live && row.holder != cat_node_id(cat))
		return 0; /* another live node's cache holds it, to upload */
	return refs > 0 || (live && row.refcount > 0);
}

/* A copy fetched from BACKING for a hash this node has no row of: the row,
 * from PostgreSQL's description. */
static int csd_fetched_new(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	struct pgns_chunk_row row;
	int rc = pgns_chunk_get(cat_shared_ns(cat), hash, &row);
	if (rc == 0 && (!row.uploaded || strcmp(row.state, "live") != 0))
		rc = -ENOENT;
	sqlite3_stmt *st = NULL;
	cat_lock(cat);
	if (rc == 0)
		rc = csd_prepare(cat, csd_sql_fetched_new, &st);
	if (rc == 0) {
		csd_bind_hash(st, 1, hash);
		sqlite3_bind_int64(st, 2, (int64_t)row.plain_len);
		sqlite3_bind_int(st, 3, row.codec);
		sqlite3_bind_int64(st, 4, (int64_t)row.stored_len);
		rc = csd_step(cat, st);
		/* a row that appeared meanwhile is a writer's: left to it */
		if (rc == 0 && sqlite3_changes(cat->db) == 0)
			rc = -ENOENT;
	}
	sqlite3_finalize(st);
	cat_unlock(cat);
	return rc;
}

int catsh_chunk_fetched(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	cat_lock(cat);
	int changed = 0;
	sqlite3_stmt *st; /* fetched from BACKING: on BACKING too */
	int rc = csd_prepare(cat, csd_sql_fetched, &st);
	if (rc == 0) {
		csd_bind_hash(st, 1, hash);
		rc = csd_step(cat, st);
		changed = sqlite3_changes(cat->db);
		sqlite3_finalize(st);
	}
	bool exists = false;
	if (rc == 0 && changed == 0) {
		rc = cat_bind(cat, S_CHUNK_EXISTS, A_HASH(hash));
		if (rc == 0)
			rc = cat_next(cat, S_CHUNK_EXISTS);
		exists = rc == 1;
		rc = rc < 0 ? rc : 0;
		cat_reset(cat, S_CHUNK_EXISTS);
	}
	cat_unlock(cat);
	if (rc == 0 && changed == 0)
		rc = !exists ? csd_fetched_new(cat, hash) : -ENOENT;
	return rc;
}

/* S17: the row of a chunk taken back, and its upload queued. */
static int csd_take_back_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			     uint8_t codec, uint64_t stored_len)
{
	sqlite3_stmt *row = NULL, *queue = NULL;
	int rc = csd_prepare(cat, csd_sql_take_back, &row);
	if (rc == 0)
		rc = csd_prepare(cat, csd_sql_take_back_queue, &queue);
	if (rc == 0) {
		csd_bind_hash(row, 1, hash);
		sqlite3_bind_int64(row, 2, (sqlite3_int64)plain_len);
		sqlite3_bind_int(row, 3, codec);
		sqlite3_bind_int64(row, 4, (sqlite3_int64)stored_len);
		rc = csd_step(cat, row) < 0 ? -EIO : 0;
	}
	if (rc == 0) {
		csd_bind_hash(queue, 1, hash);
		sqlite3_bind_int64(queue, 2, cat_now_ns());
		rc = csd_step(cat, queue) < 0 ? -EIO : 0;
	}
	sqlite3_finalize(row);
	sqlite3_finalize(queue);
	return rc;
}

int catshd_take_back(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
		     uint8_t codec, uint64_t stored_len)
{
	if (plain_len > INT64_MAX || stored_len > INT64_MAX)
		return -EINVAL;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = csd_take_back_txn(cat, hash, plain_len, codec, stored_len);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int catsh_file_uploaded(struct cat *cat, uint64_t ino, bool *uploaded)
{
	return pgns_file_uploaded(cat_shared_ns(cat), ino, uploaded);
}

/* ---- evictions (S11) ---- */

/* The writers naming a clean cached chunk, with its description. */
static const char csd_sql_evict_refs[] =
	"SELECT DISTINCT p.ino, c.plain_len, c.codec, c.stored_len FROM pending p JOIN chunks c"
	" ON c.hash = p.hash WHERE p.hash = ?1 AND c.cached = 1 AND c.uploaded = 1"
	" AND c.stored_len IS NOT NULL";
static const char csd_sql_writers[] = "SELECT DISTINCT ino FROM pending WHERE hash = ?1";

/* The pins an eviction needs: refs[k] for hashes[at[k]]. */
struct csd_evict {
	struct pgns_pin_ref *refs;
	size_t *at;
	bool *pinned;
	size_t n, cap;
};

static void csd_evict_free(struct csd_evict *e)
{
	free(e->refs);
	free(e->at);
	free(e->pinned);
}

static int csd_evict_grow(struct csd_evict *e)
{
	if (e->n < e->cap)
		return 0;
	size_t cap = e->cap ? 2 * e->cap : 16;
	struct pgns_pin_ref *r = realloc(e->refs, cap * sizeof(*r));
	if (r)
		e->refs = r;
	size_t *at = r ? realloc(e->at, cap * sizeof(*at)) : NULL;
	if (at)
		e->at = at;
	bool *p = at ? realloc(e->pinned, cap * sizeof(*p)) : NULL;
	if (p)
		e->pinned = p;
	if (!p)
		return -ENOMEM;
	e->cap = cap;
	return 0;
}

/* The writers of this node naming each of hashes[0..n), under the lock. */
static int csd_evict_refs(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
			  struct csd_evict *e)
{
	sqlite3_stmt *st = NULL;
	cat_lock(cat);
	int rc = csd_prepare(cat, csd_sql_evict_refs, &st);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		sqlite3_reset(st);
		csd_bind_hash(st, 1, hashes[i]);
		int src;
		while (rc == 0 && (src = csd_step(cat, st)) == 1 && (rc = csd_evict_grow(e)) == 0) {
			struct pgns_pin_ref *r = &e->refs[e->n];
			r->ino = (uint64_t)sqlite3_column_int64(st, 0);
			memcpy(r->chunk.hash, hashes[i], CAT_HASH_LEN);
			r->chunk.plain_len = (uint64_t)sqlite3_column_int64(st, 1);
			r->chunk.codec = (uint8_t)sqlite3_column_int(st, 2);
			r->chunk.stored_len = (uint64_t)sqlite3_column_int64(st, 3);
			e->pinned[e->n] = false;
			e->at[e->n++] = i;
		}
		if (rc == 0 && src < 0)
			rc = src;
	}
	sqlite3_finalize(st);
	cat_unlock(cat);
	return rc;
}

/* Whether writer ino of hashes[i] is pinned by this eviction. */
static bool csd_evict_pinned(const struct csd_evict *e, size_t i, uint64_t ino)
{
	for (size_t k = 0; k < e->n; k++)
		if (e->at[k] == i && e->refs[k].ino == ino)
			return e->pinned[k];
	return false;
}

/* One eviction in one hold of the lock (invariant 8): only if every writer
 * naming the chunk now is pinned (S11). 0, -ENOENT (not a clean copy) or
 * -EBUSY (a writer not pinned). */
static int csd_evict_one(struct cat *cat, sqlite3_stmt *writers, const struct csd_evict *e,
			 size_t i, const uint8_t hash[CAT_HASH_LEN], cat_reclaim_fn remove, void *arg)
{
	sqlite3_reset(writers);
	csd_bind_hash(writers, 1, hash);
	int src;
	while ((src = csd_step(cat, writers)) == 1)
		if (!csd_evict_pinned(e, i, (uint64_t)sqlite3_column_int64(writers, 0)))
			return -EBUSY;
	if (src == 0 && csd_again_find(cat_shared_again(cat), hash) >= 0)
		return -EBUSY; /* S16: its row may wrongly say it is on BACKING */
	return src < 0 ? src : cat_chunk_evict_locked(cat, hash, remove, arg);
}

int catsh_chunks_evict(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		       cat_reclaim_fn remove, void *arg, bool *evicted, int *why)
{
	struct csd_evict e = { 0 };
	for (size_t i = 0; i < n; i++)
		evicted[i] = false;
	csd_again_retry(cat); /* S16 */
	pthread_rwlock_wrlock(cat_shared_pins(cat)); /* no writer's release meanwhile */
	int rc = csd_evict_refs(cat, hashes, n, &e);
	if (rc == 0 && e.n > 0) {
		int prc = pgns_pin_held(cat_shared_ns(cat), e.refs, e.n, e.pinned);
		if (prc) { /* nothing pinned: the copies writers name stay */
			for (size_t k = 0; k < e.n; k++)
				e.pinned[k] = false;
			log_warn("catalog %s: cannot pin the chunks local writers name before their"
				 " eviction (%s); their cache copies stay", cat->path, strerror(-prc));
		}
	}
	sqlite3_stmt *writers = NULL;
	cat_lock(cat);
	if (rc == 0)
		rc = csd_prepare(cat, csd_sql_writers, &writers);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		int erc = csd_evict_one(cat, writers, &e, i, hashes[i], remove, arg);
		evicted[i] = erc == 0;
		if (why)
			why[i] = erc;
		if (erc != -ENOENT && erc != -EBUSY)
			rc = erc;
	}
	sqlite3_finalize(writers);
	cat_unlock(cat);
	pthread_rwlock_unlock(cat_shared_pins(cat));
	csd_evict_free(&e);
	return rc;
}

/* ---- S13: chunks of lost generations found whole on BACKING ---- */

static bool csd_backing_bad(const struct csd_backing_look *look, const uint8_t hash[CAT_HASH_LEN])
{
	for (unsigned i = 0; i < look->n_bad; i++)
		if (memcmp(look->bad[i], hash, CAT_HASH_LEN) == 0)
			return true;
	return false;
}

static void csd_backing_bad_add(struct csd_backing_look *look, const uint8_t hash[CAT_HASH_LEN])
{
	memcpy(look->bad[look->next_bad], hash, CAT_HASH_LEN);
	look->next_bad = (look->next_bad + 1) % CSD_BACKING_BAD;
	if (look->n_bad < CSD_BACKING_BAD)
		look->n_bad++;
}

/* S13: of claimed[0..n) (this node's claims, N7), those the check finds
 * whole on BACKING go to whole[0..*k); the rest are logged as needed. */
static void csd_backing_look(struct cat *cat, cat_backing_check_fn check, void *arg,
			     struct csd_backing_look *look, const uint8_t (*hashes)[CAT_HASH_LEN],
			     const struct pgns_claim *claims, size_t n,
			     uint8_t (*whole)[CAT_HASH_LEN], size_t *k)
{
	*k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!claims[i].found || claims[i].row.uploaded ||
		    strcmp(claims[i].row.state, "live") != 0)
			continue; /* gone, reclaiming, or uploaded meanwhile: nothing to do */
		const char *why = NULL;
		int v = check(arg, hashes[i], claims[i].row.plain_len, &why);
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(hashes[i], hex);
		if (v == 1) {
			memcpy(whole[(*k)++], hashes[i], CAT_HASH_LEN);
		} else if (v == -EIO) {
			csd_backing_bad_add(look, hashes[i]);
			log_warn("catalog %s: chunk %s of a lost generation is on BACKING but damaged"
				 " (%s): not counted as uploaded; its generation stays lost",
				 cat->path, hex, why ? why : "does not verify");
		} else if (v < 0) {
			log_warn("catalog %s: cannot read chunk %s of a lost generation on BACKING:"
				 " %s (the next sweep looks again)", cat->path, hex, strerror(-v));
		}
	}
}

int catshd_adopt_backing(struct cat *cat, cat_backing_check_fn check, void *arg,
			 struct csd_backing_look *look, size_t *marked_out)
{
	static const uint8_t start[CAT_HASH_LEN];
	struct pgns *ns = cat_shared_ns(cat);
	uint8_t hashes[CSD_BACKING_MAX][CAT_HASH_LEN], whole[CSD_BACKING_MAX][CAT_HASH_LEN];
	struct pgns_claim claims[CSD_BACKING_MAX];
	bool writer[CSD_BACKING_MAX] = { false }, marked[CSD_BACKING_MAX];
	size_t n = 0, k = 0, count = 0;
	*marked_out = 0;
	bool from_start = memcmp(look->after, start, CAT_HASH_LEN) == 0;
	int rc = pggen_orphans(ns, from_start ? NULL : look->after, hashes, CSD_BACKING_MAX, &n);
	if (rc)
		return rc;
	/* the next sweep goes on after this batch, or starts over after a short one */
	if (n < CSD_BACKING_MAX)
		memset(look->after, 0, CAT_HASH_LEN);
	else
		memcpy(look->after, hashes[n - 1], CAT_HASH_LEN);
	size_t kept = 0; /* those found damaged before are not read again */
	for (size_t i = 0; i < n; i++)
		if (!csd_backing_bad(look, hashes[i]))
			memmove(hashes[kept++], hashes[i], CAT_HASH_LEN);
	n = kept;
	if (n == 0)
		return 0;
	/* N7: claimed before the objects are read (writer false: only rows live
	 * and not uploaded are claimed) */
	rc = pgns_upload_claims(ns, (const uint8_t(*)[CAT_HASH_LEN])hashes, writer, n, claims);
	if (rc)
		return rc;
	csd_backing_look(cat, check, arg, look, (const uint8_t(*)[CAT_HASH_LEN])hashes, claims, n,
			 whole, &k);
	if (k > 0)
		rc = pgns_chunks_uploaded(ns, (const uint8_t(*)[CAT_HASH_LEN])whole, k, marked, NULL);
	for (size_t i = 0; rc == 0 && i < k; i++)
		count += marked[i];
	/* the claims of what was not marked are of no more use (N7): dropped
	 * (no inode: no pin goes). One a failure leaves only says no reclaim
	 * ended since it was taken; it goes with this node (pgns_unpin_lost) */
	int crc = pgns_unpin_claims(ns, 0, (const uint8_t(*)[CAT_HASH_LEN])hashes, n);
	if (crc)
		log_warn("catalog %s: cannot drop the claims of chunks looked for on BACKING: %s",
			 cat->path, strerror(-crc));
	if (count > 0)
		log_info("catalog %s: node %" PRIu64 " found %zu chunks of lost generations whole on"
			 " BACKING (their holder gone before marking them uploaded): marked uploaded",
			 pg_name(ns->pg), cat_node_id(cat), count);
	*marked_out = count;
	return rc;
}
