/* admin_rebuild — rebuild: recreate a cache's catalog from BACKING alone
 * (chunk objects + manifests, DESIGN invariant 5), for a lost or damaged
 * catalog. The work is fs/rebuild.c's rebuild_catalog, the same the daemon
 * runs on a fresh node; this command adds the safe swap around it.
 *
 * Offline only: a live daemon's catalog is never replaced (exit 8). Under the
 * cache lock it builds the new catalog as catalog.db.rebuilding, then moves
 * the old one (and its -wal/-shm, also a -wal/-shm whose catalog.db is
 * missing: SQLite would replay it onto the new one) aside as
 * catalog.db.before-rebuild-<time>, renames the new one into place and
 * syncs the directory, then drops CACHE/backing-id (the new catalog describes
 * the store just read; the next mount adopts its id, fs/main.c M1). Old
 * catalogs are never deleted: the output says how many files they take and
 * how to remove them. A rebuild that fails leaves
 * the old catalog where it was.
 *
 * Its claim is a stand-in (claim.h invariant 13): it records the claim it
 * replaced, so a rebuild killed before its swap leaves the old catalog
 * mountable (review 32B F3), and the take is recorded in the new catalog
 * (invariant 12), whose first mount takes the claim as its own. Manifests that are corrupt or
 * conflict are reported (exit 1) but do not stop the others; every chunk
 * object named is looked up on BACKING (REBUILD_CHECK_CHUNKS) and files
 * naming a missing one are counted. Chunks come in as on BACKING only
 * (cached 0): the daemon fetches them on first read.
 *
 * rebuild --meta URL BACKING refills an EMPTY shared catalog (-o meta=URL,
 * a lost database) from BACKING's newest readable tree manifest (the names
 * outside generations, written by the holder of duty "tree":
 * meta/manifest_shared.h D5) and its generation manifests: rebuild_catalog
 * over a shared struct cat, whose manifest_apply_parsed writes PostgreSQL's
 * tables (meta/manifest_shared.h). It joins the catalog as a node for the
 * time of the rebuild (its writes are fenced like any node's), refuses a
 * catalog that holds anything, and takes the catalog id BACKING's shared
 * claim names, so that the nodes mount the rebuilt catalog on that BACKING.
 * It refuses (exit 8) while that claim was renewed within
 * ADMIN_META_LIVE_S, unless --force: a node of the old catalog may still
 * run (a split brain, or a new database named while the cluster runs), and
 * two catalogs of one id on one BACKING each reclaim the chunks the other's
 * saves name (fs/lib/claim.h invariant 7).
 *
 * It writes nothing on BACKING but the claim (claim.c). The new catalog is
 * put in place only if the claim is still sure then (claim.h 9,
 * claim_may_write): else another catalog may have written BACKING while it
 * was read, and the old catalog stays (one line, exit 1).
 *
 * Limits: a generation deleted while its manifest removal was still queued
 * comes back (delete it again); data that was only in the cache (dirty,
 * never uploaded) is in no manifest and is not recovered.
 *
 * Invariants:
 *  R1. A rebuild never drops a save silently (review 35 F3): before it
 *      claims BACKING or moves anything, it opens the old catalog read-only
 *      and, if it can be read and holds upload rows still queued or
 *      generations not durable (OPEN, HELD, or COMMITTED with
 *      durable_version != version: none of them is whole in BACKING's
 *      manifests), refuses with exit 8, naming how many and a few of them,
 *      nothing changed, unless --force. Mounting the old catalog uploads
 *      them (or lists HELD ones for a decision); --force is for a catalog
 *      whose cache objects are lost anyway. So do files outside generations
 *      (latest, last.ckpt) naming chunks not uploaded, or whose last tree
 *      manifest put failed (upload.h U10). A catalog of another schema
 *      version (a mount upgrades it) is refused the same way, since it
 *      cannot be asked read-only. A catalog that cannot be read (missing,
 *      damaged: what rebuild is for) is not asked (review 36 F4b, F4c). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "backing.h"
#include "cachedir.h"
#include "claim.h"
#include "log.h"
#include "manifest_shared.h"
#include "rebuild.h"
#include "store.h"
#include "upload.h"

static const char *const admin_db_tails[] = { "", "-wal", "-shm" };
#define ADMIN_ASIDE_PREFIX CACHEDIR_CATALOG ".before-rebuild-"

/* The cache directory's entries as they are now, on disk (after renames). */
static int admin_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

/* Moves catalog.db and its -wal and -shm aside as
 * catalog.db.before-rebuild-TIME[-N]{,-wal,-shm}: every one that exists,
 * also a -wal or -shm whose catalog.db is missing (a catalog removed by
 * hand, or a rebuild stopped between these renames): SQLite would replay
 * such a log onto the new catalog renamed in beside it (review 32B F2).
 * aside: "" if nothing was there; *orphan: a log moved without its db.
 * The directory is synced. Nothing is ever deleted (F9). */
static int admin_move_aside(const char *cache, char *aside, size_t size, bool *orphan)
{
	char path[PATH_MAX + 32], from[PATH_MAX + 48], to[PATH_MAX + 96], stamp[32];
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	cachedir_path(cache, CACHEDIR_CATALOG, path, sizeof(path));
	snprintf(aside, size, "%s.before-rebuild-%s", path, stamp);
	struct stat sb;
	bool there[3], any = false, taken = true;
	for (int n = 2; taken && n < 1000; n++) { /* two rebuilds in one second */
		taken = false;
		for (int i = 0; i < 3 && !taken; i++) {
			snprintf(to, sizeof(to), "%s%s", aside, admin_db_tails[i]);
			taken = lstat(to, &sb) == 0;
		}
		if (taken)
			snprintf(aside, size, "%s.before-rebuild-%s-%d", path, stamp, n);
	}
	if (taken)
		return -EEXIST;
	for (int i = 0; i < 3; i++) {
		snprintf(from, sizeof(from), "%s%s", path, admin_db_tails[i]);
		there[i] = lstat(from, &sb) == 0;
		any |= there[i];
	}
	*orphan = !there[0] && any;
	if (!any) {
		aside[0] = '\0';
		return 0;
	}
	for (int i = 0; i < 3; i++) { /* the db first: a log without it is moved next time */
		snprintf(from, sizeof(from), "%s%s", path, admin_db_tails[i]);
		snprintf(to, sizeof(to), "%s%s", aside, admin_db_tails[i]);
		if (there[i] && rename(from, to) != 0 && errno != ENOENT)
			return -errno;
	}
	return admin_sync_dir(cache);
}

static void admin_unlink_db(const char *path)
{
	char p[PATH_MAX + 16];
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, admin_db_tails[i]);
		unlink(p);
	}
}

static int admin_aside_filter(const struct dirent *d)
{
	return strncmp(d->d_name, ADMIN_ASIDE_PREFIX, sizeof(ADMIN_ASIDE_PREFIX) - 1) == 0;
}

/* How many files old catalogs moved aside by rebuilds take in the cache
 * (each kept until the user removes it: F9), and their bytes. */
static int admin_count_asides(const char *cache, uint64_t *bytes)
{
	struct dirent **names = NULL;
	int n = scandir(cache, &names, admin_aside_filter, alphasort);
	*bytes = 0;
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX + 300];
		struct stat sb;
		snprintf(p, sizeof(p), "%s/%s", cache, names[i]->d_name);
		if (lstat(p, &sb) == 0)
			*bytes += (uint64_t)sb.st_size;
		free(names[i]);
	}
	free(names);
	return n < 0 ? 0 : n;
}

static void admin_rebuild_progress(void *arg, uint64_t done, uint64_t total)
{
	admin_progress("rebuild", done, total);
}

struct admin_recache {
	struct store *st;
	struct cat *cat;
	uint64_t chunks;
};

static int admin_recache_one(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			     uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct admin_recache *r = arg;
	struct store_object_info info;
	(void)refcount;
	if (stored_len >= 0 && store_stat(r->st, hash, &info) == 0 && info.codec == codec &&
	    info.plain_len == plain_len && (int64_t)info.stored_len == stored_len &&
	    cat_chunk_fetched(r->cat, hash) == 0)
		r->chunks++;
	return 0;
}

/* The manifests say where chunks are durable (BACKING); the objects still in
 * this cache are used again rather than fetched (and gc'd) anew. */
static uint64_t admin_recache(struct admin *a, struct cat *cat)
{
	struct admin_recache r = { NULL, cat, 0 };
	if (store_open(a->cache, &r.st) != 0)
		return 0;
	cat_chunks(cat, admin_recache_one, &r);
	store_close(r.st);
	return r.chunks;
}

/* A shared claim renewed this recently is a running cluster's: its nodes
 * renew it every quarter of their claim_timeout (the default unless set;
 * up to 4 times it, a live node still renews within this). */
#define ADMIN_META_LIVE_S CLAIM_DEFAULT_TIMEOUT_S

/* Refuses a shared claim renewed within ADMIN_META_LIVE_S (a clock ahead of
 * ours counts as recent), unless --force. */
static int admin_meta_claim_quiet(struct admin *a, const struct claim_rec *rec)
{
	int64_t ago = (int64_t)time(NULL) - rec->renewed;
	if (ago >= ADMIN_META_LIVE_S || a->force)
		return ADMIN_OK;
	admin_err("rebuild --meta: BACKING %s is claimed by the shared catalog %s, renewed %" PRId64
		  " s ago (by host %s, cache %s), within %d s: a node of it may still run, and two"
		  " catalogs on one BACKING delete each other's chunks; stop every node of it and"
		  " wait until the claim is %d s old, or give --force if they are all stopped;"
		  " nothing changed", a->pos[0], rec->catalog, ago, rec->host, rec->cache,
		  ADMIN_META_LIVE_S, ADMIN_META_LIVE_S);
	return ADMIN_BUSY;
}

/* The catalog id of BACKING's claim if it is a shared catalog's ("" if
 * there is no claim); a lone catalog's claim is refused, and so is a shared
 * one still renewed (admin_meta_claim_quiet). */
static int admin_meta_claim(struct admin *a, char id[CLAIM_ID_LEN + 1])
{
	struct claim_rec rec;
	id[0] = 0;
	int err = admin_claim_get(a->bk, &rec);
	if (err == -ENOENT)
		return ADMIN_OK;
	if (err != 0) {
		admin_err("rebuild --meta: BACKING %s: cannot read its claim %s/: %s", a->pos[0],
			  CLAIM_DIR, strerror(-err));
		return ADMIN_PROBLEM;
	}
	if (!rec.shared) {
		admin_err("rebuild --meta: BACKING %s belongs to a lone catalog (cache %s on %s), not"
			  " a shared one: rebuild it with --cache", a->pos[0], rec.cache, rec.host);
		return ADMIN_PROBLEM;
	}
	snprintf(id, CLAIM_ID_LEN + 1, "%s", rec.catalog);
	return admin_meta_claim_quiet(a, &rec);
}

/* The shared catalog at a->target as a node named for the rebuild, with a
 * local catalog file in a private temporary directory. */
static int admin_meta_open(struct admin *a, char *dir, size_t size, struct cat **cat)
{
	char local[PATH_MAX], name[128], err[1024] = "";
	snprintf(dir, size, "/tmp/ckptfs-rebuild-meta.XXXXXX");
	if (!mkdtemp(dir)) {
		admin_err("rebuild --meta: cannot make a directory %s: %s", dir, strerror(errno));
		dir[0] = 0;
		return ADMIN_PROBLEM;
	}
	snprintf(local, sizeof(local), "%s/catalog.db", dir);
	snprintf(name, sizeof(name), "rebuild-meta:%ld", (long)getpid());
	struct cat_shared_cfg cfg = { .url = a->target, .node_name = name, .lease_ms = 600000,
				      .timeout_ms = 20000 };
	int rc = cat_open_shared(local, &cfg, getuid(), getgid(), NULL, NULL, cat, err, sizeof(err));
	if (rc != 0) {
		admin_err("rebuild --meta: %s", err[0] ? err : strerror(-rc));
		return ADMIN_PROBLEM;
	}
	return ADMIN_OK;
}

static void admin_meta_cleanup(const char *dir)
{
	char p[PATH_MAX + 32];
	for (int i = 0; dir[0] && i < 3; i++) {
		snprintf(p, sizeof(p), "%s/catalog.db%s", dir, admin_db_tails[i]);
		unlink(p);
	}
	if (dir[0])
		rmdir(dir);
}

static int admin_rebuild_meta(struct admin *a)
{
	if (a->npos != 1) {
		admin_err("rebuild --meta: expected URL BACKING");
		return ADMIN_USAGE;
	}
	int err = backing_open(a->pos[0], 0, &a->bk);
	if (err != 0) {
		admin_err("rebuild --meta: BACKING %s: %s", a->pos[0], strerror(-err));
		return ADMIN_PROBLEM;
	}
	char id[CLAIM_ID_LEN + 1], dir[64] = "", why[256] = "";
	int rc = admin_meta_claim(a, id);
	bool has = false;
	if (rc == ADMIN_OK && ((err = rebuild_backing_has_data(a->bk, &has)) != 0 || !has)) {
		admin_err("rebuild --meta: BACKING %s %s; nothing changed", a->pos[0],
			  err ? strerror(-err) : "holds no manifests: nothing to rebuild from");
		rc = ADMIN_PROBLEM;
	}
	struct cat *cat = NULL;
	if (rc == ADMIN_OK)
		rc = admin_meta_open(a, dir, sizeof(dir), &cat);
	if (rc == ADMIN_OK && (err = manifest_shared_empty(cat, why, sizeof(why))) != 0) {
		admin_err("rebuild --meta: the shared catalog %s is not empty (%s): rebuild fills only"
			  " an empty one; nothing changed", a->target, err == -ENOTEMPTY ? why
											  : strerror(-err));
		rc = ADMIN_PROBLEM;
	}
	if (rc == ADMIN_OK && id[0] && (err = manifest_shared_adopt_id(cat, id)) != 0) {
		admin_err("rebuild --meta: cannot set the catalog id: %s", strerror(-err));
		rc = ADMIN_PROBLEM;
	}
	struct rebuild_report rep;
	memset(&rep, 0, sizeof(rep));
	if (rc == ADMIN_OK) {
		err = rebuild_catalog(a->bk, cat, REBUILD_CHECK_CHUNKS, admin_rebuild_progress, NULL,
				      &rep);
		admin_progress_end();
		if (err != 0) {
			admin_err("rebuild --meta: %s (the shared catalog holds what was applied: empty"
				  " its database and rebuild again)", strerror(-err));
			rc = ADMIN_PROBLEM;
		}
	}
	cat_close(cat);
	admin_meta_cleanup(dir);
	if (rc != ADMIN_OK)
		return rc;
	bool damaged = rep.manifests_corrupt || rep.manifests_rejected || rep.generations_lost ||
		       rep.chunks_missing;
	if (a->json) {
		printf("{\"generations\": %" PRIu64 ", \"tree\": %s, \"files\": %" PRIu64
		       ", \"bytes\": %" PRIu64 ", \"manifests_corrupt\": %" PRIu64
		       ", \"manifests_rejected\": %" PRIu64 ", \"generations_lost\": %" PRIu64
		       ", \"chunks_missing\": %" PRIu64 "}\n",
		       rep.generations, rep.tree_applied ? "true" : "false", rep.files, rep.bytes,
		       rep.manifests_corrupt, rep.manifests_rejected, rep.generations_lost,
		       rep.chunks_missing);
	} else {
		char s[32];
		printf("rebuilt the shared catalog from BACKING %s: %" PRIu64 " generations%s, %" PRIu64
		       " files, %s\n", a->pos[0], rep.generations,
		       rep.tree_applied ? " and the tree outside them" : "", rep.files,
		       admin_size(rep.bytes, s));
		if (damaged)
			printf("problems: %" PRIu64 " corrupt and %" PRIu64 " conflicting manifests, %" PRIu64
			       " generations lost, %" PRIu64 " chunks missing (%" PRIu64
			       " files damaged): see above\n",
			       rep.manifests_corrupt, rep.manifests_rejected, rep.generations_lost,
			       rep.chunks_missing, rep.files_damaged);
	}
	return damaged ? ADMIN_PROBLEM : ADMIN_OK;
}

/* Just before the new catalog is renamed to path: nothing of an old one is
 * left there, a -wal or -shm above all (F2: SQLite would replay it onto
 * the new catalog). 0, or -EEXIST. */
static int admin_db_absent(const char *path)
{
	char p[PATH_MAX + 16];
	struct stat sb;
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", path, admin_db_tails[i]);
		if (lstat(p, &sb) == 0)
			return -EEXIST;
	}
	return 0;
}

#define ADMIN_UNSAVED_NAMES 5 /* named in R1's refusal; the rest counted */

struct admin_unsaved {
	struct aq *aq;
	struct cat *cat;
	uint64_t n;
	char names[1024];
	int err;
};

/* A cat_gen_fn: counts (and names the first few of) the generations not
 * durable (R1). */
static int admin_unsaved_add(void *arg, const struct cat_gen *g)
{
	struct admin_unsaved *u = arg;
	bool durable = false;
	if (g->state == GEN_COMMITTED && (u->err = cat_gen_durable(u->cat, g->id, &durable)) != 0)
		return u->err;
	if (g->state == GEN_COMMITTED && durable)
		return 0;
	if (g->state != GEN_OPEN && g->state != GEN_HELD && g->state != GEN_COMMITTED)
		return 0;
	if (u->n++ < ADMIN_UNSAVED_NAMES) {
		char series[PATH_MAX];
		size_t len = strlen(u->names);
		if (aq_path(u->aq, g->series, series, sizeof(series)) != 0)
			snprintf(series, sizeof(series), "/?");
		snprintf(u->names + len, sizeof(u->names) - len, "%s%s%s%s (%s)", len ? ", " : "",
			 series + 1, series[1] ? "/" : "", g->name,
			 g->state == GEN_COMMITTED ? "committed, not on BACKING yet"
						   : cat_gen_state_name(g->state));
	}
	return 0;
}

/* R1: the old catalog's saves that are not (whole) on BACKING. ADMIN_OK if
 * there are none, it cannot be read, or --force; else ADMIN_BUSY, printed. */
static int admin_rebuild_unsaved(struct admin *a, const char *path)
{
	struct cat *old = NULL;
	struct cat_cache_stats cs;
	struct admin_unsaved u = { 0 };
	struct aq_tree_dirty td = { 0 };
	char tree_why[256] = "";
	memset(&cs, 0, sizeof(cs));
	if (access(path, F_OK) != 0)
		return ADMIN_OK;
	log_setup(stderr, LOG_LVL_OFF); /* a damaged catalog is what rebuild is for */
	int err = cat_open_readonly(path, &old);
	if (err == 0)
		err = aq_open(old, &u.aq);
	if (err == 0)
		err = cat_cache_stats(old, &cs);
	u.cat = old;
	if (err == 0 && (err = cat_gen_list_brief(old, 0, false, admin_unsaved_add, &u)) == 0)
		err = u.err;
	if (err == 0) /* the files outside generations: their chunks, their manifest */
		err = aq_tree_dirty(u.aq, &td);
	if (err == 0)
		err = cat_tree_unwritten(old, tree_why, sizeof(tree_why));
	log_setup(stderr, LOG_LVL_WARN);
	aq_close(u.aq);
	cat_close(old);
	if (err == -EPROTO && !a->force) { /* readable by a mount, which upgrades it: ask it */
		admin_err("rebuild: the catalog %s is of another schema version than this ckptfs reads"
			  " read-only, so what it holds that BACKING does not cannot be counted: mount"
			  " it once (it is upgraded, and uploads what it holds), then rebuild; or give"
			  " --force (the old catalog is kept aside). Nothing changed", path);
		return ADMIN_BUSY;
	}
	bool tree = td.files > 0 || tree_why[0];
	if (err != 0 || (cs.queued == 0 && u.n == 0 && !tree))
		return ADMIN_OK; /* unreadable (damaged): nothing to ask it */
	char tree_says[400] = "";
	if (td.files > 0)
		snprintf(tree_says, sizeof(tree_says), ", %" PRIu64 " file%s outside generations naming"
			 " chunks not on BACKING", td.files, td.files == 1 ? "" : "s");
	else if (tree_why[0])
		snprintf(tree_says, sizeof(tree_says), ", the files outside generations not described"
			 " on BACKING (the last tree manifest put failed: %.200s)", tree_why);
	if (a->force) {
		fprintf(stderr, "ckptfs-admin: rebuild --force: dropping %" PRIu64 " queued upload%s"
			" and %" PRIu64 " generation%s not durable on BACKING%s%s%s\n", cs.queued,
			cs.queued == 1 ? "" : "s", u.n, u.n == 1 ? "" : "s", u.n ? ": " : "", u.names,
			tree_says);
		return ADMIN_OK;
	}
	admin_err("rebuild: the catalog %s holds what BACKING does not: %" PRIu64 " queued upload%s"
		  " and %" PRIu64 " generation%s not durable%s%s%s%s; a rebuild from BACKING would drop"
		  " them. Mount the cache and let it upload (ckptfs-admin wait, or umount), decide on"
		  " held ones (commit or rm), then rebuild; or give --force to drop them (the old"
		  " catalog is kept aside). Nothing changed", path, cs.queued,
		  cs.queued == 1 ? "" : "s", u.n, u.n == 1 ? "" : "s", u.n ? ": " : "", u.names,
		  u.n > ADMIN_UNSAVED_NAMES ? ", ..." : "", tree_says);
	return ADMIN_BUSY;
}

/* The rebuild failed: its claim goes back to what it replaced (claim.h
 * claim_abandon), so the old catalog is not made BEHIND by none. */
static void admin_rebuild_abandon(struct admin *a)
{
	claim_abandon(a->claim);
	a->claim = NULL;
}

int admin_cmd_rebuild(struct admin *a)
{
	if (a->meta)
		return admin_rebuild_meta(a);
	if (a->daemon || !a->by_cache || a->lock_fd < 0) {
		admin_err("rebuild: the catalog is in use by a running daemon: unmount first, then "
			  "ckptfs-admin rebuild --cache %s", a->cache);
		return ADMIN_BUSY;
	}
	if (a->npos > 1) {
		admin_err("rebuild: expected at most BACKING after --cache DIR");
		return ADMIN_USAGE;
	}
	if (a->npos == 1 && strcmp(a->pos[0], a->backing) != 0) {
		admin_err("rebuild: cache %s belongs to BACKING %s, not %s", a->cache, a->backing,
			  a->pos[0]);
		return ADMIN_USAGE;
	}
	char path[PATH_MAX + 16], tmp[PATH_MAX + 32], aside[PATH_MAX + 64];
	cachedir_path(a->cache, CACHEDIR_CATALOG, path, sizeof(path));
	int rc = admin_rebuild_unsaved(a, path); /* R1 */
	if (rc != ADMIN_OK)
		return rc;
	if ((rc = admin_need_objects(a)) != ADMIN_OK)
		return rc;
	bool has = false;
	int err = rebuild_backing_has_data(a->bk, &has);
	if (err != 0 || !has) {
		admin_err("rebuild: BACKING %s %s; nothing changed", a->backing,
			  err ? strerror(-err) : "holds no manifests: nothing to rebuild from");
		return ADMIN_PROBLEM;
	}
	snprintf(tmp, sizeof(tmp), "%s.rebuilding", path);
	admin_unlink_db(tmp); /* an earlier rebuild that died */
	struct cat *cat = NULL;
	err = cat_open(tmp, getuid(), getgid(), NULL, NULL, &cat);
	if (err != 0) {
		admin_err("rebuild: cannot create %s: %s; nothing changed", tmp, strerror(-err));
		return ADMIN_PROBLEM;
	}
	/* BACKING is the new catalog's before it is read (claim.h invariant 8:
	 * a fresh catalog), renewed until exit and then released: no other
	 * catalog writes it between this read and the new catalog's mount, and
	 * the catalog replaced here is BEHIND from now on. Refused (exit 8,
	 * the holder named) while another catalog's daemon holds it. */
	rc = admin_claim_for(a, cat, true, true); /* a stand-in: claim.h 13 */
	if (rc != ADMIN_OK) {
		cat_close(cat);
		admin_unlink_db(tmp);
		admin_rebuild_abandon(a); /* nothing changed; the one line is the claim's */
		return rc;
	}
	struct rebuild_report rep;
	memset(&rep, 0, sizeof(rep));
	err = rebuild_catalog(a->bk, cat, REBUILD_CHECK_CHUNKS, admin_rebuild_progress, NULL, &rep);
	admin_progress_end();
	uint64_t recached = err == 0 ? admin_recache(a, cat) : 0;
	int check = err == 0 ? cat_check(cat) : 0;
	cat_close(cat);
	if (err != 0 || check != 0) {
		admin_unlink_db(tmp);
		admin_rebuild_abandon(a);
		admin_err("rebuild: %s; the old catalog is untouched",
			  err ? strerror(-err) : "the rebuilt catalog fails its checks (see above)");
		return ADMIN_PROBLEM;
	}
	/* What was read is BACKING as this claim's holder saw it: only while
	 * the claim is still sure (claim.h 9) did no other catalog write BACKING
	 * meanwhile. Unsure or lost (the tool stopped past the timeout, BACKING
	 * not answering its renewals, another catalog took it over), the
	 * catalog built may miss that catalog's saves: it is not swapped in. */
	if (!claim_may_write(a->claim)) {
		admin_unlink_db(tmp);
		admin_rebuild_abandon(a);
		admin_err("rebuild: BACKING's claim could not be renewed lately or was taken (EROFS) "
			  "while BACKING was read: the catalog built may miss what another catalog "
			  "wrote meanwhile; not put in place, the old catalog is untouched; run rebuild "
			  "again");
		return ADMIN_PROBLEM;
	}
	bool orphan = false;
	if ((err = admin_move_aside(a->cache, aside, sizeof(aside), &orphan)) != 0 ||
	    (err = admin_db_absent(path)) != 0 || (rename(tmp, path) != 0 && (err = -errno)) ||
	    (err = admin_sync_dir(a->cache)) != 0) {
		admin_err("rebuild: cannot put the new catalog %s in place: %s", path, strerror(-err));
		admin_rebuild_abandon(a); /* the old catalog stays in place (or aside) */
		return ADMIN_PROBLEM;
	}
	/* the new catalog describes the store just read, whatever store the old
	 * one uploaded to: the next mount adopts this store's id (fs/main.c M1) */
	char idpath[PATH_MAX + 32];
	cachedir_path(a->cache, CACHEDIR_STORE_ID, idpath, sizeof(idpath));
	if (unlink(idpath) != 0 && errno != ENOENT)
		admin_err("rebuild: cannot remove %s: %s (the next mount may refuse this BACKING as "
			  "another store: remove it by hand)", idpath, strerror(errno));
	uint64_t aside_bytes = 0;
	int kept = admin_count_asides(a->cache, &aside_bytes);
	bool damaged = rep.manifests_corrupt || rep.manifests_rejected || rep.generations_lost ||
		       rep.chunks_missing;
	if (a->json) {
		printf("{\"generations\": %" PRIu64 ", \"tree\": %s, \"files\": %" PRIu64
		       ", \"bytes\": %" PRIu64 ", \"manifests_seen\": %" PRIu64
		       ", \"manifests_corrupt\": %" PRIu64 ", \"manifests_rejected\": %" PRIu64
		       ", \"generations_lost\": %" PRIu64 ", \"chunks_checked\": %" PRIu64
		       ", \"chunks_missing\": %" PRIu64 ", \"files_damaged\": %" PRIu64
		       ", \"old_catalog_files\": %d, \"old_catalog_bytes\": %" PRIu64
		       ", \"old_catalog\": ",
		       rep.generations, rep.tree_applied ? "true" : "false", rep.files, rep.bytes,
		       rep.manifests_seen, rep.manifests_corrupt, rep.manifests_rejected,
		       rep.generations_lost, rep.chunks_checked, rep.chunks_missing, rep.files_damaged,
		       kept, aside_bytes);
		if (aside[0])
			admin_json_str(stdout, aside);
		else
			printf("null");
		printf("}\n");
	} else {
		char s[32];
		printf("rebuilt %s from BACKING %s: %" PRIu64 " generations%s, %" PRIu64
		       " files, %s\n",
		       path, a->backing, rep.generations,
		       rep.tree_applied ? " and the tree outside them" : "", rep.files,
		       admin_size(rep.bytes, s));
		if (damaged)
			printf("problems: %" PRIu64 " corrupt and %" PRIu64 " conflicting manifests, %" PRIu64
			       " generations lost, %" PRIu64 " chunks missing (%" PRIu64
			       " files damaged): see above\n",
			       rep.manifests_corrupt, rep.manifests_rejected, rep.generations_lost,
			       rep.chunks_missing, rep.files_damaged);
		if (recached)
			printf("%" PRIu64 " chunks still in the cache are used again\n", recached);
		if (aside[0] && orphan)
			printf("a write-ahead log without its catalog (%s-wal/-shm) is kept as %s-wal/-shm "
			       "(it was not replayed onto the new catalog)\n", path, aside);
		else if (aside[0])
			printf("the old catalog is kept as %s\n", aside);
		if (kept > 0)
			printf("old catalogs moved aside by rebuilds are never deleted: %d files, %s, in "
			       "%s; remove them with rm %s/" ADMIN_ASIDE_PREFIX "* once you no longer "
			       "need them\n", kept, admin_size(aside_bytes, s), a->cache, a->cache);
	}
	return damaged ? ADMIN_PROBLEM : ADMIN_OK;
}
