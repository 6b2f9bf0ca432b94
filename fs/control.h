/* control — the daemon's control channel for ckptfs-admin.
 *
 * A Unix stream socket CACHE/control.sock, mode 0600, owned by the daemon's
 * user. A peer is served only if SO_PEERCRED says it is root or the daemon's
 * uid (the file mode already keeps others out; the check holds even if the
 * mode is widened). One thread serves one request at a time; each connection
 * carries one request and its answer, then closes.
 *
 * Protocol (text, lines ending in \n, at most CONTROL_LINE_MAX bytes each):
 *
 *   request  = "ckptfs-control 1 " VERB *(" " ARG) "\n"
 *   answer   = *( "progress " DONE " " TOTAL "\n"     (long jobs; TOTAL 0: unknown)
 *               | "data " KEY " " VALUE "\n" )        (results, VALUE to end of line)
 *              ( "ok\n" | "error " ERRNO " " MESSAGE "\n" )   (exactly one, last)
 *
 *   VERB                 ARGS               does
 *   hello                -                  data pid/uid/mountpoint/cache/backing/
 *                                           gen_pattern/protocol
 *   commit               GEN_ID             gen_commit_explicit(rule "admin"); data state
 *   pin                  GEN_ID 0|1         gen_pin; data pinned
 *   rm                   GEN_ID [force]     gen_remove; -EBUSY for an OPEN one without force
 *   gc                   dry|run            orphan chunk objects in the cache, then on
 *                                           BACKING: "data cache|backing OBJECTS ORPHANS
 *                                           ORPHAN_BYTES REMOVED FREED_BYTES FAILED"
 *   stats                -                  the daemon's live counters: memory chunk cache,
 *                                           disk cache hits/fetches/evictions, the bounds
 *                                           in force, uploader totals and health
 *   rebuild              -                  EBUSY: a live catalog is never rebuilt
 *
 * wait needs no verb: durability is in the catalog (cat_gen_durable), which
 * the tool polls read-only.
 *
 * ERRNO is a positive errno number: ENOENT unknown generation, EBUSY open
 * generation without force, EPERM peer not allowed, EINVAL bad request,
 * ENOSYS verb not available in this daemon.
 *
 * Invariants:
 *  1. Every state change goes through the module that owns it (gen.c for
 *     generations, the catalog for chunks): control only decodes and calls.
 *  2. Exactly one final line per request, on every path. */
#ifndef CKPTFS_CONTROL_H
#define CKPTFS_CONTROL_H

#define CONTROL_SOCK_NAME "control.sock"
#define CONTROL_MAGIC "ckptfs-control 1"
#define CONTROL_LINE_MAX 4096

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
