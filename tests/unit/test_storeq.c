/* Unit tests for fs/storeq.c: every job accepted runs exactly once, on a
 * queue thread (Q2, Q3); no more than depth are queued or running and a
 * full queue refuses without blocking (Q1); stop runs what was queued. */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "storeq.h"

struct tq_job {
	struct storeq_job q;
	int *runs;
	pthread_t *ran_on;
};

static pthread_mutex_t tq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tq_cond = PTHREAD_COND_INITIALIZER;
static bool tq_open; /* jobs wait for this (a gate) */
static int tq_running;

static void tq_run(struct storeq_job *qj)
{
	struct tq_job *j = (struct tq_job *)qj;
	pthread_mutex_lock(&tq_lock);
	tq_running++;
	pthread_cond_broadcast(&tq_cond);
	while (!tq_open)
		pthread_cond_wait(&tq_cond, &tq_lock);
	tq_running--;
	(*j->runs)++;
	*j->ran_on = pthread_self();
	pthread_mutex_unlock(&tq_lock);
	free(j);
}

static struct tq_job *tq_job(int *runs, pthread_t *ran_on)
{
	struct tq_job *j = calloc(1, sizeof(*j));
	cr_assert_not_null(j);
	j->q.run = tq_run;
	j->runs = runs;
	j->ran_on = ran_on;
	return j;
}

static void tq_gate(bool open)
{
	pthread_mutex_lock(&tq_lock);
	tq_open = open;
	pthread_cond_broadcast(&tq_cond);
	pthread_mutex_unlock(&tq_lock);
}

Test(storeq, every_job_runs_once_on_a_queue_thread)
{
	enum { N = 200 };
	static int runs[N];
	static pthread_t ran_on[N];
	struct storeq *q;
	tq_gate(true);
	cr_assert_eq(storeq_start(3, 4, &q), 0);
	int accepted = 0, refused = 0;
	for (int i = 0; i < N; i++) {
		struct tq_job *j = tq_job(&runs[i], &ran_on[i]);
		if (storeq_try_submit(q, &j->q)) {
			accepted++;
		} else { /* Q1: the caller runs it itself */
			refused++;
			runs[i] = -1;
			free(j);
		}
	}
	storeq_stop(q); /* Q2: runs everything accepted */
	int ran = 0;
	for (int i = 0; i < N; i++) {
		if (runs[i] == -1)
			continue;
		cr_assert_eq(runs[i], 1, "job %d ran %d times", i, runs[i]);
		cr_assert(!pthread_equal(ran_on[i], pthread_self()), "job %d ran on the caller", i);
		ran++;
	}
	cr_assert_eq(ran, accepted);
	cr_log_info("%d accepted, %d refused", accepted, refused);
}

Test(storeq, a_full_queue_refuses_at_once_and_stop_runs_what_was_queued)
{
	int runs[8] = { 0 };
	pthread_t ran_on[8];
	struct storeq *q;
	tq_gate(false); /* jobs block until opened */
	cr_assert_eq(storeq_start(2, 5, &q), 0);
	for (int i = 0; i < 5; i++)
		cr_assert(storeq_try_submit(q, &tq_job(&runs[i], &ran_on[i])->q), "job %d refused", i);
	/* 2 running (blocked), 3 queued: depth 5 reached */
	pthread_mutex_lock(&tq_lock);
	while (tq_running < 2)
		pthread_cond_wait(&tq_cond, &tq_lock);
	pthread_mutex_unlock(&tq_lock);
	struct tq_job *extra = tq_job(&runs[5], &ran_on[5]);
	cr_assert(!storeq_try_submit(q, &extra->q), "a sixth job was taken at depth 5");
	free(extra);
	struct storeq_stats st;
	storeq_stats(q, &st);
	cr_assert_eq(st.full, 1);
	tq_gate(true);
	storeq_stop(q);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(runs[i], 1, "job %d ran %d times", i, runs[i]);
	cr_assert_eq(runs[5], 0);
}

Test(storeq, bad_parameters_are_refused_and_null_is_a_no_op)
{
	struct storeq *q;
	cr_assert_eq(storeq_start(0, 4, &q), -EINVAL);
	cr_assert_eq(storeq_start(2, 0, &q), -EINVAL);
	struct storeq_job j = { 0 };
	cr_assert(!storeq_try_submit(NULL, &j));
	storeq_stop(NULL);
}
