/* Unit tests for fs/recent.c: a hash is returned only for bytes equal to the
 * ones it was computed from (R1), also when the sampled fingerprint matches;
 * a writer waits for another writer hashing the same chunk and then gets its
 * hash (R2); the copies stay within the budget, oldest out first, and a
 * pinned one stays (R3); chains predict another writer's next chunk, only one
 * whose end the chunker found, and a lost chain predicts nothing (R4); a
 * writer waits for a claimed chunk, takes a claim held too long over, and is
 * woken when a claim ends (R5). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "recent.h"
#include "support.h"

#define MiB ((size_t)1 << 20)

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
	uint8_t *a = ts_random(MiB, 1), *b = malloc(MiB);
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
	uint8_t *a = ts_random(MiB, 2), *b = malloc(MiB);
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
	uint8_t *a = ts_random(RECENT_MIN_LEN - 1, 3), h[HASH_LEN];
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
		c[i] = ts_random(MiB, 10 + (uint64_t)i);
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
	atomic_bool done;
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
	atomic_store(&w->done, true);
	return NULL;
}

/* Waits up to 10 s for the waiter to be waiting for another writer's hash
 * (its wait counted, under the lock it then sleeps on): true if it is, and
 * has not returned. */
static bool tr_waiter_waiting(struct recent *r, const struct tr_waiter *w)
{
	for (int i = 0; i < 10000; i++) {
		struct recent_stats st;
		recent_stats(r, &st);
		if (st.waits > 0 || atomic_load(&w->done))
			return st.waits > 0 && !atomic_load(&w->done);
		usleep(1000);
	}
	return false;
}

Test(recent, a_second_writer_waits_for_the_first_writers_hash)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = ts_random(MiB, 20), h[HASH_LEN];
	struct recent_ticket t;
	cr_assert_not(recent_lookup(r, a, MiB, h, &t));
	hash_sha256(a, MiB, h); /* the first writer's hash, published below */
	struct tr_waiter w = { .r = r, .d = a };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_wait_main, &w), 0);
	/* ordering, not a clock: the hash comes while the second writer waits */
	cr_assert(tr_waiter_waiting(r, &w), "the second writer did not wait for the first");
	recent_publish(r, &t, a, MiB, h);
	pthread_join(th, NULL);
	cr_assert(w.hit, "the waiting writer hashed the chunk itself");
	cr_assert_arr_eq(w.h, h, HASH_LEN);
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.waits, 1);
	free(a);
	recent_free(r);
}

Test(recent, a_waiter_whose_hasher_never_answers_hashes_for_itself_at_its_limit)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = ts_random(MiB, 22), h[HASH_LEN], want[HASH_LEN];
	struct recent_ticket t;
	cr_assert_not(recent_lookup(r, a, MiB, h, &t)); /* the first writer stalls */
	struct tr_waiter w = { .r = r, .d = a };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_wait_main, &w), 0);
	pthread_join(th, NULL);
	cr_assert_not(w.hit);
	hash_sha256(a, MiB, want);
	cr_assert_arr_eq(w.h, want, HASH_LEN);
	cr_assert_geq(w.waited_s, 0.15, "the waiter gave up before its limit (%.3f s)", w.waited_s);
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.waits, 1);
	cr_assert_eq(st.wait_timeouts, 1);
	recent_abandon(r, &t);
	free(a);
	recent_free(r);
}

Test(recent, an_abandoned_ticket_lets_the_waiter_hash_for_itself)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *a = ts_random(MiB, 21), h[HASH_LEN], want[HASH_LEN];
	struct recent_ticket t;
	cr_assert_not(recent_lookup(r, a, MiB, h, &t));
	struct tr_waiter w = { .r = r, .d = a };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_wait_main, &w), 0);
	/* ordering, not a clock: the abandon comes while the waiter waits */
	cr_assert(tr_waiter_waiting(r, &w), "the second writer did not wait for the first");
	recent_abandon(r, &t); /* the first writer failed before hashing */
	pthread_join(th, NULL);
	cr_assert_not(w.hit);
	hash_sha256(a, MiB, want);
	cr_assert_arr_eq(w.h, want, HASH_LEN);
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.waits, 1);
	cr_assert_eq(st.wait_timeouts, 0, "the waiter sat out its whole limit (%.3f s)", w.waited_s);
	cr_assert(tr_hash(r, a, MiB, h), "the waiter's own hash was not published");
	free(a);
	recent_free(r);
}

/* ---- chains (R4) and claims (R5) ---- */

/* Emits a chunk as the writer does: lookup, hash if needed, chain. */
static bool tr_emit(struct recent *r, struct recent_cursor *cur, const uint8_t *d, size_t len,
		    enum recent_end end, uint8_t out[HASH_LEN])
{
	struct recent_ticket t;
	bool hit = recent_lookup(r, d, len, out, &t);
	if (!hit) {
		hash_sha256(d, len, out);
		recent_publish(r, &t, d, len, out);
	}
	recent_chain(r, cur, &t, end);
	return hit;
}

Test(recent, a_chain_predicts_the_next_chunk_of_another_writer)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *c[4], h[HASH_LEN], want[HASH_LEN];
	for (int i = 0; i < 4; i++)
		c[i] = ts_random(MiB, 30 + (uint64_t)i);
	struct recent_cursor a = RECENT_CURSOR_NONE, b = RECENT_CURSOR_NONE;
	struct recent_pred p;
	cr_assert_not(recent_follow(r, &a, 0, &p), "a prediction without a chain");
	for (int i = 0; i < 4; i++) /* writer a: c0 c1 c2 (its end the chunker's), c3 cut */
		tr_emit(r, &a, c[i], MiB, i < 3 ? RECENT_END_CHUNKER : RECENT_END_OTHER, h);
	cr_assert(tr_emit(r, &b, c[0], MiB, RECENT_END_CHUNKER, h), "b hashed c0 again");
	for (int i = 1; i < 3; i++) {
		cr_assert(recent_follow(r, &b, 0, &p), "no prediction of c%d", i);
		cr_assert_eq(p.len, MiB);
		cr_assert(memcmp(p.copy, c[i], MiB) == 0, "the prediction is not c%d", i);
		cr_assert_eq((uintptr_t)p.image % STORE_IO_ALIGN, 0, "the copy's image is not aligned");
		cr_assert_eq(p.copy, p.image + RECENT_HEADROOM);
		hash_sha256(c[i], MiB, want);
		cr_assert_arr_eq(p.hash, want, HASH_LEN);
		recent_adopt(r, &b, &p);
	}
	cr_assert_not(recent_follow(r, &b, 0, &p), "a chunk cut by force was a prediction");
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.follows, 2);
	cr_assert_eq(st.hits, 3);
	cr_assert_eq(st.misses, 4);
	for (int i = 0; i < 4; i++)
		free(c[i]);
	recent_free(r);
}

struct tr_follower {
	struct recent *r;
	struct recent_cursor cur;
	unsigned wait_ms;
	bool found;
	struct recent_pred p;
	double waited_s;
	atomic_bool done;
};

static void *tr_follow_main(void *arg)
{
	struct tr_follower *f = arg;
	double t0 = tr_now();
	f->found = recent_follow(f->r, &f->cur, f->wait_ms, &f->p);
	f->waited_s = tr_now() - t0;
	atomic_store(&f->done, true);
	return NULL;
}

/* Waits up to 10 s for a writer to be waiting in recent_follow (its wait
 * counted, under the lock it then sleeps on). Meanwhile *holder asks again,
 * which renews its claim: a test thread scheduled late must not let the
 * claim grow RECENT_CLAIM_MS old and be taken over. */
static bool tr_follower_waiting(struct recent *r, struct recent_cursor *holder,
				const struct tr_follower *f)
{
	struct recent_pred p;
	for (int i = 0; i < 10000; i++) {
		cr_assert_not(recent_follow(r, holder, 0, &p), "a link nobody made");
		struct recent_stats st;
		recent_stats(r, &st);
		if (st.follow_waits > 0 || atomic_load(&f->done))
			return st.follow_waits > 0 && !atomic_load(&f->done);
		usleep(1000);
	}
	return false;
}

Test(recent, a_writer_waits_for_the_chunk_another_writer_has_claimed)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *c0 = ts_random(MiB, 40), *c1 = ts_random(MiB, 41), h[HASH_LEN];
	struct recent_cursor a = RECENT_CURSOR_NONE;
	struct recent_pred p;
	tr_emit(r, &a, c0, MiB, RECENT_END_CHUNKER, h);
	struct tr_follower f = { .r = r, .cur = a, .wait_ms = 2000 };
	cr_assert_not(recent_follow(r, &a, 0, &p), "a's claim");
	/* a chunks c1 (hashed before the other writer comes: the link below
	 * then follows a's last claim renewal at once) */
	struct recent_ticket t;
	cr_assert_not(recent_lookup(r, c1, MiB, h, &t));
	hash_sha256(c1, MiB, h);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_follow_main, &f), 0);
	/* ordering, not a clock: the link is made while the other writer waits */
	cr_assert(tr_follower_waiting(r, &a, &f), "the other writer did not wait for a's claim");
	recent_publish(r, &t, c1, MiB, h);
	recent_chain(r, &a, &t, RECENT_END_CHUNKER);
	pthread_join(th, NULL);
	cr_assert(f.found, "the waiting writer got no prediction");
	cr_assert(memcmp(f.p.copy, c1, MiB) == 0);
	cr_assert_lt(f.waited_s, 1.0, "it waited for its own limit, not for the link");
	recent_unpin(r, &f.p);
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.follow_waits, 1);
	cr_assert_eq(st.takeovers, 0);
	free(c0);
	free(c1);
	recent_free(r);
}

Test(recent, a_claim_held_too_long_is_taken_over)
{
	struct recent *r;
	cr_assert_eq(recent_new(0, &r), 0);
	uint8_t *c0 = ts_random(MiB, 50), h[HASH_LEN];
	struct recent_cursor a = RECENT_CURSOR_NONE;
	struct recent_pred p;
	tr_emit(r, &a, c0, MiB, RECENT_END_CHUNKER, h);
	struct recent_cursor b = a;
	cr_assert_not(recent_follow(r, &a, 0, &p)); /* a claims, then stalls */
	double t0 = tr_now();
	cr_assert_not(recent_follow(r, &b, 20, &p), "no chunk came, yet a prediction");
	double waited = tr_now() - t0;
	cr_assert_geq(waited, 0.015, "b did not wait for a's claim (%.3f s)", waited);
	cr_assert_lt(waited, 2.0, "b hung past its limit (%.3f s)", waited); /* against hanging, not a speed check */
	/* b holds the claim now: a third writer waits for b, not for a */
	struct recent_cursor c = a;
	t0 = tr_now();
	cr_assert_not(recent_follow(r, &c, 10, &p));
	cr_assert_geq(tr_now() - t0, 0.008);
	/* a claim ends when its writer leaves the chain */
	struct tr_follower f = { .r = r, .cur = a, .wait_ms = 2000 };
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, tr_follow_main, &f), 0);
	usleep(20 * 1000);
	recent_chain_drop(r, &c);
	pthread_join(th, NULL);
	cr_assert_not(f.found);
	cr_assert_lt(f.waited_s, 1.0, "the waiter was not told the claim ended");
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_geq(st.takeovers, 2);
	free(c0);
	recent_free(r);
}

Test(recent, a_pinned_prediction_is_not_evicted_and_a_lost_chain_predicts_nothing)
{
	struct recent *r;
	cr_assert_eq(recent_new(2 * MiB, &r), 0);
	uint8_t *c[5], h[HASH_LEN];
	for (int i = 0; i < 5; i++)
		c[i] = ts_random(MiB, 60 + (uint64_t)i);
	struct recent_cursor a = RECENT_CURSOR_NONE, b = RECENT_CURSOR_NONE;
	struct recent_pred p;
	tr_emit(r, &a, c[0], MiB, RECENT_END_CHUNKER, h);
	tr_emit(r, &a, c[1], MiB, RECENT_END_CHUNKER, h);
	tr_emit(r, &b, c[0], MiB, RECENT_END_CHUNKER, h);
	cr_assert(recent_follow(r, &b, 0, &p));
	for (int i = 2; i < 5; i++) /* the budget holds two copies */
		tr_emit(r, &a, c[i], MiB, RECENT_END_CHUNKER, h);
	cr_assert(memcmp(p.copy, c[1], MiB) == 0, "a pinned copy changed under its reader");
	recent_unpin(r, &p);
	struct recent_cursor lost = RECENT_CURSOR_NONE;
	tr_emit(r, &lost, c[0], MiB, RECENT_END_CHUNKER, h); /* c0 was evicted: hashed again */
	tr_emit(r, &a, c[4], MiB, RECENT_END_CHUNKER, h);
	for (int i = 0; i < 3; i++)
		tr_emit(r, &a, c[1 + i], MiB, RECENT_END_CHUNKER, h);
	cr_assert_not(recent_follow(r, &lost, 0, &p), "an evicted entry's chain predicted");
	cr_assert_eq(lost.slot, -1, "the cursor still names an evicted entry");
	for (int i = 0; i < 5; i++)
		free(c[i]);
	recent_free(r);
}

/* R6: a writer's buffer becomes the entry's copy without a copy, pinned;
 * equal bytes then hit it byte for byte, and a buffer recent cannot keep
 * (over the budget) stays the caller's, untouched. */
Test(recent, a_published_image_is_the_copy_and_one_not_kept_stays_the_callers)
{
	struct recent *r;
	cr_assert_eq(recent_new(2 * MiB, &r), 0);
	size_t len = MiB + 4321, cap;
	uint8_t *want = ts_random(len, 80), hash[HASH_LEN], got[HASH_LEN];
	hash_sha256(want, len, hash);
	uint8_t *img = recent_image_take(r, RECENT_HEADROOM + len / 2, &cap);
	cr_assert_not_null(img);
	cr_assert_eq((uintptr_t)img % 4096, 0, "an image must be page-aligned (O_DIRECT)");
	cr_assert_eq(recent_image_grow(&img, &cap, RECENT_HEADROOM + len), 0);
	cr_assert_geq(cap, RECENT_HEADROOM + len);
	memcpy(img + RECENT_HEADROOM, want, len);
	struct recent_ticket t;
	struct recent_pred pin;
	cr_assert_not(recent_lookup(r, img + RECENT_HEADROOM, len, got, &t));
	cr_assert(recent_publish_image(r, &t, img, cap, len, 0, hash, &pin), "an image was not kept");
	cr_assert_eq(pin.image, img, "the entry copied the image instead of keeping it");
	cr_assert(memcmp(pin.copy, want, len) == 0);
	cr_assert_arr_eq(pin.hash, hash, HASH_LEN);
	recent_unpin(r, &pin);
	uint8_t *again = malloc(len);
	memcpy(again, want, len);
	cr_assert(recent_lookup(r, again, len, got, &t), "the kept image is not found");
	cr_assert_arr_eq(got, hash, HASH_LEN);
	again[len - 1] ^= 1; /* one byte off at the end: a miss, and nothing kept over budget */
	size_t big = 3 * MiB, cap2;
	uint8_t *other = recent_image_take(r, RECENT_HEADROOM + big, &cap2), h2[HASH_LEN];
	cr_assert_not_null(other);
	uint8_t *fill = ts_random(big, 81);
	memcpy(other + RECENT_HEADROOM, fill, big);
	hash_sha256(fill, big, h2);
	cr_assert_not(recent_lookup(r, other + RECENT_HEADROOM, big, got, &t));
	cr_assert_not(recent_publish_image(r, &t, other, cap2, big, 0, h2, &pin),
		      "an image over the budget was kept");
	cr_assert_eq(pin.slot, -1);
	cr_assert(memcmp(other + RECENT_HEADROOM, fill, big) == 0, "a buffer not kept changed");
	recent_image_give(r, other, cap2);
	struct recent_stats st;
	recent_stats(r, &st);
	cr_assert_eq(st.images, 1);
	free(fill);
	free(again);
	free(want);
	recent_free(r);
}
