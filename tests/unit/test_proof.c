/* proof: a generation proven complete by its content (fs/proof.h), on a real
 * catalog whose files' bytes are real checkpoint files (the complete/ fixtures,
 * torch 1.13, numpy, hand-written safetensors), served by the read callback. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "generation.h"
#include "proof.h"
#include "support.h"
#include "upload.h"

#define FIXTURES "tests/unit/fixtures/complete/"
#define MAX_FILES 16

static struct {
	char dir[128];
	char path[192];
	struct cat *cat;
	struct {
		uint64_t ino;
		char *bytes;
		size_t len;
	} files[MAX_FILES];
	int n;
	int reads;
} fx;

static void setup(void)
{
	memset(&fx, 0, sizeof(fx));
	ts_tmpdir_make(fx.dir, sizeof(fx.dir), "proof");
	ts_cat_open_in(fx.dir, "catalog.db", fx.path, sizeof(fx.path), &fx.cat);
}

static void teardown(void)
{
	ts_cat_close_checked(&fx.cat);
	for (int i = 0; i < fx.n; i++)
		free(fx.files[i].bytes);
	ts_tmpdir_remove(fx.dir);
}

static char *load(const char *name, size_t *len)
{
	char path[256];
	snprintf(path, sizeof(path), FIXTURES "%s", name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "fixture %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* ino's bytes are fixture `fixture`'s first `len` bytes (all when len is -1). */
static void serve(uint64_t ino, const char *fixture, long len)
{
	size_t full;
	char *bytes = load(fixture, &full);
	cr_assert_lt(fx.n, MAX_FILES);
	fx.files[fx.n].ino = ino;
	fx.files[fx.n].bytes = bytes;
	fx.files[fx.n].len = len < 0 ? full : (size_t)len;
	cr_assert_leq(fx.files[fx.n].len, full);
	cr_assert_eq(cat_file_truncate(fx.cat, ino, fx.files[fx.n].len), 0);
	fx.n++;
}

static int read_fn(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	(void)arg;
	fx.reads++;
	for (int i = 0; i < fx.n; i++)
		if (fx.files[i].ino == ino) {
			if (off + len > fx.files[i].len)
				return -EIO; /* proof must clamp to the catalog's size */
			memcpy(buf, fx.files[i].bytes + off, len);
			return 0;
		}
	return -ENOENT;
}

/* A file named name in dir with a fixture's bytes. */
static uint64_t put(uint64_t dir, const char *name, const char *fixture, long len)
{
	uint64_t ino = ts_mk(fx.cat, dir, name, S_IFREG | 0644, NULL);
	serve(ino, fixture, len);
	cr_assert_eq(cat_file_unmark(fx.cat, ino), 0); /* released (generation.h G7, G9) */
	return ino;
}

static struct proof_result judge(uint64_t root, uint64_t prev_root)
{
	struct proof_result r;
	cr_assert_eq(proof_generation(fx.cat, root, "gen", prev_root, 0, read_fn, NULL, &r), 0);
	return r;
}

/* A directory generation of the series with rank0.pt and rank1.pt. */
static uint64_t two_ranks(uint64_t series, const char *name, uint64_t step, long len1)
{
	uint64_t root;
	ts_mkgen(fx.cat, series, name, step, true, &root);
	put(root, "rank0.pt", "torch_sd.pt", -1);
	put(root, "rank1.pt", "torch_adam.pt", len1);
	return root;
}

Test(proof, a_complete_single_torch_file_is_complete, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), root;
	ts_mkgen(fx.cat, series, "epoch=1-step=30.ckpt", 30, false, &root);
	serve(root, "torch_adam.pt", -1);
	struct proof_result r = judge(root, 0);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
	cr_assert_str_empty(r.reason);
	cr_assert_gt(fx.reads, 0, "the content was read");
}

Test(proof, a_truncated_single_file_is_broken_at_every_cut, .init = setup, .fini = teardown)
{
	static const char *const fixtures[] = { "torch_sd.pt", "model.safetensors", "arrays_f4.npy",
						"savez.npz" };
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
		size_t full;
		free(load(fixtures[f], &full));
		for (int cut = 1; cut <= 10; cut++) {
			char name[64];
			uint64_t root;
			long len = cut == 10 ? (long)full - 1 : (long)(full * (size_t)cut / 10);
			snprintf(name, sizeof(name), "step-%zu%02d.pt", f, cut);
			ts_mkgen(fx.cat, series, name, f * 100 + (size_t)cut, false, &root);
			serve(root, fixtures[f], len);
			struct proof_result r = judge(root, 0);
			cr_assert_neq(r.verdict, PROOF_COMPLETE, "%s cut to %ld of %zu bytes", fixtures[f],
				      len, full);
			fx.n--; /* reuse the slot: one file per cut */
			free(fx.files[fx.n].bytes);
		}
	}
}

Test(proof, a_torch_file_missing_a_storage_record_is_broken_and_named, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), root;
	ts_mkgen(fx.cat, series, "step-7", 7, true, &root);
	put(root, "model.pt", "torch_missing.pt", -1);
	struct proof_result r = judge(root, 0);
	cr_assert_eq(r.verdict, PROOF_BROKEN);
	cr_assert(strstr(r.reason, "model.pt") != NULL, "the reason names the file: %s", r.reason);
}

Test(proof, a_directory_matching_the_previous_save_is_complete, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t prev = two_ranks(series, "step-100", 100, -1);
	uint64_t now = two_ranks(series, "step-200", 200, -1);
	struct proof_result r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
	/* nothing to compare with: never complete this way, whatever the files */
	r = judge(now, 0);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN);
	cr_assert(strstr(r.reason, "no earlier committed save") != NULL, "%s", r.reason);
}

Test(proof, a_directory_missing_a_ranks_file_is_missing_and_names_it, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), now;
	uint64_t prev = two_ranks(series, "step-100", 100, -1);
	ts_mkgen(fx.cat, series, "step-200", 200, true, &now);
	put(now, "rank0.pt", "torch_sd.pt", -1);
	struct proof_result r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_MISSING, "%s", r.reason);
	cr_assert(strstr(r.reason, "rank1.pt is missing") != NULL, "%s", r.reason);
	cr_assert(!proof_weak_may_commit(r.verdict), "a weak rule may not commit a missing rank");
	/* an extra file is a difference for the content rule, but no sign of an
	 * unfinished save: a weak rule may commit it */
	put(now, "rank1.pt", "torch_adam.pt", -1);
	put(now, "rank2.pt", "torch_adam.pt", -1);
	r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN);
	cr_assert(strstr(r.reason, "rank2.pt is new") != NULL, "%s", r.reason);
	cr_assert(proof_weak_may_commit(r.verdict));
}

Test(proof, a_missing_file_of_no_self_delimiting_format_is_no_sign, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), now;
	uint64_t prev = two_ranks(series, "step-100", 100, -1);
	put(prev, "notes.txt", "make_fixtures.py", -1);
	ts_mkgen(fx.cat, series, "step-200", 200, true, &now);
	put(now, "rank0.pt", "torch_sd.pt", -1);
	put(now, "rank1.pt", "torch_adam.pt", -1);
	struct proof_result r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN, "%s", r.reason);
	cr_assert(strstr(r.reason, "notes.txt is missing") != NULL, "%s", r.reason);
	cr_assert(proof_weak_may_commit(r.verdict));
	/* nor does a rank file missing with nothing self-delimiting left say
	 * less: the save still lacks it */
	ts_mkgen(fx.cat, series, "step-300", 300, true, &now);
	put(now, "notes.txt", "make_fixtures.py", -1);
	r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_MISSING, "%s", r.reason);
	cr_assert(strstr(r.reason, "rank0.pt is missing") != NULL, "%s", r.reason);
}

/* A file named name in dir of size bytes of no known format (raw tensor
 * bytes: 0x5a each). */
static uint64_t put_raw(uint64_t dir, const char *name, size_t size)
{
	uint64_t ino = ts_mk(fx.cat, dir, name, S_IFREG | 0644, NULL);
	cr_assert_lt(fx.n, MAX_FILES);
	char *bytes = malloc(size);
	cr_assert_not_null(bytes);
	memset(bytes, 0x5a, size);
	fx.files[fx.n].ino = ino;
	fx.files[fx.n].bytes = bytes;
	fx.files[fx.n].len = size;
	cr_assert_eq(cat_file_truncate(fx.cat, ino, size), 0);
	fx.n++;
	cr_assert_eq(cat_file_unmark(fx.cat, ino), 0);
	return ino;
}

/* invariant 4 (review 42 F1): a file of no known format larger than
 * PROOF_SMALL_FILE that the previous save has and this one lacks (the
 * optim.bin a killed job never wrote) is MISSING; a small one is not. */
Test(proof, a_missing_large_raw_file_is_missing, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), prev, now;
	ts_mkgen(fx.cat, series, "step-100", 100, true, &prev);
	put_raw(prev, "model.bin", 4 * PROOF_SMALL_FILE);
	put_raw(prev, "optim.bin", PROOF_SMALL_FILE + 1);
	put_raw(prev, "config.bin", PROOF_SMALL_FILE);
	ts_mkgen(fx.cat, series, "step-200", 200, true, &now);
	put_raw(now, "model.bin", PROOF_SMALL_FILE);
	struct proof_result r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_MISSING, "%s", r.reason);
	cr_assert(strstr(r.reason, "optim.bin is missing") != NULL, "%s", r.reason);
	cr_assert_not(proof_weak_may_commit(r.verdict));
	/* optim.bin there: the small config.bin missing is no sign */
	put_raw(now, "optim.bin", PROOF_SMALL_FILE + 1);
	r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN, "%s", r.reason);
	cr_assert(proof_weak_may_commit(r.verdict));
}

Test(proof, a_directory_with_a_truncated_rank_file_is_broken, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	size_t full;
	free(load("torch_adam.pt", &full));
	uint64_t prev = two_ranks(series, "step-100", 100, -1);
	uint64_t now = two_ranks(series, "step-200", 200, (long)full / 2);
	struct proof_result r = judge(now, prev);
	cr_assert_eq(r.verdict, PROOF_BROKEN);
	cr_assert(strstr(r.reason, "rank1.pt") != NULL, "%s", r.reason);
}

Test(proof, nested_files_are_compared_by_their_paths, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), a, b;
	ts_mkgen(fx.cat, series, "step-1", 1, true, &a);
	ts_mkgen(fx.cat, series, "step-2", 2, true, &b);
	put(ts_mk(fx.cat, a, "model", S_IFDIR | 0755, NULL), "w.safetensors", "model.safetensors", -1);
	put(ts_mk(fx.cat, b, "optim", S_IFDIR | 0755, NULL), "w.safetensors", "model.safetensors", -1);
	struct proof_result r = judge(b, a);
	cr_assert_eq(r.verdict, PROOF_MISSING, "model/w.safetensors vs optim/w.safetensors");
	cr_assert(strstr(r.reason, "model/w.safetensors") != NULL, "%s", r.reason);
}

Test(proof, unrecognised_or_empty_saves_are_not_complete, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), a, b, c;
	ts_mkgen(fx.cat, series, "step-1", 1, true, &a);
	struct proof_result r = judge(a, 0);
	cr_assert_eq(r.verdict, PROOF_EMPTY);
	ts_mkgen(fx.cat, series, "step-2", 2, true, &b);
	put(b, "notes.txt", "make_fixtures.py", -1);
	r = judge(b, 0);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN);
	/* the same unrecognised file set as a previous save proves nothing either */
	ts_mkgen(fx.cat, series, "step-3", 3, true, &c);
	put(c, "notes.txt", "make_fixtures.py", -1);
	r = judge(c, b);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN, "no self-delimiting file: %s", r.reason);
}

Test(proof, a_single_file_too_short_for_its_magic_is_judged_by_its_name, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), root;
	ts_mkgen(fx.cat, series, "step-9.safetensors", 9, false, &root);
	serve(root, "model.safetensors", 7);
	struct proof_result r;
	cr_assert_eq(proof_generation(fx.cat, root, "step-9.safetensors", 0, 0, read_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_BROKEN, "7 bytes of a safetensors file: %s", r.reason);
	cr_assert(strstr(r.reason, "step-9.safetensors") != NULL, "%s", r.reason);
}

/* A committed two-rank step-200 reopened for a rewrite (its version 1 is the
 * backup); *old_root is that backup, *files its live rank0/rank1 inodes. */
static uint64_t rewrite_of_two_ranks(uint64_t series, uint64_t *old_root, uint64_t files[2])
{
	uint64_t root;
	uint64_t id = ts_mkgen(fx.cat, series, "step-200", 200, true, &root);
	files[0] = put(root, "rank0.pt", "torch_sd.pt", -1);
	files[1] = put(root, "rank1.pt", "torch_adam.pt", -1);
	cr_assert_eq(cat_gen_commit(fx.cat, id, "content"), 0);
	cr_assert_eq(cat_gen_reopen(fx.cat, id), 0);
	struct cat_gen gen;
	cr_assert_eq(cat_gen_get_brief(fx.cat, id, &gen), 0);
	cr_assert_neq(gen.backup_root, 0);
	*old_root = gen.backup_root;
	return root;
}

/* A file saved again in place: torch.save's open truncates it (new ctime and
 * mtime), then writes the same number of bytes. */
static void resave(uint64_t ino)
{
	struct cat_inode in;
	cr_assert_eq(cat_getattr(fx.cat, ino, &in), 0);
	cr_assert_eq(cat_file_truncate(fx.cat, ino, 0), 0);
	cr_assert_eq(cat_file_truncate(fx.cat, ino, in.size), 0);
}

Test(proof, a_half_done_rewrite_is_a_mix_and_proves_nothing, .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), old, f[2];
	uint64_t prev = two_ranks(series, "step-100", 100, -1);
	uint64_t now = rewrite_of_two_ranks(series, &old, f);
	struct proof_result r;
	/* nothing rewritten yet: the old version's files prove nothing new */
	int prc = proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r);
	cr_assert_eq(prc, 0, "rc %d", prc);
	cr_assert_eq(r.verdict, PROOF_UNPROVEN, "%s", r.reason);
	cr_assert(strstr(r.reason, "rank0.pt is still the previous version's") != NULL, "%s",
		  r.reason);
	/* rank0 saved again, rank1 not yet: a mix, which no weak rule commits */
	resave(f[0]);
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_MIXED, "%s", r.reason);
	cr_assert(strstr(r.reason, "rank1.pt is still the previous version's while rank0.pt was"
			 " rewritten") != NULL, "%s", r.reason);
	cr_assert(!proof_weak_may_commit(r.verdict));
	/* without the rewrite's backup, the same tree would have been proven */
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, 0, read_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
	/* every rank saved again: complete */
	resave(f[1]);
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
}

/* Invariant 7 (fs/gen.h invariant 15): a late rank's file added to a
 * committed save, nothing of it changed, is flagged `added` whatever the
 * verdict; an incomplete new file, or a file of the old version rewritten,
 * is not. */
Test(proof, a_rewrite_that_only_added_a_complete_file_is_flagged_added, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), old, f[2];
	uint64_t prev = two_ranks(series, "step-100", 100, -1);
	uint64_t now = rewrite_of_two_ranks(series, &old, f);
	struct proof_result r;
	/* nothing added yet: the old version alone */
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert(!r.added, "%s", r.reason);
	/* a late rank's file, complete: added (the verdict stays a mix: the
	 * old files are not rewritten) */
	uint64_t late = put(now, "rank2.pt", "torch_sd.pt", -1);
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert(r.added, "verdict %d: %s", r.verdict, r.reason);
	cr_assert_eq(r.verdict, PROOF_MIXED, "%s", r.reason);
	/* without the backup there is nothing it adds to */
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, 0, read_fn, NULL, &r), 0);
	cr_assert(!r.added);
	/* the new file cut short: not added (and broken) */
	size_t full = fx.files[fx.n - 1].len;
	cr_assert_eq(cat_file_truncate(fx.cat, late, 100), 0);
	fx.files[fx.n - 1].len = 100;
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert(!r.added);
	cr_assert_eq(r.verdict, PROOF_BROKEN, "%s", r.reason);
	/* complete again, but a file of the old version rewritten: a real
	 * rewrite, not added */
	cr_assert_eq(cat_file_truncate(fx.cat, late, full), 0);
	fx.files[fx.n - 1].len = full;
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert(r.added, "%s", r.reason);
	resave(f[1]);
	cr_assert_eq(proof_generation(fx.cat, now, "step-200", prev, old, read_fn, NULL, &r), 0);
	cr_assert(!r.added, "rank1.pt was rewritten: %s", r.reason);
}

/* An old file that reads as incomplete is the committed version's (its
 * own rule judged it): what was added is still added, the verdict BROKEN. */
Test(proof, a_broken_looking_file_of_the_old_version_does_not_undo_added, .init = setup,
     .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), root;
	uint64_t id = ts_mkgen(fx.cat, series, "checkpoint-100", 100, true, &root);
	put(root, "model.safetensors", "torch_sd.pt", 200); /* reads as a cut zip */
	cr_assert_eq(cat_gen_commit(fx.cat, id, "hf-trainer-state"), 0);
	cr_assert_eq(cat_gen_reopen(fx.cat, id), 0);
	struct cat_gen gen;
	cr_assert_eq(cat_gen_get_brief(fx.cat, id, &gen), 0);
	put(root, "rng_state_1.pth", "torch_sd.pt", -1);
	struct proof_result r;
	cr_assert_eq(proof_generation(fx.cat, root, "checkpoint-100", 0, gen.backup_root, read_fn,
				      NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_BROKEN, "%s", r.reason);
	cr_assert(r.added, "%s", r.reason);
}

/* ---- proof_objects (invariant 6; fs/gen.h invariant 11) ---- */

static struct {
	uint8_t missing[CAT_HASH_LEN];
	int answer; /* what has() says of `missing` */
	int calls;
} ob;

static int has_fn(void *arg, const uint8_t *hash, uint64_t plain_len)
{
	(void)arg;
	ob.calls++;
	cr_assert_eq(plain_len, 4096, "the extent's chunk length is asked for");
	return memcmp(hash, ob.missing, CAT_HASH_LEN) == 0 ? ob.answer : 0;
}

/* Marks uploaded the chunk hash (every chunk when NULL). */
static void upload(const uint8_t *hash)
{
	struct cat_upload rows[64];
	int got = cat_upload_list(fx.cat, 0, rows, 64);
	cr_assert_geq(got, 0);
	for (int i = 0; i < got; i++)
		if (rows[i].kind == UP_CHUNK &&
		    (!hash || memcmp(rows[i].hash, hash, CAT_HASH_LEN) == 0))
			cr_assert_eq(cat_upload_done(fx.cat, &rows[i]), 0);
}

Test(proof, objects_of_every_file_are_looked_at_once_and_a_missing_one_is_named,
     .init = setup, .fini = teardown)
{
	uint64_t series = ts_mk(fx.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL), root;
	uint64_t id = ts_mkgen(fx.cat, series, "step-1", 1, true, &root);
	uint64_t a = ts_mk(fx.cat, root, "a.pt", S_IFREG | 0644, NULL);
	uint64_t sub = ts_mk(fx.cat, root, "sub", S_IFDIR | 0755, NULL);
	uint64_t b = ts_mk(fx.cat, sub, "b.pt", S_IFREG | 0644, NULL);
	ts_write_chunks(fx.cat, a, 0xA1, 1, 3, 4096, NULL, NULL);
	ts_write_chunks(fx.cat, b, 0xB1, 1, 2, 4096, NULL, NULL);
	struct proof_result r;
	memset(&ob, 0, sizeof(ob));
	cr_assert_eq(proof_objects(fx.cat, root, "step-1", has_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
	cr_assert_eq(ob.calls, 5, "each chunk once");
	/* one chunk of sub/b.pt gone from the cache, not on BACKING */
	ts_hash(ob.missing, 0xB1, 2);
	ob.answer = -ENOENT;
	cr_assert_eq(proof_objects(fx.cat, root, "step-1", has_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_NO_OBJECT);
	cr_assert(strstr(r.reason, "\"sub/b.pt\"") && strstr(r.reason, "missing after the crash") &&
		  strstr(r.reason, "not in the cache"), "%s", r.reason);
	cr_assert(!proof_weak_may_commit(r.verdict));
	/* damaged in the cache: named so */
	ob.answer = -EIO;
	cr_assert_eq(proof_objects(fx.cat, root, "step-1", has_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_NO_OBJECT);
	cr_assert(strstr(r.reason, "damaged in the cache"), "%s", r.reason);
	/* on BACKING: the catalog's word suffices (the uploader sees a
	 * generation's chunks once it is committed) */
	cr_assert_eq(cat_gen_commit(fx.cat, id, "admin"), 0);
	upload(ob.missing);
	cr_assert_eq(proof_objects(fx.cat, root, "step-1", has_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
	/* a file whose every chunk is on BACKING is not looked at chunk by chunk */
	upload(NULL);
	ob.calls = 0;
	cr_assert_eq(proof_objects(fx.cat, root, "step-1", has_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_COMPLETE, "%s", r.reason);
	cr_assert_eq(ob.calls, 0);
	/* a single-file generation is named by the generation's name */
	uint64_t froot;
	ts_mkgen(fx.cat, series, "step-2.pt", 2, false, &froot);
	ts_write_chunks(fx.cat, froot, 0xC1, 1, 2, 4096, NULL, NULL);
	ts_hash(ob.missing, 0xC1, 1);
	ob.answer = -ENOENT;
	cr_assert_eq(proof_objects(fx.cat, froot, "step-2.pt", has_fn, NULL, &r), 0);
	cr_assert_eq(r.verdict, PROOF_NO_OBJECT);
	cr_assert(strstr(r.reason, "of \"step-2.pt\" (its bytes 0-4096)"), "%s", r.reason);
	/* an error of has() stops the check */
	ob.answer = -ENOMEM;
	cr_assert_eq(proof_objects(fx.cat, froot, "step-2.pt", has_fn, NULL, &r), -ENOMEM);
}
