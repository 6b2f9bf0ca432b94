/* A private PostgreSQL server for the unit tests; see pgtest.h. */
#define _GNU_SOURCE
#include "pgtest.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

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

