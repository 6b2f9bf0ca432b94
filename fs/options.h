/* options — the daemon's command line and the checks before mounting. */
#ifndef CKPTFS_OPTIONS_H
#define CKPTFS_OPTIONS_H

#include <stdio.h>

#include "ckptfs.h"
#include "version.h"

struct options_result {
	struct ckptfs_options opt;
	char fuse_opts[4096]; /* comma-separated FUSE options to pass through */
};

/* Parses argv and checks BACKING, the mountpoint and the cache. Returns 0 to
 * go on, 1 when the command is done (--help, --version), -1 after printing
 * one line naming the bad input and the reason. */
int options_parse(int argc, char **argv, struct options_result *r);
void options_usage(FILE *f);

#endif
