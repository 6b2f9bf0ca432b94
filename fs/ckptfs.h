/* ckptfs — the daemon's shared state, handed to every FUSE operation.
 *
 *   ops.c     FUSE low-level operations: decode, call a module, reply
 *   node.c    in-memory inodes: kernel lookup counts, open handles, locks
 *   writer.c  a file being written: streaming chunking or a staging file
 *   reader.c  reading file bytes from chunks, with a decoded-chunk cache
 *   gen.c     checkpoint generations: when they commit, abort and go
 *   store.c   chunk objects in the local cache directory
 *   storeq.c  threads that write chunk objects behind the writers
 *   cache.c   the cache in front of BACKING: fetch on miss, eviction, backpressure
 *   uploader.c  cache → BACKING: chunk objects, then manifests, in queue order
 *   backing.c BACKING itself: a directory or an nfs:// URL
 *   meta/catalog.c  the SQLite catalog (meta/upload.c: its upload queue)
 */
#ifndef CKPTFS_CKPTFS_H
#define CKPTFS_CKPTFS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog.h"
#include "gen.h"
#include "chunker.h"
#include "codec.h"
#include "store.h"

struct node_table;
struct chunk_cache;
struct gen_policy;
struct backing;
struct cache;
struct uploader;
struct storeq;
struct fuseinit;
struct fuse_session;
struct ns;

struct ckptfs_options {
	char backing[PATH_MAX];  /* absolute */
	char cache[PATH_MAX];    /* absolute */
	char mountpoint[PATH_MAX];
	char log_path[PATH_MAX]; /* empty: stderr in the foreground, CACHE/ckptfs.log otherwise */
	bool use_syslog;         /* -o syslog: the log goes to syslog(3) */
	bool foreground;
	bool debug;
	bool nonempty;
	uint64_t chunk_cache_bytes; /* decoded chunks kept in memory */
	struct gen_options gen;
	/* the write-back cache (issue 4) */
	uint64_t cache_size;          /* bound of cached chunk bytes; 0: what the disk holds */
	uint64_t dirty_max;           /* bound of bytes not yet on BACKING; 0: 3/4 of cache_size */
	bool sync_backing;            /* fsync waits until the data is on BACKING */
	bool verify_sha256;           /* local reads re-hash chunks (store.c S4) */
	enum codec_family codec;      /* -o codec=: new chunks' compression (codec.h) */
	bool leave_queued;            /* unmount does not wait for uploads */
	bool copy_uploads;            /* copy objects to BACKING even where a hard link would do */
	bool read_cache;              /* read-only opens keep the page cache (no direct_io) */
	unsigned backing_timeout_ms;  /* reads wait this long for BACKING, then EIO; writes */
	                              /* short of cache room, then ENOSPC */
	unsigned upload_threads;
	unsigned upload_deadline_s;   /* an upload older than this is logged */
	unsigned claim_timeout_s;     /* lease of the claim on BACKING (fs/lib/claim.h) */
	char metrics_addr[128];       /* -o metrics=ADDR:PORT; "" for none (fs/metrics.h) */
};

struct ckptfs {
	struct ckptfs_options opt;
	struct cat *cat;
	struct store *store;         /* the local cache's objects (CACHE/chunks) */
	struct backing *backing;
	struct claim *claim;         /* BACKING is this catalog's (fs/lib/claim.h) */
	struct cache *cache;
	struct uploader *uploader;
	struct storeq *storeq;       /* chunk objects written behind the writers */
	struct node_table *nodes;
	struct ns *ns;               /* the namespace (ns.c): freed at teardown */
	struct chunk_cache *chunks;
	struct recent *recent;       /* hashes of chunks just written (replicated saves) */
	struct gen_policy *gen;
	struct chunker_params chunking;
	char staging_dir[PATH_MAX]; /* CACHE/staging: files being rewritten out of order */
	int lock_fd;                /* flock on CACHE/lock: one daemon per cache */
	struct fuseinit *fuse_init; /* the session's INIT: may read-only opens use direct_io */
	struct fuse_session *se;    /* set while serving: ckptfs_stopping() asks it */
	bool stopped;               /* the session is gone */
};

/* true once the daemon was told to stop (SIGTERM/SIGINT/SIGHUP, unmount):
 * waits that only BACKING could end (cache backpressure) give up, since
 * libfuse joins its workers before anything else stops (main.c). */
bool ckptfs_stopping(const struct ckptfs *fs);

#endif
