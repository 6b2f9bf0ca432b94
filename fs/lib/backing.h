/* backing — BACKING, the shared store where durable data lives: a directory
 * (in production an NFS mount) or an nfs://server/export/path URL reached with
 * libnfs (NFSv3). Everything else in ckptfs sees only these calls.
 *
 * Paths are relative to BACKING's root ("chunks/ab/cd/abcd…",
 * "manifests/gen/12.3.ckm"), '/'-separated, never absolute, never with "..".
 *
 * Invariants:
 *  1. backing_put is atomic and durable: the data goes to a temporary name
 *     under tmp/, is fsync'd, renamed over relpath, and the directory is
 *     fsync'd (the rdbSave pattern). A reader sees the old file or the whole
 *     new one, never a part; after a successful return it survives a crash of
 *     the server. Missing parent directories are created.
 *  1b. backing_put_unsynced is atomic like backing_put, but durable only once
 *     a later backing_sync called by the same thread has returned 0 (the
 *     directory backend fsyncs nothing until then; over nfs:// every put is
 *     committed and backing_sync does nothing). backing_sync is a barrier for
 *     what its thread put unsynced: on a filesystem whose syncfs reaches
 *     stable storage (local disks, kernel NFS) one syncfs; on one where it
 *     does not (FUSE, 9p: the kernel does not pass it on) an fsync of each
 *     such file and then one fsync of each distinct directory that got a new
 *     entry (backing.c 9). A batch of puts then costs one syncfs, or one fsync
 *     per file plus one per directory, instead of two fsyncs per file. A file
 *     already at relpath is replaced only by a durable put, so a crash before
 *     the sync cannot damage what was durable.
 *  1c. backing_put_link makes the same put out of a hard link to a file of
 *     the caller, when BACKING is a directory on the caller's filesystem: one
 *     copy of the bytes on the disk, no bytes read or written. The two names
 *     then share an inode: damage to one is damage to both.
 *  2. No call blocks forever: each fails after the timeout given at open
 *     (-ETIMEDOUT, or the server's error) when BACKING does not answer, and a
 *     later call reconnects by itself.
 *  3. Every call is safe from many threads at once.
 *  4. backing_get_range reads exactly the len bytes at off of one regular
 *     file, or hands out nothing: a file that ends before off+len is
 *     -ERANGE (no partial read is ever returned), and what is at relpath
 *     or on its way answers exactly as backing_get answers it (-ENOENT,
 *     -ELOOP, -ENOTDIR, -EISDIR, -EINVAL), never followed nor read. It reads
 *     only the range: over nfs:// one LOOKUP of the last name under the
 *     kept directory handle and the READs at off (backing_nfs.c 6), on a
 *     directory BACKING an open beneath the root and a pread loop. A member
 *     of a pack file (fs/lib/pack.h) is read this way (bkobj.h B5).
 *
 * Errors are 0 or a negative errno; -ENOENT means "not there" and is not
 * logged, other failures are logged with the path and the reason. An NFS
 * server that does not answer gives -ETIMEDOUT, a lost or refused connection
 * -EIO; both mean "try again later", not "the data is bad".
 *
 * Backends: fs/lib/backing.c (dispatch, directory), fs/lib/backing_nfs.c (libnfs,
 * NFSv3, a pool of up to 4 connections). Layout kept by the module itself:
 * tmp/ holds temporaries "<host>.<pid>-<pidns>.<random>" and
 * "probe.<host>.<pid>-<pidns>.<random>" (unguessable, created exclusively;
 * nothing is followed: backing.c 2, 8); open removes those of dead processes
 * of this host and pid namespace. Tested by
 * tests/unit/test_backing.c (directory) and tests/nfs/ (nfs://, ganesha),
 * backing_get_range by both (test_backing.c "range", t_nfs.sh "range"). */
#ifndef CKPTFS_BACKING_H
#define CKPTFS_BACKING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backing;

/* spec: an absolute directory path, or nfs://server[:port]/export/path
 * (port: the NFS port; libnfs URL arguments may follow, e.g. ?mountport=N,
 * which spares the portmapper; NFSv3 is used whatever they say; the path is
 * the export's real path on the server, or a directory below it).
 * timeout_ms bounds every call (0: 30 s): for nfs://, each RPC and connect;
 * a directory on a kernel NFS mount is bounded only by its mount options. Fails with a logged line naming the
 * spec and the reason (not a directory, cannot mount the export, ...). */
int backing_open(const char *spec, unsigned timeout_ms, struct backing **out);
void backing_close(struct backing *b); /* NULL is allowed */
const char *backing_spec(const struct backing *b); /* as given, for messages */
bool backing_is_nfs(const struct backing *b);

/* Writes len bytes as relpath (invariant 1). */
int backing_put(struct backing *b, const char *relpath, const void *data, size_t len);

/* Invariant 1b: put now, durable after the next successful backing_sync of
 * the same thread. */
int backing_put_unsynced(struct backing *b, const char *relpath, const void *data, size_t len);
int backing_sync(struct backing *b);
/* True when backing_sync is one syncfs (a directory on a filesystem that
 * passes syncfs to stable storage): then a batch of large objects costs no
 * more to sync than one. False for nfs:// and for FUSE or 9p directories. */
bool backing_sync_is_syncfs(const struct backing *b);

/* The number of upload threads that suits this BACKING when the user gave
 * none (-o upload_threads=N wins): 8 where every operation is a round trip
 * to a server (nfs://, a directory on NFS, CIFS, 9p, Ceph, Lustre, GPFS, AFS
 * or FUSE, by statfs type), so that puts overlap their waits; 2 on a local
 * filesystem, where more threads only contend for the disk and the CPU. */
unsigned backing_upload_threads(const struct backing *b);

/* What the directory backend has asked of BACKING's filesystem since open:
 * for the bench and the tests (all 0 over nfs://, which commits per put,
 * but nfs_rpcs). */
struct backing_counts {
	uint64_t file_fsyncs; /* fsync of a file (an object, a temporary) */
	uint64_t dir_fsyncs;  /* fsync of a directory */
	uint64_t syncfs;      /* backing_sync as one syncfs */
	uint64_t renames;     /* rename and link into place */
	uint64_t walked;      /* path components looked up to open a directory for a */
	                      /* put, move, mkdir or remove of a temporary (each a round */
	                      /* trip on a FUSE or network BACKING; reads are not counted); */
	                      /* backing.c 10: a put into a directory held open walks none */
	uint64_t nfs_rpcs;    /* nfs:// only: NFS RPCs sent, all types, list's excepted */
	                      /* (backing_nfs.c 6: an object's get is a LOOKUP and its READs) */
};
void backing_get_counts(const struct backing *b, struct backing_counts *out);

/* Invariant 1c: puts relpath as a hard link to the finished file src_rel
 * under dirfd (a chunk object of the cache, which nobody changes in place)
 * instead of a copy of its bytes: the same temporary, fsync, rename and
 * directory fsync as backing_put (sync true) or backing_put_unsynced (sync
 * false), so invariants 1 and 1b hold alike. -EXDEV, with nothing done, when
 * a link is impossible (nfs://, another filesystem): the caller copies.
 * -ENOENT, unlogged, with nothing done, when src_rel is gone (the caller
 * says whether that is an error); a src_rel replaced by rename meanwhile is
 * linked under its new inode. */
int backing_put_link(struct backing *b, const char *relpath, int dirfd, const char *src_rel,
		     bool sync);
/* False once backing_put_link can only answer -EXDEV (nfs://, or a link was
 * refused); true before the first try. */
bool backing_can_link(struct backing *b);

/* Creates relpath holding data only if no file has that name: -EEXIST,
 * unlogged and with nothing changed, otherwise. Of several callers racing for
 * one relpath (threads, processes, nodes), exactly one gets 0. Durable like
 * backing_put: a temporary is written and fsync'd, then hard-linked as
 * relpath (link(2), NFSv3 LINK: both refuse an existing name) and removed.
 * For small files that name their writer (fs/lib/claim.c): an NFS LINK repeated
 * after a lost reply answers EEXIST, so relpath already holding exactly data
 * counts as success. */
int backing_put_new(struct backing *b, const char *relpath, const void *data, size_t len);

/* Renames from to to (replacing to), durably. -ENOENT, unlogged, when from
 * is not there: of several callers renaming one name, one succeeds. */
int backing_move(struct backing *b, const char *from, const char *to);

/* Reads the whole of relpath into buf (capacity cap); *len gets its size.
 * -ENOENT if absent, -EFBIG if larger than cap, -EINVAL for an invalid
 * relpath. Something other than a regular file at a valid relpath is never
 * followed nor read, and answers by what it is, alike on both backends:
 * -ELOOP a symlink at relpath or on its way, -ENOTDIR a non-directory on its
 * way, -EISDIR a directory, -EINVAL a FIFO, socket or device (an NFS
 * server's own NFS3ERR_INVAL is -EPROTO, not this). bkobj.h B4 counts these
 * as a verdict on a chunk's object. */
int backing_get(struct backing *b, const char *relpath, void *buf, size_t cap, size_t *len);

/* Invariant 4: reads the len bytes at offset off of the regular file
 * relpath into buf (len bytes): 0 with all of them, or an error with buf's
 * contents unspecified. -ERANGE when the file is shorter than off+len (off
 * and len of any size: no overflow); -ENOENT, -ELOOP, -ENOTDIR, -EISDIR,
 * -EINVAL as backing_get answers them (an invalid relpath is -EINVAL too,
 * logged "invalid path"); other errors as for backing_get (-ETIMEDOUT,
 * -EIO: try again later). -ENOENT is not logged; -ERANGE is logged with the
 * offset and length. len 0 reads nothing but still checks what is there. */
int backing_get_range(struct backing *b, const char *relpath, uint64_t off, size_t len,
		      void *buf);

/* Size of relpath; -ENOENT if absent. */
int backing_stat(struct backing *b, const char *relpath, uint64_t *size);

/* What is at relpath, unlogged (for a name whose kind is the answer: the
 * claim's marker, fs/lib/claim.h 15): 0 nothing, 1 a regular file (its
 * size in *size), 2 a directory, or -errno (-ELOOP a symlink, -EINVAL
 * another kind, -ENOTDIR a non-directory on its way, BACKING's error). */
int backing_kind(struct backing *b, const char *relpath, uint64_t *size);

/* Removes relpath; absent is success. */
int backing_remove(struct backing *b, const char *relpath);

/* Calls fn for each entry name of directory reldir ("" is the root), "." and
 * ".." excluded, in no particular order; fn returning non-zero stops the walk
 * and is returned. -ENOENT if reldir does not exist. */
typedef int (*backing_list_fn)(void *arg, const char *name);
int backing_list(struct backing *b, const char *reldir, backing_list_fn fn, void *arg);

/* The mount-time health check: writes a probe file under tmp/, fsyncs it,
 * reads it back and compares, renames it, deletes it. On failure returns the
 * error and writes one line into msg naming the step, the path and the reason
 * ("BACKING nfs://127.0.0.1/export: rename tmp/probe.X → tmp/probe.X.done
 * failed: Permission denied"). */
int backing_probe(struct backing *b, char *msg, size_t msgsize);

#endif
