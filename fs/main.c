/* main — the ckptfs daemon: check the command line, open the store and the
 * catalog, mount, serve FUSE requests on a thread pool, and on unmount or
 * SIGINT/SIGTERM close everything cleanly (SIGHUP reopens the log file).
 *
 * Errors that can be found before mounting are reported on the terminal as
 * one line and a non-zero exit (options.c). Once in the background, the log
 * goes to CACHE/ckptfs.log (or -o log=FILE).
 *
 * M1 (review 40 F3): a cache whose catalog holds a durable generation mounts
 * only over the store it uploaded to: ckptfs.store's id equals the one in
 * CACHE/backing-id (a cache without one adopts the store's), and the newest
 * durable generation's manifest is on BACKING. Checked read-only, before
 * anything is written to BACKING or the cache. A catalog of an older schema
 * (readable only once its first read-write open migrated it) counts as one
 * that may hold such a generation: the marker and the id are checked, the
 * manifest at the mount after (review 41 F1).
 * M2 (review 40 F5, claim.h invariant 9): the store marker is made, upgraded
 * or given its id only once the claim is held (main_mark_store).
 * M3 (review 41 F3): on -o meta= the shared catalog is the authority for
 * the store id (meta/pgns.h N15), and the marker carries only that id. A
 * node mounts when BACKING's marker has the catalog's id, or has none (a
 * store from before ids: given it), or is missing while the catalog calls
 * nothing saved (no durable generation, no chunk uploaded: the marker is
 * made); it is refused, with one line and nothing written, over a marker
 * of another id, a missing marker while the catalog holds saves or says a
 * node found the marker (an NFS mount that did not come up), or a BACKING
 * without the newest durable generation's manifest. The catalog is read
 * before the marker, and marked only after a node found or wrote the
 * marker with its id: a node starting beside the one that writes it first
 * is never refused for looking too early. A catalog without an id is offered the marker's,
 * or a new one, before the claim (the one write ahead of it), and every
 * node takes the id the catalog holds after: nodes starting together end
 * with one id.
 * M4 (review 47 F1): a lone catalog that existed before this mount is not
 * behind BACKING: no generation manifest on BACKING has an id above the
 * highest this catalog ever handed out or reserved (cat_gen_id_last). A
 * catalog that lost its WAL, or an older copy of it put back, would hand
 * those ids out again, and its next save's manifest would replace a durable
 * save's on BACKING. Refused with one line naming both and the rebuild,
 * after the claim's own judgment (which names another catalog or a copy),
 * the claim then given back as found (claim_abandon: the next epoch holds it): nothing else is written
 * to BACKING. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backing.h"
#include "cache.h"
#include "cachedir.h"
#include "catalog.h"
#include "chunker.h"
#include "chunkput.h"
#include "claim.h"
#include "control.h"
#include "fuseinit.h"
#include "gen.h"
#include "leasekeep.h"
#include "log.h"
#include "manifest.h"
#include "upload.h"
#include "metrics.h"
#include "node.h"
#include "ns.h"
#include "ops.h"
#include "options.h"
#include "reader.h"
#include "recent.h"
#include "reclaimer.h"
#include "rebuild.h"
#include "safeopen.h"
#include "sigs.h"
#include "store.h"
#include "storeq.h"
#include "trust.h"
#include "upload.h"
#include "uploader.h"

/* The daemon's wiring: every handle the services are started with. Only this
 * file knows it; each module gets the handles and callbacks it uses (issue 17,
 * docs/DESIGN.md "Layers"). */
struct ckptfs {
	struct ckptfs_options opt;
	struct cat *cat;
	struct store *store;         /* the local cache's objects (CACHE/chunks) */
	struct backing *backing;
	struct claim *claim;         /* BACKING is this catalog's (fs/lib/claim.h) */
	struct leasekeep *lease;     /* -o meta=: this node's lease (leasekeep.h); NULL alone */
	struct reclaimer *reclaimer; /* -o meta=: the cluster's reclaim duty (reclaimer.h) */
	struct backing *reclaim_backing; /* nfs://: the reclaimer's, short RPC timeout (below) */
	bool catalog_fresh;          /* -o meta=: this mount made the local catalog file */
	struct cache *cache;
	struct uploader *uploader;
	struct storeq *storeq;       /* chunk objects written behind the writers */
	struct chunkput *chunkput;   /* putting chunks, for the writers (chunkput.h) */
	struct node_table *nodes;
	struct ns *ns;               /* the namespace (ns.c): freed at teardown */
	struct reader *reader;       /* file bytes from chunks (fs/reader.h) */
	struct recent *recent;       /* hashes of chunks just written (replicated saves) */
	struct gen_policy *gen;
	struct chunker_params chunking;
	char staging_dir[PATH_MAX]; /* CACHE/staging: files being rewritten out of order */
	int lock_fd;                /* flock on CACHE/lock: one daemon per cache */
	struct fuseinit *fuse_init; /* the session's INIT: may read-only opens use direct_io */
	/* set while serving: main_stopping() asks it, under se_lock, which
	 * main holds to clear it before the session is destroyed (store queue
	 * threads outlive the session and may ask meanwhile) */
	struct fuse_session *se;
	bool stopped;               /* the session is gone; under se_lock */
	pthread_mutex_t se_lock;
};

#define MAIN_STORE_MARKER "ckptfs.store"
#define MAIN_STORE_ID_LEN 32 /* hex digits of the store id in the marker */
/* storeq: threads writing chunk objects behind the writers, and how many
 * objects may be queued or in writing at once (each pins about a MiB of
 * recent's copies, whose budget is 16 MiB) */
#define MAIN_STORE_THREADS 3
#define MAIN_STORE_DEPTH 6

/* ---- /dev/fuse through our own read and writev (fuseinit.h) ----
 *
 * Both call the system call as libfuse would and return what it returned,
 * errno included; only the reply to the kernel's INIT may be a patched copy.
 * No splice hooks: libfuse then neither offers nor uses splice, as before
 * (ckptfs has no write_buf and asks for no splice capability; replies are
 * writev'd from the chunk cache by fuse_reply_iov). */
static struct fuseinit main_fuseinit;
static int main_fuseinit_logged;

static ssize_t main_io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	if (n > 0) {
		int err = errno;
		fuseinit_saw_request(&main_fuseinit, buf, (size_t)n);
		errno = err;
	}
	return n;
}

/* Once, when the INIT reply went out: what the kernel allowed, and what
 * read-only opens therefore do (ops_open_node). */
static void main_fuseinit_log(const struct ops_context *ctx)
{
	if (fuseinit_outcome(&main_fuseinit) == FUSEINIT_PENDING ||
	    __atomic_exchange_n(&main_fuseinit_logged, 1, __ATOMIC_RELAXED))
		return;
	char line[160];
	const char *what = fuseinit_describe(&main_fuseinit, line, sizeof(line));
	if (!fuseinit_granted(&main_fuseinit))
		log_info("%s: read-only opens keep the page cache", what);
	else if (ctx->read_cache)
		log_info("%s: read-only opens keep the page cache (-o read_cache)", what);
	else
		log_info("%s: read-only opens of files of %u MiB or more bypass the page cache "
			 "(direct_io)", what, OPS_DIRECT_READ_MIN >> 20);
}

static ssize_t main_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct iovec out[2];
	unsigned char arg[FUSEINIT_OUT_MAX];
	bool patched = count == 2 && fuseinit_patch_reply(&main_fuseinit, iov, count, out, arg);
	ssize_t res = writev(fd, patched ? out : iov, count);
	if (patched || !__atomic_load_n(&main_fuseinit_logged, __ATOMIC_RELAXED)) {
		int err = errno;
		if (patched)
			fuseinit_reply_written(&main_fuseinit, res);
		main_fuseinit_log(userdata);
		errno = err;
	}
	return res;
}

/* After fuse_session_mount: the same descriptor, through the hooks above.
 * Without them (an error here) read-only opens keep the page cache. */
static void main_fuse_io(struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = main_io_read, .writev = main_io_writev };
	int rc = fuse_session_custom_io(se, &io, fuse_session_fd(se));
	if (rc != 0)
		log_warn("FUSE: cannot install the INIT hook (%s): read-only opens keep the page cache",
			 strerror(-rc));
}

static int main_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	return store_remove(arg, hash);
}

static int main_objects_sync(void *arg)
{
	return store_syncfs(arg);
}

/* A catalog alone, with the sweep's objects sync (catalog.c invariant 13).
 * Its open sweeps too, before the sync can be set: objects a killed run
 * left in the page cache are made durable first. */
static int main_cat_open_alone(struct ckptfs *fs, const char *path)
{
	(void)store_syncfs(fs->store); /* a failure: the open's sweep syncs nothing more */
	int rc = cat_open(path, getuid(), getgid(), main_reclaim, fs->store, &fs->cat);
	if (rc == 0)
		cat_set_objects_sync(fs->cat, main_objects_sync, fs->store);
	/* chunkput.h P7: small.db's puts batched behind the catalog's commit
	 * hook; on -o meta= (main_cat_open) they stay committed one by one */
	if (rc == 0)
		rc = chunkput_small_batch(fs->cat, fs->store);
	return rc;
}

/* Reads a small text file into buf; returns its length or -errno. */
static int main_read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = '\0';
	return (int)n;
}

static int main_write_small(const char *path, const char *text)
{
	char head[PATH_MAX + 16], tmp[PATH_MAX + 40];
	snprintf(head, sizeof(head), "%s.tmp.", path);
	int rc = safe_tmpname(tmp, sizeof(tmp), head); /* trust.h: unguessable, exclusive */
	int fd = rc == 0 ? open(tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	if (fd < 0)
		return rc ? rc : -errno;
	size_t len = strlen(text);
	rc = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc != 0)
		unlink(tmp);
	return rc;
}

/* Parses the store marker: "ckptfs store format N" with N a decimal >= 1
 * that fits, one newline, then optionally "id HEX" (the store's identity,
 * 32 lowercase hex digits, docs/FORMAT.md) and one newline. Anything else (a
 * sign, a zero, trailing words, an overflow) is not a marker: a store is
 * never "upgraded" from a version misread. id gets "" when the line is absent. */
static bool main_parse_marker(const char *text, unsigned long *version, char *id, size_t id_size)
{
	static const char prefix[] = "ckptfs store format ";
	if (strncmp(text, prefix, sizeof(prefix) - 1) != 0)
		return false;
	const char *p = text + sizeof(prefix) - 1;
	if (*p < '0' || *p > '9')
		return false;
	char *end = NULL;
	errno = 0;
	unsigned long v = strtoul(p, &end, 10);
	if (errno != 0 || v == 0)
		return false;
	if (*end == '\n')
		end++;
	id[0] = '\0';
	if (strncmp(end, "id ", 3) == 0) {
		const char *h = end + 3;
		size_t n = strspn(h, "0123456789abcdef");
		if (n != MAIN_STORE_ID_LEN || n + 1 > id_size)
			return false;
		memcpy(id, h, n);
		id[n] = '\0';
		end = (char *)h + n;
		if (*end == '\n')
			end++;
	}
	if (*end != '\0')
		return false;
	*version = v;
	return true;
}

/* What main_check_bindings found and main_mark_store writes once the claim
 * is held (claim.h invariant 9: only a holder writes BACKING; review 40 F5). */
static struct main_mark {
	bool put_marker;                    /* ckptfs.store to (re)write */
	char marker[128];                   /* its new text */
	char id[MAIN_STORE_ID_LEN + 1];     /* the store's id (found or new) */
	bool put_cache_id;                  /* CACHE/backing-id to write */
	bool shared_marked;                 /* M3: record in the shared catalog that the
					     * marker carries its id (cat_store_marked) */
	unsigned long was, to;              /* an upgrade of the format: from, to */
} main_mark;

/* M1 (review 40 F3): a cache whose catalog calls a generation durable belongs
 * to the store that holds it. The store's random id is in ckptfs.store, and
 * the cache records it in CACHE/backing-id (beside CACHE/backing, read before
 * the catalog is opened, so a refusal writes nothing). A used cache is refused
 * over a BACKING with no marker, with another id, or without the newest
 * durable generation's manifest. */
struct main_durable {
	uint64_t count;
	uint64_t newest; /* its id (0: none) */
	uint32_t version;
	int old_schema; /* > 0: the catalog's older schema, not readable before its migration */
	struct cat *cat;
	char why[160]; /* a catalog that cannot be read: SQLite's reason, or "" */
};

static int main_durable_fn(void *arg, const struct cat_gen *g)
{
	struct main_durable *d = arg;
	bool durable = false;
	if (g->state != GEN_COMMITTED || cat_gen_durable(d->cat, g->id, &durable) != 0 || !durable)
		return 0;
	d->count++;
	if (g->id > d->newest) {
		d->newest = g->id;
		d->version = g->version;
	}
	return 0;
}

/* The durable generations of the lone catalog in CACHE (read-only). */
static int main_count_durable(const struct ckptfs_options *o, struct main_durable *d)
{
	char path[PATH_MAX + 16];
	struct stat sb;
	memset(d, 0, sizeof(*d));
	cachedir_path(o->cache, CACHEDIR_CATALOG, path, sizeof(path));
	if (stat(path, &sb) != 0 || sb.st_size == 0)
		return 0;
	/* a catalog of an older ckptfs is migrated by its first read-write open,
	 * after these checks: until then it cannot be read; main_check_bindings
	 * judges it by the marker and CACHE/backing-id alone (review 41 F1) */
	int schema = 0;
	int rc = cat_file_schema_version(path, &schema, d->why, sizeof(d->why));
	if (rc != 0)
		return rc;
	if (schema > 0 && schema < CAT_SCHEMA_VERSION) {
		d->old_schema = schema;
		return 0;
	}
	if (schema > CAT_SCHEMA_VERSION) /* main_open_catalog refuses it: "upgrade ckptfs" */
		return 0;
	rc = cat_open_readonly(path, &d->cat);
	if (rc == 0)
		rc = cat_gen_list_brief(d->cat, 0, false, main_durable_fn, d);
	cat_close(d->cat);
	d->cat = NULL;
	return rc;
}

/* A catalog.db that cannot be read as a catalog (-EIO: damaged, -EINVAL:
 * not an SQLite database): one line naming it, the reason (why, SQLite's,
 * else the errno's and the log) and the remedy. Nothing is changed. */
static void main_say_catalog_damaged(const struct ckptfs_options *o, const char *path, int rc,
				     const char *why)
{
	char reason[200];
	if (why && why[0])
		snprintf(reason, sizeof(reason), "%s", why);
	else
		snprintf(reason, sizeof(reason), "%s; see the log",
			 rc == -EINVAL ? "not an SQLite database" : strerror(-rc));
	fprintf(stderr, "ckptfs: catalog %s is damaged (%s): nothing was moved or deleted; rebuild it"
			" from BACKING with `ckptfs-admin rebuild --cache %s %s`, which keeps it aside as"
			" catalog.db.before-rebuild-TIME (what only it held, not on BACKING yet, is"
			" not recovered; docs/ADMIN.md)\n",
		path, reason, o->cache, o->backing);
}

static int main_refuse_store(const struct ckptfs_options *o, const struct main_durable *d,
			     const char *why)
{
	char held[96];
	if (d->old_schema)
		snprintf(held, sizeof(held), "a catalog of an older ckptfs (schema %d) that may hold "
			 "generations", d->old_schema);
	else
		snprintf(held, sizeof(held), "%" PRIu64 " generation%s", d->count,
			 d->count == 1 ? "" : "s");
	fprintf(stderr, "ckptfs: BACKING %s: %s, but cache %s holds %s "
			"durable on its BACKING: is it mounted? wiped? restored from an older copy? "
			"(mount with the right BACKING; docs/ADMIN.md)\n",
		o->backing, why, o->cache, held);
	return -1;
}

static void main_new_id(char *id)
{
	unsigned char r[MAIN_STORE_ID_LEN / 2];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) { /* not expected: still distinct */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)getpid();
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(x >> (8 * (i % 8))) ^ (unsigned char)i;
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(id + 2 * i, 3, "%02x", r[i]);
}

/* M1, M3: is the newest durable generation's manifest (id, version) on
 * BACKING? 0 yes; 1 missing, why (one line's reason) filled; -1 it could
 * not be looked for (said on stderr). */
static int main_newest_manifest_missing(struct ckptfs *fs, uint64_t id, uint32_t version,
					char *why, size_t why_size)
{
	char man[128];
	uint64_t size = 0;
	manifest_gen_path(id, version, man, sizeof(man));
	int rc = backing_stat(fs->backing, man, &size);
	if (rc == -ENOENT) {
		snprintf(why, why_size, "the newest durable save's manifest %s is missing", man);
		return 1;
	}
	if (rc != 0) {
		fprintf(stderr, "ckptfs: BACKING %s: cannot stat %s: %s\n", fs->opt.backing, man,
			strerror(-rc));
		return -1;
	}
	return 0;
}

/* M1: the newest durable generation's manifest is on BACKING (an older
 * schema's catalog, unread, is checked at the mount after its migration). */
static int main_check_newest_manifest(struct ckptfs *fs, const struct main_durable *d)
{
	char why[200];
	int rc = main_newest_manifest_missing(fs, d->newest, d->version, why, sizeof(why));
	return rc == 1 ? main_refuse_store(&fs->opt, d, why) : rc;
}

/* M3: a refusal on -o meta=, one line naming BACKING and what the shared
 * catalog holds. */
static int main_refuse_shared(const struct ckptfs_options *o, const struct cat_store_facts *f,
			      const char *why)
{
	char held[160];
	if (f->durable)
		snprintf(held, sizeof(held), "holds %" PRIu64 " generation%s durable on its BACKING",
			 f->durable, f->durable == 1 ? "" : "s");
	else if (f->uploaded)
		snprintf(held, sizeof(held), "holds chunks uploaded to its BACKING");
	else
		snprintf(held, sizeof(held), "belongs to store id %s, whose marker a node found on "
			 "its BACKING", f->id);
	fprintf(stderr, "ckptfs: BACKING %s: %s, but the shared catalog (-o meta=) %s: is it "
			"mounted? wiped? restored from an older copy? (mount with the right BACKING; "
			"docs/MULTINODE.md)\n",
		o->backing, why, held);
	return -1;
}

/* M3: BACKING's marker against the shared catalog's store id and saves, f
 * (read before the marker: a catalog marked says the marker was on BACKING
 * before this node looked); marker_id is the marker's id ("" none),
 * have_marker whether it exists. main_mark.id gets the id the catalog
 * holds. Reads only, but for the id's insert into a catalog without one
 * (pgns.h N15). */
static int main_check_shared_store(struct ckptfs *fs, const struct cat_store_facts *fp,
				   bool have_marker, const char *marker_id)
{
	const struct ckptfs_options *o = &fs->opt;
	struct cat_store_facts f = *fp;
	int rc;
	bool saved = f.durable > 0 || f.uploaded;
	main_mark.shared_marked = !f.marked; /* main_mark_store records it */
	if (f.id[0] && marker_id[0] && strcmp(f.id, marker_id) != 0) {
		fprintf(stderr, "ckptfs: BACKING %s: store id %s, but the shared catalog (-o meta=) "
				"belongs to store id %s: another store? (mount with the right BACKING; "
				"docs/MULTINODE.md)\n",
			o->backing, marker_id, f.id);
		return -1;
	}
	if (!have_marker && (saved || (f.marked && f.id[0])))
		return main_refuse_shared(o, &f, "no store marker (" MAIN_STORE_MARKER ")");
	if (f.newest) {
		char why[200];
		rc = main_newest_manifest_missing(fs, f.newest, f.version, why, sizeof(why));
		if (rc != 0)
			return rc == 1 ? main_refuse_shared(o, &f, why) : rc;
	}
	if (f.id[0]) {
		memcpy(main_mark.id, f.id, sizeof(main_mark.id));
		return 0;
	}
	/* a catalog without an id: the marker's, else a new one; the first
	 * offered wins, and a marker of another id is then another store's */
	char offer[MAIN_STORE_ID_LEN + 1], held[MAIN_STORE_ID_LEN + 1];
	if (marker_id[0])
		memcpy(offer, marker_id, sizeof(offer));
	else
		main_new_id(offer);
	rc = cat_store_id_offer(fs->cat, offer, held);
	if (rc != 0) {
		fprintf(stderr, "ckptfs: meta=: cannot record the store id in the shared catalog: %s\n",
			strerror(-rc));
		return -1;
	}
	if (marker_id[0] && strcmp(held, marker_id) != 0) {
		fprintf(stderr, "ckptfs: BACKING %s: store id %s, but the shared catalog (-o meta=) "
				"belongs to store id %s (recorded by another node just now): another "
				"store? (mount with the right BACKING; docs/MULTINODE.md)\n",
			o->backing, marker_id, held);
		return -1;
	}
	memcpy(main_mark.id, held, sizeof(main_mark.id));
	return 0;
}

/* The store on BACKING carries its format version and id; a cache belongs to
 * one BACKING (its catalog names chunks only that store holds). Reads only:
 * what is to be written waits in main_mark for the claim (main_mark_store). */
static int main_check_bindings(struct ckptfs *fs)
{
	const struct ckptfs_options *o = &fs->opt;
	char path[PATH_MAX + 32], buf[PATH_MAX + 64];
	size_t len = 0;
	unsigned long version = 0;
	bool have_marker = false;
	memset(&main_mark, 0, sizeof(main_mark));
	/* the zstd family writes codec 4, which needs format 4 (store.h) */
	/* packs (fs/uppack.h) need format 5 */
	int needed = o->packs ? STORE_MARKER_VERSION_PACKS
		     : o->codec == CODEC_FAMILY_ZSTD ? STORE_MARKER_VERSION_ZSTD
						     : STORE_MARKER_VERSION_LZ4;
	/* M3: the shared catalog's store id and saves, before the marker */
	struct cat_store_facts facts;
	int rc = o->meta_url[0] ? cat_store_facts(fs->cat, &facts) : 0;
	if (rc != 0) {
		fprintf(stderr, "ckptfs: meta=: cannot read the shared catalog's store id: %s\n",
			strerror(-rc));
		return -1;
	}
	rc = backing_get(fs->backing, MAIN_STORE_MARKER, buf, sizeof(buf) - 1, &len);
	if (rc == 0) {
		buf[len] = '\0';
		if (!main_parse_marker(buf, &version, main_mark.id, sizeof(main_mark.id))) {
			fprintf(stderr, "ckptfs: BACKING %s: %s is not a ckptfs store marker\n", o->backing,
				MAIN_STORE_MARKER);
			return -1;
		}
		if (version > STORE_MARKER_VERSION) {
			fprintf(stderr, "ckptfs: BACKING %s: store format %lu is newer than this ckptfs "
					"understands (%d): upgrade ckptfs\n",
				o->backing, version, STORE_MARKER_VERSION);
			return -1;
		}
		if (o->meta_url[0] && version >= STORE_MARKER_VERSION_PACKS) {
			fprintf(stderr, "ckptfs: BACKING %s: store format %lu may hold packs (written"
					" with -o packs=on), which a node of a shared catalog (-o meta=)"
					" cannot read yet: mount it without meta=\n",
				o->backing, version);
			return -1;
		}
		have_marker = true;
	} else if (rc != -ENOENT) {
		fprintf(stderr, "ckptfs: BACKING %s: cannot read %s: %s\n", o->backing,
			MAIN_STORE_MARKER, strerror(-rc));
		return -1;
	}
	cachedir_path(o->cache, CACHEDIR_BACKING, path, sizeof(path));
	int n = main_read_small(path, buf, sizeof(buf));
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (n >= 0 && strcmp(buf, o->backing) != 0) {
		fprintf(stderr, "ckptfs: cache %s: belongs to BACKING %s, not %s (give another -o cache=DIR)\n",
			o->cache, buf, o->backing);
		return -1;
	}
	bool wrote_owner = n < 0;
	/* M1: the used cache against the store found */
	char recorded[MAIN_STORE_ID_LEN + 8] = "";
	char idpath[PATH_MAX + 32];
	cachedir_path(o->cache, CACHEDIR_STORE_ID, idpath, sizeof(idpath));
	int idn = main_read_small(idpath, recorded, sizeof(recorded));
	if (idn > 0 && recorded[idn - 1] == '\n')
		recorded[idn - 1] = '\0';
	if (idn < 0)
		recorded[0] = '\0';
	char marker_id[MAIN_STORE_ID_LEN + 1];
	memcpy(marker_id, main_mark.id, sizeof(marker_id));
	if (o->meta_url[0] && main_check_shared_store(fs, &facts, have_marker, marker_id) != 0)
		return -1;
	struct main_durable d;
	if (!o->meta_url[0] && (rc = main_count_durable(o, &d)) != 0) {
		char catpath[PATH_MAX + 16];
		cachedir_path(o->cache, CACHEDIR_CATALOG, catpath, sizeof(catpath));
		if (rc == -EIO || rc == -EINVAL) /* review 47 F6: damaged, the documented line */
			main_say_catalog_damaged(o, catpath, rc, d.why);
		else
			fprintf(stderr, "ckptfs: catalog %s: cannot read it: %s%s%s\n", catpath,
				strerror(-rc), d.why[0] ? ": " : "", d.why);
		return -1;
	}
	if (!o->meta_url[0] && (d.count > 0 || d.old_schema)) {
		if (!have_marker)
			return main_refuse_store(o, &d, "no store marker (" MAIN_STORE_MARKER ")");
		if (recorded[0] && strcmp(recorded, main_mark.id) != 0) {
			char why[160];
			snprintf(why, sizeof(why), "store id %s, not %s as recorded in %s",
				 main_mark.id[0] ? main_mark.id : "(none)", recorded, CACHEDIR_STORE_ID);
			return main_refuse_store(o, &d, why);
		}
		if (!d.old_schema && main_check_newest_manifest(fs, &d) != 0)
			return -1;
	}
	/* what the holder writes, once the claim is held */
	if (!main_mark.id[0])
		main_new_id(main_mark.id); /* a new store, or one from before ids */
	unsigned long put_version = have_marker && version >= (unsigned long)needed ? version
									   : (unsigned long)needed;
	/* M3: on -o meta= the id may be the catalog's, which a marker without
	 * one is given */
	main_mark.put_marker = !have_marker || version < (unsigned long)needed ||
			       strcmp(marker_id, main_mark.id) != 0;
	snprintf(main_mark.marker, sizeof(main_mark.marker), "ckptfs store format %lu\nid %s\n",
		 put_version, main_mark.id);
	main_mark.put_cache_id = strcmp(recorded, main_mark.id) != 0;
	if (have_marker && version < (unsigned long)needed) {
		main_mark.was = version;
		main_mark.to = (unsigned long)needed;
	}
	if (wrote_owner) {
		snprintf(buf, sizeof(buf), "%s\n", o->backing);
		rc = main_write_small(path, buf);
		if (rc != 0) {
			fprintf(stderr, "ckptfs: cache %s: cannot write %s: %s\n", o->cache, path,
				strerror(-rc));
			return -1;
		}
	}
	return 0;
}

/* After the claim (claim.h invariant 9, review 40 F5): the store marker is
 * made, upgraded or given its id, and the cache records the store's id (M1). */
static int main_mark_store(struct ckptfs *fs)
{
	const struct ckptfs_options *o = &fs->opt;
	if (main_mark.put_marker) {
		int rc = backing_put(fs->backing, MAIN_STORE_MARKER, main_mark.marker,
				     strlen(main_mark.marker));
		if (rc != 0) {
			fprintf(stderr, "ckptfs: BACKING %s: cannot write %s: %s\n", o->backing,
				MAIN_STORE_MARKER, strerror(-rc));
			return -1;
		}
		if (main_mark.was) /* older objects stay readable as they are */
			log_info("BACKING %s: store format %lu upgraded to %lu (new chunk objects "
				 "may use the %s codecs and carry a CRC-32C; older ones are read as before)",
				 o->backing, main_mark.was, main_mark.to, codec_family_name(o->codec));
		log_info("BACKING %s: store marker written (format and id %s)", o->backing,
			 main_mark.id);
	}
	/* M3: from now on a BACKING without the marker is not the store; a
	 * failure leaves the judgement to the catalog's saves (logged) */
	if (main_mark.shared_marked && cat_store_marked(fs->cat) != 0)
		log_warn("meta=: the shared catalog could not record that BACKING's marker carries "
			 "its store id");
	if (main_mark.put_cache_id) {
		char path[PATH_MAX + 32], text[MAIN_STORE_ID_LEN + 2];
		cachedir_path(o->cache, CACHEDIR_STORE_ID, path, sizeof(path));
		snprintf(text, sizeof(text), "%s\n", main_mark.id);
		int rc = main_write_small(path, text);
		if (rc != 0) {
			fprintf(stderr, "ckptfs: cache %s: cannot write %s: %s\n", o->cache, path,
				strerror(-rc));
			return -1;
		}
	}
	return 0;
}

/* A daemon that has unmounted and is still uploading: how much is left, from
 * its catalog (read-only; a WAL reader never blocks it). */
static void main_lock_refuse_draining(const struct ckptfs_options *o, const char *pid)
{
	char path[PATH_MAX + 16], left[96] = "";
	cachedir_path(o->cache, CACHEDIR_CATALOG, path, sizeof(path));
	struct cat *cat = NULL;
	struct cat_cache_stats cs;
	if (cat_open_readonly(path, &cat) == 0 && cat_cache_stats(cat, &cs) == 0)
		snprintf(left, sizeof(left), ": %" PRIu64 " uploads, %" PRIu64 " bytes (%" PRIu64
			 " MiB) of chunks left", cs.queued, cs.dirty_bytes, cs.dirty_bytes >> 20);
	cat_close(cat);
	fprintf(stderr, "ckptfs: cache %s: in use by another ckptfs (pid %s) that has unmounted and "
			"is still uploading to BACKING%s; wait for it to exit (ckptfs-admin umount "
			"waits and shows progress)\n",
		o->cache, pid, left);
}

/* One daemon per cache: its catalog's recovery would drop another daemon's
 * pending writes and open-but-unlinked files. The flock is held for the
 * daemon's life (it survives fuse_daemonize: the child shares the fd). */
static int main_lock_cache(const struct ckptfs_options *o, int *fd_out)
{
	char path[PATH_MAX + 16], pid[32];
	int fd = cachedir_lock_open(o->cache, O_RDWR | O_CREAT | O_NOFOLLOW, path, sizeof(path));
	if (fd < 0) {
		fprintf(stderr, "ckptfs: cache %s: cannot open %s: %s\n", o->cache, path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		ssize_t n = errno == EWOULDBLOCK ? pread(fd, pid, sizeof(pid) - 1, 0) : -1;
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		bool draining = strstr(pid, " " CACHEDIR_LOCK_DRAINING) != NULL;
		pid[strcspn(pid, " ")] = '\0';
		if (draining && kill((pid_t)strtol(pid, NULL, 10), 0) != 0 && errno == ESRCH)
			draining = false; /* a note left behind: the holder is someone else */
		if (draining)
			main_lock_refuse_draining(o, pid);
		else
			fprintf(stderr, "ckptfs: cache %s: in use by another ckptfs%s%s%s\n", o->cache,
				pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
		close(fd);
		return -1;
	}
	*fd_out = fd;
	return 0;
}

/* Records the serving pid in the lock file (after daemonizing), and once
 * unmounted, that the daemon is draining its uploads (a remount is then told
 * why it must wait). */
static void main_lock_note_pid(int fd, bool draining)
{
	int rc = cachedir_lock_note(fd, (long)getpid(), draining);
	if (rc != 0)
		log_warn("cannot record the pid in the cache lock file: %s", strerror(-rc));
}

/* Fills a new catalog from BACKING's manifests (a fresh node). */
static int main_rebuild(struct ckptfs *fs)
{
	struct rebuild_report rep;
	int rc = rebuild_catalog(fs->backing, fs->cat, 0, NULL, NULL, &rep);
	if (rc == 0)
		log_info("catalog: rebuilt from BACKING %s: %" PRIu64 " generations, %" PRIu64
			 " files, %" PRIu64 " MiB%s; %" PRIu64 " corrupt manifests skipped",
			 fs->opt.backing, rep.generations, rep.files, rep.bytes >> 20,
			 rep.tree_applied ? ", the tree outside generations" : "",
			 rep.manifests_corrupt);
	return rc;
}

/* One catalog per BACKING (fs/lib/claim.h): refused with one line naming the
 * holder when another catalog's daemon holds it. */
static int main_claim(struct ckptfs *fs)
{
	char id[CLAIM_ID_LEN + 1], msg[PATH_MAX + 512];
	int rc = cat_catalog_id(fs->cat, id, sizeof(id));
	if (rc != 0) {
		fprintf(stderr, "ckptfs: catalog %s/" CACHEDIR_CATALOG ": no catalog id: %s\n", fs->opt.cache,
			strerror(-rc));
		return rc;
	}
	bool claimed = false;
	struct claim_ledger led; /* claim.h invariant 12 */
	rc = cat_claimed(fs->cat, &claimed);
	if (rc == 0)
		rc = cat_claim_ledger(fs->cat, &led);
	if (rc == 0)
		rc = claim_acquire_led(fs->backing, id, cat_is_shared(fs->cat), !claimed, &led,
				       fs->opt.cache, fs->opt.claim_timeout_s, &fs->claim, msg,
				       sizeof(msg));
	else
		snprintf(msg, sizeof(msg), "catalog %s/" CACHEDIR_CATALOG ": cannot read it: %s",
			 fs->opt.cache, strerror(-rc));
	if (rc == 0 && !claimed && (rc = cat_claimed_set(fs->cat)) != 0)
		snprintf(msg, sizeof(msg), "catalog %s/" CACHEDIR_CATALOG ": cannot record the claim: %s",
			 fs->opt.cache, strerror(-rc));
	if (rc != 0) {
		fprintf(stderr, "ckptfs: %s\n", msg);
		claim_abandon(fs->claim); /* taken, not recorded: given back (review 56 L11) */
		fs->claim = NULL;
	}
	return rc;
}

/* M4: the catalog that existed before this mount has handed out every
 * generation id BACKING has a manifest of. 0, or -1 refused (one line). */
static int main_check_not_behind(struct ckptfs *fs, const char *path)
{
	uint64_t last = 0, newest = 0;
	uint32_t version = 0;
	int rc = cat_gen_id_last(fs->cat, &last);
	if (rc != 0) {
		fprintf(stderr, "ckptfs: catalog %s: cannot read its generation ids: %s\n", path,
			strerror(-rc));
		return -1;
	}
	rc = rebuild_backing_newest_gen(fs->backing, &newest, &version);
	if (rc != 0) {
		fprintf(stderr, "ckptfs: BACKING %s: cannot list its generation manifests: %s\n",
			fs->opt.backing, strerror(-rc));
		return -1;
	}
	if (newest <= last)
		return 0;
	char man[128];
	manifest_gen_path(newest, version, man, sizeof(man));
	fprintf(stderr, "ckptfs: catalog %s is behind BACKING %s: BACKING holds %s, a save this"
			" catalog never made (its generation ids end at %" PRIu64 "): its catalog.db-wal"
			" lost, or an older copy put back? Its next saves would replace saves on BACKING."
			" Nothing was written; rebuild it from BACKING with `ckptfs-admin rebuild --cache"
			" %s %s` (the old catalog is kept aside; docs/ADMIN.md)\n",
		path, fs->opt.backing, man, last, fs->opt.cache, fs->opt.backing);
	return -1;
}

/* Opens the catalog. On a fresh node (a new cache) over a BACKING that holds
 * data, the catalog is rebuilt from BACKING's manifests; a cache that was
 * used before but has lost or damaged its catalog (cat_open's quick_check)
 * is refused with the command that rebuilds it, rather than mounted as an
 * empty tree. BACKING is claimed for the catalog before a rebuild reads it. */
static int main_open_catalog(struct ckptfs *fs, bool cache_was_used)
{
	char path[PATH_MAX + 16];
	cachedir_path(fs->opt.cache, CACHEDIR_CATALOG, path, sizeof(path));
	struct stat sb;
	bool existed = stat(path, &sb) == 0 && sb.st_size > 0;
	bool backing_has = false;
	if (!existed && rebuild_backing_has_data(fs->backing, &backing_has) != 0) {
		fprintf(stderr, "ckptfs: BACKING %s: cannot list its manifests\n", fs->opt.backing);
		return -1;
	}
	if (!existed && backing_has && cache_was_used) {
		fprintf(stderr, "ckptfs: catalog %s is missing but BACKING %s holds checkpoints:"
				" rebuild it with `ckptfs-admin rebuild --cache %s %s`\n",
			path, fs->opt.backing, fs->opt.cache, fs->opt.backing);
		return -1;
	}
	int rc = main_cat_open_alone(fs, path);
	if (rc == -EPROTO)
		fprintf(stderr, "ckptfs: catalog %s: written by a newer ckptfs; upgrade ckptfs\n", path);
	else if (rc == -EINVAL || rc == -EIO)
		main_say_catalog_damaged(&fs->opt, path, rc, NULL);
	else if (rc != 0 && rc != -EMEDIUMTYPE) /* the catalog's role: it logged the line */
		fprintf(stderr, "ckptfs: catalog %s: cannot open: %s\n", path, strerror(-rc));
	if (rc == 0 && main_claim(fs) != 0) {
		rc = -EBUSY;
		cat_close(fs->cat);
		fs->cat = NULL;
		if (!existed) /* a fresh cache stays fresh: the next try rebuilds */
			unlink(path);
		if (!cache_was_used) {
			cachedir_path(fs->opt.cache, CACHEDIR_BACKING, path, sizeof(path));
			unlink(path);
		}
	}
	/* M4, once the claim judged BACKING (its refusals name the other
	 * catalog or the copy more precisely); refused, the claim is given back
	 * as it was found */
	if (rc == 0 && existed && main_check_not_behind(fs, path) != 0) {
		rc = -ESTALE;
		claim_abandon(fs->claim);
		fs->claim = NULL;
		cat_close(fs->cat);
		fs->cat = NULL;
	}
	if (rc != 0 || existed || !backing_has)
		return rc;
	/* a fresh node: what BACKING holds becomes this catalog */
	int rrc = main_rebuild(fs);
	if (rrc != 0) {
		fprintf(stderr, "ckptfs: catalog %s: rebuilding from BACKING %s failed: %s\n", path,
			fs->opt.backing, strerror(-rrc));
		cat_close(fs->cat);
		fs->cat = NULL;
		unlink(path);
		return rrc;
	}
	log_info("catalog %s: a new cache over BACKING %s: rebuilt from its manifests", path,
		 fs->opt.backing);
	return 0;
}

/* How many chunks of the cache are not on BACKING yet (cached, not
 * uploaded), by a read-only look at catalog.db; -errno if it cannot say. */
static int main_dirty_chunks(const struct ckptfs_options *o, uint64_t *n)
{
	char path[PATH_MAX + 16];
	struct stat sb;
	*n = 0;
	cachedir_path(o->cache, CACHEDIR_CATALOG, path, sizeof(path));
	if (stat(path, &sb) != 0 || sb.st_size == 0)
		return 0; /* no catalog: nothing it knows of waits for upload */
	struct cat *cat = NULL;
	struct cat_cache_stats st;
	int rc = cat_open_readonly(path, &cat);
	if (rc == 0)
		rc = cat_cache_stats(cat, &st);
	cat_close(cat);
	if (rc == 0)
		*n = st.dirty_chunks;
	return rc;
}

/* Review 47 F6: small.db (store.c S7: the cache's copies of chunks whose
 * object is at most STORE_SMALL_MAX bytes, as rows) cannot be read: one line
 * naming it, the reason and what moving it aside costs, which the catalog
 * knows: a chunk not on BACKING yet may have its only copy there. Nothing is
 * moved or deleted here; `rebuild` does not touch small.db. */
static void main_say_small_damaged(const struct ckptfs_options *o, int rc)
{
	uint64_t dirty = 0;
	int drc = main_dirty_chunks(o, &dirty);
	char cost[320];
	if (drc != 0)
		snprintf(cost, sizeof(cost), "whether a chunk not on BACKING yet has its only copy in"
			 " it is unknown (its catalog cannot be read: %s): keep the moved file",
			 strerror(-drc));
	else if (dirty == 0)
		snprintf(cost, sizeof(cost), "no chunk of this cache waits for upload, so every row"
			 " is on BACKING too and is fetched from there");
	else
		snprintf(cost, sizeof(cost), "%" PRIu64 " chunk%s of this cache %s not on BACKING"
			 " yet: those of at most %d KiB have their only copy in it, and the saves"
			 " naming them are then held as lost (`ckptfs-admin list --all`): keep the"
			 " moved file", dirty, dirty == 1 ? "" : "s", dirty == 1 ? "is" : "are",
			 STORE_SMALL_MAX / 1024);
	fprintf(stderr, "ckptfs: cache %s: small.db is damaged (%s; see the log): nothing was moved or"
			" deleted; to mount, move it aside (`mv %s/small.db %s/small.db.damaged`, and"
			" small.db-wal, small.db-shm with it); %s (`ckptfs-admin rebuild` does not"
			" help: it rebuilds catalog.db only; docs/ADMIN.md)\n",
		o->cache, rc == -EINVAL ? "not an SQLite database" : strerror(-rc), o->cache, o->cache,
		cost);
}

/* The local chunk store (CACHE/chunks) and CACHE/staging. */
static int main_open_store(struct ckptfs *fs)
{
	cachedir_path(fs->opt.cache, CACHEDIR_STAGING, fs->staging_dir, sizeof(fs->staging_dir));
	if (mkdir(fs->staging_dir, 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "ckptfs: cache %s: cannot create staging/: %s\n", fs->opt.cache,
			strerror(errno));
		return -1;
	}
	int rc = store_open(fs->opt.cache, &fs->store);
	if (rc != 0) {
		fprintf(stderr, "ckptfs: cache %s: cannot open the chunk store: %s\n", fs->opt.cache,
			strerror(-rc));
		return -1;
	}
	/* S3: large objects go to the disk without filling the page cache */
	store_set_direct_writes(fs->store, true);
	store_set_local_check(fs->store, fs->opt.verify_sha256 ? STORE_CHECK_SHA : STORE_CHECK_CRC);
	store_set_codec(fs->store, fs->opt.codec);
	/* S7: a small chunk is a row of the cache's small.db, not an inode */
	rc = store_set_small(fs->store, STORE_SMALL_MAX);
	if (rc == -EIO || rc == -EINVAL)
		main_say_small_damaged(&fs->opt, rc);
	else if (rc != 0)
		fprintf(stderr, "ckptfs: cache %s: cannot open small.db: %s\n", fs->opt.cache,
			strerror(-rc));
	return rc == 0 ? 0 : -1;
}

/* Opens the catalog as -o meta= says: alone (cat_open) or as a node of the
 * shared catalog (cat_open_shared); err gets the shared engine's reason.
 * serves: this open is the one the daemon serves with (in the foreground
 * the only one, else the one after fork): its node settles the earlier
 * daemons of the cache (lease.h L10; the open before the fork, released at
 * the fork, leaves that to it). */
static int main_cat_open(struct ckptfs *fs, const char *path, bool serves, char *err,
			 size_t err_size)
{
	if (!fs->opt.meta_url[0])
		return main_cat_open_alone(fs, path);
	const struct cat_shared_cfg cfg = { .url = fs->opt.meta_url,
					    .node_name = fs->opt.node_name,
					    .lease_ms = fs->opt.lease_ms,
					    .timeout_ms = fs->opt.meta_timeout_ms,
					    /* main_lock_cache: this daemon holds CACHE/lock
					     * (lease.h L10) */
					    .cache_locked = serves && fs->lock_fd > 0,
					    .cache_lock_fd = fs->lock_fd,
					    /* S18 of meta/catalog_shared.c: the objects
					     * the local catalog may have forgotten */
					    .cache_store = fs->store };
	return cat_open_shared(path, &cfg, getuid(), getgid(), main_reclaim, fs->store, &fs->cat,
			       err, err_size);
}

/* The local catalog file's path and whether it held anything before. */
static bool main_catalog_existed(const struct ckptfs *fs, char *path, size_t size)
{
	struct stat sb;
	cachedir_path(fs->opt.cache, CACHEDIR_CATALOG, path, size);
	return stat(path, &sb) == 0 && sb.st_size > 0;
}

/* A fresh cache stays fresh after a refused shared mount: its catalog file
 * and SQLite's side files go. */
static void main_unlink_fresh_catalog(const char *path)
{
	static const char *const side[] = { "", "-wal", "-shm", "-journal" };
	for (size_t i = 0; i < sizeof(side) / sizeof(side[0]); i++) {
		char p[PATH_MAX + 32];
		snprintf(p, sizeof(p), "%s%s", path, side[i]);
		unlink(p);
	}
}

/* -o meta=: this node's local catalog holds only its cache and its writers
 * (docs/MULTINODE.md), the namespace is PostgreSQL's, so a fresh node needs
 * no rebuild: it sees everything at once. A URL that does not answer is one
 * line naming it (pg.c), and the cache is left as it was. */
static int main_open_shared(struct ckptfs *fs)
{
	char path[PATH_MAX + 16], err[1024] = "";
	bool existed = main_catalog_existed(fs, path, sizeof(path));
	fs->catalog_fresh = !existed;
	int rc = main_cat_open(fs, path, fs->opt.foreground, err, sizeof(err));
	if (rc == 0)
		return 0; /* the engine logs the node's id and lease */
	if (err[0])
		fprintf(stderr, "ckptfs: %s\n", err);
	else if (rc != -EMEDIUMTYPE) /* the catalog's role: it logged the one line */
		fprintf(stderr, "ckptfs: meta=: cannot open the shared catalog (local catalog %s): %s\n",
			path, strerror(-rc));
	if (!existed)
		main_unlink_fresh_catalog(path);
	return rc;
}

/* A refused shared mount: the node leaves the shared catalog (its lease
 * released), and a local catalog file this mount made goes. */
static void main_leave_shared(struct ckptfs *fs)
{
	char path[PATH_MAX + 16];
	cat_close(fs->cat);
	fs->cat = NULL;
	cachedir_path(fs->opt.cache, CACHEDIR_CATALOG, path, sizeof(path));
	if (fs->catalog_fresh)
		main_unlink_fresh_catalog(path);
}

/* BACKING for the shared catalog (claim.h invariant 6): refused, with one
 * line, when a lone catalog holds it, and the node leaves the shared
 * catalog again. */
static int main_claim_shared(struct ckptfs *fs, bool cache_was_used)
{
	char path[PATH_MAX + 16];
	if (main_claim(fs) == 0)
		return 0;
	main_leave_shared(fs);
	if (!cache_was_used) {
		cachedir_path(fs->opt.cache, CACHEDIR_BACKING, path, sizeof(path));
		unlink(path);
	}
	return -EBUSY;
}

/* Held BACKING directories, each upload thread's unsynced puts (backing.c
 * invariants 9-10) and the FUSE and cache descriptors can pass the usual soft
 * limit of 1024 with 8 upload threads: the soft limit is raised to the hard
 * one, which needs no privilege. A failure leaves the old limit (logged). */
static void main_raise_nofile(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	rlim_t was = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		log_warn("open files: soft limit %llu kept, raising it failed: %s",
			 (unsigned long long)was, strerror(errno));
}

static int main_open_state(struct ckptfs *fs, bool log_elsewhere)
{
	main_raise_nofile();
	if (main_lock_cache(&fs->opt, &fs->lock_fd) != 0)
		return -1;
	main_lock_note_pid(fs->lock_fd, false);
	/* the health check: one line on the terminal says what failed, so the
	 * backing's own log lines go only to a log file */
	if (!log_elsewhere)
		log_setup(stderr, LOG_LVL_OFF);
	int rc = backing_open(fs->opt.backing, fs->opt.backing_timeout_ms, &fs->backing);
	char msg[PATH_MAX + 256];
	int probe = rc == 0 ? backing_probe(fs->backing, msg, sizeof(msg)) : 0;
	if (!log_elsewhere)
		log_setup(stderr, fs->opt.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	if (rc != 0) {
		fprintf(stderr, "ckptfs: BACKING %s: cannot open: %s\n", fs->opt.backing,
			strerror(-rc));
		return -1;
	}
	if (probe != 0) {
		fprintf(stderr, "ckptfs: %s\n", msg);
		return -1;
	}
	char owner[PATH_MAX + 32];
	cachedir_path(fs->opt.cache, CACHEDIR_BACKING, owner, sizeof(owner));
	bool cache_was_used = access(owner, F_OK) == 0;
	/* -o meta=: the shared catalog first, so that a database that does not
	 * answer leaves BACKING as it was (main_open_shared) */
	bool shared = fs->opt.meta_url[0] != '\0';
	if (shared && (main_open_store(fs) != 0 || main_open_shared(fs) != 0))
		return -1;
	if (main_check_bindings(fs) != 0) {
		if (shared) /* M3: the node leaves the shared catalog, a fresh cache stays fresh */
			main_leave_shared(fs);
		return -1;
	}
	if (!shared && main_open_store(fs) != 0)
		return -1;
	if ((shared ? main_claim_shared(fs, cache_was_used)
		    : main_open_catalog(fs, cache_was_used)) != 0)
		return -1;
	if (main_mark_store(fs) != 0)
		return -1;
	if (gen_pattern_check(&fs->opt.gen) != 0) /* gen and nodes: main_start_ns */
		return -1;
	if (recent_new(0, &fs->recent) != 0) {
		fprintf(stderr, "ckptfs: out of memory\n");
		return -1;
	}
	trust_log_changes(); /* after the checks: a refusal stays one line */
	return 0;
}

/* Putting chunks (chunkput.h), once the cache, the reader, the uploader and
 * the store queue run. */
static int main_chunkput_new(struct ckptfs *fs)
{
	struct chunkput_config cfg = { .chunking = fs->chunking, .staging_dir = fs->staging_dir,
				       .writebuf = fs->opt.writebuf };
	struct chunkput_cache cache = { fs->cache, cache_dirty_wait, cache_dirty_add,
					cache_disk_wait, cache_make_room };
	struct chunkput_kick kick = { fs->uploader, uploader_kick };
	struct chunkput_reader reader = { fs->reader, reader_read, reader_copy_extent };
	return chunkput_new(&cfg, fs->cat, fs->store, fs->storeq, fs->recent, &cache, &kick,
			    &reader, &fs->chunkput);
}

static void main_close_state(struct ckptfs *fs)
{
	/* what follows asks the catalog many times: in an outage of the shared
	 * catalog it waits out meta_timeout_ms once, not once per call (pg.h P8) */
	cat_stopping(fs->cat);
	/* the session loop has returned: the handles the kernel never released
	 * go first; what they held is ended below, as at any unmount */
	ns_free(fs->ns);
	fs->ns = NULL;
	/* storeq.h Q2: chunks still being stored behind land next (their jobs
	 * use the catalog, the cache, the uploader and recent) */
	if (fs->chunkput)
		chunkput_stop_queue(fs->chunkput); /* stops fs->storeq */
	else
		storeq_stop(fs->storeq);
	fs->storeq = NULL;
	/* generations first: ending one releases inodes through the node table */
	if (fs->gen && fs->cat && fs->nodes)
		gen_policy_shutdown(fs->gen);
	if (fs->nodes) { /* inodes waiting for release: their chunks' removal is queued now */
		node_session_end(fs->nodes); /* node.h 6: no FORGET comes after the loop */
		node_table_stop(fs->nodes);
	}
	/* the unmount commits above queued manifests: upload them (or leave them
	 * queued); before the policy goes, since durable generations call keep */
	if (fs->uploader)
		uploader_stop(fs->uploader, !fs->opt.leave_queued);
	fs->uploader = NULL;
	gen_policy_free(fs->gen);
	fs->gen = NULL;
	reclaimer_stop(fs->reclaimer); /* removes from BACKING: before the claim ends */
	fs->reclaimer = NULL;
	backing_close(fs->reclaim_backing);
	fs->reclaim_backing = NULL;
	claim_end(fs->claim, true); /* nothing of ours writes BACKING any more */
	fs->claim = NULL;
	leasekeep_stop(fs->lease); /* live until the uploads above have been recorded */
	fs->lease = NULL;
	reader_free(fs->reader); /* its readahead threads read through the cache */
	fs->reader = NULL;
	chunkput_detach(fs->chunkput); /* the writers committed below: no cache, no uploader */
	cache_stop(fs->cache);
	fs->cache = NULL;
	node_table_free(fs->nodes);
	chunkput_free(fs->chunkput); /* after the last writer */
	fs->chunkput = NULL;
	recent_free(fs->recent);
	fs->recent = NULL;
	cat_close(fs->cat);
	store_close(fs->store);
	backing_close(fs->backing);
	if (fs->lock_fd > 0) {
		/* no pid, no "draining": whoever holds the lock next says who it is */
		if (ftruncate(fs->lock_fd, 0) != 0)
			log_warn("cannot clear the cache lock file: %s", strerror(errno));
		close(fs->lock_fd);
	}
}

/* Unmounted: the uploads drain next (main_close_state); a remount is told
 * why it must wait, and stop signals wait for the drain (sigs.h). */
static void main_drain_begin(struct ckptfs *fs)
{
	sigs_drain_begin();
	if (fs->lock_fd > 0 && !fs->opt.leave_queued)
		main_lock_note_pid(fs->lock_fd, true);
}

/* Without -o cache_size the cache's bound is what its disk holds: resolved
 * here, once, by cache.c's own rule (90% of the free space plus what is
 * already cached), so that the bound in force is one number the cache uses,
 * its log line gives and ckptfs-admin stats shows. */
static void main_resolve_cache_bound(struct ckptfs *fs)
{
	struct statvfs sv;
	struct cat_cache_stats cs;
	if (fs->opt.cache_size || statvfs(fs->opt.cache, &sv) != 0 ||
	    cat_cache_stats(fs->cat, &cs) != 0)
		return; /* given, or left to cache.c */
	fs->opt.cache_size = ((uint64_t)sv.f_bavail * sv.f_frsize + cs.cached_bytes) / 100 * 90;
}

/* The cache's stopping hook: true once the daemon was told to stop
 * (SIGTERM/SIGINT/SIGHUP, unmount), so that waits only BACKING could end
 * give up: libfuse joins its workers before anything else stops. */
static bool main_stopping(void *arg)
{
	struct ckptfs *fs = arg;
	pthread_mutex_lock(&fs->se_lock);
	bool stopping = fs->stopped || (fs->se && fuse_session_exited(fs->se));
	pthread_mutex_unlock(&fs->se_lock);
	return stopping;
}

/* The cache's opened hook: inodes with a handle open (node.h). */
static size_t main_opened(void *arg, uint64_t *inos, size_t max)
{
	return node_opened(arg, inos, max);
}

/* The uploader's on_durable: the generation policy runs keep-latest-k. */
static void main_on_durable(void *arg, uint64_t gen_id)
{
	gen_durable(arg, gen_id);
}

/* The cache and the uploader, each with the handles and option values it
 * uses and callbacks for what it asks of the layers above. */
static int main_start_services(struct ckptfs *fs)
{
	struct cache_config cc = {
		.cache_size = fs->opt.cache_size,
		.dirty_max = fs->opt.dirty_max,
		.backing_timeout_ms = fs->opt.backing_timeout_ms,
		.chunk_max = fs->chunking.max_size,
	};
	snprintf(cc.dir, sizeof(cc.dir), "%s", fs->opt.cache);
	struct cache_hooks hooks = {
		.stopping = main_stopping, .stopping_arg = fs,
		.opened = main_opened, .opened_arg = fs->nodes,
	};
	int rc = cache_start(&cc, fs->cat, fs->store, fs->backing, &hooks, &fs->cache);
	if (rc != 0)
		return rc;
	struct uploader_config uc = {
		.threads = fs->opt.upload_threads,
		.deadline_s = fs->opt.upload_deadline_s,
		.copy_uploads = fs->opt.copy_uploads,
		.packs = fs->opt.packs,
		.chunk_max = fs->chunking.max_size,
		.claim = fs->claim, /* fenced: nothing more on BACKING (claim.h 9) */
	};
	snprintf(uc.cache_dir, sizeof(uc.cache_dir), "%s", fs->opt.cache);
	return uploader_start(&uc, fs->cat, fs->store, fs->backing, fs->cache, main_on_durable,
			      fs->gen, &fs->uploader);
}

/* FUSE's own arguments: ours first, then what the user passed through (a
 * user's fsname= wins). The mount's source (fsname) is "ckptfs:CACHE": the
 * mount table says which cache a mount serves, where root can read it
 * without asking the daemon (a FUSE mount without allow_other answers root
 * nothing): `ckptfs-admin umount --cache` unmounts only a mount that names
 * its cache (tools/admin_umount.c 3). A cache path libfuse's option syntax
 * would split or unescape (',' '\\') gives plain "ckptfs". */
static int main_fuse_args(const struct options_result *r, struct fuse_args *args)
{
	char opts[sizeof(r->fuse_opts) + PATH_MAX + 128];
	const char *cache = r->opt.cache;
	bool plain = strpbrk(cache, ",\\") != NULL;
	snprintf(opts, sizeof(opts), "default_permissions,fsname=ckptfs%s%s,subtype=ckptfs%s%s",
		 plain ? "" : ":", plain ? "" : cache, r->fuse_opts[0] ? "," : "", r->fuse_opts);
	if (fuse_opt_add_arg(args, "ckptfs") != 0 || fuse_opt_add_arg(args, "-o") != 0 ||
	    fuse_opt_add_arg(args, opts) != 0)
		return -1;
	if (r->opt.debug && fuse_opt_add_arg(args, "-d") != 0)
		return -1;
	return 0;
}

/* The log file's path; "" when the log is stderr or syslog. */
static char main_log_path[PATH_MAX + 16];

/* 1: the log goes to a file or syslog; 0: to the terminal; -1: failed (said). */
static int main_log_start(const struct ckptfs *fs)
{
	enum log_level lvl = fs->opt.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO;
	if (fs->opt.use_syslog) {
		log_setup_syslog("ckptfs", lvl);
		return 1;
	}
	if (fs->opt.foreground && !fs->opt.log_path[0])
		return 0;
	if (fs->opt.log_path[0])
		snprintf(main_log_path, sizeof(main_log_path), "%s", fs->opt.log_path);
	else
		cachedir_path(fs->opt.cache, CACHEDIR_LOG, main_log_path, sizeof(main_log_path));
	FILE *f = log_open_file(main_log_path);
	if (!f) {
		fprintf(stderr, "ckptfs: log %s: cannot open: %s\n", main_log_path,
			errno == ELOOP ? "it is a symbolic link (ckptfs never writes its log through "
					 "one: give the file itself)"
				       : strerror(errno));
		return -1;
	}
	log_setup(f, lvl);
	return 1;
}

/* Proof reads of the generation policy: committed bytes, no readahead. The
 * policy is made before the reader (arg is the daemon), and reads only once
 * gen_policy_ready has run, when the reader is there. */
static int main_probe_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	struct reader *r = ((struct ckptfs *)arg)->reader;
	return r ? reader_read(r, ino, READER_PROBE, off, len, buf) : -EAGAIN;
}

/* The node table and the generation policy, on the catalog as it is after
 * daemonizing (they keep its handle). */
static int main_start_gen(struct ckptfs *fs)
{
	struct gen_deps gd = { .cat = fs->cat, .read = main_probe_read, .read_arg = fs,
			       .store = fs->store };
	int rc = node_table_new(fs->cat, &fs->nodes);
	gd.nodes = fs->nodes;
	if (rc == 0)
		rc = gen_policy_new(&gd, &fs->opt.gen, &fs->gen);
	return rc;
}

/* The namespace's reads (ns.h, struct ns_reader) and fsync's wait. */
static int main_ns_map(void *arg, uint64_t ino, uint64_t off, size_t len, struct reader_map *m)
{
	return reader_map(arg, ino, READER_COMMITTED, off, len, m);
}

static void main_ns_unmap(void *arg, struct reader_map *m)
{
	reader_unmap(arg, m);
}

static int main_ns_read(void *arg, uint64_t ino, uint64_t off, size_t len, void *buf)
{
	return reader_read(arg, ino, READER_COMMITTED, off, len, buf);
}

static int main_ns_wait_backing(void *arg, uint64_t ino, unsigned timeout_ms)
{
	return uploader_wait_file(arg, ino, timeout_ms);
}

static int main_ns_wait_pending(void *arg, uint64_t ino, unsigned timeout_ms)
{
	return uploader_wait_pending(arg, ino, timeout_ms);
}

/* The namespace, once every service it calls is up. */
static int main_start_ns(struct ckptfs *fs)
{
	struct ns_deps d = { .cat = fs->cat, .nodes = fs->nodes, .gen = fs->gen, .store = fs->store,
			     .reader = { main_ns_map, main_ns_unmap, main_ns_read, fs->reader },
			     .chunkput = fs->chunkput,
			     .wait_backing = main_ns_wait_backing,
			     .wait_pending = main_ns_wait_pending, .wait_arg = fs->uploader };
	struct ns_config cfg = { .sync_backing = fs->opt.sync_backing,
				 .backing_timeout_ms = fs->opt.backing_timeout_ms };
	return ns_new(&d, &cfg, &fs->ns);
}

/* The reclaimer's removals on an nfs:// BACKING go through a handle of their
 * own whose RPCs time out within a quarter of the lease (at least libnfs's
 * 1 s), not backing_timeout (60 s by default): a removal is checked against
 * the duty's local deadline before it is sent (catalog_shared_reclaim.c R10,
 * lease.h L8), and one stalled in the network past the takeover margin (two
 * lease terms after the holder's lease ran out, pgns.c) could delete the copy
 * a writer put again after another node finished the reclaim (review 33 F2).
 * Bounded like this, a removal sent before the deadline is answered or
 * abandoned (its connection dropped: backing_nfs.c) within a few such
 * timeouts, inside that margin. A directory BACKING removes by a local
 * syscall: the daemon's own handle serves. */
static int main_reclaim_backing(struct ckptfs *fs)
{
	if (!backing_is_nfs(fs->backing))
		return 0;
	unsigned ms = fs->opt.lease_ms / 4 / 1000 * 1000; /* libnfs counts whole seconds */
	if (ms < 1000)
		ms = 1000;
	if (fs->opt.backing_timeout_ms && ms > fs->opt.backing_timeout_ms)
		ms = fs->opt.backing_timeout_ms;
	int rc = backing_open(fs->opt.backing, ms, &fs->reclaim_backing);
	if (rc != 0)
		log_error("BACKING %s: cannot open the reclaimer's connection: %s", fs->opt.backing,
			  strerror(-rc));
	else
		log_info("reclaim: removals from BACKING on a connection of their own, %u ms per"
			 " call at most (the lease is %u ms)", ms, fs->opt.lease_ms);
	return rc;
}

int main(int argc, char **argv)
{
	umask(077); /* trust.h: nothing the daemon makes is for other users */
	struct options_result r;
	int rc = options_parse(argc, argv, &r);
	if (rc != 0)
		return rc > 0 ? 0 : 1;

	struct ckptfs fs;
	memset(&fs, 0, sizeof(fs));
	pthread_mutex_init(&fs.se_lock, NULL);
	fuseinit_init(&main_fuseinit);
	fs.fuse_init = &main_fuseinit;
	fs.opt = r.opt;
	fs.chunking = chunker_default_params;
	log_setup(stderr, fs.opt.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	sigs_block_hup(); /* before any thread: every thread inherits it */

	int log_elsewhere = main_log_start(&fs);
	if (log_elsewhere < 0)
		return 1;
	if (main_open_state(&fs, log_elsewhere) != 0) {
		main_close_state(&fs);
		return 1;
	}

	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	int mounted = 0, exit_code = 1;
	struct control *ctl = NULL;
	struct metrics *metrics = NULL;
	if (main_fuse_args(&r, &args) != 0)
		goto out;
	struct ops_context octx = { .fuse_init = fs.fuse_init, .read_cache = fs.opt.read_cache,
				    .cache = fs.opt.cache, .backing = fs.opt.backing };
	se = fuse_session_new(&args, &ckptfs_ops, sizeof(ckptfs_ops), &octx);
	if (!se) {
		fprintf(stderr, "ckptfs: FUSE rejected the options '%s'\n", r.fuse_opts);
		goto out;
	}
	pthread_mutex_lock(&fs.se_lock);
	fs.se = se;
	pthread_mutex_unlock(&fs.se_lock);
	if (fuse_set_signal_handlers(se) != 0)
		goto out;
	if (fuse_session_mount(se, fs.opt.mountpoint) != 0) {
		fprintf(stderr, "ckptfs: mountpoint %s: mount failed (see the line above)\n",
			fs.opt.mountpoint);
		goto out;
	}
	mounted = 1;
	main_fuse_io(se);
	ops_tune_readahead(fs.opt.mountpoint);

	if (!fs.opt.foreground) {
		/* SQLite's POSIX locks do not survive fork: reopen in the child */
		cat_close(fs.cat);
		fs.cat = NULL;
		fuse_daemonize(0);
		main_lock_note_pid(fs.lock_fd, false);
		char path[PATH_MAX + 16], err[1024] = "";
		cachedir_path(fs.opt.cache, CACHEDIR_CATALOG, path, sizeof(path));
		if (main_cat_open(&fs, path, true, err, sizeof(err)) != 0) {
			log_error("catalog %s: cannot reopen after daemonizing%s%s", path,
				  err[0] ? ": " : "", err);
			goto out;
		}
	}
	log_info("serving %s: BACKING %s, cache %s", fs.opt.mountpoint, fs.opt.backing, fs.opt.cache);
	if (claim_start(fs.claim) != 0) /* after fork: the daemon's pid, renewed */
		goto out;
	octx.claim = fs.claim; /* changes get EROFS once fenced (claim.h 9) */
	if (cat_is_shared(fs.cat) && leasekeep_start(fs.cat, fs.opt.lease_ms, fs.backing,
						    fs.chunking.max_size, &fs.lease) != 0)
		goto out;
	octx.lease = fs.lease;
	if (cat_is_shared(fs.cat) && main_reclaim_backing(&fs) != 0)
		goto out;
	/* a turn every third of the lease, as its renewal: the duty moves on
	 * within a lease of its holder's end */
	if (cat_is_shared(fs.cat) &&
	    reclaimer_start(fs.cat, fs.reclaim_backing ? fs.reclaim_backing : fs.backing, fs.claim,
			    fs.opt.lease_ms / 3, &fs.reclaimer) != 0)
		goto out;

	if (main_start_gen(&fs) != 0) {
		log_error("cannot create the generation policy and the inode table");
		goto out;
	}
	if (gen_policy_start(fs.gen) != 0 || node_table_start(fs.nodes) != 0) {
		/* after fork: threads do not survive it */
		log_error("cannot start the generation and inode release threads");
		goto out;
	}
	main_resolve_cache_bound(&fs);
	if (main_start_services(&fs) != 0) {
		log_error("cannot start the cache and upload threads");
		goto out;
	}
	/* the reader loads through the cache, from the catalog as reopened after fork */
	const struct reader_config reader_cfg = { .budget_bytes = fs.opt.chunk_cache_bytes,
						  .prefetch = fs.opt.prefetch,
						  .load = cache_load, .fetch_ahead = cache_prefetch };
	if (reader_new(&reader_cfg, fs.cat, fs.cache, &fs.reader) != 0) {
		log_error("cannot allocate the reader");
		goto out;
	}
	if (storeq_start(MAIN_STORE_THREADS, MAIN_STORE_DEPTH, &fs.storeq) != 0 ||
	    main_chunkput_new(&fs) != 0) {
		log_error("cannot start the store threads");
		goto out;
	}
	int nsrc = main_start_ns(&fs);
	if (nsrc != 0) {
		log_error("cannot create the namespace: %s", strerror(-nsrc));
		goto out;
	}
	octx.ns = fs.ns;
	gen_policy_ready(fs.gen);
	sigs_hup_start(main_log_path, fs.opt.use_syslog);
	const struct control_deps ctl_deps = {
		.cat = fs.cat, .backing = fs.backing, .reader = fs.reader, .recent = fs.recent,
		.gen = fs.gen, .nodes = fs.nodes, .cache = fs.cache, .uploader = fs.uploader,
		.claim = fs.claim, .wbuf = chunkput_env(fs.chunkput)->wbuf,
		.gen_commit = gen_commit_explicit, .gen_pin = gen_pin, .gen_remove = gen_remove,
		.nodes_flush = node_release_flush, .cache_stats = cache_get_stats,
		.uploader_stats = uploader_get_stats,
		.cache_dir = fs.opt.cache, .mountpoint = fs.opt.mountpoint,
		.backing_spec = fs.opt.backing,
		.gen_pattern = fs.opt.gen.pattern[0] ? fs.opt.gen.pattern : GEN_DEFAULT_PATTERN,
		.cache_size = fs.opt.cache_size, .dirty_max = fs.opt.dirty_max,
	};
	control_start(&ctl_deps, &ctl); /* ckptfs-admin's channel; the mount works without it */
	const struct metrics_deps metrics_deps = { fs.opt.metrics_addr, fs.opt.cache,
						   fs.opt.mountpoint, ctl };
	metrics_start(&metrics_deps, &metrics); /* -o metrics=ADDR:PORT; likewise */

	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(cfg, 16);
	rc = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	/* libfuse returns the signal number after SIGINT/SIGTERM/SIGHUP: a clean stop */
	bool clean = rc == 0 || rc == SIGINT || rc == SIGTERM || rc == SIGHUP;
	exit_code = clean ? 0 : 1;
	log_info("unmounting %s (%s)", fs.opt.mountpoint, clean ? "clean" : "loop error");

out:
	metrics_stop(metrics);
	control_stop(ctl);
	pthread_mutex_lock(&fs.se_lock); /* no main_stopping() is inside se after this */
	fs.stopped = true;
	fs.se = NULL;
	pthread_mutex_unlock(&fs.se_lock);
	if (se) {
		if (mounted)
			fuse_session_unmount(se);
		fuse_remove_signal_handlers(se);
		fuse_session_destroy(se);
	}
	if (mounted)
		main_drain_begin(&fs);
	fuse_opt_free_args(&args);
	main_close_state(&fs);
	log_close();
	return exit_code;
}
