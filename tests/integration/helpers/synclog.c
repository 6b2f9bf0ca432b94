/* review s30: LD_PRELOAD shim for the daemon. Logs, in order, every fsync,
 * fdatasync and syncfs (with the file's path) and every unlink/unlinkat
 * (with the full path) to $SYNCLOG, one line each: "sync PATH" / "unlink PATH". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void sl_write(const char *what, const char *path)
{
	const char *log = getenv("SYNCLOG");
	if (!log)
		return;
	char line[PATH_MAX + 32];
	int n = snprintf(line, sizeof(line), "%s %s\n", what, path);
	int fd = (int)syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (syscall(SYS_write, fd, line, (size_t)n) < 0) {
	}
	syscall(SYS_close, fd);
}

static void sl_fd_path(int fd, char *out, size_t size)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(p, out, size - 1);
	out[n > 0 ? n : 0] = 0;
}

static void sl_fd(const char *what, int fd)
{
	char path[PATH_MAX];
	sl_fd_path(fd, path, sizeof(path));
	sl_write(what, path);
}

int fsync(int fd)
{
	sl_fd("sync", fd);
	return (int)syscall(SYS_fsync, fd);
}

int fdatasync(int fd)
{
	sl_fd("sync", fd);
	return (int)syscall(SYS_fdatasync, fd);
}

int syncfs(int fd)
{
	sl_fd("syncfs", fd);
	return (int)syscall(SYS_syncfs, fd);
}

int unlinkat(int dirfd, const char *name, int flags)
{
	char path[PATH_MAX * 2];
	if (name[0] == '/' || dirfd == AT_FDCWD) {
		snprintf(path, sizeof(path), "%s", name);
	} else {
		char dir[PATH_MAX];
		sl_fd_path(dirfd, dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	}
	sl_write("unlink", path);
	return (int)syscall(SYS_unlinkat, dirfd, name, flags);
}

int unlink(const char *name)
{
	sl_write("unlink", name);
	return (int)syscall(SYS_unlinkat, AT_FDCWD, name, 0);
}
