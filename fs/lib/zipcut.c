/* zipcut — chunk cut points of a zip archive being written; see zipcut.h.
 *
 * A local file header (APPNOTE 4.3.7), little-endian:
 *   0 signature "PK\3\4"   6 flags   8 method   18 compressed size
 *   22 uncompressed size   26 name length   28 extra length   30 name, extra
 * then the data. Sizes of 0xFFFFFFFF are in the ZIP64 extra field (id 1):
 * the uncompressed size, then the compressed one, each only if its header
 * field is 0xFFFFFFFF. */
#define _GNU_SOURCE /* memmem */
#include "zipcut.h"

#include <string.h>

#define ZIPCUT_HEADER 30u
#define ZIPCUT_FLAG_DESCRIPTOR 0x0008u
#define ZIPCUT_METHOD_STORED 0u
#define ZIPCUT_ZIP64_ID 0x0001u

static uint16_t zipcut_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t zipcut_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t zipcut_le64(const uint8_t *p)
{
	return (uint64_t)zipcut_le32(p) | (uint64_t)zipcut_le32(p + 4) << 32;
}

void zipcut_init(struct zipcut *z, uint64_t min_record)
{
	memset(z, 0, sizeof(*z));
	z->active = true;
	z->min_record = min_record;
}

/* The record's data size from a ZIP64 extra field; 0 if absent. */
static int zipcut_zip64(const uint8_t *extra, uint16_t xlen, bool usize_in, bool csize_in,
			uint64_t *csize)
{
	for (uint32_t at = 0; at + 4 <= xlen;) {
		uint16_t id = zipcut_le16(extra + at), len = zipcut_le16(extra + at + 2);
		if (at + 4 + len > xlen)
			return -1;
		if (id == ZIPCUT_ZIP64_ID) {
			uint32_t need = 8u * (usize_in + csize_in);
			if (len < need)
				return -1;
			if (csize_in)
				*csize = zipcut_le64(extra + at + 4 + (usize_in ? 8 : 0));
			return 0;
		}
		at += 4u + len;
	}
	return -1;
}

static int zipcut_off(struct zipcut *z)
{
	z->active = false;
	z->ncut = 0;
	return -1;
}

/* Parses the header at next_header: 1 parsed (cuts queued), 0 its bytes are
 * not all buffered yet, -1 not a record we follow (zipcut is now off). */
static int zipcut_parse(struct zipcut *z, const uint8_t *buf, uint64_t base, size_t len)
{
	uint64_t h = z->next_header;
	if (h < base) /* its bytes were consumed unparsed: cannot follow */
		return zipcut_off(z);
	if (h - base >= len)
		return 0;
	const uint8_t *p = buf + (h - base);
	uint64_t avail = base + len - h;
	if (avail < 4)
		return 0;
	if (memcmp(p, "PK\3\4", 4) != 0) /* the central directory, or not a zip */
		return zipcut_off(z);
	if (avail < ZIPCUT_HEADER)
		return 0;
	uint16_t flags = zipcut_le16(p + 6), method = zipcut_le16(p + 8);
	uint64_t csize = zipcut_le32(p + 18), usize = zipcut_le32(p + 22);
	uint16_t nlen = zipcut_le16(p + 26), xlen = zipcut_le16(p + 28);
	if (method != ZIPCUT_METHOD_STORED)
		return zipcut_off(z); /* not the bytes as written */
	if (avail < ZIPCUT_HEADER + nlen + xlen)
		return 0;
	if (flags & ZIPCUT_FLAG_DESCRIPTOR) { /* sizes after the data: search for them */
		z->in_record = true;
		z->decided = false;
		z->data_start = h + ZIPCUT_HEADER + nlen + xlen;
		z->search_from = z->data_start;
		return 1;
	}
	if ((csize == 0xFFFFFFFFu || usize == 0xFFFFFFFFu) &&
	    zipcut_zip64(p + ZIPCUT_HEADER + nlen, xlen, usize == 0xFFFFFFFFu,
			 csize == 0xFFFFFFFFu, &csize) != 0)
		return zipcut_off(z);
	uint64_t data_start = h + ZIPCUT_HEADER + nlen + xlen;
	if (csize > UINT64_MAX - data_start)
		return zipcut_off(z);
	uint64_t data_end = data_start + csize;
	if (csize >= z->min_record) {
		z->cut[0] = data_start;
		z->cut[1] = data_end;
		z->ncut = 2;
	}
	z->next_header = data_end;
	return 1;
}

/* Is there a data descriptor at offset d (buffered) for data [data_start, d),
 * followed by another header? Sets *desc_len; 0 no, 1 yes, -1 need bytes. */
static int zipcut_descriptor_at(const struct zipcut *z, const uint8_t *buf, uint64_t base,
				size_t len, uint64_t d, uint64_t *desc_len)
{
	uint64_t size = d - z->data_start, avail = base + len - d;
	const uint8_t *p = buf + (d - base);
	if (avail < 16 + 4)
		return -1;
	if (zipcut_le32(p + 8) == size && zipcut_le32(p + 12) == size &&
	    (memcmp(p + 16, "PK\3\4", 4) == 0 || memcmp(p + 16, "PK\1\2", 4) == 0)) {
		*desc_len = 16;
		return 1;
	}
	if (avail < 24 + 4)
		return -1;
	if (zipcut_le64(p + 8) == size && zipcut_le64(p + 16) == size &&
	    (memcmp(p + 24, "PK\3\4", 4) == 0 || memcmp(p + 24, "PK\1\2", 4) == 0)) {
		*desc_len = 24;
		return 1;
	}
	return 0;
}

/* Searches the buffered bytes of a descriptor record for its end; queues the
 * cuts once the record is known to be large, and returns where the caller
 * may scan to (a hold), or UINT64_MAX if cuts or the next header are set. */
static uint64_t zipcut_search(struct zipcut *z, const uint8_t *buf, uint64_t base, size_t len)
{
	uint64_t end = base + len;
	uint64_t at = z->search_from > base ? z->search_from : base;
	while (at + 4 <= end) {
		const uint8_t *hit = memmem(buf + (at - base), (size_t)(end - at), "PK\7\10", 4);
		if (!hit)
			break;
		uint64_t d = base + (uint64_t)(hit - buf), desc_len = 0;
		int r = zipcut_descriptor_at(z, buf, base, len, d, &desc_len);
		if (r < 0) { /* a candidate whose fields are not all here yet */
			z->search_from = d;
			return z->decided ? d : z->data_start;
		}
		if (r > 0) {
			bool large = d - z->data_start >= z->min_record;
			if (large && !z->decided)
				z->cut[z->ncut++] = z->data_start;
			if (large)
				z->cut[z->ncut++] = d;
			z->in_record = false;
			z->next_header = d + desc_len;
			return UINT64_MAX;
		}
		at = d + 1;
	}
	/* no end yet: the last 3 bytes may start a signature */
	z->search_from = end > 3 && end - 3 > at ? end - 3 : at;
	if (!z->decided && z->search_from - z->data_start >= z->min_record) {
		z->decided = true; /* large: cut at its start now, its end when found */
		z->cut[0] = z->data_start;
		z->ncut = 1;
		return UINT64_MAX;
	}
	return z->decided ? z->search_from : z->data_start;
}

uint64_t zipcut_next_stop(struct zipcut *z, const uint8_t *buf, uint64_t base, size_t len,
			  uint64_t pos, bool *cut)
{
	for (;;) {
		while (z->ncut > 0 && z->cut[0] <= base) { /* a chunk starts there already */
			z->cut[0] = z->cut[1];
			z->ncut--;
		}
		if (z->ncut > 0) {
			*cut = true;
			return z->cut[0];
		}
		*cut = false;
		if (!z->active)
			return UINT64_MAX;
		if (z->in_record) {
			uint64_t hold = zipcut_search(z, buf, base, len);
			if (hold == UINT64_MAX)
				continue; /* cuts queued, or the record ended */
			return hold > pos ? hold : pos;
		}
		if (z->next_header > pos)
			return z->next_header; /* scan up to the next header, then parse it */
		if (z->next_header < pos) { /* scanned past it: not ours to follow */
			z->active = false;
			return UINT64_MAX;
		}
		int r = zipcut_parse(z, buf, base, len);
		if (r < 0)
			return UINT64_MAX;
		if (r == 0)
			return pos; /* wait for the rest of the header */
	}
}
