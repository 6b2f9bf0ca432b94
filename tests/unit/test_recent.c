/* Unit tests for fs/recent.c: a hash is returned only for bytes equal to the
 * ones it was computed from (R1), also when the sampled fingerprint matches;
 * a writer waits for another writer hashing the same chunk and then gets its
 * hash (R2); the copies stay within the budget, oldest out first (R3). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "recent.h"

#define MiB ((size_t)1 << 20)

static uint8_t *tr_data(size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len);
	cr_assert_not_null(b);
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)x;
	}
	return b;
}

/* What a writer does: the recent hash, or its own (published). */
static bool tr_hash(struct recent *r, const uint8_t *d, size_t len, uint8_t out[HASH_LEN])
{
	struct recent_ticket t;
	if (recent_lookup(r, d, len, out, &t))
		return true;
	hash_sha256(d, len, out);
	recent_publish(r, &t, d, len, out);
	return false;
}

Test(recent, equal_bytes_get_the_sha256_without_hashing)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = tr_data(MiB, 1), *b = malloc(MiB);
	memcpy(b, a, MiB); /* another writer's buffer, same bytes */
	uint8_t ha[HASH_LEN], hb[HASH_LEN], want[HASH_LEN];
	hash_sha256(a, MiB, want);
	cr_assert_not(tr_hash(r, a, MiB, ha), "a first chunk cannot be known");
	cr_assert(tr_hash(r, b, MiB, hb), "an equal chunk was hashed again");
	cr_assert_arr_eq(ha, want, HASH_LEN);
	cr_assert_arr_eq(hb, want, HASH_LEN, "the reused hash is not the SHA-256 of the bytes");
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.misses, 1);
	free(a);
	free(b);
	recent_free(r);
}

Test(recent, same_fingerprint_other_bytes_is_hashed_for_real)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = tr_data(MiB, 2), *b = malloc(MiB);
	memcpy(b, a, MiB);
	b[12345] ^= 1; /* between the sampled words: same fingerprint, other chunk */
	uint8_t ha[HASH_LEN], hb[HASH_LEN], want[HASH_LEN];
	tr_hash(r, a, MiB, ha);
	cr_assert_not(tr_hash(r, b, MiB, hb), "a hash was reused for different bytes");
	hash_sha256(b, MiB, want);
	cr_assert_arr_eq(hb, want, HASH_LEN);
	for (size_t at = 0; at < MiB; at += MiB / 7) { /* and at any other place */
		memcpy(b, a, MiB);
		b[at] ^= 0x80;
		cr_assert_not(tr_hash(r, b, MiB, hb), "flip at %zu not seen", at);
		hash_sha256(b, MiB, want);
		cr_assert_arr_eq(hb, want, HASH_LEN);
	}
	free(a);
	free(b);
	recent_free(r);
}

Test(recent, small_chunks_always_miss)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = tr_data(RECENT_MIN_LEN - 1, 3), h[HASH_LEN];
	cr_assert_not(tr_hash(r, a, RECENT_MIN_LEN - 1, h));
	cr_assert_not(tr_hash(r, a, RECENT_MIN_LEN - 1, h));
	free(a);
	recent_free(r);
}

Test(recent, copies_stay_within_the_budget_oldest_out_first)
{
	struct recent *r;
	cr_assert_eq(recent_new(2 * MiB, &r), 0);
	uint8_t *c[3], h[HASH_LEN];
	for (int i = 0; i < 3; i++) {
		c[i] = tr_data(MiB, 10 + (uint64_t)i);
		cr_assert_not(tr_hash(r, c[i], MiB, h));
	}
	cr_assert(tr_hash(r, c[2], MiB, h), "the newest chunk was dropped");
	cr_assert(tr_hash(r, c[1], MiB, h));
	cr_assert_not(tr_hash(r, c[0], MiB, h), "three 1 MiB copies kept in a 2 MiB budget");
	for (int i = 0; i < 3; i++)
		free(c[i]);
	recent_free(r);
}

struct tr_waiter {
	struct recent *r;
	const uint8_t *d;
	bool hit;
	uint8_t h[HASH_LEN];
	double waited_s;
};

static double tr_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *tr_wait_main(void *p)
{
	struct tr_waiter *w = p;
	double t0 = tr_now();
	w->hit = tr_hash(w->r, w->d, MiB, w->h);
	w->waited_s = tr_now() - t0;
	return NULL;
}

Test(recent, a_second_writer_waits_for_the_first_writers_hash)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = tr_data(MiB, 20), h[HASH_LEN];
	struct recent_ticket t;
	cr_assert_not(recent_lookup(r, a, MiB, h, &t));
	struct tr_waiter w = { .r = r, .d = a };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_wait_main, &w), 0);
	usleep(60 * 1000); /* the first writer hashes slowly */
	hash_sha256(a, MiB, h);
	recent_publish(r, &t, a, MiB, h);
	pthread_join(th, NULL);
	cr_assert(w.hit, "the waiting writer hashed the chunk itself");
	cr_assert_arr_eq(w.h, h, HASH_LEN);
	cr_assert_geq(w.waited_s, 0.04, "it did not wait (%.3f s)", w.waited_s);
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.waits, 1);
	free(a);
	recent_free(r);
}

Test(recent, an_abandoned_ticket_lets_the_waiter_hash_for_itself)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = tr_data(MiB, 21), h[HASH_LEN], want[HASH_LEN];
	struct recent_ticket t;
	cr_assert_not(recent_lookup(r, a, MiB, h, &t));
	struct tr_waiter w = { .r = r, .d = a };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_wait_main, &w), 0);
	usleep(30 * 1000);
	recent_abandon(r, &t); /* the first writer failed before hashing */
	pthread_join(th, NULL);
	cr_assert_not(w.hit);
	hash_sha256(a, MiB, want);
	cr_assert_arr_eq(w.h, want, HASH_LEN);
	cr_assert_lt(w.waited_s, 0.15, "the waiter sat out the whole timeout");
	cr_assert(tr_hash(r, a, MiB, h), "the waiter's own hash was not published");
	free(a);
	recent_free(r);
}
