/* chunkput — putting a chunk once; see chunkput.h for the invariants.
 *
 * Why flights (P1): cat_pending_add tells every writer whose reference comes
 * before the object is recorded (cat_chunk_stored) to store it. Replicas
 * written at once reach a chunk at about the same time, and each rename of
 * one copy over another makes the kernel free (and discard) the replaced
 * copy under the filesystem's rename lock, stalling every store. A second writer of a chunk in flight keeps an await on it instead
 * and goes on; its pending extent names a chunk not yet recorded as stored,
 * so it collects its awaits before anything reads or commits its pending
 * chunks. Without a free flight slot (or await), a writer just stores.
 *
 * Why "landed after the answer" counts as stored (F3): the landing came
 * after the chunk was recorded, and the lander's own pending reference held
 * the chunk until then, so had it been recorded before the answer, the
 * answer would have been "stored"; it was recorded after, while the asking
 * writer's reference already held it. Without this, a writer a moment late
 * wrote the object again and renamed it over the first one. */
#define _GNU_SOURCE
#include "chunkput.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "log.h"
#include "recent.h"
#include "store.h"
#include "storeq.h"
#include "wbuf.h"

#define CHUNKPUT_FLIGHTS 128    /* > FUSE's worker threads + their awaits */
#define CHUNKPUT_ROOM_RETRIES 16 /* puts retried after an ENOSPC, each after room was made */

struct chunkput {
	struct chunkput_env env; /* first: chunkput_env */
	char staging_dir[PATH_MAX];
	struct storeq *storeq;
	struct chunkput_cache cache;
	struct chunkput_kick kick;
	struct flight_table *flights;
	struct wbuf wbuf;
};

int chunkput_new(const struct chunkput_config *cfg, struct cat *cat, struct store *store,
		 struct storeq *storeq, struct recent *recent, const struct chunkput_cache *cache,
		 const struct chunkput_kick *kick, const struct chunkput_reader *reader,
		 struct chunkput **out)
{
	struct chunkput *cp = calloc(1, sizeof(*cp));
	if (!cp)
		return -ENOMEM;
	int rc = flight_table_new(CHUNKPUT_FLIGHTS, HASH_LEN, &cp->flights);
	if (rc != 0) {
		free(cp);
		return rc;
	}
	snprintf(cp->staging_dir, sizeof(cp->staging_dir), "%s", cfg->staging_dir);
	cp->env = (struct chunkput_env){ .chunking = cfg->chunking, .staging_dir = cp->staging_dir,
					 .cat = cat, .store = store, .recent = recent,
					 .reader = *reader, .wbuf = &cp->wbuf };
	wbuf_init(&cp->wbuf, cfg->writebuf);
	cp->storeq = storeq;
	cp->cache = *cache;
	cp->kick = *kick;
	*out = cp;
	return 0;
}

void chunkput_free(struct chunkput *cp)
{
	if (!cp)
		return;
	flight_table_free(cp->flights);
	wbuf_destroy(&cp->wbuf);
	free(cp);
}

const struct chunkput_env *chunkput_env(const struct chunkput *cp)
{
	return &cp->env;
}

/* P7: the hook first, then the batches, never the other way round. */
int chunkput_small_batch(struct cat *cat, struct store *store)
{
	int rc = cat_commit_first(cat, store_small_commit, store);
	if (rc == 0)
		store_small_batch(store);
	return rc;
}

uint64_t chunkput_lands(struct chunkput *cp)
{
	return flight_lands(cp->flights);
}

/* ---- the cache and the uploader (callbacks) ---- */

int chunkput_disk_wait(struct chunkput *cp, uint64_t len)
{
	return cp->cache.c ? cp->cache.disk_wait(cp->cache.c, len) : 0;
}

int chunkput_make_room(struct chunkput *cp, uint64_t len)
{
	return cp->cache.c ? cp->cache.make_room(cp->cache.c, len) : -ENOSPC;
}

static int chunkput_dirty_wait(struct chunkput *cp, uint64_t len)
{
	return cp->cache.c ? cp->cache.dirty_wait(cp->cache.c, len) : 0;
}

/* ---- one put ---- */

/* Writes the object of a chunk and records it as stored (P2); pin: the
 * pinned copy (recent.h) whose buffer has the headroom and maybe its CRC
 * (R7), or NULL. Runs on a FUSE thread, or on a store-queue thread. */
static int chunkput_put(struct chunkput *cp, const uint8_t hash[HASH_LEN], const uint8_t *data,
			size_t len, const struct recent_pred *pin)
{
	uint8_t *image = pin ? pin->image : NULL;
	const uint32_t *crc = pin && pin->has_crc ? &pin->crc : NULL;
	struct store_object_info info;
	int rc = -ENOSPC;
	/* a full disk: evict clean chunks and try again (cache.h C6); the
	 * bytes are still the caller's, so a retry writes the same object */
	for (int i = 0; (rc == -ENOSPC || rc == -EDQUOT) && i <= CHUNKPUT_ROOM_RETRIES; i++) {
		if (i > 0 && chunkput_make_room(cp, len) != 0)
			break;
		rc = image ? store_put_headroom(cp->env.store, hash, image, len, crc, 0, &info)
			   : store_put(cp->env.store, hash, data, len, 0, &info);
	}
	if (rc == 0)
		rc = cat_chunk_stored(cp->env.cat, hash, info.codec, info.stored_len);
	if (rc == 0) {
		if (cp->cache.c)
			cp->cache.dirty_add(cp->cache.c, info.stored_len);
		/* a chunk of a deferred transaction (small files of an open
		 * generation) is not listed before its commit: the uploader
		 * finds it at its next round, in a larger batch */
		if (cp->kick.u && !cat_defer_active(cp->env.cat))
			cp->kick.kick(cp->kick.u);
	}
	return rc;
}

/* ---- behind the writer (storeq.h) ----
 *
 * A chunk whose bytes sit in recent's copy is stored from there after the
 * FUSE request that cut it has been answered: the job takes its own pin on
 * the copy, so nothing the writer does next can change the bytes, and lands
 * the writer's flight when the object is recorded. The writer awaits its own
 * flight exactly like one another writer stores for it. */
struct chunkput_job {
	struct storeq_job q; /* first: the queue's pointer is the job's */
	struct chunkput *cp;
	uint8_t hash[HASH_LEN];
	size_t len;
	struct recent_pred pin;
	struct flight lead;
};

static void chunkput_job_run(struct storeq_job *qj)
{
	struct chunkput_job *j = (struct chunkput_job *)qj;
	int rc = chunkput_put(j->cp, j->hash, j->pin.copy, j->len, &j->pin);
	recent_unpin(j->cp->env.recent, &j->pin);
	flight_land(j->cp->flights, &j->lead, rc);
	free(j);
}

/* true: the chunk is being stored behind, as the writer's own flight, which
 * it now awaits; false: the caller stores it. */
static bool chunkput_behind(struct chunkput *cp, struct chunkput_awaits *aw,
			    const uint8_t hash[HASH_LEN], size_t len, const struct recent_pred *pin,
			    const struct flight *lead)
{
	if (!cp->storeq || !pin || lead->slot < 0 || aw->n == CHUNKPUT_AWAITS)
		return false;
	struct chunkput_job *j = malloc(sizeof(*j));
	if (!j)
		return false;
	if (!recent_pin_again(cp->env.recent, pin, &j->pin)) {
		free(j);
		return false;
	}
	j->q.run = chunkput_job_run;
	j->cp = cp;
	memcpy(j->hash, hash, HASH_LEN);
	j->len = len;
	j->lead = *lead;
	flight_hold(cp->flights, lead); /* before the job can land it */
	if (!storeq_try_submit(cp->storeq, &j->q)) {
		flight_release(cp->flights, lead);
		recent_unpin(cp->env.recent, &j->pin);
		free(j);
		return false;
	}
	aw->ref[aw->n++] = *lead;
	return true;
}

int chunkput_store(struct chunkput *cp, struct chunkput_awaits *aw, const uint8_t hash[HASH_LEN],
		   const uint8_t *data, size_t len, const struct recent_pred *pin, uint64_t since)
{
	struct flight f;
	int rc = chunkput_reap(cp, aw, aw->n == CHUNKPUT_AWAITS); /* P5 */
	if (rc != 0)
		return rc;
	switch (flight_join(cp->flights, hash, since, &f)) {
	case FLIGHT_FOLLOW: /* another writer stores it now */
		assert(aw->n < CHUNKPUT_AWAITS);
		aw->ref[aw->n++] = f;
		return 0;
	case FLIGHT_DONE:
		return 0;
	case FLIGHT_LEAD:
		break;
	}
	rc = chunkput_dirty_wait(cp, len); /* P3: fails only when nothing moves */
	if (rc != 0) {
		flight_land(cp->flights, &f, rc);
		return rc;
	}
	/* P6: the CRC of the bytes while they are in this CPU's cache (the
	 * writer has just hashed them), not from memory on a store thread */
	struct recent_pred with_crc;
	if (pin && !pin->has_crc && len >= STORE_DIRECT_MIN) {
		with_crc = *pin; /* a view of the caller's pin, unpinned by the caller */
		with_crc.crc = crc32c(0, pin->copy, len);
		with_crc.has_crc = true;
		pin = &with_crc;
	}
	if (chunkput_behind(cp, aw, hash, len, pin, &f))
		return 0;
	rc = chunkput_put(cp, hash, data, len, pin);
	flight_land(cp->flights, &f, rc);
	return rc;
}

int chunkput_reap(struct chunkput *cp, struct chunkput_awaits *aw, bool wait)
{
	assert(aw->n <= CHUNKPUT_AWAITS);
	return flight_reap(cp->flights, aw->ref, &aw->n, wait);
}

void chunkput_wait(struct chunkput *cp, const struct chunkput_awaits *aw)
{
	flight_wait(cp->flights, aw->ref, aw->n);
}

int chunkput_awaiting(struct chunkput *cp, const uint8_t hash[HASH_LEN])
{
	return flight_followers(cp->flights, hash);
}

/* ---- teardown ---- */

void chunkput_stop_queue(struct chunkput *cp)
{
	if (!cp)
		return;
	storeq_stop(cp->storeq); /* storeq.h Q2: every job ran, every flight landed */
	cp->storeq = NULL;
}

void chunkput_detach(struct chunkput *cp)
{
	if (!cp)
		return;
	cp->cache.c = NULL;
	cp->kick.u = NULL;
}
