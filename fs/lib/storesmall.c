/* storesmall — small chunk objects in one SQLite file; see storesmall.h for
 * the invariants T1-T10.
 *
 * Why SQLite and not an append-only pack file: removals (the evictor, the
 * reclaimer) must give space back and must stay removed across a restart,
 * and a torn write must not leave a half row. A pack needs its own index,
 * tombstones and compaction for that; SQLite's WAL gives all of it, and a
 * commit without fsync (synchronous=NORMAL in WAL mode) costs a few writes
 * into the page cache, not an inode.
 *
 * Why its own file and not the catalog: the store is a library module
 * (fs/lib, below the catalog in docs/DESIGN.md "Layers"); the catalog calls
 * store_remove with its lock held (its sweeps), which a table of the catalog
 * would deadlock on; and a separate file leaves the catalog's schema and
 * its group commit (meta/catalog_defer.c) as they are. The object is
 * committed before the catalog records the chunk stored, in that order, as
 * a file object was written before.
 *
 * Why batches (T8-T10): a commit per put was most of a small file's put
 * (its WAL frames and locks; docs/BENCH.md, issue 20 part 3), and the
 * catalog commits every few milliseconds anyway
 * (catalog_defer.c D3), and its commit hook commits the batch first. Why
 * fail-stop and not a batch epoch that cat_chunk_stored checks: a failed
 * batch took rows that writers between their put and their record, the
 * store's checked set (store.c S10) and recent's entries all vouch for;
 * refusing every later catalog commit needs none of them to be found. */
#define _GNU_SOURCE
#include "storesmall.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* T4: removals between two incremental vacuums (each gives every free page back) */
#define STORESMALL_VACUUM_EVERY 64
/* WAL pages before a checkpoint: 16 MiB, so that the checkpoint's two
 * fsyncs (synchronous=NORMAL) come every few thousand small objects; the
 * WAL is cut back to that size after each (T4: a vacuum's truncation of
 * the main file reaches the disk at the checkpoint) */
#define STORESMALL_CHECKPOINT_PAGES 4096
_Static_assert((uint64_t)STORESMALL_CHECKPOINT_PAGES * 4096 == STORESMALL_WAL_TARGET,
	       "T5: the WAL is cut back to the size it is checkpointed at");
#define STORESMALL_BUSY_MS 5000 /* ckptfs-admin may read it beside the daemon */
/* T2, T8: puts in one batch at most (its pages stay in SQLite's page cache
 * until its commit: 256 images of up to 256 KiB would spill, most are 4 KiB) */
#define STORESMALL_BATCH_MAX 256

enum storesmall_stmt { SS_PUT, SS_GET, SS_LEN, SS_DEL, SS_NEXT, SS_BEGIN, SS_COMMIT, SS_NSTMT };

static const char *const storesmall_sql[SS_NSTMT] = {
	[SS_PUT] = "INSERT OR REPLACE INTO objects(hash, image) VALUES (?1, ?2)",
	[SS_GET] = "SELECT image FROM objects WHERE hash = ?1",
	[SS_LEN] = "SELECT length(image) FROM objects WHERE hash = ?1",
	[SS_DEL] = "DELETE FROM objects WHERE hash = ?1",
	/* T6: the first row at or after a key (a listing skips from shard to shard) */
	[SS_NEXT] = "SELECT hash FROM objects WHERE hash >= ?1 ORDER BY hash LIMIT 1",
	[SS_BEGIN] = "BEGIN", /* T8: a batch */
	[SS_COMMIT] = "COMMIT",
};

struct storesmall {
	char path[PATH_MAX];
	pthread_mutex_t lock;
	sqlite3 *db;
	sqlite3_stmt *stmt[SS_NSTMT];
	unsigned removed; /* since the last vacuum (T4) */
	uint8_t *join;    /* a put's pieces joined into one blob */
	size_t join_cap;
	bool batch;          /* T8: puts join an open batch */
	bool in_batch;       /* T8: a batch is open */
	unsigned batch_puts; /* T8: puts in the open batch */
	bool ckpt_due;       /* T10: the WAL reached its size: checkpoint off the hook */
	int failed;          /* T9: a batch was lost: every put, removal and commit fails */
};

static int storesmall_errno(int src)
{
	switch (src & 0xff) {
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	default:
		return -EIO;
	}
}

static int storesmall_fail(struct storesmall *s, const char *what, int src)
{
	log_error("store %s: %s: %s (sqlite %d)", s->path, what, sqlite3_errmsg(s->db), src);
	return storesmall_errno(src);
}

static int storesmall_exec(struct storesmall *s, const char *what, const char *sql)
{
	int src = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	return src == SQLITE_OK ? 0 : storesmall_fail(s, what, src);
}

/* The connection's settings, and the table on a new file (auto_vacuum must
 * precede the first table: T4). Only the opener that may create sets
 * auto_vacuum: on an existing file that pragma takes the write lock, which
 * the daemon's open batch holds most of the time (T8), and another
 * process's open (ckptfs-admin) would wait for it. */
static int storesmall_setup(struct storesmall *s, bool create)
{
	char sql[384];
	snprintf(sql, sizeof(sql),
		 "%sPRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
		 "PRAGMA wal_autocheckpoint=%d;PRAGMA journal_size_limit=%d;"
		 "CREATE TABLE IF NOT EXISTS objects(hash BLOB PRIMARY KEY NOT NULL,"
		 " image BLOB NOT NULL);",
		 create ? "PRAGMA auto_vacuum=INCREMENTAL;" : "", STORESMALL_CHECKPOINT_PAGES,
		 STORESMALL_CHECKPOINT_PAGES * 4096);
	int rc = storesmall_exec(s, "set up", sql);
	for (int i = 0; rc == 0 && i < SS_NSTMT; i++) {
		int src = sqlite3_prepare_v3(s->db, storesmall_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					     &s->stmt[i], NULL);
		if (src != SQLITE_OK)
			rc = storesmall_fail(s, "prepare", src);
	}
	return rc;
}

int storesmall_open(const char *root, bool create, struct storesmall **out)
{
	struct storesmall *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (snprintf(s->path, sizeof(s->path), "%s/%s", root, STORESMALL_FILE) >=
	    (int)sizeof(s->path)) {
		free(s);
		return -ENAMETOOLONG;
	}
	if (!create && access(s->path, F_OK) != 0) {
		int rc = -errno;
		free(s);
		return rc;
	}
	if (create) { /* private before SQLite makes it (store.c S5); its -wal and -shm take its mode */
		int fd = open(s->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			int rc = -errno;
			free(s);
			return rc;
		}
		close(fd);
	}
	pthread_mutex_init(&s->lock, NULL);
	/* NOFOLLOW: the store's paths are never symlinks (store.c S5) */
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW |
		    (create ? SQLITE_OPEN_CREATE : 0);
	int src = sqlite3_open_v2(s->path, &s->db, flags, NULL);
	int rc = src == SQLITE_OK ? 0 : storesmall_fail(s, "open", src);
	if (rc == 0) {
		sqlite3_busy_timeout(s->db, STORESMALL_BUSY_MS);
		rc = storesmall_setup(s, create);
	}
	if (rc != 0) {
		storesmall_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void storesmall_close(struct storesmall *s)
{
	if (!s)
		return;
	if (s->db && s->stmt[SS_COMMIT])
		storesmall_commit(s); /* T2, T8: logs a failure itself (T9) */
	for (int i = 0; i < SS_NSTMT; i++)
		sqlite3_finalize(s->stmt[i]);
	sqlite3_close(s->db);
	pthread_mutex_destroy(&s->lock);
	free(s->join);
	free(s);
}

/* ---- rows ---- */

/* The image as one blob: a single piece as it is, several joined (under the lock). */
static const void *storesmall_blob(struct storesmall *s, const struct iovec *iov, int cnt,
				   size_t *len)
{
	size_t total = 0;
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	*len = total;
	if (cnt == 1)
		return iov[0].iov_base;
	if (s->join_cap < total) {
		uint8_t *nb = realloc(s->join, total);
		if (!nb)
			return NULL;
		s->join = nb;
		s->join_cap = total;
	}
	size_t off = 0;
	for (int i = 0; i < cnt; i++) {
		memcpy(s->join + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return s->join;
}

/* Steps a statement bound to hash (and blob, if given) to its end or first row. */
static int storesmall_step(struct storesmall *s, enum storesmall_stmt which,
			   const uint8_t hash[HASH_LEN], const void *blob, size_t len)
{
	sqlite3_stmt *st = s->stmt[which];
	int src = sqlite3_bind_blob(st, 1, hash, HASH_LEN, SQLITE_STATIC);
	if (src == SQLITE_OK && blob)
		src = sqlite3_bind_blob64(st, 2, blob, len, SQLITE_STATIC);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	return src;
}

static void storesmall_reset(struct storesmall *s, enum storesmall_stmt which)
{
	sqlite3_reset(s->stmt[which]);
	sqlite3_clear_bindings(s->stmt[which]);
}

/* ---- batches (T8-T10) ---- */

/* T10: the WAL hook, called at each commit (under s->lock) with the WAL's
 * pages: notes a checkpoint due instead of running one in the catalog's
 * commit hook. Replaces wal_autocheckpoint (sqlite3_wal_hook). */
static int storesmall_wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct storesmall *s = arg;
	(void)db;
	(void)name;
	if (pages >= STORESMALL_CHECKPOINT_PAGES)
		s->ckpt_due = true;
	return SQLITE_OK;
}

void storesmall_batch(struct storesmall *s)
{
	pthread_mutex_lock(&s->lock);
	s->batch = true;
	sqlite3_wal_hook(s->db, storesmall_wal_hook, s);
	pthread_mutex_unlock(&s->lock);
}

/* T9: the open batch is gone (rolled back by SQLite, or here): one line,
 * and every later put, removal and commit fails with its error. */
static int storesmall_stop(struct storesmall *s, const char *what, int src)
{
	int rc = storesmall_errno(src);
	log_error("store %s: cannot %s: %s (sqlite %d): the %u objects put since its last commit"
		  " are lost, so the catalog refuses every change from now on (no row may name"
		  " them); restart the daemon once the cause is gone (storesmall.h T9)",
		  s->path, what, sqlite3_errmsg(s->db), src, s->batch_puts);
	if (sqlite3_get_autocommit(s->db) == 0)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	s->failed = rc;
	s->in_batch = false;
	s->batch_puts = 0;
	return rc;
}

/* T8: commits the open batch (under s->lock). */
static int storesmall_commit_locked(struct storesmall *s)
{
	assert(s->batch || !s->in_batch);
	if (s->failed)
		return s->failed;
	if (!s->in_batch)
		return 0;
	int src = sqlite3_step(s->stmt[SS_COMMIT]);
	sqlite3_reset(s->stmt[SS_COMMIT]);
	if (src != SQLITE_DONE)
		return storesmall_stop(s, "commit a batch of objects", src);
	s->in_batch = false;
	s->batch_puts = 0;
	return 0;
}

int storesmall_commit(struct storesmall *s)
{
	pthread_mutex_lock(&s->lock);
	int rc = storesmall_commit_locked(s);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* T10: a checkpoint due runs here, on a put's or a removal's thread, after
 * the batch's commit (a checkpoint cannot run inside it: T5). PASSIVE, as
 * wal_autocheckpoint's; the WAL is cut back at its next reset (T5). */
static void storesmall_checkpoint_due(struct storesmall *s)
{
	if (!s->ckpt_due || storesmall_commit_locked(s) != 0)
		return;
	s->ckpt_due = false;
	int src = sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	if (src != SQLITE_OK && src != SQLITE_BUSY)
		storesmall_fail(s, "checkpoint", src);
}

/* A put's or a removal's failed step: T9 if SQLite dropped the open batch
 * with it, else that statement alone is undone (the caller may make room and
 * retry). */
static int storesmall_step_failed(struct storesmall *s, const char *what, int src)
{
	if (s->in_batch && sqlite3_get_autocommit(s->db))
		return storesmall_stop(s, what, src);
	return storesmall_fail(s, what, src);
}

/* T8: the batch a put joins, opened if none is (under s->lock). */
static int storesmall_batch_join(struct storesmall *s)
{
	if (s->batch_puts >= STORESMALL_BATCH_MAX) {
		int rc = storesmall_commit_locked(s);
		if (rc != 0)
			return rc;
	}
	storesmall_checkpoint_due(s);
	if (s->in_batch)
		return 0;
	int src = sqlite3_step(s->stmt[SS_BEGIN]);
	sqlite3_reset(s->stmt[SS_BEGIN]);
	if (src != SQLITE_DONE)
		return storesmall_fail(s, "begin a batch of objects", src);
	s->in_batch = true;
	return 0;
}

int storesmall_put(struct storesmall *s, const uint8_t hash[HASH_LEN], const struct iovec *iov,
		   int cnt)
{
	pthread_mutex_lock(&s->lock);
	int rc = s->failed; /* T9 */
	if (rc == 0 && s->batch)
		rc = storesmall_batch_join(s);
	size_t len;
	const void *blob = rc == 0 ? storesmall_blob(s, iov, cnt, &len) : NULL;
	if (rc == 0 && !blob)
		rc = -ENOMEM;
	if (blob) {
		int src = storesmall_step(s, SS_PUT, hash, blob, len);
		storesmall_reset(s, SS_PUT);
		if (src == SQLITE_DONE)
			s->batch_puts += s->in_batch;
		else
			rc = storesmall_step_failed(s, "put an object", src);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int storesmall_get(struct storesmall *s, const uint8_t hash[HASH_LEN], void *buf, size_t cap,
		   size_t *len)
{
	pthread_mutex_lock(&s->lock);
	int src = storesmall_step(s, SS_GET, hash, NULL, 0);
	int rc = -ENOENT;
	if (src == SQLITE_ROW) {
		size_t n = (size_t)sqlite3_column_bytes(s->stmt[SS_GET], 0);
		const void *img = sqlite3_column_blob(s->stmt[SS_GET], 0);
		*len = n;
		rc = n > cap ? -EFBIG : 0;
		if (rc == 0 && n)
			memcpy(buf, img, n);
	} else if (src != SQLITE_DONE) {
		rc = storesmall_fail(s, "read an object", src);
	}
	storesmall_reset(s, SS_GET);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int storesmall_len(struct storesmall *s, const uint8_t hash[HASH_LEN], size_t *len)
{
	pthread_mutex_lock(&s->lock);
	int src = storesmall_step(s, SS_LEN, hash, NULL, 0);
	int rc = -ENOENT;
	if (src == SQLITE_ROW) {
		*len = (size_t)sqlite3_column_int64(s->stmt[SS_LEN], 0);
		rc = 0;
	} else if (src != SQLITE_DONE) {
		rc = storesmall_fail(s, "look an object up", src);
	}
	storesmall_reset(s, SS_LEN);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int storesmall_remove(struct storesmall *s, const uint8_t hash[HASH_LEN])
{
	pthread_mutex_lock(&s->lock);
	if (s->failed) { /* T9 */
		int rc = s->failed;
		pthread_mutex_unlock(&s->lock);
		return rc;
	}
	int src = storesmall_step(s, SS_DEL, hash, NULL, 0);
	int rc = src == SQLITE_DONE ? 0 : storesmall_step_failed(s, "remove an object", src);
	bool gone = rc == 0 && sqlite3_changes(s->db) > 0;
	storesmall_reset(s, SS_DEL);
	if (rc == 0 && s->batch) { /* T8: committed when it returns, with the batch */
		rc = storesmall_commit_locked(s);
		storesmall_checkpoint_due(s);
	}
	if (rc == 0 && gone && ++s->removed >= STORESMALL_VACUUM_EVERY) { /* T4 */
		s->removed = 0;
		storesmall_exec(s, "give free pages back", "PRAGMA incremental_vacuum");
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* ---- durability ---- */

/* Syncs one of the connection's own files (the main file, or the WAL) with
 * SQLite's own descriptor, and never opens it by path (T7): close() of ANY
 * descriptor of a file drops every fcntl lock this process holds on it
 * (POSIX), the SHARED lock of the connection among them. Another process
 * opening small.db afterwards (ckptfs-admin verify, the sqlite3 shell) would
 * then be alone at its close, checkpoint, and unlink the -wal and -shm the
 * daemon still writes: rows fsync'd into an unlinked WAL, lost at a crash. */
/* T2, T7: see storesmall.h. */
int storesmall_sync_own(struct sqlite3 *db, const char **what)
{
	static const struct {
		int op;
		const char *what;
	} files[2] = {
		{ SQLITE_FCNTL_JOURNAL_POINTER, "sync its WAL" },
		{ SQLITE_FCNTL_FILE_POINTER, "sync its main file" },
	};
	for (int i = 0; i < 2; i++) {
		sqlite3_file *f = NULL;
		*what = files[i].what;
		int src = sqlite3_file_control(db, "main", files[i].op, &f);
		if (src != SQLITE_OK)
			return src;
		if (f == NULL || f->pMethods == NULL)
			continue; /* no WAL open: everything is in the main file */
		src = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL | SQLITE_SYNC_DATAONLY);
		if (src != SQLITE_OK)
			return src;
	}
	return SQLITE_OK;
}

/* T2: the WAL holds every commit not yet checkpointed; a checkpoint fsyncs
 * the main file after copying into it (synchronous=NORMAL), but the copies
 * of a checkpoint still running are only in the page cache: both files. */
int storesmall_sync(struct storesmall *s)
{
	const char *what = NULL;
	pthread_mutex_lock(&s->lock); /* no checkpoint runs meanwhile */
	int rc = storesmall_commit_locked(s); /* T2, T8 */
	int src = rc == 0 ? storesmall_sync_own(s->db, &what) : SQLITE_OK;
	if (src != SQLITE_OK)
		rc = storesmall_fail(s, what, src);
	pthread_mutex_unlock(&s->lock);
	if (rc != 0)
		log_error("store %s: sync: %s", s->path, strerror(-rc));
	return rc;
}

int storesmall_wal_bytes(const char *root, uint64_t *out)
{
	char wal[PATH_MAX];
	struct stat sb;
	*out = 0;
	if (snprintf(wal, sizeof(wal), "%s/%s-wal", root, STORESMALL_FILE) >= (int)sizeof(wal))
		return -ENAMETOOLONG;
	if (lstat(wal, &sb) != 0)
		return errno == ENOENT ? 0 : -errno;
	*out = (uint64_t)sb.st_blocks * 512; /* what it takes of the disk */
	return 0;
}

/* ---- the rows as a tree of object files (T6) ---- */

/* How deep a store-relative name is: 0 "chunks", 1 "chunks/ab", 2
 * "chunks/ab/cd", 3 "chunks/ab/cd/HEX" (with the hash's first bytes, or the
 * whole hash, in key); -1 for anything else. */
static int storesmall_rel_parse(const char *rel, uint8_t key[HASH_LEN])
{
	static const char top[] = "chunks";
	if (strncmp(rel, top, sizeof(top) - 1) != 0)
		return -1;
	const char *p = rel + sizeof(top) - 1;
	int depth = 0;
	for (; *p == '/' && depth < 2; depth++, p += 3) {
		unsigned v;
		char hex[3] = { p[1], p[1] ? p[2] : '\0', '\0' };
		if (!isxdigit((unsigned char)hex[0]) || !isxdigit((unsigned char)hex[1]) ||
		    sscanf(hex, "%2x", &v) != 1)
			return -1;
		key[depth] = (uint8_t)v;
	}
	if (*p == '\0')
		return depth;
	if (depth != 2 || *p != '/' || hash_from_hex(p + 1, key) != 0)
		return -1;
	return 3;
}

/* A name of depth 3 that is exactly its hash's file name (T6: lower-case,
 * shards that agree with the hash). */
static int storesmall_rel_hash(const char *rel, uint8_t hash[HASH_LEN])
{
	char want[128], hex[HASH_HEX_LEN + 1];
	if (storesmall_rel_parse(rel, hash) != 3)
		return -ENOENT;
	hash_to_hex(hash, hex);
	snprintf(want, sizeof(want), "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
	return strcmp(want, rel) == 0 ? 0 : -ENOENT;
}

/* The first row at or after key[0..len): 1 with its hash in out, 0 for none, or -errno. */
static int storesmall_next(struct storesmall *s, const uint8_t *key, size_t len,
			   uint8_t out[HASH_LEN])
{
	pthread_mutex_lock(&s->lock);
	sqlite3_stmt *st = s->stmt[SS_NEXT];
	int src = sqlite3_bind_blob(st, 1, len ? (const void *)key : "", (int)len, SQLITE_TRANSIENT);
	if (src == SQLITE_OK)
		src = sqlite3_step(st);
	int rc = 0;
	if (src == SQLITE_ROW && sqlite3_column_bytes(st, 0) == HASH_LEN) {
		memcpy(out, sqlite3_column_blob(st, 0), HASH_LEN);
		rc = 1;
	} else if (src == SQLITE_ROW) {
		memset(out, 0xff, HASH_LEN); /* not a hash: past every shard */
		rc = 1;
	} else if (src != SQLITE_DONE) {
		rc = storesmall_fail(s, "list objects", src);
	}
	storesmall_reset(s, SS_NEXT);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int storesmall_list(struct storesmall *s, const char *reldir, int (*fn)(void *, const char *),
		    void *arg)
{
	uint8_t key[HASH_LEN + 1], hash[HASH_LEN];
	int depth = storesmall_rel_parse(reldir, key);
	if (depth < 0 || depth > 2)
		return -ENOENT;
	size_t prefix = (size_t)depth, klen = prefix;
	int rc;
	while ((rc = storesmall_next(s, key, klen, hash)) == 1) {
		if (memcmp(hash, key, prefix) != 0)
			return 0; /* past the shard listed */
		char name[HASH_HEX_LEN + 1];
		if (depth == 2) {
			hash_to_hex(hash, name);
			memcpy(key, hash, HASH_LEN); /* next: the first row after this one */
			key[HASH_LEN] = 0;
			klen = HASH_LEN + 1;
		} else {
			snprintf(name, sizeof(name), "%02x", hash[prefix]);
			if (hash[prefix] == 0xff)
				return fn(arg, name); /* the last shard at this depth */
			memcpy(key, hash, prefix); /* next: the first row of the next shard */
			key[prefix] = (uint8_t)(hash[prefix] + 1);
			klen = prefix + 1;
		}
		if ((rc = fn(arg, name)) != 0)
			return rc;
	}
	return rc;
}

int storesmall_stat(struct storesmall *s, const char *relpath, uint64_t *size)
{
	uint8_t hash[HASH_LEN];
	size_t len = 0;
	int rc = storesmall_rel_hash(relpath, hash);
	if (rc == 0)
		rc = storesmall_len(s, hash, &len);
	*size = rc == 0 ? len : 0;
	return rc;
}

int storesmall_remove_rel(struct storesmall *s, const char *relpath)
{
	uint8_t hash[HASH_LEN];
	int rc = storesmall_rel_hash(relpath, hash);
	return rc == 0 ? storesmall_remove(s, hash) : rc;
}
