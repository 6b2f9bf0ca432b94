/* trust — the checks that make the cache directory ours before the daemon
 * writes anything in it (shared invariant 7; docs/DESIGN.md "Trust model").
 *
 * Invariants:
 *  1. The daemon keeps no state in a cache directory that another user owns
 *     or can write, or below a directory another non-root user can change
 *     (safeopen.h, StrictModes): trust_check_cache refuses it, before the
 *     first file is made there.
 *  2. A cache directory that is ours but open to others (a `mkdir` with the
 *     default umask: 0755) is made 0700, and the change is logged; so are
 *     the daemon's fixed files and directories in it, which an older ckptfs
 *     made 0644/0755.
 *  3. None of the fixed names in the cache (lock, the catalog and its
 *     journals, backing, staging/, chunks/, tmp/, the log, the control
 *     socket) may be a symlink, or belong to another user: the mount is
 *     refused, naming the entry. Entries made later are opened with
 *     O_NOFOLLOW / safeopen.h by the modules that make them. */
#ifndef CKPTFS_TRUST_H
#define CKPTFS_TRUST_H

#include <stddef.h>

/* cache: the absolute, realpath'd cache directory. 0, or -errno with one
 * line (no "ckptfs: " prefix, no newline) in msg naming the path and why. */
int trust_check_cache(const char *cache, char *msg, size_t msgsize);

/* Logs (log_info) what trust_check_cache changed, once the log is set up. */
void trust_log_changes(void);

#endif
