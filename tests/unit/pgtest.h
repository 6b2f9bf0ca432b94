/* A private PostgreSQL server for the unit tests of the shared catalog
 * (tests/pg/pgserver.sh): started by a suite's .init, stopped by its .fini,
 * and by a watchdog if the test process dies on a signal. Names start with
 * pt_, since every test file shares the unit binary's namespace.
 *
 * On it, the nodes the tests play: pt_node (the namespace's own layers,
 * test_pgns, test_pggen) and pt_cat (a whole catalog in shared mode, the
 * test_catshared*.c files), with the few steps those tests all take. */
#ifndef CKPTFS_TESTS_UNIT_PGTEST_H
#define CKPTFS_TESTS_UNIT_PGTEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h"
#include "catalog.h"
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

/* A node's catalog in shared mode (cat_open_shared), as the daemon opens it:
 * its cache directory (a new temporary directory), the local catalog file in
 * it, and the open catalog. Calls ride out an unreachable server for 5 s. */
struct pt_cat {
	char dir[64], path[160];
	struct cat *cat;
};

/* Makes n's directory and opens its catalog on url as node name; reclaim
 * (NULL allowed) is the local cache's reclaim callback. cat_open_shared's
 * return, err filled on failure (n->cat NULL then, n->dir still to remove). */
int pt_cat_try_open(struct pt_cat *n, const char *name, const char *url, unsigned lease_ms,
		    cat_reclaim_fn reclaim, void *reclaim_arg, char *err, size_t err_size);
/* The same on pt_url, asserted to succeed: a shared catalog, a node id. */
void pt_cat_open(struct pt_cat *n, const char *name, unsigned lease_ms, cat_reclaim_fn reclaim,
		 void *reclaim_arg);
/* Closes n's catalog and opens the same directory's again (a restart). */
void pt_cat_reopen(struct pt_cat *n, const char *name, unsigned lease_ms, cat_reclaim_fn reclaim,
		   void *reclaim_arg);
/* Closes the catalog (NULL allowed: n->cat is NULLed) and removes n's directory. */
void pt_cat_close(struct pt_cat *n);

/* Rows of a table of n's local catalog matching where (NULL: all), read
 * with a connection of the test's own. */
int64_t pt_cat_local_rows(const struct pt_cat *n, const char *table, const char *where);
/* Does the uploader's part for the chunk rows queued on n whose hash is hash
 * (NULL: any): marks done each one cat_upload_ready lets start. Returns how
 * many were done as uploads (ready); *stale (NULL allowed) how many were
 * dropped as moot. */
int pt_cat_upload_chunks(struct pt_cat *n, const uint8_t *hash, int *stale);
/* As the tree manifest's writer that found the one on BACKING current
 * (manifest_shared.h D6): the reclaim horizon moves to the server's clock
 * now, so a reclaim turn takes what earlier turns saw free. */
void pt_cat_tree_described(struct pt_cat *n);

/* A BACKING directory of the test's own, opened as the daemon opens one:
 * what a reclaim removes from and a manifest is put on. */
struct pt_backing {
	char dir[64];
	struct backing *b;
};
void pt_backing_open(struct pt_backing *bk, const char *tag);
/* n's queued chunk uploads, as the uploader does them: each one ready put
 * on bk (a one-byte object) and done, each one stale done. */
void pt_cat_upload_put(struct pt_cat *n, struct pt_backing *bk);
/* n's queued generation manifests, as fs/uploader.c up_gen_manifest writes
 * them: each ready one built, put on bk, the version before removed, done
 * (a stale one dropped). Returns how many were put. */
int pt_cat_put_manifests(struct pt_cat *n, struct pt_backing *bk);
void pt_backing_close(struct pt_backing *bk);
/* The reclaimer's removal (fs/reclaimer.c): absent is success. */
int pt_backing_remove(void *arg, const char *path);
/* Whether chunk hash's object is on bk. */
bool pt_on_backing(struct pt_backing *bk, const uint8_t hash[CAT_HASH_LEN]);
/* Makes directory name in series on n as generation (name, step); returns
 * its id, and its root directory's inode in *root (NULL allowed). */
uint64_t pt_cat_mkgen(struct pt_cat *n, uint64_t series, const char *name, uint64_t step,
		      uint64_t *root);

#endif
