/* cachedir — the layout of the cache directory (-o cache=DIR), in one place.
 *
 * Every name ckptfs keeps directly under CACHE is here; the daemon (fs/),
 * the catalog (meta/) and ckptfs-admin (tools/) name them through these
 * macros and build paths with cachedir_path(), so that a name is spelled
 * once. What lies inside chunks/ and tmp/ belongs to the store (fs/lib/store.h).
 *
 *   CACHE/lock          flock'd by the one daemon of this cache for its life;
 *                       holds "PID\n", or "PID draining\n" once it has
 *                       unmounted and is still uploading
 *   CACHE/catalog.db    the catalog (SQLite) and its -wal, -shm, -journal;
 *   CACHE/catalog.db-defer  the catalog's journal of deferred work (meta/catalog_defer.c)
 *   CACHE/backing       the BACKING this cache belongs to, one line (a backing.tmp* while written)
 *   CACHE/staging/      files written out of order, before they are chunked
 *   CACHE/control.sock  ckptfs-admin's channel (fs/lib/control_proto.h)
 *   CACHE/ckptfs.log    the log when in the background and no -o log=FILE
 *   CACHE/chunks/, CACHE/tmp/  the chunk store (fs/lib/store.h)
 *
 * fs/trust.c checks, before mounting, that nothing else is there. */
#ifndef CKPTFS_CACHEDIR_H
#define CKPTFS_CACHEDIR_H

#include <stdbool.h>
#include <stddef.h>

#define CACHEDIR_LOCK "lock"
#define CACHEDIR_LOCK_DRAINING "draining" /* after the pid in CACHE/lock, once unmounted */
#define CACHEDIR_CATALOG "catalog.db"
#define CACHEDIR_JOURNAL_TAIL "-defer" /* after a catalog's path: its journal */
#define CACHEDIR_JOURNAL CACHEDIR_CATALOG CACHEDIR_JOURNAL_TAIL
#define CACHEDIR_BACKING "backing"
#define CACHEDIR_BACKING_TMP CACHEDIR_BACKING ".tmp"
#define CACHEDIR_STORE_ID "backing-id" /* the id of the store the catalog uploads to (fs/main.c M1) */
#define CACHEDIR_STAGING "staging"
#define CACHEDIR_CONTROL_SOCK "control.sock"
#define CACHEDIR_LOG "ckptfs.log"
#define CACHEDIR_CHUNKS "chunks"
#define CACHEDIR_TMP "tmp"

/* CACHE/NAME into buf, as snprintf does (the return value too: a value of
 * size or more means buf holds a truncated path). */
int cachedir_path(const char *cache, const char *name, char *buf, size_t size);

/* ---- CACHE/lock ----
 * The daemon holds an exclusive flock on it for its life (one daemon per
 * cache); ckptfs-admin --cache takes it to change a catalog with no daemon;
 * a shared flock that fails tells claim.c the holder is alive. */

/* Opens CACHE/lock with flags (O_CLOEXEC is added; mode 0600 if created),
 * its path in path. The fd, or -1 with errno. */
int cachedir_lock_open(const char *cache, int flags, char *path, size_t size);
/* Replaces the lock file's note with "PID\n", or "PID draining\n" once the
 * daemon has unmounted and is still uploading. 0 or a negative errno. */
int cachedir_lock_note(int fd, long pid, bool draining);

#endif
