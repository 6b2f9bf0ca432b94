/* store — content-addressed chunk objects in a directory.
 *
 * Layout under the root:   chunks/ab/cd/abcd…(64 hex)   one immutable object per chunk
 *                          tmp/                          objects being written
 *                          small.db                      small objects as rows, in a
 *                                                        local cache only (S7 in store.c)
 *
 * An object is self-describing: a 72-byte little-endian header, then the
 * payload (docs/FORMAT.md):
 *   0  magic "CKPTCHNK"      8  u16 format version (2)   10 u8 codec   11 u8 0
 *   12 u32 header length (72) 16 u64 plain length         24 u64 payload length
 *   32 SHA-256 of the plain bytes (32 bytes)
 *   64 u32 CRC-32C of the payload                         68 u32 0
 * (format 1: the same without bytes 64-71; still read.)
 *
 * Invariants:
 *  1. An object's name is the SHA-256 of its plain bytes, and it is never
 *     modified: it is written under tmp/ and renamed into place whole.
 *  2. store_get and store_load return bytes only after checking them (S4 in
 *     store.c: by the CRC-32C, or SHA-256 as store_set_local_check says): a
 *     missing, truncated or corrupt object is -EIO and a log line naming the
 *     chunk and the reason.
 *  3. Writing an object that already exists is harmless (same name, same bytes),
 *     and replaces a damaged one whole (write-new + rename: the only copy of
 *     anything is never unlinked first).
 *  4. store_verify_hit vouches for an object only if this process wrote it,
 *     fetched and checked it, or read and checked it in full since the store
 *     was opened, and no later check found it damaged nor store_remove
 *     removed it (S10 in store.c). */
#ifndef CKPTFS_STORE_H
#define CKPTFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "hash.h"

/* Chunk objects (docs/FORMAT.md): version 2, written by this version, has a
 * 72-byte header ending in a CRC-32C of the payload; version 1 (64 bytes, no
 * CRC) is still read. */
#define STORE_HEADER_LEN 72 /* the header this version writes */
#define STORE_HEADER_LEN_V1 64
#define STORE_FORMAT_VERSION 2 /* the object header's version */
/* The store's format, in BACKING's ckptfs.store marker (docs/FORMAT.md): 3
 * since objects may hold the blosc codecs (codec.h), which a daemon of
 * format 2 cannot decode; it refuses the store instead. 4 once a mount with
 * -o codec=zstd may have written codec 4 (CODEC_ZSTD_PLANES), which a daemon
 * of format 3 cannot decode; a store only ever written with LZ4 stays 3, so
 * that older daemons still mount it. 5 once a mount with -o packs=on may
 * have put pack objects (packs/, fs/lib/pack.h), which a daemon of format 4
 * cannot read. STORE_MARKER_VERSION is the newest this version reads. */
#define STORE_MARKER_VERSION 5
#define STORE_MARKER_VERSION_PACKS 5
#define STORE_MARKER_VERSION_ZSTD 4
#define STORE_MARKER_VERSION_LZ4 3
#define STORE_MAGIC "CKPTCHNK"

struct store;

struct store_object_info {
	uint8_t codec;
	uint64_t plain_len;
	uint64_t stored_len; /* payload bytes, header excluded */
	uint32_t header_len; /* STORE_HEADER_LEN, or STORE_HEADER_LEN_V1 */
	bool has_crc;        /* version 2: crc is the payload's CRC-32C */
	uint32_t crc;
};

/* How an object read back from the local store is checked (S4 in store.c):
 * by its CRC-32C when it has one (the default), or by SHA-256 of every byte.
 * Objects from BACKING are always checked by SHA-256 (store_object_check). */
enum store_check {
	STORE_CHECK_HEADER, /* S2 vouches for the bytes: header and lengths only */
	STORE_CHECK_CRC,    /* CRC-32C of the payload; SHA-256 for a v1 object */
	STORE_CHECK_SHA,    /* SHA-256 of the plain bytes (and the CRC, if any) */
};

/* Opens the store at root (creating chunks/ and tmp/); clears stale tmp files
 * of this host. */
int store_open(const char *root, struct store **out);
void store_close(struct store *st);
const char *store_root(const struct store *st);

/* Writes the object for plain bytes whose hash is given (the caller hashed
 * them). With STORE_SYNC the object and its directory are fsync'd before the
 * return; otherwise write-back is started (sync_file_range) and store_sync
 * finishes it later. */
#define STORE_SYNC 1
int store_put(struct store *st, const uint8_t hash[HASH_LEN], const void *plain, size_t len,
	      int flags, struct store_object_info *info);

/* store_put for plain bytes that sit at img + STORE_HEADER_LEN in a buffer
 * whose start img is aligned to STORE_IO_ALIGN (capacity STORE_HEADER_LEN +
 * len at least): a raw object is written with O_DIRECT straight from img,
 * its header put into img[0..STORE_HEADER_LEN) (S3 without the copy into an
 * image buffer). The same object as store_put writes. plain_crc: NULL, or
 * the CRC-32C of the plain bytes, which the caller computed from those very
 * bytes; a raw object then carries it without another pass over them (S4,
 * S11). It must be right: a wrong one makes a corrupt object. */
int store_put_headroom(struct store *st, const uint8_t hash[HASH_LEN], uint8_t *img, size_t len,
		       const uint32_t *plain_crc, int flags, struct store_object_info *info);

/* Objects of this many plain bytes or more are written with O_DIRECT when
 * direct writes are on (S3): the size from which store_put_headroom writes
 * straight from the caller's buffer and may use its plain_crc. */
#define STORE_DIRECT_MIN (256 * 1024)

/* O_DIRECT alignment of buffers, offsets and lengths (S3 in store.c): a
 * buffer the store may read an object into with O_DIRECT is aligned to it and
 * a multiple of it long. */
#define STORE_IO_ALIGN 4096

/* S3 in store.c: objects of 256 KiB or more bypass the page cache (O_DIRECT)
 * when on. Off at open; the daemon turns it on. */
void store_set_direct_writes(struct store *st, bool on);

/* S7 in store.c: objects whose whole image is at most max bytes are put as
 * rows of ROOT/small.db (storesmall.h) instead of files; 0 puts every new one
 * in a file again (rows already there are still read). Off at open; the
 * daemon turns it on for its cache, never for a store on BACKING. Creates
 * small.db the first time. Call before the store is shared between threads. */
#define STORE_SMALL_MAX (64 * 1024)
int store_set_small(struct store *st, size_t max);
/* storesmall.h T8: small.db's puts join a batch from now on, which
 * store_small_commit commits. Only where every commit of a catalog that may
 * name them runs store_small_commit first (fs/main.c: cat_commit_first on the
 * SQLite catalog). After store_set_small. */
void store_small_batch(struct store *st);
/* storesmall.h T8, T9: commits small.db's open batch; 0 without small.db.
 * arg is the store (a cat_commit_first callback). */
int store_small_commit(void *st);

/* What new objects are compressed with (-o codec=); CODEC_FAMILY_LZ4 at open. */
void store_set_codec(struct store *st, enum codec_family family);

/* Makes an object written earlier durable (fdatasync object + directory). */
int store_sync(struct store *st, const uint8_t hash[HASH_LEN]);

/* Makes every object written so far durable (syncfs of the store's filesystem). */
int store_syncfs(struct store *st);

/* Reads, decodes and verifies an object into plain (capacity cap). Sets *len.
 * -ENOENT (not logged) if the object is not in this store; -EIO (logged) if
 * it is corrupt; -ENOMEM (not logged, the object kept: S12) if memory to
 * decode it ran out. */
int store_get(struct store *st, const uint8_t hash[HASH_LEN], void *plain, size_t cap,
	      size_t *len);

/* A chunk loaded by store_load: the object image in `image` (its own
 * mapping of image_cap bytes), and the verified plain bytes at `plain` —
 * inside the image for a raw chunk (no copy), in `decoded` (malloc'd) for a
 * compressed one. store_chunk_free releases both. */
struct store_chunk {
	void *image;
	size_t image_cap;
	void *decoded;
	const uint8_t *plain;
	size_t len;
	size_t image_map; /* a fetched image (store_fetch_image): its whole mapping,
			   * of which image_cap bytes are in memory; 0 otherwise */
};

/* Like store_get, for the read path: reads the whole object with one read,
 * from the page cache when all of it is there, else with O_DIRECT (the chunk
 * is about to be cached by its reader: its object pages are not kept twice);
 * verifies it (invariant 2) and hands out a buffer it allocated. Release with
 * store_chunk_free. -ENOENT (not logged) if absent, -EIO (logged) if corrupt,
 * -ENOMEM (not logged, kept: S12) if memory ran out. */
int store_load(struct store *st, const uint8_t hash[HASH_LEN], size_t cap,
	       struct store_chunk *out);
void store_chunk_free(struct store_chunk *c);

/* The memory a loaded chunk holds (its image mapping and decoded buffer). */
size_t store_chunk_footprint(const struct store_chunk *c);

/* Reads the whole object image (header and payload) after checking its
 * header and length; -ENOENT if absent, -EIO if malformed, -EFBIG if larger
 * than cap. */
int store_read_object(struct store *st, const uint8_t hash[HASH_LEN], void *buf, size_t cap,
		      size_t *len);

/* Checks an object image named hash (from BACKING, or before uploading it):
 * header, lengths, decodes it into plain (capacity cap) and compares the
 * hash. 0 with *plain_len set, or -EIO with *why saying what is wrong; any
 * other error (-ENOMEM decoding it) is no verdict and leaves *why (S12). */
int store_object_check(const uint8_t hash[HASH_LEN], const void *obj, size_t len, void *plain,
		       size_t cap, size_t *plain_len, const char **why);

/* Checks of an object read back from the local store, when the caller only
 * needs the verdict: as `how` says (STORE_CHECK_HEADER when store_read_upload
 * said hashed; else store_local_check). scratch (capacity cap) is used for
 * decoding, and its contents are unspecified afterwards (a raw payload is
 * hashed in place, without a copy). */
int store_object_verify(const uint8_t hash[HASH_LEN], const void *obj, size_t len,
			void *scratch, size_t cap, enum store_check how, size_t *plain_len,
			const char **why);

/* How reads (store_load, store_get) and uploads check objects of this store:
 * STORE_CHECK_CRC (the default) or STORE_CHECK_SHA (-o verify=sha256). */
void store_set_local_check(struct store *st, enum store_check how);
enum store_check store_local_check(struct store *st);

/* store_read_object for an upload: *hashed says the bytes read are known to
 * be those hashed when this process wrote the object (invariant S2 in
 * store.c), so they need not be hashed again. */
int store_read_upload(struct store *st, const uint8_t hash[HASH_LEN], void *buf, size_t cap,
		      size_t *len, bool *hashed);

/* Before an upload by hard link (backing_put_link): 0 when S2 vouches for
 * the object's bytes without reading them — this process wrote it from the
 * bytes it hashed and its file is unchanged (inode, mtime and size), so its
 * header is the header written: no byte is read, and none moves in a link
 * (*len: its size). Otherwise its header is read and checked: -EIO when
 * damaged, else -EAGAIN: it must be read and verified in full
 * (store_read_upload + store_object_verify). -ENOENT when there is none. */
int store_check_unread(struct store *st, const uint8_t hash[HASH_LEN], size_t *len);

/* The directory fd and the path under it of the object named hash, for
 * backing_put_link; rel has room for 128 bytes. -EXDEV when the object is a
 * row of small.db (S7), which has no file to link: copy its bytes. */
int store_object_at(struct store *st, const uint8_t hash[HASH_LEN], char *rel, size_t size);

/* Before a writer drops the bytes of a dedup hit (writer.h invariant 6):
 * whether the object of hash (plain_len plain bytes) is in this store and
 * whole. 0 at once for an object this process wrote or checked (S10 in
 * store.c); any other is read and checked as store_load does, once, the
 * verdict remembered. -ENOENT (not logged) if absent, -EIO (logged, naming
 * the chunk) if damaged, or another negative errno. */
int store_verify_hit(struct store *st, const uint8_t hash[HASH_LEN], size_t plain_len);

/* The object is on BACKING: it leaves the fresh set (S2). */
void store_uploaded(struct store *st, const uint8_t hash[HASH_LEN]);

/* ---- the cache's fetches from BACKING (S9 in store.c) ----
 *
 * A fetch reads an object image into store_fetch_image's buffer, then
 * store_fetch_filled, store_fetch_check (SHA-256: nothing is written or
 * handed out before), store_put_fetched (the cache copy) and store_fetch_done;
 * c is then the chunk store_load would hand out. store_chunk_free releases it
 * at any step. */

/* A page-aligned image buffer for a fetch: c->image, map_cap bytes (the
 * largest object accepted; the same for every call), from a pool of buffers
 * earlier fetches faulted in. need: the image's size if known (a chunk of
 * known plain length: STORE_HEADER_LEN + codec_bound(len)), else map_cap;
 * pages of a reused buffer beyond it are given back. -ENOMEM. */
int store_fetch_image(struct store_chunk *c, size_t need, size_t map_cap);

/* After a read of up to len bytes into c->image (map_cap on a failed read:
 * it may have written anywhere): those pages are in memory (image_cap). */
void store_fetch_filled(struct store_chunk *c, size_t len);

/* Checks the fetched image (len bytes) as store_object_check does (header,
 * lengths, CRC, SHA-256 of the plain bytes) and sets c->plain and c->len:
 * inside the image for a raw payload, in c->decoded for a compressed one.
 * 0, -ENOMEM, or -EIO with *why. The image stays for store_put_fetched. */
int store_fetch_check(const uint8_t hash[HASH_LEN], struct store_chunk *c, size_t len,
		      size_t cap, const char **why);

/* Writes an object image that passed store_fetch_check (or
 * store_object_check) into the store, not fsync'd: a cache copy of an object
 * that is on BACKING. With direct writes on (S3), a large image aligned to
 * STORE_IO_ALIGN is written with O_DIRECT straight from obj, not through the
 * page cache. */
int store_put_fetched(struct store *st, const uint8_t hash[HASH_LEN], const void *obj,
		      size_t len);

/* After the copy: the image of a decoded chunk is released (its plain bytes
 * are in c->decoded); a raw chunk's plain bytes stay in it. */
void store_fetch_done(struct store_chunk *c);

/* The header length of an object image that passed store_object_check. */
size_t store_object_header_len(const void *obj);

/* "chunks/ab/cd/abcd…": where the object of hash lives under a store's root,
 * here and on BACKING. */
void store_object_relpath(const uint8_t hash[HASH_LEN], char *buf, size_t size);

/* Whether the object of hash is in this store, from its directory entry
 * alone (no byte of it is read or checked; store_load checks). Brings the
 * entry and the inode into memory, so that a load soon after needs only the
 * data off the disk. */
bool store_has(struct store *st, const uint8_t hash[HASH_LEN]);

/* Reads and checks only the header. -ENOENT if absent, -EIO if malformed. */
int store_stat(struct store *st, const uint8_t hash[HASH_LEN], struct store_object_info *info);

/* Whether the object of hash is here whole in size: its file (or small.db
 * row, S7) has a valid header naming hash, a payload of the length the
 * header gives, and plain_len plain bytes. Only the header is read, no
 * payload byte is checked (a save's objects checked at mount:
 * fs/gen.h invariant 11). 0; -ENOENT (not logged) if absent; -EIO (logged,
 * naming the chunk) if damaged or of another length. */
int store_present(struct store *st, const uint8_t hash[HASH_LEN], uint64_t plain_len);

/* Removes an object; absent is success. */
int store_remove(struct store *st, const uint8_t hash[HASH_LEN]);

/* Path of the object (for messages and tools). */
void store_object_path(const struct store *st, const uint8_t hash[HASH_LEN], char *buf,
		       size_t size);

#endif
