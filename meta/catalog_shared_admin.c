/* catalog_shared_admin — ckptfs-admin's list and show figures from the
 * shared tables (A1-A3 in catalog_shared_admin.h).
 *
 * Each statement is admin_query.c's SQLite one rewritten for PostgreSQL,
 * except that list's usage takes every listed generation at once (an array
 * of ids) instead of one statement per generation, and that a file's path
 * comes out of the walk of its generation's tree instead of one lookup per
 * name of it. */
#define _GNU_SOURCE
#include "catalog_shared_admin.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "pggen.h"
#include "pgns.h"

enum { SA_USAGE, SA_FILES, SA_SHARES, SA_COUNT };

#define SA_IS_FILE(i) "(" i ".mode & 61440) = 32768"

const struct pg_stmt catsha_stmts[] = {
	/* per generation of $1: its references grouped by chunk (n of them), and
	 * a chunk is its alone when the chunk's count is exactly n (A2) */
	[SA_USAGE] = { "sha_usage",
		       "WITH r AS (SELECT i.gen AS gen, e.hash AS hash, count(*) AS n FROM ns_inodes i"
		       " JOIN ns_extents e ON e.ino = i.ino WHERE i.gen = ANY($1::bigint[])"
		       " GROUP BY i.gen, e.hash)"
		       " SELECT r.gen, sum(r.n), count(*), sum(c.plain_len),"
		       " count(*) FILTER (WHERE c.refcount = r.n),"
		       " COALESCE(sum(c.plain_len) FILTER (WHERE c.refcount = r.n), 0),"
		       " COALESCE(sum(c.stored_len) FILTER (WHERE c.refcount = r.n), 0)"
		       " FROM r JOIN ns_chunks c ON c.hash = r.hash GROUP BY r.gen ORDER BY r.gen",
		       1 },
	/* the tree from the root down with each entry's path; a file reached by
	 * two entries keeps the one made first (lowest ns_dirents.id) */
	[SA_FILES] = { "sha_files",
		       "WITH RECURSIVE t(ino, path, via) AS (SELECT root, ''::text, 0::bigint"
		       " FROM ns_generations WHERE id = $1 AND root <> 0"
		       " UNION ALL SELECT d.ino, t.path || '/' || d.name, d.id FROM ns_dirents d"
		       " JOIN t ON d.parent = t.ino)"
		       " SELECT DISTINCT ON (i.ino) i.ino, i.size,"
		       " (SELECT count(*) FROM ns_extents x WHERE x.ino = i.ino),"
		       " (SELECT count(DISTINCT x.hash) FROM ns_extents x WHERE x.ino = i.ino), t.path"
		       " FROM t JOIN ns_inodes i ON i.ino = t.ino WHERE " SA_IS_FILE("i")
		       " ORDER BY i.ino, t.via",
		       1 },
	[SA_SHARES] = { "sha_shares",
			"WITH mine AS (SELECT DISTINCT e.hash AS hash FROM ns_inodes i JOIN ns_extents e"
			" ON e.ino = i.ino WHERE i.gen = $1),"
			" pairs AS (SELECT DISTINCT COALESCE(i.gen, 0) AS gen, e.hash AS hash"
			" FROM ns_extents e JOIN ns_inodes i ON i.ino = e.ino"
			" WHERE e.hash IN (SELECT hash FROM mine) AND COALESCE(i.gen, 0) <> $1)"
			" SELECT p.gen, count(*), COALESCE(sum(c.plain_len), 0) FROM pairs p"
			" JOIN ns_chunks c ON c.hash = p.hash GROUP BY p.gen ORDER BY p.gen",
			1 },
};
const size_t catsha_nstmts = SA_COUNT;
_Static_assert(sizeof(catsha_stmts) / sizeof(catsha_stmts[0]) == SA_COUNT,
	       "one statement per SA_ index");

/* One statement run under pg_read (A1); its result in res. */
struct catsha_call {
	struct pgns *ns;
	int stmt;
	const char *param;
	PGresult *res;
};

static int catsha_body(struct pg *pg, void *arg)
{
	struct catsha_call *c = arg;
	PQclear(c->res); /* a retry starts over */
	c->res = NULL;
	const char *params[] = { c->param };
	/* A3: after lease's, pgns's and pggen's statements */
	return pg_exec(pg, c->ns->first_gen + pggen_nstmts + (size_t)c->stmt, params, &c->res);
}

static int catsha_run(struct cat *cat, int stmt, const char *param, PGresult **res)
{
	*res = NULL;
	if (!cat_is_shared(cat))
		return -EINVAL;
	struct catsha_call c = { cat_shared_ns(cat), stmt, param, NULL };
	int rc = pg_read(c.ns->pg, catsha_body, &c);
	if (rc != 0) {
		PQclear(c.res);
		return rc;
	}
	*res = c.res;
	return 0;
}

static uint64_t catsha_u64(const PGresult *res, int r, int c)
{
	int64_t v = pg_int(res, r, c);
	return v < 0 ? 0 : (uint64_t)v;
}

/* "{1,2,3}": ids as a PostgreSQL array literal, malloc'd. */
static char *catsha_id_array(const uint64_t *ids, size_t n)
{
	size_t cap = 3 + n * 21, len = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	s[len++] = '{';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s%" PRIu64, i ? "," : "", ids[i]);
	snprintf(s + len, cap - len, "}");
	return s;
}

int cat_shared_gen_usage(struct cat *cat, const uint64_t *ids, size_t n, cat_shared_usage_fn fn,
			 void *arg)
{
	if (n == 0)
		return cat_is_shared(cat) ? 0 : -EINVAL;
	char *array = catsha_id_array(ids, n);
	if (!array)
		return -ENOMEM;
	PGresult *res;
	int rc = catsha_run(cat, SA_USAGE, array, &res);
	free(array);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		struct aq_gen_usage u = {
			.extents = catsha_u64(res, r, 1),
			.chunks = catsha_u64(res, r, 2),
			.unique_bytes = catsha_u64(res, r, 3),
			.exclusive_chunks = catsha_u64(res, r, 4),
			.exclusive_bytes = catsha_u64(res, r, 5),
			.exclusive_stored = catsha_u64(res, r, 6),
		};
		assert(u.exclusive_chunks <= u.chunks && u.exclusive_bytes <= u.unique_bytes);
		rc = fn(arg, catsha_u64(res, r, 0), &u);
	}
	PQclear(res);
	return rc;
}

int cat_shared_gen_files(struct cat *cat, uint64_t gen_id, cat_shared_file_fn fn, void *arg)
{
	char id[24];
	PGresult *res;
	int rc = catsha_run(cat, SA_FILES, PG_U64(id, gen_id), &res);
	for (int r = 0; rc == 0 && r < pg_rows(res); r++) {
		struct aq_file f = { catsha_u64(res, r, 0), catsha_u64(res, r, 1),
				     catsha_u64(res, r, 2), catsha_u64(res, r, 3) };
		rc = fn(arg, &f, PQgetvalue(res, r, 4));
	}
	PQclear(res);
	return rc;
}

int cat_shared_gen_shares(struct cat *cat, uint64_t gen_id, struct aq_share **out, size_t *n)
{
	char id[24];
	PGresult *res;
	*out = NULL;
	*n = 0;
	int rc = catsha_run(cat, SA_SHARES, PG_U64(id, gen_id), &res);
	if (rc != 0)
		return rc;
	int rows = pg_rows(res);
	if (rows > 0 && !(*out = calloc((size_t)rows, sizeof(**out))))
		rc = -ENOMEM;
	for (int r = 0; rc == 0 && r < rows; r++)
		(*out)[r] = (struct aq_share){ catsha_u64(res, r, 0), catsha_u64(res, r, 1),
					       catsha_u64(res, r, 2) };
	if (rc == 0)
		*n = (size_t)rows;
	PQclear(res);
	return rc;
}
