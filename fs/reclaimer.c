/* reclaimer — the reclaim duty's thread; the contract is in reclaimer.h.
 *
 *   turn ──┬─ duty held ─▶ objects removed (counted, logged) ─▶ sleep ─▶ turn
 *          ├─ not held ──▶ sleep ─▶ turn
 *          └─ error ─────▶ logged when it starts failing ─▶ sleep ─▶ turn
 *
 * The catalog does the work (meta/catalog_shared_reclaim.c R1-R4); this
 * module only supplies the BACKING removal and the schedule. */
#define _GNU_SOURCE
#include "reclaimer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backing.h"
#include "catalog.h"
#include "claim.h"
#include "log.h"
#include "ticker.h"

struct reclaimer {
	struct cat *cat;
	struct backing *backing;
	struct claim *claim; /* invariant 3 */
	unsigned period_ms;
	uint64_t removed; /* read with atomics */
	bool failing;     /* the last turn failed (logged at the change) */
	struct ticker *ticker; /* a turn every period_ms, the first one period in */
};

uint64_t reclaimer_removed(const struct reclaimer *r)
{
	return r ? __atomic_load_n(&r->removed, __ATOMIC_RELAXED) : 0;
}

/* A chunk's object or a manifest on BACKING; absent is success. Lost the
 * claim: -EROFS, nothing removed (invariant 3). */
static int reclaimer_remove(void *arg, const char *path)
{
	struct reclaimer *r = arg;
	if (!claim_may_write(r->claim))
		return -EROFS;
	int rc = backing_remove(r->backing, path);
	return rc == -ENOENT ? 0 : rc;
}

/* One turn, on the ticker's thread only (invariant 1: ticker.h T1). */
static bool reclaimer_turn(void *arg)
{
	struct reclaimer *r = arg;
	if (claim_lost(r->claim))
		return true; /* invariant 3: no turn (the fence is logged by claim.c) */
	struct cat_reclaim_report rep;
	int rc = cat_reclaim_turn(r->cat, 3 * r->period_ms, reclaimer_remove, r, &rep);
	if (rep.removed) {
		__atomic_add_fetch(&r->removed, rep.removed, __ATOMIC_RELAXED);
		log_info("reclaim: %" PRIu64 " chunk(s) no file names reclaimed, %" PRIu64
			 " object(s) removed from BACKING", rep.chunks, rep.removed);
	}
	if (rep.manifests)
		log_info("reclaim: the manifests of %" PRIu64 " ended generation(s) removed from"
			 " BACKING", rep.manifests);
	if (rc != 0 && rc != -ESTALE) {
		if (!r->failing)
			log_warn("reclaim: a turn failed: %s (tried again every %u ms)",
				 strerror(-rc), r->period_ms);
		r->failing = true;
		return true;
	}
	if (r->failing && rc == 0)
		log_info("reclaim: turns succeed again");
	r->failing = rc != 0;
	return true;
}

int reclaimer_start(struct cat *cat, struct backing *backing, struct claim *claim,
		    unsigned period_ms, struct reclaimer **out)
{
	*out = NULL;
	struct reclaimer *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cat = cat;
	r->backing = backing;
	r->claim = claim;
	r->period_ms = period_ms ? period_ms : 1;
	int rc = ticker_start(r->period_ms, TICKER_FIRST_AFTER_PERIOD, reclaimer_turn, r,
			      &r->ticker);
	if (rc != 0) {
		log_error("shared catalog: cannot start the reclaim thread: %s", strerror(-rc));
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void reclaimer_stop(struct reclaimer *r)
{
	if (!r)
		return;
	ticker_stop(r->ticker); /* invariant 2: ticker.h T2 */
	free(r);
}
