/* safeopen — no-follow opens beneath a directory fd, unguessable temporary
 * names, and the StrictModes check of a state directory (safeopen.h). */
#define _GNU_SOURCE
#include "safeopen.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

/* -1 once openat2 is known not to work here (ENOSYS, or a seccomp filter's
 * EPERM): the walk from then on */
static atomic_int safe_openat2_state;

/* Invariant 1: relative, non-empty, no "." or ".." or empty component. */
static int safe_check_rel(const char *rel)
{
	if (!rel || !rel[0] || rel[0] == '/')
		return -EINVAL;
	for (const char *p = rel;;) {
		const char *end = strchrnul(p, '/');
		size_t n = (size_t)(end - p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return -EINVAL;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

#ifdef SYS_openat2
/* -ENOSYS when openat2 cannot be used here. */
static int safe_openat2(int dirfd, const char *rel, int flags, mode_t mode)
{
	if (atomic_load_explicit(&safe_openat2_state, memory_order_relaxed) < 0)
		return -ENOSYS;
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno == ENOSYS) { /* a kernel before 5.6, or a sandbox that filters it */
		atomic_store_explicit(&safe_openat2_state, -1, memory_order_relaxed);
		return -ENOSYS;
	}
	return -errno;
}
#endif

/* The fallback: each directory on the way with O_NOFOLLOW | O_DIRECTORY. */
static int safe_openat_walk(int dirfd, const char *rel, int flags, mode_t mode)
{
	char comp[NAME_MAX + 1];
	int cur = dirfd;
	const char *p = rel;
	for (;;) {
		const char *end = strchr(p, '/');
		if (!end)
			break;
		size_t n = (size_t)(end - p);
		if (n > NAME_MAX) {
			if (cur != dirfd)
				close(cur);
			return -ENAMETOOLONG;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int err = errno;
		if (cur != dirfd)
			close(cur);
		if (next < 0)
			return -err;
		cur = next;
		p = end + 1;
	}
	int fd = openat(cur, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	int err = errno;
	if (cur != dirfd)
		close(cur);
	return fd >= 0 ? fd : -err;
}

/* O_DIRECTORY | O_NOFOLLOW on a symlink is ENOTDIR: -ELOOP if a component
 * of rel is a symlink, so the caller's line says what was found. */
static int safe_explain_enotdir(int dirfd, const char *rel)
{
	char prefix[PATH_MAX];
	size_t n = strlen(rel);
	if (n >= sizeof(prefix))
		return -ENOTDIR;
	memcpy(prefix, rel, n + 1);
	for (char *p = prefix;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		struct stat st;
		if (fstatat(dirfd, prefix, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			return -ELOOP;
		if (c == '\0')
			return -ENOTDIR;
		*p = c;
	}
}

int safe_openat(int dirfd, const char *rel, int flags, mode_t mode)
{
	int rc = safe_check_rel(rel);
	if (rc != 0)
		return rc;
#ifdef SYS_openat2
	rc = safe_openat2(dirfd, rel, flags, mode);
	if (rc == -EPERM) {
		/* Old container runtimes' seccomp filters answer EPERM for system
		 * calls they do not know. A real EPERM (an immutable file) comes
		 * back from the walk too; anything else means openat2 is filtered. */
		rc = safe_openat_walk(dirfd, rel, flags, mode);
		if (rc != -EPERM)
			atomic_store(&safe_openat2_state, -1);
	} else if (rc == -ENOSYS)
#endif
		rc = safe_openat_walk(dirfd, rel, flags, mode);
	return rc == -ENOTDIR ? safe_explain_enotdir(dirfd, rel) : rc;
}

int safe_parent(int dirfd, const char *rel, const char **base)
{
	int rc = safe_check_rel(rel);
	if (rc != 0)
		return rc;
	const char *slash = strrchr(rel, '/');
	*base = slash ? slash + 1 : rel;
	if (!slash) {
		int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
		return fd >= 0 ? fd : -errno;
	}
	char dir[PATH_MAX];
	size_t n = (size_t)(slash - rel);
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, rel, n);
	dir[n] = '\0';
	return safe_openat(dirfd, dir, O_RDONLY | O_DIRECTORY, 0);
}

int safe_mkdirat(int dirfd, const char *rel, mode_t mode)
{
	const char *base;
	int pfd = safe_parent(dirfd, rel, &base);
	if (pfd < 0)
		return pfd;
	int rc = mkdirat(pfd, base, mode) == 0 ? 0 : -errno;
	if (rc == -EEXIST) {
		struct stat st;
		rc = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 ? -errno
		     : S_ISDIR(st.st_mode)			    ? 0
		     : S_ISLNK(st.st_mode)			    ? -ELOOP
								    : -ENOTDIR;
	}
	close(pfd);
	return rc;
}

int safe_tmpname(char *buf, size_t size, const char *prefix)
{
	uint64_t r;
	size_t got = 0;
	while (got < sizeof(r)) {
		ssize_t n = getrandom((char *)&r + got, sizeof(r) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	int n = snprintf(buf, size, "%s%016llx", prefix, (unsigned long long)r);
	return n >= 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

bool safe_others_can_write(const struct stat *st)
{
	return (st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX);
}

/* ---- StrictModes ----
 *
 * Like sshd's secure_filename: the directory itself must be the user's and
 * writable by nobody else; every directory above it must belong to root or
 * the user, and may be writable by others only with the sticky bit (/tmp),
 * where nobody else can rename or remove what the user made. The group is
 * not trusted: a group-writable directory (without sticky) is refused even
 * if its group is the user's own, as sshd does. */

static int safe_refuse(char *why, size_t size, const char *path, const char *fmt, unsigned a,
		       unsigned b)
{
	char reason[160];
	snprintf(reason, sizeof(reason), fmt, a, b);
	snprintf(why, size, "%s: %s", path, reason);
	return -EPERM;
}

static int safe_check_ancestors(const char *path, uid_t uid, char *why, size_t whysize)
{
	char dir[PATH_MAX];
	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	for (;;) {
		char *slash = strrchr(dir, '/');
		if (!slash)
			return 0;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		struct stat st;
		if (lstat(dir, &st) != 0) {
			snprintf(why, whysize, "%s: %s", dir, strerror(errno));
			return -errno;
		}
		if (S_ISLNK(st.st_mode))
			return safe_refuse(why, whysize, dir, "a symlink on the path (give the real path)",
					   0, 0);
		if (st.st_uid != 0 && st.st_uid != uid)
			return safe_refuse(why, whysize, dir,
					   "a directory above it is owned by uid %u, not root or %u",
					   (unsigned)st.st_uid, (unsigned)uid);
		if (safe_others_can_write(&st))
			return safe_refuse(why, whysize, dir,
					   "a directory above it is writable by other users (mode "
					   "%04o, no sticky bit)",
					   (unsigned)(st.st_mode & 07777), 0);
		if (slash == dir)
			return 0;
	}
}

int safe_check_owned_dir(const char *path, uid_t uid, bool fix, mode_t *fixed_mode, char *why,
			 size_t whysize)
{
	if (fixed_mode)
		*fixed_mode = 0;
	if (!path || path[0] != '/')
		return -EINVAL;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		struct stat lst;
		if (err == ENOTDIR && lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
			err = ELOOP;
		snprintf(why, whysize, "%s: %s", path,
			 err == ELOOP ? "a symlink (give the real path)" : strerror(err));
		return -err;
	}
	struct stat st;
	int rc = fstat(fd, &st) == 0 ? 0 : -errno;
	if (rc != 0)
		snprintf(why, whysize, "%s: %s", path, strerror(-rc));
	else if (st.st_uid != uid)
		rc = safe_refuse(why, whysize, path, "owned by uid %u, not by the mounting user (uid %u)",
				 (unsigned)st.st_uid, (unsigned)uid);
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		rc = safe_refuse(why, whysize, path, "writable by group or others (mode %04o)",
				 (unsigned)(st.st_mode & 07777), 0);
	if (rc == 0)
		rc = safe_check_ancestors(path, uid, why, whysize);
	if (rc == 0 && fix && (st.st_mode & 0077)) {
		if (fchmod(fd, 0700) != 0) {
			rc = -errno;
			snprintf(why, whysize, "%s: chmod 0700: %s", path, strerror(errno));
		} else if (fixed_mode) {
			*fixed_mode = st.st_mode & 07777;
		}
	}
	close(fd);
	return rc;
}

void safe_openat_use_walk(bool walk)
{
	atomic_store(&safe_openat2_state, walk ? -1 : 0);
}

int safe_open_seen(int dirfd, const char *name, const struct stat *seen, int flags)
{
	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	/* O_NONBLOCK: a FIFO swapped in must not hang the open; cleared below */
	int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat now;
	int rc = fstat(fd, &now) == 0 ? 0 : -errno;
	if (rc == 0 && (now.st_dev != seen->st_dev || now.st_ino != seen->st_ino ||
			(now.st_mode & S_IFMT) != (seen->st_mode & S_IFMT)))
		rc = -ESTALE;
	if (rc == 0 && !(flags & O_NONBLOCK)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
			rc = -errno;
	}
	if (rc != 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int safe_dir_each(int fd, safe_dir_fn fn, void *arg)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			rc = errno ? -errno : 0;
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if ((rc = fn(arg, de->d_name)) != 0)
			break;
	}
	closedir(d);
	return rc;
}
