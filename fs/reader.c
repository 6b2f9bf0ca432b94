/* reader — see reader.h. The cache is a short array searched linearly: it
 * holds a handful of MiB-sized chunks, the ones sequential readers are in. */
#include "reader.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "hash.h"
#include "log.h"

#define CHUNK_CACHE_SLOTS 64
/* Flights of loads: at most CHUNK_CACHE_SLOTS busy (one per loading slot);
 * the room beyond is for landed ones whose followers have yet to wake. */
#define READER_FLIGHTS (2 * CHUNK_CACHE_SLOTS)
/* Readahead loads in flight at once: over a network BACKING each is a fetch
 * (round trips, then the transfer), so several per sequential reader keep
 * the link busy; their bytes are bounded by the budget (invariant 2). */
#define READER_PREFETCH_THREADS 8
#define READER_PREFETCH_QUEUE 64
/* An entry read ahead and not yet asked for counts as read (evictable by
 * other readahead) once this many pins happened since it was loaded: the
 * reader it was for has gone elsewhere. */
#define CHUNK_AHEAD_STALE (4 * CHUNK_CACHE_SLOTS)

struct chunk_entry {
	uint8_t hash[HASH_LEN];
	struct store_chunk chunk; /* chunk.plain NULL and not loading: free slot */
	struct flight load;       /* loading: the loader's lead of the flight on hash
				   * (slot >= 0); others follow it, wait, look again */
	bool ahead;               /* loaded by readahead, no reader has pinned it yet */
	size_t len;
	uint32_t users;           /* pins */
	uint64_t last_use;
};

struct reader {
	struct cat *cat;
	struct cache *cache; /* handed to load and fetch_ahead */
	reader_load_fn load;
	reader_fetch_ahead_fn fetch_ahead;

	pthread_mutex_t lock;
	uint64_t budget, bytes, clock, hits, misses;
	struct chunk_entry slot[CHUNK_CACHE_SLOTS];
	struct flight_table *loads; /* one load per chunk (invariant 3), under lock */

	/* readahead: chunks decoded ahead of sequential readers, by threads
	 * started at the first request (after the daemon forked) */
	struct cat_extent queue[READER_PREFETCH_QUEUE];
	int q_head, q_len;
	pthread_cond_t work;
	pthread_t thread[READER_PREFETCH_THREADS];
	int n_threads;
	bool stopping;
};

/* Invariant 3: a slot is loading while its loader leads the flight on its hash. */
static bool reader_loading(const struct chunk_entry *e)
{
	return e->load.slot >= 0;
}

int reader_new(const struct reader_config *cfg, struct cat *cat, struct cache *cache,
	       struct reader **out)
{
	*out = NULL;
	if (!cfg->load)
		return -EINVAL;
	struct reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cat = cat;
	r->cache = cache;
	r->load = cfg->load;
	r->fetch_ahead = cfg->fetch_ahead;
	pthread_mutex_init(&r->lock, NULL);
	int rc = flight_table_new_locked(READER_FLIGHTS, HASH_LEN, &r->lock, &r->loads);
	if (rc != 0) {
		pthread_mutex_destroy(&r->lock);
		free(r);
		return rc;
	}
	pthread_cond_init(&r->work, NULL);
	for (int i = 0; i < CHUNK_CACHE_SLOTS; i++)
		r->slot[i].load.slot = -1;
	r->budget = cfg->budget_bytes;
	*out = r;
	return 0;
}

void reader_free(struct reader *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	pthread_cond_broadcast(&r->work);
	pthread_mutex_unlock(&r->lock);
	for (int i = 0; i < r->n_threads; i++)
		pthread_join(r->thread[i], NULL);
	for (int i = 0; i < CHUNK_CACHE_SLOTS; i++) {
		/* invariant 3: every pin was released, no load is under way */
		assert(r->slot[i].users == 0 && !reader_loading(&r->slot[i]));
		store_chunk_free(&r->slot[i].chunk);
	}
	flight_table_free(r->loads); /* F4: every load landed */
	pthread_cond_destroy(&r->work);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void reader_stats(struct reader *r, struct reader_stats *out)
{
	pthread_mutex_lock(&r->lock);
	out->hits = r->hits;
	out->misses = r->misses;
	out->bytes = r->bytes;
	out->budget = r->budget;
	pthread_mutex_unlock(&r->lock);
}

/* Whether e, idle, may be evicted to make room for a load; readahead
 * (prefetch) does not evict chunks read ahead for others that are still to be
 * read, a reader's miss evicts them last. */
static bool reader_cache_read_already(const struct reader *r, const struct chunk_entry *e)
{
	return !e->ahead || r->clock - e->last_use > CHUNK_AHEAD_STALE;
}

/* With the lock held: frees least recently used idle entries (chunks already
 * read first) until `need` more bytes fit the budget. Returns a free slot
 * index, or -1. */
static int reader_cache_make_room(struct reader *r, size_t need, bool prefetch)
{
	for (;;) {
		int free_slot = -1, victim = -1;
		bool victim_read = false;
		for (int i = 0; i < CHUNK_CACHE_SLOTS; i++) {
			struct chunk_entry *e = &r->slot[i];
			if (!e->chunk.plain && !reader_loading(e)) {
				free_slot = i;
				continue;
			}
			if (reader_loading(e) || e->users > 0)
				continue;
			bool read = reader_cache_read_already(r, e);
			if (prefetch && !read)
				continue;
			if (victim < 0 || (read && !victim_read) ||
			    (read == victim_read && e->last_use < r->slot[victim].last_use)) {
				victim = i;
				victim_read = read;
			}
		}
		if (free_slot >= 0 && r->bytes + need <= r->budget)
			return free_slot;
		if (victim < 0)
			return -1;
		struct chunk_entry *v = &r->slot[victim];
		/* invariant 3: loaded → free only unpinned */
		assert(v->chunk.plain && !reader_loading(v) && v->users == 0 && r->bytes >= v->len);
		r->bytes -= v->len;
		store_chunk_free(&v->chunk);
		v->ahead = false;
	}
}

/* Pins ext's decoded chunk in the cache, or, when the cache is full of pinned
 * entries, loads a private copy into pin->own. A chunk is read and verified
 * once however many readers (readahead of one file, several files sharing
 * it) ask for it at the same time: the first loads it, leading the flight on
 * its hash, the others follow that flight, wait for it to land and look
 * again. A load without a flight slot (a table full of landed flights whose
 * followers have yet to wake: rare) is private, like one without a cache
 * slot, so that a loading slot always has its flight.
 * Returns the plain bytes, or NULL with *rc set.
 *
 * prefetch (readahead): returns NULL with *rc 0 when the chunk is there or
 * being loaded, NULL with *rc -ENOBUFS when room for it would cost a chunk
 * still to be read (or no flight slot is free); otherwise loads it into the
 * cache and pins it. */
static const char *reader_cache_get(struct reader *r, const struct cat_extent *ext,
				    struct reader_pin *pin, bool prefetch, int *rc)
{
	*rc = 0;
	pthread_mutex_lock(&r->lock);
	int i;
again:
	for (i = 0; i < CHUNK_CACHE_SLOTS; i++) {
		struct chunk_entry *e = &r->slot[i];
		if ((e->chunk.plain || reader_loading(e)) && memcmp(e->hash, ext->hash, HASH_LEN) == 0)
			break;
	}
	if (i < CHUNK_CACHE_SLOTS) {
		struct chunk_entry *e = &r->slot[i];
		if (prefetch) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		if (reader_loading(e)) {
			struct flight f;
			enum flight_join how = flight_join_locked(r->loads, ext->hash, UINT64_MAX, &f);
			assert(how == FLIGHT_FOLLOW); /* invariant 3: its loader's flight is busy */
			(void)how;
			flight_wait_until_locked(r->loads, &f, NULL);
			flight_release_locked(r->loads, &f);
			goto again; /* loaded, or failed and gone */
		}
		assert(e->chunk.plain && e->users < UINT32_MAX); /* invariant 3: a loaded slot */
		e->users++;
		e->ahead = false;
		e->last_use = ++r->clock;
		r->hits++;
		pin->slot = i;
		const char *data = (const char *)e->chunk.plain;
		pthread_mutex_unlock(&r->lock);
		return data;
	}
	i = reader_cache_make_room(r, ext->chunk_len, prefetch);
	if (i < 0 && prefetch) {
		pthread_mutex_unlock(&r->lock);
		*rc = -ENOBUFS;
		return NULL;
	}
	struct flight lead = { .slot = -1 };
	if (i >= 0) {
		/* since: none, a landing never stands for a load (F3) */
		enum flight_join how = flight_join_locked(r->loads, ext->hash, UINT64_MAX, &lead);
		assert(how == FLIGHT_LEAD); /* invariant 3: nobody loads it (the scan above) */
		(void)how;
		if (lead.slot < 0) /* no flight to share: a private load (F4) */
			i = -1;
	}
	if (i < 0 && prefetch) {
		pthread_mutex_unlock(&r->lock);
		*rc = -ENOBUFS;
		return NULL;
	}
	r->misses++;
	if (i >= 0) { /* reserve the slot so that others follow this load */
		struct chunk_entry *e = &r->slot[i];
		/* invariant 3: free → loading, pinned by this thread alone */
		assert(!e->chunk.plain && !reader_loading(e) && e->users == 0);
		memcpy(e->hash, ext->hash, HASH_LEN);
		e->load = lead;
		e->ahead = prefetch;
		e->len = ext->chunk_len;
		e->users = 1;
		r->bytes += e->len;
	}
	pthread_mutex_unlock(&r->lock);

	struct store_chunk chunk;
	*rc = r->load(r->cache, ext->hash, ext->chunk_len, &chunk);
	if (*rc == 0 && chunk.len != ext->chunk_len) {
		store_chunk_free(&chunk);
		*rc = -EIO;
	}

	if (i >= 0) {
		pthread_mutex_lock(&r->lock);
		struct chunk_entry *e = &r->slot[i];
		/* invariant 3: loading → loaded (still this thread's pin) or free */
		assert(e->load.slot == lead.slot && e->load.gen == lead.gen && e->users == 1 &&
		       !e->chunk.plain && r->bytes >= e->len);
		e->load.slot = -1;
		if (*rc == 0) {
			e->chunk = chunk;
			e->last_use = ++r->clock;
			/* what it holds, huge-page rounding included (store.c) */
			size_t held = store_chunk_footprint(&chunk);
			r->bytes = r->bytes - e->len + held;
			e->len = held;
		} else {
			r->bytes -= e->len;
			e->users = 0;
			e->ahead = false;
		}
		flight_land_locked(r->loads, &lead, *rc); /* its followers look again */
		pthread_mutex_unlock(&r->lock);
	}
	if (*rc != 0)
		return NULL;
	pin->slot = i >= 0 ? i : READER_PIN_OWN;
	if (i < 0)
		pin->own = chunk;
	return (const char *)chunk.plain;
}

static void reader_cache_release(struct reader *r, struct reader_pin *pin)
{
	if (pin->slot == READER_PIN_OWN) {
		store_chunk_free(&pin->own);
	} else if (pin->slot >= 0) {
		pthread_mutex_lock(&r->lock);
		struct chunk_entry *e = &r->slot[pin->slot];
		assert(e->chunk.plain && !reader_loading(e) && e->users > 0); /* invariant 3 */
		e->users--;
		pthread_mutex_unlock(&r->lock);
	}
	pin->slot = READER_PIN_NONE;
}

/* Pins ext's chunk for a read of inode ino; a chunk that cannot be had is
 * logged with the file, the offset and the chunk (invariant 1). */
static const char *reader_pin_extent(struct reader *r, uint64_t ino,
				     const struct cat_extent *ext, uint64_t chunk_off,
				     struct reader_pin *pin, int *rc)
{
	const char *data = reader_cache_get(r, ext, pin, false, rc);
	if (data)
		return data;
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(ext->hash, hex);
	log_error("read inode %llu at offset %llu: chunk %s unreadable: %s",
		  (unsigned long long)ino, (unsigned long long)(ext->off + chunk_off - ext->chunk_off),
		  hex, strerror(-*rc));
	*rc = *rc == -ENOMEM ? *rc : -EIO;
	return NULL;
}

int reader_copy_extent(struct reader *r, uint64_t ino, const struct cat_extent *ext,
		       uint64_t chunk_off, size_t len, char *out)
{
	struct reader_pin pin = { .slot = READER_PIN_NONE };
	int rc;
	const char *data = reader_pin_extent(r, ino, ext, chunk_off, &pin, &rc);
	if (!data)
		return rc;
	memcpy(out, data + chunk_off, len);
	reader_cache_release(r, &pin);
	return 0;
}

/* ---- readahead ---- */

static void *reader_cache_prefetch_main(void *p)
{
	struct reader *r = p;
	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		if (r->q_len == 0) {
			pthread_cond_wait(&r->work, &r->lock);
			continue;
		}
		assert(r->q_len > 0 && r->q_len <= READER_PREFETCH_QUEUE);
		struct cat_extent ext = r->queue[r->q_head];
		r->q_head = (r->q_head + 1) % READER_PREFETCH_QUEUE;
		r->q_len--;
		pthread_mutex_unlock(&r->lock);
		struct reader_pin pin = { .slot = READER_PIN_NONE };
		int rc;
		if (reader_cache_get(r, &ext, &pin, true, &rc))
			reader_cache_release(r, &pin); /* stays cached, unpinned, `ahead` */
		else if (rc == -ENOBUFS && r->fetch_ahead)
			/* no room in memory: into the disk cache, for its reader to load */
			r->fetch_ahead(r->cache, ext.hash);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Asks for ext's chunk to be decoded into the cache in the background; a
 * no-op if it is there, being loaded, queued, or the queue is full. */
static void reader_cache_prefetch(struct reader *r, const struct cat_extent *ext)
{
	pthread_mutex_lock(&r->lock);
	bool known = r->stopping || r->q_len == READER_PREFETCH_QUEUE;
	for (int i = 0; i < CHUNK_CACHE_SLOTS && !known; i++) {
		const struct chunk_entry *e = &r->slot[i];
		known = (e->chunk.plain || reader_loading(e)) &&
			memcmp(e->hash, ext->hash, HASH_LEN) == 0;
	}
	for (int i = 0; i < r->q_len && !known; i++)
		known = memcmp(r->queue[(r->q_head + i) % READER_PREFETCH_QUEUE].hash, ext->hash,
			       HASH_LEN) == 0;
	if (!known) {
		assert(r->q_len < READER_PREFETCH_QUEUE);
		r->queue[(r->q_head + r->q_len) % READER_PREFETCH_QUEUE] = *ext;
		r->q_len++;
		while (r->n_threads < READER_PREFETCH_THREADS &&
		       pthread_create(&r->thread[r->n_threads], NULL, reader_cache_prefetch_main,
				      r) == 0)
			r->n_threads++;
		pthread_cond_signal(&r->work);
	}
	pthread_mutex_unlock(&r->lock);
}

/* ---- mapping reads onto chunks ---- */

#define READER_BATCH 16
#define READER_AHEAD 8 /* chunks past a read loaded (fetched, verified, decoded) ahead */
#define READER_ZEROS (64u << 10)

static const char reader_zeros[READER_ZEROS]; /* holes */

/* Readahead: the next chunks are loaded into memory, several at once, while
 * the kernel takes this read. A chunk fetched from BACKING is thus checked
 * and decoded once, its bytes kept for the read to come; loaded into the disk
 * cache first (as it was), it would be written there, read back, and checked
 * and decoded again. Only chunks the budget has no room for go to the disk
 * cache's prefetch (reader_cache_prefetch_main). */
static void reader_readahead(struct reader *r, const struct cat_extent *ext, int n)
{
	for (int j = 0; j < n && j < READER_AHEAD; j++)
		reader_cache_prefetch(r, &ext[j]);
}

static void reader_add_piece(struct reader_map *m, const char *data, size_t len)
{
	assert(m->n < READER_MAX_PIECES && len > 0);
	m->iov[m->n].iov_base = (void *)data;
	m->iov[m->n].iov_len = len;
	m->n++;
	m->len += len;
}

int reader_map(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off, size_t len,
	       struct reader_map *m)
{
	struct cat_extent ext[READER_BATCH];
	uint64_t pos = off, end = off + len;
	int n = 0, k = 0, rc = 0;
	bool last_batch = false;
	m->n = 0;
	m->len = 0;
	while (pos < end && m->n < READER_MAX_PIECES) {
		if (k == n && !last_batch) {
			n = src == READER_PENDING ? cat_pending_extents(r->cat, ino, pos, ext, READER_BATCH)
						  : cat_extents(r->cat, ino, pos, ext, READER_BATCH);
			if (n < 0) {
				rc = n;
				break;
			}
			k = 0;
			last_batch = n < READER_BATCH;
		}
		if (k < n && ext[k].off + ext[k].len <= pos) { /* empty, or behind the read */
			k++;
			continue;
		}
		struct reader_pin *pin = &m->pin[m->n];
		pin->slot = READER_PIN_NONE;
		uint64_t hole_end = k < n && ext[k].off < end ? ext[k].off : end;
		if (pos < hole_end) { /* a hole, or past the last extent */
			uint64_t take = hole_end - pos < READER_ZEROS ? hole_end - pos : READER_ZEROS;
			reader_add_piece(m, reader_zeros, take);
			pos += take;
			continue;
		}
		assert(k < n && ext[k].off <= pos && pos < ext[k].off + ext[k].len);
		uint64_t ext_end = ext[k].off + ext[k].len;
		uint64_t take = (ext_end < end ? ext_end : end) - pos;
		uint64_t chunk_off = ext[k].chunk_off + (pos - ext[k].off);
		const char *data = reader_pin_extent(r, ino, &ext[k], chunk_off, pin, &rc);
		if (!data)
			break;
		reader_add_piece(m, data + chunk_off, take);
		pos += take;
		k++;
	}
	if (rc != 0) {
		reader_unmap(r, m);
		return rc;
	}
	if (src == READER_COMMITTED)
		reader_readahead(r, ext + k, n - k);
	return 0;
}

void reader_unmap(struct reader *r, struct reader_map *m)
{
	for (int i = 0; i < m->n; i++)
		reader_cache_release(r, &m->pin[i]);
	m->n = 0;
	m->len = 0;
}

int reader_read(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off,
		size_t len, char *out)
{
	while (len > 0) {
		struct reader_map m;
		int rc = reader_map(r, ino, src, off, len, &m);
		if (rc != 0)
			return rc;
		size_t at = 0;
		for (int i = 0; i < m.n; i++) {
			memcpy(out + at, m.iov[i].iov_base, m.iov[i].iov_len);
			at += m.iov[i].iov_len;
		}
		reader_unmap(r, &m);
		off += at;
		out += at;
		len -= at;
	}
	return 0;
}
