/* flight — single flight per key; see flight.h for the invariants (F1–F4).
 *
 * A fixed table of slots under one mutex. A slot is free, busy (its leader
 * works) or landed (its result kept for its references, and for F3). The
 * scan for a key starts where the last flight was put: landed slots stay
 * behind it, remembered as long as possible. */
#define _GNU_SOURCE
#include "flight.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct flight_slot {
	uint8_t key[FLIGHT_KEY_MAX];
	bool keyed; /* key is some flight's, busy or landed */
	bool busy;
	int rc;
	int refs;
	uint64_t gen;
	uint64_t landed; /* lands when it landed with 0 (F3); else 0 */
};

struct flight_table {
	pthread_mutex_t own;
	pthread_mutex_t *lock; /* &own, or the owner's (flight_table_new_locked) */
	pthread_cond_t landed; /* a flight landed (CLOCK_MONOTONIC, for timed waits) */
	size_t key_len;
	unsigned nslots;
	unsigned next; /* where a free slot is looked for first */
	uint64_t gen;
	uint64_t lands;
	struct flight_slot slot[];
};

int flight_table_new_locked(unsigned slots, size_t key_len, pthread_mutex_t *lock,
			    struct flight_table **out)
{
	if (slots == 0 || key_len == 0 || key_len > FLIGHT_KEY_MAX)
		return -EINVAL;
	struct flight_table *t = calloc(1, sizeof(*t) + slots * sizeof(t->slot[0]));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->own, NULL);
	t->lock = lock ? lock : &t->own;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->landed, &ca);
	pthread_condattr_destroy(&ca);
	t->key_len = key_len;
	t->nslots = slots;
	*out = t;
	return 0;
}

int flight_table_new(unsigned slots, size_t key_len, struct flight_table **out)
{
	return flight_table_new_locked(slots, key_len, NULL, out);
}

void flight_table_free(struct flight_table *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nslots; i++) /* F4: nobody is still in one */
		assert(!t->slot[i].busy && t->slot[i].refs == 0);
	pthread_cond_destroy(&t->landed);
	pthread_mutex_destroy(&t->own);
	free(t);
}

uint64_t flight_lands(struct flight_table *t)
{
	pthread_mutex_lock(t->lock);
	uint64_t n = t->lands;
	pthread_mutex_unlock(t->lock);
	return n;
}

/* The slot a reference names; F2: it is still that flight's. Lock held. */
static struct flight_slot *flight_slot_of(struct flight_table *t, const struct flight *f)
{
	assert(f->slot >= 0 && (unsigned)f->slot < t->nslots);
	struct flight_slot *s = &t->slot[f->slot];
	assert(s->keyed && s->gen == f->gen);
	return s;
}

enum flight_join flight_join_locked(struct flight_table *t, const void *key, uint64_t since,
				    struct flight *f)
{
	int free_slot = -1, found = -1;
	bool done = false;
	for (unsigned k = 0; k < t->nslots; k++) {
		unsigned i = (t->next + k) % t->nslots;
		struct flight_slot *s = &t->slot[i];
		if (s->keyed && memcmp(s->key, key, t->key_len) == 0) {
			if (s->busy) {
				found = (int)i;
				break;
			}
			done |= s->landed > since;
		}
		if (!s->busy && s->refs == 0 && free_slot < 0)
			free_slot = (int)i;
	}
	enum flight_join how = FLIGHT_LEAD;
	if (found >= 0) { /* F1 */
		struct flight_slot *s = &t->slot[found];
		s->refs++; /* F2: the slot and its result stay until released */
		f->slot = found;
		f->gen = s->gen;
		how = FLIGHT_FOLLOW;
	} else if (done) {
		f->slot = -1;
		how = FLIGHT_DONE;
	} else {
		f->slot = free_slot;
		if (free_slot >= 0) {
			struct flight_slot *s = &t->slot[free_slot];
			assert(!s->busy && s->refs == 0);
			memcpy(s->key, key, t->key_len);
			s->keyed = true;
			s->busy = true;
			s->rc = 0;
			s->landed = 0;
			s->gen = ++t->gen;
			f->gen = s->gen;
			t->next = ((unsigned)free_slot + 1) % t->nslots;
		}
	}
	return how;
}

enum flight_join flight_join(struct flight_table *t, const void *key, uint64_t since,
			     struct flight *f)
{
	pthread_mutex_lock(t->lock);
	enum flight_join how = flight_join_locked(t, key, since, f);
	pthread_mutex_unlock(t->lock);
	return how;
}

void flight_hold(struct flight_table *t, const struct flight *f)
{
	pthread_mutex_lock(t->lock);
	struct flight_slot *s = flight_slot_of(t, f);
	assert(s->busy); /* only a leader adds to its own flight, while it works */
	s->refs++;
	pthread_mutex_unlock(t->lock);
}

void flight_release_locked(struct flight_table *t, const struct flight *f)
{
	struct flight_slot *s = flight_slot_of(t, f);
	assert(s->refs > 0);
	s->refs--;
}

void flight_release(struct flight_table *t, const struct flight *f)
{
	pthread_mutex_lock(t->lock);
	flight_release_locked(t, f);
	pthread_mutex_unlock(t->lock);
}

void flight_land_locked(struct flight_table *t, const struct flight *lead, int rc)
{
	if (lead->slot < 0)
		return; /* F4: a lead without a slot shares nothing */
	struct flight_slot *s = flight_slot_of(t, lead);
	assert(s->busy); /* F4: one landing per lead */
	s->busy = false;
	s->rc = rc;
	s->landed = rc == 0 ? ++t->lands : 0; /* F3 */
	pthread_cond_broadcast(&t->landed);
}

void flight_land(struct flight_table *t, const struct flight *lead, int rc)
{
	if (lead->slot < 0)
		return;
	pthread_mutex_lock(t->lock);
	flight_land_locked(t, lead, rc);
	pthread_mutex_unlock(t->lock);
}

bool flight_wait_until_locked(struct flight_table *t, const struct flight *f,
			      const struct timespec *deadline)
{
	struct flight_slot *s = flight_slot_of(t, f);
	while (s->busy) {
		if (!deadline)
			pthread_cond_wait(&t->landed, t->lock);
		else if (pthread_cond_timedwait(&t->landed, t->lock, deadline) == ETIMEDOUT)
			return !s->busy;
	}
	return true;
}

int flight_reap(struct flight_table *t, struct flight *refs, size_t *n, bool wait)
{
	if (*n == 0)
		return 0;
	int rc = 0;
	size_t kept = 0;
	pthread_mutex_lock(t->lock);
	for (size_t i = 0; i < *n; i++) {
		struct flight_slot *s = flight_slot_of(t, &refs[i]);
		while (wait && s->busy)
			pthread_cond_wait(&t->landed, t->lock);
		if (s->busy) {
			refs[kept++] = refs[i];
			continue;
		}
		if (s->rc != 0 && rc == 0)
			rc = s->rc;
		assert(s->refs > 0);
		s->refs--;
	}
	*n = kept;
	pthread_mutex_unlock(t->lock);
	return rc;
}

void flight_wait(struct flight_table *t, const struct flight *refs, size_t n)
{
	if (n == 0)
		return;
	pthread_mutex_lock(t->lock);
	for (size_t i = 0; i < n; i++)
		while (flight_slot_of(t, &refs[i])->busy)
			pthread_cond_wait(&t->landed, t->lock);
	pthread_mutex_unlock(t->lock);
}

int flight_do(struct flight_table *t, const void *key, int (*work)(void *arg), void *arg)
{
	struct flight f;
	size_t one = 1;
	switch (flight_join(t, key, flight_lands(t), &f)) {
	case FLIGHT_FOLLOW:
		return flight_reap(t, &f, &one, true);
	case FLIGHT_DONE: /* landed with 0 since this call began */
		return 0;
	case FLIGHT_LEAD:
		break;
	}
	int rc = work(arg);
	flight_land(t, &f, rc);
	return rc;
}

bool flight_busy_locked(struct flight_table *t, const void *key)
{
	for (unsigned i = 0; i < t->nslots; i++) {
		const struct flight_slot *s = &t->slot[i];
		if (s->busy && memcmp(s->key, key, t->key_len) == 0)
			return true; /* F1: the only busy one of key */
	}
	return false;
}

int flight_followers(struct flight_table *t, const void *key)
{
	int refs = 0;
	pthread_mutex_lock(t->lock);
	for (unsigned i = 0; i < t->nslots; i++) {
		const struct flight_slot *s = &t->slot[i];
		if (s->busy && memcmp(s->key, key, t->key_len) == 0)
			refs = s->refs;
	}
	pthread_mutex_unlock(t->lock);
	return refs;
}
