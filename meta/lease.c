/* lease — node leases, fencing and cluster duties; see lease.h (L1-L10). */
#define _GNU_SOURCE
#include "lease.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

/* Durations are passed as milliseconds and added to the server's clock. */
#define LEASE_PLUS_MS(p) "clock_timestamp() + " p "::bigint * interval '1 millisecond'"

enum {
	LS_REGISTER,
	LS_RENEW,
	LS_FENCE,
	LS_FENCE_STRICT,
	LS_SWEEP,
	LS_UNSETTLED,
	LS_SETTLE,
	LS_RELEASE,
	LS_DUTY_TAKE,
	LS_DUTY_DROP,
	LS_LIST,
	LS_CACHE_EXPIRE,
	LS_CACHE_UNSETTLED,
	LS_COUNT
};

const struct pg_stmt lease_stmts[] = {
	[LS_REGISTER] = { "lease_register",
			  "INSERT INTO ckpt_nodes(name, state, started, lease_until, lease_ms, cache_id)"
			  " VALUES ($1, 'live', clock_timestamp(), " LEASE_PLUS_MS("$2") ", $2,"
			  " NULLIF($3, '')) RETURNING id",
			  3 },
	/* L1: a live lease is extended, even one that ran out, until a sweep
	 * expired it */
	[LS_RENEW] = { "lease_renew",
		       "UPDATE ckpt_nodes SET lease_until = " LEASE_PLUS_MS("$2")
		       " WHERE id = $1 AND state = 'live' RETURNING id",
		       2 },
	/* L2: FOR SHARE makes a sweep of this row wait for the caller's transaction */
	[LS_FENCE] = { "lease_fence",
		       "SELECT id FROM ckpt_nodes WHERE id = $1 AND state = 'live' FOR SHARE", 1 },
	/* L4: deciding about other nodes takes a lease with time left */
	[LS_FENCE_STRICT] = { "lease_fence_strict",
			      "SELECT id FROM ckpt_nodes WHERE id = $1 AND state = 'live'"
			      " AND lease_until > clock_timestamp() FOR SHARE",
			      1 },
	/* L4 at one instant, in the statement itself: the sweeper's own lease
	 * has time left when the others' ran out by a term. The fence before it
	 * is not enough: a PostgreSQL paused between the two answers the sweep
	 * when every lease looks run out, the sweeper's own included. */
	[LS_SWEEP] = { "lease_sweep",
		       "UPDATE ckpt_nodes n SET state = 'expired'"
		       " FROM (SELECT clock_timestamp() AS at) t"
		       " WHERE n.state = 'live'"
		       " AND n.lease_until + n.lease_ms * interval '1 millisecond' <= t.at"
		       " AND EXISTS (SELECT 1 FROM ckpt_nodes me WHERE me.id = $1"
		       " AND me.state = 'live' AND me.lease_until > t.at)"
		       " RETURNING n.id",
		       1 },
	/* L7: what a sweep expired and no settlement has finished */
	[LS_UNSETTLED] = { "lease_unsettled",
			   "SELECT id FROM ckpt_nodes WHERE state = 'expired' AND NOT settled"
			   " ORDER BY id LIMIT $1",
			   1 },
	/* L7: the row lock makes a concurrent settler wait, then find it settled */
	[LS_SETTLE] = { "lease_settle",
			"UPDATE ckpt_nodes SET settled = true WHERE id = $1 AND state = 'expired'"
			" AND NOT settled RETURNING id",
			1 },
	/* L9: a node leaving with chunks not on BACKING is left to a sweep's
	 * settlement (expired, not settled: L7) */
	[LS_RELEASE] = { "lease_release",
			 "UPDATE ckpt_nodes SET state = CASE WHEN $2::boolean THEN 'expired'"
			 " ELSE 'gone' END WHERE id = $1 AND state = 'live'",
			 2 },
	/* L3: the holder extends its term; anyone takes a term that ran out, or
	 * one whose holder was swept or unmounted */
	[LS_DUTY_TAKE] = { "lease_duty_take",
			   "INSERT INTO ckpt_duties(name, holder, until) VALUES ($1, $2, " LEASE_PLUS_MS("$3") ")"
			   " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until"
			   " WHERE ckpt_duties.holder = excluded.holder OR ckpt_duties.until <= clock_timestamp()"
			   " OR NOT EXISTS (SELECT 1 FROM ckpt_nodes n WHERE n.id = ckpt_duties.holder"
			   " AND n.state = 'live')"
			   " RETURNING holder",
			   3 },
	[LS_DUTY_DROP] = { "lease_duty_drop", "DELETE FROM ckpt_duties WHERE name = $1 AND holder = $2",
			   2 },
	[LS_LIST] = { "lease_list",
		      "SELECT id, name, state,"
		      " CAST(EXTRACT(EPOCH FROM (lease_until - clock_timestamp())) * 1000 AS bigint)"
		      " FROM ckpt_nodes ORDER BY id",
		      0 },
	/* L10: the earlier daemons of this node's cache are gone (its lock is
	 * this node's): expired now, whatever their lease says */
	[LS_CACHE_EXPIRE] = { "lease_cache_expire",
			      "UPDATE ckpt_nodes SET state = 'expired'"
			      " WHERE state = 'live' AND cache_id = $2 AND id <> $1 RETURNING id",
			      2 },
	/* L10: those of them not settled yet, whoever expired them */
	[LS_CACHE_UNSETTLED] = { "lease_cache_unsettled",
				 "SELECT id FROM ckpt_nodes WHERE state = 'expired' AND NOT settled"
				 " AND cache_id = $2 AND id <> $1 ORDER BY id LIMIT $3",
				 3 },
};
const size_t lease_nstmts = LS_COUNT;

static const char lease_schema_sql[] =
	"CREATE TABLE IF NOT EXISTS ckpt_nodes ("
	" id BIGSERIAL PRIMARY KEY,"
	" name TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN ('live', 'expired', 'gone')),"
	" started TIMESTAMPTZ NOT NULL,"
	" lease_until TIMESTAMPTZ NOT NULL);"
	/* L4: the node's term, also its grace before a sweep */
	"ALTER TABLE ckpt_nodes ADD COLUMN IF NOT EXISTS lease_ms BIGINT NOT NULL DEFAULT 0;"
	/* L7: an expired node's settlement done (an old database's expired rows
	 * get false: settled once more, which finds only what is left to do) */
	"ALTER TABLE ckpt_nodes ADD COLUMN IF NOT EXISTS settled BOOLEAN NOT NULL DEFAULT false;"
	/* L10: the id of the cache the node mounted (an old database's rows and
	 * a node that gives none: NULL, which matches no cache) */
	"ALTER TABLE ckpt_nodes ADD COLUMN IF NOT EXISTS cache_id TEXT;"
	"CREATE TABLE IF NOT EXISTS ckpt_duties ("
	" name TEXT PRIMARY KEY,"
	" holder BIGINT NOT NULL REFERENCES ckpt_nodes(id),"
	" until TIMESTAMPTZ NOT NULL);";

int lease_schema(struct pg *pg)
{
	int rc = pg_exec_plain(pg, lease_schema_sql);
	/* two nodes creating a table at once: one loses on the catalog's unique
	 * index; the second attempt finds the table there */
	if (rc == -EEXIST)
		rc = pg_exec_plain(pg, lease_schema_sql);
	return rc;
}

/* ---- one transaction per call ---- */

struct lease_call {
	struct lease *l;
	const char *name;
	const char *cache_id; /* LS_REGISTER, LS_CACHE_*: L10 */
	unsigned ms;
	bool fence;          /* run lease_fence first (L2, L3) */
	bool holds;          /* LS_RELEASE: the node holds chunks not uploaded (L9) */
	int stmt;            /* LS_* */
	int nparams;
	PGresult *res;       /* the statement's rows, for the caller */
};

static int lease_exec(struct lease *l, int stmt, const char *const *params, PGresult **res)
{
	return pg_exec(l->pg, l->first + (size_t)stmt, params, res);
}

static int lease_fence_by(struct lease *l, int stmt)
{
	char id[24];
	const char *params[] = { PG_U64(id, l->node_id) };
	PGresult *res;
	int rc = lease_exec(l, stmt, params, &res);
	if (rc)
		return rc;
	rc = pg_rows(res) == 1 ? 0 : -ESTALE;
	PQclear(res);
	return rc;
}

int lease_fence(struct lease *l)
{
	return lease_fence_by(l, LS_FENCE);
}

int lease_fenced(const PGresult *res)
{
	if (pg_rows(res) < 1 || PQnfields(res) < 1 || PQgetisnull(res, 0, 0)) {
		log_error("catalog: a fenced statement returned no fence column (lease.h L5)");
		return -EIO;
	}
	return PQgetvalue(res, 0, 0)[0] == 't' ? 0 : -ESTALE;
}

static int lease_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct lease_call *c = arg;
	struct lease *l = c->l;
	char id[24], ms[24];
	PG_U64(id, l->node_id);
	PG_U64(ms, c->ms);
	if (c->fence) { /* sweeps and duties decide about others: L4 */
		int rc = lease_fence_by(l, LS_FENCE_STRICT);
		if (rc)
			return rc;
	}
	const char *params[3];
	switch (c->stmt) {
	case LS_REGISTER:
		params[0] = c->name;
		params[1] = ms;
		params[2] = c->cache_id ? c->cache_id : "";
		break;
	case LS_CACHE_EXPIRE: params[0] = id; params[1] = c->cache_id; break;
	case LS_CACHE_UNSETTLED: params[0] = id; params[1] = c->cache_id; params[2] = ms; break;
	case LS_RENEW: params[0] = id; params[1] = ms; break;
	case LS_RELEASE: params[0] = id; params[1] = c->holds ? "true" : "false"; break;
	case LS_DUTY_TAKE: params[0] = c->name; params[1] = id; params[2] = ms; break;
	case LS_DUTY_DROP: params[0] = c->name; params[1] = id; break;
	case LS_UNSETTLED: params[0] = ms; break;
	case LS_SWEEP: params[0] = id; break;
	default: break;
	}
	PQclear(c->res);
	c->res = NULL;
	return lease_exec(l, c->stmt, params, &c->res);
}

static int lease_run(struct lease_call *c)
{
	int rc = pg_txn(c->l->pg, lease_body, c);
	if (rc) {
		PQclear(c->res);
		c->res = NULL;
	}
	return rc;
}

int lease_register(struct lease *l, const char *name, unsigned lease_ms)
{
	return lease_register_cache(l, name, NULL, lease_ms);
}

int lease_register_cache(struct lease *l, const char *name, const char *cache_id,
			 unsigned lease_ms)
{
	assert(l->node_id == 0);
	struct lease_call c = { .l = l, .name = name, .cache_id = cache_id, .ms = lease_ms,
				.stmt = LS_REGISTER };
	int rc = lease_run(&c);
	if (rc == 0) {
		l->node_id = (uint64_t)pg_int(c.res, 0, 0);
		l->lease_ms = lease_ms;
		log_info("catalog %s: node %" PRIu64 " (%s) joined, lease %u ms", pg_name(l->pg),
			 l->node_id, name, lease_ms);
	}
	PQclear(c.res);
	return rc;
}

int lease_renew(struct lease *l)
{
	assert(l->node_id != 0);
	struct lease_call c = { .l = l, .ms = l->lease_ms, .stmt = LS_RENEW };
	int rc = lease_run(&c);
	if (rc == 0 && pg_rows(c.res) != 1) {
		log_error("catalog %s: node %" PRIu64 ": swept after its lease ran out, or given up; this node commits and"
			  " deletes nothing from now on",
			  pg_name(l->pg), l->node_id);
		rc = -ESTALE;
	}
	PQclear(c.res);
	return rc;
}

int lease_sweep(struct lease *l, uint64_t *ids, size_t max, size_t *n)
{
	*n = 0;
	struct lease_call c = { .l = l, .fence = true, .stmt = LS_SWEEP };
	int rc = lease_run(&c);
	if (rc == 0) {
		for (int r = 0; r < pg_rows(c.res) && *n < max; r++)
			ids[(*n)++] = (uint64_t)pg_int(c.res, r, 0);
		for (size_t i = 0; i < *n; i++)
			log_warn("catalog %s: node %" PRIu64 " missed its lease: expired", pg_name(l->pg),
				 ids[i]);
	}
	PQclear(c.res);
	return rc;
}

int lease_unsettled(struct lease *l, uint64_t *ids, size_t max, size_t *n)
{
	*n = 0;
	struct lease_call c = { .l = l, .ms = (unsigned)max, .stmt = LS_UNSETTLED };
	int rc = max == 0 ? 0 : lease_run(&c);
	for (int r = 0; rc == 0 && r < pg_rows(c.res) && *n < max; r++)
		ids[(*n)++] = (uint64_t)pg_int(c.res, r, 0);
	PQclear(c.res);
	return rc;
}

int lease_settle_claim(struct lease *l, uint64_t dead, bool *claimed)
{
	char id[24];
	const char *params[] = { PG_U64(id, dead) };
	PGresult *res;
	*claimed = false;
	int rc = lease_exec(l, LS_SETTLE, params, &res);
	if (rc)
		return rc;
	*claimed = pg_rows(res) == 1;
	PQclear(res);
	return 0;
}

/* L10: one call of stmt with the cache id; its ids in ids[0..*n). */
static int lease_cache_ids(struct lease *l, int stmt, bool fence, const char *cache_id,
			   uint64_t *ids, size_t max, size_t *n)
{
	*n = 0;
	struct lease_call c = { .l = l, .cache_id = cache_id, .ms = (unsigned)max, .fence = fence,
				.stmt = stmt };
	int rc = lease_run(&c);
	for (int r = 0; rc == 0 && r < pg_rows(c.res) && *n < max; r++)
		ids[(*n)++] = (uint64_t)pg_int(c.res, r, 0);
	PQclear(c.res);
	return rc;
}

int lease_cache_take_over(struct lease *l, const char *cache_id, uint64_t *expired,
			  size_t *n_expired, uint64_t *ids, size_t max, size_t *n)
{
	assert(l->node_id != 0 && cache_id && cache_id[0]);
	*n = 0;
	int rc = lease_cache_ids(l, LS_CACHE_EXPIRE, true, cache_id, expired, max, n_expired);
	if (rc == 0 && max > 0)
		rc = lease_cache_ids(l, LS_CACHE_UNSETTLED, false, cache_id, ids, max, n);
	return rc;
}

int lease_release(struct lease *l, bool holds)
{
	if (l->node_id == 0)
		return 0;
	struct lease_call c = { .l = l, .holds = holds, .stmt = LS_RELEASE };
	int rc = lease_run(&c);
	PQclear(c.res);
	return rc;
}

int lease_duty_take(struct lease *l, const char *name, unsigned term_ms, bool *taken)
{
	*taken = false;
	struct lease_call c = { .l = l, .name = name, .ms = term_ms, .fence = true,
				.stmt = LS_DUTY_TAKE };
	int rc = lease_run(&c);
	if (rc == 0)
		*taken = pg_rows(c.res) == 1;
	PQclear(c.res);
	return rc;
}

int lease_duty_drop(struct lease *l, const char *name)
{
	struct lease_call c = { .l = l, .name = name, .stmt = LS_DUTY_DROP };
	int rc = lease_run(&c);
	PQclear(c.res);
	return rc;
}

int lease_list(struct lease *l, struct lease_node *out, size_t max, size_t *n)
{
	*n = 0;
	struct lease_call c = { .l = l, .stmt = LS_LIST };
	int rc = lease_run(&c);
	for (int r = 0; rc == 0 && r < pg_rows(c.res) && *n < max; r++) {
		struct lease_node *o = &out[(*n)++];
		o->id = (uint64_t)pg_int(c.res, r, 0);
		snprintf(o->name, sizeof(o->name), "%s", PQgetvalue(c.res, r, 1));
		snprintf(o->state, sizeof(o->state), "%s", PQgetvalue(c.res, r, 2));
		o->left_ms = pg_int(c.res, r, 3);
	}
	PQclear(c.res);
	return rc;
}

/* ---- the local deadline (L8) ---- */

uint64_t lease_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t lease_sure_until_ms(uint64_t started_ms, unsigned term_ms)
{
	/* the server's clock and this one may run at slightly different rates */
	unsigned margin = term_ms / 8;
	return started_ms + term_ms - margin;
}
