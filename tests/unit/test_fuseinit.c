/* fuseinit: FUSE_DIRECT_IO_ALLOW_MMAP is added to the INIT reply only when
 * the kernel offered it, only to that reply, only that one bit, and the
 * daemon uses direct_io for read-only opens only once the reply went out. */
#include <criterion/criterion.h>

#include <errno.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <string.h>

#include "fuseinit.h"

#define ALLOW_MMAP2 ((uint32_t)(FUSEINIT_DIRECT_IO_ALLOW_MMAP >> 32)) /* in flags2 */

/* A request as read from /dev/fuse: header + fuse_init_in (arg_len bytes of it). */
struct fi_req {
	unsigned char buf[sizeof(struct fuse_in_header) + sizeof(struct fuse_init_in)];
	size_t len;
};

static struct fi_req fi_init_req(uint64_t unique, uint32_t opcode, uint32_t major, uint32_t minor,
				 uint32_t flags, uint32_t flags2, size_t arg_len)
{
	struct fi_req r;
	memset(&r, 0, sizeof(r));
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + arg_len), .opcode = opcode,
				    .unique = unique, .nodeid = 0 };
	struct fuse_init_in in = { .major = major, .minor = minor, .max_readahead = 131072,
				   .flags = flags, .flags2 = flags2 };
	memcpy(r.buf, &h, sizeof(h));
	memcpy(r.buf + sizeof(h), &in, arg_len);
	r.len = sizeof(h) + arg_len;
	return r;
}

/* The kernel of this machine (6.18): 7.45, FUSE_INIT_EXT, the bit in flags2. */
static struct fi_req fi_kernel_init(uint64_t unique)
{
	return fi_init_req(unique, FUSE_INIT, 7, 45, FUSE_ASYNC_READ | FUSE_INIT_EXT,
			   ALLOW_MMAP2 | 0x3, sizeof(struct fuse_init_in));
}

/* libfuse 3.14's reply: header + fuse_init_out, FUSE_INIT_EXT echoed. */
struct fi_reply {
	struct fuse_out_header h;
	struct fuse_init_out out;
	struct iovec iov[2];
};

static void fi_reply(struct fi_reply *r, uint64_t unique, int32_t error, uint32_t flags,
		     size_t out_len)
{
	memset(r, 0, sizeof(*r));
	r->out.major = 7;
	r->out.minor = 38;
	r->out.max_readahead = 1 << 20;
	r->out.flags = flags;
	r->out.flags2 = 0x1; /* some other bit libfuse set */
	r->out.max_write = 1 << 20;
	r->out.time_gran = 1;
	r->out.max_pages = 256;
	r->h.len = (uint32_t)(sizeof(r->h) + out_len);
	r->h.error = error;
	r->h.unique = unique;
	r->iov[0].iov_base = &r->h;
	r->iov[0].iov_len = sizeof(r->h);
	r->iov[1].iov_base = &r->out;
	r->iov[1].iov_len = out_len;
}

#define LIBFUSE_FLAGS (FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_INIT_EXT)

Test(fuseinit, the_init_reply_gets_the_one_bit_when_the_kernel_offers_it)
{
	struct fuseinit fi;
	fuseinit_init(&fi);
	struct fi_req rq = fi_kernel_init(2);
	fuseinit_saw_request(&fi, rq.buf, rq.len);
	struct fi_reply r;
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	struct fuse_init_out before = r.out;
	struct iovec out[2];
	unsigned char arg[FUSEINIT_OUT_MAX];
	cr_assert(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	cr_assert_not(fuseinit_granted(&fi), "granted before the reply was written");
	cr_assert_eq(memcmp(&r.out, &before, sizeof(before)), 0, "the caller's reply was changed");
	cr_assert_eq(out[0].iov_base, r.iov[0].iov_base);
	cr_assert_eq(out[0].iov_len, r.iov[0].iov_len);
	cr_assert_eq(out[1].iov_base, (void *)arg);
	cr_assert_eq(out[1].iov_len, sizeof(struct fuse_init_out));
	struct fuse_init_out after;
	memcpy(&after, arg, sizeof(after));
	cr_assert_eq(after.flags2, before.flags2 | ALLOW_MMAP2);
	after.flags2 = before.flags2;
	cr_assert_eq(memcmp(&after, &before, sizeof(before)), 0, "more than the one bit changed");
	fuseinit_reply_written(&fi, (ssize_t)r.h.len);
	cr_assert(fuseinit_granted(&fi));
	cr_assert_eq(fuseinit_outcome(&fi), FUSEINIT_GRANTED);
	char line[256];
	cr_assert_not_null(fuseinit_describe(&fi, line, sizeof(line)));
	cr_assert_not_null(strstr(line, "7.45"), "%s", line);
	cr_assert_not_null(strstr(line, "granted"), "%s", line);
}

Test(fuseinit, every_other_reply_passes_through)
{
	struct fuseinit fi;
	fuseinit_init(&fi);
	struct fi_reply r;
	struct iovec out[2];
	unsigned char arg[FUSEINIT_OUT_MAX];
	/* before the INIT was read: nothing to match */
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	/* a request of another opcode is not an INIT */
	struct fi_req rd = fi_init_req(4, FUSE_READ, 7, 45, FUSE_INIT_EXT, ALLOW_MMAP2,
				       sizeof(struct fuse_init_in));
	fuseinit_saw_request(&fi, rd.buf, rd.len);
	fi_reply(&r, 4, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	/* the INIT, then a reply to another request */
	struct fi_req rq = fi_kernel_init(6);
	fuseinit_saw_request(&fi, rq.buf, rq.len);
	fi_reply(&r, 8, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	/* a header of another size (a notification has unique 0 anyway) */
	fi_reply(&r, 6, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	r.iov[0].iov_len = 8;
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	cr_assert_eq(fuseinit_outcome(&fi), FUSEINIT_PENDING);
	/* the INIT reply itself, then the same unique again: left alone */
	fi_reply(&r, 6, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	cr_assert(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	fuseinit_reply_written(&fi, (ssize_t)r.h.len);
	cr_assert(fuseinit_granted(&fi));
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	/* a second INIT after the first was answered changes nothing */
	struct fi_req again = fi_init_req(10, FUSE_INIT, 7, 45, FUSE_INIT_EXT, 0,
					  sizeof(struct fuse_init_in));
	fuseinit_saw_request(&fi, again.buf, again.len);
	fi_reply(&r, 10, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	cr_assert(fuseinit_granted(&fi));
}

/* The kernel's INIT in req, libfuse's reply as given: not patched, and
 * read-only opens keep the page cache. */
static void fi_expect_left_alone(const struct fi_req *rq, struct fi_reply *r, int count,
				 enum fuseinit_outcome outcome, const char *what)
{
	struct fuseinit fi;
	fuseinit_init(&fi);
	fuseinit_saw_request(&fi, rq->buf, rq->len);
	struct iovec out[2];
	unsigned char arg[FUSEINIT_OUT_MAX];
	cr_assert_not(fuseinit_patch_reply(&fi, r->iov, count, out, arg), "%s: patched", what);
	cr_assert_eq(fuseinit_outcome(&fi), outcome, "%s: outcome %d", what, fuseinit_outcome(&fi));
	cr_assert_not(fuseinit_granted(&fi), "%s: granted", what);
	char line[256];
	cr_assert_not_null(fuseinit_describe(&fi, line, sizeof(line)), "%s", what);
	cr_assert_null(strstr(line, "granted"), "%s: %s", what, line);
}

Test(fuseinit, a_kernel_that_does_not_offer_it_is_not_asked)
{
	struct fi_reply r;
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	struct fi_req no_bit = fi_init_req(2, FUSE_INIT, 7, 45, FUSE_INIT_EXT, 0x3,
					   sizeof(struct fuse_init_in));
	fi_expect_left_alone(&no_bit, &r, 2, FUSEINIT_NOT_OFFERED, "no bit");
	struct fi_req old_minor = fi_init_req(2, FUSE_INIT, 7, 38, FUSE_INIT_EXT, ALLOW_MMAP2,
					      sizeof(struct fuse_init_in));
	fi_expect_left_alone(&old_minor, &r, 2, FUSEINIT_NOT_OFFERED, "7.38");
	struct fi_req no_ext = fi_init_req(2, FUSE_INIT, 7, 45, FUSE_ASYNC_READ, ALLOW_MMAP2,
					   sizeof(struct fuse_init_in));
	fi_expect_left_alone(&no_ext, &r, 2, FUSEINIT_NOT_OFFERED, "no FUSE_INIT_EXT");
	/* a kernel before 7.36 sends 16 bytes: no flags2 */
	struct fi_req short_in = fi_init_req(2, FUSE_INIT, 7, 45, FUSE_INIT_EXT, ALLOW_MMAP2, 16);
	fi_expect_left_alone(&short_in, &r, 2, FUSEINIT_NOT_OFFERED, "16-byte fuse_init_in");
	struct fi_req major8 = fi_init_req(2, FUSE_INIT, 8, 45, FUSE_INIT_EXT, ALLOW_MMAP2,
					   sizeof(struct fuse_init_in));
	fi_expect_left_alone(&major8, &r, 2, FUSEINIT_NOT_OFFERED, "major 8");
}

Test(fuseinit, a_reply_of_another_shape_is_left_alone)
{
	struct fi_req rq = fi_kernel_init(2);
	struct fi_reply r;
	fi_reply(&r, 2, -EPROTO, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	fi_expect_left_alone(&rq, &r, 2, FUSEINIT_NOT_PATCHED, "error reply");
	fi_reply(&r, 2, 0, FUSE_ASYNC_READ, sizeof(struct fuse_init_out));
	fi_expect_left_alone(&rq, &r, 2, FUSEINIT_NOT_PATCHED, "no FUSE_INIT_EXT in the reply");
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, 24); /* FUSE_COMPAT_22_INIT_OUT_SIZE: no flags2 */
	fi_expect_left_alone(&rq, &r, 2, FUSEINIT_NOT_PATCHED, "24-byte fuse_init_out");
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	fi_expect_left_alone(&rq, &r, 1, FUSEINIT_NOT_PATCHED, "header only");
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	r.out.major = 8;
	fi_expect_left_alone(&rq, &r, 2, FUSEINIT_NOT_PATCHED, "major 8 reply");
}

Test(fuseinit, a_failed_write_grants_nothing)
{
	struct fuseinit fi;
	fuseinit_init(&fi);
	struct fi_req rq = fi_kernel_init(2);
	fuseinit_saw_request(&fi, rq.buf, rq.len);
	struct fi_reply r;
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	struct iovec out[2];
	unsigned char arg[FUSEINIT_OUT_MAX];
	cr_assert(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	fuseinit_reply_written(&fi, -1);
	cr_assert_not(fuseinit_granted(&fi));
	cr_assert_eq(fuseinit_outcome(&fi), FUSEINIT_WRITE_FAILED);
	cr_assert_not(fuseinit_granted(NULL));
}

Test(fuseinit, short_and_foreign_requests_are_ignored)
{
	struct fuseinit fi;
	fuseinit_init(&fi);
	struct fi_req rq = fi_kernel_init(2);
	fuseinit_saw_request(&fi, rq.buf, 20); /* shorter than a header */
	fuseinit_saw_request(&fi, rq.buf, sizeof(struct fuse_in_header) + 8); /* no flags */
	struct fi_reply r;
	fi_reply(&r, 2, 0, LIBFUSE_FLAGS, sizeof(struct fuse_init_out));
	struct iovec out[2];
	unsigned char arg[FUSEINIT_OUT_MAX];
	cr_assert_not(fuseinit_patch_reply(&fi, r.iov, 2, out, arg));
	cr_assert_eq(fuseinit_outcome(&fi), FUSEINIT_PENDING);
	char line[64];
	cr_assert_null(fuseinit_describe(&fi, line, sizeof(line)));
}
