/* ckptfs-admin — look into and manage a ckptfs file system: its generations,
 * chunks, cache and BACKING.
 *
 *   ckptfs-admin [--json] COMMAND (MOUNTPOINT | --cache DIR) [ARGS]
 *
 * This file: the command table and help, the command line, and finding what
 * a command works on. MOUNTPOINT leads to the cache through the xattr
 * user.ckptfs.cache on the mount's root (so "not a ckptfs mount" and "the
 * daemon is dead" are told apart: no xattr vs ENOTCONN); --cache DIR names
 * the cache directly (offline use, or a mount whose path is unknown).
 *
 * Where each command runs (docs/ADMIN.md):
 *  - reading commands (and gc without --delete) open the catalog read-only
 *    (SQLite WAL readers do not block the daemon), mounted or not, take no
 *    lock and claim nothing;
 *  - changing commands go through the daemon's control channel when it runs
 *    (fs/lib/control_proto.h) and never write the catalog behind it; with no daemon
 *    (--cache) they take the cache lock the daemon would hold, open the
 *    catalog read-write and change it directly; a lock another process
 *    holds with no daemon answering is refused naming it (exit 8);
 *  - import goes through the mount only;
 *  - on a node of a shared catalog (-o meta=) the daemon answers or the
 *    mount is used (admin_shared.c); a node's cache with no daemon answering
 *    is refused by every command but umount (admin_node_offline: BACKING's
 *    claim says it is a node's, or, none readable, the catalog's role).
 * Offline changes claim BACKING for the cache's catalog first, as the daemon
 * does (fs/lib/claim.h): refused, naming the holder, while another catalog
 * holds it. Of them only gc --delete writes BACKING itself: it removes
 * orphan objects, each removal asking claim_may_write under the catalog lock
 * (admin_query.h invariant 5), and stops with one line (EROFS) once the
 * claim is unsure or lost. commit, pin, unpin and rm change the catalog
 * only: what BACKING must learn from them (manifests to put, manifests and
 * chunk objects to remove) is queued as upload rows (meta/upload.h) for the
 * daemon's uploader, which asks the claim at each write (fs/uploader.c);
 * their reclaims and the open's sweep remove cache objects only
 * (admin_reclaim). Nothing else the tool runs puts, moves or removes anything
 * on BACKING but the claim file itself (claim.c): export and verify read it,
 * import writes through the mount (the daemon's uploads).
 * rebuild only reads BACKING, but it claims BACKING for the new catalog
 * before it reads (as a fresh catalog: claim.h invariant 8), so no other
 * catalog writes BACKING between the rebuild and the new catalog's mount,
 * and the catalog it replaces is behind afterwards; reading commands claim
 * nothing.
 * Only root and the daemon's user (the owner of the cache) may use it; root
 * not with --cache on a cache another user owns (invariant A1, below), but
 * as that user with --as-owner. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "admin.h"
#include "backing.h"
#include "cachedir.h"
#include "claim.h"
#include "log.h"
#include "safeopen.h"
#include "store.h"
#include "version.h"

#define ADMIN_NEED_STORE 4u /* opens the cache's chunk store and BACKING */
#define ADMIN_NEED_READ 8u  /* reads the catalog (every command but rebuild) */
#define ADMIN_NEED_REBUILD 16u /* takes the cache lock; the catalog may be missing */
#define ADMIN_NEED_META 32u /* the target is a shared catalog's URL: no cache, no mount */
#define ADMIN_NEED_CACHE_ONLY 64u /* reads the cache's state only: also a node's, offline */

struct admin_command {
	const char *name;
	int (*fn)(struct admin *a);
	unsigned need;
	const char *synopsis;
	const char *summary;
	const char *help;
};

static const struct admin_command admin_commands[] = {
	{ "list", admin_cmd_list, ADMIN_NEED_READ, "list [--all] [SERIES]",
	  "one row per generation: state, pin, size, what it alone holds, dedup, commit",
	  "Lists the open and committed generations (with --all also held ones, with the\n"
	  "reason they could not be proven complete, and aborted and deleted ones), of\n"
	  "one SERIES (a directory relative to the mount) or of all series.\n"
	  "Columns: series, name, step, state, pinned, files, logical size, ALONE (stored\n"
	  "bytes of the chunks only this generation holds: what rm frees on BACKING),\n"
	  "dedup (logical size / plain bytes of the distinct chunks it names), when it\n"
	  "committed and by which rule (or why it ended). --json prints an array of\n"
	  "objects with exact numbers: id, series, name, step, state, version, pinned,\n"
	  "files, logical_bytes, stored_bytes (= ALONE), exclusive_bytes, unique_bytes,\n"
	  "chunks, dedup_ratio, created_ns, committed_ns, ended_ns, committed, rule,\n"
	  "held_reason.\n" },
	{ "show", admin_cmd_show, ADMIN_NEED_READ, "show GEN",
	  "a generation's files with sizes and chunks, and what it shares with others",
	  "Shows one generation: its state and sizes, each regular file with its size,\n"
	  "extents and distinct chunks, and for every other generation that names some\n"
	  "of the same chunks, how many and their plain bytes.\n" },
	{ "commit", admin_cmd_commit, ADMIN_NEED_READ | ADMIN_NEED_CHANGE, "commit GEN",
	  "commit an open or held generation now (rule \"admin\")",
	  "Commits an OPEN generation as if its trainer's completion signal had arrived\n"
	  "(rule \"admin\"), or promotes a HELD one (kept because it could not be proven\n"
	  "complete: see list --all). If a file in it is still open for writing, it\n"
	  "commits when the last one closes (the state printed is then \"open\"). A\n"
	  "committed one is left as it is. GEN must name the generation itself (its\n"
	  "root, or id:N): a path inside it is refused (exit 7).\n" },
	{ "pin", admin_cmd_pin, ADMIN_NEED_READ | ADMIN_NEED_CHANGE, "pin GEN",
	  "keep a generation: keep-latest-k never deletes a pinned one",
	  "Pins a generation: keep-latest-k (-o keep=K) never deletes it.\n" },
	{ "unpin", admin_cmd_unpin, ADMIN_NEED_READ | ADMIN_NEED_CHANGE, "unpin GEN",
	  "undo pin", "Unpins a generation: keep-latest-k may delete it again.\n" },
	{ "rm", admin_cmd_rm, ADMIN_NEED_READ | ADMIN_NEED_CHANGE, "rm [--force] GEN",
	  "delete a generation (an open one needs --force)",
	  "Deletes a committed generation (rule \"admin\"): its tree goes and chunks no\n"
	  "other file names are reclaimed. GEN must name the generation itself (its\n"
	  "root, or id:N): a path inside it is refused (exit 7). An OPEN generation\n"
	  "(still being written) is refused (exit 8) unless --force, which aborts it: a\n"
	  "new save's files go (rule \"admin-abort\"); a rewrite of a committed or held\n"
	  "step is undone and its previous version is back, nothing deleted.\n" },
	{ "gc", admin_cmd_gc, ADMIN_NEED_READ | ADMIN_NEED_CHANGE | ADMIN_NEED_STORE, "gc [--delete]",
	  "chunk objects nothing names, in the cache and on BACKING: what --delete would free",
	  "Walks the chunk objects in the cache and on BACKING and finds those that no\n"
	  "catalog row names (left by a crash or a failed removal; chunks whose count\n"
	  "reaches zero are reclaimed at once by the catalog itself). Without --delete\n"
	  "it is a dry run: it prints how many objects it saw, how many are orphans and\n"
	  "the bytes it would free, and removes nothing (JuiceFS's convention).\n"
	  "--delete removes them and prints the bytes freed. (--dry-run is accepted and\n"
	  "is the default.) A dry run only reads: offline it takes no lock, opens the\n"
	  "catalog read-only and claims nothing; BACKING is skipped, saying why, when\n"
	  "its claim names another catalog or cannot be read.\n" },
	{ "verify", admin_cmd_verify, ADMIN_NEED_READ | ADMIN_NEED_STORE, "verify [GEN]",
	  "re-hash every chunk (of GEN); report missing or corrupt ones; exit 1 if any",
	  "Reads every chunk object (of all chunks, or those GEN names), decodes it and\n"
	  "checks its SHA-256. Each missing or corrupt chunk is printed with the files and\n"
	  "generations that name it; a copy BACKING could not give (no answer, a read\n"
	  "error) is printed as unreadable, not corrupt; after such a copy one cheap call\n"
	  "asks whether BACKING answers at all: if not, verify stops with one line\n"
	  "(\"BACKING ... unreachable: N chunks not checked\") and exit 12 instead of\n"
	  "waiting backing_timeout per chunk. Prints chunks_ok / chunks_bad /\n"
	  "chunks_unreadable / chunks_skipped / chunks_not_checked. Exit status 1 if any\n"
	  "chunk is bad or unreadable.\n" },
	{ "check", admin_cmd_check, ADMIN_NEED_READ, "check",
	  "check the catalog's invariants (reference counts, extents, generations)",
	  "Checks the catalog's invariants (meta/SCHEMA.md): reference counts, extents,\n"
	  "links, generations. Exit status 1 on a violation (each is printed).\n" },
	{ "stats", admin_cmd_stats, ADMIN_NEED_READ, "stats [--prometheus]",
	  "files, bytes, dedup and compression, generations, the daemon's cache counters",
	  "Prints \"key value\" lines (a human size after byte counts): files, logical,\n"
	  "unique (after dedup) and stored (after compression) bytes, ratios, generation\n"
	  "counts and, when the daemon runs, its memory chunk cache (use, bound, hits,\n"
	  "misses, hit rate). --json: one object. --prometheus: the Prometheus text\n"
	  "format (ckptfs_* metrics, label cache=...) for node_exporter's textfile\n"
	  "collector. write_back is 0 until the write-back cache exists; then dirty\n"
	  "bytes and the upload queue and lag are listed too.\n" },
	{ "wait", admin_cmd_wait, ADMIN_NEED_READ, "wait [GEN] [--timeout S]",
	  "block until GEN (default: all committed ones and the files outside them) is on BACKING",
	  "Blocks until the generation is durable on BACKING (for job scripts, before\n"
	  "they exit). Without GEN: every generation committed when it starts (open and\n"
	  "held ones are named on stderr and not waited for: exit 11 after), and the\n"
	  "files outside generations (latest, last.ckpt, a final model): until no chunk\n"
	  "they name is only in the cache. An open GEN is waited for until it commits;\n"
	  "if it is aborted or deleted meanwhile, exit 1. --timeout S gives up after S\n"
	  "seconds with exit 9, naming what is not on BACKING yet.\n" },
	{ "nodes", admin_cmd_nodes, ADMIN_NEED_META, "nodes URL",
	  "the nodes of a shared catalog (-o meta=URL): state and lease left",
	  "Lists the nodes of the shared catalog at URL (the -o meta= URL the nodes\n"
	  "mount with; no mount or cache needed): id, state (live; expired: its lease\n"
	  "ran out and another node swept it; gone: unmounted), the lease left by the\n"
	  "database server's clock, and its name (-o node_name=, default\n"
	  "host:pid:cache). --json prints an array of objects: id, name, state,\n"
	  "lease_left_ms.\n" },
	{ "claim", admin_cmd_claim, ADMIN_NEED_META, "claim [--break] BACKING",
	  "who holds BACKING's claim; --break: the by-hand decision to free it",
	  "Prints BACKING's claim (no mount or cache needed): its epoch, state (held,\n"
	  "released, shared, or vacant: broken-by-hand, given-back), the catalog id, the\n"
	  "host, cache and pid of its holder and how long ago it renewed. One catalog\n"
	  "writes a BACKING at a time; a mount refused because another catalog holds\n"
	  "the claim names it. --break frees the claim for good, whoever holds it: for\n"
	  "a holder that will never come back (a node lost, a shared catalog retired,\n"
	  "a claim that does not parse). The break is a new epoch (nothing is deleted);\n"
	  "other catalogs may take BACKING once the claim's timeout (60 s by default)\n"
	  "has passed, and a daemon still holding it stops writing BACKING at its next\n"
	  "renewal (fenced: its changes fail with EROFS, what it did not upload stays\n"
	  "in its cache). The catalog that takes BACKING next and the one that held it\n"
	  "must not both be used on it afterwards: the old one is refused (behind).\n"
	  "--json prints an object: epoch, state, catalog, host, cache, pid, take,\n"
	  "renewed (unix seconds).\n" },
	{ "rebuild", admin_cmd_rebuild, ADMIN_NEED_CHANGE | ADMIN_NEED_REBUILD,
	  "rebuild [--force] [BACKING]",
	  "recreate the catalog from BACKING's manifests (offline, --cache DIR)",
	  "Recreates the cache's catalog from what BACKING holds: the newest tree\n"
	  "manifest and the newest version of every generation manifest. Offline only\n"
	  "(--cache DIR, no daemon: exit 8 otherwise). The old catalog is moved aside as\n"
	  "catalog.db.before-rebuild-TIME, never deleted. BACKING defaults to the one\n"
	  "the cache belongs to (CACHE/backing). A manifest that fails its checks is\n"
	  "reported and skipped (exit 1).\n"
	  "What is only in the cache is in no manifest and does not come back: if the\n"
	  "old catalog can be read and has uploads queued or generations not durable\n"
	  "(open, held, or committed and not yet on BACKING), rebuild refuses (exit 8),\n"
	  "naming how many and which, and changes nothing: mount the cache and let it\n"
	  "upload (wait, umount), decide on held ones, then rebuild. --force drops them.\n"
	  "Also: a generation deleted while its manifest removal was still queued comes\n"
	  "back (delete it again).\n"
	  "rebuild --meta [--force] URL BACKING fills an EMPTY shared catalog\n"
	  "(-o meta=URL) from BACKING's generation manifests instead (a lost database);\n"
	  "a catalog that holds anything is refused (exit 1), and so is a BACKING whose\n"
	  "shared claim was renewed in the last 60 s (exit 8: a node of the old catalog\n"
	  "may still run) unless --force, once every node of it is stopped.\n" },
	{ "export", admin_cmd_export, ADMIN_NEED_READ, "export [--force] GEN DIR",
	  "write a generation out as plain files: DIR/NAME",
	  "Writes the generation as plain files to DIR/NAME (DIR is created if needed;\n"
	  "DIR/NAME must not exist), first under a temporary name, renamed when\n"
	  "complete. Mounted it reads through the mount; with --cache it reads the\n"
	  "catalog and the chunk objects. Every chunk is verified against its hash:\n"
	  "with --cache a cache copy that fails its check is read from BACKING instead\n"
	  "(one line per chunk); both copies bad fails the export naming the chunk and\n"
	  "both reasons. An open generation needs --force.\n" },
	{ "import", admin_cmd_import, ADMIN_NEED_MOUNT,
	  "import [--name NAME] DIR SERIES",
	  "take a plain checkpoint directory (or file) in as a committed generation",
	  "Copies DIR (a directory, or a single checkpoint file) through the mount into\n"
	  "SERIES (created if missing) under a temporary name, then renames it to\n"
	  "SERIES/NAME, which makes it a generation and commits it (rule \"rename\").\n"
	  "NAME is DIR's last part unless --name is given; it must be a generation name\n"
	  "on this mount (gen_pattern), SERIES/NAME must not exist and SERIES must be\n"
	  "outside generations, as the mount shows them (on a node of a shared catalog:\n"
	  "any node's). Needs the mount.\n" },
	{ "umount", admin_cmd_umount, ADMIN_NEED_READ | ADMIN_NEED_CACHE_ONLY, "umount [--timeout S]",
	  "wait for the uploads (progress, rate, ETA), unmount, wait for the daemon to exit",
	  "A stop that returns only when the data is safe: waits until the upload queue\n"
	  "is empty (bytes left, rate and ETA on stderr; a plain line every 5 s when\n"
	  "stderr is not a terminal), unmounts (as root umount2, else fusermount3 -u),\n"
	  "then waits until the daemon has uploaded what the unmount committed and has\n"
	  "exited. fusermount3 -u and umount return at once and leave the daemon\n"
	  "draining in the background. --timeout S gives up after S seconds with exit 9:\n"
	  "before the unmount nothing is changed; after it the daemon drains on by\n"
	  "itself. With --cache DIR, waits for a daemon that already unmounted and is\n"
	  "still uploading. Exit 8 if the mount is busy (a file open in it); exit 1 if\n"
	  "the daemon exited with uploads still queued or without the tree manifest\n"
	  "(files outside generations) on BACKING, the line naming which.\n" },
};

#define ADMIN_NCOMMANDS (sizeof(admin_commands) / sizeof(admin_commands[0]))

static const char admin_exit_help[] =
	"exit codes: 0 ok; 1 a problem was found or an operation failed; 2 bad usage;\n"
	"  3 not a ckptfs mount or cache; 4 the daemon is not running (or does not answer);\n"
	"  5 permission denied (also root with --cache on another user's cache, without\n"
	"  --as-owner); 6 no such generation or series; 7 a bad name (\"..\", an empty\n"
	"  or \".\" part, a slash in NAME, a path outside the mount, a path inside a\n"
	"  generation for rm or commit); 8 busy: an open generation without --force, a\n"
	"  target that exists, a cache in use (its lock held: the holder is named); 9 wait\n"
	"  timed out; 10 not available in this build, or not on a node of a shared\n"
	"  catalog as asked (there, with no daemon answering, every command but umount);\n"
	"  11 wait: open or held generations were not waited for; 12 verify: BACKING\n"
	"  unreachable, the chunks after the first unreadable one not checked\n";

static void admin_usage(FILE *f)
{
	fprintf(f, "usage: ckptfs-admin [--json] COMMAND (MOUNTPOINT | --cache DIR) [ARGS]\n"
		   "       ckptfs-admin COMMAND --help\n"
		   "       ckptfs-admin --version\n\ncommands:\n");
	for (size_t i = 0; i < ADMIN_NCOMMANDS; i++)
		fprintf(f, "  %-32s %s\n", admin_commands[i].synopsis, admin_commands[i].summary);
	fprintf(f, "\nGEN: SERIES/NAME relative to the mount (run1/step-200), a path inside the\n"
		   "mount (/mnt/ckpt/run1/step-200/model.pt; for rm and commit only the\n"
		   "generation's own path), or id:N (the id list --json shows).\n"
		   "\noptions: --json (any command), --cache DIR (instead of MOUNTPOINT: the cache\n"
		   "directory; without a running daemon, changes are made offline), --as-owner\n"
		   "(root with --cache DIR another user owns: act as that user; without it root\n"
		   "is refused there, exit 5)\n\n%s"
		   "\nSee ckptfs-admin(1) and docs/ADMIN.md.\n",
		admin_exit_help);
}

static void admin_command_help(const struct admin_command *c)
{
	char syn[128];
	const char *sp = strchr(c->synopsis, ' ');
	if (c->need & ADMIN_NEED_META) /* its own target: no mount, no cache */
		snprintf(syn, sizeof(syn), "%s", c->synopsis);
	else
		snprintf(syn, sizeof(syn), "%.*s (MOUNTPOINT | --cache DIR)%s",
			 sp ? (int)(sp - c->synopsis) : (int)strlen(c->synopsis), c->synopsis,
			 sp ? sp : "");
	printf("usage: ckptfs-admin [--json] %s\n\n%s\n%s", syn, c->summary, c->help);
	if (c->need & ADMIN_NEED_CHANGE)
		printf("\nMounted, the change is made by the daemon (control channel); with --cache\n"
		       "and no daemon running, offline under the cache lock.\n");
	printf("\n%s", admin_exit_help);
}

static const struct admin_command *admin_find(const char *name)
{
	for (size_t i = 0; i < ADMIN_NCOMMANDS; i++)
		if (strcmp(admin_commands[i].name, name) == 0)
			return &admin_commands[i];
	return NULL;
}

/* ---- the command line ---- */

static int admin_parse(int argc, char **argv, struct admin *a, const struct admin_command **cmd)
{
	int i = 1;
	bool help = false;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			a->json = true;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			help = true;
		} else if (strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0) {
			printf("ckptfs-admin %s (catalog schema %d, store format %d, control protocol 1)\n",
			       CKPTFS_VERSION, CAT_SCHEMA_VERSION, STORE_MARKER_VERSION);
			return -1;
		} else {
			admin_err("unknown option '%s' (see ckptfs-admin --help)", argv[i]);
			return ADMIN_USAGE;
		}
	}
	if (i >= argc) {
		if (help) {
			admin_usage(stdout);
			return -1;
		}
		admin_err("expected a COMMAND (see ckptfs-admin --help)");
		return ADMIN_USAGE;
	}
	if (strcmp(argv[i], "help") == 0) {
		const struct admin_command *c = i + 1 < argc ? admin_find(argv[i + 1]) : NULL;
		if (c)
			admin_command_help(c);
		else
			admin_usage(stdout);
		return -1;
	}
	a->cmd = argv[i];
	*cmd = admin_find(argv[i]);
	if (!*cmd) {
		admin_err("unknown command '%s' (see ckptfs-admin --help)", argv[i]);
		return ADMIN_USAGE;
	}
	if (help) {
		admin_command_help(*cmd);
		return -1;
	}
	bool opts = true;
	for (i++; i < argc; i++) {
		const char *s = argv[i];
		if (opts && s[0] == '-' && s[1]) {
			const char *val = NULL;
			if (strcmp(s, "--") == 0)
				opts = false;
			else if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
				admin_command_help(*cmd);
				return -1;
			} else if (strcmp(s, "--json") == 0)
				a->json = true;
			else if (strcmp(s, "--all") == 0 && *cmd == admin_find("list"))
				a->all = true;
			else if (strcmp(s, "--force") == 0 &&
				 (*cmd == admin_find("rm") || *cmd == admin_find("export") ||
				  *cmd == admin_find("rebuild")))
				a->force = true;
			else if (strcmp(s, "--dry-run") == 0 && *cmd == admin_find("gc"))
				a->dry_run = true;
			else if (strcmp(s, "--delete") == 0 && *cmd == admin_find("gc"))
				a->gc_delete = true;
			else if (strcmp(s, "--break") == 0 && *cmd == admin_find("claim"))
				a->claim_break = true;
			else if (strcmp(s, "--prometheus") == 0 && *cmd == admin_find("stats"))
				a->prometheus = true;
			else if ((strcmp(s, "--timeout") == 0 || strncmp(s, "--timeout=", 10) == 0) &&
				 (*cmd == admin_find("wait") || *cmd == admin_find("umount"))) {
				val = s[9] == '=' ? s + 10 : (i + 1 < argc ? argv[++i] : NULL);
				char *end;
				a->timeout_s = val ? strtod(val, &end) : -1;
				if (!val || end == val || *end || a->timeout_s < 0) {
					admin_err("%s: --timeout needs a number of seconds", a->cmd);
					return ADMIN_USAGE;
				}
			} else if (strcmp(s, "--meta") == 0 && *cmd == admin_find("rebuild")) {
				a->meta = true; /* the target is the URL (admin_rebuild.c) */
			} else if (strcmp(s, "--name") == 0 && *cmd == admin_find("import")) {
				if (i + 1 >= argc) {
					admin_err("import: --name needs a NAME");
					return ADMIN_USAGE;
				}
				a->name = argv[++i];
			} else if (strcmp(s, "--as-owner") == 0) {
				a->as_owner = true; /* root on another user's cache: admin_root_on_other */
			} else if (strcmp(s, "--cache") == 0) {
				if (i + 1 >= argc || a->target) {
					admin_err("--cache needs a DIR, instead of MOUNTPOINT");
					return ADMIN_USAGE;
				}
				a->target = argv[++i];
				a->by_cache = true;
			} else {
				admin_err("%s: unknown option '%s' (see ckptfs-admin %s --help)", a->cmd, s,
					  a->cmd);
				return ADMIN_USAGE;
			}
			continue;
		}
		if (!a->target) {
			a->target = s;
		} else if (a->npos < (int)(sizeof(a->pos) / sizeof(a->pos[0]))) {
			a->pos[a->npos++] = s;
		} else {
			admin_err("%s: too many arguments (see ckptfs-admin %s --help)", a->cmd, a->cmd);
			return ADMIN_USAGE;
		}
	}
	if (!a->target) {
		admin_err("%s: expected MOUNTPOINT or --cache DIR (see ckptfs-admin %s --help)", a->cmd,
			  a->cmd);
		return ADMIN_USAGE;
	}
	return ADMIN_OK;
}

/* ---- finding the cache, the daemon and the catalog ---- */

/* a->mount is a path inside a ckptfs mount, not its root: walks up to the
 * root (the one directory with user.ckptfs.cache), staying on the same file
 * system, and keeps the path it started from in a->inner. */
static int admin_mount_root(struct admin *a)
{
	struct stat start, up;
	char path[PATH_MAX];
	if (stat(a->mount, &start) != 0)
		return -errno;
	snprintf(path, sizeof(path), "%s", a->mount);
	for (;;) {
		char *slash = strrchr(path, '/');
		if (!slash || slash == path)
			return -ENODATA;
		*slash = '\0';
		if (stat(path, &up) != 0 || up.st_dev != start.st_dev)
			return -ENODATA;
		ssize_t n = getxattr(path, "user.ckptfs.cache", a->cache, sizeof(a->cache) - 1);
		if (n >= 0) {
			a->cache[n] = '\0';
			snprintf(a->inner, sizeof(a->inner), "%s", a->mount);
			snprintf(a->mount, sizeof(a->mount), "%s", path);
			return 0;
		}
		if (errno != ENODATA)
			return -errno;
	}
}

static int admin_from_mount(struct admin *a)
{
	if (!realpath(a->target, a->mount)) {
		int err = errno;
		a->mount[0] = '\0'; /* undefined after a failure */
		if (err == ENOTCONN) {
			admin_err("%s: the ckptfs daemon is not running (the mount is stale: %s); "
				  "unmount it with fusermount3 -u",
				  a->target, strerror(err));
			return ADMIN_NO_DAEMON;
		}
		admin_err("%s: %s", a->target, strerror(err));
		return err == EACCES ? ADMIN_PERM : ADMIN_NOT_CKPTFS;
	}
	ssize_t n = getxattr(a->mount, "user.ckptfs.cache", a->cache, sizeof(a->cache) - 1);
	if (n < 0 && errno == ENODATA && admin_mount_root(a) == 0)
		return ADMIN_OK; /* a path inside the mount (like `juicefs info PATH`) */
	if (n < 0) {
		int err = errno;
		if (err == ENOTCONN) {
			admin_err("%s: the ckptfs daemon is not running (the mount is stale: %s); "
				  "unmount it with fusermount3 -u",
				  a->mount, strerror(err));
			return ADMIN_NO_DAEMON;
		}
		if (err == EACCES || err == EPERM) {
			admin_err("%s: permission denied (only root and the daemon's user may)", a->mount);
			return ADMIN_PERM;
		}
		admin_err("%s: not a ckptfs mount (no user.ckptfs.cache on it: %s); for a cache with "
			  "no mount give --cache DIR",
			  a->mount, strerror(err == ENODATA ? EINVAL : err));
		return ADMIN_NOT_CKPTFS;
	}
	a->cache[n] = '\0';
	return ADMIN_OK;
}

/* Whether DIR is an existing directory with no entry but . and .. */
static bool admin_dir_is_empty(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return false;
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)) != NULL)
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

static int admin_read_backing(struct admin *a)
{
	char path[PATH_MAX + 16];
	cachedir_path(a->cache, CACHEDIR_BACKING, path, sizeof(path));
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); /* trust.h 3 */
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (fd >= 0 && !f)
		close(fd);
	if (!f || !fgets(a->backing, sizeof(a->backing), f)) {
		int err = errno;
		if (f)
			fclose(f);
		if (err == EACCES) {
			admin_err("cache %s: permission denied (only root and the daemon's user may)",
				  a->cache);
			return ADMIN_PERM;
		}
		if (admin_dir_is_empty(a->cache)) /* review 43 F4: a cache wiped on purpose */
			admin_err("%s: not a ckptfs cache (no %s): the directory is empty; a mount of"
				  " it (ckptfs -o cache=%s BACKING MOUNTPOINT) rebuilds the catalog"
				  " from BACKING", a->cache, path, a->cache);
		else
			admin_err("%s: not a ckptfs cache (no %s)", a->cache, path);
		return ADMIN_NOT_CKPTFS;
	}
	fclose(f);
	a->backing[strcspn(a->backing, "\n")] = '\0';
	return ADMIN_OK;
}

/* Invariant A1 (review 35 F5): root does not act on a cache another user
 * owns (as the daemon refuses one: fs/trust.h 1). Its files are that
 * user's to write: CACHE/backing names any BACKING, CACHE/catalog.db says
 * whether the catalog ever held a claim (a "fresh" one takes another
 * catalog's released claim), so root would read, claim and (gc --delete)
 * remove on a BACKING the user chose. With --cache DIR owned by a uid
 * other than 0, root is refused (exit 5, before CACHE/backing is read),
 * naming the cache, its owner and how to run it as the owner; with
 * --as-owner it drops to the owner's uid, gid and groups first, so that
 * everything opened after is opened with the owner's rights. umount
 * (reading the cache's state only) is not refused: admin_umount.c bounds
 * what it does. Through a mount the daemon, which runs as the owner,
 * checked its cache itself (trust.h 1); changes go through it.
 * The owner is the one of the directory itself (review 36 F4d): DIR is
 * opened once, O_DIRECTORY | O_NOFOLLOW (a symlink is refused: give the
 * real path), and fstat'ed. Everything after opens by the cache's path
 * (SQLite takes a path, and resolves a /proc/self/fd link back to one), so
 * root goes on only once no other user can change where that path leads:
 * the directory writable by its owner alone and every directory above it
 * root's or the owner's, not writable by others without the sticky bit
 * (safeopen.h 4: the daemon's own rule for its cache, trust.h 1), and the
 * path still leading to the directory judged. A swap of a parent between
 * the owner test and the opens (stat saw root's directory, the opens reach
 * a user's) then needs a directory only root or the owner, as whom the
 * tool acts, may change. */
static int admin_root_on_other(struct admin *a, unsigned need)
{
	struct stat sb, now;
	if (getuid() != 0 || !a->by_cache || (need & ADMIN_NEED_CACHE_ONLY))
		return ADMIN_OK;
	char given[PATH_MAX];
	size_t len = strlen(a->target);
	while (len > 1 && a->target[len - 1] == '/') /* "DIR/" would follow a symlink DIR */
		len--;
	snprintf(given, sizeof(given), "%.*s", (int)len, a->target);
	int fd = open(given, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		if ((err == ENOTDIR || err == ELOOP) && lstat(given, &now) == 0 &&
		    S_ISLNK(now.st_mode)) {
			admin_err("--cache %s: a symlink (to %s): give the real path (as root the tool "
				  "judges the cache directory itself)", a->target, a->cache);
			return ADMIN_PERM;
		}
		admin_err("--cache %s: %s", a->target, strerror(err));
		return err == EACCES ? ADMIN_PERM : ADMIN_NOT_CKPTFS;
	}
	int err = fstat(fd, &sb) == 0 ? 0 : errno;
	close(fd);
	if (err != 0) {
		admin_err("--cache %s: %s", a->target, strerror(err));
		return ADMIN_PROBLEM;
	}
	struct passwd *pw = sb.st_uid != 0 ? getpwuid(sb.st_uid) : NULL;
	char owner[64];
	if (pw)
		snprintf(owner, sizeof(owner), "%s", pw->pw_name);
	else
		snprintf(owner, sizeof(owner), "%ld", (long)sb.st_uid);
	if (sb.st_uid != 0 && !a->as_owner) {
		admin_err("cache %s: owned by %s (uid %ld), not root: refused as root, since that user "
			  "writes its backing file and catalog and root would act on whatever BACKING "
			  "they name; run it as the owner (runuser -u %s -- ckptfs-admin %s --cache %s "
			  "...) or give --as-owner", a->cache, pw ? pw->pw_name : "an unknown user",
			  (long)sb.st_uid, owner, a->cmd, a->cache);
		return ADMIN_PERM;
	}
	char why[PATH_MAX + 256];
	int rc = safe_check_owned_dir(a->cache, sb.st_uid, false, NULL, why, sizeof(why));
	if (rc == 0 && (lstat(a->cache, &now) != 0 || now.st_dev != sb.st_dev ||
			now.st_ino != sb.st_ino)) {
		snprintf(why, sizeof(why), "%s: no longer the directory %s opened", a->cache, a->target);
		rc = -ESTALE;
	}
	if (rc != 0) {
		admin_err("cache %s: refused as root: %s; another user could change where the path "
			  "leads once root has checked its owner", a->cache, why);
		return ADMIN_PERM;
	}
	if (sb.st_uid == 0)
		return ADMIN_OK;
	gid_t gid = pw ? pw->pw_gid : sb.st_gid;
	err = 0;
	if ((pw ? initgroups(pw->pw_name, gid) : setgroups(0, NULL)) != 0 ||
	    setresgid(gid, gid, gid) != 0 || setresuid(sb.st_uid, sb.st_uid, sb.st_uid) != 0)
		err = errno;
	if (err == 0 && (setuid(0) == 0 || geteuid() == 0)) /* the drop must not be undoable */
		err = EPERM;
	if (err != 0) {
		admin_err("cache %s: --as-owner: cannot become its owner %s (uid %ld, gid %ld): %s",
			  a->cache, owner, (long)sb.st_uid, (long)gid, strerror(err));
		return ADMIN_PERM;
	}
	return ADMIN_OK;
}

/* Only root and the owner of the cache (the daemon's user) may. */
static int admin_check_owner(struct admin *a)
{
	struct stat sb;
	if (stat(a->cache, &sb) != 0) {
		admin_err("cache %s: %s", a->cache, strerror(errno));
		return errno == EACCES ? ADMIN_PERM : ADMIN_NOT_CKPTFS;
	}
	if (getuid() != 0 && getuid() != sb.st_uid) {
		admin_err("%s: permission denied: only root and the daemon's user (uid %ld) may use "
			  "ckptfs-admin on it",
			  a->mount[0] ? a->mount : a->cache, (long)sb.st_uid);
		return ADMIN_PERM;
	}
	return ADMIN_OK;
}

/* Is the daemon there? With a mount it answers (we got the xattr); its
 * channel must too. With --cache, the cache lock says. */
static int admin_find_daemon(struct admin *a, unsigned need)
{
	cachedir_path(a->cache, CACHEDIR_CONTROL_SOCK, a->sock, sizeof(a->sock));
	bool running = !a->by_cache;
	char holder[128] = "";
	if (a->by_cache) {
		char path[PATH_MAX + 16];
		int fd = cachedir_lock_open(a->cache, O_RDWR | O_NOFOLLOW, path, sizeof(path));
		if (fd < 0 && errno == EACCES) {
			admin_err("cache %s: permission denied on %s", a->cache, path);
			return ADMIN_PERM;
		}
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
			running = true;
			admin_lock_holder(fd, holder, sizeof(holder)); /* named if no daemon answers */
			close(fd);
		} else if (need & (ADMIN_NEED_CHANGE | ADMIN_NEED_REBUILD)) {
			if (fd < 0 &&
			    (fd = cachedir_lock_open(a->cache, O_RDWR | O_CREAT | O_NOFOLLOW, path,
							sizeof(path))) >= 0 &&
			    flock(fd, LOCK_EX | LOCK_NB) != 0) {
				close(fd); /* a daemon started this instant */
				admin_err("cache %s: in use (a daemon is starting); try again", a->cache);
				return ADMIN_BUSY;
			}
			a->lock_fd = fd; /* held until exit: no daemon starts meanwhile */
		} else if (fd >= 0) {
			close(fd);
		}
	}
	if (!running)
		return ADMIN_OK;
	int rc = admin_ctl_probe(a->sock);
	if (rc == 0) {
		a->daemon = true;
		return ADMIN_OK;
	}
	if ((need & (ADMIN_NEED_CHANGE | ADMIN_NEED_REBUILD)) && holder[0] && rc != -EACCES &&
	    rc != -EPERM) {
		/* the lock is held and nobody answers: another offline ckptfs-admin,
		 * or a daemon starting or stopping, not a daemon to ask */
		admin_err("cache %s: in use: its lock %s/" CACHEDIR_LOCK " is held by %s and no daemon"
			  " answers on %s (another ckptfs-admin working offline, or a daemon starting or"
			  " stopping); nothing was changed: try again once it is done",
			  a->cache, a->cache, holder, a->sock);
		return ADMIN_BUSY;
	}
	if (!(need & ADMIN_NEED_CHANGE) || (need & ADMIN_NEED_REBUILD))
		return ADMIN_OK; /* reading needs only the catalog; rebuild refuses a daemon itself */
	if (rc == -EACCES || rc == -EPERM) {
		admin_err("%s: permission denied on the control channel %s (only root and the "
			  "daemon's user may)", a->mount[0] ? a->mount : a->cache, a->sock);
		return ADMIN_PERM;
	}
	admin_err("%s: the daemon does not answer on its control channel %s (%s): is it running?",
		  a->mount[0] ? a->mount : a->cache, a->sock, strerror(-rc));
	return ADMIN_NO_DAEMON;
}

int admin_need_objects(struct admin *a)
{
	int err = a->store ? 0 : store_open(a->cache, &a->store);
	if (err != 0) {
		admin_err("cache %s: cannot open its chunk store: %s", a->cache, strerror(-err));
		return err == -EACCES ? ADMIN_PERM : ADMIN_PROBLEM;
	}
	err = a->bk ? 0 : backing_open(a->backing, 0, &a->bk);
	if (err != 0) {
		admin_err("BACKING %s: cannot open: %s", a->backing, strerror(-err));
		return err == -EACCES ? ADMIN_PERM : ADMIN_PROBLEM;
	}
	return ADMIN_OK;
}

static int admin_reclaim(void *arg, const uint8_t hash[CAT_HASH_LEN])
{
	return store_remove(arg, hash);
}

/* An offline change claims BACKING for this catalog, renewed until exit;
 * a catalog that never held it records that it now does (claim.h
 * invariant 8). */
static int admin_claim(struct admin *a)
{
	bool claimed = false;
	int err = cat_claimed(a->cat, &claimed);
	if (err != 0) {
		admin_err("catalog %s/" CACHEDIR_CATALOG ": cannot read it: %s", a->cache,
			  strerror(-err));
		return ADMIN_PROBLEM;
	}
	return admin_claim_for(a, a->cat, !claimed, false);
}

int admin_claim_for(struct admin *a, struct cat *cat, bool fresh, bool stand_in)
{
	char id[CLAIM_ID_LEN + 1], msg[PATH_MAX + 512];
	int err = cat_catalog_id(cat, id, sizeof(id));
	if (err != 0) {
		admin_err("catalog %s/" CACHEDIR_CATALOG ": cannot read its id: %s", a->cache,
			  strerror(-err));
		return ADMIN_PROBLEM;
	}
	struct claim_ledger led; /* claim.h invariants 12, 13 */
	err = cat_claim_ledger(cat, &led);
	led.stand_in = stand_in;
	if (err == 0)
		err = claim_acquire_led(a->bk, id, false, fresh, &led, a->cache, 0, &a->claim, msg,
					sizeof(msg));
	else
		snprintf(msg, sizeof(msg), "catalog %s/" CACHEDIR_CATALOG ": cannot read its takes of "
			 "the claim: %s", a->cache, strerror(-err));
	if (err == 0 && fresh && (err = cat_claimed_set(cat)) != 0)
		snprintf(msg, sizeof(msg), "catalog %s/" CACHEDIR_CATALOG ": cannot record the claim: %s",
			 a->cache, strerror(-err));
	if (err == 0 && (err = claim_start(a->claim)) != 0)
		snprintf(msg, sizeof(msg), "BACKING %s: cannot renew the claim: %s", a->backing,
			 strerror(-err));
	if (err != 0) {
		/* taken but not recorded: given back, so the catalog that held it
		 * is not left behind one that wrote nothing (review 56 L11) */
		claim_abandon(a->claim);
		a->claim = NULL;
		admin_err("%s", msg);
		return err == -EBUSY ? ADMIN_BUSY : ADMIN_PROBLEM;
	}
	return ADMIN_OK;
}

int admin_claim_get(struct backing *bk, struct claim_rec *rec)
{
	return claim_current_rec(bk, rec);
}

/* The local catalog of a node holds no generations and no namespace;
 * BACKING's claim says it is a node's ("mode shared": nodes never remove it,
 * claim.h invariant 6), whoever holds it now. *claim_read: a claim was read
 * (when none can be, admin_node_offline asks the catalog's role marker). */
static bool admin_shared_offline(struct admin *a, bool *claim_read)
{
	struct claim_rec rec;
	*claim_read = false;
	if (!a->bk) {
		log_setup(stderr, LOG_LVL_OFF); /* BACKING away: the caller says what follows */
		int err = backing_open(a->backing, 0, &a->bk);
		log_setup(stderr, LOG_LVL_WARN);
		if (err != 0)
			return false;
	}
	*claim_read = admin_claim_get(a->bk, &rec) == 0;
	return *claim_read && rec.shared;
}

/* A node's cache of a shared catalog (-o meta=) with no daemon answering:
 * its local catalog holds neither generations nor the namespace (they are
 * in PostgreSQL, which only the daemon reaches), so reading it would answer
 * wrongly and changing it offline (gc --delete walking BACKING, rebuild)
 * would act on the cluster's data as if this cache's were all of it. */
static int admin_node_offline(struct admin *a, unsigned need)
{
	if (a->daemon || (need & ADMIN_NEED_CACHE_ONLY) ||
	    !(need & (ADMIN_NEED_READ | ADMIN_NEED_REBUILD)))
		return ADMIN_OK;
	const char *says = "BACKING's claim says so";
	bool claim_read;
	if (!admin_shared_offline(a, &claim_read)) {
		/* BACKING away or no claim to read: the catalog's own role marker
		 * (catalog.c invariant 9) still tells; a catalog that cannot be
		 * opened read-only (missing, an older schema) says nothing */
		if (claim_read)
			return ADMIN_OK;
		char path[PATH_MAX + 16];
		struct cat *cat = NULL;
		bool node = false;
		cachedir_path(a->cache, CACHEDIR_CATALOG, path, sizeof(path));
		log_setup(stderr, LOG_LVL_OFF); /* what fails here is the command's to say */
		if (access(path, F_OK) != 0 || cat_open_readonly(path, &cat) != 0 ||
		    cat_role_node(cat, &node) != 0)
			node = false;
		cat_close(cat);
		log_setup(stderr, LOG_LVL_WARN);
		if (!node)
			return ADMIN_OK;
		says = "its catalog's role marker says so";
	}
	if (need & ADMIN_NEED_REBUILD)
		admin_err("rebuild: %s is the cache of a node of a shared catalog (%s): its catalog is"
			  " PostgreSQL's; for a lost database use rebuild --meta URL BACKING",
			  a->cache, says);
	else
		admin_err("%s: %s is the cache of a node of a shared catalog (%s) and no daemon"
			  " answers: the generations are in PostgreSQL, which only a mounted node"
			  " reaches; run it on a node's mount (nothing was read or changed)",
			  a->cmd, a->cache, says);
	return ADMIN_UNSUPPORTED;
}

static int admin_open(struct admin *a, unsigned need)
{
	int rc = a->by_cache ? ADMIN_OK : admin_from_mount(a);
	if (rc == ADMIN_OK && a->by_cache && !realpath(a->target, a->cache)) {
		admin_err("--cache %s: %s", a->target, strerror(errno));
		return errno == EACCES ? ADMIN_PERM : ADMIN_NOT_CKPTFS;
	}
	if (rc == ADMIN_OK)
		rc = admin_root_on_other(a, need); /* A1: before anything in the cache is read */
	if (rc == ADMIN_OK)
		rc = admin_read_backing(a);
	if (rc == ADMIN_OK)
		rc = admin_check_owner(a);
	if (rc == ADMIN_OK)
		rc = admin_find_daemon(a, need);
	if (rc == ADMIN_OK)
		rc = admin_node_offline(a, need);
	if (rc != ADMIN_OK || !(need & ADMIN_NEED_READ))
		return rc;
	bool offline_change = (need & ADMIN_NEED_CHANGE) && !a->daemon;
	/* offline, the catalog's reclaim removes cache objects, as the daemon's does */
	if (((need & ADMIN_NEED_STORE) || offline_change) && admin_need_objects(a) != ADMIN_OK)
		return ADMIN_PROBLEM;
	char path[PATH_MAX + 16];
	cachedir_path(a->cache, CACHEDIR_CATALOG, path, sizeof(path));
	int err = offline_change
			  ? cat_open(path, getuid(), getgid(), admin_reclaim, a->store, &a->cat)
			  : cat_open_readonly(path, &a->cat);
	if (err == 0)
		err = aq_open(a->cat, &a->aq);
	if (err != 0) {
		admin_err("catalog %s: cannot open: %s", path, strerror(-err));
		return err == -EACCES || err == -EPERM ? ADMIN_PERM : ADMIN_NOT_CKPTFS;
	}
	return offline_change ? admin_claim(a) : ADMIN_OK;
}

/* MOUNTPOINT was a path inside the mount: for the commands that name a
 * generation or a series it is that GEN or SERIES (`ckptfs-admin show
 * /mnt/ckpt/run1/step-5`); the others act on the whole mount. */
static int admin_inner_path(struct admin *a, const struct admin_command *cmd)
{
	static const char *const takes[] = { "list", "show", "commit", "pin", "unpin", "rm",
					     "wait", "export", NULL };
	bool named = false;
	for (int i = 0; takes[i]; i++)
		named = named || strcmp(cmd->name, takes[i]) == 0;
	if (!named)
		return ADMIN_OK;
	if (a->npos >= (int)(sizeof(a->pos) / sizeof(a->pos[0]))) {
		admin_err("%s: too many arguments", a->cmd);
		return ADMIN_USAGE;
	}
	memmove(&a->pos[1], &a->pos[0], (size_t)a->npos * sizeof(a->pos[0]));
	a->pos[0] = a->inner;
	a->npos++;
	return ADMIN_OK;
}

int main(int argc, char **argv)
{
	log_setup(stderr, LOG_LVL_WARN);
	struct admin a = { .timeout_s = -1, .lock_fd = -1 };
	const struct admin_command *cmd = NULL;
	int rc = admin_parse(argc, argv, &a, &cmd);
	if (rc < 0)
		return ADMIN_OK; /* help was printed */
	if (rc == ADMIN_OK && cmd->fn == admin_cmd_gc && a.dry_run && a.gc_delete) {
		admin_err("gc: --dry-run and --delete contradict each other");
		rc = ADMIN_USAGE;
	}
	a.dry_run = !a.gc_delete; /* gc removes only when told to */
	if (rc == ADMIN_OK && a.as_owner && !a.by_cache) {
		admin_err("%s: --as-owner goes with --cache DIR (through a mount the daemon acts as"
			  " the owner already)", a.cmd);
		rc = ADMIN_USAGE;
	}
	if (rc == ADMIN_OK && (cmd->need & ADMIN_NEED_MOUNT) && a.by_cache) {
		admin_err("%s: works only through the mounted file system: give MOUNTPOINT, not --cache",
			  a.cmd);
		rc = ADMIN_USAGE;
	}
	/* a dry-run gc only reads: no lock, the catalog read-only, no claim */
	unsigned need = 0;
	if (rc == ADMIN_OK) /* cmd is NULL after a usage error */
		need = cmd->fn == admin_cmd_gc && a.dry_run ? cmd->need & ~ADMIN_NEED_CHANGE
							    : cmd->need;
	if (rc == ADMIN_OK && !(cmd->need & ADMIN_NEED_META) && !a.meta)
		rc = admin_open(&a, need);
	if (rc == ADMIN_OK && a.inner[0])
		rc = admin_inner_path(&a, cmd);
	if (rc == ADMIN_NO_DAEMON && a.prometheus && !a.by_cache)
		admin_stats_stale(a.mount[0] ? a.mount : a.target);
	if (rc == ADMIN_OK)
		rc = cmd->fn(&a);
	fflush(stdout);
	aq_close(a.aq);
	claim_end(a.claim, true);
	cat_close(a.cat);
	store_close(a.store);
	backing_close(a.bk);
	if (a.lock_fd >= 0)
		close(a.lock_fd);
	return rc;
}
