/* backing — the dispatch of backing.h over two backends, and the directory
 * backend itself; the NFS backend (libnfs) is fs/lib/backing_nfs.c.
 *
 * Both backends offer the primitives of backing_internal.h; this file builds
 * the calls of backing.h out of them once:
 *
 *   put:   write_file tmp/<host>.<pid>.<n>   (write all, fsync, close)
 *          rename tmp/… → relpath            (+ fsync of relpath's directory)
 *            └ -ENOENT: mkdir -p the parent (each new directory's parent
 *              fsync'd), rename again
 *          any failure: unlink the temporary, log, return the error
 *   probe: write_file, read_file + compare, rename, unlink, each step named.
 *   get_range: read_range (backing.h 4): the same kind checks as get, then
 *          exactly the bytes asked (a pack's member, bkobj.h B5).
 *   put_new: write_file tmp/…, link tmp/… → relpath (EEXIST: someone's
 *          already; over NFS, one holding our very bytes is ours: a LINK
 *          retransmitted after a lost reply), unlink the temporary.
 *   move:  rename, durably; ENOENT unlogged.
 *
 * Invariants (numbers of backing.h):
 *  1. A relpath only ever changes by rename of a complete, fsync'd temporary
 *     (so readers see old or new bytes), and put returns 0 only after the
 *     rename and the fsync of the directory holding it.
 *  2. Temporary names are unique per host, process and call and cannot be
 *     guessed: "<host>.<pid>-<pidns>.<64 random bits>" (safeopen.h 3; pidns:
 *     the inode of /proc/self/ns/pid, "-<pidns>" absent when unknown),
 *     created with O_EXCL, so a name planted by someone else fails the put
 *     instead of being written through; at open, those left by dead
 *     processes of this host are removed: a pid looked up only in the pid
 *     namespace it names (a container on this kernel with its own pid
 *     namespace sees other processes: claim.h invariant 4); a name without
 *     "-<pidns>" (an older ckptfs's) as before, by the pid alone.
 *  3. Every relpath is checked before any I/O: relative, non-empty, no empty,
 *     "." or ".." component (so never "//", a leading or trailing '/', or an
 *     escape from the root): -EINVAL otherwise.
 *  4. A failed put or probe removes its temporary, except when BACKING does
 *     not answer (-ETIMEDOUT, -EIO): removing it then would cost another
 *     timeout, so the name is kept (a bounded list) and removed by a later
 *     put; what is left when the process dies, open removes.
 *  5. The directory backend does everything relative to one O_DIRECTORY fd
 *     (openat & co), so it is thread-safe and unaffected by chdir.
 *  6. A linked put (backing_put_link) differs from a put only in how the
 *     temporary gets its bytes: it is a hard link to the caller's finished
 *     file, fsync'd like a written one, then renamed the same way. Once a
 *     link has failed with EXDEV (another filesystem, another mount), every
 *     later linked put answers -EXDEV at once; nfs:// always does.
 *  8. Nothing planted in a BACKING directory is followed (shared invariant
 *     7): every path is opened beneath root_fd by safeopen.h (openat2
 *     RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH, or O_NOFOLLOW per component),
 *     and renames, links, mkdirs, unlinks and stats act on the last name
 *     under a parent opened that way; a symlink is -ELOOP. What this backend
 *     creates is private: files 0600, directories 0700. A BACKING others may
 *     write (group/other-writable without the sticky bit, or another user's)
 *     is used, with a warning at open: see docs/DESIGN.md "Trust model".
 *  9. backing_sync is a barrier for what the calling thread put unsynced
 *     (backing.h 1b), never for another thread's puts: the uploader records a
 *     batch durable after its own worker's sync returned. On a filesystem
 *     whose syncfs reaches stable storage it is one syncfs. Where syncfs stops
 *     in the client's kernel (FUSE, 9p, CIFS: bdir_pick_barrier) each
 *     unsynced put leaves, in a per-thread list, its relpath and the
 *     directory that got the new entry (and a directory made unsynced, its
 *     parent's), each with an fd kept open on it (the written temporary, the
 *     directory renamed into: no lookups at the sync; up to
 *     BACKING_PENDING_FDS per thread, past that the put fsyncs at once); the
 *     sync fsyncs each file, then each distinct directory once, and empties
 *     the list even when one fails (the caller then puts the batch again).
 *     So an object is reported durable only after its bytes AND its
 *     directory entry were fsync'd; a batch of puts into one directory costs
 *     one directory fsync instead of one per put.
 *  7. A linked put's source is the caller's: a source that is gone answers
 *     -ENOENT, unlogged, with nothing made (the caller knows whether that is
 *     an error). A source renamed over between linkat's lookup and its link
 *     (the kernel then says ENOENT: the inode looked up lost its last name)
 *     is linked again under its new inode, up to BACKING_LINK_TRIES times.
 * 10. The directory backend keeps directory fds open (tmp/, and the
 *     BACKING_HELD_DIRS directories used last: chunks/, chunks/ab/,
 *     chunks/ab/cd/ leaves, manifests/…) and acts relative to them, so that a
 *     put walks no path: on a BACKING that caches no entry (a FUSE or network
 *     filesystem) every component of a walk is a round trip to its server.
 *     A held fd is as safe as a fresh walk (invariant 8) because:
 *     a. it was opened the way a walk opens (safe_openat beneath the root or
 *        beneath a held ancestor, O_DIRECTORY, no symlink followed), and every
 *        call through it acts on one name (openat O_NOFOLLOW, renameat,
 *        mkdirat, unlinkat, fstatat AT_SYMLINK_NOFOLLOW), never a path;
 *     b. what it names cannot be swapped for something else under it: a
 *        symlink or another directory planted at its name later is never
 *        reached through it (the fd is the inode, not the name), and the
 *        directories this backend makes are 0700 and ours, so nobody but us
 *        and root can move one to another parent (rename(2) of a directory to
 *        a new parent needs write permission on the directory itself): a held
 *        directory stays beneath BACKING's root, as root_fd always has;
 *     c. ckptfs never renames or removes a directory of BACKING (no call of
 *        backing.h does; the cleaners remove files). One removed anyway (an
 *        operator, a test) answers ENOENT (ESTALE over kernel NFS) to a call
 *        through its fd: the call then drops every held fd and is made once
 *        more by fresh walks (bdir_retry), and a mkdir that makes a directory
 *        drops what was held at that name. An "absent" seen through a held
 *        fd is the one answer that could be stale: a put that took relpath
 *        for absent (1b) and then found its directory gone renames durably
 *        if the fresh directory holds relpath (bdir_rename's -EEXIST);
 *     d. someone who can write the parent of a held directory can rename it
 *        in place (BACKING's root writable by others, without the sticky bit:
 *        warned at open), and what is put through the fd then follows it.
 *        They could as well remove or rename the objects themselves: the
 *        trust model (docs/DESIGN.md) grants them that already.
 *     Reads (get, stat, list) walk afresh as before: readdir through a dup
 *     would share the held fd's position, and an absent object must be
 *     absent at its name.
 *
 * Timeouts: the NFS backend bounds every RPC. The directory backend cannot
 * bound a syscall on a hung kernel mount; a directory on NFS should be
 * mounted so that it fails rather than hangs (soft,timeo=…), or use nfs://. */
#define _GNU_SOURCE
#include "backing.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "backing_internal.h"
#include "log.h"
#include "safeopen.h"

#define BACKING_DEFAULT_TIMEOUT_MS 30000u
#define BACKING_TMP_DIR "tmp"
#define BACKING_PROBE_LEN (64 * 1024 + 3) /* > 4 KiB: the size where libnfs's v4 broke */
#define BACKING_MAX_ORPHANS 64
#define BACKING_TMP_NAME 128
#define BACKING_LINK_TRIES 16 /* invariant 7: links of a source renamed over meanwhile */
#define BACKING_FILE_MODE 0600 /* invariant 8: private to the mounting user */
#define BACKING_DIR_MODE 0700
/* Invariant 9: filesystems whose syncfs does not reach the server's disk */
#define BACKING_FUSE_MAGIC 0x65735546L
#define BACKING_V9FS_MAGIC 0x01021997L
#define BACKING_CIFS_MAGIC 0xFF534D42L
#define BACKING_SMB2_MAGIC 0xFE534D42L
#define BACKING_PENDING_FDS 64 /* per thread: fds kept open for its next sync */
#define BACKING_HELD_DIRS 64 /* invariant 10: directory fds kept open (tmp/, recent leaves) */
#define BACKING_HELD_REL 64  /* the longest directory name held ("chunks/ab/cd" is 12) */
/* Upload threads by default (backing_upload_threads): a BACKING served over a
 * network or by a FUSE daemon costs a round trip per operation, so more puts
 * in flight; a local disk is kept at the 2 that suit it. */
#define BACKING_THREADS_LOCAL 2
#define BACKING_THREADS_REMOTE 8
#define BACKING_NFS_MAGIC 0x6969L
#define BACKING_CEPH_MAGIC 0x00C36400L
#define BACKING_LUSTRE_MAGIC 0x0BD00BD0L
#define BACKING_GPFS_MAGIC 0x47504653L
#define BACKING_SMB_MAGIC 0x517BL
#define BACKING_AFS_MAGIC 0x5346414FL

/* Invariant 10: one directory fd kept open, by its name under the root. */
struct bdir_held {
	int fd; /* -1: a free slot */
	uint64_t used; /* held_clock at the last use: the least recent goes first */
	char rel[BACKING_HELD_REL];
};

struct backing {
	char *spec;
	char host[64];
	unsigned long long pidns; /* invariant 2: /proc/self/ns/pid's inode; 0 unknown */
	unsigned timeout_ms;
	struct backing_nfs *nfs; /* NULL: directory backend */
	int root_fd;		 /* directory backend */
	atomic_int link_state;	 /* invariant 6: 0 untried, 1 links work, -1 they cannot */
	bool fsync_barrier;	 /* invariant 9: sync by fsyncs, syncfs would not do */
	bool remote;		 /* a network or FUSE filesystem, or nfs:// (upload threads) */
	uint64_t id;		 /* invariant 9: names this backing in the per-thread lists */
	atomic_ulong n_file_fsyncs, n_dir_fsyncs, n_syncfs, n_renames; /* backing_counts */
	atomic_ulong n_walked;
	pthread_mutex_t held_lock; /* invariant 10 */
	uint64_t held_clock;
	atomic_ulong held_epoch; /* invariant 10c: bumped when bdir_retry drops them */
	struct bdir_held held[BACKING_HELD_DIRS];
	pthread_mutex_t orphan_lock; /* invariant 4 */
	int n_orphans;
	char orphans[BACKING_MAX_ORPHANS][BACKING_TMP_NAME];
};

/* Process-wide, so that two backings on one root never pick one name. */
static atomic_ulong backing_tmp_seq;
static atomic_ulong backing_next_id; /* invariant 9 */

/* ---- paths ---- */

static int backing_check_path(const char *rel, bool allow_root)
{
	if (!rel)
		return -EINVAL;
	if (!rel[0])
		return allow_root ? 0 : -EINVAL;
	if (rel[0] == '/')
		return -EINVAL;
	if (strlen(rel) >= PATH_MAX - 64) /* room for the tmp/ and .done names */
		return -ENAMETOOLONG;
	const char *p = rel;
	while (*p) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (n > NAME_MAX)
			return -ENAMETOOLONG;
		if (!*end)
			break;
		p = end + 1;
		if (!*p)
			return -EINVAL; /* trailing '/' */
	}
	return 0;
}

/* The directory part of rel into buf ("" for a top-level name). */
static void backing_parent(const char *rel, char *buf, size_t size)
{
	const char *slash = strrchr(rel, '/');
	size_t n = slash ? (size_t)(slash - rel) : 0;
	assert(n < size);
	memcpy(buf, rel, n);
	buf[n] = '\0';
}

/* Invariant 2: "tmp/[probe.]<host>.<pid>[-<pidns>].<16 random hex digits>". */
static void backing_tmp_name(const struct backing *b, const char *prefix, char *buf, size_t size)
{
	char head[BACKING_TMP_NAME];
	char ns[24] = "";
	if (b->pidns)
		snprintf(ns, sizeof(ns), "-%llu", b->pidns);
	snprintf(head, sizeof(head), BACKING_TMP_DIR "/%s%s.%ld%s.", prefix, b->host, (long)getpid(),
		 ns);
	atomic_fetch_add(&backing_tmp_seq, 1);
	if (safe_tmpname(buf, size, head) != 0) /* no entropy: still exclusive, only guessable */
		snprintf(buf, size, "%s%lu", head,
			 (unsigned long)atomic_fetch_add(&backing_tmp_seq, 1));
}

static const char *backing_detail(const struct backing *b)
{
	return b->nfs ? backing_nfs_detail() : "";
}

/* ---- the per-thread list of unsynced puts (invariant 9) ---- */

struct bpend_item {
	uint64_t owner; /* backing.id */
	bool dir;	/* a directory that got a new entry; else a file put */
	int fd;		/* open on it (no lookups at the sync), or -1: by rel */
	char *rel;
};

struct bpend {
	size_t n, cap, fds;
	struct bpend_item *v;
	int handoff; /* a temporary written unsynced, kept open for its put */
};

static pthread_key_t bpend_key;
static pthread_once_t bpend_once = PTHREAD_ONCE_INIT;

static void bpend_free(void *p)
{
	struct bpend *l = p;
	if (l->handoff >= 0)
		close(l->handoff);
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].fd >= 0)
			close(l->v[i].fd);
		free(l->v[i].rel);
	}
	free(l->v);
	free(l);
}

static void bpend_key_make(void)
{
	if (pthread_key_create(&bpend_key, bpend_free) != 0)
		abort(); /* out of keys at startup: nothing sensible to go on with */
}

/* This thread's list; NULL if it has none (and !create, or no memory). */
static struct bpend *bpend_get(bool create)
{
	pthread_once(&bpend_once, bpend_key_make);
	struct bpend *l = pthread_getspecific(bpend_key);
	if (!l && create && (l = calloc(1, sizeof(*l))) != NULL) {
		l->handoff = -1;
		if (pthread_setspecific(bpend_key, l) != 0) {
			free(l);
			l = NULL;
		}
	}
	return l;
}

/* This thread's temporary kept open by bdir_write_file, taken (-1: none). */
static int bpend_take_handoff(void)
{
	struct bpend *l = bpend_get(false);
	int fd = l ? l->handoff : -1;
	if (l)
		l->handoff = -1;
	return fd;
}

/* Notes rel (a file, or a directory if dir) for this thread's next
 * backing_sync of b; once per name. fd >= 0: open on it, kept (a dup for a
 * directory, the fd itself for a file) so that the sync needs no lookup; when
 * the thread already holds BACKING_PENDING_FDS, -EMFILE and nothing noted: an
 * fsync of the fd now costs less than one by name later. 0, or -EMFILE,
 * -ENOMEM: the caller syncs now (a file's fd stays the caller's then). A
 * batch holds tens of names, so a scan is cheaper than any index. */
static int bpend_note(struct backing *b, const char *rel, bool dir, int fd)
{
	struct bpend *l = bpend_get(true);
	if (!l)
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].owner == b->id && l->v[i].dir == dir && !strcmp(l->v[i].rel, rel)) {
			if (fd >= 0 && !dir)
				close(fd); /* the same name put twice: the later inode is the one */
			if (!dir && l->v[i].fd >= 0) {
				close(l->v[i].fd);
				l->v[i].fd = -1;
				l->fds--;
			}
			return 0;
		}
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct bpend_item *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	if (fd >= 0 && l->fds >= BACKING_PENDING_FDS)
		return -EMFILE;
	int keep = fd >= 0 && dir ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : fd;
	if (fd >= 0 && keep < 0)
		return -EMFILE;
	char *copy = strdup(rel);
	if (!copy) {
		if (dir && keep >= 0)
			close(keep);
		return -ENOMEM;
	}
	if (keep >= 0)
		l->fds++;
	l->v[l->n++] = (struct bpend_item){ b->id, dir, keep, copy };
	return 0;
}

static void backing_parent(const char *rel, char *buf, size_t size);

/* Invariant 9: the directory holding rel's entry, noted (only where syncfs
 * will not do). 0, or -ENOMEM. */
static int bdir_pending_dir_of(struct backing *b, const char *rel, int dirfd)
{
	if (!b->fsync_barrier)
		return 0;
	char dir[PATH_MAX];
	backing_parent(rel, dir, sizeof(dir));
	return bpend_note(b, dir, true, dirfd);
}

/* An unsynced put of relpath done: noted with its directory, or (no memory)
 * synced now. */
static int bdir_pending_put(struct backing *b, const char *relpath);

/* ---- directories held open (invariant 10) ---- */

/* A dup of the fd held for reldir (the caller closes it), or -1: not held. */
static int bdir_held_get(struct backing *b, const char *reldir)
{
	int fd = -1;
	pthread_mutex_lock(&b->held_lock);
	for (int i = 0; i < BACKING_HELD_DIRS; i++)
		if (b->held[i].fd >= 0 && !strcmp(b->held[i].rel, reldir)) {
			b->held[i].used = ++b->held_clock;
			fd = fcntl(b->held[i].fd, F_DUPFD_CLOEXEC, 0);
			break;
		}
	pthread_mutex_unlock(&b->held_lock);
	return fd;
}

/* Holds a dup of fd, just opened on reldir, in place of the least recently
 * used (or of reldir's own, opened meanwhile by another thread). */
static void bdir_held_put(struct backing *b, const char *reldir, int fd)
{
	if (strlen(reldir) >= BACKING_HELD_REL)
		return;
	int keep = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (keep < 0)
		return; /* out of fds: nothing held, the next call walks */
	pthread_mutex_lock(&b->held_lock);
	int slot = -1;
	for (int i = 0; i < BACKING_HELD_DIRS && slot < 0; i++)
		if (b->held[i].fd >= 0 && !strcmp(b->held[i].rel, reldir))
			slot = i;
	for (int i = 0; i < BACKING_HELD_DIRS && slot < 0; i++)
		if (b->held[i].fd < 0)
			slot = i;
	if (slot < 0) {
		slot = 0;
		for (int i = 1; i < BACKING_HELD_DIRS; i++)
			if (b->held[i].used < b->held[slot].used)
				slot = i;
	}
	int old = b->held[slot].fd;
	b->held[slot].fd = keep;
	b->held[slot].used = ++b->held_clock;
	snprintf(b->held[slot].rel, sizeof(b->held[slot].rel), "%s", reldir);
	pthread_mutex_unlock(&b->held_lock);
	if (old >= 0)
		close(old);
}

/* Stops holding reldir and every directory below it ("": all of them); how
 * many were held. */
static int bdir_held_drop(struct backing *b, const char *reldir)
{
	size_t n = strlen(reldir);
	int fds[BACKING_HELD_DIRS], k = 0;
	pthread_mutex_lock(&b->held_lock);
	for (int i = 0; i < BACKING_HELD_DIRS; i++) {
		const char *rel = b->held[i].rel;
		if (b->held[i].fd >= 0 &&
		    (n == 0 || (!strncmp(rel, reldir, n) && (rel[n] == '\0' || rel[n] == '/')))) {
			fds[k++] = b->held[i].fd;
			b->held[i].fd = -1;
		}
	}
	pthread_mutex_unlock(&b->held_lock);
	for (int i = 0; i < k; i++)
		close(fds[i]);
	return k;
}

/* Invariant 10c: after a call through held fds failed with rc, whether to
 * make it once more by fresh walks (it then dropped every held fd): a
 * directory on the way may have been removed, the fd then names no entry. */
static bool bdir_retry(struct backing *b, int rc)
{
	if ((rc != -ENOENT && rc != -ESTALE) || bdir_held_drop(b, "") == 0)
		return false;
	atomic_fetch_add(&b->held_epoch, 1);
	return true;
}

/* ---- directory backend ---- */

/* Invariants 8, 10: reldir ("" is the root) as a new fd of the caller's: a
 * dup of the held one, else opened beneath its nearest held ancestor (or the
 * root) without following a symlink, and held from then on. */
static int bdir_open_dir(struct backing *b, const char *reldir)
{
	if (!reldir[0]) {
		int fd = fcntl(b->root_fd, F_DUPFD_CLOEXEC, 0);
		return fd >= 0 ? fd : -errno;
	}
	int fd = bdir_held_get(b, reldir);
	if (fd >= 0)
		return fd;
	char up[PATH_MAX];
	size_t n = strlen(reldir);
	if (n >= sizeof(up))
		return -ENAMETOOLONG;
	memcpy(up, reldir, n + 1);
	int afd = -1;
	const char *rest = reldir;
	for (char *slash = strrchr(up, '/'); slash && afd < 0; slash = strrchr(up, '/')) {
		*slash = '\0';
		if ((afd = bdir_held_get(b, up)) >= 0)
			rest = reldir + (slash - up) + 1;
	}
	if (afd < 0 && (afd = fcntl(b->root_fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return -errno;
	unsigned long parts = 1;
	for (const char *p = rest; *p; p++)
		parts += *p == '/';
	atomic_fetch_add(&b->n_walked, parts);
	fd = safe_openat(afd, rest, O_RDONLY | O_DIRECTORY, 0);
	close(afd);
	if (fd >= 0)
		bdir_held_put(b, reldir, fd);
	return fd;
}

/* The directory holding rel, as bdir_open_dir; *base: rel's last name. */
static int bdir_parent(struct backing *b, const char *rel, const char **base)
{
	const char *slash = strrchr(rel, '/');
	*base = slash ? slash + 1 : rel;
	char dir[PATH_MAX];
	backing_parent(rel, dir, sizeof(dir));
	return bdir_open_dir(b, dir);
}

static int bdir_fsync_dir(struct backing *b, const char *reldir)
{
	int fd = bdir_open_dir(b, reldir);
	if (fd < 0)
		return fd;
	atomic_fetch_add(&b->n_dir_fsyncs, 1);
	int rc = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

/* openat of rel's last name under its (held) directory: flags never follow
 * a symlink (safe_openat); once more by fresh walks if that directory is
 * gone (invariant 10c). */
static int bdir_open_file(struct backing *b, const char *rel, int flags, mode_t mode)
{
	for (int fresh = 0;; fresh = 1) {
		const char *base;
		int pfd = bdir_parent(b, rel, &base);
		if (pfd < 0)
			return pfd;
		int fd = safe_openat(pfd, base, flags, mode);
		close(pfd);
		if (fd >= 0 || fresh || !bdir_retry(b, fd))
			return fd;
	}
}

static int bdir_write_file(struct backing *b, const char *rel, const void *data, size_t len,
			   bool sync)
{
	/* invariant 8: only ever a new temporary, made here and private */
	int fd = bdir_open_file(b, rel, O_WRONLY | O_CREAT | O_EXCL, BACKING_FILE_MODE);
	if (fd < 0)
		return fd;
	int rc = 0;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, (const char *)data + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		done += (size_t)n;
	}
	if (rc == 0 && sync) {
		atomic_fetch_add(&b->n_file_fsyncs, 1);
		if (fsync(fd) != 0)
			rc = -errno;
	}
	struct bpend *l;
	if (rc == 0 && !sync && b->fsync_barrier && (l = bpend_get(true)) != NULL &&
	    l->handoff < 0) {
		l->handoff = fd; /* invariant 9: its fsync at the sync needs no lookup */
		return 0;
	}
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* fsync of the file rel, which the caller did not write through a fd. */
static int bdir_fsync_file(struct backing *b, const char *rel)
{
	int fd = bdir_open_file(b, rel, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return fd;
	atomic_fetch_add(&b->n_file_fsyncs, 1);
	int rc = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

/* Invariant 10: whether rel is there (1: whatever it is, backing.h 1b then
 * replaces it durably), absent (0), or its directory is missing (-ENOENT);
 * any other failure counts as absent, as the put's own step then fails. */
static int bdir_lookup(struct backing *b, const char *rel)
{
	const char *base;
	int pfd = bdir_parent(b, rel, &base);
	if (pfd < 0)
		return pfd == -ENOENT ? -ENOENT : 0;
	struct stat st;
	int rc = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 1 : 0;
	close(pfd);
	return rc;
}

/* The temporary of a put that turned durable after its bytes were written
 * unsynced (invariant 10c): fsync'd through its kept fd, else by name. */
static int bdir_fsync_tmp(struct backing *b, const char *tmp)
{
	int fd = bpend_take_handoff();
	if (fd < 0)
		return bdir_fsync_file(b, tmp);
	atomic_fetch_add(&b->n_file_fsyncs, 1);
	int rc = fsync(fd) == 0 ? 0 : -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

static int bdir_pending_put(struct backing *b, const char *relpath)
{
	if (!b->fsync_barrier)
		return 0;
	int fd = bpend_take_handoff();
	if (bpend_note(b, relpath, false, fd) == 0)
		return 0; /* its directory: noted (or fsync'd) by bdir_rename */
	if (fd < 0) { /* no memory for the list: the put's own fsyncs */
		char dir[PATH_MAX];
		backing_parent(relpath, dir, sizeof(dir));
		int rc = bdir_fsync_file(b, relpath);
		return rc == 0 ? bdir_fsync_dir(b, dir) : rc;
	}
	atomic_fetch_add(&b->n_file_fsyncs, 1); /* no room to keep it open: synced now */
	int rc = fsync(fd) == 0 ? 0 : -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* Invariant 9: fsyncs this thread's files, then directories, noted for b,
 * and forgets them all; the first error, or 0. */
static int bdir_sync_pending(struct backing *b)
{
	struct bpend *l = bpend_get(false);
	if (!l)
		return 0;
	int rc = 0;
	for (int pass = 0; pass < 2; pass++) /* files first, then the entries naming them */
		for (size_t i = 0; i < l->n && rc == 0; i++) {
			struct bpend_item *it = &l->v[i];
			if (it->owner != b->id || it->dir != (pass == 1))
				continue;
			if (it->fd < 0) {
				rc = pass == 0 ? bdir_fsync_file(b, it->rel) : bdir_fsync_dir(b, it->rel);
				continue;
			}
			atomic_fetch_add(pass == 0 ? &b->n_file_fsyncs : &b->n_dir_fsyncs, 1);
			if (fsync(it->fd) != 0)
				rc = -errno;
			if (close(it->fd) != 0 && rc == 0 && pass == 0)
				rc = -errno; /* a write error a FUSE or NFS server reports at close */
			it->fd = -1;
			l->fds--;
		}
	size_t keep = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (l->v[i].owner != b->id) {
			l->v[keep++] = l->v[i];
			continue;
		}
		if (l->v[i].fd >= 0) {
			close(l->v[i].fd);
			l->fds--;
		}
		free(l->v[i].rel);
	}
	l->n = keep;
	return rc;
}

/* After a link failed with ENOENT: whether both its ends are there, so the
 * source was renamed over between the lookup and the link (invariant 7). */
static bool bdir_link_raced(struct backing *b, int src_dirfd, const char *src_rel)
{
	struct stat st;
	return fstatat(src_dirfd, src_rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       fstatat(b->root_fd, BACKING_TMP_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(st.st_mode);
}

/* The temporary rel as a hard link to src_rel under src_dirfd, fsync'd when
 * sync (its inode: the bytes were written by the caller). */
static int bdir_link_file(struct backing *b, const char *rel, int src_dirfd, const char *src_rel,
			  bool sync)
{
	const char *base;
	int pfd = bdir_parent(b, rel, &base); /* tmp/, held (invariant 10) */
	if (pfd < 0)
		return pfd;
	const char *src_base;
	int spfd = safe_parent(src_dirfd, src_rel, &src_base);
	if (spfd < 0) {
		close(pfd);
		return spfd;
	}
	int rc = 0;
	for (int tries = 1; linkat(spfd, src_base, pfd, base, 0) != 0; tries++) {
		rc = -errno;
		if (rc != -ENOENT || tries == BACKING_LINK_TRIES ||
		    !bdir_link_raced(b, src_dirfd, src_rel))
			break;
		rc = 0;
	}
	struct stat st; /* invariant 8: a link to a regular file, never to a symlink */
	if (rc == 0 && (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))) {
		unlinkat(pfd, base, 0);
		rc = -ELOOP;
	}
	close(spfd);
	close(pfd);
	return rc == 0 && sync ? bdir_fsync_file(b, rel) : rc;
}

/* Invariant 8: rel opened without following a symlink on its way or at it,
 * and only if it is a regular file (-EISDIR, -EINVAL otherwise, unread):
 * *fd (to close) and its size; the error otherwise (*fd -1). */
static int bdir_open_regular(struct backing *b, const char *rel, int *fd, uint64_t *size)
{
	/* O_NONBLOCK: a FIFO planted here must not hang the open */
	*fd = safe_openat(b->root_fd, rel, O_RDONLY | O_NONBLOCK, 0);
	if (*fd < 0)
		return *fd;
	int rc = 0;
	struct stat st;
	if (fstat(*fd, &st) != 0)
		rc = -errno;
	else if (S_ISDIR(st.st_mode))
		rc = -EISDIR;
	else if (!S_ISREG(st.st_mode))
		rc = -EINVAL;
	*size = rc == 0 ? (uint64_t)st.st_size : 0;
	return rc;
}

static int bdir_read_file(struct backing *b, const char *rel, void *buf, size_t cap, size_t *len)
{
	int fd;
	uint64_t size;
	int rc = bdir_open_regular(b, rel, &fd, &size);
	if (fd < 0)
		return rc;
	if (rc == 0 && size > cap)
		rc = -EFBIG;
	size_t done = 0;
	while (rc == 0) {
		if (done == cap) {
			char extra; /* the file grew past cap since fstat */
			ssize_t n = pread(fd, &extra, 1, (off_t)done);
			if (n > 0)
				rc = -EFBIG;
			else if (n < 0)
				rc = -errno;
			break;
		}
		ssize_t n = pread(fd, (char *)buf + done, cap - done, (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
		} else if (n == 0) {
			break;
		} else {
			done += (size_t)n;
		}
	}
	close(fd);
	if (rc == 0)
		*len = done;
	return rc;
}

/* Invariant 8, backing.h 4: the same open and kind check as bdir_read_file,
 * then exactly len bytes at off (a file that ends before: -ERANGE). */
static int bdir_read_range(struct backing *b, const char *rel, uint64_t off, size_t len,
			   void *buf)
{
	int fd;
	uint64_t size;
	int rc = bdir_open_regular(b, rel, &fd, &size);
	if (fd < 0)
		return rc;
	if (rc == 0 && (len > size || off > size - len))
		rc = -ERANGE;
	size_t done = 0;
	while (rc == 0 && done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		else if (n == 0)
			rc = -ERANGE; /* cut since fstat */
		else
			done += (size_t)n;
	}
	close(fd);
	return rc;
}

/* A regular file's size; -EISDIR a directory, -ELOOP a symlink, -EINVAL
 * any other kind (bdir_stat answers -EINVAL for a directory too). */
static int bdir_stat_kind(struct backing *b, const char *rel, uint64_t *size)
{
	const char *base;
	int pfd = safe_parent(b->root_fd, rel, &base);
	if (pfd < 0)
		return pfd;
	struct stat st;
	int rc = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
	close(pfd);
	if (rc == 0 && !S_ISREG(st.st_mode))
		rc = S_ISDIR(st.st_mode) ? -EISDIR : S_ISLNK(st.st_mode) ? -ELOOP : -EINVAL;
	if (rc == 0)
		*size = (uint64_t)st.st_size;
	return rc;
}

static int bdir_stat(struct backing *b, const char *rel, uint64_t *size)
{
	int rc = bdir_stat_kind(b, rel, size);
	return rc == -EISDIR ? -EINVAL : rc;
}

/* op on the last names of from and to under their directories (held,
 * invariant 10), which it never follows (invariant 8); once more by fresh
 * walks if one of them is gone (invariant 10c). On success *to_fd is to's
 * directory, the caller's to close. */
typedef int (*bdir_two_fn)(struct backing *b, int from_fd, const char *from_base, int to_fd,
			   const char *to_base, void *arg);
static int bdir_two(struct backing *b, const char *from, const char *to, bdir_two_fn op,
		    void *arg, int *to_fd)
{
	for (int fresh = 0;; fresh = 1) {
		const char *from_base, *to_base;
		int from_fd = bdir_parent(b, from, &from_base);
		if (from_fd < 0)
			return from_fd;
		int tfd = bdir_parent(b, to, &to_base);
		if (tfd < 0) {
			close(from_fd);
			return tfd;
		}
		int rc = op(b, from_fd, from_base, tfd, to_base, arg);
		close(from_fd);
		if (rc == 0) {
			*to_fd = tfd;
			return 0;
		}
		close(tfd);
		if (fresh || !bdir_retry(b, rc))
			return rc;
	}
}

struct bdir_rename_arg {
	bool sync;
	unsigned long seen;
};

static int bdir_rename_op(struct backing *b, int from_fd, const char *from_base, int to_fd,
			  const char *to_base, void *arg)
{
	const struct bdir_rename_arg *r = arg;
	struct stat st;
	if (!r->sync && atomic_load(&b->held_epoch) != r->seen &&
	    fstatat(to_fd, to_base, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return -EEXIST;
	atomic_fetch_add(&b->n_renames, 1);
	return renameat(from_fd, from_base, to_fd, to_base) == 0 ? 0 : -errno;
}

/* The rename, through held directories (bdir_two). Unless sync: if held fds
 * were dropped since the caller looked `to` up (its held_epoch then was
 * seen), a `to` there now is -EEXIST with nothing renamed: the caller took
 * it for absent through a gone directory (backing.h 1b: only a durable put
 * replaces a file). */
static int bdir_rename(struct backing *b, const char *from, const char *to, bool sync,
		       unsigned long seen)
{
	struct bdir_rename_arg r = { sync, seen };
	int to_fd, rc = bdir_two(b, from, to, bdir_rename_op, &r, &to_fd);
	if (rc != 0)
		return rc;
	if (sync || bdir_pending_dir_of(b, to, to_fd) != 0) {
		/* invariant 9: a directory not noted for the sync is synced now */
		atomic_fetch_add(&b->n_dir_fsyncs, 1);
		rc = fsync(to_fd) == 0 ? 0 : -errno;
	}
	close(to_fd);
	return rc;
}

static int bdir_mkdir(struct backing *b, const char *rel, bool sync)
{
	const char *base;
	int pfd, rc;
	for (int fresh = 0;; fresh = 1) {
		pfd = bdir_parent(b, rel, &base);
		if (pfd < 0)
			return pfd;
		rc = mkdirat(pfd, base, BACKING_DIR_MODE) == 0 ? 0 : -errno;
		if ((rc != -ENOENT && rc != -ESTALE) || fresh || !bdir_retry(b, rc))
			break;
		close(pfd); /* its directory is gone (invariant 10c) */
	}
	if (rc == 0)
		bdir_held_drop(b, rel); /* invariant 10c: what was held at this name is gone */
	if (rc == 0 && !sync && bdir_pending_dir_of(b, rel, pfd) != 0)
		sync = true; /* invariant 9: not noted, so synced now */
	if (rc == 0 && sync) { /* a new directory must outlive a crash like its files */
		atomic_fetch_add(&b->n_dir_fsyncs, 1);
		rc = fsync(pfd) == 0 ? 0 : -errno;
	} else if (rc == -EEXIST) { /* made by another thread or node: a directory, not a link */
		struct stat st;
		rc = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 ? -errno
		     : S_ISDIR(st.st_mode)			    ? 0
		     : S_ISLNK(st.st_mode)			    ? -ELOOP
								    : -ENOTDIR;
	}
	close(pfd);
	return rc;
}

/* Temporaries under tmp/ through its held fd (an absent one is ours to
 * know about); anything else by a fresh walk, so that -ENOENT means absent
 * at its name (invariant 10). */
static int bdir_unlink(struct backing *b, const char *rel)
{
	const char *base;
	bool tmp = !strncmp(rel, BACKING_TMP_DIR "/", sizeof(BACKING_TMP_DIR));
	int pfd = tmp ? bdir_parent(b, rel, &base) : safe_parent(b->root_fd, rel, &base);
	if (pfd < 0)
		return pfd;
	int rc = unlinkat(pfd, base, 0) == 0 ? 0 : -errno;
	close(pfd);
	return rc;
}

static int bdir_list(struct backing *b, const char *reldir, backing_list_fn fn, void *arg)
{
	/* invariant 10: its own fd (a held one's dup would share its position) */
	int fd = reldir[0] ? safe_openat(b->root_fd, reldir, O_RDONLY | O_DIRECTORY, 0)
			   : openat(b->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!reldir[0] && fd < 0)
		fd = -errno;
	return fd < 0 ? fd : safe_dir_each(fd, fn, arg);
}

/* ---- primitives: one switch per call ---- */

/* sync false: the directory backend leaves the fsyncs to a later backing_sync
 * (invariant 1b); nfs:// always commits. */
static int backing_write_file(struct backing *b, const char *rel, const void *data, size_t len,
			      bool sync)
{
	return b->nfs ? backing_nfs_write_file(b->nfs, rel, data, len)
		      : bdir_write_file(b, rel, data, len, sync);
}

static int backing_read_file(struct backing *b, const char *rel, void *buf, size_t cap,
			     size_t *len)
{
	return b->nfs ? backing_nfs_read_file(b->nfs, rel, buf, cap, len)
		      : bdir_read_file(b, rel, buf, cap, len);
}

static int backing_read_range(struct backing *b, const char *rel, uint64_t off, size_t len,
			      void *buf)
{
	return b->nfs ? backing_nfs_read_range(b->nfs, rel, off, len, buf)
		      : bdir_read_range(b, rel, off, len, buf);
}

/* seen: bdir_rename's (the held_epoch when the caller looked `to` up). */
static int backing_rename(struct backing *b, const char *from, const char *to, bool sync,
			  unsigned long seen)
{
	return b->nfs ? backing_nfs_rename(b->nfs, from, to) : bdir_rename(b, from, to, sync, seen);
}

static int backing_mkdir_sync(struct backing *b, const char *rel, bool sync)
{
	return b->nfs ? backing_nfs_mkdir(b->nfs, rel) : bdir_mkdir(b, rel, sync);
}

static int backing_mkdir(struct backing *b, const char *rel)
{
	return backing_mkdir_sync(b, rel, true);
}

static int bdir_link_op(struct backing *b, int from_fd, const char *from_base, int to_fd,
			const char *to_base, void *arg)
{
	(void)arg;
	atomic_fetch_add(&b->n_renames, 1);
	return linkat(from_fd, from_base, to_fd, to_base, 0) == 0 ? 0 : -errno;
}

/* Invariant 8: linkat between the (held) directories of from and to, on
 * their last names (bdir_two), so a symlink planted at a directory on either
 * way is -ELOOP, never followed. */
static int backing_link(struct backing *b, const char *from, const char *to, bool sync)
{
	if (b->nfs)
		return backing_nfs_link(b->nfs, from, to);
	int to_fd, rc = bdir_two(b, from, to, bdir_link_op, NULL, &to_fd);
	if (rc != 0)
		return rc;
	if (sync) {
		atomic_fetch_add(&b->n_dir_fsyncs, 1);
		rc = fsync(to_fd) == 0 ? 0 : -errno;
	}
	close(to_fd);
	return rc;
}

static int backing_unlink(struct backing *b, const char *rel)
{
	return b->nfs ? backing_nfs_unlink(b->nfs, rel) : bdir_unlink(b, rel);
}

/* mkdir -p, bottom up: reldir itself first (its parent is there in the
 * common case, a new chunks/ab/cd/ leaf: one mkdir), its parent only when
 * that says -ENOENT; a directory made meanwhile by another thread or node
 * counts as made. */
static int backing_mkdirs(struct backing *b, const char *reldir, bool sync)
{
	if (!reldir[0])
		return 0;
	int rc = backing_mkdir_sync(b, reldir, sync);
	if (rc != -ENOENT || !strchr(reldir, '/'))
		return rc;
	char parent[PATH_MAX];
	backing_parent(reldir, parent, sizeof(parent));
	rc = backing_mkdirs(b, parent, sync);
	return rc != 0 ? rc : backing_mkdir_sync(b, reldir, sync);
}

/* ---- temporaries left by failed calls (invariant 4) ---- */

static bool backing_unreachable(int rc)
{
	return rc == -ETIMEDOUT || rc == -EIO;
}

/* Removes tmp now, or later if BACKING is not answering (rc is why the call
 * failed). */
static void backing_discard_tmp(struct backing *b, const char *tmp, int rc)
{
	if (!backing_unreachable(rc)) {
		backing_unlink(b, tmp);
		return;
	}
	pthread_mutex_lock(&b->orphan_lock);
	if (b->n_orphans < BACKING_MAX_ORPHANS)
		snprintf(b->orphans[b->n_orphans++], BACKING_TMP_NAME, "%s", tmp);
	pthread_mutex_unlock(&b->orphan_lock);
}

static void backing_reap_orphans(struct backing *b)
{
	for (;;) {
		char tmp[BACKING_TMP_NAME];
		pthread_mutex_lock(&b->orphan_lock);
		if (b->n_orphans == 0) {
			pthread_mutex_unlock(&b->orphan_lock);
			return;
		}
		memcpy(tmp, b->orphans[--b->n_orphans], sizeof(tmp));
		pthread_mutex_unlock(&b->orphan_lock);
		int rc = backing_unlink(b, tmp);
		if (rc != 0 && rc != -ENOENT) {
			backing_discard_tmp(b, tmp, -EIO); /* keep it for the next put */
			return;
		}
	}
}

/* ---- open / close ---- */

static int backing_drop_stale_tmp(void *arg, const char *name)
{
	struct backing *b = arg;
	const char *p = name;
	if (!strncmp(p, "probe.", 6))
		p += 6;
	size_t hl = strlen(b->host);
	if (strncmp(p, b->host, hl) != 0 || p[hl] != '.')
		return 0; /* another host's, or not ours at all */
	char *end;
	long pid = strtol(p + hl + 1, &end, 10);
	if (pid <= 0 || (*end != '.' && *end != '-') || pid == (long)getpid())
		return 0;
	if (*end == '-' && (!b->pidns || strtoull(end + 1, &end, 10) != b->pidns || *end != '.'))
		return 0; /* invariant 2: another pid namespace's (or ours unknown) */
	if (kill((pid_t)pid, 0) == 0 || errno == EPERM)
		return 0; /* a live writer on this host */
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), BACKING_TMP_DIR "/%s", name);
	if (backing_unlink(b, rel) == 0)
		log_info("BACKING %s: removed stale temporary %s", b->spec, rel);
	return 0;
}

/* Invariant 8: a BACKING other users can write is used (a group's shared
 * export is common), but said so once. */
static void bdir_warn_shared(const struct backing *b)
{
	struct stat st;
	if (fstat(b->root_fd, &st) != 0)
		return;
	uid_t me = geteuid();
	if (safe_others_can_write(&st))
		log_warn("BACKING %s: writable by other users (mode %04o, no sticky bit): nothing "
			 "planted there is followed, but they can remove or replace checkpoints",
			 b->spec, (unsigned)(st.st_mode & 07777));
	else if (st.st_uid != me && st.st_uid != 0)
		log_warn("BACKING %s: owned by uid %u, not by the mounting user (uid %u): nothing "
			 "planted there is followed, but its owner can remove or replace checkpoints",
			 b->spec, (unsigned)st.st_uid, (unsigned)me);
}

/* Invariant 8 for what an older ckptfs made: its top directories (0755,
 * holding objects 0444 and manifests 0644) are made 0700 when they are ours,
 * which closes everything below them to other users without a walk. */
static void bdir_close_old_dirs(const struct backing *b)
{
	static const char *const dirs[] = { "chunks", "manifests", BACKING_TMP_DIR };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct stat st;
		if (fstatat(b->root_fd, dirs[i], &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
		    st.st_uid != geteuid() || !(st.st_mode & 0077))
			continue;
		if (fchmodat(b->root_fd, dirs[i], BACKING_DIR_MODE, 0) == 0)
			log_info("BACKING %s: %s/ made private (was mode %04o, as older ckptfs made it)",
				 b->spec, dirs[i], (unsigned)(st.st_mode & 07777));
		else
			log_warn("BACKING %s: cannot make %s/ private (mode %04o): %s", b->spec, dirs[i],
				 (unsigned)(st.st_mode & 07777), strerror(errno));
	}
}

/* Invariant 9: whether syncfs of BACKING's filesystem reaches stable storage;
 * and whether it is served over a network or by a FUSE daemon (b->remote:
 * every operation a round trip, see backing_upload_threads).
 * FUSE passes it to no server but virtiofs, 9p and CIFS to none: fsyncs
 * there. Unknown is syncfs (local filesystems, kernel NFS: it flushes and
 * COMMITs, and NFS directory operations are synchronous on the server). */
static void bdir_pick_barrier(struct backing *b)
{
	struct statfs sf;
	if (fstatfs(b->root_fd, &sf) != 0)
		return;
	long t = (long)sf.f_type;
	b->fsync_barrier = t == BACKING_FUSE_MAGIC || t == BACKING_V9FS_MAGIC ||
			   t == BACKING_CIFS_MAGIC || t == BACKING_SMB2_MAGIC;
	b->remote = b->fsync_barrier || t == BACKING_NFS_MAGIC || t == BACKING_CEPH_MAGIC ||
		    t == BACKING_LUSTRE_MAGIC || t == BACKING_GPFS_MAGIC || t == BACKING_SMB_MAGIC ||
		    t == BACKING_AFS_MAGIC;
	if (b->fsync_barrier)
		log_info("BACKING %s: a batch of puts is made durable by an fsync of each object and "
			 "of each directory (syncfs does not reach this filesystem's server)", b->spec);
}

int backing_open(const char *spec, unsigned timeout_ms, struct backing **out)
{
	if (!spec || !out)
		return -EINVAL;
	struct backing *b = calloc(1, sizeof(*b));
	if (!b || !(b->spec = strdup(spec))) {
		free(b);
		return -ENOMEM;
	}
	b->root_fd = -1;
	b->id = atomic_fetch_add(&backing_next_id, 1) + 1;
	pthread_mutex_init(&b->orphan_lock, NULL);
	pthread_mutex_init(&b->held_lock, NULL);
	for (int i = 0; i < BACKING_HELD_DIRS; i++)
		b->held[i].fd = -1;
	b->timeout_ms = timeout_ms ? timeout_ms : BACKING_DEFAULT_TIMEOUT_MS;
	if (gethostname(b->host, sizeof(b->host)) != 0 || !b->host[0])
		strcpy(b->host, "localhost");
	b->host[sizeof(b->host) - 1] = '\0';
	for (char *p = b->host; *p; p++)
		if (*p == '.' || *p == '/')
			*p = '_';
	struct stat ns_st; /* invariant 2 */
	if (stat("/proc/self/ns/pid", &ns_st) == 0)
		b->pidns = (unsigned long long)ns_st.st_ino;

	int rc;
	if (!strncmp(spec, "nfs://", 6)) {
		char why[256] = "";
		rc = backing_nfs_open(spec, b->timeout_ms, &b->nfs, why, sizeof(why));
		b->remote = true;
		if (rc != 0)
			log_error("BACKING %s: cannot mount the export: %s", spec, why);
	} else if (spec[0] != '/') {
		rc = -EINVAL;
		log_error("BACKING %s: neither an absolute directory path nor an nfs:// URL", spec);
	} else {
		b->root_fd = open(spec, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = b->root_fd >= 0 ? 0 : -errno;
		if (rc != 0)
			log_error("BACKING %s: cannot open the directory: %s", spec, strerror(-rc));
		else
			bdir_warn_shared(b);
		if (rc == 0) {
			bdir_close_old_dirs(b);
			bdir_pick_barrier(b);
		}
	}
	if (rc == 0) {
		rc = backing_mkdir(b, BACKING_TMP_DIR);
		if (rc != 0)
			log_error("BACKING %s: cannot create %s/: %s%s%s", spec, BACKING_TMP_DIR,
				  strerror(-rc), *backing_detail(b) ? " — " : "", backing_detail(b));
	}
	if (rc != 0) {
		backing_close(b);
		return rc;
	}
	if (b->nfs)
		backing_nfs_list(b->nfs, BACKING_TMP_DIR, backing_drop_stale_tmp, b);
	else
		bdir_list(b, BACKING_TMP_DIR, backing_drop_stale_tmp, b);
	*out = b;
	return 0;
}

void backing_close(struct backing *b)
{
	if (!b)
		return;
	backing_nfs_close(b->nfs);
	bdir_held_drop(b, "");
	if (b->root_fd >= 0)
		close(b->root_fd);
	pthread_mutex_destroy(&b->orphan_lock);
	pthread_mutex_destroy(&b->held_lock);
	free(b->spec);
	free(b);
}

const char *backing_spec(const struct backing *b)
{
	return b->spec;
}

bool backing_is_nfs(const struct backing *b)
{
	return b->nfs != NULL;
}

/* ---- calls ---- */

static void backing_log_failure(const struct backing *b, const char *call, const char *rel,
				const char *step, int rc)
{
	const char *detail = backing_detail(b);
	log_error("BACKING %s: %s %s: %s failed: %s%s%s", b->spec, call, rel, step, strerror(-rc),
		  *detail ? " — " : "", detail);
}

/* Where a put's bytes come from: data, or (dirfd >= 0) the finished file
 * rel under dirfd, hard-linked (invariant 6). */
struct backing_src {
	const void *data;
	size_t len;
	int dirfd;
	const char *rel;
};

/* Invariant 7: a linked put's source is not there. */
static bool backing_src_gone(const struct backing_src *src)
{
	struct stat st;
	return src->dirfd >= 0 && fstatat(src->dirfd, src->rel, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
	       errno == ENOENT;
}

static int backing_fill_once(struct backing *b, const char *tmp, const struct backing_src *src,
			     bool sync)
{
	return src->dirfd < 0 ? backing_write_file(b, tmp, src->data, src->len, sync)
			      : bdir_link_file(b, tmp, src->dirfd, src->rel, sync);
}

/* The temporary's bytes; -ENOENT with the source there means tmp/ was
 * removed under us: it is made again. */
static int backing_fill_tmp(struct backing *b, const char *tmp, const struct backing_src *src,
			    bool sync)
{
	int rc = backing_fill_once(b, tmp, src, sync);
	if (rc == -ENOENT && !backing_src_gone(src)) {
		if (!b->nfs) /* invariant 10c: the held tmp/ may be the one removed */
			bdir_held_drop(b, BACKING_TMP_DIR);
		rc = backing_mkdir(b, BACKING_TMP_DIR);
		if (rc == 0)
			rc = backing_fill_once(b, tmp, src, sync);
	}
	return rc;
}

/* A linked put whose relpath already is the source's inode (an upload
 * repeated after a crash): only the syncs are left to do. 1 if so. */
static int backing_link_done(struct backing *b, const char *relpath, const struct backing_src *src,
			     bool sync, int *rc)
{
	struct stat have, want;
	if (src->dirfd < 0 || fstatat(b->root_fd, relpath, &have, AT_SYMLINK_NOFOLLOW) != 0 ||
	    fstatat(src->dirfd, src->rel, &want, AT_SYMLINK_NOFOLLOW) != 0 ||
	    have.st_dev != want.st_dev || have.st_ino != want.st_ino)
		return 0;
	*rc = sync ? bdir_fsync_file(b, relpath) : 0;
	if (sync && *rc == 0) {
		char dir[PATH_MAX];
		backing_parent(relpath, dir, sizeof(dir));
		*rc = bdir_fsync_dir(b, dir);
	}
	return 1;
}

/* Invariant 6: a link refused for good (another filesystem, a filesystem
 * without hard links, not allowed) turns linked puts off; -EXDEV then. */
static int backing_link_refused(struct backing *b, int rc)
{
	if (rc != -EXDEV && rc != -EPERM && rc != -EOPNOTSUPP && rc != -EMLINK)
		return rc;
	if (rc != -EMLINK && atomic_exchange(&b->link_state, -1) != -1)
		log_info("BACKING %s: chunk objects are copied from the cache (a hard link is "
			 "refused: %s)", b->spec, strerror(-rc));
	return -EXDEV;
}

static int backing_put_mode(struct backing *b, const char *relpath, const struct backing_src *src,
			    bool sync)
{
	int rc = backing_check_path(relpath, false);
	if (rc != 0) {
		log_error("BACKING %s: put %s: invalid path: %s", b->spec, relpath ? relpath : "(null)",
			  strerror(-rc));
		return rc;
	}
	unsigned long seen = b->nfs ? 0 : atomic_load(&b->held_epoch);
	int have = !sync && !b->nfs ? bdir_lookup(b, relpath) : 0;
	if (have == 1) {
		sync = true; /* 1b: never replace a file that may be durable by one that is not */
		if (backing_link_done(b, relpath, src, sync, &rc))
			return rc;
	}
	backing_reap_orphans(b);
	char tmp[BACKING_TMP_NAME], step[PATH_MAX + 160];
	backing_tmp_name(b, "", tmp, sizeof(tmp));
	if (src->dirfd < 0)
		snprintf(step, sizeof(step), "write %s", tmp);
	else
		snprintf(step, sizeof(step), "link %s (the caller's) to %s", src->rel, tmp);
	rc = backing_fill_tmp(b, tmp, src, sync);
	if (rc == -ENOENT && backing_src_gone(src)) {
		bdir_unlink(b, tmp); /* linked, then the source went: not ours to put */
		return -ENOENT;
	}
	if (src->dirfd >= 0 && rc != 0 && backing_link_refused(b, rc) == -EXDEV) {
		bdir_unlink(b, tmp); /* a link made before its fsync failed */
		return -EXDEV;
	}
	if (rc == 0) {
		snprintf(step, sizeof(step), "rename %s → %s", tmp, relpath);
		/* its directory seen missing: made first, no rename tried into it */
		rc = have == -ENOENT ? -ENOENT : backing_rename(b, tmp, relpath, sync, seen);
		if (rc == -ENOENT) {
			char dir[PATH_MAX];
			backing_parent(relpath, dir, sizeof(dir));
			rc = backing_mkdirs(b, dir, sync);
			if (rc != 0)
				snprintf(step, sizeof(step), "mkdir -p %s", dir);
			else
				rc = backing_rename(b, tmp, relpath, sync, seen);
		}
		if (rc == -EEXIST && !sync) { /* invariant 10c: relpath was there after all */
			sync = true;
			snprintf(step, sizeof(step), "fsync %s", tmp);
			rc = bdir_fsync_tmp(b, tmp);
			if (rc == 0) {
				snprintf(step, sizeof(step), "rename %s → %s", tmp, relpath);
				rc = backing_rename(b, tmp, relpath, sync, seen);
			}
		}
	}
	if (rc == 0 && !sync && !b->nfs) {
		snprintf(step, sizeof(step), "fsync %s", relpath);
		rc = bdir_pending_put(b, relpath);
	}
	int left = bpend_take_handoff(); /* a failed put's temporary, kept open */
	if (left >= 0)
		close(left);
	if (rc != 0) {
		backing_log_failure(b, "put", relpath, step, rc);
		backing_discard_tmp(b, tmp, rc);
	} else if (src->dirfd >= 0) {
		/* rename of two links to one inode does nothing: the temporary
		 * would stay if relpath became this inode meanwhile */
		bdir_unlink(b, tmp);
		if (atomic_exchange(&b->link_state, 1) == 0)
			log_info("BACKING %s shares the cache's filesystem: chunk objects are hard "
				 "links to the cache's, one copy on disk (-o copy_uploads for two)",
				 b->spec);
	}
	return rc;
}

int backing_put(struct backing *b, const char *relpath, const void *data, size_t len)
{
	struct backing_src src = { data, len, -1, NULL };
	return backing_put_mode(b, relpath, &src, true);
}

int backing_put_unsynced(struct backing *b, const char *relpath, const void *data, size_t len)
{
	struct backing_src src = { data, len, -1, NULL };
	return backing_put_mode(b, relpath, &src, false);
}

bool backing_can_link(struct backing *b)
{
	return !b->nfs && atomic_load(&b->link_state) >= 0;
}

int backing_put_link(struct backing *b, const char *relpath, int dirfd, const char *src_rel,
		     bool sync)
{
	if (!backing_can_link(b))
		return -EXDEV;
	struct backing_src src = { NULL, 0, dirfd, src_rel };
	return backing_put_mode(b, relpath, &src, sync);
}

/* An EEXIST from link: whether relpath already is our file (a LINK repeated
 * after its reply was lost), by its bytes. */
static bool backing_holds(struct backing *b, const char *relpath, const void *data, size_t len)
{
	char *have = malloc(len + 1);
	size_t n = 0;
	bool same = have && backing_read_file(b, relpath, have, len + 1, &n) == 0 && n == len &&
		    memcmp(have, data, len) == 0;
	free(have);
	return same;
}

int backing_put_new(struct backing *b, const char *relpath, const void *data, size_t len)
{
	int rc = backing_check_path(relpath, false);
	if (rc != 0) {
		log_error("BACKING %s: put_new %s: invalid path: %s", b->spec,
			  relpath ? relpath : "(null)", strerror(-rc));
		return rc;
	}
	char tmp[BACKING_TMP_NAME], step[PATH_MAX + 160];
	backing_tmp_name(b, "", tmp, sizeof(tmp));
	struct backing_src src = { data, len, -1, NULL };
	snprintf(step, sizeof(step), "write %s", tmp);
	rc = backing_fill_tmp(b, tmp, &src, true);
	if (rc == 0) {
		snprintf(step, sizeof(step), "link %s → %s", tmp, relpath);
		rc = backing_link(b, tmp, relpath, true);
		if (rc == -ENOENT) {
			char dir[PATH_MAX];
			backing_parent(relpath, dir, sizeof(dir));
			rc = backing_mkdirs(b, dir, true);
			if (rc == 0)
				rc = backing_link(b, tmp, relpath, true);
		}
		if (rc == -EEXIST && b->nfs && backing_holds(b, relpath, data, len))
			rc = 0;
	}
	if (rc != 0 && rc != -EEXIST)
		backing_log_failure(b, "put_new", relpath, step, rc);
	backing_discard_tmp(b, tmp, rc == -EEXIST ? 0 : rc);
	return rc;
}

int backing_move(struct backing *b, const char *from, const char *to)
{
	int rc = backing_check_path(from, false);
	if (rc == 0)
		rc = backing_check_path(to, false);
	if (rc == 0)
		rc = backing_rename(b, from, to, true, 0);
	if (rc != 0 && rc != -ENOENT)
		backing_log_failure(b, "move", from ? from : "(null)", "rename", rc);
	return rc;
}

int backing_sync(struct backing *b)
{
	if (b->nfs)
		return 0; /* every put was committed (COMMIT) before it returned */
	if (b->fsync_barrier) {
		int rc = bdir_sync_pending(b);
		if (rc != 0)
			backing_log_failure(b, "sync", "(this thread's unsynced puts)", "fsync", rc);
		return rc;
	}
	atomic_fetch_add(&b->n_syncfs, 1);
	if (syncfs(b->root_fd) != 0) {
		int rc = -errno;
		log_error("BACKING %s: syncfs: %s", b->spec, strerror(-rc));
		return rc;
	}
	return 0;
}

unsigned backing_upload_threads(const struct backing *b)
{
	return b->remote ? BACKING_THREADS_REMOTE : BACKING_THREADS_LOCAL;
}

bool backing_sync_is_syncfs(const struct backing *b)
{
	return !b->nfs && !b->fsync_barrier;
}

void backing_force_fsync_barrier(struct backing *b, bool on)
{
	b->fsync_barrier = on && !b->nfs;
}

void backing_get_counts(const struct backing *b, struct backing_counts *out)
{
	out->file_fsyncs = atomic_load(&b->n_file_fsyncs);
	out->dir_fsyncs = atomic_load(&b->n_dir_fsyncs);
	out->syncfs = atomic_load(&b->n_syncfs);
	out->renames = atomic_load(&b->n_renames);
	out->walked = atomic_load(&b->n_walked);
	out->nfs_rpcs = b->nfs ? backing_nfs_rpcs(b->nfs) : 0;
}

/* backing.h get: what is at a valid relpath and is no regular file, by its
 * answer; NULL for every other answer. */
static const char *backing_planted(int rc)
{
	return rc == -ELOOP	 ? "a symlink at its path or on its way (not followed)"
	       : rc == -ENOTDIR ? "a non-directory on its path"
	       : rc == -EISDIR	 ? "it is a directory, not a regular file"
	       : rc == -EINVAL	 ? "it is not a regular file (a FIFO, socket or device)"
				 : NULL;
}

int backing_get(struct backing *b, const char *relpath, void *buf, size_t cap, size_t *len)
{
	int rc = backing_check_path(relpath, false);
	if (rc != 0) {
		backing_log_failure(b, "get", relpath ? relpath : "(null)", "invalid path", rc);
		return rc;
	}
	rc = backing_read_file(b, relpath, buf, cap, len);
	const char *planted = backing_planted(rc);
	if (planted) /* backing.h: what is there is not read */
		log_error("BACKING %s: get %s: %s; not read", b->spec, relpath, planted);
	else if (rc != 0 && rc != -ENOENT)
		backing_log_failure(b, "get", relpath, "read", rc);
	return rc;
}

/* backing.h 4 */
int backing_get_range(struct backing *b, const char *relpath, uint64_t off, size_t len,
		      void *buf)
{
	int rc = backing_check_path(relpath, false);
	if (rc != 0) {
		backing_log_failure(b, "get range", relpath ? relpath : "(null)", "invalid path", rc);
		return rc;
	}
	rc = backing_read_range(b, relpath, off, len, buf);
	const char *planted = backing_planted(rc);
	if (planted)
		log_error("BACKING %s: get range %s: %s; not read", b->spec, relpath, planted);
	else if (rc == -ERANGE)
		log_error("BACKING %s: get range %s: %zu bytes at %llu: the file ends before them; "
			  "not read", b->spec, relpath, len, (unsigned long long)off);
	else if (rc != 0 && rc != -ENOENT)
		backing_log_failure(b, "get range", relpath, "read", rc);
	return rc;
}

int backing_stat(struct backing *b, const char *relpath, uint64_t *size)
{
	int rc = backing_check_path(relpath, false);
	if (rc == 0)
		rc = b->nfs ? backing_nfs_stat(b->nfs, relpath, size) : bdir_stat(b, relpath, size);
	if (rc != 0 && rc != -ENOENT)
		backing_log_failure(b, "stat", relpath ? relpath : "(null)", "stat", rc);
	return rc;
}

int backing_kind(struct backing *b, const char *relpath, uint64_t *size)
{
	int rc = backing_check_path(relpath, false);
	if (rc == 0)
		rc = b->nfs ? backing_nfs_stat_kind(b->nfs, relpath, size)
			    : bdir_stat_kind(b, relpath, size);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc == -EISDIR ? 2 : rc;
}

int backing_remove(struct backing *b, const char *relpath)
{
	int rc = backing_check_path(relpath, false);
	if (rc == 0)
		rc = backing_unlink(b, relpath);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		backing_log_failure(b, "remove", relpath ? relpath : "(null)", "unlink", rc);
	return rc;
}

/* The walk's own failures are told apart from fn's non-zero returns, which
 * are passed through unlogged. */
struct backing_list_walk {
	backing_list_fn fn;
	void *arg;
	int fn_rc;
};

static int backing_list_step(void *arg, const char *name)
{
	struct backing_list_walk *w = arg;
	w->fn_rc = w->fn(w->arg, name);
	return w->fn_rc;
}

int backing_list(struct backing *b, const char *reldir, backing_list_fn fn, void *arg)
{
	int rc = backing_check_path(reldir, true);
	if (rc == 0 && !fn)
		rc = -EINVAL;
	struct backing_list_walk w = { fn, arg, 0 };
	if (rc == 0)
		rc = b->nfs ? backing_nfs_list(b->nfs, reldir, backing_list_step, &w)
			    : bdir_list(b, reldir, backing_list_step, &w);
	if (rc != 0 && rc != -ENOENT && rc != w.fn_rc)
		backing_log_failure(b, "list", reldir ? (reldir[0] ? reldir : "/") : "(null)",
				    "readdir", rc);
	return rc;
}

int backing_probe(struct backing *b, char *msg, size_t msgsize)
{
	char tmp[BACKING_TMP_NAME], done_name[BACKING_TMP_NAME], step[PATH_MAX + 160];
	backing_tmp_name(b, "probe.", tmp, sizeof(tmp));
	snprintf(done_name, sizeof(done_name), "%s.done", tmp);

	uint8_t *want = malloc(BACKING_PROBE_LEN), *got = malloc(BACKING_PROBE_LEN + 1);
	int rc = 0;
	if (!want || !got) {
		rc = -ENOMEM;
		snprintf(step, sizeof(step), "allocate buffers for %s", tmp);
		goto out;
	}
	/* Different bytes every probe, so a stale file cannot pass the check. */
	uint64_t x = ((uint64_t)getpid() << 32) ^ atomic_load(&backing_tmp_seq) ^ (uintptr_t)want;
	for (size_t i = 0; i < BACKING_PROBE_LEN; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		want[i] = (uint8_t)(x >> 56);
	}

	snprintf(step, sizeof(step), "mkdir %s", BACKING_TMP_DIR);
	rc = backing_mkdir(b, BACKING_TMP_DIR);
	if (rc == 0) {
		snprintf(step, sizeof(step), "write+fsync %s", tmp);
		rc = backing_write_file(b, tmp, want, BACKING_PROBE_LEN, true);
	}
	if (rc == 0) {
		size_t len = 0;
		snprintf(step, sizeof(step), "read back %s", tmp);
		rc = backing_read_file(b, tmp, got, BACKING_PROBE_LEN + 1, &len);
		if (rc == 0 && (len != BACKING_PROBE_LEN || memcmp(got, want, len) != 0)) {
			rc = -EIO;
			snprintf(step, sizeof(step), "compare %s (%zu bytes read, %d written)", tmp, len,
				 BACKING_PROBE_LEN);
		}
	}
	if (rc == 0) {
		snprintf(step, sizeof(step), "rename %s → %s", tmp, done_name);
		rc = backing_rename(b, tmp, done_name, true, 0);
	}
	if (rc == 0) {
		snprintf(step, sizeof(step), "unlink %s", done_name);
		rc = backing_unlink(b, done_name);
	}
out:
	if (rc != 0) {
		const char *detail = rc == -EIO && !strncmp(step, "compare", 7) ? "" : backing_detail(b);
		char line[PATH_MAX + 512];
		snprintf(line, sizeof(line), "BACKING %s: %s failed: %s%s%s", b->spec, step,
			 rc == -EIO && !strncmp(step, "compare", 7) ? "the bytes differ" : strerror(-rc),
			 *detail ? " — " : "", detail);
		log_error("%s", line);
		if (msg && msgsize)
			snprintf(msg, msgsize, "%s", line);
		backing_discard_tmp(b, tmp, rc);
		backing_discard_tmp(b, done_name, rc);
	} else if (msg && msgsize) {
		msg[0] = '\0';
	}
	free(want);
	free(got);
	return rc;
}
