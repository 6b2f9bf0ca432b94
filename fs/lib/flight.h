/* flight — single flight: one thread per key does the work, the others that
 * want the same key at the same time wait for its result instead of doing it
 * again.
 *
 * A flight is the work on one key, from its leader's flight_join to its
 * flight_land. Callers that join a busy key get a reference on that flight
 * (FOLLOW) and collect its result later, waiting or not (flight_reap), so a
 * writer can go on with its next chunk while another stores the one they
 * share. Keys are opaque bytes of a length fixed per table (a SHA-256, a
 * fingerprint).
 *
 * "Only one thread works on a given hash", in the four places that need it:
 * fs/chunkput.c (one store per chunk: writer flights), fs/recent.c (one hash
 * per fingerprint: its tickets), fs/reader.c (one load per chunk into its
 * decoded-chunk cache) and fs/cache.c (one fetch per chunk from BACKING).
 *
 * Invariants:
 *  F1. At most one flight per key is busy. flight_join on a busy key never
 *      leads: it follows, with a reference on that flight.
 *  F2. A slot that is busy or referenced is never reused: every reference
 *      finds its own flight's result (the slot's generation is asserted).
 *  F3. A flight landed with 0 is remembered (until its slot is reused) with
 *      its place in the count of landings; a join told to work when `since`
 *      landings had happened answers DONE for a key that landed after that.
 *      A failed landing is shared with the references it has, and
 *      remembered by nobody else: the next join leads again (a retry).
 *  F4. Every lead ends with flight_land; every reference with flight_reap
 *      or flight_release. A lead without a free slot (slot -1) shares
 *      nothing: its caller just works.
 *
 * Thread-safe: one mutex per table, held for a scan of the slots only; or
 * the owner's mutex (flight_table_new_locked), for an owner that keeps its
 * own state under a lock already: it calls the _locked functions with that
 * lock held, and a flight costs it no second lock. */
#ifndef CKPTFS_FLIGHT_H
#define CKPTFS_FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define FLIGHT_KEY_MAX 32

struct flight_table;

/* A lead or a reference on one flight (slot -1: none). */
struct flight {
	int slot;
	uint64_t gen;
};

enum flight_join {
	FLIGHT_LEAD,   /* the caller works, then calls flight_land (F4) */
	FLIGHT_FOLLOW, /* another thread works: the caller holds a reference */
	FLIGHT_DONE,   /* it landed, with 0, after `since` (F3): nothing to do */
};

/* slots: flights (busy or remembered) at once; key_len <= FLIGHT_KEY_MAX. */
int flight_table_new(unsigned slots, size_t key_len, struct flight_table **out);
void flight_table_free(struct flight_table *t); /* NULL is allowed */
/* A table under the owner's lock: the _locked functions below are called
 * with it held; the others take it themselves. */
int flight_table_new_locked(unsigned slots, size_t key_len, pthread_mutex_t *lock,
			    struct flight_table **out);

/* Landings with 0 so far: the `since` of a join (F3). */
uint64_t flight_lands(struct flight_table *t);

/* Joins the flight of key for a caller told to work when `since` landings
 * had happened (pass flight_lands() of then, or of now). LEAD: *f is the new
 * flight, or slot -1 if no slot was free. FOLLOW: *f is a reference. */
enum flight_join flight_join(struct flight_table *t, const void *key, uint64_t since,
			     struct flight *f);

/* One more reference on the caller's own busy flight (its work goes on in
 * another thread, and the caller collects the result like a follower). */
void flight_hold(struct flight_table *t, const struct flight *f);
/* Drops a reference without its result. */
void flight_release(struct flight_table *t, const struct flight *f);

/* The leader's end: rc is every reference's result (F3, F4). */
void flight_land(struct flight_table *t, const struct flight *lead, int rc);

/* Ends the references refs[0..*n) whose flights landed (all of them with
 * wait, waiting as needed), keeping the others in refs[0..*n) in order.
 * Returns the first failure among the landed ones, else 0. */
int flight_reap(struct flight_table *t, struct flight *refs, size_t *n, bool wait);

/* Waits until the flights of refs[0..n) have all landed; keeps the
 * references (for readers that may not change refs). */
void flight_wait(struct flight_table *t, const struct flight *refs, size_t n);

/* The whole of it for a caller that waits: work(arg) runs here as the lead,
 * or the result of the flight running now is returned. */
int flight_do(struct flight_table *t, const void *key, int (*work)(void *arg), void *arg);

/* References held now on the busy flight of key (0: none busy). */
int flight_followers(struct flight_table *t, const void *key);

/* The same, with the table's lock held. */
enum flight_join flight_join_locked(struct flight_table *t, const void *key, uint64_t since,
				    struct flight *f);
void flight_land_locked(struct flight_table *t, const struct flight *lead, int rc);
void flight_release_locked(struct flight_table *t, const struct flight *f);
/* Waits (the lock released meanwhile) until f's flight landed or the
 * CLOCK_MONOTONIC deadline passed (NULL: no deadline); true if it landed.
 * Keeps the reference. */
bool flight_wait_until_locked(struct flight_table *t, const struct flight *f,
			      const struct timespec *deadline);
/* Whether a flight of key is busy now (someone works on it). */
bool flight_busy_locked(struct flight_table *t, const void *key);

#endif
