/* leasekeep — the node lease's renewal thread; the contract is in
 * leasekeep.h.
 *
 *   renew ──┬─ 0 ─────────▶ sweep others ─▶ sleep lease/3 ─▶ renew
 *           ├─ -ESTALE ───▶ fenced (logged once), the thread ends
 *           └─ other ─────▶ logged when it starts failing ─▶ sleep ─▶ renew
 *
 * A renewal that fails for another reason (PostgreSQL away, the link cut)
 * is tried again at the next tick; the lease runs out on the server's clock
 * if the failures last a whole term, and the first renewal that reaches it
 * then answers -ESTALE. */
#define _GNU_SOURCE
#include "leasekeep.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "log.h"

struct leasekeep {
	struct cat *cat;
	unsigned period_ms; /* lease/3 */
	int fenced;         /* invariant 1; read with atomics, lock-free */
	bool failing;       /* the last renewal failed (logged at the change) */
	bool stop;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
};

bool leasekeep_fenced(const struct leasekeep *lk)
{
	return lk && __atomic_load_n(&lk->fenced, __ATOMIC_ACQUIRE);
}

/* One tick: false once fenced (the thread ends). */
static bool leasekeep_tick(struct leasekeep *lk)
{
	int rc = cat_lease_renew(lk->cat);
	if (rc == -ESTALE) {
		__atomic_store_n(&lk->fenced, 1, __ATOMIC_RELEASE);
		log_error("shared catalog: this node's lease ran out (cut off from PostgreSQL for "
			  "longer than lease_ms): the mount is read-only from now on (changes fail "
			  "with EROFS); remount it to write again");
		return false;
	}
	if (rc != 0) {
		if (!lk->failing)
			log_warn("shared catalog: cannot renew this node's lease: %s (tried again "
				 "every %u ms)", strerror(-rc), lk->period_ms);
		lk->failing = true;
		return true;
	}
	if (lk->failing)
		log_info("shared catalog: this node's lease renewed again");
	lk->failing = false;
	size_t swept = 0;
	rc = cat_lease_sweep(lk->cat, &swept);
	if (rc != 0 && rc != -ESTALE)
		log_warn("shared catalog: sweeping nodes whose leases ran out failed: %s (tried "
			 "again at the next renewal)", strerror(-rc));
	else if (swept)
		log_info("shared catalog: %zu node(s) whose leases ran out swept: their open "
			 "generations are held", swept);
	return true;
}

static void leasekeep_deadline(struct timespec *until, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

static void *leasekeep_thread(void *arg)
{
	struct leasekeep *lk = arg;
	pthread_mutex_lock(&lk->lock);
	while (!lk->stop) {
		pthread_mutex_unlock(&lk->lock);
		bool go_on = leasekeep_tick(lk);
		pthread_mutex_lock(&lk->lock);
		if (!go_on)
			break;
		struct timespec until;
		leasekeep_deadline(&until, lk->period_ms);
		while (!lk->stop && pthread_cond_timedwait(&lk->wake, &lk->lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&lk->lock);
	return NULL;
}

int leasekeep_start(struct cat *cat, unsigned lease_ms, struct leasekeep **out)
{
	assert(cat && cat_is_shared(cat) && lease_ms >= 3);
	*out = NULL;
	struct leasekeep *lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	lk->cat = cat;
	lk->period_ms = lease_ms / 3;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&lk->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&lk->lock, NULL);
	int rc = pthread_create(&lk->thread, NULL, leasekeep_thread, lk);
	if (rc != 0) {
		log_error("shared catalog: cannot start the lease renewal thread: %s", strerror(rc));
		pthread_cond_destroy(&lk->wake);
		pthread_mutex_destroy(&lk->lock);
		free(lk);
		return -rc;
	}
	*out = lk;
	return 0;
}

void leasekeep_stop(struct leasekeep *lk)
{
	if (!lk)
		return;
	pthread_mutex_lock(&lk->lock);
	lk->stop = true;
	pthread_cond_signal(&lk->wake);
	pthread_mutex_unlock(&lk->lock);
	pthread_join(lk->thread, NULL); /* invariant 2 */
	pthread_cond_destroy(&lk->wake);
	pthread_mutex_destroy(&lk->lock);
	free(lk);
}
