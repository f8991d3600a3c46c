/* SPDX-License-Identifier: MIT */
/*
 * test_xmodel.c - the distributed fabric clock's hooks (sim/core/xmodel.h): a route split
 * between two hosts, each with its own fabric state and its own clock, against one whole
 * reservation (fst_reserve) on a third state: every receive and send completion to the
 * nanosecond; faults in either piece fail both ends with the fault; what a peer's stamp may
 * not say.
 */
#include "sim/core/fstate.h"
#include "sim/core/xmodel.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "sim/test/check.h"
#include "sim/test/fenv.h"
#include "sim/test/fspec.h"

/*
 * A leaf-spine path: link 0 node0 -> leaf0, 1 leaf0 -> spine, 2 spine -> leaf1,
 * 3 leaf1 -> node1 (the receiver's port), 4 node2 -> leaf0 (a second sender into the same
 * spine link and port). Conn A: [0 1 2 3] from NIC 0; conn B: [4 1 2 3] from NIC 2.
 */
enum { NL = 5, NNIC = 3 };
#define HOST1_AHEAD ((int64_t)5000000000) /* host 1's clock reads 5 s more than host 0's */

struct host {
	void *base;
	size_t len;
	struct fst_view *v;
};

static struct model_link links[NL];
static struct model_nic nic;

/* jittery: normal jitter (sd 2 us, AR(1) 0.5) on the spine link and uniform on the port;
 * 2: and duplicates on three hops. */
static void fabric_init_j(int jittery)
{
	for (int i = 0; i < NL; i++) {
		memset(&links[i], 0, sizeof(links[i]));
		links[i].rate_bps = i == 1 || i == 2 ? 40000000000ull : 25000000000ull;
		links[i].latency_ns = 300 + 100 * i;
		links[i].mtu = 4096;
		links[i].hdr_bytes = 64;
	}
	if (jittery) {
		links[1].jitter =
			(struct model_jitter){.dist = MODEL_DIST_NORMAL, .sd_ns = 2000, .rho = 0.5};
		links[3].jitter = (struct model_jitter){.dist = MODEL_DIST_UNIFORM, .sd_ns = 5000};
	}
	if (jittery > 1) { /* duplicates at the senders' first hops and the spine's downlink */
		links[0].duplicate_p = 1u << 26; /* 1/64 */
		links[4].duplicate_p = 1u << 26;
		links[2].duplicate_p = 1u << 27;
	}
	if (jittery == 3) { /* loss (1/256) in both pieces, reordering at the senders */
		for (int i = 1; i <= 3; i += 2)
			links[i].loss =
				(struct model_loss){.kind = MODEL_LOSS_BERNOULLI, .p = {1u << 24}};
		links[0].reorder_p = links[4].reorder_p = 1u << 27;
		links[0].reorder_delay_ns = links[4].reorder_delay_ns = 3000;
	}
	if (jittery == 4) /* Gilbert-Elliott bursts on a sender's uplink and the receiver's port */
		for (int i = 0; i <= 3; i += 3)
			links[i].loss = (struct model_loss){
				.kind = MODEL_LOSS_GE,
				.p = {model_prob(0.002), model_prob(0.2), model_prob(0.5), 0}};
	nic = (struct model_nic){.o_send_ns = 300,
				 .o_recv_ns = 250,
				 .ack_proc_ns = 200,
				 .timeout_exp = 10,
				 .retry_count = 7,
				 .timeout_scale_ppm = 1000000};
	fenv_resolve(links, NL, &nic);
}

static void fabric_init(void)
{
	fabric_init_j(0);
}

static void host_init(struct host *h, int64_t epoch)
{
	h->v = fenv_map(NL, links, NNIC, 9, &h->base, &h->len);
	h->v->shm->epoch_ns = epoch;
}

static void host_fini(struct host *h)
{
	fenv_unmap(h->v, h->base, h->len);
}

static struct fst_conn route(int b)
{
	struct fst_conn c;
	memset(&c, 0, sizeof(c));
	c.id = b ? 21 : 20;
	c.npath = 4;
	c.path[0] = b ? 4 : 0;
	c.path[1] = 1;
	c.path[2] = 2;
	c.path[3] = 3;
	c.src_nic = b ? 2 : 0;
	c.src_node = b ? 2 : 0;
	c.dst_node = 1;
	c.nic = nic;
	c.switching = MODEL_CUT_THROUGH;
	return c;
}

/* One connection's two ends: tx on host 0, rx on host 1, and its messages so far. */
struct xconn {
	struct xmodel *tx, *rx;
	uint64_t msgs;
};

static void xconn_init(struct xconn *x, struct host *h0, struct host *h1, int b, int split)
{
	struct xmodel_route r = {.conn = route(b), .split = split};
	x->msgs = 0;
	CHECK(xmodel_new(h0->v, &r, XMODEL_TX, &x->tx) == 0 &&
		      xmodel_new(h1->v, &r, XMODEL_RX, &x->rx) == 0,
	      "xmodel_new split %d", split);
}

static void xconn_fini(struct xconn *x)
{
	xmodel_free(x->tx);
	xmodel_free(x->rx);
}

/* A message through both hooks, posted at t on host 0's clock and arriving (for the hooks'
 * lateness) at once: the receive's and the send's completion on host 0's clock. */
static int through(struct xconn *x, int64_t t, uint64_t bytes, int64_t *ready, int64_t *done,
		   struct xchan_stamp *ack)
{
	struct xchan_stamp s;
	int rc = xmodel_hooks.post(x->tx, t, bytes, &s);
	if (rc)
		return rc;
	rc = xmodel_hooks.arrive(x->rx, t + HOST1_AHEAD, x->msgs++, bytes, &s, ready, ack);
	if (rc)
		return rc;
	*ready -= HOST1_AHEAD;
	return xmodel_hooks.acked(x->tx, ack, done);
}

/* The usual bench: hosts 0 and 1 (host 1's clock HOST1_AHEAD ahead), conn A split at hop 2
 * between them, and the same conn on a third state reserved whole (fst_reserve). */
struct bench {
	struct host h0, h1, whole;
	struct xconn x;
	struct fst_conn w;
};

static void bench_init(struct bench *b)
{
	host_init(&b->h0, 0);
	host_init(&b->h1, HOST1_AHEAD);
	host_init(&b->whole, 0);
	xconn_init(&b->x, &b->h0, &b->h1, 0, 2);
	b->w = route(0);
}

static void bench_fini(struct bench *b)
{
	xconn_fini(&b->x);
	host_fini(&b->h0);
	host_fini(&b->h1);
	host_fini(&b->whole);
}

/* Link i's state on host h. */
static struct fst_link *link_of(struct host *h, int i)
{
	return (struct fst_link *)((uint8_t *)h->base + h->v->shm->state_off) + i;
}

/* One message through both: whole (m) and through the hooks (ready, done, ack), then the bits
 * the receiver flipped when it delivered it into a zeroed buffer. */
struct bench_msg {
	struct model_msg m;
	struct xchan_stamp ack;
	int64_t ready, done;
	uint64_t bits;
};

static struct bench_msg bench_msg(struct bench *b, int64_t t, uint8_t *buf, uint64_t len)
{
	struct bench_msg r = {.bits = 0};
	CHECK(fst_reserve(b->whole.v, &b->w, t, len, &r.m, NULL) == 0, "whole");
	uint64_t msg = b->x.msgs;
	CHECK(through(&b->x, t, len, &r.ready, &r.done, &r.ack) == 0, "through");
	memset(buf, 0, len);
	xmodel_hooks.deliver(b->x.rx, msg, buf, len);
	for (uint64_t k = 0; k < len; k++)
		r.bits += (uint64_t)__builtin_popcount(buf[k]);
	return r;
}

static void test_split_is_the_whole(void)
{
	for (int variant = 0; variant < 20; variant++) {
		int split = 1 + variant % 4, jittery = variant / 4;
		fabric_init_j(jittery);
		struct host h0, h1, whole;
		host_init(&h0, 1000);
		host_init(&h1, 1000 + HOST1_AHEAD);
		host_init(&whole, 1000);
		struct xconn x[2];
		struct fst_conn w[2] = {route(0), route(1)};
		xconn_init(&x[0], &h0, &h1, 0, split);
		xconn_init(&x[1], &h0, &h1, 1, split);
		uint32_t r = 11;
		int64_t t = 2000;
		int same = 0;
		for (int i = 0; i < 400; i++) {
			r = r * 1103515245 + 12345;
			int k = (int)(r >> 29) & 1;
			uint64_t bytes = (r >> 7) % (512 << 10);
			t += (int64_t)((r >> 4) % 30000);
			struct model_msg m;
			struct xchan_stamp ack;
			int64_t ready, done;
			CHECK(fst_reserve(whole.v, &w[k], t, bytes, &m, NULL) == 0, "whole");
			CHECK(through(&x[k], t, bytes, &ready, &done, &ack) == 0, "through");
			same += ready == m.recv_done_ns && done == m.send_done_ns && !m.failed &&
				!(ack.flags & XCHAN_S_FAIL);
			if (ready != m.recv_done_ns && same == i)
				fprintf(stderr,
					"split %d msg %d: ready %" PRId64 " want %" PRId64
					", done %" PRId64 " want %" PRId64 "\n",
					split, i, ready, m.recv_done_ns, done, m.send_done_ns);
		}
		static const char *const what[] = {"", ", jitter", ", jitter and duplicates",
						   ", loss and reordering (replayed)",
						   ", bursts of loss (replayed)"};
		CHECK(same == 400, "split %d%s: %d of 400 the same as one reservation", split,
		      what[jittery], same);
		/* each host counted its own links only: host 0 the sender's, host 1 the rest */
		struct fst_link *s0 =
			(struct fst_link *)((uint8_t *)h0.base + h0.v->shm->state_off);
		struct fst_link *s1 =
			(struct fst_link *)((uint8_t *)h1.base + h1.v->shm->state_off);
		CHECK(atomic_load(&s0[3].msgs) == (split == 4 ? 400u : 0u) &&
			      atomic_load(&s1[3].msgs) == (split == 4 ? 0u : 400u) &&
			      atomic_load(&s0[1].msgs) == (split >= 2 ? 400u : 0u),
		      "split %d: link 3 on host 0 %" PRIu64 ", host 1 %" PRIu64, split,
		      (uint64_t)atomic_load(&s0[3].msgs), (uint64_t)atomic_load(&s1[3].msgs));
		CHECK(atomic_load(&s1[3].early) == 0, "none early");
		/* every duplicate counted once, by the host whose piece drew it */
		struct fst_link *sw =
			(struct fst_link *)((uint8_t *)whole.base + whole.v->shm->state_off);
		uint64_t d_split = 0, d_whole = 0;
		for (int i = 0; i < NL; i++) {
			d_split += atomic_load(&s0[i].duplicates) + atomic_load(&s1[i].duplicates);
			d_whole += atomic_load(&sw[i].duplicates);
		}
		CHECK(d_split == d_whole && (jittery < 2 || d_whole > 0),
		      "split %d: duplicates %" PRIu64 " split, %" PRIu64 " whole", split, d_split,
		      d_whole);
		/* loss recoveries and late packets: as many, on the link one reservation counts
		 * them on (the first hop, on the sender's host) */
		uint64_t l_split = 0, l_whole = 0, r_split = 0, r_whole = 0, t_split = 0,
			 t_whole = 0;
		for (int i = 0; i < NL; i++) {
			l_split += atomic_load(&s0[i].lost) + atomic_load(&s1[i].lost);
			l_whole += atomic_load(&sw[i].lost);
			t_split += atomic_load(&s0[i].timeouts) + atomic_load(&s1[i].timeouts);
			t_whole += atomic_load(&sw[i].timeouts);
			r_split += atomic_load(&s0[i].reordered) + atomic_load(&s1[i].reordered);
			r_whole += atomic_load(&sw[i].reordered);
		}
		CHECK(l_split == l_whole && t_split == t_whole && r_split == r_whole &&
			      (jittery < 3 || l_whole > 0) && (jittery != 3 || r_whole > 0) &&
			      atomic_load(&s0[0].lost) == atomic_load(&sw[0].lost),
		      "split %d: lost %" PRIu64 "/%" PRIu64 ", timeouts %" PRIu64 "/%" PRIu64
		      ", reordered %" PRIu64 "/%" PRIu64 " (split/whole)",
		      split, l_split, l_whole, t_split, t_whole, r_split, r_whole);
		xconn_fini(&x[0]);
		xconn_fini(&x[1]);
		host_fini(&h0);
		host_fini(&h1);
		host_fini(&whole);
	}
}

/* Silent corruption across hosts: the receiver flips one bit in each packet the model
 * corrupts (as the shared-memory channel does), so a zeroed buffer shows as many set bits as
 * one whole reservation counts corrupted packets, message by message; counted once. */
static void test_corruption_flips_what_the_model_counts(void)
{
	fabric_init();
	links[2].corrupt_p = 1u << 28; /* 1/16 of the packets crossing the spine's downlink */
	struct bench b;
	bench_init(&b);
	static uint8_t buf[65536];
	uint64_t flipped = 0, counted = 0;
	int same = 0;
	for (int i = 0; i < 50; i++) {
		struct bench_msg r = bench_msg(&b, 1000 + (int64_t)i * 100000, buf, sizeof(buf));
		same += r.bits == r.m.corrupted;
		flipped += r.bits;
		counted += r.m.corrupted;
	}
	CHECK(same == 50 && counted > 0,
	      "%d of 50 messages flipped what the model counts: %" PRIu64 " bits, %" PRIu64, same,
	      flipped, counted);
	uint64_t c1 = 0, c0 = 0;
	for (int i = 0; i < NL; i++) {
		c1 += atomic_load(&link_of(&b.h1, i)->corrupted);
		c0 += atomic_load(&link_of(&b.h0, i)->corrupted);
	}
	CHECK(c1 == counted && c0 == 0, "counted by the receiver's host only: %" PRIu64 " %" PRIu64,
	      c1, c0);
	/* the sender's end flips nothing */
	memset(buf, 0, sizeof(buf));
	xmodel_hooks.deliver(b.x.tx, 0, buf, sizeof(buf));
	CHECK(buf[0] == 0 && !memcmp(buf, buf + 1, sizeof(buf) - 1), "tx end untouched");
	bench_fini(&b);
}

/* Two hosts (host 1's clock HOST1_AHEAD ahead) with fault f in both states: its id. */
static uint32_t two_hosts_with(struct host *h0, struct host *h1, const struct fault_spec *f)
{
	uint32_t id = UINT32_MAX;
	host_init(h0, 0);
	host_init(h1, HOST1_AHEAD);
	CHECK(fst_fault_add(h0->v->shm, f, ORIGIN, &id) == 0 &&
		      fst_fault_add(h1->v->shm, f, ORIGIN + HOST1_AHEAD, &id) == 0,
	      "faults");
	return id;
}

/*
 * Retries exhausted by loss across hosts: a third of the packets lost on the sender's uplink
 * or on the receiver's port, two retries. Both ends fail at one reservation's time, naming
 * the link, the failure is counted where one reservation counts it, and what follows flushes
 * at the same times.
 */
static void test_loss_fails_both_ends(void)
{
	for (int hop = 0; hop < 4; hop += 3) {
		fabric_init();
		nic.retry_count = 1;
		links[hop].loss =
			(struct model_loss){.kind = MODEL_LOSS_BERNOULLI, .p = {model_prob(0.6)}};
		fenv_resolve(links, NL, &nic);
		struct bench b;
		bench_init(&b);
		static uint8_t buf[256 << 10];
		int same = 0, failed = 0;
		uint32_t link = 99;
		for (int i = 0; i < 40; i++) {
			struct bench_msg r =
				bench_msg(&b, 1000 + (int64_t)i * 2000, buf, sizeof(buf));
			int f = (r.ack.flags & XCHAN_S_FAIL) != 0;
			same += r.ready == r.m.recv_done_ns && r.done == r.m.send_done_ns &&
				f == r.m.failed;
			if (f && !failed)
				link = r.ack.link;
			failed += f;
		}
		CHECK(same == 40 && failed > 0 && link == (uint32_t)hop,
		      "loss on hop %d: %d of 40 the same, %d failed, the first on link %u", hop,
		      same, failed, link);
		uint64_t f_split = atomic_load(&link_of(&b.h0, hop)->failed) +
			atomic_load(&link_of(&b.h1, hop)->failed);
		uint64_t f_whole = atomic_load(&link_of(&b.whole, hop)->failed);
		CHECK(f_split == f_whole && f_split > 0,
		      "failures on link %d: %" PRIu64 " split, %" PRIu64 " whole", hop, f_split,
		      f_whole);
		bench_fini(&b);
	}
	fabric_init();
}

/*
 * Degrades that set loss (on the spine uplink, host 0's with split 2) and corruption (on the
 * receiver's port, host 1's) for 10 ms: the receiving host replays the route with the
 * sender's degrades as they were at the post; every completion as one reservation's, and the
 * bits flipped in each message those it counts. The degrades' hits counted once.
 */
static void test_degrades_replayed(void)
{
	fabric_init();
	struct fault_spec lossy = on_link(FAULT_K_DEGRADE, 1, 2 * MS, 10 * MS);
	lossy.set = FAULT_SET_LOSS;
	lossy.loss = (struct model_loss){.kind = MODEL_LOSS_BERNOULLI, .p = {model_prob(0.01)}};
	struct fault_spec bad = on_link(FAULT_K_DEGRADE, 3, 2 * MS, 10 * MS);
	bad.set = FAULT_SET_CORRUPT;
	bad.corrupt_p = model_prob(0.05);
	struct bench b;
	bench_init(&b); /* the route's replay is decided again when the faults come */
	struct host *h[3] = {&b.h0, &b.h1, &b.whole};
	for (int k = 0; k < 3; k++) {
		int64_t origin = ORIGIN + (k == 1 ? HOST1_AHEAD : 0);
		uint32_t id;
		CHECK(fst_fault_add(h[k]->v->shm, &lossy, origin, &id) == 0 &&
			      fst_fault_add(h[k]->v->shm, &bad, origin, &id) == 0,
		      "faults");
	}
	static uint8_t buf[128 << 10];
	int same = 0, flips = 0;
	uint64_t lost = 0, corrupted = 0;
	for (int i = 0; i < 80; i++) {
		struct bench_msg r =
			bench_msg(&b, ORIGIN + (int64_t)i * 200 * US, buf, sizeof(buf));
		same += r.ready == r.m.recv_done_ns && r.done == r.m.send_done_ns && !r.m.failed;
		flips += r.bits == r.m.corrupted;
		lost += r.m.lost;
		corrupted += r.m.corrupted;
	}
	CHECK(same == 80 && flips == 80 && lost > 0 && corrupted > 0,
	      "%d of 80 the same, %d flipped as one counts; lost %" PRIu64 ", corrupted %" PRIu64,
	      same, flips, lost, corrupted);
	uint64_t hits[3];
	for (int k = 0; k < 3; k++)
		hits[k] = atomic_load(&fst_fault(h[k]->v->shm, 0)->hit);
	CHECK(hits[0] + hits[1] == hits[2] && hits[2] > 0,
	      "the loss degrade's hits: %" PRIu64 " + %" PRIu64 ", whole %" PRIu64, hits[0],
	      hits[1], hits[2]);
	bench_fini(&b);
}

/*
 * Outages across a replayed route are met as one reservation meets them, over every attempt:
 * the sender's uplink or the receiver's port down for 200 us, or for good, while loss on the
 * other piece's hop makes the message retransmit, the message posted 0 to 3 ms before the
 * outage. The same completions and failures as one reservation.
 */
static void test_outages_meet_recovery(void)
{
	int same = 0, n = 0, failed = 0;
	for (int forever = 0; forever < 2; forever++)
		for (int down = 0; down < 4; down += 3)
			for (int d = 0; d < 60; d++) {
				fabric_init();
				links[down ? 0 : 3].loss = (struct model_loss){
					.kind = MODEL_LOSS_BERNOULLI, .p = {model_prob(0.3)}};
				fenv_resolve(links, NL, &nic);
				struct fault_spec f = on_link(FAULT_K_LINK_DOWN, (uint32_t)down, 0,
							      forever ? FAULT_FOREVER : 200 * US);
				struct bench b;
				bench_init(&b);
				struct host *h[3] = {&b.h0, &b.h1, &b.whole};
				for (int k = 0; k < 3; k++) {
					uint32_t id;
					CHECK(fst_fault_add(h[k]->v->shm, &f,
							    ORIGIN + (k == 1 ? HOST1_AHEAD : 0),
							    &id) == 0,
					      "fault");
				}
				static uint8_t buf[64 << 10];
				int64_t t = ORIGIN - (int64_t)d * 50 * US;
				struct bench_msg r = bench_msg(&b, t, buf, sizeof(buf));
				int f2 = (r.ack.flags & XCHAN_S_FAIL) != 0;
				same += r.ready == r.m.recv_done_ns && r.done == r.m.send_done_ns &&
					f2 == r.m.failed;
				failed += r.m.failed;
				n++;
				bench_fini(&b);
			}
	CHECK(same == n && failed > 0, "%d of %d the same as one reservation (%d failed)", same, n,
	      failed);
	fabric_init();
}

/* Duplicates on the sender's uplink (90 % of packets) and loss on the receiver's port: after a
 * NAK the final train can end before the first attempt's stamp; the replay is still taken (the
 * front is checked against the stamp it gives, not against the arrival) and exact. */
static void test_duplicates_and_loss_replayed(void)
{
	fabric_init();
	links[0].duplicate_p = model_prob(0.9);
	links[3].loss = (struct model_loss){.kind = MODEL_LOSS_BERNOULLI, .p = {model_prob(0.02)}};
	fenv_resolve(links, NL, &nic);
	struct bench b;
	bench_init(&b);
	static uint8_t buf[1 << 20];
	int same = 0;
	uint64_t lost = 0;
	for (int i = 0; i < 60; i++) {
		struct bench_msg r = bench_msg(&b, 1000 + (int64_t)i * 2 * MS, buf, sizeof(buf));
		same += r.ready == r.m.recv_done_ns && r.done == r.m.send_done_ns;
		lost += r.m.lost;
	}
	CHECK(same == 60 && lost > 0, "%d of 60 the same (%" PRIu64 " losses)", same, lost);
	bench_fini(&b);
	fabric_init();
}

static void test_faults_fail_both_ends(void)
{
	fabric_init();
	/* the receiver's port down for good: its piece fails the message; both ends see it */
	struct host h0, h1;
	struct fault_spec f = on_link(FAULT_K_LINK_DOWN, 3, 0, FAULT_FOREVER);
	uint32_t id = two_hosts_with(&h0, &h1, &f);
	struct xconn x;
	xconn_init(&x, &h0, &h1, 0, 2);
	struct xchan_stamp ack;
	int64_t ready, done, t = ORIGIN + MS;
	CHECK(through(&x, t, 4096, &ready, &done, &ack) == 0, "through");
	CHECK((ack.flags & XCHAN_S_FAIL) && ack.fault == id + 1 && ack.link == 3,
	      "the ACK names the fault: flags %u fault %u link %u", ack.flags, ack.fault, ack.link);
	CHECK(ready == done && ready > t + 8 * TO && ready < t + 9 * TO,
	      "both fail at the piece's time: %" PRId64 " %" PRId64, ready - t, done - t);
	xconn_fini(&x);
	host_fini(&h0);
	host_fini(&h1);

	/* the sender's uplink down for good: the stamp carries the failure; the receiver does
	 * not reserve, and completes (in error) at the sender's time */
	f = on_link(FAULT_K_LINK_DOWN, 0, 0, FAULT_FOREVER);
	id = two_hosts_with(&h0, &h1, &f);
	xconn_init(&x, &h0, &h1, 0, 2);
	struct xchan_stamp s;
	CHECK(xmodel_hooks.post(x.tx, t, 4096, &s) == 0 && (s.flags & XCHAN_S_FAIL) &&
		      s.fault == id + 1 && s.link == 0,
	      "the stamp names the fault");
	CHECK(xmodel_hooks.arrive(x.rx, t + HOST1_AHEAD, 0, 4096, &s, &ready, &ack) == 0 &&
		      ready - HOST1_AHEAD == t + 8 * TO && (ack.flags & XCHAN_S_FAIL),
	      "the receiver fails at the sender's time: %" PRId64, ready - HOST1_AHEAD - t);
	struct fst_link *s1 = (struct fst_link *)((uint8_t *)h1.base + h1.v->shm->state_off);
	CHECK(atomic_load(&s1[3].msgs) == 0, "nothing reserved for a failed message");
	xconn_fini(&x);
	host_fini(&h0);
	host_fini(&h1);
}

/* A stall without end on a NIC without ACK timer: the model never delivers (MODEL_NEVER), and
 * across hosts that stays never at both ends (not an overflow into the past), from either
 * piece. */
static void test_never_stays_never(void)
{
	for (int hop = 0; hop < 4; hop += 3) { /* the sender's uplink, the receiver's port */
		fabric_init();
		nic.timeout_exp = 0;
		struct host h0, h1;
		struct fault_spec f = on_link(FAULT_K_STALL, (uint32_t)hop, 0, FAULT_FOREVER);
		two_hosts_with(&h0, &h1, &f);
		struct xconn x;
		xconn_init(&x, &h0, &h1, 0, 2);
		struct xchan_stamp ack;
		int64_t ready = 0, done = 0;
		CHECK(through(&x, ORIGIN + MS, 4096, &ready, &done, &ack) == 0, "through");
		CHECK(ready >= MODEL_NEVER - HOST1_AHEAD && done == MODEL_NEVER,
		      "stall on hop %d: ready %" PRId64 ", done %" PRId64, hop, ready, done);
		xconn_fini(&x);
		host_fini(&h0);
		host_fini(&h1);
	}
	fabric_init();
}

static void test_what_a_peer_may_not_say(void)
{
	fabric_init();
	struct host h0, h1;
	host_init(&h0, 0);
	host_init(&h1, 0);
	struct xconn x;
	xconn_init(&x, &h0, &h1, 0, 2);
	struct xchan_stamp s, ack;
	int64_t ready, done;
	CHECK(xmodel_hooks.post(x.tx, 1000, 64, &s) == 0, "post");
	struct xchan_stamp bad = s;
	bad.hop = 3;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == -EPROTO, "another hop");
	bad = s;
	bad.t[0] = bad.t[1] + 1;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == -EPROTO,
	      "first > last");
	bad = s;
	bad.t[1] = MODEL_NEVER - 1;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == -EPROTO, "overflowing");
	bad = s;
	bad.t[1] = 2000 + 601LL * 1000000000;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == -EPROTO,
	      "more than ten minutes ahead of this host's clock");
	bad = s;
	bad.t[2] = 2000000000;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == -EPROTO,
	      "a last packet of two seconds");
	/* never (a stall without end, no ACK timer): both ends hang, nothing reserved */
	bad = s;
	bad.t[1] = MODEL_NEVER;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == 0 &&
		      ready == MODEL_NEVER && ack.t[0] == MODEL_NEVER,
	      "never: ready %" PRId64, ready);
	CHECK(xmodel_hooks.acked(x.tx, &ack, &done) == 0 && done == MODEL_NEVER, "never: done");
	bad = s;
	bad.t[0] = -5;
	CHECK(xmodel_hooks.arrive(x.rx, 2000, 0, 64, &bad, &ready, &ack) == -EPROTO, "negative");
	/* the wrong end's hooks */
	CHECK(xmodel_hooks.post(x.rx, 1000, 64, &s) == -EINVAL, "post on rx");
	CHECK(xmodel_hooks.acked(x.rx, &s, &done) == -EINVAL, "acked on rx");
	CHECK(xmodel_hooks.arrive(x.tx, 2000, 0, 64, &s, &ready, &ack) == -EINVAL, "arrive on tx");
	/* routes that do not fit */
	struct xmodel *m;
	struct xmodel_route r = {.conn = route(0), .split = 0};
	CHECK(xmodel_new(h0.v, &r, XMODEL_TX, &m) == -EINVAL && !m, "split 0");
	r.split = 5;
	CHECK(xmodel_new(h0.v, &r, XMODEL_TX, &m) == -EINVAL, "split past the path");
	r.split = 2;
	r.conn.path[2] = NL;
	CHECK(xmodel_new(h0.v, &r, XMODEL_TX, &m) == -EINVAL, "a link the fabric lacks");
	r = (struct xmodel_route){.conn = route(0), .split = 2};
	r.conn.src_nic = NNIC;
	CHECK(xmodel_new(h0.v, &r, XMODEL_TX, &m) == -EINVAL, "a NIC the fabric lacks");
	xmodel_free(NULL);
	/* the replay's words (a lossy route: the sender's hops as they stood at the post) */
	CHECK(xmodel_hooks.post(x.tx, 3000, 64, &s) == 0, "post");
	s.flags |= XCHAN_S_REPLAY;
	static const struct {
		int word;
		uint64_t v;
		const char *what;
	} front[] = {
		{0, (uint64_t)-1, "a post before virtual time 0"},
		{0, (uint64_t)MODEL_NEVER, "a post never"},
		{1, (uint64_t)-3, "a negative delay"},
		{3, 700LL * 1000000000, "a link busy for ten minutes more"},
		{2, (uint64_t)MODEL_NEVER, "a host stage busy for ever"},
		{3, (uint64_t)MODEL_NEVER, "a link busy for ever"},
		{3, 3500, "a link busy until a time that does not give the stamp"},
		{0, 2999, "a post that does not give the stamp"},
		{3 + MODEL_MAX_HOPS, 7ull << 61, "a Markov state 7"},
		{3 + 2 * MODEL_MAX_HOPS, 1, "a degrade the fabric does not have"},
	};
	for (size_t i = 0; i < sizeof(front) / sizeof(front[0]); i++) {
		bad = s;
		bad.x[front[i].word] = front[i].v;
		CHECK(xmodel_hooks.arrive(x.rx, 4000, 1, 64, &bad, &ready, &ack) == -EPROTO,
		      "front: %s", front[i].what);
	}
	CHECK(link_of(&h1, 2)->busy_until == 0 && link_of(&h1, 3)->busy_until == 0 &&
		      atomic_load(&link_of(&h1, 3)->msgs) == 0,
	      "a front refused reserves nothing here");
	CHECK(xmodel_hooks.arrive(x.rx, 4000, 1, 64, &s, &ready, &ack) == 0 &&
		      (ack.flags & XCHAN_S_REPLAY),
	      "the replay");
	static const struct {
		int word;
		uint64_t v;
		const char *what;
	} back[] = {
		{1, (uint64_t)MODEL_NEVER - 1, "a link busy for centuries"},
		{1 + MODEL_MAX_HOPS, 5ull << 61, "a Markov state 5"},
		{1 + 3 * MODEL_MAX_HOPS + 3, 3u << 8, "a failure on the receiver's hop"},
		{1 + 3 * MODEL_MAX_HOPS + 3, 2, "flags it does not know"},
	};
	for (size_t i = 0; i < sizeof(back) / sizeof(back[0]); i++) {
		struct xchan_stamp b = ack;
		b.x[back[i].word] = back[i].v;
		CHECK(xmodel_hooks.acked(x.tx, &b, &done) == -EPROTO, "back: %s", back[i].what);
	}
	CHECK(xmodel_hooks.acked(x.tx, &ack, &done) == 0, "the back");
	xconn_fini(&x);
	host_fini(&h0);
	host_fini(&h1);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_split_is_the_whole),
	CHECK_CASE(test_corruption_flips_what_the_model_counts),
	CHECK_CASE(test_faults_fail_both_ends),
	CHECK_CASE(test_loss_fails_both_ends),
	CHECK_CASE(test_degrades_replayed),
	CHECK_CASE(test_outages_meet_recovery),
	CHECK_CASE(test_duplicates_and_loss_replayed),
	CHECK_CASE(test_never_stays_never),
	CHECK_CASE(test_what_a_peer_may_not_say),
};

CHECK_MAIN(cases)
