/* ops — the FUSE low-level operation table of ckptfs (see ops.c). */
#ifndef CKPTFS_OPS_H
#define CKPTFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops ckptfs_ops;

/* After the mount, before the session loop: raises the kernel's readahead
 * window of the mount at mountpoint to what ops asks for (it starts at
 * 128 KiB, so sequential reads arrive as 128 KiB FUSE_READs). Needs root; logs
 * and leaves the default otherwise. */
void ops_tune_readahead(const char *mountpoint);

#endif
