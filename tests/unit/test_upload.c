/* Unit tests for the upload queue's batched end (meta/upload.c,
 * cat_upload_done_many): the rows of a batch leave the queue and their chunks
 * count as uploaded together, as one transaction. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "catalog.h"
#include "log.h"
#include "support.h"
#include "upload.h"

#define HASH_FILL 0x5B

static struct fixture {
	char dir[64], path[128];
	struct cat *cat;
} fx;

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "upload");
	ts_cat_open_in(fx.dir, "catalog.db", fx.path, sizeof(fx.path), &fx.cat);
}

static void teardown(void)
{
	ts_cat_close_checked(&fx.cat);
	ts_tmpdir_remove(fx.dir);
}

/* A file of n new chunks: n UP_CHUNK rows in the queue. */
static void tu_file_of_chunks(const char *name, int seed, int n)
{
	uint64_t ino = ts_mk(fx.cat, CAT_ROOT_INO, name, 0100644, NULL);
	for (int i = 0; i < n; i++) {
		struct cat_extent e = { .off = (uint64_t)i * 4096, .len = 4096, .chunk_len = 4096 };
		bool must = false;
		ts_hash(e.hash, HASH_FILL, seed + i);
		OK(cat_pending_add(fx.cat, ino, &e, &must));
		cr_assert(must);
		OK(cat_chunk_stored(fx.cat, e.hash, 0, 4096));
	}
	OK(cat_file_commit(fx.cat, ino, (uint64_t)n * 4096, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, ino));
}

static bool tu_uploaded(int seed)
{
	struct cat_chunk_where w;
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, seed);
	OK(cat_chunk_where(fx.cat, h, &w));
	return w.uploaded;
}

TestSuite(upload, .init = setup, .fini = teardown);

Test(upload, done_many_ends_every_row_of_the_batch_and_no_other)
{
	struct cat_upload rows[16];
	tu_file_of_chunks("f", 100, 10);
	int n = cat_upload_list(fx.cat, 0, rows, 16);
	cr_assert_eq(n, 10);
	OK(cat_upload_done_many(fx.cat, rows, 6));
	for (int i = 0; i < 10; i++)
		cr_assert_eq(tu_uploaded(100 + i), i < 6, "chunk %d uploaded=%d", i, !(i < 6));
	struct cat_upload left[16];
	cr_assert_eq(cat_upload_list(fx.cat, 0, left, 16), 4);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(left[i].seq, rows[6 + i].seq);
	OK(cat_upload_done_many(fx.cat, left, 4));
	cr_assert_eq(cat_upload_list(fx.cat, 0, left, 16), 0);
	OK(cat_upload_done_many(fx.cat, left, 0)); /* an empty batch is nothing */
}

/* upload.h U7 (review s30 F1): a moot row (its chunk reclaimed before its
 * upload) ending after a writer stored the same bytes anew marks nothing:
 * the new row is dirty and its own upload is queued. */
Test(upload, a_moot_row_ending_after_the_chunk_is_stored_anew_marks_nothing)
{
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 7);
	uint64_t ino = ts_mk(fx.cat, CAT_ROOT_INO, "a", 0100644, NULL);
	struct cat_extent e = { .off = 0, .len = 4096, .chunk_len = 4096 };
	memcpy(e.hash, h, CAT_HASH_LEN);
	bool must = false;
	OK(cat_pending_add(fx.cat, ino, &e, &must));
	OK(cat_chunk_stored(fx.cat, h, 0, 4096));
	OK(cat_file_commit(fx.cat, ino, 4096, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, ino));
	struct cat_upload rows[8];
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 8), 1); /* never uploaded */
	uint64_t gone = 0;
	OK(cat_unlink(fx.cat, CAT_ROOT_INO, "a", &gone));
	cat_inodes_release(fx.cat, &gone, 1); /* the sweep: row deleted, removal queued */
	struct cat_chunk_where w;
	cr_assert_eq(cat_chunk_where(fx.cat, h, &w), -ENOENT); /* the uploader: moot */
	uint64_t ino2 = ts_mk(fx.cat, CAT_ROOT_INO, "b", 0100644, NULL);
	OK(cat_pending_add(fx.cat, ino2, &e, &must));
	cr_assert(must);
	OK(cat_chunk_stored(fx.cat, h, 0, 4096)); /* the new, only copy: dirty */
	OK(cat_upload_moot_many(fx.cat, &rows[0], 1));
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(!w.uploaded, "marked uploaded, nothing was put on BACKING");
	struct cat_upload left[8];
	int n = cat_upload_list(fx.cat, 0, left, 8);
	bool queued = false;
	for (int i = 0; i < n; i++)
		queued |= left[i].kind == UP_CHUNK && memcmp(left[i].hash, h, CAT_HASH_LEN) == 0;
	cr_assert(queued, "the dirty chunk has its upload queued (U2)");
	OK(cat_pending_drop(fx.cat, ino2));
}

/* U13 (review 47 F2): a chunk cached and uploaded whose BACKING copy is bad
 * is dirty again with one UP_CHUNK row, so it is not evictable until the
 * put; one not both cached and uploaded is refused. */
Test(upload, reput_makes_an_uploaded_cached_chunk_dirty_with_one_row)
{
	struct cat_upload rows[4];
	tu_file_of_chunks("f", 300, 1);
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 300);
	FAILS(cat_chunk_reput(fx.cat, h), ENOENT); /* dirty: not uploaded yet */
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 4), 1);
	OK(cat_upload_done_many(fx.cat, rows, 1));
	cr_assert(tu_uploaded(300));
	OK(cat_chunk_reput(fx.cat, h));
	cr_assert(!tu_uploaded(300));
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(w.cached, "the good copy stays in the cache");
	uint8_t ev[4][CAT_HASH_LEN];
	uint64_t lens[4];
	cr_assert_eq(cat_evict_candidates(fx.cat, NULL, 0, ev, lens, 4), 0, "not evictable");
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 4), 1);
	cr_assert_eq(rows[0].kind, UP_CHUNK);
	cr_assert_eq(memcmp(rows[0].hash, h, CAT_HASH_LEN), 0);
	FAILS(cat_chunk_reput(fx.cat, h), ENOENT); /* already dirty: no second row */
	OK(cat_upload_done_many(fx.cat, rows, 1));
	cr_assert(tu_uploaded(300));
	cr_assert_eq(cat_evict_candidates(fx.cat, NULL, 0, ev, lens, 4), 1, "clean again");
}
