/* node — in-memory inodes; see node.h for the invariants. */
#include "node.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <time.h>

#include "generation.h"
#include "log.h"
#include "writer.h"

#define NODE_BUCKETS 4096
/* The reaper releases the queue once no inode joined it for QUIET_MS (a
 * burst of deletions, like rm -rf, is over: its object unlinks, which hold
 * the catalog lock, no longer slow it down), or once the oldest has waited
 * MAX_WAIT_MS, or once MAX are queued. */
#define NODE_RELEASE_QUIET_MS 200
#define NODE_RELEASE_MAX_WAIT_MS 5000
#define NODE_RELEASE_MAX 65536

struct node_table {
	struct cat *cat;
	pthread_mutex_t lock;
	uint64_t count;
	struct node *bucket[NODE_BUCKETS];
	/* inodes whose last holder is gone, for the reaper (invariant 4) */
	struct cat_id_vec dead;
	int64_t first_dead_ns, last_dead_ns; /* when the oldest and newest were queued */
	bool release_soon; /* a removed tree is queued: no quiet period */
	pthread_cond_t reap_wake;
	pthread_t reaper;
	bool reaper_running, reaper_stop;
};

static struct node **node_slot(struct node_table *t, uint64_t ino)
{
	struct node **pp = &t->bucket[(ino * 0x9E3779B97F4A7C15ull) >> 52];
	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

int node_table_new(struct cat *cat, struct node_table **out)
{
	struct node_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->cat = cat;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->reap_wake, NULL);
	*out = t;
	return 0;
}

void node_table_free(struct node_table *t)
{
	if (!t)
		return;
	node_table_stop(t);
	for (int i = 0; i < NODE_BUCKETS; i++) {
		struct node *n = t->bucket[i];
		while (n) {
			struct node *next = n->next;
			if (n->writer) { /* a handle still open at shutdown: keep what it wrote */
				int rc = writer_commit(n->writer, true);
				if (rc != 0)
					log_error("inode %llu: commit at shutdown failed: %s",
						  (unsigned long long)n->ino, strerror(-rc));
				writer_free(n->writer);
				n->writer = NULL;
			}
			pthread_rwlock_destroy(&n->rw);
			free(n);
			n = next;
		}
	}
	pthread_cond_destroy(&t->reap_wake);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* With the table lock held: the node, created if absent. */
static struct node *node_find_locked(struct node_table *t, uint64_t ino)
{
	struct node **pp = node_slot(t, ino);
	struct node *n = *pp;
	if (n == NULL)
		n = calloc(1, sizeof(*n));
	else
		return n;
	if (n == NULL)
		return NULL;
	n->ino = ino;
	pthread_rwlock_init(&n->rw, NULL);
	*pp = n;
	t->count++;
	return n;
}

/* With the table lock held: unlinks and returns the node if nothing holds it. */
static struct node *node_maybe_unlink_locked(struct node_table *t, struct node *n)
{
	if (n->nlookup || n->open_count || n->refs)
		return NULL;
	struct node **pp = node_slot(t, n->ino);
	assert(*pp == n);
	*pp = n->next;
	t->count--;
	return n;
}

/* ---- deferred release (invariant 4) ---- */

/* The clock of pthread_cond_timedwait's default. */
static int64_t node_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Releases the inodes among inos[0..n) that have no node (again): the
 * catalog deletes those with no link left and skips the others. */
static void node_release_now(struct node_table *t, uint64_t *inos, size_t n)
{
	size_t k = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < n; i++)
		if (*node_slot(t, inos[i]) == NULL)
			inos[k++] = inos[i];
	pthread_mutex_unlock(&t->lock);
	int rc = k ? cat_inodes_release(t->cat, inos, k) : 0;
	if (rc != 0)
		log_error("releasing %zu inodes nobody holds (first %llu) failed: %s; those with no"
			  " link left are released at the next start", k, (unsigned long long)inos[0],
			  strerror(-rc));
}

/* Queues inos[0..n) for the reaper; those it cannot queue (no reaper
 * running, or no memory) are released at once. soon: known to be unlinked
 * (a removed tree), released without waiting for a quiet period. */
static void node_release_later(struct node_table *t, uint64_t *inos, size_t n, bool soon)
{
	int64_t now = node_now_ns();
	size_t queued = 0;
	pthread_mutex_lock(&t->lock);
	size_t before = t->dead.n;
	while (t->reaper_running && queued < n && cat_id_vec_push(&t->dead, inos[queued]) == 0)
		queued++;
	if (queued) {
		t->last_dead_ns = now;
		if (before == 0)
			t->first_dead_ns = now;
		t->release_soon = t->release_soon || soon;
		if (before == 0 || soon || (before < NODE_RELEASE_MAX && t->dead.n >= NODE_RELEASE_MAX))
			pthread_cond_signal(&t->reap_wake);
	}
	pthread_mutex_unlock(&t->lock);
	if (queued < n)
		node_release_now(t, inos + queued, n - queued);
}

/* Takes the queue (table lock held). */
static struct cat_id_vec node_take_dead(struct node_table *t)
{
	struct cat_id_vec v = t->dead;
	t->dead = (struct cat_id_vec){ 0 };
	t->release_soon = false;
	return v;
}

static void node_release_taken(struct node_table *t, struct cat_id_vec *v)
{
	int64_t t0 = node_now_ns();
	if (v->n)
		node_release_now(t, v->v, v->n);
	if (v->n)
		log_debug("released %zu inodes nobody holds in %.1f ms", v->n,
			  (double)(node_now_ns() - t0) / 1e6);
	cat_id_vec_free(v);
}

/* When the queue is due for release (table lock held). */
static int64_t node_release_due_ns(const struct node_table *t)
{
	int64_t quiet = t->last_dead_ns + NODE_RELEASE_QUIET_MS * 1000000LL;
	int64_t oldest = t->first_dead_ns + NODE_RELEASE_MAX_WAIT_MS * 1000000LL;
	return quiet < oldest ? quiet : oldest;
}

/* The reaper: releases the queue when it is due (see NODE_RELEASE_QUIET_MS). */
static void *node_reaper(void *arg)
{
	struct node_table *t = arg;
	pthread_mutex_lock(&t->lock);
	while (!t->reaper_stop) {
		if (t->dead.n == 0) {
			pthread_cond_wait(&t->reap_wake, &t->lock);
			continue;
		}
		int64_t due = node_release_due_ns(t);
		if (!t->release_soon && t->dead.n < NODE_RELEASE_MAX && node_now_ns() < due) {
			struct timespec until = { .tv_sec = due / 1000000000,
						  .tv_nsec = due % 1000000000 };
			pthread_cond_timedwait(&t->reap_wake, &t->lock, &until);
			continue;
		}
		struct cat_id_vec v = node_take_dead(t);
		pthread_mutex_unlock(&t->lock);
		node_release_taken(t, &v);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int node_table_start(struct node_table *t)
{
	pthread_mutex_lock(&t->lock);
	assert(!t->reaper_running && !t->reaper_stop); /* started once */
	int rc = pthread_create(&t->reaper, NULL, node_reaper, t);
	t->reaper_running = rc == 0;
	pthread_mutex_unlock(&t->lock);
	return -rc;
}

void node_release_flush(struct node_table *t)
{
	pthread_mutex_lock(&t->lock);
	struct cat_id_vec v = node_take_dead(t);
	pthread_mutex_unlock(&t->lock);
	node_release_taken(t, &v);
}

void node_table_stop(struct node_table *t)
{
	pthread_mutex_lock(&t->lock);
	bool running = t->reaper_running;
	t->reaper_stop = true;
	pthread_cond_signal(&t->reap_wake);
	pthread_mutex_unlock(&t->lock);
	if (running)
		pthread_join(t->reaper, NULL);
	pthread_mutex_lock(&t->lock);
	t->reaper_running = false;
	pthread_mutex_unlock(&t->lock);
	node_release_flush(t);
}

void node_session_end(struct node_table *t)
{
	struct cat_id_vec freed = { 0 };
	size_t lost = 0;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < NODE_BUCKETS; i++) {
		struct node **pp = &t->bucket[i];
		while (*pp) {
			struct node *n = *pp;
			n->nlookup = 0; /* invariant 6: no FORGET comes for them */
			if (n->open_count || n->refs) {
				pp = &n->next;
				continue;
			}
			assert(!n->writer && !n->write_handles); /* invariant 1 */
			if (n->removed && cat_id_vec_push(&freed, n->ino) != 0)
				lost++;
			*pp = n->next;
			t->count--;
			pthread_rwlock_destroy(&n->rw);
			free(n);
		}
	}
	pthread_mutex_unlock(&t->lock);
	if (lost)
		log_warn("unmount: out of memory: %zu removed inodes the kernel had looked up are not"
			 " released now; those with no link left are released at the next start",
			 lost);
	if (freed.n) {
		node_release_now(t, freed.v, freed.n); /* the catalog skips any still linked */
		log_debug("unmount: released %zu removed inodes only the kernel's lookups held",
			  freed.n);
	}
	cat_id_vec_free(&freed);
}

/* Frees a node nothing holds any more; its inode is released (later, in a
 * batch) if it has no links left. */
static void node_free(struct node_table *t, struct node *n)
{
	/* invariant 1: nothing holds it; a writer ended at the last close */
	assert(!n->writer && !n->nlookup && !n->open_count && !n->refs && !n->write_handles);
	uint64_t ino = n->ino;
	pthread_rwlock_destroy(&n->rw);
	free(n);
	node_release_later(t, &ino, 1, false);
}

struct node *node_get(struct node_table *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = node_find_locked(t, ino);
	if (n) {
		assert(n->ino == ino);
		n->refs++;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

void node_put(struct node_table *t, struct node *n)
{
	pthread_mutex_lock(&t->lock);
	assert(n->refs > 0);
	n->refs--;
	struct node *dead = node_maybe_unlink_locked(t, n);
	pthread_mutex_unlock(&t->lock);
	if (dead)
		node_free(t, dead);
}

void node_lookup_add(struct node_table *t, uint64_t ino)
{
	if (ino == CAT_ROOT_INO)
		return; /* the root is never forgotten */
	pthread_mutex_lock(&t->lock);
	struct node *n = node_find_locked(t, ino);
	if (n)
		n->nlookup++;
	pthread_mutex_unlock(&t->lock);
}

void node_forget(struct node_table *t, uint64_t ino, uint64_t nlookup)
{
	if (ino == CAT_ROOT_INO)
		return;
	pthread_mutex_lock(&t->lock);
	struct node *dead = NULL;
	struct node **pp = node_slot(t, ino);
	if (*pp) {
		struct node *n = *pp;
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		dead = node_maybe_unlink_locked(t, n);
	}
	pthread_mutex_unlock(&t->lock);
	if (dead)
		node_free(t, dead);
}

int node_open(struct node_table *t, uint64_t ino, struct node **out)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = node_find_locked(t, ino);
	int rc = !n ? -ENOMEM : n->data_dropped ? -ENOENT : 0; /* invariant 5 */
	if (rc == 0) {
		assert(n->open_count < UINT32_MAX);
		n->open_count++;
	}
	pthread_mutex_unlock(&t->lock);
	*out = rc == 0 ? n : NULL;
	return rc;
}

uint32_t node_close(struct node_table *t, struct node *n)
{
	pthread_mutex_lock(&t->lock);
	assert(n->open_count > 0);
	n->open_count--;
	n->refs++;
	uint32_t left = n->open_count;
	pthread_mutex_unlock(&t->lock);
	return left;
}

uint32_t node_open_count(struct node_table *t, struct node *n)
{
	pthread_mutex_lock(&t->lock);
	uint32_t c = n->open_count;
	pthread_mutex_unlock(&t->lock);
	return c;
}

struct node *node_peek(struct node_table *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = *node_slot(t, ino);
	if (n)
		n->refs++;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void node_unlinked(struct node_table *t, uint64_t ino)
{
	struct node *n = node_peek(t, ino);
	if (n) {
		pthread_mutex_lock(&t->lock);
		n->removed = true; /* invariant 6 */
		pthread_mutex_unlock(&t->lock);
		node_put(t, n); /* the kernel unlinked it: its FORGET follows */
	}
	else
		node_release_later(t, &ino, 1, false);
}

void node_unlinked_many(struct node_table *t, const uint64_t *inos, size_t n)
{
	struct cat_id_vec unheld = { 0 }, idle = { 0 };
	int rc = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct node *x = *node_slot(t, inos[i]);
		if (x == NULL) {
			rc = cat_id_vec_push(&unheld, inos[i]);
			continue;
		}
		x->removed = true; /* invariant 6 */
		if (x->open_count == 0 && (rc = cat_id_vec_push(&idle, inos[i])) == 0)
			x->data_dropped = true; /* invariant 5: no handle opens it now */
	}
	pthread_mutex_unlock(&t->lock);
	if (rc != 0)
		log_warn("releasing %zu removed inodes: out of memory; those not released now are"
			 " released when the kernel forgets them or at the next start", n);
	/* The kernel may hold lookups on removed inodes for long (a generation
	 * removed behind its back): with no handle open nothing can read their
	 * data any more, so the chunks go now, the rows at FORGET. */
	if (idle.n && (rc = cat_inodes_drop_data(t->cat, idle.v, idle.n)) != 0)
		log_warn("releasing the data of %zu unlinked files (first inode %llu) failed: %s;"
			 " it goes when the kernel forgets them", idle.n,
			 (unsigned long long)idle.v[0], strerror(-rc));
	if (unheld.n) /* by the reaper: the caller (the generation thread) goes on */
		node_release_later(t, unheld.v, unheld.n, true);
	cat_id_vec_free(&idle);
	cat_id_vec_free(&unheld);
}

void node_writers_add(struct node_table *t, struct node *n, int delta)
{
	pthread_mutex_lock(&t->lock);
	assert(delta == 1 || delta == -1);
	assert(delta > 0 || n->write_handles > 0);
	n->write_handles += delta;
	pthread_mutex_unlock(&t->lock);
}

unsigned node_write_handles(struct node_table *t, struct node *n)
{
	pthread_mutex_lock(&t->lock);
	unsigned h = n->write_handles;
	pthread_mutex_unlock(&t->lock);
	return h;
}

/* Inodes whose node has write handles (writing) or any open handle. */
static size_t node_list_open(struct node_table *t, bool writing, uint64_t *inos, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < NODE_BUCKETS && n < max; i++)
		for (struct node *x = t->bucket[i]; x && n < max; x = x->next)
			if (writing ? x->write_handles > 0 : x->open_count > 0)
				inos[n++] = x->ino;
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t node_writing(struct node_table *t, uint64_t *inos, size_t max)
{
	return node_list_open(t, true, inos, max);
}

size_t node_opened(struct node_table *t, uint64_t *inos, size_t max)
{
	return node_list_open(t, false, inos, max);
}

void node_note_name(struct node_table *t, uint64_t ino, uint64_t parent, const char *name)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = *node_slot(t, ino);
	if (n) {
		n->trigger_parent = parent;
		snprintf(n->trigger_name, sizeof(n->trigger_name), "%s", name);
	}
	pthread_mutex_unlock(&t->lock);
}

bool node_trigger(struct node_table *t, struct node *n, uint64_t *parent, char *name, size_t size)
{
	pthread_mutex_lock(&t->lock);
	bool have = n->trigger_name[0] != '\0';
	if (have) {
		*parent = n->trigger_parent;
		snprintf(name, size, "%s", n->trigger_name);
	}
	pthread_mutex_unlock(&t->lock);
	return have;
}

uint64_t node_count(struct node_table *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t c = t->count;
	pthread_mutex_unlock(&t->lock);
	return c;
}
