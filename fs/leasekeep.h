/* leasekeep — keeps this node's lease in the shared catalog (issue 18,
 * docs/MULTINODE.md): a thread renews it every third of its term
 * (cat_lease_renew, on the catalog's own second connection, so a slow
 * transaction of the FUSE path never delays it) and sweeps the nodes whose
 * leases ran out (cat_lease_sweep: their open generations are held).
 *
 * Once a renewal answers -ESTALE another node swept this one (it was cut
 * off for longer than its term and the grace, meta/lease.h L1 and L4):
 * the node is fenced for good. One line is logged, renewals stop, and
 * leasekeep_fenced answers true from then on, so the FUSE adapter refuses
 * every change with EROFS; reads go on. The engine fences each shared
 * change too (meta/lease.h L2): this flag is what makes the refusal one
 * clear errno at once instead of each change failing in its transaction.
 *
 * Invariants:
 *  1. fenced goes from false to true once and never back.
 *  2. leasekeep_stop returns only after the thread has ended: the catalog
 *     may be closed right after it. */
#ifndef CKPTFS_LEASEKEEP_H
#define CKPTFS_LEASEKEEP_H

#include <stdbool.h>
#include <stddef.h>

struct cat;
struct leasekeep;

/* Starts the thread on a shared catalog (after daemonizing: threads do not
 * survive fork). lease_ms is the lease's term, as given to cat_open_shared.
 * backing (NULL: none) is where its sweeps look for the objects of lost
 * saves' chunks that their dead holder put there but had not marked
 * uploaded (meta/pggen.h X11), chunk_max the largest chunk's plain bytes;
 * it must outlive the thread. 0, or -errno when the thread cannot start
 * (logged). */
struct backing;
int leasekeep_start(struct cat *cat, unsigned lease_ms, struct backing *backing,
		    size_t chunk_max, struct leasekeep **out);
/* Whether the lease ran out (invariant 1); false for NULL (alone). */
bool leasekeep_fenced(const struct leasekeep *lk);
/* Stops and frees; NULL is allowed. */
void leasekeep_stop(struct leasekeep *lk);

#endif
