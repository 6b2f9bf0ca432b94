/* rpccount.so — counts the NFSv3 RPCs a process sends through libnfs, by
 * type, whatever sends them (libnfs's own high-level calls reach the raw
 * rpc_nfs3_*_async functions through the PLT, so an LD_PRELOAD'ed wrapper
 * sees them as well as fs/lib/backing_nfs.c's direct calls). For
 * tests/nfs/t_nfs.sh's count test and for measuring by hand:
 *
 *   cc -shared -fPIC -O2 -o rpccount.so tests/nfs/rpccount.c -ldl
 *   RPCCOUNT_OUT=counts.txt LD_PRELOAD=./rpccount.so backing-tool SPEC get REL FILE
 *
 * At exit it writes "TYPE N" lines, one per type sent, and "total N", to
 * $RPCCOUNT_OUT (appending), or to stderr when unset. Counts RPCs queued,
 * not replies: a call that times out counts once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

struct rpc_context;
typedef void (*rpc_cb)(struct rpc_context *rpc, int status, void *data, void *private_data);

enum {
	RC_NULL,
	RC_GETATTR,
	RC_SETATTR,
	RC_LOOKUP,
	RC_ACCESS,
	RC_READLINK,
	RC_READ,
	RC_WRITE,
	RC_CREATE,
	RC_MKDIR,
	RC_REMOVE,
	RC_RMDIR,
	RC_RENAME,
	RC_LINK,
	RC_READDIR,
	RC_READDIRPLUS,
	RC_FSSTAT,
	RC_FSINFO,
	RC_PATHCONF,
	RC_COMMIT,
	RC_N
};
static const char *const rc_names[RC_N] = {
	"NULL",	  "GETATTR", "SETATTR", "LOOKUP", "ACCESS",  "READLINK", "READ",
	"WRITE",  "CREATE",  "MKDIR",	"REMOVE", "RMDIR",   "RENAME",	 "LINK",
	"READDIR", "READDIRPLUS", "FSSTAT", "FSINFO", "PATHCONF", "COMMIT",
};
static atomic_ulong rc_counts[RC_N];

#define RC_WRAP(fn, idx)                                                                      \
	int fn(struct rpc_context *rpc, rpc_cb cb, void *args, void *priv)                    \
	{                                                                                     \
		static int (*next)(struct rpc_context *, rpc_cb, void *, void *);            \
		if (!next)                                                                    \
			next = (int (*)(struct rpc_context *, rpc_cb, void *, void *))dlsym( \
				RTLD_NEXT, #fn);                                              \
		atomic_fetch_add(&rc_counts[idx], 1);                                         \
		return next(rpc, cb, args, priv);                                             \
	}

RC_WRAP(rpc_nfs3_getattr_async, RC_GETATTR)
RC_WRAP(rpc_nfs3_setattr_async, RC_SETATTR)
RC_WRAP(rpc_nfs3_lookup_async, RC_LOOKUP)
RC_WRAP(rpc_nfs3_access_async, RC_ACCESS)
RC_WRAP(rpc_nfs3_readlink_async, RC_READLINK)
RC_WRAP(rpc_nfs3_read_async, RC_READ)
RC_WRAP(rpc_nfs3_write_async, RC_WRITE)
RC_WRAP(rpc_nfs3_create_async, RC_CREATE)
RC_WRAP(rpc_nfs3_mkdir_async, RC_MKDIR)
RC_WRAP(rpc_nfs3_remove_async, RC_REMOVE)
RC_WRAP(rpc_nfs3_rmdir_async, RC_RMDIR)
RC_WRAP(rpc_nfs3_rename_async, RC_RENAME)
RC_WRAP(rpc_nfs3_link_async, RC_LINK)
RC_WRAP(rpc_nfs3_readdir_async, RC_READDIR)
RC_WRAP(rpc_nfs3_readdirplus_async, RC_READDIRPLUS)
RC_WRAP(rpc_nfs3_fsstat_async, RC_FSSTAT)
RC_WRAP(rpc_nfs3_fsinfo_async, RC_FSINFO)
RC_WRAP(rpc_nfs3_pathconf_async, RC_PATHCONF)
RC_WRAP(rpc_nfs3_commit_async, RC_COMMIT)

__attribute__((destructor)) static void rc_dump(void)
{
	const char *path = getenv("RPCCOUNT_OUT");
	FILE *f = path ? fopen(path, "a") : stderr;
	if (!f)
		return;
	unsigned long total = 0;
	for (int i = 0; i < RC_N; i++) {
		unsigned long n = atomic_load(&rc_counts[i]);
		if (n)
			fprintf(f, "%s %lu\n", rc_names[i], n);
		total += n;
	}
	fprintf(f, "total %lu\n", total);
	if (f != stderr)
		fclose(f);
}
