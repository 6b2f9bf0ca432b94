/* control_proto — the wire protocol of the daemon's control channel, shared
 * by the daemon (fs/control.c) and ckptfs-admin (tools/admin_ctl.c), with
 * the encoding of names on its lines (control_proto.c). It depends on
 * nothing; the daemon's side is fs/control.h.
 *
 * Protocol (text, lines ending in \n, at most CONTROL_LINE_MAX bytes each):
 *
 *   request  = "ckptfs-control 1 " VERB *(" " ARG) "\n"
 *   answer   = *( "progress " DONE " " TOTAL "\n"     (long jobs; TOTAL 0: unknown)
 *               | "data " KEY " " VALUE "\n" )        (results, VALUE to end of line)
 *              ( "ok\n" | "error " ERRNO " " MESSAGE "\n" )   (exactly one, last)
 *
 *   VERB                 ARGS               does
 *   hello                -                  data pid/uid/mountpoint/cache/backing/
 *                                           gen_pattern/protocol
 *   commit               GEN_ID             gen_commit_explicit(rule "admin"); data state
 *   pin                  GEN_ID 0|1         gen_pin; data pinned
 *   rm                   GEN_ID [force]     gen_remove; -EBUSY for an OPEN one without force
 *   gc                   dry|run            orphan chunk objects in the cache (files and
 *                                           small.db's rows), then on BACKING: "data
 *                                           cache|backing OBJECTS ORPHANS ORPHAN_BYTES
 *                                           REMOVED FREED_BYTES FAILED"; a node of a
 *                                           shared catalog skips BACKING ("data
 *                                           backing_skipped REASON")
 *   stats                -                  the daemon's live counters: memory chunk cache,
 *                                           disk cache hits/fetches/evictions, the bounds
 *                                           in force, uploader totals and health; a node
 *                                           of a shared catalog adds its catalog's counts
 *                                           (inodes .. generations_held) and "data shared 1"
 *   rebuild              -                  EBUSY: a live catalog is never rebuilt
 *   durable              [GEN_ID]           "data gen ID STATE DURABLE(0|1) NAME" for GEN_ID
 *                                           (and "data held REASON") or for every live
 *                                           generation; hello says "data shared 1" on a
 *                                           node of a shared catalog (-o meta=)
 *   gen                  id:N | PATH        shared catalog only: the generation (any state)
 *                                           that PATH (relative to the mount, %XX-escaped:
 *                                           space, control bytes, '%') or a file in it names:
 *                                           "data series INO PATH", "data generation ID STATE
 *                                           DURABLE PINNED STEP FILES LOGICAL COMMITTED_NS
 *                                           SERIES NAME", "data rule ID RULE", "data held ID
 *                                           REASON", "data times ID VERSION CREATED_NS
 *                                           ENDED_NS"
 *   list                 live|all [SERIES]  shared catalog only: those lines for each
 *                                           generation (live: OPEN, COMMITTED, HELD), then
 *                                           "data usage ID EXTENTS CHUNKS UNIQUE_BYTES
 *                                           ALONE_CHUNKS ALONE_BYTES ALONE_STORED" for each
 *   show                 GEN_ID             shared catalog only: gen's lines and usage, then
 *                                           "data file SIZE EXTENTS CHUNKS PATH" and "data
 *                                           share ID CHUNKS BYTES LABEL" (PATH, LABEL
 *                                           %XX-escaped: control bytes, '%')
 *   check                -                  shared catalog only: cat_check of the daemon's
 *                                           catalog; EUCLEAN if it found problems (logged)
 *
 * wait needs no verb alone: durability is in the catalog (cat_gen_durable), which
 * the tool polls read-only; on a node of a shared catalog, whose local
 * catalog holds no generations, it polls `durable` instead.
 *
 * ERRNO is a positive errno number: ENOENT unknown generation, EBUSY open
 * generation without force (or files of it open for writing, or pinned),
 * EROFS a node of a shared catalog that was fenced (swept: read-only),
 * ENODATA a lost generation, EPERM peer not allowed, EINVAL bad request,
 * ENOSYS verb not available in this daemon (gen, list, show, check alone),
 * EUCLEAN the check found problems. commit, pin
 * and rm take the id that gen answers on a node of a shared catalog, and run
 * there the catalog calls they run alone (gen.c), on PostgreSQL. */
#ifndef CKPTFS_CONTROL_PROTO_H
#define CKPTFS_CONTROL_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cachedir.h"

#define CONTROL_SOCK_NAME CACHEDIR_CONTROL_SOCK /* CACHE/control.sock */
#define CONTROL_MAGIC "ckptfs-control 1"
#define CONTROL_LINE_MAX 4096

/* A name on a line: the bytes the line would end at (control bytes, DEL)
 * and '%' as %XX, and spaces too unless keep_spaces (a name that is the
 * line's last field keeps them; a request splits at them). Cut short, at a
 * whole character, to fit size. */
void control_proto_escape(const char *s, bool keep_spaces, char *out, size_t size);
/* Decodes %XX in place; -EINVAL (s undefined) for a % not followed by two
 * hex digits, or %00. */
int control_proto_unescape(char *s);

/* The daemon's side (fs/control.c, fs/control_shared.c). One line, \n
 * added, cut to CONTROL_LINE_MAX, sent whole (a client gone is ignored). */
void control_proto_send(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "error ERR WHAT", the final line; returns err. */
int control_proto_error(int fd, int err, const char *what);
/* The final line of a verb whose catalog calls returned rc (0 or -errno):
 * "ok", or "error ERR catalog error". */
void control_proto_done(int fd, int rc);
/* A GEN_ID argument: decimal digits only, > 0; -EINVAL otherwise (s may be NULL). */
int control_proto_parse_id(const char *s, uint64_t *id);

#endif
