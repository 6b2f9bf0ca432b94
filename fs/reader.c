/* reader — see reader.h. The cache is a short array searched linearly: it
 * holds a handful of MiB-sized chunks, the ones sequential readers are in. */
#include "reader.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "ckptfs.h"
#include "hash.h"
#include "log.h"

#define CHUNK_CACHE_SLOTS 32
#define READER_PREFETCH_THREADS 2
#define READER_PREFETCH_QUEUE 16

struct chunk_entry {
	uint8_t hash[HASH_LEN];
	char *data;   /* NULL and !loading: free slot */
	bool loading; /* one thread is reading it; others wait on `loaded` */
	size_t len;
	uint32_t users;
	uint64_t last_use;
};

struct chunk_cache {
	pthread_mutex_t lock;
	pthread_cond_t loaded;
	uint64_t budget, bytes, clock, hits, misses;
	struct chunk_entry slot[CHUNK_CACHE_SLOTS];

	/* readahead: chunks decoded ahead of a sequential reader, by threads
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
	pthread_cond_init(&cc->loaded, NULL);
	pthread_cond_init(&cc->work, NULL);
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
	for (int i = 0; i < CHUNK_CACHE_SLOTS; i++)
		free(cc->slot[i].data);
	pthread_cond_destroy(&cc->work);
	pthread_cond_destroy(&cc->loaded);
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

/* With the lock held: frees least recently used idle entries until `need`
 * more bytes fit the budget. Returns a free slot index, or -1. */
static int chunk_cache_make_room(struct chunk_cache *cc, size_t need)
{
	for (;;) {
		int free_slot = -1, victim = -1;
		for (int i = 0; i < CHUNK_CACHE_SLOTS; i++) {
			struct chunk_entry *e = &cc->slot[i];
			if (!e->data && !e->loading) {
				free_slot = i;
				continue;
			}
			if (!e->loading && e->users == 0 &&
			    (victim < 0 || e->last_use < cc->slot[victim].last_use))
				victim = i;
		}
		if (free_slot >= 0 && cc->bytes + need <= cc->budget)
			return free_slot;
		if (victim < 0)
			return -1;
		cc->bytes -= cc->slot[victim].len;
		free(cc->slot[victim].data);
		cc->slot[victim].data = NULL;
	}
}

/* Returns decoded chunk bytes, pinned in the cache (release with
 * chunk_cache_release) or, when the cache is full of busy entries, a private
 * copy (*owned set: the caller frees it). A chunk is read and verified once
 * however many readers (readahead of one file, several files sharing it) ask
 * for it at the same time: the first loads it, the others wait. */
static int chunk_cache_get(struct ckptfs *fs, const struct cat_extent *ext, char **data,
			   int *slot, int *owned)
{
	struct chunk_cache *cc = fs->chunks;
	pthread_mutex_lock(&cc->lock);
	int i;
again:
	for (i = 0; i < CHUNK_CACHE_SLOTS; i++) {
		struct chunk_entry *e = &cc->slot[i];
		if ((e->data || e->loading) && memcmp(e->hash, ext->hash, HASH_LEN) == 0)
			break;
	}
	if (i < CHUNK_CACHE_SLOTS) {
		struct chunk_entry *e = &cc->slot[i];
		if (e->loading) {
			pthread_cond_wait(&cc->loaded, &cc->lock);
			goto again; /* loaded, or failed and gone */
		}
		e->users++;
		e->last_use = ++cc->clock;
		cc->hits++;
		*data = e->data;
		*slot = i;
		*owned = 0;
		pthread_mutex_unlock(&cc->lock);
		return 0;
	}
	cc->misses++;
	i = chunk_cache_make_room(cc, ext->chunk_len);
	if (i >= 0) { /* reserve the slot so that others wait for this load */
		struct chunk_entry *e = &cc->slot[i];
		memcpy(e->hash, ext->hash, HASH_LEN);
		e->loading = true;
		e->len = ext->chunk_len;
		e->users = 1;
		cc->bytes += e->len;
	}
	pthread_mutex_unlock(&cc->lock);

	char *buf = malloc(ext->chunk_len ? ext->chunk_len : 1);
	size_t got = 0;
	int rc = buf ? cache_get(fs->cache, ext->hash, buf, ext->chunk_len, &got) : -ENOMEM;
	if (rc == 0 && got != ext->chunk_len)
		rc = -EIO;

	pthread_mutex_lock(&cc->lock);
	if (i >= 0) {
		struct chunk_entry *e = &cc->slot[i];
		e->loading = false;
		if (rc == 0) {
			e->data = buf;
			e->last_use = ++cc->clock;
		} else {
			cc->bytes -= e->len;
			e->users = 0;
		}
		pthread_cond_broadcast(&cc->loaded);
	}
	pthread_mutex_unlock(&cc->lock);
	if (rc != 0) {
		free(buf);
		return rc;
	}
	*data = buf;
	*slot = i;
	*owned = i < 0;
	return 0;
}

static void chunk_cache_release(struct chunk_cache *cc, int slot, char *data, int owned)
{
	if (owned) {
		free(data);
		return;
	}
	pthread_mutex_lock(&cc->lock);
	cc->slot[slot].users--;
	pthread_mutex_unlock(&cc->lock);
}

int reader_copy_extent(struct ckptfs *fs, uint64_t ino, const struct cat_extent *ext,
		       uint64_t chunk_off, size_t len, char *out)
{
	char *data;
	int slot, owned;
	int rc = chunk_cache_get(fs, ext, &data, &slot, &owned);
	if (rc != 0) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(ext->hash, hex);
		log_error("read inode %llu at offset %llu: chunk %s unreadable: %s",
			  (unsigned long long)ino, (unsigned long long)(ext->off + chunk_off - ext->chunk_off),
			  hex, strerror(-rc));
		return rc == -ENOMEM ? rc : -EIO;
	}
	memcpy(out, data + chunk_off, len);
	chunk_cache_release(fs->chunks, slot, data, owned);
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
		char *data;
		int slot, owned;
		if (chunk_cache_get(cc->fs, &ext, &data, &slot, &owned) == 0)
			chunk_cache_release(cc, slot, data, owned); /* stays cached, unpinned */
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
		known = (e->data || e->loading) && memcmp(e->hash, ext->hash, HASH_LEN) == 0;
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

#define READER_BATCH 16
#define READER_AHEAD_DECODED 2 /* chunks past a read decoded into memory */
#define READER_AHEAD 6          /* chunks past a read brought into the disk cache */

int reader_read(struct ckptfs *fs, uint64_t ino, enum reader_source src, uint64_t off,
		size_t len, char *out)
{
	struct cat_extent ext[READER_BATCH];
	uint64_t pos = off, end = off + len;
	while (pos < end) {
		int n = src == READER_PENDING ? cat_pending_extents(fs->cat, ino, pos, ext, READER_BATCH)
					      : cat_extents(fs->cat, ino, pos, ext, READER_BATCH);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		int i;
		for (i = 0; i < n && pos < end; i++) {
			if (ext[i].off >= end)
				break;
			if (ext[i].off > pos) { /* hole before this extent */
				memset(out + (pos - off), 0, ext[i].off - pos);
				pos = ext[i].off;
			}
			uint64_t ext_end = ext[i].off + ext[i].len;
			uint64_t take = (ext_end < end ? ext_end : end) - pos;
			int rc = reader_copy_extent(fs, ino, &ext[i], ext[i].chunk_off + (pos - ext[i].off),
						    take, out + (pos - off));
			if (rc != 0)
				return rc;
			pos += take;
		}
		/* readahead: the next chunks are decoded and verified while the kernel
		 * takes this read; those after them come from BACKING meanwhile */
		if (src == READER_COMMITTED)
			for (int j = i; j < n && j < i + READER_AHEAD; j++) {
				if (j < i + READER_AHEAD_DECODED)
					chunk_cache_prefetch(fs, &ext[j]);
				else
					cache_prefetch(fs->cache, ext[j].hash);
			}
		if (n < READER_BATCH || i < n)
			break; /* no more extents, or the rest lie past the range */
	}
	if (pos < end)
		memset(out + (pos - off), 0, end - pos);
	return 0;
}
