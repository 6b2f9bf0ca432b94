/* reader — see reader.h. The cache is a short array searched linearly: it
 * holds a handful of MiB-sized chunks, the ones sequential readers are in. */
#define _GNU_SOURCE /* pthread_setname_np */
#include "reader.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "hash.h"
#include "log.h"
#include "monoclock.h"

#define CHUNK_CACHE_SLOTS 64
/* Flights of loads: at most CHUNK_CACHE_SLOTS busy (one per loading slot);
 * the room beyond is for landed ones whose followers have yet to wake. */
#define READER_FLIGHTS (2 * CHUNK_CACHE_SLOTS)
/* Readahead loads in flight at once: over a network BACKING each is a fetch
 * (round trips, then the transfer), so several per sequential reader keep
 * the link busy; their bytes are bounded by the budget (invariant 2). */
#define READER_PREFETCH_THREADS 8
#define READER_PREFETCH_QUEUE 256 /* several sequential readers' windows */
/* Invariant 4: files followed at once, and how a read counts as sequential */
#define READER_STREAMS 32
#define READER_SEQ_SLACK (8ull << 20) /* FUSE requests of one reader may arrive out of order */
#define READER_AHEAD_MIN 2
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

/* One file being read (invariant 4); ino 0: a free entry. */
struct reader_stream {
	uint64_t ino;
	uint64_t next_off;  /* where its reads have got to */
	uint64_t ahead_end; /* chunks ending before this were offered (catalog looked up) */
	int window;         /* chunks read ahead now */
	uint64_t last_use;
};

struct reader_ahead_item {
	uint64_t ino;
	struct cat_extent ext;
};

struct reader {
	struct cat *cat;
	struct cache *cache; /* handed to load and fetch_ahead */
	reader_load_fn load;
	reader_fetch_ahead_fn fetch_ahead;

	pthread_mutex_t lock;
	uint64_t budget, bytes, clock, hits, misses;
	uint64_t ahead_loaded, ahead_hits, waits, wait_ns, own_loads, own_load_ns;
	struct chunk_entry slot[CHUNK_CACHE_SLOTS];
	struct flight_table *loads; /* one load per chunk (invariant 3), under lock */

	/* readahead: chunks decoded ahead of sequential readers, by threads
	 * started at the first request (after the daemon forked) */
	struct reader_ahead_item queue[READER_PREFETCH_QUEUE];
	int q_head, q_len;
	int ahead_max; /* -o prefetch: the largest window, 0: none */
	struct reader_stream streams[READER_STREAMS];
	uint64_t stream_clock;
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
	r->ahead_max = cfg->prefetch == 0 ? READER_PREFETCH_DEFAULT
		       : cfg->prefetch < 0 ? 0
		       : cfg->prefetch > READER_PREFETCH_MAX ? READER_PREFETCH_MAX : cfg->prefetch;
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
	if (r->hits + r->misses > 0)
		log_info("reader: %" PRIu64 " chunk pins, %" PRIu64 " loads; readahead (up to %d"
			 " chunks) loaded %" PRIu64 ", reads found %" PRIu64 " of them loaded, waited"
			 " for %" PRIu64 " loads under way (%.2f s), loaded %" PRIu64 " themselves"
			 " (%.2f s)", r->hits + r->misses, r->misses, r->ahead_max, r->ahead_loaded,
			 r->ahead_hits, r->waits, r->wait_ns / 1e9, r->own_loads,
			 r->own_load_ns / 1e9);
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
	out->ahead_loaded = r->ahead_loaded;
	out->ahead_hits = r->ahead_hits;
	out->waits = r->waits;
	out->wait_ns = r->wait_ns;
	out->own_loads = r->own_loads;
	out->own_load_ns = r->own_load_ns;
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
			uint64_t t0 = monoclock_ns();
			flight_wait_until_locked(r->loads, &f, NULL);
			flight_release_locked(r->loads, &f);
			r->waits++;
			r->wait_ns += monoclock_ns() - t0;
			goto again; /* loaded, or failed and gone */
		}
		assert(e->chunk.plain && e->users < UINT32_MAX); /* invariant 3: a loaded slot */
		e->users++;
		if (e->ahead)
			r->ahead_hits++;
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

	uint64_t t0 = monoclock_ns();
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
		if (prefetch) {
			r->ahead_loaded += *rc == 0;
		} else {
			r->own_loads++;
			r->own_load_ns += monoclock_ns() - t0;
		}
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

/* With the lock held: the stream of ino, or NULL. */
static struct reader_stream *reader_stream_find_locked(struct reader *r, uint64_t ino)
{
	for (int i = 0; i < READER_STREAMS; i++)
		if (r->streams[i].ino == ino)
			return &r->streams[i];
	return NULL;
}

/* Whether a queued chunk is still wanted: its reader has not read past it
 * (invariant 4; a reader that went past it loads it itself if it comes back). */
static bool reader_ahead_wanted_locked(struct reader *r, const struct reader_ahead_item *it)
{
	const struct reader_stream *s = reader_stream_find_locked(r, it->ino);
	return !s || it->ext.off + it->ext.len > s->next_off;
}

static void *reader_cache_prefetch_main(void *p)
{
	struct reader *r = p;
	pthread_setname_np(pthread_self(), "ckptfs-ahead"); /* for top -H and perf */
	pthread_mutex_lock(&r->lock);
	while (!r->stopping) {
		if (r->q_len == 0) {
			pthread_cond_wait(&r->work, &r->lock);
			continue;
		}
		assert(r->q_len > 0 && r->q_len <= READER_PREFETCH_QUEUE);
		struct reader_ahead_item it = r->queue[r->q_head];
		r->q_head = (r->q_head + 1) % READER_PREFETCH_QUEUE;
		r->q_len--;
		if (!reader_ahead_wanted_locked(r, &it))
			continue;
		pthread_mutex_unlock(&r->lock);
		struct reader_pin pin = { .slot = READER_PIN_NONE };
		int rc;
		if (reader_cache_get(r, &it.ext, &pin, true, &rc))
			reader_cache_release(r, &pin); /* stays cached, unpinned, `ahead` */
		else if (rc == -ENOBUFS && r->fetch_ahead)
			/* no room in memory: into the disk cache, for its reader to load */
			r->fetch_ahead(r->cache, it.ext.hash);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Asks for ext's chunk (of file ino) to be decoded into the cache in the
 * background; nothing to do if it is there, being loaded or queued. false
 * when the queue is full (or the reader stops): not queued. */
static bool reader_cache_prefetch(struct reader *r, uint64_t ino, const struct cat_extent *ext)
{
	pthread_mutex_lock(&r->lock);
	if (r->stopping || r->q_len == READER_PREFETCH_QUEUE) {
		pthread_mutex_unlock(&r->lock);
		return false;
	}
	bool known = false;
	for (int i = 0; i < CHUNK_CACHE_SLOTS && !known; i++) {
		const struct chunk_entry *e = &r->slot[i];
		known = (e->chunk.plain || reader_loading(e)) &&
			memcmp(e->hash, ext->hash, HASH_LEN) == 0;
	}
	for (int i = 0; i < r->q_len && !known; i++)
		known = memcmp(r->queue[(r->q_head + i) % READER_PREFETCH_QUEUE].ext.hash, ext->hash,
			       HASH_LEN) == 0;
	if (!known) {
		assert(r->q_len < READER_PREFETCH_QUEUE);
		struct reader_ahead_item *it = &r->queue[(r->q_head + r->q_len) % READER_PREFETCH_QUEUE];
		it->ino = ino;
		it->ext = *ext;
		r->q_len++;
		while (r->n_threads < READER_PREFETCH_THREADS &&
		       pthread_create(&r->thread[r->n_threads], NULL, reader_cache_prefetch_main,
				      r) == 0)
			r->n_threads++;
		pthread_cond_signal(&r->work);
	}
	pthread_mutex_unlock(&r->lock);
	return true;
}

/* Invariant 4: notes a read of ino's bytes [off, end) and returns the window
 * (chunks to read ahead of end) with, in *from, the offset before which the
 * stream's chunks are queued already. */
static int reader_stream_note(struct reader *r, uint64_t ino, uint64_t off, uint64_t end,
			      uint64_t *from)
{
	pthread_mutex_lock(&r->lock);
	struct reader_stream *s = reader_stream_find_locked(r, ino);
	if (!s) { /* a new file: the least recently read entry makes room */
		s = &r->streams[0];
		for (int i = 1; i < READER_STREAMS; i++)
			if (r->streams[i].last_use < s->last_use)
				s = &r->streams[i];
		*s = (struct reader_stream){ .ino = ino, .next_off = off,
					     .window = off == 0 ? READER_AHEAD_MIN : 0 };
	}
	bool sequential = off + READER_SEQ_SLACK >= s->next_off && off <= s->next_off + READER_SEQ_SLACK;
	if (sequential) {
		s->window = s->window < READER_AHEAD_MIN ? READER_AHEAD_MIN : 2 * s->window;
		if (end > s->next_off)
			s->next_off = end;
	} else { /* a jump: start over from here */
		s->window = READER_AHEAD_MIN;
		s->next_off = end;
		s->ahead_end = 0;
	}
	if (s->window > r->ahead_max)
		s->window = r->ahead_max;
	s->last_use = ++r->stream_clock;
	*from = s->ahead_end > end ? s->ahead_end : end;
	int window = s->window;
	pthread_mutex_unlock(&r->lock);
	return window;
}

/* Readahead (invariant 4) after a read of ino's bytes [off, end): the chunks
 * of the window past it are loaded into memory, several at once, while the
 * kernel takes this read. A chunk fetched from BACKING is thus checked and
 * decoded once, its bytes kept for the read to come; loaded into the disk
 * cache first, it would be written there, read back, and checked and
 * decoded again. Only chunks the budget has no room for go to the disk
 * cache's prefetch (reader_cache_prefetch_main). ext[0, n): the extents
 * after the read that its lookup found; last: no more after them. */
static void reader_readahead(struct reader *r, uint64_t ino, uint64_t off, uint64_t end,
			     const struct cat_extent *ext, int n, bool last)
{
	uint64_t from;
	int window = reader_stream_note(r, ino, off, end, &from);
	if (window <= 0)
		return;
	struct cat_extent list[READER_PREFETCH_MAX];
	int have = n < window ? n : window;
	memcpy(list, ext, (size_t)have * sizeof(*list));
	uint64_t list_end = have > 0 ? list[have - 1].off + list[have - 1].len : end;
	/* the window reaches past the lookup's extents: look up the rest, unless
	 * the chunks queued already reach past them and are half the window */
	if (have < window && !last && !(from >= list_end && have >= window / 2)) {
		int m = cat_extents(r->cat, ino, list_end, list + have, window - have);
		if (m > 0)
			have += m;
	}
	/* the whole window, again at every read: one in memory, loading or
	 * queued is not queued twice, and one that found no room in memory
	 * before (the disk cache's prefetch took it) is tried again */
	uint64_t queued = from;
	for (int j = 0; j < have; j++) {
		if (list[j].len == 0)
			continue;
		if (!reader_cache_prefetch(r, ino, &list[j]))
			break; /* the queue is full: the rest at a later read */
		if (list[j].off + list[j].len > queued)
			queued = list[j].off + list[j].len;
	}
	pthread_mutex_lock(&r->lock);
	struct reader_stream *s = reader_stream_find_locked(r, ino);
	if (s && queued > s->ahead_end)
		s->ahead_end = queued;
	pthread_mutex_unlock(&r->lock);
}

/* ---- mapping reads onto chunks ---- */

#define READER_BATCH 16
#define READER_ZEROS (64u << 10)

static const char reader_zeros[READER_ZEROS]; /* holes */

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
	if (src == READER_COMMITTED && r->ahead_max > 0)
		reader_readahead(r, ino, off, pos, ext + k, n - k, last_batch);
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
