/* pack — the pack object: many small chunk objects stored as ONE file on
 * BACKING, with an index (issue 20; the plan, and what no daemon does yet:
 * docs/PACKS-PLAN.md; the format: docs/FORMAT.md "Pack object").
 * This module is the format alone: a builder that makes a pack's bytes and
 * its name from member images, and a reader that validates a pack (all of
 * it, or only its tail: trailer and index) and hands out where a member is
 * and whether its image is whole. It does no I/O of its own (pack_read_tail
 * reads through a function of the caller's).
 *
 * Layout (all integers little-endian):
 *
 *   header   32 bytes   0 magic "CKPTPACK"   8 u16 version (1)   10 u16 0
 *                       12 u32 header length (32)   16 u32 member count n
 *                       20 u32 0   24 u32 0   28 u32 CRC-32C of bytes 0-27
 *   members  the n member images back to back, in index order, from byte 32:
 *            each byte for byte a loose chunk object (store.h: header and
 *            payload, chunks/ab/cd/<hex> on BACKING would hold the same)
 *   index    n entries of 48 bytes, strictly ascending by hash:
 *                       0 hash (32)   32 u64 image offset   40 u32 image length
 *                       44 u32 CRC-32C of the image
 *   trailer  40 bytes, the last of the pack:
 *                       0 u64 index offset   8 u64 pack length   16 u32 n
 *                       20 u32 CRC-32C of the index   24 u16 version (1)   26 u16 0
 *                       28 u32 CRC-32C of bytes 0-27   32 magic "CKPTPEND"
 *
 * Name: the SHA-256 of every byte of the pack, as 64 lower-case hex digits;
 * path on BACKING "packs/ab/<hex>.ckp" (ab: its first two digits).
 *
 * Invariants:
 *  P1. A pack is named by the SHA-256 of its bytes, so a name holds one
 *      content only: putting the same name again puts the same bytes, and
 *      a pack is never rewritten with other bytes.
 *  P2. The builder is deterministic: the same set of member images gives
 *      the same bytes (members in hash order, no time, no random bytes), so
 *      a batch put again after a crash has the same name (P1).
 *  P3. Every byte of a pack is covered by exactly one check: the header's
 *      CRC, a member image's CRC (in its index entry), the index's CRC (in
 *      the trailer) or the trailer's CRC. A member image is handed out
 *      (pack_member_check) only after its entry's CRC, its framing (a chunk
 *      object's header naming the entry's hash, lengths that add up) and
 *      store_object_check (decoding and SHA-256 of the plain bytes against
 *      the hash) all hold: a damaged pack never yields a wrong member.
 *  P4. The index tiles the members: entry 0 starts at the header's end,
 *      each next entry where the previous ends, the last ends at the index;
 *      hashes strictly ascend (no duplicate, lookups by binary search).
 *      Counts, lengths and offsets are bounded (PACK_*_MAX) before any of
 *      them sizes or offsets a read (DESIGN invariant 7).
 *  P5. The trailer alone says where the index is: a reader that has only a
 *      pack's tail (a rebuild, which reads indexes only) validates trailer
 *      and index with the same rules, and learns how many tail bytes it
 *      needs when it has too few (-ENODATA, not a verdict).
 *  P6. Versions: the trailer's last 12 bytes (CRC at 28, magic at 32) and
 *      its version at 24 keep their places in every version. A pack whose
 *      CRCs hold but whose version is newer is -EPROTONOSUPPORT, not damage.
 *  P7. Every verdict on bytes is -EBADMSG with *why a static string naming
 *      the field and the reason; other errors (-ENOMEM, -ENODATA, -EINVAL
 *      for a caller's misuse, -E2BIG past a builder limit, -EEXIST for a
 *      duplicate member) are not verdicts on a pack.
 *
 * Tested by tests/unit/test_pack.c. */
#ifndef CKPTFS_PACK_H
#define CKPTFS_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

#define PACK_MAGIC "CKPTPACK"
#define PACK_END_MAGIC "CKPTPEND"
#define PACK_VERSION 1
#define PACK_HEADER_LEN 32
#define PACK_ENTRY_LEN 48
#define PACK_TRAILER_LEN 40
/* P4's bounds */
#define PACK_MEMBERS_MAX 16384u              /* entries of one pack */
#define PACK_MEMBER_MIN 64u                  /* a format-1 chunk object's header */
#define PACK_MEMBER_MAX (8u << 20)           /* past any chunk object (4 MiB + codec bound) */
#define PACK_SIZE_MAX ((uint64_t)1 << 30)    /* a whole pack */
/* "packs/ab/" + 64 hex + ".ckp" + NUL */
#define PACK_RELPATH_LEN 80
#define PACK_SUFFIX ".ckp"

/* One index entry, decoded. */
struct pack_entry {
	uint8_t hash[HASH_LEN];
	uint64_t off;  /* of the member image, from the pack's first byte */
	uint32_t len;  /* of the member image */
	uint32_t crc;  /* CRC-32C of the member image */
};

/* A validated pack, over the caller's buffer (nothing copied). */
struct pack_view {
	const uint8_t *base;  /* the whole pack (pack_open), or NULL (pack_open_tail) */
	uint64_t len;         /* the pack's length */
	uint32_t n;           /* members */
	uint64_t index_off;
	const uint8_t *index; /* the n raw entries, inside the caller's buffer */
};

/* ---- the builder ---- */

struct pack_builder {
	struct pack_entry *m;  /* members as added; off: into arena */
	uint32_t n, cap;
	uint8_t *arena;        /* the images, as added */
	size_t arena_len, arena_cap;
	uint32_t *set;         /* open addressing on the hash: member index + 1, 0 free */
	uint32_t set_cap;      /* a power of two, more than twice n */
};

void pack_builder_init(struct pack_builder *b);
void pack_builder_free(struct pack_builder *b); /* init'ed again */

/* Adds a member: image (len bytes) is the chunk object of hash, copied.
 * Its framing is checked (a chunk object header naming hash, header and
 * payload lengths adding up to len): -EBADMSG with *why otherwise; its
 * payload is not (the caller checked it, as an upload does). -EEXIST (why
 * set) for a hash added before; -E2BIG (why set) past PACK_MEMBERS_MAX,
 * PACK_MEMBER_MAX or PACK_SIZE_MAX; -ENOMEM. The builder is unchanged on
 * any error. */
int pack_builder_add(struct pack_builder *b, const uint8_t hash[HASH_LEN], const void *image,
		     size_t len, const char **why);

uint32_t pack_builder_count(const struct pack_builder *b);
/* The length the pack would have if finished now. */
uint64_t pack_builder_size(const struct pack_builder *b);

/* The pack of the members added (P2): *out (malloc'd, the caller frees it),
 * *out_len, and its name (P1). -EINVAL (why set) for no member; -ENOMEM.
 * The builder keeps its members (free it, or finish again). */
int pack_builder_finish(const struct pack_builder *b, uint8_t **out, size_t *out_len,
			uint8_t name[HASH_LEN], const char **why);

/* ---- the reader ---- */

/* Validates the whole pack in buf[0..len): trailer, header, index (P3 but
 * the member images' CRCs, P4, P6). 0 and *v; -EBADMSG with *why;
 * -EPROTONOSUPPORT with *why. */
int pack_open(const void *buf, size_t len, struct pack_view *v, const char **why);

/* P5 with the reads: the tail of a pack of size bytes, read through
 * read(arg, off, len, buf) — 64 KiB (or the whole pack) first, then exactly
 * what the trailer says it needs — and validated (pack_open_tail). 0 with
 * *v over *tail (malloc'd: the caller frees it, also on an error, when it
 * may be NULL); -EBADMSG with *why (no pack fits in its size, or the tail
 * is none: pack_open_tail's verdicts); -EPROTONOSUPPORT; -ENOMEM; or
 * read's own error, as it gave it. Used by a rebuild (fs/rbpack.c) and gc
 * (meta/admin_query.c). */
#define PACK_TAIL_FIRST (64u << 10)
typedef int pack_read_fn(void *arg, uint64_t off, size_t len, void *buf);
int pack_read_tail(pack_read_fn *read, void *arg, uint64_t size, uint8_t **tail,
		   struct pack_view *v, const char **why);

/* P5: validates trailer and index from only the pack's last tail_len bytes
 * (tail) of a pack pack_len long. -ENODATA with *need the tail length
 * needed when tail_len is shorter (no verdict yet); else as pack_open, and
 * v->base is NULL (members are read by range, at their entries). */
int pack_open_tail(const void *tail, size_t tail_len, uint64_t pack_len, struct pack_view *v,
		   uint64_t *need, const char **why);

/* Whether the whole pack's SHA-256 is name (P1): 0, or -EBADMSG with *why.
 * -EINVAL for a tail-only view. */
int pack_check_name(const struct pack_view *v, const uint8_t name[HASH_LEN], const char **why);

/* Entry i (< v->n) of a validated view. */
void pack_entry_at(const struct pack_view *v, uint32_t i, struct pack_entry *e);

/* The entry of hash: 0, or -ENOENT. */
int pack_find(const struct pack_view *v, const uint8_t hash[HASH_LEN], struct pack_entry *e);

/* P3 for a member image read by itself (a range read at e's offset):
 * image[0..len) must be e->len long, of e->crc, framed as e->hash's chunk
 * object, and pass store_object_check (decoded into plain, capacity cap;
 * *plain_len). 0; -EBADMSG with *why; another error of store_object_check
 * (-ENOMEM) is no verdict. */
int pack_member_verify(const struct pack_entry *e, const void *image, size_t len, void *plain,
		       size_t cap, size_t *plain_len, const char **why);

/* pack_member_verify of member e inside a whole view. -EINVAL for a
 * tail-only view. */
int pack_member_check(const struct pack_view *v, const struct pack_entry *e, void *plain,
		      size_t cap, size_t *plain_len, const char **why);

/* "packs/ab/<hex>.ckp" of a pack named name (size >= PACK_RELPATH_LEN). */
void pack_relpath(const uint8_t name[HASH_LEN], char *buf, size_t size);

/* The name in a file name "<64 lower-case hex>.ckp" of packs/ab/ (a listing):
 * 0, or -EINVAL for any other name. */
int pack_name_parse(const char *file, uint8_t name[HASH_LEN]);

#endif
