/* Unit tests for fs/lib/flight.c: threads that want one key at once run its
 * work once and all get its result (F1); different keys run at the same
 * time; a failure is every waiter's result and the next caller runs the
 * work again (F3); a landing after a caller's `since` answers DONE, one
 * before it does not; references reaped without waiting stay until their
 * flight lands; under the owner's lock, flight_busy_locked tells a busy key
 * from a landed one and a follower waits with no deadline until the
 * landing. */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "flight.h"

#define TF_KEY 8

static struct flight_table *tf_table;

static void tf_setup(void)
{
	cr_assert_eq(flight_table_new(16, TF_KEY, &tf_table), 0);
}

static void tf_teardown(void)
{
	flight_table_free(tf_table);
}

TestSuite(flight, .init = tf_setup, .fini = tf_teardown, .timeout = 30);

/* Work that holds its flight until `followers` callers joined it (or, with
 * parallel, until `parallel` works of other keys run with it), counts its
 * runs and returns rc. */
struct tf_work {
	char key[TF_KEY];
	int followers;
	int rc;
	int *runs;
	int *running, *max_running, parallel;
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	int result;
};

static int tf_work_run(void *arg)
{
	struct tf_work *w = arg;
	pthread_mutex_lock(w->lock);
	(*w->runs)++;
	(*w->running)++;
	if (*w->running > *w->max_running)
		*w->max_running = *w->running;
	pthread_cond_broadcast(w->cond);
	while (w->parallel && *w->runs < w->parallel) /* all keys at once, or a hang */
		pthread_cond_wait(w->cond, w->lock);
	pthread_mutex_unlock(w->lock);
	for (int tries = 0; flight_followers(tf_table, w->key) < w->followers; tries++) {
		cr_assert_lt(tries, 10000, "only %d of %d callers joined",
			     flight_followers(tf_table, w->key), w->followers);
		usleep(1000);
	}
	pthread_mutex_lock(w->lock);
	(*w->running)--;
	pthread_mutex_unlock(w->lock);
	return w->rc;
}

static void *tf_caller(void *arg)
{
	struct tf_work *w = arg;
	w->result = flight_do(tf_table, w->key, tf_work_run, w);
	return NULL;
}

static pthread_mutex_t tf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tf_cond = PTHREAD_COND_INITIALIZER;

/* n callers of one key at once; returns how often the work ran. */
static int tf_one_key(int n, int rc, struct tf_work *w)
{
	int runs = 0, running = 0, max_running = 0;
	pthread_t t[16];
	for (int i = 0; i < n; i++) {
		w[i] = (struct tf_work){ .followers = n - 1, .rc = rc, .runs = &runs,
					 .running = &running, .max_running = &max_running,
					 .lock = &tf_lock, .cond = &tf_cond, .result = 12345 };
		memcpy(w[i].key, "the-key", TF_KEY);
		cr_assert_eq(pthread_create(&t[i], NULL, tf_caller, &w[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return runs;
}

Test(flight, callers_of_one_key_at_once_run_it_once_and_all_get_its_result)
{
	enum { N = 8 };
	struct tf_work w[N];
	cr_assert_eq(tf_one_key(N, 7, w), 1, "the work ran more than once");
	for (int i = 0; i < N; i++)
		cr_assert_eq(w[i].result, 7, "caller %d got %d", i, w[i].result);
}

Test(flight, different_keys_run_at_the_same_time)
{
	enum { N = 5 };
	struct tf_work w[N];
	int runs = 0, running = 0, max_running = 0;
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		w[i] = (struct tf_work){ .followers = 0, .rc = i, .runs = &runs,
					 .running = &running, .max_running = &max_running,
					 .parallel = N, .lock = &tf_lock, .cond = &tf_cond };
		memset(w[i].key, 'a' + i, TF_KEY);
		cr_assert_eq(pthread_create(&t[i], NULL, tf_caller, &w[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(runs, N);
	cr_assert_eq(max_running, N, "at most %d keys ran at once", max_running);
	for (int i = 0; i < N; i++)
		cr_assert_eq(w[i].result, i);
}

Test(flight, an_error_is_every_callers_result_and_the_next_caller_retries)
{
	enum { N = 6 };
	struct tf_work w[N];
	cr_assert_eq(tf_one_key(N, -EIO, w), 1);
	for (int i = 0; i < N; i++)
		cr_assert_eq(w[i].result, -EIO, "caller %d got %d", i, w[i].result);
	cr_assert_eq(tf_one_key(1, 0, w), 1, "the caller after a failure did not run the work");
	cr_assert_eq(w[0].result, 0);
}

Test(flight, a_landing_after_since_answers_done_and_one_before_does_not)
{
	const char key[TF_KEY] = "chunk-1";
	struct flight lead, f;
	uint64_t before = flight_lands(tf_table);
	cr_assert_eq(flight_join(tf_table, key, before, &lead), FLIGHT_LEAD);
	cr_assert_geq(lead.slot, 0);
	flight_land(tf_table, &lead, 0);
	uint64_t after = flight_lands(tf_table);
	cr_assert_eq(after, before + 1);
	cr_assert_eq(flight_join(tf_table, key, before, &f), FLIGHT_DONE);
	cr_assert_eq(flight_join(tf_table, key, after, &f), FLIGHT_LEAD, "an old landing counted");
	flight_land(tf_table, &f, -EIO);
	cr_assert_eq(flight_lands(tf_table), after, "a failure counted as a landing");
	cr_assert_eq(flight_join(tf_table, key, after, &f), FLIGHT_LEAD);
	flight_land(tf_table, &f, 0);
}

Test(flight, references_reaped_without_waiting_stay_until_their_flight_lands)
{
	const char k1[TF_KEY] = "k1", k2[TF_KEY] = "k2";
	struct flight l1, l2, refs[2];
	size_t n = 2;
	cr_assert_eq(flight_join(tf_table, k1, 0, &l1), FLIGHT_LEAD);
	cr_assert_eq(flight_join(tf_table, k2, 0, &l2), FLIGHT_LEAD);
	cr_assert_eq(flight_join(tf_table, k1, 0, &refs[0]), FLIGHT_FOLLOW);
	cr_assert_eq(flight_join(tf_table, k2, 0, &refs[1]), FLIGHT_FOLLOW);
	cr_assert_eq(flight_followers(tf_table, k1), 1);
	cr_assert_eq(flight_reap(tf_table, refs, &n, false), 0);
	cr_assert_eq(n, 2, "a busy flight's reference was dropped");
	flight_land(tf_table, &l2, -ENOSPC);
	cr_assert_eq(flight_reap(tf_table, refs, &n, false), -ENOSPC);
	cr_assert_eq(n, 1);
	cr_assert_eq(refs[0].slot, l1.slot, "the reference kept is not k1's");
	flight_land(tf_table, &l1, 0);
	cr_assert_eq(flight_reap(tf_table, refs, &n, true), 0);
	cr_assert_eq(n, 0);
}

Test(flight, a_lead_without_a_free_slot_shares_nothing)
{
	struct flight lead[16], extra;
	for (int i = 0; i < 16; i++) {
		char key[TF_KEY] = { (char)('A' + i) };
		cr_assert_eq(flight_join(tf_table, key, 0, &lead[i]), FLIGHT_LEAD);
		cr_assert_geq(lead[i].slot, 0);
	}
	char key[TF_KEY] = "more";
	cr_assert_eq(flight_join(tf_table, key, 0, &extra), FLIGHT_LEAD);
	cr_assert_eq(extra.slot, -1);
	flight_land(tf_table, &extra, 0); /* a no-op */
	for (int i = 0; i < 16; i++)
		flight_land(tf_table, &lead[i], 0);
}

Test(flight, busy_locked_says_whether_a_key_is_worked_on_now)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct flight_table *t;
	cr_assert_eq(flight_table_new_locked(4, TF_KEY, &lock, &t), 0);
	char key[TF_KEY] = "busy", other[TF_KEY] = "other";
	struct flight lead, ref;
	pthread_mutex_lock(&lock);
	cr_assert_not(flight_busy_locked(t, key));
	cr_assert_eq(flight_join_locked(t, key, UINT64_MAX, &lead), FLIGHT_LEAD);
	cr_assert(flight_busy_locked(t, key));
	cr_assert_not(flight_busy_locked(t, other));
	cr_assert_eq(flight_join_locked(t, key, UINT64_MAX, &ref), FLIGHT_FOLLOW);
	flight_land_locked(t, &lead, 0);
	cr_assert_not(flight_busy_locked(t, key), "landed, though still referenced");
	cr_assert(flight_wait_until_locked(t, &ref, NULL), "landed: no wait, no deadline");
	flight_release_locked(t, &ref);
	pthread_mutex_unlock(&lock);
	flight_table_free(t);
}

/* A follower under the owner's lock waits with no deadline until the leader
 * (another thread) lands. */
struct tf_locked {
	pthread_mutex_t *lock;
	struct flight_table *t;
	struct flight lead;
	int landed;
};

static void *tf_land_later(void *arg)
{
	struct tf_locked *l = arg;
	usleep(20000);
	pthread_mutex_lock(l->lock);
	l->landed = 1;
	flight_land_locked(l->t, &l->lead, 0);
	pthread_mutex_unlock(l->lock);
	return NULL;
}

Test(flight, a_wait_without_deadline_under_the_owners_lock_ends_at_the_landing)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct tf_locked l = { .lock = &lock };
	cr_assert_eq(flight_table_new_locked(4, TF_KEY, &lock, &l.t), 0);
	char key[TF_KEY] = "wait";
	struct flight ref;
	pthread_mutex_lock(&lock);
	cr_assert_eq(flight_join_locked(l.t, key, UINT64_MAX, &l.lead), FLIGHT_LEAD);
	cr_assert_eq(flight_join_locked(l.t, key, UINT64_MAX, &ref), FLIGHT_FOLLOW);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tf_land_later, &l), 0);
	cr_assert(flight_wait_until_locked(l.t, &ref, NULL));
	cr_assert_eq(l.landed, 1);
	flight_release_locked(l.t, &ref);
	pthread_mutex_unlock(&lock);
	pthread_join(th, NULL);
	flight_table_free(l.t);
}
