/* control — the daemon's control channel for ckptfs-admin.
 *
 * A Unix stream socket CACHE/control.sock, mode 0600, owned by the daemon's
 * user. A peer is served only if SO_PEERCRED says it is root or the daemon's
 * uid (the file mode already keeps others out; the check holds even if the
 * mode is widened). One thread serves one request at a time; each connection
 * carries one request and its answer, then closes.
 *
 * The wire protocol (verbs, answers, the socket's name) is fs/lib/control_proto.h,
 * shared with ckptfs-admin (tools/admin_ctl.c).
 *
 * Invariants:
 *  1. Every state change goes through the module that owns it (gen.c for
 *     generations, the catalog for chunks): control only decodes and calls.
 *  2. Exactly one final line per request, on every path. */
#ifndef CKPTFS_CONTROL_H
#define CKPTFS_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

#include "control_proto.h"

struct backing;
struct cache;
struct cache_stats;
struct cat;
struct control;
struct gen_policy;
struct node_table;
struct reader;
struct recent;
struct uploader;
struct uploader_stats;

/* What control reads and calls. The calls into the daemon's other services
 * are function pointers of their own signatures (main.c hands in gen_pin,
 * node_release_flush, cache_get_stats, ...) so that control links without
 * them; a NULL getter leaves its counters out of stats, a NULL generation
 * verb answers ENOSYS. */
struct wbuf;

struct control_deps {
	struct cat *cat;             /* the daemon's catalog (after fork) */
	struct backing *backing;     /* gc of BACKING's side */
	struct reader *reader;       /* decoded-chunk cache counters; may be NULL */
	struct recent *recent;       /* chunk-hash reuse counters; may be NULL */
	struct gen_policy *gen;
	struct node_table *nodes;
	struct cache *cache;         /* may be NULL */
	struct uploader *uploader;   /* may be NULL */
	struct wbuf *wbuf;           /* writers' buffers (wbuf.h); may be NULL */
	struct claim *claim;         /* BACKING's: changes refused once fenced (claim.h 9) */

	int (*gen_commit)(struct gen_policy *g, uint64_t gen_id, const char *rule);
	int (*gen_pin)(struct gen_policy *g, uint64_t gen_id, bool pinned);
	int (*gen_remove)(struct gen_policy *g, uint64_t gen_id, bool force);
	/* inodes waiting for release go now: gc and stats see the catalog as of now */
	void (*nodes_flush)(struct node_table *t);
	void (*cache_stats)(struct cache *c, struct cache_stats *out);
	void (*uploader_stats)(struct uploader *u, struct uploader_stats *out);

	/* the option values it prints or derives from (strings: valid until control_stop) */
	const char *cache_dir;       /* CACHE: the socket, gc of the cache's side */
	const char *mountpoint;
	const char *backing_spec;    /* BACKING as given */
	const char *gen_pattern;     /* the generation pattern in force */
	uint64_t cache_size;         /* -o cache_size as resolved by main.c (0: unbounded) */
	uint64_t dirty_max;          /* -o dirty_max (0: 3/4 of the bound) */
};

/* Binds CACHE/control.sock (replacing a stale one: the caller holds the cache
 * lock) and starts the serving thread. deps is copied. Failure is logged; the
 * daemon runs on without a control channel. */
int control_start(const struct control_deps *deps, struct control **out);
/* Stops the thread, removes the socket. NULL is allowed. */
void control_stop(struct control *c);

/* The daemon's live counters as the stats verb sends them ("KEY VALUE", the
 * keys of fs/statset.h), to fn; for the metrics endpoint too (fs/metrics.c).
 * Safe from any thread: each module's getter takes its own lock. */
typedef void (*control_stat_fn)(void *arg, const char *key, const char *value);
void control_stats_each(struct control *c, control_stat_fn fn, void *arg);

#endif
