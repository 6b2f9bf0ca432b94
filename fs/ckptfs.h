/* ckptfs — the daemon's shared state, handed to every FUSE operation.
 *
 *   ops.c     FUSE low-level operations: decode, call a module, reply
 *   node.c    in-memory inodes: kernel lookup counts, open handles, locks
 *   writer.c  a file being written: streaming chunking or a staging file
 *   reader.c  reading file bytes from chunks, with a decoded-chunk cache
 *   gen.c     checkpoint generations: when they commit, abort and go
 *   store.c   chunk objects on BACKING        meta/catalog.c  the SQLite catalog
 */
#ifndef CKPTFS_CKPTFS_H
#define CKPTFS_CKPTFS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "gen.h"
#include "chunker.h"
#include "store.h"

struct node_table;
struct chunk_cache;
struct gen_policy;

struct ckptfs_options {
	char backing[PATH_MAX];  /* absolute */
	char cache[PATH_MAX];    /* absolute */
	char mountpoint[PATH_MAX];
	char log_path[PATH_MAX]; /* empty: stderr in the foreground, CACHE/ckptfs.log otherwise */
	bool foreground;
	bool debug;
	bool nonempty;
	uint64_t chunk_cache_bytes; /* decoded chunks kept in memory */
	struct gen_options gen;
};

struct ckptfs {
	struct ckptfs_options opt;
	struct cat *cat;
	struct store *store;
	struct node_table *nodes;
	struct chunk_cache *chunks;
	struct gen_policy *gen;
	struct chunker_params chunking;
	char staging_dir[PATH_MAX]; /* CACHE/staging: files being rewritten out of order */
	int lock_fd;                /* flock on CACHE/lock: one daemon per cache */
};

#endif
