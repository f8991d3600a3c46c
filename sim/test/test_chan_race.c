/* SPDX-License-Identifier: MIT */
/*
 * test_chan_race.c - the region is the peer's to write at any moment, so what the data path
 * checks must be what it uses (red-team finding 12: the double fetch at attach). Linked with
 * sim/core/chan.c built with CHAN_INJECT_EARLY=1 (Makefile: build/inject/), whose
 * chan_inject_hook runs between a check and what follows it; the hook here plays the hostile
 * peer and rewrites the region there, deterministically, where a real one would have to win a
 * race:
 *   1. attach: the geometry (slots, slot size) and the offsets changed right after chan_check
 *      passed: the attach is refused (-EPROTO) and the side stays unattached; a change to
 *      nothing attaches as usual;
 *   2. set_fabric, the sender: the route's hop changed after its check, to another link of the
 *      fabric and to an index past the links: the sender models and counts the route it
 *      checked (link 0), never the rewritten one;
 *   3. set_fabric, the receiver: the route's last hop changed after its check, and its length
 *      set to 0 (path[npath - 1] would index 2^32 - 1): the receiver records lateness on the
 *      link it checked.
 * Reading the region again after the check (the code before the fix) fails 1 (the attach
 * succeeds with the rewritten geometry) and 2 and 3 (link 1 counted, or a wild index).
 */
#include "sim/core/chan.h"
#include "sim/core/fstate.h"
#include "sim/core/model.h"

#include <errno.h>
#include <string.h>

#include "sim/test/check.h"
#include "sim/test/fenv.h"

extern int chan_inject_early;
extern void (*chan_inject_hook)(struct chan_shm *shm, int where);

enum { SIZE = 4096 };

/* What the hook does, and where. */
static struct {
	int where;	/* CHAN_HOOK_*: act there only */
	int what;	/* enum below */
	unsigned calls; /* times it acted */
} hostile;

enum { H_NOTHING, H_NSLOTS, H_SLOT_BYTES, H_DATA_OFF, H_DESC_OFF, H_HOP, H_HOP_WILD, H_NPATH0 };

static void hook(struct chan_shm *shm, int where)
{
	if (where != hostile.where)
		return;
	hostile.calls++;
	volatile struct chan_shm *v = shm;
	switch (hostile.what) {
	case H_NSLOTS: /* 64 times the slots: the ring far past the region */
		v->nslots = v->nslots * 64;
		break;
	case H_SLOT_BYTES:
		v->slot_bytes = v->slot_bytes * 16;
		break;
	case H_DATA_OFF: /* the staging slots moved past the region's end */
		v->data_off = v->total_bytes;
		break;
	case H_DESC_OFF:
		v->desc_off = v->total_bytes - 64;
		break;
	case H_HOP: /* another link of the fabric, valid but not the one checked */
		v->route.path[0] = 1;
		break;
	case H_HOP_WILD:
		v->route.path[0] = 0xfffffff0u;
		break;
	case H_NPATH0:
		v->route.path[0] = 1;
		v->route.npath = 0;
		break;
	}
}

static struct chan_shm *region(size_t *len)
{
	struct chan_geom g = {.slot_bytes = 65536, .nslots = 4};
	*len = chan_shm_bytes(&g);
	struct chan_shm *shm =
		mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shm != MAP_FAILED, "mmap");
	CHECK(chan_format(shm, *len, &g, 7) == 0, "format");
	return shm;
}

static void test_attach_geometry_changed_after_check(void)
{
	static const struct {
		int what;
		const char *name;
	} cases[] = {{H_NSLOTS, "slots x64"},
		     {H_SLOT_BYTES, "slot bytes x16"},
		     {H_DATA_OFF, "data offset at the end"},
		     {H_DESC_OFF, "descriptor offset at the end"}};

	chan_inject_hook = hook;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int side = 0; side < 2; side++) {
			size_t len;
			struct chan_shm *shm = region(&len);
			struct chan_tx *tx = NULL;
			struct chan_rx *rx = NULL;
			struct chan_stats st;
			hostile.where = CHAN_HOOK_CHECKED;
			hostile.what = cases[i].what;
			hostile.calls = 0;
			int rc = side ? chan_rx_new(shm, len, &rx) : chan_tx_new(shm, len, &tx);
			CHECK(hostile.calls == 1, "%s: the hook ran %u times", cases[i].name,
			      hostile.calls);
			CHECK(rc == -EPROTO,
			      "%s %s: the attach took a geometry changed after its check (rc %d)",
			      side ? "rx" : "tx", cases[i].name, rc);
			chan_stats(shm, &st);
			CHECK((side ? st.rx_state : st.tx_state) == CHAN_ST_INIT,
			      "%s %s: the side is left attached (state %u)", side ? "rx" : "tx",
			      cases[i].name, side ? st.rx_state : st.tx_state);
			chan_tx_free(tx);
			chan_rx_free(rx);
			munmap(shm, len);
		}

	/* the hook that changes nothing: both ends attach */
	size_t len;
	struct chan_shm *shm = region(&len);
	struct chan_tx *tx = NULL;
	struct chan_rx *rx = NULL;
	hostile.what = H_NOTHING;
	CHECK(chan_tx_new(shm, len, &tx) == 0 && chan_rx_new(shm, len, &rx) == 0,
	      "an unchanged region attaches");
	chan_tx_free(tx);
	chan_rx_free(rx);
	munmap(shm, len);
	chan_inject_hook = NULL;
}

/* One message over a fresh pair on route [link 0] of a 2-link fabric, the hook acting at
 * where; what the links counted afterwards in st. */
static void one_message(struct fst_view *v, struct fst_link *st, int where, int what,
			const char *name)
{
	struct model_link *l0 = &v->links[0];
	struct model_path path = {
		.nhops = 1, .switching = MODEL_CUT_THROUGH, .link_id = {0}, .hop = {l0}};
	struct model_nic nic = {.timeout_exp = 20, .retry_count = 7, .timeout_scale_ppm = 1000000};
	char err[MODEL_ERR_LEN];
	CHECK(model_nic_resolve(&nic, err, sizeof(err)) == 0, "nic: %s", err);
	size_t len;
	struct chan_shm *shm = region(&len);
	CHECK(chan_set_route(shm, &path, 0, &nic, 0, 1) == 0, "route");
	struct chan_tx *tx = NULL;
	struct chan_rx *rx = NULL;
	CHECK(chan_tx_new(shm, len, &tx) == 0 && chan_rx_new(shm, len, &rx) == 0, "%s: attach",
	      name);
	uint64_t m0 = atomic_load(&st[0].msgs), m1 = atomic_load(&st[1].msgs);
	uint64_t r0 = atomic_load(&st[0].late_n) + atomic_load(&st[0].early);
	uint64_t r1 = atomic_load(&st[1].late_n) + atomic_load(&st[1].early);

	/* the other end attaches to the fabric first: it reads the route as it is, and a route
	 * rewritten for good is its to check (and maybe refuse) on its own */
	hostile.where = where;
	hostile.what = what;
	hostile.calls = 0;
	int a, b;
	if (where == CHAN_HOOK_RX_ROUTE) {
		a = chan_tx_set_fabric(tx, v);
		chan_inject_hook = hook;
		b = chan_rx_set_fabric(rx, v);
	} else {
		b = chan_rx_set_fabric(rx, v);
		chan_inject_hook = hook;
		a = chan_tx_set_fabric(tx, v);
	}
	chan_inject_hook = NULL;
	CHECK(hostile.calls == 1, "%s: the hook ran %u times", name, hostile.calls);
	CHECK(a == 0 && b == 0, "%s: set_fabric %d %d (the route was valid when checked)", name, a,
	      b);

	static uint8_t src[SIZE], dst[SIZE];
	for (int i = 0; i < SIZE; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	memset(dst, 0, sizeof(dst));
	chan_req s, r;
	void *buf = dst;
	uint64_t cap = SIZE;
	int done = 0, sdone = 0;
	CHECK(chan_rx_post(rx, 1, &buf, &cap, NULL, &r, NULL) == 0, "%s: rx post", name);
	CHECK(chan_tx_post(tx, src, SIZE, 0, &s, NULL) == 0, "%s: tx post", name);
	for (long spin = 0; spin < 2000000000L && !(done && sdone); spin++) {
		if (!done && chan_rx_test(rx, r, &done, NULL, NULL) != 0)
			break;
		if (!sdone && chan_tx_test(tx, s, &sdone, NULL, NULL) != 0)
			break;
	}
	CHECK(done && sdone && !memcmp(src, dst, SIZE), "%s: the message did not arrive exact",
	      name);
	uint64_t dm0 = atomic_load(&st[0].msgs) - m0, dm1 = atomic_load(&st[1].msgs) - m1;
	uint64_t dr0 = atomic_load(&st[0].late_n) + atomic_load(&st[0].early) - r0;
	uint64_t dr1 = atomic_load(&st[1].late_n) + atomic_load(&st[1].early) - r1;
	CHECK(dm0 == 1 && dm1 == 0,
	      "%s: the sender modelled the rewritten route: link 0 %llu msgs, link 1 %llu "
	      "(want 1, 0)",
	      name, (unsigned long long)dm0, (unsigned long long)dm1);
	CHECK(dr0 == 1 && dr1 == 0,
	      "%s: the receiver recorded on the rewritten route: link 0 %llu, link 1 %llu "
	      "(want 1, 0)",
	      name, (unsigned long long)dr0, (unsigned long long)dr1);
	chan_tx_free(tx);
	chan_rx_free(rx);
	munmap(shm, len);
}

static void test_set_fabric_route_changed_after_check(void)
{
	struct model_link links[2] = {
		{.rate_bps = 100000000000ull, .latency_ns = 1000, .mtu = 4096, .hdr_bytes = 64},
		{.rate_bps = 100000000000ull, .latency_ns = 1000, .mtu = 4096, .hdr_bytes = 64}};
	struct model_nic nic = {.timeout_exp = 20, .retry_count = 7, .timeout_scale_ppm = 1000000};
	fenv_resolve(links, 2, &nic);
	void *fbase;
	size_t flen;
	struct fst_view *v = fenv_map(2, links, 1, 5, &fbase, &flen);
	struct fst_link *st = (struct fst_link *)((uint8_t *)fbase + v->shm->state_off);
	chan_inject_early = 0; /* the gate as in production */

	one_message(v, st, CHAN_HOOK_TX_ROUTE, H_NOTHING, "no change");
	one_message(v, st, CHAN_HOOK_TX_ROUTE, H_HOP, "tx: hop rewritten to link 1");
	one_message(v, st, CHAN_HOOK_TX_ROUTE, H_HOP_WILD, "tx: hop rewritten past the links");
	one_message(v, st, CHAN_HOOK_RX_ROUTE, H_HOP, "rx: last hop rewritten to link 1");
	one_message(v, st, CHAN_HOOK_RX_ROUTE, H_NPATH0, "rx: route length rewritten to 0");

	fenv_unmap(v, fbase, flen);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_attach_geometry_changed_after_check),
	CHECK_CASE(test_set_fabric_route_changed_after_check),
};

CHECK_MAIN(cases)
