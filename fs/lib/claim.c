/* claim — one catalog per BACKING: taking, renewing, releasing and giving
 * back the claim, as epochs (claim.h invariants 1-3, 9-11), and bringing a
 * format-1 BACKING to them (15). The record and its judgment are claimrec.c;
 * the contract and the invariants claim.h; the layout docs/FORMAT.md ("The
 * claim").
 *
 * Acquisition is a loop of at most CLAIM_TRIES rounds, each:
 *
 *   format 1's CLAIM_FILE the marker (claim_legacy: made, or a format-1
 *   claim moved aside and copied into epoch 1; 15)
 *   list CLAIM_DIR, read the largest epoch E (none: E = 0) and judge it
 *     ├─ HELD, BEHIND ─▶ -EBUSY, the holder named
 *     ├─ OURS, shared ─▶ held as it is (a sibling node's: invariant 6)
 *     └─ FREE, STALE, OURS ─▶ put_new(E+1, our record)
 *                              ├─ EEXIST ─▶ next round (after a nap)
 *                              └─ 0 ─▶ list again (11): a larger epoch ─▶
 *                                      void, next round; else held
 *
 * A renewal, a release and a give-back are one step (claim_advance): list
 * CLAIM_DIR; our epoch the largest ─▶ put_new(ours + 1, the record) ─▶ list
 * again (11) ─▶ sure (9), and epochs below ours − 1 removed (10). Another's
 * larger epoch, ours gone, EEXIST, or a void create: fenced (a shared
 * node: a sibling's epoch of our catalog is ours, 6). */
#define _GNU_SOURCE
#include "claim.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "claimrec.h"
#include "log.h"

#define CLAIM_TRIES 8
#define CLAIM_LOST 1 /* claim_advance's "lost" (an errno such as ESTALE is BACKING's: NEW-4) */

struct claim {
	struct backing *b;
	struct claim_rec self;
	struct claim_ledger led; /* the caller's, copied (self.ledger points here: 12) */
	unsigned timeout_s;
	uint64_t epoch;		 /* the epoch we made last (invariant 1) */
	char written[CLAIM_MAX]; /* its bytes */
	size_t written_len;
	uint64_t tried_epoch; /* a create that failed, maybe landed (invariant 3); 0 none */
	char tried[CLAIM_MAX];
	size_t tried_len;
	char tried_before[CLAIM_MAX]; /* the failed try before it, for the same number */
	size_t tried_before_len;
	int64_t adopted_renewed; /* heartbeat of a record adopted not as this try's (9) */
	unsigned adopted_lease;  /* its lease line (0: none) */
	unsigned lease_seen;     /* shared: the longest lease of a sibling's record seen (6) */
	int fenced;		/* invariant 9: 0 → 1 once (atomics), logged then */
	uint64_t sure_until_ms; /* invariant 9, on claim_clock_ms (atomics) */
	int unsure_said;	/* invariant 9: the wait past the deadline logged (atomics) */
	char *replaced;		/* the bytes claim_acquire judged (claim_abandon) */
	size_t replaced_len;
	pthread_t thread;
	bool running;
	bool stop;
	pthread_mutex_t lock;
	pthread_cond_t wake;
};

/* ---- clocks, sureness, the fence ---- */

static int64_t claim_now(void)
{
	return (int64_t)time(NULL);
}

/* Invariant 9's clock: monotonic, counting a suspended machine (meta/lease.c
 * lease_clock_ms likewise). */
static uint64_t claim_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A renewal (or acquisition) that started at started_ms and found the claim
 * ours: no taker judges it stale before the timeout from then; the holder
 * stops an eighth earlier (invariant 9). */
static void claim_sure_for(struct claim *c, uint64_t started_ms, unsigned term_s)
{
	uint64_t term = (uint64_t)term_s * 1000;
	__atomic_store_n(&c->sure_until_ms, started_ms + term - term / 8, __ATOMIC_RELEASE);
}

static void claim_sure_from(struct claim *c, uint64_t started_ms)
{
	claim_sure_for(c, started_ms, c->timeout_s);
}

/* Invariant 9: from now on this holder writes nothing to BACKING. */
static void claim_fence(struct claim *c, const char *why)
{
	if (__atomic_exchange_n(&c->fenced, 1, __ATOMIC_ACQ_REL))
		return;
	log_error("BACKING %s: this daemon no longer holds the claim (epoch %" PRIu64 " of %s/: "
		  "%s): from now on it puts, removes and renews nothing on BACKING; changes fail "
		  "with EROFS, reads go on; what was not yet uploaded stays in cache %s "
		  "(docs/DESIGN.md \"Fenced\"); unmount",
		  backing_spec(c->b), c->epoch, CLAIM_DIR, why, c->self.cache);
}

/* Invariant 9: the last renewal that found the claim ours is recent enough. */
static bool claim_sure(struct claim *c)
{
	/* shared too (review 56 S1): never taken by age (7), but by age once
	 * broken by hand (8) */
	return claim_clock_ms() < __atomic_load_n(&c->sure_until_ms, __ATOMIC_ACQUIRE);
}

bool claim_lost(struct claim *c)
{
	return c && __atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE);
}

unsigned claim_timeout_s(const struct claim *c)
{
	return c ? c->timeout_s : 0;
}

uint64_t claim_epoch(const struct claim *c)
{
	return c ? c->epoch : 0;
}

int (*claim_test_hook)(struct claim *c, const char *point);

static int claim_hook(struct claim *c, const char *point)
{
	return claim_test_hook ? claim_test_hook(c, point) : 0;
}

bool claim_may_write(struct claim *c)
{
	if (!c)
		return true;
	if (claim_lost(c) || claim_hook(c, "may-write") != 0)
		return false;
	if (claim_sure(c))
		return true;
	if (!__atomic_exchange_n(&c->unsure_said, 1, __ATOMIC_ACQ_REL))
		log_warn("BACKING %s: the claim was not renewed for %u s less a margin (another "
			 "catalog may take a claim not renewed for %u s): nothing is put on or removed "
			 "from BACKING until a renewal finds the claim still ours; writes go on into "
			 "the cache", backing_spec(c->b), c->timeout_s, c->timeout_s);
	return false;
}

/* ---- the epochs on BACKING ---- */

/* What format 1's CLAIM_FILE is (invariant 15); claim_file_kind's answers,
 * besides -errno. */
enum { CLAIM_F1_NONE = 0, CLAIM_F1_MARKER = 1, CLAIM_F1_CLAIM = 2 };
static int claim_file_kind(struct backing *b, char *buf, size_t *len);


void claim_epoch_name(uint64_t epoch, char *out, size_t size)
{
	snprintf(out, size, CLAIM_DIR "/%0*" PRIu64, CLAIM_EPOCH_DIGITS, epoch);
}

/* A listing of CLAIM_DIR: the largest epoch, and every epoch's number (for
 * the removals of invariant 10). Names that are not CLAIM_EPOCH_DIGITS
 * digits are not epochs and are left alone. */
struct claim_scan {
	uint64_t top; /* 0: no epoch */
	uint64_t *num;
	int n, cap;
	unsigned names;
};

static int claim_scan_name(void *arg, const char *name)
{
	struct claim_scan *s = arg;
	if (++s->names > CLAIM_EPOCHS_MAX)
		return -E2BIG; /* invariant 5: the largest could be missed */
	if (strlen(name) != CLAIM_EPOCH_DIGITS || strspn(name, "0123456789") != CLAIM_EPOCH_DIGITS)
		return 0;
	errno = 0;
	uint64_t e = strtoull(name, NULL, 10);
	if (e == 0 || e == UINT64_MAX || errno == ERANGE)
		return 0; /* not an epoch: no next number (review 56 L9) */
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 8;
		uint64_t *num = realloc(s->num, (size_t)cap * sizeof(*num));
		if (!num)
			return -ENOMEM;
		s->num = num;
		s->cap = cap;
	}
	s->num[s->n++] = e;
	if (e > s->top)
		s->top = e;
	return 0;
}

/* Lists CLAIM_DIR into s (reset first): 0 (no directory: no epoch), or
 * -errno. */
static int claim_scan(struct backing *b, struct claim_scan *s)
{
	s->top = 0;
	s->n = 0;
	s->names = 0;
	int rc = backing_list(b, CLAIM_DIR, claim_scan_name, s);
	return rc == -ENOENT ? 0 : rc;
}

/* Epoch e's bytes: 0 with *parsed (0, or -EINVAL: too large or not a
 * record), -ENOENT, or BACKING's error. */
static int claim_get(struct backing *b, uint64_t e, char *buf, size_t *len,
		     struct claim_rec *rec, int *parsed)
{
	char name[CLAIM_NAME_MAX];
	claim_epoch_name(e, name, sizeof(name));
	int rc = backing_get(b, name, buf, CLAIM_MAX, len);
	if (rc == -EFBIG) {
		*len = 0;
		*parsed = -EINVAL;
		return 0;
	}
	if (rc == 0)
		*parsed = claim_parse(buf, *len, rec);
	return rc;
}

int claim_current(struct backing *b, uint64_t *epoch, char *buf, size_t *len, int *parsed)
{
	struct claim_scan s = { 0 };
	struct claim_rec rec;
	int rc = -ENOENT;
	/* a largest read ENOENT was removed after two more epochs (10): look again */
	for (int i = 0; i < CLAIM_TRIES && rc == -ENOENT; i++) {
		rc = claim_scan(b, &s);
		if (rc == 0 && s.top == 0) {
			rc = -ENOENT;
			break;
		}
		if (rc == 0)
			rc = claim_get(b, s.top, buf, len, &rec, parsed);
	}
	free(s.num);
	*epoch = s.top;
	return rc;
}

int claim_current_rec(struct backing *b, struct claim_rec *rec)
{
	char *buf = malloc(CLAIM_MAX);
	size_t len = 0;
	uint64_t e = 0;
	int parsed = 0;
	int rc = buf ? claim_current(b, &e, buf, &len, &parsed) : -ENOMEM;
	if (rc == -ENOENT) { /* a format-1 BACKING not yet taken by format 2 (15) */
		int kind = claim_file_kind(b, buf, &len);
		parsed = kind == CLAIM_F1_CLAIM && len == 0 ? -EINVAL : 0; /* too large: not a record */
		rc = kind == CLAIM_F1_CLAIM ? 0 : kind < 0 ? kind : -ENOENT; /* the marker, or none */
	}
	if (rc == 0 && parsed == 0)
		rc = claim_parse(buf, len, rec);
	else if (rc == 0)
		rc = parsed;
	if (rc == 0 && rec->vacant[0])
		rc = -ENOENT; /* invariant 8: nobody's */
	free(buf);
	return rc;
}

/* The exclusive create of epoch e (invariant 1), after the test hook of
 * point (its failure is the create's). */
static int claim_create(struct backing *b, struct claim *c, uint64_t e, const char *bytes,
			size_t len, const char *point)
{
	int rc = c ? claim_hook(c, point) : 0; /* c NULL: claim_break's, no hook */
	if (rc != 0)
		return rc;
	char name[CLAIM_NAME_MAX];
	claim_epoch_name(e, name, sizeof(name));
	return backing_put_new(b, name, bytes, len);
}

/* Invariant 10: epochs below keep − 1 go, as s listed them. */
static void claim_trim(struct backing *b, const struct claim_scan *s, uint64_t keep)
{
	char name[CLAIM_NAME_MAX];
	for (int i = 0; i < s->n; i++) {
		if (s->num[i] + 1 >= keep)
			continue;
		claim_epoch_name(s->num[i], name, sizeof(name));
		backing_remove(b, name);
	}
}

/* Our record as bytes, in c->written. */
static int claim_render(struct claim *c)
{
	/* invariant 9: judged by it too; a shared node's, the longest of its
	 * catalog's nodes it has seen (6: a break waits the top's alone) */
	c->self.lease_s = c->self.shared && c->lease_seen > c->timeout_s ? c->lease_seen
									 : c->timeout_s;
	c->self.renewed = claim_now();
	int n = claim_format(&c->self, c->written, sizeof(c->written));
	if (n < 0)
		return n;
	c->written_len = (size_t)n;
	return 0;
}

/* A vacant record (invariant 8) of this host as its maker: why is
 * "broken-by-hand" or "given-back". */
static int claim_vacant(const char *why, unsigned lease_s, char *buf, size_t size)
{
	struct claim_rec v = { 0 };
	v.lease_s = lease_s;
	snprintf(v.catalog, sizeof(v.catalog), "%s", CLAIM_NOBODY_ID);
	claim_random_hex(v.instance);
	claim_this_host(&v);
	snprintf(v.cache, sizeof(v.cache), "/");
	v.pid = (long)getpid();
	v.renewed = claim_now();
	snprintf(v.vacant, sizeof(v.vacant), "%s", why);
	return claim_format(&v, buf, size);
}

/* Invariant 15: the marker, a directory CLAIM_FILE holding a README, made
 * by one exclusive create (its directory with it). 0 (made, or there),
 * -EEXIST (a format-1 claim file stands there), or -errno. */
int claim_mark(struct backing *b)
{
	static const char text[] =
		"This BACKING's claim (which catalog writes it) is in " CLAIM_DIR "/, one file per\n"
		"epoch (ckptfs claim layout 2, docs/FORMAT.md \"The claim\"). This directory\n"
		"stands where older ckptfs look for their claim file, so that they refuse\n"
		"this BACKING instead of taking it: upgrade them. Do not remove it.\n";
	int rc = backing_put_new(b, CLAIM_MARKER_README, text, sizeof(text) - 1);
	return rc == -EEXIST ? 0 : rc == -ENOTDIR ? -EEXIST : rc;
}

/* Invariant 15: what CLAIM_FILE is: CLAIM_F1_MARKER (a directory),
 * CLAIM_F1_NONE, CLAIM_F1_CLAIM (a file: a format-1 claim, its bytes in
 * buf, *len; too large: *len 0), or -errno. */
static int claim_file_kind(struct backing *b, char *buf, size_t *len)
{
	uint64_t size = 0;
	int kind = backing_kind(b, CLAIM_FILE, &size); /* unlogged: the marker is the common case */
	if (kind != 1) /* backing_kind's: 0 nothing, 2 a directory, or -errno */
		return kind == 2 ? CLAIM_F1_MARKER : kind == 0 ? CLAIM_F1_NONE : kind;
	int rc = backing_get(b, CLAIM_FILE, buf, CLAIM_MAX, len);
	if (rc == -EFBIG)
		*len = 0;
	return rc == -EISDIR		    ? CLAIM_F1_MARKER
	       : rc == -ENOENT		    ? CLAIM_F1_NONE
	       : rc == 0 || rc == -EFBIG ? CLAIM_F1_CLAIM
					    : rc;
}

/* Invariant 6: a record of our shared catalog. */
static bool claim_shared_ours(const struct claim *c, const char *text, size_t len)
{
	struct claim_rec rec;
	return c->self.shared && claim_parse(text, len, &rec) == 0 && rec.shared &&
	       strcmp(rec.catalog, c->self.catalog) == 0;
}

/* ---- format 1 (invariant 15) ---- */

/* The format-1 asides in tmp/ (tmp/claim.*): their names, at most
 * CLAIM_EPOCHS_MAX (more: -E2BIG). */
struct claim_asides {
	char (*name)[96];
	int n, cap;
};

static int claim_aside_name(void *arg, const char *name)
{
	struct claim_asides *l = arg;
	if (strncmp(name, "claim.", 6) != 0 || strlen(name) + 5 > sizeof(l->name[0]))
		return 0;
	if (l->n == CLAIM_EPOCHS_MAX)
		return -E2BIG;
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 8;
		void *p = realloc(l->name, (size_t)cap * sizeof(l->name[0]));
		if (!p)
			return -ENOMEM;
		l->name = p;
		l->cap = cap;
	}
	snprintf(l->name[l->n++], sizeof(l->name[0]), "tmp/%s", name);
	return 0;
}

/* The format-1 asides judged (invariant 15, as format 1's invariant 10
 * judged them): 1 if one is a live holder's (HELD) — its record in held —,
 * else 0 with the newest parseable one in buf/len
 * (len 0: none); or -errno. */
static int claim_asides_judge(struct claim *c, int64_t now, char *buf, size_t *len,
			      struct claim_rec *held)
{
	struct claim_asides l = { 0 };
	int rc = backing_list(c->b, "tmp", claim_aside_name, &l);
	if (rc == -ENOENT)
		rc = 0;
	char *one = rc == 0 ? malloc(CLAIM_MAX) : NULL;
	if (rc == 0 && !one)
		rc = -ENOMEM;
	int64_t newest = INT64_MIN;
	*len = 0;
	for (int i = 0; rc == 0 && i < l.n; i++) {
		size_t n = 0;
		struct claim_rec r;
		int g = backing_get(c->b, l.name[i], one, CLAIM_MAX, &n);
		/* gone, too large, not a file (a marker an older mover moved), not a record */
		if (g == -ENOENT || g == -EFBIG || g == -EISDIR || g == -ELOOP || g == -EINVAL ||
		    (g == 0 && claim_parse(one, n, &r) != 0))
			continue;
		if (g != 0) {
			rc = g;
			break;
		}
		if (claim_judge(&r, &c->self, now, c->timeout_s, claim_holder_alive, NULL) ==
		    CLAIM_HELD) {
			*held = r;
			rc = 1;
			break;
		}
		if (r.renewed > newest) {
			newest = r.renewed;
			memcpy(buf, one, n);
			*len = n;
		}
	}
	free(one);
	free(l.name);
	return rc;
}

/* Invariant 15, no epoch: the newest format-1 aside copied into epoch 1
 * (none: nothing, the claim is free). While CLAIM_FILE is absent (!now) an
 * aside is an older take under way, whose maker removes it if its create
 * meets our marker (review 56 M1): looked at again, and copied only at the
 * last round (an aside left by a crash); with the marker there (now), at
 * once. 0, -EINPROGRESS (look again; refused at the last round: msg), or
 * -errno. */
static int claim_legacy_import(struct claim *c, int64_t now, bool at_once, char *msg,
			       size_t msgsize)
{
	char *buf = malloc(CLAIM_MAX);
	size_t len = 0;
	struct claim_rec held;
	int rc = buf ? claim_asides_judge(c, now, buf, &len, &held) : -ENOMEM;
	if (rc == 1) {
		claim_describe(&held, c->self.shared, 0, now, msg, msgsize, backing_spec(c->b),
			       c->timeout_s);
		rc = -EINPROGRESS;
	} else if (rc == 0 && len > 0 && !at_once) {
		snprintf(msg, msgsize, "BACKING %s: an older ckptfs is taking the claim %s (a "
			 "tmp/claim.* aside, and no claim): looked again", backing_spec(c->b),
			 CLAIM_FILE);
		rc = -EINPROGRESS;
	} else if (rc == 0 && len > 0) {
		rc = claim_create(c->b, c, 1, buf, len, "migrate-copy");
		if (rc == -EEXIST)
			rc = 0;
	}
	free(buf);
	return rc;
}

/* Invariant 15, a format-1 claim judged takeable (its bytes in have): moved
 * aside, compared, the marker put in its place, the judged bytes copied into
 * epoch 1. 0, -EAGAIN (changed meanwhile: look again), or -errno. */
static int claim_legacy_move(struct claim *c, const char *have, size_t len, uint64_t target)
{
	char aside[96], *moved = malloc(CLAIM_MAX);
	size_t mlen = 0;
	if (!moved)
		return -ENOMEM;
	snprintf(aside, sizeof(aside), "tmp/claim.%s.m", c->self.instance);
	/* the epoch first, while the file still stands: the last writer is
	 * named before any gap or marker (review 56 M1, review 58 R58-2); an
	 * EEXIST is another's epoch made meanwhile: look again */
	int rc = claim_create(c->b, c, target, have, len, "migrate-copy");
	if (rc == -EEXIST)
		rc = -EAGAIN;
	if (rc == 0) {
		claim_hook(c, "migrate-move");
		rc = backing_move(c->b, CLAIM_FILE, aside);
	}
	if (rc == 0)
		rc = backing_get(c->b, aside, moved, CLAIM_MAX, &mlen);
	if (rc == -ENOENT) /* another moved it first: format 1's rules then */
		rc = -EAGAIN;
	else if (rc == 0 && (mlen != len || memcmp(moved, have, len) != 0))
		rc = -EAGAIN; /* another's bytes: they stay aside (format 1's invariant 2) */
	if (rc == 0) {
		claim_hook(c, "migrate-marker");
		rc = claim_mark(c->b);
		if (rc == -EEXIST) /* a format-1 take in our gap: its checks see our aside */
			rc = -EAGAIN;
	}
	if (rc == 0) {
		backing_remove(c->b, aside);
		log_info("BACKING %s: its claim moved to format 2 (%s/, %s now a marker that older "
			 "ckptfs refuse)", backing_spec(c->b), CLAIM_DIR, CLAIM_FILE);
	}
	free(moved);
	return rc;
}

/* Invariant 15 for a format-1 claim have (len bytes) with no epoch: judged
 * as format 1 judged it, and taken into epoch 1 when takeable. */
static int claim_legacy_take(struct claim *c, const char *have, size_t len, uint64_t target,
			     int64_t now, char *msg, size_t msgsize)
{
	const char *spec = backing_spec(c->b);
	struct claim_rec l;
	int parsed = claim_parse(have, len, &l);
	if (parsed != 0) {
		claim_describe(&l, c->self.shared, parsed, now, msg, msgsize, spec, c->timeout_s);
		return -EBUSY;
	}
	char *buf = malloc(CLAIM_MAX);
	size_t alen = 0;
	struct claim_rec held;
	int rc = buf ? claim_asides_judge(c, now, buf, &alen, &held) : -ENOMEM;
	free(buf);
	if (rc < 0)
		return rc;
	if (rc == 1 || alen > 0) { /* a format-1 take or renewal under way, or left midway */
		snprintf(msg, msgsize, "BACKING %s: an older ckptfs is taking or renewing its claim "
			 "%s (tmp/claim.* asides beside it); if no older ckptfs uses this BACKING, "
			 "remove %s/tmp/claim.* by hand", spec, CLAIM_FILE, spec);
		return -EINPROGRESS;
	}
	enum claim_verdict v = claim_judge(&l, &c->self, now, c->timeout_s, claim_holder_alive,
					   NULL);
	if (v == CLAIM_OURS && l.shared && now - l.renewed <= (int64_t)c->timeout_s) {
		snprintf(msg, msgsize, "BACKING %s: a node of this shared catalog running an older "
			 "ckptfs (host %s, cache %s) renewed the claim %" PRId64 " s ago: stop every "
			 "node and upgrade them all before mounting", spec, l.host, l.cache,
			 now - l.renewed);
		return -EBUSY;
	}
	if (v == CLAIM_BEHIND) {
		claim_describe_behind(&l, &c->self, now, msg, msgsize, spec);
		return -EBUSY;
	}
	if (v == CLAIM_HELD) {
		claim_describe(&l, c->self.shared, 0, now, msg, msgsize, spec, c->timeout_s);
		return -EBUSY;
	}
	return claim_legacy_move(c, have, len, target);
}

/* Invariant 15: a format-1 claim beside epochs whose heartbeat is older
 * than the largest epoch's (a file restored by hand): it names no writer
 * later than the epochs. An unparsable one is judged as format 1 judges it. */
static bool claim_legacy_older(struct claim *c, uint64_t top, const char *have, size_t len)
{
	struct claim_rec l, t;
	char *buf = malloc(CLAIM_MAX);
	size_t tlen = 0;
	int parsed = -EINVAL;
	bool older = buf && claim_parse(have, len, &l) == 0 &&
		     claim_get(c->b, top, buf, &tlen, &t, &parsed) == 0 && parsed == 0 &&
		     l.renewed < t.renewed;
	free(buf);
	return older;
}

/* Invariant 15: CLAIM_FILE is the marker before any epoch is judged. 0,
 * -EAGAIN (look again), -EINPROGRESS (look again, refused at the last
 * round: msg), -EBUSY (msg), or -errno. */
static int claim_legacy(struct claim *c, int64_t now, bool last, char *msg, size_t msgsize)
{
	char *have = malloc(CLAIM_MAX);
	size_t len = 0;
	struct claim_scan s = { 0 };
	int kind = have ? claim_file_kind(c->b, have, &len) : -ENOMEM;
	if (kind < 0 && kind != -ENOMEM)
		snprintf(msg, msgsize, "BACKING %s: cannot read %s (the marker of the claim's "
			 "layout): %s", backing_spec(c->b), CLAIM_FILE, strerror(-kind));
	int rc = kind < 0 ? kind : claim_scan(c->b, &s);
	if (rc != 0)
		;
	else if (kind == CLAIM_F1_MARKER && s.top == 0) /* a first mount stopped after its mark */
		rc = claim_legacy_import(c, now, true, msg, msgsize);
	else if (kind == CLAIM_F1_MARKER)
		rc = 0;
	else if (kind == CLAIM_F1_NONE && s.top == 0) { /* format 1 absent, or a new BACKING (M1: copy first) */
		rc = claim_legacy_import(c, now, last, msg, msgsize);
		rc = rc == 0 ? claim_mark(c->b) : rc;
		rc = rc == -EEXIST ? -EAGAIN : rc;
	} else if (kind == CLAIM_F1_NONE) { /* the marker removed by hand beside epochs: made again */
		rc = claim_mark(c->b);
		rc = rc == -EEXIST ? -EAGAIN : rc;
	} else if (s.top > 0 && claim_legacy_older(c, s.top, have, len)) {
		snprintf(msg, msgsize, "BACKING %s: a format-1 claim file %s beside the claims in %s/ "
			 "is older than the newest of them (restored by hand from an old copy?): it "
			 "names no later writer; remove it (rm %s/%s) to mount", backing_spec(c->b),
			 CLAIM_FILE, CLAIM_DIR, backing_spec(c->b), CLAIM_FILE);
		rc = -EBUSY; /* review 58 L-h: never copied over a newer holder */
	} else { /* a format-1 claim: judged; takeable, copied into the next epoch (beside
		  * epochs: an older daemon wrote BACKING after them, review 57 NEW-5) */
		rc = claim_legacy_take(c, have, len, s.top + 1, now, msg, msgsize);
	}
	free(s.num);
	free(have);
	return rc;
}

/* ---- acquisition ---- */

/* Before the round after a lost create (invariant 2): a random nap of up to
 * 8 << round ms (at most 200), so that takers who lost together do not judge
 * and create in step again. */
static void claim_back_off_nap(int round)
{
	unsigned r = 0;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (unsigned)getpid() * 2654435761u;
	unsigned cap = 8u << (round < 5 ? round : 5);
	unsigned ms = 1 + r % (cap < 200 ? cap : 200);
	struct timespec nap = { 0, (long)ms * 1000000L };
	nanosleep(&nap, NULL);
}

/* What claim_acquire judged, for claim_abandon: its bytes, or none. */
static void claim_note_replaced(struct claim *c, const char *judged, size_t len)
{
	free(c->replaced);
	c->replaced = NULL;
	c->replaced_len = len; /* len > 0 with replaced NULL: unknown, left alone */
	if (len > 0 && (c->replaced = malloc(len)) != NULL)
		memcpy(c->replaced, judged, len);
}

/* Invariant 12: a take begun is recorded before the first look (so before
 * the exclusive create), a take made after it. 0, or -errno with msg. */
static int claim_note(struct claim *c, bool done, char *msg, size_t msgsize)
{
	const struct claim_ledger *l = c->self.ledger;
	if (!l || !l->note)
		return 0;
	int rc = l->note(l->arg, done, c->self.take, c->self.instance);
	if (rc != 0)
		snprintf(msg, msgsize, "catalog of cache %s: cannot record its take %" PRIu64
			 " of BACKING %s's claim: %s", c->self.cache, c->self.take,
			 backing_spec(c->b), strerror(-rc));
	return rc;
}

static struct claim *claim_new(struct backing *b, const char *catalog_id, bool shared,
			       bool fresh, const struct claim_ledger *led, const char *cache,
			       unsigned timeout_s)
{
	struct claim *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->b = b;
	c->timeout_s = timeout_s ? timeout_s : CLAIM_DEFAULT_TIMEOUT_S;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	snprintf(c->self.catalog, sizeof(c->self.catalog), "%s", catalog_id);
	snprintf(c->self.cache, sizeof(c->self.cache), "%s", cache);
	c->self.shared = shared;
	c->self.fresh = fresh;
	claim_this_host(&c->self);
	claim_random_hex(c->self.instance);
	c->self.pid = (long)getpid();
	if (led && !shared) { /* invariant 12: shared claims are not taken by turns (7) */
		c->led = *led;
		c->self.ledger = &c->led;
		c->self.take = led->take + 1;
	}
	assert(claim_hex_id(c->self.catalog) && c->self.cache[0] == '/');
	return c;
}

/* Invariant 9 for a record adopted that is not this renewal's render (an
 * older failed try's, a sibling's: review 57 NEW-1): its holder is sure from
 * that record's heartbeat (a second less, for its whole seconds), not from
 * this renewal's start, and for no longer than that record's lease (a
 * sibling's may be shorter: review 58 R58-1). */
static uint64_t claim_started_adopted(const struct claim *c, uint64_t started)
{
	int64_t ago = claim_now() - c->adopted_renewed + 1;
	uint64_t ms = claim_clock_ms();
	uint64_t from = ago <= 0 ? ms : (uint64_t)ago * 1000 >= ms ? 0 : ms - (uint64_t)ago * 1000;
	return from < started ? from : started;
}

static void claim_sure_adopted(struct claim *c, uint64_t started)
{
	unsigned term = c->adopted_lease && c->adopted_lease < c->timeout_s ? c->adopted_lease
									    : c->timeout_s;
	claim_sure_for(c, claim_started_adopted(c, started), term);
}

/* A record adopted (r, parsed 0; else unknown: sure from long ago). */
static void claim_note_adopted(struct claim *c, const struct claim_rec *r, bool parsed)
{
	c->adopted_renewed = parsed ? r->renewed : 0;
	c->adopted_lease = parsed ? r->lease_s : 0;
	if (parsed && r->shared && r->lease_s > c->lease_seen)
		c->lease_seen = r->lease_s;
}

static int claim_adopt(struct claim *c, uint64_t e);

/* Invariant 11 after our create of epoch e answered 0: 0 (e is the
 * largest: ours), 1 (void: a larger one), 2 (a shared node adopted a
 * sibling's larger one, 6), or -errno. s keeps the listing. */
static int claim_check(struct claim *c, uint64_t e, struct claim_scan *s, const char *point)
{
	claim_hook(c, point);
	int rc = claim_scan(c->b, s);
	if (rc != 0)
		return rc;
	if (s->top <= e)
		return 0;
	/* a shared node: a sibling's renewal after ours (6), sure from its
	 * heartbeat (9); unread, look again later */
	int adopted = c->self.shared ? claim_adopt(c, s->top) : 0;
	return adopted < 0 ? adopted : adopted ? 2 : 1;
}

/* One round of acquisition: 0 (held), -EAGAIN (look again after a nap),
 * -EINPROGRESS (look again; refused at the last round: msg), -EBUSY (msg),
 * or -errno. */
static int claim_take_round(struct claim *c, char *seen, bool last, char *msg, size_t msgsize)
{
	const char *spec = backing_spec(c->b);
	uint64_t started = claim_clock_ms(); /* invariant 9: before the listing */
	int64_t now = claim_now();
	int rc = claim_legacy(c, now, last, msg, msgsize);
	if (rc != 0)
		return rc;
	struct claim_scan s = { 0 };
	struct claim_rec holder;
	size_t len = 0;
	int parsed = 0;
	rc = claim_scan(c->b, &s);
	uint64_t e = s.top;
	if (rc == 0 && e > 0)
		rc = claim_get(c->b, e, seen, &len, &holder, &parsed);
	free(s.num);
	s.num = NULL;
	s.cap = 0;
	if (rc == -ENOENT) /* removed after two more epochs (10) */
		return -EAGAIN;
	if (rc != 0)
		return rc;
	claim_hook(c, "take-read");
	now = claim_now();
	enum claim_verdict v = e == 0	    ? CLAIM_FREE
			       : parsed != 0 ? CLAIM_HELD /* invariant 5: never by guess */
					     : claim_judge(&holder, &c->self, now, c->timeout_s,
							   claim_holder_alive, NULL);
	c->self.rep_catalog[0] = '\0';
	if (c->self.ledger && c->self.ledger->stand_in && e > 0 && parsed == 0 && !holder.vacant[0])
		claim_stand_for(&c->self, &holder); /* invariant 13 */
	if (v == CLAIM_BEHIND) {
		claim_describe_behind(&holder, &c->self, now, msg, msgsize, spec);
		return -EBUSY;
	}
	if (v == CLAIM_HELD) {
		claim_describe(&holder, c->self.shared, parsed, now, msg, msgsize, spec,
			       c->timeout_s);
		return -EBUSY;
	}
	if (v == CLAIM_OURS && c->self.shared && holder.lease_s && holder.lease_s != c->timeout_s &&
	    now - holder.renewed <= (int64_t)holder.lease_s) { /* review 57 NEW-2 */
		snprintf(msg, msgsize, "BACKING %s: the nodes of shared catalog %s renew its claim "
			 "with claim_timeout=%u (host %s renewed it %" PRId64 " s ago): mount this node "
			 "with the same (to change it, stop every node for that long first)", spec,
			 holder.catalog, holder.lease_s, holder.host, now - holder.renewed);
		return -EBUSY;
	}
	if (v == CLAIM_OURS && c->self.shared) { /* a sibling node's: ours as it is (6) */
		c->epoch = e;
		memcpy(c->written, seen, len);
		c->written_len = len;
		claim_note_adopted(c, &holder, true);
		claim_sure_adopted(c, started);
		return 0;
	}
	claim_note_replaced(c, seen, e > 0 ? len : 0); /* for a give-back, even of a failed take */
	rc = claim_render(c);
	if (rc == 0)
		rc = claim_create(c->b, c, e + 1, c->written, c->written_len, "take-create");
	if (rc == -EEXIST)
		return -EAGAIN; /* another party made it first (2) */
	if (rc != 0)
		return rc;
	c->epoch = e + 1;
	rc = claim_check(c, e + 1, &s, "take-check");
	free(s.num);
	if (rc == 2) { /* a sibling's (6): sure from its heartbeat */
		claim_sure_adopted(c, started);
		return 0;
	}
	if (rc == 1) {
		log_info("BACKING %s: the claim's epoch %" PRIu64 " this mount made is void (a larger "
			 "one exists): looks again", spec, e + 1);
		c->epoch = 0;
		return -EAGAIN;
	}
	if (rc != 0)
		return rc;
	if (v == CLAIM_STALE && holder.released)
		log_info("BACKING %s: took the claim catalog %s released (host %s, cache %s)", spec,
			 holder.catalog, holder.host, holder.cache);
	else if (v == CLAIM_STALE)
		log_info("BACKING %s: took over the claim of a gone holder (catalog %s, host %s, "
			 "cache %s, pid %ld, renewed %" PRId64 " s ago)", spec, holder.catalog,
			 holder.host, holder.cache, holder.pid, now - holder.renewed);
	claim_sure_from(c, started);
	return 0;
}

int claim_acquire(struct backing *b, const char *catalog_id, bool shared, bool fresh,
		  const char *cache, unsigned timeout_s, struct claim **out, char *msg,
		  size_t msgsize)
{
	return claim_acquire_led(b, catalog_id, shared, fresh, NULL, cache, timeout_s, out, msg,
				 msgsize);
}

int claim_acquire_led(struct backing *b, const char *catalog_id, bool shared, bool fresh,
		      const struct claim_ledger *led, const char *cache, unsigned timeout_s,
		      struct claim **out, char *msg, size_t msgsize)
{
	*out = NULL;
	msg[0] = '\0';
	struct claim *c = claim_new(b, catalog_id, shared, fresh, led, cache, timeout_s);
	char *seen = malloc(CLAIM_MAX);
	if (!c || !seen) {
		if (c)
			claim_end(c, false);
		free(seen);
		snprintf(msg, msgsize, "BACKING %s: claim: out of memory", backing_spec(b));
		return -ENOMEM;
	}
	/* invariant 12: recorded before the first look; a take refused leaves a
	 * begun record no claim ever names */
	int rc = claim_note(c, false, msg, msgsize);
	if (rc == 0)
		rc = -EAGAIN;
	for (int round = 0; round < CLAIM_TRIES && (rc == -EAGAIN || rc == -EINPROGRESS); round++) {
		if (round > 0)
			claim_back_off_nap(round);
		msg[0] = '\0';
		rc = claim_take_round(c, seen, round + 1 == CLAIM_TRIES, msg, msgsize);
	}
	if (rc == -EINPROGRESS)
		rc = -EBUSY; /* still changing at the last round, or left midway: msg says */
	free(seen);
	if (rc == 0) {
		msg[0] = '\0';
		rc = claim_note(c, true, msg, msgsize); /* invariant 12 */
	}
	const char *spec = backing_spec(b);
	if (rc == -E2BIG) {
		snprintf(msg, msgsize, "BACKING %s: more than %d names in %s/%s or in %s/tmp: the "
			 "newest claim cannot be told, so the claim is not taken; remove the names "
			 "that are not epochs (or format-1 tmp/claim.* asides) by hand",
			 spec, CLAIM_EPOCHS_MAX, spec, CLAIM_DIR, spec);
		rc = -EBUSY;
	}
	if (rc == -EAGAIN)
		snprintf(msg, msgsize, "BACKING %s: the claim keeps changing (other mounts are "
			 "starting): try again", spec);
	else if (rc != 0 && rc != -EBUSY && !msg[0])
		snprintf(msg, msgsize, "BACKING %s: cannot read or write the claim (%s/): %s", spec,
			 CLAIM_DIR, strerror(-rc));
	if (rc != 0) {
		/* a take that landed but failed after (its check, its record: 12):
		 * what it judged is given back (review 57 L-d); else nothing */
		claim_abandon(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* ---- renewal, release, give-back ---- */

/* Invariant 3: bytes we tried for the number tried_epoch (this try's or
 * the failed one's before it). */
static bool claim_tried(const struct claim *c, uint64_t e, const char *buf, size_t len)
{
	return e == c->tried_epoch &&
	       ((len == c->tried_len && memcmp(buf, c->tried, len) == 0) ||
		(c->tried_before_len && len == c->tried_before_len &&
		 memcmp(buf, c->tried_before, len) == 0));
}

/* Invariant 3: whether epoch e, not the one we made last, is ours: a create
 * we tried that answered an error but landed (exact bytes), or, for a
 * shared node, a sibling's record of our catalog (6). 1 (adopted: our epoch
 * now), 0 (another's), or -errno (unread: look again at the next renewal;
 * gone meanwhile, -EAGAIN: trimmed after two more epochs, 10). */
static int claim_adopt(struct claim *c, uint64_t e)
{
	if (e == 0 || (e != c->tried_epoch && !c->self.shared))
		return 0; /* no epoch at all: removed by hand (9), nothing to adopt */
	char *buf = malloc(CLAIM_MAX);
	size_t len = 0;
	struct claim_rec r;
	int parsed = -EINVAL;
	int g = buf ? claim_get(c->b, e, buf, &len, &r, &parsed) : -ENOMEM;
	bool ours = g == 0 && (claim_tried(c, e, buf, len) || claim_shared_ours(c, buf, len));
	bool this_try = ours && e == c->tried_epoch && len == c->tried_len &&
			memcmp(buf, c->tried, len) == 0;
	if (ours) {
		c->epoch = e;
		memcpy(c->written, buf, len);
		c->written_len = len;
		/* its heartbeat and lease, for invariant 9 (unparsed: at once unsure) */
		claim_note_adopted(c, &r, parsed == 0);
	}
	free(buf);
	return this_try ? 2 : ours ? 1 : g == -ENOENT ? -EAGAIN : g < 0 ? g : 0;
}

/* Invariant 3: bytes about to be tried for epoch next, the failed try's
 * before them kept for the same number. */
static void claim_try(struct claim *c, uint64_t next, const char *bytes, size_t len)
{
	c->tried_before_len = 0;
	if (c->tried_epoch == next && c->tried_len) {
		memcpy(c->tried_before, c->tried, c->tried_len);
		c->tried_before_len = c->tried_len;
	}
	c->tried_epoch = next;
	memcpy(c->tried, bytes, len);
	c->tried_len = len;
}

/* The step of renewal, release and give-back (invariants 3, 9, 10, 11):
 * while our epoch is the largest, epoch + 1 made holding bytes (NULL: our
 * record, rendered after the listing and any adoption, so that a shared
 * node's carries the longest lease it has seen: review 58 R58-1). 0 (made, or
 * found ours: sure from started, older epochs trimmed), CLAIM_LOST (the
 * caller fences, *why says), or BACKING's error (try again later; a create
 * that failed may have landed: remembered). */
static int claim_advance(struct claim *c, const char *bytes, size_t len, uint64_t started,
			 const char **why)
{
	struct claim_scan s = { 0 };
	int rc = claim_scan(c->b, &s);
	claim_hook(c, "renew-read");
	*why = "";
	int adopted = rc == 0 && s.top != c->epoch ? claim_adopt(c, s.top) : 2;
	if (adopted < 0)
		rc = adopted;
	else if (adopted == 0) {
		*why = s.top > c->epoch ? "another holder made a larger epoch"
					: "the claim's epochs were removed";
		rc = CLAIM_LOST;
	}
	if (rc == 0 && !bytes && (rc = claim_render(c)) == 0) {
		bytes = c->written;
		len = c->written_len;
	}
	uint64_t next = c->epoch + 1;
	if (rc == 0) {
		claim_try(c, next, bytes, len);
		rc = claim_create(c->b, c, next, bytes, len, "renew-create");
	}
	bool fresh = true; /* the epoch holds this renewal's render (9) */
	if (rc == -EEXIST) { /* ours landed after a lost reply, or a sibling's (6) */
		adopted = claim_adopt(c, next);
		rc = adopted < 0 ? adopted : adopted ? 0 : CLAIM_LOST;
		fresh = adopted == 2;
		if (adopted == 0)
			*why = "another holder made the next epoch first";
	} else if (rc == 0) {
		c->epoch = next;
		if (bytes != c->written) {
			memcpy(c->written, bytes, len);
			c->written_len = len;
		}
	}
	if (rc == 0) {
		c->tried_epoch = 0;
		c->tried_before_len = 0;
		rc = claim_check(c, c->epoch, &s, "renew-check");
		if (rc == 2) {
			fresh = false;
			rc = 0;
		} else if (rc == 1) {
			*why = "a larger epoch appeared beside the one this holder made";
			rc = CLAIM_LOST;
		}
	}
	if (rc == 0) {
		if (fresh)
			claim_sure_from(c, started);
		else
			claim_sure_adopted(c, started);
		claim_trim(c->b, &s, c->epoch); /* invariant 10: sure, just renewed */
		if (__atomic_exchange_n(&c->unsure_said, 0, __ATOMIC_ACQ_REL))
			log_info("BACKING %s: the claim is renewed again, still ours (epoch %" PRIu64
				 "): uploads and removals go on", backing_spec(c->b), c->epoch);
	}
	free(s.num);
	return rc;
}

/* Invariant 15 at a renewal: the marker still there (absent: made again);
 * a format-1 claim file in its place means an older daemon took BACKING
 * (the marker removed by hand): CLAIM_LOST, *why naming it; else 0, or
 * BACKING's error (looked at again next time). */
static int claim_marker_check(struct claim *c, const char **why)
{
	char *buf = malloc(CLAIM_MAX);
	size_t len = 0;
	int kind = buf ? claim_file_kind(c->b, buf, &len) : -ENOMEM;
	free(buf);
	if (kind == CLAIM_F1_NONE) { /* removed by hand: made again */
		int m = claim_mark(c->b);
		kind = m == 0 ? CLAIM_F1_MARKER : m == -EEXIST ? CLAIM_F1_CLAIM : m;
	}
	if (kind == CLAIM_F1_CLAIM) {
		*why = "an older ckptfs took BACKING: a format-1 claim file " CLAIM_FILE
		       " stands where the marker was";
		return CLAIM_LOST;
	}
	return kind < 0 ? kind : 0;
}

/* One renewal (invariant 3, 9); called with c->lock not held. */
static void claim_renew(struct claim *c)
{
	if (claim_lost(c))
		return; /* fenced, logged */
	uint64_t started = claim_clock_ms(); /* invariant 9: before the listing */
	const char *why = "";
	/* review 56 M3: first, so that an older daemon's claim makes no epoch */
	int rc = claim_marker_check(c, &why);
	if (rc < 0) {
		log_warn("BACKING %s: cannot look at %s (the marker of the claim's layout): %s (a "
			 "later renewal looks again)", backing_spec(c->b), CLAIM_FILE, strerror(-rc));
		rc = 0;
	}
	if (rc == 0)
		rc = claim_advance(c, NULL, 0, started, &why);
	if (rc == CLAIM_LOST)
		claim_fence(c, why);
	else if (rc != 0)
		log_warn("BACKING %s: cannot renew the claim (%s/): %s (a later renewal tries again)",
			 backing_spec(c->b), CLAIM_DIR, strerror(-rc));
}

void claim_test_renew(struct claim *c)
{
	claim_renew(c);
}

static void *claim_thread(void *arg)
{
	struct claim *c = arg;
	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		unsigned ms = c->timeout_s * 1000 / 4;
		until.tv_sec += ms / 1000;
		until.tv_nsec += (long)(ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!c->stop &&
		       pthread_cond_timedwait(&c->wake, &c->lock, &until) != ETIMEDOUT)
			;
		if (c->stop || __atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE))
			break; /* fenced: never written again (invariant 9) */
		pthread_mutex_unlock(&c->lock);
		claim_renew(c);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int claim_start(struct claim *c)
{
	assert(c && !c->running);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_destroy(&c->wake);
	pthread_cond_init(&c->wake, &ca);
	pthread_condattr_destroy(&ca);
	c->self.pid = (long)getpid(); /* after daemonizing: the first renewal records it */
	claim_renew(c);
	int rc = pthread_create(&c->thread, NULL, claim_thread, c);
	if (rc != 0) {
		log_error("BACKING %s: cannot start the claim's renewal thread: %s",
			  backing_spec(c->b), strerror(rc));
		return -rc;
	}
	c->running = true;
	return 0;
}

static void claim_stop(struct claim *c)
{
	if (c->running) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
		c->running = false;
	}
}

static void claim_free(struct claim *c)
{
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	free(c->replaced);
	free(c);
}

/* A last step of a lone holder not fenced (release, give-back): the next
 * epoch holds bytes (NULL: our record); logged when it could not be made. */
static void claim_last_step(struct claim *c, const char *bytes, size_t len, const char *what)
{
	const char *why = "";
	int rc = claim_advance(c, bytes, len, claim_clock_ms(), &why);
	if (rc == CLAIM_LOST)
		claim_fence(c, why);
	if (rc != 0)
		log_warn("BACKING %s: claim not %s: %s", backing_spec(c->b), what,
			 rc == CLAIM_LOST ? why : strerror(-rc));
}

void claim_end(struct claim *c, bool release)
{
	if (!c)
		return;
	claim_stop(c);
	if (release && c->epoch && !c->self.shared && !claim_lost(c)) {
		c->self.released = true; /* invariants 3, 6, 8 */
		claim_last_step(c, NULL, 0, "released");
	}
	claim_free(c);
}

void claim_abandon(struct claim *c)
{
	if (!c)
		return;
	claim_stop(c);
	if (c->epoch && !c->self.shared && !claim_lost(c)) {
		char *bytes = malloc(CLAIM_MAX);
		int n = !bytes || (!c->replaced && c->replaced_len) ? -ENOMEM
			: c->replaced ? (int)c->replaced_len
				      : claim_vacant("given-back", 0, bytes, CLAIM_MAX);
		if (n > 0 && c->replaced)
			memcpy(bytes, c->replaced, (size_t)n);
		if (n > 0)
			claim_last_step(c, bytes, (size_t)n, "given back");
		else
			log_warn("BACKING %s: claim not given back: %s", backing_spec(c->b),
				 strerror(-n));
		free(bytes);
	}
	claim_free(c);
}

/* ---- the by-hand decision ---- */

int claim_break(struct backing *b, uint64_t *epoch, char *msg, size_t msgsize)
{
	char *rec = malloc(CLAIM_MAX), *top = malloc(CLAIM_MAX);
	int rc = rec && top ? 0 : -ENOMEM;
	msg[0] = '\0';
	*epoch = 0;
	/* invariant 15: a format-1 claim is broken too (its file removed: the
	 * decision), and the marker made: older daemons refused from now on */
	size_t len = 0;
	int kind = rc == 0 ? claim_file_kind(b, top, &len) : rc;
	if (kind == CLAIM_F1_CLAIM)
		rc = backing_remove(b, CLAIM_FILE);
	else if (kind < 0)
		rc = kind;
	if (rc == 0)
		rc = claim_mark(b);
	struct claim_scan s = { 0 };
	if (rc == 0)
		rc = -EAGAIN;
	for (int i = 0; i < CLAIM_TRIES && rc == -EAGAIN; i++) {
		rc = claim_scan(b, &s);
		uint64_t e = s.top + 1;
		struct claim_rec r;
		int parsed = -EINVAL;
		if (rc == 0 && s.top > 0)
			rc = claim_get(b, s.top, top, &len, &r, &parsed);
		/* invariant 8: rendered after the listing (review 56 B1), waiting
		 * out the superseded holder's lease (the default for a record
		 * without one: an older ckptfs's, or none that parses) */
		unsigned lease = parsed == 0 && r.lease_s ? r.lease_s : CLAIM_DEFAULT_TIMEOUT_S;
		int n = rc == 0 ? claim_vacant(CLAIM_BROKEN, lease, rec, CLAIM_MAX) : rc;
		rc = n < 0 ? n : claim_create(b, NULL, e, rec, (size_t)n, NULL);
		if (rc == 0) /* invariant 11: void beside a larger one made meanwhile */
			rc = claim_scan(b, &s);
		if (rc == 0 && s.top > e)
			rc = -EAGAIN;
		if (rc == -EEXIST || rc == -ENOENT)
			rc = -EAGAIN;
		if (rc == 0)
			*epoch = e;
	}
	free(s.num);
	free(rec);
	free(top);
	if (rc != 0)
		snprintf(msg, msgsize, "BACKING %s: cannot break the claim (%s/): %s",
			 backing_spec(b), CLAIM_DIR, rc == -EAGAIN ? "it keeps changing" : strerror(-rc));
	else
		log_info("BACKING %s: the claim was broken by hand (epoch %" PRIu64 "): free to any "
			 "catalog after the claim's lease; a holder still running is fenced at its "
			 "next renewal", backing_spec(b), *epoch);
	return rc;
}
