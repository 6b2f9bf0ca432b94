/* catalog_shared_admin — the questions of ckptfs-admin's list and show on
 * the shared engine (issue 18): what admin_query.h answers from a lone
 * catalog's SQLite tables, answered from PostgreSQL's (meta/pgns.c's
 * ns_inodes, ns_dirents, ns_extents, ns_chunks; meta/pggen.c's
 * ns_generations). The daemon of a node asks them for the tool (control
 * verbs `list` and `show`, fs/lib/control_proto.h): a node's local catalog
 * file holds no generations.
 *
 * Invariants:
 *  A1. Nothing here writes: every call is one read statement under pg_read
 *      (pg.h P5), whatever the number of generations, files or chunks.
 *  A2. The figures mean what admin_query.h's mean on one node, counted on
 *      the committed extents PostgreSQL holds (a writer's pending extents
 *      stay in its node's SQLite until its close publishes them): a chunk
 *      is a generation's alone when every reference to it (ns_chunks.
 *      refcount, one per extent: pgns.h N1) comes from the generation's
 *      inodes. For the same committed data a lone catalog and the shared one
 *      give the same numbers (tests/unit/test_catshared_admin.c).
 *  A3. The statements are prepared on the catalog's connections after
 *      pggen's (pgns_stmts_all appends catsha_stmts last).
 *
 * Calls return 0 or a negative errno; -EINVAL on a catalog that is not
 * shared (a lone one answers through admin_query.h). */
#ifndef CKPTFS_CATALOG_SHARED_ADMIN_H
#define CKPTFS_CATALOG_SHARED_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "admin_query.h"
#include "catalog.h"
#include "pg.h"

extern const struct pg_stmt catsha_stmts[];
extern const size_t catsha_nstmts;

/* What the chunks of each generation of ids[0..n) cost (aq_gen_usage's
 * figures, A2), in one statement: fn(arg, id, usage) for each of them that
 * names a chunk, by id (one that names none gets no call: all zeros). A
 * non-zero return of fn stops and is returned. */
typedef int (*cat_shared_usage_fn)(void *arg, uint64_t gen_id, const struct aq_gen_usage *u);
int cat_shared_gen_usage(struct cat *cat, const uint64_t *ids, size_t n, cat_shared_usage_fn fn,
			 void *arg);

/* The regular files of generation gen_id's live tree (aq_gen_files's rows,
 * by inode), each with its path relative to the generation's root ("" for
 * a root that is itself the file, else "/model/rank0.pt"; a file linked
 * twice in the tree is named by its entry made first), in one statement. */
typedef int (*cat_shared_file_fn)(void *arg, const struct aq_file *f, const char *relpath);
int cat_shared_gen_files(struct cat *cat, uint64_t gen_id, cat_shared_file_fn fn, void *arg);

/* aq_gen_shares on the shared tables: the other generations (0: files
 * outside generations) naming chunks gen_id's extents name, by id, with how
 * many distinct chunks and their plain bytes. *out malloc'd (free it). */
int cat_shared_gen_shares(struct cat *cat, uint64_t gen_id, struct aq_share **out, size_t *n);

#endif
