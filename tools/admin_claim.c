/* admin_claim — `ckptfs-admin claim [--break] BACKING`: who holds BACKING's
 * claim (fs/lib/claim.h), and the by-hand decision to break it. Needs no
 * mount and no cache, only BACKING (a directory or nfs://). Reading changes
 * nothing; --break makes the next epoch a vacant "broken-by-hand" record
 * (claim_break): free to any catalog once the claim's timeout has passed
 * from the break, and a holder still running is fenced at its next renewal
 * (claim.h invariants 7-9). Nothing else on BACKING is touched. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "backing.h"
#include "claim.h"

static const char *admin_claim_state(const struct claim_rec *r)
{
	return r->vacant[0] ? r->vacant : r->released ? "released" : r->shared ? "shared" : "held";
}

static void admin_claim_print(const struct claim_rec *r, uint64_t epoch, bool json)
{
	int64_t ago = (int64_t)time(NULL) - r->renewed;
	if (json) {
		printf("{\"epoch\":%" PRIu64 ",\"state\":\"%s\",\"catalog\":\"%s\",\"host\":", epoch,
		       admin_claim_state(r), r->catalog);
		admin_json_str(stdout, r->host);
		printf(",\"cache\":");
		admin_json_str(stdout, r->cache);
		printf(",\"pid\":%ld,\"take\":%" PRIu64 ",\"renewed\":%" PRId64 "}\n", r->pid, r->take,
		       r->renewed);
		return;
	}
	printf("epoch %" PRIu64 ": %s\ncatalog %s\nhost %s\ncache %s\npid %ld\n", epoch,
	       admin_claim_state(r), r->catalog, r->host, r->cache, r->pid);
	printf("renewed %" PRId64 " s ago\n", ago < 0 ? 0 : ago);
}

int admin_cmd_claim(struct admin *a)
{
	if (a->npos > 0) {
		admin_err("claim: one BACKING only (see ckptfs-admin claim --help)");
		return ADMIN_USAGE;
	}
	struct backing *b = NULL;
	int rc = backing_open(a->target, 0, &b);
	if (rc != 0) {
		admin_err("claim: BACKING %s: cannot open it: %s", a->target, strerror(-rc));
		return ADMIN_PROBLEM;
	}
	char msg[1024] = "";
	uint64_t epoch = 0;
	if (a->claim_break) {
		rc = claim_break(b, &epoch, msg, sizeof(msg));
		if (rc != 0)
			admin_err("claim --break: %s", msg);
		else if (!a->json)
			printf("BACKING %s: claim broken by hand (epoch %" PRIu64 "): free to any "
			       "catalog once its holder's lease has passed (its claim_timeout, 60 s by "
			       "default); a daemon still holding it is fenced at its next renewal\n", a->target, epoch);
	}
	char *buf = rc == 0 ? malloc(CLAIM_MAX) : NULL;
	size_t len = 0;
	int parsed = 0;
	if (rc == 0)
		rc = buf ? claim_current(b, &epoch, buf, &len, &parsed) : -ENOMEM;
	struct claim_rec r;
	if (rc == 0 && parsed == 0)
		parsed = claim_parse(buf, len, &r);
	if (rc == -ENOENT && claim_current_rec(b, &r) == 0) { /* format 1, not yet moved */
		if (!a->json)
			printf("format 1 (%s, an older ckptfs's): moved to epochs by the next mount\n",
			       CLAIM_FILE);
		rc = 0; /* printed below as epoch 0 */
	} else if (rc == -ENOENT) {
		printf(a->json ? "null\n" : "no claim\n");
		rc = 0;
		parsed = 1;
	}
	if (rc == 0 && parsed == 0)
		admin_claim_print(&r, epoch, a->json);
	else if (rc == 0 && parsed < 0)
		printf(a->json ? "{\"epoch\":%" PRIu64 ",\"state\":\"unparsable\"}\n"
			       : "epoch %" PRIu64 ": does not parse\n", epoch);
	else if (rc != 0 && !msg[0])
		admin_err("claim: BACKING %s: cannot read the claim (%s/): %s", a->target, CLAIM_DIR,
			  strerror(-rc));
	free(buf);
	backing_close(b);
	return rc == 0 ? ADMIN_OK : ADMIN_PROBLEM;
}
