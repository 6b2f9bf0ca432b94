/* ops — the FUSE low-level operation table of ckptfs (see ops.c): the
 * adapter between the kernel and the namespace (ns.h). */
#ifndef CKPTFS_OPS_H
#define CKPTFS_OPS_H

#include <fuse_lowlevel.h>
#include <stdbool.h>

extern const struct fuse_lowlevel_ops ckptfs_ops;

struct ns;
struct fuseinit;
struct leasekeep;
struct claim;

/* The FUSE session's userdata: the namespace, and what the adapter itself
 * needs to decide open flags and answer statfs and the root's xattrs. ns may
 * be set after fuse_session_new, before the session loop starts (no request
 * arrives before). */
struct ops_context {
	struct ns *ns;
	struct fuseinit *fuse_init; /* may read-only opens use direct_io */
	bool read_cache;            /* -o read_cache: read-only opens keep the page cache */
	const char *cache;          /* CACHE: statfs, user.ckptfs.cache */
	const char *backing;        /* BACKING: user.ckptfs.backing */
	/* shared catalog: changes are refused with EROFS once its lease ran out
	 * (leasekeep.h); NULL alone. Set like ns. */
	const struct leasekeep *lease;
	/* BACKING's claim: changes are refused with EROFS once this daemon is
	 * fenced (fs/lib/claim.h invariant 9); NULL: none. Set like ns. */
	struct claim *claim;
};

/* After the mount, before the session loop: raises the kernel's readahead
 * window of the mount at mountpoint to what ops asks for (it starts at
 * 128 KiB, so sequential reads arrive as 128 KiB FUSE_READs). Needs root; logs
 * and leaves the default otherwise. */
void ops_tune_readahead(const char *mountpoint);

/* Read-only opens of files of at least this size bypass the page cache
 * (direct_io), when the kernel allows mmaps of such opens (fuseinit.h) and
 * -o read_cache is not given. A smaller file costs little to copy into the
 * page cache, and there one read() per request would cost more: a request to
 * the daemon costs far more than a read of a cached page (docs/BENCH.md), and
 * small files (configs, JSON, scripts) are the ones read in small pieces. */
#define OPS_DIRECT_READ_MIN (8u << 20)

#endif
