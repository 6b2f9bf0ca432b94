/* Unit tests for fs/lib/ticker.c: it calls its function again and again, the
 * first time at once or a period in; a false from the function ends the
 * calls (T3); ticker_stop ends a long wait at once, waits for a call in
 * progress, and no call starts after it returns (T2). */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "ticker.h"

TestSuite(ticker, .timeout = 30);

/* What the ticked function saw; counters read with atomics. */
struct tt_state {
	int calls;
	int calls_after_stop; /* calls that began once ticker_stop had returned */
	bool stopped;         /* ticker_stop returned */
	int stop_after;       /* return false at this call (0: never) */
	unsigned sleep_ms;    /* each call lasts this long */
	int in_call;          /* a call is running */
};

static bool tt_fn(void *arg)
{
	struct tt_state *s = arg;
	if (__atomic_load_n(&s->stopped, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&s->calls_after_stop, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->in_call, 1, __ATOMIC_RELEASE);
	int n = __atomic_add_fetch(&s->calls, 1, __ATOMIC_ACQ_REL);
	if (s->sleep_ms)
		usleep(s->sleep_ms * 1000);
	__atomic_store_n(&s->in_call, 0, __ATOMIC_RELEASE);
	return n != s->stop_after;
}

static int tt_calls(struct tt_state *s)
{
	return __atomic_load_n(&s->calls, __ATOMIC_ACQUIRE);
}

static int64_t tt_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits up to 10 s for `calls` calls; false if they did not come. */
static bool tt_wait_calls(struct tt_state *s, int calls)
{
	for (int64_t end = tt_now_ms() + 10000; tt_now_ms() < end; usleep(1000))
		if (tt_calls(s) >= calls)
			return true;
	return false;
}

static void tt_stop(struct ticker *t, struct tt_state *s)
{
	ticker_stop(t);
	__atomic_store_n(&s->stopped, true, __ATOMIC_RELEASE);
}

Test(ticker, ticks_every_period_until_stopped)
{
	struct tt_state s = { 0 };
	struct ticker *t;
	int64_t start = tt_now_ms();
	cr_assert_eq(ticker_start(20, TICKER_FIRST_AFTER_PERIOD, tt_fn, &s, &t), 0);
	cr_assert(tt_wait_calls(&s, 5), "5 ticks of 20 ms in 10 s, got %d", tt_calls(&s));
	/* 5 calls, each a period after the last: no sooner than 100 ms */
	cr_assert_geq(tt_now_ms() - start, 100);
	tt_stop(t, &s);
}

Test(ticker, first_at_once_calls_before_the_first_period)
{
	struct tt_state s = { 0 };
	struct ticker *t;
	cr_assert_eq(ticker_start(60000, TICKER_FIRST_AT_ONCE, tt_fn, &s, &t), 0);
	cr_assert(tt_wait_calls(&s, 1), "no call at once with a period of a minute");
	usleep(50 * 1000);
	cr_assert_eq(tt_calls(&s), 1, "a second call long before its period");
	tt_stop(t, &s);
}

Test(ticker, first_after_period_waits_for_it)
{
	struct tt_state s = { 0 };
	struct ticker *t;
	cr_assert_eq(ticker_start(60000, TICKER_FIRST_AFTER_PERIOD, tt_fn, &s, &t), 0);
	usleep(100 * 1000);
	cr_assert_eq(tt_calls(&s), 0, "called before its first period");
	tt_stop(t, &s);
	cr_assert_eq(tt_calls(&s), 0, "stopping called it");
}

Test(ticker, stop_ends_a_long_wait_at_once)
{
	struct tt_state s = { 0 };
	struct ticker *t;
	cr_assert_eq(ticker_start(60000, TICKER_FIRST_AT_ONCE, tt_fn, &s, &t), 0);
	cr_assert(tt_wait_calls(&s, 1));
	int64_t start = tt_now_ms();
	tt_stop(t, &s); /* the thread is in its minute-long wait */
	cr_assert_lt(tt_now_ms() - start, 2000, "stop waited %lld ms",
		     (long long)(tt_now_ms() - start));
}

Test(ticker, no_call_after_stop_returns)
{
	struct tt_state s = { 0 };
	struct ticker *t;
	cr_assert_eq(ticker_start(1, TICKER_FIRST_AT_ONCE, tt_fn, &s, &t), 0);
	cr_assert(tt_wait_calls(&s, 20));
	tt_stop(t, &s);
	int calls = tt_calls(&s);
	usleep(50 * 1000); /* 50 periods */
	cr_assert_eq(tt_calls(&s), calls, "called after stop returned");
	cr_assert_eq(s.calls_after_stop, 0);
}

Test(ticker, stop_waits_for_the_call_in_progress)
{
	struct tt_state s = { .sleep_ms = 200 };
	struct ticker *t;
	cr_assert_eq(ticker_start(60000, TICKER_FIRST_AT_ONCE, tt_fn, &s, &t), 0);
	for (int i = 0; i < 10000 && !__atomic_load_n(&s.in_call, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	cr_assert(__atomic_load_n(&s.in_call, __ATOMIC_ACQUIRE), "the first call never began");
	tt_stop(t, &s);
	cr_assert_eq(__atomic_load_n(&s.in_call, __ATOMIC_ACQUIRE), 0,
		     "stop returned while a call was running");
	cr_assert_eq(tt_calls(&s), 1);
}

Test(ticker, false_ends_the_calls)
{
	struct tt_state s = { .stop_after = 3 };
	struct ticker *t;
	cr_assert_eq(ticker_start(1, TICKER_FIRST_AT_ONCE, tt_fn, &s, &t), 0);
	cr_assert(tt_wait_calls(&s, 3));
	usleep(50 * 1000); /* 50 periods */
	cr_assert_eq(tt_calls(&s), 3, "called again after it returned false");
	tt_stop(t, &s); /* joins the ended thread */
}

Test(ticker, stop_of_null_is_nothing)
{
	ticker_stop(NULL);
}
