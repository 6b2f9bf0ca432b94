/* wbuf — the daemon-wide budget of writer buffers (-o writebuf=).
 *
 * A file written in order keeps a buffer: the bytes not yet cut into
 * content-defined chunks, up to one maximal chunk plus two I/O blocks
 * (writer.c writer_append). Without a bound, thousands of files written at
 * once grow the daemon until the OOM killer ends it, and with it every
 * trainer's uncommitted writes. Every writer buffer is counted here.
 *
 * Invariants:
 *  W1. wbuf_take never lets the total pass the limit: it refuses instead,
 *      and never waits. A writer refused moves to STAGING (writer.h), whose
 *      bytes live in a local file, so no writer ever waits for memory that
 *      only its own (or its process's next) commit would free.
 *  W2. The total is exactly the bytes of the buffers writers hold: taken
 *      before a buffer grows, given back when it shrinks, is handed to
 *      recent, moves to staging, or goes with its writer (every path:
 *      commit, truncate, free, errors).
 *  W3. The one exception to W1: a STAGING writer re-chunking its file at
 *      commit (writer_rechunk) takes its buffer with wbuf_force, which may
 *      pass the limit, and gives it back before the commit returns. A
 *      commit must not wait for memory (W1), so the total can exceed the
 *      limit by one buffer per commit running at once (FUSE's threads).
 *
 * Thread-safe. */
#ifndef CKPTFS_WBUF_H
#define CKPTFS_WBUF_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct wbuf {
	pthread_mutex_t lock;
	uint64_t limit; /* 0: no bound */
	uint64_t used, peak;
	uint64_t staged; /* writers moved to STAGING by a refusal (W1) */
	uint64_t copied; /* stored bytes copied back into staging files (writer.h 8) */
};

struct wbuf_stats {
	uint64_t limit, used, peak, staged, copied;
};

void wbuf_init(struct wbuf *b, uint64_t limit);
void wbuf_destroy(struct wbuf *b);

/* W1: true and counted, or false and nothing changed. */
bool wbuf_take(struct wbuf *b, uint64_t n);
/* W3: counted even past the limit. */
void wbuf_force(struct wbuf *b, uint64_t n);
void wbuf_give(struct wbuf *b, uint64_t n);
/* A writer was refused and moved to STAGING. */
void wbuf_note_staged(struct wbuf *b);
/* n bytes of chunks already stored were copied into a staging file: a
 * STAGING writer rewriting below the point it was staged from (writer.h 8). */
void wbuf_note_copied(struct wbuf *b, uint64_t n);
void wbuf_stats(struct wbuf *b, struct wbuf_stats *out);

#endif
