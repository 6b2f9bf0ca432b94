/* Unit tests for fs/cache.c, started as the daemon starts it but with a real
 * catalog, chunk store and BACKING directory in a temporary directory, and
 * its hooks (stopping, opened) played by the test: a chunk missing from the
 * cache is fetched from BACKING, checked and kept (C1, C5), a compressed one
 * decoded, once however many
 * readers miss it at the same time (C7); a corrupt object
 * on BACKING is EIO, never bytes, and no copy is kept; the evictor removes
 * only chunks already on BACKING, and none of a file the opened hook names
 * (C2); a writer over the dirty bound waits until an upload makes room and
 * is woken by it, fails with ENOSPC when nothing moves (C3), and gives up
 * its wait at once when the daemon stops. An eviction, or the drop of a
 * damaged copy, unlinks the object under the catalog lock (C9): a writer
 * that stores the same bytes anew meanwhile keeps them. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "cache.h"
#include "catalog.h"
#include "catalog_internal.h"
#include "codec.h"
#include "crc32c.h"
#include "hash.h"
#include "log.h"
#include "store.h"
#include "support.h"
#include "upload.h"

#define TC_CHUNK_MAX (256u << 10)
#define TC_LEN (16u << 10) /* each chunk's plain bytes: incompressible */
#define TC_MAX_CHUNKS 32

static struct fixture {
	struct ts_stack w; /* cache, catalog, BACKING */
	struct cache *c;
	uint8_t hash[TC_MAX_CHUNKS][HASH_LEN];
	uint64_t ino_of[TC_MAX_CHUNKS];
	int n_chunks;
	atomic_bool stopping;      /* the stopping hook's answer */
	atomic_uint_least64_t open_ino; /* the opened hook's one open inode (0: none) */
} fx;

static void setup(void)
{
	log_setup(stderr, LOG_LVL_OFF);
	memset(&fx, 0, sizeof(fx));
	ts_stack_open(&fx.w, "cache");
}

static void teardown(void)
{
	cache_stop(fx.c);
	fx.c = NULL;
	ts_stack_close(&fx.w);
}

TestSuite(cache, .init = setup, .fini = teardown, .timeout = 60);

static bool tc_stopping(void *arg)
{
	cr_assert_eq(arg, &fx);
	return atomic_load(&fx.stopping);
}

static size_t tc_opened(void *arg, uint64_t *inos, size_t max)
{
	cr_assert_eq(arg, &fx);
	uint64_t ino = atomic_load(&fx.open_ino);
	if (ino == 0 || max == 0)
		return 0;
	inos[0] = ino;
	return 1;
}

static void tc_start(uint64_t cache_size, uint64_t dirty_max, unsigned timeout_ms)
{
	struct cache_config cfg = { .cache_size = cache_size, .dirty_max = dirty_max,
				    .backing_timeout_ms = timeout_ms, .chunk_max = TC_CHUNK_MAX };
	snprintf(cfg.dir, sizeof(cfg.dir), "%s", fx.w.cache);
	struct cache_hooks hooks = { .stopping = tc_stopping, .stopping_arg = &fx,
				     .opened = tc_opened, .opened_arg = &fx };
	OK(cache_start(&cfg, fx.w.cat, fx.w.st, fx.w.b, &hooks, &fx.c));
}

/* Records each chunk tc_file stored, and the file it belongs to. */
static void tc_note(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	cr_assert_lt(fx.n_chunks, TC_MAX_CHUNKS);
	memcpy(fx.hash[fx.n_chunks], hash, HASH_LEN);
	fx.ino_of[fx.n_chunks++] = *(const uint64_t *)arg;
}

/* A committed file of n chunks (seeds seed..) written into the cache as a
 * writer would: dirty, each with an UP_CHUNK row queued. Returns its inode. */
static uint64_t tc_file(const char *name, int seed, int n)
{
	uint64_t ino = ts_mk(fx.w.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
	ts_store_file(fx.w.cat, fx.w.st, ino, seed, n, TC_LEN, tc_note, &ino);
	return ino;
}

static void tc_rel(int i, char *rel, size_t size)
{
	store_object_relpath(fx.hash[i], rel, size);
}

/* Flips one byte in the middle of chunk i's payload, in its object under
 * root (the cache or BACKING). */
static void tc_flip_payload_byte(const char *root, int i)
{
	char rel[128], path[512];
	tc_rel(i, rel, sizeof(rel));
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	int fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0);
	uint8_t byte;
	off_t at = STORE_HEADER_LEN + TC_LEN / 2;
	cr_assert_eq(pread(fd, &byte, 1, at), 1);
	byte ^= 0x40;
	cr_assert_eq(pwrite(fd, &byte, 1, at), 1);
	close(fd);
}

/* What the uploader does for the chunks of ino: their objects copied to
 * BACKING, their queue rows ended (uploaded = 1, clean). */
static void tc_upload(uint64_t ino)
{
	static uint8_t obj[STORE_HEADER_LEN + TC_LEN + 4096];
	for (int i = 0; i < fx.n_chunks; i++) {
		if (fx.ino_of[i] != ino)
			continue;
		char rel[128];
		size_t len = 0;
		tc_rel(i, rel, sizeof(rel));
		OK(store_read_object(fx.w.st, fx.hash[i], obj, sizeof(obj), &len));
		OK(backing_put(fx.w.b, rel, obj, len));
	}
	struct cat_upload rows[TC_MAX_CHUNKS], mine[TC_MAX_CHUNKS];
	int n = cat_upload_list(fx.w.cat, 0, rows, TC_MAX_CHUNKS), m = 0;
	cr_assert_geq(n, 0);
	for (int r = 0; r < n; r++)
		for (int i = 0; i < fx.n_chunks; i++)
			if (fx.ino_of[i] == ino && rows[r].kind == UP_CHUNK &&
			    memcmp(rows[r].hash, fx.hash[i], HASH_LEN) == 0)
				mine[m++] = rows[r];
	OK(cat_upload_done_many(fx.w.cat, mine, (size_t)m));
}

static int tc_store_remove(void *st, const uint8_t hash[CAT_HASH_LEN])
{
	return store_remove(st, hash);
}

/* The chunk leaves the cache as an eviction does: BACKING alone has it. */
static void tc_drop_from_cache(int i)
{
	OK(cat_chunk_evict(fx.w.cat, fx.hash[i], tc_store_remove, fx.w.st));
}

static struct cat_chunk_where tc_where(int i)
{
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.w.cat, fx.hash[i], &w));
	return w;
}

static double tc_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- fetching from BACKING ---- */

Test(cache, a_chunk_missing_from_the_cache_is_fetched_from_backing_checked_and_kept)
{
	uint64_t ino = tc_file("f", 10, 2);
	tc_upload(ino);
	tc_drop_from_cache(0);
	cr_assert(!store_has(fx.w.st, fx.hash[0]));
	tc_start(64u << 20, 0, 2000);

	struct store_chunk ch = { 0 };
	OK(cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch));
	uint8_t want[TC_LEN];
	ts_fill(want, TC_LEN, 10);
	cr_assert_eq(ch.len, TC_LEN);
	cr_assert(memcmp(ch.plain, want, TC_LEN) == 0);
	store_chunk_free(&ch);

	/* C5: a copy is kept, and the catalog calls it cached */
	cr_assert(store_has(fx.w.st, fx.hash[0]));
	cr_assert(tc_where(0).cached);
	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.misses, 1);
	cr_assert_eq(s.hits, 0);
	cr_assert_gt(s.fetched_bytes, 0);

	/* the next load is a hit, from the cache */
	OK(cache_load(fx.c, fx.hash[1], TC_CHUNK_MAX, &ch));
	store_chunk_free(&ch);
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.hits, 1);
	cr_assert_eq(s.misses, 1);
}

/* C12: a read's fetch runs on a job thread, kept for the next fetches: one
 * reader missing chunk after chunk starts one thread, not one per fetch, and
 * every fetch hands over its own chunk. */
Test(cache, fetches_one_after_another_share_one_job_thread)
{
	uint64_t ino = tc_file("f", 40, 12);
	tc_upload(ino);
	for (int i = 0; i < 12; i++)
		tc_drop_from_cache(i);
	tc_start(64u << 20, 0, 2000);
	for (int i = 0; i < 12; i++) {
		struct store_chunk ch = { 0 };
		OK(cache_load(fx.c, fx.hash[i], TC_CHUNK_MAX, &ch));
		uint8_t want[TC_LEN];
		ts_fill(want, TC_LEN, 40 + i);
		cr_assert_eq(ch.len, TC_LEN);
		cr_assert(memcmp(ch.plain, want, TC_LEN) == 0, "chunk %d", i);
		store_chunk_free(&ch);
	}
	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.misses, 12);
	cr_assert_eq(s.job_threads_started, 1);
}

/* A compressed object from BACKING is decoded for the reader (a raw one is
 * handed out inside the fetched image): the plain bytes, checked, either way. */
Test(cache, a_compressed_chunk_fetched_from_backing_reads_as_its_plain_bytes)
{
	enum { LEN = 96u << 10 };
	static uint8_t plain[LEN], obj[STORE_HEADER_LEN + LEN + 4096];
	for (size_t i = 0; i < LEN; i++)
		plain[i] = (uint8_t)("checkpoint"[i % 10] + i / 4096);
	uint8_t hash[HASH_LEN];
	hash_sha256(plain, LEN, hash);
	struct store_object_info info;
	OK(store_put(fx.w.st, hash, plain, LEN, 0, &info));
	cr_assert_neq(info.codec, CODEC_RAW, "the test wants a compressed object");
	cr_assert_lt(info.stored_len, LEN);
	char rel[128];
	size_t len = 0;
	store_object_relpath(hash, rel, sizeof(rel));
	OK(store_read_object(fx.w.st, hash, obj, sizeof(obj), &len));
	OK(backing_put(fx.w.b, rel, obj, len));
	OK(store_remove(fx.w.st, hash)); /* BACKING alone has it */
	tc_start(64u << 20, 0, 2000);

	struct store_chunk ch = { 0 };
	OK(cache_load(fx.c, hash, TC_CHUNK_MAX, &ch));
	cr_assert_eq(ch.len, LEN);
	cr_assert(memcmp(ch.plain, plain, LEN) == 0);
	cr_assert_geq(store_chunk_footprint(&ch), LEN);
	store_chunk_free(&ch);
	struct cache_stats st;
	cache_get_stats(fx.c, &st);
	cr_assert_eq(st.misses, 1);
	cr_assert_eq(st.fetch_errors, 0);
}

/* C7: readers that miss one chunk at once fetch it once. Its object on
 * BACKING cannot be read (mode 000: EACCES, retried like a BACKING that does
 * not answer; not a FIFO, which is a verdict: bkobj.h B4) until all of them
 * asked; then it can be read again. */
/* Root reads a mode-000 file anyway: the effective CAP_DAC_OVERRIDE and
 * CAP_DAC_READ_SEARCH are dropped (off) or raised again (on), in this thread
 * and so in the threads it starts after. */
static void tc_dac_override(bool on)
{
	if (geteuid() != 0)
		return;
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];
	cr_assert_eq(syscall(SYS_capget, &h, d), 0, "capget: %s", strerror(errno));
	uint32_t m = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);
	d[0].effective = on ? d[0].effective | (m & d[0].permitted) : d[0].effective & ~m;
	cr_assert_eq(syscall(SYS_capset, &h, d), 0, "capset: %s", strerror(errno));
}

struct tc_loader {
	pthread_barrier_t *start;
	int rc;
};

static void *tc_loader_main(void *p)
{
	struct tc_loader *l = p;
	pthread_barrier_wait(l->start);
	struct store_chunk ch = { 0 };
	l->rc = cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch);
	uint8_t want[TC_LEN];
	ts_fill(want, TC_LEN, 20);
	if (l->rc == 0 && (ch.len != TC_LEN || memcmp(ch.plain, want, TC_LEN) != 0))
		l->rc = -EBADMSG;
	store_chunk_free(&ch);
	return NULL;
}

Test(cache, readers_that_miss_one_chunk_at_once_fetch_it_from_backing_once)
{
	enum { N = 8 };
	uint64_t ino = tc_file("f", 20, 1);
	tc_upload(ino);
	tc_drop_from_cache(0);
	tc_dac_override(false); /* before the cache's threads: they inherit it */
	tc_start(64u << 20, 0, 5000);
	char rel[128], path[512];
	tc_rel(0, rel, sizeof(rel));
	snprintf(path, sizeof(path), "%s/%s", fx.w.backing, rel);
	struct stat sb;
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(chmod(path, 0), 0);
	int probe = open(path, O_RDONLY);
	cr_assert_lt(probe, 0, "a mode-000 object could be opened (DAC override still on?)");

	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, N + 1);
	struct tc_loader l[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		l[i] = (struct tc_loader){ .start = &start, .rc = 1 };
		cr_assert_eq(pthread_create(&th[i], NULL, tc_loader_main, &l[i]), 0);
	}
	pthread_barrier_wait(&start);
	usleep(300 * 1000); /* all ask; the one fetching retries meanwhile */
	cr_assert_eq(chmod(path, 0600), 0); /* the object can be read again */
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(l[i].rc, 0, "reader %d: %d", i, l[i].rc);
	}
	pthread_barrier_destroy(&start);

	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.misses, N);
	cr_assert_eq(s.fetched_bytes, (uint64_t)sb.st_size, "%" PRIu64 " bytes fetched, one "
		     "object is %lld", s.fetched_bytes, (long long)sb.st_size);
	cr_assert_eq(s.fetch_errors, 0);
	cr_assert(tc_where(0).cached);
}

Test(cache, a_corrupt_object_on_backing_is_eio_not_bytes)
{
	uint64_t ino = tc_file("f", 20, 1);
	tc_upload(ino);
	tc_drop_from_cache(0);
	/* one byte of the payload flipped on BACKING */
	tc_flip_payload_byte(fx.w.backing, 0);
	tc_start(64u << 20, 0, 500);

	struct store_chunk ch = { 0 };
	FAILS(cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch), EIO);
	cr_assert_null(ch.decoded);
	cr_assert(!store_has(fx.w.st, fx.hash[0]), "a corrupt copy was kept");
	cr_assert(!tc_where(0).cached);
	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.fetch_errors, 1);
}

Test(cache, a_chunk_in_neither_the_cache_nor_backing_is_eio)
{
	tc_file("f", 30, 1); /* never uploaded */
	OK(store_remove(fx.w.st, fx.hash[0])); /* and lost from the cache */
	tc_start(64u << 20, 0, 500);
	struct store_chunk ch = { 0 };
	FAILS(cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch), EIO);
}

/* ---- eviction (C2) ---- */

/* Waits up to 10 s for the chunk to leave the cache, or not. */
static bool tc_evicted_within(int i, double seconds)
{
	double until = tc_mono() + seconds;
	while (tc_mono() < until) {
		if (!tc_where(i).cached)
			return true;
		usleep(50 * 1000);
	}
	return false;
}

/* Waits up to seconds for the evictor's count to reach want: it counts a
 * pass's chunks when the pass ends, after the catalog and the files. */
static uint64_t tc_evicted_count_within(uint64_t want, double seconds)
{
	double until = tc_mono() + seconds;
	struct cache_stats s;
	for (;;) {
		cache_get_stats(fx.c, &s);
		if (s.evicted_chunks >= want || tc_mono() >= until)
			return s.evicted_chunks;
		usleep(20 * 1000);
	}
}

Test(cache, the_evictor_removes_only_chunks_already_on_backing)
{
	uint64_t dirty = tc_file("dirty", 100, 4);
	uint64_t clean = tc_file("clean", 200, 4);
	tc_upload(clean);
	/* 8 objects of ~16 KiB against a bound of 64 KiB: over the high
	 * watermark, and the dirty ones alone over the low one */
	tc_start(64u << 10, 0, 2000);
	for (int i = 0; i < fx.n_chunks; i++)
		if (fx.ino_of[i] == clean)
			cr_assert(tc_evicted_within(i, 10), "clean chunk %d was not evicted", i);
	/* the catalog goes first (C2): the pass still removes the last file
	 * and then counts, so wait for its end before looking at either */
	uint64_t evicted = tc_evicted_count_within(4, 10);
	for (int i = 0; i < fx.n_chunks; i++) {
		if (fx.ino_of[i] == clean) {
			cr_assert(!store_has(fx.w.st, fx.hash[i]), "evicted chunk %d kept its file", i);
		} else {
			cr_assert_eq(fx.ino_of[i], dirty);
			struct cat_chunk_where w = tc_where(i);
			cr_assert(w.cached && !w.uploaded, "dirty chunk %d was evicted", i);
			cr_assert(store_has(fx.w.st, fx.hash[i]));
		}
	}
	cr_assert_eq(evicted, 4);
}

Test(cache, chunks_of_an_open_file_are_not_evicted_while_the_disk_has_room)
{
	uint64_t open_file = tc_file("open", 300, 3);
	uint64_t closed = tc_file("closed", 400, 3);
	tc_upload(open_file);
	tc_upload(closed);
	atomic_store(&fx.open_ino, open_file);
	tc_start(32u << 10, 0, 2000);
	for (int i = 0; i < fx.n_chunks; i++)
		if (fx.ino_of[i] == closed)
			cr_assert(tc_evicted_within(i, 10), "chunk %d of a closed file was kept", i);
	usleep(1500 * 1000); /* another round of the evictor */
	for (int i = 0; i < fx.n_chunks; i++)
		if (fx.ino_of[i] == open_file)
			cr_assert(tc_where(i).cached && store_has(fx.w.st, fx.hash[i]),
				  "chunk %d of an open file was evicted", i);
	/* closed: its chunks go too */
	atomic_store(&fx.open_ino, 0);
	for (int i = 0; i < fx.n_chunks; i++)
		cr_assert(tc_evicted_within(i, 10), "chunk %d was kept after its file closed", i);
}

/* ---- dirty bytes and backpressure (C3) ---- */

struct tc_waiter {
	uint64_t len;
	int rc;
	atomic_bool done;
	double took;
	pthread_t t;
};

static void *tc_wait_main(void *p)
{
	struct tc_waiter *w = p;
	double t0 = tc_mono();
	w->rc = cache_dirty_wait(fx.c, w->len);
	w->took = tc_mono() - t0;
	atomic_store(&w->done, true);
	return NULL;
}

static void tc_waiter_start(struct tc_waiter *w, uint64_t len)
{
	memset(w, 0, sizeof(*w));
	w->len = len;
	cr_assert_eq(pthread_create(&w->t, NULL, tc_wait_main, w), 0);
}

static bool tc_done_within(struct tc_waiter *w, double seconds)
{
	double until = tc_mono() + seconds;
	while (!atomic_load(&w->done) && tc_mono() < until)
		usleep(10 * 1000);
	return atomic_load(&w->done);
}

/* The catalog's dirty bytes, which the cache reads at start. */
static uint64_t tc_dirty_bytes(void)
{
	struct cat_cache_stats cs;
	OK(cat_cache_stats(fx.w.cat, &cs));
	return cs.dirty_bytes;
}

Test(cache, a_writer_over_the_dirty_bound_waits_until_an_upload_wakes_it)
{
	uint64_t ino = tc_file("dirty", 500, 4);
	uint64_t dirty = tc_dirty_bytes();
	cr_assert_gt(dirty, 3 * TC_LEN);
	tc_start(64u << 20, dirty + TC_LEN / 2, 30000); /* one more chunk does not fit */
	OK(cache_dirty_wait(fx.c, TC_LEN / 4)); /* a small one does */

	struct tc_waiter w;
	tc_waiter_start(&w, TC_LEN);
	cr_assert(!tc_done_within(&w, 0.5), "no wait over the dirty bound");
	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.dirty_waits, 1);

	/* the uploader: the chunks are on BACKING, then it says so */
	tc_upload(ino);
	cache_dirty_done(fx.c, dirty);
	cr_assert(tc_done_within(&w, 5), "the upload did not wake the writer");
	pthread_join(w.t, NULL);
	cr_assert_eq(w.rc, 0);
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.dirty_bytes, 0);

	/* the writer stores its chunk: counted */
	cache_dirty_add(fx.c, TC_LEN);
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.stored_chunks, 1);
}

Test(cache, a_writer_fails_with_enospc_when_nothing_moves_for_the_backing_timeout)
{
	tc_file("dirty", 600, 4);
	uint64_t dirty = tc_dirty_bytes();
	tc_start(64u << 20, dirty, 600);
	struct tc_waiter w;
	tc_waiter_start(&w, TC_LEN);
	cr_assert(tc_done_within(&w, 10), "the wait did not end");
	pthread_join(w.t, NULL);
	cr_assert_eq(w.rc, -ENOSPC);
	cr_assert_geq(w.took, 0.5, "gave up after %.2f s, before the timeout", w.took);
}

Test(cache, the_daemon_stopping_ends_a_writers_wait)
{
	tc_file("dirty", 700, 4);
	uint64_t dirty = tc_dirty_bytes();
	tc_start(64u << 20, dirty, 60000);
	struct tc_waiter w;
	tc_waiter_start(&w, TC_LEN);
	cr_assert(!tc_done_within(&w, 0.5), "no wait over the dirty bound");
	atomic_store(&fx.stopping, true);
	cr_assert(tc_done_within(&w, 2), "stopping did not end the wait");
	pthread_join(w.t, NULL);
	cr_assert_eq(w.rc, 0, "a stop is not a failure of the write");
}

Test(cache, a_null_cache_does_not_wait)
{
	/* the daemon's teardown, after cache_stop: writers flush without it */
	OK(cache_dirty_wait(NULL, 1u << 30));
	OK(cache_disk_wait(NULL, 1u << 30));
	FAILS(cache_make_room(NULL, 4096), ENOSPC);
	cache_dirty_add(NULL, 4096);
	cache_dirty_done(NULL, 4096);
}

/* ---- the fetch path's buffers and cache copy (store.h S9) ---- */

/* The bytes of a file, read whole (at most cap). */
static size_t tc_file_bytes(const char *path, uint8_t *buf, size_t cap)
{
	int fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	ssize_t n = pread(fd, buf, cap, 0);
	close(fd);
	cr_assert_geq(n, 0);
	return (size_t)n;
}

/* An object of plain bytes that BACKING alone has (the cache's copy removed);
 * its image is left in obj (capacity cap), its length returned. */
static size_t tc_backing_only(const uint8_t *plain, size_t len, uint8_t hash[HASH_LEN],
			      uint8_t *obj, size_t cap)
{
	hash_sha256(plain, len, hash);
	OK(store_put(fx.w.st, hash, plain, len, 0, NULL));
	char rel[128];
	size_t obj_len = 0;
	store_object_relpath(hash, rel, sizeof(rel));
	OK(store_read_object(fx.w.st, hash, obj, cap, &obj_len));
	OK(backing_put(fx.w.b, rel, obj, obj_len));
	OK(store_remove(fx.w.st, hash));
	return obj_len;
}

/* A raw chunk large enough for O_DIRECT: fetched, handed out inside its
 * image (a footprint of its own size, not of the largest object), and the
 * cache's copy, written with direct writes on, is BACKING's object byte for
 * byte. Fetched again (into a pooled buffer), then loaded from the cache,
 * it reads the same. */
Test(cache, a_fetched_chunk_is_handed_out_in_its_image_and_kept_byte_for_byte)
{
	enum { LEN = TC_CHUNK_MAX - 64 }; /* a known length below chunk_max; an O_DIRECT object */
	static uint8_t plain[LEN], obj[STORE_HEADER_LEN + LEN + 4096], kept[sizeof(obj)];
	ts_fill(plain, LEN, 70);
	uint8_t hash[HASH_LEN];
	size_t obj_len = tc_backing_only(plain, LEN, hash, obj, sizeof(obj));
	cr_assert_eq(obj_len, STORE_HEADER_LEN + LEN, "the test wants a raw object");
	store_set_direct_writes(fx.w.st, true);
	tc_start(64u << 20, 0, 2000);

	for (int round = 0; round < 3; round++) {
		struct store_chunk ch = { 0 };
		OK(cache_load(fx.c, hash, LEN, &ch));
		cr_assert_eq(ch.len, LEN);
		cr_assert(memcmp(ch.plain, plain, LEN) == 0, "round %d", round);
		if (round == 0) { /* fetched: the plain bytes inside the fetched image */
			cr_assert_null(ch.decoded);
			cr_assert_eq(ch.plain, (const uint8_t *)ch.image + STORE_HEADER_LEN);
			cr_assert_eq((uintptr_t)ch.image % STORE_IO_ALIGN, 0);
			cr_assert_geq(store_chunk_footprint(&ch), obj_len);
			cr_assert_leq(store_chunk_footprint(&ch), obj_len + STORE_IO_ALIGN,
				      "a fetch of a known chunk holds %zu bytes",
				      store_chunk_footprint(&ch));
		}
		store_chunk_free(&ch);
		char path[512];
		store_object_path(fx.w.st, hash, path, sizeof(path));
		size_t n = tc_file_bytes(path, kept, sizeof(kept));
		cr_assert_eq(n, obj_len, "the cache's copy is %zu bytes, BACKING's %zu", n, obj_len);
		cr_assert(memcmp(kept, obj, obj_len) == 0, "the cache's copy differs from BACKING's");
		if (round == 0) /* gone from the cache: fetched again, into a pooled buffer */
			OK(store_remove(fx.w.st, hash)); /* (no catalog row: a chunk of no file) */
	}
	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.misses, 2, "%" PRIu64 " misses, %" PRIu64 " hits", s.misses, s.hits);
	cr_assert_eq(s.hits, 1);
	cr_assert_eq(s.fetch_errors, 0);
}

/* An object whose payload was changed on BACKING and its CRC-32C made to
 * match: only SHA-256 can tell, and it does before anything is written —
 * EIO, no copy in the cache, no temporary left, nothing called cached. */
Test(cache, a_fetched_image_that_fails_only_its_hash_is_refused_and_nothing_is_written)
{
	enum { LEN = TC_CHUNK_MAX };
	static uint8_t plain[LEN], obj[STORE_HEADER_LEN + LEN + 4096];
	ts_fill(plain, LEN, 71);
	uint8_t hash[HASH_LEN];
	size_t obj_len = tc_backing_only(plain, LEN, hash, obj, sizeof(obj));
	cr_assert_eq(obj_len, STORE_HEADER_LEN + LEN);
	obj[STORE_HEADER_LEN + LEN / 3] ^= 0x10;
	uint32_t crc = crc32c(0, obj + STORE_HEADER_LEN, LEN);
	for (int i = 0; i < 4; i++) /* docs/FORMAT.md: the payload's CRC-32C at 64 */
		obj[64 + i] = (uint8_t)(crc >> (8 * i));
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	OK(backing_put(fx.w.b, rel, obj, obj_len));
	store_set_direct_writes(fx.w.st, true);
	tc_start(64u << 20, 0, 500);

	struct store_chunk ch = { 0 };
	FAILS(cache_load(fx.c, hash, LEN, &ch), EIO);
	cr_assert_null(ch.image);
	cr_assert_null(ch.plain);
	cr_assert(!store_has(fx.w.st, hash), "a copy that failed its hash was kept");
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s/tmp", fx.w.cache);
	DIR *d = opendir(tmp);
	cr_assert_not_null(d);
	int left = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		left += e->d_name[0] != '.';
	closedir(d);
	cr_assert_eq(left, 0, "%d temporaries left in the cache", left);
	struct cache_stats s;
	cache_get_stats(fx.c, &s);
	cr_assert_eq(s.fetch_errors, 1);
	cr_assert_eq(s.fetched_bytes, 0, "bytes that failed their check were counted as fetched");
}

/* ---- removals under the catalog lock (catalog.c invariant 8) ---- */

/* The seam: this binary's unlinkat, which store_remove's unlink calls. Armed
 * with a chunk's object name, it calls tc_unlink_hook once, just before that
 * object's unlink, on whichever thread removes it; otherwise it is the
 * system call. */
static char tc_unlink_name[2 * HASH_LEN + 16];
static void (*tc_unlink_hook)(void);

int unlinkat(int dirfd, const char *path, int flags)
{
	void (*hook)(void) = tc_unlink_hook;
	if (hook && strcmp(path, tc_unlink_name) == 0) {
		tc_unlink_hook = NULL;
		hook();
	}
	return (int)syscall(SYS_unlinkat, dirfd, path, flags);
}

static void tc_unlink_arm(const uint8_t hash[HASH_LEN], void (*hook)(void))
{
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	const char *base = strrchr(rel, '/');
	snprintf(tc_unlink_name, sizeof(tc_unlink_name), "%s", base ? base + 1 : rel);
	tc_unlink_hook = hook;
}

/* What the hook saw: the removal's thread held the catalog lock or not, and
 * whether the writer's steps ran in the window (they may fail only there). */
static struct {
	atomic_int fired, unlocked, injected_rc;
	uint64_t file, writer; /* the chunk's only file; a writer's file */
	int seed;              /* the chunk's bytes (ts_fill) */
} tc_race;

/* The chunk's last reference goes (its file truncated: the sweep deletes its
 * row), then a writer writes the same bytes to another file: a new row, told
 * to store, the object written, recorded stored (dirty: its only copy). */
static int tc_race_writer_steps(void)
{
	struct cat *cat = fx.w.cat;
	int rc = cat_pending_from_committed(cat, tc_race.file);
	if (rc == 0)
		rc = cat_pending_truncate(cat, tc_race.file, 0);
	if (rc == 0)
		rc = cat_file_commit(cat, tc_race.file, 0, ts_now_ns(), false);
	if (rc == 0)
		rc = cat_pending_drop(cat, tc_race.file);
	static uint8_t buf[TC_LEN];
	ts_fill(buf, TC_LEN, tc_race.seed);
	struct cat_extent e = { .off = 0, .len = TC_LEN, .chunk_len = TC_LEN };
	hash_sha256(buf, TC_LEN, e.hash);
	bool must = false;
	if (rc == 0)
		rc = cat_pending_add(cat, tc_race.writer, &e, &must);
	if (rc == 0 && !must)
		rc = -EEXIST; /* the swept row should have gone */
	struct store_object_info info;
	if (rc == 0)
		rc = store_put(fx.w.st, e.hash, buf, TC_LEN, STORE_SYNC, &info);
	if (rc == 0)
		rc = cat_chunk_stored(cat, e.hash, info.codec, info.stored_len);
	return rc;
}

/* Just before the object's unlink: with the catalog lock free, the window
 * is open, and the writer's steps run in it. */
static void tc_race_hook(void)
{
	atomic_fetch_add(&tc_race.fired, 1);
	if (pthread_mutex_trylock(&fx.w.cat->lock) != 0)
		return;
	pthread_mutex_unlock(&fx.w.cat->lock);
	atomic_fetch_add(&tc_race.unlocked, 1);
	atomic_store(&tc_race.injected_rc, tc_race_writer_steps());
}

/* After a removal that tc_race_hook watched: the writer's steps ran in the
 * window if the lock was free (their result), or run now; either way the
 * writer's copy must be in the cache, dirty. */
static void tc_race_writer_kept(void)
{
	if (atomic_load(&tc_race.unlocked) == 0)
		OK(tc_race_writer_steps()); /* no window: the writer comes after */
	else
		OK(atomic_load(&tc_race.injected_rc));
	struct cat_chunk_where w = tc_where(0);
	cr_assert(w.cached && !w.uploaded, "the writer's copy is dirty");
	cr_assert(store_has(fx.w.st, fx.hash[0]), "the writer's only copy is in the cache");
}

Test(cache, an_eviction_removes_the_object_under_the_catalog_lock_never_a_writers_new_one)
{
	uint64_t ino = tc_file("f", 300, 1);
	tc_upload(ino);
	tc_race.file = ino;
	tc_race.writer = ts_mk(fx.w.cat, CAT_ROOT_INO, "g", S_IFREG | 0644, NULL);
	tc_race.seed = 300;
	tc_start(64u << 20, 0, 2000);
	tc_unlink_arm(fx.hash[0], tc_race_hook);
	OK(cache_make_room(fx.c, TC_LEN)); /* evicts the one clean chunk */
	cr_assert_eq(atomic_load(&tc_race.fired), 1, "the eviction unlinked the object");
	cr_expect_eq(atomic_load(&tc_race.unlocked), 0, "removed under the catalog lock");
	tc_race_writer_kept();
}

/* Just before the object's unlink: records whether the catalog lock was held. */
static void tc_lock_seen_hook(void)
{
	atomic_fetch_add(&tc_race.fired, 1);
	if (pthread_mutex_trylock(&fx.w.cat->lock) != 0)
		return;
	pthread_mutex_unlock(&fx.w.cat->lock);
	atomic_fetch_add(&tc_race.unlocked, 1);
}

/* catalog.c invariant 12: an eviction removes the object only once the
 * commit that marked the chunk uploaded is durable (a WAL sync in between:
 * the remove callback runs under the lock and sees the count). */
static uint64_t tc_syncs_at_remove;
static int tc_remove_counting_syncs(void *st, const uint8_t hash[CAT_HASH_LEN])
{
	tc_syncs_at_remove = fx.w.cat->wal_syncs;
	return store_remove(st, hash);
}

Test(cache, an_eviction_removes_the_object_only_after_the_uploaded_mark_is_synced)
{
	uint64_t ino = tc_file("f", 10, 1);
	tc_upload(ino);
	uint64_t before = fx.w.cat->wal_syncs;
	OK(cat_chunk_evict(fx.w.cat, fx.hash[0], tc_remove_counting_syncs, fx.w.st));
	cr_assert(!store_has(fx.w.st, fx.hash[0]));
	cr_assert_gt(tc_syncs_at_remove, before,
		     "the object was removed before the catalog's WAL was synced after its uploaded mark");
}

Test(cache, a_damaged_cached_copy_is_removed_under_the_catalog_lock)
{
	uint64_t ino = tc_file("f", 310, 1);
	tc_upload(ino);
	/* one byte of the payload flipped in the cache's copy */
	tc_flip_payload_byte(fx.w.cache, 0);
	tc_start(64u << 20, 0, 2000);
	tc_unlink_arm(fx.hash[0], tc_lock_seen_hook);

	struct store_chunk ch = { 0 };
	OK(cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch)); /* BACKING's good copy */
	uint8_t want[TC_LEN];
	ts_fill(want, TC_LEN, 310);
	cr_assert_eq(ch.len, TC_LEN);
	cr_assert(memcmp(ch.plain, want, TC_LEN) == 0);
	store_chunk_free(&ch);
	cr_assert_eq(atomic_load(&tc_race.fired), 1, "the damaged copy was unlinked");
	cr_assert_eq(atomic_load(&tc_race.unlocked), 0, "removed under the catalog lock (C9)");
}

/* A committed file of one chunk of fp32-like bytes (into plain, TC_LEN),
 * stored as the zstd family stores it (codec 4), dirty with its UP_CHUNK row
 * as tc_file's are. Returns its inode. */
static uint64_t tc_float_file(const char *name, uint8_t *plain)
{
	uint64_t ino = ts_mk(fx.w.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
	ts_float_fill(plain, TC_LEN);
	struct cat_extent e = { .off = 0, .len = TC_LEN, .chunk_len = TC_LEN };
	hash_sha256(plain, TC_LEN, e.hash);
	bool must = false;
	OK(cat_pending_add(fx.w.cat, ino, &e, &must));
	store_set_codec(fx.w.st, CODEC_FAMILY_ZSTD);
	struct store_object_info info;
	OK(store_put(fx.w.st, e.hash, plain, TC_LEN, STORE_SYNC, &info));
	cr_assert_eq(info.codec, CODEC_ZSTD_PLANES, "the test wants a codec 4 object, not %d",
		     info.codec);
	OK(cat_chunk_stored(fx.w.cat, e.hash, info.codec, info.stored_len));
	tc_note(&ino, 0, e.hash);
	OK(cat_file_commit(fx.w.cat, ino, TC_LEN, ts_now_ns(), false));
	OK(cat_pending_drop(fx.w.cat, ino));
	return ino;
}

/* Review 36 F2b (store.c S12): a good, uploaded cache copy whose decode runs
 * out of memory is not dropped as damaged: the read fails with -ENOMEM, the
 * copy stays cached, and the next read gets its bytes from it. (Main took
 * it for damaged: cache_drop_damaged evicted it.) */
Test(cache, a_decode_out_of_memory_keeps_the_cached_copy)
{
	static uint8_t plain[TC_LEN];
	uint64_t ino = tc_float_file("f", plain);
	tc_upload(ino);
	tc_start(64u << 20, 0, 2000);

	struct store_chunk ch = { 0 };
	codec_fail_alloc_for_test(true);
	int rc = cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch);
	codec_fail_alloc_for_test(false);
	cr_assert_eq(rc, -ENOMEM, "cache_load returned %d (%s), not -ENOMEM", rc, strerror(-rc));
	struct cat_chunk_where w = tc_where(0);
	cr_assert(w.cached && w.uploaded, "the good cache copy was dropped as damaged");
	cr_assert(store_has(fx.w.st, fx.hash[0]), "the cache copy's object went");
	OK(cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch));
	cr_assert_eq(ch.len, TC_LEN);
	cr_assert(memcmp(ch.plain, plain, TC_LEN) == 0);
	store_chunk_free(&ch);
	struct cache_stats st;
	cache_get_stats(fx.c, &st);
	cr_assert_eq(st.hits, 1, "the second read was not a hit of the kept copy");
	cr_assert_eq(st.fetch_errors, 0);
}

/* Another connection's write transaction on the catalog file: the cache's
 * catalog writes fail once its busy timeout (5 s) runs out. */
static sqlite3 *tc_blocker;

static void tc_block_catalog_writes(void)
{
	cr_assert_eq(sqlite3_open(fx.w.cat_path, &tc_blocker), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(tc_blocker, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
}

static void tc_unblock_catalog_writes(void)
{
	if (!tc_blocker)
		return;
	sqlite3_exec(tc_blocker, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(tc_blocker);
	tc_blocker = NULL;
}

/* Just before the fetched copy's unlink: with the catalog lock free, the
 * catalog's writes come back and the writer's steps run in the window. */
static void tc_keep_copy_hook(void)
{
	tc_unblock_catalog_writes();
	tc_race_hook();
}

Test(cache, a_fetched_copy_the_catalog_cannot_record_never_removes_a_writers_object)
{
	uint64_t ino = tc_file("f", 320, 1);
	tc_upload(ino);
	tc_drop_from_cache(0);
	tc_race.file = ino;
	tc_race.writer = ts_mk(fx.w.cat, CAT_ROOT_INO, "g", S_IFREG | 0644, NULL);
	tc_race.seed = 320;
	tc_start(64u << 20, 0, 20000);
	tc_unlink_arm(fx.hash[0], tc_keep_copy_hook);
	tc_block_catalog_writes(); /* the fetch's cat_chunk_fetched fails */

	struct store_chunk ch = { 0 };
	OK(cache_load(fx.c, fx.hash[0], TC_CHUNK_MAX, &ch)); /* the bytes, all the same */
	store_chunk_free(&ch);
	tc_unblock_catalog_writes();
	cr_expect_eq(atomic_load(&tc_race.unlocked), 0, "a copy is removed under the lock (C9)");
	tc_race_writer_kept();
}
