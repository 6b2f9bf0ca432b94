/* ckptfs — TEMPORARY (issue 17): main.c's wiring, still seen by the modules
 * that take `struct ckptfs *` until their own branches hand them explicit
 * handles (ops, ns, gen, node, writer, reader, control, metrics).
 *
 * The services cache.c and uploader.c no longer include this header: they
 * are started with handles, a config and callbacks (cache.h, uploader.h).
 * The options moved to options.h. When nothing but main.c includes this
 * file, `struct ckptfs` moves into main.c and this header is deleted. */
#ifndef CKPTFS_CKPTFS_H
#define CKPTFS_CKPTFS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "gen.h"
#include "chunker.h"
#include "codec.h"
#include "options.h"
#include "store.h"

struct node_table;
struct reader;
struct gen_policy;
struct backing;
struct cache;
struct uploader;
struct storeq;
struct chunkput;
struct fuseinit;
struct fuse_session;
struct ops_handles;

struct ckptfs {
	struct ckptfs_options opt;
	struct cat *cat;
	struct store *store;         /* the local cache's objects (CACHE/chunks) */
	struct backing *backing;
	struct claim *claim;         /* BACKING is this catalog's (fs/lib/claim.h) */
	struct cache *cache;
	struct uploader *uploader;
	struct storeq *storeq;       /* chunk objects written behind the writers */
	struct chunkput *chunkput;   /* putting chunks, for the writers (chunkput.h) */
	struct node_table *nodes;
	struct ops_handles *handles; /* open file handles (ops.c): freed at teardown */
	struct reader *reader;        /* file bytes from chunks (fs/reader.h) */
	struct recent *recent;       /* hashes of chunks just written (replicated saves) */
	struct gen_policy *gen;
	struct chunker_params chunking;
	char staging_dir[PATH_MAX]; /* CACHE/staging: files being rewritten out of order */
	int lock_fd;                /* flock on CACHE/lock: one daemon per cache */
	struct fuseinit *fuse_init; /* the session's INIT: may read-only opens use direct_io */
	struct fuse_session *se;    /* set while serving: main_stopping() asks it */
	bool stopped;               /* the session is gone */
};

#endif
