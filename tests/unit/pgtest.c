/* A private PostgreSQL server for the unit tests; see pgtest.h. */
#define _GNU_SOURCE
#include "pgtest.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "generation.h"
#include "manifest.h"
#include "manifest_shared.h"
#include "store.h"
#include "support.h"
#include "upload.h"

char pt_dir[64];
char pt_url[256];
char pt_ns_ip[32];
static int pt_key = -1;

void pt_server(const char *verb)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "tests/pg/pgserver.sh %s %s", verb, pt_dir);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

/* Runs cmd and puts its first line of output into out. */
static void pt_run_line(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	out[0] = '\0';
	cr_assert_not_null(fgets(out, (int)size, p), "%s printed nothing", cmd);
	cr_assert_eq(pclose(p), 0, "%s failed", cmd);
	out[strcspn(out, "\n")] = '\0';
}

static void pt_start_env(const char *env)
{
	snprintf(pt_dir, sizeof(pt_dir), "/tmp/ckptfs-pg-%d-%ld", (int)getpid(), (long)time(NULL));
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s tests/pg/pgserver.sh start %s %d", env, pt_dir, (int)getpid());
	pt_run_line(cmd, pt_url, sizeof(pt_url));
}

void pt_start(void)
{
	pt_start_env("");
}

void pt_stop(void)
{
	pt_server("stop");
}

void pt_netns(const char *verb)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "tests/pg/netns.sh %s %d", verb, pt_key);
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

void pt_net_start(void)
{
	pt_key = (int)(getpid() % 32768);
	char cmd[256], line[128], env[128];
	snprintf(cmd, sizeof(cmd), "tests/pg/netns.sh up %d %d", pt_key, (int)getpid());
	pt_run_line(cmd, line, sizeof(line));
	cr_assert_eq(sscanf(line, "%*s %31s", pt_ns_ip), 1, "netns.sh up printed %s", line);
	snprintf(env, sizeof(env), "PG_NETNS_KEY=%d PG_ADDR=%s", pt_key, pt_ns_ip);
	pt_start_env(env);
}

void pt_net_stop(void)
{
	pt_stop();
	pt_netns("down");
}

void pt_local_url(char *out, size_t size)
{
	snprintf(out, size, "postgresql://ckptfs@/ckptfs?host=%s&port=5432", pt_dir);
}

/* ---- nodes ---- */

void pt_join(struct pt_node *n, const char *name, unsigned lease_ms)
{
	size_t count;
	const struct pg_stmt *stmts = pgns_stmts_all(&count);
	char err[512] = "";
	int rc = pg_open(pt_url, 10000, stmts, count, &n->pg, err, sizeof(err));
	cr_assert_eq(rc, 0, "pg_open: %s", err);
	OK(lease_schema(n->pg));
	OK(pgns_schema(n->pg, 0, 0));
	memset(&n->lease, 0, sizeof(n->lease));
	n->lease.pg = n->pg;
	OK(lease_register(&n->lease, name, lease_ms));
	n->ns = (struct pgns){ .pg = n->pg, .lease = &n->lease, .first = lease_nstmts,
			       .first_gen = lease_nstmts + pgns_nstmts };
}

void pt_leave(struct pt_node *n)
{
	pg_close(n->pg);
}

void pt_check(struct pt_node *n)
{
	int violations = -1;
	OK(pgns_check(&n->ns, &violations));
	cr_assert_eq(violations, 0, "pgns_check found %d violations", violations);
}


/* ---- a node's catalog ---- */

static int pt_cat_open_in(struct pt_cat *n, const char *name, const char *url, unsigned lease_ms,
			  cat_reclaim_fn reclaim, void *reclaim_arg, char *err, size_t err_size)
{
	struct cat_shared_cfg cfg = { .url = url, .node_name = name, .lease_ms = lease_ms,
				      .timeout_ms = 5000 };
	return cat_open_shared(n->path, &cfg, 0, 0, reclaim, reclaim_arg, &n->cat, err, err_size);
}

/* The open succeeded: a shared catalog, with this node's id. */
static void pt_cat_opened(const struct pt_cat *n, int rc, const char *err)
{
	cr_assert_eq(rc, 0, "cat_open_shared: %d %s", rc, err);
	cr_assert(cat_is_shared(n->cat));
	cr_assert_neq(cat_node_id(n->cat), 0);
}

int pt_cat_try_open(struct pt_cat *n, const char *name, const char *url, unsigned lease_ms,
		    cat_reclaim_fn reclaim, void *reclaim_arg, char *err, size_t err_size)
{
	n->cat = NULL;
	ts_tmpdir_make(n->dir, sizeof(n->dir), name);
	snprintf(n->path, sizeof(n->path), "%s/catalog.db", n->dir);
	return pt_cat_open_in(n, name, url, lease_ms, reclaim, reclaim_arg, err, err_size);
}

void pt_cat_open(struct pt_cat *n, const char *name, unsigned lease_ms, cat_reclaim_fn reclaim,
		 void *reclaim_arg)
{
	char err[512] = "";
	int rc = pt_cat_try_open(n, name, pt_url, lease_ms, reclaim, reclaim_arg, err, sizeof(err));
	pt_cat_opened(n, rc, err);
}

void pt_cat_reopen(struct pt_cat *n, const char *name, unsigned lease_ms, cat_reclaim_fn reclaim,
		   void *reclaim_arg)
{
	cat_close(n->cat);
	n->cat = NULL;
	char err[512] = "";
	int rc = pt_cat_open_in(n, name, pt_url, lease_ms, reclaim, reclaim_arg, err, sizeof(err));
	pt_cat_opened(n, rc, err);
}

void pt_cat_close(struct pt_cat *n)
{
	cat_close(n->cat);
	n->cat = NULL;
	ts_tmpdir_remove(n->dir);
}

int64_t pt_cat_local_rows(const struct pt_cat *n, const char *table, const char *where)
{
	sqlite3 *db;
	cr_assert_eq(sqlite3_open_v2(n->path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	char sql[256];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE %s", table, where ? where : "1");
	sqlite3_stmt *st;
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s",
		     sqlite3_errmsg(db));
	cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
	int64_t rows = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return rows;
}

int pt_cat_upload_chunks(struct pt_cat *n, const uint8_t *hash, int *stale)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(n->cat, 0, rows, 64), done = 0, moot_rows = 0;
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++) {
		if (rows[i].kind != UP_CHUNK)
			continue;
		if (hash && memcmp(rows[i].hash, hash, CAT_HASH_LEN) != 0)
			continue;
		bool ready = false, moot = false;
		OK(cat_upload_ready(n->cat, &rows[i], &ready, &moot));
		if (ready || moot)
			OK(cat_upload_done(n->cat, &rows[i]));
		done += ready;
		moot_rows += moot;
	}
	if (stale)
		*stale = moot_rows;
	return done;
}

void pt_cat_tree_described(struct pt_cat *n)
{
	char fp[128];
	bool all = false;
	int64_t clock_ns = 0;
	OK(manifest_shared_tree_fingerprint(n->cat, fp, sizeof(fp), &all, &clock_ns));
	OK(manifest_shared_tree_described(n->cat, clock_ns));
}

uint64_t pt_cat_mkgen(struct pt_cat *n, uint64_t series, const char *name, uint64_t step,
		      uint64_t *root)
{
	struct cat_gen_spec spec = { name, step };
	struct cat_inode in;
	uint64_t gen = 0;
	OK(cat_create_in_gen(n->cat, series, name, S_IFDIR | 0755, 0, 0, 0, NULL, &spec, &in,
			     &gen));
	cr_assert(gen != 0);
	if (root)
		*root = in.ino;
	return gen;
}

void pt_backing_open(struct pt_backing *bk, const char *tag)
{
	ts_tmpdir_make(bk->dir, sizeof(bk->dir), tag);
	OK(backing_open(bk->dir, 5000, &bk->b));
}

void pt_backing_close(struct pt_backing *bk)
{
	backing_close(bk->b);
	ts_tmpdir_remove(bk->dir);
}

int pt_backing_remove(void *arg, const char *path)
{
	int rc = backing_remove(arg, path);
	return rc == -ENOENT ? 0 : rc;
}

bool pt_on_backing(struct pt_backing *bk, const uint8_t hash[CAT_HASH_LEN])
{
	char rel[128];
	uint64_t size;
	store_object_relpath(hash, rel, sizeof(rel));
	int rc = backing_stat(bk->b, rel, &size);
	cr_assert(rc == 0 || rc == -ENOENT, "backing_stat: %d", rc);
	return rc == 0;
}

/* n's queued generation manifests, as fs/uploader.c up_gen_manifest writes
 * them: each ready one built, put, the version before removed, done.
 * Returns how many were put. */
void pt_cat_upload_put(struct pt_cat *n, struct pt_backing *bk)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(n->cat, 0, rows, 64);
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++) {
		if (rows[i].kind != UP_CHUNK)
			continue;
		bool ready = false, stale = false;
		OK(cat_upload_ready(n->cat, &rows[i], &ready, &stale));
		if (ready) {
			char rel[128];
			store_object_relpath(rows[i].hash, rel, sizeof(rel));
			OK(backing_put(bk->b, rel, "x", 1));
		}
		if (ready || stale)
			OK(cat_upload_done(n->cat, &rows[i]));
	}
}

int pt_cat_put_manifests(struct pt_cat *n, struct pt_backing *bk)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(n->cat, 0, rows, 64), put = 0;
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++) {
		if (rows[i].kind != UP_GEN_MANIFEST)
			continue;
		bool ready = false, stale = false;
		OK(cat_upload_ready(n->cat, &rows[i], &ready, &stale));
		if (!ready && !stale)
			continue;
		char *text = NULL, path[MANIFEST_PATH_MAX];
		size_t len = 0;
		int rc = manifest_gen_build(n->cat, rows[i].gen, rows[i].version, &text, &len);
		cr_assert(rc == 0 || rc == -ESTALE || rc == -ENOENT, "manifest_gen_build: %d", rc);
		if (rc == 0) {
			manifest_gen_path(rows[i].gen, rows[i].version, path, sizeof(path));
			OK(backing_put(bk->b, path, text, len));
			put++;
			if (rows[i].version > 1) {
				manifest_gen_path(rows[i].gen, rows[i].version - 1, path, sizeof(path));
				(void)backing_remove(bk->b, path);
			}
		}
		free(text);
		OK(cat_upload_done(n->cat, &rows[i]));
	}
	return put;
}
