/* complete — completion of a checkpoint file by its content; see complete.h.
 *
 * The file is read through windows: a window holds up to its capacity of
 * consecutive file bytes and is refilled (one read of the bytes wanted or its
 * chunk, whichever is more, never past size) when asked for bytes it does not
 * hold. A stream is
 * a window walked forward over a region [pos, end) of the file: the data.pkl
 * record, a safetensors header.
 *
 * Every check returns 0 (holds), COMPLETE_NO (does not; out->reason says why)
 * or a negative errno (a read failed).
 *
 * Zip (APPNOTE 4.3), little-endian:
 *   local header  "PK\3\4" 6 flags 8 method 18 csize 22 usize 26 nlen 28 xlen 30 name
 *   central entry "PK\1\2" 8 flags 10 method 20 csize 24 usize 28 nlen 30 xlen
 *                 32 clen 42 local offset 46 name; 0xFFFFFFFF fields in the
 *                 ZIP64 extra (id 1): usize, csize, offset, in that order
 *   end record    "PK\5\6" 10 entries 12 cd size 16 cd offset 20 comment length
 *   ZIP64 end     "PK\6\6" 4 record size 32 entries 40 cd size 48 cd offset,
 *                 found by its locator "PK\6\7" (8 offset) right before "PK\5\6"
 * torch.save writes every record stored with a data descriptor (flag 3), and
 * always the ZIP64 end record and locator. */
#include "complete.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMPLETE_NO 1 /* a check failed; out->reason says which */

#define COMPLETE_WIN_CAP (256u << 10)  /* a central entry with name and extra fits */
#define COMPLETE_STREAM_CAP (64u << 10)
#define COMPLETE_LOCAL_READ 1024u       /* a local header, name and extra, usually */
#define COMPLETE_NAME_MAX 4096u        /* longest record name judged */
#define COMPLETE_MAX_RECORDS (1u << 16) /* 24 bytes each */
#define COMPLETE_MEMO_SLOTS (1u << 16)  /* 40 bytes each; filled to 3/4 */
#define COMPLETE_STACK_MAX (1u << 14)   /* 32 bytes each */
#define COMPLETE_MARK_MAX 4096u
#define COMPLETE_ST_HEADER_MAX (100ull << 20)
#define COMPLETE_NPY_HEADER_MAX (64u << 10)
#define COMPLETE_JSON_DEPTH 64

#define ZIP_LOCAL 0x04034b50u
#define ZIP_CENTRAL 0x02014b50u
#define ZIP_END 0x06054b50u
#define ZIP64_END 0x06064b50u
#define ZIP64_LOCATOR 0x07064b50u
#define ZIP_DESCRIPTOR 0x08074b50u
#define ZIP_FLAG_DESCRIPTOR 0x0008u
#define ZIP_STORED 0u

/* ---- reading ---- */

struct complete_src {
	complete_read_fn rd;
	void *arg;
	uint64_t size;
};

struct complete_win {
	uint8_t *buf;
	size_t cap, len;
	size_t chunk; /* a refill reads at least this much (if the file has it) */
	uint64_t off;
};

static uint16_t complete_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t complete_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t complete_le64(const uint8_t *p)
{
	return (uint64_t)complete_le32(p) | (uint64_t)complete_le32(p + 4) << 32;
}

/* Points *p at file bytes [off, off+len): 0, COMPLETE_NO if they are not all
 * inside the file (or more than the window holds), or a read's -errno. */
static int complete_get(const struct complete_src *s, struct complete_win *w, uint64_t off,
			size_t len, const uint8_t **p)
{
	assert(w->buf && w->chunk <= w->cap);
	if (len > w->cap || off > s->size || len > s->size - off)
		return COMPLETE_NO; /* invariant 2 */
	if (off < w->off || off + len > w->off + w->len) {
		uint64_t want = len > w->chunk ? len : w->chunk;
		if (want > s->size - off)
			want = s->size - off;
		w->len = 0;
		int rc = s->rd(s->arg, off, (size_t)want, w->buf);
		if (rc < 0)
			return rc > -4096 ? rc : -EIO;
		if (rc > 0)
			return -EIO;
		w->off = off;
		w->len = (size_t)want;
	}
	*p = w->buf + (off - w->off);
	return 0;
}

struct complete_stream {
	const struct complete_src *src;
	struct complete_win win;
	uint64_t pos, end;
};

/* Copies the next n bytes of the stream into dst (NULL: skips them): 0,
 * COMPLETE_NO if the stream ends first, or -errno. */
static int complete_sread(struct complete_stream *cs, void *dst, uint64_t n)
{
	assert(cs->pos <= cs->end && cs->end <= cs->src->size);
	if (n > cs->end - cs->pos)
		return COMPLETE_NO;
	if (!dst) {
		cs->pos += n;
		return 0;
	}
	uint8_t *to = dst;
	while (n > 0) {
		size_t piece = n < cs->win.cap ? (size_t)n : cs->win.cap;
		const uint8_t *p;
		int rc = complete_get(cs->src, &cs->win, cs->pos, piece, &p);
		if (rc != 0)
			return rc;
		memcpy(to, p, piece);
		to += piece;
		cs->pos += piece;
		n -= piece;
	}
	return 0;
}

/* The next byte without consuming it: 0, COMPLETE_NO at the end, -errno. */
static int complete_speek(struct complete_stream *cs, uint8_t *c)
{
	const uint8_t *p;
	if (cs->pos >= cs->end)
		return COMPLETE_NO;
	int rc = complete_get(cs->src, &cs->win, cs->pos, 1, &p);
	if (rc == 0)
		*c = *p;
	return rc;
}

static int complete_sbyte(struct complete_stream *cs, uint8_t *c)
{
	int rc = complete_speek(cs, c);
	if (rc == 0)
		cs->pos++;
	return rc;
}

/* Reads a line up to '\n' (consumed, not stored) into dst, NUL-terminated;
 * a longer line than cap-1 is consumed whole and *trunc set. */
static int complete_sline(struct complete_stream *cs, char *dst, size_t cap, bool *trunc)
{
	size_t n = 0;
	*trunc = false;
	for (;;) {
		uint8_t c;
		int rc = complete_sbyte(cs, &c);
		if (rc != 0)
			return rc;
		if (c == '\n')
			break;
		if (n + 1 < cap)
			dst[n++] = (char)c;
		else
			*trunc = true;
	}
	dst[n] = '\0';
	return 0;
}

static int complete_stream_open(struct complete_stream *cs, const struct complete_src *src,
				uint64_t start, uint64_t len)
{
	memset(cs, 0, sizeof(*cs));
	cs->win.buf = malloc(COMPLETE_STREAM_CAP);
	if (!cs->win.buf)
		return -ENOMEM;
	cs->win.cap = COMPLETE_STREAM_CAP;
	cs->win.chunk = COMPLETE_STREAM_CAP; /* read ahead: streams go forward */
	cs->src = src;
	cs->pos = start;
	cs->end = start + len;
	return 0;
}

static void complete_stream_close(struct complete_stream *cs) { free(cs->win.buf); }

/* ---- verdicts ---- */

__attribute__((format(printf, 2, 3))) static int complete_no(struct complete_result *out,
							     const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
	va_end(ap);
	out->complete = false;
	return COMPLETE_NO;
}

const char *complete_format_name(int format)
{
	switch (format) {
	case COMPLETE_FMT_TORCH: return "torch.save";
	case COMPLETE_FMT_ZIP: return "zip";
	case COMPLETE_FMT_NPZ: return "npz";
	case COMPLETE_FMT_SAFETENSORS: return "safetensors";
	case COMPLETE_FMT_NPY: return "npy";
	default: return "unknown";
	}
}

static bool complete_ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

/* Prints a record name for a reason: at most 64 bytes, non-printables as '?'. */
static const char *complete_printable(const char *name, size_t len, char *buf, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 1 < cap && n < 64; i++)
		buf[n++] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	buf[n] = '\0';
	return buf;
}

/* ---- npy ---- */

/* The item size of a simple numpy descr ('<f4', '|b1', '<U8', '<M8[ns]'); 0 if
 * not judged (object 'O', structured dtypes). */
static uint64_t complete_npy_itemsize(const char *descr)
{
	const char *p = descr;
	if (*p == '<' || *p == '>' || *p == '|' || *p == '=')
		p++;
	char kind = *p++;
	if (!strchr("fiucbSVMmU", kind) || kind == '\0')
		return 0;
	uint64_t n = 0;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9') {
		n = n * 10 + (uint64_t)(*p++ - '0');
		if (n > (1u << 30))
			return 0;
	}
	if (*p != '\0' && !((kind == 'M' || kind == 'm') && *p == '['))
		return 0;
	static const struct {
		char kind;
		uint8_t sizes[6]; /* the item sizes numpy has; 0: any */
	} known[] = {{'f', {2, 4, 8, 12, 16}}, {'i', {1, 2, 4, 8}}, {'u', {1, 2, 4, 8}},
		     {'c', {8, 16, 24, 32}}, {'b', {1}}, {'M', {8}}, {'m', {8}}};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (known[i].kind != kind)
			continue;
		bool ok = false;
		for (size_t j = 0; j < sizeof(known[i].sizes) && known[i].sizes[j]; j++)
			ok |= known[i].sizes[j] == n;
		return ok ? n : 0;
	}
	return kind == 'U' ? n * 4 : n; /* S, V, U: any length */
}

/* Finds 'key': in the header dict text and returns what follows it. */
static const char *complete_npy_field(const char *hdr, const char *key)
{
	char pat[32];
	snprintf(pat, sizeof(pat), "'%s':", key);
	const char *at = strstr(hdr, pat);
	if (!at)
		return NULL;
	at += strlen(pat);
	while (*at == ' ')
		at++;
	return at;
}

/* prod(shape) of "(3, 4)" / "()" / "(5,)" into *count; -1 if malformed or
 * overflowing. */
static int complete_npy_shape(const char *p, uint64_t *count)
{
	uint64_t prod = 1;
	if (*p++ != '(')
		return -1;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == ')')
			break;
		if (*p < '0' || *p > '9')
			return -1;
		uint64_t dim = 0;
		while (*p >= '0' && *p <= '9') {
			if (dim > (UINT64_MAX - 9) / 10)
				return -1;
			dim = dim * 10 + (uint64_t)(*p++ - '0');
		}
		if (dim != 0 && prod > UINT64_MAX / dim)
			return -1;
		prod *= dim;
	}
	*count = prod;
	return 0;
}

/* The npy at file bytes [start, start+len) is whole: its header parses and
 * header + prod(shape) x itemsize == len. what names it in a reason. */
static int complete_npy_region(const struct complete_src *src, struct complete_win *w,
			       uint64_t start, uint64_t len, const char *what,
			       struct complete_result *out)
{
	const uint8_t *p;
	if (len < 10)
		return complete_no(out, "%s: npy header missing (truncated?)", what);
	int rc = complete_get(src, w, start, 12 <= len ? 12 : 10, &p);
	if (rc != 0)
		return rc < 0 ? rc : complete_no(out, "%s: npy header unreadable", what);
	if (memcmp(p, "\x93NUMPY", 6) != 0)
		return complete_no(out, "%s: npy magic missing", what);
	uint8_t major = p[6];
	uint64_t hlen, hstart;
	if (major == 1) {
		hlen = complete_le16(p + 8);
		hstart = 10;
	} else if ((major == 2 || major == 3) && len >= 12) {
		hlen = complete_le32(p + 8);
		hstart = 12;
	} else {
		return complete_no(out, "%s: npy version %u not judged", what, major);
	}
	if (hlen > COMPLETE_NPY_HEADER_MAX || hlen > len - hstart)
		return complete_no(out, "%s: npy header of %llu bytes past its end (truncated?)",
				   what, (unsigned long long)hlen);
	char *hdr = malloc(hlen + 1);
	if (!hdr)
		return -ENOMEM;
	rc = complete_get(src, w, start + hstart, (size_t)hlen, &p);
	if (rc == 0) {
		memcpy(hdr, p, hlen);
		hdr[hlen] = '\0';
		const char *d = complete_npy_field(hdr, "descr");
		const char *s = complete_npy_field(hdr, "shape");
		char descr[32] = "";
		uint64_t count = 0, item = 0;
		if (d && (*d == '\'' || *d == '"')) {
			const char *q = strchr(d + 1, *d);
			if (q && (size_t)(q - d - 1) < sizeof(descr)) {
				memcpy(descr, d + 1, (size_t)(q - d - 1));
				descr[q - d - 1] = '\0';
			}
		}
		if (!d || !s || !complete_npy_field(hdr, "fortran_order"))
			rc = complete_no(out, "%s: npy header lacks descr, fortran_order or shape", what);
		else if ((item = complete_npy_itemsize(descr)) == 0)
			rc = complete_no(out, "%s: npy dtype %.32s not judged", what, descr);
		else if (complete_npy_shape(s, &count) != 0 || (count && item > UINT64_MAX / count))
			rc = complete_no(out, "%s: npy shape unparsable", what);
		else if (count * item != len - hstart - hlen)
			rc = complete_no(out, "%s: npy data is %llu bytes, header needs %llu", what,
					 (unsigned long long)(len - hstart - hlen),
					 (unsigned long long)(count * item));
	} else if (rc > 0) {
		rc = complete_no(out, "%s: npy header unreadable", what);
	}
	free(hdr);
	return rc;
}

/* ---- safetensors ---- */

static int complete_json_ws(struct complete_stream *cs)
{
	for (;;) {
		uint8_t c;
		int rc = complete_speek(cs, &c);
		if (rc != 0)
			return rc;
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			return 0;
		cs->pos++;
	}
}

static int complete_json_expect(struct complete_stream *cs, uint8_t want)
{
	uint8_t c;
	int rc = complete_json_ws(cs);
	if (rc == 0)
		rc = complete_sbyte(cs, &c);
	return rc != 0 ? rc : c == want ? 0 : COMPLETE_NO;
}

/* Reads a JSON string (opening quote next) keeping its first cap-1 raw bytes. */
static int complete_json_string(struct complete_stream *cs, char *dst, size_t cap)
{
	size_t n = 0;
	uint8_t c;
	int rc = complete_json_expect(cs, '"');
	while (rc == 0 && (rc = complete_sbyte(cs, &c)) == 0 && c != '"') {
		if (c == '\\')
			rc = complete_sbyte(cs, &c);
		if (dst && n + 1 < cap)
			dst[n++] = (char)c;
	}
	if (dst && cap)
		dst[n] = '\0';
	return rc;
}

static bool complete_json_scalar_byte(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       c == '-' || c == '+' || c == '.';
}

/* Skips one JSON value of any kind, nested at most COMPLETE_JSON_DEPTH deep. */
static int complete_json_skip(struct complete_stream *cs)
{
	int depth = 0, rc;
	uint8_t c;
	do {
		if ((rc = complete_json_ws(cs)) != 0 || (rc = complete_speek(cs, &c)) != 0)
			return rc;
		if (c == '"') {
			rc = complete_json_string(cs, NULL, 0);
		} else if (c == '{' || c == '[') {
			if (++depth > COMPLETE_JSON_DEPTH)
				return COMPLETE_NO;
			cs->pos++;
		} else if (c == '}' || c == ']') {
			if (--depth < 0)
				return COMPLETE_NO;
			cs->pos++;
		} else if (c == ',' || c == ':') {
			if (depth == 0)
				return COMPLETE_NO;
			cs->pos++;
		} else { /* number, true, false, null: at least one byte of them */
			if (!complete_json_scalar_byte(c))
				return COMPLETE_NO;
			while (rc == 0 && complete_json_scalar_byte(c)) {
				cs->pos++;
				rc = complete_speek(cs, &c);
			}
		}
	} while (rc == 0 && depth > 0);
	return rc;
}

static int complete_json_uint(struct complete_stream *cs, uint64_t *v)
{
	uint8_t c;
	int rc = complete_json_ws(cs), digits = 0;
	*v = 0;
	while (rc == 0 && (rc = complete_speek(cs, &c)) == 0 && c >= '0' && c <= '9') {
		if (*v > (UINT64_MAX - 9) / 10)
			return COMPLETE_NO;
		*v = *v * 10 + (uint64_t)(c - '0');
		cs->pos++;
		digits++;
	}
	return rc != 0 ? rc : digits ? 0 : COMPLETE_NO;
}

/* One tensor's entry {"dtype":..., "shape":[...], "data_offsets":[b,e]}. */
struct complete_st_tensor {
	uint64_t begin, end;
	bool has_offsets;
	uint64_t itemsize; /* from dtype; 0: not known (sub-byte types...) */
	uint64_t count;    /* prod(shape) */
	bool has_shape, overflow;
};

static uint64_t complete_st_itemsize(const char *dtype)
{
	static const struct {
		const char *name;
		uint8_t size;
	} types[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
		     {"I16", 2}, {"I8", 1}, {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},
		     {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"C64", 8}};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(dtype, types[i].name) == 0)
			return types[i].size;
	return 0;
}

static int complete_st_shape(struct complete_stream *cs, struct complete_st_tensor *t)
{
	uint8_t c;
	int rc = complete_json_expect(cs, '[');
	t->count = 1;
	if (rc == 0 && (rc = complete_json_ws(cs)) == 0 && (rc = complete_speek(cs, &c)) == 0 &&
	    c == ']') {
		cs->pos++;
		t->has_shape = true;
		return 0;
	}
	while (rc == 0) {
		uint64_t dim;
		if ((rc = complete_json_uint(cs, &dim)) != 0)
			break;
		if (dim != 0 && t->count > UINT64_MAX / dim)
			t->overflow = true;
		else
			t->count *= dim;
		if ((rc = complete_json_ws(cs)) != 0 || (rc = complete_sbyte(cs, &c)) != 0)
			break;
		if (c == ']') {
			t->has_shape = true;
			return 0;
		}
		if (c != ',')
			rc = COMPLETE_NO;
	}
	return rc;
}

static int complete_st_offsets(struct complete_stream *cs, struct complete_st_tensor *t)
{
	int rc = complete_json_expect(cs, '[');
	if (rc == 0) rc = complete_json_uint(cs, &t->begin);
	if (rc == 0) rc = complete_json_expect(cs, ',');
	if (rc == 0) rc = complete_json_uint(cs, &t->end);
	if (rc == 0) rc = complete_json_expect(cs, ']');
	t->has_offsets = rc == 0;
	return rc;
}

static int complete_st_tensor(struct complete_stream *cs, struct complete_st_tensor *t)
{
	uint8_t c;
	char key[16], dtype[16];
	int rc = complete_json_expect(cs, '{');
	memset(t, 0, sizeof(*t));
	while (rc == 0) {
		if ((rc = complete_json_ws(cs)) != 0 || (rc = complete_speek(cs, &c)) != 0)
			break;
		if (c == '}') {
			cs->pos++;
			break;
		}
		if ((rc = complete_json_string(cs, key, sizeof(key))) != 0 ||
		    (rc = complete_json_expect(cs, ':')) != 0)
			break;
		if (strcmp(key, "data_offsets") == 0) {
			rc = complete_st_offsets(cs, t);
		} else if (strcmp(key, "shape") == 0) {
			rc = complete_st_shape(cs, t);
		} else if (strcmp(key, "dtype") == 0) {
			rc = complete_json_string(cs, dtype, sizeof(dtype));
			t->itemsize = rc == 0 ? complete_st_itemsize(dtype) : 0;
		} else {
			rc = complete_json_skip(cs);
		}
		if (rc == 0 && (rc = complete_json_ws(cs)) == 0 && (rc = complete_speek(cs, &c)) == 0 &&
		    c == ',')
			cs->pos++;
	}
	return rc;
}

/* A parsed tensor entry agrees with the data: 0 or COMPLETE_NO. */
static int complete_st_judge(const struct complete_st_tensor *t, const char *shown,
			     uint64_t data_len, struct complete_result *out)
{
	if (!t->has_offsets)
		return complete_no(out, "safetensors tensor %s has no data_offsets", shown);
	if (t->begin > t->end || t->end > data_len)
		return complete_no(out, "safetensors tensor %s at [%llu, %llu] is outside the %llu "
				   "data bytes", shown, (unsigned long long)t->begin,
				   (unsigned long long)t->end, (unsigned long long)data_len);
	if (t->itemsize && t->has_shape &&
	    (t->overflow || (t->count && t->itemsize > UINT64_MAX / t->count) ||
	     t->count * t->itemsize != t->end - t->begin))
		return complete_no(out, "safetensors tensor %s is %llu bytes, dtype and shape need "
				   "%s%llu", shown, (unsigned long long)(t->end - t->begin),
				   t->overflow ? "over " : "",
				   (unsigned long long)(t->count * t->itemsize));
	return 0;
}

/* Walks the header object; *max_end is the largest data_offsets end. */
static int complete_st_header(struct complete_stream *cs, uint64_t data_len, uint64_t *max_end,
			      struct complete_result *out)
{
	char key[80], shown[80];
	uint8_t c;
	int rc = complete_json_expect(cs, '{');
	*max_end = 0;
	while (rc == 0) {
		if ((rc = complete_json_ws(cs)) != 0 || (rc = complete_speek(cs, &c)) != 0)
			break;
		if (c == '}') {
			cs->pos++;
			return 0;
		}
		if ((rc = complete_json_string(cs, key, sizeof(key))) != 0 ||
		    (rc = complete_json_expect(cs, ':')) != 0)
			break;
		complete_printable(key, strlen(key), shown, sizeof(shown));
		if (strcmp(key, "__metadata__") == 0) {
			rc = complete_json_skip(cs);
		} else {
			struct complete_st_tensor t;
			rc = complete_st_tensor(cs, &t);
			if (rc == 0 && complete_st_judge(&t, shown, data_len, out) != 0)
				return COMPLETE_NO;
			if (rc == 0 && t.end > *max_end)
				*max_end = t.end;
		}
		if (rc == 0 && (rc = complete_json_ws(cs)) == 0 && (rc = complete_speek(cs, &c)) == 0 &&
		    c == ',')
			cs->pos++;
	}
	return rc < 0 ? rc : complete_no(out, "safetensors header is not valid JSON");
}

static int complete_safetensors(const struct complete_src *src, struct complete_result *out)
{
	uint8_t len8[8];
	out->format = COMPLETE_FMT_SAFETENSORS;
	if (src->size < 8)
		return complete_no(out, "safetensors header length missing (truncated?)");
	int rc = src->rd(src->arg, 0, 8, len8);
	if (rc != 0)
		return rc < 0 ? rc : -EIO;
	uint64_t n = complete_le64(len8);
	if (n < 2 || n > COMPLETE_ST_HEADER_MAX)
		return complete_no(out, "safetensors header length %llu implausible",
				   (unsigned long long)n);
	if (n > src->size - 8)
		return complete_no(out, "safetensors header is %llu bytes, file has %llu after its "
				   "length (truncated?)", (unsigned long long)n,
				   (unsigned long long)(src->size - 8));
	uint64_t data_len = src->size - 8 - n, max_end = 0;
	struct complete_stream cs;
	if ((rc = complete_stream_open(&cs, src, 8, n)) != 0)
		return rc;
	rc = complete_st_header(&cs, data_len, &max_end, out);
	if (rc == 0) { /* the rest of the header: padding spaces */
		rc = complete_json_ws(&cs);
		if (rc == 0)
			rc = complete_no(out, "safetensors header has bytes after its object");
		else if (rc == COMPLETE_NO)
			rc = 0;
	}
	complete_stream_close(&cs);
	if (rc == 0 && max_end != data_len)
		rc = complete_no(out, "safetensors data is %llu bytes, header needs %llu",
				 (unsigned long long)data_len, (unsigned long long)max_end);
	return rc;
}

/* ---- zip structure ---- */

struct complete_rec { /* a record: its name by two independent hashes */
	uint64_t hash, hash2;
	uint64_t usize;
};

struct complete_zip {
	uint64_t cd_off, cd_size, cd_end, entries;
	struct complete_rec *recs;
	size_t nrec;
	bool has_pkl, all_npy;
	bool torch_records; /* <prefix>/version, data/..., as torch.save writes */
	uint16_t pkl_method;
	uint64_t pkl_data, pkl_csize;
	char prefix[COMPLETE_NAME_MAX];
	size_t prefix_len;
};

/* One central entry as parsed. */
struct complete_entry {
	uint16_t flags, method, nlen, xlen, clen;
	uint64_t csize, usize, local;
	char name[COMPLETE_NAME_MAX];
};

static uint64_t complete_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t complete_hash2(const char *s, size_t n)
{
	uint64_t h = n;
	for (size_t i = 0; i < n; i++) {
		h ^= (uint8_t)s[i];
		h = (h << 23 | h >> 41) * 0x9e3779b97f4a7c15ull;
	}
	return h ^ h >> 29;
}

/* Finds "PK\5\6" ending the file exactly, then a ZIP64 end record through its
 * locator; fills the central directory's place. */
static int complete_zip_end(const struct complete_src *src, struct complete_win *w,
			    struct complete_zip *z, struct complete_result *out)
{
	uint64_t tail = src->size < 22 + 65535 ? src->size : 22 + 65535, pos = 0;
	const uint8_t *p = NULL, *e = NULL;
	int rc = complete_get(src, w, src->size - tail, (size_t)tail, &p);
	if (rc != 0)
		return rc < 0 ? rc : complete_no(out, "zip end record missing (truncated?)");
	for (uint64_t at = tail >= 22 ? tail - 22 + 1 : 0; at-- > 0;) {
		if (complete_le32(p + at) == ZIP_END && complete_le16(p + at + 20) == tail - at - 22) {
			e = p + at;
			pos = src->size - tail + at;
			break;
		}
	}
	if (!e)
		return complete_no(out, "zip end record missing (truncated?)");
	z->entries = complete_le16(e + 10);
	z->cd_size = complete_le32(e + 12);
	z->cd_off = complete_le32(e + 16);
	z->cd_end = pos;
	if (complete_le16(e + 4) != 0 || complete_le16(e + 6) != 0 ||
	    complete_le16(e + 8) != complete_le16(e + 10))
		return complete_no(out, "zip spans several disks");
	if (e - p >= 20 && complete_le32(e - 20) == ZIP64_LOCATOR) { /* in the window */
		uint64_t z64 = complete_le64(e - 20 + 8);
		if (z64 > pos - 20 || pos - 20 - z64 < 56)
			return complete_no(out, "zip64 end record offset %llu out of bounds",
					   (unsigned long long)z64);
		if ((rc = complete_get(src, w, z64, 56, &p)) != 0)
			return rc < 0 ? rc : complete_no(out, "zip64 end record unreadable");
		if (complete_le32(p) != ZIP64_END || complete_le64(p + 4) != pos - 20 - z64 - 12)
			return complete_no(out, "zip64 end record missing where its locator points");
		if (complete_le32(p + 16) != 0 || complete_le32(p + 20) != 0 ||
		    complete_le64(p + 24) != complete_le64(p + 32))
			return complete_no(out, "zip spans several disks");
		if ((z->entries != 0xFFFFu && z->entries != complete_le64(p + 32)) ||
		    (z->cd_size != 0xFFFFFFFFu && z->cd_size != complete_le64(p + 40)) ||
		    (z->cd_off != 0xFFFFFFFFu && z->cd_off != complete_le64(p + 48)))
			return complete_no(out, "zip end record and zip64 end record disagree");
		z->entries = complete_le64(p + 32);
		z->cd_size = complete_le64(p + 40);
		z->cd_off = complete_le64(p + 48);
		z->cd_end = z64;
	}
	if (z->cd_off > z->cd_end || z->cd_size != z->cd_end - z->cd_off)
		return complete_no(out, "central directory at %llu+%llu does not end where the end "
				   "record starts (%llu)", (unsigned long long)z->cd_off,
				   (unsigned long long)z->cd_size, (unsigned long long)z->cd_end);
	if (z->entries > z->cd_size / 46)
		return complete_no(out, "zip end record claims %llu entries in a %llu-byte central "
				   "directory", (unsigned long long)z->entries,
				   (unsigned long long)z->cd_size);
	return 0;
}

/* The ZIP64 extra field's values for the 0xFFFFFFFF fields of an entry. */
static int complete_zip64_extra(const uint8_t *x, uint16_t xlen, uint64_t *usize, uint64_t *csize,
				uint64_t *local)
{
	for (uint32_t at = 0; at + 4 <= xlen;) {
		uint16_t id = complete_le16(x + at), len = complete_le16(x + at + 2);
		if (at + 4u + len > xlen)
			return -1;
		if (id == 1) {
			uint32_t off = at + 4, lim = at + 4u + len;
			uint64_t *want[3] = {usize, csize, local};
			for (int i = 0; i < 3; i++) {
				if (!want[i] || *want[i] != 0xFFFFFFFFu)
					continue;
				if (off + 8 > lim)
					return -1;
				*want[i] = complete_le64(x + off);
				off += 8;
			}
			return 0;
		}
		at += 4u + len;
	}
	return (*usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || (local && *local == 0xFFFFFFFFu))
		       ? -1 : 0;
}

/* Parses the central entry at *at (inside the central directory), moving *at
 * past it. */
static int complete_central(const struct complete_src *src, struct complete_win *w,
			    const struct complete_zip *z, uint64_t *at, struct complete_entry *ce,
			    struct complete_result *out)
{
	const uint8_t *p;
	if (z->cd_end - *at < 46)
		return complete_no(out, "central directory ends inside an entry");
	int rc = complete_get(src, w, *at, 46, &p);
	if (rc != 0)
		return rc < 0 ? rc : complete_no(out, "central directory unreadable");
	if (complete_le32(p) != ZIP_CENTRAL)
		return complete_no(out, "central directory entry at %llu has no signature",
				   (unsigned long long)*at);
	ce->flags = complete_le16(p + 8);
	ce->method = complete_le16(p + 10);
	ce->csize = complete_le32(p + 20);
	ce->usize = complete_le32(p + 24);
	ce->nlen = complete_le16(p + 28);
	ce->xlen = complete_le16(p + 30);
	ce->clen = complete_le16(p + 32);
	ce->local = complete_le32(p + 42);
	uint64_t whole = 46u + ce->nlen + ce->xlen + ce->clen;
	if (ce->nlen == 0 || ce->nlen >= COMPLETE_NAME_MAX)
		return complete_no(out, "central entry name of %u bytes not judged", ce->nlen);
	if (whole > z->cd_end - *at)
		return complete_no(out, "central entry at %llu runs past the central directory",
				   (unsigned long long)*at);
	if ((rc = complete_get(src, w, *at, (size_t)(whole - ce->clen), &p)) != 0)
		return rc < 0 ? rc : complete_no(out, "central directory unreadable");
	memcpy(ce->name, p + 46, ce->nlen);
	ce->name[ce->nlen] = '\0';
	if (complete_zip64_extra(p + 46 + ce->nlen, ce->xlen, &ce->usize, &ce->csize, &ce->local) != 0)
		return complete_no(out, "central entry %.64s: bad zip64 extra field", ce->name);
	*at += whole;
	return 0;
}

/* A data descriptor after a record's data: optional signature, crc, sizes
 * (8-byte ones in a zip64 record). */
static int complete_descriptor(const struct complete_src *src, struct complete_win *w,
			       const struct complete_zip *z, uint64_t at,
			       const struct complete_entry *ce, struct complete_result *out)
{
	uint64_t room = z->cd_off - at;
	const uint8_t *p;
	size_t n = room < 24 ? (size_t)room : 24;
	int rc = complete_get(src, w, at, n, &p);
	if (rc != 0)
		return rc < 0 ? rc : complete_no(out, "record %.64s: descriptor unreadable", ce->name);
	size_t skip = n >= 4 && complete_le32(p) == ZIP_DESCRIPTOR ? 4 : 0;
	bool ok32 = n >= skip + 12 && complete_le32(p + skip + 4) == ce->csize &&
		    complete_le32(p + skip + 8) == ce->usize;
	bool ok64 = n >= skip + 20 && complete_le64(p + skip + 4) == ce->csize &&
		    complete_le64(p + skip + 12) == ce->usize;
	if (!ok32 && !ok64)
		return complete_no(out, "record %.64s: data descriptor disagrees with the central "
				   "directory", ce->name);
	return 0;
}

/* The local header the central entry points at agrees with it, and the data
 * lies before the central directory. *data is where the data starts. */
static int complete_local(const struct complete_src *src, struct complete_win *w,
			  const struct complete_zip *z, const struct complete_entry *ce,
			  uint64_t *data, struct complete_result *out)
{
	const uint8_t *p;
	if (ce->local > z->cd_off || z->cd_off - ce->local < 30u + ce->nlen)
		return complete_no(out, "record %.64s: local header at %llu is past the central "
				   "directory", ce->name, (unsigned long long)ce->local);
	int rc = complete_get(src, w, ce->local, 30u + ce->nlen, &p);
	if (rc != 0)
		return rc < 0 ? rc : complete_no(out, "record %.64s: local header unreadable", ce->name);
	if (complete_le32(p) != ZIP_LOCAL || complete_le16(p + 26) != ce->nlen ||
	    memcmp(p + 30, ce->name, ce->nlen) != 0)
		return complete_no(out, "record %.64s: local header at %llu does not match", ce->name,
				   (unsigned long long)ce->local);
	uint16_t flags = complete_le16(p + 6), xlen = complete_le16(p + 28);
	uint64_t csize = complete_le32(p + 18), usize = complete_le32(p + 22);
	if (complete_le16(p + 8) != ce->method || (flags & ZIP_FLAG_DESCRIPTOR) !=
						   (ce->flags & ZIP_FLAG_DESCRIPTOR))
		return complete_no(out, "record %.64s: local header method or flags differ", ce->name);
	uint64_t start = ce->local + 30u + ce->nlen + xlen;
	if (start > z->cd_off || ce->csize > z->cd_off - start)
		return complete_no(out, "record %.64s: data at %llu+%llu runs past the central "
				   "directory", ce->name, (unsigned long long)start,
				   (unsigned long long)ce->csize);
	if (ce->method == ZIP_STORED && ce->csize != ce->usize)
		return complete_no(out, "record %.64s: stored but sizes differ", ce->name);
	if (flags & ZIP_FLAG_DESCRIPTOR) {
		rc = complete_descriptor(src, w, z, start + ce->csize, ce, out);
	} else {
		if ((rc = complete_get(src, w, ce->local + 30u + ce->nlen, xlen, &p)) != 0)
			return rc < 0 ? rc : complete_no(out, "record %.64s: extra unreadable", ce->name);
		if (complete_zip64_extra(p, xlen, &usize, &csize, NULL) != 0 || csize != ce->csize ||
		    usize != ce->usize)
			return complete_no(out, "record %.64s: local header sizes differ from the "
					   "central directory", ce->name);
	}
	*data = start;
	return rc;
}

/* Notes what the entry means for the format: data.pkl, .npy members. */
static int complete_note(const struct complete_src *src, struct complete_win *w,
			 struct complete_zip *z, const struct complete_entry *ce, uint64_t data,
			 struct complete_result *out)
{
	const char *slash = strchr(ce->name, '/');
	if (!z->has_pkl && slash && strcmp(slash, "/data.pkl") == 0) {
		z->has_pkl = true;
		z->pkl_method = ce->method;
		z->pkl_data = data;
		z->pkl_csize = ce->csize;
		z->prefix_len = (size_t)(slash - ce->name);
		memcpy(z->prefix, ce->name, z->prefix_len);
	}
	if (slash && (strcmp(slash, "/version") == 0 || strcmp(slash, "/byteorder") == 0 ||
		      strncmp(slash, "/data/", 6) == 0 || strncmp(slash, "/.data/", 7) == 0))
		z->torch_records = true;
	if (z->nrec >= COMPLETE_MAX_RECORDS)
		return complete_no(out, "zip has over %u records; not judged", COMPLETE_MAX_RECORDS);
	z->recs[z->nrec++] = (struct complete_rec){complete_hash(ce->name, ce->nlen),
						  complete_hash2(ce->name, ce->nlen), ce->usize};
	if (!complete_ends_with(ce->name, ce->nlen, ".npy")) {
		z->all_npy = false;
	} else if (ce->method == ZIP_STORED) {
		char what[80];
		complete_printable(ce->name, ce->nlen, what, sizeof(what));
		return complete_npy_region(src, w, data, ce->csize, what, out);
	}
	return 0;
}

static int complete_rec_cmp(const void *a, const void *b)
{
	const struct complete_rec *x = a, *y = b;
	return x->hash < y->hash ? -1 : x->hash > y->hash;
}

/* Walks the central directory: each entry and its local header. */
static int complete_zip_walk(const struct complete_src *src, struct complete_win *cw,
			     struct complete_win *lw, struct complete_zip *z,
			     struct complete_result *out)
{
	struct complete_entry *ce = malloc(sizeof(*ce));
	if (!ce)
		return -ENOMEM;
	uint64_t at = z->cd_off;
	int rc = 0;
	z->all_npy = true;
	for (uint64_t i = 0; rc == 0 && i < z->entries; i++) {
		uint64_t data = 0;
		rc = complete_central(src, cw, z, &at, ce, out);
		if (rc == 0)
			rc = complete_local(src, lw, z, ce, &data, out);
		if (rc == 0)
			rc = complete_note(src, lw, z, ce, data, out);
	}
	if (rc == 0 && at != z->cd_end)
		rc = complete_no(out, "central directory is %llu bytes, its %llu entries fill %llu",
				 (unsigned long long)z->cd_size, (unsigned long long)z->entries,
				 (unsigned long long)(at - z->cd_off));
	free(ce);
	if (rc == 0)
		qsort(z->recs, z->nrec, sizeof(*z->recs), complete_rec_cmp);
	return rc;
}

/* The uncompressed size of the record named name; 0 found, 1 absent. Found
 * by its two hashes, without reading the central directory again. */
static int complete_zip_find(const struct complete_zip *z, const char *name, size_t nlen,
			     uint64_t *usize)
{
	uint64_t h = complete_hash(name, nlen), h2 = complete_hash2(name, nlen);
	size_t lo = 0, hi = z->nrec;
	while (lo < hi) { /* the first record with this hash */
		size_t mid = lo + (hi - lo) / 2;
		if (z->recs[mid].hash < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < z->nrec && z->recs[lo].hash == h; lo++) {
		if (z->recs[lo].hash2 == h2) {
			*usize = z->recs[lo].usize;
			return 0;
		}
	}
	return 1;
}

/* ---- data.pkl: the pickle's persistent ids ----
 *
 * A small pickle machine whose values are only what a storage persistent id
 * is made of: short strings, ints, torch storage classes, and the id tuple
 * ('storage', class, key, location, numel) itself; anything else is OTHER.
 * The memo keeps only those kinds (torch refers back to 'storage', 'cpu',
 * the storage class and a shared storage's key by BINGET). */

enum complete_kind {
	PKL_OTHER = 0,
	PKL_INT,     /* i */
	PKL_STR,     /* s[slen]; a longer string is OTHER */
	PKL_STYPE,   /* a torch storage class: i its element size, 0 unknown; s its name */
	PKL_STORAGE, /* an id tuple: s its key, i the bytes it needs; err if not judged */
};

enum complete_pid_err { PID_OK = 0, PID_TYPE, PID_NUMEL, PID_KEY };

#define PKL_SHORT 21

struct complete_val {
	int64_t i;
	uint8_t kind, slen, err;
	char s[PKL_SHORT];
};

struct complete_memo_slot {
	uint32_t key; /* memo index + 1; 0: empty */
	struct complete_val v;
};

struct complete_pkl {
	struct complete_stream cs;
	const struct complete_zip *z;
	struct complete_result *out;
	struct complete_val *stack;
	size_t depth;
	size_t marks[COMPLETE_MARK_MAX];
	size_t nmark;
	struct complete_memo_slot *memo;
	size_t memo_used;
	uint32_t memo_next; /* MEMOIZE's index */
	bool memo_full;
	uint64_t storages;  /* persistent ids checked */
	uint64_t op_at;     /* the current opcode's offset */
};

static const struct {
	const char *name;
	uint8_t size;
} complete_storage_types[] = {
	{"FloatStorage", 4}, {"DoubleStorage", 8}, {"HalfStorage", 2}, {"BFloat16Storage", 2},
	{"LongStorage", 8}, {"IntStorage", 4}, {"ShortStorage", 2}, {"CharStorage", 1},
	{"ByteStorage", 1}, {"BoolStorage", 1}, {"ComplexFloatStorage", 8},
	{"ComplexDoubleStorage", 16}, {"ComplexHalfStorage", 4}, {"QInt8Storage", 1},
	{"QUInt8Storage", 1}, {"QInt32Storage", 4}, {"QUInt4x2Storage", 1}, {"QUInt2x4Storage", 1},
	{"UntypedStorage", 1}, {"UInt16Storage", 2}, {"UInt32Storage", 4}, {"UInt64Storage", 8},
	{"Float8_e4m3fnStorage", 1}, {"Float8_e5m2Storage", 1},
};

static int complete_pkl_bad(struct complete_pkl *k, const char *why)
{
	return complete_no(k->out, "unparsable data.pkl: %s at byte %llu", why,
			   (unsigned long long)(k->op_at - k->z->pkl_data));
}

static int complete_push(struct complete_pkl *k, const struct complete_val *v)
{
	if (k->depth >= COMPLETE_STACK_MAX)
		return complete_no(k->out, "data.pkl nests deeper than %u values; not judged",
				   COMPLETE_STACK_MAX);
	k->stack[k->depth++] = *v;
	return 0;
}

static int complete_push_other(struct complete_pkl *k)
{
	static const struct complete_val other = {0};
	return complete_push(k, &other);
}

/* Pops n values (into v[0..n) in stack order if v). */
static int complete_pop(struct complete_pkl *k, size_t n, struct complete_val *v)
{
	size_t floor = k->nmark ? k->marks[k->nmark - 1] : 0;
	assert(floor <= k->depth && k->depth <= COMPLETE_STACK_MAX);
	if (k->depth < floor + n)
		return complete_pkl_bad(k, "stack underflow");
	k->depth -= n;
	if (v)
		memcpy(v, k->stack + k->depth, n * sizeof(*v));
	return 0;
}

/* Pops to the last mark; *n values were above it, left at stack[depth..]. */
static int complete_pop_mark(struct complete_pkl *k, size_t *n)
{
	if (k->nmark == 0)
		return complete_pkl_bad(k, "no mark");
	size_t m = k->marks[--k->nmark];
	if (m > k->depth)
		return complete_pkl_bad(k, "mark above the stack");
	if (n)
		*n = k->depth - m;
	k->depth = m;
	return 0;
}

static struct complete_memo_slot *complete_memo_slot(struct complete_pkl *k, uint32_t idx)
{
	uint32_t key = idx + 1, mask = COMPLETE_MEMO_SLOTS - 1;
	for (uint32_t h = (key * 2654435761u) & mask;; h = (h + 1) & mask)
		if (k->memo[h].key == key || k->memo[h].key == 0)
			return &k->memo[h];
}

static int complete_memo_put(struct complete_pkl *k, uint64_t idx)
{
	if (k->depth == 0 || (k->nmark && k->depth <= k->marks[k->nmark - 1]))
		return complete_pkl_bad(k, "memo put of nothing");
	if (idx >= UINT32_MAX)
		return complete_pkl_bad(k, "memo index out of range");
	const struct complete_val *v = &k->stack[k->depth - 1];
	struct complete_memo_slot *s = complete_memo_slot(k, (uint32_t)idx);
	if (s->key) {
		s->v = *v;
	} else if (v->kind != PKL_OTHER) {
		if (k->memo_used >= COMPLETE_MEMO_SLOTS / 4 * 3) {
			k->memo_full = true;
			return 0;
		}
		s->key = (uint32_t)idx + 1;
		s->v = *v;
		k->memo_used++;
	}
	return 0;
}

static int complete_memo_get(struct complete_pkl *k, uint64_t idx)
{
	if (idx >= UINT32_MAX)
		return complete_pkl_bad(k, "memo index out of range");
	struct complete_memo_slot *s = complete_memo_slot(k, (uint32_t)idx);
	return s->key ? complete_push(k, &s->v) : complete_push_other(k);
}

/* A GLOBAL: a torch storage class, or OTHER. */
static int complete_global(struct complete_pkl *k, const char *module, const char *name)
{
	struct complete_val v = {0};
	if (strcmp(module, "torch") == 0 || strcmp(module, "torch.storage") == 0 ||
	    strcmp(module, "torch.cuda") == 0) {
		size_t n = strlen(name);
		if (complete_ends_with(name, n, "Storage")) {
			v.kind = PKL_STYPE;
			v.slen = (uint8_t)(n < PKL_SHORT ? n : PKL_SHORT - 1);
			memcpy(v.s, name, v.slen);
			for (size_t i = 0; i < sizeof(complete_storage_types) /
						   sizeof(complete_storage_types[0]); i++)
				if (strcmp(name, complete_storage_types[i].name) == 0)
					v.i = complete_storage_types[i].size;
		}
	}
	return complete_push(k, &v);
}

static bool complete_is_str(const struct complete_val *v, const char *s)
{
	return v->kind == PKL_STR && v->slen == strlen(s) && memcmp(v->s, s, v->slen) == 0;
}

/* TUPLE of n values left at stack[depth..]: an id tuple, or OTHER. */
static int complete_tuple(struct complete_pkl *k, size_t n)
{
	const struct complete_val *t = k->stack + k->depth;
	struct complete_val v = {0};
	if (n == 5 && complete_is_str(&t[0], "storage")) {
		v.kind = PKL_STORAGE;
		if (t[1].kind != PKL_STYPE || t[1].i == 0)
			v.err = PID_TYPE;
		else if (t[4].kind != PKL_INT || t[4].i < 0 || t[4].i > INT64_MAX / t[1].i)
			v.err = PID_NUMEL;
		else if (t[2].kind != PKL_STR)
			v.err = PID_KEY;
		else
			v.i = t[4].i * t[1].i;
		memcpy(v.s, t[v.err == PID_TYPE ? 1 : 2].s, PKL_SHORT);
		v.slen = t[v.err == PID_TYPE ? 1 : 2].slen;
	}
	return complete_push(k, &v);
}

/* BINPERSID: the popped id names a record of at least the bytes it needs. */
static int complete_persid(struct complete_pkl *k)
{
	struct complete_val v;
	int rc = complete_pop(k, 1, &v);
	if (rc != 0)
		return rc;
	if (v.kind != PKL_STORAGE)
		return complete_no(k->out, "data.pkl persistent id is not a storage%s",
				   k->memo_full ? " (memo too large to follow)" : "");
	if (v.err == PID_TYPE)
		return complete_no(k->out, "data.pkl storage type %.*s unknown", v.slen, v.s);
	if (v.err != PID_OK)
		return complete_no(k->out, "data.pkl storage %.*s: %s not judged%s", v.slen, v.s,
				   v.err == PID_NUMEL ? "numel" : "key",
				   k->memo_full ? " (memo too large to follow)" : "");
	char name[COMPLETE_NAME_MAX + 64];
	int len = snprintf(name, sizeof(name), "%.*s/data/%.*s", (int)k->z->prefix_len,
			   k->z->prefix, v.slen, v.s);
	uint64_t usize = 0;
	rc = complete_zip_find(k->z, name, (size_t)len, &usize);
	char shown[80];
	complete_printable(name, (size_t)len, shown, sizeof(shown));
	if (rc > 0)
		return complete_no(k->out, "record %s missing, data.pkl references it", shown);
	if (usize < (uint64_t)v.i)
		return complete_no(k->out, "record %s is %llu bytes, data.pkl says %llu", shown,
				   (unsigned long long)usize, (unsigned long long)v.i);
	k->storages++;
	return complete_push_other(k);
}

/* Reads an n-byte little-endian unsigned argument. */
static int complete_arg(struct complete_pkl *k, int n, uint64_t *v)
{
	uint8_t b[8];
	int rc = complete_sread(&k->cs, b, (uint64_t)n);
	*v = 0;
	for (int i = n - 1; rc == 0 && i >= 0; i--)
		*v = *v << 8 | b[i];
	return rc;
}

/* A string of n bytes from the stream: short ones are kept (as str if
 * is_str), the rest skipped. */
static int complete_string(struct complete_pkl *k, uint64_t n, bool is_str)
{
	struct complete_val v = {0};
	if (is_str && n < PKL_SHORT) {
		v.kind = PKL_STR;
		v.slen = (uint8_t)n;
		int rc = complete_sread(&k->cs, v.s, n);
		return rc != 0 ? rc : complete_push(k, &v);
	}
	int rc = complete_sread(&k->cs, NULL, n);
	return rc != 0 ? rc : complete_push(k, &v);
}

/* LONG1/LONG4: n little-endian two's complement bytes. */
static int complete_long(struct complete_pkl *k, uint64_t n)
{
	struct complete_val v = {0};
	if (n > 8)
		return complete_string(k, n, false);
	uint64_t u;
	int rc = complete_arg(k, (int)n, &u);
	if (rc != 0)
		return rc;
	if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1)
		u |= ~0ull << (8 * n); /* negative */
	v.kind = PKL_INT;
	v.i = (int64_t)u;
	return complete_push(k, &v);
}

/* Text-argument opcodes (protocol 0): INT, LONG, FLOAT, STRING, UNICODE,
 * GLOBAL, INST, PUT, GET, PERSID. */
static int complete_text_op(struct complete_pkl *k, uint8_t op)
{
	char line[256], line2[256];
	bool trunc, trunc2;
	int rc = complete_sline(&k->cs, line, sizeof(line), &trunc);
	if (rc != 0)
		return rc;
	struct complete_val v = {0};
	char *end;
	switch (op) {
	case 'I': case 'L':
		errno = 0;
		v.i = strtoll(line, &end, 10);
		if (!trunc && errno == 0 && end != line && (*end == '\0' || *end == 'L'))
			v.kind = PKL_INT;
		return complete_push(k, &v);
	case 'F':
		return complete_push(k, &v);
	case 'S': case 'V': {
		size_t n = strlen(line);
		char *s = line;
		if (op == 'S' && n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0]) {
			s++;
			n -= 2;
		}
		if (!trunc && n < PKL_SHORT && !memchr(s, '\\', n)) {
			v.kind = PKL_STR;
			v.slen = (uint8_t)n;
			memcpy(v.s, s, n);
		}
		return complete_push(k, &v);
	}
	case 'c': case 'i':
		if ((rc = complete_sline(&k->cs, line2, sizeof(line2), &trunc2)) != 0)
			return rc;
		if (op == 'i') {
			size_t n;
			return (rc = complete_pop_mark(k, &n)) != 0 ? rc : complete_push_other(k);
		}
		return trunc || trunc2 ? complete_push_other(k) : complete_global(k, line, line2);
	case 'p': case 'g':
		errno = 0;
		unsigned long long idx = strtoull(line, &end, 10);
		if (trunc || errno || end == line || *end)
			return complete_pkl_bad(k, "bad memo index");
		return op == 'p' ? complete_memo_put(k, idx) : complete_memo_get(k, idx);
	default: /* 'P' */
		return complete_no(k->out, "data.pkl persistent id is not a storage");
	}
}

/* Opcodes with a binary argument. */
static int complete_arg_op(struct complete_pkl *k, uint8_t op)
{
	static const struct { uint8_t op, len; } lens[] = {
		{0x80, 1}, {0x95, 8}, {'K', 1}, {'M', 2}, {'J', 4}, {'G', 8}, {0x8a, 1}, {0x8b, 4},
		{'T', 4}, {'U', 1}, {'X', 4}, {0x8c, 1}, {0x8d, 8}, {'B', 4}, {'C', 1}, {0x8e, 8},
		{0x96, 8}, {'q', 1}, {'r', 4}, {'h', 1}, {'j', 4}, {0x82, 1}, {0x83, 2}, {0x84, 4},
	};
	int len = 0;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		if (lens[i].op == op)
			len = lens[i].len;
	uint64_t a;
	int rc = complete_arg(k, len, &a);
	if (rc != 0)
		return rc;
	struct complete_val v = {.kind = PKL_INT, .i = (int64_t)a};
	switch (op) {
	case 0x80: case 0x95: return 0; /* PROTO, FRAME */
	case 'K': case 'M': return complete_push(k, &v);
	case 'J': v.i = (int32_t)(uint32_t)a; return complete_push(k, &v);
	case 0x8a: case 0x8b: return complete_long(k, a);
	case 'T': case 'U': case 'X': case 0x8c: case 0x8d: return complete_string(k, a, true);
	case 'B': case 'C': case 0x8e: case 0x96: return complete_string(k, a, false);
	case 'q': case 'r': return complete_memo_put(k, a);
	case 'h': case 'j': return complete_memo_get(k, a);
	default: return complete_push_other(k); /* BINFLOAT, EXT1/2/4 */
	}
}

/* Opcodes without argument that pop n values and push one OTHER (or none). */
static int complete_popn(struct complete_pkl *k, size_t n, bool push)
{
	int rc = complete_pop(k, n, NULL);
	return rc != 0 || !push ? rc : complete_push_other(k);
}

static int complete_stack_op(struct complete_pkl *k, uint8_t op)
{
	size_t n;
	int rc;
	struct complete_val v[2];
	switch (op) {
	case '(':
		if (k->nmark >= COMPLETE_MARK_MAX)
			return complete_no(k->out, "data.pkl has over %u marks; not judged",
					   COMPLETE_MARK_MAX);
		k->marks[k->nmark++] = k->depth;
		return 0;
	case ')': case ']': case '}': case 0x8f: case 'N': case 0x88: case 0x89: case 0x97:
		return complete_push_other(k);
	case '0': case 'a': case 'b': return complete_popn(k, 1, false);
	case 's': return complete_popn(k, 2, false);
	case 'R': case 0x81: return complete_popn(k, 2, true);
	case 0x92: return complete_popn(k, 3, true);
	case 0x85: return complete_popn(k, 1, true);
	case 0x86: return complete_popn(k, 2, true);
	case 0x87: return complete_popn(k, 3, true);
	case 0x98: return complete_popn(k, 1, true);
	case '1': case 'e': case 'u': case 0x90: return complete_pop_mark(k, NULL);
	case 'l': case 'd': case 0x91: case 'o':
		return (rc = complete_pop_mark(k, NULL)) != 0 ? rc : complete_push_other(k);
	case 't': return (rc = complete_pop_mark(k, &n)) != 0 ? rc : complete_tuple(k, n);
	case '2':
		if ((rc = complete_pop(k, 1, v)) == 0 && (rc = complete_push(k, v)) == 0)
			rc = complete_push(k, v);
		return rc;
	case 'Q': return complete_persid(k);
	case 0x94: return complete_memo_put(k, k->memo_next);
	case 0x93: /* STACK_GLOBAL */
		if ((rc = complete_pop(k, 2, v)) != 0)
			return rc;
		if (v[0].kind != PKL_STR || v[1].kind != PKL_STR)
			return complete_push_other(k);
		char mod[PKL_SHORT + 1], name[PKL_SHORT + 1];
		snprintf(mod, sizeof(mod), "%.*s", v[0].slen, v[0].s);
		snprintf(name, sizeof(name), "%.*s", v[1].slen, v[1].s);
		return complete_global(k, mod, name);
	default:
		return complete_pkl_bad(k, "unknown opcode");
	}
}

/* Runs the pickle to STOP. */
static int complete_pkl_run(struct complete_pkl *k)
{
	for (;;) {
		uint8_t op;
		k->op_at = k->cs.pos;
		int rc = complete_sbyte(&k->cs, &op);
		if (rc != 0)
			return rc < 0 ? rc : complete_no(k->out, "data.pkl ends before STOP");
		if (op == '.')
			return 0;
		if (strchr("ILFSVcipgP", op) && op)
			rc = complete_text_op(k, op);
		else if (strchr("\x80\x95KMJG\x8a\x8bTUX\x8c\x8d" "BC\x8e\x96qrhj\x82\x83\x84", op) && op)
			rc = complete_arg_op(k, op);
		else
			rc = complete_stack_op(k, op);
		if (op == 0x94)
			k->memo_next++;
		if (rc == COMPLETE_NO && k->out->reason[0] == '\0')
			rc = complete_pkl_bad(k, "ends inside an opcode");
		if (rc != 0)
			return rc;
	}
}

/* data.pkl is whole and every storage it names is in the archive. */
static int complete_torch(const struct complete_src *src, const struct complete_zip *z,
			  struct complete_result *out)
{
	if (z->pkl_method != ZIP_STORED)
		return complete_no(out, "data.pkl is compressed (method %u); storages not judged",
				   z->pkl_method);
	struct complete_pkl *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	int rc = complete_stream_open(&k->cs, src, z->pkl_data, z->pkl_csize);
	k->stack = malloc(COMPLETE_STACK_MAX * sizeof(*k->stack));
	k->memo = calloc(COMPLETE_MEMO_SLOTS, sizeof(*k->memo));
	if (rc == 0 && (!k->stack || !k->memo))
		rc = -ENOMEM;
	k->z = z;
	k->out = out;
	out->reason[0] = '\0';
	if (rc == 0)
		rc = complete_pkl_run(k);
	free(k->memo);
	free(k->stack);
	complete_stream_close(&k->cs);
	free(k);
	return rc;
}

/* ---- zip, whole ---- */

static bool complete_by_name_is_torch(const char *name)
{
	static const char *const torch[] = {".pt", ".pth", ".ckpt", ".bin"};
	size_t len = name ? strlen(name) : 0;
	for (size_t i = 0; i < sizeof(torch) / sizeof(torch[0]); i++)
		if (complete_ends_with(name ? name : "", len, torch[i]))
			return true;
	return false;
}

/* The format of a zip whose records could not all be read: from its first
 * record's name (torch writes data.pkl first), else from the file's name.
 * A format, or a read's -errno. */
static int complete_zip_guess(const struct complete_src *src, struct complete_win *w,
			      const char *name)
{
	const uint8_t *p;
	int rc = complete_get(src, w, 0, 30, &p);
	if (rc == 0 && complete_le32(p) == ZIP_LOCAL) {
		uint16_t nlen = complete_le16(p + 26);
		rc = complete_get(src, w, 0, 30u + nlen, &p);
		if (rc == 0 && complete_ends_with((const char *)p + 30, nlen, "/data.pkl"))
			return COMPLETE_FMT_TORCH;
		if (rc == 0 && complete_ends_with((const char *)p + 30, nlen, ".npy"))
			return COMPLETE_FMT_NPZ;
	}
	if (rc < 0)
		return rc;
	if (complete_by_name_is_torch(name))
		return COMPLETE_FMT_TORCH;
	if (name && complete_ends_with(name, strlen(name), ".npz"))
		return COMPLETE_FMT_NPZ;
	return COMPLETE_FMT_ZIP;
}

/* The format from what the walk of the central directory saw. */
static int complete_zip_format(const struct complete_src *src, struct complete_win *w,
			       const struct complete_zip *z, const char *name)
{
	if (z->has_pkl || z->torch_records)
		return COMPLETE_FMT_TORCH;
	if (z->nrec > 0)
		return z->all_npy ? COMPLETE_FMT_NPZ : COMPLETE_FMT_ZIP;
	return complete_zip_guess(src, w, name);
}

static int complete_zip(const struct complete_src *src, const char *name,
			struct complete_result *out)
{
	/* the central directory is read forward; local headers one by one */
	struct complete_win cw = {.buf = malloc(COMPLETE_WIN_CAP), .cap = COMPLETE_WIN_CAP,
				  .chunk = COMPLETE_WIN_CAP};
	struct complete_win lw = {.buf = malloc(COMPLETE_STREAM_CAP), .cap = COMPLETE_STREAM_CAP,
				  .chunk = COMPLETE_LOCAL_READ};
	struct complete_zip *z = calloc(1, sizeof(*z));
	int rc = cw.buf && lw.buf && z ? 0 : -ENOMEM;
	if (rc == 0)
		rc = complete_zip_end(src, &cw, z, out);
	if (rc == 0) {
		size_t cap = z->entries < COMPLETE_MAX_RECORDS ? (size_t)z->entries : COMPLETE_MAX_RECORDS;
		z->recs = malloc((cap ? cap : 1) * sizeof(*z->recs));
		rc = z->recs ? complete_zip_walk(src, &cw, &lw, z, out) : -ENOMEM;
	}
	if (rc >= 0) { /* the format, even of an inconsistent zip */
		int format = complete_zip_format(src, &lw, z, name);
		if (format < 0)
			rc = format;
		out->format = format;
	}
	if (rc == 0 && z->has_pkl)
		rc = complete_torch(src, z, out);
	else if (rc == 0 && out->format == COMPLETE_FMT_TORCH)
		rc = complete_no(out, "torch archive without data.pkl (save interrupted?)");
	if (z)
		free(z->recs);
	free(z);
	free(lw.buf);
	free(cw.buf);
	return rc;
}

/* ---- entry ---- */

static int complete_by_name(const char *name, struct complete_result *out)
{
	static const struct {
		const char *suffix;
		int format;
	} hints[] = {
		{".pt", COMPLETE_FMT_TORCH}, {".pth", COMPLETE_FMT_TORCH}, {".ckpt", COMPLETE_FMT_TORCH},
		{".bin", COMPLETE_FMT_TORCH}, {".npz", COMPLETE_FMT_NPZ}, {".zip", COMPLETE_FMT_ZIP},
		{".npy", COMPLETE_FMT_NPY}, {".safetensors", COMPLETE_FMT_SAFETENSORS},
	};
	size_t len = name ? strlen(name) : 0;
	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		if (complete_ends_with(name ? name : "", len, hints[i].suffix)) {
			out->format = hints[i].format;
			return complete_no(out, "%s magic missing (truncated or another format?)",
					   complete_format_name(out->format));
		}
	}
	out->format = COMPLETE_FMT_NONE;
	return complete_no(out, "not a recognised checkpoint format");
}

int complete_check(const char *name, uint64_t size, complete_read_fn rd, void *arg,
		   struct complete_result *out)
{
	struct complete_src src = {rd, arg, size};
	uint8_t head[12] = {0};
	size_t n = size < sizeof(head) ? (size_t)size : sizeof(head);
	int rc = n ? rd(arg, 0, n, head) : 0;
	memset(out, 0, sizeof(*out));
	if (rc != 0)
		return rc < 0 ? rc : -EIO;
	uint64_t st_len = complete_le64(head);
	if (n >= 4 && (complete_le32(head) == ZIP_LOCAL || complete_le32(head) == ZIP_END)) {
		rc = complete_zip(&src, name, out);
	} else if (n >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) {
		struct complete_win w = {.buf = malloc(COMPLETE_STREAM_CAP), .cap = COMPLETE_STREAM_CAP,
					 .chunk = COMPLETE_LOCAL_READ};
		out->format = COMPLETE_FMT_NPY;
		rc = w.buf ? complete_npy_region(&src, &w, 0, size, "npy", out) : -ENOMEM;
		free(w.buf);
	} else if (n >= 9 && head[8] == '{' && st_len >= 2 && st_len <= COMPLETE_ST_HEADER_MAX) {
		rc = complete_safetensors(&src, out);
	} else if (name && complete_ends_with(name, strlen(name), ".safetensors") && n >= 8) {
		rc = complete_safetensors(&src, out);
	} else if (n < 8) { /* too short for any magic: the name says what it was to be */
		rc = complete_by_name(name, out);
	} else { /* e.g. a legacy (pickle) torch.save file: not self-delimiting */
		out->format = COMPLETE_FMT_NONE;
		rc = complete_no(out, "not a recognised checkpoint format");
	}
	if (rc < 0)
		return rc;
	assert(rc == 0 || rc == COMPLETE_NO);
	out->complete = rc == 0;
	if (out->complete)
		out->reason[0] = '\0';
	assert(!out->complete || out->format != COMPLETE_FMT_NONE); /* invariant 1 */
	assert(out->complete || out->reason[0] != '\0');
	return 0;
}
