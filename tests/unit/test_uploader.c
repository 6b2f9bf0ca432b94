/* Unit tests for fs/uploader.c, started as the daemon starts it but with a
 * real catalog, chunk store and BACKING directory in a temporary directory,
 * and the on_durable callback recorded: every queued chunk object reaches
 * BACKING and then the manifest of its generation; on_durable is called once
 * per generation, and only once all its chunks and its manifest are there;
 * a BACKING that refuses puts (a file where its chunks/ directory belongs)
 * holds everything back without dropping anything, and the uploads go on once
 * it takes them again; a chunk whose cache copy is lost before its upload is
 * never marked uploaded, nor its generation durable; a stop with drain
 * empties the queue, one without leaves the rows queued for the next mount. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "catalog.h"
#include "claim.h"
#include "codec.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "store.h"
#include "support.h"
#include "upload.h"
#include "uploader.h"

#define UT_FILL 0x7C
#define UT_CHUNK_MAX (256u << 10)
#define UT_MAX_CHUNKS 64
#define UT_MAX_GENS 8

static struct fixture {
	struct ts_stack w; /* cache, catalog, BACKING */
	struct uploader *u;

	/* every chunk made, and the generation it belongs to (0: none) */
	uint8_t hash[UT_MAX_CHUNKS][HASH_LEN];
	uint64_t gen_of[UT_MAX_CHUNKS];
	int n_chunks;

	/* on_durable's calls, and what was on BACKING at each */
	pthread_mutex_t lock;
	uint64_t durable[UT_MAX_GENS];
	bool complete_at_call[UT_MAX_GENS]; /* its chunks and manifest were on BACKING */
	int n_durable;
} fx;

static void setup(void)
{
	log_setup(stderr, LOG_LVL_OFF);
	memset(&fx, 0, sizeof(fx));
	pthread_mutex_init(&fx.lock, NULL);
	ts_stack_open(&fx.w, "uploader");
}

static void teardown(void)
{
	uploader_stop(fx.u, false);
	fx.u = NULL;
	ts_stack_close(&fx.w);
	pthread_mutex_destroy(&fx.lock);
}

TestSuite(uploader, .init = setup, .fini = teardown, .timeout = 60);

/* ---- data ---- */

/* Bytes of chunk seed: a pattern no other seed makes, so the hashes differ. */
static void ut_chunk_rel(int i, char *rel, size_t size)
{
	store_object_relpath(fx.hash[i], rel, size);
}

static bool ut_on_backing(const char *rel)
{
	uint64_t size;
	return backing_stat(fx.w.b, rel, &size) == 0;
}

static bool ut_chunk_on_backing(int i)
{
	char rel[128];
	ut_chunk_rel(i, rel, sizeof(rel));
	return ut_on_backing(rel);
}

/* Records each chunk ut_file stored, and the generation it belongs to. */
static void ut_note(void *arg, int k, const uint8_t hash[CAT_HASH_LEN])
{
	cr_assert_lt(fx.n_chunks, UT_MAX_CHUNKS);
	memcpy(fx.hash[fx.n_chunks], hash, HASH_LEN);
	fx.gen_of[fx.n_chunks++] = *(const uint64_t *)arg;
}

/* A file under parent of n chunks of len bytes (seeds seed..): each chunk's
 * object is written to the store as a writer would, and recorded. */
static uint64_t ut_file(uint64_t parent, const char *name, int seed, int n, size_t len, uint64_t gen)
{
	uint64_t ino = ts_mk(fx.w.cat, parent, name, S_IFREG | 0644, NULL);
	ts_store_file(fx.w.cat, fx.w.st, ino, seed, n, len, ut_note, &gen);
	return ino;
}

/* A committed generation run/<name> with one file of n chunks. */
static uint64_t ut_gen(uint64_t series, const char *name, uint64_t step, int seed, int n)
{
	uint64_t root;
	uint64_t id = ts_mkgen(fx.w.cat, series, name, step, true, &root);
	ut_file(root, "weights", seed, n, 64 << 10, id);
	OK(cat_gen_commit(fx.w.cat, id, "explicit"));
	return id;
}

struct ut_find {
	uint64_t gen;
	bool found;
};

static int ut_find_manifest(void *arg, const char *name)
{
	struct ut_find *f = arg;
	uint64_t id;
	uint32_t version;
	if (manifest_gen_name_parse(name, &id, &version) == 0 && id == f->gen)
		f->found = true;
	return 0;
}

static bool ut_manifest_on_backing(uint64_t gen)
{
	struct ut_find f = { gen, false };
	backing_list(fx.w.b, "manifests/gen", ut_find_manifest, &f);
	return f.found;
}

/* on_durable: records the call and whether BACKING held everything the
 * generation needs at that moment, durably (the catalog calls each chunk
 * uploaded only after BACKING's sync). */
static void ut_on_durable(void *arg, uint64_t gen_id)
{
	cr_assert_eq(arg, &fx);
	bool complete = ut_manifest_on_backing(gen_id);
	for (int i = 0; i < fx.n_chunks; i++) {
		if (fx.gen_of[i] != gen_id)
			continue;
		/* there, and durable there: its row ended (a batch's after its sync) */
		struct cat_chunk_where w;
		if (!ut_chunk_on_backing(i) || cat_chunk_where(fx.w.cat, fx.hash[i], &w) != 0 ||
		    !w.uploaded)
			complete = false;
	}
	pthread_mutex_lock(&fx.lock);
	if (fx.n_durable < UT_MAX_GENS) {
		fx.durable[fx.n_durable] = gen_id;
		fx.complete_at_call[fx.n_durable] = complete;
	}
	fx.n_durable++;
	pthread_mutex_unlock(&fx.lock);
}

static int ut_durable_count(void)
{
	pthread_mutex_lock(&fx.lock);
	int n = fx.n_durable;
	pthread_mutex_unlock(&fx.lock);
	return n;
}

static int ut_queued(void)
{
	struct cat_upload rows[UT_MAX_CHUNKS + 8];
	int n = cat_upload_list(fx.w.cat, 0, rows, UT_MAX_CHUNKS + 8);
	cr_assert_geq(n, 0);
	return n;
}

static double ut_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits up to 15 s for on_durable to have been called n times. */
static void ut_wait_durable(int n)
{
	double until = ut_mono() + 15;
	while (ut_durable_count() < n && ut_mono() < until)
		usleep(20 * 1000);
	cr_assert_geq(ut_durable_count(), n, "on_durable called %d times, expected %d",
		      ut_durable_count(), n);
}

static void ut_start_with(bool copy, unsigned threads)
{
	struct uploader_config cfg = {
		.threads = threads, .deadline_s = 600, .copy_uploads = copy, .chunk_max = UT_CHUNK_MAX,
	};
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", fx.w.cache);
	OK(uploader_start(&cfg, fx.w.cat, fx.w.st, fx.w.b, NULL, ut_on_durable, &fx, &fx.u));
}

static void ut_start(bool copy)
{
	ut_start_with(copy, 2);
}

/* BACKING refuses every chunk put while a file stands where chunks/ goes. */
static void ut_block_chunks(char *path, size_t size)
{
	snprintf(path, size, "%s/chunks", fx.w.backing);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	close(fd);
}

/* ---- tests ---- */

static void ut_chunks_then_manifest(bool copy)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t g1 = ut_gen(series, "step-1", 1, 100, 3);
	uint64_t g2 = ut_gen(series, "step-2", 2, 200, 4);
	ut_start(copy);
	ut_wait_durable(2);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert_eq(ut_durable_count(), 2, "on_durable is called once per generation");
	cr_assert(fx.durable[0] != fx.durable[1]);
	for (int k = 0; k < 2; k++) {
		cr_assert(fx.durable[k] == g1 || fx.durable[k] == g2);
		cr_assert(fx.complete_at_call[k],
			  "generation %" PRIu64 " was called durable before its chunks and manifest"
			  " were on BACKING", fx.durable[k]);
	}
	for (int i = 0; i < fx.n_chunks; i++) {
		cr_assert(ut_chunk_on_backing(i), "chunk %d is not on BACKING", i);
		struct cat_chunk_where w;
		OK(cat_chunk_where(fx.w.cat, fx.hash[i], &w));
		cr_assert(w.uploaded && w.cached);
	}
	bool durable = false;
	OK(cat_gen_durable(fx.w.cat, 0, &durable));
	cr_assert(durable);
	cr_assert_eq(ut_queued(), 0);
}

Test(uploader, links_every_chunk_then_the_manifest_and_calls_on_durable_once_per_generation)
{
	ut_chunks_then_manifest(false);
}

Test(uploader, copies_every_chunk_then_the_manifest_and_calls_on_durable_once_per_generation)
{
	ut_chunks_then_manifest(true);
	/* a copy, not a second name of the cache's object */
	char rel[128], path[512];
	ut_chunk_rel(0, rel, sizeof(rel));
	snprintf(path, sizeof(path), "%s/%s", fx.w.backing, rel);
	struct stat sb;
	cr_assert_eq(stat(path, &sb), 0);
	cr_assert_eq(sb.st_nlink, 1);
}

Test(uploader, a_backing_that_refuses_puts_holds_the_generation_back_then_it_goes_on)
{
	char blocker[256];
	ut_block_chunks(blocker, sizeof(blocker));
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t g = ut_gen(series, "step-1", 1, 300, 3);
	int queued = ut_queued();
	cr_assert_eq(queued, 4, "3 chunks and a manifest queued, not %d", queued);
	/* a worker for every row: each retry round, one is free to take the
	 * manifest, which must still wait for its chunks */
	ut_start_with(false, 4);
	usleep(800 * 1000);
	struct uploader_stats s;
	uploader_get_stats(fx.u, &s);
	cr_assert_gt(s.failures, 0);
	cr_assert(s.backing_down);
	cr_assert_eq(ut_durable_count(), 0, "durable while BACKING took nothing");
	cr_assert(!ut_manifest_on_backing(g), "a manifest before its chunks");
	cr_assert_eq(ut_queued(), queued, "nothing is dropped");

	cr_assert_eq(unlink(blocker), 0); /* BACKING takes puts again */
	ut_wait_durable(1);
	cr_assert_eq(fx.durable[0], g);
	cr_assert(fx.complete_at_call[0]);
	uploader_get_stats(fx.u, &s);
	cr_assert(!s.backing_down);
	cr_assert_eq(s.chunks, 3);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert_eq(ut_durable_count(), 1);
	cr_assert_eq(ut_queued(), 0);
}

Test(uploader, stop_with_drain_empties_the_queue)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	for (int i = 0; i < 5; i++) {
		char name[32];
		snprintf(name, sizeof(name), "step-%d", i + 1);
		ut_gen(series, name, (uint64_t)i + 1, 1000 + 10 * i, 6);
	}
	ut_start(true);
	uploader_stop(fx.u, true); /* at once: the drain does the work */
	fx.u = NULL;
	cr_assert_eq(ut_queued(), 0);
	cr_assert_eq(ut_durable_count(), 5);
	for (int i = 0; i < fx.n_chunks; i++)
		cr_assert(ut_chunk_on_backing(i), "chunk %d is not on BACKING", i);
	for (int k = 0; k < 5; k++)
		cr_assert(fx.complete_at_call[k]);
}

Test(uploader, stop_without_drain_leaves_the_rows_queued)
{
	char blocker[256];
	ut_block_chunks(blocker, sizeof(blocker));
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	ut_gen(series, "step-1", 1, 400, 2);
	ut_start(false);
	usleep(300 * 1000);
	uploader_stop(fx.u, false);
	fx.u = NULL;
	cr_assert_eq(ut_queued(), 3, "the rows stay for the next mount");
	cr_assert_eq(ut_durable_count(), 0);

	/* the next mount's uploader takes them up */
	cr_assert_eq(unlink(blocker), 0);
	ut_start(false);
	ut_wait_durable(1);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert_eq(ut_queued(), 0);
}

Test(uploader, wait_file_returns_once_the_files_chunks_are_on_backing)
{
	uint64_t ino = ut_file(CAT_ROOT_INO, "notes", 500, 3, 32 << 10, 0);
	ut_start(false);
	OK(uploader_wait_file(fx.u, ino, 10000));
	for (int i = 0; i < fx.n_chunks; i++)
		cr_assert(ut_chunk_on_backing(i), "chunk %d is not on BACKING", i);
}

Test(uploader, wait_file_fails_with_eio_while_backing_takes_nothing)
{
	char blocker[256];
	ut_block_chunks(blocker, sizeof(blocker));
	uint64_t ino = ut_file(CAT_ROOT_INO, "notes", 600, 1, 32 << 10, 0);
	ut_start(false);
	FAILS(uploader_wait_file(fx.u, ino, 500), EIO);
	cr_assert(!ut_chunk_on_backing(0));
}

/* upload.h U7 (review R6): a chunk whose cache copy is lost (a disk error, a
 * damaged sector) before its upload is not on BACKING. Its row must not be
 * ended as done, which marks it uploaded: its generation would then be
 * written a manifest naming a chunk BACKING never got, called durable
 * (on_durable, `ckptfs-admin wait`, keep-latest-k's newest durable one) and
 * its chunks evictable. The other generations go on; the lost row stays
 * queued, tried once per mount. */
static void ut_lost_chunk(bool copy)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t lost = ut_gen(series, "step-1", 1, 700, 3);
	uint64_t fine = ut_gen(series, "step-2", 2, 710, 2);
	char rel[128], path[512];
	ut_chunk_rel(1, rel, sizeof(rel)); /* step-1's second chunk */
	snprintf(path, sizeof(path), "%s/%s", fx.w.cache, rel);
	cr_assert_eq(unlink(path), 0, "%s: %s", path, strerror(errno));

	ut_start(copy);
	ut_wait_durable(1);
	cr_assert_eq(fx.durable[0], fine, "step-2, whose chunks are all there, is durable");
	usleep(500 * 1000); /* time for the lost row to be tried again and again, were it */
	struct cat_upload rows[8];
	int n = cat_upload_list(fx.w.cat, 0, rows, 8);
	/* generation.h G12: step-1 is held, so its manifest row ended (moot) */
	cr_assert_eq(n, 1, "the lost chunk's row stays queued, alone, not %d rows", n);
	cr_assert_eq(rows[0].kind, UP_CHUNK);
	cr_assert_eq(memcmp(rows[0].hash, fx.hash[1], HASH_LEN), 0);
	cr_assert_eq(rows[0].attempts, 1, "tried once this mount, not %u times", rows[0].attempts);
	struct cat_gen g;
	OK(cat_gen_get(fx.w.cat, lost, &g));
	cr_assert_eq(g.state, GEN_HELD, "step-1 names a lost chunk: held");
	cr_assert_str_eq(g.rule, GEN_LOST_CHUNK_RULE);
	char want[GEN_HELD_MAX];
	hash_to_hex(fx.hash[1], want + snprintf(want, sizeof(want), GEN_LOST_CHUNK_REASON " "));
	cr_assert(strncmp(g.held, want, strlen(want)) == 0, "reason: %s", g.held);
	OK(cat_gen_get(fx.w.cat, fine, &g));
	cr_assert_eq(g.state, GEN_COMMITTED, "step-2 is not touched");
	struct uploader_stats st;
	uploader_get_stats(fx.u, &st);
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(fx.hash[1], hex);
	cr_assert(strstr(st.last_error, hex) != NULL, "stats name the lost chunk: %s", st.last_error);
	cr_assert(!st.backing_down, "a lost cache copy is no BACKING failure");
	uploader_stop(fx.u, false);
	fx.u = NULL;

	cr_assert(!ut_chunk_on_backing(1), "the lost chunk cannot be on BACKING");
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.w.cat, fx.hash[1], &w));
	cr_assert(!w.uploaded, "the catalog records the lost chunk as uploaded to BACKING");
	bool durable = true;
	OK(cat_gen_durable(fx.w.cat, lost, &durable));
	cr_assert(!durable, "step-1 is called durable without one of its chunks");
	cr_assert(!ut_manifest_on_backing(lost), "a manifest naming a chunk BACKING does not have");
	cr_assert_eq(ut_durable_count(), 1, "on_durable was called for step-1");
	for (int i = 0; i < fx.n_chunks; i++)
		cr_assert(i == 1 || ut_chunk_on_backing(i), "chunk %d is not on BACKING", i);

	/* the next mount tries it once more, and keeps it as lost again */
	ut_start(copy);
	usleep(500 * 1000);
	uploader_stop(fx.u, false);
	fx.u = NULL;
	n = cat_upload_list(fx.w.cat, 0, rows, 8);
	cr_assert_eq(n, 1);
	cr_assert_eq(rows[0].attempts, 2);
	OK(cat_gen_get(fx.w.cat, lost, &g));
	cr_assert_eq(g.state, GEN_HELD, "still held: only an explicit decision ends it");
	OK(cat_chunk_where(fx.w.cat, fx.hash[1], &w));
	cr_assert(!w.uploaded);
	cr_assert_eq(ut_durable_count(), 1);
}

Test(uploader, a_chunk_lost_before_its_copy_is_never_marked_uploaded_nor_its_generation_durable)
{
	ut_lost_chunk(true);
}

Test(uploader, a_chunk_lost_before_its_link_is_never_marked_uploaded_nor_its_generation_durable)
{
	ut_lost_chunk(false);
}

/* upload.h U7 (review s30 F1): a row found moot marks nothing. Chunk X's
 * file is deleted before X's upload, so its row finds X gone (moot); before
 * that row ends, a writer stores the same bytes anew — a new row, dirty, its
 * own upload queued. Ending the moot row as done marked the new row
 * uploaded, its own upload then found it "done", and X never reached
 * BACKING while the catalog called it there (evictable: the only copy). */
/* A worker held at a test hook until the test lets it go (once: armed). */
struct ut_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool armed, arrived, resumed;
};

static void ut_gate_init(struct ut_gate *g)
{
	memset(g, 0, sizeof(*g));
	g->armed = true;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

static void ut_gate_destroy(struct ut_gate *g)
{
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/* On the worker thread: the first call waits there for ut_gate_open. */
static void ut_gate_hold(struct ut_gate *g)
{
	pthread_mutex_lock(&g->lock);
	if (g->armed) {
		g->armed = false;
		g->arrived = true;
		pthread_cond_broadcast(&g->cond);
		while (!g->resumed)
			pthread_cond_wait(&g->cond, &g->lock);
	}
	pthread_mutex_unlock(&g->lock);
}

/* Whether a worker came to the gate within 15 s. */
static bool ut_gate_reached(struct ut_gate *g)
{
	pthread_mutex_lock(&g->lock);
	double until = ut_mono() + 15;
	while (!g->arrived && ut_mono() < until) {
		pthread_mutex_unlock(&g->lock);
		usleep(10 * 1000);
		pthread_mutex_lock(&g->lock);
	}
	bool arrived = g->arrived;
	pthread_mutex_unlock(&g->lock);
	return arrived;
}

static void ut_gate_open(struct ut_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->resumed = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

struct ut_between {
	struct ut_gate gate;
	uint8_t hash[HASH_LEN];
};

static void ut_between_moot(void *arg, const struct cat_upload *row)
{
	struct ut_between *b = arg;
	if (row->kind == UP_CHUNK && memcmp(row->hash, b->hash, HASH_LEN) == 0)
		ut_gate_hold(&b->gate);
}

Test(uploader, a_row_found_moot_does_not_mark_the_same_bytes_stored_anew_before_it_ends)
{
	struct ut_between b;
	ut_gate_init(&b.gate);
	uint64_t ino = ut_file(CAT_ROOT_INO, "a", 900, 1, 32 << 10, 0);
	memcpy(b.hash, fx.hash[0], HASH_LEN);
	uint64_t gone = 0;
	OK(cat_unlink(fx.w.cat, CAT_ROOT_INO, "a", &gone));
	cr_assert_eq(gone, ino);
	cat_inodes_release(fx.w.cat, &gone, 1); /* the sweep: X's row deleted, removal queued */
	struct cat_chunk_where w;
	FAILS(cat_chunk_where(fx.w.cat, b.hash, &w), ENOENT);

	ut_start(false);
	uploader_set_between(fx.u, ut_between_moot, &b);
	cr_assert(ut_gate_reached(&b.gate), "X's first row was never taken");
	/* the moot row is between its check and its end: the writer stores X anew */
	ut_file(CAT_ROOT_INO, "b", 900, 1, 32 << 10, 0);
	cr_assert_eq(memcmp(fx.hash[1], b.hash, HASH_LEN), 0, "the same bytes, the same chunk");
	ut_gate_open(&b.gate);

	uploader_stop(fx.u, true); /* drained: every row ended */
	fx.u = NULL;
	OK(cat_chunk_where(fx.w.cat, b.hash, &w));
	cr_assert(!w.uploaded || ut_chunk_on_backing(1),
		  "X is called uploaded, and BACKING does not have it");
	cr_assert(ut_chunk_on_backing(1), "file b's only chunk never reached BACKING");
	cr_assert(w.uploaded);
	ut_gate_destroy(&b.gate);
}

/* review3 F7 (claim.h 9): a manifest row whose put landed, then found the
 * claim not sure before removing the version it replaces, stays queued and
 * is redone whole; ended as done, version v-1 stayed on BACKING for ever. */
static struct {
	uint64_t gen;
	int fenced; /* atomics: the workers ask */
} ut_fence;

static bool ut_version_on_backing(uint64_t gen, uint32_t version)
{
	char path[MANIFEST_PATH_MAX];
	manifest_gen_path(gen, version, path, sizeof(path));
	return ut_on_backing(path);
}

/* claim_may_write answers false from the moment version 2 is on BACKING */
static int ut_fence_after_put(struct claim *c, const char *point)
{
	(void)c;
	if (strcmp(point, "may-write") != 0)
		return 0;
	if (!__atomic_load_n(&ut_fence.fenced, __ATOMIC_ACQUIRE) &&
	    ut_version_on_backing(ut_fence.gen, 2))
		__atomic_store_n(&ut_fence.fenced, 1, __ATOMIC_RELEASE);
	return __atomic_load_n(&ut_fence.fenced, __ATOMIC_ACQUIRE) ? -ESTALE : 0;
}

Test(uploader, a_manifest_row_fenced_after_its_put_stays_queued_and_removes_its_old_version_later)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t g = ut_gen(series, "step-1", 1, 300, 2);
	ut_start(false);
	ut_wait_durable(1);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert(ut_version_on_backing(g, 1));
	OK(cat_gen_reopen(fx.w.cat, g)); /* a rewrite: version 2 of its manifest queued */
	OK(cat_gen_commit(fx.w.cat, g, "explicit"));
	struct cat_upload rows[8];
	cr_assert_eq(cat_upload_list(fx.w.cat, 0, rows, 8), 1);
	cr_assert(rows[0].kind == UP_GEN_MANIFEST && rows[0].version == 2);

	struct claim *c = NULL;
	char msg[PATH_MAX + 512];
	OK(claim_acquire(fx.w.b, "0123456789abcdef0123456789abcdef", false, true, fx.w.cache, 60, &c,
			 msg, sizeof(msg)));
	ut_fence.gen = g;
	ut_fence.fenced = 0;
	claim_test_hook = ut_fence_after_put;
	struct uploader_config cfg = {
		.threads = 1, .deadline_s = 600, .chunk_max = UT_CHUNK_MAX, .claim = c,
	};
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", fx.w.cache);
	OK(uploader_start(&cfg, fx.w.cat, fx.w.st, fx.w.b, NULL, ut_on_durable, &fx, &fx.u));
	double until = ut_mono() + 15;
	while (!__atomic_load_n(&ut_fence.fenced, __ATOMIC_ACQUIRE) && ut_mono() < until)
		usleep(10 * 1000);
	uploader_stop(fx.u, false); /* the worker's row is finished (or not) by now */
	fx.u = NULL;
	claim_test_hook = NULL;
	cr_assert(ut_fence.fenced, "version 2 was never put");
	cr_assert(ut_version_on_backing(g, 1), "removed while the claim was not sure");
	cr_assert_eq(ut_queued(), 1, "the row ended with version 1 left on BACKING");

	/* sure again: the row is redone whole, version 1 removed */
	ut_start(false);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert_eq(ut_queued(), 0);
	cr_assert(ut_version_on_backing(g, 2));
	cr_assert(!ut_version_on_backing(g, 1), "version 1 stayed on BACKING");
	claim_end(c, false);
}

/* Review 35 F4 (uploader.c T5, upload.h U5): alone, the tree manifest names
 * no chunk BACKING lacks. A file outside generations (`last.ckpt`) is
 * committed after the fingerprint found every chunk of the tree on BACKING
 * and before the manifest is built: its chunk is dirty, and BACKING refuses
 * chunk puts. The manifest built then named it, and the one before it (the
 * complete older tree) was removed; now the build finds the chunk in its own
 * snapshot and writes nothing until it is on BACKING. */
static void ut_tree_hold(void *arg)
{
	ut_gate_hold(arg);
}

static int ut_tree_newest(void *arg, const char *name)
{
	uint64_t *newest = arg, seq;
	if (manifest_tree_name_parse(name, &seq) == 0 && seq > *newest)
		*newest = seq;
	return 0;
}

/* The newest tree manifest on BACKING, parsed (NULL: none). */
static struct manifest *ut_tree_on_backing(void)
{
	uint64_t newest = 0, size = 0;
	backing_list(fx.w.b, "manifests/tree", ut_tree_newest, &newest);
	if (newest == 0)
		return NULL;
	char path[MANIFEST_PATH_MAX], err[MANIFEST_ERR_MAX];
	manifest_tree_path(newest, path, sizeof(path));
	OK(backing_stat(fx.w.b, path, &size));
	char *buf = malloc(size + 1);
	cr_assert_not_null(buf);
	size_t len = 0;
	OK(backing_get(fx.w.b, path, buf, size + 1, &len));
	struct manifest *m = NULL;
	cr_assert_eq(manifest_parse(buf, len, &m, err, sizeof(err)), 0, "%s: %s", path, err);
	free(buf);
	return m;
}

/* How many chunks m names that BACKING does not have. */
static int ut_named_not_on_backing(const struct manifest *m)
{
	int missing = 0;
	for (size_t i = 0; i < m->n_chunks; i++) {
		char rel[128];
		store_object_relpath(m->chunks[i].hash, rel, sizeof(rel));
		missing += !ut_on_backing(rel);
	}
	return missing;
}

static bool ut_names_file(const struct manifest *m, const char *name)
{
	for (size_t i = 0; i < m->n_inodes; i++)
		if (m->inodes[i].name && strcmp(m->inodes[i].name, name) == 0)
			return true;
	return false;
}

Test(uploader, alone_the_tree_manifest_never_names_a_chunk_committed_after_its_fingerprint)
{
	char blocker[256];
	ut_block_chunks(blocker, sizeof(blocker)); /* BACKING takes no chunk */
	struct ut_gate g;
	ut_gate_init(&g);
	ut_start_with(false, 1); /* one worker: it is the one held, no other uploads meanwhile */
	uploader_set_before_tree(fx.u, ut_tree_hold, &g);
	/* a change of the tree with no chunk: the next idle round writes it */
	ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	cr_assert(ut_gate_reached(&g), "the uploader never came to build the tree manifest");
	/* fingerprint taken (all on BACKING), build not yet: last.ckpt commits */
	ut_file(CAT_ROOT_INO, "last.ckpt", 950, 2, 32 << 10, 0);
	ut_gate_open(&g);
	uploader_stop(fx.u, false); /* the held round ends before the worker does */
	fx.u = NULL;

	struct manifest *m = ut_tree_on_backing();
	if (m) {
		int missing = ut_named_not_on_backing(m);
		cr_assert_eq(missing, 0, "BACKING's tree manifest names %d chunks BACKING does not"
			     " have (last.ckpt named: %d)", missing, ut_names_file(m, "last.ckpt"));
		manifest_free(m);
	}

	/* BACKING takes chunks again: the drain puts them, then the tree */
	cr_assert_eq(unlink(blocker), 0);
	ut_start_with(false, 1);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert_eq(ut_queued(), 0);
	m = ut_tree_on_backing();
	cr_assert_not_null(m, "no tree manifest on BACKING after the drain");
	cr_assert(ut_names_file(m, "last.ckpt"), "the drain's tree manifest lacks last.ckpt");
	cr_assert(ut_names_file(m, "run"));
	cr_assert_eq(m->n_chunks, 2);
	cr_assert_eq(ut_named_not_on_backing(m), 0);
	manifest_free(m);
	ut_gate_destroy(&g);
}

/* ---- which tree the tree manifest on BACKING describes (uploader.c T7,
 * upload.h U11; review 36 F4a) ---- */

/* The newest tree manifest on BACKING names name (no assertion: also on
 * the worker thread). */
static bool ut_tree_names_quiet(const char *name)
{
	uint64_t newest = 0, size = 0;
	if (backing_list(fx.w.b, "manifests/tree", ut_tree_newest, &newest) != 0 || newest == 0)
		return false;
	char path[MANIFEST_PATH_MAX], err[MANIFEST_ERR_MAX];
	manifest_tree_path(newest, path, sizeof(path));
	if (backing_stat(fx.w.b, path, &size) != 0)
		return false;
	char *buf = malloc(size + 1);
	size_t len = 0;
	struct manifest *m = NULL;
	bool named = buf && backing_get(fx.w.b, path, buf, size + 1, &len) == 0 &&
		     manifest_parse(buf, len, &m, err, sizeof(err)) == 0 && ut_names_file(m, name);
	if (m)
		manifest_free(m);
	free(buf);
	return named;
}

static void ut_count_tree(void *arg)
{
	__atomic_add_fetch((int *)arg, 1, __ATOMIC_ACQ_REL);
}

static bool ut_tree_current(void)
{
	bool current = false;
	OK(cat_tree_described_current(fx.w.cat, &current));
	return current;
}

/* Waits up to 15 s for the catalog to say the tree is described on BACKING. */
static bool ut_wait_tree_current(void)
{
	double until = ut_mono() + 15;
	while (!ut_tree_current() && ut_mono() < until)
		usleep(20 * 1000);
	return ut_tree_current();
}

/* U11: with every chunk of last.ckpt on BACKING but the tree manifest's put
 * failing (a file where manifests/tree/ goes), the catalog never says the
 * tree is described; once the put succeeds it does, and a rename (no new
 * chunk) makes it say no again until the next tree manifest. */
Test(uploader, the_catalog_says_the_tree_is_described_only_once_a_tree_manifest_of_it_is_put)
{
	char dir[PATH_MAX], blocker[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/manifests", fx.w.backing);
	snprintf(blocker, sizeof(blocker), "%s/tree", dir);
	cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST, "%s: %s", dir, strerror(errno));
	int fd = open(blocker, O_CREAT | O_EXCL | O_WRONLY, 0600);
	cr_assert_geq(fd, 0, "%s: %s", blocker, strerror(errno));
	close(fd);
	cr_assert_not(ut_tree_current(), "a catalog without a tree manifest says it is described");
	ut_file(CAT_ROOT_INO, "last.ckpt", 960, 2, 32 << 10, 0);
	int tries = 0;
	ut_start_with(false, 1);
	uploader_set_before_tree(fx.u, ut_count_tree, &tries);
	/* every chunk uploaded, and two rounds tried to put the tree manifest */
	double until = ut_mono() + 15;
	while (__atomic_load_n(&tries, __ATOMIC_ACQUIRE) < 2 && ut_mono() < until)
		usleep(20 * 1000);
	cr_assert_geq(__atomic_load_n(&tries, __ATOMIC_ACQUIRE), 2, "the uploader never tried the tree manifest");
	cr_assert(ut_chunk_on_backing(0) && ut_chunk_on_backing(1), "last.ckpt's chunks are not on BACKING");
	cr_assert_not(ut_tree_current(), "the tree said described while its manifest's put fails");
	cr_assert_eq(unlink(blocker), 0);
	cr_assert(ut_wait_tree_current(), "the tree not described 15 s after BACKING took its manifest");
	cr_assert(ut_tree_names_quiet("last.ckpt"), "the catalog says described, BACKING's tree manifest lacks last.ckpt");
	/* a rename: no chunk, no row; the catalog sees the change at once */
	uploader_stop(fx.u, false);
	fx.u = NULL;
	uint64_t replaced = 0;
	OK(cat_rename(fx.w.cat, CAT_ROOT_INO, "last.ckpt", CAT_ROOT_INO, "final.ckpt", 0, &replaced));
	cr_assert_eq(ut_queued(), 0);
	cr_assert_not(ut_tree_current(), "a renamed file said described by the older tree manifest");
	ut_start_with(false, 1);
	cr_assert(ut_wait_tree_current(), "the renamed tree not described 15 s after the mount");
	cr_assert(ut_tree_names_quiet("final.ckpt"));
}

/* A queue that never goes idle: each generation manifest row's end (the
 * rows that end one by one; chunk rows end by batches) commits another
 * generation, as a trainer does (each changes run/'s times, so the tree
 * changes too), until the tree manifest names last.ckpt or `until`. */
static struct {
	uint64_t series;
	int added;
	double until;
	int done;         /* atomic */
	bool named_busy;  /* the tree manifest named last.ckpt while saves were added */
} ut_busy;

static void ut_busy_save(void)
{
	char name[32];
	uint64_t root;
	int n = ++ut_busy.added;
	snprintf(name, sizeof(name), "step-%d", n);
	uint64_t id = ts_mkgen(fx.w.cat, ut_busy.series, name, (uint64_t)n, true, &root);
	uint64_t ino = ts_mk(fx.w.cat, root, "weights", S_IFREG | 0644, NULL);
	ts_store_file(fx.w.cat, fx.w.st, ino, 5000 + n, 1, 16 << 10, NULL, NULL);
	OK(cat_gen_commit(fx.w.cat, id, "explicit"));
}

static void ut_busy_hook(void *arg, const struct cat_upload *row)
{
	(void)arg;
	if (row->kind != UP_GEN_MANIFEST || __atomic_load_n(&ut_busy.done, __ATOMIC_ACQUIRE))
		return;
	bool named = ut_tree_names_quiet("last.ckpt");
	if (named || ut_mono() >= ut_busy.until) {
		ut_busy.named_busy = named;
		__atomic_store_n(&ut_busy.done, 1, __ATOMIC_RELEASE);
		return;
	}
	ut_busy_save();
}

/* T7 (review 36 F4a): the tree manifest was written only on an idle round,
 * so a trainer writing its next save kept a final model outside
 * generations out of every tree manifest on BACKING for as long as the
 * queue stayed busy. On main (idle rounds only) this fails: last.ckpt is
 * not named after 10 s of a queue that never empties. */
Test(uploader, the_tree_manifest_is_written_while_the_queue_stays_busy)
{
	memset(&ut_busy, 0, sizeof(ut_busy));
	ut_busy.series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	ut_file(CAT_ROOT_INO, "last.ckpt", 970, 2, 32 << 10, 0);
	for (int i = 0; i < 4; i++)
		ut_busy_save();
	ut_busy.until = ut_mono() + 10;
	ut_start_with(false, 1);
	uploader_set_between(fx.u, ut_busy_hook, NULL);
	double until = ut_mono() + 20;
	while (!__atomic_load_n(&ut_busy.done, __ATOMIC_ACQUIRE) && ut_mono() < until)
		usleep(20 * 1000);
	cr_assert(__atomic_load_n(&ut_busy.done, __ATOMIC_ACQUIRE), "the queue went idle: the"
		  " test proves nothing (%d saves added, %d rows queued)", ut_busy.added, ut_queued());
	uploader_stop(fx.u, false);
	fx.u = NULL;
	cr_assert(ut_busy.named_busy, "no tree manifest named last.ckpt while the queue stayed busy"
		  " (%d saves committed meanwhile)", ut_busy.added);
	cr_assert(ut_chunk_on_backing(0) && ut_chunk_on_backing(1));
}

/* review3 F9 (claim.h 9): an unmount's drain that finds the claim unsure
 * (not lost) waits for a renewal before it leaves the queue in the cache. */
static struct {
	int armed, asked, unsure, stopped; /* atomics */
} ut_unsure;

static int ut_unsure_hook(struct claim *c, const char *point)
{
	(void)c;
	if (strcmp(point, "may-write") != 0)
		return 0;
	if (__atomic_load_n(&ut_unsure.armed, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&ut_unsure.asked, 1, __ATOMIC_ACQ_REL);
	return __atomic_load_n(&ut_unsure.unsure, __ATOMIC_ACQUIRE) ? -ESTALE : 0;
}

/* "the renewal": once the drain asked a few times, the claim is sure again */
static void *ut_renew_later(void *arg)
{
	(void)arg;
	while (__atomic_load_n(&ut_unsure.asked, __ATOMIC_ACQUIRE) < 8 &&
	       !__atomic_load_n(&ut_unsure.stopped, __ATOMIC_ACQUIRE))
		usleep(10 * 1000);
	__atomic_store_n(&ut_unsure.unsure, 0, __ATOMIC_RELEASE);
	return NULL;
}

/* A claim of BACKING taken, and held unsure by ut_unsure_hook (claim.h 9)
 * until ut_unsure.unsure is cleared. */
static struct claim *ut_claim_unsure(void)
{
	struct claim *c = NULL;
	char msg[PATH_MAX + 512];
	OK(claim_acquire(fx.w.b, "0123456789abcdef0123456789abcdef", false, true, fx.w.cache, 60, &c,
			 msg, sizeof(msg)));
	memset(&ut_unsure, 0, sizeof(ut_unsure));
	ut_unsure.unsure = 1;
	claim_test_hook = ut_unsure_hook;
	return c;
}

Test(uploader, an_unmount_drain_waits_for_a_renewal_while_the_claim_is_unsure)
{
	struct claim *c = ut_claim_unsure();
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	ut_gen(series, "step-1", 1, 400, 3);
	struct uploader_config cfg = {
		.threads = 2, .deadline_s = 600, .chunk_max = UT_CHUNK_MAX, .claim = c,
	};
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", fx.w.cache);
	OK(uploader_start(&cfg, fx.w.cat, fx.w.st, fx.w.b, NULL, ut_on_durable, &fx, &fx.u));
	cr_assert_gt(ut_queued(), 0);
	__atomic_store_n(&ut_unsure.armed, 1, __ATOMIC_RELEASE);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, ut_renew_later, NULL), 0);
	uploader_stop(fx.u, true);
	fx.u = NULL;
	__atomic_store_n(&ut_unsure.stopped, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	claim_test_hook = NULL;
	cr_assert_eq(ut_queued(), 0, "the drain left the queue while the claim was only unsure");
	for (int i = 0; i < fx.n_chunks; i++)
		cr_assert(ut_chunk_on_backing(i), "chunk %d is not on BACKING", i);
	claim_end(c, false);
}

/* Review 34 A2 on one node (uploader.h B2, last part): a save deleted while
 * its manifest's put is in flight leaves no manifest on BACKING. The
 * removal row its delete queues waits while the manifest row is in hand
 * (U4: a second worker is free to try it), then removes every version it
 * lists, the one put late included. Passes on the code before B2 too: this
 * window was closed on one node already. */
Test(uploader, alone_a_save_deleted_while_its_manifest_put_is_in_flight_leaves_no_manifest)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t g = ut_gen(series, "step-1", 1, 400, 2);
	ut_start(false);
	ut_wait_durable(1);
	cr_assert(ut_version_on_backing(g, 1));
	struct ts_gate gate = TS_GATE_INIT(g);
	uploader_set_before_put(fx.u, ts_gate_hold, &gate);
	OK(cat_gen_reopen(fx.w.cat, g)); /* a rewrite: version 2's manifest row, ready at once */
	OK(cat_gen_commit(fx.w.cat, g, "explicit"));
	uploader_kick(fx.u);
	cr_assert(ts_gate_reached(&gate), "the uploader never came to version 2's manifest");

	struct cat_id_vec ids = { 0 };
	OK(cat_gen_delete(fx.w.cat, g, "trainer", cat_id_vec_add_ino, &ids));
	for (size_t i = 0; i < ids.n; i++)
		OK(cat_inode_release(fx.w.cat, ids.v[i]));
	cat_id_vec_free(&ids);
	uploader_kick(fx.u);
	ts_gate_open(&gate); /* version 2's put lands after the delete */
	uploader_stop(fx.u, true);
	fx.u = NULL;
	cr_assert_eq(ut_queued(), 0);
	cr_assert(!ut_version_on_backing(g, 2), "the late put of a deleted save stayed on BACKING");
	cr_assert(!ut_version_on_backing(g, 1));
}

/* store.c S12 (review 36 F2b, its uploader half): a check before an upload
 * that runs out of memory decoding a good cache copy is no verdict on the
 * chunk. It is retried, not remembered as lost (U7: tried once per mount):
 * once memory is there, it is uploaded and its generation durable in the
 * same mount. (Main called it corrupt, -EUCLEAN, and up_lost kept the row
 * back until the next mount: step-1 never became durable here.) */
Test(uploader, a_check_that_runs_out_of_memory_is_retried_not_taken_for_a_lost_chunk)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	uint64_t gen = ts_mkgen(fx.w.cat, series, "step-1", 1, true, &root);
	uint64_t ino = ts_mk(fx.w.cat, root, "weights", S_IFREG | 0644, NULL);
	size_t len = 64 << 10;
	uint8_t *plain = malloc(len);
	cr_assert_not_null(plain);
	ts_float_fill(plain, len);
	struct cat_extent e = { .off = 0, .len = len, .chunk_len = len };
	hash_sha256(plain, len, e.hash);
	bool must = false;
	OK(cat_pending_add(fx.w.cat, ino, &e, &must));
	store_set_codec(fx.w.st, CODEC_FAMILY_ZSTD);
	struct store_object_info info;
	OK(store_put(fx.w.st, e.hash, plain, len, STORE_SYNC, &info));
	cr_assert_eq(info.codec, CODEC_ZSTD_PLANES, "the test wants a codec 4 object, not %d",
		     info.codec);
	OK(cat_chunk_stored(fx.w.cat, e.hash, info.codec, info.stored_len));
	OK(cat_file_commit(fx.w.cat, ino, len, ts_now_ns(), false));
	OK(cat_pending_drop(fx.w.cat, ino));
	OK(cat_gen_commit(fx.w.cat, gen, "explicit"));
	memcpy(fx.hash[0], e.hash, HASH_LEN);
	fx.n_chunks = 1;
	/* a store of a later run: S2 vouches for nothing, the upload decodes */
	store_close(fx.w.st);
	OK(store_open(fx.w.cache, &fx.w.st));
	store_set_local_check(fx.w.st, STORE_CHECK_SHA);

	codec_fail_alloc_for_test(true);
	ut_start(false);
	usleep(400 * 1000); /* tried, failed and retried a few times (backoff from 100 ms) */
	cr_assert(!ut_chunk_on_backing(0), "uploaded without its check");
	cr_assert_eq(ut_durable_count(), 0);
	codec_fail_alloc_for_test(false);
	ut_wait_durable(1); /* 15 s at most: main's lost row waits for the next mount */
	cr_assert_eq(fx.durable[0], gen);
	cr_assert(ut_chunk_on_backing(0));
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.w.cat, e.hash, &w));
	cr_assert(w.uploaded);
	free(plain);
}

/* A small file outside generations whose writer stored one chunk not
 * published yet (a tracker's close, fs/ns.h invariant 13): its upload row
 * is queued. */
static uint64_t ut_pending_file(const char *name, int seed)
{
	uint64_t ino = ts_mk(fx.w.cat, CAT_ROOT_INO, name, S_IFREG | 0644, NULL);
	size_t len = 4096;
	uint8_t *plain = malloc(len);
	cr_assert_not_null(plain);
	ts_fill(plain, len, seed);
	struct cat_extent e = { .off = 0, .len = len, .chunk_len = len };
	hash_sha256(plain, len, e.hash);
	bool must = false;
	OK(cat_pending_add(fx.w.cat, ino, &e, &must));
	struct store_object_info info;
	OK(store_put(fx.w.st, e.hash, plain, len, STORE_SYNC, &info));
	OK(cat_chunk_stored(fx.w.cat, e.hash, info.codec, info.stored_len));
	free(plain);
	return ino;
}

static bool ut_backing_down(void)
{
	struct uploader_stats st;
	uploader_get_stats(fx.u, &st);
	return st.backing_down;
}

/* uploader.h B7 (review 49 F5): with BACKING hung (a put that does not
 * return, failing nothing) the first gated wait times out, the next answer
 * -ENETDOWN at once, not one timeout each; once the hung put returns, a
 * wait waits for its upload again and succeeds. One worker, held in a
 * manifest's put (before_put): the file's chunk cannot go meanwhile. Main
 * waited the whole timeout at every wait. */
Test(uploader, a_hung_put_costs_one_gated_wait_its_timeout_not_every_wait)
{
	uint64_t series = ts_mk(fx.w.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t g = ut_gen(series, "step-1", 1, 500, 3);
	struct ts_gate gate = TS_GATE_INIT(g);
	ut_start_with(false, 1);
	uploader_set_before_put(fx.u, ts_gate_hold, &gate);
	cr_assert(ts_gate_reached(&gate), "the worker never came to the manifest's put");
	uint64_t ino = ut_pending_file("latest", 900);
	uploader_kick(fx.u);

	/* measured first, asserted once the gate is open: a failed assertion
	 * with the worker held would hang the teardown's stop */
	double t0 = ut_mono();
	int rc1 = uploader_wait_pending(fx.u, ino, 500);
	double took1 = ut_mono() - t0;
	bool down1 = ut_backing_down();
	int rc[2];
	double took[2];
	for (int i = 0; i < 2; i++) {
		t0 = ut_mono();
		rc[i] = uploader_wait_pending(fx.u, ino, 10000);
		took[i] = ut_mono() - t0;
	}
	ts_gate_open(&gate); /* BACKING answers: the hung put returns */
	cr_assert_eq(rc1, -ETIMEDOUT, "the first wait behind the hung put: %d", rc1);
	cr_assert_geq(took1, 0.45);
	cr_assert(down1, "stats do not show BACKING not answering after the hung wait");
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(rc[i], -ENETDOWN, "wait %d behind the hung put: %d after %.1f s", i + 2,
			     rc[i], took[i]);
		cr_assert_lt(took[i], 2.0, "wait %d behind the hung put took %.1f s", i + 2, took[i]);
	}
	bool done = false;
	for (int i = 0; i < 300 && ut_backing_down(); i++)
		usleep(20 * 1000);
	cr_assert(!ut_backing_down(), "BACKING still counted as not answering after a put returned");
	uint64_t ino2 = ut_pending_file("latest2", 901);
	uploader_kick(fx.u);
	cr_assert_eq(uploader_wait_pending(fx.u, ino2, 20000), 0, "a wait once BACKING answers");
	OK(cat_pending_uploaded(fx.w.cat, ino2, &done));
	cr_assert(done, "the wait returned before the file's chunk was on BACKING");
	cr_assert_eq(uploader_wait_pending(fx.u, ino, 20000), 0);
}

/* uploader.h B7, its other side: a wait that times out with no call in
 * flight that long (here no put starts: the claim is unsure, claim.h 9;
 * likewise a BACKING slow but answering) sets nothing: every wait waits
 * its timeout, as ns.h 13 promises while BACKING may still take the file. */
Test(uploader, a_timed_out_wait_with_no_hung_call_leaves_the_next_wait_waiting)
{
	struct claim *c = ut_claim_unsure();
	struct uploader_config cfg = {
		.threads = 1, .deadline_s = 600, .chunk_max = UT_CHUNK_MAX, .claim = c,
	};
	snprintf(cfg.cache_dir, sizeof(cfg.cache_dir), "%s", fx.w.cache);
	OK(uploader_start(&cfg, fx.w.cat, fx.w.st, fx.w.b, NULL, ut_on_durable, &fx, &fx.u));
	uint64_t ino = ut_pending_file("latest", 902);
	uploader_kick(fx.u);
	int rc[2];
	double took[2];
	for (int i = 0; i < 2; i++) {
		double t0 = ut_mono();
		rc[i] = uploader_wait_pending(fx.u, ino, 400);
		took[i] = ut_mono() - t0;
	}
	bool down = ut_backing_down();
	__atomic_store_n(&ut_unsure.unsure, 0, __ATOMIC_RELEASE); /* renewed */
	int rc3 = uploader_wait_pending(fx.u, ino, 20000);
	uploader_stop(fx.u, false);
	fx.u = NULL;
	claim_test_hook = NULL;
	claim_end(c, false);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(rc[i], -ETIMEDOUT, "wait %d: %d", i + 1, rc[i]);
		cr_assert_geq(took[i], 0.35, "wait %d took %.2f s, not its timeout", i + 1, took[i]);
	}
	cr_assert(!down, "BACKING counted as not answering with no call in flight");
	cr_assert_eq(rc3, 0, "the wait once the claim is sure again");
}
