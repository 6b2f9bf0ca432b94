/* backing_nfs — the nfs://server[:port]/export/path backend of backing.h,
 * NFSv3 only (libnfs 4.0's NFSv4 fails writes of 4 KiB and more): libnfs
 * connects and mounts; the objects are read and written by NFSv3 RPCs on
 * file handles (libnfs's raw rpc_nfs3_*_async calls, waited for one at a
 * time), so that an object costs the RPCs it needs and no more:
 *
 *   get     LOOKUP name in its directory's kept handle (the reply carries
 *           the type and size), READs                 (libnfs's nfs_open: a
 *           LOOKUP per path component, ACCESS, then our GETATTR, READs)
 *   range   the same LOOKUP, then READs at the offset of only the bytes asked
 *           (backing.h 4: a pack's member; one READ up to readmax)
 *   put     CREATE tmp/x GUARDED, one WRITE FILE_SYNC (or UNSTABLE WRITEs
 *           and a COMMIT past writemax), RENAME into the kept handle of the
 *           object's directory
 *   stat    LOOKUP;   remove  REMOVE;   mkdir  MKDIR (keeps the handle)
 *   list    libnfs's opendir/readdir (READDIRPLUS), by path: rare
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
 *     timeout (nfs_set_timeout: libnfs applies it per RPC from when it is
 *     queued, raw RPCs included, so it bounds a silence of the server, not a
 *     long transfer); TCP connects are bounded by the SYN retry count
 *     (nfs_set_tcp_syncnt).
 *  3. A context that saw a transport error (timeout, lost or refused
 *     connection) is dropped, so the next call connects afresh; a call that
 *     failed that way on a context reused from the pool, quickly (not by
 *     timing out), is tried once more on a fresh connection, which makes a
 *     server restart invisible to the caller. Every call here is safe to
 *     repeat (a put re-writes its own temporary; unlink of an absent name is
 *     success for the caller).
 *  4. One RPC in flight per call: each is waited for (bnfs_wait) before the
 *     next is sent, and each READ/WRITE asks for at most readmax/writemax
 *     bytes, so when a call returns no callback of libnfs can still point at
 *     its stack frame — except after a broken event loop (nfs_service < 0,
 *     -EIO), when the context is dropped: shut down but not destroyed if RPCs
 *     are still queued (destroying would run their callbacks against stack
 *     frames that are gone): a small leak, counted and logged, instead of
 *     memory corruption.
 *  5. Nothing planted on the export is followed (backing.c invariant 8): a
 *     directory is reached by a LOOKUP per component, each of which must be
 *     a directory (a symlink is -ELOOP, whatever it points to: bnfs_walk);
 *     a temporary is created GUARDED (any entry at its unguessable name, a
 *     symlink included, is EEXIST; a regular file there is taken as our own
 *     CREATE whose reply a lost connection ate, invariant 3), a get or stat
 *     accepts only a regular file (anything else answers by its kind, as
 *     backing.h says for get: the type LOOKUP gave, never read; the
 *     server's own NFS3ERR_INVAL is -EPROTO so that -EINVAL means a special
 *     file), and a directory found by mkdir must be one. Files are created 0600, directories 0700. Only list goes by
 *     libnfs's path API, which resolves symlinks in the directory part
 *     itself, on the server's export, never on this host's filesystems.
 *     docs/DESIGN.md "Trust model".
 *  6. Directory handles are kept (BNFS_DIR_SETS × BNFS_DIR_WAYS, by relpath,
 *     shared by the pool's connections: a handle is the server's, not the
 *     connection's), so that an object's get or put looks up only its last
 *     name: tmp/, chunks/, chunks/ab/, the leaves used last, manifests/….
 *     A kept handle answers as a fresh walk would, or is asked again:
 *     a. a handle names one directory for as long as it lives: a directory
 *        removed (gc or an operator, on any node) gives NFS3ERR_STALE to any
 *        RPC on its handle, never another directory's answer (servers never
 *        reuse a handle for another object: the kernel's NFS client relies on
 *        the same). A stale answer drops every kept handle (those below it
 *        are gone too) and the call is made once more by walks from the
 *        mount's root (bnfs_op_by_handles); a symlink planted where the
 *        directory was is then met by the walk: -ELOOP (5);
 *     b. "absent" (ENOENT) from a get, stat, remove or a rename's source,
 *        reached through a kept handle, is asked again the same way: the
 *        directory may have been renamed away and another made at its name
 *        (ckptfs renames no directory, another node's tool might), and an
 *        absent object must be absent at its name (backing.c 10 reads walk
 *        afresh for the same reason). An absent directory for a put, link
 *        or mkdir is not asked again: the caller makes it (backing.c), in
 *        the worst case inside the renamed-away directory, as backing.c 10d
 *        accepts for a held directory fd;
 *     c. mkdir keeps the handle its reply carries, in place of the one kept
 *        under that name (a directory made again replaces the old one);
 *     d. the set is guarded by dirs_lock, held only to copy a handle in or
 *        out (backing.h 3), never across an RPC.
 *
 * Durability: a put's data is stable on the server before the RENAME: a
 * single WRITE is FILE_SYNC (RFC 1813: data and metadata committed before the
 * reply), several are UNSTABLE and then COMMITted, and the COMMIT's write
 * verifier must equal the WRITEs' (a server that restarted in between may
 * have lost them: -EIO, and the put is made again). No fsync of the
 * directory is needed, nor possible: NFSv3 CREATE, MKDIR, RENAME and REMOVE
 * are synchronous — the server must make the change stable before it replies
 * (RFC 1813, section 3.3).
 *
 * A timed-out RPC reaches the caller as -ETIMEDOUT, a lost connection or a
 * broken event loop as -EIO; the server's own errors map as libnfs maps them
 * (nfsstat3_to_errno), NFS3ERR_STALE and BADHANDLE to -ESTALE. RPCs sent are
 * counted by type (backing_counts.nfs_rpcs; logged at close). */
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
#include <nfsc/libnfs-raw.h>
#include <nfsc/libnfs-raw-nfs.h>

#include "log.h"

#define BNFS_POOL_SIZE 8
#define BNFS_RECONNECTS 3
/* Invariant 6: directory handles kept, 4-way sets by name, least recently
 * used out first. 1024 hold chunks/, its 256 chunks/ab/ and the directories
 * used last beside manifests/… and tmp/. */
#define BNFS_DIR_SETS 256
#define BNFS_DIR_WAYS 4
#define BNFS_DIR_REL 64 /* the longest directory name kept ("chunks/ab/cd" is 12) */

struct bnfs_slot {
	struct nfs_context *ctx; /* NULL: not connected */
	bool busy;
};

/* The NFSv3 procedures this backend sends itself (counted by type). */
enum bnfs_proc {
	BP_LOOKUP,
	BP_GETATTR,
	BP_SETATTR,
	BP_READ,
	BP_WRITE,
	BP_COMMIT,
	BP_CREATE,
	BP_MKDIR,
	BP_REMOVE,
	BP_RENAME,
	BP_LINK,
	BNFS_NPROC
};

struct bnfs_fh {
	uint32_t len;
	char val[NFS3_FHSIZE];
};

struct bnfs_dir {
	uint64_t used; /* dirs_clock at the last use; 0: a free way */
	struct bnfs_fh fh;
	char rel[BNFS_DIR_REL];
};

struct backing_nfs {
	char *url;    /* as given, for log lines */
	char *liburl; /* nfs://server/path?nfsport=P&…, what libnfs parses */
	unsigned timeout_ms;
	pthread_mutex_t lock;
	pthread_cond_t slot_freed;
	struct bnfs_slot slots[BNFS_POOL_SIZE];
	atomic_uint leaked; /* contexts shut down but not destroyed (invariant 4) */
	atomic_ulong rpcs[BNFS_NPROC]; /* sent, by type (backing_nfs_rpcs) */
	atomic_ulong stale;	       /* times the handles were dropped (invariant 6) */
	pthread_mutex_t dirs_lock;     /* invariant 6 */
	uint64_t dirs_clock;
	struct bnfs_dir dirs[BNFS_DIR_SETS][BNFS_DIR_WAYS];
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

/* ---- NFSv3 RPCs, one at a time (invariant 4) ---- */

/* libnfs-private.h's handle and its accessor of the mount's root handle:
 * exported by libnfs 4.0 (and the same through 6.x) but declared in no
 * public header. */
struct nfs_fh {
	int len;
	char *val;
};
const struct nfs_fh *nfs_get_rootfh(struct nfs_context *nfs);

static const char *const bnfs_proc_names[BNFS_NPROC] = {
	[BP_LOOKUP] = "LOOKUP", [BP_GETATTR] = "GETATTR", [BP_SETATTR] = "SETATTR",
	[BP_READ] = "READ",	[BP_WRITE] = "WRITE",	  [BP_COMMIT] = "COMMIT",
	[BP_CREATE] = "CREATE", [BP_MKDIR] = "MKDIR",	  [BP_REMOVE] = "REMOVE",
	[BP_RENAME] = "RENAME", [BP_LINK] = "LINK",
};

/* One RPC and what its callback kept of the reply (which libnfs frees when
 * the callback returns). */
struct bnfs_call {
	enum bnfs_proc proc;
	const char *rel; /* for the detail */
	bool done;
	int rc;
	struct bnfs_fh fh; /* LOOKUP, CREATE, MKDIR */
	bool have_fh, have_attr;
	uint32_t type; /* NF3REG, NF3DIR, NF3LNK, …: when have_attr */
	uint64_t size;
	uint32_t count; /* READ, WRITE */
	uint32_t committed; /* WRITE: how stable the server made it */
	char verf[NFS3_WRITEVERFSIZE]; /* WRITE, COMMIT */
	char *rbuf; /* READ: the data goes here, at most rwant bytes */
	size_t rwant;
};

static nfs_fh3 bnfs_fh3(const struct bnfs_fh *fh)
{
	nfs_fh3 out = { .data = { .data_len = fh->len, .data_val = (char *)fh->val } };
	return out;
}

static int bnfs_nfsstat(struct bnfs_call *c, int st)
{
	if (st == NFS3_OK)
		return 0;
	snprintf(bnfs_detail, sizeof(bnfs_detail), "NFS %s %s: %s", bnfs_proc_names[c->proc], c->rel,
		 nfsstat3_to_str(st));
	if (st == NFS3ERR_STALE || st == NFS3ERR_BADHANDLE)
		return -ESTALE; /* invariant 6: the handle's object is gone */
	return nfsstat3_to_errno(st);
}

static void bnfs_keep_attr(struct bnfs_call *c, const post_op_attr *a)
{
	if (!a->attributes_follow)
		return;
	c->have_attr = true;
	c->type = a->post_op_attr_u.attributes.type;
	c->size = a->post_op_attr_u.attributes.size;
}

static void bnfs_keep_fh(struct bnfs_call *c, const nfs_fh3 *fh)
{
	if (fh->data.data_len == 0 || fh->data.data_len > NFS3_FHSIZE)
		return; /* not a v3 handle: have_fh stays false, the caller looks it up */
	c->fh.len = fh->data.data_len;
	memcpy(c->fh.val, fh->data.data_val, fh->data.data_len);
	c->have_fh = true;
}

static void bnfs_cb(struct rpc_context *rpc, int status, void *data, void *priv)
{
	struct bnfs_call *c = priv;
	(void)rpc;
	c->done = true;
	if (status == RPC_STATUS_ERROR) {
		snprintf(bnfs_detail, sizeof(bnfs_detail), "NFS %s %s: %s", bnfs_proc_names[c->proc],
			 c->rel, data ? (const char *)data : "RPC error");
		c->rc = -EIO;
		return;
	}
	if (status != RPC_STATUS_SUCCESS) { /* a timeout; nothing here cancels */
		snprintf(bnfs_detail, sizeof(bnfs_detail), "NFS %s %s: %s", bnfs_proc_names[c->proc],
			 c->rel, status == RPC_STATUS_TIMEOUT ? "timed out" : "cancelled");
		c->rc = -ETIMEDOUT;
		return;
	}
	switch (c->proc) {
	case BP_LOOKUP: {
		LOOKUP3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) == 0) {
			bnfs_keep_fh(c, &r->LOOKUP3res_u.resok.object);
			bnfs_keep_attr(c, &r->LOOKUP3res_u.resok.obj_attributes);
			if (!c->have_fh) {
				snprintf(bnfs_detail, sizeof(bnfs_detail), "LOOKUP %s: a handle of %u bytes",
					 c->rel, r->LOOKUP3res_u.resok.object.data.data_len);
				c->rc = -EIO;
			}
		}
		break;
	}
	case BP_GETATTR: {
		GETATTR3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) == 0) {
			c->have_attr = true;
			c->type = r->GETATTR3res_u.resok.obj_attributes.type;
			c->size = r->GETATTR3res_u.resok.obj_attributes.size;
		}
		break;
	}
	case BP_SETATTR:
		c->rc = bnfs_nfsstat(c, ((SETATTR3res *)data)->status);
		break;
	case BP_READ: {
		READ3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) != 0)
			break;
		READ3resok *ok = &r->READ3res_u.resok;
		if (ok->count > c->rwant || ok->data.data_len < ok->count) {
			snprintf(bnfs_detail, sizeof(bnfs_detail),
				 "READ %s: %u bytes sent for %zu asked (%u in the reply)", c->rel,
				 ok->count, c->rwant, ok->data.data_len);
			c->rc = -EIO;
			break;
		}
		memcpy(c->rbuf, ok->data.data_val, ok->count);
		c->count = ok->count;
		break;
	}
	case BP_WRITE: {
		WRITE3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) == 0) {
			c->count = r->WRITE3res_u.resok.count;
			c->committed = r->WRITE3res_u.resok.committed;
			memcpy(c->verf, r->WRITE3res_u.resok.verf, sizeof(c->verf));
		}
		break;
	}
	case BP_COMMIT: {
		COMMIT3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) == 0)
			memcpy(c->verf, r->COMMIT3res_u.resok.verf, sizeof(c->verf));
		break;
	}
	case BP_CREATE: {
		CREATE3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) == 0 &&
		    r->CREATE3res_u.resok.obj.handle_follows) {
			bnfs_keep_fh(c, &r->CREATE3res_u.resok.obj.post_op_fh3_u.handle);
			bnfs_keep_attr(c, &r->CREATE3res_u.resok.obj_attributes);
		}
		break;
	}
	case BP_MKDIR: {
		MKDIR3res *r = data;
		if ((c->rc = bnfs_nfsstat(c, r->status)) == 0 &&
		    r->MKDIR3res_u.resok.obj.handle_follows) {
			bnfs_keep_fh(c, &r->MKDIR3res_u.resok.obj.post_op_fh3_u.handle);
			bnfs_keep_attr(c, &r->MKDIR3res_u.resok.obj_attributes);
		}
		break;
	}
	case BP_REMOVE:
		c->rc = bnfs_nfsstat(c, ((REMOVE3res *)data)->status);
		break;
	case BP_RENAME:
		c->rc = bnfs_nfsstat(c, ((RENAME3res *)data)->status);
		break;
	case BP_LINK:
		c->rc = bnfs_nfsstat(c, ((LINK3res *)data)->status);
		break;
	case BNFS_NPROC:
		c->rc = -EINVAL;
		break;
	}
}

/* libnfs's own sync loop (wait_for_nfs_reply), with a signal's EINTR taken
 * as "nothing happened" rather than as a broken socket. */
static int bnfs_wait(struct nfs_context *ctx, struct bnfs_call *c)
{
	while (!c->done) {
		struct pollfd pfd = { .fd = nfs_get_fd(ctx), .events = (short)nfs_which_events(ctx) };
		int r = poll(&pfd, 1, 100);
		int revents = r < 0 ? (errno == EINTR ? 0 : -1) : pfd.revents;
		if (nfs_service(ctx, revents) < 0) {
			snprintf(bnfs_detail, sizeof(bnfs_detail), "NFS %s %s: %s",
				 bnfs_proc_names[c->proc], c->rel, nfs_get_error(ctx));
			return -EIO; /* the RPC may still be queued: the context is dropped (4) */
		}
	}
	return c->rc;
}

/* Sends one RPC of type proc with args and waits for its reply; c may carry
 * rbuf/rwant, the rest of it is set here. */
static int bnfs_rpc(struct backing_nfs *n, struct nfs_context *ctx, enum bnfs_proc proc, void *args,
		    const char *rel, struct bnfs_call *c)
{
	struct rpc_context *rpc = nfs_get_rpc_context(ctx);
	c->proc = proc;
	c->rel = rel;
	c->done = false;
	c->rc = 0;
	c->have_fh = c->have_attr = false;
	int q;
	switch (proc) {
	case BP_LOOKUP: q = rpc_nfs3_lookup_async(rpc, bnfs_cb, args, c); break;
	case BP_GETATTR: q = rpc_nfs3_getattr_async(rpc, bnfs_cb, args, c); break;
	case BP_SETATTR: q = rpc_nfs3_setattr_async(rpc, bnfs_cb, args, c); break;
	case BP_READ: q = rpc_nfs3_read_async(rpc, bnfs_cb, args, c); break;
	case BP_WRITE: q = rpc_nfs3_write_async(rpc, bnfs_cb, args, c); break;
	case BP_COMMIT: q = rpc_nfs3_commit_async(rpc, bnfs_cb, args, c); break;
	case BP_CREATE: q = rpc_nfs3_create_async(rpc, bnfs_cb, args, c); break;
	case BP_MKDIR: q = rpc_nfs3_mkdir_async(rpc, bnfs_cb, args, c); break;
	case BP_REMOVE: q = rpc_nfs3_remove_async(rpc, bnfs_cb, args, c); break;
	case BP_RENAME: q = rpc_nfs3_rename_async(rpc, bnfs_cb, args, c); break;
	case BP_LINK: q = rpc_nfs3_link_async(rpc, bnfs_cb, args, c); break;
	default: return -EINVAL;
	}
	if (q != 0) {
		const char *e = rpc_get_error(rpc);
		snprintf(bnfs_detail, sizeof(bnfs_detail), "NFS %s %s: not sent: %s",
			 bnfs_proc_names[proc], rel, e ? e : "");
		return -EIO;
	}
	atomic_fetch_add(&n->rpcs[proc], 1);
	return bnfs_wait(ctx, c);
}

static uint64_t bnfs_step(uint64_t max)
{
	return max == 0 || max > 1024 * 1024 ? 1024 * 1024 : max;
}

/* ---- directory handles (invariant 6) ---- */

static unsigned bnfs_dir_set(const char *rel)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)rel; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % BNFS_DIR_SETS;
}

static bool bnfs_dir_get(struct backing_nfs *n, const char *rel, struct bnfs_fh *out)
{
	struct bnfs_dir *set = n->dirs[bnfs_dir_set(rel)];
	bool hit = false;
	pthread_mutex_lock(&n->dirs_lock);
	for (int i = 0; i < BNFS_DIR_WAYS; i++) {
		if (set[i].used && !strcmp(set[i].rel, rel)) {
			*out = set[i].fh;
			set[i].used = ++n->dirs_clock;
			hit = true;
			break;
		}
	}
	pthread_mutex_unlock(&n->dirs_lock);
	return hit;
}

/* Keeps rel's handle, in place of the least recently used of its set. */
static void bnfs_dir_put(struct backing_nfs *n, const char *rel, const struct bnfs_fh *fh)
{
	if (!rel[0] || strlen(rel) >= BNFS_DIR_REL)
		return;
	struct bnfs_dir *set = n->dirs[bnfs_dir_set(rel)];
	pthread_mutex_lock(&n->dirs_lock);
	struct bnfs_dir *slot = &set[0];
	for (int i = 0; i < BNFS_DIR_WAYS; i++) {
		if (set[i].used && !strcmp(set[i].rel, rel)) {
			slot = &set[i];
			break;
		}
		if (set[i].used < slot->used)
			slot = &set[i];
	}
	snprintf(slot->rel, sizeof(slot->rel), "%s", rel);
	slot->fh = *fh;
	slot->used = ++n->dirs_clock;
	pthread_mutex_unlock(&n->dirs_lock);
}

/* Invariant 6: a stale handle forgets them all (the directories below a
 * removed one are gone with it). */
static void bnfs_dir_flush(struct backing_nfs *n)
{
	pthread_mutex_lock(&n->dirs_lock);
	for (int s = 0; s < BNFS_DIR_SETS; s++)
		for (int i = 0; i < BNFS_DIR_WAYS; i++)
			n->dirs[s][i].used = 0;
	pthread_mutex_unlock(&n->dirs_lock);
	atomic_fetch_add(&n->stale, 1);
}

static int bnfs_root(struct nfs_context *ctx, struct bnfs_fh *out)
{
	const struct nfs_fh *root = nfs_get_rootfh(ctx);
	if (!root || root->len <= 0 || root->len > NFS3_FHSIZE) {
		snprintf(bnfs_detail, sizeof(bnfs_detail), "no root handle from the mount");
		return -EIO;
	}
	out->len = (uint32_t)root->len;
	memcpy(out->val, root->val, (size_t)root->len);
	return 0;
}

static int bnfs_lookup(struct backing_nfs *n, struct nfs_context *ctx, const struct bnfs_fh *dir,
		       const char *name, const char *rel, struct bnfs_call *c)
{
	LOOKUP3args a = { .what = { .dir = bnfs_fh3(dir), .name = (char *)name } };
	return bnfs_rpc(n, ctx, BP_LOOKUP, &a, rel, c);
}

/* c's attributes, by a GETATTR of c->fh when its reply carried none. */
static int bnfs_need_attr(struct backing_nfs *n, struct nfs_context *ctx, struct bnfs_call *c,
			  const char *rel)
{
	if (c->have_attr)
		return 0;
	GETATTR3args a = { .object = bnfs_fh3(&c->fh) };
	struct bnfs_call g = { 0 };
	int rc = bnfs_rpc(n, ctx, BP_GETATTR, &a, rel, &g);
	if (rc == 0) {
		c->have_attr = true;
		c->type = g.type;
		c->size = g.size;
	}
	return rc;
}

/* The handle of directory dir (a relpath; "" is the root): from the cache
 * unless fresh, else by a LOOKUP per component from the deepest cached
 * ancestor (the root when fresh). Every component must be a directory: a
 * symlink is -ELOOP, never followed (invariant 5). *cached: the cache gave
 * a handle on the way. */
static int bnfs_walk(struct backing_nfs *n, struct nfs_context *ctx, const char *dir, bool fresh,
		     struct bnfs_fh *out, bool *cached)
{
	size_t len = strlen(dir), at = 0;
	char pre[PATH_MAX];
	if (len >= sizeof(pre))
		return -ENAMETOOLONG;
	if (!fresh) {
		for (size_t end = len; end > 0;) {
			if (end < BNFS_DIR_REL) {
				memcpy(pre, dir, end);
				pre[end] = '\0';
				if (bnfs_dir_get(n, pre, out)) {
					at = end;
					*cached = true;
					break;
				}
			}
			const char *slash = memrchr(dir, '/', end);
			end = slash ? (size_t)(slash - dir) : 0;
		}
	}
	int rc = at == 0 ? bnfs_root(ctx, out) : 0;
	while (rc == 0 && at < len) {
		if (dir[at] == '/')
			at++;
		size_t clen = strcspn(dir + at, "/");
		char name[NAME_MAX + 1];
		if (clen > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(name, dir + at, clen);
		name[clen] = '\0';
		at += clen;
		memcpy(pre, dir, at);
		pre[at] = '\0';
		struct bnfs_call c = { 0 };
		rc = bnfs_lookup(n, ctx, out, name, pre, &c);
		if (rc == 0)
			rc = bnfs_need_attr(n, ctx, &c, pre);
		if (rc == 0 && c.type != NF3DIR) {
			snprintf(bnfs_detail, sizeof(bnfs_detail), "%s is not a directory%s", pre,
				 c.type == NF3LNK ? " but a symlink (not followed)" : "");
			rc = c.type == NF3LNK ? -ELOOP : -ENOTDIR;
		}
		if (rc == 0) {
			*out = c.fh;
			bnfs_dir_put(n, pre, out);
		}
	}
	return rc;
}

/* rel's directory (into dir) and last name. */
static const char *bnfs_split(const char *rel, char *dir, size_t size)
{
	const char *slash = strrchr(rel, '/');
	size_t dlen = slash ? (size_t)(slash - rel) : 0;
	if (dlen >= size)
		dlen = size - 1; /* cannot happen: backing.c bounds relpaths below PATH_MAX */
	memcpy(dir, rel, dlen);
	dir[dlen] = '\0';
	return slash ? slash + 1 : rel;
}

/* ---- operations, each run through bnfs_run ---- */

struct bnfs_op {
	int (*fn)(struct nfs_context *ctx, struct bnfs_op *op);
	/* the op by handles, once: fresh = no cached handle used; *cached: an
	 * absent answer came through one (invariant 6) */
	int (*once)(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached);
	struct backing_nfs *n;
	const char *rel, *rel2;
	const void *wbuf;
	void *rbuf;
	size_t len, cap;
	uint64_t off; /* read_range: where the bytes asked start */
	uint64_t size;
	backing_list_fn list_fn;
	void *list_arg;
	char **names; /* list: the names, handed to list_fn after release */
	size_t n_names;
};

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

/* Invariant 6: an op that met a stale handle, or that was told "absent"
 * through a cached one, is made once more by walks from the root. */
static int bnfs_op_by_handles(struct nfs_context *ctx, struct bnfs_op *op)
{
	bool cached = false;
	int rc = op->once(ctx, op, false, &cached);
	if (rc == -ESTALE) {
		log_info("BACKING %s: %s: a directory handle went stale (%s); looking the path up "
			 "again", op->n->url, op->rel, bnfs_detail);
		bnfs_dir_flush(op->n);
	} else if (rc != -ENOENT || !cached) {
		return rc;
	}
	cached = false;
	return op->once(ctx, op, true, &cached);
}

static int bnfs_once_write(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	struct backing_nfs *n = op->n;
	char dir[PATH_MAX];
	const char *name = bnfs_split(op->rel, dir, sizeof(dir));
	struct bnfs_fh dfh;
	bool ignored = false; /* absent tmp/: the caller makes it (backing.c) */
	int rc = bnfs_walk(n, ctx, dir, fresh, &dfh, &ignored);
	(void)cached;
	if (rc != 0)
		return rc;
	/* invariant 5: a fresh temporary, made exclusively, private */
	CREATE3args ca = { .where = { .dir = bnfs_fh3(&dfh), .name = (char *)name },
			   .how = { .mode = GUARDED } };
	ca.how.createhow3_u.obj_attributes.mode.set_it = 1;
	ca.how.createhow3_u.obj_attributes.mode.set_mode3_u.mode = 0600;
	struct bnfs_call f = { 0 };
	rc = bnfs_rpc(n, ctx, BP_CREATE, &ca, op->rel, &f);
	if (rc == -EEXIST || (rc == 0 && !f.have_fh)) {
		/* EEXIST: our own CREATE, replied to on a connection that was lost
		 * (invariant 3) if a regular file; emptied, then written again */
		bool again = rc == -EEXIST;
		rc = bnfs_lookup(n, ctx, &dfh, name, op->rel, &f);
		if (rc == 0)
			rc = bnfs_need_attr(n, ctx, &f, op->rel);
		if (rc == 0 && f.type != NF3REG)
			rc = -ELOOP;
		if (rc == 0 && again) {
			SETATTR3args sa = { .object = bnfs_fh3(&f.fh) };
			sa.new_attributes.size.set_it = 1;
			sa.new_attributes.size.set_size3_u.size = 0;
			struct bnfs_call s = { 0 };
			rc = bnfs_rpc(n, ctx, BP_SETATTR, &sa, op->rel, &s);
		}
	}
	if (rc != 0)
		return rc;
	/* One WRITE: FILE_SYNC, stable when it returns (no COMMIT). More:
	 * UNSTABLE, then one COMMIT, whose verifier must be the WRITEs' (a
	 * server restarted in between may have lost them). */
	uint64_t step = bnfs_step(nfs_get_writemax(ctx));
	bool one = op->len <= step, need_commit = false;
	char verf[NFS3_WRITEVERFSIZE];
	size_t done = 0;
	while (done < op->len) {
		uint64_t want = op->len - done < step ? op->len - done : step;
		WRITE3args wa = { .file = bnfs_fh3(&f.fh),
				  .offset = done,
				  .count = (count3)want,
				  .stable = one ? FILE_SYNC : UNSTABLE,
				  .data = { .data_len = (u_int)want,
					    .data_val = (char *)op->wbuf + done } };
		struct bnfs_call w = { 0 };
		rc = bnfs_rpc(n, ctx, BP_WRITE, &wa, op->rel, &w);
		if (rc != 0)
			return rc;
		if (w.count == 0 || w.count > want) { /* 0: a server storing nothing would loop */
			snprintf(bnfs_detail, sizeof(bnfs_detail), "WRITE %s at %zu stored %u of %llu bytes",
				 op->rel, done, w.count, (unsigned long long)want);
			return -EIO;
		}
		if (w.committed != FILE_SYNC) {
			if (need_commit && memcmp(verf, w.verf, sizeof(verf)) != 0) {
				snprintf(bnfs_detail, sizeof(bnfs_detail),
					 "WRITE %s: the server restarted while it was written", op->rel);
				return -EIO;
			}
			memcpy(verf, w.verf, sizeof(verf));
			need_commit = true;
		}
		done += w.count;
	}
	if (need_commit) {
		COMMIT3args ma = { .file = bnfs_fh3(&f.fh) };
		struct bnfs_call m = { 0 };
		rc = bnfs_rpc(n, ctx, BP_COMMIT, &ma, op->rel, &m);
		if (rc == 0 && memcmp(verf, m.verf, sizeof(verf)) != 0) {
			snprintf(bnfs_detail, sizeof(bnfs_detail),
				 "COMMIT %s: the server restarted after the WRITEs", op->rel);
			rc = -EIO;
		}
	}
	return rc;
}

/* rel's handle and attributes: a regular file's, never a symlink's. */
static int bnfs_lookup_file(struct nfs_context *ctx, struct bnfs_op *op, const char *rel,
			    bool fresh, bool *cached, struct bnfs_call *c)
{
	char dir[PATH_MAX];
	const char *name = bnfs_split(rel, dir, sizeof(dir));
	struct bnfs_fh dfh;
	int rc = bnfs_walk(op->n, ctx, dir, fresh, &dfh, cached);
	if (rc == 0)
		rc = bnfs_lookup(op->n, ctx, &dfh, name, rel, c);
	if (rc == 0)
		rc = bnfs_need_attr(op->n, ctx, c, rel);
	if (rc == -EINVAL)
		return -EPROTO; /* the server's NFS3ERR_INVAL: not a special file (backing.h) */
	if (rc == 0 && c->type == NF3DIR)
		rc = -EISDIR;
	else if (rc == 0 && c->type != NF3REG)
		rc = c->type == NF3LNK ? -ELOOP : -EINVAL; /* never read through a symlink */
	if (rc == -EISDIR || rc == -EINVAL)
		snprintf(bnfs_detail, sizeof(bnfs_detail), "%s is not a regular file (a %s)", rel,
			 c->type == NF3DIR ? "directory" : c->type == NF3FIFO ? "FIFO"
			 : c->type == NF3SOCK ? "socket" : "device");
	else if (rc == -ELOOP && c->type == NF3LNK)
		snprintf(bnfs_detail, sizeof(bnfs_detail), "%s is a symlink (not followed)", rel);
	return rc;
}

static int bnfs_once_read(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	struct bnfs_call c = { 0 };
	int rc = bnfs_lookup_file(ctx, op, op->rel, fresh, cached, &c);
	if (rc != 0) /* a special file (-EINVAL) or a symlink (-ELOOP) is not read either */
		return rc;
	if (c.size > op->cap)
		return -EFBIG;
	uint64_t step = bnfs_step(nfs_get_readmax(ctx));
	size_t done = 0;
	while (done < c.size) {
		uint64_t want = c.size - done < step ? c.size - done : step;
		READ3args ra = { .file = bnfs_fh3(&c.fh), .offset = done, .count = (count3)want };
		struct bnfs_call r = { .rbuf = (char *)op->rbuf + done, .rwant = want };
		rc = bnfs_rpc(op->n, ctx, BP_READ, &ra, op->rel, &r);
		if (rc != 0) /* the server's NFS3ERR_INVAL: no special file (backing.h) */
			return rc == -EINVAL ? -EPROTO : rc;
		if (r.count == 0) { /* shorter than its attributes said */
			snprintf(bnfs_detail, sizeof(bnfs_detail), "end of file at %zu of %llu bytes",
				 done, (unsigned long long)c.size);
			return -EIO;
		}
		done += r.count;
	}
	op->len = done;
	return 0;
}

/* backing.h 4: exactly op->len bytes at op->off, by READs at the offset; a
 * file that ends before them (by its attributes, or a READ at its end) is
 * -ERANGE. */
static int bnfs_once_read_range(struct nfs_context *ctx, struct bnfs_op *op, bool fresh,
				bool *cached)
{
	struct bnfs_call c = { 0 };
	int rc = bnfs_lookup_file(ctx, op, op->rel, fresh, cached, &c);
	if (rc != 0) /* a special file (-EINVAL) or a symlink (-ELOOP) is not read either */
		return rc;
	if (op->len > c.size || op->off > c.size - op->len) {
		snprintf(bnfs_detail, sizeof(bnfs_detail), "%s is %llu bytes long", op->rel,
			 (unsigned long long)c.size);
		return -ERANGE;
	}
	uint64_t step = bnfs_step(nfs_get_readmax(ctx));
	size_t done = 0;
	while (done < op->len) {
		uint64_t want = op->len - done < step ? op->len - done : step;
		READ3args ra = { .file = bnfs_fh3(&c.fh), .offset = op->off + done,
				 .count = (count3)want };
		struct bnfs_call r = { .rbuf = (char *)op->rbuf + done, .rwant = want };
		rc = bnfs_rpc(op->n, ctx, BP_READ, &ra, op->rel, &r);
		if (rc != 0) /* the server's NFS3ERR_INVAL: no special file (backing.h) */
			return rc == -EINVAL ? -EPROTO : rc;
		if (r.count == 0) { /* cut since its attributes were sent */
			snprintf(bnfs_detail, sizeof(bnfs_detail), "%s ends at %llu",
				 op->rel, (unsigned long long)(op->off + done));
			return -ERANGE;
		}
		done += r.count;
	}
	return 0;
}

static int bnfs_once_stat_kind(struct nfs_context *ctx, struct bnfs_op *op, bool fresh,
			       bool *cached)
{
	struct bnfs_call c = { 0 };
	int rc = bnfs_lookup_file(ctx, op, op->rel, fresh, cached, &c);
	if (rc == 0)
		op->size = c.size;
	return rc;
}

static int bnfs_once_stat(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	int rc = bnfs_once_stat_kind(ctx, op, fresh, cached);
	return rc == -EISDIR ? -EINVAL : rc;
}

static int bnfs_once_rename(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	char fdir[PATH_MAX], tdir[PATH_MAX];
	const char *fname = bnfs_split(op->rel, fdir, sizeof(fdir));
	const char *tname = bnfs_split(op->rel2, tdir, sizeof(tdir));
	struct bnfs_fh ffh, tfh;
	bool ignored = false; /* `to`'s directory absent: the caller makes it */
	int rc = bnfs_walk(op->n, ctx, fdir, fresh, &ffh, cached);
	if (rc == 0 && (rc = bnfs_walk(op->n, ctx, tdir, fresh, &tfh, &ignored)) == -ENOENT)
		*cached = false; /* the answer is about `to`'s directory, not `from` */
	if (rc != 0)
		return rc;
	RENAME3args a = { .from = { .dir = bnfs_fh3(&ffh), .name = (char *)fname },
			  .to = { .dir = bnfs_fh3(&tfh), .name = (char *)tname } };
	struct bnfs_call c = { 0 };
	return bnfs_rpc(op->n, ctx, BP_RENAME, &a, op->rel, &c);
}

static int bnfs_once_link(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	struct bnfs_call f = { 0 };
	int rc = bnfs_lookup_file(ctx, op, op->rel, fresh, cached, &f);
	char tdir[PATH_MAX];
	const char *tname = bnfs_split(op->rel2, tdir, sizeof(tdir));
	struct bnfs_fh tfh;
	bool ignored = false;
	if (rc == 0 && (rc = bnfs_walk(op->n, ctx, tdir, fresh, &tfh, &ignored)) == -ENOENT)
		*cached = false; /* the answer is about `to`'s directory, not `from` */
	if (rc != 0)
		return rc;
	LINK3args a = { .file = bnfs_fh3(&f.fh),
			.link = { .dir = bnfs_fh3(&tfh), .name = (char *)tname } };
	struct bnfs_call c = { 0 };
	return bnfs_rpc(op->n, ctx, BP_LINK, &a, op->rel2, &c);
}

static int bnfs_once_unlink(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	char dir[PATH_MAX];
	const char *name = bnfs_split(op->rel, dir, sizeof(dir));
	struct bnfs_fh dfh;
	int rc = bnfs_walk(op->n, ctx, dir, fresh, &dfh, cached);
	if (rc != 0)
		return rc;
	REMOVE3args a = { .object = { .dir = bnfs_fh3(&dfh), .name = (char *)name } };
	struct bnfs_call c = { 0 };
	return bnfs_rpc(op->n, ctx, BP_REMOVE, &a, op->rel, &c);
}

static int bnfs_once_mkdir(struct nfs_context *ctx, struct bnfs_op *op, bool fresh, bool *cached)
{
	char dir[PATH_MAX];
	const char *name = bnfs_split(op->rel, dir, sizeof(dir));
	struct bnfs_fh pfh;
	bool ignored = false; /* an absent parent: the caller makes it first */
	int rc = bnfs_walk(op->n, ctx, dir, fresh, &pfh, &ignored);
	(void)cached;
	if (rc != 0)
		return rc;
	MKDIR3args a = { .where = { .dir = bnfs_fh3(&pfh), .name = (char *)name } };
	a.attributes.mode.set_it = 1;
	a.attributes.mode.set_mode3_u.mode = 0700;
	struct bnfs_call c = { 0 };
	rc = bnfs_rpc(op->n, ctx, BP_MKDIR, &a, op->rel, &c);
	if (rc == -EEXIST || (rc == 0 && !c.have_fh)) {
		/* made meanwhile: a directory, never a symlink to one */
		rc = bnfs_lookup(op->n, ctx, &pfh, name, op->rel, &c);
		if (rc == 0)
			rc = bnfs_need_attr(op->n, ctx, &c, op->rel);
		if (rc == 0 && c.type != NF3DIR)
			rc = c.type == NF3LNK ? -ELOOP : -ENOTDIR;
	}
	if (rc == 0) /* invariant 6: what was kept under this name is replaced */
		bnfs_dir_put(op->n, op->rel, &c.fh);
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
 * that it may call back into BACKING without needing a second slot. By
 * libnfs's path API (READDIRPLUS): lists are rare, and no handle is kept. */
static int bnfs_op_list(struct nfs_context *ctx, struct bnfs_op *op)
{
	char path[PATH_MAX + 2];
	snprintf(path, sizeof(path), "/%s", op->rel);
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
	pthread_mutex_init(&n->dirs_lock, NULL);
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
	char line[512] = "";
	size_t at = 0;
	uint64_t total = 0;
	for (int i = 0; i < BNFS_NPROC; i++) {
		unsigned long k = atomic_load(&n->rpcs[i]);
		total += k;
		if (k && at < sizeof(line))
			at += (size_t)snprintf(line + at, sizeof(line) - at, " %s %lu",
					       bnfs_proc_names[i], k);
	}
	if (total)
		log_info("BACKING %s: %llu NFS RPCs sent (list's not counted):%s; directory handles "
			 "dropped as stale %lu times", n->url, (unsigned long long)total, line,
			 (unsigned long)atomic_load(&n->stale));
	pthread_mutex_destroy(&n->dirs_lock);
	pthread_cond_destroy(&n->slot_freed);
	pthread_mutex_destroy(&n->lock);
	free(n->liburl);
	free(n->url);
	free(n);
}

/* ---- the calls of backing_internal.h ---- */

int backing_nfs_write_file(struct backing_nfs *n, const char *rel, const void *data, size_t len)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_write, .n = n, .rel = rel, .wbuf = data, .len = len };
	return bnfs_run(n, &op);
}

int backing_nfs_read_file(struct backing_nfs *n, const char *rel, void *buf, size_t cap,
			  size_t *len)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_read, .n = n, .rel = rel, .rbuf = buf, .cap = cap };
	int rc = bnfs_run(n, &op);
	if (rc == 0)
		*len = op.len;
	return rc;
}

int backing_nfs_read_range(struct backing_nfs *n, const char *rel, uint64_t off, size_t len,
			   void *buf)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_read_range, .n = n,
			      .rel = rel, .rbuf = buf, .len = len, .off = off };
	return bnfs_run(n, &op);
}

int backing_nfs_stat(struct backing_nfs *n, const char *rel, uint64_t *size)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_stat, .n = n, .rel = rel };
	int rc = bnfs_run(n, &op);
	if (rc == 0)
		*size = op.size;
	return rc;
}

int backing_nfs_stat_kind(struct backing_nfs *n, const char *rel, uint64_t *size)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_stat_kind, .n = n,
			      .rel = rel };
	int rc = bnfs_run(n, &op);
	if (rc == 0)
		*size = op.size;
	return rc;
}

int backing_nfs_rename(struct backing_nfs *n, const char *from, const char *to)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_rename, .n = n, .rel = from, .rel2 = to };
	return bnfs_run(n, &op);
}

int backing_nfs_link(struct backing_nfs *n, const char *from, const char *to)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_link, .n = n, .rel = from, .rel2 = to };
	return bnfs_run(n, &op);
}

int backing_nfs_unlink(struct backing_nfs *n, const char *rel)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_unlink, .n = n, .rel = rel };
	return bnfs_run(n, &op);
}

int backing_nfs_mkdir(struct backing_nfs *n, const char *rel)
{
	struct bnfs_op op = { .fn = bnfs_op_by_handles, .once = bnfs_once_mkdir, .n = n, .rel = rel };
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

uint64_t backing_nfs_rpcs(struct backing_nfs *n)
{
	uint64_t total = 0;
	for (int i = 0; i < BNFS_NPROC; i++)
		total += atomic_load(&n->rpcs[i]);
	return total;
}
