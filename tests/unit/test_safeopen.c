/* Unit tests for fs/lib/safeopen.c (shared invariant 7): opens beneath a
 * directory fd never follow a symlink in any component nor leave the
 * directory, with openat2 and with the O_NOFOLLOW walk alike; mkdirat refuses
 * a symlink where a directory is wanted; temporary names are random; the
 * StrictModes check refuses another user's directory, a group/other-writable
 * one and a non-sticky writable ancestor, and makes an open one of ours 0700. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safeopen.h"
#include "support.h"

static struct {
	char dir[64];
	int dfd;
	char victim[128]; /* outside dir: must never be written */
} fx;

static void so_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

static mode_t so_umask(void)
{
	mode_t m = umask(0);
	umask(m);
	return m;
}

static void so_at(char *buf, size_t size, const char *rel)
{
	snprintf(buf, size, "%s/%s", fx.dir, rel);
}

static void setup(void)
{
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "safeopen");
	char p[256];
	so_at(p, sizeof(p), "root");
	cr_assert_eq(mkdir(p, 0700), 0);
	so_at(p, sizeof(p), "root/a");
	cr_assert_eq(mkdir(p, 0700), 0);
	so_at(p, sizeof(p), "root/a/file");
	so_write(p, "inside");
	so_at(fx.victim, sizeof(fx.victim), "victim");
	so_write(fx.victim, "secret");
	chmod(fx.victim, 0600);
	so_at(p, sizeof(p), "victimdir");
	cr_assert_eq(mkdir(p, 0700), 0);
	so_at(p, sizeof(p), "root");
	fx.dfd = open(p, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fx.dfd, 0);
	safe_openat_use_walk(false);
}

static void teardown(void)
{
	safe_openat_use_walk(false);
	close(fx.dfd);
	ts_tmpdir_remove(fx.dir);
}

TestSuite(safeopen, .init = setup, .fini = teardown);

static void so_assert_victim_untouched(void)
{
	char buf[32] = "";
	FILE *f = fopen(fx.victim, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "secret", "the file outside was written through a symlink");
	char p[256];
	so_at(p, sizeof(p), "victimdir/x");
	cr_assert_neq(access(p, F_OK), 0, "a file was made in the directory outside");
}

static void so_symlinks_are_refused(bool walk)
{
	safe_openat_use_walk(walk);
	char p[256];
	so_at(p, sizeof(p), "root/link");
	cr_assert_eq(symlink(fx.victim, p), 0);
	so_at(p, sizeof(p), "root/a/dirlink");
	cr_assert_eq(symlink("../../victimdir", p), 0);

	int fd = safe_openat(fx.dfd, "a/file", O_RDONLY, 0);
	cr_assert_geq(fd, 0, "a plain nested file: %s", strerror(-fd));
	close(fd);
	cr_assert_eq(safe_openat(fx.dfd, "link", O_RDONLY, 0), -ELOOP);
	cr_assert_eq(safe_openat(fx.dfd, "link", O_WRONLY | O_TRUNC, 0), -ELOOP);
	cr_assert_eq(safe_openat(fx.dfd, "link", O_WRONLY | O_CREAT, 0600), -ELOOP);
	cr_assert_eq(safe_openat(fx.dfd, "link", O_WRONLY | O_CREAT | O_EXCL, 0600), -EEXIST);
	cr_assert_eq(safe_openat(fx.dfd, "a/dirlink/x", O_WRONLY | O_CREAT | O_EXCL, 0600), -ELOOP);
	cr_assert_eq(safe_openat(fx.dfd, "a/dirlink", O_RDONLY | O_DIRECTORY, 0), -ELOOP);
	const char *base;
	cr_assert_eq(safe_parent(fx.dfd, "a/dirlink/x", &base), -ELOOP);
	cr_assert_eq(safe_mkdirat(fx.dfd, "a/dirlink", 0700), -ELOOP);
	cr_assert_eq(safe_mkdirat(fx.dfd, "a/dirlink/x", 0700), -ELOOP);
	so_assert_victim_untouched();
}

Test(safeopen, test_openat2_refuses_a_symlink_in_any_component)
{
	so_symlinks_are_refused(false);
}

Test(safeopen, test_the_nofollow_walk_refuses_a_symlink_in_any_component)
{
	so_symlinks_are_refused(true);
}

Test(safeopen, test_paths_that_could_leave_the_directory_are_einval)
{
	for (int walk = 0; walk < 2; walk++) {
		safe_openat_use_walk(walk);
		const char *bad[] = { "", "/etc/passwd", "..", "a/../../victim", "a/./file", "a//file",
				      "a/" };
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			cr_assert_eq(safe_openat(fx.dfd, bad[i], O_RDONLY, 0), -EINVAL, "'%s'", bad[i]);
	}
}

Test(safeopen, test_create_parent_and_mkdirat_work_beneath_the_directory)
{
	for (int walk = 0; walk < 2; walk++) {
		safe_openat_use_walk(walk);
		const char *dir = walk ? "a/w" : "a/o";
		cr_assert_eq(safe_mkdirat(fx.dfd, dir, 0700), 0);
		cr_assert_eq(safe_mkdirat(fx.dfd, dir, 0700), 0, "an existing directory is success");
		char rel[64];
		snprintf(rel, sizeof(rel), "%s/new", dir);
		int fd = safe_openat(fx.dfd, rel, O_WRONLY | O_CREAT | O_EXCL, 0600);
		cr_assert_geq(fd, 0, "%s: %s", rel, strerror(-fd));
		struct stat st;
		cr_assert_eq(fstat(fd, &st), 0);
		cr_assert_eq(st.st_mode & 07777, 0600 & ~so_umask());
		close(fd);
		const char *base;
		int pfd = safe_parent(fx.dfd, rel, &base);
		cr_assert_geq(pfd, 0);
		cr_assert_str_eq(base, "new");
		cr_assert_eq(fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW), 0);
		close(pfd);
		cr_assert_eq(safe_mkdirat(fx.dfd, "a/file", 0700), -ENOTDIR);
	}
}

Test(safeopen, test_temporary_names_are_random_and_keep_the_prefix)
{
	char a[64], b[64];
	cr_assert_eq(safe_tmpname(a, sizeof(a), "tmp/host.12."), 0);
	cr_assert_eq(safe_tmpname(b, sizeof(b), "tmp/host.12."), 0);
	cr_assert_eq(strlen(a), strlen("tmp/host.12.") + SAFE_RANDOM_HEX);
	cr_assert_eq(strncmp(a, "tmp/host.12.", 12), 0);
	cr_assert_str_neq(a, b);
	cr_assert_eq(safe_tmpname(a, 14, "tmp/host.12."), -ENAMETOOLONG);
}

Test(safeopen, test_strict_modes_refuse_other_users_and_writable_directories)
{
	char p[256], why[512];
	mode_t was = 0;
	so_at(p, sizeof(p), "root");
	cr_assert_eq(chmod(p, 0755), 0);
	cr_assert_eq(safe_check_owned_dir(p, geteuid(), true, &was, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(was, 0755, "the old mode is reported");
	struct stat st;
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0700, "made private");

	cr_assert_eq(chmod(p, 0770), 0);
	cr_assert_eq(safe_check_owned_dir(p, geteuid(), true, &was, why, sizeof(why)), -EPERM);
	cr_assert(strstr(why, p) && strstr(why, "writable by group or others"), "%s", why);
	cr_assert_eq(chmod(p, 0700), 0);

	cr_assert_eq(safe_check_owned_dir(p, geteuid() + 1, false, &was, why, sizeof(why)), -EPERM);
	cr_assert(strstr(why, "owned by uid"), "%s", why);

	/* an ancestor others can write: refused without the sticky bit */
	cr_assert_eq(chmod(fx.dir, 0777), 0);
	cr_assert_eq(safe_check_owned_dir(p, geteuid(), false, &was, why, sizeof(why)), -EPERM);
	cr_assert(strstr(why, fx.dir) && strstr(why, "no sticky bit"), "%s", why);
	cr_assert_eq(chmod(fx.dir, 01777), 0);
	cr_assert_eq(safe_check_owned_dir(p, geteuid(), false, &was, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(chmod(fx.dir, 0700), 0);

	so_at(p, sizeof(p), "dirlink");
	cr_assert_eq(symlink("root", p), 0);
	cr_assert_eq(safe_check_owned_dir(p, geteuid(), false, &was, why, sizeof(why)), -ELOOP);
}

/* Invariant 5: what was looked at is what is opened, or nothing. Each swap
 * below is what a user racing root's `ckptfs-admin import` could do
 * between its lstat and its open; the old path-based open followed the
 * symlink and read the victim. */
Test(safeopen, test_open_seen_refuses_an_entry_swapped_after_it_was_looked_at)
{
	char p[256], q[256];
	so_at(p, sizeof(p), "root/f");
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs("mine", f);
	fclose(f);
	struct stat seen;
	cr_assert_eq(fstatat(fx.dfd, "f", &seen, AT_SYMLINK_NOFOLLOW), 0);

	int fd = safe_open_seen(fx.dfd, "f", &seen, O_RDONLY);
	cr_assert_geq(fd, 0, "the file as seen: %s", strerror(-fd));
	cr_assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0, "O_NONBLOCK left on the fd");
	char buf[8] = "";
	cr_assert_eq(read(fd, buf, sizeof(buf)), 4);
	cr_assert_str_eq(buf, "mine");
	close(fd);

	/* a symlink to the victim renamed over it */
	so_at(q, sizeof(q), "root/swap");
	cr_assert_eq(symlink(fx.victim, q), 0);
	cr_assert_eq(rename(q, p), 0);
	cr_assert_eq(safe_open_seen(fx.dfd, "f", &seen, O_RDONLY), -ELOOP);
	/* another regular file (a hard link to the victim) in its place */
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(link(fx.victim, p), 0);
	cr_assert_eq(safe_open_seen(fx.dfd, "f", &seen, O_RDONLY), -ESTALE);
	/* a FIFO in its place: refused, and the open does not wait for a writer */
	cr_assert_eq(unlink(p), 0);
	cr_assert_eq(mkfifo(p, 0600), 0);
	cr_assert_eq(safe_open_seen(fx.dfd, "f", &seen, O_RDONLY), -ESTALE);
	cr_assert_eq(safe_open_seen(fx.dfd, "a/file", &seen, O_RDONLY), -EINVAL);
	cr_assert_eq(safe_open_seen(fx.dfd, "..", &seen, O_RDONLY), -EINVAL);

	/* a directory, seen and opened as one */
	struct stat dseen;
	cr_assert_eq(fstatat(fx.dfd, "a", &dseen, AT_SYMLINK_NOFOLLOW), 0);
	fd = safe_open_seen(fx.dfd, "a", &dseen, O_RDONLY | O_DIRECTORY);
	cr_assert_geq(fd, 0, "the directory as seen: %s", strerror(-fd));
	close(fd);
	so_assert_victim_untouched();
}
