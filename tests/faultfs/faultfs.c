/*
 * faultfs — a fault-injecting FUSE passthrough filesystem for ckptfs's tests.
 *
 *   faultfs [-f] [-o FUSEOPTS] -o ctl=CTLFILE SRCDIR MOUNTPOINT
 *
 * MOUNTPOINT mirrors SRCDIR (every op ckptfs uses on a directory BACKING).
 * Each op first passes through fault_gate(), which applies what CTLFILE says
 * right now. CTLFILE is a text file of `key=value` lines ('#' starts a
 * comment); it is re-read at most every 100 ms, and a new content takes
 * effect at once (the bytes are compared, so two writes inside one mtime
 * tick are not missed). A missing CTLFILE means no faults.
 *
 *   bw=BYTES_PER_SEC   throttle reads + writes together (token bucket); 0 = off
 *   latency_ms=N       sleep N ms before every op
 *   eio=OPS            fail these ops with EIO     (OPS: comma list of op names
 *   enospc=OPS         fail these ops with ENOSPC   below, or `all`)
 *   fail_every=N       only every Nth op matching eio/enospc fails (default 1);
 *                      the count restarts whenever CTLFILE changes
 *   hang=1             every op blocks until hang is cleared, then proceeds
 *
 * Op names: read write fsync (also fsyncdir) rename create mkdir unlink rmdir
 * getattr readdir opendir open flush truncate statfs utimens chmod chown
 * symlink readlink link. release/releasedir are counted, delayed and held by
 * hang but never failed (the kernel ignores their errors; the fd must close).
 * An op in both eio and enospc fails with EIO.
 *
 * Counters go to CTLFILE.stats (temp + rename, so readers never see half a
 * file) every second and within ~100 ms of a change: `ops`, `faults`, `eio`,
 * `enospc`, `hung` (ops ever held by hang), `hanging` (held right now),
 * `bytes_read`, `bytes_written`, `throttle_ms`, `config_loads`, then
 * `op.NAME` (ops served) and `fault.NAME` (faults injected) for every op name,
 * and `fsyncdir` (the part of op.fsync that were fsyncs of a directory).
 *
 * Invariants:
 *   1. An op that is failed by a fault has not touched SRCDIR.
 *   2. Every op is counted in `ops` exactly once, after hang and latency.
 *   3. Faults never leak a file descriptor: release always closes.
 *   4. No op outlives the session: when faultfs is told to exit (SIGTERM,
 *      unmount), ops held by hang fail with EIO, so the daemon can exit.
 */
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 31
#endif
#define _GNU_SOURCE
#include <fuse.h>
#include <fuse_lowlevel.h> /* fuse_session_exited */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- op names */

enum fault_op {
	FOP_READ, FOP_WRITE, FOP_FSYNC, FOP_RENAME, FOP_CREATE, FOP_MKDIR, FOP_UNLINK,
	FOP_RMDIR, FOP_GETATTR, FOP_READDIR, FOP_OPENDIR, FOP_OPEN, FOP_FLUSH,
	FOP_TRUNCATE, FOP_STATFS, FOP_UTIMENS, FOP_CHMOD, FOP_CHOWN, FOP_SYMLINK,
	FOP_READLINK, FOP_LINK, FOP_RELEASE, FOP_RELEASEDIR, FOP_COUNT
};

static const char *const fault_op_name[FOP_COUNT] = {
	"read", "write", "fsync", "rename", "create", "mkdir", "unlink",
	"rmdir", "getattr", "readdir", "opendir", "open", "flush",
	"truncate", "statfs", "utimens", "chmod", "chown", "symlink",
	"readlink", "link", "release", "releasedir",
};

#define FOP_NEVER_FAILS ((1u << FOP_RELEASE) | (1u << FOP_RELEASEDIR))

/* ---------------------------------------------------------------- state */

struct fault_config {
	uint64_t bw;          /* bytes per second, 0 = unthrottled */
	unsigned latency_ms;
	uint32_t eio_mask;    /* bit per enum fault_op */
	uint32_t enospc_mask;
	unsigned fail_every;  /* >= 1 */
	int hang;
};

static struct {
	char src[PATH_MAX];
	char ctl[PATH_MAX];
	char stats[PATH_MAX + 8];

	pthread_mutex_t lock; /* guards cfg, ctl_text, last_check, bucket_t */
	struct fault_config cfg;
	char ctl_text[8192];
	double last_check;
	double bucket_t;      /* virtual time at which the bucket is empty again */

	atomic_ulong match_seq; /* ops that matched eio/enospc since the last load */
	atomic_ulong ops[FOP_COUNT], faults[FOP_COUNT];
	atomic_ulong eio, enospc, hung, hanging, bytes_read, bytes_written, throttle_ms;
	atomic_ulong config_loads, change_seq;
	atomic_ulong fsyncdir; /* the part of ops[FOP_FSYNC] that were directories */

	pthread_t stats_thread;
	atomic_int stop;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cfg = { .fail_every = 1 } };

static double fault_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fault_sleep(double seconds)
{
	if (seconds <= 0)
		return;
	struct timespec ts = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void fault_bump(atomic_ulong *counter, unsigned long by)
{
	atomic_fetch_add(counter, by);
	atomic_fetch_add(&g.change_seq, 1);
}

/* ---------------------------------------------------------------- control file */

static uint32_t fault_parse_ops(const char *list)
{
	uint32_t mask = 0;
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		if (strcmp(tok, "all") == 0) {
			mask |= (1u << FOP_COUNT) - 1;
			continue;
		}
		int found = 0;
		for (int i = 0; i < FOP_COUNT; i++)
			if (strcmp(tok, fault_op_name[i]) == 0)
				mask |= 1u << i, found = 1;
		if (strcmp(tok, "fsyncdir") == 0)
			mask |= 1u << FOP_FSYNC, found = 1;
		if (!found)
			fprintf(stderr, "faultfs: %s: unknown op '%s' ignored\n", g.ctl, tok);
	}
	return mask & ~FOP_NEVER_FAILS;
}

static struct fault_config fault_parse(char *text)
{
	struct fault_config c = { .fail_every = 1 };
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *eq = strchr(line, '=');
		char *key = line + strspn(line, " \t\r");
		if (!eq) {
			if (*key)
				fprintf(stderr, "faultfs: %s: line '%s' is not key=value, ignored\n", g.ctl, key);
			continue;
		}
		*eq = '\0';
		char *val = eq + 1 + strspn(eq + 1, " \t");
		for (char *e = key + strlen(key); e > key && strchr(" \t", e[-1]); e--)
			e[-1] = '\0';
		for (char *e = val + strlen(val); e > val && strchr(" \t\r", e[-1]); e--)
			e[-1] = '\0';
		if (strcmp(key, "bw") == 0)
			c.bw = strtoull(val, NULL, 10);
		else if (strcmp(key, "latency_ms") == 0)
			c.latency_ms = (unsigned)strtoul(val, NULL, 10);
		else if (strcmp(key, "eio") == 0)
			c.eio_mask = fault_parse_ops(val);
		else if (strcmp(key, "enospc") == 0)
			c.enospc_mask = fault_parse_ops(val);
		else if (strcmp(key, "fail_every") == 0)
			c.fail_every = strtoul(val, NULL, 10) > 0 ? (unsigned)strtoul(val, NULL, 10) : 1;
		else if (strcmp(key, "hang") == 0)
			c.hang = atoi(val) != 0;
		else
			fprintf(stderr, "faultfs: %s: unknown key '%s' ignored\n", g.ctl, key);
	}
	return c;
}

/* Re-reads CTLFILE if 100 ms have passed since the last look; returns the
 * configuration in force. */
static struct fault_config fault_config_get(void)
{
	double now = fault_now();
	pthread_mutex_lock(&g.lock);
	if (now - g.last_check >= 0.1) {
		g.last_check = now;
		char text[sizeof(g.ctl_text)] = "";
		FILE *f = fopen(g.ctl, "r");
		if (f) {
			size_t n = fread(text, 1, sizeof(text) - 1, f);
			text[n] = '\0';
			fclose(f);
		}
		if (strcmp(text, g.ctl_text) != 0 || atomic_load(&g.config_loads) == 0) {
			memcpy(g.ctl_text, text, sizeof(text));
			g.cfg = fault_parse(text);
			g.bucket_t = 0;
			atomic_store(&g.match_seq, 0);
			fault_bump(&g.config_loads, 1);
		}
	}
	struct fault_config c = g.cfg;
	pthread_mutex_unlock(&g.lock);
	return c;
}

/* ---------------------------------------------------------------- faults */

/* True once the session is told to end: libfuse joins its workers at exit,
 * so none may stay held by hang=1. */
static int fault_exiting(void)
{
	struct fuse_context *ctx = fuse_get_context();
	if (atomic_load(&g.stop))
		return 1;
	return ctx && ctx->fuse && fuse_session_exited(fuse_get_session(ctx->fuse));
}

/* Hang, latency, counting, then error injection. Returns 0 to go on, or a
 * negative errno that the op returns without touching SRCDIR. */
static int fault_gate(enum fault_op op)
{
	struct fault_config c = fault_config_get();
	if (c.hang) {
		fault_bump(&g.hung, 1);
		fault_bump(&g.hanging, 1);
		while (c.hang && !fault_exiting()) {
			fault_sleep(0.05);
			c = fault_config_get();
		}
		atomic_fetch_sub(&g.hanging, 1);
		atomic_fetch_add(&g.change_seq, 1);
		if (c.hang)
			return -EIO; /* faultfs is exiting (SIGTERM, unmount) */
	}
	fault_sleep(c.latency_ms / 1000.0);
	fault_bump(&g.ops[op], 1);

	uint32_t bit = 1u << op;
	if (!((c.eio_mask | c.enospc_mask) & bit))
		return 0;
	if ((atomic_fetch_add(&g.match_seq, 1) + 1) % c.fail_every != 0)
		return 0;
	fault_bump(&g.faults[op], 1);
	if (c.eio_mask & bit) {
		fault_bump(&g.eio, 1);
		return -EIO;
	}
	fault_bump(&g.enospc, 1);
	return -ENOSPC;
}

/* Token bucket as a virtual clock: each transfer pushes bucket_t forward by
 * bytes/bw; a caller sleeps until bucket_t, less a 50 ms burst allowance.
 * Sleeps in slices so clearing bw releases waiters promptly. */
static void fault_throttle(size_t bytes)
{
	struct fault_config c = fault_config_get();
	if (c.bw == 0 || bytes == 0)
		return;
	double now = fault_now(), start = now;
	pthread_mutex_lock(&g.lock);
	if (g.bucket_t < now - 0.05)
		g.bucket_t = now - 0.05;
	g.bucket_t += (double)bytes / (double)c.bw;
	double until = g.bucket_t;
	pthread_mutex_unlock(&g.lock);
	while (now < until && fault_config_get().bw != 0) {
		fault_sleep(until - now < 0.05 ? until - now : 0.05);
		now = fault_now();
	}
	fault_bump(&g.throttle_ms, (unsigned long)((now - start) * 1000));
}

/* ---------------------------------------------------------------- stats */

static void fault_stats_write(void)
{
	char tmp[sizeof(g.stats) + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", g.stats);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		int err = errno;
		fprintf(stderr, "faultfs: cannot write %s: %s\n", tmp, strerror(err));
		return;
	}
	unsigned long total = 0;
	for (int i = 0; i < FOP_COUNT; i++)
		total += atomic_load(&g.ops[i]);
	fprintf(f, "ops=%lu\nfaults=%lu\neio=%lu\nenospc=%lu\nhung=%lu\nhanging=%lu\n",
		total, atomic_load(&g.eio) + atomic_load(&g.enospc), atomic_load(&g.eio),
		atomic_load(&g.enospc), atomic_load(&g.hung), atomic_load(&g.hanging));
	fprintf(f, "bytes_read=%lu\nbytes_written=%lu\nthrottle_ms=%lu\nconfig_loads=%lu\n",
		atomic_load(&g.bytes_read), atomic_load(&g.bytes_written),
		atomic_load(&g.throttle_ms), atomic_load(&g.config_loads));
	for (int i = 0; i < FOP_COUNT; i++)
		fprintf(f, "op.%s=%lu\n", fault_op_name[i], atomic_load(&g.ops[i]));
	fprintf(f, "fsyncdir=%lu\n", atomic_load(&g.fsyncdir));
	for (int i = 0; i < FOP_COUNT; i++)
		fprintf(f, "fault.%s=%lu\n", fault_op_name[i], atomic_load(&g.faults[i]));
	if (fclose(f) != 0 || rename(tmp, g.stats) != 0) {
		int err = errno;
		fprintf(stderr, "faultfs: cannot write %s: %s\n", g.stats, strerror(err));
	}
}

/* Also keeps CTLFILE fresh while no op arrives, so stats show new loads. */
static void *fault_stats_main(void *arg)
{
	unsigned long written_seq = (unsigned long)-1;
	double written_at = 0;
	while (!atomic_load(&g.stop)) {
		fault_config_get();
		unsigned long seq = atomic_load(&g.change_seq);
		if (seq != written_seq || fault_now() - written_at >= 1.0) {
			fault_stats_write();
			written_seq = seq;
			written_at = fault_now();
		}
		fault_sleep(0.1);
	}
	fault_stats_write();
	return NULL;
}

/* ---------------------------------------------------------------- FUSE ops */

/* SRCDIR + path; paths longer than PATH_MAX fail with ENAMETOOLONG. */
#define FAULT_PATH(var, path)                                                         \
	char var[PATH_MAX];                                                           \
	if (snprintf(var, sizeof(var), "%s%s", g.src, (path)) >= (int)sizeof(var))    \
		return -ENAMETOOLONG

#define FAULT_GATE(op)                   \
	do {                             \
		int gate_rc = fault_gate(op); \
		if (gate_rc != 0)        \
			return gate_rc;  \
	} while (0)

static int fault_rc(int sysret) { return sysret == -1 ? -errno : 0; }

static void *fault_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/* Every op reaches us, so every fault fires; inode numbers pass through. */
	cfg->use_ino = 1;
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	fault_config_get();
	if (pthread_create(&g.stats_thread, NULL, fault_stats_main, NULL) != 0)
		fprintf(stderr, "faultfs: cannot start the stats thread\n");
	return NULL;
}

static void fault_destroy(void *private_data)
{
	atomic_store(&g.stop, 1);
	pthread_join(g.stats_thread, NULL);
}

static int fault_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_GETATTR);
	if (fi)
		return fault_rc(fstat((int)fi->fh, st));
	FAULT_PATH(p, path);
	return fault_rc(lstat(p, st));
}

static int fault_opendir(const char *path, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_OPENDIR);
	FAULT_PATH(p, path);
	DIR *d = opendir(p);
	if (!d)
		return -errno;
	fi->fh = (uint64_t)(uintptr_t)d;
	return 0;
}

static int fault_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
			 struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	FAULT_GATE(FOP_READDIR);
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	struct dirent *de;
	rewinddir(d); /* offset 0 mode: libfuse asks once and buffers the listing */
	for (;;) {
		errno = 0;
		if ((de = readdir(d)) == NULL)
			return -errno;
		struct stat st = { .st_ino = de->d_ino, .st_mode = (mode_t)DTTOIF(de->d_type) };
		if (fill(buf, de->d_name, &st, 0, 0))
			return 0;
	}
}

static int fault_releasedir(const char *path, struct fuse_file_info *fi)
{
	fault_gate(FOP_RELEASEDIR);
	closedir((DIR *)(uintptr_t)fi->fh);
	return 0;
}

static int fault_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_FSYNC);
	atomic_fetch_add(&g.fsyncdir, 1);
	int fd = dirfd((DIR *)(uintptr_t)fi->fh);
	return fault_rc(datasync ? fdatasync(fd) : fsync(fd));
}

static int fault_mkdir(const char *path, mode_t mode)
{
	FAULT_GATE(FOP_MKDIR);
	FAULT_PATH(p, path);
	return fault_rc(mkdir(p, mode));
}

static int fault_rmdir(const char *path)
{
	FAULT_GATE(FOP_RMDIR);
	FAULT_PATH(p, path);
	return fault_rc(rmdir(p));
}

static int fault_unlink(const char *path)
{
	FAULT_GATE(FOP_UNLINK);
	FAULT_PATH(p, path);
	return fault_rc(unlink(p));
}

static int fault_rename(const char *from, const char *to, unsigned int flags)
{
	FAULT_GATE(FOP_RENAME);
	FAULT_PATH(a, from);
	FAULT_PATH(b, to);
	return fault_rc(renameat2(AT_FDCWD, a, AT_FDCWD, b, flags));
}

static int fault_symlink(const char *target, const char *path)
{
	FAULT_GATE(FOP_SYMLINK);
	FAULT_PATH(p, path);
	return fault_rc(symlink(target, p));
}

static int fault_readlink(const char *path, char *buf, size_t size)
{
	FAULT_GATE(FOP_READLINK);
	FAULT_PATH(p, path);
	ssize_t n = readlink(p, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int fault_link(const char *from, const char *to)
{
	FAULT_GATE(FOP_LINK);
	FAULT_PATH(a, from);
	FAULT_PATH(b, to);
	return fault_rc(link(a, b));
}

static int fault_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_CHMOD);
	if (fi)
		return fault_rc(fchmod((int)fi->fh, mode));
	FAULT_PATH(p, path);
	return fault_rc(chmod(p, mode));
}

static int fault_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_CHOWN);
	if (fi)
		return fault_rc(fchown((int)fi->fh, uid, gid));
	FAULT_PATH(p, path);
	return fault_rc(lchown(p, uid, gid));
}

static int fault_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_TRUNCATE);
	if (fi)
		return fault_rc(ftruncate((int)fi->fh, size));
	FAULT_PATH(p, path);
	return fault_rc(truncate(p, size));
}

static int fault_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_UTIMENS);
	if (fi)
		return fault_rc(futimens((int)fi->fh, tv));
	FAULT_PATH(p, path);
	return fault_rc(utimensat(AT_FDCWD, p, tv, AT_SYMLINK_NOFOLLOW));
}

static int fault_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_CREATE);
	FAULT_PATH(p, path);
	int fd = open(p, fi->flags, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int fault_open(const char *path, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_OPEN);
	FAULT_PATH(p, path);
	int fd = open(p, fi->flags);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int fault_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_READ);
	ssize_t n = pread((int)fi->fh, buf, size, off);
	if (n < 0)
		return -errno;
	fault_throttle((size_t)n);
	fault_bump(&g.bytes_read, (unsigned long)n);
	return (int)n;
}

static int fault_write(const char *path, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_WRITE);
	fault_throttle(size);
	ssize_t n = pwrite((int)fi->fh, buf, size, off);
	if (n < 0)
		return -errno;
	fault_bump(&g.bytes_written, (unsigned long)n);
	return (int)n;
}

static int fault_flush(const char *path, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_FLUSH);
	/* close(dup) reports deferred errors of the backing file system, as NFS does */
	int fd = dup((int)fi->fh);
	return fd < 0 ? -errno : fault_rc(close(fd));
}

static int fault_release(const char *path, struct fuse_file_info *fi)
{
	fault_gate(FOP_RELEASE);
	close((int)fi->fh);
	return 0;
}

static int fault_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	FAULT_GATE(FOP_FSYNC);
	return fault_rc(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static int fault_statfs(const char *path, struct statvfs *st)
{
	FAULT_GATE(FOP_STATFS);
	FAULT_PATH(p, path);
	return fault_rc(statvfs(p, st));
}

static const struct fuse_operations fault_ops = {
	.init = fault_init,         .destroy = fault_destroy,
	.getattr = fault_getattr,   .opendir = fault_opendir,   .readdir = fault_readdir,
	.releasedir = fault_releasedir, .fsyncdir = fault_fsyncdir,
	.mkdir = fault_mkdir,       .rmdir = fault_rmdir,       .unlink = fault_unlink,
	.rename = fault_rename,     .symlink = fault_symlink,   .readlink = fault_readlink,
	.link = fault_link,         .chmod = fault_chmod,       .chown = fault_chown,
	.truncate = fault_truncate, .utimens = fault_utimens,   .create = fault_create,
	.open = fault_open,         .read = fault_read,         .write = fault_write,
	.flush = fault_flush,       .release = fault_release,   .fsync = fault_fsync,
	.statfs = fault_statfs,
};

/* ---------------------------------------------------------------- main */

struct fault_args {
	char *ctl;
	char *src;
};

static const struct fuse_opt fault_opt_spec[] = {
	{ "ctl=%s", offsetof(struct fault_args, ctl), 0 },
	FUSE_OPT_END
};

/* The first non-option argument is SRCDIR; the rest go to libfuse. */
static int fault_opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
	struct fault_args *a = data;
	if (key == FUSE_OPT_KEY_NONOPT && a->src == NULL) {
		a->src = strdup(arg);
		return 0;
	}
	return 1;
}

/* Absolute form of PATH, which need not exist yet (libfuse chdirs to / when
 * it goes to the background). */
static int fault_abspath(const char *path, char *out, size_t size)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return snprintf(out, size, "%s", path) < (int)size ? 0 : -1;
	if (!getcwd(cwd, sizeof(cwd)))
		return -1;
	return snprintf(out, size, "%s/%s", cwd, path) < (int)size ? 0 : -1;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fault_args a = { 0 };
	if (fuse_opt_parse(&args, &a, fault_opt_spec, fault_opt_proc) != 0)
		return 2;
	if (!a.src || !a.ctl) {
		fprintf(stderr, "usage: faultfs [-f] [-o FUSEOPTS] -o ctl=CTLFILE SRCDIR MOUNTPOINT\n"
				"       (control file keys: bw latency_ms eio enospc fail_every hang;"
				" see tests/faultfs/README.md)\n");
		return 2;
	}
	if (!realpath(a.src, g.src)) {
		int err = errno;
		fprintf(stderr, "faultfs: SRCDIR %s: %s\n", a.src, strerror(err));
		return 2;
	}
	if (strcmp(g.src, "/") == 0)
		g.src[0] = '\0'; /* so that SRCDIR + "/x" is "/x" */
	if (fault_abspath(a.ctl, g.ctl, sizeof(g.ctl)) != 0) {
		fprintf(stderr, "faultfs: control file path %s is too long\n", a.ctl);
		return 2;
	}
	snprintf(g.stats, sizeof(g.stats), "%s.stats", g.ctl);
	umask(0); /* modes come from the callers, as the kernel already applied theirs */

	int rc = fuse_main(args.argc, args.argv, &fault_ops, NULL);
	fuse_opt_free_args(&args);
	free(a.src);
	free(a.ctl);
	return rc;
}
