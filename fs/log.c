/* log — see log.h. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <time.h>

static FILE *log_file;
static enum log_level log_max = LOG_LVL_INFO;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

void log_setup(FILE *f, enum log_level max)
{
	log_file = f;
	log_max = max;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	if (lvl > log_max)
		return;
	FILE *f = log_file ? log_file : stderr;
	struct timespec ts;
	struct tm tm;
	char when[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);

	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&log_lock);
	fprintf(f, "%s.%03ldZ ckptfs %s: ", when, ts.tv_nsec / 1000000, log_names[lvl]);
	vfprintf(f, fmt, ap);
	fputc('\n', f);
	fflush(f);
	pthread_mutex_unlock(&log_lock);
	va_end(ap);
}
