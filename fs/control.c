/* control — the daemon's control channel (protocol and rules in control.h).
 *
 * One thread: poll on the listening socket and a stop pipe, accept, check the
 * peer, read one request line, run it through the module that owns the
 * change (gen.c, the catalog, the store), write the answer, close. Requests
 * are served one at a time; a slow client is cut off by a receive timeout.
 * The verbs only a node of a shared catalog answers (gen, list, show,
 * check, stats' catalog counts) are control_shared.c's; the lines of an
 * answer are sent with control_proto.h's control_proto_send. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin_query.h"
#include "backing.h"
#include "cache.h"
#include "cachedir.h"
#include "claim.h"
#include "control.h"
#include "control_shared.h"
#include "generation.h"
#include "log.h"
#include "pg.h"
#include "upload.h"
#include "reader.h"
#include "recent.h"
#include "storesmall.h"
#include "uploader.h"
#include "wbuf.h"

#define CONTROL_RECV_TIMEOUT_S 5
#define CONTROL_MAX_ARGS 8

struct control {
	struct control_deps d;
	struct aq *aq;
	int listen_fd;
	int stop_pipe[2];
	pthread_t thread;
	uint64_t cache_bound, dirty_bound; /* in force (control_note_bounds) */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* ---- answering ---- */

static void control_progress(void *arg, uint64_t done, uint64_t total)
{
	control_proto_send(*(int *)arg, "progress %" PRIu64 " %" PRIu64, done, total);
}

/* ---- verbs ---- */

/* A generation that is OPEN, HELD or COMMITTED (the ones a verb may change). */
static int control_live_gen(struct control *c, int fd, const char *arg, struct cat_gen *gen)
{
	uint64_t id;
	if (control_proto_parse_id(arg, &id) != 0)
		return control_proto_error(fd, EINVAL, "expected a generation id");
	int rc = cat_gen_get_brief(c->d.cat, id, gen);
	if (rc == -ENOENT || (rc == 0 && gen->state != GEN_OPEN && gen->state != GEN_COMMITTED &&
			      gen->state != GEN_HELD))
		return control_proto_error(fd, ENOENT, "no such live generation");
	if (rc != 0)
		return control_proto_error(fd, -rc, "catalog error");
	return 0;
}

struct control_gen_list {
	struct control *c;
	int fd;
};

static void control_hello(struct control *c, int fd)
{
	control_proto_send(fd, "data pid %ld", (long)getpid());
	control_proto_send(fd, "data uid %ld", (long)getuid());
	control_proto_send(fd, "data mountpoint %s", c->d.mountpoint);
	control_proto_send(fd, "data cache %s", c->d.cache_dir);
	control_proto_send(fd, "data backing %s", c->d.backing_spec);
	control_proto_send(fd, "data gen_pattern %s", c->d.gen_pattern);
	control_proto_send(fd, "data protocol 1");
	if (cat_is_shared(c->d.cat))
		control_proto_send(fd, "data shared 1");
	control_proto_send(fd, "ok");
}

/* One generation's state and durability, as the daemon's catalog sees
 * them (PostgreSQL's in shared mode): "data gen ID STATE DURABLE NAME";
 * with bytes, also "data bytes ID TOTAL LEFT" (cat_gen_upload_bytes: wait's
 * progress in bytes) and "data version ID VERSION" (wait's look for the
 * durable manifest on BACKING, fs/main.c M3; an older admin ignores it). */
static int control_gen_line(struct control *c, int fd, const struct cat_gen *g, bool bytes)
{
	bool durable = false;
	uint64_t total = 0, left = 0;
	int rc = g->state == GEN_COMMITTED ? cat_gen_durable(c->d.cat, g->id, &durable) : 0;
	if (rc == 0 && bytes)
		rc = cat_gen_upload_bytes(c->d.cat, g->id, &total, &left);
	if (rc == 0 && bytes)
		control_proto_send(fd, "data bytes %" PRIu64 " %" PRIu64 " %" PRIu64, g->id, total,
				   durable ? 0 : left);
	if (rc == 0 && bytes)
		control_proto_send(fd, "data version %" PRIu64 " %" PRIu32, g->id, g->version);
	if (rc == 0)
		control_proto_send(fd, "data gen %" PRIu64 " %s %d %s", g->id, cat_gen_state_name(g->state),
				   durable ? 1 : 0, g->name);
	return rc;
}

static int control_gen_line_cb(void *arg, const struct cat_gen *g)
{
	struct control_gen_list *l = arg;
	int rc = control_gen_line(l->c, l->fd, g, false);
	return rc < 0 ? rc : 0;
}

/* durable [GEN_ID]: for ckptfs-admin wait on a node of a shared catalog,
 * whose local catalog file holds no generations. */
static void control_durable(struct control *c, int fd, char **argv, int argc)
{
	int rc;
	if (argc > 1) {
		struct cat_gen gen;
		if (control_live_gen(c, fd, argv[1], &gen) != 0)
			return;
		if (gen.state == GEN_HELD)
			control_proto_send(fd, "data held %s", gen.held);
		rc = control_gen_line(c, fd, &gen, true);
	} else {
		struct control_gen_list l = { c, fd };
		rc = cat_gen_list_brief(c->d.cat, 0, false, control_gen_line_cb, &l);
	}
	control_proto_done(fd, rc);
}

/* reput HASH: BACKING's copy of HASH was found damaged by verify; put it
 * again from the cache's copy if that one is good (upload.h U13). */
static void control_reput(struct control *c, int fd, char **argv, int argc)
{
	uint8_t hash[HASH_LEN];
	if (argc != 2 || hash_from_hex(argv[1], hash) != 0) {
		control_proto_error(fd, EINVAL, "usage: reput HASH (64 hex digits)");
		return;
	}
	if (!c->d.cache || !c->d.uploader) {
		control_proto_error(fd, EOPNOTSUPP, "this daemon has no write-back cache");
		return;
	}
	int rc = cache_reput(c->d.cache, hash);
	if (rc == 0)
		uploader_kick(c->d.uploader);
	if (rc == -EOPNOTSUPP)
		control_proto_error(fd, EOPNOTSUPP, "not on a node of a shared catalog (-o meta=)");
	else if (rc == -EIO)
		control_proto_error(fd, EIO, "the cache's copy is not good either");
	else if (rc == -ENOENT)
		control_proto_error(fd, ENOENT, "not both in the cache and on BACKING");
	else
		control_proto_done(fd, rc);
}

/* A change the catalog refused, named for the admin (control_proto.h). */
static void control_change_error(int fd, int rc, const char *verb)
{
	char what[160];
	if (rc == -ESTALE)
		rc = -EROFS; /* the catalog's word for a swept lease (L2): the mount is read-only */
	if (rc == -EROFS)
		snprintf(what, sizeof(what), "%s refused: this node is fenced (another node swept its"
			 " lease): read-only until it is mounted again", verb);
	else if (rc == -EBUSY)
		snprintf(what, sizeof(what), "%s refused: busy (files of it are open for writing, or"
			 " it is pinned)", verb);
	else if (rc == -ENOENT)
		snprintf(what, sizeof(what), "%s: no such generation (it ended meanwhile)", verb);
	else if (rc == -ENODATA)
		snprintf(what, sizeof(what), "%s refused: it is lost (chunks of it died with their"
			 " node)", verb);
	else
		snprintf(what, sizeof(what), "%s failed (see the daemon's log)", verb);
	control_proto_error(fd, -rc, what);
}

/* claim.h invariant 9: a daemon that lost BACKING's claim changes nothing;
 * true (answered) then. */
static bool control_fenced(struct control *c, int fd, const char *verb)
{
	if (!claim_lost(c->d.claim))
		return false;
	char what[160];
	snprintf(what, sizeof(what), "%s refused: this daemon lost BACKING's claim (see its log): "
		 "read-only until it is unmounted", verb);
	control_proto_error(fd, EROFS, what);
	return true;
}

static void control_commit(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen gen;
	if (control_fenced(c, fd, "commit"))
		return;
	if (control_live_gen(c, fd, argc > 1 ? argv[1] : NULL, &gen) != 0)
		return;
	if (!c->d.gen_commit) {
		control_proto_error(fd, ENOSYS, "commit is not available in this daemon");
		return;
	}
	int rc = c->d.gen_commit(c->d.gen, gen.id, "admin");
	if (rc != 0) {
		control_change_error(fd, rc, "commit");
		return;
	}
	/* a commit waits for write handles still open in the generation */
	if (cat_gen_get_brief(c->d.cat, gen.id, &gen) == 0)
		control_proto_send(fd, "data state %s", cat_gen_state_name(gen.state));
	control_proto_send(fd, "ok");
}

static void control_pin(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen gen;
	if (control_fenced(c, fd, "pin"))
		return;
	if (control_live_gen(c, fd, argc > 1 ? argv[1] : NULL, &gen) != 0)
		return;
	if (argc < 3 || (strcmp(argv[2], "0") != 0 && strcmp(argv[2], "1") != 0)) {
		control_proto_error(fd, EINVAL, "expected pin GEN_ID 0|1");
		return;
	}
	if (!c->d.gen_pin) {
		control_proto_error(fd, ENOSYS, "pin is not available in this daemon");
		return;
	}
	int rc = c->d.gen_pin(c->d.gen, gen.id, argv[2][0] == '1');
	if (rc != 0) {
		control_change_error(fd, rc, "pin");
		return;
	}
	control_proto_send(fd, "data pinned %c", argv[2][0]);
	control_proto_send(fd, "ok");
}

static void control_rm(struct control *c, int fd, char **argv, int argc)
{
	struct cat_gen gen;
	if (control_fenced(c, fd, "rm"))
		return;
	if (control_live_gen(c, fd, argc > 1 ? argv[1] : NULL, &gen) != 0)
		return;
	bool force = argc > 2 && strcmp(argv[2], "force") == 0;
	if (gen.state == GEN_OPEN && !force) {
		control_proto_error(fd, EBUSY, "the generation is open (still being written): use --force");
		return;
	}
	if (!c->d.gen_remove) {
		control_proto_error(fd, ENOSYS, "rm is not available in this daemon");
		return;
	}
	/* an open rewrite (a backup: G3) is aborted, so its last version is put
	 * back COMMITTED or HELD under the name: that is the rm's outcome */
	bool restores = gen.state == GEN_OPEN && gen.backup_root != 0;
	int rc = c->d.gen_remove(c->d.gen, gen.id, force);
	if (rc == 0 && cat_gen_get_brief(c->d.cat, gen.id, &gen) == 0 &&
	    (gen.state == GEN_OPEN ||
	     (!restores && (gen.state == GEN_COMMITTED || gen.state == GEN_HELD))))
		rc = -EIO; /* gen_end logged why */
	if (rc != 0) {
		control_change_error(fd, rc, "rm");
		return;
	}
	control_proto_send(fd, "data state %s", cat_gen_state_name(gen.state));
	control_proto_send(fd, "ok");
}

static void control_flush_released(struct control *c)
{
	if (c->d.nodes_flush)
		c->d.nodes_flush(c->d.nodes);
}

/* The rows of the cache's small.db (none without one), walked as its files
 * are and added to the cache's counts in *r. */
static int control_gc_small(struct control *c, bool dry, int *fd, struct aq_gc_result *r)
{
	struct storesmall *ss;
	int rc = storesmall_open(c->d.cache_dir, false, &ss);
	if (rc != 0)
		return rc == -ENOENT ? 0 : rc;
	const struct aq_objects rows = aq_objects_small(ss);
	struct aq_gc_result rr;
	rc = aq_gc_walk(c->aq, &rows, dry, control_progress, fd, &rr);
	storesmall_close(ss);
	if (rc == 0)
		aq_gc_result_add(r, &rr);
	return rc;
}

/* gc dry|run: the cache's objects (files and small.db's rows), then
 * BACKING's. On a node of a shared catalog the local catalog names only
 * what this node holds: BACKING's objects are the cluster's, removed by its
 * reclaim duty alone (docs/MULTINODE.md "Reclaim"), so that side is left
 * (answered "data backing_skipped REASON"). */
static void control_gc(struct control *c, int fd, char **argv, int argc)
{
	bool dry = argc > 1 && strcmp(argv[1], "dry") == 0;
	if (argc < 2 || (!dry && strcmp(argv[1], "run") != 0)) {
		control_proto_error(fd, EINVAL, "expected gc dry|run");
		return;
	}
	if (!dry && control_fenced(c, fd, "gc"))
		return;
	if (!dry && !claim_may_write(c->d.claim)) { /* unsure (claim.h 9): nothing removed now */
		control_proto_error(fd, EAGAIN, "gc refused: this daemon could not renew BACKING's "
				    "claim lately (see its log); try again once it has");
		return;
	}
	bool shared = cat_is_shared(c->d.cat);
	struct aq_named *named = NULL;
	char err[512];
	/* admin_query.h 3: before anything is removed, what BACKING's manifests
	 * name; one that cannot be read stops gc here, nothing removed */
	int rc = shared ? 0 : aq_named_load(c->d.backing, &named, err, sizeof(err));
	if (rc != 0) {
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s; %s", err, AQ_NAMED_ADVICE);
		log_error("gc: %s", msg);
		control_proto_error(fd, -rc, msg);
		return;
	}
	const struct aq_objects sides[2] = { aq_objects_dir(c->d.cache_dir),
					     aq_objects_backing(c->d.backing, named, c->d.claim) };
	struct aq_gc_result r[2];
	memset(r, 0, sizeof(r));
	control_flush_released(c); /* objects of released inodes go now, not as orphans */
	for (int i = 0; i < (shared ? 1 : 2) && rc == 0; i++) {
		rc = aq_gc_walk(c->aq, &sides[i], dry, control_progress, &fd, &r[i]);
		if (rc == 0 && i == 0)
			rc = control_gc_small(c, dry, &fd, &r[0]);
		if (rc != 0) {
			control_proto_error(fd, -rc,
					    rc == -EROFS && i ? "gc of BACKING stopped: this daemon is no longer "
								"sure of BACKING's claim (see its log); what "
								"it removed before stays removed"
					    : i		       ? "gc of BACKING stopped"
								: "gc of the cache stopped");
			break;
		}
		log_info("gc%s of the %s: %" PRIu64 " objects, %" PRIu64 " orphans (%" PRIu64
			 " bytes), %" PRIu64 " removed, %" PRIu64 " failed, %" PRIu64
			 " kept as named by a manifest",
			 dry ? " (dry run)" : "", sides[i].where, r[i].objects, r[i].orphans,
			 r[i].orphan_bytes, r[i].removed, r[i].failed, r[i].manifest_kept);
	}
	aq_named_free(named);
	if (rc != 0)
		return;
	for (int i = 0; i < 2; i++)
		control_proto_send(fd, "data %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
				   " %" PRIu64 " %" PRIu64, i ? "backing" : "cache", r[i].objects,
				   r[i].orphans, r[i].orphan_bytes, r[i].removed, r[i].freed_bytes,
				   r[i].failed, r[i].manifest_kept);
	if (shared)
		control_proto_send(fd, "data backing_skipped a node of a shared catalog leaves BACKING's"
				   " objects to the cluster's reclaim duty");
	control_proto_send(fd, "ok");
}

/* The cache's bounds in force, by cache_start's rule (cache.c): -o cache_size
 * (main.c resolves "what the disk holds" into it before cache_start), and -o
 * dirty_max, else 3/4 of the bound, never above it. */
static void control_note_bounds(struct control *c)
{
	uint64_t bound = c->d.cache_size ? c->d.cache_size : UINT64_MAX / 2;
	uint64_t dirty = c->d.dirty_max ? c->d.dirty_max : bound / 4 * 3;
	c->cache_bound = bound;
	c->dirty_bound = dirty < bound ? dirty : bound;
}

void control_stats_each(struct control *c, control_stat_fn fn, void *arg)
{
	const struct control_deps *d = &c->d;
	char v[32];
#define PUT(key, val)                                            \
	do {                                                     \
		snprintf(v, sizeof(v), "%" PRIu64, (uint64_t)(val)); \
		fn(arg, key, v);                                 \
	} while (0)
	if (d->reader) {
		struct reader_stats cs;
		reader_stats(d->reader, &cs);
		PUT("chunk_cache_bytes", cs.bytes);
		PUT("chunk_cache_budget", cs.budget);
		PUT("chunk_cache_hits", cs.hits);
		PUT("chunk_cache_misses", cs.misses);
	}
	struct recent_stats rs = { 0 };
	if (d->recent)
		recent_stats(d->recent, &rs);
	PUT("chunk_hashes_reused", rs.hits);
	PUT("chunk_hashes_computed", rs.misses);
	PUT("chunk_follows", rs.follows);
	PUT("chunk_follow_waits", rs.follow_waits);
	PUT("chunk_follow_takeovers", rs.takeovers);
	PUT("chunk_follow_wait_ms", rs.follow_wait_ns / 1000000);
	struct pg_stats ps; /* shared catalog only (-o meta=): the FUSE path's connection */
	if (d->cat && cat_pg_stats(d->cat, &ps)) {
		PUT("pg_round_trips", ps.round_trips);
		PUT("pg_transactions", ps.txns);
		PUT("pg_retries", ps.retries);
		PUT("pg_reconnects", ps.reconnects);
	}
	PUT("write_back", 1);
	PUT("cache_bound", c->cache_bound);
	PUT("dirty_bound", c->dirty_bound);
	if (d->cache && d->cache_stats) {
		struct cache_stats st;
		d->cache_stats(d->cache, &st);
		PUT("cache_hits", st.hits);
		PUT("cache_misses", st.misses);
		PUT("fetched_bytes", st.fetched_bytes);
		PUT("fetch_errors", st.fetch_errors);
		PUT("evicted_chunks", st.evicted_chunks);
		PUT("evicted_bytes", st.evicted_bytes);
		PUT("dirty_waits", st.dirty_waits);
	}
	if (d->wbuf) {
		struct wbuf_stats ws;
		wbuf_stats(d->wbuf, &ws);
		PUT("writebuf_bytes", ws.used);
		PUT("writebuf_bound", ws.limit);
		PUT("writebuf_peak", ws.peak);
		PUT("writebuf_staged", ws.staged);
		PUT("writebuf_copied", ws.copied);
	}
	if (d->uploader && d->uploader_stats) {
		struct uploader_stats us;
		d->uploader_stats(d->uploader, &us);
		PUT("uploaded_chunks", us.chunks);
		PUT("uploaded_bytes", us.chunk_bytes);
		PUT("uploaded_manifests", us.manifests);
		PUT("upload_failures", us.failures);
		PUT("backing_down", us.backing_down ? 1 : 0);
		if (us.last_error[0])
			fn(arg, "upload_last_error", us.last_error);
	}
#undef PUT
}

static void control_stat_send(void *arg, const char *key, const char *value)
{
	control_proto_send(*(int *)arg, "data %s %s", key, value);
}

static void control_stats(struct control *c, int fd)
{
	control_flush_released(c); /* the catalog's counts, as of now */
	control_stats_each(c, control_stat_send, &fd);
	if (cat_is_shared(c->d.cat))
		control_shared_stats(c->d.cat, fd);
	control_proto_send(fd, "ok");
}

/* ---- serving ---- */

/* Reads one line (without its \n) into buf; -errno on failure or EOF. */
static int control_read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	while (n < size - 1) {
		ssize_t r = recv(fd, buf + n, size - 1 - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -ECONNRESET : -errno;
		char *nl = memchr(buf + n, '\n', (size_t)r);
		n += (size_t)r;
		if (nl) {
			*nl = '\0';
			return 0;
		}
	}
	return -E2BIG;
}

/* A request line longer than CONTROL_LINE_MAX is answered with one error
 * line, and the rest of what the client sent is read (up to
 * CONTROL_DRAIN_MAX, each read bounded by the receive timeout) before the
 * close: a close with input unread resets the connection, and the client
 * would get an error instead of the answer. */
#define CONTROL_DRAIN_MAX (256 * 1024)

static void control_refuse_long(int fd)
{
	control_proto_send(fd, "error %d request line longer than %d bytes with its newline", E2BIG,
			   CONTROL_LINE_MAX - 1);
	shutdown(fd, SHUT_WR); /* the answer is complete: the client sees its end */
	char buf[4096];
	size_t drained = 0;
	while (drained < CONTROL_DRAIN_MAX) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		drained += (size_t)r;
	}
}

static bool control_peer_allowed(int fd, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0)
		return false;
	return cred->uid == 0 || cred->uid == getuid();
}

static void control_serve(struct control *c, int fd)
{
	struct ucred cred;
	if (!control_peer_allowed(fd, &cred)) {
		log_warn("control: refused a request from uid %ld (pid %ld): only root and uid %ld may",
			 (long)cred.uid, (long)cred.pid, (long)getuid());
		control_proto_error(fd, EPERM, "only root and the daemon's user may control it");
		return;
	}
	struct timeval tv = { .tv_sec = CONTROL_RECV_TIMEOUT_S };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char line[CONTROL_LINE_MAX];
	int rc = control_read_line(fd, line, sizeof(line));
	size_t magic = strlen(CONTROL_MAGIC);
	if (rc == -E2BIG) {
		control_refuse_long(fd);
		return;
	}
	if (rc != 0 || strncmp(line, CONTROL_MAGIC, magic) != 0 ||
	    (line[magic] != ' ' && line[magic] != '\0')) {
		control_proto_error(fd, EINVAL, rc != 0 ? "no request line" : "not a ckptfs-control 1 request");
		return;
	}
	char *argv[CONTROL_MAX_ARGS], *save = NULL;
	int argc = 0;
	for (char *t = strtok_r(line + magic, " ", &save); t && argc < CONTROL_MAX_ARGS;
	     t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	if (argc == 0) {
		control_proto_error(fd, EINVAL, "no verb");
		return;
	}
	log_info("control: %s%s%s (uid %ld, pid %ld)", argv[0], argc > 1 ? " " : "",
		 argc > 1 ? argv[1] : "", (long)cred.uid, (long)cred.pid);
	if (strcmp(argv[0], "hello") == 0)
		control_hello(c, fd);
	else if (strcmp(argv[0], "commit") == 0)
		control_commit(c, fd, argv, argc);
	else if (strcmp(argv[0], "pin") == 0)
		control_pin(c, fd, argv, argc);
	else if (strcmp(argv[0], "rm") == 0)
		control_rm(c, fd, argv, argc);
	else if (strcmp(argv[0], "gc") == 0)
		control_gc(c, fd, argv, argc);
	else if (strcmp(argv[0], "stats") == 0)
		control_stats(c, fd);
	else if (strcmp(argv[0], "durable") == 0)
		control_durable(c, fd, argv, argc);
	else if (strcmp(argv[0], "gen") == 0)
		control_shared_gen(c->d.cat, fd, argv, argc);
	else if (strcmp(argv[0], "list") == 0)
		control_shared_list(c->d.cat, fd, argv, argc);
	else if (strcmp(argv[0], "show") == 0)
		control_shared_show(c->d.cat, fd, argv, argc);
	else if (strcmp(argv[0], "check") == 0)
		control_shared_check(c->d.cat, fd);
	else if (strcmp(argv[0], "reput") == 0)
		control_reput(c, fd, argv, argc);
	else if (strcmp(argv[0], "rebuild") == 0)
		control_proto_error(fd, EBUSY, "the catalog is in use by this daemon: unmount, then rebuild "
					 "offline with --cache");
	else
		control_proto_send(fd, "error %d unknown verb %.64s", EINVAL, argv[0]);
}

static void *control_thread(void *arg)
{
	struct control *c = arg;
	for (;;) {
		struct pollfd p[2] = { { c->listen_fd, POLLIN, 0 }, { c->stop_pipe[0], POLLIN, 0 } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("control %s: poll: %s", c->path, strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		control_serve(c, fd);
		close(fd);
	}
	return NULL;
}

int control_start(const struct control_deps *deps, struct control **out)
{
	*out = NULL;
	struct control *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->d = *deps;
	c->listen_fd = -1;
	c->stop_pipe[0] = c->stop_pipe[1] = -1;
	int n = cachedir_path(deps->cache_dir, CACHEDIR_CONTROL_SOCK, c->path, sizeof(c->path));
	int rc = 0;
	const char *step = "path";
	if (n < 0 || (size_t)n >= sizeof(c->path)) {
		rc = -ENAMETOOLONG;
	} else if ((rc = aq_open(deps->cat, &c->aq)) != 0) {
		step = "queries";
	} else if (pipe2(c->stop_pipe, O_CLOEXEC) != 0) {
		rc = -errno;
		step = "pipe";
	} else if ((c->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		rc = -errno;
		step = "socket";
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
		unlink(c->path); /* stale, from a daemon that died: we hold the cache lock */
		if (bind(c->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			rc = -errno;
			step = "bind";
		} else if (fchmodat(AT_FDCWD, c->path, 0600, AT_SYMLINK_NOFOLLOW) != 0) {
			/* the socket just bound, never a symlink put in its place */
			rc = -errno;
			step = "chmod";
		} else if (listen(c->listen_fd, 16) != 0) {
			rc = -errno;
			step = "listen";
		} else if ((rc = -pthread_create(&c->thread, NULL, control_thread, c)) != 0) {
			step = "thread";
		}
	}
	if (rc != 0) {
		log_error("control channel %s: %s failed: %s; ckptfs-admin cannot change this mount",
			  c->path, step, strerror(-rc));
		if (c->listen_fd >= 0 && strcmp(step, "bind") != 0)
			unlink(c->path);
		if (c->listen_fd >= 0)
			close(c->listen_fd);
		if (c->stop_pipe[0] >= 0) {
			close(c->stop_pipe[0]);
			close(c->stop_pipe[1]);
		}
		aq_close(c->aq);
		free(c);
		return rc;
	}
	control_note_bounds(c);
	log_info("control channel %s", c->path);
	*out = c;
	return 0;
}

void control_stop(struct control *c)
{
	if (!c)
		return;
	if (write(c->stop_pipe[1], "x", 1) != 1)
		log_warn("control %s: cannot signal the thread: %s", c->path, strerror(errno));
	pthread_join(c->thread, NULL);
	unlink(c->path);
	close(c->listen_fd);
	close(c->stop_pipe[0]);
	close(c->stop_pipe[1]);
	aq_close(c->aq);
	free(c);
}
