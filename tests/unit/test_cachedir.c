/* Unit tests for fs/lib/cachedir.c: the cache directory's names are the ones
 * on disk since the first release (a renamed file would orphan a cache), and
 * cachedir_path() formats and truncates as snprintf does; the lock file
 * holds "PID\n" or "PID draining\n". */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cachedir.h"
#include "control_proto.h"

Test(cachedir, names_are_the_on_disk_names)
{
	cr_assert_str_eq(CACHEDIR_LOCK, "lock");
	cr_assert_str_eq(CACHEDIR_CATALOG, "catalog.db");
	cr_assert_str_eq(CACHEDIR_JOURNAL, "catalog.db-defer");
	cr_assert_str_eq(CACHEDIR_BACKING, "backing");
	cr_assert_str_eq(CACHEDIR_BACKING_TMP, "backing.tmp");
	cr_assert_str_eq(CACHEDIR_STAGING, "staging");
	cr_assert_str_eq(CACHEDIR_CONTROL_SOCK, "control.sock");
	cr_assert_str_eq(CONTROL_SOCK_NAME, CACHEDIR_CONTROL_SOCK);
	cr_assert_str_eq(CACHEDIR_LOG, "ckptfs.log");
}

Test(cachedir, path_joins_cache_and_name)
{
	char buf[64];
	cr_assert_eq(cachedir_path("/var/cache/ckptfs", CACHEDIR_CATALOG, buf, sizeof(buf)), 28);
	cr_assert_str_eq(buf, "/var/cache/ckptfs/catalog.db");
}

Test(cachedir, path_truncates_as_snprintf)
{
	char buf[8];
	int n = cachedir_path("/cache", CACHEDIR_LOCK, buf, sizeof(buf));
	cr_assert_eq(n, 11);
	cr_assert_str_eq(buf, "/cache/");
}

Test(cachedir, lock_note_is_pid_then_draining)
{
	char dir[] = "/tmp/ckptfs-cachedir-XXXXXX", path[PATH_MAX + 16], buf[64];
	cr_assert_not_null(mkdtemp(dir));
	int fd = cachedir_lock_open(dir, O_RDWR | O_CREAT | O_NOFOLLOW, path, sizeof(path));
	cr_assert_geq(fd, 0);
	cr_assert_eq(strcmp(path + strlen(dir), "/lock"), 0);

	cr_assert_eq(cachedir_lock_note(fd, 4242, true), 0);
	cr_assert_eq(cachedir_lock_note(fd, 77, false), 0); /* replaces, never appends */
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	cr_assert_str_eq(buf, "77\n");
	cr_assert_eq(cachedir_lock_note(fd, 4242, true), 0);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	cr_assert_str_eq(buf, "4242 draining\n");

	close(fd);
	unlink(path);
	rmdir(dir);
}
