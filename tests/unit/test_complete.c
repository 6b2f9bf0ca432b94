/* Tests of fs/lib/complete.c: completion of a checkpoint file judged by its bytes,
 * on real files (torch 1.13 torch.save, numpy np.save/savez/savez_compressed,
 * a hand-written safetensors; tests/unit/fixtures/complete/make_fixtures.py)
 * whole, truncated, with headers zeroed, bytes flipped and reads failing.
 *
 * complete.c is a daemon module the unit binary does not link (the Makefile
 * links only CORE_SRC), so it is included here, as test_writer.c does. */
#include "complete.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Little-endian readers and the zip end-record magic, for building test cases
 * (complete.c keeps its own private). */
#define ZIP_END 0x06054b50u
static uint32_t complete_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t complete_le64(const uint8_t *p)
{
	return (uint64_t)complete_le32(p) | (uint64_t)complete_le32(p + 4) << 32;
}

/* ---- a file in memory, read through the callback ---- */

struct mem {
	uint8_t *p;
	size_t n;
	bool past_end; /* a read went past n: never allowed */
	long reads;    /* reads made */
	long fail_at;  /* the read (1-based) that fails with -EIO; 0 none */
	uint64_t virt; /* > n: a virtual size, the bytes past n read as zeros */
};

static int mem_read(void *arg, uint64_t off, size_t len, void *buf)
{
	struct mem *m = arg;
	uint64_t size = m->virt > m->n ? m->virt : m->n;
	m->reads++;
	if (off > size || len > size - off) {
		m->past_end = true;
		return -EFAULT;
	}
	if (m->fail_at && m->reads == m->fail_at)
		return -EIO;
	memset(buf, 0, len);
	if (off < m->n)
		memcpy(buf, m->p + off, off + len <= m->n ? len : m->n - off);
	return 0;
}

static const char *fixture_dir(void)
{
	static char dir[512];
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s", __FILE__);
		char *slash = strrchr(dir, '/');
		if (slash)
			slash[1] = '\0';
		else
			dir[0] = '\0';
		strncat(dir, "fixtures/complete/", sizeof(dir) - strlen(dir) - 1);
	}
	return dir;
}

static struct mem load(const char *name)
{
	char path[768];
	snprintf(path, sizeof(path), "%s%s", fixture_dir(), name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "fixture %s: %s", path, strerror(errno));
	struct mem m = {0};
	fseek(f, 0, SEEK_END);
	m.n = (size_t)ftell(f);
	rewind(f);
	m.p = malloc(m.n ? m.n : 1);
	cr_assert_eq(fread(m.p, 1, m.n, f), m.n);
	fclose(f);
	return m;
}

/* Judges the first size bytes of m under name; asserts rc 0, no read past size. */
static struct complete_result judge_n(struct mem *m, const char *name, size_t size)
{
	struct complete_result r;
	struct mem v = *m;
	v.n = size;
	v.past_end = false;
	int rc = complete_check(name, size, mem_read, &v, &r);
	cr_assert_eq(rc, 0, "%s (%zu bytes): complete_check returned %d", name, size, rc);
	cr_assert(!v.past_end, "%s (%zu bytes): a read went past the end", name, size);
	cr_assert(r.complete || r.reason[0], "%s (%zu bytes): not complete without a reason", name,
		  size);
	cr_assert(!r.complete || r.reason[0] == '\0');
	return r;
}

static struct complete_result judge(struct mem *m, const char *name)
{
	return judge_n(m, name, m->n);
}

static const struct {
	const char *name;
	int format;
} whole[] = {
	{"torch_sd.pt", COMPLETE_FMT_TORCH},        {"torch_adam.pt", COMPLETE_FMT_TORCH},
	{"torch_shared.pt", COMPLETE_FMT_TORCH},    {"torch_view.pt", COMPLETE_FMT_TORCH},
	{"torch2_layout.pt", COMPLETE_FMT_TORCH},
	{"savez.npz", COMPLETE_FMT_NPZ},            {"savez_c.npz", COMPLETE_FMT_NPZ},
	{"plain.zip", COMPLETE_FMT_ZIP},            {"model.safetensors", COMPLETE_FMT_SAFETENSORS},
	{"arrays_f4.npy", COMPLETE_FMT_NPY},        {"arrays_f2.npy", COMPLETE_FMT_NPY},
	{"arrays_i8.npy", COMPLETE_FMT_NPY},        {"arrays_u1.npy", COMPLETE_FMT_NPY},
	{"arrays_b1.npy", COMPLETE_FMT_NPY},        {"arrays_c8.npy", COMPLETE_FMT_NPY},
	{"arrays_fortran.npy", COMPLETE_FMT_NPY},   {"arrays_scalar.npy", COMPLETE_FMT_NPY},
	{"arrays_empty.npy", COMPLETE_FMT_NPY},
};
#define NWHOLE (sizeof(whole) / sizeof(whole[0]))

/* ---- whole files ---- */

Test(complete, every_whole_fixture_is_complete_in_its_format)
{
	for (size_t i = 0; i < NWHOLE; i++) {
		struct mem m = load(whole[i].name);
		struct complete_result r = judge(&m, whole[i].name);
		cr_expect(r.complete, "%s: not complete: %s", whole[i].name, r.reason);
		cr_expect_eq(r.format, whole[i].format, "%s: format %s", whole[i].name,
			     complete_format_name(r.format));
		free(m.p);
	}
}

Test(complete, format_is_decided_by_magic_not_by_name)
{
	struct mem m = load("torch_sd.pt");
	struct complete_result r = judge(&m, "weights.safetensors");
	cr_expect(r.complete);
	cr_expect_eq(r.format, COMPLETE_FMT_TORCH);
	free(m.p);
	m = load("model.safetensors");
	r = judge(&m, "model.pt");
	cr_expect(r.complete);
	cr_expect_eq(r.format, COMPLETE_FMT_SAFETENSORS);
	free(m.p);
}

Test(complete, format_names)
{
	cr_expect_str_eq(complete_format_name(COMPLETE_FMT_TORCH), "torch.save");
	cr_expect_str_eq(complete_format_name(COMPLETE_FMT_ZIP), "zip");
	cr_expect_str_eq(complete_format_name(COMPLETE_FMT_NPZ), "npz");
	cr_expect_str_eq(complete_format_name(COMPLETE_FMT_SAFETENSORS), "safetensors");
	cr_expect_str_eq(complete_format_name(COMPLETE_FMT_NPY), "npy");
	cr_expect_str_eq(complete_format_name(COMPLETE_FMT_NONE), "unknown");
	cr_expect_str_eq(complete_format_name(99), "unknown");
}

/* ---- incomplete files ---- */

static void expect_incomplete(const char *file, int format, const char *reason_part)
{
	struct mem m = load(file);
	struct complete_result r = judge(&m, file);
	cr_expect(!r.complete, "%s judged complete", file);
	cr_expect_eq(r.format, format, "%s: format %s", file, complete_format_name(r.format));
	cr_expect(strstr(r.reason, reason_part), "%s: reason \"%s\" lacks \"%s\"", file, r.reason,
		  reason_part);
	free(m.p);
}

/* These archives are consistent zips (rebuilt by Python's zipfile): only the
 * check of data.pkl's storages against the records finds them incomplete. */
Test(complete, torch_storage_record_removed_is_incomplete)
{
	expect_incomplete("torch_missing.pt", COMPLETE_FMT_TORCH,
			  "record torch_sd/data/0 missing, data.pkl references it");
}

Test(complete, torch_storage_record_renamed_is_incomplete)
{
	expect_incomplete("torch_renamed.pt", COMPLETE_FMT_TORCH,
			  "record torch_sd/data/0 missing, data.pkl references it");
}

Test(complete, torch_storage_record_shorter_than_numel_is_incomplete)
{
	expect_incomplete("torch_short.pt", COMPLETE_FMT_TORCH,
			  "record torch_sd/data/0 is 40 bytes, data.pkl says 80");
}

Test(complete, torch2_layout_storage_shorter_than_its_bytes_is_incomplete)
{
	expect_incomplete("torch2_short.pt", COMPLETE_FMT_TORCH,
			  "record archive/data/1 is 3 bytes, data.pkl says 6");
}

Test(complete, torch_save_that_raised_mid_pickle_is_incomplete)
{
	expect_incomplete("torch_exc.pt", COMPLETE_FMT_TORCH, "without data.pkl");
}

Test(complete, torch_compressed_data_pkl_is_not_judged_complete)
{
	expect_incomplete("torch_deflated.pt", COMPLETE_FMT_TORCH, "data.pkl is compressed");
}

Test(complete, npz_member_shorter_than_its_npy_header_is_incomplete)
{
	expect_incomplete("npz_short.npz", COMPLETE_FMT_NPZ,
			  "weights.npy: npy data is 60 bytes, header needs 64");
}

Test(complete, safetensors_offsets_past_the_data_are_incomplete)
{
	expect_incomplete("st_short.safetensors", COMPLETE_FMT_SAFETENSORS,
			  "is outside the 166 data bytes");
}

Test(complete, npy_object_dtype_is_not_judged_complete)
{
	expect_incomplete("obj.npy", COMPLETE_FMT_NPY, "dtype |O not judged");
}

Test(complete, unknown_content_is_format_none)
{
	struct mem m = {.p = (uint8_t *)"hello, world\n", .n = 13};
	struct complete_result r = judge(&m, "notes.txt");
	cr_expect_eq(r.format, COMPLETE_FMT_NONE);
	cr_expect(!r.complete);
	cr_expect_str_eq(r.reason, "not a recognised checkpoint format");
	m.n = 0;
	r = judge(&m, "empty");
	cr_expect_eq(r.format, COMPLETE_FMT_NONE);
}

Test(complete, empty_file_with_a_checkpoint_name_is_that_format_incomplete)
{
	struct mem m = {.p = (uint8_t *)"", .n = 0};
	static const struct {
		const char *name;
		int format;
	} cases[] = {{"a.pt", COMPLETE_FMT_TORCH}, {"b.safetensors", COMPLETE_FMT_SAFETENSORS},
		     {"c.npy", COMPLETE_FMT_NPY}, {"d.npz", COMPLETE_FMT_NPZ}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct complete_result r = judge(&m, cases[i].name);
		cr_expect(!r.complete);
		cr_expect_eq(r.format, cases[i].format, "%s", cases[i].name);
	}
}

/* ---- truncation ---- */

/* The central directory's offset and size from the 32-bit end record. */
static void zip_cd(const struct mem *m, uint64_t *cd_off, uint64_t *cd_size)
{
	cr_assert(m->n >= 22);
	const uint8_t *e = m->p + m->n - 22;
	cr_assert_eq(complete_le32(e), ZIP_END);
	*cd_size = complete_le32(e + 12);
	*cd_off = complete_le32(e + 16);
}

Test(complete, truncated_at_ten_points_is_never_complete)
{
	for (size_t i = 0; i < NWHOLE; i++) {
		struct mem m = load(whole[i].name);
		size_t n = m.n, cut[10] = {0, 1, 7, 9, n / 4, n / 2, 3 * n / 4, n - 10, n - 2, n - 1};
		bool zip = whole[i].format == COMPLETE_FMT_TORCH || whole[i].format == COMPLETE_FMT_ZIP ||
			   whole[i].format == COMPLETE_FMT_NPZ;
		if (zip) { /* inside the last record, the central directory, the end record */
			uint64_t cd_off, cd_size;
			zip_cd(&m, &cd_off, &cd_size);
			cut[2] = (size_t)cd_off - 20;
			cut[3] = (size_t)cd_off - 1;
			cut[6] = (size_t)(cd_off + cd_size / 2);
			cut[7] = n - 22;
		}
		for (int c = 0; c < 10; c++) {
			struct complete_result r = judge_n(&m, whole[i].name, cut[c]);
			cr_expect(!r.complete, "%s cut to %zu bytes judged complete", whole[i].name,
				  cut[c]);
			if (cut[c] >= 12)
				cr_expect_eq(r.format, whole[i].format, "%s cut to %zu: format %s (%s)",
					     whole[i].name, cut[c], complete_format_name(r.format),
					     r.reason);
		}
		free(m.p);
	}
}

Test(complete, truncated_torch_archive_says_why)
{
	struct mem m = load("torch_sd.pt");
	struct complete_result r = judge_n(&m, "torch_sd.pt", m.n - 1);
	cr_expect_str_eq(r.reason, "zip end record missing (truncated?)");
	cr_expect_eq(r.format, COMPLETE_FMT_TORCH);
	free(m.p);
	m = load("model.safetensors");
	r = judge_n(&m, "model.safetensors", m.n - 1);
	cr_expect(strstr(r.reason, "outside the 175 data bytes"), "%s", r.reason);
	free(m.p);
	m = load("arrays_f4.npy");
	r = judge_n(&m, "arrays_f4.npy", m.n - 4);
	cr_expect(strstr(r.reason, "npy data is 44 bytes, header needs 48"), "%s", r.reason);
	free(m.p);
}

/* ---- damaged headers and flipped bytes ---- */

static uint64_t find(const struct mem *m, const char *needle, size_t len)
{
	for (size_t i = 0; i + len <= m->n; i++)
		if (memcmp(m->p + i, needle, len) == 0)
			return i;
	cr_assert_fail("\"%s\" not found", needle);
	return 0;
}

Test(complete, zeroed_local_header_is_incomplete)
{
	struct mem m = load("torch_sd.pt");
	uint64_t name = find(&m, "torch_sd/data/1", 15); /* the local header's name */
	memset(m.p + name - 30, 0, 30);
	struct complete_result r = judge(&m, "torch_sd.pt");
	cr_expect(!r.complete);
	cr_expect(strstr(r.reason, "local header"), "%s", r.reason);
	free(m.p);
}

Test(complete, zeroed_central_entry_is_incomplete)
{
	struct mem m = load("savez.npz");
	uint64_t cd_off, cd_size;
	zip_cd(&m, &cd_off, &cd_size);
	memset(m.p + cd_off, 0, 46);
	struct complete_result r = judge(&m, "savez.npz");
	cr_expect(!r.complete);
	cr_expect(strstr(r.reason, "no signature"), "%s", r.reason);
	free(m.p);
}

Test(complete, zeroed_npy_and_safetensors_headers_are_incomplete)
{
	struct mem m = load("arrays_i8.npy");
	memset(m.p + 10, ' ', 40); /* the dict's start */
	struct complete_result r = judge(&m, "arrays_i8.npy");
	cr_expect(!r.complete);
	cr_expect(strstr(r.reason, "lacks descr"), "%s", r.reason);
	free(m.p);
	m = load("model.safetensors");
	memset(m.p, 0, 8);
	r = judge(&m, "model.safetensors");
	cr_expect(!r.complete);
	cr_expect_eq(r.format, COMPLETE_FMT_SAFETENSORS);
	cr_expect(strstr(r.reason, "header length 0 implausible"), "%s", r.reason);
	free(m.p);
}

Test(complete, unknown_pickle_opcode_is_unparsable)
{
	struct mem m = load("torch_sd.pt");
	uint64_t pkl = find(&m, "\x80\x02", 2);
	m.p[pkl + 2] = 0xff;
	struct complete_result r = judge(&m, "torch_sd.pt");
	cr_expect(!r.complete);
	cr_expect(strstr(r.reason, "unparsable data.pkl: unknown opcode at byte 2"), "%s", r.reason);
	free(m.p);
}

Test(complete, unknown_storage_type_is_incomplete)
{
	struct mem m = load("torch_sd.pt");
	uint64_t at = find(&m, "FloatStorage", 12);
	memcpy(m.p + at, "FloatStorafe", 12);
	struct complete_result r = judge(&m, "torch_sd.pt");
	cr_expect(!r.complete);
	cr_expect(strstr(r.reason, "storage type"), "%s", r.reason);
	free(m.p);
}

Test(complete, pickle_without_stop_is_incomplete)
{
	struct mem m = load("torch_sd.pt");
	uint64_t desc = find(&m, "PK\x07\x08", 4); /* after data.pkl, the first record */
	cr_assert_eq(m.p[desc - 1], '.');
	m.p[desc - 1] = 'N';
	struct complete_result r = judge(&m, "torch_sd.pt");
	cr_expect(!r.complete);
	cr_expect_str_eq(r.reason, "data.pkl ends before STOP");
	free(m.p);
}

/* Every byte of each fixture (up to 2 KiB) flipped four ways: no crash, no
 * read past the end, a reason whenever it is not complete (judge_n). Bytes
 * flipped in a length, an offset or a header must never turn an incomplete
 * file complete: checked on the truncated ones. */
Test(complete, flipped_bytes_never_crash_and_give_a_reason)
{
	static const uint8_t flips[] = {0x01, 0x80, 0xff, 0x10};
	for (size_t i = 0; i < NWHOLE; i++) {
		struct mem m = load(whole[i].name);
		size_t lim = m.n < 2048 ? m.n : 2048;
		for (size_t at = 0; at < lim; at++) {
			for (size_t f = 0; f < sizeof(flips); f++) {
				m.p[at] ^= flips[f];
				(void)judge(&m, whole[i].name);
				struct complete_result r = judge_n(&m, whole[i].name, m.n - 1);
				cr_expect(!r.complete, "%s byte %zu ^%02x, 1 byte short: complete",
					  whole[i].name, at, flips[f]);
				m.p[at] ^= flips[f];
			}
		}
		free(m.p);
	}
}

Test(complete, flipped_zip_lengths_give_a_reason)
{
	struct mem m = load("torch_sd.pt");
	uint64_t cd_off, cd_size;
	zip_cd(&m, &cd_off, &cd_size);
	static const size_t fields[] = {20, 24, 28, 30, 32, 42}; /* csize usize nlen xlen clen off */
	for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
		m.p[cd_off + fields[f] + 1] ^= 0x40;
		struct complete_result r = judge(&m, "torch_sd.pt");
		cr_expect(!r.complete, "central field %zu flipped: complete", fields[f]);
		m.p[cd_off + fields[f] + 1] ^= 0x40;
	}
	m.p[m.n - 22 + 12] ^= 0x01; /* the end record's directory size */
	struct complete_result r = judge(&m, "torch_sd.pt");
	cr_expect(!r.complete);
	free(m.p);
}

/* ---- reads that fail; sizes far larger than what is read ---- */

Test(complete, a_failed_read_is_returned_at_every_read)
{
	for (size_t i = 0; i < NWHOLE; i++) {
		struct mem m = load(whole[i].name);
		size_t whole_size = m.n;
		for (int cut = 0; cut < 2; cut++) { /* whole, and 1 byte short */
			struct complete_result r;
			m.n = whole_size - (size_t)cut;
			m.fail_at = 0;
			m.reads = 0;
			cr_assert_eq(complete_check(whole[i].name, m.n, mem_read, &m, &r), 0);
			long total = m.reads;
			for (long k = 1; k <= total; k++) {
				m.reads = 0;
				m.fail_at = k;
				int rc = complete_check(whole[i].name, m.n, mem_read, &m, &r);
				cr_expect_eq(rc, -EIO, "%s (%zu bytes): read %ld failing gave %d",
					     whole[i].name, m.n, k, rc);
			}
		}
		free(m.p);
	}
}

/* A 1 TiB safetensors file whose header covers it is judged from its
 * header: the data is never read. */
Test(complete, huge_safetensors_is_judged_from_its_header)
{
	char hdr[160];
	uint64_t data = 1ull << 40;
	int n = snprintf(hdr, sizeof(hdr), "{\"w\":{\"dtype\":\"U8\",\"shape\":[%llu],"
			 "\"data_offsets\":[0,%llu]}}", (unsigned long long)data,
			 (unsigned long long)data);
	uint8_t buf[200];
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, hdr, (size_t)n);
	struct mem m = {.p = buf, .n = 8 + (size_t)n, .virt = 8 + (uint64_t)n + data};
	struct complete_result r;
	cr_assert_eq(complete_check("big.safetensors", m.virt, mem_read, &m, &r), 0);
	cr_expect(r.complete, "%s", r.reason);
	cr_expect_lt(m.reads, 10);
	cr_assert_eq(complete_check("big.safetensors", m.virt - 1, mem_read, &m, &r), 0);
	cr_expect(!r.complete);
}

/* safetensors >= 0.8 pre-sizes the file: header written, data still zeros.
 * That cannot be told from a complete file (complete.h says so). */
Test(complete, presized_safetensors_with_zero_data_is_indistinguishable)
{
	struct mem m = load("model.safetensors");
	uint64_t hlen = complete_le64(m.p);
	memset(m.p + 8 + hlen, 0, m.n - 8 - hlen);
	struct complete_result r = judge(&m, "model.safetensors");
	cr_expect(r.complete);
	free(m.p);
}

/* Found by tests/fuzz/fuzz_complete.c: a NUL byte where a JSON value starts
 * made the skipper loop forever. */
Test(complete, safetensors_header_with_a_nul_byte_is_judged, .timeout = 10)
{
	struct mem m = load("model.safetensors");
	uint64_t at = find(&m, ",\"note\"", 7);
	m.p[at] = '\0';
	struct complete_result r = judge(&m, "model.safetensors");
	cr_expect(!r.complete);
	cr_expect_str_eq(r.reason, "safetensors header is not valid JSON");
	free(m.p);
}

/* ---- a large archive built here: many storages, a large memo ---- */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *data, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2;
		b->p = realloc(b->p, b->cap);
		cr_assert_not_null(b->p);
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
}

static void put_le(struct buf *b, uint64_t v, int bytes)
{
	uint8_t t[8];
	for (int i = 0; i < bytes; i++)
		t[i] = (uint8_t)(v >> (8 * i));
	put(b, t, (size_t)bytes);
}

static void put_str(struct buf *b, const char *s) /* BINUNICODE */
{
	put(b, "X", 1);
	put_le(b, strlen(s), 4);
	put(b, s, strlen(s));
}

/* A data.pkl as torch writes one for {"t<i>": storage i of i % 5 + 1 floats}:
 * 'storage', the class and 'cpu' memoized once and fetched back by BINGET,
 * each key memoized with LONG_BINPUT, items set 1000 at a time. */
static void big_pickle(struct buf *b, int n)
{
	put(b, "\x80\x02}q\x00(", 6);
	for (int i = 0; i < n; i++) {
		char key[32];
		snprintf(key, sizeof(key), "t%d", i);
		put_str(b, key);
		put(b, "(", 1);
		if (i == 0) {
			put_str(b, "storage");
			put(b, "q\x01" "ctorch\nFloatStorage\nq\x02", 24);
		} else {
			put(b, "h\x01h\x02", 4);
		}
		snprintf(key, sizeof(key), "%d", i);
		put_str(b, key);
		put(b, "r", 1);
		put_le(b, 10 + (uint64_t)i, 4);
		if (i == 0) {
			put_str(b, "cpu");
			put(b, "q\x03", 2);
		} else {
			put(b, "h\x03", 2);
		}
		put(b, "K", 1);
		put_le(b, (uint64_t)(i % 5 + 1), 1);
		put(b, "tQ", 2);
		if (i % 1000 == 999)
			put(b, "u(", 2);
	}
	put(b, "u.", 2);
}

struct central {
	char name[32];
	uint64_t size, off;
};

static void big_record(struct buf *b, struct central *c, const char *name, const void *data,
		       size_t size)
{
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->size = size;
	c->off = b->n;
	put(b, "PK\3\4", 4);
	put_le(b, 20, 2);
	put_le(b, 0, 2);  /* flags */
	put_le(b, 0, 2);  /* stored */
	put_le(b, 0, 8);  /* time, date, crc */
	put_le(b, size, 4);
	put_le(b, size, 4);
	put_le(b, strlen(name), 2);
	put_le(b, 0, 2);
	put(b, name, strlen(name));
	put(b, data, size);
}

/* The archive "big" with n storages, storage `drop` left out (-1: none). */
static struct buf big_archive(int n, int drop)
{
	struct buf b = {0}, pkl = {0};
	struct central *c = calloc((size_t)n + 1, sizeof(*c));
	int nc = 0;
	big_pickle(&pkl, n);
	big_record(&b, &c[nc++], "big/data.pkl", pkl.p, pkl.n);
	static const uint8_t zeros[20];
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof(name), "big/data/%d", i);
		if (i != drop)
			big_record(&b, &c[nc++], name, zeros, (size_t)(i % 5 + 1) * 4);
	}
	uint64_t cd = b.n;
	for (int i = 0; i < nc; i++) {
		put(&b, "PK\1\2", 4);
		put_le(&b, 20, 2);
		put_le(&b, 20, 2);
		put_le(&b, 0, 2);
		put_le(&b, 0, 2);
		put_le(&b, 0, 8);
		put_le(&b, c[i].size, 4);
		put_le(&b, c[i].size, 4);
		put_le(&b, strlen(c[i].name), 2);
		put_le(&b, 0, 6);  /* extra, comment, disk */
		put_le(&b, 0, 6);  /* attributes */
		put_le(&b, c[i].off, 4);
		put(&b, c[i].name, strlen(c[i].name));
	}
	uint64_t cd_size = b.n - cd;
	put(&b, "PK\5\6", 4);
	put_le(&b, 0, 4);
	put_le(&b, (uint64_t)nc, 2);
	put_le(&b, (uint64_t)nc, 2);
	put_le(&b, cd_size, 4);
	put_le(&b, cd, 4);
	put_le(&b, 0, 2);
	free(c);
	free(pkl.p);
	return b;
}

Test(complete, archive_of_5000_storages_with_a_large_memo_is_complete)
{
	struct buf b = big_archive(5000, -1);
	struct mem m = {.p = b.p, .n = b.n};
	struct complete_result r = judge(&m, "big.pt");
	cr_expect(r.complete, "%s", r.reason);
	cr_expect_eq(r.format, COMPLETE_FMT_TORCH);
	free(b.p);
}

Test(complete, archive_of_5000_storages_missing_one_names_it)
{
	struct buf b = big_archive(5000, 4321);
	struct mem m = {.p = b.p, .n = b.n};
	struct complete_result r = judge(&m, "big.pt");
	cr_expect(!r.complete);
	cr_expect_str_eq(r.reason, "record big/data/4321 missing, data.pkl references it");
	free(b.p);
}

/* ---- an 8 GiB archive, read sparsely ---- */

struct sparse {
	struct buf head, tail; /* file bytes [0, head.n) and [tail_off, tail_off+tail.n) */
	uint64_t tail_off;
	uint64_t bytes_read;
	bool past_end;
};

static int sparse_read(void *arg, uint64_t off, size_t len, void *buf)
{
	struct sparse *s = arg;
	uint64_t size = s->tail_off + s->tail.n;
	if (off > size || len > size - off) {
		s->past_end = true;
		return -EFAULT;
	}
	s->bytes_read += len;
	memset(buf, 0, len);
	for (size_t i = 0; i < len; i++) {
		uint64_t at = off + i;
		if (at < s->head.n)
			((uint8_t *)buf)[i] = s->head.p[at];
		else if (at >= s->tail_off)
			((uint8_t *)buf)[i] = s->tail.p[at - s->tail_off];
	}
	return 0;
}

/* huge/data.pkl naming one DoubleStorage of 2^30 elements, and the 8 GiB
 * record huge/data/0 (ZIP64 sizes; `short_by` bytes less than it needs),
 * then a ZIP64 central directory and end record. */
static struct sparse huge_archive(uint64_t short_by)
{
	struct sparse s = {0};
	struct buf pkl = {0};
	put(&pkl, "\x80\x02(X\x07\x00\x00\x00storageq\x01" "ctorch\nDoubleStorage\n", 38);
	put_str(&pkl, "0");
	put_str(&pkl, "cpu");
	put(&pkl, "J\x00\x00\x00\x40tQ.", 8); /* numel 2^30 */
	uint64_t big = (1ull << 33) - short_by;
	struct central c[2];
	big_record(&s.head, &c[0], "huge/data.pkl", pkl.p, pkl.n);
	c[1].off = s.head.n; /* the large record's local header, with a ZIP64 extra */
	snprintf(c[1].name, sizeof(c[1].name), "huge/data/0");
	c[1].size = big;
	put(&s.head, "PK\3\4", 4);
	put_le(&s.head, 45, 2);
	put_le(&s.head, 0, 2);
	put_le(&s.head, 0, 2);
	put_le(&s.head, 0, 8);
	put_le(&s.head, 0xFFFFFFFFu, 4);
	put_le(&s.head, 0xFFFFFFFFu, 4);
	put_le(&s.head, 11, 2);
	put_le(&s.head, 20, 2);
	put(&s.head, "huge/data/0", 11);
	put_le(&s.head, 1, 2);
	put_le(&s.head, 16, 2);
	put_le(&s.head, big, 8);
	put_le(&s.head, big, 8);
	s.tail_off = s.head.n + big; /* the data: zeros never stored */
	struct buf *t = &s.tail;
	for (int i = 0; i < 2; i++) {
		bool z64 = i == 1;
		put(t, "PK\1\2", 4);
		put_le(t, 45, 2);
		put_le(t, 45, 2);
		put_le(t, 0, 4); /* flags, method */
		put_le(t, 0, 8);
		put_le(t, z64 ? 0xFFFFFFFFu : c[i].size, 4);
		put_le(t, z64 ? 0xFFFFFFFFu : c[i].size, 4);
		put_le(t, strlen(c[i].name), 2);
		put_le(t, z64 ? 20 : 0, 2);
		put_le(t, 0, 4); /* comment, disk */
		put_le(t, 0, 6);
		put_le(t, c[i].off, 4);
		put(t, c[i].name, strlen(c[i].name));
		if (z64) {
			put_le(t, 1, 2);
			put_le(t, 16, 2);
			put_le(t, big, 8);
			put_le(t, big, 8);
		}
	}
	uint64_t cd_size = t->n, z64_end = s.tail_off + t->n;
	put(t, "PK\6\6", 4);
	put_le(t, 44, 8);
	put_le(t, 45, 2);
	put_le(t, 45, 2);
	put_le(t, 0, 8); /* disks */
	put_le(t, 2, 8);
	put_le(t, 2, 8);
	put_le(t, cd_size, 8);
	put_le(t, s.tail_off, 8);
	put(t, "PK\6\7", 4);
	put_le(t, 0, 4);
	put_le(t, z64_end, 8);
	put_le(t, 1, 4);
	put(t, "PK\5\6", 4);
	put_le(t, 0, 4);
	put_le(t, 0xFFFF, 2);
	put_le(t, 0xFFFF, 2);
	put_le(t, 0xFFFFFFFFu, 4);
	put_le(t, 0xFFFFFFFFu, 4);
	put_le(t, 0, 2);
	free(pkl.p);
	return s;
}

Test(complete, an_8_gib_zip64_archive_is_judged_reading_under_a_mib)
{
	struct sparse s = huge_archive(0);
	struct complete_result r;
	uint64_t size = s.tail_off + s.tail.n;
	cr_assert_eq(complete_check("huge.pt", size, sparse_read, &s, &r), 0);
	cr_expect(r.complete, "%s", r.reason);
	cr_expect(!s.past_end);
	cr_expect_lt(s.bytes_read, 1u << 20, "read %llu bytes", (unsigned long long)s.bytes_read);
	free(s.head.p);
	free(s.tail.p);

	s = huge_archive(8);
	size = s.tail_off + s.tail.n;
	cr_assert_eq(complete_check("huge.pt", size, sparse_read, &s, &r), 0);
	cr_expect(!r.complete);
	cr_expect_str_eq(r.reason, "record huge/data/0 is 8589934584 bytes, data.pkl says 8589934592");
	free(s.head.p);
	free(s.tail.p);
}

Test(complete, safetensors_shape_disagreeing_with_offsets_is_incomplete)
{
	struct mem m = load("model.safetensors");
	uint64_t at = find(&m, "[8,4]", 5);
	m.p[at + 1] = '7';
	struct complete_result r = judge(&m, "model.safetensors");
	cr_expect(!r.complete);
	cr_expect_str_eq(r.reason, "safetensors tensor embed.weight is 128 bytes, dtype and shape "
				   "need 112");
	free(m.p);
}
