/* wbuf — the budget of writer buffers; see wbuf.h for the invariants. */
#include "wbuf.h"

#include <assert.h>

void wbuf_init(struct wbuf *b, uint64_t limit)
{
	pthread_mutex_init(&b->lock, NULL);
	b->limit = limit;
	b->used = b->peak = b->staged = b->copied = 0;
}

void wbuf_destroy(struct wbuf *b)
{
	pthread_mutex_destroy(&b->lock);
}

static void wbuf_add(struct wbuf *b, uint64_t n)
{
	b->used += n;
	if (b->used > b->peak)
		b->peak = b->used;
}

bool wbuf_take(struct wbuf *b, uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	bool ok = b->limit == 0 || (b->used <= b->limit && n <= b->limit - b->used); /* W1 */
	if (ok)
		wbuf_add(b, n);
	pthread_mutex_unlock(&b->lock);
	return ok;
}

void wbuf_force(struct wbuf *b, uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	wbuf_add(b, n); /* W3 */
	pthread_mutex_unlock(&b->lock);
}

void wbuf_give(struct wbuf *b, uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	assert(b->used >= n); /* W2 */
	b->used -= n;
	pthread_mutex_unlock(&b->lock);
}

void wbuf_note_staged(struct wbuf *b)
{
	pthread_mutex_lock(&b->lock);
	b->staged++;
	pthread_mutex_unlock(&b->lock);
}

void wbuf_note_copied(struct wbuf *b, uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	b->copied += n;
	pthread_mutex_unlock(&b->lock);
}

void wbuf_stats(struct wbuf *b, struct wbuf_stats *out)
{
	pthread_mutex_lock(&b->lock);
	*out = (struct wbuf_stats){ b->limit, b->used, b->peak, b->staged, b->copied };
	pthread_mutex_unlock(&b->lock);
}
