/* backing_nfs — the nfs://server[:port]/export/path backend of backing.h,
 * through libnfs's synchronous API, NFSv3 only (libnfs 4.0's NFSv4 fails
 * writes of 4 KiB and more).
 *
 * A libnfs context is one TCP connection with its own event loop and is not
 * thread-safe, so calls share a small pool:
 *
 *   slot: EMPTY ──acquire──▶ connecting ──mount ok──▶ IDLE ◀──release── BUSY
 *            ▲                   │ fail                 │ acquire ──────▶ │
 *            └───────────────────┴──── drop ◀── transport error ◀───────┘
 *
 * Invariants:
 *  1. A context is used by one thread at a time: the slot is marked busy
 *     under the pool lock before its thread touches it, and only that thread
 *     clears the mark. Connecting happens outside the lock.
 *  2. No call blocks forever (backing.h invariant 2): every RPC carries the
 *     timeout (nfs_set_timeout, applied by libnfs per RPC from when it is
 *     queued, so it bounds a silence of the server, not a long transfer);
 *     TCP connects are bounded by the SYN retry count (nfs_set_tcp_syncnt).
 *  3. A context that saw a transport error (timeout, lost or refused
 *     connection) is dropped, so the next call connects afresh; a call that
 *     failed that way on a context reused from the pool, quickly (not by
 *     timing out), is tried once more on a fresh connection, which makes a
 *     server restart invisible to the caller. Every call here is safe to
 *     repeat (a put re-writes its own temporary; unlink of an absent name is
 *     success for the caller).
 *  4. Each READ/WRITE asks for at most readmax/writemax bytes, so each sync
 *     call has one RPC in flight: when it returns, no callback of libnfs can
 *     still point at its stack frame. If RPCs are nevertheless left queued
 *     after a failure, the context is shut down but not destroyed (destroying
 *     would run their callbacks against stack frames that are gone): a small
 *     leak, counted and logged, instead of memory corruption.
 *
 *  5. Nothing planted on the export is followed where libnfs lets us say so
 *     (backing.c invariant 8): a temporary is created with O_EXCL (NFSv3
 *     CREATE GUARDED: any entry at its unguessable name, a symlink included,
 *     is EEXIST; a regular file there is taken as our own CREATE whose reply
 *     a lost connection ate, invariant 3), reads open with O_NOFOLLOW and
 *     read only a regular file, stat is lstat, and a directory found by mkdir
 *     must be one. Files are created 0600, directories 0700. libnfs resolves
 *     symlinks in the directory part of a path itself; they resolve on the
 *     server's export, never on this host's filesystems, and ckptfs's own
 *     directories (chunks/, manifests/, tmp/) are made by mkdir, which never
 *     follows. docs/DESIGN.md "Trust model".
 *
 * Durability: nfs_fsync sends COMMIT, after which the server has the file's
 * data on stable storage. No fsync of the directory is needed, nor possible:
 * NFSv3 CREATE, MKDIR, RENAME and REMOVE are synchronous — the server must
 * make the change stable before it replies (RFC 1813, section 3.3).
 *
 * libnfs reports a timed-out RPC as -EINTR and a lost connection as -EFAULT
 * or -EIO; they reach the caller as -ETIMEDOUT and -EIO. */
#define _GNU_SOURCE
#include "backing_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw-nfs.h>

#include "log.h"

#define BNFS_POOL_SIZE 8
#define BNFS_RECONNECTS 3

struct bnfs_slot {
	struct nfs_context *ctx; /* NULL: not connected */
	bool busy;
};

struct backing_nfs {
	char *url;    /* as given, for log lines */
	char *liburl; /* nfs://server/path?nfsport=P&…, what libnfs parses */
	unsigned timeout_ms;
	pthread_mutex_t lock;
	pthread_cond_t slot_freed;
	struct bnfs_slot slots[BNFS_POOL_SIZE];
	atomic_uint leaked; /* contexts shut down but not destroyed (invariant 4) */
};

static __thread char bnfs_detail[256];

const char *backing_nfs_detail(void)
{
	return bnfs_detail;
}

/* ---- errors ---- */

static bool bnfs_is_transport_error(int rc)
{
	switch (-rc) {
	case EINTR:
	case EFAULT:
	case EIO:
	case ETIMEDOUT:
	case ECONNREFUSED:
	case ECONNRESET:
	case ENOTCONN:
	case EPIPE:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return true;
	default:
		return false;
	}
}

/* Keeps libnfs's message for the log and maps its transport codes. */
static int bnfs_result(struct nfs_context *ctx, int rc)
{
	if (rc >= 0)
		return rc;
	const char *e = nfs_get_error(ctx);
	snprintf(bnfs_detail, sizeof(bnfs_detail), "%s", e ? e : "");
	if (rc == -EINTR)
		return -ETIMEDOUT; /* libnfs: "Command timed out" (nothing here cancels) */
	if (rc == -EFAULT)
		return -EIO; /* libnfs: RPC error, the connection is gone */
	return rc;
}

/* ---- the pool ---- */

static void bnfs_drop(struct backing_nfs *n, struct nfs_context *ctx)
{
	if (!ctx)
		return;
	if (nfs_queue_length(ctx) == 0) {
		nfs_destroy_context(ctx);
		return;
	}
	/* Invariant 4: do not run callbacks of calls that already returned. */
	int fd = nfs_get_fd(ctx);
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	unsigned k = atomic_fetch_add(&n->leaked, 1) + 1;
	log_warn("BACKING %s: dropped a connection with %d RPCs still queued; not freed (%u so far)",
		 n->url, nfs_queue_length(ctx), k);
}

/* Largest TCP SYN retry count whose back-off (1+2+4+… s) fits the timeout. */
static int bnfs_syncnt(unsigned timeout_ms)
{
	int cnt = 1;
	while (cnt < 6 && ((2u << (cnt + 1)) - 1) * 1000u <= timeout_ms)
		cnt++;
	return cnt;
}

static int bnfs_connect(struct backing_nfs *n, struct nfs_context **out)
{
	struct nfs_context *ctx = nfs_init_context();
	if (!ctx) {
		snprintf(bnfs_detail, sizeof(bnfs_detail), "nfs_init_context failed");
		return -ENOMEM;
	}
	/* Whole seconds: libnfs's header asks for them. */
	nfs_set_timeout(ctx, (int)((n->timeout_ms + 999) / 1000 * 1000));
	nfs_set_tcp_syncnt(ctx, bnfs_syncnt(n->timeout_ms));
	int rc;
	struct nfs_url *url = nfs_parse_url_dir(ctx, n->liburl);
	if (!url) {
		rc = bnfs_result(ctx, -EINVAL);
		nfs_destroy_context(ctx);
		return rc;
	}
	/* After parsing, so that ?version=4 or ?dircache=1 in the URL cannot win.
	 * libnfs's directory cache would answer stat and lookups from READDIRPLUS
	 * results without asking the server: stale as soon as another node (or
	 * another context of ours) changes BACKING. */
	nfs_set_dircache(ctx, 0);
	/* A few reconnects absorb a server restart; then the queued RPCs fail at
	 * once (rather than spinning on refused connects until they time out). */
	nfs_set_autoreconnect(ctx, BNFS_RECONNECTS);
	rc = nfs_set_version(ctx, NFS_V3);
	if (rc == 0)
		rc = nfs_mount(ctx, url->server, url->path);
	rc = bnfs_result(ctx, rc);
	nfs_destroy_url(url);
	if (rc != 0) {
		bnfs_drop(n, ctx);
		return rc;
	}
	log_debug("BACKING %s: connected (readmax %llu, writemax %llu)", n->url,
		  (unsigned long long)nfs_get_readmax(ctx), (unsigned long long)nfs_get_writemax(ctx));
	*out = ctx;
	return 0;
}

/* Takes a slot, connected if one is; *fresh tells whether it was just made. */
static int bnfs_acquire(struct backing_nfs *n, struct bnfs_slot **slot_out, bool *fresh)
{
	pthread_mutex_lock(&n->lock);
	struct bnfs_slot *slot = NULL;
	for (;;) {
		struct bnfs_slot *empty = NULL;
		for (int i = 0; i < BNFS_POOL_SIZE && !slot; i++) {
			if (n->slots[i].busy)
				continue;
			if (n->slots[i].ctx)
				slot = &n->slots[i];
			else if (!empty)
				empty = &n->slots[i];
		}
		if (!slot)
			slot = empty;
		if (slot)
			break;
		pthread_cond_wait(&n->slot_freed, &n->lock);
	}
	slot->busy = true;
	pthread_mutex_unlock(&n->lock);

	*fresh = slot->ctx == NULL;
	int rc = 0;
	if (!slot->ctx && (rc = bnfs_connect(n, &slot->ctx)) != 0) {
		log_warn("BACKING %s: cannot connect: %s — %s", n->url, strerror(-rc), bnfs_detail);
		pthread_mutex_lock(&n->lock);
		slot->busy = false;
		pthread_cond_signal(&n->slot_freed);
		pthread_mutex_unlock(&n->lock);
		return rc;
	}
	*slot_out = slot;
	return 0;
}

/* Gives the slot back; after a transport error its connection is dropped. */
static void bnfs_release(struct backing_nfs *n, struct bnfs_slot *slot, int rc)
{
	if (rc != 0 && bnfs_is_transport_error(rc)) {
		log_warn("BACKING %s: dropping a connection after %s — %s", n->url, strerror(-rc),
			 bnfs_detail);
		bnfs_drop(n, slot->ctx);
		slot->ctx = NULL;
	}
	pthread_mutex_lock(&n->lock);
	slot->busy = false;
	pthread_cond_signal(&n->slot_freed);
	pthread_mutex_unlock(&n->lock);
}

/* ---- operations, each run through bnfs_run ---- */

struct bnfs_op {
	int (*fn)(struct nfs_context *ctx, struct bnfs_op *op);
	const char *rel, *rel2;
	const void *wbuf;
	void *rbuf;
	size_t len, cap;
	uint64_t size;
	backing_list_fn list_fn;
	void *list_arg;
	char **names; /* list: the names, handed to list_fn after release */
	size_t n_names;
};

static void bnfs_path(const char *rel, char *buf, size_t size)
{
	snprintf(buf, size, "/%s", rel);
}

static uint64_t bnfs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Invariant 3: one retry on a fresh connection when a pooled one failed fast. */
static int bnfs_run(struct backing_nfs *n, struct bnfs_op *op)
{
	bnfs_detail[0] = '\0';
	for (int attempt = 0;; attempt++) {
		struct bnfs_slot *slot;
		bool fresh;
		int rc = bnfs_acquire(n, &slot, &fresh);
		if (rc != 0)
			return rc;
		uint64_t t0 = bnfs_now_ms();
		rc = op->fn(slot->ctx, op);
		bool quick = bnfs_now_ms() - t0 < n->timeout_ms / 2;
		bnfs_release(n, slot, rc);
		if (rc == 0 || !bnfs_is_transport_error(rc) || fresh || attempt > 0 ||
		    rc == -ETIMEDOUT || !quick)
			return rc;
		log_info("BACKING %s: %s: retrying on a new connection", n->url, op->rel);
	}
}

static int bnfs_op_write(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	bnfs_path(op->rel, path, sizeof(path));
	struct nfsfh *fh = NULL;
	/* invariant 5: a fresh temporary, made exclusively */
	int rc = bnfs_result(ctx, nfs_create(ctx, path, O_RDWR | O_EXCL | O_NOFOLLOW, 0600, &fh));
	if (rc == -EEXIST) { /* our own CREATE, replied to on a connection that was lost */
		struct nfs_stat_64 st;
		rc = bnfs_result(ctx, nfs_lstat64(ctx, path, &st));
		if (rc == 0 && (st.nfs_mode & S_IFMT) != S_IFREG)
			rc = -ELOOP;
		if (rc == 0)
			rc = bnfs_result(ctx, nfs_open(ctx, path, O_RDWR | O_TRUNC | O_NOFOLLOW, &fh));
	}
	if (rc != 0)
		return rc;
	uint64_t step = nfs_get_writemax(ctx);
	if (step == 0 || step > 1024 * 1024)
		step = 1024 * 1024;
	size_t done = 0;
	while (done < op->len) {
		uint64_t want = op->len - done < step ? op->len - done : step;
		int w = nfs_pwrite(ctx, fh, done, want, (const char *)op->wbuf + done);
		if (w < 0) {
			rc = bnfs_result(ctx, w);
			break;
		}
		if (w == 0) { /* a server that accepts nothing would loop forever */
			snprintf(bnfs_detail, sizeof(bnfs_detail), "WRITE at %zu stored 0 bytes", done);
			rc = -EIO;
			break;
		}
		done += (size_t)w;
	}
	if (rc == 0)
		rc = bnfs_result(ctx, nfs_fsync(ctx, fh)); /* COMMIT */
	int crc = bnfs_result(ctx, nfs_close(ctx, fh));
	return rc ? rc : crc;
}

static int bnfs_op_read(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	bnfs_path(op->rel, path, sizeof(path));
	struct nfsfh *fh = NULL;
	int rc = bnfs_result(ctx, nfs_open(ctx, path, O_RDONLY | O_NOFOLLOW, &fh));
	if (rc != 0)
		return rc;
	struct nfs_stat_64 st;
	rc = bnfs_result(ctx, nfs_fstat64(ctx, fh, &st));
	if (rc == 0 && (st.nfs_mode & S_IFMT) == S_IFDIR)
		rc = -EISDIR;
	else if (rc == 0 && (st.nfs_mode & S_IFMT) != S_IFREG)
		rc = -ELOOP; /* never read through a symlink or a special file */
	if (rc == 0 && st.nfs_size > op->cap)
		rc = -EFBIG;
	uint64_t step = nfs_get_readmax(ctx);
	if (step == 0 || step > 1024 * 1024)
		step = 1024 * 1024;
	size_t done = 0;
	while (rc == 0 && done < st.nfs_size) {
		uint64_t want = st.nfs_size - done < step ? st.nfs_size - done : step;
		int r = nfs_pread(ctx, fh, done, want, (char *)op->rbuf + done);
		if (r < 0) {
			rc = bnfs_result(ctx, r);
		} else if (r == 0) { /* shorter than its attributes said */
			snprintf(bnfs_detail, sizeof(bnfs_detail), "end of file at %zu of %llu bytes",
				 done, (unsigned long long)st.nfs_size);
			rc = -EIO;
		} else {
			done += (size_t)r;
		}
	}
	int crc = bnfs_result(ctx, nfs_close(ctx, fh));
	if (rc == 0)
		rc = crc;
	if (rc == 0)
		op->len = done;
	return rc;
}

static int bnfs_op_stat(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	bnfs_path(op->rel, path, sizeof(path));
	struct nfs_stat_64 st;
	int rc = bnfs_result(ctx, nfs_lstat64(ctx, path, &st));
	if (rc == 0 && (st.nfs_mode & S_IFMT) != S_IFREG)
		rc = (st.nfs_mode & S_IFMT) == S_IFLNK ? -ELOOP : -EINVAL;
	if (rc == 0)
		op->size = st.nfs_size;
	return rc;
}

static int bnfs_op_rename(struct nfs_context *ctx, struct bnfs_op *op)
{
	char from[PATH_MAX + 2], to[PATH_MAX + 2];
	bnfs_path(op->rel, from, sizeof(from));
	bnfs_path(op->rel2, to, sizeof(to));
	return bnfs_result(ctx, nfs_rename(ctx, from, to));
}

static int bnfs_op_link(struct nfs_context *ctx, struct bnfs_op *op)
{
	char from[PATH_MAX + 2], to[PATH_MAX + 2];
	bnfs_path(op->rel, from, sizeof(from));
	bnfs_path(op->rel2, to, sizeof(to));
	return bnfs_result(ctx, nfs_link(ctx, from, to));
}

static int bnfs_op_unlink(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	bnfs_path(op->rel, path, sizeof(path));
	return bnfs_result(ctx, nfs_unlink(ctx, path));
}

static int bnfs_op_mkdir(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	bnfs_path(op->rel, path, sizeof(path));
	int rc = bnfs_result(ctx, nfs_mkdir2(ctx, path, 0700));
	if (rc == -EEXIST) { /* made meanwhile: a directory, never a symlink to one */
		struct nfs_stat_64 st;
		rc = bnfs_result(ctx, nfs_lstat64(ctx, path, &st));
		if (rc == 0 && (st.nfs_mode & S_IFMT) != S_IFDIR)
			rc = (st.nfs_mode & S_IFMT) == S_IFLNK ? -ELOOP : -ENOTDIR;
	}
	return rc;
}

static void bnfs_free_names(struct bnfs_op *op)
{
	for (size_t i = 0; i < op->n_names; i++)
		free(op->names[i]);
	free(op->names);
	op->names = NULL;
	op->n_names = 0;
}

/* Collects the names only: list_fn runs after the context is released, so
 * that it may call back into BACKING without needing a second slot. */
static int bnfs_op_list(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	bnfs_path(op->rel, path, sizeof(path));
	struct nfsdir *dir = NULL;
	bnfs_free_names(op); /* from a failed first attempt */
	int rc = bnfs_result(ctx, nfs_opendir(ctx, path, &dir));
	if (rc != 0)
		return rc;
	size_t cap = 0;
	struct nfsdirent *de;
	while ((de = nfs_readdir(ctx, dir)) != NULL) {
		if (!strcmp(de->name, ".") || !strcmp(de->name, ".."))
			continue;
		if (op->n_names == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			char **nn = realloc(op->names, ncap * sizeof(*nn));
			if (!nn) {
				rc = -ENOMEM;
				break;
			}
			op->names = nn;
			cap = ncap;
		}
		if (!(op->names[op->n_names] = strdup(de->name))) {
			rc = -ENOMEM;
			break;
		}
		op->n_names++;
	}
	nfs_closedir(ctx, dir);
	return rc;
}

/* ---- open / close ---- */

/* nfs://host[:port]/path[?args] → nfs://host/path?nfsport=port[&args]
 * (libnfs 4.0 takes the port only as an argument). */
static int bnfs_make_liburl(const char *url, char **out, char *why, size_t whysize)
{
	const char *host = url + 6;
	const char *slash = strchr(host, '/');
	if (!slash || slash == host) {
		snprintf(why, whysize, "expected nfs://server[:port]/export/path");
		return -EINVAL;
	}
	const char *colon = memchr(host, ':', (size_t)(slash - host));
	const char *host_end = colon ? colon : slash;
	long port = 0;
	if (colon) {
		char *end;
		port = strtol(colon + 1, &end, 10);
		if (end != slash || port <= 0 || port > 65535) {
			snprintf(why, whysize, "bad port in the URL");
			return -EINVAL;
		}
	}
	const char *query = strchr(slash, '?');
	size_t path_len = query ? (size_t)(query - slash) : strlen(slash);
	char portarg[32] = "";
	if (port)
		snprintf(portarg, sizeof(portarg), "nfsport=%ld", port);
	const char *args = query ? query + 1 : "";
	if (asprintf(out, "nfs://%.*s%.*s?%s%s%s", (int)(host_end - host), host, (int)path_len,
		     slash, portarg, port && *args ? "&" : "", args) < 0) {
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

int backing_nfs_open(const char *url, unsigned timeout_ms, struct backing_nfs **out, char *why,
		     size_t whysize)
{
	struct backing_nfs *n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(why, whysize, "out of memory");
		return -ENOMEM;
	}
	n->timeout_ms = timeout_ms;
	int rc = (n->url = strdup(url)) ? 0 : -ENOMEM;
	if (rc == 0)
		rc = bnfs_make_liburl(url, &n->liburl, why, whysize);
	if (rc != 0) {
		if (rc == -ENOMEM)
			snprintf(why, whysize, "out of memory");
		free(n->url);
		free(n);
		return rc;
	}
	pthread_mutex_init(&n->lock, NULL);
	pthread_cond_init(&n->slot_freed, NULL);
	/* Mount once now, so that a bad URL or a dead server fails the open. */
	bnfs_detail[0] = '\0';
	rc = bnfs_connect(n, &n->slots[0].ctx);
	if (rc != 0) {
		snprintf(why, whysize, "%s — %s", strerror(-rc), bnfs_detail);
		backing_nfs_close(n);
		return rc;
	}
	*out = n;
	return 0;
}

void backing_nfs_close(struct backing_nfs *n)
{
	if (!n)
		return;
	for (int i = 0; i < BNFS_POOL_SIZE; i++) {
		assert(!n->slots[i].busy);
		bnfs_drop(n, n->slots[i].ctx);
	}
	pthread_cond_destroy(&n->slot_freed);
	pthread_mutex_destroy(&n->lock);
	free(n->liburl);
	free(n->url);
	free(n);
}

/* ---- the calls of backing_internal.h ---- */

int backing_nfs_write_file(struct backing_nfs *n, const char *rel, const void *data, size_t len)
{
	struct bnfs_op op = { .fn = bnfs_op_write, .rel = rel, .wbuf = data, .len = len };
	return bnfs_run(n, &op);
}

int backing_nfs_read_file(struct backing_nfs *n, const char *rel, void *buf, size_t cap,
			  size_t *len)
{
	struct bnfs_op op = { .fn = bnfs_op_read, .rel = rel, .rbuf = buf, .cap = cap };
	int rc = bnfs_run(n, &op);
	if (rc == 0)
		*len = op.len;
	return rc;
}

int backing_nfs_stat(struct backing_nfs *n, const char *rel, uint64_t *size)
{
	struct bnfs_op op = { .fn = bnfs_op_stat, .rel = rel };
	int rc = bnfs_run(n, &op);
	if (rc == 0)
		*size = op.size;
	return rc;
}

int backing_nfs_rename(struct backing_nfs *n, const char *from, const char *to)
{
	struct bnfs_op op = { .fn = bnfs_op_rename, .rel = from, .rel2 = to };
	return bnfs_run(n, &op);
}

int backing_nfs_link(struct backing_nfs *n, const char *from, const char *to)
{
	struct bnfs_op op = { .fn = bnfs_op_link, .rel = from, .rel2 = to };
	return bnfs_run(n, &op);
}

int backing_nfs_unlink(struct backing_nfs *n, const char *rel)
{
	struct bnfs_op op = { .fn = bnfs_op_unlink, .rel = rel };
	return bnfs_run(n, &op);
}

int backing_nfs_mkdir(struct backing_nfs *n, const char *rel)
{
	struct bnfs_op op = { .fn = bnfs_op_mkdir, .rel = rel };
	return bnfs_run(n, &op);
}

int backing_nfs_list(struct backing_nfs *n, const char *reldir, backing_list_fn fn, void *arg)
{
	struct bnfs_op op = { .fn = bnfs_op_list, .rel = reldir };
	int rc = bnfs_run(n, &op);
	for (size_t i = 0; rc == 0 && i < op.n_names; i++)
		rc = fn(arg, op.names[i]);
	bnfs_free_names(&op);
	return rc;
}
