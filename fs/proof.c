/* proof — is an open generation complete by its content; see proof.h. */
#define _GNU_SOURCE
#include "proof.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "catalog.h"
#include "complete.h"
#include "hash.h"
#include "upload.h"

struct proof_file {
	char *path; /* relative to the generation's root */
	uint64_t ino, size;
	int64_t mtime_ns, ctime_ns; /* a rewrite's files differ from the old ones here */
	bool recognised;            /* of a self-delimiting format (proof_check_files) */
};

struct proof_files {
	struct proof_file *v;
	size_t n, cap;
	bool overflow; /* PROOF_MAX_FILES or PROOF_MAX_DEPTH reached */
};

/* One directory's entries, read before recursing (a readdir callback must
 * not call back into the catalog). */
struct proof_entry {
	char name[CAT_NAME_MAX + 1];
	struct cat_inode attr;
};

struct proof_dir {
	struct proof_entry *v;
	size_t n, cap;
	int rc;
};

static void proof_files_free(struct proof_files *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->v[i].path);
	free(f->v);
	memset(f, 0, sizeof(*f));
}

static int proof_files_add(struct proof_files *f, const char *path, const struct cat_inode *in)
{
	if (f->n == PROOF_MAX_FILES) {
		f->overflow = true;
		return 0;
	}
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 16;
		struct proof_file *v = realloc(f->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	f->v[f->n++] = (struct proof_file){ .path = copy, .ino = in->ino, .size = in->size,
					    .mtime_ns = in->mtime_ns, .ctime_ns = in->ctime_ns };
	return 0;
}

static int proof_dir_add(void *arg, const char *name, const struct cat_inode *attr,
			 uint64_t next_cookie)
{
	struct proof_dir *d = arg;
	(void)next_cookie;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return 0;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct proof_entry *v = realloc(d->v, cap * sizeof(*v));
		if (!v) {
			d->rc = -ENOMEM;
			return 1;
		}
		d->v = v;
		d->cap = cap;
	}
	snprintf(d->v[d->n].name, sizeof(d->v[d->n].name), "%s", name);
	d->v[d->n++].attr = *attr;
	return 0;
}

/* Adds the regular files under dir (paths prefixed by `prefix`). */
static int proof_walk(struct cat *cat, uint64_t dir, const char *prefix, int depth,
		      struct proof_files *out)
{
	struct proof_dir d = { 0 };
	if (depth > PROOF_MAX_DEPTH) {
		out->overflow = true;
		return 0;
	}
	/* from cookie 2: past "." and "..", which a backup tree's root (no
	 * entry, generation.h G3) has no parent for */
	int rc = cat_readdir(cat, dir, 2, proof_dir_add, &d);
	if (rc == 0)
		rc = d.rc;
	for (size_t i = 0; i < d.n && rc == 0 && !out->overflow; i++) {
		char path[4096];
		int len = snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "/" : "",
				   d.v[i].name);
		if (len < 0 || (size_t)len >= sizeof(path)) {
			out->overflow = true;
			break;
		}
		if (S_ISREG(d.v[i].attr.mode))
			rc = proof_files_add(out, path, &d.v[i].attr);
		else if (S_ISDIR(d.v[i].attr.mode))
			rc = proof_walk(cat, d.v[i].attr.ino, path, depth + 1, out);
	}
	free(d.v);
	return rc;
}

/* The regular files of the tree at root (itself, under `name`, when it is a
 * file). */
static int proof_list(struct cat *cat, uint64_t root, const char *name, struct proof_files *out)
{
	struct cat_inode in;
	int rc = cat_getattr(cat, root, &in);
	if (rc != 0)
		return rc;
	if (S_ISREG(in.mode))
		return proof_files_add(out, name, &in);
	return S_ISDIR(in.mode) ? proof_walk(cat, root, "", 0, out) : 0;
}

struct proof_reader {
	proof_read_fn rd;
	void *arg;
	uint64_t ino;
};

static int proof_read_file(void *arg, uint64_t off, size_t len, void *buf)
{
	struct proof_reader *r = arg;
	return r->rd(r->arg, r->ino, off, len, buf);
}

/* complete_check of file f, its base name the format hint. */
static int proof_complete(const struct proof_file *f, proof_read_fn rd, void *arg,
			  struct complete_result *cr)
{
	struct proof_reader r = { rd, arg, f->ino };
	const char *base = strrchr(f->path, '/') ? strrchr(f->path, '/') + 1 : f->path;
	return complete_check(base, f->size, proof_read_file, &r, cr);
}

static int proof_path_cmp(const void *a, const void *b)
{
	return strcmp(((const struct proof_file *)a)->path, ((const struct proof_file *)b)->path);
}

static void proof_sort(struct proof_files *f)
{
	if (f->n > 1) /* an empty list has no array: qsort's base must not be NULL */
		qsort(f->v, f->n, sizeof(*f->v), proof_path_cmp);
}

static const struct proof_file *proof_find(const struct proof_files *sorted, const char *path)
{
	struct proof_file key = { .path = (char *)path };
	if (sorted->n == 0)
		return NULL;
	return bsearch(&key, sorted->v, sorted->n, sizeof(*sorted->v), proof_path_cmp);
}

static bool proof_has_path(const struct proof_files *sorted, const char *path)
{
	return proof_find(sorted, path) != NULL;
}

/* Is f, at the path of o (its copy in the version a rewrite replaces), not
 * rewritten: the same ctime, mtime and size? A write, a truncate, a chmod
 * or a rename onto the path moves the ctime (invariants 5, 7). */
static bool proof_unchanged(const struct proof_file *o, const struct proof_file *f)
{
	return o->ctime_ns == f->ctime_ns && o->mtime_ns == f->mtime_ns && o->size == f->size;
}

/* Invariant 7: did a rewrite only add files to the version it replaces?
 * Every file of old is at its path in now, unchanged, old has one at
 * least, now one more, and each new one of a self-delimiting format is
 * complete (the old ones are that version's: its own rule judged them).
 * 0 with *added set, or a negative errno. Both sorted. */
static int proof_only_added(const struct proof_files *now, const struct proof_files *old,
			    proof_read_fn rd, void *arg, bool *added)
{
	*added = false;
	if (old->n == 0 || now->n <= old->n)
		return 0;
	for (size_t j = 0; j < old->n; j++) {
		const struct proof_file *f = proof_find(now, old->v[j].path);
		if (!f || !proof_unchanged(&old->v[j], f))
			return 0;
	}
	for (size_t i = 0; i < now->n; i++) {
		struct complete_result cr;
		if (proof_has_path(old, now->v[i].path))
			continue;
		int rc = proof_complete(&now->v[i], rd, arg, &cr);
		if (rc != 0 || (cr.format != COMPLETE_FMT_NONE && !cr.complete))
			return rc;
	}
	*added = true;
	return 0;
}

/* Invariant 5: in a rewrite, which self-delimiting files are still the old
 * version's (the same ctime, mtime and size as their copy in old)? Some
 * rewritten and some not: MIXED. None rewritten, or only some of the
 * others: *stale names one, and the caller proves nothing. Both sorted. */
static void proof_rewrite_check(const struct proof_files *now, const struct proof_files *old,
				struct proof_result *out, char *stale, size_t size)
{
	const char *fresh = NULL, *kept = NULL;
	for (size_t i = 0; i < now->n; i++) {
		const struct proof_file *f = &now->v[i], *o = proof_find(old, f->path);
		if (!f->recognised)
			continue;
		bool rewritten = !o || !proof_unchanged(o, f);
		if (rewritten && !fresh)
			fresh = f->path;
		else if (!rewritten && !kept)
			kept = f->path;
	}
	if (kept && fresh) {
		out->verdict = PROOF_MIXED;
		snprintf(out->reason, sizeof(out->reason), "a mix of two versions: %s is still the"
			 " previous version's while %s was rewritten", kept, fresh);
	} else if (kept) {
		snprintf(stale, size, "%s is still the previous version's: not rewritten since the"
			 " rewrite began", kept);
	}
}

/* MISSING (invariant 4) if a file of prev that is of a self-delimiting format
 * has no counterpart in now: a rank that never saved. Only the missing paths
 * are read. A file whose format cannot be read counts as one: nothing then
 * shows the save complete. Both sets sorted. */
static int proof_find_missing(const struct proof_files *now, const struct proof_files *prev,
			      proof_read_fn rd, void *arg, struct proof_result *out)
{
	for (size_t j = 0; j < prev->n; j++) {
		const char *path = prev->v[j].path;
		if (proof_has_path(now, path))
			continue;
		struct complete_result cr;
		int rc = proof_complete(&prev->v[j], rd, arg, &cr);
		if (rc == 0 && cr.format == COMPLETE_FMT_NONE && prev->v[j].size <= PROOF_SMALL_FILE)
			continue; /* a config or a log: not evidence either way (invariant 4) */
		out->verdict = PROOF_MISSING;
		snprintf(out->reason, sizeof(out->reason), "%s is missing (the previous committed save"
			 " has it%s%s)", path, rc ? "; its format could not be read: " : "",
			 rc ? strerror(-rc) : "");
		return 0;
	}
	return 0;
}

/* The first path of one set missing from the other, as a reason, or "".
 * Both sets sorted. */
static void proof_compare_sets(const struct proof_files *now, const struct proof_files *prev,
			       char *why, size_t size)
{
	size_t i = 0, j = 0;
	why[0] = '\0';
	while (i < now->n || j < prev->n) {
		int c = i == now->n ? 1 : j == prev->n ? -1 : strcmp(now->v[i].path, prev->v[j].path);
		if (c > 0) {
			snprintf(why, size, "%s is missing (the previous committed save has it)",
				 prev->v[j].path);
			return;
		}
		if (c < 0) {
			snprintf(why, size, "%s is new (the previous committed save has no such file)",
				 now->v[i].path);
			return;
		}
		i++;
		j++;
	}
}

/* Checks each file's content; *recognised counts the self-delimiting ones. */
static int proof_check_files(struct proof_files *files, proof_read_fn rd, void *arg,
			     size_t *recognised, struct proof_result *out)
{
	*recognised = 0;
	for (size_t i = 0; i < files->n; i++) {
		struct complete_result cr;
		const char *path = files->v[i].path;
		int rc = proof_complete(&files->v[i], rd, arg, &cr);
		if (rc != 0)
			return rc;
		if (cr.format == COMPLETE_FMT_NONE)
			continue;
		if (!cr.complete) {
			out->verdict = PROOF_BROKEN;
			snprintf(out->reason, sizeof(out->reason), "%s%s%s file is incomplete: %s",
				 path, path[0] ? ": " : "", complete_format_name(cr.format), cr.reason);
			return 0;
		}
		(*recognised)++;
		files->v[i].recognised = true;
	}
	return 0;
}

int proof_generation(struct cat *cat, uint64_t root, const char *name, uint64_t prev_root,
		     uint64_t old_root, proof_read_fn rd, void *arg, struct proof_result *out)
{
	struct proof_files now = { 0 }, prev = { 0 }, old = { 0 };
	struct cat_inode in;
	size_t recognised = 0;
	char stale[GEN_HELD_MAX] = "";
	memset(out, 0, sizeof(*out));
	out->verdict = PROOF_UNPROVEN;
	int rc = cat_getattr(cat, root, &in);
	if (rc == 0)
		rc = proof_list(cat, root, name ? name : "", &now);
	if (rc == 0 && now.overflow)
		snprintf(out->reason, sizeof(out->reason), "more than %d files or %d levels: not"
			 " checked by content", PROOF_MAX_FILES, PROOF_MAX_DEPTH);
	if (rc == 0 && !now.overflow) {
		proof_sort(&now);
		if (old_root != 0)
			rc = proof_list(cat, old_root, name ? name : "", &old);
		proof_sort(&old);
		/* before the verdict: a broken file of the old version (its own
		 * rule committed it) does not undo what was added (invariant 7) */
		if (rc == 0 && old_root != 0 && !old.overflow)
			rc = proof_only_added(&now, &old, rd, arg, &out->added);
	}
	if (rc == 0 && !now.overflow)
		rc = proof_check_files(&now, rd, arg, &recognised, out);
	if (rc != 0 || now.overflow || out->verdict == PROOF_BROKEN)
		goto done;
	if (now.n == 0) {
		out->verdict = PROOF_EMPTY;
		snprintf(out->reason, sizeof(out->reason), "empty: no file was written in it");
		goto done;
	}
	if (old_root != 0) {
		if (old.overflow)
			snprintf(stale, sizeof(stale), "the version it rewrites is too large to compare"
				 " with");
		else
			proof_rewrite_check(&now, &old, out, stale, sizeof(stale));
	}
	if (rc != 0 || out->verdict == PROOF_MIXED)
		goto done;
	if (S_ISREG(in.mode)) {
		out->verdict = recognised == 1 ? PROOF_COMPLETE : PROOF_UNPROVEN;
		if (recognised == 0)
			snprintf(out->reason, sizeof(out->reason), "no completion signal, and not a"
				 " self-delimiting format (torch.save, safetensors, npy, npz)");
		goto done;
	}
	if (prev_root != 0)
		rc = proof_list(cat, prev_root, "", &prev);
	if (rc == 0 && prev.overflow)
		snprintf(out->reason, sizeof(out->reason), "the previous committed save is too"
			 " large to compare with");
	if (rc != 0 || prev.overflow)
		goto done;
	proof_sort(&prev);
	if (prev_root != 0 && (rc = cat_getattr(cat, prev_root, &in)) == 0 && S_ISDIR(in.mode))
		rc = proof_find_missing(&now, &prev, rd, arg, out);
	if (rc != 0 || out->verdict == PROOF_MISSING)
		goto done;
	if (recognised == 0) {
		snprintf(out->reason, sizeof(out->reason), "no completion signal, and no file of a"
			 " self-delimiting format to check");
		goto done;
	}
	if (prev_root == 0) {
		snprintf(out->reason, sizeof(out->reason), "no completion signal; its %zu files are"
			 " complete, but no earlier committed save of the series shows which files"
			 " a save has", now.n);
		goto done;
	}
	proof_compare_sets(&now, &prev, out->reason, sizeof(out->reason));
	if (out->reason[0] == '\0')
		out->verdict = PROOF_COMPLETE;
done:
	if (out->verdict == PROOF_COMPLETE && stale[0]) { /* invariant 5 */
		out->verdict = PROOF_UNPROVEN;
		snprintf(out->reason, sizeof(out->reason), "%s", stale);
	}
	proof_files_free(&now);
	proof_files_free(&prev);
	proof_files_free(&old);
	if (out->verdict == PROOF_COMPLETE)
		out->reason[0] = '\0';
	if (rc != 0) /* invariant 7: only from a comparison that ran */
		out->added = false;
	return rc;
}

/* Invariant 6 for one file: 0 with out unchanged when every object is
 * there; NO_OBJECT naming the first that is not. ext: PROOF_EXTENTS. */
static int proof_file_objects(struct cat *cat, const struct proof_file *f,
			      struct cat_extent *ext, proof_object_fn has, void *arg,
			      struct proof_result *out)
{
	bool uploaded = false;
	int rc = cat_file_uploaded(cat, f->ino, &uploaded);
	if (rc != 0 || uploaded) /* BACKING holds every object: no stat */
		return rc;
	bool seen = false; /* a chunk named by extents in a row is looked at once */
	uint8_t last[CAT_HASH_LEN];
	for (uint64_t off = 0;;) {
		int n = cat_extents(cat, f->ino, off, ext, PROOF_EXTENTS);
		if (n <= 0)
			return n;
		for (int j = 0; j < n; j++) {
			if (seen && memcmp(last, ext[j].hash, CAT_HASH_LEN) == 0)
				continue;
			memcpy(last, ext[j].hash, CAT_HASH_LEN);
			seen = true;
			int here = has(arg, ext[j].hash, ext[j].chunk_len);
			if (here == 0)
				continue;
			if (here != -ENOENT && here != -EIO)
				return here;
			struct cat_chunk_where w;
			rc = cat_chunk_where(cat, ext[j].hash, &w);
			if (rc == 0 && w.uploaded)
				continue;
			if (rc != 0 && rc != -ENOENT)
				return rc;
			char hex[HASH_HEX_LEN + 1];
			hash_to_hex(ext[j].hash, hex);
			out->verdict = PROOF_NO_OBJECT;
			snprintf(out->reason, sizeof(out->reason), "chunk %.16s… of \"%s\" (its bytes"
				 " %llu-%llu) is missing after the crash: %s in the cache, not on"
				 " BACKING", hex, f->path, (unsigned long long)ext[j].off,
				 (unsigned long long)(ext[j].off + ext[j].len),
				 here == -ENOENT ? "not" : "damaged");
			return 0;
		}
		off = ext[n - 1].off + ext[n - 1].len;
	}
}

int proof_objects(struct cat *cat, uint64_t root, const char *name, proof_object_fn has,
		  void *arg, struct proof_result *out)
{
	struct proof_files files = { 0 };
	struct cat_extent *ext = NULL;
	memset(out, 0, sizeof(*out));
	out->verdict = PROOF_COMPLETE;
	int rc = proof_list(cat, root, name ? name : "", &files);
	if (rc == 0 && files.overflow) {
		out->verdict = PROOF_UNPROVEN;
		snprintf(out->reason, sizeof(out->reason), "more than %d files or %d levels: its"
			 " objects not checked", PROOF_MAX_FILES, PROOF_MAX_DEPTH);
	} else if (rc == 0 && !(ext = malloc(PROOF_EXTENTS * sizeof(*ext)))) {
		rc = -ENOMEM;
	}
	for (size_t i = 0; rc == 0 && ext && i < files.n && out->verdict == PROOF_COMPLETE; i++)
		rc = proof_file_objects(cat, &files.v[i], ext, has, arg, out);
	free(ext);
	proof_files_free(&files);
	return rc;
}

bool proof_weak_may_commit(int verdict)
{
	return verdict != PROOF_BROKEN && verdict != PROOF_EMPTY && verdict != PROOF_MISSING &&
	       verdict != PROOF_MIXED && verdict != PROOF_NO_OBJECT;
}
