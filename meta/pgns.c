/* pgns — the shared namespace in PostgreSQL; see pgns.h (N1-N5). */
#define _GNU_SOURCE
#include "pgns.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog_internal.h"
#include "catalog_shared_admin.h"
#include "hash.h"
#include "log.h"
#include "pggen.h"

enum {
	NS_GETATTR,
	NS_LOOKUP,
	NS_GETATTR_GEN,
	NS_PARENT_LOCK,
	NS_INODE_INSERT,
	NS_DIRENT_INSERT,
	NS_PARENT_TOUCH,
	NS_DIRENT_GET,
	NS_DIRENT_DELETE,
	NS_NLINK_DROP,
	NS_READDIR,
	NS_PARENT_OF,
	NS_PUBLISH,
	NS_REFS_DROP,
	NS_EXTENTS_DELETE,
	NS_FILE_SET,
	NS_EXTENTS,
	NS_UPLOADED,
	NS_INODE_DELETE,
	NS_RECLAIM_BEGIN,
	NS_RECLAIM_END,
	NS_RECLAIM_STAMP,
	NS_RECLAIM_GENS_DONE,
	NS_TREE_HORIZON,
	NS_CHUNK_GET,
	NS_CHUNK_GET_HOLDER,
	NS_CHECK_REFS,
	NS_CHECK_LIVE,
	NS_CHECK_STAMPS,
	NS_DIR_USED,
	NS_DIRENT_MOVE,
	NS_DIRENT_SET_INO,
	NS_NLINK_ADD,
	NS_WITHIN,
	NS_INODE_LOCK,
	NS_INODE_SET,
	NS_READLINK,
	NS_EXTENT_CUT,
	NS_META_GET,
	NS_REL_INODES_DELETE,
	NS_DROP_DATA_SET,
	NS_REFS_DROP_ANY,
	NS_EXTENTS_DELETE_ANY,
	NS_STATS,
	NS_UNUPLOADED_OF,
	NS_UNUPLOADED_OF_CACHE,
	NS_UPLOADED_MANY,
	NS_CHUNKS_INFO,
	NS_FILE_UNUPLOADED,
	NS_PIN,
	NS_UNPIN,
	NS_UNPIN_LOST,
	NS_CLAIM_MANY,
	NS_UNPIN_CLAIMS,
	NS_CREATE,
	NS_PIN_HELD,
	NS_SERIES_MOVED,
	NS_OPEN_ADD,
	NS_OPEN_DROP,
	NS_REL_LOCK,
	NS_REL_ROWS_DELETE,
	NS_ORPHANS,
	NS_ORPHANS_DONE,
	NS_STORE_FACTS,
	NS_STORE_ID_OFFER,
	NS_STORE_MARKED,
	NS_COUNT
};

/* catalog_shared_reclaim.c R7 b, c: no ended generation keeps a manifest on
 * BACKING, and no live one has, as the newest of its manifests that may be
 * there, one of a version whose tree is gone: versions below its own, or
 * below its backup's for a rewrite still open. A lost one counts too: a
 * rewrite lost before its manifest was put has its previous version's
 * manifest as the save's only recoverable form (review 34 A1). */
#define NS_GEN_MANIFESTS_CURRENT                                                            \
	"NOT EXISTS (SELECT 1 FROM ns_generations g WHERE g.state IN (2, 3)"               \
	" AND NOT g.manifests_gone) AND NOT EXISTS (SELECT 1 FROM ns_generations g"        \
	" WHERE g.version > 1 AND g.state IN (0, 1, 4) AND g.version -"                  \
	" CASE WHEN g.backup_root <> 0 THEN 2 ELSE 1 END >= GREATEST(g.durable_version, 1))"

/* N14: inode i (a column reference) is open on a live node other than
 * node me (a parameter): that node's ns_open row (a handle open) or its
 * ns_writing row (a handle open for writing, pggen.h X1). A node no longer
 * live holds nothing (lease.h L1). */
#define NS_HELD_ELSEWHERE(i, me)                                                        \
	"(EXISTS (SELECT 1 FROM ns_open o JOIN ckpt_nodes hn ON hn.id = o.node"            \
	" WHERE o.ino = " i " AND o.node <> CAST(" me " AS BIGINT) AND hn.state = 'live')" \
	" OR EXISTS (SELECT 1 FROM ns_writing hw JOIN ckpt_nodes hn ON hn.id = hw.node"    \
	" WHERE hw.ino = " i " AND hw.node <> CAST(" me " AS BIGINT) AND hn.state = 'live'))"

/* N14: a release's WITH query recording the unlinked inodes among those
 * where selects ($2: this node) that it leaves because another live node
 * has them open, and how it would have released them (del: deleted, else
 * emptied), for the reclaim duty to finish once nobody has them open. */
#define NS_REL_WAIT_WITH(where, del)                                                    \
	"w AS (INSERT INTO ns_release_wait(ino, del) SELECT ino, " del " FROM ns_inodes"    \
	" WHERE " where " AND nlink = 0 AND " NS_HELD_ELSEWHERE("ns_inodes.ino", "$2")       \
	" ON CONFLICT (ino) DO UPDATE SET del = ns_release_wait.del OR excluded.del)"

#define NS_ATTR_COLS "i.ino, i.mode, i.uid, i.gid, i.nlink, i.size, i.rdev, i.atime_ns, i.mtime_ns, i.ctime_ns"

const struct pg_stmt pgns_stmts[] = {
	[NS_GETATTR] = { "ns_getattr", "SELECT " NS_ATTR_COLS " FROM ns_inodes i WHERE i.ino = $1", 1 },
	/* N11: the entry's inode and, for a miss, the parent's mode and link
	 * count, in one answer (no row: no parent) */
	[NS_LOOKUP] = { "ns_lookup",
			"SELECT " NS_ATTR_COLS ", p.mode, p.nlink FROM ns_inodes p"
			" LEFT JOIN ns_dirents d ON d.parent = p.ino AND d.name = $2"
			" LEFT JOIN ns_inodes i ON i.ino = d.ino WHERE p.ino = $1",
			2 },
	[NS_GETATTR_GEN] = { "ns_getattr_gen",
			     "SELECT " NS_ATTR_COLS ", i.gen FROM ns_inodes i WHERE i.ino = $1", 1 },
	/* a change of a directory's entries locks the directory's row first, so
	 * creates and removals in one directory are serialized across nodes */
	[NS_PARENT_LOCK] = { "ns_parent_lock", "SELECT mode FROM ns_inodes WHERE ino = $1 FOR UPDATE", 1 },
	[NS_INODE_INSERT] = { "ns_inode_insert",
			      "INSERT INTO ns_inodes(ino, mode, uid, gid, nlink, size, rdev, atime_ns,"
			      " mtime_ns, ctime_ns, target, gen) VALUES (nextval('ns_ino_seq'), $1, $2, $3,"
			      " $4, $5, $6, $7, $7, $7, $8, (SELECT gen FROM ns_inodes WHERE ino = $9))"
			      " RETURNING ino",
			      9 },
	[NS_DIRENT_INSERT] = { "ns_dirent_insert",
			       "INSERT INTO ns_dirents(parent, name, ino) VALUES ($1, $2, $3)", 3 },
	[NS_PARENT_TOUCH] = { "ns_parent_touch",
			      "UPDATE ns_inodes SET mtime_ns = $2, ctime_ns = $2, nlink = nlink + $3"
			      " WHERE ino = $1",
			      3 },
	[NS_DIRENT_GET] = { "ns_dirent_get",
			    "SELECT d.id, d.ino, i.mode FROM ns_dirents d JOIN ns_inodes i ON i.ino = d.ino"
			    " WHERE d.parent = $1 AND d.name = $2",
			    2 },
	[NS_DIRENT_DELETE] = { "ns_dirent_delete", "DELETE FROM ns_dirents WHERE id = $1", 1 },
	[NS_NLINK_DROP] = { "ns_nlink_drop",
			    "UPDATE ns_inodes SET nlink = nlink - 1, ctime_ns = $2 WHERE ino = $1", 2 },
	[NS_READDIR] = { "ns_readdir",
			 "SELECT d.id, d.name, " NS_ATTR_COLS " FROM ns_dirents d JOIN ns_inodes i"
			 " ON i.ino = d.ino WHERE d.parent = $1 AND d.id > $2 ORDER BY d.id LIMIT 256",
			 2 },
	[NS_PARENT_OF] = { "ns_parent_of", "SELECT parent FROM ns_dirents WHERE ino = $1 LIMIT 1", 1 },
	/* A file's commit in one statement (N1-N4, N8), fenced by node $2 in it
	 * (lease.h L5): the chunk rows it describes ($6-$9) that do not exist
	 * are inserted (held by $2), each chunk row its extents ($10-$13) name
	 * or its old extents named gains the difference of the two counts, the
	 * extents are replaced and the inode's size and times set. Every write
	 * is conditioned on ok: the node live, ino a regular file (its row
	 * locked FOR UPDATE), and no chunk the extents name reclaiming (the
	 * rows that exist locked FOR UPDATE first, so what ok read of them
	 * stays true to the end). A row that appeared after the statement's
	 * snapshot is added to by the insert's ON CONFLICT only while live;
	 * one that is not makes the last column divide by zero, which undoes
	 * the whole statement (pg.h P6: -EBUSY). Run alone (pg_read) it
	 * carries its call's token ($14, $15: pg_token; NULL inside pg_txn,
	 * whose COMMIT carries one): run again after a lost answer with a
	 * token that committed (mine), it changes nothing (N8). Columns: the
	 * fence, whether ino is a regular file, whether no named chunk is
	 * reclaiming, the P6 check, mine. */
	[NS_PUBLISH] = { "ns_publish",
			 "WITH " LEASE_FENCE_WITH("$2") ", mine AS (SELECT EXISTS (SELECT 1 FROM"
			 " ckpt_txns WHERE client = CAST($14 AS BIGINT) AND seq = CAST($15 AS BIGINT)"
			 " AND done) AS v), f AS (SELECT ino FROM ns_inodes"
			 " WHERE ino = $1 AND mode & 61440 = 32768 FOR UPDATE),"
			 " ne AS (SELECT o, l, decode(h, 'hex') AS hash, co FROM unnest($10::bigint[],"
			 " $11::bigint[], $12::text[], $13::bigint[]) AS t(o, l, h, co)),"
			 " nn AS (SELECT hash, count(*) AS n FROM ne GROUP BY hash),"
			 " od AS (SELECT hash, count(*) AS n FROM ns_extents WHERE ino = $1 GROUP BY hash),"
			 " dl AS (SELECT COALESCE(nn.hash, od.hash) AS hash, COALESCE(nn.n, 0)"
			 " - COALESCE(od.n, 0) AS d FROM nn FULL JOIN od ON od.hash = nn.hash),"
			 " dc AS (SELECT DISTINCT ON (hash) decode(h, 'hex') AS hash, p, c, s FROM"
			 " unnest($6::text[], $7::bigint[], $8::int[], $9::bigint[]) AS t(h, p, c, s)),"
			 " lk AS (SELECT c.hash, c.state = 'live' AS live FROM ns_chunks c WHERE c.hash IN"
			 " (SELECT hash FROM dl UNION SELECT hash FROM dc) ORDER BY c.hash FOR UPDATE),"
			 " ok AS (SELECT " LEASE_LIVE " AS live, EXISTS (SELECT 1 FROM f) AS file,"
			 " NOT EXISTS (SELECT 1 FROM nn JOIN lk ON lk.hash = nn.hash WHERE NOT lk.live)"
			 " AS n3), go AS (SELECT live AND file AND n3 AND NOT (SELECT v FROM mine)"
			 " AS v FROM ok),"
			 " tk AS (INSERT INTO ckpt_txns(client, seq, done, at) SELECT CAST($14 AS BIGINT),"
			 " CAST($15 AS BIGINT), true, clock_timestamp() WHERE CAST($14 AS BIGINT) IS NOT"
			 " NULL AND (SELECT v FROM go) ON CONFLICT (client) DO UPDATE SET seq ="
			 " excluded.seq / CASE WHEN ckpt_txns.seq < excluded.seq THEN 1 ELSE 0 END,"
			 " done = true, at = excluded.at),"
			 " u AS (UPDATE ns_chunks c SET refcount = c.refcount + dl.d,"
			 " free_seen_ns = NULL FROM dl"
			 " WHERE c.hash = dl.hash AND dl.d <> 0 AND c.hash IN (SELECT hash FROM lk)"
			 " AND (SELECT v FROM go)),"
			 " i AS (INSERT INTO ns_chunks(hash, plain_len, codec, stored_len, refcount, holder)"
			 " SELECT dc.hash, dc.p, dc.c, dc.s, COALESCE(nn.n, 0), CAST($2 AS BIGINT) FROM dc"
			 " LEFT JOIN nn ON nn.hash = dc.hash WHERE dc.hash NOT IN (SELECT hash FROM lk)"
			 " AND (SELECT v FROM go) ON CONFLICT (hash) DO UPDATE SET refcount ="
			 " ns_chunks.refcount + excluded.refcount, free_seen_ns = NULL"
			 " WHERE ns_chunks.state = 'live'"
			 " RETURNING hash),"
			 " x AS (DELETE FROM ns_extents WHERE ino = $1 AND off NOT IN (SELECT o FROM ne)"
			 " AND (SELECT v FROM go)),"
			 " e AS (INSERT INTO ns_extents(ino, off, len, hash, chunk_off) SELECT $1, o, l,"
			 " hash, co FROM ne WHERE (SELECT v FROM go) ON CONFLICT (ino, off) DO UPDATE"
			 " SET len = excluded.len, hash = excluded.hash, chunk_off = excluded.chunk_off),"
			 " s AS (UPDATE ns_inodes SET size = $3, mtime_ns = $4, ctime_ns = $5"
			 " WHERE ino = $1 AND mode & 61440 = 32768 AND (SELECT v FROM go))"
			 " SELECT ok.live, ok.file, ok.n3, 1 / CASE WHEN NOT (SELECT v FROM go) OR"
			 " (SELECT count(*) FROM i JOIN nn ON nn.hash = i.hash) = (SELECT count(*)"
			 " FROM nn WHERE hash NOT IN (SELECT hash FROM lk)) THEN 1 ELSE 0 END,"
			 " (SELECT v FROM mine) FROM ok",
			 15 },
	/* N1: the one statement that drops references: those of ino's extents
	 * at or after $2 (0: all of them), which NS_EXTENTS_DELETE then deletes */
	[NS_REFS_DROP] = { "ns_refs_drop",
			   "UPDATE ns_chunks c SET refcount = c.refcount - g.n FROM (SELECT hash,"
			   " count(*) AS n FROM ns_extents WHERE ino = $1 AND off >= $2 GROUP BY hash) g"
			   " WHERE c.hash = g.hash",
			   2 },
	[NS_EXTENTS_DELETE] = { "ns_extents_delete",
				"DELETE FROM ns_extents WHERE ino = $1 AND off >= $2", 2 },
	[NS_FILE_SET] = { "ns_file_set",
			  "UPDATE ns_inodes SET size = $2, mtime_ns = $3, ctime_ns = $4"
			  " WHERE ino = $1 AND mode & 61440 = 32768",
			  4 },
	[NS_EXTENTS] = { "ns_extents",
			 "SELECT e.off, e.len, e.chunk_off, c.plain_len, encode(e.hash, 'hex')"
			 " FROM ns_extents e JOIN ns_chunks c ON c.hash = e.hash"
			 " WHERE e.ino = $1 AND e.off + e.len > $2 ORDER BY e.off LIMIT $3",
			 3 },
	/* a chunk being reclaimed is not marked: its object is going (N3);
	 * fenced by node $2 in the statement (lease.h L5), then how many */
	[NS_UPLOADED] = { "ns_uploaded",
			  "WITH " LEASE_FENCE_WITH("$2") ", u AS (UPDATE ns_chunks SET uploaded = true"
			  " WHERE hash = decode($1, 'hex') AND state = 'live' AND " LEASE_LIVE
			  " RETURNING 1) SELECT " LEASE_LIVE ", (SELECT count(*) FROM u)",
			  2 },
	/* N14: not while another live node has it open ($2: this node) */
	[NS_INODE_DELETE] = { "ns_inode_delete",
			      "WITH " NS_REL_WAIT_WITH("ino = $1", "true")
			      " DELETE FROM ns_inodes WHERE ino = $1 AND nlink = 0 AND NOT "
			      NS_HELD_ELSEWHERE("ns_inodes.ino", "$2") " RETURNING ino", 2 },
	/* the outer WHERE is re-checked on a row a concurrent commit changed
	 * (READ COMMITTED), so a chunk that just got a reference is skipped
	 * (and its stamp is gone, N12). A live chunk is taken only if it was
	 * seen free before the tree horizon $3, no ended generation keeps a
	 * manifest on BACKING and no live one's newest manifest there is of a
	 * version whose tree is gone (catalog_shared_reclaim.c R7); one left
	 * reclaiming by this node or a reclaimer no longer live is finished.
	 * Fenced by node $1 in the statement (lease.h L5): the rows after the
	 * fence's column, one row of NULLs if there are none. Another
	 * reclaimer's rows are taken over once it is not live and its lease ran
	 * out two of its terms ago: past its local deadline by a term (lease.h
	 * L8) */
	[NS_RECLAIM_BEGIN] = { "ns_reclaim_begin",
			       "WITH " LEASE_FENCE_WITH("$1") ", r AS (UPDATE ns_chunks SET"
			       " state = 'reclaiming', reclaimer = $1"
			       " WHERE refcount = 0 AND pins = 0 AND (state = 'reclaiming' OR free_seen_ns < $3)"
			       " AND hash IN (SELECT c.hash FROM ns_chunks c"
			       " WHERE c.refcount = 0 AND c.pins = 0 AND ((c.state = 'live'"
			       " AND c.free_seen_ns < $3 AND " NS_GEN_MANIFESTS_CURRENT ") OR"
			       " (c.state = 'reclaiming' AND (c.reclaimer = $1 OR NOT EXISTS"
			       " (SELECT 1 FROM ckpt_nodes n WHERE n.id = c.reclaimer AND (n.state = 'live' OR"
			       " n.lease_until + 2 * n.lease_ms * interval '1 millisecond' > clock_timestamp())))))"
			       " LIMIT $2) AND " LEASE_LIVE " RETURNING encode(hash, 'hex') AS h, uploaded)"
			       " SELECT " LEASE_LIVE ", r.h, r.uploaded FROM (SELECT 1) AS one"
			       " LEFT JOIN r ON true",
			       3 },
	/* N7: the claims of the hashes whose objects the reclaim removed go
	 * with their rows, in the same statement; fenced by node $2 in it (L5) */
	[NS_RECLAIM_END] = { "ns_reclaim_end",
			     "WITH " LEASE_FENCE_WITH("$2") ", r AS (DELETE FROM ns_chunks WHERE hash IN"
			     " (SELECT decode(h, 'hex') FROM unnest($1::text[]) AS t(h))"
			     " AND state = 'reclaiming' AND refcount = 0 AND " LEASE_LIVE "),"
			     " k AS (DELETE FROM ns_upload_claims WHERE hash IN (SELECT decode(h, 'hex')"
			     " FROM unnest($1::text[]) AS t(h)) AND " LEASE_LIVE ") SELECT " LEASE_LIVE,
			     2 },
	/* R7, R8: one server clock after the statement's snapshot stamps the
	 * ended generations and the free chunks not stamped yet (N12); then the
	 * tree horizon (manifest_shared.h D6) and up to $2 ended generations
	 * seen ended before it whose manifests may still be on BACKING (one
	 * never committed has none). Fenced by node $1 in the statement (L5):
	 * the fence, the horizon, then id, version, whether it may have
	 * manifests (NULLs if none) */
	[NS_RECLAIM_STAMP] = { "ns_reclaim_stamp",
			       "WITH " LEASE_FENCE_WITH("$1") ", t AS (SELECT CAST(EXTRACT(EPOCH FROM"
			       " clock_timestamp()) * 1000000000 AS BIGINT) AS now),"
			       " sg AS (UPDATE ns_generations SET gone_seen_ns = (SELECT now FROM t)"
			       " WHERE state IN (2, 3) AND NOT manifests_gone AND gone_seen_ns IS NULL AND "
			       LEASE_LIVE "),"
			       " sc AS (UPDATE ns_chunks SET free_seen_ns = (SELECT now FROM t)"
			       " WHERE refcount = 0 AND pins = 0 AND state = 'live' AND free_seen_ns IS NULL"
			       " AND " LEASE_LIVE "),"
			       " h AS (SELECT COALESCE(max(CAST(value AS BIGINT)), 0) AS ns FROM ns_meta"
			       " WHERE key = 'tree_horizon'),"
			       " g AS (SELECT id, version, committed_ns <> 0 OR version > 1"
			       " OR durable_version > 0 AS kept FROM ns_generations WHERE state IN (2, 3)"
			       " AND NOT manifests_gone AND gone_seen_ns < (SELECT ns FROM h)"
			       " ORDER BY id LIMIT $2)"
			       " SELECT " LEASE_LIVE ", (SELECT ns FROM h), g.id, g.version, g.kept"
			       " FROM (SELECT 1) AS one LEFT JOIN g ON true",
			       2 },
	/* R8: the ended generations $1 have no manifest left on BACKING;
	 * fenced by node $2 in the statement (L5) */
	[NS_RECLAIM_GENS_DONE] = { "ns_reclaim_gens_done",
				   "WITH " LEASE_FENCE_WITH("$2") ", d AS (UPDATE ns_generations"
				   " SET manifests_gone = true WHERE id IN (SELECT unnest($1::bigint[]))"
				   " AND state IN (2, 3) AND " LEASE_LIVE ") SELECT " LEASE_LIVE,
				   2 },
	/* manifest_shared.h D6: the horizon only grows. Not fenced: the tree
	 * manifest is on BACKING whatever the writer's lease says */
	[NS_TREE_HORIZON] = { "ns_tree_horizon",
			      "INSERT INTO ns_meta(key, value) VALUES ('tree_horizon', $1)"
			      " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
			      " WHERE CAST(ns_meta.value AS BIGINT) < CAST(excluded.value AS BIGINT)",
			      1 },
	[NS_CHUNK_GET] = { "ns_chunk_get",
			   "SELECT refcount, uploaded, COALESCE(holder, 0), state, plain_len, codec,"
			   " stored_len FROM ns_chunks WHERE hash = decode($1, 'hex')",
			   1 },
	/* NS_CHUNK_GET's columns, then whether the holder is a live node */
	[NS_CHUNK_GET_HOLDER] = { "ns_chunk_get_holder",
				  "SELECT refcount, uploaded, COALESCE(holder, 0), state, plain_len,"
				  " codec, stored_len, EXISTS (SELECT 1 FROM ckpt_nodes n"
				  " WHERE n.id = c.holder AND n.state = 'live')"
				  " FROM ns_chunks c WHERE hash = decode($1, 'hex')",
				  1 },
	[NS_CHECK_REFS] = { "ns_check_refs",
			    "SELECT encode(c.hash, 'hex'), c.refcount, COALESCE(r.n, 0) FROM ns_chunks c"
			    " LEFT JOIN (SELECT hash, count(*) AS n FROM ns_extents GROUP BY hash) r"
			    " ON r.hash = c.hash WHERE c.refcount <> COALESCE(r.n, 0)",
			    0 },
	[NS_CHECK_LIVE] = { "ns_check_live",
			    "SELECT e.ino, e.off FROM ns_extents e LEFT JOIN ns_chunks c ON c.hash = e.hash"
			    " WHERE c.hash IS NULL OR c.state <> 'live'",
			    0 },
	/* N12: a chunk seen free is named by no extent */
	[NS_CHECK_STAMPS] = { "ns_check_stamps",
			      "SELECT encode(hash, 'hex'), refcount FROM ns_chunks"
			      " WHERE free_seen_ns IS NOT NULL AND refcount <> 0",
			      0 },
	[NS_DIR_USED] = { "ns_dir_used", "SELECT 1 FROM ns_dirents WHERE parent = $1 LIMIT 1", 1 },
	[NS_DIRENT_MOVE] = { "ns_dirent_move",
			     "UPDATE ns_dirents SET parent = $2, name = $3 WHERE id = $1", 3 },
	[NS_DIRENT_SET_INO] = { "ns_dirent_set_ino", "UPDATE ns_dirents SET ino = $2 WHERE id = $1", 2 },
	[NS_NLINK_ADD] = { "ns_nlink_add",
			   "UPDATE ns_inodes SET nlink = nlink + $2, ctime_ns = $3 WHERE ino = $1", 3 },
	/* N13: directory $1 was renamed: the generations (not lost) whose
	 * series is it or under it that have a version on BACKING — COMMITTED,
	 * and OPEN or HELD ones (a rewrite, whose rollback restores the version
	 * BACKING names by the old path) — are no longer durable; their ids,
	 * versions and states (only the COMMITTED ones are queued again).
	 * Each distinct series is walked up to the root once (a run's thousand
	 * saves share one). A directory inside a generation has no series under
	 * it (a live generation's series is outside generations): no walk then */
	[NS_SERIES_MOVED] = { "ns_series_moved",
			      "WITH RECURSIVE s(series) AS (SELECT DISTINCT series FROM ns_generations"
			      " WHERE state IN (0, 1, 4) AND durable_version > 0 AND NOT lost"
			      " AND EXISTS (SELECT 1 FROM ns_inodes"
			      " WHERE ino = $1 AND gen IS NULL)), up(series, ino) AS (SELECT series,"
			      " series FROM s UNION SELECT up.series, d.parent FROM up"
			      " JOIN ns_dirents d ON d.ino = up.ino) UPDATE ns_generations g"
			      " SET durable_version = 0 WHERE g.state IN (0, 1, 4) AND g.durable_version > 0"
			      " AND NOT g.lost AND g.series IN (SELECT series FROM up WHERE ino = $1)"
			      " RETURNING g.id, g.version, g.state",
			      1 },
	/* whether directory $2 is $1 or one of $1's ancestors (a directory has
	 * one entry, so the walk up is a chain; UNION stops on a cycle) */
	[NS_WITHIN] = { "ns_within",
			"WITH RECURSIVE up(ino) AS (SELECT CAST($1 AS BIGINT) UNION SELECT d.parent"
			" FROM ns_dirents d JOIN up ON d.ino = up.ino WHERE up.ino <> 1)"
			" SELECT 1 FROM up WHERE ino = $2 LIMIT 1",
			2 },
	[NS_INODE_LOCK] = { "ns_inode_lock", "SELECT " NS_ATTR_COLS " FROM ns_inodes i WHERE i.ino = $1"
					     " FOR UPDATE", 1 },
	[NS_INODE_SET] = { "ns_inode_set",
			   "UPDATE ns_inodes SET mode = $2, uid = $3, gid = $4, atime_ns = $5,"
			   " mtime_ns = $6, ctime_ns = $7 WHERE ino = $1",
			   7 },
	[NS_READLINK] = { "ns_readlink", "SELECT mode, target FROM ns_inodes WHERE ino = $1", 1 },
	[NS_EXTENT_CUT] = { "ns_extent_cut",
			    "UPDATE ns_extents SET len = $2 - off WHERE ino = $1 AND off < $2"
			    " AND off + len > $2",
			    2 },
	[NS_META_GET] = { "ns_meta_get", "SELECT value FROM ns_meta WHERE key = $1", 1 },
	/* the batched release: the rows of the inodes it takes are deleted (or
	 * emptied) first and RETURNed, and only those inodes' extents move (N1) */
	[NS_REL_INODES_DELETE] = { "ns_rel_inodes_delete",
				   "WITH " NS_REL_WAIT_WITH("ino = ANY($1::bigint[])", "true")
				   " DELETE FROM ns_inodes WHERE ino = ANY($1::bigint[]) AND nlink = 0"
				   " AND ino <> 1 AND NOT " NS_HELD_ELSEWHERE("ns_inodes.ino", "$2")
				   " RETURNING ino",
				   2 },
	[NS_DROP_DATA_SET] = { "ns_drop_data_set",
			       "WITH " NS_REL_WAIT_WITH("ino = ANY($1::bigint[]) AND mode & 61440 = 32768",
							"false")
			       " UPDATE ns_inodes SET size = 0 WHERE ino = ANY($1::bigint[]) AND nlink = 0"
			       " AND mode & 61440 = 32768 AND NOT "
			       NS_HELD_ELSEWHERE("ns_inodes.ino", "$2") " RETURNING ino",
			       2 },
	[NS_REFS_DROP_ANY] = { "ns_refs_drop_any",
			       "UPDATE ns_chunks c SET refcount = c.refcount - g.n FROM (SELECT hash,"
			       " count(*) AS n FROM ns_extents WHERE ino = ANY($1::bigint[]) GROUP BY hash) g"
			       " WHERE c.hash = g.hash",
			       1 },
	[NS_EXTENTS_DELETE_ANY] = { "ns_extents_delete_any",
				    "DELETE FROM ns_extents WHERE ino = ANY($1::bigint[])", 1 },
	[NS_STATS] = { "ns_stats",
		       "SELECT (SELECT count(*) FROM ns_inodes),"
		       " (SELECT count(*) FROM ns_inodes WHERE mode & 61440 = 32768),"
		       " (SELECT COALESCE(sum(size), 0) FROM ns_inodes WHERE mode & 61440 = 32768),"
		       " (SELECT COALESCE(sum(len), 0) FROM ns_extents)",
		       0 },
	[NS_UNUPLOADED_OF] = { "ns_unuploaded_of",
			       "SELECT encode(hash, 'hex') FROM ns_chunks WHERE holder = $1"
			       " AND NOT uploaded AND hash > decode($2, 'hex') ORDER BY hash LIMIT $3",
			       3 },
	/* lease.h L10: the earlier nodes of cache $1 (none live once the
	 * cache's new daemon took over) */
	[NS_UNUPLOADED_OF_CACHE] = { "ns_unuploaded_of_cache",
				     "SELECT encode(c.hash, 'hex') FROM ns_chunks c WHERE NOT c.uploaded"
				     " AND c.holder IN (SELECT n.id FROM ckpt_nodes n WHERE"
				     " n.cache_id = $1 AND n.state <> 'live')"
				     " AND c.hash > decode($2, 'hex') ORDER BY c.hash LIMIT $3",
				     3 },
	/* N7: every live row among $1, and whether it is (now) marked: one on
	 * BACKING already, or one node $2 holds a claim of (consumed here); a
	 * live row without either is left not uploaded (ok false). Fenced by
	 * node $2 in the statement (lease.h L5): the rows after the fence's
	 * column, one row of NULLs if there are none (pgns_marks) */
	[NS_UPLOADED_MANY] = { "ns_uploaded_many",
			       "WITH " LEASE_FENCE_WITH("$2") ", l AS (SELECT c.hash, c.uploaded OR"
			       " EXISTS (SELECT 1 FROM ns_upload_claims k WHERE k.hash = c.hash"
			       " AND k.node = $2::bigint) AS ok FROM ns_chunks c WHERE c.hash IN"
			       " (SELECT decode(h, 'hex') FROM unnest($1::text[]) AS t(h))"
			       " AND c.state = 'live' AND " LEASE_LIVE " FOR UPDATE OF c),"
			       " m AS (UPDATE ns_chunks c SET uploaded = true FROM l WHERE c.hash = l.hash"
			       " AND l.ok RETURNING c.hash), d AS (DELETE FROM ns_upload_claims k USING m"
			       " WHERE k.hash = m.hash AND k.node = $2::bigint)"
			       " SELECT " LEASE_LIVE ", encode(l.hash, 'hex'), l.ok FROM (SELECT 1) AS one"
			       " LEFT JOIN l ON true",
			       2 },
	[NS_CHUNKS_INFO] = { "ns_chunks_info",
			     "SELECT encode(hash, 'hex'), plain_len, codec, stored_len, uploaded,"
			     " state = 'live' FROM ns_chunks WHERE hash IN (SELECT decode(h, 'hex')"
			     " FROM unnest($1::text[]) AS t(h))",
			     1 },
	[NS_FILE_UNUPLOADED] = { "ns_file_unuploaded",
				 "SELECT 1 FROM ns_extents e JOIN ns_chunks c ON c.hash = e.hash"
				 " WHERE e.ino = $1 AND NOT c.uploaded LIMIT 1",
				 1 },
	/* N6: a live chunk's row is updated (pins + 1), so a concurrent
	 * reclaim's re-checked WHERE (pins = 0) skips it, and a chunk already
	 * marked reclaiming is not pinned (state = 'live' re-checked here) */
	[NS_PIN] = { "ns_pin",
		     "WITH p AS (UPDATE ns_chunks c SET pins = c.pins + 1 FROM (SELECT decode(h, 'hex')"
		     " AS hash FROM unnest($3::text[]) AS t(h) EXCEPT SELECT hash FROM ns_pins"
		     " WHERE node = $1 AND ino = $2) l WHERE c.hash = l.hash AND c.state = 'live'"
		     " RETURNING c.hash) INSERT INTO ns_pins(node, ino, hash) SELECT $1, $2, hash FROM p",
		     3 },
	/* NS_UNPIN, NS_UNPIN_LOST, NS_UNPIN_CLAIMS: fenced by node $1 in the
	 * statement (lease.h L5) */
	[NS_UNPIN] = { "ns_unpin",
		       "WITH " LEASE_FENCE_WITH("$1") ", d AS (DELETE FROM ns_pins WHERE node = $1"
		       " AND ino = $2 AND " LEASE_LIVE " RETURNING hash), u AS (UPDATE ns_chunks c"
		       " SET pins = c.pins - 1 FROM d WHERE c.hash = d.hash) SELECT " LEASE_LIVE,
		       2 },
	[NS_UNPIN_LOST] = { "ns_unpin_lost",
			    "WITH " LEASE_FENCE_WITH("$1") ", o AS (DELETE FROM ns_open o"
			    " WHERE NOT EXISTS (SELECT 1 FROM ckpt_nodes n WHERE n.id = o.node"
			    " AND n.state = 'live') AND " LEASE_LIVE "), k AS (DELETE FROM ns_upload_claims k"
			    " WHERE NOT EXISTS (SELECT 1 FROM ckpt_nodes n WHERE n.id = k.node"
			    " AND n.state = 'live') AND " LEASE_LIVE "),"
			    " d AS (DELETE FROM ns_pins p WHERE NOT EXISTS (SELECT 1 FROM ckpt_nodes n"
			    " WHERE n.id = p.node AND n.state = 'live') AND " LEASE_LIVE " RETURNING hash),"
			    " g AS (SELECT hash, count(*) AS n FROM d GROUP BY hash), u AS (UPDATE ns_chunks c"
			    " SET pins = c.pins - g.n FROM g WHERE c.hash = g.hash) SELECT " LEASE_LIVE,
			    1 },
	/* N7: node $2 claims each hash of $1 (a writer of the node names it)
	 * and $3 (none does) before it writes the object, unless the store has
	 * it live and on BACKING already, or (one of $3) has no live row to
	 * mark; the rows as NS_CHUNK_GET, each after its hash */
	[NS_CLAIM_MANY] = { "ns_claim_many",
			    "WITH q AS (SELECT decode(h, 'hex') AS hash, true AS w FROM unnest($1::text[])"
			    " AS t(h) UNION ALL SELECT decode(h, 'hex'), false FROM unnest($3::text[]) AS"
			    " t(h)), k AS (INSERT INTO ns_upload_claims(hash, node) SELECT q.hash,"
			    " $2::bigint FROM q WHERE NOT EXISTS (SELECT 1 FROM ns_chunks c WHERE"
			    " c.hash = q.hash AND c.state = 'live' AND c.uploaded) AND (q.w OR EXISTS"
			    " (SELECT 1 FROM ns_chunks c WHERE c.hash = q.hash AND c.state = 'live'))"
			    " ON CONFLICT DO NOTHING) SELECT encode(hash, 'hex'), refcount, uploaded,"
			    " COALESCE(holder, 0), state, plain_len, codec, stored_len FROM ns_chunks"
			    " WHERE hash IN (SELECT hash FROM q)",
			    3 },
	/* NS_UNPIN, and node $1's claims of the hashes of $3 go (N7: of no
	 * more use to it) */
	[NS_UNPIN_CLAIMS] = { "ns_unpin_claims",
			      "WITH " LEASE_FENCE_WITH("$1") ", k AS (DELETE FROM ns_upload_claims"
			      " WHERE node = $1 AND hash IN (SELECT decode(h, 'hex') FROM"
			      " unnest($3::text[]) AS t(h)) AND " LEASE_LIVE "), d AS (DELETE FROM ns_pins"
			      " WHERE node = $1 AND ino = $2 AND " LEASE_LIVE " RETURNING hash),"
			      " u AS (UPDATE ns_chunks c SET pins = c.pins - 1 FROM d WHERE c.hash = d.hash)"
			      " SELECT " LEASE_LIVE,
			      3 },
	/* N9: a create in one statement, fenced by node $1 in it (lease.h L5):
	 * the parent's row locked (as NS_PARENT_LOCK: its mode, NULL if there
	 * is none), the inode with the parent's generation, its entry ($2, $3:
	 * a name taken fails the statement, 23505), the parent's times and
	 * nlink (+ $12), the call's token ($13, $14: pg_token, pg.h P2's upsert
	 * of ckpt_txns); the new inode's attributes after the parent's mode.
	 * Run again with a token that committed (mine), it changes nothing and
	 * answers with the inode its first run linked at $2/$3. */
	[NS_CREATE] = { "ns_create",
			"WITH " LEASE_FENCE_WITH("$1") ", mine AS (SELECT EXISTS (SELECT 1 FROM"
			" ckpt_txns WHERE client = CAST($13 AS BIGINT) AND seq = CAST($14 AS BIGINT)"
			" AND done) AS v),"
			" p AS (SELECT mode, gen FROM ns_inodes"
			" WHERE ino = CAST($2 AS BIGINT) AND " LEASE_LIVE " FOR UPDATE),"
			" ok AS (SELECT " LEASE_LIVE " AS live, (SELECT mode FROM p) AS pmode),"
			" go AS (SELECT live AND pmode IS NOT NULL AND pmode & 61440 = 16384 AND NOT"
			" (SELECT v FROM mine) AS v FROM ok),"
			" tk AS (INSERT INTO ckpt_txns(client, seq, done, at) SELECT CAST($13 AS BIGINT),"
			" CAST($14 AS BIGINT), true, clock_timestamp() WHERE (SELECT v FROM go)"
			" ON CONFLICT (client) DO UPDATE SET seq = excluded.seq / CASE WHEN"
			" ckpt_txns.seq < excluded.seq THEN 1 ELSE 0 END, done = true, at = excluded.at),"
			" i AS (INSERT INTO ns_inodes(ino, mode, uid, gid, nlink, size, rdev, atime_ns,"
			" mtime_ns, ctime_ns, target, gen) SELECT nextval('ns_ino_seq'),"
			" CAST($4 AS BIGINT), CAST($5 AS BIGINT), CAST($6 AS BIGINT), CAST($7 AS BIGINT),"
			" CAST($8 AS BIGINT), CAST($9 AS BIGINT), CAST($10 AS BIGINT), CAST($10 AS BIGINT),"
			" CAST($10 AS BIGINT), CAST($11 AS TEXT), p.gen FROM p WHERE (SELECT v FROM go)"
			" RETURNING ino, mode, uid, gid, nlink, size, rdev, atime_ns, mtime_ns, ctime_ns,"
			" gen),"
			" d AS (INSERT INTO ns_dirents(parent, name, ino) SELECT CAST($2 AS BIGINT),"
			" CAST($3 AS TEXT), ino FROM i),"
			" t AS (UPDATE ns_inodes SET mtime_ns = CAST($10 AS BIGINT), ctime_ns ="
			" CAST($10 AS BIGINT), nlink = nlink + CAST($12 AS BIGINT) WHERE ino ="
			" CAST($2 AS BIGINT) AND (SELECT v FROM go)),"
			" m AS (SELECT n.ino, n.mode, n.uid, n.gid, n.nlink, n.size, n.rdev, n.atime_ns,"
			" n.mtime_ns, n.ctime_ns, n.gen FROM ns_dirents e JOIN ns_inodes n ON n.ino ="
			" e.ino WHERE e.parent = CAST($2 AS BIGINT) AND e.name = CAST($3 AS TEXT) AND"
			" (SELECT v FROM mine)),"
			" x AS (SELECT * FROM i UNION ALL SELECT * FROM m)"
			" SELECT ok.live, ok.pmode, x.ino, x.mode, x.uid, x.gid, x.nlink, x.size, x.rdev,"
			" x.atime_ns, x.mtime_ns, x.ctime_ns, x.gen FROM ok LEFT JOIN x ON true",
			14 },
	/* N10: node $1 pins, for its writers $2, the chunks $3 whose cache
	 * copies it is about to evict: a live row on BACKING (uploaded, or the
	 * node's claim stands, N7) locked (a reclaim's re-checked WHERE then
	 * sees the pins), a missing row inserted live and uploaded on the
	 * strength of the node's claim (consumed: a marking), from $4-$6;
	 * fenced by $1 in the statement (lease.h L5). The hashes pinned. */
	[NS_PIN_HELD] = { "ns_pin_held",
			  "WITH " LEASE_FENCE_WITH("$1") ", q AS (SELECT DISTINCT t.i AS ino,"
			  " decode(t.h, 'hex') AS hash, t.pl, t.co, t.sl FROM unnest($2::bigint[],"
			  " $3::text[], $4::bigint[], $5::int[], $6::bigint[]) AS t(i, h, pl, co, sl)),"
			  " hs AS (SELECT hash, max(pl) AS pl, max(co) AS co, max(sl) AS sl, count(*) AS n"
			  " FROM q GROUP BY hash),"
			  " ok AS (SELECT c.hash FROM ns_chunks c WHERE c.hash IN (SELECT hash FROM hs)"
			  " AND c.state = 'live' AND (c.uploaded OR EXISTS (SELECT 1 FROM ns_upload_claims"
			  " k WHERE k.hash = c.hash AND k.node = $1::bigint)) AND " LEASE_LIVE
			  " FOR UPDATE OF c),"
			  " np AS (SELECT q.ino, q.hash FROM q JOIN ok ON ok.hash = q.hash WHERE NOT EXISTS"
			  " (SELECT 1 FROM ns_pins p WHERE p.node = $1::bigint AND p.ino = q.ino"
			  " AND p.hash = q.hash)),"
			  " u AS (UPDATE ns_chunks c SET pins = c.pins + g.n FROM (SELECT hash, count(*)"
			  " AS n FROM np GROUP BY hash) g WHERE c.hash = g.hash),"
			  " ins AS (INSERT INTO ns_chunks(hash, plain_len, codec, stored_len, refcount,"
			  " uploaded, holder, pins) SELECT hs.hash, hs.pl, hs.co, hs.sl, 0, true,"
			  " $1::bigint, hs.n FROM hs WHERE NOT EXISTS (SELECT 1 FROM ns_chunks c"
			  " WHERE c.hash = hs.hash) AND EXISTS (SELECT 1 FROM ns_upload_claims k"
			  " WHERE k.hash = hs.hash AND k.node = $1::bigint) AND " LEASE_LIVE
			  " ON CONFLICT (hash) DO NOTHING RETURNING hash),"
			  " kd AS (DELETE FROM ns_upload_claims k USING ins WHERE k.hash = ins.hash"
			  " AND k.node = $1::bigint),"
			  " pi AS (INSERT INTO ns_pins(node, ino, hash) SELECT $1::bigint, ino, hash"
			  " FROM np UNION ALL SELECT $1::bigint, q.ino, q.hash FROM q JOIN ins"
			  " ON ins.hash = q.hash),"
			  " r AS (SELECT hash FROM ok UNION ALL SELECT hash FROM ins)"
			  " SELECT " LEASE_LIVE ", encode(r.hash, 'hex') FROM (SELECT 1) AS one"
			  " LEFT JOIN r ON true",
			  6 },
	/* N14: node $1's first handle of inode $2 (fenced, L5): its row, the
	 * inode's row held FOR SHARE so that a release (NS_REL_LOCK first)
	 * either sees the row or has deleted the inode (no row then); then
	 * whether the inode exists */
	[NS_OPEN_ADD] = { "ns_open_add",
			  "WITH " LEASE_FENCE_WITH("$1") ", i AS (SELECT ino FROM ns_inodes WHERE"
			  " ino = $2 AND " LEASE_LIVE " FOR SHARE), a AS (INSERT INTO ns_open(node, ino)"
			  " SELECT $1, ino FROM i ON CONFLICT DO NOTHING)"
			  " SELECT " LEASE_LIVE ", EXISTS (SELECT 1 FROM i)",
			  2 },
	/* N14: node $1's last handle of inode $2 closed: its row goes; then
	 * whether the inode is unlinked (nlink 0) and open on no other live
	 * node, which the caller then releases */
	[NS_OPEN_DROP] = { "ns_open_drop",
			   "WITH " LEASE_FENCE_WITH("$1") ", d AS (DELETE FROM ns_open WHERE node = $1"
			   " AND ino = $2 AND " LEASE_LIVE ") SELECT " LEASE_LIVE ", EXISTS (SELECT 1"
			   " FROM ns_inodes i WHERE i.ino = $2 AND i.nlink = 0 AND NOT"
			   " " NS_HELD_ELSEWHERE("i.ino", "$1") ")",
			   2 },
	/* N14: a release's first statement: the unlinked inodes of $1 locked,
	 * so that its next statement (a new snapshot) sees every ns_open row
	 * whose NS_OPEN_ADD locked the inode first */
	[NS_REL_LOCK] = { "ns_rel_lock",
			  "SELECT ino FROM ns_inodes WHERE ino = ANY($1::bigint[]) AND nlink = 0"
			  " ORDER BY ino FOR UPDATE",
			  1 },
	/* the rows of released inodes that name them: ns_open (this node's,
	 * left by a failed close) and ns_writing (a writer's row its close
	 * could not delete once the inode was gone) */
	[NS_REL_ROWS_DELETE] = { "ns_rel_rows_delete",
				 "WITH o AS (DELETE FROM ns_open WHERE ino = ANY($1::bigint[])),"
				 " r AS (DELETE FROM ns_release_wait WHERE ino = ANY($1::bigint[]))"
				 " DELETE FROM ns_writing WHERE ino = ANY($1::bigint[])",
				 1 },
	/* N14: those now open on no live node (their last holder was lost, or
	 * closed a write handle), for the reclaim duty to release */
	[NS_ORPHANS] = { "ns_orphans",
			 "SELECT w.ino, w.del FROM ns_release_wait w WHERE NOT "
			 NS_HELD_ELSEWHERE("w.ino", "0") " ORDER BY w.ino LIMIT $1",
			 1 },
	[NS_ORPHANS_DONE] = { "ns_orphans_done",
			      "DELETE FROM ns_release_wait w WHERE w.ino = ANY($1::bigint[]) AND NOT "
			      NS_HELD_ELSEWHERE("w.ino", "0"),
			      1 },
	/* N15: the store id, the durable generations (COMMITTED with a manifest
	 * on BACKING) and the newest of them whose version is durable (pgns.h:
	 * not one inside its rewrite's manifest swap), and whether any chunk is uploaded
	 * (an index-less EXISTS: it stops at the first such row) */
	[NS_STORE_FACTS] = { "ns_store_facts",
			     "SELECT (SELECT value FROM ns_meta WHERE key = 'store_id'),"
			     " (SELECT count(*) FROM ns_generations WHERE state = 1"
			     " AND durable_version > 0), g.id, g.durable_version,"
			     " EXISTS (SELECT 1 FROM ns_chunks WHERE uploaded),"
			     " EXISTS (SELECT 1 FROM ns_meta WHERE key = 'store_marked')"
			     " FROM (SELECT 1) one LEFT JOIN LATERAL (SELECT id, durable_version"
			     " FROM ns_generations WHERE state = 1 AND durable_version > 0"
			     " AND durable_version = version ORDER BY id DESC LIMIT 1) g ON true",
			     0 },
	/* N15: the first id offered is kept; read back by NS_META_GET (a new
	 * snapshot: an insert that lost the race returns no row here) */
	[NS_STORE_ID_OFFER] = { "ns_store_id_offer",
				"INSERT INTO ns_meta(key, value) VALUES ('store_id', $1)"
				" ON CONFLICT (key) DO NOTHING",
				1 },
	/* N15: a node found or wrote the marker with the store id on BACKING */
	[NS_STORE_MARKED] = { "ns_store_marked",
			      "INSERT INTO ns_meta(key, value) VALUES ('store_marked', '1')"
			      " ON CONFLICT (key) DO NOTHING",
			      0 },
};
const size_t pgns_nstmts = NS_COUNT;

const struct pg_stmt *pgns_stmts_all(size_t *n)
{
	static struct pg_stmt all[192];
	static size_t count;
	if (count == 0) {
		assert(lease_nstmts + pgns_nstmts + pggen_nstmts + catsha_nstmts <=
		       sizeof(all) / sizeof(all[0]));
		memcpy(all, lease_stmts, lease_nstmts * sizeof(*all));
		memcpy(all + lease_nstmts, pgns_stmts, pgns_nstmts * sizeof(*all));
		memcpy(all + lease_nstmts + pgns_nstmts, pggen_stmts, pggen_nstmts * sizeof(*all));
		/* catalog_shared_admin.h A3: ckptfs-admin's questions, last */
		memcpy(all + lease_nstmts + pgns_nstmts + pggen_nstmts, catsha_stmts,
		       catsha_nstmts * sizeof(*all));
		count = lease_nstmts + pgns_nstmts + pggen_nstmts + catsha_nstmts;
	}
	*n = count;
	return all;
}

static const char pgns_schema_sql[] =
	"CREATE SEQUENCE IF NOT EXISTS ns_ino_seq START 2;"
	"CREATE TABLE IF NOT EXISTS ns_inodes(ino BIGINT PRIMARY KEY, mode BIGINT NOT NULL,"
	" uid BIGINT NOT NULL, gid BIGINT NOT NULL, nlink BIGINT NOT NULL,"
	" size BIGINT NOT NULL DEFAULT 0, rdev BIGINT NOT NULL DEFAULT 0,"
	" atime_ns BIGINT NOT NULL, mtime_ns BIGINT NOT NULL, ctime_ns BIGINT NOT NULL, target TEXT,"
	" gen BIGINT);"
	"CREATE INDEX IF NOT EXISTS ns_inodes_by_gen ON ns_inodes(gen) WHERE gen IS NOT NULL;"
	"CREATE TABLE IF NOT EXISTS ns_dirents(id BIGSERIAL PRIMARY KEY, parent BIGINT NOT NULL,"
	" name TEXT NOT NULL, ino BIGINT NOT NULL, UNIQUE (parent, name));"
	"CREATE INDEX IF NOT EXISTS ns_dirents_by_parent ON ns_dirents(parent, id);"
	"CREATE INDEX IF NOT EXISTS ns_dirents_by_ino ON ns_dirents(ino);"
	"CREATE TABLE IF NOT EXISTS ns_chunks(hash BYTEA PRIMARY KEY, plain_len BIGINT NOT NULL,"
	" codec INT NOT NULL, stored_len BIGINT NOT NULL, refcount BIGINT NOT NULL,"
	" uploaded BOOLEAN NOT NULL DEFAULT false, holder BIGINT,"
	" state TEXT NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'reclaiming')),"
	" reclaimer BIGINT);"
	"CREATE INDEX IF NOT EXISTS ns_chunks_unreferenced ON ns_chunks(hash) WHERE refcount = 0;"
	/* the chunks a node holds and BACKING lacks (its upload backlog): what
	 * a settlement adopts and a mount takes back (NS_UNUPLOADED_OF*) */
	"CREATE INDEX IF NOT EXISTS ns_chunks_not_uploaded ON ns_chunks(holder) WHERE NOT uploaded;"
	"CREATE TABLE IF NOT EXISTS ns_extents(ino BIGINT NOT NULL, off BIGINT NOT NULL,"
	" len BIGINT NOT NULL, hash BYTEA NOT NULL, chunk_off BIGINT NOT NULL,"
	" PRIMARY KEY (ino, off));"
	"CREATE INDEX IF NOT EXISTS ns_extents_by_hash ON ns_extents(hash);"
	/* N6: the committed chunks a node's writer continues from (pgns_pin) */
	"ALTER TABLE ns_chunks ADD COLUMN IF NOT EXISTS pins BIGINT NOT NULL DEFAULT 0;"
	"CREATE TABLE IF NOT EXISTS ns_pins(node BIGINT NOT NULL, ino BIGINT NOT NULL,"
	" hash BYTEA NOT NULL, PRIMARY KEY (node, ino, hash));"
	/* meta/pggen.c: generations, and the files open for writing on each node */
	"CREATE TABLE IF NOT EXISTS ns_generations(id BIGSERIAL PRIMARY KEY, series BIGINT NOT NULL,"
	" root BIGINT NOT NULL, name TEXT NOT NULL, step BIGINT NOT NULL, state INT NOT NULL,"
	" version INT NOT NULL DEFAULT 1, pinned BOOLEAN NOT NULL DEFAULT false,"
	" created_ns BIGINT NOT NULL, committed_ns BIGINT NOT NULL DEFAULT 0,"
	" ended_ns BIGINT NOT NULL DEFAULT 0, rule TEXT NOT NULL DEFAULT '',"
	" held TEXT NOT NULL DEFAULT '', lost BOOLEAN NOT NULL DEFAULT false, opened_by BIGINT,"
	" backup_root BIGINT NOT NULL DEFAULT 0);"
	"CREATE INDEX IF NOT EXISTS ns_generations_by_series ON ns_generations(series, state, step);"
	/* the version whose manifest is on BACKING (meta/manifest_shared.c) */
	"ALTER TABLE ns_generations ADD COLUMN IF NOT EXISTS durable_version INT NOT NULL DEFAULT 0;"
	"CREATE TABLE IF NOT EXISTS ns_writing(node BIGINT NOT NULL, ino BIGINT NOT NULL,"
	" PRIMARY KEY (node, ino));"
	"CREATE INDEX IF NOT EXISTS ns_writing_by_ino ON ns_writing(ino);"
	/* N14: the inodes each node has a handle of (not one open only for
	 * writing: its ns_writing row says so), and the unlinked ones a release
	 * left to the last node that has them open */
	"CREATE TABLE IF NOT EXISTS ns_open(node BIGINT NOT NULL, ino BIGINT NOT NULL,"
	" PRIMARY KEY (node, ino));"
	"CREATE INDEX IF NOT EXISTS ns_open_by_ino ON ns_open(ino);"
	"CREATE TABLE IF NOT EXISTS ns_release_wait(ino BIGINT PRIMARY KEY, del BOOLEAN NOT NULL);"
	/* catalog-wide facts: catalog_id (pgns_catalog_id) */
	"CREATE TABLE IF NOT EXISTS ns_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
	/* N7: a node's claim of a hash whose object it is putting on BACKING */
	"CREATE TABLE IF NOT EXISTS ns_upload_claims(hash BYTEA NOT NULL, node BIGINT NOT NULL,"
	" PRIMARY KEY (hash, node));"
	/* the tree outside generations, fingerprinted each second by the tree
	 * manifest's writer (pggen_outside_fp): no scan of every inode */
	"CREATE INDEX IF NOT EXISTS ns_inodes_outside_gens ON ns_inodes(ino) WHERE gen IS NULL;"
	/* schema 2, the reclaim horizon (catalog_shared_reclaim.c R7-R9, N12):
	 * added to a database of schema 1 at its next open, every node alike;
	 * its ended generations' manifests, which no node removed, are then
	 * removed by the reclaim duty (R8) */
	"ALTER TABLE ns_chunks ADD COLUMN IF NOT EXISTS free_seen_ns BIGINT;"
	"ALTER TABLE ns_generations ADD COLUMN IF NOT EXISTS gone_seen_ns BIGINT;"
	"ALTER TABLE ns_generations ADD COLUMN IF NOT EXISTS manifests_gone BOOLEAN NOT NULL"
	" DEFAULT false;"
	"CREATE INDEX IF NOT EXISTS ns_generations_manifests_left ON ns_generations(id)"
	" WHERE state IN (2, 3) AND NOT manifests_gone;"
	"CREATE INDEX IF NOT EXISTS ns_generations_rewritten ON ns_generations(id) WHERE version > 1;"
	/* schema 3, a file whose write or last close failed (pggen.h X14): added
	 * to a database of schema 2 at its next open, as schema 2 was; a node
	 * of schema 2 neither sets nor reads it */
	"ALTER TABLE ns_inodes ADD COLUMN IF NOT EXISTS failed BOOLEAN NOT NULL DEFAULT false;"
	"CREATE INDEX IF NOT EXISTS ns_inodes_failed ON ns_inodes(gen) WHERE failed;"
	/* schema 4, a write handle whose ns_writing row its flush parked
	 * (pggen.h X15): its node's ns_open row says so, and keep-latest-k's
	 * expire counts it (X12). Added to a database of schema 3 at its next
	 * open, as schema 3 was; a node of schema 3 neither sets nor reads it */
	"ALTER TABLE ns_open ADD COLUMN IF NOT EXISTS parked BOOLEAN NOT NULL DEFAULT false;"
	/* schema 5, the node that found a chunk lost before its upload (pggen.h
	 * X16), read by every node's commit (X17). Added to a database of
	 * schema 4 at its next open; a node of schema 4 neither sets nor reads
	 * it, so its commits see only its own findings, as before */
	"ALTER TABLE ns_chunks ADD COLUMN IF NOT EXISTS lost_by BIGINT;"
	"CREATE INDEX IF NOT EXISTS ns_chunks_lost ON ns_chunks(hash)"
	" WHERE lost_by IS NOT NULL AND NOT uploaded;"
	"INSERT INTO ns_meta(key, value) VALUES ('schema', '" PGNS_SCHEMA_TEXT "') ON CONFLICT (key)"
	" DO UPDATE SET value = excluded.value WHERE CAST(ns_meta.value AS INT) <"
	" CAST(excluded.value AS INT);";

int64_t pgns_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The shared catalog's id, made by whichever node creates the schema first:
 * 16 random bytes as 32 lowercase hex digits, like a SQLite catalog's
 * meta.catalog_id, so that BACKING's claim names it the same way. */
static int pgns_catalog_id_make(struct pg *pg)
{
	uint8_t raw[16];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -EIO;
	char id[2 * sizeof(raw) + 1], sql[160];
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	snprintf(sql, sizeof(sql),
		 "INSERT INTO ns_meta(key, value) VALUES ('catalog_id', '%s')"
		 " ON CONFLICT (key) DO NOTHING",
		 id);
	return pg_exec_plain(pg, sql);
}

int pgns_schema(struct pg *pg, uint32_t root_uid, uint32_t root_gid)
{
	int rc = pg_exec_plain(pg, pgns_schema_sql);
	if (rc == -EEXIST) /* another node made the same table at the same moment */
		rc = pg_exec_plain(pg, pgns_schema_sql);
	if (rc)
		return rc;
	char root[512];
	int64_t now = pgns_now_ns();
	snprintf(root, sizeof(root),
		 "INSERT INTO ns_inodes(ino, mode, uid, gid, nlink, atime_ns, mtime_ns, ctime_ns)"
		 " VALUES (1, %u, %u, %u, 2, %" PRId64 ", %" PRId64 ", %" PRId64 ")"
		 " ON CONFLICT (ino) DO NOTHING",
		 (unsigned)(S_IFDIR | 0755), root_uid, root_gid, now, now, now);
	rc = pg_exec_plain(pg, root);
	return rc ? rc : pgns_catalog_id_make(pg);
}

/* ---- text parameters ---- */

struct pgns_buf {
	char *s;
	size_t len, cap;
	bool failed;
};

static void pgns_put(struct pgns_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void pgns_put(struct pgns_buf *b, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->failed = true;
			return;
		}
		if (b->s && b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
		char *s = realloc(b->s, cap);
		if (!s) {
			b->failed = true;
			return;
		}
		b->s = s;
		b->cap = cap;
	}
}

static void pgns_put_hex(struct pgns_buf *b, const uint8_t hash[CAT_HASH_LEN])
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	pgns_put(b, "%s", hex);
}

/* A hash the server sent back: anything but 64 hex digits is damage (-EIO). */
static int pgns_unhex(const char *hex, uint8_t out[CAT_HASH_LEN])
{
	return hash_from_hex(hex, out) == 0 ? 0 : -EIO;
}

static void pgns_buf_free(struct pgns_buf *b)
{
	free(b->s);
	memset(b, 0, sizeof(*b));
}

int pgns_hex_list(const uint8_t *first, size_t stride, size_t n, char **out)
{
	struct pgns_buf list = { 0 };
	pgns_put(&list, "{");
	for (size_t i = 0; i < n; i++) {
		pgns_put(&list, "%s", i ? "," : "");
		pgns_put_hex(&list, first + i * stride);
	}
	pgns_put(&list, "}");
	if (list.failed) {
		pgns_buf_free(&list);
		return -ENOMEM;
	}
	*out = list.s;
	return 0;
}

/* ---- reading rows ---- */

static void pgns_attr(const PGresult *res, int r, int c0, struct cat_inode *out)
{
	memset(out, 0, sizeof(*out));
	out->ino = (uint64_t)pg_int(res, r, c0);
	out->mode = (uint32_t)pg_int(res, r, c0 + 1);
	out->uid = (uint32_t)pg_int(res, r, c0 + 2);
	out->gid = (uint32_t)pg_int(res, r, c0 + 3);
	out->nlink = (uint32_t)pg_int(res, r, c0 + 4);
	out->size = (uint64_t)pg_int(res, r, c0 + 5);
	out->rdev = (uint64_t)pg_int(res, r, c0 + 6);
	out->atime_ns = pg_int(res, r, c0 + 7);
	out->mtime_ns = pg_int(res, r, c0 + 8);
	out->ctime_ns = pg_int(res, r, c0 + 9);
}

static int pgns_exec(struct pgns *ns, int stmt, const char *const *params, PGresult **res)
{
	return pg_exec(ns->pg, ns->first + (size_t)stmt, params, res);
}


/* ---- lookups (no fence: reading changes nothing) ---- */

struct pgns_attr_call {
	struct pgns *ns;
	uint64_t ino;
	const char *name;
	struct cat_inode *out;
};

static int pgns_getattr_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_attr_call *c = arg;
	char ino[24];
	const char *params[] = { PG_U64(ino, c->ino) };
	PGresult *res;
	int rc = pgns_exec(c->ns, NS_GETATTR, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	if (rc == 0)
		pgns_attr(res, 0, 0, c->out);
	PQclear(res);
	return rc;
}

int pgns_getattr(struct pgns *ns, uint64_t ino, struct cat_inode *out)
{
	struct pgns_attr_call c = { ns, ino, NULL, out };
	return pg_read(ns->pg, pgns_getattr_body, &c); /* pg.h P5 */
}

struct pgns_attr_gen_call {
	struct pgns *ns;
	uint64_t ino;
	struct cat_inode *out;
	uint64_t gen;
};

static int pgns_getattr_gen_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_attr_gen_call *c = arg;
	char ino[24];
	const char *params[] = { PG_U64(ino, c->ino) };
	PGresult *res;
	int rc = pgns_exec(c->ns, NS_GETATTR_GEN, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ENOENT;
	if (rc == 0)
		pgns_attr(res, 0, 0, c->out);
	c->gen = rc == 0 && !PQgetisnull(res, 0, 10) ? (uint64_t)pg_int(res, 0, 10) : 0;
	PQclear(res);
	return rc;
}

int pgns_getattr_gen(struct pgns *ns, uint64_t ino, struct cat_inode *out, uint64_t *gen)
{
	struct pgns_attr_gen_call c = { ns, ino, out, 0 };
	int rc = pg_read(ns->pg, pgns_getattr_gen_body, &c); /* N11 */
	*gen = rc == 0 ? c.gen : 0;
	return rc;
}

/* A live directory's attributes (as catalog.c's cat_dir_get). */
static int pgns_dir_attr(struct pgns *ns, uint64_t dir, struct cat_inode *out)
{
	struct pgns_attr_call get = { ns, dir, NULL, out };
	int rc = pgns_getattr_body(ns->pg, &get);
	if (rc == 0 && !S_ISDIR(out->mode))
		rc = -ENOTDIR;
	if (rc == 0 && out->nlink == 0)
		rc = -ENOENT;
	return rc;
}

/* ".." of a live directory: its parent's attributes (the root's is itself). */
static int pgns_lookup_up(struct pgns *ns, uint64_t dir, struct cat_inode *out)
{
	struct cat_inode self;
	int rc = pgns_dir_attr(ns, dir, &self);
	if (rc || dir == CAT_ROOT_INO) {
		*out = self;
		return rc;
	}
	char ino[24];
	const char *params[] = { PG_U64(ino, dir) };
	PGresult *res;
	rc = pgns_exec(ns, NS_PARENT_OF, params, &res);
	if (rc)
		return rc;
	uint64_t up = pg_rows(res) == 1 ? (uint64_t)pg_int(res, 0, 0) : 0;
	PQclear(res);
	if (up == 0)
		return -ENOENT;
	struct pgns_attr_call get = { ns, up, NULL, out };
	return pgns_getattr_body(ns->pg, &get);
}

/* N11: a name's entry in one statement, a hit or a miss. A miss tells "no
 * such parent" (no row, or a directory removed: -ENOENT) and "not a
 * directory" (-ENOTDIR) from "no such name" by the parent's columns. */
static int pgns_lookup_name(struct pgns_attr_call *c)
{
	char ino[24];
	const char *params[] = { PG_U64(ino, c->ino), c->name };
	PGresult *res;
	int rc = pgns_exec(c->ns, NS_LOOKUP, params, &res);
	if (rc)
		return rc;
	rc = -ENOENT;
	if (pg_rows(res) == 1 && !PQgetisnull(res, 0, 0)) {
		pgns_attr(res, 0, 0, c->out);
		rc = 0;
	} else if (pg_rows(res) == 1 && !S_ISDIR((mode_t)pg_int(res, 0, 10))) {
		rc = -ENOTDIR;
	}
	PQclear(res);
	return rc;
}

static int pgns_lookup_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_attr_call *c = arg;
	if (strcmp(c->name, ".") == 0)
		return pgns_dir_attr(c->ns, c->ino, c->out);
	if (strcmp(c->name, "..") == 0)
		return pgns_lookup_up(c->ns, c->ino, c->out);
	return pgns_lookup_name(c);
}

int pgns_lookup(struct pgns *ns, uint64_t parent, const char *name, struct cat_inode *out)
{
	if (strlen(name) > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
		int rc = pgns_name_check(name);
		if (rc)
			return rc;
	}
	struct pgns_attr_call c = { ns, parent, name, out };
	return pg_read(ns->pg, pgns_lookup_body, &c); /* pg.h P5, N11 */
}

/* ---- create / unlink ---- */

/* Locks dir's row (serializing changes of its entries across nodes) and
 * checks it is a directory. */
static int pgns_lock_dir(struct pgns *ns, uint64_t dir)
{
	char ino[24];
	const char *params[] = { PG_U64(ino, dir) };
	PGresult *res;
	int rc = pgns_exec(ns, NS_PARENT_LOCK, params, &res);
	if (rc)
		return rc;
	if (pg_rows(res) != 1)
		rc = -ENOENT;
	else if (!S_ISDIR((mode_t)pg_int(res, 0, 0)))
		rc = -ENOTDIR;
	PQclear(res);
	return rc;
}

struct pgns_create_call {
	struct pgns *ns;
	uint64_t parent;
	const char *name;
	uint32_t mode, uid, gid;
	uint64_t rdev;
	const char *target;
	struct cat_inode *out;
	uint64_t *gen; /* pgns_create_gen's (NULL: not asked) */
	uint64_t client, token; /* NS_CREATE's (N9): taken by its first run */
};

static int pgns_create_in(const struct pgns_create_call *c)
{
	int rc = lease_fence(c->ns->lease);
	if (rc == 0)
		rc = pgns_lock_dir(c->ns, c->parent);
	if (rc)
		return rc;
	bool dir = S_ISDIR(c->mode);
	int64_t now = pgns_now_ns();
	char mode[24], uid[24], gid[24], nlink[24], size[24], rdev[24], t[24], parent[24], ino[24];
	char in_dir[24];
	const char *params[] = { PG_U64(mode, c->mode), PG_U64(uid, c->uid), PG_U64(gid, c->gid),
				 PG_U64(nlink, dir ? 2 : 1),
				 PG_U64(size, c->target ? strlen(c->target) : 0),
				 PG_U64(rdev, c->rdev), PG_I64(t, now), c->target,
				 PG_U64(in_dir, c->parent) };
	PGresult *res;
	rc = pgns_exec(c->ns, NS_INODE_INSERT, params, &res);
	if (rc)
		return rc;
	uint64_t new_ino = (uint64_t)pg_int(res, 0, 0);
	PQclear(res);
	const char *dparams[] = { PG_U64(parent, c->parent), c->name, PG_U64(ino, new_ino) };
	rc = pgns_exec(c->ns, NS_DIRENT_INSERT, dparams, NULL);
	if (rc)
		return rc; /* -EEXIST: the name is taken; the transaction rolls back */
	const char *tparams[] = { parent, t, dir ? "1" : "0" };
	rc = pgns_exec(c->ns, NS_PARENT_TOUCH, tparams, NULL);
	if (rc)
		return rc;
	struct pgns_attr_call get = { c->ns, new_ino, NULL, c->out };
	return pgns_getattr_body(c->ns->pg, &get);
}

int pgns_create_txn(struct pgns *ns, uint64_t parent, const char *name, uint32_t mode,
		    uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		    struct cat_inode *out)
{
	struct pgns_create_call c = { ns, parent, name, mode, uid, gid, rdev, target, out, NULL, 0, 0 };
	return pgns_create_in(&c);
}

/* N9: NS_CREATE, its own transaction (pg_read); its answer as
 * pgns_create_in's: -ESTALE, -ENOENT / -ENOTDIR (the parent), -EEXIST. */
static int pgns_create_body(struct pg *pg, void *arg)
{
	struct pgns_create_call *c = arg;
	if (c->token == 0) /* a run again keeps it: the statement finds its first run by it */
		c->token = pg_token(pg, &c->client);
	bool dir = S_ISDIR(c->mode);
	char node[24], parent[24], mode[24], uid[24], gid[24], nlink[24], size[24], rdev[24], t[24];
	char client[24], token[24];
	const char *params[] = { PG_U64(node, c->ns->lease->node_id), PG_U64(parent, c->parent),
				 c->name, PG_U64(mode, c->mode), PG_U64(uid, c->uid),
				 PG_U64(gid, c->gid), PG_U64(nlink, dir ? 2 : 1),
				 PG_U64(size, c->target ? strlen(c->target) : 0),
				 PG_U64(rdev, c->rdev), PG_I64(t, pgns_now_ns()), c->target,
				 dir ? "1" : "0", PG_U64(client, c->client), PG_U64(token, c->token) };
	PGresult *res;
	int rc = pgns_exec(c->ns, NS_CREATE, params, &res);
	if (rc)
		return rc; /* -EEXIST: the name is taken; the statement changed nothing */
	rc = lease_fenced(res);
	if (rc == 0 && (PQnfields(res) < 13 || pg_rows(res) != 1))
		rc = -EIO;
	if (rc == 0 && PQgetisnull(res, 0, 1))
		rc = -ENOENT;
	else if (rc == 0 && !S_ISDIR((mode_t)pg_int(res, 0, 1)))
		rc = -ENOTDIR;
	else if (rc == 0 && PQgetisnull(res, 0, 2))
		rc = -EIO;
	if (rc == 0)
		pgns_attr(res, 0, 2, c->out);
	if (rc == 0 && c->gen) /* the parent's, which it inherited (N11) */
		*c->gen = PQgetisnull(res, 0, 12) ? 0 : (uint64_t)pg_int(res, 0, 12);
	PQclear(res);
	return rc;
}

int pgns_name_check(const char *name)
{
	if (strlen(name) > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

int pgns_create_gen(struct pgns *ns, uint64_t parent, const char *name, uint32_t mode,
		    uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		    struct cat_inode *out, uint64_t *gen)
{
	int rc = pgns_name_check(name);
	if (rc)
		return rc;
	if (target && mode != (S_IFLNK | 0777))
		return -EINVAL;
	struct pgns_create_call c = { ns, parent, name, mode, uid, gid, rdev, target, out, gen, 0, 0 };
	return pg_read(ns->pg, pgns_create_body, &c); /* N9 */
}

int pgns_create(struct pgns *ns, uint64_t parent, const char *name, uint32_t mode, uint32_t uid,
		uint32_t gid, uint64_t rdev, const char *target, struct cat_inode *out)
{
	return pgns_create_gen(ns, parent, name, mode, uid, gid, rdev, target, out, NULL);
}

struct pgns_unlink_call {
	struct pgns *ns;
	uint64_t parent;
	const char *name;
	uint64_t *ino_out;
};

static int pgns_unlink_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_unlink_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc == 0)
		rc = pgns_lock_dir(c->ns, c->parent);
	if (rc)
		return rc;
	char parent[24], id[24], ino[24], t[24];
	const char *params[] = { PG_U64(parent, c->parent), c->name };
	PGresult *res;
	rc = pgns_exec(c->ns, NS_DIRENT_GET, params, &res);
	if (rc)
		return rc;
	if (pg_rows(res) != 1) {
		PQclear(res);
		return -ENOENT;
	}
	uint64_t dirent = (uint64_t)pg_int(res, 0, 0), victim = (uint64_t)pg_int(res, 0, 1);
	bool is_dir = S_ISDIR((mode_t)pg_int(res, 0, 2));
	PQclear(res);
	if (is_dir)
		return -EISDIR;
	const char *dparams[] = { PG_U64(id, dirent) };
	rc = pgns_exec(c->ns, NS_DIRENT_DELETE, dparams, NULL);
	int64_t now = pgns_now_ns();
	const char *nparams[] = { PG_U64(ino, victim), PG_I64(t, now) };
	if (rc == 0)
		rc = pgns_exec(c->ns, NS_NLINK_DROP, nparams, NULL);
	const char *tparams[] = { parent, t, "0" };
	if (rc == 0)
		rc = pgns_exec(c->ns, NS_PARENT_TOUCH, tparams, NULL);
	if (rc == 0 && c->ino_out)
		*c->ino_out = victim;
	return rc;
}

int pgns_unlink(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out)
{
	struct pgns_unlink_call c = { ns, parent, name, ino_out };
	return pg_txn(ns->pg, pgns_unlink_body, &c);
}

int pgns_unlink_txn(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out)
{
	struct pgns_unlink_call c = { ns, parent, name, ino_out };
	return pgns_unlink_body(ns->pg, &c);
}

/* ---- readdir ---- */

struct pgns_readdir_call {
	struct pgns *ns;
	uint64_t dir;
	uint64_t cookie;
	PGresult *rows;
	struct cat_inode self, up;
};

static int pgns_readdir_body(struct pg *pg, void *arg)
{
	struct pgns_readdir_call *c = arg;
	PQclear(c->rows);
	c->rows = NULL;
	struct pgns_attr_call get = { c->ns, c->dir, NULL, &c->self };
	int rc = pgns_getattr_body(pg, &get);
	if (rc)
		return rc;
	if (!S_ISDIR(c->self.mode))
		return -ENOTDIR;
	char ino[24], after[24];
	c->up = c->self;
	if (c->dir != CAT_ROOT_INO) {
		const char *params[] = { PG_U64(ino, c->dir) };
		PGresult *res;
		rc = pgns_exec(c->ns, NS_PARENT_OF, params, &res);
		if (rc)
			return rc;
		uint64_t up = pg_rows(res) == 1 ? (uint64_t)pg_int(res, 0, 0) : c->dir;
		PQclear(res);
		struct pgns_attr_call getup = { c->ns, up, NULL, &c->up };
		if (pgns_getattr_body(pg, &getup) != 0)
			c->up = c->self; /* a removed directory's ".." is itself */
	}
	/* cookies: 1 after ".", 2 after "..", id + 2 after entry id */
	uint64_t from = c->cookie > 2 ? c->cookie - 2 : 0;
	const char *params[] = { PG_U64(ino, c->dir), PG_U64(after, from) };
	return pgns_exec(c->ns, NS_READDIR, params, &c->rows);
}

int pgns_readdir(struct pgns *ns, uint64_t dir, uint64_t cookie, cat_dirent_fn fn, void *arg)
{
	for (;;) {
		struct pgns_readdir_call c = { .ns = ns, .dir = dir, .cookie = cookie };
		int rc = pg_read(ns->pg, pgns_readdir_body, &c); /* pg.h P5 */
		if (rc) {
			PQclear(c.rows);
			return rc;
		}
		int stop = 0;
		if (cookie == 0)
			stop = fn(arg, ".", &c.self, 1);
		if (!stop && cookie <= 1)
			stop = fn(arg, "..", &c.up, 2);
		int n = pg_rows(c.rows);
		for (int r = 0; !stop && r < n; r++) {
			struct cat_inode in;
			pgns_attr(c.rows, r, 2, &in);
			cookie = (uint64_t)pg_int(c.rows, r, 0) + 2;
			stop = fn(arg, PQgetvalue(c.rows, r, 1), &in, cookie);
		}
		PQclear(c.rows);
		if (stop || n < 256)
			return 0;
		if (cookie < 2)
			cookie = 2;
	}
}

/* ---- file contents ---- */

struct pgns_commit_call {
	struct pgns *ns;
	uint64_t ino, size;
	int64_t mtime_ns;
	const struct cat_extent *ext;
	size_t n;
	const struct pgns_chunk *chunks;
	size_t nchunks;
	/* the parameters, built once for every run of the body */
	struct pgns_buf ins_h, ins_p, ins_c, ins_s, e_off, e_len, e_hash, e_coff;
	char *uploaded;  /* pgns_file_publish: chunks already on BACKING, or NULL */
	const uint8_t (*up_hashes)[CAT_HASH_LEN]; /* the same, nup of them */
	size_t nup;
	bool *refused; /* out: up_hashes[i] was not marked (N7) */
	uint64_t client, token; /* N8: run alone, its pg_token (0: none yet) */
};

static int pgns_unhex(const char *hex, uint8_t out[CAT_HASH_LEN]);
static ssize_t pgns_hash_index(const uint8_t *first, size_t stride, size_t n,
			       const uint8_t hash[CAT_HASH_LEN]);

/* NS_UPLOADED_MANY's rows for hashes[0..n): marked[i] the row is on
 * BACKING now; refused[i] (if not NULL) it is live but not marked (N7). */
static int pgns_marks(PGresult *res, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		      bool *marked, bool *refused)
{
	memset(marked, 0, n * sizeof(*marked));
	if (refused)
		memset(refused, 0, n * sizeof(*refused));
	int rc = lease_fenced(res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		if (PQgetisnull(res, r, 1))
			continue; /* the row of a statement that found no live row */
		uint8_t h[CAT_HASH_LEN];
		rc = pgns_unhex(PQgetvalue(res, r, 1), h);
		ssize_t i = rc ? -1 : pgns_hash_index(hashes[0], CAT_HASH_LEN, n, h);
		bool ok = PQgetvalue(res, r, 2)[0] == 't';
		if (i >= 0 && ok)
			marked[i] = true;
		else if (i >= 0 && refused)
			refused[i] = true;
	}
	return rc;
}

/* NS_PUBLISH's answer: 0 (also for a run again that found its first run
 * committed, N8), or the first of -ESTALE (the node was swept), -EBUSY (a
 * named chunk is being reclaimed, N3), -EISDIR (ino is gone or not a
 * regular file) that held; then nothing was written. */
static int pgns_published(const PGresult *res)
{
	if (pg_rows(res) == 1 && PQnfields(res) >= 5 && !PQgetisnull(res, 0, 4) &&
	    PQgetvalue(res, 0, 4)[0] == 't')
		return 0; /* mine: published by this call's first run */
	int rc = lease_fenced(res);
	if (rc == 0 && (PQnfields(res) < 3 || PQgetisnull(res, 0, 1) || PQgetisnull(res, 0, 2)))
		rc = -EIO;
	if (rc == 0 && PQgetvalue(res, 0, 2)[0] != 't')
		rc = -EBUSY;
	if (rc == 0 && PQgetvalue(res, 0, 1)[0] != 't')
		rc = -EISDIR;
	return rc;
}

/* The publish (N8): one statement, NS_PUBLISH, then the markings of chunks
 * already on BACKING (NS_UPLOADED_MANY) if there are any. Alone it runs by
 * pg_read (its own transaction, L5); with the markings by pg_txn, where the
 * fence NS_PUBLISH took (its node's row FOR SHARE) holds to the COMMIT and
 * fences the markings too (L2), and both happen or neither. */
static int pgns_commit_body(struct pg *pg, void *arg)
{
	struct pgns_commit_call *c = arg;
	struct pgns *ns = c->ns;
	/* N8: alone, the call's token; a run again keeps it, and finds by it
	 * a first run that committed (pg.h P5) */
	if (!c->uploaded && c->token == 0)
		c->token = pg_token(pg, &c->client);
	char ino[24], node[24], size[24], mtime[24], now[24], client[24], token[24];
	const char *params[] = { PG_U64(ino, c->ino), PG_U64(node, ns->lease->node_id),
				 PG_U64(size, c->size), PG_I64(mtime, c->mtime_ns),
				 PG_I64(now, pgns_now_ns()), c->ins_h.s, c->ins_p.s, c->ins_c.s,
				 c->ins_s.s, c->e_off.s, c->e_len.s, c->e_hash.s, c->e_coff.s,
				 c->token ? PG_U64(client, c->client) : NULL,
				 c->token ? PG_U64(token, c->token) : NULL };
	PGresult *res = NULL;
	int rc = pgns_exec(ns, NS_PUBLISH, params, &res);
	if (rc == 0)
		rc = pgns_published(res);
	PQclear(res);
	const char *up[] = { c->uploaded, node };
	if (rc == 0 && c->uploaded) {
		bool *marked = calloc(c->nup, sizeof(*marked));
		res = NULL;
		rc = marked ? pgns_exec(ns, NS_UPLOADED_MANY, up, &res) : -ENOMEM;
		if (rc == 0)
			rc = pgns_marks(res, c->up_hashes, c->nup, marked, NULL);
		PQclear(res);
		for (size_t i = 0; rc == 0 && c->refused && i < c->nup; i++)
			c->refused[i] = !marked[i]; /* N7: each is live now, named by this commit */
		free(marked);
	}
	return rc;
}

static int pgns_hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, CAT_HASH_LEN);
}

/* Builds the array parameters; checks that each hash the extents name is
 * described in chunks. */
static int pgns_commit_params(struct pgns_commit_call *c)
{
	pgns_put(&c->ins_h, "{");
	pgns_put(&c->ins_p, "{");
	pgns_put(&c->ins_c, "{");
	pgns_put(&c->ins_s, "{");
	for (size_t i = 0; i < c->nchunks; i++) {
		const char *sep = i ? "," : "";
		pgns_put(&c->ins_h, "%s", sep);
		pgns_put_hex(&c->ins_h, c->chunks[i].hash);
		pgns_put(&c->ins_p, "%s%" PRIu64, sep, c->chunks[i].plain_len);
		pgns_put(&c->ins_c, "%s%u", sep, (unsigned)c->chunks[i].codec);
		pgns_put(&c->ins_s, "%s%" PRIu64, sep, c->chunks[i].stored_len);
	}
	pgns_put(&c->ins_h, "}");
	pgns_put(&c->ins_p, "}");
	pgns_put(&c->ins_c, "}");
	pgns_put(&c->ins_s, "}");

	uint8_t(*hashes)[CAT_HASH_LEN] = calloc(c->n ? c->n : 1, CAT_HASH_LEN);
	if (!hashes)
		return -ENOMEM;
	pgns_put(&c->e_off, "{");
	pgns_put(&c->e_len, "{");
	pgns_put(&c->e_hash, "{");
	pgns_put(&c->e_coff, "{");
	for (size_t i = 0; i < c->n; i++) {
		const struct cat_extent *e = &c->ext[i];
		const char *sep = i ? "," : "";
		pgns_put(&c->e_off, "%s%" PRIu64, sep, e->off);
		pgns_put(&c->e_len, "%s%" PRIu64, sep, e->len);
		pgns_put(&c->e_hash, "%s", sep);
		pgns_put_hex(&c->e_hash, e->hash);
		pgns_put(&c->e_coff, "%s%" PRIu64, sep, e->chunk_off);
		memcpy(hashes[i], e->hash, CAT_HASH_LEN);
	}
	pgns_put(&c->e_off, "}");
	pgns_put(&c->e_len, "}");
	pgns_put(&c->e_hash, "}");
	pgns_put(&c->e_coff, "}");

	qsort(hashes, c->n, CAT_HASH_LEN, pgns_hash_cmp);
	int rc = 0;
	for (size_t i = 0; i < c->n && rc == 0; i++) {
		if (i > 0 && memcmp(hashes[i], hashes[i - 1], CAT_HASH_LEN) == 0)
			continue;
		bool described = false;
		for (size_t j = 0; j < c->nchunks && !described; j++)
			described = memcmp(c->chunks[j].hash, hashes[i], CAT_HASH_LEN) == 0;
		if (!described)
			rc = -EINVAL;
	}
	free(hashes);
	bool failed = c->ins_h.failed || c->ins_p.failed || c->ins_c.failed || c->ins_s.failed ||
		      c->e_off.failed || c->e_len.failed || c->e_hash.failed ||
		      c->e_coff.failed;
	return failed ? -ENOMEM : rc;
}

int pgns_file_publish(struct pgns *ns, uint64_t ino, uint64_t size, int64_t mtime_ns,
		      const struct cat_extent *ext, size_t n, const struct pgns_chunk *chunks,
		      size_t nchunks, const uint8_t (*uploaded)[CAT_HASH_LEN], size_t nuploaded,
		      bool *refused)
{
	struct pgns_commit_call c = { .ns = ns, .ino = ino, .size = size, .mtime_ns = mtime_ns,
				      .ext = ext, .n = n, .chunks = chunks, .nchunks = nchunks,
				      .up_hashes = uploaded, .nup = nuploaded, .refused = refused };
	int rc = pgns_commit_params(&c);
	if (rc == 0 && nuploaded > 0)
		rc = pgns_hex_list(uploaded[0], CAT_HASH_LEN, nuploaded, &c.uploaded);
	if (rc == 0) /* N8 */
		rc = c.uploaded ? pg_txn(ns->pg, pgns_commit_body, &c)
				: pg_read(ns->pg, pgns_commit_body, &c);
	struct pgns_buf *bufs[] = { &c.ins_h, &c.ins_p, &c.ins_c, &c.ins_s,
				    &c.e_off, &c.e_len, &c.e_hash, &c.e_coff };
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		pgns_buf_free(bufs[i]);
	free(c.uploaded);
	return rc;
}

int pgns_file_commit(struct pgns *ns, uint64_t ino, uint64_t size, int64_t mtime_ns,
		     const struct cat_extent *ext, size_t n, const struct pgns_chunk *chunks,
		     size_t nchunks)
{
	return pgns_file_publish(ns, ino, size, mtime_ns, ext, n, chunks, nchunks, NULL, 0, NULL);
}

struct pgns_extents_call {
	struct pgns *ns;
	uint64_t ino, off;
	struct cat_extent *out;
	int max, got;
};

static int pgns_extents_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_extents_call *c = arg;
	char ino[24], off[24], max[24];
	const char *params[] = { PG_U64(ino, c->ino), PG_U64(off, c->off), PG_U64(max, c->max) };
	PGresult *res;
	int rc = pgns_exec(c->ns, NS_EXTENTS, params, &res);
	if (rc)
		return rc;
	c->got = 0;
	for (int r = 0; r < pg_rows(res) && rc == 0; r++) {
		struct cat_extent *e = &c->out[c->got++];
		e->off = (uint64_t)pg_int(res, r, 0);
		e->len = (uint64_t)pg_int(res, r, 1);
		e->chunk_off = (uint64_t)pg_int(res, r, 2);
		e->chunk_len = (uint64_t)pg_int(res, r, 3);
		rc = pgns_unhex(PQgetvalue(res, r, 4), e->hash);
	}
	PQclear(res);
	return rc;
}

int pgns_extents(struct pgns *ns, uint64_t ino, uint64_t off, struct cat_extent *out, int max)
{
	struct pgns_extents_call c = { ns, ino, off, out, max, 0 };
	int rc = pg_read(ns->pg, pgns_extents_body, &c); /* pg.h P5 */
	return rc ? rc : c.got;
}

/* ---- one-statement calls ---- */

struct pgns_one_call {
	struct pgns *ns;
	int stmt;
	const char *const *params;
	PGresult *res;
};

static int pgns_one_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_one_call *c = arg;
	PQclear(c->res);
	c->res = NULL;
	return pgns_exec(c->ns, c->stmt, c->params, &c->res);
}

/* Runs one statement as its own transaction (pg.h P5: one round trip); *res
 * (if not NULL) keeps its rows. fenced: the statement carries the node's
 * fence (lease.h L5), and a node swept gets -ESTALE, its statement having
 * written nothing. */
static int pgns_one(struct pgns *ns, int stmt, bool fenced, const char *const *params,
		    PGresult **res)
{
	struct pgns_one_call c = { ns, stmt, params, NULL };
	int rc = pg_read(ns->pg, pgns_one_body, &c);
	if (rc == 0 && fenced)
		rc = lease_fenced(c.res);
	if (rc == 0 && res)
		*res = c.res;
	else
		PQclear(c.res);
	return rc;
}

int pgns_chunk_uploaded(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN])
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	char node[24];
	const char *params[] = { hex, PG_U64(node, ns->lease->node_id) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_UPLOADED, true, params, &res);
	if (rc == 0 && pg_int(res, 0, 1) != 1)
		rc = -ENOENT; /* no such chunk, or it is being reclaimed */
	PQclear(res);
	return rc;
}

/* Finds hash among the first n entries of rows laid out stride bytes apart. */
static ssize_t pgns_hash_index(const uint8_t *first, size_t stride, size_t n,
			       const uint8_t hash[CAT_HASH_LEN])
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(first + i * stride, hash, CAT_HASH_LEN) == 0)
			return (ssize_t)i;
	return -1;
}

int pgns_chunks_uploaded(struct pgns *ns, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
			 bool *marked, bool *refused)
{
	memset(marked, 0, n * sizeof(*marked));
	if (refused)
		memset(refused, 0, n * sizeof(*refused));
	if (n == 0)
		return 0;
	char *list = NULL;
	int rc = pgns_hex_list(hashes[0], CAT_HASH_LEN, n, &list);
	if (rc)
		return rc;
	char node[24];
	const char *params[] = { list, PG_U64(node, ns->lease->node_id) };
	PGresult *res = NULL;
	rc = pgns_one(ns, NS_UPLOADED_MANY, true, params, &res);
	if (rc == 0)
		rc = pgns_marks(res, hashes, n, marked, refused);
	PQclear(res);
	free(list);
	return rc;
}

int pgns_chunks_info(struct pgns *ns, struct pgns_chunk_info *io, size_t n)
{
	for (size_t i = 0; i < n; i++)
		io[i].found = io[i].uploaded = io[i].live = false;
	if (n == 0)
		return 0;
	char *list = NULL;
	int rc = pgns_hex_list(io[0].chunk.hash, sizeof(*io), n, &list);
	if (rc)
		return rc;
	const char *params[] = { list };
	PGresult *res = NULL;
	rc = pgns_one(ns, NS_CHUNKS_INFO, false, params, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		uint8_t h[CAT_HASH_LEN];
		rc = pgns_unhex(PQgetvalue(res, r, 0), h);
		ssize_t i = rc ? -1 : pgns_hash_index(io[0].chunk.hash, sizeof(*io), n, h);
		if (i < 0)
			continue;
		io[i].found = true;
		io[i].chunk.plain_len = (uint64_t)pg_int(res, r, 1);
		io[i].chunk.codec = (uint8_t)pg_int(res, r, 2);
		io[i].chunk.stored_len = (uint64_t)pg_int(res, r, 3);
		io[i].uploaded = PQgetvalue(res, r, 4)[0] == 't';
		io[i].live = PQgetvalue(res, r, 5)[0] == 't';
	}
	PQclear(res);
	free(list);
	return rc;
}

/* ---- a writer's pins (N6) ---- */

struct pgns_pin_call {
	struct pgns *ns;
	const char *const *params;
	struct pgns_chunk_info *io;
	size_t n;
	const char *list;
};

static int pgns_pin_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_pin_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc == 0)
		rc = pgns_exec(c->ns, NS_PIN, c->params, NULL);
	PGresult *res = NULL;
	const char *info_params[] = { c->list };
	if (rc == 0)
		rc = pgns_exec(c->ns, NS_CHUNKS_INFO, info_params, &res);
	for (size_t i = 0; rc == 0 && i < c->n; i++)
		c->io[i].found = c->io[i].uploaded = c->io[i].live = false;
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		uint8_t h[CAT_HASH_LEN];
		rc = pgns_unhex(PQgetvalue(res, r, 0), h);
		ssize_t i = rc ? -1 : pgns_hash_index(c->io[0].chunk.hash, sizeof(*c->io), c->n, h);
		if (i < 0)
			continue;
		struct pgns_chunk_info *o = &c->io[i];
		o->found = true;
		o->chunk.plain_len = (uint64_t)pg_int(res, r, 1);
		o->chunk.codec = (uint8_t)pg_int(res, r, 2);
		o->chunk.stored_len = (uint64_t)pg_int(res, r, 3);
		o->uploaded = PQgetvalue(res, r, 4)[0] == 't';
		o->live = PQgetvalue(res, r, 5)[0] == 't';
	}
	PQclear(res);
	return rc;
}

int pgns_pin(struct pgns *ns, uint64_t ino, struct pgns_chunk_info *io, size_t n)
{
	for (size_t i = 0; i < n; i++)
		io[i].found = io[i].uploaded = io[i].live = false;
	if (n == 0)
		return 0;
	char *list = NULL;
	int rc = pgns_hex_list(io[0].chunk.hash, sizeof(*io), n, &list);
	if (rc)
		return rc;
	char node[24], i[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(i, ino), list };
	struct pgns_pin_call c = { ns, params, io, n, list };
	rc = pg_txn(ns->pg, pgns_pin_body, &c);
	free(list);
	return rc;
}

int pgns_unpin(struct pgns *ns, uint64_t ino)
{
	char node[24], i[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(i, ino) };
	return pgns_one(ns, NS_UNPIN, true, params, NULL);
}

int pgns_unpin_claims(struct pgns *ns, uint64_t ino, const uint8_t (*hashes)[CAT_HASH_LEN],
		      size_t n)
{
	if (n == 0)
		return pgns_unpin(ns, ino);
	char *list = NULL;
	int rc = pgns_hex_list(hashes[0], CAT_HASH_LEN, n, &list);
	if (rc)
		return rc;
	char node[24], i[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(i, ino), list };
	rc = pgns_one(ns, NS_UNPIN_CLAIMS, true, params, NULL);
	free(list);
	return rc;
}

/* N14: releases (deletes, or empties, as the release that left them would
 * have) up to PGNS_ORPHANS_MAX inodes a release left to their last holder
 * that no live node has open any more. */
#define PGNS_ORPHANS_MAX 4096
static int pgns_release_orphans(struct pgns *ns)
{
	char max[24];
	const char *params[] = { PG_U64(max, PGNS_ORPHANS_MAX) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_ORPHANS, false, params, &res);
	int n = rc == 0 ? pg_rows(res) : 0;
	uint64_t *inos = n > 0 ? calloc((size_t)n, sizeof(*inos)) : NULL;
	size_t ndel = 0, nempty = n;
	struct pgns_buf all = { 0 };
	if (n > 0 && !inos)
		rc = -ENOMEM;
	pgns_put(&all, "{");
	for (int r = 0; inos && r < n; r++) { /* deleted first, emptied from the end */
		uint64_t ino = strtoull(PQgetvalue(res, r, 0), NULL, 10);
		if (PQgetvalue(res, r, 1)[0] == 't')
			inos[ndel++] = ino;
		else
			inos[--nempty] = ino;
		pgns_put(&all, "%s%" PRIu64, r ? "," : "", ino);
	}
	pgns_put(&all, "}");
	PQclear(res);
	if (rc == 0 && all.failed)
		rc = -ENOMEM;
	if (rc == 0 && ndel > 0)
		rc = pgns_inodes_release(ns, inos, ndel);
	if (rc == 0 && nempty < (size_t)n)
		rc = pgns_inodes_drop_data(ns, inos + nempty, (size_t)n - nempty);
	const char *dparams[] = { all.s };
	if (rc == 0 && n > 0)
		rc = pgns_one(ns, NS_ORPHANS_DONE, false, dparams, NULL);
	if (rc == 0 && n > 0)
		log_debug("released %d unlinked inodes no live node has open any more", n);
	pgns_buf_free(&all);
	free(inos);
	return rc;
}

int pgns_unpin_lost(struct pgns *ns)
{
	char node[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id) };
	int rc = pgns_one(ns, NS_UNPIN_LOST, true, params, NULL);
	/* N14's orphans are a side job of this duty: failing, they wait for
	 * its next pass, and the reclaim turn that called it goes on */
	int orc = rc == 0 ? pgns_release_orphans(ns) : 0;
	if (orc != 0)
		log_warn("releasing unlinked inodes no live node has open: %s (the next pass "
			 "tries again)", strerror(-orc));
	return rc;
}

int pgns_opened(struct pgns *ns, uint64_t ino, bool open, bool *release)
{
	char node[24], i[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(i, ino) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, open ? NS_OPEN_ADD : NS_OPEN_DROP, true, params, &res);
	bool yes = rc == 0 && pg_rows(res) == 1 && PQgetvalue(res, 0, 1)[0] == 't';
	PQclear(res);
	if (rc == 0 && open && !yes)
		rc = -ENOENT;
	if (release)
		*release = rc == 0 && !open && yes;
	return rc;
}

/* catalog.h's cat_opened, here rather than beside cat_writing (N14). */
int cat_opened(struct cat *cat, uint64_t ino, bool open, bool *release)
{
	if (release)
		*release = false;
	if (!cat_is_shared(cat))
		return 0;
	return pgns_opened(cat_shared_ns(cat), ino, open, release);
}

int pgns_file_uploaded(struct pgns *ns, uint64_t ino, bool *uploaded)
{
	char i[24];
	const char *params[] = { PG_U64(i, ino) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_FILE_UNUPLOADED, false, params, &res);
	if (rc == 0)
		*uploaded = pg_rows(res) == 0;
	PQclear(res);
	return rc;
}

/* Row r of NS_CHUNK_GET's columns, starting at column c0 (NS_CLAIM_MANY's
 * after its hash). */
static void pgns_chunk_row_at(const PGresult *res, int r, int c0, struct pgns_chunk_row *out)
{
	out->refcount = (uint64_t)pg_int(res, r, c0);
	out->uploaded = PQgetvalue(res, r, c0 + 1)[0] == 't';
	out->holder = (uint64_t)pg_int(res, r, c0 + 2);
	snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, r, c0 + 3));
	out->plain_len = (uint64_t)pg_int(res, r, c0 + 4);
	out->codec = (uint8_t)pg_int(res, r, c0 + 5);
	out->stored_len = (uint64_t)pg_int(res, r, c0 + 6);
}

static void pgns_chunk_row_of(const PGresult *res, struct pgns_chunk_row *out)
{
	pgns_chunk_row_at(res, 0, 0, out);
}

/* hash's row by stmt (NS_CHUNK_GET's columns first) into *out; *res, the
 * answer, is the caller's to clear. */
static int pgns_chunk_one(struct pgns *ns, int stmt, const uint8_t hash[CAT_HASH_LEN],
			  struct pgns_chunk_row *out, PGresult **res)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	const char *params[] = { hex };
	int rc = pgns_one(ns, stmt, false, params, res);
	if (rc == 0 && pg_rows(*res) != 1)
		rc = -ENOENT;
	if (rc == 0)
		pgns_chunk_row_of(*res, out);
	return rc;
}

int pgns_chunk_get(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN], struct pgns_chunk_row *out)
{
	PGresult *res = NULL;
	int rc = pgns_chunk_one(ns, NS_CHUNK_GET, hash, out, &res);
	PQclear(res);
	return rc;
}

int pgns_chunk_get_holder(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN],
			  struct pgns_chunk_row *out, bool *holder_live)
{
	PGresult *res = NULL;
	int rc = pgns_chunk_one(ns, NS_CHUNK_GET_HOLDER, hash, out, &res);
	if (rc == 0)
		*holder_live = PQgetvalue(res, 0, 7)[0] == 't';
	PQclear(res);
	return rc;
}

struct pgns_release_call {
	struct pgns *ns;
	uint64_t ino;
};

static int pgns_release_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_release_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc)
		return rc;
	char ino[24], me[24], list[32];
	snprintf(list, sizeof(list), "{%" PRIu64 "}", c->ino);
	const char *lparams[] = { list };
	const char *params[] = { PG_U64(ino, c->ino), "0" };
	const char *dparams[] = { ino, PG_U64(me, c->ns->lease->node_id) };
	PGresult *res;
	rc = pgns_exec(c->ns, NS_REL_LOCK, lparams, NULL); /* N14 */
	if (rc)
		return rc;
	rc = pgns_exec(c->ns, NS_INODE_DELETE, dparams, &res);
	if (rc)
		return rc;
	bool deleted = pg_rows(res) == 1;
	PQclear(res);
	if (!deleted)
		return 0; /* still linked, gone already, or open on another node (N14: recorded) */
	rc = pgns_exec(c->ns, NS_REFS_DROP, params, NULL); /* N1 */
	if (rc == 0)
		rc = pgns_exec(c->ns, NS_EXTENTS_DELETE, params, NULL);
	if (rc == 0)
		rc = pgns_exec(c->ns, NS_REL_ROWS_DELETE, lparams, NULL);
	return rc;
}

int pgns_inode_release(struct pgns *ns, uint64_t ino)
{
	struct pgns_release_call c = { ns, ino };
	return pg_txn(ns->pg, pgns_release_body, &c);
}

/* NS_CLAIM_MANY's two lists: the hashes a writer names ($1), the others ($3). */
static int pgns_claim_lists(const uint8_t (*hashes)[CAT_HASH_LEN], const bool *writer, size_t n,
			    struct pgns_buf *w, struct pgns_buf *o)
{
	pgns_put(w, "{");
	pgns_put(o, "{");
	bool wfirst = true, ofirst = true;
	for (size_t i = 0; i < n; i++) {
		struct pgns_buf *b = writer[i] ? w : o;
		bool *first = writer[i] ? &wfirst : &ofirst;
		pgns_put(b, "%s", *first ? "" : ",");
		pgns_put_hex(b, hashes[i]);
		*first = false;
	}
	pgns_put(w, "}");
	pgns_put(o, "}");
	return w->failed || o->failed ? -ENOMEM : 0;
}

int pgns_upload_claims(struct pgns *ns, const uint8_t (*hashes)[CAT_HASH_LEN], const bool *writer,
		       size_t n, struct pgns_claim *out)
{
	for (size_t i = 0; i < n; i++)
		out[i].found = false;
	if (n == 0)
		return 0;
	struct pgns_buf w = { 0 }, o = { 0 };
	int rc = pgns_claim_lists(hashes, writer, n, &w, &o);
	char node[24];
	const char *params[] = { w.s, PG_U64(node, ns->lease->node_id), o.s };
	PGresult *res = NULL;
	if (rc == 0) {
		__atomic_add_fetch(&ns->claims, 1, __ATOMIC_RELAXED);
		rc = pgns_one(ns, NS_CLAIM_MANY, false, params, &res);
	}
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		uint8_t h[CAT_HASH_LEN];
		rc = pgns_unhex(PQgetvalue(res, r, 0), h);
		ssize_t i = rc ? -1 : pgns_hash_index(hashes[0], CAT_HASH_LEN, n, h);
		for (; i >= 0 && (size_t)i < n; i++) /* every entry of the hash */
			if (memcmp(hashes[i], h, CAT_HASH_LEN) == 0) {
				out[i].found = true;
				pgns_chunk_row_at(res, r, 1, &out[i].row);
			}
	}
	PQclear(res);
	pgns_buf_free(&w);
	pgns_buf_free(&o);
	return rc;
}

int pgns_upload_claim(struct pgns *ns, const uint8_t hash[CAT_HASH_LEN], bool writer,
		      struct pgns_chunk_row *out)
{
	struct pgns_claim c;
	int rc = pgns_upload_claims(ns, (const uint8_t(*)[CAT_HASH_LEN])hash, &writer, 1, &c);
	if (rc == 0 && !c.found)
		rc = -ENOENT;
	if (rc == 0)
		*out = c.row;
	return rc;
}

/* ---- reclaim ---- */

int pgns_reclaim_begin(struct pgns *ns, int64_t horizon_ns, struct pgns_reclaim *out, size_t max,
		       size_t *n)
{
	*n = 0;
	char node[24], lim[24], h[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(lim, max),
				 PG_I64(h, horizon_ns) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_RECLAIM_BEGIN, true, params, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res) && *n < max; r++) {
		if (PQgetisnull(res, r, 1))
			continue; /* nothing to reclaim: the fence's row alone */
		rc = pgns_unhex(PQgetvalue(res, r, 1), out[*n].hash);
		out[*n].uploaded = PQgetvalue(res, r, 2)[0] == 't';
		(*n)++;
	}
	PQclear(res);
	return rc;
}

int pgns_reclaim_end(struct pgns *ns, const struct pgns_reclaim *done, size_t n)
{
	char *list = NULL;
	int rc = pgns_hex_list(n ? done[0].hash : NULL, sizeof(*done), n, &list);
	if (rc)
		return rc;
	char node[24];
	const char *params[] = { list, PG_U64(node, ns->lease->node_id) };
	rc = pgns_one(ns, NS_RECLAIM_END, true, params, NULL);
	free(list);
	return rc;
}

int pgns_reclaim_stamp(struct pgns *ns, int64_t *horizon_ns, struct pgns_ended_gen *out,
		       size_t max, size_t *n)
{
	*n = 0;
	*horizon_ns = 0;
	char node[24], lim[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(lim, max) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_RECLAIM_STAMP, true, params, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		*horizon_ns = pg_int(res, r, 1);
		if (PQgetisnull(res, r, 2) || *n == max)
			continue; /* no ended generation to clear: the fence's row alone */
		out[*n].id = (uint64_t)pg_int(res, r, 2);
		out[*n].version = (uint32_t)pg_int(res, r, 3);
		out[*n].kept = PQgetvalue(res, r, 4)[0] == 't';
		(*n)++;
	}
	PQclear(res);
	return rc;
}

int pgns_reclaim_gens_done(struct pgns *ns, const uint64_t *ids, size_t n)
{
	if (n == 0)
		return 0;
	char *list = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&list, &len);
	if (f == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%" PRIu64, i ? "," : "{", ids[i]);
	fputs("}", f);
	if (fclose(f) != 0) {
		free(list);
		return -ENOMEM;
	}
	char node[24];
	const char *params[] = { list, PG_U64(node, ns->lease->node_id) };
	int rc = pgns_one(ns, NS_RECLAIM_GENS_DONE, true, params, NULL);
	free(list);
	return rc;
}

int pgns_tree_horizon_set(struct pgns *ns, int64_t horizon_ns)
{
	char h[24];
	const char *params[] = { PG_I64(h, horizon_ns) };
	return pgns_one(ns, NS_TREE_HORIZON, false, params, NULL);
}

/* ---- check ---- */

int pgns_check(struct pgns *ns, int *violations)
{
	*violations = 0;
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_CHECK_REFS, false, NULL, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		log_error("catalog %s: check: chunk %s has refcount %s but %s references (N1)",
			  pg_name(ns->pg), PQgetvalue(res, r, 0), PQgetvalue(res, r, 1),
			  PQgetvalue(res, r, 2));
		(*violations)++;
	}
	PQclear(res);
	res = NULL;
	if (rc == 0)
		rc = pgns_one(ns, NS_CHECK_LIVE, false, NULL, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		log_error("catalog %s: check: extent %s@%s names a chunk that is missing or being"
			  " reclaimed (N2)",
			  pg_name(ns->pg), PQgetvalue(res, r, 0), PQgetvalue(res, r, 1));
		(*violations)++;
	}
	PQclear(res);
	res = NULL;
	if (rc == 0)
		rc = pgns_one(ns, NS_CHECK_STAMPS, false, NULL, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		log_error("catalog %s: check: chunk %s was seen free by the reclaim but has refcount"
			  " %s (N12)", pg_name(ns->pg), PQgetvalue(res, r, 0), PQgetvalue(res, r, 1));
		(*violations)++;
	}
	PQclear(res);
	return rc;
}

/* ---- rmdir, link, rename ---- */

/* The entry parent/name: its id and its inode's attributes. */
static int pgns_dirent(struct pgns *ns, uint64_t parent, const char *name, uint64_t *id,
		       struct cat_inode *out)
{
	char p[24];
	const char *params[] = { PG_U64(p, parent), name };
	PGresult *res;
	int rc = pgns_exec(ns, NS_DIRENT_GET, params, &res);
	if (rc)
		return rc;
	if (pg_rows(res) != 1) {
		PQclear(res);
		return -ENOENT;
	}
	*id = (uint64_t)pg_int(res, 0, 0);
	uint64_t ino = (uint64_t)pg_int(res, 0, 1);
	PQclear(res);
	struct pgns_attr_call get = { ns, ino, NULL, out };
	return pgns_getattr_body(ns->pg, &get);
}

static int pgns_dir_empty(struct pgns *ns, uint64_t dir)
{
	char d[24];
	const char *params[] = { PG_U64(d, dir) };
	PGresult *res;
	int rc = pgns_exec(ns, NS_DIR_USED, params, &res);
	if (rc == 0 && pg_rows(res) > 0)
		rc = -ENOTEMPTY;
	PQclear(res);
	return rc;
}

static int pgns_nlink_add(struct pgns *ns, uint64_t ino, int64_t delta, int64_t now)
{
	char i[24], d[24], t[24];
	const char *params[] = { PG_U64(i, ino), PG_I64(d, delta), PG_I64(t, now) };
	return pgns_exec(ns, NS_NLINK_ADD, params, NULL);
}

/* A directory's entries changed: mtime and ctime now, nlink by delta. */
static int pgns_dir_touch(struct pgns *ns, uint64_t dir, int64_t delta, int64_t now)
{
	char i[24], t[24], d[24];
	const char *params[] = { PG_U64(i, dir), PG_I64(t, now), PG_I64(d, delta) };
	return pgns_exec(ns, NS_PARENT_TOUCH, params, NULL);
}

/* -EINVAL if directory dir is within (or is) directory top. */
static int pgns_not_within(struct pgns *ns, uint64_t dir, uint64_t top)
{
	char d[24], t[24];
	const char *params[] = { PG_U64(d, dir), PG_U64(t, top) };
	PGresult *res;
	int rc = pgns_exec(ns, NS_WITHIN, params, &res);
	if (rc == 0 && pg_rows(res) > 0)
		rc = -EINVAL;
	PQclear(res);
	return rc;
}

/* Locks two directories in inode order (so that two renames between the
 * same directories do not deadlock) and checks both are directories. */
static int pgns_lock_dirs(struct pgns *ns, uint64_t a, uint64_t b)
{
	uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
	int rc = pgns_lock_dir(ns, lo);
	if (rc == 0 && hi != lo)
		rc = pgns_lock_dir(ns, hi);
	return rc;
}

struct pgns_name_call {
	struct pgns *ns;
	uint64_t parent, newparent, ino;
	const char *name, *newname;
	unsigned flags;
	uint64_t *ino_out;
	struct cat_inode *out;
};

static int pgns_rmdir_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_name_call *c = arg;
	struct pgns *ns = c->ns;
	int rc = lease_fence(ns->lease);
	if (rc == 0)
		rc = pgns_lock_dir(ns, c->parent);
	uint64_t id = 0;
	struct cat_inode victim;
	if (rc == 0)
		rc = pgns_dirent(ns, c->parent, c->name, &id, &victim);
	if (rc)
		return rc;
	if (!S_ISDIR(victim.mode))
		return -ENOTDIR;
	rc = pgns_lock_dir(ns, victim.ino);
	if (rc == 0)
		rc = pgns_dir_empty(ns, victim.ino);
	char d[24];
	const char *params[] = { PG_U64(d, id) };
	int64_t now = pgns_now_ns();
	if (rc == 0)
		rc = pgns_exec(ns, NS_DIRENT_DELETE, params, NULL);
	if (rc == 0)
		rc = pgns_nlink_add(ns, victim.ino, -(int64_t)victim.nlink, now);
	if (rc == 0)
		rc = pgns_dir_touch(ns, c->parent, -1, now);
	if (rc == 0 && c->ino_out)
		*c->ino_out = victim.ino;
	return rc;
}

int pgns_rmdir(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out)
{
	if (strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	if (strcmp(name, ".") == 0)
		return -EINVAL;
	struct pgns_name_call c = { .ns = ns, .parent = parent, .name = name, .ino_out = ino_out };
	return pg_txn(ns->pg, pgns_rmdir_body, &c);
}

int pgns_rmdir_txn(struct pgns *ns, uint64_t parent, const char *name, uint64_t *ino_out)
{
	if (strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	if (strcmp(name, ".") == 0)
		return -EINVAL;
	struct pgns_name_call c = { .ns = ns, .parent = parent, .name = name, .ino_out = ino_out };
	return pgns_rmdir_body(ns->pg, &c);
}

static int pgns_link_body(struct pg *pg, void *arg)
{
	struct pgns_name_call *c = arg;
	struct pgns *ns = c->ns;
	int rc = lease_fence(ns->lease);
	if (rc == 0)
		rc = pgns_lock_dir(ns, c->newparent);
	struct pgns_attr_call get = { ns, c->ino, NULL, c->out };
	if (rc == 0)
		rc = pgns_getattr_body(pg, &get);
	if (rc)
		return rc;
	if (S_ISDIR(c->out->mode))
		return -EPERM;
	if (c->out->nlink == 0)
		return -ENOENT; /* like link(2) of an unlinked file */
	char p[24], i[24];
	const char *params[] = { PG_U64(p, c->newparent), c->newname, PG_U64(i, c->ino) };
	int64_t now = pgns_now_ns();
	rc = pgns_exec(ns, NS_DIRENT_INSERT, params, NULL);
	if (rc == 0)
		rc = pgns_nlink_add(ns, c->ino, 1, now);
	if (rc == 0)
		rc = pgns_dir_touch(ns, c->newparent, 0, now);
	if (rc == 0)
		rc = pgns_getattr_body(pg, &get);
	return rc;
}

int pgns_link(struct pgns *ns, uint64_t ino, uint64_t newparent, const char *newname,
	      struct cat_inode *out)
{
	if (!*newname || strlen(newname) > CAT_NAME_MAX || strchr(newname, '/') ||
	    !strcmp(newname, ".") || !strcmp(newname, ".."))
		return strlen(newname) > CAT_NAME_MAX ? -ENAMETOOLONG : -EINVAL;
	struct pgns_name_call c = { .ns = ns, .ino = ino, .newparent = newparent,
				    .newname = newname, .out = out };
	return pg_txn(ns->pg, pgns_link_body, &c);
}

/* Directories' nlink of a rename: -1 for one leaving, +1 for one arriving. */
static int pgns_rename_touch(struct pgns *ns, uint64_t parent, int pdelta, uint64_t newparent,
			     int npdelta, int64_t now)
{
	if (parent == newparent)
		return pgns_dir_touch(ns, parent, pdelta + npdelta, now);
	int rc = pgns_dir_touch(ns, parent, pdelta, now);
	return rc ? rc : pgns_dir_touch(ns, newparent, npdelta, now);
}

static int pgns_exchange(struct pgns *ns, const struct pgns_name_call *c, uint64_t src_id,
			 const struct cat_inode *src, uint64_t dst_id, const struct cat_inode *dst)
{
	char a[24], b[24];
	int64_t now = pgns_now_ns();
	const char *p1[] = { PG_U64(a, src_id), PG_U64(b, dst->ino) };
	int rc = pgns_exec(ns, NS_DIRENT_SET_INO, p1, NULL);
	const char *p2[] = { PG_U64(a, dst_id), PG_U64(b, src->ino) };
	if (rc == 0)
		rc = pgns_exec(ns, NS_DIRENT_SET_INO, p2, NULL);
	if (rc == 0)
		rc = pgns_nlink_add(ns, src->ino, 0, now);
	if (rc == 0)
		rc = pgns_nlink_add(ns, dst->ino, 0, now);
	int src_dir = S_ISDIR(src->mode), dst_dir = S_ISDIR(dst->mode);
	if (rc == 0)
		rc = c->parent != c->newparent
			     ? pgns_rename_touch(ns, c->parent, dst_dir - src_dir, c->newparent,
						 src_dir - dst_dir, now)
			     : pgns_dir_touch(ns, c->parent, 0, now);
	return rc;
}

/* N13: the generations whose manifests the calling thread's last rename
 * made stale; a run of the rename's body starts it anew (pg.h runs a body
 * again after a failed attempt), pgns_series_moved_take hands it over. */
static __thread struct pgns_moved {
	uint64_t *ids;
	uint32_t *versions;
	size_t n, cap;
} pgns_moved;

static void pgns_moved_clear(void)
{
	free(pgns_moved.ids);
	free(pgns_moved.versions);
	memset(&pgns_moved, 0, sizeof(pgns_moved));
}

/* N13 for directory dir, just renamed (in the rename's transaction). */
static int pgns_series_moved(struct pgns *ns, uint64_t dir)
{
	char d[24];
	const char *params[] = { PG_U64(d, dir) };
	PGresult *res = NULL;
	int rc = pgns_exec(ns, NS_SERIES_MOVED, params, &res);
	int rows = rc == 0 ? pg_rows(res) : 0;
	size_t need = pgns_moved.n + (size_t)rows;
	if (rc == 0 && need > pgns_moved.cap) {
		uint64_t *ids = realloc(pgns_moved.ids, need * sizeof(*ids));
		if (ids)
			pgns_moved.ids = ids;
		uint32_t *versions = ids ? realloc(pgns_moved.versions, need * sizeof(*versions))
					 : NULL;
		if (versions)
			pgns_moved.versions = versions;
		rc = ids && versions ? 0 : -ENOMEM;
		if (rc == 0)
			pgns_moved.cap = need;
	}
	for (int r = 0; rc == 0 && r < rows; r++) {
		if (pg_int(res, r, 2) != 1)
			continue; /* OPEN or HELD: its commit or rollback queues it (S7, X2) */
		pgns_moved.ids[pgns_moved.n] = (uint64_t)pg_int(res, r, 0);
		pgns_moved.versions[pgns_moved.n++] = (uint32_t)pg_int(res, r, 1);
	}
	PQclear(res);
	return rc;
}

size_t pgns_series_moved_take(uint64_t **ids, uint32_t **versions)
{
	size_t n = pgns_moved.n;
	*ids = pgns_moved.ids;
	*versions = pgns_moved.versions;
	memset(&pgns_moved, 0, sizeof(pgns_moved));
	return n;
}

static int pgns_rename_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_name_call *c = arg;
	struct pgns *ns = c->ns;
	*c->ino_out = 0;
	pgns_moved_clear();
	int rc = lease_fence(ns->lease);
	if (rc == 0)
		rc = pgns_lock_dirs(ns, c->parent, c->newparent);
	uint64_t src_id = 0, dst_id = 0;
	struct cat_inode src, dst;
	if (rc == 0)
		rc = pgns_dirent(ns, c->parent, c->name, &src_id, &src);
	if (rc)
		return rc;
	rc = pgns_dirent(ns, c->newparent, c->newname, &dst_id, &dst);
	bool have_dst = rc == 0;
	if (rc && rc != -ENOENT)
		return rc;
	if (!have_dst && (c->flags & CAT_RENAME_EXCHANGE))
		return -ENOENT;
	if (have_dst && (c->flags & CAT_RENAME_NOREPLACE))
		return -EEXIST;
	if (have_dst && dst.ino == src.ino)
		return 0; /* the same file under both names: POSIX says do nothing */
	bool src_dir = S_ISDIR(src.mode), dst_dir = have_dst && S_ISDIR(dst.mode);
	bool moved = c->parent != c->newparent;
	rc = 0;
	if (src_dir && moved)
		rc = pgns_not_within(ns, c->newparent, src.ino);
	if (rc == 0 && dst_dir && moved && (c->flags & CAT_RENAME_EXCHANGE))
		rc = pgns_not_within(ns, c->parent, dst.ino);
	if (rc)
		return rc;
	if (c->flags & CAT_RENAME_EXCHANGE) {
		rc = pgns_exchange(ns, c, src_id, &src, dst_id, &dst);
		if (rc == 0 && src_dir) /* N13 */
			rc = pgns_series_moved(ns, src.ino);
		if (rc == 0 && dst_dir)
			rc = pgns_series_moved(ns, dst.ino);
		return rc;
	}

	int64_t now = pgns_now_ns();
	if (have_dst) {
		if (src_dir && !dst_dir)
			return -ENOTDIR;
		if (!src_dir && dst_dir)
			return -EISDIR;
		if (dst_dir)
			rc = pgns_dir_empty(ns, dst.ino);
		char d[24];
		const char *params[] = { PG_U64(d, dst_id) };
		if (rc == 0)
			rc = pgns_exec(ns, NS_DIRENT_DELETE, params, NULL);
		if (rc == 0)
			rc = pgns_nlink_add(ns, dst.ino, dst_dir ? -(int64_t)dst.nlink : -1, now);
		if (rc)
			return rc;
		*c->ino_out = dst.ino;
	}
	char id[24], np[24];
	const char *params[] = { PG_U64(id, src_id), PG_U64(np, c->newparent), c->newname };
	rc = pgns_exec(ns, NS_DIRENT_MOVE, params, NULL);
	if (rc == 0)
		rc = pgns_nlink_add(ns, src.ino, 0, now);
	if (rc == 0)
		rc = pgns_rename_touch(ns, c->parent, src_dir && moved ? -1 : 0, c->newparent,
				       (src_dir && moved ? 1 : 0) - (dst_dir ? 1 : 0), now);
	if (rc == 0 && src_dir) /* N13 */
		rc = pgns_series_moved(ns, src.ino);
	return rc;
}

static int pgns_rename_args(const char *name, const char *newname, unsigned flags)
{
	if ((flags & ~(CAT_RENAME_NOREPLACE | CAT_RENAME_EXCHANGE)) != 0 ||
	    flags == (CAT_RENAME_NOREPLACE | CAT_RENAME_EXCHANGE))
		return -EINVAL;
	if (!*newname || strlen(newname) > CAT_NAME_MAX || strchr(newname, '/') ||
	    !strcmp(newname, ".") || !strcmp(newname, "..") || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return strlen(newname) > CAT_NAME_MAX ? -ENAMETOOLONG : -EINVAL;
	return 0;
}

int pgns_rename_txn(struct pgns *ns, uint64_t parent, const char *name, uint64_t newparent,
		    const char *newname, unsigned flags, uint64_t *replaced_ino)
{
	int rc = pgns_rename_args(name, newname, flags);
	struct pgns_name_call c = { .ns = ns, .parent = parent, .name = name,
				    .newparent = newparent, .newname = newname, .flags = flags,
				    .ino_out = replaced_ino };
	return rc ? rc : pgns_rename_body(ns->pg, &c);
}

int pgns_rename(struct pgns *ns, uint64_t parent, const char *name, uint64_t newparent,
		const char *newname, unsigned flags, uint64_t *replaced_ino)
{
	int rc = pgns_rename_args(name, newname, flags);
	if (rc)
		return rc;
	uint64_t replaced = 0;
	struct pgns_name_call c = { .ns = ns, .parent = parent, .name = name,
				    .newparent = newparent, .newname = newname, .flags = flags,
				    .ino_out = &replaced };
	rc = pg_txn(ns->pg, pgns_rename_body, &c);
	if (replaced_ino)
		*replaced_ino = rc == 0 ? replaced : 0;
	return rc;
}

/* ---- attributes, symlinks, truncate ---- */

struct pgns_set_call {
	struct pgns *ns;
	uint64_t ino, size;
	unsigned what;
	const struct cat_inode *in;
	struct cat_inode *out;
	char *buf;
	size_t bufsize;
};

static int pgns_setattr_body(struct pg *pg, void *arg)
{
	struct pgns_set_call *c = arg;
	struct pgns *ns = c->ns;
	int rc = lease_fence(ns->lease);
	if (rc)
		return rc;
	char i[24];
	const char *lock[] = { PG_U64(i, c->ino) };
	PGresult *res;
	rc = pgns_exec(ns, NS_INODE_LOCK, lock, &res);
	if (rc)
		return rc;
	if (pg_rows(res) != 1) {
		PQclear(res);
		return -ENOENT;
	}
	struct cat_inode cur;
	pgns_attr(res, 0, 0, &cur);
	PQclear(res);
	if (c->what & CAT_SET_MODE)
		cur.mode = (cur.mode & S_IFMT) | (c->in->mode & 07777);
	if (c->what & CAT_SET_UID)
		cur.uid = c->in->uid;
	if (c->what & CAT_SET_GID)
		cur.gid = c->in->gid;
	if (c->what & CAT_SET_ATIME)
		cur.atime_ns = c->in->atime_ns;
	if (c->what & CAT_SET_MTIME)
		cur.mtime_ns = c->in->mtime_ns;
	cur.ctime_ns = (c->what & CAT_SET_CTIME) ? c->in->ctime_ns : pgns_now_ns();
	char m[24], u[24], g[24], a[24], mt[24], ct[24];
	const char *params[] = { i, PG_U64(m, cur.mode), PG_U64(u, cur.uid), PG_U64(g, cur.gid),
				 PG_I64(a, cur.atime_ns), PG_I64(mt, cur.mtime_ns),
				 PG_I64(ct, cur.ctime_ns) };
	rc = pgns_exec(ns, NS_INODE_SET, params, NULL);
	struct pgns_attr_call get = { ns, c->ino, NULL, c->out };
	return rc ? rc : pgns_getattr_body(pg, &get);
}

int pgns_setattr(struct pgns *ns, uint64_t ino, unsigned what, const struct cat_inode *in,
		 struct cat_inode *out)
{
	struct pgns_set_call c = { .ns = ns, .ino = ino, .what = what, .in = in, .out = out };
	return pg_txn(ns->pg, pgns_setattr_body, &c);
}

static int pgns_readlink_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_set_call *c = arg;
	char i[24];
	const char *params[] = { PG_U64(i, c->ino) };
	PGresult *res;
	int rc = pgns_exec(c->ns, NS_READLINK, params, &res);
	if (rc)
		return rc;
	if (pg_rows(res) != 1)
		rc = -ENOENT;
	else if (!S_ISLNK((mode_t)pg_int(res, 0, 0)))
		rc = -EINVAL;
	else
		snprintf(c->buf, c->bufsize, "%s", PQgetvalue(res, 0, 1));
	PQclear(res);
	return rc;
}

int pgns_readlink(struct pgns *ns, uint64_t ino, char *buf, size_t size)
{
	if (size == 0)
		return -EINVAL;
	struct pgns_set_call c = { .ns = ns, .ino = ino, .buf = buf, .bufsize = size };
	return pg_read(ns->pg, pgns_readlink_body, &c); /* pg.h P5 */
}

static int pgns_truncate_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_set_call *c = arg;
	struct pgns *ns = c->ns;
	int rc = lease_fence(ns->lease);
	if (rc)
		return rc;
	char i[24], sz[24], t[24];
	const char *lock[] = { PG_U64(i, c->ino) };
	PGresult *res;
	rc = pgns_exec(ns, NS_INODE_LOCK, lock, &res);
	if (rc)
		return rc;
	bool file = pg_rows(res) == 1 && S_ISREG((mode_t)pg_int(res, 0, 1));
	bool found = pg_rows(res) == 1;
	PQclear(res);
	if (!file)
		return found ? -EISDIR : -ENOENT;
	const char *cut[] = { i, PG_U64(sz, c->size) };
	rc = pgns_exec(ns, NS_REFS_DROP, cut, NULL); /* N1: extents at or past the size */
	if (rc == 0)
		rc = pgns_exec(ns, NS_EXTENTS_DELETE, cut, NULL);
	if (rc == 0)
		rc = pgns_exec(ns, NS_EXTENT_CUT, cut, NULL); /* a straddling one keeps its chunk */
	int64_t now = pgns_now_ns();
	const char *set[] = { i, sz, PG_I64(t, now), t };
	if (rc == 0)
		rc = pgns_exec(ns, NS_FILE_SET, set, NULL);
	return rc;
}

int pgns_file_truncate(struct pgns *ns, uint64_t ino, uint64_t new_size)
{
	struct pgns_set_call c = { .ns = ns, .ino = ino, .size = new_size };
	return pg_txn(ns->pg, pgns_truncate_body, &c);
}

/* ---- batches, counts, the catalog id ---- */

/* Inodes per transaction of a batched release (catalog.c's batch size). */
#define PGNS_RELEASE_BATCH 256

struct pgns_many_call {
	struct pgns *ns;
	const char *list; /* "{ino,ino,...}" */
	int take;         /* NS_REL_INODES_DELETE or NS_DROP_DATA_SET */
};

/* One batch: the statement that takes the unlinked inodes of the list
 * (deleting or emptying their rows) returns which it took; only their
 * extents give their references back and go (N1, one statement each). */
static int pgns_many_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pgns_many_call *c = arg;
	int rc = lease_fence(c->ns->lease);
	if (rc)
		return rc;
	char me[24];
	const char *lparams[] = { c->list };
	const char *params[] = { c->list, PG_U64(me, c->ns->lease->node_id) };
	PGresult *res;
	rc = pgns_exec(c->ns, NS_REL_LOCK, lparams, NULL); /* N14 */
	if (rc)
		return rc;
	rc = pgns_exec(c->ns, c->take, params, &res);
	if (rc)
		return rc;
	int n = pg_rows(res);
	struct pgns_buf taken = { 0 };
	pgns_put(&taken, "{");
	for (int r = 0; r < n; r++)
		pgns_put(&taken, "%s%s", r ? "," : "", PQgetvalue(res, r, 0));
	pgns_put(&taken, "}");
	PQclear(res);
	if (taken.failed)
		rc = -ENOMEM;
	const char *tparams[] = { taken.s };
	if (rc == 0 && n > 0)
		rc = pgns_exec(c->ns, NS_REFS_DROP_ANY, tparams, NULL);
	if (rc == 0 && n > 0)
		rc = pgns_exec(c->ns, NS_EXTENTS_DELETE_ANY, tparams, NULL);
	if (rc == 0 && n > 0 && c->take == NS_REL_INODES_DELETE)
		rc = pgns_exec(c->ns, NS_REL_ROWS_DELETE, tparams, NULL);
	pgns_buf_free(&taken);
	return rc;
}

static int pgns_many(struct pgns *ns, int take, const uint64_t *inos, size_t n)
{
	int rc = 0;
	for (size_t at = 0; at < n && rc == 0; at += PGNS_RELEASE_BATCH) {
		size_t k = n - at < PGNS_RELEASE_BATCH ? n - at : PGNS_RELEASE_BATCH;
		struct pgns_buf list = { 0 };
		pgns_put(&list, "{");
		for (size_t i = 0; i < k; i++)
			pgns_put(&list, "%s%" PRIu64, i ? "," : "", inos[at + i]);
		pgns_put(&list, "}");
		struct pgns_many_call c = { ns, list.s, take };
		rc = list.failed ? -ENOMEM : pg_txn(ns->pg, pgns_many_body, &c);
		pgns_buf_free(&list);
	}
	return rc;
}

int pgns_inodes_release(struct pgns *ns, const uint64_t *inos, size_t n)
{
	return pgns_many(ns, NS_REL_INODES_DELETE, inos, n);
}

int pgns_inodes_drop_data(struct pgns *ns, const uint64_t *inos, size_t n)
{
	return pgns_many(ns, NS_DROP_DATA_SET, inos, n);
}

int pgns_stats(struct pgns *ns, struct cat_stats *out)
{
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_STATS, false, NULL, &res);
	if (rc == 0 && pg_rows(res) != 1)
		rc = -EIO;
	if (rc == 0) {
		out->inodes = (uint64_t)pg_int(res, 0, 0);
		out->files = (uint64_t)pg_int(res, 0, 1);
		out->logical_bytes = (uint64_t)pg_int(res, 0, 2);
		out->referenced_bytes = (uint64_t)pg_int(res, 0, 3);
	}
	PQclear(res);
	return rc;
}

int pgns_catalog_id(struct pgns *ns, char *buf, size_t size)
{
	const char *params[] = { "catalog_id" };
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_META_GET, false, params, &res);
	if (rc == 0 && pg_rows(res) != 1)
		rc = -ENOENT;
	const char *id = rc == 0 ? PQgetvalue(res, 0, 0) : "";
	size_t n = strlen(id);
	if (rc == 0 && (n != 32 || strspn(id, "0123456789abcdef") != n))
		rc = -EINVAL;
	if (rc == 0 && n >= size)
		rc = -ENAMETOOLONG;
	if (rc == 0)
		memcpy(buf, id, n + 1);
	else
		log_error("catalog %s: cannot read its catalog_id: %s", pg_name(ns->pg),
			  strerror(-rc));
	PQclear(res);
	return rc;
}

/* A store id as the marker spells it (N15): 32 lowercase hex digits. */
static bool pgns_store_id_ok(const char *id)
{
	return strlen(id) == 32 && strspn(id, "0123456789abcdef") == 32;
}

int pgns_store_facts(struct pgns *ns, struct pgns_store_facts *out)
{
	memset(out, 0, sizeof(*out));
	PGresult *res = NULL;
	int rc = pgns_one(ns, NS_STORE_FACTS, false, NULL, &res);
	if (rc == 0 && pg_rows(res) != 1)
		rc = -EIO;
	if (rc == 0 && !PQgetisnull(res, 0, 0)) {
		const char *id = PQgetvalue(res, 0, 0);
		if (!pgns_store_id_ok(id))
			rc = -EINVAL;
		else
			memcpy(out->id, id, 33);
	}
	if (rc == 0) {
		out->durable = (uint64_t)pg_int(res, 0, 1);
		out->newest = PQgetisnull(res, 0, 2) ? 0 : (uint64_t)pg_int(res, 0, 2);
		out->version = PQgetisnull(res, 0, 3) ? 0 : (uint32_t)pg_int(res, 0, 3);
		out->uploaded = PQgetvalue(res, 0, 4)[0] == 't';
		out->marked = PQgetvalue(res, 0, 5)[0] == 't';
	}
	if (rc)
		log_error("catalog %s: cannot read its store id and saves: %s", pg_name(ns->pg),
			  rc == -EINVAL ? "ns_meta store_id is not 32 lowercase hex digits"
					: strerror(-rc));
	PQclear(res);
	return rc;
}

int pgns_store_id_offer(struct pgns *ns, const char *id, char held[33])
{
	if (!pgns_store_id_ok(id))
		return -EINVAL;
	const char *params[] = { id };
	int rc = pgns_one(ns, NS_STORE_ID_OFFER, false, params, NULL);
	const char *key[] = { "store_id" };
	PGresult *res = NULL;
	if (rc == 0)
		rc = pgns_one(ns, NS_META_GET, false, key, &res);
	if (rc == 0 && (pg_rows(res) != 1 || !pgns_store_id_ok(PQgetvalue(res, 0, 0))))
		rc = -EINVAL;
	if (rc == 0)
		memcpy(held, PQgetvalue(res, 0, 0), 33);
	else
		log_error("catalog %s: cannot record the store id: %s", pg_name(ns->pg),
			  strerror(-rc));
	PQclear(res);
	return rc;
}

int pgns_store_marked(struct pgns *ns)
{
	int rc = pgns_one(ns, NS_STORE_MARKED, false, NULL, NULL);
	if (rc)
		log_error("catalog %s: cannot record that the store is marked: %s", pg_name(ns->pg),
			  strerror(-rc));
	return rc;
}

/* The hashes of statement stmt (one column, hex), whose parameters are
 * first, the hash after `after` and max. */
static int pgns_hashes_after(struct pgns *ns, int stmt, const char *first, const uint8_t *after,
			     uint8_t (*out)[CAT_HASH_LEN], size_t max, size_t *n)
{
	*n = 0;
	char lim[24], from[HASH_HEX_LEN + 1] = "";
	if (after)
		hash_to_hex(after, from);
	const char *params[] = { first, from, PG_U64(lim, max) };
	PGresult *res = NULL;
	int rc = pgns_one(ns, stmt, false, params, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res) && *n < max; r++)
		if ((rc = pgns_unhex(PQgetvalue(res, r, 0), out[*n])) == 0)
			(*n)++;
	PQclear(res);
	return rc;
}

int pgns_unuploaded_of(struct pgns *ns, uint64_t node, const uint8_t *after,
		       uint8_t (*out)[CAT_HASH_LEN], size_t max, size_t *n)
{
	char id[24];
	return pgns_hashes_after(ns, NS_UNUPLOADED_OF, PG_U64(id, node), after, out, max, n);
}

int pgns_unuploaded_of_cache(struct pgns *ns, const char *cache_id, const uint8_t *after,
			     uint8_t (*out)[CAT_HASH_LEN], size_t max, size_t *n)
{
	if (!cache_id || !cache_id[0]) {
		*n = 0;
		return -EINVAL; /* lease.h L10: NULL matches nothing */
	}
	return pgns_hashes_after(ns, NS_UNUPLOADED_OF_CACHE, cache_id, after, out, max, n);
}

/* ---- a writer's chunks whose cache copies go (N10) ---- */

int pgns_pin_held(struct pgns *ns, const struct pgns_pin_ref *refs, size_t n, bool *pinned)
{
	for (size_t i = 0; i < n; i++)
		pinned[i] = false;
	if (n == 0)
		return 0;
	struct pgns_buf inos = { 0 }, pl = { 0 }, co = { 0 }, sl = { 0 };
	for (size_t i = 0; i < n; i++) {
		const char *sep = i ? "," : "{";
		pgns_put(&inos, "%s%" PRIu64, sep, refs[i].ino);
		pgns_put(&pl, "%s%" PRIu64, sep, refs[i].chunk.plain_len);
		pgns_put(&co, "%s%u", sep, (unsigned)refs[i].chunk.codec);
		pgns_put(&sl, "%s%" PRIu64, sep, refs[i].chunk.stored_len);
	}
	pgns_put(&inos, "}");
	pgns_put(&pl, "}");
	pgns_put(&co, "}");
	pgns_put(&sl, "}");
	char *hashes = NULL;
	int rc = inos.failed || pl.failed || co.failed || sl.failed ? -ENOMEM
		 : pgns_hex_list(refs[0].chunk.hash, sizeof(*refs), n, &hashes);
	char node[24];
	const char *params[] = { PG_U64(node, ns->lease->node_id), inos.s, hashes, pl.s, co.s,
				 sl.s };
	PGresult *res = NULL;
	if (rc == 0)
		rc = pgns_one(ns, NS_PIN_HELD, true, params, &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		uint8_t h[CAT_HASH_LEN];
		if (PQgetisnull(res, r, 1))
			continue; /* none pinned: the one row of NULLs */
		rc = pgns_unhex(PQgetvalue(res, r, 1), h);
		for (size_t i = 0; rc == 0 && i < n; i++)
			if (memcmp(refs[i].chunk.hash, h, CAT_HASH_LEN) == 0)
				pinned[i] = true;
	}
	PQclear(res);
	free(hashes);
	pgns_buf_free(&inos);
	pgns_buf_free(&pl);
	pgns_buf_free(&co);
	pgns_buf_free(&sl);
	return rc;
}
