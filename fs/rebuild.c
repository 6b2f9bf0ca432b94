/* rebuild — a catalog from the manifests on BACKING (rebuild.h is the
 * contract; meta/manifest.h reads and applies each manifest).
 *
 *   list manifests/tree ─▶ newest seq that verifies ─▶ apply
 *   list manifests/gen  ─▶ group by id ─▶ per id (ascending): highest version
 *                          that verifies ─▶ [check its chunks] ─▶ apply
 *
 * A manifest is read whole (backing_stat for its size, then backing_get): a
 * text manifest of a generation of 100 000 chunks is ~15 MB, and the parse
 * needs it all anyway for its checksum. One larger than MANIFEST_SIZE_MAX is
 * judged by its size alone and never read (invariant 5).
 *
 * Invariants:
 *  1. Only a manifest that verifies (checksum, structure) is applied, and
 *     each apply is one transaction (manifest.h M2): a corrupt manifest
 *     changes nothing.
 *  2. Per generation id at most one version is applied: the highest that
 *     verifies. A lower version is tried only when every higher one failed
 *     to verify or vanished.
 *  3. A failure of BACKING itself, or a manifest format newer than ours,
 *     stops the rebuild (never a silent fall-back to older data).
 *  4. Chunk checks (REBUILD_CHECK_CHUNKS) look up each distinct chunk once;
 *     a missing one is reported with every file and generation naming it.
 *  5. No manifest is read into memory before its size is known to be at most
 *     MANIFEST_SIZE_MAX (DESIGN invariant 7).
 *  6. The rebuilt catalog never hands out a generation id that names a
 *     manifest on BACKING: ids of manifests it rejected or could not read
 *     are reserved (cat_gen_id_reserve), so a new generation's manifest
 *     never overwrites the only copy of a save the rebuild left out, and a
 *     later rebuild never takes one save for the other (the shared
 *     engine's too: rebuild --meta, pggen_rebuild_reserve_ids).
 *  7. A complete save is never lost to the catalog for a conflict of names:
 *     a generation manifest the catalog refuses (-EEXIST: its series/name
 *     taken by a lower id's save or by the tree, e.g. meta/upload.h U8's
 *     case) is applied HELD (manifest.h M4: "<name>.rebuild-<id>", hidden
 *     though no generation pattern matches it: fs/gen.c gen_hidden,
 *     reason "rebuild: <manifest> conflicts with the catalog at <path>
 *     (...)", rule "rebuild") from its version's manifest, which stays on
 *     BACKING as that generation's. Its chunks are counted, so neither the
 *     reclaim (a shared chunk whose other save is deleted) nor gc removes
 *     them; only an admin decision (ckptfs-admin commit / rm, or
 *     keep-latest-k's rule for held saves) ends it. Both engines: the
 *     shared one's rebuild --meta holds it alike (pggen_apply_manifest_held,
 *     the chunks counted in ns_chunks, so the reclaim duty keeps them).
 *     Where M4 cannot apply (its id or the renamed path taken too) it is
 *     left out as before: counted rejected and lost, its id kept
 *     (invariant 6), its chunks kept by gc only (admin_query.h 3). A lower
 *     version of it is not tried: the newest one is the save. */
#define _GNU_SOURCE
#include "rebuild.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "rbpack.h"
#include "store.h"

#define RB_TREE_DIR "manifests/tree"
#define RB_GEN_DIR "manifests/gen"

/* ---- listing ---- */

struct rb_name {
	uint64_t id;      /* generation id; 0 for tree manifests */
	uint64_t version; /* generation version, or tree seq */
};

struct rb_list {
	struct rb_name *v;
	size_t n, cap;
	bool gen;
	uint64_t ignored;
	int rc;
};

static int rb_list_fn(void *arg, const char *name)
{
	struct rb_list *l = arg;
	struct rb_name e = { 0 };
	uint32_t version;
	int rc = l->gen ? manifest_gen_name_parse(name, &e.id, &version)
			: manifest_tree_name_parse(name, &e.version);
	if (rc != 0) {
		l->ignored++;
		log_debug("rebuild: ignoring %s/%s: not a manifest name", l->gen ? RB_GEN_DIR : RB_TREE_DIR,
			  name);
		return 0;
	}
	if (l->gen)
		e.version = version;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct rb_name *v = realloc(l->v, cap * sizeof(*v));
		if (v == NULL) {
			l->rc = -ENOMEM;
			return 1;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = e;
	return 0;
}

/* Ids ascending, versions (or seqs) descending. */
static int rb_name_cmp(const void *a, const void *b)
{
	const struct rb_name *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->version != y->version)
		return x->version > y->version ? -1 : 1;
	return 0;
}

static int rb_list(struct backing *b, const char *dir, bool gen, struct rb_list *l)
{
	memset(l, 0, sizeof(*l));
	l->gen = gen;
	int rc = backing_list(b, dir, rb_list_fn, l);
	if (rc == 1)
		rc = l->rc;
	if (rc == -ENOENT)
		rc = 0; /* nothing there yet */
	if (rc != 0) {
		log_error("rebuild: BACKING %s: cannot list %s: %s", backing_spec(b), dir,
			  strerror(-rc));
		return rc;
	}
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), rb_name_cmp);
	return 0;
}

/* ---- reading one manifest ---- */

/* Reads and parses path. -ENOENT if it vanished, -EBADMSG for a manifest
 * that does not verify (logged), -EPROTONOSUPPORT for a newer format,
 * another error for BACKING failing. */
static int rb_read(struct backing *b, const char *path, struct manifest **out)
{
	char err[MANIFEST_ERR_MAX];
	char *buf = NULL;
	size_t len = 0;
	int rc = -EFBIG;
	for (int attempt = 0; attempt < 3 && rc == -EFBIG; attempt++) {
		uint64_t size;
		rc = backing_stat(b, path, &size);
		if (rc != 0)
			break;
		if (size > MANIFEST_SIZE_MAX) { /* judged by its size, never read (invariant 5) */
			log_warn("rebuild: BACKING %s: %s is corrupt (%" PRIu64 " bytes, more than a"
				 " manifest may have: %zu); skipping it", backing_spec(b), path, size,
				 MANIFEST_SIZE_MAX);
			rc = -EBADMSG;
			break;
		}
		free(buf);
		buf = malloc(size + 1);
		if (buf == NULL) {
			rc = -ENOMEM;
			break;
		}
		rc = backing_get(b, path, buf, size + 1, &len); /* +1: a grown file shows */
		if (rc == 0 && len > size)
			rc = -EFBIG;
	}
	if (rc == -EFBIG) {
		log_error("rebuild: BACKING %s: %s keeps changing size; a manifest is immutable",
			  backing_spec(b), path);
		rc = -EBADMSG;
	}
	if (rc == 0) {
		rc = manifest_parse(buf, len, out, err, sizeof(err));
		if (rc == -EPROTONOSUPPORT)
			log_error("rebuild: BACKING %s: %s: %s; upgrade ckptfs", backing_spec(b), path,
				  err);
		else if (rc == -ENOMEM)
			log_error("rebuild: %s: out of memory", path);
		else if (rc != 0)
			log_warn("rebuild: BACKING %s: %s is corrupt (%s); skipping it",
				 backing_spec(b), path, err);
		if (rc != 0 && rc != -EPROTONOSUPPORT && rc != -ENOMEM)
			rc = -EBADMSG;
	}
	free(buf);
	return rc;
}

/* ---- chunk checks ---- */

struct rb_seen {
	uint8_t (*hash)[HASH_LEN];
	uint8_t *state; /* 0 empty, 1 present, 2 missing */
	size_t cap, n;
};

/* The slot of hash (found or empty). */
static size_t rb_seen_slot(const struct rb_seen *s, const uint8_t hash[HASH_LEN])
{
	uint64_t h;
	memcpy(&h, hash, sizeof(h)); /* a SHA-256 is uniform */
	size_t i = (size_t)(h & (s->cap - 1));
	while (s->state[i] != 0 && memcmp(s->hash[i], hash, HASH_LEN) != 0)
		i = (i + 1) & (s->cap - 1);
	return i;
}

static int rb_seen_grow(struct rb_seen *s)
{
	if ((s->n + 1) * 2 <= s->cap)
		return 0;
	struct rb_seen t = { .cap = s->cap ? 2 * s->cap : 1024 };
	t.hash = malloc(t.cap * sizeof(*t.hash));
	t.state = calloc(t.cap, 1);
	if (t.hash == NULL || t.state == NULL) {
		free(t.hash);
		free(t.state);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++)
		if (s->state[i] != 0) {
			size_t j = rb_seen_slot(&t, s->hash[i]);
			memcpy(t.hash[j], s->hash[i], HASH_LEN);
			t.state[j] = s->state[i];
		}
	t.n = s->n;
	free(s->hash);
	free(s->state);
	*s = t;
	return 0;
}

/* A member of a pack of the size the manifest says (rbpack.h). */
static bool rb_chunk_packed(const struct rbpack_map *packs, const struct manifest_chunk *c)
{
	size_t n = 0;
	const struct rbpack_member *m = rbpack_find(packs, c->hash, &n);
	for (size_t i = 0; i < n; i++)
		if (m[i].len == STORE_HEADER_LEN + c->stored_len ||
		    m[i].len == STORE_HEADER_LEN_V1 + c->stored_len)
			return true;
	return false;
}

/* Whether the chunk object is on BACKING with the size the manifest says:
 * loose, or a member of a pack. */
static int rb_chunk_present(struct backing *b, const struct rbpack_map *packs,
			    const struct manifest_chunk *c, bool *present)
{
	char hex[HASH_HEX_LEN + 1], path[128];
	uint64_t size;
	hash_to_hex(c->hash, hex);
	snprintf(path, sizeof(path), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
	int rc = backing_stat(b, path, &size);
	if (rc == -ENOENT) {
		*present = rb_chunk_packed(packs, c);
		return 0;
	}
	/* either header: objects of format 1 and 2 live side by side */
	if (rc == 0 && size != STORE_HEADER_LEN + c->stored_len &&
	    size != STORE_HEADER_LEN_V1 + c->stored_len) {
		log_warn("rebuild: BACKING %s: %s is %" PRIu64 " bytes, its manifest says %" PRIu64
			 " of payload",
			 backing_spec(b), path, size, c->stored_len);
		*present = false;
		return 0;
	}
	*present = rc == 0;
	return rc;
}

static void rb_manifest_name(const struct manifest *m, char *buf, size_t size)
{
	if (m->kind == MANIFEST_GEN)
		snprintf(buf, size, "generation %" PRIu64 " version %" PRIu32 " (%s%s%s)", m->gen.id,
			 m->gen.version, m->gen.series, m->gen.series[0] ? "/" : "", m->gen.name);
	else
		snprintf(buf, size, "the tree outside generations");
}

static int rb_check_chunks(struct backing *b, const struct rbpack_map *packs,
			   const struct manifest *m, struct rb_seen *seen, struct rebuild_report *rep)
{
	bool *missing = calloc(m->n_chunks ? m->n_chunks : 1, sizeof(*missing));
	bool any = false;
	int rc = missing ? 0 : -ENOMEM;
	for (size_t i = 0; i < m->n_chunks && rc == 0; i++) {
		rc = rb_seen_grow(seen);
		if (rc != 0)
			break;
		size_t slot = rb_seen_slot(seen, m->chunks[i].hash);
		if (seen->state[slot] == 0) {
			bool present = false;
			rc = rb_chunk_present(b, packs, &m->chunks[i], &present);
			if (rc != 0)
				break;
			memcpy(seen->hash[slot], m->chunks[i].hash, HASH_LEN);
			seen->state[slot] = present ? 1 : 2;
			seen->n++;
			rep->chunks_checked++;
			rep->chunks_missing += !present;
		}
		missing[i] = seen->state[slot] == 2;
		any |= missing[i];
	}
	if (rc == 0 && any) {
		char what[CAT_NAME_MAX * 2 + 128], path[1024], hex[HASH_HEX_LEN + 1];
		uint64_t last_damaged = UINT64_MAX;
		rb_manifest_name(m, what, sizeof(what));
		for (size_t i = 0; i < m->n_extents; i++) {
			const struct manifest_extent *x = &m->extents[i];
			if (!missing[x->chunk])
				continue;
			manifest_inode_path(m, x->inode, path, sizeof(path));
			hash_to_hex(m->chunks[x->chunk].hash, hex);
			log_error("rebuild: BACKING %s: %s: file \"%s\" bytes [%" PRIu64 ", +%" PRIu64
				  ") are chunk %s, which is missing or damaged on BACKING",
				  backing_spec(b), what, path[0] ? path : m->gen.name, x->off, x->len,
				  hex);
			if (x->inode != last_damaged)
				rep->files_damaged++;
			last_damaged = x->inode;
		}
	}
	free(missing);
	return rc;
}

/* ---- the rebuild ---- */

struct rb_state {
	struct backing *b;
	struct cat *cat;
	unsigned flags;
	struct rebuild_report *rep;
	struct rb_seen seen;
	struct rbpack_map packs; /* the pack members on BACKING (rbpack.h) */
};

/* Invariant 7: m, which conflicts with the catalog (conflict: why), applied
 * HELD. 1 if it was, -EEXIST if it stays out (logged), another error to
 * stop. */
static int rb_hold(struct rb_state *s, const char *path, const struct manifest *m,
		   const char *conflict)
{
	char reason[GEN_HELD_MAX], err[MANIFEST_ERR_MAX];
	char where[1024]; /* a path from the mount's root, cut if longer */
	snprintf(where, sizeof(where), "%s%s%s", m->gen.series, m->gen.series[0] ? "/" : "",
		 m->gen.name);
	/* cut at GEN_HELD_MAX - 1 bytes (generation.h G5) */
	snprintf(reason, sizeof(reason), "rebuild: %s conflicts with the catalog at %s (%s)", path,
		 where, conflict);
	int rc = manifest_apply_held(s->cat, m, reason, where, sizeof(where), err, sizeof(err));
	if (rc == 0) {
		s->rep->generations_held++;
		log_warn("rebuild: BACKING %s: %s conflicts with the catalog (%s); applied HELD as"
			 " %s (ckptfs-admin list --all; commit or rm it)", backing_spec(s->b), path,
			 conflict, where);
		return 1;
	}
	if (rc == -EEXIST || rc == -EOPNOTSUPP) {
		/* invariant 6 still keeps its id; admin_query.h 3 its chunks from gc */
		log_warn("rebuild: BACKING %s: %s conflicts with the catalog (%s) and cannot be"
			 " applied held (%s); skipping it: it stays on BACKING, its chunks counted by"
			 " no catalog row", backing_spec(s->b), path, conflict, err);
		return -EEXIST;
	}
	log_error("rebuild: BACKING %s: cannot apply %s held: %s", backing_spec(s->b), path, err);
	return rc;
}

/* Reads, checks and applies path. Returns 0 if applied, 1 if applied HELD
 * (invariant 7), -EBADMSG or -ENOENT when the caller may fall back to an
 * older one, -EEXIST for a conflict left out, another error to stop. */
static int rb_apply(struct rb_state *s, const char *path)
{
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX];
	int rc = rb_read(s->b, path, &m);
	if (rc == -EBADMSG)
		s->rep->manifests_corrupt++;
	if (rc == 0 && (s->flags & REBUILD_CHECK_CHUNKS))
		rc = rb_check_chunks(s->b, &s->packs, m, &s->seen, s->rep);
	if (rc == 0) {
		rc = manifest_apply_parsed(s->cat, m, err, sizeof(err));
		if (rc == -EEXIST) {
			s->rep->manifests_rejected++;
			if (m->kind == MANIFEST_GEN)
				rc = rb_hold(s, path, m, err);
			else
				log_warn("rebuild: BACKING %s: %s conflicts with the catalog (%s);"
					 " skipping it", backing_spec(s->b), path, err);
		} else if (rc != 0) {
			log_error("rebuild: BACKING %s: cannot apply %s: %s", backing_spec(s->b), path,
				  err);
		}
	}
	if (rc == 0 || rc == 1) {
		s->rep->files += m->files;
		s->rep->bytes += m->bytes;
	}
	manifest_free(m);
	return rc;
}

static int rb_tree(struct rb_state *s, const struct rb_list *l)
{
	char path[MANIFEST_PATH_MAX];
	for (size_t i = 0; i < l->n; i++) {
		manifest_tree_path(l->v[i].version, path, sizeof(path));
		int rc = rb_apply(s, path);
		if (rc == 0) {
			s->rep->tree_applied = true;
			s->rep->tree_seq = l->v[i].version;
			s->rep->manifests_older += l->n - i - 1;
			return 0;
		}
		if (rc != -EBADMSG && rc != -ENOENT)
			return rc == -EEXIST ? 0 : rc;
	}
	if (l->n > 0)
		log_error("rebuild: BACKING %s: no tree manifest of %zu could be read: the"
			  " namespace outside generations is lost (generations still come back)",
			  backing_spec(s->b), l->n);
	return 0;
}

/* Versions l->v[first, end) of one id, highest first. */
static int rb_generation(struct rb_state *s, const struct rb_list *l, size_t first, size_t end)
{
	char path[MANIFEST_PATH_MAX];
	for (size_t i = first; i < end; i++) {
		manifest_gen_path(l->v[i].id, (uint32_t)l->v[i].version, path, sizeof(path));
		int rc = rb_apply(s, path);
		if (rc == 0 || rc == 1) {
			s->rep->generations += rc == 0;
			s->rep->manifests_older += end - i - 1;
			if (i > first)
				log_warn("rebuild: BACKING %s: generation %" PRIu64 " came back at"
					 " version %" PRIu64 ", not %" PRIu64 " (newer manifests"
					 " unreadable)", backing_spec(s->b), l->v[i].id,
					 l->v[i].version, l->v[first].version);
			return 0;
		}
		if (rc == -EEXIST) {
			s->rep->generations_lost++;
			return 0;
		}
		if (rc != -EBADMSG && rc != -ENOENT)
			return rc;
	}
	s->rep->generations_lost++;
	log_error("rebuild: BACKING %s: generation %" PRIu64 ": none of its %zu manifests could"
		  " be read; it is lost", backing_spec(s->b), l->v[first].id, end - first);
	return 0;
}

/* Invariant 6: every id BACKING has a manifest of, applied or not. */
static int rb_reserve_ids(struct rb_state *s, const struct rb_list *gens)
{
	uint64_t max = 0;
	for (size_t i = 0; i < gens->n; i++)
		if (gens->v[i].id > max)
			max = gens->v[i].id;
	int rc = max <= INT64_MAX ? cat_gen_id_reserve(s->cat, max) : -ERANGE;
	if (rc != 0)
		log_error("rebuild: BACKING %s: cannot reserve generation ids up to %" PRIu64
			  " (a new generation could overwrite a manifest left out): %s",
			  backing_spec(s->b), max, strerror(-rc));
	return rc;
}

int rebuild_catalog(struct backing *b, struct cat *cat, unsigned flags,
		    rebuild_progress_fn progress, void *arg, struct rebuild_report *rep)
{
	struct rb_state s = { .b = b, .cat = cat, .flags = flags, .rep = rep };
	struct rb_list tree, gens;
	memset(rep, 0, sizeof(*rep));
	int rc = rb_list(b, RB_TREE_DIR, false, &tree);
	if (rc == 0)
		rc = rb_list(b, RB_GEN_DIR, true, &gens);
	else
		memset(&gens, 0, sizeof(gens));
	if (rc == 0)
		rc = rbpack_load(b, &s.packs);
	if (rc == 0 && s.packs.n > 0 && cat_is_shared(cat)) {
		log_error("rebuild: BACKING %s holds packs (written with -o packs=on), which a shared"
			  " catalog cannot read yet: rebuild it into a local catalog (without"
			  " --meta)", backing_spec(b));
		rc = -EPROTONOSUPPORT;
	}

	uint64_t ids = 0, done = 0;
	for (size_t i = 0; i < gens.n; i++)
		ids += i == 0 || gens.v[i].id != gens.v[i - 1].id;
	uint64_t total = ids + (tree.n > 0);
	rep->manifests_seen = tree.n + gens.n;
	rep->names_ignored = tree.ignored + gens.ignored;
	if (rc == 0) {
		log_info("rebuild: BACKING %s: %zu tree manifests, %zu generation manifests of %"
			 PRIu64 " generations", backing_spec(b), tree.n, gens.n, ids);
		if (progress)
			progress(arg, 0, total);
	}
	if (rc == 0 && tree.n > 0) {
		rc = rb_tree(&s, &tree);
		if (progress)
			progress(arg, ++done, total);
	}
	for (size_t i = 0; rc == 0 && i < gens.n;) {
		size_t end = i + 1;
		while (end < gens.n && gens.v[end].id == gens.v[i].id)
			end++;
		rc = rb_generation(&s, &gens, i, end);
		if (progress)
			progress(arg, ++done, total);
		i = end;
	}
	uint64_t placed = 0;
	if (rc == 0) /* the chunks whose only copy on BACKING is a pack member */
		rc = rbpack_place(b, cat, &s.packs, &placed);
	if (rc == 0 && gens.n > 0)
		rc = rb_reserve_ids(&s, &gens);
	if (rc == 0)
		log_info("rebuild: BACKING %s: %s tree, %" PRIu64 " generations (%" PRIu64 " files, %"
			 PRIu64 " bytes); %" PRIu64 " older manifests ignored, %" PRIu64 " corrupt,"
			 " %" PRIu64 " in conflict (%" PRIu64 " of them applied held), %" PRIu64
			 " generations lost", backing_spec(b), rep->tree_applied ? "the" : "no",
			 rep->generations, rep->files, rep->bytes, rep->manifests_older,
			 rep->manifests_corrupt, rep->manifests_rejected, rep->generations_held,
			 rep->generations_lost);
	if (rc == 0 && (flags & REBUILD_CHECK_CHUNKS))
		log_info("rebuild: BACKING %s: %" PRIu64 " chunks checked, %" PRIu64 " missing or"
			 " damaged, %" PRIu64 " files affected", backing_spec(b), rep->chunks_checked,
			 rep->chunks_missing, rep->files_damaged);
	if (rc != 0)
		log_error("rebuild: BACKING %s: stopped: %s (the catalog holds what was applied"
			  " before; discard it and rebuild again)", backing_spec(b), strerror(-rc));
	free(tree.v);
	free(gens.v);
	free(s.seen.hash);
	free(s.seen.state);
	rbpack_free(&s.packs);
	return rc;
}

int rebuild_backing_newest_gen(struct backing *b, uint64_t *id, uint32_t *version)
{
	struct rb_list gens;
	*id = 0;
	*version = 0;
	int rc = rb_list(b, RB_GEN_DIR, true, &gens);
	for (size_t i = 0; rc == 0 && i < gens.n; i++)
		if (gens.v[i].id > *id || (gens.v[i].id == *id && gens.v[i].version > *version)) {
			*id = gens.v[i].id;
			*version = (uint32_t)gens.v[i].version;
		}
	free(gens.v);
	return rc;
}

/* ---- fresh node or empty BACKING ---- */

static int rb_has_fn(void *arg, const char *name)
{
	const bool *gen = arg;
	uint64_t id, seq;
	uint32_t version;
	return (*gen ? manifest_gen_name_parse(name, &id, &version)
		     : manifest_tree_name_parse(name, &seq)) == 0;
}

int rebuild_backing_has_data(struct backing *b, bool *has)
{
	static const bool kinds[2] = { false, true };
	*has = false;
	for (int i = 0; i < 2 && !*has; i++) {
		int rc = backing_list(b, kinds[i] ? RB_GEN_DIR : RB_TREE_DIR, rb_has_fn,
				      (void *)&kinds[i]);
		if (rc == 1)
			*has = true;
		else if (rc != 0 && rc != -ENOENT)
			return rc;
	}
	return 0;
}
