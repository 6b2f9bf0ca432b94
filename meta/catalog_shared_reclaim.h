/* catalog_shared_reclaim — one turn of the cluster's chunk reclaim duty
 * (issue 18, docs/MULTINODE.md "Reclaim"); catalog.h's cat_reclaim_turn. */
#ifndef CKPTFS_CATALOG_SHARED_RECLAIM_H
#define CKPTFS_CATALOG_SHARED_RECLAIM_H

#include "catalog.h"

int catshr_reclaim_turn(struct cat *cat, unsigned term_ms, cat_backing_remove_fn remove,
			void *arg, struct cat_reclaim_report *out);

#endif
