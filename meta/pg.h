/* pg — one connection to the shared catalog's PostgreSQL (issue 18, `-o meta=URL`).
 *
 * The shared catalog (several nodes, one store) keeps its namespace, chunks,
 * generations and node leases in PostgreSQL. This module is the connection
 * underneath: it opens a libpq URL, prepares the caller's statements, runs
 * transactions, and rides out a database that restarts or a network that
 * drops for a while, so that writers wait and go on instead of failing.
 *
 * Invariants:
 *  P1. Statements run prepared: each struct pg_stmt is prepared on its first
 *      use on a connection, and again on the new connection after a
 *      reconnect (so statements may name tables the schema makes later).
 *  P2. A transaction is run whole or not at all, and once. pg_txn() runs
 *      the whole body (BEGIN .. COMMIT) again after a lost connection, a
 *      serialization failure or a deadlock, until timeout_ms has passed since
 *      the first failure, but never one that may have committed: a body that
 *      wrote (ran a statement that is not a SELECT) commits with a token, its
 *      connection's row of ckpt_txns set to (client, seq) in the COMMIT's own
 *      round trip. When that COMMIT's answer is lost, pg_txn asks on a new
 *      connection, in one statement that also fences the lost attempt out
 *      (a late arrival of it then fails on the row): committed, and the call
 *      returns 0 with what the body left in its arg (the committed run's
 *      results, RETURNING rows included); not committed, and the body runs
 *      again. A body that only read is run again without asking. Past
 *      timeout_ms, or PG_TXN_ASK_MS after the COMMIT was sent, the outcome
 *      is unknown: -ENOTCONN, logged as such. The table holds a row per
 *      connection ever opened; rows untouched for a day are trimmed at
 *      pg_open (docs/MULTINODE.md "The connection").
 *  P3. Every error names the database by its URL without the password, says
 *      what failed and gives the server's own message, once.
 *  P4. One thread at a time uses a connection (a PGconn is not thread-safe):
 *      pg_txn holds the connection's mutex for the whole transaction.
 *  P5. pg_read runs a body without BEGIN .. COMMIT: each statement is its own
 *      transaction, one round trip instead of three for a body of one
 *      statement. It is for bodies that only read, whose statements need no
 *      common snapshot (the connection runs READ COMMITTED, where a
 *      transaction's statements each take their own snapshot anyway) and
 *      take no row lock meant to outlive their statement — or for one
 *      statement that writes, which is then its own whole transaction, its
 *      row locks held to its end (a fenced one: lease.h L5). Such a statement
 *      carries no token: it is run again after a lost answer, so it must be
 *      safe to run twice (conditioned on the state it changes), or write
 *      its call's token (pg_token) to ckpt_txns itself and recognise it.
 *  P6. A statement that finds, after some of its data-modifying WITH queries
 *      ran, that its change must not happen (a row it relies on changed
 *      under it) undoes itself by dividing by zero: SQLSTATE 22012 is
 *      -EBUSY, not logged (the statement's whole transaction rolls back;
 *      the caller says what it means). No statement divides by zero
 *      otherwise, but for the token of P2 when a lost attempt arrives late.
 *      It stands in for a server-side function's RAISE (none here, see
 *      below) and is plain SQL on every PostgreSQL-compatible database.
 *  P7 (pg.c): a lost answer can be injected by the unit tests alone
 *      (tests/unit/pgfault.h), to prove what callers do with it.
 *  P8. A connection waits out one outage, not one per call. Its calls
 *      share one deadline: the first that finds the database unreachable (or
 *      retries a transaction, P2) sets it to timeout_ms later, and every
 *      call rides out failures until then, not timeout_ms from its own
 *      first failure; a call that reaches the server ends that outage. So
 *      FUSE requests queued behind one connection's mutex, or one request
 *      that makes several calls (a rename: lookups, the move, the commit),
 *      fail together about timeout_ms into an outage, not one timeout_ms
 *      each (review 45 F7: 82 s for one rename with 20 s). Past it, a call
 *      whose connection is broken fails at once with -ENOTCONN, but for one
 *      try to connect a second (the first call a second or more after the
 *      last try ended makes it: connect_timeout, 2-5 s at most), so the node comes
 *      back by itself when the database does, a stopping daemon too (its
 *      upload drain and lease release get through once the database is
 *      back: review 49 F2), and a burst of calls costs one try, not one
 *      each. One line says so, once an outage. What
 *      a call's -ENOTCONN means is its caller's (a FUSE request replies the
 *      error; a stopping daemon leaves as if the database said no: the
 *      lease runs out, uploads are recorded by the next mount;
 *      docs/MULTINODE.md "Stopping during an outage").
 *
 * SQL stays within what PostgreSQL-compatible distributed databases also
 * accept (no advisory locks, no LISTEN/NOTIFY, no server-side functions):
 * clock_timestamp(), INSERT .. ON CONFLICT, UPDATE .. RETURNING, SELECT .. FOR
 * SHARE (also as a WITH query beside data-modifying ones, lease.h L5), and
 * retried serialization failures (docs/MULTINODE.md).
 *
 * Calls return 0 or a negative errno:
 *   -EINVAL     a URL that is not postgresql:// or postgres://
 *   -ENOTCONN   the database cannot be reached (at open, or for longer than
 *               timeout_ms later on); after a COMMIT whose answer was lost,
 *               the outcome is unknown (P2)
 *   -EEXIST     a unique constraint refused a row (SQLSTATE 23505)
 *   -EBUSY      a statement undid itself (P6)
 *   -EIO        any other error of the server
 *   a body's own negative errno, after a ROLLBACK. */
#ifndef CKPTFS_PG_H
#define CKPTFS_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include <libpq-fe.h>

struct pg;

/* A statement the caller runs by index: pg_exec(pg, i, ...) runs stmts[i]. */
struct pg_stmt {
	const char *name; /* unique per connection, for the server's prepared statement */
	const char *sql;  /* $1.. parameters, passed as text */
	int nparams;
};

/* Connects to url once (a database unreachable at mount is one clear error,
 * not a wait); stmts[0..n) must outlive the pg. err gets the message on
 * failure. timeout_ms bounds how long a later lost connection
 * is retried before a call fails with -ENOTCONN. */
int pg_open(const char *url, unsigned timeout_ms, const struct pg_stmt *stmts, size_t n,
	    struct pg **out, char *err, size_t err_size);
void pg_close(struct pg *pg); /* NULL is allowed */
/* The daemon is stopping: P8's line says so (NULL is allowed). Any thread. */
void pg_stopping(struct pg *pg);

/* The URL without its password, for messages. */
const char *pg_name(const struct pg *pg);

/* Runs body(pg, arg) inside BEGIN .. COMMIT (P2, P4). A body returns 0 to
 * commit, a negative errno to roll back; a body that got -EAGAIN from
 * pg_exec (the connection or the transaction was lost) returns it, and the
 * whole transaction is run again. */
int pg_txn(struct pg *pg, int (*body)(struct pg *pg, void *arg), void *arg);

/* Runs body(pg, arg) as pg_txn does, but each of its statements as its own
 * transaction (P5). */
int pg_read(struct pg *pg, int (*body)(struct pg *pg, void *arg), void *arg);

/* A token for one writing statement run through pg_read (P5) that cannot
 * be made safe to run twice by its conditions alone: this connection's
 * client id (*client) and its next seq of ckpt_txns (P2). Taken inside a
 * body, once per call (not per run of the body); the statement writes
 * (client, seq, done) to ckpt_txns in its own WITH query, so that run
 * again after a lost answer it finds its first run committed (pgns.h N9). */
uint64_t pg_token(struct pg *pg, uint64_t *client);

/* Runs statement i with params (text, NULL for SQL NULL) inside a body.
 * *res (if res is not NULL) gets the result on success; the caller
 * PQclear()s it. -EAGAIN: retry the transaction (return it from the body). */
int pg_exec(struct pg *pg, size_t i, const char *const *params, PGresult **res);

/* Runs one SQL text outside a transaction (schema set-up), with the retry of
 * P2. Statements that already did their work (a table that exists) are the
 * caller's to write idempotently (IF NOT EXISTS). */
int pg_exec_plain(struct pg *pg, const char *sql);

/* A number as a text parameter, in the char array buf (24 bytes suffice). */
#define PG_U64(buf, v) (snprintf((buf), sizeof(buf), "%" PRIu64, (uint64_t)(v)), (buf))
#define PG_I64(buf, v) (snprintf((buf), sizeof(buf), "%" PRId64, (int64_t)(v)), (buf))

/* Result helpers: row count, and column c of row r as an integer. */
int pg_rows(const PGresult *res);
int64_t pg_int(const PGresult *res, int r, int c);

/* How many transactions were run again, and how many times the connection
 * was made anew (stats; round trips per GiB are counted by callers). */
struct pg_stats {
	uint64_t txns;
	uint64_t retries;
	uint64_t reconnects;
	uint64_t round_trips;
};
void pg_get_stats(struct pg *pg, struct pg_stats *out);

#endif
