/* metrics — the daemon's Prometheus endpoint (-o metrics=ADDR:PORT).
 *
 * GET /metrics answers the text exposition format (fs/statset.h): what the
 * catalog knows, read through a read-only connection of this module's own
 * (WAL readers never block the daemon), and the daemon's live counters
 * (control_stats_each). The HTTP server is libmicrohttpd's, one internal
 * polling thread; every other path is 404, every other method 405.
 *
 * Invariants:
 *  1. Only this module's thread uses its catalog connection.
 *  2. A scrape changes nothing: no catalog write, no flush. */
#ifndef CKPTFS_METRICS_H
#define CKPTFS_METRICS_H

struct control;
struct metrics;

/* What the endpoint serves; strings valid until metrics_stop. */
struct metrics_deps {
	const char *addr;       /* -o metrics=ADDR:PORT; "" for none */
	const char *cache_dir;  /* CACHE: its catalog, opened read-only here; a label */
	const char *mountpoint; /* a label */
	struct control *ctl;    /* the daemon's live counters; NULL: catalog figures only */
};

/* Parses "HOST:PORT" ("127.0.0.1:9567", "[::1]:9567", "0.0.0.0:9567"). 0, or
 * -EINVAL with why set to the reason. For options.c. */
int metrics_check_addr(const char *spec, const char **why);

/* Starts serving deps->addr (nothing if it is empty). deps is copied. Failure
 * is logged and returned; the mount works without it. */
int metrics_start(const struct metrics_deps *deps, struct metrics **out);
void metrics_stop(struct metrics *m); /* NULL is allowed */

#endif
