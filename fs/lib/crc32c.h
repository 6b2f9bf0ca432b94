/* crc32c — the CRC-32C (Castagnoli) checksum of chunk object payloads.
 *
 * Not a name and not a defence against forgery: chunks are named and
 * verified end to end by SHA-256 (hash.h). A CRC-32C in a chunk object's
 * header (docs/FORMAT.md, version 2) lets a read of the local cache, or an
 * upload from it, detect bit rot and torn objects at a few GB/s instead of
 * SHA-256's ~1.8 GB/s. It is the checksum ext4 metadata, Btrfs and iSCSI use:
 * every error burst up to 32 bits is caught, and any other corruption with a
 * probability of 1 - 2^-32.
 *
 * On x86-64 with SSE 4.2 (found at run time) the CPU's crc32 instruction does
 * the work, and with VPCLMULQDQ and AVX-512F carry-less multiplication does
 * most of it for buffers of 256 bytes or more; elsewhere a table does, with
 * the same results. Conventions: the usual initial value and final inversion
 * (crc32c(0, "123456789", 9) is 0xe3069283); pass a previous result as crc to continue a running checksum. */
#ifndef CKPTFS_CRC32C_H
#define CKPTFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *data, size_t len);

/* The portable table version, for tests: the same results as crc32c. */
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t len);

/* For tests and measurements: the checksum by one path, whatever crc32c
 * would choose for this length and CPU. 0 and *out set, or -1 when this CPU
 * (or build) has no such path. CRC32C_FOLD takes the chains below 256 bytes. */
enum crc32c_path {
	CRC32C_TABLE,  /* the portable table */
	CRC32C_CHAINS, /* three crc32-instruction chains (SSE 4.2) */
	CRC32C_FOLD,   /* carry-less folding (VPCLMULQDQ, AVX-512F) */
};
int crc32c_by(enum crc32c_path path, uint32_t crc, const void *data, size_t len, uint32_t *out);

#endif
