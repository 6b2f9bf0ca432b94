/* A private PostgreSQL server for the unit tests; see pgtest.h. */
#define _GNU_SOURCE
#include "pgtest.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
