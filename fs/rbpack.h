/* rbpack — what a rebuild (fs/rebuild.c) learns of the pack files on BACKING
 * (fs/lib/pack.h, written by fs/uppack.c): which chunk objects live as pack
 * members, and where. Manifests name chunks by hash only, so the packs'
 * own indexes are BACKING's description of where those members are; a
 * rebuild reads each pack's tail (trailer and index, pack.h P5), never a
 * whole pack.
 *
 * Invariants:
 *  R1. A pack is used only if its name parses (64 lower-case hex digits
 *      and ".ckp", in the directory of its first two digits) and its tail
 *      validates (every CRC, the index tiling, pack.h P3-P5); anything
 *      else under packs/ is logged once and left alone (gc's), never read
 *      as a member. A failure of BACKING itself stops the load (rebuild.c
 *      invariant 3).
 *  R2. A chunk whose loose object is on BACKING keeps it (catalog_pack.h
 *      K3 keeps a chunk once put loose loose; a member beside it is an
 *      older copy); only a chunk found in no loose file is placed in a
 *      pack.
 *  R3. A hash found in several packs (a member put again after its pack
 *      was damaged) is placed in the first whose member image matches
 *      the CRC-32C of its index entry when read; none matching leaves the
 *      row loose (its read then fails as a missing object: nothing wrong
 *      is handed out, fs/lib/bkobj.h B2).
 *
 * Tested by tests/integration/t_packs.sh (a rebuild of a store with packs). */
#ifndef CKPTFS_RBPACK_H
#define CKPTFS_RBPACK_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

struct backing;
struct cat;

struct rbpack_member {
	uint8_t hash[HASH_LEN];
	uint8_t pack[HASH_LEN];
	uint64_t off, pack_size;
	uint32_t len, crc, pack_members;
};

struct rbpack_map {
	struct rbpack_member *m; /* sorted by hash after rbpack_load */
	size_t n, cap;
	uint64_t packs, skipped; /* packs read; names or tails not used (R1) */
};

/* Lists packs/ and reads each pack's tail (R1): 0, or BACKING's error. */
int rbpack_load(struct backing *b, struct rbpack_map *map);
void rbpack_free(struct rbpack_map *map);

/* The members of hash (*n of them, consecutive), or NULL. */
const struct rbpack_member *rbpack_find(const struct rbpack_map *map,
					const uint8_t hash[HASH_LEN], size_t *n);

/* After the manifests are applied: every uploaded chunk row of cat with no
 * loose object on BACKING that the map holds is placed in its pack (R2,
 * R3; catalog_pack.h cat_pack_place). *placed counts them. */
int rbpack_place(struct backing *b, struct cat *cat, const struct rbpack_map *map,
		 uint64_t *placed);

#endif
