/* SPDX-License-Identifier: MIT */
/*
 * test_chan.c - the shared-memory data path, in one process: step by step
 * with exact expectations, then a two-thread stress with every byte checked.
 */
#include "sim/core/chan.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim/test/check.h"

struct fix {
	void *base;
	size_t len;
	struct chan_shm *shm;
	struct chan_tx *tx;
	struct chan_rx *rx;
};

static void fix_up(struct fix *f, uint32_t slot, uint32_t nslots)
{
	struct chan_geom g = {.slot_bytes = slot, .nslots = nslots};
	f->len = chan_shm_bytes(&g);
	f->base = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f->base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	f->shm = f->base;
	CHECK(chan_format(f->base, f->len, &g, 7) == 0, "format");
	CHECK(chan_check(f->base, f->len, NULL) == 0, "check");
	CHECK(chan_tx_new(f->shm, f->len, &f->tx) == 0, "tx_new");
	CHECK(chan_rx_new(f->shm, f->len, &f->rx) == 0, "rx_new");
}

static void fix_down(struct fix *f)
{
	chan_tx_free(f->tx);
	chan_rx_free(f->rx);
	munmap(f->base, f->len);
	memset(f, 0, sizeof(*f));
}

static void fill(uint8_t *p, uint64_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (uint64_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* Drive both ends until the send and the receive are done (or a bound is hit). */
static int pump(struct fix *f, chan_req s, chan_req r, uint64_t *ssize, uint64_t *rsizes)
{
	int sdone = 0, rdone = 0;
	for (long i = 0; i < 10000000 && !(sdone && rdone); i++) {
		int rc;
		if (!rdone && (rc = chan_rx_test(f->rx, r, &rdone, rsizes, NULL)))
			return rc;
		if (!sdone && (rc = chan_tx_test(f->tx, s, &sdone, ssize, NULL)))
			return rc;
	}
	return sdone && rdone ? 0 : -ETIMEDOUT;
}

static void test_geometry(void)
{
	struct chan_geom g;
	CHECK(chan_geom_for(2u << 20, 0, &g) == 0 && g.nslots == 32 && g.slot_bytes == 65536,
	      "2 MiB -> 32 x 64 KiB, got %u x %u", g.nslots, g.slot_bytes);
	CHECK(chan_geom_for(3u << 20, 65536, &g) == 0 && g.nslots == 32, "rounds down to 2^k");
	CHECK(chan_geom_for(65536, 65536, &g) == -EINVAL, "one slot is too few");
	struct chan_geom bad = {.slot_bytes = 1000, .nslots = 4};
	CHECK(chan_shm_bytes(&bad) == 0, "slot not a multiple of 64");
	bad = (struct chan_geom){.slot_bytes = 4096, .nslots = 6};
	CHECK(chan_shm_bytes(&bad) == 0, "slots not a power of two");
	g = (struct chan_geom){.slot_bytes = 65536, .nslots = 32};
	size_t n = chan_shm_bytes(&g);
	CHECK(n >= 32u * 65536 && n <= 32u * 65536 + 16384, "size %zu", n);
	CHECK(n % 4096 == 0, "page multiple %zu", n);
}

static void test_check_rejects(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	struct chan_err e = {0};
	CHECK(chan_check(f.base, f.len - 1, &e) == -EPROTO, "short region");
	f.shm->nslots = 5;
	CHECK(chan_check(f.base, f.len, &e) == -EPROTO && strstr(e.what, "geometry"), "%s",
	      e.what);
	f.shm->nslots = 4;
	f.shm->data_off += 64;
	CHECK(chan_check(f.base, f.len, &e) == -EPROTO && strstr(e.what, "offsets"), "%s", e.what);
	f.shm->data_off -= 64;
	f.shm->magic ^= 1;
	CHECK(chan_check(f.base, f.len, &e) == -EPROTO && strstr(e.what, "magic"), "%s", e.what);
	f.shm->magic ^= 1;
	struct chan_tx *tx2;
	CHECK(chan_tx_new(f.shm, f.len, &tx2) == -EPROTO, "a side attaches once");
	fix_down(&f);
}

static void test_sizes(void)
{
	static const uint64_t sizes[] = {0, 1, 3, 63, 64, 4095, 4096, 4097, 65535, 65536, 65537,
					 1048583, 3u << 20};
	struct fix f;
	fix_up(&f, 4096, 8); /* small ring: big messages wrap it many times */
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k];
		uint8_t *src = malloc(n + 1), *dst = malloc(n + 100);
		fill(src, n, (uint32_t)k);
		memset(dst, 0xee, n + 100);
		chan_req s, r;
		void *bufs[1] = {dst};
		uint64_t cap = n + 100, got[1] = {~0ull}, sent = ~0ull;
		CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "rx post %lu",
		      (unsigned long)n);
		CHECK(chan_tx_post(f.tx, src, n, 0, &s, NULL) == 0, "tx post");
		int rc = pump(&f, s, r, &sent, got);
		CHECK(rc == 0, "pump %lu: %d", (unsigned long)n, rc);
		CHECK(sent == n && got[0] == n, "sizes %lu: sent %lu got %lu", (unsigned long)n,
		      (unsigned long)sent, (unsigned long)got[0]);
		CHECK(memcmp(src, dst, n) == 0, "payload %lu", (unsigned long)n);
		CHECK(dst[n] == 0xee, "no write past the message");
		free(src);
		free(dst);
	}
	struct chan_stats st;
	chan_stats(f.shm, &st);
	CHECK(st.tx_msgs == 13 && st.rx_msgs == 13, "msgs %lu %lu", (unsigned long)st.tx_msgs,
	      (unsigned long)st.rx_msgs);
	CHECK(st.tx_bytes == st.rx_bytes && st.inflight_slots == 0, "bytes");
	fix_down(&f);
}

static void test_would_block_and_limits(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t b[8] = {0};
	chan_req s, r;
	struct chan_err e;
	CHECK(chan_tx_post(f.tx, b, 8, 0, &s, &e) == -EAGAIN, "no CTS yet");
	void *bufs[1] = {b};
	uint64_t cap = 8;
	chan_req rq[CHAN_MAX_REQS];
	for (int i = 0; i < CHAN_MAX_REQS; i++)
		CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &rq[i], NULL) == 0, "post %d", i);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, &e) == -EAGAIN, "33rd receive");
	CHECK(chan_rx_inflight(f.rx) == CHAN_MAX_REQS, "inflight");
	chan_req sq[CHAN_MAX_REQS];
	for (int i = 0; i < CHAN_MAX_REQS; i++)
		CHECK(chan_tx_post(f.tx, b, 8, 0, &sq[i], NULL) == 0, "send %d", i);
	for (int i = 0; i < CHAN_MAX_REQS; i++) {
		uint64_t got[1];
		CHECK(pump(&f, sq[i], rq[i], NULL, got) == 0, "complete %d", i);
	}
	CHECK(chan_rx_inflight(f.rx) == 0 && chan_tx_inflight(f.tx) == 0, "drained");
	int done = 7;
	CHECK(chan_rx_test(f.rx, rq[0], &done, NULL, &e) == -EINVAL && done == 0,
	      "a done request is gone");
	fix_down(&f);
}

static void test_grouped_tags(void)
{
	struct fix f;
	fix_up(&f, 4096, 16);
	enum { N = 8 };
	uint8_t *dst[N], *src[N];
	void *bufs[N];
	uint64_t caps[N], got[N];
	int32_t tags[N];
	for (int i = 0; i < N; i++) {
		caps[i] = 1000 + 3000 * (uint64_t)i;
		dst[i] = calloc(1, caps[i]);
		src[i] = malloc(caps[i]);
		fill(src[i], caps[i], 100 + (uint32_t)i);
		bufs[i] = dst[i];
		tags[i] = 40 + i;
	}
	chan_req r, s[N];
	CHECK(chan_rx_post(f.rx, N, bufs, caps, tags, &r, NULL) == 0, "grouped post");
	/* Sends in reverse tag order, each half its buffer's capacity. */
	for (int k = 0; k < N; k++) {
		int i = N - 1 - k;
		CHECK(chan_tx_post(f.tx, src[i], caps[i] / 2, tags[i], &s[k], NULL) == 0,
		      "send tag %d", tags[i]);
	}
	uint8_t x;
	chan_req extra;
	CHECK(chan_tx_post(f.tx, &x, 1, 99, &extra, NULL) == -EAGAIN, "unknown tag blocks");
	int done = 0;
	for (long it = 0; it < 1000000 && !done; it++)
		CHECK(chan_rx_test(f.rx, r, &done, got, NULL) == 0, "rx test");
	CHECK(done, "grouped receive completes");
	for (int i = 0; i < N; i++) {
		CHECK(got[i] == caps[i] / 2, "buffer %d size %lu", i, (unsigned long)got[i]);
		CHECK(memcmp(dst[i], src[i], caps[i] / 2) == 0, "buffer %d data", i);
	}
	for (int k = 0; k < N; k++) {
		int sd = 0;
		CHECK(chan_tx_test(f.tx, s[k], &sd, NULL, NULL) == 0 && sd, "send %d acked", k);
	}
	for (int i = 0; i < N; i++) {
		free(dst[i]);
		free(src[i]);
	}
	fix_down(&f);
}

/* n == 1 receives match by tag too: with maxRecvs > 1 NCCL shares one comm among peers. */
static void test_tags_single(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t x[16], y[16], a[16], b[16];
	memset(a, 0xaa, sizeof(a));
	memset(b, 0xbb, sizeof(b));
	void *bx[1] = {x}, *by[1] = {y};
	uint64_t cap = 16;
	int32_t t10 = 10, t20 = 20;
	chan_req rx1, rx2, s1, s2;
	CHECK(chan_rx_post(f.rx, 1, bx, &cap, &t10, &rx1, NULL) == 0, "post x");
	CHECK(chan_rx_post(f.rx, 1, by, &cap, &t20, &rx2, NULL) == 0, "post y");
	CHECK(chan_tx_post(f.tx, b, 16, 20, &s2, NULL) == -EAGAIN, "tag 20 waits for its receive");
	CHECK(chan_tx_post(f.tx, a, 16, 10, &s1, NULL) == 0, "tag 10 fills the head");
	CHECK(chan_tx_post(f.tx, b, 16, 20, &s2, NULL) == 0, "then tag 20");
	uint64_t got[1];
	CHECK(pump(&f, s1, rx1, NULL, got) == 0 && memcmp(x, a, 16) == 0, "x has tag 10's data");
	CHECK(pump(&f, s2, rx2, NULL, got) == 0 && memcmp(y, b, 16) == 0, "y has tag 20's data");
	fix_down(&f);
}

/* Descriptors a broken or hostile sender could write: each is refused, nothing is written. */
static void test_hostile_descriptors(void)
{
	static const struct {
		const char *what;
		uint64_t offset, total;
		uint32_t len;
		uint16_t flags, buf;
	} cases[] = {
		{"offset wraps", UINT64_MAX - 4095, 4096, 4096, CHAN_F_LAST, 0},
		{"chunk beyond the message", 0, 8, 16, CHAN_F_LAST, 0},
		{"gap before the chunk", 8, 16, 8, CHAN_F_LAST, 0},
		{"last flag before the end", 0, 16, 8, CHAN_F_LAST, 0},
		{"no last flag at the end", 0, 8, 8, 0, 0},
		{"buffer index out of range", 0, 8, 8, CHAN_F_LAST, 3},
		{"message larger than the buffer", 0, 100, 8, 0, 0},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct fix f;
		fix_up(&f, 4096, 4);
		uint8_t guard[64], d[16], g2[64];
		memset(guard, 0x11, sizeof(guard));
		memset(g2, 0x22, sizeof(g2));
		memset(d, 0x33, sizeof(d));
		void *bufs[1] = {d};
		uint64_t cap = 16;
		chan_req r;
		CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
		struct chan_desc *desc = (struct chan_desc *)((uint8_t *)f.shm + f.shm->desc_off);
		desc[0] = (struct chan_desc){.msg = 0, .recv = 0, .offset = cases[k].offset,
					     .total = cases[k].total, .len = cases[k].len,
					     .buf = cases[k].buf, .flags = cases[k].flags};
		atomic_store(&f.shm->tx.head, 1);
		int done = 0;
		CHECK(chan_rx_test(f.rx, r, &done, NULL, NULL) == -EPROTO, "%s: refused",
		      cases[k].what);
		for (size_t i = 0; i < sizeof(guard); i++)
			if (guard[i] != 0x11 || g2[i] != 0x22) {
				CHECK(0, "%s: wrote outside the buffer", cases[k].what);
				break;
			}
		fix_down(&f);
	}
	/* A second LAST for a buffer that is complete: refused, not counted twice. */
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t d0[8], d1[8];
	void *bufs[2] = {d0, d1};
	uint64_t caps[2] = {8, 8};
	int32_t tags[2] = {1, 2};
	chan_req r;
	CHECK(chan_rx_post(f.rx, 2, bufs, caps, tags, &r, NULL) == 0, "post 2");
	struct chan_desc *desc = (struct chan_desc *)((uint8_t *)f.shm + f.shm->desc_off);
	for (int i = 0; i < 2; i++)
		desc[i] = (struct chan_desc){.msg = (uint64_t)i, .recv = 0, .offset = 0, .total = 8,
					     .len = 8, .buf = 0, .flags = CHAN_F_LAST};
	atomic_store(&f.shm->tx.head, 2);
	int done = 0;
	CHECK(chan_rx_test(f.rx, r, &done, NULL, NULL) == -EPROTO && !done, "duplicate last");
	fix_down(&f);

	/* A receiver that ACKs what was never sent. */
	fix_up(&f, 4096, 4);
	uint8_t b[8] = {0};
	void *bb[1] = {d0};
	uint64_t cap = 8;
	chan_req s;
	CHECK(chan_rx_post(f.rx, 1, bb, &cap, NULL, &r, NULL) == 0, "post");
	CHECK(chan_tx_post(f.tx, b, 8, 0, &s, NULL) == 0, "send");
	atomic_store(&f.shm->rx.msgs, 5);
	CHECK(chan_tx_test(f.tx, s, &done, NULL, NULL) == -EPROTO, "false ACK refused");
	fix_down(&f);
}

static void test_truncation(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t a[4096] = {0}, b[1024];
	void *bufs[1] = {b};
	uint64_t cap = sizeof(b);
	chan_req r, s;
	struct chan_err e = {0};
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	CHECK(chan_tx_post(f.tx, a, sizeof(a), 0, &s, &e) == -EMSGSIZE, "sender fails");
	CHECK(e.value[0] == 4096 && e.value[1] == 1024, "both sizes %lu %lu",
	      (unsigned long)e.value[0], (unsigned long)e.value[1]);
	int done = 1;
	memset(&e, 0, sizeof(e));
	CHECK(chan_rx_test(f.rx, r, &done, NULL, &e) == -EMSGSIZE && !done, "receiver fails");
	CHECK(e.value[0] == 4096 && e.value[1] == 1024, "receiver sees both sizes");
	CHECK(chan_tx_post(f.tx, a, 1, 0, &s, NULL) == -EMSGSIZE, "sticky");
	fix_down(&f);
}

static void test_close_and_death(void)
{
	uint8_t b[64] = {1}, d[64];
	void *bufs[1] = {d};
	uint64_t cap = sizeof(d);
	chan_req r, s;
	int done;
	struct fix f;

	/* Data sent before a close is delivered; a receive after it fails. */
	fix_up(&f, 4096, 4);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	CHECK(chan_tx_post(f.tx, b, 64, 0, &s, NULL) == 0, "send");
	chan_tx_free(f.tx);
	f.tx = NULL;
	CHECK(chan_rx_test(f.rx, r, &done, NULL, NULL) == 0 && done, "delivered after close");
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == -ECONNRESET, "closed peer");
	fix_down(&f);

	/* A receive pending when the sender closes fails. */
	fix_up(&f, 4096, 4);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	chan_tx_free(f.tx);
	f.tx = NULL;
	CHECK(chan_rx_test(f.rx, r, &done, NULL, NULL) == -ECONNRESET, "pending recv fails");
	fix_down(&f);

	/* A send pending when the receiver closes fails. */
	fix_up(&f, 4096, 4);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	CHECK(chan_tx_post(f.tx, b, 64, 0, &s, NULL) == 0, "send");
	chan_rx_free(f.rx);
	f.rx = NULL;
	CHECK(chan_tx_test(f.tx, s, &done, NULL, NULL) == -ECONNRESET, "pending send fails");
	fix_down(&f);

	/* The daemon's flags: a dead receiver, a dead sender, a daemon gone. */
	fix_up(&f, 4096, 4);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	CHECK(chan_tx_post(f.tx, b, 64, 0, &s, NULL) == 0, "send");
	chan_mark_dead(f.shm, 'r');
	/* The receiver could still ACK in principle, but its process is declared gone. */
	CHECK(chan_tx_test(f.tx, s, &done, NULL, NULL) == -ECONNRESET, "dead receiver");
	fix_down(&f);

	fix_up(&f, 4096, 4);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	chan_req r2;
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r2, NULL) == 0, "post 2");
	CHECK(chan_tx_post(f.tx, b, 64, 0, &s, NULL) == 0, "send");
	chan_mark_dead(f.shm, 't');
	CHECK(chan_rx_test(f.rx, r, &done, NULL, NULL) == 0 && done,
	      "published before death is delivered");
	CHECK(chan_rx_test(f.rx, r2, &done, NULL, NULL) == -ECONNRESET, "then the death shows");
	fix_down(&f);

	fix_up(&f, 4096, 4);
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	chan_mark_dead(f.shm, 'd');
	CHECK(chan_rx_test(f.rx, r, &done, NULL, NULL) == -ESHUTDOWN, "daemon gone");
	CHECK(chan_tx_post(f.tx, b, 1, 0, &s, NULL) == -ESHUTDOWN, "daemon gone (tx)");
	fix_down(&f);
}

static void test_abandon(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t b[8] = {0};
	chan_req s;
	atomic_store(&f.shm->rx.state, CHAN_ST_INIT); /* as if the receiver never attached */
	chan_abandon(f.shm, 'r', ENOMEM);
	struct chan_err e = {0};
	CHECK(chan_tx_post(f.tx, b, 8, 0, &s, &e) == -ECONNRESET && e.value[0] == ENOMEM,
	      "an abandoned peer fails the sender");
	fix_down(&f);
}

static void test_corrupt_descriptor(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t b[64] = {0}, d[64];
	void *bufs[1] = {d};
	uint64_t cap = sizeof(d);
	chan_req r, s;
	CHECK(chan_rx_post(f.rx, 1, bufs, &cap, NULL, &r, NULL) == 0, "post");
	/* Post a send but corrupt its descriptor before the receiver looks. */
	CHECK(chan_tx_post(f.tx, b, 64, 0, &s, NULL) == 0, "send");
	struct chan_desc *desc = (struct chan_desc *)((uint8_t *)f.shm + f.shm->desc_off);
	desc[0].offset = 1u << 30;
	int done;
	struct chan_err e = {0};
	CHECK(chan_rx_test(f.rx, r, &done, NULL, &e) == -EPROTO, "corrupt descriptor: %s",
	      e.what ? e.what : "");
	fix_down(&f);
}

/* Two threads, random sizes and tags, every byte checked. */
enum { STRESS_MSGS = 3000 };
struct stress {
	struct fix f;
	uint64_t sizes[STRESS_MSGS];
	int bad;
};

static void *stress_tx(void *arg)
{
	struct stress *st = arg;
	uint8_t *buf = malloc(1 << 20);
	chan_req q[8];
	int nq = 0;
	for (int m = 0; m < STRESS_MSGS;) {
		if (nq < 8) {
			fill(buf + (m % 8) * 131072, st->sizes[m], (uint32_t)m);
			int rc = chan_tx_post(st->f.tx, buf + (m % 8) * 131072, st->sizes[m], 0,
					      &q[nq], NULL);
			if (rc == 0) {
				nq++;
				m++;
				continue;
			}
			if (rc != -EAGAIN) {
				st->bad++;
				break;
			}
		}
		int done = 0;
		if (nq && chan_tx_test(st->f.tx, q[0], &done, NULL, NULL) != 0) {
			st->bad++;
			break;
		}
		if (done) {
			memmove(q, q + 1, sizeof(q[0]) * (size_t)--nq);
		}
	}
	while (nq) {
		int done = 0;
		if (chan_tx_test(st->f.tx, q[0], &done, NULL, NULL) != 0) {
			st->bad++;
			break;
		}
		if (done)
			memmove(q, q + 1, sizeof(q[0]) * (size_t)--nq);
	}
	free(buf);
	return NULL;
}

/*
 * RC completes in order: a message the receiver had taken before the connection failed is a
 * success at both ends, tested before or after the failure; only what came after fails.
 */
static void test_delivered_before_failure(void)
{
	struct fix f;
	fix_up(&f, 4096, 4);
	uint8_t a[16] = {1, 2, 3}, big[32] = {0}, d1[64], d2[8];
	void *b1[1] = {d1}, *b2[1] = {d2};
	uint64_t c1 = sizeof(d1), c2 = sizeof(d2), got = 0, sent = 0;
	chan_req r1, r2, s1, s2;
	struct chan_err e;
	CHECK(chan_rx_post(f.rx, 1, b1, &c1, NULL, &r1, NULL) == 0, "post r1");
	CHECK(chan_rx_post(f.rx, 1, b2, &c2, NULL, &r2, NULL) == 0, "post r2");
	CHECK(chan_tx_post(f.tx, a, sizeof(a), 0, &s1, NULL) == 0, "send s1");
	CHECK(chan_rx_progress(f.rx, NULL) == 0, "the receiver takes s1 (no test yet)");
	/* s2 is larger than r2: the channel fails at both ends */
	CHECK(chan_tx_post(f.tx, big, sizeof(big), 0, &s2, &e) == -EMSGSIZE, "s2 fails");
	int done = 0;
	CHECK(chan_tx_test(f.tx, s1, &done, &sent, &e) == 0 && done && sent == sizeof(a),
	      "s1 was acknowledged before: done (%d, %s)", done, e.what ? e.what : "");
	done = 0;
	int rc = chan_rx_test(f.rx, r1, &done, &got, &e);
	CHECK(rc == 0 && done && got == sizeof(a) && memcmp(d1, a, sizeof(a)) == 0,
	      "r1 arrived before: done with its bytes (%d %d)", rc, done);
	done = 0;
	CHECK(chan_rx_test(f.rx, r2, &done, &got, &e) == -EMSGSIZE && !done, "r2 fails");
	fix_down(&f);
}

static void test_stress(void)
{
	static struct stress st;
	memset(&st, 0, sizeof(st));
	uint32_t x = 12345;
	for (int m = 0; m < STRESS_MSGS; m++) {
		x = x * 1103515245 + 12345;
		st.sizes[m] = (x >> 8) % 131072;
		if (m % 17 == 0)
			st.sizes[m] = 0;
	}
	fix_up(&st.f, 4096, 8);
	pthread_t t;
	pthread_create(&t, NULL, stress_tx, &st);
	uint8_t *dst = malloc(4 * 131072), *ref = malloc(131072);
	chan_req q[4];
	int posted = 0, done_n = 0, nq = 0;
	while (done_n < STRESS_MSGS && !st.bad) {
		if (nq < 4 && posted < STRESS_MSGS) {
			void *bufs[1] = {dst + (posted % 4) * 131072};
			uint64_t cap = 131072;
			if (chan_rx_post(st.f.rx, 1, bufs, &cap, NULL, &q[nq], NULL) == 0) {
				nq++;
				posted++;
			}
		}
		int done = 0;
		uint64_t got = 0;
		if (chan_rx_test(st.f.rx, q[0], &done, &got, NULL) != 0) {
			st.bad++;
			break;
		}
		if (done) {
			uint64_t n = st.sizes[done_n];
			fill(ref, n, (uint32_t)done_n);
			if (got != n || memcmp(ref, dst + (done_n % 4) * 131072, n)) {
				fprintf(stderr, "stress: message %d (size %lu) differs\n", done_n,
					(unsigned long)n);
				st.bad++;
			}
			done_n++;
			memmove(q, q + 1, sizeof(q[0]) * (size_t)--nq);
		}
	}
	pthread_join(t, NULL);
	CHECK(!st.bad && done_n == STRESS_MSGS, "stress: %d bad, %d of %d", st.bad, done_n,
	      STRESS_MSGS);
	free(dst);
	free(ref);
	fix_down(&st.f);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_geometry),
	CHECK_CASE(test_check_rejects),
	CHECK_CASE(test_sizes),
	CHECK_CASE(test_would_block_and_limits),
	CHECK_CASE(test_grouped_tags),
	CHECK_CASE(test_tags_single),
	CHECK_CASE(test_hostile_descriptors),
	CHECK_CASE(test_truncation),
	CHECK_CASE(test_close_and_death),
	CHECK_CASE(test_corrupt_descriptor),
	CHECK_CASE(test_abandon),
	CHECK_CASE(test_delivered_before_failure),
	CHECK_CASE(test_stress),
};

CHECK_MAIN(cases)
