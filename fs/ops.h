/* ops — the FUSE low-level operation table of ckptfs (see ops.c). */
#ifndef CKPTFS_OPS_H
#define CKPTFS_OPS_H

#include <fuse_lowlevel.h>

extern const struct fuse_lowlevel_ops ckptfs_ops;

#endif
