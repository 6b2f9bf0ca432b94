/* review s30: LD_PRELOAD shim for the daemon. Logs, in order, every fsync,
 * fdatasync and syncfs (with the file's path) and every unlink/unlinkat
 * (with the full path) to $SYNCLOG, one line each: "sync PATH" / "unlink PATH";
 * optionally holds one syncfs at a gate (sl_gate). With $SYNCLOG_ORDER set
 * also (review 40 F4) "walwrite PATH" for each pwrite to a file whose name
 * ends in "-wal" (a SQLite WAL frame), "link PATH" / "rename PATH" with the
 * target's full path for each linkat / renameat. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
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

/* The gate (review3 F4): with $SYNCLOG_GATE set and the file
 * $SYNCLOG_GATE.arm present, the first syncfs of a directory named "cache"
 * creates $SYNCLOG_GATE.entered and waits (up to 60 s) for
 * $SYNCLOG_GATE.go before it runs, logging "gate" when it passes: a test
 * changes the mount while a commit's sync is under way. Once only. */
static void sl_gate(const char *path)
{
	const char *gate = getenv("SYNCLOG_GATE");
	size_t n = strlen(path);
	if (!gate || n < 6 || strcmp(path + n - 6, "/cache") != 0)
		return;
	char arm[PATH_MAX], entered[PATH_MAX], go[PATH_MAX];
	snprintf(arm, sizeof(arm), "%s.arm", gate);
	snprintf(entered, sizeof(entered), "%s.entered", gate);
	snprintf(go, sizeof(go), "%s.go", gate);
	if (access(arm, F_OK) != 0)
		return;
	int fd = (int)syscall(SYS_openat, AT_FDCWD, entered, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return; /* entered before: once only */
	syscall(SYS_close, fd);
	struct timespec nap = { 0, 10 * 1000 * 1000 };
	for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++)
		nanosleep(&nap, NULL);
	sl_write("gate", path);
}

int syncfs(int fd)
{
	char path[PATH_MAX];
	sl_fd_path(fd, path, sizeof(path));
	sl_gate(path);
	sl_write("syncfs", path);
	return (int)syscall(SYS_syncfs, fd);
}

/* The full path of dirfd/name (name as is when absolute or at AT_FDCWD). */
static void sl_at(const char *what, int dirfd, const char *name)
{
	char path[PATH_MAX * 2];
	if (name[0] == '/' || dirfd == AT_FDCWD) {
		snprintf(path, sizeof(path), "%s", name);
	} else {
		char dir[PATH_MAX];
		sl_fd_path(dirfd, dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/%s", dir, name);
	}
	sl_write(what, path);
}

int unlinkat(int dirfd, const char *name, int flags)
{
	sl_at("unlink", dirfd, name);
	return (int)syscall(SYS_unlinkat, dirfd, name, flags);
}

int unlink(const char *name)
{
	sl_write("unlink", name);
	return (int)syscall(SYS_unlinkat, AT_FDCWD, name, 0);
}

/* ---- $SYNCLOG_ORDER (review 40 F4): WAL writes, links and renames ---- */

static int sl_order(void)
{
	return getenv("SYNCLOG_ORDER") != NULL;
}

static void sl_wal(int fd)
{
	if (!sl_order())
		return;
	char path[PATH_MAX];
	sl_fd_path(fd, path, sizeof(path));
	size_t n = strlen(path);
	if (n > 4 && strcmp(path + n - 4, "-wal") == 0)
		sl_write("walwrite", path);
}

/* Both symbols: with _FILE_OFFSET_BITS=64 "pwrite" names pwrite64 here, so
 * the plain one is given its name by hand (64-bit: the same off_t). */
ssize_t sl_pwrite_plain(int fd, const void *buf, size_t count, off_t off) __asm__("pwrite");
ssize_t sl_pwrite_plain(int fd, const void *buf, size_t count, off_t off)
{
	sl_wal(fd);
	return syscall(SYS_pwrite64, fd, buf, count, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off)
{
	sl_wal(fd);
	return syscall(SYS_pwrite64, fd, buf, count, off);
}

int linkat(int olddirfd, const char *oldname, int newdirfd, const char *newname, int flags)
{
	if (sl_order())
		sl_at("link", newdirfd, newname);
	return (int)syscall(SYS_linkat, olddirfd, oldname, newdirfd, newname, flags);
}

int renameat(int olddirfd, const char *oldname, int newdirfd, const char *newname)
{
	if (sl_order())
		sl_at("rename", newdirfd, newname);
	return (int)syscall(SYS_renameat, olddirfd, oldname, newdirfd, newname);
}
