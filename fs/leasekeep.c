/* leasekeep — the node lease's renewal thread; the contract is in
 * leasekeep.h.
 *
 *   renew ──┬─ 0 ─────────▶ sweep others ─▶ sleep lease/3 ─▶ renew
 *           ├─ -ESTALE ───▶ fenced (logged once), the thread ends
 *           └─ other ─────▶ logged when it starts failing ─▶ sleep ─▶ renew
 *
 * A renewal that fails for another reason (PostgreSQL away, the link cut)
 * is tried again at the next tick. A lease that ran out meanwhile is still
 * renewed unless another node swept it (meta/lease.h L1); if it was, the
 * first renewal that reaches the server answers -ESTALE.
 *
 * Sweeping waits until renewals have succeeded without a gap for a whole
 * term (lease.h L4): after PostgreSQL was away, every node has then had
 * several ticks to renew, so none is swept for the outage alone.
 *
 * A sweep also settles the nodes an earlier sweep, by any node, expired
 * and left unsettled (lease.h L7), and re-checks a batch of lost saves
 * (pggen.h X10): a failed settlement is the next tick's work, so a tick
 * that fails is logged and the thread goes on. Given BACKING, the sweep
 * also looks there for the objects of lost saves' chunks their dead holder
 * had not marked uploaded (X11): leasekeep_backing_check reads each whole
 * and checks it as a fetch does (bkobj_get: header, lengths, decoding,
 * SHA-256; a damaged object told from a BACKING that could not be read,
 * bkobj.h B1). */
#define _GNU_SOURCE
#include "leasekeep.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backing.h"
#include "bkobj.h"
#include "catalog.h"
#include "codec.h"
#include "log.h"
#include "store.h"
#include "ticker.h"

struct leasekeep {
	struct cat *cat;
	unsigned period_ms; /* lease/3 */
	int fenced;         /* invariant 1; read with atomics, lock-free */
	bool failing;       /* the last renewal failed (logged at the change) */
	unsigned lease_ms;
	struct timespec steady_since; /* first renewal after the last failure or stall (L4) */
	struct timespec last_ok;      /* when the last renewal was answered */
	struct ticker *ticker;        /* renews at once, then every period_ms */
	struct backing *backing;      /* X11's look on BACKING; NULL: none */
	size_t chunk_max;             /* the largest chunk's plain bytes */
};

/* cat_backing_check_fn (pggen.h X11): chunk hash's object read from BACKING
 * whole and checked as a fetch checks it (bkobj_get). -EIO is a verdict on
 * the bytes read (bkobj.h B1's -EBADMSG: the caller remembers the object as
 * damaged); an error reading them is not, and is returned as another errno
 * (looked at again): BACKING's -EIO (an nfs:// transport error is EIO too)
 * as -EAGAIN. */
static int leasekeep_backing_check(void *arg, const uint8_t hash[CAT_HASH_LEN],
				   uint64_t plain_len, const char **why)
{
	struct leasekeep *lk = arg;
	*why = NULL;
	if (plain_len == 0 || plain_len > lk->chunk_max) {
		*why = "its row's plain length is not a chunk's";
		return -EIO;
	}
	struct bkobj_read r = { .obj_cap = STORE_HEADER_LEN + codec_bound((size_t)plain_len),
				.plain_cap = (size_t)plain_len };
	r.obj = malloc(r.obj_cap);
	r.plain = malloc(r.plain_cap);
	int rc = r.obj && r.plain ? bkobj_get(lk->backing, hash, NULL, &r, why) : -ENOMEM;
	if (rc == 0 && r.plain_len != plain_len) {
		*why = "its plain length differs from its row's";
		rc = -EBADMSG;
	}
	free(r.obj);
	free(r.plain);
	if (rc == -EBADMSG)
		return -EIO; /* the verdict, in cat_backing_check_fn's words */
	if (rc == -EIO)
		return -EAGAIN; /* no verdict: the next sweep reads it again */
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

bool leasekeep_fenced(const struct leasekeep *lk)
{
	return lk && __atomic_load_n(&lk->fenced, __ATOMIC_ACQUIRE);
}

static int64_t leasekeep_ms_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* One tick: false once fenced (the thread ends, ticker.h T3). */
static bool leasekeep_tick(void *arg)
{
	struct leasekeep *lk = arg;
	struct timespec sent;
	clock_gettime(CLOCK_MONOTONIC, &sent);
	int rc = cat_lease_renew(lk->cat);
	if (rc == -ESTALE) {
		__atomic_store_n(&lk->fenced, 1, __ATOMIC_RELEASE);
		log_error("shared catalog: another node swept this one (its lease ran out while it "
			  "was cut off from PostgreSQL): the mount is read-only from now on (changes "
			  "fail with EROFS); remount it to write again");
		return false;
	}
	if (rc != 0) {
		if (!lk->failing)
			log_warn("shared catalog: cannot renew this node's lease: %s (tried again "
				 "every %u ms)", strerror(-rc), lk->period_ms);
		lk->failing = true;
		return true;
	}
	if (lk->failing) {
		log_info("shared catalog: this node's lease renewed again");
		clock_gettime(CLOCK_MONOTONIC, &lk->steady_since);
	}
	/* L4: a renewal answered late, or long after the one before it, is a
	 * stall (PostgreSQL paused, a lock wait, this host paused): the other
	 * nodes' renewals may be queued behind it, so no sweep for a term
	 * (review 45 F2: the first tick after a 12 s stall swept a healthy
	 * node) */
	long took = leasekeep_ms_since(&sent), gap = leasekeep_ms_since(&lk->last_ok);
	if (!lk->failing && (took > (long)lk->period_ms || gap > (long)lk->lease_ms)) {
		log_info("shared catalog: this node's lease renewal was answered after %ld ms (%ld ms"
			 " since the one before): no node is swept for a term (lease.h L4)", took, gap);
		clock_gettime(CLOCK_MONOTONIC, &lk->steady_since);
	}
	clock_gettime(CLOCK_MONOTONIC, &lk->last_ok);
	lk->failing = false;
	if (leasekeep_ms_since(&lk->steady_since) < lk->lease_ms)
		return true; /* L4: renewing steadily for a whole term before sweeping */
	size_t swept = 0;
	rc = cat_lease_sweep_backing(lk->cat, lk->backing ? leasekeep_backing_check : NULL, lk,
				     &swept);
	if (rc != 0 && rc != -ESTALE)
		log_warn("shared catalog: sweeping nodes whose leases ran out failed: %s (tried "
			 "again at the next renewal)", strerror(-rc));
	else if (swept)
		log_info("shared catalog: %zu node(s) whose leases ran out settled: their open "
			 "generations are held", swept);
	return true;
}

int leasekeep_start(struct cat *cat, unsigned lease_ms, struct backing *backing,
		    size_t chunk_max, struct leasekeep **out)
{
	assert(cat && cat_is_shared(cat) && lease_ms >= 3);
	*out = NULL;
	struct leasekeep *lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->cat = cat;
	lk->period_ms = lease_ms / 3;
	lk->lease_ms = lease_ms;
	lk->backing = backing;
	lk->chunk_max = chunk_max;
	clock_gettime(CLOCK_MONOTONIC, &lk->steady_since); /* L4: a term before the first sweep */
	lk->last_ok = lk->steady_since;
	int rc = ticker_start(lk->period_ms, TICKER_FIRST_AT_ONCE, leasekeep_tick, lk, &lk->ticker);
	if (rc != 0) {
		log_error("shared catalog: cannot start the lease renewal thread: %s", strerror(-rc));
		free(lk);
		return rc;
	}
	*out = lk;
	return 0;
}

void leasekeep_stop(struct leasekeep *lk)
{
	if (!lk)
		return;
	ticker_stop(lk->ticker); /* invariant 2: ticker.h T2 */
	free(lk);
}
