/* manifest_shared — durability of generations in the shared engine (issue
 * 18, docs/MULTINODE.md "Durability"): a generation's manifest built from
 * PostgreSQL's tree, in manifest.c's format, and the calls of upload.h that
 * concern generation manifests, over the shared tables.
 *
 * Internal to meta/: manifest.c's manifest_gen_build and upload.c's
 * cat_upload_ready / cat_upload_done(_many) / cat_gen_durable dispatch here
 * (`if (cat->shared) return ...;`); catalog_shared_gen.c's commit and
 * catalog_shared.c's sweep enqueue through it.
 *
 * Invariants:
 *  D1. A manifest is built in one PostgreSQL transaction holding the
 *      generation's row FOR SHARE: one state of it, COMMITTED at exactly the
 *      version asked (else -ESTALE), with the bytes manifest.c's builder
 *      writes for the same tree (manifest_format).
 *  D2. A generation's manifest is queued only once it is COMMITTED, and is
 *      ready only once every chunk its files name is uploaded in PostgreSQL
 *      (by whichever node held it): so a durable generation can be read from
 *      BACKING alone (DESIGN invariant 5).
 *  D3. ns_generations.durable_version is set only after the manifest of that
 *      version was put on BACKING (by cat_upload_done of its row).
 *  D4. The tree manifest (everything outside generations, docs/FORMAT.md
 *      "Tree manifest") is built from PostgreSQL in one REPEATABLE READ
 *      transaction (one snapshot of every node's changes), in the bytes
 *      manifest.c's builder writes for the same tree, and only when every
 *      chunk its files name is uploaded in that snapshot (else -EAGAIN):
 *      so the newest tree manifest can be read from BACKING alone.
 *  D5. It is written by one node at a time, the holder of the cluster duty
 *      MANIFEST_SHARED_TREE_DUTY (lease.h L3; fs/uploader.c), under a seq
 *      no lower than the database server's clock at its snapshot and higher
 *      than every tree manifest the writer saw on BACKING; the writer
 *      removes the older ones it saw only once its own is on BACKING.
 *      Nodes write no tree manifest of their local catalog in shared mode.
 *  D6. Once a tree manifest is on BACKING, or the one there is found to
 *      describe the tree still, its writer records a horizon in PostgreSQL
 *      (manifest_shared_tree_described): a server clock value read before
 *      that snapshot was taken (a fingerprint read before the build, or
 *      before the check that found the tree unchanged), so that every
 *      change committed before the horizon is in the tree the manifest
 *      describes. The recorded horizon only grows. The reclaim duty takes
 *      nothing freed after it (catalog_shared_reclaim.c R7, R8).
 *
 * Calls return 0 or a negative errno. */
#ifndef CKPTFS_MANIFEST_SHARED_H
#define CKPTFS_MANIFEST_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "upload.h"

/* manifest_gen_build over PostgreSQL (D1): same contract. */
int manifest_shared_gen_build(struct cat *cat, uint64_t gen_id, uint32_t version, char **out,
			      size_t *len);

/* manifest_apply_parsed over PostgreSQL (pggen_apply_manifest): same
 * contract, for `ckptfs-admin rebuild --meta`. */
struct manifest;
int manifest_shared_apply(struct cat *cat, const struct manifest *m, char *err, size_t errsz);
/* manifest_apply_held over PostgreSQL (manifest.h M4, pggen_apply_manifest_held):
 * same contract, for a save rebuild --meta finds in conflict by its name. */
int manifest_shared_apply_held(struct cat *cat, const struct manifest *m, const char *reason,
			       char *where, size_t wheresz, char *err, size_t errsz);
/* 0 if the shared catalog holds nothing but its root (fit for a rebuild),
 * else -ENOTEMPTY with why (what it holds). */
int manifest_shared_empty(struct cat *cat, char *why, size_t size);
/* The shared catalog takes catalog_id as its id: a rebuilt database goes on
 * with the BACKING whose claim names the one it replaces. */
int manifest_shared_adopt_id(struct cat *cat, const char *catalog_id);

/* cat_upload_ready for a generation manifest's row (D2). */
int catshd_upload_ready(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale);
/* cat_upload_done_many: the durable marks in PostgreSQL (D3), then the
 * local rows (catalog_shared_data.c). */
int catshd_upload_done_many(struct cat *cat, const struct cat_upload *rows, size_t n);
/* cat_gen_durable over PostgreSQL (gen 0: every generation). */
int catshd_gen_durable(struct cat *cat, uint64_t gen, bool *durable);
/* What became of generation gen since the manifest of its version was
 * built (fs/uploader.h B2), read after that manifest's put: */
enum manifest_shared_fate {
	MSH_FATE_CURRENT,       /* COMMITTED at version, not lost */
	MSH_FATE_ENDED,         /* aborted, deleted, or no row */
	MSH_FATE_NEWER_DURABLE, /* COMMITTED, not lost, durable at a higher version */
	MSH_FATE_OTHER,         /* live otherwise: reopened, held, lost, rewritten not durable */
};
/* One statement (pggen_get), and pggen_not_durable's for a higher version. */
int manifest_shared_gen_fate(struct cat *cat, uint64_t gen, uint32_t version,
			     enum manifest_shared_fate *fate);
/* cat_gen_upload_bytes over PostgreSQL: every node's chunks of the
 * generation, uploaded by whichever node (pggen_upload_bytes). */
int catshd_gen_upload_bytes(struct cat *cat, uint64_t gen, uint64_t *total, uint64_t *left);

/* Queues the manifest of gen at version on this node (one local
 * transaction): the committing node calls it after its commit. */
int catshd_enqueue(struct cat *cat, uint64_t gen, uint32_t version);
/* Queues the manifest of gen on this node if gen is COMMITTED, not lost,
 * not durable at its version, and not queued here already: a commit that
 * found it committed (catalog_shared_gen.c S6). */
int catshd_enqueue_missing(struct cat *cat, uint64_t gen);
/* Queues, on this node, the manifests of every COMMITTED generation not yet
 * durable that this node has not queued already: the sweeper of a lost node
 * calls it, since the lost node's queue went with it. *queued (if not NULL)
 * gets how many rows were added. */
int catshd_enqueue_undurable(struct cat *cat, size_t *queued);

/* ---- the tree outside generations (D4, D5) ---- */

/* The duty (cat_duty_take) whose holder writes the tree manifests. */
#define MANIFEST_SHARED_TREE_DUTY "tree"

/* cat_tree_fingerprint over PostgreSQL (one statement): *all_uploaded if
 * no file outside generations names a chunk not on BACKING; *clock_ns the
 * server's clock in that statement, a horizon (D6) for a manifest built or
 * a tree found unchanged by a later statement. */
int manifest_shared_tree_fingerprint(struct cat *cat, char *fp, size_t size, bool *all_uploaded,
				     int64_t *clock_ns);
/* The tree manifest of one snapshot (D4): *out malloc'd, *len; fp gets
 * that snapshot's fingerprint, *now_ns the server's clock in it. -EAGAIN
 * while a chunk it names is not uploaded. */
int manifest_shared_tree_build(struct cat *cat, char **out, size_t *len, char *fp, size_t fp_size,
			       int64_t *now_ns);
/* D6: a tree manifest on BACKING describes every change committed before
 * horizon_ns (one statement; a lower horizon than the one recorded changes
 * nothing). */
int manifest_shared_tree_described(struct cat *cat, int64_t horizon_ns);

#endif
