/* pggen — generations across nodes in the shared catalog; see pggen.h (X1-X3). */
#define _GNU_SOURCE
#include "pggen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"

enum {
	G_GEN_INSERT,
	G_INODE_SET_GEN,
	G_GEN_OF,
	G_GEN_SHARE,
	G_WRITING_ADD,
	G_WRITING_DEL,
	G_GEN_LOCK,
	G_WRITERS,
	G_COMMIT,
	G_HOLD,
	G_ADOPT,
	G_HOLD_NODE,
	G_DROP_WRITING,
	G_LOSE,
	G_GET,
	G_LIST,
	G_COUNT
};

#define G_COLS "id, series, root, name, step, state, version, pinned, created_ns, committed_ns," \
	       " ended_ns, rule, held, lost"

const struct pg_stmt pggen_stmts[] = {
	[G_GEN_INSERT] = { "gen_insert",
			   "INSERT INTO ns_generations(series, root, name, step, state, created_ns,"
			   " opened_by) VALUES ($1, $2, $3, $4, 0, $5, $6) RETURNING id",
			   6 },
	[G_INODE_SET_GEN] = { "gen_inode_set", "UPDATE ns_inodes SET gen = $2 WHERE ino = $1", 2 },
	[G_GEN_OF] = { "gen_of", "SELECT gen FROM ns_inodes WHERE ino = $1", 1 },
	/* X1: an open for writing holds the row against a commit's change */
	[G_GEN_SHARE] = { "gen_share", "SELECT state FROM ns_generations WHERE id = $1 FOR SHARE", 1 },
	[G_WRITING_ADD] = { "gen_writing_add",
			    "INSERT INTO ns_writing(node, ino) VALUES ($1, $2) ON CONFLICT DO NOTHING", 2 },
	[G_WRITING_DEL] = { "gen_writing_del", "DELETE FROM ns_writing WHERE node = $1 AND ino = $2", 2 },
	[G_GEN_LOCK] = { "gen_lock", "SELECT state, lost FROM ns_generations WHERE id = $1 FOR UPDATE",
			 1 },
	/* X1: every writer counts, also one of a node whose lease ran out and
	 * that no sweep has handled yet: its file is unfinished until X2 holds
	 * the generation */
	[G_WRITERS] = { "gen_writers",
			"SELECT count(*) FROM ns_writing w JOIN ns_inodes i ON i.ino = w.ino"
			" WHERE i.gen = $1",
			1 },
	[G_COMMIT] = { "gen_commit",
		       "UPDATE ns_generations SET state = 1, committed_ns = $2, rule = $3, held = ''"
		       " WHERE id = $1",
		       3 },
	[G_HOLD] = { "gen_hold", "UPDATE ns_generations SET state = 4, rule = $2, held = $3 WHERE id = $1",
		     3 },
	[G_ADOPT] = { "gen_adopt",
		      "UPDATE ns_chunks SET holder = $1 WHERE holder = $2 AND NOT uploaded AND hash IN"
		      " (SELECT decode(h, 'hex') FROM unnest($3::text[]) AS t(h))",
		      3 },
	/* X2: what the dead node had open for writing proves nothing */
	[G_HOLD_NODE] = { "gen_hold_node",
			  "UPDATE ns_generations SET state = 4, rule = 'node-lost', held = $2"
			  " WHERE state = 0 AND id IN (SELECT i.gen FROM ns_writing w JOIN ns_inodes i"
			  " ON i.ino = w.ino WHERE w.node = $1 AND i.gen IS NOT NULL) RETURNING id",
			  2 },
	[G_DROP_WRITING] = { "gen_drop_writing", "DELETE FROM ns_writing WHERE node = $1", 1 },
	[G_LOSE] = { "gen_lose",
		     "UPDATE ns_generations g SET lost = true WHERE NOT g.lost AND g.state IN (0, 1, 4)"
		     " AND EXISTS (SELECT 1 FROM ns_inodes i JOIN ns_extents e ON e.ino = i.ino"
		     " JOIN ns_chunks c ON c.hash = e.hash WHERE i.gen = g.id AND c.holder = $1"
		     " AND NOT c.uploaded) RETURNING id",
		     1 },
	[G_GET] = { "gen_get", "SELECT " G_COLS " FROM ns_generations WHERE id = $1", 1 },
	[G_LIST] = { "gen_list",
		     "SELECT " G_COLS " FROM ns_generations WHERE series = $1 AND state IN (0, 1)"
		     " AND NOT lost ORDER BY step, id",
		     1 },
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

struct pggen_call {
	struct pgns *ns;
	uint64_t id, ino, parent, dead;
	const struct cat_gen_spec *spec;
	uint32_t mode, uid, gid;
	struct cat_inode *out;
	const char *rule, *reason, *list;
	bool open;
	int state;
	uint64_t count;
	PGresult *res, *res2;
};

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
	char s[24], r[24], st[24], t[24], node[24], id[24];
	const char *params[] = { PG_U64(s, c->parent), PG_U64(r, c->out->ino), c->spec->name,
				 PG_U64(st, c->spec->step), PG_I64(t, pgns_now_ns()),
				 PG_U64(node, ns->lease->node_id) };
	PGresult *res;
	rc = pggen_exec(ns, G_GEN_INSERT, params, &res);
	if (rc)
		return rc;
	c->id = (uint64_t)pg_int(res, 0, 0);
	PQclear(res);
	const char *set[] = { r, PG_U64(id, c->id) };
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
	int rc = lease_fence(ns->lease);
	uint64_t gen = 0;
	if (rc == 0)
		rc = pggen_of(ns, c->ino, &gen);
	if (rc)
		return rc;
	c->state = -1;
	char g[24], node[24], i[24];
	if (gen && c->open) {
		const char *params[] = { PG_U64(g, gen) };
		PGresult *res;
		rc = pggen_exec(ns, G_GEN_SHARE, params, &res); /* X1 */
		if (rc)
			return rc;
		c->state = pg_rows(res) == 1 ? (int)pg_int(res, 0, 0) : -1;
		PQclear(res);
	}
	const char *params[] = { PG_U64(node, ns->lease->node_id), PG_U64(i, c->ino) };
	return pggen_exec(ns, c->open ? G_WRITING_ADD : G_WRITING_DEL, params, NULL);
}

int pggen_writing(struct pgns *ns, uint64_t ino, bool open, int *gen_state)
{
	struct pggen_call c = { .ns = ns, .ino = ino, .open = open };
	int rc = pg_txn(ns->pg, pggen_writing_body, &c);
	if (gen_state)
		*gen_state = rc == 0 ? c.state : -1;
	return rc;
}

/* ---- commit and hold ---- */

static int pggen_lock(struct pgns *ns, uint64_t id, int *state, bool *lost)
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
	PQclear(res);
	return rc;
}

static int pggen_commit_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	int state = -1;
	bool lost = false;
	int rc = lease_fence(ns->lease);
	if (rc == 0)
		rc = pggen_lock(ns, c->id, &state, &lost);
	if (rc)
		return rc;
	if (state != GEN_OPEN && !(state == GEN_HELD && c->open))
		return -EINVAL; /* a held one ends by a decision only */
	if (lost)
		return -ENODATA; /* a chunk of it is gone: it cannot be read back */
	char g[24], t[24];
	const char *params[] = { PG_U64(g, c->id) };
	PGresult *res;
	rc = pggen_exec(ns, G_WRITERS, params, &res);
	if (rc)
		return rc;
	c->count = (uint64_t)pg_int(res, 0, 0);
	PQclear(res);
	if (c->count > 0)
		return -EBUSY; /* X1: a live node is still writing a file of it */
	const char *set[] = { g, PG_I64(t, pgns_now_ns()), c->rule };
	return pggen_exec(ns, G_COMMIT, set, NULL);
}

int pggen_commit(struct pgns *ns, uint64_t id, const char *rule, bool decision, uint64_t *writers)
{
	struct pggen_call c = { .ns = ns, .id = id, .rule = rule, .open = decision };
	int rc = pg_txn(ns->pg, pggen_commit_body, &c);
	if (writers)
		*writers = c.count;
	return rc;
}

static int pggen_hold_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	int state = -1;
	bool lost = false;
	int rc = lease_fence(c->ns->lease);
	if (rc == 0)
		rc = pggen_lock(c->ns, c->id, &state, &lost);
	if (rc)
		return rc;
	if (state == GEN_HELD)
		return -EALREADY;
	if (state != GEN_OPEN)
		return -EINVAL;
	char g[24];
	const char *params[] = { PG_U64(g, c->id), c->rule, c->reason };
	return pggen_exec(c->ns, G_HOLD, params, NULL);
}

int pggen_hold(struct pgns *ns, uint64_t id, const char *rule, const char *reason)
{
	if (!reason || !*reason)
		return -EINVAL; /* G5: a held generation says why */
	struct pggen_call c = { .ns = ns, .id = id, .rule = rule, .reason = reason };
	return pg_txn(ns->pg, pggen_hold_body, &c);
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

static int pggen_lost_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct pggen_call *c = arg;
	struct pgns *ns = c->ns;
	PQclear(c->res);
	PQclear(c->res2);
	c->res = c->res2 = NULL;
	int rc = lease_fence(ns->lease);
	if (rc)
		return rc;
	char dead[24], why[96];
	snprintf(why, sizeof(why), "node %" PRIu64 " lost its lease with files of it open", c->dead);
	const char *hold[] = { PG_U64(dead, c->dead), why };
	rc = pggen_exec(ns, G_HOLD_NODE, hold, &c->res);
	const char *by_node[] = { dead };
	if (rc == 0)
		rc = pggen_exec(ns, G_DROP_WRITING, by_node, NULL);
	if (rc == 0)
		rc = pggen_exec(ns, G_LOSE, by_node, &c->res2);
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
	struct pggen_call c = { .ns = ns, .dead = dead };
	int rc = pg_txn(ns->pg, pggen_lost_body, &c);
	*n_held = *n_lost = 0;
	if (rc == 0) {
		pggen_ids(c.res, held, max_held, n_held);
		pggen_ids(c.res2, lost, max_lost, n_lost);
		for (size_t i = 0; i < *n_held; i++)
			log_warn("catalog %s: generation %" PRIu64 " held: node %" PRIu64
				 " lost its lease with files of it open",
				 pg_name(ns->pg), held[i], dead);
		for (size_t i = 0; i < *n_lost; i++)
			log_error("catalog %s: generation %" PRIu64 " lost: chunks only node %" PRIu64
				  " had, not on BACKING",
				  pg_name(ns->pg), lost[i], dead);
	}
	PQclear(c.res);
	PQclear(c.res2);
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
}

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
	int rc = pg_txn(ns->pg, pggen_read_body, &c);
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
	int rc = pg_txn(ns->pg, pggen_read_body, &c);
	for (int r = 0; rc == 0 && r < pg_rows(c.res); r++) {
		struct cat_gen g;
		pggen_row(c.res, r, &g, NULL);
		if (fn(arg, &g) != 0)
			break;
	}
	PQclear(c.res);
	return rc;
}
