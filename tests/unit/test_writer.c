/* Unit tests for fs/writer.c with a real catalog, store, recent, reader and
 * cache: replicas written at once by
 * several threads are cut into exactly the chunks one writer alone makes,
 * every chunk is named by the SHA-256 of its bytes and its object holds them,
 * most chunks are taken from another writer's (recent.h R4, chunk_follows)
 * and each object is written once (flights); a replica that differs from the
 * others is not taken for them; reads, truncates, gaps and out-of-order
 * writes in the middle of a followed chunk see and keep the right bytes;
 * objects are written behind the writer (storeq) and a failure there fails
 * the file's commit.
 *
 * writer.c is compiled into this file: it belongs to the daemon, not to the
 * core objects the unit tests link with. */
#define _GNU_SOURCE
#include "writer.c"

#include <criterion/criterion.h>

#include <inttypes.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backing.h"
#include "support.h"

/* ---- the daemon's modules the writer calls, stubbed ---- */

/* Objects the writers stored: the real cache (fs/cache.c, linked into the
 * unit binary) counts each one its cache_dirty_add is told about. */
static size_t tw_objects_written(void);

/* ---- fixture ---- */

#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

static struct {
	char dir[128];
	char cat_path[192];
	struct ckptfs fs;
} fx;

/* The reader's chunks come straight from the fixture's store (no disk cache
 * in front of it). */
static int tw_load(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
		   struct store_chunk *out)
{
	(void)c;
	return store_load(fx.fs.store, hash, cap, out);
}

static void tw_setup(void)
{
	memset(&fx, 0, sizeof(fx));
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "writer");
	ts_cat_open_in(fx.dir, "catalog.db", fx.cat_path, sizeof(fx.cat_path), &fx.fs.cat);
	char path[256];
	snprintf(path, sizeof(path), "%s/store", fx.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	OK(store_open(path, &fx.fs.store));
	store_set_direct_writes(fx.fs.store, true);
	snprintf(fx.fs.staging_dir, sizeof(fx.fs.staging_dir), "%s/staging", fx.dir);
	cr_assert_eq(mkdir(fx.fs.staging_dir, 0700), 0);
	/* small chunks (all of them >= RECENT_MIN_LEN), so that a few MiB make many */
	fx.fs.chunking = (struct chunker_params){ .min_size = 64 * KiB, .avg_size = 128 * KiB,
						  .max_size = 512 * KiB };
	OK(recent_new(16 * MiB, &fx.fs.recent)); /* the daemon's budget */
	OK(storeq_start(3, 6, &fx.fs.storeq)); /* the daemon's (main.c) */
	const struct reader_config rcfg = { 64 * MiB, tw_load, NULL };
	OK(reader_new(&rcfg, fx.fs.cat, NULL, &fx.fs.reader));
	snprintf(path, sizeof(path), "%s/backing", fx.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	OK(backing_open(path, 2000, &fx.fs.backing));
	struct cache_config cc = { .cache_size = 1024 * MiB, .backing_timeout_ms = 2000,
				   .chunk_max = fx.fs.chunking.max_size };
	snprintf(cc.dir, sizeof(cc.dir), "%s", fx.dir);
	OK(cache_start(&cc, fx.fs.cat, fx.fs.store, fx.fs.backing, NULL, &fx.fs.cache));
}

static void tw_teardown(void)
{
	storeq_stop(fx.fs.storeq);
	reader_free(fx.fs.reader);
	cache_stop(fx.fs.cache);
	backing_close(fx.fs.backing);
	recent_free(fx.fs.recent);
	store_close(fx.fs.store);
	ts_cat_close_checked(&fx.fs.cat);
	ts_tmpdir_remove(fx.dir);
}

static size_t tw_objects_written(void)
{
	struct cache_stats st;
	cache_get_stats(fx.fs.cache, &st);
	return (size_t)st.stored_chunks;
}

static uint8_t *tw_random(size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len ? len : 1);
	cr_assert_not_null(b);
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)(x >> 11);
	}
	return b;
}

static uint64_t tw_file(const char *name)
{
	return ts_mk(fx.fs.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
}

/* The file's committed extents, in order (at most max). */
static int tw_extents(uint64_t ino, struct cat_extent *out, int max)
{
	int n = 0;
	uint64_t pos = 0;
	for (;;) {
		int got = cat_extents(fx.fs.cat, ino, pos, out + n, max - n < 16 ? max - n : 16);
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
	OK(cat_getattr(fx.fs.cat, ino, &in));
	cr_assert_eq(in.size, len);
	static struct cat_extent ext[4096];
	int n = tw_extents(ino, ext, 4096);
	uint64_t pos = 0;
	uint8_t *buf = malloc(fx.fs.chunking.max_size);
	for (int i = 0; i < n; i++) {
		cr_assert_geq(ext[i].off, pos, "extent %d at %" PRIu64 " overlaps", i, ext[i].off);
		for (; pos < ext[i].off; pos++) /* a hole reads as zeros */
			cr_assert_eq(want[pos], 0, "byte %" PRIu64 " is in a hole", pos);
		size_t got;
		OK(store_get(fx.fs.store, ext[i].hash, buf, fx.fs.chunking.max_size, &got));
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
	OK(writer_new(&fx.fs, ino, 0, &w));
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
	uint8_t *h = tw_random(hlen, 1000 + (uint64_t)i);
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
	struct recent *r = fx.fs.recent;
	fx.fs.recent = NULL;
	uint64_t ino = tw_file(name);
	tw_write_all(ino, data, len, MiB, 1);
	fx.fs.recent = r;
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
	uint8_t *payload = tw_random(plen, 7);
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
	recent_stats(fx.fs.recent, &st);
	cr_assert_gt(st.follows, 0, "no chunk was taken from another writer");
	cr_log_info("chunks hashed %" PRIu64 ", reused %" PRIu64 " (followed %" PRIu64
		    "), waits %" PRIu64 ", objects written %zu",
		    st.misses, st.hits, st.follows, st.follow_waits, tw_objects_written());
	for (int i = 0; i < N; i++)
		free(rep[i]);
	free(payload);
}

Test(writer, a_second_writer_of_the_same_bytes_follows_every_chunk_and_stores_none)
{
	size_t len = 5 * MiB + 12345;
	uint8_t *data = tw_random(len, 3);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, MiB, 1);
	size_t objects = tw_objects_written();
	struct recent_stats st0, st1;
	recent_stats(fx.fs.recent, &st0);
	tw_write_all(b, data, len, 0, 5); /* random write sizes */
	recent_stats(fx.fs.recent, &st1);
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
	cr_assert_eq(tw_objects_written(), objects, "b wrote objects a had written");
	free(data);
}

Test(writer, a_replica_that_differs_is_not_taken_for_the_others)
{
	enum { N = 4 };
	size_t plen = 4 * MiB;
	uint8_t *payload = tw_random(plen, 11);
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
	uint8_t *data = tw_random(len, 21);
	uint64_t a = tw_file("a"), b = tw_file("b");
	tw_write_all(a, data, len, MiB, 1);
	struct writer *w;
	OK(writer_new(&fx.fs, b, 0, &w));
	uint8_t *out = malloc(len);
	size_t step = 37 * KiB + 3;
	bool seen_following = false;
	for (size_t off = 0; off < len; off += step) {
		size_t n = step < len - off ? step : len - off;
		OK(writer_write(w, (const char *)data + off, n, off));
		seen_following |= w->following && w->matched > 0;
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
	uint8_t *data = tw_random(len, 31);
	uint64_t a = tw_file("a");
	tw_write_all(a, data, len, MiB, 1);
	for (int kind = 0; kind < 3; kind++) {
		char name[16];
		snprintf(name, sizeof(name), "b%d", kind);
		uint64_t b = tw_file(name);
		uint8_t *want = calloc(1, 2 * len);
		size_t size = 0;
		struct writer *w;
		OK(writer_new(&fx.fs, b, 0, &w));
		size_t off = 0, step = 50 * KiB;
		while (off < len && !(w->following && w->matched > 100 * KiB && off > MiB)) {
			OK(writer_write(w, (const char *)data + off, step, off));
			memcpy(want + off, data + off, step);
			off += step;
			size = off;
		}
		cr_assert(w->following, "never followed");
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
	uint8_t *data = tw_random(len, 41);
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
	recent_stats(fx.fs.recent, &st);
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
		uint8_t *data = tw_random(size, 500 + (uint64_t)k);
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
	storeq_stats(fx.fs.storeq, &st);
	return st.behind;
}

Test(writer, objects_are_written_behind_the_writer_and_committed_whole)
{
	size_t len = 8 * MiB + 4321;
	uint8_t *data = tw_random(len, 41);
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
		uint8_t *data = tw_random(len, 43 + (uint64_t)i);
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		uint64_t ino = tw_file(name);
		unsigned long long before = tw_behind();
		struct writer *w;
		OK(writer_new(&fx.fs, ino, 0, &w));
		int rc = writer_write(w, (const char *)data, len, 0);
		if (rc == 0)
			rc = writer_commit(w, false);
		/* the store's error, not the catalog's refusal of unstored chunks */
		cr_assert_eq(rc, -ENOTDIR, "file %d: commit returned %d (%s)", i, rc, strerror(-rc));
		cr_assert_eq(writer_commit(w, true), rc, "file %d: the first error is not kept", i);
		writer_free(w); /* waits for its flights */
		cr_assert_gt(tw_behind(), before, "file %d: no object was tried behind the writer", i);
		struct cat_inode in;
		OK(cat_getattr(fx.fs.cat, ino, &in));
		cr_assert_eq(in.size, 0, "file %d: a failed file was committed", i);
		free(data);
	}
	cr_assert_eq(unlink(tmp), 0);
	cr_assert_eq(rename(away, tmp), 0);
}

/* ---- a flight that landed after "store it" (writer.c flights) ---- */

Test(writer, a_chunk_that_landed_after_the_store_it_answer_is_not_written_again)
{
	size_t len = 256 * KiB;
	uint8_t *data = tw_random(len, 51);
	struct cat_extent ext = { .off = 0, .len = len, .chunk_off = 0, .chunk_len = len };
	hash_sha256(data, len, ext.hash);
	uint64_t ino[3] = { tw_file("a"), tw_file("b"), tw_file("c") };
	struct writer *w[3];
	bool must[3];
	for (int i = 0; i < 3; i++)
		OK(writer_new(&fx.fs, ino[i], 0, &w[i]));
	/* a and b are both told to store it; b is a moment late */
	OK(cat_pending_add(fx.fs.cat, ino[0], &ext, &must[0]));
	OK(cat_pending_add(fx.fs.cat, ino[1], &ext, &must[1]));
	cr_assert(must[0] && must[1]);
	uint64_t since_b = writer_flights_lands();
	size_t objects = tw_objects_written();
	OK(writer_store(w[0], ext.hash, data, len, NULL, writer_flights_lands()));
	cr_assert_eq(tw_objects_written(), objects + 1, "a did not store it");
	OK(writer_store(w[1], ext.hash, data, len, NULL, since_b));
	cr_assert_eq(tw_objects_written(), objects + 1, "b wrote the object a had just stored");
	cr_assert_eq(w[1]->n_await, 0);
	/* a landing before the answer proves nothing (the chunk may have been
	 * reclaimed and asked for again since): c stores it */
	OK(writer_store(w[2], ext.hash, data, len, NULL, writer_flights_lands()));
	cr_assert_eq(tw_objects_written(), objects + 2, "c trusted a landing older than its answer");
	uint8_t *buf = malloc(len);
	size_t got;
	OK(store_get(fx.fs.store, ext.hash, buf, len, &got));
	cr_assert(got == len && memcmp(buf, data, len) == 0);
	for (int i = 0; i < 3; i++)
		writer_free(w[i]);
	free(buf);
	free(data);
}
