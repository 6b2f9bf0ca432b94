/* Faults injected into a connection to the shared catalog (meta/pg.c P7),
 * for the unit tests alone: no header of fs/, meta/ or tools/ declares
 * pg_fault_arm, so nothing but a test can arm one.
 *
 * spec is "HOW WHICH [down]" or "off" (disarms):
 *   HOW    lose: the statement runs on the server, then the connection is
 *                cut before its answer is read (inside BEGIN .. COMMIT the
 *                cut rolls its transaction back: only a lost COMMIT or a
 *                lost statement of pg_read leaves the change made);
 *          drop: the connection is cut before the statement is sent.
 *   WHICH  PREFIX[#N]: the Nth (default 1st) statement from now whose label
 *          starts with PREFIX; "*" any. A label is the statement's name (a
 *          struct pg_stmt's, e.g. ns_claim_many), "COMMIT" for a COMMIT
 *          (with P2's token or without), "ASK" for P2's question, else its
 *          SQL ("BEGIN", "ROLLBACK"). Preparing a statement is not one.
 *   down   the database then stays unreachable for the rest of the call:
 *          it returns -ENOTCONN, the outcome unknown (pg.h P2), at once.
 * One fault is armed at a time; it fires once. pg_get_stats' reconnects
 * counts the connection made anew after it. 0, or -EINVAL (logged, naming
 * spec and the reason). */
#ifndef CKPTFS_TESTS_UNIT_PGFAULT_H
#define CKPTFS_TESTS_UNIT_PGFAULT_H

#include "pg.h"

int pg_fault_arm(struct pg *pg, const char *spec);
/* After pg_fault_arm (which forgets it): fn(arg) runs once, right after the
 * armed fault fired (the connection cut), before the call goes on, on the
 * calling thread with pg's connection held: another node's change between
 * a lost answer and what the call does next (a run again, or a question).
 * fn must not use pg. */
void pg_fault_then(struct pg *pg, void (*fn)(void *arg), void *arg);

#endif
