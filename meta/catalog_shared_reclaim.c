/* catalog_shared_reclaim — the cluster's chunk reclaim duty, one turn
 * (issue 18, docs/MULTINODE.md "Reclaim"). In shared mode nothing else
 * removes a chunk's object from BACKING (catalog_shared_data.c S3): a
 * chunk whose last reference went (file overwritten or unlinked, generation
 * deleted on any node) waits here; so do the manifests of generations that
 * ended.
 *
 *   duty "reclaim" taken? ─no─▶ done (another node holds it)
 *     │yes
 *     ▼
 *   drop the pins of nodes no longer live (pgns_unpin_lost)
 *     ▼
 *   pgns_reclaim_stamp: stamp what is newly free or ended; read the tree
 *   horizon ──▶ ended generations seen before it: manifests removed (R8)
 *     ▼
 *   pgns_reclaim_begin: a batch of chunks with no reference and no pin,
 *   seen free before the horizon, becomes 'reclaiming' ──▶ uploaded ones:
 *   object removed from BACKING ──▶ this node's own rows of the batch
 *   settled (R4) ──▶ pgns_reclaim_end ──▶ next batch, while the duty is
 *   still ours
 *
 * Rules (tests/unit/test_catshared_reclaim.c, test_catshared_horizon.c):
 *  R1. Only the holder of duty "reclaim" (lease.h L3) removes anything, and
 *      it re-takes the duty before each batch: a node past its lease never
 *      gets it (L3) and pgns_reclaim_begin is fenced (N4), so a partitioned
 *      node removes nothing once its lease ran out.
 *  R2. A chunk pinned by a writer (pgns.h N6) or referenced by an extent
 *      is never in a batch (pgns_reclaim_begin's re-checked WHERE).
 *  R3. An object is removed from BACKING before its row is deleted
 *      (pgns_reclaim_end), and the row is 'reclaiming' until then, so no
 *      commit names it meanwhile (N3). A removal that fails leaves the row
 *      'reclaiming' for this node's next turn (or for the next reclaimer,
 *      once this node is no longer live).
 *  R4. This node's local row of a reclaimed chunk: with no local reference
 *      and no queued upload, row and cache object go (nothing names them);
 *      with a queued upload, S4 drops it as stale (PostgreSQL lacks it);
 *      with a local writer's reference, the row is no longer on BACKING
 *      (uploaded = 0) and, if its object is cached, queued for upload again,
 *      so the writer's commit (which recreates the chunk, N3) never claims a
 *      removed object is on BACKING. Another node's rows are its own: its
 *      sweep and uploader settle them (S3, S4).
 *  R5. What another node put on BACKING under a hash this turn removes is
 *      not lost silently: pgns_reclaim_end deletes every node's upload
 *      claim of the batch's hashes in the statement that deletes their
 *      rows (pgns.h N7), so an upload whose object write began before the
 *      end is never counted by PostgreSQL; its node puts it again
 *      (catalog_shared_data.c S8). The claims of nodes no longer live go
 *      with their pins (pgns_unpin_lost).
 *  R6. A chunk's cache object is removed only under the catalog lock, in the
 *      same hold that decides it is garbage (R4's DELETE, after the removal,
 *      as cat_sweep and csd_sweep_one do). Removed after the unlock, it could
 *      be a local writer's new only copy: the writer finds no row, stores
 *      the same bytes under the same name, and the late removal unlinks them
 *      (tests/unit/test_catshared_reclaim.c, the_turn_removes_...).
 *  R7. BACKING stays a description a rebuild can use (DESIGN invariant 5;
 *      upload.h U5 for one node): a chunk freed by a change is reclaimed
 *      only once every manifest a rebuild would apply describes the state
 *      after that change —
 *      (a) the tree manifest: the turn stamps each chunk it finds free with
 *          the server's clock (pgns.h N12: any new reference clears the
 *          stamp) and takes only chunks stamped before the tree horizon,
 *          a clock read before the snapshot of a tree manifest on BACKING
 *          (manifest_shared.h D6);
 *      (b) the generation manifests of live generations: none may have
 *          as its newest manifest on BACKING one of a version whose tree
 *          is gone (a rewrite committed, its manifest not yet written):
 *          while one may, no live chunk is taken. A lost one (pggen.h X2)
 *          counts too: its previous version's manifest is then the save's
 *          only recoverable form, so the reclaim waits until the save is
 *          whole again (X10) or a decision ends it (R8 then removes its
 *          manifests first);
 *      (c) ended generations: while one may still have a manifest on
 *          BACKING, no live chunk is taken (R8 removes them first).
 *      (b) and (c) are read in the statement that takes the batch; a
 *      change committed after its snapshot frees only chunks with no stamp.
 *  R8. An ended generation's manifests (every version) leave BACKING at a
 *      turn whose horizon is after the turn that first saw it ended: the
 *      tree manifest then describes the tree after its end (upload.h U6: a
 *      save renamed out of its series is in no other manifest); it is then
 *      marked (ns_generations.manifests_gone) and blocks nothing more. A
 *      put of one of them still in flight on a node when they go lands
 *      after them: that node's uploader reads the row again after its put
 *      and removes it (fs/uploader.h B2).
 *  R9. The wait ends: the tree horizon moves whenever a tree manifest is
 *      written and, the tree unchanged, at least every few seconds
 *      (fs/uploader.c T4); duty "tree" passes on within its term when its
 *      holder dies or unmounts. It stops only while the tree cannot be
 *      written (a file outside generations names a chunk not on BACKING,
 *      manifest_shared.h D4).
 *  R10. An object is removed only before the local deadline of the duty
 *      take that preceded its batch (lease.h L8); past it the rest of the
 *      batch stays 'reclaiming' for this node's next turn, or for the next
 *      reclaimer, which takes the rows over only a term after this node
 *      could have been swept (NS_RECLAIM_BEGIN). A node stalled after its
 *      begin (stopped, frozen, cut from PostgreSQL but not from BACKING)
 *      so never removes an object a writer put again after the takeover. */
#define _GNU_SOURCE
#include "catalog_shared_reclaim.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "catalog_internal.h"
#include "lease.h"
#include "log.h"
#include "manifest.h"
#include "pgns.h"
#include "store.h"

#define CSR_BATCH 64 /* chunks per pgns_reclaim_begin */
#define CSR_GENS 32  /* ended generations whose manifests go per turn */
#define CSR_DUTY "reclaim"

static const char csr_sql_row[] =
	"SELECT refcount, cached, EXISTS(SELECT 1 FROM uploads u WHERE u.hash = ?1 AND u.kind = 1)"
	" FROM chunks WHERE hash = ?1";
static const char csr_sql_delete[] = "DELETE FROM chunks WHERE hash = ?1 AND refcount = 0";
static const char csr_sql_unupload[] = "UPDATE chunks SET uploaded = 0 WHERE hash = ?1";

static int csr_run(struct cat *cat, const char *sql, const uint8_t hash[CAT_HASH_LEN],
		   int64_t cols[3])
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(cat->db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_error("catalog %s: reclaim: cannot prepare: %s", cat->path,
			  sqlite3_errmsg(cat->db));
		return -EIO;
	}
	sqlite3_bind_blob(st, 1, hash, CAT_HASH_LEN, SQLITE_STATIC);
	int src = sqlite3_step(st);
	int rc = src == SQLITE_ROW ? 1 : src == SQLITE_DONE ? 0 : -EIO;
	for (int i = 0; rc == 1 && cols && i < 3; i++)
		cols[i] = sqlite3_column_int64(st, i);
	if (rc < 0)
		log_error("catalog %s: reclaim: %s", cat->path, sqlite3_errmsg(cat->db));
	sqlite3_finalize(st);
	return rc;
}

/* R6: the cache object of a row about to be deleted goes first, in this
 * hold of the lock; a failure is logged and the row goes all the same (the
 * cache resync finds an object with no row; a writer of the same bytes finds
 * no row and stores them again). */
static void csr_drop_cache(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	int rrc = cat->reclaim ? cat->reclaim(cat->reclaim_arg, hash) : 0;
	if (rrc) {
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(hash, hex);
		log_warn("catalog %s: reclaim: cannot remove chunk %s from the cache: %s",
			 cat->path, hex, strerror(rrc < 0 ? -rrc : rrc));
	}
}

/* R4 for one chunk of the batch; under the lock, in a local transaction. */
static int csr_settle_one(struct cat *cat, const struct pgns_reclaim *r)
{
	int64_t row[3]; /* refcount, cached, upload queued */
	int rc = csr_run(cat, csr_sql_row, r->hash, row);
	if (rc <= 0)
		return rc; /* no local row: nothing of it here */
	if (row[0] == 0) {
		if (row[2])
			return 0; /* S4 drops the queued upload as stale */
		if (row[1])
			csr_drop_cache(cat, r->hash); /* R6 */
		rc = csr_run(cat, csr_sql_delete, r->hash, NULL);
		return rc < 0 ? rc : 0;
	}
	if (!r->uploaded)
		return 0; /* its object was not on BACKING: nothing removed under it */
	rc = csr_run(cat, csr_sql_unupload, r->hash, NULL);
	if (rc >= 0 && row[1] && !row[2]) {
		rc = cat_bind(cat, U_ENQ_CHUNK, A_HASH(r->hash), A_INT(cat_now_ns()));
		if (rc == 0)
			rc = cat_run(cat, U_ENQ_CHUNK);
	}
	return rc < 0 ? rc : 0;
}

static int csr_settle(struct cat *cat, const struct pgns_reclaim *batch, size_t n)
{
	cat_lock(cat);
	int rc = cat_begin(cat);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = csr_settle_one(cat, &batch[i]);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* Removes the batch's uploaded objects from BACKING; those whose removal
 * failed are left out of done (R3), and so is the rest of the batch once
 * the deadline sure_ms passed (R10). */
static size_t csr_remove(struct cat *cat, cat_backing_remove_fn remove, void *arg,
			 const struct pgns_reclaim *batch, size_t n, uint64_t sure_ms,
			 struct pgns_reclaim *done, struct cat_reclaim_report *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (batch[i].uploaded && lease_clock_ms() >= sure_ms) {
			log_warn("catalog %s: reclaim: %zu chunks of the batch left: past the local"
				 " deadline of this node's duty (lease.h L8)", cat->path, n - i);
			break;
		}
		char rel[128];
		store_object_relpath(batch[i].hash, rel, sizeof(rel));
		int rc = batch[i].uploaded ? remove(arg, rel) : 0;
		if (rc) {
			char hex[2 * CAT_HASH_LEN + 1];
			cat_hex(batch[i].hash, hex);
			log_warn("catalog %s: reclaim: cannot remove chunk %s from BACKING: %s (tried"
				 " again at the next turn)", cat->path, hex, strerror(rc < 0 ? -rc : rc));
			out->failed++;
			continue;
		}
		if (batch[i].uploaded)
			out->removed++;
		out->chunks++;
		done[k++] = batch[i];
	}
	return k;
}

/* R1: takes or keeps the duty; *sure_ms is the deadline of the removals
 * that follow (R10). */
static int csr_duty(struct pgns *ns, unsigned term_ms, bool *taken, uint64_t *sure_ms)
{
	uint64_t started = lease_clock_ms();
	int rc = lease_duty_take(ns->lease, CSR_DUTY, term_ms, taken);
	unsigned lease_ms = ns->lease->lease_ms;
	*sure_ms = lease_sure_until_ms(started, lease_ms && lease_ms < term_ms ? lease_ms : term_ms);
	return rc;
}

/* R8 for one ended generation: the manifest of every version it had. */
static int csr_gen_remove(struct cat *cat, cat_backing_remove_fn remove, void *arg,
			  const struct pgns_ended_gen *g)
{
	int rc = 0;
	for (uint32_t v = 1; rc == 0 && g->kept && v <= g->version; v++) {
		char path[MANIFEST_PATH_MAX];
		manifest_gen_path(g->id, v, path, sizeof(path));
		rc = remove(arg, path);
		if (rc)
			log_warn("catalog %s: reclaim: cannot remove %s, the manifest of an ended"
				 " generation, from BACKING: %s (tried again at the next turn)",
				 cat->path, path, strerror(rc < 0 ? -rc : rc));
	}
	return rc;
}

/* R7 a, R8: stamps what is newly free or ended, reads the tree horizon
 * into *horizon_ns and removes the manifests of the ended generations seen
 * before it. A removal that fails leaves its generation for the next turn
 * (and the chunks wait, R7 c). */
static int csr_manifests(struct cat *cat, struct pgns *ns, cat_backing_remove_fn remove,
			 void *arg, int64_t *horizon_ns, struct cat_reclaim_report *out)
{
	struct pgns_ended_gen gens[CSR_GENS];
	uint64_t gone[CSR_GENS];
	size_t n = 0, k = 0;
	int rc = pgns_reclaim_stamp(ns, horizon_ns, gens, CSR_GENS, &n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (csr_gen_remove(cat, remove, arg, &gens[i]) == 0) {
			gone[k++] = gens[i].id;
			out->manifests += gens[i].kept;
		}
	if (rc == 0)
		rc = pgns_reclaim_gens_done(ns, gone, k);
	return rc;
}

int catshr_reclaim_turn(struct cat *cat, unsigned term_ms, cat_backing_remove_fn remove,
			void *arg, struct cat_reclaim_report *out)
{
	memset(out, 0, sizeof(*out));
	struct pgns *ns = cat_shared_ns(cat);
	struct pgns_reclaim batch[CSR_BATCH], done[CSR_BATCH];
	bool taken = false;
	uint64_t sure_ms = 0;
	int64_t horizon_ns = 0;
	int rc = csr_duty(ns, term_ms, &taken, &sure_ms);
	if (rc || !taken)
		return rc;
	out->held = true;
	rc = pgns_unpin_lost(ns);
	if (rc == 0)
		rc = csr_manifests(cat, ns, remove, arg, &horizon_ns, out); /* R7, R8 */
	for (size_t n = CSR_BATCH; rc == 0 && n == CSR_BATCH && taken;) {
		rc = pgns_reclaim_begin(ns, horizon_ns, batch, CSR_BATCH, &n);
		if (rc || n == 0)
			break;
		size_t k = csr_remove(cat, remove, arg, batch, n, sure_ms, done, out);
		rc = csr_settle(cat, done, k);
		if (rc == 0)
			rc = pgns_reclaim_end(ns, done, k);
		if (rc == 0 && k < n)
			break; /* failed removals wait for the next turn (R3) */
		if (rc == 0 && n == CSR_BATCH)
			rc = csr_duty(ns, term_ms, &taken, &sure_ms);
	}
	return rc;
}
