/* SPDX-License-Identifier: MIT */
/*
 * test_fault_proc.c - the fault actions on processes, setup calls and connections
 * (issue 14), each through the code that carries it out:
 *   fault_spec_check  node_freeze, straggle, regmr_fail/connect_fail/accept_fail, comm_hang;
 *   fault_call_fails  the nth call, a seeded fraction (the same calls for the same seed);
 *   fst_call_fault    the plugin's question, on a published fault: the one-branch flag,
 *                     the node, the window, the shared call counter;
 *   chan              comm_hang holds both ends with no error, and lets go; a frozen
 *                     receiver's staged sends complete, receives wait for it to run;
 *   faultd            the daemon's edges with recording ops: freeze STOP/CONT, a straggle's
 *                     duty cycle, comm_hang's hold and release, a clear, faultd_release.
 */
#include "sim/core/chan.h"
#include "sim/core/fault.h"
#include "sim/core/fstate.h"
#include "sim/faultd.h"
#include "sim/scn/scenario.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sim/test/check.h"
#include "sim/test/fenv.h"

#define MS 1000000LL

static struct fault_spec spec(enum fault_kind k, int64_t start, int64_t dur)
{
	return fenv_spec(k, start, dur);
}

static int64_t mono_ns(void)
{
	return fenv_now_ns();
}

static void spec_is(const struct fault_spec *f, const char *want, int line)
{
	char err[256] = "";
	int rc = fault_spec_check(f, err, sizeof(err));
	if (!want)
		CHECK(rc == 0, "line %d: refused: %s", line, err);
	else
		CHECK(rc == -EINVAL && !strcmp(err, want), "line %d: rc %d '%s', want '%s'", line,
		      rc, err, want);
}
#define SPEC(f, want) spec_is(f, want, __LINE__)

static void test_kinds(void)
{
	static const struct {
		enum fault_kind k;
		const char *name;
		enum fault_action a;
	} rows[] = {
		{FAULT_K_NODE_FREEZE, "node_freeze", FAULT_A_FREEZE},
		{FAULT_K_STRAGGLE, "straggle", FAULT_A_STRAGGLE},
		{FAULT_K_REGMR_FAIL, "regmr_fail", FAULT_A_CALLFAIL},
		{FAULT_K_CONNECT_FAIL, "connect_fail", FAULT_A_CALLFAIL},
		{FAULT_K_ACCEPT_FAIL, "accept_fail", FAULT_A_CALLFAIL},
		{FAULT_K_COMM_HANG, "comm_hang", FAULT_A_HANG},
		{FAULT_K_NODE_KILL, "node_kill", FAULT_A_KILL},
		{FAULT_K_LINK_DOWN, "link_down", FAULT_A_DOWN},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		CHECK(!strcmp(fault_kind_names[rows[i].k], rows[i].name) &&
			      fault_kind_action(rows[i].k) == rows[i].a,
		      "%s: action %d", rows[i].name, fault_kind_action(rows[i].k));
	CHECK(fault_kind_action(FAULT_K_COUNT) == FAULT_A_NONE, "out of range");
	for (int k = 0; k < FAULT_K_COUNT; k++)
		CHECK(fault_kind_names[k] && fault_kind_action((enum fault_kind)k) != FAULT_A_NONE,
		      "kind %d has a name and an action", k);
}

static void test_spec_check(void)
{
	struct fault_spec f = spec(FAULT_K_NODE_FREEZE, 0, FAULT_FOREVER);
	SPEC(&f, "node: node_freeze needs a node");
	f.node = 1;
	SPEC(&f, NULL);
	f = spec(FAULT_K_STRAGGLE, 0, 1000 * MS);
	f.node = 0;
	f.slow_period_ns = 10 * MS;
	f.frac = model_prob(0.5);
	SPEC(&f, NULL);
	f.slow_period_ns = 999999;
	SPEC(&f,
	     "period: a straggle stops its node for a fraction (duty, in (0, 1)) of a period "
	     "of at least 1ms");
	f.slow_period_ns = 10 * MS;
	f.frac = 0;
	SPEC(&f,
	     "period: a straggle stops its node for a fraction (duty, in (0, 1)) of a period "
	     "of at least 1ms");
	f.frac = MODEL_PROB_ONE;
	SPEC(&f,
	     "period: a straggle stops its node for a fraction (duty, in (0, 1)) of a period "
	     "of at least 1ms");
	f.frac = model_prob(0.5);
	f.node = FAULT_ANY;
	SPEC(&f, "node: straggle needs a node");
	f = spec(FAULT_K_REGMR_FAIL, 0, FAULT_FOREVER);
	f.frac = MODEL_PROB_ONE;
	SPEC(&f, NULL);
	f.err_kind = FAULT_E_COUNT;
	SPEC(&f, "error: unknown error 3");
	f.err_kind = FAULT_E_REMOTE;
	f.frac = 0;
	SPEC(&f, "fraction: 0 fails no call");
	f.nth = 2;
	SPEC(&f, NULL);
	f = spec(FAULT_K_COMM_HANG, 0, FAULT_FOREVER);
	SPEC(&f, "conn: comm_hang needs a connection scope");
	f.conn_scope = 1;
	SPEC(&f, NULL);
}

static void test_call_fails(void)
{
	struct fault_spec f = spec(FAULT_K_CONNECT_FAIL, 0, FAULT_FOREVER);
	f.nth = 3;
	for (uint64_t n = 1; n <= 10; n++)
		CHECK(fault_call_fails(&f, 1, 0, n) == (n == 3), "nth 3: call %" PRIu64, n);
	f.nth = 0;
	f.frac = MODEL_PROB_ONE;
	for (uint64_t n = 1; n <= 10; n++)
		CHECK(fault_call_fails(&f, 1, 0, n), "every call: %" PRIu64, n);
	/* a quarter, seeded: reproducible, about a quarter, and another seed picks others */
	f.frac = model_prob(0.25);
	int k = 0, same = 1, other = 0;
	for (uint64_t n = 1; n <= 4000; n++) {
		int a = fault_call_fails(&f, 7, 2, n);
		k += a;
		same &= a == fault_call_fails(&f, 7, 2, n);
		other += a != fault_call_fails(&f, 8, 2, n);
	}
	CHECK(k > 850 && k < 1150, "fraction 0.25 of 4000 calls: %d", k);
	CHECK(same && other > 200, "seeded: same %d, differs for another seed in %d", same, other);
}

/* ---- the plugin's question -------------------------------------------------------------- */

/* A fabric state of two 25 Gb/s links, for the faults the plugin asks it about. */
struct two_links {
	void *base;
	size_t len;
	struct fst_view *v;
	struct fst_shm *shm;
	int64_t now; /* when it was opened */
};

static void two_links_open(struct two_links *t)
{
	struct model_link links[2] = {{.rate_bps = 25000000000ull, .latency_ns = 500, .mtu = 4096},
				      {.rate_bps = 25000000000ull, .latency_ns = 500, .mtu = 4096}};
	struct model_nic nic = {.timeout_exp = 10, .retry_count = 7, .timeout_scale_ppm = 1000000};
	fenv_resolve(links, 2, &nic);
	t->v = fenv_map(2, links, 2, 3, &t->base, &t->len);
	t->shm = t->v->shm;
	t->now = mono_ns();
}

static void test_fst_call_fault(void)
{
	struct two_links t;
	two_links_open(&t);
	struct fst_shm *shm = t.shm;
	int64_t now = t.now;
	uint32_t fid = 99, id;
	uint64_t call = 0;
	/* nothing published: the flag is down, the slow path says no */
	CHECK(!fst_call_armed(shm, FAULT_K_REGMR_FAIL) && !fst_call_armed(NULL, FAULT_K_REGMR_FAIL),
	      "no flag without a fault");
	CHECK(fst_call_fault(shm, FAULT_K_REGMR_FAIL, 1, now, &fid, &call) == 0,
	      "no fault, no failure");
	/* a link fault does not raise it */
	struct fault_spec l = spec(FAULT_K_LINK_DOWN, 0, MS);
	l.nlinks = 1;
	CHECK(fst_fault_add(shm, &l, now, &id) == 0 && !fst_call_armed(shm, FAULT_K_REGMR_FAIL),
	      "a link_down raises no call flag");
	/* the 2nd regMr on node 1 fails, from now on */
	struct fault_spec f = spec(FAULT_K_REGMR_FAIL, 0, FAULT_FOREVER);
	f.node = 1;
	f.nth = 2;
	CHECK(fst_fault_add(shm, &f, now, &id) == 0 && id == 1, "add");
	CHECK(fst_call_armed(shm, FAULT_K_REGMR_FAIL) &&
		      !fst_call_armed(shm, FAULT_K_CONNECT_FAIL) &&
		      !fst_call_armed(shm, FAULT_K_ACCEPT_FAIL),
	      "only regmr_fail's flag: %#x", atomic_load(&t.shm->call_kinds));
	CHECK(fst_call_fault(shm, FAULT_K_REGMR_FAIL, 0, now, &fid, &call) == 0,
	      "node 0: not its node");
	CHECK(fst_call_fault(shm, FAULT_K_CONNECT_FAIL, 1, now, &fid, &call) == 0, "another kind");
	CHECK(fst_call_fault(shm, FAULT_K_REGMR_FAIL, 1, now, &fid, &call) == 0, "call 1 passes");
	CHECK(fst_call_fault(shm, FAULT_K_REGMR_FAIL, 1, now, &fid, &call) == 1 && fid == 1 &&
		      call == 2,
	      "call 2 fails (fid %u, call %" PRIu64 ")", fid, call);
	CHECK(fst_call_fault(shm, FAULT_K_REGMR_FAIL, 1, now, &fid, &call) == 0, "call 3 passes");
	struct fst_fault *ff = fst_fault(shm, 1);
	CHECK(atomic_load(&ff->calls) == 3 && atomic_load(&ff->hit) == 1 &&
		      atomic_load(&ff->failed) == 1,
	      "counted: calls %u hit %" PRIu64, atomic_load(&ff->calls), atomic_load(&ff->hit));
	/* outside its window: a connect_fail 1 s from now, for 1 ms, any node, every call */
	f = spec(FAULT_K_CONNECT_FAIL, 1000 * MS, MS);
	f.frac = MODEL_PROB_ONE;
	CHECK(fst_fault_add(shm, &f, now, &id) == 0, "add");
	CHECK(fst_call_fault(shm, FAULT_K_CONNECT_FAIL, 0, now, &fid, &call) == 0,
	      "before its window");
	CHECK(fst_call_fault(shm, FAULT_K_CONNECT_FAIL, 0, now + 1000 * MS, &fid, &call) == 1 &&
		      fid == id,
	      "in its window");
	CHECK(fst_call_fault(shm, FAULT_K_CONNECT_FAIL, 5, now + 1001 * MS, &fid, &call) == 0,
	      "after");
	/* cleared: no more */
	f = spec(FAULT_K_ACCEPT_FAIL, 0, FAULT_FOREVER);
	f.frac = MODEL_PROB_ONE;
	CHECK(fst_fault_add(shm, &f, now, &id) == 0, "add");
	CHECK(fst_call_fault(shm, FAULT_K_ACCEPT_FAIL, 0, now, &fid, &call) == 1, "accept fails");
	atomic_store(&fst_fault(shm, id)->until, now + 1);
	CHECK(fst_call_fault(shm, FAULT_K_ACCEPT_FAIL, 0, now + 2, &fid, &call) == 0, "cleared");
	fenv_unmap(t.v, t.base, t.len);
}

/* node_kill as a peer on another host sees it: killed once a window has begun, for good */
static void test_fst_node_killed(void)
{
	struct two_links t;
	two_links_open(&t);
	uint32_t fid = 99, id;
	CHECK(!fst_call_armed(t.shm, FAULT_K_NODE_KILL), "no flag without a fault");
	/* a freeze of node 1 is not a kill, and raises no kill flag */
	struct fault_spec f = spec(FAULT_K_NODE_FREEZE, 0, FAULT_FOREVER);
	f.node = 1;
	CHECK(fst_fault_add(t.shm, &f, t.now, &id) == 0 &&
		      !fst_call_armed(t.shm, FAULT_K_NODE_KILL),
	      "a freeze raises no kill flag");
	CHECK(fst_node_killed(t.shm, 1, t.now + MS, &fid) == 0, "frozen is not killed");
	/* node 1 killed 10 ms from now, an instant (1 ns) */
	f = spec(FAULT_K_NODE_KILL, 10 * MS, 1);
	f.node = 1;
	CHECK(fst_fault_add(t.shm, &f, t.now, &id) == 0 && id == 1, "add");
	CHECK(fst_call_armed(t.shm, FAULT_K_NODE_KILL) && !fst_call_armed(t.shm, FAULT_K_COMM_HANG),
	      "only node_kill's flag: %#x", atomic_load(&t.shm->call_kinds));
	CHECK(fst_node_killed(t.shm, 1, t.now + 10 * MS - 1, &fid) == 0, "not before its window");
	CHECK(fst_node_killed(t.shm, 1, t.now + 10 * MS, &fid) == 1 && fid == 1, "at its window");
	CHECK(fst_node_killed(t.shm, 1, t.now + 3600 * 1000 * MS, &fid) == 1 && fid == 1,
	      "and for good after its instant");
	CHECK(fst_node_killed(t.shm, 0, t.now + 20 * MS, &fid) == 0, "node 0 is not node 1");
	CHECK(atomic_load(&fst_fault(t.shm, 1)->hit) == 0, "asking counts nothing");
	/* a kill whose trigger has not fired (origin 0) kills nobody yet */
	f.node = 0;
	CHECK(fst_fault_add(t.shm, &f, 0, &id) == 0, "add");
	CHECK(fst_node_killed(t.shm, 0, t.now + 20 * MS, &fid) == 0, "not triggered: not killed");
	atomic_store(&fst_fault(t.shm, id)->origin, t.now);
	CHECK(fst_node_killed(t.shm, 0, t.now + 20 * MS, &fid) == 1 && fid == id,
	      "triggered: killed");
	fenv_unmap(t.v, t.base, t.len);
}

/* ---- the channel's holds ------------------------------------------------------------------ */

struct pair {
	struct chan_shm *shm;
	size_t len;
	struct chan_tx *tx;
	struct chan_rx *rx;
};

static void pair_open(struct pair *p)
{
	struct chan_geom g = {.slot_bytes = 65536, .nslots = 4};
	p->len = chan_shm_bytes(&g);
	p->shm = mmap(NULL, p->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p->shm != MAP_FAILED && chan_format(p->shm, p->len, &g, 5) == 0, "channel");
	CHECK(chan_tx_new(p->shm, p->len, &p->tx) == 0 && chan_rx_new(p->shm, p->len, &p->rx) == 0,
	      "attach");
}

static void pair_close(struct pair *p)
{
	chan_tx_free(p->tx);
	chan_rx_free(p->rx);
	munmap(p->shm, p->len);
}

static void test_chan_hang(void)
{
	struct pair p;
	pair_open(&p);
	static uint8_t src[1000], dst[1000];
	memset(src, 0x5a, sizeof(src));
	void *bufs[1] = {dst};
	uint64_t cap[1] = {sizeof(dst)};
	chan_req r, s;
	CHECK(chan_set_hold(p.shm, CHAN_HOLD_HANG, 1) == 0, "hold: was 0");
	CHECK(chan_rx_post(p.rx, 1, bufs, cap, NULL, &r, NULL) == 0, "rx post");
	CHECK(chan_tx_post(p.tx, src, sizeof(src), 0, &s, NULL) == 0, "tx post");
	int rdone = 0, sdone = 0, rrc = 0, src_rc = 0;
	uint64_t got = 0;
	for (int i = 0; i < 10000 && !rrc && !src_rc; i++) {
		rrc = chan_rx_test(p.rx, r, &rdone, &got, NULL);
		src_rc = chan_tx_test(p.tx, s, &sdone, NULL, NULL);
		CHECK(!rdone && !sdone, "hung: nothing completes (round %d: %d %d)", i, rdone,
		      sdone);
		if (rdone || sdone)
			break;
	}
	CHECK(rrc == 0 && src_rc == 0, "hung: no error (%d %d)", rrc, src_rc);
	CHECK(chan_set_hold(p.shm, CHAN_HOLD_HANG, 0) == CHAN_HOLD_HANG, "release: was held");
	for (int i = 0; i < 100000 && (!rdone || !sdone); i++) {
		if (!rdone)
			rrc = chan_rx_test(p.rx, r, &rdone, &got, NULL);
		if (!sdone)
			src_rc = chan_tx_test(p.tx, s, &sdone, NULL, NULL);
	}
	CHECK(rdone && sdone && got == sizeof(src) && !memcmp(src, dst, sizeof(src)),
	      "released: both complete, data exact (%d %d %" PRIu64 ")", rdone, sdone, got);
	/* a hang between the receiver's copy and the sender's test: the ACK is there, the send
	 * still does not complete (each end holds on its own) */
	rdone = sdone = 0;
	CHECK(chan_rx_post(p.rx, 1, bufs, cap, NULL, &r, NULL) == 0 &&
		      chan_tx_post(p.tx, src, sizeof(src), 0, &s, NULL) == 0,
	      "post again");
	for (int i = 0; i < 100000 && !rdone; i++)
		chan_rx_test(p.rx, r, &rdone, &got, NULL);
	CHECK(rdone, "received");
	chan_set_hold(p.shm, CHAN_HOLD_HANG, 1);
	for (int i = 0; i < 10000 && !sdone; i++)
		CHECK(chan_tx_test(p.tx, s, &sdone, NULL, NULL) == 0, "no error");
	CHECK(!sdone, "an acknowledged send does not complete while hung");
	chan_set_hold(p.shm, CHAN_HOLD_HANG, 0);
	for (int i = 0; i < 100000 && !sdone; i++)
		chan_tx_test(p.tx, s, &sdone, NULL, NULL);
	CHECK(sdone, "and completes once released");
	pair_close(&p);
}

static void test_chan_rx_frozen(void)
{
	struct pair p;
	pair_open(&p);
	static uint8_t src[3][1000], dst[3][1000];
	for (int i = 0; i < 3; i++)
		memset(src[i], 0x10 + i, sizeof(src[i]));
	chan_req r[2], s[3];
	for (int i = 0; i < 2; i++) {
		void *bufs[1] = {dst[i]};
		uint64_t cap[1] = {sizeof(dst[i])};
		CHECK(chan_rx_post(p.rx, 1, bufs, cap, NULL, &r[i], NULL) == 0, "rx post %d", i);
	}
	/* the receiver freezes with two receives posted: the two sends into them complete
	 * without it ever running again, a third (no receive for it) does not */
	chan_set_hold(p.shm, CHAN_HOLD_RX_FROZEN, 1);
	int done[3] = {0};
	for (int i = 0; i < 2; i++)
		CHECK(chan_tx_post(p.tx, src[i], sizeof(src[i]), 0, &s[i], NULL) == 0, "tx %d", i);
	int rc3 = chan_tx_post(p.tx, src[2], sizeof(src[2]), 0, &s[2], NULL);
	CHECK(rc3 == -EAGAIN, "no receive posted for a third send: %d", rc3);
	for (int k = 0; k < 100000 && (!done[0] || !done[1]); k++)
		for (int i = 0; i < 2; i++)
			if (!done[i])
				CHECK(chan_tx_test(p.tx, s[i], &done[i], NULL, NULL) == 0, "test");
	CHECK(done[0] && done[1], "sends into posted receives complete while frozen: %d %d",
	      done[0], done[1]);
	/* the same without the hold: a send waits for the receiver's copy (its ACK) */
	struct pair q;
	pair_open(&q);
	void *bufs[1] = {dst[2]};
	uint64_t cap[1] = {sizeof(dst[2])};
	chan_req qr, qs;
	int qdone = 0;
	CHECK(chan_rx_post(q.rx, 1, bufs, cap, NULL, &qr, NULL) == 0 &&
		      chan_tx_post(q.tx, src[2], sizeof(src[2]), 0, &qs, NULL) == 0,
	      "post");
	for (int k = 0; k < 1000 && !qdone; k++)
		chan_tx_test(q.tx, qs, &qdone, NULL, NULL);
	CHECK(!qdone, "without the hold a send waits for the receiver to copy it");
	pair_close(&q);
	/* thawed: the receiver runs and finds both messages, exact */
	chan_set_hold(p.shm, CHAN_HOLD_RX_FROZEN, 0);
	int rdone[2] = {0};
	uint64_t got[2] = {0};
	for (int k = 0; k < 100000 && (!rdone[0] || !rdone[1]); k++)
		for (int i = 0; i < 2; i++)
			if (!rdone[i])
				chan_rx_test(p.rx, r[i], &rdone[i], &got[i], NULL);
	CHECK(rdone[0] && rdone[1] && !memcmp(dst[0], src[0], 1000) &&
		      !memcmp(dst[1], src[1], 1000),
	      "the receives complete once it runs, with the data");
	pair_close(&p);
}

/* ---- the daemon's edges --------------------------------------------------------------------- */

#define NREC 4096
static struct rec {
	char op; /* 's' signal, 'h' hold */
	int node, sig, src, dst, on;
	uint32_t bits;
} recs[NREC];
static int nrec;

static int rec_signal(void *ctx, int node, int sig, int quiet, const char *why)
{
	(void)ctx, (void)quiet, (void)why;
	if (nrec < NREC)
		recs[nrec++] = (struct rec){.op = 's', .node = node, .sig = sig};
	return 2; /* two processes on every node */
}

static int rec_hold(void *ctx, int src, int dst, uint32_t bits, int on, const char *why)
{
	(void)ctx, (void)why;
	if (nrec < NREC)
		recs[nrec++] =
			(struct rec){.op = 'h', .src = src, .dst = dst, .bits = bits, .on = on};
	return 3;
}

static int count_sig(int from, int sig)
{
	int n = 0;
	for (int i = from; i < nrec; i++)
		n += recs[i].op == 's' && recs[i].sig == sig;
	return n;
}

struct dfx {
	struct scenario *sc;
	void *base;
	size_t len;
	struct fst_view *v;
	struct faultd *d;
};

static void dfx_open(struct dfx *x, const char *faults)
{
	char yaml[2048], err[SCN_ERR_LEN];
	snprintf(yaml, sizeof(yaml), "fabric:\n  nodes: {count: 3, name: \"node{i}\"}\nfaults:\n%s",
		 faults);
	memset(x, 0, sizeof(*x));
	int rc = scn_load_buffer("t.yaml", yaml, strlen(yaml), &x->sc, err, sizeof(err));
	CHECK(rc == 0, "load: %s", err);
	struct model_link links[1] = {{.rate_bps = 25000000000ull, .latency_ns = 500, .mtu = 4096}};
	struct model_nic nic = {.timeout_exp = 10, .retry_count = 7, .timeout_scale_ppm = 1000000};
	fenv_resolve(links, 1, &nic);
	x->v = fenv_map(1, links, 1, 1, &x->base, &x->len);
	x->v->shm->epoch_ns = mono_ns() - 1; /* the fabric starts now */
	const struct faultd_ops ops = {.signal = rec_signal, .hold = rec_hold};
	nrec = 0;
	rc = faultd_new(x->v->shm, rc ? NULL : x->sc->fabric, rc ? NULL : x->sc->faults, &ops,
			&x->d, err, sizeof(err));
	CHECK(rc == 0, "faultd_new: %s", err);
}

static void dfx_close(struct dfx *x)
{
	faultd_free(x->d);
	fenv_unmap(x->v, x->base, x->len);
	scenario_free(x->sc);
}

static void test_faultd_freeze(void)
{
	struct dfx x;
	/* a freeze of node1 from 0 with no end, a freeze of node2 for 10 ms at 1 s */
	dfx_open(&x,
		 "  - {action: node_freeze, node: node1}\n"
		 "  - {action: node_freeze, node: node2, at: 1s, for: 10ms}\n");
	int64_t t0 = x.v->shm->epoch_ns;
	faultd_tick(x.d, t0 + MS);
	CHECK(nrec == 2 && recs[0].op == 'h' && recs[0].src == FAULT_ANY && recs[0].dst == 1 &&
		      recs[0].bits == CHAN_HOLD_RX_FROZEN && recs[0].on && recs[1].op == 's' &&
		      recs[1].node == 1 && recs[1].sig == SIGSTOP,
	      "freeze begins: hold its receives, then SIGSTOP node1 (%d records)", nrec);
	CHECK(faultd_hold_bits(x.d, 0, 1) == CHAN_HOLD_RX_FROZEN &&
		      faultd_hold_bits(x.d, 1, 0) == 0,
	      "a new channel into node1 starts held");
	CHECK(atomic_load(&fst_fault(x.v->shm, 0)->hit) == 2, "hit: the 2 processes stopped");
	faultd_tick(x.d, t0 + 500 * MS);
	CHECK(nrec == 2, "nothing more while it lasts (%d)", nrec);
	/* node2's window: both edges, even when the daemon only looks after its end */
	faultd_tick(x.d, t0 + 1000 * MS + 20 * MS);
	CHECK(nrec == 6 && recs[3].sig == SIGSTOP && recs[3].node == 2 && recs[4].sig == SIGCONT &&
		      recs[4].node == 2 && recs[5].op == 'h' && !recs[5].on,
	      "a window seen late still stops and continues node2 (%d)", nrec);
	/* a clear ends node1's freeze: SIGCONT, then the hold released */
	int n = 0;
	char err[256];
	CHECK(faultd_clear(x.d, 0, t0 + 1100 * MS, &n, err, sizeof(err)) == 0 && n == 1, "clear");
	int before = nrec;
	faultd_tick(x.d, t0 + 1100 * MS);
	CHECK(count_sig(before, SIGCONT) == 1 && nrec == before + 2 && !recs[nrec - 1].on,
	      "cleared: SIGCONT node1, hold released (%d new)", nrec - before);
	dfx_close(&x);
}

static void test_faultd_straggle(void)
{
	struct dfx x;
	dfx_open(&x, "  - {action: straggle, node: node0, for: 100ms, period: 10ms, duty: 0.3}\n");
	int64_t t0 = x.v->shm->epoch_ns;
	/* tick at every 1 ms: within each 10 ms, stopped for the first 3 */
	int stopped_ms = 0, stopped = 0, cycles = 0;
	for (int64_t t = 0; t <= 120; t++) {
		faultd_tick(x.d, t0 + t * MS + 1);
		for (int i = 0; i < nrec; i++)
			if (recs[i].op == 's' && recs[i].sig == SIGSTOP) {
				stopped = 1;
				cycles++;
			} else if (recs[i].op == 's' && recs[i].sig == SIGCONT) {
				stopped = 0;
			}
		nrec = 0;
		if (t < 100)
			stopped_ms += stopped;
		else
			CHECK(!stopped, "after the window (t %" PRId64 " ms) it runs", t);
	}
	CHECK(cycles == 10, "one stop per period for 10 periods: %d", cycles);
	CHECK(stopped_ms == 30, "stopped 3 ms of every 10: %d of 100", stopped_ms);
	CHECK(atomic_load(&fst_fault(x.v->shm, 0)->delayed) == 10, "delayed counts the stops");
	int64_t next = faultd_next_ns(x.d, t0 + 120 * MS);
	CHECK(next == 0 || next > t0 + 120 * MS, "no straggle edge left");
	dfx_close(&x);
	/* the daemon going away in the middle of a stop: SIGCONT */
	dfx_open(&x, "  - {action: straggle, node: node2, period: 10ms, duty: 0.5, for: 1s}\n");
	t0 = x.v->shm->epoch_ns;
	faultd_tick(x.d, t0 + 1);
	faultd_tick(x.d, t0 + MS);
	CHECK(count_sig(0, SIGSTOP) == 1, "stopped at the start of its first period");
	int before = nrec;
	faultd_release(x.d);
	CHECK(count_sig(before, SIGCONT) == 1, "faultd_release continues it");
	before = nrec;
	faultd_release(x.d);
	CHECK(nrec == before, "once");
	dfx_close(&x);
}

/* Faults that overlap on one node: it runs only when none of them holds it stopped. */
static void test_faultd_overlap(void)
{
	struct dfx x;
	dfx_open(&x,
		 "  - {action: node_freeze, node: node1, for: 100ms}\n"
		 "  - {action: node_freeze, node: node1, at: 50ms, for: 150ms}\n"
		 "  - {action: straggle, node: node1, for: 300ms, period: 10ms, duty: 0.5}\n");
	int64_t t0 = x.v->shm->epoch_ns;
	int stopped = 0, bad = 0, released_at = -1, stops = 0;
	for (int64_t t = 0; t <= 320; t++) {
		faultd_tick(x.d, t0 + t * MS + 1);
		for (int i = 0; i < nrec; i++) {
			if (recs[i].op == 's' && recs[i].sig == SIGSTOP) {
				bad += stopped; /* a second SIGSTOP: the count went wrong */
				stopped = 1;
				stops++;
			} else if (recs[i].op == 's' && recs[i].sig == SIGCONT) {
				bad += !stopped;
				stopped = 0;
			} else if (recs[i].op == 'h' && !recs[i].on) {
				released_at = (int)t;
			}
		}
		nrec = 0;
		int want = t < 200 || (t < 300 && t % 10 < 5);
		CHECK(stopped == want, "t %" PRId64 " ms: node1 %s, want %s", t,
		      stopped ? "stopped" : "running", want ? "stopped" : "running");
	}
	CHECK(bad == 0, "signals in pairs: %d out of turn", bad);
	CHECK(released_at == 200, "the receives held until the last freeze ends: %d", released_at);
	CHECK(stops == 1 + 10, "one SIGSTOP for the freezes, one per straggle period after: %d",
	      stops);
	dfx_close(&x);
}

static void test_faultd_hang(void)
{
	struct dfx x;
	dfx_open(&x, "  - {action: comm_hang, conn: {from: node0, to: node2}, for: 50ms}\n");
	int64_t t0 = x.v->shm->epoch_ns;
	faultd_tick(x.d, t0 + 1);
	CHECK(nrec == 1 && recs[0].op == 'h' && recs[0].src == 0 && recs[0].dst == 2 &&
		      recs[0].bits == CHAN_HOLD_HANG && recs[0].on,
	      "hang holds node0 -> node2 (%d)", nrec);
	CHECK(faultd_hold_bits(x.d, 0, 2) == CHAN_HOLD_HANG && faultd_hold_bits(x.d, 2, 0) == 0,
	      "one direction");
	int64_t next = faultd_next_ns(x.d, t0 + 1);
	CHECK(next == t0 + 50 * MS, "the daemon wakes at its end exactly: %" PRId64, next - t0);
	faultd_tick(x.d, t0 + 50 * MS);
	CHECK(nrec == 2 && recs[1].op == 'h' && !recs[1].on && recs[1].bits == CHAN_HOLD_HANG,
	      "released at its end");
	CHECK(faultd_hold_bits(x.d, 0, 2) == 0, "nothing held after");
	dfx_close(&x);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_kinds),		  CHECK_CASE(test_spec_check),
	CHECK_CASE(test_call_fails),	  CHECK_CASE(test_fst_call_fault),
	CHECK_CASE(test_fst_node_killed), CHECK_CASE(test_chan_hang),
	CHECK_CASE(test_chan_rx_frozen),  CHECK_CASE(test_faultd_freeze),
	CHECK_CASE(test_faultd_straggle), CHECK_CASE(test_faultd_overlap),
	CHECK_CASE(test_faultd_hang),
};

CHECK_MAIN(cases)
