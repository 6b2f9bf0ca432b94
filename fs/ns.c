/* ns — the namespace; see ns.h for the invariants and the catalog calls it
 * makes. Every call into the generation rules (gen.h) is made here. */
#define _GNU_SOURCE
#include "ns.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gen.h"
#include "log.h"
#include "node.h"
#include "store.h"
#include "ticker.h"
#include "writer.h"


#define NS_MAX_GROUPS 64
/* invariant 15: the tick that ends the parked marks failed last closes
 * left; a tick whose try failed waits twice as many ticks as the last one
 * did, up to NS_UNPARK_BACKOFF_MAX (each try past an outage's deadline
 * costs one try to connect, logged: pg.h P8) */
#define NS_UNPARK_RETRY_MS 1000
#define NS_UNPARK_BACKOFF_MAX 30

/* An open file: its node, and what it means for the file's generation. */
struct ns_file {
	struct node *n;
	uint64_t gen_id; /* the generation the file was in when opened (0: none) */
	bool writable;   /* counted among the generation's writers */
	bool readwrite;  /* O_RDWR: a shared writable mapping may hold it (invariant 14) */
	bool wrote;      /* created, wrote or truncated through this handle */
	/* invariant 10: the tracker's rule ran at a flush of this handle and
	 * nothing was written through it since: its release does not run it
	 * again (review 44 F4: its line logged once) */
	bool tracker_ruled;
	uid_t uid;       /* the opener's (fsuid): who wrote a tracker (gen.h invariant 12) */
	struct ns_file *prev, *next; /* in the registry (invariant 1) */
};

/* Something was created, written or truncated through f. */
static void ns_file_wrote(struct ns_file *f)
{
	f->wrote = true;
	f->tracker_ruled = false; /* invariant 10: its rule runs again */
}

struct ns {
	struct cat *cat;
	struct node_table *nodes;
	struct gen_policy *gen;
	struct store *store;
	struct ns_reader reader;
	struct chunkput *chunkput;
	int (*wait_backing)(void *arg, uint64_t ino, unsigned timeout_ms);
	int (*wait_pending)(void *arg, uint64_t ino, unsigned timeout_ms);
	void *wait_arg;
	struct ns_config cfg;
	/* the open files (invariant 1); the lock is a leaf */
	pthread_mutex_t lock;
	struct ns_file *head;
	size_t nfiles;
	/* invariant 15: the nodes whose parked mark a failed last close left,
	 * each with a reference (node_get); the lock is a leaf */
	pthread_mutex_t park_lock;
	struct ns_park *parks;
	struct ticker *park_ticker; /* shared catalog only */
	unsigned park_backoff, park_skip; /* ticks; the tick's own (ticker.h T1) */
};

/* invariant 15: one node whose mark is to be ended */
struct ns_park {
	struct node *n;
	struct ns_park *next;
};

static bool ns_unpark_tick(void *arg);

int ns_new(const struct ns_deps *deps, const struct ns_config *cfg, struct ns **out)
{
	assert(deps->cat && deps->nodes && deps->gen);
	assert(deps->reader.map && deps->reader.unmap && deps->reader.read);
	assert(!cfg->sync_backing || deps->wait_backing);
	struct ns *ns = calloc(1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	ns->cat = deps->cat;
	ns->nodes = deps->nodes;
	ns->gen = deps->gen;
	ns->store = deps->store;
	ns->reader = deps->reader;
	ns->chunkput = deps->chunkput;
	ns->wait_backing = deps->wait_backing;
	ns->wait_pending = deps->wait_pending;
	ns->wait_arg = deps->wait_arg;
	ns->cfg = *cfg;
	pthread_mutex_init(&ns->lock, NULL);
	pthread_mutex_init(&ns->park_lock, NULL);
	int rc = cat_is_shared(ns->cat) ? ticker_start(NS_UNPARK_RETRY_MS, TICKER_FIRST_AFTER_PERIOD,
						       ns_unpark_tick, ns, &ns->park_ticker)
					: 0;
	if (rc != 0) {
		log_error("cannot start the thread that ends parked marks late: %s", strerror(-rc));
		pthread_mutex_destroy(&ns->park_lock);
		pthread_mutex_destroy(&ns->lock);
		free(ns);
		return rc;
	}
	*out = ns;
	return 0;
}

void ns_free(struct ns *ns)
{
	if (!ns)
		return;
	size_t n = 0, writable = 0;
	uint64_t first = 0;
	struct ns_file *f = ns->head;
	while (f) { /* invariant 2: the handle only; its node and generation end later */
		struct ns_file *next = f->next;
		if (n++ == 0)
			first = f->n->ino;
		writable += f->writable;
		free(f);
		f = next;
	}
	assert(n == ns->nfiles);
	if (n)
		log_info("%zu file handles (%zu for writing, first inode %llu) still open at unmount,"
			 " never released by the kernel: freed (their files are ended as at any"
			 " unmount with a file open)", n, writable, (unsigned long long)first);
	ticker_stop(ns->park_ticker); /* ticker.h T2: no tick runs from here */
	size_t parks = 0;
	while (ns->parks) { /* invariant 15: this node's lease ends its marks */
		struct ns_park *p = ns->parks;
		ns->parks = p->next;
		node_put(ns->nodes, p->n);
		free(p);
		parks++;
	}
	if (parks)
		log_info("%zu parked marks that failed last closes left are not ended here: they"
			 " count no more once this unmount ends the node's lease", parks);
	pthread_mutex_destroy(&ns->park_lock);
	pthread_mutex_destroy(&ns->lock);
	free(ns);
}

/* ---- the registry of open files (invariant 1) ---- */

static void ns_files_link(struct ns *ns, struct ns_file *f)
{
	pthread_mutex_lock(&ns->lock);
	assert(!f->prev && !f->next && ns->head != f);
	f->next = ns->head;
	if (ns->head)
		ns->head->prev = f;
	ns->head = f;
	ns->nfiles++;
	pthread_mutex_unlock(&ns->lock);
}

static void ns_files_unlink(struct ns *ns, struct ns_file *f)
{
	pthread_mutex_lock(&ns->lock);
	assert(ns->nfiles > 0);
	assert(f->prev ? f->prev->next == f : ns->head == f);
	if (f->prev)
		f->prev->next = f->next;
	else
		ns->head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	f->prev = f->next = NULL;
	ns->nfiles--;
	pthread_mutex_unlock(&ns->lock);
}

uint64_t ns_file_ino(const struct ns_file *f)
{
	return f->n->ino;
}

/* ---- helpers ---- */

static uint64_t ns_gen_of(struct ns *ns, uint64_t ino)
{
	uint64_t gen = 0;
	return cat_gen_of(ns->cat, ino, &gen) == 0 ? gen : 0;
}

/* Before a change to ino (or an entry of the directory ino): a committed
 * generation is reopened as a new version (invariant 4). */
static int ns_gen_change(struct ns *ns, const struct ns_cred *c, uint64_t ino, uint64_t *gen_id)
{
	*gen_id = ns_gen_of(ns, ino);
	int rc = gen_before_change(ns->gen, *gen_id);
	if (rc == 0)
		gen_activity(ns->gen, *gen_id, c->pid);
	return rc;
}

/* ns_gen_change for a change that also needs ino's attributes: both in one
 * catalog read (invariant 5). A reopen changes no attribute of ino (the
 * backup is new inodes), so reading them first is reading them after. */
static int ns_gen_change_attr(struct ns *ns, const struct ns_cred *c, uint64_t ino,
			      uint64_t *gen_id, struct cat_inode *in)
{
	int rc = cat_getattr_gen(ns->cat, ino, in, gen_id);
	if (rc == 0)
		rc = gen_before_change(ns->gen, *gen_id);
	if (rc == 0)
		gen_activity(ns->gen, *gen_id, c->pid);
	return rc;
}

/* ---- writers, registered before what they change is seen (invariant 6) ---- */

/* Shared catalog: n's last write handle closed: its ns_writing row goes (or
 * its parked mark, invariant 14); handles still open here (for reading)
 * have its ns_open row take over first (pgns.h N14). *committed gets n's
 * generation if the same statement read it COMMITTED (else 0). Under n->rw;
 * 0 once the row is gone. */
static int ns_writing_drop(struct ns *ns, struct node *n, uint64_t *committed)
{
	if (!n->shared_open && node_open_count(ns->nodes, n) > 0) {
		int orc = cat_opened(ns->cat, n->ino, true, NULL);
		if (orc == 0)
			n->shared_open = true;
		else if (orc != -ESTALE) /* fenced: it holds nothing */
			log_warn("inode %llu: cannot tell the shared catalog it is still open"
				 " here: %s; another node's removal may release it under its"
				 " readers", (unsigned long long)n->ino, strerror(-orc));
	}
	uint64_t gen_id = 0;
	int state = -1;
	int wrc = cat_writing_state(ns->cat, n->ino, false, &gen_id, &state);
	*committed = wrc == 0 && state == GEN_COMMITTED ? gen_id : 0;
	if (wrc != 0) /* the row stays: the commit waits for it up to its bound */
		log_error("inode %llu: cannot tell the shared catalog the file is closed: %s",
			  (unsigned long long)n->ino, strerror(-wrc));
	return wrc;
}

/* Invariant 15: n's last close could not end the parked mark its ns_open
 * row may have; the tick ends it once the catalog answers. Under n->rw;
 * the caller holds a reference of n, so node_get finds it. */
static void ns_park_pending(struct ns *ns, struct node *n)
{
	if (n->park_pending)
		return; /* listed already */
	struct ns_park *p = malloc(sizeof(*p));
	if (p)
		p->n = node_get(ns->nodes, n->ino);
	if (!p || !p->n) {
		free(p);
		log_warn("inode %llu: out of memory: a parked mark its last close could not end"
			 " stays until this node leaves; keep-latest-k keeps its save until then",
			 (unsigned long long)n->ino);
		return;
	}
	assert(p->n == n);
	n->park_pending = true;
	pthread_mutex_lock(&ns->park_lock);
	p->next = ns->parks;
	ns->parks = p;
	pthread_mutex_unlock(&ns->park_lock);
}

/* Invariant 15: one try to end n's mark; true while it is still to end. A
 * write handle open here again means its open's statement ended it. */
static bool ns_unpark(struct ns *ns, struct node *n)
{
	uint64_t gen_id = 0;
	int state = -1, rc = 0;
	pthread_rwlock_wrlock(&n->rw);
	bool tried = n->park_pending && node_write_handles(ns->nodes, n) == 0;
	if (tried)
		rc = cat_writing_unpark(ns->cat, n->ino, &gen_id, &state);
	bool ended = tried && rc == 0;
	/* fenced (-ESTALE): not live, its marks count no more (pggen.h X12) */
	bool pending = n->park_pending = tried && rc != 0 && rc != -ESTALE;
	pthread_rwlock_unlock(&n->rw);
	if (ended)
		log_info("inode %llu: its parked mark, which its last close could not end, is ended",
			 (unsigned long long)n->ino);
	if (ended && state == GEN_COMMITTED) /* gen.h invariant 18, late */
		gen_keep_again(ns->gen, gen_id);
	return pending;
}

/* Invariant 15, every NS_UNPARK_RETRY_MS: the marks to end, tried once
 * each until one try fails; those not ended go back on the list, and
 * after a failure the next try waits (1, 2, 4 ... 30 ticks). */
static bool ns_unpark_tick(void *arg)
{
	struct ns *ns = arg;
	if (ns->park_skip > 0) {
		ns->park_skip--;
		return true;
	}
	pthread_mutex_lock(&ns->park_lock);
	struct ns_park *list = ns->parks;
	ns->parks = NULL;
	pthread_mutex_unlock(&ns->park_lock);
	bool failed = false;
	while (list) {
		struct ns_park *p = list;
		list = p->next;
		if (failed || ns_unpark(ns, p->n)) { /* one failure: the rest wait too */
			failed = true;
			pthread_mutex_lock(&ns->park_lock);
			p->next = ns->parks;
			ns->parks = p;
			pthread_mutex_unlock(&ns->park_lock);
		} else {
			node_put(ns->nodes, p->n);
			free(p);
		}
	}
	if (failed) {
		unsigned b = ns->park_backoff ? ns->park_backoff * 2 : 1;
		ns->park_backoff = b < NS_UNPARK_BACKOFF_MAX ? b : NS_UNPARK_BACKOFF_MAX;
		ns->park_skip = ns->park_backoff;
	} else {
		ns->park_backoff = 0;
	}
	return true;
}

/* Shared catalog (issue 18): the first write handle of a node on this
 * node tells the other nodes the file is being written (its ns_writing row
 * holds its generation's commit), the last one's close, after the commit of
 * its contents, that it is not. The count changes under n->rw here, so that
 * an open and a close racing cannot leave the row deleted under a writer or
 * left behind after the last one. A row parked at a flush (invariant 14)
 * comes back with a new write handle; at the last close it is gone already,
 * and the same statement ends the parked mark of the ns_open row (before
 * gen_writer_closed asks keep-latest-k again: invariant 12). */
static int ns_writing_shared(struct ns *ns, struct node *n, int delta, uint64_t *committed)
{
	pthread_rwlock_wrlock(&n->rw);
	int rc = 0;
	if (delta > 0 && (n->write_handles == 0 || n->writing_parked)) {
		rc = cat_writing(ns->cat, n->ino, true);
		if (rc == 0) /* its statement ended any mark (invariant 15) */
			n->writing_parked = n->park_pending = false;
	}
	if (rc == 0)
		node_writers_add(ns->nodes, n, delta);
	if (rc == 0 && delta < 0 && n->write_handles == 0) {
		n->writing_parked = false;
		int wrc = ns_writing_drop(ns, n, committed);
		if (wrc != 0 && wrc != -ESTALE && wrc != -ENOENT) /* fenced, gone: no mark */
			ns_park_pending(ns, n);
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

/* Invariant 14: the flush of f, its node's only write handle of a file of a
 * generation, published the file (ns_commit): its row goes and its writer,
 * with nothing left to commit, is freed, so that a later change through the
 * same handle makes a new writer (ns_writer), which puts the row back and
 * reopens a save committed meanwhile. The ns_open row that keeps the inode
 * for the open handle (pgns.h N14) takes the row's place in the same
 * statement, marked parked, which keep-latest-k counts (invariant 12). Not
 * when a change came after the flush's commit (the writer dirty), another
 * write handle is open here, or that statement failed: the row then goes at
 * the release, as before. */
static void ns_writing_park(struct ns *ns, struct ns_file *f)
{
	struct node *n = f->n;
	/* an O_RDWR handle may be mapped MAP_SHARED: the stores into the mapping
	 * reach us only at write-back, after this flush (review 49 F3) */
	if (!f->writable || f->readwrite || f->gen_id == 0 || !cat_is_shared(ns->cat))
		return;
	pthread_rwlock_wrlock(&n->rw);
	bool park = !n->writing_parked && node_write_handles(ns->nodes, n) == 1;
	if (park && n->writer)
		park = !writer_dirty(n->writer) && writer_commit(n->writer, false) == 0;
	if (park && n->writer) {
		writer_free(n->writer);
		n->writer = NULL;
	}
	int rc = park ? cat_writing_park(ns->cat, n->ino) : 0;
	if (park && rc == 0)
		n->shared_open = n->writing_parked = true;
	else if (park && rc != -ESTALE) /* fenced: X2 drops the row with the lease */
		log_warn("inode %llu: its writing row stays until the release: %s; until then a"
			 " commit of its save waits for it", (unsigned long long)n->ino,
			 strerror(-rc));
	pthread_rwlock_unlock(&n->rw);
}

/* Invariant 14: a change through a handle whose row a flush parked puts the
 * row back first (under n->rw, before its generation is read for a
 * reopen); the file's failed flag, if another node set it, stays. */
static int ns_writing_resume(struct ns *ns, struct node *n)
{
	if (!n->writing_parked)
		return 0;
	int rc = cat_writing_resume(ns->cat, n->ino);
	if (rc == 0)
		n->writing_parked = false;
	return rc;
}

/* Shared catalog (pgns.h N14): a node's first handle of n that is not for
 * writing, while no write handle is open here (the ns_writing row does that
 * work), tells the other nodes the file is open here: a removal elsewhere
 * leaves it readable. Under n->rw, as the writer count; after node_open
 * counted the handle. */
static int ns_opened_shared(struct ns *ns, struct node *n)
{
	if (!cat_is_shared(ns->cat))
		return 0;
	pthread_rwlock_wrlock(&n->rw);
	int rc = 0;
	if (!n->shared_open && n->write_handles == 0) {
		rc = cat_opened(ns->cat, n->ino, true, NULL);
		n->shared_open = rc == 0;
		if (rc == -ESTALE) /* fenced, read-only for good: a node not live holds nothing */
			rc = 0;
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

/* After node_close: the last handle of n here is gone, so its ns_open row
 * goes; an inode another node unlinked meanwhile and nobody else has open
 * loses its data now, its row when the kernel forgets it (pgns.h N14: the
 * last node to close releases it). */
static void ns_closed_shared(struct ns *ns, struct node *n)
{
	if (!cat_is_shared(ns->cat))
		return;
	pthread_rwlock_wrlock(&n->rw);
	bool release = false;
	if (n->shared_open && node_open_count(ns->nodes, n) == 0) {
		int rc = cat_opened(ns->cat, n->ino, false, &release);
		if (rc == 0) /* the row, and its mark, gone (invariant 15) */
			n->park_pending = false;
		if (rc != 0 && rc != -ESTALE) /* fenced: its rows go with its lease */
			log_warn("inode %llu: cannot tell the shared catalog it is closed here: %s;"
				 " its row goes when this node releases the inode or its lease ends",
				 (unsigned long long)n->ino, strerror(-rc));
		n->shared_open = false;
	}
	pthread_rwlock_unlock(&n->rw);
	int rc = release ? cat_inodes_drop_data(ns->cat, &n->ino, 1) : 0;
	if (rc != 0)
		log_warn("inode %llu: releasing the data of a file removed on another node failed:"
			 " %s; the reclaim duty releases it", (unsigned long long)n->ino,
			 strerror(-rc));
}

/* n's count among this node's writers (the list gen_files_being_written
 * reads; shared, also its ns_writing row, pggen.h X1). *committed (if not
 * NULL): the generation the last close's statement read COMMITTED (shared;
 * else 0). */
static int ns_writer_count(struct ns *ns, struct node *n, int delta, uint64_t *committed)
{
	uint64_t ignored = 0;
	if (cat_is_shared(ns->cat))
		return ns_writing_shared(ns, n, delta, committed ? committed : &ignored);
	node_writers_add(ns->nodes, n, delta);
	return 0;
}

/* Invariant 12, one node: n, found in generation gen_id by the caller's
 * earlier read, is counted among the writers now; read again, a file that
 * has since left its generation with no link left (the save removed:
 * keep-latest-k, an admin rm) is not opened (-ENOENT). */
static int ns_writer_still_in(struct ns *ns, struct node *n, uint64_t gen_id)
{
	if (gen_id == 0 || cat_is_shared(ns->cat))
		return 0;
	struct cat_inode in;
	uint64_t now = 0;
	int rc = cat_getattr_gen(ns->cat, n->ino, &in, &now);
	return rc == 0 && in.nlink == 0 && now != gen_id ? -ENOENT : rc;
}

/* Counts n among the writers of generation gen_id: from here on a commit of
 * it waits (gen.h invariant 2), and keep-latest-k keeps it (invariant 12).
 * change: the caller changes it next, so a settled generation is reopened
 * (invariant 4) — after the count, so no commit comes between the reopen
 * and the change, and before the policy's count, so that one is of the
 * open version its close uncounts. */
void (*ns_test_hook)(const char *point, uint64_t ino);

static int ns_writer_enter(struct ns *ns, struct node *n, uint64_t gen_id, bool change)
{
	if (ns_test_hook)
		ns_test_hook("counting", n->ino);
	int rc = ns_writer_count(ns, n, 1, NULL);
	if (rc == 0 && ns_test_hook)
		ns_test_hook("counted", n->ino);
	if (rc == 0 && (rc = ns_writer_still_in(ns, n, gen_id)) != 0)
		ns_writer_count(ns, n, -1, NULL);
	else if (rc == 0 && change && (rc = gen_before_change(ns->gen, gen_id)) != 0)
		ns_writer_count(ns, n, -1, NULL);
	if (rc == 0)
		gen_writer_opened(ns->gen, gen_id);
	return rc;
}

/* The reverse of ns_writer_enter: a commit waiting for n may run, and
 * keep-latest-k a pass over a save another node committed meanwhile, as the
 * last close's statement read it (invariant 12, gen.h invariant 18). */
static void ns_writer_leave(struct ns *ns, struct node *n, uint64_t gen_id)
{
	uint64_t committed = 0;
	ns_writer_count(ns, n, -1, &committed);
	gen_writer_closed(ns->gen, gen_id, gen_id != 0 && committed == gen_id);
}

/* A directory of a generation registered as a writer of it while a file is
 * created in it and opened (invariant 6); n NULL: nothing held. */
struct ns_hold {
	struct node *n;
	uint64_t gen_id;
};

static void ns_hold_end(struct ns *ns, struct ns_hold *h)
{
	if (!h || !h->n)
		return;
	ns_writer_leave(ns, h->n, h->gen_id);
	node_put(ns->nodes, h->n);
	h->n = NULL;
}

/* ns_gen_change_attr for a create that opens its file for writing: the
 * parent, when in a generation, is registered before the generation is
 * reopened or anything in it changes; *h ends it (ns_hold_end), which the
 * call does itself when it fails. */
static int ns_gen_change_held(struct ns *ns, const struct ns_cred *c, uint64_t parent,
			      uint64_t *gen_id, struct cat_inode *in, struct ns_hold *h)
{
	h->n = NULL;
	h->gen_id = 0;
	int rc = cat_getattr_gen(ns->cat, parent, in, gen_id);
	if (rc != 0 || !*gen_id)
		return rc; /* outside a generation: nothing to hold, nothing to reopen */
	struct node *n = node_get(ns->nodes, parent);
	rc = n ? ns_writer_enter(ns, n, *gen_id, true) : -ENOMEM;
	if (rc == 0) {
		*h = (struct ns_hold){ .n = n, .gen_id = *gen_id };
		gen_activity(ns->gen, *gen_id, c->pid);
	} else if (n) {
		node_put(ns->nodes, n);
	}
	return rc;
}

/* What this node's writer of out->ino has that the catalog has not yet:
 * the size and, once written, the mtime (close-to-open: the catalog learns
 * them at the commit). */
static void ns_writer_attr(struct ns *ns, struct cat_inode *out)
{
	struct node *n = node_peek(ns->nodes, out->ino);
	if (!n)
		return;
	pthread_rwlock_rdlock(&n->rw);
	if (n->writer && S_ISREG(out->mode)) {
		out->size = writer_size(n->writer);
		if (writer_dirty(n->writer))
			out->mtime_ns = out->ctime_ns = writer_mtime_ns(n->writer);
	}
	pthread_rwlock_unlock(&n->rw);
	node_put(ns->nodes, n);
}

int ns_getattr(struct ns *ns, uint64_t ino, struct cat_inode *out)
{
	int rc = cat_getattr(ns->cat, ino, out);
	if (rc == 0)
		ns_writer_attr(ns, out);
	return rc;
}

/* ---- setuid and setgid after a change (invariant 3) ---- */

static bool ns_in_group(const struct ns_cred *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	gid_t groups[NS_MAX_GROUPS];
	int n = c->getgroups ? c->getgroups(c->arg, NS_MAX_GROUPS, groups) : 0;
	for (int i = 0; i < n && i < NS_MAX_GROUPS; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* The mode of in after a change by c, by the kernel's rules
 * (setattr_should_drop_suidgid, setattr_should_drop_sgid, chown_common):
 *  - a write, a truncate or an O_TRUNC open by a caller without CAP_FSETID
 *    clears setuid, and setgid if group-exec is set or the caller is not in
 *    the file's group (setgid without group-exec is otherwise a locking mark);
 *  - a chown (chown true) clears setuid whoever asks, and setgid by the same
 *    rule, a caller with CAP_FSETID counting as in every group.
 * A caller has CAP_FSETID when its uid is 0 (FUSE does not pass capabilities),
 * unless the kernel asked to kill them anyway (kill). */
static mode_t ns_killpriv_mode(const struct ns_cred *c, const struct cat_inode *in, bool chown,
			       bool kill)
{
	bool capable = c->uid == 0 && !kill;
	if (!S_ISREG(in->mode) || !(in->mode & (S_ISUID | S_ISGID)) || (capable && !chown))
		return in->mode;
	mode_t drop = S_ISUID;
	if ((in->mode & S_ISGID) && ((in->mode & S_IXGRP) || (!capable && !ns_in_group(c, in->gid))))
		drop |= S_ISGID;
	return in->mode & ~drop;
}

/* After a write or truncate of ino by c: clears the bits in the catalog if
 * the rules say so; *still* tells whether any is left. */
static int ns_killpriv(struct ns *ns, const struct ns_cred *c, uint64_t ino, bool *still)
{
	struct cat_inode in, set;
	int rc = cat_getattr(ns->cat, ino, &in);
	if (rc != 0)
		return rc;
	memset(&set, 0, sizeof(set));
	set.mode = ns_killpriv_mode(c, &in, false, false);
	if (set.mode != in.mode)
		rc = cat_setattr(ns->cat, ino, CAT_SET_MODE, &set, NULL);
	if (rc != 0)
		log_error("inode %llu: clearing setuid/setgid after a write by uid %u"
			  " (mode %o to %o) failed: %s", (unsigned long long)ino, (unsigned)c->uid,
			  (unsigned)(in.mode & 07777), (unsigned)(set.mode & 07777), strerror(-rc));
	if (still)
		__atomic_store_n(still, (set.mode & (S_ISUID | S_ISGID)) != 0, __ATOMIC_RELAXED);
	return rc;
}

/* ---- names ---- */

void ns_lookup_add(struct ns *ns, uint64_t ino)
{
	node_lookup_add(ns->nodes, ino);
}

/* Review 43 F1: after a READDIRPLUS the kernel opens the entry through the
 * cached dentry with no LOOKUP, so this is the only time the daemon sees the
 * name of a node made here (also a new node after a FORGET). A trigger name
 * is noted as ns_lookup does, so the written close still fires its rule. */
void ns_readdirplus_add(struct ns *ns, uint64_t parent, const char *name, uint64_t ino)
{
	node_lookup_add(ns->nodes, ino);
	if (gen_is_trigger_name(name))
		node_note_name(ns->nodes, ino, parent, name);
}

int ns_lookup(struct ns *ns, uint64_t parent, const char *name, struct cat_inode *out)
{
	int rc = cat_lookup(ns->cat, parent, name, out); /* the entry's attributes too */
	if (rc != 0)
		return rc;
	ns_writer_attr(ns, out); /* invariant 5: no second read */
	/* Counted first: that makes the node, so the trigger name below is noted
	 * even for a file no one has looked up since the daemon started (a
	 * tracker rewritten after a remount); its written close may then commit
	 * (ns_release_done). */
	node_lookup_add(ns->nodes, out->ino);
	if (gen_is_trigger_name(name))
		node_note_name(ns->nodes, out->ino, parent, name);
	return 0;
}

void ns_forget(struct ns *ns, uint64_t ino, uint64_t nlookup)
{
	node_forget(ns->nodes, ino, nlookup);
}

/* Generation roots are not cached at all, so a generation removed or
 * restored behind the kernel's back (keep-latest-k, abort, crash recovery)
 * is seen at the next path walk, without calling into the kernel (gen.c,
 * gen_after_removal). The names below a root may be cached for OPS_TIMEOUT
 * only because every walk revalidates the root first: a restore (an abort
 * of a rewrite, generation.c G3) links the backup tree under the same name,
 * a new root inode with new inode numbers below it, and a root dentry kept
 * past that would lead a trainer into the removed tree (ENOENT for files
 * the restored save has; a mkdir of the name after an abort answered EEXIST
 * by the kernel). Not even an OPEN first version is safe: it can commit,
 * be reopened and aborted within any timeout. So 0, whatever it costs (one
 * LOOKUP per path walk; docs/BENCH.md, issue 20 part 3, s34). */
double ns_entry_timeout(struct ns *ns, const char *name, double usual)
{
	uint64_t step;
	return name && gen_name_matches(ns->gen, name, &step) ? 0.0 : usual;
}

/* Creates an entry with the caller's owner; a set-group-ID directory passes
 * its group (and, to subdirectories, the bit) on, as in ext4. A name that
 * starts a generation (gen_spec_for) creates it in the same transaction.
 * hold (a create that opens the file for writing): the parent, when in a
 * generation, is registered as a writer before the entry is made
 * (invariant 6), and stays so for the caller to end with ns_hold_end. */
static int ns_make_entry(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
			 mode_t mode, dev_t rdev, const char *target, struct cat_inode *out,
			 uint64_t *out_gen, struct ns_hold *hold)
{
	if (strlen(name) > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	uint32_t gid = c->gid;
	struct cat_inode dir;
	uint64_t parent_gen, gen_id = 0;
	int rc = hold ? ns_gen_change_held(ns, c, parent, &parent_gen, &dir, hold)
		      : ns_gen_change_attr(ns, c, parent, &parent_gen, &dir);
	if (rc != 0)
		return rc;
	if (dir.mode & S_ISGID) {
		gid = dir.gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	struct cat_gen_spec spec_buf;
	const struct cat_gen_spec *spec =
		parent_gen ? NULL : gen_spec_for(ns->gen, parent, name, &spec_buf);
	rc = cat_create_in_gen(ns->cat, parent, name, mode, c->uid, gid, rdev, target, spec, out,
			       &gen_id);
	if (rc != 0) {
		ns_hold_end(ns, hold);
		return rc;
	}
	if (spec)
		gen_started(ns->gen, gen_id, parent, false, c->pid);
	else
		gen_file_created(ns->gen, gen_id, name);
	*out_gen = gen_id;
	return 0;
}

int ns_make(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
	    mode_t mode, dev_t rdev, const char *target, struct cat_inode *out)
{
	if (target && strlen(target) > PATH_MAX)
		return -ENAMETOOLONG;
	uint64_t gen_id;
	int rc = ns_make_entry(ns, c, parent, name, mode, rdev, target, out, &gen_id, NULL);
	/* a regular file made by mknod(2) has no handle whose release would
	 * clear its create's mark (generation.h G7): it is closed already, and
	 * a mark left would keep its save from every rule but an explicit one
	 * (G9) */
	if (rc == 0 && S_ISREG(mode))
		rc = cat_file_unmark(ns->cat, out->ino);
	if (rc == 0)
		node_lookup_add(ns->nodes, out->ino);
	return rc;
}

int ns_link(struct ns *ns, const struct ns_cred *c, uint64_t ino, uint64_t newparent,
	    const char *newname, struct cat_inode *out)
{
	if (strlen(newname) > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	uint64_t gen_id;
	int rc = ns_gen_change(ns, c, newparent, &gen_id);
	if (rc == 0)
		rc = cat_link(ns->cat, ino, newparent, newname, out);
	if (rc == 0)
		rc = ns_getattr(ns, ino, out);
	if (rc == 0)
		node_lookup_add(ns->nodes, out->ino);
	return rc;
}

/* A change inside the parent's generation (which is reopened if committed);
 * a generation root removed ends its generation (catalog). */
int ns_remove(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name, bool dir)
{
	uint64_t ino = 0, gen_id;
	int rc = ns_gen_change(ns, c, parent, &gen_id);
	if (rc == 0)
		rc = dir ? cat_rmdir(ns->cat, parent, name, &ino) : cat_unlink(ns->cat, parent, name, &ino);
	if (rc == 0) {
		gen_root_removed(ns->gen, parent, name);
		node_unlinked(ns->nodes, ino);
	}
	return rc;
}

/* A rename may start a generation (a temporary directory or file renamed to
 * a generation name: rule "rename"), or fire a rule by its new name inside
 * one (gen_renamed: DCP's .metadata) or outside (a tracker). A held root
 * renamed keeps its generation (no new one, so no commit), and a rewrite's
 * root does not move (-EBUSY): meta/generation.h G8. */
int ns_rename(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
	      uint64_t newparent, const char *newname, unsigned flags)
{
	if (strlen(newname) > CAT_NAME_MAX)
		return -ENAMETOOLONG;
	uint64_t replaced = 0, new_gen = 0, from_gen = 0, to_gen = 0, moved = 0;
	int rc = ns_gen_change(ns, c, parent, &from_gen);
	if (rc == 0)
		rc = ns_gen_change(ns, c, newparent, &to_gen);
	struct cat_gen_spec spec_buf;
	const struct cat_gen_spec *spec =
		rc == 0 && !to_gen && !(flags & CAT_RENAME_EXCHANGE)
			? gen_spec_for(ns->gen, newparent, newname, &spec_buf) : NULL;
	if (rc == 0)
		rc = cat_rename_gen(ns->cat, parent, name, newparent, newname, flags, spec, &replaced,
				    &new_gen, &moved);
	if (rc != 0)
		return rc;
	gen_root_removed(ns->gen, parent, name);
	if (replaced)
		node_unlinked(ns->nodes, replaced);
	if (new_gen) {
		gen_started(ns->gen, new_gen, newparent, true, c->pid);
		return 0;
	}
	/* a trigger name arrived by rename (an atomic tracker writer's
	 * os.replace onto `latest`): noted like a lookup's, so a handle still
	 * open fires it at its written close; else the rename is the close
	 * (fs/gen.h invariant 12, c->uid the writer). The inode is the one the
	 * catalog's rename moved, never newname looked up again: on -o meta=
	 * another node may have renamed another file onto it since. */
	if (gen_is_trigger_name(newname) && moved != 0)
		node_note_name(ns->nodes, moved, newparent, newname);
	gen_renamed(ns->gen, to_gen, moved, newparent, newname, c->uid);
	return 0;
}

int ns_readlink(struct ns *ns, uint64_t ino, char *buf, size_t size)
{
	return cat_readlink(ns->cat, ino, buf, size);
}

struct ns_dir {
	struct ns *ns;
	uint64_t dir;
	cat_dirent_fn fn;
	void *arg;
};

static int ns_dirent(void *arg, const char *name, const struct cat_inode *attr, uint64_t next)
{
	struct ns_dir *d = arg;
	if (gen_hidden(d->ns->gen, d->dir, name))
		return 0; /* an OPEN generation: reachable by name, not listed */
	return d->fn(d->arg, name, attr, next);
}

int ns_readdir(struct ns *ns, uint64_t dir, uint64_t off, cat_dirent_fn fn, void *arg)
{
	struct ns_dir d = { .ns = ns, .dir = dir, .fn = fn, .arg = arg };
	return cat_readdir(ns->cat, dir, off, ns_dirent, &d);
}

int ns_sync(struct ns *ns)
{
	return cat_sync(ns->cat);
}

int ns_inode_count(struct ns *ns, uint64_t *inodes)
{
	struct cat_stats cs;
	int rc = cat_stats(ns->cat, &cs);
	if (rc == 0)
		*inodes = cs.inodes;
	return rc;
}

/* ---- attributes ---- */

/* Size changes go through the writer when the file is being written, else
 * straight to the catalog. */
/* Invariant 8 (catalog_defer.c D10): a file whose create a rolled-back
 * catalog batch took answers that batch's error (ENOSPC, EIO), not what its
 * missing row makes of a call (ENOENT) nor a success: asked before the call
 * (nothing done for a lost file) and after it (a loss the call found). */
static int ns_lost(struct ns *ns, uint64_t ino, int rc)
{
	int lost = cat_file_lost(ns->cat, ino);
	return lost ? lost : rc;
}

static int ns_writer(struct ns *ns, struct node *n, struct writer **out);

static int ns_truncate(struct ns *ns, uint64_t ino, uint64_t size)
{
	struct node *n = node_get(ns->nodes, ino);
	if (!n)
		return -ENOMEM;
	pthread_rwlock_wrlock(&n->rw);
	bool by_path = n->writer == NULL;
	struct writer *w = NULL;
	int rc = ns_lost(ns, ino, 0);
	/* invariant 14: a parked file is cut through a new writer, its row back */
	if (rc == 0 && (n->writer || n->writing_parked))
		rc = ns_writer(ns, n, &w);
	if (rc == 0)
		rc = w ? writer_truncate(w, size) : cat_file_truncate(ns->cat, ino, size);
	rc = ns_lost(ns, ino, rc);
	/* generation.h G7, G9: a cut with no write handle open has no release
	 * to clear its mark, which would hold its save as a failed close; a
	 * handle opening after this read marks the file again at its first
	 * change (under n->rw, after us) */
	if (rc == 0 && by_path && node_write_handles(ns->nodes, n) == 0)
		rc = cat_file_unmark(ns->cat, ino);
	pthread_rwlock_unlock(&n->rw);
	node_put(ns->nodes, n);
	return rc;
}

/* After a change of mode or mtime: the node's copy of the setid bits, and a
 * writer's clock (an explicit mtime outlives the writer's own). */
static void ns_attr_changed(struct ns *ns, uint64_t ino, unsigned what, const struct cat_inode *set,
			    const struct cat_inode *out)
{
	struct node *n = node_peek(ns->nodes, ino);
	if (!n)
		return;
	if (what & CAT_SET_MODE)
		__atomic_store_n(&n->setid, (out->mode & (S_ISUID | S_ISGID)) != 0, __ATOMIC_RELAXED);
	if (what & CAT_SET_MTIME) {
		pthread_rwlock_wrlock(&n->rw);
		if (n->writer)
			writer_set_mtime_ns(n->writer, set->mtime_ns);
		pthread_rwlock_unlock(&n->rw);
	}
	node_put(ns->nodes, n);
}

/* Invariant 7: in has no links left and no handle of this node has it
 * open (one that has: a reopen through /proc/self/fd, as `cmp /dev/fd/N`). */
static bool ns_unlinked_unheld(struct ns *ns, uint64_t ino, const struct cat_inode *in)
{
	if (in->nlink != 0)
		return false;
	struct node *n = node_peek(ns->nodes, ino);
	bool held = n && node_open_count(ns->nodes, n) > 0;
	if (n)
		node_put(ns->nodes, n);
	return !held;
}

int ns_setattr(struct ns *ns, const struct ns_cred *c, uint64_t ino, const struct ns_setattr *s,
	       struct ns_file *f, struct cat_inode *out)
{
	struct cat_inode in, out_set;
	struct cat_inode set = s->val;
	unsigned what = s->what;
	uint64_t gen_id;
	bool in_place = false; /* attributes only, into a committed or held save */
	int rc = cat_getattr_gen(ns->cat, ino, &in, &gen_id);
	if (rc == 0 && s->size_set && !f && ns_unlinked_unheld(ns, ino, &in))
		rc = -ENOENT; /* invariant 7: a truncate by a name the kernel still caches */
	if (rc == 0 && s->size_set)
		rc = gen_before_change(ns->gen, gen_id);
	else if (rc == 0)
		rc = gen_before_attr_change(ns->gen, gen_id, &in_place);
	if (rc == 0 && !in_place)
		gen_activity(ns->gen, gen_id, c->pid);
	if (rc == 0 && f && s->size_set)
		ns_file_wrote(f);
	if (rc == 0 && s->size_set) {
		if (S_ISDIR(in.mode))
			rc = -EISDIR;
		else if (!S_ISREG(in.mode))
			rc = -EINVAL;
		else
			rc = ns_truncate(ns, ino, s->size);
	}
	/* invariant 3: a chown or truncate clears setuid/setgid in the same change */
	bool chown = what & (CAT_SET_UID | CAT_SET_GID);
	if (rc == 0 && !(what & CAT_SET_MODE) && (chown || s->kill_setid || s->size_set)) {
		mode_t mode = ns_killpriv_mode(c, &in, chown, s->kill_setid);
		if (mode != in.mode) {
			what |= CAT_SET_MODE;
			set.mode = mode;
		}
	}
	if (rc == 0 && what)
		rc = cat_setattr(ns->cat, ino, what, &set, &out_set);
	if (rc == 0 && (what & (CAT_SET_MTIME | CAT_SET_MODE)))
		ns_attr_changed(ns, ino, what, &set, &out_set);
	if (rc == 0 && in_place && what) {
		int mrc = cat_gen_manifest_again(ns->cat, gen_id);
		if (mrc != 0) /* the change stands; BACKING's manifest keeps the old attributes */
			log_warn("generation %llu: attributes changed in place, its manifest not queued"
				 " again: %s", (unsigned long long)gen_id, strerror(-mrc));
	}
	if (rc == 0 && what) { /* the change's answer is the inode after it (invariant 5) */
		*out = out_set;
		ns_writer_attr(ns, out);
	} else if (rc == 0) {
		rc = ns_getattr(ns, ino, out);
	}
	return rc;
}

/* ---- files ---- */

static bool ns_outside_gens(struct ns *ns, const struct ns_file *f);

/* O_TRUNC on an open for writing, f already counted among the writers of
 * its generation, reopened if it was settled (invariant 6). On a shared
 * catalog a file outside generations is cut by its writer, not in the
 * catalog (invariant 13): the other nodes read its old content until the
 * close publishes the new one. */
static int ns_open_truncate(struct ns *ns, const struct ns_cred *c, struct ns_file *f, bool setid)
{
	struct node *n = f->n;
	pthread_rwlock_wrlock(&n->rw);
	struct writer *w = n->writer;
	int rc = 0;
	if (!w && cat_is_shared(ns->cat) && ns_outside_gens(ns, f))
		rc = ns_writer(ns, n, &w);
	if (rc == 0)
		rc = w ? writer_truncate(w, 0) : cat_file_truncate(ns->cat, n->ino, 0);
	if (rc == 0 && setid) /* invariant 3 */
		rc = ns_killpriv(ns, c, n->ino, &n->setid);
	pthread_rwlock_unlock(&n->rw);
	ns_file_wrote(f);
	return rc;
}

/* Opens ino, in generation gen_id, for f: a writable handle counts among
 * its generation's writers (a commit waits for it: gen.h invariant 2) from
 * before its O_TRUNC truncates (invariant 6) until its release. */
static int ns_open_node(struct ns *ns, const struct ns_cred *c, uint64_t ino, uint64_t gen_id,
			int flags, mode_t mode, struct ns_file **out)
{
	struct ns_file *f = calloc(1, sizeof(*f));
	struct node *n = NULL;
	int orc = f ? node_open(ns->nodes, ino, &n) : -ENOMEM;
	if (orc != 0) {
		free(f);
		return orc;
	}
	f->n = n;
	f->uid = c->uid; /* a FUSE release carries no caller */
	f->writable = (flags & O_ACCMODE) != O_RDONLY;
	f->readwrite = (flags & O_ACCMODE) == O_RDWR;
	f->gen_id = f->writable ? gen_id : 0;
	bool setid = (mode & (S_ISUID | S_ISGID)) != 0;
	__atomic_store_n(&n->setid, setid, __ATOMIC_RELAXED);
	bool trunc = f->writable && (flags & O_TRUNC);
	int rc = f->writable ? ns_writer_enter(ns, n, f->gen_id, trunc) : ns_opened_shared(ns, n);
	bool entered = f->writable && rc == 0;
	if (rc == 0 && trunc)
		rc = ns_open_truncate(ns, c, f, setid);
	if (rc != 0) {
		node_close(ns->nodes, n);
		if (entered)
			ns_writer_leave(ns, n, f->gen_id);
		ns_closed_shared(ns, n);
		node_put(ns->nodes, n); /* node_close's reference */
		free(f);
		return rc;
	}
	if (f->writable)
		gen_activity(ns->gen, f->gen_id, c->pid);
	ns_files_link(ns, f);
	*out = f;
	return 0;
}

int ns_open(struct ns *ns, const struct ns_cred *c, uint64_t ino, int flags, struct ns_file **out,
	    struct cat_inode *in)
{
	/* a handle for writing is counted in its generation: both in one read */
	uint64_t gen_id = 0;
	int rc = (flags & O_ACCMODE) != O_RDONLY ? cat_getattr_gen(ns->cat, ino, in, &gen_id)
						 : cat_getattr(ns->cat, ino, in);
	if (rc == 0 && S_ISDIR(in->mode))
		rc = -EISDIR;
	else if (rc == 0 && ns_unlinked_unheld(ns, ino, in))
		rc = -ENOENT; /* invariant 7: removed, by a name the kernel still caches */
	if (rc == 0)
		rc = ns_open_node(ns, c, ino, gen_id, flags, in->mode, out);
	return rc;
}

/* Whether c may open in with flags' access mode (the kernel's
 * generic_permission, which default_permissions does at an open of a name it
 * knew, but not at a create it thinks makes the file). */
static bool ns_may_open(const struct ns_cred *c, const struct cat_inode *in, int flags)
{
	if (c->uid == 0)
		return true;
	unsigned want = ((flags & O_ACCMODE) != O_WRONLY ? 4 : 0) |
			((flags & O_ACCMODE) != O_RDONLY ? 2 : 0);
	unsigned bits = c->uid == in->uid		 ? (in->mode >> 6) & 7
			: ns_in_group(c, (gid_t)in->gid) ? (in->mode >> 3) & 7
							 : in->mode & 7;
	return (bits & want) == want;
}

/* A create without O_EXCL that found the name taken: another node made it
 * after this kernel's lookup (pgns.h N9 answers -EEXIST), so the file is
 * opened as an open(2) of an existing name would (O_TRUNC applied; POSIX
 * open without O_EXCL). Its entry counts as the create's lookup. */
static int ns_create_existing(struct ns *ns, const struct ns_cred *c, uint64_t parent,
			      const char *name, int flags, struct ns_file **out,
			      struct cat_inode *in)
{
	int rc = ns_lookup(ns, parent, name, in);
	if (rc != 0)
		return rc; /* -ENOENT: removed again meanwhile, the caller creates anew */
	if (S_ISDIR(in->mode))
		rc = -EISDIR;
	else if (!S_ISREG(in->mode))
		rc = -EEXIST; /* a symlink or a device: not followed here */
	else if (!ns_may_open(c, in, flags))
		rc = -EACCES;
	if (rc == 0)
		rc = ns_open(ns, c, in->ino, flags, out, in);
	if (rc != 0)
		node_forget(ns->nodes, in->ino, 1);
	return rc;
}

int ns_create(struct ns *ns, const struct ns_cred *c, uint64_t parent, const char *name,
	      mode_t mode, int flags, struct ns_file **out, struct cat_inode *in)
{
	uint64_t gen_id; /* the new file's, from its create (invariant 5) */
	struct ns_hold hold = { NULL, 0 };
	bool writable = (flags & O_ACCMODE) != O_RDONLY;
	int rc = -EEXIST;
	/* a name made and removed again on other nodes between our tries: a
	 * few rounds, then the last answer */
	for (int tries = 0; rc == -EEXIST && tries < 3; tries++) {
		rc = ns_make_entry(ns, c, parent, name, S_IFREG | (mode & 07777), 0, NULL, in,
				   &gen_id, writable ? &hold : NULL);
		if (rc != -EEXIST || (flags & O_EXCL))
			break;
		rc = ns_create_existing(ns, c, parent, name, flags, out, in);
		if (rc != -ENOENT)
			return rc;
		rc = -EEXIST;
	}
	if (rc != 0)
		return rc;
	rc = ns_open_node(ns, c, in->ino, gen_id, flags & ~O_TRUNC /* it is new */, in->mode, out);
	ns_hold_end(ns, &hold); /* the file itself holds the commit now (invariant 6) */
	if (rc != 0)
		return rc;
	(*out)->wrote = true; /* creating is writing (an empty marker counts) */
	node_lookup_add(ns->nodes, in->ino);
	if (gen_is_trigger_name(name))
		node_note_name(ns->nodes, in->ino, parent, name);
	return 0;
}

/* The node's writer, created on first need (a write or a size change);
 * with n->rw held for writing (node.h invariant 2). */
static int ns_writer(struct ns *ns, struct node *n, struct writer **out)
{
	if (!n->writer) {
		struct cat_inode in;
		uint64_t gen_id;
		int rc = ns_writing_resume(ns, n); /* invariant 14: counted before the read */
		if (rc == 0)
			rc = cat_getattr_gen(ns->cat, n->ino, &in, &gen_id); /* invariant 5 */
		if (rc == 0)
			rc = gen_before_change(ns->gen, gen_id);
		if (rc == 0)
			rc = writer_new(ns->chunkput, n->ino, in.size, &n->writer);
		if (rc != 0)
			return rc;
	}
	*out = n->writer;
	return 0;
}

/* With n->rw held: a file being written reads from its writer, others
 * from the committed extents, as pinned chunk pieces when they fit a map. */
static int ns_read_fill(struct ns *ns, struct node *n, size_t size, uint64_t off,
			struct ns_read_out *o)
{
	if (n->writer) {
		o->buf = malloc(size ? size : 1);
		return o->buf ? writer_read(n->writer, o->buf, size, off, &o->got) : -ENOMEM;
	}
	struct cat_inode in;
	int rc = cat_getattr(ns->cat, n->ino, &in);
	if (rc != 0 || off >= in.size)
		return rc;
	o->got = in.size - off < size ? (size_t)(in.size - off) : size;
	rc = ns->reader.map(ns->reader.arg, n->ino, off, o->got, &o->m);
	if (rc == 0 && o->m.len < o->got) {
		ns->reader.unmap(ns->reader.arg, &o->m);
		o->buf = malloc(o->got);
		rc = o->buf ? ns->reader.read(ns->reader.arg, n->ino, off, o->got, o->buf) : -ENOMEM;
	}
	return rc;
}

int ns_read(struct ns *ns, struct ns_file *f, size_t size, uint64_t off, struct ns_read_out *o)
{
	memset(o, 0, sizeof(*o));
	pthread_rwlock_rdlock(&f->n->rw);
	int rc = ns_read_fill(ns, f->n, size, off, o);
	pthread_rwlock_unlock(&f->n->rw);
	return rc;
}

void ns_read_done(struct ns *ns, struct ns_read_out *o)
{
	ns->reader.unmap(ns->reader.arg, &o->m);
	free(o->buf);
	o->buf = NULL;
}

int ns_write(struct ns *ns, const struct ns_cred *c, struct ns_file *f, const void *buf,
	     size_t size, uint64_t off, bool append, bool from_cache)
{
	struct node *n = f->n;
	pthread_rwlock_wrlock(&n->rw);
	struct writer *w;
	int rc = ns_lost(ns, n->ino, 0);
	if (rc == 0)
		rc = ns_writer(ns, n, &w);
	if (rc == 0)
		rc = writer_write(w, buf, size, append ? writer_size(w) : off);
	rc = ns_lost(ns, n->ino, rc);
	/* invariant 3; a write from the page cache has no caller */
	if (rc == 0 && __atomic_load_n(&n->setid, __ATOMIC_RELAXED) && !from_cache && c->uid != 0)
		rc = ns_killpriv(ns, c, n->ino, &n->setid);
	pthread_rwlock_unlock(&n->rw);
	ns_file_wrote(f);
	gen_activity(ns->gen, f->gen_id, c->pid);
	return rc;
}

int ns_extend(struct ns *ns, struct ns_file *f, uint64_t off, uint64_t len)
{
	struct node *n = f->n;
	pthread_rwlock_wrlock(&n->rw);
	struct writer *w;
	int rc = ns_lost(ns, n->ino, 0);
	if (rc == 0)
		rc = ns_writer(ns, n, &w);
	if (rc == 0 && off + len > writer_size(w))
		rc = writer_truncate(w, off + len);
	rc = ns_lost(ns, n->ino, rc);
	pthread_rwlock_unlock(&n->rw);
	ns_file_wrote(f);
	return rc;
}

/* Invariant 13: the commit's gate (writer_commit_gated) for a handle. */
struct ns_gate {
	struct ns *ns;
	const struct ns_file *f;
};

/* Invariant 13: is the file f is open on outside generations? A handle
 * for writing knows it from its open; another asks the catalog. */
static bool ns_outside_gens(struct ns *ns, const struct ns_file *f)
{
	return f->writable ? f->gen_id == 0 : ns_gen_of(ns, f->n->ino) == 0;
}

/* Invariant 13: a small file outside generations on a shared catalog is
 * uploaded before its new content is published. Waits with n->rw held
 * (no reader of it here needs BACKING); a wait that fails publishes with
 * one line saying where the content is. */
static void ns_upload_first(void *arg, uint64_t ino, uint64_t size)
{
	struct ns_gate *g = arg;
	struct ns *ns = g->ns;
	if (size > NS_UPLOAD_FIRST_BYTES || !ns_outside_gens(ns, g->f))
		return;
	int rc = ns->wait_pending(ns->wait_arg, ino, ns->cfg.backing_timeout_ms);
	if (rc == 0)
		return;
	char why[80];
	if (rc == -ENETDOWN)
		snprintf(why, sizeof(why), "BACKING is not answering");
	else if (rc == -ETIMEDOUT)
		snprintf(why, sizeof(why), "not uploaded within backing_timeout (%u s)",
			 ns->cfg.backing_timeout_ms / 1000);
	else
		snprintf(why, sizeof(why), "%s", strerror(-rc));
	log_warn("file inode %llu (%llu bytes, outside generations): its new content is not on"
		 " BACKING (%s); published from this node's cache alone: other nodes read it once"
		 " it is uploaded, and with EIO if this node dies before (catalog_shared_data.c"
		 " S6)", (unsigned long long)ino, (unsigned long long)size, why);
}

/* Commits the file's writer, if any; frees it when no handle is left, and
 * then, if it was written (a writer, or a writable handle: a create), clears
 * its being-written mark (generation.h G7) under n->rw, before a new writer
 * can mark it again: with the writer's drop in one catalog change when its
 * last commit succeeded, else on its own. A file whose create a rolled-back
 * catalog batch took answers that batch's error (catalog_defer.c D10). */
static int ns_commit(struct ns *ns, const struct ns_file *f, bool durable, bool last,
		     bool writable)
{
	struct node *n = f->n;
	/* invariant 13: one node's cache dies with its catalog: no gate alone */
	bool gated = ns->wait_pending && cat_is_shared(ns->cat);
	struct ns_gate gate = { ns, f };
	pthread_rwlock_wrlock(&n->rw);
	int rc = ns_lost(ns, n->ino, 0);
	bool written = writable || n->writer != NULL, unmarked = false;
	/* invariant 13: a close that is not the last (FLUSH of a dup: a shell's
	 * `> latest` closes one before it writes) publishes no cut to empty of a
	 * file the gate applies to; the close with content, an fsync or the
	 * last release does */
	bool cut_only = gated && !durable && !last && n->writer && writer_size(n->writer) == 0 &&
			ns_outside_gens(ns, f);
	if (n->writer && !cut_only) {
		if (rc == 0)
			rc = writer_commit_gated(n->writer, durable, gated ? ns_upload_first : NULL,
						 &gate);
		if (last && rc == 0) /* the drop and the clear in one change */
			unmarked = writer_free_unmark(n->writer) == 0;
		else if (last)
			writer_free(n->writer);
		if (last)
			n->writer = NULL;
	} else if (durable && rc == 0) {
		rc = store_syncfs(ns->store);
		if (rc == 0)
			rc = cat_sync(ns->cat);
	}
	if (rc == 0 && last && written && !unmarked)
		rc = cat_file_unmark(ns->cat, n->ino);
	rc = ns_lost(ns, n->ino, rc);
	/* -o meta=: a failed close of a written file sets its failed flag
	 * before its ns_writing row goes, so one or the other holds its save
	 * (pggen.h X14; alone the mark above stays: generation.h G9) */
	if (rc != 0 && written && (last || writable)) {
		int frc = cat_file_failed(ns->cat, n->ino);
		if (frc != 0 && frc != -ESTALE) /* fenced: its writing row stays for X2 */
			log_error("inode %llu: cannot tell the shared catalog its close failed: %s;"
				  " its save may be committed by a rule", (unsigned long long)n->ino,
				  strerror(-frc));
	}
	pthread_rwlock_unlock(&n->rw);
	return rc;
}

/* Invariant 11: was a file of NS_FLUSH_COMMIT_BYTES or more written
 * through f? */
static bool ns_flush_big(struct ns *ns, const struct ns_file *f)
{
	struct cat_inode in;
	return f->wrote && cat_getattr(ns->cat, f->n->ino, &in) == 0 &&
	       in.size >= NS_FLUSH_COMMIT_BYTES;
}

int ns_flush(struct ns *ns, struct ns_file *f)
{
	int rc = ns_commit(ns, f, false, false, false);
	uint64_t parent;
	char name[40];
	/* invariant 11: a large file's close returns once it is on disk in the
	 * catalog (an engine that defers nothing: a no-op) */
	if (rc == 0 && f->gen_id != 0 && ns_flush_big(ns, f))
		rc = cat_defer_commit(ns->cat);
	/* invariant 9: a completion signal's close implies every file before it
	 * is committed; once per save (an engine that defers nothing: a no-op) */
	if (rc == 0 && (f->writable || f->wrote) &&
	    node_trigger(ns->nodes, f->n, &parent, name, sizeof(name))) {
		rc = cat_defer_commit(ns->cat);
		/* invariant 10: a tracker's rule before close(2) returns */
		if (rc == 0 && f->wrote && f->gen_id == 0) {
			gen_file_closed(ns->gen, f->n->ino, parent, name, 0, f->uid);
			f->tracker_ruled = true;
		}
	}
	if (rc == 0) /* invariant 14: once close(2) returns, no row names the file */
		ns_writing_park(ns, f);
	return rc;
}

int ns_fsync(struct ns *ns, struct ns_file *f)
{
	int rc = ns_commit(ns, f, true, false, false);
	if (rc == 0 && ns->cfg.sync_backing) /* -o sync=backing: on BACKING before we return */
		rc = ns->wait_backing(ns->wait_arg, f->n->ino, ns->cfg.backing_timeout_ms);
	return rc;
}

int ns_release(struct ns *ns, struct ns_file *f)
{
	bool last = node_close(ns->nodes, f->n) == 0;
	int rc = ns_commit(ns, f, false, last, f->writable);
	/* generation.h G9: a failed last close keeps the file's mark, so its
	 * save is committed by an explicit decision only (fs/gen.h 16) */
	if (rc != 0)
		log_error("inode %llu: commit at %sclose failed: %s%s", (unsigned long long)f->n->ino,
			  last ? "last " : "", strerror(-rc),
			  last && f->gen_id ? "; its save is held, not committed by a rule" : "");
	return rc;
}

/* After the close was replied: a written trigger file (metadata.json,
 * meta.pt, a tracker, ...) fires its rule; a writer leaving its generation
 * may let a waiting commit run. */
void ns_release_done(struct ns *ns, struct ns_file *f, int rc)
{
	struct node *n = f->n;
	uint64_t parent;
	char name[40];
	if (rc == 0 && f->wrote && !f->tracker_ruled &&
	    node_trigger(ns->nodes, n, &parent, name, sizeof(name)))
		gen_file_closed(ns->gen, n->ino, parent, name, f->gen_id, f->uid);
	if (f->writable)
		ns_writer_leave(ns, n, f->gen_id);
	ns_closed_shared(ns, n);
	node_put(ns->nodes, n); /* the reference ns_release's node_close took */
	ns_files_unlink(ns, f);
	free(f);
}

/* ---- generations as seen through xattrs ---- */

int ns_gen_describe(struct ns *ns, uint64_t ino, char *buf, size_t size)
{
	return gen_describe(ns->gen, ns_gen_of(ns, ino), buf, size);
}

bool ns_in_generation(struct ns *ns, uint64_t ino)
{
	return ns_gen_of(ns, ino) != 0;
}

/* Root and the daemon's owner may steer generations by hand. */
static int ns_gen_control_allowed(const struct ns_cred *c)
{
	return c->uid == 0 || c->uid == getuid() ? 0 : -EPERM;
}

int ns_gen_commit(struct ns *ns, const struct ns_cred *c, uint64_t ino)
{
	int rc = ns_gen_control_allowed(c);
	uint64_t gen_id = rc == 0 ? ns_gen_of(ns, ino) : 0;
	if (rc == 0 && !gen_id)
		rc = -EINVAL; /* not in a generation */
	return rc == 0 ? gen_commit_explicit(ns->gen, gen_id, "explicit") : rc;
}

int ns_gen_pin(struct ns *ns, const struct ns_cred *c, uint64_t ino, bool pinned)
{
	int rc = ns_gen_control_allowed(c);
	uint64_t gen_id = rc == 0 ? ns_gen_of(ns, ino) : 0;
	if (rc == 0 && !gen_id)
		rc = -EINVAL;
	return rc == 0 ? gen_pin(ns->gen, gen_id, pinned) : rc;
}
