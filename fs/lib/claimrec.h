/* claimrec — the claim's record and its judgment, shared by the protocol
 * (claim.c) and its refusal lines. The public part (struct claim_rec,
 * claim_judge, claim_format, claim_parse, claim_holder_alive) is declared
 * in claim.h with the invariants; these are the pieces claim.c needs
 * besides. */
#ifndef CKPTFS_CLAIMREC_H
#define CKPTFS_CLAIMREC_H

#include "claim.h"

#define CLAIM_FORMAT_LINE "ckptfs claim 1\n" /* the record's; the layout is claim.h's */

/* 32 lowercase hex digits. */
bool claim_hex_id(const char *s);
/* A fresh random id (an instance: invariant 3). */
void claim_random_hex(char out[CLAIM_ID_LEN + 1]);
/* This host's name, boot id and namespaces into rec (invariant 4). */
void claim_this_host(struct claim_rec *rec);
/* HELD: one line naming the holder h (parsed: 0, or -EINVAL: an unknown
 * holder, invariant 5) and what to do; spec is BACKING's. */
void claim_describe(const struct claim_rec *h, bool self_shared, int parsed, int64_t now,
		    char *msg, size_t size, const char *spec, unsigned timeout_s);
/* BEHIND (invariant 8): one line naming the catalog that wrote BACKING last
 * and the way out. */
void claim_describe_behind(const struct claim_rec *h, const struct claim_rec *self,
			   int64_t now, char *msg, size_t size, const char *spec);
/* Invariant 9: the age past which holder's heartbeat is stale to a judge
 * whose own timeout is timeout_s: the larger of it and the record's lease. */
unsigned claim_lease(const struct claim_rec *holder, unsigned timeout_s);
/* Invariant 13: self, a stand-in, records the identity holder stands for. */
void claim_stand_for(struct claim_rec *self, const struct claim_rec *holder);

#endif
