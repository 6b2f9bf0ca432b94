/* Unit tests for fs/lib/claim.c, one catalog per BACKING: the decision
 * (claim_judge) with a fake clock and a fake liveness test — absent is free,
 * our own catalog is ours, a holder on this host is judged by liveness only,
 * another host's by its heartbeat against the timeout; the file format
 * round-trips and anything malformed is refused; and, on a directory BACKING,
 * acquisition creates, refuses naming the holder, takes over a stale claim,
 * releases only its own, and of racing takers exactly one wins. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "claim.h"
#include "log.h"

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define NOW 1700000000

static bool fake_alive(void *arg, const struct claim_rec *rec)
{
	(void)rec;
	return *(bool *)arg;
}

static struct claim_rec rec_of(const char *catalog, const char *host, const char *boot,
			       const char *cache, int64_t renewed)
{
	struct claim_rec r;
	memset(&r, 0, sizeof(r));
	snprintf(r.catalog, sizeof(r.catalog), "%s", catalog);
	snprintf(r.instance, sizeof(r.instance), "%s", ID_B);
	snprintf(r.host, sizeof(r.host), "%s", host);
	snprintf(r.boot, sizeof(r.boot), "%s", boot);
	snprintf(r.cache, sizeof(r.cache), "%s", cache);
	r.pid = 1234;
	r.renewed = renewed;
	r.fresh = true; /* as self: a catalog new or rebuilt (invariant 8's own tests say otherwise) */
	return r;
}

Test(claim_judge, absent_claim_is_free)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	bool alive = true;
	cr_assert_eq(claim_judge(NULL, &self, NOW, 60, fake_alive, &alive), CLAIM_FREE);
}

Test(claim_judge, same_catalog_host_and_cache_is_ours_even_if_old)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec h = rec_of(ID_A, "n1", "b1", "/c1", NOW - 100000);
	bool alive = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_OURS);
}

Test(claim_judge, our_cache_with_another_catalog_is_stale)
{
	/* the catalog was rebuilt: we hold that cache's lock, its old daemon is gone */
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec h = rec_of(ID_B, "n1", "b1", "/c1", NOW);
	bool alive = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
}

Test(claim_judge, same_host_is_judged_by_liveness_not_by_the_clock)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec fresh = rec_of(ID_B, "n1", "b1", "/c2", NOW);
	struct claim_rec old = rec_of(ID_B, "n1", "b1", "/c2", NOW - 3600);
	bool alive = true;
	cr_assert_eq(claim_judge(&fresh, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	cr_assert_eq(claim_judge(&old, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	alive = false;
	cr_assert_eq(claim_judge(&fresh, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	cr_assert_eq(claim_judge(&old, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
}

Test(claim_judge, same_catalog_in_another_cache_is_not_ours)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec h = rec_of(ID_A, "n1", "b1", "/copy", NOW);
	bool alive = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
}

Test(claim_judge, other_host_is_held_until_the_heartbeat_is_older_than_the_timeout)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	bool alive = false; /* never asked for another host */
	for (int64_t age = 0; age <= 60; age += 10) {
		struct claim_rec h = rec_of(ID_B, "n2", "b2", "/c1", NOW - age);
		cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD,
			     "age %lld", (long long)age);
	}
	struct claim_rec h = rec_of(ID_B, "n2", "b2", "/c1", NOW - 61);
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	cr_assert_eq(claim_judge(&h, &self, NOW, 120, fake_alive, &alive), CLAIM_HELD);
	/* a clock ahead of ours: fresh */
	h.renewed = NOW + 500;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
}

Test(claim_judge, same_name_other_boot_is_another_host)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec h = rec_of(ID_B, "n1", "b-before-reboot", "/c2", NOW - 10);
	bool alive = false;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	h.renewed = NOW - 61;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
}

/* claim.h invariant 4 (review 40 F2): a container on this kernel with its
 * own mount or pid namespace (same host name and boot id) is another host:
 * judged by the heartbeat, never by a cache path or pid it cannot see, and
 * a claim of that same cache path is not ours nor stale. */
Test(claim_judge, same_name_and_boot_other_namespaces_is_another_host)
{
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	self.ns_mnt = 100;
	self.ns_pid = 200;
	bool alive = false; /* what our namespaces would say: gone */
	struct claim_rec h = rec_of(ID_B, "n1", "b1", "/c1", NOW - 10);
	for (int i = 0; i < 2; i++) {
		h.ns_mnt = i == 0 ? 101 : 100;
		h.ns_pid = i == 0 ? 200 : 201;
		h.renewed = NOW - 10;
		cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD, "case %d", i);
		h.renewed = NOW - 61;
		cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE, "case %d", i);
	}
	/* our own catalog in another container's cache of the same path: not ours */
	h = rec_of(ID_A, "n1", "b1", "/c1", NOW - 10);
	h.ns_mnt = 101;
	h.ns_pid = 200;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	/* the same namespaces: the same-host rules, as before */
	h.ns_mnt = 100;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_OURS);
	h = rec_of(ID_B, "n1", "b1", "/c2", NOW - 10);
	h.ns_mnt = 100;
	h.ns_pid = 200;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	/* an older ckptfs's claim (no ns line): by host name and boot id */
	h.ns_mnt = h.ns_pid = 0;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	/* ours unknown (no /proc): never the same host for a claim with the line */
	h.ns_mnt = 100;
	h.ns_pid = 200;
	self.ns_mnt = self.ns_pid = 0;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
}

Test(claim_format, the_ns_line_round_trips_and_is_checked)
{
	const char *head = "ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B
			   "\nhost h\nboot b\ncache /c\npid 1\nrenewed 5\n";
	char text[512], buf[CLAIM_MAX];
	struct claim_rec r, back;
	cr_assert_eq(claim_parse(head, strlen(head), &r), 0);
	cr_assert_eq(r.ns_mnt + r.ns_pid, 0, "no ns line: 0 0 (an older ckptfs's)");
	cr_assert_gt(claim_format(&r, buf, sizeof(buf)), 0);
	cr_assert_null(strstr(buf, "\nns "), "no ns line when unknown");
	snprintf(text, sizeof(text), "%sns 4026531841 4026531836\n", head);
	cr_assert_eq(claim_parse(text, strlen(text), &r), 0);
	cr_assert(r.ns_mnt == 4026531841u && r.ns_pid == 4026531836u);
	int n = claim_format(&r, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, "\nns 4026531841 4026531836\n"), "%s", buf);
	cr_assert_eq(claim_parse(buf, (size_t)n, &back), 0);
	cr_assert_eq(memcmp(&r, &back, sizeof(r)), 0);
	static const char *const bad[] = { "ns 1\n", "ns 0 5\n", "ns 5 0\n", "ns x 5\n", "ns 5 -1\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "%s%s", head, bad[i]);
		cr_assert_eq(claim_parse(text, strlen(text), &back), -EINVAL, "%s", bad[i]);
	}
}

/* A shared catalog's claim (claim.h invariant 6): all its nodes hold it, on
 * any host or cache; anyone else, alone or shared, waits for its heartbeat. */
Test(claim_judge, a_shared_claim_is_ours_for_every_node_of_that_catalog)
{
	bool alive = false;
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec h = rec_of(ID_A, "n2", "b2", "/elsewhere", NOW - 100000);
	self.shared = h.shared = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_OURS);
	h = rec_of(ID_A, "n1", "b1", "/c2", NOW); /* same host, another cache */
	h.shared = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_OURS);
}

Test(claim_judge, a_shared_claim_and_a_lone_one_never_share_either_way)
{
	bool alive = true;
	struct claim_rec lone = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	struct claim_rec shared = rec_of(ID_A, "n1", "b1", "/c1", NOW - 10);
	shared.shared = true;
	/* even with the same id, host and cache: the kind differs */
	cr_assert_eq(claim_judge(&shared, &lone, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	cr_assert_eq(claim_judge(&lone, &shared, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	/* invariant 7: never by age, nor by the holder being gone */
	shared.renewed = NOW - 100000;
	alive = false;
	cr_assert_eq(claim_judge(&shared, &lone, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	lone.renewed = NOW - 100000;
	cr_assert_eq(claim_judge(&lone, &shared, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	struct claim_rec other = rec_of(ID_B, "n1", "b1", "/c1", NOW - 100000);
	other.shared = true;
	cr_assert_eq(claim_judge(&other, &shared, NOW, 60, fake_alive, &alive), CLAIM_HELD);
}

Test(claim_format, round_trips_and_ignores_unknown_fields)
{
	struct claim_rec r = rec_of(ID_A, "node1", "b-1", "/var/cache/ckptfs/x", NOW), back;
	r.fresh = false; /* not in the file */
	char buf[CLAIM_MAX];
	int n = claim_format(&r, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert_eq(claim_parse(buf, (size_t)n, &back), 0);
	cr_assert_eq(memcmp(&r, &back, sizeof(r)), 0);
	strcat(buf, "future thing\n");
	cr_assert_eq(claim_parse(buf, strlen(buf), &back), 0);
}

Test(claim_format, a_shared_claim_round_trips_and_a_lone_one_has_no_mode_line)
{
	struct claim_rec r = rec_of(ID_A, "node1", "b-1", "/var/cache/ckptfs/x", NOW), back;
	r.fresh = false; /* not in the file */
	char buf[CLAIM_MAX];
	int n = claim_format(&r, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "mode"), "the lone claim's bytes are format 1's, unchanged");
	r.shared = true;
	n = claim_format(&r, buf, sizeof(buf));
	cr_assert_not_null(strstr(buf, "\nmode shared\n"));
	cr_assert_eq(claim_parse(buf, (size_t)n, &back), 0);
	cr_assert(back.shared);
	cr_assert_eq(memcmp(&r, &back, sizeof(r)), 0);
	char *mode = strstr(buf, "mode shared");
	memcpy(mode, "mode sharex", 11);
	cr_assert_eq(claim_parse(buf, (size_t)n, &back), -EINVAL);
}

Test(claim_format, refuses_anything_malformed)
{
	static const char *const bad[] = {
		"",
		"ckptfs claim 2\n",
		"ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B "\nhost h\nboot b\ncache /c\npid 1\n",
		"ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B "\nhost h\nboot b\ncache /c\npid 1\nrenewed 5",
		"ckptfs claim 1\ncatalog ABC\ninstance " ID_B "\nhost h\nboot b\ncache /c\npid 1\nrenewed 5\n",
		"ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B "\nhost h\nboot b\ncache rel\npid 1\nrenewed 5\n",
		"ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B "\nhost h\nboot b\ncache /c\npid -1\nrenewed 5\n",
		"ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B "\nhost h\nboot b\ncache /c\npid 1\nrenewed 99999999999999999999\n",
		"ckptfs claim 1\ncatalog " ID_A "\ninstance " ID_B "\nhost h\nboot b\ncache /c\npid 99999999999\nrenewed 5\n",
		"ckptfs claim 1\nnospace\n",
	};
	struct claim_rec r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(claim_parse(bad[i], strlen(bad[i]), &r), -EINVAL, "case %zu", i);
	char big[CLAIM_MAX + 64];
	memset(big, 'x', sizeof(big));
	memcpy(big, "ckptfs claim 1\n", 15);
	cr_assert_eq(claim_parse(big, sizeof(big), &r), -EINVAL);
}

/* ---- acquisition on a directory BACKING ---- */

static struct {
	char dir[64];
	char cache[3][96];
	int lock_fd[3];
	struct backing *b;
	FILE *log;
} fx;

static void setup(void)
{
	snprintf(fx.dir, sizeof(fx.dir), "/tmp/test_claim.XXXXXX");
	cr_assert_not_null(mkdtemp(fx.dir));
	char path[160];
	snprintf(path, sizeof(path), "%s/backing", fx.dir);
	cr_assert_eq(mkdir(path, 0700), 0);
	for (int i = 0; i < 3; i++) {
		/* a cache whose daemon lives: its lock is held (here, by us) */
		char top[sizeof(fx.dir)]; /* a copy: fx.dir and fx.cache share fx (-Wrestrict) */
		memcpy(top, fx.dir, sizeof(top));
		snprintf(fx.cache[i], sizeof(fx.cache[i]), "%s/cache%d", top, i);
		cr_assert_eq(mkdir(fx.cache[i], 0700), 0);
		snprintf(path, sizeof(path), "%s/lock", fx.cache[i]);
		fx.lock_fd[i] = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		cr_assert_geq(fx.lock_fd[i], 0);
		cr_assert_eq(flock(fx.lock_fd[i], LOCK_EX | LOCK_NB), 0);
	}
	fx.log = tmpfile();
	log_setup(fx.log, LOG_LVL_INFO);
	snprintf(path, sizeof(path), "%s/backing", fx.dir);
	cr_assert_eq(backing_open(path, 0, &fx.b), 0);
}

static void teardown(void)
{
	backing_close(fx.b);
	for (int i = 0; i < 3; i++)
		close(fx.lock_fd[i]);
	log_setup(stderr, LOG_LVL_INFO);
	fclose(fx.log);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fx.dir);
	cr_assert_eq(system(cmd), 0);
}

static int read_claim(struct claim_rec *r)
{
	char buf[CLAIM_MAX];
	size_t len = 0;
	int rc = backing_get(fx.b, CLAIM_FILE, buf, sizeof(buf), &len);
	return rc ? rc : claim_parse(buf, len, r);
}

static void put_claim(const struct claim_rec *r)
{
	char buf[CLAIM_MAX];
	int n = claim_format(r, buf, sizeof(buf));
	cr_assert_eq(backing_put(fx.b, CLAIM_FILE, buf, (size_t)n), 0);
}

TestSuite(claim_acquire, .init = setup, .fini = teardown);

Test(claim_acquire, free_then_refused_naming_the_holder_then_released)
{
	struct claim *a = NULL, *b = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert_str_eq(r.cache, fx.cache[0]);
	cr_assert_eq(r.pid, (long)getpid());
	/* the age is whole seconds of the wall clock at the refusal: 0, or 1
	 * if a second began since the claim was written (more under load) */
	int64_t before = (int64_t)time(NULL);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), -EBUSY);
	int64_t after_s = (int64_t)time(NULL);
	cr_assert_null(b);
	bool named = false;
	for (int64_t ago = before - r.renewed; ago <= after_s - r.renewed && !named; ago++) {
		char want[PATH_MAX + 128];
		snprintf(want, sizeof(want), "is claimed by another catalog (host %s, cache %s, "
			 "pid %ld, renewed %lld s ago); unmount it there, or wait 60 s if that "
			 "node is gone", r.host, fx.cache[0], (long)getpid(), (long long)ago);
		named = strstr(msg, want) != NULL;
	}
	cr_assert(named, "renewed %lld s before the refusal, which says: %s",
		  (long long)(before - r.renewed), msg);
	struct claim_rec after;
	cr_assert_eq(read_claim(&after), 0);
	cr_assert_eq(memcmp(&r, &after, sizeof(r)), 0, "the refused acquire changed the claim");
	claim_end(a, true);
	cr_assert_eq(read_claim(&r), 0, "released, the claim stays (invariant 8)");
	cr_assert(r.released);
	cr_assert_str_eq(r.catalog, ID_A, "it names the last catalog that wrote BACKING");
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(!r.released);
	cr_assert_str_eq(r.catalog, ID_B);
	claim_end(b, true);
}

Test(claim_acquire, same_catalog_again_is_ours)
{
	struct claim *a = NULL, *again = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0);
	claim_end(a, false); /* as after kill -9: the claim stays */
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &again, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(again, true);
}

Test(claim_acquire, a_gone_holder_on_this_host_is_taken_over)
{
	struct claim *a = NULL, *b = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0);
	claim_end(a, false);
	close(fx.lock_fd[0]); /* its daemon is gone */
	fx.lock_fd[0] = -1;
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B);
	claim_end(b, true);
}

Test(claim_acquire, another_hosts_claim_fresh_is_refused_stale_is_taken_over)
{
	struct claim *c = NULL;
	char msg[PATH_MAX + 512];
	struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL) - 5);
	put_claim(&other);
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &c, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "host node-elsewhere, cache /var/cache/x, pid 1234"), "%s", msg);
	other.renewed = time(NULL) - 61;
	put_claim(&other);
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &c, msg, sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	/* a holder that lost its claim does not remove the new one's */
	put_claim(&other);
	claim_end(c, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B);
}

Test(claim_acquire, nodes_of_one_shared_catalog_hold_it_together_and_nobody_else)
{
	struct claim *a = NULL, *b = NULL, *lone = NULL, *other = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, true, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(claim_acquire(fx.b, ID_A, true, true, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.shared);
	cr_assert_str_eq(r.catalog, ID_A);
	/* a lone catalog, even of the same id, and another shared one: refused */
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[2], 60, &lone, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "belongs to the shared catalog " ID_A), "%s", msg);
	cr_assert_not_null(strstr(msg, "mount it with -o meta=URL"), "%s", msg);
	cr_assert_eq(claim_acquire(fx.b, ID_B, true, true, fx.cache[2], 60, &other, msg, sizeof(msg)), -EBUSY);
	/* renewals by either node keep it; an unmount never removes it */
	cr_assert_eq(claim_start(a), 0);
	cr_assert_eq(claim_start(b), 0);
	claim_end(a, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.shared);
	claim_end(b, true);
	cr_assert_eq(read_claim(&r), 0, "the last node leaves it in place");
	/* however old, no lone catalog takes it over (invariant 7) */
	r.renewed = time(NULL) - 100000;
	put_claim(&r);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[2], 60, &lone, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "never takes it over by age"), "%s", msg);
	cr_assert_not_null(strstr(msg, "by hand"), "%s", msg);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.shared, "the shared claim is still there");
	/* removed by hand (the decision), a lone catalog takes BACKING, and then
	 * no shared node does, even once the lone claim is old */
	cr_assert_eq(backing_remove(fx.b, CLAIM_FILE), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[2], 60, &lone, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(!r.shared);
	claim_end(lone, false);
	r.renewed = time(NULL) - 100000;
	put_claim(&r);
	cr_assert_eq(claim_acquire(fx.b, ID_A, true, true, fx.cache[0], 60, &a, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "belongs to a catalog of one node, not shared"), "%s", msg);
}

Test(claim_acquire, unparsable_claim_is_never_taken_by_guess)
{
	struct claim *c = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(backing_put(fx.b, CLAIM_FILE, "garbage\n", 8), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &c, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "does not parse"), "%s", msg);
}

struct racer {
	int idx;
	pthread_barrier_t *go;
	struct claim *c;
	int rc;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	char msg[PATH_MAX + 512], id[CLAIM_ID_LEN + 1];
	memset(id, 'a' + r->idx, CLAIM_ID_LEN);
	id[CLAIM_ID_LEN] = '\0';
	pthread_barrier_wait(r->go);
	r->rc = claim_acquire(fx.b, id, false, true, fx.cache[r->idx], 60, &r->c, msg, sizeof(msg));
	return NULL;
}

Test(claim_acquire, of_racing_takers_of_a_stale_or_absent_claim_exactly_one_wins)
{
	for (int round = 0; round < 40; round++) {
		if (round % 2) {
			struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x",
							time(NULL) - 1000);
			put_claim(&other);
		}
		pthread_barrier_t go;
		pthread_barrier_init(&go, NULL, 3);
		struct racer r[3];
		pthread_t t[3];
		for (int i = 0; i < 3; i++) {
			r[i] = (struct racer){ .idx = i, .go = &go };
			cr_assert_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
		}
		int won = 0;
		for (int i = 0; i < 3; i++) {
			pthread_join(t[i], NULL);
			if (r[i].rc == 0)
				won++;
			else
				cr_assert(r[i].rc == -EBUSY || r[i].rc == -EAGAIN, "rc %d", r[i].rc);
		}
		pthread_barrier_destroy(&go);
		cr_assert_eq(won, 1, "round %d: %d winners", round, won);
		for (int i = 0; i < 3; i++)
			claim_end(r[i].c, true);
		struct claim_rec left;
		cr_assert_eq(read_claim(&left), 0, "round %d", round);
		cr_assert(left.released, "round %d: the winner released it", round);
	}
}

Test(claim_acquire, backing_put_new_is_exclusive)
{
	cr_assert_eq(backing_put_new(fx.b, "x/one", "a", 1), 0);
	cr_assert_eq(backing_put_new(fx.b, "x/one", "b", 1), -EEXIST);
	char buf[4];
	size_t len = 0;
	cr_assert_eq(backing_get(fx.b, "x/one", buf, sizeof(buf), &len), 0);
	cr_assert_eq(len, 1);
	cr_assert_eq(buf[0], 'a');
	cr_assert_eq(backing_move(fx.b, "x/one", "x/two"), 0);
	cr_assert_eq(backing_move(fx.b, "x/one", "x/three"), -ENOENT);
}

/* Invariant 8: a catalog that held a claim before takes a released or stale
 * one only if it is its own; another catalog wrote BACKING meanwhile. */
Test(claim_judge, a_catalog_that_held_a_claim_is_behind_another_ones_released_or_stale_claim)
{
	bool alive = false;
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	self.fresh = false;
	struct claim_rec h = rec_of(ID_B, "n2", "b2", "/c2", NOW);
	h.released = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	h.released = false;
	h.renewed = NOW - 61;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	h.renewed = NOW; /* still held: held, whoever we are */
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_HELD);
	/* our own catalog's released or stale claim: ours to take */
	struct claim_rec own = rec_of(ID_A, "n2", "b2", "/c2", NOW);
	own.released = true;
	cr_assert_eq(claim_judge(&own, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	/* a fresh catalog (new or rebuilt) takes another's released claim */
	self.fresh = true;
	h.released = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
}

Test(claim_acquire, a_catalog_behind_is_refused_naming_the_last_writer)
{
	struct claim *a = NULL, *b = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	/* B, fresh, takes it and writes; A comes back */
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	char cmd[PATH_MAX]; /* invariant 10: the aside went once B's claim was there */
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls %s/backing/tmp | grep '^claim\\.')\"", fx.dir);
	cr_assert_eq(system(cmd), 0, "an aside was left in tmp/");
	claim_end(b, true);
	a = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, false, fx.cache[0], 60, &a, msg, sizeof(msg)), -EBUSY);
	cr_assert_null(a);
	cr_assert_not_null(strstr(msg, "was written by another catalog"), "%s", msg);
	cr_assert_not_null(strstr(msg, fx.cache[1]), "it names the other cache: %s", msg);
	cr_assert_not_null(strstr(msg, "mount with an empty cache"), "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B, "the refused acquire changed nothing");
	cr_assert(r.released);
	/* B comes back: its own */
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, false, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(b, true);
}

/* Invariant 10: a take-over that died after moving the claim aside (or a
 * mount reading between the move and the create) finds no claim, but the
 * aside: judged as the claim, so a catalog behind it is still refused. */
Test(claim_acquire, a_claim_absent_while_an_aside_exists_is_judged_by_the_aside)
{
	struct claim *a = NULL, *b = NULL, *c = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true); /* released: A wrote BACKING last */
	const char *aside = "tmp/claim." ID_B ".0";
	cr_assert_eq(backing_move(fx.b, CLAIM_FILE, aside), 0); /* a taker's move, then it died */
	/* B held a claim before (not fresh): behind A, refused though the claim is absent */
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, false, fx.cache[1], 60, &b, msg, sizeof(msg)), -EBUSY);
	cr_assert_null(b);
	cr_assert_not_null(strstr(msg, "was written by another catalog"), "%s", msg);
	cr_assert_not_null(strstr(msg, fx.cache[0]), "it names A's cache: %s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "the refusal created nothing");
	/* an aside of a live holder (another host, renewed now) is held */
	struct claim_rec live = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
	char buf[CLAIM_MAX];
	int n = claim_format(&live, buf, sizeof(buf));
	cr_assert_eq(backing_put(fx.b, "tmp/claim." ID_A ".3", buf, (size_t)n), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[2], 60, &c, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "host node-elsewhere"), "the newest aside is judged: %s", msg);
	cr_assert_eq(backing_remove(fx.b, "tmp/claim." ID_A ".3"), 0);
	/* A, its own catalog: takes it; the claim exists and the aside is gone */
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, false, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	uint64_t size = 0;
	cr_assert_eq(backing_stat(fx.b, aside, &size), -ENOENT, "the judged aside is removed");
	claim_end(a, true);
}

/* Invariant 9: a holder whose claim another catalog took is fenced at its
 * next renewal, and releases nothing. */
Test(claim_acquire, a_holder_whose_claim_was_taken_is_fenced)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert(claim_may_write(a));
	struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
	put_claim(&other);
	cr_assert_eq(claim_start(a), 0); /* its first renewal, at once */
	cr_assert(!claim_may_write(a), "a holder whose claim is another's may still write");
	claim_end(a, true);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B, "the fenced holder wrote the claim");
	cr_assert(!r.released);
	cr_assert(claim_may_write(NULL), "no claim: nothing to fence");
}

/* Invariant 9: no renewal succeeded for the timeout less an eighth (here
 * 1 s: 875 ms): fenced, for good; it renews and releases nothing. */
/* Claim asides left in BACKING's tmp/ (invariant 10). */
static int system_count_tmp_asides(void)
{
	char cmd[PATH_MAX];
	snprintf(cmd, sizeof(cmd), "exit $(ls %s/backing/tmp 2>/dev/null | grep -c '^claim\\.')",
		 fx.dir);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Invariant 9: past its deadline (a BACKING that did not answer, a stopped
 * process) a holder writes nothing — not even its claim in place — until a
 * renewal takes the claim anew as a taker would; it is not lost for that. */
Test(claim_acquire, a_holder_past_its_deadline_writes_nothing_until_it_takes_its_claim_anew)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 1, &a, msg, sizeof(msg)), 0, "%s", msg);
	char before[CLAIM_MAX], after[CLAIM_MAX];
	size_t lb = 0, la = 0;
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, before, sizeof(before), &lb), 0);
	struct timespec nap = { 1, 100 * 1000 * 1000 }; /* past the deadline, whatever the load */
	nanosleep(&nap, NULL);
	cr_assert(!claim_may_write(a), "a holder past its deadline may write");
	cr_assert(!claim_may_write(a));
	cr_assert(!claim_lost(a), "unsure is not lost: nothing says another took the claim");
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, after, sizeof(after), &la), 0);
	cr_assert(lb == la && memcmp(before, after, lb) == 0, "an unsure holder rewrote the claim");
	cr_assert_eq(claim_start(a), 0); /* its first renewal: taken anew, still ours */
	cr_assert(claim_may_write(a), "the claim taken anew, the holder is sure again");
	cr_assert(!claim_lost(a));
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert_str_eq(r.cache, fx.cache[0]);
	cr_assert_eq(system_count_tmp_asides(), 0, "the aside of the take was left in tmp/");
	claim_end(a, true);
	fflush(fx.log);
	char cmd[PATH_MAX];
	snprintf(cmd, sizeof(cmd), "test \"$(grep -c 'was not renewed for 1 s' /proc/%d/fd/%d)\" = 1"
		 " && grep -q 'renewed again, still ours' /proc/%d/fd/%d", (int)getpid(),
		 fileno(fx.log), (int)getpid(), fileno(fx.log));
	cr_assert_eq(system(cmd), 0, "the wait is logged once, and its end");
}

/* Invariant 9: past its deadline, a holder whose claim another catalog took
 * meanwhile (judged stale by its heartbeat) is lost: it writes nothing more,
 * and the taker's claim stands. */
Test(claim_acquire, a_holder_past_its_deadline_whose_claim_was_taken_meanwhile_is_lost)
{
	struct claim *a = NULL, *b = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 1, &a, msg, sizeof(msg)), 0, "%s", msg);
	struct timespec nap = { 2, 100 * 1000 * 1000 }; /* past A's deadline, its heartbeat stale */
	nanosleep(&nap, NULL);
	cr_assert(!claim_may_write(a));
	/* B judges A's daemon gone (its cache's lock gone, as a stopped VM's
	 * cache seen from elsewhere would be judged by its heartbeat): taken */
	char lock[PATH_MAX];
	snprintf(lock, sizeof(lock), "%s/lock", fx.cache[0]);
	cr_assert_eq(unlink(lock), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 1, &b, msg, sizeof(msg)), 0,
		     "the taker: %s", msg);
	cr_assert_eq(claim_start(a), 0); /* A's renewal finds B's claim */
	cr_assert(claim_lost(a), "a holder whose claim was taken while it was unsure is not lost");
	cr_assert(!claim_may_write(a));
	claim_end(a, true);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B, "the lost holder wrote the claim");
	claim_end(b, true);
}

/* A rebuild that failed gives the claim back as it found it (claim_abandon),
 * so the catalog that held it is not made behind by none. */
/* A took BACKING and released it (its claim's bytes into before, *lb,
 * CLAIM_MAX); then B, a fresh catalog in cache 1, took it: B's claim. */
static struct claim *a_released_then_b_took(char *before, size_t *lb)
{
	struct claim *a = NULL, *b = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	*lb = 0;
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, before, CLAIM_MAX, lb), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	return b;
}

Test(claim_acquire, an_abandoned_claim_is_given_back)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	char before[CLAIM_MAX], after[CLAIM_MAX];
	size_t lb = 0, la = 0;
	struct claim *b = a_released_then_b_took(before, &lb);
	cr_assert_eq(claim_start(b), 0);
	claim_abandon(b);
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, after, sizeof(after), &la), 0);
	cr_assert(lb == la && memcmp(before, after, lb) == 0, "A's released claim is not back");
	a = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, false, fx.cache[0], 60, &a, msg, sizeof(msg)), 0,
		     "A is not behind: %s", msg);
	claim_end(a, false);
	/* none before: none after */
	cr_assert_eq(backing_remove(fx.b, CLAIM_FILE), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), 0, "%s", msg);
	claim_abandon(b);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT);
}

/* ---- renewal against a taker (invariants 2, 9, 10) ---- */

static struct {
	const char *point; /* where the hook acts */
	int fail;	   /* -errno to inject there, once */
	bool taker;	   /* at "renew-read": another catalog's claim replaces ours */
	int calls;
} hk;

static int hook(struct claim *c, const char *point)
{
	(void)c;
	if (!hk.point || strcmp(point, hk.point) != 0)
		return 0;
	hk.calls++;
	if (hk.taker && hk.calls == 1) {
		/* a taker that judged our claim stale while our renewal stalled
		 * after its read: its claim is on BACKING now */
		struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
		put_claim(&other);
	}
	return hk.calls == 1 ? hk.fail : 0;
}

static void hook_fini(void)
{
	claim_test_hook = NULL;
	memset(&hk, 0, sizeof(hk));
	teardown();
}

static int note_one_aside(void *arg, const char *name)
{
	if (strncmp(name, "claim.", 6) == 0)
		snprintf(arg, 160, "tmp/%s", name);
	return 0;
}

/* The hook's taker's claim (node-elsewhere) moved by a renewal or release
 * that never judged it: absent at CLAIM_FILE, standing in the one aside
 * (invariants 2, 10), never put back nor put over. */
static void taker_stands_aside(void)
{
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "a claim was made over or in place of the taker's");
	cr_assert_eq(system_count_tmp_asides(), 1, "not one aside in tmp/");
	char name[160] = "", buf[CLAIM_MAX];
	size_t len = 0;
	cr_assert_eq(backing_list(fx.b, "tmp", note_one_aside, name), 0);
	cr_assert_eq(backing_get(fx.b, name, buf, sizeof(buf), &len), 0, "%s", name);
	cr_assert_eq(claim_parse(buf, len, &r), 0);
	cr_assert_str_eq(r.catalog, ID_B, "the aside is not the taker's claim");
	cr_assert_str_eq(r.host, "node-elsewhere");
	cr_assert(!r.released, "the taker's claim was marked released");
}

TestSuite(claim_renew, .init = setup, .fini = hook_fini);

/* A's claim, with a taker armed to act at point. */
static struct claim *held_with_taker_at(const char *point)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	hk.point = point;
	hk.taker = true;
	claim_test_hook = hook;
	return a;
}

/* F1: a renewal whose read found the claim ours, then stalled while a taker
 * made its own claim, must not put over the taker's claim: it is lost, and
 * the taker's bytes stand. */
Test(claim_renew, a_renewal_stalled_after_its_read_never_overwrites_a_takers_claim)
{
	struct claim *a = held_with_taker_at("renew-read");
	cr_assert_eq(claim_start(a), 0); /* its first renewal: the taker acts after its read */
	cr_assert_eq(hk.calls, 1);
	struct claim_rec r;
	cr_assert(claim_lost(a), "the holder whose renewal met a taker is not lost");
	cr_assert(!claim_may_write(a));
	taker_stands_aside(); /* its move took the taker's claim: left aside (2, 10) */
	claim_end(a, true);
	taker_stands_aside();
	(void)r;
}

/* F2: a renewal that moved the claim aside and then failed to create it
 * anew leaves the claim absent and the aside, our bytes: the next renewal
 * takes it back (nobody else holds it), and removes the aside. */
Test(claim_renew, a_claim_left_aside_by_a_failed_create_is_taken_back)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	/* timeout 1 s, slept past: a renewal then takes the claim anew (before
	 * the fix, only such a renewal did) */
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 1, &a, msg, sizeof(msg)), 0, "%s", msg);
	struct timespec nap = { 1, 100 * 1000 * 1000 };
	nanosleep(&nap, NULL);
	hk.point = "retake-create";
	hk.fail = -EIO;
	claim_test_hook = hook;
	claim_test_renew(a); /* no thread: the renewals are the test's */
	cr_assert_eq(hk.calls, 1);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "the create did not fail");
	cr_assert_eq(system_count_tmp_asides(), 1, "the aside, our bytes, stands for the claim");
	cr_assert(!claim_lost(a), "a failed create is not a lost claim");
	claim_test_renew(a);
	cr_assert(!claim_lost(a), "the claim only we hold, left aside, fenced its holder");
	cr_assert(claim_may_write(a), "the claim taken back, the holder is sure again");
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert_str_eq(r.cache, fx.cache[0]);
	cr_assert_eq(system_count_tmp_asides(), 0, "the aside was left once the claim existed");
	claim_end(a, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.released);
}

/* F10 (invariant 10): a taker reads every aside, however many, so the
 * newest is never missed: here a live holder's, in the aside BACKING lists
 * last of 80 (the reader of at most 64 asides judged the stale ones). */
static struct {
	char last[128];
} lx;

static int note_last_aside(void *arg, const char *name)
{
	(void)arg;
	if (strncmp(name, "claim.", 6) == 0)
		snprintf(lx.last, sizeof(lx.last), "%s", name);
	return 0;
}

Test(claim_acquire, the_newest_of_more_asides_than_a_page_is_judged)
{
	struct claim *b = NULL;
	char msg[PATH_MAX + 512];
	struct claim_rec old = rec_of(ID_A, "node-gone", "boot-y", "/var/cache/y", time(NULL) - 600);
	old.released = true;
	char buf[CLAIM_MAX];
	int n = claim_format(&old, buf, sizeof(buf));
	for (int i = 0; i < 80; i++) {
		char name[96];
		snprintf(name, sizeof(name), "tmp/claim." ID_B ".%d", i);
		cr_assert_eq(backing_put(fx.b, name, buf, (size_t)n), 0);
	}
	cr_assert_eq(backing_list(fx.b, "tmp", note_last_aside, NULL), 0);
	cr_assert(lx.last[0]);
	/* the live holder's bytes, written in place: the listing's order stays */
	struct claim_rec live = rec_of(ID_A, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
	n = claim_format(&live, buf, sizeof(buf));
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/backing/tmp/%s", fx.dir, lx.last);
	int fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, buf, (size_t)n), n);
	close(fd);
	cr_assert_eq(claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &b, msg, sizeof(msg)), -EBUSY,
		     "the live holder's aside was missed: taken");
	cr_assert_not_null(strstr(msg, "host node-elsewhere"), "the newest aside is judged: %s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "the refusal created nothing");
}

/* As F1, for the release at a clean stop: a release whose read found the
 * claim ours, then stalled while a taker made its own claim, must not put
 * its "released" claim over the taker's. */
Test(claim_renew, a_release_stalled_after_its_read_never_overwrites_a_takers_claim)
{
	struct claim *a = held_with_taker_at("release-read");
	claim_end(a, true);
	cr_assert_eq(hk.calls, 1);
	taker_stands_aside(); /* the release put nothing over it: left aside (2, 10) */
}

/* ---- a taker's create in a renewal's gap (invariant 11) ---- */

/* Steps of a two-thread interleaving: a taker B (its own thread) and a
 * holder A's renewal (its own thread), each stopped at hook points until
 * the test lets it on. Waits are bounded only so that code without those
 * points fails instead of hanging. */
enum { G_B_JUDGED, G_B_CREATE, G_B_CREATED, G_B_CHECK, G_A_MOVED, G_A_CREATE, G_A_WAITING,
       G_A_POLL, G_STEPS };
static struct {
	sem_t step[G_STEPS];
	struct claim *a, *b;
	int b_rc;
	char b_msg[PATH_MAX + 512];
	int a_waits; /* "renew-wait" calls: the holder's tries after EEXIST */
} gx;
static __thread char g_role; /* 'A': the holder's renewal, 'B': the taker */

static void g_post(int i)
{
	sem_post(&gx.step[i]);
}

static bool g_wait(int i)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	while (sem_timedwait(&gx.step[i], &until) != 0)
		if (errno != EINTR)
			return false;
	return true;
}

static int gap_hook(struct claim *c, const char *point)
{
	(void)c;
	if (g_role == 'B' && strcmp(point, "take-create") == 0) {
		g_post(G_B_JUDGED); /* judged: the claim absent, no aside */
		g_wait(G_B_CREATE);
	} else if (g_role == 'B' && strcmp(point, "take-check") == 0 && !gx.b) {
		g_post(G_B_CREATED);
		g_wait(G_B_CHECK);
	} else if (g_role == 'A' && strcmp(point, "retake-create") == 0) {
		g_post(G_A_MOVED); /* our claim aside, not yet made anew */
		g_wait(G_A_CREATE);
	} else if (g_role == 'A' && strcmp(point, "renew-wait") == 0 && gx.a_waits++ == 0) {
		g_post(G_A_WAITING); /* our create met B's claim */
		g_wait(G_A_POLL);
	}
	return 0;
}

static void *gap_taker(void *arg)
{
	(void)arg;
	g_role = 'B';
	gx.b_rc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &gx.b, gx.b_msg,
				sizeof(gx.b_msg));
	return NULL;
}

static void *gap_holder(void *arg)
{
	(void)arg;
	g_role = 'A';
	claim_test_renew(gx.a);
	return NULL;
}

static void gap_fini(void)
{
	claim_test_hook = NULL;
	for (int i = 0; i < G_STEPS; i++)
		sem_destroy(&gx.step[i]);
	teardown();
}

TestSuite(claim_gap, .init = setup, .fini = gap_fini);

/* Up to the point both creates were made: B judged the claim absent (no
 * aside), then A took it and A's first renewal moved it aside; B's create
 * landed in that gap (0), then A's answered EEXIST. */
static void gap_both_created(pthread_t *tb, pthread_t *ta)
{
	memset(&gx, 0, sizeof(gx));
	for (int i = 0; i < G_STEPS; i++)
		sem_init(&gx.step[i], 0, 0);
	claim_test_hook = gap_hook;
	cr_assert_eq(pthread_create(tb, NULL, gap_taker, NULL), 0);
	cr_assert(g_wait(G_B_JUDGED), "the taker never reached its create");
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &gx.a, msg, sizeof(msg)), 0,
		     "%s", msg);
	cr_assert_eq(pthread_create(ta, NULL, gap_holder, NULL), 0);
	cr_assert(g_wait(G_A_MOVED), "the renewal never moved its claim aside");
	g_post(G_B_CREATE);
	cr_assert(g_wait(G_B_CREATED), "the taker's create in the gap did not answer 0 (or no check)");
	g_post(G_A_CREATE);
	cr_assert(g_wait(G_A_WAITING), "the holder's create meeting the taker's claim did not wait");
}

/* H then T: the taker sees the holder's aside it never judged and gives its
 * claim back; the holder's next try makes its claim. Before: the taker held
 * BACKING on a judgment older than the holder's claim, the holder fenced. */
Test(claim_gap, a_taker_whose_create_lands_in_a_renewals_gap_backs_off_and_the_holder_keeps)
{
	pthread_t tb, ta;
	gap_both_created(&tb, &ta);
	g_post(G_B_CHECK);
	pthread_join(tb, NULL);
	g_post(G_A_POLL);
	pthread_join(ta, NULL);
	cr_assert_eq(gx.b_rc, -EBUSY, "the taker's acquisition: %d (%s)", gx.b_rc, gx.b_msg);
	cr_assert_null(gx.b);
	cr_assert_not_null(strstr(gx.b_msg, fx.cache[0]), "the refusal names the holder: %s", gx.b_msg);
	cr_assert(!claim_lost(gx.a), "the holder whose renewal met the gap-taker was fenced");
	cr_assert(claim_may_write(gx.a));
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A, "the claim is not the holder's");
	cr_assert_str_eq(r.cache, fx.cache[0]);
	cr_assert_eq(system_count_tmp_asides(), 0, "an aside was left in tmp/");
	claim_end(gx.a, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert(r.released);
}

/* The taker stalls before its check while the holder tries past its bound:
 * the holder is fenced and leaves its aside; the taker, seeing it, backs
 * off. Nobody holds the claim (a liveness loss), never both. */
Test(claim_gap, a_taker_stalled_past_the_holders_wait_backs_off_and_nobody_holds_it)
{
	pthread_t tb, ta;
	gap_both_created(&tb, &ta);
	g_post(G_A_POLL); /* the holder's other tries meet the taker's claim */
	pthread_join(ta, NULL);
	cr_assert(claim_lost(gx.a), "the holder whose claim is another's after its wait is not fenced");
	cr_assert_gt(gx.a_waits, 1, "the holder did not try again");
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B, "the taker's claim is not there while it stalls");
	cr_assert_eq(system_count_tmp_asides(), 1, "the fenced holder's aside is not left");
	g_post(G_B_CHECK);
	pthread_join(tb, NULL);
	cr_assert_eq(gx.b_rc, -EBUSY, "the taker's acquisition: %d (%s)", gx.b_rc, gx.b_msg);
	cr_assert_null(gx.b, "the taker holds BACKING on a judgment older than the holder's renewal");
	cr_assert_eq(read_claim(&r), -ENOENT, "a claim stands: nobody should hold it");
	cr_assert_eq(system_count_tmp_asides(), 1, "the holder's aside, its evidence, is gone");
	claim_end(gx.a, true);
	cr_assert_eq(read_claim(&r), -ENOENT, "the fenced holder released");
}

/* ---- invariants 12 (takes) and 13 (stand-in): review 32B F1, F3 ---- */

#define INST_1 "11111111111111111111111111111111"
#define INST_2 "22222222222222222222222222222222"
#define INST_R "33333333333333333333333333333333"

static struct claim_ledger ledger_of(const char *last, const char *next, uint64_t take)
{
	struct claim_ledger l;
	memset(&l, 0, sizeof(l));
	snprintf(l.last, sizeof(l.last), "%s", last);
	snprintf(l.next, sizeof(l.next), "%s", next);
	l.known = last[0] || next[0];
	l.take = take;
	return l;
}

/* Invariant 12: a copy of a catalog has its id; only a claim of one of
 * this catalog's own takes is its own. */
Test(claim_judge, a_claim_of_another_copys_take_of_our_catalog_is_behind)
{
	bool alive = false;
	struct claim_ledger l = ledger_of(INST_1, "", 1);
	struct claim_rec self = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	self.fresh = false;
	self.ledger = &l;
	struct claim_rec h = rec_of(ID_A, "n1", "b1", "/c2", NOW); /* the copy, at /c2 */
	h.released = true;
	h.take = 2;
	snprintf(h.instance, sizeof(h.instance), "%s", INST_2);
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	/* the same cache path (a backup restored in place), killed: not ours */
	snprintf(h.cache, sizeof(h.cache), "/c1");
	h.released = false;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	/* our own last take: ours, as before */
	snprintf(h.instance, sizeof(h.instance), "%s", INST_1);
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_OURS);
	h.released = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	/* a take begun (recorded before the create), its record made never */
	snprintf(h.instance, sizeof(h.instance), "%s", INST_2);
	l = ledger_of(INST_1, INST_2, 2);
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	/* a catalog with no record of takes (an older ckptfs's): a claim of an
	 * older ckptfs (no take line) by catalog id, one with it is a copy's */
	l = ledger_of("", "", 0);
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	h.take = 0;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	/* a catalog with records judges by them, whatever wrote the claim */
	l = ledger_of(INST_1, "", 1);
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	/* a fresh catalog (new, rebuilt) takes it */
	self.fresh = true;
	cr_assert_eq(claim_judge(&h, &self, NOW, 60, fake_alive, &alive), CLAIM_STALE);
}

/* Invariant 13: a rebuild's claim counts as the claim it replaced. */
Test(claim_judge, a_stand_ins_claim_counts_as_its_own_catalogs_and_the_one_it_replaced)
{
	bool alive = false;
	struct claim_ledger la = ledger_of(INST_1, "", 1), lb = ledger_of(INST_R, "", 1);
	struct claim_rec a = rec_of(ID_A, "n1", "b1", "/c1", NOW);
	a.fresh = false;
	a.ledger = &la;
	struct claim_rec h = rec_of(ID_B, "n1", "b1", "/c1", NOW); /* rebuild of /c1, killed */
	snprintf(h.instance, sizeof(h.instance), "%s", INST_R);
	h.take = 1;
	snprintf(h.rep_catalog, sizeof(h.rep_catalog), "%s", ID_A);
	snprintf(h.rep_instance, sizeof(h.rep_instance), "%s", INST_1);
	h.rep_take = 1;
	cr_assert_eq(claim_judge(&h, &a, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	struct claim_rec b = rec_of(ID_B, "n1", "b1", "/c1", NOW);
	b.fresh = false;
	b.ledger = &lb;
	cr_assert_eq(claim_judge(&h, &b, NOW, 60, fake_alive, &alive), CLAIM_OURS);
	/* the replaced take was not A's last: A is behind as before */
	la = ledger_of(INST_2, "", 2);
	cr_assert_eq(claim_judge(&h, &a, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	/* a stand-in that ended (released) stands for nobody but itself */
	h.released = true;
	la = ledger_of(INST_1, "", 1);
	cr_assert_eq(claim_judge(&h, &a, NOW, 60, fake_alive, &alive), CLAIM_BEHIND);
	cr_assert_eq(claim_judge(&h, &b, NOW, 60, fake_alive, &alive), CLAIM_STALE);
	h.released = false;
	/* the rebuild alive: held */
	alive = true;
	snprintf(h.cache, sizeof(h.cache), "/c9");
	cr_assert_eq(claim_judge(&h, &b, NOW, 60, fake_alive, &alive), CLAIM_HELD);
}

Test(claim_format, take_and_replaces_round_trip_and_bad_ones_are_refused)
{
	struct claim_rec r = rec_of(ID_A, "n1", "b1", "/c1", NOW), back;
	r.fresh = false;
	r.take = 7;
	snprintf(r.rep_catalog, sizeof(r.rep_catalog), "%s", ID_B);
	snprintf(r.rep_instance, sizeof(r.rep_instance), "%s", INST_1);
	r.rep_take = 3;
	char buf[CLAIM_MAX];
	int n = claim_format(&r, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert_not_null(strstr(buf, "\ntake 7\nreplaces " ID_B " " INST_1 " 3\n"), "%s", buf);
	cr_assert_eq(claim_parse(buf, (size_t)n, &back), 0);
	cr_assert_eq(back.take, 7);
	cr_assert_str_eq(back.rep_catalog, ID_B);
	cr_assert_str_eq(back.rep_instance, INST_1);
	cr_assert_eq(back.rep_take, 3);
	const char *bad[] = { "take 0\n", "take x\n", "replaces " ID_B " 3\n",
			      "replaces " ID_B " zz 3\n", "replaces " ID_B " " INST_1 " -1\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct claim_rec one = rec_of(ID_A, "n1", "b1", "/c1", NOW);
		int m = claim_format(&one, buf, sizeof(buf));
		snprintf(buf + m, sizeof(buf) - (size_t)m, "%s", bad[i]);
		cr_assert_eq(claim_parse(buf, strlen(buf), &back), -EINVAL, "accepted %s", bad[i]);
	}
}

/* A fake catalog's ledger: note records as cat_claim_ledger's does. */
struct book {
	struct claim_ledger led;
	int fail; /* 1: the begun note fails; 2: the made one */
};

static int book_note(void *arg, bool done, uint64_t take, const char *instance)
{
	struct book *k = arg;
	if (k->fail == (done ? 2 : 1))
		return -EIO;
	snprintf(done ? k->led.last : k->led.next, CLAIM_ID_LEN + 1, "%s", instance);
	k->led.known = true;
	if (take > k->led.take)
		k->led.take = take;
	return 0;
}

static void book_init(struct book *k)
{
	memset(k, 0, sizeof(*k));
	k->led.note = book_note;
	k->led.arg = k;
}

static int take_led(struct book *k, bool fresh, int cache, struct claim **out, char *msg,
		    size_t size)
{
	struct claim_ledger led = k->led; /* as read from the catalog at each take */
	return claim_acquire_led(fx.b, ID_A, false, fresh, &led, fx.cache[cache], 60, out, msg, size);
}

/* Review 32B F1: a copy of a cache (cp -a), used after the original took
 * BACKING again, is refused: its deletions would remove chunks the
 * original's later saves share. */
Test(claim_acquire, a_stale_copy_of_a_catalog_is_refused_after_the_original_took_backing_again)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	struct book orig, copy;
	book_init(&orig);
	cr_assert_eq(take_led(&orig, true, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	cr_assert_eq(orig.led.take, 1);
	cr_assert_str_neq(orig.led.last, "");
	copy = orig; /* cp -a CACHE COPY */
	copy.led.arg = &copy;
	cr_assert_eq(take_led(&orig, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_eq(r.take, 2);
	cr_assert_str_eq(r.instance, orig.led.last);
	claim_end(a, true);
	a = NULL;
	cr_assert_eq(take_led(&copy, false, 1, &a, msg, sizeof(msg)), -EBUSY);
	cr_assert_null(a);
	cr_assert_not_null(strstr(msg, "another copy of this catalog"), "%s", msg);
	cr_assert_not_null(strstr(msg, "mount with an empty cache"), "%s", msg);
	/* at the original's path too (a backup restored in place) */
	cr_assert_eq(take_led(&copy, false, 0, &a, msg, sizeof(msg)), -EBUSY);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.instance, orig.led.last, "the refused acquire changed the claim");
	cr_assert_eq(take_led(&orig, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
}

static int fail_create(struct claim *c, const char *point)
{
	(void)c;
	return strcmp(point, "take-create") == 0 ? -EIO : 0;
}

/* Invariant 12: a crash between the take's record and the claim's create,
 * either side of it, leaves a catalog that still takes its claim. */
Test(claim_acquire, a_take_interrupted_between_its_records_and_the_create_is_still_ours)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	struct book k;
	book_init(&k);
	cr_assert_eq(take_led(&k, true, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	char last[CLAIM_ID_LEN + 1];
	snprintf(last, sizeof(last), "%s", k.led.last);
	/* begun recorded, the create never made */
	claim_test_hook = fail_create;
	cr_assert_neq(take_led(&k, false, 0, &a, msg, sizeof(msg)), 0);
	claim_test_hook = NULL;
	cr_assert_str_neq(k.led.next, last, "the begun take was not recorded");
	cr_assert_str_eq(k.led.last, last);
	cr_assert_eq(take_led(&k, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	/* the create made, the made record not */
	k.fail = 2;
	a = NULL;
	cr_assert_eq(take_led(&k, false, 0, &a, msg, sizeof(msg)), -EIO);
	cr_assert_null(a);
	cr_assert_not_null(strstr(msg, "cannot record its take"), "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.instance, k.led.next, "the claim is not the begun take's");
	k.fail = 0;
	cr_assert_eq(take_led(&k, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	/* a begun note that fails takes nothing */
	k.fail = 1;
	a = NULL;
	cr_assert_eq(take_led(&k, false, 0, &a, msg, sizeof(msg)), -EIO);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.released, "a take not recorded changed the claim");
}

/* Review 32B F3: a rebuild killed after its claim (a stand-in) leaves the
 * catalog it was to replace mountable; a rebuild that ended leaves its
 * new catalog's. */
Test(claim_acquire, a_rebuilds_claim_stands_in_for_the_claim_it_replaced)
{
	struct claim *a = NULL, *rb = NULL;
	char msg[PATH_MAX + 512];
	struct book old, neu;
	book_init(&old);
	book_init(&neu);
	cr_assert_eq(take_led(&old, true, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	neu.led.stand_in = true;
	struct claim_ledger led = neu.led;
	cr_assert_eq(claim_acquire_led(fx.b, ID_B, false, true, &led, fx.cache[0], 60, &rb, msg,
				       sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.rep_catalog, ID_A);
	cr_assert_str_eq(r.rep_instance, old.led.last);
	claim_end(rb, false); /* kill -9 before the swap */
	struct book again; /* a second rebuild, killed too: it stands for the same */
	book_init(&again);
	again.led.stand_in = true;
	led = again.led;
	cr_assert_eq(claim_acquire_led(fx.b, ID_B, false, true, &led, fx.cache[0], 60, &rb, msg,
				       sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.rep_instance, old.led.last);
	claim_end(rb, false);
	cr_assert_eq(take_led(&old, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	/* the rebuild again, to its end: the new catalog mounts, the old is behind */
	neu.led.stand_in = true;
	led = neu.led;
	cr_assert_eq(claim_acquire_led(fx.b, ID_B, false, true, &led, fx.cache[0], 60, &rb, msg,
				       sizeof(msg)), 0, "%s", msg);
	claim_end(rb, true);
	a = NULL; /* released: BACKING is the new catalog's alone (invariant 8) */
	cr_assert_eq(take_led(&old, false, 0, &a, msg, sizeof(msg)), -EBUSY);
	cr_assert_null(a);
	neu.led.stand_in = false;
	led = neu.led;
	cr_assert_eq(claim_acquire_led(fx.b, ID_B, false, false, &led, fx.cache[0], 60, &rb, msg,
				       sizeof(msg)), 0, "%s", msg);
	claim_end(rb, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.rep_catalog, "", "a mount's claim is no stand-in");
	cr_assert_eq(take_led(&old, false, 0, &a, msg, sizeof(msg)), -EBUSY);
}

/* ---- the steps of a take, driven step by step (invariants 2, 10, 12, 13;
 * review 31c F5: a claim judged OURS, and claim_abandon, by those steps) ----
 *
 * A hook (claim.h "take-move": a claim judged, not yet moved aside) either
 * stops a taker's thread there until the test lets it on, or acts once
 * there: another catalog's claim lands, as a taker's whose create came
 * while this one's judgment was on its way. No sleep decides anything: the
 * stale claim's age is its heartbeat, written in the past. */

static struct {
	const char *pause[2]; /* the point where taker 0 or 1 stops, once */
	bool paused[2];
	sem_t reached[2], go[2];
	const char *act_at; /* the point where act_claim lands, once */
	const struct claim_rec *act_claim;
	int acted;
	char seen[4][128]; /* tmp/'s asides, listed at taker 1's stop */
	int nseen;
} tk;
static __thread int t_role = -1; /* taker 0 or 1; -1: the test's own thread */

static int tk_note_aside(void *arg, const char *name)
{
	(void)arg;
	if (strncmp(name, "claim.", 6) == 0 && tk.nseen < 4)
		snprintf(tk.seen[tk.nseen++], sizeof(tk.seen[0]), "%s", name);
	return 0;
}

static bool tk_wait(sem_t *s)
{
	struct timespec until; /* bounded only so that a missing point fails, not hangs */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	while (sem_timedwait(s, &until) != 0)
		if (errno != EINTR)
			return false;
	return true;
}

static int take_hook(struct claim *c, const char *point)
{
	(void)c;
	if (t_role >= 0 && tk.pause[t_role] && !tk.paused[t_role] &&
	    strcmp(point, tk.pause[t_role]) == 0) {
		tk.paused[t_role] = true;
		sem_post(&tk.reached[t_role]);
		tk_wait(&tk.go[t_role]);
	}
	if (tk.act_at && strcmp(point, tk.act_at) == 0 && tk.acted++ == 0)
		put_claim(tk.act_claim);
	return 0;
}

static void take_init(void)
{
	setup();
	memset(&tk, 0, sizeof(tk));
	for (int i = 0; i < 2; i++) {
		sem_init(&tk.reached[i], 0, 0);
		sem_init(&tk.go[i], 0, 0);
	}
	claim_test_hook = take_hook;
}

static void take_fini(void)
{
	claim_test_hook = NULL;
	for (int i = 0; i < 2; i++) {
		sem_destroy(&tk.reached[i]);
		sem_destroy(&tk.go[i]);
	}
	teardown();
}

TestSuite(claim_take, .init = take_init, .fini = take_fini);

struct taker {
	int role; /* 0: catalog ID_A in cache 0; 1: ID_B in cache 1 */
	struct claim *c;
	int rc;
	char msg[PATH_MAX + 512];
};

static void *taker_run(void *arg)
{
	struct taker *t = arg;
	t_role = t->role;
	t->rc = claim_acquire(fx.b, t->role ? ID_B : ID_A, false, true, fx.cache[t->role], 60, &t->c,
			      t->msg, sizeof(t->msg));
	return NULL;
}

/* The claim's bytes on BACKING into buf (CLAIM_MAX), *len. */
static void claim_bytes(char *buf, size_t *len)
{
	*len = 0;
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, buf, CLAIM_MAX, len), 0, "no claim on BACKING");
}

static bool same_bytes(const char *a, size_t la, const char *b, size_t lb)
{
	return la == lb && memcmp(a, b, la) == 0;
}

/* Invariants 2, 10: another's claim that a move took stays aside, never put
 * back: the claim is absent and the one aside in tmp/ is its bytes. */
static void claim_stands_aside(const char *want, size_t lw)
{
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "another's moved claim was put back (or a claim made)");
	tk.nseen = 0;
	cr_assert_eq(backing_list(fx.b, "tmp", tk_note_aside, NULL), 0);
	cr_assert_eq(tk.nseen, 1, "%d asides in tmp/", tk.nseen);
	char aside[160], got[CLAIM_MAX];
	size_t lg = 0;
	snprintf(aside, sizeof(aside), "tmp/%s", tk.seen[0]);
	cr_assert_eq(backing_get(fx.b, aside, got, sizeof(got), &lg), 0);
	cr_assert(same_bytes(got, lg, want, lw), "the aside is not the moved claim byte for byte");
}

/* A claim of another host gone for 1000 s: stale for any taker. */
static struct claim_rec gone_holder(void)
{
	return rec_of(ID_B, "node-gone", "boot-g", "/var/cache/g", time(NULL) - 1000);
}

/* A stale claim (its bytes into judged, *lj, CLAIM_MAX) and two takers
 * of it: taker 0 stopped once it judged it, before its move; taker 1,
 * started then, stopped once it moved it aside, before its create. */
static void two_takers_stopped(struct taker *t0, pthread_t *p0, struct taker *t1, pthread_t *p1,
			       char *judged, size_t *lj)
{
	struct claim_rec old = gone_holder();
	put_claim(&old);
	claim_bytes(judged, lj);
	tk.pause[0] = "take-move";
	tk.pause[1] = "take-create";
	cr_assert_eq(pthread_create(p0, NULL, taker_run, t0), 0);
	cr_assert(tk_wait(&tk.reached[0]), "taker 0 never judged the claim stale");
	cr_assert_eq(pthread_create(p1, NULL, taker_run, t1), 0);
	cr_assert(tk_wait(&tk.reached[1]), "taker 1 never reached its create");
}

/* The stopped taker t lets on and joins, and loses: refused naming the
 * winner (the other taker's cache), the winner's claim (won, lw) byte for
 * byte — at CLAIM_FILE, no aside left; or, moved (the loser's move took
 * it), in the loser's aside, the claim absent (2, 10). */
static void loser_let_on(struct taker *t, pthread_t p, const char *won, size_t lw, bool moved)
{
	char after[CLAIM_MAX];
	size_t la = 0;
	sem_post(&tk.go[t->role]);
	pthread_join(p, NULL);
	cr_assert_eq(t->rc, -EBUSY, "taker %d: %d %s", t->role, t->rc, t->msg);
	cr_assert_null(t->c);
	cr_assert_not_null(strstr(t->msg, fx.cache[1 - t->role]), "the refusal names the winner: %s",
			   t->msg);
	if (moved) {
		claim_stands_aside(won, lw);
		return;
	}
	claim_bytes(after, &la);
	cr_assert(same_bytes(after, la, won, lw), "the winner's claim is not there byte for byte");
	cr_assert_eq(system_count_tmp_asides(), 0, "the loser left an aside");
}

/* Invariant 2: two takers judged one stale claim; the first stalls before
 * its move while the second moves it aside (to a name of its own instance,
 * the judged bytes unchanged), creates its claim and wins. The first then
 * moves the second's fresh claim, finds bytes it never judged, leaves them
 * aside (never put back: review 52 F1), and is refused by what it reads
 * next (the aside, 10): exactly one wins. The winner's next renewal takes
 * its claim back from that aside (11 M), byte for byte its own. */
Test(claim_take, of_two_takers_of_one_stale_claim_the_one_whose_move_came_second_leaves_it_aside)
{
	char judged[CLAIM_MAX], won[CLAIM_MAX];
	size_t lj = 0, lw = 0;
	struct taker t0 = { .role = 0 }, t1 = { .role = 1 };
	pthread_t p0, p1;
	two_takers_stopped(&t0, &p0, &t1, &p1, judged, &lj);
	/* taker 1 moved the stale claim aside: one aside, the judged bytes */
	cr_assert_eq(backing_list(fx.b, "tmp", tk_note_aside, NULL), 0);
	cr_assert_eq(tk.nseen, 1, "%d asides", tk.nseen);
	char aside[160], moved[CLAIM_MAX];
	size_t lm = 0;
	snprintf(aside, sizeof(aside), "tmp/%s", tk.seen[0]);
	cr_assert_eq(backing_get(fx.b, aside, moved, sizeof(moved), &lm), 0);
	cr_assert(same_bytes(moved, lm, judged, lj), "the aside is not the judged claim, byte for byte");
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "the claim is not aside");
	sem_post(&tk.go[1]);
	pthread_join(p1, NULL);
	cr_assert_eq(t1.rc, 0, "taker 1: %s", t1.msg);
	claim_bytes(won, &lw);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_B);
	char want[160]; /* invariant 10: the aside's name is the taker's, of its round */
	snprintf(want, sizeof(want), "claim.%s.0", r.instance);
	cr_assert_str_eq(tk.seen[0], want, "the aside's name is not unique to its taker");
	cr_assert_eq(system_count_tmp_asides(), 0, "the winner left its aside");
	loser_let_on(&t0, p0, won, lw, true); /* it moved a claim it never judged */
	cr_assert(claim_may_write(t1.c));
	claim_test_hook = NULL;
	claim_test_renew(t1.c);
	cr_assert(!claim_lost(t1.c), "the winner was fenced");
	cr_assert_eq(read_claim(&r), 0, "the winner did not take its claim back from the aside");
	cr_assert_str_eq(r.catalog, ID_B);
	cr_assert_eq(system_count_tmp_asides(), 0, "an aside was left in tmp/");
	claim_end(t1.c, true);
}

/* Invariants 2, 10: the first taker stalls before its move while the
 * second moved the claim aside and stalls before its create. The first's
 * move finds nothing (ENOENT), it judges the aside as the claim (10) and
 * creates first: it wins, and removes the aside it judged; the second's
 * create meets that claim (EEXIST, invariant 1) and is refused. */
Test(claim_take, of_two_takers_of_one_stale_claim_the_first_create_wins_on_the_aside)
{
	struct taker t0 = { .role = 0 }, t1 = { .role = 1 };
	pthread_t p0, p1;
	char judged[CLAIM_MAX];
	size_t lj = 0;
	two_takers_stopped(&t0, &p0, &t1, &p1, judged, &lj);
	sem_post(&tk.go[0]);
	pthread_join(p0, NULL);
	cr_assert_eq(t0.rc, 0, "taker 0, which judged the aside: %d %s", t0.rc, t0.msg);
	char won[CLAIM_MAX];
	size_t lw = 0;
	claim_bytes(won, &lw);
	cr_assert_eq(system_count_tmp_asides(), 0, "the aside judged was not removed by the winner");
	loser_let_on(&t1, p1, won, lw, false); /* its create came second */
	claim_end(t0.c, true);
}

/* F5: a claim judged OURS (our catalog, host and cache: a daemon killed)
 * is taken by the steps of 2, never put over after the read: a taker's
 * claim that lands between the judgment and the move is moved, found not
 * to be the judged bytes, left aside, and stands there (10); the mount is
 * refused. */
Test(claim_take, a_claim_judged_ours_is_never_put_over_a_takers_claim_landed_since)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, false); /* killed: the claim stays, ours */
	struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
	tk.act_at = "take-move";
	tk.act_claim = &other;
	char theirs[CLAIM_MAX], after[CLAIM_MAX];
	size_t lt = (size_t)claim_format(&other, theirs, sizeof(theirs)), la = 0;
	a = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), -EBUSY,
		     "the mount took the claim over a taker's: %s", msg);
	cr_assert_eq(tk.acted, 1, "the OURS judgment was not taken by the steps of a take");
	cr_assert_null(a);
	cr_assert_not_null(strstr(msg, "host node-elsewhere"), "%s", msg);
	(void)after;
	(void)la;
	claim_stands_aside(theirs, lt); /* 10: it stands for the taker's claim */
}

/* F5, the other way: taken as OURS, the claim is made anew (a new
 * instance, no aside left); claim_abandon then puts back the bytes it
 * replaced, byte for byte, and the same catalog takes them as its own. */
Test(claim_take, a_claim_taken_as_ours_and_abandoned_is_the_killed_ones_again)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, false);
	char killed[CLAIM_MAX], now[CLAIM_MAX];
	size_t lk = 0, ln = 0;
	claim_bytes(killed, &lk);
	struct claim_rec k, r;
	cr_assert_eq(claim_parse(killed, lk, &k), 0);
	a = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_neq(r.instance, k.instance, "the claim judged OURS was not made anew");
	cr_assert_eq(system_count_tmp_asides(), 0, "the OURS take left its aside");
	claim_abandon(a);
	claim_bytes(now, &ln);
	cr_assert(same_bytes(now, ln, killed, lk), "abandoned, the claim is not the one it replaced");
	cr_assert_eq(system_count_tmp_asides(), 0, "the abandon left its aside");
	a = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
}

/* claim_abandon by the steps of 2 (F5): a taker's claim that lands
 * between the give-back's read and its move is moved, found not ours, put
 * back: it stands, and the catalog that held the claim before is refused
 * by it (HELD), not handed the old claim. */
Test(claim_take, an_abandon_never_puts_back_over_a_takers_claim_landed_after_its_read)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512], released[CLAIM_MAX], theirs[CLAIM_MAX], after[CLAIM_MAX];
	size_t lr = 0, la = 0;
	struct claim *b = a_released_then_b_took(released, &lr);
	struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
	size_t lt = (size_t)claim_format(&other, theirs, sizeof(theirs));
	tk.act_at = "take-move"; /* armed after B's take: its give-back's move */
	tk.act_claim = &other;
	claim_abandon(b);
	cr_assert_eq(tk.acted, 1, "the abandon did not move the claim by the steps of a take");
	(void)after;
	(void)la;
	claim_stands_aside(theirs, lt); /* the abandon replaced nothing: it stands aside (10) */
	a = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, false, fx.cache[0], 60, &a, msg, sizeof(msg)), -EBUSY);
	cr_assert_not_null(strstr(msg, "host node-elsewhere"), "%s", msg);
}

/* claim_abandon (invariant 3): a claim another catalog took before the
 * give-back read it is not ours: left as it is. */
Test(claim_take, an_abandon_leaves_a_claim_taken_before_it_read)
{
	char released[CLAIM_MAX], theirs[CLAIM_MAX], after[CLAIM_MAX];
	size_t lr = 0, la = 0;
	struct claim *b = a_released_then_b_took(released, &lr);
	struct claim_rec other = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x", time(NULL));
	put_claim(&other);
	size_t lt = (size_t)claim_format(&other, theirs, sizeof(theirs));
	claim_abandon(b);
	claim_bytes(after, &la);
	cr_assert(same_bytes(after, la, theirs, lt), "the abandon replaced a claim not its own");
	cr_assert_eq(system_count_tmp_asides(), 0);
}

/* Invariant 12 through an acquisition: a copy of a cache restored at the
 * original's path, after the original took BACKING again and was killed
 * (a claim judged OURS by host, cache and catalog), is BEHIND, and the
 * claim is left byte for byte; the original takes it. */
Test(claim_take, a_copy_at_the_originals_path_is_behind_a_claim_judged_ours)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	struct book orig, copy;
	book_init(&orig);
	cr_assert_eq(take_led(&orig, true, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, false);
	copy = orig; /* cp -a CACHE COPY */
	copy.led.arg = &copy;
	cr_assert_eq(take_led(&orig, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, false); /* killed again: the claim is its take 2, not released */
	char before[CLAIM_MAX], after[CLAIM_MAX];
	size_t lb = 0, la = 0;
	claim_bytes(before, &lb);
	a = NULL;
	cr_assert_eq(take_led(&copy, false, 0, &a, msg, sizeof(msg)), -EBUSY, "the copy took it: %s", msg);
	cr_assert_null(a);
	cr_assert_not_null(strstr(msg, "another copy of this catalog"), "%s", msg);
	claim_bytes(after, &la);
	cr_assert(same_bytes(after, la, before, lb), "the refused copy changed the claim");
	cr_assert_eq(take_led(&orig, false, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
}

/* Invariant 13: a rebuild taking over a killed rebuild's claim (judged
 * OURS: the same new catalog, cache and host) records what that one
 * replaced ("replaces" names the original's take, not the killed
 * stand-in's); abandoned, it puts the killed one's claim back byte for
 * byte, through which the original catalog still takes BACKING. */
Test(claim_take, a_rebuild_over_a_killed_rebuild_replaces_the_original_and_abandoned_gives_it_back)
{
	struct claim *a = NULL, *rb = NULL;
	char msg[PATH_MAX + 512];
	struct book old, r1, r2;
	book_init(&old);
	book_init(&r1);
	book_init(&r2);
	cr_assert_eq(take_led(&old, true, 0, &a, msg, sizeof(msg)), 0, "%s", msg);
	claim_end(a, true);
	char line[160];
	snprintf(line, sizeof(line), "\nreplaces %s %s 1\n", ID_A, old.led.last);
	r1.led.stand_in = true;
	struct claim_ledger led = r1.led;
	cr_assert_eq(claim_acquire_led(fx.b, ID_B, false, true, &led, fx.cache[0], 60, &rb, msg,
				       sizeof(msg)), 0, "%s", msg);
	claim_end(rb, false); /* killed */
	char killed[CLAIM_MAX + 1], mine[CLAIM_MAX + 1], now[CLAIM_MAX];
	size_t lk = 0, lm = 0, ln = 0;
	claim_bytes(killed, &lk);
	killed[lk] = '\0';
	cr_assert_not_null(strstr(killed, line), "the rebuild's claim: %s", killed);
	r2.led.stand_in = true;
	led = r2.led;
	rb = NULL;
	cr_assert_eq(claim_acquire_led(fx.b, ID_B, false, true, &led, fx.cache[0], 60, &rb, msg,
				       sizeof(msg)), 0, "%s", msg);
	claim_bytes(mine, &lm);
	mine[lm] = '\0';
	cr_assert_not_null(strstr(mine, line), "the second rebuild stands for the killed one: %s", mine);
	claim_abandon(rb);
	claim_bytes(now, &ln);
	cr_assert(same_bytes(now, ln, killed, lk), "abandoned, the killed rebuild's claim is not back");
	cr_assert_eq(system_count_tmp_asides(), 0);
	a = NULL;
	cr_assert_eq(take_led(&old, false, 0, &a, msg, sizeof(msg)), 0, "the original is behind: %s", msg);
	claim_end(a, true);
}

/* Invariant 5: a claim file larger than CLAIM_MAX is an unknown holder's:
 * refused with the way out, never read in part and taken by guess. */
Test(claim_take, a_claim_too_large_to_read_is_held)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	static char big[CLAIM_MAX + 100];
	struct claim_rec old = gone_holder();
	int n = claim_format(&old, big, sizeof(big));
	memset(big + n, '#', sizeof(big) - (size_t)n); /* a valid beginning, too long */
	cr_assert_eq(backing_put(fx.b, CLAIM_FILE, big, sizeof(big)), 0);
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), -EBUSY,
		     "%s", msg);
	cr_assert_not_null(strstr(msg, "does not parse"), "%s", msg);
	uint64_t size = 0;
	cr_assert_eq(backing_stat(fx.b, CLAIM_FILE, &size), 0);
	cr_assert_eq(size, sizeof(big), "the refusal changed the claim");
}

/* Invariant 10: each round of a holder's renewal moves its claim to a new
 * aside name (its instance, a number of its own), so removing one round's
 * never removes another's. */
static struct {
	char names[2][128];
	int n;
} rn;

static int rn_note(void *arg, const char *name)
{
	(void)arg;
	if (strncmp(name, "claim.", 6) == 0 && rn.n < 2)
		snprintf(rn.names[rn.n], sizeof(rn.names[0]), "%s", name);
	return 0;
}

static int rn_hook(struct claim *c, const char *point)
{
	(void)c;
	if (strcmp(point, "retake-create") == 0 && rn.n < 2) {
		backing_list(fx.b, "tmp", rn_note, NULL);
		rn.n++;
	}
	return 0;
}

Test(claim_take, each_renewal_moves_the_claim_to_an_aside_of_its_own)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &a, msg, sizeof(msg)), 0, "%s", msg);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	memset(&rn, 0, sizeof(rn));
	claim_test_hook = rn_hook;
	claim_test_renew(a);
	claim_test_renew(a);
	cr_assert_eq(rn.n, 2);
	char want[2][128];
	snprintf(want[0], sizeof(want[0]), "claim.%s.0", r.instance);
	snprintf(want[1], sizeof(want[1]), "claim.%s.1", r.instance);
	cr_assert_str_eq(rn.names[0], want[0]);
	cr_assert_str_eq(rn.names[1], want[1], "a second round's aside took the first's name");
	cr_assert(!claim_lost(a));
	cr_assert_eq(system_count_tmp_asides(), 0);
	claim_end(a, true);
}

/* ---- a claim absent for a moment at a renewal's read (invariant 11 M) ---- */

static struct {
	int moved, back; /* the steps done */
	bool put_back;   /* the taker gives the claim back (else it never does) */
} mv;

static void mv_paths(char *claim, char *aside, size_t size)
{
	snprintf(claim, size, "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(aside, size, "%s/backing/tmp/claim.taker.0", fx.dir);
}

/* A taker that judged an older claim stale moved ours aside before our
 * renewal read it (claim.h 2: to compare it); it puts it back at our first
 * read again. */
static int mv_hook(struct claim *c, const char *point)
{
	(void)c;
	char claim[PATH_MAX], aside[PATH_MAX];
	mv_paths(claim, aside, sizeof(claim));
	if (strcmp(point, "renew-absent") == 0 && mv.put_back && mv.back == 0) {
		cr_assert_eq(rename(aside, claim), 0, "%s", strerror(errno));
		mv.back++;
	}
	return 0;
}

static struct claim *held_with_mover(bool put_back)
{
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 8, &a, msg, sizeof(msg)), 0, "%s", msg);
	memset(&mv, 0, sizeof(mv));
	mv.put_back = put_back;
	char claim[PATH_MAX], aside[PATH_MAX];
	mv_paths(claim, aside, sizeof(claim));
	cr_assert_eq(rename(claim, aside), 0, "%s", strerror(errno)); /* the taker's move */
	mv.moved = 1;
	claim_test_hook = mv_hook;
	return a;
}

/* The taker put our bytes back a moment after our read found them gone:
 * the holder renews on, its claim stands (was: fenced for good, "the claim
 * was removed", though nobody else ever held it). */
Test(claim_take, a_claim_moved_aside_and_put_back_during_a_renewal_keeps_its_holder)
{
	struct claim *a = held_with_mover(true);
	claim_test_renew(a);
	claim_test_hook = NULL;
	cr_assert_eq(mv.moved, 1);
	cr_assert_eq(mv.back, 1, "the renewal never read the claim again");
	cr_assert(!claim_lost(a), "a claim absent for a moment, then ours again, fenced its holder");
	cr_assert(claim_may_write(a));
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert_str_eq(r.cache, fx.cache[0]);
	claim_end(a, true);
}

/* Still absent after the reads again, the mover's aside (our bytes) the
 * newest: taken back from it (10: every taker judges it as our claim; a
 * mover that stalled or died between its move and its put-back fenced its
 * holder before). */
Test(claim_take, a_claim_left_aside_by_a_mover_through_a_renewal_is_taken_back_from_the_aside)
{
	struct claim *a = held_with_mover(false);
	claim_test_renew(a);
	claim_test_hook = NULL;
	cr_assert_eq(mv.moved, 1);
	cr_assert(!claim_lost(a), "a holder whose claim only a mover's aside held was fenced");
	cr_assert(claim_may_write(a));
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0, "the claim was not made again from the aside");
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert_eq(system_count_tmp_asides(), 0, "the mover's aside was left in tmp/");
	claim_end(a, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.released);
}

/* Gone with no aside of our bytes (removed by hand: the decision): fenced
 * as before, and the claim is not made on that absence. */
Test(claim_take, a_claim_that_stays_absent_through_a_renewal_fences_its_holder)
{
	struct claim *a = held_with_mover(false);
	char claim[PATH_MAX], aside[PATH_MAX];
	mv_paths(claim, aside, sizeof(claim));
	cr_assert_eq(unlink(aside), 0, "%s", strerror(errno));
	claim_test_renew(a);
	claim_test_hook = NULL;
	cr_assert(claim_lost(a), "a holder whose claim vanished was not fenced");
	cr_assert(!claim_may_write(a));
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT, "the fenced holder made the claim on an absence");
	claim_end(a, true);
	cr_assert_eq(read_claim(&r), -ENOENT, "the fenced holder's release made the claim");
}

/* ---- threads stopped at hook points (claim_mover, claim_review52) ----
 * Each stop once: a thread that reaches step `reached` posts it and waits
 * for `go`, which the test posts when it lets that thread on. */
#define ST_MAX 12
static struct {
	sem_t step[ST_MAX];
	bool done[ST_MAX];
} st;

static void st_init(void)
{
	memset(&st, 0, sizeof(st));
	for (int i = 0; i < ST_MAX; i++)
		sem_init(&st.step[i], 0, 0);
}

static void st_setup(void)
{
	setup();
	st_init();
}

static void st_fini(void)
{
	claim_test_hook = NULL;
	for (int i = 0; i < ST_MAX; i++)
		sem_destroy(&st.step[i]);
	teardown();
}

static void st_stop(int reached, int go)
{
	if (st.done[reached])
		return;
	st.done[reached] = true;
	sem_post(&st.step[reached]);
	tk_wait(&st.step[go]);
}

/* ---- a mover's put-back meets a create in its gap (invariants 2, 10, 11) ----
 *
 * Three takers of one stale claim X, each its own thread, stopped at hook
 * points until the test lets it on: A takes X and wins (its check passed);
 * B, which judged X before A's create, moves A's claim aside to compare it
 * (2: another's bytes, to be put back); C, which judged "absent, X aside"
 * while A's take was under way, creates its claim in B's gap, before B's
 * put-back. Before: B's put-back answered EEXIST and B removed its aside,
 * so C's check saw nothing new and C won too — two holders of one BACKING
 * (the unit race of three takers failed ~1 in 40 under ASan that way). */
enum { M_B_JUDGED, M_B_MOVE, M_A_MOVED, M_A_CREATE, M_C_JUDGED, M_C_CREATE, M_B_AT_KEPT,
       M_B_ON, M_C_CREATED, M_C_CHECK };
static struct {
	struct racer r[3]; /* A, B, C: caches 0, 1, 2 */
} mx;
static __thread char m_role;

static int mover_hook(struct claim *c, const char *point)
{
	(void)c;
	if (m_role == 'B' && strcmp(point, "take-move") == 0)
		st_stop(M_B_JUDGED, M_B_MOVE); /* X judged stale, not yet moved */
	else if (m_role == 'A' && strcmp(point, "take-create") == 0)
		st_stop(M_A_MOVED, M_A_CREATE); /* X aside, A's claim not yet made */
	else if (m_role == 'C' && strcmp(point, "take-create") == 0)
		st_stop(M_C_JUDGED, M_C_CREATE); /* judged: absent, X aside (10) */
	else if (m_role == 'B' && strcmp(point, "take-kept") == 0)
		st_stop(M_B_AT_KEPT, M_B_ON); /* A's claim moved, not X */
	else if (m_role == 'C' && strcmp(point, "take-check") == 0)
		st_stop(M_C_CREATED, M_C_CHECK); /* C's create answered 0 */
	return 0;
}

static void *mover_racer(void *arg)
{
	struct racer *r = arg;
	m_role = (char)('A' + r->idx);
	char msg[PATH_MAX + 512];
	const char *id[] = { ID_A, ID_B, "cccccccccccccccccccccccccccccccc" };
	r->rc = claim_acquire(fx.b, id[r->idx], false, true, fx.cache[r->idx], 60, &r->c, msg,
			      sizeof(msg));
	return NULL;
}

TestSuite(claim_mover, .init = st_setup, .fini = st_fini);

/* Every step above, in its order; the three acquisitions answered. */
static void mover_race(void)
{
	memset(&mx, 0, sizeof(mx));
	struct claim_rec x = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x",
				    time(NULL) - 1000);
	put_claim(&x);
	claim_test_hook = mover_hook;
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		mx.r[i].idx = i;
	cr_assert_eq(pthread_create(&t[1], NULL, mover_racer, &mx.r[1]), 0);
	cr_assert(tk_wait(&st.step[M_B_JUDGED]), "B never judged X");
	cr_assert_eq(pthread_create(&t[0], NULL, mover_racer, &mx.r[0]), 0);
	cr_assert(tk_wait(&st.step[M_A_MOVED]), "A never moved X aside");
	cr_assert_eq(pthread_create(&t[2], NULL, mover_racer, &mx.r[2]), 0);
	cr_assert(tk_wait(&st.step[M_C_JUDGED]), "C never judged the claim absent");
	sem_post(&st.step[M_A_CREATE]);
	pthread_join(t[0], NULL);
	cr_assert_eq(mx.r[0].rc, 0, "A did not win");
	sem_post(&st.step[M_B_MOVE]);
	cr_assert(tk_wait(&st.step[M_B_AT_KEPT]), "B never moved A's claim aside");
	sem_post(&st.step[M_C_CREATE]);
	cr_assert(tk_wait(&st.step[M_C_CREATED]), "C's create in B's gap did not answer 0");
	sem_post(&st.step[M_B_ON]);
	pthread_join(t[1], NULL);
	sem_post(&st.step[M_C_CHECK]);
	pthread_join(t[2], NULL);
	claim_test_hook = NULL;
	cr_assert_eq(mx.r[1].rc, -EBUSY, "B: %d", mx.r[1].rc);
	cr_assert_eq(mx.r[2].rc, -EBUSY, "C won beside A: two holders (%d)", mx.r[2].rc);
}

Test(claim_mover, a_create_in_a_movers_gap_backs_off_and_the_winner_keeps_its_claim)
{
	mover_race();
	/* the claim is absent and B's aside, A's bytes, stands for it (10):
	 * A's renewal reads it absent, waits (11 M), then takes it back */
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT);
	cr_assert_eq(system_count_tmp_asides(), 1, "B's aside of A's claim is not there");
	claim_test_renew(mx.r[0].c);
	cr_assert(!claim_lost(mx.r[0].c), "A, the one holder, was fenced");
	cr_assert(claim_may_write(mx.r[0].c));
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert_str_eq(r.cache, fx.cache[0]);
	cr_assert_eq(system_count_tmp_asides(), 0, "an aside was left in tmp/");
	claim_end(mx.r[0].c, true);
	cr_assert_eq(read_claim(&r), 0);
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert(r.released);
}

/* The same, but A stops before any renewal: its release finds the claim
 * absent and takes it back, released, from B's aside. */
Test(claim_mover, a_winner_whose_claim_a_mover_left_aside_releases_it_at_its_stop)
{
	mover_race();
	claim_end(mx.r[0].c, true);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0, "A's release left the claim absent");
	cr_assert_str_eq(r.catalog, ID_A);
	cr_assert(r.released);
	cr_assert_eq(system_count_tmp_asides(), 0, "an aside was left in tmp/");
}

/* ---- review 52: four parties (invariants 2, 10, 11 C; the reviewer's
 * reproducers, each two holders on 0b2c321) ---- */

enum { R_M_JUDGED, R_M_MOVE, R_M_AT_KEPT, R_M_ON, R_B_JUDGED, R_B_MOVE, R_B_AT_KEPT, R_B_ON };
static struct {
	struct racer r[3]; /* 0: A, 1: M, 2: B */
} rv;
static __thread char r_role;

static int r52_hook(struct claim *c, const char *point)
{
	(void)c;
	if (r_role == 'M' && strcmp(point, "take-move") == 0)
		st_stop(R_M_JUDGED, R_M_MOVE);
	else if (r_role == 'M' && strcmp(point, "take-kept") == 0)
		st_stop(R_M_AT_KEPT, R_M_ON);
	else if (r_role == 'B' && strcmp(point, "take-move") == 0)
		st_stop(R_B_JUDGED, R_B_MOVE);
	else if (r_role == 'B' && strcmp(point, "take-kept") == 0)
		st_stop(R_B_AT_KEPT, R_B_ON);
	return 0;
}

static void *r52_racer(void *arg)
{
	struct racer *r = arg;
	r_role = "AMB"[r->idx];
	char msg[PATH_MAX + 512];
	const char *id[] = { ID_A, "dddddddddddddddddddddddddddddddd",
			     "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee" };
	r->rc = claim_acquire(fx.b, id[r->idx], false, true, fx.cache[r->idx], 60, &r->c, msg,
			      sizeof(msg));
	if (r->rc != 0)
		fprintf(stderr, "review52: %c: %d %s\n", r_role, r->rc, msg);
	return NULL;
}

TestSuite(claim_review52, .init = st_setup, .fini = st_fini);

/* Review 52 F1. M and B judged a stale X and stopped before their moves.
 * P (a fresh catalog, another cache) takes X and releases it at once: the
 * claim is P's released claim, Prel. M moves Prel aside (not X). A reads
 * "absent, Prel aside" (released: STALE), creates, its check passes (M's
 * aside judged), drops M's aside: A holds. B moves A's claim aside (not
 * X). Before: M's put-back created Prel in B's gap, M's next round took
 * Prel, and B's put-back met EEXIST — A and M both held. Now nothing is
 * put back: M and B, looking again, find the claim absent and B's aside,
 * A's claim, the newest (10): refused; A takes its claim back (11 M). */
Test(claim_review52, a_moved_claim_is_never_put_back_so_no_older_claim_comes_back_in_a_movers_gap)
{
	memset(&rv, 0, sizeof(rv));
	struct claim_rec x = rec_of(ID_B, "node-elsewhere", "boot-x", "/var/cache/x",
				    time(NULL) - 1000);
	put_claim(&x);
	claim_test_hook = r52_hook;
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		rv.r[i].idx = i;
	cr_assert_eq(pthread_create(&t[1], NULL, r52_racer, &rv.r[1]), 0);
	cr_assert(tk_wait(&st.step[R_M_JUDGED]), "M never judged X");
	cr_assert_eq(pthread_create(&t[2], NULL, r52_racer, &rv.r[2]), 0);
	cr_assert(tk_wait(&st.step[R_B_JUDGED]), "B never judged X");
	/* P: takes X and releases (a short-lived mount or an offline command) */
	struct claim *p = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, "ffffffffffffffffffffffffffffffff", false, true,
				   "/tmp/review52-cache-p", 60, &p, msg, sizeof(msg)), 0, "P: %s", msg);
	claim_end(p, true);
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), 0);
	cr_assert(r.released, "P did not release");
	sem_post(&st.step[R_M_MOVE]);
	cr_assert(tk_wait(&st.step[R_M_AT_KEPT]), "M never moved Prel aside");
	cr_assert_eq(pthread_create(&t[0], NULL, r52_racer, &rv.r[0]), 0);
	pthread_join(t[0], NULL);
	cr_assert_eq(rv.r[0].rc, 0, "A did not win on 'absent, Prel aside'");
	sem_post(&st.step[R_B_MOVE]);
	cr_assert(tk_wait(&st.step[R_B_AT_KEPT]), "B never moved A's claim aside");
	sem_post(&st.step[R_M_ON]);
	pthread_join(t[1], NULL);
	bool a_holds = rv.r[0].rc == 0 && !claim_lost(rv.r[0].c) && claim_may_write(rv.r[0].c);
	bool m_holds = rv.r[1].rc == 0 && !claim_lost(rv.r[1].c) && claim_may_write(rv.r[1].c);
	fprintf(stderr, "review52: A holds %d, M holds %d (M rc %d), asides %d\n", a_holds, m_holds,
		rv.r[1].rc, system_count_tmp_asides());
	sem_post(&st.step[R_B_ON]);
	pthread_join(t[2], NULL);
	claim_test_hook = NULL;
	bool both = a_holds && m_holds;
	if (rv.r[0].c)
		claim_test_renew(rv.r[0].c);
	fprintf(stderr, "review52: after A's renewal: A lost %d\n", claim_lost(rv.r[0].c));
	cr_assert(!both, "A and M both hold the claim: two holders");
	cr_assert_eq(rv.r[1].rc, -EBUSY, "M: %d", rv.r[1].rc);
	cr_assert_eq(rv.r[2].rc, -EBUSY, "B: %d", rv.r[2].rc);
	cr_assert(!claim_lost(rv.r[0].c), "A, the one holder, was fenced");
	cr_assert_eq(read_claim(&r), 0, "A did not take its claim back");
	cr_assert_str_eq(r.catalog, ID_A);
	for (int i = 0; i < 3; i++)
		claim_end(rv.r[i].c, false);
}

/* Review 52 F2 (11 C): before, an adoption's create was not checked: A adopted the
 * mover's aside (its bytes) and stalls before its create; meanwhile A is
 * judged gone (here: its cache lock let go, standing for a heartbeat older
 * than the timeout on another host), T takes the claim on "absent, that
 * aside" and wins; a mover G (judged an older claim) moves T's claim aside
 * to compare it; A's create lands in G's gap. Now A's check after its
 * create sees G's aside (T's bytes, not there at its look): A gives its
 * claim back and is fenced; T alone holds (its claim in G's aside). */
static struct {
	struct claim *t;
	int rc, steps;
} f2;

static int r52_adopt_stall(struct claim *c, const char *point)
{
	(void)c;
	if (strcmp(point, "retake-create") != 0 || f2.steps++)
		return 0;
	char msg[PATH_MAX + 512];
	close(fx.lock_fd[0]); /* A judged gone (lock free: same host; heartbeat: another) */
	fx.lock_fd[0] = -1;
	f2.rc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &f2.t, msg, sizeof(msg));
	if (f2.rc != 0)
		fprintf(stderr, "review52 F2: T: %d %s\n", f2.rc, msg);
	char claim[PATH_MAX], gaside[PATH_MAX];
	snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(gaside, sizeof(gaside), "%s/backing/tmp/claim.mover-g.0", fx.dir);
	if (f2.rc == 0)
		cr_assert_eq(rename(claim, gaside), 0, "%s", strerror(errno)); /* G's move */
	return 0;
}

Test(claim_review52, an_adoptions_create_in_a_movers_gap_is_given_back_and_the_taker_alone_holds)
{
	memset(&f2, 0, sizeof(f2));
	struct claim *a = held_with_mover(false); /* timeout 8 s: sure for 7 s */
	claim_test_hook = NULL;
	/* A stopped past its deadline (as a holder a taker judges stale by its
	 * heartbeat is): unsure, it writes nothing */
	struct timespec nap = { 7, 300000000L };
	nanosleep(&nap, NULL);
	cr_assert(!claim_may_write(a), "A still sure past its deadline");
	claim_test_hook = r52_adopt_stall;
	claim_test_renew(a);
	claim_test_hook = NULL;
	bool a_holds = !claim_lost(a) && claim_may_write(a);
	bool t_holds = f2.rc == 0 && !claim_lost(f2.t) && claim_may_write(f2.t);
	struct claim_rec r;
	int rr = read_claim(&r);
	fprintf(stderr, "review52 F2: A holds %d, T holds %d, claim %d %s, asides %d\n", a_holds,
		t_holds, rr, rr == 0 ? r.catalog : "-", system_count_tmp_asides());
	claim_end(f2.t, false);
	claim_end(a, false);
	cr_assert(!(a_holds && t_holds), "A and T both hold the claim: two holders");
}

/* Review 52 F2, the older path of the same shape: a renewal's create fails
 * (its aside pending, 10); the next renewal takes the claim back from it
 * and stalls before its create while T takes over and G moves T's claim. */
static int r52_pending_stall(struct claim *c, const char *point)
{
	if (strcmp(point, "retake-create") != 0)
		return 0;
	if (f2.steps == 0) {
		f2.steps++;
		return -EIO; /* the first renewal's create fails: aside pending */
	}
	return r52_adopt_stall(c, point);
}

Test(claim_review52, a_take_back_of_a_pending_aside_in_a_movers_gap_is_given_back_and_the_taker_alone_holds)
{
	memset(&f2, 0, sizeof(f2));
	struct claim *a = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 8, &a, msg, sizeof(msg)), 0);
	claim_test_hook = r52_pending_stall;
	claim_test_renew(a); /* create fails: pending */
	struct claim_rec r;
	cr_assert_eq(read_claim(&r), -ENOENT);
	f2.steps = 0; /* r52_adopt_stall acts at the next retake-create */
	claim_test_hook = NULL;
	struct timespec nap = { 7, 300000000L }; /* past its deadline: unsure */
	nanosleep(&nap, NULL);
	cr_assert(!claim_may_write(a), "A still sure past its deadline");
	claim_test_hook = r52_adopt_stall;
	claim_test_renew(a);
	claim_test_hook = NULL;
	bool a_holds = !claim_lost(a) && claim_may_write(a);
	bool t_holds = f2.rc == 0 && !claim_lost(f2.t) && claim_may_write(f2.t);
	fprintf(stderr, "review52 F2 pending: A holds %d, T holds %d\n", a_holds, t_holds);
	claim_end(f2.t, false);
	claim_end(a, false);
	cr_assert(!(a_holds && t_holds), "A and T both hold the claim: two holders");
}

/* ---- review 53 (adversarial review of 28f42f8): reproducers ---- */

/* Review 53 F1: claim_abandon's give-back is a create no check follows
 * (claim.h 11 C says "there is no put-back (2) and no unchecked create").
 * S (ID_A, cache 0) takes a stale X (replaced = X) and gives it back: its
 * claim moved aside to S.g and compared, then stalled before put_new(X).
 * Meanwhile S is judged gone (its cache lock let go: same host; on another
 * host, a heartbeat older than the timeout, i.e. a stall of more than
 * timeout/8 after claim_may_write), W (cache 1) takes the claim on
 * "absent, S.g aside" and wins (S.g judged, so W's check passes); a mover G
 * (judged an older claim) moves W's claim aside to compare it. S's
 * put_new(X) lands in G's gap. T (cache 2, fresh) reads X, judges it alone
 * (stale), moves and compares it (equal), creates, and its check passes:
 * G's aside was listed before it decided. W and T both hold. */
static struct {
	struct claim *w;
	int wrc, steps;
} r53;

static int r53_giveback_stall(struct claim *c, const char *point)
{
	(void)c;
	if (strcmp(point, "giveback-create") != 0 || r53.steps++)
		return 0;
	char msg[PATH_MAX + 512];
	close(fx.lock_fd[0]); /* S judged gone */
	fx.lock_fd[0] = -1;
	claim_test_hook = NULL;
	r53.wrc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &r53.w, msg, sizeof(msg));
	if (r53.wrc != 0)
		fprintf(stderr, "review53 F1: W: %d %s\n", r53.wrc, msg);
	char claim[PATH_MAX], gaside[PATH_MAX];
	snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(gaside, sizeof(gaside), "%s/backing/tmp/claim.mover-g.0", fx.dir);
	if (r53.wrc == 0)
		cr_assert_eq(rename(claim, gaside), 0, "%s", strerror(errno)); /* G's move */
	claim_test_hook = r53_giveback_stall;
	return 0;
}

TestSuite(claim_review53, .init = setup, .fini = teardown);

Test(claim_review53, a_give_back_in_a_movers_gap_restores_an_older_claim_and_makes_two_holders)
{
	memset(&r53, 0, sizeof(r53));
	struct claim_rec x = rec_of("cccccccccccccccccccccccccccccccc", "node-elsewhere", "boot-x",
				    "/var/cache/x", time(NULL) - 1000);
	put_claim(&x);
	struct claim *s = NULL, *t = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &s, msg, sizeof(msg)), 0,
		     "S: %s", msg);
	claim_test_hook = r53_giveback_stall;
	claim_abandon(s); /* S's give-back, stalled before its put_new(X) */
	claim_test_hook = NULL;
	struct claim_rec r;
	int rr = read_claim(&r);
	fprintf(stderr, "review53 F1: after S's give-back: claim %d %s, asides %d, W rc %d\n", rr,
		rr == 0 ? r.catalog : "-", system_count_tmp_asides(), r53.wrc);
	int trc = claim_acquire(fx.b, "dddddddddddddddddddddddddddddddd", false, true, fx.cache[2], 60,
				&t, msg, sizeof(msg));
	if (trc != 0)
		fprintf(stderr, "review53 F1: T: %d %s\n", trc, msg);
	bool w_holds = r53.wrc == 0 && !claim_lost(r53.w) && claim_may_write(r53.w);
	bool t_holds = trc == 0 && !claim_lost(t) && claim_may_write(t);
	fprintf(stderr, "review53 F1: W holds %d, T holds %d\n", w_holds, t_holds);
	if (r53.w)
		claim_test_renew(r53.w);
	fprintf(stderr, "review53 F1: after W's renewal: W lost %d\n", r53.w ? claim_lost(r53.w) : -1);
	claim_end(t, false);
	claim_end(r53.w, false);
	cr_assert(!(w_holds && t_holds), "W and T both hold the claim: two holders");
}

/* Review 53 F2 (liveness): 11 C fences a holder for a taker's transient
 * back-off aside. H renews: lists tmp/ (look), moves its claim aside (H.n).
 * T, which judged "absent" before H's claim existed (two mounts starting),
 * creates in H's gap, so H's create answers EEXIST (11 H). T's check sees
 * H.n and backs off: moves its claim to T.k, compares, removes T.k. H's try
 * of 11 H looks for a foreign aside before T's move (none), and its create
 * lands after T's move (0); its check of 11 C runs before T's remove: T.k,
 * T's bytes, not in look: H gives its claim back and is fenced. T, looking
 * again, judges H.n (H alive): refused. Nobody holds. On 0b2c321 (no 11 C)
 * H kept its claim. T's steps are made by hand, in T's real order. */
static struct {
	char tbytes[CLAIM_MAX];
	size_t tlen;
	int created, waited;
	pthread_t rm;
} bo;

static void *r53_remover(void *arg)
{
	(void)arg;
	struct timespec nap = { 0, 50000000L };
	nanosleep(&nap, NULL);
	char tk_aside[PATH_MAX];
	snprintf(tk_aside, sizeof(tk_aside), "%s/backing/tmp/claim.%s.1", fx.dir, ID_B);
	unlink(tk_aside);
	return NULL;
}

static int r53_backoff_hook(struct claim *c, const char *point)
{
	(void)c;
	char claim[PATH_MAX], tk_aside[PATH_MAX];
	snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(tk_aside, sizeof(tk_aside), "%s/backing/tmp/claim.%s.1", fx.dir, ID_B);
	if (strcmp(point, "retake-create") == 0 && bo.created++ == 0) /* T's create in H's gap */
		cr_assert_eq(backing_put_new(fx.b, CLAIM_FILE, bo.tbytes, bo.tlen), 0);
	if (strcmp(point, "renew-wait") == 0 && bo.waited++ == 0) { /* T's back-off: its move */
		cr_assert_eq(rename(claim, tk_aside), 0, "%s", strerror(errno));
		/* T's compare and remove, 50 ms later (on its own thread) */
		cr_assert_eq(pthread_create(&bo.rm, NULL, r53_remover, NULL), 0);
	}
	return 0;
}

Test(claim_review53, a_holder_is_fenced_by_a_takers_transient_back_off_aside_and_nobody_holds)
{
	memset(&bo, 0, sizeof(bo));
	struct claim *h = NULL, *t = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &h, msg, sizeof(msg)), 0,
		     "H: %s", msg);
	struct claim_rec tr = rec_of(ID_B, "", "", fx.cache[1], time(NULL));
	tr.fresh = false;
	/* T's claim on this host (same host and namespaces as claim_acquire writes) */
	char hb[CLAIM_MAX];
	size_t hl = 0;
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, hb, sizeof(hb), &hl), 0);
	struct claim_rec hr;
	cr_assert_eq(claim_parse(hb, hl, &hr), 0);
	snprintf(tr.host, sizeof(tr.host), "%s", hr.host);
	snprintf(tr.boot, sizeof(tr.boot), "%s", hr.boot);
	tr.ns_mnt = hr.ns_mnt;
	tr.ns_pid = hr.ns_pid;
	tr.pid = hr.pid;
	int n = claim_format(&tr, bo.tbytes, sizeof(bo.tbytes));
	cr_assert_gt(n, 0);
	bo.tlen = (size_t)n;
	claim_test_hook = r53_backoff_hook;
	claim_test_renew(h);
	claim_test_hook = NULL;
	char tk_aside[PATH_MAX];
	snprintf(tk_aside, sizeof(tk_aside), "tmp/claim.%s.1", ID_B);
	char got[CLAIM_MAX];
	size_t gl = 0;
	cr_assert_eq(bo.waited, 1, "H never tried again (11 H)");
	pthread_join(bo.rm, NULL);
	(void)got;
	(void)gl;
	cr_assert_eq(backing_get(fx.b, tk_aside, got, sizeof(got), &gl), -ENOENT, "T's aside stays");
	bool h_lost = claim_lost(h);
	int trc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &t, msg, sizeof(msg));
	struct claim_rec r;
	int rr = read_claim(&r);
	fprintf(stderr, "review53 F2: H lost %d (tries %d), T's next round %d (%s), claim %d, asides %d\n",
		h_lost, bo.waited, trc, trc ? msg : "held", rr, system_count_tmp_asides());
	claim_end(t, false);
	claim_end(h, false);
	cr_assert(!h_lost, "H, the holder, was fenced by T's transient back-off aside");
}

/* Review 53 F3 (liveness, not new): a mover's move between a renewal's read
 * and its move fences the holder at once (claim_retake: the move answers
 * ENOENT), although its claim stands in the mover's aside, which the mover
 * now never puts back; the mover, looking again, judges that aside (the
 * holder alive): refused. Nobody holds until the holder's daemon stops.
 * G is a mount that judged an older claim stale (two mounts starting). */
static int r53_move_after_read(struct claim *c, const char *point)
{
	(void)c;
	char claim[PATH_MAX], gaside[PATH_MAX];
	snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(gaside, sizeof(gaside), "%s/backing/tmp/claim.%s.0", fx.dir, ID_B);
	if (strcmp(point, "renew-read") == 0) /* G's move: not the bytes it judged, kept */
		cr_assert_eq(rename(claim, gaside), 0, "%s", strerror(errno));
	return 0;
}

Test(claim_review53, a_movers_move_after_a_renewals_read_fences_the_holder_and_nobody_holds)
{
	struct claim *h = NULL, *g = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &h, msg, sizeof(msg)), 0,
		     "H: %s", msg);
	claim_test_hook = r53_move_after_read;
	claim_test_renew(h);
	claim_test_hook = NULL;
	bool h_lost = claim_lost(h);
	int grc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &g, msg, sizeof(msg));
	fprintf(stderr, "review53 F3: H lost %d, G's next round %d (%s), asides %d\n", h_lost, grc,
		grc ? msg : "held", system_count_tmp_asides());
	claim_end(g, false);
	claim_end(h, false);
	cr_assert(!h_lost, "H was fenced while its claim stands in the mover's aside");
}

/* Review 53 F4 (liveness): a failed listing in 11 C's check fences the
 * holder for good. claim_foreign_aside answers -errno when tmp/ cannot be
 * listed (or a new name cannot be read), and claim_create_anew takes any
 * nonzero answer as "a claim was moved meanwhile": the renewal's own
 * claim, just made, is given back and the daemon fenced (EROFS until its
 * remount). Before 28f42f8 a renewal that met a BACKING error logged it
 * and tried again at the next one. Here one listing of tmp/ fails
 * (ENOTDIR: tmp/ swapped for a file for that one moment, standing for an
 * NFS request that times out or answers EIO) right after the create. */
static int r53_list_fails(struct claim *c, const char *point)
{
	(void)c;
	char tmpd[PATH_MAX], hidden[PATH_MAX];
	snprintf(tmpd, sizeof(tmpd), "%s/backing/tmp", fx.dir);
	snprintf(hidden, sizeof(hidden), "%s/backing/tmp.hidden", fx.dir);
	if (strcmp(point, "retake-check") == 0) {
		cr_assert_eq(rename(tmpd, hidden), 0, "%s", strerror(errno));
		FILE *f = fopen(tmpd, "w");
		cr_assert_not_null(f);
		fclose(f);
		claim_test_hook = NULL;
		/* the listing fails now; tmp/ comes back at the next hook call */
	}
	return 0;
}

Test(claim_review53, one_failed_listing_after_a_renewals_create_fences_the_holder_for_good)
{
	struct claim *h = NULL;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &h, msg, sizeof(msg)), 0,
		     "H: %s", msg);
	claim_test_renew(h); /* tmp/ exists (the renewal's aside) */
	claim_test_hook = r53_list_fails;
	claim_test_renew(h);
	char tmpd[PATH_MAX], hidden[PATH_MAX];
	snprintf(tmpd, sizeof(tmpd), "%s/backing/tmp", fx.dir);
	snprintf(hidden, sizeof(hidden), "%s/backing/tmp.hidden", fx.dir);
	bool swapped = access(hidden, F_OK) == 0;
	if (swapped) { /* the one failure is over */
		cr_assert_eq(unlink(tmpd), 0);
		cr_assert_eq(rename(hidden, tmpd), 0);
	}
	bool lost = claim_lost(h);
	struct claim_rec r;
	int rr = read_claim(&r);
	fprintf(stderr, "review53 F4: listing failed once: %d; H lost %d, claim %d, asides %d\n",
		swapped, lost, rr, system_count_tmp_asides());
	claim_test_renew(h); /* the next renewal: BACKING answers again */
	fprintf(stderr, "review53 F4: after the next renewal: H lost %d, may write %d\n",
		claim_lost(h), claim_may_write(h));
	claim_end(h, false);
	cr_assert(!lost, "H fenced for good by one failed listing of tmp/ after its create");
}

/* ---- review 54 (adversarial review of f7cafec): reproducers ---- */

/* Review 54 F1: the give-back's check (11 C, review 53 F1's fix) comes
 * after its put_new(X), and X, a stale claim, is on BACKING as CLAIM_FILE
 * from that create until the give-back's second move. A taker T that
 * reads X in that window judges it alone (present: no aside looked at, 10),
 * STALE, moves it (equal), creates, and its check passes (the mover's
 * aside, W's claim, was listed before T decided). The give-back's second
 * move then moves T's claim aside (not X: kept). W (its claim in the
 * mover's aside) and T both hold. Same setup as review 53 F1; T runs at
 * the give-back's second "take-move" (after put_new(X) and the look). */
static struct {
	struct claim *s, *w, *t;
	int wrc, trc, step;
	char tmsg[PATH_MAX + 512];
} r54;

static int r54_giveback_window(struct claim *c, const char *point)
{
	char msg[PATH_MAX + 512];
	if (strcmp(point, "giveback-create") == 0 && r54.step == 0) {
		r54.step = 1;
		close(fx.lock_fd[0]); /* S judged gone */
		fx.lock_fd[0] = -1;
		claim_test_hook = NULL;
		r54.wrc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &r54.w, msg,
					sizeof(msg));
		if (r54.wrc != 0)
			fprintf(stderr, "review54 F1: W: %d %s\n", r54.wrc, msg);
		char claim[PATH_MAX], gaside[PATH_MAX];
		snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
		snprintf(gaside, sizeof(gaside), "%s/backing/tmp/claim.mover-g.0", fx.dir);
		if (r54.wrc == 0) /* G's move of W's claim: not what G judged, kept */
			cr_assert_eq(rename(claim, gaside), 0, "%s", strerror(errno));
		claim_test_hook = r54_giveback_window;
	} else if (strcmp(point, "take-move") == 0 && r54.step == 1 && c == r54.s) {
		r54.step = 2; /* X is CLAIM_FILE again; the give-back's second move not yet made */
		claim_test_hook = NULL;
		r54.trc = claim_acquire(fx.b, "dddddddddddddddddddddddddddddddd", false, true,
					fx.cache[2], 60, &r54.t, r54.tmsg, sizeof(r54.tmsg));
		claim_test_hook = r54_giveback_window;
	}
	return 0;
}

TestSuite(claim_review54, .init = setup, .fini = teardown);

Test(claim_review54, a_taker_in_the_give_backs_window_judges_x_alone_and_makes_two_holders)
{
	memset(&r54, 0, sizeof(r54));
	r54.trc = -1;
	struct claim_rec x = rec_of("cccccccccccccccccccccccccccccccc", "node-elsewhere", "boot-x",
				    "/var/cache/x", time(NULL) - 1000);
	put_claim(&x);
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &r54.s, msg,
				   sizeof(msg)), 0, "S: %s", msg);
	claim_test_hook = r54_giveback_window;
	claim_abandon(r54.s);
	claim_test_hook = NULL;
	struct claim_rec r;
	int rr = read_claim(&r);
	bool w_holds = r54.wrc == 0 && !claim_lost(r54.w) && claim_may_write(r54.w);
	bool t_holds = r54.trc == 0 && !claim_lost(r54.t) && claim_may_write(r54.t);
	fprintf(stderr, "review54 F1: steps %d; W rc %d, T rc %d (%s); claim %d %s, asides %d; "
		"W holds %d, T holds %d\n", r54.step, r54.wrc, r54.trc, r54.trc ? r54.tmsg : "held",
		rr, rr == 0 ? r.catalog : "-", system_count_tmp_asides(), w_holds, t_holds);
	if (r54.w)
		claim_test_renew(r54.w);
	if (r54.t)
		claim_test_renew(r54.t);
	fprintf(stderr, "review54 F1: after W's and T's renewals: W lost %d, T lost %d\n",
		r54.w ? claim_lost(r54.w) : -1, r54.t ? claim_lost(r54.t) : -1);
	claim_end(r54.t, false);
	claim_end(r54.w, false);
	cr_assert(!(w_holds && t_holds), "W and T both hold the claim: two holders");
}

/* Review 54 F2: a taker's own transient claim, kept aside by a mover, is
 * judged by that taker as the claim (10: the newest aside) and as OURS
 * (its own catalog, cache and host): FREE, though it never held it and a
 * live holder's aside is there. H renews (its claim H0 moved to H.n);
 * T, which judged "absent" before H0 existed (its bytes Tw rendered then:
 * the same second as H0, or the next), creates Tw in H's gap; H's create
 * answers EEXIST (11 H). G, a mover that judged an older claim, moves Tw
 * aside (not what it judged: kept). T's back-off finds nothing to move
 * and looks again: absent, asides H.n (H0) and G.0 (Tw, renewed one second
 * later) — the newest is Tw, T's own: FREE; T creates, its check passes,
 * it drops H.n and G.0: T holds. H, sure from its acquisition, holds too
 * until its next poll finds its aside gone and fences it. */
static struct {
	struct claim *h, *t;
	int trc, steps;
	bool h_writes_while_t_holds;
	char tbytes[CLAIM_MAX];
	size_t tlen;
	char tmsg[PATH_MAX + 512];
} f2b;

static int r54_own_aside_hook(struct claim *c, const char *point)
{
	char claim[PATH_MAX], gaside[PATH_MAX];
	snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(gaside, sizeof(gaside), "%s/backing/tmp/claim.mover-g.0", fx.dir);
	if (c != f2b.h)
		return 0;
	if (strcmp(point, "retake-create") == 0 && f2b.steps == 0) {
		f2b.steps = 1; /* T's create (judged "absent" earlier) lands in H's gap */
		cr_assert_eq(backing_put_new(fx.b, CLAIM_FILE, f2b.tbytes, f2b.tlen), 0);
	} else if (strcmp(point, "renew-wait") == 0 && f2b.steps == 1) {
		f2b.steps = 2;
		/* T's check saw H.n; before T's back-off move, G moves Tw (kept) */
		cr_assert_eq(rename(claim, gaside), 0, "%s", strerror(errno));
		/* T's back-off: its move finds nothing (-EAGAIN); its next round: */
		claim_test_hook = NULL;
		f2b.trc = claim_acquire(fx.b, ID_B, false, true, fx.cache[1], 60, &f2b.t, f2b.tmsg,
					sizeof(f2b.tmsg));
		f2b.h_writes_while_t_holds = f2b.trc == 0 && claim_may_write(f2b.t) &&
					     claim_may_write(f2b.h);
		claim_test_hook = r54_own_aside_hook;
	}
	return 0;
}

Test(claim_review54, a_takers_own_backed_off_claim_in_a_movers_aside_is_judged_ours_over_a_live_holder)
{
	memset(&f2b, 0, sizeof(f2b));
	f2b.trc = -1;
	char msg[PATH_MAX + 512];
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &f2b.h, msg,
				   sizeof(msg)), 0, "H: %s", msg);
	char hb[CLAIM_MAX];
	size_t hl = 0;
	cr_assert_eq(backing_get(fx.b, CLAIM_FILE, hb, sizeof(hb), &hl), 0);
	struct claim_rec hr;
	cr_assert_eq(claim_parse(hb, hl, &hr), 0);
	/* T's bytes as its claim_acquire rendered them: this host, cache 1,
	 * fresh, a second after H0's (judged "absent" just before H0 landed) */
	struct claim_rec tr = rec_of(ID_B, hr.host, hr.boot, fx.cache[1], hr.renewed + 1);
	tr.ns_mnt = hr.ns_mnt;
	tr.ns_pid = hr.ns_pid;
	tr.pid = hr.pid;
	snprintf(tr.instance, sizeof(tr.instance), "%s", "0123456789abcdef0123456789abcdef");
	int n = claim_format(&tr, f2b.tbytes, sizeof(f2b.tbytes));
	cr_assert_gt(n, 0);
	f2b.tlen = (size_t)n;
	claim_test_hook = r54_own_aside_hook;
	claim_test_renew(f2b.h);
	claim_test_hook = NULL;
	bool h_lost = claim_lost(f2b.h);
	bool t_holds = f2b.trc == 0 && !claim_lost(f2b.t) && claim_may_write(f2b.t);
	struct claim_rec r;
	int rr = read_claim(&r);
	fprintf(stderr, "review54 F2: steps %d; T rc %d (%s); both may write while T held: %d; "
		"after H's renewal: H lost %d, T holds %d, claim %d %s, asides %d\n", f2b.steps,
		f2b.trc, f2b.trc ? f2b.tmsg : "held", f2b.h_writes_while_t_holds, h_lost, t_holds,
		rr, rr == 0 ? r.catalog : "-", system_count_tmp_asides());
	claim_end(f2b.t, false);
	claim_end(f2b.h, false);
	cr_assert(!f2b.h_writes_while_t_holds, "H and T both hold the claim: two holders");
	cr_assert(!(t_holds && h_lost), "T took BACKING from the live holder H on its own "
		  "transient claim");
}

/* Review 55 F1: 9d40667 judges a present claim with the asides "as new or
 * newer" only. A claim created in a mover's gap by a party that died
 * before its check (a taker killed between its put_new and its 11 T look;
 * a holder between its create and its 11 C look) is newer than the live
 * winner's claim the mover left aside, and its creator is dead (same host:
 * its cache lock is free): STALE. A taker U judges it with the newer
 * asides only (none), takes it, and its check passes (the mover's aside
 * was listed before it decided). W, whose claim stands in the mover's
 * aside, is sure until its next renewal: two holders. Variant ours: U is
 * the killed taker's own cache restarted (OURS). */
static struct claim *r55_setup(char *wb, size_t *wl, struct claim_rec *wr)
{
	char msg[PATH_MAX + 512];
	struct claim *w = NULL;
	cr_assert_eq(claim_acquire(fx.b, ID_A, false, true, fx.cache[0], 60, &w, msg, sizeof(msg)),
		     0, "W: %s", msg);
	claim_bytes(wb, wl);
	cr_assert_eq(claim_parse(wb, *wl, wr), 0);
	/* G, a mover that judged an older claim, moves W's claim (kept, 2) */
	char claim[PATH_MAX], gaside[PATH_MAX];
	snprintf(claim, sizeof(claim), "%s/backing/%s", fx.dir, CLAIM_FILE);
	snprintf(gaside, sizeof(gaside), "%s/backing/tmp/claim.mover-g.0", fx.dir);
	char tmpd[PATH_MAX];
	snprintf(tmpd, sizeof(tmpd), "%s/backing/tmp", fx.dir);
	cr_assert(mkdir(tmpd, 0700) == 0 || errno == EEXIST);
	cr_assert_eq(rename(claim, gaside), 0, "%s", strerror(errno));
	/* K's create lands in G's gap: this host, cache 1, rendered a second
	 * after W's (it judged "absent" during W's take); then K is killed
	 * before its check: cache 1's lock is free */
	struct claim_rec kr = rec_of("eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", wr->host, wr->boot,
				     fx.cache[1], wr->renewed + 1);
	kr.ns_mnt = wr->ns_mnt;
	kr.ns_pid = wr->ns_pid;
	kr.pid = 999999;
	snprintf(kr.instance, sizeof(kr.instance), "%s", "0123456789abcdef0123456789abcdef");
	char kb[CLAIM_MAX];
	int n = claim_format(&kr, kb, sizeof(kb));
	cr_assert_gt(n, 0);
	cr_assert_eq(backing_put_new(fx.b, CLAIM_FILE, kb, (size_t)n), 0);
	close(fx.lock_fd[1]);
	fx.lock_fd[1] = -1;
	return w;
}

static void r55_two_holders(const char *catalog, int cache, const char *tag)
{
	char wb[CLAIM_MAX], msg[PATH_MAX + 512];
	size_t wl = 0;
	struct claim_rec wr;
	struct claim *w = r55_setup(wb, &wl, &wr), *u = NULL;
	int urc = claim_acquire(fx.b, catalog, false, true, fx.cache[cache], 60, &u, msg,
				sizeof(msg));
	bool w_holds = !claim_lost(w) && claim_may_write(w);
	bool u_holds = urc == 0 && !claim_lost(u) && claim_may_write(u);
	fprintf(stderr, "review55 F1 (%s): U rc %d (%s); W holds %d, U holds %d, asides %d\n", tag,
		urc, urc ? msg : "held", w_holds, u_holds, system_count_tmp_asides());
	claim_test_renew(w);
	fprintf(stderr, "review55 F1 (%s): after W's renewal: W lost %d, U lost %d\n", tag,
		claim_lost(w), u ? claim_lost(u) : -1);
	claim_end(u, false);
	claim_end(w, false);
	cr_assert(!(w_holds && u_holds), "W and U both hold the claim: two holders");
}

TestSuite(claim_review55, .init = setup, .fini = teardown);

Test(claim_review55, a_dead_creators_claim_in_a_movers_gap_is_newer_than_the_winners_aside)
{
	r55_two_holders("dddddddddddddddddddddddddddddddd", 2, "stale");
}

Test(claim_review55, a_killed_takers_restart_judges_its_claim_in_a_movers_gap_ours)
{
	r55_two_holders("eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", 1, "ours");
}
