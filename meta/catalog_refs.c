/* catalog_refs — the one place where chunk reference counts change. It keeps
 * catalog invariant 1 (catalog.c, catalog.h):
 *
 *     chunks.refcount == rows of extents + pending naming the hash
 *
 * catalog.c, generation.c and manifest.c add and remove extent rows; none of
 * them writes chunks.refcount. Every statement that does is here:
 *
 *  - the set statements (R_*_DROP, R_*_TAKE ids of catalog_internal.h), one
 *    per set of extent rows that moves as a whole: the rows are named by a
 *    FROM … WHERE clause, and the count of each chunk moves by its number of
 *    rows in the set (a file may name one chunk many times). One UPDATE per
 *    set, prepared once at open with the rest, so a commit or a release of
 *    many rows is one statement, not one per row. A caller runs the DROP of
 *    a set before it deletes those rows and the TAKE of a set whose rows it
 *    copies, in the same transaction, bound with the same parameters as the
 *    DELETE or INSERT beside it (the ids sit in the callers' step lists).
 *  - one chunk named by a new pending row (cat_refs_take_one_txn);
 *  - the chunks named by a manifest's extents (cat_refs_manifest_sql);
 *  - the check that the counts agree with the rows (R_CHECK).
 *
 * Counts only move here; rows at count 0 are deleted by catalog.c's sweep,
 * after the reclaim callback removed their object.
 *
 * Invariants:
 *  1. A set statement and the row change it accounts for name the same rows:
 *     the DROP runs before the DELETE (the rows still exist), the TAKE of a
 *     copy before or after the INSERT with a set that excludes rows the copy
 *     already had (R_X_NOT_P, R_P_NOT_X).
 *  2. Taking a reference on a row at count 0 treats its object as gone
 *     (stored_len NULL, or the manifest's fields): reclaim may have removed
 *     the object before a crash or a failed reclaim kept the row (catalog
 *     invariant 2).
 *
 * Portability (SCHEMA.md "Portable SQL"): UPDATE … FROM and INSERT … ON
 * CONFLICT … DO UPDATE … RETURNING are also PostgreSQL's syntax. */
#define _GNU_SOURCE
#include "catalog_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <sqlite3.h>

#include "log.h"

/* The statement every set statement is made of: the counts of the chunks
 * named by the rows `from` (FROM … WHERE, a row's hash column `hash`) move by
 * `op` (+ or -) their number of rows, one UPDATE for the whole set. */
#define REFS_MOVE(op, hash, from)                                                    \
	"UPDATE chunks SET refcount = refcount " op " g.n FROM (SELECT " hash ", COUNT(*)" \
	" AS n FROM " from " GROUP BY " hash ") AS g WHERE chunks.hash = g.hash"
#define REFS_DROP(hash, from) REFS_MOVE("-", hash, from)
#define REFS_TAKE(hash, from) REFS_MOVE("+", hash, from)

/* ---- the sets of rows ---- */

/* Rows of table T of inode ?1 at or past offset ?2 (truncation, release). */
#define SET_FROM(T) T " WHERE ino = ?1 AND off >= ?2"
/* Rows of table A of inode ?1 without an identical row in table B: what a
 * commit (pending → extents) or a writer's start (extents → pending) adds to
 * one side or removes from the other. */
#define SET_NOT_IN(A, B) A " d WHERE d.ino = ?1 AND NOT " CAT_SQL_SAME("d", B)
/* Rows of table T of the inodes of the JSON array ?1 that have no link left
 * (cat_inodes_release). The CROSS JOIN makes SQLite walk the short list and
 * search T by key. */
#define SET_RELEASED(T) "(" CAT_SQL_RELEASED ") r CROSS JOIN " T " e ON e.ino = r.ino"
/* Rows of table T of the inodes listed in temp.gen_tree (generation.c). */
#define SET_TREE(T, a) "temp.gen_tree t CROSS JOIN " T " " a " ON " a ".ino = t.ino"

#define R(id) [(id) - S_REFS_FIRST]
const struct cat_sql cat_refs_sql[S_PACK_FIRST - S_REFS_FIRST] = {
	/* truncation and cat_inode_release (?2 = 0) */
	R(R_X_FROM_DROP) = { "release the chunks of truncated extents",
			     REFS_DROP("hash", SET_FROM("extents")) },
	R(R_P_FROM_DROP) = { "release the chunks of truncated pending extents",
			     REFS_DROP("hash", SET_FROM("pending")) },
	/* commits and a writer's start: the rows only one side has */
	R(R_X_NOT_P_DROP) = { "release the chunks of replaced extents",
			      REFS_DROP("d.hash", SET_NOT_IN("extents", "pending")) },
	R(R_X_NOT_P_TAKE) = { "reference the chunks of copied extents",
			      REFS_TAKE("d.hash", SET_NOT_IN("extents", "pending")) },
	R(R_P_NOT_X_DROP) = { "release the chunks of replaced pending extents",
			      REFS_DROP("d.hash", SET_NOT_IN("pending", "extents")) },
	R(R_P_NOT_X_TAKE) = { "reference the chunks of committed extents",
			      REFS_TAKE("d.hash", SET_NOT_IN("pending", "extents")) },
	/* batched release */
	R(R_X_RELEASED_DROP) = { "release the chunks of unlinked inodes' extents",
				 REFS_DROP("e.hash", SET_RELEASED("extents")) },
	R(R_P_RELEASED_DROP) = { "release the chunks of unlinked inodes' pending extents",
				 REFS_DROP("e.hash", SET_RELEASED("pending")) },
	/* recovery at open (catalog invariant 4) */
	R(R_P_ALL_DROP) = { "release the chunks of pending extents",
			    REFS_DROP("hash", "pending") },
	R(R_X_UNLINKED_DROP) = { "release the chunks of unlinked inodes",
				 REFS_DROP("hash", "extents WHERE ino IN (SELECT ino FROM inodes"
					   " WHERE nlink = 0)") },
	/* generation trees: dropped, or copied as a backup (G3) */
	R(R_X_TREE_DROP) = { "release the chunks of a tree's extents",
			     REFS_DROP("e.hash", SET_TREE("extents", "e")) },
	R(R_X_TREE_TAKE) = { "reference the chunks of a tree's copied extents",
			     REFS_TAKE("e.hash", SET_TREE("extents", "e")) },
	R(R_P_TREE_DROP) = { "release the chunks of a tree's pending extents",
			     REFS_DROP("p.hash", SET_TREE("pending", "p")) },

	/* Invariant 2: a row at count 0 takes the reference as a new chunk. */
	R(R_TAKE_ONE) = { "reference a chunk",
			  "INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount)"
			  " VALUES(?1, ?2, 0, NULL, 1) ON CONFLICT(hash) DO UPDATE"
			  " SET refcount = refcount + 1,"
			  " stored_len = CASE WHEN refcount = 0 THEN NULL ELSE stored_len END"
			  " RETURNING plain_len, stored_len" },

	R(R_CHECK) = { "check reference counts",
		       "SELECT c.hash, c.refcount, COALESCE(r.n, 0) FROM chunks c LEFT JOIN"
		       " (SELECT hash, COUNT(*) AS n FROM (SELECT hash FROM extents UNION ALL"
		       " SELECT hash FROM pending) GROUP BY hash) r ON r.hash = c.hash"
		       " WHERE c.refcount IS NOT COALESCE(r.n, 0)" },
};

int cat_refs_take_one_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
			  uint64_t plain_len, uint64_t *row_plain_len, bool *must_store)
{
	assert(cat->in_txn); /* a count moves with its rows, in their transaction */
	int rc = cat_bind(cat, R_TAKE_ONE, A_HASH(hash), A_INT(plain_len));
	if (rc == 0)
		rc = cat_next(cat, R_TAKE_ONE);
	if (rc == 1) {
		*row_plain_len = (uint64_t)cat_col_int(cat, R_TAKE_ONE, 0);
		*must_store = sqlite3_column_type(cat->stmt[R_TAKE_ONE], 1) == SQLITE_NULL;
		rc = 0;
	} else if (rc == 0) {
		rc = cat_sql_fail(cat, R_TAKE_ONE, SQLITE_DONE); /* RETURNING gave no row */
	}
	cat_reset(cat, R_TAKE_ONE);
	return rc;
}

/* A manifest's chunk row: an existing chunk keeps its fields unless it is
 * at count 0 or has no object (invariant 2); either way it takes ?5
 * references, the manifest's extents that name it (manifest.c invariant 3). */
#define REFS_KEEP "(stored_len IS NOT NULL AND refcount > 0)"
static const char refs_manifest_v2[] =
	"INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount)"
	" VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(hash) DO UPDATE SET"
	" codec = CASE WHEN " REFS_KEEP " THEN codec ELSE excluded.codec END,"
	" stored_len = CASE WHEN " REFS_KEEP " THEN stored_len"
	" ELSE excluded.stored_len END, refcount = refcount + excluded.refcount"
	" RETURNING plain_len";
/* Schema 3 (upload.h): objects named by a manifest are on BACKING; one that
 * had no object here is not in the cache. */
static const char refs_manifest_v3[] =
	"INSERT INTO chunks(hash, plain_len, codec, stored_len, refcount, cached, uploaded)"
	" VALUES(?1, ?2, ?3, ?4, ?5, 0, 1) ON CONFLICT(hash) DO UPDATE SET"
	" codec = CASE WHEN " REFS_KEEP " THEN codec ELSE excluded.codec END,"
	" stored_len = CASE WHEN " REFS_KEEP " THEN stored_len ELSE excluded.stored_len END,"
	" cached = CASE WHEN " REFS_KEEP " THEN cached ELSE 0 END, uploaded = 1,"
	" refcount = refcount + excluded.refcount RETURNING plain_len";

const char *cat_refs_manifest_sql(int schema_version)
{
	return schema_version >= 3 ? refs_manifest_v3 : refs_manifest_v2;
}
