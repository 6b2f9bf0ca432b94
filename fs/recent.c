/* recent — the SHA-256 of chunks hashed moments ago; see recent.h for the
 * invariants (R1–R6).
 *
 * A small table of slots, each EMPTY, PENDING (a writer is hashing a chunk
 * with this fingerprint: R2) or READY (a copy of the bytes and their hash).
 * The fingerprint (length and 33 sampled words) only finds candidates; the
 * answer is always a full memcmp (R1), done outside the lock while the slot
 * is pinned so that it cannot be evicted under the comparison.
 *
 * A READY slot also carries its chain (R4): the successor (slot, epoch) and
 * whether its own end was the chunker's, and the claim on its successor
 * (R5). A slot's epoch changes whenever it is reused, so a stale cursor or
 * link names nothing. */
#define _GNU_SOURCE
#include "recent.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "monoclock.h"

#define RECENT_SLOTS 64
#define RECENT_DEFAULT_BUDGET ((size_t)16 << 20) /* bounds the daemon's memory (docs/BENCH.md) */
#define RECENT_WAIT_MS 200 /* R2: how long a writer waits for another's hash */
#define RECENT_SPARES 4    /* copy buffers kept for reuse (no mmap and fault per chunk) */
#define RECENT_ROUND ((size_t)512 << 10)
#define RECENT_CLAIM_MS 50 /* R5: a claim older than this may be taken over */

enum recent_state { RS_EMPTY, RS_PENDING, RS_READY };

struct recent_slot {
	enum recent_state state;
	uint64_t fp, epoch, stamp;
	size_t len;
	int pins; /* comparisons running against copy */
	uint8_t *copy;
	size_t cap;   /* of copy */
	size_t slack; /* of cap, beyond what a copy would take (R6) */
	uint8_t hash[HASH_LEN];
	/* R4/R5 (READY slots) */
	int next;            /* the successor's slot, -1: none yet */
	uint64_t next_epoch;
	bool chunker_end;    /* RECENT_END_CHUNKER */
	const void *claim;   /* the cursor of the writer chunking the successor */
	uint64_t claim_until; /* CLOCK_MONOTONIC ns */
};

struct recent {
	pthread_mutex_t lock;
	struct flight_table *flights; /* R2: tickets, under lock */
	pthread_cond_t linked;  /* R5: a successor was linked, or a claim ended */
	size_t budget, used;
	size_t slack; /* R6: the slots' slack in all, at most budget */
	uint64_t clock;
	struct recent_stats st;
	struct recent_slot slot[RECENT_SLOTS];
	uint8_t *spare[RECENT_SPARES]; /* buffers of evicted copies, for the next ones */
	size_t spare_cap[RECENT_SPARES];
};

/* The flight key of a chunk's fingerprint (R2). */
struct recent_key {
	uint64_t fp, len;
};

static void recent_buf_free(uint8_t *buf, size_t cap);
static void recent_pin_slot(struct recent_slot *x, int slot, struct recent_pred *pred);

int recent_new(size_t budget, struct recent **out)
{
	struct recent *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->budget = budget ? budget : RECENT_DEFAULT_BUDGET;
	pthread_mutex_init(&r->lock, NULL);
	int rc = flight_table_new_locked(RECENT_SLOTS, sizeof(struct recent_key), &r->lock,
					 &r->flights);
	if (rc != 0) {
		pthread_mutex_destroy(&r->lock);
		free(r);
		return rc;
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->linked, &ca);
	pthread_condattr_destroy(&ca);
	*out = r;
	return 0;
}

void recent_free(struct recent *r)
{
	if (!r)
		return;
	for (int i = 0; i < RECENT_SLOTS; i++)
		recent_buf_free(r->slot[i].copy, r->slot[i].cap);
	for (int i = 0; i < RECENT_SPARES; i++)
		recent_buf_free(r->spare[i], r->spare_cap[i]);
	flight_table_free(r->flights);
	pthread_cond_destroy(&r->linked);
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

/* Copy buffers are their own mappings: page-aligned (recent_pred's image),
 * and unmapped when dropped. MiB-sized aligned_alloc'd blocks freed by other
 * threads than allocated them piled up in glibc's per-thread arenas
 * (docs/BENCH.md, "Figures moved from code comments"). */
static uint8_t *recent_buf_alloc(size_t cap)
{
	void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void recent_buf_free(uint8_t *buf, size_t cap)
{
	if (buf)
		munmap(buf, cap);
}

/* Keeps a buffer for reuse if there is room among the spares, else the
 * smallest of them goes. Lock held. */
static void recent_spare_put(struct recent *r, uint8_t *buf, size_t cap)
{
	if (!buf)
		return;
	int small = 0;
	for (int i = 0; i < RECENT_SPARES; i++) {
		if (!r->spare[i]) {
			r->spare[i] = buf;
			r->spare_cap[i] = cap;
			return;
		}
		if (r->spare_cap[i] < r->spare_cap[small])
			small = i;
	}
	if (r->spare_cap[small] < cap) {
		uint8_t *old = r->spare[small];
		size_t old_cap = r->spare_cap[small];
		r->spare[small] = buf;
		r->spare_cap[small] = cap;
		buf = old;
		cap = old_cap;
	}
	recent_buf_free(buf, cap);
}

/* The smallest spare buffer of at least len bytes, or NULL. Lock held. */
static uint8_t *recent_spare_take(struct recent *r, size_t len, size_t *cap)
{
	int best = -1;
	for (int i = 0; i < RECENT_SPARES; i++)
		if (r->spare[i] && r->spare_cap[i] >= len &&
		    (best < 0 || r->spare_cap[i] < r->spare_cap[best]))
			best = i;
	if (best < 0)
		return NULL;
	uint8_t *buf = r->spare[best];
	*cap = r->spare_cap[best];
	r->spare[best] = NULL;
	return buf;
}

/* READY → EMPTY: an idle entry evicted (R3). Lock held. */
static void recent_slot_clear(struct recent *r, struct recent_slot *s)
{
	assert(s->state == RS_READY && s->pins == 0); /* R3: a pinned copy stays */
	if (s->state == RS_READY)
		r->used -= s->len;
	recent_spare_put(r, s->copy, s->cap);
	r->slack -= s->slack;
	s->slack = 0;
	s->copy = NULL;
	s->state = RS_EMPTY;
	if (s->claim) /* writers waiting for its successor: their chain is gone */
		pthread_cond_broadcast(&r->linked);
	s->claim = NULL;
	s->next = -1;
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
		if (s->state == RS_READY && s->fp == fp && s->len == len)
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


static struct timespec recent_ts(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
			       .tv_nsec = (long)(ns % 1000000000u) };
	return ts;
}

/* The READY entry named (slot, epoch), or NULL if it is gone. Lock held. */
static struct recent_slot *recent_entry(struct recent *r, int slot, uint64_t epoch)
{
	if (slot < 0 || slot >= RECENT_SLOTS)
		return NULL;
	struct recent_slot *s = &r->slot[slot];
	return s->state == RS_READY && s->epoch == epoch ? s : NULL;
}

/* Compares data with slot i's copy outside the lock (R1); lock held on entry
 * and on return. */
static bool recent_compare(struct recent *r, int i, const uint8_t *data, size_t len,
			   uint8_t hash[HASH_LEN])
{
	struct recent_slot *s = &r->slot[i];
	s->pins++;
	const uint8_t *copy = s->copy + RECENT_HEADROOM;
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

/* R2: another writer hashes these bytes now (its ticket is a flight on
 * their fingerprint): waits for it until the deadline. false: it timed out.
 * Lock held (released while waiting). */
static bool recent_wait_hasher(struct recent *r, const struct flight *f,
			       const struct timespec *deadline, bool *waited)
{
	if (!*waited)
		r->st.waits++;
	*waited = true;
	bool landed = flight_wait_until_locked(r->flights, f, deadline);
	flight_release_locked(r->flights, f);
	if (!landed)
		r->st.wait_timeouts++;
	return landed;
}

/* A ticket: a PENDING slot to publish into, and the flight other writers of
 * the same fingerprint wait for. false: no slot (the caller hashes, and
 * publishes nothing). Lock held. */
static bool recent_ticket_take(struct recent *r, uint64_t fp, size_t len, const struct flight *f,
			       struct recent_ticket *ticket)
{
	int i = recent_free_slot(r);
	if (i < 0) {
		flight_land_locked(r->flights, f, -ENOSPC); /* nobody joined: the lock was held */
		return false;
	}
	struct recent_slot *s = &r->slot[i];
	assert(s->state == RS_EMPTY && s->pins == 0); /* EMPTY → PENDING */
	s->state = RS_PENDING;
	s->fp = fp;
	s->len = len;
	s->epoch = ++r->clock;
	s->next = -1;
	s->claim = NULL;
	s->chunker_end = false;
	ticket->slot = i;
	ticket->epoch = s->epoch;
	ticket->flight = *f;
	return true;
}

bool recent_lookup(struct recent *r, const uint8_t *data, size_t len, uint8_t hash[HASH_LEN],
		   struct recent_ticket *ticket)
{
	ticket->slot = -1;
	ticket->hit = false;
	if (!r || len < RECENT_MIN_LEN)
		return false;
	struct recent_key key = { recent_fingerprint(data, len), len };
	struct timespec deadline;
	recent_deadline(&deadline, RECENT_WAIT_MS);
	bool waited = false;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		int i = recent_find(r, key.fp, len);
		if (i >= 0) {
			if (recent_compare(r, i, data, len, hash)) {
				r->st.hits++;
				ticket->slot = i;
				ticket->epoch = r->slot[i].epoch;
				ticket->hit = true;
				pthread_mutex_unlock(&r->lock);
				return true;
			}
			break; /* same samples, other bytes: hash it (and do not publish over it) */
		}
		struct flight f;
		/* since: none, a landing is never taken for a hash (F3) */
		if (flight_join_locked(r->flights, &key, UINT64_MAX, &f) == FLIGHT_FOLLOW) {
			if (!recent_wait_hasher(r, &f, &deadline, &waited))
				break;
			continue; /* READY now, or settled EMPTY: look again */
		}
		recent_ticket_take(r, key.fp, len, &f, ticket);
		break;
	}
	r->st.misses++;
	pthread_mutex_unlock(&r->lock);
	return false;
}

static size_t recent_round_up(size_t n);

/* Ends a ticket; with copy, the slot becomes READY holding it (R3
 * permitting), else EMPTY: PENDING → READY | EMPTY. true: copy was kept
 * (pinned in *pin if pin). A copy not kept becomes a spare, unless it is
 * the caller's (R6: caller_owns); a caller's is kept at *cap bytes if the
 * slots' slack allows, else at what a copy would take (*cap says which). */
static bool recent_settle(struct recent *r, const struct recent_ticket *t, uint8_t *copy,
			  size_t *cap, const uint8_t hash[HASH_LEN], bool caller_owns,
			  struct recent_pred *pin)
{
	bool kept = false;
	size_t tight = copy ? recent_round_up(RECENT_HEADROOM + r->slot[t->slot].len) : 0;
	if (tight > *cap)
		tight = *cap;
	pthread_mutex_lock(&r->lock);
	struct recent_slot *s = &r->slot[t->slot];
	assert(s->state == RS_PENDING && s->epoch == t->epoch); /* R2: only its ticket ends it */
	while (copy && r->used + s->len > r->budget) {
		int old = recent_oldest_idle(r);
		if (old < 0)
			break;
		recent_slot_clear(r, &r->slot[old]);
	}
	if (copy && r->used + s->len <= r->budget) {
		if (caller_owns && r->slack + (*cap - tight) > r->budget)
			*cap = tight; /* R6: the slack stays within the budget */
		s->copy = copy;
		s->cap = *cap;
		s->slack = caller_owns ? *cap - tight : 0; /* a copy's spare was the old rule's */
		r->slack += s->slack;
		copy = NULL;
		memcpy(s->hash, hash, HASH_LEN);
		s->state = RS_READY;
		s->stamp = ++r->clock;
		r->used += s->len;
		kept = true;
		r->st.images += caller_owns;
		if (pin)
			recent_pin_slot(s, t->slot, pin);
	} else {
		s->state = RS_EMPTY;
	}
	flight_land_locked(r->flights, &t->flight, 0); /* R2: the writers waiting look again */
	if (!caller_owns)
		recent_spare_put(r, copy, *cap); /* not kept: reused next time, or freed */
	pthread_mutex_unlock(&r->lock);
	return kept;
}

void recent_publish(struct recent *r, const struct recent_ticket *t, const uint8_t *data,
		    size_t len, const uint8_t hash[HASH_LEN])
{
	if (!r || t->slot < 0 || t->hit)
		return;
	size_t cap = 0, need = RECENT_HEADROOM + len;
	pthread_mutex_lock(&r->lock);
	uint8_t *copy = recent_spare_take(r, need, &cap);
	pthread_mutex_unlock(&r->lock);
	if (!copy) {
		cap = (need + RECENT_ROUND - 1) / RECENT_ROUND * RECENT_ROUND;
		copy = recent_buf_alloc(cap); /* none: the slot just empties */
	}
	if (copy)
		memcpy(copy + RECENT_HEADROOM, data, len);
	recent_settle(r, t, copy, &cap, hash, false, NULL);
}

void recent_abandon(struct recent *r, const struct recent_ticket *t)
{
	size_t none = 0;
	if (r && t->slot >= 0 && !t->hit)
		recent_settle(r, t, NULL, &none, NULL, false, NULL);
}

/* ---- image buffers a writer fills (R6) ---- */

static size_t recent_round_up(size_t n)
{
	return (n + RECENT_ROUND - 1) / RECENT_ROUND * RECENT_ROUND;
}

/* The largest spare buffer, if it holds need bytes, or NULL. Lock held. */
static uint8_t *recent_spare_take_largest(struct recent *r, size_t need, size_t *cap)
{
	int best = -1;
	for (int i = 0; i < RECENT_SPARES; i++)
		if (r->spare[i] && (best < 0 || r->spare_cap[i] > r->spare_cap[best]))
			best = i;
	if (best < 0 || r->spare_cap[best] < need)
		return NULL;
	uint8_t *buf = r->spare[best];
	*cap = r->spare_cap[best];
	r->spare[best] = NULL;
	return buf;
}

uint8_t *recent_image_take(struct recent *r, size_t need, size_t *cap)
{
	uint8_t *buf = NULL;
	if (r) {
		pthread_mutex_lock(&r->lock);
		buf = recent_spare_take_largest(r, need, cap);
		pthread_mutex_unlock(&r->lock);
	}
	if (!buf) {
		*cap = recent_round_up(need);
		buf = recent_buf_alloc(*cap);
	}
	return buf;
}

size_t recent_image_grow_cap(size_t cap, size_t need)
{
	return cap >= need ? cap : recent_round_up(need > 2 * cap ? need : 2 * cap);
}

int recent_image_grow(uint8_t **image, size_t *cap, size_t need)
{
	if (*cap >= need)
		return 0;
	size_t ncap = recent_image_grow_cap(*cap, need);
	void *p = mremap(*image, *cap, ncap, MREMAP_MAYMOVE); /* pages move, bytes are not copied */
	if (p == MAP_FAILED)
		return -ENOMEM;
	*image = p;
	*cap = ncap;
	return 0;
}

void recent_image_give(struct recent *r, uint8_t *image, size_t cap)
{
	if (!r) {
		recent_buf_free(image, cap);
		return;
	}
	pthread_mutex_lock(&r->lock);
	recent_spare_put(r, image, cap);
	pthread_mutex_unlock(&r->lock);
}

bool recent_publish_image(struct recent *r, const struct recent_ticket *t, uint8_t *image,
			  size_t cap, size_t len, size_t keep, const uint8_t hash[HASH_LEN],
			  struct recent_pred *pin)
{
	pin->slot = -1;
	if (!r || t->slot < 0 || t->hit)
		return false;
	assert(r->slot[t->slot].len == len && cap >= RECENT_HEADROOM + len);
	/* the rest unmapped: R6 bounds what an image holds beyond its chunk */
	keep = recent_round_up(keep > RECENT_HEADROOM + len ? keep : RECENT_HEADROOM + len);
	if (keep > cap)
		keep = cap;
	if (!recent_settle(r, t, image, &keep, hash, true, pin))
		return false;
	if (keep < cap) /* pinned: no other thread can have it yet */
		munmap(image + keep, cap - keep);
	return true;
}

/* ---- chains (R4) and claims (R5) ---- */

static void recent_pin_slot(struct recent_slot *x, int slot, struct recent_pred *pred)
{
	assert(x->state == RS_READY); /* only a copy can be pinned */
	x->pins++;
	pred->slot = slot;
	pred->epoch = x->epoch;
	pred->image = x->copy;
	pred->copy = x->copy + RECENT_HEADROOM;
	pred->len = x->len;
	memcpy(pred->hash, x->hash, HASH_LEN);
	pred->has_crc = false; /* R7: only its holder computes one */
}

bool recent_pin(struct recent *r, const struct recent_ticket *t, struct recent_pred *out)
{
	out->slot = -1;
	if (!r || t->slot < 0)
		return false;
	pthread_mutex_lock(&r->lock);
	struct recent_slot *x = recent_entry(r, t->slot, t->epoch);
	if (x)
		recent_pin_slot(x, t->slot, out);
	pthread_mutex_unlock(&r->lock);
	return x != NULL;
}

bool recent_pin_again(struct recent *r, const struct recent_pred *held, struct recent_pred *out)
{
	out->slot = -1;
	if (!r || held->slot < 0)
		return false;
	pthread_mutex_lock(&r->lock);
	assert(r->slot[held->slot].pins > 0 && r->slot[held->slot].epoch == held->epoch);
	recent_pin_slot(&r->slot[held->slot], held->slot, out);
	pthread_mutex_unlock(&r->lock);
	out->has_crc = held->has_crc; /* R7: the same copy, the same bytes */
	out->crc = held->crc;
	return true;
}

/* Ends the claim the cursor holds on its entry's successor, if any. Lock held. */
static void recent_claim_end(struct recent *r, const struct recent_cursor *cur)
{
	struct recent_slot *e = recent_entry(r, cur->slot, cur->epoch);
	if (e && e->claim == cur) {
		e->claim = NULL;
		pthread_cond_broadcast(&r->linked);
	}
}

void recent_chain(struct recent *r, struct recent_cursor *cur, const struct recent_ticket *t,
		  enum recent_end end)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	recent_claim_end(r, cur);
	struct recent_slot *x = t && t->slot >= 0 ? recent_entry(r, t->slot, t->epoch) : NULL;
	struct recent_slot *e = recent_entry(r, cur->slot, cur->epoch);
	if (x && e && e != x && recent_entry(r, e->next, e->next_epoch) == NULL) {
		e->next = t->slot;
		e->next_epoch = t->epoch;
		pthread_cond_broadcast(&r->linked);
	}
	if (x && end == RECENT_END_CHUNKER)
		x->chunker_end = true; /* a fact about its bytes, whoever found it */
	*cur = x ? (struct recent_cursor){ .slot = t->slot, .epoch = t->epoch } : RECENT_CURSOR_NONE;
	pthread_mutex_unlock(&r->lock);
}

void recent_chain_drop(struct recent *r, struct recent_cursor *cur)
{
	if (!r || cur->slot < 0)
		return;
	pthread_mutex_lock(&r->lock);
	recent_claim_end(r, cur);
	pthread_mutex_unlock(&r->lock);
	*cur = RECENT_CURSOR_NONE;
}

bool recent_follow(struct recent *r, struct recent_cursor *cur, unsigned wait_ms,
		   struct recent_pred *pred)
{
	if (!r || cur->slot < 0)
		return false;
	uint64_t start = monoclock_ns(), give_up = start + (uint64_t)wait_ms * 1000000u;
	bool waited = false, found = false;
	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct recent_slot *e = recent_entry(r, cur->slot, cur->epoch);
		if (!e) { /* evicted: the chain is lost */
			*cur = RECENT_CURSOR_NONE;
			break;
		}
		if (e->next >= 0) { /* linked: a prediction if its end was the chunker's */
			struct recent_slot *x = recent_entry(r, e->next, e->next_epoch);
			if (x && x->chunker_end) {
				recent_pin_slot(x, e->next, pred);
				found = true;
			}
			break;
		}
		uint64_t now = monoclock_ns();
		if (!e->claim || e->claim == cur || now >= e->claim_until || now >= give_up) {
			if (e->claim && e->claim != cur && waited)
				r->st.takeovers++;
			e->claim = cur; /* R5: this writer chunks the successor */
			e->claim_until = now + (uint64_t)RECENT_CLAIM_MS * 1000000u;
			break;
		}
		if (!waited)
			r->st.follow_waits++;
		waited = true;
		struct timespec ts = recent_ts(e->claim_until < give_up ? e->claim_until : give_up);
		pthread_cond_timedwait(&r->linked, &r->lock, &ts);
	}
	if (waited)
		r->st.follow_wait_ns += monoclock_ns() - start;
	pthread_mutex_unlock(&r->lock);
	return found;
}

void recent_unpin(struct recent *r, struct recent_pred *pred)
{
	if (!r || pred->slot < 0)
		return;
	pthread_mutex_lock(&r->lock);
	assert(r->slot[pred->slot].pins > 0 && r->slot[pred->slot].epoch == pred->epoch);
	r->slot[pred->slot].pins--;
	pthread_mutex_unlock(&r->lock);
	pred->slot = -1;
}

void recent_adopt(struct recent *r, struct recent_cursor *cur, struct recent_pred *pred)
{
	pthread_mutex_lock(&r->lock);
	struct recent_slot *x = &r->slot[pred->slot];
	assert(x->state == RS_READY && x->pins > 0 && x->epoch == pred->epoch); /* pinned: kept */
	x->pins--;
	x->stamp = ++r->clock; /* still wanted: evicted last */
	r->st.hits++;
	r->st.follows++;
	recent_claim_end(r, cur);
	cur->slot = pred->slot;
	cur->epoch = pred->epoch;
	pthread_mutex_unlock(&r->lock);
	pred->slot = -1;
}

void recent_stats(struct recent *r, struct recent_stats *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->st;
	pthread_mutex_unlock(&r->lock);
}
