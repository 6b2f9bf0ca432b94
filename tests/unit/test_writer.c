/* Unit tests for fs/writer.c and the chunk put under it (fs/chunkput.c),
 * with a real catalog, store, recent and store queue, and fakes of the
 * cache and the reader handed in as handles: replicas written at once by
 * several threads are cut into exactly the chunks one writer alone makes,
 * every chunk is named by the SHA-256 of its bytes and its object holds them,
 * most chunks are taken from another writer's (recent.h R4, chunk_follows)
 * and each object is written once (flights); a replica that differs from the
 * others is not taken for them; reads, truncates, gaps and out-of-order
 * writes in the middle of a followed chunk see and keep the right bytes;
 * objects are written behind the writer (storeq) and a failure there fails
 * the file's commit; with a small -o writebuf, many files written at once
 * keep the writers' buffers within it (staged past it) and read back whole. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunkput.h"
#include "hash.h"
#include "pgtest.h"
#include "recent.h"
#include "store.h"
#include "storeq.h"
#include "support.h"
#include "wbuf.h"
#include "writer.h"

/* ---- fakes of the cache and the reader (chunkput.h handles) ---- */

/* The cache: counts the objects chunkput reports written (dirty_add). */
struct tw_cache {
	size_t objects;
};

static int tw_cache_wait(struct cache *c, uint64_t len)
{
	(void)c;
	(void)len;
	return 0;
}

static void tw_cache_dirty_add(struct cache *c, uint64_t stored_len)
{
	(void)stored_len;
	__atomic_fetch_add(&((struct tw_cache *)c)->objects, 1, __ATOMIC_RELAXED);
}

static int tw_cache_make_room(struct cache *c, uint64_t len)
{
	(void)c;
	(void)len;
	return -ENOSPC; /* nothing to evict */
}

/* The reader: a file's extents read straight from the catalog and store. */
struct tw_reader {
	struct cat *cat;
	struct store *store;
};

static int tw_copy_extent(struct reader *r, uint64_t ino, const struct cat_extent *ext,
			  uint64_t chunk_off, size_t len, char *out)
{
	struct tw_reader *tr = (struct tw_reader *)r;
	(void)ino;
	size_t got = 0;
	uint8_t *buf = malloc(ext->chunk_len);
	cr_assert_not_null(buf);
	int rc = store_get(tr->store, ext->hash, buf, ext->chunk_len, &got);
	if (rc == 0 && (got != ext->chunk_len || chunk_off + len > got))
		rc = -EIO;
	if (rc == 0)
		memcpy(out, buf + chunk_off, len);
	free(buf);
	return rc;
}

static int tw_read(struct reader *r, uint64_t ino, enum reader_source src, uint64_t off,
		   size_t len, char *out)
{
	struct tw_reader *tr = (struct tw_reader *)r;
	memset(out, 0, len); /* holes */
	uint64_t end = off + len, pos = off;
	struct cat_extent ext[16];
	int n;
	while (pos < end) {
		n = src == READER_PENDING ? cat_pending_extents(tr->cat, ino, pos, ext, 16)
					  : cat_extents(tr->cat, ino, pos, ext, 16);
		if (n < 0)
			return n;
		if (n == 0)
			break;
		for (int i = 0; i < n; i++) {
			uint64_t a = ext[i].off > off ? ext[i].off : off;
			uint64_t b = ext[i].off + ext[i].len < end ? ext[i].off + ext[i].len : end;
			if (a < b) {
				int rc = tw_copy_extent(r, ino, &ext[i],
							ext[i].chunk_off + (a - ext[i].off),
							(size_t)(b - a), out + (a - off));
				if (rc != 0)
					return rc;
			}
			pos = ext[i].off + ext[i].len;
		}
		if (n < 16)
			break;
	}
	return 0;
}

/* ---- fixture ---- */

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static struct {
	char dir[128];
	char cat_path[192];
	char staging_dir[192];
	struct chunker_params chunking;
	struct cat *cat;
	struct store *store;
	struct recent *recent;
	struct storeq *storeq;
	struct tw_cache cache;
	struct tw_reader reader;
	struct chunkput *cp;
} fx;

static uint64_t tw_writebuf; /* the next chunk put's -o writebuf; 0: none */

/* A chunk put over the fixture's handles; recent may be NULL. */
static struct chunkput *tw_chunkput(struct recent *recent)
{
	struct chunkput_config cfg = { .chunking = fx.chunking, .staging_dir = fx.staging_dir,
				       .writebuf = tw_writebuf };
	struct chunkput_cache cache = { (struct cache *)&fx.cache, tw_cache_wait,
					tw_cache_dirty_add, tw_cache_wait, tw_cache_make_room };
	struct chunkput_kick kick = { NULL, NULL };
	struct chunkput_reader reader = { (struct reader *)&fx.reader, tw_read, tw_copy_extent };
	struct chunkput *cp;
	OK(chunkput_new(&cfg, fx.cat, fx.store, fx.storeq, recent, &cache, &kick, &reader, &cp));
	return cp;
}

/* The fixture's store, chunk put and the rest over fx.cat (opened). */
static void tw_setup_over_cat(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/store", fx.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	OK(store_open(path, &fx.store));
	store_set_direct_writes(fx.store, true);
	snprintf(fx.staging_dir, sizeof(fx.staging_dir), "%s/staging", fx.dir);
	cr_assert_eq(mkdir(fx.staging_dir, 0700), 0);
	/* small chunks (all of them >= RECENT_MIN_LEN), so that a few MiB make many */
	fx.chunking = (struct chunker_params){ .min_size = 64 * KiB, .avg_size = 128 * KiB,
						  .max_size = 512 * KiB };
	OK(recent_new(16 * MiB, &fx.recent)); /* the daemon's budget */
	OK(storeq_start(3, 6, &fx.storeq)); /* the daemon's (main.c) */
	fx.reader = (struct tw_reader){ fx.cat, fx.store };
	fx.cp = tw_chunkput(fx.recent);
}

static void tw_setup(void)
{
	memset(&fx, 0, sizeof(fx));
	tw_writebuf = 0;
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "writer");
	ts_cat_open_in(fx.dir, "catalog.db", fx.cat_path, sizeof(fx.cat_path), &fx.cat);
	tw_setup_over_cat();
}

/* The writer's handles other than the catalog, stopped and freed. */
static void tw_teardown_but_cat(void)
{
	chunkput_stop_queue(fx.cp); /* stops fx.storeq */
	chunkput_free(fx.cp);
	recent_free(fx.recent);
	store_close(fx.store);
}

static void tw_teardown(void)
{
	tw_teardown_but_cat();
	ts_cat_close_checked(&fx.cat);
	ts_tmpdir_remove(fx.dir);
}

static uint64_t tw_file(const char *name)
{
	return ts_mk(fx.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
}

/* The file's committed extents, in order (at most max). */
static int tw_extents(uint64_t ino, struct cat_extent *out, int max)
{
	int n = 0;
	uint64_t pos = 0;
	for (;;) {
		int got = cat_extents(fx.cat, ino, pos, out + n, max - n < 16 ? max - n : 16);
		cr_assert_geq(got, 0);
		if (got == 0)
			break;
		n += got;
		pos = out[n - 1].off + out[n - 1].len;
		if (n == max)
			break;
	}
	return n;
}

/* The committed file is exactly want[0..len): every extent's object holds
 * bytes whose SHA-256 is its name, and those are the file's bytes. */
static void tw_check_file(uint64_t ino, const uint8_t *want, size_t len)
{
	struct cat_inode in;
	OK(cat_getattr(fx.cat, ino, &in));
	cr_assert_eq(in.size, len);
	static struct cat_extent ext[4096];
	int n = tw_extents(ino, ext, 4096);
	uint64_t pos = 0;
	uint8_t *buf = malloc(fx.chunking.max_size);
	for (int i = 0; i < n; i++) {
		cr_assert_geq(ext[i].off, pos, "extent %d at %" PRIu64 " overlaps", i, ext[i].off);
		for (; pos < ext[i].off; pos++) /* a hole reads as zeros */
			cr_assert_eq(want[pos], 0, "byte %" PRIu64 " is in a hole", pos);
		size_t got;
		OK(store_get(fx.store, ext[i].hash, buf, fx.chunking.max_size, &got));
		cr_assert_eq(got, ext[i].chunk_len);
		uint8_t h[HASH_LEN];
		hash_sha256(buf, got, h);
		cr_assert_arr_eq(h, ext[i].hash, HASH_LEN, "chunk %d is not named by its SHA-256", i);
		cr_assert(memcmp(buf + ext[i].chunk_off, want + ext[i].off, ext[i].len) == 0,
			  "extent %d: bytes differ from what was written", i);
		pos += ext[i].len;
	}
	for (; pos < len; pos++)
		cr_assert_eq(want[pos], 0, "byte %" PRIu64 " is in a hole", pos);
	free(buf);
}

/* Writes data[0..len) through a writer in pieces of step bytes (step 0:
 * random sizes from 1 byte to 1 MiB), commits and closes. */
static void tw_write_all(uint64_t ino, const uint8_t *data, size_t len, size_t step, uint64_t seed)
{
	struct writer *w;
	OK(writer_new(fx.cp, ino, 0, &w));
	uint64_t x = seed | 1;
	for (size_t off = 0; off < len;) {
		size_t n = step;
		if (!n) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			n = x % 4 == 0 ? 1 + x % 4097 : 1 + (x >> 8) % MiB;
		}
		if (n > len - off)
			n = len - off;
		OK(writer_write(w, (const char *)data + off, n, off));
		off += n;
	}
	OK(writer_commit(w, false));
	writer_free(w);
}

/* A replica: a header of hlen bytes that depends on i, then the payload. */
static uint8_t *tw_replica(const uint8_t *payload, size_t plen, size_t hlen, int i)
{
	uint8_t *b = malloc(hlen + plen);
	cr_assert_not_null(b);
	uint8_t *h = ts_random(hlen, 1000 + (uint64_t)i);
	memcpy(b, h, hlen);
	memcpy(b + hlen, payload, plen);
	free(h);
	return b;
}

struct tw_job {
	uint64_t ino;
	const uint8_t *data;
	size_t len, step;
	uint64_t seed;
};

static void *tw_job_run(void *arg)
{
	struct tw_job *j = arg;
	tw_write_all(j->ino, j->data, j->len, j->step, j->seed);
	return NULL;
}

/* Writes the n files at once, one thread each. */
static void tw_write_at_once(struct tw_job *jobs, int n)
{
	pthread_t t[16];
	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, tw_job_run, &jobs[i]), 0);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

/* The chunks one writer alone makes of data (no recent: the chunker and
 * zipcut decide every cut), as extents of a scratch file. */
static int tw_reference(const uint8_t *data, size_t len, const char *name,
			struct cat_extent *out, int max)
{
	struct chunkput *cp = fx.cp;
	fx.cp = tw_chunkput(NULL);
	uint64_t ino = tw_file(name);
	tw_write_all(ino, data, len, MiB, 1);
	chunkput_free(fx.cp);
	fx.cp = cp;
	return tw_extents(ino, out, max);
}

static void tw_same_chunks(uint64_t ino, const uint8_t *data, size_t len, const char *ref_name)
{
	static struct cat_extent got[4096], want[4096];
	int n = tw_extents(ino, got, 4096);
	int m = tw_reference(data, len, ref_name, want, 4096);
	cr_assert_eq(n, m, "%d chunks, one writer alone makes %d", n, m);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(got[i].off, want[i].off, "chunk %d", i);
		cr_assert_eq(got[i].len, want[i].len, "chunk %d", i);
		cr_assert_arr_eq(got[i].hash, want[i].hash, HASH_LEN, "chunk %d", i);
	}
}

TestSuite(writer, .init = tw_setup, .fini = tw_teardown, .timeout = 120);

Test(writer, replicas_written_at_once_are_cut_like_one_writer_and_mostly_followed)
{
	enum { N = 6 };
	size_t plen = 6 * MiB;
	uint8_t *payload = ts_random(plen, 7);
	uint8_t *rep[N];
	struct tw_job jobs[N];
	for (int i = 0; i < N; i++) {
		size_t hlen = (size_t)i * 200 / (N - 1); /* as the bench's replicas */
		char name[32];
		snprintf(name, sizeof(name), "rank%d.pt", i);
		rep[i] = tw_replica(payload, plen, hlen, i);
		jobs[i] = (struct tw_job){ .ino = tw_file(name), .data = rep[i], .len = hlen + plen,
					   .step = i % 2 ? 0 : MiB, .seed = 99 + (uint64_t)i };
	}
	tw_write_at_once(jobs, N);
	for (int i = 0; i < N; i++)
		tw_check_file(jobs[i].ino, rep[i], jobs[i].len);
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ref%d", i);
		tw_same_chunks(jobs[i].ino, rep[i], jobs[i].len, name);
	}
	struct recent_stats st;
	recent_stats(fx.recent, &st);
	cr_assert_gt(st.follows, 0, "no chunk was taken from another writer");
	cr_log_info("chunks hashed %" PRIu64 ", reused %" PRIu64 " (followed %" PRIu64
		    "), waits %" PRIu64 ", objects written %zu",
		    st.misses, st.hits, st.follows, st.follow_waits, fx.cache.objects);
	for (int i = 0; i < N; i++)
		free(rep[i]);
	free(payload);
}

Test(writer, a_second_writer_of_the_same_bytes_follows_every_chunk_and_stores_none)
{
	size_t len = 5 * MiB + 12345;
	uint8_t *data = ts_random(len, 3);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, MiB, 1);
	size_t objects = fx.cache.objects;
	struct recent_stats st0, st1;
	recent_stats(fx.recent, &st0);
	tw_write_all(b, data, len, 0, 5); /* random write sizes */
	recent_stats(fx.recent, &st1);
	tw_check_file(b, data, len);
	static struct cat_extent ea[4096], eb[4096];
	int na = tw_extents(a, ea, 4096), nb = tw_extents(b, eb, 4096);
	cr_assert_eq(na, nb);
	for (int i = 0; i < na; i++)
		cr_assert(ea[i].off == eb[i].off && ea[i].len == eb[i].len &&
				  memcmp(ea[i].hash, eb[i].hash, HASH_LEN) == 0,
			  "chunk %d differs", i);
	/* all but the first (no chain yet) and the last (cut at close) chunk */
	cr_assert_geq(st1.follows - st0.follows, (uint64_t)na - 2, "followed %" PRIu64 " of %d",
		      st1.follows - st0.follows, na);
	cr_assert_eq(st1.misses, st0.misses + 0, "b hashed chunks a had hashed");
	cr_assert_eq(fx.cache.objects, objects, "b wrote objects a had written");
	free(data);
}

Test(writer, a_replica_that_differs_is_not_taken_for_the_others)
{
	enum { N = 4 };
	size_t plen = 4 * MiB;
	uint8_t *payload = ts_random(plen, 11);
	uint8_t *rep[N];
	struct tw_job jobs[N];
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "r%d", i);
		rep[i] = tw_replica(payload, plen, 64 * (size_t)i, i);
		jobs[i] = (struct tw_job){ .ino = tw_file(name), .data = rep[i],
					   .len = 64 * (size_t)i + plen, .step = 0,
					   .seed = 7 + (uint64_t)i };
	}
	/* replica 2 differs by one byte in the middle of chunks, here and there */
	for (size_t at = 300 * KiB; at < plen; at += 700 * KiB)
		rep[2][64 * 2 + at] ^= 0x20;
	tw_write_at_once(jobs, N);
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ref%d", i);
		tw_check_file(jobs[i].ino, rep[i], jobs[i].len);
		tw_same_chunks(jobs[i].ino, rep[i], jobs[i].len, name);
	}
	for (int i = 0; i < N; i++)
		free(rep[i]);
	free(payload);
}

/* A file being written is read (writer_read) while its writer follows: the
 * bytes compared so far live only in recent's copy. */
Test(writer, reads_in_the_middle_of_a_followed_chunk_see_the_written_bytes)
{
	size_t len = 3 * MiB;
	uint8_t *data = ts_random(len, 21);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, MiB, 1);
	struct writer *w;
	OK(writer_new(fx.cp, b, 0, &w));
	uint8_t *out = malloc(len);
	size_t step = 37 * KiB + 3;
	bool seen_following = false;
	for (size_t off = 0; off < len; off += step) {
		size_t n = step < len - off ? step : len - off;
		OK(writer_write(w, (const char *)data + off, n, off));
		seen_following |= writer_following(w) > 0;
		size_t end = off + n, got;
		for (size_t from = end > 600 * KiB ? end - 600 * KiB : 0; from < end; from += 91 * KiB) {
			OK(writer_read(w, (char *)out, end - from, from, &got));
			cr_assert_eq(got, end - from);
			cr_assert(memcmp(out, data + from, got) == 0, "read [%zu, %zu) differs", from,
				  end);
		}
	}
	cr_assert(seen_following, "the test never read while following");
	OK(writer_commit(w, false));
	writer_free(w);
	tw_check_file(b, data, len);
	free(out);
	free(data);
}

/* Truncates, gaps and out-of-order writes while following: the file ends as
 * the same operations make it on a plain buffer. */
Test(writer, truncate_gap_and_rewrite_while_following_keep_the_right_bytes)
{
	size_t len = 4 * MiB;
	uint8_t *data = ts_random(len, 31);
	uint64_t a = tw_file("a");
	tw_write_all(a, data, len, MiB, 1);
	for (int kind = 0; kind < 3; kind++) {
		char name[16];
		snprintf(name, sizeof(name), "b%d", kind);
		uint64_t b = tw_file(name);
		uint8_t *want = calloc(1, 2 * len);
		size_t size = 0;
		struct writer *w;
		OK(writer_new(fx.cp, b, 0, &w));
		size_t off = 0, step = 50 * KiB;
		while (off < len && !(writer_following(w) > 100 * KiB && off > MiB)) {
			OK(writer_write(w, (const char *)data + off, step, off));
			memcpy(want + off, data + off, step);
			off += step;
			size = off;
		}
		cr_assert(writer_following(w) > 0, "never followed");
		if (kind == 0) { /* truncate into the followed chunk, then go on */
			size_t cut = off - 60 * KiB;
			OK(writer_truncate(w, cut));
			size = cut;
			OK(writer_write(w, (const char *)data + cut, len - cut, cut));
			memcpy(want + cut, data + cut, len - cut);
			size = len;
		} else if (kind == 1) { /* a gap past the end */
			size_t at = off + 100 * KiB;
			OK(writer_write(w, (const char *)data + at, MiB, at));
			memcpy(want + at, data + at, MiB);
			size = at + MiB;
		} else { /* out of order: into the followed chunk's bytes */
			size_t at = off - 30 * KiB;
			uint8_t junk[1000];
			memset(junk, 0x5a, sizeof(junk));
			OK(writer_write(w, (const char *)junk, sizeof(junk), at));
			memcpy(want + at, junk, sizeof(junk));
			OK(writer_write(w, (const char *)data + off, len - off, off));
			memcpy(want + off, data + off, len - off);
			size = len;
		}
		OK(writer_commit(w, false));
		writer_free(w);
		tw_check_file(b, want, size);
		free(want);
	}
	free(data);
}

/* A chunk cut by a close (or a gap, a zip record) ends where the chunker
 * would not have cut: it predicts nothing, and a longer stream of the same
 * bytes is cut as one writer alone cuts it. */
Test(writer, a_chunk_cut_short_by_a_close_is_not_taken_as_a_whole_chunk)
{
	size_t len = 4 * MiB;
	uint8_t *data = ts_random(len, 41);
	uint64_t b = tw_file("b");
	for (size_t part = 1 * MiB + 77777; part < len; part += MiB) { /* shorter saves */
		char name[32];
		snprintf(name, sizeof(name), "a%zu", part);
		tw_write_all(tw_file(name), data, part, 0, part);
	}
	tw_write_all(b, data, len, 0, 3);
	tw_check_file(b, data, len);
	tw_same_chunks(b, data, len, "ref");
	struct recent_stats st;
	recent_stats(fx.recent, &st);
	cr_assert_gt(st.follows, 0);
	free(data);
}

/* ---- torch.save-like archives: zip cuts still decide (no prediction) ---- */

static void tw_put(uint8_t **b, size_t *len, const void *p, size_t n)
{
	*b = realloc(*b, *len + n);
	cr_assert_not_null(*b);
	memcpy(*b + *len, p, n);
	*len += n;
}

static void tw_le(uint8_t **b, size_t *len, uint64_t v, int bytes)
{
	uint8_t t[8];
	for (int i = 0; i < bytes; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	tw_put(b, len, t, (size_t)bytes);
}

/* An archive as torch.save writes it: stored records named prefix/data/k,
 * sizes in data descriptors, the same tensors in every replica. */
static uint8_t *tw_archive(const char *prefix, size_t *out_len)
{
	uint8_t *b = NULL;
	size_t len = 0;
	for (int k = 0; k < 6; k++) {
		char name[64];
		snprintf(name, sizeof(name), "%s/data/%d", prefix, k);
		size_t size = (size_t)(k % 3 == 0 ? 40 : 300 + 250 * k) * KiB + 13 * (size_t)k;
		tw_put(&b, &len, "PK\3\4", 4);
		tw_le(&b, &len, 20, 2);
		tw_le(&b, &len, 0x0808, 2);
		tw_le(&b, &len, 0, 2);
		tw_le(&b, &len, 0, 8);
		tw_le(&b, &len, 0, 8);
		tw_le(&b, &len, strlen(name), 2);
		size_t pad = (64 - (len + 2 + strlen(name) + 4) % 64) % 64; /* data 64-aligned */
		tw_le(&b, &len, 4 + pad, 2);
		tw_put(&b, &len, name, strlen(name));
		tw_le(&b, &len, 0x4b46, 2); /* torch's "FB" padding field */
		tw_le(&b, &len, pad, 2);
		uint8_t *zeros = calloc(1, pad + 1);
		tw_put(&b, &len, zeros, pad);
		free(zeros);
		uint8_t *data = ts_random(size, 500 + (uint64_t)k);
		tw_put(&b, &len, data, size);
		free(data);
		tw_put(&b, &len, "PK\7\10", 4);
		tw_le(&b, &len, 0, 4);
		tw_le(&b, &len, size, 4);
		tw_le(&b, &len, size, 4);
	}
	tw_put(&b, &len, "PK\1\2", 4); /* the central directory's start */
	tw_le(&b, &len, 0, 8);
	*out_len = len;
	return b;
}

Test(writer, torch_style_replicas_at_once_keep_their_zip_cuts)
{
	enum { N = 4 };
	uint8_t *rep[N];
	struct tw_job jobs[N];
	for (int i = 0; i < N; i++) {
		char name[32], prefix[32];
		snprintf(name, sizeof(name), "rank%d.pt", i);
		snprintf(prefix, sizeof(prefix), "model_rank%0*d", i + 1, i);
		size_t len;
		rep[i] = tw_archive(prefix, &len);
		jobs[i] = (struct tw_job){ .ino = tw_file(name), .data = rep[i], .len = len,
					   .step = i % 2 ? 0 : MiB, .seed = 17 + (uint64_t)i };
	}
	tw_write_at_once(jobs, N);
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ref%d", i);
		tw_check_file(jobs[i].ino, rep[i], jobs[i].len);
		tw_same_chunks(jobs[i].ino, rep[i], jobs[i].len, name);
	}
	/* the large tensors' chunks are shared: stored about once */
	struct cat_extent e0[256], e1[256];
	int n0 = tw_extents(jobs[0].ino, e0, 256), n1 = tw_extents(jobs[1].ino, e1, 256), same = 0;
	for (int i = 0; i < n0; i++)
		for (int j = 0; j < n1; j++)
			same += memcmp(e0[i].hash, e1[j].hash, HASH_LEN) == 0;
	cr_assert_geq(same, n0 / 2, "replicas share %d of %d chunks", same, n0);
	for (int i = 0; i < N; i++)
		free(rep[i]);
}

/* ---- store-behind (storeq) ---- */

static unsigned long long tw_behind(void)
{
	struct storeq_stats st;
	storeq_stats(fx.storeq, &st);
	return st.behind;
}

Test(writer, objects_are_written_behind_the_writer_and_committed_whole)
{
	size_t len = 8 * MiB + 4321;
	uint8_t *data = ts_random(len, 41);
	uint64_t a = tw_file("a");
	unsigned long long before = tw_behind();
	tw_write_all(a, data, len, MiB, 1);
	cr_assert_gt(tw_behind(), before, "no object was written behind the writer");
	tw_check_file(a, data, len); /* every extent's object is there, named right */
	free(data);
}

/* The store's tmp/ is made a file: every object write fails. Files of one
 * or two chunks, one at a time, so that every object goes behind the writer
 * (the queue is never full): the commit must fail (writer.h invariant 4)
 * and keep the file's committed (empty) content. */
Test(writer, a_store_failing_behind_the_writer_fails_its_commit)
{
	char tmp[256], away[256];
	snprintf(tmp, sizeof(tmp), "%s/store/tmp", fx.dir);
	snprintf(away, sizeof(away), "%s/store/tmp.away", fx.dir);
	cr_assert_eq(rename(tmp, away), 0);
	FILE *f = fopen(tmp, "w");
	cr_assert_not_null(f);
	fclose(f);
	size_t len = 200 * KiB;
	for (int i = 0; i < 3; i++) {
		uint8_t *data = ts_random(len, 43 + (uint64_t)i);
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		uint64_t ino = tw_file(name);
		unsigned long long before = tw_behind();
		struct writer *w;
		OK(writer_new(fx.cp, ino, 0, &w));
		int rc = writer_write(w, (const char *)data, len, 0);
		if (rc == 0)
			rc = writer_commit(w, false);
		/* the store's error, not the catalog's refusal of unstored chunks */
		cr_assert_eq(rc, -ENOTDIR, "file %d: commit returned %d (%s)", i, rc, strerror(-rc));
		cr_assert_eq(writer_commit(w, true), rc, "file %d: the first error is not kept", i);
		writer_free(w); /* waits for its flights */
		cr_assert_gt(tw_behind(), before, "file %d: no object was tried behind the writer", i);
		struct cat_inode in;
		OK(cat_getattr(fx.cat, ino, &in));
		cr_assert_eq(in.size, 0, "file %d: a failed file was committed", i);
		free(data);
	}
	cr_assert_eq(unlink(tmp), 0);
	cr_assert_eq(rename(away, tmp), 0);
}

/* ---- one copy per unique chunk (recent.h R6) ---- */

/* Unique bytes in writes of every size: most chunks go to recent with the
 * buffer they were written into (the bytes after their end copied into the
 * next buffer), and every byte reads back right, from the pending chunks
 * before the commit and from the objects after it, each named by its
 * SHA-256. */
Test(writer, unique_chunks_go_to_recent_with_their_buffer_and_keep_every_byte)
{
	size_t len = 12 * MiB + 777;
	uint8_t *data = ts_random(len, 90);
	uint64_t ino = tw_file("u");
	struct recent_stats st0, st1;
	recent_stats(fx.recent, &st0);
	struct writer *w;
	OK(writer_new(fx.cp, ino, 0, &w));
	uint64_t x = 12345;
	for (size_t off = 0; off < len;) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t n = x % 3 == 0 ? 1 + x % 5000 : x % 3 == 1 ? 1 + (x >> 8) % (300 * KiB)
								   : 1 + (x >> 8) % (2 * MiB);
		if (n > len - off)
			n = len - off;
		OK(writer_write(w, (const char *)data + off, n, off));
		off += n;
	}
	uint8_t *back = malloc(len);
	size_t got;
	OK(writer_read(w, (char *)back, len, 0, &got));
	cr_assert_eq(got, len);
	cr_assert(memcmp(back, data, len) == 0, "the pending file reads other bytes");
	OK(writer_commit(w, false));
	writer_free(w);
	tw_check_file(ino, data, len);
	recent_stats(fx.recent, &st1);
	uint64_t chunks = st1.misses - st0.misses, images = st1.images - st0.images;
	cr_log_info("%" PRIu64 " chunks hashed, %" PRIu64 " kept with their buffer", chunks, images);
	cr_assert_gt(chunks, 40);
	cr_assert_geq(images, chunks * 3 / 4, "only %" PRIu64 " of %" PRIu64
		      " chunks went to recent with their buffer", images, chunks);
	free(back);
	free(data);
}

/* Replicas after a unique file: the kept buffers are compared and followed
 * as copies were (R1, R4), and the replicas' bytes are right. */
Test(writer, replicas_of_a_file_written_by_buffer_hand_over_are_followed_byte_for_byte)
{
	size_t len = 6 * MiB + 99;
	uint8_t *data = ts_random(len, 91);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, 0, 5);
	struct recent_stats st0, st1;
	recent_stats(fx.recent, &st0);
	cr_assert_gt(st0.images, 0);
	size_t objects = fx.cache.objects;
	tw_write_all(b, data, len, 0, 6);
	recent_stats(fx.recent, &st1);
	cr_assert_gt(st1.hits - st0.hits, 0, "no chunk of the replica was found in recent");
	cr_assert_eq(fx.cache.objects, objects, "the replica stored objects again");
	tw_check_file(a, data, len);
	tw_check_file(b, data, len);
	free(data);
}

/* A recent whose budget holds no chunk keeps no buffer (R6 false): the
 * ticket has ended there, so the writer must not publish it again (R2: a
 * second end aborted the daemon), and the chunk is stored from the writer's
 * own buffer, byte for byte. */
Test(writer, a_buffer_recent_cannot_keep_ends_its_ticket_once_and_is_stored_from_the_writer)
{
	struct recent *tiny;
	OK(recent_new(32 * KiB, &tiny)); /* under every chunk: none is kept */
	struct chunkput *cp = fx.cp;
	fx.cp = tw_chunkput(tiny);
	size_t len = 3 * MiB + 5;
	uint8_t *data = ts_random(len, 92);
	uint64_t ino = tw_file("t");
	tw_write_all(ino, data, len, 0, 7);
	struct recent_stats st;
	recent_stats(tiny, &st);
	cr_assert_gt(st.misses, 10);
	cr_assert_eq(st.images, 0);
	tw_check_file(ino, data, len);
	chunkput_free(fx.cp);
	fx.cp = cp;
	recent_free(tiny);
	free(data);
}

/* ---- a dedup hit on a damaged or missing object (writer.h invariant 6) ---- */

/* A daemon restart: the store is opened anew (its checked set, store.c S10,
 * empty), with a fresh recent and chunk put, over the same catalog. */
static void tw_restart(void)
{
	char path[256];
	chunkput_stop_queue(fx.cp);
	chunkput_free(fx.cp);
	recent_free(fx.recent);
	store_close(fx.store);
	snprintf(path, sizeof(path), "%s/store", fx.dir);
	OK(store_open(path, &fx.store));
	store_set_direct_writes(fx.store, true);
	OK(recent_new(16 * MiB, &fx.recent));
	OK(storeq_start(3, 6, &fx.storeq));
	fx.reader = (struct tw_reader){ fx.cat, fx.store };
	fx.cp = tw_chunkput(fx.recent);
}

/* The object file of a's middle chunk: its hash in *hash, its path in path. */
static void tw_middle_object(uint64_t ino, uint8_t hash[HASH_LEN], char *path, size_t size)
{
	static struct cat_extent ext[256];
	int n = tw_extents(ino, ext, 256);
	cr_assert_geq(n, 3);
	memcpy(hash, ext[n / 2].hash, HASH_LEN);
	char rel[128];
	store_object_relpath(hash, rel, sizeof(rel));
	snprintf(path, size, "%s/store/%s", fx.dir, rel);
}

/* One byte of the file at path flipped in place (a damaged object). */
static void tw_flip_byte(const char *path, long off)
{
	cr_assert_eq(chmod(path, 0600), 0);
	FILE *f = fopen(path, "r+b");
	cr_assert_not_null(f);
	cr_assert_eq(fseek(f, off, SEEK_SET), 0);
	int c = fgetc(f);
	cr_assert_eq(fseek(f, off, SEEK_SET), 0);
	fputc(c ^ 0x5a, f);
	cr_assert_eq(fclose(f), 0);
}

/* a is written, a restart comes, its middle chunk's object is damaged
 * (damage) or removed; then the same bytes are saved as b with a durable
 * commit, which succeeds: b must read back byte for byte, its chunk stored
 * again from the bytes written. continue_a: a writer continuing a (its
 * committed extents taken back as pending) names a's chunks meanwhile. */
static void tw_resave_after(bool damage, bool continue_a)
{
	size_t len = 3 * MiB + 11;
	uint8_t *data = ts_random(len, 93);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, MiB, 1);
	uint8_t hash[HASH_LEN];
	char obj[512];
	tw_middle_object(a, hash, obj, sizeof(obj));
	tw_restart();
	struct writer *wa = NULL;
	if (continue_a)
		OK(writer_new(fx.cp, a, len, &wa));
	if (damage)
		tw_flip_byte(obj, STORE_HEADER_LEN + 1000);
	else
		cr_assert_eq(unlink(obj), 0);
	struct writer *w;
	OK(writer_new(fx.cp, b, 0, &w));
	OK(writer_write(w, (const char *)data, len, 0));
	OK(writer_commit(w, true));
	writer_free(w);
	tw_check_file(b, data, len);
	tw_check_file(a, data, len); /* the one object, whole again */
	if (wa)
		writer_free(wa);
	free(data);
}

Test(writer, a_resave_of_bytes_whose_object_is_damaged_stores_it_again)
{
	tw_resave_after(true, false);
}

Test(writer, a_resave_of_bytes_whose_object_is_gone_stores_it_again)
{
	tw_resave_after(false, false);
}

/* ---- the same with a shared catalog (one node on a private PostgreSQL,
 * tests/unit/pgtest.h): a hit is on a copy this node's cache holds
 * (catalog_shared_data.c S11), so invariant 6 applies as alone ---- */

static struct pt_cat tws_node;

static void tws_setup(void)
{
	memset(&fx, 0, sizeof(fx));
	pt_start();
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "writer-shared");
	pt_cat_open(&tws_node, "writer", 30000, NULL, NULL);
	fx.cat = tws_node.cat;
	cr_assert(cat_is_shared(fx.cat));
	tw_setup_over_cat();
}

static void tws_teardown(void)
{
	tw_teardown_but_cat();
	fx.cat = NULL;
	pt_cat_close(&tws_node);
	ts_tmpdir_remove(fx.dir);
	pt_stop();
}

TestSuite(writer_shared, .init = tws_setup, .fini = tws_teardown, .timeout = 120);

/* With a shared catalog a hit needs a writer of this node naming the
 * chunk (its count is of pending rows, S1): continue_a. */
Test(writer_shared, a_resave_of_bytes_whose_cached_object_is_damaged_stores_it_again)
{
	tw_resave_after(true, true);
}

Test(writer_shared, a_resave_of_bytes_whose_cached_object_is_gone_stores_it_again)
{
	tw_resave_after(false, true);
}

/* fs/writer.c writer_sync_gone with a shared catalog (catalog_shared_data.c
 * S14): a file's chunks lose their cache objects between a commit and the
 * durable commit (fsync). PostgreSQL has them live, held by this node, and
 * (unless upload) not uploaded: the bytes are nowhere, and the fsync fails
 * with EIO (it answered 0 for every shared chunk before S14). Uploaded (the
 * uploader's part done): on BACKING, the fsync answers 0. reopen: the chunks
 * are a closed handle's, inherited by a new writer (invariant 3). */
static void tws_fsync_after_objects_gone(bool upload, bool reopen)
{
	size_t len = 400 * KiB, more = 100 * KiB;
	uint8_t *data = ts_random(len + more, 97);
	uint64_t a = tw_file("a");
	struct writer *w;
	OK(writer_new(fx.cp, a, 0, &w));
	OK(writer_write(w, (const char *)data, len, 0));
	OK(writer_commit(w, false)); /* published: PostgreSQL holds its chunks as this node's */
	if (reopen) {
		writer_free(w);
		OK(writer_new(fx.cp, a, len, &w));
	}
	static struct cat_extent ext[16];
	int n = tw_extents(a, ext, 16);
	cr_assert(n >= 1 && n <= 8, "%d chunks", n);
	if (upload)
		cr_assert_eq(pt_cat_upload_chunks(&tws_node, NULL, NULL), n);
	for (int i = 0; i < n; i++) {
		char rel[128], obj[512];
		store_object_relpath(ext[i].hash, rel, sizeof(rel));
		snprintf(obj, sizeof(obj), "%s/store/%s", fx.dir, rel);
		cr_assert_eq(unlink(obj), 0, "%s", obj);
	}
	if (reopen)
		OK(writer_write(w, (const char *)data + len, more, len));
	else
		writer_touch(w);
	int rc = writer_commit(w, true);
	if (upload)
		cr_assert_eq(rc, 0, "fsync failed (%d) over chunks that are on BACKING", rc);
	else
		cr_assert_eq(rc, -EIO, "fsync answered %d over chunks in neither the cache nor"
				       " BACKING", rc);
	writer_free(w);
	free(data);
}

Test(writer_shared, a_durable_commit_whose_chunk_objects_are_gone_fails_with_eio)
{
	tws_fsync_after_objects_gone(false, false);
}

Test(writer_shared, an_fsync_after_reopen_whose_inherited_objects_are_gone_fails_with_eio)
{
	tws_fsync_after_objects_gone(false, true);
}

Test(writer_shared, a_durable_commit_whose_uploaded_chunk_objects_are_gone_succeeds)
{
	tws_fsync_after_objects_gone(true, false);
}

Test(writer_shared, an_fsync_after_reopen_whose_inherited_uploaded_objects_are_gone_succeeds)
{
	tws_fsync_after_objects_gone(true, true);
}

/* A hit on an object this process wrote is vouched for without a read: its
 * bytes are not stored again (the replicated save's dedup stays free). */
Test(writer, a_resave_of_bytes_written_by_this_process_stores_nothing)
{
	size_t len = 3 * MiB + 11;
	uint8_t *data = ts_random(len, 94);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, MiB, 1);
	size_t objects = fx.cache.objects;
	struct chunkput *cp = fx.cp;
	fx.cp = tw_chunkput(NULL); /* no recent: every chunk hashed, a catalog hit */
	tw_write_all(b, data, len, MiB, 2);
	chunkput_free(fx.cp);
	fx.cp = cp;
	cr_assert_eq(fx.cache.objects, objects, "the resave stored objects again");
	tw_check_file(b, data, len);
	free(data);
}

/* The objects of a file's chunks vanish between its writes and its durable
 * commit (the writer holds none of their bytes: they were hits); the
 * catalog still counts them and they are not on BACKING: fsync must fail,
 * never report 0 over bytes that are nowhere. */
Test(writer, a_durable_commit_whose_chunk_objects_are_gone_fails_with_eio)
{
	size_t len = 400 * KiB;
	uint8_t *data = ts_random(len, 95);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, len, 1);
	static struct cat_extent ext[16];
	int n = tw_extents(a, ext, 16);
	cr_assert(n >= 1 && n <= 8, "%d chunks: the commit syncs each (at most 8)", n);
	struct writer *w;
	OK(writer_new(fx.cp, b, 0, &w));
	OK(writer_write(w, (const char *)data, len, 0));
	OK(writer_commit(w, false)); /* b's chunks are hits on a's objects */
	for (int i = 0; i < n; i++) {
		char rel[128], obj[512];
		store_object_relpath(ext[i].hash, rel, sizeof(rel));
		snprintf(obj, sizeof(obj), "%s/store/%s", fx.dir, rel);
		cr_assert_eq(unlink(obj), 0, "%s", obj);
	}
	writer_touch(w);
	cr_assert_eq(writer_commit(w, true), -EIO);
	writer_free(w);
	free(data);
}

/* writer.h invariant 7: the CRC a writer takes of a chunk while its chunker
 * scans it, which the chunk's object is then written with (store.c S11), is
 * of exactly the chunk's bytes, through the paths that make the chunker scan
 * again: a truncate into the buffer, then other bytes written there; a
 * truncate behind the buffer; commits that cut a chunk short; writes of odd
 * sizes. Every object is read back with its CRC checked (S4) and compared
 * byte for byte. (Tried: a CRC not started again at each chunk's start
 * fails here with EIO on the reads.) */
Test(writer, the_crc_taken_while_scanning_is_the_crc_of_each_chunk_stored)
{
	size_t len = 6 * MiB + 999;
	uint8_t *a = ts_random(len, 77), *b = ts_random(len, 78), *want = malloc(len);
	uint64_t ino = tw_file("crc");
	struct writer *w;
	OK(writer_new(fx.cp, ino, 0, &w));
	size_t off = 0;
	for (; off < 700 * KiB; off += 5000) /* small writes: many scans per chunk */
		OK(writer_write(w, (const char *)a + off, 5000, off));
	size_t in_buffer = off - 1000; /* into the chunk being scanned */
	OK(writer_truncate(w, in_buffer));
	off = in_buffer;
	for (size_t n; off < 2 * MiB; off += n) { /* other bytes where the cut ones were */
		n = off % 3 == 0 ? 4097 : 70001;
		OK(writer_write(w, (const char *)b + off, n, off));
	}
	OK(writer_commit(w, false)); /* cuts the chunk being scanned short */
	size_t behind = 300 * KiB; /* behind the buffer: pending extents cut */
	OK(writer_truncate(w, behind));
	off = behind;
	for (size_t n; off < len; off += n) {
		n = len - off < 1000003 ? len - off : 1000003;
		OK(writer_write(w, (const char *)a + off, n, off));
		if (off < 4 * MiB && off + n >= 4 * MiB)
			OK(writer_commit(w, false));
	}
	OK(writer_commit(w, false));
	writer_free(w);
	memcpy(want, a, len);
	memcpy(want + in_buffer, b + in_buffer, 2 * MiB - in_buffer);
	memcpy(want + behind, a + behind, len - behind); /* the truncate dropped b's bytes */
	tw_check_file(ino, want, len); /* store_get checks each object's CRC */
	free(a);
	free(b);
	free(want);
}

/* Invariant 3: a file written and closed (commit not durable), reopened and
 * appended to, then fsync'd. The durable commit covers every chunk the
 * committed file names, also those the first handle's writer left unsynced:
 * here the first writer's objects are gone (standing in for objects a power
 * loss tears: never fdatasync'd), the catalog still counts them, BACKING
 * lacks them: the fsync fails with EIO (invariant 6), never reports 0. */
Test(writer, an_fsync_after_reopen_covers_chunks_an_earlier_handle_left_unsynced)
{
	size_t len = 400 * KiB, more = 100 * KiB;
	uint8_t *data = ts_random(len + more, 96);
	uint64_t a = tw_file("a");
	tw_write_all(a, data, len, len, 1); /* close without fsync: not durable */
	static struct cat_extent ext[16];
	int n = tw_extents(a, ext, 16);
	cr_assert(n >= 1 && n <= 4, "%d chunks", n);
	for (int i = 0; i < n; i++) {
		char rel[128], obj[512];
		store_object_relpath(ext[i].hash, rel, sizeof(rel));
		snprintf(obj, sizeof(obj), "%s/store/%s", fx.dir, rel);
		cr_assert_eq(unlink(obj), 0, "%s", obj);
	}
	struct writer *w;
	OK(writer_new(fx.cp, a, len, &w)); /* reopened: appended at its end */
	OK(writer_write(w, (const char *)data + len, more, len));
	cr_assert_eq(writer_commit(w, true), -EIO,
		     "fsync reported the file durable; chunks of its first handle were never synced");
	writer_free(w);
	free(data);
}

/* ---- the writers' buffers' budget (-o writebuf, wbuf.h) ---- */

static struct wbuf_stats tw_wbuf(void)
{
	struct wbuf_stats st;
	wbuf_stats(chunkput_env(fx.cp)->wbuf, &st);
	return st;
}

/* A chunk put whose writers' buffers are bounded by limit bytes. */
static void tw_budget(uint64_t limit)
{
	chunkput_free(fx.cp); /* no writer yet; the queue is fx.storeq's, kept */
	tw_writebuf = limit;
	fx.cp = tw_chunkput(fx.recent);
}

Test(writer, many_files_written_at_once_keep_the_buffers_within_the_budget)
{
	enum { N = 24 };
	const uint64_t limit = 4 * MiB; /* a handful of writers' buffers */
	tw_budget(limit);
	size_t len = 3 * MiB + 12345;
	uint8_t *data[N];
	uint64_t ino[N];
	struct writer *w[N];
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "many%d", i);
		data[i] = ts_random(len, 500 + (uint64_t)i);
		ino[i] = tw_file(name);
		OK(writer_new(fx.cp, ino[i], 0, &w[i]));
	}
	/* interleaved, in pieces of varied sizes: all N buffers would be live */
	size_t at[N] = { 0 };
	for (bool more = true; more;) {
		more = false;
		for (int i = 0; i < N; i++) {
			size_t n = (size_t)(37 + i) * 4 * KiB;
			if (n > len - at[i])
				n = len - at[i];
			if (n == 0)
				continue;
			OK(writer_write(w[i], (const char *)data[i] + at[i], n, at[i]));
			at[i] += n;
			more = true;
			struct wbuf_stats st = tw_wbuf();
			cr_assert_leq(st.used, limit, "writers' buffers hold %" PRIu64 " bytes, bound %"
				      PRIu64, st.used, limit);
		}
	}
	struct wbuf_stats st = tw_wbuf();
	cr_assert_gt(st.staged, 0, "no writer was moved to staging: the bound was never reached");
	cr_assert_lt(st.staged, N, "every writer was staged: none kept its buffer");
	cr_assert_gt(st.used, 0);
	for (int i = 0; i < N; i++) {
		size_t got;
		uint8_t probe[4096]; /* a read in the middle of a staged or streamed file */
		OK(writer_read(w[i], (char *)probe, sizeof(probe), len / 2, &got));
		cr_assert_eq(got, sizeof(probe));
		cr_assert(memcmp(probe, data[i] + len / 2, sizeof(probe)) == 0, "file %d", i);
		OK(writer_commit(w[i], i % 3 == 0));
		cr_assert_leq(tw_wbuf().used, limit); /* a staged commit's buffer is given back (W3) */
		writer_free(w[i]);
	}
	st = tw_wbuf();
	cr_assert_eq(st.used, 0, "%" PRIu64 " bytes still counted after every writer went", st.used);
	cr_assert_leq(st.peak, limit);
	for (int i = 0; i < N; i++) {
		tw_check_file(ino[i], data[i], len);
		free(data[i]);
	}
	cr_log_info("writebuf %" PRIu64 " MiB: peak %" PRIu64 " KiB, %" PRIu64 " of %d writers staged",
		    limit >> 20, st.peak >> 10, st.staged, N);
}

/* Reads the writer's [0, len) and compares it with want. */
static void tw_read_eq(struct writer *w, const uint8_t *want, size_t len)
{
	uint8_t *got = malloc(len);
	size_t n;
	OK(writer_read(w, (char *)got, len, 0, &n));
	cr_assert_eq(n, len);
	cr_assert(memcmp(got, want, len) == 0, "the writer reads back other bytes");
	free(got);
}

/* Review 44 F2 (writer.h invariant 8): a file refused by the budget after
 * MiBs were stored stages only what was not stored yet; its stored prefix is
 * never copied (wbuf's `copied` stays 0) through reads, commits, a truncate
 * into it and an append from there; only a write below the staged point
 * copies it. The committed file is the bytes written at every step. */
Test(writer, a_file_staged_late_keeps_its_stored_prefix_out_of_the_staging_file)
{
	tw_budget(4 * MiB);
	struct wbuf *wb = chunkput_env(fx.cp)->wbuf;
	size_t len = 4 * MiB;
	uint8_t *want = ts_random(len, 4402);
	for (size_t i = 2 * MiB; i < 3 * MiB; i++) /* no chunk boundary: the buffer grows */
		want[i] = (uint8_t)(i % 61 + 1);
	uint64_t ino = tw_file("late");
	struct writer *w;
	OK(writer_new(fx.cp, ino, 0, &w));
	for (size_t off = 0; off < 2 * MiB; off += 100 * KiB)
		OK(writer_write(w, (const char *)want + off, off + 100 * KiB < 2 * MiB ? 100 * KiB
								: 2 * MiB - off, off));
	cr_assert_eq(tw_wbuf().staged, 0);
	struct wbuf_stats st = tw_wbuf(); /* other writers' buffers take the rest */
	uint64_t hog = st.limit - st.used;
	cr_assert(wbuf_take(wb, hog));
	OK(writer_write(w, (const char *)want + 2 * MiB, 2 * MiB, 2 * MiB));
	cr_assert_eq(tw_wbuf().staged, 1, "the writer was not refused at the bound");
	tw_read_eq(w, want, len);
	OK(writer_commit(w, false));
	tw_check_file(ino, want, len);
	cr_assert_eq(tw_wbuf().copied, 0, "the stored prefix was copied into the staging file");

	size_t cut = MiB + 7; /* into the stored prefix */
	OK(writer_truncate(w, cut));
	uint8_t *more = ts_random(200 * KiB, 4403);
	OK(writer_write(w, (const char *)more, 200 * KiB, cut));
	memcpy(want + cut, more, 200 * KiB);
	len = cut + 200 * KiB;
	tw_read_eq(w, want, len);
	OK(writer_commit(w, false));
	tw_check_file(ino, want, len);
	cr_assert_eq(tw_wbuf().copied, 0, "a truncate into the prefix copied it");

	OK(writer_write(w, (const char *)more, 10 * KiB, 100 * KiB)); /* below the staged point */
	memcpy(want + 100 * KiB, more, 10 * KiB);
	cr_assert_gt(tw_wbuf().copied, 0, "a write below the staged point did not copy the prefix");
	tw_read_eq(w, want, len);
	OK(writer_commit(w, true));
	tw_check_file(ino, want, len);
	writer_free(w);
	wbuf_give(wb, hog);
	cr_assert_eq(tw_wbuf().used, 0);
	free(more);
	free(want);
}

/* Replicas (followed chunks, recent.h R4) and unique files written at once
 * by threads, with truncates and gaps, under a budget smaller than their
 * buffers: every file reads back whole and nothing stays counted. */
static void *tw_budget_job(void *arg)
{
	struct tw_job *j = arg;
	struct writer *w;
	OK(writer_new(fx.cp, j->ino, 0, &w));
	size_t half = j->len / 2;
	for (size_t off = 0; off < half;) {
		size_t n = j->step < half - off ? j->step : half - off;
		OK(writer_write(w, (const char *)j->data + off, n, off));
		off += n;
	}
	OK(writer_truncate(w, half - 1000)); /* into the buffer, or below the stream */
	OK(writer_write(w, (const char *)j->data + half - 1000, 1000, half - 1000));
	for (size_t off = half; off < j->len;) {
		size_t n = j->step < j->len - off ? j->step : j->len - off;
		OK(writer_write(w, (const char *)j->data + off, n, off));
		off += n;
	}
	OK(writer_commit(w, true));
	writer_free(w);
	return NULL;
}

Test(writer, replicas_and_files_at_once_under_a_small_budget_read_back_whole)
{
	enum { N = 8 };
	tw_budget(3 * MiB);
	size_t plen = 4 * MiB;
	uint8_t *payload = ts_random(plen, 77);
	uint8_t *rep[N];
	struct tw_job jobs[N];
	for (int i = 0; i < N; i++) {
		char name[32];
		snprintf(name, sizeof(name), "bud%d", i);
		rep[i] = i < N / 2 ? tw_replica(payload, plen, 0, i) : ts_random(plen, 900 + (uint64_t)i);
		jobs[i] = (struct tw_job){ .ino = tw_file(name), .data = rep[i], .len = plen,
					   .step = (size_t)(100 + 13 * i) * KiB };
	}
	pthread_t t[N];
	for (int i = 0; i < N; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, tw_budget_job, &jobs[i]), 0);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	struct wbuf_stats st = tw_wbuf();
	cr_assert_eq(st.used, 0, "%" PRIu64 " bytes still counted after every writer went", st.used);
	cr_assert_gt(st.staged, 0);
	for (int i = 0; i < N; i++) {
		tw_check_file(jobs[i].ino, rep[i], plen);
		free(rep[i]);
	}
	free(payload);
}
