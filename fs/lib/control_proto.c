/* control_proto — the %XX encoding of names on the control channel's lines
 * (control_proto.h), one encoder and one decoder for both ends: the tool
 * encodes the names it sends (gen PATH, list SERIES), the daemon those it
 * answers (data file … PATH, data share … LABEL). */
#include "control_proto.h"

#include <errno.h>
#include <stdio.h>

void control_proto_escape(const char *s, bool keep_spaces, char *out, size_t size)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && n + 4 < size; p++) {
		if (*p < ' ' || (*p == ' ' && !keep_spaces) || *p == '%' || *p == 0x7f)
			n += (size_t)snprintf(out + n, size - n, "%%%02X", *p);
		else
			out[n++] = (char)*p;
	}
	out[n] = '\0';
}

int control_proto_unescape(char *s)
{
	char *out = s;
	for (; *s; s++) {
		unsigned v;
		if (*s != '%') {
			*out++ = *s;
			continue;
		}
		if (!s[1] || !s[2] || sscanf(s + 1, "%2x", &v) != 1 || v == 0)
			return -EINVAL;
		*out++ = (char)v;
		s += 2;
	}
	*out = '\0';
	return 0;
}
