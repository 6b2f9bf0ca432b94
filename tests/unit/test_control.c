/* Unit tests for fs/control.c: the control service started on CACHE/control.sock
 * in a temporary directory, with a real catalog, reader and recent, and the
 * generation verbs and the other services' getters handed in as fakes; the
 * tests speak the protocol of fs/lib/control_proto.h as ckptfs-admin does.
 * hello tells the mount, stats the live counters and the bounds in force,
 * commit/pin/rm reach the generation policy only for a live generation, and
 * a bad request gets one error line that names what was wrong. */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cache.h"
#include "control.h"
#include "generation.h"
#include "reader.h"
#include "recent.h"
#include "store.h"
#include "support.h"
#include "uploader.h"

#define MiB ((uint64_t)1 << 20)

static struct {
	char dir[128];
	char cat_path[192];
	struct cat *cat;
	struct reader *reader;
	struct recent *recent;
	struct control *ctl;
	/* what the fakes saw */
	int commits, pins, removes, flushes;
	uint64_t last_id;
	bool last_flag;
} tc;

/* ---- fakes of the services control calls ---- */

static int tc_gen_commit(struct gen_policy *g, uint64_t gen_id, const char *rule)
{
	cr_assert_null(g);
	cr_assert_str_eq(rule, "admin");
	tc.commits++;
	tc.last_id = gen_id;
	return cat_gen_commit(tc.cat, gen_id, rule);
}

static int tc_gen_pin(struct gen_policy *g, uint64_t gen_id, bool pinned)
{
	tc.pins++;
	tc.last_id = gen_id;
	tc.last_flag = pinned;
	return 0;
}

static int tc_gen_remove(struct gen_policy *g, uint64_t gen_id, bool force)
{
	tc.removes++;
	tc.last_id = gen_id;
	tc.last_flag = force;
	return -EIO; /* the policy could not end it */
}

static void tc_nodes_flush(struct node_table *t)
{
	tc.flushes++;
}

static void tc_cache_stats(struct cache *c, struct cache_stats *out)
{
	cr_assert_eq((void *)c, (void *)&tc);
	memset(out, 0, sizeof(*out));
	out->hits = 41;
	out->fetched_bytes = 4096;
}

static void tc_uploader_stats(struct uploader *u, struct uploader_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->chunks = 7;
	out->backing_down = true;
	snprintf(out->last_error, sizeof(out->last_error), "BACKING full");
}

static int tc_load(struct cache *c, const uint8_t hash[HASH_LEN], size_t cap,
		   struct store_chunk *out)
{
	return -ENOENT; /* no file is read here */
}

/* ---- fixture ---- */

static void tc_start(uint64_t cache_size, uint64_t dirty_max)
{
	const struct control_deps deps = {
		.cat = tc.cat, .reader = tc.reader, .recent = tc.recent,
		.cache = (struct cache *)&tc, .uploader = (struct uploader *)&tc,
		.gen_commit = tc_gen_commit, .gen_pin = tc_gen_pin, .gen_remove = tc_gen_remove,
		.nodes_flush = tc_nodes_flush, .cache_stats = tc_cache_stats,
		.uploader_stats = tc_uploader_stats,
		.cache_dir = tc.dir, .mountpoint = "/mnt/ckpt", .backing_spec = "/srv/backing",
		.gen_pattern = "step-{N}", .cache_size = cache_size, .dirty_max = dirty_max,
	};
	OK(control_start(&deps, &tc.ctl));
}

static void tc_setup(void)
{
	memset(&tc, 0, sizeof(tc));
	ts_tmpdir_make(tc.dir, sizeof(tc.dir), "control");
	ts_cat_open_in(tc.dir, "catalog.db", tc.cat_path, sizeof(tc.cat_path), &tc.cat);
	const struct reader_config rcfg = { .budget_bytes = 8 * MiB, .load = tc_load };
	OK(reader_new(&rcfg, tc.cat, NULL, &tc.reader));
	OK(recent_new(0, &tc.recent));
}

static void tc_teardown(void)
{
	control_stop(tc.ctl);
	recent_free(tc.recent);
	reader_free(tc.reader);
	ts_cat_close_checked(&tc.cat);
	ts_tmpdir_remove(tc.dir);
}

TestSuite(control, .init = tc_setup, .fini = tc_teardown);

/* ---- the client side, as ckptfs-admin speaks it ---- */

/* Sends line (no \n) on a new connection; returns the whole answer, which
 * the daemon ends by closing. The caller frees it. */
static char *tc_ask(const char *line)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" CONTROL_SOCK_NAME, tc.dir);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %s: %s",
		     sa.sun_path, strerror(errno));
	char req[CONTROL_LINE_MAX];
	int n = snprintf(req, sizeof(req), "%s\n", line);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	size_t cap = 1 << 16, len = 0;
	char *ans = malloc(cap);
	cr_assert_not_null(ans);
	for (;;) {
		ssize_t r = read(fd, ans + len, cap - 1 - len);
		cr_assert_geq(r, 0, "read: %s", strerror(errno));
		if (r == 0)
			break;
		len += (size_t)r;
		cr_assert_lt(len, cap - 1, "answer too long");
	}
	ans[len] = '\0';
	close(fd);
	return ans;
}

/* The answer has exactly one final line, the last, and it is want_final. */
static void tc_expect_final(const char *ans, const char *want_final)
{
	size_t len = strlen(ans);
	cr_assert(len > 0 && ans[len - 1] == '\n', "answer not ended by a line: '%s'", ans);
	const char *last = ans + len - 1;
	while (last > ans && last[-1] != '\n')
		last--;
	cr_assert(strncmp(last, want_final, strlen(want_final)) == 0,
		  "final line '%.*s', want '%s'", (int)(ans + len - 1 - last), last, want_final);
	for (const char *l = ans; l < last; l = strchr(l, '\n') + 1)
		cr_assert(strncmp(l, "data ", 5) == 0 || strncmp(l, "progress ", 9) == 0,
			  "a line before the final one is not data: '%s'", ans);
}

static void tc_expect_line(const char *ans, const char *line)
{
	size_t n = strlen(line);
	for (const char *l = ans; *l;) {
		if (strncmp(l, line, n) == 0 && l[n] == '\n')
			return;
		const char *nl = strchr(l, '\n');
		if (!nl)
			break;
		l = nl + 1;
	}
	cr_assert_fail("answer lacks the line '%s':\n%s", line, ans);
}

/* ---- tests ---- */

Test(control, hello_tells_the_mount_it_serves)
{
	tc_start(0, 0);
	char *ans = tc_ask(CONTROL_MAGIC " hello");
	tc_expect_final(ans, "ok");
	char line[256];
	snprintf(line, sizeof(line), "data pid %ld", (long)getpid());
	tc_expect_line(ans, line);
	tc_expect_line(ans, "data mountpoint /mnt/ckpt");
	snprintf(line, sizeof(line), "data cache %s", tc.dir);
	tc_expect_line(ans, line);
	tc_expect_line(ans, "data backing /srv/backing");
	tc_expect_line(ans, "data gen_pattern step-{N}");
	tc_expect_line(ans, "data protocol 1");
	free(ans);

	struct stat st;
	char path[256];
	snprintf(path, sizeof(path), "%s/" CONTROL_SOCK_NAME, tc.dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "the socket is the daemon user's alone");
}

Test(control, stats_sends_the_live_counters_and_the_bounds_in_force)
{
	tc_start(400 * MiB, 0); /* dirty_max 0: 3/4 of the bound */
	char *ans = tc_ask(CONTROL_MAGIC " stats");
	tc_expect_final(ans, "ok");
	cr_assert_eq(tc.flushes, 1, "stats flushes released inodes first");
	char line[128];
	snprintf(line, sizeof(line), "data chunk_cache_budget %" PRIu64, 8 * MiB);
	tc_expect_line(ans, line);
	tc_expect_line(ans, "data chunk_cache_bytes 0");
	tc_expect_line(ans, "data chunk_cache_hits 0");
	tc_expect_line(ans, "data chunk_hashes_reused 0");
	snprintf(line, sizeof(line), "data cache_bound %" PRIu64, 400 * MiB);
	tc_expect_line(ans, line);
	snprintf(line, sizeof(line), "data dirty_bound %" PRIu64, 300 * MiB);
	tc_expect_line(ans, line);
	tc_expect_line(ans, "data cache_hits 41");
	tc_expect_line(ans, "data fetched_bytes 4096");
	tc_expect_line(ans, "data uploaded_chunks 7");
	tc_expect_line(ans, "data backing_down 1");
	tc_expect_line(ans, "data upload_last_error BACKING full");
	free(ans);
}

Test(control, a_dirty_bound_above_the_cache_bound_is_cut_to_it)
{
	tc_start(100 * MiB, 200 * MiB);
	char *ans = tc_ask(CONTROL_MAGIC " stats");
	tc_expect_final(ans, "ok");
	char line[128];
	snprintf(line, sizeof(line), "data dirty_bound %" PRIu64, 100 * MiB);
	tc_expect_line(ans, line);
	free(ans);
}

static uint64_t tc_open_gen(const char *name, uint64_t step)
{
	uint64_t series = ts_mk(tc.cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t root;
	return ts_mkgen(tc.cat, series, name, step, true, &root);
}

Test(control, commit_pin_and_rm_reach_the_policy_for_a_live_generation_only)
{
	tc_start(0, 0);
	uint64_t id = tc_open_gen("step-1", 1);
	char req[128];
	snprintf(req, sizeof(req), CONTROL_MAGIC " commit %" PRIu64, id);
	char *ans = tc_ask(req);
	tc_expect_final(ans, "ok");
	tc_expect_line(ans, "data state committed");
	cr_assert_eq(tc.commits, 1);
	cr_assert_eq(tc.last_id, id);
	free(ans);

	snprintf(req, sizeof(req), CONTROL_MAGIC " pin %" PRIu64 " 1", id);
	ans = tc_ask(req);
	tc_expect_final(ans, "ok");
	tc_expect_line(ans, "data pinned 1");
	cr_assert(tc.pins == 1 && tc.last_id == id && tc.last_flag);
	free(ans);

	/* the policy's failure is the answer, not a lie of success */
	snprintf(req, sizeof(req), CONTROL_MAGIC " rm %" PRIu64 " force", id);
	ans = tc_ask(req);
	tc_expect_final(ans, "error 5 ");
	cr_assert(tc.removes == 1 && tc.last_flag);
	free(ans);

	/* no such generation: the policy is not called */
	ans = tc_ask(CONTROL_MAGIC " commit 999");
	tc_expect_final(ans, "error 2 no such live generation");
	free(ans);
	ans = tc_ask(CONTROL_MAGIC " pin 999 0");
	tc_expect_final(ans, "error 2 ");
	free(ans);
	cr_assert_eq(tc.commits, 1);
	cr_assert_eq(tc.pins, 1);
}

Test(control, an_open_generation_is_removed_only_with_force)
{
	tc_start(0, 0);
	uint64_t id = tc_open_gen("step-2", 2);
	char req[128];
	snprintf(req, sizeof(req), CONTROL_MAGIC " rm %" PRIu64, id);
	char *ans = tc_ask(req);
	tc_expect_final(ans, "error 16 the generation is open");
	cr_assert_eq(tc.removes, 0);
	free(ans);
}

Test(control, a_bad_request_gets_one_error_line_naming_what_was_wrong)
{
	tc_start(0, 0);
	static const struct {
		const char *req, *final;
	} cases[] = {
		{ CONTROL_MAGIC " frobnicate 1 2", "error 22 unknown verb frobnicate" },
		{ "ckptfs-control 2 hello", "error 22 not a ckptfs-control 1 request" },
		{ "hello", "error 22 not a ckptfs-control 1 request" },
		{ CONTROL_MAGIC, "error 22 no verb" },
		{ CONTROL_MAGIC " commit", "error 22 expected a generation id" },
		{ CONTROL_MAGIC " commit 12abc", "error 22 expected a generation id" },
		{ CONTROL_MAGIC " commit 0", "error 22 expected a generation id" },
		{ CONTROL_MAGIC " gc sometimes", "error 22 expected gc dry|run" },
		{ CONTROL_MAGIC " rebuild", "error 16 the catalog is in use" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *ans = tc_ask(cases[i].req);
		tc_expect_final(ans, cases[i].final);
		cr_assert(strchr(ans, '\n') == ans + strlen(ans) - 1,
			  "'%s': one line, got '%s'", cases[i].req, ans);
		free(ans);
	}
	uint64_t id = tc_open_gen("step-3", 3);
	char req[128];
	snprintf(req, sizeof(req), CONTROL_MAGIC " pin %" PRIu64 " yes", id);
	char *ans = tc_ask(req);
	tc_expect_final(ans, "error 22 expected pin GEN_ID 0|1");
	free(ans);
	cr_assert_eq(tc.pins + tc.commits + tc.removes, 0, "no bad request reached the policy");
}

/* Sends "hello" padded with spaces to len bytes and a newline, then (more)
 * bytes after it; the answer, to EOF. */
static char *tc_ask_long(size_t len, size_t more)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" CONTROL_SOCK_NAME, tc.dir);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	size_t n = len + 1 + more;
	char *req = malloc(n), *ans = malloc(1 << 16);
	cr_assert(req && ans);
	memset(req, ' ', n);
	memcpy(req, CONTROL_MAGIC " hello", strlen(CONTROL_MAGIC " hello"));
	req[len] = '\n';
	cr_assert_eq(write(fd, req, n), (ssize_t)n);
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, ans + got, (1 << 16) - 1 - got);
		cr_assert_geq(r, 0, "read: %s (the answer was lost)", strerror(errno));
		if (r == 0)
			break;
		got += (size_t)r;
	}
	ans[got] = '\0';
	close(fd);
	free(req);
	return ans;
}

/* review B 11: an over-long line got "no request line", or nothing at all
 * (the daemon closed with input unread: the connection was reset). */
Test(control, a_request_line_over_the_limit_gets_one_error_naming_the_limit)
{
	tc_start(0, 0);
	char *ans = tc_ask_long(CONTROL_LINE_MAX - 2, 0); /* 4095 bytes with its newline */
	tc_expect_final(ans, "ok");
	free(ans);
	ans = tc_ask_long(CONTROL_LINE_MAX - 1, 0);
	cr_assert_str_eq(ans, "error 7 request line longer than 4095 bytes with its newline\n");
	free(ans);
	ans = tc_ask_long(5000, 100000); /* more behind it, read before the close */
	cr_assert_str_eq(ans, "error 7 request line longer than 4095 bytes with its newline\n");
	free(ans);
	ans = tc_ask(CONTROL_MAGIC " hello");
	tc_expect_final(ans, "ok");
	free(ans);
}

Test(control, a_verb_whose_service_is_not_there_is_enosys)
{
	const struct control_deps deps = { .cat = tc.cat, .cache_dir = tc.dir, .mountpoint = "/m",
					   .backing_spec = "/b", .gen_pattern = "p" };
	OK(control_start(&deps, &tc.ctl));
	uint64_t id = tc_open_gen("step-4", 4);
	char req[128];
	snprintf(req, sizeof(req), CONTROL_MAGIC " commit %" PRIu64, id);
	char *ans = tc_ask(req);
	tc_expect_final(ans, "error 38 commit is not available");
	free(ans);
	/* stats without the other services: what there is, and ok */
	ans = tc_ask(CONTROL_MAGIC " stats");
	tc_expect_final(ans, "ok");
	cr_assert_null(strstr(ans, "chunk_cache_hits"), "no reader, no reader counters");
	cr_assert_null(strstr(ans, "uploaded_chunks"));
	tc_expect_line(ans, "data write_back 1");
	free(ans);
}

Test(control, stop_removes_the_socket)
{
	tc_start(0, 0);
	char path[256];
	snprintf(path, sizeof(path), "%s/" CONTROL_SOCK_NAME, tc.dir);
	cr_assert_eq(access(path, F_OK), 0);
	control_stop(tc.ctl);
	tc.ctl = NULL;
	cr_assert_neq(access(path, F_OK), 0);
}

/* ---- the names on the lines (control_proto.c) ---- */

Test(control_proto, a_name_round_trips_and_nothing_left_splits_or_ends_a_line)
{
	const char *name = "run 1/step%20\x01\n\x7f/é end";
	char esc[256];
	control_proto_escape(name, false, esc, sizeof(esc));
	cr_assert_str_eq(esc, "run%201/step%2520%01%0A%7F/é%20end");
	char back[256];
	snprintf(back, sizeof(back), "%s", esc);
	cr_assert_eq(control_proto_unescape(back), 0);
	cr_assert_str_eq(back, name);
	/* the last field of an answer keeps its spaces */
	control_proto_escape(name, true, esc, sizeof(esc));
	cr_assert_str_eq(esc, "run 1/step%2520%01%0A%7F/é end");
	snprintf(back, sizeof(back), "%s", esc);
	cr_assert_eq(control_proto_unescape(back), 0);
	cr_assert_str_eq(back, name);
}

Test(control_proto, an_escape_is_cut_whole_and_a_bad_one_refused)
{
	char esc[8];
	control_proto_escape("ab%cd", false, esc, sizeof(esc));
	cr_assert_str_eq(esc, "ab%25", "cut short at a whole escape");
	const char *bad[] = { "%", "%4", "%zz", "a%00b", "%g1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char s[16];
		snprintf(s, sizeof(s), "%s", bad[i]);
		cr_assert_eq(control_proto_unescape(s), -EINVAL, "'%s' decoded", bad[i]);
	}
}

/* ---- the daemon's side of an answer (control_proto.c) ---- */

Test(control_proto, an_answer_line_is_sent_whole_and_cut_to_the_line_limit)
{
	int sv[2];
	OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	char big[CONTROL_LINE_MAX * 2];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	control_proto_send(sv[0], "data k %s", big);
	cr_assert_eq(control_proto_error(sv[0], ENOENT, "no such generation"), ENOENT);
	close(sv[0]);
	static char got[CONTROL_LINE_MAX * 3];
	size_t n = 0;
	for (ssize_t r; (r = read(sv[1], got + n, sizeof(got) - 1 - n)) > 0;)
		n += (size_t)r;
	close(sv[1]);
	got[n] = '\0';
	char *nl = strchr(got, '\n');
	cr_assert_not_null(nl);
	cr_assert_eq((size_t)(nl - got), (size_t)CONTROL_LINE_MAX - 2, "the first line is cut, \\n kept");
	cr_assert_str_eq(nl + 1, "error 2 no such generation\n");
}

Test(control_proto, a_gen_id_is_a_decimal_above_zero)
{
	uint64_t id = 7;
	OK(control_proto_parse_id("42", &id));
	cr_assert_eq(id, 42);
	const char *bad[] = { "0", "-1", "", "4x", "x", " 4", "99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		id = 7;
		cr_assert_eq(control_proto_parse_id(bad[i], &id), -EINVAL, "'%s' parsed", bad[i]);
		cr_assert_eq(id, 7, "'%s' changed the id", bad[i]);
	}
	cr_assert_eq(control_proto_parse_id(NULL, &id), -EINVAL);
}
