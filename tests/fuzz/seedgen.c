/* seedgen — writes the seed corpus of the fuzz harnesses with the project's
 * own encoders, so the seeds are real objects of the current formats:
 *   corpus/fuzz_manifest/,   manifests built by manifest_gen_build and
 *   corpus/fuzz_manifest_apply/  manifest_tree_build from a small catalog
 *   corpus/fuzz_chunk/,      chunk objects written by store_put (raw, LZ4,
 *   corpus/fuzz_chunk_file/  empty, one byte)
 *   corpus/fuzz_journal/     intent journals as cat_defer_intent writes them
 *   corpus/fuzz_pack/        packs made by pack_builder of those chunk objects
 *                            (all four, and one alone)
 * Usage: seedgen OUTDIR (make fuzz-seeds). Exits non-zero on any failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "catalog_internal.h"
#include "generation.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "pack.h"
#include "store.h"

#define SG_OK(x)                                                                         \
	do {                                                                             \
		int sg_rc = (x);                                                         \
		if (sg_rc != 0) {                                                        \
			fprintf(stderr, "seedgen: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, \
				strerror(sg_rc < 0 ? -sg_rc : sg_rc));                   \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

static const char *sg_out;

static void sg_write(const char *harness, const char *name, const void *p, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", sg_out, harness);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", sg_out, harness, name);
	FILE *f = fopen(path, "w");
	if (f == NULL || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "seedgen: cannot write %s\n", path);
		exit(1);
	}
}

static uint64_t sg_mk(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
		      const char *target)
{
	struct cat_inode in;
	SG_OK(cat_create(cat, parent, name, mode, 1000, 1001, 0, target, &in));
	return in.ino;
}

/* n chunks of len bytes into ino, hashes fill/seed.., each stored (codec
 * alternating raw and LZ4) */
static void sg_chunks(struct cat *cat, uint64_t ino, int seed, int n, uint64_t len)
{
	SG_OK(cat_pending_drop(cat, ino));
	for (int i = 0; i < n; i++) {
		struct cat_extent e = { .off = (uint64_t)i * len, .len = len, .chunk_len = len };
		bool must = false;
		memset(e.hash, 0x5a, sizeof(e.hash));
		e.hash[0] = (uint8_t)(seed + i);
		SG_OK(cat_pending_add(cat, ino, &e, &must));
		if (must)
			SG_OK(cat_chunk_stored(cat, e.hash, (uint8_t)(i & 1),
					       i & 1 ? len / 2 + 1 : len));
	}
	SG_OK(cat_file_commit(cat, ino, (uint64_t)n * len, 1700000000000000000LL, false));
	SG_OK(cat_pending_drop(cat, ino));
}

static void sg_manifests(const char *dir)
{
	char db[512];
	struct cat *cat;
	snprintf(db, sizeof(db), "%s/seed.db", dir);
	SG_OK(cat_open(db, 0, 0, NULL, NULL, &cat));
	uint64_t run = sg_mk(cat, CAT_ROOT_INO, "run", S_IFDIR | 0755, NULL);
	uint64_t series = sg_mk(cat, run, "ckpt", S_IFDIR | 0755, NULL);
	struct cat_gen_spec spec = { .name = "step-100", .step = 100 };
	struct cat_inode root;
	uint64_t id = 0;
	SG_OK(cat_create_in_gen(cat, series, "step-100", S_IFDIR | 0750, 1000, 1001, 0, NULL,
				&spec, &root, &id));
	uint64_t sub = sg_mk(cat, root.ino, "model", S_IFDIR | 0755, NULL);
	uint64_t w = sg_mk(cat, sub, "we ird%name", S_IFREG | 0644, NULL);
	sg_chunks(cat, w, 1, 3, 4096);
	uint64_t opt = sg_mk(cat, root.ino, "optim.pt", S_IFREG | 0600, NULL);
	sg_chunks(cat, opt, 1, 1, 4096); /* a shared chunk */
	uint64_t empty = sg_mk(cat, root.ino, "empty", S_IFREG | 0644, NULL);
	struct cat_inode l;
	SG_OK(cat_link(cat, w, root.ino, "hardlink", &l));
	sg_mk(cat, root.ino, "link", S_IFLNK | 0777, "model/we ird%name");
	/* their last handles released (generation.h G7): else G9 holds the save */
	SG_OK(cat_file_unmark(cat, w));
	SG_OK(cat_file_unmark(cat, opt));
	SG_OK(cat_file_unmark(cat, empty));
	SG_OK(cat_gen_commit(cat, id, "dcp-metadata"));
	sg_mk(cat, series, "latest", S_IFLNK | 0777, "step-100");
	uint64_t notes = sg_mk(cat, CAT_ROOT_INO, "notes.txt", S_IFREG | 0600, NULL);
	sg_chunks(cat, notes, 40, 1, 100);

	char *p;
	size_t len;
	SG_OK(manifest_gen_build(cat, id, 1, &p, &len));
	sg_write("fuzz_manifest", "gen", p, len);
	sg_write("fuzz_manifest_apply", "gen", p, len);
	free(p);
	SG_OK(manifest_tree_build(cat, &p, &len));
	sg_write("fuzz_manifest", "tree", p, len);
	sg_write("fuzz_manifest_apply", "tree", p, len);
	free(p);
	cat_close(cat);
}

/* The object file store_put wrote for plain. */
static void sg_object(struct store *st, const char *name, const void *plain, size_t len)
{
	uint8_t hash[HASH_LEN];
	hash_sha256(plain, len, hash);
	SG_OK(store_put(st, hash, plain, len, 0, NULL));
	static uint8_t img[1 << 20];
	size_t got;
	SG_OK(store_read_object(st, hash, img, sizeof(img), &got));
	sg_write("fuzz_chunk", name, img, got);
	sg_write("fuzz_chunk_file", name, img, got);
}

/* The pack of the n objects of plain[i] (already in st), as the uploader
 * would build it. */
static void sg_pack(struct store *st, const char *name, const void *const *plain,
		    const size_t *len, int n)
{
	struct pack_builder b;
	pack_builder_init(&b);
	const char *why = NULL;
	for (int i = 0; i < n; i++) {
		uint8_t hash[HASH_LEN];
		hash_sha256(plain[i], len[i], hash);
		static uint8_t img[1 << 20];
		size_t got;
		SG_OK(store_read_object(st, hash, img, sizeof(img), &got));
		SG_OK(pack_builder_add(&b, hash, img, got, &why));
	}
	uint8_t *p, pack_name[HASH_LEN];
	size_t plen;
	SG_OK(pack_builder_finish(&b, &p, &plen, pack_name, &why));
	sg_write("fuzz_pack", name, p, plen);
	free(p);
	pack_builder_free(&b);
}

static void sg_objects(const char *dir)
{
	char root[512];
	struct store *st;
	snprintf(root, sizeof(root), "%s/store", dir);
	mkdir(root, 0700);
	SG_OK(store_open(root, &st));
	static char text[3000];
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = "model.layers.weight bias "[i % 25];
	uint8_t rnd[700];
	uint64_t x = 88172645463325252ULL;
	for (size_t i = 0; i < sizeof(rnd); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		rnd[i] = (uint8_t)x;
	}
	sg_object(st, "lz4", text, sizeof(text));
	sg_object(st, "raw", rnd, sizeof(rnd));
	sg_object(st, "empty", "", 0);
	sg_object(st, "one-byte", "x", 1);
	const void *plain[] = { text, rnd, "", "x" };
	const size_t len[] = { sizeof(text), sizeof(rnd), 0, 1 };
	sg_pack(st, "four", plain, len, 4);
	sg_pack(st, "one", plain + 1, len + 1, 1);
	store_close(st);
}

static void sg_journals(void)
{
	/* as cat_defer_intent writes a record: "object <hex>", a NUL, '\n' */
	char text[512];
	size_t len = (size_t)sprintf(text, "begin\n");
	for (int i = 0; i < 3; i++) {
		uint8_t h[CAT_HASH_LEN];
		memset(h, 0x3c, sizeof(h));
		h[0] = (uint8_t)i;
		len += (size_t)sprintf(text + len, "object ");
		cat_hex(h, text + len);
		len += 2 * CAT_HASH_LEN;
		text[len++] = 0;
		text[len++] = '\n';
	}
	sg_write("fuzz_journal", "three-objects", text, len);
	sg_write("fuzz_journal", "torn", text, len - 40);
	sg_write("fuzz_journal", "begin", "begin\n", 6);
}

static int sg_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seedgen OUTDIR\n");
		return 2;
	}
	sg_out = argv[1];
	mkdir(sg_out, 0755);
	log_setup(stderr, LOG_LVL_WARN);
	char dir[] = "/tmp/ckptfs-seedgen-XXXXXX";
	if (mkdtemp(dir) == NULL)
		return 1;
	sg_manifests(dir);
	sg_objects(dir);
	sg_journals();
	nftw(dir, sg_rm, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
