/* pg — one connection to the shared catalog's PostgreSQL; see pg.h (P1-P6).
 *
 * Invariant kept here:
 *  P7. Faults for the tests: pg_fault_arm (declared in tests/unit/pgfault.h
 *      only, called by the unit tests only; no header of fs/, meta/ or
 *      tools/ declares it) makes one coming statement of this pg lose its
 *      answer as a dropped connection loses it: "lose" runs it on the server
 *      and then cuts the connection before the caller reads the answer,
 *      "drop" cuts it before the statement is sent; with "down" the
 *      database then stays unreachable for the rest of that call, which
 *      returns -ENOTCONN (P2's outcome unknown) without waiting timeout_ms.
 *      pg_fault_then runs a test's function once the fault fired, before
 *      the call goes on (another node's change in between). Unarmed (every pg of the daemon and of ckptfs-admin), the cost is
 *      one branch per statement sent and one per reconnection. */
#define _GNU_SOURCE
#include "pg.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "log.h"

/* P7: an armed fault, and one that fired with "down". */
enum { PG_FAULT_OFF, PG_FAULT_LOSE, PG_FAULT_DROP };
struct pg_fault {
	uint8_t how;    /* PG_FAULT_OFF but in the unit tests */
	bool down;      /* fired, the database stays unreachable for the call */
	bool downed;    /* it fired so: pg_ready fails once, ending the call */
	unsigned skip;  /* matching statements to let through first */
	char match[64]; /* a prefix of the statement's label; "" any */
	void (*then)(void *arg); /* run once the fault fired (pg_fault_then) */
	void *then_arg;
};

struct pg {
	char *url;         /* as given: what we connect with */
	char *shown;       /* the URL without its password (P3) */
	PGconn *conn;      /* NULL or bad: (re)connect before use */
	unsigned timeout_ms;
	const struct pg_stmt *stmts;
	size_t nstmts;
	bool *prepared;     /* per statement, on this connection (P1) */
	uint8_t *kind;      /* per statement, PG_READS.. (P2) */
	pthread_mutex_t mu; /* P4 */
	bool in_txn;        /* pg_exec is only valid inside pg_txn's body */
	bool broken;        /* the connection failed under us: make a new one */
	/* P2: this pg's row of ckpt_txns, the token of its last writing attempt */
	uint64_t client;  /* random, per pg_open: no two connections share a row */
	uint64_t seq;     /* the last token sent; each writing attempt takes the next */
	uint64_t sent_ms; /* when that token's COMMIT was sent (pg_boot_ms) */
	bool wrote;       /* the body ran a statement that may change rows */
	bool read_only;   /* the body made its transaction READ ONLY */
	struct pg_stats stats;
	struct pg_fault fault; /* P7 */
	bool stopping;          /* P8: set once by pg_stopping (atomic) */
	uint64_t outage_until;  /* P8: the shared deadline, 0 outside an outage (under mu) */
	bool outage_said;       /* P8: its line was logged (under mu) */
	uint64_t last_try_ms;   /* P8: the last attempt to connect (under mu) */
};

/* ---- the token of a writing transaction (P2) ---- */

/* One row per connection: the last token committed (done), or the one a
 * question about a lost COMMIT fenced out (not done). */
#define PG_TXN_SCHEMA                                                                      \
	"CREATE TABLE IF NOT EXISTS ckpt_txns(client BIGINT PRIMARY KEY, seq BIGINT NOT NULL," \
	" done BOOLEAN NOT NULL, at TIMESTAMPTZ NOT NULL)"
/* Rows of connections long gone; a question is asked well within this age
 * (PG_TXN_ASK_MS), so it never finds its own row trimmed. */
#define PG_TXN_TRIM "DELETE FROM ckpt_txns WHERE at < clock_timestamp() - INTERVAL '1 day'"
#define PG_TXN_ASK_MS (3600u * 1000u)
#define PG_RETRY_GAP_MS 1000u /* P8: past an outage's deadline, one try to connect a second */

static int pg_tokens_setup(struct pg *pg, char *err, size_t err_size);

enum { PG_READS, PG_WRITES, PG_READ_ONLY };

/* Whether a statement may change rows (P2: its transaction's COMMIT then
 * carries a token). SELECT cannot (a data-modifying WITH query stands only
 * at the top), nor can SET or SHOW; a WITH statement can if it names a
 * change (FOR UPDATE counts too: a token too many costs nothing but the
 * row). A READ ONLY transaction writes nothing, and could not write the
 * token. */
static bool pg_stmt_writes(const char *sql)
{
	const char *s = sql + strspn(sql, " \t\n(");
	if (strncasecmp(s, "SELECT", 6) == 0 || strncasecmp(s, "SET ", 4) == 0 ||
	    strncasecmp(s, "SHOW ", 5) == 0)
		return false;
	if (strncasecmp(s, "WITH", 4) != 0)
		return true;
	return strcasestr(s, "INSERT") || strcasestr(s, "UPDATE") || strcasestr(s, "DELETE");
}

static uint8_t pg_stmt_kind(const char *sql)
{
	if (strcasestr(sql, "READ ONLY"))
		return PG_READ_ONLY;
	return pg_stmt_writes(sql) ? PG_WRITES : PG_READS;
}

/* Sent with COMMIT in one round trip. It fails (P6: divide by zero) when
 * the row holds this seq already: a question fenced this attempt out. */
#define PG_TXN_COMMIT                                                                      \
	"INSERT INTO ckpt_txns(client, seq, done, at) VALUES (%" PRIu64 ", %" PRIu64 ", true," \
	" clock_timestamp()) ON CONFLICT (client) DO UPDATE SET seq = excluded.seq / CASE"     \
	" WHEN ckpt_txns.seq < excluded.seq THEN 1 ELSE 0 END, done = true, at = excluded.at;" \
	" COMMIT"
/* Did token seq commit? Waits for an attempt still in flight (its row
 * lock), then leaves the row at seq: done if it committed, and otherwise
 * not done, so that the attempt, arriving late, fails. Asking twice gives
 * the same answer. */
#define PG_TXN_ASK                                                                         \
	"INSERT INTO ckpt_txns(client, seq, done, at) VALUES (%" PRIu64 ", %" PRIu64 ", false," \
	" clock_timestamp()) ON CONFLICT (client) DO UPDATE SET done = (ckpt_txns.seq ="       \
	" excluded.seq AND ckpt_txns.done), seq = GREATEST(ckpt_txns.seq, excluded.seq),"      \
	" at = excluded.at RETURNING done"

/* ---- names and messages ---- */

static bool pg_url_ok(const char *url)
{
	return strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0;
}

/* url with "user:password@" turned into "user@" (P3). */
static char *pg_url_shown(const char *url)
{
	char *s = strdup(url);
	if (!s)
		return NULL;
	char *start = strstr(s, "://");
	if (!start)
		return s;
	start += 3;
	char *at = strchr(start, '@');
	char *slash = strchr(start, '/');
	if (!at || (slash && slash < at))
		return s;
	char *colon = memchr(start, ':', (size_t)(at - start));
	if (colon)
		memmove(colon, at, strlen(at) + 1);
	return s;
}

/* The first line of a libpq message, without its "ERROR:  " or trailing newline. */
static void pg_first_line(const char *msg, char *out, size_t size)
{
	if (!msg || !*msg)
		msg = "no message";
	if (strncmp(msg, "ERROR:  ", 8) == 0)
		msg += 8;
	size_t n = strcspn(msg, "\n");
	if (n >= size)
		n = size - 1;
	memcpy(out, msg, n);
	out[n] = '\0';
}

static uint64_t pg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Counts a suspended machine too: a question's age (PG_TXN_ASK_MS). */
static uint64_t pg_boot_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void pg_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- the connection ---- */

/* The server's notices ("relation already exists, skipping", "terminating
 * connection due to administrator command") go to the debug log, not to
 * stderr: what matters of them reaches the caller as an error or a retry. */
static void pg_notice(void *arg, const char *msg)
{
	char line[256];
	pg_first_line(msg, line, sizeof(line));
	log_debug("catalog %s: %s", ((struct pg *)arg)->shown, line);
}

/* One attempt to connect; 0, or -ENOTCONN with the reason in err. The new
 * connection has no prepared statement yet (P1: pg_exec prepares on first use). */
static int pg_connect_once(struct pg *pg, char *err, size_t err_size)
{
	if (pg->conn)
		PQfinish(pg->conn);
	/* A database behind a cut link must fail a call, not hang it: TCP gives
	 * up on unacknowledged data after timeout_ms (tcp_user_timeout) and on a
	 * silent peer after the keepalive probes. These come before dbname, so
	 * that values given in the URL win. */
	char connect_s[16], user_ms[16];
	unsigned secs = pg->timeout_ms / 1000;
	snprintf(connect_s, sizeof(connect_s), "%u", secs < 2 ? 2 : secs > 5 ? 5 : secs);
	snprintf(user_ms, sizeof(user_ms), "%u", pg->timeout_ms < 1000 ? 1000 : pg->timeout_ms);
	const char *keys[] = { "connect_timeout", "tcp_user_timeout", "keepalives",
			       "keepalives_idle", "keepalives_interval", "keepalives_count",
			       "application_name", "dbname", NULL };
	const char *vals[] = { connect_s, user_ms, "1", "2", "1", "3", "ckptfs", pg->url, NULL };
	pg->conn = PQconnectdbParams(keys, vals, 1);
	if (!pg->conn || PQstatus(pg->conn) != CONNECTION_OK) {
		char why[256];
		pg_first_line(pg->conn ? PQerrorMessage(pg->conn) : "out of memory", why, sizeof(why));
		snprintf(err, err_size, "catalog %s: cannot connect: %s", pg->shown, why);
		return -ENOTCONN;
	}
	PQsetNoticeProcessor(pg->conn, pg_notice, pg);
	memset(pg->prepared, 0, pg->nstmts * sizeof(*pg->prepared));
	return 0;
}

/* The deadline of a call's first failure: the connection's outage's, set
 * timeout_ms from now by the first call that fails (P8). Under mu. */
static uint64_t pg_fail_deadline(struct pg *pg)
{
	if (pg->outage_until == 0)
		pg->outage_until = pg_now_ms() + pg->timeout_ms;
	return pg->outage_until;
}

/* P8: past an outage's deadline, a call tries to connect only if the last
 * try ended PG_RETRY_GAP_MS ago or more; true: fail at once. Under mu. */
static bool pg_outage_over(struct pg *pg)
{
	uint64_t now = pg_now_ms();
	if (pg->outage_until == 0 || now < pg->outage_until)
		return false;
	if (!pg->outage_said)
		log_warn("catalog %s: unreachable for %u ms%s: calls fail at once, but for one try to"
			 " connect a second, until it answers (pg.h P8)", pg->shown, pg->timeout_ms,
			 __atomic_load_n(&pg->stopping, __ATOMIC_ACQUIRE) ? " while the daemon stops"
									   : "");
	pg->outage_said = true;
	return now - pg->last_try_ms < PG_RETRY_GAP_MS;
}

/* A usable connection, reconnecting with backoff until *deadline (set from
 * the outage's, at the first failure when it is 0: P8). */
static int pg_ready(struct pg *pg, uint64_t *deadline)
{
	unsigned backoff = 50;
	char err[512];
	while (pg->broken || !pg->conn || PQstatus(pg->conn) != CONNECTION_OK) {
		if (*deadline == 0)
			*deadline = pg_fail_deadline(pg);
		if (pg_outage_over(pg))
			return -ENOTCONN;
		if (pg->fault.downed) { /* P7: as if past the deadline */
			pg->fault.downed = false;
			log_error("catalog %s: cannot connect: unreachable (a fault injected by a"
				  " test, pg.c P7)", pg->shown);
			return -ENOTCONN;
		}
		int rc = pg_connect_once(pg, err, sizeof(err));
		pg->last_try_ms = pg_now_ms(); /* its end: a try into a cut link takes seconds */
		if (rc == 0) {
			pg->broken = false;
			pg->stats.reconnects++;
			log_warn("catalog %s: connected again", pg->shown);
			return 0;
		}
		if (rc != -ENOTCONN || pg_now_ms() >= *deadline) {
			log_error("%s (gave up: unreachable since %u ms or more, pg.h P8)", err,
				  pg->timeout_ms);
			return rc;
		}
		pg_sleep_ms(backoff);
		backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
	}
	return 0;
}

/* Whether a failed result is worth running the transaction again for (P2):
 * the connection is gone, the server is shutting down or starting, or the
 * transaction lost a serialization or deadlock race. */
static bool pg_retryable(struct pg *pg, const char *state)
{
	if (PQstatus(pg->conn) != CONNECTION_OK)
		return true;
	if (!state) {
		/* an error libpq made itself, not the server: the connection broke
		 * ("server closed the connection unexpectedly"); start a new one */
		pg->broken = true;
		return true;
	}
	static const char *const codes[] = { "57P01", "57P02", "57P03", "40001", "40P01", NULL };
	if (strncmp(state, "08", 2) == 0)
		return true;
	for (size_t i = 0; codes[i]; i++)
		if (strcmp(state, codes[i]) == 0)
			return true;
	return false;
}

/* r's outcome as 0 / -EAGAIN / -EEXIST / -EBUSY (P6) / -EIO (logged once,
 * P3). Takes r. */
static int pg_outcome(struct pg *pg, PGresult *r, const char *what, PGresult **keep)
{
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		if (keep)
			*keep = r;
		else
			PQclear(r);
		return 0;
	}
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	int rc;
	if (pg_retryable(pg, state)) {
		rc = -EAGAIN;
	} else if (state && (strcmp(state, "23505") == 0 || strcmp(state, "42710") == 0 ||
			     strcmp(state, "42P07") == 0)) {
		/* a unique row, or (duplicate_object, duplicate_table) a CREATE ...
		 * IF NOT EXISTS another node's same CREATE overtook: its caller
		 * runs it again (pg_tokens_setup, pgns_schema, lease.c) */
		rc = -EEXIST;
	} else if (state && strcmp(state, "22012") == 0) {
		rc = -EBUSY; /* P6: a statement undid itself */
	} else {
		char why[256];
		pg_first_line(r ? PQresultErrorMessage(r) : PQerrorMessage(pg->conn), why, sizeof(why));
		log_error("catalog %s: %s: %s", pg->shown, what, why);
		rc = -EIO;
	}
	PQclear(r);
	return rc;
}

/* ---- faults for the tests (P7) ---- */

/* Declared in tests/unit/pgfault.h, for the unit tests alone. */
int pg_fault_arm(struct pg *pg, const char *spec);
void pg_fault_then(struct pg *pg, void (*fn)(void *arg), void *arg);

void pg_fault_then(struct pg *pg, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&pg->mu);
	pg->fault.then = fn;
	pg->fault.then_arg = arg;
	pthread_mutex_unlock(&pg->mu);
}

int pg_fault_arm(struct pg *pg, const char *spec)
{
	struct pg_fault f = { .how = PG_FAULT_OFF };
	char how[8] = "", which[80] = "", down[8] = "", extra[2] = "";
	int n = spec ? sscanf(spec, "%7s %79s %7s %1s", how, which, down, extra) : 0;
	const char *why = NULL;
	char *hash = strchr(which, '#');
	if (n == 1 && strcmp(how, "off") == 0)
		why = NULL;
	else if (n < 2 || n > 3)
		why = "not HOW WHICH [down]";
	else if (strcmp(how, "lose") != 0 && strcmp(how, "drop") != 0)
		why = "HOW is neither lose nor drop";
	else if (n == 3 && strcmp(down, "down") != 0)
		why = "a third word that is not down";
	else if ((size_t)(hash ? hash - which : (ptrdiff_t)strlen(which)) >= sizeof(f.match))
		why = "a statement prefix that long matches no statement";
	else if (hash && (hash[1] < '1' || hash[1] > '9' || strspn(hash + 1, "0123456789") !=
							     strlen(hash + 1)))
		why = "#N with N not a number from 1";
	if (why) {
		log_error("catalog %s: test fault \"%s\": %s (pg.c P7: \"lose|drop PREFIX[#N]"
			  " [down]\" or \"off\")", pg->shown, spec ? spec : "(null)", why);
		return -EINVAL;
	}
	if (n > 1) {
		f.how = how[0] == 'l' ? PG_FAULT_LOSE : PG_FAULT_DROP;
		f.down = n == 3;
		f.skip = hash ? (unsigned)strtoul(hash + 1, NULL, 10) - 1 : 0;
		if (hash)
			*hash = '\0';
		snprintf(f.match, sizeof(f.match), "%s", strcmp(which, "*") == 0 ? "" : which);
	}
	pthread_mutex_lock(&pg->mu);
	pg->fault = f;
	pthread_mutex_unlock(&pg->mu);
	return 0;
}

/* Whether the armed fault takes the statement labelled label now, and how. */
static int pg_fault_take(struct pg *pg, const char *label)
{
	struct pg_fault *f = &pg->fault;
	if (strncmp(label, f->match, strlen(f->match)) != 0)
		return PG_FAULT_OFF;
	if (f->skip > 0) {
		f->skip--;
		return PG_FAULT_OFF;
	}
	int how = f->how;
	f->how = PG_FAULT_OFF;
	f->downed = f->down;
	log_warn("catalog %s: %.40s: its answer lost %s (a fault injected by a test, pg.c P7)",
		 pg->shown, label, how == PG_FAULT_LOSE ? "after the server ran it" : "before it was sent");
	return how;
}

/* The connection cut as a network loss cuts it; libpq's answer to a
 * statement on it (a failure of its own making, no SQLSTATE) is the lost
 * statement's answer. */
static PGresult *pg_fault_cut(struct pg *pg, PGresult *r)
{
	PQclear(r);
	shutdown(PQsocket(pg->conn), SHUT_RDWR);
	return PQexec(pg->conn, "SELECT 1");
}

static PGresult *pg_send_faulty(struct pg *pg, const char *label, const char *sql,
				const struct pg_stmt *s, const char *const *params)
{
	int how = pg_fault_take(pg, label);
	PGresult *r = NULL;
	if (how != PG_FAULT_DROP)
		r = s ? PQexecPrepared(pg->conn, s->name, s->nparams, params, NULL, NULL, 0)
		      : PQexec(pg->conn, sql);
	if (how == PG_FAULT_OFF)
		return r;
	r = pg_fault_cut(pg, r);
	void (*then)(void *arg) = pg->fault.then;
	pg->fault.then = NULL;
	if (then) /* another node's change between the cut and what follows it */
		then(pg->fault.then_arg);
	return r;
}

/* ---- statements ---- */

/* Sends one statement, s with params or else sql, and returns its answer;
 * label names it to a fault (P7): s's name, "COMMIT" for a COMMIT with its
 * token, "ASK" for P2's question, else sql. */
static PGresult *pg_send(struct pg *pg, const char *label, const char *sql,
			 const struct pg_stmt *s, const char *const *params)
{
	if (__builtin_expect(pg->fault.how != PG_FAULT_OFF, 0))
		return pg_send_faulty(pg, label, sql, s, params);
	return s ? PQexecPrepared(pg->conn, s->name, s->nparams, params, NULL, NULL, 0)
		 : PQexec(pg->conn, sql);
}

static int pg_simple(struct pg *pg, const char *sql)
{
	pg->stats.round_trips++;
	return pg_outcome(pg, pg_send(pg, sql, sql, NULL, NULL), sql, NULL);
}

int pg_open(const char *url, unsigned timeout_ms, const struct pg_stmt *stmts, size_t n,
	    struct pg **out, char *err, size_t err_size)
{
	*out = NULL;
	if (!pg_url_ok(url)) {
		snprintf(err, err_size,
			 "catalog %s: not a PostgreSQL URL (postgresql://user@host:port/database)", url);
		return -EINVAL;
	}
	struct pg *pg = calloc(1, sizeof(*pg));
	if (!pg)
		return -ENOMEM;
	pg->url = strdup(url);
	pg->shown = pg_url_shown(url);
	pg->timeout_ms = timeout_ms;
	pg->stmts = stmts;
	pg->nstmts = n;
	pg->prepared = calloc(n ? n : 1, sizeof(*pg->prepared));
	pg->kind = calloc(n ? n : 1, sizeof(*pg->kind));
	pthread_mutex_init(&pg->mu, NULL);
	if (!pg->url || !pg->shown || !pg->prepared || !pg->kind) {
		pg_close(pg);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		pg->kind[i] = pg_stmt_kind(stmts[i].sql);
	int rc = pg_connect_once(pg, err, err_size);
	if (rc == 0)
		rc = pg_tokens_setup(pg, err, err_size);
	if (rc) {
		pg_close(pg);
		return rc;
	}
	*out = pg;
	return 0;
}

void pg_close(struct pg *pg)
{
	if (!pg)
		return;
	if (pg->conn)
		PQfinish(pg->conn);
	pthread_mutex_destroy(&pg->mu);
	free(pg->url);
	free(pg->shown);
	free(pg->prepared);
	free(pg->kind);
	free(pg);
}

void pg_stopping(struct pg *pg)
{
	if (pg)
		__atomic_store_n(&pg->stopping, true, __ATOMIC_RELEASE);
}

const char *pg_name(const struct pg *pg)
{
	return pg->shown;
}

/* COMMIT, with the token when the body wrote (P2). *unknown: the answer
 * was lost, so the transaction may have committed. */
static int pg_commit(struct pg *pg, bool *unknown)
{
	if (!pg->wrote || pg->read_only)
		return pg_simple(pg, "COMMIT");
	char sql[sizeof(PG_TXN_COMMIT) + 48];
	snprintf(sql, sizeof(sql), PG_TXN_COMMIT, pg->client, ++pg->seq);
	pg->sent_ms = pg_boot_ms();
	pg->stats.round_trips++;
	int rc = pg_outcome(pg, pg_send(pg, "COMMIT", sql, NULL, NULL),
			    "COMMIT with its token (ckpt_txns)", NULL);
	*unknown = rc == -EAGAIN;
	return rc;
}

/* Whether the token of the last COMMIT whose answer was lost committed
 * (P2), on a connection made anew: 0 and *done, -EAGAIN to ask again, or
 * -ENOTCONN when the question comes too late to be answered surely. */
static int pg_ask(struct pg *pg, bool *done)
{
	if (pg_boot_ms() - pg->sent_ms > PG_TXN_ASK_MS) {
		log_error("catalog %s: a transaction whose COMMIT answer was lost %" PRIu64
			  " ms ago: too late to learn whether it committed",
			  pg->shown, pg_boot_ms() - pg->sent_ms);
		return -ENOTCONN;
	}
	char sql[sizeof(PG_TXN_ASK) + 48];
	snprintf(sql, sizeof(sql), PG_TXN_ASK, pg->client, pg->seq);
	pg->stats.round_trips++;
	PGresult *r = NULL;
	int rc = pg_outcome(pg, pg_send(pg, "ASK", sql, NULL, NULL), "ckpt_txns", &r);
	if (rc == 0 && pg_rows(r) != 1)
		rc = -EIO;
	if (rc == 0)
		*done = PQgetvalue(r, 0, 0)[0] == 't';
	PQclear(r);
	return rc;
}

/* One run of body; *unknown as pg_commit's. */
static int pg_attempt(struct pg *pg, int (*body)(struct pg *pg, void *arg), void *arg, bool txn,
		      bool *unknown)
{
	pg->stats.txns++;
	int rc = txn ? pg_simple(pg, "BEGIN") : 0;
	if (rc == 0) {
		pg->in_txn = true;
		pg->wrote = pg->read_only = false;
		rc = body(pg, arg);
		pg->in_txn = false;
		if (rc == 0 && txn)
			rc = pg_commit(pg, unknown);
	}
	/* a failed COMMIT has rolled back already; without BEGIN each
	 * statement was its own transaction (P5) */
	if (rc != 0 && txn && !pg->broken && PQstatus(pg->conn) == CONNECTION_OK)
		(void)pg_simple(pg, "ROLLBACK");
	return rc;
}

static int pg_run(struct pg *pg, int (*body)(struct pg *pg, void *arg), void *arg, bool txn)
{
	uint64_t deadline = 0;
	unsigned backoff = 10;
	bool unknown = false; /* a COMMIT's answer was lost: ask before running again */
	int rc;
	pthread_mutex_lock(&pg->mu);
	for (;;) {
		rc = pg_ready(pg, &deadline);
		if (rc)
			break;
		if (unknown) {
			bool done = false;
			rc = pg_ask(pg, &done);
			if (rc == 0) {
				unknown = false;
				log_warn("catalog %s: a transaction whose COMMIT answer was lost %s",
					 pg->shown, done ? "had committed" : "had not: running it again");
				if (done)
					break;
				rc = pg_attempt(pg, body, arg, txn, &unknown);
			}
		} else {
			rc = pg_attempt(pg, body, arg, txn, &unknown);
		}
		if (rc != -EAGAIN)
			break;
		if (deadline == 0)
			deadline = pg_fail_deadline(pg);
		if (pg_now_ms() >= deadline) {
			log_error("catalog %s: a transaction kept failing for %u ms", pg->shown,
				  pg->timeout_ms);
			rc = -ENOTCONN;
			break;
		}
		pg->stats.retries++;
		pg_sleep_ms(backoff);
		backoff = backoff * 2 > 500 ? 500 : backoff * 2;
	}
	if (rc && unknown)
		log_error("catalog %s: whether a transaction whose COMMIT answer was lost committed"
			  " is unknown (pg.h P2)", pg->shown);
	if (rc != -ENOTCONN) { /* P8: the server answered */
		pg->outage_until = 0;
		pg->outage_said = false;
	}
	pthread_mutex_unlock(&pg->mu);
	return rc;
}

int pg_txn(struct pg *pg, int (*body)(struct pg *pg, void *arg), void *arg)
{
	return pg_run(pg, body, arg, true);
}

int pg_read(struct pg *pg, int (*body)(struct pg *pg, void *arg), void *arg)
{
	return pg_run(pg, body, arg, false);
}

uint64_t pg_token(struct pg *pg, uint64_t *client)
{
	assert(pg->in_txn); /* the mutex held (P4): seq is this call's alone */
	*client = pg->client;
	return ++pg->seq; /* above every token sent before: a later COMMIT's takes the next */
}

int pg_exec(struct pg *pg, size_t i, const char *const *params, PGresult **res)
{
	if (res)
		*res = NULL;
	if (!pg->in_txn || i >= pg->nstmts)
		return -EINVAL;
	const struct pg_stmt *s = &pg->stmts[i];
	pg->read_only |= pg->kind[i] == PG_READ_ONLY;
	pg->wrote |= pg->kind[i] == PG_WRITES; /* P2: its COMMIT carries a token */
	if (!pg->prepared[i]) {
		pg->stats.round_trips++;
		int rc = pg_outcome(pg, PQprepare(pg->conn, s->name, s->sql, s->nparams, NULL),
				    s->name, NULL);
		if (rc)
			return rc;
		pg->prepared[i] = true;
	}
	pg->stats.round_trips++;
	return pg_outcome(pg, pg_send(pg, s->name, NULL, s, params), s->name, res);
}

struct pg_plain {
	const char *sql;
};

static int pg_plain_body(struct pg *pg, void *arg)
{
	return pg_simple(pg, ((struct pg_plain *)arg)->sql);
}

int pg_exec_plain(struct pg *pg, const char *sql)
{
	struct pg_plain p = { sql };
	return pg_txn(pg, pg_plain_body, &p);
}

/* The token table, old rows trimmed, and this connection's client id (P2). */
static int pg_tokens_setup(struct pg *pg, char *err, size_t err_size)
{
	uint64_t id = 0;
	while (id == 0) {
		if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
			snprintf(err, err_size, "catalog %s: getrandom: %s", pg->shown,
				 strerror(errno));
			return -EIO;
		}
		id &= INT64_MAX; /* a BIGINT */
	}
	pg->client = id;
	int rc = pg_exec_plain(pg, PG_TXN_SCHEMA);
	if (rc == -EEXIST) /* another node made the table at the same moment */
		rc = pg_exec_plain(pg, PG_TXN_SCHEMA);
	if (rc == 0)
		rc = pg_exec_plain(pg, PG_TXN_TRIM);
	if (rc)
		snprintf(err, err_size, "catalog %s: cannot make the table ckpt_txns: %s",
			 pg->shown, strerror(-rc));
	return rc;
}

int pg_rows(const PGresult *res)
{
	return res ? PQntuples(res) : 0;
}

int64_t pg_int(const PGresult *res, int r, int c)
{
	if (!res || r >= PQntuples(res) || c >= PQnfields(res) || PQgetisnull(res, r, c))
		return 0;
	return strtoll(PQgetvalue(res, r, c), NULL, 10);
}

void pg_get_stats(struct pg *pg, struct pg_stats *out)
{
	pthread_mutex_lock(&pg->mu);
	*out = pg->stats;
	pthread_mutex_unlock(&pg->mu);
}
