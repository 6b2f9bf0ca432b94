/* recent — the SHA-256 of chunks hashed moments ago; see recent.h for the
 * invariants (R1–R3).
 *
 * A small table of slots, each EMPTY, PENDING (a writer is hashing a chunk
 * with this fingerprint: R2) or READY (a copy of the bytes and their hash).
 * The fingerprint (length and 33 sampled words) only finds candidates; the
 * answer is always a full memcmp (R1), done outside the lock while the slot
 * is pinned so that it cannot be evicted under the comparison. */
#define _GNU_SOURCE
#include "recent.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RECENT_SLOTS 64
#define RECENT_DEFAULT_BUDGET ((size_t)16 << 20) /* the daemon stays < 256 MiB */
#define RECENT_WAIT_MS 200 /* R2: how long a writer waits for another's hash */
#define RECENT_SPARES 2    /* copy buffers kept for reuse (no mmap and fault per chunk) */
#define RECENT_ROUND ((size_t)1 << 20)

enum recent_state { RS_EMPTY, RS_PENDING, RS_READY };

struct recent_slot {
	enum recent_state state;
	uint64_t fp, epoch, stamp;
	size_t len;
	int pins; /* comparisons running against copy */
	uint8_t *copy;
	size_t cap; /* of copy */
	uint8_t hash[HASH_LEN];
};

struct recent {
	pthread_mutex_t lock;
	pthread_cond_t settled; /* a PENDING slot became READY or EMPTY */
	size_t budget, used;
	uint64_t clock;
	struct recent_stats st;
	struct recent_slot slot[RECENT_SLOTS];
	uint8_t *spare[RECENT_SPARES]; /* buffers of evicted copies, for the next ones */
	size_t spare_cap[RECENT_SPARES];
};

int recent_new(size_t budget, struct recent **out)
{
	struct recent *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->budget = budget ? budget : RECENT_DEFAULT_BUDGET;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->settled, &ca);
	pthread_condattr_destroy(&ca);
	*out = r;
	return 0;
}

void recent_free(struct recent *r)
{
	if (!r)
		return;
	for (int i = 0; i < RECENT_SLOTS; i++)
		free(r->slot[i].copy);
	for (int i = 0; i < RECENT_SPARES; i++)
		free(r->spare[i]);
	pthread_cond_destroy(&r->settled);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static uint64_t recent_word(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Length and 33 words spread over the chunk (the last one ends at its end). */
static uint64_t recent_fingerprint(const uint8_t *data, size_t len)
{
	uint64_t h = len * 0x9E3779B97F4A7C15ull;
	for (size_t i = 0; i <= 32; i++) {
		size_t at = i < 32 ? (len - 8) / 32 * i : len - 8;
		h = (h ^ recent_word(data + at)) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
	}
	return h;
}

/* Keeps a buffer for reuse if there is room among the spares. Lock held. */
static void recent_spare_put(struct recent *r, uint8_t *buf, size_t cap)
{
	for (int i = 0; buf && i < RECENT_SPARES; i++) {
		if (!r->spare[i]) {
			r->spare[i] = buf;
			r->spare_cap[i] = cap;
			return;
		}
	}
	free(buf);
}

/* A spare buffer of at least len bytes, or NULL. Lock held. */
static uint8_t *recent_spare_take(struct recent *r, size_t len, size_t *cap)
{
	for (int i = 0; i < RECENT_SPARES; i++) {
		if (r->spare[i] && r->spare_cap[i] >= len) {
			uint8_t *buf = r->spare[i];
			*cap = r->spare_cap[i];
			r->spare[i] = NULL;
			return buf;
		}
	}
	return NULL;
}

static void recent_slot_clear(struct recent *r, struct recent_slot *s)
{
	if (s->state == RS_READY)
		r->used -= s->len;
	recent_spare_put(r, s->copy, s->cap);
	s->copy = NULL;
	s->state = RS_EMPTY;
}

/* The oldest READY slot nobody compares against, or -1. Lock held. */
static int recent_oldest_idle(struct recent *r)
{
	int best = -1;
	for (int i = 0; i < RECENT_SLOTS; i++) {
		const struct recent_slot *s = &r->slot[i];
		if (s->state == RS_READY && s->pins == 0 &&
		    (best < 0 || s->stamp < r->slot[best].stamp))
			best = i;
	}
	return best;
}

/* A slot to claim: an empty one, else the oldest idle one emptied. */
static int recent_free_slot(struct recent *r)
{
	for (int i = 0; i < RECENT_SLOTS; i++)
		if (r->slot[i].state == RS_EMPTY)
			return i;
	int i = recent_oldest_idle(r);
	if (i >= 0)
		recent_slot_clear(r, &r->slot[i]);
	return i;
}

static int recent_find(struct recent *r, uint64_t fp, size_t len)
{
	for (int i = 0; i < RECENT_SLOTS; i++) {
		const struct recent_slot *s = &r->slot[i];
		if (s->state != RS_EMPTY && s->fp == fp && s->len == len)
			return i;
	}
	return -1;
}

static void recent_deadline(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/* Compares data with slot i's copy outside the lock (R1); lock held on entry
 * and on return. */
static bool recent_compare(struct recent *r, int i, const uint8_t *data, size_t len,
			   uint8_t hash[HASH_LEN])
{
	struct recent_slot *s = &r->slot[i];
	s->pins++;
	const uint8_t *copy = s->copy;
	pthread_mutex_unlock(&r->lock);
	bool same = memcmp(copy, data, len) == 0;
	pthread_mutex_lock(&r->lock);
	s->pins--;
	if (same) {
		memcpy(hash, s->hash, HASH_LEN);
		s->stamp = ++r->clock; /* still wanted: evicted last */
	}
	return same;
}

bool recent_lookup(struct recent *r, const uint8_t *data, size_t len, uint8_t hash[HASH_LEN],
		   struct recent_ticket *ticket)
{
	ticket->slot = -1;
	if (!r || len < RECENT_MIN_LEN)
		return false;
	uint64_t fp = recent_fingerprint(data, len);
	struct timespec deadline;
	recent_deadline(&deadline, RECENT_WAIT_MS);
	bool waited = false;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		int i = recent_find(r, fp, len);
		if (i >= 0 && r->slot[i].state == RS_READY) {
			if (recent_compare(r, i, data, len, hash)) {
				r->st.hits++;
				pthread_mutex_unlock(&r->lock);
				return true;
			}
			break; /* same samples, other bytes: hash it (and do not publish over it) */
		}
		if (i >= 0) { /* PENDING: another writer hashes these bytes now (R2) */
			if (!waited)
				r->st.waits++;
			waited = true;
			if (pthread_cond_timedwait(&r->settled, &r->lock, &deadline) == ETIMEDOUT)
				break;
			continue;
		}
		i = recent_free_slot(r);
		if (i >= 0) {
			struct recent_slot *s = &r->slot[i];
			s->state = RS_PENDING;
			s->fp = fp;
			s->len = len;
			s->epoch = ++r->clock;
			ticket->slot = i;
			ticket->epoch = s->epoch;
		}
		break;
	}
	r->st.misses++;
	pthread_mutex_unlock(&r->lock);
	return false;
}

/* Ends a ticket; with copy, the slot becomes READY holding it (R3 permitting). */
static void recent_settle(struct recent *r, const struct recent_ticket *t, uint8_t *copy,
			  size_t cap, const uint8_t hash[HASH_LEN])
{
	pthread_mutex_lock(&r->lock);
	struct recent_slot *s = &r->slot[t->slot];
	if (s->state == RS_PENDING && s->epoch == t->epoch) {
		while (copy && r->used + s->len > r->budget) {
			int old = recent_oldest_idle(r);
			if (old < 0)
				break;
			recent_slot_clear(r, &r->slot[old]);
		}
		if (copy && r->used + s->len <= r->budget) {
			s->copy = copy;
			s->cap = cap;
			copy = NULL;
			memcpy(s->hash, hash, HASH_LEN);
			s->state = RS_READY;
			s->stamp = ++r->clock;
			r->used += s->len;
		} else {
			s->state = RS_EMPTY;
		}
		pthread_cond_broadcast(&r->settled);
	}
	recent_spare_put(r, copy, cap); /* not kept: reused next time, or freed */
	pthread_mutex_unlock(&r->lock);
}

void recent_publish(struct recent *r, const struct recent_ticket *t, const uint8_t *data,
		    size_t len, const uint8_t hash[HASH_LEN])
{
	if (!r || t->slot < 0)
		return;
	size_t cap = 0;
	pthread_mutex_lock(&r->lock);
	uint8_t *copy = recent_spare_take(r, len, &cap);
	pthread_mutex_unlock(&r->lock);
	if (!copy) {
		cap = (len + RECENT_ROUND - 1) / RECENT_ROUND * RECENT_ROUND;
		copy = malloc(cap); /* none: the slot just empties */
	}
	if (copy)
		memcpy(copy, data, len);
	recent_settle(r, t, copy, cap, hash);
}

void recent_abandon(struct recent *r, const struct recent_ticket *t)
{
	if (r && t->slot >= 0)
		recent_settle(r, t, NULL, 0, NULL);
}

void recent_stats(struct recent *r, struct recent_stats *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->st;
	pthread_mutex_unlock(&r->lock);
}
