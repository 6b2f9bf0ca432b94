/* lease — node leases, fencing and cluster-wide duties in the shared catalog
 * (issue 18: several nodes, one store).
 *
 * Each mount of a shared catalog is a node with a row in ckpt_nodes and a
 * lease that it renews. Time is the database server's (clock_timestamp()),
 * so the nodes' clocks do not matter. A node whose lease ran out is expired
 * by another node's sweep; from then on it may commit and delete nothing,
 * and the sweeper holds its open generations.
 *
 * Invariants:
 *  L1. A node row goes live → expired or live → gone, never back. A lease
 *      is renewed while its row is live, even after it ran out: until a
 *      sweep expired it nothing was decided about the node (its generations
 *      are not held, its writers still count), so a node held up longer
 *      than its term (PostgreSQL restarting, a pause) goes on as if it had
 *      been slow. Once swept, a renewal fails (-ESTALE) for good: a
 *      partitioned node that was given up cannot come back by renewing.
 *  L2. Fencing: a transaction of node N that changes shared state first calls
 *      lease_fence(N) inside that transaction (or, of one statement, carries
 *      the fence in that statement: L5). It succeeds only while N's row
 *      is live, and it holds the row FOR SHARE, so a sweep that would expire
 *      N waits for that transaction to end: either the transaction committed
 *      while N was live, or N is expired and it did nothing. There is no
 *      window in which both happen.
 *  L3. A cluster duty (keep-latest-k, chunk reclaim) is held by at most one
 *      live node at a time: lease_duty_take() succeeds for its holder, when
 *      the previous holder's term ran out, or when that holder is no longer
 *      live (swept or unmounted: a duty dies with its node); the holder fences its work
 *      with L2 (its duty term is no use to a node past its lease).
 *  L4. Deciding about other nodes (a sweep, taking a duty) takes a lease
 *      with time left, not only a live row (L1): a node whose own lease ran
 *      out cannot sweep or take a duty until it renewed. A sweep expires a
 *      node only once its lease ran out by one more of its own terms, and
 *      the daemon sweeps only after renewing without a gap for a whole term
 *      (fs/leasekeep.c), so after PostgreSQL was away for any length of
 *      time every node renews before any is swept. A renewal answered more
 *      than a third of a term after it was sent, or more than a term after
 *      the one before it, is such a gap too: a PostgreSQL that stalled
 *      (paused, not gone) answers the queued renewals late, and the first
 *      one answered must not sweep the others still queued (review 45 F2).
 *      The sweep's statement checks the sweeper's own lease itself, at the
 *      same instant as the others' (meta/lease.c LS_SWEEP): a PostgreSQL
 *      paused between the fence and the sweep runs the sweep when every
 *      lease looks run out, and then it expires nobody (a node never
 *      expires itself).
 *  L5. A fenced change of one statement carries its fence itself and runs
 *      as its own transaction (pg_read, pg.h P5): one round trip, not BEGIN,
 *      lease_fence, the statement and COMMIT. It names the fence as the WITH
 *      query LEASE_FENCE_WITH(node) (N's live row, FOR SHARE), conditions
 *      each of its writes on LEASE_LIVE, and returns at least one row, whose
 *      column 0 is LEASE_LIVE; lease_fenced() reads that. The row lock lasts
 *      to the statement's end, which is its transaction's end, so L2 holds as
 *      with lease_fence: a sweep that would expire N waits for the statement,
 *      or the statement finds the row expired (READ COMMITTED re-checks a
 *      row it waited for), writes nothing and returns false (-ESTALE).
 *      lease_f is read twice (a write's condition, column 0), so PostgreSQL
 *      materializes it: one lock, one answer for both.
 *  L6. A fenced transaction of several statements may carry its fence on
 *      its first statement instead of a lease_fence of its own: that
 *      statement names LEASE_FENCE_WITH(node), returns LEASE_LIVE as column
 *      0 (lease_fenced reads it) and conditions what it reads or locks on
 *      LEASE_LIVE; the body stops at -ESTALE before any write. The row lock
 *      is the transaction's to its COMMIT, as lease_fence's is (L2): one
 *      round trip fewer, the same fence.
 *  L7. Expiry and settlement are two steps, and the second is recorded:
 *      a sweep marks a node past its lease expired (settled false); its
 *      settlement (pggen.h X2) sets settled in the transaction that does
 *      the settling, claimed first with lease_settle_claim (the row FOR
 *      UPDATE, so a second settler waits, then finds it settled and does
 *      nothing; a body run again after a lost COMMIT reply, pg.h P2, does
 *      nothing either), fenced by the settler's own lease (L2). Until it
 *      is settled, an expired node is every sweep's work: lease_unsettled
 *      lists it (oldest first, a bounded batch per sweep), whoever expired
 *      it and whether that sweeper died, was cut off, failed or had its
 *      reply lost in between. An old database's expired rows get settled
 *      false with the column and are settled once more: X2 finds only what
 *      is still to do.
 *  L8. Work that another node redoes once this one is gone (removing a
 *      reclaim batch's objects from BACKING) is done only before a local
 *      deadline: lease_sure_until_ms of when a call that proved this node's
 *      lease had time left (lease_duty_take, L4) STARTED, plus the term, less
 *      a margin, on lease_clock_ms (monotonic, counting a suspended machine).
 *      That call's statement ran after the start, so the lease outlasts the
 *      deadline by the margin; a sweep comes one more term after the lease
 *      (L4), and the takeover (pgns.c NS_RECLAIM_BEGIN) one more again. A
 *      step checked against the deadline lands after a takeover only if it
 *      stalls for more than a whole term (docs/MULTINODE.md "Reclaim").
 *  L9. An unmount ends a node's row in one of two ways (lease_release): gone
 *      when the node holds no chunk that is not on BACKING, else expired,
 *      not settled, as a node past its lease is. Its uploads left queued
 *      (the uploader stopped with them, the store unreachable) name bytes
 *      only its cache has, and a node that may never mount again is a dead
 *      one for the saves naming them: the next sweep settles it (L7, pggen.h
 *      X2: those saves lost, re-checked by X10, its open ones held) at once,
 *      with no lease to wait out. The same cache mounted again is a new node
 *      whose uploads make those saves whole again (X10). Whether it holds
 *      any is the caller's to say (the chunk table is pgns's), asked after
 *      its uploader stopped, so nothing of this node is uploaded after.
 *  L10. A node's row carries the identity of the cache it mounted (cache_id:
 *      the random id its local catalog was given once, when it was made,
 *      this host's name and the (st_dev, st_ino) of the cache's lock file,
 *      catalog_shared.c S19 — never the cache's path, which another host
 *      may have too; NULL for a node that gives none, which matches
 *      nothing). One daemon at a time holds
 *      a cache (the flock on CACHE/lock, fs/lib/cachedir.h), so a daemon
 *      that holds it and registers has proven that every earlier node of
 *      the same cache_id is gone: its process ended, and with it every
 *      change it will ever start; one it sent before is fenced (L2): it
 *      committed while the row was live, or finds it expired and does
 *      nothing. lease_cache_take_over expires those rows at once (the
 *      lease's own time, L4, is no part of this proof: the lock is) and
 *      lists every one of them not settled yet, whoever expired it; the
 *      caller settles each as any sweep settles a dead node (L7, pggen.h
 *      X2: claimed once, held, lost marks, writing rows dropped, chunks
 *      adopted), before it serves, so the job that restarts on it never
 *      meets the dead incarnation's writing rows (review 45 F6). Before
 *      that, the chunks every earlier node of the cache held and BACKING
 *      lacks, settled or not, are the new node's where its cache has them
 *      whole, though its local catalog forgot them (catalog_shared.c S18),
 *      the other nodes already expired being settled first (S20: L7's work,
 *      no node is expired by it, L4).
 *      Only the
 *      daemon that holds the cache's lock may call it, from the open it
 *      serves with (fs/main.c says so with cat_shared_cfg.cache_locked; its
 *      open before daemonizing names no cache and is gone at the fork). A
 *      copy of a cache directory (cp -a, a baked image, a restored
 *      snapshot) has the catalog id but not the lock's inode or the host,
 *      so it is never taken for the original's restart (review 49 F1).
 *
 * SQL: only what PostgreSQL-compatible distributed databases accept too
 * (pg.h). All calls run their own transaction through pg_txn, except
 * lease_fence, which runs inside the caller's (from a pg_txn body).
 * L5's form (a SELECT .. FOR SHARE as a WITH query beside data-modifying
 * ones) is PostgreSQL's; YugabyteDB's YSQL (PostgreSQL 11's grammar, where a
 * WITH query is always materialized) accepts row locks and data-modifying
 * WITH queries alike; CockroachDB accepts FOR SHARE (v23.2 on; under its
 * default SERIALIZABLE the shared lock is off unless
 * enable_shared_locking_for_serializable, and serializability orders the
 * statement against the sweep's write of the same row instead: one of them
 * is retried, 40001, pg.h P2). No MATERIALIZED keyword (PostgreSQL 12 on):
 * reading lease_f twice does its work. Not run against either here. */
#ifndef CKPTFS_LEASE_H
#define CKPTFS_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pg.h"

/* The statements lease.c runs, for pg_open (the caller may prepend or append
 * its own; lease calls find theirs by name through lease_bind). */
extern const struct pg_stmt lease_stmts[];
extern const size_t lease_nstmts;

/* The tables; idempotent, safe to run from several nodes at once. */
int lease_schema(struct pg *pg);

/* lease calls run statements lease_stmts[first..] of pg's statement list:
 * first is where lease_stmts begin in the array given to pg_open. */
struct lease {
	struct pg *pg;
	size_t first;
	uint64_t node_id; /* 0 until registered */
	unsigned lease_ms;
};

/* A new live node row named name (host:pid and the cache directory, for
 * `ckptfs-admin nodes`), with lease_ms of lease. */
int lease_register(struct lease *l, const char *name, unsigned lease_ms);
/* As lease_register, the row carrying cache_id (L10; NULL or "": none). */
int lease_register_cache(struct lease *l, const char *name, const char *cache_id,
			 unsigned lease_ms);
/* L10, for the daemon holding the lock of cache cache_id only: every other
 * live node of cache_id expired (their ids in expired[0..*n_expired), at
 * most max), then up to max nodes of cache_id expired and not settled
 * (oldest first, in ids[0..*n)), for the caller to settle. */
int lease_cache_take_over(struct lease *l, const char *cache_id, uint64_t *expired,
			  size_t *n_expired, uint64_t *ids, size_t max, size_t *n);

/* Extends the lease by lease_ms from now. -ESTALE: the node was swept (L1);
 * it must stop changing shared state and say so. */
int lease_renew(struct lease *l);

/* Inside a pg_txn body of this node: 0 if the node is live (not swept),
 * -ESTALE if not (L2). */
int lease_fence(struct lease *l);

/* L5: the fence of a one-statement change, as a WITH query (lease_f) of
 * node parameter p, and the condition its writes and its column 0 take. */
#define LEASE_FENCE_WITH(p)                                                             \
	"lease_f AS (SELECT id FROM ckpt_nodes WHERE id = CAST(" p " AS BIGINT)"        \
	" AND state = 'live' FOR SHARE)"
#define LEASE_LIVE "EXISTS (SELECT 1 FROM lease_f)"

/* The fence's answer in the result of an L5 statement: 0 if the node was
 * live (its writes happened), -ESTALE if not (it wrote nothing), -EIO for
 * a result without the column (a statement not written to L5). */
int lease_fenced(const PGresult *res);

/* Marks expired every live node whose lease ran out; their ids in ids[0..*n)
 * (at most max). Settling them is lease_unsettled's list, not this one
 * (L7): a run of this body again, after a lost reply, reports nothing. */
int lease_sweep(struct lease *l, uint64_t *ids, size_t max, size_t *n);

/* L7: up to max expired nodes not settled yet, oldest first. */
int lease_unsettled(struct lease *l, uint64_t *ids, size_t max, size_t *n);

/* L7, inside a pg_txn body of this node that settles node dead, before it
 * changes anything: *claimed true if dead is expired and was not settled
 * (it is from this transaction's COMMIT on), false if it is settled already
 * or not expired (the body then does nothing). */
int lease_settle_claim(struct lease *l, uint64_t dead, bool *claimed);

/* An unmount: the node row goes to gone (L1), or to expired, not settled,
 * when holds says this node still holds chunks not uploaded (L9). */
int lease_release(struct lease *l, bool holds);

/* Takes or extends duty name (e.g. "keep", "reclaim") for term_ms; *taken
 * says whether this node holds it now (L3). A node past its lease never
 * takes it. */
int lease_duty_take(struct lease *l, const char *name, unsigned term_ms, bool *taken);
int lease_duty_drop(struct lease *l, const char *name);

/* L7: now on the clock of the local deadline, and the deadline of a call
 * that started at started_ms and proved the lease for term_ms (the
 * smaller of the lease's and the duty's terms). */
uint64_t lease_clock_ms(void);
uint64_t lease_sure_until_ms(uint64_t started_ms, unsigned term_ms);

/* One node as `ckptfs-admin nodes` shows it. */
struct lease_node {
	uint64_t id;
	char name[256];
	char state[16];    /* live, expired, gone */
	int64_t left_ms;   /* lease left (negative: ran out that long ago) */
};
int lease_list(struct lease *l, struct lease_node *out, size_t max, size_t *n);

#endif
