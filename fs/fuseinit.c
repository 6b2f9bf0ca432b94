/* fuseinit — see fuseinit.h. */
#include "fuseinit.h"

#include <linux/fuse.h>
#include <stdio.h>
#include <string.h>

#ifndef FUSE_INIT_EXT
#define FUSE_INIT_EXT (1 << 30)
#endif

/* Offsets within fuse_init_in and fuse_init_out (protocol 7.36 and later). */
#define IN_FLAGS 12
#define IN_FLAGS2 16
#define OUT_MAJOR 0
#define OUT_FLAGS 12
#define OUT_FLAGS2 32

_Static_assert(sizeof(struct fuse_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct fuse_out_header) == 16, "fuse_out_header");
_Static_assert(offsetof(struct fuse_init_in, flags) == IN_FLAGS, "fuse_init_in.flags");
_Static_assert(offsetof(struct fuse_init_in, flags2) == IN_FLAGS2, "fuse_init_in.flags2");
_Static_assert(offsetof(struct fuse_init_out, flags) == OUT_FLAGS, "fuse_init_out.flags");
_Static_assert(offsetof(struct fuse_init_out, flags2) == OUT_FLAGS2, "fuse_init_out.flags2");
_Static_assert(sizeof(struct fuse_init_out) <= FUSEINIT_OUT_MAX, "fuse_init_out");

static uint32_t fuseinit_u32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

void fuseinit_init(struct fuseinit *fi)
{
	memset(fi, 0, sizeof(*fi));
	pthread_mutex_init(&fi->lock, NULL);
	fi->outcome = FUSEINIT_PENDING;
}

static bool fuseinit_is_done(struct fuseinit *fi)
{
	return __atomic_load_n(&fi->done, __ATOMIC_ACQUIRE) != 0;
}

/* With the lock held. */
static void fuseinit_finish(struct fuseinit *fi, enum fuseinit_outcome outcome, const char *why)
{
	fi->why = why;
	__atomic_store_n(&fi->outcome, (int)outcome, __ATOMIC_RELEASE);
	__atomic_store_n(&fi->done, 1, __ATOMIC_RELEASE);
}

void fuseinit_saw_request(struct fuseinit *fi, const void *buf, size_t n)
{
	if (fuseinit_is_done(fi) || n < sizeof(struct fuse_in_header))
		return;
	struct fuse_in_header h;
	memcpy(&h, buf, sizeof(h));
	if (h.opcode != FUSE_INIT)
		return;
	const unsigned char *arg = (const unsigned char *)buf + sizeof(h);
	size_t arg_len = n - sizeof(h);
	if (arg_len < IN_FLAGS + 4) /* not even flags: protocol < 7.6 */
		return;
	pthread_mutex_lock(&fi->lock);
	if (!fi->done) {
		fi->seen = true;
		fi->unique = h.unique;
		fi->major = fuseinit_u32(arg);
		fi->minor = fuseinit_u32(arg + 4);
		uint32_t flags = fuseinit_u32(arg + IN_FLAGS);
		uint32_t flags2 = arg_len >= IN_FLAGS2 + 4 ? fuseinit_u32(arg + IN_FLAGS2) : 0;
		fi->offered = fi->major == 7 && fi->minor >= FUSEINIT_MIN_MINOR &&
			      (flags & FUSE_INIT_EXT) && arg_len >= IN_FLAGS2 + 4 &&
			      (flags2 & (uint32_t)(FUSEINIT_DIRECT_IO_ALLOW_MMAP >> 32));
	}
	pthread_mutex_unlock(&fi->lock);
}

bool fuseinit_patch_reply(struct fuseinit *fi, const struct iovec *iov, int count,
			  struct iovec *out, unsigned char arg[FUSEINIT_OUT_MAX])
{
	if (fuseinit_is_done(fi) || count < 1 || iov[0].iov_len != sizeof(struct fuse_out_header))
		return false;
	struct fuse_out_header h;
	memcpy(&h, iov[0].iov_base, sizeof(h));
	pthread_mutex_lock(&fi->lock);
	if (fi->done || !fi->seen || h.unique != fi->unique) {
		pthread_mutex_unlock(&fi->lock);
		return false; /* not the INIT reply */
	}
	/* the INIT reply: patched now or never (invariant 1) */
	const char *why = NULL;
	if (!fi->offered)
		why = "not offered";
	else if (h.error != 0)
		why = "INIT failed";
	else if (count != 2)
		why = "reply not one fuse_init_out";
	else if (iov[1].iov_len < OUT_FLAGS2 + 4 || iov[1].iov_len > FUSEINIT_OUT_MAX)
		why = "fuse_init_out of an unexpected length";
	else if (fuseinit_u32(iov[1].iov_base) != 7)
		why = "reply not protocol 7";
	else if (!(fuseinit_u32((const unsigned char *)iov[1].iov_base + OUT_FLAGS) & FUSE_INIT_EXT))
		why = "reply without FUSE_INIT_EXT";
	if (why) {
		fuseinit_finish(fi, fi->offered ? FUSEINIT_NOT_PATCHED : FUSEINIT_NOT_OFFERED, why);
		pthread_mutex_unlock(&fi->lock);
		return false;
	}
	memset(arg, 0, FUSEINIT_OUT_MAX);
	memcpy(arg, iov[1].iov_base, iov[1].iov_len);
	uint32_t flags2 = fuseinit_u32(arg + OUT_FLAGS2) | (uint32_t)(FUSEINIT_DIRECT_IO_ALLOW_MMAP >> 32);
	memcpy(arg + OUT_FLAGS2, &flags2, sizeof(flags2));
	out[0] = iov[0];
	out[1].iov_base = arg;
	out[1].iov_len = iov[1].iov_len;
	pthread_mutex_unlock(&fi->lock); /* the caller writes, then fuseinit_reply_written */
	return true;
}

void fuseinit_reply_written(struct fuseinit *fi, ssize_t res)
{
	pthread_mutex_lock(&fi->lock);
	if (!fi->done)
		fuseinit_finish(fi, res >= 0 ? FUSEINIT_GRANTED : FUSEINIT_WRITE_FAILED,
				res >= 0 ? NULL : "writev failed");
	pthread_mutex_unlock(&fi->lock);
}

bool fuseinit_granted(struct fuseinit *fi)
{
	return fi && __atomic_load_n(&fi->outcome, __ATOMIC_ACQUIRE) == FUSEINIT_GRANTED;
}

enum fuseinit_outcome fuseinit_outcome(struct fuseinit *fi)
{
	return (enum fuseinit_outcome)__atomic_load_n(&fi->outcome, __ATOMIC_ACQUIRE);
}

const char *fuseinit_describe(struct fuseinit *fi, char *buf, size_t size)
{
	pthread_mutex_lock(&fi->lock);
	const char *what = NULL;
	switch ((enum fuseinit_outcome)fi->outcome) {
	case FUSEINIT_PENDING:
		break;
	case FUSEINIT_GRANTED:
		what = "FUSE_DIRECT_IO_ALLOW_MMAP granted";
		break;
	case FUSEINIT_NOT_OFFERED:
		what = "FUSE_DIRECT_IO_ALLOW_MMAP not offered by the kernel";
		break;
	case FUSEINIT_NOT_PATCHED:
	case FUSEINIT_WRITE_FAILED:
		what = "FUSE_DIRECT_IO_ALLOW_MMAP not asked for";
		break;
	}
	if (what)
		snprintf(buf, size, "FUSE protocol %u.%u: %s%s%s%s", fi->major, fi->minor, what,
			 fi->why ? " (" : "", fi->why ? fi->why : "", fi->why ? ")" : "");
	pthread_mutex_unlock(&fi->lock);
	return what ? buf : NULL;
}
