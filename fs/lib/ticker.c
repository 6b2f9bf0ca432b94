/* ticker — a periodic thread; the contract is in ticker.h.
 *
 *   start ─▶ [first AFTER_PERIOD: wait] ─▶ fn ──┬─ true ──▶ wait period ─▶ fn
 *                                               └─ false ─▶ thread ends
 *   stop: wakes any wait, waits for a call in progress, joins (T2)
 */
#define _GNU_SOURCE
#include "ticker.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct ticker {
	unsigned period_ms;
	enum ticker_first first;
	ticker_fn fn;
	void *arg;
	bool stop; /* under lock */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* CLOCK_MONOTONIC */
};

static void ticker_deadline(struct timespec *until, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, until);
	until->tv_sec += ms / 1000;
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

/* Waits one period, lock held; false when stopped meanwhile. The loop
 * outlives spurious wake-ups: only the deadline or a stop ends it. */
static bool ticker_wait_locked(struct ticker *t)
{
	struct timespec until;
	ticker_deadline(&until, t->period_ms);
	while (!t->stop && pthread_cond_timedwait(&t->wake, &t->lock, &until) != ETIMEDOUT)
		;
	return !t->stop;
}

static void *ticker_thread(void *arg)
{
	struct ticker *t = arg;
	bool wait_first = t->first == TICKER_FIRST_AFTER_PERIOD;
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		if (wait_first && !ticker_wait_locked(t))
			break;
		wait_first = true;
		pthread_mutex_unlock(&t->lock);
		bool go_on = t->fn(t->arg); /* T1: this thread only, lock not held */
		pthread_mutex_lock(&t->lock);
		if (!go_on)
			break; /* T3 */
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int ticker_start(unsigned period_ms, enum ticker_first first, ticker_fn fn, void *arg,
		 struct ticker **out)
{
	assert(period_ms > 0 && fn && out);
	*out = NULL;
	struct ticker *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->period_ms = period_ms;
	t->first = first;
	t->fn = fn;
	t->arg = arg;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->wake, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&t->lock, NULL);
	int rc = pthread_create(&t->thread, NULL, ticker_thread, t);
	if (rc != 0) {
		pthread_cond_destroy(&t->wake);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return -rc;
	}
	*out = t;
	return 0;
}

void ticker_stop(struct ticker *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL); /* T2 */
	pthread_cond_destroy(&t->wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
