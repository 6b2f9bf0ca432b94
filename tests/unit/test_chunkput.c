/* Unit tests for fs/chunkput.c with a real catalog, store, recent and store
 * queue in a temporary directory, and a fake cache and uploader handed in
 * as handles: a chunk put twice is written once (P1), also by writers at
 * once (one object, every await 0); a failed store fails the put and every
 * await on it, and the next put stores it (P4); objects written behind the
 * writer land before chunkput_reap returns; the cache sees backpressure
 * before and dirty bytes after each object, with its stored length (P2,
 * P3), and the uploader is kicked. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunkput.h"
#include "hash.h"
#include "recent.h"
#include "store.h"
#include "storeq.h"
#include "support.h"

#define KiB ((size_t)1 << 10)

/* ---- the fake cache and uploader ---- */

struct tc_cache {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gate_closed; /* dirty_wait blocks while closed */
	int in_wait;      /* callers blocked in dirty_wait */
	uint64_t waited;  /* bytes asked for by dirty_wait */
	uint64_t dirty;   /* bytes counted by dirty_add */
	int objects;      /* dirty_add calls */
	int kicks;
};

static struct tc_cache *tc_of(struct cache *c) { return (struct tc_cache *)c; }

static int tc_dirty_wait(struct cache *c, uint64_t len)
{
	struct tc_cache *f = tc_of(c);
	pthread_mutex_lock(&f->lock);
	f->waited += len;
	f->in_wait++;
	pthread_cond_broadcast(&f->cond);
	while (f->gate_closed)
		pthread_cond_wait(&f->cond, &f->lock);
	f->in_wait--;
	pthread_mutex_unlock(&f->lock);
	return 0;
}

static void tc_dirty_add(struct cache *c, uint64_t stored_len)
{
	struct tc_cache *f = tc_of(c);
	pthread_mutex_lock(&f->lock);
	f->dirty += stored_len;
	f->objects++;
	pthread_mutex_unlock(&f->lock);
}

static int tc_disk_wait(struct cache *c, uint64_t len)
{
	(void)c;
	(void)len;
	return 0;
}

static int tc_make_room(struct cache *c, uint64_t len)
{
	(void)c;
	(void)len;
	return -ENOSPC;
}

static void tc_kick(struct uploader *u)
{
	struct tc_cache *f = (struct tc_cache *)u; /* the same fake counts kicks */
	pthread_mutex_lock(&f->lock);
	f->kicks++;
	pthread_mutex_unlock(&f->lock);
}

static void tc_gate(struct tc_cache *f, bool closed)
{
	pthread_mutex_lock(&f->lock);
	f->gate_closed = closed;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

/* Waits until n callers are blocked in dirty_wait. */
static void tc_wait_blocked(struct tc_cache *f, int n)
{
	pthread_mutex_lock(&f->lock);
	while (f->in_wait < n)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

static int tc_objects(struct tc_cache *f)
{
	pthread_mutex_lock(&f->lock);
	int n = f->objects;
	pthread_mutex_unlock(&f->lock);
	return n;
}

/* ---- fixture ---- */

static struct {
	char dir[128];
	char cat_path[192];
	char staging[192];
	struct cat *cat;
	struct store *store;
	struct recent *recent;
	struct storeq *storeq;
	struct tc_cache cache;
	struct chunkput *cp;
} fx;

static void tc_setup(void)
{
	memset(&fx, 0, sizeof(fx));
	pthread_mutex_init(&fx.cache.lock, NULL);
	pthread_cond_init(&fx.cache.cond, NULL);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "chunkput");
	ts_cat_open_in(fx.dir, "catalog.db", fx.cat_path, sizeof(fx.cat_path), &fx.cat);
	char path[256];
	snprintf(path, sizeof(path), "%s/store", fx.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	OK(store_open(path, &fx.store));
	snprintf(fx.staging, sizeof(fx.staging), "%s/staging", fx.dir);
	OK(recent_new(0, &fx.recent));
	OK(storeq_start(2, 4, &fx.storeq));
	struct chunkput_config cfg = { .chunking = chunker_default_params, .staging_dir = fx.staging };
	struct chunkput_cache cache = { (struct cache *)&fx.cache, tc_dirty_wait, tc_dirty_add,
					tc_disk_wait, tc_make_room };
	struct chunkput_kick kick = { (struct uploader *)&fx.cache, tc_kick };
	struct chunkput_reader reader = { NULL, NULL, NULL }; /* writers only read back */
	OK(chunkput_new(&cfg, fx.cat, fx.store, fx.storeq, fx.recent, &cache, &kick, &reader,
			&fx.cp));
}

static void tc_teardown(void)
{
	chunkput_stop_queue(fx.cp);
	chunkput_free(fx.cp);
	recent_free(fx.recent);
	store_close(fx.store);
	ts_cat_close_checked(&fx.cat);
	ts_tmpdir_remove(fx.dir);
	pthread_cond_destroy(&fx.cache.cond);
	pthread_mutex_destroy(&fx.cache.lock);
}

TestSuite(chunkput, .init = tc_setup, .fini = tc_teardown, .timeout = 60);

/* A file whose pending extent [0, len) names the chunk: true if the catalog
 * says it must be stored. */
static bool tc_pending(const char *name, const struct cat_extent *ext)
{
	uint64_t ino = ts_mk(fx.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
	bool must = false;
	OK(cat_pending_add(fx.cat, ino, ext, &must));
	return must;
}

static struct cat_extent tc_extent(const uint8_t *data, size_t len)
{
	struct cat_extent ext = { .off = 0, .len = len, .chunk_off = 0, .chunk_len = len };
	hash_sha256(data, len, ext.hash);
	return ext;
}

/* The object of hash holds exactly data[0..len). */
static void tc_check_object(const uint8_t hash[HASH_LEN], const uint8_t *data, size_t len)
{
	uint8_t *buf = malloc(len);
	size_t got = 0;
	OK(store_get(fx.store, hash, buf, len, &got));
	cr_assert(got == len && memcmp(buf, data, len) == 0, "the object differs");
	free(buf);
}

/* ---- once ---- */

Test(chunkput, a_chunk_put_twice_is_stored_once)
{
	size_t len = 200 * KiB;
	uint8_t *data = ts_random(len, 1);
	struct cat_extent ext = tc_extent(data, len);
	struct chunkput_awaits aw;
	memset(&aw, 0, sizeof(aw));
	cr_assert(tc_pending("a", &ext));
	cr_assert(tc_pending("b", &ext), "stored before anything was put");
	uint64_t since = chunkput_lands(fx.cp); /* both were told "store it" by now */
	OK(chunkput_store(fx.cp, &aw, ext.hash, data, len, NULL, since));
	OK(chunkput_store(fx.cp, &aw, ext.hash, data, len, NULL, since));
	cr_assert_eq(aw.n, 0);
	cr_assert_eq(tc_objects(&fx.cache), 1, "%d objects written", tc_objects(&fx.cache));
	cr_assert(!tc_pending("c", &ext), "the catalog was not told it is stored");
	tc_check_object(ext.hash, data, len);
	free(data);
}

/* The test that was test_writer.c's: a put that landed after another
 * writer's "store it" answer stands for it; one that landed before does not
 * (the chunk may have been reclaimed and asked for again since). */
Test(chunkput, a_chunk_that_landed_after_the_store_it_answer_is_not_written_again)
{
	size_t len = 256 * KiB;
	uint8_t *data = ts_random(len, 51);
	struct cat_extent ext = tc_extent(data, len);
	struct chunkput_awaits aw[3];
	memset(aw, 0, sizeof(aw));
	cr_assert(tc_pending("a", &ext) && tc_pending("b", &ext)); /* b is a moment late */
	uint64_t since_b = chunkput_lands(fx.cp);
	OK(chunkput_store(fx.cp, &aw[0], ext.hash, data, len, NULL, chunkput_lands(fx.cp)));
	cr_assert_eq(tc_objects(&fx.cache), 1, "a did not store it");
	OK(chunkput_store(fx.cp, &aw[1], ext.hash, data, len, NULL, since_b));
	cr_assert_eq(tc_objects(&fx.cache), 1, "b wrote the object a had just stored");
	cr_assert_eq(aw[1].n, 0);
	OK(chunkput_store(fx.cp, &aw[2], ext.hash, data, len, NULL, chunkput_lands(fx.cp)));
	cr_assert_eq(tc_objects(&fx.cache), 2, "c trusted a landing older than its answer");
	tc_check_object(ext.hash, data, len);
	free(data);
}

struct tc_putter {
	const uint8_t *data;
	size_t len;
	const uint8_t *hash;
	uint64_t since;
	int rc_store, rc_reap;
	size_t awaited;
};

static void *tc_putter_run(void *arg)
{
	struct tc_putter *p = arg;
	struct chunkput_awaits aw;
	memset(&aw, 0, sizeof(aw));
	p->rc_store = chunkput_store(fx.cp, &aw, p->hash, p->data, p->len, NULL, p->since);
	p->awaited = aw.n;
	p->rc_reap = chunkput_reap(fx.cp, &aw, true);
	cr_assert_eq(aw.n, 0);
	return NULL;
}

/* N writers of one chunk at once, the leader held in the cache's
 * backpressure until all the others joined its flight. */
static void tc_puts_at_once(int n, struct tc_putter *p, pthread_t *t)
{
	tc_gate(&fx.cache, true);
	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, tc_putter_run, &p[i]), 0);
	tc_wait_blocked(&fx.cache, 1); /* the leader is in */
	for (int tries = 0; chunkput_awaiting(fx.cp, p[0].hash) < n - 1; tries++) {
		cr_assert_lt(tries, 10000, "only %d of %d writers joined",
			     chunkput_awaiting(fx.cp, p[0].hash), n - 1);
		usleep(1000);
	}
	tc_gate(&fx.cache, false);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

Test(chunkput, concurrent_puts_of_one_hash_write_one_object)
{
	enum { N = 6 };
	size_t len = 300 * KiB;
	uint8_t *data = ts_random(len, 2);
	struct cat_extent ext = tc_extent(data, len);
	struct tc_putter p[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		cr_assert(tc_pending(name, &ext));
	}
	uint64_t since = chunkput_lands(fx.cp);
	for (int i = 0; i < N; i++)
		p[i] = (struct tc_putter){ data, len, ext.hash, since, -1, -1, 0 };
	tc_puts_at_once(N, p, t);
	int awaited = 0;
	for (int i = 0; i < N; i++) {
		cr_assert_eq(p[i].rc_store, 0, "writer %d", i);
		cr_assert_eq(p[i].rc_reap, 0, "writer %d", i);
		awaited += (int)p[i].awaited;
	}
	cr_assert_eq(awaited, N - 1, "%d writers awaited the leader", awaited);
	cr_assert_eq(tc_objects(&fx.cache), 1, "%d objects written", tc_objects(&fx.cache));
	tc_check_object(ext.hash, data, len);
	free(data);
}

/* The store's tmp/ is made a file: every object write fails. */
static void tc_break_store(bool broken)
{
	char tmp[256], away[256];
	snprintf(tmp, sizeof(tmp), "%s/store/tmp", fx.dir);
	snprintf(away, sizeof(away), "%s/store/tmp.away", fx.dir);
	if (broken) {
		cr_assert_eq(rename(tmp, away), 0);
		FILE *f = fopen(tmp, "w");
		cr_assert_not_null(f);
		fclose(f);
	} else {
		cr_assert_eq(unlink(tmp), 0);
		cr_assert_eq(rename(away, tmp), 0);
	}
}

Test(chunkput, a_store_failure_fails_the_put_and_every_await_and_the_next_put_retries)
{
	enum { N = 4 };
	size_t len = 100 * KiB;
	uint8_t *data = ts_random(len, 3);
	struct cat_extent ext = tc_extent(data, len);
	cr_assert(tc_pending("a", &ext));
	tc_break_store(true);
	struct tc_putter p[N];
	pthread_t t[N];
	uint64_t since = chunkput_lands(fx.cp);
	for (int i = 0; i < N; i++)
		p[i] = (struct tc_putter){ data, len, ext.hash, since, -1, -1, 0 };
	tc_puts_at_once(N, p, t);
	for (int i = 0; i < N; i++) /* the leader's put, or its followers' await */
		cr_assert_eq(p[i].awaited ? p[i].rc_reap : p[i].rc_store, -ENOTDIR,
			     "writer %d: %d, %d", i, p[i].rc_store, p[i].rc_reap);
	cr_assert_eq(tc_objects(&fx.cache), 0);
	cr_assert(tc_pending("b", &ext), "a failed chunk was recorded as stored");
	tc_break_store(false);
	struct chunkput_awaits aw;
	memset(&aw, 0, sizeof(aw));
	OK(chunkput_store(fx.cp, &aw, ext.hash, data, len, NULL, since));
	cr_assert_eq(tc_objects(&fx.cache), 1, "the put after the failure did not store it");
	tc_check_object(ext.hash, data, len);
	free(data);
}

/* A chunk pinned in recent's copy goes behind the writer (storeq): the put
 * returns at once with an await, which ends when the object is written. */
static int tc_put_behind(const uint8_t *data, size_t len, struct cat_extent *ext,
			 struct chunkput_awaits *aw)
{
	struct recent_ticket ticket;
	cr_assert(!recent_lookup(fx.recent, data, len, ext->hash, &ticket));
	recent_publish(fx.recent, &ticket, data, len, ext->hash);
	struct recent_pred copy;
	cr_assert(recent_pin(fx.recent, &ticket, &copy));
	int rc = chunkput_store(fx.cp, aw, ext->hash, copy.copy, len, &copy, chunkput_lands(fx.cp));
	recent_unpin(fx.recent, &copy);
	return rc;
}

Test(chunkput, a_put_behind_the_writer_is_awaited_and_its_failure_returned)
{
	size_t len = 128 * KiB;
	uint8_t *data = ts_random(len, 4), *bad = ts_random(len, 5);
	struct cat_extent ext = tc_extent(data, len), ext_bad = tc_extent(bad, len);
	struct chunkput_awaits aw;
	memset(&aw, 0, sizeof(aw));
	cr_assert(tc_pending("a", &ext));
	OK(tc_put_behind(data, len, &ext, &aw));
	cr_assert_eq(aw.n, 1, "not put behind the writer");
	OK(chunkput_reap(fx.cp, &aw, true));
	cr_assert_eq(aw.n, 0);
	tc_check_object(ext.hash, data, len);
	cr_assert(!tc_pending("b", &ext));
	struct storeq_stats st;
	storeq_stats(fx.storeq, &st);
	cr_assert_eq(st.behind, 1);

	cr_assert(tc_pending("c", &ext_bad));
	tc_break_store(true);
	OK(tc_put_behind(bad, len, &ext_bad, &aw)); /* the failure comes later */
	cr_assert_eq(aw.n, 1);
	cr_assert_eq(chunkput_reap(fx.cp, &aw, true), -ENOTDIR);
	tc_break_store(false);
	free(bad);
	free(data);
}

/* The stored length the catalog has for each chunk, summed. */
static int tc_sum_stored(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			 uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	(void)hash;
	(void)plain_len;
	(void)codec;
	(void)refcount;
	cr_assert_geq(stored_len, 0, "a chunk is not recorded as stored");
	*(uint64_t *)arg += (uint64_t)stored_len;
	return 0;
}

/* P2, P3: backpressure for the chunk's length before, its stored length
 * counted dirty after, the uploader kicked. */
Test(chunkput, the_cache_sees_each_object_before_and_after_and_the_uploader_is_kicked)
{
	size_t len = 180 * KiB;
	uint8_t *zeros = calloc(1, len), *data = ts_random(len, 6);
	struct cat_extent ez = tc_extent(zeros, len), ed = tc_extent(data, len);
	struct chunkput_awaits aw;
	memset(&aw, 0, sizeof(aw));
	cr_assert(tc_pending("z", &ez) && tc_pending("d", &ed));
	OK(chunkput_store(fx.cp, &aw, ez.hash, zeros, len, NULL, chunkput_lands(fx.cp)));
	OK(chunkput_store(fx.cp, &aw, ed.hash, data, len, NULL, chunkput_lands(fx.cp)));
	cr_assert_eq(fx.cache.waited, 2 * len);
	uint64_t stored = 0;
	OK(cat_chunks(fx.cat, tc_sum_stored, &stored));
	cr_assert_lt(stored, 2 * len, "nothing was compressed: the test proves nothing");
	cr_assert_eq(fx.cache.dirty, stored, "dirty %llu, stored %llu",
		     (unsigned long long)fx.cache.dirty, (unsigned long long)stored);
	cr_assert_eq(fx.cache.kicks, 2);
	free(data);
	free(zeros);
}
