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
 * every few seconds otherwise (logs of systemd units, CI jobs). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
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

/* A daemon that already unmounted: CACHE/lock holds "PID draining". */
static int umount_find_draining(struct umount_state *st)
{
	char path[PATH_MAX + 16], buf[64] = "";
	int fd = cachedir_lock_open(st->a->cache, O_RDONLY, path, sizeof(path));
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
	int err = 0;
	if (geteuid() == 0) {
		err = umount2(st->mount, 0) == 0 ? 0 : errno;
	} else {
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
	if (cat_cache_stats(st->a->cat, &cs) == 0 && cs.queued > 0) {
		admin_err("%s: the daemon (pid %ld) exited with %" PRIu64 " uploads (%" PRIu64
			  " bytes) still queued (see its log); they resume at the next mount",
			  st->mount[0] ? st->mount : st->a->cache, st->pid, cs.queued, cs.dirty_bytes);
		return ADMIN_PROBLEM;
	}
	return ADMIN_OK;
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
