/* writer — the state of a file being written, from its first write (or
 * truncate) through an open handle until its last handle closes.
 *
 * Two modes:
 *
 *   STREAM ──(write behind the stream end, i.e. out of order;
 *             or its buffer would pass the writers' budget)──▶ STAGING
 *
 *   STREAM   the file is [pending extents 0..stream_base) [buffer] [holes to size].
 *            Writes at the stream end are appended to the buffer and cut into
 *            content-defined chunks as they arrive; a chunk is hashed and
 *            added to the catalog's pending extents at once, and its object
 *            written at once or behind the writer (storeq.h), so memory is
 *            bounded by the largest chunk plus storeq's depth. A write past
 *            the end cuts the buffer and leaves a hole. All-zero chunks are
 *            stored as holes.
 *   STAGING  the file is [pending extents 0..stage_base) [staging file]:
 *            the bytes the stream had not stored yet (from its stream_base)
 *            and every later write live in a sparse local file
 *            (CACHE/staging/); writes and truncates go there, and every
 *            commit re-chunks it from stage_base (data regions only: holes
 *            stay holes). A write below stage_base first copies the stored
 *            prefix into the staging file (stage_base becomes 0).
 *
 * Invariants:
 *  1. Readers of the file see exactly the bytes written so far, through
 *     writer_read, in either mode.
 *  2. The committed version (what a reader sees after the writer is gone, or
 *     after a crash) changes only in writer_commit, in one catalog transaction:
 *     a crash leaves the file as of its last flush/fsync, never a mix.
 *  3. writer_commit(durable) returns only when the file's chunks and the
 *     catalog are fsync'd: every chunk the committed file names, also those
 *     an earlier handle committed without fsync (a writer started on
 *     committed extents syncs them too; more than a few by one syncfs).
 *  4. The first error of the data path is kept and returned by every later
 *     call: a failed write is never reported as committed.
 *  5. A pending chunk whose object is still being written (by this writer
 *     behind it, or by another writer of the same bytes) is awaited before
 *     anything reads, truncates, stages, commits or drops the pending
 *     extents: they only ever name chunks recorded as stored by then.
 *  6. Never lose what a trainer wrote: the writer drops the bytes of a chunk
 *     the catalog calls stored (a dedup hit) only once the store vouched for
 *     its object (store.h invariant 4: written or read and checked whole by
 *     this process) or the catalog says BACKING holds it (evicted after its
 *     upload); a hit whose object is damaged or missing is written again
 *     from the writer's bytes, replacing it whole, and logged naming the
 *     chunk. A durable commit that finds a recorded chunk's object gone
 *     while the catalog still counts it and BACKING lacks it fails with EIO.
 *     With a shared catalog alike: a hit there is on a copy this node's
 *     cache holds (meta/catalog_shared_data.c S11).
 *  7. The SHA-256 that names a chunk and the CRC-32C a writer hands on
 *     with its pin (recent.h R7) are of exactly that chunk's bytes: both
 *     are taken over the bytes as the chunker scans them, started by a scan
 *     from the chunk's start, and used only when they cover every byte of
 *     the chunk and the chunker scanned them all in that run; anything that
 *     makes the chunker scan again (a truncate into the buffer, a forced
 *     cut) starts them again or leaves them unused, and the chunk is then
 *     hashed whole (writer.c writer_sums_scanned).
 *  8. Writer memory is bounded (-o writebuf=, wbuf.h): a STREAM writer's
 *     buffer grows only within the budget, counted before it grows; one
 *     that would pass it moves the file to STAGING (its bytes not stored
 *     yet, also those matched against another writer's chunk, go to the
 *     staging file; the chunks stored before, [0, stream_base), stay its
 *     pending extents and are neither copied nor re-chunked, unless a later
 *     write lands below that point: only then is that prefix copied into
 *     the staging file, counted in wbuf's `copied`) and never waits for
 *     memory. A buffer is given back to the budget when
 *     it empties at a commit, a truncate below the stream or the move to
 *     STAGING, and with the writer (writer_free, also after an error); a
 *     STAGING writer holds one only while re-chunking at commit (wbuf.h W3).
 *     Every writer.h call behaves as without a bound: only where the bytes
 *     wait for their commit differs. */
#ifndef CKPTFS_WRITER_H
#define CKPTFS_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct chunkput;
struct writer;

/* Starts writing the existing file ino of the given size; its chunks are
 * put through cp (chunkput.h), which outlives the writer. */
int writer_new(struct chunkput *cp, uint64_t ino, uint64_t size, struct writer **out);

/* Drops the writer's uncommitted state (pending extents, staging file). */
void writer_free(struct writer *w);

/* writer_free at the last release after a successful last commit, clearing
 * the file's being-written mark (generation.h G7) in the same catalog change
 * as the drop (cat_pending_drop_unmark). Frees w in any case; not 0: the
 * mark may still be set (the caller clears it with cat_file_unmark). */
int writer_free_unmark(struct writer *w);

int writer_write(struct writer *w, const char *buf, size_t len, uint64_t off);
int writer_truncate(struct writer *w, uint64_t new_size);
int writer_read(struct writer *w, char *out, size_t len, uint64_t off, size_t *got);

/* Commits what was written so far as the file's content (no-op when nothing
 * changed and !durable). */
int writer_commit(struct writer *w, bool durable);
/* writer_commit with a step between storing and publishing: when there is
 * something to publish, gate is called once every chunk the new content
 * names is stored (and, durable, synced) and its pending extents are
 * complete, just before they become the file's content (fs/ns.h invariant
 * 13: a small file outside generations is uploaded first on a shared
 * catalog). gate cannot fail the commit: what it waits for is its own. */
typedef void writer_gate_fn(void *arg, uint64_t ino, uint64_t size);
int writer_commit_gated(struct writer *w, bool durable, writer_gate_fn *gate, void *arg);

uint64_t writer_size(const struct writer *w);
bool writer_dirty(const struct writer *w);
int64_t writer_mtime_ns(const struct writer *w);
/* An explicit mtime (utimens) that the next commit keeps. */
void writer_set_mtime_ns(struct writer *w, int64_t mtime_ns);
/* Marks the file changed (mtime) without data, e.g. a truncate to the same size. */
void writer_touch(struct writer *w);
/* Bytes at the stream end compared equal to another writer's chunk so far
 * (recent.h R4): 0 when the writer is not following one. */
size_t writer_following(const struct writer *w);

#endif
