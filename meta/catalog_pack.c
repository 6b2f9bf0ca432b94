/* catalog_pack — packs on BACKING in the catalog; see catalog_pack.h. */
#define _GNU_SOURCE
#include "catalog_pack.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "catalog_internal.h"

#define P(id) [(id) - S_PACK_FIRST]
const struct cat_sql cat_pack_sql[S_COUNT - S_PACK_FIRST] = {
	P(P_BEGIN) = { "record a pack being put",
		       "INSERT INTO packs(name, size, members, state, created_ns)"
		       " VALUES(?1, ?2, ?3, 0, ?4) ON CONFLICT(name) DO UPDATE SET"
		       " state = CASE WHEN state = 2 THEN 3 ELSE state END RETURNING state" },
	/* K2: only a row still dirty with an object takes its place in the pack */
	P(P_MEMBER) = { "record a chunk's place in a pack",
			"UPDATE chunks SET uploaded = 1, pack = ?2, pack_off = ?3, pack_len = ?4"
			" WHERE hash = ?1 AND uploaded = 0 AND stored_len IS NOT NULL" },
	P(P_LIVE) = { "record a pack put",
		      "UPDATE packs SET state = 1 WHERE name = ?1 AND state IN (0, 3)" },
	/* K5: a put over a removing pack that did not end: removing again, with
	 * a removal row of its own (the old one may have ended moot meanwhile) */
	P(P_UNREVIVE) = { "return a pack to removing",
			  "UPDATE packs SET state = 2 WHERE name = ?1 AND state = 3"
			  " AND NOT EXISTS (SELECT 1 FROM chunks WHERE pack = ?1)" },
	P(P_REMOVAL_ROW) = { "queue a pack's removal",
			     "INSERT INTO uploads(kind, hash, enqueued_ns) VALUES(5, ?1, ?2)" },
	P(P_FORGET) = { "forget a pack not put",
			"DELETE FROM packs WHERE name = ?1 AND state = 0"
			" AND NOT EXISTS (SELECT 1 FROM chunks WHERE pack = ?1)" },
	P(P_ORPHANS) = { "list packs being put", "SELECT name, state FROM packs WHERE state IN (0, 3)"
			 " ORDER BY name LIMIT ?1" },
	P(P_REMOVABLE) = { "look whether a pack may go",
			   "SELECT 1 FROM packs WHERE name = ?1 AND state = 2"
			   " AND NOT EXISTS (SELECT 1 FROM chunks WHERE pack = ?1)" },
	P(P_REMOVED) = { "forget a pack removed",
			 "DELETE FROM packs WHERE name = ?1 AND state = 2"
			 " AND NOT EXISTS (SELECT 1 FROM chunks WHERE pack = ?1)" },
	P(P_STATS) = { "sum up the packs",
		       "SELECT COALESCE(SUM(state = 1), 0),"
		       " COALESCE(SUM(CASE WHEN state = 1 THEN size END), 0),"
		       " COALESCE(SUM(CASE WHEN state = 1 THEN live END), 0),"
		       " COALESCE(SUM(CASE WHEN state = 1 THEN live_bytes END), 0),"
		       " COALESCE(SUM(state = 0), 0), COALESCE(SUM(state = 2), 0) FROM packs" },
	/* rebuild (fs/rbpack.h): a pack found on BACKING, and a member's place */
	P(P_PLACE_PACK) = { "record a pack found on BACKING",
			    "INSERT INTO packs(name, size, members, state, created_ns)"
			    " VALUES(?1, ?2, ?3, 1, ?4) ON CONFLICT(name) DO NOTHING" },
	P(P_PLACE_CHUNK) = { "record a chunk's place in a pack found on BACKING",
			     "UPDATE chunks SET pack = ?2, pack_off = ?3, pack_len = ?4"
			     " WHERE hash = ?1 AND uploaded = 1 AND pack IS NULL" },
	/* K3: about to be put loose */
	P(P_LOOSE) = { "mark a chunk to be put loose",
		       "UPDATE chunks SET pack_off = -1 WHERE hash = ?1 AND pack IS NULL"
		       " AND uploaded = 0 AND (pack_off IS NULL OR pack_off != -1)" },
	/* K1 */
	P(P_CHECK_LIVE) = { "check the packs' live counts",
			    "SELECT p.name, p.live, COALESCE(c.n, 0), p.live_bytes, COALESCE(c.b, 0),"
			    " p.state FROM packs p LEFT JOIN (SELECT pack, COUNT(*) AS n,"
			    " SUM(pack_len) AS b FROM chunks WHERE pack IS NOT NULL GROUP BY pack) c"
			    " ON c.pack = p.name WHERE p.live != COALESCE(c.n, 0)"
			    " OR p.live_bytes != COALESCE(c.b, 0) OR (p.state != 1 AND c.n > 0)" },
	P(P_CHECK_NAMED) = { "check the packs chunks name",
			     "SELECT hash, pack FROM chunks WHERE pack IS NOT NULL"
			     " AND (pack NOT IN (SELECT name FROM packs) OR pack_off IS NULL"
			     " OR pack_len IS NULL OR uploaded = 1 AND stored_len IS NULL)" },
};

int cat_pack_begin(struct cat *cat, const uint8_t name[CAT_HASH_LEN], uint64_t size,
		   uint32_t members, int *state)
{
	*state = CAT_PACK_PUTTING;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_bind(cat, P_BEGIN, A_HASH(name), A_INT((int64_t)size), A_INT(members),
			      A_INT(cat_now_ns()));
	if (rc == 0)
		rc = cat_next(cat, P_BEGIN);
	if (rc == 1) {
		*state = (int)cat_col_int(cat, P_BEGIN, 0);
		rc = 0;
	} else if (rc == 0) {
		rc = cat_sql_fail(cat, P_BEGIN, SQLITE_DONE); /* RETURNING gave no row */
	}
	cat_reset(cat, P_BEGIN);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* One member: its place if its row is still dirty with an object (K2), and
 * its upload row ended with nothing else marked. */
static int cat_pack_member_txn(struct cat *cat, const uint8_t name[CAT_HASH_LEN],
			       const struct cat_pack_member *m, const struct cat_upload *row,
			       size_t *taken)
{
	assert(row->kind == UP_CHUNK && memcmp(row->hash, m->hash, CAT_HASH_LEN) == 0);
	int rc = cat_bind(cat, P_MEMBER, A_HASH(m->hash), A_HASH(name), A_INT((int64_t)m->off),
			  A_INT((int64_t)m->len));
	if (rc == 0)
		rc = cat_run(cat, P_MEMBER);
	if (rc == 0)
		*taken += (size_t)cat_changes(cat);
	if (rc == 0)
		rc = cat_bind(cat, U_ROW_DELETE, A_INT((int64_t)row->seq));
	if (rc == 0)
		rc = cat_run(cat, U_ROW_DELETE);
	return rc;
}

int cat_pack_done(struct cat *cat, const uint8_t name[CAT_HASH_LEN],
		  const struct cat_pack_member *m, const struct cat_upload *member_rows, size_t n,
		  const struct cat_upload *loose_rows, size_t n_loose, size_t *taken)
{
	*taken = 0;
	cat_lock(cat);
	int rc = cat_begin(cat);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = cat_pack_member_txn(cat, name, &m[i], &member_rows[i], taken);
	if (rc == 0) /* K4: a live pack no member took is removing at once (trigger) */
		rc = cat_bind(cat, P_LIVE, A_HASH(name));
	if (rc == 0)
		rc = cat_run(cat, P_LIVE);
	for (size_t i = 0; rc == 0 && i < n_loose; i++)
		rc = cat_up_done_txn(cat, &loose_rows[i]);
	if (rc == 0)
		cat->uploaded_unsynced = true; /* catalog.c invariant 12 */
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	if (rc != 0)
		*taken = 0;
	return rc;
}

int cat_pack_orphans(struct cat *cat, uint8_t (*names)[CAT_HASH_LEN], int *states, size_t max,
		     size_t *n)
{
	*n = 0;
	cat_lock(cat);
	int rc = cat_bind(cat, P_ORPHANS, A_INT((int64_t)max));
	while (rc == 0 && (rc = cat_next(cat, P_ORPHANS)) == 1) {
		sqlite3_stmt *st = cat->stmt[P_ORPHANS];
		rc = 0;
		if (*n < max && sqlite3_column_bytes(st, 0) == CAT_HASH_LEN) {
			states[*n] = (int)cat_col_int(cat, P_ORPHANS, 1);
			memcpy(names[(*n)++], sqlite3_column_blob(st, 0), CAT_HASH_LEN);
		}
	}
	cat_reset(cat, P_ORPHANS);
	cat_unlock(cat);
	return rc < 0 ? rc : 0;
}

int cat_pack_forget(struct cat *cat, const uint8_t name[CAT_HASH_LEN])
{
	cat_lock(cat);
	int rc = cat_bind(cat, P_FORGET, A_HASH(name));
	if (rc == 0)
		rc = cat_run(cat, P_FORGET);
	if (rc == 0 && cat_changes(cat) != 1)
		rc = -EBUSY;
	cat_unlock(cat);
	return rc;
}

int cat_pack_unrevive(struct cat *cat, const uint8_t name[CAT_HASH_LEN])
{
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_bind(cat, P_UNREVIVE, A_HASH(name));
	if (rc == 0)
		rc = cat_run(cat, P_UNREVIVE);
	if (rc == 0 && cat_changes(cat) != 1)
		rc = -EBUSY;
	if (rc == 0)
		rc = cat_bind(cat, P_REMOVAL_ROW, A_HASH(name), A_INT(cat_now_ns()));
	if (rc == 0)
		rc = cat_run(cat, P_REMOVAL_ROW);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_pack_removable(struct cat *cat, const uint8_t name[CAT_HASH_LEN], bool *removable)
{
	cat_lock(cat);
	int rc = cat_bind(cat, P_REMOVABLE, A_HASH(name));
	if (rc == 0)
		rc = cat_next(cat, P_REMOVABLE);
	*removable = rc == 1;
	cat_reset(cat, P_REMOVABLE);
	cat_unlock(cat);
	return rc < 0 ? rc : 0;
}

int cat_pack_place(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
		   const uint8_t name[CAT_HASH_LEN], uint64_t size, uint32_t members,
		   uint64_t off, uint64_t len)
{
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_bind(cat, P_PLACE_PACK, A_HASH(name), A_INT((int64_t)size), A_INT(members),
			      A_INT(cat_now_ns()));
	if (rc == 0)
		rc = cat_run(cat, P_PLACE_PACK);
	if (rc == 0)
		rc = cat_bind(cat, P_PLACE_CHUNK, A_HASH(hash), A_HASH(name), A_INT((int64_t)off),
			      A_INT((int64_t)len));
	if (rc == 0)
		rc = cat_run(cat, P_PLACE_CHUNK);
	if (rc == 0 && cat_changes(cat) != 1)
		rc = -ENOENT;
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_pack_loose(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	cat_lock(cat);
	int rc = cat_bind(cat, P_LOOSE, A_HASH(hash));
	if (rc == 0)
		rc = cat_run(cat, P_LOOSE);
	cat_unlock(cat);
	return rc;
}

int cat_pack_stats(struct cat *cat, struct cat_pack_stats *out)
{
	memset(out, 0, sizeof(*out));
	cat_lock(cat);
	int rc = cat_next(cat, P_STATS);
	if (rc == 1) {
		out->packs = (uint64_t)cat_col_int(cat, P_STATS, 0);
		out->bytes = (uint64_t)cat_col_int(cat, P_STATS, 1);
		out->members = (uint64_t)cat_col_int(cat, P_STATS, 2);
		out->live_bytes = (uint64_t)cat_col_int(cat, P_STATS, 3);
		out->putting = (uint64_t)cat_col_int(cat, P_STATS, 4);
		out->removing = (uint64_t)cat_col_int(cat, P_STATS, 5);
		rc = 0;
	}
	cat_reset(cat, P_STATS);
	cat_unlock(cat);
	return rc < 0 ? rc : 0;
}
