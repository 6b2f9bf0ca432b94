/* rebuild — a catalog from BACKING alone: the newest tree manifest, then for
 * each generation id the manifest of its highest version (DESIGN invariant
 * 5: a fresh node with an empty cache, or a lost catalog, loses nothing).
 *
 * Use it on a new, empty catalog (a fresh node, or a catalog file created
 * aside to replace a lost one): each manifest is applied in its own
 * transaction, so a rebuild that fails part-way leaves the manifests applied
 * so far; discard that catalog and start again rather than rebuild into it
 * twice (a second apply of a generation id is refused, -EEXIST).
 *
 * What is chosen:
 *  - manifests/tree/<seq>.ckm: the highest seq that reads and verifies; a
 *    corrupt one is reported and the next-lower seq is tried.
 *  - manifests/gen/<id>.<version>.ckm: per id, the highest version that
 *    reads and verifies; lower versions are ignored (counted as older); a
 *    corrupt one is reported and the next-lower version of that id tried.
 *  - a manifest in a newer format than this ckptfs reads stops the rebuild
 *    (-EPROTONOSUPPORT): falling back to an older version would silently
 *    lose the newer one.
 *  - BACKING failing (other than a manifest vanishing: -ENOENT) stops the
 *    rebuild with its error.
 *  - a generation manifest that conflicts with the catalog by its path is
 *    applied HELD as "<name>.rebuild-<id>" (rebuild.c invariant 7); counted
 *    in manifests_rejected and generations_held, not in generations.
 *
 * Returns 0 or a negative errno; the report is filled either way. */
#ifndef CKPTFS_REBUILD_H
#define CKPTFS_REBUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "backing.h"
#include "catalog.h"

/* Also check with backing_stat that every chunk object named exists and has
 * the size its manifest says (64-byte header + stored length). */
#define REBUILD_CHECK_CHUNKS (1u << 0)

struct rebuild_report {
	bool tree_applied;
	uint64_t tree_seq;            /* of the tree manifest applied */
	uint64_t generations;         /* generation manifests applied */
	uint64_t files, bytes;        /* regular files and their sizes, in what was applied */
	uint64_t manifests_seen;      /* manifest files listed */
	uint64_t manifests_older;     /* lower versions / seqs not needed */
	uint64_t manifests_corrupt;   /* unreadable, truncated, bad checksum, malformed: skipped */
	uint64_t manifests_rejected;  /* valid but in conflict with the catalog (-EEXIST) */
	uint64_t generations_held;    /* of those, applied HELD (rebuild.c invariant 7) */
	uint64_t generations_lost;    /* ids of which no version could be applied */
	uint64_t names_ignored;       /* entries under manifests/ that are not manifests */
	/* with REBUILD_CHECK_CHUNKS */
	uint64_t chunks_checked;      /* distinct chunks looked up */
	uint64_t chunks_missing;      /* absent, or of the wrong size */
	uint64_t files_damaged;       /* files naming such a chunk (each logged) */
};

/* progress(arg, done, total) is called before the first manifest and after
 * each tree or generation id (total: 1 for the tree if any + distinct ids). */
typedef void (*rebuild_progress_fn)(void *arg, uint64_t done, uint64_t total);

int rebuild_catalog(struct backing *b, struct cat *cat, unsigned flags,
		    rebuild_progress_fn progress, void *arg, struct rebuild_report *rep);

/* Is there any manifest on BACKING? (a fresh node with a used BACKING: rebuild;
 * an empty BACKING: start empty). */
int rebuild_backing_has_data(struct backing *b, bool *has);
/* The newest generation manifest on BACKING: its id and version (0, 0: none);
 * one listing of manifests/gen. fs/main.c M4. */
int rebuild_backing_newest_gen(struct backing *b, uint64_t *id, uint32_t *version);

#endif
