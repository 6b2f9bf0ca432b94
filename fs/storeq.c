/* storeq — chunk objects written behind the writer; see storeq.h for the
 * invariants. A FIFO under one mutex: jobs are milliseconds long, so the
 * lock is never contended for long. */
#define _GNU_SOURCE
#include "storeq.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define STOREQ_MAX_THREADS 16

struct storeq {
	pthread_mutex_t lock;
	pthread_cond_t work; /* a job was queued, or stopping */
	struct storeq_job *head, *tail;
	unsigned depth, in_flight; /* Q1: queued + running <= depth */
	bool stopping;
	unsigned nthreads;
	pthread_t threads[STOREQ_MAX_THREADS];
	struct storeq_stats st;
};

static struct storeq_job *storeq_next(struct storeq *q)
{
	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->stopping)
		pthread_cond_wait(&q->work, &q->lock);
	struct storeq_job *job = q->head; /* Q2: drained before a thread ends */
	if (job) {
		assert(q->in_flight > 0 && q->in_flight <= q->depth); /* Q1: counted when queued */
		q->head = job->next;
		if (!q->head)
			q->tail = NULL;
		q->st.behind++;
	}
	pthread_mutex_unlock(&q->lock);
	return job;
}

static void *storeq_thread(void *arg)
{
	struct storeq *q = arg;
	pthread_setname_np(pthread_self(), "ckptfs-store"); /* for top -H and perf */
	struct storeq_job *job;
	while ((job = storeq_next(q)) != NULL) {
		job->run(job); /* Q3: the job is gone after this */
		pthread_mutex_lock(&q->lock);
		assert(q->in_flight > 0);
		q->in_flight--;
		pthread_mutex_unlock(&q->lock);
	}
	return NULL;
}

int storeq_start(unsigned threads, unsigned depth, struct storeq **out)
{
	if (threads == 0 || threads > STOREQ_MAX_THREADS || depth == 0)
		return -EINVAL;
	struct storeq *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	q->depth = depth;
	for (; q->nthreads < threads; q->nthreads++) {
		if (pthread_create(&q->threads[q->nthreads], NULL, storeq_thread, q) != 0) {
			storeq_stop(q);
			return -EAGAIN;
		}
	}
	*out = q;
	return 0;
}

bool storeq_try_submit(struct storeq *q, struct storeq_job *job)
{
	if (!q)
		return false;
	assert(job->run);
	pthread_mutex_lock(&q->lock);
	assert(q->in_flight <= q->depth); /* Q1 */
	bool ok = !q->stopping && q->in_flight < q->depth;
	if (ok) {
		q->in_flight++;
		job->next = NULL;
		if (q->tail)
			q->tail->next = job;
		else
			q->head = job;
		q->tail = job;
		pthread_cond_signal(&q->work);
	} else {
		q->st.full++;
	}
	pthread_mutex_unlock(&q->lock);
	return ok;
}

void storeq_stop(struct storeq *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	assert(!q->stopping); /* stopped once: q is freed below */
	q->stopping = true;
	pthread_cond_broadcast(&q->work);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
	assert(!q->head && q->in_flight == 0); /* Q2: every job ran */
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void storeq_stats(struct storeq *q, struct storeq_stats *out)
{
	pthread_mutex_lock(&q->lock);
	*out = q->st;
	pthread_mutex_unlock(&q->lock);
}
