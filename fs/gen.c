/* gen — the generation policy; see gen.h for the rules and invariants.
 *
 * In memory, one `gen_live` per OPEN generation (is_open), and per committed
 * one that has write handles open (a handle opened for writing may write
 * later, which reopens the generation): its open write handles, last
 * activity, the processes that wrote to it, and a commit waiting for the
 * writers to close (or for a quiet period). The catalog holds everything
 * durable; this state starts empty because no generation is OPEN after
 * recovery (generation.h, G4). */
#define _GNU_SOURCE
#include "gen.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "generation.h"
#include "log.h"
#include "manifest.h"
#include "node.h"
#include "proof.h"
#include "store.h"
#include "upload.h"

#define GEN_MAX_PIDS 16
#define GEN_TICK_MS 200
/* How often a commit that waits for other nodes' writers is tried again
 * (the shared engine's -EBUSY: docs/MULTINODE.md "Generations span nodes"). */
#define GEN_REMOTE_POLL_MS 80
#define GEN_TRACKER_MAX 256
#define GEN_KEEP_QUEUE 16 /* series waiting for keep-latest-k; more: all of them */
#define GEN_SAID 64 /* saves whose once-a-run line went out at info (gen_said) */
/* keep-latest-k is a cluster duty on the shared engine (catalog.h
 * cat_duty_take): one node's passes at a time, each dropping the duty when
 * done. The term only matters if its holder dies in a pass: the others wait
 * that long. */
#define GEN_KEEP_DUTY "keep"
#define GEN_KEEP_DUTY_MS 30000
#define GEN_MAX_GROUPS 32
/* The rule of invariant 15: a rewrite that only added closed files to the
 * committed version it replaces. */
#define GEN_RULE_ADDED "added"

/* Who a commit acts for: the file system credentials of the last process
 * seen changing the generation (keep-latest-k deletes only what they could
 * delete by hand). uid 0, or unknown: the daemon's own judgement. */
struct gen_cred {
	bool known;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[GEN_MAX_GROUPS];
};

#define GEN_CHANGE_SLOTS 256
#define GEN_COMMIT_TRIES 4 /* syncfs rounds before a changing generation waits for the tick */

struct gen_live {
	uint64_t id, series;
	bool is_open;   /* OPEN in the catalog; else committed with writers */
	uint32_t writers;
	int64_t last_activity_ns;
	char pending_rule[GEN_RULE_MAX]; /* a commit waiting for the writers */
	bool pending_quiet;
	/* since when that commit has waited for files another node still has
	 * open for writing (0: it does not); the abandon bound counts from it */
	int64_t remote_wait_ns;
	bool expects_marker; /* saw a file of a marker layout (gen_name_implies_marker) */
	/* an OPEN version+1: reopened here (gen_before_change), or found so by
	 * gen_writer_opened (another node reopened it); invariant 15 */
	bool rewrite;
	pid_t tids[GEN_MAX_PIDS]; /* threads seen writing */
	pid_t pids[GEN_MAX_PIDS]; /* their processes */
	int npids;
	struct gen_cred cred;    /* of the last process seen writing */
	int64_t proved_ns;       /* last_activity_ns when the content was last judged */
	char unproven[GEN_HELD_MAX]; /* why that judgement did not prove it complete */
	struct gen_live *next;
};

struct gen_policy {
	struct cat *cat;
	struct store *store; /* invariant 7; NULL: nothing to sync */
	/* one commit at a time, its sync and its catalog transaction together:
	 * of two rules that fire for one generation, the first to start its
	 * sync commits (the other finds it committed), as before the sync */
	pthread_mutex_t commit_lock;
	/* write handles opened and changes started, per generation id modulo
	 * GEN_CHANGE_SLOTS (gen_writer_opened, gen_settled): a commit asks, inside its catalog transaction,
	 * that its generation's slot has not moved since before its syncfs
	 * (invariant 7). Another generation sharing the slot costs a syncfs. */
	_Atomic uint64_t opened[GEN_CHANGE_SLOTS];
	/* the generation whose commit passed its check (gen_unchanged) and has
	 * not yet forgotten its open state: a change of it waits (invariant 9).
	 * One at a time: commits hold commit_lock. */
	_Atomic uint64_t committing;
	struct node_table *nodes;
	proof_read_fn read; /* file bytes for proofs and tracker files */
	void *read_arg;
	struct gen_options opt;
	regex_t re;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct gen_live *live;
	pthread_t thread;
	bool running, stop;
	/* keep-latest-k waiting for the thread (gen_keep_request) */
	bool recheck_held; /* gen_policy_ready: judge crash-held ones once */
	uint64_t keep_series[GEN_KEEP_QUEUE];
	struct gen_cred keep_cred[GEN_KEEP_QUEUE];
	int nkeep;
	bool keep_all;
	bool keep_waits_duty; /* another node holds "keep": retry next tick */
	/* ids of the lost saves keep-held kept and said so at info in this run
	 * (a ring, under lock): later passes say it at debug (review 36 F5b) */
	uint64_t said[GEN_SAID]; /* gen_said's ring: id << 3 | line */
	unsigned said_next;
};

static int64_t gen_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- matching ---- */

/* Compiles o's pattern into re; prints a line naming it if it does not. */
static int gen_compile(const struct gen_options *o, regex_t *re)
{
	const char *pat = o->pattern[0] ? o->pattern : GEN_DEFAULT_PATTERN;
	int rc = regcomp(re, pat, REG_EXTENDED);
	if (rc != 0) {
		char why[256];
		regerror(rc, re, why, sizeof(why));
		fprintf(stderr, "ckptfs: option 'gen_pattern=%s': not a regular expression: %s\n", pat, why);
		return -EINVAL;
	}
	return 0;
}

int gen_pattern_check(const struct gen_options *o)
{
	regex_t re;
	int rc = gen_compile(o, &re);
	if (rc == 0)
		regfree(&re);
	return rc;
}

int gen_policy_new(const struct gen_deps *d, const struct gen_options *o, struct gen_policy **out)
{
	assert(d->cat && d->nodes && d->read);
	struct gen_policy *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cat = d->cat;
	g->store = d->store;
	g->nodes = d->nodes;
	g->read = d->read;
	g->read_arg = d->read_arg;
	g->opt = *o;
	if (gen_compile(o, &g->re) != 0) {
		free(g);
		return -EINVAL;
	}
	pthread_mutex_init(&g->lock, NULL);
	pthread_mutex_init(&g->commit_lock, NULL);
	pthread_cond_init(&g->wake, NULL);
	*out = g;
	return 0;
}

bool gen_name_matches(struct gen_policy *g, const char *name, uint64_t *step)
{
	regmatch_t m[10];
	if (regexec(&g->re, name, 10, m, 0) != 0)
		return false;
	/* the step: the last capture group that is all digits */
	for (int i = 9; i >= 1; i--) {
		if (m[i].rm_so < 0 || m[i].rm_eo <= m[i].rm_so)
			continue;
		uint64_t v = 0;
		bool digits = true, fits = true;
		for (regoff_t k = m[i].rm_so; k < m[i].rm_eo && digits; k++) {
			char c = name[k];
			digits = c >= '0' && c <= '9';
			unsigned d = (unsigned)(c - '0');
			/* the catalogs keep a step as a signed 64-bit integer: a larger
			 * number would wrap or turn negative and sort as the oldest
			 * save, the first keep-latest-k deletes; such a name is no
			 * generation's (a plain entry: nothing deletes it) */
			fits = fits && v <= ((uint64_t)INT64_MAX - d) / 10;
			v = v * 10 + d;
		}
		if (digits && !fits)
			return false;
		if (digits) {
			*step = v;
			return true;
		}
	}
	return false;
}

const struct cat_gen_spec *gen_spec_for(struct gen_policy *g, uint64_t parent, const char *name,
					struct cat_gen_spec *spec)
{
	uint64_t step, parent_gen = 0;
	if (!gen_name_matches(g, name, &step))
		return NULL;
	if (cat_gen_of(g->cat, parent, &parent_gen) != 0 || parent_gen != 0)
		return NULL; /* inside a generation: an ordinary entry of it */
	spec->name = name;
	spec->step = step;
	return spec;
}

bool gen_hidden(struct gen_policy *g, uint64_t dir, const char *name)
{
	uint64_t step;
	/* a save a rebuild held under NAME.rebuild-ID (manifest.h M4), or a
	 * rolled-back version kept as NAME.rewrite-ID (generation.h G10),
	 * matches no pattern, and is hidden as any held one */
	if (g->opt.show_open ||
	    (!gen_name_matches(g, name, &step) && strstr(name, MANIFEST_HELD_SUFFIX) == NULL &&
	     !cat_gen_is_kept_name(name)))
		return false;
	struct cat_gen gen;
	return cat_gen_find(g->cat, dir, name, &gen) == 0 &&
	       (gen.state == GEN_OPEN || gen.state == GEN_HELD);
}

bool gen_is_trigger_name(const char *name)
{
	static const char *const names[] = { "metadata.json", "meta.pt", "trainer_state.json", "latest",
					     "latest_checkpointed_iteration.txt", ".ckptfs-commit", NULL };
	for (int i = 0; names[i]; i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* ---- live state (g->lock held) ---- */

static struct gen_live *gen_live_find(struct gen_policy *g, uint64_t id)
{
	for (struct gen_live *l = g->live; l; l = l->next)
		if (l->id == id)
			return l;
	return NULL;
}

static struct gen_live *gen_live_get(struct gen_policy *g, uint64_t id, uint64_t series)
{
	assert(id != 0); /* 0 is "in no generation" */
	struct gen_live *l = gen_live_find(g, id);
	if (l || !(l = calloc(1, sizeof(*l))))
		return l;
	l->id = id;
	l->series = series;
	l->is_open = true;
	l->last_activity_ns = gen_now_ns();
	l->next = g->live;
	g->live = l;
	return l;
}

static void gen_live_drop(struct gen_policy *g, uint64_t id)
{
	for (struct gen_live **pp = &g->live; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			struct gen_live *l = *pp;
			*pp = l->next;
			free(l);
			return;
		}
	}
}

/* "Groups:\t1 2 3" into c. */
static void gen_cred_groups(struct gen_cred *c, const char *list)
{
	char *end;
	c->ngroups = 0;
	for (const char *p = list; c->ngroups < GEN_MAX_GROUPS;) {
		unsigned long v = strtoul(p, &end, 10);
		if (end == p)
			break;
		c->groups[c->ngroups++] = (gid_t)v;
		p = end;
	}
}

/* FUSE names the calling thread; a save thread (DCP async_save) may exit
 * while its process lives on, so liveness is judged by the thread group.
 * The same read gives the thread's file system credentials (what the kernel
 * checks permissions with). */
static pid_t gen_tgid(pid_t tid, struct gen_cred *cred)
{
	char path[64], line[1024];
	unsigned long ids[4];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "re");
	pid_t tgid = tid;
	if (!f)
		return tid;
	struct gen_cred c = { .known = false };
	bool uid = false, gid = false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			continue;
		if (sscanf(line, "Uid: %lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4) {
			c.uid = (uid_t)ids[3];
			uid = true;
		} else if (sscanf(line, "Gid: %lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4) {
			c.gid = (gid_t)ids[3];
			gid = true;
		} else if (strncmp(line, "Groups:", 7) == 0) {
			gen_cred_groups(&c, line + 7);
		}
	}
	fclose(f);
	c.known = uid && gid;
	if (c.known && cred)
		*cred = c;
	return tgid;
}

static void gen_note_pid(struct gen_live *l, pid_t tid)
{
	if (tid <= 0)
		return;
	for (int i = 0; i < l->npids; i++)
		if (l->tids[i] == tid)
			return;
	int at = l->npids < GEN_MAX_PIDS ? l->npids++ : (int)(tid % GEN_MAX_PIDS);
	l->tids[at] = tid;
	l->pids[at] = gen_tgid(tid, &l->cred);
}

static bool gen_writers_alive(const struct gen_live *l)
{
	for (int i = 0; i < l->npids; i++)
		if (kill(l->pids[i], 0) == 0 || errno == EPERM)
			return true;
	return false;
}

/* ---- acting on the catalog (no g->lock held) ---- */

/* Lines said at info once per save and run, at debug after (gen_said). */
enum gen_said_line {
	GEN_SAID_KEPT_LOST, /* keep-held kept a lost save */
	GEN_SAID_NEXT_OWNER, /* next-gen left another user's save (invariant 14) */
	GEN_SAID_KEPT_WEAK,  /* keep kept saves: the newer ones are weak (series id) */
	GEN_SAID_KEPT_LATEST, /* keep kept the owner's last commit (invariant 3) */
	GEN_SAID_KEPT_WRITER, /* keep kept a save with a file open for writing (invariant 18) */
};
_Static_assert(GEN_SAID_KEPT_WRITER < 8, "gen_said's key keeps 3 bits for the line");

/* Was line said at info in this run for save id? Records it if not. Every
 * keep pass (after every commit) looks at each lost save again while its
 * node stays away, and every save that starts in a shared series looks at
 * the other users' open ones: once at info is news, the rest noise. A ring
 * of GEN_SAID entries bounds the memory; past that many one may be said at
 * info again. Takes g->lock. */
static bool gen_said(struct gen_policy *g, uint64_t id, enum gen_said_line line)
{
	uint64_t key = id << 3 | (uint64_t)line; /* 3 bits: 5 lines */
	pthread_mutex_lock(&g->lock);
	bool said = false;
	for (size_t i = 0; i < GEN_SAID && !said; i++)
		said = g->said[i] == key;
	if (!said)
		g->said[g->said_next++ % GEN_SAID] = key;
	pthread_mutex_unlock(&g->lock);
	return said;
}

/* After a tree left the namespace: its inodes go to the node table
 * (node_unlinked_many), which releases them in a few large transactions on
 * its reaper thread, not on this one. The kernel is not told (no
 * notify_inval_entry): that call waits for the directory's lock, and a daemon
 * killed while it waits can never exit, hanging the mount. Entries expire by
 * themselves within the entry timeout (1 s). */
static void gen_after_removal(struct gen_policy *g, struct cat_id_vec *v)
{
	node_unlinked_many(g->nodes, v->v, v->n);
	cat_id_vec_free(v);
}

enum gen_end_how {
	GEN_END_ABORT,  /* OPEN → ABORTED (or the previous version restored) */
	GEN_END_DELETE, /* OPEN or COMMITTED → DELETED */
	GEN_END_EXPIRE, /* keep-latest-k: as chosen (gen.h 3, 6) → DELETED, else nothing */
};

/* The inodes with a write handle open here, for an expire's transaction
 * (generation.h G11): called under the catalog lock, it takes only the
 * node table's lock (a leaf). */
static int gen_writing_inos(void *arg, struct cat_id_vec *inos)
{
	struct gen_policy *g = arg;
	for (size_t cap = 256;; cap *= 2) {
		uint64_t *v = malloc(cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		size_t n = node_writing(g->nodes, v, cap);
		if (n < cap) {
			free(inos->v);
			*inos = (struct cat_id_vec){ .v = v, .n = n, .cap = cap };
			return 0;
		}
		free(v); /* maybe more than cap: ask again with room */
	}
}

static int gen_end_call(struct gen_policy *g, uint64_t id, const char *rule, enum gen_end_how how,
			struct cat_id_vec *v)
{
	assert(id != 0 && rule && rule[0]);
	switch (how) {
	case GEN_END_ABORT:
		return cat_gen_abort(g->cat, id, rule, cat_id_vec_add_ino, v);
	case GEN_END_DELETE:
		return cat_gen_delete(g->cat, id, rule, cat_id_vec_add_ino, v);
	case GEN_END_EXPIRE:
		return cat_gen_expire_if(g->cat, id, g->opt.keep, rule, gen_writing_inos, g,
					 cat_id_vec_add_ino, v);
	}
	return -EINVAL;
}

/* 0 once ended (or kept: an expire that lost its race); else the catalog's
 * error (logged): the admin's rm names it. */
static int gen_end(struct gen_policy *g, uint64_t id, const char *rule, enum gen_end_how how)
{
	struct cat_gen gen;
	int got = cat_gen_get_brief(g->cat, id, &gen);
	if (got != 0)
		return got;
	const char *verb = how == GEN_END_ABORT ? "abort" : "delete";
	struct cat_id_vec v = { 0 };
	int64_t t0 = gen_now_ns();
	int rc = gen_end_call(g, id, rule, how, &v);
	if (rc == -EBUSY && how == GEN_END_EXPIRE) {
		log_info("generation %s (series inode %llu, step %llu): kept: reopened, pinned,"
			 " fewer than %u newer saves of its owner left (lost or removed), none"
			 " of them durable while it is durable or lost (pggen.h X13), or a file"
			 " of it open for writing on a node (pggen.h X12), since keep-latest-k"
			 " chose it", gen.name,
			 (unsigned long long)gen.series, (unsigned long long)gen.step, g->opt.keep);
		return 0;
	}
	if (rc == -ETXTBSY && how == GEN_END_EXPIRE) { /* invariant 18 */
		log_msg(gen_said(g, id, GEN_SAID_KEPT_WRITER) ? LOG_LVL_DEBUG : LOG_LVL_INFO,
			"generation %s (series inode %llu, step %llu): kept by keep-latest-k: a"
			" file of it is open for writing; keep-latest-k decides again when the"
			" last such handle closes (a write into it makes it a new version)",
			gen.name, (unsigned long long)gen.series, (unsigned long long)gen.step);
		return 0;
	}
	if (rc != 0) {
		log_error("generation %s (series inode %llu, step %llu): %s (%s) failed: %s", gen.name,
			  (unsigned long long)gen.series, (unsigned long long)gen.step, verb, rule,
			  strerror(-rc));
		cat_id_vec_free(&v);
		return rc;
	}
	int64_t t1 = gen_now_ns();
	pthread_mutex_lock(&g->lock);
	gen_live_drop(g, id);
	pthread_mutex_unlock(&g->lock);
	size_t inodes = v.n;
	gen_after_removal(g, &v);
	log_info("generation %s (series inode %llu, step %llu) %s: %s (removed in %.1f ms; %zu"
		 " inodes handed to release in %.1f ms)", gen.name, (unsigned long long)gen.series,
		 (unsigned long long)gen.step, how == GEN_END_ABORT ? "aborted" : "deleted", rule,
		 (double)(t1 - t0) / 1e6, inodes, (double)(gen_now_ns() - t1) / 1e6);
	return 0;
}

/* OPEN → HELD (generation.h G5): hidden, kept byte for byte, until a decision. */
static void gen_hold(struct gen_policy *g, uint64_t id, const char *rule, const char *reason)
{
	struct cat_gen gen;
	struct cat_id_vec v = { 0 };
	bool held = false;
	assert(id != 0 && reason && reason[0]); /* a held save always says why (generation.h G5) */
	if (cat_gen_get_brief(g->cat, id, &gen) != 0)
		return;
	if (gen.state != GEN_OPEN && gen.state != GEN_HELD) {
		/* decided elsewhere (shared catalog: the node that wrote the marker
		 * committed it): nothing left to hold, and the hold would be refused
		 * at every tick */
		pthread_mutex_lock(&g->lock);
		gen_live_drop(g, id);
		pthread_mutex_unlock(&g->lock);
		log_debug("generation %s: no hold (%s), it is no longer open", gen.name, reason);
		return;
	}
	/* generation.h G13: held for a lost chunk, whichever rule found it so */
	if (strncmp(reason, GEN_LOST_CHUNK_REASON " ", strlen(GEN_LOST_CHUNK_REASON) + 1) == 0)
		rule = GEN_LOST_CHUNK_RULE;
	int rc = cat_gen_hold(g->cat, id, rule, reason, cat_id_vec_add_ino, &v, &held);
	if (rc != 0 && rc != -EALREADY) {
		log_error("generation %s (series inode %llu, step %llu): hold (%s) failed: %s; it"
			  " stays open", gen.name, (unsigned long long)gen.series,
			  (unsigned long long)gen.step, reason, strerror(-rc));
		cat_id_vec_free(&v);
		return;
	}
	pthread_mutex_lock(&g->lock);
	gen_live_drop(g, id);
	pthread_mutex_unlock(&g->lock);
	gen_after_removal(g, &v);
	if (rc == -EALREADY)
		return;
	if (held)
		log_warn("generation %s (series inode %llu, step %llu) held: %s. Not listed, kept"
			 " byte for byte; `ckptfs-admin list --all` shows it, `ckptfs-admin commit`"
			 " or `rm` decides", gen.name, (unsigned long long)gen.series,
			 (unsigned long long)gen.step, reason);
	else
		log_warn("generation %s (series inode %llu, step %llu): version %u rolled back (%s),"
			 " kept held beside it (generation.h G10); version %u restored", gen.name,
			 (unsigned long long)gen.series, (unsigned long long)gen.step, gen.version,
			 reason, gen.version - 1);
}

static int gen_keep_cmp(const void *a, const void *b)
{
	const struct cat_gen *x = a, *y = b;
	if (x->step != y->step)
		return x->step > y->step ? -1 : 1;
	if (x->committed_ns != y->committed_ns)
		return x->committed_ns > y->committed_ns ? -1 : 1;
	return x->id > y->id ? -1 : (x->id < y->id);
}

static int gen_list_add_committed(void *arg, const struct cat_gen *gen)
{
	return gen->state == GEN_COMMITTED ? cat_gen_vec_add(arg, gen) : 0;
}

static int gen_list_add_held(void *arg, const struct cat_gen *gen)
{
	return gen->state == GEN_HELD ? cat_gen_vec_add(arg, gen) : 0;
}

static bool gen_cred_in_group(const struct gen_cred *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

/* Does c have all of `want` (rwx bits, 07) on in, as the kernel checks? */
static bool gen_cred_may(const struct gen_cred *c, const struct cat_inode *in, unsigned want)
{
	unsigned bits = in->uid == c->uid ? in->mode >> 6 : gen_cred_in_group(c, in->gid) ? in->mode >> 3
											    : in->mode;
	return (bits & want) == want;
}

/* Could the user of c remove the generation by hand (`rm -rf SERIES/NAME`)?
 * Write and search on the series directory, the sticky bit's owner rule
 * there, and read, write and search on a directory root. Root may. */
static bool gen_may_delete(struct gen_policy *g, const struct gen_cred *c, const struct cat_gen *gen)
{
	struct cat_inode series, root;
	assert(c->known); /* gen_keep_actor: the committer, or the save's owner */
	if (c->uid == 0)
		return true;
	if (cat_getattr(g->cat, gen->series, &series) != 0 ||
	    cat_getattr(g->cat, gen->root, &root) != 0)
		return false;
	if (!gen_cred_may(c, &series, 03))
		return false;
	if ((series.mode & S_ISVTX) && c->uid != series.uid && c->uid != root.uid)
		return false;
	return !S_ISDIR(root.mode) || gen_cred_may(c, &root, 07);
}

static void gen_keep_end(struct gen_policy *g, const struct gen_cred *c, const struct cat_gen *gen,
			 const char *rule)
{
	/* invariant 3: only an unpinned COMMITTED (or HELD) one is ever chosen */
	assert(!gen->pinned && (gen->state == GEN_COMMITTED || gen->state == GEN_HELD));
	if (gen_may_delete(g, c, gen)) {
		gen_end(g, gen->id, rule, GEN_END_EXPIRE);
		return;
	}
	log_info("generation %s (series inode %llu, step %llu): kept by keep-latest-k: uid %u, whose"
		 " commit triggered it (or, with none, the save's owner), could not delete it by"
		 " hand (directory permissions or the sticky bit)", gen->name,
		 (unsigned long long)gen->series, (unsigned long long)gen->step, (unsigned)c->uid);
}

/* The owner of a generation's root: keep-latest-k's partition of a series
 * (gen.h invariant 6), and whom a pass with no committer acts for. */
struct gen_owner {
	bool known; /* false: the root could not be read; the save is kept */
	uid_t uid;
	gid_t gid;
};

static struct gen_owner gen_owner_of(struct gen_policy *g, const struct cat_gen *gen)
{
	struct cat_inode root;
	int rc = cat_getattr(g->cat, gen->root, &root);
	if (rc != 0) {
		log_warn("generation %s (series inode %llu, step %llu): keep-latest-k cannot read the"
			 " owner of its root (inode %llu): %s; kept this time", gen->name,
			 (unsigned long long)gen->series, (unsigned long long)gen->step,
			 (unsigned long long)gen->root, strerror(-rc));
		return (struct gen_owner){ .known = false };
	}
	return (struct gen_owner){ .known = true, .uid = root.uid, .gid = root.gid };
}

/* Whom a pass deletes gen for: the committing user c, or (none) the save's
 * owner, who could remove it by hand. */
static struct gen_cred gen_keep_actor(const struct gen_cred *c, const struct gen_owner *o)
{
	assert(o->known);
	if (c->known)
		return *c;
	return (struct gen_cred){ .known = true, .uid = o->uid, .gid = o->gid };
}

/* A series' committed generations, newest first (by step, then commit
 * time), with their owners. */
struct gen_keep_list {
	struct cat_gen_vec gens;
	struct gen_owner *owner; /* one per gens.v[i] */
};

static void gen_keep_list_free(struct gen_keep_list *k)
{
	cat_gen_vec_free(&k->gens);
	free(k->owner);
	k->owner = NULL;
}

/* Is one of the saves of k newer than held (by step) whose owner is uid
 * durable (on BACKING at its version)? */
static bool gen_keep_newer_durable(struct gen_policy *g, const struct gen_keep_list *k,
				   const struct cat_gen *held, uid_t uid)
{
	for (size_t j = 0; j < k->gens.n; j++) {
		bool durable = false;
		if (k->owner[j].known && k->owner[j].uid == uid && k->gens.v[j].step > held->step &&
		    !cat_gen_rule_weak(k->gens.v[j].rule) &&
		    cat_gen_durable(g->cat, k->gens.v[j].id, &durable) == 0 && durable)
			return true;
	}
	return false;
}

/* HELD ones of the series go once `keep` committed ones of the same owner
 * are newer (by step): another user's saves never count (invariant 6). A
 * lost save (pggen.h X13: committed, shown held while its node is away)
 * goes only once one of those is durable too: the transaction asks again. */
static void gen_keep_held(struct gen_policy *g, uint64_t series, const struct gen_keep_list *k,
			  const struct gen_cred *c)
{
	struct cat_gen_vec h = { 0 };
	if (cat_gen_list_brief(g->cat, series, false, gen_list_add_held, &h) == 0)
		for (size_t i = 0; i < h.n; i++) {
			if (h.v[i].pinned)
				continue;
			struct gen_owner o = gen_owner_of(g, &h.v[i]);
			size_t newer = 0;
			for (size_t j = 0; o.known && j < k->gens.n; j++)
				newer += k->owner[j].known && k->owner[j].uid == o.uid &&
					 !cat_gen_rule_weak(k->gens.v[j].rule) &&
					 k->gens.v[j].step > h.v[i].step; /* invariant 3 */
			if (!o.known || newer < g->opt.keep)
				continue;
			if (h.v[i].lost && !gen_keep_newer_durable(g, k, &h.v[i], o.uid)) {
				log_msg(gen_said(g, h.v[i].id, GEN_SAID_KEPT_LOST) ? LOG_LVL_DEBUG : LOG_LVL_INFO,
					"generation %s (series inode %llu, step %llu): kept by"
					" keep-held: lost only while the node that has its chunks"
					" is away, and none of the %zu newer saves of its owner is"
					" on BACKING yet (pggen.h X13)", h.v[i].name,
					(unsigned long long)h.v[i].series,
					(unsigned long long)h.v[i].step, newer);
				continue;
			}
			struct gen_cred actor = gen_keep_actor(c, &o);
			gen_keep_end(g, &actor, &h.v[i], "keep-held");
		}
	cat_gen_vec_free(&h);
}

/* The index in k of the most recently committed save (commit time, then
 * id) of the owner of k->gens.v[first] (invariant 3). */
static size_t gen_keep_latest(const struct gen_keep_list *k, size_t first)
{
	size_t latest = first;
	for (size_t i = first + 1; i < k->gens.n; i++) {
		const struct cat_gen *x = &k->gens.v[i], *y = &k->gens.v[latest];
		if (k->owner[i].known && k->owner[i].uid == k->owner[first].uid &&
		    (x->committed_ns > y->committed_ns ||
		     (x->committed_ns == y->committed_ns && x->id > y->id)))
			latest = i;
	}
	return latest;
}

/* Says why keep kept gen (invariant 3): it is its owner's last commit, or
 * the newer saves that would make it go are weak commits (once a series). */
static void gen_keep_said_kept(struct gen_policy *g, const struct cat_gen *gen, bool latest,
			       size_t strong, size_t weak)
{
	if (latest) {
		log_msg(gen_said(g, gen->id, GEN_SAID_KEPT_LATEST) ? LOG_LVL_DEBUG : LOG_LVL_INFO,
			"generation %s (series inode %llu, step %llu): kept by keep-latest-k: it is"
			" its owner's most recently committed save, although %zu saves of a higher"
			" step are kept (gen.h invariant 3)", gen->name,
			(unsigned long long)gen->series, (unsigned long long)gen->step, strong);
		return;
	}
	log_msg(gen_said(g, gen->series, GEN_SAID_KEPT_WEAK) ? LOG_LVL_DEBUG : LOG_LVL_WARN,
		"generation %s (series inode %llu, step %llu): kept by keep-latest-k: %zu of"
		" the newer saves were committed by a weak rule (unmount, next-gen) without"
		" proof of being complete and never count toward keep; this series grows until"
		" saves are committed by a signal (a .ckptfs-commit marker, a tracker file, a"
		" format ckptfs can check; docs/GENERATIONS.md)", gen->name,
		(unsigned long long)gen->series, (unsigned long long)gen->step, weak);
}

/* keep-latest-k over the saves of one owner, those of k whose owner is that
 * of k->gens.v[first] (its newest): once `keep` newer saves committed by a
 * strong rule exist, all but pinned ones, the owner's newest durable one
 * and the owner's most recently committed one go (invariants 3, 6). */
static void gen_keep_owner(struct gen_policy *g, const struct gen_keep_list *k, size_t first,
			   const struct gen_cred *c)
{
	const struct gen_owner *o = &k->owner[first];
	struct gen_cred actor = gen_keep_actor(c, o);
	size_t rank = 0;           /* the owner's strong saves newer than k->gens.v[i] */
	size_t weak = 0;           /* its weak ones (unmount, next-gen): they never count */
	bool durable_seen = false; /* the owner's newest durable one is newer */
	size_t latest = gen_keep_latest(k, first);
	for (size_t i = first; i < k->gens.n; i++) {
		const struct cat_gen *gen = &k->gens.v[i];
		if (!k->owner[i].known || k->owner[i].uid != o->uid)
			continue;
		bool newest_durable = false;
		if (!durable_seen) {
			bool durable = false;
			newest_durable = cat_gen_durable(g->cat, gen->id, &durable) == 0 && durable;
			durable_seen = newest_durable;
		}
		bool may_go = !gen->pinned && !newest_durable;
		if (may_go && rank >= g->opt.keep && i != latest)
			gen_keep_end(g, &actor, gen, "keep");
		else if (may_go && (rank >= g->opt.keep || rank + weak >= g->opt.keep))
			gen_keep_said_kept(g, gen, rank >= g->opt.keep, rank, weak);
		if (cat_gen_rule_weak(gen->rule))
			weak++;
		else
			rank++;
	}
}

/* keep-latest-k over one series (invariants 3, 6), for the user of c (not
 * known: each save's owner). */
static void gen_keep(struct gen_policy *g, uint64_t series, const struct gen_cred *c)
{
	struct gen_keep_list k = { 0 };
	if (g->opt.keep == 0)
		return;
	if (cat_gen_list_brief(g->cat, series, false, gen_list_add_committed, &k.gens) != 0 ||
	    k.gens.n < g->opt.keep) { /* nothing has `keep` newer saves of its owner */
		gen_keep_list_free(&k);
		return;
	}
	k.owner = calloc(k.gens.n, sizeof(*k.owner));
	if (!k.owner) {
		log_error("keep-latest-k over series inode %llu: out of memory; it runs again at the"
			  " next commit", (unsigned long long)series);
		gen_keep_list_free(&k);
		return;
	}
	qsort(k.gens.v, k.gens.n, sizeof(*k.gens.v), gen_keep_cmp);
	for (size_t i = 0; i < k.gens.n; i++)
		k.owner[i] = gen_owner_of(g, &k.gens.v[i]);
	gen_keep_held(g, series, &k, c);
	for (size_t i = 0; i < k.gens.n; i++) {
		bool first_of_owner = k.owner[i].known;
		for (size_t j = 0; first_of_owner && j < i; j++)
			first_of_owner = !k.owner[j].known || k.owner[j].uid != k.owner[i].uid;
		if (first_of_owner)
			gen_keep_owner(g, &k, i, c);
	}
	gen_keep_list_free(&k);
}

static int gen_list_add_series(void *arg, const struct cat_gen *gen)
{
	struct cat_id_vec *series = arg;
	for (size_t i = 0; i < series->n; i++)
		if (series->v[i] == gen->series)
			return 0;
	return gen->state == GEN_COMMITTED ? cat_id_vec_push(series, gen->series) : 0;
}

/* keep-latest-k over every series: at start, it finishes what a crash (or
 * a stop) cut short; and when the queue of requests overflowed. */
static void gen_keep_all(struct gen_policy *g)
{
	struct gen_cred unknown = { .known = false };
	struct cat_id_vec series = { 0 };
	if (g->opt.keep == 0)
		return;
	if (cat_gen_list_brief(g->cat, 0, false, gen_list_add_series, &series) == 0)
		for (size_t i = 0; i < series.n; i++)
			gen_keep(g, series.v[i], &unknown);
	cat_id_vec_free(&series);
}

/* Asks the thread to run keep-latest-k over series (invariant 4): the
 * request that committed is answered first. Without the thread (before it
 * starts, after it stopped) it runs here. */
static void gen_keep_request(struct gen_policy *g, uint64_t series, const struct gen_cred *cred)
{
	struct gen_cred unknown = { .known = false };
	const struct gen_cred *c = cred ? cred : &unknown;
	assert(series != 0);
	if (g->opt.keep == 0)
		return;
	pthread_mutex_lock(&g->lock);
	bool queued = g->running && !g->stop;
	int at = -1;
	for (int i = 0; queued && i < g->nkeep; i++)
		if (g->keep_series[i] == series)
			at = i;
	if (queued && at < 0 && g->nkeep < GEN_KEEP_QUEUE)
		at = g->nkeep++;
	if (queued && at >= 0) {
		g->keep_series[at] = series;
		g->keep_cred[at] = *c; /* the latest commit's user */
	} else if (queued) {
		g->keep_all = true;
	}
	if (queued)
		pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	if (queued)
		return;
	bool taken = false;
	if (cat_duty_take(g->cat, GEN_KEEP_DUTY, GEN_KEEP_DUTY_MS, &taken) != 0 || !taken)
		return; /* the holder's passes, and every node's at start, cover it */
	gen_keep(g, series, c);
	cat_duty_drop(g->cat, GEN_KEEP_DUTY);
}

static bool gen_keeps_queued(struct gen_policy *g)
{
	pthread_mutex_lock(&g->lock);
	bool any = g->nkeep > 0 || g->keep_all;
	pthread_mutex_unlock(&g->lock);
	return any;
}

/* The thread's part: runs the queued keep-latest-k requests while this node
 * holds the keep duty (alone, always). false: another node holds it, or this
 * one cannot take it (its lease ran out, the database is away); the requests
 * stay queued for the next tick. */
static bool gen_run_keeps(struct gen_policy *g)
{
	if (!gen_keeps_queued(g))
		return true;
	bool taken = false;
	int rc = cat_duty_take(g->cat, GEN_KEEP_DUTY, GEN_KEEP_DUTY_MS, &taken);
	if (rc != 0 || !taken) {
		if (rc != 0)
			log_debug("keep-latest-k waits: cannot take the keep duty: %s", strerror(-rc));
		return false;
	}
	for (;;) {
		pthread_mutex_lock(&g->lock);
		bool all = g->keep_all;
		struct gen_cred c = { .known = false };
		uint64_t series = 0;
		if (g->nkeep > 0) {
			series = g->keep_series[--g->nkeep];
			c = g->keep_cred[g->nkeep];
		}
		bool any = all || series != 0;
		g->keep_all = false;
		pthread_mutex_unlock(&g->lock);
		if (!any)
			break;
		if (all)
			gen_keep_all(g);
		if (series != 0)
			gen_keep(g, series, &c);
	}
	rc = cat_duty_drop(g->cat, GEN_KEEP_DUTY);
	if (rc != 0) /* its term ends it */
		log_debug("keep duty not dropped: %s", strerror(-rc));
	return true;
}

void gen_keep_again(struct gen_policy *g, uint64_t id)
{
	struct cat_gen gen;
	if (id != 0 && cat_gen_get_brief(g->cat, id, &gen) == 0 && gen.state == GEN_COMMITTED)
		gen_keep_request(g, gen.series, NULL);
}

void gen_durable(struct gen_policy *g, uint64_t id)
{
	gen_keep_again(g, id);
}

/* Has ino been changed through a handle still open (its node has a
 * writer, which writes on without asking the policy again: ns.c ns_writer)?
 * A change under way is waited for. Invariant 10. n->rw after commit_lock:
 * a change holding n->rw waits for commit_lock only while `committing`
 * names its generation (gen_settled), and no commit's check has passed
 * while one looks here (gen_unchanged sets it later, under the same lock). */
static bool gen_file_written(struct gen_policy *g, uint64_t ino)
{
	assert(atomic_load(&g->committing) == 0);
	struct node *n = node_peek(g->nodes, ino);
	if (!n)
		return false; /* closed meanwhile */
	pthread_rwlock_rdlock(&n->rw);
	bool written = n->writer != NULL;
	pthread_rwlock_unlock(&n->rw);
	node_put(g->nodes, n);
	return written;
}

/* Is a file of generation id open for writing (written: only one changed
 * through a handle still open, invariant 10)? The per-generation count
 * misses handles opened before their file joined the generation (a temp
 * dir renamed to a step name while a shard is still being written); the
 * node table knows every handle. */
static bool gen_files_open(struct gen_policy *g, uint64_t id, bool written)
{
	uint64_t inos[256];
	size_t n = node_writing(g->nodes, inos, 256);
	for (size_t i = 0; i < n; i++) {
		uint64_t gen = 0;
		if (cat_gen_of(g->cat, inos[i], &gen) == 0 && gen == id &&
		    (!written || gen_file_written(g, inos[i])))
			return true;
	}
	return n == 256; /* too many to tell: assume so, the tick retries */
}

static bool gen_files_being_written(struct gen_policy *g, uint64_t id)
{
	return gen_files_open(g, id, false);
}

/* Whether a commit of id must wait for (or, held, refuse on) files of it
 * open for writing here: -EAGAIN while one is open in an OPEN generation
 * (invariant 2); -EBUSY for a HELD one only while one was written through
 * a handle still open (invariant 10); else 0. */
static int gen_commit_blocked(struct gen_policy *g, uint64_t id)
{
	struct cat_gen gen;
	if (!gen_files_being_written(g, id))
		return 0;
	if (cat_gen_get_brief(g->cat, id, &gen) != 0 || gen.state != GEN_HELD)
		return -EAGAIN;
	return gen_files_open(g, id, true) ? -EBUSY : 0;
}

/* The shared engine refused a commit (-EBUSY) because another node still
 * has a file of it open for writing: the commit stays pending, and the
 * thread tries it again every GEN_REMOTE_POLL_MS (each try one short
 * transaction; no thread waits in between) until those writers close or the
 * abandon bound passes (gen_tick_choose). false: no memory to remember it. */
static bool gen_wait_remote(struct gen_policy *g, uint64_t id, const char *rule)
{
	struct cat_gen gen;
	if (cat_gen_get_brief(g->cat, id, &gen) != 0)
		return false;
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_get(g, id, gen.series);
	bool first = l && l->remote_wait_ns == 0;
	if (l) {
		snprintf(l->pending_rule, sizeof(l->pending_rule), "%s", rule);
		l->pending_quiet = false;
		if (first)
			l->remote_wait_ns = gen_now_ns();
	}
	pthread_mutex_unlock(&g->lock);
	if (first)
		log_info("generation %s (series inode %llu, step %llu): %s seen, commit waits for"
			 " files of it another node has open for writing", gen.name,
			 (unsigned long long)gen.series, (unsigned long long)gen.step, rule);
	return l != NULL;
}

struct gen_unchanged {
	struct gen_policy *g;
	uint64_t id, opened;
};

/* Invariants 7 and 9: committing is set before the count is read, and a
 * change bumps the count before it reads committing (gen_before_change), so
 * either this check sees the change or the change sees the commit. */
static bool gen_unchanged(void *arg)
{
	struct gen_unchanged *u = arg;
	atomic_store(&u->g->committing, u->id);
	bool same = atomic_load(&u->g->opened[u->id % GEN_CHANGE_SLOTS]) == u->opened;
	if (!same)
		atomic_store(&u->g->committing, 0);
	return same;
}

/* The commit of id found it changing (a file of it opened for writing since
 * its syncfs began, or open now): it waits as for writers, committed by the
 * last one's close or the tick (gen_tick_choose). false: nothing to wait
 * with (no live state: a HELD generation). */
static bool gen_commit_later(struct gen_policy *g, uint64_t id, const char *rule)
{
	struct cat_gen gen;
	if (cat_gen_get_brief(g->cat, id, &gen) != 0 || gen.state != GEN_OPEN)
		return false;
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_get(g, id, gen.series);
	if (l) {
		l->is_open = true;
		snprintf(l->pending_rule, sizeof(l->pending_rule), "%s", rule);
		l->pending_quiet = false;
	}
	pthread_mutex_unlock(&g->lock);
	if (l)
		log_info("generation %s (series inode %llu, step %llu): %s seen, but files of it were"
			 " opened for writing during its commit's sync: the commit waits for them",
			 gen.name, (unsigned long long)gen.series, (unsigned long long)gen.step, rule);
	return l != NULL;
}

/* Invariant 7: syncs the cache, then commits id in a catalog transaction
 * that first checks that no write handle of id opened since before the
 * syncfs (gen_unchanged; a handle opened before and still open is seen by
 * gen_files_being_written after the count is read). A change caught so is
 * synced by another round; -EAGAIN after GEN_COMMIT_TRIES, or when a
 * writer is open. */
static int gen_sync_and_commit(struct gen_policy *g, uint64_t id, const char *rule)
{
	int rc = -EAGAIN;
	for (int i = 0; i < GEN_COMMIT_TRIES && rc == -EAGAIN; i++) {
		struct gen_unchanged u = { g, id, atomic_load(&g->opened[id % GEN_CHANGE_SLOTS]) };
		/* a round the catalog answered -EAGAIN after the check committed
		 * nothing: no change waits for it (invariant 9) */
		atomic_store(&g->committing, 0);
		rc = gen_commit_blocked(g, id);
		if (rc != 0)
			return rc;
		rc = g->store ? store_syncfs(g->store) : 0;
		if (rc != 0) {
			log_error("generation %llu: syncing the cache before its commit (%s) failed: %s;"
				  " not committed", (unsigned long long)id, rule, strerror(-rc));
			return rc;
		}
		rc = cat_gen_commit_if(g->cat, id, rule, gen_unchanged, &u);
	}
	return rc;
}

void (*gen_test_hook)(const char *point, uint64_t id);

/* A commit of id ended (invariant 2: no writer is open when a commit
 * runs): its live state goes, its writer's credentials kept in *cred for
 * keep-latest-k. */
static void gen_commit_forget(struct gen_policy *g, uint64_t id, struct gen_cred *cred)
{
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, id);
	if (l)
		*cred = l->cred;
	gen_live_drop(g, id);
	pthread_mutex_unlock(&g->lock);
}

/* Invariant 16 (generation.h G9): has id a file whose last close failed,
 * or changes that were lost? true with why naming it; a catalog that cannot
 * say counts as yes, its error in why. */
static bool gen_failed_why(struct gen_policy *g, uint64_t id, char *why, size_t size)
{
	int rc = cat_gen_unsettled(g->cat, id, why, size);
	if (rc != 0)
		snprintf(why, size, GEN_FAILED_REASON " (which one is unknown: %s)", strerror(-rc));
	return why[0] != '\0';
}

/* Invariant 16 (generation.h G9): the catalog refused rule's commit of id,
 * a save with a file whose last close failed or whose changes were lost:
 * it is held with the reason naming the file, for an explicit decision (a
 * HELD one stays held). The mark gone meanwhile (the file closed fine on a
 * retry): nothing is held, the next rule decides. */
static void gen_hold_failed(struct gen_policy *g, uint64_t id, const char *rule)
{
	char why[GEN_HELD_MAX];
	struct cat_gen gen;
	if (!gen_failed_why(g, id, why, sizeof(why)) || cat_gen_get_brief(g->cat, id, &gen) != 0)
		return;
	if (gen.state == GEN_HELD)
		log_warn("generation %s (series inode %llu, step %llu) stays held: %s seen, but %s."
			 " `ckptfs-admin commit` or `rm` decides", gen.name,
			 (unsigned long long)gen.series, (unsigned long long)gen.step, rule, why);
	else
		gen_hold(g, id, rule, why);
}

/* Invariant 19: the catalog refused rule's commit of id because its row is
 * HELD (another node's sweep held it while this commit waited, or it was
 * held when the rule fired): one warn line naming the save, the rule and
 * the hold's reason; it stays held for a decision. false if the row is not
 * HELD (the caller logs the catalog's error). */
static bool gen_held_meanwhile(struct gen_policy *g, uint64_t id, const char *rule)
{
	struct cat_gen gen;
	if (cat_gen_get_brief(g->cat, id, &gen) != 0 || gen.state != GEN_HELD)
		return false;
	log_warn("generation %s (series inode %llu, step %llu) held meanwhile: %s; its commit (%s)"
		 " does not end the hold: not listed, kept byte for byte; `ckptfs-admin commit` or"
		 " `rm` decides", gen.name, (unsigned long long)gen.series,
		 (unsigned long long)gen.step, gen.held[0] ? gen.held : "(no reason recorded)", rule);
	return true;
}

/* 0 once committed, held for invariant 16, or waiting for another node's
 * writers or its own (invariant 7); else the catalog's error (logged): the
 * admin's commit names it. */
static int gen_commit_now(struct gen_policy *g, uint64_t id, const char *rule)
{
	struct cat_gen gen;
	struct gen_cred cred = { .known = false };
	assert(id != 0 && rule && rule[0] && strlen(rule) < GEN_RULE_MAX);
	/* invariant 7: the save's objects are durable before the catalog says
	 * COMMITTED (cat_gen_commit makes that durable in turn) */
	pthread_mutex_lock(&g->commit_lock);
	int rc = gen_sync_and_commit(g, id, rule);
	if (gen_test_hook)
		gen_test_hook("committed", id);
	bool done = rc != -EAGAIN && rc != -EBUSY; /* -EBUSY: other nodes' writers, or invariant 10 */
	if (done) /* before a change waiting for us looks (invariant 9) */
		gen_commit_forget(g, id, &cred);
	atomic_store(&g->committing, 0);
	pthread_mutex_unlock(&g->commit_lock);
	if (rc == -EBUSY && cat_is_shared(g->cat) && gen_wait_remote(g, id, rule))
		return 0;
	if (rc == -EAGAIN && gen_commit_later(g, id, rule))
		return 0;
	if (rc == -EBUSY && !cat_is_shared(g->cat)) { /* invariant 10; its live state stays */
		log_warn("generation %llu: commit (%s) of the held save refused: a file of it was"
			 " written through a handle still open on this node, whose later writes would"
			 " change the committed save in place; close it, then commit again",
			 (unsigned long long)id, rule);
		return rc;
	}
	if (!done) /* nothing to wait with: forgotten as a commit that ended */
		gen_commit_forget(g, id, &cred);
	if (rc == -ENOTRECOVERABLE) { /* invariant 16: never committed by this rule */
		gen_hold_failed(g, id, rule);
		return 0;
	}
	if (rc == -EALREADY) { /* another rule, or another node, committed it first */
		log_info("generation %llu: %s seen, already committed", (unsigned long long)id, rule);
		return 0;
	}
	if (rc == -EINVAL && gen_held_meanwhile(g, id, rule))
		return 0;
	if (rc == 0)
		rc = cat_gen_get_brief(g->cat, id, &gen);
	if (rc != 0) {
		log_error("generation %llu: commit (%s) failed: %s", (unsigned long long)id, rule,
			  strerror(-rc));
		return rc;
	}
	log_info("generation %s (series inode %llu, step %llu) committed: %s, %llu files, %llu bytes",
		 gen.name, (unsigned long long)gen.series, (unsigned long long)gen.step, rule,
		 (unsigned long long)gen.files, (unsigned long long)gen.logical_bytes);
	gen_keep_request(g, gen.series, cred.known ? &cred : NULL);
	return 0;
}

/* ---- proof by content (proof.h) ---- */

/* The root of the committed generation of gen's series with the largest step
 * below gen's (0 if none): the save it is compared with. */
static uint64_t gen_previous_root(struct gen_policy *g, const struct cat_gen *gen)
{
	struct cat_gen_vec l = { 0 };
	uint64_t root = 0, best_step = 0;
	int64_t best_ns = 0;
	if (cat_gen_list_brief(g->cat, gen->series, false, gen_list_add_committed, &l) == 0)
		for (size_t i = 0; i < l.n; i++) {
			const struct cat_gen *c = &l.v[i];
			if (c->id == gen->id || c->step >= gen->step)
				continue;
			if (root == 0 || c->step > best_step ||
			    (c->step == best_step && c->committed_ns > best_ns)) {
				root = c->root;
				best_step = c->step;
				best_ns = c->committed_ns;
			}
		}
	cat_gen_vec_free(&l);
	return root;
}

/* Invariant 11: the cache's answer for one chunk (proof_objects). */
static int gen_object_here(void *arg, const uint8_t *hash, uint64_t plain_len)
{
	return store_present(arg, hash, plain_len);
}

/* Was gen open at a crash: HELD by G4 at start, or a new version of one so
 * held (it keeps the reason, generation.h G5)? Its files' objects may not
 * all have reached the disk (invariant 11). */
static bool gen_after_crash(const struct cat_gen *gen)
{
	return strncmp(gen->held, GEN_CRASH_REASON, strlen(GEN_CRASH_REASON)) == 0;
}

/* Judges generation id by its content; an error is UNPROVEN with the reason.
 * One a crash held is COMPLETE only with every object it names (invariant
 * 11). */
static void gen_prove(struct gen_policy *g, uint64_t id, struct proof_result *out)
{
	struct cat_gen gen;
	int rc = cat_gen_get_brief(g->cat, id, &gen);
	if (rc == 0)
		rc = proof_generation(g->cat, gen.root, gen.name, gen_previous_root(g, &gen),
				      gen.backup_root, g->read, g->read_arg, out);
	if (rc == 0 && out->verdict == PROOF_COMPLETE && g->store && gen_after_crash(&gen))
		rc = proof_objects(g->cat, gen.root, gen.name, gen_object_here, g->store, out);
	/* invariant 15: a held version plus files is no more proven than it */
	if (rc != 0 || gen.held[0] || gen.state != GEN_OPEN)
		out->added = false;
	if (rc != 0) {
		out->verdict = PROOF_UNPROVEN;
		snprintf(out->reason, sizeof(out->reason), "its content could not be read: %s",
			 strerror(-rc));
	}
}

/* A rule fired: commit now if no writer is open, else when the last closes. */
static int gen_request_commit(struct gen_policy *g, uint64_t id, const char *rule, bool quiet)
{
	struct cat_gen gen;
	assert(id != 0 && rule && rule[0] && strlen(rule) < GEN_RULE_MAX);
	int rc = cat_gen_get_brief(g->cat, id, &gen);
	if (rc != 0)
		return rc;
	if (gen.state == GEN_HELD) /* nobody writes in it: a writer reopens it first */
		return gen_commit_now(g, id, rule);
	if (gen.state != GEN_OPEN)
		return 0;
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_get(g, id, gen.series);
	if (l)
		l->is_open = true;
	bool now = l && l->writers == 0 && !quiet;
	if (l && !now) {
		snprintf(l->pending_rule, sizeof(l->pending_rule), "%s", rule);
		l->pending_quiet = quiet;
		l->last_activity_ns = gen_now_ns();
	}
	pthread_mutex_unlock(&g->lock);
	if (now && gen_files_being_written(g, id)) {
		now = false; /* the background tick commits once they close */
		pthread_mutex_lock(&g->lock);
		if ((l = gen_live_find(g, id)) != NULL) {
			snprintf(l->pending_rule, sizeof(l->pending_rule), "%s", rule);
			l->pending_quiet = false;
		}
		pthread_mutex_unlock(&g->lock);
	}
	if (now)
		return gen_commit_now(g, id, rule);
	log_debug("generation %s: %s seen, commit waits for writers%s", gen.name, rule,
		  quiet ? " and a quiet period" : "");
	return 0;
}

/* Rules that come from a layout's own completion marker. */
static bool gen_rule_is_marker(const char *rule)
{
	static const char *const rules[] = { "dcp-metadata", "dcp-rank-metadata", "metadata-json",
					     "lightning-meta", "hf-trainer-state", "tracker", NULL };
	for (int i = 0; rules[i]; i++)
		if (strcmp(rule, rules[i]) == 0)
			return true;
	return false;
}

/* Is l's pending commit one of invariant 15, whose proof a file opened for
 * writing since (here, or on another node: its commit was refused) may
 * have made stale? It is proven again before each try (g->lock held). */
static bool gen_pending_added(const struct gen_live *l)
{
	return strcmp(l->pending_rule, GEN_RULE_ADDED) == 0;
}

/* ---- hooks ---- */

/* gen, no longer OPEN in the shared catalog, was settled by another node
 * (committed, held or ended) while this node remembers it open: no commit,
 * hold or abandon of ours follows (invariant 8). Its live state stays only
 * for the write handles still open here. */
static void gen_settled_elsewhere(struct gen_policy *g, const struct cat_gen *gen)
{
	assert(gen->state != GEN_OPEN);
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, gen->id);
	bool was_open = l && l->is_open;
	if (was_open) {
		l->is_open = false;
		l->pending_rule[0] = '\0';
		l->remote_wait_ns = 0;
		if (l->writers == 0)
			gen_live_drop(g, gen->id);
	}
	pthread_mutex_unlock(&g->lock);
	if (was_open)
		log_info("generation %s (series inode %llu, step %llu): %s by another node since this"
			 " node last wrote into it; forgotten here", gen->name,
			 (unsigned long long)gen->series, (unsigned long long)gen->step,
			 cat_gen_state_name(gen->state));
}

/* Before the tick or the unmount decides generation id by what this node
 * remembers (a content proof, abandon, a weak rule): is it still OPEN? On a
 * shared catalog the row answers (invariant 8; one read per decision,
 * never per write), and one another node settled is forgotten here. A
 * catalog that cannot answer: true, decided as before. Alone, is_open
 * answers. */
static bool gen_still_open(struct gen_policy *g, uint64_t id)
{
	struct cat_gen gen;
	if (!cat_is_shared(g->cat) || cat_gen_get_brief(g->cat, id, &gen) != 0 ||
	    gen.state == GEN_OPEN)
		return true;
	gen_settled_elsewhere(g, &gen);
	return false;
}

/* Whether generation gen_id is settled (COMMITTED or HELD, not open here),
 * its row in *gen when it is: what a change inside it must first act on.
 * Alone, this node's is_open answers (nothing else settles it). Shared, the
 * catalog always does (invariant 8): another node may have committed or
 * held it since is_open was last true, and nothing tells this node. A
 * settled answer also corrects a stale is_open here, so the tick does not
 * judge another node's committed save as this node's open one. */
static int gen_settled(struct gen_policy *g, uint64_t gen_id, struct cat_gen *gen, bool *settled)
{
	*settled = false;
	if (gen_id == 0)
		return 0;
	bool shared = cat_is_shared(g->cat);
	/* invariant 9: the count first (before the commit's check reads it),
	 * then whether a commit of it passed that check: its answer decides */
	atomic_fetch_add(&g->opened[gen_id % GEN_CHANGE_SLOTS], 1);
	if (atomic_load(&g->committing) == gen_id) {
		pthread_mutex_lock(&g->commit_lock);
		pthread_mutex_unlock(&g->commit_lock);
	}
	if (!shared) {
		pthread_mutex_lock(&g->lock);
		struct gen_live *known = gen_live_find(g, gen_id);
		bool open = known && known->is_open;
		pthread_mutex_unlock(&g->lock);
		if (open)
			return 0;
	}
	int rc = cat_gen_get_brief(g->cat, gen_id, gen);
	*settled = rc == 0 && (gen->state == GEN_COMMITTED || gen->state == GEN_HELD);
	if (shared && *settled)
		gen_settled_elsewhere(g, gen);
	return rc;
}

int gen_before_change(struct gen_policy *g, uint64_t gen_id)
{
	struct cat_gen gen;
	bool settled;
	int rc = gen_settled(g, gen_id, &gen, &settled);
	if (rc != 0 || !settled)
		return rc == -ENOENT ? 0 : rc;
	assert(gen.state == GEN_COMMITTED || gen.state == GEN_HELD);
	rc = cat_gen_reopen(g->cat, gen_id);
	if (rc == -EALREADY)
		return 0; /* another writer of the rewrite (a second rank) reopened it first */
	if (rc != 0) {
		log_error("generation %s: reopening for a rewrite failed: %s", gen.name, strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_get(g, gen_id, gen.series);
	if (l) {
		l->is_open = true;
		/* a layout that committed by a marker commits its rewrite by one
		 * too, or by adding files only (invariant 15) */
		l->expects_marker = gen_rule_is_marker(gen.rule);
		l->rewrite = true;
		l->last_activity_ns = gen_now_ns();
	}
	pthread_mutex_unlock(&g->lock);
	log_info("generation %s (step %llu, %s) is being rewritten: version %u open, version %u"
		 " kept until it commits", gen.name, (unsigned long long)gen.step,
		 gen.state == GEN_HELD ? "held" : "committed", gen.version + 1, gen.version);
	return 0;
}

void gen_activity(struct gen_policy *g, uint64_t gen_id, pid_t pid)
{
	if (gen_id == 0)
		return;
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, gen_id);
	if (l) {
		l->last_activity_ns = gen_now_ns();
		gen_note_pid(l, pid);
	}
	pthread_mutex_unlock(&g->lock);
}

/* The owner of generation gen's root (-errno: unreadable): whose save it
 * is, the same notion as keep-latest-k's (gen_owner_of, invariant 6). */
static int gen_root_uid(struct gen_policy *g, const struct cat_gen *gen, uid_t *uid)
{
	struct cat_inode root;
	int rc = cat_getattr(g->cat, gen->root, &root);
	if (rc == 0)
		*uid = root.uid;
	return rc;
}

/* Does next-gen's owner rule let generation id be committed because a save
 * of uid starts (invariant 14)? Logs why not. */
static bool gen_next_same_owner(struct gen_policy *g, uint64_t id, bool starter_known, uid_t starter)
{
	struct cat_gen gen;
	uid_t owner = 0;
	int rc = cat_gen_get_brief(g->cat, id, &gen);
	if (rc == 0)
		rc = gen_root_uid(g, &gen, &owner);
	if (rc == 0 && starter_known && owner == starter)
		return true;
	if (rc == 0) /* each save that starts asks again: at info once (gen_said) */
		log_msg(gen_said(g, id, GEN_SAID_NEXT_OWNER) ? LOG_LVL_DEBUG : LOG_LVL_INFO,
			"generation %s (step %llu, uid %u): not committed by the next save, %s"
			" (gen.h invariant 14)", gen.name, (unsigned long long)gen.step,
			(unsigned)owner, starter_known ? "another user's" : "whose owner is unreadable");
	return false;
}

/* invariant 5: a weak rule replaces a committed version only by a proven one */
#define GEN_REWRITE_UNPROVEN "a rewrite of a committed save that nothing proves complete"

/* Is id a new version of a committed save (OPEN with a backup)? */
static bool gen_is_rewrite(struct gen_policy *g, uint64_t id)
{
	struct cat_gen gen;
	return cat_gen_get_brief(g->cat, id, &gen) == 0 && gen.state == GEN_OPEN &&
	       gen.backup_root != 0;
}

void gen_started(struct gen_policy *g, uint64_t gen_id, uint64_t series, bool by_rename, pid_t pid)
{
	uint64_t older[64];
	int n = 0;
	pthread_mutex_lock(&g->lock);
	struct gen_live *me = gen_live_get(g, gen_id, series);
	if (me)
		gen_note_pid(me, pid);
	for (struct gen_live *l = g->live; l && n < 64; l = l->next)
		if (l->is_open && l->id != gen_id && l->series == series && l->writers == 0 &&
		    !l->expects_marker && !l->pending_rule[0])
			older[n++] = l->id;
	pthread_mutex_unlock(&g->lock);
	struct cat_gen started;
	uid_t starter = 0;
	bool starter_known = n > 0 && cat_gen_get_brief(g->cat, gen_id, &started) == 0 &&
			     gen_root_uid(g, &started, &starter) == 0;
	for (int i = 0; i < n; i++) {
		struct proof_result pr;
		if (!gen_still_open(g, older[i]) ||
		    !gen_next_same_owner(g, older[i], starter_known, starter))
			continue;
		gen_prove(g, older[i], &pr);
		if (!proof_weak_may_commit(pr.verdict)) /* abandon holds it (invariant 5) */
			log_info("generation %llu: not committed by the next save: %s",
				 (unsigned long long)older[i], pr.reason);
		else if (gen_is_rewrite(g, older[i]) && pr.verdict != PROOF_COMPLETE && !pr.added)
			log_info("generation %llu: not committed by the next save: %s",
				 (unsigned long long)older[i], GEN_REWRITE_UNPROVEN);
		else
			gen_commit_now(g, older[i], /* as the unmount's: invariant 3 */
				       pr.verdict == PROOF_COMPLETE ? "content" : "next-gen");
	}
	if (by_rename)
		gen_request_commit(g, gen_id, "rename", false);
}

void gen_root_removed(struct gen_policy *g, uint64_t parent, const char *name)
{
	uint64_t step, ids[64];
	int n = 0;
	if (!gen_name_matches(g, name, &step))
		return;
	pthread_mutex_lock(&g->lock);
	for (struct gen_live *l = g->live; l && n < 64; l = l->next)
		if (l->series == parent)
			ids[n++] = l->id;
	pthread_mutex_unlock(&g->lock);
	for (int i = 0; i < n; i++) {
		struct cat_gen gen;
		if (cat_gen_get_brief(g->cat, ids[i], &gen) == 0 && gen.state == GEN_OPEN)
			continue;
		pthread_mutex_lock(&g->lock);
		gen_live_drop(g, ids[i]);
		pthread_mutex_unlock(&g->lock);
	}
}

/* The held reason as one field of the key=value line: '%', spaces and
 * control characters percent-encoded, so a split on whitespace still works. */
static void gen_encode_reason(const char *in, char *out, size_t size)
{
	size_t n = 0;
	for (; *in && n + 4 < size; in++) {
		unsigned char c = (unsigned char)*in;
		if (c <= ' ' || c == '%' || c == 0x7f)
			n += (size_t)snprintf(out + n, size - n, "%%%02X", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
}

int gen_describe(struct gen_policy *g, uint64_t gen_id, char *buf, size_t size)
{
	struct cat_gen gen;
	char reason[3 * GEN_HELD_MAX];
	int rc = gen_id ? cat_gen_get_brief(g->cat, gen_id, &gen) : -ENODATA;
	if (rc != 0)
		return rc == -ENOENT ? -ENODATA : rc;
	gen_encode_reason(gen.held, reason, sizeof(reason));
	snprintf(buf, size, "name=%s step=%llu state=%s version=%u pinned=%d files=%llu bytes=%llu rule=%s%s%s",
		 gen.name, (unsigned long long)gen.step,
		 cat_gen_state_name(gen.state), gen.version, gen.pinned,
		 (unsigned long long)gen.files, (unsigned long long)gen.logical_bytes,
		 gen.rule[0] ? gen.rule : "-", gen.state == GEN_HELD ? " held=" : "",
		 gen.state == GEN_HELD ? reason : "");
	return 0;
}

static bool gen_ends_with(const char *name, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && strcmp(name + len - n, suffix) == 0;
}

/* A file that only layouts with a completion marker write: DCP's shards and
 * metadata temp, HF Trainer's rng states (marker trainer_state.json),
 * DeepSpeed's model/optimizer states and Megatron's legacy shard (marker: the
 * tracker file). A generation that has one and no marker yet is unfinished
 * at unmount (docs/GENERATIONS.md). */
static bool gen_name_implies_marker(const char *name)
{
	size_t len = strlen(name);
	return strcmp(name, ".metadata.tmp") == 0 || gen_ends_with(name, len, ".distcp") ||
	       (strncmp(name, "rng_state", 9) == 0 && gen_ends_with(name, len, ".pth")) ||
	       strcmp(name, "training_args.bin") == 0 ||
	       gen_ends_with(name, len, "_model_states.pt") ||
	       gen_ends_with(name, len, "_optim_states.pt") ||
	       strcmp(name, "model_optim_rng.pt") == 0;
}

void gen_file_created(struct gen_policy *g, uint64_t gen_id, const char *name)
{
	bool marker = gen_name_implies_marker(name);
	if (gen_id == 0 || !marker)
		return;
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, gen_id);
	if (l)
		l->expects_marker = true;
	pthread_mutex_unlock(&g->lock);
}

void gen_writer_opened(struct gen_policy *g, uint64_t gen_id)
{
	if (gen_id == 0)
		return;
	/* invariant 7: before any change this handle makes reaches the catalog */
	atomic_fetch_add(&g->opened[gen_id % GEN_CHANGE_SLOTS], 1);
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, gen_id);
	pthread_mutex_unlock(&g->lock);
	struct cat_gen gen;
	if (!l && (cat_gen_get_brief(g->cat, gen_id, &gen) != 0 ||
		   (gen.state != GEN_OPEN && gen.state != GEN_COMMITTED)))
		return;
	pthread_mutex_lock(&g->lock);
	if (!l && (l = gen_live_get(g, gen_id, gen.series)) != NULL) {
		l->is_open = gen.state == GEN_OPEN;
		/* a rewrite another node reopened (invariants 8, 15) */
		l->rewrite = gen.state == GEN_OPEN && gen.backup_root != 0;
	}
	if (l) {
		assert(l->writers < UINT32_MAX);
		l->writers++;
		l->last_activity_ns = gen_now_ns();
	}
	pthread_mutex_unlock(&g->lock);
}

void gen_writer_closed(struct gen_policy *g, uint64_t gen_id, bool committed)
{
	if (gen_id == 0)
		return;
	char rule[GEN_RULE_MAX] = "";
	uint64_t series = 0;
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, gen_id);
	if (l) {
		/* a count a removal or an abort reset (gen_live_drop) may be 0 */
		if (l->writers)
			l->writers--;
		l->last_activity_ns = gen_now_ns();
		if (l->writers == 0 && l->pending_rule[0] && !l->pending_quiet &&
		    !gen_pending_added(l) && !committed) /* that one: the tick proves it again */
			memcpy(rule, l->pending_rule, sizeof(rule));
		/* committed: another node's commit, as the catalog's row says
		 * (invariant 8), which this node's memory of it as open missed */
		if (l->writers == 0 && (!l->is_open || committed)) {
			series = l->series; /* invariant 18: keep may have kept it for them */
			gen_live_drop(g, gen_id); /* committed, nobody writing */
		}
	}
	pthread_mutex_unlock(&g->lock);
	if (series != 0)
		gen_keep_request(g, series, NULL);
	if (rule[0] && !gen_files_being_written(g, gen_id))
		gen_commit_now(g, gen_id, rule); /* else the background tick does */
}

/* `__N.metadata`: a rank's DCP metadata (use_collectives=False). */
static bool gen_is_rank_metadata(const char *name)
{
	unsigned rank;
	char tail[16];
	return sscanf(name, "__%u.metadat%15s", &rank, tail) == 2 && strcmp(tail, "a") == 0;
}

static bool gen_is_lightning_dir(struct gen_policy *g, uint64_t gen_id)
{
	struct cat_gen gen;
	size_t n;
	return cat_gen_get_brief(g->cat, gen_id, &gen) == 0 && (n = strlen(gen.name)) > 5 &&
	       strcmp(gen.name + n - 5, ".ckpt") == 0;
}

/* Reads a small tracker file (DeepSpeed `latest`, Megatron's iteration file). */
static int gen_read_tracker(struct gen_policy *g, uint64_t ino, char *buf, size_t size)
{
	struct cat_inode in;
	int rc = cat_getattr(g->cat, ino, &in);
	if (rc != 0)
		return rc;
	if (!S_ISREG(in.mode)) /* a directory or symlink renamed onto the name */
		return -EINVAL;
	size_t len = in.size < size - 1 ? (size_t)in.size : size - 1;
	rc = g->read(g->read_arg, ino, 0, len, buf);
	if (rc != 0)
		return rc;
	buf[len] = '\0';
	char *s = buf, *e;
	while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r')
		s++;
	for (e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\n' || e[-1] == '\r' || e[-1] == '\t');)
		*--e = '\0';
	memmove(buf, s, strlen(s) + 1);
	return 0;
}

/* Invariant 13's walk of a save: its root and the directories up to
 * GEN_DCP_DEPTH levels below it, at most GEN_DCP_DIRS of them (a DCP save
 * made by a wrapper, HF Accelerate's `pytorch_model_fsdp_0/`, NeMo's
 * `weights/`, keeps its shards and metadata one level down). */
#define GEN_DCP_DEPTH 2
#define GEN_DCP_DIRS 64

/* One directory of the walk: its shards, the metadata that completes them
 * (in the same directory), and the subdirectories still to list. */
struct gen_dcp_scan {
	bool shards, metadata;
	uint64_t *queue; /* GEN_DCP_DIRS directories: inode, at depth[i], named name[i] */
	unsigned *depth;
	char (*name)[64];
	size_t *queued;
	unsigned here; /* this directory's depth */
};

static int gen_dcp_scan_add(void *arg, const char *name, const struct cat_inode *attr,
			    uint64_t next_cookie)
{
	struct gen_dcp_scan *d = arg;
	size_t len = strlen(name);
	(void)next_cookie;
	if (gen_ends_with(name, len, ".distcp"))
		d->shards = true;
	else if (strcmp(name, ".metadata") == 0 || strcmp(name, "metadata.json") == 0 ||
		 gen_is_rank_metadata(name))
		d->metadata = true;
	else if (S_ISDIR(attr->mode) && d->here < GEN_DCP_DEPTH && *d->queued < GEN_DCP_DIRS) {
		d->queue[*d->queued] = attr->ino;
		snprintf(d->name[*d->queued], sizeof(d->name[0]), "%s", name);
		d->depth[(*d->queued)++] = d->here + 1;
	}
	return 0;
}

/* Invariant 13: does gen hold DCP shards (`*.distcp`) in a directory
 * without the metadata that completes them there (`.metadata`,
 * `__N.metadata`, Megatron's `metadata.json`)? Such a layout names itself
 * complete; a tracker naming it first is early. 1 with where naming the
 * directory (its root, or a subdirectory by name and inode), 0 if not,
 * or the catalog's -errno: a save that cannot be listed is no more known
 * complete than one listed unfinished. */
static int gen_dcp_unfinished(struct gen_policy *g, const struct cat_gen *gen, char *where,
			      size_t size)
{
	uint64_t queue[GEN_DCP_DIRS];
	unsigned depth[GEN_DCP_DIRS];
	char name[GEN_DCP_DIRS][64];
	size_t queued = 1;
	queue[0] = gen->root;
	depth[0] = 0;
	snprintf(name[0], sizeof(name[0]), "its root");
	for (size_t i = 0; i < queued; i++) {
		struct gen_dcp_scan d = { false, false, queue, depth, name, &queued, depth[i] };
		/* from cookie 2: past "." and ".." */
		int rc = cat_readdir(g->cat, queue[i], 2, gen_dcp_scan_add, &d);
		if (rc != 0)
			return rc;
		if (d.shards && !d.metadata) {
			if (i == 0)
				snprintf(where, size, "%s", name[0]);
			else
				snprintf(where, size, "directory %s (inode %llu)", name[i],
					 (unsigned long long)queue[i]);
			return 1;
		}
	}
	return 0;
}

/* The trackers' names, outside generations (DeepSpeed's, Megatron's). */
static const char *const gen_tracker_names[] = { "latest", "latest_checkpointed_iteration.txt",
						 NULL };

static bool gen_is_tracker_name(const char *name)
{
	for (int i = 0; gen_tracker_names[i]; i++)
		if (strcmp(name, gen_tracker_names[i]) == 0)
			return true;
	return false;
}

/* The save tracker inode ino of directory parent names: its text
 * (gen_read_tracker) is a generation's name there (DeepSpeed's tag) or, all
 * digits, its step (Megatron's iteration). 0 with *gen, or -errno (-ENOENT:
 * empty, or it names none). */
static int gen_tracker_target(struct gen_policy *g, uint64_t ino, uint64_t parent,
			      struct cat_gen *gen)
{
	char tag[GEN_TRACKER_MAX];
	int rc = gen_read_tracker(g, ino, tag, sizeof(tag));
	if (rc == 0 && !tag[0])
		rc = -ENOENT;
	if (rc != 0)
		return rc;
	rc = cat_gen_find(g->cat, parent, tag, gen); /* DeepSpeed: the tag is the name */
	if (rc != 0) {
		char *end;
		unsigned long long step = strtoull(tag, &end, 10);
		if (*end == '\0' && end != tag) /* Megatron: the iteration */
			rc = cat_gen_find_step(g->cat, parent, step, gen);
	}
	return rc;
}

/* Invariants 12 and 13: may tracker `name` (inode ino), written by uid
 * writer, commit gen? If not, one line says why. */
static bool gen_tracker_may_commit(struct gen_policy *g, const struct cat_gen *gen,
				   const char *name, uint64_t ino, uid_t writer)
{
	/* generation.h G10: a rolled-back version kept beside its step's save
	 * was never proven; only an explicit decision commits it */
	if (gen->state == GEN_HELD && cat_gen_is_kept_name(gen->name)) {
		log_warn("tracker %s (inode %llu) names generation %s (step %llu), a rolled-back"
			 " version kept held: not committed by a tracker; ckptfs-admin commit or rm"
			 " decides (generation.h G10)", name, (unsigned long long)ino, gen->name,
			 (unsigned long long)gen->step);
		return false;
	}
	uid_t owner = 0;
	int orc = gen_root_uid(g, gen, &owner);
	if (writer != 0 && (orc != 0 || owner != writer)) {
		char who[96];
		if (orc == 0)
			snprintf(who, sizeof(who), "uid %u", (unsigned)owner);
		else
			snprintf(who, sizeof(who), "an unreadable owner (%s)", strerror(-orc));
		log_warn("tracker %s (inode %llu) written by uid %u names generation %s (step %llu,"
			 " %s) of %s: not committed, only its owner or root commits a save by a"
			 " tracker (gen.h invariant 12)", name, (unsigned long long)ino,
			 (unsigned)writer, gen->name, (unsigned long long)gen->step,
			 cat_gen_state_name(gen->state), who);
		return false;
	}
	char where[128];
	int dcp = gen_dcp_unfinished(g, gen, where, sizeof(where));
	if (dcp < 0)
		log_info("tracker %s (inode %llu) names generation %s (step %llu, %s): not committed,"
			 " its files could not be listed (%s) to rule out DCP shards without"
			 " their .metadata; abandon or the unmount decides (gen.h invariant 13)",
			 name, (unsigned long long)ino, gen->name, (unsigned long long)gen->step,
			 cat_gen_state_name(gen->state), strerror(-dcp));
	else if (dcp > 0)
		log_info("tracker %s (inode %llu) names generation %s (step %llu, %s): not committed,"
			 " it has DCP shards and no .metadata yet (in %s), which commits it (gen.h"
			 " invariant 13)", name, (unsigned long long)ino, gen->name,
			 (unsigned long long)gen->step, cat_gen_state_name(gen->state), where);
	return dcp == 0;
}

/* A tracker `name` (inode ino in directory parent), written through a handle
 * of uid writer (or renamed onto its name by uid writer), was closed: it
 * commits the OPEN or HELD save it names, if writer is root or that save's
 * owner (invariant 12) and the save is no DCP save still without its
 * metadata (invariant 13). */
static void gen_tracker_closed(struct gen_policy *g, uint64_t ino, uint64_t parent,
			       const char *name, uid_t writer)
{
	struct cat_gen gen;
	if (gen_tracker_target(g, ino, parent, &gen) != 0 ||
	    (gen.state != GEN_OPEN && gen.state != GEN_HELD))
		return;
	if (gen_tracker_may_commit(g, &gen, name, ino, writer))
		gen_request_commit(g, gen.id, "tracker", false);
}

/* A file renamed onto a tracker name outside generations (an atomic writer:
 * a temporary written, fsynced, then os.replace'd onto `latest`): that is
 * the tracker's close, its renamer the writer of invariant 12. Still open
 * for writing, its written close decides instead (ns.c noted the name). */
static void gen_tracker_renamed(struct gen_policy *g, uint64_t ino, uint64_t parent,
				const char *name, uid_t renamer)
{
	struct node *n = node_peek(g->nodes, ino);
	unsigned writing = n ? node_write_handles(g->nodes, n) : 0;
	if (n)
		node_put(g->nodes, n);
	if (writing == 0)
		gen_tracker_closed(g, ino, parent, name, renamer);
}

void gen_renamed(struct gen_policy *g, uint64_t gen_id, uint64_t ino, uint64_t newparent,
		 const char *newname, uid_t renamer)
{
	if (gen_id == 0) {
		if (ino != 0 && gen_is_tracker_name(newname)) /* invariants 12, 13 */
			gen_tracker_renamed(g, ino, newparent, newname, renamer);
		return;
	}
	if (strcmp(newname, ".metadata") == 0) {
		if (!gen_is_lightning_dir(g, gen_id)) /* Lightning FSDP: meta.pt follows */
			gen_request_commit(g, gen_id, "dcp-metadata", false);
	} else if (gen_is_rank_metadata(newname)) {
		gen_request_commit(g, gen_id, "dcp-rank-metadata", true);
	}
}

void gen_file_closed(struct gen_policy *g, uint64_t ino, uint64_t parent, const char *name,
		     uint64_t gen_id, uid_t writer)
{
	if (gen_id == 0) {
		if (gen_is_tracker_name(name))
			gen_tracker_closed(g, ino, parent, name, writer);
		return;
	}
	if (strcmp(name, "metadata.json") == 0)
		gen_request_commit(g, gen_id, "metadata-json", false);
	else if (strcmp(name, "meta.pt") == 0 && gen_is_lightning_dir(g, gen_id))
		gen_request_commit(g, gen_id, "lightning-meta", false);
	else if (strcmp(name, "trainer_state.json") == 0)
		gen_request_commit(g, gen_id, "hf-trainer-state", true);
	else if (strcmp(name, ".ckptfs-commit") == 0)
		gen_request_commit(g, gen_id, "marker", false);
}

int gen_commit_explicit(struct gen_policy *g, uint64_t gen_id, const char *rule)
{
	struct cat_gen gen;
	int rc = cat_gen_get_brief(g->cat, gen_id, &gen);
	if (rc != 0)
		return rc;
	if (gen.state == GEN_COMMITTED)
		return 0;
	if (gen.state != GEN_OPEN && gen.state != GEN_HELD)
		return -ENOENT;
	return gen_request_commit(g, gen_id, rule, false);
}

int gen_pin(struct gen_policy *g, uint64_t gen_id, bool pinned)
{
	return cat_gen_pin(g->cat, gen_id, pinned);
}

int gen_remove(struct gen_policy *g, uint64_t gen_id, bool force)
{
	struct cat_gen gen;
	int rc = cat_gen_get_brief(g->cat, gen_id, &gen);
	if (rc != 0)
		return rc;
	if (gen.state == GEN_OPEN && !force)
		return -EBUSY;
	if (gen.state != GEN_OPEN && gen.state != GEN_COMMITTED && gen.state != GEN_HELD)
		return -ENOENT;
	return gen_end(g, gen_id, gen.state == GEN_OPEN ? "admin-abort" : "admin",
		       gen.state == GEN_OPEN ? GEN_END_ABORT : GEN_END_DELETE);
}

/* ---- background: timers and kernel invalidations ---- */

enum gen_todo_kind {
	GEN_TODO_COMMIT, /* a rule fired: its writers are gone (and its quiet period over) */
	GEN_TODO_PROVE,  /* quiet, no signal: does the content prove it complete? */
	GEN_TODO_HOLD,   /* abandoned: held, never deleted */
	GEN_TODO_HOLD_REMOTE, /* its commit waited past abandon for other nodes' writers */
};

struct gen_todo {
	uint64_t id;
	char rule[GEN_RULE_MAX];
	int kind;             /* enum gen_todo_kind */
	int64_t activity_ns;  /* last_activity_ns when chosen */
	bool expects_marker;
};

/* An abandoned generation: committed if its content proves it (abandon may
 * come before the quiet period), else held with the reason — the missing
 * marker, and what its content shows. */
static void gen_abandoned(struct gen_policy *g, const struct gen_todo *t)
{
	struct proof_result pr;
	char why[GEN_HELD_MAX];
	/* invariant 16: a failed file's reason first, whatever the content; a
	 * catalog that cannot say holds it too, its error in the reason (as
	 * gen_hold_failed and the unmount ask) */
	if (gen_failed_why(g, t->id, why, sizeof(why))) {
		gen_hold(g, t->id, "abandoned", why);
		return;
	}
	gen_prove(g, t->id, &pr);
	if (pr.added || (pr.verdict == PROOF_COMPLETE && !t->expects_marker)) {
		gen_commit_now(g, t->id, pr.added ? GEN_RULE_ADDED : "content"); /* invariant 15 */
		return;
	}
	snprintf(why, sizeof(why), "abandoned after %.0f s with no writer: %s%s", g->opt.abandon_s,
		 t->expects_marker ? "its layout ends with a completion marker that never came; "
				   : "",
		 pr.verdict == PROOF_COMPLETE ? "its files are complete" : pr.reason);
	gen_hold(g, t->id, "abandoned", why);
}

/* A commit waited the abandon bound for files other nodes kept open for
 * writing: held (their content is unfinished), never committed without them. */
static void gen_waited_too_long(struct gen_policy *g, const struct gen_todo *t)
{
	char why[GEN_HELD_MAX];
	snprintf(why, sizeof(why), "its commit (%s) waited %.0f s for files of it that other nodes"
		 " kept open for writing", t->rule, g->opt.abandon_s); /* the catalog names them */
	gen_hold(g, t->id, "abandoned", why);
}

static void gen_prove_and_commit(struct gen_policy *g, const struct gen_todo *t)
{
	struct proof_result pr;
	gen_prove(g, t->id, &pr);
	bool commit = pr.added || (pr.verdict == PROOF_COMPLETE && !t->expects_marker);
	pthread_mutex_lock(&g->lock);
	struct gen_live *l = gen_live_find(g, t->id);
	if (l) {
		l->proved_ns = t->activity_ns;
		snprintf(l->unproven, sizeof(l->unproven), "%s", pr.reason);
		if (gen_pending_added(l)) { /* proven again just now */
			l->pending_rule[0] = '\0';
			if (!pr.added) /* no longer a commit waiting for other nodes */
				l->remote_wait_ns = 0;
		}
	}
	bool still = l && l->writers == 0 && l->last_activity_ns == t->activity_ns;
	pthread_mutex_unlock(&g->lock);
	if (commit && still)
		gen_commit_now(g, t->id, pr.added ? GEN_RULE_ADDED : "content"); /* invariant 15 */
	else if (!commit)
		log_debug("generation %llu: not proven complete by its content: %s",
			  (unsigned long long)t->id, pr.reason);
}

/* What the live generation l needs now, if anything (g->lock held). */
static bool gen_tick_choose(struct gen_policy *g, struct gen_live *l, int64_t now, struct gen_todo *t)
{
	int64_t quiet = (int64_t)(g->opt.quiet_s * 1e9), abandon = (int64_t)(g->opt.abandon_s * 1e9);
	if (l->writers || !l->is_open)
		return false;
	int64_t idle = now - l->last_activity_ns;
	t->id = l->id;
	t->activity_ns = l->last_activity_ns;
	t->expects_marker = l->expects_marker;
	t->rule[0] = '\0';
	if (l->pending_rule[0] && l->remote_wait_ns && abandon > 0 &&
	    now - l->remote_wait_ns >= abandon) {
		memcpy(t->rule, l->pending_rule, GEN_RULE_MAX);
		t->kind = GEN_TODO_HOLD_REMOTE;
	} else if (l->pending_rule[0] && !gen_pending_added(l) &&
		   (!l->pending_quiet || idle >= quiet)) {
		memcpy(t->rule, l->pending_rule, GEN_RULE_MAX);
		t->kind = GEN_TODO_COMMIT;
	} else if (abandon > 0 && idle >= abandon && !gen_writers_alive(l)) {
		t->kind = GEN_TODO_HOLD;
	} else if (gen_pending_added(l) && idle >= quiet) { /* proven again */
		t->kind = GEN_TODO_PROVE;
	} else if (!l->pending_rule[0] && (!l->expects_marker || l->rewrite) && idle >= quiet &&
		   l->proved_ns != l->last_activity_ns) {
		/* a marker layout's rewrite: only invariant 15 commits it here */
		t->kind = GEN_TODO_PROVE;
	} else {
		return false;
	}
	return true;
}

static void gen_tick(struct gen_policy *g)
{
	struct gen_todo todo[32];
	int n = 0;
	int64_t now = gen_now_ns();
	pthread_mutex_lock(&g->lock);
	for (struct gen_live *l = g->live; l && n < 32; l = l->next)
		n += gen_tick_choose(g, l, now, &todo[n]);
	pthread_mutex_unlock(&g->lock);
	for (int i = 0; i < n; i++) {
		if (gen_files_being_written(g, todo[i].id))
			continue; /* a handle opened before the file joined it */
		/* a decision by what this node remembers (a rule's commit asks
		 * the catalog itself, which answers one committed already) */
		if ((todo[i].kind == GEN_TODO_PROVE || todo[i].kind == GEN_TODO_HOLD) &&
		    !gen_still_open(g, todo[i].id))
			continue;
		switch (todo[i].kind) {
		case GEN_TODO_COMMIT:
			gen_commit_now(g, todo[i].id, todo[i].rule);
			break;
		case GEN_TODO_PROVE:
			gen_prove_and_commit(g, &todo[i]);
			break;
		case GEN_TODO_HOLD:
			gen_abandoned(g, &todo[i]);
			break;
		case GEN_TODO_HOLD_REMOTE:
			gen_waited_too_long(g, &todo[i]);
			break;
		}
	}
}

/* After a crash, a generation that was open is held (generation.h, G4); the
 * ones its content proves complete are committed as the content rule would
 * have, had the daemon lived through their quiet period. */
static int gen_add_crash_held(void *arg, const struct cat_gen *gen)
{
	return gen->state == GEN_HELD && gen_after_crash(gen) ? cat_gen_vec_add(arg, gen) : 0;
}

/* Invariant 11: a crash-held save whose content is complete but an object
 * of which is gone stays HELD, its reason naming the chunk and the file (an
 * admin's commit or rm decides); nothing is committed, so keep-latest-k
 * deletes nothing for it. The reason keeps GEN_CRASH_REASON first: the
 * next start judges it again, and a new version of it is checked too. */
static void gen_held_no_object(struct gen_policy *g, const struct cat_gen *gen,
			       const char *reason)
{
	char held[GEN_HELD_MAX];
	snprintf(held, sizeof(held), "%s; %s", GEN_CRASH_REASON, reason);
	int rc = strcmp(held, gen->held) == 0 ? 0 : cat_gen_held_reason(g->cat, gen->id, held);
	log_warn("generation %s (series inode %llu, step %llu) stays held: its files are complete,"
		 " but %s%s%s. `ckptfs-admin commit` or `rm` decides", gen->name,
		 (unsigned long long)gen->series, (unsigned long long)gen->step, reason,
		 rc ? "; its reason could not be recorded: " : "", rc ? strerror(-rc) : "");
}

/* Invariant 17, after the tracker's own checks: may tracker `name` (its
 * inode t) commit the crash-held save held, whose content proof found pr?
 * Its text is read at start, so its writer is its owner, if nobody else
 * could have written it; it must be newer than the save, and the save must
 * show no sign of being unfinished and have every object (invariant 11).
 * If not, one line says why (or gen_held_no_object records it). */
static bool gen_tracker_start_may(struct gen_policy *g, const struct cat_gen *held,
				  const char *name, const struct cat_inode *t,
				  const struct proof_result *pr)
{
	char why[GEN_HELD_MAX + 96] = "";
	struct cat_inode dir;
	bool dir_known = cat_getattr(g->cat, held->series, &dir) == 0;
	if (!proof_weak_may_commit(pr->verdict))
		snprintf(why, sizeof(why), "its content shows a sign of an unfinished save: %s",
			 pr->reason);
	else if (cat_gen_rule_restored(held->rule))
		/* review 46 F3: the tracker may name the rolled-back version */
		snprintf(why, sizeof(why), "it is the version a rollback brought back (rule %s): the"
			 " tracker may have been written for the version rolled back", held->rule);
	else if (!dir_known || (dir.uid != t->uid && dir.uid != 0) ||
		 ((dir.mode & (S_IWGRP | S_IWOTH)) && !(dir.mode & S_ISVTX)))
		/* review 46 F5: who put the tracker at its name is unknown */
		snprintf(why, sizeof(why), "its series directory lets others than the tracker's"
			 " owner replace it (uid %u, mode %04o)", dir_known ? (unsigned)dir.uid : 0,
			 dir_known ? (unsigned)(dir.mode & 07777) : 0);
	else if (t->mode & (S_IWGRP | S_IWOTH))
		snprintf(why, sizeof(why), "the tracker is writable by others than its owner (uid %u,"
			 " mode %04o): who wrote it last is unknown", (unsigned)t->uid,
			 (unsigned)(t->mode & 07777));
	else if (t->mtime_ns < held->created_ns)
		snprintf(why, sizeof(why), "the tracker was last written before the save began (an"
			 " earlier save of that name)");
	if (why[0]) {
		log_info("tracker %s (inode %llu) names generation %s (step %llu), held after a"
			 " crash: not committed at start, %s (gen.h invariant 17)", name,
			 (unsigned long long)t->ino, held->name, (unsigned long long)held->step, why);
		return false;
	}
	if (!gen_tracker_may_commit(g, held, name, t->ino, t->uid)) /* invariants 12, 13 */
		return false;
	if (!g->store)
		return true;
	struct proof_result ob;
	int rc = proof_objects(g->cat, held->root, held->name, gen_object_here, g->store, &ob);
	if (rc == 0 && ob.verdict == PROOF_NO_OBJECT)
		gen_held_no_object(g, held, ob.reason);
	else if (rc != 0 || ob.verdict != PROOF_COMPLETE)
		log_info("tracker %s (inode %llu) names generation %s (step %llu), held after a"
			 " crash: not committed at start, its objects could not all be checked (%s;"
			 " gen.h invariant 11)", name, (unsigned long long)t->ino, held->name,
			 (unsigned long long)held->step, rc ? strerror(-rc) : ob.reason);
	return rc == 0 && ob.verdict == PROOF_COMPLETE;
}

/* Invariant 17: a save held by a crash that a tracker of its series names
 * (read as gen_tracker_closed reads it) is committed by rule tracker, if
 * gen_tracker_start_may lets it. */
static void gen_tracker_at_start(struct gen_policy *g, const struct cat_gen *held,
				 const struct proof_result *pr)
{
	for (int i = 0; gen_tracker_names[i]; i++) {
		struct cat_inode t;
		struct cat_gen named;
		if (cat_lookup(g->cat, held->series, gen_tracker_names[i], &t) != 0 ||
		    gen_tracker_target(g, t.ino, held->series, &named) != 0 || named.id != held->id)
			continue;
		if (gen_tracker_start_may(g, held, gen_tracker_names[i], &t, pr))
			gen_commit_now(g, held->id, "tracker");
		return;
	}
}

static void gen_recheck_crash_held(struct gen_policy *g)
{
	struct cat_gen_vec l = { 0 };
	if (cat_gen_list_brief(g->cat, 0, false, gen_add_crash_held, &l) == 0)
		for (size_t i = 0; i < l.n; i++) {
			struct proof_result pr;
			gen_prove(g, l.v[i].id, &pr);
			if (pr.verdict == PROOF_COMPLETE)
				gen_commit_now(g, l.v[i].id, "content");
			else if (pr.verdict == PROOF_NO_OBJECT)
				gen_held_no_object(g, &l.v[i], pr.reason);
			else /* invariant 17 */
				gen_tracker_at_start(g, &l.v[i], &pr);
		}
	cat_gen_vec_free(&l);
}

/* The thread's period (g->lock held): shorter while a commit waits for
 * other nodes' writers. */
static long gen_tick_ms(struct gen_policy *g)
{
	for (struct gen_live *l = g->live; l; l = l->next)
		if (l->remote_wait_ns)
			return GEN_REMOTE_POLL_MS;
	return GEN_TICK_MS;
}

static void *gen_thread(void *arg)
{
	struct gen_policy *g = arg;
	pthread_mutex_lock(&g->lock);
	while (!g->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += gen_tick_ms(g) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		/* a request made while busy is not lost; one waiting for another
		 * node's keep duty is tried again after a tick */
		if ((g->nkeep == 0 && !g->keep_all) || g->keep_waits_duty)
			pthread_cond_timedwait(&g->wake, &g->lock, &until);
		g->keep_waits_duty = false;
		if (g->stop)
			break;
		bool recheck = g->recheck_held;
		g->recheck_held = false;
		pthread_mutex_unlock(&g->lock);
		if (recheck)
			gen_recheck_crash_held(g);
		bool kept = gen_run_keeps(g);
		gen_tick(g);
		pthread_mutex_lock(&g->lock);
		g->keep_waits_duty = !kept;
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

void gen_policy_ready(struct gen_policy *g)
{
	pthread_mutex_lock(&g->lock);
	g->recheck_held = true;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
}

int gen_policy_start(struct gen_policy *g)
{
	pthread_mutex_lock(&g->lock);
	assert(!g->running && !g->stop); /* started once */
	g->keep_all = g->opt.keep > 0; /* a deletion a crash cut short is finished */
	int rc = pthread_create(&g->thread, NULL, gen_thread, g);
	g->running = rc == 0;
	pthread_mutex_unlock(&g->lock);
	return -rc;
}

static void gen_stop_thread(struct gen_policy *g)
{
	if (!g->running)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = true;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	pthread_mutex_lock(&g->lock);
	g->running = false;
	pthread_mutex_unlock(&g->lock);
	/* what the thread had not got to; with the keep duty elsewhere, that
	 * node's passes (and every node's pass at start) cover these series */
	if (!gen_run_keeps(g)) {
		pthread_mutex_lock(&g->lock);
		g->nkeep = 0;
		g->keep_all = false;
		pthread_mutex_unlock(&g->lock);
	}
	assert(g->nkeep == 0 && !g->keep_all);
}

#define GEN_NO_MARKER "unfinished at unmount: its layout ends with a completion marker that" \
		      " never came"

/* pggen.h X7: on a node of a shared catalog, an OPEN
 * generation another live node writes in or tracks is that node's to
 * decide; this node's unmount proves nothing about its files. A catalog
 * that cannot answer decides as before (this node holds what it saw
 * unfinished). */
static bool gen_others_take_part(struct gen_policy *g, uint64_t id)
{
	bool others = false;
	int rc = cat_gen_others_in(g->cat, id, &others);
	if (rc != 0)
		log_warn("generation %llu: at unmount, whether another node takes part in it is"
			 " unknown (%s): decided here", (unsigned long long)id, strerror(-rc));
	return rc == 0 && others;
}

void gen_policy_shutdown(struct gen_policy *g)
{
	gen_stop_thread(g);
	/* The last save of a finished job is kept; a save still being written,
	 * a marker layout without its marker, a truncated file, or a rank's file
	 * the previous save had, is held. */
	for (;;) {
		pthread_mutex_lock(&g->lock);
		struct gen_live *l = g->live;
		while (l && !l->is_open) { /* committed, only held open for writing */
			uint64_t drop = l->id;
			l = l->next;
			gen_live_drop(g, drop);
		}
		uint64_t id = l ? l->id : 0;
		/* a pending commit of invariant 15 is proven again here */
		bool signalled = l && l->pending_rule[0] && !gen_pending_added(l);
		/* a rewrite may have only added files (invariant 15): proven first */
		bool no_marker = l && l->expects_marker && !signalled;
		bool rewrite = l && l->rewrite;
		const char *unfinished = !l ? NULL
				   : l->writers > 0 ? "a file in it was still open for writing at unmount"
				   : no_marker && !rewrite ? GEN_NO_MARKER
				   : NULL;
		char rule[GEN_RULE_MAX];
		snprintf(rule, sizeof(rule), "%s", signalled ? l->pending_rule : "unmount");
		pthread_mutex_unlock(&g->lock);
		if (!id)
			break;
		/* a signal seen here commits (the catalog answers one committed
		 * already); else only what is still OPEN is decided here, and one
		 * another node settled is dropped at the top of the loop */
		if (!signalled && !gen_still_open(g, id))
			continue;
		struct proof_result pr = { .verdict = PROOF_UNPROVEN };
		bool others = !signalled && gen_others_take_part(g, id);
		/* invariant 16: a file whose last close failed (or lost changes)
		 * holds it, signalled or not, before any proof or rewrite rule */
		char failed[GEN_HELD_MAX] = "";
		if (!others && !unfinished)
			gen_failed_why(g, id, failed, sizeof(failed));
		if (!others && !unfinished && !signalled && !failed[0])
			gen_prove(g, id, &pr);
		if (others)
			log_info("generation %llu: left open at unmount: another live node takes part"
				 " in it and decides it", (unsigned long long)id);
		else if (unfinished)
			gen_hold(g, id, "unmount", unfinished);
		else if (failed[0])
			gen_hold(g, id, "unmount", failed);
		else if (pr.added) /* invariant 15 */
			gen_commit_now(g, id, GEN_RULE_ADDED);
		else if (no_marker) /* a rewrite that changed or removed a file */
			gen_hold(g, id, "unmount", GEN_NO_MARKER);
		else if (!proof_weak_may_commit(pr.verdict)) /* invariant 5 */
			gen_hold(g, id, "unmount", pr.reason);
		else if (rewrite && pr.verdict != PROOF_COMPLETE) /* invariant 5 */
			gen_hold(g, id, "unmount", GEN_REWRITE_UNPROVEN);
		else
			gen_commit_now(g, id, pr.verdict == PROOF_COMPLETE ? "content" : rule);
		pthread_mutex_lock(&g->lock);
		gen_live_drop(g, id); /* in case the catalog call failed */
		pthread_mutex_unlock(&g->lock);
	}
	pthread_mutex_lock(&g->lock);
	assert(!g->running && g->live == NULL); /* every OPEN one decided */
	pthread_mutex_unlock(&g->lock);
}

void gen_policy_free(struct gen_policy *g)
{
	if (!g)
		return;
	gen_stop_thread(g);
	while (g->live)
		gen_live_drop(g, g->live->id);
	regfree(&g->re);
	pthread_mutex_destroy(&g->lock);
	pthread_mutex_destroy(&g->commit_lock);
	pthread_cond_destroy(&g->wake);
	free(g);
}

int gen_before_attr_change(struct gen_policy *g, uint64_t gen_id, bool *in_place)
{
	struct cat_gen gen;
	int rc = gen_settled(g, gen_id, &gen, in_place);
	return rc == -ENOENT ? 0 : rc;
}
