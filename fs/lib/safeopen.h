/* safeopen — opening what ckptfs keeps under a directory it created (the
 * cache, a BACKING directory) so that nothing planted there is followed:
 * shared invariant 7, docs/DESIGN.md "Trust model".
 *
 * Invariants:
 *  1. safe_openat never follows a symbolic link, in any component, and never
 *     leaves the directory it starts from: it refuses an absolute path, an
 *     empty one and any "." or ".." component (-EINVAL), and a symlink
 *     anywhere on the way is -ELOOP (openat2 RESOLVE_NO_SYMLINKS |
 *     RESOLVE_BENEATH where the kernel has it, else O_NOFOLLOW one component
 *     at a time). Its fd is O_CLOEXEC.
 *  2. safe_parent opens the directory that holds rel the same way, so the
 *     *at calls that take a name (mkdirat, renameat, unlinkat, linkat,
 *     fstatat) act on the last component alone, which they never follow.
 *  3. safe_tmpname names are unguessable: 64 bits from getrandom(2) after the
 *     caller's prefix. A temporary is always created with O_CREAT | O_EXCL,
 *     so a name taken by anyone else fails instead of being written through.
 *  4. safe_check_owned_dir applies ssh's StrictModes to a directory the
 *     daemon will keep its state in (see its comment).
 *  5. safe_open_seen opens an entry someone else may change (a tree a user
 *     hands to root's `ckptfs-admin import`) only as the file that was
 *     looked at: one component beneath a directory fd, never followed, never
 *     blocking (a FIFO swapped in), and the fd is returned only if fstat says
 *     it is the same file (device, inode, type) the caller's lstat saw;
 *     otherwise -ESTALE. Walking a tree fd by fd this way, an entry swapped
 *     for a symlink between the look and the open can never make root read
 *     what the symlink points to.
 *
 * Returns: a fd or 0 on success, a negative errno otherwise; nothing here
 * logs: the caller names the path and the reason. */
#ifndef CKPTFS_SAFEOPEN_H
#define CKPTFS_SAFEOPEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* 16 hex digits of getrandom(2) after prefix (bufsize >= strlen(prefix)+17). */
#define SAFE_RANDOM_HEX 16

/* Invariant 1: openat(dirfd, rel, flags | O_NOFOLLOW | O_CLOEXEC, mode). */
int safe_openat(int dirfd, const char *rel, int flags, mode_t mode);

/* Invariant 5: name (one component) beneath dirfd, opened with flags (O_RDONLY,
 * O_DIRECTORY, ...) | O_NOFOLLOW | O_CLOEXEC, only if it is still the file
 * seen describes (an fstatat(..., AT_SYMLINK_NOFOLLOW) of it): -ESTALE if it
 * was replaced, -ELOOP if it is a symlink now, -EINVAL for a name with '/'. */
int safe_open_seen(int dirfd, const char *name, const struct stat *seen, int flags);

/* Tests: the O_NOFOLLOW walk instead of openat2 (true), or openat2 again. */
void safe_openat_use_walk(bool walk);

/* Invariant 2: the directory holding rel (dirfd itself, dup'd, for a name
 * without '/'); *base points into rel at its last component. */
int safe_parent(int dirfd, const char *rel, const char **base);

/* mkdirat of rel (its parent opened by safe_parent) with mode; an existing
 * entry is success only if it is a directory (a symlink is -ELOOP, anything
 * else -ENOTDIR). */
int safe_mkdirat(int dirfd, const char *rel, mode_t mode);

/* Invariant 3: prefix + 16 random hex digits into buf. */
int safe_tmpname(char *buf, size_t size, const char *prefix);

/* Invariant 4. path: absolute, without symlinks (realpath'd). Refuses
 * (-EPERM, why says which path and why) a directory not owned by uid or
 * writable by group or others, and an ancestor that is not owned by root or
 * uid, or that is writable by group or others without the sticky bit. A
 * directory that is ours but readable by others is chmod'ed to 0700 when
 * fix is true (*fixed_mode gets its old mode, else 0). */
int safe_check_owned_dir(const char *path, uid_t uid, bool fix, mode_t *fixed_mode, char *why,
			 size_t whysize);

/* Whether st is writable by someone other than its owner and root in a way
 * the sticky bit does not tame: group/other-writable, no S_ISVTX. */
bool safe_others_can_write(const struct stat *st);

/* Calls fn for each entry name of the directory open as fd ("." and ".."
 * excluded), in no particular order, until fn returns non-zero, which is
 * returned; a failed read of the directory is its -errno. fd is the
 * caller's no more (closed here, also on failure): a fd of its own, since a
 * dup would share its position with the original. */
typedef int (*safe_dir_fn)(void *arg, const char *name);
int safe_dir_each(int fd, safe_dir_fn fn, void *arg);

#endif
