/* reclaimer — the cluster's chunk reclaim duty on this node (issue 18,
 * docs/MULTINODE.md "Reclaim"): in shared mode (-o meta=) a thread asks
 * every period for duty "reclaim" (cat_reclaim_turn, lease.h L3); while
 * this node holds it, the objects of chunks no file names and no writer
 * pins are removed from BACKING, and from this node's cache. One node of
 * the cluster reclaims at a time; a node past its lease removes nothing.
 *
 * Invariants:
 *  1. Only the thread calls cat_reclaim_turn; turns never overlap.
 *  2. reclaimer_stop returns only after the thread has ended: BACKING and
 *     the catalog may be closed right after it.
 *  3. A node that lost BACKING's claim (claim.h 9: a lost holder removes
 *     nothing) takes no turn, and a turn under way removes nothing more
 *     once it is lost (each removal answers -EROFS: the rows stay). */
#ifndef CKPTFS_RECLAIMER_H
#define CKPTFS_RECLAIMER_H

#include <stdint.h>

struct backing;
struct cat;
struct claim;
struct reclaimer;

/* Starts the thread (after daemonizing); period_ms between turns, the duty
 * held for 3 periods; claim: BACKING's (invariant 3; NULL: none). 0, or
 * -errno when the thread cannot start (logged). */
int reclaimer_start(struct cat *cat, struct backing *backing, struct claim *claim,
		    unsigned period_ms, struct reclaimer **out);
/* Objects this node removed from BACKING so far. 0 for NULL. */
uint64_t reclaimer_removed(const struct reclaimer *r);
/* Stops and frees; NULL is allowed. */
void reclaimer_stop(struct reclaimer *r);

#endif
