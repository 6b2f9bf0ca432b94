/* generation — checkpoint generations in the catalog: the bookkeeping behind
 * generation.h (its states and invariants G1–G4 are the contract), on the
 * `generations` table and the `inodes.gen` column of schema version 2
 * (SCHEMA.md). catalog.c owns the connection, the lock and the namespace
 * calls; it calls the cat_gen_*_txn hooks ("hooks for catalog.c" below) from
 * inside its own transactions (catalog_internal.h), so a create, rename or
 * unlink and its generation bookkeeping commit together.
 *
 * Trees. A call that works on a whole tree first lists it in temp.gen_tree
 * with one recursive query over dirents from the root (UNION, so an inode
 * with several links is listed once and a corrupt cycle still ends), then
 * runs one set statement per step over that list: unlink, copy, count, delete.
 * Chunk counts move per hash in the same transaction as the extent rows,
 * by catalog_refs.c's statements for a tree's rows (R_*_TREE_*), as
 * everywhere in the catalog.
 *
 * Backup trees (G3). cat_gen_reopen copies the committed tree: every inode
 * gets a new number past sqlite_sequence (so numbers are never reused,
 * catalog invariant 5), entries are copied with both ends renumbered, extents
 * are copied and each chunk's count goes up by its number of copies — no
 * bytes move. The live tree keeps the original numbers, which the kernel and
 * open writers hold. The copy has no entry: its root is only in backup_root.
 * As none of its numbers was ever handed out, dropping it (commit, delete,
 * its root unlinked or renamed away) deletes its rows outright and releases
 * their counts at once; restoring it (abort, crash) links its root under the
 * generation's name, so the generation's root inode changes.
 *
 * Removing a live tree (abort, delete) deletes its entries and gives its
 * inodes nlink 0 and gen NULL: their rows and extents stay until
 * cat_inode_release (the kernel may hold them) or the next cat_open. The
 * callers' fn gets their numbers after the commit, with the lock released.
 *
 * Hard links never cross a generation boundary (catalog.c refuses them with
 * -EXDEV, and so does a rename that would carry one across), so a tree and
 * its copy hold every link of their inodes. */
#define _GNU_SOURCE
#include "catalog_internal.h"
#include "catalog_shared_gen.h"
#include "manifest_shared.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

#define GEN_COLS                                                                   \
	"id, series, root, name, step, state, version, pinned, created_ns, committed_ns," \
	" ended_ns, rule, backup_root, held"
#define GEN_LIVE "state IN (0, 1, 4)" /* OPEN, COMMITTED or HELD: they have a tree */
#define GEN_IS_FILE "(mode & 61440) = 32768"
/* t(ino): the tree under `start` (an expression). A join with temp.gen_tree
 * is written CROSS JOIN, which makes SQLite walk the list and search the big
 * table by key: it has no statistics on the temporary table and would
 * otherwise scan every extent or dirent. */
#define GEN_TREE(start)                                                             \
	"WITH RECURSIVE t(ino) AS (SELECT " start " UNION SELECT d.ino FROM dirents d" \
	" JOIN t ON d.parent = t.ino) "
/* (gen, hash) of every extent and pending row of the inodes matching `where`. */
#define GEN_REFS(where)                                                             \
	"SELECT i.gen AS gen, e.hash AS hash FROM inodes i JOIN extents e ON e.ino = i.ino" \
	" WHERE " where " UNION ALL SELECT i.gen, p.hash FROM inodes i JOIN pending p"     \
	" ON p.ino = i.ino WHERE " where

const char cat_gen_temp_sql[] =
	"CREATE TEMP TABLE IF NOT EXISTS gen_tree(ino INTEGER PRIMARY KEY, copy INTEGER);";

#define G(id) [(id) - S_GEN_FIRST]
const struct cat_sql cat_gen_sql[S_UP_FIRST - S_GEN_FIRST] = {
	G(G_INODE_GEN) = { "read an inode's generation", "SELECT gen FROM inodes WHERE ino = ?1" },
	G(G_STATE) = { "read a generation's state", "SELECT state FROM generations WHERE id = ?1" },
	/* one statement where a change asks whether it may be deferred */
	G(G_INODE_GEN_STATE) = { "read an inode's generation and its state",
				 "SELECT i.gen, g.state FROM inodes i"
				 " LEFT JOIN generations g ON g.id = i.gen WHERE i.ino = ?1" },
	G(G_SET_INODE_GEN) = { "set an inode's generation",
			       "UPDATE inodes SET gen = ?2 WHERE ino = ?1" },
	G(G_ROOT_OF) = { "find the generation rooted at an inode",
			 "SELECT id FROM generations WHERE root = ?1 AND " GEN_LIVE
			 " ORDER BY id LIMIT 1" },
	G(G_INSERT) = { "insert a generation",
			"INSERT INTO generations(series, root, name, step, state, version, pinned,"
			" created_ns) VALUES(?1, ?2, ?3, ?4, 0, 1, 0, ?5)" },
	G(G_GET) = { "read a generation", "SELECT " GEN_COLS " FROM generations WHERE id = ?1" },
	G(G_PUT) = { "update a generation",
		     "UPDATE generations SET root = ?2, state = ?3, version = ?4, pinned = ?5,"
		     " committed_ns = ?6, ended_ns = ?7, rule = ?8, backup_root = ?9, held = ?10"
		     " WHERE id = ?1" },
	/* G8: a HELD root renamed to another generation name keeps its row */
	G(G_MOVE) = { "move a generation to another name",
		      "UPDATE generations SET series = ?2, name = ?3, step = ?4 WHERE id = ?1" },
	G(G_FIND_NAME) = { "find a generation by name",
			   "SELECT " GEN_COLS " FROM generations WHERE series = ?1 AND " GEN_LIVE
			   " AND name = ?2 ORDER BY id DESC LIMIT 1" },
	/* G10: a version kept beside its step's save is found by its name only */
	G(G_FIND_STEP) = { "find a generation by step",
			   "SELECT " GEN_COLS " FROM generations WHERE series = ?1 AND " GEN_LIVE
			   " AND step = ?2 ORDER BY instr(name, '" GEN_REWRITE_SUFFIX "') > 0,"
			   " id DESC LIMIT 1" },
	G(G_LIST) = { "list generations",
		      "SELECT " GEN_COLS " FROM generations WHERE (?1 = 0 OR series = ?1)"
		      " AND (?2 OR " GEN_LIVE ") ORDER BY series, step, id" },
	G(G_OPEN_IDS) = { "list open generations",
			  "SELECT id FROM generations WHERE state = 0 ORDER BY id" },

	G(G_TREE_CLEAR) = { "clear the tree list", "DELETE FROM temp.gen_tree" },
	G(G_TREE_FILL) = { "list a tree",
			   "INSERT INTO temp.gen_tree(ino) " GEN_TREE("?1") "SELECT ino FROM t" },
	G(G_TREE_FILL_NUMBERED) = { "list a tree and number its copy",
				    "INSERT INTO temp.gen_tree(ino, copy) " GEN_TREE("?1")
				    "SELECT ino, ?2 + row_number() OVER (ORDER BY ino) FROM t" },
	G(G_TREE_IDS) = { "read a tree's inodes", "SELECT ino FROM temp.gen_tree ORDER BY ino" },
	G(G_TREE_COPY_OF) = { "find an inode's copy",
			      "SELECT copy FROM temp.gen_tree WHERE ino = ?1" },
	G(G_TREE_SET_GEN) = { "set a tree's generation",
			      "UPDATE inodes SET gen = ?1 WHERE ino IN (SELECT ino FROM temp.gen_tree)" },
	/* G10: does the listed tree name a chunk the tree under ?1 (a backup)
	 * does not: bytes written in it that exist nowhere else? */
	G(G_TREE_NEW_BYTES) = { "look for bytes a tree alone has",
				GEN_TREE("?1") ", b(hash) AS (SELECT e.hash FROM t CROSS JOIN extents e"
				" ON e.ino = t.ino) SELECT EXISTS (SELECT 1 FROM temp.gen_tree n"
				" CROSS JOIN extents e ON e.ino = n.ino WHERE e.hash NOT IN b)" },
	G(G_TREE_XDEV) = { "look for hard links out of a tree",
			   "SELECT t.ino FROM temp.gen_tree t CROSS JOIN dirents d ON d.ino = t.ino"
			   " WHERE t.ino != ?1 AND d.parent NOT IN (SELECT ino FROM temp.gen_tree)"
			   " LIMIT 1" },
	G(G_TREE_NESTED) = { "find generations rooted in a tree",
			     "SELECT id FROM generations WHERE " GEN_LIVE " AND id != ?1"
			     " AND root IN (SELECT ino FROM temp.gen_tree) ORDER BY id" },
	G(G_TREE_UNLINK) = { "unlink a tree's inodes",
			     "UPDATE inodes SET nlink = 0, gen = NULL, ctime_ns = ?1"
			     " WHERE ino IN (SELECT ino FROM temp.gen_tree)" },
	G(G_TREE_DIRENTS_DELETE) = { "delete a tree's entries",
				     "DELETE FROM dirents WHERE parent IN"
				     " (SELECT ino FROM temp.gen_tree)" },
	G(G_TREE_X_DELETE) = { "delete a tree's extents",
			       "DELETE FROM extents WHERE ino IN (SELECT ino FROM temp.gen_tree)" },
	G(G_TREE_P_DELETE) = { "delete a tree's pending extents",
			       "DELETE FROM pending WHERE ino IN (SELECT ino FROM temp.gen_tree)" },
	G(G_TREE_INODES_DELETE) = { "delete a tree's inodes",
				    "DELETE FROM inodes WHERE ino IN (SELECT ino FROM temp.gen_tree)" },

	G(G_INODE_SEQ) = { "read the last inode number",
			   "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'inodes'),"
			   " 0), COALESCE((SELECT MAX(ino) FROM inodes), 0))" },
	G(G_CLONE_INODES) = { "copy a tree's inodes",
			      "INSERT INTO inodes(ino, mode, uid, gid, nlink, size, rdev, atime_ns,"
			      " mtime_ns, ctime_ns, target, gen) SELECT t.copy, i.mode, i.uid, i.gid,"
			      " i.nlink, i.size, i.rdev, i.atime_ns, i.mtime_ns, i.ctime_ns, i.target,"
			      " i.gen FROM temp.gen_tree t CROSS JOIN inodes i ON i.ino = t.ino"
			      " ORDER BY t.copy" },
	G(G_CLONE_DIRENTS) = { "copy a tree's entries",
			       "INSERT INTO dirents(parent, name, ino) SELECT p.copy, d.name, c.copy"
			       " FROM temp.gen_tree p CROSS JOIN dirents d ON d.parent = p.ino"
			       " CROSS JOIN temp.gen_tree c ON c.ino = d.ino ORDER BY d.id" },
	G(G_CLONE_EXTENTS) = { "copy a tree's extents",
			       "INSERT INTO extents(ino, off, len, hash, chunk_off) SELECT t.copy,"
			       " e.off, e.len, e.hash, e.chunk_off FROM temp.gen_tree t"
			       " CROSS JOIN extents e ON e.ino = t.ino" },

	G(G_STATS_FILES) = { "count a generation's files",
			     "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM inodes WHERE gen = ?1"
			     " AND " GEN_IS_FILE },
	G(G_STATS_TREE_FILES) = { "count a backup tree's files",
				  GEN_TREE("?1") "SELECT COUNT(*), COALESCE(SUM(i.size), 0) FROM t"
				  " CROSS JOIN inodes i ON i.ino = t.ino WHERE " GEN_IS_FILE },
	/* A chunk is exclusive when the generation's rows are all its references. */
	G(G_STATS_EXCL) = { "sum a generation's exclusive chunks",
			    "SELECT COALESCE(SUM(c.plain_len), 0) FROM (SELECT hash, COUNT(*) AS n"
			    " FROM (" GEN_REFS("i.gen = ?1") ") GROUP BY hash) g"
			    " JOIN chunks c ON c.hash = g.hash WHERE c.refcount = g.n" },

	/* G1–G3 on each row: linked where it says (or owning nothing when
	 * ended), a backup only on a rewritten OPEN one and unlinked, its
	 * series outside generations. */
	G(G_CHECK_ROWS) = { "check generations",
			    "SELECT id, series, name, root, backup_root, state, version, unlinked,"
			    " owns, bad_backup, backup_linked, nested, bad_held FROM (SELECT g.*,"
			    " (" GEN_LIVE " AND NOT EXISTS (SELECT 1 FROM dirents d WHERE"
			    " d.parent = g.series AND d.name = g.name AND d.ino = g.root)) AS unlinked,"
			    " (state IN (2, 3) AND (root != 0 OR backup_root != 0)) AS owns,"
			    " (backup_root != 0 AND (state != 0 OR version < 2)) AS bad_backup,"
			    " (backup_root != 0 AND EXISTS (SELECT 1 FROM dirents d"
			    " WHERE d.ino = g.backup_root)) AS backup_linked,"
			    " (" GEN_LIVE " AND EXISTS (SELECT 1 FROM inodes s WHERE s.ino = g.series"
			    " AND s.gen IS NOT NULL)) AS nested,"
			    " ((state = 4 AND held = '') OR (state NOT IN (0, 4) AND held != '')"
			    " OR (state = 0 AND held != '' AND backup_root = 0)) AS bad_held"
			    " FROM generations g)"
			    " WHERE unlinked OR owns OR bad_backup OR backup_linked OR nested OR bad_held"
			    " OR state NOT BETWEEN 0 AND 4 OR version < 1" },
	/* the series walked up to the root (which has no entry) */
	G(G_SERIES_UNDER) = { "find committed generations whose series is under a directory",
			      "WITH RECURSIVE up(gen, ino) AS (SELECT id, series FROM generations"
			      " WHERE state = 1 UNION SELECT up.gen, d.parent FROM up"
			      " JOIN dirents d ON d.ino = up.ino)"
			      " SELECT DISTINCT gen FROM up WHERE ino = ?1 ORDER BY gen" },
	/* AUTOINCREMENT hands out past sqlite_sequence: the row exists once a
	 * generation was ever inserted */
	G(G_ID_SEQ_INSERT) = { "reserve generation numbers",
			       "INSERT INTO sqlite_sequence(name, seq) SELECT 'generations', ?1"
			       " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence"
			       " WHERE name = 'generations')" },
	G(G_ID_SEQ_LAST) = { "read the last generation number",
			     "SELECT COALESCE((SELECT seq FROM sqlite_sequence"
			     " WHERE name = 'generations'), 0)" },
	G(G_ID_SEQ_RAISE) = { "reserve generation numbers",
			      "UPDATE sqlite_sequence SET seq = ?1"
			      " WHERE name = 'generations' AND seq < ?1" },
	/* G1–G3 on inodes: what the trees of live generations (and backups)
	 * reach must carry their id, and nothing else may carry one. */
	G(G_CHECK_TREES) = { "check generations' trees",
			     "WITH RECURSIVE t(ino, g) AS MATERIALIZED (SELECT root, id FROM generations"
			     " WHERE " GEN_LIVE " AND root != 0 UNION SELECT backup_root, id"
			     " FROM generations WHERE backup_root != 0 UNION SELECT d.ino, t.g"
			     " FROM dirents d JOIN t ON d.parent = t.ino)"
			     " SELECT t.ino, t.g, i.gen, i.ino IS NULL FROM t LEFT JOIN inodes i"
			     " ON i.ino = t.ino WHERE i.gen IS NOT t.g"
			     " UNION ALL SELECT i.ino, NULL, i.gen, 0 FROM inodes i LEFT JOIN t"
			     " ON t.ino = i.ino AND t.g = i.gen WHERE i.gen IS NOT NULL AND t.ino IS NULL" },
	/* G6: the saves newer than generation ?1 (series ?2, root ?3, step ?4,
	 * committed at ?5; ?6: held, by step only) of its root's owner, those a
	 * strong rule committed; how many of them are durable; whether ?1
	 * itself is (upload.h U3; a HELD one too: a rebuild's conflict, its
	 * manifest on BACKING, manifest.c mf_gen_insert_held); and whether ?1 (held: never asked) is the
	 * owner's most recently committed save in the series (F3) */
	G(G_KEEP_NEWER) = { "count the newer saves of a generation's owner",
			    "SELECT count(*), coalesce(sum(n.durable_version = n.version), 0),"
			    " EXISTS(SELECT 1 FROM generations g WHERE g.id = ?1 AND g.state IN (1, 4)"
			    " AND g.durable_version = g.version),"
			    " NOT ?6 AND NOT EXISTS(SELECT 1 FROM generations l JOIN inodes li"
			    " ON li.ino = l.root JOIN inodes lo ON lo.ino = ?3 WHERE l.series = ?2"
			    " AND l.state = 1 AND l.id != ?1 AND li.uid = lo.uid"
			    " AND (l.committed_ns > ?5 OR (l.committed_ns = ?5 AND l.id > ?1)))"
			    " FROM generations n JOIN inodes ni ON ni.ino = n.root"
			    " JOIN inodes oi ON oi.ino = ?3 WHERE n.series = ?2 AND n.state = 1"
			    " AND n.rule NOT IN " GEN_RULES_WEAK_SQL
			    " AND n.id != ?1 AND ni.uid = oi.uid AND (n.step > ?4 OR (NOT ?6"
			    " AND n.step = ?4 AND instr(n.name, '" GEN_REWRITE_SUFFIX "') = 0"
			    " AND (n.committed_ns > ?5"
			    " OR (n.committed_ns = ?5 AND n.id > ?1))))" },
	/* G7 (index inodes_writing): a lost mark first, then the lowest inode */
	G(G_UNSETTLED) = { "look for a file being written in a generation",
			   "SELECT i.writing, i.ino, coalesce((SELECT d.name FROM dirents d"
			   " WHERE d.ino = i.ino LIMIT 1), '') FROM inodes i"
			   " WHERE i.gen = ?1 AND i.writing != 0 ORDER BY i.writing DESC, i.ino LIMIT 1" },
	/* G12: the COMMITTED saves naming a chunk lost before its upload, with
	 * one file of each (its name, its inode) */
	G(G_LOST_CHUNK_GENS) = { "list the saves that name a lost chunk",
				 "SELECT x.gen, x.ino, COALESCE((SELECT d.name FROM dirents d"
				 " WHERE d.ino = x.ino LIMIT 1), '') FROM (SELECT i.gen AS gen,"
				 " MIN(i.ino) AS ino FROM extents e JOIN inodes i ON i.ino = e.ino"
				 " JOIN generations g ON g.id = i.gen WHERE e.hash = ?1 AND g.state = 1"
				 " GROUP BY i.gen) x ORDER BY x.gen" },
	/* G13: a file of the save naming a chunk found lost before its upload
	 * (upload.h U14), the chunk and one name of the file */
	G(G_LOST_CHUNK_OF_GEN) = { "find a lost chunk a save names",
				   "SELECT lower(hex(e.hash)), i.ino, COALESCE((SELECT d.name FROM"
				   " dirents d WHERE d.ino = i.ino LIMIT 1), '') FROM inodes i JOIN"
				   " extents e ON e.ino = i.ino JOIN uploads u ON u.hash = e.hash"
				   " WHERE i.gen = ?1 AND u.kind = 1 AND u.error LIKE '" UP_LOST_ERROR "%'"
				   " ORDER BY i.ino LIMIT 1" },
	G(G_LOST_MARK) = { "mark a generation's changes lost",
			   "UPDATE inodes SET writing = 2 WHERE ino IN"
			   " (SELECT root FROM generations WHERE id = ?1 AND state = 0)" },
	G(G_LOST_MARK_ALL) = { "mark every open generation's changes lost",
			       "UPDATE inodes SET writing = 2 WHERE ino IN"
			       " (SELECT root FROM generations WHERE state = 0)" },
	G(G_WRITING_CLEAR_ALL) = { "clear the being-written marks",
				   "UPDATE inodes SET writing = 0 WHERE writing != 0" },
	/* G9: an explicit commit takes the save as it is */
	G(G_WRITING_CLEAR_GEN) = { "clear a generation's being-written marks",
				   "UPDATE inodes SET writing = 0 WHERE gen = ?1 AND writing != 0" },
};
#undef G

/* ---- small helpers ---- */

const char *cat_gen_state_name(int state)
{
	static const char *const names[] = { [GEN_OPEN] = "open", [GEN_COMMITTED] = "committed",
					     [GEN_ABORTED] = "aborted", [GEN_DELETED] = "deleted",
					     [GEN_HELD] = "held" };
	return state >= 0 && state <= GEN_HELD ? names[state] : "?";
}

/* A removed tree can have tens of thousands of inodes: lists grow by doubling. */
int cat_id_vec_push(struct cat_id_vec *ids, uint64_t id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? 2 * ids->cap : 64;
		uint64_t *v = realloc(ids->v, cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return 0;
}

void cat_id_vec_add_ino(void *arg, uint64_t ino)
{
	(void)cat_id_vec_push(arg, ino); /* on -ENOMEM: left to the next open's recovery */
}

void cat_id_vec_free(struct cat_id_vec *ids)
{
	free(ids->v);
	*ids = (struct cat_id_vec){ 0 };
}

int cat_gen_vec_add(void *arg, const struct cat_gen *gen)
{
	struct cat_gen_vec *gens = arg;
	if (gens->n == gens->cap) {
		size_t cap = gens->cap ? 2 * gens->cap : 16;
		struct cat_gen *v = realloc(gens->v, cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		gens->v = v;
		gens->cap = cap;
	}
	gens->v[gens->n++] = *gen;
	return 0;
}

void cat_gen_vec_free(struct cat_gen_vec *gens)
{
	free(gens->v);
	*gens = (struct cat_gen_vec){ 0 };
}

/* Collects the first column of every row of a bound statement. */
static int gen_ids_collect(struct cat *cat, enum cat_sid id, struct cat_id_vec *ids)
{
	int rc;
	while ((rc = cat_next(cat, id)) == 1) {
		rc = cat_id_vec_push(ids, (uint64_t)cat_col_int(cat, id, 0));
		if (rc != 0) {
			assert(id >= S_GEN_FIRST);
			log_error("catalog %s: cannot %s: out of memory", cat->path,
				  cat_gen_sql[id - S_GEN_FIRST].purpose);
			break;
		}
	}
	cat_reset(cat, id);
	return rc;
}

/* The single integer a statement yields (0 for no row or NULL). bound is
 * the result of binding it. */
static int gen_query_int(struct cat *cat, enum cat_sid id, int bound, uint64_t *out)
{
	int rc = bound;
	*out = 0;
	if (rc == 0)
		rc = cat_next(cat, id);
	if (rc == 1) {
		*out = (uint64_t)cat_col_int(cat, id, 0);
		rc = 0;
	}
	cat_reset(cat, id);
	return rc;
}

static int gen_rule_check(const char *rule)
{
	return rule != NULL && strlen(rule) < GEN_RULE_MAX ? 0 : -EINVAL;
}

static void gen_set_rule(struct cat_gen *g, const char *rule, const char *suffix)
{
	snprintf(g->rule, sizeof(g->rule), "%s%s", rule, suffix);
}

/* Reads the GEN_COLS of the current row. */
static int gen_col_row(struct cat *cat, enum cat_sid id, struct cat_gen *out)
{
	sqlite3_stmt *st = cat->stmt[id];
	const char *name = (const char *)sqlite3_column_text(st, 3);
	int name_len = sqlite3_column_bytes(st, 3);
	const char *rule = (const char *)sqlite3_column_text(st, 11);
	int rule_len = sqlite3_column_bytes(st, 11);
	const char *held = (const char *)sqlite3_column_text(st, 13);
	int held_len = sqlite3_column_bytes(st, 13);
	memset(out, 0, sizeof(*out));
	out->id = (uint64_t)sqlite3_column_int64(st, 0);
	if (name == NULL || name_len > CAT_NAME_MAX || rule == NULL || rule_len >= GEN_RULE_MAX ||
	    held == NULL || held_len >= GEN_HELD_MAX) {
		log_error("catalog %s: corrupt: generation %" PRIu64 " has a bad name, rule or reason",
			  cat->path, out->id);
		return -EIO;
	}
	out->series = (uint64_t)sqlite3_column_int64(st, 1);
	out->root = (uint64_t)sqlite3_column_int64(st, 2);
	memcpy(out->name, name, (size_t)name_len + 1);
	out->step = (uint64_t)sqlite3_column_int64(st, 4);
	out->state = (int)sqlite3_column_int64(st, 5);
	out->version = (uint32_t)sqlite3_column_int64(st, 6);
	out->pinned = sqlite3_column_int64(st, 7) != 0;
	out->created_ns = sqlite3_column_int64(st, 8);
	out->committed_ns = sqlite3_column_int64(st, 9);
	out->ended_ns = sqlite3_column_int64(st, 10);
	memcpy(out->rule, rule, (size_t)rule_len + 1);
	out->backup_root = (uint64_t)sqlite3_column_int64(st, 12);
	memcpy(out->held, held, (size_t)held_len + 1);
	return 0;
}

/* The one row of a bound statement; -ENOENT if none. */
static int gen_fetch(struct cat *cat, enum cat_sid id, int bound, struct cat_gen *out)
{
	int rc = bound;
	if (rc == 0)
		rc = cat_next(cat, id);
	if (rc == 1)
		rc = gen_col_row(cat, id, out);
	else if (rc == 0)
		rc = -ENOENT;
	cat_reset(cat, id);
	return rc;
}

static int gen_get(struct cat *cat, uint64_t id, struct cat_gen *out)
{
	return gen_fetch(cat, G_GET, cat_bind(cat, G_GET, A_INT(id)), out);
}

static int gen_put(struct cat *cat, const struct cat_gen *g)
{
	int rc = cat_bind(cat, G_PUT, A_INT(g->id), A_INT(g->root), A_INT(g->state),
			  A_INT(g->version), A_INT(g->pinned), A_INT(g->committed_ns),
			  A_INT(g->ended_ns), A_TEXT(g->rule), A_INT(g->backup_root), A_TEXT(g->held));
	if (rc == 0)
		rc = cat_run(cat, G_PUT);
	assert(rc != 0 || cat_changes(cat) == 1);
	return rc;
}

/* The OPEN or COMMITTED generation rooted at ino, 0 if none. */
static int gen_root_of(struct cat *cat, uint64_t ino, uint64_t *id)
{
	return gen_query_int(cat, G_ROOT_OF, cat_bind(cat, G_ROOT_OF, A_INT(ino)), id);
}

static int gen_set_inode_gen(struct cat *cat, uint64_t ino, uint64_t gen)
{
	int rc = cat_bind(cat, G_SET_INODE_GEN, A_INT(ino), A_ID(gen));
	if (rc == 0)
		rc = cat_run(cat, G_SET_INODE_GEN);
	return rc;
}

/* ---- trees ---- */

/* Lists the tree under root in temp.gen_tree; numbered: each inode's copy
 * gets a number after `last`, in inode order. */
static int gen_tree_list(struct cat *cat, uint64_t root, bool numbered, uint64_t last)
{
	int rc = cat_run(cat, G_TREE_CLEAR);
	if (rc == 0 && numbered)
		rc = cat_bind(cat, G_TREE_FILL_NUMBERED, A_INT(root), A_INT(last));
	else if (rc == 0)
		rc = cat_bind(cat, G_TREE_FILL, A_INT(root));
	if (rc == 0)
		rc = cat_run(cat, numbered ? G_TREE_FILL_NUMBERED : G_TREE_FILL);
	return rc;
}

static int gen_tree_steps(struct cat *cat, const enum cat_sid *steps, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = cat_run(cat, steps[i]);
	return rc;
}

/* Deletes g's backup tree outright (its numbers were never handed out, so
 * it has no pending rows either; dropped all the same, should a caller have
 * written to one), releasing its chunk counts. */
static int gen_backup_drop(struct cat *cat, struct cat_gen *g)
{
	static const enum cat_sid steps[] = { R_X_TREE_DROP, G_TREE_X_DELETE, R_P_TREE_DROP,
					      G_TREE_P_DELETE, G_TREE_DIRENTS_DELETE,
					      G_TREE_INODES_DELETE };
	if (g->backup_root == 0)
		return 0;
	int rc = gen_tree_list(cat, g->backup_root, false, 0);
	if (rc == 0)
		rc = gen_tree_steps(cat, steps, sizeof(steps) / sizeof(steps[0]));
	if (rc == 0)
		g->backup_root = 0;
	return rc;
}

/* Copies g's committed tree as its backup (see the top of the file). */
static int gen_backup_make(struct cat *cat, struct cat_gen *g)
{
	static const enum cat_sid steps[] = { G_CLONE_INODES, G_CLONE_DIRENTS, R_X_TREE_TAKE,
					      G_CLONE_EXTENTS };
	uint64_t last = 0, copy = 0;
	assert(g->backup_root == 0 && g->root != 0);
	int rc = gen_query_int(cat, G_INODE_SEQ, 0, &last);
	if (rc == 0)
		rc = gen_tree_list(cat, g->root, true, last);
	if (rc == 0)
		rc = gen_tree_steps(cat, steps, sizeof(steps) / sizeof(steps[0]));
	if (rc == 0)
		rc = gen_query_int(cat, G_TREE_COPY_OF, cat_bind(cat, G_TREE_COPY_OF, A_INT(g->root)),
				   &copy);
	assert(rc != 0 || copy > last);
	if (rc == 0)
		g->backup_root = copy;
	return rc;
}

/* G1: the entry of g's series that names g's root, in *entry; -EIO (logged:
 * a corrupt catalog) if its name there names another inode or none. */
static int gen_root_entry(struct cat *cat, const struct cat_gen *g, uint64_t *entry)
{
	struct cat_inode named;
	int rc = cat_dirent_get(cat, g->series, g->name, entry, &named);
	if (rc == 0 && named.ino != g->root)
		rc = -ENOENT;
	if (rc == -ENOENT) {
		log_error("catalog %s: corrupt: generation %" PRIu64 " has root %" PRIu64 ", but"
			  " entry %" PRIu64 "/\"%s\" does not name it", cat->path, g->id, g->root,
			  g->series, g->name);
		return -EIO;
	}
	return rc;
}

/* Unlinks g's root from its series; every inode of its tree gets nlink 0 and
 * leaves the generation. ids (if not NULL) gets their numbers. */
static int gen_tree_remove(struct cat *cat, struct cat_gen *g, int64_t now,
			   struct cat_id_vec *ids)
{
	struct cat_inode root;
	uint64_t entry = 0;
	int rc = gen_root_entry(cat, g, &entry);
	if (rc == 0)
		rc = cat_inode_get(cat, g->root, &root);
	if (rc == 0)
		rc = gen_tree_list(cat, g->root, false, 0);
	if (rc == 0 && ids != NULL)
		rc = gen_ids_collect(cat, G_TREE_IDS, ids);
	if (rc == 0)
		rc = cat_dirent_delete(cat, entry);
	if (rc == 0)
		rc = cat_run(cat, G_TREE_DIRENTS_DELETE);
	if (rc == 0)
		rc = cat_bind(cat, G_TREE_UNLINK, A_INT(now));
	if (rc == 0)
		rc = cat_run(cat, G_TREE_UNLINK);
	if (rc == 0)
		rc = cat_dir_touch(cat, g->series, S_ISDIR(root.mode) ? -1 : 0, now);
	if (rc == 0)
		g->root = 0;
	return rc;
}

/* Links g's backup under its name: the previous version is back, COMMITTED,
 * or HELD if it was (G5). */
static int gen_backup_restore(struct cat *cat, struct cat_gen *g, int64_t now)
{
	struct cat_inode backup;
	/* only a new version (OPEN, its tree just removed) goes back to its backup */
	assert(g->state == GEN_OPEN);
	assert(g->root == 0 && g->backup_root != 0 && g->version > 1);
	int rc = cat_inode_get(cat, g->backup_root, &backup);
	if (rc == 0)
		rc = cat_dirent_insert(cat, g->series, g->name, g->backup_root);
	if (rc == 0)
		rc = cat_dir_touch(cat, g->series, S_ISDIR(backup.mode) ? 1 : 0, now);
	if (rc == 0) {
		g->root = g->backup_root;
		g->backup_root = 0;
		g->state = g->held[0] ? GEN_HELD : GEN_COMMITTED;
		g->version--;
	}
	/* BACKING's manifest of it names its series by the path it had when
	 * written: the series may have moved meanwhile (gen_series_moved
	 * re-queues COMMITTED ones only), and a version the rewrite caught
	 * before it was durable had its manifest row go stale */
	if (rc == 0 && g->state == GEN_COMMITTED)
		rc = cat_up_gen_committed_txn(cat, g->id, g->version);
	return rc;
}

/* Ends g where its tree stands (renamed away, replaced, its root removed):
 * DELETED, backup dropped, the tree left to the caller. */
static int gen_end_in_place(struct cat *cat, struct cat_gen *g, const char *rule, int64_t now)
{
	/* callers found it live (GEN_LIVE, or the states gen_delete_txn accepts) */
	assert(g->state == GEN_OPEN || g->state == GEN_COMMITTED || g->state == GEN_HELD);
	int rc = gen_backup_drop(cat, g);
	if (rc == 0) {
		g->state = GEN_DELETED;
		g->root = 0;
		g->held[0] = '\0';
		g->ended_ns = now;
		gen_set_rule(g, rule, "");
		rc = gen_put(cat, g);
	}
	if (rc == 0)
		rc = cat_up_gen_deleted_txn(cat, g->id, g->version);
	return rc;
}

/* ---- state changes, inside a transaction ---- */

/* The state a call needs, else: -EALREADY if it is already where the call
 * leads, -ENOENT if ended, -EINVAL otherwise. */
static int gen_want(const struct cat_gen *g, int want, int already)
{
	if (g->state == want)
		return 0;
	if (g->state == already)
		return -EALREADY;
	return g->state == GEN_ABORTED || g->state == GEN_DELETED ? -ENOENT : -EINVAL;
}

static int gen_abort_txn(struct cat *cat, uint64_t id, const char *rule, struct cat_id_vec *ids,
			 struct cat_gen *g)
{
	int64_t now = cat_now_ns();
	int rc = gen_get(cat, id, g);
	if (rc == 0)
		rc = gen_want(g, GEN_OPEN, GEN_ABORTED);
	if (rc == 0)
		rc = gen_tree_remove(cat, g, now, ids);
	if (rc == 0 && g->backup_root != 0) {
		rc = gen_backup_restore(cat, g, now);
		gen_set_rule(g, rule, GEN_RESTORED_SUFFIX);
	} else if (rc == 0) {
		assert(g->state == GEN_OPEN && g->root == 0); /* gen_want, gen_tree_remove */
		g->state = GEN_ABORTED;
		g->held[0] = '\0';
		g->ended_ns = now;
		gen_set_rule(g, rule, "");
	}
	if (rc == 0)
		rc = gen_put(cat, g);
	return rc;
}

/* expire: keep-latest-k's delete, decided outside this transaction: the
 * generation must still be COMMITTED and unpinned (-EBUSY otherwise). */
/* G6: -EBUSY unless `keep` newer saves of g's owner, committed by a strong
 * rule, still exist, and, g durable, one of them is durable too (the
 * owner's newest durable save stays while the newer ones are only in the
 * cache); and while g is its owner's most recently committed save. */
static int gen_keep_still_newer(struct cat *cat, const struct cat_gen *g, uint32_t keep)
{
	if (keep == 0)
		return 0;
	int rc = cat_bind(cat, G_KEEP_NEWER, A_INT(g->id), A_INT(g->series), A_INT(g->root),
			  A_INT(g->step), A_INT(g->committed_ns), A_INT(g->state == GEN_HELD));
	uint64_t newer = 0, newer_durable = 0;
	bool durable = false, latest = false;
	if (rc == 0)
		rc = cat_next(cat, G_KEEP_NEWER);
	if (rc == 1) {
		newer = (uint64_t)cat_col_int(cat, G_KEEP_NEWER, 0);
		newer_durable = (uint64_t)cat_col_int(cat, G_KEEP_NEWER, 1);
		durable = cat_col_int(cat, G_KEEP_NEWER, 2) != 0;
		latest = cat_col_int(cat, G_KEEP_NEWER, 3) != 0;
		rc = 0;
	}
	cat_reset(cat, G_KEEP_NEWER);
	if (rc == 0 && (newer < keep || latest || (durable && newer_durable == 0)))
		return -EBUSY;
	return rc;
}

/* G11: -ETXTBSY if an inode of g (its current tree: inodes.gen read in
 * this transaction) has a write handle open in this daemon, as writing
 * (the daemon's node table) lists them now, under the catalog lock. */
static int gen_keep_unwritten(struct cat *cat, const struct cat_gen *g, cat_writing_fn writing,
			      void *warg)
{
	struct cat_id_vec inos = { 0 };
	int rc = writing(warg, &inos);
	if (rc != 0)
		log_error("catalog %s: generation %s (step %" PRIu64 ") not expired: cannot list"
			  " the files open for writing: %s", cat->path, g->name, g->step,
			  strerror(-rc));
	for (size_t i = 0; rc == 0 && i < inos.n; i++) {
		uint64_t gen = 0;
		int grc = cat_gen_of_txn(cat, inos.v[i], &gen);
		if (grc != 0 && grc != -ENOENT) /* -ENOENT: released meanwhile */
			rc = grc;
		else if (grc == 0 && gen == g->id)
			rc = -ETXTBSY;
	}
	cat_id_vec_free(&inos);
	return rc;
}

/* expire: keep-latest-k's decision, re-checked here (cat_gen_expire, G6);
 * writing non-NULL: nor while a file of a COMMITTED one is open for
 * writing (G11) */
static int gen_delete_txn(struct cat *cat, uint64_t id, const char *rule, bool expire,
			  uint32_t keep, cat_writing_fn writing, void *warg,
			  struct cat_id_vec *ids)
{
	struct cat_gen g;
	int64_t now = cat_now_ns();
	int rc = gen_get(cat, id, &g);
	if (rc == 0 && g.state != GEN_OPEN && g.state != GEN_COMMITTED && g.state != GEN_HELD)
		rc = -ENOENT;
	if (rc == 0 && expire && ((g.state != GEN_COMMITTED && g.state != GEN_HELD) || g.pinned))
		rc = -EBUSY;
	if (rc == 0 && expire)
		rc = gen_keep_still_newer(cat, &g, keep);
	if (rc == 0 && expire && writing && g.state == GEN_COMMITTED)
		rc = gen_keep_unwritten(cat, &g, writing, warg);
	if (rc == 0)
		rc = gen_tree_remove(cat, &g, now, ids);
	if (rc == 0)
		rc = gen_end_in_place(cat, &g, rule, now);
	return rc;
}

static int gen_unsettled(struct cat *cat, uint64_t id, bool live, char *reason, size_t size);
static int gen_lost_chunk_of(struct cat *cat, uint64_t id, char *reason, size_t size);

/* G9: a rule that is an explicit decision (an admin's commit, the commit
 * xattr); every other one is a signal or a weak rule. */
static bool gen_rule_explicit(const char *rule)
{
	return strcmp(rule, "explicit") == 0 || strcmp(rule, "admin") == 0;
}

static int gen_commit_txn(struct cat *cat, uint64_t id, const char *rule)
{
	struct cat_gen g;
	char unsettled[GEN_HELD_MAX] = "";
	int rc = gen_get(cat, id, &g);
	if (rc == 0 && g.state != GEN_HELD) /* HELD: an explicit decision promotes it */
		rc = gen_want(&g, GEN_OPEN, GEN_COMMITTED);
	/* G9: a save a file of which failed its last close, or whose changes
	 * were lost, is committed by an explicit decision only */
	if (rc == 0 && !gen_rule_explicit(rule) && !cat_defer_gen_lost(cat, id))
		rc = gen_unsettled(cat, id, true, unsettled, sizeof(unsettled));
	/* G13: nor, but by the admin's decision, one naming a lost chunk */
	if (rc == 0 && gen_rule_explicit(rule) && strcmp(rule, "admin") != 0)
		rc = gen_lost_chunk_of(cat, id, unsettled, sizeof(unsettled));
	if (rc == 0 && strcmp(rule, "admin") != 0 &&
	    (unsettled[0] || (!gen_rule_explicit(rule) && cat_defer_gen_lost(cat, id)))) {
		log_warn("catalog %s: generation %s (step %" PRIu64 ") not committed by rule %s: %s"
			 " (generation.h G9, G13)", cat->path, g.name, g.step, rule,
			 unsettled[0] ? unsettled : GEN_LOST_REASON " (a failed catalog transaction)");
		rc = -ENOTRECOVERABLE;
	}
	if (rc == 0 && cat_defer_gen_lost(cat, id)) {
		/* catalog_defer.c D4: what FUSE answered inside it is not all there */
		log_error("catalog %s: generation %s (step %" PRIu64 ") cannot commit: changes made"
			  " in it were lost with a failed catalog transaction; it stays open and is"
			  " rolled back", cat->path, g.name, g.step);
		rc = -EIO;
	}
	if (rc == 0 && gen_rule_explicit(rule)) /* G9: the decision takes it as it is */
		rc = cat_bind(cat, G_WRITING_CLEAR_GEN, A_INT(id));
	if (rc == 0 && gen_rule_explicit(rule))
		rc = cat_run(cat, G_WRITING_CLEAR_GEN);
	if (rc == 0)
		rc = gen_backup_drop(cat, &g);
	if (rc == 0) {
		/* OPEN, or HELD promoted; no backup left to restore (G3) */
		assert((g.state == GEN_OPEN || g.state == GEN_HELD) && g.backup_root == 0);
		g.state = GEN_COMMITTED;
		g.held[0] = '\0';
		g.committed_ns = cat_now_ns();
		gen_set_rule(&g, rule, "");
		rc = gen_put(cat, &g);
	}
	if (rc == 0)
		rc = cat_up_gen_committed_txn(cat, g.id, g.version);
	return rc;
}

/* base, cut short so that base + tail fits CAT_NAME_MAX, then tail */
static void gen_name_with_tail(const char *base, const char *tail, char out[CAT_NAME_MAX + 1])
{
	size_t n = strlen(tail), keep = strlen(base);
	assert(n < CAT_NAME_MAX);
	if (keep > CAT_NAME_MAX - n)
		keep = CAT_NAME_MAX - n;
	snprintf(out, CAT_NAME_MAX + 1, "%.*s%s", (int)keep, base, tail);
}

void cat_gen_suffixed_name(const char *base, const char *suffix, uint64_t id,
			   char out[CAT_NAME_MAX + 1])
{
	char tail[64];
	int n = snprintf(tail, sizeof(tail), "%s%" PRIu64, suffix, id);
	assert(n > 0 && (size_t)n < sizeof(tail));
	gen_name_with_tail(base, tail, out);
}

int cat_gen_kept_name(const char *base, uint64_t id, cat_name_taken_fn taken, void *arg,
		      char out[CAT_NAME_MAX + 1])
{
	for (unsigned try = 1; try <= GEN_KEPT_NAME_TRIES; try++) {
		char tail[64];
		if (try == 1)
			snprintf(tail, sizeof(tail), "%s%" PRIu64, GEN_REWRITE_SUFFIX, id);
		else
			snprintf(tail, sizeof(tail), "%s%" PRIu64 "-%u", GEN_REWRITE_SUFFIX, id, try);
		gen_name_with_tail(base, tail, out);
		int rc = taken(arg, out);
		if (rc <= 0)
			return rc;
	}
	return -EEXIST;
}

/* cat_name_taken_fn for the one-node catalog: arg is a gen_taken */
struct gen_taken {
	struct cat *cat;
	uint64_t dir;
};

static int gen_name_taken(void *arg, const char *name)
{
	struct gen_taken *t = arg;
	struct cat_inode in;
	uint64_t entry;
	int rc = cat_dirent_get(t->cat, t->dir, name, &entry, &in);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

void cat_gen_rewrite_reason(const char *name, uint32_t version, const char *why,
			    char out[GEN_HELD_MAX])
{
	snprintf(out, GEN_HELD_MAX, "version %" PRIu32 " of %s, rolled back (%s); version %" PRIu32
		 " is back at its name: ckptfs-admin commit keeps this one, rm drops it",
		 version, name, why, version - 1);
}

static int gen_move_row(struct cat *cat, struct cat_gen *g, uint64_t newparent,
			const char *newname, uint64_t step);

/* G10: g, an OPEN new version about to give way to its backup, keeps its
 * tree as a HELD generation of its own (kept), linked beside it under
 * "<name>.rewrite-<id>", its inodes carrying the new id, if it names a
 * chunk the backup does not; else (removals, truncates, renames: nothing
 * written is lost) its tree is removed (ids gets its inodes) and kept->id
 * is 0. g's root is then 0, for gen_backup_restore. */
static int gen_rewrite_keep(struct cat *cat, struct cat_gen *g, const char *rule,
			    const char *why, int64_t now, struct cat_id_vec *ids,
			    struct cat_gen *kept)
{
	kept->id = 0;
	uint64_t entry = 0, id = 0;
	char name[CAT_NAME_MAX + 1];
	assert(g->state == GEN_OPEN && g->backup_root != 0 && g->version > 1); /* G3 */
	int rc = gen_root_entry(cat, g, &entry);
	if (rc != 0)
		return rc;
	uint64_t new_bytes = 0;
	if (rc == 0)
		rc = gen_tree_list(cat, g->root, false, 0);
	if (rc == 0)
		rc = gen_query_int(cat, G_TREE_NEW_BYTES,
				   cat_bind(cat, G_TREE_NEW_BYTES, A_INT(g->backup_root)), &new_bytes);
	if (rc == 0 && new_bytes == 0) /* removals, truncates, renames: nothing to keep */
		return gen_tree_remove(cat, g, now, ids);
	if (rc == 0)
		rc = cat_gen_start_txn(cat, g->series, g->root, g->name, g->step, &id);
	if (rc == 0)
		rc = gen_get(cat, id, kept);
	struct gen_taken taken = { .cat = cat, .dir = g->series };
	if (rc == 0)
		rc = cat_gen_kept_name(g->name, id, gen_name_taken, &taken, name);
	if (rc == 0)
		rc = gen_move_row(cat, kept, g->series, name, g->step);
	if (rc == 0)
		rc = cat_dirent_delete(cat, entry);
	if (rc == 0)
		rc = cat_dirent_insert(cat, g->series, name, g->root);
	if (rc == -EEXIST)
		log_error("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\": version %" PRIu32
			  " not rolled back: every name it could be kept under (\"%s\" and %d"
			  " more) is taken (generation.h G10); it stays open", cat->path, g->id,
			  g->series, g->name, g->version, name, GEN_KEPT_NAME_TRIES - 1);
	if (rc == 0)
		rc = cat_dir_touch(cat, g->series, 0, now);
	if (rc == 0) /* temp.gen_tree still lists the tree */
		rc = cat_bind(cat, G_TREE_SET_GEN, A_INT(id));
	if (rc == 0)
		rc = cat_run(cat, G_TREE_SET_GEN);
	if (rc == 0) {
		kept->state = GEN_HELD;
		cat_gen_rewrite_reason(g->name, g->version, why, kept->held);
		gen_set_rule(kept, rule, "");
		rc = gen_put(cat, kept);
	}
	if (rc == 0)
		g->root = 0;
	return rc;
}

/* OPEN → HELD; a new version is rolled back to its backup instead (G5),
 * and kept HELD beside it (G10: kept gets its row, id 0 if it held no
 * bytes of its own and was removed: ids gets its inodes). */
static int gen_hold_txn(struct cat *cat, uint64_t id, const char *rule, const char *reason,
			struct cat_id_vec *ids, struct cat_gen *g, struct cat_gen *kept,
			bool *rolled_back)
{
	int64_t now = cat_now_ns();
	int rc = gen_get(cat, id, g);
	*rolled_back = false;
	if (rc == 0)
		rc = gen_want(g, GEN_OPEN, GEN_HELD);
	if (rc == 0 && g->backup_root != 0) {
		rc = gen_rewrite_keep(cat, g, rule, reason[0] ? reason : "not proven complete", now,
				      ids, kept);
		if (rc == 0)
			rc = gen_backup_restore(cat, g, now);
		if (rc == 0)
			gen_set_rule(g, rule, GEN_RESTORED_SUFFIX);
		*rolled_back = rc == 0;
	} else if (rc == 0) {
		assert(g->state == GEN_OPEN && g->backup_root == 0); /* a first version */
		g->state = GEN_HELD;
		snprintf(g->held, sizeof(g->held), "%s", reason[0] ? reason : "not proven complete");
		gen_set_rule(g, rule, "");
	}
	if (rc == 0)
		rc = gen_put(cat, g);
	return rc;
}

static int gen_reopen_txn(struct cat *cat, uint64_t id)
{
	struct cat_gen g;
	int rc = gen_get(cat, id, &g);
	if (rc == 0 && g.state != GEN_HELD) /* a HELD one keeps its reason for an abort */
		rc = gen_want(&g, GEN_COMMITTED, GEN_OPEN);
	if (rc == 0)
		rc = gen_backup_make(cat, &g);
	if (rc == 0) {
		/* COMMITTED or HELD, its committed tree now copied as the backup (G3) */
		assert((g.state == GEN_COMMITTED || g.state == GEN_HELD) && g.backup_root != 0);
		g.state = GEN_OPEN;
		g.version++;
		rc = gen_put(cat, &g);
	}
	return rc;
}

/* ---- hooks for catalog.c ---- */

int cat_gen_of_txn(struct cat *cat, uint64_t ino, uint64_t *gen_id)
{
	int rc = cat_bind(cat, G_INODE_GEN, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, G_INODE_GEN);
	if (rc == 1) {
		*gen_id = (uint64_t)cat_col_int(cat, G_INODE_GEN, 0); /* NULL reads as 0 */
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, G_INODE_GEN);
	return rc;
}

int cat_gen_in_open_txn(struct cat *cat, uint64_t ino, bool *open, uint64_t *gen_id)
{
	*open = false;
	*gen_id = 0;
	int rc = cat_bind(cat, G_INODE_GEN_STATE, A_INT(ino));
	if (rc == 0)
		rc = cat_next(cat, G_INODE_GEN_STATE);
	if (rc == 1) {
		uint64_t id = (uint64_t)cat_col_int(cat, G_INODE_GEN_STATE, 0); /* NULL reads as 0 */
		/* a gen naming no generation row (state NULL, which would read as
		 * GEN_OPEN's 0) is not open */
		bool has_state = sqlite3_column_type(cat->stmt[G_INODE_GEN_STATE], 1) != SQLITE_NULL;
		*open = id != 0 && has_state && cat_col_int(cat, G_INODE_GEN_STATE, 1) == GEN_OPEN;
		*gen_id = *open ? id : 0;
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	cat_reset(cat, G_INODE_GEN_STATE);
	return rc;
}

int cat_gen_start_txn(struct cat *cat, uint64_t series, uint64_t root, const char *name,
		      uint64_t step, uint64_t *gen_id)
{
	assert(step <= INT64_MAX);
	int rc = cat_bind(cat, G_INSERT, A_INT(series), A_INT(root), A_TEXT(name), A_INT(step),
			  A_INT(cat_now_ns()));
	if (rc == 0)
		rc = cat_run(cat, G_INSERT);
	if (rc == 0) {
		*gen_id = (uint64_t)sqlite3_last_insert_rowid(cat->db);
		rc = gen_set_inode_gen(cat, root, *gen_id);
	}
	return rc;
}

/* A directory outside generations moved: the committed generations whose
 * series is it or under it get their manifest written again, as a manifest
 * names its series by path (a rebuild would put them back under the old
 * one, where a new run may have its own). The same version's manifest
 * replaces the old one on BACKING in one rename, so no instant has the
 * save described nowhere. */
static int gen_series_moved(struct cat *cat, uint64_t dir)
{
	struct cat_id_vec moved = { 0 };
	int rc = cat_bind(cat, G_SERIES_UNDER, A_INT(dir));
	if (rc == 0)
		rc = gen_ids_collect(cat, G_SERIES_UNDER, &moved);
	for (size_t i = 0; i < moved.n && rc == 0; i++) {
		struct cat_gen g;
		rc = gen_get(cat, moved.v[i], &g);
		assert(rc != 0 || g.state == GEN_COMMITTED); /* G_SERIES_UNDER */
		if (rc == 0)
			rc = cat_up_gen_committed_txn(cat, g.id, g.version);
	}
	cat_id_vec_free(&moved);
	return rc;
}

/* G8: -EBUSY, with one log line, if g is a rewrite (OPEN with a backup):
 * ending it where it stands would drop the backup, the only copy of the
 * committed version, and leave the half-written one as a plain tree (or, under
 * a generation name, commit it by rule "rename"). Refusing loses nothing:
 * the rewrite goes on, and once it commits (or is aborted: ckptfs-admin rm
 * --force) the rename works. Rolling it back first would drop the bytes the
 * trainer is writing. */
static int gen_move_refused(struct cat *cat, const struct cat_gen *g, const char *newname,
			    bool stays)
{
	if (g->state == GEN_HELD && !stays) {
		log_warn("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\" not moved to \"%s\":"
			 " it is held (not proven complete), and a move that is no plain rename to"
			 " a step name (an exchange, another name, a move into a save) would show"
			 " its files as complete ones; decide it first: ckptfs-admin commit or rm",
			 cat->path, g->id, g->series, g->name, newname);
		return -EBUSY;
	}
	if (g->backup_root == 0)
		return 0;
	assert(g->state == GEN_OPEN); /* G3 */
	log_warn("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\" not moved to \"%s\":"
		 " version %" PRIu32 " is being written over version %" PRIu32 ", whose only"
		 " copy it would drop; wait for its commit, or abort it with ckptfs-admin rm"
		 " --force", cat->path, g->id, g->series, g->name, newname, g->version,
		 g->version - 1);
	return -EBUSY;
}

/* G8: g's root was renamed to newparent/newname, a generation name of step:
 * the same generation, its state, version and reason kept, under it. */
static int gen_move_row(struct cat *cat, struct cat_gen *g, uint64_t newparent,
			const char *newname, uint64_t step)
{
	assert(step <= INT64_MAX && strlen(newname) <= CAT_NAME_MAX);
	int rc = cat_bind(cat, G_MOVE, A_INT(g->id), A_INT(newparent), A_TEXT(newname),
			  A_INT(step));
	if (rc == 0)
		rc = cat_run(cat, G_MOVE);
	if (rc == 0) {
		g->series = newparent;
		snprintf(g->name, sizeof(g->name), "%s", newname);
		g->step = step;
	}
	return rc;
}

int cat_gen_moved_txn(struct cat *cat, const struct cat_inode *attr, uint64_t newparent,
		      const char *newname, const struct cat_gen_spec *spec, uint64_t *new_gen_id)
{
	struct cat_gen g;
	struct cat_id_vec nested = { 0 };
	uint64_t old = 0, target = 0, rooted = 0, leak = 0;
	int64_t now = cat_now_ns();
	int rc = cat_gen_of_txn(cat, attr->ino, &old);
	if (rc == 0)
		rc = cat_gen_of_txn(cat, newparent, &target);
	if (rc == 0 && spec != NULL && target != 0)
		rc = -EINVAL; /* a series is outside every generation */
	if (rc == 0 && old != 0)
		rc = gen_root_of(cat, attr->ino, &rooted);
	if (rc == 0 && rooted != 0)
		rc = gen_get(cat, rooted, &g);
	if (rc == 0 && rooted != 0)
		rc = gen_move_refused(cat, &g, newname, spec != NULL);
	bool keep = rc == 0 && rooted != 0 && spec != NULL && g.state == GEN_HELD;
	if (keep) /* G8: held it was, held it stays, under its new name */
		rc = gen_move_row(cat, &g, newparent, newname, spec->step);
	else if (rc == 0 && rooted != 0) /* moved, so no longer the root it was */
		rc = gen_end_in_place(cat, &g, "renamed", now);
	if (rc == 0 && spec != NULL && !keep)
		rc = cat_gen_start_txn(cat, newparent, attr->ino, newname, spec->step, &target);
	else if (keep)
		target = g.id; /* old == target: the tree keeps its gen */
	if (rc == 0 && new_gen_id != NULL) /* a new one only: rule "rename" commits it */
		*new_gen_id = spec != NULL && !keep ? target : 0;
	if (rc == 0 && old == 0 && target == 0 && S_ISDIR(attr->mode))
		rc = gen_series_moved(cat, attr->ino);
	if (rc != 0 || old == target)
		return rc;

	/* The subtree changes generation: it must hold all its links, and the
	 * generations rooted inside it (a series moved into one) end. */
	rc = gen_tree_list(cat, attr->ino, false, 0);
	if (rc == 0 && !S_ISDIR(attr->mode) && attr->nlink > 1)
		rc = -EXDEV;
	if (rc == 0)
		rc = gen_query_int(cat, G_TREE_XDEV, cat_bind(cat, G_TREE_XDEV, A_INT(attr->ino)),
				   &leak);
	if (rc == 0 && leak != 0)
		rc = -EXDEV;
	if (rc == 0)
		rc = cat_bind(cat, G_TREE_NESTED, A_INT(target));
	if (rc == 0)
		rc = gen_ids_collect(cat, G_TREE_NESTED, &nested);
	if (rc == 0)
		rc = cat_bind(cat, G_TREE_SET_GEN, A_ID(target));
	if (rc == 0)
		rc = cat_run(cat, G_TREE_SET_GEN);
	for (size_t i = 0; i < nested.n && rc == 0; i++) {
		rc = gen_get(cat, nested.v[i], &g);
		if (rc == 0)
			rc = gen_move_refused(cat, &g, newname, false);
		if (rc == 0)
			rc = gen_end_in_place(cat, &g, "renamed", now);
	}
	cat_id_vec_free(&nested);
	return rc;
}

int cat_gen_unlinked_txn(struct cat *cat, uint64_t ino, const char *rule)
{
	struct cat_gen g;
	uint64_t id = 0;
	int rc = gen_root_of(cat, ino, &id);
	if (rc != 0 || id == 0)
		return rc;
	rc = gen_get(cat, id, &g);
	if (rc == 0)
		rc = gen_end_in_place(cat, &g, rule, cat_now_ns());
	if (rc == 0) /* had it links left, it still leaves the generation */
		rc = gen_set_inode_gen(cat, ino, 0);
	return rc;
}

/* G13: the reason naming a chunk of generation id's files found lost before
 * its upload (upload.h U14), "" if none. */
static int gen_lost_chunk_of(struct cat *cat, uint64_t id, char *reason, size_t size)
{
	int rc = cat_bind(cat, G_LOST_CHUNK_OF_GEN, A_INT(id));
	if (rc == 0)
		rc = cat_next(cat, G_LOST_CHUNK_OF_GEN);
	if (rc == 1) {
		sqlite3_stmt *st = cat->stmt[G_LOST_CHUNK_OF_GEN];
		const char *hex = (const char *)sqlite3_column_text(st, 0);
		const char *name = (const char *)sqlite3_column_text(st, 2);
		gen_lost_chunk_reason(hex ? hex : "", name ? name : "",
				      (uint64_t)sqlite3_column_int64(st, 1), NULL, reason, size);
		rc = 0;
	}
	cat_reset(cat, G_LOST_CHUNK_OF_GEN);
	return rc;
}

/* G7: the reason a crash's OPEN generation is held when a file of it was
 * being written (or its changes were lost), in reason; "" if none was.
 * live (G9: asked by a commit while the daemon runs, when no handle of the
 * save is open for writing): a marked file is one whose last close failed. */
static int gen_unsettled(struct cat *cat, uint64_t id, bool live, char *reason, size_t size)
{
	int rc = cat_bind(cat, G_UNSETTLED, A_INT(id));
	reason[0] = '\0';
	if (rc == 0)
		rc = cat_next(cat, G_UNSETTLED);
	if (rc == 1) {
		sqlite3_stmt *st = cat->stmt[G_UNSETTLED];
		int64_t mark = sqlite3_column_int64(st, 0);
		const char *name = (const char *)sqlite3_column_text(st, 2);
		if (mark == 2)
			snprintf(reason, size, GEN_LOST_REASON " (a failed catalog transaction)");
		else if (live)
			snprintf(reason, size, GEN_FAILED_REASON ": \"%s\" (inode %lld) is as of its"
				 " last successful close or fsync", name ? name : "",
				 (long long)sqlite3_column_int64(st, 1));
		else
			snprintf(reason, size, GEN_UNCLOSED_REASON ": \"%s\" (inode %lld)",
				 name ? name : "", (long long)sqlite3_column_int64(st, 1));
		rc = 0;
	}
	cat_reset(cat, G_UNSETTLED);
	return rc == 0 && reason[0] == '\0' ? gen_lost_chunk_of(cat, id, reason, size) : rc;
}

/* G4: a crash proves nothing about an OPEN generation, so it is held (its
 * files as their last recorded close left them: what was written after is
 * what the crash took); a new version gives way to its backup. G7: one with
 * a file marked being written gets a reason of its own, which the content
 * rule does not judge (fs/gen.c re-proves only GEN_CRASH_REASON). Then no
 * writer is left, so no mark either. */
int cat_gen_recover_txn(struct cat *cat)
{
	struct cat_id_vec open = { 0 };
	int rc = gen_ids_collect(cat, G_OPEN_IDS, &open);
	for (size_t i = 0; i < open.n && rc == 0; i++) {
		struct cat_gen g, kept;
		bool rolled_back;
		char unsettled[GEN_HELD_MAX];
		rc = gen_unsettled(cat, open.v[i], false, unsettled, sizeof(unsettled));
		if (rc == 0)
			rc = gen_hold_txn(cat, open.v[i], "crash",
					  unsettled[0] ? unsettled : GEN_CRASH_REASON " (crash or kill)",
					  NULL, &g, &kept, &rolled_back);
		if (rc == 0 && rolled_back && kept.id == 0)
			log_warn("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\" was open at"
				 " the last stop as a new version that wrote nothing of its own"
				 " (removals only): version %" PRIu32 " rolled back, version %" PRIu32
				 " restored (%s)", cat->path, g.id, g.series, g.name, g.version + 1,
				 g.version, g.state == GEN_HELD ? "held" : "committed");
		else if (rc == 0 && rolled_back)
			log_warn("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\" was open at"
				 " the last stop as a new version: version %" PRIu32 " restored (%s);"
				 " version %" PRIu32 " kept held as \"%s\" (generation %" PRIu64 ","
				 " not shown; ckptfs-admin commit or rm decide)", cat->path, g.id,
				 g.series, g.name, g.version, g.state == GEN_HELD ? "held" : "committed",
				 g.version + 1, kept.name, kept.id);
		else if (rc == 0)
			log_warn("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\" was open at"
				 " the last stop: held, not shown, its files kept (ckptfs-admin"
				 " list --all; commit or rm decide)%s%s", cat->path, g.id, g.series,
				 g.name, unsettled[0] ? "; not proven by content: " : "", unsettled);
	}
	cat_id_vec_free(&open);
	if (rc == 0)
		rc = cat_run(cat, G_WRITING_CLEAR_ALL);
	return rc;
}

int cat_gen_mark_lost(struct cat *cat, const uint64_t *ids, size_t n, bool all)
{
	int rc = 0;
	if (all)
		rc = cat_run(cat, G_LOST_MARK_ALL);
	for (size_t i = 0; i < n && !all && rc == 0; i++) {
		rc = cat_bind(cat, G_LOST_MARK, A_INT(ids[i]));
		if (rc == 0)
			rc = cat_run(cat, G_LOST_MARK);
	}
	return rc;
}

/* ---- sizes ---- */

static int gen_stats_minus_backup(struct cat *cat, struct cat_gen *g);

/* files and logical_bytes of g's live tree (an index range), and with
 * exclusive, exclusive_bytes of all it owns (backup included: deleting g
 * would free it too), which costs a chunk lookup per extent of g (the
 * dearest size by far; figures in docs/BENCH.md). Ended generations own
 * nothing (G2). */
static int gen_stats(struct cat *cat, struct cat_gen *g, bool exclusive)
{
	sqlite3_stmt *st;
	if (g->state != GEN_OPEN && g->state != GEN_COMMITTED && g->state != GEN_HELD)
		return 0;
	int rc = cat_bind(cat, G_STATS_FILES, A_INT(g->id));
	if (rc == 0 && (rc = cat_next(cat, G_STATS_FILES)) == 1) {
		st = cat->stmt[G_STATS_FILES];
		g->files = (uint64_t)sqlite3_column_int64(st, 0);
		g->logical_bytes = (uint64_t)sqlite3_column_int64(st, 1);
		rc = 0;
	}
	cat_reset(cat, G_STATS_FILES);
	if (rc == 0 && exclusive)
		rc = gen_query_int(cat, G_STATS_EXCL, cat_bind(cat, G_STATS_EXCL, A_INT(g->id)),
				   &g->exclusive_bytes);
	if (rc == 0)
		rc = gen_stats_minus_backup(cat, g);
	return rc;
}

/* The backup tree carries the id too, but is no part of what a generation
 * shows: its files come off the counts (a rare case: OPEN, version > 1). */
static int gen_stats_minus_backup(struct cat *cat, struct cat_gen *g)
{
	if (g->backup_root == 0)
		return 0;
	int rc = cat_bind(cat, G_STATS_TREE_FILES, A_INT(g->backup_root));
	if (rc == 0 && (rc = cat_next(cat, G_STATS_TREE_FILES)) == 1) {
		sqlite3_stmt *st = cat->stmt[G_STATS_TREE_FILES];
		uint64_t files = (uint64_t)sqlite3_column_int64(st, 0);
		uint64_t bytes = (uint64_t)sqlite3_column_int64(st, 1);
		g->files -= files <= g->files ? files : g->files;
		g->logical_bytes -= bytes <= g->logical_bytes ? bytes : g->logical_bytes;
		rc = 0;
	}
	cat_reset(cat, G_STATS_TREE_FILES);
	return rc;
}

/* ---- public calls ---- */

int cat_gen_of(struct cat *cat, uint64_t ino, uint64_t *gen_id)
{
	if (cat->shared) return catshg_gen_of(cat, ino, gen_id);
	cat_lock(cat);
	int rc = cat_gen_of_txn(cat, ino, gen_id);
	cat_unlock(cat);
	return rc;
}

static int gen_get_sized(struct cat *cat, uint64_t id, bool exclusive, struct cat_gen *out)
{
	cat_lock(cat);
	int rc = cat_begin_read(cat);
	if (rc == 0)
		rc = gen_get(cat, id, out);
	if (rc == 0)
		rc = gen_stats(cat, out, exclusive);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_gen_get(struct cat *cat, uint64_t id, struct cat_gen *out)
{
	if (cat->shared) return catshg_get(cat, id, out);
	return gen_get_sized(cat, id, true, out);
}

int cat_gen_get_brief(struct cat *cat, uint64_t id, struct cat_gen *out)
{
	if (cat->shared) return catshg_get(cat, id, out);
	return gen_get_sized(cat, id, false, out);
}

int cat_gen_find(struct cat *cat, uint64_t series, const char *name, struct cat_gen *out)
{
	if (cat->shared) return catshg_find(cat, series, name, out);
	if (name == NULL)
		return -EINVAL;
	cat_lock(cat);
	int rc = gen_fetch(cat, G_FIND_NAME, cat_bind(cat, G_FIND_NAME, A_INT(series),
						       A_TEXT(name)), out);
	cat_unlock(cat);
	return rc;
}

int cat_gen_find_step(struct cat *cat, uint64_t series, uint64_t step, struct cat_gen *out)
{
	if (cat->shared) return catshg_find_step(cat, series, step, out);
	if (step > INT64_MAX)
		return -ENOENT;
	cat_lock(cat);
	int rc = gen_fetch(cat, G_FIND_STEP, cat_bind(cat, G_FIND_STEP, A_INT(series),
						       A_INT(step)), out);
	cat_unlock(cat);
	return rc;
}

/* Rows in one read; then each live generation's row again with its sizes,
 * one generation per lock hold: sizing looks up every extent's chunk, and a
 * list of hundreds of large generations must not stall every other call for
 * seconds. Each entry is consistent in itself, as of when it was sized. */
static int gen_list(struct cat *cat, uint64_t series, bool all, bool exclusive, cat_gen_fn fn,
		    void *arg)
{
	struct cat_gen_vec list = { 0 };
	struct cat_gen row;
	cat_lock(cat);
	int rc = cat_bind(cat, G_LIST, A_INT(series), A_INT(all));
	while (rc == 0 && (rc = cat_next(cat, G_LIST)) == 1) {
		rc = gen_col_row(cat, G_LIST, &row);
		if (rc == 0 && (rc = cat_gen_vec_add(&list, &row)) != 0)
			log_error("catalog %s: cannot list generations: out of memory", cat->path);
	}
	cat_reset(cat, G_LIST);
	cat_unlock(cat);

	struct cat_gen *rows = list.v;
	for (size_t i = 0; i < list.n && rc == 0; i++) {
		if (rows[i].state == GEN_OPEN || rows[i].state == GEN_COMMITTED || rows[i].state == GEN_HELD) {
			cat_lock(cat);
			rc = cat_begin_read(cat);
			if (rc == 0)
				rc = gen_get(cat, rows[i].id, &rows[i]);
			if (rc == 0)
				rc = gen_stats(cat, &rows[i], exclusive);
			rc = cat_end(cat, rc);
			cat_unlock(cat);
		}
		int frc = rc == 0 ? fn(arg, &rows[i]) : 0;
		if (frc != 0) {
			rc = frc < 0 ? frc : 0;
			break;
		}
	}
	cat_gen_vec_free(&list);
	return rc;
}

int cat_gen_list(struct cat *cat, uint64_t series, bool all, cat_gen_fn fn, void *arg)
{
	if (cat->shared) return catshg_list(cat, series, all, fn, arg);
	return gen_list(cat, series, all, true, fn, arg);
}

int cat_gen_list_brief(struct cat *cat, uint64_t series, bool all, cat_gen_fn fn, void *arg)
{
	if (cat->shared) return catshg_list(cat, series, all, fn, arg);
	return gen_list(cat, series, all, false, fn, arg);
}

int cat_gen_commit(struct cat *cat, uint64_t id, const char *rule)
{
	return cat_gen_commit_if(cat, id, rule, NULL, NULL);
}

int cat_gen_commit_if(struct cat *cat, uint64_t id, const char *rule,
		      cat_gen_unchanged_fn unchanged, void *arg)
{
	if (cat->shared) {
		if (unchanged && !unchanged(arg))
			return -EAGAIN;
		return catshg_commit(cat, id, rule);
	}
	int rc = gen_rule_check(rule);
	if (rc != 0)
		return rc;
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0 && unchanged && !unchanged(arg))
		rc = -EAGAIN; /* rolled back by cat_end: nothing committed */
	if (rc == 0)
		rc = gen_commit_txn(cat, id, rule);
	rc = cat_end(cat, rc);
	/* catalog.c invariant 10: COMMITTED is durable once we return. A sync
	 * that fails after the commit does not undo it: the generation is
	 * committed (its answer), logged as not yet durable; no sweep (its
	 * reclaims need a durable commit, invariant 11) until a later sync. */
	if (rc == 0 && cat_wal_sync(cat) != 0)
		log_error("catalog %s: generation %llu (rule %s) is committed, but not yet durable:"
			  " a power loss before the catalog's next sync may undo the commit",
			  cat->path, (unsigned long long)id, rule);
	else if (rc == 0)
		cat_sweep(cat); /* the backup's chunks may be garbage now */
	cat_unlock(cat);
	return rc;
}

static void gen_ids_call(const struct cat_id_vec *ids, cat_ino_fn fn, void *arg)
{
	for (size_t i = 0; i < ids->n; i++)
		fn(arg, ids->v[i]);
}

int cat_gen_hold(struct cat *cat, uint64_t id, const char *rule, const char *reason,
		 cat_ino_fn fn, void *arg, bool *held_out)
{
	if (cat->shared) return catshg_hold(cat, id, rule, reason, fn, arg, held_out);
	struct cat_id_vec ids = { 0 };
	struct cat_gen g, kept;
	bool rolled_back = false;
	int rc = gen_rule_check(rule);
	if (rc != 0)
		return rc;
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0)
		rc = gen_hold_txn(cat, id, rule, reason ? reason : "", fn ? &ids : NULL, &g, &kept,
				  &rolled_back);
	rc = cat_end(cat, rc); /* as an abort: the removed inodes keep their counts until released */
	cat_unlock(cat);
	if (rc == 0 && held_out != NULL)
		*held_out = !rolled_back;
	if (rc == 0 && fn != NULL)
		gen_ids_call(&ids, fn, arg);
	cat_id_vec_free(&ids);
	if (rc == 0 && rolled_back && kept.id != 0)
		log_warn("catalog %s: generation %s (step %" PRIu64 "): version %" PRIu32 " kept held"
			 " as \"%s\" (generation %" PRIu64 ", not shown; ckptfs-admin commit or rm"
			 " decide), version %" PRIu32 " back at its name", cat->path, g.name, g.step,
			 g.version + 1, kept.name, kept.id, g.version);
	return rc;
}

int cat_gen_unsettled(struct cat *cat, uint64_t id, char *reason, size_t size)
{
	assert(size > 0);
	reason[0] = '\0';
	if (cat->shared) /* pggen.h X14: the failed flags */
		return catshg_unsettled(cat, id, reason, size);
	cat_lock(cat);
	int rc = 0;
	if (cat_defer_gen_lost(cat, id)) {
		snprintf(reason, size, GEN_LOST_REASON " (a failed catalog transaction)");
	} else {
		rc = cat_begin_read(cat);
		if (rc == 0)
			rc = gen_unsettled(cat, id, true, reason, size);
		rc = cat_end(cat, rc);
	}
	cat_unlock(cat);
	return rc;
}

int cat_gen_held_reason(struct cat *cat, uint64_t id, const char *reason)
{
	if (cat->shared)
		return -EOPNOTSUPP; /* nothing there is held with GEN_CRASH_REASON */
	if (reason == NULL || reason[0] == '\0')
		return -EINVAL; /* G5 */
	struct cat_gen g;
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = gen_get(cat, id, &g);
	if (rc == 0 && g.state != GEN_HELD)
		rc = -EINVAL;
	if (rc == 0) {
		snprintf(g.held, sizeof(g.held), "%s", reason);
		rc = gen_put(cat, &g);
	}
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* G12: one save named by a lost chunk, COMMITTED → HELD with the reason. */
static int gen_hold_lost_one(struct cat *cat, uint64_t id, const char *reason)
{
	struct cat_gen g;
	int rc = gen_get(cat, id, &g);
	if (rc != 0 || g.state != GEN_COMMITTED)
		return rc;
	assert(g.backup_root == 0); /* G3: only an OPEN one has a backup */
	g.state = GEN_HELD;
	snprintf(g.held, sizeof(g.held), "%s", reason);
	gen_set_rule(&g, GEN_LOST_CHUNK_RULE, "");
	return gen_put(cat, &g);
}

struct gen_lost_hit {
	uint64_t id, ino;
	char name[CAT_NAME_MAX + 1];
};

static int gen_hold_lost_txn(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], const char *hex,
			     struct gen_lost_hit *hits, size_t cap, size_t *n)
{
	int rc = cat_bind(cat, G_LOST_CHUNK_GENS, A_HASH(hash));
	*n = 0;
	while (rc == 0 && (rc = cat_next(cat, G_LOST_CHUNK_GENS)) == 1) {
		if (*n == cap)
			continue; /* more than cap saves name it: the next call holds the rest */
		struct gen_lost_hit *h = &hits[(*n)++];
		h->id = (uint64_t)cat_col_int(cat, G_LOST_CHUNK_GENS, 0);
		h->ino = (uint64_t)cat_col_int(cat, G_LOST_CHUNK_GENS, 1);
		const char *name = (const char *)sqlite3_column_text(cat->stmt[G_LOST_CHUNK_GENS], 2);
		snprintf(h->name, sizeof(h->name), "%s", name ? name : "");
		rc = 0;
	}
	cat_reset(cat, G_LOST_CHUNK_GENS);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < *n && rc == 0; i++) {
		char reason[GEN_HELD_MAX];
		gen_lost_chunk_reason(hex, hits[i].name, hits[i].ino, NULL, reason, sizeof(reason));
		rc = gen_hold_lost_one(cat, hits[i].id, reason);
	}
	return rc;
}

int cat_gen_hold_lost_chunk(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	if (cat->shared) return catshg_hold_lost_chunk(cat, hash);
	char hex[2 * CAT_HASH_LEN + 1];
	cat_hex(hash, hex);
	struct gen_lost_hit hits[16];
	size_t n = 0, total = 0;
	int rc;
	do {
		cat_lock(cat);
		rc = cat_begin(cat);
		if (rc == 0)
			rc = gen_hold_lost_txn(cat, hash, hex, hits, 16, &n);
		rc = cat_end(cat, rc);
		cat_unlock(cat);
		for (size_t i = 0; rc == 0 && i < n; i++)
			cat_log_lost_chunk_hold(cat, hits[i].id, hex, hits[i].name, hits[i].ino);
		total += rc == 0 ? n : 0;
	} while (rc == 0 && n == 16);
	return rc < 0 ? rc : (int)total;
}

void cat_log_lost_chunk_hold(const struct cat *cat, uint64_t gen_id, const char *hex,
			     const char *name, uint64_t ino)
{
	log_warn("catalog %s: generation %" PRIu64 " held: chunk %.16s… of \"%s\" (inode %" PRIu64
		 ") was lost before its upload (kept for an explicit decision: ckptfs-admin commit or rm)",
		 cat->path, gen_id, hex, name, ino);
}

int cat_gen_abort(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg)
{
	if (cat->shared) return catshg_abort(cat, id, rule, fn, arg);
	struct cat_id_vec ids = { 0 };
	struct cat_gen g;
	int rc = gen_rule_check(rule);
	if (rc != 0)
		return rc;
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0)
		rc = gen_abort_txn(cat, id, rule, fn ? &ids : NULL, &g);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	if (rc == 0 && fn != NULL)
		gen_ids_call(&ids, fn, arg);
	cat_id_vec_free(&ids);
	return rc;
}

static int gen_delete(struct cat *cat, uint64_t id, const char *rule, bool expire, uint32_t keep,
		      cat_writing_fn writing, void *warg, cat_ino_fn fn, void *arg)
{
	struct cat_id_vec ids = { 0 };
	int rc = gen_rule_check(rule);
	if (rc != 0)
		return rc;
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0)
		rc = gen_delete_txn(cat, id, rule, expire, keep, writing, warg, fn ? &ids : NULL);
	rc = cat_end_sweep(cat, rc); /* the backup's chunks may be garbage now */
	cat_unlock(cat);
	if (rc == 0 && fn != NULL)
		gen_ids_call(&ids, fn, arg);
	cat_id_vec_free(&ids);
	return rc;
}

int cat_gen_delete(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg)
{
	if (cat->shared) return catshg_delete(cat, id, rule, fn, arg);
	return gen_delete(cat, id, rule, false, 0, NULL, NULL, fn, arg);
}

int cat_gen_expire(struct cat *cat, uint64_t id, uint32_t keep, const char *rule, cat_ino_fn fn,
		   void *arg)
{
	return cat_gen_expire_if(cat, id, keep, rule, NULL, NULL, fn, arg);
}

int cat_gen_expire_if(struct cat *cat, uint64_t id, uint32_t keep, const char *rule,
		      cat_writing_fn writing, void *warg, cat_ino_fn fn, void *arg)
{
	/* shared: pggen.h X12 counts every node's writers in the database */
	if (cat->shared) return catshg_expire(cat, id, keep, rule, fn, arg);
	/* G6 and G11 under the catalog lock */
	return gen_delete(cat, id, rule, true, keep, writing, warg, fn, arg);
}

int cat_gen_reopen(struct cat *cat, uint64_t id)
{
	if (cat->shared) return catshg_reopen(cat, id);
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = gen_reopen_txn(cat, id);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_gen_others_in(struct cat *cat, uint64_t id, bool *others)
{
	if (cat->shared) return catshg_others_in(cat, id, others);
	*others = false; /* one node: nobody else takes part */
	return 0;
}

int cat_gen_pin(struct cat *cat, uint64_t id, bool pinned)
{
	if (cat->shared) return catshg_pin(cat, id, pinned);
	struct cat_gen g = { 0 };
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = gen_get(cat, id, &g);
	bool changed = rc == 0 && g.pinned != pinned;
	if (rc == 0) {
		g.pinned = pinned;
		rc = gen_put(cat, &g);
	}
	/* the manifest on BACKING carries the pin: write it again */
	if (rc == 0 && changed && g.state == GEN_COMMITTED)
		rc = cat_up_gen_committed_txn(cat, g.id, g.version);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_gen_id_reserve(struct cat *cat, uint64_t id)
{
	if (cat->shared) return catshg_id_reserve(cat, id);
	assert(id <= INT64_MAX);
	cat_lock(cat);
	int rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_bind(cat, G_ID_SEQ_INSERT, A_INT(id));
	if (rc == 0)
		rc = cat_run(cat, G_ID_SEQ_INSERT);
	if (rc == 0)
		rc = cat_bind(cat, G_ID_SEQ_RAISE, A_INT(id));
	if (rc == 0)
		rc = cat_run(cat, G_ID_SEQ_RAISE);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

int cat_gen_id_last(struct cat *cat, uint64_t *id)
{
	*id = 0;
	if (cat->shared)
		return -ENOSYS; /* ids are PostgreSQL's (pggen.h) */
	cat_lock(cat);
	int rc = cat_next(cat, G_ID_SEQ_LAST);
	if (rc == 1) {
		int64_t v = cat_col_int(cat, G_ID_SEQ_LAST, 0);
		*id = v > 0 ? (uint64_t)v : 0;
		rc = 0;
	}
	cat_reset(cat, G_ID_SEQ_LAST);
	cat_unlock(cat);
	return rc;
}

/* ---- checks ---- */

static int gen_check_rows(struct cat *cat, int *violations)
{
	int rc;
	while ((rc = cat_next(cat, G_CHECK_ROWS)) == 1) {
		sqlite3_stmt *st = cat->stmt[G_CHECK_ROWS];
		log_error("catalog %s: check: generation %lld %lld/\"%s\" (root %lld, backup %lld,"
			  " state %lld, version %lld):%s%s%s%s%s", cat->path,
			  sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
			  sqlite3_column_text(st, 2), sqlite3_column_int64(st, 3),
			  sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
			  sqlite3_column_int64(st, 6),
			  sqlite3_column_int(st, 7) ? " its root is not linked under its name" : "",
			  sqlite3_column_int(st, 8) ? " ended but still owns a tree" : "",
			  sqlite3_column_int(st, 9) ? " a backup outside a rewritten open version" : "",
			  sqlite3_column_int(st, 10) ? " its backup is linked" : "",
			  sqlite3_column_int(st, 11) ? " its series lies in a generation" : "");
		(*violations)++;
	}
	cat_reset(cat, G_CHECK_ROWS);
	return rc;
}

static int gen_check_trees(struct cat *cat, int *violations)
{
	int rc;
	while ((rc = cat_next(cat, G_CHECK_TREES)) == 1) {
		sqlite3_stmt *st = cat->stmt[G_CHECK_TREES];
		if (sqlite3_column_int(st, 3))
			log_error("catalog %s: check: generation %lld reaches inode %lld, which is"
				  " missing", cat->path, sqlite3_column_int64(st, 1),
				  sqlite3_column_int64(st, 0));
		else if (sqlite3_column_type(st, 1) == SQLITE_NULL)
			log_error("catalog %s: check: inode %lld says generation %lld, whose tree"
				  " does not reach it", cat->path, sqlite3_column_int64(st, 0),
				  sqlite3_column_int64(st, 2));
		else
			log_error("catalog %s: check: inode %lld is in the tree of generation %lld"
				  " but says generation %lld", cat->path, sqlite3_column_int64(st, 0),
				  sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
		(*violations)++;
	}
	cat_reset(cat, G_CHECK_TREES);
	return rc;
}

int cat_gen_check_txn(struct cat *cat, int *violations)
{
	int rc = gen_check_rows(cat, violations);
	if (rc == 0)
		rc = gen_check_trees(cat, violations);
	return rc;
}

int cat_gen_check(struct cat *cat)
{
	if (cat->shared) return catshg_check(cat);
	int violations = 0;
	cat_lock(cat);
	int rc = cat_begin_read(cat);
	if (rc == 0)
		rc = cat_gen_check_txn(cat, &violations);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	if (rc == 0 && violations > 0) {
		log_error("catalog %s: generation check found %d violations", cat->path, violations);
		rc = -EUCLEAN;
	}
	return rc;
}

int cat_gen_manifest_again(struct cat *cat, uint64_t id)
{
	struct cat_gen g;
	int rc = cat_gen_get_brief(cat, id, &g);
	if (rc != 0 || g.state != GEN_COMMITTED)
		return rc == -ENOENT ? 0 : rc;
	if (cat->shared)
		return catshd_enqueue(cat, id, g.version);
	cat_lock(cat);
	rc = cat_begin(cat);
	if (rc == 0)
		rc = cat_up_gen_committed_txn(cat, id, g.version);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

void gen_lost_chunk_reason(const char *hex, const char *name, uint64_t ino, const char *node,
			   char *out, size_t size)
{
	snprintf(out, size, GEN_LOST_CHUNK_REASON " %s of \"%s\" (inode %" PRIu64 ") is damaged or"
		 " missing in the cache%s%s before its upload and BACKING does not have it", hex,
		 name, ino, node ? " of node " : "", node ? node : "");
}
