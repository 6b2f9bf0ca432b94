/* ticker — a thread that calls fn(arg) every period until it is stopped: the
 * periodic services of the shared catalog (fs/leasekeep.c renews the lease,
 * fs/reclaimer.c takes its reclaim turn) share it instead of each keeping a
 * condvar, a deadline loop, start, stop and join of its own.
 *
 * The period runs on CLOCK_MONOTONIC (a clock set back neither delays nor
 * hurries a tick) from the end of one call to the start of the next: a slow
 * call pushes the next one back rather than calls piling up.
 *
 * Invariants:
 *  T1. fn runs only on the ticker's own thread: calls never overlap.
 *  T2. ticker_stop ends a wait at once and returns only after the thread
 *      has ended; a call in progress is finished first, none starts after
 *      the stop: what fn uses may be freed right after ticker_stop returns.
 *  T3. fn returning false ends the thread (no further call); ticker_stop
 *      is still the one that joins and frees. */
#ifndef CKPTFS_TICKER_H
#define CKPTFS_TICKER_H

#include <stdbool.h>

struct ticker;

/* One tick's work; false ends the thread (T3). */
typedef bool (*ticker_fn)(void *arg);

/* When the first call comes: as soon as the thread runs, or one period
 * after the start. */
enum ticker_first {
	TICKER_FIRST_AT_ONCE,
	TICKER_FIRST_AFTER_PERIOD,
};

/* Starts the thread (after daemonizing: threads do not survive fork);
 * period_ms > 0. 0, or -errno when the thread cannot start (*out NULL, the
 * caller logs it in its own words). */
int ticker_start(unsigned period_ms, enum ticker_first first, ticker_fn fn, void *arg,
		 struct ticker **out);
/* Stops, joins (T2) and frees; NULL is allowed. */
void ticker_stop(struct ticker *t);

#endif
