/* options — the daemon's command line and the checks before mounting. */
#ifndef CKPTFS_OPTIONS_H
#define CKPTFS_OPTIONS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "codec.h"
#include "gen.h"
#include "version.h"

#define OPTIONS_DEFAULT_LEASE_MS 5000
#define OPTIONS_DEFAULT_META_TIMEOUT_MS 30000
/* -o writebuf default: 1 GiB, or an eighth of the RAM if that is less */
#define OPTIONS_DEFAULT_WRITEBUF ((uint64_t)1 << 30)
#define OPTIONS_MIN_WRITEBUF ((uint64_t)8 << 20)

/* Every option the daemon takes, as parsed and checked; main.c hands each
 * service the values it reads (its config struct), not this whole struct. */
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
	uint64_t writebuf;          /* -o writebuf: bound of writers' buffers (fs/wbuf.h) */
	int prefetch;               /* -o prefetch: chunks read ahead of a sequential reader; -1: none */
	struct gen_options gen;
	/* the write-back cache (issue 4) */
	uint64_t cache_size;          /* bound of cached chunk bytes; 0: what the disk holds */
	uint64_t dirty_max;           /* bound of bytes not yet on BACKING; 0: 3/4 of cache_size */
	bool sync_backing;            /* fsync waits until the data is on BACKING */
	bool verify_sha256;           /* local reads re-hash chunks (store.c S4) */
	enum codec_family codec;      /* -o codec=: new chunks' compression (codec.h) */
	bool leave_queued;            /* unmount does not wait for uploads */
	bool copy_uploads;            /* copy objects to BACKING even where a hard link would do */
	bool packs;                   /* small objects into packs (fs/uppack.h; alone only) */
	bool read_cache;              /* read-only opens keep the page cache (no direct_io) */
	unsigned backing_timeout_ms;  /* reads wait this long for BACKING, then EIO; writes */
	                              /* short of cache room, then ENOSPC */
	unsigned upload_threads;      /* 0: as BACKING suits (backing_upload_threads) */
	unsigned upload_deadline_s;   /* an upload older than this is logged */
	unsigned claim_timeout_s;     /* lease of the claim on BACKING (fs/lib/claim.h) */
	char metrics_addr[128];       /* -o metrics=ADDR:PORT; "" for none (fs/metrics.h) */
	/* the shared catalog (issue 18, docs/MULTINODE.md); meta_url "" alone */
	char meta_url[1024];          /* -o meta=URL: libpq URL of the shared namespace */
	char node_name[PATH_MAX + 320]; /* -o node_name=: default host:pid:cache */
	unsigned lease_ms;            /* the node lease's term, renewed every third of it */
	unsigned meta_timeout_ms;     /* a call rides out an unreachable database this long */
};


struct options_result {
	struct ckptfs_options opt;
	char fuse_opts[4096]; /* comma-separated FUSE options to pass through */
};

/* Parses argv and checks BACKING, the mountpoint and the cache. Returns 0 to
 * go on, 1 when the command is done (--help, --version), -1 after printing
 * one line naming the bad input and the reason. */
int options_parse(int argc, char **argv, struct options_result *r);
void options_usage(FILE *f);

#endif
