/* SPDX-License-Identifier: MIT */
/*
 * json.c - a small append-only JSON writer for the metrics and the
 * --json report. Out of memory exits the process: a report half written is
 * worse than none.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/harness/harness.h"

static void js_put(struct js *j, const char *s, size_t n)
{
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 256;
		char *nb;

		while (cap < j->len + n + 1)
			cap *= 2;
		nb = realloc(j->buf, cap);
		if (!nb) {
			fprintf(stderr, "harness: out of memory in the JSON writer\n");
			exit(1);
		}
		j->buf = nb;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

static void js_puts(struct js *j, const char *s)
{
	js_put(j, s, strlen(s));
}

void js_init(struct js *j)
{
	memset(j, 0, sizeof(*j));
	j->first[0] = 1;
}

void js_free(struct js *j)
{
	if (!j)
		return;
	free(j->buf);
	j->buf = NULL;
	j->len = j->cap = 0;
}

void js_escape(struct js *j, const char *s, size_t n)
{
	size_t i;

	js_put(j, "\"", 1);
	for (i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[8];

		if (c == '"' || c == '\\') {
			e[0] = '\\';
			e[1] = (char)c;
			js_put(j, e, 2);
		} else if (c == '\n') {
			js_put(j, "\\n", 2);
		} else if (c == '\t') {
			js_put(j, "\\t", 2);
		} else if (c < 0x20 || c >= 0x7f) {
			/* Plugin strings are not promised to be UTF-8: escape bytes, stay valid. */
			snprintf(e, sizeof(e), "\\u%04x", c);
			js_put(j, e, 6);
		} else {
			js_put(j, (const char *)&s[i], 1);
		}
	}
	js_put(j, "\"", 1);
}

static void js_key(struct js *j, const char *key)
{
	if (!j->first[j->depth])
		js_put(j, ",", 1);
	j->first[j->depth] = 0;
	if (key) {
		js_escape(j, key, strlen(key));
		js_put(j, ":", 1);
	}
}

static void js_open(struct js *j, const char *key, char br)
{
	js_key(j, key);
	js_put(j, &br, 1);
	if (j->depth + 1 < (int)sizeof(j->first))
		j->depth++;
	j->first[j->depth] = 1;
	j->close[j->depth] = br == '{' ? '}' : ']';
}

/* Closes the innermost level with its own bracket, whatever the caller asked:
 * a mismatch in a test must not make the report unreadable. */
static void js_close(struct js *j)
{
	if (j->depth <= 0)
		return;
	js_put(j, &j->close[j->depth], 1);
	j->depth--;
}

void js_obj(struct js *j, const char *key)
{
	js_open(j, key, '{');
}

void js_end_obj(struct js *j)
{
	js_close(j);
}

void js_arr(struct js *j, const char *key)
{
	js_open(j, key, '[');
}

void js_end_arr(struct js *j)
{
	js_close(j);
}

void js_end_all(struct js *j)
{
	while (j->depth > 0)
		js_close(j);
}

void js_str(struct js *j, const char *key, const char *s)
{
	js_key(j, key);
	if (s)
		js_escape(j, s, strlen(s));
	else
		js_puts(j, "null");
}

void js_int(struct js *j, const char *key, long long v)
{
	char b[32];

	js_key(j, key);
	snprintf(b, sizeof(b), "%lld", v);
	js_puts(j, b);
}

void js_num(struct js *j, const char *key, double v)
{
	char b[64];

	js_key(j, key);
	if (!isfinite(v)) {
		js_puts(j, "null");
		return;
	}
	snprintf(b, sizeof(b), "%.6g", v);
	js_puts(j, b);
}

void js_bool(struct js *j, const char *key, int v)
{
	js_key(j, key);
	js_puts(j, v ? "true" : "false");
}

void js_null(struct js *j, const char *key)
{
	js_key(j, key);
	js_puts(j, "null");
}

void js_raw(struct js *j, const char *key, const char *raw, size_t len)
{
	js_key(j, key);
	js_put(j, raw, len);
}
