/* manifest — the catalog's state written as immutable text files on BACKING,
 * so that chunk objects + manifests are enough to rebuild a catalog (DESIGN
 * invariant 5). The format is in docs/FORMAT.md ("Manifests") and belongs to
 * no engine; building and applying read and write the SQLite engine's tables
 * ([SQLite] in catalog.h's contract).
 *
 * Two kinds:
 *  - a generation manifest: one COMMITTED generation at one version — its row
 *    (id, series path, name, step, version, pinned, times, rule), every inode
 *    of its tree, the entries that link them, the chunks its files name and
 *    their extents. Path on BACKING: manifests/gen/<id>.<version>.ckm.
 *  - a tree manifest: everything outside generations (inodes with gen NULL
 *    reachable from the root: the root's attributes, series directories,
 *    files such as `latest`, symlinks). Generation roots are left out, their
 *    parents are in. Path: manifests/tree/<seq, 20 digits>.ckm; the highest
 *    seq is the current one.
 *
 * Inodes get manifest-local ids (0 is the root of what the manifest holds);
 * entries are listed separately (parent id, child id, name), so hard links
 * survive. Names are percent-escaped: every byte round-trips.
 *
 * Invariants:
 *  M1. A manifest is built in one read transaction: it is one consistent
 *      state of the catalog.
 *  M2. manifest_apply changes the catalog in one write transaction, or not at
 *      all: a manifest that is malformed, fails its checksum, has an unknown
 *      format version, names a bad name, holds a value past its bound (the
 *      MANIFEST_*_MAX below), conflicts with the catalog (a
 *      generation id already present, a name that exists as something else)
 *      is rejected whole, with a message naming the line and the reason.
 *  M3. After an apply, cat_check and cat_gen_check hold: chunk counts equal
 *      the extents naming them, nlink equals entries, the generation's tree
 *      carries its id.
 *  M4. A generation manifest that conflicts with the catalog by its name is
 *      not lost to the catalog: manifest_apply_held applies it whole as a
 *      HELD generation (generation.h G5: hidden, kept byte for byte until
 *      an admin decides) under a name that cannot conflict — its root named
 *      "<name>.rebuild-<id>" (the name cut short to fit CAT_NAME_MAX), and a
 *      component of its series that exists as something other than a
 *      directory outside generations replaced by "<component>.rebuild-<id>"
 *      — so that its files name their chunks and the chunks are counted
 *      (no reclaim removes an object it names). Ids are unique, so only a
 *      catalog already holding its id, or those very names, refuses it
 *      (-EEXIST). SQLite engine, schema 5 and later (older: -EOPNOTSUPP),
 *      and the shared engine (rebuild --meta: pggen_apply_manifest_held,
 *      the same names, row, reason and rule in ns_generations).
 *
 * Calls return 0 or a negative errno. */
#ifndef CKPTFS_MANIFEST_H
#define CKPTFS_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"

#define MANIFEST_FORMAT_VERSION 1
#define MANIFEST_PATH_MAX 96
#define MANIFEST_ERR_MAX 512 /* a good size for err buffers */

/* Bounds of what a manifest read back from BACKING may hold (DESIGN
 * invariant 7; docs/FORMAT.md "Limits"). A manifest past any of them is
 * refused whole, like a corrupt one.
 *  - MANIFEST_SIZE_MAX: its bytes. At ~200 bytes per chunk (a chunk line and
 *    an ext line) that is ~5 million chunks, 5 TiB of distinct data at the
 *    chunker's 1 MiB average; a rebuild reads no file larger (backing_stat
 *    first), and the builder writes none (it parses back what it built).
 *  - MANIFEST_FILE_SIZE_MAX: an inode's size and an extent's end (256 TiB,
 *    beyond any filesystem's checkpoint file).
 *  - MANIFEST_BYTES_MAX: the sum of the sizes of a manifest's files, so that
 *    sums over generations stay far from 2^63. */
#define MANIFEST_SIZE_MAX ((size_t)1 << 30)
#define MANIFEST_FILE_SIZE_MAX ((uint64_t)1 << 48)
#define MANIFEST_BYTES_MAX ((uint64_t)1 << 52)

/* ---- building (under the catalog lock, one read transaction) ---- */

/* The manifest of generation gen_id at version: -ESTALE if it is not
 * COMMITTED at exactly that version (rewritten, deleted, aborted), -ENOENT if
 * there is no such generation. *out is malloc'd (free it); *len its length. */
int manifest_gen_build(struct cat *cat, uint64_t gen_id, uint32_t version, char **out,
		       size_t *len);

/* The manifest of everything outside generations. */
int manifest_tree_build(struct cat *cat, char **out, size_t *len);
/* The same, for BACKING (fs/uploader.c T5): in the one read transaction
 * that builds it, fp gets the tree's fingerprint (cat_tree_fingerprint) and
 * the build answers -EAGAIN, unlogged, while a file outside generations
 * names a chunk not on BACKING, so that the manifest put never names one
 * (upload.h U5). SQLite engine only (a shared catalog's tree is
 * manifest_shared_tree_build's). */
int manifest_tree_build_uploaded(struct cat *cat, char **out, size_t *len, char *fp,
				 size_t fp_size);

/* ---- applying ---- */

/* Parses, verifies and inserts a manifest into the catalog (M2, M3):
 *  - tree: directories that exist are merged (their attributes taken from
 *    the manifest), missing ones created; any other name that already exists
 *    is a conflict (-EEXIST).
 *  - generation: its series directories are created if absent (mkdir -p,
 *    mode 0755, owner of the generation's root), its tree is linked as
 *    series/name, and the generations row is inserted with the same id,
 *    COMMITTED, at its version (durable_version = version when the catalog
 *    has one). -EEXIST if the id or series/name is taken.
 * Chunk rows are inserted as stored (codec, stored_len from the manifest; on
 * schema 3 and later cached = 0, uploaded = 1); an existing row keeps its
 * object fields and is marked uploaded. Errors: -EINVAL malformed or out
 * of bounds (or bad checksum, -EBADMSG; larger than MANIFEST_SIZE_MAX,
 * -EFBIG), -EPROTONOSUPPORT unknown format version, -EEXIST
 * conflict; err (if errsz > 0) gets one line naming the line and reason. */
int manifest_apply(struct cat *cat, const char *buf, size_t len, char *err, size_t errsz);

/* ---- parsed form (for rebuild reports and tools) ---- */

enum manifest_kind { MANIFEST_TREE = 1, MANIFEST_GEN = 2 };

struct manifest_gen_row {
	uint64_t id;
	uint32_t version;
	uint64_t step;
	bool pinned;
	int64_t created_ns, committed_ns;
	const char *series; /* path from the mount root, "" for the root itself */
	const char *name;
	const char *rule;
};

struct manifest_inode {
	uint32_t mode, uid, gid;
	uint64_t size, rdev;
	int64_t atime_ns, mtime_ns, ctime_ns;
	const char *target; /* symlinks only, else NULL */
	uint32_t links;     /* entries naming it (computed) */
	uint64_t parent;    /* its first entry's parent id (paths in reports) */
	const char *name;   /* its first entry's name; NULL for id 0 */
};

struct manifest_entry {
	uint64_t parent, child;
	const char *name;
	uint32_t line;
};

struct manifest_chunk {
	uint8_t hash[CAT_HASH_LEN];
	uint64_t plain_len, stored_len;
	uint8_t codec;
	uint64_t refs; /* extents naming it (computed) */
};

struct manifest_extent {
	uint64_t inode; /* manifest-local id */
	uint64_t off, len, chunk_off;
	uint32_t chunk; /* index into chunks */
};

struct manifest {
	enum manifest_kind kind;
	struct manifest_gen_row gen; /* MANIFEST_GEN only */
	size_t n_inodes, n_entries, n_chunks, n_extents;
	struct manifest_inode *inodes; /* [0] is the root */
	struct manifest_entry *entries;
	struct manifest_chunk *chunks; /* sorted by hash */
	struct manifest_extent *extents; /* sorted by (inode, off) */
	uint64_t files, bytes; /* regular files and the sum of their sizes */
	char *text;            /* owns the decoded strings */
};

/* Parses and verifies (checksum, format version, structure, names, and the
 * bounds above: a chunk's plain_len by the chunker's maximum, its stored_len
 * by the codec's worst case, its codec a known one, depth by 4096). -EFBIG
 * for len > MANIFEST_SIZE_MAX (no byte of buf is read). */
int manifest_parse(const char *buf, size_t len, struct manifest **out, char *err, size_t errsz);
void manifest_free(struct manifest *m); /* NULL is allowed */
/* The text of m (m->kind's format, the sum line added), as the builders
 * write it: a manifest that manifest_parse gave comes back byte for byte.
 * Strings are read up to their NUL; extents name chunks by index. -EIO if
 * the text would not parse back (M2's checks), -ENOMEM. *out is malloc'd. */
int manifest_format(const struct manifest *m, char **out, size_t *len);
/* Applies a parsed manifest (manifest_apply without the parse). */
int manifest_apply_parsed(struct cat *cat, const struct manifest *m, char *err, size_t errsz);

/* M4: applies generation manifest m HELD, for one manifest_apply_parsed
 * refused with -EEXIST: root renamed "<name>" MANIFEST_HELD_SUFFIX "<id>"
 * (a conflicting series component likewise), row HELD with reason (1 to
 * GEN_HELD_MAX - 1 bytes; generation.h G5) and rule MANIFEST_HELD_RULE,
 * durable at its version (its manifest is on BACKING, under its old name
 * until a commit writes it again). where (if not NULL) gets the path it is
 * linked at from the mount's root (cut at wheresz; "" if not applied). -EINVAL for a tree manifest or a bad
 * reason, -EOPNOTSUPP on a SQLite schema older than 5,
 * -EEXIST if the id or the renamed path is taken too; else as
 * manifest_apply_parsed. */
#define MANIFEST_HELD_SUFFIX ".rebuild-"
#define MANIFEST_HELD_RULE "rebuild"
int manifest_apply_held(struct cat *cat, const struct manifest *m, const char *reason, char *where,
			size_t wheresz, char *err, size_t errsz);
/* M4's name: base with MANIFEST_HELD_SUFFIX "<gen_id>" appended, base cut
 * short so that the whole fits CAT_NAME_MAX (both engines). */
void manifest_held_name(const char *base, uint64_t gen_id, char out[CAT_NAME_MAX + 1]);
/* M4's where: appends "/" (unless path is "") and name to path, cut at
 * size; path NULL or size 0 does nothing (both engines). */
void manifest_path_add(char *path, size_t size, const char *name);
/* The path of inode id inside the manifest ("" for the root; via first entries). */
void manifest_inode_path(const struct manifest *m, uint64_t id, char *buf, size_t size);

/* ---- names on BACKING ---- */

/* "manifests/gen/<id>.<version>.ckm" */
void manifest_gen_path(uint64_t gen_id, uint32_t version, char *buf, size_t size);
/* "manifests/tree/<seq as 20 zero-padded digits>.ckm" */
void manifest_tree_path(uint64_t seq, char *buf, size_t size);
/* The inverses, for listings of manifests/gen and manifests/tree: a name
 * that is not exactly of that form is -EINVAL. */
int manifest_gen_name_parse(const char *name, uint64_t *gen_id, uint32_t *version);
int manifest_tree_name_parse(const char *name, uint64_t *seq);

#endif
