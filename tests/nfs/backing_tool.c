/* backing-tool — a small CLI over fs/backing.h, for tests/nfs/t_nfs.sh and
 * for poking at a BACKING by hand:
 *
 *   backing-tool [-t TIMEOUT_MS] [-v] SPEC put FILE REL     FILE ("-": stdin) → REL
 *   backing-tool ... SPEC get REL FILE                      REL → FILE ("-": stdout)
 *   backing-tool ... SPEC stat REL                          prints the size
 *   backing-tool ... SPEC ls [REL]                          one name a line, sorted
 *   backing-tool ... SPEC rm REL
 *   backing-tool ... SPEC probe
 *
 * SPEC is a directory or nfs://server[:port]/export/path. Exits 0 on success,
 * 3 for "not there" (-ENOENT), 1 otherwise, with one line on stderr naming
 * the call and the reason; -v also prints the time the call took (to stderr:
 * "<call> <bytes> bytes <seconds> s"). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backing.h"
#include "log.h"

static double bt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads all of f into a malloc'd buffer. */
static int bt_slurp(FILE *f, char **out, size_t *len)
{
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f)) {
				free(buf);
				return -EIO;
			}
			break;
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

struct bt_names {
	char **v;
	size_t n, cap;
};

static int bt_collect(void *arg, const char *name)
{
	struct bt_names *ns = arg;
	if (ns->n == ns->cap) {
		size_t ncap = ns->cap ? ns->cap * 2 : 64;
		char **nv = realloc(ns->v, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		ns->v = nv;
		ns->cap = ncap;
	}
	if (!(ns->v[ns->n] = strdup(name)))
		return -ENOMEM;
	ns->n++;
	return 0;
}

static int bt_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void usage(void)
{
	fprintf(stderr, "usage: backing-tool [-t TIMEOUT_MS] [-v] SPEC put FILE REL | get REL FILE | "
			"stat REL | ls [REL] | rm REL | probe\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned timeout_ms = 0;
	int verbose = 0, opt;
	while ((opt = getopt(argc, argv, "t:v")) != -1) {
		if (opt == 't')
			timeout_ms = (unsigned)strtoul(optarg, NULL, 10);
		else if (opt == 'v')
			verbose = 1;
		else
			usage();
	}
	if (argc - optind < 2)
		usage();
	const char *spec = argv[optind], *cmd = argv[optind + 1];
	char **args = argv + optind + 2;
	int nargs = argc - optind - 2;
	log_setup(stderr, verbose ? LOG_LVL_INFO : LOG_LVL_ERROR);

	struct backing *b;
	int rc = backing_open(spec, timeout_ms, &b);
	if (rc != 0) {
		fprintf(stderr, "backing-tool: open %s: %s\n", spec, strerror(-rc));
		return 1;
	}
	double t1 = bt_now();
	size_t bytes = 0;
	if (!strcmp(cmd, "put") && nargs == 2) {
		FILE *f = strcmp(args[0], "-") ? fopen(args[0], "rb") : stdin;
		char *buf = NULL;
		if (!f)
			rc = -errno;
		else
			rc = bt_slurp(f, &buf, &bytes);
		if (f && f != stdin)
			fclose(f);
		t1 = bt_now();
		if (rc == 0)
			rc = backing_put(b, args[1], buf, bytes);
		free(buf);
	} else if (!strcmp(cmd, "get") && nargs == 2) {
		uint64_t size = 0;
		rc = backing_stat(b, args[0], &size);
		char *buf = rc == 0 ? malloc(size + 1) : NULL;
		if (rc == 0 && !buf)
			rc = -ENOMEM;
		t1 = bt_now();
		if (rc == 0)
			rc = backing_get(b, args[0], buf, size + 1, &bytes);
		double t2 = bt_now();
		if (rc == 0) {
			FILE *f = strcmp(args[1], "-") ? fopen(args[1], "wb") : stdout;
			if (!f || fwrite(buf, 1, bytes, f) != bytes || fflush(f) != 0)
				rc = -errno ? -errno : -EIO;
			if (f && f != stdout && fclose(f) != 0 && rc == 0)
				rc = -errno;
		}
		free(buf);
		if (verbose && rc == 0)
			fprintf(stderr, "get %zu bytes %.3f s\n", bytes, t2 - t1);
		verbose = 0;
	} else if (!strcmp(cmd, "stat") && nargs == 1) {
		uint64_t size;
		rc = backing_stat(b, args[0], &size);
		if (rc == 0)
			printf("%llu\n", (unsigned long long)size);
	} else if (!strcmp(cmd, "ls") && nargs <= 1) {
		struct bt_names ns = { 0 };
		rc = backing_list(b, nargs ? args[0] : "", bt_collect, &ns);
		qsort(ns.v, ns.n, sizeof(*ns.v), bt_cmp);
		for (size_t i = 0; i < ns.n; i++) {
			if (rc == 0)
				printf("%s\n", ns.v[i]);
			free(ns.v[i]);
		}
		free(ns.v);
	} else if (!strcmp(cmd, "rm") && nargs == 1) {
		rc = backing_remove(b, args[0]);
	} else if (!strcmp(cmd, "probe") && nargs == 0) {
		char msg[1024];
		rc = backing_probe(b, msg, sizeof(msg));
		if (rc != 0)
			fprintf(stderr, "backing-tool: %s\n", msg);
	} else {
		backing_close(b);
		usage();
	}
	double t2 = bt_now();
	if (verbose && rc == 0)
		fprintf(stderr, "%s %zu bytes %.3f s\n", cmd, bytes, t2 - t1);
	if (rc != 0 && rc != -ENOENT)
		fprintf(stderr, "backing-tool: %s %s: %s\n", cmd, spec, strerror(-rc));
	backing_close(b);
	return rc == 0 ? 0 : rc == -ENOENT ? 3 : 1;
}
