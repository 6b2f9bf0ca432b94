/* admin_query — read-only catalog questions that ckptfs-admin asks and the
 * daemon does not: what a generation holds alone and shares with others,
 * which files name a chunk, where an inode is, whether an object on BACKING
 * is still named by the catalog or by a manifest there. [SQLite] in
 * catalog.h's contract: queries on this engine's tables.
 *
 * It prepares its own statements on the catalog's connection (never touching
 * catalog.c's) and runs each call as one read transaction under the catalog
 * lock, so it can be used on a read-only catalog in the tool and on the
 * daemon's live catalog from its control thread alike. Results are copied out
 * before the lock is dropped: no callback runs under it.
 *
 * Invariants:
 *  1. Nothing here writes the catalog.
 *  2. aq_gc_check decides "no row names this hash" and removes the object in
 *     one hold of the catalog lock, so a writer that adds a reference to the
 *     same chunk either comes first (the object is kept) or after (it sees no
 *     row and stores the object again).
 *  3. gc never removes an object from BACKING that a manifest on BACKING
 *     names, whether or not a catalog row does: a manifest a rebuild left
 *     out (rejected, in conflict: fs/rebuild.c invariant 6) has no rows and
 *     is the only description of its save. The manifests are read before the
 *     walk (aq_named_load); one that cannot be listed, read or parsed fails
 *     the load, and then gc removes nothing at all (aq_gc_walk refuses
 *     BACKING without the set): never a guess at what it names. A manifest
 *     put after the load is built from this catalog (manifest.h M1) and
 *     names chunks it counts, kept by their rows (or by the queued removal
 *     of the manifest) as before.
 *  4. Objects of a local directory (the cache) are reached beneath it by
 *     safeopen.h, following no symlink on the way (DESIGN invariant 7), and
 *     removed by unlinkat on their directory opened that way.
 *  5. gc removes an object from BACKING only while the claim it was given
 *     is sure (claim.h 9: claim_may_write), checked at each removal under
 *     the catalog lock, not once before the walk: a process stopped or
 *     suspended past the claim's timeout during a long walk may resume
 *     after a taker uploaded objects its catalog and manifest set do not
 *     know. The first removal refused so (-EROFS) stops the walk, logged
 *     in one line; the objects it did not reach stay.
 *  6. Pack files on BACKING (packs/ab/<hex>.ckp, fs/uppack.h): one is an
 *     orphan only if no packs row has its name, no upload row is about it
 *     (its removal queued) and no generation manifest removal is queued —
 *     decided and removed in one hold of the lock, as invariant 2 — and if
 *     no member of it (read from its tail: trailer and index, never the
 *     whole pack) is named by a manifest on BACKING (invariant 3). A name
 *     that is no pack's, a pack outside its shard, or a tail that does not
 *     validate is left alone, never judged. The catalog names a pack only
 *     with its row (meta/catalog_pack.h K2), so an orphan is a pack a lost
 *     transaction, a crash between forgetting a row and removing its file,
 *     or a rebuild that needed none of its members left. */
#ifndef CKPTFS_ADMIN_QUERY_H
#define CKPTFS_ADMIN_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"

struct aq;

int aq_open(struct cat *cat, struct aq **out);
void aq_close(struct aq *q); /* NULL is allowed; before cat_close */

/* What a generation's chunks cost. A chunk is exclusive when every reference
 * to it (extent or pending row) comes from inodes of the generation: deleting
 * the generation frees it. */
struct aq_gen_usage {
	uint64_t extents;          /* extent rows of its files */
	uint64_t chunks;           /* distinct chunks it names */
	uint64_t unique_bytes;     /* plain bytes of those chunks */
	uint64_t exclusive_chunks;
	uint64_t exclusive_bytes;  /* plain bytes of its exclusive chunks */
	uint64_t exclusive_stored; /* stored (compressed) bytes of them */
};
int aq_gen_usage(struct aq *q, uint64_t gen_id, struct aq_gen_usage *out);

/* Other generations sharing chunks with gen_id, by id: how many distinct
 * chunks and their plain bytes. *out is malloc'd (free it), *n its length. */
struct aq_share {
	uint64_t gen_id;
	uint64_t chunks;
	uint64_t bytes;
};
int aq_gen_shares(struct aq *q, uint64_t gen_id, struct aq_share **out, size_t *n);

/* The regular files of a generation (its live tree, not a backup): inode,
 * size, extents and distinct chunks. *out malloc'd. */
struct aq_file {
	uint64_t ino;
	uint64_t size;
	uint64_t extents;
	uint64_t chunks;
};
int aq_gen_files(struct aq *q, uint64_t gen_id, struct aq_file **out, size_t *n);

/* Distinct chunks named by a generation's extents (for verify GEN). */
struct aq_chunk {
	uint8_t hash[CAT_HASH_LEN];
	uint64_t plain_len;
	int64_t stored_len; /* -1: not written yet */
};
int aq_gen_chunks(struct aq *q, uint64_t gen_id, struct aq_chunk **out, size_t *n);

/* Inodes whose committed extents name a chunk, with their generation (0 for
 * none). Scans all extents (no index on hash): for reporting bad chunks. */
struct aq_user {
	uint64_t ino;
	uint64_t gen_id;
};
int aq_chunk_users(struct aq *q, const uint8_t hash[CAT_HASH_LEN], struct aq_user **out,
		   size_t *n);

/* The files outside generations whose chunks are not all on BACKING yet
 * (dirty: only in the cache), as fs/uploader.c's tree manifest needs them
 * uploaded: how many files, their distinct chunks not uploaded (counted per
 * file) and those chunks' stored bytes, and the first few inodes (by
 * inode number) to name. One read transaction (ckptfs-admin wait). */
#define AQ_TREE_DIRTY_NAMED 3
struct aq_tree_dirty {
	uint64_t files, chunks, bytes;
	uint64_t ino[AQ_TREE_DIRTY_NAMED]; /* the first min(files, AQ_TREE_DIRTY_NAMED) */
};
int aq_tree_dirty(struct aq *q, struct aq_tree_dirty *out);

/* The path of an inode from the root ("/run1/step-200/model.pt"); an inode
 * with no entry (unlinked, or a backup root) ends the walk with "?". */
int aq_path(struct aq *q, uint64_t ino, char *buf, size_t size);

/* Garbage collection of one object found in the cache or on BACKING
 * (invariant 2). It is an orphan if no chunks row names hash — and, on
 * BACKING, no upload row names it and no manifest removal is queued (the
 * uploader removes BACKING objects itself, after the manifests naming them).
 * For an orphan, *orphan is set and — unless dry_run — remove(arg, hash) is
 * called under the lock. Returns remove's result or 0. */
typedef int (*aq_remove_fn)(void *arg, const uint8_t hash[CAT_HASH_LEN]);
int aq_gc_check(struct aq *q, const uint8_t hash[CAT_HASH_LEN], bool on_backing, bool dry_run,
		aq_remove_fn remove, void *arg, bool *orphan);

/* Where chunk objects are: chunks/ab/cd/HEX under a root, listed, sized and
 * removed through these (backing_list/backing_stat/backing_remove fit, and
 * aq_dir_* below for a local directory). */
struct aq_objects {
	int (*list)(void *arg, const char *reldir, int (*fn)(void *, const char *), void *fnarg);
	int (*size)(void *arg, const char *relpath, uint64_t *size);
	int (*remove)(void *arg, const char *relpath);
	void *arg;
	const char *where; /* "cache" or "BACKING", for messages */
	bool on_backing;
	const struct aq_named *named; /* BACKING: what its manifests name, kept (invariant 3) */
	struct claim *claim; /* BACKING: removals only while it is sure (invariant 5) */
	/* BACKING: len bytes at off of relpath (backing_get_range); NULL for
	 * the cache, whose walk has no packs (invariant 6) */
	int (*range)(void *arg, const char *relpath, uint64_t off, size_t len, void *buf);
};
int aq_dir_list(void *root, const char *reldir, int (*fn)(void *, const char *), void *arg);
int aq_dir_size(void *root, const char *rel, uint64_t *size);
int aq_dir_remove(void *root, const char *rel);

/* Invariant 3: the distinct chunks named by every manifest on BACKING
 * (manifests/gen/ and manifests/tree/; other names there are no manifests,
 * as for rebuild). A manifest that cannot be read, is larger than
 * MANIFEST_SIZE_MAX or does not parse fails the load: err gets one line
 * naming it and the reason. */
struct backing;
struct aq_named;
int aq_named_load(struct backing *b, struct aq_named **out, char *err, size_t errsz);
/* What gc says after such an err. */
#define AQ_NAMED_ADVICE                                                                     \
	"gc removed nothing: while a manifest on BACKING cannot be read, the chunks it names " \
	"may be the only copy of its save; repair it or move it out of manifests/, then run "  \
	"gc again"
bool aq_named_has(const struct aq_named *s, const uint8_t hash[CAT_HASH_LEN]);
uint64_t aq_named_manifests(const struct aq_named *s); /* manifests read */
void aq_named_free(struct aq_named *s); /* NULL is allowed */

/* The three places gc walks, as aq_objects: the cache's directory, its
 * small.db's rows (storesmall.h T6: named as the files they stand for) and
 * BACKING, with the chunks its manifests name (never NULL: invariant 3) and
 * the claim this process holds on it (invariant 5; NULL: none to lose). */
struct storesmall;
struct claim;
struct aq_objects aq_objects_dir(const char *root);
struct aq_objects aq_objects_small(struct storesmall *ss);
struct aq_objects aq_objects_backing(struct backing *b, const struct aq_named *named,
				     struct claim *claim);

/* Walks every chunk object of o and runs aq_gc_check on each; on BACKING an
 * orphan that o->named holds is kept (manifest_kept; -EINVAL without
 * o->named). A directory that cannot be listed stops the walk (logged,
 * naming it), as does a BACKING removal while o->claim is not sure
 * (-EROFS, invariant 5). progress(arg, done, total) is called per
 * top-level shard if given. */
struct aq_gc_result {
	uint64_t objects;      /* chunk objects seen */
	uint64_t orphans;      /* named by nothing */
	uint64_t orphan_bytes; /* their size */
	uint64_t removed;      /* orphans removed (0 with dry_run) */
	uint64_t freed_bytes;  /* their size */
	uint64_t failed;       /* removals that failed (logged) */
	uint64_t manifest_kept; /* BACKING: named by no row but by a manifest there, kept */
};
typedef void (*aq_progress_fn)(void *arg, uint64_t done, uint64_t total);
int aq_gc_walk(struct aq *q, const struct aq_objects *o, bool dry_run, aq_progress_fn progress,
	       void *progress_arg, struct aq_gc_result *out);
/* Adds r's counts to into's (the cache's files and small.db's rows are one side). */
void aq_gc_result_add(struct aq_gc_result *into, const struct aq_gc_result *r);

#endif
