/* Unit tests for fs/lib/chunker.c: FastCDC boundaries are a pure function of the
 * bytes (whatever the piece sizes), chunk sizes stay in [min, max], the gear
 * table is frozen, and content shifted or edited still cuts the same way. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "hash.h"

#define MiB ((size_t)1024 * 1024)
#define KiB ((size_t)1024)
#define STREAM_LEN (64 * MiB)
#define STREAM_SEED 0x5eed0001u

/* ---- helpers ---- */

static uint64_t tc_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void tc_fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t state = seed;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t r = tc_splitmix64(&state);

		memcpy(buf + i, &r, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)tc_splitmix64(&state);
}

static uint8_t *tc_random_stream(size_t len, uint64_t seed)
{
	uint8_t *buf = malloc(len ? len : 1);

	cr_assert_not_null(buf);
	tc_fill_random(buf, len, seed);
	return buf;
}

/* Chunk end offsets of a whole stream; the last one is the stream's end. */
struct tc_cuts {
	size_t *end;
	size_t n;
	size_t cap;
};

static void tc_cuts_push(struct tc_cuts *cuts, size_t end)
{
	if (cuts->n == cuts->cap) {
		cuts->cap = cuts->cap ? 2 * cuts->cap : 64;
		cuts->end = realloc(cuts->end, cuts->cap * sizeof(*cuts->end));
		cr_assert_not_null(cuts->end);
	}
	cuts->end[cuts->n++] = end;
}

static void tc_cuts_free(struct tc_cuts *cuts)
{
	free(cuts->end);
	memset(cuts, 0, sizeof(*cuts));
}

static size_t tc_chunk_start(const struct tc_cuts *cuts, size_t i)
{
	return i == 0 ? 0 : cuts->end[i - 1];
}

static size_t tc_chunk_len(const struct tc_cuts *cuts, size_t i)
{
	return cuts->end[i] - tc_chunk_start(cuts, i);
}

/* How the stream is cut into pieces for chunker_scan: fixed-size pieces, or
 * random sizes in 1..rand_max drawn from rng. */
struct tc_pieces {
	size_t fixed;
	size_t rand_max;
	uint64_t rng;
};

static size_t tc_next_piece(struct tc_pieces *plan)
{
	if (plan->fixed)
		return plan->fixed;
	return 1 + (size_t)(tc_splitmix64(&plan->rng) % plan->rand_max);
}

/* Chunks data[0..len) fed in pieces as plan says. */
static void tc_chunk(const struct chunker_params *params, const uint8_t *data, size_t len,
		     struct tc_pieces plan, struct tc_cuts *cuts)
{
	struct chunker c;
	size_t off = 0;

	memset(cuts, 0, sizeof(*cuts));
	cr_assert_eq(chunker_init(&c, params), 0);
	while (off < len) {
		size_t piece = tc_next_piece(&plan);
		size_t piece_end = piece < len - off ? off + piece : len;

		while (off < piece_end) {
			bool boundary;
			size_t used = chunker_scan(&c, data + off, piece_end - off, &boundary);

			cr_assert(used <= piece_end - off);
			off += used;
			if (boundary)
				tc_cuts_push(cuts, off);
			else
				cr_assert_eq(off, piece_end, "no boundary but piece not consumed");
		}
	}
	if (cuts->n == 0 || cuts->end[cuts->n - 1] != len)
		tc_cuts_push(cuts, len);
}

static void tc_chunk_whole(const struct chunker_params *params, const uint8_t *data,
			   size_t len, struct tc_cuts *cuts)
{
	struct tc_pieces one = { .fixed = len ? len : 1 };

	tc_chunk(params, data, len, one, cuts);
}

static void tc_assert_same_cuts(const struct tc_cuts *want, const struct tc_cuts *got)
{
	size_t i;

	cr_assert_eq(got->n, want->n, "chunk count %zu, want %zu", got->n, want->n);
	for (i = 0; i < want->n; i++)
		cr_assert_eq(got->end[i], want->end[i], "chunk %zu ends at %zu, want %zu", i,
			     got->end[i], want->end[i]);
}

static void tc_assert_sizes_in_range(const struct chunker_params *params,
				     const struct tc_cuts *cuts)
{
	size_t i;

	for (i = 0; i < cuts->n; i++) {
		size_t len = tc_chunk_len(cuts, i);

		cr_assert(len <= params->max_size, "chunk %zu is %zu bytes > max", i, len);
		if (i + 1 < cuts->n)
			cr_assert(len >= params->min_size, "chunk %zu is %zu bytes < min", i, len);
		else
			cr_assert(len > 0, "empty last chunk");
	}
}

/* SHA-256 of every chunk, sorted, to ask "does this chunk exist there?". */
struct tc_hashes {
	uint8_t (*h)[HASH_LEN];
	size_t n;
};

static int tc_hash_cmp(const void *a, const void *b)
{
	return memcmp(a, b, HASH_LEN);
}

static void tc_hash_chunks(const uint8_t *data, const struct tc_cuts *cuts, struct tc_hashes *out)
{
	size_t i;

	out->n = cuts->n;
	out->h = calloc(cuts->n ? cuts->n : 1, HASH_LEN);
	cr_assert_not_null(out->h);
	for (i = 0; i < cuts->n; i++)
		hash_sha256(data + tc_chunk_start(cuts, i), tc_chunk_len(cuts, i), out->h[i]);
	qsort(out->h, out->n, HASH_LEN, tc_hash_cmp);
}

static bool tc_hashes_contain(const struct tc_hashes *set, const uint8_t *data, size_t len)
{
	uint8_t h[HASH_LEN];

	hash_sha256(data, len, h);
	return bsearch(h, set->h, set->n, HASH_LEN, tc_hash_cmp) != NULL;
}

/* Of the chunks of data cut by cuts, from chunk index first on: the bytes and
 * the count of chunks whose content is not in known. */
static void tc_count_new(const struct tc_hashes *known, const uint8_t *data,
			 const struct tc_cuts *cuts, size_t first, size_t *new_bytes,
			 size_t *new_chunks, size_t *total_bytes)
{
	size_t i;

	*new_bytes = *new_chunks = *total_bytes = 0;
	for (i = first; i < cuts->n; i++) {
		size_t len = tc_chunk_len(cuts, i);

		*total_bytes += len;
		if (!tc_hashes_contain(known, data + tc_chunk_start(cuts, i), len)) {
			*new_bytes += len;
			(*new_chunks)++;
		}
	}
}

/* Feeds STREAM_LEN bytes in pieces as plan says and compares with one piece. */
static void tc_assert_piece_independent(struct tc_pieces plan, size_t len)
{
	uint8_t *data = tc_random_stream(len, STREAM_SEED);
	struct tc_cuts whole, pieces;

	tc_chunk_whole(&chunker_default_params, data, len, &whole);
	cr_assert(whole.n > 10, "stream too short to test: %zu chunks", whole.n);
	tc_chunk(&chunker_default_params, data, len, plan, &pieces);
	tc_assert_same_cuts(&whole, &pieces);
	tc_cuts_free(&whole);
	tc_cuts_free(&pieces);
	free(data);
}

/* ---- invariant 1: boundaries depend on bytes, not on piece sizes ---- */

Test(chunker, boundaries_same_when_fed_in_4k_pieces)
{
	tc_assert_piece_independent((struct tc_pieces){ .fixed = 4 * KiB }, STREAM_LEN);
}

Test(chunker, boundaries_same_when_fed_in_1mib_plus_7_pieces)
{
	tc_assert_piece_independent((struct tc_pieces){ .fixed = MiB + 7 }, STREAM_LEN);
}

Test(chunker, boundaries_same_when_fed_in_random_sized_pieces)
{
	tc_assert_piece_independent((struct tc_pieces){ .rand_max = 3 * MiB, .rng = 11 },
				    STREAM_LEN);
}

Test(chunker, boundaries_same_when_fed_in_tiny_random_pieces)
{
	tc_assert_piece_independent((struct tc_pieces){ .rand_max = 97, .rng = 12 }, STREAM_LEN);
}

Test(chunker, boundaries_same_when_fed_one_byte_at_a_time)
{
	/* 16 MiB keeps 16M calls quick under ASan and still spans many chunks. */
	tc_assert_piece_independent((struct tc_pieces){ .fixed = 1 }, 16 * MiB);
}

Test(chunker, boundaries_same_with_small_params_in_random_pieces)
{
	/* Small params give thousands of cuts, each near a piece edge sometimes. */
	const struct chunker_params small = { .min_size = 64, .avg_size = 256, .max_size = 1024 };
	size_t len = 4 * MiB;
	uint8_t *data = tc_random_stream(len, 77);
	struct tc_cuts whole, pieces;

	tc_chunk_whole(&small, data, len, &whole);
	cr_assert(whole.n > 1000);
	tc_chunk(&small, data, len, (struct tc_pieces){ .rand_max = 300, .rng = 5 }, &pieces);
	tc_assert_same_cuts(&whole, &pieces);
	tc_cuts_free(&pieces);
	tc_chunk(&small, data, len, (struct tc_pieces){ .fixed = 1 }, &pieces);
	tc_assert_same_cuts(&whole, &pieces);
	tc_assert_sizes_in_range(&small, &whole);
	tc_cuts_free(&whole);
	tc_cuts_free(&pieces);
	free(data);
}

Test(chunker, two_chunkers_on_interleaved_calls_cut_identically)
{
	size_t len = 32 * MiB;
	uint8_t *data = tc_random_stream(len, STREAM_SEED);
	struct chunker a, b;
	size_t off_a = 0, off_b = 0, ncuts_a = 0, ncuts_b = 0;
	size_t cuts_a[64], cuts_b[64];
	uint64_t rng = 99;

	cr_assert_eq(chunker_init(&a, &chunker_default_params), 0);
	cr_assert_eq(chunker_init(&b, &chunker_default_params), 0);
	/* Alternate calls so any hidden shared state would show. */
	while (off_a < len || off_b < len) {
		bool boundary;
		size_t piece;

		if (off_a < len) {
			piece = 1 + tc_splitmix64(&rng) % (2 * MiB);
			off_a += chunker_scan(&a, data + off_a,
					      piece < len - off_a ? piece : len - off_a, &boundary);
			if (boundary) {
				cr_assert(ncuts_a < 64);
				cuts_a[ncuts_a++] = off_a;
			}
		}
		if (off_b < len) {
			piece = 1 + tc_splitmix64(&rng) % (64 * KiB);
			off_b += chunker_scan(&b, data + off_b,
					      piece < len - off_b ? piece : len - off_b, &boundary);
			if (boundary) {
				cr_assert(ncuts_b < 64);
				cuts_b[ncuts_b++] = off_b;
			}
		}
	}
	cr_assert_gt(ncuts_a, 5);
	cr_assert_eq(ncuts_a, ncuts_b);
	cr_assert_arr_eq(cuts_a, cuts_b, ncuts_a * sizeof(cuts_a[0]));
	free(data);
}

Test(chunker, scan_of_zero_bytes_consumes_nothing)
{
	struct chunker c;
	bool boundary = true;
	uint8_t byte = 0;

	cr_assert_eq(chunker_init(&c, &chunker_default_params), 0);
	cr_assert_eq(chunker_scan(&c, &byte, 0, &boundary), 0);
	cr_assert_not(boundary);
	cr_assert_eq(c.pos, 0);
}

Test(chunker, reset_starts_a_fresh_chunk_like_a_new_stream)
{
	size_t len = 16 * MiB, skip = 3 * MiB + 12345;
	uint8_t *data = tc_random_stream(len, 4242);
	struct tc_cuts fresh, after_reset;
	struct chunker c;
	bool boundary = false;
	size_t off = 0, used;

	/* Chunk a prefix that ends mid-chunk, then reset and chunk the rest. */
	cr_assert_eq(chunker_init(&c, &chunker_default_params), 0);
	used = chunker_scan(&c, data, 100 * KiB, &boundary);
	cr_assert_eq(used, 100 * KiB);
	cr_assert_not(boundary);
	chunker_reset(&c);
	memset(&after_reset, 0, sizeof(after_reset));
	while (off < len - skip) {
		off += chunker_scan(&c, data + skip + off, len - skip - off, &boundary);
		if (boundary)
			tc_cuts_push(&after_reset, off);
	}
	if (after_reset.n == 0 || after_reset.end[after_reset.n - 1] != len - skip)
		tc_cuts_push(&after_reset, len - skip);
	tc_chunk_whole(&chunker_default_params, data + skip, len - skip, &fresh);
	tc_assert_same_cuts(&fresh, &after_reset);
	tc_cuts_free(&fresh);
	tc_cuts_free(&after_reset);
	free(data);
}

/* ---- invariant 2: sizes ---- */

Test(chunker, every_chunk_between_min_and_max_except_last)
{
	uint8_t *data = tc_random_stream(STREAM_LEN, STREAM_SEED);
	struct tc_cuts cuts;

	tc_chunk_whole(&chunker_default_params, data, STREAM_LEN, &cuts);
	tc_assert_sizes_in_range(&chunker_default_params, &cuts);
	cr_assert_eq(cuts.end[cuts.n - 1], STREAM_LEN);
	tc_cuts_free(&cuts);
	free(data);
}

Test(chunker, average_chunk_near_1mib_on_random_data)
{
	uint8_t *data = tc_random_stream(STREAM_LEN, STREAM_SEED);
	struct tc_cuts cuts;
	double avg;

	tc_chunk_whole(&chunker_default_params, data, STREAM_LEN, &cuts);
	cr_assert(cuts.n > 2);
	/* The last chunk is cut by the stream's end, not by content. */
	avg = (double)cuts.end[cuts.n - 2] / (double)(cuts.n - 1);
	cr_assert(avg >= 0.6 * MiB && avg <= 2.0 * MiB, "average chunk %.0f bytes", avg);
	tc_cuts_free(&cuts);
	free(data);
}

Test(chunker, all_zero_input_is_cut_at_max_size)
{
	size_t len = 17 * MiB + 3;
	uint8_t *zeros = calloc(1, len);
	struct tc_cuts cuts;
	size_t i;

	cr_assert_not_null(zeros);
	tc_chunk_whole(&chunker_default_params, zeros, len, &cuts);
	cr_assert_eq(cuts.n, 5);
	for (i = 0; i < 4; i++)
		cr_assert_eq(tc_chunk_len(&cuts, i), 4 * MiB, "chunk %zu", i);
	cr_assert_eq(tc_chunk_len(&cuts, 4), MiB + 3);
	tc_cuts_free(&cuts);
	free(zeros);
}

Test(chunker, min_equal_to_max_gives_fixed_size_chunks)
{
	const struct chunker_params fixed = { .min_size = 4096, .avg_size = 4096,
					      .max_size = 4096 };
	size_t len = 10 * 4096 + 1;
	uint8_t *data = tc_random_stream(len, 3);
	struct tc_cuts cuts;
	size_t i;

	tc_chunk(&fixed, data, len, (struct tc_pieces){ .rand_max = 5000, .rng = 1 }, &cuts);
	cr_assert_eq(cuts.n, 11);
	for (i = 0; i < 10; i++)
		cr_assert_eq(cuts.end[i], (i + 1) * 4096);
	cr_assert_eq(tc_chunk_len(&cuts, 10), 1);
	tc_cuts_free(&cuts);
	free(data);
}

Test(chunker, init_rejects_bad_params)
{
	static const struct chunker_params bad[] = {
		{ .min_size = 0, .avg_size = MiB, .max_size = 4 * MiB },       /* min 0 */
		{ .min_size = 2 * MiB, .avg_size = MiB, .max_size = 4 * MiB }, /* min > avg */
		{ .min_size = KiB, .avg_size = 8 * MiB, .max_size = 4 * MiB }, /* avg > max */
		{ .min_size = KiB, .avg_size = 3 * MiB, .max_size = 4 * MiB }, /* avg not 2^n */
		{ .min_size = 0, .avg_size = 0, .max_size = 0 },               /* all zero */
	};
	struct chunker c;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(chunker_init(&c, &bad[i]), -EINVAL, "bad params %zu accepted", i);
	cr_assert_eq(chunker_init(&c, NULL), -EINVAL);
	cr_assert_eq(chunker_init(&c, &chunker_default_params), 0);
}

Test(chunker, default_params_are_512k_1m_4m)
{
	cr_assert_eq(chunker_default_params.min_size, 512 * KiB);
	cr_assert_eq(chunker_default_params.avg_size, MiB);
	cr_assert_eq(chunker_default_params.max_size, 4 * MiB);
}

/* ---- invariant 3: the gear table and masks are frozen ---- */

Test(chunker, boundaries_of_reference_stream_never_change)
{
	/* Recorded when the gear table was fixed. If this fails, chunk names have
	 * changed and existing stores lose dedup: do not update it lightly. */
	static const size_t want[] = {
		1119667, 2898159, 3993633, 5278946, 6448950, 7091050,
		8148254, 9915568, 11355522, 12567702, 13636955, 14761432,
	};
	size_t n = sizeof(want) / sizeof(want[0]);
	uint8_t *data = tc_random_stream(STREAM_LEN, STREAM_SEED);
	struct tc_cuts cuts;
	size_t i;

	tc_chunk_whole(&chunker_default_params, data, STREAM_LEN, &cuts);
	cr_assert(cuts.n >= n);
	for (i = 0; i < n; i++)
		cr_assert_eq(cuts.end[i], want[i], "cut %zu at %zu, want %zu", i, cuts.end[i],
			     want[i]);
	tc_cuts_free(&cuts);
	free(data);
}

/* ---- the definition, byte at a time ---- */

/* FastCDC as chunker.c's header defines it, one byte at a time, with the gear
 * table regenerated from its definition (splitmix64 seeded "ckptfs01"): the
 * reference that the chunker's block-at-a-time roll must match exactly. */
static void tc_reference_cuts(const struct chunker_params *p, const uint8_t *data, size_t len,
			      struct tc_cuts *cuts)
{
	uint64_t gear[256], state = 0x636b707466733031ull;
	unsigned bits = 0;
	size_t start = 0, i;
	uint64_t fp = 0;

	for (i = 0; i < 256; i++)
		gear[i] = tc_splitmix64(&state);
	while (((size_t)1 << bits) < p->avg_size)
		bits++;
	uint64_t small = ~(UINT64_MAX >> (bits + 2));
	uint64_t large = ~(UINT64_MAX >> (bits > 2 ? bits - 2 : 1));
	memset(cuts, 0, sizeof(*cuts));
	for (i = 0; i < len; i++) {
		size_t idx = i - start; /* of this byte in its chunk */
		bool cut = false;

		if (idx >= p->min_size) {
			fp = (fp << 1) + gear[data[i]];
			cut = (fp & (idx < p->avg_size ? small : large)) == 0;
		}
		if (cut || idx + 1 == p->max_size) {
			tc_cuts_push(cuts, i + 1);
			start = i + 1;
			fp = 0;
		}
	}
	if (cuts->n == 0 || cuts->end[cuts->n - 1] != len)
		tc_cuts_push(cuts, len);
}

static void tc_assert_matches_reference(const struct chunker_params *p, size_t len,
					uint64_t seed, size_t min_cuts)
{
	uint8_t *data = tc_random_stream(len, seed);
	struct tc_cuts want, got;

	tc_reference_cuts(p, data, len, &want);
	cr_assert(want.n >= min_cuts, "only %zu cuts", want.n);
	tc_chunk_whole(p, data, len, &got);
	tc_assert_same_cuts(&want, &got);
	tc_cuts_free(&got);
	tc_chunk(p, data, len, (struct tc_pieces){ .rand_max = 37, .rng = seed }, &got);
	tc_assert_same_cuts(&want, &got);
	tc_cuts_free(&got);
	tc_cuts_free(&want);
	free(data);
}

Test(chunker, default_params_cut_where_the_byte_at_a_time_definition_does)
{
	tc_assert_matches_reference(&chunker_default_params, 16 * MiB, 4242, 10);
}

Test(chunker, small_params_cut_where_the_byte_at_a_time_definition_does)
{
	/* thousands of cuts, at every position inside an 8-byte block */
	const struct chunker_params small = { .min_size = 64, .avg_size = 256, .max_size = 1024 };
	const struct chunker_params tiny = { .min_size = 1, .avg_size = 4, .max_size = 16 };

	tc_assert_matches_reference(&small, 4 * MiB, 31, 1000);
	tc_assert_matches_reference(&tiny, 64 * KiB, 32, 1000);
}

/* ---- content shifted or edited is still cut the same way ---- */

Test(chunker, shifted_stream_resyncs_and_dedups_90_percent)
{
	static const size_t shifts[] = { 1, 7, 1000, 4096, 0 /* random, below */ };
	size_t max_shift = 4096;
	uint8_t *buf = malloc(STREAM_LEN + max_shift);
	uint8_t *orig = buf + max_shift;
	struct tc_cuts cuts;
	struct tc_hashes known;
	uint64_t rng = 2024;
	size_t k;

	cr_assert_not_null(buf);
	tc_fill_random(orig, STREAM_LEN, STREAM_SEED);
	tc_chunk_whole(&chunker_default_params, orig, STREAM_LEN, &cuts);
	tc_hash_chunks(orig, &cuts, &known);
	tc_cuts_free(&cuts);

	for (k = 0; k < sizeof(shifts) / sizeof(shifts[0]); k++) {
		size_t shift = shifts[k] ? shifts[k] : 1 + tc_splitmix64(&rng) % max_shift;
		uint8_t *shifted = orig - shift;
		size_t new_bytes, new_chunks, total;

		tc_fill_random(shifted, shift, 555 + k); /* a different prefix each time */
		tc_chunk_whole(&chunker_default_params, shifted, STREAM_LEN + shift, &cuts);
		/* The first couple of chunks hold the prefix and may not have resynced. */
		tc_count_new(&known, shifted, &cuts, 2, &new_bytes, &new_chunks, &total);
		cr_assert(new_bytes * 10 <= total, "shift %zu: %zu of %zu bytes in new chunks",
			  shift, new_bytes, total);
		tc_cuts_free(&cuts);
	}
	free(known.h);
	free(buf);
}

Test(chunker, insert_in_middle_changes_only_nearby_chunks)
{
	size_t insert_at = 32 * MiB + 12345, insert_len = 1000;
	size_t len = STREAM_LEN + insert_len;
	uint8_t *orig = tc_random_stream(STREAM_LEN, STREAM_SEED);
	uint8_t *edited = malloc(len);
	struct tc_cuts cuts;
	struct tc_hashes known;
	size_t new_bytes, new_chunks, total;

	cr_assert_not_null(edited);
	memcpy(edited, orig, insert_at);
	tc_fill_random(edited + insert_at, insert_len, 31337);
	memcpy(edited + insert_at + insert_len, orig + insert_at, STREAM_LEN - insert_at);

	tc_chunk_whole(&chunker_default_params, orig, STREAM_LEN, &cuts);
	tc_hash_chunks(orig, &cuts, &known);
	tc_cuts_free(&cuts);

	tc_chunk_whole(&chunker_default_params, edited, len, &cuts);
	tc_count_new(&known, edited, &cuts, 0, &new_bytes, &new_chunks, &total);
	cr_assert_eq(total, len);
	cr_assert(new_chunks >= 1, "the edit must show up in some chunk");
	cr_assert(new_chunks <= 3, "%zu chunks changed for one 1000-byte insert", new_chunks);
	cr_assert(new_bytes <= 3 * chunker_default_params.max_size);
	tc_cuts_free(&cuts);
	free(known.h);
	free(edited);
	free(orig);
}
