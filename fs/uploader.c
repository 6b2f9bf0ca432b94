/* uploader — the cache's work for BACKING, in queue order; see uploader.h. */
#define _GNU_SOURCE
#include "uploader.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "cache.h"
#include "catalog.h"
#include "catalog_pack.h"
#include "claim.h"
#include "codec.h"
#include "generation.h"
#include "log.h"
#include "manifest.h"
#include "manifest_shared.h"
#include "store.h"
#include "upload.h"
#include "uppack.h"

#define UP_WORKERS_MAX 16
#define UP_LOOKAHEAD 64 /* queued rows considered per pick */
#define UP_BACKOFF_MIN_MS 100
#define UP_BACKOFF_MAX_MS 30000
#define UP_TREE_EVERY_S 1.0
/* The unmount's last tree manifest put is retried this long (T6). */
#define UP_TREE_DRAIN_S 15.0
/* Shared: the tree manifest's duty term (extended at each check, every
 * UP_TREE_EVERY_S); a holder that stops checking leaves it this soon. */
#define UP_TREE_DUTY_MS 5000
/* Shared: the tree unchanged, its horizon is recorded this often (T4). */
#define UP_TREE_NOTE_NS 2000000000LL
#define UP_BATCH_MAX 32                 /* chunk rows put before one backing_sync */
#define UP_BATCH_BYTES (64u << 20)      /* ... or this many bytes */
/* With a shared catalog, chunk rows fewer than a batch's room linger this
 * long from when a worker first saw them, so that rows the writers queue
 * meanwhile join them (uploader.h B1): their claims and their batch's
 * marking are a PostgreSQL round trip each per pick and per batch, and an
 * uploader that keeps up with the writers would otherwise claim a chunk or
 * two a pick. A long queue fills batches without waiting. */
#define UP_LINGER_S 0.05
/* B6: how long a batch with pack members waits for more when the queue is
 * empty (a writer's next small file is usually queued within it) */
#define UP_PACK_LINGER_S 0.05
/* B3: files whose closes wait that the workers pick before the queue's
 * order; a close past them waits in the queue's order */
#define UP_URGENT_MAX 8
/* Only objects smaller than this wait for a batch's sync when they are
 * copied: for larger ones an fsync each costs little beside their bytes,
 * while a syncfs of a BACKING that shares its filesystem with the cache would
 * also flush (and wait for) everything the writers have just put there.
 * Linked objects all wait for it: their bytes went to the disk with O_DIRECT
 * (store.c S3), so a syncfs has little to flush, and an fsync each was a
 * synchronous inode write each (ext4 without a journal). */
#define UP_DEFER_MAX (256u << 10)
/* B5: a lost chunk's holds that failed are tried again after this, doubling */
#define UP_HOLD_RETRY_MIN_MS 1000
#define UP_HOLD_RETRY_MAX_MS 30000

/* A row up_lost kept queued (upload.h U7): not picked again this run.
 * hold: the holds of the saves naming its chunk (generation.h G12) failed
 * and are still to be made (B5). */
struct up_lost_row {
	uint64_t seq;
	uint8_t hash[HASH_LEN];
	bool hold;
};

struct up_busy {
	bool set;
	uint64_t seq, gen;
	int kind;
	uint8_t hash[HASH_LEN];
};

struct uploader {
	struct uploader_config cfg;
	struct cat *cat;
	struct store *store;
	struct backing *backing;
	struct cache *cache;
	uploader_durable_fn *on_durable;
	void *durable_arg;
	pthread_mutex_t lock;
	pthread_cond_t kick;    /* new work, or a row finished */
	pthread_cond_t changed; /* a row finished (waiters of uploader_wait_file) */
	uint64_t b4_said_gen;   /* B4: the manifest refusal last logged (gen, version) */
	uint32_t b4_said_version;
	bool stopping, draining;
	int n_workers;
	pthread_t worker[UP_WORKERS_MAX];
	struct up_busy busy[UP_WORKERS_MAX][UP_BATCH_MAX]; /* rows each worker has in hand */
	/* B6: the pack each worker is putting (U4 for its name: no removal of
	 * it runs meanwhile, uppack.h Q3) */
	uint8_t pack_busy[UP_WORKERS_MAX][HASH_LEN];
	bool pack_busy_set[UP_WORKERS_MAX];
	bool packs; /* B6: small objects go into packs (-o packs, alone only) */

	double down_until;      /* monotonic s: back off until then */
	int lingering;          /* shared: workers whose batch lingers (uploader.h B1: 0 or 1) */
	int urgent;             /* closes waiting in uploader_wait_pending (B3): no linger */
	uint64_t urgent_ino[UP_URGENT_MAX]; /* their files (0: a free slot), picked first */
	bool urgent_new;        /* B3: a close began waiting since the last urgent pick */
	unsigned backoff_ms;
	bool down;
	/* B7: monotonic s each worker began the row work (or batch sync) it
	 * has in hand, its BACKING calls in it; 0: none in hand */
	double work_since[UP_WORKERS_MAX];
	bool unanswered;        /* B7: a gated wait timed out behind a hung call */
	uint64_t deadline_warned; /* highest seq warned about */

	char tree_fp[128];      /* fingerprint of the tree last written */
	uint64_t tree_seq;      /* its manifest's seq on BACKING, 0 if none yet */
	double tree_checked;
	int64_t tree_clock_ns;  /* shared: the server's clock at the last fingerprint */
	int64_t tree_noted_ns;  /* shared: the last horizon recorded (T4) */
	bool tree_marked;       /* alone: the catalog's tree_unwritten row is set (T6) */
	bool tree_fp_noted;     /* alone: tree_described_fp holds tree_fp (T7) */
	uploader_tree_fn *before_tree; /* tests only (uploader.h) */
	void *before_tree_arg;

	struct uploader_stats st;
	size_t object_cap;
	double last_progress; /* monotonic s of the last finished row */
	struct up_lost_row *lost_seq; /* rows up_lost kept queued, in the order found */
	size_t n_lost, cap_lost;
	size_t n_hold;          /* B5: rows of lost_seq whose holds are still to be made */
	bool holding;           /* B5: a worker is making one row's holds */
	double hold_at;         /* B5: monotonic s of the next try */
	unsigned hold_backoff_ms;
	uploader_between_fn *between; /* tests only (uploader.h) */
	void *between_arg;
	uploader_between_fn *before_put; /* tests only (uploader.h) */
	void *before_put_arg;
};

/* What a row's work returns when it found the work moot (the chunk gone or
 * uploaded meanwhile, the generation changed): nothing was put, and the row
 * ends by cat_upload_moot_many, marking nothing (upload.h U7). */
#define UP_MOOT 1

static double up_mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t up_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* claim.h invariant 9: false while this daemon is unsure of BACKING's claim
 * and once it lost it; the work in hand answers -EROFS and its row stays
 * queued, untouched (picked again once the claim is renewed). */
static bool up_may_write(struct uploader *u)
{
	return claim_may_write(u->cfg.claim);
}

/* ---- the work of one row ---- */

/* A worker's buffers for one chunk object and its decoded bytes, allocated
 * once per worker (a chunk is up to 4 MiB: not worth a fresh mapping each). */
struct up_buffers {
	uint8_t *obj, *plain;
};

/* An object buffer the store can read into with O_DIRECT (store.c S3). */
static uint8_t *up_aligned(size_t cap)
{
	return aligned_alloc(STORE_IO_ALIGN, cap); /* cap: a multiple of it (uploader_start) */
}

/* Reads the cache's object into b->obj and checks it: a damaged cache copy
 * must not become the durable one. 0 with *len, -EUCLEAN (logged) when its
 * bytes are bad, or the read's or the check's own error (-ENOENT, -EIO of
 * the read; -ENOMEM of a decode, store.c S12: no verdict on the chunk). */
static int up_chunk_read(struct uploader *u, const uint8_t hash[HASH_LEN], struct up_buffers *b,
			 size_t *len)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	const char *why = NULL;
	size_t plain_len;
	bool hashed = false; /* the bytes are those hashed when written (store.c S2) */
	int rc = b->obj && b->plain
			 ? store_read_upload(u->store, hash, b->obj, u->object_cap, len, &hashed)
			 : -ENOMEM;
	enum store_check how = hashed ? STORE_CHECK_HEADER : store_local_check(u->store);
	if (rc == 0)
		rc = store_object_verify(hash, b->obj, *len, b->plain, u->cfg.chunk_max, how,
					 &plain_len, &why);
	if (rc != 0 && why) {
		log_error("cache %s: chunk %s is corrupt before its upload: %s", u->cfg.cache_dir, hex,
			  why);
		rc = -EUCLEAN;
	} else if (rc != 0 && rc != -ENOENT && rc != -EIO) {
		/* store.c S12: the check could not run here (-ENOMEM); no verdict
		 * on the chunk, so it is not lost (U7): retried after a backoff */
		log_warn("cache %s: chunk %s could not be checked before its upload: %s; retried",
			 u->cfg.cache_dir, hex, strerror(-rc));
	}
	return rc;
}

/* The cache's object went during its upload (-ENOENT): moot (*moot, 0) if
 * the chunk was reclaimed (its files deleted) or uploaded meanwhile, as
 * up_chunk's first look would have found; else the error of the caller. */
static int up_chunk_gone(struct uploader *u, const uint8_t hash[HASH_LEN], bool *moot)
{
	struct cat_chunk_where w;
	int rc = cat_chunk_where(u->cat, hash, &w);
	*moot = rc == -ENOENT || (rc == 0 && w.uploaded);
	return *moot || rc == 0 ? -ENOENT : rc;
}

/* The cache's object is missing (-ENOENT) or damaged (-EIO) and the chunk
 * is not on BACKING: -EUCLEAN, logged. */
static int up_chunk_lost(struct uploader *u, const uint8_t hash[HASH_LEN], int rc)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	log_error("cache %s: chunk %s is %s before its upload: the files naming it cannot"
		  " become durable", u->cfg.cache_dir, hex, rc == -ENOENT ? "missing" : "damaged");
	return -EUCLEAN;
}

/* The checks of an upload by hard link: S2 vouches for the bytes without a
 * read, or they are read and verified in full (*read then says b->obj holds
 * them). A missing object is -EUCLEAN (logged) unless up_chunk_gone finds
 * the upload moot. */
static int up_chunk_check(struct uploader *u, const uint8_t hash[HASH_LEN], bool link,
			  struct up_buffers *b, size_t *len, bool *read, bool *moot)
{
	*moot = false;
	int rc = link ? store_check_unread(u->store, hash, len) : -EAGAIN;
	*read = rc == -EAGAIN;
	if (*read)
		rc = up_chunk_read(u, hash, b, len);
	if (rc == -ENOENT)
		rc = up_chunk_gone(u, hash, moot);
	if (*moot)
		return 0;
	return rc == -ENOENT || rc == -EIO ? up_chunk_lost(u, hash, rc) : rc;
}

/* backing_put_link found the cache's object gone: UP_MOOT (nothing to put)
 * if the chunk was reclaimed or uploaded meanwhile, else -EUCLEAN (logged). */
static int up_chunk_vanished(struct uploader *u, const uint8_t hash[HASH_LEN], bool *deferred)
{
	bool moot;
	int rc = up_chunk_gone(u, hash, &moot);
	if (moot) {
		*deferred = false;
		return UP_MOOT;
	}
	return rc == -ENOENT ? up_chunk_lost(u, hash, rc) : rc;
}

/* B6: a small object goes into its batch's pack, unless a loose copy of
 * it is on BACKING (catalog_pack.h K3). */
static bool up_packable(struct uploader *u, const struct cat_chunk_where *w)
{
	return u->packs && !w->loose_only && STORE_HEADER_LEN + w->stored_len < UPPACK_MEMBER_MAX;
}

/* B6: the object read and verified for its pack (uppack.h Q4): 0 with its
 * image in b->obj (*pack_len bytes) for the caller to add, UP_MOOT, or an
 * error as up_chunk's. */
static int up_chunk_for_pack(struct uploader *u, const struct cat_upload *row,
			     struct up_buffers *b, const struct cat_chunk_where *w, bool *deferred,
			     uint64_t *bytes, size_t *pack_len)
{
	size_t len = 0;
	bool moot = false;
	int rc = up_chunk_read(u, row->hash, b, &len);
	if (rc == -ENOENT)
		rc = up_chunk_gone(u, row->hash, &moot);
	if (moot)
		return UP_MOOT;
	if (rc == -ENOENT || rc == -EIO)
		return up_chunk_lost(u, row->hash, rc);
	if (rc == 0) {
		*deferred = true;
		*pack_len = len;
		*bytes = w->stored_len;
	}
	return rc;
}

/* A chunk object, cache → BACKING: a hard link when BACKING is a directory on
 * the cache's filesystem (backing.h 1c; -o copy_uploads says copy anyway),
 * else a copy of its bytes. may_defer: a linked object, or one under
 * UP_DEFER_MAX, is put unsynced and *deferred says so (the caller syncs it with its batch). */
static int up_chunk(struct uploader *u, const struct cat_upload *row, struct up_buffers *b,
		    bool may_defer, bool *deferred, uint64_t *bytes, size_t *pack_len)
{
	*deferred = false;
	*pack_len = 0;
	if (!up_may_write(u))
		return -EROFS;
	struct cat_chunk_where w;
	int rc = cat_chunk_where(u->cat, row->hash, &w);
	if (rc == -ENOENT || (rc == 0 && w.uploaded))
		return UP_MOOT; /* gone (reclaimed) or done */
	if (rc != 0)
		return rc;
	if (may_defer && up_packable(u, &w))
		return up_chunk_for_pack(u, row, b, &w, deferred, bytes, pack_len);
	char rel[128];
	store_object_relpath(row->hash, rel, sizeof(rel));
	bool link = !u->cfg.copy_uploads && backing_can_link(u->backing), read = false;
	size_t len = 0;
	bool moot;
	rc = up_chunk_check(u, row->hash, link, b, &len, &read, &moot);
	if (moot)
		return UP_MOOT;
	*deferred = rc == 0 && may_defer && (len < UP_DEFER_MAX || link ||
		/* large copies join the batch too (issue 20), unless its
		 * sync is a syncfs of the cache's own filesystem (copy_uploads) */
		!u->cfg.copy_uploads || !backing_sync_is_syncfs(u->backing));
	bool copy = !link;
	if (rc == 0 && link) {
		char src[128];
		int dirfd = store_object_at(u->store, row->hash, src, sizeof(src));
		/* -EXDEV: a row of small.db (store.c S7), copied below */
		rc = dirfd < 0 ? dirfd : backing_put_link(u->backing, rel, dirfd, src, !*deferred);
		if (rc == -ENOENT) /* the object went since the check (backing.h 1c) */
			rc = up_chunk_vanished(u, row->hash, deferred);
		if (rc == -EXDEV) { /* refused: copy the bytes after all */
			copy = true;
			rc = read ? 0 : up_chunk_read(u, row->hash, b, &len);
		}
	}
	if (rc == UP_MOOT)
		return rc; /* nothing put, nothing to count */
	if (rc == 0 && copy)
		rc = *deferred ? backing_put_unsynced(u->backing, rel, b->obj, len)
			       : backing_put(u->backing, rel, b->obj, len);
	if (rc == 0) {
		store_uploaded(u->store, row->hash);
		*bytes = w.stored_len;
	}
	return rc;
}

/* Shared (uploader.h B2): what became of the row's generation; a version
 * of it whose put may have landed after the reclaim duty's R8 removed the
 * generation's manifests (ended), or that a durable higher version made
 * stale, is removed now (an absent object is success): 0 with *gone. */
static int up_gen_settle(struct uploader *u, const struct cat_upload *row, const char *path,
			 enum manifest_shared_fate *fate, bool *gone)
{
	*gone = false;
	int rc = manifest_shared_gen_fate(u->cat, row->gen, row->version, fate);
	if (rc != 0 || (*fate != MSH_FATE_ENDED && *fate != MSH_FATE_NEWER_DURABLE))
		return rc;
	if (!up_may_write(u)) /* claim.h 9: the row stays queued, looked at again */
		return -EROFS;
	rc = backing_remove(u->backing, path);
	if (rc == -ENOENT)
		rc = 0;
	*gone = rc == 0;
	return rc;
}

/* The identity in a generation manifest's `gen` line (its second line,
 * docs/FORMAT.md): id, version, created_ns. false if buf has no such line. */
static bool up_gen_identity(const char *buf, size_t len, uint64_t *id, uint32_t *version,
			    int64_t *created_ns)
{
	char line[256];
	const char *nl = memchr(buf, '\n', len);
	if (!nl)
		return false;
	size_t at = (size_t)(nl - buf) + 1, n = 0;
	while (at + n < len && buf[at + n] != '\n' && n < sizeof(line) - 1)
		n++;
	memcpy(line, buf + at, n);
	line[n] = '\0';
	unsigned long long i, step;
	unsigned v, pinned;
	long long created;
	if (sscanf(line, "gen %llu %u %llu %u %lld ", &i, &v, &step, &pinned, &created) != 5)
		return false;
	*id = i;
	*version = v;
	*created_ns = created;
	return true;
}

/* B4's one line: what holds path, and what keeps the refused save (our_id):
 * an object with no readable gen line is moved aside; another save's
 * manifest means the catalog may be behind BACKING, whose rebuild drops the
 * refused save (in no manifest), so it is copied out first. */
static void up_gen_refused(struct uploader *u, const char *path, bool theirs_read, uint64_t id,
			   uint32_t version, int64_t created, uint64_t our_id, uint32_t our_version,
			   int64_t our_created)
{
	const char *bk = backing_spec(u->backing);
	if (!theirs_read) {
		log_error("BACKING %s: %s holds an object with no readable gen line (debris, or a"
			  " damaged manifest), not this catalog's generation %" PRIu64 " version %u"
			  " created at %" PRId64 ": not overwritten, the save stays committed and not"
			  " durable; look at it, move it out of manifests/gen (kept, not deleted), and"
			  " the next try writes this save's manifest (uploader.h B4, docs/ADMIN.md)",
			  bk, path, our_id, our_version, our_created);
		return;
	}
	char behind[PATH_MAX + 400];
	if (cat_is_shared(u->cat))
		snprintf(behind, sizeof(behind), "the shared catalog (-o meta=) is behind BACKING:"
			 " stop every node, refill an empty database with ckptfs-admin rebuild --meta"
			 " URL %s, then ckptfs-admin import MOUNTPOINT DIR/NAME SERIES takes the copy"
			 " back as a new save", bk);
	else
		snprintf(behind, sizeof(behind), "this catalog is behind BACKING: unmount, run"
			 " ckptfs-admin rebuild --force --cache %s %s (it drops every save not on"
			 " BACKING, naming each: copy those out too), mount, and ckptfs-admin import"
			 " MOUNTPOINT DIR/NAME SERIES takes the copy back as a new save",
			 u->cfg.cache_dir, bk);
	log_error("BACKING %s: %s holds another save's manifest (generation %" PRIu64 " version %u"
		  " created at %" PRId64 "), not this catalog's generation %" PRIu64 " version %u"
		  " created at %" PRId64 ": not overwritten, the save stays committed and not"
		  " durable. Keep it first: ckptfs-admin export MOUNTPOINT id:%" PRIu64 " DIR copies"
		  " it out (a rebuild would drop it: no manifest on BACKING names it). Then, if that"
		  " object is debris, move it out of manifests/gen and the next try writes this"
		  " save's manifest; if BACKING should keep that save, %s (uploader.h B4,"
		  " docs/ADMIN.md)",
		  bk, path, id, version, created, our_id, our_version, our_created, our_id, behind);
}

/* B4: 0 when path on BACKING is absent or holds a manifest of the same
 * save (id, version and created_ns as ours: a put repeated, or a damaged
 * copy of ours); -EEXIST, logged once, when it holds anything else, which
 * the put would overwrite. */
static int up_gen_guard(struct uploader *u, const char *path, const char *ours, size_t ours_len)
{
	uint64_t size;
	int rc = backing_stat(u->backing, path, &size);
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		return rc;
	char *have = size < SIZE_MAX ? malloc(size + 1) : NULL;
	if (!have)
		return -ENOMEM;
	size_t n = 0;
	rc = backing_get(u->backing, path, have, size + 1, &n);
	uint64_t id = 0, our_id = 0;
	uint32_t version = 0, our_version = 0;
	int64_t created = 0, our_created = 0;
	bool theirs_read = rc == 0 && up_gen_identity(have, n, &id, &version, &created);
	free(have);
	if (rc == -ENOENT || rc == -EFBIG) /* gone, or rewritten meanwhile: ask again */
		return rc == -ENOENT ? 0 : -EAGAIN;
	if (rc != 0)
		return rc;
	if (!up_gen_identity(ours, ours_len, &our_id, &our_version, &our_created))
		return -EIO; /* not a manifest we built: never happens */
	if (theirs_read && id == our_id && version == our_version && created == our_created)
		return 0;
	pthread_mutex_lock(&u->lock);
	bool said = u->b4_said_gen == our_id && u->b4_said_version == our_version;
	u->b4_said_gen = our_id;
	u->b4_said_version = our_version;
	pthread_mutex_unlock(&u->lock);
	if (said) /* once per manifest: the row's reason and the stats say it meanwhile */
		return -EEXIST;
	up_gen_refused(u, path, theirs_read, id, version, created, our_id, our_version, our_created);
	return -EEXIST;
}

static int up_gen_manifest(struct uploader *u, const struct cat_upload *row)
{
	char path[MANIFEST_PATH_MAX];
	manifest_gen_path(row->gen, row->version, path, sizeof(path));
	bool shared = cat_is_shared(u->cat), gone = false;
	enum manifest_shared_fate fate = MSH_FATE_CURRENT;
	/* B2 (b): an earlier attempt's put may be on BACKING */
	int rc = shared ? up_gen_settle(u, row, path, &fate, &gone) : 0;
	if (rc != 0 || fate != MSH_FATE_CURRENT)
		return rc ? rc : UP_MOOT; /* moot: nothing of this row is left on BACKING */
	char *buf = NULL;
	size_t len = 0;
	rc = manifest_gen_build(u->cat, row->gen, row->version, &buf, &len);
	if (rc == -ESTALE || rc == -ENOENT)
		return UP_MOOT; /* rewritten or deleted since: a newer row covers it */
	if (rc == 0) { /* the build may take a while: the fence looked at again */
		pthread_mutex_lock(&u->lock);
		uploader_between_fn *before_put = u->before_put;
		void *before_put_arg = u->before_put_arg;
		pthread_mutex_unlock(&u->lock);
		if (before_put)
			before_put(before_put_arg, row);
		rc = up_may_write(u) ? up_gen_guard(u, path, buf, len) : -EROFS;
		if (rc == 0)
			rc = backing_put(u->backing, path, buf, len);
	}
	free(buf);
	/* B2 (a): put, then read the row again, then remove what the put may
	 * have left behind an R8 that ran meanwhile (an error keeps the row
	 * queued: B2 (b) finishes the work) */
	if (rc == 0 && shared)
		rc = up_gen_settle(u, row, path, &fate, &gone);
	if (rc == 0 && gone)
		return UP_MOOT;
	if (rc == 0 && row->version > 1) { /* the version it replaces */
		/* fenced or unsure since the put (claim.h 9): -EROFS, so the row
		 * stays queued and is redone whole, removal included; ended as
		 * done, version v-1 would stay on BACKING for ever */
		if (!up_may_write(u))
			return -EROFS;
		manifest_gen_path(row->gen, row->version - 1, path, sizeof(path));
		backing_remove(u->backing, path);
	}
	return rc;
}

struct up_gen_list {
	uint64_t gen;
	struct backing *b;
	int rc;
};

static int up_remove_gen_version(void *arg, const char *name)
{
	struct up_gen_list *l = arg;
	uint64_t id;
	uint32_t version;
	if (manifest_gen_name_parse(name, &id, &version) == 0 && id == l->gen) {
		char path[MANIFEST_PATH_MAX];
		manifest_gen_path(id, version, path, sizeof(path));
		int rc = backing_remove(l->b, path);
		if (rc != 0 && l->rc == 0)
			l->rc = rc;
	}
	return 0;
}

/* Every version's manifest of a deleted generation, so no rebuild brings
 * it back. */
static int up_gen_remove(struct uploader *u, const struct cat_upload *row)
{
	struct up_gen_list l = { row->gen, u->backing, 0 };
	int rc = backing_list(u->backing, "manifests/gen", up_remove_gen_version, &l);
	if (rc == -ENOENT)
		rc = 0;
	return rc ? rc : l.rc;
}

static int up_chunk_remove(struct uploader *u, const struct cat_upload *row)
{
	struct cat_chunk_where w;
	int rc = cat_chunk_where(u->cat, row->hash, &w);
	if (rc == 0)
		return 0; /* referenced again since: keep it */
	if (rc != -ENOENT)
		return rc;
	bool superseded = false; /* upload.h U4: the later removal row governs */
	rc = cat_upload_removal_superseded(u->cat, row, &superseded);
	if (rc != 0 || superseded)
		return rc;
	char rel[128];
	store_object_relpath(row->hash, rel, sizeof(rel));
	return backing_remove(u->backing, rel);
}

static int up_run(struct uploader *u, const struct cat_upload *row, struct up_buffers *b,
		  uint64_t *bytes)
{
	if (!up_may_write(u))
		return -EROFS;
	switch (row->kind) {
	case UP_CHUNK: {
		bool deferred;
		size_t pack_len;
		return up_chunk(u, row, b, false, &deferred, bytes, &pack_len);
	}
	case UP_GEN_MANIFEST: return up_gen_manifest(u, row);
	case UP_DELETE_GEN_MANIFEST: return up_gen_remove(u, row);
	case UP_DELETE_CHUNK: return up_chunk_remove(u, row);
	case UP_DELETE_PACK: return uppack_remove(u->cat, u->backing, row); /* uppack.h Q3 */
	default:
		log_error("upload queue: row %" PRIu64 " has unknown kind %d; dropping it", row->seq,
			  row->kind);
		return 0;
	}
}

/* ---- the tree manifest ---- */

static void up_tree_shared(struct uploader *u);

/* ---- the tree manifest alone (SQLite) ----
 *
 *  T5. The tree manifest put names only chunks on BACKING (upload.h U5;
 *      review 35 F4): the fingerprint that decides a build, the check that
 *      every chunk of the tree is uploaded, and the manifest are read in one
 *      transaction (manifest_tree_build_uploaded), which answers -EAGAIN
 *      while one is not; the fingerprint recorded is that snapshot's. The
 *      earlier fingerprint (its own transaction) only skips a build when the
 *      tree is unchanged or not yet uploaded; a file committed after it is
 *      seen by the build's snapshot, never named unseen. The previous
 *      manifest is removed only after the new one's put succeeded.
 *  T6. An unmount's drain ends with the tree manifest on BACKING, or says
 *      it is not (review 35 F2): after the rows, the tree manifest is put
 *      (up_tree_drain); a put that fails is tried again with the rows'
 *      backoff (UP_BACKOFF_MIN_MS doubling) for UP_TREE_DRAIN_S; if it
 *      still fails, or the tree names chunks not on BACKING (rows left
 *      queued), or the claim is not ours, the daemon logs an error naming
 *      the tree manifest and records why in the catalog (upload.h U10),
 *      which `ckptfs-admin umount` reports (exit 1, as for rows left
 *      queued). The mark goes once a tree manifest is put or found current
 *      (the next mount writes one at its first idle round).
 *  T7. The catalog knows which tree is described on BACKING (upload.h U11;
 *      review 36 F4a): once a tree manifest's put succeeded, the
 *      fingerprint its build's snapshot had (T5) goes to the meta row
 *      tree_described_fp, never before the put; a failed write of the row
 *      is tried again on the next round that finds the tree unchanged. The
 *      round comes at most every UP_TREE_EVERY_S on worker 0, when it is
 *      idle and also while the queue stays busy (between its batches,
 *      once it took rows since the last round, never while BACKING is
 *      backed off from), so that a tree changed
 *      while a trainer writes its next save is written within about a
 *      second of its last chunk's upload, not only once the queue is
 *      empty. `ckptfs-admin wait` waits for the row to match the tree. */

/* T6: a tree manifest describes the tree on BACKING: the mark of an
 * unmount that could not write one goes. */
static void up_tree_unmark(struct uploader *u)
{
	if (u->tree_marked && cat_tree_unwritten_set(u->cat, NULL) == 0) {
		u->tree_marked = false;
		log_info("BACKING %s: the tree manifest (the files outside generations) is written"
			 " again", backing_spec(u->backing));
	}
}

/* T7: the tree of fingerprint fp is described on BACKING: the catalog's
 * meta row says so, for `ckptfs-admin wait` and `umount` (upload.h U11). */
static void up_tree_note(struct uploader *u, const char *fp)
{
	pthread_mutex_lock(&u->lock);
	bool noted = u->tree_fp_noted;
	pthread_mutex_unlock(&u->lock);
	if (noted)
		return;
	int rc = cat_tree_described_fp_set(u->cat, fp);
	if (rc != 0) {
		log_warn("catalog: cannot record which tree the tree manifest on BACKING %s"
			 " describes (%s); tried again in a second", backing_spec(u->backing),
			 strerror(-rc));
		return;
	}
	pthread_mutex_lock(&u->lock);
	u->tree_fp_noted = strcmp(u->tree_fp, fp) == 0;
	pthread_mutex_unlock(&u->lock);
}

/* 0: the tree manifest on BACKING describes the tree (written now, or found
 * current); -EAGAIN: a chunk of the tree is not on BACKING yet; -EROFS: not
 * ours to write (claim.h 9); else the put's error. Shared: the duty holder's
 * turn (T1), 0. */
static int up_tree(struct uploader *u)
{
	if (!up_may_write(u))
		return -EROFS;
	if (cat_is_shared(u->cat)) {
		up_tree_shared(u);
		return 0;
	}
	char fp[128];
	bool all_uploaded = false;
	uint64_t horizon; /* the queue rows this manifest describes the state after (upload.h U5) */
	int rc = cat_tree_horizon(u->cat, &horizon);
	if (rc == 0)
		rc = cat_tree_fingerprint(u->cat, fp, sizeof(fp), &all_uploaded);
	if (rc != 0)
		return rc;
	if (!all_uploaded)
		return -EAGAIN;
	pthread_mutex_lock(&u->lock);
	bool same = strcmp(fp, u->tree_fp) == 0;
	uploader_tree_fn *before_tree = u->before_tree;
	void *before_tree_arg = u->before_tree_arg;
	pthread_mutex_unlock(&u->lock);
	if (same) {
		cat_tree_described(u->cat, horizon); /* the one on BACKING is current */
		up_tree_unmark(u);
		up_tree_note(u, fp); /* T7: a failed write of the row, again */
		return 0;
	}
	if (before_tree)
		before_tree(before_tree_arg);
	char *buf = NULL;
	size_t len = 0;
	rc = manifest_tree_build_uploaded(u->cat, &buf, &len, fp, sizeof(fp)); /* T5 */
	if (rc != 0)
		return rc; /* -EAGAIN: committed since the fingerprint, not uploaded yet */
	pthread_mutex_lock(&u->lock);
	uint64_t seq = (uint64_t)up_now_ns();
	if (seq <= u->tree_seq) /* the clock went back: names must still grow */
		seq = u->tree_seq + 1;
	pthread_mutex_unlock(&u->lock);
	char path[MANIFEST_PATH_MAX];
	manifest_tree_path(seq, path, sizeof(path));
	rc = backing_put(u->backing, path, buf, len);
	free(buf);
	if (rc != 0)
		return rc; /* retried on the next idle round, or by the drain (T6) */
	cat_tree_described(u->cat, horizon);
	pthread_mutex_lock(&u->lock);
	uint64_t old = u->tree_seq;
	u->tree_seq = seq;
	snprintf(u->tree_fp, sizeof(u->tree_fp), "%s", fp);
	u->st.manifests++;
	u->tree_fp_noted = false;
	pthread_mutex_unlock(&u->lock);
	up_tree_note(u, fp); /* T7: after the put */
	up_tree_unmark(u);
	if (old && up_may_write(u)) {
		manifest_tree_path(old, path, sizeof(path));
		backing_remove(u->backing, path);
	}
	return 0;
}

/* T6: the unmount's last tree manifest, tried again while its put fails;
 * a give-up is logged and marked in the catalog (upload.h U10). Workers
 * have left: only this thread writes the tree. */
static void up_tree_drain(struct uploader *u)
{
	if (cat_is_shared(u->cat)) {
		(void)up_tree(u); /* the duty holder's (T1) */
		return;
	}
	double until = up_mono_s() + UP_TREE_DRAIN_S;
	unsigned backoff_ms = UP_BACKOFF_MIN_MS;
	int rc;
	while ((rc = up_tree(u)) != 0 && rc != -EAGAIN && rc != -EROFS &&
	       up_mono_s() + backoff_ms / 1000.0 < until) {
		log_warn("unmount: the tree manifest (the files outside generations) could not be"
			 " put on BACKING %s (%s); trying again in %u ms", backing_spec(u->backing),
			 strerror(-rc), backoff_ms);
		struct timespec ts = { backoff_ms / 1000, (long)(backoff_ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
		backoff_ms = backoff_ms * 2 > UP_BACKOFF_MAX_MS ? UP_BACKOFF_MAX_MS : backoff_ms * 2;
	}
	if (rc == 0)
		return;
	char why[256];
	if (rc == -EAGAIN)
		snprintf(why, sizeof(why), "files outside generations name chunks not on BACKING"
			 " yet (their uploads stay queued)");
	else if (rc == -EROFS)
		snprintf(why, sizeof(why), "this daemon no longer held BACKING's claim");
	else
		snprintf(why, sizeof(why), "its put failed for %.0f s: %s", UP_TREE_DRAIN_S,
			 strerror(-rc));
	log_error("unmount: the tree manifest (the files outside generations: `latest`,"
		  " `last.ckpt`, a final model) is not on BACKING %s: %s; a new cache on this"
		  " BACKING would see them as of an older tree manifest; the next mount of cache"
		  " %s writes it", backing_spec(u->backing), why, u->cfg.cache_dir);
	if (cat_tree_unwritten_set(u->cat, why) == 0)
		u->tree_marked = true;
}

static int up_tree_newest(void *arg, const char *name)
{
	uint64_t *newest = arg, seq;
	if (manifest_tree_name_parse(name, &seq) == 0 && seq > *newest)
		*newest = seq;
	return 0;
}

/* At start: the newest tree manifest on BACKING is ours to replace (alone;
 * shared, the writer lists them each time: manifest_shared.h D5). */
static void up_tree_find(struct uploader *u)
{
	if (cat_is_shared(u->cat))
		return;
	uint64_t newest = 0;
	if (backing_list(u->backing, "manifests/tree", up_tree_newest, &newest) == 0)
		u->tree_seq = newest;
}

/* ---- the tree manifest of a shared catalog (manifest_shared.h D4, D5) ----
 *
 *   idle check (UP_TREE_EVERY_S) ─▶ duty "tree" taken? ─no─▶ forget fp, done
 *     │yes
 *   fingerprint (PostgreSQL) same as written, or a chunk not uploaded? ─▶ done
 *     │
 *   build (one snapshot) ─▶ list manifests/tree ─▶ duty again ─▶ put seq ─▶ remove the listed
 *
 *  T1. Only the holder of the duty writes, and it builds from PostgreSQL:
 *      no node writes its local catalog's (root-only) tree in shared mode.
 *  T2. seq > every tree manifest listed before the put, and >= the server's
 *      clock at the snapshot: the newest name is the newest snapshot, also
 *      across a change of holder.
 *  T3. A tree manifest is removed only by the writer of a newer one, once
 *      that one's put succeeded; only those it listed (all below its seq).
 *  T4. The writer records the horizon of D6 once its put succeeded (the
 *      fingerprint's clock, read before the build's snapshot) and, while
 *      the tree is unchanged, every UP_TREE_NOTE_NS (the clock of the
 *      fingerprint before the one that found it unchanged), so that the
 *      reclaim duty's wait for it ends (catalog_shared_reclaim.c R9). */

/* The tree manifests on BACKING, by seq. */
struct up_tree_seen {
	uint64_t *seq;
	size_t n, cap;
	bool oom;
};

static int up_tree_seen_fn(void *arg, const char *name)
{
	struct up_tree_seen *l = arg;
	uint64_t seq;
	if (manifest_tree_name_parse(name, &seq) != 0)
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		uint64_t *p = realloc(l->seq, cap * sizeof(*p));
		if (p == NULL) {
			l->oom = true;
			return 1;
		}
		l->seq = p;
		l->cap = cap;
	}
	l->seq[l->n++] = seq;
	return 0;
}

/* Takes or extends the duty; a node that does not hold it forgets what it
 * wrote, so that on its next turn it writes the tree again (the holder
 * meanwhile may have written a newer one, or none). */
static bool up_tree_duty(struct uploader *u)
{
	bool taken = false;
	if (cat_duty_take(u->cat, MANIFEST_SHARED_TREE_DUTY, UP_TREE_DUTY_MS, &taken) != 0)
		taken = false;
	if (!taken) {
		pthread_mutex_lock(&u->lock);
		u->tree_fp[0] = 0;
		pthread_mutex_unlock(&u->lock);
	}
	return taken;
}

/* Puts buf under a seq above the server's clock at its snapshot and above
 * every tree manifest on BACKING, then removes those (D5). */
static void up_tree_put(struct uploader *u, const char *buf, size_t len, int64_t now_ns,
			const char *fp, int64_t horizon_ns)
{
	struct up_tree_seen seen = { 0 };
	int rc = backing_list(u->backing, "manifests/tree", up_tree_seen_fn, &seen);
	if (rc == -ENOENT)
		rc = 0; /* none yet */
	if (rc != 0 || seen.oom) {
		free(seen.seq);
		return; /* retried on the next idle round */
	}
	uint64_t seq = now_ns > 0 ? (uint64_t)now_ns : 1;
	for (size_t i = 0; i < seen.n; i++) {
		if (seen.seq[i] == UINT64_MAX) { /* no name above it: not ours to follow */
			log_error("BACKING %s: a tree manifest is named with the largest seq; remove"
				  " it so that the tree outside generations can be written",
				  backing_spec(u->backing));
			free(seen.seq);
			return;
		}
		if (seen.seq[i] >= seq)
			seq = seen.seq[i] + 1;
	}
	char path[MANIFEST_PATH_MAX];
	manifest_tree_path(seq, path, sizeof(path));
	/* the duty again right before the put: a turn that ran out meanwhile
	 * leaves the writing to the new holder */
	if (up_tree_duty(u) && backing_put(u->backing, path, buf, len) == 0) {
		pthread_mutex_lock(&u->lock);
		u->tree_seq = seq;
		snprintf(u->tree_fp, sizeof(u->tree_fp), "%s", fp);
		u->st.manifests++;
		u->tree_noted_ns = horizon_ns;
		pthread_mutex_unlock(&u->lock);
		manifest_shared_tree_described(u->cat, horizon_ns); /* T4 */
		for (size_t i = 0; i < seen.n; i++) { /* older, and ours is on BACKING */
			manifest_tree_path(seen.seq[i], path, sizeof(path));
			backing_remove(u->backing, path);
		}
	}
	free(seen.seq);
}

static void up_tree_shared(struct uploader *u)
{
	char fp[128], built_fp[128];
	bool all_uploaded = false;
	int64_t clock_ns = 0;
	if (!up_tree_duty(u))
		return;
	if (manifest_shared_tree_fingerprint(u->cat, fp, sizeof(fp), &all_uploaded, &clock_ns) != 0 ||
	    !all_uploaded)
		return;
	pthread_mutex_lock(&u->lock);
	bool same = strcmp(fp, u->tree_fp) == 0;
	int64_t before = u->tree_clock_ns; /* read before this fingerprint's snapshot */
	u->tree_clock_ns = clock_ns;
	bool note = same && before > u->tree_noted_ns + UP_TREE_NOTE_NS;
	if (note)
		u->tree_noted_ns = before;
	pthread_mutex_unlock(&u->lock);
	if (note)
		manifest_shared_tree_described(u->cat, before); /* T4 */
	if (same)
		return;
	char *buf = NULL;
	size_t len = 0;
	int64_t now_ns = 0;
	if (manifest_shared_tree_build(u->cat, &buf, &len, built_fp, sizeof(built_fp), &now_ns) != 0)
		return; /* -EAGAIN: a chunk not uploaded yet; else logged */
	up_tree_put(u, buf, len, now_ns, built_fp, clock_ns);
	free(buf);
}

/* ---- workers ---- */

static bool up_any_busy(struct uploader *u)
{
	for (int i = 0; i < u->n_workers; i++)
		for (int k = 0; k < UP_BATCH_MAX; k++)
			if (u->busy[i][k].set)
				return true;
	return false;
}

static void up_busy_set(struct uploader *u, int id, int k, const struct cat_upload *row)
{
	/* U4: a slot is taken only free, by its own worker, for a row no
	 * other worker has in hand (up_pick checked up_conflicts) */
	assert(id >= 0 && id < u->n_workers && k >= 0 && k < UP_BATCH_MAX);
	assert(!u->busy[id][k].set);
	u->busy[id][k] = (struct up_busy){ true, row->seq, row->gen, row->kind, { 0 } };
	memcpy(u->busy[id][k].hash, row->hash, HASH_LEN);
}

/* B7: worker id begins (on) or ends the work of the rows it has in hand.
 * u->lock held. */
static void up_work_mark(struct uploader *u, int id, bool on)
{
	assert(id >= 0 && id < u->n_workers);
	u->work_since[id] = on ? up_mono_s() : 0;
}

/* U4's rows of one hash: a chunk's, or a pack's removal (its name). */
static bool up_keyed_by_hash(int kind)
{
	return kind == UP_CHUNK || kind == UP_DELETE_CHUNK || kind == UP_DELETE_PACK;
}

/* uppack.h Q3: a worker is putting the pack of that name. */
static bool up_pack_in_hand(struct uploader *u, const uint8_t name[HASH_LEN])
{
	for (int i = 0; i < u->n_workers; i++)
		if (u->pack_busy_set[i] && memcmp(u->pack_busy[i], name, HASH_LEN) == 0)
			return true;
	return false;
}

static bool up_conflicts(struct uploader *u, const struct cat_upload *row)
{
	for (size_t i = 0; i < u->n_lost; i++)
		if (u->lost_seq[i].seq == row->seq)
			return true; /* lost: not tried again before the next mount */
	if (row->kind == UP_DELETE_PACK && up_pack_in_hand(u, row->hash))
		return true;
	for (int i = 0; i < u->n_workers * UP_BATCH_MAX; i++) {
		const struct up_busy *b = &u->busy[i / UP_BATCH_MAX][i % UP_BATCH_MAX];
		if (!b->set)
			continue;
		if (b->seq == row->seq)
			return true;
		bool b_chunk = up_keyed_by_hash(b->kind), r_chunk = up_keyed_by_hash(row->kind);
		if (b_chunk && r_chunk && memcmp(b->hash, row->hash, HASH_LEN) == 0)
			return true;
		if (!b_chunk && !r_chunk && b->gen == row->gen)
			return true;
	}
	return false;
}

/* Of the chunk rows cand[0..n), those that may start go to out (the
 * stale ones end here): their readiness, and in shared mode their upload
 * claims, asked in one call (catalog_shared_data.c S8). Returns how many. */
static int up_ready_chunks(struct uploader *u, const struct cat_upload *cand, int n,
			   struct cat_upload *out)
{
	bool ready[UP_BATCH_MAX], stale[UP_BATCH_MAX];
	struct cat_upload moot[UP_BATCH_MAX];
	assert(n > 0 && n <= UP_BATCH_MAX);
	if (cat_upload_ready_many(u->cat, cand, (size_t)n, ready, stale) != 0)
		return 0; /* asked again at the next pick */
	int k = 0, m = 0;
	for (int i = 0; i < n; i++) {
		if (stale[i]) /* moot: unpublished, reclaimed or on BACKING already */
			moot[m++] = cand[i];
		else if (ready[i])
			out[k++] = cand[i];
	}
	if (m > 0) /* ended together, marking nothing (upload.h U7) */
		cat_upload_moot_many(u->cat, moot, (size_t)m);
	return k;
}

static bool up_hash_in(const struct cat_upload *rows, int n, const uint8_t hash[HASH_LEN])
{
	for (int i = 0; i < n; i++)
		if (memcmp(rows[i].hash, hash, HASH_LEN) == 0)
			return true;
	return false;
}

static void up_deadline_check(struct uploader *u, const struct cat_upload *oldest)
{
	int64_t age_s = (up_now_ns() - oldest->enqueued_ns) / 1000000000;
	if (oldest->enqueued_ns > 0 && age_s > (int64_t)u->cfg.deadline_s &&
	    oldest->seq > u->deadline_warned) {
		u->deadline_warned = oldest->seq;
		log_warn("upload queue: the oldest upload (row %" PRIu64 ") has waited %" PRId64
			 " s, past the %u s deadline; %s", oldest->seq, age_s, u->cfg.deadline_s,
			 u->down ? "BACKING is not answering" : "BACKING is slow");
	}
}

/* Picks the oldest rows that may start, into out: one row of any kind, or
 * up to max chunk rows of distinct hashes (U4), whose readiness is asked
 * together (one PostgreSQL round trip in shared mode, not one a row).
 * A short queue goes to one worker whole rather than shared out: its one
 * claim and its batch's one marking serve all of it, where the node's one
 * PostgreSQL connection is the FUSE path's too; a long one keeps every
 * worker busy, each with a batch. With max 1, a pick is one row, as
 * always. Chunk rows fewer than min are not asked about (B1): they wait,
 * and *waiting says that some did. Returns how many; u->lock held. */
static int up_pick(struct uploader *u, struct cat_upload *out, int max, int min, bool *waiting)
{
	assert(max >= 1 && max <= UP_BATCH_MAX && min >= 1 && min <= max);
	*waiting = false;
	struct cat_upload rows[UP_LOOKAHEAD], cand[UP_BATCH_MAX];
	uint64_t after = 0;
	int n = UP_LOOKAHEAD;
	/* A full page whose rows all wait must not hide the rows after it:
	 * removals wait for manifests (upload.h U5, U6), which may wait for
	 * chunk rows queued after them. */
	for (int page = 0; n == UP_LOOKAHEAD; page++) {
		n = cat_upload_list(u->cat, after, rows, UP_LOOKAHEAD);
		int nc = 0;
		for (int i = 0; i < n || nc > 0;) {
			if (i < n && up_conflicts(u, &rows[i])) {
				i++;
				continue;
			}
			bool chunk = i < n && rows[i].kind == UP_CHUNK;
			if (chunk && up_hash_in(cand, nc, rows[i].hash)) {
				i++; /* U4: it waits for the one in cand */
				continue;
			}
			if (chunk) { /* nc < max here: cand is asked as soon as it is full */
				cand[nc++] = rows[i++];
				if (nc < max)
					continue;
			}
			if (nc > 0 && nc < min) { /* B1: a short set waits, row i goes on alone */
				*waiting = true;
				nc = 0;
				continue;
			}
			if (nc > 0) { /* cand is full, or row i is of another kind, or the end */
				int k = up_ready_chunks(u, cand, nc, out);
				if (k > 0)
					return k;
				nc = 0;
				continue; /* none may start: row i is looked at now */
			}
			const struct cat_upload *row = &rows[i++]; /* another kind: alone */
			bool ready = false, stale = false;
			if (cat_upload_ready(u->cat, row, &ready, &stale) != 0)
				continue;
			if (stale && row->kind == UP_GEN_MANIFEST && cat_is_shared(u->cat)) {
				out[0] = *row; /* B2 (b): a worker looks whether a put of it is left */
				return 1;
			}
			if (stale) { /* moot: the generation changed since */
				cat_upload_moot_many(u->cat, row, 1);
				continue;
			}
			if (ready) {
				out[0] = *row;
				return 1;
			}
		}
		if (page == 0 && n > 0)
			up_deadline_check(u, &rows[0]);
		if (n > 0)
			after = rows[n - 1].seq;
	}
	return 0;
}

/* B3: chunk rows of the files whose close waits (uploader_wait_pending),
 * before the queue's order, up to max of distinct hashes that may start
 * (into out, as up_pick's); 0 when none waits. u->lock held. */
static int up_pick_urgent(struct uploader *u, struct cat_upload *out, int max)
{
	u->urgent_new = false;
	if (u->urgent == 0)
		return 0;
	struct cat_upload rows[UP_BATCH_MAX], cand[UP_BATCH_MAX];
	int nc = 0;
	for (int w = 0; w < UP_URGENT_MAX && nc < max; w++) {
		if (u->urgent_ino[w] == 0)
			continue;
		int n = cat_upload_list_pending(u->cat, u->urgent_ino[w], rows, max - nc);
		for (int i = 0; i < n; i++) /* U4: one row a hash, none another worker has */
			if (!up_conflicts(u, &rows[i]) && !up_hash_in(cand, nc, rows[i].hash))
				cand[nc++] = rows[i];
	}
	return nc > 0 ? up_ready_chunks(u, cand, nc, out) : 0;
}

/* BACKING took a row: a recovery logged, backoff reset; closes wait for
 * their uploads again (B7). u->lock held. */
static void up_note_success(struct uploader *u)
{
	if (u->down || u->unanswered)
		log_info("BACKING %s answers again; uploads go on%s", backing_spec(u->backing),
			 u->unanswered ? ", and closes of small files outside generations wait for"
					 " theirs again (uploader.h B7)" : "");
	u->down = false;
	u->unanswered = false;
	u->backoff_ms = 0;
}

/* B5: the holds of a lost row failed (u->lock held): tried again after the
 * backoff, which doubles while they keep failing. */
static void up_hold_later(struct uploader *u)
{
	u->hold_backoff_ms = u->hold_backoff_ms ? 2 * u->hold_backoff_ms : UP_HOLD_RETRY_MIN_MS;
	if (u->hold_backoff_ms > UP_HOLD_RETRY_MAX_MS)
		u->hold_backoff_ms = UP_HOLD_RETRY_MAX_MS;
	u->hold_at = up_mono_s() + u->hold_backoff_ms / 1000.0;
}

/* A chunk whose cache copy is missing or damaged before its upload
 * (-EUCLEAN, logged with its hash by up_chunk_lost or up_chunk_read) is not
 * on BACKING: its row is not ended, which would mark it uploaded (upload.h
 * U7), so the generations naming it never become durable, and it stays
 * dirty, never evicted. The row stays queued with the reason, and this run
 * does not pick it again (each mount tries it once more). The saves naming
 * it are held (generation.h G12); if that fails, it is tried again (B5).
 * false: no memory to remember it, the caller backs off as after a failure
 * (the row is picked again, and found lost again). */
static bool up_lost(struct uploader *u, const struct cat_upload *row)
{
	char hex[HASH_HEX_LEN + 1];
	assert(row->kind == UP_CHUNK);
	hash_to_hex(row->hash, hex);
	cat_upload_failed(u->cat, row->seq, UP_LOST_ERROR " the cache copy is missing or damaged and"
			  " BACKING does not have it; `ckptfs-admin verify` names its files");
	/* generation.h G12: a save naming it can never become durable: held, so
	 * keep does not count it and `wait` names it; nothing is deleted */
	int held = cat_gen_hold_lost_chunk(u->cat, row->hash);
	if (held < 0)
		log_error("uploader: chunk %.16s… lost: holding the saves that name it failed: %s;"
			  " tried again until it succeeds (uploader.h B5)", hex, strerror(-held));
	pthread_mutex_lock(&u->lock);
	if (u->n_lost == u->cap_lost) {
		size_t cap = u->cap_lost ? 2 * u->cap_lost : 16;
		struct up_lost_row *v = realloc(u->lost_seq, cap * sizeof(*v));
		if (v) {
			u->lost_seq = v;
			u->cap_lost = cap;
		}
	}
	bool kept = u->n_lost < u->cap_lost;
	if (kept) {
		struct up_lost_row *l = &u->lost_seq[u->n_lost++];
		l->seq = row->seq;
		memcpy(l->hash, row->hash, HASH_LEN);
		l->hold = held < 0;
		if (l->hold && u->n_hold++ == 0)
			up_hold_later(u);
	}
	u->last_progress = up_mono_s();
	u->st.failures++;
	/* `ckptfs-admin stats` shows it: which chunk */
	snprintf(u->st.last_error, sizeof(u->st.last_error), "chunk %s lost: its cache copy is"
		 " missing or damaged", hex);
	pthread_cond_broadcast(&u->changed);
	pthread_cond_broadcast(&u->kick);
	pthread_mutex_unlock(&u->lock);
	return kept;
}

/* B5: the holds of the oldest lost row whose holds failed, tried again once
 * its time came, by one worker at a time. true if it tried; u->lock held,
 * dropped inside. */
static bool up_lost_retry(struct uploader *u)
{
	if (u->n_hold == 0 || u->holding || up_mono_s() < u->hold_at)
		return false;
	size_t i = 0;
	while (!u->lost_seq[i].hold) /* n_hold of them are */
		i++;
	assert(i < u->n_lost);
	uint8_t hash[HASH_LEN];
	memcpy(hash, u->lost_seq[i].hash, HASH_LEN);
	u->holding = true;
	pthread_mutex_unlock(&u->lock);
	int held = cat_gen_hold_lost_chunk(u->cat, hash);
	pthread_mutex_lock(&u->lock);
	u->holding = false;
	if (held < 0) {
		up_hold_later(u);
		return true;
	}
	u->lost_seq[i].hold = false; /* rows are only ever added: i is still this one */
	u->n_hold--;
	u->hold_backoff_ms = 0; /* the next one, if any, at once */
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	log_info("uploader: chunk %.16s… lost: the saves that name it are held now (%d), and its"
		 " finding is recorded (uploader.h B5)", hex, held);
	return true;
}

/* A row found moot ends marking nothing (upload.h U7); BACKING answered. */
static void up_finish_moot(struct uploader *u, const struct cat_upload *row)
{
	int rc = cat_upload_moot_many(u->cat, row, 1);
	pthread_mutex_lock(&u->lock);
	u->last_progress = up_mono_s();
	if (rc != 0)
		u->st.failures++; /* the row stays queued and is looked at again */
	pthread_cond_broadcast(&u->changed);
	pthread_cond_broadcast(&u->kick);
	pthread_mutex_unlock(&u->lock);
}

/* What a failed row's rc means, for the queue's row and the stats. */
static const char *up_failure_reason(const struct cat_upload *row, int rc)
{
	if (rc == -EEXIST && row->kind == UP_GEN_MANIFEST) /* B4 */
		return "another save's manifest is at its path on BACKING: not overwritten"
		       " (uploader.h B4)";
	return strerror(-rc);
}

static void up_finish(struct uploader *u, const struct cat_upload *row, int rc, uint64_t bytes)
{
	pthread_mutex_lock(&u->lock);
	uploader_between_fn *between = u->between;
	void *between_arg = u->between_arg;
	pthread_mutex_unlock(&u->lock);
	if (between)
		between(between_arg, row);
	if (rc == UP_MOOT) {
		up_finish_moot(u, row);
		return;
	}
	if (rc == -EUCLEAN && row->kind == UP_CHUNK && up_lost(u, row))
		return;
	if (rc == -EUCLEAN && row->kind == UP_CHUNK)
		rc = -ENOMEM; /* not remembered: retried after a backoff, never marked */
	assert(rc != -EUCLEAN || row->kind != UP_CHUNK); /* upload.h U7 */
	if (rc == 0 || rc == -EUCLEAN) {
		if (rc != 0)
			cat_upload_failed(u->cat, row->seq, "the cache copy is missing or damaged");
		/* a manifest rewritten for a pin change leaves durability as it
		 * was: only a generation that just became durable asks for keep
		 * (keep runs after commits and at mount, not after an unpin) */
		bool was_durable = false;
		if (row->kind == UP_GEN_MANIFEST && cat_gen_durable(u->cat, row->gen, &was_durable) != 0)
			was_durable = false;
		if (cat_upload_done(u->cat, row) == 0 && rc == 0) {
			if (row->kind == UP_CHUNK)
				cache_dirty_done(u->cache, bytes);
			else if (row->kind == UP_GEN_MANIFEST && !was_durable && u->on_durable)
				u->on_durable(u->durable_arg, row->gen);
		}
	} else {
		char msg[160];
		snprintf(msg, sizeof(msg), "%s", up_failure_reason(row, rc));
		cat_upload_failed(u->cat, row->seq, msg);
	}
	pthread_mutex_lock(&u->lock);
	u->last_progress = up_mono_s();
	if (rc == 0 || rc == -EUCLEAN) {
		up_note_success(u);
		if (rc == 0 && row->kind == UP_CHUNK) {
			u->st.chunks++;
			u->st.chunk_bytes += bytes;
		} else if (rc == 0 && row->kind == UP_GEN_MANIFEST) {
			u->st.manifests++;
		} else if (rc == 0) {
			u->st.removals++;
		}
	} else {
		u->st.failures++;
		snprintf(u->st.last_error, sizeof(u->st.last_error), "%s", up_failure_reason(row, rc));
		u->backoff_ms = u->backoff_ms ? u->backoff_ms * 2 : UP_BACKOFF_MIN_MS;
		if (u->backoff_ms > UP_BACKOFF_MAX_MS)
			u->backoff_ms = UP_BACKOFF_MAX_MS;
		assert(u->backoff_ms >= UP_BACKOFF_MIN_MS);
		u->down_until = up_mono_s() + u->backoff_ms / 1000.0;
		if (!u->down)
			log_warn("BACKING %s: upload failed (%s); retrying with backoff, nothing is"
				 " dropped", backing_spec(u->backing), strerror(-rc));
		u->down = true;
	}
	pthread_cond_broadcast(&u->changed);
	pthread_cond_broadcast(&u->kick);
	pthread_mutex_unlock(&u->lock);
}

struct up_worker_arg {
	struct uploader *u;
	int id;
};

static void up_wait(struct uploader *u, double seconds)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long ns = ts.tv_nsec + (long)((seconds - (long)seconds) * 1e9);
	ts.tv_sec += (time_t)seconds + ns / 1000000000;
	ts.tv_nsec = ns % 1000000000;
	pthread_cond_timedwait(&u->kick, &u->lock, &ts);
}

/* Chunk rows a worker has put unsynced (backing invariant 1b): they stay in
 * the queue and busy until one backing_sync makes them all durable (U1). */
struct up_batch {
	int n;
	uint64_t total;
	double until; /* shared: monotonic s its linger ends (B1); 0: it does not linger */
	struct cat_upload row[UP_BATCH_MAX];
	uint64_t bytes[UP_BATCH_MAX];
	bool packed[UP_BATCH_MAX]; /* B6: row[k] is a member of pack */
	struct uppack pack;
	double pack_until; /* B6: monotonic s its wait for more members ends; 0: none */
};

/* The batch's bookkeeping once its rows ended (up_finish's for uploaded chunks). */
static void up_batch_count(struct uploader *u, const struct up_batch *bt)
{
	uint64_t total = 0;
	for (int k = 0; k < bt->n; k++) {
		cache_dirty_done(u->cache, bt->bytes[k]);
		total += bt->bytes[k];
	}
	pthread_mutex_lock(&u->lock);
	u->last_progress = up_mono_s();
	up_note_success(u);
	u->st.chunks += (uint64_t)bt->n;
	u->st.chunk_bytes += total;
	pthread_cond_broadcast(&u->changed);
	pthread_mutex_unlock(&u->lock);
}

/* B6: the pack and the batch's loose objects are durable: T2 (uppack.h Q1).
 * If it fails, no member row may end as a loose upload (that would call
 * uploaded a loose object nobody put): they stay queued, the pack is put
 * again under the same name (pack.h P2); the loose rows end one by one. */
static void up_batch_done_packed(struct uploader *u, struct up_batch *bt)
{
	struct cat_upload loose[UP_BATCH_MAX];
	size_t n_loose = 0, taken = 0;
	for (int k = 0; k < bt->n; k++)
		if (!bt->packed[k])
			loose[n_loose++] = bt->row[k];
	int rc = uppack_done(&bt->pack, u->cat, loose, n_loose, &taken);
	if (rc != 0) {
		uppack_unnamed(&bt->pack, u->cat, u->backing, rc); /* Q2 */
		bool first = true;
		for (int k = 0; k < bt->n; k++) {
			if (!bt->packed[k])
				up_finish(u, &bt->row[k], 0, bt->bytes[k]);
			else if (first) /* one failure, one backoff */
				up_finish(u, &bt->row[k], rc, bt->bytes[k]);
			else
				cat_upload_failed(u->cat, bt->row[k].seq, strerror(-rc));
			first = first && !bt->packed[k];
		}
		return;
	}
	for (uint32_t i = 0; i < bt->pack.n; i++)
		store_uploaded(u->store, bt->pack.rows[i].hash);
	pthread_mutex_lock(&u->lock);
	u->st.packs++;
	u->st.packed_chunks += taken;
	pthread_mutex_unlock(&u->lock);
	up_batch_count(u, bt);
}

/* The batch is durable on BACKING: its rows end in one transaction, then
 * the bookkeeping of up_finish for uploaded chunks. */
static void up_batch_done(struct uploader *u, struct up_batch *bt)
{
	if (bt->pack.n > 0) {
		up_batch_done_packed(u, bt);
		return;
	}
	if (cat_upload_done_many(u->cat, bt->row, (size_t)bt->n) != 0) {
		for (int k = 0; k < bt->n; k++) /* one at a time, as up_finish would */
			up_finish(u, &bt->row[k], 0, bt->bytes[k]);
		return;
	}
	up_batch_count(u, bt);
}

/* B6: an object read for a pack put loose after all, unsynced (the
 * batch's sync follows), after K3's mark: a hard link as up_chunk makes
 * it when BACKING can link and S2 vouches for the cache's file unread
 * (one copy on disk), else — a row of small.db, a file not vouched for,
 * gone since — a copy of its verified image (img, len). */
static int up_put_loose(struct uploader *u, const uint8_t hash[HASH_LEN], const void *img,
			size_t len)
{
	char rel[128], src[128];
	store_object_relpath(hash, rel, sizeof(rel));
	int rc = cat_pack_loose(u->cat, hash); /* K3, before the put */
	if (rc != 0)
		return rc;
	size_t have = 0;
	rc = -EXDEV;
	if (!u->cfg.copy_uploads && backing_can_link(u->backing) &&
	    store_check_unread(u->store, hash, &have) == 0 && have == len) {
		int dirfd = store_object_at(u->store, hash, src, sizeof(src));
		rc = dirfd < 0 ? dirfd : backing_put_link(u->backing, rel, dirfd, src, false);
	}
	if (rc == -EXDEV || rc == -ENOENT)
		rc = backing_put_unsynced(u->backing, rel, img, len);
	if (rc == 0)
		store_uploaded(u->store, hash);
	return rc;
}

/* B6: the members go loose after all (a pack of one saves nothing, or a
 * removal of the same name is in hand), each from the builder's copy of
 * its verified image (up_put_loose). */
static int up_pack_loose(struct uploader *u, struct up_batch *bt)
{
	int rc = 0;
	for (uint32_t i = 0; i < bt->pack.b.n && rc == 0; i++) {
		const struct pack_entry *e = &bt->pack.b.m[i];
		rc = up_put_loose(u, e->hash, bt->pack.b.arena + e->off, e->len);
	}
	for (int k = 0; k < bt->n; k++)
		bt->packed[k] = false;
	uppack_reset(&bt->pack);
	return rc;
}

/* B6: the batch's pack, built and put (uppack.h Q1-Q3) before the batch's
 * sync; members of a pack that cannot be had go loose. u->lock not held. */
static int up_pack_put(struct uploader *u, int id, struct up_batch *bt)
{
	if (bt->pack.n == 0)
		return 0;
	if (!up_may_write(u))
		return -EROFS; /* claim.h 9: nothing new on BACKING; the rows stay queued */
	if (bt->pack.n < 2 || uppack_build(&bt->pack) != 0)
		return up_pack_loose(u, bt);
	pthread_mutex_lock(&u->lock);
	bool busy = false; /* Q3: its removal in hand (U4 for the name) */
	for (int i = 0; i < u->n_workers * UP_BATCH_MAX && !busy; i++) {
		const struct up_busy *b = &u->busy[i / UP_BATCH_MAX][i % UP_BATCH_MAX];
		busy = b->set && b->kind == UP_DELETE_PACK &&
		       memcmp(b->hash, bt->pack.name, HASH_LEN) == 0;
	}
	if (!busy) {
		memcpy(u->pack_busy[id], bt->pack.name, HASH_LEN);
		u->pack_busy_set[id] = true;
	}
	pthread_mutex_unlock(&u->lock);
	if (busy)
		return up_pack_loose(u, bt);
	return uppack_put(&bt->pack, u->cat, u->backing);
}

/* Syncs BACKING and finishes the batch's rows; u->lock held, dropped inside. */
static void up_batch_flush(struct uploader *u, int id, struct up_batch *bt)
{
	assert(bt->n > 0 && bt->n <= UP_BATCH_MAX);
	up_work_mark(u, id, true); /* B7 */
	pthread_mutex_unlock(&u->lock);
	int rc = up_pack_put(u, id, bt);
	if (rc == 0)
		rc = backing_sync(u->backing);
	if (rc == 0) {
		up_batch_done(u, bt);
	} else {
		up_finish(u, &bt->row[0], rc, bt->bytes[0]); /* one failure, one backoff */
		for (int k = 1; k < bt->n; k++)
			cat_upload_failed(u->cat, bt->row[k].seq, strerror(-rc));
	}
	uppack_reset(&bt->pack);
	pthread_mutex_lock(&u->lock);
	up_work_mark(u, id, false);
	u->pack_busy_set[id] = false;
	for (int k = 0; k < bt->n; k++) {
		assert(u->busy[id][k].set && u->busy[id][k].seq == bt->row[k].seq);
		u->busy[id][k].set = false;
		bt->packed[k] = false;
	}
	bt->n = 0;
	bt->pack_until = 0;
	bt->total = 0;
	pthread_cond_broadcast(&u->kick);
}

/* Puts the chunk rows picked[0..n) in turn: a small object joins the
 * batch, a large one (or a failure) is finished at once. All are in hand
 * (busy) from the start, in the slots after the batch's; a row that joins
 * the batch moves down to the batch's next slot. A stop, or BACKING
 * failing, leaves the rows not yet started queued. u->lock held, dropped
 * inside. */
static void up_batch_add(struct uploader *u, int id, struct up_batch *bt,
			 const struct cat_upload *picked, int n, struct up_buffers *bufs)
{
	int first = bt->n;
	assert(n >= 1 && first + n <= UP_BATCH_MAX); /* a full batch was flushed when it filled */
	for (int j = 0; j < n; j++)
		up_busy_set(u, id, first + j, &picked[j]);
	for (int j = 0; j < n; j++) {
		int s = first + j; /* slots [bt->n, s) are free, [s, first + n) in hand */
		/* B3: a close began waiting: the rows not put yet go back to the
		 * queue, so that the next pick takes its rows first */
		if ((u->stopping && !u->draining) || up_mono_s() < u->down_until ||
		    (j > 0 && u->urgent_new)) {
			for (; s < first + n; s++)
				u->busy[id][s].set = false;
			return;
		}
		up_work_mark(u, id, true); /* B7 */
		pthread_mutex_unlock(&u->lock);
		uint64_t bytes = 0;
		bool deferred = false;
		size_t pack_len = 0;
		int rc = up_chunk(u, &picked[j], bufs, true, &deferred, &bytes, &pack_len);
		bool packed = rc == 0 && pack_len > 0 &&
			      uppack_add(&bt->pack, &picked[j], bufs->obj, pack_len) == 0;
		if (rc == 0 && pack_len > 0 && !packed) /* B6: loose after all */
			rc = up_put_loose(u, picked[j].hash, bufs->obj, pack_len);
		bool fenced = rc == -EROFS && !up_may_write(u); /* the row stays queued */
		if ((rc != 0 || !deferred) && !fenced) /* failed, or durable already (a large object) */
			up_finish(u, &picked[j], rc, bytes);
		pthread_mutex_lock(&u->lock);
		up_work_mark(u, id, false);
		assert(u->busy[id][s].set && u->busy[id][s].seq == picked[j].seq);
		if (rc != 0 || !deferred) {
			u->busy[id][s].set = false;
			continue;
		}
		int k = bt->n;
		if (k != s) {
			u->busy[id][k] = u->busy[id][s];
			u->busy[id][s].set = false;
		}
		bt->row[k] = picked[j];
		bt->bytes[k] = bytes;
		bt->packed[k] = packed;
		bt->n++;
		bt->total += bytes;
		if (bt->n == UP_BATCH_MAX || bt->total >= UP_BATCH_BYTES || uppack_full(&bt->pack))
			up_batch_flush(u, id, bt);
	}
}

/* B6: a batch with pack members and room waits up to UP_PACK_LINGER_S
 * from its first idle pick for more rows (the writers' next files) before
 * it is put: else an uploader that keeps up with the writers puts packs of
 * one. A stop or a close waiting for its chunks (B3) ends the wait.
 * u->lock held; true while it waits. */
static bool up_pack_waits(struct uploader *u, struct up_batch *bt, double now)
{
	if (bt->pack.n == 0 || uppack_full(&bt->pack) || u->stopping || u->urgent > 0) {
		bt->pack_until = 0;
		return false;
	}
	if (bt->pack_until == 0)
		bt->pack_until = now + UP_PACK_LINGER_S;
	if (now >= bt->pack_until) {
		bt->pack_until = 0;
		return false;
	}
	up_wait(u, bt->pack_until - now);
	return true;
}

static void *up_worker_main(void *p)
{
	struct up_worker_arg *a = p;
	struct uploader *u = a->u;
	int id = a->id;
	free(a);
	pthread_setname_np(pthread_self(), "ckptfs-upload"); /* for top -H and perf */
	/* up_chunk answers -ENOMEM (retried later) if these could not be had */
	struct up_buffers bufs = { up_aligned(u->object_cap), malloc(u->cfg.chunk_max) };
	/* over nfs:// every put commits by itself: nothing to batch */
	bool batching = !backing_is_nfs(u->backing) || u->packs; /* B6: packs batch */
	/* with a shared catalog, a batch takes as many chunk rows as it has
	 * room for in one pick (one round trip asks them all, S8); alone, a
	 * row a pick, as their readiness is local and costs nothing */
	bool multi = batching && cat_is_shared(u->cat);
	bool took = false; /* rows picked since the last tree round (T7) */
	struct up_batch *bt = calloc(1, sizeof(*bt));
	if (bt)
		uppack_init(&bt->pack);
	pthread_mutex_lock(&u->lock);
	for (;;) {
		if (u->stopping && !u->draining)
			break; /* a batch not synced stays queued for the next mount */
		if (up_lost_retry(u)) /* B5: a lost chunk's holds that failed */
			continue;
		if (!up_may_write(u)) { /* fenced (claim.h 9): what is queued stays */
			if (bt && bt->n) /* put before the fence: synced, as ever */
				up_batch_flush(u, id, bt);
			else if (u->stopping && claim_lost(u->cfg.claim))
				break; /* unsure: a drain waits for a renewal (uploader_stop) */
			else
				up_wait(u, 1.0);
			continue;
		}
		double now = up_mono_s();
		if (now < u->down_until) {
			if (bt && bt->n)
				up_batch_flush(u, id, bt);
			else
				up_wait(u, u->down_until - now);
			continue;
		}
		/* T7: the tree manifest's round while the queue stays busy too,
		 * after rows this worker took, between batches (alone; the idle
		 * round below is the same) */
		if (id == 0 && took && !cat_is_shared(u->cat) && !(bt && bt->n) &&
		    now - u->tree_checked >= UP_TREE_EVERY_S) {
			u->tree_checked = now;
			took = false;
			up_work_mark(u, id, true); /* B7 */
			pthread_mutex_unlock(&u->lock);
			(void)up_tree(u); /* a failure: the next round tries again */
			pthread_mutex_lock(&u->lock);
			up_work_mark(u, id, false);
			continue;
		}
		struct cat_upload picked[UP_BATCH_MAX];
		bool linger = multi && bt; /* B1 */
		/* B6: alone with packs, a pick takes what fills the batch too
		 * (one listing of the queue for many small rows, not one each) */
		int room = linger || (u->packs && bt) ? UP_BATCH_MAX - bt->n : 1;
		/* B1: this worker's linger is over (or the uploader stops): what is
		 * queued now joins the batch, which then syncs */
		bool ended = linger && bt->until > 0 &&
			     (u->stopping || now >= bt->until || u->urgent > 0);
		bool waiting = false;
		int got = up_pick_urgent(u, picked, room); /* B3: a waiting close's rows first */
		bool urgent = got > 0;
		if (!urgent)
			got = up_pick(u, picked, room, linger && !u->stopping && !ended ? room : 1,
				      &waiting);
		took = took || got > 0;
		if (ended) {
			bt->until = 0;
			u->lingering--;
			if (got > 0 && picked[0].kind == UP_CHUNK)
				up_batch_add(u, id, bt, picked, got, &bufs);
			if (bt->n) {
				up_batch_flush(u, id, bt);
				continue;
			}
			if (got == 0 || picked[0].kind == UP_CHUNK)
				continue;
		} else if (got == 0 && linger && !u->stopping) {
			if (bt->until > 0) { /* lingering: a kick may bring a full set */
				up_wait(u, bt->until - now);
				continue;
			}
			if (waiting && u->lingering == 0) { /* a short set: it lingers */
				/* B3: a close waits for its chunks: the linger ends at once */
				double linger_s = u->cfg.linger_ms ? u->cfg.linger_ms / 1000.0 : UP_LINGER_S;
				bt->until = now + (u->urgent > 0 ? 0 : linger_s);
				u->lingering++;
				continue;
			} /* else another worker's linger takes it: idle below */
		}
		if (got == 0) {
			if (bt && bt->n && up_pack_waits(u, bt, now)) /* B6 */
				continue;
			if (bt && bt->n) { /* nothing more to put now: make the batch durable */
				up_batch_flush(u, id, bt);
				continue;
			}
			if (u->stopping) { /* draining: done when nothing is queued or in hand */
				struct cat_upload any;
				if (!up_any_busy(u) && cat_upload_list(u->cat, 0, &any, 1) == 0)
					break;
			}
			if (id == 0 && now - u->tree_checked >= UP_TREE_EVERY_S) {
				u->tree_checked = now;
				took = false;
				up_work_mark(u, id, true); /* B7 */
				pthread_mutex_unlock(&u->lock);
				(void)up_tree(u); /* a failure: the next idle round tries again */
				pthread_mutex_lock(&u->lock);
				up_work_mark(u, id, false);
				continue;
			}
			up_wait(u, 0.2);
			continue;
		}
		if (batching && bt && picked[0].kind == UP_CHUNK) {
			up_batch_add(u, id, bt, picked, got, &bufs);
			if (urgent && bt->n) /* B3: a close waits for them: synced now */
				up_batch_flush(u, id, bt);
			continue;
		}
		assert(got == 1); /* several only of chunk rows, for a batch */
		struct cat_upload row = picked[0];
		if (bt && bt->n) { /* other work waits for the batch (it may need its chunks) */
			up_batch_flush(u, id, bt);
			continue;
		}
		up_busy_set(u, id, 0, &row);
		up_work_mark(u, id, true); /* B7 */
		pthread_mutex_unlock(&u->lock);
		uint64_t bytes = 0;
		int rc = up_run(u, &row, &bufs, &bytes);
		if (rc != -EROFS || up_may_write(u)) /* fenced: the row stays queued */
			up_finish(u, &row, rc, bytes);
		pthread_mutex_lock(&u->lock);
		up_work_mark(u, id, false);
		assert(u->busy[id][0].set && u->busy[id][0].seq == row.seq);
		u->busy[id][0].set = false;
	}
	if (bt && bt->until > 0)
		u->lingering--;
	pthread_cond_broadcast(&u->kick);
	pthread_mutex_unlock(&u->lock);
	if (bt)
		uppack_reset(&bt->pack);
	free(bt);
	free(bufs.obj);
	free(bufs.plain);
	return NULL;
}

/* ---- public ---- */

int uploader_start(const struct uploader_config *cfg, struct cat *cat, struct store *store,
		   struct backing *backing, struct cache *cache, uploader_durable_fn *on_durable,
		   void *durable_arg, struct uploader **out)
{
	assert(cfg && cat && store && backing && out && cfg->chunk_max > 0);
	struct uploader *u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->cfg = *cfg;
	u->cat = cat;
	u->store = store;
	u->backing = backing;
	u->cache = cache;
	u->on_durable = on_durable;
	u->durable_arg = durable_arg;
	/* whole O_DIRECT blocks: see up_aligned */
	size_t cap = STORE_HEADER_LEN + codec_bound(u->cfg.chunk_max);
	u->object_cap = (cap + STORE_IO_ALIGN - 1) / STORE_IO_ALIGN * STORE_IO_ALIGN;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->kick, NULL);
	pthread_cond_init(&u->changed, NULL);
	u->packs = cfg->packs && !cat_is_shared(cat); /* B6 */
	if (!cat_is_shared(cat) && up_may_write(u))
		(void)uppack_orphans(cat, backing); /* K5: logged; the next mount tries again */
	up_tree_find(u);
	char why[256];
	if (!cat_is_shared(cat) && cat_tree_unwritten(cat, why, sizeof(why)) == 0 && why[0]) {
		u->tree_marked = true; /* T6: cleared by the first tree manifest written */
		log_warn("BACKING %s: the last unmount left the tree manifest (the files outside"
			 " generations) unwritten (%s); it is written now", backing_spec(backing), why);
	}
	int want = (int)(cfg->threads ? cfg->threads : backing_upload_threads(backing));
	if (want > UP_WORKERS_MAX)
		want = UP_WORKERS_MAX;
	pthread_mutex_lock(&u->lock);
	for (int i = 0; i < want; i++) {
		struct up_worker_arg *a = malloc(sizeof(*a));
		if (!a)
			break;
		*a = (struct up_worker_arg){ u, i };
		if (pthread_create(&u->worker[i], NULL, up_worker_main, a) != 0) {
			free(a);
			break;
		}
		u->n_workers++;
	}
	pthread_mutex_unlock(&u->lock);
	if (u->n_workers == 0) {
		uploader_stop(u, false);
		return -EAGAIN;
	}
	struct cat_cache_stats cs;
	if (cat_cache_stats(u->cat, &cs) == 0 && cs.queued > 0)
		log_info("upload queue: %" PRIu64 " uploads pending from before (%" PRIu64
			 " MiB of chunks): resuming", cs.queued, cs.dirty_bytes >> 20);
	*out = u;
	return 0;
}

static void up_progress(struct uploader *u, double started)
{
	struct cat_cache_stats cs;
	if (cat_cache_stats(u->cat, &cs) != 0)
		return;
	fprintf(stderr, "ckptfs: waiting for %" PRIu64 " uploads (%" PRIu64
		" MiB of chunks) to BACKING %s before exiting (%.0f s)%s\n", cs.queued,
		cs.dirty_bytes >> 20, backing_spec(u->backing), up_mono_s() - started,
		u->down ? ": BACKING is not answering, retrying" : "");
	log_info("unmount: %" PRIu64 " uploads (%" PRIu64 " MiB) still queued", cs.queued,
		 cs.dirty_bytes >> 20);
}

void uploader_stop(struct uploader *u, bool drain)
{
	if (!u)
		return;
	double started = up_mono_s(), said = started - 3; /* the first line at once */
	double unsure_since = 0, waited = 0; /* the claim unsure, not lost (claim.h 9) */
	if (drain) /* rows of changes still deferred are hidden from the queue until committed */
		cat_defer_commit(u->cat);
	pthread_mutex_lock(&u->lock);
	assert(!u->stopping); /* stopped once */
	u->stopping = true;
	u->draining = drain;
	pthread_cond_broadcast(&u->kick);
	if (drain) {
		/* workers leave when the queue is empty; report while they work */
		for (;;) {
			bool any = up_any_busy(u);
			struct cat_upload row;
			if (!any && cat_upload_list(u->cat, 0, &row, 1) == 0)
				break;
			/* unsure is not lost: a renewal may find the claim ours again
			 * within the lease; the queue is left only once it is lost, or
			 * after claim_timeout unsure */
			bool unsure = !any && !up_may_write(u);
			if (!unsure)
				unsure_since = 0;
			else if (unsure_since == 0)
				unsure_since = up_mono_s();
			if (unsure)
				waited = up_mono_s(); /* no progress is counted from its end */
			if (unsure && (claim_lost(u->cfg.claim) ||
				       up_mono_s() - unsure_since >= claim_timeout_s(u->cfg.claim))) {
				log_warn("unmount: this daemon %s BACKING's claim: the upload queue"
					 " stays in the cache", claim_lost(u->cfg.claim) ? "lost"
					 : "could not renew");
				break;
			}
			if (!unsure && !any && !u->down && up_mono_s() - u->last_progress > 5 &&
			    up_mono_s() - waited > 5 &&
			    up_mono_s() - started > 5) {
				log_warn("unmount: the upload queue makes no progress (a generation"
					 " waits for a chunk that cannot be uploaded); leaving it"
					 " queued for the next mount");
				break;
			}
			up_wait(u, 0.5);
			if (up_mono_s() - said >= 3) {
				said = up_mono_s();
				pthread_mutex_unlock(&u->lock);
				up_progress(u, started);
				pthread_mutex_lock(&u->lock);
			}
		}
		u->draining = false;
		pthread_cond_broadcast(&u->kick);
	}
	pthread_mutex_unlock(&u->lock);
	for (int i = 0; i < u->n_workers; i++)
		pthread_join(u->worker[i], NULL);
	/* a drain ends with nothing in hand; a stop without one may leave an
	 * unsynced batch marked busy (it stays queued for the next mount) */
	assert(!drain || !up_any_busy(u));
	if (drain)
		up_tree_drain(u); /* the last state of the files outside generations (T6) */
	if (drain && !cat_is_shared(u->cat) && up_may_write(u))
		(void)uppack_orphans(u->cat, u->backing); /* K5: nothing left putting */
	if (drain && cat_is_shared(u->cat)) /* the next node's turn need not wait for the term */
		cat_duty_drop(u->cat, MANIFEST_SHARED_TREE_DUTY);
	pthread_cond_destroy(&u->kick);
	pthread_cond_destroy(&u->changed);
	pthread_mutex_destroy(&u->lock);
	free(u->lost_seq);
	free(u);
}

void uploader_kick(struct uploader *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	pthread_cond_broadcast(&u->kick);
	pthread_mutex_unlock(&u->lock);
}

/* Kicks the workers and waits up to 100 ms for a row to finish. */
static void up_wait_changed(struct uploader *u)
{
	pthread_mutex_lock(&u->lock);
	pthread_cond_broadcast(&u->kick);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&u->changed, &u->lock, &ts);
	pthread_mutex_unlock(&u->lock);
}

int uploader_wait_file(struct uploader *u, uint64_t ino, unsigned timeout_ms)
{
	double deadline = up_mono_s() + timeout_ms / 1000.0;
	for (;;) {
		bool done = false;
		int rc = cat_file_uploaded(u->cat, ino, &done);
		if (rc != 0 || done)
			return rc;
		if (up_mono_s() >= deadline) {
			log_error("fsync of inode %" PRIu64 " with sync=backing: its data is not on"
				  " BACKING %s after %u s", ino, backing_spec(u->backing),
				  timeout_ms / 1000);
			return -EIO;
		}
		up_wait_changed(u);
	}
}

/* Is BACKING known not to answer (the workers back off, or B7: a call
 * hangs)? */
static bool up_is_down(struct uploader *u)
{
	pthread_mutex_lock(&u->lock);
	bool down = u->down || u->unanswered;
	pthread_mutex_unlock(&u->lock);
	return down;
}

/* B7: a gated wait of timeout_ms timed out: if a worker's work has been in
 * hand for longer than that (so since before the wait began, and through
 * it), BACKING is counted as not answering until a row succeeds. */
static void up_wait_timed_out(struct uploader *u, unsigned timeout_ms)
{
	double now = up_mono_s(), oldest = 0;
	pthread_mutex_lock(&u->lock);
	for (int w = 0; w < u->n_workers; w++)
		if (u->work_since[w] > 0 && now - u->work_since[w] > oldest)
			oldest = now - u->work_since[w];
	if (!u->unanswered && oldest * 1000 >= timeout_ms) {
		u->unanswered = true;
		log_warn("BACKING %s: a call has not returned for %.0f s; closes of small files"
			 " outside generations publish without waiting for their uploads until"
			 " BACKING takes one (uploader.h B7)", backing_spec(u->backing), oldest);
	}
	pthread_mutex_unlock(&u->lock);
}

int uploader_wait_pending(struct uploader *u, uint64_t ino, unsigned timeout_ms)
{
	double deadline = up_mono_s() + timeout_ms / 1000.0;
	pthread_mutex_lock(&u->lock);
	u->urgent++; /* B3: no linger while a close waits, its rows first */
	int slot = -1;
	for (int w = 0; w < UP_URGENT_MAX && slot < 0; w++)
		if (u->urgent_ino[w] == 0)
			slot = w;
	if (slot >= 0)
		u->urgent_ino[slot] = ino;
	u->urgent_new = true;
	pthread_cond_broadcast(&u->kick);
	pthread_mutex_unlock(&u->lock);
	int rc;
	for (;;) {
		bool done = false;
		rc = cat_pending_uploaded(u->cat, ino, &done);
		if (rc != 0 || done)
			break;
		if (up_is_down(u)) {
			rc = -ENETDOWN;
			break;
		}
		if (up_mono_s() >= deadline) {
			rc = -ETIMEDOUT;
			up_wait_timed_out(u, timeout_ms);
			break;
		}
		up_wait_changed(u);
	}
	pthread_mutex_lock(&u->lock);
	u->urgent--;
	if (slot >= 0)
		u->urgent_ino[slot] = 0;
	pthread_mutex_unlock(&u->lock);
	return rc;
}

void uploader_set_between(struct uploader *u, uploader_between_fn *fn, void *arg)
{
	pthread_mutex_lock(&u->lock);
	u->between = fn;
	u->between_arg = arg;
	pthread_mutex_unlock(&u->lock);
}

void uploader_set_before_put(struct uploader *u, uploader_between_fn *fn, void *arg)
{
	pthread_mutex_lock(&u->lock);
	u->before_put = fn;
	u->before_put_arg = arg;
	pthread_mutex_unlock(&u->lock);
}

void uploader_get_stats(struct uploader *u, struct uploader_stats *out)
{
	pthread_mutex_lock(&u->lock);
	*out = u->st;
	out->backing_down = u->down || u->unanswered; /* B7 too */
	pthread_mutex_unlock(&u->lock);
}

void uploader_set_before_tree(struct uploader *u, uploader_tree_fn *fn, void *arg)
{
	pthread_mutex_lock(&u->lock);
	u->before_tree = fn;
	u->before_tree_arg = arg;
	pthread_mutex_unlock(&u->lock);
}
