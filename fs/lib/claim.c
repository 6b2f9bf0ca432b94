/* claim — one catalog per BACKING: judging, taking, renewing and releasing
 * the claim file. The contract, the decision diagram and the invariants are
 * in claim.h; the file format in docs/FORMAT.md ("The claim").
 *
 * Acquisition is a loop of at most CLAIM_TRIES rounds, each:
 *
 *   read CLAIM_FILE ──┬─ absent ─▶ asides in tmp/ (invariant 10): the newest
 *                     │    judged as the claim, and any aside a live holder's
 *                     │    is HELD; HELD ▶ look again, -EBUSY at the last
 *                     │    round; BEHIND ▶ -EBUSY; else
 *                     │    put_new ──┬─ 0 ─▶ check (11 T) ─▶ held, the asides
 *                     │              │       judged removed
 *                     │              └─ EEXIST ────▶ next round
 *                     ├─ OURS ──▶ put (our pid, instance, now) ▶ held
 *                     ├─ HELD ──▶ -EBUSY, the holder named
 *                     └─ STALE ─▶ list tmp/: any aside a live holder's ▶
 *                                   HELD (10); else move aside to
 *                                   tmp/claim.<instance>.<n>
 *                                   ├─ ENOENT (another taker moved it) ▶ next round
 *                                   ├─ moved bytes == judged bytes ▶ put_new (as if
 *                                   │    absent), check (11 T), remove the aside (10)
 *                                   └─ otherwise (another's): never put back,
 *                                        the aside stays and stands for it (2,
 *                                        10); next round
 *
 *   check (11 T): tmp/ listed again after put_new answered 0; an aside not
 *   listed before the decision (a renewal's, or another take's): our claim
 *   given back while it is our bytes (moved aside, compared, removed), the
 *   asides left, next round.
 *
 * claim_start renews once, then the renewal thread wakes every timeout/4,
 * reads the claim and, only if its bytes are the ones we wrote last
 * (invariant 3), takes it anew as a taker would (claim_retake: moved aside,
 * compared, created exclusively; invariant 9; a create that meets a claim
 * tries again briefly while a gap-taker backs off, 11 H); a shared claim is
 * rewritten in place (6). Absent while our last renewal's aside holds our
 * bytes and the newest: the claim is created again from it
 * (claim_take_back, 10); absent after the reads again of 11 M with the
 * newest aside our bytes (a mover's, 2): that aside adopted as our own
 * (claim_take_back). Every create of ours is checked (11 C: a foreign
 * aside after it: given back, fenced). A claim
 * another's or gone, or a take lost: the holder is fenced (logged once),
 * its aside left (11), and never writes the claim, or anything else on
 * BACKING, again. */
#define _GNU_SOURCE
#include "claim.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "cachedir.h"
#include "log.h"

#define CLAIM_TRIES 8
#define CLAIM_GAP_POLLS 8 /* invariant 11 (H): a holder's tries after EEXIST */
#define CLAIM_FORMAT_LINE "ckptfs claim 1\n"

struct claim {
	struct backing *b;
	struct claim_rec self;
	struct claim_ledger led; /* the caller's, copied (self.ledger points here: 12) */
	unsigned timeout_s;
	char written[CLAIM_MAX]; /* our bytes on BACKING (invariant 3) */
	size_t written_len;
	char prev[CLAIM_MAX]; /* the bytes before a renewal that failed: either may be there */
	size_t prev_len;
	int fenced;		  /* invariant 9: 0 → 1 once (atomics), logged then */
	uint64_t sure_until_ms;	  /* invariant 9, on claim_clock_ms (atomics) */
	int unsure_said;	  /* invariant 9: the wait past the deadline logged (atomics) */
	char *replaced;		  /* the bytes claim_acquire replaced (claim_abandon) */
	size_t replaced_len;
	unsigned asides;	  /* asides made: each round's is a new name (invariant 10) */
	char pending[64 + CLAIM_ID_LEN]; /* our renewal's aside not yet followed by a claim (10) */
	pthread_t thread;
	bool running;
	bool stop;
	pthread_mutex_t lock;
	pthread_cond_t wake;
};

/* ---- the decision ---- */

/* Invariant 4: holder a judged by self b. A holder without the ns line (an
 * older ckptfs) by host name and boot id alone; else both namespaces equal
 * (ours unknown: never the same host). */
static bool claim_same_host(const struct claim_rec *a, const struct claim_rec *b)
{
	if (strcmp(a->host, b->host) != 0 || strcmp(a->boot, b->boot) != 0)
		return false;
	if (!a->ns_mnt && !a->ns_pid)
		return true;
	return b->ns_mnt && b->ns_pid && a->ns_mnt == b->ns_mnt && a->ns_pid == b->ns_pid;
}

static enum claim_verdict claim_judge_lone(const struct claim_rec *holder,
					   const struct claim_rec *self, int64_t now,
					   unsigned timeout_s, claim_alive_fn alive, void *arg);

/* Invariant 12: a take (catalog, instance, take number) is one of ours. No
 * ledger: by catalog id alone (as before 12); a ledger with no take
 * recorded (an older ckptfs's catalog): by catalog id, for a claim without
 * a take line only (one with it is a copy's take). */
static bool claim_take_ours(const char *catalog, const char *instance, uint64_t take,
			    const struct claim_rec *self)
{
	const struct claim_ledger *l = self->ledger;
	if (strcmp(catalog, self->catalog) != 0)
		return false;
	if (!l || !l->known)
		return !l || take == 0;
	return strcmp(instance, l->last) == 0 || (l->next[0] && strcmp(instance, l->next) == 0);
}

/* Invariants 8, 12, 13: the claim is of our catalog's last take, or of a
 * stand-in that replaced it and never ended (killed: not released). */
static bool claim_names_us(const struct claim_rec *holder, const struct claim_rec *self)
{
	return claim_take_ours(holder->catalog, holder->instance, holder->take, self) ||
	       (holder->rep_catalog[0] && !holder->released &&
		claim_take_ours(holder->rep_catalog, holder->rep_instance, holder->rep_take, self));
}

enum claim_verdict claim_judge(const struct claim_rec *holder, const struct claim_rec *self,
			       int64_t now, unsigned timeout_s, claim_alive_fn alive, void *arg)
{
	assert(self && timeout_s > 0);
	if (!holder)
		return CLAIM_FREE;
	if (holder->shared || self->shared) { /* invariant 7: never by age */
		if (holder->shared && self->shared && strcmp(holder->catalog, self->catalog) == 0)
			return CLAIM_OURS;
		return CLAIM_HELD;
	}
	enum claim_verdict v = claim_judge_lone(holder, self, now, timeout_s, alive, arg);
	if ((v == CLAIM_STALE || v == CLAIM_OURS) && !self->fresh && !claim_names_us(holder, self))
		return CLAIM_BEHIND; /* invariants 8, 12, 13 */
	return v;
}

/* The rules for two lone catalogs, before invariant 8. */
static enum claim_verdict claim_judge_lone(const struct claim_rec *holder,
					   const struct claim_rec *self, int64_t now,
					   unsigned timeout_s, claim_alive_fn alive, void *arg)
{
	if (holder->released)
		return CLAIM_STALE; /* taken as a stale one: moved aside, then created */
	bool same_host = claim_same_host(holder, self);
	bool same_cache = same_host && strcmp(holder->cache, self->cache) == 0;
	if (same_cache && strcmp(holder->catalog, self->catalog) == 0)
		return CLAIM_OURS;
	if (same_cache) /* we hold that cache's lock: its old daemon is gone */
		return CLAIM_STALE;
	if (same_host)
		return alive(arg, holder) ? CLAIM_HELD : CLAIM_STALE;
	int64_t age = now - holder->renewed; /* a clock ahead of ours counts as fresh */
	return age > (int64_t)timeout_s ? CLAIM_STALE : CLAIM_HELD;
}

bool claim_holder_alive(void *arg, const struct claim_rec *rec)
{
	(void)arg;
	char path[PATH_MAX + 16];
	int fd = cachedir_lock_open(rec->cache, O_RDONLY | O_NOFOLLOW, path, sizeof(path));
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return false; /* that cache is gone */
		return rec->pid > 0 && (kill((pid_t)rec->pid, 0) == 0 || errno == EPERM);
	}
	bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd); /* drops our shared lock, if we got it */
	return held;
}

/* ---- the file ---- */

int claim_format(const struct claim_rec *rec, char *buf, size_t size)
{
	int n = snprintf(buf, size,
			 CLAIM_FORMAT_LINE "catalog %s\ninstance %s\nhost %s\nboot %s\ncache %s\n"
					   "pid %ld\nrenewed %" PRId64 "\n",
			 rec->catalog, rec->instance, rec->host, rec->boot, rec->cache, rec->pid,
			 rec->renewed);
	if (n >= 0 && (size_t)n < size && rec->ns_mnt && rec->ns_pid) /* invariant 4; skipped likewise */
		n += snprintf(buf + n, size - (size_t)n, "ns %" PRIu64 " %" PRIu64 "\n", rec->ns_mnt,
			      rec->ns_pid);
	if (n >= 0 && (size_t)n < size && rec->take) /* invariant 12; older parsers skip it */
		n += snprintf(buf + n, size - (size_t)n, "take %" PRIu64 "\n", rec->take);
	if (n >= 0 && (size_t)n < size && rec->rep_catalog[0]) /* invariant 13; likewise */
		n += snprintf(buf + n, size - (size_t)n, "replaces %s %s %" PRIu64 "\n",
			      rec->rep_catalog, rec->rep_instance, rec->rep_take);
	if (n >= 0 && (size_t)n < size && rec->shared) /* a later line: older parsers skip it */
		n += snprintf(buf + n, size - (size_t)n, "mode shared\n");
	if (n >= 0 && (size_t)n < size && rec->released) /* invariant 8; skipped likewise */
		n += snprintf(buf + n, size - (size_t)n, "released yes\n");
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : n;
}

static bool claim_hex_id(const char *s)
{
	size_t n = strlen(s);
	return n == CLAIM_ID_LEN && strspn(s, "0123456789abcdef") == n;
}

/* One "key value" line's value into dst (capacity cap); false if too long. */
static bool claim_field(const char *value, size_t len, char *dst, size_t cap)
{
	if (len >= cap || memchr(value, '\0', len))
		return false;
	memcpy(dst, value, len);
	dst[len] = '\0';
	return true;
}

/* A decimal ≥ 0 up to max, nothing else. */
static bool claim_number(const char *value, size_t len, int64_t max, int64_t *out)
{
	char num[24];
	if (!claim_field(value, len, num, sizeof(num)) || num[0] < '0' || num[0] > '9')
		return false;
	char *end = NULL;
	errno = 0;
	long long x = strtoll(num, &end, 10);
	if (errno != 0 || *end != '\0' || x > max)
		return false;
	*out = x;
	return true;
}

/* "replaces CATALOG INSTANCE TAKE" (invariant 13): two ids and a number. */
static bool claim_replaces(const char *v, size_t vl, struct claim_rec *out)
{
	const char *sp1 = memchr(v, ' ', vl);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', vl - (size_t)(sp1 + 1 - v)) : NULL;
	int64_t take = 0;
	if (!sp2 || !claim_field(v, (size_t)(sp1 - v), out->rep_catalog, sizeof(out->rep_catalog)) ||
	    !claim_field(sp1 + 1, (size_t)(sp2 - sp1 - 1), out->rep_instance,
			 sizeof(out->rep_instance)) ||
	    !claim_number(sp2 + 1, vl - (size_t)(sp2 + 1 - v), INT64_MAX, &take) ||
	    !claim_hex_id(out->rep_catalog) || !claim_hex_id(out->rep_instance))
		return false;
	out->rep_take = (uint64_t)take;
	return true;
}

/* "ns MNT PID" (invariant 4): two namespace inode numbers, neither 0. */
static bool claim_ns(const char *v, size_t vl, struct claim_rec *out)
{
	const char *sp = memchr(v, ' ', vl);
	int64_t m = 0, p = 0;
	if (!sp || !claim_number(v, (size_t)(sp - v), INT64_MAX, &m) ||
	    !claim_number(sp + 1, vl - (size_t)(sp + 1 - v), INT64_MAX, &p) || m == 0 || p == 0)
		return false;
	out->ns_mnt = (uint64_t)m;
	out->ns_pid = (uint64_t)p;
	return true;
}

/* Stores one line's value in out; *seen gets the field's bit. Unknown keys
 * (a later format's) are accepted and ignored. */
static bool claim_line(const char *key, size_t kl, const char *v, size_t vl,
		       struct claim_rec *out, unsigned *seen)
{
	const struct {
		const char *key;
		char *dst;
		size_t cap;
	} text[] = {
		{ "catalog", out->catalog, sizeof(out->catalog) },
		{ "instance", out->instance, sizeof(out->instance) },
		{ "host", out->host, sizeof(out->host) },
		{ "boot", out->boot, sizeof(out->boot) },
		{ "cache", out->cache, sizeof(out->cache) },
	};
	size_t n = sizeof(text) / sizeof(text[0]);
	for (size_t i = 0; i < n; i++) {
		if (strlen(text[i].key) == kl && memcmp(key, text[i].key, kl) == 0) {
			*seen |= 1u << i;
			return claim_field(v, vl, text[i].dst, text[i].cap);
		}
	}
	int64_t x = 0;
	if (kl == 3 && memcmp(key, "pid", 3) == 0) {
		*seen |= 1u << n;
		bool ok = claim_number(v, vl, INT32_MAX, &x);
		out->pid = (long)x;
		return ok;
	}
	if (kl == 4 && memcmp(key, "mode", 4) == 0) {
		if (vl == 6 && memcmp(v, "shared", 6) == 0)
			out->shared = true;
		return vl == 6 && (out->shared || memcmp(v, "sqlite", 6) == 0);
	}
	if (kl == 8 && memcmp(key, "released", 8) == 0) {
		out->released = vl == 3 && memcmp(v, "yes", 3) == 0;
		return out->released;
	}
	if (kl == 4 && memcmp(key, "take", 4) == 0) { /* invariant 12 */
		bool ok = claim_number(v, vl, INT64_MAX, &x) && x > 0;
		out->take = (uint64_t)x;
		return ok;
	}
	if (kl == 2 && memcmp(key, "ns", 2) == 0) /* invariant 4: two numbers > 0 */
		return claim_ns(v, vl, out);
	if (kl == 8 && memcmp(key, "replaces", 8) == 0) /* invariant 13 */
		return claim_replaces(v, vl, out);
	if (kl == 7 && memcmp(key, "renewed", 7) == 0) {
		*seen |= 1u << (n + 1);
		bool ok = claim_number(v, vl, INT64_MAX, &x);
		out->renewed = x;
		return ok;
	}
	return true;
}

int claim_parse(const char *text, size_t len, struct claim_rec *out)
{
	memset(out, 0, sizeof(*out));
	size_t fl = sizeof(CLAIM_FORMAT_LINE) - 1;
	if (len > CLAIM_MAX || len < fl || memcmp(text, CLAIM_FORMAT_LINE, fl) != 0)
		return -EINVAL;
	unsigned seen = 0;
	for (size_t at = fl; at < len;) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		if (!nl)
			return -EINVAL;
		size_t ll = (size_t)(nl - line);
		at += ll + 1;
		const char *sp = memchr(line, ' ', ll);
		if (!sp)
			return -EINVAL;
		size_t kl = (size_t)(sp - line);
		if (!claim_line(line, kl, sp + 1, ll - kl - 1, out, &seen))
			return -EINVAL;
	}
	if (seen != 0x7f || !claim_hex_id(out->catalog) || !claim_hex_id(out->instance) ||
	    out->cache[0] != '/')
		return -EINVAL;
	return 0;
}

/* ---- who we are ---- */

static void claim_random_hex(char out[CLAIM_ID_LEN + 1])
{
	unsigned char r[CLAIM_ID_LEN / 2];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) { /* not expected; still unique */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(x >> (8 * (i % 8))) ^ (unsigned char)i;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
}

static void claim_this_host(struct claim_rec *rec)
{
	if (gethostname(rec->host, sizeof(rec->host)) != 0 || !rec->host[0])
		snprintf(rec->host, sizeof(rec->host), "unknown");
	rec->host[sizeof(rec->host) - 1] = '\0';
	rec->host[strcspn(rec->host, " \n")] = '\0';
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, rec->boot, sizeof(rec->boot) - 1) : -1;
	if (fd >= 0)
		close(fd);
	rec->boot[n > 0 ? n : 0] = '\0';
	rec->boot[strcspn(rec->boot, " \n")] = '\0';
	if (!rec->boot[0])
		snprintf(rec->boot, sizeof(rec->boot), "-");
	struct stat m, p; /* invariant 4: unreadable, 0 0 (no line, no shortcut) */
	if (stat("/proc/self/ns/mnt", &m) == 0 && stat("/proc/self/ns/pid", &p) == 0 &&
	    m.st_ino && p.st_ino) {
		rec->ns_mnt = (uint64_t)m.st_ino;
		rec->ns_pid = (uint64_t)p.st_ino;
	}
}

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
static void claim_sure_from(struct claim *c, uint64_t started_ms)
{
	uint64_t term = (uint64_t)c->timeout_s * 1000;
	__atomic_store_n(&c->sure_until_ms, started_ms + term - term / 8, __ATOMIC_RELEASE);
}

/* Invariant 9: from now on this holder writes nothing to BACKING. */
static void claim_fence(struct claim *c, const char *why)
{
	if (__atomic_exchange_n(&c->fenced, 1, __ATOMIC_ACQ_REL))
		return;
	log_error("BACKING %s: this daemon no longer holds the claim %s (%s): from now on it puts, "
		  "removes and renews nothing on BACKING; changes fail with EROFS, reads go on; what "
		  "was not yet uploaded stays in cache %s (docs/DESIGN.md \"Fenced\"); unmount",
		  backing_spec(c->b), CLAIM_FILE, why, c->self.cache);
}

/* Invariant 9: the last renewal that found the claim ours is recent enough. */
static bool claim_sure(struct claim *c)
{
	return c->self.shared || /* invariant 7: never taken over by age */
	       claim_clock_ms() < __atomic_load_n(&c->sure_until_ms, __ATOMIC_ACQUIRE);
}

bool claim_lost(struct claim *c)
{
	return c && __atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE);
}

unsigned claim_timeout_s(const struct claim *c)
{
	return c ? c->timeout_s : 0;
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
		log_warn("BACKING %s: the claim %s was not renewed for %u s less a margin (another "
			 "catalog may take a claim not renewed for %u s): nothing is put on or removed "
			 "from BACKING until a renewal finds the claim still ours; writes go on into "
			 "the cache", backing_spec(c->b), CLAIM_FILE, c->timeout_s, c->timeout_s);
	return false;
}

/* ---- BACKING ---- */

/* The claim on BACKING: 0 with its bytes (and *parsed 0 or -EINVAL),
 * -ENOENT, or BACKING's error. */
static int claim_read(struct backing *b, char *buf, size_t *len, struct claim_rec *rec,
		      int *parsed)
{
	int rc = backing_get(b, CLAIM_FILE, buf, CLAIM_MAX, len);
	if (rc == -EFBIG) {
		*len = 0;
		*parsed = -EINVAL;
		return 0;
	}
	if (rc == 0)
		*parsed = claim_parse(buf, *len, rec);
	return rc;
}

/* Our record as bytes, in c->written. */
static int claim_render(struct claim *c)
{
	c->self.renewed = claim_now();
	int n = claim_format(&c->self, c->written, sizeof(c->written));
	if (n < 0)
		return n;
	c->written_len = (size_t)n;
	return 0;
}

static void claim_describe(const struct claim_rec *h, bool self_shared, int parsed, int64_t now,
			   char *msg, size_t size, const char *spec, unsigned timeout_s)
{
	if (parsed != 0) {
		snprintf(msg, size, "BACKING %s is claimed by another catalog (%s does not parse); "
			 "if no ckptfs uses this BACKING, remove %s/%s",
			 spec, CLAIM_FILE, spec, CLAIM_FILE);
		return;
	}
	int64_t ago = now - h->renewed;
	if (ago < 0)
		ago = 0;
	if (h->shared && self_shared) {
		snprintf(msg, size, "BACKING %s belongs to another shared catalog, %s (last renewed by "
			 "host %s, cache %s, %" PRId64 " s ago): mount it with -o meta=URL of that "
			 "catalog (a database refilled with `ckptfs-admin rebuild --meta` keeps its id); "
			 "a claim of another catalog is never taken over by age",
			 spec, h->catalog, h->host, h->cache, ago);
		return;
	}
	if (h->shared) {
		snprintf(msg, size, "BACKING %s belongs to the shared catalog %s (last renewed by host "
			 "%s, cache %s, %" PRId64 " s ago): mount it with -o meta=URL of that catalog; "
			 "a mount without meta= never takes it over by age (that catalog still names "
			 "its objects) — if it is retired for good, remove %s/%s (and any "
			 "%s/tmp/claim.*) by hand",
			 spec, h->catalog, h->host, h->cache, ago, spec, CLAIM_FILE, spec);
		return;
	}
	if (self_shared) {
		snprintf(msg, size, "BACKING %s belongs to a catalog of one node, not shared (host %s, "
			 "cache %s, pid %ld, renewed %" PRId64 " s ago): a shared catalog (-o meta=) "
			 "never takes it over by age (that catalog still names its objects); mount it "
			 "without meta=, or, if that catalog is retired for good, remove %s/%s (and "
			 "any %s/tmp/claim.*) by hand",
			 spec, h->host, h->cache, h->pid, ago, spec, CLAIM_FILE, spec);
		return;
	}
	snprintf(msg, size, "BACKING %s is claimed by another catalog (host %s, cache %s, pid %ld, "
		 "renewed %" PRId64 " s ago); unmount it there, or wait %u s if that node is gone",
		 spec, h->host, h->cache, h->pid, ago, timeout_s);
}

/* BEHIND (invariant 8): one line naming the catalog that wrote BACKING last
 * and the way out. */
static void claim_describe_behind(const struct claim_rec *h, const struct claim_rec *self,
				  int64_t now, char *msg, size_t size, const char *spec)
{
	int64_t ago = now - h->renewed;
	const char *cache = self->cache;
	if (strcmp(h->catalog, self->catalog) == 0) { /* invariant 12: a copy's take */
		const struct claim_ledger *l = self->ledger;
		snprintf(msg, size, "BACKING %s was taken by another copy of this catalog %s (take %"
			 PRIu64 ", host %s, cache %s, %s %" PRId64 " s ago) since the catalog of cache "
			 "%s last held it (its take %" PRIu64 "): a copy of a cache (cp -a, a backup "
			 "restored) has the same catalog id, this one does not know what the other "
			 "wrote since, and its deletions would destroy it; mount with an empty cache "
			 "(its catalog is rebuilt from BACKING with every durable generation) and keep "
			 "this cache aside until you decide",
			 spec, h->catalog, h->take, h->host, h->cache,
			 h->released ? "released" : "last renewed", ago < 0 ? 0 : ago, cache,
			 l ? l->take : 0);
		return;
	}
	snprintf(msg, size, "BACKING %s was written by another catalog (host %s, cache %s, %s %" PRId64
		 " s ago) since the catalog of cache %s last held it: this catalog does not know what "
		 "that one wrote, and its deletions would destroy it; mount with an empty cache (its "
		 "catalog is rebuilt from BACKING with every durable generation of both) and keep "
		 "this cache aside until you decide",
		 spec, h->host, h->cache, h->released ? "released" : "last renewed",
		 ago < 0 ? 0 : ago, cache);
}

/* STALE: invariant 2. 1 if the claim was moved aside to aside (create it
 * now, then remove the aside: invariant 10), 0 to read again, or -errno.
 * Moved bytes that are not the judged ones (another's claim, maybe a
 * winner's whose check passed) are never put back: a create of them would
 * be a create no check follows (11), and could restore an older claim over
 * a winner's (review 52 F1). The aside stays and stands for that claim
 * (10); its holder takes it back from there (11 M). */
static int claim_take_stale(struct claim *c, const char *judged, size_t judged_len,
			    char *aside, size_t asize)
{
	assert(judged_len <= CLAIM_MAX && claim_hex_id(c->self.instance));
	char *moved = malloc(CLAIM_MAX);
	if (!moved)
		return -ENOMEM;
	snprintf(aside, asize, "tmp/claim.%s.%u", c->self.instance, c->asides++);
	claim_hook(c, "take-move"); /* tests: a judgment made, the move not yet (2) */
	int rc = backing_move(c->b, CLAIM_FILE, aside);
	if (rc == -ENOENT) { /* another taker moved it first */
		free(moved);
		return 0;
	}
	size_t len = 0;
	if (rc == 0)
		rc = backing_get(c->b, aside, moved, CLAIM_MAX, &len);
	if (rc == -ENOENT) { /* a taker that found the claim absent judged and removed it (10) */
		free(moved);
		return 0;
	}
	if (rc == 0 && (len != judged_len || memcmp(moved, judged, len) != 0)) {
		claim_hook(c, "take-kept"); /* tests: another's bytes moved, left aside */
		log_info("BACKING %s: the claim %s changed since this mount judged it; it stays "
			 "aside as %s for its holder to take back", backing_spec(c->b), CLAIM_FILE,
			 aside);
		rc = -EAGAIN;
	}
	free(moved);
	return rc == -EAGAIN ? 0 : rc == 0 ? 1 : rc;
}

/* The asides of takers in tmp/ (invariant 10): every one's name, so the
 * newest is never missed (a catalog behind it would take BACKING); more
 * than CLAIM_ASIDES_MAX: -E2BIG, refused with one line (claim_acquire). */
#define CLAIM_ASIDES_MAX 4096
#define CLAIM_ASIDE_NAME (64 + CLAIM_ID_LEN)
struct claim_asides {
	char (*name)[CLAIM_ASIDE_NAME];
	int n, cap, rc;
};

static int claim_aside_name(void *arg, const char *name)
{
	struct claim_asides *l = arg;
	if (strncmp(name, "claim.", 6) != 0 || strlen(name) + 5 > CLAIM_ASIDE_NAME || l->rc)
		return 0;
	if (l->n == CLAIM_ASIDES_MAX) {
		l->rc = -E2BIG;
		return 0;
	}
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 16;
		void *grown = realloc(l->name, (size_t)cap * sizeof(l->name[0]));
		if (!grown) {
			l->rc = -ENOMEM;
			return 0;
		}
		l->name = grown;
		l->cap = cap;
	}
	snprintf(l->name[l->n++], sizeof(l->name[0]), "tmp/%s", name);
	return 0;
}

/* Every aside's name in tmp/ into l: 0 (none: n 0), or -errno. */
static int claim_list_asides(struct backing *b, struct claim_asides *l)
{
	l->n = 0;
	l->rc = 0;
	int rc = backing_list(b, "tmp", claim_aside_name, l);
	if (rc == 0)
		rc = l->rc;
	return rc == -ENOENT ? 0 : rc;
}

/* Invariant 10: the claim is absent. The newest parseable aside, by its
 * heartbeat, into buf/len/holder: 1 if there is one, 0 if none, -errno.
 * l gets every aside's name (removed once our claim exists). */
static int claim_newest_aside(struct backing *b, struct claim_asides *l, char *buf, size_t *len,
			      struct claim_rec *holder, int *which)
{
	int rc = claim_list_asides(b, l);
	if (rc != 0 || l->n == 0)
		return rc;
	char *one = malloc(CLAIM_MAX);
	if (!one)
		return -ENOMEM;
	int found = 0;
	for (int i = 0; i < l->n; i++) {
		struct claim_rec rec;
		size_t n = 0;
		rc = backing_get(b, l->name[i], one, CLAIM_MAX, &n);
		if (rc == -ENOENT || rc == -EFBIG || (rc == 0 && claim_parse(one, n, &rec) != 0))
			continue; /* gone since the listing, or not a claim */
		if (rc != 0) {
			free(one);
			return rc;
		}
		/* the newest heartbeat; of one second, a holder still renewing
		 * came after one that released */
		if (found && (rec.renewed < holder->renewed ||
			      (rec.renewed == holder->renewed && (rec.released || !holder->released))))
			continue;
		*holder = rec;
		memcpy(buf, one, n);
		*len = n;
		*which = i;
		found = 1;
	}
	free(one);
	return found;
}

/* Invariant 10: whether any aside is judged HELD: a live holder's claim
 * stands aside while it renews (9, 11) or where a mover left it (2),
 * whatever the heartbeat of a newer aside or of the claim present (a
 * taker's transient claim kept by a mover is newer, and of its own cache:
 * OURS, review 54 F2; a create whose creator died before its check, review
 * 55 F1). 1 with *held its record, 0 none, -errno. */
static int claim_aside_held(struct backing *b, const struct claim_asides *l,
			    const struct claim_rec *self, int64_t now, unsigned timeout_s,
			    struct claim_rec *held)
{
	char *one = malloc(CLAIM_MAX);
	if (!one)
		return -ENOMEM;
	int found = 0;
	for (int i = 0; i < l->n && !found; i++) {
		size_t n = 0;
		int rc = backing_get(b, l->name[i], one, CLAIM_MAX, &n);
		if (rc == -ENOENT || rc == -EFBIG || (rc == 0 && claim_parse(one, n, held) != 0))
			continue;
		if (rc != 0) {
			free(one);
			return rc;
		}
		found = claim_judge(held, self, now, timeout_s, claim_holder_alive, NULL) == CLAIM_HELD;
	}
	free(one);
	return found;
}

/* The asides judged (invariant 10), once our claim exists. */
static void claim_drop_asides(struct backing *b, const struct claim_asides *l)
{
	for (int i = 0; i < l->n; i++)
		backing_remove(b, l->name[i]);
}

/* Invariant 11 (T): after a taker's exclusive create answered 0, whether
 * tmp/ holds an aside it did not judge: a name neither in judged (listed
 * before it decided) nor own (its own aside of this round). 1: a renewal
 * or another take was under way, its create may have landed in that gap;
 * 0: nothing moved; -errno: unknown (backed off as if moved). */
static int claim_new_aside(struct backing *b, const struct claim_asides *judged, const char *own)
{
	struct claim_asides now = { 0 };
	int rc = claim_list_asides(b, &now);
	int found = 0;
	for (int i = 0; rc == 0 && i < now.n && !found; i++) {
		bool known = own && strcmp(now.name[i], own) == 0;
		for (int j = 0; j < judged->n && !known; j++)
			known = strcmp(now.name[i], judged->name[j]) == 0;
		found = !known;
	}
	free(now.name);
	return rc < 0 ? rc : found;
}

/* Invariant 11 (T): the taker gives back the claim it just created, only
 * while it is still its bytes (the steps of 2: moved aside, compared; ours:
 * the aside removed; another's: left aside, 2). -EAGAIN (look again), or
 * BACKING's error (our claim may stand: it holds nothing then, its cache
 * lock or heartbeat tells). */
static int claim_back_off(struct claim *c)
{
	char aside[CLAIM_ASIDE_NAME];
	int taken = claim_take_stale(c, c->written, c->written_len, aside, sizeof(aside));
	if (taken == 1)
		backing_remove(c->b, aside);
	return taken < 0 ? taken : -EAGAIN;
}

/* Before the round after a back-off (invariant 11 T): a random nap of up to
 * 8 << round ms (at most 200), so that takers who backed off together do
 * not judge and create in step again, and each back-off's own aside is
 * gone before the others look. */
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

/* What claim_acquire replaced, for claim_abandon: judged bytes, or none. */
static void claim_note_replaced(struct claim *c, const char *judged, size_t len)
{
	free(c->replaced);
	c->replaced = NULL;
	c->replaced_len = 0;
	c->replaced_len = len; /* len > 0 with replaced NULL: unknown, left alone */
	if (len > 0 && (c->replaced = malloc(len)) != NULL)
		memcpy(c->replaced, judged, len);
}

/* Invariant 13: a stand-in records the identity the judged holder stands
 * for: its own, or, a stand-in too and not released (killed), what that
 * one replaced. */
static void claim_stand_for(struct claim_rec *self, const struct claim_rec *holder)
{
	bool chain = holder->rep_catalog[0] != '\0' && !holder->released;
	snprintf(self->rep_catalog, sizeof(self->rep_catalog), "%s",
		 chain ? holder->rep_catalog : holder->catalog);
	snprintf(self->rep_instance, sizeof(self->rep_instance), "%s",
		 chain ? holder->rep_instance : holder->instance);
	self->rep_take = chain ? holder->rep_take : holder->take;
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
	struct claim *c = calloc(1, sizeof(*c));
	char *seen = malloc(CLAIM_MAX);
	struct claim_asides *asides = calloc(1, sizeof(*asides));
	if (!c || !seen || !asides) {
		free(c);
		free(seen);
		free(asides);
		snprintf(msg, msgsize, "BACKING %s: claim: out of memory", backing_spec(b));
		return -ENOMEM;
	}
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

	const char *spec = backing_spec(b);
	/* invariant 12: recorded before the first look, not between a judgment
	 * and its create (a catalog's sync there would widen the races of 2
	 * and 11); a take refused leaves a begun record no claim ever names */
	int rc = claim_note(c, false, msg, msgsize);
	if (rc != 0) {
		free(seen);
		free(asides);
		claim_end(c, false);
		return rc;
	}
	rc = -EAGAIN;
	bool backed_off = false;
	for (int round = 0; round < CLAIM_TRIES && rc == -EAGAIN; round++) {
		if (backed_off)
			claim_back_off_nap(round);
		backed_off = false;
		struct claim_rec holder;
		size_t len = 0;
		int parsed = 0;
		uint64_t started = claim_clock_ms(); /* invariant 9: before the read */
		rc = claim_read(b, seen, &len, &holder, &parsed);
		int aside = 0; /* the claim is absent, an aside judged in its place (10) */
		bool absent = rc == -ENOENT; /* asides listed with the read (10, 11) */
		asides->n = 0;
		if (absent) {
			int newest = 0;
			aside = claim_newest_aside(b, asides, seen, &len, &holder, &newest);
			rc = aside < 0 ? aside : aside ? 0 : -ENOENT;
		}
		int64_t now = claim_now();
		enum claim_verdict v = CLAIM_FREE;
		if (rc == 0 && parsed != 0)
			v = CLAIM_HELD; /* invariant 5: never taken by guess */
		else if (rc == 0)
			v = claim_judge(&holder, &c->self, now, c->timeout_s, claim_holder_alive, NULL);
		else if (rc != -ENOENT)
			break;
		bool listed = absent;
		if (rc == 0 && (v == CLAIM_OURS || v == CLAIM_STALE)) {
			/* 10: a claim (present, or an aside judged in its place) to
			 * take is not judged alone: any aside judged HELD is a live
			 * holder's claim a mover left aside (2), and the one judged
			 * came back or landed in that mover's gap (a give-back,
			 * review 54 F1; a create whose creator died before its check,
			 * review 55 F1); absent, the asides were listed with the read */
			struct claim_rec held;
			int h = absent ? 0 : claim_list_asides(b, asides);
			if (h == 0)
				h = claim_aside_held(b, asides, &c->self, now, c->timeout_s, &held);
			if (h < 0) {
				rc = h;
				break;
			}
			listed = true;
			if (h) {
				holder = held;
				v = CLAIM_HELD;
				aside = 1; /* refused at the last round only (10) */
			} else if (aside) {
				v = CLAIM_FREE; /* nothing to move: the create decides (10) */
			}
		}
		c->self.rep_catalog[0] = '\0';
		if (c->self.ledger && c->self.ledger->stand_in && rc == 0 && parsed == 0)
			claim_stand_for(&c->self, &holder); /* invariant 13 */
		rc = claim_render(c);
		if (rc != 0)
			break;
		char aname[64 + CLAIM_ID_LEN] = "";
		if (v == CLAIM_BEHIND) {
			claim_describe_behind(&holder, &c->self, now, msg, msgsize, spec);
			rc = -EBUSY;
		} else if (v == CLAIM_HELD) {
			claim_describe(&holder, shared, parsed, now, msg, msgsize, spec, c->timeout_s);
			rc = -EBUSY;
			/* absent, judged by an aside (10): the state is changing (a
			 * back-off's aside goes at once; review 53 F5: three takers
			 * all refused), so looked at again, refused at the last round */
			if (aside && round + 1 < CLAIM_TRIES) {
				rc = -EAGAIN;
				backed_off = true;
			}
		} else { /* OURS too: by the take steps, never a put over (3, 9) */
			/* invariant 11: the asides there before we decide; absent,
			 * they were listed with the read */
			rc = listed ? 0 : claim_list_asides(b, asides);
			int taken = rc < 0 ? rc
				    : v == CLAIM_STALE || v == CLAIM_OURS
					    ? claim_take_stale(c, seen, len, aname, sizeof(aname))
						       : 1;
			if (taken == 1 && claim_hook(c, "take-create") != 0)
				taken = -EIO;
			rc = taken < 0 ? taken
			     : taken == 0 ? -EAGAIN
					  : backing_put_new(b, CLAIM_FILE, c->written, c->written_len);
			if (rc == 0) {
				claim_hook(c, "take-check");
				int moved = claim_new_aside(b, asides, aname[0] ? aname : NULL);
				if (moved != 0) { /* 11: our create may be in a renewal's gap */
					rc = claim_back_off(c);
					backed_off = true;
					if (rc == -EAGAIN)
						log_info("BACKING %s: the claim %s may have changed while this "
							 "mount judged it (%s): gave back the claim it had just "
							 "made, looks again", spec, CLAIM_FILE, moved < 0
							 ? strerror(-moved) : "an aside appeared: a renewal or "
							 "another take");
					if (moved < 0 && rc == -EAGAIN)
						rc = moved;
				}
			}
			/* a claim exists, ours or another's (10); backed off, the
			 * asides stay: they stand for the claim */
			if (taken == 1 && (rc == 0 || rc == -EEXIST) && aname[0])
				backing_remove(b, aname);
			if (rc == 0 && absent)
				claim_drop_asides(b, asides);
			if (rc == 0 && (v == CLAIM_STALE || aside) && holder.released)
				log_info("BACKING %s: took the claim catalog %s released (host %s, "
					 "cache %s)", spec, holder.catalog, holder.host, holder.cache);
			else if (rc == 0 && (v == CLAIM_STALE || aside))
				log_info("BACKING %s: took over the claim of a gone holder (catalog %s, "
					 "host %s, cache %s, pid %ld, renewed %" PRId64 " s ago)",
					 spec, holder.catalog, holder.host, holder.cache, holder.pid,
					 now - holder.renewed);
			if (rc == 0)
				claim_note_replaced(c, seen, v == CLAIM_FREE && !aside ? 0 : len);
			if (rc == -EEXIST)
				rc = -EAGAIN;
		}
		if (rc == 0)
			claim_sure_from(c, started);
	}
	free(seen);
	free(asides->name);
	free(asides);
	if (rc == 0) {
		msg[0] = '\0'; /* an earlier round's refusal, looked at again (10) */
		rc = claim_note(c, true, msg, msgsize); /* invariant 12 */
	}
	if (rc == -E2BIG) {
		snprintf(msg, msgsize, "BACKING %s: more than %d claim asides in %s/tmp (claim.*, left "
			 "by take-overs that stopped midway): the newest cannot be told, so the claim "
			 "is not taken; remove the ones no mount is taking over now (all of them if no "
			 "ckptfs uses this BACKING)", spec, CLAIM_ASIDES_MAX, spec);
		rc = -EBUSY;
	}
	if (rc == -EAGAIN)
		snprintf(msg, msgsize, "BACKING %s: the claim %s keeps changing (other mounts are "
			 "starting): try again", spec, CLAIM_FILE);
	else if (rc != 0 && rc != -EBUSY && !msg[0])
		snprintf(msg, msgsize, "BACKING %s: cannot read or write the claim %s: %s", spec,
			 CLAIM_FILE, strerror(-rc));
	if (rc != 0) {
		claim_end(c, false);
		return rc;
	}
	*out = c;
	return 0;
}

/* ---- renewal ---- */


/* Invariant 6: a claim another node of our shared catalog renewed last. */
static bool claim_shared_ours(const struct claim *c, const char *text, size_t len)
{
	struct claim_rec rec;
	return claim_parse(text, len, &rec) == 0 && rec.shared &&
	       strcmp(rec.catalog, c->self.catalog) == 0;
}

/* The claim on BACKING holds the bytes we wrote (either of the last two,
 * after a put that failed: invariant 3). */
static bool claim_is_ours(const struct claim *c, const char *have, size_t len)
{
	return (len == c->written_len && memcmp(have, c->written, len) == 0) ||
	       (c->prev_len && len == c->prev_len && memcmp(have, c->prev, len) == 0);
}

/* Invariant 10: a claim exists again (ours created, or a taker's: EEXIST):
 * our renewal's asides go, this round's and a pending one. */
static void claim_asides_done(struct claim *c, const char *aside)
{
	if (aside && aside[0])
		backing_remove(c->b, aside);
	if (c->pending[0] && (!aside || strcmp(aside, c->pending) != 0))
		backing_remove(c->b, c->pending);
	c->pending[0] = '\0';
}

/* Invariant 11 (H, M): the pause between a holder's polls, CLAIM_GAP_POLLS
 * of them within min(2 s, timeout/8). */
static struct timespec claim_gap_nap(const struct claim *c)
{
	uint64_t bound = (uint64_t)c->timeout_s * 1000 / 8;
	if (bound > 2000)
		bound = 2000;
	return (struct timespec){ 0, (long)(bound / CLAIM_GAP_POLLS) * 1000000L };
}

/* Invariant 11 (C): tmp/ holds an aside that was not there at look (before
 * our move, or at a take-back's look), is not own (this round's or our
 * pending one) and holds another's bytes: a claim was moved aside while we
 * made ours — maybe a winner's, so ours may have landed in that mover's
 * gap. 1: such an aside; 0: none (new asides gone again, or of our bytes:
 * our claim moved, taken back next renewal); -errno: unknown. */
static int claim_foreign_aside(struct claim *c, const struct claim_asides *look, const char *own)
{
	struct claim_asides now = { 0 };
	char *buf = malloc(CLAIM_MAX);
	int rc = buf ? claim_list_asides(c->b, &now) : -ENOMEM;
	int found = 0;
	for (int i = 0; rc == 0 && i < now.n && !found; i++) {
		bool known = (own && strcmp(now.name[i], own) == 0) ||
			     (c->pending[0] && strcmp(now.name[i], c->pending) == 0);
		for (int j = 0; j < look->n && !known; j++)
			known = strcmp(now.name[i], look->name[j]) == 0;
		if (known)
			continue;
		size_t len = 0;
		int grc = backing_get(c->b, now.name[i], buf, CLAIM_MAX, &len);
		if (grc == -ENOENT || (grc == 0 && claim_is_ours(c, buf, len)))
			continue;
		if (grc != 0 && grc != -EFBIG)
			rc = grc;
		else
			found = 1;
	}
	free(now.name);
	free(buf);
	return rc < 0 ? rc : found;
}

/* Invariant 11 (H): our renewal's exclusive create met a claim (EEXIST),
 * maybe a taker's that landed while ours was aside and that it gives back
 * once it sees our aside. While our aside still holds our bytes, the
 * create is tried again a few times for at most min(2 s, timeout/8), each
 * time only while no foreign aside (11 C) is there (a back-off's goes
 * again at once; a mover's stays): 0, ours made; -EEXIST, still another's
 * (or our aside gone: a taker judged it): lost; another -errno, BACKING
 * failed (the aside stays pending). */
static int claim_wait_gap(struct claim *c, const char *aside, const struct claim_asides *look)
{
	struct timespec nap = claim_gap_nap(c);
	char *have = malloc(CLAIM_MAX);
	if (!have)
		return -ENOMEM;
	int rc = -EEXIST;
	for (int i = 0; i < CLAIM_GAP_POLLS && rc == -EEXIST; i++) {
		nanosleep(&nap, NULL);
		size_t len = 0;
		int grc = backing_get(c->b, aside, have, CLAIM_MAX, &len);
		if (grc == -ENOENT || (grc == 0 && !claim_is_ours(c, have, len)))
			break; /* a taker judged our aside: its claim stands */
		if (grc != 0 || claim_foreign_aside(c, look, aside) != 0)
			continue; /* unknown, or a moved claim: looked at again */
		if (claim_hook(c, "renew-wait") == 0)
			rc = backing_put_new(c->b, CLAIM_FILE, c->written, c->written_len);
	}
	free(have);
	return rc;
}

/* Our bytes are being put by an exclusive create (invariant 1): 0, the
 * claim ours and we sure from started; -EEXIST, a taker's claim is there,
 * or a foreign aside appeared after our create (11 C: given back): fenced;
 * another -errno, the aside stays pending (10). aside: this round's, or
 * NULL (the pending one); moved, len: the aside's bytes; look: tmp/'s
 * asides before the move, or at the take-back's look. */
static int claim_create_anew(struct claim *c, const char *aside, const char *moved, size_t len,
			     uint64_t started, const struct claim_asides *look)
{
	const char *own = aside ? aside : c->pending;
	memcpy(c->prev, moved, len); /* the aside's bytes stay known as ours */
	c->prev_len = len;
	int rc = claim_render(c);
	if (rc == 0)
		rc = claim_hook(c, "retake-create");
	if (rc == 0)
		rc = backing_put_new(c->b, CLAIM_FILE, c->written, c->written_len);
	if (rc == -EEXIST)
		rc = claim_wait_gap(c, own, look);
	if (rc == 0) {
		claim_hook(c, "retake-check");
		int f = claim_foreign_aside(c, look, own);
		struct timespec nap = claim_gap_nap(c);
		for (int i = 0; f == 1 && i < CLAIM_GAP_POLLS; i++) { /* 11 C: looked at again */
			nanosleep(&nap, NULL); /* a back-off's aside goes at once; a mover's stays */
			f = claim_foreign_aside(c, look, own);
		}
		if (f < 0) { /* 11 C: unknown: given back, not fenced; the aside stays pending */
			claim_back_off(c);
			log_warn("BACKING %s: cannot look at tmp/ after renewing the claim %s: %s (given "
				 "back; a later renewal tries again)", backing_spec(c->b), CLAIM_FILE,
				 strerror(-f));
			return f;
		}
		if (f != 0) { /* 11 C */
			claim_back_off(c);
			claim_fence(c, "a claim was moved aside while this daemon made the claim anew: "
				    "another may hold BACKING; gave back the one it made");
			return -EEXIST;
		}
		claim_asides_done(c, aside); /* our claim exists (invariant 10) */
	}
	if (rc == -EEXIST) { /* our aside stays: a taker's evidence (11) */
		claim_fence(c, "another catalog took BACKING over while this daemon renewed the claim");
		return rc;
	}
	if (rc != 0) { /* the aside, our bytes, stands for the claim (10); taken back next time */
		log_warn("BACKING %s: cannot renew the claim %s: %s (a later renewal tries again)",
			 backing_spec(c->b), CLAIM_FILE, strerror(-rc));
		return rc;
	}
	c->prev_len = 0;
	claim_sure_from(c, started);
	if (__atomic_exchange_n(&c->unsure_said, 0, __ATOMIC_ACQ_REL))
		log_info("BACKING %s: the claim %s is renewed again, still ours: uploads and removals "
			 "go on", backing_spec(c->b), CLAIM_FILE);
	return 0;
}

/* Our move found nothing: no aside of this round's name exists. */
static bool claim_aside_absent(struct claim *c, const char *aside)
{
	char *buf = malloc(CLAIM_MAX);
	size_t l = 0;
	bool gone = buf && backing_get(c->b, aside, buf, CLAIM_MAX, &l) == -ENOENT;
	free(buf);
	return gone;
}

static bool claim_take_back(struct claim *c, uint64_t started);

/* Invariant 9: a lone claim is renewed as a taker of a stale claim takes it
 * (invariants 2, 10): the claim, still our bytes, moved aside and made anew
 * by an exclusive create, so that of us and a taker who judged it stale
 * exactly one wins, however long a step of ours stalls. A rewrite in place
 * (a put over) could land on the taker's new claim. have: the claim's
 * bytes, read at started and ours. A taker whose create lands while our
 * claim is aside backs off when it sees our aside, and our create tries
 * again meanwhile (invariant 11). A mover that moved ours between our read
 * and our move left it aside (2): taken back from there (11 M). */
static void claim_retake(struct claim *c, const char *have, size_t len, uint64_t started)
{
	char aside[64 + CLAIM_ID_LEN];
	if (c->pending[0]) /* our claim exists: an older aside of ours goes (10) */
		claim_asides_done(c, NULL);
	struct claim_asides look = { 0 }; /* 11 C: before the move */
	int taken = claim_list_asides(c->b, &look);
	if (taken == 0)
		taken = claim_take_stale(c, have, len, aside, sizeof(aside));
	else
		aside[0] = '\0';
	if (taken < 0) { /* BACKING failed: the move may have been made */
		snprintf(c->pending, sizeof(c->pending), "%s", aside);
		log_warn("BACKING %s: cannot renew the claim %s: %s (a later renewal tries again)",
			 backing_spec(c->b), CLAIM_FILE, strerror(-taken));
	} else if (taken == 0 && claim_aside_absent(c, aside) && claim_take_back(c, started)) {
		; /* moved by a mover between our read and our move, and left
		   * aside (2): taken back from there, as if read absent (11 M) */
	} else if (taken == 0) {
		claim_fence(c, "a taker moved it aside while this daemon renewed it");
	} else if (claim_create_anew(c, aside, have, len, started, &look) != 0 && !claim_lost(c)) {
		snprintf(c->pending, sizeof(c->pending), "%s", aside);
	}
	free(look.name);
}

/* Invariant 10: the claim is absent, and our last renewal moved it aside
 * to c->pending but no claim was made since; or, none pending (11 M: the
 * claim still absent after the reads again), the newest aside holds our
 * bytes — a taker that judged an older claim moved ours aside and left it
 * there (2) — and becomes our pending aside (while the claim is absent
 * every taker judges it as the claim, held by us). Taken back only while
 * the newest aside holds our bytes (a taker removes an aside only once its
 * own claim exists; a newer aside of another's bytes is a take-over whose
 * claim a mover left aside), by an exclusive create checked as a taker's
 * is (11 C). The pending aside gone: a taker judged it and made its claim:
 * fenced. Never a create of another's bytes. false: none pending and the
 * newest aside not ours (nothing done, nothing adopted). */
static bool claim_take_back(struct claim *c, uint64_t started)
{
	struct claim_asides look = { 0 };
	struct claim_rec newest;
	char *bytes = malloc(CLAIM_MAX);
	size_t len = 0;
	int which = 0;
	int rc = bytes ? claim_newest_aside(c->b, &look, bytes, &len, &newest, &which) : -ENOMEM;
	bool adopt = !c->pending[0], ours = rc == 1 && claim_is_ours(c, bytes, len);
	if (adopt && ours) {
		snprintf(c->pending, sizeof(c->pending), "%s", look.name[which]);
		log_info("BACKING %s: the claim %s is absent and the newest aside, %s, holds this "
			 "mount's claim (a taker moved it aside to compare it): made again from it",
			 backing_spec(c->b), CLAIM_FILE, c->pending);
	}
	bool listed = false;
	for (int i = 0; rc >= 0 && i < look.n && !listed; i++)
		listed = strcmp(look.name[i], c->pending) == 0;
	if (adopt && !ours) {
		/* nothing of ours to take back */
	} else if (rc < 0) {
		log_warn("BACKING %s: cannot read %s to renew the claim %s: %s (a later renewal tries "
			 "again)", backing_spec(c->b), c->pending, CLAIM_FILE, strerror(-rc));
	} else if (!listed) {
		c->pending[0] = '\0';
		claim_fence(c, "the claim was removed (its aside too: a taker judged it)");
	} else if (!ours) {
		claim_fence(c, "an aside newer than this daemon's holds another's claim: another "
			    "catalog took BACKING over while this daemon renewed the claim");
	} else {
		claim_create_anew(c, NULL, bytes, len, started, &look);
	}
	free(look.name);
	free(bytes);
	return !adopt || ours;
}

/* Invariant 11 (M): our claim read absent with no aside of ours pending.
 * A taker that judged an older claim stale may have moved ours aside to
 * compare it (2), or a claim made since be about to land: it is read again
 * a few times within min(2 s, timeout/8) before the newest aside is looked
 * at (claim_take_back). Only reads: the claim is never made here. The last read's answer (0 with the claim's
 * bytes in have, -ENOENT, another -errno). */
static int claim_wait_back(struct claim *c, char *have, size_t *len)
{
	struct timespec nap = claim_gap_nap(c);
	int rc = -ENOENT;
	for (int i = 0; i < CLAIM_GAP_POLLS && rc == -ENOENT; i++) {
		nanosleep(&nap, NULL);
		claim_hook(c, "renew-absent");
		*len = 0;
		rc = backing_get(c->b, CLAIM_FILE, have, CLAIM_MAX, len);
	}
	return rc;
}

/* One renewal (invariant 3); called with c->lock not held. A lone claim is
 * taken anew every time (claim_retake, invariant 9); a shared one, which no
 * one takes over by age (7), is rewritten in place while it names our
 * catalog (6). */
static void claim_renew(struct claim *c)
{
	assert(c->written_len > 0);
	if (claim_lost(c))
		return; /* fenced, logged */
	uint64_t started = claim_clock_ms(); /* invariant 9: before the read */
	char *have = malloc(CLAIM_MAX);
	size_t len = 0;
	int rc = have ? backing_get(c->b, CLAIM_FILE, have, CLAIM_MAX, &len) : -ENOMEM;
	claim_hook(c, "renew-read");
	if (rc == -ENOENT && !c->pending[0] && have)
		rc = claim_wait_back(c, have, &len); /* invariant 11 M */
	bool ours = rc == 0 && claim_is_ours(c, have, len);
	if (rc == 0 && !ours && c->self.shared)
		ours = claim_shared_ours(c, have, len);
	if (rc == -ENOENT && !c->self.shared && claim_take_back(c, started))
		; /* from our pending aside, or a mover's of our bytes (10, 11 M) */
	else if (rc != 0 && rc != -ENOENT && rc != -EFBIG)
		log_warn("BACKING %s: cannot read the claim %s to renew it: %s (a later renewal "
			 "tries again)", backing_spec(c->b), CLAIM_FILE, strerror(-rc));
	else if (!ours)
		claim_fence(c, rc == 0 ? "another catalog took BACKING over: the claim names another "
					 "holder now"
				       : "the claim was removed");
	else if (!c->self.shared)
		claim_retake(c, have, len, started);
	free(have);
	if (rc != 0 || !ours || !c->self.shared)
		return;
	memcpy(c->prev, c->written, c->written_len);
	c->prev_len = c->written_len;
	if (claim_render(c) != 0)
		return;
	rc = backing_put(c->b, CLAIM_FILE, c->written, c->written_len);
	if (rc == 0) {
		c->prev_len = 0;
		claim_sure_from(c, started);
	} else { /* BACKING holds the old bytes or the new ones: both stay ours */
		log_warn("BACKING %s: cannot renew the claim %s: %s", backing_spec(c->b), CLAIM_FILE,
			 strerror(-rc));
	}
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

/* claim_abandon's step (invariants 3, 9): our claim, still ours, moved
 * aside by the take steps (never removed or put over after a read: a
 * taker's claim could be there by then), and what acquire replaced put back
 * by an exclusive create, checked (11 C: an aside new since the look means
 * it may have landed in a mover's gap over a winner's, so it goes aside
 * again and stands for itself there, 10; review 53 F1). 0, -ESTALE
 * (another's), or -errno. */
static int claim_give_back(struct claim *c)
{
	if (!c->replaced && c->replaced_len)
		return -ENOMEM;
	if (!claim_may_write(c))
		return -ESTALE;
	char *have = malloc(CLAIM_MAX);
	char aside[CLAIM_ASIDE_NAME];
	size_t len = 0;
	int rc = have ? backing_get(c->b, CLAIM_FILE, have, CLAIM_MAX, &len) : -ENOMEM;
	if (rc == 0 && !claim_is_ours(c, have, len))
		rc = -ESTALE;
	struct claim_asides look = { 0 }; /* 11 C, for the give-back's create */
	if (rc == 0)
		rc = claim_list_asides(c->b, &look);
	int taken = rc == 0 ? claim_take_stale(c, have, len, aside, sizeof(aside)) : rc;
	free(have);
	if (taken <= 0) {
		free(look.name);
		return taken == 0 ? -ESTALE : taken; /* moved by a taker first, or another's */
	}
	claim_hook(c, "giveback-create"); /* tests: moved, compared, before the create */
	rc = c->replaced ? backing_put_new(c->b, CLAIM_FILE, c->replaced, c->replaced_len) : 0;
	if (rc == 0 && c->replaced && claim_new_aside(c->b, &look, aside) != 0) {
		/* a claim was moved aside while ours was: ours may have landed in
		 * that mover's gap over a winner's. What was given back goes aside
		 * again and stays there, standing for itself (10). */
		char again[CLAIM_ASIDE_NAME];
		claim_take_stale(c, c->replaced, c->replaced_len, again, sizeof(again));
		log_info("BACKING %s: a claim was moved aside while this one gave back %s: what it "
			 "gave back stays aside", backing_spec(c->b), CLAIM_FILE);
	}
	free(look.name);
	if (rc == 0 || rc == -EEXIST) /* a claim exists, or none is to: the aside goes (10) */
		backing_remove(c->b, aside);
	return rc == -EEXIST ? -ESTALE : rc;
}

/* Invariants 3, 8, 9: our claim, still ours and we sure of it, marked
 * released by the steps of a take (claim_retake), never by a put over it
 * that could land on a taker's claim; read absent, as a renewal would (11
 * M: read again, then our pending or adopted aside taken back, released): 0, -ESTALE (another's, or fenced),
 * -EIO (our aside stands for the claim: 10), or BACKING's error. */
static int claim_release(struct claim *c)
{
	if (!claim_may_write(c))
		return -ESTALE;
	char *have = malloc(CLAIM_MAX);
	size_t len = 0;
	uint64_t started = claim_clock_ms();
	int rc = have ? backing_get(c->b, CLAIM_FILE, have, CLAIM_MAX, &len) : -ENOMEM;
	claim_hook(c, "release-read");
	if (rc == -ENOENT && !c->pending[0])
		rc = claim_wait_back(c, have, &len); /* invariant 11 M, as a renewal */
	if (rc == -ENOENT) {
		c->self.released = true; /* our aside, if any, stands for the claim (10) */
		if (claim_take_back(c, started))
			rc = claim_lost(c) ? -ESTALE : c->pending[0] ? -EIO : 0;
		else
			c->self.released = false; /* nothing of ours: not released */
	} else if (rc == 0 && !claim_is_ours(c, have, len)) {
		rc = -ESTALE;
	} else if (rc == 0) {
		c->self.released = true;
		claim_retake(c, have, len, started);
		rc = claim_lost(c) ? -ESTALE : c->pending[0] ? -EIO : 0;
	}
	free(have);
	return rc;
}

void claim_end(struct claim *c, bool release)
{
	if (!c)
		return;
	claim_stop(c);
	if (release && !c->self.shared && !__atomic_load_n(&c->fenced, __ATOMIC_ACQUIRE)) {
		int rc = claim_release(c); /* invariants 3, 6, 8, 9 */
		if (rc != 0 && rc != -ENOENT)
			log_warn("BACKING %s: claim %s not released: %s", backing_spec(c->b),
				 CLAIM_FILE, rc == -ESTALE ? "it is another holder's now, or this "
				 "holder is fenced" : strerror(-rc));
	}
	claim_free(c);
}

void claim_abandon(struct claim *c)
{
	if (!c)
		return;
	claim_stop(c);
	int rc = claim_give_back(c);
	if (rc != 0 && rc != -ENOENT)
		log_warn("BACKING %s: claim %s not given back: %s", backing_spec(c->b), CLAIM_FILE,
			 rc == -ESTALE ? "it is another holder's now" : strerror(-rc));
	claim_free(c);
}
