/* catalog_defer — group commit of changes inside OPEN generations.
 *
 * Why it is safe. A crash takes only a suffix of the catalog's commits
 * (kill -9: the deferred transaction; power loss: every commit since the
 * last WAL sync, synchronous=NORMAL), so the catalog that recovery sees is
 * a prefix of what FUSE answered (D2). Recovery holds every OPEN generation
 * (G4 of generation.h): its live tree is kept as that prefix left it, a new
 * version's backup is put back, and nothing is shown as complete. Such a
 * held save may be committed afterwards only when its content proves it
 * complete (fs/gen.c, proof.h) — and a prefix can show a file created but
 * not its last close (an empty or short json/cfg passes that proof), so a
 * create or a writer's first change marks the file and the release of its
 * last handle clears the mark (G7): every prefix that shows any of that
 * work but not its end shows
 * the mark, and G4 then holds the save for an explicit decision, never for
 * the content rule. So a change whose target is in an OPEN generation needs
 * no commit of its own before FUSE is answered: the
 * trainer's own `rm -rf step-N` (which first reopens the committed
 * generation as a new version), and the small files of a save — their
 * create, the writer's pending extents and chunk references, the chunk's
 * "stored" record, the file's commit at close, the drop of the writer at the
 * last release. Such a change runs in a savepoint of a write transaction
 * that is left open (the deferred transaction); the next one joins it, and
 * the lot is committed once. A commit is the WAL writes, SQLite's file locks
 * and now and then a checkpoint: an `rm -rf` or a save of many small files
 * costs one commit per batch instead of several per file.
 *
 * Invariants (generation.h G7 is what makes D1–D4 safe for a save the
 * content rule may judge after a crash):
 *  D1. The deferred transaction holds only (a) changes to inodes, or entries
 *      of directories, that were in an OPEN generation inside that
 *      transaction (cat_change_begin: the check and the change are one lock
 *      hold), (b) the chunk rows, references and upload rows those changes
 *      imply, and (c) cat_chunk_stored records, which join it while it is
 *      open whatever file the chunk is for: the commit that makes a file
 *      outside generations name the chunk commits the record first (D2).
 *      Any other change that joins it is committed with it before the lock
 *      is released (D2). Outside generations (latest, tracker files,
 *      configs), in COMMITTED ones, for a generation root itself, and for
 *      a durable commit (fsync) nothing is deferred: those commit before
 *      FUSE is answered, as before.
 *  D2. Nothing is committed after it without it. cat_begin commits it
 *      before its BEGIN, and so does a durable commit (fsync), so every
 *      write transaction (a generation's commit, abort or deletion, a file
 *      commit outside generations, a durable commit, the uploader's
 *      bookkeeping) starts from a catalog where the changes before it are
 *      committed. A write outside a transaction (an autocommit statement)
 *      joins it, and cat_unlock commits both before the lock is released
 *      (rows changed since the last deferred change:
 *      sqlite3_total_changes64). Reads, cat_begin_read's included, run
 *      inside it and commit nothing: the connection sees its own changes,
 *      as FUSE was told. On disk the catalog is therefore always a prefix
 *      of what was answered, and the only part a crash can drop is changes
 *      inside generations that are still OPEN, which recovery holds as that
 *      prefix left them (G4), never provable by content while a writer's
 *      end is missing from it (G7).
 *  D3. It is committed at the latest CAT_DEFER_MS (cat_defer_window) after
 *      its first change (the flusher thread, started with the first one),
 *      when it holds CAT_DEFER_MAX changes, at cat_close, or when fs/ns.c
 *      asks (cat_defer_commit: the flush of a trigger or of a file of
 *      NS_FLUSH_COMMIT_BYTES or more, fs/ns.h invariants 9 and 11). Other
 *      processes reading the catalog file (ckptfs-admin, sqlite3) see
 *      changes that late.
 *  D4. A failed change is rolled back to its savepoint and leaves the
 *      others in place. If the commit fails or SQLite drops the whole
 *      transaction (an I/O error, a full disk), the deferred changes are
 *      lost, which is logged: removed names come back, created files
 *      vanish, contents go back to their last commit. The generations they
 *      were marked in memory: cat_gen_commit refuses them (a rule:
 *      -ENOTRECOVERABLE, and fs/gen.c holds them with GEN_LOST_REASON,
 *      generation.h G9; an explicit decision: -EIO, they stay OPEN); and
 *      in the catalog, on their roots (G7: writing = 2, a
 *      transaction of its own, before any later change), so the next open
 *      holds them with GEN_LOST_REASON, never provable by content — a
 *      checkpoint that lost files is never committed but by an explicit
 *      decision. If that mark cannot be written either, it stays pending
 *      (D9). The inode and dirent numbers it handed out are skipped (D7).
 *  D9. A lost mark (D4) that cannot be written (the full disk that lost
 *      the transaction) stays pending (lost_mark_pending) and is tried
 *      again before every later write transaction: cat_begin and the
 *      deferred transaction's BEGIN (cat_defer_mark_retry) refuse to begin,
 *      with its error (-ENOSPC), until it lands. So nothing commits on top
 *      of a catalog that forgot the loss (D2's "before any later change").
 *      Reads go on; an autocommit statement outside a transaction is not
 *      held back. At cat_close a mark still pending is logged. The unmount
 *      holds such a generation with GEN_LOST_REASON (fs/gen.c: its commit
 *      is refused, G9), one more write, which lands once room is back.
 *  D10. A file created in a lost transaction (D4) is gone from the catalog
 *      while the trainer still holds it open: its later write, truncate,
 *      flush, fsync and close answer the error that lost it (-ENOSPC for a
 *      full disk, -EIO), never -ENOENT ("No such file" for a file it just
 *      created), and never 0 (a close of a file created and not written
 *      found nothing to clear). cat_file_lost tells (fs/ns.c asks it
 *      before those calls, fs/writer.h invariant 4). The creates of the
 *      deferred transaction are noted (at most CAT_DEFER_MAX); at its loss
 *      they join the lost files with its error, at its commit they are
 *      forgotten. At most CAT_LOST_FILES_MAX are kept, the oldest dropped
 *      first (a handle of one dropped answers -ENOENT again); a number a
 *      new file takes (D7's skip failed) leaves the list. Their saves stay
 *      as D4 leaves them: never committed by a rule.
 *  D5. Changes in it may drop chunk counts (a file's commit replaces
 *      extents, a writer's drop releases its pending ones). The sweep of
 *      counts at zero runs after its commit (cat_defer_flush), never before:
 *      an object is removed only once the commit that dropped its last
 *      reference is on disk.
 *  D6. The upload queue rows it adds (a chunk stored) stay hidden from the
 *      uploader until it commits: cat_upload_list lists only rows up to the
 *      uploads sequence as it was when it began. So an object reaches
 *      BACKING, and a row is marked uploaded, only for chunk rows a crash
 *      cannot take away.
 *  D7. A writer whose chunk row exists only in it (cat_pending_add said
 *      must_store) writes the object before that row is committed: a crash
 *      would leave an object no row names. Before the object is written,
 *      its hash is appended to the intent journal (the catalog's path +
 *      "-defer": a "begin" line when the transaction opens, an "object
 *      <hex>" line per such object), written with plain write(2): it
 *      survives a kill -9 of the daemon, as the cache's objects do. After
 *      each successful commit it is emptied. At open, after recovery, a
 *      journal that is not empty means a deferred transaction was lost:
 *      every object it names that has no chunk row is reclaimed (the cache
 *      copy removed; nothing was uploaded, D6), a named chunk that has a
 *      row is left to the catalog (it is referenced, or a zero count the
 *      sweep already reclaimed), and the inode and dirent sequences are
 *      moved past the CAT_DEFER_MAX numbers the lost transaction may have
 *      handed out, so that no number FUSE was given comes back (catalog
 *      invariant 5). An open without a reclaim callback (a tool's) leaves
 *      the journal for the next open that has one. An object deduplicated
 *      by a committed file was committed with its row before that file
 *      (D2), so it always has a row. Power loss is not covered:
 *      synchronous=NORMAL commits can be lost then too, and the orphans
 *      are `ckptfs-admin gc`'s.
 *  D8. The journal read back is bounded (DESIGN invariant 7): a file larger
 *      than CAT_INTENT_MAX is not read at all (logged; its numbers are
 *      skipped, its objects left to gc), a line is a record only at exactly
 *      the length cat_defer_intent writes, and no line is held longer than
 *      that, whatever the file holds.
 *
 * Everything here runs with cat->lock held, the flusher included (it waits
 * on cat->defer_wake with that mutex). */
#define _GNU_SOURCE
#include "cachedir.h"
#include "catalog_internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define CAT_DEFER_MS 10 /* the default window (cat_defer_window) */
#define CAT_DEFER_MAX 1024
#define CAT_LOST_FILES_MAX (16 * CAT_DEFER_MAX) /* D10 */
#define CAT_INTENT_TAIL CACHEDIR_JOURNAL_TAIL
#define CAT_INTENT_BEGIN "begin\n"
#define CAT_INTENT_OBJECT "object "
/* D8: a journal larger than this is not read (~930 000 object lines) */
#define CAT_INTENT_MAX ((off_t)64 << 20)
/* "object <hex>" without its '\n'; cat_defer_intent writes one NUL after it */
#define CAT_INTENT_LINE (sizeof(CAT_INTENT_OBJECT) - 1 + 2 * CAT_HASH_LEN)

static int64_t cat_defer_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The window: CAT_DEFER_MS unless cat_defer_window set one (0 = none). */
static unsigned cat_defer_ms(const struct cat *cat)
{
	return cat->defer_ms_set ? cat->defer_ms : CAT_DEFER_MS;
}

int cat_defer_commit(struct cat *cat)
{
	pthread_mutex_lock(&cat->lock);
	int rc = cat_defer_flush(cat);
	pthread_mutex_unlock(&cat->lock);
	return rc;
}

bool cat_defer_active(struct cat *cat)
{
	return __atomic_load_n(&cat->deferred, __ATOMIC_RELAXED) != 0;
}

void cat_defer_window(struct cat *cat, unsigned ms)
{
	pthread_mutex_lock(&cat->lock);
	cat_defer_flush(cat);
	cat->defer_ms = ms;
	cat->defer_ms_set = true;
	pthread_mutex_unlock(&cat->lock);
}

/* ---- the intent journal (D7) ---- */

static void cat_intent_path(const struct cat *cat, char *buf, size_t size)
{
	snprintf(buf, size, "%s" CAT_INTENT_TAIL, cat->path);
}

static int cat_intent_write(struct cat *cat, const char *text, size_t len)
{
	if (cat->intent_fd < 0) {
		char path[4096];
		cat_intent_path(cat, path, sizeof(path));
		cat->intent_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (cat->intent_fd < 0) {
			int err = errno;
			log_warn("catalog %s: cannot open %s (%s): changes inside open generations"
				 " commit one by one", cat->path, path, strerror(err));
			return -err;
		}
		struct stat sb;
		cat->intent_len = fstat(cat->intent_fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
	}
	ssize_t n = pwrite(cat->intent_fd, text, len, (off_t)cat->intent_len);
	if (n != (ssize_t)len) {
		int err = n < 0 ? errno : ENOSPC;
		log_warn("catalog %s: cannot write its intent journal (%s)", cat->path, strerror(err));
		return -err;
	}
	cat->intent_len += len;
	return 0;
}

/* A deferred transaction begins: the journal says so (D7: its numbers are
 * skipped after a crash). */
static int cat_intent_begin(struct cat *cat)
{
	if (cat->intent_len > 0)
		return 0; /* not emptied (a lost transaction's): it says so already */
	return cat_intent_write(cat, CAT_INTENT_BEGIN, sizeof(CAT_INTENT_BEGIN) - 1);
}

/* The deferred transaction committed: what the journal names has rows. */
static void cat_intent_clear(struct cat *cat)
{
	if (cat->intent_len == 0 || cat->intent_sticky || cat->intent_fd < 0)
		return;
	if (ftruncate(cat->intent_fd, 0) == 0)
		cat->intent_len = 0;
	else
		log_warn("catalog %s: cannot empty its intent journal (%s); the next open reads it",
			 cat->path, strerror(errno));
}

int cat_defer_intent(struct cat *cat, const uint8_t hash[CAT_HASH_LEN])
{
	if (cat->deferred == 0)
		return 0; /* committed already: the row is there */
	char line[sizeof(CAT_INTENT_OBJECT) + 2 * CAT_HASH_LEN + 1];
	memcpy(line, CAT_INTENT_OBJECT, sizeof(CAT_INTENT_OBJECT) - 1);
	cat_hex(hash, line + sizeof(CAT_INTENT_OBJECT) - 1);
	line[sizeof(line) - 1] = '\n';
	if (cat_intent_write(cat, line, sizeof(line)) == 0)
		return 0;
	return cat_defer_flush(cat) == 0 ? 0 : -EIO; /* the row committed instead */
}

/* Exactly 2 * CAT_HASH_LEN lower-case hex digits, then '\n' or NUL. */
static int cat_hex_parse(const char *s, uint8_t out[CAT_HASH_LEN])
{
	for (int i = 0; i < 2 * CAT_HASH_LEN; i++) {
		int c = s[i], v;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else
			return -EINVAL;
		if (i % 2 == 0)
			out[i / 2] = (uint8_t)(v << 4);
		else
			out[i / 2] |= (uint8_t)v;
	}
	return s[2 * CAT_HASH_LEN] == '\n' || s[2 * CAT_HASH_LEN] == '\0' ? 0 : -EINVAL;
}

/* Skips the inode and dirent numbers a lost transaction may have handed
 * out (D4, D7; one statement, committed on its own). */
static void cat_defer_skip_numbers(struct cat *cat)
{
	int rc = cat_bind(cat, S_SEQ_BUMP, A_INT(CAT_DEFER_MAX));
	if (rc == 0)
		rc = cat_run(cat, S_SEQ_BUMP);
	if (rc != 0)
		log_error("catalog %s: cannot skip the inode numbers of a lost transaction; new"
			  " files may reuse them", cat->path);
}

/* Reads one line of the journal into line (room for CAT_INTENT_LINE + 2
 * bytes), NUL-terminated, without its '\n'. Returns its length (NUL bytes
 * in it counted), CAT_INTENT_LINE + 2 for a longer line (skipped to its
 * end: not a record), or -1 at the end of the file. */
static ssize_t cat_intent_line(FILE *f, char *line)
{
	size_t n = 0;
	int c;
	while ((c = getc_unlocked(f)) != EOF && c != '\n')
		if (n <= CAT_INTENT_LINE + 1)
			line[n++] = (char)c;
	if (c == EOF && n == 0)
		return -1;
	line[n <= CAT_INTENT_LINE ? n : CAT_INTENT_LINE + 1] = 0;
	return (ssize_t)n;
}

/* Whether a line of the journal is an object record as cat_defer_intent
 * writes it: "object <hex>", then one NUL (a last line torn after its
 * digits may lack it and the '\n'). */
static int cat_intent_record(const char *line, size_t len, uint8_t hash[CAT_HASH_LEN])
{
	size_t tag = sizeof(CAT_INTENT_OBJECT) - 1;
	if ((len != CAT_INTENT_LINE && (len != CAT_INTENT_LINE + 1 || line[CAT_INTENT_LINE] != 0)) ||
	    memcmp(line, CAT_INTENT_OBJECT, tag) != 0)
		return -EINVAL;
	return cat_hex_parse(line + tag, hash);
}

int cat_defer_recover(struct cat *cat)
{
	char path[4096];
	cat_intent_path(cat, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (f == NULL) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return err == ENOENT ? 0 : -err;
	}
	char line[CAT_INTENT_LINE + 2];
	ssize_t len;
	uint64_t named = 0, reclaimed = 0, failed = 0;
	bool any = false;
	struct stat sb;
	if (fstat(fileno(f), &sb) == 0 && sb.st_size > CAT_INTENT_MAX) {
		/* D8: judged by its size, not read; its numbers are still skipped */
		log_error("catalog %s: its intent journal %s is %lld bytes, more than one can be"
			  " (%lld): not read; objects of a lost transaction it may name are left"
			  " to ckptfs-admin gc", cat->path, path, (long long)sb.st_size,
			  (long long)CAT_INTENT_MAX);
		any = true;
		fseeko(f, 0, SEEK_END);
	}
	while ((len = cat_intent_line(f, line)) >= 0) {
		any = true;
		uint8_t hash[CAT_HASH_LEN];
		if (cat_intent_record(line, (size_t)len, hash) != 0)
			continue; /* "begin", or a torn line */
		named++;
		int rc = cat_bind(cat, S_CHUNK_EXISTS, A_HASH(hash));
		if (rc == 0)
			rc = cat_next(cat, S_CHUNK_EXISTS);
		cat_reset(cat, S_CHUNK_EXISTS);
		if (rc != 0) {
			failed += rc < 0; /* rc 1: it has a row, the catalog's own */
			continue;
		}
		/* without a store to remove it from (a tool's catalog), the journal
		 * waits for an open that has one */
		int rrc = cat->reclaim ? cat->reclaim(cat->reclaim_arg, hash) : -EAGAIN;
		if (rrc == -EAGAIN) {
			failed++;
		} else if (rrc == 0) {
			reclaimed++;
		} else {
			failed++;
			log_warn("catalog %s: cannot remove the object %.64s of a lost transaction"
				 " (%s); the next open tries again", cat->path,
				 line + sizeof(CAT_INTENT_OBJECT) - 1,
				 strerror(rrc < 0 ? -rrc : rrc));
		}
	}
	fclose(f);
	if (any) {
		cat_defer_skip_numbers(cat);
		log_info("catalog %s: changes inside open generations were lost with the last run"
			 " (their generations are held, those with a file still being written not"
			 " provable by content: generation.h G4, G7): %" PRIu64 " objects written"
			 " for them, %" PRIu64 " without a row removed", cat->path, named, reclaimed);
	}
	if (failed > 0)
		cat->intent_sticky = true; /* appended to, never emptied, read again next open */
	else if (unlink(path) != 0 && errno != ENOENT)
		log_warn("catalog %s: cannot remove %s: %s", cat->path, path, strerror(errno));
	return 0;
}

/* ---- the deferred transaction ---- */

/* The deferred transaction is gone (committed, or dropped by SQLite). */
static void cat_defer_forget(struct cat *cat)
{
	__atomic_store_n(&cat->deferred, 0, __ATOMIC_RELAXED); /* cat_defer_active reads it unlocked */
	cat->deferred_since_ns = 0;
	cat->defer_sweep = false;
	cat->n_defer_gens = 0;
	cat->defer_gens_all = false;
	cat->n_defer_created = 0;
}

void cat_defer_note_created(struct cat *cat, uint64_t ino)
{
	if (cat->n_defer_created == cat->cap_defer_created) {
		unsigned cap = cat->cap_defer_created ? 2 * cat->cap_defer_created : 64;
		uint64_t *v = realloc(cat->defer_created, cap * sizeof(*v));
		if (v == NULL)
			return; /* its loss, if any, answers -ENOENT as before D10 */
		cat->defer_created = v;
		cat->cap_defer_created = cap;
	}
	cat->defer_created[cat->n_defer_created++] = ino;
}

/* D10: the files the lost transaction created are lost with err. */
static void cat_defer_lose_files(struct cat *cat, int err)
{
	size_t n = cat->n_lost_files, add = cat->n_defer_created;
	if (add == 0)
		return;
	if (add > CAT_LOST_FILES_MAX)
		add = CAT_LOST_FILES_MAX;
	if (n + add > CAT_LOST_FILES_MAX) { /* the oldest go first */
		size_t drop = n + add - CAT_LOST_FILES_MAX;
		memmove(cat->lost_files, cat->lost_files + drop, (n - drop) * sizeof(*cat->lost_files));
		n -= drop;
	}
	struct cat_lost_file *v = realloc(cat->lost_files, (n + add) * sizeof(*v));
	if (v == NULL) {
		__atomic_store_n(&cat->n_lost_files, n, __ATOMIC_RELAXED);
		return;
	}
	const uint64_t *created = cat->defer_created + (cat->n_defer_created - add);
	for (size_t i = 0; i < add; i++)
		v[n + i] = (struct cat_lost_file){ created[i], err };
	cat->lost_files = v;
	__atomic_store_n(&cat->n_lost_files, n + add, __ATOMIC_RELAXED);
}

static ssize_t cat_lost_find(const struct cat *cat, uint64_t ino)
{
	for (size_t i = cat->n_lost_files; i-- > 0;)
		if (cat->lost_files[i].ino == ino)
			return (ssize_t)i;
	return -1;
}

void cat_defer_reused(struct cat *cat, uint64_t ino)
{
	ssize_t i;
	while ((i = cat_lost_find(cat, ino)) >= 0) {
		size_t n = cat->n_lost_files - 1;
		memmove(cat->lost_files + i, cat->lost_files + i + 1,
			(n - (size_t)i) * sizeof(*cat->lost_files));
		__atomic_store_n(&cat->n_lost_files, n, __ATOMIC_RELAXED);
	}
}

int cat_file_lost(struct cat *cat, uint64_t ino)
{
	if (cat->shared || __atomic_load_n(&cat->n_lost_files, __ATOMIC_RELAXED) == 0)
		return 0; /* nothing was ever lost: no lock taken on a write's path */
	pthread_mutex_lock(&cat->lock);
	ssize_t i = cat_lost_find(cat, ino);
	int err = i >= 0 ? cat->lost_files[i].err : 0;
	pthread_mutex_unlock(&cat->lock);
	return err;
}

/* D4: the deferred transaction was rolled back. Its generations must not
 * commit, the journal stays for the next open, its numbers are skipped. */
static void cat_defer_lost(struct cat *cat, unsigned n, int err)
{
	assert(n > 0 && n == cat->deferred); /* only a transaction with changes is lost */
	log_error("catalog %s: the transaction of %u changes inside open generations was rolled"
		  " back (%s): removed names are back, files created or written there since the"
		  " last commit are gone or older (%u created: their handles answer that error);"
		  " those generations cannot commit", cat->path, n, strerror(-err),
		  cat->n_defer_created);
	cat_defer_lose_files(cat, err); /* D10 */
	if (cat->defer_gens_all) {
		cat->lost_gens_all = true;
	} else {
		uint64_t *v = realloc(cat->lost_gens,
				      (cat->n_lost_gens + cat->n_defer_gens + 1) * sizeof(*v));
		if (v == NULL) {
			cat->lost_gens_all = true;
		} else {
			cat->lost_gens = v;
			for (unsigned i = 0; i < cat->n_defer_gens; i++)
				v[cat->n_lost_gens++] = cat->defer_gens[i];
		}
	}
	/* G7 of generation.h: the loss is recorded where a restart finds it
	 * (the memory above goes with the process), before any later change
	 * commits on top of the catalog it left */
	uint64_t gens[sizeof(cat->defer_gens) / sizeof(cat->defer_gens[0])];
	unsigned n_gens = cat->n_defer_gens;
	bool all = cat->defer_gens_all;
	memcpy(gens, cat->defer_gens, n_gens * sizeof(gens[0]));
	cat->intent_sticky = true;
	cat_defer_forget(cat);
	cat_defer_skip_numbers(cat);
	if (cat_gen_mark_lost(cat, gens, n_gens, all) != 0) {
		cat->lost_mark_pending = true; /* D9 */
		log_error("catalog %s: cannot record the loss in the catalog yet: tried again"
			  " before every later write transaction, which fails until it is"
			  " recorded (D9)", cat->path);
	}
}

int cat_defer_mark_retry(struct cat *cat)
{
	if (!cat->lost_mark_pending)
		return 0;
	assert(!cat->in_txn && cat->deferred == 0); /* an autocommit statement of its own */
	int rc = cat_gen_mark_lost(cat, cat->lost_gens, cat->n_lost_gens, cat->lost_gens_all);
	if (rc != 0) {
		log_debug("catalog %s: the loss of a failed transaction is still not recorded (%s):"
			  " this write transaction is refused (D9)", cat->path, strerror(-rc));
		return rc == -EIO || rc >= 0 ? -ENOSPC : rc;
	}
	cat->lost_mark_pending = false;
	log_info("catalog %s: the loss of a failed transaction is recorded now: its generations"
		 " are held for it at the next open, never proven by content", cat->path);
	return 0;
}

bool cat_defer_gen_lost(struct cat *cat, uint64_t gen)
{
	if (cat->lost_gens_all)
		return true;
	for (size_t i = 0; i < cat->n_lost_gens; i++)
		if (cat->lost_gens[i] == gen)
			return true;
	return false;
}

int cat_defer_flush(struct cat *cat)
{
	if (cat->deferred == 0)
		return 0;
	assert(!cat->in_txn); /* no change's savepoint is open: it would be cut in two */
	unsigned n = cat->deferred;
	bool sweep = cat->defer_sweep;
	int rc = cat_run(cat, S_COMMIT);
	if (rc != 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_run(cat, S_ROLLBACK);
	if (rc != 0) {
		cat_defer_lost(cat, n, rc);
		return rc;
	}
	cat_defer_forget(cat);
	cat_intent_clear(cat);
	if (sweep) /* D5: after the commit that dropped the counts */
		cat_sweep(cat);
	return 0;
}

void cat_defer_settle(struct cat *cat)
{
	if (cat->deferred == 0)
		return;
	if (sqlite3_get_autocommit(cat->db) != 0) /* SQLite dropped it (an I/O error) */
		cat_defer_lost(cat, cat->deferred, -EIO);
	else if (sqlite3_total_changes64(cat->db) != cat->deferred_changes)
		cat_defer_flush(cat);
}

int64_t cat_defer_upload_floor(struct cat *cat)
{
	return cat->deferred ? cat->defer_upload_floor : INT64_MAX;
}

/* The flusher (D3): commits the deferred transaction CAT_DEFER_MS after its
 * first change. */
static void *cat_defer_flusher(void *arg)
{
	struct cat *cat = arg;
	pthread_mutex_lock(&cat->lock);
	while (!cat->flusher_stop) {
		if (cat->deferred == 0) {
			pthread_cond_wait(&cat->defer_wake, &cat->lock);
			continue;
		}
		int64_t due = cat->deferred_since_ns + (int64_t)cat_defer_ms(cat) * 1000000LL;
		if (cat_defer_now_ns() < due) {
			struct timespec until = { .tv_sec = due / 1000000000,
						  .tv_nsec = due % 1000000000 };
			pthread_cond_timedwait(&cat->defer_wake, &cat->lock, &until);
			continue;
		}
		cat_defer_flush(cat);
	}
	pthread_mutex_unlock(&cat->lock);
	return NULL;
}

/* Starts the flusher with the first deferral. Without it (no thread),
 * nothing is deferred. */
static bool cat_defer_flusher_up(struct cat *cat)
{
	if (cat->flusher_running || cat->flusher_failed)
		return cat->flusher_running;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cat->defer_wake, &ca);
	pthread_condattr_destroy(&ca);
	int err = pthread_create(&cat->flusher, NULL, cat_defer_flusher, cat);
	cat->flusher_running = err == 0;
	cat->flusher_failed = err != 0;
	if (err != 0) {
		pthread_cond_destroy(&cat->defer_wake);
		log_warn("catalog %s: no thread to group commits (%s): every change commits"
			 " on its own", cat->path, strerror(err));
	}
	return cat->flusher_running;
}

/* A new deferred transaction: BEGIN, the upload floor (D6), the journal's
 * begin line (D7). */
static int cat_defer_open(struct cat *cat)
{
	assert(cat->deferred == 0 && !cat->in_txn);
	int rc = cat_defer_mark_retry(cat); /* D9: nothing commits on top of a forgotten loss */
	if (rc == 0)
		rc = cat_run(cat, S_BEGIN);
	if (rc != 0)
		return rc;
	rc = cat_next(cat, S_UPLOAD_SEQ);
	if (rc == 1)
		cat->defer_upload_floor = cat_col_int(cat, S_UPLOAD_SEQ, 0);
	cat_reset(cat, S_UPLOAD_SEQ);
	rc = rc == 1 ? cat_intent_begin(cat) : (rc == 0 ? -EIO : rc);
	if (rc != 0) {
		cat_run(cat, S_ROLLBACK);
		return -EAGAIN; /* commit as usual */
	}
	return 0;
}

static void cat_defer_note_gen(struct cat *cat, uint64_t gen)
{
	if (gen == 0 || cat->defer_gens_all)
		return;
	for (unsigned i = 0; i < cat->n_defer_gens; i++)
		if (cat->defer_gens[i] == gen)
			return;
	unsigned cap = sizeof(cat->defer_gens) / sizeof(cat->defer_gens[0]);
	if (cat->n_defer_gens < cap)
		cat->defer_gens[cat->n_defer_gens++] = gen;
	else
		cat->defer_gens_all = true;
}

int cat_defer_begin(struct cat *cat, uint64_t gen)
{
	assert(!cat->in_txn); /* one change at a time, each in its own savepoint */
	if (cat_defer_ms(cat) == 0 || (cat->deferred == 0 && !cat_defer_flusher_up(cat)))
		return -EAGAIN;
	int rc = cat->deferred ? 0 : cat_defer_open(cat);
	if (rc == 0) {
		rc = cat_run(cat, S_SAVEPOINT);
		if (rc != 0 && cat->deferred == 0)
			cat_run(cat, S_ROLLBACK);
	}
	cat->in_txn = rc == 0;
	if (rc == 0)
		cat_defer_note_gen(cat, gen);
	return rc;
}

/* D4: back to the savepoint; a transaction left with nothing deferred in it
 * is rolled back whole. */
static void cat_defer_undo(struct cat *cat)
{
	if (cat_run(cat, S_ROLLBACK_TO) == 0)
		cat_run(cat, S_RELEASE);
	if (cat->deferred == 0 && sqlite3_get_autocommit(cat->db) == 0)
		cat_run(cat, S_ROLLBACK);
}

int cat_defer_end(struct cat *cat, int rc)
{
	if (!cat->in_txn)
		return rc;
	cat->in_txn = false;
	if (rc == 0)
		rc = cat_run(cat, S_RELEASE);
	if (rc != 0)
		cat_defer_undo(cat);
	if (sqlite3_get_autocommit(cat->db) != 0) { /* the transaction is gone */
		if (cat->deferred)
			cat_defer_lost(cat, cat->deferred, rc ? rc : -EIO);
		cat_defer_forget(cat);
		return rc ? rc : -EIO;
	}
	cat->deferred_changes = sqlite3_total_changes64(cat->db);
	if (rc != 0)
		return rc;
	if (__atomic_fetch_add(&cat->deferred, 1, __ATOMIC_RELAXED) == 0) {
		cat->deferred_since_ns = cat_defer_now_ns();
		pthread_cond_signal(&cat->defer_wake);
	}
	if (cat->deferred >= CAT_DEFER_MAX)
		cat_defer_flush(cat); /* its failure is logged; this change was answered */
	return 0;
}

int cat_change_begin(struct cat *cat, uint64_t ino, bool *deferred)
{
	bool open = false;
	uint64_t gen = 0;
	*deferred = false;
	int rc = cat_defer_ms(cat) ? cat_gen_in_open_txn(cat, ino, &open, &gen) : 0;
	if (rc == 0 && open) {
		rc = cat_defer_begin(cat, gen);
		if (rc == 0) {
			*deferred = true;
			return 0;
		}
	}
	if (rc != 0 && rc != -EAGAIN && rc != -ENOENT)
		return rc;
	return cat_begin(cat); /* commits the deferred transaction first (D2) */
}

int cat_change_end(struct cat *cat, bool deferred, int rc, bool may_drop)
{
	if (!deferred)
		return may_drop ? cat_end_sweep(cat, rc) : cat_end(cat, rc);
	assert(cat->in_txn); /* cat_defer_begin's savepoint */
	if (rc == 0 && may_drop)
		cat->defer_sweep = true; /* before a flush cat_defer_end may do */
	return cat_defer_end(cat, rc);
}

void cat_defer_stop(struct cat *cat)
{
	pthread_mutex_lock(&cat->lock);
	bool running = cat->flusher_running;
	cat->flusher_stop = true;
	if (running)
		pthread_cond_signal(&cat->defer_wake);
	pthread_mutex_unlock(&cat->lock);
	if (running)
		pthread_join(cat->flusher, NULL);
	pthread_mutex_lock(&cat->lock);
	cat->flusher_running = false;
	cat_defer_flush(cat);
	if (cat_defer_mark_retry(cat) != 0) /* D9: the last chance in this run */
		log_error("catalog %s: cannot record the loss of a failed transaction: after a"
			  " restart its generations may be proven complete by content although"
			  " files of them are older than answered", cat->path);
	if (cat->intent_fd >= 0) {
		close(cat->intent_fd);
		cat->intent_fd = -1;
		if (cat->intent_len == 0 && !cat->intent_sticky) { /* a clean stop leaves none */
			char path[4096];
			cat_intent_path(cat, path, sizeof(path));
			unlink(path);
		}
	}
	free(cat->lost_gens);
	cat->lost_gens = NULL;
	cat->n_lost_gens = 0;
	free(cat->defer_created);
	cat->defer_created = NULL;
	cat->n_defer_created = cat->cap_defer_created = 0;
	free(cat->lost_files);
	cat->lost_files = NULL;
	__atomic_store_n(&cat->n_lost_files, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cat->lock);
	if (running)
		pthread_cond_destroy(&cat->defer_wake);
}
