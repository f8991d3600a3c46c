/* SPDX-License-Identifier: MIT */
/*
 * fuzz_xchan.c - the cross-host channel (sim/core/xchan.c) against a hostile peer.
 *
 * The input is a program: receives and sends posted, tested and progressed on both ends of one
 * connection over the in-memory transport (sim/test/xnet_fake.h), interleaved with forged
 * messages of every kind (clear-to-send, data with any header, ACK, control), any tag and any
 * length, that the other end never wrote; the transport shuffles deliveries and pushes back
 * when the input says so, and gives the endpoints writes (receive buffers open to them, each in
 * its own registration, closed when the receive is reported) when it says so: a forged
 * clear-to-send then aims the sender's writes anywhere, which the transport must refuse outside
 * an open registration. Whatever arrives, an endpoint must never read or write outside its
 * own state and the buffers it was given (ASan), and every call must return one of the errors
 * xchan.h lists.
 *
 * fuzz-libs: -lpthread
 */
#include "sim/core/xchan.c"

#include <assert.h>

#include "sim/fuzz/fuzz_input.h"
#include "sim/test/xnet_fake.h"

static void check_rc(int rc)
{
	assert(rc == 0 || rc == -EAGAIN || rc == -EINVAL || rc == -EMSGSIZE || rc == -ECONNRESET ||
	       rc == -ETIMEDOUT || rc == -EPROTO || rc == -ENOMEM || rc == -EIO);
}

#define FX_MAXB 4096
#define FX_FORGED 256
#define FX_FORGED_LEN 400 /* past a header (344) and a clear-to-send (248) */

/* What a receive was given, kept until it is reported or the endpoint goes. */
struct fx_recv {
	int live;
	void *bufs[CHAN_MAX_RECVS];
	void *mrs[CHAN_MAX_RECVS];
};

static void fx_recv_free(struct xf_ep *e, struct fx_recv *r)
{
	for (int b = 0; b < CHAN_MAX_RECVS; b++) {
		if (r->mrs[b])
			xf_mr_close(e, r->mrs[b]);
		free(r->bufs[b]);
	}
	memset(r, 0, sizeof(*r));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct xf_world w;
	static uint8_t src[FX_MAXB];
	static uint8_t forged[FX_FORGED][FX_FORGED_LEN];
	static struct xnet_op forged_op[FX_FORGED];
	struct fx_recv recvs[CHAN_MAX_REQS] = {{0}};
	struct rd r = {data, size};
	memset(&w, 0, sizeof(w));
	memset(forged_op, 0, sizeof(forged_op));
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7);
	w.rng = take(&r, 1) & 1 ? 0x9e3779b97f4a7c15ULL : 0;
	w.eagain_every = (int)(take(&r, 1) % 5);
	uint32_t writes = take(&r, 1) % 3; /* 0: none; else the sender's write_min is 1 or 512 */
	struct xf_ep e[2];
	xf_ep_init(&e[0], &w, 0);
	xf_ep_init(&e[1], &w, 1);
	if (writes) {
		xf_ep_writes(&e[0]);
		xf_ep_writes(&e[1]);
	}
	struct xchan_cfg ct = {
		.net = &e[0].net, .peer = 1, .conn = 3, .write_min = writes == 1 ? 1 : 512};
	struct xchan_cfg cr = {.net = &e[1].net, .peer = 0, .conn = 3};
	struct xchan_tx *tx = NULL;
	struct xchan_rx *rx = NULL;
	if (xchan_tx_new(&ct, &tx) || xchan_rx_new(&cr, &rx)) {
		xchan_tx_free(tx);
		xchan_rx_free(rx);
		return 0;
	}
	int nforged = 0;
	for (int step = 0; step < 2000 && r.n; step++) {
		struct chan_err err;
		int op = (int)(take(&r, 1) % 7), rc = 0, done = 0;
		chan_req q = -1;
		uint64_t got[CHAN_MAX_RECVS];
		switch (op) {
		case 0: { /* a receive of n buffers */
			int n = (int)(take(&r, 1) % CHAN_MAX_RECVS) + 1;
			struct fx_recv nr = {0};
			uint64_t caps[CHAN_MAX_RECVS];
			int32_t tags[CHAN_MAX_RECVS];
			struct xchan_wkey wk[CHAN_MAX_RECVS] = {{0}};
			for (int b = 0; b < n; b++) {
				caps[b] = take(&r, 2) % FX_MAXB;
				tags[b] = (int32_t)(take(&r, 1) % 4);
				nr.bufs[b] = malloc(caps[b] + 1);
				uint64_t key, raddr;
				if (writes && (take(&r, 1) & 1) &&
				    !xf_mr_open(&e[1], nr.bufs[b], caps[b] + 1, &key, &raddr,
						&nr.mrs[b]))
					wk[b] = (struct xchan_wkey){
						.key = key, .addr = raddr, .ok = 1};
			}
			/* 1: read as it fills (lands elsewhere when modelled); 2, 3: unknown */
			uint32_t rflags = n == 1 ? take(&r, 1) % 4 : 0;
			rc = xchan_rx_post_w(rx, n, nr.bufs, caps, tags, wk, rflags, &q, &err);
			if (rc == 0) {
				assert(q >= 0 && q < CHAN_MAX_REQS && !recvs[q].live);
				recvs[q] = nr;
				recvs[q].live = 1;
			} else {
				fx_recv_free(&e[1], &nr);
			}
			break;
		}
		case 1:
			rc = xchan_tx_post(tx, src, take(&r, 2) % (FX_MAXB + 64),
					   (int32_t)(take(&r, 1) % 4), &q, &err);
			break;
		case 2:
			rc = xchan_tx_test(tx, (chan_req)(take(&r, 1) % CHAN_MAX_SENDS), &done,
					   NULL, &err);
			break;
		case 3:
			q = (chan_req)(take(&r, 1) % CHAN_MAX_REQS);
			rc = xchan_rx_test(rx, q, &done, got, &err);
			/* reported (done or failed): the buffers are the caller's again */
			if (recvs[q].live && (done || (rc && rc != -EINVAL)))
				fx_recv_free(&e[1], &recvs[q]);
			break;
		case 4:
			check_rc(xchan_tx_progress(tx, &err));
			rc = xchan_rx_progress(rx, &err);
			break;
		case 5: { /* a forged message to one end, as if from the other */
			if (nforged == FX_FORGED)
				break;
			int to_tx = (int)(take(&r, 1) & 1);
			uint32_t kind = take(&r, 1) % 5 + 1, low = take(&r, 4);
			uint32_t len = take(&r, 2) % sizeof(forged[0]);
			for (uint32_t i = 0; i < len; i++)
				forged[nforged][i] = (uint8_t)take(&r, 1);
			struct iovec iov = {forged[nforged], len};
			xf_send(&e[to_tx ? 1 : 0], to_tx ? 0 : 1,
				xchan_tag((enum xchan_kind)kind, 3, low), &iov, 1,
				&forged_op[nforged]);
			nforged++;
			break;
		}
		case 6:
			rc = take(&r, 1) & 1 ? xchan_tx_ping(tx, &err) : xchan_rx_ping(rx, &err);
			break;
		}
		check_rc(rc);
	}
	/* the endpoints go first: only then are the receive buffers ours to free */
	xchan_tx_free(tx);
	xchan_rx_free(rx);
	xf_progress(&e[0]);
	for (int q = 0; q < CHAN_MAX_REQS; q++)
		if (recvs[q].live)
			fx_recv_free(&e[1], &recvs[q]);
	xf_world_free(&w);
	return 0;
}
