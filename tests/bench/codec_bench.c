/* codec_bench — fs/lib/codec.c's encode and decode speed and ratio on a file,
 * for make bench (phase 13, docs/BENCH.md).
 *
 *   codec-bench FILE [lz4|zstd]
 *
 * Cuts FILE with the daemon's chunker (fs/lib/chunker.h, default sizes), encodes
 * every chunk as codec_encode_as(family) would for a store, decodes it back
 * and compares; repeats until 1 CPU-second of encoding has run (thread CPU time, not
 * wall time: the machine is shared). Prints one line:
 *   family= bytes= stored= ratio= encode_mbps= decode_mbps= chunks= raw= lz4= blosc_lz4= blosc_zstd=
 *   zstd_planes=
 * Built with -DCODEC_BENCH_BASE it uses codec_encode alone (the API of the
 * version before the shuffled codecs), to measure that version. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chunker.h"
#include "codec.h"

static double cb_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: the machine is shared */
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: codec-bench FILE [lz4|zstd]\n");
		return 2;
	}
	const char *fam_name = argc > 2 ? argv[2] : "lz4";
	int fd = open(argv[1], O_RDONLY);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size == 0) {
		fprintf(stderr, "codec-bench: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	size_t n = (size_t)sb.st_size;
	const uint8_t *data = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (data == MAP_FAILED)
		return 1;
	/* chunk boundaries: the daemon's content-defined cuts */
	size_t *cuts = malloc(sizeof(size_t) * (n / 4096 + 2)), ncuts = 0, off = 0, max_chunk = 0;
	if (!cuts)
		return 1;
	struct chunker ck;
	chunker_init(&ck, &chunker_default_params);
	while (off < n) {
		bool boundary = false;
		size_t len = chunker_scan(&ck, data + off, n - off, &boundary);
		cuts[ncuts++] = len;
		off += len;
		if (len > max_chunk)
			max_chunk = len;
	}
	uint8_t *enc = malloc(codec_bound(max_chunk)), *dec = malloc(max_chunk);
	if (!enc || !dec) {
		fprintf(stderr, "codec-bench: out of memory\n");
		return 1;
	}
	size_t counts[5] = { 0 }, stored = 0, rounds = 0;
	double enc_s = 0, dec_s = 0;
#ifndef CODEC_BENCH_BASE
	enum codec_family family;
	if (codec_family_parse(fam_name, &family) != 0) {
		fprintf(stderr, "codec-bench: unknown family %s\n", fam_name);
		return 2;
	}
#endif
	while (enc_s < 1.0 || rounds == 0) {
		off = 0;
		for (size_t i = 0; i < ncuts; i++) {
			uint8_t codec;
			size_t out;
			double t0 = cb_now();
#ifdef CODEC_BENCH_BASE
			codec_encode(data + off, cuts[i], enc, codec_bound(cuts[i]), &codec, &out);
#else
			codec_encode_as(family, data + off, cuts[i], enc, codec_bound(cuts[i]), &codec, &out);
#endif
			double t1 = cb_now();
			if (codec_decode(codec, enc, out, dec, cuts[i]) != 0 ||
			    memcmp(dec, data + off, cuts[i]) != 0) {
				fprintf(stderr, "codec-bench: chunk %zu does not round-trip\n", i);
				return 1;
			}
			dec_s += cb_now() - t1;
			enc_s += t1 - t0;
			if (rounds == 0) {
				if (getenv("CODEC_BENCH_VERBOSE"))
					fprintf(stderr, "chunk %zu at %zu: %zu -> %zu codec %u\n", i, off,
						cuts[i], out, codec);
				stored += out;
				counts[codec < 5 ? codec : 0]++;
			}
			off += cuts[i];
		}
		rounds++;
	}
	printf("family=%s bytes=%zu stored=%zu ratio=%.4f encode_mbps=%.0f decode_mbps=%.0f chunks=%zu"
	       " raw=%zu lz4=%zu blosc_lz4=%zu blosc_zstd=%zu zstd_planes=%zu\n",
	       fam_name, n, stored, (double)stored / (double)n, (double)n * rounds / enc_s / 1e6,
	       (double)n * rounds / dec_s / 1e6, ncuts, counts[0], counts[1], counts[2], counts[3], counts[4]);
	return 0;
}
