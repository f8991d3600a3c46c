/* SPDX-License-Identifier: MIT */
/*
 * landing.c - the landing test: when a receive's bytes appear in its buffer.
 *
 * NCCL's LL and LL128 kernels read their receive buffers while they fill, so the plugin must
 * not place a byte of such a receive before the model says it arrived (sim/core/chan.h,
 * CHAN_RX_AT_DELIVERY; NCCL marks them with its optional-completion hint, which this test
 * preloads for its receive with API v9 and later, and NCCL's v8 shim clears). Rank 1
 * posts one receive of --fault-bytes from rank 0, both ranks meet at a barrier, rank 0 sends,
 * and rank 1 tests it and reads its buffer in turn. Metrics (rank 1, seconds after the
 * barrier): first_byte_s (a byte of the buffer first seen changed; read before the clock, so
 * the byte landed no later), done_s (test said done), and exact. The pytest side holds
 * first_byte_s to the scenario's path latency.
 */
#include <string.h>

#include "tools/harness/harness.h"

void t_landing(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_op op;
	const size_t n = hx_opt.fault_bytes;
	int me = hx_w.rank;
	void *buf = NULL, *mh = NULL;
	double t0 = 0, first = 0, done = 0;

	memset(&op, 0, sizeof(op));
	eng_init(&e, t, "landing");
	e.mark_all = 1; /* --fault-bytes may be more than an LL step */
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	struct eng_conn *sc = t_ring_send(&ls), *rc = t_ring_recv(&ls);
	buf = hx_alloc(n);
	if (me == 1) {
		memset(buf, HX_POISON_BYTE, n);
		if (eng_reg(rc, buf, t_reglen(n), &mh) < 0 || eng_recv1(rc, buf, n, 0, mh, &op) < 0)
			goto out;
	} else if (me == 0) {
		hx_fill(buf, n, hx_seed(T_SEED_SIZES, 0, n, 77));
		if (eng_reg(sc, buf, t_reglen(n), &mh) < 0)
			goto out;
	}
	if (t_barrier(t) < 0)
		goto out;
	t0 = hx_now();
	if (me == 0 && (eng_send(sc, buf, n, 0, mh, &op) < 0 || eng_wait(&e, &op) < 0))
		goto out;
	if (me == 1) {
		const unsigned char *p = buf;
		while (op.state == ENG_OP_PENDING && !eng_expired(&e)) {
			eng_progress(&e);
			int landed = 0;
			for (size_t i = 0; i < n && !landed; i += 509)
				landed = p[i] != HX_POISON_BYTE;
			landed |= n && p[n - 1] != HX_POISON_BYTE;
			double now = hx_now();
			if (landed && !first)
				first = now - t0;
			if (op.state == ENG_OP_DONE && !done)
				done = now - t0;
		}
		if (eng_wait(&e, &op) < 0)
			goto out;
		if (!first)
			first = done;
		js_num(t->metrics, "first_byte_s", first);
		js_num(t->metrics, "done_s", done);
		js_bool(t->metrics, "exact",
			t_check(t, "the landing message", buf, n, n,
				hx_seed(T_SEED_SIZES, 0, n, 77), op.sizes[0], op.sizes_known) == 0);
	}
	t_barrier(t);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	eng_links_free(&ls);
	eng_free(&e);
}
