/* pggen — generations across nodes in the shared catalog (issue 18;
 * docs/MULTINODE.md "Generations span nodes").
 *
 * A generation's row is shared. Its root is created on some node; every
 * inode under it carries its id (ns_inodes.gen), whichever node made it.
 * Each node records the files it has open for writing (ns_writing), so the
 * completion signal seen on any node can commit the whole generation with
 * every node's closed files — and only those.
 *
 * States and transitions are those of meta/generation.h (OPEN, COMMITTED,
 * HELD, ...), plus `lost`: a generation naming a chunk that died with its
 * node before it reached BACKING. A lost generation is hidden from listings.
 *
 * Invariants:
 *  X1. A commit succeeds only while no node has a file of the generation
 *      open for writing (-EBUSY, with how many, so the caller can wait up to
 *      its bound) — a node whose lease ran out included, until X2 handled it; the check and the state change are one transaction that
 *      holds the generation's row, and a node opening a file of a generation
 *      for writing takes that row FOR SHARE in its own transaction, so no open
 *      slips in between a commit's check and its change.
 *  X2. A node past its lease (lease.h) is handled once, by one live node:
 *      its open generations that it had files open in are held (their files
 *      are as their last close left them: proven of nothing), its writing
 *      rows are dropped, the chunks it alone held that another live node also
 *      has are adopted by that node (pggen_adopt, before), and the
 *      generations naming a chunk still held by it and not uploaded are lost.
 *  X3. Every change is fenced by its node's lease (L2).
 *
 * Calls return 0 or a negative errno (pgns.h's). */
#ifndef CKPTFS_PGGEN_H
#define CKPTFS_PGGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "generation.h"
#include "pgns.h"

extern const struct pg_stmt pggen_stmts[];
extern const size_t pggen_nstmts;

/* A new directory or file name under parent that is the root of a new OPEN
 * generation of series parent (spec: its name and step), opened by this node. */
int pggen_create_root(struct pgns *ns, uint64_t parent, const struct cat_gen_spec *spec,
		      uint32_t mode, uint32_t uid, uint32_t gid, struct cat_inode *out,
		      uint64_t *gen_id);

/* This node opens ino for writing (open = true) or closed its last writer
 * (false). *gen_state (if not NULL) gets the state of ino's generation
 * (-1 for none): a COMMITTED one is the caller's to reopen. */
int pggen_writing(struct pgns *ns, uint64_t ino, bool open, int *gen_state);

/* OPEN → COMMITTED with rule (X1); HELD too when it is a decision (an admin's
 * commit), never by a rule. -EBUSY with *writers set while files of it are
 * open for writing on any node not yet handled by X2; -ENODATA if it is
 * lost; -EINVAL in another state. */
int pggen_commit(struct pgns *ns, uint64_t id, const char *rule, bool decision, uint64_t *writers);

/* OPEN → HELD with rule and reason. -EALREADY if HELD. */
int pggen_hold(struct pgns *ns, uint64_t id, const char *rule, const char *reason);

/* This node holds the bytes of hashes[0..n) in its cache: it takes over
 * holding those of them that node dead held and had not uploaded (X2). */
int pggen_adopt(struct pgns *ns, uint64_t dead, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
		size_t *adopted);

/* X2 for node dead (expired by lease_sweep): ids of the generations held and
 * of those lost, up to max each. */
int pggen_node_lost(struct pgns *ns, uint64_t dead, uint64_t *held, size_t max_held,
		    size_t *n_held, uint64_t *lost, size_t max_lost, size_t *n_lost);

/* One generation (no sizes: files/logical_bytes/exclusive_bytes are 0). */
int pggen_get(struct pgns *ns, uint64_t id, struct cat_gen *out, bool *lost);

/* The generations of series that a trainer may see: OPEN and COMMITTED, not
 * lost, by step. */
int pggen_list(struct pgns *ns, uint64_t series, cat_gen_fn fn, void *arg);

#endif
