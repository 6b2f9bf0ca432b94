/* proof — is an open generation complete, judged by its content alone?
 *
 * The commit rules of gen.c wait for a trainer's own completion signal. Some
 * saves send none (a torch.save per rank, a Lightning single file written in
 * place). For those, the files themselves can be the proof, when their
 * format delimits itself (complete.h: torch.save zips, safetensors, npy, npz):
 *
 *   single file   the generation is one file of such a format, complete.
 *   directory     every file of such a format is complete, at least one is,
 *                 and the set of file paths equals that of the previous
 *                 committed generation of the series (a rank's missing file
 *                 shows as a difference; a first save has nothing to compare
 *                 with and is never proven this way).
 *   rewrite      a new version of a committed generation (a resumed job saving
 *                the same step again) is proven only by files rewritten in
 *                it: every file of such a format must differ (ctime, mtime
 *                or size) from its copy in the version being replaced, else
 *                the files not yet rewritten are the old version's, complete,
 *                and would prove a mix of two saves.
 *
 * A file of such a format that is not complete (truncated, a record missing)
 * makes the generation BROKEN, a tree with no file in it is EMPTY, and a
 * directory that lacks a path where the previous committed save of the
 * series has a file of such a format (a rank that never saved), or a file
 * of any format larger than PROOF_SMALL_FILE (raw tensor bytes a job killed
 * mid-save never wrote: review 42 F1), is MISSING.
 * A rewrite in which some such files of the old version were rewritten and
 * others not is MIXED.
 *
 *   added        apart from the verdict, a rewrite that only added files to
 *                the version it replaces (every file of old_root at its path,
 *                not rewritten, and at least one new file: a late rank's
 *                rng_state_1.pth, an eval script's eval_results.json) is
 *                flagged `added`: that version plus closed files. Whether
 *                this proves it complete is the caller's word: only if the
 *                version replaced was committed (fs/gen.h invariant 15).
 * Anything else is UNPROVEN, with the reason. docs/GENERATIONS.md has the
 * rule and the cases.
 *
 * Invariants:
 *  1. COMPLETE only from complete_check's "complete" verdicts (and, for a
 *     directory, the file set of a committed generation): never from names,
 *     sizes, closes or timing alone.
 *  2. It reads and decides; it changes nothing (no catalog write).
 *  3. Bounded: at most PROOF_MAX_FILES files and PROOF_MAX_DEPTH levels are
 *     looked at; past either, the generation is UNPROVEN.
 *  4. proof_weak_may_commit is false for BROKEN, EMPTY, MISSING, MIXED and
 *     NO_OBJECT: a weak rule (next-gen, unmount) commits only what shows no
 *     sign of an unfinished save. Extra files are no such sign (they only
 *     keep the content rule from proving a directory). A path of the
 *     previous committed save absent now is such a sign when its format is
 *     self-delimiting or its size there was over PROOF_SMALL_FILE,
 *     whatever its format; a smaller file of no known format (a config, a
 *     log) is not evidence either way.
 *  5. A rewrite is COMPLETE only if every self-delimiting file in it was
 *     rewritten since the rewrite began (differs from its copy in old_root).
 *  6. proof_objects answers COMPLETE only if every chunk that a committed
 *     extent of a file under the root names has its object: on BACKING
 *     (the catalog says uploaded: cat_file_uploaded for a whole file, one
 *     query, else cat_chunk_where for a chunk `has` does not find) or where
 *     `has` finds it whole in size (the cache: store_present). Presence and
 *     length only: no payload byte is read. Else NO_OBJECT, naming the
 *     first such chunk and its file. A generation held by a crash is
 *     committed by content only after it (gen.h invariant 11): its headers
 *     may read fine while a data chunk's object never reached the disk.
 *  7. `added` is true only when old_root is given, old_root's tree has at
 *     least one file, each of them is at its path in the tree at root with
 *     the same ctime, mtime and size (invariant 5's test: not rewritten;
 *     a write, truncate, chmod or rename onto it moves the ctime), the tree
 *     has at least one more file, none of those new files of a
 *     self-delimiting format is incomplete, neither tree is past the bounds
 *     of invariant 3, and no read failed. The old version's files are not
 *     judged for it: its own rule committed them (a file that reads as
 *     incomplete there makes the verdict BROKEN, not `added` false). It
 *     changes no verdict: proof_weak_may_commit answers as before. */
#ifndef CKPTFS_PROOF_H
#define CKPTFS_PROOF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "generation.h"

#define PROOF_MAX_FILES 4096
#define PROOF_MAX_DEPTH 32
#define PROOF_SMALL_FILE (64 * 1024) /* invariant 4: a missing file larger is a sign */

struct cat;

enum proof_verdict {
	PROOF_UNPROVEN = 0, /* nothing proves it complete, nothing shows it broken */
	PROOF_COMPLETE,     /* the content proves it complete */
	PROOF_BROKEN,       /* a self-delimiting file in it is incomplete */
	PROOF_EMPTY,        /* it holds no file: nothing was saved in it */
	PROOF_MISSING,      /* a self-delimiting or large file of the previous save has no
			     * counterpart (invariant 4) */
	PROOF_MIXED,        /* a rewrite: some self-delimiting files rewritten, others the old ones */
	PROOF_NO_OBJECT,    /* a chunk it names has no object here nor on BACKING (proof_objects) */
};

struct proof_result {
	int verdict;                 /* enum proof_verdict */
	char reason[GEN_HELD_MAX];   /* why not COMPLETE (names the file); "" when COMPLETE */
	/* invariant 7: a rewrite that only added files to old_root's version
	 * (the verdict is judged as ever: MIXED or UNPROVEN, say) */
	bool added;
};

/* Reads exactly len bytes of inode ino at off into buf (the caller clamps to
 * the file's size); 0 or -errno. */
typedef int (*proof_read_fn)(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf);

/* May a weak rule (next-gen, unmount) commit a generation so judged?
 * (invariant 4) */
bool proof_weak_may_commit(int verdict);

/* Judges the tree at `root` (a file or a directory) named `name` (the
 * generation's name: a single file's format hint). prev_root is the root of
 * the previous committed generation of the series, 0 if none; old_root the
 * backup of the version this one rewrites (cat_gen.backup_root), 0 if it is
 * no rewrite. Returns 0 with *out set, or a negative errno when the catalog
 * or a read failed. */
int proof_generation(struct cat *cat, uint64_t root, const char *name, uint64_t prev_root,
		     uint64_t old_root, proof_read_fn rd, void *arg, struct proof_result *out);

/* Is the object of one chunk (plain_len plain bytes) whole where this node
 * reads it? 0 if so, -ENOENT if absent, -EIO if damaged; another negative
 * errno stops the check. */
typedef int (*proof_object_fn)(void *arg, const uint8_t *hash, uint64_t plain_len);

/* Invariant 6: checks that every chunk the files of the tree at root (named
 * `name`, as for proof_generation) name has its object. 0 with out COMPLETE,
 * NO_OBJECT (reason: the chunk and the file), or UNPROVEN past
 * PROOF_MAX_FILES; or a negative errno when the catalog or `has` failed.
 * One catalog query per file whose chunks are all on BACKING; else one per
 * PROOF_EXTENTS extents, and a call of `has` per distinct chunk in a row. */
#define PROOF_EXTENTS 256
int proof_objects(struct cat *cat, uint64_t root, const char *name, proof_object_fn has,
		  void *arg, struct proof_result *out);

#endif
