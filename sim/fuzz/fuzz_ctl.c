/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ctl.c - the control protocol's streaming parser under libFuzzer.
 *
 * The first two input bytes seed how the rest is cut into chunks (1 byte to
 * the whole remainder), so the same stream is parsed under many splits. For
 * every input the parser must: never read or write out of bounds (ASan);
 * consume at most what it was given; stop right after each message; hand out
 * only messages that obey the framing rules and the limits; agree with a
 * one-shot parse of the same bytes; and report errors as "line:column: text".
 * Every message must also format back to the exact bytes it was parsed from.
 */
#include "sim/core/ctl.c"

#include <assert.h>
#include <stdio.h>

#define MAX_MSGS 64

struct run {
	int nmsgs;
	int rc; /* 0 or the first error */
	size_t consumed; /* bytes consumed up to the end of the last message */
	char err[CTL_ERR_LEN];
};

static void check_msg(const struct ctl_msg *m, const uint8_t *wire, size_t wire_len)
{
	static char buf[CTL_MSG_MAX];
	assert(m->n >= 1 && m->n <= CTL_LINES_MAX);
	assert(m->fd == -1);
	for (int i = 0; i < m->n; i++) {
		size_t k = strlen(m->kv[i].key), v = strlen(m->kv[i].value);
		assert(k >= 1 && k <= CTL_KEY_MAX && v <= CTL_VALUE_MAX);
		for (size_t j = 0; j < k; j++)
			assert(key_char((unsigned char)m->kv[i].key[j]));
		for (size_t j = 0; j < v; j++)
			assert(value_char((unsigned char)m->kv[i].value[j]));
		assert(m->kv[i].value >= m->text && m->kv[i].value + v < m->text + CTL_MSG_MAX);
	}
	ssize_t n = ctl_msg_format(m, buf, sizeof(buf));
	assert(n > 0 && (size_t)n == wire_len && memcmp(buf, wire, wire_len) == 0);
	/* The getters must cope with whatever the values are. */
	uint64_t u;
	int x;
	for (int i = 0; i < m->n && i < 8; i++) {
		(void)ctl_get_u64(m, m->kv[i].key, &u);
		(void)ctl_get_int(m, m->kv[i].key, -1000, 1000, &x);
	}
}

static void check_err(const char *err)
{
	unsigned line, col;
	int used = 0;
	assert(sscanf(err, "%u:%u: %n", &line, &col, &used) == 2 && used > 0);
	assert(line >= 1 && line <= CTL_LINES_MAX + 1 && col >= 1 && col <= CTL_MSG_MAX);
	assert(err[used] != 0);
}

/* Parse data cut by the split seed (0: one chunk). */
static void parse(const uint8_t *data, size_t size, uint32_t seed, struct run *r)
{
	struct ctl_parser *p = ctl_parser_new();
	size_t off = 0, msg_start = 0;
	memset(r, 0, sizeof(*r));
	while (off < size && r->rc == 0) {
		size_t chunk = size - off;
		if (seed) {
			seed = seed * 1103515245u + 12345u;
			uint32_t mode = (seed >> 16) % 4;
			chunk = mode == 0 ? 1 : 1 + (seed >> 8) % (mode == 1 ? 16 : 4096);
			if (chunk > size - off)
				chunk = size - off;
		}
		size_t done = 0;
		while (done < chunk) {
			struct ctl_msg *m;
			ssize_t k = ctl_parser_feed(p, (const char *)data + off + done, chunk - done,
						    &m);
			if (k < 0) {
				assert(k == -EINVAL && m == NULL);
				r->rc = (int)k;
				snprintf(r->err, sizeof(r->err), "%s", ctl_parser_error(p));
				check_err(r->err);
				/* Errors stick. */
				assert(ctl_parser_feed(p, "a=b\n\n", 5, &m) == -EINVAL && !m);
				break;
			}
			assert((size_t)k <= chunk - done);
			done += (size_t)k;
			if (m) {
				size_t end = off + done;
				assert(data[end - 1] == '\n');
				check_msg(m, data + msg_start, end - msg_start);
				msg_start = end;
				r->nmsgs++;
				r->consumed = end;
				ctl_msg_free(m);
			} else {
				assert(done == chunk);
			}
		}
		off += chunk;
	}
	ctl_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint32_t seed = (uint32_t)data[0] << 8 | data[1];
	data += 2;
	size -= 2;
	struct run whole, split;
	parse(data, size, 0, &whole);
	parse(data, size, seed | 1, &split);
	/* How the stream was cut must not change what it means. */
	assert(whole.nmsgs == split.nmsgs && whole.rc == split.rc &&
	       whole.consumed == split.consumed && strcmp(whole.err, split.err) == 0);
	return 0;
}
