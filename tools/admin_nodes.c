/* admin_nodes — `ckptfs-admin nodes URL`: the nodes of a shared catalog
 * (issue 18, docs/MULTINODE.md) as its ckpt_nodes table has them: id, name
 * (node_name=, default host:pid:cache), state (live, expired, gone) and the
 * lease left, by the database server's clock. Read-only; needs no mount and
 * no cache, only the -o meta= URL the nodes mount with. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "lease.h"
#include "pg.h"

#define ADMIN_NODES_MAX 4096
#define ADMIN_NODES_TIMEOUT_MS 10000

static void admin_nodes_print(const struct lease_node *n, size_t count, bool json)
{
	if (json) {
		printf("[");
		for (size_t i = 0; i < count; i++) {
			printf("%s{\"id\":%" PRIu64 ",\"name\":", i ? "," : "", n[i].id);
			admin_json_str(stdout, n[i].name);
			printf(",\"state\":\"%s\",\"lease_left_ms\":%" PRId64 "}", n[i].state, n[i].left_ms);
		}
		printf("]\n");
		return;
	}
	printf("%-6s %-8s %12s  %s\n", "ID", "STATE", "LEASE LEFT", "NAME");
	for (size_t i = 0; i < count; i++) {
		char left[32];
		if (strcmp(n[i].state, "live") == 0) /* a gone or expired node's lease means nothing */
			snprintf(left, sizeof(left), "%.1f s", (double)n[i].left_ms / 1000.0);
		else
			snprintf(left, sizeof(left), "-");
		printf("%-6" PRIu64 " %-8s %12s  %s\n", n[i].id, n[i].state, left, n[i].name);
	}
}

int admin_cmd_nodes(struct admin *a)
{
	char err[1024] = "";
	struct pg *pg = NULL;
	int rc = pg_open(a->target, ADMIN_NODES_TIMEOUT_MS, lease_stmts, lease_nstmts, &pg, err,
			 sizeof(err));
	if (rc != 0) {
		admin_err("nodes: %s", err[0] ? err : strerror(-rc));
		return ADMIN_PROBLEM;
	}
	struct lease_node *nodes = calloc(ADMIN_NODES_MAX, sizeof(*nodes));
	struct lease l = { .pg = pg, .first = 0 };
	size_t count = 0;
	rc = nodes ? lease_list(&l, nodes, ADMIN_NODES_MAX, &count) : -ENOMEM;
	if (rc == 0)
		admin_nodes_print(nodes, count, a->json);
	else
		admin_err("nodes: %s: cannot list the nodes (is it a ckptfs shared catalog?): %s",
			  pg_name(pg), strerror(-rc));
	free(nodes);
	pg_close(pg);
	return rc == 0 ? ADMIN_OK : ADMIN_PROBLEM;
}
