/* reader — see reader.h. The cache is a short array searched linearly: it
 * holds a handful of MiB-sized chunks, the ones sequential readers are in. */
#include "reader.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "ckptfs.h"
#include "hash.h"
#include "log.h"

#define CHUNK_CACHE_SLOTS 64
#define READER_PREFETCH_THREADS 4
#define READER_PREFETCH_QUEUE 32
/* An entry read ahead and not yet asked for counts as read (evictable by
 * other readahead) once this many pins happened since it was loaded: the
 * reader it was for has gone elsewhere. */
#define CHUNK_AHEAD_STALE (4 * CHUNK_CACHE_SLOTS)

struct chunk_entry {
	uint8_t hash[HASH_LEN];
	struct store_chunk chunk; /* chunk.plain NULL and !loading: free slot */
	bool loading;             /* one thread is reading it; others wait on `loaded` */
	bool ahead;               /* loaded by readahead, no reader has pinned it yet */
	size_t len;
	uint32_t users;           /* pins */
	uint64_t last_use;
	pthread_cond_t loaded;    /* the load of this slot finished (or failed) */
};

struct chunk_cache {
	pthread_mutex_t lock;
	uint64_t budget, bytes, clock, hits, misses;
	struct chunk_entry slot[CHUNK_CACHE_SLOTS];

	/* readahead: chunks decoded ahead of sequential readers, by threads
	 * started at the first request (after the daemon forked) */
	struct ckptfs *fs;
	struct cat_extent queue[READER_PREFETCH_QUEUE];
	int q_head, q_len;
	pthread_cond_t work;
	pthread_t thread[READER_PREFETCH_THREADS];
	int n_threads;
	bool stopping;
};

int chunk_cache_new(uint64_t budget_bytes, struct chunk_cache **out)
{
	struct chunk_cache *cc = calloc(1, sizeof(*cc));
	if (!cc)
		return -ENOMEM;
	pthread_mutex_init(&cc->lock, NULL);
	pthread_cond_init(&cc->work, NULL);
	for (int i = 0; i < CHUNK_CACHE_SLOTS; i++)
		pthread_cond_init(&cc->slot[i].loaded, NULL);
	cc->budget = budget_bytes;
	*out = cc;
	return 0;
}

void chunk_cache_free(struct chunk_cache *cc)
{
	if (!cc)
		return;
	pthread_mutex_lock(&cc->lock);
	cc->stopping = true;
	pthread_cond_broadcast(&cc->work);
	pthread_mutex_unlock(&cc->lock);
	for (int i = 0; i < cc->n_threads; i++)
		pthread_join(cc->thread[i], NULL);
	for (int i = 0; i < CHUNK_CACHE_SLOTS; i++) {
		store_chunk_free(&cc->slot[i].chunk);
		pthread_cond_destroy(&cc->slot[i].loaded);
	}
	pthread_cond_destroy(&cc->work);
	pthread_mutex_destroy(&cc->lock);
	free(cc);
}

void chunk_cache_stats(struct chunk_cache *cc, struct chunk_cache_stats *out)
{
	pthread_mutex_lock(&cc->lock);
	out->hits = cc->hits;
	out->misses = cc->misses;
	out->bytes = cc->bytes;
	pthread_mutex_unlock(&cc->lock);
}

/* Whether e, idle, may be evicted to make room for a load; readahead
 * (prefetch) does not evict chunks read ahead for others that are still to be
 * read, a reader's miss evicts them last. */
static bool chunk_cache_read_already(const struct chunk_cache *cc, const struct chunk_entry *e)
{
	return !e->ahead || cc->clock - e->last_use > CHUNK_AHEAD_STALE;
}

/* With the lock held: frees least recently used idle entries (chunks already
 * read first) until `need` more bytes fit the budget. Returns a free slot
 * index, or -1. */
static int chunk_cache_make_room(struct chunk_cache *cc, size_t need, bool prefetch)
{
	for (;;) {
		int free_slot = -1, victim = -1;
		bool victim_read = false;
		for (int i = 0; i < CHUNK_CACHE_SLOTS; i++) {
			struct chunk_entry *e = &cc->slot[i];
			if (!e->chunk.plain && !e->loading) {
				free_slot = i;
				continue;
			}
			if (e->loading || e->users > 0)
				continue;
			bool read = chunk_cache_read_already(cc, e);
			if (prefetch && !read)
				continue;
			if (victim < 0 || (read && !victim_read) ||
			    (read == victim_read && e->last_use < cc->slot[victim].last_use)) {
				victim = i;
				victim_read = read;
			}
		}
		if (free_slot >= 0 && cc->bytes + need <= cc->budget)
			return free_slot;
		if (victim < 0)
			return -1;
		cc->bytes -= cc->slot[victim].len;
		store_chunk_free(&cc->slot[victim].chunk);
		cc->slot[victim].ahead = false;
	}
}

/* Pins ext's decoded chunk in the cache, or, when the cache is full of pinned
 * entries, loads a private copy into pin->own. A chunk is read and verified
 * once however many readers (readahead of one file, several files sharing
 * it) ask for it at the same time: the first loads it, the others wait.
 * Returns the plain bytes, or NULL with *rc set.
 *
 * prefetch (readahead): returns NULL with *rc 0 when the chunk is there or
 * being loaded, or when room for it would cost a chunk still to be read;
 * otherwise loads it into the cache and pins it. */
static const char *chunk_cache_get(struct ckptfs *fs, const struct cat_extent *ext,
				   struct reader_pin *pin, bool prefetch, int *rc)
{
	struct chunk_cache *cc = fs->chunks;
	*rc = 0;
	pthread_mutex_lock(&cc->lock);
	int i;
again:
	for (i = 0; i < CHUNK_CACHE_SLOTS; i++) {
		struct chunk_entry *e = &cc->slot[i];
		if ((e->chunk.plain || e->loading) && memcmp(e->hash, ext->hash, HASH_LEN) == 0)
			break;
	}
	if (i < CHUNK_CACHE_SLOTS) {
		struct chunk_entry *e = &cc->slot[i];
		if (prefetch) {
			pthread_mutex_unlock(&cc->lock);
			return NULL;
		}
		if (e->loading) {
			pthread_cond_wait(&e->loaded, &cc->lock);
			goto again; /* loaded, or failed and gone */
		}
		e->users++;
		e->ahead = false;
		e->last_use = ++cc->clock;
		cc->hits++;
		pin->slot = i;
		const char *data = (const char *)e->chunk.plain;
		pthread_mutex_unlock(&cc->lock);
		return data;
	}
	i = chunk_cache_make_room(cc, ext->chunk_len, prefetch);
	if (i < 0 && prefetch) {
		pthread_mutex_unlock(&cc->lock);
		return NULL;
	}
	cc->misses++;
	if (i >= 0) { /* reserve the slot so that others wait for this load */
		struct chunk_entry *e = &cc->slot[i];
		memcpy(e->hash, ext->hash, HASH_LEN);
		e->loading = true;
		e->ahead = prefetch;
		e->len = ext->chunk_len;
		e->users = 1;
		cc->bytes += e->len;
	}
	pthread_mutex_unlock(&cc->lock);

	struct store_chunk chunk;
	*rc = cache_load(fs->cache, ext->hash, ext->chunk_len, &chunk);
	if (*rc == 0 && chunk.len != ext->chunk_len) {
		store_chunk_free(&chunk);
		*rc = -EIO;
	}

	if (i >= 0) {
		pthread_mutex_lock(&cc->lock);
		struct chunk_entry *e = &cc->slot[i];
		e->loading = false;
		if (*rc == 0) {
			e->chunk = chunk;
			e->last_use = ++cc->clock;
			/* what it holds, huge-page rounding included (store.c) */
			size_t held = store_chunk_footprint(&chunk);
			cc->bytes = cc->bytes - e->len + held;
			e->len = held;
		} else {
			cc->bytes -= e->len;
			e->users = 0;
			e->ahead = false;
		}
		pthread_cond_broadcast(&e->loaded);
		pthread_mutex_unlock(&cc->lock);
	}
	if (*rc != 0)
		return NULL;
	pin->slot = i >= 0 ? i : READER_PIN_OWN;
	if (i < 0)
		pin->own = chunk;
	return (const char *)chunk.plain;
}

static void chunk_cache_release(struct chunk_cache *cc, struct reader_pin *pin)
{
	if (pin->slot == READER_PIN_OWN) {
		store_chunk_free(&pin->own);
	} else if (pin->slot >= 0) {
		pthread_mutex_lock(&cc->lock);
		assert(cc->slot[pin->slot].users > 0);
		cc->slot[pin->slot].users--;
		pthread_mutex_unlock(&cc->lock);
	}
	pin->slot = READER_PIN_NONE;
}

/* Pins ext's chunk for a read of inode ino; a chunk that cannot be had is
 * logged with the file, the offset and the chunk (invariant 1). */
static const char *reader_pin_extent(struct ckptfs *fs, uint64_t ino,
				     const struct cat_extent *ext, uint64_t chunk_off,
				     struct reader_pin *pin, int *rc)
{
	const char *data = chunk_cache_get(fs, ext, pin, false, rc);
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

int reader_copy_extent(struct ckptfs *fs, uint64_t ino, const struct cat_extent *ext,
		       uint64_t chunk_off, size_t len, char *out)
{
	struct reader_pin pin = { .slot = READER_PIN_NONE };
	int rc;
	const char *data = reader_pin_extent(fs, ino, ext, chunk_off, &pin, &rc);
	if (!data)
		return rc;
	memcpy(out, data + chunk_off, len);
	chunk_cache_release(fs->chunks, &pin);
	return 0;
}

/* ---- readahead ---- */

static void *chunk_cache_prefetch_main(void *p)
{
	struct chunk_cache *cc = p;
	pthread_mutex_lock(&cc->lock);
	while (!cc->stopping) {
		if (cc->q_len == 0) {
			pthread_cond_wait(&cc->work, &cc->lock);
			continue;
		}
		struct cat_extent ext = cc->queue[cc->q_head];
		cc->q_head = (cc->q_head + 1) % READER_PREFETCH_QUEUE;
		cc->q_len--;
		pthread_mutex_unlock(&cc->lock);
		struct reader_pin pin = { .slot = READER_PIN_NONE };
		int rc;
		if (chunk_cache_get(cc->fs, &ext, &pin, true, &rc))
			chunk_cache_release(cc, &pin); /* stays cached, unpinned, `ahead` */
		pthread_mutex_lock(&cc->lock);
	}
	pthread_mutex_unlock(&cc->lock);
	return NULL;
}

/* Asks for ext's chunk to be decoded into the cache in the background; a
 * no-op if it is there, being loaded, queued, or the queue is full. */
static void chunk_cache_prefetch(struct ckptfs *fs, const struct cat_extent *ext)
{
	struct chunk_cache *cc = fs->chunks;
	pthread_mutex_lock(&cc->lock);
	bool known = cc->stopping || cc->q_len == READER_PREFETCH_QUEUE;
	for (int i = 0; i < CHUNK_CACHE_SLOTS && !known; i++) {
		const struct chunk_entry *e = &cc->slot[i];
		known = (e->chunk.plain || e->loading) && memcmp(e->hash, ext->hash, HASH_LEN) == 0;
	}
	for (int i = 0; i < cc->q_len && !known; i++)
		known = memcmp(cc->queue[(cc->q_head + i) % READER_PREFETCH_QUEUE].hash, ext->hash,
			       HASH_LEN) == 0;
	if (!known) {
		cc->fs = fs;
		cc->queue[(cc->q_head + cc->q_len) % READER_PREFETCH_QUEUE] = *ext;
		cc->q_len++;
		while (cc->n_threads < READER_PREFETCH_THREADS &&
		       pthread_create(&cc->thread[cc->n_threads], NULL, chunk_cache_prefetch_main,
				      cc) == 0)
			cc->n_threads++;
		pthread_cond_signal(&cc->work);
	}
	pthread_mutex_unlock(&cc->lock);
}

/* ---- mapping reads onto chunks ---- */

#define READER_BATCH 16
#define READER_AHEAD_DECODED 4 /* chunks past a read decoded into memory */
#define READER_AHEAD 8          /* chunks past a read brought into the disk cache */
#define READER_ZEROS (64u << 10)

static const char reader_zeros[READER_ZEROS]; /* holes */

/* Readahead: the next chunks are decoded and verified while the kernel takes
 * this read; those after them come from BACKING meanwhile. */
static void reader_readahead(struct ckptfs *fs, const struct cat_extent *ext, int n)
{
	for (int j = 0; j < n && j < READER_AHEAD; j++) {
		if (j < READER_AHEAD_DECODED)
			chunk_cache_prefetch(fs, &ext[j]);
		else
			cache_prefetch(fs->cache, ext[j].hash);
	}
}

static void reader_add_piece(struct reader_map *m, const char *data, size_t len)
{
	assert(m->n < READER_MAX_PIECES && len > 0);
	m->iov[m->n].iov_base = (void *)data;
	m->iov[m->n].iov_len = len;
	m->n++;
	m->len += len;
}

int reader_map(struct ckptfs *fs, uint64_t ino, enum reader_source src, uint64_t off, size_t len,
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
			n = src == READER_PENDING ? cat_pending_extents(fs->cat, ino, pos, ext, READER_BATCH)
						  : cat_extents(fs->cat, ino, pos, ext, READER_BATCH);
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
		const char *data = reader_pin_extent(fs, ino, &ext[k], chunk_off, pin, &rc);
		if (!data)
			break;
		reader_add_piece(m, data + chunk_off, take);
		pos += take;
		k++;
	}
	if (rc != 0) {
		reader_unmap(fs, m);
		return rc;
	}
	if (src == READER_COMMITTED)
		reader_readahead(fs, ext + k, n - k);
	return 0;
}

void reader_unmap(struct ckptfs *fs, struct reader_map *m)
{
	for (int i = 0; i < m->n; i++)
		chunk_cache_release(fs->chunks, &m->pin[i]);
	m->n = 0;
	m->len = 0;
}

int reader_read(struct ckptfs *fs, uint64_t ino, enum reader_source src, uint64_t off,
		size_t len, char *out)
{
	while (len > 0) {
		struct reader_map m;
		int rc = reader_map(fs, ino, src, off, len, &m);
		if (rc != 0)
			return rc;
		size_t at = 0;
		for (int i = 0; i < m.n; i++) {
			memcpy(out + at, m.iov[i].iov_base, m.iov[i].iov_len);
			at += m.iov[i].iov_len;
		}
		reader_unmap(fs, &m);
		off += at;
		out += at;
		len -= at;
	}
	return 0;
}
