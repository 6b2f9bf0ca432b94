/* log — one line per event, with a level and a timestamp, to stderr or a file.
 *
 * Every line names what it is about (path, inode, chunk, offset) and, for a
 * failure, the reason (strerror). Thread-safe: a line is written whole. */
#ifndef CKPTFS_LOG_H
#define CKPTFS_LOG_H

#include <stdio.h>

enum log_level { LOG_LVL_OFF = -1, LOG_LVL_ERROR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };

/* Sends log lines to `f` (default stderr) and drops those above `max`. */
void log_setup(FILE *f, enum log_level max);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
