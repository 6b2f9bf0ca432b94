/* catalog_shared_gen — generation.h's calls on the shared engine (issue 18,
 * docs/MULTINODE.md, docs/GENERATIONS.md "Several nodes"): the same
 * contracts as the SQLite engine's (generation.c), each change one fenced
 * transaction in PostgreSQL (meta/pggen.c). What differs, and why:
 *
 *  S1. A rewrite of a committed generation keeps its backup tree in the
 *      shared tables (G3); an abort or a hold rolls the new version back to
 *      it, and so does the sweep of a node lost while it had a file of the
 *      new version open (pggen.h X2): a crash never shows a mix of two
 *      versions. The inodes of a version the sweep rolled back keep nlink
 *      0 in the shared tables (no node's kernel is known to be done with
 *      them).
 *  S2. exclusive_bytes is 0: which chunks only one generation names would
 *      cost a chunk lookup per extent of the whole store, for a figure
 *      no policy decides on. files and logical_bytes are computed.
 *  S3. A commit waits for every node's writers: -EBUSY while a file of the
 *      generation is open for writing on any node (pggen.h X1), which the
 *      generation policy retries (fs/gen.c). A generation held because its
 *      node was lost (rule "node-lost", X2) is committed only by an admin's
 *      decision (rule "admin"): its dead node's files are as their last
 *      close left them; any other held one commits as in SQLite.
 *  S4. G4 (no OPEN generation after open) is a single node's rule: another
 *      node's generations stay open across this node's restart; X2 holds
 *      those of a node that died instead.
 *  S5. A lost generation (pggen.h) is left out of cat_gen_find_step;
 *      cat_gen_find still finds it by name, so that it can be removed. A
 *      lost COMMITTED one is shown as HELD (pggen.h X5), also by
 *      cat_gen_list: the daemon hides it from its series directory on every
 *      node, as it hides a held save on one, `ckptfs-admin list` shows it
 *      with --all only, keep-latest-k and `wait` treat it as held; an
 *      admin's commit of a lost one fails with -ENODATA (its bytes are
 *      gone), not -EALREADY.
 *  S6. The commit (PostgreSQL) and the queueing of its manifest (this
 *      node's SQLite) are two transactions. A node that dies between them
 *      is swept, and its sweeper queues the manifest (a daemon restarted at
 *      once on the same cache registers anew and settles its old node at
 *      mount (lease.h L10), which queues it the
 *      same way). A commit that finds the generation committed already
 *      (-EALREADY: also what a COMMIT whose answer was lost finds when pg_txn
 *      runs it again) queues the manifest if it is not durable and not
 *      queued on this node. One whose outcome is unknown (-ENOTCONN, pg.h
 *      P2: the policy does not run it again) has this node's next sweep
 *      queue every COMMITTED generation not durable, as S8's rename
 *      (cat_shared_requeue_later; tests/unit/test_pgfault.c); so has a
 *      commit whose manifest could not be queued here.
 *  S7. A rewrite rolled back by this node (an abort or a hold of the new
 *      version) queues its restored version's manifest here again if that
 *      version is COMMITTED (catshg_restored): one round trip more per
 *      abort. A rollback by the sweep of a lost node (pggen.h X2) queues it
 *      only if it is not durable (catshd_enqueue_undurable).
 *  S8. A directory renamed (the lone engine's gen_series_moved): the
 *      COMMITTED generations whose series is it or under it lose their
 *      durable mark in the rename's transaction (pgns.h N13), and the
 *      renaming node queues their manifests right after it
 *      (catshg_series_moved), which the uploader builds from PostgreSQL
 *      naming the new path. A node lost between the two leaves them not
 *      durable: its sweeper queues them (S6's path); a rename whose
 *      queueing failed here, or whose outcome is unknown (-ENOTCONN, pg.h
 *      P2), has this node's next sweep queue every COMMITTED generation
 *      not durable (cat_shared_requeue_later). `ckptfs-admin wait`
 *      waits for them, as BACKING's copies name the old path. Left: a
 *      manifest of the old path whose upload was under way at the rename
 *      marks the generation durable again when it ends; the row queued
 *      here then writes the new path, unless the node is lost first.
 *  S9. (generation.h G13) A commit of an OPEN save by any rule but the
 *      admin's is refused with -ENOTRECOVERABLE while a file of it names a
 *      chunk this node's queue records lost (upload.h U14) and pggen.h X17
 *      finds it lost, and catshg_unsettled gives the reason, so fs/gen.c
 *      holds it (rule "lost-chunk"). The check runs on the committing node,
 *      before the commit's transaction: a save committed by another node
 *      than the one that found the chunk lost, or committed while the
 *      uploader was finding it, is held by pggen.h X16 instead: at once in
 *      the second case, in the first only when the finding node's uploader
 *      tries the chunk again (its next mount; until then it stays
 *      committed, not durable). */
#define _GNU_SOURCE
#include "catalog_shared_gen.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog_internal.h"
#include "log.h"
#include "manifest_shared.h"
#include "pg.h"
#include "pggen.h"
#include "pgns.h"

static int catshg_rule_check(const char *rule)
{
	return rule != NULL && strlen(rule) < GEN_RULE_MAX ? 0 : -EINVAL;
}

/* As catalog.c's check of a spec: a root is a directory or a file named as
 * the spec says. */
static int catshg_spec_check(const struct cat_gen_spec *spec, const char *name, uint32_t mode)
{
	if (spec == NULL)
		return 0;
	if (!S_ISDIR(mode) && !S_ISREG(mode))
		return -EINVAL;
	if (spec->name != NULL && strcmp(spec->name, name) != 0)
		return -EINVAL;
	return spec->step > INT64_MAX ? -EINVAL : 0;
}

int catshg_create_in_gen(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
			 uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
			 const struct cat_gen_spec *gen, struct cat_inode *out, uint64_t *gen_id)
{
	struct pgns *ns = cat_shared_ns(cat);
	if (gen_id)
		*gen_id = 0;
	int rc = cat_name_check(name);
	if (rc == 0)
		rc = catshg_spec_check(gen, name, mode);
	if (rc == 0 && gen && target)
		rc = -EINVAL;
	if (rc)
		return rc;
	if (gen) {
		struct cat_gen_spec spec = { name, gen->step };
		return pggen_create_root(ns, parent, &spec, mode, uid, gid, out, gen_id);
	}
	/* it inherited its parent's generation in that statement, which says
	 * which one (pgns.h N11) */
	return pgns_create_gen(ns, parent, name, mode, uid, gid, rdev, target, out, gen_id);
}

void catshg_series_moved(struct cat *cat, int rename_rc)
{
	uint64_t *ids = NULL;
	uint32_t *versions = NULL;
	size_t n = pgns_series_moved_take(&ids, &versions), queued = 0;
	if (rename_rc == -ENOTCONN) /* its outcome unknown (pg.h P2): it may have moved some */
		cat_shared_requeue_later(cat);
	for (size_t i = 0; rename_rc == 0 && i < n; i++) {
		if (catshd_enqueue(cat, ids[i], versions[i]) == 0) /* logs its failure */
			queued++;
		else
			cat_shared_requeue_later(cat);
	}
	if (queued > 0)
		log_info("catalog %s: a directory renamed: the manifests of %zu committed"
			 " generations under it queued again (they name the old path)", cat->path,
			 queued);
	free(ids);
	free(versions);
}

int catshg_rename_gen(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
		      const char *newname, unsigned flags, const struct cat_gen_spec *gen,
		      uint64_t *replaced_ino, uint64_t *new_gen_id, uint64_t *moved_ino)
{
	if (replaced_ino)
		*replaced_ino = 0;
	if (new_gen_id)
		*new_gen_id = 0;
	if (moved_ino)
		*moved_ino = 0;
	int rc = cat_name_check(name);
	if (rc == 0)
		rc = cat_name_check(newname);
	if (rc == 0 && gen && (gen->step > INT64_MAX || (gen->name && strcmp(gen->name, newname))))
		rc = -EINVAL;
	if (rc)
		return rc;
	rc = pggen_rename(cat_shared_ns(cat), parent, name, newparent, newname, flags, gen,
			  replaced_ino, new_gen_id, moved_ino);
	catshg_series_moved(cat, rc); /* S8 */
	return rc;
}

int catshg_gen_of(struct cat *cat, uint64_t ino, uint64_t *gen_id)
{
	return pggen_gen_of(cat_shared_ns(cat), ino, gen_id);
}

int catshg_get(struct cat *cat, uint64_t id, struct cat_gen *out)
{
	return pggen_get_sized(cat_shared_ns(cat), id, out); /* S2 */
}

int catshg_find(struct cat *cat, uint64_t series, const char *name, struct cat_gen *out)
{
	if (name == NULL)
		return -EINVAL;
	return pggen_find(cat_shared_ns(cat), series, name, out);
}

int catshg_find_step(struct cat *cat, uint64_t series, uint64_t step, struct cat_gen *out)
{
	return pggen_find_step(cat_shared_ns(cat), series, step, out);
}

int catshg_list(struct cat *cat, uint64_t series, bool all, cat_gen_fn fn, void *arg)
{
	return pggen_list_all(cat_shared_ns(cat), series, all, fn, arg);
}

/* generation.c's errors for a generation not in the state a call needs:
 * -EALREADY if it is already where the call leads, -ENOENT if ended. */
static int catshg_state_error(struct pgns *ns, uint64_t id, int already, int rc)
{
	struct cat_gen g;
	if (pggen_get(ns, id, &g, NULL) != 0)
		return rc;
	if (g.state == already)
		return -EALREADY;
	return g.state == GEN_ABORTED || g.state == GEN_DELETED ? -ENOENT : rc;
}

/* S9 (generation.h G13): the G12 reason for a file of id naming a chunk this
 * node's queue records lost (upload.h U14) or any node found lost (its
 * chunk row's mark), as pggen.h X17 judges it; "" if none. mine_only: no
 * round trip while this node's queue records none (the commit's own
 * transaction checks the marks, X17). */
static int catshg_lost_chunk_of(struct cat *cat, uint64_t id, bool mine_only, char *reason,
				size_t size)
{
	uint8_t hashes[64][CAT_HASH_LEN];
	size_t n = 0;
	reason[0] = '\0';
	int rc = cat_upload_lost_hashes(cat, hashes, 64, &n);
	if (rc || (mine_only && n == 0))
		return rc;
	return pggen_lost_chunk_of(cat_shared_ns(cat), id, hashes, n, reason, size);
}

int catshg_commit(struct cat *cat, uint64_t id, const char *rule)
{
	struct pgns *ns = cat_shared_ns(cat);
	struct cat_gen g;
	bool lost = false;
	int rc = catshg_rule_check(rule);
	if (rc == 0)
		rc = pggen_get(ns, id, &g, &lost);
	if (rc)
		return rc;
	/* S3: a hold that X2 made ends by a decision only */
	bool decision = strcmp(rule, "admin") == 0 ||
			(g.state == GEN_HELD && strcmp(g.rule, "node-lost") != 0);
	if (lost && decision && g.state == GEN_COMMITTED)
		return -ENODATA; /* S5: shown as held, and no decision brings its bytes back */
	char why[GEN_HELD_MAX] = "";
	if (strcmp(rule, "admin") != 0 && g.state != GEN_COMMITTED) /* S9 */
		rc = catshg_lost_chunk_of(cat, id, true, why, sizeof(why));
	if (rc)
		return rc;
	if (why[0]) {
		log_warn("catalog %s: generation %s (step %" PRIu64 ") not committed by rule %s: %s"
			 " (generation.h G13)", pg_name(ns->pg), g.name, g.step, rule, why);
		return -ENOTRECOVERABLE;
	}
	uint64_t writers = 0;
	uint32_t version = 0;
	rc = pggen_commit_at(ns, id, rule, decision, &writers, &version);
	if (rc == -EBUSY)
		log_debug("catalog %s: generation %" PRIu64 " (%s): commit (%s) waits for %" PRIu64
			  " files open for writing on the nodes", pg_name(ns->pg), id, g.name, rule,
			  writers);
	if (rc == -EINVAL)
		rc = catshg_state_error(ns, id, GEN_COMMITTED, rc);
	/* its manifest, from the committing node's queue (manifest_shared.h D2) */
	if (rc == 0 && catshd_enqueue(cat, id, version) != 0) /* pggen.h X9: the version committed */
		cat_shared_requeue_later(cat); /* S6: logged; the next sweep queues it */
	/* S6: committed already, maybe by this very call (a COMMIT whose answer
	 * was lost runs again and finds it committed, pg.h P2): its manifest,
	 * unless it is durable or queued here */
	if (rc == -EALREADY)
		catshd_enqueue_missing(cat, id);
	if (rc == -ENOTCONN) /* S6: it may have committed */
		cat_shared_requeue_later(cat);
	return rc;
}

/* pggen.h X14: the file whose write or last close failed, named as one
 * node names it (generation.h G9) */
int catshg_unsettled(struct cat *cat, uint64_t id, char *reason, size_t size)
{
	int rc = pggen_unsettled(cat_shared_ns(cat), id, reason, size);
	return rc == 0 && reason[0] == '\0' ? catshg_lost_chunk_of(cat, id, false, reason, size) : rc;
}

/* S7: a rewrite rolled back to its previous version (an abort or a hold of
 * the new version): that version's manifest is queued here again if it is
 * COMMITTED, as on one node (gen_backup_restore). BACKING's copy names its
 * series by the path it had when written, and the series may have moved
 * while the new version was open; or the version was caught before it was
 * durable, and its queued row went stale meanwhile. */
static void catshg_restored(struct cat *cat, uint64_t id)
{
	struct cat_gen g;
	bool lost = false;
	int rc = pggen_get(cat_shared_ns(cat), id, &g, &lost);
	if (rc != 0)
		log_error("catalog %s: generation %" PRIu64 " was rolled back, but its manifest could"
			  " not be queued again: %s", cat->path, id, strerror(-rc));
	else if (g.state == GEN_COMMITTED && !lost)
		catshd_enqueue(cat, id, g.version); /* logs its failure */
}

int catshg_hold(struct cat *cat, uint64_t id, const char *rule, const char *reason,
		cat_ino_fn fn, void *arg, bool *held_out)
{
	struct pgns *ns = cat_shared_ns(cat);
	struct cat_id_vec ids = { 0 };
	bool held = false;
	int rc = catshg_rule_check(rule);
	if (rc == 0)
		rc = pggen_hold_ids(ns, id, rule, reason && reason[0] ? reason : "not proven complete",
				    fn ? &ids : NULL, &held);
	if (rc == -EINVAL)
		rc = catshg_state_error(ns, id, GEN_HELD, rc);
	if (rc == 0 && held_out)
		*held_out = held;
	if (rc == 0 && !held) /* rolled back to its previous version */
		catshg_restored(cat, id);
	for (size_t i = 0; rc == 0 && fn && i < ids.n; i++) /* S1: a rolled back version's */
		fn(arg, ids.v[i]);
	cat_id_vec_free(&ids);
	return rc;
}

/* generation.h G12 (pggen.h X16): 16 saves a transaction, one warn line each. */
int catshg_hold_lost_chunk(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	char hex[2 * CAT_HASH_LEN + 1];
	cat_hex(hash, hex);
	struct pggen_lost_hit hits[16];
	size_t n = 0, total = 0;
	int rc;
	do {
		rc = pggen_hold_lost_chunk(cat_shared_ns(cat), hash, hits, 16, &n);
		for (size_t i = 0; rc == 0 && i < n; i++)
			cat_log_lost_chunk_hold(cat, hits[i].id, hex, hits[i].name, hits[i].ino);
		total += rc == 0 ? n : 0;
	} while (rc == 0 && n == 16);
	return rc < 0 ? rc : (int)total;
}

static int catshg_end(struct cat *cat, uint64_t id, enum pggen_end how, const char *rule,
		      cat_ino_fn fn, void *arg)
{
	struct cat_id_vec ids = { 0 };
	int rc = catshg_rule_check(rule);
	if (rc == 0)
		rc = pggen_end(cat_shared_ns(cat), id, how, rule, fn ? &ids : NULL);
	if (rc == 0 && how == PGGEN_ABORT) /* a new version's abort restores the last (S7) */
		catshg_restored(cat, id);
	/* the removed inodes, once committed, with nothing held (generation.h) */
	for (size_t i = 0; rc == 0 && fn && i < ids.n; i++)
		fn(arg, ids.v[i]);
	cat_id_vec_free(&ids);
	return rc;
}

int catshg_abort(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg)
{
	return catshg_end(cat, id, PGGEN_ABORT, rule, fn, arg);
}

int catshg_delete(struct cat *cat, uint64_t id, const char *rule, cat_ino_fn fn, void *arg)
{
	return catshg_end(cat, id, PGGEN_DELETE, rule, fn, arg);
}

int catshg_expire(struct cat *cat, uint64_t id, uint32_t keep, const char *rule, cat_ino_fn fn,
		  void *arg)
{
	struct cat_id_vec ids = { 0 };
	int rc = catshg_rule_check(rule);
	if (rc == 0)
		rc = pggen_expire(cat_shared_ns(cat), id, keep, rule, fn ? &ids : NULL);
	for (size_t i = 0; rc == 0 && fn && i < ids.n; i++)
		fn(arg, ids.v[i]);
	cat_id_vec_free(&ids);
	return rc;
}

int catshg_reopen(struct cat *cat, uint64_t id)
{
	return pggen_reopen(cat_shared_ns(cat), id); /* S1 */
}

int catshg_pin(struct cat *cat, uint64_t id, bool pinned)
{
	return pggen_pin(cat_shared_ns(cat), id, pinned);
}

int catshg_id_reserve(struct cat *cat, uint64_t id)
{
	return pggen_rebuild_reserve_ids(cat_shared_ns(cat), id); /* rebuild.c invariant 6 */
}

int catshg_others_in(struct cat *cat, uint64_t id, bool *others)
{
	return pggen_others(cat_shared_ns(cat), id, others); /* pggen.h X7 */
}

int catshg_check(struct cat *cat)
{
	struct pgns *ns = cat_shared_ns(cat);
	int violations = 0;
	int rc = pggen_check(ns, &violations);
	if (rc == 0 && violations > 0) {
		log_error("catalog %s: generation check found %d violations", pg_name(ns->pg),
			  violations);
		rc = -EUCLEAN;
	}
	return rc;
}
