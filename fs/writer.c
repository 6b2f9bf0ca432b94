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

#include "chunker.h"
#include "chunkput.h"
#include "crc32c.h"
#include "hash.h"
#include "log.h"
#include "recent.h"
#include "reader.h"
#include "safeopen.h"
#include "store.h"
#include "upload.h" /* cat_chunk_where, cat_chunk_lost: invariant 6 */
#include "wbuf.h"
#include "zipcut.h"

#define WRITER_BUF_MIN (64u << 10)
#define WRITER_IO_BLOCK (1u << 20)
/* Bytes copied into the buffer between two scans: what follows a chunk's
 * end in its buffer is copied again into the next chunk's (R6 hand-over),
 * so the smaller, the less copied twice (the loop costs little per step). */
#define WRITER_FEED_STEP (64u << 10)
#define WRITER_SYNC_EACH_MAX 8 /* more unsynced chunks than this: syncfs */
/* recent.h R5: how long a writer waits for the chunk another writer of the
 * same bytes is chunking, instead of chunking and hashing them as well */
#define WRITER_FOLLOW_WAIT_MS 50
/* a commit refused while a reclaim removes a chunk it names (pgns.h N3) is
 * tried again after this, doubling up to the max, within the duty's term */
#define WRITER_RECLAIM_WAIT_MS 10
#define WRITER_RECLAIM_WAIT_MAX_MS 200
#define WRITER_ROOM_RETRIES 16 /* local writes retried after an ENOSPC, each after room was made */
/* invariant 8: the buffer would pass the writers' budget (wbuf.h W1); never
 * returned to a caller of writer.h: the writer moves to STAGING instead */
#define WRITER_NO_ROOM (-ENOBUFS)

struct writer {
	struct chunkput *cp;
	const struct chunkput_env *env; /* cp's handles */
	uint64_t ino;
	uint64_t size;
	int64_t mtime_ns;
	bool dirty;
	bool staging;
	int err; /* first data-path error, returned from then on */

	/* stream: file = pending [0, stream_base) + buf[buf_off, buf_off+buf_len) + holes.
	 * buf = image + RECENT_HEADROOM, an image buffer of recent's (recent.h
	 * R6): a chunk cut at the buffer's start is handed to recent with its
	 * buffer, not copied. */
	uint64_t stream_base;
	uint8_t *image, *buf;
	size_t image_cap;
	size_t buf_off, buf_len, buf_cap, scanned; /* scanned counts from buf_off */
	/* invariant 7: crc and sha are the CRC-32C and the SHA-256 (running) of
	 * the chunk's first sums_len bytes (from buf_off), taken as the chunker
	 * scanned them */
	uint32_t crc;
	struct hash_stream sha;
	size_t sums_len;
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

	/* chunks stored behind this writer, or by another writer of the same
	 * bytes, that it awaits (chunkput.h) */
	struct chunkput_awaits aw;

	/* chunks written since the last durable commit; the first
	 * n_unsynced_kept are the stored prefix's (staging: [0, stage_base)),
	 * which a re-chunk keeps */
	uint8_t (*unsynced)[HASH_LEN];
	size_t n_unsynced, cap_unsynced, n_unsynced_kept;

	/* staging (invariant 8): [0, stage_base) stays the pending extents the
	 * stream stored; the staging file holds [stage_base, size) */
	int staging_fd;
	uint64_t stage_base;
	/* invariant 3: started on committed extents, which an earlier handle may
	 * have committed without syncing; inherited_many: more of them than
	 * WRITER_SYNC_EACH_MAX (one syncfs covers them) */
	bool inherited, inherited_many;
};

/* Collects the writer's awaits (all of them, waiting): before anything
 * reads, truncates, stages, commits or drops its pending chunks (writer.h
 * invariant 5). */
static int writer_awaits_reap(struct writer *w)
{
	return chunkput_reap(w->cp, &w->aw, true);
}

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

/* Invariant 8: the writer's buffer goes from `from` to `to` bytes in the
 * budget. Growing is refused past the bound (wbuf.h W1), except while
 * STAGING, where the buffer only re-chunks the staging file at commit (W3). */
static bool writer_budget(struct writer *w, size_t from, size_t to)
{
	if (to <= from) {
		wbuf_give(w->env->wbuf, from - to);
		return true;
	}
	if (w->staging) {
		wbuf_force(w->env->wbuf, to - from);
		return true;
	}
	return wbuf_take(w->env->wbuf, to - from);
}

/* Gives the (empty) buffer back to recent and its bytes to the budget. */
static void writer_buf_release(struct writer *w)
{
	assert(w->buf_len == 0 && !w->following);
	if (!w->image)
		return;
	recent_image_give(w->env->recent, w->image, w->image_cap);
	writer_budget(w, w->image_cap, 0);
	w->image = w->buf = NULL;
	w->image_cap = w->buf_cap = 0;
	w->buf_off = w->scanned = w->sums_len = 0;
}

int writer_new(struct chunkput *cp, uint64_t ino, uint64_t size, struct writer **out)
{
	struct writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cp = cp;
	w->env = chunkput_env(cp);
	w->ino = ino;
	w->size = size;
	w->mtime_ns = writer_now_ns();
	w->staging_fd = -1;
	w->cur = RECENT_CURSOR_NONE;
	w->pred.slot = -1;
	bool rows = true;
	int rc = chunker_init(&w->ck, &w->env->chunking);
	if (rc == 0)
		rc = cat_pending_start(w->env->cat, ino, &rows);
	if (rc == 0) {
		struct cat_extent e[WRITER_SYNC_EACH_MAX + 1];
		/* a file without extent rows (a new one) has no pending rows to count */
		int n = rows ? cat_pending_extents(w->env->cat, ino, 0, e, WRITER_SYNC_EACH_MAX + 1)
			     : 0;
		if (n < 0)
			rc = n;
		/* an existing file is appended at its end; a file of holes from 0 */
		w->stream_base = n > 0 ? size : 0;
		w->inherited = n > 0;
		w->inherited_many = n > WRITER_SYNC_EACH_MAX;
		zipcut_init(&w->zc, ZIPCUT_MIN_RECORD);
		w->zc.active = w->stream_base == 0;
	}
	if (rc != 0) {
		cat_pending_drop(w->env->cat, ino);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

static int writer_end(struct writer *w, bool unmark)
{
	/* puts still in flight (behind, or another writer's) record chunks that pending
	 * references: they land before the references go */
	writer_awaits_reap(w);
	int rc = unmark ? cat_pending_drop_unmark(w->env->cat, w->ino)
			: cat_pending_drop(w->env->cat, w->ino);
	if (rc != 0)
		log_error("inode %llu: dropping the writer's pending extents failed: %s",
			  (unsigned long long)w->ino, strerror(-rc));
	if (w->staging_fd >= 0)
		close(w->staging_fd);
	if (w->following)
		recent_unpin(w->env->recent, &w->pred);
	recent_chain_drop(w->env->recent, &w->cur);
	w->following = false;
	w->buf_len = 0; /* uncommitted bytes go with the writer */
	writer_buf_release(w);
	hash_stream_free(&w->sha);
	free(w->unsynced);
	free(w);
	return rc;
}

void writer_free(struct writer *w)
{
	if (w)
		writer_end(w, false);
}

int writer_free_unmark(struct writer *w)
{
	return writer_end(w, true);
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

size_t writer_following(const struct writer *w)
{
	return w->following ? w->matched : 0;
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

/* A dedup hit (the catalog said the chunk is stored): may the writer drop
 * its bytes? Invariant 6: only once the store vouched for the object
 * (store_verify_hit), or the catalog says its copy is BACKING's (evicted
 * from the cache after its upload). A damaged or missing object sets
 * *must_store: it is written again from these bytes (store.h invariant 3),
 * which also queues its upload again (cat_chunk_stored). With a shared
 * catalog the same: a hit there is always on a copy the catalog says THIS
 * node's cache holds (catalog_shared_data.c S11: a stored row with no copy
 * here makes the writer store its bytes anew), and cat_chunk_where answers
 * from this node's row (S6), so another node's object is never looked for
 * here; a copy evicted meanwhile (not cached, on BACKING) was pinned for
 * this writer by its eviction (S11). */
static int writer_check_hit(struct writer *w, const struct cat_extent *ext, bool *must_store)
{
	int rc = store_verify_hit(w->env->store, ext->hash, ext->len);
	if (rc == -ENOENT) {
		struct cat_chunk_where where;
		if (cat_chunk_where(w->env->cat, ext->hash, &where) == 0 && !where.cached &&
		    where.uploaded)
			return 0; /* evicted: read from BACKING, as every chunk of it is */
	}
	if (rc != 0 && rc != -ENOENT && rc != -EIO)
		return rc;
	if (rc != 0) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(ext->hash, hex);
		log_warn("inode %llu: chunk %s is %s in the cache: stored again from the bytes written",
			 (unsigned long long)w->ino, hex, rc == -ENOENT ? "missing" : "damaged");
		*must_store = true;
	}
	return 0;
}

/* Adds a chunk whose hash is known (the SHA-256 of data[0..ext->len)) to
 * pending, and stores its object if the catalog says it must be, or if it
 * was a hit on an object that is not whole (invariant 6). pin: the
 * chunk's bytes pinned in recent's copy (data == pin->copy), which the
 * object can be written from without a copy, and behind the writer; or
 * NULL. */
static int writer_record(struct writer *w, struct cat_extent *ext, const uint8_t *data,
			 const struct recent_pred *pin)
{
	bool must_store;
	int rc = cat_pending_add(w->env->cat, w->ino, ext, &must_store);
	if (rc != 0)
		return writer_fail(w, rc, "recording a chunk");
	uint64_t since = chunkput_lands(w->cp); /* P1: an earlier landing is no store of it */
	if (!must_store && (rc = writer_check_hit(w, ext, &must_store)) != 0)
		return writer_fail(w, rc, "checking a stored chunk");
	if (must_store) {
		rc = chunkput_store(w->cp, &w->aw, ext->hash, data, ext->len, pin, since);
		if (rc != 0)
			return writer_fail(w, rc, "storing a chunk");
	}
	rc = writer_note_unsynced(w, ext->hash);
	return rc ? writer_fail(w, rc, "tracking a chunk") : 0;
}

/* Makes the buffer's bytes past its first len the start of a fresh image
 * buffer, and hands the old one, whose first len bytes are the chunk just
 * hashed, to recent as the entry's copy (recent.h R6), pinned in *pin.
 * false: recent kept nothing; the buffer is as it was, and the ticket has
 * ended if *ended (else the caller publishes it). */
static bool writer_hand_over(struct writer *w, const struct recent_ticket *ticket, size_t len,
			     const uint8_t hash[HASH_LEN], struct recent_pred *pin, bool *ended)
{
	size_t tail = w->buf_len - len, cap, old = w->image_cap;
	size_t need = RECENT_HEADROOM + (tail > WRITER_FEED_STEP ? tail : WRITER_FEED_STEP);
	*ended = false;
	uint8_t *next = recent_image_take(w->env->recent, need, &cap);
	if (!next)
		return false;
	if (cap > old && !writer_budget(w, old, cap)) { /* invariant 8: the chunk is copied */
		recent_image_give(w->env->recent, next, cap);
		return false;
	}
	*ended = true; /* by recent_publish_image, kept or not */
	memcpy(next + RECENT_HEADROOM, w->buf + len, tail);
	/* most chunks are under twice the average: a spare of that size takes
	 * them without faulting fresh pages */
	size_t keep = RECENT_HEADROOM + 2 * w->env->chunking.avg_size + WRITER_FEED_STEP;
	if (!recent_publish_image(w->env->recent, ticket, w->image, w->image_cap, len, keep, hash,
				  pin)) {
		recent_image_give(w->env->recent, next, cap);
		if (cap > old)
			writer_budget(w, cap, old);
		return false;
	}
	if (cap < old) /* the old buffer is recent's now */
		writer_budget(w, old, cap);
	w->image = next;
	w->image_cap = cap;
	w->buf = next + RECENT_HEADROOM;
	w->buf_cap = cap - RECENT_HEADROOM;
	w->buf_off = 0;
	w->buf_len = tail;
	return true;
}

/* The buffer's first len bytes were emitted and stay where they are. */
static void writer_consume(struct writer *w, size_t len)
{
	w->buf_off += len; /* no copy: the next chunk starts where this one ended */
	w->buf_len -= len;
	if (w->buf_len == 0)
		w->buf_off = 0;
}

/* Stores the first len bytes of the buffer as one chunk of the stream and
 * adds it to pending; end says how it ended (recent.h R4). The next chunk
 * starts after it: at the buffer's start again. A chunk at the buffer's
 * start (buf_off 0) that recent did not have goes to recent with its buffer
 * (R6): its bytes are copied once, from the FUSE request into the buffer.
 * scanned_all: the chunker scanned all len bytes from the chunk's start
 * (then invariant 7's CRC, if it covers them, goes with the chunk's pin:
 * recent.h R7). */
static int writer_emit(struct writer *w, size_t len, enum recent_end end, bool scanned_all)
{
	uint8_t *data = w->buf + w->buf_off;
	bool has_sums = scanned_all && w->sums_len == len; /* invariant 7 */
	uint32_t crc = w->crc;
	w->sums_len = 0; /* the next chunk's sums start with its first scan */
	uint64_t off = w->stream_base;
	w->stream_base += len;
	w->led = false;
	if (writer_all_zero(data, len)) {
		recent_chain_drop(w->env->recent, &w->cur);
		writer_consume(w, len);
		return 0; /* a hole: reads as zeros, stores nothing */
	}
	struct cat_extent ext = { .off = off, .len = len, .chunk_off = 0, .chunk_len = len };
	struct recent_ticket ticket;
	struct recent_pred copy; /* recent's copy of these bytes: stored without another copy */
	bool pinned = false, ended = false;
	if (!recent_lookup(w->env->recent, data, len, ext.hash, &ticket)) { /* replicas: R1 */
		if (has_sums) /* invariant 7: hashed as scanned, in cache */
			hash_stream_end(&w->sha, ext.hash);
		else
			hash_sha256(data, len, ext.hash);
		if (w->buf_off == 0 && ticket.slot >= 0)
			pinned = writer_hand_over(w, &ticket, len, ext.hash, &copy, &ended);
		if (!ended) /* R2: a ticket ends once */
			recent_publish(w->env->recent, &ticket, data, len, ext.hash);
	}
	if (!pinned)
		writer_consume(w, len); /* data stays valid: nothing is copied over it below */
	recent_chain(w->env->recent, &w->cur, &ticket, end);
	if (!pinned && !recent_pin(w->env->recent, &ticket, &copy))
		return writer_record(w, &ext, data, NULL);
	if (has_sums) { /* R7: the CRC of these bytes, whichever copy holds them */
		copy.has_crc = true;
		copy.crc = crc;
	}
	int rc = writer_record(w, &ext, copy.copy, &copy);
	recent_unpin(w->env->recent, &copy);
	return rc;
}

/* ---- following another writer of the same bytes (recent.h R4/R5) ---- */

/* May the chunk starting at stream_base be predicted? Only at a chunk start
 * (the chunker reset), in the stream, in a chain, with no zip cut that could
 * end the chunk where the prediction's chunker did not. */
static bool writer_may_follow(const struct writer *w)
{
	return w->env->recent && !w->staging && !w->following && !w->led && w->scanned == 0 &&
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
	recent_adopt(w->env->recent, &w->cur, &w->pred);
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
	if (rc == WRITER_NO_ROOM)
		return rc; /* still following: the caller moves to STAGING (invariant 8) */
	if (rc == 0) {
		memcpy(w->buf, w->pred.copy, w->matched);
		w->buf_len = w->matched;
	}
	recent_unpin(w->env->recent, &w->pred);
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
	if (!recent_follow(w->env->recent, &w->cur, WRITER_FOLLOW_WAIT_MS, &w->pred)) {
		w->led = true; /* and the claim is ours (R5) */
		return false;
	}
	size_t k = w->buf_len < w->pred.len ? w->buf_len : w->pred.len;
	if (k && memcmp(w->buf + w->buf_off, w->pred.copy, k) != 0) {
		recent_unpin(w->env->recent, &w->pred);
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

/* Invariant 7: the n bytes the chunker has just scanned at start + scanned
 * join the chunk's CRC and SHA-256 while they are in this CPU's cache (they
 * were copied in a moment ago): writer_emit names the chunk with the SHA-256
 * and the store writes the object with the CRC (store.c S11), instead of
 * reading the chunk (0.5-4 MiB, past L2) from memory twice more. A scan from
 * the chunk's start starts them; one that does not continue them leaves them
 * short, unused (the chunk is then hashed whole). */
static void writer_sums_scanned(struct writer *w, const uint8_t *start, size_t n)
{
	if (w->scanned == 0) {
		w->crc = 0;
		w->sums_len = 0;
		hash_stream_begin(&w->sha);
	}
	if (w->sums_len == w->scanned) {
		w->crc = crc32c(w->crc, start + w->scanned, n);
		hash_stream_add(&w->sha, start + w->scanned, n);
		w->sums_len += n;
	}
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
		if (room) {
			size_t n = chunker_scan(&w->ck, start + w->scanned, room, &boundary);
			writer_sums_scanned(w, start, n);
			w->scanned += n;
		}
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
		w->scanned = 0;
		int rc = writer_emit(w, len, cut_here ? RECENT_END_OTHER : RECENT_END_CHUNKER, true);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Emits the buffer as a final chunk (a forced boundary). */
static int writer_cut(struct writer *w)
{
	int rc = writer_unfollow(w);
	if (rc == 0 && w->buf_len)
		rc = writer_emit(w, w->buf_len, RECENT_END_OTHER, w->scanned == w->buf_len);
	if (rc == 0) {
		assert(w->buf_len == 0);
		w->buf_off = w->scanned = w->sums_len = 0;
		chunker_reset(&w->ck);
	}
	return rc;
}

/* The buffer holds at least need bytes (from buf, past the headroom). */
static int writer_grow(struct writer *w, size_t need)
{
	if (w->image && w->buf_cap >= need)
		return 0;
	if (need < WRITER_BUF_MIN)
		need = WRITER_BUF_MIN;
	int rc = 0;
	if (!w->image) {
		size_t cap;
		uint8_t *image = recent_image_take(w->env->recent, RECENT_HEADROOM + need, &cap);
		if (!image)
			return -ENOMEM;
		if (!writer_budget(w, 0, cap)) { /* invariant 8 */
			recent_image_give(w->env->recent, image, cap);
			return WRITER_NO_ROOM;
		}
		w->image = image;
		w->image_cap = cap;
	} else {
		size_t old = w->image_cap;
		size_t cap = recent_image_grow_cap(old, RECENT_HEADROOM + need);
		if (!writer_budget(w, old, cap)) /* invariant 8: counted before it grows */
			return WRITER_NO_ROOM;
		rc = recent_image_grow(&w->image, &w->image_cap, RECENT_HEADROOM + need);
		if (rc != 0)
			writer_budget(w, cap, old);
		assert(rc != 0 || w->image_cap == cap);
	}
	if (rc == 0) {
		w->buf = w->image + RECENT_HEADROOM;
		w->buf_cap = w->image_cap - RECENT_HEADROOM;
	}
	return rc;
}

/* Appends at the stream end; *done: how many of the len bytes were taken
 * (all unless an error, or WRITER_NO_ROOM: the rest goes to STAGING). The
 * buffer never holds more than one maximal chunk plus one block: the chunker
 * cuts at max_size at the latest. */
static int writer_append(struct writer *w, const uint8_t *data, size_t len, size_t *done)
{
	size_t limit = w->env->chunking.max_size + 2 * WRITER_IO_BLOCK;
	*done = 0;
	while (len) {
		if (w->following || (w->buf_len == 0 && writer_follow_start(w))) {
			/* R4: compared where they arrived, not copied */
			size_t used;
			int rc = writer_follow_feed(w, data, len, &used);
			if (rc != 0)
				return rc;
			data += used;
			len -= used;
			*done += used;
			continue;
		}
		size_t n = len < WRITER_FEED_STEP ? len : WRITER_FEED_STEP;
		if (w->buf_off) {
			/* the bytes after a chunk that stayed in place (a hit, a hole, a
			 * short chunk): at most a step's worth, moved so that the next
			 * chunk starts at the buffer's start (R6) */
			memmove(w->buf, w->buf + w->buf_off, w->buf_len);
			w->buf_off = 0;
		}
		size_t need = w->buf_off + w->buf_len + n;
		int rc = writer_grow(w, need <= limit ? need : limit);
		if (rc == WRITER_NO_ROOM)
			return rc;
		if (rc != 0)
			return writer_fail(w, rc, "growing the write buffer");
		if (n > w->buf_cap - w->buf_off - w->buf_len)
			n = w->buf_cap - w->buf_off - w->buf_len;
		memcpy(w->buf + w->buf_off + w->buf_len, data, n);
		w->buf_len += n;
		data += n;
		len -= n;
		*done += n;
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
	int rc = chunkput_disk_wait(w->cp, len);
	if (rc == 0)
		rc = writer_pwrite_all(w->staging_fd, buf, len, off);
	for (int i = 0; (rc == -ENOSPC || rc == -EDQUOT) && i < WRITER_ROOM_RETRIES; i++) {
		if (chunkput_make_room(w->cp, len) != 0)
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
	int dfd = open(w->env->staging_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

/* Copies the pending extents below end (the stored prefix) into the
 * staging file, counting the bytes (wbuf_note_copied). */
static int writer_copy_pending(struct writer *w, uint64_t end)
{
	struct cat_extent ext[16];
	uint64_t pos = 0, copied = 0;
	uint8_t *tmp = malloc(w->env->chunking.max_size);
	if (!tmp)
		return -ENOMEM;
	int rc = 0, n = 0;
	while (rc == 0 && pos < end && (n = cat_pending_extents(w->env->cat, w->ino, pos, ext, 16)) > 0) {
		for (int i = 0; i < n && rc == 0 && ext[i].off < end; i++) {
			size_t len = ext[i].len;
			if (ext[i].off + len > end)
				len = (size_t)(end - ext[i].off);
			rc = w->env->reader.copy_extent(w->env->reader.r, w->ino, &ext[i],
							ext[i].chunk_off, len, (char *)tmp);
			if (rc == 0)
				rc = writer_pwrite_room(w, tmp, len, ext[i].off);
			if (rc == 0)
				copied += len;
			pos = ext[i].off + ext[i].len;
		}
		if (n < 16)
			break;
	}
	if (rc == 0 && n < 0)
		rc = n;
	free(tmp);
	wbuf_note_copied(w->env->wbuf, copied);
	return rc;
}

/* Invariant 8: a write lands below stage_base: the stored prefix is copied
 * into the staging file, which then holds the whole file, and its pending
 * extents go (the commit re-chunks it all). Only then is it copied. */
static int writer_unstage_prefix(struct writer *w)
{
	if (w->stage_base == 0)
		return 0;
	int rc = writer_awaits_reap(w); /* pending chunks are read below */
	if (rc == 0)
		rc = writer_copy_pending(w, w->stage_base);
	if (rc == 0)
		rc = cat_pending_drop(w->env->cat, w->ino);
	if (rc != 0)
		return writer_fail(w, rc, "copying the stored part of the file to its staging file");
	log_debug("inode %llu: rewritten below byte %llu, where it was staged: its stored part"
		  " is copied into the staging file", (unsigned long long)w->ino,
		  (unsigned long long)w->stage_base);
	w->stage_base = 0;
	w->n_unsynced_kept = 0; /* the re-chunk notes every chunk again */
	return 0;
}

/* STREAM → STAGING: the bytes not stored yet (from stream_base) move into a
 * sparse local file; the stored ones stay pending extents (invariant 8). */
static int writer_to_staging(struct writer *w)
{
	assert(!w->staging);
	int rc = writer_awaits_reap(w); /* the prefix names only stored chunks (5) */
	if (rc != 0)
		return writer_fail(w, rc, "storing a chunk");
	recent_chain_drop(w->env->recent, &w->cur);
	rc = writer_open_staging(w);
	if (rc == 0 && ftruncate(w->staging_fd, (off_t)w->size) != 0)
		rc = -errno;
	if (rc == 0 && w->matched) /* following: those bytes are in pred's copy (R4) */
		rc = writer_pwrite_room(w, w->pred.copy, w->matched, w->stream_base);
	if (rc == 0 && w->buf_len)
		rc = writer_pwrite_room(w, w->buf + w->buf_off, w->buf_len,
					w->stream_base + w->matched);
	if (rc != 0)
		return writer_fail(w, rc, "moving the file to a staging file");
	w->stage_base = w->stream_base;
	w->n_unsynced_kept = w->n_unsynced;
	if (w->following)
		recent_unpin(w->env->recent, &w->pred);
	w->following = false;
	w->matched = 0;
	w->staging = true;
	w->buf_off = w->buf_len = w->scanned = w->sums_len = 0;
	w->led = false;
	chunker_reset(&w->ck);
	writer_buf_release(w); /* invariant 8: a staging writer holds no buffer */
	log_debug("inode %llu: now staged locally from byte %llu", (unsigned long long)w->ino,
		  (unsigned long long)w->stage_base);
	return 0;
}

/* Invariant 8: the buffer would pass the writers' budget: the file moves to
 * STAGING instead of waiting for memory. */
static int writer_stage_for_room(struct writer *w)
{
	wbuf_note_staged(w->env->wbuf);
	return writer_to_staging(w);
}

/* Re-chunks the staging file's data regions, from stage_base, into fresh
 * pending extents after the stored prefix's (invariant 8). */
static int writer_rechunk(struct writer *w)
{
	int rc = w->stage_base ? cat_pending_truncate(w->env->cat, w->ino, w->stage_base)
			       : cat_pending_drop(w->env->cat, w->ino);
	if (rc != 0)
		return writer_fail(w, rc, "dropping old pending extents");
	/* every chunk the file keeps past the prefix is noted again below */
	w->n_unsynced = w->n_unsynced_kept;
	uint8_t *block = malloc(WRITER_IO_BLOCK);
	if (!block)
		return -ENOMEM;
	uint64_t pos = w->stage_base;
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
		w->buf_off = w->buf_len = w->scanned = w->sums_len = 0;
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
			size_t done;
			rc = writer_append(w, block, (size_t)n, &done);
			at += (uint64_t)n;
		}
		if (rc == 0)
			rc = writer_cut(w);
		pos = (uint64_t)hole;
	}
	free(block);
	w->buf_len = 0; /* the staging file keeps the bytes */
	writer_buf_release(w); /* invariant 8, wbuf.h W3: given back before the commit returns */
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
			if (rc == WRITER_NO_ROOM) {
				rc = writer_stage_for_room(w);
			} else if (rc == 0) {
				w->stream_base = off;
				w->zc.active = false;
			}
		} else if (off < stream_end) {
			rc = writer_to_staging(w);
		}
		if (rc != 0)
			return rc;
	}
	size_t done = 0;
	if (!w->staging) {
		rc = writer_append(w, (const uint8_t *)buf, len, &done);
		if (rc == WRITER_NO_ROOM)
			rc = writer_stage_for_room(w); /* the rest of this write is staged */
		if (rc != 0)
			return rc;
	}
	if (w->staging && done < len) {
		if (off + done < w->stage_base && (rc = writer_unstage_prefix(w)) != 0)
			return rc;
		rc = writer_pwrite_room(w, buf + done, len - done, off + done);
		if (rc != 0)
			return writer_fail(w, rc, "writing the staging file");
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
	if (rc == WRITER_NO_ROOM)
		rc = writer_stage_for_room(w);
	if (rc != 0)
		return rc;
	if (!w->staging && new_size < w->stream_base + w->buf_len) {
		recent_chain_drop(w->env->recent, &w->cur);
		w->led = false;
	}
	if (w->staging) {
		if (new_size < w->stage_base) { /* into the stored prefix: cut its extents */
			rc = writer_awaits_reap(w);
			if (rc == 0)
				rc = cat_pending_truncate(w->env->cat, w->ino, new_size);
			if (rc != 0)
				return writer_fail(w, rc, "truncating pending extents");
			w->stage_base = new_size;
		}
		if (ftruncate(w->staging_fd, (off_t)new_size) != 0)
			return writer_fail(w, -errno, "truncating the staging file");
	} else if (new_size < w->stream_base) {
		rc = writer_awaits_reap(w); /* chunks recorded before cut */
		if (rc != 0)
			return writer_fail(w, rc, "storing a chunk");
		rc = cat_pending_truncate(w->env->cat, w->ino, new_size);
		if (rc != 0)
			return writer_fail(w, rc, "truncating pending extents");
		w->stream_base = new_size;
		w->buf_off = w->buf_len = w->scanned = w->sums_len = 0;
		chunker_reset(&w->ck);
		zipcut_init(&w->zc, ZIPCUT_MIN_RECORD);
		w->zc.active = new_size == 0; /* a rewrite from the start */
		writer_buf_release(w); /* invariant 8 */
	} else if (new_size < w->stream_base + w->buf_len) {
		w->buf_len = new_size - w->stream_base;
		w->scanned = w->sums_len = 0; /* re-scan what is left from the chunk's start */
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
		if (off < w->stage_base) { /* the stored prefix (invariant 8) */
			done = (size_t)(off + len < w->stage_base ? len : w->stage_base - off);
			chunkput_wait(w->cp, &w->aw);
			int rc = w->env->reader.read(w->env->reader.r, w->ino, READER_PENDING, off,
						     done, out);
			if (rc != 0)
				return rc;
		}
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
		chunkput_wait(w->cp, &w->aw); /* their objects are all written */
		int rc = w->env->reader.read(w->env->reader.r, w->ino, READER_PENDING, pos, to - pos, out);
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

/* store_sync found no object for a chunk the writer recorded: fine if it
 * was reclaimed (no row, or count 0: nothing names it any more) or evicted
 * after its upload (BACKING holds it); otherwise the file names bytes that
 * are nowhere, and the writer no longer holds them: EIO, never a 0 over lost
 * bytes (invariant 6). With a shared catalog the same, from this node's row
 * and PostgreSQL's; a chunk another node holds, not uploaded yet, is that
 * node's to make durable (catalog_shared_data.c S14). */
static int writer_sync_gone(struct writer *w, const uint8_t hash[HASH_LEN])
{
	int rc = cat_chunk_lost(w->env->cat, hash);
	if (rc <= 0)
		return rc;
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	log_error("inode %llu: chunk %s is gone from the cache and not on BACKING: the file's"
		  " bytes are lost", (unsigned long long)w->ino, hex);
	return -EIO;
}

/* Invariant 3: syncs the objects of every chunk the file names now (its
 * pending extents), for the chunks this writer found committed when it
 * started: the handle that wrote them may have closed without fsync, and
 * their objects are then in the page cache only. A chunk this writer wrote
 * is synced again: an fsync of a clean file costs little. */
static int writer_sync_inherited(struct writer *w)
{
	struct cat_extent ext[16];
	uint64_t pos = 0;
	int n, rc = 0;
	do {
		n = cat_pending_extents(w->env->cat, w->ino, pos, ext, 16);
		if (n < 0)
			return n;
		for (int i = 0; rc == 0 && i < n; i++) {
			rc = store_sync(w->env->store, ext[i].hash);
			if (rc == -ENOENT)
				rc = writer_sync_gone(w, ext[i].hash);
			pos = ext[i].off + ext[i].len;
		}
	} while (rc == 0 && n == 16);
	return rc;
}

/* pgns.h N3: a commit naming a chunk that a reclaim is removing is refused
 * (-EBUSY) and changes nothing; once the reclaim has deleted the row, the
 * same commit inserts a new row held by this node, which uploads its own
 * copy (every chunk of the writer is in the local store: catalog_shared_data.c
 * S2, S4). So the close waits the reclaim out, up to the reclaim duty's
 * term (a reclaimer that died mid-turn is taken over later still: lease.h
 * L8); past it the refusal stands. */
static int writer_publish(struct writer *w, bool durable)
{
	struct cat *cat = w->env->cat;
	int rc = cat_file_commit(cat, w->ino, w->size, w->mtime_ns, durable);
	if (rc != -EBUSY || !cat_is_shared(cat))
		return rc;
	unsigned term_ms = cat_lease_ms(cat), waited_ms = 0, wait_ms = WRITER_RECLAIM_WAIT_MS;
	while (rc == -EBUSY && waited_ms < term_ms) {
		usleep(wait_ms * 1000);
		waited_ms += wait_ms;
		wait_ms = wait_ms * 2 > WRITER_RECLAIM_WAIT_MAX_MS ? WRITER_RECLAIM_WAIT_MAX_MS
								  : wait_ms * 2;
		rc = cat_file_commit(cat, w->ino, w->size, w->mtime_ns, durable);
	}
	if (rc == -EBUSY)
		log_error("file inode %llu: commit refused for %u ms, the reclaim duty's term: a"
			  " chunk it names is still being reclaimed (pgns.h N3; the catalog does"
			  " not say which); its chunks stay in the local store",
			  (unsigned long long)w->ino, waited_ms);
	else if (rc == 0)
		log_info("file inode %llu: committed after waiting %u ms for a reclaim of a chunk"
			 " it names to end", (unsigned long long)w->ino, waited_ms);
	return rc;
}

int writer_commit(struct writer *w, bool durable)
{
	return writer_commit_gated(w, durable, NULL, NULL);
}

int writer_commit_gated(struct writer *w, bool durable, writer_gate_fn *gate, void *arg)
{
	if (w->err)
		return w->err;
	if (!w->dirty && !durable)
		return 0;
	int rc = 0;
	if (w->dirty && !w->staging) {
		rc = writer_cut(w);
		if (rc == WRITER_NO_ROOM)
			rc = writer_stage_for_room(w);
		else if (rc == 0)
			writer_buf_release(w); /* invariant 8: an idle handle holds no buffer */
	}
	if (rc == 0 && w->dirty && w->staging)
		rc = writer_rechunk(w);
	if (rc == 0) {
		rc = writer_awaits_reap(w); /* commit only stored chunks */
		if (rc != 0)
			writer_fail(w, rc, "storing a chunk");
	}
	bool syncfs = w->n_unsynced > WRITER_SYNC_EACH_MAX || (w->inherited && w->inherited_many);
	if (rc == 0 && durable && syncfs) {
		/* many objects: one syncfs is one journal commit instead of two
		 * flushes per object (their write-back started when written) */
		rc = store_syncfs(w->env->store);
		if (rc != 0)
			writer_fail(w, rc, "syncing the store");
	}
	for (size_t i = 0; rc == 0 && durable && !syncfs && i < w->n_unsynced; i++) {
		rc = store_sync(w->env->store, w->unsynced[i]);
		if (rc == -ENOENT)
			rc = writer_sync_gone(w, w->unsynced[i]);
		if (rc != 0)
			writer_fail(w, rc, "syncing a chunk");
	}
	if (rc == 0 && durable && !syncfs && w->inherited) {
		rc = writer_sync_inherited(w);
		if (rc != 0)
			writer_fail(w, rc, "syncing a chunk");
	}
	if (rc == 0 && durable) {
		w->n_unsynced = w->n_unsynced_kept = 0;
		w->inherited = false; /* every chunk is durable now, and stays so */
	}
	if (rc == 0 && gate && w->dirty) /* every chunk stored: the caller's step before they are seen */
		gate(arg, w->ino, w->size);
	if (rc == 0)
		rc = writer_publish(w, durable);
	if (rc != 0)
		return writer_fail(w, rc, "committing the file");
	w->dirty = false;
	return 0;
}
