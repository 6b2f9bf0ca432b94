/* uploader — copies the cache's work to BACKING, in queue order: chunk
 * objects, then the manifest of each committed generation version, then
 * removals (meta/upload.h has the queue, its kinds and invariants U1–U4).
 *
 * Worker threads take the oldest queued row that may start (cat_upload_ready)
 * and that touches no hash or generation another worker has in hand (U4), so
 * an old row is never starved by newer ones. A failure that looks like BACKING
 * being away (anything but a missing local object) backs every worker off,
 * doubling from 100 ms to 30 s, and is logged once; the first success after
 * it is logged too. Nothing is dropped: a row leaves the queue only when its
 * work is done or has become moot (the chunk or generation is gone).
 *
 * Every second, idle or (alone) between batches (uploader.c T7), worker 0
 * also rewrites the tree manifest (the files outside generations) if that
 * tree changed and its chunks are all on BACKING, and alone records in the
 * catalog which tree the manifest on BACKING describes (upload.h U11).
 *
 * A row whose age passes the upload deadline is logged once (the generation
 * is not durable in time); stats show the lag.
 *
 * Invariants:
 *  B1. With a shared catalog, each readiness check of chunk rows is a
 *      PostgreSQL round trip (their upload claims, catalog_shared_data.c
 *      S8), so chunk rows are asked about only in sets that fill a batch's
 *      room, but at the end of a linger: fewer rows than that wait, one
 *      worker at a time lingering (linger_ms, 50 ms by default, from when
 *      it saw them) while the writers queue more; at its end that worker
 *      asks about what is queued in one pick, puts it, and syncs its batch.
 *      A stop ends a linger at once. The claim still comes before the
 *      object's write (pgns.h N7); only when it is asked changes. Alone
 *      (SQLite), a readiness check costs no round trip: a row a pick.
 *  B2. A generation manifest's put never leaves on BACKING the manifest of
 *      a generation that ended (DESIGN invariant 5; review 34 A2). With a
 *      shared catalog the reclaim duty's R8 (catalog_shared_reclaim.c)
 *      removes an ended generation's manifests, versions 1 to its last,
 *      once, and marks them gone; a put of version v in flight meanwhile
 *      (built while the generation was COMMITTED at v; a put may take
 *      backing_timeout) would land after R8 and stay for ever, naming
 *      chunks the reclaim then removes. So:
 *      (a) put, then read the generation's row again
 *          (manifest_shared_gen_fate), then: ended (or gone) → version v is
 *          removed (absent is success) and the row ends moot; COMMITTED,
 *          not lost, durable at a higher version → v is stale and removed
 *          too; live otherwise → v stays and v-1 is removed, as ever only
 *          after v's put succeeded. Every interleaving with R8: R8 removes
 *          only after a statement that saw the generation ended (the
 *          turn's stamp, NS_RECLAIM_STAMP), and versions only grow, so it
 *          removes v too. If the re-read sees the row live, the end commits
 *          after the re-read, so after the put returned: R8's stamp and
 *          removal come later and take the object. If it sees the row
 *          ended, R8 ran before the put landed, or runs later, or is
 *          running: the row removes v itself, and R8's removal finds it
 *          or finds it absent (success). Only this row puts (gen, v) (a
 *          node that queued the same row, catshd_enqueue_undurable, does
 *          the same), and no build succeeds once the row is ended (D1).
 *          An ended save's v-1 is left to R8; v goes even before R8 may
 *          act (U6: a save renamed out of its series), which leaves
 *          BACKING as it was before the put.
 *      (b) The re-read or the removal failed (PostgreSQL or BACKING away,
 *          the claim unsure), or the daemon stopped between put and
 *          removal: the row stays queued, and its next pick finds it stale.
 *          A shared catalog's stale manifest row is not ended at the pick
 *          but given to a worker, which reads the row first, removes
 *          version v if (a) says so, and ends it moot.
 *      Alone (SQLite) the window does not exist: an ended generation's
 *      manifests leave BACKING by a row of this queue
 *      (UP_DELETE_GEN_MANIFEST, upload.h U6), queued when it ends, which
 *      no worker takes while another has a row of the same generation in
 *      hand (up_conflicts, U4), and which removes every version it lists
 *      on BACKING; a manifest row found stale after a restart is ended at
 *      the pick, and what it put before is removed by that removal row.
 *  B3. While a close waits for its chunks (uploader_wait_pending, fs/ns.h
 *      invariant 13), B1's linger ends at once and none starts, and the
 *      next pick takes that file's chunk rows before the queue's order
 *      (cat_upload_list_pending; up to 8 files at once, a ninth waits in
 *      order): claimed, put and synced as one batch at once, so the close
 *      waits for its own chunks' round trips and puts, not for the linger
 *      nor for the backlog of a save queued before it (a tracker follows
 *      its save's shards). A worker putting a set it picked gives the rows
 *      it has not begun back to the queue when a close begins to wait
 *      (once a close: urgent_new), so it waits at most for the objects
 *      in flight. Chunk rows of distinct hashes have no order
 *      among them (U4 orders rows of one hash: a hash with an older row of
 *      any kind is not taken out of order); manifests and removals wait for
 *      their chunks as before (U3, U5), so taking chunks earlier keeps
 *      them.
 *  B4. A generation manifest's put never replaces another save's manifest
 *      (review 47: a catalog that lost its WAL reused generation ids, and
 *      its next save's manifest overwrote a durable save's for good).
 *      Before each put of manifests/gen/ID.V.ckm the object at that path
 *      is looked for (one stat; absent is the rule, since versions only
 *      grow): one whose `gen` line names the same id, version and
 *      created_ns is this save's (a put repeated after a lost answer, or
 *      a damaged copy of it) and is replaced; anything else (another
 *      save's, or no readable gen line) is left as it is, the row stays
 *      queued with its reason, the save stays not durable, and one error
 *      line names the path and both saves, and what keeps the refused
 *      save (review 50 F5): an object with no readable gen line is moved
 *      out of manifests/gen (kept); another save's manifest means this
 *      catalog may be behind BACKING, and a rebuild drops the refused save
 *      (it is in no manifest), so the line says to copy it out first
 *      (ckptfs-admin export id:N), and how to take the copy back after the
 *      rebuild (import). fs/main.c M4 refuses such a catalog at mount;
 *      this is the same rule kept at the put, for any path to an id reused.
 *  B5. The holds of a lost chunk (generation.h G12, pggen.h X16) are made
 *      in the end. up_lost asks for them at the finding; if that call
 *      fails (PostgreSQL unreachable: past an outage's deadline calls fail
 *      at once, pg.h P8; SQLite busy or failing), the row, which is not
 *      picked again this run, is marked and a worker asks again after a
 *      backoff (1 s, doubling to 30 s; one worker at a time, between its
 *      rows, so at most one BACKING backoff late), until one call
 *      succeeds: then every COMMITTED save naming the chunk is held and,
 *      on the shared engine, its lost_by mark refuses other nodes'
 *      commits (X17). The call is idempotent
 *      (held saves are no longer COMMITTED; the mark is one UPDATE). A
 *      daemon that stops first leaves the row queued with its error, and
 *      the next mount finds the chunk lost again and asks again.
 *  B6. With -o packs=on (alone only: a shared catalog's nodes put loose
 *      objects), a chunk row of a batch whose image is shorter than
 *      UPPACK_MEMBER_MAX (256 KiB) and that has no loose copy on BACKING
 *      (catalog_pack.h K3) is read and verified as for a copy, and its
 *      image joins the batch's pack instead of being put as a file of its
 *      own. At the batch's flush the pack is built and put (fs/uppack.h:
 *      T1, one put = one fsync, one rename, one directory fsync), then
 *      the batch's sync, then T2, one transaction naming the members and
 *      ending every row of the batch (uppack.h Q1). A pack of one member,
 *      or one whose removal another worker has in hand (Q3), goes loose
 *      instead: a hard link to the cache's file where a loose upload would
 *      link (S2 vouching for it unread), else from the builder's copy of
 *      the verified bytes (up_put_loose). If T2
 *      fails, no member row ends (ending one as a loose upload would call
 *      uploaded an object nobody put): they stay queued and the same pack
 *      is put again under the same name. A batch holding pack members
 *      waits up to 50 ms from its first idle pick for more rows before it
 *      is put (none while a close waits for its chunks, B3, or at a stop),
 *      else an uploader that keeps up puts packs of one. Batching is on over nfs:// too
 *      when packs are (every put there commits by itself).
 *  B7. A BACKING that hangs (fails nothing: an NFS hard mount whose server
 *      is gone, a stalled gateway) costs a gated close (fs/ns.h invariant
 *      13) one backing_timeout, not one per close (review 49 F5). Each
 *      worker records when it began the work in hand (a row's put, a
 *      batch's sync, a tree round: work_since). A wait of
 *      uploader_wait_pending that times out while some worker's work has
 *      been in hand for at least that timeout (so since before the wait
 *      began, and through all of it) sets `unanswered`, logged once: from
 *      then every wait answers -ENETDOWN at once, as when the workers back
 *      off (`down`), unless the file's chunks are uploaded already; the
 *      close publishes with ns.h 13's warning line, nothing is dropped,
 *      the rows stay queued. The first row BACKING takes (a put and its
 *      sync, up_note_success) clears it, logged: closes wait for their
 *      uploads again. The hung call itself is such a row once BACKING
 *      answers (or it fails, and the backoff's retry is), so the wait is
 *      restored without another close paying for it. A wait that timed out
 *      with no work in hand that long (BACKING slow, not hung: rows keep
 *      finishing) sets nothing: the next close waits its backing_timeout
 *      again. `ckptfs-admin stats` shows backing_down 1 meanwhile. */
#ifndef CKPTFS_UPLOADER_H
#define CKPTFS_UPLOADER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backing;
struct cache;
struct cat;
struct store;
struct uploader;

/* The option values the uploader reads (main.c fills it from the options). */
struct uploader_config {
	unsigned threads;      /* workers; 0: backing_upload_threads (2 local, 8 remote) */
	unsigned deadline_s;   /* a queued row older than this is logged */
	bool copy_uploads;     /* copy objects even where BACKING could hard-link them */
	char cache_dir[PATH_MAX]; /* CACHE, for the log lines */
	size_t chunk_max;      /* the largest chunk's plain length (chunker params) */
	/* BACKING's claim: once this daemon is fenced (fs/lib/claim.h invariant
	 * 9) nothing more is put or removed, rows stay queued; NULL: none */
	struct claim *claim;
	unsigned linger_ms;    /* shared catalog: B1's linger; 0: 50 ms */
	bool packs;            /* B6: small objects into packs (-o packs; alone only) */
};

/* A generation's manifest is on BACKING and it was not durable before: the
 * generation just became durable (main.c: gen_durable). Called on a worker
 * thread, once per generation, after its row left the queue. */
typedef void uploader_durable_fn(void *arg, uint64_t gen_id);

/* Starts the workers. cat, store and backing must be open; cache may be NULL
 * (nothing counts dirty bytes), on_durable too. All outlive the uploader. */
int uploader_start(const struct uploader_config *cfg, struct cat *cat, struct store *store,
		   struct backing *backing, struct cache *cache, uploader_durable_fn *on_durable,
		   void *durable_arg, struct uploader **out);

/* Stops the workers. With drain, first waits until the queue is empty,
 * printing progress on stderr every few seconds (unmount); without, the rows
 * stay queued for the next mount. */
void uploader_stop(struct uploader *u, bool drain);

/* New work was queued. */
void uploader_kick(struct uploader *u);

/* Waits until every chunk of the committed file ino is on BACKING (fsync
 * with -o sync=backing). -EIO after timeout_ms. */
int uploader_wait_file(struct uploader *u, uint64_t ino, unsigned timeout_ms);

/* Waits until every chunk of ino's pending extents (a writer's content
 * not published yet) that this node's cache holds is on BACKING (fs/ns.h
 * invariant 13: a small file outside generations, at its close on a shared
 * catalog): 0. While it waits no worker lingers and its rows go first
 * (B3). -ENETDOWN as soon as the workers find BACKING not answering (they
 * back off, or B7: an earlier wait timed out behind a call that hangs),
 * -ETIMEDOUT after timeout_ms; a catalog error as the catalog says. Logs
 * nothing but B7's line. */
int uploader_wait_pending(struct uploader *u, uint64_t ino, unsigned timeout_ms);

/* For tests only (the daemon never sets it): called on the worker thread
 * once a row's work is done or found moot, before the row ends — where a
 * writer's change can fall between the two. */
struct cat_upload;
typedef void uploader_between_fn(void *arg, const struct cat_upload *row);
void uploader_set_between(struct uploader *u, uploader_between_fn *fn, void *arg);
/* For tests only: called on the worker thread once a generation manifest's
 * row has its manifest built, just before its put (B2's window). */
void uploader_set_before_put(struct uploader *u, uploader_between_fn *fn, void *arg);

struct uploader_stats {
	uint64_t chunks, chunk_bytes, manifests, removals, failures;
	uint64_t packs, packed_chunks; /* B6: packs put, chunk objects in them */
	bool backing_down;
	char last_error[160];
};
void uploader_get_stats(struct uploader *u, struct uploader_stats *out);

/* For tests only (the daemon never sets it): called on the worker thread
 * that writes the tree manifest alone (SQLite), once its fingerprint said the
 * tree changed and every chunk of it is on BACKING, before the manifest is
 * built (uploader.c T5: a writer's change can fall between the two). */
typedef void uploader_tree_fn(void *arg);
void uploader_set_before_tree(struct uploader *u, uploader_tree_fn *fn, void *arg);

#endif
