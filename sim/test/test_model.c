/* SPDX-License-Identifier: MIT */
/*
 * test_model.c - the model core in virtual time: exact timing (tolerance 0 ns,
 * each expected value worked out by hand in a comment), loss recovery as
 * InfiniBand RC pays for it, determinism, validation messages, and the cost of
 * one model_message call (printed, not asserted). Its statistics (jitter and
 * loss over >= 10^5 draws): test_model_stats.c.
 */
#include "sim/core/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/test/check.h"
#include "sim/test/mfix.h"

/* The HDR path of the reference's §7.6: PCIe 24 GB/s (192 Gb/s), uplink 200 Gb/s with
 * 10 ns cable + 130 ns switch, downlink 200 Gb/s with 10 ns; IB headers 26 B, RETH 16 B on
 * the first packet, ImmDt 4 B on the last; o_send = o_recv = 300, ack_proc = 200. */
static struct model_link hdr_links[2];
static struct model_path hdr_path(void)
{
	hdr_links[0] = mklink(200 * GBPS, 140, 4096, 26);
	hdr_links[1] = mklink(200 * GBPS, 10, 4096, 26);
	for (int j = 0; j < 2; j++) {
		hdr_links[j].hdr_first_extra = 16;
		hdr_links[j].hdr_last_extra = 4;
	}
	return mkpath(2, hdr_links, MODEL_CUT_THROUGH);
}

/* ---- random numbers ---------------------------------------------------------- */

static void test_rand(void)
{
	struct model_key a = {.seed = 1, .link = 2, .purpose = 3, .conn = 4, .msg = 5, .packet = 6};
	struct model_key b = a;
	EQ(model_rand(&a, 7) == model_rand(&b, 7), 1);
	/* every field, and k, changes the draw */
	uint64_t r0 = model_rand(&a, 7);
	b.seed = 9;
	CHECK(model_rand(&b, 7) != r0, "seed");
	b = a, b.link = 9;
	CHECK(model_rand(&b, 7) != r0, "link");
	b = a, b.purpose = 9;
	CHECK(model_rand(&b, 7) != r0, "purpose");
	b = a, b.conn = 9;
	CHECK(model_rand(&b, 7) != r0, "conn");
	b = a, b.msg = 9;
	CHECK(model_rand(&b, 7) != r0, "msg");
	b = a, b.packet = 9;
	CHECK(model_rand(&b, 7) != r0, "packet");
	CHECK(model_rand(&a, 8) != r0, "k");
	/* uniform in (0, 1): mean 1/2, variance 1/12, every bit balanced, over 10^6 draws */
	double s = 0, s2 = 0, umin = 1, umax = 0;
	long bits[64] = {0};
	const int N = 1000000;
	for (int i = 0; i < N; i++) {
		a.packet = (uint64_t)i;
		uint64_t r = model_rand(&a, 0);
		for (int j = 0; j < 64; j++)
			bits[j] += (long)((r >> j) & 1);
		double u = model_unit(&a, 0);
		s += u, s2 += u * u;
		umin = u < umin ? u : umin;
		umax = u > umax ? u : umax;
	}
	double m = s / N, v = s2 / N - m * m;
	CHECK(fabs(m - 0.5) < 5 * sqrt(1.0 / 12 / N), "mean %g", m);
	CHECK(fabs(v - 1.0 / 12) < 0.002, "var %g", v);
	CHECK(umin > 0 && umax < 1, "range %g %g", umin, umax);
	for (int j = 0; j < 64; j++)
		CHECK(labs(bits[j] - N / 2) < 5 * 500, "bit %d set %ld times of %d", j, bits[j], N);
	EQ(model_prob(0), 0);
	EQ(model_prob(1), ONE);
	EQ(model_prob(0.5), 1u << 31);
	EQ(model_prob(-1), 0);
	EQ(model_prob(NAN), 0);
	EQ(model_prob(1 - 1e-12), ONE - 1);
	CHECK(model_prob_value(ONE) == 1.0 && model_prob_value(1u << 31) == 0.5, "prob values");
}

/* ---- exact timing ------------------------------------------------------------ */

/*
 * 1 MiB over two 100 Gb/s hops (0.08 ns/B), MTU 4096, 64 B headers, d = 500 and 300 ns;
 * posted at t = 1000, o_send = o_recv = 300, ack_proc = 200.
 *   n = 2^20 / 4096 = 256 packets, W = 2^20 + 256 * 64 = 1064960 B on each hop
 *   T(W) = ceil(1064960 * 0.08) = ceil(85196.8) = 85197; T(packet) = ceil(4160 * 0.08) = 333
 *   t0 = 1300
 * cut-through: hop 0: s = 1300, f = 1300 + 85197 = 86497
 *   hop 1: s = 1300 + 500 = 1800; f = max(1800 + 85197, 86497 + 500 + (333 - 333)) = 86997
 *   arrive = 86997 + 300 = 87297; recv = 87597; send = 87297 + 200 + 800 + 300 = 88597
 * store-and-forward: hop 1 waits for the first packet: s = 1300 + 333 + 500 = 2133,
 *   f = max(2133 + 85197, 86497 + 500 + 333) = 87330; arrive = 87630 (one packet later)
 */
static void test_1mib_two_hops(void)
{
	struct model_link l[2] = {mklink(100 * GBPS, 500, 4096, 64),
				  mklink(100 * GBPS, 300, 4096, 64)};
	struct model_nic nic = mknic(0, 300, 300, 200);
	struct model_path ct = mkpath(2, l, MODEL_CUT_THROUGH);
	struct model_path sf = mkpath(2, l, MODEL_STORE_FORWARD);
	EQ(l[0].fs_per_byte, 80000);
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg m = send1(&ct, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.packets, 256);
	EQ(m.arrive_ns, 87297);
	EQ(m.recv_done_ns, 87597);
	EQ(m.send_done_ns, 88597);
	EQ(s.busy[0], 86497);
	EQ(s.busy[1], 86997);
	EQ(model_ideal_ns(&ct, &nic, 1 << 20), 87597 - 1000);
	memset(&s, 0, sizeof(s));
	m = send1(&sf, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.arrive_ns, 87630);
	EQ(s.busy[1], 87330);
	EQ(model_ideal_ns(&sf, &nic, 1 << 20), 87630 + 300 - 1000);
	/* ... which is the reference's closed form: sum d + sum tau + (n - 1) tau = 800 + 257
	 * * 332.8 = 86329.6, here with each term rounded up once: 800 + 85197 + 333 = 86330 */
	EQ(m.arrive_ns - 1300, 86330);
}

/*
 * The reference's §7.6 worked numbers, exactly (HDR path, t = 0):
 * 8 B: one packet, 8 + 26 + 16 + 4 = 54 B on the wire.
 *   PCIe: T(8 B at 24 GB/s) = ceil(0.33) = 1: s0 = 300, f0 = 301
 *   uplink: T(54 B at 25 GB/s) = ceil(2.16) = 3: s1 = 300, f1 = max(303, 301 + (3 - 1)) = 303
 *   downlink: s2 = 440, f2 = max(443, 303 + 140 + 0) = 443; arrive 453 ("~ t + 453")
 *   recv = 753 ("~ 0.75 us"), send = 453 + 200 + 150 + 300 = 1103 ("~ 1.1 us")
 * 512 KiB: n = 128, W = 524288 + 128 * 26 + 20 = 527636 B.
 *   PCIe T(524288) = ceil(21845.33) = 21846: f0 = 22146 (the bottleneck)
 *   uplink T(W) = ceil(21105.44) = 21106, last packet 4126 B -> 166 ns, on PCIe 4096 -> 171:
 *     f1 = max(300 + 21106, 22146 + max(0, 166 - 171)) = 22146
 *   downlink: s2 = 440, f2 = max(440 + 21106, 22146 + 140 + 0) = 22286; arrive 22296
 *   recv = 22596 ("~ 22.6 us"): 23.2 GB/s for one isolated message
 * Back to back (a second 512 KiB at t = 0 on the same connection): PCIe s0 = 22146,
 *   f0 = 43992; uplink f1 = max(22146 + 21106, 43992) = 43992; downlink s2 = 22286,
 *   f2 = max(22286 + 21106, 43992 + 140) = 44132; arrive 44142: 21846 ns apart, 24.0 GB/s.
 * Two senders into one receiver: the second sender's own PCIe and uplink finish at 22146
 *   too, but the downlink is busy until 22286: f2 = max(22286 + 21106, 22146 + 140) =
 *   43392, arrive 43402: it waits one downlink train (21106 ns, "~ 21 us").
 */
static void test_hdr_worked(void)
{
	struct model_path p = hdr_path();
	struct model_nic nic = mknic(192 * GBPS, 300, 300, 200);
	EQ(nic.host_fs_per_byte, 41667);
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 0, 8);
	EQ(m.packets, 1);
	EQ(m.arrive_ns, 453);
	EQ(m.recv_done_ns, 753);
	EQ(m.send_done_ns, 1103);
	EQ(model_ideal_ns(&p, &nic, 8), 753);

	memset(&s, 0, sizeof(s));
	m = send1(&p, &nic, &s, 1, 0, 0, 512 << 10);
	EQ(m.packets, 128);
	EQ(m.arrive_ns, 22296);
	EQ(m.recv_done_ns, 22596);
	EQ(s.host, 22146);
	EQ(s.busy[0], 22146);
	EQ(s.busy[1], 22286);
	EQ(model_ideal_ns(&p, &nic, 512 << 10), 22596);
	m = send1(&p, &nic, &s, 1, 1, 0, 512 << 10);
	EQ(m.arrive_ns, 44142);

	/* incast: sender B has its own PCIe and uplink, shares A's downlink */
	struct st a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	m = send1(&p, &nic, &a, 1, 0, 0, 512 << 10);
	EQ(m.arrive_ns, 22296);
	b.busy[1] = a.busy[1];
	m = send1(&p, &nic, &b, 2, 0, 0, 512 << 10);
	EQ(m.arrive_ns, 43402);
	EQ(m.arrive_ns - 22296, 21106);
}

/*
 * Four senders into one link, FIFO: each has its own 200 Gb/s first hop (d = 100), all
 * share the second hop (200 Gb/s, d = 50); 64 KiB each, posted together at t = 0, no
 * overheads. W = 65536 + 16 * 64 = 66560 B: T = ceil(66560 * 0.04) = 2663 (2662.4).
 * Message k: shared hop s = max(f_prev, 100), f = s + 2663 -> arrive = 150 + (k+1) 2663:
 * 2813, 5476, 8139, 10802. The link is busy without a gap: 4 * 2663 = 10652 ns.
 * A fifth message at t = 20000 finds the link idle: 20150 + 2663 = 22813.
 */
static void test_fifo_incast(void)
{
	struct model_link first[4], shared = mklink(200 * GBPS, 50, 4096, 64);
	struct model_nic nic = mknic(0, 0, 0, 0);
	int64_t busy_shared = 0;
	for (int k = 0; k < 4; k++) {
		first[k] = mklink(200 * GBPS, 100, 4096, 64);
		struct model_link hops[2] = {first[k], shared};
		struct model_path p = mkpath(2, hops, MODEL_CUT_THROUGH);
		struct st s;
		memset(&s, 0, sizeof(s));
		s.busy[1] = busy_shared;
		struct model_msg m = send1(&p, &nic, &s, (uint64_t)k, 0, 0, 64 << 10);
		EQ(m.arrive_ns, 150 + (k + 1) * 2663);
		busy_shared = s.busy[1];
	}
	EQ(busy_shared, 100 + 4 * 2663);
	struct model_link hops[2] = {first[0], shared};
	struct model_path p = mkpath(2, hops, MODEL_CUT_THROUGH);
	struct st s;
	memset(&s, 0, sizeof(s));
	s.busy[1] = busy_shared;
	struct model_msg m = send1(&p, &nic, &s, 9, 0, 20000, 64 << 10);
	EQ(m.arrive_ns, 22813);
	/* and the same four on one connection: the FIFO clamp adds nothing beyond the link */
	memset(&s, 0, sizeof(s));
	for (int k = 0; k < 4; k++) {
		m = send1(&p, &nic, &s, 1, (uint64_t)k, 0, 64 << 10);
		EQ(m.arrive_ns, 150 + (k + 1) * 2663);
	}
}

/*
 * The host-to-NIC limit carries payload only: 1 MiB through PCIe at 24 GB/s into one
 * 400 Gb/s hop (d = 100), IB headers 26 B, no overheads.
 *   PCIe: T(1048576 B at 24 GB/s) = ceil(43690.67) = 43691   (with headers it would be
 *   T(1055232) = 43968)
 *   link: W = 1048576 + 256 * 26 = 1055232 -> ceil(21104.64) = 21105; last packet
 *   4122 B -> 83 ns, on PCIe 4096 B -> 171 ns: f = max(21105, 43691 + max(0, 83 - 171))
 *   = 43691; arrive = 43791.
 */
static void test_host_limit(void)
{
	struct model_link l = mklink(400 * GBPS, 100, 4096, 26);
	struct model_nic nic = mknic(192 * GBPS, 0, 0, 0);
	struct model_path p = mkpath(1, &l, MODEL_CUT_THROUGH);
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 0, 1 << 20);
	EQ(m.arrive_ns, 43791);
	EQ(s.host, 43691);
	EQ(s.busy[0], 43691);
	/* without the limit the link is the bottleneck: 21105 + 100 */
	struct model_nic free_nic = mknic(0, 0, 0, 0);
	memset(&s, 0, sizeof(s));
	m = send1(&p, &free_nic, &s, 1, 0, 0, 1 << 20);
	EQ(m.arrive_ns, 21205);
	/* a 0-hop path (a NIC to itself) is the host stage alone */
	struct model_path self = mkpath(0, NULL, MODEL_CUT_THROUGH);
	memset(&s, 0, sizeof(s));
	m = send1(&self, &nic, &s, 1, 0, 0, 1 << 20);
	EQ(m.packets, 1);
	EQ(m.arrive_ns, 43691);
	EQ(model_ideal_ns(&self, &nic, 1 << 20), 43691);
}

/* Rate 0 is ideal: exactly the sum of the latencies, whatever the size. */
static void test_unlimited(void)
{
	struct model_link l[3] = {mklink(0, 7, 4096, 26), mklink(0, 11, 4096, 26),
				  mklink(0, 13, 4096, 26)};
	struct model_nic nic = mknic(0, 300, 300, 200);
	struct model_path p = mkpath(3, l, MODEL_CUT_THROUGH);
	static const uint64_t sizes[] = {0, 1, 4096, 4097, 1 << 30, MODEL_MAX_BYTES};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct st s;
		memset(&s, 0, sizeof(s));
		struct model_msg m = send1(&p, &nic, &s, 1, 0, 1000, sizes[i]);
		EQ(m.arrive_ns, 1000 + 300 + 31);
		EQ(m.recv_done_ns, 1000 + 300 + 31 + 300);
		EQ(m.send_done_ns, 1000 + 300 + 31 + 200 + 31 + 300);
		EQ(s.busy[0], 1300);
		EQ(model_ideal_ns(&p, &nic, sizes[i]), 631);
	}
	struct model_nic zero = mknic(0, 0, 0, 0);
	struct model_path self = mkpath(0, NULL, MODEL_STORE_FORWARD);
	EQ(model_ideal_ns(&self, &zero, 1 << 20), 0);
}

/*
 * Extremes without overflow: ceil(x * 8e9 / rate) is exact for x up to 2^40 (and the
 * wire bytes above it) and rates from 1 Mb/s to 1 Pb/s.
 *   2^40 B payload at 1 Mb/s: 2^40 * 8000 = 8796093022208000 ns
 *   2^40 B in 4096 B packets with 26 B headers at 1 Mb/s: W = 2^40 + 2^28 * 26
 *     = 1106490949632 B -> 8851927597056000 ns
 *   2^40 B at 1 Pb/s: ceil(8796093.022208) = 8796094
 *   1 GiB at 100 Gb/s: ceil(85899345.92) = 85899346
 *   around the 64-bit fast path's edge (x * 8e9 < 2^64 up to x = 2305843009):
 *     2305843009 B and 2305843010 B at 1000003 b/s: 18446688731934, 18446688739934
 */
static void test_extremes(void)
{
	struct model_nic h1m = mknic(1000000, 0, 0, 0), h1p = mknic(1000000000000000ULL, 0, 0, 0);
	struct model_nic nic = mknic(0, 0, 0, 0), hp = mknic(1000003, 0, 0, 0);
	struct model_path self = mkpath(0, NULL, MODEL_CUT_THROUGH);
	EQ(model_ideal_ns(&self, &h1m, MODEL_MAX_BYTES), 8796093022208000LL);
	EQ(model_ideal_ns(&self, &h1p, MODEL_MAX_BYTES), 8796094);
	EQ(model_ideal_ns(&self, &hp, 2305843009ULL), 18446688731934LL);
	EQ(model_ideal_ns(&self, &hp, 2305843010ULL), 18446688739934LL);
	struct model_link slow = mklink(1000000, 0, 4096, 26);
	struct model_path p = mkpath(1, &slow, MODEL_CUT_THROUGH);
	EQ(model_ideal_ns(&p, &nic, MODEL_MAX_BYTES), 8851927597056000LL);
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 0, MODEL_MAX_BYTES);
	EQ(m.arrive_ns, 8851927597056000LL);
	EQ(m.packets, 1ULL << 28);
	struct model_link fast = mklink(100 * GBPS, 0, 4096, 0);
	struct model_path pf = mkpath(1, &fast, MODEL_CUT_THROUGH);
	EQ(model_ideal_ns(&pf, &nic, 1ULL << 30), 85899346);
	/* the smallest MTU with the largest headers, 8 hops, store-and-forward, at 1 Mb/s:
	 * the biggest numbers the model can make stay finite and exact */
	struct model_link worst[MODEL_MAX_HOPS];
	for (int j = 0; j < MODEL_MAX_HOPS; j++) {
		worst[j] = mklink(1000000, MODEL_TIME_MAX_NS, MODEL_MTU_MIN, MODEL_HDR_MAX);
		worst[j].hdr_first_extra = worst[j].hdr_last_extra = MODEL_HDR_MAX;
	}
	struct model_path pw = mkpath(MODEL_MAX_HOPS, worst, MODEL_STORE_FORWARD);
	/* W = 2^40 + 2^34 * 4096 + 8192 = 71468255813632 B -> * 8000 ns; every other hop
	 * adds its last packet (64 + 4096 + 4096 B: 66048000 ns) and its 1000 s */
	int64_t want = 71468255813632LL * 8000 + 7 * 66048000LL + 8 * MODEL_TIME_MAX_NS;
	EQ(model_ideal_ns(&pw, &nic, MODEL_MAX_BYTES), want);
	memset(&s, 0, sizeof(s));
	m = send1(&pw, &nic, &s, 1, 0, 0, MODEL_MAX_BYTES);
	EQ(m.arrive_ns, want);
	/* and bytes beyond the limit are refused */
	struct model_key k = {0};
	EQ(model_message(&p, &nic, 0, MODEL_MAX_BYTES + 1, &k, &s.host, s.busy, s.ls, &s.conn, &m),
	   -EINVAL);
}

/* Property: on idle links model_message equals the closed form, for random paths. */
static void test_ideal_property(void)
{
	struct model_key r = {.seed = 7, .purpose = 99};
	int mismatches = 0;
	for (int trial = 0; trial < 20000; trial++) {
		r.msg = (uint64_t)trial;
		uint64_t k = 0;
#define RND(n) (model_rand(&r, k++) % (n))
		struct model_link l[MODEL_MAX_HOPS];
		int nh = (int)RND(MODEL_MAX_HOPS + 1);
		static const uint64_t rates[] = {0, 1000000, 100 * GBPS, 192 * GBPS, 200 * GBPS,
						 400 * GBPS, 999999937ULL};
		static const uint32_t mtus[] = {64, 256, 1000, 4096, 9000};
		for (int j = 0; j < nh; j++) {
			uint64_t rate = rates[RND(7)];
			int64_t lat = (int64_t)RND(1000);
			uint32_t mtu = mtus[RND(5)], hdr = (uint32_t)RND(100);
			l[j] = mklink(rate, lat, mtu, hdr);
			l[j].hdr_first_extra = (uint32_t)RND(20);
			l[j].hdr_last_extra = (uint32_t)RND(5);
		}
		enum model_switching sw = RND(2) ? MODEL_STORE_FORWARD : MODEL_CUT_THROUGH;
		struct model_path p = mkpath(nh, l, sw);
		uint64_t host = RND(2) ? rates[RND(7)] : 0;
		int64_t os = (int64_t)RND(500), orc = (int64_t)RND(500), ack = (int64_t)RND(500);
		struct model_nic nic = mknic(host, os, orc, ack);
		uint64_t bytes = RND(4) == 0 ? RND(10) : RND(3 << 20);
#undef RND
		struct st s;
		memset(&s, 0, sizeof(s));
		struct model_msg m = send1(&p, &nic, &s, 1, 0, 0, bytes);
		if (m.recv_done_ns != model_ideal_ns(&p, &nic, bytes) && mismatches++ < 5)
			CHECK(0, "trial %d: %d hops, %llu B: message %lld, closed form %lld", trial,
			      nh, (unsigned long long)bytes, (long long)m.recv_done_ns,
			      (long long)model_ideal_ns(&p, &nic, bytes));
	}
	EQ(mismatches, 0);
}

/* ---- loss as RC pays for it ------------------------------------------------------- */

/* A 4-state chain that loses exactly the next packet on the link, then nothing: state 2
 * with p23 = 1 (-> 3, lost), p31 = 1 (-> 1, kept), p13 = p14 = 0 (stays kept). */
static void lose_next(struct model_link *l, struct model_loss_state *st)
{
	l->loss.kind = MODEL_LOSS_4STATE;
	memset(l->loss.p, 0, sizeof(l->loss.p));
	l->loss.p[1] = ONE; /* p31 */
	l->loss.p[3] = ONE; /* p23 */
	st->state = 2;
}

/*
 * Mid-message loss (go-back-N, NAK): the 1 MiB two-hop case above, packet 0 lost on hop 1.
 *   Packet 1 arrives out of order: the prefix train of 2 packets (8320 B, T = ceil(665.6)
 *   = 666): hop 0 f = 1300 + 666 = 1966; hop 1 s = 1800, f = max(2466, 1966 + 500) = 2466;
 *   arrives 2466 + 300 = 2766. NAK back at 2766 + 200 + 800 = 3766.
 *   By then hop 0 had begun packets 0..7 (packet i begins at 1300 + ceil(332.8 i): packet 7
 *   at 3630, packet 8 would at 3963): the sender finishes packet 7 and those 8 packets
 *   still cross hop 1: hop 0 busy to 1300 + T(8 * 4160) = 1300 + 2663 = 3963, hop 1 to
 *   max(1800 + 2663, 3963 + 500) = 4463.
 *   Packets 0..255 again: hop 0 s = max(3766, 3963) = 3963, f = 3963 + 85197 = 89160;
 *   hop 1 s = max(4463, 3963 + 500) = 4463, f = max(4463 + 85197, 89160 + 500) = 89660;
 *   arrive 89960 (no loss: 87297; +2663 = 2 * 800 + 200 + 666, the reference's
 *   2 sum d + ack_proc + 2 tau, + 197 for the packet on the wire when the NAK came).
 *   recv 90260, send 89960 + 200 + 800 + 300 = 91260. Both hops stay reserved to the
 *   resend's end (89160, 89660).
 */
static void test_loss_mid(void)
{
	struct model_link l[2] = {mklink(100 * GBPS, 500, 4096, 64),
				  mklink(100 * GBPS, 300, 4096, 64)};
	struct model_nic nic = mknic(0, 300, 300, 200);
	struct st s;
	memset(&s, 0, sizeof(s));
	lose_next(&l[1], &s.ls[1]);
	struct model_path p = mkpath(2, l, MODEL_CUT_THROUGH);
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.lost, 1);
	EQ(m.timeouts, 0);
	EQ(m.retx_packets, 256);
	EQ(m.failed, 0);
	EQ(m.arrive_ns, 89960);
	EQ(m.arrive_ns - 87297, 2 * 800 + 200 + 666 + 197);
	EQ(m.recv_done_ns, 90260);
	EQ(m.send_done_ns, 91260);
	EQ(s.busy[0], 89160);
	EQ(s.busy[1], 89660);
	EQ(s.ls[1].packets, 512);
	EQ(s.ls[1].state, 1);

	/*
	 * The reference's HDR "one lost middle packet: ~ +0.84 us", 512 KiB, packet 0 lost
	 * on the downlink. Prefix of 2 packets: PCIe 8192 B -> 342, f0 = 642; uplink 8260 B
	 * -> 331, f1 = max(631, 642 + max(0, 165 - 171)) = 642; downlink s2 = 440,
	 * f2 = max(771, 642 + 140) = 782; arrives 792; NAK at 792 + 200 + 150 = 1142.
	 * PCIe had begun packets 0..4 (packet 5 would begin at 300 + ceil(853.3) = 1154):
	 * those 5 (20480 B; 20626 B on the wire -> 826) occupy PCIe to 1154, the uplink to
	 * max(1126, 1154) = 1154, the downlink to max(440 + 826, 1154 + 140) = 1294. Resend
	 * from 1154: f0 = 1154 + 21846 = 23000 = f1; downlink s2 = 1294, f2 = max(1294 +
	 * 21106, 23000 + 140) = 23140; arrive 23150: +854 ns over 22296.
	 */
	struct model_path hp = hdr_path();
	struct model_nic hn = mknic(192 * GBPS, 300, 300, 200);
	memset(&s, 0, sizeof(s));
	lose_next(&hdr_links[1], &s.ls[1]);
	m = send1(&hp, &hn, &s, 1, 0, 0, 512 << 10);
	EQ(m.arrive_ns, 23150);
	EQ(m.arrive_ns - 22296, 854);
	EQ(m.recv_done_ns, 23450);

	/*
	 * Bernoulli loss, many seeds: whenever a message loses one packet i* mid-message and
	 * packet `after` (the first one after i* that got through) triggers the NAK, its
	 * arrival is exactly (uncontended, equal rates, 64 packets of 4160 B, t0 = 0,
	 * T(k) = ceil(k * 4160 * 0.08) the time of k packets):
	 *   NAK at tev = T(after + 1) + 2 D + ack, D = 800, ack = 200;
	 *   the resend of 64 - i* packets begins at max(tev, T(m)), m the packets begun
	 *   before tev (packet i begins at T(i)), and arrives T(64 - i*) + D later.
	 * The pattern comes from the public iterator, the timing from model_message: this
	 * checks how they compose.
	 */
	struct model_link bl[2] = {mklink(100 * GBPS, 500, 4096, 64),
				   mklink(100 * GBPS, 300, 4096, 64)};
	bl[0].loss.kind = MODEL_LOSS_BERNOULLI;
	bl[0].loss.p[0] = model_prob(0.03);
	struct model_path bp = mkpath(2, bl, MODEL_CUT_THROUGH);
	struct model_nic bn = mknic(0, 0, 0, 200);
	int seen = 0, tails = 0;
	for (uint64_t msg = 0; msg < 3000; msg++) {
		struct model_key k = {.seed = 42, .link = 100, .conn = 1, .msg = msg};
		struct model_loss_iter it;
		model_loss_begin(&it, &bl[0].loss, NULL, &k, 64, 0);
		uint64_t first = model_loss_next(&it, 0, 1);
		uint64_t after = first < 64 ? model_loss_next(&it, first + 1, 0) : 64;
		if (first == 64)
			continue;
		k.packet = first;
		model_loss_begin(&it, &bl[0].loss, NULL, &k, 64 - first, 1);
		int again = model_loss_next(&it, 0, 1) < 64 - first;
		memset(&s, 0, sizeof(s));
		m = send1(&bp, &bn, &s, 1, msg, 0, 64 * 4096);
		if (again)
			continue;
		if (after == 64) { /* the tail: timer, 4.29 s */
			tails++;
			EQ(m.timeouts, 1);
			int64_t resend = (int64_t)(((64 - first) * 4160 * 8 + 99) / 100);
			EQ(m.arrive_ns, 21300 + 4294967296LL + resend + 800);
			continue;
		}
		seen++;
#define TK(k) ((int64_t)(((k) * 4160 * 8 + 99) / 100))
		int64_t tev = TK(after + 1) + 1600 + 200, begun = 0;
		uint64_t mm = 0;
		while (mm < 64 && TK(mm) < tev)
			mm++;
		begun = TK(mm);
		int64_t want = (tev > begun ? tev : begun) + TK(64 - first) + 800;
#undef TK
		EQ(m.lost, 1);
		EQ(m.timeouts, 0);
		EQ(m.arrive_ns, want);
	}
	CHECK(seen > 500 && tails > 5, "seen %d NAK cases, %d tail cases", seen, tails);
}

/*
 * Tail loss: nothing after the lost packet arrives, so only the ACK timer recovers it.
 * 8 B on the HDR path, timeout_exp 20 scaled by 1/1000: T_o = floor(4294967.296) =
 * 4294967. The timer starts when the packet leaves the NIC (uplink f = 303): resend at
 * 4295270; PCIe f = 4295271, uplink f = max(4295273, 4295271 + 2) = 4295273, downlink
 * s = 4295410, f = 4295413, arrive 4295423, recv 4295723, send +200 +150 +300 = 4296073.
 * Only the first transmission is reserved (host 301, uplink 303, downlink 443): the resend,
 * seconds later in a real run, is timed on its own.
 */
static void test_loss_tail(void)
{
	struct model_path p = hdr_path();
	struct model_nic nic = mknic(192 * GBPS, 300, 300, 200);
	nic.timeout_scale_ppm = 1000;
	EQ(model_timeout_ns(&nic), 4294967);
	struct st s;
	memset(&s, 0, sizeof(s));
	lose_next(&hdr_links[1], &s.ls[1]);
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 0, 8);
	EQ(m.lost, 1);
	EQ(m.timeouts, 1);
	EQ(m.retx_packets, 1);
	EQ(m.arrive_ns, 4295423);
	EQ(m.recv_done_ns, 4295723);
	EQ(m.send_done_ns, 4296073);
	EQ(s.host, 301);
	EQ(s.busy[0], 303);
	EQ(s.busy[1], 443);

	/*
	 * The last of two packets lost: GE alternating deterministically (p = r = 1, bad loses
	 * everything, good nothing): packet 0 good (kept), packet 1 bad (lost). 8192 B on one
	 * 100 Gb/s hop, d = 1000, no overheads, timeout_exp 1 (8192 ns): train 8320 B -> 666,
	 * timer at 666 + 8192 = 8858, resend of packet 1 (4160 B -> 333): f = 9191, arrive
	 * 10191, send 11191. The chain is good again at packet 2 (the resend is kept).
	 */
	struct model_link l = mklink(100 * GBPS, 1000, 4096, 64);
	l.loss.kind = MODEL_LOSS_GE;
	l.loss.p[0] = l.loss.p[1] = l.loss.p[2] = ONE;
	struct model_path p1 = mkpath(1, &l, MODEL_CUT_THROUGH);
	struct model_nic n1 = mknic(0, 0, 0, 0);
	n1.timeout_exp = 1;
	memset(&s, 0, sizeof(s));
	m = send1(&p1, &n1, &s, 1, 0, 0, 8192);
	EQ(m.lost, 1);
	EQ(m.timeouts, 1);
	EQ(m.retx_packets, 1);
	EQ(m.arrive_ns, 10191);
	EQ(m.send_done_ns, 11191);
	EQ(s.ls[0].packets, 3);
	EQ(s.ls[0].state, 2); /* packet 3 will be in the bad state */

	/* timeout_exp 0 is the IBA's "infinite": a tail loss never recovers */
	n1.timeout_exp = 0;
	EQ(model_timeout_ns(&n1), MODEL_NEVER);
	memset(&s, 0, sizeof(s));
	s.ls[0].state = 2;
	m = send1(&p1, &n1, &s, 1, 0, 0, 100);
	EQ(m.timeouts, 1);
	EQ(m.failed, 0);
	EQ(m.arrive_ns, MODEL_NEVER);
	EQ(m.send_done_ns, MODEL_NEVER);
	m = send1(&p1, &n1, &s, 1, 1, 0, 100);
	EQ(m.recv_done_ns, MODEL_NEVER); /* held behind it */
}

/*
 * Retry exhaustion. Every packet lost (Bernoulli p = 1) on an unlimited hop with no
 * latency or overheads, timeout_exp 10 (T_o = 4194304), retry_count 7: expirations at
 * k * T_o; the 8th has no retry left: the message fails at 8 T_o = 33554432.
 * On a 100 Gb/s hop each try also takes the train's 666 ns first (8192 B), and with
 * retry_count 3 and timeout_exp 14 (67108864): 4 (666 + 67108864) = 268438120.
 */
static void test_retry_exhaustion(void)
{
	struct model_link l = mklink(0, 0, 4096, 64);
	l.loss.kind = MODEL_LOSS_BERNOULLI;
	l.loss.p[0] = ONE;
	struct model_path p = mkpath(1, &l, MODEL_CUT_THROUGH);
	struct model_nic nic = mknic(0, 0, 0, 0);
	nic.timeout_exp = 10;
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 0, 8192);
	EQ(m.failed, 1);
	EQ(m.fail_hop, 0);
	EQ(m.timeouts, 8);
	EQ(m.lost, 8);
	EQ(m.retx_packets, 7 * 2);
	EQ(m.recv_done_ns, (nic.retry_count + 1) * 4194304LL);
	EQ(m.send_done_ns, 33554432);
	EQ(s.conn.failed, 1);
	/* later messages on the connection fail at once (flush), without touching the links */
	int64_t b0 = s.busy[0];
	m = send1(&p, &nic, &s, 1, 1, 100, 8192);
	EQ(m.failed, 1);
	EQ(m.fail_hop, -1);
	EQ(m.recv_done_ns, 33554432);
	m = send1(&p, &nic, &s, 1, 2, 40000000, 8192);
	EQ(m.recv_done_ns, 40000000);
	EQ(s.busy[0], b0);

	struct model_link r = mklink(100 * GBPS, 0, 4096, 64);
	r.loss.kind = MODEL_LOSS_BERNOULLI;
	r.loss.p[0] = ONE;
	struct model_link hops[2] = {mklink(100 * GBPS, 0, 4096, 64), r};
	struct model_path p2 = mkpath(2, hops, MODEL_CUT_THROUGH);
	nic.timeout_exp = 14;
	nic.retry_count = 3;
	memset(&s, 0, sizeof(s));
	m = send1(&p2, &nic, &s, 1, 0, 0, 8192);
	EQ(m.failed, 1);
	EQ(m.fail_hop, 1);
	EQ(m.timeouts, 4);
	EQ(m.recv_done_ns, 4 * (666 + 67108864LL));
	/* retry_count 0: the first expiration fails it */
	nic.retry_count = 0;
	memset(&s, 0, sizeof(s));
	m = send1(&p2, &nic, &s, 1, 0, 0, 8192);
	EQ(m.timeouts, 1);
	EQ(m.recv_done_ns, 666 + 67108864LL);
	/* with the NCCL defaults (20, 7) it takes 8 * 4.295 s = 34.36 s */
	nic.timeout_exp = 20;
	nic.retry_count = 7;
	memset(&s, 0, sizeof(s));
	m = send1(&p2, &nic, &s, 1, 0, 0, 8192);
	EQ(m.recv_done_ns, 8 * (666 + 4294967296LL));
}

/* ---- reordering, duplication, corruption ----------------------------------------- */

static void test_reorder_dup_corrupt(void)
{
	/* The 1 MiB two-hop message (arrive 87297). Every packet late by 1000 ns on hop 1:
	 * the last one decides: +1000. (Reordering never reorders messages: see the FIFO test.) */
	struct model_link l[2] = {mklink(100 * GBPS, 500, 4096, 64),
				  mklink(100 * GBPS, 300, 4096, 64)};
	struct model_nic nic = mknic(0, 300, 300, 200);
	l[1].reorder_p = ONE;
	l[1].reorder_delay_ns = 1000;
	l[0].reorder_p = ONE;
	l[0].reorder_delay_ns = 500;
	struct model_path p = mkpath(2, l, MODEL_CUT_THROUGH);
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg m = send1(&p, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.reordered, 512);
	EQ(m.arrive_ns, 87297 + 1000);
	/* One packet late by 50 us, somewhere: the message waits for it; the arrival is the
	 * late packet's own (its prefix train) + 50000, or the train's end if later. */
	l[0].reorder_p = l[1].reorder_p = 0;
	l[1].reorder_p = model_prob(1.0 / 256);
	l[1].reorder_delay_ns = 50000;
	int late = 0;
	const int nmsg = 4000;
	for (uint64_t msg = 0; msg < (uint64_t)nmsg; msg++) {
		memset(&s, 0, sizeof(s));
		m = send1(&p, &nic, &s, 1, msg, 1000, 1 << 20);
		CHECK(m.arrive_ns >= 87297, "never early: %lld", (long long)m.arrive_ns);
		if (m.reordered) {
			late++;
			CHECK(m.arrive_ns <= 87297 + 50000, "late %lld", (long long)m.arrive_ns);
		} else {
			EQ(m.arrive_ns, 87297);
		}
	}
	/* A message of 256 packets has a late one with q = 1 - (1 - p)^256 (0.633): binomial
	 * over nmsg, within 4 sd (the draws are seeded: it is deterministic). That is +-4.8 %
	 * of the mean (2531): a p 20 % off puts it outside (1.2 p: 2797), as does twice p
	 * (3461), which the old window (200..350 of 400 for 253 +- 9.6) let through. */
	double q = 1 - pow(1 - model_prob_value(l[1].reorder_p), 256);
	double mean = nmsg * q, sd = sqrt(nmsg * q * (1 - q));
	CHECK(fabs(late - mean) <= 4 * sd, "%d of %d messages had a late packet (binomial %.1f +- "
	      "4 x %.1f)", late, nmsg, mean, sd);
	l[1].reorder_p = 0;

	/* Every packet duplicated on hop 0: twice the bytes on both hops:
	 * T(2 * 1064960) = ceil(170393.6) = 170394; arrive 1300 + 800 + 170394 = 172494. */
	l[0].duplicate_p = ONE;
	memset(&s, 0, sizeof(s));
	m = send1(&p, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.duplicates, 256);
	EQ(m.arrive_ns, 172494);
	l[0].duplicate_p = 0;

	/* Corruption: counted only when configured, every packet at p = 1, ~1% at 0.01;
	 * model_corrupt_next gives the data path the same packets; the bit is deterministic. */
	memset(&s, 0, sizeof(s));
	m = send1(&p, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.corrupted, 0);
	struct model_key k = {.seed = 42, .conn = 1, .msg = 0};
	EQ(model_corrupt_next(&p, &k, 0, 256), 256);
	l[1].corrupt_p = ONE;
	memset(&s, 0, sizeof(s));
	m = send1(&p, &nic, &s, 1, 0, 1000, 1 << 20);
	EQ(m.corrupted, 256);
	EQ(m.arrive_ns, 87297); /* silent: no timing effect */
	EQ(model_corrupt_next(&p, &k, 17, 256), 17);
	l[1].corrupt_p = model_prob(0.01);
	long total = 0;
	for (uint64_t msg = 0; msg < 2000; msg++) {
		k.msg = msg;
		memset(&s, 0, sizeof(s));
		m = send1(&p, &nic, &s, 1, msg, 1000, 1 << 20);
		uint32_t n = 0;
		for (uint64_t i = model_corrupt_next(&p, &k, 0, 256); i < 256;
		     i = model_corrupt_next(&p, &k, i + 1, 256)) {
			n++;
			k.packet = i;
			uint64_t bit = model_corrupt_bit(&k, 4096);
			CHECK(bit < 4096 * 8 && bit == model_corrupt_bit(&k, 4096), "bit %llu",
			      (unsigned long long)bit);
		}
		EQ(m.corrupted, n);
		total += n;
	}
	/* 512000 packets at 1%: 5120 +- 2.576 * 71.2 (99%) */
	CHECK(labs(total - 5120) < 184, "corrupted %ld of 512000", total);
	EQ(model_corrupt_bit(&k, 0), UINT64_MAX);
	uint64_t bits[8] = {0};
	for (uint64_t i = 0; i < 80000; i++) {
		k.packet = i;
		bits[model_corrupt_bit(&k, 1)]++;
	}
	for (int b = 0; b < 8; b++)
		CHECK(bits[b] > 9600 && bits[b] < 10400, "bit %d flipped %llu of 80000", b,
		      (unsigned long long)bits[b]);
}

/* ---- determinism ------------------------------------------------------------------- */

struct trace {
	int64_t arrive[3000];
	uint32_t lost, dup, reo, cor;
};

static void run_trace(uint64_t seed, struct trace *tr)
{
	struct model_link l[3] = {mklink(200 * GBPS, 140, 4096, 26),
				  mklink(400 * GBPS, 100, 4096, 26),
				  mklink(200 * GBPS, 10, 4096, 26)};
	l[0].loss = (struct model_loss){MODEL_LOSS_BERNOULLI, {model_prob(0.002)}};
	l[1].loss = (struct model_loss){MODEL_LOSS_GE,
					{model_prob(0.001), model_prob(0.3), model_prob(0.7), 0}};
	l[2].loss = (struct model_loss){MODEL_LOSS_4STATE,
					{model_prob(0.001), model_prob(0.5), model_prob(0.1),
					 model_prob(0.2), model_prob(0.0005)}};
	l[0].jitter = (struct model_jitter){MODEL_DIST_NORMAL, 200, 0.5, 0, NULL};
	l[2].jitter = (struct model_jitter){MODEL_DIST_PARETO, 100, 0, 0, NULL};
	l[1].reorder_p = model_prob(0.001);
	l[1].reorder_delay_ns = 3000;
	l[0].duplicate_p = model_prob(0.001);
	l[2].corrupt_p = model_prob(0.0001);
	struct model_path p = mkpath(3, l, MODEL_CUT_THROUGH);
	struct model_nic nic = mknic(192 * GBPS, 300, 300, 200);
	nic.timeout_scale_ppm = 1;
	memset(tr, 0, sizeof(*tr));
	int64_t host = 0, busy[3] = {0};
	struct model_loss_state ls[3] = {{0}};
	struct model_conn conn[3];
	memset(conn, 0, sizeof(conn));
	for (int i = 0; i < 3000; i++) {
		struct model_key k = {.seed = seed, .conn = (uint64_t)(i % 3),
				      .msg = (uint64_t)(i / 3)};
		struct model_msg m;
		model_message(&p, &nic, (int64_t)i * 5000, 128 << 10, &k, &host, busy, ls,
			      &conn[i % 3], &m);
		tr->arrive[i] = m.arrive_ns;
		tr->lost += m.lost;
		tr->dup += m.duplicates;
		tr->reo += m.reordered;
		tr->cor += m.corrupted;
	}
}

static void test_determinism(void)
{
	static struct trace a, b, c;
	run_trace(1, &a);
	run_trace(1, &b);
	run_trace(2, &c);
	EQ(memcmp(&a, &b, sizeof(a)), 0);
	int differ = 0;
	for (int i = 0; i < 3000; i++)
		differ += a.arrive[i] != c.arrive[i];
	printf("  determinism: seed 1 twice identical; seed 2 changes %d of 3000 arrivals "
	       "(losses %u/%u, duplicates %u/%u, reordered %u/%u, corrupted %u/%u)\n",
	       differ, a.lost, c.lost, a.dup, c.dup, a.reo, c.reo, a.cor, c.cor);
	CHECK(differ > 2000, "seed 2 changed only %d arrivals", differ);
	CHECK(a.lost && a.dup && a.reo && a.cor, "every impairment happened");
	CHECK(a.lost != c.lost || a.dup != c.dup || a.reo != c.reo, "seed 2's counts");
}

/* ---- validation ------------------------------------------------------------------- */

static void test_validation(void)
{
	char err[MODEL_ERR_LEN];
	struct model_link l = mklink(100 * GBPS, 10, 4096, 26);
	struct model_link b;
#define BAD(fn, obj, msg)                                                                          \
	do {                                                                                       \
		err[0] = 0;                                                                        \
		int rc_ = fn(&obj, err, sizeof(err));                                              \
		CHECK(rc_ == -EINVAL && strcmp(err, msg) == 0, "%d '%s', want '%s'", rc_, err,     \
		      msg);                                                                        \
	} while (0)
	b = l, b.rate_bps = 500;
	BAD(model_link_resolve, b,
	    "rate_gbps: 5e-07 Gb/s (500 b/s) is out of range 0.001..1000000 Gb/s (0: unlimited)");
	b = l, b.latency_ns = -1;
	BAD(model_link_resolve, b, "latency_ns: -1 is out of range 0..1000000000000 ns");
	b = l, b.mtu = 32;
	BAD(model_link_resolve, b, "mtu: 32 is out of range 64..16777216 bytes");
	b = l, b.hdr_bytes = 5000;
	BAD(model_link_resolve, b, "hdr_bytes: 5000 is out of range 0..4096");
	b = l, b.jitter.dist = MODEL_DIST_NORMAL, b.jitter.rho = 1;
	BAD(model_link_resolve, b, "jitter.corr: 1 is out of range [0, 1)");
	b.jitter.rho = NAN;
	BAD(model_link_resolve, b, "jitter.corr: nan is out of range [0, 1)");
	b = l, b.jitter.dist = (enum model_dist)9;
	BAD(model_link_resolve, b,
	    "jitter.dist: 9 is not one of none (0), uniform, normal, pareto, paretonormal, "
	    "table (5)");
	b = l, b.jitter.dist = MODEL_DIST_UNIFORM, b.jitter.sd_ns = -3;
	BAD(model_link_resolve, b, "jitter.sd_ns: -3 is out of range 0..10000000000");
	int64_t tab[3] = {0, 10, 5};
	b = l, b.jitter.dist = MODEL_DIST_TABLE, b.jitter.table = tab, b.jitter.ntable = 3;
	BAD(model_link_resolve, b,
	    "jitter.table: entry 2 (5) is below entry 1 (10); an inverse CDF must not decrease");
	b.jitter.ntable = 0;
	BAD(model_link_resolve, b, "jitter.table: 0 entries; 1..4096 are needed");
	b.jitter.ntable = 2, b.jitter.table = NULL;
	BAD(model_link_resolve, b, "jitter.table: missing (2 entries announced)");
	b = l, b.loss.kind = MODEL_LOSS_4STATE, b.loss.p[0] = 1u << 31, b.loss.p[4] = 3u << 30;
	BAD(model_link_resolve, b,
	    "loss.p14: 0.75 with p13 0.5 leaves state 1 with probability 1.25 > 1");
	b = l, b.loss.kind = MODEL_LOSS_4STATE, b.loss.p[1] = 3u << 30, b.loss.p[2] = 1u << 31;
	BAD(model_link_resolve, b,
	    "loss.p32: 0.5 with p31 0.75 leaves state 3 with probability 1.25 > 1");
	b = l, b.loss.kind = (enum model_loss_kind)4;
	BAD(model_link_resolve, b,
	    "loss.model: 4 is not one of none (0), bernoulli, ge, 4state (3)");
	b = l, b.reorder_p = 1u << 31;
	BAD(model_link_resolve, b,
	    "reorder_delay_ns: 0 with reorder 0.5; a reordered packet needs a delay > 0");
	b = l, b.loss.kind = MODEL_LOSS_GE, b.loss.p[0] = ONE, b.loss.p[1] = ONE;
	CHECK(model_link_resolve(&b, err, sizeof(err)) == 0, "GE at the extremes: %s", err);

	struct model_nic n = mknic(0, 0, 0, 0), m;
	m = n, m.host_rate_bps = 2000000000000000ULL;
	BAD(model_nic_resolve, m,
	    "host_rate_gbps: 2000000 Gb/s (2000000000000000 b/s) is out of range 0.001..1000000 "
	    "Gb/s (0: unlimited)");
	m = n, m.timeout_exp = 32;
	BAD(model_nic_resolve, m, "timeout_exp: 32 is out of range 0..31 (0: never)");
	m = n, m.retry_count = 8;
	BAD(model_nic_resolve, m, "retry_count: 8 is out of range 0..7");
	m = n, m.timeout_scale_ppm = 2000000;
	BAD(model_nic_resolve, m, "timeout_scale: 2.000000 (2000000 ppm) is out of range 0..1");
	m = n, m.o_recv_ns = MODEL_TIME_MAX_NS + 1;
	BAD(model_nic_resolve, m, "o_recv_ns: 1000000000001 is out of range 0..1000000000000 ns");

	struct model_path p = mkpath(1, &l, MODEL_CUT_THROUGH), q;
	q = p, q.nhops = 9;
	BAD(model_path_check, q, "path: 9 hops; 0..8 are possible");
	q = p, q.hop[0] = NULL;
	BAD(model_path_check, q, "path: hop 0 (link 100) has no link");
	q = p, q.switching = (enum model_switching)2;
	BAD(model_path_check, q, "switching: 2 is not cut_through (0) or store_forward (1)");
#undef BAD
	/* a short err buffer truncates, never overflows */
	char tiny[8];
	b = l, b.mtu = 1;
	CHECK(model_link_resolve(&b, tiny, sizeof(tiny)) == -EINVAL && strlen(tiny) == 7,
	      "tiny: '%s'", tiny);
	CHECK(model_link_resolve(&b, NULL, 0) == -EINVAL, "no err buffer");

	/* model_message's own refusals */
	struct st s;
	memset(&s, 0, sizeof(s));
	struct model_msg out;
	struct model_key k = {0};
	struct model_nic hn = mknic(192 * GBPS, 0, 0, 0);
	EQ(model_message(&p, &n, 0, 1, &k, &s.host, s.busy, s.ls, NULL, &out), -EINVAL);
	EQ(model_message(&p, &hn, 0, 1, &k, NULL, s.busy, s.ls, &s.conn, &out), -EINVAL);
	EQ(model_message(&p, &n, 0, 1, &k, NULL, NULL, s.ls, &s.conn, &out), -EINVAL);
	q = p, q.nhops = 9;
	EQ(model_message(&q, &n, 0, 1, &k, NULL, s.busy, s.ls, &s.conn, &out), -EINVAL);
	struct model_link g = l;
	g.loss.kind = MODEL_LOSS_GE;
	q = mkpath(1, &g, MODEL_CUT_THROUGH);
	EQ(model_message(&q, &n, 0, 1, &k, NULL, s.busy, NULL, &s.conn, &out), -EINVAL);
	EQ(model_message(&p, &n, 0, 1, &k, NULL, s.busy, NULL, &s.conn, &out), 0);
}

/* ---- cost ---------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_cost(void)
{
	struct model_path p = hdr_path();
	struct model_nic nic = mknic(192 * GBPS, 300, 300, 200);
	struct st s;
	memset(&s, 0, sizeof(s));
	const int N = 300000;
	double t = now_s();
	int64_t sink = 0;
	for (int i = 0; i < N; i++)
		sink += send1(&p, &nic, &s, 1, (uint64_t)i, i * 20000LL, 512 << 10).arrive_ns;
	double plain = (now_s() - t) / N * 1e9;
	/* every impairment on: jitter with correlation on both hops, Bernoulli and GE loss,
	 * reordering, duplication, corruption */
	hdr_links[0].jitter = (struct model_jitter){MODEL_DIST_PARETONORMAL, 100, 0.5, 0, NULL};
	hdr_links[1].jitter = (struct model_jitter){MODEL_DIST_NORMAL, 50, 0.2, 0, NULL};
	hdr_links[0].loss = (struct model_loss){MODEL_LOSS_BERNOULLI, {model_prob(1e-4)}};
	hdr_links[1].loss = (struct model_loss){MODEL_LOSS_GE,
						{model_prob(1e-4), model_prob(0.5), ONE, 0}};
	hdr_links[1].reorder_p = model_prob(1e-4);
	hdr_links[1].reorder_delay_ns = 1000;
	hdr_links[0].duplicate_p = model_prob(1e-4);
	hdr_links[1].corrupt_p = model_prob(1e-5);
	nic.timeout_scale_ppm = 1;
	memset(&s, 0, sizeof(s));
	t = now_s();
	for (int i = 0; i < N; i++)
		sink += send1(&p, &nic, &s, 1, (uint64_t)i, i * 20000LL, 512 << 10).arrive_ns;
	double full = (now_s() - t) / N * 1e9;
	memset(&s, 0, sizeof(s));
	t = now_s();
	for (int i = 0; i < N; i++)
		sink += send1(&p, &nic, &s, 1, (uint64_t)i, (int64_t)i * 200, 64).arrive_ns;
	double small = (now_s() - t) / N * 1e9;
	printf("  cost: model_message %.0f ns per call (HDR path, 512 KiB, no impairments), %.0f "
	       "ns (every impairment on), %.0f ns (64 B, every impairment on) [%lld]\n",
	       plain, full, small, (long long)(sink & 1));
	hdr_path();
}

/*
 * model_hop by hand: test_1mib_two_hops's path, hop by hop, from t = 1300 (posted at 1000,
 * o_send 300): T(W) = 85197, T(first) = T(last) = T(4160 B) = 333.
 * cut-through: hop 0 from {1300, 1300, 0}: start 1300, done 86497, next {1800, 86997, 333};
 *   hop 1: start 1800, done max(1800 + 85197, 86997 + (333 - 333)) = 86997, arrival 87297.
 * store-and-forward: hop 0's next.first = 1300 + 500 + 333 = 2133; hop 1: start 2133,
 *   done max(2133 + 85197, 86997 + 333) = 87330, arrival 87630.
 * A busy link delays the start; a later train [lo, hi) carries only its own packets.
 */
/* One step, checked: start, done, and the next stamp's first and last (-1: not checked). */
static struct model_hop_times hop1(const struct model_link *l, enum model_switching sw,
				   const struct model_train *tr, uint64_t extra, int64_t busy,
				   const struct model_stamp *in, const int64_t want[4])
{
	struct model_hop_times h;
	model_hop(l, sw, tr, extra, busy, in, &h);
	int64_t got[4] = {h.start_ns, h.done_ns, h.next.first_ns, h.next.last_ns};
	for (int i = 0; i < 4; i++)
		CHECK(want[i] < 0 || got[i] == want[i], "model_hop: time %d = %lld, want %lld", i,
		      (long long)got[i], (long long)want[i]);
	return h;
}

static void test_hop_worked(void)
{
	struct model_link l[2] = {mklink(100 * GBPS, 500, 4096, 64),
				  mklink(100 * GBPS, 300, 4096, 64)};
	struct model_path ct = mkpath(2, l, MODEL_CUT_THROUGH);
	struct model_train tr;
	model_train_init(&tr, &ct, 1 << 20);
	EQ(tr.mtu, 4096);
	EQ(tr.packets, 256);
	EQ(tr.lo, 0);
	EQ(tr.hi, 256);
	const enum model_switching CT = MODEL_CUT_THROUGH, SF = MODEL_STORE_FORWARD;
	struct model_stamp in = {1300, 1300, 0};
	struct model_hop_times h =
		hop1(&l[0], CT, &tr, 0, 0, &in, (int64_t[]){1300, 86497, 1800, 86997});
	EQ(h.next.last_tx_ns, 333);
	hop1(&l[1], CT, &tr, 0, 0, &h.next, (int64_t[]){1800, 86997, -1, 87297});
	h = hop1(&l[0], SF, &tr, 0, 0, &in, (int64_t[]){1300, 86497, 2133, 86997});
	hop1(&l[1], SF, &tr, 0, 0, &h.next, (int64_t[]){2133, 87330, -1, 87630});
	/* hop 0 busy until 5000: everything 3700 later (the train is the bottleneck) */
	hop1(&l[0], CT, &tr, 0, 5000, &in, (int64_t[]){5000, 90197, 5500, 90697});
	/* packets [255, 256): the last, 4096 + 64 B = 333 ns; 640 duplicate bytes add 51 ns
	 * (T(4800 B) = 384) */
	tr.lo = 255;
	hop1(&l[0], CT, &tr, 0, 0, &in, (int64_t[]){1300, 1300 + 333, -1, -1});
	hop1(&l[0], CT, &tr, 640, 0, &in, (int64_t[]){1300, 1300 + 384, -1, -1});
	/* unlimited rate: only the latency */
	struct model_link fast = mklink(0, 70, 4096, 64);
	h = hop1(&fast, SF, &tr, 0, 0, &in, (int64_t[]){1300, 1300, 1370, 1370});
	EQ(h.next.last_tx_ns, 0);
}

/* ---- model_hop: byte-identical to the function before it ------------------------- */

/*
 * A sweep of random paths, NICs and message streams (0..8 hops, both switching modes, every
 * impairment in some, several connections contending), folded into one FNV-1a hash of every
 * output, busy-until, Markov state, FIFO clamp and model_ideal_ns after each message. The
 * hashes are those that model_message gave before it became a loop over model_hop (commit
 * 6556544, the same sweep): the loop gives byte-identical times. One sweep is integer-only (no
 * impairments), one has them all (libm's log1p and friends, deterministic on one platform).
 * Before the change, the same sweep over 200 more seeds each (6.3 million messages) printed
 * the same hashes as after it.
 */
static uint64_t fnv(uint64_t h, int64_t v)
{
	for (int i = 0; i < 8; i++) {
		h ^= (uint64_t)v >> (8 * i) & 0xff;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t pick(struct model_key *r, uint64_t n)
{
	r->packet++;
	return model_rand(r, 0) % n;
}

static const uint64_t sweep_rates[] = {0,	   1000000,    999999937ULL, 25 * GBPS,
				       100 * GBPS, 192 * GBPS, 200 * GBPS,   400 * GBPS};
static const uint32_t sweep_mtus[] = {64, 1500, 4096, 9000};

static void sweep_link(struct model_key *r, struct model_link *l, int impair)
{
	memset(l, 0, sizeof(*l));
	l->rate_bps = sweep_rates[pick(r, 8)];
	l->latency_ns = (int64_t)pick(r, 4) * (int64_t)pick(r, 1000);
	l->mtu = sweep_mtus[pick(r, 4)];
	l->hdr_bytes = (uint32_t)pick(r, 80);
	l->hdr_first_extra = (uint32_t)pick(r, 3) * 8;
	l->hdr_last_extra = (uint32_t)pick(r, 3) * 2;
	if (impair) {
		switch (pick(r, 5)) {
		case 1:
			l->loss = (struct model_loss){MODEL_LOSS_BERNOULLI,
						      {(uint32_t)pick(r, 1u << 23)}};
			break;
		case 2:
			l->loss = (struct model_loss){MODEL_LOSS_GE,
						      {model_prob(0.002), model_prob(0.3),
						       model_prob(0.6), 0}};
			break;
		case 3:
			l->loss = (struct model_loss){MODEL_LOSS_4STATE,
						      {model_prob(0.001), model_prob(0.5),
						       model_prob(0.1), model_prob(0.2),
						       model_prob(0.0005)}};
			break;
		}
		if (pick(r, 3) == 0)
			l->jitter = (struct model_jitter){(enum model_dist)(1 + pick(r, 4)),
							  (int64_t)pick(r, 500),
							  0.3 * (double)pick(r, 2), 0, NULL};
		if (pick(r, 4) == 0) {
			l->reorder_p = (uint32_t)pick(r, 1u << 26);
			l->reorder_delay_ns = 1 + (int64_t)pick(r, 5000);
		}
		if (pick(r, 4) == 0)
			l->duplicate_p = (uint32_t)pick(r, 1u << 23);
		if (pick(r, 4) == 0)
			l->corrupt_p = (uint32_t)pick(r, 1u << 24);
	}
	char err[MODEL_ERR_LEN];
	CHECK(model_link_resolve(l, err, sizeof(err)) == 0, "sweep link: %s", err);
}

static uint64_t sweep_msgs, sweep_lost, sweep_timeouts, sweep_failed, sweep_dup, sweep_reo;

static uint64_t sweep(uint64_t seed, int impair, int paths)
{
	struct model_key r = {.seed = seed, .purpose = 98};
	uint64_t h = 0xcbf29ce484222325ULL;
	static const uint64_t sizes[] = {0, 1, 8, 4095, 4096, 4097, 65536, 1 << 20};
	for (int pi = 0; pi < paths; pi++) {
		struct model_link l[MODEL_MAX_HOPS];
		int nh = (int)pick(&r, MODEL_MAX_HOPS + 1);
		for (int j = 0; j < nh; j++)
			sweep_link(&r, &l[j], impair);
		struct model_path p =
			mkpath(nh, l, pick(&r, 2) ? MODEL_STORE_FORWARD : MODEL_CUT_THROUGH);
		struct model_nic nic = mknic(pick(&r, 2) ? sweep_rates[1 + pick(&r, 7)] : 0,
					     (int64_t)pick(&r, 500), (int64_t)pick(&r, 500),
					     (int64_t)pick(&r, 300));
		nic.timeout_exp = (uint32_t)pick(&r, 4) * 7;
		nic.retry_count = (uint32_t)pick(&r, 8);
		nic.timeout_scale_ppm = 1 + (uint32_t)pick(&r, 1000);
		struct st s;
		memset(&s, 0, sizeof(s));
		struct model_conn conn[3];
		memset(conn, 0, sizeof(conn));
		int64_t t = 0;
		for (int i = 0; i < 24; i++) {
			t += (int64_t)pick(&r, 4) * (int64_t)pick(&r, 20000);
			uint64_t bytes = sizes[pick(&r, 8)] + (pick(&r, 2) ? pick(&r, 70000) : 0);
			uint64_t c = pick(&r, 3);
			struct model_key k = {.seed = seed + 1, .conn = c, .msg = (uint64_t)i};
			struct model_msg m;
			int rc = model_message(&p, &nic, t, bytes, &k, &s.host, s.busy, s.ls,
					       &conn[c], &m);
			int64_t v[] = {rc,
				       m.arrive_ns,
				       m.recv_done_ns,
				       m.send_done_ns,
				       (int64_t)m.packets,
				       m.lost,
				       m.timeouts,
				       (int64_t)m.retx_packets,
				       m.duplicates,
				       m.reordered,
				       m.corrupted,
				       m.failed,
				       m.fail_hop,
				       s.host,
				       conn[c].last_arrive,
				       conn[c].failed,
				       model_ideal_ns(&p, &nic, bytes)};
			for (size_t q = 0; q < sizeof(v) / sizeof(v[0]); q++)
				h = fnv(h, v[q]);
			sweep_msgs++;
			sweep_lost += m.lost;
			sweep_timeouts += m.timeouts;
			sweep_failed += (uint64_t)m.failed;
			sweep_dup += m.duplicates;
			sweep_reo += m.reordered;
			for (int j = 0; j < nh; j++) {
				h = fnv(h, s.busy[j]);
				h = fnv(h, s.ls[j].state);
				h = fnv(h, (int64_t)s.ls[j].packets);
			}
		}
	}
	return h;
}

static void test_hop_identical(void)
{
	uint64_t plain = sweep(1, 0, 3000), impaired = sweep(2, 1, 1000);
	EQ(plain, 0xd998f584583471e7ULL);
	EQ(impaired, 0xd21b81b1ec6a5bc8ULL);
	printf("  model_hop: %llu messages on 4000 random paths, hashes %016llx (timing only), "
	       "%016llx (impairments: %llu losses, %llu timeouts, %llu failed, %llu duplicates, "
	       "%llu reordered)\n",
	       (unsigned long long)sweep_msgs, (unsigned long long)plain,
	       (unsigned long long)impaired, (unsigned long long)sweep_lost,
	       (unsigned long long)sweep_timeouts, (unsigned long long)sweep_failed,
	       (unsigned long long)sweep_dup, (unsigned long long)sweep_reo);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_rand),
	CHECK_CASE(test_1mib_two_hops),
	CHECK_CASE(test_hdr_worked),
	CHECK_CASE(test_fifo_incast),
	CHECK_CASE(test_host_limit),
	CHECK_CASE(test_unlimited),
	CHECK_CASE(test_extremes),
	CHECK_CASE(test_ideal_property),
	CHECK_CASE(test_loss_mid),
	CHECK_CASE(test_loss_tail),
	CHECK_CASE(test_retry_exhaustion),
	CHECK_CASE(test_reorder_dup_corrupt),
	CHECK_CASE(test_determinism),
	CHECK_CASE(test_validation),
	CHECK_CASE(test_hop_worked),
	CHECK_CASE(test_hop_identical),
	CHECK_CASE(test_cost),
};

CHECK_MAIN(cases)
