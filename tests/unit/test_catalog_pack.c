/* Unit tests for meta/catalog_pack.c: the packs table and the chunk rows
 * that name a pack (catalog_pack.h K1-K5), on a real catalog. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <sqlite3.h>
#include <string.h>

#include "catalog.h"
#include "catalog_pack.h"
#include "log.h"
#include "support.h"
#include "upload.h"

#define HASH_FILL 0x6C

static struct fixture {
	char dir[64], path[128];
	struct cat *cat;
} fx;

static void setup(void)
{
	log_setup(stderr, LOG_LVL_WARN);
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "catpack");
	ts_cat_open_in(fx.dir, "catalog.db", fx.path, sizeof(fx.path), &fx.cat);
}

static void teardown(void)
{
	ts_cat_close_checked(&fx.cat); /* cat_check: K1 and K2's checks included */
	ts_tmpdir_remove(fx.dir);
}

TestSuite(catpack, .init = setup, .fini = teardown);

/* A file of n new chunks of 4 KiB (seeds seed..seed+n-1): n UP_CHUNK rows. */
static uint64_t tp_file(const char *name, int seed, int n)
{
	uint64_t ino = ts_mk(fx.cat, CAT_ROOT_INO, name, 0100644, NULL);
	for (int i = 0; i < n; i++) {
		struct cat_extent e = { .off = (uint64_t)i * 4096, .len = 4096, .chunk_len = 4096 };
		bool must = false;
		ts_hash(e.hash, HASH_FILL, seed + i);
		OK(cat_pending_add(fx.cat, ino, &e, &must));
		OK(cat_chunk_stored(fx.cat, e.hash, 0, 4096));
	}
	OK(cat_file_commit(fx.cat, ino, (uint64_t)n * 4096, ts_now_ns(), false));
	OK(cat_pending_drop(fx.cat, ino));
	return ino;
}

static void tp_unlink(const char *name)
{
	uint64_t gone = 0;
	OK(cat_unlink(fx.cat, CAT_ROOT_INO, name, &gone));
	cat_inodes_release(fx.cat, &gone, 1); /* and the sweep */
}

/* The queued rows of one kind (and, with hash, of that hash). */
static int tp_rows(int kind, const uint8_t *hash)
{
	struct cat_upload rows[64];
	int n = cat_upload_list(fx.cat, 0, rows, 64), k = 0;
	for (int i = 0; i < n; i++)
		k += rows[i].kind == kind && (!hash || memcmp(rows[i].hash, hash, CAT_HASH_LEN) == 0);
	return k;
}

static int64_t tp_int(const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	cr_assert_eq(sqlite3_open_v2(fx.path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	cr_assert_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK, "%s", sql);
	int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* Puts the queued UP_CHUNK rows of the chunks seed..seed+n-1 into pack
 * `name` as the uploader does (begin, then done): member i at 32 + 100 i. */
static size_t tp_pack(const uint8_t name[CAT_HASH_LEN], int seed, int n, int *state)
{
	struct cat_upload all[64], rows[64];
	struct cat_pack_member m[64];
	int k = 0, got = cat_upload_list(fx.cat, 0, all, 64);
	for (int i = 0; i < got; i++) {
		for (int j = 0; j < n; j++) {
			uint8_t h[CAT_HASH_LEN];
			ts_hash(h, HASH_FILL, seed + j);
			if (all[i].kind != UP_CHUNK || memcmp(all[i].hash, h, CAT_HASH_LEN) != 0)
				continue;
			rows[k] = all[i];
			memcpy(m[k].hash, h, CAT_HASH_LEN);
			m[k].off = 32 + 100 * (uint64_t)k;
			m[k].len = 100;
			k++;
		}
	}
	cr_assert_eq(k, n, "queued rows of the members");
	OK(cat_pack_begin(fx.cat, name, 32 + 100 * (uint64_t)n + 40 + 48 * (uint64_t)n,
			  (uint32_t)n, state));
	size_t taken = 0;
	OK(cat_pack_done(fx.cat, name, m, rows, (size_t)n, NULL, 0, &taken));
	return taken;
}

Test(catpack, members_name_the_pack_and_count_as_live_until_their_rows_go)
{
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 1);
	tp_file("a", 10, 3);
	tp_file("b", 20, 2);
	int state = -1;
	cr_assert_eq(tp_pack(name, 10, 3, &state), 3);
	cr_assert_eq(state, CAT_PACK_PUTTING);
	struct cat_chunk_where w;
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 11);
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(w.uploaded && w.packed && !w.loose_only);
	cr_assert_eq(memcmp(w.pack, name, CAT_HASH_LEN), 0);
	cr_assert_eq(w.pack_off, 132);
	cr_assert_eq(w.pack_len, 100);
	cr_assert_eq(tp_rows(UP_CHUNK, NULL), 2, "only b's rows are left");
	struct cat_pack_stats ps;
	OK(cat_pack_stats(fx.cat, &ps));
	cr_assert_eq(ps.packs, 1);
	cr_assert_eq(ps.members, 3);
	cr_assert_eq(ps.live_bytes, 300);
	OK(cat_check(fx.cat));

	/* a member's row goes: no loose removal is queued (it has no loose
	 * object), the pack counts one fewer */
	tp_unlink("a");
	cr_assert_eq(tp_rows(UP_DELETE_CHUNK, NULL), 0, "a removal of a loose object no one put");
	OK(cat_pack_stats(fx.cat, &ps));
	cr_assert_eq(ps.packs, 0, "the pack is removing");
	cr_assert_eq(ps.removing, 1);
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 1, "K4: the dead pack's removal is queued");
	OK(cat_check(fx.cat));
}

Test(catpack, a_pack_lives_while_one_member_lives_and_is_removable_only_when_none_does)
{
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 2);
	tp_file("a", 10, 2);
	tp_file("b", 20, 1);
	int state;
	/* one pack of a's two chunks and b's one */
	struct cat_upload all[8];
	int n = cat_upload_list(fx.cat, 0, all, 8);
	cr_assert_eq(n, 3);
	struct cat_pack_member m[3];
	for (int i = 0; i < 3; i++) {
		memcpy(m[i].hash, all[i].hash, CAT_HASH_LEN);
		m[i].off = 32 + 100 * (uint64_t)i;
		m[i].len = 100;
	}
	OK(cat_pack_begin(fx.cat, name, 1000, 3, &state));
	bool removable = true;
	OK(cat_pack_removable(fx.cat, name, &removable));
	cr_assert(!removable, "K4: a pack being put is never removable");
	size_t taken;
	OK(cat_pack_done(fx.cat, name, m, all, 3, NULL, 0, &taken));
	cr_assert_eq(taken, 3);
	tp_unlink("a");
	cr_assert_eq(tp_rows(UP_DELETE_PACK, NULL), 0, "b's member still lives in it");
	OK(cat_pack_removable(fx.cat, name, &removable));
	cr_assert(!removable);
	tp_unlink("b");
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 1);
	OK(cat_pack_removable(fx.cat, name, &removable));
	cr_assert(removable);
	struct cat_upload rows[8];
	n = cat_upload_list(fx.cat, 0, rows, 8);
	cr_assert_eq(n, 1);
	OK(cat_upload_done(fx.cat, &rows[0])); /* it left BACKING */
	cr_assert_eq(tp_int("SELECT COUNT(*) FROM packs"), 0);
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 8), 0);
}

/* K4: a pack put again under the same name (the same members: pack.h P2)
 * while its removal is queued is putting again; the removal finds it not
 * removable (moot) and the members name it. */
Test(catpack, a_pack_put_again_while_removing_is_not_removable)
{
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 3);
	tp_file("a", 10, 2);
	int state;
	cr_assert_eq(tp_pack(name, 10, 2, &state), 2);
	tp_unlink("a");
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 1);
	tp_file("a2", 10, 2); /* the same bytes again: dirty rows */
	cr_assert_eq(tp_pack(name, 10, 2, &state), 2);
	cr_assert_eq(state, CAT_PACK_PUTTING_AGAIN, "a removing pack is put again (it may be gone already)");
	bool removable = true;
	OK(cat_pack_removable(fx.cat, name, &removable));
	cr_assert(!removable, "the members name it again");
	struct cat_pack_stats ps;
	OK(cat_pack_stats(fx.cat, &ps));
	cr_assert_eq(ps.packs, 1);
	cr_assert_eq(ps.members, 2);
	/* a live pack of the same name is present: no put needed */
	tp_file("c", 40, 1);
	OK(cat_pack_begin(fx.cat, name, 1000, 2, &state));
	cr_assert_eq(state, CAT_PACK_LIVE, "a live pack is put again all the same (review 51 F1)");
}

/* K2: a member whose row went (reclaimed) or was uploaded meanwhile does
 * not take the pack; a pack no member took is removing at once. */
Test(catpack, rows_gone_before_the_done_do_not_take_the_pack)
{
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 4);
	tp_file("a", 10, 2);
	struct cat_upload rows[8];
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 8), 2);
	struct cat_pack_member m[2];
	for (int i = 0; i < 2; i++) {
		memcpy(m[i].hash, rows[i].hash, CAT_HASH_LEN);
		m[i].off = 32 + 100 * (uint64_t)i;
		m[i].len = 100;
	}
	int state;
	OK(cat_pack_begin(fx.cat, name, 1000, 2, &state));
	tp_unlink("a"); /* both rows gone before the put ended */
	size_t taken = 9;
	OK(cat_pack_done(fx.cat, name, m, rows, 2, NULL, 0, &taken));
	cr_assert_eq(taken, 0);
	struct cat_pack_stats ps;
	OK(cat_pack_stats(fx.cat, &ps));
	cr_assert_eq(ps.removing, 1, "a pack nobody names is removing");
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 1);
	cr_assert_eq(tp_rows(UP_CHUNK, NULL), 0, "the members' rows ended");
}

/* K5: putting rows are the orphans the mount removes; a pack a member
 * names is never forgotten. */
Test(catpack, orphans_are_the_putting_packs_and_forget_keeps_a_named_one)
{
	uint8_t a[CAT_HASH_LEN], b[CAT_HASH_LEN], got[4][CAT_HASH_LEN];
	int states[4];
	ts_hash(a, 0xA1, 5);
	ts_hash(b, 0xA1, 6);
	int state;
	OK(cat_pack_begin(fx.cat, a, 1000, 2, &state));
	tp_file("f", 10, 2);
	cr_assert_eq(tp_pack(b, 10, 2, &state), 2);
	size_t n = 9;
	OK(cat_pack_orphans(fx.cat, got, states, 4, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(memcmp(got[0], a, CAT_HASH_LEN), 0);
	OK(cat_pack_forget(fx.cat, a));
	FAILS(cat_pack_forget(fx.cat, b), EBUSY);
	OK(cat_pack_orphans(fx.cat, got, states, 4, &n));
	cr_assert_eq(n, 0);
}

/* K3: a chunk whose loose object is on BACKING stays loose when it is
 * dirty again (U13's reput; re-stored before the sweep), and a loose
 * upload clears a pack it named. */
Test(catpack, a_loose_object_is_put_loose_again)
{
	tp_file("a", 10, 1);
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 10);
	struct cat_upload rows[4];
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 4), 1);
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(!w.loose_only, "never put: it may go into a pack");
	OK(cat_upload_done_many(fx.cat, rows, 1)); /* put loose */
	OK(cat_chunk_reput(fx.cat, h));
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(!w.uploaded && w.loose_only && !w.packed, "K3 after a reput");
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 4), 1);
	OK(cat_upload_done_many(fx.cat, rows, 1));
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(w.uploaded && !w.loose_only && !w.packed);

	/* a packed member reput stays in its pack (counted) until it is put
	 * again; a loose put then moves it out and the pack dies */
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 7);
	tp_file("b", 20, 2);
	int state;
	cr_assert_eq(tp_pack(name, 20, 2, &state), 2);
	uint8_t p[CAT_HASH_LEN];
	ts_hash(p, HASH_FILL, 20);
	OK(cat_chunk_reput(fx.cat, p));
	OK(cat_chunk_where(fx.cat, p, &w));
	cr_assert(!w.uploaded && w.packed && !w.loose_only);
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 4), 1);
	OK(cat_upload_done_many(fx.cat, rows, 1)); /* put loose */
	OK(cat_chunk_where(fx.cat, p, &w));
	cr_assert(w.uploaded && !w.packed);
	struct cat_pack_stats ps;
	OK(cat_pack_stats(fx.cat, &ps));
	cr_assert_eq(ps.members, 1, "K1: the member moved out");
	tp_unlink("b");
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 1);
	cr_assert_eq(tp_rows(UP_DELETE_CHUNK, p), 1, "the loose object of p goes as loose ones do");
}

/* K1: cat_check finds a count that disagrees with the rows. */
Test(catpack, check_finds_a_wrong_live_count)
{
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 8);
	tp_file("a", 10, 2);
	int state;
	cr_assert_eq(tp_pack(name, 10, 2, &state), 2);
	OK(cat_check(fx.cat));
	cat_close(fx.cat);
	fx.cat = NULL;
	sqlite3 *db;
	cr_assert_eq(sqlite3_open(fx.path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "UPDATE packs SET live = 5", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	OK(cat_open(fx.path, 0, 0, NULL, NULL, &fx.cat));
	FAILS(cat_check(fx.cat), EUCLEAN);
	cat_close(fx.cat);
	cr_assert_eq(sqlite3_open(fx.path, &db), SQLITE_OK);
	cr_assert_eq(sqlite3_exec(db, "UPDATE packs SET live = 2", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	OK(cat_open(fx.path, 0, 0, NULL, NULL, &fx.cat));
}

/* K3: a small object the uploader puts loose after all (a pack of one) is
 * marked before its put, so that a retry after a crash puts it loose again
 * (the same name) instead of packing it beside an orphan loose copy; the
 * mark goes with the loose upload's end. */
Test(catpack, a_chunk_about_to_be_put_loose_stays_loose_on_a_retry)
{
	tp_file("a", 10, 1);
	uint8_t h[CAT_HASH_LEN];
	ts_hash(h, HASH_FILL, 10);
	struct cat_chunk_where w;
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(!w.loose_only);
	OK(cat_pack_loose(fx.cat, h));
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(w.loose_only && !w.uploaded, "marked before the put: a retry puts it loose");
	struct cat_upload rows[4];
	cr_assert_eq(cat_upload_list(fx.cat, 0, rows, 4), 1);
	OK(cat_upload_done_many(fx.cat, rows, 1));
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(w.uploaded && !w.loose_only && !w.packed);
	OK(cat_pack_loose(fx.cat, h)); /* uploaded: no mark */
	OK(cat_chunk_where(fx.cat, h, &w));
	cr_assert(!w.loose_only);
}

/* K4, U4 by the pack's name (review 51 F2): a pack that died, was put
 * again and died again has two removal rows; the first is stale. */
Test(catpack, a_removal_row_with_a_later_one_of_the_same_pack_is_stale)
{
	uint8_t name[CAT_HASH_LEN];
	ts_hash(name, 0xA1, 9);
	tp_file("a", 10, 2);
	int state;
	cr_assert_eq(tp_pack(name, 10, 2, &state), 2);
	tp_unlink("a");
	tp_file("a2", 10, 2);
	cr_assert_eq(tp_pack(name, 10, 2, &state), 2);
	tp_unlink("a2");
	struct cat_upload rows[8];
	int n = cat_upload_list(fx.cat, 0, rows, 8);
	cr_assert_eq(n, 2);
	cr_assert(rows[0].kind == UP_DELETE_PACK && rows[1].kind == UP_DELETE_PACK);
	bool ready = true, stale = false, superseded = false;
	OK(cat_upload_ready(fx.cat, &rows[0], &ready, &stale));
	cr_assert(stale && !ready, "the first removal row is stale");
	OK(cat_upload_removal_superseded(fx.cat, &rows[0], &superseded));
	cr_assert(superseded);
	OK(cat_upload_removal_superseded(fx.cat, &rows[1], &superseded));
	cr_assert(!superseded, "the last one governs");
}

/* K5 (review 51 F3): a put over a removing pack that does not end sends
 * it back to removing, its file kept, with a removal row of its own; a
 * putting-again row is an orphan of that kind at mount. */
Test(catpack, a_put_again_that_does_not_end_goes_back_to_removing)
{
	uint8_t name[CAT_HASH_LEN], got[4][CAT_HASH_LEN];
	int states[4];
	ts_hash(name, 0xA1, 10);
	tp_file("a", 10, 2);
	int state;
	cr_assert_eq(tp_pack(name, 10, 2, &state), 2);
	tp_unlink("a");
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 1);
	OK(cat_pack_begin(fx.cat, name, 1000, 2, &state));
	cr_assert_eq(state, CAT_PACK_PUTTING_AGAIN);
	size_t n = 0;
	OK(cat_pack_orphans(fx.cat, got, states, 4, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(states[0], CAT_PACK_PUTTING_AGAIN);
	FAILS(cat_pack_forget(fx.cat, name), EBUSY); /* never forgotten: its file may be needed */
	OK(cat_pack_unrevive(fx.cat, name));
	struct cat_pack_stats ps;
	OK(cat_pack_stats(fx.cat, &ps));
	cr_assert_eq(ps.removing, 1);
	cr_assert_eq(tp_rows(UP_DELETE_PACK, name), 2, "a removal row of its own beside the old one");
	bool removable = false;
	OK(cat_pack_removable(fx.cat, name, &removable));
	cr_assert(removable);
	FAILS(cat_pack_unrevive(fx.cat, name), EBUSY);
}
