/* ops — the FUSE low-level operation table of ckptfs (see ops.c). */
#ifndef CKPTFS_OPS_H
#define CKPTFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops ckptfs_ops;

/* The handles the kernel holds open (ops.c, invariant 1): fs->handles. */
struct ops_handles;
int ops_handles_new(struct ops_handles **out);
/* At teardown, once the session loop has returned (no request runs): frees
 * the handles the kernel never released (SIGTERM, or a lazy unmount, with a
 * file open), and the registry. Only the handles: their nodes, writers and
 * generations are ended by node_table_free and gen_policy_shutdown. */
void ops_handles_free(struct ops_handles *hs);

/* After the mount, before the session loop: raises the kernel's readahead
 * window of the mount at mountpoint to what ops asks for (it starts at
 * 128 KiB, so sequential reads arrive as 128 KiB FUSE_READs). Needs root; logs
 * and leaves the default otherwise. */
void ops_tune_readahead(const char *mountpoint);

/* Read-only opens of files of at least this size bypass the page cache
 * (direct_io), when the kernel allows mmaps of such opens (fuseinit.h) and
 * -o read_cache is not given. A smaller file costs little to copy into the
 * page cache, and there one read() per request would cost more: a request to
 * the daemon is ~25 us, a 1-byte read of a cached page ~1 us, and small files
 * (configs, JSON, scripts) are the ones read in small pieces. */
#define OPS_DIRECT_READ_MIN (8u << 20)

#endif
