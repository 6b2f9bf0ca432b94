/* admin_change — commit, pin, unpin, rm.
 *
 * With the daemon running they are requests on its control channel, carried
 * out by gen.c exactly like the xattrs and keep-latest-k (the catalog is never
 * written behind a live daemon). Offline (--cache DIR, no daemon: admin.c
 * holds the cache lock and opened the catalog read-write, which rolled back
 * any OPEN generation as a mount would) they are single catalog calls. On a
 * node of a shared catalog the daemon also names GEN (admin_shared.c) and
 * runs the same calls on PostgreSQL, fenced by its lease: a node another
 * node swept refuses with EROFS.
 * rm and commit take GEN only as the generation itself, never a path inside
 * it (admin_gen.c invariant G1); pin and unpin, which remove nothing and
 * are undone by each other, take a path inside too. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "store.h"

struct admin_answer {
	char state[32];
};

static void admin_answer_data(void *arg, const char *key, const char *value)
{
	struct admin_answer *ans = arg;
	if (strcmp(key, "state") == 0)
		snprintf(ans->state, sizeof(ans->state), "%s", value);
}

/* rm of an OPEN generation without --force: says what --force would do. A
 * rewrite of a committed (or held) step is aborted and the previous version
 * comes back, nothing deleted; a new save is aborted and its files go. */
static void admin_rm_open_refused(const char *label, const struct cat_gen *g)
{
	if (g->backup_root != 0 || g->version > 1)
		admin_err("rm %s: it is open: a rewrite of it is being written; rm --force aborts the"
			  " rewrite and gives back the previous version (%s), deleting nothing"
			  " (rm it again then to delete it)", label, g->held[0] ? "held" : "committed");
	else
		admin_err("rm %s: it is open (still being written); rm --force aborts it and deletes"
			  " what was written (rule admin-abort)", label);
}

/* Sends "VERB ID ARGS" to the daemon; prints the error line if refused. */
static int admin_change_online(struct admin *a, const char *label, const char *verb,
			       const struct cat_gen *g, const char *args, struct admin_answer *ans)
{
	char req[256], msg[512];
	snprintf(req, sizeof(req), "%s %" PRIu64 "%s%s", verb, g->id, args[0] ? " " : "", args);
	int rc = admin_ctl(a, req, admin_answer_data, ans, msg, sizeof(msg));
	if (rc == 0)
		return ADMIN_OK;
	if (rc < 0) {
		admin_err("%s %s: the daemon did not answer: %s", verb, label, msg);
		return ADMIN_NO_DAEMON;
	}
	if (rc == EBUSY && strcmp(verb, "rm") == 0)
		admin_rm_open_refused(label, g);
	else if (rc == EBUSY)
		admin_err("%s %s: it is open (still being written)", verb, label);
	else if (rc == ENOENT)
		admin_err("%s %s: no such generation (it ended meanwhile)", verb, label);
	else if (rc == EPERM || rc == EACCES)
		admin_err("%s %s: permission denied: only root and the daemon's user may", verb, label);
	else if (rc == EROFS && strstr(msg, "claim")) /* a daemon fenced by BACKING's claim */
		admin_err("%s %s: %s", verb, label, msg);
	else if (rc == EROFS)
		admin_err("%s %s: this node is fenced (another node swept its lease): it is read-only"
			  " until mounted again; run it on a live node", verb, label);
	else if (rc == ENODATA)
		admin_err("%s %s: it is lost (chunks of it died with their node): it cannot be"
			  " committed; rm it", verb, label);
	else
		admin_err("%s %s: %s (%s)", verb, label, msg, strerror(rc));
	return admin_exit_for(rc);
}

static void admin_change_report(struct admin *a, const char *label, const struct cat_gen *g,
				const char *verb, const char *state, bool pinned)
{
	if (a->json) {
		printf("{\"generation\": ");
		admin_json_str(stdout, label);
		printf(", \"id\": %" PRIu64 ", \"action\": \"%s\", \"state\": \"%s\", \"pinned\": %s, "
		       "\"mode\": \"%s\"}\n",
		       g->id, verb, state, pinned ? "true" : "false", a->daemon ? "online" : "offline");
	} else {
		printf("%s: %s (%s%s)%s\n", label, verb, state, pinned ? ", pinned" : "",
		       a->daemon ? "" : " [offline]");
	}
}

/* The shared start of each command: one GEN, live, its label. */
static int admin_change_gen(struct admin *a, const char *verb, bool root_only, struct cat_gen *g,
			    char *label, size_t size)
{
	if (a->npos != 1) {
		admin_err("%s: expected one GEN (see ckptfs-admin %s --help)", verb, verb);
		return ADMIN_USAGE;
	}
	int rc = root_only ? admin_resolve_gen_root(a, a->pos[0], g)
			   : admin_resolve_gen(a, a->pos[0], g);
	if (rc != ADMIN_OK)
		return rc;
	admin_gen_label(a, g, label, size);
	if (g->state != GEN_OPEN && g->state != GEN_COMMITTED && g->state != GEN_HELD) {
		admin_err("%s %s: it is %s (rule %s): nothing to %s", verb, label,
			  cat_gen_state_name(g->state), g->rule[0] ? g->rule : "-", verb);
		return ADMIN_NO_GEN;
	}
	return ADMIN_OK;
}

int admin_cmd_commit(struct admin *a)
{
	struct cat_gen g;
	char label[PATH_MAX + CAT_NAME_MAX + 2];
	int rc = admin_change_gen(a, "commit", true, &g, label, sizeof(label));
	if (rc != ADMIN_OK)
		return rc;
	struct admin_answer ans = { "committed" };
	if (g.state == GEN_COMMITTED) {
		snprintf(ans.state, sizeof(ans.state), "committed");
	} else if (a->daemon) {
		if ((rc = admin_change_online(a, label, "commit", &g, "", &ans)) != ADMIN_OK)
			return rc;
	} else { /* HELD (an offline open held every OPEN generation) */
		/* gen.h invariant 7, as the daemon's commit: the save's objects
		 * are durable before the catalog says COMMITTED (review3 F5) */
		int err = a->store ? store_syncfs(a->store) : -EIO;
		if (err != 0)
			admin_err("commit %s: cannot sync the cache %s before committing: %s;"
				  " not committed", label, a->cache, strerror(-err));
		else if ((err = cat_gen_commit(a->cat, g.id, "admin")) != 0)
			admin_err("commit %s: %s", label, strerror(-err));
		if (err != 0)
			return admin_exit_for(err);
	}
	admin_change_report(a, label, &g, "commit", ans.state, g.pinned);
	if (!a->json && strcmp(ans.state, "open") == 0)
		fprintf(stderr, "ckptfs-admin: %s commits when its last write handle closes\n", label);
	return ADMIN_OK;
}

static int admin_pin_set(struct admin *a, bool pinned)
{
	const char *verb = pinned ? "pin" : "unpin";
	struct cat_gen g;
	char label[PATH_MAX + CAT_NAME_MAX + 2];
	int rc = admin_change_gen(a, verb, false, &g, label, sizeof(label));
	if (rc != ADMIN_OK)
		return rc;
	struct admin_answer ans = { "" };
	if (a->daemon) {
		rc = admin_change_online(a, label, "pin", &g, pinned ? "1" : "0", &ans);
		if (rc != ADMIN_OK)
			return rc;
	} else {
		int err = cat_gen_pin(a->cat, g.id, pinned);
		if (err != 0) {
			admin_err("%s %s: %s", verb, label, strerror(-err));
			return admin_exit_for(err);
		}
	}
	admin_change_report(a, label, &g, verb, cat_gen_state_name(g.state), pinned);
	return ADMIN_OK;
}

int admin_cmd_pin(struct admin *a)
{
	return admin_pin_set(a, true);
}

int admin_cmd_unpin(struct admin *a)
{
	return admin_pin_set(a, false);
}

int admin_cmd_rm(struct admin *a)
{
	struct cat_gen g;
	char label[PATH_MAX + CAT_NAME_MAX + 2];
	int rc = admin_change_gen(a, "rm", true, &g, label, sizeof(label));
	if (rc != ADMIN_OK)
		return rc;
	if (g.state == GEN_OPEN && !a->force) {
		admin_rm_open_refused(label, &g);
		return ADMIN_BUSY;
	}
	struct admin_answer ans = { "deleted" };
	if (a->daemon) {
		rc = admin_change_online(a, label, "rm", &g, a->force ? "force" : "", &ans);
		if (rc != ADMIN_OK)
			return rc;
	} else {
		struct cat_id_vec inos = { 0 };
		int err = cat_gen_delete(a->cat, g.id, "admin", cat_id_vec_add_ino, &inos);
		/* offline no kernel holds them: release now (chunks reclaimed); what
		 * fails here keeps nlink 0 and goes at the next open */
		if (err == 0)
			cat_inodes_release(a->cat, inos.v, inos.n);
		cat_id_vec_free(&inos);
		if (err != 0) {
			admin_err("rm %s: %s", label, strerror(-err));
			return admin_exit_for(err);
		}
	}
	admin_change_report(a, label, &g, "rm", ans.state, false);
	if (!a->json && (strcmp(ans.state, "committed") == 0 || strcmp(ans.state, "held") == 0))
		/* rm --force of an open rewrite: it was aborted, its previous version is back */
		fprintf(stderr, "ckptfs-admin: %s: the rewrite was aborted and the previous version"
			" is back (%s); rm it again to delete it\n", label, ans.state);
	return ADMIN_OK;
}
