/* SPDX-License-Identifier: MIT */
/*
 * test_early.c - the "never early" monitor can count. Linked with sim/chan.c built with
 * CHAN_INJECT_EARLY=1 (Makefile: build/inject/), whose receives skip the model's gate while
 * chan_inject_early is set. Over one 5 ms link:
 *   1. the gate skipped: the receives complete at once, long before the model's time, and
 *      are counted early (not in the lateness histogram);
 *   2. the gate on, the model right: nothing more is counted early, each lateness is;
 *   3. the gate on, the sender's model wrong (its view of the link has no latency and 100
 *      times the rate): the gate lets each receive through when that model says, and the
 *      receiver, checking the sender's post time against its own view of the route, counts
 *      them early. Before the monitor had its own clock it could not see this (nor 1);
 *   4. a degrade fault that makes the link faster, in force: the sender's model is right
 *      again, faster than the configured link, and nothing is counted early;
 *   5. (run with 3) as 3, and the route rewritten in the region after attach, as a hostile
 *      sender could: the receiver uses the route it copied, and still counts them early.
 */
#include "sim/core/chan.h"
#include "sim/core/fault.h"
#include "sim/core/fstate.h"
#include "sim/core/model.h"

#include <string.h>
#include <time.h>

#include "sim/test/check.h"
#include "sim/test/fenv.h"

extern int chan_inject_early;

enum { N = 16, SIZE = 4096 };
#define LAT_NS 5000000 /* 5 ms: longer than a loaded machine keeps the test off its CPU */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct pair {
	struct chan_shm *shm;
	size_t len;
	struct chan_tx *tx;
	struct chan_rx *rx;
};

static void pair_open(struct pair *p, uint64_t id, const struct model_path *path,
		      const struct model_nic *nic, struct fst_view *vtx, struct fst_view *vrx)
{
	struct chan_geom g = {.slot_bytes = 65536, .nslots = 4};
	p->len = chan_shm_bytes(&g);
	p->shm = mmap(NULL, p->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(p->shm != MAP_FAILED, "mmap");
	CHECK(chan_format(p->shm, p->len, &g, id) == 0, "format");
	CHECK(chan_set_route(p->shm, path, 0, nic, 0, 1) == 0, "route");
	CHECK(chan_tx_new(p->shm, p->len, &p->tx) == 0 && chan_rx_new(p->shm, p->len, &p->rx) == 0,
	      "attach");
	CHECK(chan_tx_set_fabric(p->tx, vtx) == 0 && chan_rx_set_fabric(p->rx, vrx) == 0, "fab");
}

static void pair_close(struct pair *p)
{
	chan_tx_free(p->tx);
	chan_rx_free(p->rx);
	munmap(p->shm, p->len);
}

/* N messages one after the other; returns how many receives completed before post + LAT_NS. */
static int run(struct pair *p, const char *what)
{
	static uint8_t src[SIZE], dst[SIZE];
	int fast = 0;
	for (int i = 0; i < N; i++) {
		chan_req s, r;
		void *b = dst;
		uint64_t cap = SIZE;
		int done = 0, sdone = 0;
		CHECK(chan_rx_post(p->rx, 1, &b, &cap, NULL, &r, NULL) == 0, "%s: rx post", what);
		int64_t t0 = now_ns();
		CHECK(chan_tx_post(p->tx, src, SIZE, 0, &s, NULL) == 0, "%s: tx post", what);
		for (long spin = 0; spin < 2000000000L && !(done && sdone); spin++) {
			if (!done) {
				if (chan_rx_test(p->rx, r, &done, NULL, NULL) != 0)
					break;
				if (done && now_ns() < t0 + LAT_NS)
					fast++;
			}
			if (!sdone && chan_tx_test(p->tx, s, &sdone, NULL, NULL) != 0)
				break;
		}
		CHECK(done && sdone, "%s: message %d did not complete", what, i);
	}
	return fast;
}

/* What the link's monitor counted since the last call: early, and late (in the histogram). */
static void counts(struct fst_link *st, uint64_t *early, uint64_t *late)
{
	static uint64_t e0, l0;
	uint64_t e = atomic_load(&st[0].early), l = atomic_load(&st[0].late_n);
	*early = e - e0;
	*late = l - l0;
	e0 = e;
	l0 = l;
}

static void test_monitor(void)
{
	struct model_link link = {.rate_bps = 10000000000ull, .latency_ns = LAT_NS, .mtu = 4096,
				  .hdr_bytes = 64};
	struct model_nic nic = {.timeout_exp = 20, .retry_count = 7, .timeout_scale_ppm = 1000000};
	fenv_resolve(&link, 1, &nic);
	void *fbase;
	size_t flen;
	struct fst_view *v = fenv_map(1, &link, 1, 5, &fbase, &flen);
	struct fst_link *st = (struct fst_link *)((uint8_t *)fbase + v->shm->state_off);
	struct model_path path = {.nhops = 1, .switching = MODEL_CUT_THROUGH, .link_id = {0},
				  .hop = {&link}};
	CHECK(fst_floor_ns(v, path.link_id, 1, &nic, MODEL_CUT_THROUGH, SIZE) ==
		      model_ideal_ns(&path, &nic, SIZE) && model_ideal_ns(&path, &nic, SIZE) > LAT_NS,
	      "the floor is the idle path's time");

	/* 1. the gate skipped. A receive seen before post + LAT_NS is before its floor (post +
	 * the idle path's time, more than LAT_NS) and must count; one seen after it (the test was
	 * descheduled that long: a loaded machine) may or may not. */
	struct pair p;
	uint64_t early, late;
	pair_open(&p, 1, &path, &nic, v, v);
	chan_inject_early = 1;
	int fast = run(&p, "gate skipped");
	counts(st, &early, &late);
	CHECK(fast >= N / 2, "only %d of %d receives got through before the model's time", fast, N);
	CHECK(early >= (uint64_t)fast && early + late == N,
	      "gate skipped: %llu early, %llu late (%d seen early)", (unsigned long long)early,
	      (unsigned long long)late, fast);

	/* 2. the gate on, the model right: never early, however late */
	chan_inject_early = 0;
	fast = run(&p, "gate on");
	counts(st, &early, &late);
	CHECK(fast == 0, "%d receives before the model's time with the gate on", fast);
	CHECK(early == 0 && late == N, "gate on: %llu early, %llu late (want 0, %d)",
	      (unsigned long long)early, (unsigned long long)late, N);
	pair_close(&p);

	/* 3. the sender's model is wrong: its own view of the link is far too fast.
	 * 5. (the second round) the same, and the sender then rewrites the route in the region
	 * (npath 0, a bad link id), as a hostile peer could: the receiver checks against the
	 * route it copied and checked at attach, so it still counts them early. It read the
	 * region's route at every delivery before: an empty route gave no floor, nothing counted. */
	for (int rewrite = 0; rewrite < 2; rewrite++) {
		const char *what = rewrite ? "route rewritten" : "model too fast";
		struct fst_view *vtx;
		CHECK(fst_view_new(fbase, flen, &vtx) == 0, "second view");
		vtx->links[0].latency_ns = 0;
		vtx->links[0].rate_bps *= 100;
		pair_open(&p, rewrite ? 5 : 2, &path, &nic, vtx, v);
		if (rewrite) {
			p.shm->route.npath = 0;
			p.shm->route.path[0] = 0xfffffff0u;
		}
		fast = run(&p, what);
		counts(st, &early, &late);
		CHECK(fast >= N / 2, "%s: the wrong model let only %d of %d through early", what,
		      fast, N);
		CHECK(early >= (uint64_t)fast && early + late == N,
		      "%s: %llu early, %llu late (%d seen early)", what, (unsigned long long)early,
		      (unsigned long long)late, fast);
		pair_close(&p);
		fst_view_free(vtx);
	}

	/* 4. a degrade to 100 times the rate: the floor takes the faster rate */
	char err[256];
	struct fault_spec f;
	memset(&f, 0, sizeof(f));
	snprintf(f.name, sizeof(f.name), "faster");
	f.kind = FAULT_K_DEGRADE;
	f.action = (uint32_t)fault_kind_action(FAULT_K_DEGRADE);
	f.trigger = FAULT_T_TIME;
	f.src_node = f.dst_node = f.node = FAULT_ANY;
	f.trig_link = -1;
	f.trig_src = f.trig_dst = FAULT_ANY;
	f.duration_ns = 1000000000000LL;
	f.count = 1;
	f.prob = MODEL_PROB_ONE;
	f.nlinks = 1;
	f.set = FAULT_SET_RATE;
	f.rate_bps = link.rate_bps * 100;
	CHECK(fault_spec_check(&f, err, sizeof(err)) == 0, "degrade: %s", err);
	uint32_t id;
	CHECK(fst_fault_add(v->shm, &f, 1, &id) == 0, "fst_fault_add");
	path.hop[0] = &v->links[0];
	struct model_link fastl = link;
	fastl.rate_bps = f.rate_bps;
	struct model_path fastp = {.nhops = 1, .link_id = {0}, .hop = {&fastl}};
	CHECK(fst_floor_ns(v, path.link_id, 1, &nic, MODEL_CUT_THROUGH, 1 << 20) ==
		      model_ideal_ns(&fastp, &nic, 1 << 20),
	      "the floor at the degrade's rate");
	pair_open(&p, 3, &path, &nic, v, v);
	run(&p, "degraded faster");
	counts(st, &early, &late);
	CHECK(early == 0 && late == N, "degraded faster: %llu early, %llu late (want 0, %d)",
	      (unsigned long long)early, (unsigned long long)late, N);
	pair_close(&p);

	fenv_unmap(v, fbase, flen);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_monitor),
};

CHECK_MAIN(cases)
