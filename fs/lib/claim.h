/* claim — one catalog per BACKING. A SQLite catalog names chunk objects and
 * manifests on BACKING as if it were their only writer: a second catalog on
 * the same BACKING would overwrite its manifests and delete its chunks. The
 * claim is a small file on BACKING, CLAIM_FILE, naming the catalog that owns
 * it (docs/FORMAT.md): its random id, the host, the cache, the pid and a
 * heartbeat time the holder renews every timeout/4.
 *
 * A would-be holder judges the claim it finds (claim_judge):
 *   absent ─────────────────────────────────────────▶ FREE   create it
 *   same catalog id, host (4) and cache ────────────▶ OURS   rewrite it
 *   same host (4): its cache lock is held (or, when the
 *     lock cannot be looked at, its pid lives) ──────▶ HELD   refuse
 *     otherwise (the holder is gone) ───────────────▶ STALE  take over
 *   other host: renewed within the timeout ─────────▶ HELD   refuse
 *     renewed longer ago ───────────────────────────▶ STALE  take over
 *   released (its holder stopped cleanly) ──────────▶ STALE  take over
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
 * Judged before the rules above:
 *   both shared, same catalog id ───────────────────▶ OURS   rewrite it
 *   either shared (not both of one catalog) ────────▶ HELD   refuse, however old
 * No host, cache or age rule then (invariant 7). So a SQLite mount never
 * shares BACKING with a shared catalog, either way round, and the refusal
 * says which kind holds and how to decide.
 *
 * Invariants:
 *  1. Only backing_put_new creates CLAIM_FILE where there is none, so of
 *     several takers exactly one holds it.
 *  2. A stale claim is taken over by moving it aside to a name unique to the
 *     taker (one move of a name succeeds), then checking that what moved is,
 *     byte for byte, what was judged stale. Only then is CLAIM_FILE
 *     created (1). If another's claim moved instead (a winner's fresh one,
 *     a released one), a taker NEVER puts it back: it stays aside, where
 *     it stands for the claim (10), and its holder takes it back (11 M). A
 *     put-back of another's bytes could restore an older claim in another
 *     mover's gap over a winner's, which the next taker judges on its own
 *     (review 52 F1: two holders). The one create of bytes not the
 *     creator's own is claim_abandon's give-back of the claim it replaced,
 *     and it is checked (11 C).
 *  3. Renewal and release touch CLAIM_FILE only while it is still ours, by
 *     its bytes (our instance nonce): a claim taken over from a holder that
 *     stopped renewing is never overwritten or removed by that holder. A
 *     lone claim is renewed and released only by the steps of 2 (moved
 *     aside, compared, created exclusively), never by a put over it: a read that found it
 *     ours says nothing of the moment a put lands (a stalled request).
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
 *  5. Values read from the file are bounded: at most CLAIM_MAX bytes, each
 *     field checked; a file that does not parse is HELD by "an unknown
 *     holder" (never taken over by guess) until it is older than the timeout
 *     by its own heartbeat — or, unreadable, removed by hand.
 *  6. Nodes of one shared catalog renew the claim while it still names it
 *     and is shared (any instance: they overwrite each other's heartbeat),
 *     and never remove it: the last one to stop leaves it in place.
 *  7. A shared catalog's claim is never taken over by age by a lone catalog
 *     or another shared one, nor a lone catalog's by a shared one. Each
 *     catalog removes objects its own rows call garbage: a shared catalog's
 *     PostgreSQL still names its objects while every node is down (a lone
 *     catalog, rebuilt from manifests or not, would count them as nobody's;
 *     its keep-latest-k and sweeps would delete chunks the cluster's
 *     generations name), and a cluster reclaiming a chunk it wrote would
 *     delete the same object a lone catalog's manifests name. Taking such a
 *     BACKING over is an explicit decision: removing CLAIM_FILE (and the
 *     asides in tmp/, 10) by hand.
 *  8. A clean stop does not remove a lone claim but marks it "released":
 *     the claim names, until the next holder, the last catalog that wrote
 *     BACKING. A catalog that held a claim before (the caller knows: not
 *     fresh) takes a released or stale claim only if it is its own. Else
 *     another catalog wrote BACKING since this one last did — generations,
 *     manifests, chunks this one's rows do not know — and this one's
 *     deletions (keep-latest-k, rm, gc, the sweep) and its manifest names
 *     would destroy them: BEHIND, refused, naming the other catalog and
 *     the way out (an empty cache: the catalog rebuilt from BACKING knows
 *     both). A fresh catalog (new, rebuilt) knows BACKING as it is now.
 *     A claim removed by hand (with its asides, 10) is absent: FREE to
 *     anyone (the decision).
 *  9. Only a holder sure of its claim writes BACKING (claim_may_write).
 *     UNSURE: the last renewal that found the claim ours STARTED longer ago
 *     than the timeout less an eighth (CLOCK_BOOTTIME: a suspended
 *     machine's time counts; a BACKING that does not answer, a stopped
 *     process). A taker judges by the heartbeat, which that renewal wrote
 *     after it started, so no one takes a lone claim over before its
 *     holder stopped writing, unless one put stalls for longer than the
 *     margin. An unsure holder puts, moves and removes nothing on BACKING
 *     (uploads and removals wait, queued); writes go on into the cache.
 *     Every renewal takes the claim anew as a taker would (3; 2, 10: moved
 *     aside if still our bytes, then an exclusive create), never by a
 *     rewrite in place, which could overwrite the claim of a taker that
 *     judged ours stale meanwhile: exactly one of us wins. Won, it is sure
 *     again and uploads go on. A create that failed leaves our aside as the
 *     claim's stand-in (10): remembered, and while the claim is absent and
 *     the aside still our bytes and the newest, the next renewal creates
 *     the claim again, checked (11 C); the aside gone (a taker judged it
 *     and made its claim), a newer aside of another's bytes, EEXIST after
 *     the wait of 11, or a foreign aside after the create (11 C): lost. LOST (fenced for
 *     good): a renewal found the claim another's or gone, or lost the take. A lost holder puts, moves
 *     and removes nothing on BACKING, renews and releases nothing; its
 *     daemon answers changes with EROFS and reads on (fs/ops.c,
 *     fs/uploader.c, fs/control.c); what it holds stays in its cache.
 *     A shared claim is never taken over by age (7): only a lost one fences.
 * 10. During a take-over the stale claim lives on as tmp/claim.<instance>.<n>
 *     (the aside, 2) until the new claim exists: its taker removes it only
 *     after its exclusive create answered (created, or EEXIST). So a claim
 *     absent while asides exist is judged by the newest parseable aside
 *     (by its heartbeat; every aside read, never a first page of them:
 *     more than CLAIM_ASIDES_MAX refuse the take) as if it were the claim: a catalog BEHIND it, or a
 *     holder alive, is refused as before — and so is any aside judged
 *     HELD, newest or not (a live holder's claim a mover left aside, while
 *     a newer aside is a taker's own backed-off claim: review 54 F2). A
 *     claim present and judged STALE or OURS is not judged alone either:
 *     any aside judged HELD is a live holder's claim a mover left aside,
 *     the present one back in that mover's gap (a give-back, 11 C; review
 *     54 F1) or a create there whose creator died before its check (11 C
 *     holds only while the creator lives; its claim, rendered later, may
 *     be newer than the holder's aside: review 55 F1): HELD. A HELD judgment from an aside
 *     is looked at again (the nap of 11 T) and refused only at the last
 *     round: the state is changing (review 53 F5). A fenced holder's aside
 *     left in tmp/ refuses takers likewise until its lock or heartbeat
 *     says gone (11's accepted loss). Otherwise the create decides
 *     (1), and the winner removes the asides it judged (once 11 let it keep
 *     its claim). Aside names are new per round, so removing one never
 *     removes another round's.
 * 11. A renewal leaves CLAIM_FILE absent for a moment while its aside
 *     exists (9). A taker that judged "absent" earlier (e.g. two mounts
 *     racing at start, the loser's judgment made before the winner's
 *     create) could create the claim in that gap, on a state it never
 *     judged: the holder may have written BACKING since. So:
 *     T. A taker's create is a win only if nothing moved while it judged:
 *        after its exclusive create answers 0 it lists tmp/ again; an aside
 *        it did not judge (not among the names it listed before deciding,
 *        nor its own) means a renewal or another take was under way. It
 *        backs off: removes its new claim only while the claim is still its
 *        bytes (the steps of 2: moved aside, compared; its bytes: the aside
 *        removed; another's: left aside, 2), keeps the
 *        asides it judged, and the round answers "changing, look again"
 *        (-EAGAIN), where it judges the holder's claim or its aside (10).
 *        That round comes after a random nap (claim_back_off_nap), so that
 *        takers who backed off together do not create in step again.
 *     M. A holder whose renewal reads the claim absent, with no aside of
 *        its own pending (10), is not fenced at once either: a taker that
 *        judged an older claim stale may have moved ours aside to compare
 *        it (2), and a claim made since may be there a moment later. It
 *        reads the claim again a few polls within min(2 s, timeout/8);
 *        ours: renewed as usual; another's: fenced. (A renewal whose move
 *        of its own claim finds nothing — a mover moved it between the
 *        read and the move — goes the same way.) Still absent: if the
 *        newest aside (10: while the claim is absent, the one every taker
 *        judges as the claim) holds its bytes — the mover's, left there by
 *        2 — it becomes the holder's own pending aside and the claim is
 *        created again from it as from its own (9, 11 C); else fenced. It
 *        never makes the claim on a bare absence (removed by hand: the
 *        decision). A release that reads the claim absent does the same,
 *        its claim created again already marked released.
 *     H. A holder whose renewal's exclusive create answers EEXIST is not
 *        fenced at once: while its aside still holds its bytes it tries the
 *        create again, a few polls within min(2 s, timeout/8) (a taker
 *        backing off by T makes the claim absent). Still another's, or the
 *        aside gone: fenced, and its aside is left in place, never removed
 *        once fenced: it is the evidence T needs. A try is made only while
 *        no foreign aside (C) is there: a back-off's goes again at once, a
 *        mover's stays (the claim it moved may be a winner's).
 *     C. Every create of a holder (a renewal's, a take-back's, 9, 10, M) is
 *        checked as a taker's is (T): tmp/ is listed before the move (or at
 *        the take-back's look) and again after the create answered 0; an
 *        aside not there before, not its own, still there and of another's
 *        bytes means a claim was moved aside meanwhile — maybe a winner's
 *        whose mover left it (2) — so this create may have landed in that
 *        mover's gap. It gives the claim back (moved aside, compared) and
 *        is fenced (review 52 F2: a holder past its deadline, judged stale
 *        by a taker that won, made its claim again in a mover's gap over
 *        the taker's). New asides of its own bytes (its claim moved by a
 *        mover) are not foreign: the next renewal takes them back (M).
 *        A new aside is looked at again a few polls within min(2 s,
 *        timeout/8) before the claim is given back: a taker's back-off
 *        aside goes at once, a mover's stays (review 53 F2). A look that
 *        fails (BACKING's error) gives the claim back without a fence; the
 *        aside stays pending and the next renewal tries again (review 53
 *        F4). A give-back (claim_abandon) of the claim acquire replaced is
 *        checked likewise: a new aside after its create moves what it put
 *        aside again, where it stands for itself (10; review 53 F1). So
 *        every create of CLAIM_FILE is followed by a check (T or C).
 *     The holder's aside exists from before the taker's create until after
 *     the taker's check (the holder removes it only after its own create
 *     answered 0, which the taker's claim excludes), so the check sees it.
 *     Of a holder and a racing taker at most one holds the claim, and a
 *     taker never holds it on a judgment older than a renewal. Both may
 *     lose in a rare interleaving (the taker stalled past the holder's
 *     wait: the holder fenced, the taker backed off, the claim absent with
 *     the fenced holder's aside judged HELD until its lock or heartbeat
 *     says gone): a liveness loss, accepted. Of three
 *     takers of one stale claim (a winner, a mover that judged the stale
 *     claim before the winner's create, a taker that judged "absent" during
 *     the winner's take and creates in the mover's gap), the mover's aside
 *     stays (2), the third backs off by T, and the winner takes its claim
 *     back from the aside (M) (the unit race of three takers saw two
 *     winners ~1 in 40 runs under ASan when the mover put it back and
 *     removed its aside). A holder whose claim sits in a mover's aside
 *     holds with CLAIM_FILE absent until its next renewal (timeout/4):
 *     every taker meanwhile judges that aside (10) and is refused.
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

#define CLAIM_FILE "ckptfs.claim"
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
	bool shared;     /* "mode shared": a shared catalog's claim (invariant 6) */
	bool released;   /* "released yes": its holder let go at a clean stop (invariant 8) */
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
/* Stops renewing; release: marks the claim released if it is still ours
 * (invariants 3, 8) — read absent, after the reads again of 11 M, it is
 * created again from our pending aside or the newest aside of our bytes,
 * already released (11 C checks it) — never a shared one (invariant 6),
 * and not once fenced (invariant 9). NULL is allowed. */
void claim_end(struct claim *c, bool release);
/* For a taker that wrote nothing to BACKING and gives up (a rebuild that
 * failed): stops renewing and, if the claim is still ours and we are not
 * fenced, puts back what claim_acquire replaced (the bytes it judged), or
 * removes it if there was none, so the catalog that held it before is not
 * made BEHIND (invariant 8) by a catalog that never came to be. NULL is
 * allowed. */
void claim_abandon(struct claim *c);
/* Invariant 9: whether this holder may put, move or remove anything on
 * BACKING now. Lock-free, for every thread; true for NULL (no claim). False
 * while unsure (past the deadline: logged once per wait) and once lost. */
bool claim_may_write(struct claim *c);
/* Invariant 9: the claim is another's or gone, for good: changes get EROFS.
 * False for NULL. */
bool claim_lost(struct claim *c);
/* The lease in seconds (0 for NULL). */
unsigned claim_timeout_s(const struct claim *c);

/* For tests only: called at named points ("renew-read", "release-read": a
 * renewal or a release read the claim; "retake-create": before their
 * exclusive create; "renew-wait": before each try again after EEXIST
 * (invariant 11 H); "renew-absent": before each read again of a claim a
 * renewal read absent (11 M); "take-create": an acquisition's judgment made, before
 * its exclusive create; "take-check": after that create answered 0, before
 * it looks at tmp/ again (11 T); "take-kept": another's bytes moved
 * aside by the steps of 2, left there; "giveback-create": claim_abandon's
 * claim moved and compared, before the create of what it replaced;
 * "retake-check": a holder's create
 * answered 0, before its look of 11 C; "take-move": the claim judged, before
 * it is moved aside by the steps of 2 — an acquisition's STALE or OURS, a
 * renewal, a release, a give-back, a back-off; "may-write": in
 * claim_may_write, not NULL and not lost); a nonzero return (-errno) is
 * taken as that step's failure (may-write: false; take-check, take-move:
 * ignored). NULL in a daemon. */
extern int (*claim_test_hook)(struct claim *c, const char *point);
/* For tests only: one renewal now, as the renewal thread makes it. */
void claim_test_renew(struct claim *c);

#endif
