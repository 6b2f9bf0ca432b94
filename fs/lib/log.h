/* log — one line per event, with a level and a timestamp, to stderr, a file
 * (reopened on request: SIGHUP after logrotate, fs/main.c) or syslog.
 *
 * Every line names what it is about (path, inode, chunk, offset) and, for a
 * failure, the reason (strerror). Thread-safe: a line is written whole. */
#ifndef CKPTFS_LOG_H
#define CKPTFS_LOG_H

#include <stdbool.h>
#include <stdio.h>

enum log_level { LOG_LVL_OFF = -1, LOG_LVL_ERROR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };

/* Sends log lines to `f` (default stderr) and drops those above `max`. */
void log_setup(FILE *f, enum log_level max);
/* Sends log lines to syslog(3) (facility daemon, ident `ident`, with the pid)
 * instead; levels map to LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
void log_setup_syslog(const char *ident, enum log_level max);
/* Opens `path` for appending, line-buffered (close-on-exec), never through a
 * symlink (O_NOFOLLOW: ELOOP): the log file. */
FILE *log_open_file(const char *path);
/* After logrotate moved the file: opens `path` anew and switches to it under
 * the log lock, so no line is lost or split; the old stream is closed. 0 or
 * -errno (the old file stays in use). */
int log_reopen(const char *path);
/* The descriptor lines go to now (2 for stderr or syslog): for a signal
 * handler's fixed message. */
int log_fileno(void);
/* Closes the log file (at exit); lines go to stderr afterwards. */
void log_close(void);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
