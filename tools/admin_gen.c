/* admin_gen — naming generations on the command line, and the two commands
 * that look at them: list and show.
 *
 * GEN is one of
 *   SERIES/NAME       relative to the mount: the series directory (any depth)
 *                     and the generation's name, e.g. run1/step-200;
 *   /mnt/run1/step-200[/file]  an absolute path inside the mount: the
 *                     generation of what it names (a file inside counts for
 *                     the reading commands only: see invariant G1);
 *   id:N              the generation with catalog id N (list --json shows
 *                     it), also for aborted and deleted ones.
 * A part that is empty, "." or ".." is refused (ADMIN_BAD_NAME): GEN never
 * leaves the mount. Names are looked up in the catalog, so OPEN generations,
 * hidden from listings, are found too. On a node of a shared catalog the
 * daemon looks them up, and answers list (admin_shared.c).
 *
 * Invariants:
 *  G1. A command that removes or replaces a generation (rm; commit, which
 *      makes an open rewrite replace its previous version) acts only on a
 *      GEN that names the generation itself: its root (SERIES/NAME or the
 *      root's absolute path) or id:N. A path of a file or directory inside
 *      it is refused (ADMIN_BAD_NAME, one line naming the path and the
 *      generation), so "rm /mnt/run1/step-100/a" never deletes b beside it
 *      (admin_resolve_gen_root). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "upload.h"

int admin_check_relpath(const char *what, const char *rel)
{
	const char *p = rel;
	if (!*p) {
		admin_err("%s '%s': empty name", what, rel);
		return ADMIN_BAD_NAME;
	}
	for (;;) {
		size_t len = strcspn(p, "/");
		if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
			admin_err("%s '%s': a part is empty, '.' or '..' (names are relative to the mount "
				  "and may not leave it)",
				  what, rel);
			return ADMIN_BAD_NAME;
		}
		if (len > CAT_NAME_MAX) {
			admin_err("%s '%s': a part is longer than %d bytes", what, rel, CAT_NAME_MAX);
			return ADMIN_BAD_NAME;
		}
		if (!p[len])
			return ADMIN_OK;
		p += len + 1;
	}
}

/* Turns SPEC into a path relative to the mount root in rel (no leading or
 * trailing slash). */
static int admin_relpath(struct admin *a, const char *what, const char *spec, char *rel,
			 size_t size)
{
	if (spec[0] == '/') {
		size_t ml = strlen(a->mount);
		if (!a->mount[0]) {
			admin_err("%s '%s': an absolute path needs MOUNTPOINT, not --cache (give "
				  "SERIES/NAME)", what, spec);
			return ADMIN_BAD_NAME;
		}
		if (strncmp(spec, a->mount, ml) != 0 || (spec[ml] != '/' && spec[ml] != '\0')) {
			admin_err("%s '%s': not inside the mount %s", what, spec, a->mount);
			return ADMIN_BAD_NAME;
		}
		spec += ml;
		while (*spec == '/')
			spec++;
	}
	snprintf(rel, size, "%s", spec);
	size_t len = strlen(rel);
	while (len > 0 && rel[len - 1] == '/')
		rel[--len] = '\0';
	return admin_check_relpath(what, rel);
}

/* Walks rel from the root; *ino gets what it names. */
static int admin_walk(struct admin *a, const char *rel, uint64_t *ino)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", rel);
	uint64_t at = CAT_ROOT_INO;
	char *save = NULL;
	for (char *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		struct cat_inode in;
		int rc = cat_lookup(a->cat, at, t, &in);
		if (rc != 0)
			return rc;
		at = in.ino;
	}
	*ino = at;
	return 0;
}

/* rel (the root of g or a path inside it) names g itself: on a node of a
 * shared catalog by the series path the daemon gave, else by the inode the
 * walk reached. */
static bool admin_names_root(struct admin *a, const char *rel, uint64_t ino,
			     const struct cat_gen *g)
{
	if (!admin_shared(a))
		return ino == g->root;
	const char *series = a->sh_series_path[0] == '/' ? a->sh_series_path + 1 : a->sh_series_path;
	size_t sl = strlen(series);
	if (sl == 0)
		return strcmp(rel, g->name) == 0;
	return strncmp(rel, series, sl) == 0 && rel[sl] == '/' && strcmp(rel + sl + 1, g->name) == 0;
}

/* Invariant G1: ADMIN_OK if rel names g's root, else the refusal printed. */
static int admin_check_root(struct admin *a, const char *spec, const char *rel, uint64_t ino,
			    const struct cat_gen *g)
{
	if (admin_names_root(a, rel, ino, g))
		return ADMIN_OK;
	char label[PATH_MAX + CAT_NAME_MAX + 2];
	admin_gen_label(a, g, label, sizeof(label));
	admin_err("%s '%s': names a path inside the generation %s, not the generation: %s acts on"
		  " a whole generation, so it takes only its root (%s, or id:%" PRIu64 ")",
		  a->cmd, spec, label, a->cmd, label, g->id);
	return ADMIN_BAD_NAME;
}

static int admin_resolve(struct admin *a, const char *spec, bool root_only, struct cat_gen *out)
{
	int rc;
	if (strncmp(spec, "id:", 3) == 0) {
		char *end;
		errno = 0;
		unsigned long long id = strtoull(spec + 3, &end, 10);
		if (errno || end == spec + 3 || *end || id == 0) {
			admin_err("GEN '%s': id: needs a positive number", spec);
			return ADMIN_USAGE;
		}
		if (admin_shared(a))
			return admin_shared_resolve(a, spec, NULL, out);
		rc = cat_gen_get_brief(a->cat, id, out);
		if (rc == 0)
			return ADMIN_OK;
		admin_err("GEN '%s': no such generation%s", spec, rc == -ENOENT ? "" : strerror(-rc));
		return admin_exit_for(rc);
	}
	char rel[PATH_MAX];
	if ((rc = admin_relpath(a, "GEN", spec, rel, sizeof(rel))) != ADMIN_OK)
		return rc;
	uint64_t ino = 0, gen_id = 0;
	if (admin_shared(a)) {
		rc = admin_shared_resolve(a, spec, rel, out);
		return rc == ADMIN_OK && root_only ? admin_check_root(a, spec, rel, ino, out) : rc;
	}
	rc = admin_walk(a, rel, &ino);
	if (rc == 0)
		rc = cat_gen_of(a->cat, ino, &gen_id);
	if (rc == 0 && gen_id == 0)
		rc = -ENOENT;
	if (rc == 0)
		rc = cat_gen_get_brief(a->cat, gen_id, out);
	if (rc == -ENOENT || rc == -ENOTDIR) {
		admin_err("GEN '%s': no such generation in %s (see ckptfs-admin list)", spec,
			  a->mount[0] ? a->mount : a->cache);
		return ADMIN_NO_GEN;
	}
	if (rc != 0) {
		admin_err("GEN '%s': %s", spec, strerror(-rc));
		return admin_exit_for(rc);
	}
	return root_only ? admin_check_root(a, spec, rel, ino, out) : ADMIN_OK;
}

int admin_resolve_gen(struct admin *a, const char *spec, struct cat_gen *out)
{
	return admin_resolve(a, spec, false, out);
}

int admin_resolve_gen_root(struct admin *a, const char *spec, struct cat_gen *out)
{
	return admin_resolve(a, spec, true, out);
}

void admin_gen_label(struct admin *a, const struct cat_gen *g, char *buf, size_t size)
{
	char series[PATH_MAX];
	if (a->shared && a->sh_series == g->series)
		snprintf(series, sizeof(series), "%s", a->sh_series_path);
	else if (aq_path(a->aq, g->series, series, sizeof(series)) != 0)
		snprintf(series, sizeof(series), "/?");
	snprintf(buf, size, "%s%s%s", series + 1, series[1] ? "/" : "", g->name);
}

/* ---- list ---- */

/* "durable" for a COMMITTED generation whose manifest and chunks are all on
 * BACKING, else the catalog state. */
static const char *admin_gen_state(struct admin *a, const struct cat_gen *g, bool *durable)
{
	*durable = false;
	if (g->state == GEN_COMMITTED && cat_gen_durable(a->cat, g->id, durable) == 0 && *durable)
		return "durable";
	return cat_gen_state_name(g->state);
}

static void admin_json_gen(struct admin *a, const struct cat_gen *g, const struct aq_gen_usage *u)
{
	bool durable;
	const char *state = admin_gen_state(a, g, &durable);
	char series[PATH_MAX];
	if (aq_path(a->aq, g->series, series, sizeof(series)) != 0)
		snprintf(series, sizeof(series), "/?");
	admin_json_gen_obj(series + 1, g, state, durable, u);
}

int admin_cmd_list(struct admin *a)
{
	uint64_t series = 0;
	if (a->npos > 1) {
		admin_err("list: expected at most one SERIES");
		return ADMIN_USAGE;
	}
	if (a->npos == 1) {
		char rel[PATH_MAX];
		int rc = admin_relpath(a, "SERIES", a->pos[0], rel, sizeof(rel));
		if (rc != ADMIN_OK)
			return rc;
		if (admin_shared(a))
			return admin_shared_list(a, rel);
		if ((rc = admin_walk(a, rel, &series)) != 0) {
			admin_err("SERIES '%s': no such directory in %s", a->pos[0],
				  a->mount[0] ? a->mount : a->cache);
			return rc == -ENOENT || rc == -ENOTDIR ? ADMIN_NO_GEN : admin_exit_for(rc);
		}
	}
	if (admin_shared(a))
		return admin_shared_list(a, NULL);
	struct cat_gen_vec l = { 0 };
	int rc = cat_gen_list_brief(a->cat, series, a->all, cat_gen_vec_add, &l);
	if (rc != 0) {
		cat_gen_vec_free(&l);
		admin_err("list: cannot read the catalog: %s", strerror(-rc));
		return admin_exit_for(rc);
	}
	if (a->json)
		printf("[");
	else
		admin_list_header();
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		const struct cat_gen *g = &l.v[i];
		struct aq_gen_usage u;
		if (g->state == GEN_HELD && !a->all)
			continue; /* held: not shown, like in directory listings (list --all) */
		rc = aq_gen_usage(a->aq, g->id, &u);
		if (rc != 0)
			break;
		if (a->json) {
			printf("%s\n  ", i ? "," : "");
			admin_json_gen(a, g, &u);
			continue;
		}
		char series_path[PATH_MAX];
		bool durable;
		if (aq_path(a->aq, g->series, series_path, sizeof(series_path)) != 0)
			snprintf(series_path, sizeof(series_path), "/?");
		admin_list_row(series_path, g, admin_gen_state(a, g, &durable), &u);
	}
	if (a->json)
		printf("%s]\n", l.n ? "\n" : "");
	cat_gen_vec_free(&l);
	if (rc != 0) {
		admin_err("list: cannot read the catalog: %s", strerror(-rc));
		return admin_exit_for(rc);
	}
	return ADMIN_OK;
}

/* ---- show ---- */

/* show's files and shares from the local catalog, named as aq_path and
 * admin_gen_label name them. */
static int admin_show_local(struct admin *a, const struct cat_gen *g, struct admin_show *s)
{
	struct aq_file *files = NULL;
	struct aq_share *shares = NULL;
	size_t nfiles = 0, nshares = 0;
	int err = aq_gen_files(a->aq, g->id, &files, &nfiles);
	if (err == 0)
		err = aq_gen_shares(a->aq, g->id, &shares, &nshares);
	if (err == 0 && nfiles && !(s->files = calloc(nfiles, sizeof(*s->files))))
		err = -ENOMEM;
	if (err == 0 && nshares && !(s->shares = calloc(nshares, sizeof(*s->shares))))
		err = -ENOMEM;
	for (size_t i = 0; err == 0 && i < nfiles; i++) {
		char path[PATH_MAX];
		if (aq_path(a->aq, files[i].ino, path, sizeof(path)) != 0)
			snprintf(path, sizeof(path), "?");
		s->files[i] = (struct admin_show_file){ files[i].size, files[i].extents,
							files[i].chunks, strdup(path) };
		s->nfiles++;
		if (!s->files[i].path)
			err = -ENOMEM;
	}
	for (size_t i = 0; err == 0 && i < nshares; i++) {
		struct cat_gen o;
		char label[PATH_MAX + CAT_NAME_MAX + 2];
		s->shares[i] = (struct admin_show_share){ shares[i].gen_id, shares[i].chunks,
							  shares[i].bytes, NULL };
		s->nshares++;
		if (shares[i].gen_id && cat_gen_get_brief(a->cat, shares[i].gen_id, &o) == 0) {
			admin_gen_label(a, &o, label, sizeof(label));
			if (!(s->shares[i].label = strdup(label)))
				err = -ENOMEM;
		}
	}
	free(files);
	free(shares);
	return err;
}

int admin_cmd_show(struct admin *a)
{
	if (a->npos != 1) {
		admin_err("show: expected one GEN (see ckptfs-admin show --help)");
		return ADMIN_USAGE;
	}
	struct cat_gen g;
	int rc = admin_resolve_gen(a, a->pos[0], &g);
	if (rc != ADMIN_OK)
		return rc;
	if (admin_shared(a))
		return admin_shared_show(a, &g);
	struct aq_gen_usage u;
	char label[PATH_MAX + CAT_NAME_MAX + 2], series[PATH_MAX];
	struct admin_show s = { .g = &g, .u = &u, .label = label };
	s.state = admin_gen_state(a, &g, &s.durable);
	admin_gen_label(a, &g, label, sizeof(label));
	if (aq_path(a->aq, g.series, series, sizeof(series)) != 0)
		snprintf(series, sizeof(series), "/?");
	s.series = series + 1;
	int err = aq_gen_usage(a->aq, g.id, &u);
	if (err == 0)
		err = admin_show_local(a, &g, &s);
	if (err != 0) {
		admin_err("show: cannot read the catalog: %s", strerror(-err));
		admin_show_free(&s);
		return admin_exit_for(err);
	}
	admin_show_print(a, &s);
	admin_show_free(&s);
	return ADMIN_OK;
}
