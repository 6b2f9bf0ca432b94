/* catalog_shared — the shared engine's namespace calls, for the one-line
 * dispatches of catalog.c (`if (cat->shared) return catsh_x(...);`).
 * Internal to meta/: the rest of ckptfs sees only catalog.h. Each catsh_x
 * has the contract of its cat_x (catalog.h) and runs on the shared
 * namespace in PostgreSQL (meta/pgns.c); the opening, the lease and the
 * other shared-only calls of catalog.h live in catalog_shared.c too. */
#ifndef CKPTFS_CATALOG_SHARED_H
#define CKPTFS_CATALOG_SHARED_H

#include <stddef.h>
#include <stdint.h>

#include "catalog.h"

int catsh_getattr(struct cat *cat, uint64_t ino, struct cat_inode *out);
int catsh_getattr_gen(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id);
int catsh_lookup(struct cat *cat, uint64_t parent, const char *name, struct cat_inode *out);
int catsh_readlink(struct cat *cat, uint64_t ino, char *buf, size_t size);
int catsh_readdir(struct cat *cat, uint64_t dir, uint64_t cookie, cat_dirent_fn fn, void *arg);
int catsh_create(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
		 uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		 struct cat_inode *out);
int catsh_link(struct cat *cat, uint64_t ino, uint64_t newparent, const char *newname,
	       struct cat_inode *out);
int catsh_unlink(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out);
int catsh_rmdir(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out);
int catsh_rename(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
		 const char *newname, unsigned flags, uint64_t *replaced_ino);
int catsh_setattr(struct cat *cat, uint64_t ino, unsigned what, const struct cat_inode *in,
		  struct cat_inode *out);
int catsh_inode_release(struct cat *cat, uint64_t ino);
int catsh_inodes_release(struct cat *cat, const uint64_t *inos, size_t n);
int catsh_inodes_drop_data(struct cat *cat, const uint64_t *inos, size_t n);
int catsh_sync(struct cat *cat);
int catsh_stats(struct cat *cat, struct cat_stats *out);
int catsh_check(struct cat *cat);
int catsh_catalog_id(struct cat *cat, char *buf, size_t size);
int catsh_store_facts(struct cat *cat, struct cat_store_facts *out);
int catsh_store_id_offer(struct cat *cat, const char *id, char *held);
int catsh_store_marked(struct cat *cat);
/* Releases the lease, closes both connections, then the local catalog. */
void catsh_close(struct cat *cat);

/* cat_open for the local catalog beside a shared namespace: the same, but
 * without the zero-count sweep at open (a local row at count 0 is an object
 * still to upload, or a cache copy of a shared one: neither is this node's
 * to remove). Implemented in catalog.c. */
int cat_open_node(const char *path, uint32_t root_uid, uint32_t root_gid, cat_reclaim_fn reclaim,
		  void *reclaim_arg, struct cat **out);
/* catalog.c's checks of [node] state only (chunk rows and pending extents,
 * invariants 1–3 where they apply, and SQLite's integrity_check), adding
 * violations to *violations: what cat_check still checks locally in
 * shared mode. */
int cat_check_node(struct cat *cat, int *violations);

#endif
