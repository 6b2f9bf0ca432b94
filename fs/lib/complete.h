/* complete — is a closed file a complete checkpoint, judged by its own bytes?
 *
 * Some checkpoint formats delimit themselves: the file says how long it must
 * be and what it must hold. complete_check() reads such a file through a
 * callback and answers "complete" only when every such statement holds:
 *
 *   torch.save   a zip (torch 1.13 and 2.x layouts) whose end records and
 *                central directory agree, each entry's local header agrees
 *                with its central entry and its data lies inside the file,
 *                which holds <prefix>/data.pkl, and every storage that
 *                data.pkl's persistent ids name ("storage", type, key,
 *                location, numel) is a record <prefix>/data/<key> of at least
 *                numel x element size bytes. A valid zip trailer alone is not
 *                enough: torch writes it even after an exception.
 *   npz, zip     the same zip structure; each stored .npy member's header
 *                shape x dtype equals the member's size.
 *   safetensors  8-byte header length N, a JSON header; the largest end of
 *                the tensors' data_offsets is exactly size - 8 - N, and each
 *                tensor of a known dtype spans dtype size x prod(shape) bytes.
 *   npy          header end + prod(shape) x itemsize == size.
 *
 * What it cannot tell: a safetensors file pre-sized with ftruncate whose data
 * is still zeros; the contents of compressed (deflated) npz members.
 *
 * Invariants:
 *  1. complete is true only when every check of the format passed; any doubt
 *     (a length out of bounds, an opcode or dtype not understood, a limit
 *     reached) is "not complete" with a reason, never a guess of complete.
 *  2. No read goes past size; every length read from the file is bounded
 *     before it is used as a size, an offset or an allocation.
 *  3. Memory is bounded (about 5 MiB at most) whatever the file size: bytes
 *     are streamed through fixed windows, and tables have fixed caps (65536
 *     zip records, 49152 remembered pickle memo values, 16384 pickle stack
 *     values); past a cap the file is "not complete: not judged". What is
 *     read: the file's last 64 KiB, the central directory, about 1 KiB per
 *     local header, data.pkl, npy and safetensors headers; never tensor data.
 *  4. A failed read is returned as its negative errno, never judged.
 *  5. The name is a hint only (for a file too short to carry its magic, or a
 *     zip without its end record); magic bytes decide. */
#ifndef CKPTFS_COMPLETE_H
#define CKPTFS_COMPLETE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads exactly len bytes at off into buf; 0 or -errno (-EIO...). */
typedef int (*complete_read_fn)(void *arg, uint64_t off, size_t len, void *buf);

enum complete_format {
	COMPLETE_FMT_NONE = 0,
	COMPLETE_FMT_TORCH,
	COMPLETE_FMT_ZIP,
	COMPLETE_FMT_NPZ,
	COMPLETE_FMT_SAFETENSORS,
	COMPLETE_FMT_NPY,
};

struct complete_result {
	int format;       /* enum complete_format; NONE: not a recognised format */
	bool complete;    /* only meaningful when format != NONE */
	char reason[192]; /* when !complete (or NONE): one short phrase */
};

/* "torch.save", "zip", "npz", "safetensors", "npy", "unknown". */
const char *complete_format_name(int format);

/* Judges a file of `size` bytes named `name` (the base name: a hint only,
 * magic bytes decide). Returns 0 with *out filled, or a negative errno when a
 * read failed (or -ENOMEM). Never reads past size. */
int complete_check(const char *name, uint64_t size, complete_read_fn rd, void *arg,
		   struct complete_result *out);

#endif
