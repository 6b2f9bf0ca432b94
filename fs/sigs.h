/* sigs — the daemon's signals beyond libfuse's (which turns SIGINT and
 * SIGTERM into a clean unmount while the session runs):
 *
 *  - SIGHUP reopens the log file (logrotate's postrotate), it never ends the
 *    session: it is blocked in every thread from the start of main
 *    (sigs_block_hup, before any thread exists, so all inherit the mask) and
 *    taken by one thread with sigwait (sigs_hup_start);
 *  - once unmounted, the daemon drains its uploads (uploader_stop) before it
 *    exits. A stop signal then (systemd's, docker stop's, a Ctrl-C after
 *    umount) must not cut that short unasked: the first is logged and the
 *    drain goes on; a second exits at once, the rest staying queued in the
 *    catalog for the next mount (sigs_drain_begin). Nothing in the cache is
 *    lost either way.
 *
 * Invariant: SIGHUP is never delivered to a handler, only to sigwait. */
#ifndef CKPTFS_SIGS_H
#define CKPTFS_SIGS_H

#include <stdbool.h>

/* In main, before any thread is created. */
void sigs_block_hup(void);
/* Starts the SIGHUP thread (after daemonizing: threads do not survive fork).
 * log_path "" means the log is stderr or syslog: nothing to reopen. */
int sigs_hup_start(const char *log_path, bool syslog);
/* After the unmount, before the drain: SIGTERM/SIGINT as said above. */
void sigs_drain_begin(void);

#endif
