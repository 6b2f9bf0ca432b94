/* claimrec — the claim's record: its text (claim_format, claim_parse), the
 * decision of claim.h's diagram (claim_judge), who we are (host, boot,
 * namespaces), and the refusal lines. Pure but for /proc, the hostname and
 * the cache lock looked at by claim_holder_alive; the protocol that writes
 * epochs is claim.c. Contract and invariants: claim.h. */
#define _GNU_SOURCE
#include "claimrec.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cachedir.h"

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

unsigned claim_lease(const struct claim_rec *holder, unsigned timeout_s)
{
	return holder->lease_s > timeout_s ? holder->lease_s : timeout_s;
}

enum claim_verdict claim_judge(const struct claim_rec *holder, const struct claim_rec *self,
			       int64_t now, unsigned timeout_s, claim_alive_fn alive, void *arg)
{
	assert(self && timeout_s > 0);
	if (!holder)
		return CLAIM_FREE;
	if (holder->vacant[0]) /* invariant 8: nobody holds it; a break waits for the fence */
		return strcmp(holder->vacant, CLAIM_BROKEN) == 0 &&
				       now - holder->renewed <= (int64_t)claim_lease(holder, timeout_s)
			       ? CLAIM_HELD
			       : CLAIM_FREE;
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
	return age > (int64_t)claim_lease(holder, timeout_s) ? CLAIM_STALE : CLAIM_HELD;
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
	if (n >= 0 && (size_t)n < size && rec->lease_s) /* invariant 9 */
		n += snprintf(buf + n, size - (size_t)n, "lease %u\n", rec->lease_s);
	if (n >= 0 && (size_t)n < size && rec->vacant[0]) /* invariant 8 */
		n += snprintf(buf + n, size - (size_t)n, "vacant %s\n", rec->vacant);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : n;
}

bool claim_hex_id(const char *s)
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
	if (kl == 5 && memcmp(key, "lease", 5) == 0) { /* invariant 9: seconds, > 0 */
		bool ok = claim_number(v, vl, 86400, &x) && x > 0; /* claim_timeout's range */
		out->lease_s = (unsigned)x;
		return ok;
	}
	if (kl == 6 && memcmp(key, "vacant", 6) == 0) /* invariant 8: a word, a-z and - */
		return vl > 0 && claim_field(v, vl, out->vacant, sizeof(out->vacant)) &&
		       strspn(out->vacant, "abcdefghijklmnopqrstuvwxyz-") == vl;
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

void claim_random_hex(char out[CLAIM_ID_LEN + 1])
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

void claim_this_host(struct claim_rec *rec)
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

void claim_describe(const struct claim_rec *h, bool self_shared, int parsed, int64_t now,
			   char *msg, size_t size, const char *spec, unsigned timeout_s)
{
	if (parsed != 0) {
		snprintf(msg, size, "BACKING %s is claimed by another catalog (the claim's record "
			 "does not parse); if no ckptfs uses this BACKING, break the claim: "
			 "ckptfs-admin claim --break %s", spec, spec);
		return;
	}
	int64_t ago = now - h->renewed;
	if (ago < 0)
		ago = 0;
	if (h->vacant[0]) {
		snprintf(msg, size, "BACKING %s: its claim was broken by hand %" PRId64 " s ago (on "
			 "host %s): it is free to any catalog %" PRId64 " s after that, once a holder "
			 "still running has seen it at a renewal and stopped writing",
			 spec, ago, h->host, (int64_t)claim_lease(h, timeout_s) + 1);
		return;
	}
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
			 "its objects) — if it is retired for good, break the claim: "
			 "ckptfs-admin claim --break %s",
			 spec, h->catalog, h->host, h->cache, ago, spec);
		return;
	}
	if (self_shared) {
		snprintf(msg, size, "BACKING %s belongs to a catalog of one node, not shared (host %s, "
			 "cache %s, pid %ld, renewed %" PRId64 " s ago): a shared catalog (-o meta=) "
			 "never takes it over by age (that catalog still names its objects); mount it "
			 "without meta=, or, if that catalog is retired for good, break the claim: "
			 "ckptfs-admin claim --break %s",
			 spec, h->host, h->cache, h->pid, ago, spec);
		return;
	}
	snprintf(msg, size, "BACKING %s is claimed by another catalog (host %s, cache %s, pid %ld, "
		 "renewed %" PRId64 " s ago); unmount it there, or wait %u s if that node is gone",
		 spec, h->host, h->cache, h->pid, ago, claim_lease(h, timeout_s));
}

/* BEHIND (invariant 8): one line naming the catalog that wrote BACKING last
 * and the way out. */
void claim_describe_behind(const struct claim_rec *h, const struct claim_rec *self,
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

/* Invariant 13: a stand-in records the identity the judged holder stands
 * for: its own, or, a stand-in too and not released (killed), what that
 * one replaced. */
void claim_stand_for(struct claim_rec *self, const struct claim_rec *holder)
{
	bool chain = holder->rep_catalog[0] != '\0' && !holder->released;
	snprintf(self->rep_catalog, sizeof(self->rep_catalog), "%s",
		 chain ? holder->rep_catalog : holder->catalog);
	snprintf(self->rep_instance, sizeof(self->rep_instance), "%s",
		 chain ? holder->rep_instance : holder->instance);
	self->rep_take = chain ? holder->rep_take : holder->take;
}
