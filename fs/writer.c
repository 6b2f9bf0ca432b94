/* writer — a file being written; see writer.h for the modes and invariants. */
#define _GNU_SOURCE
#include "writer.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "chunker.h"
#include "ckptfs.h"
#include "hash.h"
#include "log.h"
#include "recent.h"
#include "reader.h"
#include "safeopen.h"
#include "storeq.h"
#include "uploader.h"
#include "zipcut.h"

#define WRITER_BUF_MIN (64u << 10)
#define WRITER_IO_BLOCK (1u << 20)
#define WRITER_SYNC_EACH_MAX 8 /* more unsynced chunks than this: syncfs */
/* recent.h R5: how long a writer waits for the chunk another writer of the
 * same bytes is chunking, instead of chunking and hashing them as well */
#define WRITER_FOLLOW_WAIT_MS 50
#define WRITER_AWAITS 8 /* flights of other writers' stores one writer waits for at most */
#define WRITER_ROOM_RETRIES 16 /* local writes retried after an ENOSPC, each after room was made */

struct writer {
	struct ckptfs *fs;
	uint64_t ino;
	uint64_t size;
	int64_t mtime_ns;
	bool dirty;
	bool staging;
	int err; /* first data-path error, returned from then on */

	/* stream: file = pending [0, stream_base) + buf[buf_off, buf_off+buf_len) + holes */
	uint64_t stream_base;
	uint8_t *buf;
	size_t buf_off, buf_len, buf_cap, scanned; /* scanned counts from buf_off */
	struct chunker ck;
	struct zipcut zc; /* forced cuts around torch.save's tensor records */

	/* Replicas written at once (recent.h R4/R5). Following: the chunk that
	 * starts at stream_base is predicted to be pred's; its first `matched`
	 * bytes were compared equal to pred's copy and live only there (buf is
	 * empty, the chunker untouched at the chunk's start). */
	struct recent_cursor cur; /* the chunk emitted last, in recent's chains */
	struct recent_pred pred;  /* pinned while following */
	bool following;
	size_t matched;
	bool led; /* this chunk is chunked here: recent_follow said so, or pred failed */

	/* flights of chunks other writers are storing for this one (see
	 * writer_store) */
	struct {
		int slot;
		uint64_t gen;
	} await[WRITER_AWAITS];
	size_t n_await;

	/* chunks written since the last durable commit */
	uint8_t (*unsynced)[HASH_LEN];
	size_t n_unsynced, cap_unsynced;

	int staging_fd;
};

static int writer_awaits_reap(struct writer *w, bool wait);

static int64_t writer_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int writer_fail(struct writer *w, int rc, const char *what)
{
	if (!w->err) {
		w->err = rc;
		log_error("inode %llu: %s failed: %s; the file's writes fail until it is reopened",
			  (unsigned long long)w->ino, what, strerror(-rc));
	}
	return rc;
}

int writer_new(struct ckptfs *fs, uint64_t ino, uint64_t size, struct writer **out)
{
	struct writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fs = fs;
	w->ino = ino;
	w->size = size;
	w->mtime_ns = writer_now_ns();
	w->staging_fd = -1;
	w->cur = RECENT_CURSOR_NONE;
	w->pred.slot = -1;
	int rc = chunker_init(&w->ck, &fs->chunking);
	if (rc == 0)
		rc = cat_pending_from_committed(fs->cat, ino);
	if (rc == 0) {
		struct cat_extent e;
		int n = cat_pending_extents(fs->cat, ino, 0, &e, 1);
		if (n < 0)
			rc = n;
		/* an existing file is appended at its end; a file of holes from 0 */
		w->stream_base = n > 0 ? size : 0;
		zipcut_init(&w->zc, ZIPCUT_MIN_RECORD);
		w->zc.active = w->stream_base == 0;
	}
	if (rc != 0) {
		cat_pending_drop(fs->cat, ino);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void writer_free(struct writer *w)
{
	if (!w)
		return;
	/* own flights still storing (behind) record chunks that pending
	 * references: they land before the references go */
	writer_awaits_reap(w, true);
	int rc = cat_pending_drop(w->fs->cat, w->ino);
	if (rc != 0)
		log_error("inode %llu: dropping the writer's pending extents failed: %s",
			  (unsigned long long)w->ino, strerror(-rc));
	if (w->staging_fd >= 0)
		close(w->staging_fd);
	if (w->following)
		recent_unpin(w->fs->recent, &w->pred);
	recent_chain_drop(w->fs->recent, &w->cur);
	free(w->buf);
	free(w->unsynced);
	free(w);
}

uint64_t writer_size(const struct writer *w) { return w->size; }
bool writer_dirty(const struct writer *w) { return w->dirty; }

int64_t writer_mtime_ns(const struct writer *w) { return w->mtime_ns; }

void writer_set_mtime_ns(struct writer *w, int64_t mtime_ns)
{
	w->mtime_ns = mtime_ns;
	w->dirty = true;
}

void writer_touch(struct writer *w)
{
	w->dirty = true;
	w->mtime_ns = writer_now_ns();
}

/* ---- stream: chunks out of the buffer ---- */

static int writer_grow(struct writer *w, size_t need);

static int writer_note_unsynced(struct writer *w, const uint8_t hash[HASH_LEN])
{
	if (w->n_unsynced == w->cap_unsynced) {
		size_t cap = w->cap_unsynced ? w->cap_unsynced * 2 : 16;
		void *p = realloc(w->unsynced, cap * HASH_LEN);
		if (!p)
			return -ENOMEM;
		w->unsynced = p;
		w->cap_unsynced = cap;
	}
	memcpy(w->unsynced[w->n_unsynced++], hash, HASH_LEN);
	return 0;
}

static bool writer_all_zero(const uint8_t *p, size_t len)
{
	return len == 0 || (p[0] == 0 && p[len - 1] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

/* ---- storing a chunk once (flights) ----
 *
 * cat_pending_add tells every writer whose reference comes before the
 * object is recorded (cat_chunk_stored) to store it. Replicas written at
 * once reach a chunk within a millisecond of each other: 8 writers wrote the
 * same object 8 times, and each rename of one over another made the kernel
 * free (and discard) the replaced copy under the filesystem's rename lock,
 * stalling every store. A flight is a chunk being stored and recorded now;
 * a second writer of it does not store it again: it keeps a reference on the
 * flight (an await) and goes on. Its pending extent names a chunk that is
 * not yet recorded as stored, so before anything reads the writer's pending
 * chunks or commits them (writer_read, staging, writer_commit) the writer
 * waits for its flights to land; a failed flight fails the writer, like a
 * failed store of its own. Awaits are reaped without waiting at every chunk.
 * Without a free flight slot (or await), a writer just stores.
 *
 * A flight that landed keeps its hash (until its slot is taken again) and
 * when it landed: a writer told "store it" whose chunk landed after that
 * answer does not store it again (writer_flight_join). The landing came
 * after the chunk was recorded, and the lander's own pending reference held
 * the chunk until then, so if it had been recorded before the answer, the
 * answer would have been "stored"; it was recorded after, while the asking
 * writer's reference already held it. Without this, a writer a moment late
 * wrote the object again and renamed it over the first one. */

#define WRITER_FLIGHTS 128 /* > FUSE's worker threads + their awaits */

struct writer_flight {
	uint8_t hash[HASH_LEN];
	bool busy;
	int rc;
	int waiters;
	uint64_t gen;
	uint64_t landed; /* writer_flights.lands when it landed with rc 0; else 0 */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t landed;
	uint64_t gen;
	uint64_t lands; /* flights landed so far */
	int next;       /* where a free slot is looked for first: landed ones last long */
	struct writer_flight f[WRITER_FLIGHTS];
} writer_flights = { .lock = PTHREAD_MUTEX_INITIALIZER, .landed = PTHREAD_COND_INITIALIZER };

enum writer_join {
	WRITER_JOIN_STORE,  /* this writer stores it (its own flight, if a slot was free) */
	WRITER_JOIN_AWAIT,  /* another writer is storing it: awaited */
	WRITER_JOIN_STORED, /* it landed after the caller was told to store it */
};

/* Landings so far: read after cat_pending_add says "store it". */
static uint64_t writer_flights_lands(void)
{
	pthread_mutex_lock(&writer_flights.lock);
	uint64_t n = writer_flights.lands;
	pthread_mutex_unlock(&writer_flights.lock);
	return n;
}

/* The flight of hash, for a writer told to store it when `since` landings
 * had happened. STORE: *slot is its new flight and *gen its generation, or
 * *slot is -1 if none was free. AWAIT: a reference on another writer's
 * flight in *slot and *gen. STORED: nothing to do. */
static enum writer_join writer_flight_join(const uint8_t hash[HASH_LEN], uint64_t since, int *slot,
					   uint64_t *gen)
{
	pthread_mutex_lock(&writer_flights.lock);
	int free_slot = -1, found = -1;
	bool stored = false;
	for (int k = 0; k < WRITER_FLIGHTS; k++) {
		int i = (writer_flights.next + k) % WRITER_FLIGHTS;
		struct writer_flight *f = &writer_flights.f[i];
		if (memcmp(f->hash, hash, HASH_LEN) == 0) {
			if (f->busy) {
				found = i;
				break;
			}
			stored |= f->landed > since;
		}
		if (!f->busy && f->waiters == 0 && free_slot < 0)
			free_slot = i;
	}
	enum writer_join how = WRITER_JOIN_STORE;
	if (found >= 0) {
		struct writer_flight *f = &writer_flights.f[found];
		f->waiters++; /* the slot and its result stay until released */
		*gen = f->gen;
		free_slot = found;
		how = WRITER_JOIN_AWAIT;
	} else if (stored) {
		free_slot = -1;
		how = WRITER_JOIN_STORED;
	} else if (free_slot >= 0) {
		struct writer_flight *f = &writer_flights.f[free_slot];
		memcpy(f->hash, hash, HASH_LEN);
		f->busy = true;
		f->landed = 0;
		f->gen = ++writer_flights.gen;
		*gen = f->gen;
		writer_flights.next = (free_slot + 1) % WRITER_FLIGHTS;
	}
	pthread_mutex_unlock(&writer_flights.lock);
	*slot = free_slot;
	return how;
}

/* A reference on the caller's own flight (store-behind: the writer awaits
 * it like another writer's), or its end when the queue refused the job. */
static void writer_flight_hold(int slot, int delta)
{
	pthread_mutex_lock(&writer_flights.lock);
	writer_flights.f[slot].waiters += delta;
	pthread_mutex_unlock(&writer_flights.lock);
}

static void writer_flight_land(int slot, int rc)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&writer_flights.lock);
	writer_flights.f[slot].busy = false;
	writer_flights.f[slot].rc = rc;
	writer_flights.f[slot].landed = rc == 0 ? ++writer_flights.lands : 0;
	pthread_cond_broadcast(&writer_flights.landed);
	pthread_mutex_unlock(&writer_flights.lock);
}

/* The writer now awaits flight (slot, gen), on which it holds a reference;
 * writer_store reaped one first if all WRITER_AWAITS were taken. */
static void writer_await_add(struct writer *w, int slot, uint64_t gen)
{
	assert(w->n_await < WRITER_AWAITS);
	w->await[w->n_await].slot = slot;
	w->await[w->n_await].gen = gen;
	w->n_await++;
}

/* Ends the writer's awaits whose flights landed (all of them with wait,
 * waiting as needed). Returns the first failure of a landed flight. */
static int writer_awaits_reap(struct writer *w, bool wait)
{
	int rc = 0;
	if (w->n_await == 0)
		return 0;
	pthread_mutex_lock(&writer_flights.lock);
	size_t kept = 0;
	for (size_t i = 0; i < w->n_await; i++) {
		struct writer_flight *f = &writer_flights.f[w->await[i].slot];
		assert(f->gen == w->await[i].gen); /* our reference keeps the slot */
		while (wait && f->busy)
			pthread_cond_wait(&writer_flights.landed, &writer_flights.lock);
		if (f->busy) {
			w->await[kept++] = w->await[i];
			continue;
		}
		if (f->rc != 0 && rc == 0)
			rc = f->rc;
		f->waiters--;
	}
	w->n_await = kept;
	pthread_mutex_unlock(&writer_flights.lock);
	return rc;
}

/* For readers of the writer's pending chunks (under the node's read lock:
 * w is not changed): waits until every flight it awaits has landed. */
static void writer_awaits_wait(const struct writer *w)
{
	if (w->n_await == 0)
		return;
	pthread_mutex_lock(&writer_flights.lock);
	for (size_t i = 0; i < w->n_await; i++)
		while (writer_flights.f[w->await[i].slot].busy)
			pthread_cond_wait(&writer_flights.landed, &writer_flights.lock);
	pthread_mutex_unlock(&writer_flights.lock);
}

/* Writes the object of a chunk and records it as stored; image: see
 * writer_record. Runs on a FUSE thread, or on a storeq thread (behind). The
 * cache's backpressure (cache_dirty_wait) is the writer's, before: a job
 * never waits for uploads, so that storeq_stop cannot wait for BACKING. */
static int writer_put(struct ckptfs *fs, const uint8_t hash[HASH_LEN], const uint8_t *data,
		      size_t len, uint8_t *image)
{
	struct store_object_info info;
	int rc = -ENOSPC;
	/* a full disk: evict clean chunks and try again (cache.h C6); the
	 * bytes are still the caller's, so a retry writes the same object */
	for (int i = 0; (rc == -ENOSPC || rc == -EDQUOT) && i <= WRITER_ROOM_RETRIES; i++) {
		if (i > 0 && cache_make_room(fs->cache, len) != 0)
			break;
		rc = image ? store_put_headroom(fs->store, hash, image, len, 0, &info)
			   : store_put(fs->store, hash, data, len, 0, &info);
	}
	if (rc == 0)
		rc = cat_chunk_stored(fs->cat, hash, info.codec, info.stored_len);
	if (rc == 0) {
		cache_dirty_add(fs->cache, info.stored_len);
		/* a chunk of a deferred transaction (small files of an open
		 * generation) is not listed before its commit: the uploader
		 * finds it at its next round, in a larger batch */
		if (!cat_defer_active(fs->cat))
			uploader_kick(fs->uploader);
	}
	return rc;
}

/* ---- store-behind (storeq.h) ----
 *
 * A chunk whose bytes sit in recent's copy can be stored from there after
 * the FUSE request that cut it has been answered: the job takes its own pin
 * on the copy, so nothing the writer does next can change the bytes, and
 * lands the writer's flight when the object is recorded. The writer awaits
 * its own flight exactly like one another writer stores for it (see
 * flights above): before anything reads, truncates, commits or drops its
 * pending chunks, it waits, and a failed store fails the writer. */
struct writer_job {
	struct storeq_job q; /* first: the queue's pointer is the job's */
	struct ckptfs *fs;
	uint8_t hash[HASH_LEN];
	size_t len;
	struct recent_pred pin;
	int slot;
};

static void writer_job_run(struct storeq_job *qj)
{
	struct writer_job *j = (struct writer_job *)qj;
	int rc = writer_put(j->fs, j->hash, j->pin.copy, j->len, j->pin.image);
	recent_unpin(j->fs->recent, &j->pin);
	writer_flight_land(j->slot, rc);
	free(j);
}

/* true: the chunk is being stored behind, as the writer's own flight (slot,
 * gen), which it now awaits; false: the caller stores it. */
static bool writer_store_behind(struct writer *w, const uint8_t hash[HASH_LEN], size_t len,
				const struct recent_pred *pin, int slot, uint64_t gen)
{
	if (!w->fs->storeq || !pin || slot < 0 || w->n_await == WRITER_AWAITS)
		return false;
	struct writer_job *j = malloc(sizeof(*j));
	if (!j)
		return false;
	if (!recent_pin_again(w->fs->recent, pin, &j->pin)) {
		free(j);
		return false;
	}
	j->q.run = writer_job_run;
	j->fs = w->fs;
	memcpy(j->hash, hash, HASH_LEN);
	j->len = len;
	j->slot = slot;
	writer_flight_hold(slot, +1); /* before the job can land it */
	if (!storeq_try_submit(w->fs->storeq, &j->q)) {
		writer_flight_hold(slot, -1);
		recent_unpin(w->fs->recent, &j->pin);
		free(j);
		return false;
	}
	writer_await_add(w, slot, gen);
	return true;
}

/* Stores a chunk the catalog said must be stored when `since` flights had
 * landed: joins another writer's flight of it, finds it landed since, hands
 * it to storeq, or writes it here (pin: see writer_record). */
static int writer_store(struct writer *w, const uint8_t hash[HASH_LEN], const uint8_t *data,
			size_t len, const struct recent_pred *pin, uint64_t since)
{
	int slot;
	uint64_t gen = 0;
	int rc = writer_awaits_reap(w, w->n_await == WRITER_AWAITS);
	if (rc != 0)
		return rc;
	switch (writer_flight_join(hash, since, &slot, &gen)) {
	case WRITER_JOIN_AWAIT: /* another writer stores it now */
		writer_await_add(w, slot, gen);
		return 0;
	case WRITER_JOIN_STORED:
		return 0;
	case WRITER_JOIN_STORE:
		break;
	}
	rc = cache_dirty_wait(w->fs->cache, len); /* backpressure: fails only when nothing moves */
	if (rc != 0) {
		writer_flight_land(slot, rc);
		return rc;
	}
	if (writer_store_behind(w, hash, len, pin, slot, gen))
		return 0;
	rc = writer_put(w->fs, hash, data, len, pin ? pin->image : NULL);
	writer_flight_land(slot, rc);
	return rc;
}

/* Adds a chunk whose hash is known (the SHA-256 of data[0..ext->len)) to
 * pending, and stores its object if the catalog says it must be. pin: the
 * chunk's bytes pinned in recent's copy (data == pin->copy), which the
 * object can be written from without a copy, and behind the writer; or
 * NULL. */
static int writer_record(struct writer *w, struct cat_extent *ext, const uint8_t *data,
			 const struct recent_pred *pin)
{
	bool must_store;
	int rc = cat_pending_add(w->fs->cat, w->ino, ext, &must_store);
	if (rc != 0)
		return writer_fail(w, rc, "recording a chunk");
	if (must_store) {
		rc = writer_store(w, ext->hash, data, ext->len, pin, writer_flights_lands());
		if (rc != 0)
			return writer_fail(w, rc, "storing a chunk");
	}
	rc = writer_note_unsynced(w, ext->hash);
	return rc ? writer_fail(w, rc, "tracking a chunk") : 0;
}

/* Stores one chunk of the stream at file offset off and adds it to pending;
 * end says how it ended (recent.h R4). The next chunk starts after it. */
static int writer_emit(struct writer *w, const uint8_t *data, size_t len, uint64_t off,
		       enum recent_end end)
{
	w->led = false;
	if (writer_all_zero(data, len)) {
		recent_chain_drop(w->fs->recent, &w->cur);
		return 0; /* a hole: reads as zeros, stores nothing */
	}
	struct cat_extent ext = { .off = off, .len = len, .chunk_off = 0, .chunk_len = len };
	struct recent_ticket ticket;
	if (!recent_lookup(w->fs->recent, data, len, ext.hash, &ticket)) { /* replicas: R1 */
		hash_sha256(data, len, ext.hash);
		recent_publish(w->fs->recent, &ticket, data, len, ext.hash);
	}
	recent_chain(w->fs->recent, &w->cur, &ticket, end);
	struct recent_pred copy; /* recent's copy of these bytes: stored without another copy */
	if (!recent_pin(w->fs->recent, &ticket, &copy))
		return writer_record(w, &ext, data, NULL);
	int rc = writer_record(w, &ext, copy.copy, &copy);
	recent_unpin(w->fs->recent, &copy);
	return rc;
}

/* ---- following another writer of the same bytes (recent.h R4/R5) ---- */

/* May the chunk starting at stream_base be predicted? Only at a chunk start
 * (the chunker reset), in the stream, in a chain, with no zip cut that could
 * end the chunk where the prediction's chunker did not. */
static bool writer_may_follow(const struct writer *w)
{
	return w->fs->recent && !w->staging && !w->following && !w->led && w->scanned == 0 &&
	       w->cur.slot >= 0 && !w->zc.active && w->zc.ncut == 0;
}

/* The chunk being followed is pred's: all pred.len bytes compared equal, and
 * pred's chunker cut there from a chunk start, so ours would too (chunker.h
 * invariant 1) — no zip cut can intervene (writer_may_follow). Records it
 * under pred's hash: the SHA-256 of these bytes. */
static int writer_adopt(struct writer *w)
{
	size_t len = w->pred.len;
	struct cat_extent ext = { .off = w->stream_base, .len = len, .chunk_off = 0, .chunk_len = len };
	memcpy(ext.hash, w->pred.hash, HASH_LEN);
	int rc = writer_record(w, &ext, w->pred.copy, &w->pred); /* pinned until adopted */
	recent_adopt(w->fs->recent, &w->cur, &w->pred);
	w->following = false;
	w->matched = 0;
	w->led = false;
	w->stream_base += len;
	return rc;
}

/* Stops following: the bytes matched so far move into the (empty) buffer and
 * the chunker will scan the chunk from its start, as if never predicted. */
static int writer_unfollow(struct writer *w)
{
	if (!w->following)
		return 0;
	assert(w->buf_len == 0 && w->scanned == 0);
	w->buf_off = 0;
	int rc = writer_grow(w, w->matched ? w->matched : 1);
	if (rc == 0) {
		memcpy(w->buf, w->pred.copy, w->matched);
		w->buf_len = w->matched;
	}
	recent_unpin(w->fs->recent, &w->pred);
	w->following = false;
	w->matched = 0;
	w->led = true;
	return rc ? writer_fail(w, rc, "growing the write buffer") : 0;
}

/* At a chunk start: asks recent for a prediction (waiting a little if
 * another writer is chunking it). true: following, with the buffered bytes
 * (if any) compared and taken over. */
static bool writer_follow_start(struct writer *w)
{
	if (!writer_may_follow(w))
		return false;
	if (!recent_follow(w->fs->recent, &w->cur, WRITER_FOLLOW_WAIT_MS, &w->pred)) {
		w->led = true; /* and the claim is ours (R5) */
		return false;
	}
	size_t k = w->buf_len < w->pred.len ? w->buf_len : w->pred.len;
	if (k && memcmp(w->buf + w->buf_off, w->pred.copy, k) != 0) {
		recent_unpin(w->fs->recent, &w->pred);
		w->led = true;
		return false;
	}
	w->following = true;
	w->matched = k; /* these bytes now live in pred's copy */
	w->buf_off += k;
	w->buf_len -= k;
	if (w->buf_len == 0)
		w->buf_off = 0;
	return true;
}

/* Following: compares the next of len arriving bytes with pred's; *used
 * says how many were taken. Adopts the chunk when all of it matched. */
static int writer_follow_feed(struct writer *w, const uint8_t *data, size_t len, size_t *used)
{
	size_t k = w->pred.len - w->matched;
	if (k > len)
		k = len;
	*used = 0;
	if (memcmp(w->pred.copy + w->matched, data, k) != 0)
		return writer_unfollow(w); /* the caller buffers the bytes instead */
	w->matched += k;
	*used = k;
	return w->matched == w->pred.len ? writer_adopt(w) : 0;
}

/* Runs the chunker over the unscanned buffer, emitting every complete chunk:
 * at the chunker's boundaries and at zipcut's forced cuts. */
static int writer_scan(struct writer *w)
{
	while (w->scanned < w->buf_len) {
		if (writer_follow_start(w)) { /* R4: another writer's chunk, maybe */
			if (w->matched == w->pred.len) { /* all of it was buffered */
				int rc = writer_adopt(w);
				if (rc != 0)
					return rc;
			}
			continue;
		}
		uint8_t *start = w->buf + w->buf_off;
		uint64_t pos = w->stream_base + w->scanned;
		bool cut, boundary = false;
		uint64_t stop = zipcut_next_stop(&w->zc, start, w->stream_base, w->buf_len, pos, &cut);
		if (stop == pos && !cut)
			break; /* a zip header, or a record's size, is not all here yet */
		size_t room = w->buf_len - w->scanned;
		if (stop - pos < room)
			room = (size_t)(stop - pos);
		if (room)
			w->scanned += chunker_scan(&w->ck, start + w->scanned, room, &boundary);
		bool cut_here = false;
		if (!boundary && cut && w->stream_base + w->scanned == stop) {
			boundary = cut_here = true;
			chunker_reset(&w->ck);
		}
		if (!boundary) {
			if (w->stream_base + w->scanned == stop)
				continue; /* at a zip header: parse it */
			break;
		}
		size_t len = w->scanned;
		int rc = writer_emit(w, start, len, w->stream_base,
				     cut_here ? RECENT_END_OTHER : RECENT_END_CHUNKER);
		if (rc != 0)
			return rc;
		w->buf_off += len; /* no copy: the next chunk starts where this one ended */
		w->buf_len -= len;
		w->stream_base += len;
		w->scanned = 0;
		if (w->buf_len == 0)
			w->buf_off = 0;
	}
	return 0;
}

/* Emits the buffer as a final chunk (a forced boundary). */
static int writer_cut(struct writer *w)
{
	int rc = writer_unfollow(w);
	if (rc == 0 && w->buf_len)
		rc = writer_emit(w, w->buf + w->buf_off, w->buf_len, w->stream_base,
				 RECENT_END_OTHER);
	if (rc == 0) {
		w->stream_base += w->buf_len;
		w->buf_off = w->buf_len = w->scanned = 0;
		chunker_reset(&w->ck);
	}
	return rc;
}

static int writer_grow(struct writer *w, size_t need)
{
	if (w->buf_cap >= need)
		return 0;
	size_t cap = w->buf_cap ? w->buf_cap : WRITER_BUF_MIN;
	while (cap < need)
		cap *= 2;
	uint8_t *nb = realloc(w->buf, cap);
	if (!nb)
		return -ENOMEM;
	w->buf = nb;
	w->buf_cap = cap;
	return 0;
}

/* Appends at the stream end. The buffer never holds more than one maximal
 * chunk plus one block: the chunker cuts at max_size at the latest. */
static int writer_append(struct writer *w, const uint8_t *data, size_t len)
{
	size_t limit = w->fs->chunking.max_size + 2 * WRITER_IO_BLOCK;
	while (len) {
		if (w->following || (w->buf_len == 0 && writer_follow_start(w))) {
			/* R4: compared where they arrived, not copied */
			size_t used;
			int rc = writer_follow_feed(w, data, len, &used);
			if (rc != 0)
				return rc;
			data += used;
			len -= used;
			continue;
		}
		size_t n = len < WRITER_IO_BLOCK ? len : WRITER_IO_BLOCK;
		if (w->buf_off && w->buf_off + w->buf_len + n > w->buf_cap) {
			/* compact rarely: once per buffer's worth of chunks */
			memmove(w->buf, w->buf + w->buf_off, w->buf_len);
			w->buf_off = 0;
		}
		size_t need = w->buf_off + w->buf_len + n;
		int rc = writer_grow(w, need <= limit ? need : limit);
		if (rc != 0)
			return writer_fail(w, rc, "growing the write buffer");
		if (n > w->buf_cap - w->buf_off - w->buf_len)
			n = w->buf_cap - w->buf_off - w->buf_len;
		memcpy(w->buf + w->buf_off + w->buf_len, data, n);
		w->buf_len += n;
		data += n;
		len -= n;
		rc = writer_scan(w);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- staging ---- */

static int writer_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf = (const char *)buf + n;
		len -= n;
		off += n;
	}
	return 0;
}

/* A staging write waits while the cache's disk is short of room (it takes
 * the same disk as chunks); one that still meets a full disk evicts clean
 * chunks and is retried (cache.h C6) before it fails. */
static int writer_pwrite_room(struct writer *w, const void *buf, size_t len, uint64_t off)
{
	int rc = cache_disk_wait(w->fs->cache, len);
	if (rc == 0)
		rc = writer_pwrite_all(w->staging_fd, buf, len, off);
	for (int i = 0; (rc == -ENOSPC || rc == -EDQUOT) && i < WRITER_ROOM_RETRIES; i++) {
		if (cache_make_room(w->fs->cache, len) != 0)
			break;
		rc = writer_pwrite_all(w->staging_fd, buf, len, off);
	}
	return rc;
}

/* An anonymous file in CACHE/staging (shared invariant 7: the directory is
 * opened without following a symlink, and a named fallback is unguessable
 * and exclusive). */
static int writer_open_staging(struct writer *w)
{
	int dfd = open(w->fs->staging_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		char head[64], name[96];
		snprintf(head, sizeof(head), "ino-%llu-", (unsigned long long)w->ino);
		int rc = safe_tmpname(name, sizeof(name), head);
		fd = rc == 0 ? openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)
			     : -1;
		if (fd >= 0)
			unlinkat(dfd, name, 0); /* private: gone with the process */
		else if (rc != 0)
			errno = -rc;
	}
	int err = errno;
	close(dfd);
	if (fd < 0)
		return -err;
	w->staging_fd = fd;
	return 0;
}

/* Copies the pending extents of the stream into the staging file. */
static int writer_copy_pending(struct writer *w)
{
	struct cat_extent ext[16];
	uint64_t pos = 0;
	uint8_t *tmp = malloc(w->fs->chunking.max_size);
	if (!tmp)
		return -ENOMEM;
	int rc = 0, n;
	while (rc == 0 && (n = cat_pending_extents(w->fs->cat, w->ino, pos, ext, 16)) > 0) {
		for (int i = 0; i < n && rc == 0; i++) {
			rc = reader_copy_extent(w->fs->reader, w->ino, &ext[i], ext[i].chunk_off,
						ext[i].len, (char *)tmp);
			if (rc == 0)
				rc = writer_pwrite_room(w, tmp, ext[i].len, ext[i].off);
			pos = ext[i].off + ext[i].len;
		}
		if (n < 16)
			break;
	}
	if (rc == 0 && n < 0)
		rc = n;
	free(tmp);
	return rc;
}

/* STREAM → STAGING: the bytes so far move into a sparse local file. */
static int writer_to_staging(struct writer *w)
{
	assert(!w->staging);
	int rc = writer_unfollow(w);
	if (rc == 0)
		rc = writer_awaits_reap(w, true); /* pending chunks are read below */
	if (rc != 0)
		return writer_fail(w, rc, "storing a chunk");
	recent_chain_drop(w->fs->recent, &w->cur);
	rc = writer_open_staging(w);
	if (rc == 0 && ftruncate(w->staging_fd, (off_t)w->size) != 0)
		rc = -errno;
	if (rc == 0)
		rc = writer_copy_pending(w);
	if (rc == 0 && w->buf_len)
		rc = writer_pwrite_room(w, w->buf + w->buf_off, w->buf_len, w->stream_base);
	if (rc == 0)
		rc = cat_pending_drop(w->fs->cat, w->ino);
	if (rc != 0)
		return writer_fail(w, rc, "moving the file to a staging file for out-of-order writes");
	w->staging = true;
	w->buf_off = w->buf_len = w->scanned = 0;
	w->led = false;
	chunker_reset(&w->ck);
	log_debug("inode %llu: out-of-order write, now staged locally", (unsigned long long)w->ino);
	return 0;
}

/* Re-chunks the staging file's data regions into fresh pending extents. */
static int writer_rechunk(struct writer *w)
{
	int rc = cat_pending_drop(w->fs->cat, w->ino);
	if (rc != 0)
		return writer_fail(w, rc, "dropping old pending extents");
	w->n_unsynced = 0; /* every chunk the file keeps is noted again below */
	uint8_t *block = malloc(WRITER_IO_BLOCK);
	if (!block)
		return -ENOMEM;
	uint64_t pos = 0;
	while (rc == 0 && pos < w->size) {
		off_t data = lseek(w->staging_fd, (off_t)pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* only holes remain */
		if (data < 0)
			data = (off_t)pos; /* no SEEK_DATA here: treat all as data */
		off_t hole = lseek(w->staging_fd, data, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > w->size)
			hole = (off_t)w->size;
		w->stream_base = (uint64_t)data;
		w->buf_off = w->buf_len = w->scanned = 0;
		chunker_reset(&w->ck);
		zipcut_init(&w->zc, ZIPCUT_MIN_RECORD);
		w->zc.active = data == 0;
		for (uint64_t at = (uint64_t)data; rc == 0 && at < (uint64_t)hole;) {
			size_t want = (uint64_t)hole - at < WRITER_IO_BLOCK ? (size_t)((uint64_t)hole - at)
									     : WRITER_IO_BLOCK;
			ssize_t n = pread(w->staging_fd, block, want, (off_t)at);
			if (n <= 0) {
				rc = n < 0 ? -errno : -EIO;
				break;
			}
			rc = writer_append(w, block, (size_t)n);
			at += (uint64_t)n;
		}
		if (rc == 0)
			rc = writer_cut(w);
		pos = (uint64_t)hole;
	}
	free(block);
	return rc ? writer_fail(w, rc, "chunking the staging file") : 0;
}

/* ---- public ---- */

int writer_write(struct writer *w, const char *buf, size_t len, uint64_t off)
{
	if (w->err)
		return w->err;
	int rc = 0;
	if (!w->staging) {
		uint64_t stream_end = w->stream_base + w->matched + w->buf_len;
		if (off > stream_end) { /* a gap: it stays a hole */
			rc = writer_cut(w);
			w->stream_base = off;
			w->zc.active = false;
		} else if (off < stream_end) {
			rc = writer_to_staging(w);
		}
		if (rc != 0)
			return rc;
	}
	if (w->staging) {
		rc = writer_pwrite_room(w, buf, len, off);
		if (rc != 0)
			return writer_fail(w, rc, "writing the staging file");
	} else {
		rc = writer_append(w, (const uint8_t *)buf, len);
		if (rc != 0)
			return rc;
	}
	if (off + len > w->size)
		w->size = off + len;
	writer_touch(w);
	return 0;
}

int writer_truncate(struct writer *w, uint64_t new_size)
{
	if (w->err)
		return w->err;
	int rc = writer_unfollow(w); /* the stream's bytes back in the buffer */
	if (rc != 0)
		return rc;
	if (!w->staging && new_size < w->stream_base + w->buf_len) {
		recent_chain_drop(w->fs->recent, &w->cur);
		w->led = false;
	}
	if (w->staging) {
		if (ftruncate(w->staging_fd, (off_t)new_size) != 0)
			return writer_fail(w, -errno, "truncating the staging file");
	} else if (new_size < w->stream_base) {
		rc = writer_awaits_reap(w, true); /* chunks recorded before cut */
		if (rc != 0)
			return writer_fail(w, rc, "storing a chunk");
		rc = cat_pending_truncate(w->fs->cat, w->ino, new_size);
		if (rc != 0)
			return writer_fail(w, rc, "truncating pending extents");
		w->stream_base = new_size;
		w->buf_off = w->buf_len = w->scanned = 0;
		chunker_reset(&w->ck);
		zipcut_init(&w->zc, ZIPCUT_MIN_RECORD);
		w->zc.active = new_size == 0; /* a rewrite from the start */
	} else if (new_size < w->stream_base + w->buf_len) {
		w->buf_len = new_size - w->stream_base;
		w->scanned = 0; /* re-scan what is left from the chunk's start */
		chunker_reset(&w->ck);
		zipcut_init(&w->zc, ZIPCUT_MIN_RECORD);
		w->zc.active = new_size == 0;
	}
	w->size = new_size;
	writer_touch(w);
	return 0;
}

int writer_read(struct writer *w, char *out, size_t len, uint64_t off, size_t *got)
{
	*got = 0;
	if (off >= w->size)
		return 0;
	if (len > w->size - off)
		len = w->size - off;
	if (w->staging) {
		size_t done = 0;
		while (done < len) {
			ssize_t n = pread(w->staging_fd, out + done, len - done, (off_t)(off + done));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return -errno;
			if (n == 0) { /* past the staging file's end: zeros */
				memset(out + done, 0, len - done);
				break;
			}
			done += n;
		}
		*got = len;
		return 0;
	}
	uint64_t end = off + len, pos = off;
	if (pos < w->stream_base) { /* from chunks already cut */
		uint64_t to = end < w->stream_base ? end : w->stream_base;
		writer_awaits_wait(w); /* their objects are all written */
		int rc = reader_read(w->fs->reader, w->ino, READER_PENDING, pos, to - pos, out);
		if (rc != 0)
			return rc;
		pos = to;
	}
	uint64_t pred_end = w->stream_base + w->matched; /* following: pred's copy (R4) */
	if (pos < end && pos < pred_end) {
		uint64_t to = end < pred_end ? end : pred_end;
		memcpy(out + (pos - off), w->pred.copy + (pos - w->stream_base), to - pos);
		pos = to;
	}
	uint64_t buf_end = pred_end + w->buf_len;
	if (pos < end && pos < buf_end) { /* from the buffer */
		uint64_t to = end < buf_end ? end : buf_end;
		memcpy(out + (pos - off), w->buf + w->buf_off + (pos - pred_end), to - pos);
		pos = to;
	}
	if (pos < end)
		memset(out + (pos - off), 0, end - pos);
	*got = len;
	return 0;
}

int writer_commit(struct writer *w, bool durable)
{
	if (w->err)
		return w->err;
	if (!w->dirty && !durable)
		return 0;
	int rc = 0;
	if (w->dirty)
		rc = w->staging ? writer_rechunk(w) : writer_cut(w);
	if (rc == 0) {
		rc = writer_awaits_reap(w, true); /* commit only stored chunks */
		if (rc != 0)
			writer_fail(w, rc, "storing a chunk");
	}
	if (rc == 0 && durable && w->n_unsynced > WRITER_SYNC_EACH_MAX) {
		/* many objects: one syncfs is one journal commit instead of two
		 * flushes per object (their write-back started when written) */
		rc = store_syncfs(w->fs->store);
		if (rc != 0)
			writer_fail(w, rc, "syncing the store");
	}
	for (size_t i = 0; rc == 0 && durable && w->n_unsynced <= WRITER_SYNC_EACH_MAX &&
			   i < w->n_unsynced; i++) {
		rc = store_sync(w->fs->store, w->unsynced[i]);
		if (rc == -ENOENT)
			rc = 0; /* reclaimed: no extent references it any more */
		if (rc != 0)
			writer_fail(w, rc, "syncing a chunk");
	}
	if (rc == 0 && durable)
		w->n_unsynced = 0;
	if (rc == 0)
		rc = cat_file_commit(w->fs->cat, w->ino, w->size, w->mtime_ns, durable);
	if (rc != 0)
		return writer_fail(w, rc, "committing the file");
	w->dirty = false;
	return 0;
}
