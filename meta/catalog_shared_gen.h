/* catalog_shared_gen — the shared engine's generation calls, for the
 * one-line dispatches atop generation.c's public calls (and catalog.c's
 * cat_create_in_gen and cat_rename_gen): `if (cat->shared) return
 * catshg_x(...);`. Internal to meta/. Each catshg_x has the contract of its
 * cat_x (generation.h) over PostgreSQL (meta/pggen.c), with the differences
 * catalog_shared_gen.c lists at its top. */
#ifndef CKPTFS_CATALOG_SHARED_GEN_H
#define CKPTFS_CATALOG_SHARED_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "generation.h"

int catshg_create_in_gen(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
			 uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
			 const struct cat_gen_spec *gen, struct cat_inode *out, uint64_t *gen_id);
/* S8: after a rename that returned rename_rc, queues on this node the
 * manifests of the generations the calling thread's rename made stale
 * (pgns.h N13); a failure to, or an outcome unknown, leaves them to this
 * node's next sweep (cat_shared_requeue_later). */
void catshg_series_moved(struct cat *cat, int rename_rc);
int catshg_rename_gen(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
		      const char *newname, unsigned flags, const struct cat_gen_spec *gen,
		      uint64_t *replaced_ino, uint64_t *new_gen_id, uint64_t *moved_ino);
int catshg_gen_of(struct cat *cat, uint64_t ino, uint64_t *gen_id);
int catshg_get(struct cat *cat, uint64_t id, struct cat_gen *out);
int catshg_find(struct cat *cat, uint64_t series, const char *name, struct cat_gen *out);
int catshg_find_step(struct cat *cat, uint64_t series, uint64_t step, struct cat_gen *out);
int catshg_list(struct cat *cat, uint64_t series, bool all, cat_gen_fn fn, void *arg);
int catshg_commit(struct cat *cat, uint64_t id, const char *rule);
int catshg_unsettled(struct cat *cat, uint64_t id, char *reason, size_t size);
int catshg_hold_lost_chunk(struct cat *cat, const uint8_t hash[CAT_HASH_LEN]);
int catshg_hold(struct cat *cat, uint64_t id, const char *rule, const char *reason,
		cat_ino_fn fn, void *arg, bool *held_out);
int catshg_abort(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg);
int catshg_delete(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg);
int catshg_expire(struct cat *cat, uint64_t id, uint32_t keep, const char *rule, cat_ino_fn fn,
		  void *arg);
int catshg_reopen(struct cat *cat, uint64_t id);
int catshg_pin(struct cat *cat, uint64_t id, bool pinned);
int catshg_id_reserve(struct cat *cat, uint64_t id);
int catshg_others_in(struct cat *cat, uint64_t id, bool *others);
int catshg_check(struct cat *cat);

#endif
