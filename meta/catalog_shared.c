/* catalog_shared — the catalog's shared engine: one struct cat over a
 * namespace in PostgreSQL that several nodes share (issue 18,
 * docs/MULTINODE.md "The shared engine").
 *
 * cat_open_shared opens this node's local SQLite catalog with cat_open_node (it
 * keeps the [node] state: cache objects, the upload queue, the pending
 * extents of this node's writers) and beside it two connections to the
 * shared catalog: one for the FUSE path, whose every namespace change runs
 * in one pgns transaction fenced by this node's lease, and one for the
 * lease alone, so that a slow transaction on the first never starves the
 * renewal. The namespace calls of catalog.h reach this file through one
 * dispatch line at the top of each (catalog_shared.h); the data calls and
 * the generation calls have their own files.
 *
 * Invariants:
 *  S1. A handle is wholly shared or wholly alone: cat->shared is set once,
 *      by cat_open_shared, after both connections are open, the schema
 *      exists and this node's lease is registered; cat_close clears it
 *      before closing the local catalog.
 *  S2. In shared mode nothing writes the local namespace tables (inodes,
 *      dirents, extents, generations): inode numbers are PostgreSQL's, and
 *      every namespace change is a pgns transaction fenced by this node's
 *      lease (pgns.h N4) on the FUSE connection.
 *  S3. The lease connection runs only lease.c's calls on this node's row
 *      (register, renew, sweep, release); its struct lease and the FUSE
 *      connection's carry the same node id.
 *  S4. This node never removes an object from BACKING on its own: the local
 *      catalog is opened without the zero-count sweep (cat_open_node), whose
 *      reclaim would queue removals of shared objects; removing them is the
 *      cluster's reclaim duty (pgns_reclaim_begin/end).
 *  S5. The catalog id is the shared catalog's (ns_meta), read once at open:
 *      every node over one database names the same catalog to BACKING.
 *  S6. A sweep (cat_lease_sweep) expires the nodes past their lease, then
 *      settles every expired node not settled yet (lease.h L7), whoever
 *      expired it, up to CATSH_SWEEP_MAX a sweep, oldest first: it adopts
 *      what the node held that this cache has, then runs pggen_node_lost,
 *      whose transaction claims the node (settled once, by one node). A
 *      failure is logged and leaves the node to the next sweep. It then
 *      re-checks a batch of lost generations (pggen.h X10), adopting first
 *      the chunks of them this cache holds whose holder is gone, then
 *      (given a BACKING check) marking uploaded those whose object BACKING
 *      has whole (X11, a bounded batch: catshd_adopt_backing), and
 *      queues the manifests of what was settled or found whole again.
 *  S7. cat_close (after the daemon stopped its uploader) releases this
 *      node's lease as gone only when it holds no chunk not uploaded, else
 *      as expired, to be settled by the next sweep (lease.h L9).
 *  S17. A node opened by the daemon that holds its cache's lock
 *      (cfg->cache_locked) registers with its local catalog's random id as
 *      its cache id, and, before cat_open_shared returns (so before the
 *      daemon serves), expires the earlier nodes of the same cache and
 *      settles each exactly as S6 settles a dead node (catsh_settle:
 *      adoption, then pggen_node_lost's claim), then queues the manifests
 *      of what was settled as a sweep does (lease.h L10). A failure is
 *      logged and leaves them to the sweeps (S6): the mount goes on.
 *  S18. Before S17 settles them, and whether they are settled already or
 *      not (another node's sweep may have, lost marks and all), the chunks
 *      PostgreSQL says an earlier node of this cache held and BACKING lacks
 *      (pgns_unuploaded_of_cache) are taken back from this cache: one the
 *      local catalog calls cached is kept as S6 keeps it; one it forgot
 *      (its WAL lost with a crash: review 47 F4) is looked for in the
 *      cache's store (cfg->cache_store), and taken back only if its object
 *      reads back whole, its plain bytes' SHA-256 equal to the hash, as a
 *      cached, dirty row with its upload queued (catalog_shared_data.c
 *      S17). Then this node adopts them all (pggen_adopt, holder no live
 *      node), so the settlement finds no chunk of the dead node to lose,
 *      and a generation lost before is lost no more at the next re-check
 *      (pggen.h X10), as with a plain remount whose catalog kept its rows.
 *      An object that is absent, or fails its check, is never taken back
 *      and never removed: a damaged one is logged, naming it, and the
 *      saves naming it stay lost. A failure is logged; the mount goes on
 *      (the sweeps adopt what the local catalog calls cached, X10).
 *  S19. The cache id S17 registers is made in one place, catsh_cache_id:
 *      "CATALOG_ID@HOST:DEV:INO", the local catalog's random id, this
 *      host's name and the (st_dev, st_ino) of the CACHE/lock the daemon
 *      holds. Only the same cache directory on the same machine has all
 *      three: a copy (cp -a, rsync, a baked image, a restored snapshot) has
 *      the catalog id but another lock inode or host, so it never settles
 *      the live original (review 49 F1). What changes the lock's inode or
 *      the host's name for the same cache (the lock file removed, a
 *      container whose device number moves) only loses the fast
 *      settlement: the sweeps settle the earlier node once its lease runs
 *      out (S6). Rows registered by daemons before S19 (the bare catalog
 *      id) match no identity, so they are settled by the sweeps.
 *  S20. The adoption of S18 makes a lost generation whole at mount, before
 *      this node's first sweep (a term later, lease.h L4). So, before it,
 *      every other node already expired and not settled (lease.h L7: any
 *      node's work, whoever expired it; none is expired here) is settled
 *      as S6 settles it, so the saves only such a node held are lost
 *      first; else a keep pass (fs/gen.c) would count them as newer, not
 *      lost, and end the save S18 made whole in their favour, then lose
 *      them too at the next sweep (t_keep2: a node away with its uploads
 *      queued, lease.h L9). After the adoption, a batch of lost
 *      generations is re-checked (X10, as S6 does), so one made whole is
 *      lost no more, and its manifest queued, at mount. */
#define _GNU_SOURCE
#include "catalog_shared.h"
#include "catalog_shared_reclaim.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "catalog_internal.h"
#include "catalog_shared_data.h"
#include "catalog_shared_gen.h"
#include "hash.h"
#include "lease.h"
#include "log.h"
#include "manifest_shared.h"
#include "pggen.h"
#include "pgns.h"
#include "store.h"

struct cat_shared {
	struct pg *pg;       /* the FUSE path's connection */
	struct pg *lease_pg; /* the lease's own connection (S3) */
	struct lease fence;  /* this node's lease on pg: pgns fences with it */
	struct lease renew;  /* the same node on lease_pg: renew, sweep, release */
	struct pgns ns;
	char catalog_id[33]; /* S5 */
	pthread_rwlock_t pins; /* catalog_shared_data.c S11: evictions' pins, releases' unpins */
	uint64_t lost_after;   /* S6: where the next re-check of lost generations starts */
	struct csd_backing_look backing; /* S6, pggen.h X11: the look on BACKING between sweeps */
	struct csd_absent_set absent; /* catalog_shared_data.c S12 */
	struct csd_again_set again;   /* catalog_shared_data.c S16 */
	bool requeue; /* S8: a rename's queueing failed or its outcome is unknown */
};

/* Nodes one sweep settles (S6: more are the next sweep's, lease.h L7). */
#define CATSH_SWEEP_MAX 64
/* Lost generations one sweep re-checks (S6, pggen.h X10). */
#define CATSH_RECHECK_MAX 32
/* Hashes per round trip when adopting a dead node's chunks. */
#define CATSH_ADOPT_BATCH 256

/* ---- opening ---- */

/* url with "user:password@" shown as "user@", as pg.c shows it (P3). */
static void catsh_url_shown(const char *url, char *out, size_t size)
{
	snprintf(out, size, "%s", url);
	char *start = strstr(out, "://");
	if (!start)
		return;
	start += 3;
	char *at = strchr(start, '@');
	char *slash = strchr(start, '/');
	if (!at || (slash && slash < at))
		return;
	char *colon = memchr(start, ':', (size_t)(at - start));
	if (colon)
		memmove(colon, at, strlen(at) + 1);
}

/* A libpq URL that libpq itself can parse: else -EINVAL with the reason,
 * before any connection is tried. */
static int catsh_url_check(const char *url, char *err, size_t err_size)
{
	char shown[512];
	catsh_url_shown(url, shown, sizeof(shown));
	if (strncmp(url, "postgresql://", 13) != 0 && strncmp(url, "postgres://", 11) != 0) {
		snprintf(err, err_size,
			 "catalog %s: not a PostgreSQL URL (postgresql://user@host:port/database)",
			 shown);
		return -EINVAL;
	}
	char *why = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &why);
	if (!opts) {
		size_t n = why ? strcspn(why, "\n") : 0;
		snprintf(err, err_size, "catalog %s: not a valid PostgreSQL URL: %.*s", shown, (int)n,
			 why ? why : "out of memory");
		PQfreemem(why);
		return -EINVAL;
	}
	PQconninfoFree(opts);
	return 0;
}

/* The database cannot be reached: pg.h's -ENOTCONN is, at mount,
 * catalog.h's -EHOSTUNREACH. */
static int catsh_open_errno(int rc)
{
	return rc == -ENOTCONN ? -EHOSTUNREACH : rc;
}

/* Releases what catsh_connect made (the lease first, while its connection
 * is still open); holds: this node holds chunks not uploaded (lease.h L9). */
static void catsh_free(struct cat_shared *sh, bool holds)
{
	if (!sh)
		return;
	if (sh->renew.node_id != 0 && lease_release(&sh->renew, holds) != 0)
		log_warn("catalog %s: node %" PRIu64 " could not release its lease: the other"
			 " nodes expire it when it runs out", pg_name(sh->lease_pg), sh->renew.node_id);
	pg_close(sh->pg);
	pg_close(sh->lease_pg);
	pthread_rwlock_destroy(&sh->pins);
	csd_absent_free(&sh->absent);
	csd_again_free(&sh->again);
	free(sh);
}

/* S19: "CATALOG_ID@HOST:DEV:INO" of the cache whose lock_fd (CACHE/lock)
 * this daemon holds; 0, or a negative errno (logged: then the node names
 * no cache). */
static int catsh_cache_id(struct cat *cat, int lock_fd, char *out, size_t size)
{
	char id[64], host[HOST_NAME_MAX + 1];
	struct stat sb;
	int rc = cat_catalog_id(cat, id, sizeof(id));
	if (rc == 0 && fstat(lock_fd, &sb) != 0)
		rc = -errno;
	if (rc == 0 && gethostname(host, sizeof(host)) != 0)
		rc = -errno;
	host[sizeof(host) - 1] = '\0';
	if (rc == 0 && snprintf(out, size, "%s@%s:%ju:%ju", id, host, (uintmax_t)sb.st_dev,
				(uintmax_t)sb.st_ino) >= (int)size)
		rc = -ENAMETOOLONG;
	if (rc)
		log_warn("catalog %s: this cache's identity could not be made (%s): its earlier"
			 " daemons are settled by the sweeps, not at mount (lease.h L10)",
			 cat->path, strerror(-rc));
	return rc;
}

#define CATSH_CACHE_ID_MAX (64 + HOST_NAME_MAX + 48)

/* Both connections, the schema, this node's lease and the catalog id. */
static int catsh_connect(const struct cat_shared_cfg *cfg, const char *cache_id, uint32_t root_uid,
			 uint32_t root_gid, struct cat_shared *sh, char *err, size_t err_size)
{
	size_t nstmts;
	const struct pg_stmt *stmts = pgns_stmts_all(&nstmts);
	/* a renewal that cannot get through for a whole lease has failed anyway */
	unsigned lease_timeout = cfg->timeout_ms < cfg->lease_ms ? cfg->timeout_ms : cfg->lease_ms;
	int rc = pg_open(cfg->url, cfg->timeout_ms, stmts, nstmts, &sh->pg, err, err_size);
	if (rc == 0)
		rc = pg_open(cfg->url, lease_timeout, stmts, nstmts, &sh->lease_pg, err, err_size);
	if (rc)
		return catsh_open_errno(rc);
	rc = lease_schema(sh->pg);
	if (rc == 0)
		rc = pgns_schema(sh->pg, root_uid, root_gid);
	if (rc) {
		snprintf(err, err_size, "catalog %s: cannot create the shared tables: %s",
			 pg_name(sh->pg), strerror(-rc));
		return catsh_open_errno(rc);
	}
	sh->renew = (struct lease){ .pg = sh->lease_pg, .first = 0 };
	rc = lease_register_cache(&sh->renew, cfg->node_name ? cfg->node_name : "", cache_id,
				  cfg->lease_ms);
	if (rc) {
		snprintf(err, err_size, "catalog %s: cannot register this node: %s", pg_name(sh->pg),
			 strerror(-rc));
		return catsh_open_errno(rc);
	}
	sh->fence = (struct lease){ .pg = sh->pg, .first = 0, .node_id = sh->renew.node_id,
				    .lease_ms = sh->renew.lease_ms };
	sh->ns = (struct pgns){ .pg = sh->pg, .lease = &sh->fence, .first = lease_nstmts,
				.first_gen = lease_nstmts + pgns_nstmts };
	rc = pgns_catalog_id(&sh->ns, sh->catalog_id, sizeof(sh->catalog_id));
	if (rc)
		snprintf(err, err_size, "catalog %s: cannot read the shared catalog's id: %s",
			 pg_name(sh->pg), strerror(-rc));
	return catsh_open_errno(rc);
}

static void catsh_take_over(struct cat *cat, struct store *store, const char *cache_id);

int cat_open_shared(const char *local_path, const struct cat_shared_cfg *cfg,
		    uint32_t root_uid, uint32_t root_gid, cat_reclaim_fn reclaim,
		    void *reclaim_arg, struct cat **out, char *err, size_t err_size)
{
	*out = NULL;
	if (err_size > 0)
		err[0] = '\0';
	if (!cfg || !cfg->url || cfg->lease_ms == 0) {
		snprintf(err, err_size, "catalog: a shared catalog needs a URL and a lease term");
		return -EINVAL;
	}
	int rc = catsh_url_check(cfg->url, err, err_size);
	if (rc)
		return rc;
	struct cat *cat = NULL;
	rc = cat_open_node(local_path, root_uid, root_gid, reclaim, reclaim_arg, &cat);
	if (rc) { /* -EMEDIUMTYPE: catalog.c invariant 9 logged the one line */
		if (rc != -EMEDIUMTYPE)
			snprintf(err, err_size, "catalog %s: cannot open this node's local catalog: %s",
				 local_path, strerror(-rc));
		return rc;
	}
	/* S17, S19: the cache's identity (cat->shared not set yet) */
	char cache_id[CATSH_CACHE_ID_MAX] = "";
	if (cfg->cache_locked && catsh_cache_id(cat, cfg->cache_lock_fd, cache_id, sizeof(cache_id)) != 0)
		cache_id[0] = '\0'; /* logged: the node names no cache, the sweeps settle */
	struct cat_shared *sh = calloc(1, sizeof(*sh));
	if (sh)
		pthread_rwlock_init(&sh->pins, NULL);
	rc = sh ? catsh_connect(cfg, cache_id, root_uid, root_gid, sh, err, err_size) : -ENOMEM;
	if (rc) {
		if (rc == -ENOMEM && !err[0])
			snprintf(err, err_size, "catalog %s: out of memory", local_path);
		catsh_free(sh, false); /* a node that never served holds nothing */
		cat_close(cat);
		return rc;
	}
	cat->shared = sh; /* S1 */
	if (cache_id[0])
		catsh_take_over(cat, cfg->cache_store, cache_id);
	*out = cat;
	return 0;
}

/* S7: whether this node leaves chunks not on BACKING that it holds (its
 * uploads left queued). Not known (the database away): it may, so it is
 * settled as if it did (a settlement that finds no such chunk loses
 * nothing; it holds the OPEN generations this node opened that no other
 * node writes, pggen.h X2, which its unmount mostly decided already, X7). */
static bool catsh_holds_unuploaded(struct cat_shared *sh)
{
	uint8_t one[1][CAT_HASH_LEN];
	size_t n = 0;
	int rc = pgns_unuploaded_of(&sh->ns, sh->renew.node_id, NULL, one, 1, &n);
	if (rc)
		log_warn("catalog %s: node %" PRIu64 " cannot tell whether it leaves chunks not"
			 " uploaded: %s; it leaves as if it did", pg_name(sh->pg), sh->renew.node_id,
			 strerror(-rc));
	else if (n > 0)
		log_warn("catalog %s: node %" PRIu64 " leaves chunks not on BACKING (its uploads"
			 " left queued): the next sweep settles it as a lost node (lease.h L9)",
			 pg_name(sh->pg), sh->renew.node_id);
	return rc != 0 || n > 0;
}

void catsh_close(struct cat *cat)
{
	struct cat_shared *sh = cat->shared;
	cat->shared = NULL; /* S1: what remains is the local catalog */
	catsh_free(sh, catsh_holds_unuploaded(sh));
	cat_close(cat);
}

/* ---- shared-only calls of catalog.h (alone: nothing to do) ---- */

bool cat_is_shared(const struct cat *cat)
{
	return cat->shared != NULL;
}

uint64_t cat_node_id(const struct cat *cat)
{
	return cat->shared ? cat->shared->renew.node_id : 0;
}

unsigned cat_lease_ms(const struct cat *cat)
{
	return cat->shared ? cat->shared->renew.lease_ms : 0;
}

void cat_stopping(struct cat *cat)
{
	if (!cat || !cat->shared)
		return;
	pg_stopping(cat->shared->pg);
	pg_stopping(cat->shared->lease_pg);
}

bool cat_pg_stats(const struct cat *cat, struct pg_stats *out)
{
	if (!cat->shared)
		return false;
	pg_get_stats(cat->shared->pg, out);
	return true;
}

int cat_shared_path(struct cat *cat, uint64_t ino, char *buf, size_t size)
{
	if (!cat->shared)
		return -ENOSYS; /* alone: admin_query.h's aq_path reads the file */
	return pggen_path(&cat->shared->ns, ino, buf, size);
}

struct pgns *cat_shared_ns(struct cat *cat)
{
	assert(cat->shared);
	return &cat->shared->ns;
}

void cat_shared_requeue_later(struct cat *cat)
{
	__atomic_store_n(&cat->shared->requeue, true, __ATOMIC_RELEASE);
}

int cat_writing(struct cat *cat, uint64_t ino, bool open)
{
	return cat_writing_state(cat, ino, open, NULL, NULL);
}

int cat_writing_state(struct cat *cat, uint64_t ino, bool open, uint64_t *gen_id, int *gen_state)
{
	if (gen_id)
		*gen_id = 0;
	if (gen_state)
		*gen_state = -1;
	if (!cat->shared)
		return 0;
	return pggen_writing_gen(&cat->shared->ns, ino, open, gen_id, gen_state);
}

int cat_writing_resume(struct cat *cat, uint64_t ino)
{
	if (!cat->shared)
		return 0;
	return pggen_writing_resume(&cat->shared->ns, ino);
}

int cat_writing_park(struct cat *cat, uint64_t ino)
{
	if (!cat->shared)
		return 0;
	return pggen_writing_park(&cat->shared->ns, ino);
}

int cat_writing_unpark(struct cat *cat, uint64_t ino, uint64_t *gen_id, int *gen_state)
{
	*gen_id = 0;
	*gen_state = -1;
	if (!cat->shared)
		return 0;
	return pggen_writing_unpark(&cat->shared->ns, ino, gen_id, gen_state);
}

int cat_file_failed(struct cat *cat, uint64_t ino)
{
	if (!cat->shared)
		return 0;
	return pggen_failed(&cat->shared->ns, ino);
}

/* On the FUSE connection (S3 keeps the lease one for the renewal): the
 * duty's holder works on that connection anyway, fenced per transaction. */
int cat_duty_take(struct cat *cat, const char *name, unsigned term_ms, bool *taken)
{
	*taken = true;
	if (!cat->shared)
		return 0;
	return lease_duty_take(&cat->shared->fence, name, term_ms, taken);
}

int cat_duty_drop(struct cat *cat, const char *name)
{
	if (!cat->shared)
		return 0;
	return lease_duty_drop(&cat->shared->fence, name);
}

int cat_lease_renew(struct cat *cat)
{
	if (!cat->shared)
		return 0;
	return lease_renew(&cat->shared->renew);
}

/* Whether this node's cache holds the written object of chunk hash (the
 * local chunks table: a cached row with its stored length set). */
static int catsh_cached(struct cat *cat, sqlite3_stmt *st, const uint8_t hash[CAT_HASH_LEN])
{
	sqlite3_reset(st);
	sqlite3_bind_blob(st, 1, hash, CAT_HASH_LEN, SQLITE_STATIC);
	int src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		return 1;
	if (src == SQLITE_DONE)
		return 0;
	log_error("catalog %s: cannot look for a cached chunk: %s", cat->path,
		  sqlite3_errmsg(cat->db));
	return -EIO;
}

/* Of hashes[0..n), which this node's cache holds as the local catalog says
 * (have[i]). */
static int catsh_which_cached(struct cat *cat, const uint8_t (*hashes)[CAT_HASH_LEN], size_t n,
			      bool *have)
{
	static const char sql[] =
		"SELECT 1 FROM chunks WHERE hash = ?1 AND cached = 1 AND stored_len IS NOT NULL";
	sqlite3_stmt *st = NULL;
	cat_lock(cat);
	int rc = sqlite3_prepare_v2(cat->db, sql, -1, &st, NULL) == SQLITE_OK ? 0 : -EIO;
	if (rc)
		log_error("catalog %s: cannot look for cached chunks: %s", cat->path,
			  sqlite3_errmsg(cat->db));
	for (size_t i = 0; i < n && rc == 0; i++) {
		int got = catsh_cached(cat, st, hashes[i]);
		rc = got < 0 ? got : 0;
		have[i] = got > 0;
	}
	sqlite3_finalize(st);
	cat_unlock(cat);
	return rc;
}

/* S18: whether store holds a whole object of chunk hash: 0 once its plain
 * bytes read back and their SHA-256 is hash (*info: its header), -ENOENT
 * if it has none, -EIO if it is damaged (the store logs what it finds
 * wrong, this the verdict), another errno if there is no verdict. */
static int catsh_object_whole(struct cat *cat, struct store *store,
			      const uint8_t hash[CAT_HASH_LEN], struct store_object_info *info)
{
	if (!store_has(store, hash))
		return -ENOENT;
	struct store_chunk chunk = { 0 };
	int rc = store_stat(store, hash, info);
	if (rc == 0)
		rc = store_load(store, hash, info->plain_len, &chunk);
	if (rc == 0) {
		uint8_t got[HASH_LEN];
		hash_sha256(chunk.plain, chunk.len, got);
		if (chunk.len != info->plain_len || memcmp(got, hash, HASH_LEN) != 0)
			rc = -EIO;
		store_chunk_free(&chunk);
	}
	if (rc && rc != -ENOENT) {
		char hex[2 * CAT_HASH_LEN + 1];
		cat_hex(hash, hex);
		log_error("catalog %s: chunk %s: its object in this cache %s: not taken back (the"
			  " saves naming it stay lost until BACKING or a live node has its bytes;"
			  " the object is left where it is)", pg_name(cat->shared->pg), hex,
			  rc == -EIO ? "does not pass SHA-256" : strerror(-rc));
	}
	return rc;
}

/* S18: of hashes[0..n) not cached as the local catalog says (have[i]
 * false), those whose object store has whole are taken back (have[i] set;
 * *taken counts them, *absent those it has none of). Only the local
 * catalog's failure stops it. */
static int catsh_take_back_missing(struct cat *cat, struct store *store,
				   const uint8_t (*hashes)[CAT_HASH_LEN], size_t n, bool *have,
				   size_t *taken, size_t *absent)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct store_object_info info;
		if (have[i])
			continue;
		int orc = catsh_object_whole(cat, store, hashes[i], &info);
		*absent += orc == -ENOENT;
		if (orc == 0)
			rc = catshd_take_back(cat, hashes[i], info.plain_len, info.codec,
					      info.stored_len);
		have[i] = orc == 0 && rc == 0;
		*taken += have[i];
	}
	return rc;
}

/* Of hashes[0..n), keeps in place those this node's cache holds; *kept
 * says how many. With store (S18), those the local catalog forgot are taken
 * back from it first, if whole (*taken, *absent: as catsh_take_back_missing). */
static int catsh_keep_cached(struct cat *cat, struct store *store, uint8_t (*hashes)[CAT_HASH_LEN],
			     size_t n, size_t *kept, size_t *taken, size_t *absent)
{
	*kept = 0;
	bool *have = calloc(n ? n : 1, sizeof(*have));
	if (!have)
		return -ENOMEM;
	int rc = catsh_which_cached(cat, (const uint8_t(*)[CAT_HASH_LEN])hashes, n, have);
	if (rc == 0 && store)
		rc = catsh_take_back_missing(cat, store, (const uint8_t(*)[CAT_HASH_LEN])hashes, n,
					     have, taken, absent);
	for (size_t i = 0; i < n && rc == 0; i++)
		if (have[i])
			memmove(hashes[(*kept)++], hashes[i], CAT_HASH_LEN);
	free(have);
	return rc;
}

/* A batch of the chunks to adopt, by hash after `after`: dead's not
 * uploaded (X2), or with dead 0 those of lost generations whose holder is
 * gone (X10). */
static int catsh_adoptable(struct pgns *ns, uint64_t dead, const uint8_t *after,
			   uint8_t (*batch)[CAT_HASH_LEN], size_t *n)
{
	if (dead)
		return pgns_unuploaded_of(ns, dead, after, batch, CATSH_ADOPT_BATCH, n);
	return pggen_orphans(ns, after, batch, CATSH_ADOPT_BATCH, n);
}

/* X2 (pggen.h), before the dead node's generations are judged: this node
 * takes over holding the chunks dead held, had not uploaded, and this
 * node's cache has too (an HSDP replica wrote the same bytes here), so
 * that the generations naming them are not lost. Asks PostgreSQL for dead's
 * chunks (few: its upload backlog) rather than sending this whole cache.
 * dead 0: the chunks of lost generations whose holder is gone (X10), which
 * any live node may hold, not only the one that settled their node. */
static int catsh_adopt(struct cat *cat, uint64_t dead, size_t *adopted_out)
{
	struct pgns *ns = &cat->shared->ns;
	uint8_t(*batch)[CAT_HASH_LEN] = calloc(CATSH_ADOPT_BATCH, CAT_HASH_LEN);
	uint8_t after[CAT_HASH_LEN];
	bool from_start = true;
	size_t n = 0, total = 0;
	int rc = batch ? 0 : -ENOMEM;
	do {
		size_t kept = 0, adopted = 0;
		if (rc == 0)
			rc = catsh_adoptable(ns, dead, from_start ? NULL : after, batch, &n);
		if (rc == 0 && n > 0) {
			memcpy(after, batch[n - 1], CAT_HASH_LEN); /* before the filter moves rows */
			from_start = false;
			rc = catsh_keep_cached(cat, NULL, batch, n, &kept, NULL, NULL);
		}
		if (rc == 0 && kept > 0)
			rc = pggen_adopt(ns, dead, (const uint8_t(*)[CAT_HASH_LEN])batch, kept, &adopted);
		total += adopted;
	} while (rc == 0 && n == CATSH_ADOPT_BATCH);
	free(batch);
	if (total > 0 && dead)
		log_info("catalog %s: node %" PRIu64 " adopted %zu chunks of node %" PRIu64
			 " from its cache", pg_name(ns->pg), cat_node_id(cat), total, dead);
	else if (total > 0)
		log_info("catalog %s: node %" PRIu64 " adopted %zu chunks of lost generations whose"
			 " holder is gone, from its cache", pg_name(ns->pg), cat_node_id(cat), total);
	if (adopted_out)
		*adopted_out = total;
	return rc;
}

int cat_reclaim_turn(struct cat *cat, unsigned term_ms, cat_backing_remove_fn remove, void *arg,
		     struct cat_reclaim_report *out)
{
	if (cat->shared) return catshr_reclaim_turn(cat, term_ms, remove, arg, out);
	memset(out, 0, sizeof(*out));
	return 0;
}

/* S6: node dead's settlement (pggen.h X2), adoption first. */
static int catsh_settle(struct cat *cat, uint64_t dead)
{
	struct cat_shared *sh = cat->shared;
	uint64_t held[16], lost[16];
	size_t n_held, n_lost;
	int rc = catsh_adopt(cat, dead, NULL);
	/* adopting is an improvement; the node's generations are judged anyway */
	if (rc)
		log_error("catalog %s: cannot adopt the chunks of node %" PRIu64 ": %s",
			  pg_name(sh->pg), dead, strerror(-rc));
	rc = pggen_node_lost(&sh->ns, dead, held, 16, &n_held, lost, 16, &n_lost);
	if (rc)
		log_error("catalog %s: cannot settle node %" PRIu64 " (its generations, writers"
			  " and chunks): %s; the next sweep tries again",
			  pg_name(sh->pg), dead, strerror(-rc));
	return rc;
}

/* S6, pggen.h X10: a batch of lost generations re-checked; if some stay
 * lost, the chunks of them this cache holds are adopted, those BACKING has
 * whole marked uploaded (X11, with check), and the batch is looked at
 * again. */
static int catsh_recheck_lost(struct cat *cat, cat_backing_check_fn check, void *arg,
			      size_t *cleared)
{
	struct cat_shared *sh = cat->shared;
	uint64_t from = sh->lost_after;
	size_t checked = 0, adopted = 0, more = 0, found = 0;
	int rc = pggen_lost_recheck(&sh->ns, &sh->lost_after, CATSH_RECHECK_MAX, &checked, cleared);
	if (rc == 0 && checked > *cleared)
		rc = catsh_adopt(cat, 0, &adopted);
	if (rc == 0 && checked > *cleared && check)
		rc = catshd_adopt_backing(cat, check, arg, &sh->backing, &found);
	adopted += found;
	if (rc == 0 && adopted > 0) {
		sh->lost_after = from;
		rc = pggen_lost_recheck(&sh->ns, &sh->lost_after, CATSH_RECHECK_MAX, &checked, &more);
		*cleared += more;
	}
	size_t whole = 0; /* pggen.h X18 */
	int wrc = pggen_lost_chunk_whole(&sh->ns, CATSH_RECHECK_MAX, &whole);
	*cleared += whole;
	if (rc)
		log_error("catalog %s: cannot re-check the generations marked lost: %s (the next"
			  " sweep tries again)", pg_name(sh->pg), strerror(-rc));
	if (wrc)
		log_error("catalog %s: cannot re-check the saves held for a chunk lost before its"
			  " upload: %s (the next sweep tries again)", pg_name(sh->pg), strerror(-wrc));
	return rc ? rc : wrc;
}

/* S18: one batch of the chunks the earlier nodes of cache_id held and
 * BACKING lacks, from `after`: kept or taken back from store, then adopted
 * (*n: the batch's size). */
static int catsh_take_back_batch(struct cat *cat, struct store *store, const char *cache_id,
				 uint8_t (*batch)[CAT_HASH_LEN], uint8_t *after, bool *from_start,
				 size_t *n, size_t *taken, size_t *absent, size_t *adopted)
{
	struct pgns *ns = &cat->shared->ns;
	size_t kept = 0, got = 0;
	int rc = pgns_unuploaded_of_cache(ns, cache_id, *from_start ? NULL : after, batch,
					  CATSH_ADOPT_BATCH, n);
	if (rc == 0 && *n > 0) {
		memcpy(after, batch[*n - 1], CAT_HASH_LEN); /* before the filter moves rows */
		*from_start = false;
		rc = catsh_keep_cached(cat, store, batch, *n, &kept, taken, absent);
	}
	if (rc == 0 && kept > 0) /* dead 0: their holders are no live node (L10) */
		rc = pggen_adopt(ns, 0, (const uint8_t(*)[CAT_HASH_LEN])batch, kept, &got);
	*adopted += got;
	return rc;
}

/* S18: the chunks the earlier nodes of cache_id held and BACKING lacks,
 * this node's again where its cache has them whole; *adopted: how many. */
static void catsh_take_back(struct cat *cat, struct store *store, const char *cache_id,
			    size_t *adopted)
{
	struct cat_shared *sh = cat->shared;
	uint8_t(*batch)[CAT_HASH_LEN] = calloc(CATSH_ADOPT_BATCH, CAT_HASH_LEN);
	uint8_t after[CAT_HASH_LEN];
	bool from_start = true;
	size_t n = 0, taken = 0, absent = 0;
	int rc = batch ? 0 : -ENOMEM;
	*adopted = 0;
	do {
		if (rc == 0)
			rc = catsh_take_back_batch(cat, store, cache_id, batch, after, &from_start,
						   &n, &taken, &absent, adopted);
	} while (rc == 0 && n == CATSH_ADOPT_BATCH);
	free(batch);
	if (taken > 0)
		log_warn("catalog %s: node %" PRIu64 " took back %zu chunks from its cache that only"
			 " an earlier node of this cache (%s) held and BACKING lacks, each passing"
			 " SHA-256: its local catalog had forgotten them; queued for upload",
			 pg_name(sh->pg), sh->renew.node_id, taken, cache_id);
	if (*adopted > 0)
		log_info("catalog %s: node %" PRIu64 " adopted %zu chunks of the earlier nodes of its"
			 " cache (%s) at mount", pg_name(sh->pg), sh->renew.node_id, *adopted,
			 cache_id);
	if (absent > 0)
		log_warn("catalog %s: %zu chunks that only an earlier node of this cache (%s) held"
			 " are neither in its cache nor on BACKING: the saves naming them stay lost",
			 pg_name(sh->pg), absent, cache_id);
	if (rc)
		log_error("catalog %s: node %" PRIu64 " cannot take back the chunks of the earlier"
			  " nodes of its cache (%s) at mount: %s; the sweeps adopt those its local"
			  " catalog calls cached (pggen.h X10)", pg_name(sh->pg), sh->renew.node_id,
			  cache_id, strerror(-rc));
}

/* S20: the nodes already expired and not settled, other than those of
 * this cache (mine[0..n_mine), settled after S18), settled; how many. */
static size_t catsh_settle_expired(struct cat *cat, const uint64_t *mine, size_t n_mine)
{
	struct cat_shared *sh = cat->shared;
	uint64_t ids[CATSH_SWEEP_MAX];
	size_t n = 0, settled = 0;
	int rc = lease_unsettled(&sh->renew, ids, CATSH_SWEEP_MAX, &n);
	if (rc)
		log_warn("catalog %s: node %" PRIu64 " cannot list the nodes expired and not"
			 " settled at mount: %s; the sweeps settle them", pg_name(sh->pg),
			 sh->renew.node_id, strerror(-rc));
	for (size_t i = 0; i < n; i++) {
		bool of_cache = false;
		for (size_t j = 0; j < n_mine; j++)
			of_cache = of_cache || mine[j] == ids[i];
		if (!of_cache && catsh_settle(cat, ids[i]) == 0)
			settled++;
	}
	if (settled > 0)
		log_info("catalog %s: node %" PRIu64 " settled %zu nodes expired already at mount,"
			 " before taking back its cache's chunks (S20)", pg_name(sh->pg),
			 sh->renew.node_id, settled);
	return settled;
}

/* S17, lease.h L10: the earlier nodes of this node's cache, gone since
 * this daemon holds the cache's lock, expired, their chunks taken back
 * (S18; the other dead nodes settled first, S20) and settled before it
 * serves. */
static void catsh_take_over(struct cat *cat, struct store *store, const char *cache_id)
{
	struct cat_shared *sh = cat->shared;
	uint64_t expired[CATSH_SWEEP_MAX], dead[CATSH_SWEEP_MAX];
	size_t n_expired = 0, n = 0, settled = 0, adopted = 0;
	int rc = lease_cache_take_over(&sh->renew, cache_id, expired, &n_expired, dead,
				       CATSH_SWEEP_MAX, &n);
	if (rc) {
		log_warn("catalog %s: node %" PRIu64 " cannot settle the earlier nodes of its cache"
			 " %s at mount: %s; the sweeps settle them once their leases run out",
			 pg_name(sh->pg), sh->renew.node_id, cache_id, strerror(-rc));
		return;
	}
	settled = catsh_settle_expired(cat, dead, n);
	catsh_take_back(cat, store, cache_id, &adopted);
	for (size_t i = 0; i < n; i++) {
		bool now = false;
		for (size_t j = 0; j < n_expired; j++)
			now = now || expired[j] == dead[i];
		int drc = catsh_settle(cat, dead[i]);
		settled += drc == 0;
		if (drc == 0)
			log_info("catalog %s: node %" PRIu64 " was the previous daemon of this cache"
				 " (%s): %s and settled at mount, before serving (lease.h L10)",
				 pg_name(sh->pg),
				 dead[i], cache_id, now ? "gone (its cache lock is this node's), expired"
							: "expired already");
	}
	size_t cleared = 0;
	if (adopted > 0) /* S20: what S18 made whole is lost no more (X10) */
		(void)catsh_recheck_lost(cat, NULL, NULL, &cleared); /* logged; the sweeps retry */
	/* the manifests the lost incarnation had queued went with it (and with
	 * its local catalog's WAL, S18) */
	if ((settled > 0 || adopted > 0) && catshd_enqueue_undurable(cat, NULL) != 0)
		cat_shared_requeue_later(cat); /* the next sweep queues them */
}

int cat_lease_sweep(struct cat *cat, size_t *swept)
{
	return cat_lease_sweep_backing(cat, NULL, NULL, swept);
}

int cat_lease_sweep_backing(struct cat *cat, cat_backing_check_fn check, void *arg,
			    size_t *swept)
{
	size_t n = 0, settled = 0, cleared = 0;
	if (swept)
		*swept = 0;
	if (!cat->shared)
		return 0;
	uint64_t dead[CATSH_SWEEP_MAX];
	int rc = lease_sweep(&cat->shared->renew, dead, CATSH_SWEEP_MAX, &n);
	/* L7: what this sweep expired and what an earlier one left unsettled */
	if (rc == 0)
		rc = lease_unsettled(&cat->shared->renew, dead, CATSH_SWEEP_MAX, &n);
	if (rc)
		return rc; /* L4: deciding about others takes a lease with time left */
	for (size_t i = 0; i < n; i++) {
		int drc = catsh_settle(cat, dead[i]);
		settled += drc == 0;
		if (drc && rc == 0)
			rc = drc;
	}
	int lrc = catsh_recheck_lost(cat, check, arg, &cleared);
	if (rc == 0)
		rc = lrc;
	/* the lost nodes' queues went with them, and a generation found whole
	 * again was left out of every queue: their manifests are queued here;
	 * so are those a rename of this node left unqueued (S8) */
	bool requeue = __atomic_exchange_n(&cat->shared->requeue, false, __ATOMIC_ACQ_REL);
	if ((settled > 0 || cleared > 0 || requeue) && catshd_enqueue_undurable(cat, NULL) != 0 &&
	    requeue)
		cat_shared_requeue_later(cat); /* the next sweep tries again */
	if (swept)
		*swept = settled;
	return rc;
}

/* pgns.h N15, on the FUSE connection (the mount asks before it serves). */
int catsh_store_facts(struct cat *cat, struct cat_store_facts *out)
{
	struct pgns_store_facts f;
	int rc = pgns_store_facts(&cat->shared->ns, &f);
	memset(out, 0, sizeof(*out));
	if (rc == 0) {
		memcpy(out->id, f.id, sizeof(out->id));
		out->durable = f.durable;
		out->newest = f.newest;
		out->version = f.version;
		out->uploaded = f.uploaded;
		out->marked = f.marked;
	}
	return rc;
}

int catsh_store_marked(struct cat *cat)
{
	return pgns_store_marked(&cat->shared->ns);
}

int catsh_store_id_offer(struct cat *cat, const char *id, char *held)
{
	return pgns_store_id_offer(&cat->shared->ns, id, held);
}

int catsh_catalog_id(struct cat *cat, char *buf, size_t size)
{
	size_t n = strlen(cat->shared->catalog_id);
	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(buf, cat->shared->catalog_id, n + 1);
	return 0;
}

/* ---- the namespace ---- */

int catsh_getattr(struct cat *cat, uint64_t ino, struct cat_inode *out)
{
	return pgns_getattr(&cat->shared->ns, ino, out);
}

int catsh_getattr_gen(struct cat *cat, uint64_t ino, struct cat_inode *out, uint64_t *gen_id)
{
	return pgns_getattr_gen(&cat->shared->ns, ino, out, gen_id);
}

int catsh_lookup(struct cat *cat, uint64_t parent, const char *name, struct cat_inode *out)
{
	if (name == NULL)
		return -EINVAL;
	return pgns_lookup(&cat->shared->ns, parent, name, out);
}

int catsh_readlink(struct cat *cat, uint64_t ino, char *buf, size_t size)
{
	return pgns_readlink(&cat->shared->ns, ino, buf, size);
}

int catsh_readdir(struct cat *cat, uint64_t dir, uint64_t cookie, cat_dirent_fn fn, void *arg)
{
	return pgns_readdir(&cat->shared->ns, dir, cookie, fn, arg);
}

int catsh_create(struct cat *cat, uint64_t parent, const char *name, uint32_t mode,
		 uint32_t uid, uint32_t gid, uint64_t rdev, const char *target,
		 struct cat_inode *out)
{
	int rc = cat_name_check(name);
	if (rc)
		return rc;
	return pgns_create(&cat->shared->ns, parent, name, mode, uid, gid, rdev, target, out);
}

int catsh_link(struct cat *cat, uint64_t ino, uint64_t newparent, const char *newname,
	       struct cat_inode *out)
{
	int rc = cat_name_check(newname);
	if (rc)
		return rc;
	return pgns_link(&cat->shared->ns, ino, newparent, newname, out);
}

int catsh_unlink(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out)
{
	int rc = cat_name_check(name);
	if (rc)
		return rc;
	return pggen_remove(&cat->shared->ns, parent, name, false, ino_out); /* pggen.h X8 */
}

int catsh_rmdir(struct cat *cat, uint64_t parent, const char *name, uint64_t *ino_out)
{
	if (name != NULL && strcmp(name, "..") == 0)
		return -ENOTEMPTY;
	int rc = cat_name_check(name);
	if (rc)
		return rc;
	return pggen_remove(&cat->shared->ns, parent, name, true, ino_out); /* pggen.h X8 */
}

int catsh_rename(struct cat *cat, uint64_t parent, const char *name, uint64_t newparent,
		 const char *newname, unsigned flags, uint64_t *replaced_ino)
{
	if (replaced_ino)
		*replaced_ino = 0;
	int rc = cat_name_check(name);
	if (rc == 0)
		rc = cat_name_check(newname);
	if (rc)
		return rc;
	/* with the generation bookkeeping of cat_rename (catalog_shared_gen.c) */
	rc = pggen_rename(&cat->shared->ns, parent, name, newparent, newname, flags, NULL,
			  replaced_ino, NULL, NULL);
	catshg_series_moved(cat, rc); /* catalog_shared_gen.c S8 */
	return rc;
}

int catsh_setattr(struct cat *cat, uint64_t ino, unsigned what, const struct cat_inode *in,
		  struct cat_inode *out)
{
	struct cat_inode scratch;
	return pgns_setattr(&cat->shared->ns, ino, what, in, out ? out : &scratch);
}

int catsh_inode_release(struct cat *cat, uint64_t ino)
{
	return pgns_inode_release(&cat->shared->ns, ino);
}

int catsh_inodes_release(struct cat *cat, const uint64_t *inos, size_t n)
{
	return pgns_inodes_release(&cat->shared->ns, inos, n);
}

int catsh_inodes_drop_data(struct cat *cat, const uint64_t *inos, size_t n)
{
	return pgns_inodes_drop_data(&cat->shared->ns, inos, n);
}

/* Every shared change was committed by PostgreSQL before its call returned,
 * and the server's commit is durable: nothing is left to make so. */
int catsh_sync(struct cat *cat)
{
	(void)cat;
	return 0;
}

/* The namespace's counts from PostgreSQL; the chunk counts are this node's
 * cache (the local chunks table). */
int catsh_stats(struct cat *cat, struct cat_stats *out)
{
	memset(out, 0, sizeof(*out));
	int rc = pgns_stats(&cat->shared->ns, out);
	if (rc)
		return rc;
	cat_lock(cat);
	rc = cat_begin_read(cat);
	if (rc == 0)
		rc = cat_stats_chunks(cat, out);
	rc = cat_end(cat, rc);
	cat_unlock(cat);
	return rc;
}

/* The local file's [node] checks, then the shared namespace's N1 and N2,
 * then the shared generations' (pggen.h G1–G3). */
int catsh_check(struct cat *cat)
{
	int violations = 0, shared_violations = 0;
	int rc = cat_check_node(cat, &violations);
	if (rc == 0)
		rc = pgns_check(&cat->shared->ns, &shared_violations);
	violations += shared_violations;
	shared_violations = 0;
	if (rc == 0)
		rc = pggen_check(&cat->shared->ns, &shared_violations);
	violations += shared_violations;
	if (rc == 0 && violations > 0) {
		log_error("catalog %s (beside %s): check found %d violations", cat->path,
			  pg_name(cat->shared->pg), violations);
		rc = -EUCLEAN;
	}
	return rc;
}

pthread_rwlock_t *cat_shared_pins(struct cat *cat)
{
	assert(cat->shared);
	return &cat->shared->pins;
}

struct csd_absent_set *cat_shared_absent(struct cat *cat)
{
	assert(cat->shared);
	return &cat->shared->absent;
}

struct csd_again_set *cat_shared_again(struct cat *cat)
{
	assert(cat->shared);
	return &cat->shared->again;
}
