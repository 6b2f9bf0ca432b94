/* node — in-memory inodes; see node.h for the invariants. */
#include "node.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs.h"
#include "log.h"
#include "writer.h"

#define NODE_BUCKETS 4096

struct node_table {
	struct ckptfs *fs;
	pthread_mutex_t lock;
	uint64_t count;
	struct node *bucket[NODE_BUCKETS];
};

static struct node **node_slot(struct node_table *t, uint64_t ino)
{
	struct node **pp = &t->bucket[(ino * 0x9E3779B97F4A7C15ull) >> 52];
	while (*pp && (*pp)->ino != ino)
		pp = &(*pp)->next;
	return pp;
}

int node_table_new(struct ckptfs *fs, struct node_table **out)
{
	struct node_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fs = fs;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void node_table_free(struct node_table *t)
{
	if (!t)
		return;
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
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* With the table lock held: the node, created if absent. */
static struct node *node_find_locked(struct node_table *t, uint64_t ino)
{
	struct node **pp = node_slot(t, ino);
	if (*pp)
		return *pp;
	struct node *n = calloc(1, sizeof(*n));
	if (!n)
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

/* Frees an unlinked node and deletes its inode if it has no links left. */
static void node_free(struct node_table *t, struct node *n)
{
	assert(!n->writer);
	uint64_t ino = n->ino;
	pthread_rwlock_destroy(&n->rw);
	free(n);
	struct cat_inode attr;
	if (cat_getattr(t->fs->cat, ino, &attr) != 0 || attr.nlink > 0)
		return; /* still linked: nothing to delete */
	int rc = cat_inode_release(t->fs->cat, ino);
	if (rc != 0)
		log_error("inode %llu: releasing after last use failed: %d", (unsigned long long)ino, rc);
}

struct node *node_get(struct node_table *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = node_find_locked(t, ino);
	if (n)
		n->refs++;
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

struct node *node_open(struct node_table *t, uint64_t ino)
{
	pthread_mutex_lock(&t->lock);
	struct node *n = node_find_locked(t, ino);
	if (n)
		n->open_count++;
	pthread_mutex_unlock(&t->lock);
	return n;
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
		/* The kernel may hold lookups on it for long (a generation removed
		 * behind its back): with no handle open nothing can read the data any
		 * more, so the chunks are released now, the inode row at FORGET. */
		pthread_mutex_lock(&t->lock);
		bool idle = n->open_count == 0;
		pthread_mutex_unlock(&t->lock);
		struct cat_inode attr;
		if (idle && cat_getattr(t->fs->cat, ino, &attr) == 0 && S_ISREG(attr.mode) &&
		    attr.nlink == 0 && attr.size > 0) {
			int rc = cat_file_truncate(t->fs->cat, ino, 0);
			if (rc != 0 && rc != -ENOENT)
				log_warn("inode %llu: releasing the data of an unlinked file failed: %s"
					 "; it goes when the kernel forgets the inode",
					 (unsigned long long)ino, strerror(-rc));
		}
		node_put(t, n); /* frees and releases if it was the last holder */
		return;
	}
	int rc = cat_inode_release(t->fs->cat, ino);
	if (rc != 0 && rc != -ENOENT) /* gone already: released by an earlier holder */
		log_error("inode %llu: releasing after unlink failed: %s", (unsigned long long)ino,
			  strerror(-rc));
}

void node_writers_add(struct node_table *t, struct node *n, int delta)
{
	pthread_mutex_lock(&t->lock);
	assert(delta > 0 || n->write_handles > 0);
	n->write_handles += delta;
	pthread_mutex_unlock(&t->lock);
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
