/* storeq — chunk objects written behind the writer that cut them.
 *
 * Writing a chunk object is mostly waiting: an inode in the cache, an
 * O_DIRECT write of about a megabyte, a rename — milliseconds in which the
 * FUSE thread that cut the chunk could take the file's next write. A writer
 * hands the object to these threads instead (writer.c, writer_store) and
 * goes on; the chunk is a flight that the writer awaits before anything
 * reads or commits its pending chunks, exactly like a chunk another writer
 * is storing for it.
 *
 * Invariants:
 *  Q1. At most `depth` jobs are queued or running. storeq_try_submit never
 *      blocks: false means the queue is full (or stopping) and the caller
 *      does the work itself, so the disk queue stays short and memory
 *      bounded without ever stalling a writer on another's I/O.
 *  Q2. Every job accepted runs exactly once, on a queue thread, and
 *      storeq_stop returns only after all of them ran: nothing a job uses may
 *      be torn down before storeq_stop.
 *  Q3. A job owns itself from submission: its run function frees it.
 *
 * Thread-safe. */
#ifndef CKPTFS_STOREQ_H
#define CKPTFS_STOREQ_H

#include <stdbool.h>

struct storeq;

struct storeq_job {
	void (*run)(struct storeq_job *job); /* Q3: frees the job */
	struct storeq_job *next;              /* the queue's */
};

/* Starts `threads` threads taking at most `depth` jobs (Q1). */
int storeq_start(unsigned threads, unsigned depth, struct storeq **out);

/* true: the job will run (Q2); false: the caller runs it (Q1). */
bool storeq_try_submit(struct storeq *q, struct storeq_job *job);

/* Refuses new jobs, runs every accepted one, joins the threads, frees q.
 * NULL is allowed. */
void storeq_stop(struct storeq *q);

struct storeq_stats {
	unsigned long long behind; /* jobs taken by the queue threads */
	unsigned long long full;   /* submissions refused: the caller stored */
};
void storeq_stats(struct storeq *q, struct storeq_stats *out);

#endif
