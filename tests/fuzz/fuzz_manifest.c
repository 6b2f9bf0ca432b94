/* fuzz_manifest — manifest_parse (meta/manifest.c) over bytes as they come
 * from BACKING.
 *
 * Each input is parsed twice: as it is (the checksum check, the header, the
 * size bound), and with its last line replaced by a correct "sum" line, so
 * that mutations reach the records behind the checksum. A manifest that
 * parses must hold what the parser promises (manifest.c invariant 4):
 * every bound holds, every reference is in range, every inode has a path. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunker.h"
#include "codec.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup(stderr, LOG_LVL_OFF);
	return 0;
}

static void fz_check(const struct manifest *m)
{
	uint64_t bytes = 0;
	assert(m->n_inodes > 0);
	for (size_t i = 0; i < m->n_inodes; i++) {
		const struct manifest_inode *in = &m->inodes[i];
		assert(in->size <= MANIFEST_FILE_SIZE_MAX);
		if ((in->mode & 0170000) == 0100000)
			bytes += in->size;
		assert(i == 0 || in->parent < m->n_inodes);
		char path[4096];
		manifest_inode_path(m, i, path, sizeof(path));
	}
	assert(bytes == m->bytes && bytes <= MANIFEST_BYTES_MAX);
	for (size_t i = 0; i < m->n_chunks; i++) {
		const struct manifest_chunk *c = &m->chunks[i];
		assert(c->plain_len > 0 && c->plain_len <= chunker_default_params.max_size);
		assert(c->stored_len <= codec_bound((size_t)c->plain_len));
		assert(codec_known(c->codec));
		assert(c->refs > 0);
	}
	for (size_t i = 0; i < m->n_entries; i++)
		assert(m->entries[i].parent < m->n_inodes && m->entries[i].child < m->n_inodes);
	for (size_t i = 0; i < m->n_extents; i++) {
		const struct manifest_extent *x = &m->extents[i];
		assert(x->inode < m->n_inodes && x->chunk < m->n_chunks);
		assert(x->off + x->len <= MANIFEST_FILE_SIZE_MAX);
		assert(x->chunk_off + x->len <= m->chunks[x->chunk].plain_len);
	}
}

static void fz_parse(const char *buf, size_t len)
{
	struct manifest *m = NULL;
	char err[MANIFEST_ERR_MAX];
	int rc = manifest_parse(buf, len, &m, err, sizeof(err));
	assert((rc == 0) == (m != NULL));
	if (rc == 0)
		fz_check(m);
	else
		assert(err[0] != 0); /* every refusal says why */
	manifest_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly size bytes, so that ASan sees a read past them */
	char *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	fz_parse(buf, size);
	free(buf);

	/* the body (all but a last "sum" line) with its correct sum */
	size_t body = size;
	if (body > 0 && data[body - 1] == '\n') {
		body--;
		while (body > 0 && data[body - 1] != '\n')
			body--;
		if (size - body < 4 || memcmp(data + body, "sum ", 4) != 0)
			body = size;
	}
	char *fixed = malloc(body + 4 + HASH_HEX_LEN + 1);
	memcpy(fixed, data, body);
	uint8_t h[HASH_LEN];
	char hex[HASH_HEX_LEN + 1];
	hash_sha256(fixed, body, h);
	hash_to_hex(h, hex);
	memcpy(fixed + body, "sum ", 4);
	memcpy(fixed + body + 4, hex, HASH_HEX_LEN);
	fixed[body + 4 + HASH_HEX_LEN] = '\n';
	fz_parse(fixed, body + 4 + HASH_HEX_LEN + 1);
	free(fixed);
	return 0;
}
