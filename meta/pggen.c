/* pggen — generations across nodes in the shared catalog; see pggen.h (X1-X17). */
#define _GNU_SOURCE
#include "pggen.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "hash.h"
#include "log.h"
#include "manifest.h"

enum {
	G_GEN_INSERT,
	G_INODE_SET_GEN,
	G_GEN_OF,
	G_WRITING,
	G_WRITING_PARK,
	G_WRITING_UNPARK,
	G_GEN_LOCK,
	G_COMMIT_LOCK,
	G_COMMIT_FREE,
	G_WRITERS,
	G_KEEP_WRITERS,
	G_COMMIT,
	G_HOLD,
	G_ADOPT,
	G_HOLD_NODE,
	G_DROP_WRITING,
	G_LOSE,
	G_GET,
	G_LIST,
	/* the calls of generation.h over PostgreSQL (catalog_shared_gen.c) */
	G_GET_LOCK,
	G_GET_SIZED,
	G_FIND_NAME,
	G_FIND_STEP,
	G_LIST_ALL,
	G_PIN,
	G_END,
	G_MOVE,
	G_ROOT_OF,
	G_INODE_ROW,
	G_DIRENT_INO,
	G_DIR_LOCK,
	G_DIR_TOUCH,
	G_TREE_XDEV,
	G_TREE_NESTED,
	G_TREE_SET_GEN,
	G_TREE_UNLINK,
	G_TREE_DIRENTS_DELETE,
	G_CHECK_ROWS,
	G_CHECK_TREES,
	G_OPEN_WRITERS,
	/* versions: a rewrite's backup tree (generation.h G3) */
	G_BACKUP_MAKE,
	G_BACKUP_DROP,
	G_DIRENT_LINK,
	G_RESTORE,
	G_REWRITE_KEEP,
	G_REWRITE_NEW_BYTES,
	G_REOPEN,
	G_NODE_ROLLBACK,
	G_WRITING_INO,
	/* durability: manifests built from the shared tree (meta/manifest_shared.c) */
	G_DURABLE_STATE,
	G_DURABLE_SET,
	G_UPLOAD_BYTES,
	G_STILL_LOST,
	G_LOST_RECHECK,
	G_ORPHANS,
	G_NOT_DURABLE,
	G_UNDURABLE_LIST,
	G_MF_GEN,
	G_MF_PATH,
	G_MF_INODES,
	G_MF_ENTRIES,
	G_MF_CHUNKS,
	G_MF_EXTENTS,
	/* rebuild --meta: a parsed manifest into an empty shared catalog */
	G_RB_COUNTS,
	G_RB_LOOKUP,
	G_RB_INODE,
	G_RB_ATTR,
	G_RB_DIRENT,
	G_RB_NLINK,
	G_RB_GEN,
	G_RB_GEN_HELD,
	G_RB_CHUNK,
	G_RB_EXTENT,
	G_RB_GEN_SEQ,
	G_RB_GEN_RESERVE,
	G_RB_CATALOG_ID,
	G_OTHERS,
	/* the tree manifest from the shared tree (meta/manifest_shared.c) */
	G_OUT_SNAPSHOT,
	G_OUT_FP,
	G_OUT_INODES,
	G_OUT_ENTRIES,
	G_OUT_CHUNKS,
	G_OUT_EXTENTS,
	/* keep-latest-k's expire: the newer saves it needs (generation.h G6) */
	G_KEEP_NEWER,
	/* X14: a file whose write or last close failed */
	G_FAILED_SET,
	G_WRITERS_FAILED,
	G_FAILED_CLEAR,
	G_UNSETTLED,
	/* X16: the COMMITTED saves naming a chunk lost before its upload; the
	 * OPEN ones locked; the finding recorded on the chunk's row */
	G_LOST_CHUNK_GENS,
	G_LOST_CHUNK_OPEN_LOCK,
	G_LOST_CHUNK_MARK,
	/* X17: a file of a save naming one of a node's lost chunks */
	G_LOST_CHUNK_OF_GEN,
	/* X18: saves held lost-chunk whose every chunk is on BACKING now */
	G_LOST_CHUNK_WHOLE,
	G_COUNT
};

#define G_LIVE "state IN (0, 1, 4)" /* OPEN, COMMITTED or HELD: they have a tree */
#define G_IS_FILE "(mode & 61440) = 32768"
/* X16/X17: chunk row c found lost before its upload by some node (lost_by),
 * still not on BACKING, and no live node but the finder holds it */
#define G_LOST_MARKED(c)                                                               \
	"(" c ".lost_by IS NOT NULL AND NOT " c ".uploaded AND NOT (" c ".holder <> " c \
	".lost_by AND EXISTS (SELECT 1 FROM ckpt_nodes n WHERE n.id = " c ".holder"     \
	" AND n.state = 'live')))"
/* t(ino): the tree under `start` (UNION: an inode with several links once) */
#define G_TREE(start)                                                                  \
	"WITH RECURSIVE t(ino) AS (SELECT " start " UNION SELECT d.ino FROM ns_dirents d" \
	" JOIN t ON d.parent = t.ino) "

/* t(ino): a generation's tree as manifest.c walks it, from its root $1
 * through entries to inodes of generation $2 */
#define G_MF_TREE                                                                         \
	"WITH RECURSIVE t(ino) AS (SELECT $1::bigint UNION SELECT d.ino FROM t JOIN ns_dirents d" \
	" ON d.parent = t.ino JOIN ns_inodes c ON c.ino = d.ino WHERE c.gen = $2) "

/* t(ino): the tree outside generations as manifest.c walks it, from the
 * mount root through entries to inodes of no generation */
#define G_OUT_TREE                                                                        \
	"WITH RECURSIVE t(ino) AS (SELECT CAST(1 AS BIGINT) UNION SELECT d.ino FROM t"        \
	" JOIN ns_dirents d ON d.parent = t.ino JOIN ns_inodes c ON c.ino = d.ino"             \
	" WHERE c.gen IS NULL) "

/* X10: generation g's tree names a chunk that is not on BACKING and whose
 * holder is no live node: it cannot be read back whole */
#define G_MISSING(g)                                                                      \
	"EXISTS (SELECT 1 FROM ns_inodes li JOIN ns_extents le ON le.ino = li.ino"        \
	" JOIN ns_chunks lc ON lc.hash = le.hash WHERE li.gen = " g ".id AND NOT lc.uploaded" \
	" AND NOT EXISTS (SELECT 1 FROM ckpt_nodes ln WHERE ln.id = lc.holder"            \
	" AND ln.state = 'live'))"
/* X10: the verdict `lost` re-checked as it is read (CASE: the tree is
 * looked at only for a row marked lost) */
#define G_LOST_NOW(g) "(CASE WHEN " g ".lost THEN " G_MISSING(g) " ELSE false END)"

#define G_COLS "id, series, root, name, step, state, version, pinned, created_ns, committed_ns," \
	       " ended_ns, rule, held, " G_LOST_NOW("ns_generations") ", backup_root"

const struct pg_stmt pggen_stmts[] = {
	[G_GEN_INSERT] = { "gen_insert",
			   "INSERT INTO ns_generations(series, root, name, step, state, created_ns,"
			   " opened_by) VALUES ($1, $2, $3, $4, 0, $5, $6) RETURNING id",
			   6 },
	[G_INODE_SET_GEN] = { "gen_inode_set", "UPDATE ns_inodes SET gen = $2 WHERE ino = $1", 2 },
	[G_GEN_OF] = { "gen_of", "SELECT gen FROM ns_inodes WHERE ino = $1", 1 },
	/* Node $1 opens inode $2 for writing ($3 true) or closed its last
	 * writer, fenced in the statement (lease.h L5). X1: an open holds its
	 * generation's row FOR SHARE against a commit's change, to its end.
	 * Columns: the fence, whether the inode exists (nothing is written if
	 * not), the generation's state (NULL: none; on a close read without a
	 * lock: fs/gen.h 18), the inode's generation. X14: an open
	 * clears the inode's failed flag (its ns_writing row holds the commit
	 * from here; a close that fails sets it again). X15: both end a parking
	 * of the node's handle (its ns_open row's parked flag), in the same
	 * statement as the row's return or the last close, so keep's count (X12)
	 * sees one or the other */
	[G_WRITING] = { "gen_writing",
			"WITH " LEASE_FENCE_WITH("$1") ", i AS (SELECT gen FROM ns_inodes WHERE ino = $2 FOR SHARE),"
			" g AS (SELECT s.state FROM ns_generations s WHERE s.id = (SELECT gen FROM i)"
			" AND $3::boolean AND " LEASE_LIVE " FOR SHARE),"
			" a AS (INSERT INTO ns_writing(node, ino) SELECT $1, $2 WHERE $3::boolean"
			" AND " LEASE_LIVE " AND EXISTS (SELECT 1 FROM i) ON CONFLICT DO NOTHING),"
			" d AS (DELETE FROM ns_writing WHERE node = $1 AND ino = $2 AND NOT $3::boolean"
			" AND " LEASE_LIVE " AND EXISTS (SELECT 1 FROM i)),"
			" f AS (UPDATE ns_inodes SET failed = false WHERE ino = $2 AND failed"
			" AND $3::boolean AND $4::boolean AND " LEASE_LIVE "),"
			" p AS (UPDATE ns_open SET parked = false WHERE node = $1 AND ino = $2"
			" AND parked AND " LEASE_LIVE "),"
			" c AS (SELECT s.state FROM ns_generations s WHERE s.id = (SELECT gen FROM i)"
			" AND NOT $3::boolean)"
			" SELECT " LEASE_LIVE ", EXISTS (SELECT 1 FROM i),"
			" coalesce((SELECT state FROM g), (SELECT state FROM c)), (SELECT gen FROM i)",
			4 },
	/* X15: node $1's flush parks its row of inode $2 (fenced, L5): its
	 * ns_open row added or kept (pgns.h N14: the inode's row FOR SHARE, as
	 * NS_OPEN_ADD), marked parked, and its ns_writing row dropped, in one
	 * statement: keep's count (X12) sees the handle in one or the other.
	 * Columns: the fence, whether the inode exists (nothing changed if not) */
	[G_WRITING_PARK] = { "gen_writing_park",
			     "WITH " LEASE_FENCE_WITH("$1") ", i AS (SELECT ino FROM ns_inodes"
			     " WHERE ino = $2 AND " LEASE_LIVE " FOR SHARE),"
			     " a AS (INSERT INTO ns_open(node, ino, parked) SELECT $1, ino, true FROM i"
			     " ON CONFLICT (node, ino) DO UPDATE SET parked = true),"
			     " d AS (DELETE FROM ns_writing WHERE node = $1 AND ino = $2"
			     " AND EXISTS (SELECT 1 FROM i))"
			     " SELECT " LEASE_LIVE ", EXISTS (SELECT 1 FROM i)",
			     2 },
	/* X15: node $1's last close of inode $2 could not end the parked mark
	 * of its ns_open row (PostgreSQL away: fs/ns.h invariant 15): the mark
	 * ends now, fenced (L5), and nothing else changes (the ns_open row
	 * stays, no ns_writing row is touched, nor the failed flag of X14).
	 * Columns: the fence, the inode's generation (NULL: none or no inode)
	 * and that generation's state */
	[G_WRITING_UNPARK] = { "gen_writing_unpark",
			       "WITH " LEASE_FENCE_WITH("$1") ", p AS (UPDATE ns_open SET parked = false"
			       " WHERE node = $1 AND ino = $2 AND parked AND " LEASE_LIVE ")"
			       " SELECT " LEASE_LIVE ", g.id, g.state FROM (SELECT 1) AS one"
			       " LEFT JOIN ns_inodes i ON i.ino = $2 LEFT JOIN ns_generations g"
			       " ON g.id = i.gen",
			       2 },
	[G_GEN_LOCK] = { "gen_lock", "SELECT state, lost, backup_root FROM ns_generations WHERE id = $1 FOR UPDATE",
			 1 },
	/* X9: a commit's first statement, its fence riding on it (lease.h L6):
	 * the fence, then the row as G_GEN_LOCK's and its version (NULLs if
	 * there is none, or the node is not live) */
	[G_COMMIT_LOCK] = { "gen_commit_lock",
			    "WITH " LEASE_FENCE_WITH("$2") " SELECT " LEASE_LIVE ", g.state, g.lost,"
			    " g.backup_root, g.version FROM (SELECT 1) AS one LEFT JOIN (SELECT state,"
			    " lost, backup_root, version FROM ns_generations WHERE id = $1 AND "
			    LEASE_LIVE " FOR UPDATE) AS g ON true",
			    2 },
	/* X9: G_WRITERS and G_COMMIT in one statement, after G_COMMIT_LOCK (its
	 * own snapshot, taken after the row was locked: X1); commits only when
	 * the count is 0. X14: and, unless $4 (an explicit decision), no file
	 * of it failed; a decision clears the flags it commits. Columns: the
	 * writers, the failed files a rule is refused for. */
	[G_COMMIT_FREE] = { "gen_commit_free",
			    "WITH w AS (SELECT count(*) AS n FROM ns_writing w JOIN ns_inodes i"
			    " ON i.ino = w.ino WHERE i.gen = $1), f AS (SELECT count(*) AS n"
			    " FROM ns_inodes WHERE gen = $1 AND failed AND nlink > 0"
			    " AND NOT $4::boolean), l AS (SELECT count(*) AS n FROM (SELECT 1"
			    " FROM ns_inodes i JOIN ns_extents e ON e.ino = i.ino JOIN ns_chunks k"
			    " ON k.hash = e.hash WHERE i.gen = $1 AND $3::text <> 'admin'"
			    " AND " G_LOST_MARKED("k") " LIMIT 1) m),"
			    " x AS (UPDATE ns_inodes SET failed = false"
			    " WHERE gen = $1 AND failed AND $4::boolean AND (SELECT n FROM w) = 0),"
			    " c AS (UPDATE ns_generations SET"
			    " state = 1, committed_ns = $2, rule = $3, held = '', backup_root = 0"
			    " WHERE id = $1 AND (SELECT n FROM w) = 0 AND (SELECT n FROM f) = 0"
			    " AND (SELECT n FROM l) = 0)"
			    " SELECT (SELECT n FROM w), (SELECT n FROM f), (SELECT n FROM l)",
			    4 },
	/* X1: every writer counts, also one of a node whose lease ran out and
	 * that no sweep has handled yet: its file is unfinished until X2 holds
	 * the generation */
	[G_WRITERS] = { "gen_writers",
			"SELECT count(*) FROM ns_writing w JOIN ns_inodes i ON i.ino = w.ino"
			" WHERE i.gen = $1",
			1 },
	/* X12: keep's count, a COMMITTED save's handles for writing: every
	 * ns_writing row (X1), and every write handle a live node parked at its
	 * flush (X15: its ns_open row's parked flag; a node lost holds nothing) */
	[G_KEEP_WRITERS] = { "gen_keep_writers",
			     "SELECT (SELECT count(*) FROM ns_writing w JOIN ns_inodes i"
			     " ON i.ino = w.ino WHERE i.gen = $1) + (SELECT count(*) FROM ns_open o"
			     " JOIN ns_inodes i ON i.ino = o.ino JOIN ckpt_nodes n ON n.id = o.node"
			     " WHERE i.gen = $1 AND o.parked AND n.state = 'live')",
			     1 },
	[G_COMMIT] = { "gen_commit",
		       "UPDATE ns_generations SET state = 1, committed_ns = $2, rule = $3, held = '',"
		       " backup_root = 0 WHERE id = $1",
		       3 },
	[G_HOLD] = { "gen_hold", "UPDATE ns_generations SET state = 4, rule = $2, held = $3 WHERE id = $1",
		     3 },
	/* X2, X10: dead $2 = 0 takes any holder that is no live node; never a
	 * chunk node $1 itself found lost (X16: its copy is the damaged one) */
	[G_ADOPT] = { "gen_adopt",
		      "UPDATE ns_chunks c SET holder = $1 WHERE NOT c.uploaded"
		      " AND (c.lost_by IS NULL OR c.lost_by <> $1) AND (c.holder = $2"
		      " OR ($2 = 0 AND NOT EXISTS (SELECT 1 FROM ckpt_nodes n WHERE n.id = c.holder"
		      " AND n.state = 'live'))) AND c.hash IN"
		      " (SELECT decode(h, 'hex') FROM unnest($3::text[]) AS t(h))",
		      3 },
	/* X2: what the dead node had open for writing proves nothing */
	[G_HOLD_NODE] = { "gen_hold_node",
			  "UPDATE ns_generations g SET state = 4, rule = 'node-lost', held = $2"
			  " WHERE state = 0 AND backup_root = 0 AND (id IN (SELECT i.gen FROM ns_writing w"
			  " JOIN ns_inodes i"
			  " ON i.ino = w.ino WHERE w.node = $1 AND i.gen IS NOT NULL)"
			  /* one it opened that no other node writes: no live policy
			   * tracks it, so nothing else would ever decide it */
			  " OR (opened_by = $1 AND NOT EXISTS (SELECT 1 FROM ns_writing w2 JOIN ns_inodes i2"
			  " ON i2.ino = w2.ino WHERE i2.gen = g.id AND w2.node != $1))) RETURNING id",
			  2 },
	[G_DROP_WRITING] = { "gen_drop_writing", "DELETE FROM ns_writing WHERE node = $1", 1 },
	[G_LOSE] = { "gen_lose",
		     "UPDATE ns_generations g SET lost = true WHERE NOT g.lost AND g.state IN (0, 1, 4)"
		     " AND EXISTS (SELECT 1 FROM ns_inodes i JOIN ns_extents e ON e.ino = i.ino"
		     " JOIN ns_chunks c ON c.hash = e.hash WHERE i.gen = g.id AND c.holder = $1"
		     " AND NOT c.uploaded) RETURNING id, version > 1",
		     1 },
	[G_GET] = { "gen_get", "SELECT " G_COLS " FROM ns_generations WHERE id = $1", 1 },
	[G_LIST] = { "gen_list",
		     "SELECT " G_COLS " FROM ns_generations WHERE series = $1 AND state IN (0, 1)"
		     " AND NOT " G_LOST_NOW("ns_generations") " ORDER BY step, id",
		     1 },
	[G_GET_LOCK] = { "gen_get_lock",
			 "SELECT " G_COLS " FROM ns_generations WHERE id = $1 FOR UPDATE", 1 },
	/* G_GET with the generation's files and their bytes after its columns
	 * (its backup tree carries the id too, but is no part of what it shows):
	 * one snapshot, one round trip (pg.h P5; a row and its sizes were two) */
	[G_GET_SIZED] = { "gen_get_sized",
			  "WITH RECURSIVE t(ino) AS (SELECT backup_root FROM ns_generations WHERE"
			  " id = $1 AND backup_root != 0 UNION SELECT d.ino FROM ns_dirents d JOIN t"
			  " ON d.parent = t.ino) SELECT " G_COLS ", s.n, s.bytes FROM ns_generations,"
			  " (SELECT count(*) AS n, COALESCE(sum(size), 0) AS bytes FROM ns_inodes"
			  " WHERE gen = $1 AND " G_IS_FILE " AND ino NOT IN (SELECT ino FROM t)) s"
			  " WHERE id = $1",
			  1 },
	/* a lost one still has its tree under its name: found by name, so that
	 * an admin can remove it; hidden from a search by step (a resume) */
	[G_FIND_NAME] = { "gen_find_name",
			  "SELECT " G_COLS " FROM ns_generations WHERE series = $1 AND " G_LIVE
			  " AND name = $2 ORDER BY id DESC LIMIT 1",
			  2 },
	[G_FIND_STEP] = { "gen_find_step",
			  "SELECT " G_COLS " FROM ns_generations WHERE series = $1 AND " G_LIVE
			  " AND step = $2 AND NOT " G_LOST_NOW("ns_generations")
			  /* G10: a version kept beside its step's save: by its name only */
			  " ORDER BY strpos(name, '" GEN_REWRITE_SUFFIX "') > 0, id DESC LIMIT 1",
			  2 },
	[G_LIST_ALL] = { "gen_list_all",
			 "SELECT " G_COLS " FROM ns_generations WHERE ($1::bigint = 0 OR series = $1)"
			 " AND ($2::boolean OR " G_LIVE ") ORDER BY series, step, id",
			 2 },
	[G_PIN] = { "gen_pin", "UPDATE ns_generations SET pinned = $2 WHERE id = $1 RETURNING id", 2 },
	[G_END] = { "gen_end",
		    "UPDATE ns_generations SET state = $2, root = 0, held = '', ended_ns = $3,"
		    " rule = $4, backup_root = 0 WHERE id = $1",
		    4 },
	/* generation.h G8: a HELD root renamed to a generation name keeps its row */
	[G_MOVE] = { "gen_move",
		     "UPDATE ns_generations SET series = $2, name = $3, step = $4 WHERE id = $1",
		     4 },
	[G_ROOT_OF] = { "gen_root_of",
			"SELECT id FROM ns_generations WHERE root = $1 AND " G_LIVE
			" ORDER BY id LIMIT 1 FOR UPDATE",
			1 },
	[G_INODE_ROW] = { "gen_inode_row", "SELECT mode, nlink, gen FROM ns_inodes WHERE ino = $1",
			  1 },
	[G_DIRENT_INO] = { "gen_dirent_ino",
			   "SELECT id, ino FROM ns_dirents WHERE parent = $1 AND name = $2", 2 },
	/* the lock pgns takes on a directory whose entries change */
	[G_DIR_LOCK] = { "gen_dir_lock", "SELECT mode FROM ns_inodes WHERE ino = $1 FOR UPDATE", 1 },
	[G_DIR_TOUCH] = { "gen_dir_touch",
			  "UPDATE ns_inodes SET mtime_ns = $2, ctime_ns = $2, nlink = nlink + $3"
			  " WHERE ino = $1",
			  3 },
	[G_TREE_XDEV] = { "gen_tree_xdev",
			  G_TREE("$1::bigint") "SELECT t.ino FROM t JOIN ns_dirents d ON d.ino = t.ino"
			  " WHERE t.ino != $1 AND d.parent NOT IN (SELECT ino FROM t) LIMIT 1",
			  1 },
	[G_TREE_NESTED] = { "gen_tree_nested",
			    G_TREE("$1::bigint") "SELECT id FROM ns_generations WHERE " G_LIVE
			    " AND id != $2 AND root IN (SELECT ino FROM t) ORDER BY id FOR UPDATE",
			    2 },
	[G_TREE_SET_GEN] = { "gen_tree_set_gen",
			     G_TREE("$1::bigint") "UPDATE ns_inodes SET gen = $2"
			     " WHERE ino IN (SELECT ino FROM t)",
			     2 },
	[G_TREE_UNLINK] = { "gen_tree_unlink",
			    G_TREE("$1::bigint") "UPDATE ns_inodes SET nlink = 0, gen = NULL,"
			    " ctime_ns = $2 WHERE ino IN (SELECT ino FROM t) RETURNING ino",
			    2 },
	[G_TREE_DIRENTS_DELETE] = { "gen_tree_dirents_delete",
				    "DELETE FROM ns_dirents WHERE id = $2 OR parent IN"
				    " (SELECT unnest($1::bigint[]))",
				    2 },
	/* G1, G2, G3 and G5 on each row (G4 is a single node's rule: another
	 * node's generations stay open across this one's restart) */
	[G_CHECK_ROWS] = { "gen_check_rows",
			   "SELECT id, series, name, root, state, unlinked, owns, nested, bad_held,"
			   " bad_backup, backup_linked"
			   " FROM (SELECT g.*, (" G_LIVE " AND NOT EXISTS (SELECT 1 FROM ns_dirents d"
			   " WHERE d.parent = g.series AND d.name = g.name AND d.ino = g.root))"
			   " AS unlinked, (state IN (2, 3) AND (root != 0 OR backup_root != 0)) AS owns,"
			   " (backup_root != 0 AND (state != 0 OR version < 2)) AS bad_backup,"
			   " (backup_root != 0 AND EXISTS (SELECT 1 FROM ns_dirents d"
			   " WHERE d.ino = g.backup_root)) AS backup_linked,"
			   " (" G_LIVE " AND EXISTS (SELECT 1 FROM ns_inodes s WHERE s.ino = g.series"
			   " AND s.gen IS NOT NULL)) AS nested,"
			   " ((state = 4 AND held = '') OR (state NOT IN (0, 4) AND held != '')"
			   " OR (state = 0 AND held != '' AND backup_root = 0)) AS bad_held"
			   " FROM ns_generations g) x WHERE unlinked OR owns OR nested OR bad_held OR bad_backup"
			   " OR backup_linked"
			   " OR state NOT BETWEEN 0 AND 4 OR version < 1 ORDER BY id",
			   0 },
	/* G1 on inodes: what a live generation's tree reaches carries its id,
	 * and no linked inode outside every tree carries one */
	[G_CHECK_TREES] = { "gen_check_trees",
			    "WITH RECURSIVE t(ino, g) AS (SELECT root, id FROM ns_generations"
			    " WHERE " G_LIVE " AND root != 0 UNION SELECT backup_root, id"
			    " FROM ns_generations WHERE backup_root != 0 UNION SELECT d.ino, t.g FROM ns_dirents d"
			    " JOIN t ON d.parent = t.ino)"
			    " SELECT t.ino, t.g, i.gen, i.ino IS NULL FROM t LEFT JOIN ns_inodes i"
			    " ON i.ino = t.ino WHERE i.gen IS DISTINCT FROM t.g"
			    " UNION ALL SELECT i.ino, NULL, i.gen, false FROM ns_inodes i LEFT JOIN t"
			    " ON t.ino = i.ino AND t.g = i.gen WHERE i.gen IS NOT NULL AND i.nlink > 0"
			    " AND t.ino IS NULL",
			    0 },
	/* who holds a hold's generation open, to name in its reason */
	[G_OPEN_WRITERS] = { "gen_open_writers",
			     "SELECT w.ino, n.name FROM ns_writing w JOIN ns_inodes i ON i.ino = w.ino"
			     " LEFT JOIN ckpt_nodes n ON n.id = w.node WHERE i.gen = $1"
			     " ORDER BY w.node, w.ino LIMIT 9",
			     1 },
	/* The committed tree under $1 copied: every inode a new number from the
	 * sequence (never handed out, so nobody holds it), entries with both
	 * ends renumbered, extents copied and each chunk's count raised by its
	 * copies (N1); no bytes move. Returns the copy of $1. */
	[G_BACKUP_MAKE] = { "gen_backup_make",
			    G_TREE("$1::bigint") ", m AS MATERIALIZED (SELECT ino, nextval('ns_ino_seq')"
			    " AS copy FROM t), ins AS (INSERT INTO ns_inodes(ino, mode, uid, gid, nlink,"
			    " size, rdev, atime_ns, mtime_ns, ctime_ns, target, gen) SELECT m.copy, i.mode,"
			    " i.uid, i.gid, i.nlink, i.size, i.rdev, i.atime_ns, i.mtime_ns, i.ctime_ns,"
			    " i.target, i.gen FROM m JOIN ns_inodes i ON i.ino = m.ino),"
			    " dir AS (INSERT INTO ns_dirents(parent, name, ino) SELECT p.copy, d.name,"
			    " c.copy FROM m p JOIN ns_dirents d ON d.parent = p.ino JOIN m c"
			    " ON c.ino = d.ino), ext AS (INSERT INTO ns_extents(ino, off, len, hash,"
			    " chunk_off) SELECT m.copy, e.off, e.len, e.hash, e.chunk_off FROM m"
			    " JOIN ns_extents e ON e.ino = m.ino), refs AS (UPDATE ns_chunks c"
			    " SET refcount = c.refcount + r.n FROM (SELECT e.hash, count(*) AS n FROM m"
			    " JOIN ns_extents e ON e.ino = m.ino GROUP BY e.hash) r WHERE c.hash = r.hash)"
			    " SELECT copy FROM m WHERE ino = $1",
			    1 },
	/* The backup tree under $1 deleted outright (its numbers were never
	 * handed out), its extents' counts given back (N1). */
	[G_BACKUP_DROP] = { "gen_backup_drop",
			    G_TREE("$1::bigint") ", refs AS (UPDATE ns_chunks c"
			    " SET refcount = c.refcount - r.n FROM (SELECT e.hash, count(*) AS n"
			    " FROM ns_extents e WHERE e.ino IN (SELECT ino FROM t) GROUP BY e.hash) r"
			    " WHERE c.hash = r.hash), ext AS (DELETE FROM ns_extents WHERE ino IN"
			    " (SELECT ino FROM t)), dir AS (DELETE FROM ns_dirents WHERE parent IN"
			    " (SELECT ino FROM t)) DELETE FROM ns_inodes WHERE ino IN (SELECT ino FROM t)",
			    1 },
	[G_DIRENT_LINK] = { "gen_dirent_link",
			    "INSERT INTO ns_dirents(parent, name, ino) VALUES ($1, $2, $3)", 3 },
	[G_RESTORE] = { "gen_restore",
			"UPDATE ns_generations SET root = $2, backup_root = 0, state = $3,"
			" version = version - 1, rule = $4 WHERE id = $1",
			4 },
	/* G10: the rolled-back new version's tree (root $2, linked as $3/$4)
	 * kept as generation $1 under $5, HELD with reason $6 and rule $7; the
	 * number of entries renamed (1, or 0: the root is not at its name) */
	[G_REWRITE_KEEP] = { "gen_rewrite_keep",
			     G_TREE("$2::bigint") ", ent AS (UPDATE ns_dirents SET name = $5"
			     " WHERE parent = $3 AND name = $4 AND ino = $2 RETURNING 1),"
			     " inos AS (UPDATE ns_inodes SET gen = $1 WHERE ino IN (SELECT ino FROM t)"
			     " RETURNING 1) UPDATE ns_generations SET name = $5, state = 4, held = $6,"
			     " rule = $7 WHERE id = $1 RETURNING (SELECT count(*) FROM ent)",
			     7 },
	/* G10: does the tree under $1 name a chunk the tree under $2 (its
	 * backup) does not: bytes written in it that exist nowhere else? Two
	 * sets of hashes and a hashed EXCEPT: linear in the trees' extents
	 * (a NOT IN subplan was quadratic, filtering every extent of the
	 * catalog: review 46 F7). */
	[G_REWRITE_NEW_BYTES] = { "gen_rewrite_new_bytes",
				  G_TREE("$1::bigint") ", b(ino) AS (SELECT $2::bigint UNION SELECT"
				  " d.ino FROM ns_dirents d JOIN b ON d.parent = b.ino),"
				  " th AS MATERIALIZED (SELECT DISTINCT e.hash FROM t JOIN ns_extents e"
				  " ON e.ino = t.ino), bh AS MATERIALIZED (SELECT DISTINCT e2.hash FROM b"
				  " JOIN ns_extents e2 ON e2.ino = b.ino) SELECT EXISTS (SELECT hash"
				  " FROM th EXCEPT SELECT hash FROM bh)::int",
				  2 },
	/* opened_by: the node whose policy tracks the new version (X2) */
	[G_REOPEN] = { "gen_reopen",
		       "UPDATE ns_generations SET state = 0, version = version + 1, backup_root = $2,"
		       " opened_by = $3 WHERE id = $1",
		       3 },
	/* X2 for a new version: rolled back to its backup, not held */
	/* a rolled-back inode another node still writes is that node's to release */
	[G_WRITING_INO] = { "gen_writing_ino", "SELECT count(*) FROM ns_writing WHERE ino = $1", 1 },
	[G_NODE_ROLLBACK] = { "gen_node_rollback",
			      "SELECT id FROM ns_generations g WHERE state = 0 AND backup_root != 0"
			      " AND (id IN (SELECT i.gen FROM ns_writing w JOIN ns_inodes i"
			      " ON i.ino = w.ino WHERE w.node = $1 AND i.gen IS NOT NULL)"
			      /* one it reopened that no other node writes (as G_HOLD_NODE) */
			      " OR (opened_by = $1 AND NOT EXISTS (SELECT 1 FROM ns_writing w2"
			      " JOIN ns_inodes i2 ON i2.ino = w2.ino WHERE i2.gen = g.id"
			      " AND w2.node != $1))) ORDER BY id",
			      1 },
	[G_DURABLE_STATE] = { "gen_durable_state",
			      "SELECT g.state, g.version, g.lost, EXISTS(SELECT 1 FROM ns_inodes i"
			      " JOIN ns_extents e ON e.ino = i.ino JOIN ns_chunks c ON c.hash = e.hash"
			      " WHERE i.gen = g.id AND NOT c.uploaded) FROM ns_generations g WHERE g.id = $1",
			      1 },
	[G_DURABLE_SET] = { "gen_durable_set",
			    "UPDATE ns_generations SET durable_version = $2 WHERE id = $1 AND state = 1"
			    " AND version = $2",
			    2 },
	/* as upload.c's U_GEN_BYTES: the stored bytes of the distinct chunks the
	 * generation's inodes name, and of those not on BACKING yet */
	[G_UPLOAD_BYTES] = { "gen_upload_bytes",
			     "SELECT COALESCE(sum(c.stored_len), 0), COALESCE(sum(c.stored_len)"
			     " FILTER (WHERE NOT c.uploaded), 0) FROM ns_chunks c WHERE c.hash IN"
			     " (SELECT e.hash FROM ns_inodes i JOIN ns_extents e ON e.ino = i.ino"
			     " WHERE i.gen = $1)",
			     1 },
	/* X6: a lost generation's tree (its backup dropped) still names a chunk
	 * that no live node holds and BACKING does not have; else it is lost no
	 * more (every such file was rewritten) */
	[G_STILL_LOST] = { "gen_still_lost",
			   "UPDATE ns_generations g SET lost = false WHERE id = $1 AND NOT "
			   G_MISSING("g") " RETURNING id",
			   1 },
	/* X10: a batch of lost generations after id $2, each lost no more once
	 * nothing of it is missing; fenced by node $1 (lease.h L5): the last
	 * id looked at, how many, how many cleared */
	[G_LOST_RECHECK] = { "gen_lost_recheck",
			     "WITH " LEASE_FENCE_WITH("$1") ", k AS (SELECT id FROM ns_generations"
			     " WHERE lost AND " G_LIVE " AND id > $2 ORDER BY id LIMIT $3),"
			     " r AS (UPDATE ns_generations g SET lost = false FROM k WHERE g.id = k.id"
			     " AND g.lost AND NOT " G_MISSING("g") " AND " LEASE_LIVE " RETURNING g.id)"
			     " SELECT " LEASE_LIVE ", (SELECT COALESCE(max(id), 0) FROM k),"
			     " (SELECT count(*) FROM k), (SELECT count(*) FROM r)",
			     3 },
	/* X10: chunks that lost generations name, not on BACKING, whose holder
	 * is no live node: a live node caching one adopts it (pggen_adopt) */
	[G_ORPHANS] = { "gen_orphans",
			"SELECT encode(o.h, 'hex') FROM (SELECT DISTINCT c.hash AS h FROM ns_generations g"
			" JOIN ns_inodes i ON i.gen = g.id JOIN ns_extents e ON e.ino = i.ino"
			" JOIN ns_chunks c ON c.hash = e.hash WHERE g.lost AND g.state IN (0, 1, 4)"
			" AND NOT c.uploaded AND c.hash > decode($1, 'hex') AND NOT EXISTS (SELECT 1"
			" FROM ckpt_nodes n WHERE n.id = c.holder AND n.state = 'live')) o"
			" ORDER BY o.h LIMIT $2",
			2 },
	/* as upload.c's U_GEN_NOT_DURABLE. One id: 0 only if it is COMMITTED,
	 * not lost and durable at its version (a lost, HELD, ended or absent one
	 * is not durable: review 33 F4); id 0: how many OPEN or COMMITTED ones
	 * are not durable, lost ones left out (they never become durable while
	 * lost, and `wait` would wait for them forever) */
	[G_NOT_DURABLE] = { "gen_not_durable",
			    "SELECT CASE WHEN $1::bigint = 0 THEN (SELECT count(*) FROM ns_generations"
			    " WHERE NOT lost AND (state = 0 OR (state = 1 AND durable_version <> version)))"
			    " WHEN EXISTS (SELECT 1 FROM ns_generations WHERE id = $1::bigint AND state = 1"
			    " AND NOT lost AND durable_version = version) THEN 0 ELSE 1 END",
			    1 },
	[G_UNDURABLE_LIST] = { "gen_undurable_list",
			       "SELECT id, version FROM ns_generations WHERE state = 1 AND NOT lost"
			       " AND durable_version <> version ORDER BY id",
			       0 },
	/* FOR SHARE: the generation stays COMMITTED at its version while its
	 * tree is read (an end or a hold takes the row FOR UPDATE) */
	[G_MF_GEN] = { "gen_mf_gen",
		       "SELECT series, root, name, step, state, version, pinned, created_ns,"
		       " committed_ns, rule, lost FROM ns_generations WHERE id = $1 FOR SHARE",
		       1 },
	/* the series' components from the mount root down; the last row's parent is 1 */
	[G_MF_PATH] = { "gen_mf_path",
			"WITH RECURSIVE up(ino, name, depth) AS (SELECT $1::bigint, NULL::text, 0"
			" UNION ALL SELECT d.parent, d.name, up.depth + 1 FROM up CROSS JOIN LATERAL"
			" (SELECT parent, name FROM ns_dirents WHERE ino = up.ino ORDER BY id LIMIT 1) d"
			" WHERE up.ino <> 1 AND up.depth < 4097)"
			" SELECT name, ino FROM up WHERE depth > 0 ORDER BY depth DESC",
			1 },
	[G_MF_INODES] = { "gen_mf_inodes",
			  G_MF_TREE "SELECT i.ino, i.mode, i.uid, i.gid, i.size, i.rdev, i.atime_ns,"
			  " i.mtime_ns, i.ctime_ns, i.target FROM t JOIN ns_inodes i ON i.ino = t.ino"
			  " ORDER BY i.ino <> $1, i.ino",
			  2 },
	[G_MF_ENTRIES] = { "gen_mf_entries",
			   G_MF_TREE "SELECT d.parent, d.ino, d.name FROM t JOIN ns_dirents d"
			   " ON d.parent = t.ino JOIN ns_inodes c ON c.ino = d.ino WHERE c.gen = $2"
			   " ORDER BY d.parent <> $1, d.parent, d.id",
			   2 },
	[G_MF_CHUNKS] = { "gen_mf_chunks",
			  G_MF_TREE "SELECT encode(c.hash, 'hex'), c.plain_len, c.codec, c.stored_len"
			  " FROM ns_chunks c WHERE c.hash IN (SELECT e.hash FROM t JOIN ns_extents e"
			  " ON e.ino = t.ino) ORDER BY c.hash",
			  2 },
	[G_MF_EXTENTS] = { "gen_mf_extents",
			   G_MF_TREE "SELECT e.ino, e.off, e.len, e.chunk_off, encode(e.hash, 'hex')"
			   " FROM t JOIN ns_extents e ON e.ino = t.ino ORDER BY e.ino <> $1, e.ino, e.off",
			   2 },
	[G_RB_COUNTS] = { "gen_rb_counts",
			  "SELECT (SELECT count(*) FROM ns_inodes WHERE ino <> 1),"
			  " (SELECT count(*) FROM ns_generations), (SELECT count(*) FROM ns_chunks)",
			  0 },
	[G_RB_LOOKUP] = { "gen_rb_lookup",
			  "SELECT d.ino, i.mode, COALESCE(i.gen, 0) FROM ns_dirents d JOIN ns_inodes i"
			  " ON i.ino = d.ino WHERE d.parent = $1 AND d.name = $2",
			  2 },
	[G_RB_INODE] = { "gen_rb_inode",
			 "INSERT INTO ns_inodes(ino, mode, uid, gid, nlink, size, rdev, atime_ns,"
			 " mtime_ns, ctime_ns, target, gen) VALUES (nextval('ns_ino_seq'), $1, $2, $3,"
			 " $4, $5, $6, $7, $8, $9, $10, $11) RETURNING ino",
			 11 },
	[G_RB_ATTR] = { "gen_rb_attr",
			"UPDATE ns_inodes SET mode = $2, uid = $3, gid = $4, atime_ns = $5,"
			" mtime_ns = $6, ctime_ns = $7, nlink = $8 WHERE ino = $1",
			8 },
	[G_RB_DIRENT] = { "gen_rb_dirent",
			  "INSERT INTO ns_dirents(parent, name, ino) VALUES ($1, $2, $3)", 3 },
	[G_RB_NLINK] = { "gen_rb_nlink", "UPDATE ns_inodes SET nlink = nlink + 1 WHERE ino = $1", 1 },
	[G_RB_GEN] = { "gen_rb_gen",
		       "INSERT INTO ns_generations(id, series, root, name, step, state, version,"
		       " pinned, created_ns, committed_ns, rule, durable_version) VALUES ($1, $2, $3,"
		       " $4, $5, 1, $6, $7, $8, $9, $10, $6)",
		       10 },
	/* manifest.h M4 (pggen_apply_manifest_held): HELD, reason $11, durable
	 * at its version as above (a rebuild read its manifest on BACKING) */
	[G_RB_GEN_HELD] = { "gen_rb_gen_held",
			    "INSERT INTO ns_generations(id, series, root, name, step, state, version,"
			    " pinned, created_ns, committed_ns, rule, durable_version, held) VALUES ($1,"
			    " $2, $3, $4, $5, 4, $6, $7, $8, $9, $10, $6, $11)",
			    11 },
	/* refcount: the extents this manifest adds naming it (N1) */
	[G_RB_CHUNK] = { "gen_rb_chunk",
			 "INSERT INTO ns_chunks(hash, plain_len, codec, stored_len, refcount, uploaded)"
			 " VALUES (decode($1, 'hex'), $2, $3, $4, $5, true) ON CONFLICT (hash) DO UPDATE"
			 " SET refcount = ns_chunks.refcount + EXCLUDED.refcount, uploaded = true",
			 5 },
	[G_RB_EXTENT] = { "gen_rb_extent",
			  "INSERT INTO ns_extents(ino, off, len, hash, chunk_off)"
			  " VALUES ($1, $2, $3, decode($4, 'hex'), $5)",
			  5 },
	/* never lowered: ids reserved before (G_RB_GEN_RESERVE) stay reserved */
	[G_RB_GEN_SEQ] = { "gen_rb_gen_seq",
			   "SELECT setval(pg_get_serial_sequence('ns_generations', 'id'),"
			   " GREATEST((SELECT max(id) FROM ns_generations),"
			   " (SELECT last_value FROM ns_generations_id_seq), 1))",
			   0 },
	/* rebuild.c invariant 6: past every id BACKING has a manifest of, the
	 * ones left out too; setval is not rolled back, but raising it to the
	 * same value twice is harmless (pg.h P5) */
	[G_RB_GEN_RESERVE] = { "gen_rb_gen_reserve",
			       "SELECT setval(pg_get_serial_sequence('ns_generations', 'id'),"
			       " GREATEST($1::bigint, (SELECT max(id) FROM ns_generations),"
			       " (SELECT last_value FROM ns_generations_id_seq), 1))",
			       1 },
	[G_RB_CATALOG_ID] = { "gen_rb_catalog_id",
			      "UPDATE ns_meta SET value = $1 WHERE key = 'catalog_id'", 1 },
	/* X7: live nodes other than $2 taking part in generation $1: writing a
	 * file of it, or the one whose policy tracks it (opened_by) */
	[G_OTHERS] = { "gen_others",
		       "SELECT (SELECT count(*) FROM ns_writing w JOIN ns_inodes i ON i.ino = w.ino"
		       " JOIN ckpt_nodes n ON n.id = w.node WHERE i.gen = $1 AND w.node <> $2"
		       " AND n.state = 'live')"
		       " + (SELECT count(*) FROM ns_generations g JOIN ckpt_nodes n"
		       " ON n.id = g.opened_by WHERE g.id = $1 AND g.opened_by <> $2"
		       " AND n.state = 'live')",
		       2 },
	/* one snapshot for the tree outside generations: no row lock holds it
	 * still (as G_MF_GEN does a generation's), so the statements share one */
	[G_OUT_SNAPSHOT] = { "gen_out_snapshot",
			     "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", 0 },
	/* as upload.c's U_TREE_FP and U_TREE_UNUPLOADED, and the server's clock */
	[G_OUT_FP] = { "gen_out_fp",
		       "SELECT count(*), COALESCE(max(ctime_ns), 0), COALESCE(sum(ctime_ns % 1000003), 0),"
		       " COALESCE(sum(size), 0), EXISTS(SELECT 1 FROM ns_inodes i JOIN ns_extents e"
		       " ON e.ino = i.ino JOIN ns_chunks c ON c.hash = e.hash WHERE i.gen IS NULL"
		       " AND NOT c.uploaded),"
		       " CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000 AS BIGINT)"
		       " FROM ns_inodes WHERE gen IS NULL",
		       0 },
	[G_OUT_INODES] = { "gen_out_inodes",
			   G_OUT_TREE "SELECT i.ino, i.mode, i.uid, i.gid, i.size, i.rdev, i.atime_ns,"
			   " i.mtime_ns, i.ctime_ns, i.target FROM t JOIN ns_inodes i ON i.ino = t.ino"
			   " ORDER BY i.ino <> 1, i.ino",
			   0 },
	[G_OUT_ENTRIES] = { "gen_out_entries",
			    G_OUT_TREE "SELECT d.parent, d.ino, d.name FROM t JOIN ns_dirents d"
			    " ON d.parent = t.ino JOIN ns_inodes c ON c.ino = d.ino WHERE c.gen IS NULL"
			    " ORDER BY d.parent <> 1, d.parent, d.id",
			    0 },
	[G_OUT_CHUNKS] = { "gen_out_chunks",
			   G_OUT_TREE "SELECT encode(c.hash, 'hex'), c.plain_len, c.codec, c.stored_len"
			   " FROM ns_chunks c WHERE c.hash IN (SELECT e.hash FROM t"
			   " JOIN ns_extents e ON e.ino = t.ino) ORDER BY c.hash",
			   0 },
	[G_OUT_EXTENTS] = { "gen_out_extents",
			    G_OUT_TREE "SELECT e.ino, e.off, e.len, e.chunk_off, encode(e.hash, 'hex')"
			    " FROM t JOIN ns_extents e ON e.ino = t.ino ORDER BY e.ino <> 1, e.ino, e.off",
			    0 },
	/* G6 for generation $1 (series $2, root $3, step $4, committed at $5;
	 * $6: held, by step only): the newer complete saves of its root's owner,
	 * locked FOR SHARE so that a save lost, removed, reopened or rewritten
	 * meanwhile is seen (it waits for this one, or this one counts it
	 * anew); how many of them are durable; whether $1 (its row locked by
	 * the caller) is at its version on BACKING */
	/* X14: a failed write or last close of inode $2 by node $1, fenced */
	[G_FAILED_SET] = { "gen_failed_set",
			   "WITH " LEASE_FENCE_WITH("$1") ", u AS (UPDATE ns_inodes SET failed = true"
			   " WHERE ino = $2 AND NOT failed AND " LEASE_LIVE ") SELECT " LEASE_LIVE,
			   2 },
	/* X1, X14 for a rewrite or a lost one (G_COMMIT_FREE's two counts) */
	[G_WRITERS_FAILED] = { "gen_writers_failed",
			       "SELECT (SELECT count(*) FROM ns_writing w JOIN ns_inodes i"
			       " ON i.ino = w.ino WHERE i.gen = $1), (SELECT count(*) FROM ns_inodes"
			       " WHERE gen = $1 AND failed AND nlink > 0)",
			       1 },
	[G_FAILED_CLEAR] = { "gen_failed_clear",
			     "UPDATE ns_inodes SET failed = false WHERE gen = $1 AND failed", 1 },
	/* X14: the failed file of generation $1 a hold names (its lowest
	 * inode, and one of its names) */
	[G_UNSETTLED] = { "gen_unsettled",
			  "SELECT i.ino, (SELECT min(d.name) FROM ns_dirents d WHERE d.ino = i.ino)"
			  " FROM ns_inodes i WHERE i.gen = $1 AND i.failed AND i.nlink > 0"
			  " ORDER BY i.ino LIMIT 1",
			  1 },
	/* X16: up to $3 COMMITTED saves whose files name chunk $1 (hex), which
	 * node $2 found lost before its upload, each with its lowest inode
	 * naming it and one of its names, rows locked FOR UPDATE; none if
	 * BACKING has the chunk (ns_chunks.uploaded: another node put the same
	 * bytes) or another live node holds it (its cache has a copy it may
	 * still upload: S6) */
	[G_LOST_CHUNK_GENS] = { "gen_lost_chunk_gens",
				"SELECT g.id, f.ino, COALESCE((SELECT min(d.name) FROM ns_dirents d"
				" WHERE d.ino = f.ino), '') FROM ns_generations g CROSS JOIN LATERAL"
				" (SELECT min(i.ino) AS ino FROM ns_inodes i JOIN ns_extents e"
				" ON e.ino = i.ino WHERE i.gen = g.id AND e.hash = decode($1, 'hex')) f"
				" WHERE g.state = 1 AND f.ino IS NOT NULL AND NOT EXISTS (SELECT 1"
				" FROM ns_chunks c WHERE c.hash = decode($1, 'hex') AND (c.uploaded"
				" OR (c.holder <> $2 AND EXISTS (SELECT 1 FROM ckpt_nodes n"
				" WHERE n.id = c.holder AND n.state = 'live'))))"
				" ORDER BY g.id LIMIT $3 FOR UPDATE OF g",
				3 },
	/* X16: the OPEN saves whose files name chunk $1 (hex), rows locked FOR
	 * UPDATE: a commit of one of them under way (its G_COMMIT_LOCK holds
	 * the row) ends first, and G_LOST_CHUNK_GENS then sees it COMMITTED;
	 * one not yet under way commits after G_LOST_CHUNK_MARK, whose mark
	 * its X17 check then sees */
	[G_LOST_CHUNK_OPEN_LOCK] = { "gen_lost_chunk_open_lock",
				     "SELECT g.id FROM ns_generations g WHERE g.state = 0 AND EXISTS"
				     " (SELECT 1 FROM ns_inodes i JOIN ns_extents e ON e.ino = i.ino"
				     " WHERE i.gen = g.id AND e.hash = decode($1, 'hex'))"
				     " ORDER BY g.id FOR UPDATE OF g",
				     1 },
	/* X16: node $2 found chunk $1 (hex) lost before its upload: its row
	 * says so to every node's X17 check, until BACKING has it */
	[G_LOST_CHUNK_MARK] = { "gen_lost_chunk_mark",
				"UPDATE ns_chunks SET lost_by = $2 WHERE hash = decode($1, 'hex')"
				" AND NOT uploaded",
				2 },
	/* X17: a file of generation $1 naming a chunk that node $3 found lost
	 * before its upload (one of $2, hex) or that any node did (its row's
	 * lost_by, X16), the chunk, one of its names and the node that found
	 * it; none lost while BACKING has it or a live node other than the
	 * finder holds it (X16) */
	[G_LOST_CHUNK_OF_GEN] = { "gen_lost_chunk_of_gen",
				  "SELECT encode(e.hash, 'hex'), i.ino, COALESCE((SELECT min(d.name)"
				  " FROM ns_dirents d WHERE d.ino = i.ino), ''), COALESCE((SELECT"
				  " c.lost_by FROM ns_chunks c WHERE c.hash = e.hash), $3)"
				  " FROM ns_inodes i JOIN ns_extents e ON e.ino = i.ino WHERE i.gen = $1"
				  " AND ((e.hash IN (SELECT decode(h, 'hex') FROM unnest($2::text[]) AS"
				  " t(h)) AND NOT EXISTS (SELECT 1 FROM ns_chunks c WHERE c.hash = e.hash"
				  " AND (c.uploaded OR (c.holder <> $3 AND EXISTS (SELECT 1 FROM"
				  " ckpt_nodes n WHERE n.id = c.holder AND n.state = 'live')))))"
				  " OR EXISTS (SELECT 1 FROM ns_chunks c WHERE c.hash = e.hash AND "
				  G_LOST_MARKED("c") ")) ORDER BY i.ino LIMIT 1",
				  3 },
	/* X18: up to $1 saves HELD by rule lost-chunk (X16, X17) whose every
	 * chunk is on BACKING now (uploaded: put from a copy that passed
	 * SHA-256, by whichever node had one), with no failed file (X14), no
	 * writer and no lost mark (X10), not a rewrite: committed again by rule
	 * GEN_WHOLE_AGAIN_RULE ($2: now, for one never committed before) */
	[G_LOST_CHUNK_WHOLE] = { "gen_lost_chunk_whole",
				 "WITH w AS (SELECT g.id FROM ns_generations g WHERE g.state = 4"
				 " AND g.rule = '" GEN_LOST_CHUNK_RULE "' AND g.backup_root = 0"
				 " AND NOT g.lost AND NOT EXISTS (SELECT 1 FROM ns_inodes i JOIN ns_extents e"
				 " ON e.ino = i.ino JOIN ns_chunks c ON c.hash = e.hash WHERE i.gen = g.id"
				 " AND NOT c.uploaded) AND NOT EXISTS (SELECT 1 FROM ns_inodes i"
				 " WHERE i.gen = g.id AND i.failed AND i.nlink > 0) AND NOT EXISTS"
				 " (SELECT 1 FROM ns_writing w JOIN ns_inodes i ON i.ino = w.ino"
				 " WHERE i.gen = g.id) ORDER BY g.id LIMIT $1 FOR UPDATE OF g)"
				 " UPDATE ns_generations g SET state = 1, rule = '" GEN_WHOLE_AGAIN_RULE "',"
				 " held = '', committed_ns = CASE WHEN g.committed_ns <> 0 THEN"
				 " g.committed_ns ELSE $2::bigint END FROM w WHERE g.id = w.id"
				 " RETURNING g.id, g.name",
				 2 },
	[G_KEEP_NEWER] = { "gen_keep_newer",
			   "SELECT count(*), count(*) FILTER (WHERE k.durable),"
			   " coalesce((SELECT (g.state IN (1, 4) AND g.durable_version = g.version)::int"
			   " FROM ns_generations g WHERE g.id = $1), 0),"
			   " (NOT $6::boolean AND NOT EXISTS(SELECT 1 FROM ns_generations l"
			   " JOIN ns_inodes li ON li.ino = l.root JOIN ns_inodes lo ON lo.ino = $3"
			   " WHERE l.series = $2 AND l.state = 1 AND l.id <> $1 AND li.uid = lo.uid"
			   " AND (l.committed_ns, l.id) > ($5::bigint, $1::bigint)))::int"
			   " FROM (SELECT n.id, n.durable_version = n.version AS durable"
			   " FROM ns_generations n JOIN ns_inodes ni"
			   " ON ni.ino = n.root JOIN ns_inodes oi ON oi.ino = $3 WHERE n.series = $2"
			   " AND n.state = 1 AND n.rule NOT IN " GEN_RULES_WEAK_SQL
			   " AND n.id <> $1 AND ni.uid = oi.uid"
			   " AND NOT " G_LOST_NOW("n") " AND (n.step > $4 OR (NOT $6::boolean"
			   " AND n.step = $4 AND strpos(n.name, '" GEN_REWRITE_SUFFIX "') = 0"
			   " AND (n.committed_ns, n.id) > ($5::bigint, $1::bigint)))"
			   " FOR SHARE OF n) k",
			   6 },
};
const size_t pggen_nstmts = G_COUNT;

static int pggen_exec(struct pgns *ns, int stmt, const char *const *params, PGresult **res)
{
	return pg_exec(ns->pg, ns->first_gen + (size_t)stmt, params, res);
}

/* The generation of ino (0 for none, -ENOENT for no inode). */
static int pggen_of(struct pgns *ns, uint64_t ino, uint64_t *gen)
{
	char i[24];
	const char *params[] = { PG_U64(i, ino) };
	PGresult *res;
	int rc = pggen_exec(ns, G_GEN_OF, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	*gen = rc == 0 ? (uint64_t)pg_int(res, 0, 0) : 0;
	PQclear(res);
	return rc;
}

/* ---- create a root ---- */

/* G10: the generation a rolled-back new version is kept as */
struct pggen_kept {
	uint64_t id;
	char name[CAT_NAME_MAX + 1];
};

struct pggen_call {
	struct pgns *ns;
	uint64_t id, ino, parent, dead;
	const struct cat_gen_spec *spec;
	uint32_t mode, uid, gid;
	struct cat_inode *out;
	const char *rule, *reason, *list;
	bool open;
	bool resume; /* pggen_writing_resume: the failed flag stays (X14) */
	bool claimed; /* pggen_node_lost: this transaction settles the node (L7) */
	int state;
	uint64_t gen;     /* pggen_writing_gen: the inode's generation */
	uint64_t count;
	uint32_t version; /* pggen_commit_at: the version committed */
	char *buf;        /* pggen_unsettled: the reason, of size bytes */
	size_t size;
	PGresult *res, *res2, *res3;
	struct cat_id_vec *ids; /* inodes a rollback to a backup unlinked */
	bool rolled_back;
	struct pggen_kept kept; /* pggen_hold: G10, when rolled_back */
};

static int pggen_row_locked(struct pgns *ns, uint64_t id, struct cat_gen *out, bool *lost);
static int pggen_one_int(struct pgns *ns, int stmt, const char *const *params, uint64_t *out);
static int pggen_lost_of_body(struct pg *pg, void *arg);
static int pggen_restore(struct pgns *ns, struct cat_gen *g, const char *rule,
			 const char *keep_why, struct pggen_kept *kept, struct cat_id_vec *ids);

/* Deletes a rewrite's backup tree under backup (0: none), giving back its
 * counts: the new version committed or the generation ended. */
static int pggen_backup_drop(struct pgns *ns, uint64_t backup)
{
	if (!backup)
		return 0;
	char b[24];
	const char *params[] = { PG_U64(b, backup) };
	return pggen_exec(ns, G_BACKUP_DROP, params, NULL);
}

/* A new OPEN generation's row (its tree's gen is the caller's), opened by
 * this node (X2); *id gets its id. */
static int pggen_insert_row(struct pgns *ns, uint64_t series, uint64_t root, const char *name,
			    uint64_t step, uint64_t *id)
{
	char s[24], r[24], st[24], t[24], node[24];
	const char *params[] = { PG_U64(s, series), PG_U64(r, root), name, PG_U64(st, step),
				 PG_I64(t, pgns_now_ns()), PG_U64(node, ns->lease->node_id) };
	PGresult *res;
	int rc = pggen_exec(ns, G_GEN_INSERT, params, &res);
	if (rc == 0)
		*id = (uint64_t)pg_int(res, 0, 0);
	PQclear(res);
	return rc;
}

static int pggen_create_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	uint64_t in_gen = 0;
	int rc = pggen_of(ns, c->parent, &in_gen);
	if (rc)
		return rc;
	if (in_gen)
		return -EINVAL; /* a series is a directory outside generations */
	rc = pgns_create_txn(ns, c->parent, c->spec->name, c->mode, c->uid, c->gid, 0, NULL, c->out);
	if (rc)
		return rc;
	rc = pggen_insert_row(ns, c->parent, c->out->ino, c->spec->name, c->spec->step, &c->id);
	if (rc)
		return rc;
	char r[24], id[24];
	const char *set[] = { PG_U64(r, c->out->ino), PG_U64(id, c->id) };
	return pggen_exec(ns, G_INODE_SET_GEN, set, NULL);
}

int pggen_create_root(struct pgns *ns, uint64_t parent, const struct cat_gen_spec *spec,
		      uint32_t mode, uint32_t uid, uint32_t gid, struct cat_inode *out,
		      uint64_t *gen_id)
{
	int rc = pgns_name_check(spec->name);
	if (rc)
		return rc;
	if (!S_ISDIR(mode) && !S_ISREG(mode))
		return -EINVAL;
	struct pggen_call c = { .ns = ns, .parent = parent, .spec = spec, .mode = mode, .uid = uid,
				.gid = gid, .out = out };
	rc = pg_txn(ns->pg, pggen_create_body, &c);
	if (rc == 0 && gen_id)
		*gen_id = c.id;
	return rc;
}

/* ---- writers ---- */

static int pggen_writing_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	char node[24], i[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(i, c->ino),
				 c->open ? "true" : "false", c->resume ? "false" : "true" };
	PGresult *res;
	int rc = pggen_exec(ns, G_WRITING, params, &res);
	if (rc)
		return rc;
	rc = lease_fenced(res);
	if (rc == 0 && PQgetvalue(res, 0, 1)[0] != 't')
		rc = -ENOENT;
	c->state = rc == 0 && !PQgetisnull(res, 0, 2) ? (int)pg_int(res, 0, 2) : -1;
	c->gen = rc == 0 && !PQgetisnull(res, 0, 3) ? (uint64_t)pg_int(res, 0, 3) : 0;
	PQclear(res);
	return rc;
}

/* One statement, its fence in it (lease.h L5): one round trip. */
int pggen_writing_gen(struct pgns *ns, uint64_t ino, bool open, uint64_t *gen_id, int *gen_state)
{
	struct pggen_call c = { .ns = ns, .ino = ino, .open = open };
	int rc = pg_read(ns->pg, pggen_writing_body, &c);
	if (gen_state)
		*gen_state = rc == 0 ? c.state : -1;
	if (gen_id)
		*gen_id = rc == 0 ? c.gen : 0;
	return rc;
}

int pggen_writing(struct pgns *ns, uint64_t ino, bool open, int *gen_state)
{
	return pggen_writing_gen(ns, ino, open, NULL, gen_state);
}

int pggen_writing_resume(struct pgns *ns, uint64_t ino)
{
	struct pggen_call c = { .ns = ns, .ino = ino, .open = true, .resume = true };
	return pg_read(ns->pg, pggen_writing_body, &c);
}

static int pggen_writing_park_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char node[24], i[24];
	const char *params[] = { PG_U64(node, c->ns->lease->node_id), PG_U64(i, c->ino) };
	PGresult *res;
	int rc = pggen_exec(c->ns, G_WRITING_PARK, params, &res);
	if (rc)
		return rc;
	rc = lease_fenced(res);
	if (rc == 0 && PQgetvalue(res, 0, 1)[0] != 't')
		rc = -ENOENT;
	PQclear(res);
	return rc;
}

/* One statement, its fence in it (lease.h L5): one round trip. */
int pggen_writing_park(struct pgns *ns, uint64_t ino)
{
	struct pggen_call c = { .ns = ns, .ino = ino };
	return pg_read(ns->pg, pggen_writing_park_body, &c);
}

static int pggen_writing_unpark_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char node[24], i[24];
	const char *params[] = { PG_U64(node, c->ns->lease->node_id), PG_U64(i, c->ino) };
	PGresult *res;
	int rc = pggen_exec(c->ns, G_WRITING_UNPARK, params, &res);
	if (rc)
		return rc;
	rc = lease_fenced(res);
	c->gen = rc == 0 && !PQgetisnull(res, 0, 1) ? (uint64_t)pg_int(res, 0, 1) : 0;
	c->state = rc == 0 && !PQgetisnull(res, 0, 2) ? (int)pg_int(res, 0, 2) : -1;
	PQclear(res);
	return rc;
}

/* One statement, its fence in it (lease.h L5): one round trip. */
int pggen_writing_unpark(struct pgns *ns, uint64_t ino, uint64_t *gen_id, int *gen_state)
{
	struct pggen_call c = { .ns = ns, .ino = ino };
	int rc = pg_read(ns->pg, pggen_writing_unpark_body, &c);
	*gen_id = rc == 0 ? c.gen : 0;
	*gen_state = rc == 0 ? c.state : -1;
	return rc;
}

/* X14: a failed write or last close, fenced in its statement (lease.h L5) */
static int pggen_failed_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char node[24], i[24];
	const char *params[] = { PG_U64(node, c->ns->lease->node_id), PG_U64(i, c->ino) };
	PGresult *res;
	int rc = pggen_exec(c->ns, G_FAILED_SET, params, &res);
	if (rc == 0)
		rc = lease_fenced(res);
	PQclear(res);
	return rc;
}

int pggen_failed(struct pgns *ns, uint64_t ino)
{
	struct pggen_call c = { .ns = ns, .ino = ino };
	return pg_txn(ns->pg, pggen_failed_body, &c);
}

static int pggen_unsettled_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char g[24];
	const char *params[] = { PG_U64(g, c->id) };
	PGresult *res;
	int rc = pggen_exec(c->ns, G_UNSETTLED, params, &res);
	if (rc)
		return rc;
	c->buf[0] = '\0';
	if (pg_rows(res) == 1) /* as generation.c's gen_unsettled says it */
		snprintf(c->buf, c->size, GEN_FAILED_REASON ": \"%s\" (inode %lld) is as of its"
			 " last successful close or fsync", PQgetvalue(res, 0, 1),
			 (long long)pg_int(res, 0, 0));
	PQclear(res);
	return 0;
}

int pggen_unsettled(struct pgns *ns, uint64_t id, char *reason, size_t size)
{
	assert(size > 0);
	reason[0] = '\0';
	struct pggen_call c = { .ns = ns, .id = id, .buf = reason, .size = size };
	int rc = pg_read(ns->pg, pggen_unsettled_body, &c);
	if (rc)
		reason[0] = '\0';
	return rc;
}

/* ---- commit and hold ---- */

static int pggen_lock(struct pgns *ns, uint64_t id, int *state, bool *lost, uint64_t *backup)
{
	char g[24];
	const char *params[] = { PG_U64(g, id) };
	PGresult *res;
	int rc = pggen_exec(ns, G_GEN_LOCK, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	*state = rc == 0 ? (int)pg_int(res, 0, 0) : -1;
	*lost = rc == 0 && PQgetvalue(res, 0, 1)[0] == 't';
	if (backup)
		*backup = rc == 0 ? (uint64_t)pg_int(res, 0, 2) : 0;
	PQclear(res);
	return rc;
}

/* X6, X10: G_STILL_LOST on generation params[0]; *lost false if it cleared it. */
static int pggen_still_lost(struct pgns *ns, const char *const *params, bool *lost)
{
	PGresult *res;
	int rc = pggen_exec(ns, G_STILL_LOST, params, &res);
	if (rc == 0)
		*lost = pg_rows(res) == 0;
	PQclear(res);
	return rc;
}

/* G_COMMIT_LOCK's answer: the fence (-ESTALE), then the row (-ENOENT). */
static int pggen_commit_lock(struct pgns *ns, uint64_t id, int *state, bool *lost,
			     uint64_t *backup, uint32_t *version)
{
	char g[24], node[24];
	const char *params[] = { PG_U64(g, id), PG_U64(node, ns->lease->node_id) };
	PGresult *res;
	int rc = pggen_exec(ns, G_COMMIT_LOCK, params, &res);
	if (rc)
		return rc;
	rc = lease_fenced(res);
	if (rc == 0 && (PQnfields(res) < 5 || PQgetisnull(res, 0, 1)))
		rc = -ENOENT;
	if (rc == 0) {
		*state = (int)pg_int(res, 0, 1);
		*lost = PQgetvalue(res, 0, 2)[0] == 't';
		*backup = (uint64_t)pg_int(res, 0, 3);
		*version = (uint32_t)pg_int(res, 0, 4);
	}
	PQclear(res);
	return rc;
}

/* X14 (generation.h G9): a rule that is an explicit decision (an admin's
 * commit, the commit xattr), as generation.c's gen_rule_explicit. */
static bool pggen_rule_explicit(const char *rule)
{
	return strcmp(rule, "explicit") == 0 || strcmp(rule, "admin") == 0;
}

/* X9: BEGIN, G_COMMIT_LOCK (the fence on it), G_COMMIT_FREE, COMMIT; a
 * rewrite (a backup to drop) or a lost one takes the statements of each
 * step (G_WRITERS_FAILED, the backup's drop, G_STILL_LOST, G_COMMIT)
 * instead. X14: a file of it that failed refuses a rule that is no
 * explicit decision (-ENOTRECOVERABLE, nothing changed); a decision
 * clears the flags, in the same transaction. */
static int pggen_commit_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	int state = -1;
	bool lost = false;
	uint64_t backup = 0;
	int rc = pggen_commit_lock(ns, c->id, &state, &lost, &backup, &c->version);
	if (rc)
		return rc;
	if (state != GEN_OPEN && !(state == GEN_HELD && c->open))
		return -EINVAL; /* a held one ends by a decision only */
	char g[24], t[24];
	const char *params[] = { PG_U64(g, c->id) };
	if (lost && !backup) { /* X10: the verdict re-checked */
		rc = pggen_still_lost(ns, params, &lost);
		if (rc == 0 && lost)
			rc = -ENODATA; /* a chunk of it is gone: it cannot be read back */
		if (rc)
			return rc;
	}
	bool explicit = pggen_rule_explicit(c->rule);
	const char *set[] = { g, PG_I64(t, pgns_now_ns()), c->rule, explicit ? "true" : "false" };
	PGresult *res;
	rc = pggen_exec(ns, backup || lost ? G_WRITERS_FAILED : G_COMMIT_FREE,
			backup || lost ? params : set, &res);
	if (rc)
		return rc;
	c->count = (uint64_t)pg_int(res, 0, 0);
	uint64_t failed = explicit ? 0 : (uint64_t)pg_int(res, 0, 1);
	/* X17: G_COMMIT_FREE counted the chunks of it found lost before their
	 * upload, by any node; a rewrite's or lost one's path asks here */
	bool skipped = !(backup || lost) && pg_int(res, 0, 2) > 0; /* its UPDATE did not run */
	bool check = strcmp(c->rule, "admin") != 0 && (backup || lost || skipped);
	PQclear(res);
	if (c->count > 0)
		return -EBUSY; /* X1: a live node is still writing a file of it */
	if (check) { /* the chunk and a file naming it, for the hold's reason */
		rc = pggen_lost_of_body(pg, c);
		if (rc == 0 && c->buf[0])
			rc = -ENOTRECOVERABLE;
		else if (rc == 0 && skipped)
			rc = -EAGAIN; /* it reached BACKING between the two: commit again */
		if (rc)
			return rc;
	}
	if (failed > 0) {
		log_warn("catalog %s: generation %" PRIu64 " not committed by rule %s: %" PRIu64
			 " file(s) of it failed a write or last close (pggen.h X14, generation.h G9)",
			 pg_name(ns->pg), c->id, c->rule, failed);
		return -ENOTRECOVERABLE;
	}
	if (!backup && !lost)
		return 0; /* G_COMMIT_FREE committed it */
	if (explicit) /* X14: the decision takes it as it is */
		rc = pggen_exec(ns, G_FAILED_CLEAR, params, NULL);
	if (rc == 0)
		rc = pggen_backup_drop(ns, backup); /* the new version is what is proven now */
	if (rc == 0 && lost) { /* X6: a rewrite of a lost one, rolled back whole if still lost */
		rc = pggen_still_lost(ns, params, &lost);
		if (rc == 0 && lost)
			rc = -ENODATA;
	}
	return rc ? rc : pggen_exec(ns, G_COMMIT, set, NULL);
}

int pggen_commit_at(struct pgns *ns, uint64_t id, const char *rule, bool decision,
		    uint64_t *writers, uint32_t *version)
{
	char why[GEN_HELD_MAX] = "";
	struct pggen_call c = { .ns = ns, .id = id, .rule = rule, .open = decision, .list = "{}",
				.buf = why, .size = sizeof(why) };
	int rc = pg_txn(ns->pg, pggen_commit_body, &c);
	if (rc == -ENOTRECOVERABLE && why[0])
		log_warn("catalog %s: generation %" PRIu64 " not committed by rule %s: %s"
			 " (generation.h G13, pggen.h X17)", pg_name(ns->pg), id, rule, why);
	if (writers)
		*writers = c.count;
	if (version)
		*version = rc == 0 ? c.version : 0;
	return rc;
}

int pggen_commit(struct pgns *ns, uint64_t id, const char *rule, bool decision, uint64_t *writers)
{
	return pggen_commit_at(ns, id, rule, decision, writers, NULL);
}

/* reason, then the files of generation id still open for writing on any
 * node, if there are some ("; open for writing: inode 12 on host:1 (cache
 * /c), ..."), cut to what a held reason holds (GEN_HELD_MAX). */
static int pggen_reason(struct pgns *ns, uint64_t id, const char *reason,
			char out[GEN_HELD_MAX])
{
	char g[24];
	const char *params[] = { PG_U64(g, id) };
	PGresult *res;
	int rc = pggen_exec(ns, G_OPEN_WRITERS, params, &res);
	if (rc)
		return rc;
	size_t len = (size_t)snprintf(out, GEN_HELD_MAX, "%s", reason);
	for (int r = 0; r < pg_rows(res) && len < GEN_HELD_MAX; r++) {
		const char *node = PQgetisnull(res, r, 1) ? "a node gone" : PQgetvalue(res, r, 1);
		len += (size_t)snprintf(out + len, GEN_HELD_MAX - len, "%s%s inode %s on %s",
					r ? "," : ";", r ? "" : " open for writing:",
					PQgetvalue(res, r, 0), node);
		if (r == 7 && pg_rows(res) > 8 && len < GEN_HELD_MAX)
			len += (size_t)snprintf(out + len, GEN_HELD_MAX - len, ", ...");
		if (r == 7)
			break;
	}
	PQclear(res);
	return 0;
}

static int pggen_hold_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	int state = -1;
	bool lost = false;
	uint64_t backup = 0;
	if (c->ids)
		c->ids->n = 0; /* the body may run again (pg.h P2) */
	c->rolled_back = false;
	int rc = lease_fence(c->ns->lease);
	if (rc == 0)
		rc = pggen_lock(c->ns, c->id, &state, &lost, &backup);
	if (rc)
		return rc;
	if (state == GEN_HELD)
		return -EALREADY;
	if (state != GEN_OPEN)
		return -EINVAL;
	if (backup) { /* a new version: what was proven is its previous one */
		struct cat_gen row;
		rc = pggen_row_locked(c->ns, c->id, &row, NULL);
		c->rolled_back = rc == 0;
		return rc ? rc : pggen_restore(c->ns, &row, c->rule, c->reason, &c->kept, c->ids);
	}
	char g[24], why[GEN_HELD_MAX];
	rc = pggen_reason(c->ns, c->id, c->reason, why);
	const char *params[] = { PG_U64(g, c->id), c->rule, why };
	return rc ? rc : pggen_exec(c->ns, G_HOLD, params, NULL);
}

int pggen_hold_ids(struct pgns *ns, uint64_t id, const char *rule, const char *reason,
		   struct cat_id_vec *ids, bool *held)
{
	if (!reason || !*reason || !rule || strlen(rule) >= GEN_RULE_MAX)
		return -EINVAL; /* G5: a held generation says why */
	struct pggen_call c = { .ns = ns, .id = id, .rule = rule, .reason = reason, .ids = ids };
	int rc = pg_txn(ns->pg, pggen_hold_body, &c);
	if (held)
		*held = rc == 0 && !c.rolled_back;
	if (rc == 0 && c.rolled_back && c.kept.id)
		log_warn("catalog %s: generation %" PRIu64 ": the rolled-back version kept held as"
			 " \"%s\" (generation %" PRIu64 ", not shown; ckptfs-admin commit or rm"
			 " decide)", pg_name(ns->pg), id, c.kept.name, c.kept.id);
	return rc;
}

int pggen_hold(struct pgns *ns, uint64_t id, const char *rule, const char *reason)
{
	return pggen_hold_ids(ns, id, rule, reason, NULL, NULL);
}

/* ---- X16: a chunk lost before its upload ---- */

struct pggen_lost_chunk {
	struct pgns *ns;
	const char *hex;
	struct pggen_lost_hit *hits;
	size_t cap, n;
};

static int pggen_hold_lost_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_lost_chunk *c = arg;
	c->n = 0; /* the body may run again (pg.h P2) */
	int rc = lease_fence(c->ns->lease);
	if (rc)
		return rc;
	char node[24], max[24];
	const char *params[] = { c->hex, PG_U64(node, c->ns->lease->node_id), PG_U64(max, c->cap) };
	PGresult *res;
	rc = pggen_exec(c->ns, G_LOST_CHUNK_OPEN_LOCK, params, NULL); /* first: X16's order */
	if (rc == 0)
		rc = pggen_exec(c->ns, G_LOST_CHUNK_GENS, params, &res);
	if (rc)
		return rc;
	for (int r = 0; r < pg_rows(res) && c->n < c->cap; r++) {
		struct pggen_lost_hit *h = &c->hits[c->n++];
		h->id = (uint64_t)pg_int(res, r, 0);
		h->ino = (uint64_t)pg_int(res, r, 1);
		snprintf(h->name, sizeof(h->name), "%s", PQgetvalue(res, r, 2));
	}
	PQclear(res);
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		char g[24], why[GEN_HELD_MAX];
		gen_lost_chunk_reason(c->hex, c->hits[i].name, c->hits[i].ino, node, why, sizeof(why));
		const char *hp[] = { PG_U64(g, c->hits[i].id), GEN_LOST_CHUNK_RULE, why };
		rc = pggen_exec(c->ns, G_HOLD, hp, NULL);
	}
	return rc ? rc : pggen_exec(c->ns, G_LOST_CHUNK_MARK, params, NULL);
}

int pggen_hold_lost_chunk(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN],
			  struct pggen_lost_hit *hits, size_t cap, size_t *n)
{
	char hex[2 * CAT_HASH_LEN + 1];
	hash_to_hex(hash, hex);
	struct pggen_lost_chunk c = { .ns = ns, .hex = hex, .hits = hits, .cap = cap };
	int rc = pg_txn(ns->pg, pggen_hold_lost_body, &c);
	*n = rc == 0 ? c.n : 0;
	return rc;
}

static int pggen_lost_of_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char g[24], node[24];
	const char *params[] = { PG_U64(g, c->id), c->list, PG_U64(node, c->ns->lease->node_id) };
	PGresult *res;
	int rc = pggen_exec(c->ns, G_LOST_CHUNK_OF_GEN, params, &res);
	if (rc)
		return rc;
	c->buf[0] = '\0';
	if (pg_rows(res) == 1)
		gen_lost_chunk_reason(PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 2),
				      (uint64_t)pg_int(res, 0, 1), PQgetvalue(res, 0, 3), c->buf,
				      c->size);
	PQclear(res);
	return 0;
}

int pggen_lost_chunk_of(struct pgns *ns, uint64_t id, const uint8_t (*hashes)[CAT_HASH_LEN],
			size_t n, char *reason, size_t size)
{
	assert(size > 0);
	reason[0] = '\0';
	char *list = NULL;
	int rc = pgns_hex_list(n ? hashes[0] : NULL, CAT_HASH_LEN, n, &list);
	if (rc)
		return rc;
	struct pggen_call c = { .ns = ns, .id = id, .list = list, .buf = reason, .size = size };
	rc = pg_read(ns->pg, pggen_lost_of_body, &c);
	free(list);
	if (rc)
		reason[0] = '\0';
	return rc;
}

/* ---- X18: a lost-chunk hold ends once its save is whole on BACKING ---- */

static int pggen_whole_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc)
		return rc;
	char max[24], now[24];
	const char *params[] = { PG_U64(max, c->count), PG_I64(now, pgns_now_ns()) };
	PQclear(c->res);
	c->res = NULL;
	return pggen_exec(c->ns, G_LOST_CHUNK_WHOLE, params, &c->res);
}

int pggen_lost_chunk_whole(struct pgns *ns, size_t max, size_t *n)
{
	struct pggen_call c = { .ns = ns, .count = max };
	*n = 0;
	int rc = pg_txn(ns->pg, pggen_whole_body, &c);
	for (int r = 0; rc == 0 && r < pg_rows(c.res); r++)
		log_info("catalog %s: generation %s (%" PRIu64 "), held because a chunk of it was lost"
			 " before its upload, is committed again: every chunk of it is on BACKING now"
			 " (pggen.h X18)", pg_name(ns->pg), PQgetvalue(c.res, r, 1),
			 (uint64_t)pg_int(c.res, r, 0));
	if (rc == 0)
		*n = (size_t)pg_rows(c.res);
	PQclear(c.res);
	return rc;
}

/* ---- a node lost ---- */

static int pggen_adopt_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc)
		return rc;
	char me[24], dead[24];
	const char *params[] = { PG_U64(me, c->ns->lease->node_id), PG_U64(dead, c->dead), c->list };
	PGresult *res;
	rc = pggen_exec(c->ns, G_ADOPT, params, &res);
	if (rc == 0)
		c->count = strtoull(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return rc;
}

int pggen_adopt(struct pgns *ns, uint64_t dead, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		size_t *adopted)
{
	*adopted = 0;
	char *list = NULL;
	int rc = pgns_hex_list(n ? hashes[0] : NULL, CAT_HASH_LEN, n, &list);
	if (rc)
		return rc;
	struct pggen_call c = { .ns = ns, .dead = dead, .list = list };
	rc = pg_txn(ns->pg, pggen_adopt_body, &c);
	free(list);
	if (rc == 0)
		*adopted = (size_t)c.count;
	return rc;
}

/* ---- X10: the verdict `lost` re-checked ---- */

static int pggen_recheck_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char node[24], after[24], max[24];
	const char *params[] = { PG_U64(node, c->ns->lease->node_id), PG_U64(after, c->id),
				 PG_U64(max, c->count) };
	PQclear(c->res);
	c->res = NULL;
	int rc = pggen_exec(c->ns, G_LOST_RECHECK, params, &c->res);
	return rc ? rc : lease_fenced(c->res);
}

int pggen_lost_recheck(struct pgns *ns, uint64_t *after, size_t max, size_t *checked,
		       size_t *cleared)
{
	struct pggen_call c = { .ns = ns, .id = *after, .count = max };
	*checked = *cleared = 0;
	int rc = pg_read(ns->pg, pggen_recheck_body, &c); /* one statement, L5 */
	if (rc == 0) {
		*checked = (size_t)pg_int(c.res, 0, 2);
		*cleared = (size_t)pg_int(c.res, 0, 3);
		/* a short batch reached the last one: the next starts over */
		*after = *checked < max ? 0 : (uint64_t)pg_int(c.res, 0, 1);
	}
	PQclear(c.res);
	if (*cleared > 0)
		log_info("catalog %s: %zu generations lost no more: every chunk of them is on BACKING"
			 " or held by a live node", pg_name(ns->pg), *cleared);
	return rc;
}

static int pggen_orphans_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char max[24];
	const char *params[] = { c->list, PG_U64(max, c->count) };
	PQclear(c->res);
	c->res = NULL;
	return pggen_exec(c->ns, G_ORPHANS, params, &c->res);
}

int pggen_orphans(struct pgns *ns, const uint8_t *after, uint8_t (*hashes)[CAT_HASH_LEN],
		  size_t max, size_t *n)
{
	char from[2 * CAT_HASH_LEN + 1] = "";
	if (after)
		hash_to_hex(after, from);
	struct pggen_call c = { .ns = ns, .list = from, .count = max };
	*n = 0;
	int rc = pg_read(ns->pg, pggen_orphans_body, &c); /* pg.h P5 */
	for (int r = 0; rc == 0 && r < pg_rows(c.res) && *n < max; r++)
		rc = hash_from_hex(PQgetvalue(c.res, r, 0), hashes[(*n)++]);
	PQclear(c.res);
	return rc;
}

/* Keeps in ids only the inodes no node has open for writing (the dead
 * node's rows are gone by now): a live writer of a rolled-back file
 * releases it itself, as after any unlink. */
static int pggen_unwritten(struct pgns *ns, struct cat_id_vec *ids)
{
	size_t kept = 0;
	for (size_t i = 0; i < ids->n; i++) {
		char ino[24];
		const char *params[] = { PG_U64(ino, ids->v[i]) };
		uint64_t writers = 0;
		int rc = pggen_one_int(ns, G_WRITING_INO, params, &writers);
		if (rc)
			return rc;
		if (writers == 0)
			ids->v[kept++] = ids->v[i];
	}
	ids->n = kept;
	return 0;
}

static int pggen_lost_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	PQclear(c->res);
	PQclear(c->res2);
	PQclear(c->res3);
	c->res = c->res2 = c->res3 = NULL;
	int rc = lease_fence(ns->lease);
	if (rc == 0)
		rc = lease_settle_claim(ns->lease, c->dead, &c->claimed); /* L7 */
	c->ids->n = 0; /* the body may run again (pg.h P2) */
	if (rc || !c->claimed)
		return rc; /* settled already (by another node, or this body's first run) */
	char dead[24], why[160];
	const char *rollback[] = { PG_U64(dead, c->dead) };
	rc = pggen_exec(ns, G_NODE_ROLLBACK, rollback, &c->res3);
	for (int r = 0; rc == 0 && r < pg_rows(c->res3); r++) {
		struct cat_gen g;
		rc = pggen_row_locked(ns, (uint64_t)pg_int(c->res3, r, 0), &g, NULL);
		struct pggen_kept kept;
		if (rc == 0 && g.state == GEN_OPEN && g.backup_root)
			rc = pggen_restore(ns, &g, "node-lost", "its node lost its lease", &kept,
					   c->ids);
		if (rc == 0 && g.state == GEN_OPEN && g.backup_root && kept.id)
			log_warn("catalog %s: generation %s (step %" PRIu64 "): node %" PRIu64 " lost"
				 " while writing version %" PRIu32 ": kept held as \"%s\""
				 " (generation %" PRIu64 ", not shown; ckptfs-admin commit or rm"
				 " decide), version %" PRIu32 " back at its name", pg_name(ns->pg),
				 g.name, g.step, c->dead, g.version, kept.name, kept.id,
				 g.version - 1);
	}
	if (rc)
		return rc;
	snprintf(why, sizeof(why), "node %" PRIu64 " lost its lease during the save (a file of it"
		 " open, or before its completion signal)", c->dead);
	const char *hold[] = { PG_U64(dead, c->dead), why };
	rc = pggen_exec(ns, G_HOLD_NODE, hold, &c->res);
	const char *by_node[] = { dead };
	if (rc == 0)
		rc = pggen_exec(ns, G_DROP_WRITING, by_node, NULL);
	if (rc == 0)
		rc = pggen_exec(ns, G_LOSE, by_node, &c->res2);
	if (rc == 0)
		rc = pggen_unwritten(ns, c->ids);
	return rc;
}

static void pggen_ids(PGresult *res, uint64_t *ids, size_t max, size_t *n)
{
	*n = 0;
	for (int r = 0; r < pg_rows(res) && *n < max; r++)
		ids[(*n)++] = (uint64_t)pg_int(res, r, 0);
}

int pggen_node_lost(struct pgns *ns, uint64_t dead, uint64_t *held, size_t max_held,
		    size_t *n_held, uint64_t *lost, size_t max_lost, size_t *n_lost)
{
	struct cat_id_vec ids = { 0 };
	struct pggen_call c = { .ns = ns, .dead = dead, .ids = &ids };
	int rc = pg_txn(ns->pg, pggen_lost_body, &c);
	*n_held = *n_lost = 0;
	/* the rolled-back versions' inodes have no link left and no writer: no
	 * node would release them (their writer died), so the sweep does, and
	 * their chunk counts drop (a failure leaves them at nlink 0, which the
	 * check tolerates, as after any unreleased unlink) */
	int rrc = rc == 0 && ids.n ? pgns_inodes_release(ns, ids.v, ids.n) : 0;
	if (rrc)
		log_warn("catalog %s: %zu inodes of versions rolled back after node %" PRIu64
			 " was lost not released: %s", pg_name(ns->pg), ids.n, dead, strerror(-rrc));
	cat_id_vec_free(&ids);
	if (rc == 0) {
		pggen_ids(c.res, held, max_held, n_held);
		pggen_ids(c.res2, lost, max_lost, n_lost);
		for (size_t i = 0; i < *n_held; i++)
			log_warn("catalog %s: generation %" PRIu64 " held: node %" PRIu64
				 " lost its lease during the save",
				 pg_name(ns->pg), held[i], dead);
		for (int r = 0; r < pg_rows(c.res3); r++)
			log_warn("catalog %s: generation %s rolled back to its previous version: node"
				 " %" PRIu64 " lost its lease while rewriting it", pg_name(ns->pg),
				 PQgetvalue(c.res3, r, 0), dead);
		for (int r = 0; r < pg_rows(c.res2); r++)
			log_error("catalog %s: generation %s lost: chunks only node %" PRIu64
				  " had, not on BACKING%s", pg_name(ns->pg), PQgetvalue(c.res2, r, 0),
				  dead, PQgetvalue(c.res2, r, 1)[0] == 't' ?
				  "; a rewrite: the reclaim of BACKING waits until it is whole again"
				  " (its node back with its cache) or deleted (ckptfs-admin rm)" : "");
	}
	PQclear(c.res);
	PQclear(c.res2);
	PQclear(c.res3);
	return rc;
}

/* ---- reading ---- */

static void pggen_row(PGresult *res, int r, struct cat_gen *out, bool *lost)
{
	memset(out, 0, sizeof(*out));
	out->id = (uint64_t)pg_int(res, r, 0);
	out->series = (uint64_t)pg_int(res, r, 1);
	out->root = (uint64_t)pg_int(res, r, 2);
	snprintf(out->name, sizeof(out->name), "%s", PQgetvalue(res, r, 3));
	out->step = (uint64_t)pg_int(res, r, 4);
	out->state = (int)pg_int(res, r, 5);
	out->version = (uint32_t)pg_int(res, r, 6);
	out->pinned = PQgetvalue(res, r, 7)[0] == 't';
	out->created_ns = pg_int(res, r, 8);
	out->committed_ns = pg_int(res, r, 9);
	out->ended_ns = pg_int(res, r, 10);
	snprintf(out->rule, sizeof(out->rule), "%s", PQgetvalue(res, r, 11));
	snprintf(out->held, sizeof(out->held), "%s", PQgetvalue(res, r, 12));
	if (lost)
		*lost = PQgetvalue(res, r, 13)[0] == 't';
	out->backup_root = (uint64_t)pg_int(res, r, 14);
}

/* The reads below run under pg_read (pg.h P5): SELECTs only, no row lock,
 * one round trip each; a body of two (a row, then its sizes) sees each as of
 * its own statement, as it did inside a READ COMMITTED transaction. */
static int pggen_read_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	PQclear(c->res);
	c->res = NULL;
	char v[24];
	const char *params[] = { PG_U64(v, c->id) };
	return pggen_exec(c->ns, c->state, params, &c->res);
}

int pggen_get(struct pgns *ns, uint64_t id, struct cat_gen *out, bool *lost)
{
	struct pggen_call c = { .ns = ns, .id = id, .state = G_GET };
	int rc = pg_read(ns->pg, pggen_read_body, &c); /* pg.h P5 */
	if (rc == 0 && pg_rows(c.res) != 1)
		rc = -ENOENT;
	if (rc == 0)
		pggen_row(c.res, 0, out, lost);
	PQclear(c.res);
	return rc;
}

int pggen_list(struct pgns *ns, uint64_t series, cat_gen_fn fn, void *arg)
{
	struct pggen_call c = { .ns = ns, .id = series, .state = G_LIST };
	int rc = pg_read(ns->pg, pggen_read_body, &c); /* pg.h P5 */
	for (int r = 0; rc == 0 && r < pg_rows(c.res); r++) {
		struct cat_gen g;
		pggen_row(c.res, r, &g, NULL);
		if (fn(arg, &g) != 0)
			break;
	}
	PQclear(c.res);
	return rc;
}

/* ---- generation.h's calls over PostgreSQL (catalog_shared_gen.c) ---- */

/* The generation's row, locked against every other change of it. */
static int pggen_row_locked(struct pgns *ns, uint64_t id, struct cat_gen *out, bool *lost)
{
	char g[24];
	const char *params[] = { PG_U64(g, id) };
	PGresult *res;
	int rc = pggen_exec(ns, G_GET_LOCK, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	if (rc == 0)
		pggen_row(res, 0, out, lost);
	PQclear(res);
	return rc;
}

/* Whether g has a tree to count (G2: others own none). */
static bool pggen_has_tree(const struct cat_gen *g)
{
	return g->state == GEN_OPEN || g->state == GEN_COMMITTED || g->state == GEN_HELD;
}

static int pggen_one_int(struct pgns *ns, int stmt, const char *const *params, uint64_t *out)
{
	PGresult *res;
	int rc = pggen_exec(ns, stmt, params, &res);
	if (rc)
		return rc;
	*out = pg_rows(res) > 0 ? (uint64_t)pg_int(res, 0, 0) : 0;
	PQclear(res);
	return 0;
}

/* The live generation rooted at ino (0 if none), its row locked. */
static int pggen_root_of(struct pgns *ns, uint64_t ino, uint64_t *id)
{
	char i[24];
	const char *params[] = { PG_U64(i, ino) };
	return pggen_one_int(ns, G_ROOT_OF, params, id);
}

/* Ends generation id where its tree stands (renamed away, replaced): DELETED
 * with rule, owning nothing (G2); the tree is left to the caller. */
static int pggen_end_row(struct pgns *ns, uint64_t id, int state, const char *rule)
{
	int was = -1;
	bool lost = false;
	uint64_t backup = 0;
	int rc = pggen_lock(ns, id, &was, &lost, &backup);
	if (rc == 0)
		rc = pggen_backup_drop(ns, backup);
	if (rc)
		return rc;
	char g[24], s[24], t[24];
	const char *params[] = { PG_U64(g, id), PG_U64(s, (uint64_t)state),
				 PG_I64(t, pgns_now_ns()), rule };
	return pggen_exec(ns, G_END, params, NULL);
}

static int pggen_inode_set_gen(struct pgns *ns, uint64_t ino, uint64_t gen)
{
	char i[24], g[24];
	const char *params[] = { PG_U64(i, ino), gen ? PG_U64(g, gen) : NULL };
	return pggen_exec(ns, G_INODE_SET_GEN, params, NULL);
}

static int pggen_insert(struct pgns *ns, uint64_t series, uint64_t root, const char *name,
			uint64_t step, uint64_t *id)
{
	char s[24], r[24], st[24], t[24], node[24];
	const char *params[] = { PG_U64(s, series), PG_U64(r, root), name, PG_U64(st, step),
				 PG_I64(t, pgns_now_ns()), PG_U64(node, ns->lease->node_id) };
	int rc = pggen_one_int(ns, G_GEN_INSERT, params, id);
	return rc ? rc : pggen_inode_set_gen(ns, root, *id);
}

/* -EXDEV if the tree under ino (mode, nlink) has a link out of it: a hard
 * link never crosses a generation boundary. */
static int pggen_tree_xdev(struct pgns *ns, uint64_t ino, uint32_t mode, uint64_t nlink)
{
	if (!S_ISDIR(mode) && nlink > 1)
		return -EXDEV;
	char i[24];
	const char *params[] = { PG_U64(i, ino) };
	uint64_t leak = 0;
	int rc = pggen_one_int(ns, G_TREE_XDEV, params, &leak);
	return rc ? rc : leak ? -EXDEV : 0;
}

/* generation.h G8: -EBUSY, with one log line, if generation id (its row
 * locked here) is a rewrite: ending it would drop its backup, the only copy
 * of the committed version. *state is its state. */
static int pggen_move_refused(struct pgns *ns, uint64_t id, const char *newname, bool stays,
			      int *state)
{
	bool lost = false;
	uint64_t backup = 0;
	int rc = pggen_lock(ns, id, state, &lost, &backup);
	if (rc == 0 && ((*state == GEN_HELD && !stays) || lost)) {
		log_warn("catalog: generation %" PRIu64 " not moved to \"%s\": it is %s, and a"
			 " move%s would show its files as complete ones; decide it first:"
			 " ckptfs-admin commit or rm", id, newname,
			 lost ? "lost while its node is away (X2)" : "held (not proven complete)",
			 lost ? "" : " that is no plain rename to a step name (an exchange, another"
				     " name, a move into a save)");
		rc = -EBUSY;
	} else if (rc == 0 && backup != 0) {
		log_warn("catalog: generation %" PRIu64 " not moved to \"%s\": a new version of it is"
			 " being written over the committed one, whose only copy the move would"
			 " drop; wait for its commit, or abort it with ckptfs-admin rm --force",
			 id, newname);
		rc = -EBUSY;
	}
	return rc;
}

/* Inode ino was just linked as newparent/newname by a rename: as
 * cat_gen_moved_txn of the SQLite engine (generation.h's cat_rename_gen). */
static int pggen_moved(struct pgns *ns, uint64_t ino, uint64_t newparent, const char *newname,
		       const struct cat_gen_spec *spec, uint64_t *new_gen)
{
	char i[24], p[24];
	const char *params[] = { PG_U64(i, ino) };
	PGresult *res;
	int rc = pggen_exec(ns, G_INODE_ROW, params, &res);
	if (rc)
		return rc;
	if (pg_rows(res) != 1) {
		PQclear(res);
		return -ENOENT;
	}
	uint32_t mode = (uint32_t)pg_int(res, 0, 0);
	uint64_t nlink = (uint64_t)pg_int(res, 0, 1), old = (uint64_t)pg_int(res, 0, 2);
	PQclear(res);
	uint64_t target = 0, rooted = 0;
	rc = pggen_of(ns, newparent, &target);
	if (rc == 0 && spec && target)
		rc = -EINVAL; /* a series is outside every generation */
	int was = -1;
	if (rc == 0 && old)
		rc = pggen_root_of(ns, ino, &rooted);
	if (rc == 0 && rooted)
		rc = pggen_move_refused(ns, rooted, newname, spec != NULL, &was);
	bool keep = rc == 0 && rooted && spec && was == GEN_HELD;
	if (keep) { /* G8: held it was, held it stays, under its new name */
		char g[24], s[24], st[24];
		const char *mv[] = { PG_U64(g, rooted), PG_U64(s, newparent), newname,
				     PG_U64(st, spec->step) };
		rc = pggen_exec(ns, G_MOVE, mv, NULL);
		target = rooted; /* old == target: the tree keeps its gen */
	} else if (rc == 0 && rooted) { /* moved, so no longer the root it was */
		rc = pggen_end_row(ns, rooted, GEN_DELETED, "renamed");
	}
	if (rc == 0 && spec && !keep)
		rc = pggen_insert(ns, newparent, ino, newname, spec->step, &target);
	if (rc == 0 && new_gen) /* a new one only: rule "rename" commits it */
		*new_gen = spec && !keep ? target : 0;
	if (rc || old == target)
		return rc;
	/* the subtree changes generation: it must hold all its links, and the
	 * generations rooted inside it (a series moved into one) end */
	rc = pggen_tree_xdev(ns, ino, mode, nlink);
	const char *nested_params[] = { params[0], PG_U64(p, target) };
	PGresult *nested = NULL;
	if (rc == 0)
		rc = pggen_exec(ns, G_TREE_NESTED, nested_params, &nested);
	for (int r = 0; rc == 0 && r < pg_rows(nested); r++) {
		rc = pggen_move_refused(ns, (uint64_t)pg_int(nested, r, 0), newname, false, &was);
		if (rc == 0)
			rc = pggen_end_row(ns, (uint64_t)pg_int(nested, r, 0), GEN_DELETED, "renamed");
	}
	PQclear(nested);
	const char *set[] = { params[0], target ? p : NULL };
	return rc ? rc : pggen_exec(ns, G_TREE_SET_GEN, set, NULL);
}

/* ino lost an entry to a rename over it: a generation rooted there ends. */
static int pggen_unlinked(struct pgns *ns, uint64_t ino, const char *rule)
{
	uint64_t id = 0;
	int rc = pggen_root_of(ns, ino, &id);
	if (rc || !id)
		return rc;
	rc = pggen_end_row(ns, id, GEN_DELETED, rule);
	return rc ? rc : pggen_inode_set_gen(ns, ino, 0); /* links left: it leaves it too */
}

static int pggen_entry(struct pgns *ns, uint64_t parent, const char *name, uint64_t *id,
		       uint64_t *ino)
{
	char p[24];
	const char *params[] = { PG_U64(p, parent), name };
	PGresult *res;
	int rc = pggen_exec(ns, G_DIRENT_INO, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	*id = rc == 0 ? (uint64_t)pg_int(res, 0, 0) : 0;
	*ino = rc == 0 ? (uint64_t)pg_int(res, 0, 1) : 0;
	PQclear(res);
	return rc;
}

struct pggen_rename_call {
	struct pgns *ns;
	uint64_t parent, newparent;
	const char *name, *newname;
	unsigned flags;
	const struct cat_gen_spec *spec;
	uint64_t replaced, new_gen, moved;
};

static int pggen_rename_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_rename_call *c = arg;
	struct pgns *ns = c->ns;
	c->replaced = c->new_gen = c->moved = 0;
	int rc = pgns_rename_txn(ns, c->parent, c->name, c->newparent, c->newname, c->flags,
				 &c->replaced);
	uint64_t src_id = 0, src = 0, dst_id = 0, dst = 0;
	if (rc == 0)
		rc = pggen_entry(ns, c->newparent, c->newname, &src_id, &src);
	if (rc)
		return rc;
	c->moved = src; /* newname's inode in this transaction, its directory locked */
	bool exchange = c->flags & CAT_RENAME_EXCHANGE;
	/* the old name still there after a plain rename: a name renamed onto
	 * its own inode, which POSIX makes a no-op */
	if (!exchange && pggen_entry(ns, c->parent, c->name, &dst_id, &dst) == 0)
		return 0;
	if (c->replaced)
		rc = pggen_unlinked(ns, c->replaced, "replaced");
	if (rc == 0)
		rc = pggen_moved(ns, src, c->newparent, c->newname, c->spec, &c->new_gen);
	if (rc == 0 && exchange)
		rc = pggen_entry(ns, c->parent, c->name, &dst_id, &dst);
	if (rc == 0 && exchange)
		rc = pggen_moved(ns, dst, c->parent, c->name, NULL, NULL);
	return rc;
}

int pggen_rename(struct pgns *ns, uint64_t parent, const char *name, uint64_t newparent,
		 const char *newname, unsigned flags, const struct cat_gen_spec *spec,
		 uint64_t *replaced_ino, uint64_t *new_gen_id, uint64_t *moved_ino)
{
	struct pggen_rename_call c = { .ns = ns, .parent = parent, .newparent = newparent,
				       .name = name, .newname = newname, .flags = flags,
				       .spec = spec };
	int rc = pg_txn(ns->pg, pggen_rename_body, &c);
	if (replaced_ino)
		*replaced_ino = rc == 0 ? c.replaced : 0;
	if (new_gen_id)
		*new_gen_id = rc == 0 ? c.new_gen : 0;
	if (moved_ino)
		*moved_ino = rc == 0 ? c.moved : 0;
	return rc;
}

struct pggen_others_call {
	struct pgns *ns;
	uint64_t id, count;
};

static int pggen_others_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_others_call *c = arg;
	char g[24], node[24];
	const char *params[] = { PG_U64(g, c->id), PG_U64(node, c->ns->lease->node_id) };
	return pggen_one_int(c->ns, G_OTHERS, params, &c->count);
}

int pggen_others(struct pgns *ns, uint64_t id, bool *others)
{
	struct pggen_others_call c = { .ns = ns, .id = id };
	int rc = pg_read(ns->pg, pggen_others_body, &c); /* pg.h P5 */
	*others = rc == 0 && c.count > 0;
	return rc;
}

struct pggen_remove_call {
	struct pgns *ns;
	uint64_t parent;
	const char *name;
	bool dir;
	uint64_t ino;
};

static int pggen_remove_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_remove_call *c = arg;
	c->ino = 0;
	int rc = c->dir ? pgns_rmdir_txn(c->ns, c->parent, c->name, &c->ino)
			: pgns_unlink_txn(c->ns, c->parent, c->name, &c->ino);
	/* as the SQLite engine's cat_gen_unlinked_txn: rule "trainer" */
	return rc ? rc : pggen_unlinked(c->ns, c->ino, "trainer");
}

int pggen_remove(struct pgns *ns, uint64_t parent, const char *name, bool dir, uint64_t *ino_out)
{
	struct pggen_remove_call c = { .ns = ns, .parent = parent, .name = name, .dir = dir };
	int rc = pg_txn(ns->pg, pggen_remove_body, &c);
	if (ino_out)
		*ino_out = rc == 0 ? c.ino : 0;
	return rc;
}

static int pggen_of_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	return pggen_of(c->ns, c->ino, &c->id);
}

int pggen_gen_of(struct pgns *ns, uint64_t ino, uint64_t *gen_id)
{
	struct pggen_call c = { .ns = ns, .ino = ino };
	int rc = pg_read(ns->pg, pggen_of_body, &c); /* pg.h P5 */
	*gen_id = rc == 0 ? c.id : 0;
	return rc;
}

/* ---- reading, with sizes ---- */

struct pggen_read_call {
	struct pgns *ns;
	int stmt;
	const char *const *params;
	struct cat_gen *out;
	bool sized;
};

/* X5: what generation.h's callers see of a lost COMMITTED generation: HELD,
 * rule "node-lost", with why. */
static void pggen_lost_view(struct cat_gen *g, bool lost)
{
	if (!lost || g->state != GEN_COMMITTED)
		return;
	g->lost = true; /* X13: keep-held ends it only against a durable newer save */
	g->state = GEN_HELD;
	snprintf(g->rule, sizeof(g->rule), "%s", "node-lost");
	snprintf(g->held, sizeof(g->held), "%s", PGGEN_LOST_REASON);
}

static int pggen_read_one_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_read_call *c = arg;
	PGresult *res;
	int rc = pggen_exec(c->ns, c->stmt, c->params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	bool lost = false;
	if (rc == 0) {
		pggen_row(res, 0, c->out, &lost);
		pggen_lost_view(c->out, lost); /* X5 */
	}
	if (rc == 0 && c->sized && pggen_has_tree(c->out)) { /* G_GET_SIZED's counts */
		c->out->files = (uint64_t)pg_int(res, 0, 15);
		c->out->logical_bytes = (uint64_t)pg_int(res, 0, 16);
	}
	PQclear(res);
	return rc;
}

/* One row of stmt as struct cat_gen; sized: stmt is G_GET_SIZED, whose
 * counts fill files and logical_bytes. */
static int pggen_read_one(struct pgns *ns, int stmt, const char *const *params, bool sized,
			  struct cat_gen *out)
{
	assert(sized == (stmt == G_GET_SIZED));
	struct pggen_read_call c = { ns, stmt, params, out, sized };
	return pg_read(ns->pg, pggen_read_one_body, &c); /* pg.h P5 */
}

int pggen_get_sized(struct pgns *ns, uint64_t id, struct cat_gen *out)
{
	char g[24];
	const char *params[] = { PG_U64(g, id) };
	return pggen_read_one(ns, G_GET_SIZED, params, true, out);
}

int pggen_find(struct pgns *ns, uint64_t series, const char *name, struct cat_gen *out)
{
	char s[24];
	const char *params[] = { PG_U64(s, series), name };
	return pggen_read_one(ns, G_FIND_NAME, params, false, out);
}

int pggen_find_step(struct pgns *ns, uint64_t series, uint64_t step, struct cat_gen *out)
{
	if (step > INT64_MAX)
		return -ENOENT;
	char s[24], st[24];
	const char *params[] = { PG_U64(s, series), PG_U64(st, step) };
	return pggen_read_one(ns, G_FIND_STEP, params, false, out);
}

static int pggen_list_all_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	PQclear(c->res);
	c->res = NULL;
	char s[24];
	const char *params[] = { PG_U64(s, c->id), c->open ? "true" : "false" };
	return pggen_exec(c->ns, G_LIST_ALL, params, &c->res);
}

/* Rows in one transaction, then each one sized in its own (as the SQLite
 * engine does: each entry consistent in itself, as of when it was sized). */
int pggen_list_all(struct pgns *ns, uint64_t series, bool all, cat_gen_fn fn, void *arg)
{
	struct pggen_call c = { .ns = ns, .id = series, .open = all };
	struct cat_gen_vec rows = { 0 };
	int rc = pg_read(ns->pg, pggen_list_all_body, &c); /* pg.h P5 */
	for (int r = 0; rc == 0 && r < pg_rows(c.res); r++) {
		struct cat_gen g;
		bool lost = false;
		pggen_row(c.res, r, &g, &lost);
		pggen_lost_view(&g, lost); /* X5 (pggen_get_sized below does it again) */
		rc = cat_gen_vec_add(&rows, &g);
	}
	PQclear(c.res);
	for (size_t i = 0; rc == 0 && i < rows.n; i++) {
		struct cat_gen *g = &rows.v[i];
		if (g->state == GEN_OPEN || g->state == GEN_COMMITTED || g->state == GEN_HELD)
			rc = pggen_get_sized(ns, g->id, g);
		if (rc == -ENOENT)
			rc = 0; /* not possible today: generation rows are never deleted */
		int frc = rc == 0 ? fn(arg, g) : 0;
		if (frc != 0) {
			rc = frc < 0 ? frc : 0;
			break;
		}
	}
	cat_gen_vec_free(&rows);
	return rc;
}

/* ---- ending a generation: abort, delete, expire ---- */

struct pggen_end_call {
	struct pgns *ns;
	uint64_t id;
	int how; /* enum pggen_end */
	uint32_t keep; /* PGGEN_EXPIRE: the newer saves G6 asks for */
	const char *rule;
	struct cat_id_vec *ids;
};

/* generation.h G6, in the expire's transaction: -EBUSY unless `keep` newer
 * complete saves of g's owner, committed by a strong rule, still exist, g
 * is not its owner's most recently committed save (a lost g counts as HELD: X5),
 * one of them durable if g is (COMMITTED, not lost, durable_version =
 * version, or HELD with its manifest on BACKING: the owner's newest
 * durable save stays while the newer ones are only in a node's cache) or
 * if g is a lost COMMITTED save (X13: lost as this transaction re-checks
 * it, whatever the listing showed), and,
 * COMMITTED, no node has a file of g open for writing (X12). */
static int pggen_keep_still_newer(struct pgns *ns, const struct cat_gen *g, bool lost,
				  uint32_t keep)
{
	char id[24], s[24], r[24], st[24], t[24];
	const char *params[] = { PG_U64(id, g->id), PG_U64(s, g->series), PG_U64(r, g->root),
				 PG_U64(st, g->step), PG_I64(t, g->committed_ns),
				 g->state == GEN_HELD || lost ? "true" : "false" };
	PGresult *res = NULL;
	int rc = keep == 0 ? 0 : pggen_exec(ns, G_KEEP_NEWER, params, &res);
	if (rc == 0 && res) { /* an aggregate: one row */
		uint64_t newer = (uint64_t)pg_int(res, 0, 0);
		uint64_t newer_durable = (uint64_t)pg_int(res, 0, 1);
		bool durable = !lost && pg_int(res, 0, 2) != 0;
		bool latest = pg_int(res, 0, 3) != 0; /* G6: the owner's last commit */
		/* X13: a committed save lost only because its node is away (its
		 * cache may bring it back whole, X10) goes only once a newer save
		 * of its owner is safe off every node; a truly HELD one (state 4,
		 * lost or not) as before */
		bool lost_save = lost && g->state == GEN_COMMITTED;
		if (newer < keep || latest || ((durable || lost_save) && newer_durable == 0))
			rc = -EBUSY;
	}
	PQclear(res);
	if (rc != 0)
		return rc;
	/* X12: nor a COMMITTED one while a node has a file of it open for
	 * writing (its first change reopens it); a statement of its own after
	 * the row lock, which an open's FOR SHARE waits for (X1). A HELD one
	 * goes as before: its open files are what its hold names. */
	uint64_t writers = 0;
	if (rc == 0 && g->state == GEN_COMMITTED && !lost)
		rc = pggen_one_int(ns, G_KEEP_WRITERS, params, &writers);
	return rc == 0 && writers ? -EBUSY : rc;
}

/* The state `how` needs (generation.h): abort an OPEN one (-EALREADY if
 * aborted, -ENOENT if deleted, -EINVAL otherwise); delete one with a tree
 * (-ENOENT otherwise); expire a COMMITTED or HELD unpinned one (-EBUSY if
 * it is not that any more). */
static int pggen_end_want(const struct cat_gen *g, int how)
{
	bool live = g->state == GEN_OPEN || g->state == GEN_COMMITTED || g->state == GEN_HELD;
	switch (how) {
	case PGGEN_ABORT:
		if (g->state == GEN_OPEN)
			return 0;
		if (g->state == GEN_ABORTED)
			return -EALREADY;
		return g->state == GEN_DELETED ? -ENOENT : -EINVAL;
	case PGGEN_EXPIRE:
		if (!live)
			return -ENOENT;
		return (g->state != GEN_COMMITTED && g->state != GEN_HELD) || g->pinned ? -EBUSY : 0;
	default:
		return live ? 0 : -ENOENT;
	}
}

/* Unlinks g's root from its series (locked by the caller); every inode of
 * its tree gets nlink 0 and leaves the generation; ids gets them. */
static int pggen_tree_remove(struct pgns *ns, const struct cat_gen *g, struct cat_id_vec *ids)
{
	uint64_t entry = 0, named = 0, mode = 0;
	int rc = pggen_entry(ns, g->series, g->name, &entry, &named);
	if (rc == -ENOENT || (rc == 0 && named != g->root)) {
		log_error("catalog %s: corrupt: generation %" PRIu64 " has root %" PRIu64 ", but"
			  " entry %" PRIu64 "/\"%s\" does not name it", pg_name(ns->pg), g->id,
			  g->root, g->series, g->name);
		return -EIO;
	}
	char r[24], t[24], e[24], d[24];
	int64_t now = pgns_now_ns();
	const char *row[] = { PG_U64(r, g->root) };
	if (rc == 0)
		rc = pggen_one_int(ns, G_INODE_ROW, row, &mode);
	const char *unlink[] = { r, PG_I64(t, now) };
	PGresult *res = NULL;
	if (rc == 0)
		rc = pggen_exec(ns, G_TREE_UNLINK, unlink, &res);
	char *list = NULL;
	size_t len = 0;
	FILE *f = rc == 0 ? open_memstream(&list, &len) : NULL;
	if (rc == 0 && !f)
		rc = -ENOMEM;
	for (int i = 0; rc == 0 && i < pg_rows(res); i++) {
		uint64_t ino = (uint64_t)pg_int(res, i, 0);
		fprintf(f, "%s%" PRIu64, i ? "," : "{", ino);
		if (ids && cat_id_vec_push(ids, ino) != 0)
			rc = -ENOMEM;
	}
	if (f) {
		fputs(pg_rows(res) ? "}" : "{}", f);
		if (fclose(f) != 0 && rc == 0)
			rc = -ENOMEM;
	}
	PQclear(res);
	const char *dirents[] = { list, PG_U64(e, entry) };
	if (rc == 0)
		rc = pggen_exec(ns, G_TREE_DIRENTS_DELETE, dirents, NULL);
	free(list);
	const char *touch[] = { PG_U64(d, g->series), t, S_ISDIR((mode_t)mode) ? "-1" : "0" };
	return rc ? rc : pggen_exec(ns, G_DIR_TOUCH, touch, NULL);
}

static int pggen_end_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_end_call *c = arg;
	struct pgns *ns = c->ns;
	struct cat_gen g;
	if (c->ids)
		c->ids->n = 0; /* the body may run again (pg.h P2) */
	int rc = lease_fence(ns->lease);
	char gid[24], s[24];
	const char *params[] = { PG_U64(gid, c->id) };
	PGresult *res;
	if (rc == 0)
		rc = pggen_exec(ns, G_GET, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	if (rc == 0)
		pggen_row(res, 0, &g, NULL);
	PQclear(res);
	/* the series first, as every change of its entries does (pgns.h), then
	 * the generation's row, read again under its lock */
	const char *dir[] = { PG_U64(s, g.series) };
	uint64_t ignored;
	if (rc == 0)
		rc = pggen_one_int(ns, G_DIR_LOCK, dir, &ignored);
	bool lost = false;
	if (rc == 0)
		rc = pggen_row_locked(ns, c->id, &g, &lost);
	if (rc == 0)
		rc = pggen_end_want(&g, c->how);
	if (rc == 0 && c->how == PGGEN_EXPIRE)
		rc = pggen_keep_still_newer(ns, &g, lost, c->keep);
	if (rc == 0 && c->how == PGGEN_ABORT && g.backup_root) /* a new version: back to the last */
		return pggen_restore(ns, &g, c->rule, NULL, NULL, c->ids); /* explicit: dropped */
	if (rc == 0)
		rc = pggen_tree_remove(ns, &g, c->ids);
	if (rc == 0)
		rc = pggen_end_row(ns, g.id, c->how == PGGEN_ABORT ? GEN_ABORTED : GEN_DELETED,
				   c->rule);
	return rc;
}

/* ---- versions: rewriting a committed generation ---- */

/* cat_name_taken_fn for the shared catalog */
struct pggen_taken {
	struct pgns *ns;
	uint64_t dir;
};

static int pggen_name_taken(void *arg, const char *name)
{
	struct pggen_taken *t = arg;
	uint64_t entry = 0, ino = 0;
	int rc = pggen_entry(t->ns, t->dir, name, &entry, &ino);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

/* G10: g's tree, the rolled-back new version, becomes a HELD generation of
 * its own (kept->id, kept->name) beside it, for `why`, if it names a chunk
 * its backup does not; else (removals, truncates, renames) it is removed
 * (ids gets its inodes) and kept->id is 0. The caller then links the
 * backup under g's name. */
static int pggen_rewrite_keep(struct pgns *ns, const struct cat_gen *g, const char *rule,
			      const char *why, struct pggen_kept *kept, struct cat_id_vec *ids)
{
	char s[24], r[24], t[24], id[24], bk[24], held[GEN_HELD_MAX];
	const char *trees[] = { PG_U64(r, g->root), PG_U64(bk, g->backup_root) };
	uint64_t new_bytes = 0;
	kept->id = 0;
	kept->name[0] = '\0';
	int rc = pggen_one_int(ns, G_REWRITE_NEW_BYTES, trees, &new_bytes);
	if (rc == 0 && new_bytes == 0)
		return pggen_tree_remove(ns, g, ids);
	if (rc)
		return rc;
	rc = pggen_insert_row(ns, g->series, g->root, g->name, g->step, &kept->id);
	if (rc)
		return rc;
	struct pggen_taken taken = { .ns = ns, .dir = g->series };
	rc = cat_gen_kept_name(g->name, kept->id, pggen_name_taken, &taken, kept->name);
	if (rc == -EEXIST)
		log_error("catalog %s: generation %" PRIu64 " %" PRIu64 "/\"%s\": version %" PRIu32
			  " not rolled back: every name it could be kept under (\"%s\" and %d"
			  " more) is taken (generation.h G10); it stays open", pg_name(ns->pg), g->id,
			  g->series, g->name, g->version, kept->name, GEN_KEPT_NAME_TRIES - 1);
	if (rc)
		return rc;
	cat_gen_rewrite_reason(g->name, g->version, why, held);
	const char *set[] = { PG_U64(id, kept->id), r, PG_U64(s, g->series), g->name, kept->name,
			      held, rule };
	uint64_t renamed = 0;
	rc = pggen_one_int(ns, G_REWRITE_KEEP, set, &renamed);
	if (rc == 0 && renamed != 1) {
		log_error("catalog %s: corrupt: generation %" PRIu64 " has root %" PRIu64 ", but"
			  " entry %" PRIu64 "/\"%s\" does not name it", pg_name(ns->pg), g->id,
			  g->root, g->series, g->name);
		rc = -EIO;
	}
	const char *touch[] = { s, PG_I64(t, pgns_now_ns()), "0" };
	return rc ? rc : pggen_exec(ns, G_DIR_TOUCH, touch, NULL);
}

/* g, an OPEN new version whose series and row the caller locked, gives way
 * to its backup: its tree is kept HELD beside it (G10: kept, for keep_why)
 * or, kept NULL (an explicit abort), unlinked (ids gets its inodes); the
 * backup is linked under its name, and it is its previous version again,
 * COMMITTED or HELD as it was (G5), with rule "<rule>-restored". */
static int pggen_restore(struct pgns *ns, struct cat_gen *g, const char *rule,
			 const char *keep_why, struct pggen_kept *kept, struct cat_id_vec *ids)
{
	uint64_t mode = 0;
	char b[24], s[24], t[24], id[24], st[24], why[GEN_RULE_MAX];
	const char *row[] = { PG_U64(b, g->backup_root) };
	int rc = kept ? pggen_rewrite_keep(ns, g, rule, keep_why, kept, ids)
		      : pggen_tree_remove(ns, g, ids);
	if (rc == 0)
		rc = pggen_one_int(ns, G_INODE_ROW, row, &mode);
	const char *link[] = { PG_U64(s, g->series), g->name, b };
	if (rc == 0)
		rc = pggen_exec(ns, G_DIRENT_LINK, link, NULL);
	const char *touch[] = { s, PG_I64(t, pgns_now_ns()), S_ISDIR((mode_t)mode) ? "1" : "0" };
	if (rc == 0)
		rc = pggen_exec(ns, G_DIR_TOUCH, touch, NULL);
	snprintf(why, sizeof(why), "%s" GEN_RESTORED_SUFFIX, rule);
	const char *set[] = { PG_U64(id, g->id), b,
			      PG_U64(st, (uint64_t)(g->held[0] ? GEN_HELD : GEN_COMMITTED)), why };
	return rc ? rc : pggen_exec(ns, G_RESTORE, set, NULL);
}

static int pggen_reopen_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	struct cat_gen g;
	int rc = lease_fence(ns->lease);
	if (rc == 0) /* a lost one too (X6): a resumed trainer saving its step again */
		rc = pggen_row_locked(ns, c->id, &g, NULL);
	if (rc)
		return rc;
	if (g.state == GEN_OPEN)
		return -EALREADY;
	if (g.state != GEN_COMMITTED && g.state != GEN_HELD)
		return -ENOENT;
	char r[24], id[24], copy[24], node[24];
	const char *params[] = { PG_U64(r, g.root) };
	uint64_t backup = 0;
	rc = pggen_one_int(ns, G_BACKUP_MAKE, params, &backup);
	if (rc == 0 && !backup)
		rc = -EIO; /* a live generation's root always exists (G1) */
	const char *set[] = { PG_U64(id, g.id), PG_U64(copy, backup),
			      PG_U64(node, ns->lease->node_id) };
	return rc ? rc : pggen_exec(ns, G_REOPEN, set, NULL);
}

int pggen_reopen(struct pgns *ns, uint64_t id)
{
	struct pggen_call c = { .ns = ns, .id = id };
	return pg_txn(ns->pg, pggen_reopen_body, &c);
}

int pggen_end(struct pgns *ns, uint64_t id, enum pggen_end how, const char *rule,
	      struct cat_id_vec *ids)
{
	if (!rule || strlen(rule) >= GEN_RULE_MAX)
		return -EINVAL;
	struct pggen_end_call c = { .ns = ns, .id = id, .how = how, .rule = rule, .ids = ids };
	return pg_txn(ns->pg, pggen_end_body, &c);
}

int pggen_expire(struct pgns *ns, uint64_t id, uint32_t keep, const char *rule,
		 struct cat_id_vec *ids)
{
	if (!rule || strlen(rule) >= GEN_RULE_MAX)
		return -EINVAL;
	struct pggen_end_call c = { .ns = ns, .id = id, .how = PGGEN_EXPIRE, .keep = keep,
				    .rule = rule, .ids = ids };
	return pg_txn(ns->pg, pggen_end_body, &c);
}

/* ---- pins ---- */

static int pggen_pin_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	char g[24];
	const char *params[] = { PG_U64(g, c->id), c->open ? "true" : "false" };
	PGresult *res;
	if (rc == 0)
		rc = pggen_exec(c->ns, G_PIN, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	PQclear(res);
	return rc;
}

int pggen_pin(struct pgns *ns, uint64_t id, bool pinned)
{
	struct pggen_call c = { .ns = ns, .id = id, .open = pinned };
	return pg_txn(ns->pg, pggen_pin_body, &c);
}

/* ---- checks ---- */

static int pggen_check_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	PQclear(c->res);
	PQclear(c->res2);
	c->res = c->res2 = NULL;
	int rc = pggen_exec(c->ns, G_CHECK_ROWS, NULL, &c->res);
	return rc ? rc : pggen_exec(c->ns, G_CHECK_TREES, NULL, &c->res2);
}

static bool pggen_true(PGresult *res, int r, int col)
{
	return PQgetvalue(res, r, col)[0] == 't';
}

int pggen_check(struct pgns *ns, int *violations)
{
	struct pggen_call c = { .ns = ns };
	int rc = pg_txn(ns->pg, pggen_check_body, &c);
	const char *db = pg_name(ns->pg);
	for (int r = 0; rc == 0 && r < pg_rows(c.res); r++, (*violations)++)
		log_error("catalog %s: check: generation %s %s/\"%s\" (root %s, state %s):%s%s%s%s%s%s",
			  db, PQgetvalue(c.res, r, 0), PQgetvalue(c.res, r, 1),
			  PQgetvalue(c.res, r, 2), PQgetvalue(c.res, r, 3), PQgetvalue(c.res, r, 4),
			  pggen_true(c.res, r, 5) ? " its root is not linked under its name" : "",
			  pggen_true(c.res, r, 6) ? " ended but still owns a tree" : "",
			  pggen_true(c.res, r, 7) ? " its series lies in a generation" : "",
			  pggen_true(c.res, r, 8) ? " a held reason where it must not be, or none"
						  : "",
			  pggen_true(c.res, r, 9) ? " a backup outside a rewritten open version" : "",
			  pggen_true(c.res, r, 10) ? " its backup is linked" : "");
	for (int r = 0; rc == 0 && r < pg_rows(c.res2); r++, (*violations)++) {
		PGresult *t = c.res2;
		if (pggen_true(t, r, 3))
			log_error("catalog %s: check: generation %s reaches inode %s, which is"
				  " missing", db, PQgetvalue(t, r, 1), PQgetvalue(t, r, 0));
		else if (PQgetisnull(t, r, 1))
			log_error("catalog %s: check: inode %s says generation %s, whose tree does"
				  " not reach it", db, PQgetvalue(t, r, 0), PQgetvalue(t, r, 2));
		else
			log_error("catalog %s: check: inode %s is in the tree of generation %s but"
				  " says generation %s", db, PQgetvalue(t, r, 0), PQgetvalue(t, r, 1),
				  PQgetisnull(t, r, 2) ? "none" : PQgetvalue(t, r, 2));
	}
	PQclear(c.res);
	PQclear(c.res2);
	return rc;
}

/* ---- durability (meta/manifest_shared.c) ---- */

int pggen_durable_state(struct pgns *ns, uint64_t id, uint32_t version, bool *ready, bool *stale)
{
	struct pggen_call c = { .ns = ns, .id = id, .state = G_DURABLE_STATE };
	int rc = pg_read(ns->pg, pggen_read_body, &c); /* pg.h P5 */
	*ready = false;
	*stale = true;
	if (rc == 0 && pg_rows(c.res) == 1) {
		*stale = pg_int(c.res, 0, 0) != GEN_COMMITTED ||
			 (uint32_t)pg_int(c.res, 0, 1) != version || pggen_true(c.res, 0, 2);
		*ready = !*stale && !pggen_true(c.res, 0, 3);
	}
	PQclear(c.res);
	return rc;
}

int pggen_upload_bytes(struct pgns *ns, uint64_t id, uint64_t *total, uint64_t *left)
{
	struct pggen_call c = { .ns = ns, .id = id, .state = G_UPLOAD_BYTES };
	int rc = pg_read(ns->pg, pggen_read_body, &c); /* pg.h P5 */
	*total = *left = 0;
	if (rc == 0 && pg_rows(c.res) == 1) {
		*total = (uint64_t)pg_int(c.res, 0, 0);
		*left = (uint64_t)pg_int(c.res, 0, 1);
	}
	PQclear(c.res);
	return rc;
}

static int pggen_durable_set_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	char i[24], v[24];
	const char *params[] = { PG_U64(i, c->id), PG_U64(v, c->count) };
	return pggen_exec(c->ns, G_DURABLE_SET, params, NULL);
}

int pggen_durable_set(struct pgns *ns, uint64_t id, uint32_t version)
{
	/* not fenced: the manifest is on BACKING whatever this node's lease says;
	 * one statement, its own transaction (pg.h P5): one round trip */
	struct pggen_call c = { .ns = ns, .id = id, .count = version };
	return pg_read(ns->pg, pggen_durable_set_body, &c);
}

int pggen_not_durable(struct pgns *ns, uint64_t id, uint64_t *count)
{
	struct pggen_call c = { .ns = ns, .id = id, .state = G_NOT_DURABLE };
	int rc = pg_read(ns->pg, pggen_read_body, &c); /* pg.h P5 */
	if (rc == 0)
		*count = (uint64_t)pg_int(c.res, 0, 0);
	PQclear(c.res);
	return rc;
}

static int pggen_undurable_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	PQclear(c->res);
	c->res = NULL;
	return pggen_exec(c->ns, G_UNDURABLE_LIST, NULL, &c->res);
}

int pggen_undurable(struct pgns *ns, uint64_t *ids, uint32_t *versions, size_t max, size_t *n)
{
	struct pggen_call c = { .ns = ns };
	int rc = pg_txn(ns->pg, pggen_undurable_body, &c);
	*n = 0;
	for (int r = 0; rc == 0 && r < pg_rows(c.res) && *n < max; r++, (*n)++) {
		ids[*n] = (uint64_t)pg_int(c.res, r, 0);
		versions[*n] = (uint32_t)pg_int(c.res, r, 1);
	}
	PQclear(c.res);
	return rc;
}

void pggen_tree_clear(struct pggen_tree *t)
{
	PQclear(t->gen);
	PQclear(t->path);
	PQclear(t->inodes);
	PQclear(t->entries);
	PQclear(t->chunks);
	PQclear(t->extents);
	memset(t, 0, sizeof(*t));
}

struct pggen_tree_call {
	struct pgns *ns;
	uint64_t id;
	struct pggen_tree *t;
};

static int pggen_tree_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_tree_call *c = arg;
	struct pggen_tree *t = c->t;
	pggen_tree_clear(t);
	char g[24], r[24], s[24];
	const char *one[] = { PG_U64(g, c->id) };
	int rc = pggen_exec(c->ns, G_MF_GEN, one, &t->gen);
	if (rc == 0 && pg_rows(t->gen) != 1)
		return -ENOENT;
	if (rc)
		return rc;
	const char *series[] = { PG_U64(s, (uint64_t)pg_int(t->gen, 0, 0)) };
	const char *tree[] = { PG_U64(r, (uint64_t)pg_int(t->gen, 0, 1)), g };
	rc = pggen_exec(c->ns, G_MF_PATH, series, &t->path);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_MF_INODES, tree, &t->inodes);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_MF_ENTRIES, tree, &t->entries);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_MF_CHUNKS, tree, &t->chunks);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_MF_EXTENTS, tree, &t->extents);
	return rc;
}

int pggen_tree_read(struct pgns *ns, uint64_t id, struct pggen_tree *out)
{
	memset(out, 0, sizeof(*out));
	struct pggen_tree_call c = { ns, id, out };
	int rc = pg_txn(ns->pg, pggen_tree_body, &c);
	if (rc)
		pggen_tree_clear(out);
	return rc;
}

struct pggen_path_call {
	struct pgns *ns;
	uint64_t ino;
	PGresult *res;
};

static int pggen_path_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_path_call *c = arg;
	char i[24];
	const char *one[] = { PG_U64(i, c->ino) };
	PQclear(c->res);
	c->res = NULL;
	return pggen_exec(c->ns, G_MF_PATH, one, &c->res);
}

int pggen_path(struct pgns *ns, uint64_t ino, char *buf, size_t size)
{
	struct pggen_path_call c = { .ns = ns, .ino = ino };
	int rc = pg_txn(ns->pg, pggen_path_body, &c);
	size_t len = 0;
	if (rc == 0 && size < 2)
		rc = -ENAMETOOLONG;
	if (rc == 0)
		buf[len++] = '/';
	/* the components from the root down; an unlinked one (no entry) ends at
	 * itself, which is not the root: -ENOENT */
	int rows = rc == 0 ? pg_rows(c.res) : 0;
	if (rc == 0 && ino != CAT_ROOT_INO && (rows == 0 || (uint64_t)pg_int(c.res, 0, 1) != CAT_ROOT_INO))
		rc = -ENOENT;
	for (int r = 0; rc == 0 && r < rows; r++) {
		const char *name = PQgetvalue(c.res, r, 0);
		size_t n = strlen(name);
		if (len + n + 2 > size) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (r > 0)
			buf[len++] = '/';
		memcpy(buf + len, name, n);
		len += n;
	}
	if (rc == 0)
		buf[len] = '\0';
	PQclear(c.res);
	return rc;
}

/* ---- rebuild --meta: manifests into an empty shared catalog ---- */

static int pggen_rb_counts_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	PQclear(c->res);
	c->res = NULL;
	return pggen_exec(c->ns, G_RB_COUNTS, NULL, &c->res);
}

int pggen_rebuild_counts(struct pgns *ns, uint64_t *inodes, uint64_t *gens, uint64_t *chunks)
{
	struct pggen_call c = { .ns = ns };
	int rc = pg_txn(ns->pg, pggen_rb_counts_body, &c);
	if (rc == 0) {
		*inodes = (uint64_t)pg_int(c.res, 0, 0);
		*gens = (uint64_t)pg_int(c.res, 0, 1);
		*chunks = (uint64_t)pg_int(c.res, 0, 2);
	}
	PQclear(c.res);
	return rc;
}

static int pggen_rb_id_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	const char *params[] = { c->rule };
	return pggen_exec(c->ns, G_RB_CATALOG_ID, params, NULL);
}

int pggen_rebuild_catalog_id(struct pgns *ns, const char *id)
{
	struct pggen_call c = { .ns = ns, .rule = id };
	return pg_txn(ns->pg, pggen_rb_id_body, &c);
}

static int pggen_rb_reserve_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc)
		return rc;
	char v[24];
	const char *params[] = { PG_U64(v, c->id) };
	return pggen_exec(c->ns, G_RB_GEN_RESERVE, params, NULL);
}

int pggen_rebuild_reserve_ids(struct pgns *ns, uint64_t id)
{
	assert(id <= INT64_MAX);
	struct pggen_call c = { .ns = ns, .id = id };
	return pg_txn(ns->pg, pggen_rb_reserve_body, &c);
}

struct pggen_rb {
	struct pgns *ns;
	const struct manifest *m;
	char *err;
	size_t errsz;
	uint64_t *map;     /* local id → shared inode */
	uint32_t *subdirs; /* local id → its subdirectories (a directory's nlink) */
	const char *held;  /* pggen_apply_manifest_held: the reason (M4), else NULL */
	char held_name[CAT_NAME_MAX + 1]; /* M4: the root's name */
	char *where;       /* M4: the path it is linked at, if not NULL */
	size_t wheresz;
};

static int pggen_rb_fail(struct pggen_rb *b, int rc, const char *fmt, const char *name)
{
	if (b->errsz)
		snprintf(b->err, b->errsz, fmt, name);
	return rc;
}

/* parent/name: 0 and *ino, *mode, *gen (0: outside generations) if
 * present, -ENOENT if not. */
static int pggen_rb_lookup(struct pggen_rb *b, uint64_t parent, const char *name, uint64_t *ino,
			   uint32_t *mode, uint64_t *gen)
{
	char p[24];
	const char *params[] = { PG_U64(p, parent), name };
	PGresult *res;
	int rc = pggen_exec(b->ns, G_RB_LOOKUP, params, &res);
	if (rc == 0 && pg_rows(res) == 0)
		rc = -ENOENT;
	if (rc == 0) {
		*ino = (uint64_t)pg_int(res, 0, 0);
		*mode = (uint32_t)pg_int(res, 0, 1);
		*gen = (uint64_t)pg_int(res, 0, 2);
	}
	PQclear(res);
	return rc;
}

static int pggen_rb_inode(struct pggen_rb *b, const struct manifest_inode *in, uint32_t nlink,
			  uint64_t gen, uint64_t *ino)
{
	char v[10][24];
	const char *params[] = { PG_U64(v[0], in->mode), PG_U64(v[1], in->uid), PG_U64(v[2], in->gid),
				 PG_U64(v[3], nlink), PG_U64(v[4], in->size), PG_U64(v[5], in->rdev),
				 PG_I64(v[6], in->atime_ns), PG_I64(v[7], in->mtime_ns),
				 PG_I64(v[8], in->ctime_ns), in->target,
				 gen ? PG_U64(v[9], gen) : NULL };
	PGresult *res;
	int rc = pggen_exec(b->ns, G_RB_INODE, params, &res);
	if (rc == 0)
		*ino = (uint64_t)pg_int(res, 0, 0);
	PQclear(res);
	return rc;
}

static int pggen_rb_dirent(struct pggen_rb *b, uint64_t parent, const char *name, uint64_t ino,
			   bool is_dir)
{
	char p[24], i[24];
	const char *params[] = { PG_U64(p, parent), name, PG_U64(i, ino) };
	int rc = pggen_exec(b->ns, G_RB_DIRENT, params, NULL);
	if (rc == 0 && is_dir) {
		const char *one[] = { p };
		rc = pggen_exec(b->ns, G_RB_NLINK, one, NULL);
	}
	return rc;
}

/* mkdir -p of a generation's series path, from the root; *dir gets it. A
 * component that exists as something other than a directory outside
 * generations is a conflict (manifest.c's mf_series), or, held (M4), gives
 * way to its renamed twin "<component>.rebuild-<id>". */
static int pggen_rb_series(struct pggen_rb *b, uint64_t *dir)
{
	const struct manifest_inode *root = &b->m->inodes[0];
	struct manifest_inode mk = { .mode = S_IFDIR | 0755, .uid = root->uid, .gid = root->gid };
	mk.atime_ns = mk.mtime_ns = mk.ctime_ns = pgns_now_ns();
	char name[CAT_NAME_MAX + 1];
	*dir = CAT_ROOT_INO;
	int rc = 0;
	for (const char *s = b->m->gen.series; rc == 0 && *s;) {
		size_t n = strcspn(s, "/");
		snprintf(name, sizeof(name), "%.*s", (int)n, s);
		s += n + (s[n] == '/');
		uint64_t ino, gen;
		uint32_t mode;
		rc = pggen_rb_lookup(b, *dir, name, &ino, &mode, &gen);
		if (rc == 0 && (!S_ISDIR(mode) || gen != 0) && b->held) {
			char twin[CAT_NAME_MAX + 1];
			manifest_held_name(name, b->m->gen.id, twin);
			memcpy(name, twin, sizeof(twin));
			rc = pggen_rb_lookup(b, *dir, name, &ino, &mode, &gen);
		}
		manifest_path_add(b->where, b->wheresz, name);
		if (rc == 0 && (!S_ISDIR(mode) || gen != 0)) {
			if (b->errsz)
				snprintf(b->err, b->errsz, "line 2: series \"%s\": \"%s\" exists as inode %"
					 PRIu64 " (mode %o%s), not a directory outside generations",
					 b->m->gen.series, name, ino, mode, gen ? ", in a generation" : "");
			return -EEXIST;
		}
		if (rc == -ENOENT) {
			rc = pggen_rb_inode(b, &mk, 2, 0, &ino);
			if (rc == 0)
				rc = pggen_rb_dirent(b, *dir, name, ino, true);
		}
		*dir = ino;
	}
	return rc;
}

/* Its row, as series/name: COMMITTED, or HELD (M4: rule "rebuild", the reason) */
static int pggen_rb_gen_row(struct pggen_rb *b, uint64_t series, const char *name)
{
	const struct manifest_gen_row *g = &b->m->gen;
	char v[9][24];
	const char *params[] = { PG_U64(v[0], g->id), PG_U64(v[1], series), PG_U64(v[2], b->map[0]),
				 name, PG_U64(v[3], g->step), PG_U64(v[4], g->version),
				 g->pinned ? "true" : "false", PG_I64(v[5], g->created_ns),
				 PG_I64(v[6], g->committed_ns),
				 b->held ? MANIFEST_HELD_RULE : g->rule, b->held };
	return pggen_exec(b->ns, b->held ? G_RB_GEN_HELD : G_RB_GEN, params, NULL);
}

/* The tree's inodes (the root of a tree manifest is the catalog's: merged),
 * entries, chunks and extents. */
static int pggen_rb_tree(struct pggen_rb *b, uint64_t gen)
{
	const struct manifest *m = b->m;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < m->n_inodes; i++) {
		const struct manifest_inode *in = &m->inodes[i];
		uint32_t nlink = S_ISDIR(in->mode) ? 2 + b->subdirs[i] : in->links;
		if (i == 0 && m->kind == MANIFEST_TREE) {
			char v[8][24]; /* the root, fresh in an empty catalog, takes nlink too */
			const char *params[] = { PG_U64(v[0], CAT_ROOT_INO), PG_U64(v[1], in->mode),
						 PG_U64(v[2], in->uid), PG_U64(v[3], in->gid),
						 PG_I64(v[4], in->atime_ns), PG_I64(v[5], in->mtime_ns),
						 PG_I64(v[6], in->ctime_ns), PG_U64(v[7], nlink) };
			b->map[0] = CAT_ROOT_INO;
			rc = pggen_exec(b->ns, G_RB_ATTR, params, NULL);
		} else {
			rc = pggen_rb_inode(b, in, nlink, gen, &b->map[i]);
		}
	}
	for (size_t i = 0; rc == 0 && i < m->n_entries; i++) {
		const struct manifest_entry *e = &m->entries[i];
		rc = pggen_rb_dirent(b, b->map[e->parent], e->name, b->map[e->child], false);
		if (rc == -EEXIST)
			return pggen_rb_fail(b, rc, "entry \"%s\" exists already", e->name);
	}
	char hex[2 * CAT_HASH_LEN + 1], v[5][24];
	for (size_t i = 0; rc == 0 && i < m->n_chunks; i++) {
		const struct manifest_chunk *c = &m->chunks[i];
		hash_to_hex(c->hash, hex);
		const char *params[] = { hex, PG_U64(v[0], c->plain_len), PG_U64(v[1], c->codec),
					 PG_U64(v[2], c->stored_len), PG_U64(v[3], c->refs) };
		rc = pggen_exec(b->ns, G_RB_CHUNK, params, NULL);
	}
	for (size_t i = 0; rc == 0 && i < m->n_extents; i++) {
		const struct manifest_extent *x = &m->extents[i];
		hash_to_hex(m->chunks[x->chunk].hash, hex);
		const char *params[] = { PG_U64(v[0], b->map[x->inode]), PG_U64(v[1], x->off),
					 PG_U64(v[2], x->len), hex, PG_U64(v[4], x->chunk_off) };
		rc = pggen_exec(b->ns, G_RB_EXTENT, params, NULL);
	}
	return rc;
}

static int pggen_rb_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_rb *b = arg;
	const struct manifest *m = b->m;
	if (b->errsz) /* the body may run again (pg.h P2) */
		b->err[0] = 0;
	if (b->where && b->wheresz)
		b->where[0] = 0;
	int rc = lease_fence(b->ns->lease);
	if (rc)
		return rc;
	if (m->kind == MANIFEST_TREE)
		return pggen_rb_tree(b, 0);
	uint64_t series, ino, gen;
	uint32_t mode;
	const char *name = b->held ? b->held_name : m->gen.name;
	rc = pggen_rb_series(b, &series);
	manifest_path_add(b->where, b->wheresz, name);
	if (rc == 0 && pggen_rb_lookup(b, series, name, &ino, &mode, &gen) == 0) {
		if (b->errsz) /* manifest.c's words for it: rebuild.c quotes them in a held reason */
			snprintf(b->err, b->errsz, "line 2: \"%s%s%s\" exists in the catalog as inode %"
				 PRIu64, m->gen.series, m->gen.series[0] ? "/" : "", name, ino);
		return -EEXIST;
	}
	if (rc == 0)
		rc = pggen_rb_tree(b, m->gen.id);
	if (rc == 0)
		rc = pggen_rb_dirent(b, series, name, b->map[0], S_ISDIR(m->inodes[0].mode));
	if (rc == 0)
		rc = pggen_rb_gen_row(b, series, name);
	if (rc == -EEXIST && b->errsz && !b->err[0])
		snprintf(b->err, b->errsz, "generation %" PRIu64 " exists already", m->gen.id);
	if (rc == 0)
		rc = pggen_exec(b->ns, G_RB_GEN_SEQ, NULL, NULL);
	return rc;
}

static int pggen_rb_apply(struct pggen_rb *b)
{
	const struct manifest *m = b->m;
	if (b->errsz)
		b->err[0] = 0;
	b->map = calloc(m->n_inodes ? m->n_inodes : 1, sizeof(*b->map));
	b->subdirs = calloc(m->n_inodes ? m->n_inodes : 1, sizeof(*b->subdirs));
	int rc = b->map && b->subdirs ? 0 : -ENOMEM;
	for (size_t i = 0; rc == 0 && i < m->n_entries; i++)
		if (S_ISDIR(m->inodes[m->entries[i].child].mode))
			b->subdirs[m->entries[i].parent]++;
	if (rc == 0)
		rc = pg_txn(b->ns->pg, pggen_rb_body, b);
	if (rc != 0 && b->errsz && !b->err[0])
		snprintf(b->err, b->errsz, "%s", strerror(-rc));
	if (rc != 0 && b->where && b->wheresz)
		b->where[0] = 0; /* linked nowhere */
	free(b->map);
	free(b->subdirs);
	return rc;
}

int pggen_apply_manifest(struct pgns *ns, const struct manifest *m, char *err, size_t errsz)
{
	struct pggen_rb b = { .ns = ns, .m = m, .err = err, .errsz = errsz };
	return pggen_rb_apply(&b);
}

int pggen_apply_manifest_held(struct pgns *ns, const struct manifest *m, const char *reason,
			      char *where, size_t wheresz, char *err, size_t errsz)
{
	struct pggen_rb b = { .ns = ns, .m = m, .err = err, .errsz = errsz, .held = reason,
			      .where = where, .wheresz = wheresz };
	if (where && wheresz)
		where[0] = 0;
	if (m->kind != MANIFEST_GEN || reason == NULL || reason[0] == '\0' ||
	    strlen(reason) >= GEN_HELD_MAX) {
		if (errsz)
			snprintf(err, errsz, "only a generation manifest is applied held, with a reason"
				 " of 1 to %d bytes", GEN_HELD_MAX - 1);
		return -EINVAL;
	}
	manifest_held_name(m->gen.name, m->gen.id, b.held_name);
	return pggen_rb_apply(&b);
}

/* ---- the tree outside generations (meta/manifest_shared.c) ---- */

static int pggen_out_fp_row(struct pggen_outside_fp *fp, PGresult *r)
{
	if (pg_rows(r) != 1)
		return -EIO;
	snprintf(fp->text, sizeof(fp->text), "%s:%s:%s:%s", PQgetvalue(r, 0, 0),
		 PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3));
	fp->all_uploaded = !pggen_true(r, 0, 4);
	fp->now_ns = pg_int(r, 0, 5);
	return 0;
}

struct pggen_out_call {
	struct pgns *ns;
	struct pggen_outside_fp *fp;
	struct pggen_tree *t; /* NULL: the fingerprint only */
};

static int pggen_out_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_out_call *c = arg;
	struct pggen_tree *t = c->t;
	PGresult *res = NULL;
	int rc = t ? pggen_exec(c->ns, G_OUT_SNAPSHOT, NULL, NULL) : 0;
	if (t)
		pggen_tree_clear(t);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_OUT_FP, NULL, &res);
	if (rc == 0)
		rc = pggen_out_fp_row(c->fp, res);
	PQclear(res);
	if (rc || !t || !c->fp->all_uploaded)
		return rc;
	rc = pggen_exec(c->ns, G_OUT_INODES, NULL, &t->inodes);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_OUT_ENTRIES, NULL, &t->entries);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_OUT_CHUNKS, NULL, &t->chunks);
	if (rc == 0)
		rc = pggen_exec(c->ns, G_OUT_EXTENTS, NULL, &t->extents);
	return rc;
}

int pggen_outside_fp(struct pgns *ns, struct pggen_outside_fp *fp)
{
	struct pggen_out_call c = { ns, fp, NULL };
	return pg_read(ns->pg, pggen_out_body, &c); /* one statement (pg.h P5) */
}

int pggen_outside_read(struct pgns *ns, struct pggen_outside_fp *fp, struct pggen_tree *out)
{
	memset(out, 0, sizeof(*out));
	struct pggen_out_call c = { ns, fp, out };
	int rc = pg_txn(ns->pg, pggen_out_body, &c);
	if (rc)
		pggen_tree_clear(out);
	return rc;
}
