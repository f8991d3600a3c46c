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

static void test_split_is_the_whole(void)
{
	for (int variant = 0; variant < 12; variant++) {
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
		CHECK(same == 400, "split %d%s: %d of 400 the same as one reservation", split,
		      jittery == 2	? ", jitter and duplicates"
			      : jittery ? ", jitter"
					: "",
		      same);
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
	struct host h0, h1, whole;
	host_init(&h0, 0);
	host_init(&h1, HOST1_AHEAD);
	host_init(&whole, 0);
	struct xconn x;
	xconn_init(&x, &h0, &h1, 0, 2);
	struct fst_conn w = route(0);
	static uint8_t buf[65536];
	uint64_t flipped = 0, counted = 0;
	int same = 0;
	for (int i = 0; i < 50; i++) {
		int64_t t = 1000 + (int64_t)i * 100000;
		struct model_msg m;
		struct xchan_stamp ack;
		int64_t ready, done;
		CHECK(fst_reserve(whole.v, &w, t, sizeof(buf), &m, NULL) == 0, "whole");
		uint64_t msg = x.msgs;
		CHECK(through(&x, t, sizeof(buf), &ready, &done, &ack) == 0, "through");
		memset(buf, 0, sizeof(buf));
		xmodel_hooks.deliver(x.rx, msg, buf, sizeof(buf));
		uint64_t bits = 0;
		for (size_t k = 0; k < sizeof(buf); k++)
			bits += (uint64_t)__builtin_popcount(buf[k]);
		same += bits == m.corrupted;
		flipped += bits;
		counted += m.corrupted;
	}
	CHECK(same == 50 && counted > 0,
	      "%d of 50 messages flipped what the model counts (%" PRIu64 " bits, %" PRIu64 " packe"
	      "ts)",
	      same, flipped, counted);
	struct fst_link *s1 = (struct fst_link *)((uint8_t *)h1.base + h1.v->shm->state_off);
	struct fst_link *s0 = (struct fst_link *)((uint8_t *)h0.base + h0.v->shm->state_off);
	uint64_t c1 = 0, c0 = 0;
	for (int i = 0; i < NL; i++) {
		c1 += atomic_load(&s1[i].corrupted);
		c0 += atomic_load(&s0[i].corrupted);
	}
	CHECK(c1 == counted && c0 == 0, "counted by the receiver's host only: %" PRIu64 " %" PRIu64,
	      c1, c0);
	/* the sender's end flips nothing */
	memset(buf, 0, sizeof(buf));
	xmodel_hooks.deliver(x.tx, 0, buf, sizeof(buf));
	CHECK(buf[0] == 0 && !memcmp(buf, buf + 1, sizeof(buf) - 1), "tx end untouched");
	xconn_fini(&x);
	host_fini(&h0);
	host_fini(&h1);
	host_fini(&whole);
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
	/* a lossy hop cannot be split: refused at the post, never run unmodelled */
	h0.v->links[1].loss.kind = MODEL_LOSS_BERNOULLI;
	CHECK(xmodel_hooks.post(x.tx, 3000, 64, &s) == -EOPNOTSUPP, "lossy");
	xconn_fini(&x);
	host_fini(&h0);
	host_fini(&h1);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_split_is_the_whole),
	CHECK_CASE(test_corruption_flips_what_the_model_counts),
	CHECK_CASE(test_faults_fail_both_ends),
	CHECK_CASE(test_never_stays_never),
	CHECK_CASE(test_what_a_peer_may_not_say),
};

CHECK_MAIN(cases)
