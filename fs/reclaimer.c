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
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backing.h"
#include "catalog.h"
#include "log.h"
#include "store.h"

struct reclaimer {
	struct cat *cat;
	struct backing *backing;
	unsigned period_ms;
	uint64_t removed; /* read with atomics */
	bool failing;     /* the last turn failed (logged at the change) */
	bool stop;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
};

uint64_t reclaimer_removed(const struct reclaimer *r)
{
	return r ? __atomic_load_n(&r->removed, __ATOMIC_RELAXED) : 0;
}

/* A chunk's object on BACKING, where the uploader put it; absent is success. */
static int reclaimer_remove(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	int rc = backing_remove(arg, rel);
	return rc == -ENOENT ? 0 : rc;
}

static void reclaimer_turn(struct reclaimer *r)
{
	struct cat_reclaim_report rep;
	int rc = cat_reclaim_turn(r->cat, 3 * r->period_ms, reclaimer_remove, r->backing, &rep);
	if (rep.removed) {
		__atomic_add_fetch(&r->removed, rep.removed, __ATOMIC_RELAXED);
		log_info("reclaim: %" PRIu64 " chunk(s) no file names reclaimed, %" PRIu64
			 " object(s) removed from BACKING", rep.chunks, rep.removed);
	}
	if (rc != 0 && rc != -ESTALE) {
		if (!r->failing)
			log_warn("reclaim: a turn failed: %s (tried again every %u ms)",
				 strerror(-rc), r->period_ms);
		r->failing = true;
		return;
	}
	if (r->failing && rc == 0)
		log_info("reclaim: turns succeed again");
	r->failing = rc != 0;
}

static void reclaimer_deadline(struct timespec *until, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

static void *reclaimer_thread(void *arg)
{
	struct reclaimer *r = arg;
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct timespec until;
		reclaimer_deadline(&until, r->period_ms);
		while (!r->stop && pthread_cond_timedwait(&r->wake, &r->lock, &until) != ETIMEDOUT)
			;
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->lock);
		reclaimer_turn(r); /* invariant 1 */
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int reclaimer_start(struct cat *cat, struct backing *backing, unsigned period_ms,
		    struct reclaimer **out)
{
	*out = NULL;
	struct reclaimer *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cat = cat;
	r->backing = backing;
	r->period_ms = period_ms ? period_ms : 1;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&r->lock, NULL);
	int rc = pthread_create(&r->thread, NULL, reclaimer_thread, r);
	if (rc != 0) {
		log_error("shared catalog: cannot start the reclaim thread: %s", strerror(rc));
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->lock);
		free(r);
		return -rc;
	}
	*out = r;
	return 0;
}

void reclaimer_stop(struct reclaimer *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL); /* invariant 2 */
	pthread_cond_destroy(&r->wake);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
