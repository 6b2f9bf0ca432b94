/* A private PostgreSQL server for the unit tests of the shared catalog
 * (tests/pg/pgserver.sh): started by a suite's .init, stopped by its .fini,
 * and by a watchdog if the test process dies on a signal. Names start with
 * pt_, since every test file shares the unit binary's namespace. */
#ifndef CKPTFS_TESTS_UNIT_PGTEST_H
#define CKPTFS_TESTS_UNIT_PGTEST_H

#include <stdbool.h>
#include <stddef.h>

#include "pgns.h"

extern char pt_dir[64];  /* the server's directory (its socket is there too) */
extern char pt_url[256]; /* its libpq URL */

/* Starts a server on a Unix socket in a new pt_dir. With a network namespace
 * key (pt_net_start), it runs in that namespace and pt_url is a TCP URL. */
void pt_start(void);
void pt_stop(void);

/* pgserver.sh VERB pt_dir: "restart", "kill", "resume". */
void pt_server(const char *verb);

/* The server in namespace ckns-KEY (tests/pg/netns.sh), reached over veth:
 * pt_ns_ip is its address. pt_net_stop also removes the namespace. */
extern char pt_ns_ip[32];
void pt_net_start(void);
void pt_net_stop(void);
/* netns.sh VERB KEY: "cut", "heal". */
void pt_netns(const char *verb);

/* The socket URL of the server (also when it runs in a namespace). */
void pt_local_url(char *out, size_t size);

/* A node of the shared catalog: a connection, a lease, the namespace. */
struct pt_node {
	struct pg *pg;
	struct lease lease;
	struct pgns ns;
};

/* Connects to pt_url, makes the schema, registers a node named name. */
void pt_join(struct pt_node *n, const char *name, unsigned lease_ms);
void pt_leave(struct pt_node *n);
/* pgns_check finds nothing. */
void pt_check(struct pt_node *n);

#endif
