/* claim — one catalog per BACKING. A SQLite catalog names chunk objects and
 * manifests on BACKING as if it were their only writer: a second catalog on
 * the same BACKING would overwrite its manifests and delete its chunks. The
 * claim says which catalog owns BACKING (docs/FORMAT.md "The claim"): its
 * random id, the host, the cache, the pid and a heartbeat time the holder
 * renews every timeout/4.
 *
 * The claim is a directory of epochs on BACKING, CLAIM_DIR/E (E a
 * CLAIM_EPOCH_DIGITS-digit decimal, from 1): each file is one record, made
 * once by an exclusive create and never written again; the claim is the
 * record of the largest epoch. (Format 1, before session 44, was one file,
 * CLAIM_FILE, emptied and filled again by moves: every review round found a
 * new interleaving of its gaps that made two holders.)
 *
 * A would-be holder judges the largest epoch's record (claim_judge):
 *   no epoch, or a vacant record (given back, broken
 *     by hand: invariant 8) ────────────────────────▶ FREE   create E+1
 *   same catalog id, host (4) and cache ────────────▶ OURS   create E+1
 *   same host (4): its cache lock is held (or, when the
 *     lock cannot be looked at, its pid lives) ──────▶ HELD   refuse
 *     otherwise (the holder is gone) ───────────────▶ STALE  create E+1
 *   other host: renewed within the timeout ─────────▶ HELD   refuse
 *     renewed longer ago ───────────────────────────▶ STALE  create E+1
 *   released (its holder stopped cleanly) ──────────▶ STALE  create E+1
 *   STALE, but of another catalog, and ours held a
 *     claim before (not fresh) ─────────────────────▶ BEHIND refuse
 *   STALE or OURS, of our catalog id but not of a
 *     take ours recorded (a copy's), not fresh ─────▶ BEHIND refuse (12)
 *   (a stand-in's claim counts as its own catalog's
 *     and as the one it replaced: invariant 13)
 *
 * A shared catalog (issue 18, -o meta=) is one catalog for several nodes:
 * its claim carries the line "mode shared" and the shared catalog's id
 * (cat_catalog_id, from PostgreSQL), and all its nodes hold it at once.
 * Judged before the rules above (after vacant):
 *   both shared, same catalog id ───────────────────▶ OURS   hold it
 *   either shared (not both of one catalog) ────────▶ HELD   refuse, however old
 * No host, cache or age rule then (invariant 7). So a SQLite mount never
 * shares BACKING with a shared catalog, either way round, and the refusal
 * says which kind holds and how to decide.
 *
 * Invariants:
 *  1. An epoch file is made only by backing_put_new (an exclusive create:
 *     of several parties creating one name, exactly one gets 0), only by a
 *     party that listed CLAIM_DIR and read epoch E as the largest, and only
 *     as E+1. It is never written again, never moved, and never removed
 *     while it is the largest or the one before (10). So of all parties that
 *     judged one record, exactly one makes the next, and the largest epoch
 *     only grows: there is no moment at which the claim is absent.
 *  2. A take-over (FREE, STALE, OURS) is that create of E+1 holding our
 *     record. EEXIST: another party changed the claim first; read again and
 *     judge (a round of acquisition). 0: the create is a win only by the
 *     check of 11.
 *  3. Renewal, release and give-back are the same create, made only while
 *     the largest epoch is still the one we hold (by its number): a holder
 *     whose epoch is not the largest any more (another party made a larger
 *     one: it judged ours stale, or a by-hand break) is fenced (9), never
 *     writes the claim again, and never overwrites or removes another's.
 *     A create may land though it answered an error (a lost NFS reply: a
 *     retransmitted LINK answers EEXIST; a timeout): the file holding
 *     exactly bytes we tried for that number (this try's or the last
 *     failed one's; instances make them ours alone) is ours — at once on
 *     EEXIST, or at the next renewal, which then makes the next epoch.
 *     Another's bytes on EEXIST: fenced.
 *  4. "Same host" means same host name, same boot id and the same mount
 *     and pid namespaces (the claim's "ns" line: the inode numbers of
 *     /proc/self/ns/mnt and /proc/self/ns/pid): a host rebooted, a container
 *     of another kernel with the same name, or a container on this kernel
 *     with its own mount or pid namespace (host network, Kubernetes
 *     hostNetwork pods: where our cache path and kill(pid) would look at
 *     other things than the holder's) is judged as another host, by the
 *     heartbeat's age. A claim without the ns line (an older ckptfs's) is
 *     judged by host name and boot id alone, as that ckptfs judged it (an
 *     upgrade does not make a crashed older daemon's own remount wait);
 *     one of ours whose namespaces cannot be read (no /proc) writes none
 *     and, as a judge, never takes the same-host shortcuts.
 *  5. Values read from an epoch are bounded: at most CLAIM_MAX bytes, each
 *     field checked; more than CLAIM_EPOCHS_MAX names in CLAIM_DIR refuse
 *     (the largest could be missed). A largest epoch that does not parse
 *     is HELD by "an unknown holder", never taken over by guess, until a
 *     by-hand break (8).
 *  6. Nodes of one shared catalog renew the claim while the largest epoch
 *     names it and is shared (any instance: a sibling's renewal is ours
 *     too, and an EEXIST or a larger epoch of ours is a sibling's, whose
 *     holder is sure from that record's heartbeat, 9), and never release
 *     it: the last one to stop leaves it in place. They all use one
 *     claim_timeout (the record's lease): a node with another is refused
 *     while the claim was renewed within its lease (a break waits the top
 *     record's lease alone, 8). Should they differ anyway (a node joined
 *     after the claim aged), each writes the longest lease of its catalog's
 *     records it has seen, and a node on a sibling's record is sure for no
 *     longer than that record's lease (review 58 R58-1).
 *  7. A shared catalog's claim is never taken over by age by a lone catalog
 *     or another shared one, nor a lone catalog's by a shared one. Each
 *     catalog removes objects its own rows call garbage: a shared catalog's
 *     PostgreSQL still names its objects while every node is down (a lone
 *     catalog, rebuilt from manifests or not, would count them as nobody's;
 *     its keep-latest-k and sweeps would delete chunks the cluster's
 *     generations name), and a cluster reclaiming a chunk it wrote would
 *     delete the same object a lone catalog's manifests name. Taking such a
 *     BACKING over is an explicit decision: `ckptfs-admin claim --break` (8).
 *  8. A clean stop does not leave the claim but marks it "released" (an
 *     epoch whose record says so): the claim names, until the next holder,
 *     the last catalog that wrote BACKING. A catalog that held a claim
 *     before (the caller knows: not fresh) takes a released or stale claim
 *     only if it is its own. Else another catalog wrote BACKING since this
 *     one last did — generations, manifests, chunks this one's rows do not
 *     know — and this one's deletions (keep-latest-k, rm, gc, the sweep)
 *     and its manifest names would destroy them: BEHIND, refused, naming
 *     the other catalog and the way out (an empty cache: the catalog
 *     rebuilt from BACKING knows both). A fresh catalog (new, rebuilt)
 *     knows BACKING as it is now. A vacant record is FREE to anyone,
 *     BEHIND to none: claim_abandon's "vacant given-back" (a claim that
 *     was FREE put back) at once; claim_break's "vacant broken-by-hand"
 *     (the decision) once its own heartbeat, rendered after the listing
 *     that found the epoch it supersedes, is older than the timeout (its
 *     lease line: the superseded record's lease; the default for a record
 *     without one) —
 *     HELD until then, so that a holder still running, lone or shared,
 *     sure for up to its lease from its last renewal (9), has renewed,
 *     found the larger epoch and stopped writing before anyone takes
 *     BACKING.
 *  9. Only a holder sure of its claim writes BACKING (claim_may_write).
 *     UNSURE: the last renewal that found the claim ours STARTED longer ago
 *     than the timeout less an eighth (CLOCK_BOOTTIME: a suspended
 *     machine's time counts; a BACKING that does not answer, a stopped
 *     process). "Started": before it listed CLAIM_DIR; its record's
 *     heartbeat is rendered after, and a taker of another host judges the
 *     record STALE only once that heartbeat is older than the timeout —
 *     the larger of the taker's own and the record's "lease" line, the
 *     holder's (review 56 T1: a taker with a shorter timeout took a
 *     healthy holder's claim between its renewals) — (a taker of this host
 *     only once the holder's cache lock is free: it is gone). A shared
 *     node is bounded alike (a claim broken by hand is taken by age: 8). So no one makes a larger epoch before its holder stopped
 *     writing, unless one put stalls for longer than the margin, and the
 *     holder's own create of that number then gets EEXIST: fenced. An
 *     unsure holder puts, moves and removes nothing on BACKING (uploads and
 *     removals wait, queued); writes go on into the cache. Won again, it is
 *     sure again and uploads go on. LOST (fenced for good): a renewal found
 *     a larger epoch, our epoch gone (by hand), or EEXIST. A lost holder
 *     puts, moves and removes nothing on BACKING, renews and releases
 *     nothing; its daemon answers changes with EROFS and reads on
 *     (fs/ops.c, fs/uploader.c, fs/control.c); what it holds stays in its
 *     cache. A shared claim is never taken over by age (7): only a lost
 *     one fences.
 * 10. Epochs are removed only by a holder sure of its claim, right after a
 *     renewal made epoch E, and only those below E−1: never the largest (1)
 *     nor the one a party that listed just before E was made may be
 *     reading (it reads again on ENOENT). A number removed can be made
 *     again only by a create that stalled, or a party that read it long
 *     ago; that create is void by 11 (a larger epoch exists), and its file
 *     is removed by a later renewal like any below E−1.
 * 11. Every create of E+1 answered 0 is followed by a listing of CLAIM_DIR:
 *     a number larger than E+1 there means the create is void (it is not
 *     the largest, so nobody judges it; never removed by its maker): a
 *     taker looks again, a lone holder is fenced. Of parties that each made
 *     an epoch, only the maker of the largest holds; a larger epoch is made
 *     only by a party that judged E+1 itself (HELD while its holder is
 *     sure, 9), so a maker that found none larger holds until 9 says
 *     otherwise. A crash after a create costs nothing: the file IS the
 *     claim, judged by its lock or heartbeat like any other.
 * 12. Takes (review 32B F1: a copy of a cache has its catalog's id). Every
 *     take of a lone claim has a number and the instance (random, one per
 *     take) as its identity; the claim says "take N" and the catalog
 *     records its own takes (struct claim_ledger, meta keys claim_take and
 *     claim_take_next): a take begun is recorded BEFORE the exclusive create
 *     (claim_take_next), a take made after it (claim_take). A catalog that
 *     held a claim before (not fresh) takes a released or stale claim, or
 *     one judged OURS, of its own catalog id only if the claim's instance is
 *     one of those two: else a copy of this catalog (cp -a of the cache, a
 *     backup restored) took BACKING since this one last did, and its
 *     deletions would destroy what that copy wrote: BEHIND (invariant 8's
 *     refusal). A crash between the two records leaves the claim at the
 *     begun take: still recognised. A catalog with no record of takes (an
 *     older ckptfs's) judges a claim without a take line (an older
 *     ckptfs's) by catalog id alone, as that ckptfs did, and records from
 *     its first take on; a claim with a take line of its own catalog id it
 *     has no record of is a copy's: BEHIND. A catalog with records judges
 *     any claim by them. A copy made while its cache is mounted (not a
 *     consistent copy anyway) is not told apart from the original until the
 *     original's next take.
 * 13. Stand-in (review 32B F3). A taker that writes nothing on BACKING but
 *     the claim (ckptfs-admin rebuild: it reads BACKING for a new catalog)
 *     records in its claim the identity it replaced: "replaces CATALOG
 *     INSTANCE TAKE", the judged holder's (or, if that was a stand-in too,
 *     never released, what that one replaced). A catalog not fresh accepts the claim if it
 *     is its own (12), or, while the stand-in never released it (killed or
 *     crashed: a rebuild that fails gives the claim back, one that ends
 *     releases it), if the identity it replaced is (12): between the
 *     replaced take and this claim nobody wrote BACKING. A rebuild killed
 *     before its swap so leaves the old catalog mountable; one that ended
 *     leaves BACKING to its new catalog alone (every other one BEHIND, as
 *     invariant 8 says), whose first mount takes a claim of its own.
 * 14. The begun record of 12 is durable (the catalog's WAL synced) before
 *     the exclusive create of the claim it names: after a power loss the
 *     catalog still knows the take the claim on BACKING says (else its own
 *     cache would be refused as a copy's, BEHIND). A note (done false) that
 *     could not be synced fails, and the take with it. The made record
 *     needs no sync: the begun one already names the instance.
 * 15. Format 1's claim was one file, CLAIM_FILE, the only name older
 *     ckptfs read. It is now for good a DIRECTORY (the marker, with a
 *     README): an older daemon's read of it fails (EISDIR) and its
 *     exclusive create of that name meets EEXIST, so it refuses the
 *     BACKING whatever it judged, and an `rm` of it (older daemons' refusals
 *     of some claims advise removing the file by hand) fails. A BACKING
 *     with no epoch is brought to format 2 by the first acquisition: the
 *     format-1 claim there (judged by format 1's rules, invariants 4-8, 12,
 *     13; refused while any parseable tmp/claim.* aside of an older take
 *     stands beside it, or while a shared one of our catalog was renewed
 *     within the timeout: an older node of it is up) is moved aside by one
 *     move, compared with what was judged, the marker made in its place by
 *     an exclusive create, and the judged record copied into epoch 1 — so
 *     the last writer of BACKING is still named (8). An older taker's create
 *     in that gap gets EEXIST from the marker, or takes the name first (our
 *     mark fails, and format 1's checks back it off, or it holds and we are
 *     refused). A migration stopped after the marker leaves the newest
 *     parseable tmp/claim.* aside (judged: one a live holder's refuses) as
 *     the claim to copy into epoch 1; CLAIM_FILE absent with no epoch is
 *     judged likewise. CLAIM_FILE absent beside epochs is made the marker
 *     again, at an acquisition or a renewal. A format-1 claim file beside
 *     epochs (an older daemon took BACKING after the marker was removed by
 *     hand, `rm -r`, or its take landed between a migration's copy and its
 *     mark) fences a holder at its next renewal (the older daemon writes
 *     BACKING: of the two only it may go on), and is judged by every
 *     acquisition like any format-1 claim: a live older holder refuses; a
 *     gone one's record is copied into the NEXT epoch (it wrote BACKING
 *     after the epochs: the last writer, 8) and the marker put back, unless
 *     its heartbeat is older than the largest epoch's (restored by hand
 *     from an old copy: it names no later writer): refused. An
 *     older node of a shared catalog that was suspended through a migration
 *     is not fenced by the marker (its read fails, and older shared nodes
 *     counted themselves always sure): upgrade every node of a shared
 *     catalog together, none suspended. With CLAIM_FILE absent
 *     and no epoch, any format-1 aside is an older take under way (whose
 *     maker removes it on an EEXIST from our marker, review 56 M1): looked
 *     at again, and at the last round copied into epoch 1 BEFORE the marker
 *     is made, so the last writer is never lost with it; a migration moves
 *     aside, copies into epoch 1, then marks, likewise. "Newest" among
 *     asides is by heartbeat: hosts' clocks must agree (as for judging).
 *
 * Clocks: the heartbeat is the holder's wall clock, compared with ours; the
 * nodes' clocks must agree to well within the timeout (NTP). */
#ifndef CKPTFS_CLAIM_H
#define CKPTFS_CLAIM_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backing;
struct claim_ledger;

#define CLAIM_FILE "ckptfs.claim" /* format 1's claim; the marker directory since (15) */
#define CLAIM_DIR "claims"        /* the epochs (invariant 1) */
#define CLAIM_EPOCH_DIGITS 20
#define CLAIM_EPOCHS_MAX 4096     /* invariant 5 */
#define CLAIM_MARKER_README CLAIM_FILE "/README" /* the marker (invariant 15) */
#define CLAIM_NOBODY_ID "00000000000000000000000000000000" /* a vacant record's catalog (8) */
#define CLAIM_BROKEN "broken-by-hand" /* claim_break's vacant record (invariant 8) */
#define CLAIM_MAX 8192
#define CLAIM_DEFAULT_TIMEOUT_S 60
#define CLAIM_ID_LEN 32 /* hex digits of a catalog id */

struct claim_rec {
	char catalog[CLAIM_ID_LEN + 1]; /* the catalog's id (meta.catalog_id) */
	char instance[CLAIM_ID_LEN + 1]; /* random per acquisition (invariant 3) */
	char host[256];
	char boot[40]; /* /proc/sys/kernel/random/boot_id */
	/* "ns MNT PID": inode numbers of /proc/self/ns/mnt and /proc/self/ns/pid
	 * (invariant 4); 0 0: no such line (an older ckptfs), or unknown */
	uint64_t ns_mnt, ns_pid;
	char cache[PATH_MAX];
	long pid;
	int64_t renewed; /* unix seconds */
	unsigned lease_s; /* "lease S": its holder's claim_timeout (invariant 9); 0: no line */
	bool shared;     /* "mode shared": a shared catalog's claim (invariant 6) */
	bool released;   /* "released yes": its holder let go at a clean stop (invariant 8) */
	char vacant[24]; /* "vacant WHY": nobody holds it (invariant 8); "" otherwise */
	bool fresh;      /* (self only, not in the file) our catalog never held a claim */
	uint64_t take;   /* "take N" (invariant 12); 0: no such line (an older ckptfs) */
	/* "replaces CATALOG INSTANCE TAKE": a stand-in's (invariant 13); "" none */
	char rep_catalog[CLAIM_ID_LEN + 1];
	char rep_instance[CLAIM_ID_LEN + 1];
	uint64_t rep_take;
	const struct claim_ledger *ledger; /* (self only) invariant 12; NULL: by catalog id */
};

/* What a catalog recorded of its takes of BACKING's claim (invariant 12),
 * and how a new one is recorded. */
struct claim_ledger {
	bool known;                    /* the catalog recorded a take (invariant 12) */
	uint64_t take;                 /* the number of its last take recorded (0: none) */
	char last[CLAIM_ID_LEN + 1];   /* instance of its last take made ("": none) */
	char next[CLAIM_ID_LEN + 1];   /* instance of a take begun, maybe not made ("") */
	bool stand_in;                 /* the taker writes nothing on BACKING (13) */
	/* Records a take of number take and instance: begun (done false:
	 * before the exclusive create; durable on return, invariant 14) or
	 * made (done true). 0 or -errno; a begun one that fails refuses the
	 * take. NULL: nothing recorded. */
	int (*note)(void *arg, bool done, uint64_t take, const char *instance);
	void *arg;
};

/* BEHIND: free to take, but by a catalog that is not the last one that
 * wrote BACKING, while ours has written it before (invariant 8): refused. */
enum claim_verdict { CLAIM_FREE, CLAIM_OURS, CLAIM_HELD, CLAIM_STALE, CLAIM_BEHIND };

/* Whether the holder of rec, on this host, is alive (claim_holder_alive;
 * tests give a fake). */
typedef bool (*claim_alive_fn)(void *arg, const struct claim_rec *rec);

/* The decision of the diagram above; holder NULL: no claim. now and
 * holder->renewed in unix seconds. Pure: no I/O but through alive. */
enum claim_verdict claim_judge(const struct claim_rec *holder, const struct claim_rec *self,
			       int64_t now, unsigned timeout_s, claim_alive_fn alive, void *arg);
/* The real liveness test: the holder's cache lock is held; if its lock file
 * cannot be opened for another reason than absence, its pid lives. */
bool claim_holder_alive(void *arg, const struct claim_rec *rec);

/* The file's text, and back. claim_parse: 0, or -EINVAL for anything that
 * is not a complete claim of format 1 (invariant 5). */
int claim_format(const struct claim_rec *rec, char *buf, size_t size);
int claim_parse(const char *text, size_t len, struct claim_rec *out);

/* The record of the largest epoch on BACKING b (invariant 1): 0 with its
 * number, bytes (buf of CLAIM_MAX) and *parsed (0, or -EINVAL: invariant
 * 5); -ENOENT when there is no epoch; -E2BIG past CLAIM_EPOCHS_MAX names;
 * or BACKING's error. For readers (ckptfs-admin): it judges nothing. */
int claim_current(struct backing *b, uint64_t *epoch, char *buf, size_t *len, int *parsed);
/* The claim's record for readers: the largest epoch's, or on a format-1
 * BACKING (no epoch) its CLAIM_FILE unless that is the marker (15). 0,
 * -ENOENT (no claim, or a vacant one: nobody's, 8), -EINVAL (does not
 * parse), or -errno. */
int claim_current_rec(struct backing *b, struct claim_rec *rec);
/* CLAIM_DIR/E into out (at least CLAIM_NAME_MAX bytes). */
#define CLAIM_NAME_MAX (sizeof(CLAIM_DIR) + CLAIM_EPOCH_DIGITS + 1)
void claim_epoch_name(uint64_t epoch, char *out, size_t size);
/* Makes the marker of invariant 15 (the directory CLAIM_FILE with its
 * README): 0 (made, or already there), -EEXIST (a format-1 claim file is
 * there), or -errno. */
int claim_mark(struct backing *b);

/* A claim held by this process. */
struct claim;

/* Takes the claim of BACKING b for catalog_id (this host, cache, our pid),
 * with timeout_s as the lease (0: the default); shared: for a node of a
 * shared catalog (invariant 6); fresh: the catalog never held a claim yet
 * (new, or rebuilt from BACKING: invariant 8). 0 and *out when FREE, OURS
 * or STALE (taken over; logged); -EBUSY when HELD, with one line in msg
 * naming the holder (host, cache, pid, how long ago it renewed) and what to
 * do; another -errno, with msg, when BACKING fails. */
int claim_acquire(struct backing *b, const char *catalog_id, bool shared, bool fresh,
		  const char *cache, unsigned timeout_s, struct claim **out, char *msg,
		  size_t msgsize);
/* claim_acquire with the catalog's ledger of takes (invariants 12, 13; a
 * lone catalog's mount and offline changes pass it; NULL: judged by catalog
 * id alone, nothing recorded). */
int claim_acquire_led(struct backing *b, const char *catalog_id, bool shared, bool fresh,
		      const struct claim_ledger *led, const char *cache, unsigned timeout_s,
		      struct claim **out, char *msg, size_t msgsize);
/* Starts renewing every timeout/4 in a thread (after a fork: the pid is
 * this process's from now on). The first renewal is made here, before the
 * thread starts, whatever the time since claim_acquire (a mount's rebuild
 * may take longer than the timeout): it proves the claim still ours, or
 * fences (invariant 9). */
int claim_start(struct claim *c);
/* Stops renewing; release: makes the next epoch our record marked released
 * if our epoch is still the largest and we are not fenced (invariants 3, 8,
 * 9; the exclusive create decides against a taker) — never for a shared
 * claim (invariant 6). NULL is allowed. */
void claim_end(struct claim *c, bool release);
/* For a taker that wrote nothing to BACKING and gives up (a rebuild that
 * failed, a mount that could not record its take): stops renewing and, if
 * our epoch is still the largest and we are not fenced, makes the next
 * epoch the bytes claim_acquire judged (a vacant "given-back" record if it
 * found none), so the
 * catalog that held it before is not made BEHIND (invariant 8) by a catalog
 * that never came to be. NULL is allowed. */
void claim_abandon(struct claim *c);
/* The by-hand decision of invariants 7 and 8: makes the next epoch a vacant
 * "broken-by-hand" record (free to anyone), whoever holds the claim; its
 * holder, if alive, is fenced at its next renewal. The record names this
 * host and pid as the breaker's. 0 with the broken record's epoch in
 * *epoch, or -errno with msg. */
int claim_break(struct backing *b, uint64_t *epoch, char *msg, size_t msgsize);
/* Invariant 9: whether this holder may put, move or remove anything on
 * BACKING now. Lock-free, for every thread; true for NULL (no claim). False
 * while unsure (past the deadline: logged once per wait) and once lost. */
bool claim_may_write(struct claim *c);
/* Invariant 9: the claim is another's or gone, for good: changes get EROFS.
 * False for NULL. */
bool claim_lost(struct claim *c);
/* The lease in seconds (0 for NULL). */
unsigned claim_timeout_s(const struct claim *c);
/* The epoch this holder made last (0 for NULL): for tests and logs. */
uint64_t claim_epoch(const struct claim *c);

/* For tests only: called at named points ("take-read": an acquisition
 * listed CLAIM_DIR and read the largest epoch, before it judges;
 * "take-create": its judgment made, before its exclusive create;
 * "take-check": that create answered 0, before the listing of 11;
 * "renew-read": a renewal, a release or a give-back listed CLAIM_DIR;
 * "renew-create": before its exclusive create; "renew-check": that create
 * answered 0, before the listing of 11; "migrate-move": a format-1 claim
 * judged, before it is moved aside (15); "migrate-marker": moved and
 * compared, before the marker's create; "migrate-copy": the marker made,
 * before epoch 1's create; "may-write": in claim_may_write, not NULL and
 * not lost); a nonzero return (-errno) is taken as that step's failure
 * (may-write: false; the -create points: the create fails with it, as a
 * BACKING error; others: ignored). NULL in a daemon. */
extern int (*claim_test_hook)(struct claim *c, const char *point);
/* For tests only: one renewal now, as the renewal thread makes it. */
void claim_test_renew(struct claim *c);

#endif
