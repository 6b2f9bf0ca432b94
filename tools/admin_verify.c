/* admin_verify — verify [GEN]: re-read and re-hash every chunk object (of all
 * chunks, or of one generation's) and report each missing or corrupt one
 * with the files and generations that name it; check: the catalog's
 * invariants.
 *
 * Read-only: works mounted (the catalog is opened read-only; WAL readers do
 * not block the daemon) and offline alike. Today chunks live on BACKING only
 * (written through); with the write-back cache, cached copies are verified
 * too. Exit 1 if anything is bad. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "store.h"

struct admin_verify {
	struct admin *a;
	uint64_t ok, bad, skipped, done, total;
	char *buf;
	size_t cap;
	bool first_bad;
};

static void admin_verify_report(struct admin_verify *v, const uint8_t hash[CAT_HASH_LEN],
				const char *problem)
{
	struct admin *a = v->a;
	char hex[HASH_HEX_LEN + 1], path[PATH_MAX], label[PATH_MAX + CAT_NAME_MAX + 2];
	hash_to_hex(hash, hex);
	struct aq_user *users = NULL;
	size_t n = 0;
	aq_chunk_users(a->aq, hash, &users, &n);
	admin_progress_end();
	if (a->json) {
		printf("%s\n  {\"chunk\": \"%s\", \"problem\": \"%s\", \"files\": [", v->first_bad ? "" : ",",
		       hex, problem);
	} else {
		printf("%s chunk %s (%s)\n", strcmp(problem, "missing") == 0 ? "missing" : "corrupt", hex,
		       problem);
	}
	v->first_bad = false;
	for (size_t i = 0; i < n; i++) {
		struct cat_gen g;
		bool has_gen = users[i].gen_id && cat_gen_get_brief(a->cat, users[i].gen_id, &g) == 0;
		if (aq_path(a->aq, users[i].ino, path, sizeof(path)) != 0)
			snprintf(path, sizeof(path), "?");
		if (has_gen)
			admin_gen_label(a, &g, label, sizeof(label));
		if (a->json) {
			printf("%s{\"path\": ", i ? ", " : "");
			admin_json_str(stdout, path);
			printf(", \"generation\": ");
			if (has_gen)
				admin_json_str(stdout, label);
			else
				printf("null");
			printf("}");
		} else {
			printf("  in %s (%s%s)\n", path, has_gen ? "generation " : "no generation",
			       has_gen ? label : "");
		}
	}
	if (a->json)
		printf("]}");
	free(users);
}

static int admin_verify_one(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			    uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct admin_verify *v = arg;
	admin_progress("verify", ++v->done, v->total);
	if (stored_len < 0 || refcount == 0) { /* being written, or about to go */
		v->skipped++;
		return 0;
	}
	if (v->cap < plain_len || !v->buf) {
		char *nb = realloc(v->buf, plain_len ? plain_len : 1);
		if (!nb)
			return -ENOMEM;
		v->buf = nb;
		v->cap = plain_len;
	}
	struct store_object_info info;
	int rc = store_stat(v->a->store, hash, &info);
	if (rc == -ENOENT) {
		v->bad++;
		admin_verify_report(v, hash, "missing");
		return 0;
	}
	size_t got = 0;
	if (rc == 0)
		rc = store_get(v->a->store, hash, v->buf, v->cap, &got);
	if (rc == 0 && got == plain_len) {
		v->ok++;
		return 0;
	}
	v->bad++;
	admin_verify_report(v, hash, rc ? (rc == -EIO ? "hash or format mismatch" : strerror(-rc))
					: "wrong length");
	return 0;
}

int admin_cmd_verify(struct admin *a)
{
	if (a->npos > 1) {
		admin_err("verify: expected at most one GEN");
		return ADMIN_USAGE;
	}
	struct admin_verify v = { .a = a, .first_bad = true };
	struct aq_chunk *chunks = NULL;
	size_t n = 0;
	int rc = 0;
	if (a->npos == 1) {
		struct cat_gen g;
		int ec = admin_resolve_gen(a, a->pos[0], &g);
		if (ec != ADMIN_OK)
			return ec;
		rc = aq_gen_chunks(a->aq, g.id, &chunks, &n);
		v.total = n;
	} else {
		struct cat_stats s;
		if ((rc = cat_stats(a->cat, &s)) == 0)
			v.total = s.chunks;
	}
	if (rc == 0 && a->json)
		printf("{\"bad\": [");
	if (rc == 0 && a->npos == 1) {
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = admin_verify_one(&v, chunks[i].hash, chunks[i].plain_len, 0,
					      chunks[i].stored_len, 1);
	} else if (rc == 0) {
		rc = cat_chunks(a->cat, admin_verify_one, &v);
	}
	admin_progress_end();
	free(chunks);
	free(v.buf);
	if (a->json)
		printf("%s], \"chunks_ok\": %" PRIu64 ", \"chunks_bad\": %" PRIu64
		       ", \"chunks_skipped\": %" PRIu64 ", \"where\": \"backing\"}\n",
		       v.first_bad ? "" : "\n ", v.ok, v.bad, v.skipped);
	else
		printf("chunks_ok %" PRIu64 "\nchunks_bad %" PRIu64 "\nchunks_skipped %" PRIu64 "\n", v.ok,
		       v.bad, v.skipped);
	if (rc != 0) {
		admin_err("verify: stopped: %s", strerror(-rc));
		return ADMIN_PROBLEM;
	}
	return v.bad ? ADMIN_PROBLEM : ADMIN_OK;
}

int admin_cmd_check(struct admin *a)
{
	if (a->npos != 0) {
		admin_err("check: takes no argument");
		return ADMIN_USAGE;
	}
	int rc = cat_check(a->cat); /* with G1–G3 of the generations */
	if (rc != 0) {
		admin_err("check: the catalog has problems (see the lines above)");
		return ADMIN_PROBLEM;
	}
	if (a->json)
		printf("{\"catalog\": \"ok\"}\n");
	else
		printf("catalog ok\n");
	return ADMIN_OK;
}
