/* admin_print — how list and show print a generation, in text and JSON;
 * one printer for what the local catalog and a shared node's daemon
 * answer (admin_gen.c, admin_shared.c gather it, this file prints it). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin.h"

/* The end of a generation's JSON object, from "committed" (its value) on:
 * the committed time, the rule and the held reason, and the closing brace. */
void admin_json_gen_end(const struct cat_gen *g)
{
	char t[32];
	if (g->committed_ns > 0)
		admin_json_str(stdout, admin_time(g->committed_ns, t));
	else
		printf("null");
	printf(", \"rule\": ");
	admin_json_str(stdout, g->rule);
	printf(", \"held_reason\": ");
	if (g->state == GEN_HELD)
		admin_json_str(stdout, g->held);
	else
		printf("null");
	printf("}");
}

void admin_json_gen_obj(const char *series, const struct cat_gen *g, const char *state,
			bool durable, const struct aq_gen_usage *u)
{
	printf("{\"id\": %" PRIu64 ", \"series\": ", g->id);
	admin_json_str(stdout, series);
	printf(", \"name\": ");
	admin_json_str(stdout, g->name);
	printf(", \"step\": %" PRIu64 ", \"state\": \"%s\", \"durable\": %s, \"version\": %u"
	       ", \"pinned\": %s, \"files\": %" PRIu64 ", \"logical_bytes\": %" PRIu64,
	       g->step, state, durable ? "true" : "false", g->version, g->pinned ? "true" : "false",
	       g->files, g->logical_bytes);
	if (u)
		printf(", \"stored_bytes\": %" PRIu64 ", \"exclusive_bytes\": %" PRIu64
		       ", \"unique_bytes\": %" PRIu64 ", \"chunks\": %" PRIu64
		       ", \"dedup_ratio\": %.3f",
		       u->exclusive_stored, u->exclusive_bytes, u->unique_bytes, u->chunks,
		       admin_ratio(g->logical_bytes, u->unique_bytes));
	printf(", \"created_ns\": %" PRId64 ", \"committed_ns\": %" PRId64
	       ", \"ended_ns\": %" PRId64 ", \"committed\": ",
	       g->created_ns, g->committed_ns, g->ended_ns);
	admin_json_gen_end(g);
}

void admin_list_header(void)
{
	printf("%-20s %-24s %8s %-9s %3s %6s %10s %10s %6s %-19s %s\n", "SERIES", "NAME", "STEP",
	       "STATE", "PIN", "FILES", "LOGICAL", "ALONE", "DEDUP", "COMMITTED", "RULE");
}

void admin_list_row(const char *series_path, const struct cat_gen *g, const char *state,
		    const struct aq_gen_usage *u)
{
	char s1[32], s2[32], t[32], dedup[16];
	if (u && u->unique_bytes)
		snprintf(dedup, sizeof(dedup), "%.2fx", admin_ratio(g->logical_bytes, u->unique_bytes));
	else
		snprintf(dedup, sizeof(dedup), "-");
	printf("%-20s %-24s %8" PRIu64 " %-9s %3s %6" PRIu64 " %10s %10s %6s %-19s %s%s%s\n",
	       series_path[1] ? series_path + 1 : "/", g->name, g->step, state,
	       g->pinned ? "yes" : "-", g->files, admin_size(g->logical_bytes, s1),
	       u ? admin_size(u->exclusive_stored, s2) : "-", dedup, admin_time(g->committed_ns, t),
	       g->rule[0] ? g->rule : "-", g->state == GEN_HELD ? ": " : "",
	       g->state == GEN_HELD ? g->held : "");
}

/* ---- show ---- */

void admin_show_print(struct admin *a, const struct admin_show *s)
{
	const struct cat_gen *g = s->g;
	const struct aq_gen_usage *u = s->u;
	char s1[32], s2[32], s3[32], t[32];
	if (a->json) {
		printf("{\"generation\": ");
		admin_json_gen_obj(s->series, g, s->state, s->durable, u);
		printf(",\n \"files\": [");
		for (size_t i = 0; i < s->nfiles; i++) {
			const struct admin_show_file *f = &s->files[i];
			printf("%s\n  {\"path\": ", i ? "," : "");
			admin_json_str(stdout, f->path);
			printf(", \"size\": %" PRIu64 ", \"extents\": %" PRIu64 ", \"chunks\": %" PRIu64 "}",
			       f->size, f->extents, f->chunks);
		}
		printf("%s],\n \"shares\": [", s->nfiles ? "\n " : "");
		for (size_t i = 0; i < s->nshares; i++) {
			const struct admin_show_share *sh = &s->shares[i];
			printf("%s\n  {\"id\": %" PRIu64 ", \"generation\": ", i ? "," : "", sh->gen_id);
			if (sh->label)
				admin_json_str(stdout, sh->label);
			else
				printf("null");
			printf(", \"chunks\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", sh->chunks, sh->bytes);
		}
		printf("%s]}\n", s->nshares ? "\n " : "");
		return;
	}
	printf("generation %s (id %" PRIu64 ")\n", s->label, g->id);
	printf("  step %" PRIu64 ", %s, version %u%s\n", g->step, s->state, g->version,
	       g->pinned ? ", pinned" : "");
	printf("  created %s, committed %s, rule %s\n", admin_time(g->created_ns, t),
	       admin_time(g->committed_ns, s3), g->rule[0] ? g->rule : "-");
	printf("  %" PRIu64 " files, %s logical, %" PRIu64 " chunks (%s unique, dedup %.2fx)\n",
	       g->files, admin_size(g->logical_bytes, s1), u->chunks, admin_size(u->unique_bytes, s2),
	       admin_ratio(g->logical_bytes, u->unique_bytes));
	printf("  held by it alone: %" PRIu64 " chunks, %s (%s stored)\n", u->exclusive_chunks,
	       admin_size(u->exclusive_bytes, s1), admin_size(u->exclusive_stored, s2));
	printf("\n  %12s %8s %8s  %s\n", "SIZE", "EXTENTS", "CHUNKS", "FILE");
	for (size_t i = 0; i < s->nfiles; i++) {
		const struct admin_show_file *f = &s->files[i];
		printf("  %12" PRIu64 " %8" PRIu64 " %8" PRIu64 "  %s\n", f->size, f->extents, f->chunks,
		       f->path);
	}
	printf("\n  shares with:%s\n", s->nshares ? "" : " no other generation");
	for (size_t i = 0; i < s->nshares; i++) {
		const struct admin_show_share *sh = &s->shares[i];
		printf("  %8" PRIu64 " chunks %10s  %s\n", sh->chunks, admin_size(sh->bytes, s1),
		       sh->label ? sh->label : "(files outside generations)");
	}
}

void admin_show_free(struct admin_show *s)
{
	for (size_t i = 0; i < s->nfiles; i++)
		free(s->files[i].path);
	for (size_t i = 0; i < s->nshares; i++)
		free(s->shares[i].label);
	free(s->files);
	free(s->shares);
	s->files = NULL;
	s->shares = NULL;
	s->nfiles = s->nshares = 0;
}
