/* store — content-addressed chunk objects; see store.h for the layout, the
 * object format and the invariants.
 *
 * Durability follows the rdbSave pattern: write to tmp/, (fsync), rename into
 * chunks/ab/cd/, (fsync the directory). Without STORE_SYNC the writeback of the
 * object is started at once so that a later store_sync is cheap and dirty
 * memory stays bounded.
 *
 * Shard directories (chunks/ab/cd) are made on first use, without an fsync:
 * on a fresh store nearly every small chunk opens a new shard, and two
 * directory fsyncs per chunk were most of a small file's cost. Invariant S1:
 * a shard made by this process whose entries (chunks/ab in chunks, cd in
 * chunks/ab) are not yet known durable has its bit set in shard_fresh; every
 * sync point (store_sync of an object in it, STORE_SYNC, store_syncfs) makes
 * those entries durable before it reports success, and only then clears the
 * bit.
 *
 * Invariant S2 (fresh objects): the fresh set holds only hashes of objects
 * this process wrote with store_put, from bytes its caller had just hashed,
 * and that no check has since found damaged. store_read_upload reports an
 * object as already hashed only if its hash is in the set and every byte read
 * came from the page cache (preadv2 RWF_NOWAIT): those are the bytes written,
 * not a copy that went to the disk and back. The uploader then skips a second
 * SHA-256 pass over every byte it uploads (issue 4's measurements: ~1.3 CPU
 * seconds per GiB on these machines). Anything else is verified in full.
 * store_check_unread vouches for an object by the set alone, without reading
 * it: it serves an upload by hard link, where no byte moves and BACKING gets
 * the very file written from the hashed bytes (inode, mtime and size
 * unchanged), whose header is then the header written: it is not read back
 * (with S3 each such read went to the disk). An object the set does not vouch
 * for has its header read and checked, and is then read and verified in full.
 *
 * Invariant S3 (direct writes): with store_set_direct_writes on (the daemon
 * turns it on), an object of STORE_DIRECT_MIN bytes or more is built whole in
 * one of STORE_DIO_BUFS page-aligned buffers and its whole blocks go to the
 * disk with O_DIRECT; only the last partial block passes through the page
 * cache. Filling fresh page-cache pages was half the daemon's CPU time of a
 * large save on these VMs (see docs/BENCH.md), and the save's critical path
 * is what users wait for. The file is the same either way. Readers and the
 * uploader read such objects back with O_DIRECT too (store_read_whole); an
 * upload by copy then verifies them (S2 needs page-cache bytes), at
 * BACKING's pace, off the save's path.
 *
 * Invariant S4 (checksums): every object this version writes (format 2)
 * carries the CRC-32C of its payload, computed from the bytes it writes,
 * which are the bytes its caller hashed (or their encoding; a raw object
 * from an image may carry its caller's CRC of those bytes, S11). An object
 * read back from this store (store_load, store_get, the uploader's copy) is
 * checked by that CRC, a few times faster than SHA-256: a chunk that rotted
 * or was torn on the local disk is never returned (EIO), as the SHA-256 check
 * would ensure. SHA-256 stays the check of every object that comes from
 * BACKING (store_object_check: another node, another disk) and of
 * `ckptfs-admin verify`; -o verify=sha256 makes it the check of local reads
 * too (store_set_local_check). A version-1 object (no CRC) is always checked
 * by SHA-256.
 *
 * Invariant S5 (trust, shared invariant 7): every path under the store's
 * root is opened, renamed, made or removed beneath root_fd without following
 * a symlink (safeopen.h); a planted one is -ELOOP, which readers treat like a
 * damaged object (fetched again from BACKING). Temporaries get unguessable
 * names and O_EXCL. Objects are created 0400 (private, and never changed in
 * place), directories 0700.
 *
 * Invariant S6 (bounded headers): a header read back (from the cache's disk
 * or BACKING) names a known codec, a plain length of at most the chunker's
 * maximum and a payload length of at most codec_bound of it, or it is a
 * corrupt object (store_header_decode): no length from disk sizes a buffer,
 * a read or a sum before it is bounded (DESIGN invariant 7).
 *
 * Invariant S7 (small objects): with store_set_small on, an object whose
 * whole image is at most small_max bytes is a row of ROOT/small.db
 * (storesmall.h) instead of a file: no inode, no shard directory per small
 * chunk. Every read looks for the file first, then for the row, so objects
 * written as files (by an older version, or with it off) are read as before;
 * store_remove removes both. An image read from a row gets the checks a
 * file's gets (invariant 2, S4, S6). The fresh set (S2) never vouches for a
 * row: its upload reads and verifies it, and it has no file to hard-link
 * (store_object_at says -EXDEV).
 *
 * Invariant S8 (shards do not outlive their objects): store_remove of the
 * last object of a shard removes chunks/ab/cd, and chunks/ab once that is
 * empty too. Directories are inodes: on a cache disk short of them, shards
 * left behind by evicted objects would keep every eviction from making room
 * (a 100-inode tmpfs filled with empty shards after ~50 objects). A put
 * whose rename finds no shard makes it and renames again holding the
 * shard's stripe lock (shard_locks), which a prune holds too: no prune runs
 * between that mkdir and that rename, so one retry suffices. (Without the
 * lock a put could lose the race again and again on a loaded machine.) The
 * common put, into a shard that exists, takes no lock: its rename either
 * lands in the shard, which is then not empty, or fails with ENOENT. A
 * removed shard needs no fsync: after a crash it is either gone or there and
 * empty.
 *
 * Invariant S9 (fetched images): an object fetched from BACKING is read into
 * a page-aligned buffer of a pool (store_fetch_image) whose pages earlier
 * fetches faulted in, SHA-256-checked there before a byte of it is written
 * to the cache or handed out (invariant 2), and its cache copy is written
 * from it with O_DIRECT under S3's conditions (store_put_fetched); a raw
 * chunk's plain bytes then stay in it for the reader. Why: faulting in a
 * fresh buffer per chunk and filling page-cache pages with the cache's copy
 * were most of a cold restore's kernel time (docs/BENCH.md). A fetch buffer's
 * image_cap is what of it is in memory: every page a read into it may have
 * touched (store_fetch_filled), so the reader's chunk cache counts its real
 * size (reader invariant 2); reused for a smaller chunk, it gives back what
 * exceeds that chunk by more than STORE_FETCH_SLACK. Memory idle in the pool
 * is at most STORE_FETCH_POOL buffers.
 *
 * Invariant S10 (checked objects, for dedup hits): the checked set holds
 * only hashes of objects this process wrote (store_put, store_put_headroom,
 * store_put_fetched after its SHA-256 check) or found whole with
 * store_verify_hit since it opened the store, and that no check has since
 * found damaged and no store_remove has since removed. store_verify_hit
 * vouches for such an object without reading it; any other is read and
 * checked in full (S4's local check) before a writer drops the bytes it holds
 * for it (writer.h invariant 6). Why: an object a past run wrote may have
 * been torn by a power loss, rotted, or been removed, and a new save of the
 * same bytes must not be deduplicated onto it. The set is direct-mapped
 * (STORE_CHECKED_CAP slots of one hash each): a collision forgets the older
 * hash, which then costs one more read, never a byte; its memory is fixed.
 *
 * Invariant S11 (a CRC given, S4): store_put_headroom writes a raw object
 * with the CRC its caller passes instead of reading the plain bytes again.
 * The caller computed it from those very bytes, which nobody changes until
 * the put returns (chunkput.c: recent's pinned copy, recent.h R6/R7), right
 * after hashing them, while they were in its CPU's cache: the store thread's
 * pass over them came from memory (0.05-0.07 of the daemon's 1.5-2 CPU-s per
 * GiB of unique data in the 2026-11-27 profiles, docs/BENCH.md). A CRC that
 * did not match would make an object every read rejects (S4), never one
 * that returns other bytes. Objects that are compressed, small or written
 * through the page cache get their CRC here as before.
 *
 * Invariant S12 (verdicts, review 36 F2b): an object is called corrupt
 * (logged, forgotten by S10, -EIO, which makes the cache drop its copy and
 * fetch BACKING's) only on what its bytes say. A decode that fails for this
 * machine's reasons (codec.h invariant 4: -ENOMEM) returns that error as it
 * is: the object is kept and not logged, and the read fails without a
 * verdict (store_decode). */
#define _GNU_SOURCE
#include "store.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "chunker.h"
#include "codec.h"
#include "crc32c.h"
#include "log.h"
#include "safeopen.h"
#include "storesmall.h"

#define STORE_SHARDS 65536 /* chunks/ab/cd: the first two bytes of the hash */
#define STORE_FRESH_CAP 16384 /* slots of the fresh set (a power of two) */
#define STORE_CHECKED_CAP 65536 /* S10: slots of the checked set (a power of two) */
/* Objects at least this large start their write-back at once; smaller ones
 * (small files) are left to the kernel's write-back, which batches them: one
 * I/O submission per 4 KiB object cost more than the rest of its write. */
#define STORE_EARLY_WRITEBACK_MIN STORE_DIRECT_MIN /* S3's size (store.h) */
#define STORE_DIO_BUFS 4 /* S3 image buffers: writers beyond this many wait */
#define STORE_OBJECT_MODE 0400 /* S5 */
#define STORE_DIR_MODE 0700
#define STORE_SHARD_TRIES 3 /* S8: one retry suffices; more only if something else removes it */
#define STORE_SHARD_LOCKS 64 /* S8: stripes of the shard locks */
#define STORE_DIRECT_IO 0x100 /* store_write_object's own flag: iov[0] is aligned, S3 */

static size_t store_align_up(size_t n)
{
	return (n + STORE_IO_ALIGN - 1) & ~(size_t)(STORE_IO_ALIGN - 1);
}

/* Per-thread encode/decode buffer, so a busy write path does not mmap and
 * fault a fresh multi-MiB buffer per chunk. Freed when the thread exits, or
 * at store_close for threads still alive then. */
struct store_scratch {
	struct store *st;
	uint8_t *buf;
	size_t cap;
	struct store_scratch *prev, *next;
};

/* A fresh object (S2): its hash, and the inode and mtime its file had when
 * written, so that a later change of the file in place is noticed. */
struct store_fresh {
	uint8_t hash[HASH_LEN];
	uint64_t ino;
	int64_t mtime_ns;
	uint64_t size; /* header + payload, as written */
};

struct store {
	char root[PATH_MAX];
	char host[64];
	int root_fd;
	atomic_ulong tmp_seq;
	_Atomic uint64_t shard_fresh[STORE_SHARDS / 64]; /* S1: one bit per chunks/ab/cd */
	pthread_mutex_t shard_locks[STORE_SHARD_LOCKS];   /* S8: mkdir+rename vs prune */
	pthread_mutex_t fresh_lock;
	struct store_fresh *fresh; /* S2: open addressing; an all-zero hash = an empty slot */
	size_t fresh_n;
	pthread_mutex_t checked_lock;
	uint8_t (*checked)[HASH_LEN]; /* S10: direct-mapped; an all-zero hash = an empty slot */
	pthread_key_t scratch_key;
	pthread_mutex_t scratch_lock;
	struct store_scratch *scratch_list;
	atomic_bool direct_writes; /* S3 */
	struct storesmall *small;  /* S7: ROOT/small.db, when there is one */
	atomic_size_t small_max;   /* S7: 0 = new objects go to files */
	atomic_int codec_family; /* enum codec_family: what new objects are compressed with */
	pthread_mutex_t dio_lock;  /* S3: the image buffers */
	pthread_cond_t dio_free;
	uint8_t *dio_buf[STORE_DIO_BUFS];
	size_t dio_cap[STORE_DIO_BUFS];
	bool dio_busy[STORE_DIO_BUFS];
	_Atomic int local_check; /* S4: enum store_check */
};

static void store_scratch_free(void *p)
{
	struct store_scratch *s = p;
	struct store *st = s->st;
	pthread_mutex_lock(&st->scratch_lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		st->scratch_list = s->next;
	if (s->next)
		s->next->prev = s->prev;
	pthread_mutex_unlock(&st->scratch_lock);
	free(s->buf);
	free(s);
}

static uint8_t *store_scratch(struct store *st, size_t need)
{
	struct store_scratch *s = pthread_getspecific(st->scratch_key);
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s || pthread_setspecific(st->scratch_key, s) != 0) {
			free(s);
			return NULL;
		}
		s->st = st;
		pthread_mutex_lock(&st->scratch_lock);
		s->next = st->scratch_list;
		if (s->next)
			s->next->prev = s;
		st->scratch_list = s;
		pthread_mutex_unlock(&st->scratch_lock);
	}
	if (s->cap < need) {
		uint8_t *nb = realloc(s->buf, need);
		if (!nb)
			return NULL;
		s->buf = nb;
		s->cap = need;
	}
	return s->buf;
}

/* ---- header encoding ---- */

static void put_le16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put_le32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = v >> (8 * i); }
static void put_le64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = v >> (8 * i); }
static uint16_t get_le16(const uint8_t *p) { return p[0] | (uint16_t)p[1] << 8; }
static uint32_t get_le32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
	return v;
}
static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
	return v;
}

/* A format-2 header; the payload follows at STORE_HEADER_LEN (S4: its
 * CRC-32C is crc). */
static void store_header_encode(uint8_t h[STORE_HEADER_LEN], const uint8_t hash[HASH_LEN],
				uint8_t codec, uint64_t plain_len, uint64_t stored_len, uint32_t crc)
{
	memset(h, 0, STORE_HEADER_LEN);
	memcpy(h, STORE_MAGIC, 8);
	put_le16(h + 8, STORE_FORMAT_VERSION);
	h[10] = codec;
	put_le32(h + 12, STORE_HEADER_LEN);
	put_le64(h + 16, plain_len);
	put_le64(h + 24, stored_len);
	memcpy(h + 32, hash, HASH_LEN);
	put_le32(h + 64, crc);
}

/* Decodes the header of a format 1 or 2 object from its first avail bytes
 * (at most STORE_HEADER_LEN are looked at). Returns 0 or a reason for the
 * log. */
static const char *store_header_decode(const uint8_t *h, size_t avail,
				       const uint8_t hash[HASH_LEN],
				       struct store_object_info *info)
{
	if (avail < STORE_HEADER_LEN_V1)
		return "truncated header";
	if (memcmp(h, STORE_MAGIC, 8) != 0)
		return "bad magic";
	unsigned version = get_le16(h + 8);
	uint32_t hlen = get_le32(h + 12);
	if (version != 1 && version != STORE_FORMAT_VERSION)
		return "unknown format version";
	if (hlen != (version == 1 ? STORE_HEADER_LEN_V1 : STORE_HEADER_LEN))
		return "bad header length";
	if (avail < hlen)
		return "truncated header";
	if (memcmp(h + 32, hash, HASH_LEN) != 0)
		return "header names another chunk";
	info->codec = h[10];
	info->plain_len = get_le64(h + 16);
	info->stored_len = get_le64(h + 24);
	/* S6: every length bounded before anything is sized or read by it */
	if (!codec_known(info->codec))
		return "unknown codec";
	if (info->plain_len > chunker_default_params.max_size)
		return "plain length larger than a chunk can be";
	if (info->stored_len > codec_bound((size_t)info->plain_len))
		return "payload length larger than its plain length can encode to";
	info->header_len = hlen;
	info->has_crc = version >= 2;
	info->crc = info->has_crc ? get_le32(h + 64) : 0;
	return NULL;
}

/* S4: the first check of a payload (stored_len bytes) read back: its CRC,
 * if it has one and the check is more than the header's. NULL or a reason. */
static const char *store_payload_why(enum store_check how, const struct store_object_info *info,
				     const uint8_t *payload)
{
	if (how == STORE_CHECK_HEADER || !info->has_crc)
		return NULL;
	return crc32c(0, payload, info->stored_len) == info->crc
		       ? NULL
		       : "payload does not match its CRC-32C";
}

/* S4: whether the plain bytes must also be hashed. */
static bool store_needs_sha(enum store_check how, const struct store_object_info *info)
{
	return how == STORE_CHECK_SHA || (how == STORE_CHECK_CRC && !info->has_crc);
}

#define STORE_SUM_STEP (64u << 10) /* a piece of a raw payload, checked while in L1/L2 */

/* S4 then S2 of a raw payload (its plain bytes), as how says: the CRC and
 * the SHA-256 taken over each STORE_SUM_STEP piece in turn, one pass over
 * the object (0.5-4 MiB, past L2) instead of one for each. The same
 * verdicts, the CRC's first, as store_payload_why and a SHA-256 after it.
 * NULL or a reason. */
static const char *store_raw_why(enum store_check how, const struct store_object_info *info,
				 const uint8_t *payload, const uint8_t hash[HASH_LEN])
{
	if (!store_needs_sha(how, info))
		return store_payload_why(how, info, payload);
	bool crc_too = how != STORE_CHECK_HEADER && info->has_crc;
	struct hash_stream sha = { 0 };
	uint32_t crc = 0;
	hash_stream_begin(&sha);
	for (size_t off = 0; off < info->stored_len; off += STORE_SUM_STEP) {
		size_t n = info->stored_len - off < STORE_SUM_STEP ? info->stored_len - off
								    : STORE_SUM_STEP;
		if (crc_too)
			crc = crc32c(crc, payload + off, n);
		hash_stream_add(&sha, payload + off, n);
	}
	uint8_t got[HASH_LEN];
	hash_stream_end(&sha, got);
	hash_stream_free(&sha);
	if (crc_too && crc != info->crc)
		return "payload does not match its CRC-32C";
	return memcmp(got, hash, HASH_LEN) == 0 ? NULL : "bytes do not match their hash";
}

void store_set_local_check(struct store *st, enum store_check how)
{
	atomic_store(&st->local_check, (int)how);
}

enum store_check store_local_check(struct store *st)
{
	return (enum store_check)atomic_load(&st->local_check);
}

/* ---- paths ---- */

static void store_rel_path(const uint8_t hash[HASH_LEN], char *buf, size_t size)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	snprintf(buf, size, "chunks/%.2s/%.2s/%s", hex, hex + 2, hex);
}

void store_object_relpath(const uint8_t hash[HASH_LEN], char *buf, size_t size)
{
	store_rel_path(hash, buf, size);
}

void store_object_path(const struct store *st, const uint8_t hash[HASH_LEN], char *buf,
		       size_t size)
{
	char rel[128];
	store_rel_path(hash, rel, sizeof(rel));
	snprintf(buf, size, "%s/%s", st->root, rel);
}

const char *store_root(const struct store *st)
{
	return st->root;
}

/* Invariant S5: like openat (-1 and errno), nothing planted is followed. */
static int store_openat(const struct store *st, const char *rel, int flags, mode_t mode)
{
	int fd = safe_openat(st->root_fd, rel, flags, mode);
	if (fd >= 0)
		return fd;
	errno = -fd;
	return -1;
}

/* S5: an object to read. Something planted at its name (a symlink, a FIFO:
 * O_NONBLOCK) is not an object this store made: -EIO like a damaged one, so
 * that readers drop it and fetch BACKING's copy. */
static int store_open_read(const struct store *st, const char *rel)
{
	int fd = store_openat(st, rel, O_RDONLY | O_NONBLOCK, 0);
	struct stat sb;
	if (fd >= 0 && (fstat(fd, &sb) != 0 || S_ISREG(sb.st_mode)))
		return fd;
	if (fd < 0 && errno != ELOOP && errno != ENOTDIR)
		return -1;
	const char *slash = strrchr(rel, '/');
	log_error("store %s: chunk %s is corrupt: not a file this store made (a symlink or a "
		  "special file at %s)", st->root, slash ? slash + 1 : rel, rel);
	if (fd >= 0)
		close(fd);
	errno = EIO;
	return -1;
}

/* S5: a directory of ours, private; an existing symlink is -ELOOP. */
static int store_mkdirat(int dirfd, const char *path)
{
	return safe_mkdirat(dirfd, path, STORE_DIR_MODE);
}

/* S5: renameat of two names beneath the root, each under a parent opened
 * without following anything. */
static int store_renameat(const struct store *st, const char *from, const char *to)
{
	const char *from_base, *to_base;
	int from_fd = safe_parent(st->root_fd, from, &from_base);
	if (from_fd < 0)
		return from_fd;
	int to_fd = safe_parent(st->root_fd, to, &to_base);
	int rc = to_fd < 0 ? to_fd : renameat(from_fd, from_base, to_fd, to_base) == 0 ? 0 : -errno;
	close(from_fd);
	if (to_fd >= 0)
		close(to_fd);
	return rc;
}

static int store_unlinkat(const struct store *st, const char *rel, int flags)
{
	const char *base;
	int pfd = safe_parent(st->root_fd, rel, &base);
	if (pfd < 0)
		return pfd;
	int rc = unlinkat(pfd, base, flags) == 0 ? 0 : -errno;
	close(pfd);
	return rc;
}

static int store_fsync_dir(struct store *st, const char *rel_dir)
{
	int fd = store_openat(st, rel_dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

static unsigned store_shard_of(const uint8_t hash[HASH_LEN])
{
	return (unsigned)hash[0] << 8 | hash[1];
}

/* S8: the lock a prune and a put that makes the shard hold. */
static pthread_mutex_t *store_shard_lock(struct store *st, const uint8_t hash[HASH_LEN])
{
	return &st->shard_locks[store_shard_of(hash) % STORE_SHARD_LOCKS];
}

static void store_shard_mark(struct store *st, unsigned shard)
{
	atomic_fetch_or(&st->shard_fresh[shard / 64], UINT64_C(1) << (shard % 64));
}

/* Creates chunks/ab and chunks/ab/cd for a rel path "chunks/ab/cd/…" and
 * marks the shard fresh (S1); the entries become durable at the next sync. */
static int store_make_shard(struct store *st, const uint8_t hash[HASH_LEN], const char *rel)
{
	char outer[16], inner[16];
	memcpy(outer, rel, 9); /* "chunks/ab" */
	outer[9] = '\0';
	memcpy(inner, rel, 12); /* "chunks/ab/cd" */
	inner[12] = '\0';
	store_shard_mark(st, store_shard_of(hash)); /* before the entry can exist */
	int rc = store_mkdirat(st->root_fd, outer);
	return rc ? rc : store_mkdirat(st->root_fd, inner);
}

/* Makes a fresh shard's own entries durable (S1): chunks/ab/cd in chunks/ab,
 * chunks/ab in chunks. A shard not fresh needs nothing. */
static int store_shard_sync(struct store *st, const uint8_t hash[HASH_LEN])
{
	unsigned shard = store_shard_of(hash);
	uint64_t bit = UINT64_C(1) << (shard % 64);
	if (!(atomic_load(&st->shard_fresh[shard / 64]) & bit))
		return 0;
	char rel[128];
	store_rel_path(hash, rel, sizeof(rel));
	rel[9] = '\0'; /* "chunks/ab" */
	int rc = store_fsync_dir(st, rel);
	if (rc == 0)
		rc = store_fsync_dir(st, "chunks");
	if (rc == 0)
		atomic_fetch_and(&st->shard_fresh[shard / 64], ~bit);
	return rc;
}

/* ---- fresh objects (S2) ---- */

static const uint8_t store_zero_hash[HASH_LEN];

static size_t store_fresh_home(const uint8_t hash[HASH_LEN])
{
	return (size_t)get_le64(hash + 8) & (STORE_FRESH_CAP - 1);
}

/* The slot holding hash, or the empty slot where it would go. Lock held. */
static bool store_fresh_empty(const struct store_fresh *f)
{
	return memcmp(f->hash, store_zero_hash, HASH_LEN) == 0;
}

static int64_t store_mtime_ns(const struct stat *sb)
{
	return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static size_t store_fresh_find(struct store *st, const uint8_t hash[HASH_LEN])
{
	size_t i = store_fresh_home(hash);
	while (!store_fresh_empty(&st->fresh[i]) && memcmp(st->fresh[i].hash, hash, HASH_LEN) != 0)
		i = (i + 1) & (STORE_FRESH_CAP - 1);
	return i;
}

/* sb: the object file's stat once its bytes were written. */
static void store_fresh_add(struct store *st, const uint8_t hash[HASH_LEN], const struct stat *sb)
{
	if (!st->fresh || memcmp(hash, store_zero_hash, HASH_LEN) == 0)
		return;
	pthread_mutex_lock(&st->fresh_lock);
	size_t i = store_fresh_find(st, hash);
	bool isnew = store_fresh_empty(&st->fresh[i]);
	if (!isnew || st->fresh_n < STORE_FRESH_CAP / 4 * 3) { /* full: verified in full */
		memcpy(st->fresh[i].hash, hash, HASH_LEN);
		st->fresh[i].ino = (uint64_t)sb->st_ino;
		st->fresh[i].mtime_ns = store_mtime_ns(sb);
		st->fresh[i].size = (uint64_t)sb->st_size;
		st->fresh_n += isnew;
	}
	pthread_mutex_unlock(&st->fresh_lock);
}

/* Removes hash, shifting later entries of its probe run back (no tombstones). */
static void store_fresh_del(struct store *st, const uint8_t hash[HASH_LEN])
{
	if (!st->fresh)
		return;
	pthread_mutex_lock(&st->fresh_lock);
	size_t i = store_fresh_find(st, hash);
	if (!store_fresh_empty(&st->fresh[i])) {
		st->fresh_n--;
		for (size_t j = (i + 1) & (STORE_FRESH_CAP - 1); !store_fresh_empty(&st->fresh[j]);
		     j = (j + 1) & (STORE_FRESH_CAP - 1)) {
			size_t home = store_fresh_home(st->fresh[j].hash);
			/* j's entry may move to i unless its home lies in (i, j] */
			bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
			if (!stays) {
				st->fresh[i] = st->fresh[j];
				i = j;
			}
		}
		memset(&st->fresh[i], 0, sizeof(st->fresh[i]));
	}
	pthread_mutex_unlock(&st->fresh_lock);
}

/* Whether hash is fresh and its file (sb) is the one written, unchanged. */
static bool store_fresh_has(struct store *st, const uint8_t hash[HASH_LEN], const struct stat *sb)
{
	if (!st->fresh)
		return false;
	pthread_mutex_lock(&st->fresh_lock);
	const struct store_fresh *f = &st->fresh[store_fresh_find(st, hash)];
	bool has = !store_fresh_empty(f) && f->ino == (uint64_t)sb->st_ino &&
		   f->mtime_ns == store_mtime_ns(sb) && f->size == (uint64_t)sb->st_size;
	pthread_mutex_unlock(&st->fresh_lock);
	return has;
}

static bool store_fresh_has_fd(struct store *st, const uint8_t hash[HASH_LEN], int fd)
{
	struct stat sb;
	return fstat(fd, &sb) == 0 && store_fresh_has(st, hash, &sb);
}

void store_uploaded(struct store *st, const uint8_t hash[HASH_LEN])
{
	store_fresh_del(st, hash);
}

/* ---- checked objects (S10) ---- */

static size_t store_checked_slot(const uint8_t hash[HASH_LEN])
{
	return (size_t)get_le64(hash + 16) & (STORE_CHECKED_CAP - 1);
}

static void store_checked_add(struct store *st, const uint8_t hash[HASH_LEN])
{
	if (!st->checked || memcmp(hash, store_zero_hash, HASH_LEN) == 0)
		return;
	pthread_mutex_lock(&st->checked_lock);
	memcpy(st->checked[store_checked_slot(hash)], hash, HASH_LEN); /* a collision forgets */
	pthread_mutex_unlock(&st->checked_lock);
}

static void store_checked_del(struct store *st, const uint8_t hash[HASH_LEN])
{
	if (!st->checked)
		return;
	pthread_mutex_lock(&st->checked_lock);
	uint8_t *slot = st->checked[store_checked_slot(hash)];
	if (memcmp(slot, hash, HASH_LEN) == 0)
		memset(slot, 0, HASH_LEN);
	pthread_mutex_unlock(&st->checked_lock);
}

static bool store_checked_has(struct store *st, const uint8_t hash[HASH_LEN])
{
	if (!st->checked || memcmp(hash, store_zero_hash, HASH_LEN) == 0)
		return false;
	pthread_mutex_lock(&st->checked_lock);
	bool has = memcmp(st->checked[store_checked_slot(hash)], hash, HASH_LEN) == 0;
	pthread_mutex_unlock(&st->checked_lock);
	return has;
}

/* An object found damaged leaves both sets: neither vouches for it (S2, S10). */
static void store_forget(struct store *st, const uint8_t hash[HASH_LEN])
{
	store_fresh_del(st, hash);
	store_checked_del(st, hash);
}

/* ---- open / close ---- */

/* Removes tmp files left by dead processes of this host ("<hex>.<host>.<pid>.<n>"). */
static void store_clean_tmp(struct store *st)
{
	int fd = store_openat(st, "tmp", O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	size_t hl = strlen(st->host);
	while ((de = readdir(d)) != NULL) {
		const char *p = strchr(de->d_name, '.');
		if (!p || strncmp(p + 1, st->host, hl) != 0 || p[1 + hl] != '.')
			continue;
		long pid = strtol(p + 2 + hl, NULL, 10);
		if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM))
			continue; /* a live writer on this host (maybe another user's) */
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			log_info("store %s: removed stale temporary object tmp/%s", st->root, de->d_name);
	}
	closedir(d);
}

int store_open(const char *root, struct store **out)
{
	struct store *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	atomic_init(&st->local_check, STORE_CHECK_CRC); /* S4 */
	int rc = 0;
	if (snprintf(st->root, sizeof(st->root), "%s", root) >= (int)sizeof(st->root)) {
		rc = -ENAMETOOLONG;
		goto err;
	}
	if (gethostname(st->host, sizeof(st->host)) != 0 || !st->host[0])
		strcpy(st->host, "localhost");
	for (char *p = st->host; *p; p++)
		if (*p == '.' || *p == '/')
			*p = '_';
	st->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->root_fd < 0) {
		rc = -errno;
		log_error("store %s: cannot open: %s", root, strerror(-rc));
		goto err;
	}
	if ((rc = store_mkdirat(st->root_fd, "chunks")) != 0 ||
	    (rc = store_mkdirat(st->root_fd, "tmp")) != 0) {
		log_error("store %s: cannot create chunks/ or tmp/: %s", root, strerror(-rc));
		close(st->root_fd);
		goto err;
	}
	if (pthread_key_create(&st->scratch_key, store_scratch_free) != 0) {
		rc = -ENOMEM;
		close(st->root_fd);
		goto err;
	}
	pthread_mutex_init(&st->scratch_lock, NULL);
	for (int i = 0; i < STORE_SHARD_LOCKS; i++)
		pthread_mutex_init(&st->shard_locks[i], NULL);
	pthread_mutex_init(&st->fresh_lock, NULL);
	pthread_mutex_init(&st->dio_lock, NULL);
	pthread_cond_init(&st->dio_free, NULL);
	st->fresh = calloc(STORE_FRESH_CAP, sizeof(*st->fresh)); /* none: all uploads verified */
	pthread_mutex_init(&st->checked_lock, NULL);
	st->checked = calloc(STORE_CHECKED_CAP, sizeof(*st->checked)); /* none: every hit is read */
	store_clean_tmp(st);
	/* S7: rows written earlier are read whether or not new ones go there */
	rc = storesmall_open(root, false, &st->small);
	if (rc != 0 && rc != -ENOENT)
		log_warn("store %s: small objects unreadable: %s", root, strerror(-rc));
	*out = st;
	return 0;
err:
	free(st);
	return rc;
}

void store_close(struct store *st)
{
	if (!st)
		return;
	pthread_key_delete(st->scratch_key); /* no destructor runs after this */
	while (st->scratch_list)
		store_scratch_free(st->scratch_list);
	pthread_mutex_destroy(&st->scratch_lock);
	for (int i = 0; i < STORE_SHARD_LOCKS; i++)
		pthread_mutex_destroy(&st->shard_locks[i]);
	pthread_mutex_destroy(&st->fresh_lock);
	for (int i = 0; i < STORE_DIO_BUFS; i++)
		free(st->dio_buf[i]);
	pthread_cond_destroy(&st->dio_free);
	pthread_mutex_destroy(&st->dio_lock);
	free(st->fresh);
	pthread_mutex_destroy(&st->checked_lock);
	free(st->checked);
	storesmall_close(st->small);
	close(st->root_fd);
	free(st);
}

int store_set_small(struct store *st, size_t max)
{
	if (max && !st->small) {
		int rc = storesmall_open(st->root, true, &st->small);
		if (rc == 0 && fsync(st->root_fd) != 0) /* small.db's entry, once */
			rc = -errno;
		if (rc != 0) {
			log_error("store %s: cannot create %s: %s", st->root, STORESMALL_FILE,
				  strerror(-rc));
			return rc;
		}
	}
	atomic_store(&st->small_max, max);
	return 0;
}

void store_small_batch(struct store *st)
{
	if (st->small)
		storesmall_batch(st->small);
}

int store_small_commit(void *arg)
{
	struct store *st = arg;
	return st->small ? storesmall_commit(st->small) : 0;
}

/* S7: whether an image of these pieces goes to small.db. */
static bool store_small_fits(struct store *st, const struct iovec *iov, int cnt)
{
	size_t max = atomic_load(&st->small_max), total = 0;
	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	return max && st->small && total <= max;
}

/* S7: the row's image in a malloc'd buffer (*img); -ENOENT when there is none. */
static int store_small_image(struct store *st, const uint8_t hash[HASH_LEN], uint8_t **img,
			     size_t *len)
{
	*img = NULL;
	size_t n = 0;
	int rc = st->small ? storesmall_len(st->small, hash, &n) : -ENOENT;
	if (rc == 0 && !(*img = malloc(n ? n : 1)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = storesmall_get(st->small, hash, *img, n, len);
	if (rc == -EFBIG) /* replaced meanwhile: the same bytes (invariant 3), so not by a longer image */
		rc = -EIO;
	if (rc != 0) {
		free(*img);
		*img = NULL;
	}
	return rc;
}

/* S7: a row whose image is damaged, logged like a damaged file. */
static int store_small_corrupt(struct store *st, const uint8_t hash[HASH_LEN], const char *why)
{
	char hex[HASH_HEX_LEN + 1];
	hash_to_hex(hash, hex);
	log_error("store %s: chunk %s (in %s) is corrupt: %s", st->root, hex, STORESMALL_FILE, why);
	store_checked_del(st, hash); /* S10 */
	return -EIO;
}

/* ---- write ---- */

static int store_write_all(int fd, const struct iovec *iov, int cnt)
{
	struct iovec v[2];
	assert(cnt <= 2);
	memcpy(v, iov, sizeof(*iov) * cnt);
	int i = 0;
	while (i < cnt) {
		ssize_t n = writev(fd, v + i, cnt - i);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (i < cnt && (size_t)n >= v[i].iov_len) {
			n -= v[i].iov_len;
			i++;
		}
		if (i < cnt) {
			v[i].iov_base = (char *)v[i].iov_base + n;
			v[i].iov_len -= n;
		}
	}
	return 0;
}

/* S3: the image's whole blocks with O_DIRECT, from the caller's aligned
 * buffer straight to the disk, then its last partial block through the page
 * cache. A filesystem that refuses O_DIRECT gets it all buffered. */
static int store_write_direct(int fd, const uint8_t *img, size_t len)
{
	size_t head = len & ~(size_t)(STORE_IO_ALIGN - 1), done = 0;
	int fl = fcntl(fd, F_GETFL);
	if (head && fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
		while (done < head) {
			ssize_t n = pwrite(fd, img + done, head - done, (off_t)done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			done += (size_t)n;
		}
		done &= ~(size_t)(STORE_IO_ALIGN - 1); /* a short write: redo its block buffered */
		if (fcntl(fd, F_SETFL, fl) != 0)
			return -errno;
	}
	while (done < len) {
		ssize_t n = pwrite(fd, img + done, len - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

/* Writes an object image (iov) under tmp/ and renames it into place; with
 * STORE_SYNC the object and its directory are fsync'd first. */
static int store_write_object(struct store *st, const uint8_t hash[HASH_LEN],
			      const struct iovec *iov, int cnt, int flags, struct stat *written)
{
	int rc;
	char rel[128], tmp[192], hex[HASH_HEX_LEN + 1];
	store_rel_path(hash, rel, sizeof(rel));
	hash_to_hex(hash, hex);
	int fd;
	char head[160];
	snprintf(head, sizeof(head), "tmp/%s.%s.%ld.", hex, st->host, (long)getpid());
	do { /* S5: an unguessable name, made here; one taken is skipped */
		if (safe_tmpname(tmp, sizeof(tmp), head) != 0)
			snprintf(tmp, sizeof(tmp), "%s%lu", head,
				 (unsigned long)atomic_fetch_add(&st->tmp_seq, 1));
		fd = store_openat(st, tmp, O_WRONLY | O_CREAT | O_EXCL, STORE_OBJECT_MODE);
	} while (fd < 0 && errno == EEXIST);
	if (fd < 0) {
		rc = -errno;
		log_error("store %s: create %s: %s", st->root, tmp, strerror(-rc));
		return rc;
	}
	bool direct = flags & STORE_DIRECT_IO;
	rc = direct ? store_write_direct(fd, iov[0].iov_base, iov[0].iov_len)
		    : store_write_all(fd, iov, cnt);
	if (rc == 0) {
		if (flags & STORE_SYNC)
			rc = fdatasync(fd) == 0 ? 0 : -errno;
		else if (!direct && iov[cnt - 1].iov_len >= STORE_EARLY_WRITEBACK_MIN)
			sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	}
	if (rc == 0 && written && fstat(fd, written) != 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0) {
		rc = store_renameat(st, tmp, rel);
		/* a new shard, or one a removal pruned meanwhile (S8); a full disk
		 * refuses it with ENOSPC, not ENOENT */
		for (int tries = 0; rc == -ENOENT && tries < STORE_SHARD_TRIES; tries++) {
			pthread_mutex_t *lock = store_shard_lock(st, hash);
			pthread_mutex_lock(lock);
			rc = store_make_shard(st, hash, rel);
			if (rc == 0)
				rc = store_renameat(st, tmp, rel);
			pthread_mutex_unlock(lock);
		}
	}
	if (rc == 0 && (flags & STORE_SYNC)) {
		char dir[16];
		memcpy(dir, rel, 12);
		dir[12] = '\0';
		rc = store_fsync_dir(st, dir);
		if (rc == 0)
			rc = store_shard_sync(st, hash);
	}
	if (rc != 0) {
		log_error("store %s: write chunk %s: %s", st->root, hex, strerror(-rc));
		store_unlinkat(st, tmp, 0);
		return rc;
	}
	return 0;
}

/* Writes the image a put built (iov), adds it to the fresh set and tells the
 * caller what was stored. */
static int store_put_image(struct store *st, const uint8_t hash[HASH_LEN], const struct iovec *iov,
			   int cnt, int flags, const struct store_object_info *what,
			   struct store_object_info *info)
{
	if (store_small_fits(st, iov, cnt)) { /* S7 */
		int rc = storesmall_put(st->small, hash, iov, cnt);
		if (rc == 0 && (flags & STORE_SYNC))
			rc = storesmall_sync(st->small);
		if (rc == 0)
			store_checked_add(st, hash); /* S10 */
		if (rc == 0 && info)
			*info = *what;
		return rc;
	}
	struct stat written;
	int rc = store_write_object(st, hash, iov, cnt, flags, &written);
	if (rc != 0)
		return rc;
	store_fresh_add(st, hash, &written); /* S2: the caller hashed these bytes */
	store_checked_add(st, hash); /* S10 */
	if (info)
		*info = *what;
	return 0;
}

static void store_dio_give(struct store *st, int i)
{
	pthread_mutex_lock(&st->dio_lock);
	st->dio_busy[i] = false;
	pthread_cond_signal(&st->dio_free);
	pthread_mutex_unlock(&st->dio_lock);
}

/* S3: takes a free page-aligned image buffer of at least need bytes (one of
 * STORE_DIO_BUFS: their memory is bounded however many threads write), or
 * -1 when none can be had. */
static int store_dio_take(struct store *st, size_t need)
{
	pthread_mutex_lock(&st->dio_lock);
	int i;
	for (;;) {
		for (i = 0; i < STORE_DIO_BUFS && st->dio_busy[i]; i++)
			;
		if (i < STORE_DIO_BUFS)
			break;
		pthread_cond_wait(&st->dio_free, &st->dio_lock);
	}
	st->dio_busy[i] = true;
	pthread_mutex_unlock(&st->dio_lock);
	if (st->dio_cap[i] < need) { /* grown outside the lock: the slot is ours */
		size_t cap = store_align_up(need);
		uint8_t *nb = aligned_alloc(STORE_IO_ALIGN, cap);
		if (nb) {
			free(st->dio_buf[i]);
			st->dio_buf[i] = nb;
			st->dio_cap[i] = cap;
		} else {
			store_dio_give(st, i);
			return -1;
		}
	}
	return i;
}

/* S3: the image is built whole in an aligned buffer (a raw payload copied
 * there: cheaper than a page-cache fill) and written with O_DIRECT. */
static int store_put_direct(struct store *st, const uint8_t hash[HASH_LEN], const void *plain,
			    size_t len, int flags, struct store_object_info *info)
{
	int slot = store_dio_take(st, STORE_HEADER_LEN + codec_bound(len));
	if (slot < 0)
		return -ENOMEM;
	uint8_t *img = st->dio_buf[slot];
	size_t stored_len = len;
	uint8_t codec = codec_compress(atomic_load(&st->codec_family), plain, len,
				       img + STORE_HEADER_LEN, codec_bound(len), &stored_len);
	if (codec == CODEC_RAW) {
		memcpy(img + STORE_HEADER_LEN, plain, len);
	}
	uint32_t crc = crc32c(0, img + STORE_HEADER_LEN, stored_len); /* S4 */
	store_header_encode(img, hash, codec, len, stored_len, crc);
	struct iovec iov[1] = { { img, STORE_HEADER_LEN + stored_len } };
	struct store_object_info what = { .codec = codec, .plain_len = len, .stored_len = stored_len,
					  .header_len = STORE_HEADER_LEN, .has_crc = true, .crc = crc };
	int rc = store_put_image(st, hash, iov, 1, flags | STORE_DIRECT_IO, &what, info);
	store_dio_give(st, slot);
	return rc;
}

int store_put_headroom(struct store *st, const uint8_t hash[HASH_LEN], uint8_t *img, size_t len,
		       const uint32_t *plain_crc, int flags, struct store_object_info *info)
{
	const uint8_t *plain = img + STORE_HEADER_LEN;
	if (len < STORE_DIRECT_MIN || !atomic_load(&st->direct_writes) ||
	    ((uintptr_t)img & (STORE_IO_ALIGN - 1)))
		return store_put(st, hash, plain, len, flags, info);
	uint8_t *scratch = store_scratch(st, codec_probe_bound());
	if (!scratch)
		return -ENOMEM;
	if (codec_worth_trying(plain, len, scratch)) /* maybe compressed: the image buffer's way */
		return store_put_direct(st, hash, plain, len, flags, info);
	/* S4, S11: the caller's CRC of these very bytes, else computed here */
	uint32_t crc = plain_crc ? *plain_crc : crc32c(0, plain, len);
	store_header_encode(img, hash, CODEC_RAW, len, len, crc);
	struct iovec iov[1] = { { img, STORE_HEADER_LEN + len } };
	struct store_object_info what = { .codec = CODEC_RAW, .plain_len = len, .stored_len = len,
					  .header_len = STORE_HEADER_LEN, .has_crc = true, .crc = crc };
	return store_put_image(st, hash, iov, 1, flags | STORE_DIRECT_IO, &what, info);
}

void store_set_direct_writes(struct store *st, bool on)
{
	atomic_store(&st->direct_writes, on);
}

void store_set_codec(struct store *st, enum codec_family family)
{
	atomic_store(&st->codec_family, (int)family);
}

int store_put(struct store *st, const uint8_t hash[HASH_LEN], const void *plain, size_t len,
	      int flags, struct store_object_info *info)
{
	if (len >= STORE_DIRECT_MIN && atomic_load(&st->direct_writes))
		return store_put_direct(st, hash, plain, len, flags, info);
	uint8_t *scratch = store_scratch(st, codec_bound(len));
	if (!scratch)
		return -ENOMEM;
	size_t stored_len = len;
	const void *payload = plain; /* raw chunks are written from the caller's bytes */
	uint8_t codec = codec_compress(atomic_load(&st->codec_family), plain, len, scratch,
				       codec_bound(len), &stored_len);
	if (codec != CODEC_RAW)
		payload = scratch;
	uint8_t header[STORE_HEADER_LEN];
	uint32_t crc = crc32c(0, payload, stored_len); /* S4 */
	store_header_encode(header, hash, codec, len, stored_len, crc);
	struct iovec iov[2] = { { header, sizeof(header) }, { (void *)payload, stored_len } };
	struct store_object_info what = { .codec = codec, .plain_len = len, .stored_len = stored_len,
					  .header_len = STORE_HEADER_LEN, .has_crc = true, .crc = crc };
	return store_put_image(st, hash, iov, 2, flags, &what, info);
}

int store_sync(struct store *st, const uint8_t hash[HASH_LEN])
{
	char rel[128];
	store_rel_path(hash, rel, sizeof(rel));
	int fd = store_openat(st, rel, O_RDONLY, 0);
	size_t n;
	if (fd < 0 && errno == ENOENT && st->small && storesmall_len(st->small, hash, &n) == 0)
		return storesmall_sync(st->small); /* S7 */
	if (fd < 0)
		return -errno;
	int rc = fdatasync(fd) == 0 ? 0 : -errno;
	close(fd);
	if (rc == 0) {
		rel[12] = '\0';
		rc = store_fsync_dir(st, rel);
	}
	if (rc == 0)
		rc = store_shard_sync(st, hash);
	return rc;
}

int store_syncfs(struct store *st)
{
	/* Take the fresh bits first: a shard made after this point keeps its bit
	 * (S1), one made before is covered by the syncfs. */
	enum { WORDS = STORE_SHARDS / 64 };
	static_assert(WORDS * 64 == STORE_SHARDS, "whole words");
	uint64_t taken[WORDS] = { 0 }; /* 8 KiB */
	for (size_t i = 0; i < WORDS; i++)
		if (atomic_load(&st->shard_fresh[i]))
			taken[i] = atomic_exchange(&st->shard_fresh[i], 0);
	int rc = syncfs(st->root_fd) == 0 ? 0 : -errno;
	for (size_t i = 0; rc != 0 && i < WORDS; i++)
		if (taken[i])
			atomic_fetch_or(&st->shard_fresh[i], taken[i]);
	return rc;
}

/* ---- read ---- */

static int store_pread_all(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA; /* truncated */
		done += n;
	}
	return 0;
}

/* Opens the object and decodes its header. header_only: the caller reads
 * nothing else (store_check_unread of an object S2 does not vouch for), so
 * the kernel is told not to read ahead: an object's first blocks were written
 * with O_DIRECT (S3), so reading its header goes to the disk, and readahead
 * filled 4 pages of page cache that nobody read (docs/BENCH.md, issue 20
 * part 2, s28-cpu20). POSIX_FADV_RANDOM is this open file's alone. */
static int store_open_object(struct store *st, const uint8_t hash[HASH_LEN],
			     struct store_object_info *info, int *fd_out, bool header_only)
{
	char rel[128];
	store_rel_path(hash, rel, sizeof(rel));
	int fd = store_open_read(st, rel);
	if (fd < 0)
		return -errno;
	if (header_only)
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM); /* advice: the read works without */
	uint8_t header[STORE_HEADER_LEN];
	struct stat sb;
	int rc = fstat(fd, &sb) == 0 ? 0 : -errno;
	size_t avail = rc == 0 && (uint64_t)sb.st_size < sizeof(header) ? (size_t)sb.st_size
									 : sizeof(header);
	if (rc == 0)
		rc = store_pread_all(fd, header, avail, 0);
	const char *why = rc == 0 ? store_header_decode(header, avail, hash, info) : NULL;
	if (!why && rc == 0 && (uint64_t)sb.st_size < info->header_len + info->stored_len)
		why = "truncated payload";
	else if (!why && rc == 0 && (uint64_t)sb.st_size > info->header_len + info->stored_len)
		why = "trailing bytes after the payload";
	else if (!why && rc == 0 && info->codec == CODEC_RAW && info->stored_len != info->plain_len)
		why = "raw payload length differs from the plain length";
	if (rc == 0 && !why) {
		*fd_out = fd;
		return 0;
	}
	log_error("store %s: chunk %s is corrupt: %s", st->root, rel, why ? why : strerror(-rc));
	store_forget(st, hash); /* S2, S10 */
	close(fd);
	return -EIO;
}

bool store_has(struct store *st, const uint8_t hash[HASH_LEN])
{
	char rel[128];
	struct stat sb;
	store_rel_path(hash, rel, sizeof(rel));
	if (fstatat(st->root_fd, rel, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode))
		return true;
	size_t n;
	return st->small && storesmall_len(st->small, hash, &n) == 0; /* S7 */
}

static const char *store_image_why(const uint8_t hash[HASH_LEN], const uint8_t *obj, size_t len,
				   size_t cap, struct store_object_info *info);

/* S7: store_stat of a row. */
static int store_small_stat(struct store *st, const uint8_t hash[HASH_LEN],
			    struct store_object_info *info)
{
	uint8_t *img;
	size_t len;
	int rc = store_small_image(st, hash, &img, &len);
	if (rc != 0)
		return rc;
	const char *why = store_image_why(hash, img, len, SIZE_MAX, info);
	free(img);
	return why ? store_small_corrupt(st, hash, why) : 0;
}

int store_stat(struct store *st, const uint8_t hash[HASH_LEN], struct store_object_info *info)
{
	int fd;
	int rc = store_open_object(st, hash, info, &fd, false);
	if (rc == 0)
		close(fd);
	return rc == -ENOENT ? store_small_stat(st, hash, info) : rc;
}

int store_present(struct store *st, const uint8_t hash[HASH_LEN], uint64_t plain_len)
{
	struct store_object_info info;
	int rc = store_stat(st, hash, &info);
	if (rc == 0 && info.plain_len != plain_len) {
		char rel[128];
		store_rel_path(hash, rel, sizeof(rel));
		log_error("store %s: chunk %s holds %llu plain bytes, where %llu are named",
			  st->root, rel, (unsigned long long)info.plain_len,
			  (unsigned long long)plain_len);
		return -EIO;
	}
	return rc;
}

static int store_object_check_into(const uint8_t hash[HASH_LEN], const void *obj, size_t len,
				   void *plain, size_t cap, bool keep_plain, enum store_check how,
				   size_t *plain_len, const char **why);

/* S7: store_get of a row. */
static int store_small_get(struct store *st, const uint8_t hash[HASH_LEN], void *plain,
			   size_t cap, size_t *len)
{
	uint8_t *img;
	size_t n;
	int rc = store_small_image(st, hash, &img, &n);
	if (rc != 0)
		return rc;
	const char *why = NULL;
	rc = store_object_check_into(hash, img, n, plain, cap, true, store_local_check(st), len,
				     &why);
	free(img);
	if (rc != 0 && !why)
		return rc; /* S12: no verdict */
	return rc == 0 ? 0 : store_small_corrupt(st, hash, why);
}

/* S12: codec_decode of a payload. 0; -EIO with *why set when the payload
 * does not decode; else the machine's error (-ENOMEM), *why untouched. */
static int store_decode(const struct store_object_info *info, const void *payload, void *plain,
			const char **why)
{
	int rc = codec_decode(info->codec, payload, info->stored_len, plain, info->plain_len);
	if (codec_decode_bad(rc)) {
		*why = "payload does not decode";
		return -EIO;
	}
	return rc;
}

int store_get(struct store *st, const uint8_t hash[HASH_LEN], void *plain, size_t cap,
	      size_t *len)
{
	struct store_object_info info;
	char hex[HASH_HEX_LEN + 1];
	int fd;
	int rc = store_open_object(st, hash, &info, &fd, false);
	hash_to_hex(hash, hex);
	if (rc == -ENOENT)
		return store_small_get(st, hash, plain, cap, len); /* S7 */
	if (rc != 0) /* -ENOENT: not in this store (the caller decides if that is an error) */
		return rc;
	const char *why = NULL;
	if (info.plain_len > cap) {
		why = "plain length larger than the caller expects";
	} else {
		/* raw payloads are read straight into the caller's buffer */
		bool raw = info.codec == CODEC_RAW;
		uint8_t *payload = raw ? plain : store_scratch(st, info.stored_len ? info.stored_len : 1);
		if (!payload && info.stored_len) {
			close(fd);
			return -ENOMEM;
		}
		enum store_check how = store_local_check(st);
		rc = store_pread_all(fd, payload, info.stored_len, info.header_len);
		if (rc != 0)
			why = "truncated payload";
		else if ((why = store_payload_why(how, &info, payload)) != NULL)
			;
		else if (!raw && (rc = store_decode(&info, payload, plain, &why)) != 0)
			; /* S12: why says if it is a verdict */
		else if (store_needs_sha(how, &info)) {
			uint8_t got[HASH_LEN];
			hash_sha256(plain, info.plain_len, got);
			if (memcmp(got, hash, HASH_LEN) != 0)
				why = "bytes do not match their hash";
		}
	}
	close(fd);
	if (why) {
		log_error("store %s: chunk %s is corrupt: %s", st->root, hex, why);
		store_forget(st, hash); /* S2, S10 */
		return -EIO;
	}
	if (rc != 0)
		return rc; /* S12: no verdict */
	*len = info.plain_len;
	return 0;
}

/* ---- whole-chunk loads (the read path) ---- */

/* Checks the header and the lengths of an object image in memory. Returns
 * NULL, or a reason for the log. */
static const char *store_image_why(const uint8_t hash[HASH_LEN], const uint8_t *obj, size_t len,
				   size_t cap, struct store_object_info *info)
{
	const char *why = store_header_decode(obj, len, hash, info);
	if (!why && len != info->header_len + info->stored_len)
		why = len < info->header_len + info->stored_len ? "truncated payload"
								: "trailing bytes after the payload";
	else if (!why && info->codec == CODEC_RAW && info->stored_len != info->plain_len)
		why = "raw payload length differs from the plain length";
	else if (!why && info->plain_len > cap)
		why = "plain length larger than a chunk can be";
	return why;
}

#ifndef __NR_cachestat
#define __NR_cachestat 451 /* Linux 6.5; the same number on every architecture */
#endif

/* Object image buffers: page aligned, each its own mapping (populated at
 * once: O_DIRECT would fault its pages in one by one). Not from malloc:
 * MiB-sized buffers freed by other threads than allocated them stayed in
 * glibc's per-thread arenas, and the daemon's RSS grew to 400+ MiB. Up to
 * STORE_POOL freed mappings are kept for the next loads, so that a steady
 * read does not map, fault in and zero a fresh buffer per chunk; a kept one
 * is reused for a chunk at least half its size.
 *
 * Images of STORE_HUGE_MIN or more are whole 2 MiB pages (transparent huge
 * pages, where the kernel allows them): an O_DIRECT read into a buffer of
 * scattered 4 KiB pages is one disk segment per page, and the block layer
 * splits it into requests of at most max_segments (254 on these VMs' virtio
 * disks) pages. Reading chunk objects into 2 MiB pages was 1.7-2x faster
 * (4 threads: 1.24-1.43 GB/s with 4 KiB pages, 2.35-2.41 GB/s with 2 MiB
 * ones; docs/BENCH.md). The cost is memory: an image takes up to 2 MiB more
 * than its object, which the chunk cache counts (store_chunk_footprint). */
#define STORE_POOL 8
#define STORE_HUGE (2u << 20)
#define STORE_HUGE_MIN (512u << 10)
static struct {
	pthread_mutex_t lock;
	void *buf[STORE_POOL];
	size_t cap[STORE_POOL];
	int n;
} store_pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static size_t store_image_cap(size_t len)
{
	size_t need = store_align_up(len ? len : 1);
	return need < STORE_HUGE_MIN ? need : (need + STORE_HUGE - 1) & ~(size_t)(STORE_HUGE - 1);
}

/* A new populated mapping of cap bytes (store_image_cap), 2 MiB aligned and
 * backed by huge pages if it is a multiple of them and the kernel agrees. */
static void *store_image_map(size_t cap)
{
	if (cap % STORE_HUGE != 0) {
		void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	uint8_t *raw = mmap(NULL, cap + STORE_HUGE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	uint8_t *p = (uint8_t *)(((uintptr_t)raw + STORE_HUGE - 1) & ~(uintptr_t)(STORE_HUGE - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	munmap(p + cap, (size_t)(raw + STORE_HUGE - p));
	madvise(p, cap, MADV_HUGEPAGE); /* advice: 4 KiB pages if refused */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
	if (madvise(p, cap, MADV_POPULATE_WRITE) != 0)
		for (size_t off = 0; off < cap; off += 4096)
			p[off] = 0;
	return p;
}

static int store_image_alloc(struct store_chunk *c, size_t len)
{
	size_t need = store_image_cap(len);
	int best = -1;
	pthread_mutex_lock(&store_pool.lock);
	for (int i = 0; i < store_pool.n; i++)
		if (store_pool.cap[i] >= need && store_pool.cap[i] / 2 <= need &&
		    (best < 0 || store_pool.cap[i] < store_pool.cap[best]))
			best = i;
	if (best >= 0) {
		c->image = store_pool.buf[best];
		c->image_cap = store_pool.cap[best];
		store_pool.n--;
		store_pool.buf[best] = store_pool.buf[store_pool.n];
		store_pool.cap[best] = store_pool.cap[store_pool.n];
	}
	pthread_mutex_unlock(&store_pool.lock);
	if (best >= 0)
		return 0;
	c->image_cap = need;
	c->image = store_image_map(need);
	return c->image ? 0 : -ENOMEM;
}

size_t store_chunk_footprint(const struct store_chunk *c)
{
	return (c->image ? c->image_cap : 0) + (c->decoded ? c->len : 0);
}

static void store_fetch_release(struct store_chunk *c);

static void store_image_release(struct store_chunk *c)
{
	if (!c->image)
		return;
	if (c->image_map) { /* S9: back to the fetch pool */
		store_fetch_release(c);
		return;
	}
	pthread_mutex_lock(&store_pool.lock);
	bool kept = store_pool.n < STORE_POOL;
	if (kept) {
		store_pool.buf[store_pool.n] = c->image;
		store_pool.cap[store_pool.n] = c->image_cap;
		store_pool.n++;
	}
	pthread_mutex_unlock(&store_pool.lock);
	if (!kept)
		munmap(c->image, c->image_cap);
	c->image = NULL;
}

/* Whether [0, len) of the object is all in the page cache: then a buffered
 * read is a copy from memory. True when the kernel cannot say (no cachestat):
 * buffered reads, as before. */
static bool store_pages_cached(int fd, size_t len)
{
	struct { uint64_t off, len; } range = { 0, len };
	struct { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recent; } cs;
	if (syscall(__NR_cachestat, fd, &range, &cs, 0) != 0)
		return true;
	long page = sysconf(_SC_PAGESIZE);
	return cs.nr_cache * (uint64_t)page >= len;
}

/* Reads [0, len) of fd into buf (STORE_IO_ALIGN-aligned, capacity
 * store_align_up(len)) with O_DIRECT: the object's pages are not cached
 * beside the decoded chunk and the FUSE file's pages. Where the filesystem
 * refuses O_DIRECT, or a read ends short of the file, the rest is read
 * buffered. */
static int store_read_direct(int fd, uint8_t *buf, size_t len)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) != 0)
		return store_pread_all(fd, buf, len, 0);
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, buf + done, store_align_up(len - done), (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (done + (size_t)n < len && n % STORE_IO_ALIGN != 0))
			break;
		done += (size_t)n;
	}
	if (done >= len)
		return 0;
	fcntl(fd, F_SETFL, fl);
	return store_pread_all(fd, buf + done, len - done, (off_t)done);
}

/* Checks an image read into c->image (as how says) and sets c->plain and
 * c->len: into the image for a raw payload, into c->decoded for a compressed
 * one; the image is kept. Returns 0, -ENOMEM, or -EIO with *why set. */
static int store_chunk_check(const uint8_t hash[HASH_LEN], size_t len, size_t cap,
			     enum store_check how, struct store_chunk *c, const char **why)
{
	struct store_object_info info;
	const uint8_t *img = c->image;
	*why = store_image_why(hash, img, len, cap, &info);
	bool raw = !*why && info.codec == CODEC_RAW;
	if (raw) /* S4, S2 in one pass */
		*why = store_raw_why(how, &info, img + info.header_len, hash);
	else if (!*why)
		*why = store_payload_why(how, &info, img + info.header_len); /* S4 */
	if (*why)
		return -EIO;
	if (raw) {
		c->plain = img + info.header_len;
	} else {
		c->decoded = malloc(info.plain_len ? info.plain_len : 1);
		if (!c->decoded)
			return -ENOMEM;
		int rc = store_decode(&info, img + info.header_len, c->decoded, why);
		if (rc != 0)
			return rc; /* -EIO with *why, or S12's -ENOMEM without */
		c->plain = c->decoded;
	}
	uint8_t got[HASH_LEN];
	if (!raw && store_needs_sha(how, &info)) {
		hash_sha256(c->plain, info.plain_len, got);
		if (memcmp(got, hash, HASH_LEN) != 0) {
			*why = "bytes do not match their hash";
			return -EIO;
		}
	}
	c->len = info.plain_len;
	return 0;
}

/* store_chunk_check, then the image of a decoded chunk goes: the plain bytes
 * are all that is used. */
static int store_chunk_verify(const uint8_t hash[HASH_LEN], size_t len, size_t cap,
			      enum store_check how, struct store_chunk *c, const char **why)
{
	int rc = store_chunk_check(hash, len, cap, how, c, why);
	if (rc == 0 && c->decoded)
		store_image_release(c);
	return rc;
}

/* S7: store_load of a row: its image copied into out->image, then checked. */
static int store_small_load(struct store *st, const uint8_t hash[HASH_LEN], size_t cap,
			    struct store_chunk *out)
{
	size_t len = 0;
	int rc = st->small ? storesmall_len(st->small, hash, &len) : -ENOENT;
	if (rc != 0)
		return rc;
	const char *why = NULL;
	if (len > STORE_HEADER_LEN + codec_bound(cap))
		why = "object larger than a chunk can be"; /* before allocating its size */
	else if ((rc = store_image_alloc(out, len)) == 0 &&
		 (rc = storesmall_get(st->small, hash, out->image, out->image_cap, &len)) == 0)
		rc = store_chunk_verify(hash, len, cap, store_local_check(st), out, &why);
	if (rc == -EFBIG)
		why = "replaced by a longer image";
	if (why)
		rc = store_small_corrupt(st, hash, why);
	if (rc != 0)
		store_chunk_free(out);
	return rc;
}

int store_load(struct store *st, const uint8_t hash[HASH_LEN], size_t cap,
	       struct store_chunk *out)
{
	char rel[128];
	memset(out, 0, sizeof(*out));
	store_rel_path(hash, rel, sizeof(rel));
	int fd = store_open_read(st, rel);
	if (fd < 0 && errno == ENOENT)
		return store_small_load(st, hash, cap, out); /* S7 */
	if (fd < 0) /* -ENOENT: not in this store (the caller decides if that is an error) */
		return -errno;
	const char *why = NULL;
	int rc = 0;
	struct stat sb;
	if (fstat(fd, &sb) != 0)
		why = "cannot stat";
	else if ((uint64_t)sb.st_size > STORE_HEADER_LEN + codec_bound(cap))
		why = "object larger than a chunk can be"; /* before allocating its size */
	size_t len = why ? 0 : (size_t)sb.st_size;
	if (!why && (rc = store_image_alloc(out, len)) != 0)
		out->image = NULL;
	if (!why && rc == 0) {
		int io = store_pages_cached(fd, len) ? store_pread_all(fd, out->image, len, 0)
						     : store_read_direct(fd, out->image, len);
		if (io != 0)
			why = io == -ENODATA ? "truncated payload" : strerror(-io);
		else
			rc = store_chunk_verify(hash, len, cap, store_local_check(st), out, &why);
	}
	close(fd);
	if (why) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(hash, hex);
		log_error("store %s: chunk %s is corrupt: %s", st->root, hex, why);
		store_forget(st, hash); /* S2, S10 */
		rc = -EIO;
	}
	if (rc != 0)
		store_chunk_free(out);
	return rc;
}

void store_chunk_free(struct store_chunk *c)
{
	store_image_release(c);
	free(c->decoded);
	memset(c, 0, sizeof(*c));
}

/* ---- whole object images (the write-back cache's uploads and fetches) ---- */

/* The checks of store_object_check and store_object_verify, as how says
 * (S2, S4). With keep_plain false a raw payload is checked where it lies
 * (CRC and SHA-256 in one pass, store_raw_why) instead of being copied into
 * plain first, and a payload whose CRC settles it is not decoded at all. */
static int store_object_check_into(const uint8_t hash[HASH_LEN], const void *obj, size_t len,
				   void *plain, size_t cap, bool keep_plain, enum store_check how,
				   size_t *plain_len, const char **why)
{
	struct store_object_info info;
	const uint8_t *o = obj;
	const void *bytes = plain;
	*why = store_image_why(hash, o, len, cap, &info);
	bool raw_here = !*why && info.codec == CODEC_RAW && !keep_plain;
	if (raw_here) /* S4, S2 in one pass, where the payload lies */
		*why = store_raw_why(how, &info, o + info.header_len, hash);
	else if (!*why)
		*why = store_payload_why(how, &info, o + info.header_len);
	int rc = 0;
	if (*why || raw_here || (!keep_plain && !store_needs_sha(how, &info)))
		bytes = NULL;
	else if ((rc = store_decode(&info, o + info.header_len, plain, why)) != 0 && !*why)
		return rc; /* S12: no verdict */
	if (!*why && bytes && store_needs_sha(how, &info)) {
		uint8_t got[HASH_LEN];
		hash_sha256(bytes, info.plain_len, got);
		if (memcmp(got, hash, HASH_LEN) != 0)
			*why = "bytes do not match their hash";
	}
	if (*why)
		return -EIO;
	*plain_len = info.plain_len;
	return 0;
}

/* Reads len bytes at off from the page cache only: false if any would need
 * the disk (or the filesystem cannot say). */
static bool store_pread_cached(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	while (done < len) {
		struct iovec v = { (char *)buf + done, len - done };
		ssize_t n = preadv2(fd, &v, 1, off + (off_t)done, RWF_NOWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

/* Reads [0, len) of fd into buf (capacity cap): with O_DIRECT when its pages
 * are not cached (S3 wrote it past the page cache, or it was evicted) and buf
 * allows, so that an upload does not fill the page cache either. */
static int store_read_whole(int fd, void *buf, size_t cap, size_t len)
{
	if ((uintptr_t)buf % STORE_IO_ALIGN == 0 && cap >= store_align_up(len) &&
	    !store_pages_cached(fd, len))
		return store_read_direct(fd, buf, len);
	return store_pread_all(fd, buf, len, 0);
}

/* S7: store_read_image of a row (never vouched for by S2): its header and
 * lengths are checked, as store_open_object checks a file's. */
static int store_small_read(struct store *st, const uint8_t hash[HASH_LEN], void *buf,
			    size_t cap, size_t *len)
{
	size_t n = 0;
	int rc = st->small ? storesmall_get(st->small, hash, buf, cap, &n) : -ENOENT;
	if (rc != 0)
		return rc;
	struct store_object_info info;
	const char *why = store_image_why(hash, buf, n, SIZE_MAX, &info);
	if (why)
		return store_small_corrupt(st, hash, why);
	*len = n;
	return 0;
}

/* Reads a whole object image into buf. hashed NULL: a plain read; else
 * *hashed says whether the bytes are known hashed at write time (S2). */
static int store_read_image(struct store *st, const uint8_t hash[HASH_LEN], void *buf,
			    size_t cap, size_t *len, bool *hashed)
{
	if (hashed)
		*hashed = false;
	struct store_object_info info;
	int fd;
	int rc = store_open_object(st, hash, &info, &fd, false);
	if (rc == -ENOENT)
		return store_small_read(st, hash, buf, cap, len); /* S7 */
	if (rc != 0)
		return rc;
	size_t total = info.header_len + info.stored_len;
	if (total > cap) {
		rc = -EFBIG;
	} else if (hashed && store_fresh_has_fd(st, hash, fd) &&
		   store_pread_cached(fd, buf, total, 0)) {
		*hashed = true; /* S2 */
	} else if ((rc = store_read_whole(fd, buf, cap, total)) != 0) {
		rc = -EIO;
	}
	close(fd);
	if (rc == 0)
		*len = total;
	return rc;
}

int store_read_object(struct store *st, const uint8_t hash[HASH_LEN], void *buf, size_t cap,
		      size_t *len)
{
	return store_read_image(st, hash, buf, cap, len, NULL);
}

int store_read_upload(struct store *st, const uint8_t hash[HASH_LEN], void *buf, size_t cap,
		      size_t *len, bool *hashed)
{
	return store_read_image(st, hash, buf, cap, len, hashed);
}

int store_check_unread(struct store *st, const uint8_t hash[HASH_LEN], size_t *len)
{
	char rel[128];
	store_rel_path(hash, rel, sizeof(rel));
	int fd = store_open_read(st, rel);
	struct stat sb;
	size_t n;
	if (fd < 0 && errno == ENOENT && st->small && storesmall_len(st->small, hash, &n) == 0)
		return -EAGAIN; /* S7: a row is read and verified */
	if (fd < 0)
		return -errno;
	/* S2, for a link: no byte moves. The file is the one written (inode,
	 * mtime, size): its header is the header written, not read back */
	bool vouched = fstat(fd, &sb) == 0 && store_fresh_has(st, hash, &sb);
	close(fd);
	if (vouched) {
		*len = (size_t)sb.st_size;
		return 0;
	}
	struct store_object_info info;
	int rc = store_open_object(st, hash, &info, &fd, true); /* damaged is -EIO */
	if (rc != 0)
		return rc;
	close(fd);
	return -EAGAIN;
}

int store_object_at(struct store *st, const uint8_t hash[HASH_LEN], char *rel, size_t size)
{
	store_rel_path(hash, rel, size);
	struct stat sb;
	size_t n;
	if (st->small && fstatat(st->root_fd, rel, &sb, AT_SYMLINK_NOFOLLOW) != 0 &&
	    errno == ENOENT && storesmall_len(st->small, hash, &n) == 0)
		return -EXDEV; /* S7: a row has no file to link */
	return st->root_fd;
}

int store_object_check(const uint8_t hash[HASH_LEN], const void *obj, size_t len, void *plain,
		       size_t cap, size_t *plain_len, const char **why)
{
	return store_object_check_into(hash, obj, len, plain, cap, true, STORE_CHECK_SHA, plain_len,
				       why);
}

int store_object_verify(const uint8_t hash[HASH_LEN], const void *obj, size_t len,
			void *scratch, size_t cap, enum store_check how, size_t *plain_len,
			const char **why)
{
	return store_object_check_into(hash, obj, len, scratch, cap, false, how, plain_len, why);
}

size_t store_object_header_len(const void *obj)
{
	return get_le32((const uint8_t *)obj + 12);
}

/* ---- fetched images (the cache's fetch path, S9) ---- */

/* Kept fetch buffers; more released at once are unmapped. */
#define STORE_FETCH_POOL 8
/* A reused buffer keeps up to this many resident bytes beyond what a fetch
 * needs, rather than give them back and fault them in again for a larger
 * chunk soon after (S9: counted in its image_cap all the same). */
#define STORE_FETCH_SLACK (256u << 10)

static struct {
	pthread_mutex_t lock;
	void *buf[STORE_FETCH_POOL];
	size_t map[STORE_FETCH_POOL], held[STORE_FETCH_POOL];
	int n;
} store_fetch_pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The kept buffer of map bytes that fits need best: the fewest resident
 * bytes at least need, else the most; -1 if none. With the lock held. */
static int store_fetch_pick_locked(size_t need, size_t map)
{
	int best = -1;
	for (int i = 0; i < store_fetch_pool.n; i++) {
		if (store_fetch_pool.map[i] != map)
			continue;
		size_t h = store_fetch_pool.held[i];
		if (best < 0) {
			best = i;
			continue;
		}
		size_t b = store_fetch_pool.held[best];
		if (h >= need ? b < need || h < b : b < need && h > b)
			best = i;
	}
	return best;
}

int store_fetch_image(struct store_chunk *c, size_t need, size_t map_cap)
{
	memset(c, 0, sizeof(*c));
	size_t map = store_align_up(map_cap ? map_cap : 1);
	need = store_align_up(need < map ? need : map);
	pthread_mutex_lock(&store_fetch_pool.lock);
	int i = store_fetch_pick_locked(need, map);
	if (i >= 0) {
		c->image = store_fetch_pool.buf[i];
		c->image_cap = store_fetch_pool.held[i];
		int last = --store_fetch_pool.n;
		store_fetch_pool.buf[i] = store_fetch_pool.buf[last];
		store_fetch_pool.map[i] = store_fetch_pool.map[last];
		store_fetch_pool.held[i] = store_fetch_pool.held[last];
	}
	pthread_mutex_unlock(&store_fetch_pool.lock);
	if (!c->image) {
		/* 4 KiB pages, faulted in by the fetches that use them: pages
		 * beyond a chunk can be given back one by one (S9) */
		void *p = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -ENOMEM;
		madvise(p, map, MADV_NOHUGEPAGE);
		c->image = p;
		c->image_cap = 0;
	}
	c->image_map = map;
	uint8_t *img = c->image;
	if (c->image_cap > need + STORE_FETCH_SLACK) { /* S9: more than this chunk needs */
		madvise(img + need, c->image_cap - need, MADV_DONTNEED);
		c->image_cap = need;
	} else if (c->image_cap < need && need < map) {
		/* a known size: its pages faulted in at once, not one fault each */
		if (madvise(img + c->image_cap, need - c->image_cap, MADV_POPULATE_WRITE) == 0)
			c->image_cap = need;
	}
	return 0;
}

void store_fetch_filled(struct store_chunk *c, size_t len)
{
	assert(c->image && c->image_map);
	size_t touched = store_align_up(len < c->image_map ? len : c->image_map);
	if (touched > c->image_cap)
		c->image_cap = touched;
}

int store_fetch_check(const uint8_t hash[HASH_LEN], struct store_chunk *c, size_t len,
		      size_t cap, const char **why)
{
	assert(c->image && c->image_map && !c->decoded && len <= c->image_map);
	return store_chunk_check(hash, len, cap, STORE_CHECK_SHA, c, why); /* invariant 2 */
}

int store_put_fetched(struct store *st, const uint8_t hash[HASH_LEN], const void *obj,
		      size_t len)
{
	struct iovec iov[1] = { { (void *)obj, len } };
	int rc;
	if (store_small_fits(st, iov, 1)) {
		rc = storesmall_put(st->small, hash, iov, 1); /* S7 */
	} else {
		bool direct = len >= STORE_DIRECT_MIN && atomic_load(&st->direct_writes) &&
			      ((uintptr_t)obj & (STORE_IO_ALIGN - 1)) == 0;
		rc = store_write_object(st, hash, iov, 1, direct ? STORE_DIRECT_IO : 0, NULL);
	}
	if (rc == 0)
		store_checked_add(st, hash); /* S10: SHA-256-checked by store_fetch_check */
	return rc;
}

int store_verify_hit(struct store *st, const uint8_t hash[HASH_LEN], size_t plain_len)
{
	if (store_checked_has(st, hash)) /* S10 */
		return 0;
	struct store_chunk c;
	int rc = store_load(st, hash, plain_len, &c); /* -EIO logged, and forgotten */
	if (rc != 0)
		return rc;
	size_t got = c.len;
	store_chunk_free(&c);
	if (got != plain_len) {
		char hex[HASH_HEX_LEN + 1];
		hash_to_hex(hash, hex);
		log_error("store %s: chunk %s is corrupt: %zu plain bytes, its row says %zu",
			  st->root, hex, got, plain_len);
		store_forget(st, hash);
		return -EIO;
	}
	store_checked_add(st, hash);
	return 0;
}

void store_fetch_done(struct store_chunk *c)
{
	if (c->decoded)
		store_image_release(c);
}

/* Into the pool; a full pool gives up a buffer of another size (another
 * cache's object_cap, which no fetch here would pick) or, failing that, this
 * one is unmapped. */
static void store_fetch_release(struct store_chunk *c)
{
	assert(c->image_cap <= c->image_map);
	void *drop = NULL;
	size_t drop_map = 0;
	pthread_mutex_lock(&store_fetch_pool.lock);
	int i = -1;
	if (store_fetch_pool.n < STORE_FETCH_POOL) {
		i = store_fetch_pool.n++;
	} else {
		for (int j = 0; i < 0 && j < store_fetch_pool.n; j++)
			if (store_fetch_pool.map[j] != c->image_map)
				i = j;
		if (i >= 0) {
			drop = store_fetch_pool.buf[i];
			drop_map = store_fetch_pool.map[i];
		}
	}
	if (i >= 0) {
		store_fetch_pool.buf[i] = c->image;
		store_fetch_pool.map[i] = c->image_map;
		store_fetch_pool.held[i] = c->image_cap;
	} else {
		drop = c->image;
		drop_map = c->image_map;
	}
	pthread_mutex_unlock(&store_fetch_pool.lock);
	if (drop)
		munmap(drop, drop_map);
	c->image = NULL;
	c->image_cap = 0;
	c->image_map = 0;
}

/* S8: removes the object's shard chunks/ab/cd, then chunks/ab, if empty;
 * the caller holds the shard's lock, so no put is between its mkdir and its
 * rename. ENOTEMPTY (another object) leaves them; nothing here is an error. */
static void store_prune_shard_locked(const struct store *st, char rel[static 13])
{
	rel[12] = '\0'; /* "chunks/ab/cd" */
	if (store_unlinkat(st, rel, AT_REMOVEDIR) != 0)
		return;
	rel[9] = '\0'; /* "chunks/ab" */
	(void)store_unlinkat(st, rel, AT_REMOVEDIR);
}

int store_remove(struct store *st, const uint8_t hash[HASH_LEN])
{
	char rel[128];
	store_rel_path(hash, rel, sizeof(rel));
	store_forget(st, hash); /* S2, S10: a later object of this name is written anew */
	int rc = store_unlinkat(st, rel, 0);
	if (rc == 0) {
		pthread_mutex_t *lock = store_shard_lock(st, hash);
		pthread_mutex_lock(lock);
		store_prune_shard_locked(st, rel);
		pthread_mutex_unlock(lock);
	}
	if (rc != 0 && rc != -ENOENT) {
		log_error("store %s: remove %s: %s", st->root, rel, strerror(-rc));
		return rc;
	}
	return st->small ? storesmall_remove(st->small, hash) : 0; /* S7: a row too */
}
