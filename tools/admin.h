/* admin — what the files of ckptfs-admin share: the context of one run
 * (where the cache and BACKING are, the catalog, the daemon), exit codes,
 * output helpers.
 *
 *   admin.c         main: arguments, help, finding the cache, dispatch
 *   admin_util.c    sizes, times, JSON strings, progress bar, errors → exit codes
 *   admin_ctl.c     client of the daemon's control channel (fs/lib/control_proto.h)
 *   admin_gen.c     naming generations (GEN), list, show
 *   admin_change.c  commit, pin, unpin, rm — through the daemon, or offline
 *   admin_gc.c      gc
 *   admin_verify.c  verify, check
 *   admin_stats.c   stats (text, --json, --prometheus)
 *   admin_copy.c    export, import
 *   admin_wait.c    wait, rebuild
 *   admin_umount.c  umount: drain the uploads, unmount, wait for the daemon
 *   admin_nodes.c   nodes: the nodes of a shared catalog (-o meta=)
 *   admin_shared.c  GEN, list and show through the daemon on a node of a shared catalog
 */
#ifndef CKPTFS_ADMIN_H
#define CKPTFS_ADMIN_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "admin_query.h"
#include "catalog.h"
#include "generation.h"

/* Exit codes (docs/ADMIN.md, ckptfs-admin(1)). */
enum admin_exit {
	ADMIN_OK = 0,
	ADMIN_PROBLEM = 1,     /* verify/check found a problem, or an operation failed */
	ADMIN_USAGE = 2,       /* bad command line */
	ADMIN_NOT_CKPTFS = 3,  /* MOUNTPOINT is not a ckptfs mount, DIR not a ckptfs cache */
	ADMIN_NO_DAEMON = 4,   /* the command needs the daemon and it is not running */
	ADMIN_PERM = 5,        /* permission denied (not root or the daemon's user) */
	ADMIN_NO_GEN = 6,      /* no such generation or series */
	ADMIN_BAD_NAME = 7,    /* a name with "..", an empty or "." part, a slash in NAME */
	ADMIN_BUSY = 8,        /* open generation without --force, target exists, cache in use */
	ADMIN_TIMEOUT = 9,     /* wait --timeout ran out */
	ADMIN_UNSUPPORTED = 10, /* not available in this build (rebuild before write-back) */
	ADMIN_UNSAVED = 11,    /* wait: all it waited for is durable, but open or held
				  generations were not waited for (they are not saved) */
	ADMIN_UNREACHABLE = 12 /* verify: BACKING stopped answering; the rest not checked */
};

/* What a command needs from the context. */
#define ADMIN_NEED_CHANGE 1u /* changes state: the daemon if it runs, else offline read-write */
#define ADMIN_NEED_MOUNT 2u  /* works only through a mounted file system */

struct admin {
	/* from the command line */
	bool json, all, force, dry_run, prometheus;
	bool gc_delete; /* gc --delete: without it gc is a dry run */
	bool claim_break; /* claim --break */
	double timeout_s; /* wait; < 0 none */
	const char *name; /* import --name */
	const char *cmd;
	const char *target; /* MOUNTPOINT or the --cache DIR */
	bool by_cache;
	bool as_owner; /* --as-owner: root on another user's cache drops to its owner (admin.c A1) */
	const char *pos[4]; /* positional arguments after MOUNTPOINT */
	int npos;
	/* found */
	char mount[PATH_MAX]; /* "" when offline */
	char inner[PATH_MAX]; /* MOUNTPOINT given as a path inside the mount, else "" */
	char cache[PATH_MAX];
	char backing[PATH_MAX];
	char sock[PATH_MAX + 32];
	bool daemon;  /* the daemon runs: changes go through its control channel */
	long ctl_pid, ctl_uid; /* who answered the last control request (admin_ctl.c 2) */
	bool meta;    /* rebuild --meta URL BACKING: the target is a shared catalog's URL */
	bool shared_asked, shared; /* the daemon's hello says: a node of a shared catalog */
	uint64_t sh_series;        /* the series of the GEN admin_shared_resolve found, */
	char sh_series_path[PATH_MAX]; /* and its path ("/run1") */
	int lock_fd;  /* offline changes hold the cache lock, else -1 */
	struct cat *cat;
	struct aq *aq;
	struct store *store;     /* the cache's chunk objects (CACHE/chunks), if opened */
	struct backing *bk;      /* BACKING, if opened */
	struct claim *claim;     /* offline changes claim BACKING for the catalog (fs/lib/claim.h) */
};

/* ---- admin.c ---- */
/* Opens the cache's chunk store and BACKING if not yet (prints the error). */
int admin_need_objects(struct admin *a);
/* The claim on BACKING bk (claim.h): 0, -ENOENT if none, or -errno. */
struct backing;
struct claim_rec;
int admin_claim_get(struct backing *bk, struct claim_rec *rec);
/* Claims BACKING for catalog cat into a->claim, renewed until exit, and
 * records in cat that it holds a claim (claim.h invariant 8); fresh: cat
 * never held one (a catalog being rebuilt); stand_in: this command writes
 * nothing on BACKING but the claim (rebuild: claim.h invariant 13); the
 * take recorded in cat (invariant 12). ADMIN_OK, or the error printed
 * (ADMIN_BUSY naming the holder). */
int admin_claim_for(struct admin *a, struct cat *cat, bool fresh, bool stand_in);

/* ---- admin_util.c ---- */
void admin_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Exit code for an errno (EACCES/EPERM → ADMIN_PERM, ENOENT → ADMIN_NO_GEN, …). */
int admin_exit_for(int err);
/* Who holds the flock on fd's file, from /proc/locks: "pid N (COMM)", or
 * "another process" when it cannot tell. */
void admin_lock_holder(int fd, char *buf, size_t size);
const char *admin_size(uint64_t bytes, char buf[32]);   /* "1.5 GiB" */
const char *admin_time(int64_t ns, char buf[32]);       /* "2026-11-22 05:41:02" or "-" */
void admin_json_str(FILE *f, const char *s);             /* a JSON string literal */
double admin_ratio(uint64_t a, uint64_t b);
/* Progress on stderr when it is a terminal; nothing otherwise. */
void admin_progress(const char *label, uint64_t done, uint64_t total);
/* The same for a copy of bytes: human sizes, rate and ETA (export, import). */
void admin_progress_bytes(const char *label, uint64_t done, uint64_t total);
void admin_progress_end(void);

/* ---- admin_ctl.c ---- */
/* One request; data lines go to fn(arg, key, value); progress lines to the
 * bar. Returns 0, or the positive errno of an "error" answer (message copied
 * into msg), or a negative errno if the channel failed. */
typedef void (*admin_data_fn)(void *arg, const char *key, const char *value);
int admin_ctl(struct admin *a, const char *request, admin_data_fn fn, void *arg, char *msg,
	      size_t msgsize);
/* Connects to see whether the daemon answers: 0, or -errno. */
int admin_ctl_probe(const char *sock);

/* ---- admin_verify.c ---- */
/* Where a chunk object copy is checked or read from. */
enum admin_where { ADMIN_IN_CACHE, ADMIN_ON_BACKING };
/* Reads and verifies one copy of a chunk into plain (capacity cap): 0 with
 * *len set, -ENOENT if that copy is missing, -EBADMSG with *why if it is
 * damaged, another negative errno if it could not be read (BACKING away or
 * failing: no verdict on its bytes; fs/lib/bkobj.h B1). */
int admin_chunk_read(struct admin *a, enum admin_where where, const uint8_t hash[CAT_HASH_LEN],
		     void *plain, size_t cap, size_t *len, const char **why);

/* ---- admin_gen.c ---- */
/* Resolves GEN (SERIES/NAME, a path in the mount, or id:N) to a generation.
 * Prints the error and returns an exit code when it cannot. */
int admin_resolve_gen(struct admin *a, const char *spec, struct cat_gen *out);
/* The same for a command that removes or replaces a generation: GEN must
 * name the generation itself (its root, or id:N), not a path inside it
 * (admin_gen.c invariant G1; ADMIN_BAD_NAME, printed). */
int admin_resolve_gen_root(struct admin *a, const char *spec, struct cat_gen *out);
/* "series/name" of a generation. */
void admin_gen_label(struct admin *a, const struct cat_gen *g, char *buf, size_t size);
/* Checks a relative path of names; ADMIN_BAD_NAME (printed) if one is "..", ".", empty. */
int admin_check_relpath(const char *what, const char *rel);

/* ---- admin_print.c ---- */
void admin_json_gen_end(const struct cat_gen *g); /* a generation's JSON from "committed" on */
/* One generation's JSON object as list and show print it: series is its
 * path without the leading '/'; u NULL leaves the usage fields out. */
void admin_json_gen_obj(const char *series, const struct cat_gen *g, const char *state,
			bool durable, const struct aq_gen_usage *u);
/* list's header and one row of it (u NULL: ALONE and DEDUP are "-"). */
void admin_list_header(void);
void admin_list_row(const char *series_path, const struct cat_gen *g, const char *state,
		    const struct aq_gen_usage *u);
/* What show prints, gathered from the local catalog or from the daemon. */
struct admin_show_file {
	uint64_t size, extents, chunks;
	char *path; /* from the mount's root */
};
struct admin_show_share {
	uint64_t gen_id, chunks, bytes;
	char *label; /* "series/name"; NULL: files outside generations (or one gone) */
};
struct admin_show {
	const struct cat_gen *g;
	const char *state; /* "durable", or the catalog state's name */
	bool durable;
	const char *label;  /* "series/name" */
	const char *series; /* the series' path without its leading '/' */
	const struct aq_gen_usage *u;
	struct admin_show_file *files; /* malloc'd, as their strings */
	size_t nfiles;
	struct admin_show_share *shares;
	size_t nshares;
};
void admin_show_print(struct admin *a, const struct admin_show *s);
void admin_show_free(struct admin_show *s); /* the arrays and their strings */

int admin_cmd_list(struct admin *a);
int admin_cmd_show(struct admin *a);
int admin_cmd_commit(struct admin *a);
int admin_cmd_pin(struct admin *a);
int admin_cmd_unpin(struct admin *a);
int admin_cmd_rm(struct admin *a);
int admin_cmd_gc(struct admin *a);
int admin_cmd_verify(struct admin *a);
int admin_cmd_check(struct admin *a);
int admin_cmd_stats(struct admin *a);
/* stats --prometheus on a stale mount: ckptfs_daemon_up 0 */
void admin_stats_stale(const char *mountpoint);
int admin_cmd_export(struct admin *a);
int admin_cmd_import(struct admin *a);
int admin_cmd_wait(struct admin *a);
int admin_cmd_rebuild(struct admin *a);
int admin_cmd_umount(struct admin *a);
/* ---- admin_shared.c ---- */
/* Whether the daemon runs a node of a shared catalog (asked once). */
bool admin_shared(struct admin *a);
/* admin_resolve_gen on such a node: the daemon resolves GEN spec (rel: its
 * path relative to the mount, NULL for id:N). */
int admin_shared_resolve(struct admin *a, const char *spec, const char *rel, struct cat_gen *out);
/* admin_cmd_list on such a node (series_rel: SERIES relative to the mount, or NULL). */
int admin_shared_list(struct admin *a, const char *series_rel);
/* admin_cmd_show on such a node, of the generation admin_shared_resolve found. */
int admin_shared_show(struct admin *a, const struct cat_gen *g);

/* ---- admin_nodes.c ---- */
int admin_cmd_nodes(struct admin *a); /* target is a -o meta= URL */
int admin_cmd_claim(struct admin *a); /* target is a BACKING */

#endif
