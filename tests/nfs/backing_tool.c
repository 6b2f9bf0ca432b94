/* backing-tool — a small CLI over fs/lib/backing.h, for tests/nfs/t_nfs.sh and
 * for poking at a BACKING by hand:
 *
 *   backing-tool [-t TIMEOUT_MS] [-v] SPEC put FILE REL     FILE ("-": stdin) → REL
 *   backing-tool ... SPEC get REL FILE                      REL → FILE ("-": stdout)
 *   backing-tool ... SPEC read REL                          one get, no stat first (as
 *                                                           bkobj_get): bytes discarded
 *   backing-tool ... SPEC range REL OFF LEN FILE            backing_get_range: the LEN
 *                                                           bytes at OFF → FILE
 *   backing-tool ... SPEC stat REL                          prints the size
 *   backing-tool ... SPEC ls [REL]                          one name a line, sorted
 *   backing-tool ... SPEC rm REL
 *   backing-tool ... SPEC probe
 *   backing-tool ... SPEC serve                             commands from stdin
 *   backing-tool ... SPEC rpcs                              NFS RPCs sent (useful in serve)
 *   backing-tool ... SPEC stress THREADS COUNT              concurrent put/get/compare
 *   backing-tool ... SPEC putnew FILE REL                   exclusive create (exit 4: exists)
 *   backing-tool ... SPEC mv FROM TO                        rename (exit 3: FROM absent)
 *   backing-tool ... SPEC race-new THREADS ROUNDS           THREADS putnew one name per
 *                                                           round: exactly one must win
 *   backing-tool ... SPEC raw rmdir REL | raw symlink TARGET REL
 *                                                           nfs:// only: through a libnfs
 *                                                           connection of its own, what
 *                                                           backing.h never does (another
 *                                                           node's NFS client, for tests)
 *
 * SPEC is a directory or nfs://server[:port]/export/path. Exits 0 on success,
 * 3 for "not there" (-ENOENT), 1 otherwise, with one line on stderr naming
 * the call and the reason; -v also prints the time the call took (to stderr:
 * "<call> <bytes> bytes <seconds> s").
 *
 * serve keeps ONE backing open and runs the commands above read from stdin,
 * one a line (names without spaces), answering each with one line:
 *   ok <ms> [size | names separated by spaces]      or      err <ms> <errno>
 * so that a test can show one open BACKING failing in time while the server
 * is away and working again once it is back. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <limits.h>

#include <nfsc/libnfs.h>
#include <nfsc/libnfs-raw-nfs.h> /* NFS_V3 */

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

#define BT_USAGE 1 /* not an errno: the command line is wrong */
#define BT_READ_CAP ((size_t)80 << 20) /* read: the largest file read (t_nfs puts 64 MiB) */
#define BT_ARGS 6 /* serve: a command and its arguments, at most (range has 4) */

static void usage(void)
{
	fprintf(stderr, "usage: backing-tool [-t TIMEOUT_MS] [-v] SPEC put FILE REL | get REL FILE | "
			"read REL | range REL OFF LEN FILE | stat REL | ls [REL] | rm REL | probe | rpcs | serve | stress THREADS COUNT | putnew FILE REL | mv FROM TO | race-new THREADS ROUNDS | raw rmdir REL | raw symlink TARGET REL\n");
	exit(2);
}

/* range REL OFF LEN FILE: one backing_get_range, its bytes into FILE. */
static int bt_range(struct backing *b, char **args, size_t *bytes)
{
	char *end1, *end2;
	errno = 0;
	unsigned long long off = strtoull(args[1], &end1, 10);
	unsigned long long len = strtoull(args[2], &end2, 10);
	if (errno || *end1 || *end2 || !*args[1] || !*args[2] || len > BT_READ_CAP)
		return BT_USAGE;
	char *buf = malloc(len ? (size_t)len : 1);
	if (!buf)
		return -ENOMEM;
	int rc = backing_get_range(b, args[0], off, (size_t)len, buf);
	if (rc == 0) {
		FILE *f = strcmp(args[3], "-") ? fopen(args[3], "wb") : stdout;
		if (!f || fwrite(buf, 1, (size_t)len, f) != (size_t)len || fflush(f) != 0)
			rc = errno ? -errno : -EIO;
		if (f && f != stdout && fclose(f) != 0 && rc == 0)
			rc = -errno;
		*bytes = (size_t)len;
	}
	free(buf);
	return rc;
}

/* Runs one command; `out` gets what it prints (stat's size, ls's names, one
 * per line, or space-separated when `inline_out`); *bytes the bytes moved
 * and *secs the time of the backing call itself. BT_USAGE for a bad command. */
static int bt_command(struct backing *b, const char *cmd, int nargs, char **args, FILE *out,
		      bool inline_out, size_t *bytes, double *secs)
{
	int rc = 0;
	double t1 = bt_now();
	*bytes = 0;
	if ((!strcmp(cmd, "put") || !strcmp(cmd, "putnew")) && nargs == 2) {
		FILE *f = strcmp(args[0], "-") ? fopen(args[0], "rb") : stdin;
		char *buf = NULL;
		if (!f)
			rc = -errno;
		else
			rc = bt_slurp(f, &buf, bytes);
		if (f && f != stdin)
			fclose(f);
		t1 = bt_now();
		if (rc == 0)
			rc = !strcmp(cmd, "put") ? backing_put(b, args[1], buf, *bytes)
						 : backing_put_new(b, args[1], buf, *bytes);
		free(buf);
		*secs = bt_now() - t1;
	} else if (!strcmp(cmd, "mv") && nargs == 2) {
		rc = backing_move(b, args[0], args[1]);
		*secs = bt_now() - t1;
	} else if (!strcmp(cmd, "get") && nargs == 2) {
		uint64_t size = 0;
		rc = backing_stat(b, args[0], &size);
		char *buf = rc == 0 ? malloc(size + 1) : NULL;
		if (rc == 0 && !buf)
			rc = -ENOMEM;
		t1 = bt_now();
		if (rc == 0)
			rc = backing_get(b, args[0], buf, size + 1, bytes);
		*secs = bt_now() - t1;
		if (rc == 0) {
			FILE *f = strcmp(args[1], "-") ? fopen(args[1], "wb") : stdout;
			if (!f || fwrite(buf, 1, *bytes, f) != *bytes || fflush(f) != 0)
				rc = errno ? -errno : -EIO;
			if (f && f != stdout && fclose(f) != 0 && rc == 0)
				rc = -errno;
		}
		free(buf);
	} else if (!strcmp(cmd, "read") && nargs == 1) {
		/* one backing_get, no stat first: as bkobj_get reads an object */
		char *buf = malloc(BT_READ_CAP);
		rc = buf ? backing_get(b, args[0], buf, BT_READ_CAP, bytes) : -ENOMEM;
		*secs = bt_now() - t1;
		free(buf);
	} else if (!strcmp(cmd, "range") && nargs == 4) {
		rc = bt_range(b, args, bytes);
		*secs = bt_now() - t1;
	} else if (!strcmp(cmd, "stat") && nargs == 1) {
		uint64_t size;
		rc = backing_stat(b, args[0], &size);
		*secs = bt_now() - t1;
		if (rc == 0)
			fprintf(out, "%s%llu%s", inline_out ? " " : "", (unsigned long long)size,
				inline_out ? "" : "\n");
	} else if (!strcmp(cmd, "ls") && nargs <= 1) {
		struct bt_names ns = { 0 };
		rc = backing_list(b, nargs ? args[0] : "", bt_collect, &ns);
		*secs = bt_now() - t1;
		if (ns.n)
			qsort(ns.v, ns.n, sizeof(*ns.v), bt_cmp);
		for (size_t i = 0; i < ns.n; i++) {
			if (rc == 0)
				fprintf(out, inline_out ? " %s" : "%s\n", ns.v[i]);
			free(ns.v[i]);
		}
		free(ns.v);
	} else if (!strcmp(cmd, "rm") && nargs == 1) {
		rc = backing_remove(b, args[0]);
		*secs = bt_now() - t1;
	} else if (!strcmp(cmd, "rpcs") && nargs == 0) { /* NFS RPCs sent so far (backing_counts) */
		struct backing_counts c;
		backing_get_counts(b, &c);
		fprintf(out, "%s%llu%s", inline_out ? " " : "", (unsigned long long)c.nfs_rpcs,
			inline_out ? "" : "\n");
	} else if (!strcmp(cmd, "probe") && nargs == 0) {
		char msg[1024];
		rc = backing_probe(b, msg, sizeof(msg));
		*secs = bt_now() - t1;
		if (rc != 0)
			fprintf(stderr, "backing-tool: %s\n", msg);
	} else {
		return BT_USAGE;
	}
	return rc;
}

static int bt_serve(struct backing *b)
{
	char line[4096];
	while (fgets(line, sizeof(line), stdin)) {
		char *args[BT_ARGS], *save = NULL;
		int n = 0;
		for (char *tok = strtok_r(line, " \t\n", &save); tok && n < BT_ARGS;
		     tok = strtok_r(NULL, " \t\n", &save))
			args[n++] = tok;
		if (n == 0)
			continue;
		if (!strcmp(args[0], "quit"))
			break;
		size_t bytes;
		double secs = 0;
		char extra[65536] = "";
		FILE *out = fmemopen(extra, sizeof(extra), "w");
		if (!out)
			return 1;
		int rc = bt_command(b, args[0], n - 1, args + 1, out, true, &bytes, &secs);
		fclose(out);
		if (rc == BT_USAGE)
			printf("err 0 usage\n");
		else if (rc == 0)
			printf("ok %.0f%s\n", secs * 1000, extra);
		else
			printf("err %.0f %s\n", secs * 1000, strerrorname_np(-rc));
		fflush(stdout);
	}
	return 0;
}

/* ---- raw: rmdir / symlink on an nfs:// export through libnfs itself, so
 * that ganesha sees the change (a change made beside it, on its exported
 * directory, can stay hidden behind its caches) ---- */

static int bt_raw(const char *spec, int nargs, char **args)
{
	if (strncmp(spec, "nfs://", 6) != 0 || nargs < 2)
		return BT_USAGE;
	/* nfs://host[:port]/path[?args] → libnfs's nfs://host/path?nfsport=port[&args] */
	const char *host = spec + 6, *slash = strchr(host, '/');
	if (!slash)
		return BT_USAGE;
	const char *colon = memchr(host, ':', (size_t)(slash - host));
	const char *query = strchr(slash, '?');
	char url[2048];
	snprintf(url, sizeof(url), "nfs://%.*s%.*s?%s%.*s%s%s", (int)((colon ? colon : slash) - host),
		 host, (int)(query ? (size_t)(query - slash) : strlen(slash)), slash,
		 colon ? "nfsport=" : "", colon ? (int)(slash - colon - 1) : 0, colon ? colon + 1 : "",
		 colon && query ? "&" : "", query ? query + 1 : "");
	struct nfs_context *nfs = nfs_init_context();
	if (!nfs)
		return -ENOMEM;
	struct nfs_url *u = nfs_parse_url_dir(nfs, url);
	int rc = u ? nfs_set_version(nfs, NFS_V3) : -EINVAL;
	if (rc == 0)
		rc = nfs_mount(nfs, u->server, u->path);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "/%s", args[nargs - 1]);
	if (rc == 0 && !strcmp(args[0], "rmdir") && nargs == 2)
		rc = nfs_rmdir(nfs, path);
	else if (rc == 0 && !strcmp(args[0], "symlink") && nargs == 3)
		rc = nfs_symlink(nfs, args[1], path);
	else if (rc == 0)
		rc = BT_USAGE;
	if (rc != 0 && rc != BT_USAGE)
		fprintf(stderr, "backing-tool: raw %s %s: %s\n", args[0], path, nfs_get_error(nfs));
	if (u)
		nfs_destroy_url(u);
	nfs_destroy_context(nfs);
	return rc;
}

/* ---- stress: THREADS threads, each COUNT put + get + compare of its own
 * files under shared, new parent directories (more threads than the NFS
 * backend has connections, so they also wait for one another) ---- */

struct bt_stress {
	struct backing *b;
	int id, count, failures;
};

static void *bt_stress_run(void *arg)
{
	struct bt_stress *s = arg;
	size_t cap = 300 * 1024;
	uint8_t *data = malloc(cap), *got = malloc(cap + 1);
	if (!data || !got) {
		s->failures = s->count;
		goto out;
	}
	for (int i = 0; i < s->count; i++) {
		char rel[96];
		snprintf(rel, sizeof(rel), "stress/%02x/%02x/t%d-%d", i % 3, i % 5, s->id, i);
		size_t len = ((size_t)i * 7919 + (size_t)s->id * 104729) % cap;
		uint64_t x = (uint64_t)s->id << 32 | (uint64_t)i;
		for (size_t k = 0; k < len; k++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			data[k] = (uint8_t)(x >> 56);
		}
		size_t got_len = 0;
		int rc = backing_put(s->b, rel, data, len);
		if (rc == 0)
			rc = backing_get(s->b, rel, got, cap + 1, &got_len);
		if (rc != 0 || got_len != len || memcmp(got, data, len) != 0) {
			fprintf(stderr, "backing-tool: stress %s: %s\n", rel,
				rc ? strerror(-rc) : "bytes differ");
			s->failures++;
		}
	}
out:
	free(data);
	free(got);
	return NULL;
}

static int bt_stress(struct backing *b, int threads, int count)
{
	if (threads < 1 || threads > 64 || count < 1)
		return BT_USAGE;
	pthread_t t[64];
	struct bt_stress s[64];
	int failures = 0;
	for (int i = 0; i < threads; i++) {
		s[i] = (struct bt_stress){ .b = b, .id = i, .count = count };
		if (pthread_create(&t[i], NULL, bt_stress_run, &s[i]) != 0)
			return -EAGAIN; /* the threads already started are detached by exit */
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		failures += s[i].failures;
	}
	printf("%d of %d round trips failed\n", failures, threads * count);
	return failures ? -EIO : 0;
}

/* ---- race-new: THREADS threads put_new one name at once, ROUNDS times ---- */

struct bt_racer {
	struct backing *b;
	pthread_barrier_t *go;
	const char *rel;
	int id;
	int rc;
};

static void *bt_race_run(void *arg)
{
	struct bt_racer *r = arg;
	char data[32];
	int n = snprintf(data, sizeof(data), "racer %d\n", r->id);
	pthread_barrier_wait(r->go);
	r->rc = backing_put_new(r->b, r->rel, data, (size_t)n);
	return NULL;
}

static int bt_race_new(struct backing *b, int threads, int rounds)
{
	if (threads < 2 || threads > 64 || rounds < 1)
		return BT_USAGE;
	int bad = 0;
	for (int round = 0; round < rounds; round++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "race/r%d", round);
		pthread_barrier_t go;
		pthread_barrier_init(&go, NULL, (unsigned)threads);
		pthread_t t[64];
		struct bt_racer r[64];
		for (int i = 0; i < threads; i++) {
			r[i] = (struct bt_racer){ .b = b, .go = &go, .rel = rel, .id = i };
			if (pthread_create(&t[i], NULL, bt_race_run, &r[i]) != 0)
				return -EAGAIN;
		}
		int won = 0, other = 0;
		for (int i = 0; i < threads; i++) {
			pthread_join(t[i], NULL);
			won += r[i].rc == 0;
			other += r[i].rc != 0 && r[i].rc != -EEXIST;
		}
		pthread_barrier_destroy(&go);
		if (won != 1 || other) {
			fprintf(stderr, "backing-tool: race-new %s: %d winners, %d errors\n", rel, won,
				other);
			bad++;
		}
		backing_remove(b, rel);
	}
	printf("%d of %d rounds without exactly one winner\n", bad, rounds);
	return bad ? -EIO : 0;
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
	log_setup(stderr, verbose ? LOG_LVL_INFO : LOG_LVL_ERROR);
	if (!strcmp(cmd, "raw")) {
		int rrc = bt_raw(spec, argc - optind - 2, argv + optind + 2);
		if (rrc == BT_USAGE)
			usage();
		return rrc == 0 ? 0 : 1;
	}

	struct backing *b;
	int rc = backing_open(spec, timeout_ms, &b);
	if (rc != 0) {
		fprintf(stderr, "backing-tool: open %s: %s\n", spec, strerror(-rc));
		return 1;
	}
	if (!strcmp(cmd, "serve")) {
		rc = bt_serve(b);
		backing_close(b);
		return rc;
	}
	if ((!strcmp(cmd, "stress") || !strcmp(cmd, "race-new")) && argc - optind == 4) {
		rc = !strcmp(cmd, "stress") ? bt_stress(b, atoi(argv[optind + 2]), atoi(argv[optind + 3]))
					    : bt_race_new(b, atoi(argv[optind + 2]),
							  atoi(argv[optind + 3]));
		backing_close(b);
		if (rc == BT_USAGE)
			usage();
		return rc == 0 ? 0 : 1;
	}
	size_t bytes = 0;
	double secs = 0;
	rc = bt_command(b, cmd, argc - optind - 2, argv + optind + 2, stdout, false, &bytes, &secs);
	if (rc == BT_USAGE) {
		backing_close(b);
		usage();
	}
	if (verbose && rc == 0)
		fprintf(stderr, "%s %zu bytes %.3f s\n", cmd, bytes, secs);
	if (rc != 0 && rc != -ENOENT && rc != -EEXIST)
		fprintf(stderr, "backing-tool: %s %s: %s\n", cmd, spec, strerror(-rc));
	backing_close(b);
	return rc == 0 ? 0 : rc == -ENOENT ? 3 : rc == -EEXIST ? 4 : 1;
}
