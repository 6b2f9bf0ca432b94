/* fuseinit — asks the kernel for FUSE_DIRECT_IO_ALLOW_MMAP, which libfuse 3.14
 * cannot ask for.
 *
 * Read-only handles are opened with direct_io (ops.c): a read's bytes go from
 * the daemon's reply straight into the reader's buffer, without filling the
 * FUSE file's page cache first. The kernel refuses a MAP_SHARED mmap of such
 * a handle (ENODEV) unless the daemon's reply to its INIT carried
 * FUSE_DIRECT_IO_ALLOW_MMAP (bit 36 of the 64-bit flags, i.e. bit 4 of
 * flags2; protocol 7.39, Linux 6.6). safetensors maps files MAP_SHARED, so
 * without the flag read-only handles must keep the page cache.
 *
 * main.c therefore installs its own read and writev on the session's
 * /dev/fuse descriptor (fuse_session_custom_io). They call read(2) and
 * writev(2) and hand every request and reply through unchanged, except the
 * one reply to the kernel's INIT, which gets that bit.
 *
 * Invariants:
 *  1. Only the reply to the kernel's FUSE_INIT is ever changed: a reply whose
 *     unique is the INIT request's, with no error, protocol major 7, exactly a
 *     header and one fuse_init_out long enough to hold flags2, and
 *     FUSE_INIT_EXT set by libfuse. Only the one bit is set in it; the caller's
 *     buffers are not written (the patched reply is a copy).
 *  2. The bit is asked for only when the kernel offered it: its INIT carried
 *     FUSE_INIT_EXT, protocol 7.39 or later, and the bit in flags2.
 *  3. fuseinit_granted is true only once that reply was written to the
 *     kernel; ops.c opens read-only files with direct_io only then. In every
 *     other case (an older kernel, a reply of another shape, a failed write)
 *     read-only handles keep the page cache, as before, and mmap works.
 *
 * Thread-safe: libfuse's worker threads call the hooks concurrently; after the
 * INIT reply the hooks cost one atomic load. */
#ifndef CKPTFS_FUSEINIT_H
#define CKPTFS_FUSEINIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* 1ULL << 36 in the kernel's include/uapi/linux/fuse.h (7.39); the system's
 * header may predate it. */
#define FUSEINIT_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#define FUSEINIT_MIN_MINOR 39
#define FUSEINIT_OUT_MAX 128 /* the longest fuse_init_out copied (today's is 64 bytes) */

enum fuseinit_outcome {
	FUSEINIT_PENDING,     /* no INIT reply written yet */
	FUSEINIT_GRANTED,     /* the reply with the bit went out */
	FUSEINIT_NOT_OFFERED, /* the kernel did not offer it (older kernel) */
	FUSEINIT_NOT_PATCHED, /* the reply was not of the expected shape: left alone */
	FUSEINIT_WRITE_FAILED /* writing the patched reply failed */
};

struct fuseinit {
	pthread_mutex_t lock;
	int done;             /* atomic: the INIT reply went out; the hooks only pass through */
	bool seen;            /* the kernel's INIT was read */
	bool offered;         /* ... and it offered the bit (invariant 2) */
	uint64_t unique;      /* its unique */
	uint32_t major, minor; /* the kernel's protocol version */
	int outcome;          /* enum fuseinit_outcome; atomic */
	const char *why;      /* NOT_PATCHED: what did not match */
};

void fuseinit_init(struct fuseinit *fi);

/* A request of n bytes read from /dev/fuse into buf. */
void fuseinit_saw_request(struct fuseinit *fi, const void *buf, size_t n);

/* A reply about to be written as iov[0..count). If it is the INIT reply to
 * patch, fills out[0..count) (iov with its fuse_init_out replaced by arg, a
 * copy with the bit set) and returns true: write out instead, then call
 * fuseinit_reply_written. Returns false for every other reply (write iov). */
bool fuseinit_patch_reply(struct fuseinit *fi, const struct iovec *iov, int count,
			  struct iovec *out, unsigned char arg[FUSEINIT_OUT_MAX]);

/* The reply fuseinit_patch_reply patched was written: res as writev returned. */
void fuseinit_reply_written(struct fuseinit *fi, ssize_t res);

/* Whether MAP_SHARED mmaps of direct_io handles work (invariant 3). */
bool fuseinit_granted(struct fuseinit *fi);

/* The outcome, and what it was for the log ("FUSE protocol 7.45:
 * FUSE_DIRECT_IO_ALLOW_MMAP granted"; NULL while PENDING). */
enum fuseinit_outcome fuseinit_outcome(struct fuseinit *fi);
const char *fuseinit_describe(struct fuseinit *fi, char *buf, size_t size);

#endif
