/* SPDX-License-Identifier: MIT */
/*
 * test_xchan.c - the cross-host channel's protocol (sim/core/xchan.c) over the in-memory
 * transport (xnet_fake.h): exact data at every size, NCCL's matching rules, grouped receives,
 * delivery in any order, a transport that pushes back, the model's gates (never early), a
 * message the model fails, size errors at both ends, closes and a peer that is gone; and the
 * payloads that go as writes into the receiver's buffers (xnet.h), one at a time so that a
 * header that overtook its payload would show.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/core/xchan.h"
#include "sim/test/check.h"
#include "sim/test/xnet_fake.h"

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A pair: endpoint 0 sends, endpoint 1 receives, over one world. */
struct pair {
	struct xf_world w;
	struct xf_ep e[2];
	struct xchan_tx *tx;
	struct xchan_rx *rx;
};

/* write_min: the sender's (xchan_cfg); nonzero also gives the transport writes. */
static struct pair *pair_new_w(uint64_t shuffle, int eagain_every, const struct xchan_model *m,
			       void *mctx, uint64_t write_min)
{
	struct pair *p = calloc(1, sizeof(*p));
	p->w.rng = shuffle;
	p->w.eagain_every = eagain_every;
	xf_ep_init(&p->e[0], &p->w, 0);
	xf_ep_init(&p->e[1], &p->w, 1);
	if (write_min) {
		p->w.trickle = 1;
		xf_ep_writes(&p->e[0]);
		xf_ep_writes(&p->e[1]);
	}
	struct xchan_cfg ct = {.net = &p->e[0].net,
			       .peer = 1,
			       .conn = 7,
			       .model = m,
			       .model_ctx = mctx,
			       .write_min = write_min};
	struct xchan_cfg cr = ct;
	cr.net = &p->e[1].net;
	cr.peer = 0;
	CHECK(xchan_tx_new(&ct, &p->tx) == 0, "tx_new");
	CHECK(xchan_rx_new(&cr, &p->rx) == 0, "rx_new");
	return p;
}

static struct pair *pair_new(uint64_t shuffle, int eagain_every, const struct xchan_model *m,
			     void *mctx)
{
	return pair_new_w(shuffle, eagain_every, m, mctx, 0);
}

static void pair_free(struct pair *p)
{
	xchan_tx_free(p->tx);
	xchan_rx_free(p->rx);
	xf_world_free(&p->w);
	free(p);
}

static void fill(uint8_t *b, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 9));
}

/* Post a send until it is taken (progressing the receiver in between). */
static int send_post(struct pair *p, const void *d, uint64_t n, int32_t tag, chan_req *q)
{
	struct chan_err e;
	for (int i = 0; i < 100000; i++) {
		int rc = xchan_tx_post(p->tx, d, n, tag, q, &e);
		if (rc != -EAGAIN)
			return rc;
		xchan_rx_progress(p->rx, NULL);
	}
	return -ETIME;
}

static int send_wait(struct pair *p, chan_req q, uint64_t *size, struct chan_err *e)
{
	for (int i = 0; i < 1000000; i++) {
		int done = 0;
		int rc = xchan_tx_test(p->tx, q, &done, size, e);
		if (rc || done)
			return rc;
		xchan_rx_progress(p->rx, NULL);
	}
	return -ETIME;
}

static int recv_wait(struct pair *p, chan_req q, uint64_t *sizes, struct chan_err *e)
{
	for (int i = 0; i < 1000000; i++) {
		int done = 0;
		int rc = xchan_rx_test(p->rx, q, &done, sizes, e);
		if (rc || done)
			return rc;
		xchan_tx_progress(p->tx, NULL);
	}
	return -ETIME;
}

static void exact_sizes_over(uint64_t shuffle, int eagain)
{
	static const uint64_t sizes[] = {0, 1, 7, 4095, 65536, 65537, 1 << 20, 3 << 20};
	struct pair *p = pair_new(shuffle, eagain, NULL, NULL);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k];
		uint8_t *s = malloc(n + 1), *d = calloc(1, n + 64);
		fill(s, n, (uint32_t)k);
		void *bufs[1] = {d};
		uint64_t cap[1] = {n + 64}, got[1] = {~0ull};
		int32_t tags[1] = {5};
		chan_req rq, sq;
		CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post %zu", k);
		CHECK(send_post(p, s, n, 5, &sq) == 0, "tx post %llu B", (unsigned long long)n);
		uint64_t sent = 0;
		CHECK(send_wait(p, sq, &sent, NULL) == 0 && sent == n, "send %llu B done: %llu",
		      (unsigned long long)n, (unsigned long long)sent);
		CHECK(recv_wait(p, rq, got, NULL) == 0 && got[0] == n, "recv %llu B: got %llu",
		      (unsigned long long)n, (unsigned long long)got[0]);
		CHECK(!n || memcmp(s, d, n) == 0, "data of %llu B exact", (unsigned long long)n);
		free(s);
		free(d);
	}
	CHECK(xchan_tx_inflight(p->tx) == 0 && xchan_rx_inflight(p->rx) == 0, "nothing in flight");
	pair_free(p);
}

static void test_exact_at_every_size(void)
{
	exact_sizes_over(0, 0);
	exact_sizes_over(0x1234, 0); /* different tags delivered in any order */
	exact_sizes_over(0x9876, 3); /* and every third send refused at first */
}

/*
 * A window of receives and sends in flight, grouped receives of 8 buffers whose sends come
 * in a shuffled tag order, the transport shuffling and pushing back: every byte lands in the
 * buffer its tag names, and the counts come out right.
 */
static void test_grouped_receives_and_many_in_flight(void)
{
	struct pair *p = pair_new(0xfeed, 5, NULL, NULL);
	enum { R = 40, N = CHAN_MAX_RECVS, SZ = 3000 };
	static uint8_t src[R][N][SZ], dst[R][N][SZ + 8];
	chan_req rq[R], sq[R][N];
	int posted = 0, recv_done = 0, order[N];
	for (int r = 0; r < R; r++) {
		for (int b = 0; b < N; b++)
			fill(src[r][b], SZ - (uint64_t)b, (uint32_t)(r * N + b));
		/* keep at most CHAN_MAX_REQS receives posted */
		while (posted < R && posted - recv_done < CHAN_MAX_REQS) {
			void *bufs[N];
			uint64_t cap[N];
			int32_t tags[N];
			for (int b = 0; b < N; b++) {
				bufs[b] = dst[posted][b];
				cap[b] = SZ + 8;
				tags[b] = 100 + b;
			}
			CHECK(xchan_rx_post(p->rx, N, bufs, cap, tags, &rq[posted], NULL) == 0,
			      "rx post %d", posted);
			posted++;
		}
		for (int b = 0; b < N; b++)
			order[b] = (b * 5 + r) % N;
		for (int b = 0; b < N; b++) {
			int t = order[b];
			CHECK(send_post(p, src[r][t], SZ - (uint64_t)t, 100 + t, &sq[r][t]) == 0,
			      "send %d.%d", r, t);
		}
		for (int b = 0; b < N; b++) {
			uint64_t n = 0;
			CHECK(send_wait(p, sq[r][b], &n, NULL) == 0 && n == SZ - (uint64_t)b,
			      "send %d.%d done", r, b);
		}
		uint64_t got[N];
		CHECK(recv_wait(p, rq[r], got, NULL) == 0, "recv %d", r);
		recv_done++;
		for (int b = 0; b < N; b++)
			CHECK(got[b] == SZ - (uint64_t)b && !memcmp(dst[r][b], src[r][b], got[b]),
			      "recv %d buffer %d: %llu B, exact", r, b, (unsigned long long)got[b]);
	}
	pair_free(p);
}

/* NCCL's rule: a send fills the head receive only; a tag found only further down waits. */
static void test_a_send_fills_the_head_receive_only(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	uint8_t a[8] = {1}, b[8] = {2}, d0[8], d1[8];
	void *b0[1] = {d0}, *b1[1] = {d1};
	uint64_t cap[1] = {8};
	int32_t t0[1] = {1}, t1[1] = {2};
	chan_req r0, r1, s0, s1;
	struct chan_err e;
	CHECK(xchan_rx_post(p->rx, 1, b0, cap, t0, &r0, NULL) == 0, "post 0");
	CHECK(xchan_rx_post(p->rx, 1, b1, cap, t1, &r1, NULL) == 0, "post 1");
	xchan_rx_progress(p->rx, NULL);
	int rc = xchan_tx_post(p->tx, b, 8, 2, &s1, &e);
	CHECK(rc == -EAGAIN && e.value[0] == 2, "tag 2 is not in the head receive: %d %s", rc,
	      e.what);
	CHECK(xchan_tx_post(p->tx, a, 8, 1, &s0, NULL) == 0, "tag 1 fills the head");
	CHECK(xchan_tx_post(p->tx, b, 8, 2, &s1, NULL) == 0, "then tag 2 fills the next");
	uint64_t g[1];
	CHECK(recv_wait(p, r1, g, NULL) == 0 && d1[0] == 2, "receive 1 got tag 2's data");
	CHECK(recv_wait(p, r0, g, NULL) == 0 && d0[0] == 1, "receive 0 got tag 1's data");
	CHECK(send_wait(p, s0, NULL, NULL) == 0 && send_wait(p, s1, NULL, NULL) == 0, "sends");
	pair_free(p);
}

/* A send completes on the receiver's ACK, which goes out when the receiver's process merely
 * progresses (the receive agent): it never waits for the application's test(). */
static void test_a_send_completes_without_the_receivers_test(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	uint8_t s[100], d[100];
	fill(s, sizeof(s), 3);
	void *bufs[1] = {d};
	uint64_t cap[1] = {100};
	int32_t tags[1] = {0};
	chan_req rq, sq;
	CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
	CHECK(send_post(p, s, 100, 0, &sq) == 0, "tx post");
	int done = 0;
	for (int i = 0; i < 10 && !done; i++) {
		CHECK(xchan_tx_test(p->tx, sq, &done, NULL, NULL) == 0, "tx test");
		xchan_rx_progress(p->rx, NULL); /* never xchan_rx_test */
	}
	CHECK(done, "the send completed while the receiver only progressed");
	uint64_t g[1];
	CHECK(recv_wait(p, rq, g, NULL) == 0 && !memcmp(s, d, 100), "then the receive, exact");
	pair_free(p);
}

static void test_a_send_larger_than_the_receive_fails_both_ends(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	uint8_t s[64], d[32];
	void *bufs[1] = {d};
	uint64_t cap[1] = {32};
	int32_t tags[1] = {9};
	chan_req rq, sq;
	struct chan_err e = {0}, f = {0};
	CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
	xchan_rx_progress(p->rx, NULL);
	int rc = xchan_tx_post(p->tx, s, 64, 9, &sq, &e);
	CHECK(rc == -EMSGSIZE && e.value[0] == 64 && e.value[1] == 32, "sender: %d %llu %llu", rc,
	      (unsigned long long)e.value[0], (unsigned long long)e.value[1]);
	rc = recv_wait(p, rq, NULL, &f);
	CHECK(rc == -EMSGSIZE && f.value[0] == 64 && f.value[1] == 32, "receiver: %d %llu %llu", rc,
	      (unsigned long long)f.value[0], (unsigned long long)f.value[1]);
	CHECK(xchan_tx_post(p->tx, s, 1, 9, &sq, NULL) == -EMSGSIZE, "the sender stays failed");
	pair_free(p);
}

/* ---- the model's gates ------------------------------------------------------------------- */

struct fake_model {
	int64_t lat_ns, ack_ns; /* delivery post + lat; send completion delivery + ack */
	int fail_every;		/* the model fails every k-th message (0: none) */
	int posts, arrives, acks, delivers;
	uint64_t seen; /* 1 << msg of each message arrive was told of */
	int64_t last_ready, last_done;
};

static int fm_post(void *ctx, int64_t now, uint64_t bytes, struct xchan_stamp *s)
{
	struct fake_model *m = ctx;
	m->posts++;
	s->t[0] = now + m->lat_ns;
	s->hop = 1;
	if (m->fail_every && m->posts % m->fail_every == 0) {
		s->flags |= XCHAN_S_FAIL;
		s->fault = 4; /* fault 3 */
		s->link = 11;
		s->delay_ns = 777;
	}
	return 0;
}

static int fm_arrive(void *ctx, int64_t now, uint64_t msg, uint64_t bytes,
		     const struct xchan_stamp *s, int64_t *ready, struct xchan_stamp *ack)
{
	struct fake_model *m = ctx;
	m->arrives++;
	if (msg < 64)
		m->seen |= 1ull << msg;
	CHECK(s->hop == 1, "the stamp travelled: hop %u", s->hop);
	*ready = m->last_ready = s->t[0];
	ack->t[1] = s->t[0] + m->ack_ns;
	return 0;
}

static int fm_acked(void *ctx, const struct xchan_stamp *ack, int64_t *done)
{
	struct fake_model *m = ctx;
	m->acks++;
	*done = m->last_done = ack->t[1];
	return 0;
}

static void fm_deliver(void *ctx, uint64_t msg, void *buf, uint64_t len)
{
	struct fake_model *m = ctx;
	(void)msg;
	CHECK(buf && len > 0, "deliver: the message's bytes: %llu", (unsigned long long)len);
	m->delivers++;
}

static const struct xchan_model fake_model = {fm_post, fm_arrive, fm_acked, fm_deliver};

static void test_nothing_completes_before_the_models_time(void)
{
	struct fake_model m = {.lat_ns = 3000000, .ack_ns = 2000000};
	struct pair *p = pair_new(0x77, 0, &fake_model, &m);
	for (int k = 0; k < 5; k++) {
		uint8_t s[256], d[256];
		fill(s, sizeof(s), (uint32_t)k);
		void *bufs[1] = {d};
		uint64_t cap[1] = {256}, g[1];
		int32_t tags[1] = {1};
		chan_req rq, sq;
		CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
		int64_t t0 = mono_ns();
		CHECK(send_post(p, s, 256, 1, &sq) == 0, "tx post");
		CHECK(recv_wait(p, rq, g, NULL) == 0 && !memcmp(s, d, 256), "recv %d exact", k);
		int64_t t1 = mono_ns();
		CHECK(t1 >= m.last_ready && m.last_ready >= t0 + m.lat_ns,
		      "receive %d completed %lld ns before the model's time", k,
		      (long long)(m.last_ready - t1));
		CHECK(send_wait(p, sq, NULL, NULL) == 0, "send %d", k);
		int64_t t2 = mono_ns();
		CHECK(t2 >= m.last_done, "send %d completed %lld ns before the model's time", k,
		      (long long)(m.last_done - t2));
	}
	CHECK(m.posts == 5 && m.arrives == 5 && m.acks == 5,
	      "the model was asked once per hop: "
	      "%d %d %d",
	      m.posts, m.arrives, m.acks);
	CHECK(m.seen == 0x1f, "arrive was told messages 0..4: %#llx", (unsigned long long)m.seen);
	CHECK(m.delivers == 5, "deliver once per message: %d", m.delivers);
	pair_free(p);
}

static void test_a_message_the_model_fails_fails_both_ends_with_its_fault(void)
{
	struct fake_model m = {.lat_ns = 1000, .ack_ns = 1000, .fail_every = 2};
	struct pair *p = pair_new(0, 0, &fake_model, &m);
	uint8_t s[64] = {0}, d[64];
	void *bufs[1] = {d};
	uint64_t cap[1] = {64};
	int32_t tags[1] = {1};
	chan_req rq, sq;
	struct chan_err e = {0}, f = {0};
	for (int k = 0; k < 2; k++) {
		CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
		CHECK(send_post(p, s, 64, 1, &sq) == 0, "tx post");
		int rr = recv_wait(p, rq, NULL, &f), sr = send_wait(p, sq, NULL, &e);
		if (k == 0) {
			CHECK(rr == 0 && sr == 0, "message 0 passes: %d %d", rr, sr);
			continue;
		}
		CHECK(rr == -ETIMEDOUT && f.fault == 4 && f.value[0] == 11 && f.delay_ns == 777,
		      "receiver: %d fault %u link %llu", rr, f.fault,
		      (unsigned long long)f.value[0]);
		CHECK(sr == -ETIMEDOUT && e.fault == 4 && e.value[0] == 11 && e.msg == 1,
		      "sender: %d fault %u msg %llu", sr, e.fault, (unsigned long long)e.msg);
	}
	pair_free(p);
}

/* ---- closes and a peer that is gone -------------------------------------------------------- */

static void test_the_sender_closing_fails_only_what_cannot_come(void)
{
	struct pair *p = pair_new(0x55, 0, NULL, NULL);
	uint8_t s[32] = {7}, d0[32], d1[32];
	void *b0[1] = {d0}, *b1[1] = {d1};
	uint64_t cap[1] = {32}, g[1];
	int32_t tags[1] = {1};
	chan_req r0, r1, sq;
	struct chan_err e;
	CHECK(xchan_rx_post(p->rx, 1, b0, cap, tags, &r0, NULL) == 0, "post 0");
	CHECK(xchan_rx_post(p->rx, 1, b1, cap, tags, &r1, NULL) == 0, "post 1");
	CHECK(send_post(p, s, 32, 1, &sq) == 0, "send into receive 0");
	CHECK(send_wait(p, sq, NULL, NULL) == 0, "sent");
	xchan_tx_free(p->tx); /* its CLOSE may overtake nothing: it counts the one message */
	p->tx = NULL;
	CHECK(recv_wait(p, r0, g, NULL) == 0 && g[0] == 32 && d0[0] == 7,
	      "the message sent before the close completes");
	int rc = xchan_rx_test(p->rx, r1, &(int){0}, g, &e);
	for (int i = 0; i < 100 && rc == 0; i++)
		rc = xchan_rx_test(p->rx, r1, &(int){0}, g, &e);
	CHECK(rc == -ECONNRESET, "the receive no send can fill fails: %d", rc);
	pair_free(p);
}

static void test_the_receiver_closing_fails_the_sender(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	xchan_rx_free(p->rx);
	p->rx = NULL;
	uint8_t s[8];
	chan_req q;
	struct chan_err e;
	int rc = -EAGAIN;
	for (int i = 0; i < 10 && rc == -EAGAIN; i++)
		rc = xchan_tx_post(p->tx, s, 8, 0, &q, &e);
	CHECK(rc == -ECONNRESET, "a post after the receiver closed: %d (%s)", rc, e.what);
	pair_free(p);
}

/* A send already matched to a receive when the receiver closed fails; one acked before the
 * close completes. */
static void test_a_send_in_flight_when_the_receiver_closes_fails(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	uint8_t s[8] = {1}, d0[8], d1[8];
	uint64_t cap[1] = {8};
	int32_t tags[1] = {0};
	chan_req r0, r1, s0, s1;
	struct chan_err e;
	CHECK(xchan_rx_post(p->rx, 1, (void *[]){d0}, cap, tags, &r0, NULL) == 0, "post 0");
	CHECK(xchan_rx_post(p->rx, 1, (void *[]){d1}, cap, tags, &r1, NULL) == 0, "post 1");
	CHECK(send_post(p, s, 8, 0, &s0) == 0, "send 0");
	CHECK(recv_wait(p, r0, NULL, NULL) == 0, "receive 0 (its ACK is out)");
	xchan_tx_progress(p->tx, NULL); /* CTS 1 is in the sender's hands */
	xchan_rx_free(p->rx);
	p->rx = NULL;
	CHECK(xchan_tx_post(p->tx, s, 8, 0, &s1, NULL) == 0, "send 1 matched before the CLOSE");
	CHECK(send_wait(p, s0, NULL, NULL) == 0, "send 0 was acked: it completes");
	CHECK(send_wait(p, s1, NULL, &e) == -ECONNRESET, "send 1 fails: %d", e.code);
	pair_free(p);
}

static void test_a_peer_that_is_gone_fails_both_ends(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	uint8_t d[8];
	void *bufs[1] = {d};
	uint64_t cap[1] = {8};
	int32_t tags[1] = {0};
	chan_req rq, sq;
	CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
	p->w.dead[0] = 1; /* the sender's process */
	struct chan_err e;
	CHECK(recv_wait(p, rq, NULL, &e) == -ECONNRESET, "receiver: %d", e.code);
	p->w.dead[0] = 0;
	p->w.dead[1] = 1;
	int rc = xchan_tx_post(p->tx, d, 8, 0, &sq, &e);
	for (int i = 0; i < 10 && rc == -EAGAIN; i++)
		rc = xchan_tx_post(p->tx, d, 8, 0, &sq, &e);
	CHECK(rc == -ECONNRESET, "sender: %d", rc);
	pair_free(p);
	/* a death the transport never reports: the daemon's word fails what waits */
	p = pair_new(0, 0, NULL, NULL);
	CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
	xchan_rx_peer_gone(p->rx);
	CHECK(xchan_rx_test(p->rx, rq, &(int){0}, NULL, &e) == -ECONNRESET &&
		      strstr(e.what, "process is gone"),
	      "receiver after the daemon's word: %d", e.code);
	xchan_tx_peer_gone(p->tx);
	CHECK(xchan_tx_post(p->tx, d, 8, 0, &sq, &e) == -ECONNRESET, "sender after it: %d", e.code);
	pair_free(p);
}

/* ---- review: cases the suite misses ---------------------------------------------------------- */

/* The receiver's hops (its downlink) fail the message: arrive sets XCHAN_S_FAIL in the ACK's
 * stamp. xchan.h: "A message the model fails ... fails both ends at the model's time". */
static int fm_arrive_fails(void *ctx, int64_t now, uint64_t msg, uint64_t bytes,
			   const struct xchan_stamp *s, int64_t *ready, struct xchan_stamp *ack)
{
	(void)ctx;
	(void)now;
	(void)msg;
	(void)bytes;
	*ready = s->t[0];
	ack->t[1] = s->t[0];
	ack->flags |= XCHAN_S_FAIL;
	ack->fault = 9;
	ack->link = 21;
	ack->delay_ns = 555;
	return 0;
}

static const struct xchan_model rx_hop_fail_model = {fm_post, fm_arrive_fails, fm_acked, NULL};

static void test_a_message_the_receivers_hops_fail_fails_the_receiver_too(void)
{
	struct fake_model m = {.lat_ns = 1000, .ack_ns = 1000};
	struct pair *p = pair_new(0, 0, &rx_hop_fail_model, &m);
	uint8_t s[64] = {1}, d[64];
	void *bufs[1] = {d};
	uint64_t cap[1] = {64};
	int32_t tags[1] = {1};
	chan_req rq, sq;
	struct chan_err e = {0}, f = {0};
	CHECK(xchan_rx_post(p->rx, 1, bufs, cap, tags, &rq, NULL) == 0, "rx post");
	CHECK(send_post(p, s, 64, 1, &sq) == 0, "tx post");
	int rr = recv_wait(p, rq, NULL, &f), sr = send_wait(p, sq, NULL, &e);
	CHECK(sr == -ETIMEDOUT && e.fault == 9, "sender: %d fault %u", sr, e.fault);
	CHECK(rr == -ETIMEDOUT && f.fault == 9 && f.value[0] == 21,
	      "receiver of a message its own hops failed: %d (0 = delivered as good data) "
	      "fault %u",
	      rr, f.fault);
	pair_free(p);
}

/* A transport that can never hand the PING over (always -EAGAIN: no connection to the peer's
 * host can be made). xchan.h: "cannot hand it over for XCHAN_PING_DEAD_MS ... the endpoint
 * fails with -ECONNRESET". */
static const struct xnet *ping_inner;
static int ping_eagain_send(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov,
			    int niov, struct xnet_op *op)
{
	if (tag >> 60 == XCHAN_CTL)
		return -EAGAIN;
	return ping_inner->send(ctx, peer, tag, iov, niov, op);
}

static void test_a_ping_the_transport_never_takes_fails_the_endpoint(void)
{
	struct pair *p = pair_new(0, 0, NULL, NULL);
	ping_inner = &p->e[0].net;
	struct xnet wrapped = p->e[0].net;
	wrapped.send = ping_eagain_send;
	struct xchan_cfg ct = {.net = &wrapped, .peer = 1, .conn = 8, .ping_dead_ms = 300};
	struct xchan_tx *tx = NULL;
	CHECK(xchan_tx_new(&ct, &tx) == 0, "tx_new");
	struct chan_err e = {0};
	int rc = 0;
	int64_t t0 = mono_ns(), until = t0 + (int64_t)(300 + 700) * 1000000;
	while (!rc && mono_ns() < until) {
		rc = xchan_tx_ping(tx, &e);
		struct timespec ts = {0, 50 * 1000000};
		nanosleep(&ts, NULL);
	}
	CHECK(rc == -ECONNRESET, "a PING refused for %d ms: %d (0 = never noticed)", 300 + 700, rc);
	CHECK(mono_ns() - t0 >= 300 * 1000000LL, "not before its 300 ms: after %lld ns",
	      (long long)(mono_ns() - t0));
	/* free without the CLOSE getting out: bounded, nothing to drain */
	xchan_tx_free(tx);
	pair_free(p);
}

/* The sender fails on its own (here the model refuses to reserve the route; likewise a
 * transport that refuses a send, or a corrupt CTS): xchan_tx_free sends no CLOSE ("a failed
 * peer fails and closes too"), but the receiver knows nothing of it, and its process is alive
 * (a PING still gets through): its posted receive waits for ever. */
static int fm_post_refuses(void *ctx, int64_t now, uint64_t bytes, struct xchan_stamp *s)
{
	(void)ctx;
	(void)now;
	(void)bytes;
	(void)s;
	return -EIO;
}

static const struct xchan_model refusing_model = {fm_post_refuses, fm_arrive, fm_acked, NULL};

static void test_a_sender_that_fails_alone_still_releases_the_receiver(void)
{
	struct fake_model m = {0};
	struct pair *p = pair_new(0, 0, &refusing_model, &m);
	uint8_t s[16] = {0}, d[16];
	uint64_t cap[1] = {16};
	int32_t tags[1] = {1};
	chan_req rq, sq;
	struct chan_err e = {0};
	CHECK(xchan_rx_post(p->rx, 1, (void *[]){d}, cap, tags, &rq, NULL) == 0, "rx post");
	CHECK(send_post(p, s, 16, 1, &sq) == -EIO, "the sender fails on its own");
	xchan_tx_free(p->tx);
	p->tx = NULL;
	int rc = 0, done = 0;
	for (int i = 0; i < 10000 && !rc && !done; i++) {
		rc = xchan_rx_test(p->rx, rq, &done, NULL, &e);
		if (!rc && !done && i % 100 == 0)
			rc = xchan_rx_ping(p->rx, &e);
	}
	CHECK(rc == -ECONNRESET,
	      "the receiver after its sender failed and closed: %d (0 = waits "
	      "for ever)",
	      rc);
	pair_free(p);
}

/* ---- payloads as writes -------------------------------------------------------------------- */

/*
 * Every size, one receive buffer at a time at an offset inside one registration (so the
 * address the CTS names is the registration's plus the offset), the transport delivering one
 * message or write per progress, shuffled, pushing back: exact, and the payloads of at least
 * write_min bytes went as writes, the rest as messages. With a model: never early.
 */
static void writes_exact_over(uint64_t shuffle, int eagain, uint64_t write_min, int model, int late)
{
	static const uint64_t sizes[] = {0, 1, 7, 4095, 4096, 65537, 1 << 20, 3 << 20};
	struct fake_model m = {.lat_ns = 200000, .ack_ns = 100000};
	struct pair *p = pair_new_w(shuffle, eagain, model ? &fake_model : NULL, &m, write_min);
	p->w.late_writes = late;
	const uint64_t off = 4096 + 24, arena = off + (3 << 20) + 64;
	uint8_t *a = calloc(1, arena), *s = malloc(3 << 20);
	uint64_t key = 0, raddr = 0, writes = 0, bytes = 0;
	void *mr = NULL;
	CHECK(p->e[1].net.mr_open(&p->e[1], a, arena, &key, &raddr, &mr) == 0, "mr_open");
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k];
		fill(s, n, (uint32_t)k + 40);
		memset(a, 0, arena);
		void *bufs[1] = {a + off};
		uint64_t cap[1] = {n + 64}, got[1] = {~0ull};
		int32_t tags[1] = {3};
		struct xchan_wkey wk[1] = {{.key = key, .addr = raddr + off, .ok = 1}};
		chan_req rq, sq;
		CHECK(xchan_rx_post_w(p->rx, 1, bufs, cap, tags, wk, 0, &rq, NULL) == 0, "rx post");
		int64_t t0 = mono_ns();
		CHECK(send_post(p, s, n, 3, &sq) == 0, "tx post %llu B", (unsigned long long)n);
		CHECK(recv_wait(p, rq, got, NULL) == 0 && got[0] == n, "recv %llu B: got %llu",
		      (unsigned long long)n, (unsigned long long)got[0]);
		CHECK(!n || memcmp(s, a + off, n) == 0, "data of %llu B exact (written: %d)",
		      (unsigned long long)n, n >= write_min);
		CHECK(!model || mono_ns() >= t0 + m.lat_ns, "receive of %llu B early",
		      (unsigned long long)n);
		CHECK(send_wait(p, sq, NULL, NULL) == 0, "send %llu B", (unsigned long long)n);
		memset(s, 0xee, n); /* the caller's again: a write still out would see it */
		CHECK(!model || mono_ns() >= m.last_done, "send of %llu B early",
		      (unsigned long long)n);
		if (n && n >= write_min) {
			writes++;
			bytes += n;
		}
	}
	CHECK(!p->w.reused, "a send completed before its write gave its buffer back (%llu)",
	      (unsigned long long)p->w.reused);
	CHECK(p->w.writes == writes && p->w.write_bytes == bytes && !p->w.writes_refused,
	      "payloads of at least %llu B written: %llu of %llu, %llu B",
	      (unsigned long long)write_min, (unsigned long long)p->w.writes,
	      (unsigned long long)writes, (unsigned long long)p->w.write_bytes);
	p->e[1].net.mr_close(&p->e[1], mr);
	pair_free(p);
	free(a);
	free(s);
}

static void test_writes_exact_at_every_size(void)
{
	writes_exact_over(0, 0, 1, 0, 0);
	writes_exact_over(0x5151, 0, 4096, 0, 0); /* writes overtaken by earlier messages */
	writes_exact_over(0x2323, 3, 1, 0, 0);	  /* and writes refused at first */
	writes_exact_over(0x4545, 0, 4096, 1, 0); /* the model's gates */
	writes_exact_over(0x6767, 0, 1, 0, 8);	  /* writes whose ops complete after the ACK */
}

/* Grouped receives, some buffers open to writes and some not, many in flight, sends in a
 * shuffled tag order over a shuffling, pushing-back transport: every byte in its buffer. */
static void test_writes_and_messages_mixed_in_grouped_receives(void)
{
	struct pair *p = pair_new_w(0xabc, 4, NULL, NULL, 512);
	enum { R = 24, N = CHAN_MAX_RECVS, SZ = 2000 };
	static uint8_t src[R][N][SZ], dst[R][N][SZ + 8];
	uint64_t key, raddr;
	void *mr;
	CHECK(p->e[1].net.mr_open(&p->e[1], dst, sizeof(dst), &key, &raddr, &mr) == 0, "mr");
	chan_req rq[R], sq[N];
	for (int r = 0; r < R; r++) {
		void *bufs[N];
		uint64_t cap[N];
		int32_t tags[N];
		struct xchan_wkey wk[N];
		for (int b = 0; b < N; b++) {
			fill(src[r][b], SZ, (uint32_t)(r * N + b));
			bufs[b] = dst[r][b];
			cap[b] = SZ + 8;
			tags[b] = b;
			wk[b] = (struct xchan_wkey){
				.key = key,
				.addr = raddr + (uint64_t)((uint8_t *)dst[r][b] - (uint8_t *)dst),
				.ok = (b + r) % 3 != 0};
		}
		CHECK(xchan_rx_post_w(p->rx, N, bufs, cap, tags, wk, 0, &rq[r], NULL) == 0, "rx %d",
		      r);
		for (int b = 0; b < N; b++) {
			int t = (b * 3 + r) % N;
			CHECK(send_post(p, src[r][t], (uint64_t)(SZ - 300 * (t % 4)), t, &sq[t]) ==
				      0,
			      "send %d.%d", r, t);
		}
		for (int b = 0; b < N; b++)
			CHECK(send_wait(p, sq[b], NULL, NULL) == 0, "send %d.%d done", r, b);
		uint64_t got[N];
		CHECK(recv_wait(p, rq[r], got, NULL) == 0, "recv %d", r);
		for (int b = 0; b < N; b++)
			CHECK(got[b] == (uint64_t)(SZ - 300 * (b % 4)) &&
				      !memcmp(dst[r][b], src[r][b], got[b]),
			      "recv %d buffer %d exact", r, b);
	}
	CHECK(p->w.writes > R && p->w.writes < (uint64_t)R * N && !p->w.writes_refused,
	      "some payloads written, some sent: %llu writes", (unsigned long long)p->w.writes);
	pair_free(p);
}

/* A receiver that offers no keys gets messages, whatever the sender's write_min. */
static void test_a_receive_without_keys_takes_messages(void)
{
	struct pair *p = pair_new_w(0, 0, NULL, NULL, 1);
	uint8_t s[5000], d[5000];
	fill(s, sizeof(s), 9);
	chan_req rq, sq;
	CHECK(xchan_rx_post(p->rx, 1, (void *[]){d}, (uint64_t[]){5000}, (int32_t[]){0}, &rq,
			    NULL) == 0,
	      "rx post");
	CHECK(send_post(p, s, 5000, 0, &sq) == 0 && send_wait(p, sq, NULL, NULL) == 0, "send");
	CHECK(recv_wait(p, rq, NULL, NULL) == 0 && !memcmp(s, d, 5000), "exact");
	CHECK(p->w.writes == 0, "no write: %llu", (unsigned long long)p->w.writes);
	pair_free(p);
}

/* A write the receiver's transport refuses (its registration closed under a posted receive,
 * which xchan.h forbids) fails the sender, naming it, rather than completing the send; the
 * receive never completes with the buffer's old bytes, and the sender's close fails it. */
static void test_a_refused_write_fails_the_sender(void)
{
	struct pair *p = pair_new_w(0, 0, NULL, NULL, 1);
	uint8_t s[300] = {1}, d[300];
	uint64_t key, raddr;
	void *mr;
	CHECK(p->e[1].net.mr_open(&p->e[1], d, sizeof(d), &key, &raddr, &mr) == 0, "mr");
	chan_req rq, sq;
	struct xchan_wkey wk = {.key = key, .addr = raddr, .ok = 1};
	CHECK(xchan_rx_post_w(p->rx, 1, (void *[]){d}, (uint64_t[]){300}, (int32_t[]){0}, &wk, 0,
			      &rq, NULL) == 0,
	      "rx post");
	p->e[1].net.mr_close(&p->e[1], mr);
	struct chan_err e = {0};
	CHECK(send_post(p, s, 300, 0, &sq) == 0, "tx post");
	int rc = send_wait(p, sq, NULL, &e);
	CHECK(rc == -EIO && e.value[0] == EACCES && strstr(e.what, "write"), "sender: %d %s (%llu)",
	      rc, e.what, (unsigned long long)e.value[0]);
	CHECK(p->w.writes_refused == 1, "the write was refused");
	int done = 0;
	for (int i = 0; i < 100 && !done; i++)
		CHECK(xchan_rx_test(p->rx, rq, &done, NULL, NULL) == 0, "the receive waits");
	CHECK(!done, "the receive completed though its write was refused");
	xchan_tx_free(p->tx);
	p->tx = NULL;
	struct chan_err f = {0};
	rc = 0;
	for (int i = 0; i < 100 && !rc && !done; i++)
		rc = xchan_rx_test(p->rx, rq, &done, NULL, &f);
	CHECK(rc == -ECONNRESET && !done, "then the sender's close fails it: %d %s", rc, f.what);
	pair_free(p);
}

/* A header that claims a write into a buffer the receiver never offered is a protocol error:
 * the receiver does not take the buffer's old bytes for the payload. */
static void test_a_forged_written_header_is_refused(void)
{
	struct pair *p = pair_new_w(0, 0, NULL, NULL, 1);
	uint8_t d[64];
	chan_req rq;
	CHECK(xchan_rx_post(p->rx, 1, (void *[]){d}, (uint64_t[]){64}, (int32_t[]){0}, &rq, NULL) ==
		      0,
	      "rx post");
	uint8_t h[344] = {0};
	const uint32_t magic = 0x58434832u;
	const uint16_t written = 1;
	const uint64_t total = 64;
	memcpy(h, &magic, 4);
	memcpy(h + 6, &written, 2); /* flags */
	memcpy(h + 24, &total, 8);  /* msg 0, recv 0, buf 0 */
	struct xnet_op op = {0};
	CHECK(xf_send(&p->e[0], 1, xchan_tag(XCHAN_DATA, 7, 0), &(struct iovec){h, sizeof(h)}, 1,
		      &op) == 0,
	      "forge");
	struct chan_err e = {0};
	int rc = recv_wait(p, rq, NULL, &e);
	CHECK(rc == -EPROTO && strstr(e.what, "not offered"), "receiver: %d %s", rc, e.what);
	pair_free(p);
}

/* ---- limits and misuse --------------------------------------------------------------------- */

/*
 * A receive read as it fills (CHAN_RX_AT_DELIVERY: NCCL's LL and LL128) gets no byte before the
 * model's delivery time and takes no writes; the same receive without the flag takes the write
 * and fills at once, 20 ms early (so the check can fail). Exact either way.
 */
static void test_a_receive_read_as_it_fills_gets_no_byte_before_its_time(void)
{
	enum { N = 65536 };
	struct fake_model m = {.lat_ns = 20000000, .ack_ns = 1000000};
	struct pair *p = pair_new_w(0x51, 0, &fake_model, &m, 4096);
	uint8_t *a = malloc(N), *s = malloc(N);
	uint64_t key = 0, raddr = 0;
	void *mr = NULL;
	CHECK(p->e[1].net.mr_open(&p->e[1], a, N, &key, &raddr, &mr) == 0, "mr_open");
	for (int flag = 0; flag < 2; flag++) {
		fill(s, N, 60u + (uint32_t)flag);
		memset(a, 0xee, N);
		void *bufs[1] = {a};
		uint64_t cap[1] = {N}, got[1] = {0};
		int32_t tags[1] = {2};
		struct xchan_wkey wk[1] = {{.key = key, .addr = raddr, .ok = 1}};
		uint64_t writes = p->w.writes;
		chan_req rq, sq;
		CHECK(xchan_rx_post_w(p->rx, 1, bufs, cap, tags, wk, flag ? CHAN_RX_AT_DELIVERY : 0,
				      &rq, NULL) == 0,
		      "rx post");
		CHECK(send_post(p, s, N, 2, &sq) == 0, "tx post");
		int done = 0;
		int64_t first_byte = 0, deadline = mono_ns() + 5000000000LL;
		while (!done && mono_ns() < deadline) {
			if (xchan_rx_test(p->rx, rq, &done, got, NULL) ||
			    xchan_tx_progress(p->tx, NULL))
				break;
			int landed = 0; /* read, then the clock */
			for (int i = 0; i < N && !landed; i += 1021)
				landed = a[i] != 0xee;
			if (landed && !first_byte)
				first_byte = mono_ns();
		}
		CHECK(done && got[0] == N && memcmp(a, s, N) == 0, "exact (flag %d)", flag);
		CHECK(send_wait(p, sq, NULL, NULL) == 0, "send (flag %d)", flag);
		if (flag)
			CHECK(first_byte >= m.last_ready && p->w.writes == writes,
			      "a byte landed %lld us before the model's delivery time (writes "
			      "%llu)",
			      (long long)(m.last_ready - first_byte) / 1000,
			      (unsigned long long)(p->w.writes - writes));
		else
			CHECK(first_byte && first_byte < m.last_ready - 10000000 &&
				      p->w.writes == writes + 1,
			      "a plain receive takes the write at once (%lld us early)",
			      (long long)(m.last_ready - first_byte) / 1000);
	}
	chan_req rq;
	struct chan_err e;
	CHECK(xchan_rx_post_w(p->rx, 1, (void *[]){a}, (uint64_t[]){N}, (int32_t[]){0}, NULL, 2,
			      &rq, &e) == -EINVAL &&
		      strstr(e.what, "unknown receive flags"),
	      "unknown flags refused");
	p->e[1].net.mr_close(&p->e[1], mr);
	pair_free(p);
	free(a);
	free(s);
}

static void test_limits_and_misuse(void)
{
	struct xf_world w = {0};
	struct xf_ep e;
	xf_ep_init(&e, &w, 0);
	struct xchan_tx *tx = NULL;
	struct xchan_rx *rx = NULL;
	struct xchan_cfg c = {.net = &e.net, .peer = 1, .conn = 0};
	CHECK(xchan_tx_new(&c, &tx) == -EINVAL && !tx, "conn 0");
	c.conn = XCHAN_MAX_CONN + 1;
	CHECK(xchan_rx_new(&c, &rx) == -EINVAL && !rx, "conn too large");
	c.conn = 1;
	c.net = NULL;
	CHECK(xchan_tx_new(&c, &tx) == -EINVAL, "no transport");
	struct xchan_model half = {.post = fm_post};
	c.net = &e.net;
	c.model = &half;
	CHECK(xchan_tx_new(&c, &tx) == -EINVAL, "a model without every hook");
	xchan_tx_free(NULL);
	xchan_rx_free(NULL);

	struct pair *p = pair_new(0, 0, NULL, NULL);
	struct chan_err er;
	CHECK(xchan_tx_test(p->tx, 3, &(int){0}, NULL, &er) == -EINVAL, "unknown send request");
	CHECK(xchan_rx_test(p->rx, 40, &(int){0}, NULL, &er) == -EINVAL, "request out of range");
	CHECK(xchan_tx_post(p->tx, NULL, 8, 0, &(chan_req){0}, &er) == -EINVAL, "no buffer");
	uint8_t d[CHAN_MAX_REQS + 1][4];
	uint64_t cap[1] = {4};
	int32_t tags[1] = {0};
	chan_req q;
	for (int i = 0; i < CHAN_MAX_REQS; i++)
		CHECK(xchan_rx_post(p->rx, 1, (void *[]){d[i]}, cap, tags, &q, NULL) == 0,
		      "post %d", i);
	CHECK(xchan_rx_post(p->rx, 1, (void *[]){d[CHAN_MAX_REQS]}, cap, tags, &q, &er) == -EAGAIN,
	      "receive %d: %s", CHAN_MAX_REQS, er.what);
	CHECK(xchan_rx_post(p->rx, CHAN_MAX_RECVS + 1, (void *[]){d[0]}, cap, tags, &q, &er) ==
		      -EINVAL,
	      "n too large");
	/* a forged clear-to-send (the wrong magic) is a protocol error, not a crash */
	uint8_t junk[112] = {0xee};
	struct xnet_op op = {0};
	CHECK(xf_send(&p->e[1], 0, xchan_tag(XCHAN_CTS, 7, 0), &(struct iovec){junk, 112}, 1,
		      &op) == 0,
	      "forge");
	for (int i = 0; i < 40; i++)
		xchan_tx_progress(p->tx, NULL);
	CHECK(xchan_tx_progress(p->tx, &er) == -EPROTO, "forged CTS: %d %s", er.code, er.what);
	pair_free(p);
	xf_world_free(&w);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_a_receive_read_as_it_fills_gets_no_byte_before_its_time),
	CHECK_CASE(test_exact_at_every_size),
	CHECK_CASE(test_grouped_receives_and_many_in_flight),
	CHECK_CASE(test_a_send_fills_the_head_receive_only),
	CHECK_CASE(test_a_send_completes_without_the_receivers_test),
	CHECK_CASE(test_a_send_larger_than_the_receive_fails_both_ends),
	CHECK_CASE(test_nothing_completes_before_the_models_time),
	CHECK_CASE(test_a_message_the_model_fails_fails_both_ends_with_its_fault),
	CHECK_CASE(test_the_sender_closing_fails_only_what_cannot_come),
	CHECK_CASE(test_the_receiver_closing_fails_the_sender),
	CHECK_CASE(test_a_send_in_flight_when_the_receiver_closes_fails),
	CHECK_CASE(test_a_peer_that_is_gone_fails_both_ends),
	CHECK_CASE(test_limits_and_misuse),
	CHECK_CASE(test_a_message_the_receivers_hops_fail_fails_the_receiver_too),
	CHECK_CASE(test_a_ping_the_transport_never_takes_fails_the_endpoint),
	CHECK_CASE(test_a_sender_that_fails_alone_still_releases_the_receiver),
	CHECK_CASE(test_writes_exact_at_every_size),
	CHECK_CASE(test_writes_and_messages_mixed_in_grouped_receives),
	CHECK_CASE(test_a_receive_without_keys_takes_messages),
	CHECK_CASE(test_a_refused_write_fails_the_sender),
	CHECK_CASE(test_a_forged_written_header_is_refused),
};

int main(int argc, char **argv)
{
	return check_main(argc, argv, cases, CHECK_NCASES(cases));
}
