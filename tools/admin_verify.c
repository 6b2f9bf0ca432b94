/* admin_verify — verify [GEN]: re-read and re-hash every copy of every chunk
 * (of all chunks, or of one generation's): the cache's copy where the catalog
 * says it is cached, BACKING's where it says it is uploaded. Each missing or
 * corrupt copy is reported with where it is and the files and generations
 * that name the chunk. check: the catalog's invariants.
 *
 * One change, mounted only: a chunk whose copy on BACKING is bad while the
 * cache's copy is good is handed to the daemon (verb reput, upload.h U13),
 * which puts it again from the cache; said on stderr and counted in
 * backing_copies_put_again. Offline, it is only said.
 *
 * Otherwise read-only: works mounted (the catalog is opened read-only; WAL readers do
 * not block the daemon) and offline alike. A copy the daemon removes while
 * verify runs (eviction, a deleted generation) is re-checked against the
 * catalog before it is reported. Exit 1 if anything is bad.
 *
 * On a node of a shared catalog (-o meta=) the local catalog file holds
 * this node's chunk rows (its cache and its uploads) and no namespace:
 * verify checks those objects (their local counts are 0 there: references
 * are PostgreSQL's, so a count of 0 does not skip one), and verify GEN, which would read the
 * namespace, refuses (exit 10) rather than report on an empty one; check is
 * run by the daemon (control verb check), on PostgreSQL's tables and the
 * node's cache rows.
 *
 * BACKING gone (a dead nfs:// server, a directory BACKING failing every
 * call) would cost backing_timeout per chunk. So the first BACKING copy
 * that could not be read (bkobj.h B1: no verdict) is followed by one cheap
 * call (its root listed, stopped at the first name): if that fails too,
 * BACKING is unreachable and verify stops at once, the chunks after this one
 * counted as not checked, one line and exit ADMIN_UNREACHABLE (12). If it
 * answers, the copy was unreadable on its own and verify goes on (the next
 * unreadable copy asks again: a server may die mid-run). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "backing.h"
#include "bkobj.h"
#include "store.h"
#include "upload.h"

static char *admin_obj_buf;
static size_t admin_obj_cap;

/* Where the chunk's object is on BACKING, as the catalog says: a pack
 * member (catalog_pack.h K2: *at, returned), or the loose object (NULL). */
static const struct bkobj_where *admin_chunk_place(struct admin *a,
						   const uint8_t hash[CAT_HASH_LEN],
						   struct bkobj_where *at)
{
	struct cat_chunk_where w;
	if (!a->cat || cat_chunk_where(a->cat, hash, &w) != 0 || !w.packed)
		return NULL;
	memcpy(at->pack, w.pack, CAT_HASH_LEN);
	at->off = w.pack_off;
	at->len = (uint32_t)w.pack_len;
	return at;
}

int admin_chunk_read(struct admin *a, enum admin_where where, const uint8_t hash[CAT_HASH_LEN],
		     void *plain, size_t cap, size_t *len, const char **why)
{
	*why = NULL;
	size_t need = 2 * cap + STORE_HEADER_LEN + 4096; /* LZ4's worst case is far below */
	if (admin_obj_cap < need) {
		char *nb = realloc(admin_obj_buf, need);
		if (!nb)
			return -ENOMEM;
		admin_obj_buf = nb;
		admin_obj_cap = need;
	}
	if (where == ADMIN_ON_BACKING) { /* bkobj.h B1: a verdict, or BACKING unreadable */
		struct bkobj_read r = { .obj = admin_obj_buf, .obj_cap = admin_obj_cap,
					.plain = plain, .plain_cap = cap };
		struct bkobj_where at;
		const struct bkobj_where *at_p = admin_chunk_place(a, hash, &at);
		int rc = a->bk ? bkobj_get(a->bk, hash, at_p, &r, why) : -ENOENT;
		*len = r.plain_len;
		return rc;
	}
	size_t olen = 0;
	int rc = a->store ? store_read_object(a->store, hash, admin_obj_buf, admin_obj_cap, &olen)
			  : -ENOENT;
	if (rc == -EIO || rc == -EFBIG) { /* store_read_object's verdicts on the header */
		*why = rc == -EIO ? "malformed header or length" : "larger than a chunk's object can be";
		return -EBADMSG;
	}
	if (rc != 0)
		return rc;
	rc = store_object_check(hash, admin_obj_buf, olen, plain, cap, len, why);
	return rc == -EIO ? -EBADMSG : rc;
}

struct admin_verify {
	struct admin *a;
	uint64_t ok, bad, skipped, done, total;
	uint64_t unreadable; /* copies that could not be read: no verdict on them */
	uint64_t not_checked; /* chunks after the one BACKING became unreachable at */
	bool unreachable;     /* BACKING did not answer the reachability test */
	char unreachable_why[160];
	uint64_t cache_copies, backing_copies; /* verified good */
	uint64_t reput;       /* damaged on BACKING, good in the cache: queued again (U13) */
	uint64_t reput_not;   /* the same, but the daemon did not queue it */
	char *buf;
	size_t cap;
	bool first_bad;
	/* a node of a shared catalog: its local rows count no references (those
	 * are PostgreSQL's), so a row at count 0 is verified, not skipped */
	bool shared;
};

static void admin_verify_report(struct admin_verify *v, const uint8_t hash[CAT_HASH_LEN],
				const char *where, const char *problem, const char *why)
{
	struct admin *a = v->a;
	char hex[HASH_HEX_LEN + 1], path[PATH_MAX], label[PATH_MAX + CAT_NAME_MAX + 2];
	hash_to_hex(hash, hex);
	struct aq_user *users = NULL;
	size_t n = 0;
	aq_chunk_users(a->aq, hash, &users, &n);
	admin_progress_end();
	if (a->json) {
		printf("%s\n  {\"chunk\": \"%s\", \"where\": \"%s\", \"problem\": \"%s\", \"why\": ",
		       v->first_bad ? "" : ",", hex, where, problem);
		admin_json_str(stdout, why ? why : problem);
		printf(", \"files\": [");
	} else {
		printf("%s chunk %s in %s (%s)\n", problem, hex, where, why ? why : problem);
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

static int admin_reach_stop(void *arg, const char *name)
{
	(void)arg;
	(void)name;
	return 1; /* one name is an answer */
}

/* One cheap BACKING call after a copy it could not give: its root listed
 * up to its first name. 0 if BACKING answers, else -errno. */
static int admin_backing_reachable(struct admin *a)
{
	int rc = a->bk ? backing_list(a->bk, "", admin_reach_stop, NULL) : -ENODEV;
	return rc == 0 || rc == 1 ? 0 : rc;
}

/* Checks one copy; a failure is re-checked against the catalog (the daemon
 * may have evicted or removed it meanwhile) before it counts: a damaged copy
 * (admin_chunk_read's -EBADMSG, or a wrong length) as bad, a copy that could
 * not be read (BACKING away, a read error: bkobj.h B1) as unreadable, which
 * says nothing of its bytes. */
static int admin_verify_copy(struct admin_verify *v, const uint8_t hash[CAT_HASH_LEN],
			     uint64_t plain_len, enum admin_where where)
{
	size_t got = 0;
	const char *why = NULL;
	int rc = admin_chunk_read(v->a, where, hash, v->buf, v->cap, &got, &why);
	if (rc == 0 && got == plain_len)
		return 0;
	if (rc == -ENOMEM)
		return rc;
	struct cat_chunk_where w;
	if (cat_chunk_where(v->a->cat, hash, &w) != 0 || (w.refcount == 0 && !v->shared) ||
	    (where == ADMIN_IN_CACHE ? !w.cached : !w.uploaded))
		return 1; /* gone or moved meanwhile: nothing to report */
	const char *wname = where == ADMIN_IN_CACHE ? "cache" : "BACKING";
	if (rc != 0 && rc != -ENOENT && rc != -EBADMSG) {
		char reason[128];
		snprintf(reason, sizeof(reason), "could not be read: %s", strerror(-rc));
		v->unreadable++;
		admin_verify_report(v, hash, wname, "unreadable", reason);
		int reach = where == ADMIN_ON_BACKING ? admin_backing_reachable(v->a) : 0;
		if (reach != 0) { /* BACKING gone: stop, not a timeout per chunk */
			v->unreachable = true;
			snprintf(v->unreachable_why, sizeof(v->unreachable_why), "%s; listing its root: %s",
				 strerror(-rc), strerror(-reach));
			return -EHOSTUNREACH;
		}
		return 1;
	}
	v->bad++;
	char reason[256];
	snprintf(reason, sizeof(reason), "%s",
		 rc == 0 ? "wrong length" : rc == -ENOENT ? "no object" : why ? why : "damaged");
	if (rc == -EBADMSG && where == ADMIN_ON_BACKING) { /* bkobj.h B4: name the path */
		char rel[160];
		struct bkobj_where at;
		bkobj_where_name(hash, admin_chunk_place(v->a, hash, &at), rel, sizeof(rel));
		snprintf(reason, sizeof(reason), "%s: %s", rel, why ? why : "damaged");
	}
	admin_verify_report(v, hash, wname, rc == -ENOENT ? "missing" : "corrupt", reason);
	return 2; /* a verdict: the copy is bad */
}

/* upload.h U13: BACKING's copy bad, the cache's verified good (SHA-256):
 * the daemon re-checks the cache's copy, makes the chunk dirty again and
 * queues its put. Offline (no daemon answers) it is only said. */
static void admin_verify_reput(struct admin_verify *v, const uint8_t hash[CAT_HASH_LEN])
{
	char hex[2 * CAT_HASH_LEN + 1], req[96], msg[256] = "";
	for (int i = 0; i < CAT_HASH_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", hash[i]);
	snprintf(req, sizeof(req), "reput %s", hex);
	int rc = v->shared ? EOPNOTSUPP : admin_ctl(v->a, req, NULL, NULL, msg, sizeof(msg));
	if (rc == 0) {
		v->reput++;
		admin_err("verify: chunk %s: BACKING's copy is bad and the cache's is good: queued to"
			  " be put again from the cache (kept in the cache until then)", hex);
		return;
	}
	v->reput_not++;
	if (v->shared)
		admin_err("verify: chunk %s: BACKING's copy is bad and the cache's is good: not put"
			  " again (not done on a node of a shared catalog, -o meta=)", hex);
	else if (rc < 0)
		admin_err("verify: chunk %s: BACKING's copy is bad and the cache's is good: not put"
			  " again (no daemon answers: mount and run verify again)", hex);
	else
		admin_err("verify: chunk %s: BACKING's copy is bad: not put again: %s", hex, msg);
}

static int admin_verify_one(void *arg, const uint8_t hash[CAT_HASH_LEN], uint64_t plain_len,
			    uint8_t codec, int64_t stored_len, uint64_t refcount)
{
	struct admin_verify *v = arg;
	admin_progress("verify", ++v->done, v->total);
	struct cat_chunk_where w;
	if (stored_len < 0 || (refcount == 0 && !v->shared) ||
	    cat_chunk_where(v->a->cat, hash, &w) != 0) {
		v->skipped++; /* being written, or about to go */
		return 0;
	}
	if (v->cap < plain_len || !v->buf) {
		char *nb = realloc(v->buf, plain_len ? plain_len : 1);
		if (!nb)
			return -ENOMEM;
		v->buf = nb;
		v->cap = plain_len ? plain_len : 1;
	}
	int bad = 0, rc = 0;
	if (w.cached && (rc = admin_verify_copy(v, hash, plain_len, ADMIN_IN_CACHE)) < 0)
		return rc;
	bad |= rc;
	bool cache_good = w.cached && rc == 0;
	if (w.uploaded && (rc = admin_verify_copy(v, hash, plain_len, ADMIN_ON_BACKING)) < 0) {
		if (v->unreachable) /* this chunk is counted unreadable; those after it: */
			v->not_checked = v->total > v->done ? v->total - v->done : 0;
		return rc;
	}
	if (rc == 2 && cache_good)
		admin_verify_reput(v, hash);
	bad |= rc;
	if (!bad) {
		v->ok++;
		v->cache_copies += w.cached;
		v->backing_copies += w.uploaded;
	}
	return 0;
}

int admin_cmd_verify(struct admin *a)
{
	if (a->npos > 1) {
		admin_err("verify: expected at most one GEN");
		return ADMIN_USAGE;
	}
	struct admin_verify v = { .a = a, .first_bad = true, .shared = admin_shared(a) };
	struct aq_chunk *chunks = NULL;
	size_t n = 0;
	int rc = 0;
	if (a->npos == 1 && admin_shared(a)) {
		admin_err("verify GEN: %s is a node of a shared catalog: which chunks a generation"
			  " names is in PostgreSQL, not in this node's catalog file; verify without"
			  " GEN checks every chunk object this node holds or uploaded",
			  a->mount[0] ? a->mount : a->cache);
		return ADMIN_UNSUPPORTED;
	}
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
	free(admin_obj_buf);
	admin_obj_buf = NULL;
	admin_obj_cap = 0;
	if (a->json)
		printf("%s], \"chunks_ok\": %" PRIu64 ", \"chunks_bad\": %" PRIu64
		       ", \"chunks_unreadable\": %" PRIu64 ", \"chunks_skipped\": %" PRIu64
		       ", \"chunks_not_checked\": %" PRIu64 ", \"backing_unreachable\": %s"
		       ", \"cache_copies_ok\": %" PRIu64 ", \"backing_copies_ok\": %" PRIu64
		       ", \"backing_copies_put_again\": %" PRIu64 "}\n",
		       v.first_bad ? "" : "\n ", v.ok, v.bad, v.unreadable, v.skipped, v.not_checked,
		       v.unreachable ? "true" : "false", v.cache_copies, v.backing_copies, v.reput);
	else
		printf("chunks_ok %" PRIu64 "\nchunks_bad %" PRIu64 "\nchunks_unreadable %" PRIu64
		       "\nchunks_skipped %" PRIu64 "\nchunks_not_checked %" PRIu64
		       "\ncache_copies_ok %" PRIu64 "\nbacking_copies_ok %" PRIu64
		       "\nbacking_copies_put_again %" PRIu64 "\n",
		       v.ok, v.bad, v.unreadable, v.skipped, v.not_checked, v.cache_copies,
		       v.backing_copies, v.reput);
	if (v.unreachable) {
		admin_err("verify: BACKING %s unreachable: %" PRIu64 " chunk%s not checked (%s); run"
			  " verify again once it answers", a->backing, v.not_checked,
			  v.not_checked == 1 ? "" : "s", v.unreachable_why);
		if (v.bad) /* corruption found before that outranks the outage */
			admin_err("verify: %" PRIu64 " cop%s found bad before BACKING went away",
				  v.bad, v.bad == 1 ? "y" : "ies");
		return v.bad ? ADMIN_PROBLEM : ADMIN_UNREACHABLE;
	}
	if (rc != 0) {
		admin_err("verify: stopped: %s", strerror(-rc));
		return ADMIN_PROBLEM;
	}
	if (v.unreadable)
		admin_err("verify: %" PRIu64 " cop%s could not be read (BACKING away or failing?):"
			  " not verified; run verify again once it answers",
			  v.unreadable, v.unreadable == 1 ? "y" : "ies");
	return v.bad || v.unreadable ? ADMIN_PROBLEM : ADMIN_OK;
}

int admin_cmd_check(struct admin *a)
{
	if (a->npos != 0) {
		admin_err("check: takes no argument");
		return ADMIN_USAGE;
	}
	int rc;
	if (admin_shared(a)) { /* the daemon checks PostgreSQL's tables and its cache rows */
		char msg[512] = "";
		rc = admin_ctl(a, "check", NULL, NULL, msg, sizeof(msg));
		if (rc != 0) {
			admin_err("check: %s", rc > 0 ? msg : strerror(-rc));
			return rc < 0 ? ADMIN_NO_DAEMON : ADMIN_PROBLEM;
		}
	} else if ((rc = cat_check(a->cat)) != 0) { /* with G1–G3 of the generations */
		admin_err("check: the catalog has problems (see the lines above)");
		return ADMIN_PROBLEM;
	}
	if (a->json)
		printf("{\"catalog\": \"ok\"}\n");
	else
		printf("catalog ok\n");
	return ADMIN_OK;
}
