/* Unit tests for meta/pg.c and meta/lease.c against a real PostgreSQL server
 * that each test starts for itself (tests/pg/pgserver.sh: a copy of a
 * cluster initdb made once, in a private directory, a Unix socket only, stopped on every path — a watchdog
 * stops it if the test process dies on a signal).
 *
 * pg: a URL that is not PostgreSQL and a server that is not there are one
 * clear error each; a server restarted or killed in the middle of a stream
 * of transactions is ridden out (every transaction's effect lands exactly
 * once); one that stays away longer than the timeout fails the call.
 * lease: two nodes renew; a lease that runs out is renewed until the other
 * node sweeps it (after a grace), then fences its node's transactions and
 * cannot be renewed; it is swept once; a sweep waits for
 * a fenced transaction in flight (L2); a duty is held by one node at a time
 * and passes on when its term runs out (L3). A node whose link to the
 * database is cut (the server in its own network namespace, reached over a
 * veth pair, tests/pg/netns.sh) fails its calls within the timeout instead
 * of hanging, is swept by the other node, and cannot renew once the link
 * is back (L1). */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lease.h"
#include "pg.h"
#include "pgtest.h"
#include "support.h"

TestSuite(lease, .init = pt_start, .fini = pt_stop, .timeout = 60);

/* A pg with the lease statements and schema, and a lease on it. */
static struct pg *tl_open(struct lease *l, unsigned timeout_ms)
{
	char err[512] = "";
	struct pg *pg = NULL;
	int rc = pg_open(pt_url, timeout_ms, lease_stmts, lease_nstmts, &pg, err, sizeof(err));
	cr_assert_eq(rc, 0, "pg_open: %d %s", rc, err);
	OK(lease_schema(pg));
	memset(l, 0, sizeof(*l));
	l->pg = pg;
	return pg;
}

static void tl_sleep_ms(unsigned ms)
{
	usleep(ms * 1000);
}

Test(lease, bad_url_and_absent_server_are_one_clear_error)
{
	char err[512] = "";
	struct pg *pg = NULL;
	FAILS(pg_open("mysql://x@y/z", 1000, NULL, 0, &pg, err, sizeof(err)), EINVAL);
	cr_assert(strstr(err, "mysql://x@y/z") && strstr(err, "not a PostgreSQL URL"), "%s", err);
	cr_assert_null(pg);

	err[0] = '\0';
	FAILS(pg_open("postgresql://ckptfs:s3cret@/ckptfs?host=/nonexistent-ckptfs&port=5",
		      1000, NULL, 0, &pg, err, sizeof(err)),
	      ENOTCONN);
	cr_assert(strstr(err, "cannot connect"), "%s", err);
	cr_assert(strstr(err, "postgresql://ckptfs@/ckptfs"), "the URL is named: %s", err);
	cr_assert_null(strstr(err, "s3cret"), "the password is not shown: %s", err);
}

Test(lease, two_nodes_renew_and_list)
{
	struct lease a, b;
	struct pg *pa = tl_open(&a, 5000), *pb = tl_open(&b, 5000);
	OK(lease_register(&a, "node-a", 10000));
	OK(lease_register(&b, "node-b", 10000));
	cr_assert_neq(a.node_id, b.node_id);
	OK(lease_renew(&a));
	OK(lease_renew(&b));
	struct lease_node nodes[4];
	size_t n;
	OK(lease_list(&a, nodes, 4, &n));
	cr_assert_eq(n, 2);
	cr_assert_str_eq(nodes[0].name, "node-a");
	cr_assert_str_eq(nodes[1].state, "live");
	cr_assert(nodes[1].left_ms > 5000 && nodes[1].left_ms <= 10000, "left %" PRId64,
		  nodes[1].left_ms);
	uint64_t ids[4];
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 0, "nobody is past a lease");
	OK(lease_release(&a, false));
	OK(lease_list(&b, nodes, 4, &n));
	cr_assert_str_eq(nodes[0].state, "gone");
	FAILS(lease_renew(&a), ESTALE); /* L1: gone stays gone */
	pg_close(pa);
	pg_close(pb);
}

struct tl_fenced {
	struct lease *l;
	int rc;
};

static int tl_fence_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct tl_fenced *f = arg;
	return f->rc = lease_fence(f->l);
}

Test(lease, a_lease_that_ran_out_is_renewed_until_swept_then_fenced_for_good)
{
	struct lease a, b;
	struct pg *pa = tl_open(&a, 5000), *pb = tl_open(&b, 5000);
	OK(lease_register(&a, "node-a", 1500));
	OK(lease_register(&b, "node-b", 10000));
	struct tl_fenced f = { &a, 1 };
	OK(pg_txn(pa, tl_fence_body, &f));
	cr_assert_eq(f.rc, 0, "a live node passes its fence");

	tl_sleep_ms(1800);
	/* a ran out, but nothing was decided about it yet: it may still change
	 * shared state and renew (L1, L2); it may not decide about others (L4) */
	uint64_t ids[4];
	size_t n = 9;
	FAILS(lease_sweep(&a, ids, 4, &n), ESTALE);
	bool taken = true;
	FAILS(lease_duty_take(&a, "keep", 1000, &taken), ESTALE);
	cr_assert(!taken);
	OK(pg_txn(pa, tl_fence_body, &f));
	OK(lease_renew(&a));
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 0, "a node that renewed in time is not swept");

	/* a runs out again; one more of its terms of grace (L4), then b sweeps it */
	tl_sleep_ms(2200);
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 0, "swept within the grace");
	tl_sleep_ms(1300);
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(ids[0], a.node_id);
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 0, "an expired node is swept once");
	/* swept: a is fenced and can never renew its way back (L1) */
	FAILS(pg_txn(pa, tl_fence_body, &f), ESTALE);
	FAILS(lease_renew(&a), ESTALE);
	struct lease_node nodes[4];
	OK(lease_list(&b, nodes, 4, &n));
	cr_assert_str_eq(nodes[0].state, "expired");
	cr_assert_str_eq(nodes[1].state, "live");
	pg_close(pa);
	pg_close(pb);
}

/* L4 in the sweep's own statement: run (without the fence before it, as
 * when PostgreSQL paused between the two) by a node whose lease ran out, it
 * expires nobody, not even the nodes whose leases ran out by a term; run by
 * a node with time left, it expires them, never itself. */
struct tl_sweep_stmt {
	struct lease *l;
	int rows;
};

static int tl_sweep_stmt_body(struct pg *pg, void *arg)
{
	struct tl_sweep_stmt *w = arg;
	size_t i = 0;
	while (i < lease_nstmts && strcmp(lease_stmts[i].name, "lease_sweep") != 0)
		i++;
	cr_assert_lt(i, lease_nstmts, "no statement lease_sweep");
	char id[24];
	snprintf(id, sizeof(id), "%" PRIu64, w->l->node_id);
	const char *params[] = { id };
	PGresult *res = NULL;
	int rc = pg_exec(pg, i, params, &res);
	w->rows = rc == 0 ? pg_rows(res) : -1;
	PQclear(res);
	return rc;
}

Test(lease, a_sweep_by_a_node_whose_own_lease_ran_out_expires_nobody)
{
	struct lease a, b, c;
	struct pg *pa = tl_open(&a, 5000), *pb = tl_open(&b, 5000), *pc = tl_open(&c, 5000);
	OK(lease_register(&a, "node-a", 300));
	OK(lease_register(&b, "node-b", 300));
	tl_sleep_ms(900); /* both ran out, and by one more term */
	struct tl_sweep_stmt w = { &a, -1 };
	OK(pg_txn(pa, tl_sweep_stmt_body, &w));
	cr_assert_eq(w.rows, 0, "a sweep by a node whose own lease ran out expired %d node(s)", w.rows);
	OK(lease_register(&c, "node-c", 10000));
	w = (struct tl_sweep_stmt){ &c, -1 };
	OK(pg_txn(pc, tl_sweep_stmt_body, &w));
	cr_assert_eq(w.rows, 2, "a node with time left sweeps the two that ran out");
	pg_close(pa);
	pg_close(pb);
	pg_close(pc);
}

/* L2: node a holds a fenced transaction open past its lease; b's sweep must
 * wait for it, so a's work lands before a is declared expired. */
struct tl_slow {
	struct lease *l;
	unsigned hold_ms;
	int64_t end_ns;
};

static int tl_slow_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct tl_slow *s = arg;
	int rc = lease_fence(s->l);
	if (rc)
		return rc;
	tl_sleep_ms(s->hold_ms);
	s->end_ns = ts_now_ns();
	return 0;
}

static void *tl_slow_thread(void *arg)
{
	struct tl_slow *s = arg;
	int rc = pg_txn(s->l->pg, tl_slow_body, s);
	return (void *)(intptr_t)rc;
}

Test(lease, a_sweep_waits_for_a_fenced_transaction)
{
	struct lease a, b;
	struct pg *pa = tl_open(&a, 5000), *pb = tl_open(&b, 5000);
	OK(lease_register(&a, "node-a", 1500));
	OK(lease_register(&b, "node-b", 10000));
	struct tl_slow s = { &a, 4800, 0 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, tl_slow_thread, &s), 0);
	tl_sleep_ms(3300); /* a's lease and its grace (L4) ran out; its transaction is still open */
	uint64_t ids[4];
	size_t n;
	OK(lease_sweep(&b, ids, 4, &n));
	int64_t swept_ns = ts_now_ns();
	void *ret;
	pthread_join(t, &ret);
	cr_assert_eq((intptr_t)ret, 0, "a's fenced transaction committed");
	cr_assert_eq(n, 1);
	cr_assert(s.end_ns > 0 && swept_ns >= s.end_ns,
		  "the sweep returned %.0f ms before a's transaction ended",
		  (double)(s.end_ns - swept_ns) / 1e6);
	pg_close(pa);
	pg_close(pb);
}

Test(lease, a_duty_is_held_by_one_node_at_a_time)
{
	struct lease a, b;
	struct pg *pa = tl_open(&a, 5000), *pb = tl_open(&b, 5000);
	OK(lease_register(&a, "node-a", 10000));
	OK(lease_register(&b, "node-b", 10000));
	bool ta = false, tb = true;
	OK(lease_duty_take(&a, "keep", 2000, &ta));
	OK(lease_duty_take(&b, "keep", 2000, &tb));
	cr_assert(ta && !tb, "a holds keep, b does not");
	OK(lease_duty_take(&a, "keep", 2000, &ta));
	cr_assert(ta, "the holder extends its term");
	OK(lease_duty_take(&b, "reclaim", 2000, &tb));
	cr_assert(tb, "another duty is free");
	OK(lease_duty_drop(&a, "keep"));
	OK(lease_duty_take(&b, "keep", 2000, &tb));
	cr_assert(tb, "a dropped duty is taken");
	tl_sleep_ms(2300);
	OK(lease_duty_take(&a, "keep", 2000, &ta));
	cr_assert(ta, "a term that ran out passes on");
	OK(lease_duty_take(&b, "keep", 2000, &tb));
	cr_assert(!tb);
	/* a holder that is no longer live (here unmounted) holds nothing (L3) */
	OK(lease_duty_take(&a, "keep", 60000, &ta));
	cr_assert(ta);
	OK(lease_release(&a, false));
	OK(lease_duty_take(&b, "keep", 2000, &tb));
	cr_assert(tb, "a duty dies with its node, before its term");
	pg_close(pa);
	pg_close(pb);
}

/* ---- the database going away ---- */

/* Transaction i moves the counter from i-1 to i: conditioned on the state it
 * changes, as pg.h P2 asks of a body, so a COMMIT whose answer was lost and
 * is run again adds nothing. */
static const struct pg_stmt tl_count_stmts[] = {
	{ "tl_bump", "UPDATE tl_count SET n = n + 1, last = $1::bigint WHERE last < $1::bigint", 1 },
	{ "tl_read", "SELECT n, last FROM tl_count", 0 },
};

struct tl_stream {
	struct pg *pg;
	int total;
	int done;
	int rc;
};

struct tl_bump {
	int i;
};

static int tl_bump_body(struct pg *pg, void *arg)
{
	char v[16];
	snprintf(v, sizeof(v), "%d", ((struct tl_bump *)arg)->i);
	const char *params[] = { v };
	return pg_exec(pg, 0, params, NULL);
}

static void *tl_stream_thread(void *arg)
{
	struct tl_stream *s = arg;
	for (int i = 1; i <= s->total; i++) {
		struct tl_bump b = { i };
		s->rc = pg_txn(s->pg, tl_bump_body, &b);
		if (s->rc)
			break;
		__atomic_store_n(&s->done, i, __ATOMIC_RELEASE);
		tl_sleep_ms(5);
	}
	return NULL;
}

static int tl_read_body(struct pg *pg, void *arg)
{
	PGresult *res;
	int rc = pg_exec(pg, 1, NULL, &res);
	if (rc == 0) {
		int64_t *out = arg;
		out[0] = pg_int(res, 0, 0);
		out[1] = pg_int(res, 0, 1);
		PQclear(res);
	}
	return rc;
}

static struct pg *tl_counter(unsigned timeout_ms)
{
	char err[512] = "";
	struct pg *pg = NULL;
	int rc = pg_open(pt_url, timeout_ms, tl_count_stmts, 2, &pg, err, sizeof(err));
	cr_assert_eq(rc, 0, "pg_open: %s", err);
	OK(pg_exec_plain(pg, "CREATE TABLE tl_count(n bigint, last bigint);"
			     "INSERT INTO tl_count VALUES (0, 0)"));
	return pg;
}

static void tl_wait_done(struct tl_stream *s, int at_least)
{
	for (int i = 0; i < 2000 && __atomic_load_n(&s->done, __ATOMIC_ACQUIRE) < at_least; i++)
		tl_sleep_ms(5);
}

static void tl_stream_check(struct tl_stream *s)
{
	cr_assert_eq(s->rc, 0, "transaction %d failed: %d (%s)", s->done + 1, s->rc,
		     strerror(-s->rc));
	cr_assert_eq(s->done, s->total);
	int64_t v[2];
	OK(pg_txn(s->pg, tl_read_body, v));
	cr_assert_eq(v[0], s->total, "counter %" PRId64 " after %d transactions", v[0], s->total);
	cr_assert_eq(v[1], s->total);
}

Test(lease, transactions_ride_out_a_server_restart)
{
	struct tl_stream s = { tl_counter(10000), 120, 0, 0 };
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, tl_stream_thread, &s), 0);
	tl_wait_done(&s, 20);
	pt_server("restart");
	tl_wait_done(&s, 60);
	pt_server("kill"); /* as a crash: no shutdown message to the client */
	tl_sleep_ms(700);
	pt_server("resume");
	pthread_join(t, NULL);
	tl_stream_check(&s);
	struct pg_stats st;
	pg_get_stats(s.pg, &st);
	cr_assert(st.reconnects >= 2, "reconnected %" PRIu64 " times", st.reconnects);
	pg_close(s.pg);
}

static int tl_noop_body(struct pg *pg, void *arg)
{
	(void)arg;
	return pg_exec(pg, 1, NULL, NULL);
}

Test(lease, a_server_away_past_the_timeout_fails_the_call)
{
	struct pg *pg = tl_counter(800);
	pt_server("kill");
	int64_t t0 = ts_now_ns();
	FAILS(pg_txn(pg, tl_noop_body, NULL), ENOTCONN);
	double ms = (double)(ts_now_ns() - t0) / 1e6;
	cr_assert(ms >= 700 && ms < 10000, "gave up after %.0f ms (timeout 800 ms)", ms);
	pt_server("resume");
	tl_sleep_ms(1100); /* pg.h P8: past the deadline, one try a second */
	OK(pg_txn(pg, tl_noop_body, NULL)); /* and comes back once it is there */
	pg_close(pg);
}

/* pg.h P8 (review 49 F2): past an outage's deadline a stopping daemon's
 * calls fail at once, but the connection is tried again once a second, so
 * a database back during the unmount is reached (before, never again). */
Test(lease, a_stopping_connection_past_its_deadline_gets_through_once_the_server_is_back)
{
	struct pg *pg = tl_counter(800);
	pg_stopping(pg);
	pt_server("kill");
	FAILS(pg_txn(pg, tl_noop_body, NULL), ENOTCONN); /* rides out 800 ms */
	int64_t t0 = ts_now_ns();
	FAILS(pg_txn(pg, tl_noop_body, NULL), ENOTCONN); /* past it: at once */
	double ms = (double)(ts_now_ns() - t0) / 1e6;
	cr_assert(ms < 500, "a call past the deadline took %.0f ms", ms);
	pt_server("resume");
	tl_sleep_ms(1100);
	OK(pg_txn(pg, tl_noop_body, NULL));
	pg_close(pg);
}

/* ---- a partition: the database on another host, the link cut ---- */

TestSuite(lease_net, .init = pt_net_start, .fini = pt_net_stop, .timeout = 90);

Test(lease_net, a_partitioned_node_fails_fast_is_swept_and_cannot_come_back)
{
	/* a: over TCP across the veth pair; b: the server's local socket */
	struct lease a, b;
	struct pg *pa = tl_open(&a, 1500);
	char local[256];
	pt_local_url(local, sizeof(local));
	char err[512] = "";
	struct pg *pb = NULL;
	int rc = pg_open(local, 5000, lease_stmts, lease_nstmts, &pb, err, sizeof(err));
	cr_assert_eq(rc, 0, "pg_open %s: %s", local, err);
	memset(&b, 0, sizeof(b));
	b.pg = pb;
	cr_assert(strstr(pg_name(pa), pt_ns_ip), "a reaches the server over TCP: %s", pg_name(pa));

	OK(lease_register(&a, "node-a", 1000));
	OK(lease_register(&b, "node-b", 30000));
	OK(lease_renew(&a));

	pt_netns("cut");
	int64_t t0 = ts_now_ns();
	rc = lease_renew(&a);
	double ms = (double)(ts_now_ns() - t0) / 1e6;
	cr_assert_eq(rc, -ENOTCONN, "a renewal across a cut link: %d", rc);
	cr_assert(ms < 20000, "the call hung %.0f ms on a cut link", ms);

	uint64_t ids[4];
	size_t n = 0;
	for (int i = 0; i < 50 && n == 0; i++) {
		OK(lease_sweep(&b, ids, 4, &n));
		if (n == 0)
			tl_sleep_ms(100);
	}
	cr_assert_eq(n, 1, "b swept a once its lease ran out");
	cr_assert_eq(ids[0], a.node_id);

	pt_netns("heal");
	tl_sleep_ms(1100); /* pg.h P8: past the outage's deadline, one try a second */
	FAILS(lease_renew(&a), ESTALE); /* L1: back on the network, still out */
	struct tl_fenced f = { &a, 1 };
	FAILS(pg_txn(pa, tl_fence_body, &f), ESTALE);
	pg_close(pa);
	pg_close(pb);
}

/* ---- L7: an expired node is settled once, whoever expired it ---- */

struct tl_settle {
	struct lease *l;
	uint64_t dead;
	bool claimed;
};

static int tl_settle_body(struct pg *pg, void *arg)
{
	(void)pg;
	struct tl_settle *s = arg;
	int rc = lease_fence(s->l);
	return rc ? rc : lease_settle_claim(s->l, s->dead, &s->claimed);
}

/* The sweep that expired a reports it once (a run of its body again, after
 * a lost reply, reports nothing), but a is listed to be settled until one
 * settlement claims it; a claim run again, and one of a live node, claim
 * nothing. */
Test(lease, an_expired_node_is_listed_to_settle_until_one_settlement_claims_it)
{
	struct lease a, b;
	struct pg *pa = tl_open(&a, 5000), *pb = tl_open(&b, 5000);
	OK(lease_register(&a, "node-a", 1000));
	OK(lease_register(&b, "node-b", 10000));
	uint64_t ids[4];
	size_t n = 9;
	OK(lease_unsettled(&b, ids, 4, &n));
	cr_assert_eq(n, 0, "nobody expired");
	struct tl_settle s = { &b, b.node_id, true };
	OK(pg_txn(pb, tl_settle_body, &s));
	cr_assert(!s.claimed, "a live node is not settled");

	tl_sleep_ms(2300);
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 1);
	OK(lease_sweep(&b, ids, 4, &n));
	cr_assert_eq(n, 0, "the run again reports nothing");
	OK(lease_unsettled(&b, ids, 4, &n));
	cr_assert_eq(n, 1, "but a is still to be settled");
	cr_assert_eq(ids[0], a.node_id);
	OK(lease_unsettled(&b, ids, 4, &n));
	cr_assert_eq(n, 1, "listing settles nothing");

	s = (struct tl_settle){ &b, a.node_id, false };
	OK(pg_txn(pb, tl_settle_body, &s));
	cr_assert(s.claimed);
	OK(pg_txn(pb, tl_settle_body, &s));
	cr_assert(!s.claimed, "settled once: a settlement run again does nothing");
	OK(lease_unsettled(&b, ids, 4, &n));
	cr_assert_eq(n, 0);
	struct lease_node nodes[4];
	OK(lease_list(&b, nodes, 4, &n));
	cr_assert_str_eq(nodes[0].state, "expired", "settled, still shown expired");
	pg_close(pa);
	pg_close(pb);
}

/* L7 on a database made before the settled column: the schema adds it,
 * and the expired rows there are settled once more (the old sweep may
 * have expired them without settling them). */
Test(lease, an_old_database_gets_the_settled_column_and_settles_its_expired_rows_again)
{
	PGconn *raw = PQconnectdb(pt_url);
	cr_assert(raw && PQstatus(raw) == CONNECTION_OK);
	PGresult *r = PQexec(raw,
			     "CREATE TABLE ckpt_nodes (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL,"
			     " state TEXT NOT NULL CHECK (state IN ('live', 'expired', 'gone')),"
			     " started TIMESTAMPTZ NOT NULL, lease_until TIMESTAMPTZ NOT NULL,"
			     " lease_ms BIGINT NOT NULL DEFAULT 0);"
			     "INSERT INTO ckpt_nodes(name, state, started, lease_until, lease_ms) VALUES"
			     " ('old-expired', 'expired', now(), now(), 1000),"
			     " ('old-gone', 'gone', now(), now(), 1000)");
	cr_assert_eq(PQresultStatus(r), PGRES_COMMAND_OK, "%s", PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(raw);
	struct lease b;
	struct pg *pb = tl_open(&b, 5000);
	OK(lease_register(&b, "node-b", 10000));
	uint64_t ids[4];
	size_t n = 0;
	OK(lease_unsettled(&b, ids, 4, &n));
	cr_assert_eq(n, 1);
	cr_assert_eq(ids[0], 1, "the old expired row, not the gone one");
	pg_close(pb);
}

/* L9: a node that leaves holding chunks not uploaded is expired, not gone:
 * listed to be settled at once (no lease to wait out), never renewed
 * again; a duty it held is free to take. */
Test(lease, a_release_holding_chunks_not_uploaded_leaves_the_node_expired_to_be_settled)
{
	struct lease a, b;
	struct pg *pa = tl_open(&a, 5000);
	struct pg *pb = tl_open(&b, 5000);
	OK(lease_register(&a, "node-a", 30000));
	OK(lease_register(&b, "node-b", 30000));
	bool taken = false;
	OK(lease_duty_take(&a, "keep", 30000, &taken));
	cr_assert(taken);
	OK(lease_release(&a, true));
	struct lease_node nodes[4];
	size_t n = 0;
	OK(lease_list(&b, nodes, 4, &n));
	cr_assert_str_eq(nodes[0].state, "expired");
	FAILS(lease_renew(&a), ESTALE);
	uint64_t ids[4];
	OK(lease_unsettled(&b, ids, 4, &n));
	cr_assert_eq(n, 1, "to be settled by the next sweep, its lease 30 s from running out");
	cr_assert_eq(ids[0], a.node_id);
	OK(lease_duty_take(&b, "keep", 30000, &taken));
	cr_assert(taken, "a duty dies with its node (L3)");
	OK(lease_release(&b, false));
	OK(lease_list(&a, nodes, 4, &n));
	cr_assert_str_eq(nodes[1].state, "gone");
	OK(lease_unsettled(&a, ids, 4, &n));
	cr_assert_eq(n, 1, "a gone node is nobody's to settle");
	pg_close(pa);
	pg_close(pb);
}

/* L10: the daemon holding a cache's lock takes over the earlier nodes of
 * that cache id at once, with time left on their leases: they are expired
 * (their renewal fails, -ESTALE) and listed to settle, with those of the
 * cache expired earlier and not settled; a node of another cache, one with
 * the same name (the same path on another host), and one with no cache id
 * (a tool's node, an old database's row) are untouched. */
Test(lease, a_cache_taken_over_expires_only_its_earlier_nodes)
{
	struct lease old1, old2, other, noid, now;
	struct pg *p1 = tl_open(&old1, 5000), *p2 = tl_open(&old2, 5000), *po = tl_open(&other, 5000),
		  *pn = tl_open(&noid, 5000), *pw = tl_open(&now, 5000);
	OK(lease_register_cache(&old1, "host1:10:/cache", "c0ffee01", 60000));
	OK(lease_register_cache(&old2, "host1:11:/cache", "c0ffee01", 60000));
	OK(lease_release(&old2, true)); /* L9: expired, not settled */
	OK(lease_register_cache(&other, "host1:10:/cache", "beef0002", 60000));
	OK(lease_register_cache(&noid, "host1:12:/cache", NULL, 60000));
	OK(lease_register_cache(&now, "host1:13:/cache", "c0ffee01", 60000));
	uint64_t expired[4], ids[4];
	size_t ne = 9, n = 9;
	OK(lease_cache_take_over(&now, "c0ffee01", expired, &ne, ids, 4, &n));
	cr_assert_eq(ne, 1, "the live earlier node of the cache, expired now");
	cr_assert_eq(expired[0], old1.node_id);
	cr_assert_eq(n, 2, "both earlier nodes of the cache are to settle");
	cr_assert_eq(ids[0], old1.node_id);
	cr_assert_eq(ids[1], old2.node_id);
	FAILS(lease_renew(&old1), ESTALE);
	OK(lease_renew(&other));
	OK(lease_renew(&noid));
	OK(lease_renew(&now));
	OK(lease_cache_take_over(&now, "c0ffee01", expired, &ne, ids, 4, &n));
	cr_assert_eq(ne, 0, "run again: nobody is expired twice");
	cr_assert_eq(n, 2, "still to settle until a settlement claims them (L7)");
	pg_close(p1);
	pg_close(p2);
	pg_close(po);
	pg_close(pn);
	pg_close(pw);
}
