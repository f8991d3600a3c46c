/* SPDX-License-Identifier: MIT */
/*
 * jbuf.c - a growing JSON text in memory (see jbuf.h).
 */
#include "sim/scn/jbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL; false (and the buffer marked) if there is none to be had. */
static bool grow(struct jbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (n >= SIZE_MAX - b->len) {
		b->oom = true;
		return false;
	}
	if (b->len + n + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1) {
		if (cap > SIZE_MAX / 2) {
			b->oom = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void jbuf_raw(struct jbuf *b, const char *s, size_t n)
{
	if (!grow(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void jbuf_puts(struct jbuf *b, const char *s)
{
	jbuf_raw(b, s, strlen(s));
}

void jbuf_vprintf(struct jbuf *b, const char *fmt, va_list ap)
{
	if (b->oom)
		return;
	va_list again;
	va_copy(again, ap);
	/* Straight into the free space; if it does not fit, grow and format again. */
	size_t room = b->p ? b->cap - b->len : 0;
	int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
	if (n < 0)
		b->oom = true;
	else if ((size_t)n < room)
		b->len += (size_t)n;
	else if (grow(b, (size_t)n))
		b->len += (size_t)vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
	va_end(again);
}

void jbuf_printf(struct jbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	jbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

/* The code point of the UTF-8 sequence at s and its length, or -1 if it is not one. */
static long utf8_next(const unsigned char *s, int *len)
{
	static const unsigned char lead_mask[] = {0, 0, 0x1f, 0x0f, 0x07};
	static const long least[] = {0, 0, 0x80, 0x800, 0x10000};
	int n = s[0] >= 0xf0 && s[0] < 0xf5   ? 4
		: s[0] >= 0xe0 && s[0] < 0xf0 ? 3
		: s[0] >= 0xc2 && s[0] < 0xe0 ? 2
					      : 0;
	if (!n)
		return -1;
	long cp = s[0] & lead_mask[n];
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
		return -1;
	*len = n;
	return cp;
}

void jbuf_str(struct jbuf *b, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	char e[16];
	if (!s) {
		jbuf_puts(b, "null");
		return;
	}
	jbuf_puts(b, "\"");
	while (*s) {
		int n = 1;
		if (*s == '"' || *s == '\\') {
			e[0] = '\\';
			e[1] = (char)*s;
			jbuf_raw(b, e, 2);
		} else if (*s >= 0x20 && *s < 0x7f) {
			jbuf_raw(b, (const char *)s, 1);
		} else {
			long cp = *s >= 0x80 ? utf8_next(s, &n) : -1;
			if (cp < 0)
				cp = *s, n = 1;
			if (cp >= 0x10000)
				snprintf(e, sizeof(e), "\\u%04lx\\u%04lx", 0xd800 + ((cp - 0x10000) >> 10),
					 0xdc00 + ((cp - 0x10000) & 0x3ff));
			else
				snprintf(e, sizeof(e), "\\u%04lx", cp);
			jbuf_puts(b, e);
		}
		s += n;
	}
	jbuf_puts(b, "\"");
}

int jbuf_take(struct jbuf *b, char **text, size_t *len)
{
	if (!b->p)
		jbuf_raw(b, "", 0);
	if (b->oom) {
		jbuf_free(b);
		*text = NULL;
		if (len)
			*len = 0;
		return -ENOMEM;
	}
	*text = b->p;
	if (len)
		*len = b->len;
	*b = (struct jbuf)JBUF_INIT;
	return 0;
}

void jbuf_free(struct jbuf *b)
{
	if (!b)
		return;
	free(b->p);
	*b = (struct jbuf)JBUF_INIT;
}
