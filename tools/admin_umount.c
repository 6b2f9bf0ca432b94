/* admin_umount — `ckptfs-admin umount MNT [--timeout S]`: a stop that
 * returns only when the data is on BACKING and the daemon has exited.
 *
 * fusermount3 -u and umount(8) return as soon as the kernel lets go of the
 * mount; the daemon then drains its upload queue in the background, and a
 * user who powers the node off meanwhile loses what was not yet on BACKING.
 * This command:
 *
 *   1. asks the daemon (control channel, hello) for its pid;
 *   2. mounted, waits until the upload queue is empty, showing bytes left,
 *      rate and ETA (the catalog, read-only: WAL readers never block it);
 *   3. unmounts (umount2 as root, else fusermount3 -u);
 *   4. waits until the daemon has exited: at unmount it commits open
 *      generations and uploads their manifests (uploader_stop drains).
 *
 * --timeout S bounds 2–4 together (exit 9). Timed out in 2, nothing was
 * unmounted; in 4, the daemon goes on draining by itself. With --cache DIR a
 * daemon that already unmounted and drains (CACHE/lock says "PID draining")
 * is waited for from step 4.
 *
 * Progress goes to stderr: one rewritten line on a terminal, a plain line
 * every few seconds otherwise (logs of systemd units, CI jobs).
 *
 * Root may run this on a cache another user owns; whoever answers on
 * CACHE/control.sock (root or that owner: admin_ctl.c 1) must not steer root
 * to a process or a mount that user could not act on herself. Invariants:
 *   1. The process that answered hello is the pid the hello names (its
 *      SO_PEERCRED pid, admin_ctl.c 2) and, where /proc lets us look (as root
 *      always), has CACHE/lock open: the pid waited for in step 4 is the
 *      cache's daemon, not one the answer picked.
 *   2. What is unmounted is the root of a mount of type fuse.ckptfs whose
 *      owner (the kernel's user_id=) is the uid that answered: no mount that
 *      user could not unmount herself (fusermount3 -u), no tmpfs, no bind.
 *   3. Its source names this cache ("ckptfs:CACHE", fs/main.c: the same
 *      directory, by device and inode). With MOUNTPOINT a source of another
 *      form passes (the mount's user.ckptfs.cache named the cache, admin.c:
 *      a mount from before that source, or with the user's fsname=); with
 *      --cache, where only the answer names the mount, it does not.
 *   4. What umount2 unmounts is what was checked: the name is looked up in
 *      the parent directory opened O_PATH and checked there (statx: the
 *      mount id and mount root, never a request to the FUSE daemon), then
 *      unmounted as /proc/self/fd/DIR/NAME with UMOUNT_NOFOLLOW: a symlink
 *      or a renamed directory on the way cannot redirect it. The check runs
 *      before the drain (refused: nothing changed) and again just before the
 *      unmount.
 *   5. "every upload is on BACKING" (exit 0) only when, once the daemon
 *      exited, its catalog has no row queued, no mark of a tree manifest
 *      its drain could not put (meta/upload.h U10, fs/uploader.c T6: the
 *      files outside generations are described on BACKING only by it), and
 *      the tree manifest last put describes the tree as it is (U11; review
 *      36 F3a: an exit without the drain, -o leave_queued or a daemon
 *      killed during it, leaves neither a row nor the U10 mark when the
 *      tree changed without new chunks, a renamed `latest`); else exit 1
 *      naming what is not there. A node of a shared catalog writes no tree
 *      manifest from its local catalog: U11 is not asked there. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "cachedir.h"
#include "upload.h"

#define UMOUNT_POLL_MS 200
#define UMOUNT_PLAIN_EVERY_S 5.0 /* a line this often when stderr is no terminal */
#define UMOUNT_STALL_S 10.0      /* a queue unchanged this long mounted: let the unmount drain it */

extern char **environ;

struct umount_state {
	struct admin *a;
	long pid;
	char mount[PATH_MAX];
	double started, deadline; /* monotonic s; deadline 0: none */
	uint64_t total;           /* the most bytes seen left: the bar's 100 % */
	double last_line;
	bool tty, shown;
};

static double umount_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void umount_sleep(void)
{
	struct timespec ts = { 0, UMOUNT_POLL_MS * 1000000L };
	nanosleep(&ts, NULL);
}

/* "1h02m", "3m05s", "12s" */
static const char *umount_duration(double s, char buf[32])
{
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, 32, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else if (t >= 60)
		snprintf(buf, 32, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, 32, "%lds", t);
	return buf;
}

/* One progress line: what is left, the rate so far and the time to go. */
static void umount_progress(struct umount_state *st, const char *phase,
			    const struct cat_cache_stats *cs, bool force)
{
	double now = umount_now();
	if (!st->tty && !force && now - st->last_line < UMOUNT_PLAIN_EVERY_S)
		return;
	st->last_line = now;
	if (cs->dirty_bytes > st->total)
		st->total = cs->dirty_bytes;
	uint64_t done = st->total - cs->dirty_bytes;
	double elapsed = now - st->started;
	double rate = elapsed > 0.5 ? (double)done / elapsed : 0;
	char left[32], tot[32], r[32], eta[32] = "?";
	if (rate > 0)
		umount_duration((double)cs->dirty_bytes / rate, eta);
	admin_size(cs->dirty_bytes, left);
	admin_size(st->total, tot);
	admin_size((uint64_t)rate, r);
	int pct = st->total ? (int)(done * 100 / st->total) : 100;
	char line[256];
	snprintf(line, sizeof(line), "%s: %s of %s left to upload (%d%%), %" PRIu64 " uploads queued, %s/s, ETA %s",
		 phase, left, tot, pct, cs->queued, r, eta);
	if (st->tty) {
		fprintf(stderr, "\r\033[K%s", line);
		st->shown = true;
	} else {
		fprintf(stderr, "%s\n", line);
	}
	fflush(stderr);
}

static void umount_progress_end(struct umount_state *st)
{
	if (st->shown)
		fputc('\n', stderr);
	st->shown = false;
}

static bool umount_timed_out(const struct umount_state *st)
{
	return st->deadline > 0 && umount_now() >= st->deadline;
}

/* The daemon is gone (a zombie of our caller's shell counts as gone). */
static bool umount_pid_gone(long pid)
{
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return true;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')'); /* the name may hold spaces */
	return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

static bool umount_is_mounted(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[PATH_MAX * 2 + 512], point[PATH_MAX * 2];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 && strcmp(point, mnt) == 0)
			found = true;
	fclose(f);
	return found;
}

/* ---- the steps ---- */

static void umount_hello_data(void *arg, const char *key, const char *value)
{
	struct umount_state *st = arg;
	if (strcmp(key, "pid") == 0)
		st->pid = strtol(value, NULL, 10);
	else if (strcmp(key, "mountpoint") == 0)
		snprintf(st->mount, sizeof(st->mount), "%s", value);
}

/* ---- who answered, what is unmounted (invariants 1-4) ---- */

/* Undoes /proc/self/mountinfo's escapes (\ooo: space, tab, newline,
 * backslash), in place. */
static void umount_unescape(char *s)
{
	char *o = s;
	for (const char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* Invariant 1: the pid the hello named is the one that answered, and it
 * holds CACHE/lock open. 0, or why not in why. */
static int umount_check_daemon(struct umount_state *st, char *why, size_t size)
{
	struct admin *a = st->a;
	if (st->pid != a->ctl_pid) {
		snprintf(why, size, "its hello names pid %ld, but pid %ld answered", st->pid,
			 a->ctl_pid);
		return -EPERM;
	}
	char lock[PATH_MAX + 16], dir[64], fdpath[PATH_MAX], link[PATH_MAX];
	cachedir_path(a->cache, CACHEDIR_LOCK, lock, sizeof(lock));
	snprintf(dir, sizeof(dir), "/proc/%ld/fd", st->pid);
	DIR *d = opendir(dir);
	if (!d && (errno == EACCES || errno == EPERM) && geteuid() != 0)
		return 0; /* a user's tool, root's daemon: nothing to steer */
	if (!d) {
		snprintf(why, size, "pid %ld: cannot look at its open files (%s)", st->pid,
			 strerror(errno));
		return -EPERM;
	}
	bool held = false;
	struct dirent *e;
	while (!held && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(fdpath, sizeof(fdpath), "%s/%s", dir, e->d_name);
		ssize_t n = readlink(fdpath, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = '\0';
			held = strcmp(link, lock) == 0;
		}
	}
	closedir(d);
	if (!held) {
		snprintf(why, size, "pid %ld, which answered, does not hold %s", st->pid, lock);
		return -EPERM;
	}
	return 0;
}

/* The fields of mount id in /proc/self/mountinfo that invariants 2-3 look
 * at; -ENOENT if it is not there. */
struct umount_mountinfo {
	char point[PATH_MAX], fstype[64], source[PATH_MAX + 16];
	long owner; /* user_id=, -1 if none */
};

static int umount_mountinfo(uint64_t id, struct umount_mountinfo *mi)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[3 * PATH_MAX + 1024];
	int rc = -ENOENT;
	while (rc == -ENOENT && fgets(line, sizeof(line), f)) {
		unsigned long long mid;
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%llu", &mid) != 1 || mid != id)
			continue;
		char opts[1024] = "";
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mi->point) != 1 ||
		    sscanf(sep + 3, "%63s %4111s %1023s", mi->fstype, mi->source, opts) < 2) {
			rc = -EINVAL;
			break;
		}
		umount_unescape(mi->point);
		umount_unescape(mi->source);
		mi->owner = -1;
		for (char *o = strtok(opts, ","); o; o = strtok(NULL, ","))
			if (strncmp(o, "user_id=", 8) == 0)
				mi->owner = strtol(o + 8, NULL, 10);
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* Invariants 2-4: st->mount is the root of this cache's ckptfs mount,
 * owned by the uid that answered. On success *dirfd (O_PATH) and name are
 * what to unmount (umount_unmount); 0, or why not in why. */
static int umount_check_target(struct umount_state *st, int *dirfd, char *name, size_t namesize,
			       char *why, size_t size)
{
	struct admin *a = st->a;
	*dirfd = -1;
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", st->mount);
	char *slash = strrchr(parent, '/');
	if (parent[0] != '/' || !slash || !slash[1] || strcmp(slash + 1, ".") == 0 ||
	    strcmp(slash + 1, "..") == 0) {
		snprintf(why, size, "not an absolute path to a mount point");
		return -EINVAL;
	}
	snprintf(name, namesize, "%s", slash + 1);
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	int fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, size, "%s: %s", parent, strerror(errno));
		return -errno;
	}
	/* a mask of 0 never asks the FUSE daemon (its root may refuse us) */
	struct statx sx;
	if (statx(fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, 0, &sx) != 0) {
		int err = errno;
		snprintf(why, size, "%s", strerror(err));
		close(fd);
		return -err;
	}
	struct umount_mountinfo mi;
	int rc = -EPERM;
	if (!(sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) || !(sx.stx_mask & STATX_MNT_ID))
		snprintf(why, size, "this kernel does not say whether it is a mount point");
	else if (!(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		snprintf(why, size, "not a mount point");
	else if ((rc = umount_mountinfo(sx.stx_mnt_id, &mi)) != 0)
		snprintf(why, size, "mount %llu not in /proc/self/mountinfo (%s)",
			 (unsigned long long)sx.stx_mnt_id, strerror(-rc));
	else if ((rc = -EPERM, strcmp(mi.fstype, "fuse.ckptfs") != 0))
		snprintf(why, size, "a %s mount, not a ckptfs one (fuse.ckptfs)", mi.fstype);
	else if (mi.owner != a->ctl_uid)
		snprintf(why, size, "a ckptfs mount of uid %ld, but uid %ld answered", mi.owner,
			 a->ctl_uid);
	else
		rc = 0;
	if (rc == 0 && strncmp(mi.source, "ckptfs:", 7) == 0) {
		struct stat mine, named;
		if (stat(a->cache, &mine) != 0 || stat(mi.source + 7, &named) != 0 ||
		    mine.st_dev != named.st_dev || mine.st_ino != named.st_ino) {
			snprintf(why, size, "the mount of another cache (its source is %s)", mi.source);
			rc = -EPERM;
		}
	} else if (rc == 0 && !a->mount[0]) {
		snprintf(why, size, "its source (%s) does not name a cache (a mount from before "
			 "ckptfs named it, or made with fsname=): give MOUNTPOINT, not --cache",
			 mi.source);
		rc = -EPERM;
	}
	if (rc != 0) {
		close(fd);
		return rc;
	}
	*dirfd = fd;
	return 0;
}

/* Invariants 1-4 as one refusal line; ADMIN_OK, or the exit code. With
 * dirfd, the checked parent directory is kept for the unmount. */
static int umount_trust(struct umount_state *st, int *dirfd, char *name, size_t namesize)
{
	char why[PATH_MAX + 256], local[NAME_MAX + 1];
	int fd = -1;
	if (!name) {
		name = local;
		namesize = sizeof(local);
	}
	int rc = umount_check_daemon(st, why, sizeof(why));
	if (rc == 0)
		rc = umount_check_target(st, &fd, name, namesize, why, sizeof(why));
	if (rc != 0) {
		umount_progress_end(st);
		if (st->a->mount[0])
			admin_err("%s: not unmounted, nothing changed: %s (control channel %s)",
				  st->mount, why, st->a->sock);
		else
			admin_err("control channel %s: not trusted to name what to unmount, nothing "
				  "changed: mount point %s: %s", st->a->sock,
				  st->mount[0] ? st->mount : "(none named)", why);
		return ADMIN_PERM;
	}
	if (dirfd)
		*dirfd = fd;
	else
		close(fd);
	return ADMIN_OK;
}

/* A daemon that already unmounted: CACHE/lock holds "PID draining". */
static int umount_find_draining(struct umount_state *st)
{
	char path[PATH_MAX + 16], buf[64] = "";
	/* never a symlink nor a FIFO planted there (review 40 F7): no hang */
	int fd = cachedir_lock_open(st->a->cache, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, path, sizeof(path));
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	long pid = strtol(buf, NULL, 10);
	if (!strstr(buf, " " CACHEDIR_LOCK_DRAINING) || pid <= 0 || umount_pid_gone(pid)) {
		admin_err("cache %s: no ckptfs daemon uses it (nothing to unmount or wait for)",
			  st->a->cache);
		return ADMIN_NO_DAEMON;
	}
	st->pid = pid;
	return ADMIN_OK;
}

/* Step 2: mounted, until the queue is empty (or stands still: some rows
 * start only at the unmount, which drains them). */
static int umount_drain_mounted(struct umount_state *st)
{
	struct cat_cache_stats cs, prev = { 0 };
	double changed = umount_now();
	for (;;) {
		int rc = cat_cache_stats(st->a->cat, &cs);
		if (rc != 0) {
			umount_progress_end(st);
			admin_err("catalog of %s: cannot read the upload queue: %s", st->a->cache,
				  strerror(-rc));
			return ADMIN_PROBLEM;
		}
		umount_progress(st, "draining", &cs, st->last_line == 0);
		if (cs.queued == 0)
			return ADMIN_OK;
		if (cs.queued != prev.queued || cs.dirty_bytes != prev.dirty_bytes)
			changed = umount_now();
		else if (umount_now() - changed >= UMOUNT_STALL_S)
			return ADMIN_OK;
		prev = cs;
		if (umount_timed_out(st)) {
			umount_progress(st, "draining", &cs, true);
			umount_progress_end(st);
			admin_err("%s: --timeout ran out with %" PRIu64 " bytes (%" PRIu64
				  " uploads) not yet on BACKING; still mounted, nothing changed",
				  st->mount, cs.dirty_bytes, cs.queued);
			return ADMIN_TIMEOUT;
		}
		umount_sleep();
	}
}

/* Step 3. As root umount2 (fusermount3 may not be there); else the setuid
 * fusermount3, as a user would. */
static int umount_unmount(struct umount_state *st)
{
	char name[NAME_MAX + 1];
	int dirfd = -1;
	int rc = umount_trust(st, &dirfd, name, sizeof(name));
	if (rc != ADMIN_OK)
		return rc;
	int err = 0;
	if (geteuid() == 0) {
		char at[64 + NAME_MAX];
		snprintf(at, sizeof(at), "/proc/self/fd/%d/%s", dirfd, name); /* invariant 4 */
		err = umount2(at, UMOUNT_NOFOLLOW) == 0 ? 0 : errno;
		close(dirfd);
	} else {
		close(dirfd); /* fusermount3 checks the owner itself */
		char *argv[] = { "fusermount3", "-u", "-q", st->mount, NULL };
		pid_t child;
		int status = 0;
		err = posix_spawnp(&child, "fusermount3", NULL, NULL, argv, environ);
		if (err == 0 && waitpid(child, &status, 0) == child)
			err = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EBUSY;
		if (err == EBUSY && !umount_is_mounted(st->mount))
			err = 0; /* it went meanwhile */
	}
	if (err == 0)
		return ADMIN_OK;
	umount_progress_end(st);
	if (err == EBUSY)
		admin_err("%s: cannot unmount: busy (a process has a file or its working directory "
			  "in it: fuser -vm %s); uploads are drained, still mounted", st->mount, st->mount);
	else
		admin_err("%s: cannot unmount: %s", st->mount, strerror(err));
	return err == EBUSY ? ADMIN_BUSY : admin_exit_for(err);
}

/* Step 4: until the daemon exits, with what it still has to upload. */
static int umount_wait_exit(struct umount_state *st)
{
	struct cat_cache_stats cs = { 0 };
	bool forced = true;
	while (!umount_pid_gone(st->pid)) {
		if (cat_cache_stats(st->a->cat, &cs) == 0) {
			umount_progress(st, "unmounted, daemon draining", &cs, forced);
			forced = false;
		}
		if (umount_timed_out(st)) {
			umount_progress_end(st);
			admin_err("%s: --timeout ran out: unmounted, but the daemon (pid %ld) still has "
				  "%" PRIu64 " bytes (%" PRIu64 " uploads) to put on BACKING; it goes on "
				  "by itself (the data is safe in the cache)",
				  st->mount[0] ? st->mount : st->a->cache, st->pid, cs.dirty_bytes,
				  cs.queued);
			return ADMIN_TIMEOUT;
		}
		umount_sleep();
	}
	umount_progress_end(st);
	int rc = ADMIN_OK;
	const char *what = st->mount[0] ? st->mount : st->a->cache;
	if (cat_cache_stats(st->a->cat, &cs) == 0 && cs.queued > 0) {
		admin_err("%s: the daemon (pid %ld) exited with %" PRIu64 " uploads (%" PRIu64
			  " bytes) still queued (see its log); they resume at the next mount",
			  what, st->pid, cs.queued, cs.dirty_bytes);
		rc = ADMIN_PROBLEM;
	}
	/* invariant 5 */
	char why[256] = "";
	int err = cat_tree_unwritten(st->a->cat, why, sizeof(why));
	if (err != 0) {
		admin_err("%s: cannot read whether the daemon wrote the tree manifest: %s", what,
			  strerror(-err));
		rc = ADMIN_PROBLEM;
	} else if (why[0]) {
		admin_err("%s: the daemon (pid %ld) exited without the tree manifest on BACKING %s "
			  "(%s; see its log): files outside generations (`latest`, `last.ckpt`, a "
			  "final model) are not described there, and a new cache on it would not see "
			  "them as they are; the next mount of this cache writes it", what, st->pid,
			  st->a->backing, why);
		rc = ADMIN_PROBLEM;
	}
	bool node = false, current = true;
	if (rc == ADMIN_OK && (err = cat_role_node(st->a->cat, &node)) == 0 && !node)
		err = cat_tree_described_current(st->a->cat, &current); /* U11 */
	if (rc == ADMIN_OK && err != 0) {
		admin_err("%s: cannot read whether the tree manifest on BACKING is current: %s", what,
			  strerror(-err));
		rc = ADMIN_PROBLEM;
	} else if (rc == ADMIN_OK && !current) {
		admin_err("%s: the daemon (pid %ld) exited without a tree manifest on BACKING %s "
			  "describing the files outside generations (`latest`, `last.ckpt`, a final "
			  "model) as they are now (it did not drain: -o leave_queued, or it was "
			  "stopped during the drain): a new cache on it would not see them as they "
			  "are; the next mount of this cache writes it", what, st->pid,
			  st->a->backing);
		rc = ADMIN_PROBLEM;
	}
	return rc;
}

int admin_cmd_umount(struct admin *a)
{
	if (a->npos > 0) {
		admin_err("umount: too many arguments (see ckptfs-admin umount --help)");
		return ADMIN_USAGE;
	}
	struct umount_state st = { .a = a, .tty = isatty(STDERR_FILENO) };
	st.started = umount_now();
	if (a->timeout_s >= 0)
		st.deadline = st.started + (a->timeout_s > 0 ? a->timeout_s : 1e-9);
	int rc = ADMIN_OK;
	char msg[256];
	if (a->daemon) {
		int err = admin_ctl(a, "hello", umount_hello_data, &st, msg, sizeof(msg));
		if (err != 0 || st.pid <= 0) {
			admin_err("%s: the daemon does not answer on its control channel: %s",
				  a->mount[0] ? a->mount : a->cache, err ? msg : "no pid");
			return ADMIN_NO_DAEMON;
		}
		if (a->mount[0])
			snprintf(st.mount, sizeof(st.mount), "%s", a->mount);
		rc = umount_trust(&st, NULL, NULL, 0); /* refused before the drain: nothing changed */
		if (rc == ADMIN_OK)
			rc = umount_drain_mounted(&st);
		if (rc == ADMIN_OK)
			rc = umount_unmount(&st);
	} else if (a->by_cache) {
		rc = umount_find_draining(&st);
	} else {
		admin_err("%s: the daemon does not answer on its control channel", a->mount);
		return ADMIN_NO_DAEMON;
	}
	if (rc == ADMIN_OK)
		rc = umount_wait_exit(&st);
	if (rc == ADMIN_OK) {
		char took[32];
		double secs = umount_now() - st.started;
		if (a->json) {
			printf("{\"unmounted\": ");
			admin_json_str(stdout, st.mount[0] ? st.mount : a->cache);
			printf(", \"pid\": %ld, \"seconds\": %.1f, \"queued\": 0}\n", st.pid, secs);
		} else {
			printf("%s: unmounted; every upload is on BACKING %s; the daemon (pid %ld) "
			       "exited (%s)\n",
			       st.mount[0] ? st.mount : a->cache, a->backing, st.pid,
			       umount_duration(secs, took));
		}
	}
	return rc;
}
