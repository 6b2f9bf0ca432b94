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

#include "control_proto.h"

struct ckptfs;
struct control;

/* Binds CACHE/control.sock (replacing a stale one: the caller holds the cache
 * lock) and starts the serving thread. Failure is logged; the daemon runs on
 * without a control channel. */
int control_start(struct ckptfs *fs, struct control **out);
/* Stops the thread, removes the socket. NULL is allowed. */
void control_stop(struct control *c);

/* The daemon's live counters as the stats verb sends them ("KEY VALUE", the
 * keys of fs/statset.h), to fn; for the metrics endpoint too (fs/metrics.c).
 * Safe from any thread: each module's getter takes its own lock. */
typedef void (*control_stat_fn)(void *arg, const char *key, const char *value);
void control_stats_each(struct control *c, control_stat_fn fn, void *arg);

#endif
