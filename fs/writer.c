/* writer — a file being written; see writer.h for the modes and invariants. */
#define _GNU_SOURCE
#include "writer.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
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
#include "uploader.h"
#include "zipcut.h"

#define WRITER_BUF_MIN (64u << 10)
#define WRITER_IO_BLOCK (1u << 20)
#define WRITER_SYNC_EACH_MAX 8 /* more unsynced chunks than this: syncfs */

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

	/* chunks written since the last durable commit */
	uint8_t (*unsynced)[HASH_LEN];
	size_t n_unsynced, cap_unsynced;

	int staging_fd;
};

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
	int rc = cat_pending_drop(w->fs->cat, w->ino);
	if (rc != 0)
		log_error("inode %llu: dropping the writer's pending extents failed: %s",
			  (unsigned long long)w->ino, strerror(-rc));
	if (w->staging_fd >= 0)
		close(w->staging_fd);
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

/* Stores one chunk of the stream at file offset off and adds it to pending. */
static int writer_emit(struct writer *w, const uint8_t *data, size_t len, uint64_t off)
{
	if (writer_all_zero(data, len))
		return 0; /* a hole: reads as zeros, stores nothing */
	struct cat_extent ext = { .off = off, .len = len, .chunk_off = 0, .chunk_len = len };
	struct recent_ticket ticket;
	if (!recent_lookup(w->fs->recent, data, len, ext.hash, &ticket)) { /* replicas: R1 */
		hash_sha256(data, len, ext.hash);
		recent_publish(w->fs->recent, &ticket, data, len, ext.hash);
	}
	bool must_store;
	int rc = cat_pending_add(w->fs->cat, w->ino, &ext, &must_store);
	if (rc != 0)
		return writer_fail(w, rc, "recording a chunk");
	if (must_store) {
		struct store_object_info info;
		cache_dirty_wait(w->fs->cache, len); /* backpressure: never a failure */
		rc = store_put(w->fs->store, ext.hash, data, len, 0, &info);
		if (rc == 0)
			rc = cat_chunk_stored(w->fs->cat, ext.hash, info.codec, info.stored_len);
		if (rc == 0) {
			cache_dirty_add(w->fs->cache, info.stored_len);
			/* a chunk of a deferred transaction (small files of an open
			 * generation) is not listed before its commit: the uploader
			 * finds it at its next round, in a larger batch */
			if (!cat_defer_active(w->fs->cat))
				uploader_kick(w->fs->uploader);
		}
		if (rc != 0)
			return writer_fail(w, rc, "storing a chunk");
	}
	rc = writer_note_unsynced(w, ext.hash);
	return rc ? writer_fail(w, rc, "tracking a chunk") : 0;
}

/* Runs the chunker over the unscanned buffer, emitting every complete chunk:
 * at the chunker's boundaries and at zipcut's forced cuts. */
static int writer_scan(struct writer *w)
{
	while (w->scanned < w->buf_len) {
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
		if (!boundary && cut && w->stream_base + w->scanned == stop) {
			boundary = true;
			chunker_reset(&w->ck);
		}
		if (!boundary) {
			if (w->stream_base + w->scanned == stop)
				continue; /* at a zip header: parse it */
			break;
		}
		size_t len = w->scanned;
		int rc = writer_emit(w, start, len, w->stream_base);
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
	int rc = 0;
	if (w->buf_len)
		rc = writer_emit(w, w->buf + w->buf_off, w->buf_len, w->stream_base);
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

static int writer_open_staging(struct writer *w)
{
	int fd = open(w->fs->staging_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/ino-%llu-XXXXXX", w->fs->staging_dir,
			 (unsigned long long)w->ino);
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path); /* private: gone with the process */
	}
	if (fd < 0)
		return -errno;
	w->staging_fd = fd;
	return 0;
}

/* Copies the pending extents of the stream into fd. */
static int writer_copy_pending(struct writer *w, int fd)
{
	struct cat_extent ext[16];
	uint64_t pos = 0;
	uint8_t *tmp = malloc(w->fs->chunking.max_size);
	if (!tmp)
		return -ENOMEM;
	int rc = 0, n;
	while (rc == 0 && (n = cat_pending_extents(w->fs->cat, w->ino, pos, ext, 16)) > 0) {
		for (int i = 0; i < n && rc == 0; i++) {
			rc = reader_copy_extent(w->fs, w->ino, &ext[i], ext[i].chunk_off, ext[i].len,
						(char *)tmp);
			if (rc == 0)
				rc = writer_pwrite_all(fd, tmp, ext[i].len, ext[i].off);
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
	int rc = writer_open_staging(w);
	if (rc == 0 && ftruncate(w->staging_fd, (off_t)w->size) != 0)
		rc = -errno;
	if (rc == 0)
		rc = writer_copy_pending(w, w->staging_fd);
	if (rc == 0 && w->buf_len)
		rc = writer_pwrite_all(w->staging_fd, w->buf + w->buf_off, w->buf_len, w->stream_base);
	if (rc == 0)
		rc = cat_pending_drop(w->fs->cat, w->ino);
	if (rc != 0)
		return writer_fail(w, rc, "moving the file to a staging file for out-of-order writes");
	w->staging = true;
	w->buf_off = w->buf_len = w->scanned = 0;
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
		uint64_t stream_end = w->stream_base + w->buf_len;
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
		rc = writer_pwrite_all(w->staging_fd, buf, len, off);
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
	int rc = 0;
	if (w->staging) {
		if (ftruncate(w->staging_fd, (off_t)new_size) != 0)
			return writer_fail(w, -errno, "truncating the staging file");
	} else if (new_size < w->stream_base) {
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
		int rc = reader_read(w->fs, w->ino, READER_PENDING, pos, to - pos, out);
		if (rc != 0)
			return rc;
		pos = to;
	}
	uint64_t buf_end = w->stream_base + w->buf_len;
	if (pos < end && pos < buf_end) { /* from the buffer */
		uint64_t to = end < buf_end ? end : buf_end;
		memcpy(out + (pos - off), w->buf + w->buf_off + (pos - w->stream_base), to - pos);
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
