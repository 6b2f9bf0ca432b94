/* cachedir — paths under the cache directory and its lock file
 * (fs/lib/cachedir.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "cachedir.h"

int cachedir_path(const char *cache, const char *name, char *buf, size_t size)
{
	return snprintf(buf, size, "%s/%s", cache, name);
}

int cachedir_lock_open(const char *cache, int flags, char *path, size_t size)
{
	cachedir_path(cache, CACHEDIR_LOCK, path, size);
	return open(path, flags | O_CLOEXEC, 0600);
}

int cachedir_lock_note(int fd, long pid, bool draining)
{
	char note[48];
	int n = snprintf(note, sizeof(note), "%ld%s\n", pid, draining ? " " CACHEDIR_LOCK_DRAINING : "");
	if (ftruncate(fd, 0) != 0 || pwrite(fd, note, (size_t)n, 0) != n)
		return errno ? -errno : -EIO; /* a short write sets no errno */
	return 0;
}
