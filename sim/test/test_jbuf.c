/* SPDX-License-Identifier: MIT */
/*
 * test_jbuf.c - the growing JSON text (sim/scn/jbuf.c):
 *   append     raw, puts and printf texts of every length across the growth
 *              steps, against the same text made with snprintf
 *   str        jbuf_str's escaping: quotes, control bytes, UTF-8 of 2, 3 and
 *              4 bytes (a surrogate pair), and bytes that are not UTF-8
 *   take       ownership: the text is the caller's, the buffer empty and
 *              reusable; an empty buffer gives ""; jbuf_free is NULL-safe
 *   oom        a failed append is sticky (later ones do nothing) and
 *              reported once, by jbuf_take (-ENOMEM, the text freed)
 */
#include "sim/scn/jbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/test/check.h"

static void test_append(void)
{
	struct jbuf b = JBUF_INIT;
	size_t cap = 1 << 16, len = 0;
	char *want = malloc(cap);
	char word[3000];
	CHECK(want != NULL, "malloc");
	if (!want)
		return;
	/* Pieces of 0..2999 bytes, so appends land on, just before and just past each doubling. */
	for (int i = 0; len + sizeof(word) * 2 < cap; i++) {
		size_t n = (size_t)(i * 37) % sizeof(word);
		memset(word, 'a' + i % 26, n);
		word[n] = 0;
		switch (i % 3) {
		case 0:
			jbuf_raw(&b, word, n);
			break;
		case 1:
			jbuf_puts(&b, word);
			break;
		default:
			jbuf_printf(&b, "%d:%s;", i, word);
			break;
		}
		if (i % 3 == 2)
			len += (size_t)snprintf(want + len, cap - len, "%d:%s;", i, word);
		else
			len += (size_t)snprintf(want + len, cap - len, "%s", word);
		CHECK(b.p && b.len == len && b.len < b.cap && !memcmp(b.p, want, len + 1),
		      "piece %d: len %zu, want %zu", i, b.len, len);
	}
	/* One printf longer than the whole buffer so far. */
	char *big = malloc(100000);
	if (big) {
		memset(big, 'z', 99999);
		big[99999] = 0;
		size_t before = b.len;
		jbuf_printf(&b, "<%s>", big);
		CHECK(b.len == before + 100001 && b.p[before] == '<' && b.p[b.len - 1] == '>' &&
			      b.p[b.len] == 0 && strspn(b.p + before + 1, "z") == 99999,
		      "big printf: len %zu", b.len - before);
		free(big);
	}
	CHECK(!b.oom, "no failure");
	jbuf_free(&b);
	CHECK(!b.p && !b.len && !b.cap && !b.oom, "jbuf_free empties the buffer");
	free(want);
}

static void test_str(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{NULL, "null"},
		{"", "\"\""},
		{"plain ASCII ~!", "\"plain ASCII ~!\""},
		{"q\"b\\s/", "\"q\\\"b\\\\s/\""},
		{"\t\n\x01\x1f\x7f", "\"\\u0009\\u000a\\u0001\\u001f\\u007f\""},
		{"\xc3\xa9", "\"\\u00e9\""},			   /* é: 2 bytes */
		{"\xe2\x82\xac", "\"\\u20ac\""},		   /* €: 3 bytes */
		{"\xf0\x9f\x98\x80", "\"\\ud83d\\ude00\""},	   /* U+1F600: a surrogate pair */
		{"\xf4\x8f\xbf\xbf", "\"\\udbff\\udfff\""},	   /* U+10FFFF, the last */
		{"\x80", "\"\\u0080\""},			   /* a lone continuation byte */
		{"\xc0\x80", "\"\\u00c0\\u0080\""},		   /* overlong */
		{"\xe0\x80\xaf", "\"\\u00e0\\u0080\\u00af\""},	   /* overlong, 3 bytes */
		{"\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\""},	   /* a UTF-16 surrogate */
		{"\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\""}, /* past U+10FFFF */
		{"\xf5\x80", "\"\\u00f5\\u0080\""},		   /* never a lead byte */
		{"\xe2\x82x", "\"\\u00e2\\u0082x\""},		   /* cut short */
		{"a\xc3\xa9z", "\"a\\u00e9z\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct jbuf b = JBUF_INIT;
		char *text;
		jbuf_str(&b, cases[i].in);
		int rc = jbuf_take(&b, &text, NULL);
		CHECK(rc == 0 && text && !strcmp(text, cases[i].out), "case %zu: %d got %s want %s", i,
		      rc, text ? text : "(null)", cases[i].out);
		free(text);
	}
}

static void test_take(void)
{
	struct jbuf b = JBUF_INIT;
	char *text = (char *)"x";
	size_t len = 99;
	CHECK(jbuf_take(&b, &text, &len) == 0 && text && !*text && len == 0,
	      "an empty buffer gives \"\"");
	free(text);

	jbuf_puts(&b, "{\"a\":");
	jbuf_printf(&b, "%d}", 1);
	CHECK(jbuf_take(&b, &text, &len) == 0 && !strcmp(text, "{\"a\":1}") && len == 7,
	      "the text: %s (%zu)", text ? text : "(null)", len);
	CHECK(!b.p && !b.len && !b.cap && !b.oom, "the buffer is empty after the take");
	jbuf_puts(&b, "[]");
	char *again;
	CHECK(jbuf_take(&b, &again, NULL) == 0 && !strcmp(again, "[]") && again != text,
	      "the buffer makes a new text");
	CHECK(!strcmp(text, "{\"a\":1}"), "the first text is untouched: %s", text);
	free(text);
	free(again);

	jbuf_free(NULL);
	jbuf_free(&b);
	jbuf_puts(&b, "dropped");
	jbuf_free(&b); /* under ASan: no leak */
	CHECK(!b.p, "jbuf_free frees a text not taken");
}

static void test_oom(void)
{
	struct jbuf b = JBUF_INIT;
	jbuf_puts(&b, "[1,");
	size_t len = b.len;
	/* more than any buffer can hold: refused before any allocation */
	jbuf_raw(&b, "2", SIZE_MAX - 2);
	CHECK(b.oom && b.len == len && !strcmp(b.p, "[1,"), "the failed append changes nothing");
	jbuf_puts(&b, "3]");
	jbuf_printf(&b, "%d", 4);
	jbuf_str(&b, "5");
	CHECK(b.len == len && !strcmp(b.p, "[1,"), "later appends do nothing: %s", b.p);
	char *text = (char *)"x";
	size_t n = 99;
	CHECK(jbuf_take(&b, &text, &n) == -ENOMEM && !text && n == 0, "the take reports it");
	CHECK(!b.p && !b.len && !b.cap && !b.oom, "and leaves the buffer empty");
	jbuf_puts(&b, "ok");
	CHECK(jbuf_take(&b, &text, NULL) == 0 && !strcmp(text, "ok"), "which works again");
	free(text);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_append),
	CHECK_CASE(test_str),
	CHECK_CASE(test_take),
	CHECK_CASE(test_oom),
};

CHECK_MAIN(cases)
