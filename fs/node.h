/* node — the daemon's in-memory view of inodes the kernel knows about.
 *
 * The catalog holds what an inode is; a node holds what is happening to it:
 * how many lookups the kernel holds (FUSE forget protocol), how many handles
 * are open, the writer of a file being written, and the lock that orders
 * reads against writes and commits.
 *
 * Invariants:
 *  1. A node exists while nlookup > 0 or open_count > 0; when both reach 0 it
 *     is freed, and an inode with no links left is deleted from the catalog
 *     — so an unlinked file stays readable through open handles until the
 *     last one closes. With a shared catalog the catalog also keeps it
 *     while another node has it open (pgns.h N14): this table only knows
 *     this node's handles.
 *  2. node->writer is only touched with node->rw held for writing; reading file
 *     bytes holds it for reading, so a commit never reclaims a chunk that a
 *     read of the same file is using.
 *  3. A node is handed out with a reference (node_get/node_put); the table
 *     lock is never held while the rwlock is taken.
 *  4. Inodes are released (cat_inodes_release) in batches: a freed node's
 *     inode is queued, and the reaper thread releases the queue once a burst
 *     of deletions is over (nothing queued for 200 ms), at the latest 5 s
 *     after the oldest was queued or once 65 536 are (at once when a removed
 *     tree was queued: node_unlinked_many), skipping any that has a node
 *     again. Until then the inode only has nlink 0 (or
 *     is still linked, and the catalog skips it); a crash leaves it to the
 *     next cat_open. Before node_table_start, and after the reaper stops
 *     (node_table_free flushes the queue), release is immediate.
 *  5. node_unlinked_many drops the data of removed inodes no handle has open
 *     (a generation removed: its files' chunks go at once, though the
 *     kernel may keep their lookups for long) and marks each such node,
 *     under the table lock, in the same step that found it idle: node_open
 *     refuses a marked node (-ENOENT), so no handle opened after that check
 *     reads a file whose extents are going (zeros) or writes into it (bytes
 *     lost). ns.h invariant 7 refuses the opens by name before that.
 *  6. The kernel's lookups end with its session, and it sends no FORGET for
 *     them then (an unmount tears the connection down first): at teardown
 *     node_session_end drops them all and frees the nodes only they held;
 *     those removed while held (node->removed: node_unlinked,
 *     node_unlinked_many) have their inodes released as in invariant 1,
 *     before the uploader stops (no catalog call for the others).
 *     A clean unmount so leaves no inode with nlink 0 the kernel merely had
 *     looked up (a generation removed behind its back: keep-latest-k, an
 *     abort, an admin rm); only a handle the kernel never released (a
 *     SIGTERM or lazy unmount with a file open) keeps its unlinked inode,
 *     with its data, for the next start's recovery. */
#ifndef CKPTFS_NODE_H
#define CKPTFS_NODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cat;
struct writer;
struct node_table;

struct node {
	uint64_t ino;
	uint64_t nlookup;    /* kernel references (lookup/create/mknod…) minus forgets */
	uint32_t open_count; /* open file handles */
	uint32_t write_handles; /* of them, opened for writing */
	uint32_t refs;       /* temporary references held by running operations */
	bool data_dropped;   /* removed with no handle open: its data went (invariant 5) */
	bool removed;        /* a name or tree of it was removed while held (invariant 6) */
	pthread_rwlock_t rw;
	struct writer *writer; /* non-NULL while a handle has written or truncated */
	/* the file had setuid or setgid at its last open or chmod: a write asks
	 * whether to clear them (ns.c, ns_killpriv); __atomic loads/stores */
	bool setid;
	/* shared catalog: this node's ns_open row of the inode exists (ns.c,
	 * pgns.h N14); under rw */
	bool shared_open;
	/* shared catalog: write handles of the inode are open here, yet its
	 * ns_writing row was dropped at a flush and its writer freed (ns.c,
	 * ns.h invariant 14); under rw */
	bool writing_parked;
	/* shared catalog: the last close could not end the parked mark of the
	 * inode's ns_open row; ns.c ends it once the catalog answers (ns.h
	 * invariant 15); under rw */
	bool park_pending;
	/* a file whose close may commit a generation (gen_is_trigger_name):
	 * its name and directory as last looked up; under the table lock */
	uint64_t trigger_parent;
	char trigger_name[40];
	struct node *next;     /* hash chain */
};

/* The table of the inodes of cat (which releases them: invariant 4). */
int node_table_new(struct cat *cat, struct node_table **out);
/* Starts the reaper (invariant 4) once mounted and daemonized. */
int node_table_start(struct node_table *t);
/* Stops the reaper and releases what it had queued (before the uploader
 * stops: the chunks this frees queue their removal from BACKING). Later
 * releases are immediate. node_table_free calls it too. */
void node_table_stop(struct node_table *t);
/* The kernel's session is over (the FUSE loop returned, no request runs):
 * its lookups go, the nodes only they held are freed, and the inodes of
 * those removed while held are released now (invariant 6). Nodes with a
 * handle open stay for node_table_free. */
void node_session_end(struct node_table *t);
/* Frees every node (the reaper stopped first). */
void node_table_free(struct node_table *t);
/* Releases the queued inodes now (before a check or statistics). */
void node_release_flush(struct node_table *t);

/* Returns the node with a temporary reference, creating it. NULL on ENOMEM. */
struct node *node_get(struct node_table *t, uint64_t ino);
/* Drops a temporary reference. */
void node_put(struct node_table *t, struct node *n);

/* Kernel lookup counting: +1 per entry replied, -n per forget. */
void node_lookup_add(struct node_table *t, uint64_t ino);
void node_forget(struct node_table *t, uint64_t ino, uint64_t nlookup);

/* Handle counting. node_open gives the node with open_count incremented:
 * 0, -ENOMEM, or -ENOENT (its data was dropped: invariant 5).
 * node_close decrements it and returns how many handles remain; the caller
 * keeps a temporary reference (to finish the writer when 0 remain, under
 * n->rw) and drops it with node_put. */
int node_open(struct node_table *t, uint64_t ino, struct node **out);
uint32_t node_close(struct node_table *t, struct node *n);
/* The handles of n open now. */
uint32_t node_open_count(struct node_table *t, struct node *n);

/* The node if the kernel or a handle holds it, with a temporary reference;
 * NULL otherwise (nothing is created). */
struct node *node_peek(struct node_table *t, uint64_t ino);

/* After the kernel removed an entry (unlink, rmdir, rename over it): an
 * inode without a node is released (with the next batch) if it has no
 * links; otherwise its last node_put/forget does that. */
void node_unlinked(struct node_table *t, uint64_t ino);

/* After a tree was removed behind the kernel's back (a generation deleted or
 * aborted): the inodes of inos[0..n) that nobody holds go to the reaper
 * (invariant 4); the files the kernel still holds without a handle open lose
 * their data now (a few large transactions) and their rows at FORGET. */
void node_unlinked_many(struct node_table *t, const uint64_t *inos, size_t n);

/* Counts a handle opened (+1) or closed (-1) for writing. */
void node_writers_add(struct node_table *t, struct node *n, int delta);
/* n's write handles open now (node_writers_add's count). */
unsigned node_write_handles(struct node_table *t, struct node *n);
/* Inodes with a write handle open: fills up to max, returns how many. */
size_t node_writing(struct node_table *t, uint64_t *inos, size_t max);
/* Inodes with any handle open (their chunks are not evicted from the cache). */
size_t node_opened(struct node_table *t, uint64_t *inos, size_t max);

/* Remembers (parent, name) for a node whose name is a commit trigger. */
void node_note_name(struct node_table *t, uint64_t ino, uint64_t parent, const char *name);
/* Copies the remembered trigger name; false if none. */
bool node_trigger(struct node_table *t, struct node *n, uint64_t *parent, char *name, size_t size);

/* Number of nodes (for stats and leak checks in tests). */
uint64_t node_count(struct node_table *t);

#endif
