/* Unit tests for fs/lib/store.c: objects round-trip byte for byte, land at
 * chunks/ab/cd/<hex> with the 72-byte header of docs/FORMAT.md (parsed here
 * from the file's bytes, independently of the store's own decoder), and every
 * missing, truncated or corrupt object reads as -EIO with a log line naming
 * the chunk; store_open creates its directories and clears the stale tmp/
 * files of dead processes of this host only; concurrent writers of one object
 * leave one valid object. Every test works in its own temporary directory. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lz4.h>

#include "chunker.h"
#include "codec.h"
#include "crc32c.h"
#include "hash.h"
#include "log.h"
#include "store.h"
#include "support.h"

#define MiB ((size_t)1024 * 1024)
#define KiB ((size_t)1024)
#define SKIPPED_EXIT 77

#define MAX_OWNED 64

static struct fixture {
	char dir[64];
	struct store *st;
	FILE *log; /* the store's log lines, to check what they name */
	void *owned[MAX_OWNED]; /* test buffers, freed at teardown if a test fails */
	int n_owned;
} fx;

/* ---- data ---- */

static uint64_t tk_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void tk_fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t state = seed;

	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(tk_splitmix64(&state) >> 56);
}

/* Text-like data: words from a small vocabulary in a pseudo-random order. */
static void tk_fill_text(uint8_t *buf, size_t len, uint64_t seed)
{
	static const char *const words[] = { "model.", "layers.", "weight ", "bias ",
					     "attn.q_proj ", "mlp.up ", "norm ", "0.125 " };
	uint64_t state = seed;
	size_t off = 0;

	while (off < len) {
		const char *w = words[tk_splitmix64(&state) % 8];
		size_t n = strlen(w);

		if (n > len - off)
			n = len - off;
		memcpy(buf + off, w, n);
		off += n;
	}
}

/* A buffer that teardown frees unless tk_release did, so that a failed
 * assertion does not add a leak report under ASan. */
static uint8_t *tk_alloc(size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);

	cr_assert_not_null(buf);
	cr_assert_lt(fx.n_owned, MAX_OWNED);
	fx.owned[fx.n_owned++] = buf;
	return buf;
}

static void tk_release(void *buf)
{
	for (int i = 0; i < fx.n_owned; i++) {
		if (fx.owned[i] == buf) {
			fx.owned[i] = fx.owned[--fx.n_owned];
			break;
		}
	}
	free(buf);
}

static uint8_t *tk_text(size_t len, uint64_t seed)
{
	uint8_t *buf = tk_alloc(len);

	tk_fill_text(buf, len, seed);
	return buf;
}

/* ---- files ---- */

static uint8_t *tk_read_file(const char *path, size_t *len)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t *buf;
	size_t done = 0;

	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &sb), 0);
	buf = tk_alloc((size_t)sb.st_size);
	while (done < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)sb.st_size - done);

		cr_assert_gt(n, 0, "read %s: %s", path, strerror(errno));
		done += (size_t)n;
	}
	close(fd);
	*len = done;
	return buf;
}

/* Replaces the file at path (objects are 0444, so not opened for writing). */
static void tk_write_file(const char *path, const void *data, size_t len)
{
	size_t done = 0;
	int fd;

	cr_assert(unlink(path) == 0 || errno == ENOENT, "unlink %s: %s", path, strerror(errno));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	cr_assert_geq(fd, 0, "create %s: %s", path, strerror(errno));
	while (done < len) {
		ssize_t n = write(fd, (const uint8_t *)data + done, len - done);

		cr_assert_gt(n, 0, "write %s: %s", path, strerror(errno));
		done += (size_t)n;
	}
	cr_assert_eq(close(fd), 0);
}

static int tk_files_found;
static int tk_count_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	if (flag == FTW_F)
		tk_files_found++;
	return 0;
}

/* Regular files under fx.dir/sub. */
static int tk_count_files(const char *sub)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", fx.dir, sub);
	tk_files_found = 0;
	cr_assert_eq(nftw(path, tk_count_entry, 8, FTW_PHYS), 0, "walk %s", path);
	return tk_files_found;
}

/* ---- the fixture ---- */

static void tk_open(void)
{
	OK(store_open(fx.dir, &fx.st));
}

static void tk_close(void)
{
	store_close(fx.st);
	fx.st = NULL;
}

static void setup(void)
{
	fx.log = tmpfile();
	cr_assert_not_null(fx.log);
	log_setup(fx.log, LOG_LVL_DEBUG);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "store");
	tk_open();
}

static void teardown(void)
{
	tk_close();
	ts_tmpdir_remove(fx.dir);
	while (fx.n_owned > 0)
		free(fx.owned[--fx.n_owned]);
	log_setup(stderr, LOG_LVL_WARN);
	if (fx.log)
		fclose(fx.log);
	fx.log = NULL;
}

/* Everything logged so far (caller frees). */
static char *tk_log_text(void)
{
	long n;
	char *text;

	cr_assert_eq(fflush(fx.log), 0);
	cr_assert_eq(fseek(fx.log, 0, SEEK_END), 0);
	n = ftell(fx.log);
	cr_assert_geq(n, 0);
	text = (char *)tk_alloc((size_t)n + 1);
	text[n] = '\0';
	rewind(fx.log);
	cr_assert_eq(fread(text, 1, (size_t)n, fx.log), (size_t)n);
	cr_assert_eq(fseek(fx.log, 0, SEEK_END), 0);
	return text;
}

/* Some log line holds both needles. */
static void tk_assert_logged(const char *needle1, const char *needle2)
{
	char *text = tk_log_text();
	char *save = NULL, *line;
	int found = 0;

	for (line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save))
		found = strstr(line, needle1) && strstr(line, needle2);
	cr_assert(found, "no log line names both '%s' and '%s'; log:\n%s", needle1, needle2,
		  tk_log_text());
	tk_release(text);
}

/* The host part of tmp names: gethostname with '.' and '/' made '_'. */
static void tk_host(char *buf, size_t size)
{
	cr_assert_eq(gethostname(buf, size), 0);
	buf[size - 1] = '\0';
	for (char *p = buf; *p; p++)
		if (*p == '.' || *p == '/')
			*p = '_';
}

/* A PID no process has right now (scanned down from pid_max). */
static pid_t tk_free_pid(void)
{
	long pid_max = 32768;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");

	if (f) {
		if (fscanf(f, "%ld", &pid_max) != 1)
			pid_max = 32768;
		fclose(f);
	}
	for (long pid = pid_max - 1; pid > 300; pid--)
		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
			return (pid_t)pid;
	cr_assert_fail("no free PID below %ld", pid_max);
	return -1;
}

static void tk_touch_tmp(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/tmp/%s", fx.dir, name);
	tk_write_file(path, "partial", 7);
}

static int tk_tmp_exists(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/tmp/%s", fx.dir, name);
	return access(path, F_OK) == 0;
}

/* ---- objects ---- */

struct tk_obj {
	uint8_t hash[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	char path[192]; /* built here, not by store_object_path */
	uint8_t *plain;
	size_t len;
	struct store_object_info info; /* as store_put reported it */
};

/* Puts plain (owned by the object from now on) and checks what put reported. */
static struct tk_obj tk_put(uint8_t *plain, size_t len, int flags)
{
	struct tk_obj o = { .plain = plain, .len = len };

	hash_sha256(plain, len, o.hash);
	hash_to_hex(o.hash, o.hex);
	snprintf(o.path, sizeof(o.path), "%s/chunks/%.2s/%.2s/%s", fx.dir, o.hex, o.hex + 2, o.hex);
	memset(&o.info, 0xEE, sizeof(o.info));
	OK(store_put(fx.st, o.hash, plain, len, flags, &o.info));
	cr_assert(o.info.codec <= CODEC_ZSTD_PLANES, "codec %u", o.info.codec);
	cr_assert_eq(o.info.plain_len, len);
	if (o.info.codec == CODEC_RAW)
		cr_assert_eq(o.info.stored_len, len);
	return o;
}

static void tk_free(struct tk_obj *o)
{
	tk_release(o->plain);
	o->plain = NULL;
}

/* Drops the object's pages from the page cache, so that store_load reads it
 * with O_DIRECT. */
static void tk_evict_pages(const struct tk_obj *o)
{
	int fd = open(o->path, O_RDONLY);

	cr_assert_geq(fd, 0, "%s: %s", o->path, strerror(errno));
	cr_assert_eq(fdatasync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

/* How many of the object's pages are in the page cache (mincore). */
static size_t tk_cached_pages(const struct tk_obj *o)
{
	int fd = open(o->path, O_RDONLY);
	struct stat sb;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n, cached = 0;
	unsigned char *vec;
	void *map;

	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &sb), 0);
	n = ((size_t)sb.st_size + page - 1) / page;
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	vec = tk_alloc(n);
	cr_assert_eq(mincore(map, (size_t)sb.st_size, vec), 0);
	for (size_t i = 0; i < n; i++)
		cached += vec[i] & 1;
	tk_release(vec);
	munmap(map, (size_t)sb.st_size);
	close(fd);
	return cached;
}

/* store_load hands out exactly the plain bytes, with its pages cached (a
 * buffered read) and not (O_DIRECT). */
static void tk_assert_load_ok(const struct tk_obj *o)
{
	for (int cold = 0; cold < 2; cold++) {
		struct store_chunk c;

		if (cold)
			tk_evict_pages(o);
		OK(store_load(fx.st, o->hash, o->len, &c));
		cr_assert_eq(c.len, o->len);
		cr_assert_not_null(c.plain);
		if (o->len)
			cr_assert_arr_eq(c.plain, o->plain, o->len, "store_load returned other bytes");
		store_chunk_free(&c);
		cr_assert_null(c.image);
		cr_assert_null(c.decoded);
	}
}

/* store_load fails with -EIO, cached or not, and logs a line naming the chunk;
 * it hands out no buffer. */
static void tk_assert_load_eio(const struct tk_obj *o, const char *what)
{
	for (int cold = 0; cold < 2; cold++) {
		struct store_chunk c;
		int rc;

		if (cold)
			tk_evict_pages(o);
		rc = store_load(fx.st, o->hash, o->len + 16, &c);
		cr_assert_eq(rc, -EIO, "%s (%s): store_load returned %d (%s), expected -EIO", what,
			     cold ? "not cached" : "cached", rc, strerror(-rc));
		cr_assert(!c.image && !c.decoded && !c.plain, "%s: store_load left a buffer", what);
		tk_assert_logged(o->hex, "corrupt");
	}
}

/* store_get returns exactly the plain bytes (into a buffer with slack after
 * it); so does store_load. */
static void tk_assert_get_ok(const struct tk_obj *o)
{
	size_t cap = o->len + 16, got = (size_t)-1;
	uint8_t *buf = tk_alloc(cap);

	memset(buf, 0xA5, cap);
	OK(store_get(fx.st, o->hash, buf, cap, &got));
	cr_assert_eq(got, o->len);
	if (o->len)
		cr_assert_arr_eq(buf, o->plain, o->len, "store_get returned other bytes");
	for (size_t i = o->len; i < cap; i++)
		cr_assert_eq(buf[i], 0xA5, "store_get wrote past the plain length");
	tk_release(buf);
	tk_assert_load_ok(o);
}

/* store_get fails with -EIO and logs a line naming the chunk. */
static void tk_assert_get_eio(const struct tk_obj *o, const char *what)
{
	size_t cap = o->len + 16, got = 12345;
	uint8_t *buf = tk_alloc(cap);
	int rc = store_get(fx.st, o->hash, buf, cap, &got);

	cr_assert_eq(rc, -EIO, "%s: store_get returned %d (%s), expected -EIO", what, rc,
		     strerror(-rc));
	cr_assert_eq(got, 12345, "%s: store_get set *len on failure", what);
	tk_assert_logged(o->hex, "corrupt");
	tk_release(buf);
	tk_assert_load_eio(o, what);
}

static uint8_t *tk_object_bytes(const struct tk_obj *o, size_t *len)
{
	return tk_read_file(o->path, len);
}

static void tk_set_object_bytes(const struct tk_obj *o, const uint8_t *bytes, size_t len)
{
	tk_write_file(o->path, bytes, len);
}

/* ---- the header, parsed from bytes as docs/FORMAT.md lays it out ---- */

static uint64_t tk_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void tk_put_le(uint8_t *p, int n, uint64_t v)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct tk_header {
	uint8_t magic[8];
	uint64_t version, codec, reserved, header_len, plain_len, payload_len, crc, reserved2;
	uint8_t hash[HASH_LEN];
};

/* The header length of format 2, from docs/FORMAT.md (not from store.h, so
 * that the format is checked, not the store against itself). */
#define TK_HDR 72

static struct tk_header tk_parse_header(const uint8_t *b)
{
	struct tk_header h;

	memcpy(h.magic, b, 8);
	h.version = tk_le(b + 8, 2);
	h.codec = b[10];
	h.reserved = b[11];
	h.header_len = tk_le(b + 12, 4);
	h.plain_len = tk_le(b + 16, 8);
	h.payload_len = tk_le(b + 24, 8);
	memcpy(h.hash, b + 32, HASH_LEN);
	h.crc = tk_le(b + 64, 4);
	h.reserved2 = tk_le(b + 68, 4);
	return h;
}

/* The object file is a valid header for o, then payload_len bytes. Returns
 * the header. */
static struct tk_header tk_assert_object_file(const struct tk_obj *o, uint8_t **bytes_out,
					      size_t *len_out)
{
	size_t len;
	uint8_t *b = tk_object_bytes(o, &len);
	struct tk_header h;

	cr_assert_geq(len, TK_HDR, "object of %zu bytes has no whole header", len);
	h = tk_parse_header(b);
	cr_assert_arr_eq(h.magic, "CKPTCHNK", 8, "magic");
	cr_assert_eq(h.version, 2, "format version");
	cr_assert_eq(h.codec, o->info.codec, "codec byte");
	cr_assert_eq(h.reserved, 0, "reserved byte 11");
	cr_assert_eq(h.header_len, TK_HDR, "header length");
	cr_assert_eq(h.plain_len, o->len, "plain length");
	cr_assert_eq(h.payload_len, o->info.stored_len, "payload length");
	cr_assert_eq(len, TK_HDR + h.payload_len, "file size vs header + payload length");
	cr_assert_arr_eq(h.hash, o->hash, HASH_LEN, "hash in the header");
	cr_assert_eq(h.crc, crc32c_sw(0, b + TK_HDR, h.payload_len),
		     "CRC-32C in the header vs the payload's (table version)");
	cr_assert_eq(h.reserved2, 0, "reserved bytes 68-71");
	if (bytes_out) {
		*bytes_out = b;
		*len_out = len;
	} else {
		tk_release(b);
	}
	return h;
}

/* Rewrites the object with one change made by edit(bytes, &len). */
static void tk_corrupt(const struct tk_obj *o, void (*edit)(uint8_t *b, size_t *len, uint64_t arg),
		       uint64_t arg)
{
	size_t len;
	uint8_t *b = tk_object_bytes(o, &len);

	edit(b, &len, arg);
	tk_set_object_bytes(o, b, len);
	tk_release(b);
}

static void tk_edit_flip(uint8_t *b, size_t *len, uint64_t off)
{
	cr_assert_lt(off, *len);
	b[off] ^= 0x5A;
}

static void tk_edit_truncate(uint8_t *b, size_t *len, uint64_t new_len)
{
	cr_assert_leq(new_len, *len);
	*len = new_len;
}

static void tk_edit_version(uint8_t *b, size_t *len, uint64_t v) { tk_put_le(b + 8, 2, v); }
static void tk_edit_codec(uint8_t *b, size_t *len, uint64_t v) { b[10] = (uint8_t)v; }
static void tk_edit_header_len(uint8_t *b, size_t *len, uint64_t v) { tk_put_le(b + 12, 4, v); }
static void tk_edit_plain_len(uint8_t *b, size_t *len, uint64_t v) { tk_put_le(b + 16, 8, v); }
static void tk_edit_payload_len(uint8_t *b, size_t *len, uint64_t v) { tk_put_le(b + 24, 8, v); }

/* ---- round trips ---- */

Test(store, empty_object_round_trips_as_a_bare_header, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(tk_alloc(0), 0, 0);
	struct store_object_info info;
	size_t got = 99;

	cr_assert_str_eq(o.hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	cr_assert_eq(o.info.codec, CODEC_RAW);
	cr_assert_eq(o.info.stored_len, 0);
	tk_assert_object_file(&o, NULL, NULL);
	tk_assert_get_ok(&o);
	OK(store_get(fx.st, o.hash, NULL, 0, &got)); /* cap 0 is enough */
	cr_assert_eq(got, 0);
	OK(store_stat(fx.st, o.hash, &info));
	cr_assert_eq(info.codec, CODEC_RAW);
	cr_assert_eq(info.plain_len, 0);
	cr_assert_eq(info.stored_len, 0);
	tk_free(&o);
}

Test(store, one_byte_round_trips_raw, .init = setup, .fini = teardown)
{
	uint8_t *b = tk_alloc(1);
	struct tk_obj o;
	uint8_t *bytes;
	size_t len;

	b[0] = 0x42;
	o = tk_put(b, 1, 0);
	cr_assert_eq(o.info.codec, CODEC_RAW);
	tk_assert_object_file(&o, &bytes, &len);
	cr_assert_eq(len, TK_HDR + 1);
	cr_assert_eq(bytes[TK_HDR], 0x42, "raw payload is the plain byte");
	tk_assert_get_ok(&o);
	tk_release(bytes);
	tk_free(&o);
}

Test(store, four_kib_random_round_trips_raw, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 1), 4 * KiB, 0);
	uint8_t *bytes;
	size_t len;

	cr_assert_eq(o.info.codec, CODEC_RAW);
	tk_assert_object_file(&o, &bytes, &len);
	cr_assert_arr_eq(bytes + TK_HDR, o.plain, o.len, "raw payload is the plain bytes");
	tk_assert_get_ok(&o);
	tk_release(bytes);
	tk_free(&o);
}

Test(store, one_mib_random_is_stored_raw_byte_for_byte, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(MiB, 2), MiB, 0);
	struct store_object_info info;
	uint8_t *bytes;
	size_t len;

	cr_assert_eq(o.info.codec, CODEC_RAW);
	tk_assert_object_file(&o, &bytes, &len);
	cr_assert_eq(len, TK_HDR + MiB);
	cr_assert_arr_eq(bytes + TK_HDR, o.plain, MiB, "raw payload is the plain bytes");
	OK(store_stat(fx.st, o.hash, &info));
	cr_assert_eq(info.codec, CODEC_RAW);
	cr_assert_eq(info.plain_len, MiB);
	cr_assert_eq(info.stored_len, MiB);
	tk_assert_get_ok(&o);
	tk_release(bytes);
	tk_free(&o);
}

Test(store, one_mib_compressible_is_stored_lz4_and_smaller, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(MiB, 3), MiB, 0);
	struct store_object_info info;
	struct stat sb;
	uint8_t *bytes, *decoded;
	size_t len;
	int n;

	cr_assert_eq(o.info.codec, CODEC_LZ4);
	cr_assert_lt(o.info.stored_len, MiB);
	cr_assert_eq(stat(o.path, &sb), 0);
	cr_assert_lt((size_t)sb.st_size, MiB, "object file of %zu bytes for %zu plain bytes",
		     (size_t)sb.st_size, MiB);
	OK(store_stat(fx.st, o.hash, &info));
	cr_assert_eq(info.codec, 1, "store_stat codec");
	cr_assert_eq(info.plain_len, MiB);
	cr_assert_eq(info.stored_len, (uint64_t)sb.st_size - TK_HDR, "store_stat stored_len");
	cr_assert_eq(info.stored_len, o.info.stored_len);
	tk_assert_object_file(&o, &bytes, &len);
	/* The payload is one LZ4 block that decodes to exactly the plain length. */
	decoded = tk_alloc(MiB);
	n = LZ4_decompress_safe((const char *)bytes + TK_HDR, (char *)decoded, (int)(len - TK_HDR),
				(int)MiB);
	cr_assert_eq(n, (int)MiB, "payload decodes with plain LZ4 to %d bytes", n);
	cr_assert_arr_eq(decoded, o.plain, MiB);
	tk_assert_get_ok(&o);
	tk_release(decoded);
	tk_release(bytes);
	tk_free(&o);
}

Test(store, object_lands_at_chunks_ab_cd_hex_and_tmp_is_left_empty, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(5000, 4), 5000, 0);
	char path[256];
	struct stat sb;

	cr_assert_eq(stat(o.path, &sb), 0, "no object at %s", o.path);
	cr_assert(S_ISREG(sb.st_mode));
	cr_assert_eq(sb.st_mode & 0222, 0, "objects are immutable: mode %o", sb.st_mode & 07777);
	store_object_path(fx.st, o.hash, path, sizeof(path));
	cr_assert_str_eq(path, o.path);
	cr_assert_str_eq(store_root(fx.st), fx.dir);
	cr_assert_eq(tk_count_files("chunks"), 1);
	cr_assert_eq(tk_count_files("tmp"), 0);
	tk_free(&o);
}

Test(store, header_fields_match_the_format_byte_for_byte, .init = setup, .fini = teardown)
{
	/* 0x010203 plain bytes: each byte of the length field is distinct, so a
	 * byte-order mistake shows. */
	size_t plain_len = 0x010203;
	struct tk_obj raw = tk_put(ts_random(plain_len, 5), plain_len, 0);
	struct tk_obj lz4 = tk_put(tk_text(plain_len, 5), plain_len, 0);
	static const uint8_t fixed[16] = { 'C', 'K', 'P', 'T', 'C', 'H', 'N', 'K', 0x02, 0x00,
					   0x00, 0x00, 0x48, 0x00, 0x00, 0x00 };
	static const uint8_t plain_le[8] = { 0x03, 0x02, 0x01, 0, 0, 0, 0, 0 };
	uint8_t payload_le[8];
	uint8_t *b;
	size_t len;

	cr_assert_eq(raw.info.codec, CODEC_RAW);
	tk_assert_object_file(&raw, &b, &len);
	cr_assert_arr_eq(b, fixed, 16, "bytes 0-15 of a raw object");
	cr_assert_arr_eq(b + 16, plain_le, 8, "plain length, little-endian");
	cr_assert_arr_eq(b + 24, plain_le, 8, "payload length of a raw object, little-endian");
	cr_assert_arr_eq(b + 32, raw.hash, HASH_LEN);
	tk_release(b);

	cr_assert_eq(lz4.info.codec, CODEC_LZ4);
	tk_assert_object_file(&lz4, &b, &len);
	cr_assert_arr_eq(b, fixed, 10, "bytes 0-9 of an LZ4 object");
	cr_assert_eq(b[10], 1, "codec byte of an LZ4 object");
	cr_assert_eq(b[11], 0);
	cr_assert_arr_eq(b + 12, fixed + 12, 4);
	cr_assert_arr_eq(b + 16, plain_le, 8);
	tk_put_le(payload_le, 8, len - TK_HDR);
	cr_assert_arr_eq(b + 24, payload_le, 8, "payload length of an LZ4 object");
	cr_assert_arr_eq(b + 32, lz4.hash, HASH_LEN);
	tk_release(b);
	tk_free(&raw);
	tk_free(&lz4);
}

Test(store, putting_the_same_object_twice_is_harmless, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(300 * KiB, 6), 300 * KiB, 0);
	struct store_object_info again;
	uint8_t *before, *after;
	size_t before_len, after_len;

	before = tk_object_bytes(&o, &before_len);
	OK(store_put(fx.st, o.hash, o.plain, o.len, 0, &again));
	OK(store_put(fx.st, o.hash, o.plain, o.len, STORE_SYNC, NULL));
	cr_assert_eq(again.codec, o.info.codec);
	cr_assert_eq(again.stored_len, o.info.stored_len);
	after = tk_object_bytes(&o, &after_len);
	cr_assert_eq(after_len, before_len);
	cr_assert_arr_eq(after, before, before_len, "the object changed when put again");
	cr_assert_eq(tk_count_files("chunks"), 1);
	cr_assert_eq(tk_count_files("tmp"), 0);
	tk_assert_get_ok(&o);
	tk_release(before);
	tk_release(after);
	tk_free(&o);
}

Test(store, putting_again_over_a_corrupt_object_repairs_it, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(10000, 7), 10000, 0);

	tk_corrupt(&o, tk_edit_flip, TK_HDR + 5000);
	tk_assert_get_eio(&o, "flipped byte");
	OK(store_put(fx.st, o.hash, o.plain, o.len, 0, NULL));
	tk_assert_object_file(&o, NULL, NULL);
	tk_assert_get_ok(&o);
	tk_free(&o);
}

Test(store, sync_put_and_store_sync_make_a_readable_object, .init = setup, .fini = teardown)
{
	struct tk_obj synced = tk_put(ts_random(MiB, 8), MiB, STORE_SYNC);
	struct tk_obj later = tk_put(tk_text(MiB, 8), MiB, 0);
	uint8_t missing[HASH_LEN] = { 0x77 };

	tk_assert_object_file(&synced, NULL, NULL);
	tk_assert_get_ok(&synced);
	OK(store_sync(fx.st, later.hash));
	OK(store_sync(fx.st, synced.hash));
	OK(store_syncfs(fx.st));
	tk_assert_get_ok(&later);
	cr_assert_lt(store_sync(fx.st, missing), 0, "store_sync of a missing object succeeded");
	cr_assert_eq(tk_count_files("tmp"), 0);
	tk_free(&synced);
	tk_free(&later);
}

Test(store, failed_put_returns_the_error_and_leaves_no_tmp_file, .init = setup, .fini = teardown)
{
	uint8_t *plain = ts_random(4 * KiB, 28);
	uint8_t hash[HASH_LEN];
	char hex[HASH_HEX_LEN + 1], shard[128];
	struct tk_obj o;
	int rc;

	hash_sha256(plain, 4 * KiB, hash);
	hash_to_hex(hash, hex);
	/* A file where the shard directory chunks/ab must go. */
	snprintf(shard, sizeof(shard), "%s/chunks/%.2s", fx.dir, hex);
	tk_write_file(shard, "x", 1);
	rc = store_put(fx.st, hash, plain, 4 * KiB, 0, NULL);
	cr_assert_lt(rc, 0, "store_put over a blocked shard returned %d", rc);
	cr_assert_eq(tk_count_files("tmp"), 0, "a failed put left its tmp file");
	tk_assert_logged(hex, "write chunk");
	cr_assert_eq(unlink(shard), 0);
	o = tk_put(plain, 4 * KiB, 0);
	tk_assert_get_ok(&o);
	tk_free(&o);
}

/* ---- missing, truncated and corrupt objects ---- */

Test(store, missing_object_is_enoent_for_the_cache_to_fetch, .init = setup, .fini = teardown)
{
	struct tk_obj o = { .plain = NULL, .len = 100 };
	struct store_object_info info;

	tk_fill_random(o.hash, HASH_LEN, 9);
	hash_to_hex(o.hash, o.hex);
	{
		uint8_t buf[128];
		size_t got = 7;

		FAILS(store_get(fx.st, o.hash, buf, sizeof(buf), &got), ENOENT);
		cr_assert_eq(got, 7);
	}
	FAILS(store_stat(fx.st, o.hash, &info), ENOENT);
	/* Its shard directories exist, the object does not. */
	{
		struct tk_obj other = tk_put(ts_random(10, 9), 10, 0);

		memcpy(o.hash, other.hash, 2);
		hash_to_hex(o.hash, o.hex);
		FAILS(store_get(fx.st, o.hash, NULL, 0, &(size_t){ 0 }), ENOENT);
		tk_free(&other);
	}
}

Test(store, flipped_payload_byte_of_raw_object_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(MiB, 10), MiB, 0);
	static const size_t at[] = { 0, 1, MiB / 2, MiB - 1 };

	cr_assert_eq(o.info.codec, CODEC_RAW);
	cr_assert_eq(store_local_check(fx.st), STORE_CHECK_CRC, "the default check of local reads");
	for (int sha = 0; sha < 2; sha++) { /* S4: the CRC is checked either way */
		store_set_local_check(fx.st, sha ? STORE_CHECK_SHA : STORE_CHECK_CRC);
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			tk_corrupt(&o, tk_edit_flip, TK_HDR + at[i]);
			tk_assert_get_eio(&o, "raw payload byte flipped");
			tk_assert_logged(o.hex, "payload does not match its CRC-32C");
			tk_corrupt(&o, tk_edit_flip, TK_HDR + at[i]); /* restored */
			tk_assert_get_ok(&o);
		}
	}
	tk_free(&o);
}

static int tk_upload_check(const struct tk_obj *o, bool *hashed);

/* Rewrites a format-2 object as format 1 (docs/FORMAT.md: a 64-byte header,
 * no CRC), as an older ckptfs wrote it. */
static void tk_make_format_1(const struct tk_obj *o)
{
	size_t len;
	uint8_t *b = tk_object_bytes(o, &len);
	uint8_t *v1 = tk_alloc(len - TK_HDR + 64);

	memcpy(v1, b, 64);
	tk_put_le(v1 + 8, 2, 1);
	tk_put_le(v1 + 12, 4, 64);
	memcpy(v1 + 64, b + TK_HDR, len - TK_HDR);
	tk_set_object_bytes(o, v1, len - TK_HDR + 64);
	tk_release(b);
	tk_release(v1);
}

/* S4: objects of format 1 (no CRC) stay readable, and are re-hashed. */
Test(store, format_1_objects_are_read_and_checked_by_their_hash, .init = setup, .fini = teardown)
{
	struct tk_obj raw = tk_put(ts_random(64 * KiB, 19), 64 * KiB, 0);
	struct tk_obj lz4 = tk_put(tk_text(300 * KiB, 19), 300 * KiB, 0);
	struct tk_obj *objs[] = { &raw, &lz4 };
	struct store_object_info info;
	bool hashed = true;

	for (size_t k = 0; k < 2; k++) {
		struct tk_obj *o = objs[k];
		tk_make_format_1(o);
		OK(store_stat(fx.st, o->hash, &info));
		cr_assert_eq(info.header_len, 64);
		cr_assert_not(info.has_crc);
		cr_assert_eq(info.stored_len, o->info.stored_len);
		tk_assert_get_ok(o);
		OK(tk_upload_check(o, &hashed));
		cr_assert_not(hashed, "a rewritten object was taken as hashed");
		tk_corrupt(o, tk_edit_flip, 64 + 9);
		tk_assert_get_eio(o, "format 1 payload byte flipped");
		if (o->info.codec == CODEC_RAW)
			tk_assert_logged(o->hex, "bytes do not match their hash");
		cr_assert_eq(tk_upload_check(o, &hashed), -EIO);
	}
	tk_free(&raw);
	tk_free(&lz4);
}

/* S4: the CRC stands for the bytes written, not for their name. A payload
 * changed and given a matching CRC is refused wherever SHA-256 is the check:
 * an object image from BACKING (store_object_check), and local reads and
 * uploads under -o verify=sha256. */
Test(store, a_forged_crc_is_caught_by_sha256, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(64 * KiB, 20), 64 * KiB, 0);
	size_t len, plain_len;
	uint8_t *b = tk_object_bytes(&o, &len);
	uint8_t *plain = tk_alloc(o.len);
	const char *why = NULL;
	bool hashed = true;

	OK(store_object_check(o.hash, b, len, plain, o.len, &plain_len, &why));
	b[TK_HDR + 100] ^= 0x01;
	tk_put_le(b + 64, 4, crc32c(0, b + TK_HDR, len - TK_HDR));
	cr_assert_eq(store_object_check(o.hash, b, len, plain, o.len, &plain_len, &why), -EIO,
		     "a forged image from BACKING passed");
	cr_assert_str_eq(why, "bytes do not match their hash");
	tk_set_object_bytes(&o, b, len);
	store_set_local_check(fx.st, STORE_CHECK_SHA);
	tk_assert_get_eio(&o, "forged payload, verify=sha256");
	tk_assert_logged(o.hex, "bytes do not match their hash");
	cr_assert_eq(tk_upload_check(&o, &hashed), -EIO, "a forged object passed for upload");
	tk_release(b);
	tk_release(plain);
	tk_free(&o);
}

Test(store, flipped_payload_byte_of_lz4_object_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(MiB, 11), MiB, 0);
	size_t stored = o.info.stored_len;
	const size_t at[] = { 0, 1, stored / 3, stored / 2, stored - 2, stored - 1 };

	cr_assert_eq(o.info.codec, CODEC_LZ4);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		tk_corrupt(&o, tk_edit_flip, TK_HDR + at[i]);
		tk_assert_get_eio(&o, "LZ4 payload byte flipped");
		tk_corrupt(&o, tk_edit_flip, TK_HDR + at[i]);
		tk_assert_get_ok(&o);
	}
	tk_free(&o);
}

Test(store, truncated_payload_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj raw = tk_put(ts_random(64 * KiB, 12), 64 * KiB, 0);
	struct tk_obj lz4 = tk_put(tk_text(256 * KiB, 12), 256 * KiB, 0);
	struct tk_obj *objs[] = { &raw, &lz4 };

	cr_assert_eq(lz4.info.codec, CODEC_LZ4);
	for (size_t k = 0; k < 2; k++) {
		struct tk_obj *o = objs[k];
		size_t full = TK_HDR + o->info.stored_len;
		const size_t cuts[] = { full - 1, full - 100, TK_HDR + o->info.stored_len / 2,
					TK_HDR + 1, TK_HDR };
		uint8_t *orig;
		size_t len;

		orig = tk_object_bytes(o, &len);
		for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
			tk_corrupt(o, tk_edit_truncate, cuts[i]);
			tk_assert_get_eio(o, "truncated payload");
			tk_assert_logged(o->hex, "truncated payload");
			tk_set_object_bytes(o, orig, len);
		}
		tk_assert_get_ok(o);
		tk_release(orig);
	}
	tk_free(&raw);
	tk_free(&lz4);
}

Test(store, truncated_header_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 13), 4 * KiB, 0);
	struct store_object_info info;
	static const size_t cuts[] = { 71, 64, 63, 32, 16, 1, 0 };

	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		tk_corrupt(&o, tk_edit_truncate, cuts[i]);
		tk_assert_get_eio(&o, "truncated header");
		tk_assert_logged(o.hex, "truncated header");
		FAILS(store_stat(fx.st, o.hash, &info), EIO);
	}
	tk_free(&o);
}

Test(store, wrong_magic_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 14), 4 * KiB, 0);
	struct store_object_info info;

	for (uint64_t at = 0; at < 8; at++) {
		tk_corrupt(&o, tk_edit_flip, at);
		tk_assert_get_eio(&o, "magic");
		tk_assert_logged(o.hex, "bad magic");
		FAILS(store_stat(fx.st, o.hash, &info), EIO);
		tk_corrupt(&o, tk_edit_flip, at);
	}
	tk_assert_get_ok(&o);
	tk_free(&o);
}

Test(store, wrong_version_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 15), 4 * KiB, 0);
	struct store_object_info info;
	/* 0x0200 is version 2 written big-endian. */
	static const uint64_t versions[] = { 0, 3, 0x0200, 0xFFFF };

	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		tk_corrupt(&o, tk_edit_version, versions[i]);
		tk_assert_get_eio(&o, "version");
		tk_assert_logged(o.hex, "version");
		FAILS(store_stat(fx.st, o.hash, &info), EIO);
	}
	/* version 1 has a 64-byte header: a 72-byte one that says 1 is refused */
	tk_corrupt(&o, tk_edit_version, 1);
	tk_assert_get_eio(&o, "version 1 with a version 2 header");
	tk_assert_logged(o.hex, "header length");
	tk_corrupt(&o, tk_edit_version, 2);
	tk_assert_get_ok(&o);
	tk_free(&o);
}

Test(store, wrong_header_length_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 16), 4 * KiB, 0);
	struct store_object_info info;
	static const uint64_t lens[] = { 0, 63, 64, 65, 71, 73, 128, 0x40000000 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		tk_corrupt(&o, tk_edit_header_len, lens[i]);
		tk_assert_get_eio(&o, "header length");
		FAILS(store_stat(fx.st, o.hash, &info), EIO);
	}
	tk_free(&o);
}

Test(store, header_naming_another_hash_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj a = tk_put(ts_random(4 * KiB, 17), 4 * KiB, 0);
	struct tk_obj b = tk_put(ts_random(4 * KiB, 18), 4 * KiB, 0);
	struct store_object_info info;
	uint8_t *bytes;
	size_t len;

	/* One bit of the hash field changed. */
	tk_corrupt(&a, tk_edit_flip, 32 + 31);
	tk_assert_get_eio(&a, "hash field");
	tk_assert_logged(a.hex, "another chunk");
	FAILS(store_stat(fx.st, a.hash, &info), EIO);
	/* A whole valid object of another chunk under a's name. */
	bytes = tk_object_bytes(&b, &len);
	tk_set_object_bytes(&a, bytes, len);
	tk_assert_get_eio(&a, "b's object under a's name");
	FAILS(store_stat(fx.st, a.hash, &info), EIO);
	tk_assert_get_ok(&b);
	tk_release(bytes);
	tk_free(&a);
	tk_free(&b);
}

Test(store, wrong_codec_or_lengths_in_header_are_eio, .init = setup, .fini = teardown)
{
	struct tk_obj raw = tk_put(ts_random(4 * KiB, 19), 4 * KiB, 0);
	struct tk_obj lz4 = tk_put(tk_text(64 * KiB, 19), 64 * KiB, 0);
	struct tk_obj *objs[] = { &raw, &lz4 };

	cr_assert_eq(lz4.info.codec, CODEC_LZ4);
	for (size_t k = 0; k < 2; k++) {
		struct tk_obj *o = objs[k];
		uint8_t *orig;
		size_t len;

		orig = tk_object_bytes(o, &len);
		/* The other codec, and an unknown one. */
		tk_corrupt(o, tk_edit_codec, o->info.codec == CODEC_RAW ? CODEC_LZ4 : CODEC_RAW);
		tk_assert_get_eio(o, "other codec");
		tk_set_object_bytes(o, orig, len);
		tk_corrupt(o, tk_edit_codec, 2);
		tk_assert_get_eio(o, "unknown codec");
		tk_set_object_bytes(o, orig, len);
		/* Plain length off by one either way. */
		tk_corrupt(o, tk_edit_plain_len, o->len - 1);
		tk_assert_get_eio(o, "plain length - 1");
		tk_set_object_bytes(o, orig, len);
		tk_corrupt(o, tk_edit_plain_len, o->len + 1);
		tk_assert_get_eio(o, "plain length + 1");
		tk_set_object_bytes(o, orig, len);
		/* Payload length off by one either way. */
		tk_corrupt(o, tk_edit_payload_len, o->info.stored_len - 1);
		tk_assert_get_eio(o, "payload length - 1");
		tk_set_object_bytes(o, orig, len);
		tk_corrupt(o, tk_edit_payload_len, o->info.stored_len + 1);
		tk_assert_get_eio(o, "payload length + 1");
		tk_set_object_bytes(o, orig, len);
		tk_assert_get_ok(o);
		tk_release(orig);
	}
	tk_free(&raw);
	tk_free(&lz4);
}

/* A corrupt header must not make store_get allocate what it claims: a payload
 * length far past the file's size is corruption (-EIO), not -ENOMEM, and not a
 * multi-GiB buffer kept for the rest of the thread's life. */
/* store_get in a child process, so that an abort (ASan refuses absurd
 * allocations) fails the test instead of ending it before teardown. */
static void tk_assert_get_eio_in_child(const struct tk_obj *o, const char *what)
{
	int fds[2], status, rc = 0;
	pid_t child;
	ssize_t n;

	cr_assert_eq(pipe(fds), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		uint8_t buf[8 * KiB];
		size_t got;

		close(fds[0]);
		rc = store_get(fx.st, o->hash, buf, sizeof(buf), &got);
		_exit(write(fds[1], &rc, sizeof(rc)) == sizeof(rc) ? 0 : 3);
	}
	close(fds[1]);
	n = read(fds[0], &rc, sizeof(rc));
	close(fds[0]);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(n == sizeof(rc) && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "%s: store_get did not return (child %s %d)", what,
		  WIFSIGNALED(status) ? "killed by signal" : "exited with status",
		  WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	cr_assert_eq(rc, -EIO, "%s: store_get returned %d (%s), expected -EIO", what, rc,
		     strerror(-rc));
	tk_assert_logged(o->hex, "corrupt");
}

Test(store, absurd_payload_length_in_header_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 20), 4 * KiB, 0);
	static const uint64_t lens[] = { (uint64_t)1 << 40, (uint64_t)1 << 62, UINT64_MAX };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		tk_corrupt(&o, tk_edit_payload_len, lens[i]);
		tk_assert_get_eio_in_child(&o, "absurd payload length");
	}
	tk_free(&o);
}

Test(store, cap_smaller_than_plain_length_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(4 * KiB, 21), 4 * KiB, 0);
	uint8_t *buf = tk_alloc(8 * KiB);
	size_t got = 5;

	FAILS(store_get(fx.st, o.hash, buf, 4 * KiB - 1, &got), EIO);
	cr_assert_eq(got, 5);
	tk_assert_logged(o.hex, "plain length larger than the caller expects");
	FAILS(store_get(fx.st, o.hash, buf, 0, &got), EIO);
	OK(store_get(fx.st, o.hash, buf, 4 * KiB, &got));
	cr_assert_eq(got, 4 * KiB);
	cr_assert_arr_eq(buf, o.plain, 4 * KiB);
	OK(store_get(fx.st, o.hash, buf, 8 * KiB, &got));
	cr_assert_eq(got, 4 * KiB);
	tk_release(buf);
	tk_free(&o);
}

/* ---- store_load: the read path's whole-chunk loads ---- */

Test(store, load_of_an_uncached_raw_object_leaves_the_page_cache_empty, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(3 * MiB + 123, 30), 3 * MiB + 123, 0);
	struct store_chunk c;

	cr_assert_eq(o.info.codec, CODEC_RAW);
	tk_evict_pages(&o);
	if (tk_cached_pages(&o) != 0)
		cr_skip_test("the page cache keeps the object's pages after POSIX_FADV_DONTNEED");
	OK(store_load(fx.st, o.hash, o.len, &c));
	cr_assert_eq(c.len, o.len);
	cr_assert_arr_eq(c.plain, o.plain, o.len);
	/* a raw chunk is handed out where it was read: no copy */
	cr_assert_eq((const uint8_t *)c.plain, (uint8_t *)c.image + STORE_HEADER_LEN);
	cr_assert_eq((uintptr_t)c.image % 4096, 0);
	store_chunk_free(&c);
	cr_assert_eq(tk_cached_pages(&o), 0, "the object was read through the page cache");
	tk_free(&o);
}

Test(store, load_of_a_cached_object_reads_it_from_memory, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(MiB, 31), MiB, STORE_SYNC);
	size_t pages = (64 + MiB + 4095) / 4096;
	struct store_chunk c;
	uint8_t *bytes;
	size_t len;

	bytes = tk_object_bytes(&o, &len); /* reads every page in */
	tk_release(bytes);
	cr_assert_eq(tk_cached_pages(&o), pages);
	OK(store_load(fx.st, o.hash, o.len, &c));
	cr_assert_arr_eq(c.plain, o.plain, o.len);
	store_chunk_free(&c);
	cr_assert_eq(tk_cached_pages(&o), pages, "a cached object was read around the page cache");
	tk_free(&o);
}

Test(store, load_of_an_lz4_object_hands_out_only_the_decoded_bytes, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(2 * MiB + 7, 32), 2 * MiB + 7, 0);
	struct store_chunk c;

	cr_assert_eq(o.info.codec, CODEC_LZ4);
	for (int cold = 0; cold < 2; cold++) {
		if (cold)
			tk_evict_pages(&o);
		OK(store_load(fx.st, o.hash, o.len, &c));
		cr_assert_eq(c.len, o.len);
		cr_assert_eq((const void *)c.plain, c.decoded);
		cr_assert_null(c.image, "the image is freed once decoded");
		cr_assert_arr_eq(c.plain, o.plain, o.len);
		store_chunk_free(&c);
	}
	tk_free(&o);
}

Test(store, load_of_objects_of_every_length_around_a_page_round_trips, .init = setup,
     .fini = teardown)
{
	/* object lengths around the O_DIRECT alignment: 72-byte header + payload */
	static const size_t lens[] = { 0, 1, 4096 - 72 - 1, 4096 - 72, 4096 - 72 + 1, 4096,
				       8192 - 72, 8192 - 71, 65536 + 4000 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct tk_obj o = tk_put(ts_random(lens[i] ? lens[i] : 1, 33 + i), lens[i], 0);

		tk_assert_load_ok(&o);
		tk_free(&o);
	}
}

Test(store, load_with_cap_smaller_than_the_chunk_is_eio, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(64 * KiB, 34), 64 * KiB, 0);
	struct store_chunk c;

	FAILS(store_load(fx.st, o.hash, 64 * KiB - 1, &c), EIO);
	tk_assert_logged(o.hex, "plain length larger than a chunk can be");
	FAILS(store_load(fx.st, o.hash, 4 * KiB, &c), EIO);
	tk_assert_logged(o.hex, "object larger than a chunk can be");
	cr_assert(!c.image && !c.decoded && !c.plain);
	tk_free(&o);
}

Test(store, load_of_a_missing_object_is_enoent, .init = setup, .fini = teardown)
{
	uint8_t hash[HASH_LEN];
	struct store_chunk c;

	tk_fill_random(hash, HASH_LEN, 35);
	FAILS(store_load(fx.st, hash, MiB, &c), ENOENT);
	cr_assert(!c.image && !c.decoded && !c.plain);
}

/* ---- remove ---- */

Test(store, removing_a_missing_object_succeeds, .init = setup, .fini = teardown)
{
	uint8_t hash[HASH_LEN];
	struct tk_obj o = tk_put(ts_random(100, 22), 100, 0);

	tk_fill_random(hash, HASH_LEN, 22);
	OK(store_remove(fx.st, hash)); /* no shard directory either */
	memcpy(hash, o.hash, 2);
	OK(store_remove(fx.st, hash)); /* shard exists, object does not */
	tk_assert_get_ok(&o);
	tk_free(&o);
}

Test(store, removing_an_object_makes_it_missing, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(100, 23), 100, 0);
	struct store_object_info info;

	OK(store_remove(fx.st, o.hash));
	cr_assert_neq(access(o.path, F_OK), 0);
	FAILS(store_stat(fx.st, o.hash, &info), ENOENT);
	FAILS(store_get(fx.st, o.hash, o.plain, o.len, &(size_t){ 0 }), ENOENT);
	OK(store_remove(fx.st, o.hash));
	tk_free(&o);
}

/* ---- shards are pruned with their last object (S8) ---- */

#define PRUNE_LEN 4096

/* A random buffer whose hash starts with the first `bytes` bytes of want's. */
static uint8_t *tk_random_in_shard(const uint8_t want[HASH_LEN], int bytes, uint64_t *seed)
{
	for (;; (*seed)++) {
		uint8_t *p = ts_random(PRUNE_LEN, *seed), h[HASH_LEN];

		hash_sha256(p, PRUNE_LEN, h);
		if (memcmp(h, want, bytes) == 0 && memcmp(h, want, HASH_LEN) != 0) {
			(*seed)++;
			return p;
		}
		free(p);
	}
}

static bool tk_exists(const char *fmt, const char *hex)
{
	char path[192];

	snprintf(path, sizeof(path), fmt, fx.dir, hex, hex + 2);
	return access(path, F_OK) == 0;
}

Test(store, removing_the_last_object_of_a_shard_removes_the_shard, .init = setup, .fini = teardown)
{
	uint64_t seed = 1000;
	struct tk_obj a = tk_put(ts_random(PRUNE_LEN, 999), PRUNE_LEN, 0);
	struct tk_obj b = tk_put(tk_random_in_shard(a.hash, 1, &seed), PRUNE_LEN, 0); /* chunks/ab */
	struct tk_obj c = tk_put(tk_random_in_shard(a.hash, 2, &seed), PRUNE_LEN, 0); /* chunks/ab/cd */

	OK(store_remove(fx.st, a.hash));
	cr_assert(tk_exists("%s/chunks/%.2s/%.2s", a.hex), "the shard went with an object left in it");
	OK(store_remove(fx.st, c.hash));
	cr_assert_not(tk_exists("%s/chunks/%.2s/%.2s", a.hex), "an empty shard was left behind");
	cr_assert(tk_exists("%s/chunks/%.2s", a.hex), "chunks/ab went with b still in it");
	tk_assert_get_ok(&b);
	OK(store_remove(fx.st, b.hash));
	cr_assert_not(tk_exists("%s/chunks/%.2s", b.hex), "an empty chunks/ab was left behind");
	cr_assert_eq(tk_count_files("chunks"), 0);
	/* a put into a pruned shard makes it again */
	OK(store_put(fx.st, a.hash, a.plain, a.len, STORE_SYNC, NULL));
	tk_assert_get_ok(&a);
	tk_free(&a);
	tk_free(&b);
	tk_free(&c);
}

#define PRUNE_ROUNDS 300

struct prune_thread {
	struct store *st;
	const uint8_t *plain;
	uint8_t hash[HASH_LEN];
	int failures, first_rc;
};

/* Puts and removes one object, over and over, in a shard another thread
 * also fills and empties: every put finds its shard or makes it again. */
static void *prune_put_remove(void *arg)
{
	struct prune_thread *t = arg;

	for (int i = 0; i < PRUNE_ROUNDS; i++) {
		int rc = store_put(t->st, t->hash, t->plain, PRUNE_LEN, 0, NULL);

		if (rc == 0)
			rc = store_remove(t->st, t->hash);
		if (rc != 0 && t->failures++ == 0)
			t->first_rc = rc;
	}
	return NULL;
}

Test(store, puts_racing_removals_in_one_shard_all_succeed, .init = setup, .fini = teardown)
{
	uint64_t seed = 2000;
	uint8_t *first = ts_random(PRUNE_LEN, 1999), h[HASH_LEN];
	uint8_t *second;
	struct prune_thread t[2];
	pthread_t th[2];

	hash_sha256(first, PRUNE_LEN, h);
	second = tk_random_in_shard(h, 2, &seed);
	t[0] = (struct prune_thread){ .st = fx.st, .plain = first };
	t[1] = (struct prune_thread){ .st = fx.st, .plain = second };
	for (int i = 0; i < 2; i++) {
		hash_sha256(t[i].plain, PRUNE_LEN, t[i].hash);
		cr_assert_eq(pthread_create(&th[i], NULL, prune_put_remove, &t[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(t[i].failures, 0, "thread %d: %d of %d rounds failed, the first with %s", i,
			     t[i].failures, PRUNE_ROUNDS, strerror(-t[i].first_rc));
	cr_assert_eq(tk_count_files("chunks"), 0);
	cr_assert_eq(tk_count_files("tmp"), 0, "tmp files left behind");
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(h, hex);
	cr_assert_not(tk_exists("%s/chunks/%.2s", hex), "the emptied shard was left behind");
	free(first);
	free(second);
}

/* ---- open and the tmp/ directory ---- */

Test(store, open_creates_chunks_and_tmp, .init = setup, .fini = teardown)
{
	char root[128], path[160];
	struct store *st;
	struct stat sb;

	snprintf(root, sizeof(root), "%s/fresh", fx.dir);
	cr_assert_eq(mkdir(root, 0755), 0);
	OK(store_open(root, &st));
	cr_assert_str_eq(store_root(st), root);
	snprintf(path, sizeof(path), "%s/chunks", root);
	cr_assert(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode), "no directory %s", path);
	snprintf(path, sizeof(path), "%s/tmp", root);
	cr_assert(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode), "no directory %s", path);
	store_close(st);
	OK(store_open(root, &st)); /* again, over what exists */
	store_close(st);
}

Test(store, open_fails_on_a_missing_root, .init = setup, .fini = teardown)
{
	char root[128];
	struct store *st = NULL;

	snprintf(root, sizeof(root), "%s/no/such/dir", fx.dir);
	FAILS(store_open(root, &st), ENOENT);
}

Test(store, open_removes_stale_tmp_files_of_dead_processes_of_this_host, .init = setup,
     .fini = teardown)
{
	char host[256], dead[512], live[512], other_host[512], stray[] = "README";
	char hex[HASH_HEX_LEN + 1];
	uint8_t hash[HASH_LEN];
	pid_t dead_pid = tk_free_pid();

	tk_host(host, sizeof(host));
	tk_fill_random(hash, HASH_LEN, 24);
	hash_to_hex(hash, hex);
	snprintf(dead, sizeof(dead), "%s.%s.%ld.3", hex, host, (long)dead_pid);
	snprintf(live, sizeof(live), "%s.%s.%ld.0", hex, host, (long)getpid());
	/* Another host's writer may be alive: its PIDs mean nothing here. */
	snprintf(other_host, sizeof(other_host), "%s.%sx.%ld.3", hex, host, (long)dead_pid);
	tk_close();
	tk_touch_tmp(dead);
	tk_touch_tmp(live);
	tk_touch_tmp(other_host);
	tk_touch_tmp(stray);
	tk_open();
	cr_assert_not(tk_tmp_exists(dead), "tmp/%s of dead PID %ld survived store_open", dead,
		      (long)dead_pid);
	cr_assert(tk_tmp_exists(live), "tmp/%s of this live process was removed", live);
	cr_assert(tk_tmp_exists(other_host), "tmp/%s of another host was removed", other_host);
	cr_assert(tk_tmp_exists(stray), "tmp/%s (not a tmp object name) was removed", stray);
	tk_assert_logged("removed stale", dead);
}

/* A tmp file whose writer is alive but not ours to signal (kill gives EPERM,
 * e.g. a daemon of another user over the same BACKING) is in use. */
Test(store, open_keeps_tmp_files_of_a_live_process_of_another_user, .init = setup,
     .fini = teardown)
{
	char host[256], name[512], path[640];
	char hex[HASH_HEX_LEN + 1];
	uint8_t hash[HASH_LEN];
	int status;
	pid_t child;

	if (geteuid() != 0)
		cr_skip_test("needs root to run store_open as another user");
	tk_host(host, sizeof(host));
	tk_fill_random(hash, HASH_LEN, 25);
	hash_to_hex(hash, hex);
	/* This (root) process is the live writer. */
	snprintf(name, sizeof(name), "%s.%s.%ld.0", hex, host, (long)getpid());
	tk_touch_tmp(name);
	cr_assert_eq(chmod(fx.dir, 0777), 0);
	snprintf(path, sizeof(path), "%s/tmp", fx.dir);
	cr_assert_eq(chmod(path, 0777), 0);
	snprintf(path, sizeof(path), "%s/chunks", fx.dir);
	cr_assert_eq(chmod(path, 0777), 0);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct store *st;

		if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			_exit(SKIPPED_EXIT);
		if (kill(getppid(), 0) == 0 || errno != EPERM)
			_exit(SKIPPED_EXIT);
		if (store_open(fx.dir, &st) != 0)
			_exit(2);
		store_close(st);
		_exit(0);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status), "child status %d", status);
	if (WEXITSTATUS(status) == SKIPPED_EXIT)
		cr_skip_test("cannot become uid 65534 or it may signal root");
	cr_assert_eq(WEXITSTATUS(status), 0, "store_open as uid 65534 failed");
	cr_assert(tk_tmp_exists(name),
		  "store_open (uid 65534) removed tmp/%s of live PID %ld (kill gave EPERM)", name,
		  (long)getpid());
}

/* The host part of tmp names has '.' and '/' replaced by '_' (a new UTS
 * namespace gives the child a host name with both). */
Test(store, open_matches_the_host_with_dots_and_slashes_replaced, .init = setup,
     .fini = teardown)
{
	static const char odd_host[] = "ckpt.test/host";
	char hex[HASH_HEX_LEN + 1], dead[512], other[512];
	uint8_t hash[HASH_LEN];
	pid_t dead_pid = tk_free_pid(), child;
	int status;

	tk_fill_random(hash, HASH_LEN, 26);
	hash_to_hex(hash, hex);
	snprintf(dead, sizeof(dead), "%s.ckpt_test_host.%ld.0", hex, (long)dead_pid);
	snprintf(other, sizeof(other), "%s.ckpt_test_hostx.%ld.0", hex, (long)dead_pid);
	tk_touch_tmp(dead);
	tk_touch_tmp(other);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct store *st;

		if (unshare(CLONE_NEWUTS) != 0 || sethostname(odd_host, strlen(odd_host)) != 0)
			_exit(SKIPPED_EXIT);
		if (store_open(fx.dir, &st) != 0)
			_exit(2);
		store_close(st);
		_exit(0);
	}
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status), "child status %d", status);
	if (WEXITSTATUS(status) == SKIPPED_EXIT)
		cr_skip_test("cannot set a host name in a new UTS namespace");
	cr_assert_eq(WEXITSTATUS(status), 0, "store_open under host %s failed", odd_host);
	cr_assert_not(tk_tmp_exists(dead), "tmp/%s survived a store_open on host %s", dead,
		      odd_host);
	cr_assert(tk_tmp_exists(other), "tmp/%s of another host was removed", other);
}

/* A tmp name that is already taken (a leftover of an earlier process that had
 * this PID, e.g. a daemon restarted in a container, or another store handle of
 * this process) must not make writing the object fail. */
Test(store, put_succeeds_when_its_tmp_name_is_already_taken, .init = setup, .fini = teardown)
{
	char host[256], name[512];
	uint8_t *plain = ts_random(4 * KiB, 27);
	uint8_t hash[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	struct tk_obj o;

	hash_sha256(plain, 4 * KiB, hash);
	hash_to_hex(hash, hex);
	tk_host(host, sizeof(host));
	tk_close();
	for (int n = 0; n < 4; n++) {
		snprintf(name, sizeof(name), "%s.%s.%ld.%d", hex, host, (long)getpid(), n);
		tk_touch_tmp(name);
	}
	tk_open(); /* our PID is alive: the files stay */
	cr_assert(tk_tmp_exists(name));
	o = tk_put(plain, 4 * KiB, 0);
	tk_assert_object_file(&o, NULL, NULL);
	tk_assert_get_ok(&o);
	tk_free(&o);
}

/* ---- concurrency ---- */

#define CONC_THREADS 4
#define CONC_ROUNDS 12
#define CONC_LEN (256 * KiB)

struct conc_shared {
	struct store *st;
	pthread_barrier_t barrier;
	uint8_t *plain[CONC_ROUNDS];
	uint8_t hash[CONC_ROUNDS][HASH_LEN];
};

struct conc_thread {
	struct conc_shared *sh;
	int id;
	int failures;
	int first_rc;
};

/* Every thread puts the object of round r at the same moment, so they also
 * race to create its shard directories. */
static void *conc_put_same(void *arg)
{
	struct conc_thread *t = arg;
	struct conc_shared *sh = t->sh;

	for (int r = 0; r < CONC_ROUNDS; r++) {
		int rc;

		pthread_barrier_wait(&sh->barrier);
		rc = store_put(sh->st, sh->hash[r], sh->plain[r], CONC_LEN,
			       (t->id + r) % 4 == 0 ? STORE_SYNC : 0, NULL);
		if (rc != 0) {
			if (!t->failures)
				t->first_rc = rc;
			t->failures++;
		}
	}
	return NULL;
}

Test(store, concurrent_puts_of_the_same_object_leave_one_valid_object, .init = setup,
     .fini = teardown)
{
	struct conc_shared sh = { .st = fx.st };
	struct conc_thread t[CONC_THREADS];
	pthread_t th[CONC_THREADS];

	for (int r = 0; r < CONC_ROUNDS; r++) {
		sh.plain[r] = r % 2 ? tk_text(CONC_LEN, 100 + r) : ts_random(CONC_LEN, 100 + r);
		hash_sha256(sh.plain[r], CONC_LEN, sh.hash[r]);
	}
	cr_assert_eq(pthread_barrier_init(&sh.barrier, NULL, CONC_THREADS), 0);
	for (int i = 0; i < CONC_THREADS; i++) {
		t[i] = (struct conc_thread){ .sh = &sh, .id = i };
		cr_assert_eq(pthread_create(&th[i], NULL, conc_put_same, &t[i]), 0);
	}
	for (int i = 0; i < CONC_THREADS; i++)
		cr_assert_eq(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&sh.barrier);
	for (int i = 0; i < CONC_THREADS; i++)
		cr_assert_eq(t[i].failures, 0, "thread %d: %d puts failed, the first with %d (%s)", i,
			     t[i].failures, t[i].first_rc, strerror(-t[i].first_rc));
	cr_assert_eq(tk_count_files("chunks"), CONC_ROUNDS, "one object per distinct chunk");
	cr_assert_eq(tk_count_files("tmp"), 0, "tmp files left behind");
	for (int r = 0; r < CONC_ROUNDS; r++) {
		struct tk_obj o = { .plain = sh.plain[r], .len = CONC_LEN };

		memcpy(o.hash, sh.hash[r], HASH_LEN);
		hash_to_hex(o.hash, o.hex);
		snprintf(o.path, sizeof(o.path), "%s/chunks/%.2s/%.2s/%s", fx.dir, o.hex, o.hex + 2,
			 o.hex);
		OK(store_stat(fx.st, o.hash, &o.info));
		cr_assert_eq(o.info.codec, r % 2 ? CODEC_LZ4 : CODEC_RAW);
		tk_assert_object_file(&o, NULL, NULL);
		tk_assert_get_ok(&o);
		tk_free(&o);
	}
}

#define REREAD_WRITES 40

struct reread_shared {
	struct store *st;
	const uint8_t *plain;
	uint8_t hash[HASH_LEN];
	atomic_int writers_left;
	atomic_int put_failures, get_failures, wrong_bytes;
};

static void *reread_writer(void *arg)
{
	struct reread_shared *sh = arg;

	for (int i = 0; i < REREAD_WRITES; i++)
		if (store_put(sh->st, sh->hash, sh->plain, CONC_LEN, 0, NULL) != 0)
			atomic_fetch_add(&sh->put_failures, 1);
	atomic_fetch_sub(&sh->writers_left, 1);
	return NULL;
}

static void *reread_reader(void *arg)
{
	struct reread_shared *sh = arg;
	uint8_t *buf = malloc(CONC_LEN);

	if (!buf) {
		atomic_fetch_add(&sh->get_failures, 1);
		return NULL;
	}
	while (atomic_load(&sh->writers_left) > 0) {
		size_t got = 0;

		if (store_get(sh->st, sh->hash, buf, CONC_LEN, &got) != 0)
			atomic_fetch_add(&sh->get_failures, 1);
		else if (got != CONC_LEN || memcmp(buf, sh->plain, CONC_LEN) != 0)
			atomic_fetch_add(&sh->wrong_bytes, 1);
	}
	free(buf);
	return NULL;
}

Test(store, gets_while_the_object_is_rewritten_always_succeed, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(CONC_LEN, 200), CONC_LEN, 0);
	struct reread_shared sh = { .st = fx.st, .plain = o.plain };
	pthread_t th[4];

	memcpy(sh.hash, o.hash, HASH_LEN);
	atomic_init(&sh.writers_left, 2);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, i < 2 ? reread_writer : reread_reader, &sh), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_join(th[i], NULL), 0);
	cr_assert_eq(atomic_load(&sh.put_failures), 0);
	cr_assert_eq(atomic_load(&sh.get_failures), 0, "store_get failed while the object was re-put");
	cr_assert_eq(atomic_load(&sh.wrong_bytes), 0);
	cr_assert_eq(tk_count_files("tmp"), 0);
	tk_assert_get_ok(&o);
	tk_free(&o);
}

/* ---- uploads: what store_read_upload may call already hashed (store.c S2) ---- */

/* store_read_upload + store_object_verify as the uploader does them: returns
 * the verdict and whether the hash was taken as known. */
static int tk_upload_check(const struct tk_obj *o, bool *hashed)
{
	size_t cap = STORE_HEADER_LEN + o->len + o->len / 200 + 64, len = 0, plain_len = 0;
	uint8_t *obj = tk_alloc(cap), *scratch = tk_alloc(o->len + 1);
	const char *why = NULL;
	int rc = store_read_upload(fx.st, o->hash, obj, cap, &len, hashed);

	if (rc == 0)
		rc = store_object_verify(o->hash, obj, len, scratch, o->len + 1,
					 *hashed ? STORE_CHECK_HEADER : store_local_check(fx.st),
					 &plain_len, &why);
	if (rc == 0)
		cr_assert_eq(plain_len, o->len);
	tk_release(obj);
	tk_release(scratch);
	return rc;
}

/* Flips one byte of the object file in place: same inode, same path. */
static void tk_flip_in_place(const struct tk_obj *o, off_t off)
{
	uint8_t b;
	int fd = open(o->path, O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s: %s", o->path, strerror(errno));
	cr_assert_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x5A;
	cr_assert_eq(pwrite(fd, &b, 1, off), 1);
	cr_assert_eq(close(fd), 0);
}

Test(store, upload_of_an_object_just_put_needs_no_second_hash, .init = setup, .fini = teardown)
{
	struct tk_obj raw = tk_put(ts_random(MiB, 40), MiB, 0);
	struct tk_obj lz4 = tk_put(tk_text(MiB, 41), MiB, 0);
	bool hashed = false;

	OK(tk_upload_check(&raw, &hashed));
	cr_assert(hashed, "an object this store just wrote was not taken as hashed");
	OK(tk_upload_check(&lz4, &hashed));
	cr_assert(hashed);
	store_uploaded(fx.st, raw.hash); /* once on BACKING it is verified in full again */
	OK(tk_upload_check(&raw, &hashed));
	cr_assert_not(hashed, "an uploaded object stayed fresh");
	tk_free(&raw);
	tk_free(&lz4);
}

Test(store, upload_of_an_object_changed_in_place_is_verified_and_refused, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(MiB, 42), MiB, 0);
	bool hashed = true;

	tk_flip_in_place(&o, TK_HDR + MiB / 3); /* the page cache now holds the damaged byte */
	cr_assert_eq(tk_upload_check(&o, &hashed), -EIO, "a damaged object passed for upload");
	cr_assert_not(hashed);
	tk_flip_in_place(&o, TK_HDR + MiB / 3);
	OK(tk_upload_check(&o, &hashed)); /* repaired: fine, but checked in full */
	cr_assert_not(hashed);
	tk_free(&o);
}

Test(store, upload_of_a_replaced_or_fetched_object_is_verified, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(64 * KiB, 43), 64 * KiB, 0);
	bool hashed = true;

	tk_corrupt(&o, tk_edit_flip, TK_HDR + 5); /* a new file under the object's name */
	cr_assert_eq(tk_upload_check(&o, &hashed), -EIO);
	cr_assert_not(hashed);
	tk_corrupt(&o, tk_edit_flip, TK_HDR + 5);
	size_t len;
	uint8_t *img = tk_object_bytes(&o, &len);
	OK(store_remove(fx.st, o.hash));
	OK(store_put_fetched(fx.st, o.hash, img, len)); /* as a fetch from BACKING writes it */
	OK(tk_upload_check(&o, &hashed));
	cr_assert_not(hashed, "an object image from elsewhere was taken as hashed here");
	tk_release(img);
	tk_free(&o);
}

Test(store, a_corrupt_read_takes_an_object_out_of_the_fresh_set, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(64 * KiB, 44), 64 * KiB, 0);
	bool hashed = false;

	tk_flip_in_place(&o, TK_HDR + 7);
	tk_assert_get_eio(&o, "payload byte flipped in place");
	tk_flip_in_place(&o, TK_HDR + 7);
	OK(tk_upload_check(&o, &hashed));
	cr_assert_not(hashed);
	tk_free(&o);
}

/* Many fresh objects, half leaving in a scattered order: the open-addressing
 * set must still find every one that stays (deletion shifts probe runs). */
Test(store, fresh_set_keeps_every_remaining_object_through_deletions, .init = setup,
     .fini = teardown)
{
	enum { N = 3000 };
	static uint8_t hashes[N][HASH_LEN];
	uint8_t data[64], obj[STORE_HEADER_LEN + 128], scratch[128];

	for (int i = 0; i < N; i++) {
		tk_fill_random(data, sizeof(data), 1000 + (uint64_t)i);
		hash_sha256(data, sizeof(data), hashes[i]);
		OK(store_put(fx.st, hashes[i], data, sizeof(data), 0, NULL));
	}
	for (int i = 0; i < N; i += 2)
		store_uploaded(fx.st, hashes[(i * 7) % N]); /* every even i, scattered (7 ⊥ N) */
	for (int i = 0; i < N; i++) {
		size_t len, plain_len;
		const char *why;
		bool hashed;
		OK(store_read_upload(fx.st, hashes[i], obj, sizeof(obj), &len, &hashed));
		OK(store_object_verify(hashes[i], obj, len, scratch, sizeof(scratch),
				       hashed ? STORE_CHECK_HEADER : STORE_CHECK_SHA, &plain_len, &why));
		bool left = i % 2 == 0;
		cr_assert_eq(hashed, !left, "object %d: hashed=%d after %s", i, hashed,
			     left ? "its upload" : "other uploads");
	}
}

/* ---- direct writes (store.c S3) and checks without a read ---- */

/* The object file of a direct put is byte for byte the one a buffered put
 * writes (a second store, direct writes off, is the reference), whatever
 * the length's remainder modulo a block; of a large one only the last partial
 * block went through the page cache. */
Test(store, direct_writes_store_the_same_objects_without_filling_the_page_cache, .init = setup,
     .fini = teardown)
{
	static const size_t sizes[] = { 256 * KiB, 256 * KiB - 72, MiB + 1, 3 * MiB + 4095, 100 * KiB };
	char ref_root[128];
	struct store *ref;

	snprintf(ref_root, sizeof(ref_root), "%s/reference", fx.dir);
	cr_assert_eq(mkdir(ref_root, 0755), 0);
	OK(store_open(ref_root, &ref));
	store_set_direct_writes(fx.st, true);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int text = 0; text < 2; text++) {
			size_t len = sizes[i], got_len, want_len;
			uint8_t *plain = text ? tk_text(len, 50 + i) : ts_random(len, 60 + i);
			struct tk_obj o = tk_put(plain, len, 0);
			char ref_path[256];

			cr_assert_eq(o.info.codec, text ? CODEC_LZ4 : CODEC_RAW, "size %zu", len);
			if (len >= 256 * KiB && !text) /* before anything reads it */
				cr_assert_leq(tk_cached_pages(&o), 1,
					      "size %zu: %zu pages of a direct put are cached", len,
					      tk_cached_pages(&o));
			OK(store_put(ref, o.hash, plain, len, 0, NULL));
			snprintf(ref_path, sizeof(ref_path), "%s/chunks/%.2s/%.2s/%s", ref_root, o.hex,
				 o.hex + 2, o.hex);
			uint8_t *got = tk_object_bytes(&o, &got_len);
			uint8_t *want = tk_read_file(ref_path, &want_len);
			cr_assert_eq(got_len, want_len, "size %zu: object sizes differ", len);
			cr_assert_arr_eq(got, want, got_len, "size %zu: the direct put wrote other bytes",
					 len);
			tk_release(got);
			tk_release(want);
			tk_assert_get_ok(&o);
			tk_free(&o);
		}
	}
	store_close(ref);
}

/* store_put_headroom writes, from the caller's aligned buffer, the very
 * object store_put writes (raw or LZ4, large or small, aligned or not, direct
 * writes on or off), touching only the headroom before the plain bytes. */
Test(store, a_put_from_a_buffer_with_headroom_writes_the_same_object, .init = setup,
     .fini = teardown)
{
	static const size_t sizes[] = { 256 * KiB, MiB + 1, 3 * MiB + 4095, 100 * KiB };
	char ref_root[128];
	struct store *ref;

	snprintf(ref_root, sizeof(ref_root), "%s/reference", fx.dir);
	cr_assert_eq(mkdir(ref_root, 0755), 0);
	OK(store_open(ref_root, &ref));
	for (int direct = 0; direct < 2; direct++) {
		store_set_direct_writes(fx.st, direct);
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			for (int kind = 0; kind < 3; kind++) { /* random, text, random unaligned */
				size_t len = sizes[i], got_len, want_len;
				size_t skew = kind == 2 ? 8 : 0, cap = STORE_HEADER_LEN + len + 4096 + skew;
				uint8_t *buf = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
				cr_assert_not_null(buf);
				uint8_t *img = buf + skew, *plain = img + STORE_HEADER_LEN;
				if (kind == 1)
					tk_fill_text(plain, len, 80 + i);
				else
					tk_fill_random(plain, len, 90 + i + 10 * (size_t)direct);
				memset(img, 0xA5, STORE_HEADER_LEN);
				uint8_t *before = malloc(len);
				memcpy(before, plain, len);
				uint8_t hash[HASH_LEN];
				char hex[HASH_HEX_LEN + 1], path[256], ref_path[256];
				hash_sha256(plain, len, hash);
				hash_to_hex(hash, hex);
				struct store_object_info info, want_info;
				OK(store_put_headroom(fx.st, hash, img, len, NULL, 0, &info));
				cr_assert(memcmp(plain, before, len) == 0, "the plain bytes were changed");
				OK(store_put(ref, hash, before, len, 0, &want_info));
				cr_assert_eq(info.codec, want_info.codec);
				cr_assert_eq(info.stored_len, want_info.stored_len);
				cr_assert_eq(info.crc, want_info.crc);
				snprintf(path, sizeof(path), "%s/chunks/%.2s/%.2s/%s", fx.dir, hex, hex + 2,
					 hex);
				snprintf(ref_path, sizeof(ref_path), "%s/chunks/%.2s/%.2s/%s", ref_root, hex,
					 hex + 2, hex);
				uint8_t *got = tk_read_file(path, &got_len);
				uint8_t *want = tk_read_file(ref_path, &want_len);
				cr_assert_eq(got_len, want_len, "size %zu kind %d", len, kind);
				cr_assert_arr_eq(got, want, got_len, "size %zu kind %d direct %d", len, kind,
						 direct);
				tk_release(got);
				tk_release(want);
				free(before);
				free(buf);
			}
		}
	}
	store_close(ref);
}

Test(store, a_direct_put_is_fresh_and_durable_with_store_sync, .init = setup, .fini = teardown)
{
	store_set_direct_writes(fx.st, true);
	struct tk_obj o = tk_put(ts_random(2 * MiB + 17, 70), 2 * MiB + 17, STORE_SYNC);
	size_t len = 0;

	OK(store_check_unread(fx.st, o.hash, &len));
	cr_assert_eq(len, STORE_HEADER_LEN + o.info.stored_len);
	OK(store_sync(fx.st, o.hash));
	tk_assert_load_ok(&o);
	tk_free(&o);
}

/* store_check_unread vouches only for what S2 vouches for: an object this
 * store wrote, its file unchanged, not yet uploaded; the header is checked
 * in any case. */
Test(store, check_unread_vouches_only_for_fresh_unchanged_objects, .init = setup,
     .fini = teardown)
{
	struct tk_obj a = tk_put(ts_random(MiB, 71), MiB, 0);
	struct tk_obj b = tk_put(ts_random(64 * KiB, 72), 64 * KiB, 0);
	struct tk_obj c = tk_put(tk_text(64 * KiB, 73), 64 * KiB, 0);
	uint8_t missing[HASH_LEN] = { 0x42 };
	size_t len = 0;

	OK(store_check_unread(fx.st, a.hash, &len));
	cr_assert_eq(len, STORE_HEADER_LEN + MiB);
	tk_flip_in_place(&a, TK_HDR + MiB / 2); /* same inode, new mtime */
	cr_assert_eq(store_check_unread(fx.st, a.hash, &len), -EAGAIN,
		     "an object changed in place was vouched for unread");
	tk_flip_in_place(&a, TK_HDR + MiB / 2);
	cr_assert_eq(store_check_unread(fx.st, a.hash, &len), -EAGAIN);

	store_uploaded(fx.st, b.hash);
	cr_assert_eq(store_check_unread(fx.st, b.hash, &len), -EAGAIN,
		     "an uploaded object stayed fresh");

	tk_flip_in_place(&c, 0); /* the magic */
	cr_assert_eq(store_check_unread(fx.st, c.hash, &len), -EIO);
	tk_assert_logged(c.hex, "corrupt");

	cr_assert_eq(store_check_unread(fx.st, missing, &len), -ENOENT);
	tk_free(&a);
	tk_free(&b);
	tk_free(&c);
}

/* More writers than S3 has image buffers: each waits its turn, none fails,
 * every object reads back whole. */
struct tk_direct_job {
	int id;
	uint8_t *plain[4];
	uint8_t hash[4][HASH_LEN];
	int rc;
};

static void *tk_direct_writer(void *arg)
{
	struct tk_direct_job *j = arg;
	for (int k = 0; k < 4 && j->rc == 0; k++)
		j->rc = store_put(fx.st, j->hash[k], j->plain[k], 512 * KiB + (size_t)k, 0, NULL);
	return NULL;
}

Test(store, more_direct_writers_than_image_buffers_all_succeed, .init = setup, .fini = teardown)
{
	enum { N = 10 };
	struct tk_direct_job jobs[N];
	pthread_t th[N];

	store_set_direct_writes(fx.st, true);
	for (int i = 0; i < N; i++) {
		jobs[i].id = i;
		jobs[i].rc = 0;
		for (int k = 0; k < 4; k++) {
			jobs[i].plain[k] = ts_random(512 * KiB + (size_t)k, 1000 + (uint64_t)(i * 4 + k));
			hash_sha256(jobs[i].plain[k], 512 * KiB + (size_t)k, jobs[i].hash[k]);
		}
	}
	for (int i = 0; i < N; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, tk_direct_writer, &jobs[i]), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(pthread_join(th[i], NULL), 0);
		cr_assert_eq(jobs[i].rc, 0, "writer %d: %s", i, strerror(-jobs[i].rc));
	}
	for (int i = 0; i < N; i++)
		for (int k = 0; k < 4; k++) {
			struct store_chunk c;
			OK(store_load(fx.st, jobs[i].hash[k], 512 * KiB + 4, &c));
			cr_assert_eq(c.len, 512 * KiB + (size_t)k);
			cr_assert_arr_eq(c.plain, jobs[i].plain[k], c.len, "writer %d object %d", i, k);
			store_chunk_free(&c);
			tk_release(jobs[i].plain[k]);
		}
}

/* ---- trust (S5, shared invariant 7) ---- */

Test(store, objects_and_shard_directories_are_private_whatever_the_umask, .init = setup,
     .fini = teardown)
{
	mode_t old = umask(0);
	struct tk_obj o = tk_put(ts_random(3000, 41), 3000, 0);
	umask(old);
	struct stat sb;
	char dir[256];
	cr_assert_eq(stat(o.path, &sb), 0);
	cr_assert_eq(sb.st_mode & 07777, 0400, "object mode %o", sb.st_mode & 07777);
	snprintf(dir, sizeof(dir), "%s/chunks/%.2s", fx.dir, o.hex);
	cr_assert_eq(stat(dir, &sb), 0);
	cr_assert_eq(sb.st_mode & 07777, 0700, "%s: mode %o", dir, sb.st_mode & 07777);
	snprintf(dir, sizeof(dir), "%s/chunks/%.2s/%.2s", fx.dir, o.hex, o.hex + 2);
	cr_assert_eq(stat(dir, &sb), 0);
	cr_assert_eq(sb.st_mode & 07777, 0700, "%s: mode %o", dir, sb.st_mode & 07777);
	tk_free(&o);
}

/* A symlink at an object's name is not an object this store made: read as a
 * damaged copy (-EIO: the cache then fetches BACKING's), never its target's
 * bytes; a put replaces the link itself. */
Test(store, a_symlink_planted_at_an_object_reads_as_eio_and_a_put_replaces_it, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(ts_random(10000, 42), 10000, 0);
	char victim[128];
	snprintf(victim, sizeof(victim), "%s.victim", fx.dir);
	FILE *f = fopen(victim, "w");
	cr_assert_not_null(f);
	fputs("root's secret", f);
	fclose(f);
	cr_assert_eq(unlink(o.path), 0);
	cr_assert_eq(symlink(victim, o.path), 0);
	tk_assert_get_eio(&o, "a symlinked object");
	cr_assert_not(store_has(fx.st, o.hash), "a symlink counts as an object");
	OK(store_put(fx.st, o.hash, o.plain, o.len, 0, NULL));
	struct stat sb;
	cr_assert_eq(lstat(o.path, &sb), 0);
	cr_assert(S_ISREG(sb.st_mode), "the put left the link");
	tk_assert_get_ok(&o);
	char buf[32] = "";
	f = fopen(victim, "r");
	cr_assert_not_null(f);
	cr_assert_not_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	cr_assert_str_eq(buf, "root's secret");
	unlink(victim);
	tk_free(&o);
}

/* A shard directory replaced by a symlink to a directory outside: the put
 * fails, and nothing lands outside. */
Test(store, a_symlink_planted_at_a_shard_directory_is_not_followed, .init = setup,
     .fini = teardown)
{
	uint8_t *plain = ts_random(5000, 43);
	uint8_t hash[HASH_LEN];
	char hex[HASH_HEX_LEN + 1], outer[256], inner[256], outside[128];
	hash_sha256(plain, 5000, hash);
	hash_to_hex(hash, hex);
	snprintf(outside, sizeof(outside), "%s.outside", fx.dir);
	cr_assert_eq(mkdir(outside, 0700), 0);
	snprintf(outer, sizeof(outer), "%s/chunks/%.2s", fx.dir, hex);
	snprintf(inner, sizeof(inner), "%s/%.2s", outer, hex + 2);
	cr_assert(mkdir(outer, 0700) == 0 || errno == EEXIST);
	cr_assert_eq(symlink(outside, inner), 0);
	int rc = store_put(fx.st, hash, plain, 5000, 0, NULL);
	cr_assert_eq(rc, -ELOOP, "store_put through a symlinked shard: %d (%s)", rc, strerror(-rc));
	cr_assert_eq(tk_count_files("tmp"), 0, "the failed put left its temporary");
	cr_assert_eq(rmdir(outside), 0, "the put made something outside the store");
	tk_release(plain);
}

/* ---- header values are bounded before they are used (DESIGN invariant 7) ---- */

/* An LZ4 header whose payload length is far past what its plain length can
 * encode (codec_bound), over a sparse file of that size: refused from the
 * header, before a payload buffer of its size is allocated and read. */
Test(store, lz4_payload_length_past_the_codec_bound_is_refused_from_the_header, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(64 * KiB, 30), 64 * KiB, 0);
	cr_assert_eq(o.info.codec, CODEC_LZ4);
	uint64_t stored = (uint64_t)256 << 20;
	tk_corrupt(&o, tk_edit_payload_len, stored);
	cr_assert_eq(truncate(o.path, (off_t)(STORE_HEADER_LEN + stored)), 0);
	tk_assert_get_eio(&o, "a payload of 256 MiB for 64 KiB");
	tk_assert_logged(o.hex, "payload length larger than");
	tk_free(&o);
}

Test(store, an_unknown_codec_is_refused_from_the_header, .init = setup, .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(64 * KiB, 31), 64 * KiB, 0);
	tk_corrupt(&o, tk_edit_codec, 200);
	tk_assert_get_eio(&o, "codec 200");
	tk_assert_logged(o.hex, "unknown codec");
	tk_free(&o);
}

Test(store, a_plain_length_past_the_chunkers_maximum_is_refused_from_the_header,
     .init = setup, .fini = teardown)
{
	/* a raw object of the chunker's maximum + 1 bytes: no chunk is that long */
	size_t len = chunker_default_params.max_size + 1;
	struct tk_obj o = tk_put(ts_random(len, 32), len, 0);
	struct store_object_info info;
	FAILS(store_stat(fx.st, o.hash, &info), EIO);
	tk_assert_logged(o.hex, "plain length larger than a chunk can be");
	tk_free(&o);
}

/* store_object_check over every prefix and header edit of a real object:
 * never a crash, a success only for the object itself. */
Test(store, object_check_of_every_truncation_and_header_edit_is_eio, .init = setup,
     .fini = teardown)
{
	struct tk_obj o = tk_put(tk_text(8 * KiB, 33), 8 * KiB, 0);
	size_t len, got;
	uint8_t *img = tk_object_bytes(&o, &len);
	uint8_t *plain = tk_alloc(8 * KiB);
	const char *why;
	OK(store_object_check(o.hash, img, len, plain, 8 * KiB, &got, &why));
	for (size_t n = 0; n < len; n++) {
		uint8_t *cut = malloc(n ? n : 1); /* exactly n bytes: ASan sees over-reads */
		memcpy(cut, img, n);
		FAILS(store_object_check(o.hash, cut, n, plain, 8 * KiB, &got, &why), EIO);
		free(cut);
	}
	for (size_t at = 8; at < STORE_HEADER_LEN; at++) {
		for (int bit = 0; bit < 8; bit++) {
			img[at] ^= (uint8_t)(1 << bit);
			int rc = store_object_check(o.hash, img, len, plain, 8 * KiB, &got, &why);
			bool reserved = at == 11 || at >= 68; /* not read */
			cr_assert(rc == -EIO || (reserved && rc == 0), "byte %zu bit %d: %d", at, bit,
				  rc);
			img[at] ^= (uint8_t)(1 << bit);
		}
	}
	tk_release(plain);
	tk_release(img);
	tk_free(&o);
}

/* ---- shuffled codecs (codec.h) ---- */

/* Weights-like fp32 bytes (magnitudes over a few octaves below 0.05). */
static uint8_t *tk_floats(size_t len, uint64_t seed)
{
	uint8_t *buf = tk_alloc(len);
	uint64_t state = seed;

	for (size_t off = 0; off < len; off += 4) {
		uint64_t r = tk_splitmix64(&state);
		float v = (float)((double)(r >> 11) / (double)(1ull << 53)) * 0.05f * (float)(1 + (r & 7)) / 8.0f;
		uint8_t b[4];

		if (r & 8)
			v = -v;
		memcpy(b, &v, 4);
		memcpy(buf + off, b, len - off < 4 ? len - off : 4);
	}
	return buf;
}

Test(store, float_chunks_are_stored_shuffled_as_the_store_codec_says, .init = setup,
     .fini = teardown)
{
	/* both ways of writing: through the page cache and with O_DIRECT (S3) */
	for (int direct = 0; direct < 2; direct++) {
		store_set_direct_writes(fx.st, direct);
		store_set_codec(fx.st, CODEC_FAMILY_LZ4);
		struct tk_obj lz4 = tk_put(tk_floats(MiB + 7, 60 + direct), MiB + 7, 0);
		store_set_codec(fx.st, CODEC_FAMILY_ZSTD);
		struct tk_obj zstd = tk_put(tk_floats(MiB + 9, 62 + direct), MiB + 9, 0);

		cr_assert_eq(lz4.info.codec, CODEC_BLOSC_LZ4);
		cr_assert_eq(zstd.info.codec, CODEC_ZSTD_PLANES);
		cr_assert_lt(lz4.info.stored_len, lz4.len * 95 / 100);
		cr_assert_lt(zstd.info.stored_len, zstd.len * 95 / 100);
		tk_assert_get_ok(&lz4);
		tk_assert_load_ok(&lz4);
		tk_assert_get_ok(&zstd);
		tk_assert_load_ok(&zstd);
		tk_free(&lz4);
		tk_free(&zstd);
	}
}

/* Review 36 F2b (S12): a codec 4 object whose decode runs out of memory is
 * no verdict on it: store_get, store_load and store_object_check return
 * -ENOMEM, nothing is logged as corrupt, and the object is kept and reads
 * back once memory is there again. (Main called it corrupt: -EIO.) */
Test(store, a_decode_out_of_memory_is_enomem_not_a_corrupt_object, .init = setup,
     .fini = teardown)
{
	store_set_codec(fx.st, CODEC_FAMILY_ZSTD);
	struct tk_obj o = tk_put(tk_floats(MiB + 9, 70), MiB + 9, 0);
	cr_assert_eq(o.info.codec, CODEC_ZSTD_PLANES);
	size_t cap = o.len + 16, got = 0, len = 0, plain_len = 0;
	uint8_t *buf = tk_alloc(cap);
	uint8_t *img = tk_object_bytes(&o, &len);
	const char *why = NULL;
	struct store_chunk c;
	int rcs[4];
	for (int sha = 0; sha < 2; sha++) { /* the CRC check, then SHA-256 (decodes first) */
		store_set_local_check(fx.st, sha ? STORE_CHECK_SHA : STORE_CHECK_CRC);
		codec_fail_alloc_for_test(true);
		rcs[0] = store_get(fx.st, o.hash, buf, cap, &got);
		rcs[1] = store_load(fx.st, o.hash, o.len, &c);
		rcs[2] = store_object_check(o.hash, img, len, buf, cap, &plain_len, &why);
		rcs[3] = store_object_verify(o.hash, img, len, buf, cap, STORE_CHECK_SHA, &plain_len,
					     &why);
		codec_fail_alloc_for_test(false);
		for (int i = 0; i < 4; i++)
			cr_assert_eq(rcs[i], -ENOMEM, "call %d (sha %d) returned %d (%s), not -ENOMEM",
				     i, sha, rcs[i], strerror(-rcs[i]));
		cr_assert(!c.image && !c.decoded && !c.plain, "store_load left a buffer");
		cr_assert_null(why, "a reason was given: %s", why);
	}
	char *text = tk_log_text();
	cr_assert_null(strstr(text, o.hex), "the chunk was logged:\n%s", text);
	tk_release(text);
	cr_assert(store_has(fx.st, o.hash), "the object went");
	tk_assert_get_ok(&o);
	tk_release(img);
	tk_release(buf);
	tk_free(&o);
}

/* An object written before the shuffled codecs: codec 1, one LZ4 block of
 * the same float bytes (what the old encoder made of anything LZ4 could
 * shrink). It reads back as it always did. */
Test(store, lz4_object_of_the_previous_version_still_reads, .init = setup, .fini = teardown)
{
	size_t plain_len = 512 * KiB + 3, len;
	uint8_t *plain = tk_floats(plain_len, 64);
	memset(plain, 0, 128 * KiB); /* so that plain LZ4 saves enough */
	struct tk_obj o = tk_put(plain, plain_len, 0);
	uint8_t *b = tk_object_bytes(&o, &len);
	uint8_t *old = tk_alloc(TK_HDR + (size_t)LZ4_compressBound((int)plain_len));
	int n = LZ4_compress_default((const char *)plain, (char *)old + TK_HDR, (int)plain_len,
				     LZ4_compressBound((int)plain_len));

	cr_assert_gt(n, 0);
	memcpy(old, b, TK_HDR);
	old[10] = CODEC_LZ4;
	tk_put_le(old + 24, 8, (uint64_t)n);
	tk_put_le(old + 64, 4, crc32c(0, old + TK_HDR, (size_t)n));
	tk_set_object_bytes(&o, old, TK_HDR + (size_t)n);
	tk_assert_get_ok(&o);
	tk_assert_load_ok(&o);
	store_set_local_check(fx.st, STORE_CHECK_SHA);
	tk_assert_get_ok(&o);
	tk_release(old);
	tk_release(b);
	tk_free(&o);
}

/* ---- fetched images (S9) ---- */

#define TK_FETCH_MAP (TK_HDR + 4 * MiB + 64 * KiB) /* an object_cap of 4 MiB chunks */

/* The fetch path on one object image from elsewhere (a copy of o's file): a
 * pooled buffer, the check, the cache copy, the hand-out. Returns the chunk. */
static struct store_chunk tk_fetch(const struct tk_obj *o, const uint8_t *img, size_t len,
				   size_t need)
{
	struct store_chunk c;
	const char *why = NULL;
	OK(store_fetch_image(&c, need, TK_FETCH_MAP));
	cr_assert_not_null(c.image);
	cr_assert_eq((uintptr_t)c.image % STORE_IO_ALIGN, 0);
	memcpy(c.image, img, len);
	store_fetch_filled(&c, len);
	int rc = store_fetch_check(o->hash, &c, len, o->len, &why);
	cr_assert_eq(rc, 0, "size %zu: %s", o->len, why ? why : strerror(-rc));
	OK(store_put_fetched(fx.st, o->hash, c.image, len));
	store_fetch_done(&c);
	return c;
}

/* A fetched image is checked and kept as the very object store_put wrote
 * (raw or LZ4, small or large, direct writes on: a raw one of 256 KiB or
 * more then bypasses the page cache), and handed out as store_load would:
 * a raw chunk's plain bytes inside the image, a decoded one's on their own
 * with the image released. */
Test(store, a_fetched_image_is_kept_as_the_same_object_byte_for_byte, .init = setup,
     .fini = teardown)
{
	static const size_t sizes[] = { 256 * KiB, MiB + 1, 3 * MiB + 4095, 100 * KiB, 5000 };
	store_set_direct_writes(fx.st, true);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int text = 0; text < 2; text++) {
			size_t len = sizes[i], want_len, got_len;
			uint8_t *plain = text ? tk_text(len, 80 + i) : ts_random(len, 90 + i);
			struct tk_obj o = tk_put(plain, len, 0);
			uint8_t *want = tk_object_bytes(&o, &want_len);
			OK(store_remove(fx.st, o.hash)); /* BACKING alone has it */
			size_t need = text ? TK_FETCH_MAP : TK_HDR + codec_bound(len);
			struct store_chunk c = tk_fetch(&o, want, want_len, need);
			cr_assert_eq(c.len, len);
			cr_assert(memcmp(c.plain, plain, len) == 0, "size %zu: other bytes", len);
			if (o.info.codec == CODEC_RAW) {
				cr_assert_null(c.decoded);
				cr_assert_eq(c.plain, (const uint8_t *)c.image + TK_HDR);
			} else {
				cr_assert_null(c.image, "the image of a decoded chunk was kept");
				cr_assert_eq(c.plain, c.decoded);
			}
			store_chunk_free(&c);
			if (len >= 256 * KiB && !text)
				cr_assert_leq(tk_cached_pages(&o), 1,
					      "size %zu: %zu pages of a fetched copy are cached", len,
					      tk_cached_pages(&o));
			uint8_t *got = tk_object_bytes(&o, &got_len);
			cr_assert_eq(got_len, want_len, "size %zu: object sizes differ", len);
			cr_assert_arr_eq(got, want, got_len, "size %zu: the copy has other bytes", len);
			tk_release(got);
			tk_release(want);
			tk_assert_get_ok(&o);
			tk_free(&o);
		}
	}
}

/* Invariant 2: a fetched image whose payload byte was changed is refused —
 * by its CRC, or, the CRC made to match, by SHA-256 — and so is a header
 * edit; the caller writes nothing (store_put_fetched is never reached). */
Test(store, a_damaged_fetched_image_is_refused_by_its_check, .init = setup, .fini = teardown)
{
	size_t len = MiB + 7, img_len;
	struct tk_obj o = tk_put(ts_random(len, 95), len, 0);
	uint8_t *img = tk_object_bytes(&o, &img_len);
	OK(store_remove(fx.st, o.hash));
	for (int edit = 0; edit < 3; edit++) {
		struct store_chunk c;
		const char *why = NULL;
		OK(store_fetch_image(&c, TK_HDR + codec_bound(len), TK_FETCH_MAP));
		memcpy(c.image, img, img_len);
		uint8_t *b = c.image;
		if (edit == 2) {
			tk_put_le(b + 16, 8, len + 1); /* plain length */
		} else {
			b[TK_HDR + len / 2] ^= 0x01;
			if (edit == 1)
				tk_put_le(b + 64, 4, crc32c(0, b + TK_HDR, len));
		}
		store_fetch_filled(&c, img_len);
		cr_assert_eq(store_fetch_check(o.hash, &c, img_len, len, &why), -EIO, "edit %d", edit);
		cr_assert_not_null(why);
		if (edit == 1)
			cr_assert_str_eq(why, "bytes do not match their hash");
		store_chunk_free(&c);
		cr_assert_null(c.image);
	}
	cr_assert(!store_has(fx.st, o.hash));
	tk_release(img);
	tk_free(&o);
}

/* Pages of buffer [off, off + len) that are in memory. */
static size_t tk_resident(const void *buf, size_t off, size_t len)
{
	size_t pages = len / 4096, n = 0;
	unsigned char *vec = tk_alloc(pages);
	cr_assert_eq(mincore((uint8_t *)buf + off, len, vec), 0, "%s", strerror(errno));
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	tk_release(vec);
	return n;
}

/* A released fetch buffer is reused by the next fetch (its pages already in
 * memory); reused for a smaller chunk, it gives back what is beyond that
 * chunk, so its footprint is what the chunk needs — and that much is all
 * that is in memory. */
Test(store, a_reused_fetch_buffer_keeps_only_what_its_next_chunk_needs, .init = setup,
     .fini = teardown)
{
	struct store_chunk c;
	OK(store_fetch_image(&c, TK_FETCH_MAP, TK_FETCH_MAP)); /* a size not known */
	size_t map = c.image_map;
	cr_assert_geq(map, TK_FETCH_MAP);
	memset(c.image, 0xAB, 4 * MiB); /* a 4 MiB object read into it */
	store_fetch_filled(&c, 4 * MiB);
	cr_assert_eq(store_chunk_footprint(&c), 4 * MiB);
	void *first = c.image;
	store_chunk_free(&c);

	size_t need = TK_HDR + codec_bound(64 * KiB), need_pages = (need + 4095) / 4096;
	OK(store_fetch_image(&c, need, TK_FETCH_MAP));
	cr_assert_eq(c.image, first, "the released buffer was not reused");
	cr_assert_eq(store_chunk_footprint(&c), need_pages * 4096);
	cr_assert_eq(tk_resident(c.image, 0, need_pages * 4096), need_pages,
		     "the pages the chunk needs are not all in memory");
	cr_assert_eq(tk_resident(c.image, need_pages * 4096, 4 * MiB - need_pages * 4096), 0,
		     "pages beyond the chunk's need are still held");
	store_fetch_filled(&c, need);
	cr_assert_eq(store_chunk_footprint(&c), need_pages * 4096);
	store_chunk_free(&c);

	/* a failed read may have written anywhere: all of it counts */
	OK(store_fetch_image(&c, need, TK_FETCH_MAP));
	store_fetch_filled(&c, TK_FETCH_MAP);
	cr_assert_eq(store_chunk_footprint(&c), map);
	store_chunk_free(&c);
}

/* A pool full of buffers of another size (another cache's largest object)
 * still keeps the one released now, in place of one of those: a fetch of
 * this size finds it again. */
Test(store, a_full_pool_of_another_size_keeps_the_buffer_released_now, .init = setup,
     .fini = teardown)
{
	enum { N = 9 }; /* more than the pool keeps */
	struct store_chunk other[N], c;
	for (int i = 0; i < N; i++)
		OK(store_fetch_image(&other[i], 64 * KiB, 512 * KiB));
	for (int i = 0; i < N; i++)
		store_chunk_free(&other[i]);
	OK(store_fetch_image(&c, 64 * KiB, TK_FETCH_MAP));
	memset(c.image, 0x5A, 4096); /* a fresh mapping would read zeros */
	store_fetch_filled(&c, 4096);
	store_chunk_free(&c);
	OK(store_fetch_image(&c, 64 * KiB, TK_FETCH_MAP));
	cr_assert_eq(((const uint8_t *)c.image)[4095], 0x5A,
		     "the buffer released into a full pool was not kept");
	store_chunk_free(&c);
}

/* store_check_unread of an object S2 vouches for reads nothing: the file is
 * the one written (inode, mtime, size), so its header is the one written.
 * Before, it read the 72-byte header back; the object's first blocks were
 * written with O_DIRECT, so every upload by link paid a disk read (and the
 * readahead's 4 pages) per object (docs/BENCH.md, issue 20 part 2,
 * s28-cpu20). An object not vouched for has its header read with readahead
 * off (at most its page) and checked: damaged is -EIO, else -EAGAIN. The
 * objects load byte for byte after. */
Test(store, check_unread_reads_no_byte_of_a_fresh_object_and_only_the_header_of_others,
     .init = setup, .fini = teardown)
{
	store_set_direct_writes(fx.st, true);
	struct tk_obj o = tk_put(ts_random(3 * MiB + 17, 74), 3 * MiB + 17, STORE_SYNC);
	cr_assert_eq(o.info.codec, CODEC_RAW);
	tk_evict_pages(&o);
	size_t cold = tk_cached_pages(&o);
	size_t len = 0;

	OK(store_check_unread(fx.st, o.hash, &len));
	cr_assert_eq(len, STORE_HEADER_LEN + 3 * MiB + 17);
	cr_assert_eq(tk_cached_pages(&o), cold, "a fresh object's check read %zu pages",
		     tk_cached_pages(&o) - cold);

	store_uploaded(fx.st, o.hash); /* no longer fresh: its header is read */
	cr_assert_eq(store_check_unread(fx.st, o.hash, &len), -EAGAIN);
	size_t cached = tk_cached_pages(&o);
	cr_assert_leq(cached, cold + 1, "the header read brought %zu pages in (%zu before)", cached,
		      cold);
	tk_assert_load_ok(&o); /* byte for byte */

	struct tk_obj d = tk_put(ts_random(MiB, 75), MiB, STORE_SYNC);
	tk_evict_pages(&d);
	tk_flip_in_place(&d, 20); /* the plain length: and the file is no longer the one written */
	cr_assert_eq(store_check_unread(fx.st, d.hash, &len), -EIO);
	tk_free(&o);
	tk_free(&d);
}

/* S11: store_put_headroom writes a raw object with the CRC its caller gives
 * (the writer's, taken as its chunker scanned the bytes) and does not pass
 * over the bytes again for it: the object carries exactly the CRC given, and
 * reads back byte for byte when it is right. A wrong one makes an object
 * every read rejects (EIO), never one that returns other bytes. Before S11
 * the store computed the CRC itself from the bytes (a second pass over the
 * chunk, from memory, on the store thread). */
Test(store, a_put_from_an_image_carries_the_crc_its_caller_computed, .init = setup,
     .fini = teardown)
{
	const size_t len = MiB + 4097; /* raw and large: written from the image (S3) */
	store_set_direct_writes(fx.st, true);
	for (int wrong = 0; wrong < 2; wrong++) {
		size_t cap = (STORE_HEADER_LEN + len + 4095) / 4096 * 4096;
		uint8_t *img = aligned_alloc(4096, cap), *plain = img + STORE_HEADER_LEN;
		cr_assert_not_null(img);
		tk_fill_random(plain, len, 700 + (uint64_t)wrong);
		uint8_t hash[HASH_LEN];
		hash_sha256(plain, len, hash);
		uint32_t crc = crc32c(0, plain, len), given = wrong ? crc ^ 0x10 : crc;
		struct store_object_info info;
		OK(store_put_headroom(fx.st, hash, img, len, &given, 0, &info));
		cr_assert_eq(info.codec, CODEC_RAW);
		cr_assert_eq(info.crc, given, "the object carries the CRC given");
		struct store_object_info on_disk;
		OK(store_stat(fx.st, hash, &on_disk));
		cr_assert(on_disk.has_crc);
		cr_assert_eq(on_disk.crc, given, "the header on disk carries the CRC given");
		struct store_chunk c;
		int rc = store_load(fx.st, hash, len, &c);
		if (wrong) {
			cr_assert_eq(rc, -EIO, "an object whose CRC does not match is rejected: %d", rc);
		} else {
			cr_assert_eq(rc, 0);
			cr_assert_eq(c.len, len);
			cr_assert_arr_eq(c.plain, plain, len, "the bytes read back are the bytes put");
			store_chunk_free(&c);
		}
		free(img);
	}
}
