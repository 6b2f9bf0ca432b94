/* Unit tests for fs/reader.c with a real catalog and chunk store (no disk
 * cache in front: the reader's load callback is store_load on the test's
 * store): reads across chunk borders return the file's bytes, holes and the
 * tail past the last extent read as zeros, a chunk whose object is corrupt or
 * missing is EIO and hands out none of its bytes, the decoded-chunk cache
 * stays within its budget while readahead runs, reader_map pins chunks in
 * the cache until reader_unmap releases them, readers of one chunk at once
 * load it once (they follow the loader's flight), a failed load frees
 * its slot for the next read to load again, and readahead loads several
 * chunks at once, of several files read at once, with the right bytes and
 * within the budget, handing what does not fit to fetch_ahead; the readahead
 * window of a sequential reader is -o prefetch chunks at most (none with
 * prefetch=0), and a chunk whose object is damaged is never handed out, read
 * ahead or not, and is loaded right once repaired. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "reader.h"
#include "store.h"
#include "support.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static struct {
	char dir[128];
	char cat_path[192];
	struct cat *cat;
	struct store *store;
	struct reader *reader;
	atomic_int loads;   /* tr_load calls */
	int load_delay_ms;  /* a slow load: others that want the chunk meanwhile */
	bool jitter;        /* delays differ by chunk: loads land out of order */
	atomic_int in_flight, max_in_flight; /* tr_load calls at once */
	atomic_uint_least64_t max_bytes;     /* the most reader_stats.bytes a load saw */
	atomic_int fetch_aheads;             /* tr_fetch_ahead calls */
} tr;

static int tr_load(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
		   struct store_chunk *out)
{
	cr_assert_null(c, "the reader hands load the cache it was started with");
	atomic_fetch_add(&tr.loads, 1);
	int now = atomic_fetch_add(&tr.in_flight, 1) + 1;
	for (int m = atomic_load(&tr.max_in_flight);
	     now > m && !atomic_compare_exchange_weak(&tr.max_in_flight, &m, now);)
		;
	struct reader_stats st; /* a load runs with its bytes counted: the budget holds */
	reader_stats(tr.reader, &st);
	for (uint64_t m = atomic_load(&tr.max_bytes);
	     st.bytes > m && !atomic_compare_exchange_weak(&tr.max_bytes, &m, st.bytes);)
		;
	if (tr.load_delay_ms)
		usleep((useconds_t)(tr.load_delay_ms * 1000 + (tr.jitter ? hash[0] * 100 : 0)));
	int rc = store_load(tr.store, hash, cap, out);
	atomic_fetch_sub(&tr.in_flight, 1);
	return rc;
}

static void tr_fetch_ahead(struct cache *c, const uint8_t hash[HASH_LEN])
{
	cr_assert_null(c);
	atomic_fetch_add(&tr.fetch_aheads, 1);
}

/* prefetch: as -o prefetch (0: the default, negative: none) */
static void tr_start_reader_ahead(uint64_t budget, int prefetch)
{
	reader_free(tr.reader);
	const struct reader_config cfg = { .budget_bytes = budget, .load = tr_load,
					   .fetch_ahead = tr_fetch_ahead, .prefetch = prefetch };
	OK(reader_new(&cfg, tr.cat, NULL, &tr.reader));
}

static void tr_start_reader(uint64_t budget)
{
	tr_start_reader_ahead(budget, 0);
}

static void tr_setup(void)
{
	memset(&tr, 0, sizeof(tr));
	ts_tmpdir_make(tr.dir, sizeof(tr.dir), "reader");
	ts_cat_open_in(tr.dir, "catalog.db", tr.cat_path, sizeof(tr.cat_path), &tr.cat);
	char path[256];
	snprintf(path, sizeof(path), "%s/store", tr.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	OK(store_open(path, &tr.store));
	tr_start_reader(64 * MiB);
}

static void tr_teardown(void)
{
	reader_free(tr.reader); /* asserts that every pin was released */
	store_close(tr.store);
	ts_cat_close_checked(&tr.cat);
	ts_tmpdir_remove(tr.dir);
}

TestSuite(reader, .init = tr_setup, .fini = tr_teardown);

/* ---- building files ---- */

struct tr_chunk {
	uint8_t hash[HASH_LEN];
	uint8_t *bytes;
	size_t len;
};

/* A chunk of len random bytes, its object written to the store. */
static struct tr_chunk tr_chunk(size_t len, uint64_t seed)
{
	struct tr_chunk c = { .bytes = ts_random(len, seed), .len = len };
	hash_sha256(c.bytes, len, c.hash);
	OK(store_put(tr.store, c.hash, c.bytes, len, 0, NULL));
	return c;
}

/* Adds to ino's pending extents file bytes [off, off+len) = c's bytes from chunk_off. */
static void tr_extent(uint64_t ino, const struct tr_chunk *c, uint64_t off, uint64_t chunk_off,
		      uint64_t len)
{
	struct cat_extent e = { .off = off, .len = len, .chunk_off = chunk_off, .chunk_len = c->len };
	memcpy(e.hash, c->hash, HASH_LEN);
	bool must = false;
	OK(cat_pending_add(tr.cat, ino, &e, &must));
	if (must)
		OK(cat_chunk_stored(tr.cat, c->hash, 0, c->len));
}

static void tr_commit(uint64_t ino, uint64_t size)
{
	OK(cat_file_commit(tr.cat, ino, size, ts_now_ns(), false));
	OK(cat_pending_drop(tr.cat, ino));
}

/* A committed file of the given chunks back to back; want gets its bytes. */
static uint64_t tr_file_of(const char *name, const struct tr_chunk *c, int n, uint8_t **want,
			   size_t *size)
{
	uint64_t ino = ts_mk(tr.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += c[i].len;
	*want = malloc(total);
	cr_assert_not_null(*want);
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		tr_extent(ino, &c[i], off, 0, c[i].len);
		memcpy(*want + off, c[i].bytes, c[i].len);
		off += c[i].len;
	}
	tr_commit(ino, total);
	*size = total;
	return ino;
}

/* A committed file of n new chunks of len random bytes (seeds seed, seed+1, ...). */
static uint64_t tr_file_of_random(const char *name, struct tr_chunk *c, int n, size_t len,
				  uint64_t seed, uint8_t **want, size_t *size)
{
	for (int i = 0; i < n; i++)
		c[i] = tr_chunk(len, seed + (uint64_t)i);
	return tr_file_of(name, c, n, want, size);
}

static void tr_expect_read(uint64_t ino, enum reader_source src, const uint8_t *want,
			   uint64_t off, size_t len)
{
	uint8_t *got = malloc(len ? len : 1);
	cr_assert_not_null(got);
	memset(got, 0xA5, len);
	OK(reader_read(tr.reader, ino, src, off, len, (char *)got));
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(got[i], want[off + i], "byte %" PRIu64 " of a read at %" PRIu64
			     " + %zu: %#x, want %#x", off + i, off, len, got[i], want[off + i]);
	free(got);
}

static void tr_free(uint8_t *want, struct tr_chunk *c, int n)
{
	free(want);
	for (int i = 0; i < n; i++)
		free(c[i].bytes);
}

/* ---- tests ---- */

Test(reader, reads_across_chunk_borders_return_the_files_bytes)
{
	static const size_t lens[] = { 70001, 123457, 65536, 1, 99999 };
	struct tr_chunk c[5];
	for (int i = 0; i < 5; i++)
		c[i] = tr_chunk(lens[i], (uint64_t)i + 1);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("f", c, 5, &want, &size);

	tr_expect_read(ino, READER_COMMITTED, want, 0, size); /* all of it at once */
	uint64_t border = 0;
	for (int i = 0; i < 4; i++) { /* every border, from a byte to both whole neighbours */
		border += lens[i];
		tr_expect_read(ino, READER_PROBE, want, border - 1, 2);
		tr_expect_read(ino, READER_COMMITTED, want, border - 1, 1);
		tr_expect_read(ino, READER_COMMITTED, want, border, 1);
		uint64_t from = border - lens[i];
		uint64_t to = border + lens[i + 1] < size ? border + lens[i + 1] : size;
		tr_expect_read(ino, READER_COMMITTED, want, from + 7, (size_t)(to - from - 7));
	}
	/* a map covers several chunks as pieces in file order */
	struct reader_map m;
	OK(reader_map(tr.reader, ino, READER_COMMITTED, 5, size - 10, &m));
	cr_assert_eq(m.len, size - 10);
	cr_assert_eq(m.n, 5, "one piece per chunk: %d", m.n);
	size_t at = 5;
	for (int i = 0; i < m.n; i++) {
		cr_assert(memcmp(m.iov[i].iov_base, want + at, m.iov[i].iov_len) == 0, "piece %d", i);
		at += m.iov[i].iov_len;
	}
	reader_unmap(tr.reader, &m);
	cr_assert_eq(m.n, 0);
	tr_free(want, c, 5);
}

Test(reader, holes_and_the_tail_read_as_zeros_and_extents_may_start_inside_a_chunk)
{
	struct tr_chunk a = tr_chunk(100 * KiB, 11), b = tr_chunk(80 * KiB, 12);
	uint64_t ino = ts_mk(tr.cat, CAT_ROOT_INO, "sparse", S_IFREG | 0644, NULL);
	/* [0,100K) a | hole to 300K | [300K,350K) = b[10K,60K) | hole |
	 * [600K,610K) = a[5,10K+5) | zeros to 1M */
	const size_t size = 1 * MiB;
	uint8_t *want = calloc(1, size);
	cr_assert_not_null(want);
	tr_extent(ino, &a, 0, 0, a.len);
	memcpy(want, a.bytes, a.len);
	tr_extent(ino, &b, 300 * KiB, 10 * KiB, 50 * KiB);
	memcpy(want + 300 * KiB, b.bytes + 10 * KiB, 50 * KiB);
	tr_extent(ino, &a, 600 * KiB, 5, 10 * KiB);
	memcpy(want + 600 * KiB, a.bytes + 5, 10 * KiB);

	/* the writer's pending extents read the same before the commit */
	tr_expect_read(ino, READER_PENDING, want, 0, size);
	tr_commit(ino, size);
	tr_expect_read(ino, READER_COMMITTED, want, 0, size);
	tr_expect_read(ino, READER_COMMITTED, want, 99 * KiB, 202 * KiB); /* data, hole, data */
	tr_expect_read(ino, READER_COMMITTED, want, 700 * KiB, 300 * KiB); /* past the last extent */
	tr_expect_read(ino, READER_PROBE, want, 349 * KiB, 252 * KiB);

	/* a hole inside a map is zeros, not a failure and not a short map */
	struct reader_map m;
	OK(reader_map(tr.reader, ino, READER_COMMITTED, 100 * KiB, 200 * KiB, &m));
	cr_assert_eq(m.len, 200 * KiB);
	for (int i = 0; i < m.n; i++)
		for (size_t j = 0; j < m.iov[i].iov_len; j++)
			cr_assert_eq(((const uint8_t *)m.iov[i].iov_base)[j], 0);
	reader_unmap(tr.reader, &m);
	free(want);
	free(a.bytes);
	free(b.bytes);
}

/* Flips one byte of the payload of c's object on disk. */
static void tr_corrupt(const struct tr_chunk *c)
{
	char path[512];
	store_object_path(tr.store, c->hash, path, sizeof(path));
	int fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	uint8_t byte;
	off_t at = STORE_HEADER_LEN + (off_t)c->len / 2;
	cr_assert_eq(pread(fd, &byte, 1, at), 1);
	byte ^= 0x40;
	cr_assert_eq(pwrite(fd, &byte, 1, at), 1);
	close(fd);
}

Test(reader, a_corrupt_or_missing_chunk_is_eio_and_none_of_its_bytes_are_handed_out)
{
	struct tr_chunk c[3] = { tr_chunk(64 * KiB, 21), tr_chunk(64 * KiB, 22),
				 tr_chunk(64 * KiB, 23) };
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("bad", c, 3, &want, &size);
	tr_corrupt(&c[1]);

	char *out = malloc(size);
	cr_assert_not_null(out);
	memset(out, 0x5A, size);
	FAILS(reader_read(tr.reader, ino, READER_COMMITTED, 64 * KiB + 10, 100, out), EIO);
	for (size_t i = 0; i < 100; i++)
		cr_assert_eq((uint8_t)out[i], 0x5A, "byte %zu was written on a failed read", i);
	/* a read across the bad chunk fails whole; its good neighbours still read */
	FAILS(reader_read(tr.reader, ino, READER_COMMITTED, 0, size, out), EIO);
	tr_expect_read(ino, READER_COMMITTED, want, 0, 64 * KiB);
	tr_expect_read(ino, READER_COMMITTED, want, 128 * KiB, 64 * KiB);
	/* the failure is not cached as bytes: asked again, it fails again */
	struct reader_map m;
	FAILS(reader_map(tr.reader, ino, READER_PROBE, 64 * KiB, 64 * KiB, &m), EIO);
	cr_assert_eq(m.n, 0, "nothing stays pinned after a failed map");
	struct cat_extent bad = { .off = 64 * KiB, .len = 64 * KiB, .chunk_len = c[1].len };
	memcpy(bad.hash, c[1].hash, HASH_LEN);
	FAILS(reader_copy_extent(tr.reader, ino, &bad, 0, 10, out), EIO);

	/* a chunk whose object is gone is EIO too */
	char path[512];
	store_object_path(tr.store, c[2].hash, path, sizeof(path));
	tr_start_reader(64 * MiB); /* c[2] out of the memory cache */
	cr_assert_eq(unlink(path), 0);
	FAILS(reader_read(tr.reader, ino, READER_PROBE, 130 * KiB, 10, out), EIO);
	free(out);
	tr_free(want, c, 3);
}

Test(reader, a_copy_extent_is_checked_against_the_catalogs_chunk_length)
{
	struct tr_chunk c = tr_chunk(32 * KiB, 31);
	uint64_t ino = ts_mk(tr.cat, CAT_ROOT_INO, "f", S_IFREG | 0644, NULL);
	char out[100];
	struct cat_extent e = { .off = 0, .len = 100, .chunk_off = 1000, .chunk_len = c.len };
	memcpy(e.hash, c.hash, HASH_LEN);
	OK(reader_copy_extent(tr.reader, ino, &e, 1000, sizeof(out), out));
	cr_assert(memcmp(out, c.bytes + 1000, sizeof(out)) == 0);
	/* the object holds fewer bytes than the catalog says: not handed out */
	e.chunk_len = c.len + 1;
	tr_start_reader(64 * MiB);
	FAILS(reader_copy_extent(tr.reader, ino, &e, 1000, sizeof(out), out), EIO);
	free(c.bytes);
}

/* The memory one loaded chunk of c's size holds in the cache. */
static size_t tr_footprint(const struct tr_chunk *c)
{
	struct store_chunk sc;
	OK(store_load(tr.store, c->hash, c->len, &sc));
	size_t fp = store_chunk_footprint(&sc);
	store_chunk_free(&sc);
	return fp;
}

Test(reader, the_decoded_chunk_cache_stays_within_its_budget_while_reading_ahead)
{
	enum { N = 24 };
	struct tr_chunk c[N];
	for (int i = 0; i < N; i++)
		c[i] = tr_chunk(256 * KiB, 100 + (uint64_t)i);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("big", c, N, &want, &size);
	size_t fp = tr_footprint(&c[0]);
	cr_assert_geq(fp, c[0].len);
	const uint64_t budget = 3 * fp;
	tr_start_reader(budget);

	struct reader_stats st;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t off = 0; off < size; off += 64 * KiB) { /* sequential: readahead runs */
			tr_expect_read(ino, READER_COMMITTED, want, off, 64 * KiB);
			reader_stats(tr.reader, &st);
			cr_assert_leq(st.bytes, budget, "%" PRIu64 " bytes cached, budget %" PRIu64,
				      st.bytes, budget);
		}
	}
	reader_stats(tr.reader, &st);
	cr_assert_eq(st.budget, budget);
	cr_assert_gt(st.bytes, 0, "the cache keeps what fits");
	/* 2 passes over 24 chunks through 3 slots' worth: each chunk is loaded again */
	cr_assert_geq(st.misses, 2 * N - 3, "%" PRIu64 " misses", st.misses);
	cr_assert_gt(st.hits, 0, "reads within a chunk hit");
	tr_free(want, c, N);
}

Test(reader, a_map_pins_its_chunks_until_unmap_releases_them)
{
	enum { N = 8 };
	struct tr_chunk c[N];
	for (int i = 0; i < N; i++)
		c[i] = tr_chunk(128 * KiB, 200 + (uint64_t)i);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("pins", c, N, &want, &size);
	size_t fp = tr_footprint(&c[0]);
	tr_start_reader(2 * fp); /* room for two chunks */

	/* chunk 0 pinned by a map; READER_PROBE: no readahead, counts are exact */
	struct reader_map m;
	OK(reader_map(tr.reader, ino, READER_PROBE, 0, 128 * KiB, &m));
	cr_assert_eq(m.n, 1);
	cr_assert_eq(m.len, 128 * KiB);
	const void *pinned = m.iov[0].iov_base;
	for (int i = 1; i < N; i++) /* would evict chunk 0 were it not pinned */
		tr_expect_read(ino, READER_PROBE, want, (uint64_t)i * 128 * KiB, 128 * KiB);
	cr_assert(memcmp(pinned, want, 128 * KiB) == 0, "a pinned chunk is never freed or changed");
	struct reader_stats before, after;
	reader_stats(tr.reader, &before);
	tr_expect_read(ino, READER_PROBE, want, 0, 4096);
	reader_stats(tr.reader, &after);
	cr_assert_eq(after.hits, before.hits + 1, "the pinned chunk is still cached");
	cr_assert_leq(after.bytes, 2 * fp);

	/* a second map of the same chunk shares the slot */
	struct reader_map m2;
	OK(reader_map(tr.reader, ino, READER_PROBE, 10, 100, &m2));
	cr_assert_eq(m2.iov[0].iov_base, (const char *)pinned + 10);
	reader_unmap(tr.reader, &m2);
	reader_unmap(tr.reader, &m);
	cr_assert_eq(m.n, 0);
	cr_assert_eq(m.len, 0);

	/* released: reading the others now evicts it */
	for (int i = 1; i < N; i++)
		tr_expect_read(ino, READER_PROBE, want, (uint64_t)i * 128 * KiB, 128 * KiB);
	reader_stats(tr.reader, &before);
	tr_expect_read(ino, READER_PROBE, want, 0, 4096);
	reader_stats(tr.reader, &after);
	cr_assert_eq(after.misses, before.misses + 1, "an unpinned chunk is evicted");
	tr_free(want, c, N);
}

Test(reader, a_map_of_more_pieces_than_it_holds_maps_a_prefix_and_read_takes_the_rest)
{
	enum { N = READER_MAX_PIECES + 4 };
	struct tr_chunk c[N];
	for (int i = 0; i < N; i++)
		c[i] = tr_chunk(4 * KiB + (size_t)i, 300 + (uint64_t)i);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("many", c, N, &want, &size);
	struct reader_map m;
	OK(reader_map(tr.reader, ino, READER_COMMITTED, 0, size, &m));
	cr_assert_eq(m.n, READER_MAX_PIECES);
	cr_assert_lt(m.len, size);
	size_t prefix = 0;
	for (int i = 0; i < READER_MAX_PIECES; i++)
		prefix += c[i].len;
	cr_assert_eq(m.len, prefix);
	reader_unmap(tr.reader, &m);
	tr_expect_read(ino, READER_COMMITTED, want, 0, size);
	tr_free(want, c, N);
}

Test(reader, a_reader_needs_a_load_callback)
{
	struct reader *r = (struct reader *)&r;
	const struct reader_config cfg = { .budget_bytes = MiB };
	FAILS(reader_new(&cfg, tr.cat, NULL, &r), EINVAL);
	cr_assert_null(r);
}

/* Invariant 3: readers that want a chunk while another loads it follow that
 * load (a flight on its hash) and pin the slot it filled: N readers of one
 * chunk at once load it once. */
struct tr_concurrent {
	uint64_t ino;
	const uint8_t *want;
	size_t len;
	pthread_barrier_t *start;
};

static void *tr_concurrent_main(void *p)
{
	struct tr_concurrent *a = p;
	pthread_barrier_wait(a->start);
	uint8_t *got = malloc(a->len);
	int rc = got ? reader_read(tr.reader, a->ino, READER_COMMITTED, 0, a->len, (char *)got)
		     : -ENOMEM;
	if (rc == 0 && memcmp(got, a->want, a->len) != 0)
		rc = -EIO;
	free(got);
	return (void *)(intptr_t)rc;
}

Test(reader, readers_of_one_chunk_at_once_load_it_once)
{
	enum { N = 8 };
	struct tr_chunk c = tr_chunk(256 << 10, 41);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("shared", &c, 1, &want, &size);
	tr.load_delay_ms = 100;
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, N);
	struct tr_concurrent a = { .ino = ino, .want = want, .len = size, .start = &start };
	pthread_t th[N];
	for (int i = 0; i < N; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, tr_concurrent_main, &a), 0);
	for (int i = 0; i < N; i++) {
		void *rc;
		pthread_join(th[i], &rc);
		cr_assert_eq((intptr_t)rc, 0, "reader %d: %d", i, (int)(intptr_t)rc);
	}
	pthread_barrier_destroy(&start);
	cr_assert_eq(atomic_load(&tr.loads), 1, "%d loads of one chunk", atomic_load(&tr.loads));
	struct reader_stats st;
	reader_stats(tr.reader, &st);
	cr_assert_eq(st.misses, 1);
	cr_assert_eq(st.hits, N - 1);
	tr_free(want, &c, 1);
}

Test(reader, a_failed_load_frees_its_slot_and_the_next_read_loads_again)
{
	struct tr_chunk c = tr_chunk(64 << 10, 42);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("retry", &c, 1, &want, &size);
	OK(store_remove(tr.store, c.hash));
	uint8_t *got = malloc(size);
	cr_assert_not_null(got);
	cr_assert_eq(reader_read(tr.reader, ino, READER_COMMITTED, 0, size, (char *)got), -EIO);
	OK(store_put(tr.store, c.hash, c.bytes, c.len, 0, NULL)); /* back: the next read loads */
	OK(reader_read(tr.reader, ino, READER_COMMITTED, 0, size, (char *)got));
	cr_assert(memcmp(got, want, size) == 0);
	cr_assert_eq(atomic_load(&tr.loads), 2);
	free(got);
	tr_free(want, &c, 1);
}

/* Readahead over a slow BACKING: a sequential read has several chunks loading
 * at once (parallel prefetch), they land out of order, and every byte read is
 * the file's. */
Test(reader, readahead_loads_several_chunks_at_once_and_the_bytes_stay_right)
{
	enum { N = 16 };
	struct tr_chunk c[N];
	for (int i = 0; i < N; i++)
		c[i] = tr_chunk(128 * KiB, 300 + (uint64_t)i);
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of("ahead", c, N, &want, &size);
	tr.load_delay_ms = 30;
	tr.jitter = true;
	for (size_t off = 0; off < size; off += 32 * KiB)
		tr_expect_read(ino, READER_COMMITTED, want, off, 32 * KiB);
	cr_assert_geq(atomic_load(&tr.max_in_flight), 4, "at most %d loads at once",
		      atomic_load(&tr.max_in_flight));
	cr_assert_eq(atomic_load(&tr.fetch_aheads), 0, "64 MiB holds every chunk ahead");
	struct reader_stats st;
	reader_stats(tr.reader, &st);
	cr_assert_eq(st.misses, N, "each chunk loaded once: %" PRIu64, st.misses);
	tr_free(want, c, N);
}

struct tr_seq_reader {
	uint64_t ino;
	const uint8_t *want;
	size_t size;
	int rc;
};

static void *tr_seq_main(void *p)
{
	struct tr_seq_reader *a = p;
	uint8_t *got = malloc(64 * KiB);
	a->rc = got ? 0 : -ENOMEM;
	for (size_t off = 0; a->rc == 0 && off < a->size; off += 64 * KiB) {
		a->rc = reader_read(tr.reader, a->ino, READER_COMMITTED, off, 64 * KiB, (char *)got);
		if (a->rc == 0 && memcmp(got, a->want + off, 64 * KiB) != 0)
			a->rc = -EBADMSG;
	}
	free(got);
	return NULL;
}

/* Four files read at once through a budget of six chunks: readahead of all
 * of them never holds more than the budget (counted while loads run), the
 * chunks it has no room for go to fetch_ahead (the disk cache), and each
 * reader gets its own file's bytes. */
Test(reader, readahead_of_files_read_at_once_stays_within_the_budget)
{
	enum { F = 4, N = 12 };
	struct tr_chunk c[F][N];
	uint8_t *want[F];
	size_t size[F];
	struct tr_seq_reader a[F];
	for (int f = 0; f < F; f++) {
		for (int i = 0; i < N; i++)
			c[f][i] = tr_chunk(128 * KiB, 400 + (uint64_t)(f * N + i));
		char name[16];
		snprintf(name, sizeof(name), "f%d", f);
		uint64_t ino = tr_file_of(name, c[f], N, &want[f], &size[f]);
		a[f] = (struct tr_seq_reader){ .ino = ino, .want = want[f], .size = size[f] };
	}
	const uint64_t budget = 6 * tr_footprint(&c[0][0]);
	tr_start_reader(budget);
	tr.load_delay_ms = 5;
	tr.jitter = true;
	pthread_t th[F];
	for (int f = 0; f < F; f++)
		cr_assert_eq(pthread_create(&th[f], NULL, tr_seq_main, &a[f]), 0);
	for (int f = 0; f < F; f++) {
		pthread_join(th[f], NULL);
		cr_assert_eq(a[f].rc, 0, "reader of file %d: %d", f, a[f].rc);
	}
	cr_assert_leq(atomic_load(&tr.max_bytes), budget, "%" PRIu64 " bytes held, budget %"
		      PRIu64, (uint64_t)atomic_load(&tr.max_bytes), budget);
	cr_assert_gt(atomic_load(&tr.fetch_aheads), 0, "chunks without room go to the disk cache");
	cr_assert_geq(atomic_load(&tr.max_in_flight), 2);
	for (int f = 0; f < F; f++)
		tr_free(want[f], c[f], N);
}

/* Invariant 4: a sequential reader has at most -o prefetch chunks loading
 * ahead of it, several at once; with none, only its own loads run. */
Test(reader, the_readahead_window_is_the_prefetch_option_at_most)
{
	enum { N = 16 };
	struct tr_chunk c[N];
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of_random("window", c, N, 128 * KiB, 500, &want, &size);
	tr.load_delay_ms = 20;
	tr.jitter = true;
	tr_start_reader_ahead(64 * MiB, 3);
	for (size_t off = 0; off < size; off += 64 * KiB)
		tr_expect_read(ino, READER_COMMITTED, want, off, 64 * KiB);
	struct reader_stats st;
	reader_stats(tr.reader, &st);
	cr_assert_leq(atomic_load(&tr.max_in_flight), 3 + 1, "%d loads at once, window 3 + the read's own",
		      atomic_load(&tr.max_in_flight));
	cr_assert_geq(atomic_load(&tr.max_in_flight), 2, "readahead runs beside the reads");
	cr_assert_gt(st.ahead_loaded, 0);
	cr_assert_gt(st.ahead_hits + st.waits, 0, "reads found chunks read ahead, or waited for them");
	cr_assert_eq(atomic_load(&tr.loads), N, "each chunk loaded once: %d", atomic_load(&tr.loads));

	tr_start_reader_ahead(64 * MiB, -1); /* -o prefetch=0 */
	atomic_store(&tr.loads, 0);
	atomic_store(&tr.max_in_flight, 0);
	for (size_t off = 0; off < size; off += 64 * KiB)
		tr_expect_read(ino, READER_COMMITTED, want, off, 64 * KiB);
	reader_stats(tr.reader, &st);
	cr_assert_eq(st.ahead_loaded, 0, "nothing read ahead with prefetch=0");
	cr_assert_eq(atomic_load(&tr.max_in_flight), 1);
	cr_assert_eq(atomic_load(&tr.loads), N);
	cr_assert_eq(st.own_loads, N);
	tr_free(want, c, N);
}

/* Invariants 1 and 4: a damaged chunk that the readahead meets is not kept;
 * the reads of its bytes fail with EIO (each time), every other read gets the
 * file's bytes, and once the object is good again the chunk reads right. */
Test(reader, a_damaged_chunk_read_ahead_is_never_handed_out)
{
	enum { N = 8 };
	struct tr_chunk c[N];
	uint8_t *want;
	size_t size;
	uint64_t ino = tr_file_of_random("damaged", c, N, 128 * KiB, 600, &want, &size);
	tr_corrupt(&c[3]);
	tr.load_delay_ms = 5;
	char *out = malloc(64 * KiB);
	cr_assert_not_null(out);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t off = 0; off < size; off += 64 * KiB) {
			if (off / (128 * KiB) == 3) {
				memset(out, 0x5A, 64 * KiB);
				FAILS(reader_read(tr.reader, ino, READER_COMMITTED, off, 64 * KiB, out), EIO);
				for (size_t i = 0; i < 64 * KiB; i++)
					cr_assert_eq((uint8_t)out[i], 0x5A, "byte %zu written on a failed read", i);
			} else {
				tr_expect_read(ino, READER_COMMITTED, want, off, 64 * KiB);
			}
		}
	}
	struct reader_stats st;
	reader_stats(tr.reader, &st);
	cr_assert_gt(st.ahead_loaded, 0, "the readahead ran");
	OK(store_remove(tr.store, c[3].hash)); /* repaired */
	OK(store_put(tr.store, c[3].hash, c[3].bytes, c[3].len, 0, NULL));
	tr_expect_read(ino, READER_COMMITTED, want, 0, size);
	free(out);
	tr_free(want, c, N);
}
