/* catalog_shared_data — the shared engine's file contents and this node's
 * chunk rows (issue 18, docs/MULTINODE.md), for a struct cat opened with
 * cat_open_shared. Internal to meta/: catalog.c and upload.c dispatch to
 * these from the first line of the public call of the same name
 * (`if (cat->shared) return catsh_<name>(...)`); the rules are at the top of
 * catalog_shared_data.c (S1–S16). */
#ifndef CKPTFS_CATALOG_SHARED_DATA_H
#define CKPTFS_CATALOG_SHARED_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "upload.h"

/* catalog.h's file contents [engine] */
int catsh_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out, int max);
int catsh_pending_extents(struct cat *cat, uint64_t ino, uint64_t off, struct cat_extent *out,
			  int max);
int catsh_pending_add(struct cat *cat, uint64_t ino, const struct cat_extent *ext,
		      bool *must_store);
int catsh_pending_from_committed(struct cat *cat, uint64_t ino);
int catsh_pending_cut(struct cat *cat, uint64_t ino, uint64_t new_size);
/* cat_pending_drop: the pending rows, then the writer's pins (S7). */
int catsh_pending_drop(struct cat *cat, uint64_t ino);
int catsh_file_commit(struct cat *cat, uint64_t ino, uint64_t size, int64_t mtime_ns,
		      bool durable);
int catsh_file_truncate(struct cat *cat, uint64_t ino, uint64_t new_size);

/* catalog_internal.h's zero-count sweep (S3) */
int catsh_sweep(struct cat *cat);

/* upload.h's [node] calls whose answer depends on the shared store */
int catsh_upload_ready(struct cat *cat, const struct cat_upload *u, bool *ready, bool *stale);
int catsh_upload_ready_many(struct cat *cat, const struct cat_upload *rows, size_t n, bool *ready,
			    bool *stale);
int catsh_upload_done_many(struct cat *cat, const struct cat_upload *rows, size_t n);
int catsh_upload_moot_many(struct cat *cat, const struct cat_upload *rows, size_t n);
int catsh_chunk_where(struct cat *cat, const uint8_t hash[CAT_HASH_LEN],
		      struct cat_chunk_where *out);
int catsh_chunk_fetched(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
/* upload.h's cat_chunk_lost (S14) */
int catsh_chunk_lost(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
/* catalog.h's cat_chunks_evict (S11) */
/* why[i] (why may be NULL): 0, or as cat_chunk_evict's -ENOENT and -EBUSY */
int catsh_chunks_evict(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		       cat_reclaim_fn remove, void *arg, bool *evicted, int *why);
int catsh_file_uploaded(struct cat *cat, uint64_t ino, bool *uploaded);
/* S13's state between sweeps (zeroed: from the start, nothing known bad),
 * kept in the engine's state (struct cat_shared) and used by the sweeping
 * thread alone. */
#define CSD_BACKING_BAD 16
struct csd_backing_look {
	uint8_t after[CAT_HASH_LEN]; /* the next batch starts after it; all zero: from the start */
	uint8_t bad[CSD_BACKING_BAD][CAT_HASH_LEN]; /* found damaged: not read again */
	unsigned n_bad, next_bad;
};
/* S13 (pggen.h X11): up to CSD_BACKING_MAX chunks of lost generations
 * whose holder is gone, by hash after look->after (moved on, or zeroed
 * after the last), looked for on BACKING with check, but for those look
 * found damaged before; *marked of them found whole and marked uploaded. */
int catshd_adopt_backing(struct cat *cat, cat_backing_check_fn check, void *arg,
			 struct csd_backing_look *look, size_t *marked);

/* S17 (catalog_shared.c S18): chunk hash, whose object in this cache
 * passed SHA-256 (plain_len plain bytes, codec and stored_len as its
 * header says), is this node's again: cached, dirty, its upload queued. */
int catshd_take_back(struct cat *cat, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
		     uint8_t codec, uint64_t stored_len);

/* S12: the writers' hashes whose upload claim found no PostgreSQL row, each
 * with the count of publications' last local reads (csd_publish_late) when
 * it was claimed; kept in the engine's state (struct cat_shared), all of it
 * read and changed under the catalog lock. Zeroed is empty. */
struct csd_absent {
	uint8_t hash[CAT_HASH_LEN];
	uint64_t published;
};
struct csd_absent_set {
	struct csd_absent *v;
	size_t n, cap;
	uint64_t published; /* publications' last local reads so far */
};
void csd_absent_free(struct csd_absent_set *set);

/* S16: hashes whose local "not on BACKING" mark (csd_upload_again) could
 * not be written: their rows may still say uploaded, so the evictor keeps
 * their copies and writes the mark first. In the engine's state (struct
 * cat_shared), read and changed under the catalog lock. Zeroed is empty. */
struct csd_again_set {
	uint8_t (*v)[CAT_HASH_LEN];
	size_t n, cap;
};
void csd_again_free(struct csd_again_set *set);

#endif
