/* claim — one catalog per BACKING: judging, taking, renewing and releasing
 * the claim file. The contract, the decision diagram and the invariants are
 * in claim.h; the file format in docs/FORMAT.md ("The claim").
 *
 * Acquisition is a loop of at most CLAIM_TRIES rounds, each:
 *
 *   read CLAIM_FILE ──┬─ absent ─▶ put_new ──┬─ 0 ─────────▶ held
 *                     │                      └─ EEXIST ────▶ next round
 *                     ├─ OURS ──▶ put (our pid, instance, now) ▶ held
 *                     ├─ HELD ──▶ -EBUSY, the holder named
 *                     └─ STALE ─▶ move aside to tmp/claim.<instance>
 *                                   ├─ ENOENT (another taker moved it) ▶ next round
 *                                   ├─ moved bytes == judged bytes ▶ remove aside,
 *                                   │    put_new (as if absent)
 *                                   └─ otherwise: put it back, next round
 *
 * The renewal thread wakes every timeout/4 (at once after claim_start),
 * reads the claim and rewrites it with the time only if its bytes are the
 * ones we wrote last (invariant 3); a claim that is no longer ours is
 * logged as an error once, and never written again. */
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
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "cachedir.h"
#include "log.h"

#define CLAIM_TRIES 8
#define CLAIM_FORMAT_LINE "ckptfs claim 1\n"

struct claim {
	struct backing *b;
	struct claim_rec self;
	unsigned timeout_s;
	char written[CLAIM_MAX]; /* our bytes on BACKING (invariant 3) */
	size_t written_len;
	char prev[CLAIM_MAX]; /* the bytes before a renewal that failed: either may be there */
	size_t prev_len;
	bool lost;		  /* logged once: someone else holds it now */
	pthread_t thread;
	bool running;
	bool stop;
	pthread_mutex_t lock;
	pthread_cond_t wake;
};

/* ---- the decision ---- */

static bool claim_same_host(const struct claim_rec *a, const struct claim_rec *b)
{
	return strcmp(a->host, b->host) == 0 && strcmp(a->boot, b->boot) == 0;
}

static enum claim_verdict claim_judge_lone(const struct claim_rec *holder,
					   const struct claim_rec *self, int64_t now,
					   unsigned timeout_s, claim_alive_fn alive, void *arg);

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
	if (v == CLAIM_STALE && !self->fresh && strcmp(holder->catalog, self->catalog) != 0)
		return CLAIM_BEHIND; /* invariant 8 */
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
}

static int64_t claim_now(void)
{
	return (int64_t)time(NULL);
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
			 "its objects) — if it is retired for good, remove %s/%s by hand",
			 spec, h->catalog, h->host, h->cache, ago, spec, CLAIM_FILE);
		return;
	}
	if (self_shared) {
		snprintf(msg, size, "BACKING %s belongs to a catalog of one node, not shared (host %s, "
			 "cache %s, pid %ld, renewed %" PRId64 " s ago): a shared catalog (-o meta=) "
			 "never takes it over by age (that catalog still names its objects); mount it "
			 "without meta=, or, if that catalog is retired for good, remove %s/%s by hand",
			 spec, h->host, h->cache, h->pid, ago, spec, CLAIM_FILE);
		return;
	}
	snprintf(msg, size, "BACKING %s is claimed by another catalog (host %s, cache %s, pid %ld, "
		 "renewed %" PRId64 " s ago); unmount it there, or wait %u s if that node is gone",
		 spec, h->host, h->cache, h->pid, ago, timeout_s);
}

/* BEHIND (invariant 8): one line naming the catalog that wrote BACKING last
 * and the way out. */
static void claim_describe_behind(const struct claim_rec *h, int64_t now, char *msg, size_t size,
				  const char *spec, const char *cache)
{
	int64_t ago = now - h->renewed;
	snprintf(msg, size, "BACKING %s was written by another catalog (host %s, cache %s, %s %" PRId64
		 " s ago) since the catalog of cache %s last held it: this catalog does not know what "
		 "that one wrote, and its deletions would destroy it; mount with an empty cache (its "
		 "catalog is rebuilt from BACKING with every durable generation of both) and keep "
		 "this cache aside until you decide",
		 spec, h->host, h->cache, h->released ? "released" : "last renewed",
		 ago < 0 ? 0 : ago, cache);
}

/* STALE: invariant 2. 1 if the claim was moved aside and dropped (create it
 * now), 0 to read again, or -errno. */
static int claim_take_stale(struct claim *c, const char *judged, size_t judged_len)
{
	assert(judged_len <= CLAIM_MAX && claim_hex_id(c->self.instance));
	char aside[64 + CLAIM_ID_LEN], *moved = malloc(CLAIM_MAX);
	if (!moved)
		return -ENOMEM;
	snprintf(aside, sizeof(aside), "tmp/claim.%s", c->self.instance);
	int rc = backing_move(c->b, CLAIM_FILE, aside);
	if (rc == -ENOENT) { /* another taker moved it first */
		free(moved);
		return 0;
	}
	size_t len = 0;
	if (rc == 0)
		rc = backing_get(c->b, aside, moved, CLAIM_MAX, &len);
	if (rc == 0 && (len != judged_len || memcmp(moved, judged, len) != 0)) {
		/* another taker's fresh claim: put it back (if a third one made
		 * a claim meanwhile, that one stands and the moved one lost) */
		int prc = backing_put_new(c->b, CLAIM_FILE, moved, len);
		if (prc != 0 && prc != -EEXIST)
			rc = prc;
		else
			rc = -EAGAIN;
	}
	if (rc == 0 || rc == -EAGAIN)
		backing_remove(c->b, aside);
	free(moved);
	return rc == -EAGAIN ? 0 : rc == 0 ? 1 : rc;
}

int claim_acquire(struct backing *b, const char *catalog_id, bool shared, bool fresh,
		  const char *cache, unsigned timeout_s, struct claim **out, char *msg,
		  size_t msgsize)
{
	*out = NULL;
	msg[0] = '\0';
	struct claim *c = calloc(1, sizeof(*c));
	char *seen = malloc(CLAIM_MAX);
	if (!c || !seen) {
		free(c);
		free(seen);
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
	assert(claim_hex_id(c->self.catalog) && c->self.cache[0] == '/');

	const char *spec = backing_spec(b);
	int rc = -EAGAIN;
	for (int round = 0; round < CLAIM_TRIES && rc == -EAGAIN; round++) {
		struct claim_rec holder;
		size_t len = 0;
		int parsed = 0;
		rc = claim_read(b, seen, &len, &holder, &parsed);
		int64_t now = claim_now();
		enum claim_verdict v = CLAIM_FREE;
		if (rc == 0 && parsed != 0)
			v = CLAIM_HELD; /* invariant 5: never taken by guess */
		else if (rc == 0)
			v = claim_judge(&holder, &c->self, now, c->timeout_s, claim_holder_alive, NULL);
		else if (rc != -ENOENT)
			break;
		rc = claim_render(c);
		if (rc != 0)
			break;
		if (v == CLAIM_BEHIND) {
			claim_describe_behind(&holder, now, msg, msgsize, spec, c->self.cache);
			rc = -EBUSY;
		} else if (v == CLAIM_HELD) {
			claim_describe(&holder, shared, parsed, now, msg, msgsize, spec, c->timeout_s);
			rc = -EBUSY;
		} else if (v == CLAIM_OURS) {
			rc = backing_put(b, CLAIM_FILE, c->written, c->written_len);
		} else {
			int taken = v == CLAIM_STALE ? claim_take_stale(c, seen, len) : 1;
			if (taken == 1 && v == CLAIM_STALE && holder.released)
				log_info("BACKING %s: took the claim catalog %s released (host %s, "
					 "cache %s)", spec, holder.catalog, holder.host, holder.cache);
			else if (taken == 1 && v == CLAIM_STALE)
				log_info("BACKING %s: took over the claim of a gone holder (catalog %s, "
					 "host %s, cache %s, pid %ld, renewed %" PRId64 " s ago)",
					 spec, holder.catalog, holder.host, holder.cache, holder.pid,
					 now - holder.renewed);
			rc = taken < 0 ? taken
			     : taken == 0 ? -EAGAIN
					  : backing_put_new(b, CLAIM_FILE, c->written, c->written_len);
			if (rc == -EEXIST)
				rc = -EAGAIN;
		}
	}
	free(seen);
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

/* One renewal (invariant 3); called with c->lock not held. */
static void claim_renew(struct claim *c)
{
	assert(c->written_len > 0 && !c->lost);
	char *have = malloc(CLAIM_MAX);
	size_t len = 0;
	int rc = have ? backing_get(c->b, CLAIM_FILE, have, CLAIM_MAX, &len) : -ENOMEM;
	bool ours = rc == 0 && ((len == c->written_len && memcmp(have, c->written, len) == 0) ||
				(c->prev_len && len == c->prev_len && memcmp(have, c->prev, len) == 0));
	if (rc == 0 && !ours && c->self.shared)
		ours = claim_shared_ours(c, have, len);
	free(have);
	if (rc != 0 && rc != -ENOENT && rc != -EFBIG) {
		log_warn("BACKING %s: cannot read the claim %s to renew it: %s (a later renewal "
			 "tries again)", backing_spec(c->b), CLAIM_FILE, strerror(-rc));
		return;
	}
	if (!ours) {
		if (!c->lost)
			log_error("BACKING %s: the claim %s is no longer this daemon's (%s): another "
				  "catalog took BACKING over after renewals failed for %u s; unmount",
				  backing_spec(c->b), CLAIM_FILE, rc == 0 ? "another holder" : "removed",
				  c->timeout_s);
		c->lost = true;
		return;
	}
	memcpy(c->prev, c->written, c->written_len);
	c->prev_len = c->written_len;
	if (claim_render(c) != 0)
		return;
	rc = backing_put(c->b, CLAIM_FILE, c->written, c->written_len);
	if (rc == 0)
		c->prev_len = 0;
	else /* BACKING holds the old bytes or the new ones: both stay ours */
		log_warn("BACKING %s: cannot renew the claim %s: %s", backing_spec(c->b), CLAIM_FILE,
			 strerror(-rc));
}

static void *claim_thread(void *arg)
{
	struct claim *c = arg;
	pthread_mutex_lock(&c->lock);
	while (!c->stop) {
		pthread_mutex_unlock(&c->lock);
		if (!c->lost)
			claim_renew(c);
		pthread_mutex_lock(&c->lock);
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
	int rc = pthread_create(&c->thread, NULL, claim_thread, c);
	if (rc != 0) {
		log_error("BACKING %s: cannot start the claim's renewal thread: %s",
			  backing_spec(c->b), strerror(rc));
		return -rc;
	}
	c->running = true;
	return 0;
}

/* Invariant 8: our claim, rewritten with "released yes" (the file stays:
 * it names the last catalog that wrote BACKING). */
static int claim_mark_released(struct claim *c)
{
	c->self.released = true;
	int rc = claim_render(c);
	return rc ? rc : backing_put(c->b, CLAIM_FILE, c->written, c->written_len);
}

void claim_end(struct claim *c, bool release)
{
	if (!c)
		return;
	if (c->running) {
		pthread_mutex_lock(&c->lock);
		c->stop = true;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
	}
	if (release && !c->lost && !c->self.shared) { /* invariant 6 */
		char *have = malloc(CLAIM_MAX);
		size_t len = 0;
		int rc = have ? backing_get(c->b, CLAIM_FILE, have, CLAIM_MAX, &len) : -ENOMEM;
		if (rc == 0 && ((len == c->written_len && memcmp(have, c->written, len) == 0) ||
				(c->prev_len && len == c->prev_len && memcmp(have, c->prev, len) == 0)))
			rc = claim_mark_released(c);
		else if (rc == 0)
			rc = -ESTALE;
		if (rc != 0 && rc != -ENOENT)
			log_warn("BACKING %s: claim %s not released: %s", backing_spec(c->b),
				 CLAIM_FILE, rc == -ESTALE ? "it is another holder's now" : strerror(-rc));
		free(have);
	}
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
