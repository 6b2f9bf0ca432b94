/* Tests of fs/lib/zipcut.c: forced cuts around the data of large records of a zip
 * stream, with sizes in the local header or in a data descriptor (what
 * torch.save writes), fed whole or in pieces; anything else turns it off. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "zipcut.h"

#define MIN_REC 1000u

struct zbuf {
	uint8_t *p;
	size_t len, cap;
};

static void zput(struct zbuf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void zle(struct zbuf *b, uint64_t v, int bytes)
{
	uint8_t t[8];
	for (int i = 0; i < bytes; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	zput(b, t, (size_t)bytes);
}

/* Appends a stored record; returns its data's offset. With descriptor, the
 * header's sizes are 0 and a descriptor follows the data (zip64 if asked). */
static uint64_t zrecord(struct zbuf *b, const char *name, size_t size, bool descriptor,
			bool zip64, uint8_t fill)
{
	zput(b, "PK\3\4", 4);
	zle(b, 20, 2);
	zle(b, descriptor ? 0x0808 : 0, 2);
	zle(b, 0, 2); /* stored */
	zle(b, 0, 4); /* time, date */
	zle(b, 0, 4); /* crc */
	zle(b, descriptor ? 0 : size, 4);
	zle(b, descriptor ? 0 : size, 4);
	zle(b, strlen(name), 2);
	zle(b, 3, 2); /* extra: padding, as torch writes */
	zput(b, name, strlen(name));
	zput(b, "\0\0\0", 3);
	uint64_t start = b->len;
	uint8_t *data = malloc(size ? size : 1);
	for (size_t i = 0; i < size; i++) /* contains "PK\7\10" now and then */
		data[i] = i % 97 == 5 ? 'P' : i % 97 == 6 ? 'K' : i % 97 == 7 ? 7 : i % 97 == 8 ? 8 : fill;
	zput(b, data, size);
	free(data);
	if (descriptor) {
		zput(b, "PK\7\10", 4);
		zle(b, 0, 4);
		zle(b, size, zip64 ? 8 : 4);
		zle(b, size, zip64 ? 8 : 4);
	}
	return start;
}

/* Collects every forced cut of the stream fed in pieces of `piece` bytes,
 * the way the writer scans: up to each stop, waiting at a hold for more bytes;
 * at the stream's end what is left is its last chunk. */
static int zcuts(const struct zbuf *b, size_t piece, uint64_t *out, int max)
{
	struct zipcut z;
	zipcut_init(&z, MIN_REC);
	int n = 0;
	uint64_t pos = 0, chunk = 0; /* scanned up to; the current chunk's start */
	size_t have = 0;
	do {
		have = have + piece < b->len ? have + piece : b->len;
		while (pos < have) {
			bool cut;
			uint64_t stop = zipcut_next_stop(&z, b->p + chunk, chunk, have - chunk, pos, &cut);
			cr_assert_geq(stop, pos);
			if (stop == pos && !cut)
				break; /* wait for bytes */
			if (stop > have) {
				pos = have;
				break;
			}
			pos = stop;
			if (cut) {
				cr_assert_gt(stop, chunk, "an empty chunk");
				chunk = stop;
				if (n < max)
					out[n++] = stop;
			}
		}
	} while (have < b->len);
	return n;
}

static void central_directory(struct zbuf *b)
{
	zput(b, "PK\1\2", 4);
	zle(b, 0, 8);
}

Test(zipcut, torch_style_records_get_cuts_around_large_data_in_any_feeding)
{
	struct zbuf b = { 0 };
	zrecord(&b, "rank0/data.pkl", 300, true, false, 1);      /* small: no cuts */
	uint64_t s1 = zrecord(&b, "rank0/data/0", 5000, true, false, 2);
	uint64_t s2 = zrecord(&b, "rank0/data/1", 200, true, false, 3); /* small */
	uint64_t s3 = zrecord(&b, "rank0/data/2", 4096, true, true, 4); /* zip64 descriptor */
	(void)s2;
	central_directory(&b);
	uint64_t want[] = { s1, s1 + 5000, s3, s3 + 4096 };
	size_t pieces[] = { 1, 7, 64, 1000, 1 << 20 };
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		uint64_t got[8];
		int n = zcuts(&b, pieces[i], got, 8);
		cr_assert_eq(n, 4, "piece %zu: %d cuts", pieces[i], n);
		for (int j = 0; j < 4; j++)
			cr_assert_eq(got[j], want[j], "piece %zu: cut %d at %llu, want %llu", pieces[i], j,
				     (unsigned long long)got[j], (unsigned long long)want[j]);
	}
	free(b.p);
}

Test(zipcut, same_data_under_names_of_other_lengths_is_cut_at_its_own_bounds)
{
	struct zbuf a = { 0 }, c = { 0 };
	uint64_t sa = zrecord(&a, "a/data/0", 3000, true, false, 9);
	uint64_t sc = zrecord(&c, "a_much_longer_name/data/0", 3000, true, false, 9);
	central_directory(&a);
	central_directory(&c);
	uint64_t ga[4], gc[4];
	cr_assert_eq(zcuts(&a, 100, ga, 4), 2);
	cr_assert_eq(zcuts(&c, 100, gc, 4), 2);
	cr_assert_eq(ga[0], sa);
	cr_assert_eq(gc[0], sc);
	cr_assert_eq(ga[1] - ga[0], gc[1] - gc[0]);
	cr_assert_eq(memcmp(a.p + ga[0], c.p + gc[0], ga[1] - ga[0]), 0, "the cut data differs");
	free(a.p);
	free(c.p);
}

Test(zipcut, sizes_in_the_header_give_cuts_without_searching)
{
	struct zbuf b = { 0 };
	uint64_t s = zrecord(&b, "x/data/0", 2000, false, false, 5);
	zrecord(&b, "x/data/1", 10, false, false, 6);
	central_directory(&b);
	uint64_t got[4];
	cr_assert_eq(zcuts(&b, 33, got, 4), 2);
	cr_assert_eq(got[0], s);
	cr_assert_eq(got[1], s + 2000);
	free(b.p);
}

Test(zipcut, not_a_zip_or_a_compressed_record_turns_it_off)
{
	struct zbuf b = { 0 };
	zput(&b, "\x80\x02}q\0", 5); /* a legacy pickle torch.save */
	for (int i = 0; i < 5000; i++)
		zput(&b, "x", 1);
	uint64_t got[4];
	cr_assert_eq(zcuts(&b, 100, got, 4), 0);
	free(b.p);

	struct zbuf c = { 0 };
	zrecord(&c, "y/data/0", 3000, false, false, 1);
	c.p[8] = 8; /* method deflate */
	cr_assert_eq(zcuts(&c, 100, got, 4), 0);
	free(c.p);
}

Test(zipcut, a_chance_descriptor_signature_inside_the_data_is_not_an_end)
{
	/* the data holds "PK\7\10" every 97 bytes (zrecord's fill): only the real
	 * descriptor, with the data's size and a header after it, ends it */
	struct zbuf b = { 0 };
	uint64_t s = zrecord(&b, "z/data/0", 20000, true, false, 0);
	central_directory(&b);
	uint64_t got[4];
	cr_assert_eq(zcuts(&b, 4096, got, 4), 2);
	cr_assert_eq(got[0], s);
	cr_assert_eq(got[1], s + 20000);
	free(b.p);
}
