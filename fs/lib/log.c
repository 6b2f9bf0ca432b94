/* log — see log.h. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <syslog.h>
#include <time.h>

static FILE *log_file;
static bool log_syslog;
static enum log_level log_max = LOG_LVL_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

void log_setup(FILE *f, enum log_level max)
{
	log_file = f;
	log_max = max;
}

void log_setup_syslog(const char *ident, enum log_level max)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	log_syslog = true;
	log_max = max;
}

FILE *log_open_file(const char *path)
{
	/* private; never reached through a symlink in its last part, the default
	 * CACHE/ckptfs.log nor -o log=FILE (docs/DESIGN.md, "Trust model";
	 * review 40 F7: root's log in a shared directory must not be a link
	 * another user planted): ELOOP, which the caller names */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (fd >= 0 && !f)
		close(fd);
	if (f)
		setvbuf(f, NULL, _IOLBF, 0);
	return f;
}

int log_reopen(const char *path)
{
	FILE *f = log_open_file(path);
	if (!f)
		return -errno;
	pthread_mutex_lock(&log_lock);
	FILE *old = log_file;
	log_file = f;
	pthread_mutex_unlock(&log_lock);
	if (old && old != stderr)
		fclose(old);
	return 0;
}

int log_fileno(void)
{
	pthread_mutex_lock(&log_lock);
	int fd = log_file && !log_syslog ? fileno(log_file) : 2;
	pthread_mutex_unlock(&log_lock);
	return fd;
}

void log_close(void)
{
	pthread_mutex_lock(&log_lock);
	FILE *old = log_file;
	log_file = NULL;
	pthread_mutex_unlock(&log_lock);
	if (old && old != stderr)
		fclose(old);
	if (log_syslog)
		closelog();
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	if (lvl > log_max)
		return;
	if (log_syslog) {
		static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
		va_list ap;
		va_start(ap, fmt);
		vsyslog(prio[lvl], fmt, ap);
		va_end(ap);
		return;
	}
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);

	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&log_lock);
	FILE *f = log_file ? log_file : stderr;
	fprintf(f, "%s.%03ldZ ckptfs %s: ", when, ts.tv_nsec / 1000000, log_names[lvl]);
	vfprintf(f, fmt, ap);
	fputc('\n', f);
	fflush(f);
	pthread_mutex_unlock(&log_lock);
	va_end(ap);
}
