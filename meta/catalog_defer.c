/* catalog_defer — group commit of removals inside OPEN generations.
 *
 * Why it is safe. A crash rolls back every OPEN generation at the next open
 * (G4 of generation.h): its live tree is removed and its backup, if any, is
 * put back. Whatever changed inside an OPEN generation is undone by a crash
 * whether it was committed or not. So an unlink or rmdir whose parent is in
 * an OPEN generation (the trainer's own `rm -rf step-N`, which first reopens
 * the committed generation as a new version) needs no commit of its own
 * before FUSE is answered. It runs in a savepoint of a write transaction that
 * is left open (the deferred transaction); the next such removal joins it,
 * and the lot is committed once. An `rm -rf` of a generation then costs one
 * commit per batch instead of one per file (a commit was ~80 % of an unlink's
 * catalog time: the WAL writes, the file locks, the checkpoints).
 *
 * Invariants:
 *  D1. The deferred transaction holds only removals whose parent was, inside
 *      that transaction, in an OPEN generation (the check and the removal
 *      are one lock hold); any other change that joins it is committed with
 *      them before the lock is released (D2). Such a removal drops no chunk
 *      count (the inode keeps its extents until released; a generation
 *      root is never inside a generation, so no generation ends in it):
 *      there is nothing to sweep after its commit.
 *  D2. Nothing is committed after it without it. cat_begin commits it
 *      before its BEGIN, so every write transaction (a generation's commit,
 *      abort or deletion among them) starts from a catalog where the
 *      removals before it are committed. A write outside a transaction
 *      (an autocommit statement) joins it, and cat_unlock commits both
 *      before the lock is released (rows changed since the last removal:
 *      sqlite3_total_changes64). Reads, cat_begin_read's included, run
 *      inside it and commit nothing: the connection sees its own changes,
 *      as FUSE was told. On disk the catalog is therefore always a prefix
 *      of what was answered, and the only part a crash can drop is
 *      removals inside generations that are still OPEN, which recovery
 *      rolls back anyway.
 *  D3. It is committed at the latest CAT_DEFER_MS (cat_defer_window) after
 *      its first removal (the flusher thread, started with the first one),
 *      when it holds CAT_DEFER_MAX removals, or at cat_close. Other
 *      processes reading the catalog file (ckptfs-admin, sqlite3) see
 *      removals that late.
 *  D4. A failed removal is rolled back to its savepoint and leaves the
 *      others in place. If SQLite drops the whole transaction (an I/O
 *      error), the deferred removals are lost, which is logged: their names
 *      come back, inside a generation that is still OPEN.
 *
 * Everything here runs with cat->lock held, the flusher included (it waits
 * on cat->defer_wake with that mutex). */
#define _GNU_SOURCE
#include "catalog_internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define CAT_DEFER_MS 10 /* the default window (cat_defer_window) */
#define CAT_DEFER_MAX 1024

static int64_t cat_defer_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The window: CAT_DEFER_MS unless cat_defer_window set one (0 = none). */
static unsigned cat_defer_ms(const struct cat *cat)
{
	return cat->defer_ms_set ? cat->defer_ms : CAT_DEFER_MS;
}

void cat_defer_window(struct cat *cat, unsigned ms)
{
	pthread_mutex_lock(&cat->lock);
	cat_defer_flush(cat);
	cat->defer_ms = ms;
	cat->defer_ms_set = true;
	pthread_mutex_unlock(&cat->lock);
}

/* The deferred transaction is gone (committed, or dropped by SQLite). */
static void cat_defer_forget(struct cat *cat)
{
	cat->deferred = 0;
	cat->deferred_since_ns = 0;
}

int cat_defer_flush(struct cat *cat)
{
	if (cat->deferred == 0)
		return 0;
	unsigned n = cat->deferred;
	int rc = cat_run(cat, S_COMMIT);
	if (rc != 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_run(cat, S_ROLLBACK);
	if (rc != 0)
		log_error("catalog %s: committing %u removals inside open generations failed;"
			  " they are undone (their names are back)", cat->path, n);
	cat_defer_forget(cat);
	return rc;
}

void cat_defer_settle(struct cat *cat)
{
	if (cat->deferred == 0)
		return;
	if (sqlite3_get_autocommit(cat->db) != 0) { /* SQLite dropped it (an I/O error) */
		log_error("catalog %s: the transaction of %u removals inside open generations was"
			  " rolled back; their names are back", cat->path, cat->deferred);
		cat_defer_forget(cat);
	} else if (sqlite3_total_changes64(cat->db) != cat->deferred_changes) {
		cat_defer_flush(cat);
	}
}

/* The flusher (D3): commits the deferred transaction CAT_DEFER_MS after its
 * first removal. */
static void *cat_defer_flusher(void *arg)
{
	struct cat *cat = arg;
	pthread_mutex_lock(&cat->lock);
	while (!cat->flusher_stop) {
		if (cat->deferred == 0) {
			pthread_cond_wait(&cat->defer_wake, &cat->lock);
			continue;
		}
		int64_t due = cat->deferred_since_ns + (int64_t)cat_defer_ms(cat) * 1000000LL;
		if (cat_defer_now_ns() < due) {
			struct timespec until = { .tv_sec = due / 1000000000,
						  .tv_nsec = due % 1000000000 };
			pthread_cond_timedwait(&cat->defer_wake, &cat->lock, &until);
			continue;
		}
		cat_defer_flush(cat);
	}
	pthread_mutex_unlock(&cat->lock);
	return NULL;
}

/* Starts the flusher with the first deferral. Without it (no thread),
 * removals are not deferred. */
static bool cat_defer_flusher_up(struct cat *cat)
{
	if (cat->flusher_running || cat->flusher_failed)
		return cat->flusher_running;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cat->defer_wake, &ca);
	pthread_condattr_destroy(&ca);
	int err = pthread_create(&cat->flusher, NULL, cat_defer_flusher, cat);
	cat->flusher_running = err == 0;
	cat->flusher_failed = err != 0;
	if (err != 0) {
		pthread_cond_destroy(&cat->defer_wake);
		log_warn("catalog %s: no thread to group commits (%s): every removal commits"
			 " on its own", cat->path, strerror(err));
	}
	return cat->flusher_running;
}

int cat_defer_begin(struct cat *cat)
{
	if (cat_defer_ms(cat) == 0 || (cat->deferred == 0 && !cat_defer_flusher_up(cat)))
		return -EAGAIN;
	int rc = cat->deferred ? 0 : cat_run(cat, S_BEGIN);
	if (rc == 0) {
		rc = cat_run(cat, S_SAVEPOINT);
		if (rc != 0 && cat->deferred == 0)
			cat_run(cat, S_ROLLBACK);
	}
	cat->in_txn = rc == 0;
	return rc;
}

/* D4: back to the savepoint; a transaction left with nothing deferred in it
 * is rolled back whole. */
static void cat_defer_undo(struct cat *cat)
{
	if (cat_run(cat, S_ROLLBACK_TO) == 0)
		cat_run(cat, S_RELEASE);
	if (cat->deferred == 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_run(cat, S_ROLLBACK);
}

int cat_defer_end(struct cat *cat, int rc)
{
	if (!cat->in_txn)
		return rc;
	cat->in_txn = false;
	if (rc == 0)
		rc = cat_run(cat, S_RELEASE);
	if (rc != 0)
		cat_defer_undo(cat);
	if (sqlite3_get_autocommit(cat->db) != 0) { /* the transaction is gone */
		if (cat->deferred)
			log_error("catalog %s: the transaction of %u removals inside open"
				  " generations was rolled back; their names are back", cat->path,
				  cat->deferred);
		cat_defer_forget(cat);
		return rc ? rc : -EIO;
	}
	cat->deferred_changes = sqlite3_total_changes64(cat->db);
	if (rc != 0)
		return rc;
	if (cat->deferred++ == 0) {
		cat->deferred_since_ns = cat_defer_now_ns();
		pthread_cond_signal(&cat->defer_wake);
	}
	if (cat->deferred >= CAT_DEFER_MAX)
		cat_defer_flush(cat); /* its failure is logged; this removal was answered */
	return 0;
}

void cat_defer_stop(struct cat *cat)
{
	pthread_mutex_lock(&cat->lock);
	bool running = cat->flusher_running;
	cat->flusher_stop = true;
	if (running)
		pthread_cond_signal(&cat->defer_wake);
	pthread_mutex_unlock(&cat->lock);
	if (!running)
		return;
	pthread_join(cat->flusher, NULL);
	pthread_mutex_lock(&cat->lock);
	cat->flusher_running = false;
	cat_defer_flush(cat);
	pthread_mutex_unlock(&cat->lock);
	pthread_cond_destroy(&cat->defer_wake);
}
