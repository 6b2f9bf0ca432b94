/* What several unit test files share: the OK/FAILS assertions, a private
 * temporary directory per test, seeded hashes and chunked files in a catalog,
 * and a canonical dump of a catalog for byte-for-byte comparison.
 *
 * tests/unit/support.c is linked into the unit binary with the tests (the
 * Makefile links every .c file in tests/unit); it holds no Test of its own. Its
 * public names start with ts_, since every test file shares its namespace. */
#ifndef CKPTFS_TESTS_UNIT_SUPPORT_H
#define CKPTFS_TESTS_UNIT_SUPPORT_H

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "catalog.h"

/* expr (a 0-or-negative-errno call) returned 0. */
#define OK(expr)                                                                          \
	do {                                                                              \
		int rc_ = (expr);                                                         \
		cr_assert_eq(rc_, 0, "%s returned %d (%s)", #expr, rc_, strerror(-rc_)); \
	} while (0)

/* expr returned -err. */
#define FAILS(expr, err)                                                                     \
	do {                                                                                 \
		int rc_ = (expr);                                                            \
		cr_assert_eq(rc_, -(err), "%s returned %d (%s), expected -%s", #expr, rc_,   \
			     strerror(-rc_), #err);                                          \
	} while (0)

/* ---- temporary directories ---- */

/* Makes the directory /tmp/ckptfs-<name>-XXXXXX into dir (at least 64 bytes). */
void ts_tmpdir_make(char *dir, size_t size, const char *name);

/* Removes dir and all below it, going on past entries it cannot remove. */
void ts_tmpdir_remove(const char *dir);

/* ---- a cache beside a BACKING ---- */

/* What a daemon's services stand on, in a new temporary directory DIR:
 * DIR/cache (a chunk store, its catalog.db) and DIR/backing (a directory
 * BACKING with a 2 s timeout). */
struct store;
struct backing;
struct ts_stack {
	char dir[64], cache[128], backing[128], cat_path[160];
	struct cat *cat;
	struct store *st;
	struct backing *b;
};
void ts_stack_open(struct ts_stack *s, const char *name);
/* Checks and closes the catalog, closes the store and BACKING, removes DIR. */
void ts_stack_close(struct ts_stack *s);

/* ---- catalog builders ---- */

/* Opens (creating) the catalog dir/name into *cat, its path into path. */
void ts_cat_open_in(const char *dir, const char *name, char *path, size_t size, struct cat **cat);

/* Runs cat_check on *cat if it is open, closes it and clears *cat. */
void ts_cat_close_checked(struct cat **cat);

int64_t ts_now_ns(void);

/* A hash of fill bytes with seed in its first two (big-endian), so that each
 * test file's chunks are told apart by fill and each chunk by seed. */
void ts_hash(uint8_t out[CAT_HASH_LEN], uint8_t fill, int seed);

/* Creates name under parent owned by 1000:1001 (a character device is 1:3);
 * returns its inode. A regular file is as after its last close: the
 * create's "being written" mark (generation.h G7) cleared, else no rule but
 * an explicit one commits its generation (G9). */
uint64_t ts_mk(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
	       const char *target);

/* Creates the generation root name (a directory 0750, or a file 0640, as
 * closed: see ts_mk) with step under series; *ino gets its inode. Returns
 * the generation. */
uint64_t ts_mkgen(struct cat *cat, uint64_t series, const char *name, uint64_t step, bool dir,
		  uint64_t *ino);

/* Called for each chunk ts_write_chunks made the catalog store, with the
 * stored length it recorded. */
typedef void ts_chunk_stored_fn(void *arg, const uint8_t hash[CAT_HASH_LEN],
				uint64_t stored_len);

/* Writes ino's content as n whole chunks of len bytes, hashes
 * ts_hash(fill, seed), ts_hash(fill, seed + 1)… (a writer's pending list,
 * then a commit). A new chunk is recorded as stored with codec 1 and length
 * len/2 + 1, and passed to stored (if not NULL). */
void ts_write_chunks(struct cat *cat, uint64_t ino, uint8_t fill, int seed, int n, uint64_t len,
		     ts_chunk_stored_fn *stored, void *arg);

/* Fills buf with len bytes of a xorshift stream of seed: each seed its own
 * bytes, as random as a tensor to the codec. */
void ts_fill(uint8_t *buf, size_t len, int seed);

/* len bytes (at least one allocated) of a xorshift64 stream of seed, from
 * malloc: the caller frees them. */
uint8_t *ts_random(size_t len, uint64_t seed);

/* Fills len bytes (a multiple of 4) with float32 weights of magnitudes below
 * 0.05 from a fixed xorshift32 stream: bytes the zstd family stores as
 * codec 4 (rotated byte planes). */
void ts_float_fill(void *buf, size_t len);

/* Called for each chunk ts_store_file put, k its index in the file. */
typedef void ts_file_chunk_fn(void *arg, int k, const uint8_t hash[CAT_HASH_LEN]);

/* Gives ino n chunks of len bytes, ts_fill(seed + k) for chunk k, as a
 * writer would: a pending extent, the object put into store (synced) and
 * recorded as stored, then the file committed and its pending dropped. Each
 * chunk must be new (it asserts the catalog asks for it to be stored). */
void ts_store_file(struct cat *cat, struct store *store, uint64_t ino, int seed, int n, size_t len,
		   ts_file_chunk_fn *each, void *arg);

/* ---- a canonical dump of a catalog ---- */

/* The namespace under ino (as `path`): names escaped, attributes, gen
 * column, symlink targets, extents, hard links as links to the first path;
 * with gens, the live generation rows too. The caller frees it. */
char *ts_dump_from(struct cat *cat, uint64_t ino, const char *path, bool gens);

/* The whole catalog: ts_dump_from(cat, root, "", true). */
char *ts_dump(struct cat *cat);

/* Asserts that the two catalogs dump the same, showing both if not. */
void ts_expect_same(struct cat *a, struct cat *b);

/* ---- an uploader's worker held at a test hook ---- */

/* ts_gate_hold, as an uploader test hook (uploader_set_before_put,
 * uploader_set_between), holds the worker at the first row of generation
 * gen until ts_gate_open; other rows pass. */
struct cat_upload;
struct ts_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t gen;
	bool reached, go;
};
#define TS_GATE_INIT(gen_id) { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, (gen_id), false, false }
void ts_gate_hold(void *arg, const struct cat_upload *row);
/* Whether the worker came to the gate (waits 60 s at most: a bound, not a measure). */
bool ts_gate_reached(struct ts_gate *g);
void ts_gate_open(struct ts_gate *g);

#endif
