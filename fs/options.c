/* options — the command line of the ckptfs daemon, and the checks that run
 * before anything is mounted.
 *
 *   ckptfs [-f] [-d] [-o OPT[,OPT...]] BACKING MOUNTPOINT
 *
 * ckptfs's own options are taken out; FUSE's mount options pass through to
 * libfuse. Anything else is refused by name, before mounting. Each failure is
 * one line, "ckptfs: <what>: <reason>", and a non-zero exit: nothing is left
 * half-mounted because nothing is mounted until every check passed. */
#define _GNU_SOURCE
#include "options.h"
#include "metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "claim.h"
#include "hash.h"
#include "reader.h"
#include "store.h"
#include "trust.h"

/* FUSE and mount(8) options accepted as they are (name, or name= prefix). */
static const char *const options_fuse_passthrough[] = {
	"allow_other", "allow_root", "default_permissions", "auto_unmount", "blkdev",
	"ro", "rw", "suid", "nosuid", "dev", "nodev", "exec", "noexec", "atime", "noatime",
	"relatime", "norelatime", "strictatime", "sync", "async", "dirsync", "lazytime",
	"fsname=", "subtype=", "max_read=", "max_idle_threads=", "blksize=",
	NULL,
};
/* fstab / mount.fuse3 options that mean nothing to the daemon: dropped. */
static const char *const options_ignored[] = {
	"defaults", "auto", "noauto", "user", "nouser", "users", "_netdev", "nofail", "x-", "comment=",
	NULL,
};

static bool options_match(const char *const *list, const char *opt)
{
	for (int i = 0; list[i]; i++) {
		size_t n = strlen(list[i]);
		bool prefix = list[i][n - 1] == '=' || list[i][n - 1] == '-';
		if (prefix ? strncmp(opt, list[i], n) == 0 : strcmp(opt, list[i]) == 0)
			return true;
	}
	return false;
}

/* 1 GiB holds the buffers of ~128 files streamed at once (up to 8 MiB each:
 * a maximal chunk and two blocks, writer.c): more than the ranks of a node
 * save at once. An eighth of the RAM on a small machine. */
static uint64_t options_default_writebuf(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	uint64_t b = OPTIONS_DEFAULT_WRITEBUF;
	if (ram && ram / 8 < b)
		b = ram / 8;
	return b < OPTIONS_MIN_WRITEBUF ? OPTIONS_MIN_WRITEBUF : b;
}

static int options_fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "ckptfs: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return -1;
}

static int options_copy(char *dst, size_t size, const char *src, const char *what)
{
	if (snprintf(dst, size, "%s", src) >= (int)size)
		return options_fail("%s '%s': path too long", what, src);
	return 0;
}

static int options_add_fuse(struct options_result *r, const char *opt)
{
	size_t have = strlen(r->fuse_opts), need = strlen(opt);
	if (have + need + 2 > sizeof(r->fuse_opts))
		return options_fail("%s%s: too many options", "-o ", opt);
	if (have)
		r->fuse_opts[have++] = ',';
	memcpy(r->fuse_opts + have, opt, need + 1);
	return 0;
}

/* Parses a size like 64M, 1G, 4096. */
static int options_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-') /* strtoull takes "-1" as its negation */
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (v > (ULLONG_MAX >> shift)) /* would wrap */
		return -1;
	v <<= shift;
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static int options_seconds(const char *opt, const char *val, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(val, &end);
	if (errno || end == val || *end || v < 0)
		return options_fail("option '%s': %s", opt, "expects a number of seconds, like 2 or 0.5");
	*out = v;
	return 0;
}

/* A number of milliseconds in [min, max]. */
static int options_ms(const char *opt, const char *val, unsigned long min, unsigned long max,
		      unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(val, &end, 10);
	if (errno || end == val || *end || v < min || v > max) {
		char why[96];
		snprintf(why, sizeof(why), "expects %lu to %lu milliseconds", min, max);
		return options_fail("option '%s': %s", opt, why);
	}
	*out = (unsigned)v;
	return 0;
}

/* -o meta=: only its form is checked here (the scheme, as pg.c wants it);
 * whether the server answers is found when it is opened, before the fork. */
static int options_meta_url(struct ckptfs_options *o, const char *url)
{
	if (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0)
		return options_fail("meta=%s: %s", url, "not a PostgreSQL URL (postgresql://user@host:port/db)");
	return options_copy(o->meta_url, sizeof(o->meta_url), url, "meta");
}

static int options_one(struct options_result *r, const char *opt)
{
	struct ckptfs_options *o = &r->opt;
	if (strncmp(opt, "keep=", 5) == 0) {
		char *end;
		errno = 0;
		unsigned long k = strtoul(opt + 5, &end, 10);
		if (errno || end == opt + 5 || *end || k > 1000000)
			return options_fail("option '%s': %s", opt, "expects a count, like 3 (0 keeps all)");
		o->gen.keep = (unsigned)k;
		return 0;
	}
	if (strncmp(opt, "gen_pattern=", 12) == 0)
		return options_copy(o->gen.pattern, sizeof(o->gen.pattern), opt + 12, "gen_pattern");
	if (strncmp(opt, "quiet=", 6) == 0)
		return options_seconds(opt, opt + 6, &o->gen.quiet_s);
	if (strncmp(opt, "abandon=", 8) == 0)
		return options_seconds(opt, opt + 8, &o->gen.abandon_s);
	if (strcmp(opt, "show_open") == 0) {
		o->gen.show_open = true;
		return 0;
	}
	if (strncmp(opt, "cache=", 6) == 0)
		return options_copy(o->cache, sizeof(o->cache), opt + 6, "cache");
	if (strncmp(opt, "log=", 4) == 0)
		return options_copy(o->log_path, sizeof(o->log_path), opt + 4, "log");
	if (strncmp(opt, "chunk_cache=", 12) == 0) {
		if (options_size(opt + 12, &o->chunk_cache_bytes) != 0 || o->chunk_cache_bytes < (8u << 20))
			return options_fail("option '%s': %s", opt, "expects a size of at least 8M, like 64M");
		return 0;
	}
	if (strncmp(opt, "writebuf=", 9) == 0) {
		if (options_size(opt + 9, &o->writebuf) != 0 || o->writebuf < OPTIONS_MIN_WRITEBUF)
			return options_fail("option '%s': %s", opt,
					    "expects a size of at least 8M, like 1G");
		return 0;
	}
	if (strncmp(opt, "prefetch=", 9) == 0) {
		char *end;
		errno = 0;
		unsigned long n = strtoul(opt + 9, &end, 10);
		if (errno || end == opt + 9 || *end || opt[9] == '-' || n > READER_PREFETCH_MAX)
			return options_fail("option '%s': %s", opt, "expects 0 (none) to 64 chunks");
		o->prefetch = n == 0 ? -1 : (int)n;
		return 0;
	}
	if (strcmp(opt, "syslog") == 0) {
		o->use_syslog = true;
		return 0;
	}
	if (strcmp(opt, "nonempty") == 0) {
		o->nonempty = true;
		return 0;
	}
	if (strncmp(opt, "cache_size=", 11) == 0) {
		if (options_size(opt + 11, &o->cache_size) != 0 || o->cache_size < (64u << 20))
			return options_fail("option '%s': %s", opt, "expects a size of at least 64M, like 20G");
		return 0;
	}
	if (strncmp(opt, "dirty_max=", 10) == 0) {
		if (options_size(opt + 10, &o->dirty_max) != 0 || o->dirty_max < (16u << 20))
			return options_fail("option '%s': %s", opt, "expects a size of at least 16M, like 8G");
		return 0;
	}
	if (strncmp(opt, "sync=", 5) == 0) {
		if (strcmp(opt + 5, "local") != 0 && strcmp(opt + 5, "backing") != 0)
			return options_fail("option '%s': %s", opt, "expects sync=local or sync=backing");
		o->sync_backing = strcmp(opt + 5, "backing") == 0;
		return 0;
	}
	if (strncmp(opt, "verify=", 7) == 0) {
		if (strcmp(opt + 7, "crc32c") != 0 && strcmp(opt + 7, "sha256") != 0)
			return options_fail("option '%s': %s", opt, "expects verify=crc32c or verify=sha256");
		o->verify_sha256 = strcmp(opt + 7, "sha256") == 0;
		return 0;
	}
	if (strncmp(opt, "codec=", 6) == 0) {
		if (codec_family_parse(opt + 6, &o->codec) != 0)
			return options_fail("option '%s': %s", opt, "expects codec=lz4 or codec=zstd");
		return 0;
	}
	if (strncmp(opt, "backing_timeout=", 16) == 0) {
		double s;
		if (options_seconds(opt, opt + 16, &s) != 0)
			return -1;
		if (s < 1 || s > 86400)
			return options_fail("option '%s': %s", opt, "expects 1 to 86400 seconds");
		o->backing_timeout_ms = (unsigned)(s * 1000);
		return 0;
	}
	if (strncmp(opt, "claim_timeout=", 14) == 0) {
		double s;
		if (options_seconds(opt, opt + 14, &s) != 0)
			return -1;
		if (s < 4 || s > 86400)
			return options_fail("option '%s': %s", opt, "expects 4 to 86400 seconds");
		o->claim_timeout_s = (unsigned)s;
		return 0;
	}
	if (strncmp(opt, "upload_deadline=", 16) == 0) {
		double s;
		if (options_seconds(opt, opt + 16, &s) != 0)
			return -1;
		o->upload_deadline_s = (unsigned)s;
		return 0;
	}
	if (strncmp(opt, "upload_threads=", 15) == 0) {
		char *end;
		errno = 0;
		unsigned long n = strtoul(opt + 15, &end, 10);
		if (errno || end == opt + 15 || *end || n < 1 || n > 16)
			return options_fail("option '%s': %s", opt, "expects 1 to 16");
		o->upload_threads = (unsigned)n;
		return 0;
	}
	if (strncmp(opt, "metrics=", 8) == 0) {
		const char *why = NULL;
		if (metrics_check_addr(opt + 8, &why) != 0)
			return options_fail("option '%s': %s", opt, why);
		return options_copy(o->metrics_addr, sizeof(o->metrics_addr), opt + 8, "metrics");
	}
	if (strncmp(opt, "meta=", 5) == 0)
		return options_meta_url(o, opt + 5);
	if (strncmp(opt, "node_name=", 10) == 0) {
		if (!opt[10] || strpbrk(opt + 10, "\n\t"))
			return options_fail("option '%s': %s", opt, "expects a name of printable characters");
		return options_copy(o->node_name, sizeof(o->node_name), opt + 10, "node_name");
	}
	if (strncmp(opt, "lease_ms=", 9) == 0)
		return options_ms(opt, opt + 9, 1000, 600000, &o->lease_ms);
	if (strncmp(opt, "meta_timeout_ms=", 16) == 0)
		return options_ms(opt, opt + 16, 1000, 3600000, &o->meta_timeout_ms);
	if (strcmp(opt, "leave_queued") == 0) {
		o->leave_queued = true;
		return 0;
	}
	if (strcmp(opt, "copy_uploads") == 0) {
		o->copy_uploads = true;
		return 0;
	}
	if (strcmp(opt, "packs") == 0 || strcmp(opt, "packs=on") == 0) {
		o->packs = true;
		return 0;
	}
	if (strcmp(opt, "packs=off") == 0) {
		o->packs = false;
		return 0;
	}
	if (strncmp(opt, "packs=", 6) == 0)
		return options_fail("option '%s': %s", opt, "expects packs=on or packs=off");
	if (strcmp(opt, "read_cache") == 0) {
		o->read_cache = true;
		return 0;
	}
	if (options_match(options_ignored, opt))
		return 0;
	if (options_match(options_fuse_passthrough, opt))
		return options_add_fuse(r, opt);
	return options_fail("unknown option '%s'%s", opt, " (see ckptfs --help)");
}

/* Splits on commas; "\," is a comma inside an option (a gen_pattern). */
static int options_list(struct options_result *r, const char *list)
{
	char *tok = malloc(strlen(list) + 1);
	if (!tok)
		return -1;
	int rc = 0;
	const char *p = list;
	while (rc == 0 && *p) {
		size_t n = 0;
		for (; *p && *p != ','; p++) {
			if (p[0] == '\\' && p[1] == ',')
				p++;
			tok[n++] = *p;
		}
		tok[n] = '\0';
		if (n)
			rc = options_one(r, tok);
		if (*p == ',')
			p++;
	}
	free(tok);
	return rc;
}

void options_usage(FILE *f)
{
	fprintf(f,
		"usage: ckptfs [-f] [-d] [-o OPT[,OPT...]] BACKING MOUNTPOINT\n"
		"\n"
		"Mounts a checkpoint filesystem at MOUNTPOINT whose data is stored in BACKING, a\n"
		"directory (an NFS mount) or nfs://SERVER/EXPORT/PATH (NFSv3 through libnfs),\n"
		"behind a write-back cache on local disk.\n"
		"\n"
		"  -f                 stay in the foreground, log to stderr\n"
		"  -d                 debug: foreground, FUSE request trace\n"
		"  -h, --help         this text\n"
		"  -V, --version      the version\n"
		"\n"
		"ckptfs options (-o):\n"
		"  cache=DIR          local directory for the catalog, cached chunks and staging\n"
		"                     (default: /var/cache/ckptfs/<id of BACKING> for root,\n"
		"                     else $XDG_CACHE_HOME/ckptfs/<id>)\n"
		"  log=FILE           log file when in the background (default CACHE/ckptfs.log);\n"
		"                     SIGHUP reopens it (logrotate)\n"
		"  syslog             log to syslog (facility daemon) instead of a file\n"
		"  chunk_cache=SIZE   memory for decoded chunks (default 64M)\n"
		"  writebuf=SIZE      memory for the buffers of files being written (default 1G,\n"
		"                     or 1/8 of the RAM if less); past it a file is staged on\n"
		"                     the cache's disk and chunked at its commit\n"
		"  prefetch=N         chunks fetched ahead of a file read sequentially, in\n"
		"                     parallel (default 8, 0 none, at most 64)\n"
		"  nonempty           allow mounting over a non-empty directory\n"
		"  metrics=ADDR:PORT  serve Prometheus metrics on http://ADDR:PORT/metrics\n"
		"                     (like 127.0.0.1:9567)\n"
		"  cache_size=SIZE    bound of chunk data kept in the cache (default: what its disk\n"
		"                     holds); least recently used clean chunks go first\n"
		"  dirty_max=SIZE     data not yet on BACKING before writers wait (default 3/4 of\n"
		"                     cache_size)\n"
		"  sync=local|backing fsync makes data durable on the local disk (default), or\n"
		"                     returns only when it is on BACKING\n"
		"  verify=crc32c|sha256 how chunks read back from the cache are checked: by the\n"
		"                     CRC-32C their objects carry (default), or by re-hashing;\n"
		"                     chunks from BACKING are always re-hashed\n"
		"  codec=lz4|zstd     how new chunks are compressed (floats shuffled first): LZ4\n"
		"                     (default, fast) or zstd (smaller, more CPU)\n"
		"  backing_timeout=S  reads that need BACKING wait this long, then EIO; writes\n"
		"                     short of cache room, then ENOSPC (default 60)\n"
		"  claim_timeout=S    a claim on BACKING not renewed for this long, by a daemon\n"
		"                     of another host, may be taken over (default 60)\n"
		"  upload_threads=N   parallel uploads to BACKING (default 8 over a network or FUSE\n"
		"                     filesystem or nfs://, 2 on a local one)\n"
		"  upload_deadline=S  log uploads older than this (default 300)\n"
		"  leave_queued       unmount without waiting for uploads (they resume at the next\n"
		"                     mount)\n"
		"  copy_uploads       copy chunk objects to a BACKING directory on the cache's\n"
		"                     filesystem (default: hard links, one copy on the disk)\n"
		"  packs=on|off       put small chunk objects (< 256 KiB) of each upload batch\n"
		"                     into one pack file on BACKING (default off; makes the\n"
		"                     store format 5; not with meta=)\n"
		"  read_cache         read-only opens go through the kernel's page cache (default:\n"
		"                     they bypass it where the kernel allows, Linux 6.6 and later)\n"
		"  keep=K             keep the newest K committed generations per series (0: all)\n"
		"  gen_pattern=RE     names that start a generation (POSIX ERE; the step is the\n"
		"                     last all-digit group; write a comma as \\,)\n"
		"  quiet=S            quiet period of quiet commit rules (default 2)\n"
		"  abandon=S          abort an open generation idle this long whose writers\n"
		"                     are gone (default 600; 0 never)\n"
		"  show_open          list open generations in directory listings\n"
		"\n"
		"Several nodes over one BACKING (docs/MULTINODE.md):\n"
		"  meta=URL           the shared catalog: a PostgreSQL URL\n"
		"                     (postgresql://user@host:port/db); every node mounts BACKING\n"
		"                     with the same URL and its own cache (default: none, this\n"
		"                     node's SQLite catalog alone)\n"
		"  node_name=NAME     this node in `ckptfs-admin nodes` (default host:pid:cache)\n"
		"  lease_ms=MS        the node's lease, renewed every third of it; a node that\n"
		"                     could not renew it for this long stops changing anything\n"
		"                     (default 5000)\n"
		"  meta_timeout_ms=MS how long calls ride out an unreachable PostgreSQL, then\n"
		"                     fail (default 30000)\n"
		"\n"
		"FUSE options passed through: allow_other, allow_root, default_permissions (on by\n"
		"default), auto_unmount, ro, nosuid, nodev, noexec, noatime, fsname=, max_read=, ...\n"
		"\n"
		"Unmount with: ckptfs-admin umount MOUNTPOINT (waits for the uploads to BACKING and\n"
		"for the daemon; fusermount3 -u and umount return at once). See ckptfs(8).\n");
}

/* ---- checks ---- */

static int options_absolute(char *path, size_t size, const char *what)
{
	char real[PATH_MAX];
	if (!realpath(path, real))
		return options_fail("%s: %s", what, strerror(errno));
	return options_copy(path, size, real, what);
}

static int options_check_dir(const char *path, const char *what)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return options_fail("%s: %s", what, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return options_fail("%s: %s", what, "not a directory");
	return 0;
}

/* Writes, fsyncs, reads back, renames and removes a probe file: a directory
 * that cannot take a save is found now, not at the first checkpoint. The
 * message names the step that failed. */
static int options_probe_dir(const char *dir, const char *what)
{
	char path[PATH_MAX + 64], renamed[PATH_MAX + 80], back[32];
	const char probe[] = "ckptfs write probe\n";
	snprintf(path, sizeof(path), "%s/.ckptfs-probe.%ld", dir, (long)getpid());
	snprintf(renamed, sizeof(renamed), "%s.done", path);
	const char *step = "create";
	int err = 0;
	int fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = errno;
	} else {
		step = "write";
		if (write(fd, probe, sizeof(probe)) != (ssize_t)sizeof(probe))
			err = errno ? errno : EIO;
		if (!err && (step = "fsync", fsync(fd) != 0))
			err = errno;
		if (!err && (step = "read back", pread(fd, back, sizeof(back), 0) != (ssize_t)sizeof(probe) ||
						 memcmp(back, probe, sizeof(probe)) != 0))
			err = errno ? errno : EIO;
		close(fd);
		if (!err && (step = "rename", rename(path, renamed) != 0))
			err = errno;
		if (!err && (step = "delete", unlink(renamed) != 0))
			err = errno;
		unlink(path);
		unlink(renamed);
	}
	if (err) {
		char msg[PATH_MAX + 160];
		snprintf(msg, sizeof(msg), "%s of the probe file %s failed: %s", step, path,
			 strerror(err));
		return options_fail("%s: %s", what, msg);
	}
	return 0;
}

/* trust.h: refused before anything is made in it, the probe included. */
static int options_check_trust(const char *cache)
{
	char msg[PATH_MAX * 2 + 512];
	if (trust_check_cache(cache, msg, sizeof(msg)) != 0)
		return options_fail("%s%s", msg, "");
	return 0;
}

static int options_mkdirs(const char *path)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int options_default_cache(struct options_result *r)
{
	struct ckptfs_options *o = &r->opt;
	uint8_t h[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	hash_sha256(o->backing, strlen(o->backing), h);
	hash_to_hex(h, hex);
	const char *base;
	char home[PATH_MAX];
	if (geteuid() == 0) {
		base = "/var/cache/ckptfs";
	} else if (getenv("XDG_CACHE_HOME") && getenv("XDG_CACHE_HOME")[0] == '/') {
		snprintf(home, sizeof(home), "%s/ckptfs", getenv("XDG_CACHE_HOME"));
		base = home;
	} else if (getenv("HOME")) {
		snprintf(home, sizeof(home), "%s/.cache/ckptfs", getenv("HOME"));
		base = home;
	} else {
		return options_fail("%s: %s", "cache", "no default (no HOME): give -o cache=DIR");
	}
	if (snprintf(o->cache, sizeof(o->cache), "%s/%.16s", base, hex) >= (int)sizeof(o->cache))
		return options_fail("%s: %s", "cache", "path too long");
	return 0;
}

/* The type of what is mounted on path ("fuse.ckptfs"), from
 * /proc/self/mountinfo (its mount points escape space, tab, newline and
 * backslash as \ooo); false if nothing is. The last mount there wins. */
static bool options_mounted_type(const char *path, char *type, size_t size)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[2 * PATH_MAX + 512], point[2 * PATH_MAX], fstype[64];
	bool found = false;
	while (fgets(line, sizeof(line), f)) {
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %8191s", point) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1)
			continue;
		char plain[2 * PATH_MAX];
		size_t n = 0;
		for (const char *p = point; *p && n < sizeof(plain) - 1; p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
				plain[n++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				plain[n++] = *p;
			}
		}
		plain[n] = '\0';
		if (strcmp(plain, path) == 0) {
			snprintf(type, size, "%s", fstype);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static int options_check_mountpoint(struct options_result *r)
{
	char what[PATH_MAX + 32], type[64];
	snprintf(what, sizeof(what), "mountpoint %s", r->opt.mountpoint);
	/* before stat: a stale FUSE mount answers ENOTCONN */
	char abs[PATH_MAX] = "";
	bool resolved = realpath(r->opt.mountpoint, abs) != NULL;
	int err = errno;
	if (!resolved)
		snprintf(abs, sizeof(abs), "%s", r->opt.mountpoint);
	if (resolved || err == ENOTCONN) {
		if (options_mounted_type(abs, type, sizeof(type)) && strcmp(type, "fuse.ckptfs") == 0) {
			struct stat st;
			if (stat(abs, &st) != 0 && errno == ENOTCONN)
				return options_fail("%s: %s", what, "already mounted by a ckptfs that is no "
								    "longer running (a stale mount): "
								    "fusermount3 -u it first");
			return options_fail("%s: %s", what, "already mounted (a ckptfs serves it): "
							    "unmount it first (ckptfs-admin umount)");
		}
	}
	if (options_check_dir(r->opt.mountpoint, what) != 0)
		return -1;
	if (options_absolute(r->opt.mountpoint, sizeof(r->opt.mountpoint), what) != 0)
		return -1;
	if (r->opt.nonempty)
		return 0;
	DIR *d = opendir(r->opt.mountpoint);
	if (!d)
		return options_fail("%s: %s", what, strerror(errno));
	struct dirent *de;
	int entries = 0;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			entries++;
	closedir(d);
	if (entries)
		return options_fail("%s: %s", what, "not empty (use -o nonempty to mount over it)");
	return 0;
}

/* host:pid:cache, the pid the foreground's (the daemon's own is logged). */
static void options_default_node_name(struct ckptfs_options *o)
{
	char host[256];
	if (gethostname(host, sizeof(host)) != 0 || !host[0])
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(o->node_name, sizeof(o->node_name), "%s:%ld:%s", host, (long)getpid(), o->cache);
}

static int options_check(struct options_result *r)
{
	struct ckptfs_options *o = &r->opt;
	char what[PATH_MAX + 32];

	snprintf(what, sizeof(what), "BACKING %s", o->backing);
	/* An nfs:// URL is checked when it is opened (main: backing_open, backing_probe). */
	if (strncmp(o->backing, "nfs://", 6) != 0 &&
	    (options_check_dir(o->backing, what) != 0 ||
	     options_absolute(o->backing, sizeof(o->backing), what) != 0))
		return -1;
	if (options_check_mountpoint(r) != 0)
		return -1;

	if (!o->cache[0] && options_default_cache(r) != 0)
		return -1;
	snprintf(what, sizeof(what), "cache %s", o->cache);
	int rc = options_mkdirs(o->cache);
	if (rc != 0)
		return options_fail("%s: cannot create: %s", what, strerror(-rc));
	if (options_check_dir(o->cache, what) != 0 ||
	    options_absolute(o->cache, sizeof(o->cache), what) != 0 ||
	    options_check_trust(o->cache) != 0 || options_probe_dir(o->cache, what) != 0)
		return -1;
	if (strcmp(o->cache, o->mountpoint) == 0 || strcmp(o->backing, o->mountpoint) == 0)
		return options_fail("%s: %s", o->mountpoint, "BACKING and cache must not be the mountpoint");
	if (o->log_path[0] && o->log_path[0] != '/')
		return options_fail("log %s: %s", o->log_path, "must be an absolute path");
	if (!o->meta_url[0] && o->node_name[0])
		return options_fail("node_name=%s: %s", o->node_name, "only with -o meta=URL");
	if (o->meta_url[0] && o->packs)
		return options_fail("packs=on: %s%s", "not with -o meta=URL",
				    " (a shared catalog's nodes put loose objects)");
	if (o->meta_url[0] && !o->node_name[0])
		options_default_node_name(o);
	return 0;
}

int options_parse(int argc, char **argv, struct options_result *r)
{
	memset(r, 0, sizeof(*r));
	r->opt.chunk_cache_bytes = 64u << 20;
	r->opt.writebuf = options_default_writebuf();
	r->opt.prefetch = READER_PREFETCH_DEFAULT;
	r->opt.gen.quiet_s = 2.0;
	r->opt.gen.abandon_s = 600.0;
	r->opt.backing_timeout_ms = 60000;
	r->opt.upload_threads = 0; /* BACKING's choice: backing_upload_threads */
	r->opt.upload_deadline_s = 300;
	r->opt.claim_timeout_s = CLAIM_DEFAULT_TIMEOUT_S;
	r->opt.lease_ms = OPTIONS_DEFAULT_LEASE_MS;
	r->opt.meta_timeout_ms = OPTIONS_DEFAULT_META_TIMEOUT_MS;
	const char *pos[3] = { 0 };
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			options_usage(stdout);
			return 1;
		} else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			printf("ckptfs %s (catalog schema %d, store format %d)\n", CKPTFS_VERSION,
			       CAT_SCHEMA_VERSION, STORE_MARKER_VERSION);
			return 1;
		} else if (strcmp(a, "-f") == 0) {
			r->opt.foreground = true;
		} else if (strcmp(a, "-d") == 0) {
			r->opt.foreground = r->opt.debug = true;
		} else if (strcmp(a, "-o") == 0) {
			if (++i == argc)
				return options_fail("%s: %s", "-o", "needs a list of options");
			if (options_list(r, argv[i]) != 0)
				return -1;
		} else if (strncmp(a, "-o", 2) == 0) {
			if (options_list(r, a + 2) != 0)
				return -1;
		} else if (a[0] == '-' && a[1]) {
			return options_fail("unknown argument '%s'%s", a, " (see ckptfs --help)");
		} else if (npos < 3) {
			pos[npos++] = a;
		}
	}
	if (npos != 2)
		return options_fail("%s%s", npos < 2 ? "expected BACKING and MOUNTPOINT" : "too many arguments",
				    " (see ckptfs --help)");
	if (options_copy(r->opt.backing, sizeof(r->opt.backing), pos[0], "BACKING") != 0 ||
	    options_copy(r->opt.mountpoint, sizeof(r->opt.mountpoint), pos[1], "mountpoint") != 0)
		return -1;
	return options_check(r);
}
