/* admin_rebuild — rebuild: recreate a cache's catalog from BACKING alone
 * (chunk objects + manifests, DESIGN invariant 5), for a lost or damaged
 * catalog or a new node.
 *
 * Offline only: a live daemon's catalog is never replaced (exit 8). Under the
 * cache lock it moves the old catalog (and its -wal/-shm) aside as
 * catalog.db.before-rebuild-<time> — never deletes it — creates a new one and
 * applies the newest tree manifest, then the newest version of every
 * generation manifest, each in one transaction (meta/manifest.h, M2): a bad
 * manifest is reported and skipped, the others still apply. Chunks come in as
 * on BACKING only (cached 0): the daemon fetches them on first read.
 *
 * Limits: a generation deleted while its manifest removal was still queued
 * comes back (delete it again); data that was only in the cache (dirty, never
 * uploaded) is not in any manifest and is not recovered. */
#define _GNU_SOURCE
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
#include "manifest.h"
#include "store.h"

struct admin_gen_manifest {
	uint64_t id;
	uint32_t version;
};

struct admin_manifests {
	struct admin_gen_manifest *gen;
	size_t n, cap;
	uint64_t tree_seq;
	bool have_tree;
};

static int admin_list_gen(void *arg, const char *name)
{
	struct admin_manifests *m = arg;
	uint64_t id;
	uint32_t version;
	if (manifest_gen_name_parse(name, &id, &version) != 0)
		return 0;
	for (size_t i = 0; i < m->n; i++) {
		if (m->gen[i].id == id) {
			if (version > m->gen[i].version)
				m->gen[i].version = version;
			return 0;
		}
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 32;
		struct admin_gen_manifest *p = realloc(m->gen, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		m->gen = p;
		m->cap = cap;
	}
	m->gen[m->n++] = (struct admin_gen_manifest){ id, version };
	return 0;
}

static int admin_list_tree(void *arg, const char *name)
{
	struct admin_manifests *m = arg;
	uint64_t seq;
	if (manifest_tree_name_parse(name, &seq) == 0 && (!m->have_tree || seq > m->tree_seq)) {
		m->tree_seq = seq;
		m->have_tree = true;
	}
	return 0;
}

static int admin_gen_cmp(const void *x, const void *y)
{
	const struct admin_gen_manifest *a = x, *b = y;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* Reads relpath from BACKING and applies it; err gets the reason. */
static int admin_apply(struct admin *a, struct cat *cat, const char *rel, char *err, size_t errsz)
{
	uint64_t size;
	int rc = backing_stat(a->bk, rel, &size);
	char *buf = rc == 0 ? malloc(size ? size : 1) : NULL;
	if (rc == 0 && !buf)
		rc = -ENOMEM;
	size_t len = 0;
	if (rc == 0)
		rc = backing_get(a->bk, rel, buf, size ? size : 1, &len);
	if (rc != 0)
		snprintf(err, errsz, "cannot read it: %s", strerror(-rc));
	else
		rc = manifest_apply(cat, buf, len, err, errsz);
	free(buf);
	return rc;
}

static int admin_move_aside(const char *cache, char *aside, size_t size)
{
	char path[PATH_MAX + 32], from[PATH_MAX + 48], to[PATH_MAX + 96], stamp[32];
	time_t t = time(NULL);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	snprintf(path, sizeof(path), "%s/catalog.db", cache);
	snprintf(aside, size, "%s.before-rebuild-%s", path, stamp);
	struct stat sb;
	if (lstat(path, &sb) != 0) {
		aside[0] = '\0';
		return 0;
	}
	static const char *const tails[] = { "", "-wal", "-shm" };
	for (int i = 0; i < 3; i++) {
		snprintf(from, sizeof(from), "%s%s", path, tails[i]);
		snprintf(to, sizeof(to), "%s%s", aside, tails[i]);
		if (rename(from, to) != 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}

int admin_cmd_rebuild(struct admin *a)
{
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
	int rc = admin_need_objects(a);
	if (rc != ADMIN_OK)
		return rc;
	struct admin_manifests m = { 0 };
	int err = backing_list(a->bk, "manifests/gen", admin_list_gen, &m);
	if (err == 0 || err == -ENOENT)
		err = backing_list(a->bk, "manifests/tree", admin_list_tree, &m);
	if (err != 0 && err != -ENOENT) {
		admin_err("rebuild: BACKING %s: cannot list its manifests: %s", a->backing, strerror(-err));
		free(m.gen);
		return ADMIN_PROBLEM;
	}
	if (m.n == 0 && !m.have_tree) {
		admin_err("rebuild: BACKING %s holds no manifests: nothing to rebuild from; nothing changed",
			  a->backing);
		free(m.gen);
		return ADMIN_PROBLEM;
	}
	qsort(m.gen, m.n, sizeof(*m.gen), admin_gen_cmp);
	char aside[PATH_MAX + 64], path[PATH_MAX + 16];
	if ((err = admin_move_aside(a->cache, aside, sizeof(aside))) != 0) {
		admin_err("rebuild: cannot move the old catalog aside: %s; nothing changed",
			  strerror(-err));
		free(m.gen);
		return ADMIN_PROBLEM;
	}
	snprintf(path, sizeof(path), "%s/catalog.db", a->cache);
	struct cat *cat = NULL;
	err = cat_open(path, getuid(), getgid(), NULL, NULL, &cat);
	if (err != 0) {
		admin_err("rebuild: cannot create %s: %s", path, strerror(-err));
		free(m.gen);
		return ADMIN_PROBLEM;
	}
	size_t total = m.n + (m.have_tree ? 1 : 0), done = 0, failed = 0, applied_gens = 0;
	char rel[MANIFEST_PATH_MAX], why[MANIFEST_ERR_MAX];
	if (m.have_tree) {
		manifest_tree_path(m.tree_seq, rel, sizeof(rel));
		if (admin_apply(a, cat, rel, why, sizeof(why)) != 0) {
			admin_err("rebuild: %s: %s (skipped)", rel, why);
			failed++;
		}
		admin_progress("rebuild", ++done, total);
	}
	for (size_t i = 0; i < m.n; i++) {
		manifest_gen_path(m.gen[i].id, m.gen[i].version, rel, sizeof(rel));
		if (admin_apply(a, cat, rel, why, sizeof(why)) != 0) {
			admin_err("rebuild: %s: %s (skipped)", rel, why);
			failed++;
		} else {
			applied_gens++;
		}
		admin_progress("rebuild", ++done, total);
	}
	admin_progress_end();
	err = cat_check(cat);
	cat_close(cat);
	free(m.gen);
	if (a->json) {
		printf("{\"generations\": %zu, \"tree\": %s, \"failed\": %zu, \"check\": \"%s\", "
		       "\"old_catalog\": ",
		       applied_gens, m.have_tree ? "true" : "false", failed, err ? "failed" : "ok");
		if (aside[0])
			admin_json_str(stdout, aside);
		else
			printf("null");
		printf("}\n");
	} else {
		printf("rebuilt %s from BACKING %s: %zu generations%s, %zu manifests skipped\n", path,
		       a->backing, applied_gens, m.have_tree ? " and the tree outside them" : "", failed);
		if (aside[0])
			printf("the old catalog is kept as %s\n", aside);
	}
	if (err != 0) {
		admin_err("rebuild: the rebuilt catalog fails its checks (see above)");
		return ADMIN_PROBLEM;
	}
	return failed ? ADMIN_PROBLEM : ADMIN_OK;
}
