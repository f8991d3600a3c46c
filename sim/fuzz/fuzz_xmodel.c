/* SPDX-License-Identifier: MIT */
/*
 * fuzz_xmodel.c - the distributed fabric clock's hooks (sim/core/xmodel.c) against a hostile
 * peer. The input is a program over one route split between two hosts' fabric states, with
 * jitter, duplicates, corruption, loss and reordering on any hop and faults on either side
 * (outages, degrades that set loss or corruption): posts of any size at any time, and arrivals
 * of stamps the sender wrote or the input forged (any hop, times, flags, fault, the replay's
 * words), in any order, and ACKs whose replay words the input may forge. Whatever a stamp says, a
 * hook must return 0 or one of xmodel.h's errors, never complete a receive before the stamp's
 * last bit reached the receiver's first hop (a stamp it took), and never complete a send before
 * its ACK's time.
 *
 * fuzz-libs: sim/core/model.c sim/core/model_rand.c sim/core/fstate.c sim/core/fstate_fault.c sim/core/fault.c
 */
#include "sim/core/xmodel.c"

#include <assert.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "sim/fuzz/fuzz_input.h"

enum { NL = 4, NNIC = 2 };

static struct fst_view *state(const struct model_link *l, int64_t epoch, void **base, size_t *len)
{
	struct fst_view *v = NULL;
	*len = fst_bytes(NL, NNIC, 0);
	*base = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert(*base != MAP_FAILED);
	assert(fst_format(*base, *len, NL, l, NNIC, 3, epoch) == 0);
	assert(fst_view_new(*base, *len, &v) == 0);
	return v;
}

static void check_rc(int rc)
{
	assert(rc == 0 || rc == -EPROTO || rc == -EINVAL || rc == -EOPNOTSUPP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = {data, size};
	struct model_link l[NL];
	char err[MODEL_ERR_LEN];
	memset(l, 0, sizeof(l));
	for (int i = 0; i < NL; i++) {
		l[i].rate_bps = (uint64_t)(take(&r, 1) % 100 + 1) * 1000000000ull;
		l[i].latency_ns = (int64_t)take(&r, 2);
		l[i].mtu = 4096;
		l[i].hdr_bytes = 64;
		if (take(&r, 1) & 1) /* jitter, drawn by the receiver over the whole route */
			l[i].jitter =
				(struct model_jitter){.dist = MODEL_DIST_NORMAL,
						      .sd_ns = (int64_t)take(&r, 2),
						      .rho = (double)(take(&r, 1) % 100) / 100};
		if (take(&r, 1) & 1) /* duplicates, drawn by each piece for every hop */
			l[i].duplicate_p = take(&r, 4);
		if (take(&r, 1) & 1) /* corruption, flipped by the receiver */
			l[i].corrupt_p = take(&r, 4);
		uint32_t lossy = take(&r, 1) % 4; /* loss and reordering: the route is replayed */
		if (lossy == 1)
			l[i].loss = (struct model_loss){.kind = MODEL_LOSS_BERNOULLI,
							.p = {take(&r, 4)}};
		if (lossy == 2)
			l[i].loss = (struct model_loss){.kind = MODEL_LOSS_GE,
							.p = {take(&r, 4), take(&r, 4) | 1,
							      take(&r, 4), take(&r, 2)}};
		if (lossy == 3) {
			l[i].reorder_p = take(&r, 4);
			l[i].reorder_delay_ns = (int64_t)take(&r, 2);
		}
		if (model_link_resolve(&l[i], err, sizeof(err)))
			return 0;
	}
	struct xmodel_route rt;
	memset(&rt, 0, sizeof(rt));
	rt.conn.npath = 2 + (int)(take(&r, 1) % 2); /* [0 1] or [0 1 2] */
	for (int j = 0; j < rt.conn.npath; j++)
		rt.conn.path[j] = (uint32_t)j;
	rt.conn.nic = (struct model_nic){.o_send_ns = 300,
					 .o_recv_ns = 300,
					 .ack_proc_ns = 200,
					 .timeout_exp = 10,
					 .retry_count = 7,
					 .timeout_scale_ppm = 1000000};
	rt.conn.dst_node = 1;
	rt.split = 1 + (int)(take(&r, 1) % (uint32_t)rt.conn.npath);
	int64_t ahead = (int64_t)take(&r, 4) * 1000; /* the receiver's clock, ahead */
	void *b0, *b1;
	size_t n0, n1;
	struct fst_view *v0 = state(l, 1000, &b0, &n0), *v1 = state(l, 1000 + ahead, &b1, &n1);
	/* a fault on either side's hop, maybe */
	if (take(&r, 1) & 1) {
		struct fault_spec f;
		memset(&f, 0, sizeof(f));
		uint32_t k = take(&r, 1) % 3;
		f.kind = k == 0 ? FAULT_K_LINK_DOWN : k == 1 ? FAULT_K_STALL : FAULT_K_DEGRADE;
		if (k == 2) { /* loss or corruption: the replay's degrades */
			f.set = take(&r, 1) & 1 ? FAULT_SET_LOSS : FAULT_SET_CORRUPT;
			f.loss = (struct model_loss){.kind = MODEL_LOSS_BERNOULLI,
						     .p = {take(&r, 4)}};
			f.corrupt_p = take(&r, 4);
		}
		f.action = (uint32_t)fault_kind_action((enum fault_kind)f.kind);
		f.trigger = FAULT_T_TIME;
		f.src_node = f.dst_node = f.node = FAULT_ANY;
		f.trig_link = -1;
		f.trig_src = f.trig_dst = FAULT_ANY;
		f.start_ns = (int64_t)take(&r, 2) * 1000;
		f.duration_ns = take(&r, 1) & 1 ? FAULT_FOREVER : (int64_t)take(&r, 2) * 10000 + 1;
		f.count = 1;
		f.prob = MODEL_PROB_ONE;
		f.nlinks = 1;
		f.link[0] = take(&r, 1) % (uint32_t)rt.conn.npath;
		uint32_t id;
		if (fault_spec_check(&f, err, sizeof(err)) == 0) {
			assert(fst_fault_add(v0->shm, &f, 1000, &id) == 0);
			assert(fst_fault_add(v1->shm, &f, 1000 + ahead, &id) == 0);
		}
	}
	struct xmodel *tx = NULL, *rx = NULL;
	assert(xmodel_new(v0, &rt, XMODEL_TX, &tx) == 0 &&
	       xmodel_new(v1, &rt, XMODEL_RX, &rx) == 0);
	struct xchan_stamp kept[8];
	int nkept = 0;
	int64_t t = 2000;
	for (int step = 0; step < 500 && r.n; step++) {
		int op = (int)(take(&r, 1) % 3);
		uint64_t bytes = take(&r, 3);
		t += (int64_t)take(&r, 2);
		struct xchan_stamp s, ack;
		int64_t ready = 0, done = 0;
		if (op == 0) { /* a post: keep its stamp for a later arrival */
			int rc = xmodel_hooks.post(tx, t, bytes, &s);
			check_rc(rc);
			if (rc == 0)
				kept[nkept++ % 8] = s;
			continue;
		}
		if (op == 1 && nkept) { /* an honest stamp, maybe out of order */
			s = kept[take(&r, 1) % (uint32_t)(nkept < 8 ? nkept : 8)];
		} else { /* a forged one */
			memset(&s, 0, sizeof(s));
			for (int k = 0; k < 3; k++)
				s.t[k] = (int64_t)((uint64_t)take(&r, 4) << (take(&r, 1) % 33));
			if (take(&r, 1) & 1)
				s.t[0] = -s.t[0];
			s.hop = take(&r, 1) % 5;
			s.flags = take(&r, 1) % 4;
			s.fault = take(&r, 1);
			s.link = take(&r, 1);
		}
		for (uint32_t k = take(&r, 1) % 4; k; k--) /* the replay's words, forged */
			s.x[take(&r, 1) % XCHAN_STAMP_X] = (uint64_t)take(&r, 4)
				<< (take(&r, 1) % 33);
		int rc = xmodel_hooks.arrive(rx, t + ahead, take(&r, 2), bytes, &s, &ready, &ack);
		check_rc(rc);
		if (rc)
			continue;
		if (!(s.flags & XCHAN_S_FAIL) && !(ack.flags & XCHAN_S_FAIL))
			assert(ready >=
			       s.t[1] + 1000 + ahead);	   /* never before the stamp's last bit */
		for (uint32_t k = take(&r, 1) % 4; k; k--) /* the replay's words back, forged */
			ack.x[take(&r, 1) % XCHAN_STAMP_X] = (uint64_t)take(&r, 4)
				<< (take(&r, 1) % 33);
		rc = xmodel_hooks.acked(tx, &ack, &done);
		check_rc(rc);
		/* the receiver's flips stay inside the delivered bytes (ASan) */
		uint64_t len = bytes < (1u << 16) ? bytes : (1u << 16);
		uint8_t *p = malloc(len ? len : 1);
		assert(p);
		memset(p, 0, len ? len : 1);
		if (len)
			xmodel_hooks.deliver(rx, take(&r, 2), p, len);
		free(p);
	}
	xmodel_free(tx);
	xmodel_free(rx);
	fst_view_free(v0);
	fst_view_free(v1);
	munmap(b0, n0);
	munmap(b1, n1);
	return 0;
}
