/* cache — the local disk cache of chunk objects; see cache.h for the
 * invariants C1–C10.
 *
 * Byte counts (cached, dirty) are kept in memory, moved by the writers, the
 * fetches, the uploader and the evictor, and re-read from the catalog by the
 * evictor every CACHE_RESYNC_S so that a drift (objects reclaimed, a crash)
 * cannot accumulate.
 *
 * Space (C6): the cache's disk also holds the catalog, staging files and
 * objects being written, so a reserve of it (cache_reserve) is kept out of
 * the bound and free. A writer short of room wakes the evictor, which then
 * also evicts clean chunks of open files, and waits while that or the
 * uploads make progress (cache_dirty_wait).
 *
 * Threads: one evictor (wakes every second, or when a put crosses the high
 * watermark, or a writer needs room) and CACHE_FETCHERS prefetchers serving
 * a small queue. One eviction runs at a time (evict_lock). */
#define _GNU_SOURCE
#include "cache.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "bkobj.h"
#include "catalog.h"
#include "codec.h"
#include "flight.h"
#include "log.h"
#include "store.h"
#include "storesmall.h"
#include "upload.h"

#define CACHE_FETCHERS 4
#define CACHE_PREFETCH_QUEUE 32
#define CACHE_PREFETCH_RECENT 64 /* chunks asked for lately (cache_prefetch) */
#define CACHE_EVICT_BATCH 256
#define CACHE_EVICT_STEP 16 /* evictions between two looks at the counts; one pin round trip (C10) */
#define CACHE_MAX_OPEN 4096
#define CACHE_RESYNC_S 10
#define CACHE_TOUCH_BATCH 256
#define CACHE_HIGH_PCT 90 /* evict above this share of the bound … */
#define CACHE_LOW_PCT 75  /* … down to this one */
#define CACHE_MAX_JOBS 64 /* reads waiting for BACKING at once */
#define CACHE_INFLIGHT (CACHE_MAX_JOBS + CACHE_FETCHERS) /* fetch flights at once */
#define CACHE_JOB_IDLE 16  /* C12: job threads kept idle at most … */
#define CACHE_JOB_IDLE_S 5 /* … and for this long */
#define CACHE_RESERVE_MIN (16ull << 20) /* C6: disk kept free for the catalog, staging, tmp/ */
#define CACHE_RESERVE_MAX (1ull << 30)
#define CACHE_RESERVE_SHARE 16          /* … or 1/16 of the disk, between the two */

struct cache {
	struct cache_config cfg;
	struct cat *cat;
	struct store *store;
	struct backing *backing;
	struct cache_hooks hooks;
	uint64_t bound, dirty_bound;
	uint64_t reserve; /* C6: disk bytes kept free for all but chunk objects */
	size_t object_cap; /* largest object image: header + codec_bound(max chunk) */

	pthread_mutex_t lock;
	pthread_cond_t wake;       /* evictor and fetchers */
	pthread_cond_t dirty_room; /* writers waiting for dirty bytes to fall */
	pthread_cond_t job_done;   /* cache_stop: a bounded fetch or a job thread ended */
	pthread_cond_t job_work;   /* C12: a job queued for an idle job thread */
	int jobs;                  /* bounded fetches queued or running */
	struct cache_job *job_head, *job_tail; /* C12: queued, no thread has taken them yet */
	int job_queued, job_idle, job_threads; /* … their count; job threads idle, alive */
	bool stopping;
	uint64_t cached_bytes, dirty_bytes;
	uint64_t want_room; /* bytes the largest waiting writer needs (0: none waits) */
	uint64_t must_free; /* cache_make_room: bytes to evict whatever the counts say */
	uint64_t freed;     /* bytes evicted or uploaded so far: waiting writers see progress */
	pthread_mutex_t evict_lock; /* one eviction at a time */
	struct cache_stats st;

	uint8_t queue[CACHE_PREFETCH_QUEUE][HASH_LEN]; /* prefetch ring */
	int q_head, q_len;
	uint8_t recent[CACHE_PREFETCH_RECENT][HASH_LEN]; /* asked for lately */
	int recent_next;
	/* chunks being fetched from BACKING: one fetch per chunk at a time, a
	 * flight on its hash (fs/lib/flight.h), under lock */
	struct flight_table *fetches;

	uint8_t touched[CACHE_TOUCH_BATCH][HASH_LEN]; /* used since the last flush */
	int n_touched;

	pthread_t evictor, fetcher[CACHE_FETCHERS];
	int n_fetchers;
	bool evictor_started;
};

static int64_t cache_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cache_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The daemon was told to stop (cache_hooks.stopping). */
static bool cache_daemon_stopping(const struct cache *c)
{
	return c->hooks.stopping && c->hooks.stopping(c->hooks.stopping_arg);
}

/* Inodes with a handle open (cache_hooks.opened); none without the hook. */
static size_t cache_opened(const struct cache *c, uint64_t *inos, size_t max)
{
	return c->hooks.opened ? c->hooks.opened(c->hooks.opened_arg, inos, max) : 0;
}

/* ---- fetching from BACKING ---- */

/* Remembers that a chunk was used, for least-recently-used eviction. */
static void cache_touch(struct cache *c, const uint8_t hash[HASH_LEN])
{
	pthread_mutex_lock(&c->lock);
	assert(c->n_touched >= 0 && c->n_touched <= CACHE_TOUCH_BATCH);
	if (c->n_touched < CACHE_TOUCH_BATCH)
		memcpy(c->touched[c->n_touched++], hash, HASH_LEN);
	pthread_mutex_unlock(&c->lock);
}

static uint64_t cache_disk_free(const struct cache *c);

/* cat_chunk_evict's and cat_chunk_drop_unclaimed's removal, under the catalog lock (C9). */
static int cache_remove_object(void *store, const uint8_t hash[CAT_HASH_LEN])
{
	return store_remove(store, hash);
}

/* Keeps a checked copy of a fetched object when there is room for it (C5).
 * The room is reserved before the object is written, so concurrent fetches
 * cannot together push the cache past its high watermark; without room the
 * bytes are served all the same and the evictor is woken. A copy is never
 * worth the disk's reserve (C6): on a disk filled behind the daemon, copies
 * kept under the watermark filled it and the catalog failed (SQLITE_FULL).
 * A copy the catalog cannot record (say its disk is full) is removed again,
 * under the catalog lock and only while no row names it (C9): a writer may
 * have stored its own object under that name meanwhile. -ENOENT from the
 * catalog means the chunk lost its row, or a writer is storing it anew: the
 * file is then left to that writer, or to gc. */
static void cache_keep_copy(struct cache *c, const uint8_t hash[HASH_LEN], const uint8_t *obj,
			    size_t obj_len)
{
	uint64_t payload = obj_len - store_object_header_len(obj); /* as the catalog counts */
	uint64_t disk_free = cache_disk_free(c);
	pthread_mutex_lock(&c->lock);
	c->st.fetched_bytes += obj_len;
	bool room = c->cached_bytes + payload <= c->bound / 100 * CACHE_HIGH_PCT &&
		    (disk_free == UINT64_MAX || disk_free >= obj_len + c->reserve / 2);
	if (room)
		c->cached_bytes += payload;
	else
		pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->lock);
	if (!room)
		return;
	int rc = store_put_fetched(c->store, hash, obj, obj_len);
	if (rc == 0) {
		rc = cat_chunk_fetched(c->cat, hash);
		if (rc != 0 && rc != -ENOENT)
			(void)cat_chunk_drop_unclaimed(c->cat, hash, cache_remove_object, c->store);
	}
	if (rc != 0) { /* the bytes are good; only keeping a copy failed */
		pthread_mutex_lock(&c->lock);
		c->cached_bytes = c->cached_bytes > payload ? c->cached_bytes - payload : 0;
		pthread_mutex_unlock(&c->lock);
	}
}

/* The image size to expect of a chunk of plain length cap (cap is the
 * chunk's length when a reader asks, chunk_max for a prefetch). */
static size_t cache_image_need(const struct cache *c, size_t cap)
{
	return cap < c->cfg.chunk_max ? STORE_HEADER_LEN + codec_bound(cap) : c->object_cap;
}

/* One attempt: BACKING → check → cache; chunk gets the checked chunk, its
 * plain bytes where they lie in the fetched image when raw (store.h S9).
 * bkobj.h B1's answers: -ENOENT: BACKING does not have it; -EBADMSG: it has
 * a damaged copy (logged here, once per attempt); -ENOMEM; other errors:
 * BACKING could not be read (-EIO included). */
static int cache_fetch_once(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
			    struct store_chunk *chunk)
{
	/* where on BACKING: a pack member (catalog_pack.h K2), else loose */
	struct cat_chunk_where w;
	struct bkobj_where at;
	const struct bkobj_where *where = NULL;
	if (cat_chunk_where(c->cat, hash, &w) == 0 && w.packed) {
		memcpy(at.pack, w.pack, HASH_LEN);
		at.off = w.pack_off;
		at.len = (uint32_t)w.pack_len;
		where = &at;
	}
	int rc = store_fetch_image(chunk, cache_image_need(c, cap), c->object_cap);
	if (rc != 0)
		return rc;
	struct bkobj_read r = { .fetch = chunk, .obj_cap = c->object_cap, .plain_cap = cap };
	const char *why = NULL;
	rc = bkobj_get(c->backing, hash, where, &r, &why); /* checked before any use (B2) */
	if (rc == -EBADMSG) { /* bkobj.h B1, B4: named with its path */
		char hex[HASH_HEX_LEN + 1], rel[160];
		hash_to_hex(hash, hex);
		bkobj_where_name(hash, where, rel, sizeof(rel));
		log_error("BACKING %s: chunk %s is corrupt: %s (%s)", backing_spec(c->backing), hex,
			  why, rel);
	}
	if (rc != 0) {
		store_chunk_free(chunk);
		return rc;
	}
	cache_keep_copy(c, hash, chunk->image, r.obj_len);
	store_fetch_done(chunk);
	return 0;
}

/* A chunk another node of a shared catalog wrote and has not uploaded yet
 * (catalog_shared_data.c S6): not on BACKING *yet*. */
static bool cache_not_uploaded_yet(struct cache *c, const uint8_t hash[HASH_LEN])
{
	struct cat_chunk_where w;
	return cat_is_shared(c->cat) && cat_chunk_where(c->cat, hash, &w) == -EAGAIN;
}

/* Fetches with retries while BACKING cannot be read, up to the timeout (C4),
 * and while the chunk's node has not uploaded it. A verdict (bkobj.h B1:
 * damaged; B4: a symlink, FIFO, ... at its name), an absent chunk and
 * -ENOMEM end it at once; any other error is
 * BACKING's (a server that does not answer, a lost connection, a read error:
 * -EIO too) and is tried again. */
static int cache_fetch_retrying(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
				struct store_chunk *chunk)
{
	double deadline = cache_mono_s() + c->cfg.backing_timeout_ms / 1000.0;
	unsigned delay_ms = 50;
	int rc;
	bool said = false;
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	for (;;) {
		rc = cache_fetch_once(c, hash, cap, chunk);
		if (rc == -ENOENT && cache_not_uploaded_yet(c, hash))
			rc = -EAGAIN; /* waited for like a BACKING that does not answer */
		if (rc == 0 || rc == -ENOENT || rc == -EBADMSG || rc == -ENOMEM)
			break;
		if (cache_mono_s() >= deadline)
			break;
		if (!said) {
			log_warn("BACKING %s: reading chunk %s failed (%s); retrying for up to %u s",
				 backing_spec(c->backing), hex, strerror(-rc),
				 c->cfg.backing_timeout_ms / 1000);
			said = true;
		}
		usleep(delay_ms * 1000);
		delay_ms = delay_ms < 2000 ? delay_ms * 2 : 2000;
	}
	if (rc == -ENOENT)
		log_error("chunk %s is in neither the cache nor BACKING %s", hex,
			  backing_spec(c->backing));
	else if (rc != 0 && rc != -EBADMSG) /* a damaged one is logged by the fetch */
		log_error("BACKING %s: chunk %s unreadable: %s", backing_spec(c->backing), hex,
			  strerror(-rc));
	else if (rc == 0 && said)
		log_info("BACKING %s: chunk %s read after a retry", backing_spec(c->backing), hex);
	if (rc != 0) {
		pthread_mutex_lock(&c->lock);
		c->st.fetch_errors++;
		pthread_mutex_unlock(&c->lock);
	}
	return rc == 0 ? 0 : rc == -ENOMEM ? rc : -EIO;
}

/* Fetches into a buffer of its own; out (NULL: only a copy in the cache is
 * wanted) gets the chunk — a raw one's plain bytes inside the image BACKING
 * sent, so a fetched chunk is copied nowhere on its way to the reader. */
static int cache_fetch_new(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
			   struct store_chunk *out)
{
	struct store_chunk chunk;
	memset(&chunk, 0, sizeof(chunk));
	int rc = cache_fetch_retrying(c, hash, cap, &chunk);
	if (rc == 0 && out)
		*out = chunk;
	else
		store_chunk_free(&chunk);
	return rc;
}

/* One fetch per chunk at a time, whoever asks (readers, prefetchers): the
 * flight on its hash. A caller that finds the chunk in flight follows that
 * fetch, waits for it to land, then loads the copy it left in the cache — a
 * chunk is downloaded once, not once per asker. Without a copy (the fetch
 * failed, or kept none: C5) it joins again, and fetches if nobody else does.
 * (The fetch it waits for gives up after the BACKING timeout.) A lead without
 * a flight slot fetches all the same, sharing nothing (F4). out: the chunk,
 * as store_load hands it out; NULL: the chunk is only wanted in the cache. */
static int cache_fetch(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
		       struct store_chunk *out)
{
	for (;;) {
		struct flight f;
		/* since: none, a landing never stands for a copy (F3) */
		if (flight_join(c->fetches, hash, UINT64_MAX, &f) == FLIGHT_LEAD) {
			int rc = cache_fetch_new(c, hash, cap, out);
			flight_land(c->fetches, &f, rc); /* its followers read the copy */
			return rc;
		}
		size_t one = 1;
		flight_reap(c->fetches, &f, &one, true); /* a failure: looked into below */
		if (out ? store_load(c->store, hash, cap, out) == 0 : store_has(c->store, hash))
			return 0;
	}
}

/* A fetch run on a thread of its own, so that a reader can give up on a
 * BACKING whose syscalls hang (a hard NFS mount) after the timeout (C4); the
 * thread finishes whenever BACKING answers, and frees the job if nobody
 * waits. C12: the threads are kept, idle, for the next jobs (up to
 * CACHE_JOB_IDLE of them, each for CACHE_JOB_IDLE_S), and a job's waiter is
 * woken by the job's own condition variable: a restore's thousands of
 * fetches cost neither a thread each nor a wake-up of every other waiter. */
struct cache_job {
	struct cache_job *next;   /* the queue of jobs no thread has taken yet */
	uint8_t hash[HASH_LEN];
	struct store_chunk chunk; /* the fetched chunk, handed to the waiter */
	size_t cap;
	int rc;
	bool done, abandoned;
	pthread_cond_t done_cond; /* its waiter's alone (C12) */
};

static void cache_job_free(struct cache_job *j)
{
	store_chunk_free(&j->chunk);
	pthread_cond_destroy(&j->done_cond);
	free(j);
}

/* C12: takes queued jobs one by one; idle for CACHE_JOB_IDLE_S (or one
 * thread too many idle, or the cache stopping with nothing queued), ends. */
static void *cache_job_main(void *p)
{
	struct cache *c = p;
	pthread_setname_np(pthread_self(), "ckptfs-fetch"); /* for top -H and perf */
	pthread_mutex_lock(&c->lock);
	for (;;) {
		if (!c->job_head) {
			if (c->stopping || c->job_idle >= CACHE_JOB_IDLE)
				break;
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += CACHE_JOB_IDLE_S;
			c->job_idle++;
			int w = pthread_cond_timedwait(&c->job_work, &c->lock, &ts);
			c->job_idle--;
			if (w == ETIMEDOUT && !c->job_head)
				break;
			continue;
		}
		struct cache_job *j = c->job_head;
		c->job_head = j->next;
		if (!c->job_head)
			c->job_tail = NULL;
		c->job_queued--;
		pthread_mutex_unlock(&c->lock);
		int rc = cache_fetch(c, j->hash, j->cap, &j->chunk);
		pthread_mutex_lock(&c->lock);
		assert(!j->done && c->jobs > 0);
		j->rc = rc;
		j->done = true;
		c->jobs--;
		pthread_cond_signal(&j->done_cond);
		if (c->stopping)
			pthread_cond_broadcast(&c->job_done); /* cache_stop waits for the jobs */
		if (j->abandoned) { /* its waiter is gone: nobody else holds it */
			pthread_mutex_unlock(&c->lock);
			cache_job_free(j);
			pthread_mutex_lock(&c->lock);
		}
	}
	assert(c->job_threads > 0);
	c->job_threads--;
	pthread_cond_broadcast(&c->job_done);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Fetches the chunk into out, as store_load would hand it out. */
static int cache_fetch_bounded(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
			       struct store_chunk *out)
{
	struct cache_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->cap = cap;
	memcpy(j->hash, hash, HASH_LEN);
	pthread_cond_init(&j->done_cond, NULL);
	pthread_mutex_lock(&c->lock);
	if (c->jobs >= CACHE_MAX_JOBS) { /* BACKING hangs and readers pile up */
		pthread_mutex_unlock(&c->lock);
		cache_job_free(j);
		log_error("BACKING %s: %d reads already wait for it; failing this one",
			  backing_spec(c->backing), CACHE_MAX_JOBS);
		return -EIO;
	}
	c->jobs++;
	if (c->job_tail)
		c->job_tail->next = j;
	else
		c->job_head = j;
	c->job_tail = j;
	c->job_queued++;
	/* C12: an idle thread takes it, or a new one: every queued job has a
	 * thread of its own to come (none is left behind a hung fetch) */
	bool start = c->job_queued > c->job_idle;
	if (!start) {
		pthread_cond_signal(&c->job_work);
	} else {
		c->job_threads++;
		c->st.job_threads_started++;
	}
	pthread_mutex_unlock(&c->lock);
	if (start) {
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int prc = pthread_create(&t, &attr, cache_job_main, c);
		pthread_attr_destroy(&attr);
		if (prc != 0) {
			pthread_mutex_lock(&c->lock);
			assert(c->job_threads > 0);
			c->job_threads--;
			/* still queued (no thread took it meanwhile): take it
			 * back and fetch here, as when no thread can be had */
			struct cache_job **pp = &c->job_head, *prev = NULL;
			while (*pp && *pp != j) {
				prev = *pp;
				pp = &(*pp)->next;
			}
			bool mine = *pp == j;
			if (mine) {
				*pp = j->next;
				if (c->job_tail == j)
					c->job_tail = prev;
				c->job_queued--;
				assert(c->jobs > 0);
				c->jobs--;
			}
			pthread_cond_broadcast(&c->job_done); /* cache_stop counts these too */
			pthread_mutex_unlock(&c->lock);
			if (mine) {
				cache_job_free(j);
				return cache_fetch(c, hash, cap, out);
			}
		}
	}
	/* the job's own retries stop at the timeout; this waits a little longer */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += c->cfg.backing_timeout_ms / 1000 + 2;
	pthread_mutex_lock(&c->lock);
	while (!j->done && pthread_cond_timedwait(&j->done_cond, &c->lock, &ts) != ETIMEDOUT)
		;
	int rc;
	if (j->done) {
		rc = j->rc;
		pthread_mutex_unlock(&c->lock);
		if (rc == 0) { /* the job's chunk becomes the caller's */
			*out = j->chunk;
			memset(&j->chunk, 0, sizeof(j->chunk));
		}
		cache_job_free(j);
	} else {
		assert(!j->abandoned); /* the job frees itself: only its one waiter leaves it */
		j->abandoned = true;
		pthread_mutex_unlock(&c->lock);
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(hash, hex);
		log_error("BACKING %s: chunk %s: no answer within %u s; the read fails with EIO",
			  backing_spec(c->backing), hex, c->cfg.backing_timeout_ms / 1000);
		rc = -EIO;
	}
	return rc;
}

/* A cache copy that failed its check: the catalog stops calling it cached,
 * then the file goes, as an eviction would (C5: no object file the catalog
 * does not call cached, and no cached row without its file), so a fetch from
 * BACKING can keep a good copy. A copy not yet on BACKING stays: its only
 * trace, for the uploader to report as damaged. */
static void cache_drop_damaged(struct cache *c, const uint8_t hash[HASH_LEN])
{
	struct cat_chunk_where w;
	if (cat_chunk_where(c->cat, hash, &w) != 0 || !w.uploaded || !w.cached)
		return;
	if (cat_chunk_evict(c->cat, hash, cache_remove_object, c->store) != 0) /* C9 */
		return;
	pthread_mutex_lock(&c->lock);
	c->cached_bytes = c->cached_bytes > w.stored_len ? c->cached_bytes - w.stored_len : 0;
	pthread_mutex_unlock(&c->lock);
}

int cache_load(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap, struct store_chunk *out)
{
	int rc = store_load(c->store, hash, cap, out);
	bool hit = rc == 0;
	if (rc == -ENOENT || rc == -EIO) {
		/* not cached, or the cached copy is damaged: BACKING has the truth */
		if (rc == -EIO)
			cache_drop_damaged(c, hash);
		rc = cache_fetch_bounded(c, hash, cap, out);
	}
	pthread_mutex_lock(&c->lock);
	if (hit)
		c->st.hits++;
	else
		c->st.misses++;
	pthread_mutex_unlock(&c->lock);
	if (rc == 0)
		cache_touch(c, hash);
	return rc;
}

/* ---- prefetch ---- */

static bool cache_known_locked(struct cache *c, const uint8_t hash[HASH_LEN])
{
	for (int i = 0; i < c->q_len; i++)
		if (memcmp(c->queue[(c->q_head + i) % CACHE_PREFETCH_QUEUE], hash, HASH_LEN) == 0)
			return true;
	return flight_busy_locked(c->fetches, hash);
}

void cache_prefetch(struct cache *c, const uint8_t hash[HASH_LEN])
{
	/* every read of a chunk's MiB asks for the same few chunks ahead: look
	 * in the store once per chunk, not once per request */
	pthread_mutex_lock(&c->lock);
	bool seen = false;
	for (int i = 0; i < CACHE_PREFETCH_RECENT && !seen; i++)
		seen = memcmp(c->recent[i], hash, HASH_LEN) == 0;
	if (!seen) {
		memcpy(c->recent[c->recent_next], hash, HASH_LEN);
		c->recent_next = (c->recent_next + 1) % CACHE_PREFETCH_RECENT;
	}
	/* whether the store has it is the fetcher's question: asked here, the
	 * reader's reply would wait for the object's directory, inode and
	 * header to come off the disk */
	if (seen) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (!c->stopping && c->q_len < CACHE_PREFETCH_QUEUE && !cache_known_locked(c, hash)) {
		assert(c->q_len >= 0 && c->q_head >= 0 && c->q_head < CACHE_PREFETCH_QUEUE);
		memcpy(c->queue[(c->q_head + c->q_len) % CACHE_PREFETCH_QUEUE], hash, HASH_LEN);
		c->q_len++;
		pthread_cond_broadcast(&c->wake);
	}
	pthread_mutex_unlock(&c->lock);
}

static void *cache_fetcher_main(void *p)
{
	struct cache *c = p;
	pthread_setname_np(pthread_self(), "ckptfs-cprefetch"); /* for top -H and perf */
	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		if (c->q_len == 0) {
			pthread_cond_wait(&c->wake, &c->lock);
			continue;
		}
		assert(c->q_len > 0 && c->q_len <= CACHE_PREFETCH_QUEUE);
		uint8_t hash[HASH_LEN];
		memcpy(hash, c->queue[c->q_head], HASH_LEN);
		c->q_head = (c->q_head + 1) % CACHE_PREFETCH_QUEUE;
		c->q_len--;
		bool inflight = flight_busy_locked(c->fetches, hash);
		/* C11: no room to keep a copy, the fetch would be its reader's again */
		bool room = c->cached_bytes + c->object_cap <= c->bound / 100 * CACHE_HIGH_PCT;
		pthread_mutex_unlock(&c->lock);
		/* present: its entry and inode are now in memory for the load to
		 * come (a damaged copy is the load's to find, and replace) */
		if (room && !inflight && !store_has(c->store, hash))
			cache_fetch(c, hash, c->cfg.chunk_max, NULL);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* ---- dirty bytes and backpressure ---- */

/* Free bytes on the cache's disk (UINT64_MAX if it cannot be asked). */
static uint64_t cache_disk_free(const struct cache *c)
{
	struct statvfs sv;
	if (statvfs(c->cfg.dir, &sv) != 0)
		return UINT64_MAX;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Whether len bytes may be written now (C3, C6): for a chunk object, dirty
 * bytes under their bound (the first object always passes); for any write,
 * the disk's reserve left half free once it is written. Cached bytes over
 * their bound do not hold a writer up (pinned chunks may keep them there):
 * the evictor brings them down where it can. */
static bool cache_room_locked(const struct cache *c, uint64_t len, bool chunk, uint64_t disk_free,
			      bool *evicting_helps)
{
	bool dirty_ok = !chunk || c->dirty_bytes == 0 || c->dirty_bytes + len <= c->dirty_bound;
	bool disk_ok = disk_free == UINT64_MAX || disk_free >= len + c->reserve / 2;
	*evicting_helps = !disk_ok;
	return dirty_ok && disk_ok;
}

static int cache_room_wait(struct cache *c, uint64_t len, bool chunk)
{
	if (!c)
		return 0; /* the daemon is exiting: a writer flushes at teardown */
	uint64_t disk_free = cache_disk_free(c);
	pthread_mutex_lock(&c->lock);
	bool waited = false, evicting_helps;
	double said_at = 0, woke_at = 0, progress_at = cache_mono_s();
	double stall_s = c->cfg.backing_timeout_ms / 1000.0;
	uint64_t freed = c->freed;
	int rc = 0;
	/* the daemon stopping ends the wait: libfuse joins the FUSE threads
	 * before anything else stops, and only BACKING could end it */
	while (!c->stopping && !cache_daemon_stopping(c) &&
	       !cache_room_locked(c, len, chunk, disk_free, &evicting_helps)) {
		if (!waited) {
			c->st.dirty_waits++;
			waited = true;
		}
		if (c->freed != freed) { /* uploads or evictions made room: wait on */
			freed = c->freed;
			progress_at = cache_mono_s();
		} else if (cache_mono_s() - progress_at > stall_s) {
			log_error("cache %s: no room for %s of %" PRIu64 " KiB: %" PRIu64
				  " MiB cached, %" PRIu64 " MiB of it not yet on BACKING (bounds %"
				  PRIu64 " / %" PRIu64 " MiB), %" PRIu64 " MiB free on its disk"
				  " (reserve %" PRIu64 " MiB), and nothing uploaded or evicted for"
				  " %.0f s: the write fails with ENOSPC", c->cfg.dir,
				  chunk ? "a chunk" : "a staging write", len >> 10,
				  c->cached_bytes >> 20, c->dirty_bytes >> 20, c->bound >> 20,
				  c->dirty_bound >> 20, disk_free == UINT64_MAX ? 0 : disk_free >> 20,
				  c->reserve >> 20, stall_s);
			rc = -ENOSPC;
			break;
		}
		if (cache_mono_s() - said_at > 30) {
			log_info("cache %s: %" PRIu64 " MiB not yet on BACKING (bound %" PRIu64
				 " MiB), %" PRIu64 " MiB cached (bound %" PRIu64 " MiB): writers wait"
				 " for uploads and evictions", c->cfg.dir, c->dirty_bytes >> 20,
				 c->dirty_bound >> 20, c->cached_bytes >> 20, c->bound >> 20);
			said_at = cache_mono_s();
		}
		if (evicting_helps && cache_mono_s() - woke_at >= 1) { /* the evictor's turn */
			if (len > c->want_room)
				c->want_room = len;
			pthread_cond_broadcast(&c->wake);
			woke_at = cache_mono_s();
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->dirty_room, &c->lock, &ts);
		pthread_mutex_unlock(&c->lock);
		disk_free = cache_disk_free(c);
		pthread_mutex_lock(&c->lock);
	}
	if (waited)
		c->want_room = 0; /* the next waiter, if any, says again */
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_dirty_wait(struct cache *c, uint64_t len)
{
	return cache_room_wait(c, len, true);
}

int cache_disk_wait(struct cache *c, uint64_t len)
{
	return cache_room_wait(c, len, false);
}

void cache_dirty_add(struct cache *c, uint64_t stored_len)
{
	if (!c)
		return; /* at teardown: the catalog counts it, the next mount reads that */
	pthread_mutex_lock(&c->lock);
	c->st.stored_chunks++;
	c->dirty_bytes += stored_len;
	c->cached_bytes += stored_len;
	if (c->cached_bytes > c->bound / 100 * CACHE_HIGH_PCT)
		pthread_cond_broadcast(&c->wake);
	pthread_mutex_unlock(&c->lock);
}

int cache_reput(struct cache *c, const uint8_t hash[HASH_LEN])
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	struct cat_chunk_where w;
	int rc = cat_chunk_where(c->cat, hash, &w);
	if (rc != 0)
		return rc;
	if (!w.cached || !w.uploaded)
		return -ENOENT;
	struct store_chunk chunk = { 0 };
	rc = store_load(c->store, hash, w.plain_len, &chunk);
	if (rc != 0)
		return rc == -ENOMEM ? rc : -EIO; /* no good copy here: nothing to put from */
	uint8_t got[HASH_LEN];
	hash_sha256(chunk.plain, chunk.len, got);
	bool good = chunk.len == w.plain_len && memcmp(got, hash, HASH_LEN) == 0;
	store_chunk_free(&chunk);
	if (!good) {
		log_error("cache: chunk %s: the cache's copy does not match its SHA-256: not put"
			  " again from it", hex);
		return -EIO;
	}
	rc = cat_chunk_reput(c->cat, hash);
	if (rc != 0)
		return rc;
	pthread_mutex_lock(&c->lock);
	c->dirty_bytes += w.stored_len; /* U2: dirty until the uploader's put (cache_dirty_done) */
	pthread_mutex_unlock(&c->lock);
	log_warn("cache: chunk %s: BACKING's copy is damaged and the cache's is good: queued to be"
		 " put again from the cache (kept in the cache until then)", hex);
	return 0;
}

void cache_dirty_done(struct cache *c, uint64_t stored_len)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->dirty_bytes = c->dirty_bytes > stored_len ? c->dirty_bytes - stored_len : 0;
	c->freed += stored_len;
	pthread_cond_broadcast(&c->dirty_room);
	pthread_mutex_unlock(&c->lock);
}

void cache_get_stats(struct cache *c, struct cache_stats *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->st;
	out->cached_bytes = c->cached_bytes;
	out->dirty_bytes = c->dirty_bytes;
	pthread_mutex_unlock(&c->lock);
}

/* ---- eviction ---- */

/* Re-reads the byte counts from the catalog, and counts small.db's WAL
 * with the cached bytes (C8). */
static void cache_resync(struct cache *c)
{
	struct cat_cache_stats cs;
	uint64_t wal = 0;
	if (cat_cache_stats(c->cat, &cs) != 0)
		return;
	if (storesmall_wal_bytes(c->cfg.dir, &wal) != 0)
		wal = 0; /* logged by nobody: a stat that fails now is tried again at the next resync */
	cs.cached_bytes += wal;
	pthread_mutex_lock(&c->lock);
	if (cs.cached_bytes < c->cached_bytes) /* drift: room waiting writers may use */
		c->freed += c->cached_bytes - cs.cached_bytes;
	c->cached_bytes = cs.cached_bytes;
	c->dirty_bytes = cs.dirty_bytes;
	pthread_cond_broadcast(&c->dirty_room);
	pthread_mutex_unlock(&c->lock);
}

static void cache_flush_touched(struct cache *c)
{
	uint8_t batch[CACHE_TOUCH_BATCH][HASH_LEN];
	pthread_mutex_lock(&c->lock);
	int n = c->n_touched;
	assert(n >= 0 && n <= CACHE_TOUCH_BATCH);
	memcpy(batch, c->touched, (size_t)n * HASH_LEN);
	c->n_touched = 0;
	pthread_mutex_unlock(&c->lock);
	if (n > 0)
		cat_chunks_touch(c->cat, (const uint8_t(*)[HASH_LEN])batch, n, cache_now_ns());
}

/* Whether the evictor should go on: cached bytes over the low watermark
 * (lower by what a waiting writer needs), or the disk short of its reserve. */
static bool cache_evict_more(struct cache *c, bool *short_of_room)
{
	uint64_t low = c->bound / 100 * CACHE_LOW_PCT;
	pthread_mutex_lock(&c->lock);
	uint64_t want = c->want_room;
	bool stop = c->stopping, must = c->must_free > 0;
	bool over = c->cached_bytes > (want < low ? low - want : 0);
	pthread_mutex_unlock(&c->lock);
	if (stop)
		return false;
	if (must) { /* the disk said ENOSPC: out of inodes, or filled behind our back */
		*short_of_room = true;
		return true;
	}
	uint64_t disk_free = cache_disk_free(c);
	bool disk_short = disk_free != UINT64_MAX && disk_free < c->reserve + want;
	*short_of_room = disk_short || (want > 0 && over);
	return over || disk_short;
}

/* One chunk of len stored bytes left the cache: the counts, and waiting
 * writers woken. */
static void cache_evicted(struct cache *c, uint64_t len, uint64_t *freed, uint64_t *chunks)
{
	*freed += len;
	(*chunks)++;
	pthread_mutex_lock(&c->lock);
	c->cached_bytes = c->cached_bytes > len ? c->cached_bytes - len : 0;
	c->freed += len;
	c->must_free = c->must_free > len ? c->must_free - len : 0;
	pthread_cond_broadcast(&c->dirty_room);
	pthread_mutex_unlock(&c->lock);
}

/* Evicts least-recently-used clean chunks (C2) while cache_evict_more says
 * so: first those of files nobody has open; when the disk or a waiting writer
 * is short of room, also those of open files (on BACKING: a reader fetches
 * them again). Returns the bytes freed. */
static uint64_t cache_evict(struct cache *c)
{
	uint64_t *open = malloc(CACHE_MAX_OPEN * sizeof(*open));
	uint8_t(*cand)[HASH_LEN] = malloc(CACHE_EVICT_BATCH * HASH_LEN);
	uint64_t *lens = malloc(CACHE_EVICT_BATCH * sizeof(*lens));
	uint64_t freed = 0, chunks = 0;
	bool short_of_room = false, with_open = false;
	pthread_mutex_lock(&c->evict_lock);
	while (open && cand && lens && cache_evict_more(c, &short_of_room)) {
		size_t n_open = with_open ? 0 : cache_opened(c, open, CACHE_MAX_OPEN);
		int n = cat_evict_candidates(c->cat, open, (int)n_open, cand, lens,
					     CACHE_EVICT_BATCH);
		if (n <= 0 && !with_open && short_of_room) {
			with_open = true;
			continue;
		}
		if (n <= 0)
			break; /* nothing clean left to evict: dirty or pinned */
		uint64_t chunks_before = chunks;
		for (int i = 0; i < n; i += CACHE_EVICT_STEP) {
			int m = n - i < CACHE_EVICT_STEP ? n - i : CACHE_EVICT_STEP;
			bool went[CACHE_EVICT_STEP];
			/* mark and file in one hold of the catalog lock (C9), a
			 * copy a local writer names pinned first (C10); a reader
			 * that misses fetches it again (C2) */
			(void)cat_chunks_evict(c->cat, (const uint8_t(*)[HASH_LEN])cand + i, (size_t)m,
					       cache_remove_object, c->store, went);
			for (int j = 0; j < m; j++)
				if (went[j])
					cache_evicted(c, lens[i + j], &freed, &chunks);
			if (!cache_evict_more(c, &short_of_room))
				break;
		}
		if (chunks == chunks_before)
			break; /* the catalog records no eviction (logged): its disk is full */
	}
	pthread_mutex_unlock(&c->evict_lock);
	free(open);
	free(cand);
	free(lens);
	if (chunks) {
		pthread_mutex_lock(&c->lock);
		c->st.evicted_chunks += chunks;
		c->st.evicted_bytes += freed;
		pthread_mutex_unlock(&c->lock);
		log_debug("cache: evicted %" PRIu64 " chunks, %" PRIu64 " MiB%s", chunks, freed >> 20,
			  with_open ? " (open files' too: the disk was short of room)" : "");
	}
	return freed;
}

int cache_make_room(struct cache *c, uint64_t len)
{
	if (!c)
		return -ENOSPC;
	uint64_t asked = 4 * len; /* a few objects, whatever the byte counts say */
	pthread_mutex_lock(&c->lock);
	c->must_free += asked;
	uint64_t before = c->freed;
	pthread_mutex_unlock(&c->lock);
	uint64_t freed = cache_evict(c);
	pthread_mutex_lock(&c->lock);
	/* another writer's eviction, while this one waited for evict_lock, made
	 * room too; with nothing clean left, an upload makes a chunk evictable:
	 * wait for one as cache_room_wait does (C3), then evict it */
	double until = cache_mono_s() + c->cfg.backing_timeout_ms / 1000.0;
	while (c->freed == before && !c->stopping && !cache_daemon_stopping(c) &&
	       cache_mono_s() < until) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&c->dirty_room, &c->lock, &ts);
		if (c->freed != before) {
			c->must_free += 2 * len;
			asked += 2 * len;
			pthread_mutex_unlock(&c->lock);
			freed += cache_evict(c);
			pthread_mutex_lock(&c->lock);
		}
	}
	c->must_free = c->must_free > asked ? c->must_free - asked : 0; /* others' asks stay */
	bool room = c->freed != before;
	pthread_mutex_unlock(&c->lock);
	log_info("cache %s: its disk was full writing %" PRIu64 " KiB: evicted %" PRIu64
		 " KiB of chunks already on BACKING%s", c->cfg.dir, len >> 10, freed >> 10,
		 room ? "; the write is retried" : "");
	return room ? 0 : -ENOSPC;
}

static void *cache_evictor_main(void *p)
{
	struct cache *c = p;
	double last_resync = 0;
	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&c->wake, &c->lock, &ts);
		if (c->stopping)
			break;
		bool over = c->cached_bytes > c->bound / 100 * CACHE_HIGH_PCT || c->want_room;
		pthread_mutex_unlock(&c->lock);
		cache_flush_touched(c);
		if (over || cache_mono_s() - last_resync > CACHE_RESYNC_S) {
			cache_resync(c);
			last_resync = cache_mono_s();
		}
		pthread_mutex_lock(&c->lock);
		over = c->cached_bytes > c->bound / 100 * CACHE_HIGH_PCT || c->want_room;
		pthread_mutex_unlock(&c->lock);
		if (!over) {
			uint64_t disk_free = cache_disk_free(c);
			over = disk_free != UINT64_MAX && disk_free < c->reserve;
		}
		if (over)
			cache_evict(c);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	cache_flush_touched(c);
	return NULL;
}

/* ---- start / stop ---- */

/* C6: what the cache's disk keeps free for the catalog (and its WAL),
 * staging files and objects being written: 1/16 of the disk, at least
 * CACHE_RESERVE_MIN, at most CACHE_RESERVE_MAX. */
static uint64_t cache_reserve(const struct cache *c)
{
	struct statvfs sv;
	if (statvfs(c->cfg.dir, &sv) != 0)
		return CACHE_RESERVE_MIN;
	uint64_t r = (uint64_t)sv.f_blocks * sv.f_frsize / CACHE_RESERVE_SHARE;
	return r < CACHE_RESERVE_MIN ? CACHE_RESERVE_MIN : r > CACHE_RESERVE_MAX ? CACHE_RESERVE_MAX : r;
}

/* The most chunk data the cache's filesystem can hold beside the reserve:
 * what is free at mount plus what the cache holds already. */
static uint64_t cache_disk_bound(const struct cache *c)
{
	uint64_t disk_free = cache_disk_free(c);
	if (disk_free == UINT64_MAX)
		return UINT64_MAX / 2;
	uint64_t usable = disk_free + c->cached_bytes;
	return usable > c->reserve ? usable - c->reserve : 0;
}

int cache_start(const struct cache_config *cfg, struct cat *cat, struct store *store,
		struct backing *backing, const struct cache_hooks *hooks, struct cache **out)
{
	assert(cfg && cat && store && backing && out && cfg->chunk_max > 0);
	struct cache *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->cat = cat;
	c->store = store;
	c->backing = backing;
	if (hooks)
		c->hooks = *hooks;
	c->object_cap = STORE_HEADER_LEN + codec_bound(cfg->chunk_max);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->dirty_room, NULL);
	pthread_cond_init(&c->job_done, NULL);
	pthread_cond_init(&c->job_work, NULL);
	pthread_mutex_init(&c->evict_lock, NULL);
	int rc = flight_table_new_locked(CACHE_INFLIGHT, HASH_LEN, &c->lock, &c->fetches);
	if (rc != 0) {
		pthread_mutex_destroy(&c->evict_lock);
		pthread_cond_destroy(&c->job_work);
		pthread_cond_destroy(&c->job_done);
		pthread_cond_destroy(&c->dirty_room);
		pthread_cond_destroy(&c->wake);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return rc;
	}
	cache_resync(c);
	c->reserve = cache_reserve(c);
	uint64_t disk_bound = cache_disk_bound(c);
	c->bound = cfg->cache_size ? cfg->cache_size : disk_bound / 100 * 90;
	if (c->bound > disk_bound) {
		log_warn("cache %s: cache_size %" PRIu64 " MiB is more than its disk can hold beside"
			 " a reserve of %" PRIu64 " MiB for the catalog and staging: bound %" PRIu64
			 " MiB", cfg->dir, c->bound >> 20, c->reserve >> 20, disk_bound >> 20);
		c->bound = disk_bound;
	}
	c->dirty_bound = cfg->dirty_max ? cfg->dirty_max : c->bound / 4 * 3;
	if (c->dirty_bound > c->bound)
		c->dirty_bound = c->bound;
	assert(c->dirty_bound <= c->bound);
	log_info("cache %s: %" PRIu64 " MiB cached (%" PRIu64 " MiB not yet on BACKING), bound %"
		 PRIu64 " MiB, dirty bound %" PRIu64 " MiB, %" PRIu64 " MiB of its disk kept free",
		 cfg->dir, c->cached_bytes >> 20, c->dirty_bytes >> 20, c->bound >> 20,
		 c->dirty_bound >> 20, c->reserve >> 20);
	rc = pthread_create(&c->evictor, NULL, cache_evictor_main, c);
	c->evictor_started = rc == 0;
	for (int i = 0; rc == 0 && i < CACHE_FETCHERS; i++) {
		if (pthread_create(&c->fetcher[i], NULL, cache_fetcher_main, c) != 0)
			break;
		c->n_fetchers++;
	}
	if (rc != 0) {
		cache_stop(c);
		return -rc;
	}
	*out = c;
	return 0;
}

void cache_stop(struct cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	assert(!c->stopping); /* stopped once */
	c->stopping = true;
	pthread_cond_broadcast(&c->wake);
	pthread_cond_broadcast(&c->dirty_room);
	pthread_mutex_unlock(&c->lock);
	if (c->evictor_started)
		pthread_join(c->evictor, NULL);
	for (int i = 0; i < c->n_fetchers; i++)
		pthread_join(c->fetcher[i], NULL);
	/* bounded fetches still blocked on BACKING keep the cache alive: wait,
	 * and for the job threads to end (C12: idle ones end when told) */
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->job_work);
	while (c->jobs > 0 || c->job_threads > 0)
		pthread_cond_wait(&c->job_done, &c->lock);
	pthread_mutex_unlock(&c->lock);
	flight_table_free(c->fetches); /* every fetch has ended: each landed its own (F4) */
	pthread_cond_destroy(&c->job_work);
	pthread_cond_destroy(&c->job_done);
	pthread_cond_destroy(&c->wake);
	pthread_cond_destroy(&c->dirty_room);
	pthread_mutex_destroy(&c->evict_lock);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
