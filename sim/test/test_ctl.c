/* SPDX-License-Identifier: MIT */
/*
 * test_ctl.c - the control protocol's parser, builder, getters and socket
 * helpers: exact framing errors (fed whole, byte by byte and in random
 * splits), limits, round trips, and descriptor passing over socketpairs.
 */
#include "sim/core/ctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sim/test/check.h"

/* ---- helpers ------------------------------------------------------------- */

static uint32_t rng = 12345;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

enum split { WHOLE, BYTES, RANDOM };
static const char *const split_names[] = {"whole", "byte-by-byte", "random chunks"};

/*
 * Feed data (len bytes) split as asked; collect up to max messages. Returns the
 * number of messages, or the negative error of the first failing feed (*err_out
 * gets the parser's reason).
 */
static int feed_all(const char *data, size_t len, enum split how, struct ctl_msg **msgs, int max,
		    char *err_out, size_t errcap)
{
	struct ctl_parser *p = ctl_parser_new();
	int n = 0, rc = 0;
	size_t off = 0;
	err_out[0] = 0;
	while (off < len) {
		size_t chunk = len - off;
		if (how == BYTES)
			chunk = 1;
		else if (how == RANDOM)
			chunk = 1 + rnd() % (chunk < 300 ? chunk : 300);
		size_t done = 0;
		while (done < chunk) {
			struct ctl_msg *m;
			ssize_t k = ctl_parser_feed(p, data + off + done, chunk - done, &m);
			if (k < 0) {
				rc = (int)k;
				snprintf(err_out, errcap, "%s", ctl_parser_error(p));
				goto out;
			}
			if (m) {
				if (n < max)
					msgs[n++] = m;
				else
					ctl_msg_free(m);
			} else if ((size_t)k != chunk - done) {
				rc = -1000; /* consumed less without a message: API broken */
				goto out;
			}
			done += (size_t)k;
		}
		off += chunk;
	}
out:
	ctl_parser_free(p);
	if (rc) {
		for (int i = 0; i < n; i++)
			ctl_msg_free(msgs[i]);
		return rc;
	}
	return n;
}

static int count_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the DIR's own */
}

static int64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A growing text buffer for building long inputs. */
struct buf {
	char *p;
	size_t len, cap;
};
static void put(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}
static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}
static void putrep(struct buf *b, char c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(b, &c, 1);
}

/* ---- framing errors ------------------------------------------------------ */

struct bad_case {
	const char *name;
	const char *in;
	size_t len; /* 0: strlen(in) */
	const char *err;
};

static void test_framing_errors(void)
{
	static const struct bad_case cases[] = {
		{"empty message", "\n", 0, "1:1: empty line before any key=value line"},
		{"empty after one message", "op=a\n\n\n", 0,
		 "1:1: empty line before any key=value line"},
		{"empty key", "=v\n\n", 0, "1:1: empty key"},
		{"empty key line 2", "op=ping\n=\n\n", 0, "2:1: empty key"},
		{"upper-case key", "op=ping\nA=1\n\n", 0,
		 "2:1: character 'A' in key (keys are [a-z0-9_.])"},
		{"space in key", "op=ping\nx y=1\n\n", 0,
		 "2:2: character ' ' in key (keys are [a-z0-9_.])"},
		{"dash in key", "my-key=1\n\n", 0, "1:3: character '-' in key (keys are [a-z0-9_.])"},
		{"quote in key", "a'=1\n\n", 0, "1:2: character 0x27 in key (keys are [a-z0-9_.])"},
		{"NUL in key", "o\0p=1\n\n", 7, "1:2: character 0x00 in key (keys are [a-z0-9_.])"},
		{"high byte in key", "o\xffp=1\n\n", 0,
		 "1:2: character 0xff in key (keys are [a-z0-9_.])"},
		{"no '='", "op\n\n", 0, "1:3: line without '='"},
		{"no '=' line 3", "op=a\nb=c\nd\n\n", 0, "3:2: line without '='"},
		{"CR in key", "op\r=x\n\n", 0, "1:3: carriage return in key (lines end with \\n alone)"},
		{"CRLF", "op=ping\r\n\r\n", 0,
		 "1:8: carriage return in value (lines end with \\n alone)"},
		{"tab in value", "op=a\tb\n\n", 0, "1:5: control byte 0x09 in value"},
		{"NUL in value", "op=a\0b\n\n", 8, "1:5: control byte 0x00 in value"},
		{"DEL in value", "op=\x7f\n\n", 0, "1:4: control byte 0x7f in value"},
		{"UTF-8 in value", "op=caf\xc3\xa9\n\n", 0, "1:7: non-ASCII byte 0xc3 in value"},
	};
	char err[CTL_ERR_LEN];
	struct ctl_msg *msgs[4];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct bad_case *c = &cases[i];
		size_t len = c->len ? c->len : strlen(c->in);
		for (int how = WHOLE; how <= RANDOM; how++) {
			int n = feed_all(c->in, len, how, msgs, 4, err, sizeof(err));
			CHECK(n == -EINVAL && strcmp(err, c->err) == 0,
			      "%s (%s): got %d '%s', want -EINVAL '%s'", c->name, split_names[how], n,
			      err, c->err);
		}
	}
}

/* Generated inputs at and just past each limit. */
static void test_limits(void)
{
	char err[CTL_ERR_LEN];
	struct ctl_msg *msgs[2];
	struct buf b = {0};

	/* Key: 32 bytes fit, 33 do not (the error is at the 33rd). */
	putrep(&b, 'k', 32);
	puts_(&b, "=v\n\n");
	for (int how = WHOLE; how <= RANDOM; how++) {
		int n = feed_all(b.p, b.len, how, msgs, 2, err, sizeof(err));
		CHECK(n == 1 && strlen(msgs[0]->kv[0].key) == 32, "32-byte key (%s): %d %s",
		      split_names[how], n, err);
		if (n == 1)
			ctl_msg_free(msgs[0]);
	}
	b.len = 0;
	putrep(&b, 'k', 33);
	puts_(&b, "=v\n\n");
	int n = feed_all(b.p, b.len, BYTES, msgs, 2, err, sizeof(err));
	CHECK(n == -EINVAL && strcmp(err, "1:33: key longer than 32 bytes") == 0, "33-byte key: %s",
	      err);

	/* Value: 1024 fit, 1025 do not. */
	b.len = 0;
	puts_(&b, "op=");
	putrep(&b, 'v', 1024);
	puts_(&b, "\n\n");
	n = feed_all(b.p, b.len, RANDOM, msgs, 2, err, sizeof(err));
	CHECK(n == 1 && strlen(msgs[0]->kv[0].value) == 1024, "1024-byte value: %d %s", n, err);
	if (n == 1)
		ctl_msg_free(msgs[0]);
	b.len = 0;
	puts_(&b, "op=");
	putrep(&b, 'v', 1025);
	puts_(&b, "\n\n");
	n = feed_all(b.p, b.len, WHOLE, msgs, 2, err, sizeof(err));
	CHECK(n == -EINVAL && strcmp(err, "1:1028: value longer than 1024 bytes") == 0,
	      "1025-byte value: %s", err);

	/* Lines: 256 fit, the 257th fails at its first byte. */
	b.len = 0;
	for (int i = 0; i < 256; i++)
		puts_(&b, "a=1\n");
	puts_(&b, "\n");
	n = feed_all(b.p, b.len, RANDOM, msgs, 2, err, sizeof(err));
	CHECK(n == 1 && msgs[0]->n == 256, "256 lines: %d %s", n, err);
	if (n == 1)
		ctl_msg_free(msgs[0]);
	b.len = 0;
	for (int i = 0; i < 257; i++)
		puts_(&b, "a=1\n");
	puts_(&b, "\n");
	n = feed_all(b.p, b.len, BYTES, msgs, 2, err, sizeof(err));
	CHECK(n == -EINVAL && strcmp(err, "257:1: more than 256 lines") == 0, "257 lines: %s", err);

	/*
	 * Size: 63 lines of "v=<1024>\n" (1027 bytes each) are 64701 bytes; a 64th
	 * line of "v=<831>\n" makes 65536 with the final '\n'. A longer 64th line
	 * fails at the message's 65537th byte: line 64, column 836.
	 */
	b.len = 0;
	for (int i = 0; i < 63; i++) {
		puts_(&b, "v=");
		putrep(&b, 'x', 1024);
		puts_(&b, "\n");
	}
	puts_(&b, "v=");
	putrep(&b, 'x', 831);
	puts_(&b, "\n\n");
	CHECK(b.len == CTL_MSG_MAX, "test input is %zu bytes", b.len);
	n = feed_all(b.p, b.len, RANDOM, msgs, 2, err, sizeof(err));
	CHECK(n == 1 && msgs[0]->n == 64, "65536-byte message: %d %s", n, err);
	if (n == 1) {
		char *out = malloc(CTL_MSG_MAX);
		CHECK(ctl_msg_format(msgs[0], out, CTL_MSG_MAX) == CTL_MSG_MAX &&
			      memcmp(out, b.p, CTL_MSG_MAX) == 0,
		      "65536-byte message formats back to itself");
		CHECK(ctl_msg_format(msgs[0], out, CTL_MSG_MAX - 1) == -E2BIG,
		      "format into a short buffer");
		free(out);
		ctl_msg_free(msgs[0]);
	}
	b.len -= 2;
	putrep(&b, 'x', 100);
	puts_(&b, "\n\n");
	n = feed_all(b.p, b.len, WHOLE, msgs, 2, err, sizeof(err));
	CHECK(n == -EINVAL && strcmp(err, "64:836: message longer than 65536 bytes") == 0,
	      "65537-byte message: %s", err);
	free(b.p);
}

/* ---- valid input --------------------------------------------------------- */

static void test_valid(void)
{
	static const struct {
		const char *in;
		int nmsgs;
		const char *kv; /* expected "k=v|k=v||k=v" ('||' separates messages) */
	} cases[] = {
		{"op=ping\n\n", 1, "op=ping"},
		{"op=hello\nnode=n0\npid=42\nversion=1\nclient=plugin\n\n", 1,
		 "op=hello|node=n0|pid=42|version=1|client=plugin"},
		{"k=\n\n", 1, "k="},
		{"a=b=c\n\n", 1, "a=b=c"},
		{"x.y_z.0=~ !\"#$%&'()*+,-./:;<>?@[\\]^`{|}\n\n", 1,
		 "x.y_z.0=~ !\"#$%&'()*+,-./:;<>?@[\\]^`{|}"},
		{"op=a\n\nop=b\nk=v\n\nop=c\n\n", 3, "op=a||op=b|k=v||op=c"},
		{"dup=1\ndup=2\n\n", 1, "dup=1|dup=2"},
	};
	char err[CTL_ERR_LEN], got[512];
	struct ctl_msg *msgs[4];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int how = WHOLE; how <= RANDOM; how++) {
			int n = feed_all(cases[i].in, strlen(cases[i].in), how, msgs, 4, err,
					 sizeof(err));
			size_t o = 0;
			got[0] = 0;
			for (int m = 0; m < n; m++) {
				for (int k = 0; k < msgs[m]->n; k++)
					o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%s=%s",
							      k ? "|" : m ? "||" : "",
							      msgs[m]->kv[k].key, msgs[m]->kv[k].value);
				CHECK(msgs[m]->fd == -1, "parsed message has no fd");
				ctl_msg_free(msgs[m]);
			}
			CHECK(n == cases[i].nmsgs && strcmp(got, cases[i].kv) == 0,
			      "case %zu (%s): %d message(s) '%s' (%s), want %d '%s'", i,
			      split_names[how], n, got, err, cases[i].nmsgs, cases[i].kv);
		}
	}
}

/* The feed contract: it stops right after a complete message; a failed parser stays failed. */
static void test_feed_contract(void)
{
	struct ctl_parser *p = ctl_parser_new();
	struct ctl_msg *m;
	const char *two = "op=a\n\nop=b\n\n";
	ssize_t k = ctl_parser_feed(p, two, strlen(two), &m);
	CHECK(k == 6 && m && strcmp(ctl_get(m, "op"), "a") == 0, "first of two: %zd", k);
	ctl_msg_free(m);
	k = ctl_parser_feed(p, two + 6, strlen(two) - 6, &m);
	CHECK(k == 6 && m && strcmp(ctl_get(m, "op"), "b") == 0, "second of two: %zd", k);
	ctl_msg_free(m);
	k = ctl_parser_feed(p, "", 0, &m);
	CHECK(k == 0 && !m, "empty feed: %zd", k);
	/* Between messages nothing is partial (the daemon closes a connection whose message
	 * stays partial too long: an idle session must never look like one). */
	CHECK(!ctl_parser_partial(p), "partial after a complete message");
	k = ctl_parser_feed(p, "op", 2, &m);
	CHECK(k == 2 && !m && ctl_parser_partial(p), "a begun message is partial: %zd", k);
	k = ctl_parser_feed(p, "=c\n\n", 4, &m);
	CHECK(k == 4 && m && !ctl_parser_partial(p), "complete again: %zd", k);
	ctl_msg_free(m);
	/* Byte by byte: each byte consumed, the message comes with the last. */
	const char *one = "op=ping\nx=1\n\n";
	for (size_t i = 0; i < strlen(one); i++) {
		k = ctl_parser_feed(p, one + i, 1, &m);
		bool last = i + 1 == strlen(one);
		CHECK(k == 1 && (m != NULL) == last, "byte %zu: %zd %p", i, k, (void *)m);
		if (m) {
			CHECK(m->n == 2 && strcmp(ctl_get(m, "x"), "1") == 0, "byte-by-byte message");
			ctl_msg_free(m);
		}
	}
	/* A framing error mid-message frees the half-built message (ASan) and sticks. */
	k = ctl_parser_feed(p, "op=x\nBad", 8, &m);
	CHECK(k == -EINVAL && !m, "error: %zd", k);
	CHECK(strcmp(ctl_parser_error(p), "2:1: character 'B' in key (keys are [a-z0-9_.])") == 0,
	      "error text '%s'", ctl_parser_error(p));
	k = ctl_parser_feed(p, "op=ok\n\n", 7, &m);
	CHECK(k == -EINVAL && !m, "a failed parser stays failed: %zd", k);
	ctl_parser_free(p);
	ctl_parser_free(NULL);
	ctl_msg_free(NULL);
	/* Freed with a half-built message (ASan/LSan check). */
	p = ctl_parser_new();
	ctl_parser_feed(p, "op=half", 7, &m);
	ctl_parser_free(p);
}

/* A long stream of random messages, parsed whole and in random splits, must agree. */
static void test_random_stream(void)
{
	struct buf b = {0};
	int nm = 0;
	for (; nm < 200; nm++) {
		int lines = 1 + (int)(rnd() % 20);
		for (int l = 0; l < lines; l++) {
			char key[CTL_KEY_MAX + 1];
			int kl = 1 + (int)(rnd() % CTL_KEY_MAX);
			for (int i = 0; i < kl; i++)
				key[i] = "abcxyz019_."[rnd() % 11];
			key[kl] = 0;
			puts_(&b, key);
			puts_(&b, "=");
			int vl = (int)(rnd() % (rnd() % 8 ? 40 : CTL_VALUE_MAX + 1));
			for (int i = 0; i < vl; i++) {
				char c = (char)(0x20 + rnd() % 95);
				put(&b, &c, 1);
			}
			puts_(&b, "\n");
		}
		puts_(&b, "\n");
	}
	static struct ctl_msg *a[200], *r[200];
	char err[CTL_ERR_LEN];
	int na = feed_all(b.p, b.len, WHOLE, a, 200, err, sizeof(err));
	int nr = feed_all(b.p, b.len, RANDOM, r, 200, err, sizeof(err));
	CHECK(na == nm && nr == nm, "random stream: %d and %d of %d messages (%s)", na, nr, nm, err);
	size_t off = 0;
	char *out = malloc(CTL_MSG_MAX);
	for (int i = 0; i < na && i < nr; i++) {
		ssize_t fa = ctl_msg_format(a[i], out, CTL_MSG_MAX);
		CHECK(fa > 0 && off + (size_t)fa <= b.len && memcmp(out, b.p + off, (size_t)fa) == 0,
		      "message %d formats back to its input", i);
		ssize_t fr = ctl_msg_format(r[i], out, CTL_MSG_MAX);
		CHECK(fr == fa && memcmp(out, b.p + off, (size_t)fr) == 0,
		      "message %d: split parse equals whole parse", i);
		off += fa > 0 ? (size_t)fa : 0;
	}
	for (int i = 0; i < na; i++)
		ctl_msg_free(a[i]);
	for (int i = 0; i < nr; i++)
		ctl_msg_free(r[i]);
	free(out);
	free(b.p);
}

/* ---- builder and getters ------------------------------------------------- */

static void test_builder(void)
{
	struct ctl_msg *m = ctl_msg_new();
	char big[CTL_VALUE_MAX + 2];
	CHECK(m && m->n == 0 && m->fd == -1, "new message");
	CHECK(ctl_add(m, "op", "hello") == 0, "add op");
	CHECK(ctl_addf(m, "pid", "%d", 4242) == 0, "addf");
	CHECK(ctl_add(m, "empty", "") == 0, "empty value");
	CHECK(ctl_add(m, "", "x") == -EINVAL, "empty key");
	CHECK(ctl_add(m, "Op", "x") == -EINVAL, "upper-case key");
	CHECK(ctl_add(m, "a-b", "x") == -EINVAL, "dash in key");
	CHECK(ctl_add(m, "k", "a\nb") == -EINVAL, "newline in value");
	CHECK(ctl_add(m, "k", "a\tb") == -EINVAL, "tab in value");
	CHECK(ctl_add(m, "k", "caf\xc3\xa9") == -EINVAL, "UTF-8 in value");
	CHECK(ctl_add(m, "k", NULL) == -EINVAL, "NULL value");
	CHECK(ctl_add(m, "abcdefghijklmnopqrstuvwxyz012345", "x") == 0, "32-byte key");
	CHECK(ctl_add(m, "abcdefghijklmnopqrstuvwxyz0123456", "x") == -E2BIG, "33-byte key");
	memset(big, 'v', CTL_VALUE_MAX);
	big[CTL_VALUE_MAX] = 0;
	CHECK(ctl_add(m, "big", big) == 0, "1024-byte value");
	big[CTL_VALUE_MAX] = 'v';
	big[CTL_VALUE_MAX + 1] = 0;
	CHECK(ctl_add(m, "big", big) == -E2BIG, "1025-byte value");
	CHECK(ctl_addf(m, "big", "%s", big) == -E2BIG, "1025-byte value via addf");
	CHECK(m->n == 5, "failed adds add nothing: n=%d", m->n);
	char out[2048];
	ssize_t n = ctl_msg_format(m, out, sizeof(out));
	const char *want_head = "op=hello\npid=4242\nempty=\nabcdefghijklmnopqrstuvwxyz012345=x\nbig=";
	CHECK(n == (ssize_t)(strlen(want_head) + CTL_VALUE_MAX + 2) &&
		      memcmp(out, want_head, strlen(want_head)) == 0 && out[n - 1] == '\n' &&
		      out[n - 2] == '\n',
	      "format: %zd", n);
	CHECK(ctl_msg_format(m, out, (size_t)n - 1) == -E2BIG, "format one byte short");
	/* Round trip through the parser. */
	char err[CTL_ERR_LEN];
	struct ctl_msg *back[1];
	int k = feed_all(out, (size_t)n, RANDOM, back, 1, err, sizeof(err));
	CHECK(k == 1 && back[0]->n == m->n, "round trip: %d %s", k, err);
	for (int i = 0; k == 1 && i < m->n; i++)
		CHECK(strcmp(back[0]->kv[i].key, m->kv[i].key) == 0 &&
			      strcmp(back[0]->kv[i].value, m->kv[i].value) == 0,
		      "round trip line %d", i + 1);
	if (k == 1)
		ctl_msg_free(back[0]);
	ctl_msg_free(m);

	/* Line and size limits. */
	m = ctl_msg_new();
	for (int i = 0; i < CTL_LINES_MAX; i++)
		CHECK(ctl_add(m, "a", "1") == 0, "line %d", i + 1);
	CHECK(ctl_add(m, "a", "1") == -E2BIG, "257th line");
	ctl_msg_free(m);
	m = ctl_msg_new();
	memset(big, 'x', CTL_VALUE_MAX);
	big[CTL_VALUE_MAX] = 0;
	for (int i = 0; i < 63; i++)
		ctl_add(m, "v", big); /* 63 * 1027 = 64701 bytes */
	big[831] = 0;
	CHECK(ctl_add(m, "v", big) == 0, "up to 65536 bytes on the wire");
	CHECK(ctl_add(m, "v", "") == -E2BIG, "one line more is too much");
	char *wire = malloc(CTL_MSG_MAX);
	CHECK(ctl_msg_format(m, wire, CTL_MSG_MAX) == CTL_MSG_MAX, "formats to exactly 64 KiB");
	free(wire);
	ctl_msg_free(m);
}

static void test_getters(void)
{
	static const struct {
		const char *v;
		int rc;
		uint64_t want;
	} u64s[] = {
		{"0", 0, 0},
		{"42", 0, 42},
		{"007", 0, 7},
		{"18446744073709551615", 0, UINT64_MAX},
		{"18446744073709551616", -EINVAL, 0},
		{"99999999999999999999", -EINVAL, 0},
		{"0x0", 0, 0},
		{"0xABCdef", 0, 0xabcdef},
		{"0X1f", 0, 0x1f},
		{"0xffffffffffffffff", 0, UINT64_MAX},
		{"0x10000000000000000", -EINVAL, 0},
		{"0x", -EINVAL, 0},
		{"", -EINVAL, 0},
		{"+1", -EINVAL, 0},
		{"-1", -EINVAL, 0},
		{" 1", -EINVAL, 0},
		{"1 ", -EINVAL, 0},
		{"1a", -EINVAL, 0},
		{"0x1g", -EINVAL, 0},
		{"abc", -EINVAL, 0},
	};
	struct ctl_msg *m = ctl_msg_new();
	for (size_t i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++) {
		m->n = 0;
		m->len = 0;
		ctl_add(m, "k", u64s[i].v);
		uint64_t v = 12345;
		int rc = ctl_get_u64(m, "k", &v);
		CHECK(rc == u64s[i].rc && (rc || v == u64s[i].want), "u64 '%s': %d %llu", u64s[i].v,
		      rc, (unsigned long long)v);
	}
	uint64_t v;
	CHECK(ctl_get_u64(m, "absent", &v) == -ENOENT, "absent u64");
	static const struct {
		const char *v;
		int min, max, rc, want;
	} ints[] = {
		{"0", 0, 10, 0, 0},	       {"10", 0, 10, 0, 10},
		{"11", 0, 10, -EINVAL, 0},     {"-5", -10, 10, 0, -5},
		{"-11", -10, 10, -EINVAL, 0},  {"-0x10", -20, 0, 0, -16},
		{"0x7fffffff", 0, 2147483647, 0, 2147483647},
		{"2147483648", 0, 2147483647, -EINVAL, 0},
		{"-2147483648", -2147483647 - 1, 0, 0, -2147483647 - 1},
		{"-", -10, 10, -EINVAL, 0},    {"--1", -10, 10, -EINVAL, 0},
		{"9223372036854775808", -1, 1, -EINVAL, 0},
		{"1.5", 0, 10, -EINVAL, 0},
	};
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		m->n = 0;
		m->len = 0;
		ctl_add(m, "k", ints[i].v);
		int x = 777;
		int rc = ctl_get_int(m, "k", ints[i].min, ints[i].max, &x);
		CHECK(rc == ints[i].rc && (rc || x == ints[i].want), "int '%s' in %d..%d: %d %d",
		      ints[i].v, ints[i].min, ints[i].max, rc, x);
	}
	int x;
	CHECK(ctl_get_int(m, "absent", 0, 1, &x) == -ENOENT, "absent int");
	/* the 64-bit getter under it: the whole range, and its ends refused past them */
	static const struct {
		const char *v;
		int rc;
		int64_t want;
	} i64s[] = {
		{"-9223372036854775807", 0, -INT64_MAX}, {"9223372036854775807", 0, INT64_MAX},
		{"9223372036854775808", -EINVAL, 0},	 {"-3600000000001", -EINVAL, 0},
		{"-3600000000000", 0, -3600000000000LL},
	};
	for (size_t i = 0; i < sizeof(i64s) / sizeof(i64s[0]); i++) {
		m->n = 0;
		m->len = 0;
		ctl_add(m, "k", i64s[i].v);
		int64_t y = 777;
		int64_t lo = strstr(i64s[i].v, "3600") ? -3600000000000LL : -INT64_MAX;
		int rc = ctl_get_i64(m, "k", lo, INT64_MAX, &y);
		CHECK(rc == i64s[i].rc && (rc || y == i64s[i].want), "i64 '%s': %d %lld", i64s[i].v,
		      rc, (long long)y);
	}
	m->n = 0;
	m->len = 0;
	ctl_add(m, "a", "first");
	ctl_add(m, "a", "second");
	CHECK(strcmp(ctl_get(m, "a"), "first") == 0, "ctl_get returns the first of duplicates");
	CHECK(ctl_get(m, "b") == NULL, "ctl_get absent");
	ctl_msg_free(m);
}

/* ---- sockets ------------------------------------------------------------- */

static int make_memfd(const char *content)
{
	int fd = memfd_create("test", MFD_CLOEXEC);
	if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content)) {
		perror("memfd");
		exit(1);
	}
	return fd;
}

static bool same_file(int a, int b)
{
	struct stat sa, sb;
	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
	       sa.st_dev == sb.st_dev;
}

static struct ctl_msg *msg1(const char *k1, const char *v1, const char *k2, const char *v2)
{
	struct ctl_msg *m = ctl_msg_new();
	ctl_add(m, k1, v1);
	if (k2)
		ctl_add(m, k2, v2);
	return m;
}

/* Send raw bytes with an optional fd, bypassing ctl_send. */
static void raw_send(int sock, const char *data, size_t len, const int *fds, int nfds)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	char cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)nfds);
	}
	if (sendmsg(sock, &mh, MSG_NOSIGNAL) != (ssize_t)len) {
		perror("sendmsg");
		exit(1);
	}
}

static void test_fd_passing(void)
{
	int sv[2];
	int before = count_fds();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		exit(1);
	}
	struct ctl_parser *p = ctl_parser_new();
	struct ctl_msg *r, *m = msg1("chan", "0x1", "fd", "1");

	/* One message with a memfd: same file, readable, close-on-exec. */
	int mfd = make_memfd("hello through shared memory");
	CHECK(ctl_send(sv[0], m, mfd, 1000) == 0, "send with fd");
	CHECK(ctl_recv(sv[1], p, &r, 1000) == 0, "recv with fd");
	if (r) {
		CHECK(r->fd >= 0 && r->fd != mfd && same_file(r->fd, mfd), "received fd %d", r->fd);
		char got[64] = {0};
		CHECK(pread(r->fd, got, sizeof(got) - 1, 0) == 27 &&
			      strcmp(got, "hello through shared memory") == 0,
		      "memfd contents '%s'", got);
		CHECK((fcntl(r->fd, F_GETFD) & FD_CLOEXEC) != 0, "received fd is close-on-exec");
		CHECK(strcmp(ctl_get(r, "chan"), "0x1") == 0, "message with fd");
		ctl_msg_free(r); /* closes r->fd */
	}

	/* A message without fd=1 does not take a descriptor sent with it ... */
	struct ctl_msg *plain = msg1("op", "ping", NULL, NULL);
	CHECK(ctl_send(sv[0], plain, mfd, 1000) == 0, "send a stray fd");
	CHECK(ctl_recv(sv[1], p, &r, 1000) == 0 && r && r->fd == -1, "stray fd not attached");
	ctl_msg_free(r);
	/* ... and when the next fd=1 message comes with its own, that one wins; the stray,
	 * which arrived with an earlier message, is closed. */
	int mfd2 = make_memfd("second");
	CHECK(ctl_send(sv[0], m, mfd2, 1000) == 0, "send fd=1 with its fd");
	CHECK(ctl_recv(sv[1], p, &r, 1000) == 0 && r && r->fd >= 0 && same_file(r->fd, mfd2),
	      "fd=1 message gets its own fd, not the stray one");
	ctl_msg_free(r);

	/* Two fds in one sendmsg: one is kept, the other closed at once. */
	char text[64];
	int two[2] = {mfd, mfd2};
	raw_send(sv[0], "fd=1\n\n", 6, two, 2);
	CHECK(ctl_recv(sv[1], p, &r, 1000) == 0 && r && same_file(r->fd, mfd), "first of two fds");
	ctl_msg_free(r);

	/*
	 * A message split across reads: half of A with fd1, then the rest of A
	 * and all of B (with fd2) come back in one read. Each gets its own.
	 */
	const char *a = "op=incoming\nchan=0xa\nfd=1\n\n", *b = "op=incoming\nchan=0xb\nfd=1\n\n";
	raw_send(sv[0], a, 10, &mfd, 1);
	raw_send(sv[0], a + 10, strlen(a) - 10, NULL, 0);
	raw_send(sv[0], b, strlen(b), &mfd2, 1);
	CHECK(ctl_recv(sv[1], p, &r, 1000) == 0 && r && strcmp(ctl_get(r, "chan"), "0xa") == 0 &&
		      same_file(r->fd, mfd),
	      "split message A gets fd1");
	ctl_msg_free(r);
	CHECK(ctl_recv(sv[1], p, &r, 1000) == 0 && r && strcmp(ctl_get(r, "chan"), "0xb") == 0 &&
		      same_file(r->fd, mfd2),
	      "message B gets fd2");
	ctl_msg_free(r);

	/* Several messages in one read are handed out one per call. */
	snprintf(text, sizeof(text), "op=a\n\nop=b\n\nop=c\n\n");
	raw_send(sv[0], text, strlen(text), NULL, 0);
	for (const char *want = "abc"; *want; want++) {
		char w[2] = {*want, 0};
		CHECK(ctl_recv(sv[1], p, &r, 0) == 0 && r && strcmp(ctl_get(r, "op"), w) == 0,
		      "buffered message %s", w);
		ctl_msg_free(r);
	}

	/* Timeouts: nothing there. */
	CHECK(ctl_recv(sv[1], p, &r, 0) == -EAGAIN && !r, "no wait: -EAGAIN");
	int64_t t0 = ms_now();
	CHECK(ctl_recv(sv[1], p, &r, 60) == -ETIMEDOUT, "60 ms: -ETIMEDOUT");
	int64_t dt = ms_now() - t0;
	CHECK(dt >= 55 && dt < 1000, "waited %lld ms", (long long)dt);
	/* A partial message is not a message. */
	raw_send(sv[0], "op=pa", 5, NULL, 0);
	CHECK(ctl_recv(sv[1], p, &r, 0) == -EAGAIN, "partial: -EAGAIN");
	raw_send(sv[0], "rt\n\n", 4, NULL, 0);
	CHECK(ctl_recv(sv[1], p, &r, 0) == 0 && r && strcmp(ctl_get(r, "op"), "part") == 0,
	      "partial completed");
	ctl_msg_free(r);

	/* EOF: -ECONNRESET, and sending to a closed peer is -EPIPE, not SIGPIPE. */
	close(sv[0]);
	CHECK(ctl_recv(sv[1], p, &r, 1000) == -ECONNRESET, "EOF");
	int rc = ctl_send(sv[1], plain, -1, 100);
	CHECK(rc == -EPIPE || rc == -ECONNRESET, "send to a closed peer: %d", rc);
	close(sv[1]);
	ctl_parser_free(p);
	ctl_msg_free(m);
	ctl_msg_free(plain);
	close(mfd);
	close(mfd2);
	CHECK(count_fds() == before, "no descriptor leaked: %d before, %d after", before,
	      count_fds());
}

static void test_socket_errors(void)
{
	int sv[2];
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
	struct ctl_parser *p = ctl_parser_new();
	struct ctl_msg *r;
	/* A framing error through ctl_recv: -EINVAL with the parser's reason, and it sticks. */
	raw_send(sv[0], "op=x\nbad key=1\n\nop=ok\n\n", 23, NULL, 0);
	CHECK(ctl_recv(sv[1], p, &r, 100) == -EINVAL, "framing error through recv");
	CHECK(strcmp(ctl_parser_error(p), "2:4: character ' ' in key (keys are [a-z0-9_.])") == 0,
	      "'%s'", ctl_parser_error(p));
	CHECK(ctl_recv(sv[1], p, &r, 100) == -EINVAL, "still failed");
	ctl_parser_free(p);

	/* A full socket: ctl_send waits timeout_ms, then -ETIMEDOUT. */
	int sz = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	struct ctl_msg *m = ctl_msg_new();
	char v[CTL_VALUE_MAX + 1];
	memset(v, 'x', CTL_VALUE_MAX);
	v[CTL_VALUE_MAX] = 0;
	for (int i = 0; i < 60; i++)
		ctl_add(m, "v", v);
	int rc = 0;
	for (int i = 0; i < 100 && rc == 0; i++)
		rc = ctl_send(sv[0], m, -1, 0);
	CHECK(rc == -ETIMEDOUT, "no room, no wait: %d", rc);
	int64_t t0 = ms_now();
	rc = ctl_send(sv[0], m, -1, 50);
	CHECK(rc == -ETIMEDOUT && ms_now() - t0 >= 45, "no room for 50 ms: %d", rc);
	ctl_msg_free(m);
	close(sv[0]);
	close(sv[1]);
}

static void test_default_socket(void)
{
	char buf[256], want[256];
	unsetenv("SIMFABRIC_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	struct passwd *pw = getpwuid(geteuid());
	CHECK(pw && pw->pw_dir[0] == '/', "uid %u has a home directory", (unsigned)geteuid());
	snprintf(want, sizeof(want), "%s/.simfabric/ctl.sock",
		 pw && strcmp(pw->pw_dir, "/") ? pw->pw_dir : "");
	CHECK(ctl_default_socket(buf, sizeof(buf)) == 0 && strcmp(buf, want) == 0, "fallback '%s'",
	      buf);
	/* No other user can create the fallback's directory first: its parent is writable by
	 * us (or root) alone (it was /tmp, where anyone could, then serve a fake daemon). */
	char parent[256];
	snprintf(parent, sizeof(parent), "%s", buf);
	*strrchr(parent, '/') = 0;
	*strrchr(parent, '/') = 0;
	struct stat pst;
	CHECK(stat(parent[0] ? parent : "/", &pst) == 0 &&
		      (pst.st_uid == geteuid() || pst.st_uid == 0) && !(pst.st_mode & 022),
	      "the fallback's parent %s is writable by another user (uid %u, mode %04o)", parent,
	      (unsigned)pst.st_uid, (unsigned)(pst.st_mode & 07777));
	setenv("HOME", "/elsewhere", 1); /* the passwd entry wins: daemon and clients agree */
	CHECK(ctl_default_socket(buf, sizeof(buf)) == 0 && strcmp(buf, want) == 0,
	      "HOME does not move the fallback: '%s'", buf);
	setenv("XDG_RUNTIME_DIR", "", 1);
	CHECK(ctl_default_socket(buf, sizeof(buf)) == 0 && strcmp(buf, want) == 0,
	      "empty XDG_RUNTIME_DIR ignored: '%s'", buf);
	setenv("XDG_RUNTIME_DIR", "/run/user/77", 1);
	CHECK(ctl_default_socket(buf, sizeof(buf)) == 0 &&
		      strcmp(buf, "/run/user/77/simfabric/ctl.sock") == 0,
	      "XDG '%s'", buf);
	setenv("SIMFABRIC_SOCKET", "/some/where.sock", 1);
	CHECK(ctl_default_socket(buf, sizeof(buf)) == 0 && strcmp(buf, "/some/where.sock") == 0,
	      "SIMFABRIC_SOCKET '%s'", buf);
	CHECK(ctl_default_socket(buf, 10) == -ENAMETOOLONG, "short buffer");
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	setenv("SIMFABRIC_SOCKET", longp, 1);
	CHECK(ctl_default_socket(buf, sizeof(buf)) == -ENAMETOOLONG, "longer than sun_path");
	unsetenv("SIMFABRIC_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
}

static void test_connect(void)
{
	char dir[] = "/tmp/test_ctl.XXXXXX", path[64];
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	CHECK(ctl_connect(path) == -ENOENT, "nothing there: -ENOENT");
	CHECK(ctl_connect("") == -EINVAL, "empty path");
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = 0;
	CHECK(ctl_connect(longp) == -ENAMETOOLONG, "long path");
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	CHECK(bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 4) == 0, "listen");
	int fd = ctl_connect(path);
	CHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "connect: %d, close-on-exec", fd);
	if (fd >= 0) {
		int a = accept(l, NULL, NULL);
		struct ctl_msg *m = msg1("op", "ping", NULL, NULL), *r = NULL;
		struct ctl_parser *p = ctl_parser_new();
		CHECK(ctl_send(fd, m, -1, 1000) == 0 && ctl_recv(a, p, &r, 1000) == 0 && r &&
			      strcmp(ctl_get(r, "op"), "ping") == 0,
		      "ping over a connected socket");
		ctl_msg_free(r);
		ctl_msg_free(m);
		ctl_parser_free(p);
		close(a);
		close(fd);
	}
	close(l);
	unlink(path);
	/* A socket file with nobody listening: -ECONNREFUSED. */
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	bind(l, (struct sockaddr *)&sa, sizeof(sa));
	close(l);
	CHECK(ctl_connect(path) == -ECONNREFUSED, "stale socket: -ECONNREFUSED");
	unlink(path);
	rmdir(dir);
}

/* Serve path as uid 65534 (nobody) in a child; returns its pid, or -1. Root only. */
static pid_t serve_as_nobody(const char *dir, const char *path, int ready[2])
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	if (chown(dir, 65534, 65534) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
		_exit(1);
	int l = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(l, 4) != 0)
		_exit(2);
	(void)!write(ready[1], "r", 1);
	for (;;) {
		int a = accept(l, NULL, NULL);
		if (a >= 0)
			close(a);
	}
}

/*
 * Clients authenticate the daemon: the socket's directory must be a real one of ours with
 * mode 0700 (lstat), and the server must run as our uid (SO_PEERCRED). Before, ctl_connect
 * talked to whatever served the path.
 */
static void test_connect_auth(void)
{
	char dir[] = "/tmp/test_ctl_auth.XXXXXX", path[96], link[96], err[512];
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	snprintf(link, sizeof(link), "%s.link", dir);
	CHECK(ctl_check_dir(dir, err, sizeof(err)) == 0, "our 0700 directory: %s", err);
	CHECK(symlink(dir, link) == 0, "symlink");
	CHECK(ctl_check_dir(link, err, sizeof(err)) == -ELOOP && strstr(err, "symbolic link"),
	      "a symlinked directory is refused: %s", err);
	char lpath[128];
	snprintf(lpath, sizeof(lpath), "%s/s.sock", link);
	CHECK(ctl_connect_daemon(lpath, err, sizeof(err)) == -ELOOP, "connect through the symlink");
	unlink(link);
	chmod(dir, 0755);
	CHECK(ctl_check_dir(dir, err, sizeof(err)) == -EPERM && strstr(err, "mode 0755"),
	      "group/other access is refused: %s", err);
	chmod(dir, 0700);
	CHECK(ctl_connect_daemon(path, err, sizeof(err)) == -ENOENT && strstr(err, "connect to"),
	      "no socket: -ENOENT, %s", err);
	if (geteuid() != 0) {
		printf("test_ctl: SKIP another uid's daemon: needs root to serve as uid 65534\n");
		rmdir(dir);
		return;
	}
	int ready[2];
	CHECK(pipe(ready) == 0, "pipe");
	pid_t pid = serve_as_nobody(dir, path, ready);
	char c = 0;
	CHECK(pid > 0 && read(ready[0], &c, 1) == 1, "a server as uid 65534");
	CHECK(ctl_check_dir(dir, err, sizeof(err)) == -EPERM && strstr(err, "owned by uid 65534"),
	      "another user's directory is refused: %s", err);
	CHECK(ctl_connect_daemon(path, err, sizeof(err)) == -EPERM, "ctl_connect_daemon: %s", err);
	chown(dir, 0, 0); /* even in our own directory, the server's uid decides */
	CHECK(ctl_connect_daemon(path, err, sizeof(err)) == -EPERM &&
		      strstr(err, "served by uid 65534"),
	      "another user's server is refused: %s", err);
	CHECK(ctl_connect(path) == -EPERM, "ctl_connect refuses it too");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(ready[0]);
	close(ready[1]);
	unlink(path);
	rmdir(dir);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_framing_errors), CHECK_CASE(test_limits),
	CHECK_CASE(test_valid),		 CHECK_CASE(test_feed_contract),
	CHECK_CASE(test_random_stream),	 CHECK_CASE(test_builder),
	CHECK_CASE(test_getters),	 CHECK_CASE(test_fd_passing),
	CHECK_CASE(test_socket_errors),	 CHECK_CASE(test_default_socket),
	CHECK_CASE(test_connect),	 CHECK_CASE(test_connect_auth),
};

CHECK_MAIN(cases)
