/* admin_util — output helpers of ckptfs-admin: one-line errors, exit codes,
 * human sizes and times, JSON strings, the progress bar. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"

void admin_err(const char *fmt, ...)
{
	va_list ap;
	admin_progress_end();
	fputs("ckptfs-admin: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int admin_exit_for(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0: return ADMIN_OK;
	case EACCES:
	case EPERM: return ADMIN_PERM;
	case ENOENT: return ADMIN_NO_GEN;
	case EBUSY:
	case EEXIST:
	case ENOTEMPTY: return ADMIN_BUSY;
	case ENOTCONN:
	case ECONNREFUSED: return ADMIN_NO_DAEMON;
	case ETIMEDOUT: return ADMIN_TIMEOUT;
	case ENOSYS: return ADMIN_UNSUPPORTED;
	case EINVAL: return ADMIN_USAGE;
	default: return ADMIN_PROBLEM;
	}
}

void admin_lock_holder(int fd, char *buf, size_t size)
{
	snprintf(buf, size, "another process");
	struct stat sb;
	FILE *f = fstat(fd, &sb) == 0 ? fopen("/proc/locks", "re") : NULL;
	if (!f)
		return;
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		char type[16];
		long pid;
		unsigned maj, min;
		unsigned long ino;
		/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a waiter has "->") */
		if (sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%lu", type, &pid, &maj, &min, &ino) != 5 ||
		    strcmp(type, "FLOCK") != 0 || maj != major(sb.st_dev) || min != minor(sb.st_dev) ||
		    ino != (unsigned long)sb.st_ino)
			continue;
		char path[64], comm[64] = "";
		snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
		FILE *c = fopen(path, "re");
		if (c) {
			if (!fgets(comm, sizeof(comm), c))
				comm[0] = '\0';
			fclose(c);
		}
		comm[strcspn(comm, "\n")] = '\0';
		snprintf(buf, size, "pid %ld%s%s%s", pid, comm[0] ? " (" : "", comm, comm[0] ? ")" : "");
		break;
	}
	fclose(f);
}

const char *admin_size(uint64_t bytes, char buf[32])
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, 32, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, 32, "%.1f %s", v, units[u]);
	return buf;
}

const char *admin_time(int64_t ns, char buf[32])
{
	if (ns <= 0) {
		snprintf(buf, 32, "-");
		return buf;
	}
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

void admin_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

double admin_ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

/* ---- progress bar ---- */

static bool admin_bar_shown;

void admin_progress(const char *label, uint64_t done, uint64_t total)
{
	static int tty = -1;
	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	const int width = 30;
	int fill = total ? (int)((double)done / (double)total * width) : 0;
	if (fill > width)
		fill = width;
	char bar[64];
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(width - fill));
	bar[width] = '\0';
	if (total)
		fprintf(stderr, "\r%-8s [%s] %3d%% (%llu/%llu)", label, bar,
			(int)(done * 100 / total), (unsigned long long)done,
			(unsigned long long)total);
	else
		fprintf(stderr, "\r%-8s %llu", label, (unsigned long long)done);
	fflush(stderr);
	admin_bar_shown = true;
}

/* The bar of a byte copy: sizes in human units, the rate since the first call
 * of this copy and the time left, throttled to 10 redraws a second. */
void admin_progress_bytes(const char *label, uint64_t done, uint64_t total)
{
	static int tty = -1;
	static double started, last;
	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
	if (!admin_bar_shown || started == 0)
		started = now;
	if (admin_bar_shown && done < total && now - last < 0.1)
		return;
	last = now;
	const int width = 24;
	int fill = total ? (int)((double)done / (double)total * width) : 0;
	if (fill > width)
		fill = width;
	char bar[32], d[32], t[32], r[32], eta[32] = "?";
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(width - fill));
	bar[width] = '\0';
	double secs = now - started, rate = secs > 0.2 ? (double)done / secs : 0;
	if (rate > 0 && total >= done) {
		long left = (long)((double)(total - done) / rate + 0.5);
		if (left >= 3600)
			snprintf(eta, sizeof(eta), "%ldh%02ldm", left / 3600, left / 60 % 60);
		else if (left >= 60)
			snprintf(eta, sizeof(eta), "%ldm%02lds", left / 60, left % 60);
		else
			snprintf(eta, sizeof(eta), "%lds", left);
	}
	fprintf(stderr, "\r\033[K%-8s [%s] %3d%% %s / %s, %s/s, ETA %s", label, bar,
		total ? (int)(done * 100 / total) : 0, admin_size(done, d), admin_size(total, t),
		admin_size((uint64_t)rate, r), eta);
	fflush(stderr);
	admin_bar_shown = true;
}

void admin_progress_end(void)
{
	if (admin_bar_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		admin_bar_shown = false;
	}
}
