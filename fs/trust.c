/* trust — the cache directory's owner, modes and fixed names (trust.h). */
#define _GNU_SOURCE
#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachedir.h"
#include "log.h"
#include "safeopen.h"

/* Invariant 3: every name the daemon keeps in the cache, and its kind. */
static const struct {
	const char *name;
	mode_t type;
} trust_fixed[] = {
	{ CACHEDIR_LOCK, S_IFREG },
	{ CACHEDIR_CATALOG, S_IFREG },
	{ CACHEDIR_CATALOG "-wal", S_IFREG },
	{ CACHEDIR_CATALOG "-shm", S_IFREG },
	{ CACHEDIR_CATALOG "-journal", S_IFREG },
	{ CACHEDIR_JOURNAL, S_IFREG },
	{ CACHEDIR_BACKING, S_IFREG },
	{ CACHEDIR_BACKING_TMP, S_IFREG },
	{ CACHEDIR_STORE_ID, S_IFREG },
	{ CACHEDIR_LOG, S_IFREG },
	{ CACHEDIR_CONTROL_SOCK, S_IFSOCK },
	{ CACHEDIR_STAGING, S_IFDIR },
	{ CACHEDIR_CHUNKS, S_IFDIR },
	{ CACHEDIR_TMP, S_IFDIR },
};

static char trust_changes[512];

static void trust_note(const char *fmt, const char *name, unsigned mode)
{
	size_t used = strlen(trust_changes);
	if (used < sizeof(trust_changes) - 1)
		snprintf(trust_changes + used, sizeof(trust_changes) - used, fmt, name, mode);
}

/* Invariant 3 for one name; invariant 2 for its mode. */
static int trust_check_entry(int dirfd, const char *cache, const char *name, mode_t type,
			     uid_t uid, char *msg, size_t msgsize)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode)) {
		snprintf(msg, msgsize, "cache %s: %s is a symlink (not made by ckptfs): remove it",
			 cache, name);
		return -ELOOP;
	}
	if ((st.st_mode & S_IFMT) != type || st.st_uid != uid) {
		snprintf(msg, msgsize, "cache %s: %s is not the %s ckptfs made (owner uid %u, mode "
				       "%06o): move it aside",
			 cache, name, type == S_IFDIR ? "directory" : "file", (unsigned)st.st_uid,
			 (unsigned)st.st_mode);
		return -EPERM;
	}
	mode_t want = st.st_mode & 07700 & ~(mode_t)S_ISVTX;
	if ((st.st_mode & 0077) && type != S_IFSOCK) {
		if (fchmodat(dirfd, name, want, 0) != 0)
			return -errno;
		trust_note(" %s (was %04o)", name, st.st_mode & 07777);
	}
	return 0;
}

int trust_check_cache(const char *cache, char *msg, size_t msgsize)
{
	uid_t uid = geteuid();
	mode_t was = 0;
	char why[4096 + 256];
	trust_changes[0] = '\0';
	int rc = safe_check_owned_dir(cache, uid, true, &was, why, sizeof(why));
	if (rc != 0) {
		snprintf(msg, msgsize, "cache %s: refused: %s (the daemon keeps its catalog and your "
				       "files' bytes there)",
			 cache, why);
		return rc;
	}
	if (was)
		trust_note(" %s (was %04o)", "the directory itself", was);
	int dirfd = open(cache, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dirfd < 0) {
		rc = -errno;
		snprintf(msg, msgsize, "cache %s: cannot open: %s", cache, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; rc == 0 && i < sizeof(trust_fixed) / sizeof(trust_fixed[0]); i++) {
		rc = trust_check_entry(dirfd, cache, trust_fixed[i].name, trust_fixed[i].type, uid, msg,
				       msgsize);
		if (rc != 0 && rc != -ELOOP && rc != -EPERM)
			snprintf(msg, msgsize, "cache %s: %s: %s", cache, trust_fixed[i].name,
				 strerror(-rc));
	}
	close(dirfd);
	return rc;
}

void trust_log_changes(void)
{
	if (trust_changes[0])
		log_info("cache: made private to its owner (mode 0700/0600), as ckptfs keeps every "
			 "file it makes:%s",
			 trust_changes);
}
