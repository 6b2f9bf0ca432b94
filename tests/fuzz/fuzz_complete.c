/* libFuzzer harness for fs/lib/complete.c: complete_check() on arbitrary bytes.
 *
 * The input is the file; its reads go through the callback, which fails the
 * harness (abort) on any read past the end, the module's invariant 2. The
 * last input byte picks the name hint, so name-dependent paths are fuzzed.
 *
 * Build and run (from the repository root; seeds are the unit fixtures):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *         -I. -Ifs/lib tests/fuzz/fuzz_complete.c fs/lib/complete.c -o build/fuzz_complete
 *   build/fuzz_complete -max_total_time=30 -max_len=65536 tests/fuzz/corpus/complete
 * (tests/fuzz/corpus/complete is a copy of tests/unit/fixtures/complete made by
 * make_fixtures.py; use a scratch corpus directory to keep new inputs out of git.) */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "complete.h"

struct fuzz_file {
	const uint8_t *p;
	size_t n;
};

static int fuzz_read(void *arg, uint64_t off, size_t len, void *buf)
{
	const struct fuzz_file *f = arg;
	if (off > f->n || len > f->n - off)
		abort(); /* a read past size */
	memcpy(buf, f->p + off, len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"x.pt", "model.safetensors", "a.npz", "a.npy",
					    "b.zip", "notes.txt", "", "y.bin"};
	struct fuzz_file f = {data, size};
	struct complete_result r;
	const char *name = names[size ? data[size - 1] % 8 : 0];
	int rc = complete_check(name, size, fuzz_read, &f, &r);
	if (rc != 0 && rc != -ENOMEM)
		abort(); /* reads never fail here */
	if (!r.complete && r.reason[0] == '\0')
		abort(); /* every "no" says why */
	if (r.complete && (r.format == 0 || r.reason[0] != '\0'))
		abort();
	if (memchr(r.reason, '\0', sizeof(r.reason)) == NULL)
		abort();
	return 0;
}
