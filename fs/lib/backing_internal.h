/* backing_internal — what fs/lib/backing.c (the dispatch and the directory
 * backend) needs from fs/lib/backing_nfs.c. Not for other modules: they use
 * backing.h.
 *
 * A backend offers primitives; backing.c builds put, get, probe and the
 * rdbSave pattern out of them once, for both backends:
 *   write_file  create or truncate rel, write all of data, fsync, close
 *   read_file   the whole of rel into buf (-EFBIG past cap)
 *   read_range  exactly len bytes at off of rel into buf (-ERANGE: the file
 *               ends before off+len; backing.h 4)
 *   rename      atomically replace `to` by `from`, durably
 *   link        a second name `to` for the file `from`; -EEXIST if `to` exists
 *   mkdir       one level; an existing directory is success
 * Every primitive returns 0 or a negative errno and logs nothing itself,
 * except connection events (the dispatch logs the failure of the call). A
 * backend may leave a detail of its last failure (libnfs's own message) in a
 * per-thread string, see backing_nfs_detail. */
#ifndef CKPTFS_BACKING_INTERNAL_H
#define CKPTFS_BACKING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backing.h"

struct backing_nfs;

/* url: nfs://server[:port]/export/path[?libnfs-args]. On failure *why gets
 * the reason for the caller's log line. */
int backing_nfs_open(const char *url, unsigned timeout_ms, struct backing_nfs **out, char *why,
		     size_t whysize);
void backing_nfs_close(struct backing_nfs *n);

int backing_nfs_write_file(struct backing_nfs *n, const char *rel, const void *data, size_t len);
int backing_nfs_read_file(struct backing_nfs *n, const char *rel, void *buf, size_t cap,
			  size_t *len);
int backing_nfs_read_range(struct backing_nfs *n, const char *rel, uint64_t off, size_t len,
			   void *buf);
int backing_nfs_stat(struct backing_nfs *n, const char *rel, uint64_t *size);
/* backing_nfs_stat, a directory answered -EISDIR (backing_kind). */
int backing_nfs_stat_kind(struct backing_nfs *n, const char *rel, uint64_t *size);
int backing_nfs_rename(struct backing_nfs *n, const char *from, const char *to);
int backing_nfs_link(struct backing_nfs *n, const char *from, const char *to);
int backing_nfs_unlink(struct backing_nfs *n, const char *rel);
int backing_nfs_mkdir(struct backing_nfs *n, const char *rel);
int backing_nfs_list(struct backing_nfs *n, const char *reldir, backing_list_fn fn, void *arg);

/* libnfs's message for this thread's last failed NFS call ("" if none). */
const char *backing_nfs_detail(void);

/* NFS RPCs sent since open, all types (backing_counts.nfs_rpcs). */
uint64_t backing_nfs_rpcs(struct backing_nfs *n);

/* For tests: makes backing_sync of a directory backend fsync what its thread
 * put unsynced (files, then their directories) instead of one syncfs, as it
 * does by itself on FUSE and 9p (backing.c 9). */
void backing_force_fsync_barrier(struct backing *b, bool on);

#endif
