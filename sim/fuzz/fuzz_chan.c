/* SPDX-License-Identifier: MIT */
/*
 * fuzz_chan.c - the data path against a hostile or corrupt peer.
 *
 * The input is a program: posts, progress calls and tests on both ends of one
 * channel, interleaved with arbitrary writes into the parts of the shared
 * region that the *peer* owns (descriptors, slots, the CTS ring, the peer's
 * counters). Whatever is written there, an endpoint must never read or write
 * outside its own buffers and the region; ASan checks that. Both the inline
 * copies and the copy threads' path run (SIMFABRIC_COPY_THREADS=1 when unset).
 *
 * fuzz-libs: sim/core/model.c sim/core/fstate.c sim/core/fault.c sim/core/copyq.c -lpthread
 */
#include "sim/core/chan.c"

#include <stdio.h>

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint32_t take(struct rd *r, int bytes)
{
	uint32_t v = 0;
	for (int i = 0; i < bytes && r->n; i++, r->p++, r->n--)
		v = v << 8 | *r->p;
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setenv("SIMFABRIC_COPY_THREADS", "1", 0); /* the copy threads too, not only inline copies */
	static uint8_t src[3 * 4096], dst[CHAN_MAX_REQS][CHAN_MAX_RECVS][256];
	struct rd r = {data, size};
	struct chan_geom g = {.slot_bytes = 4096, .nslots = 2u << (take(&r, 1) % 3)};
	size_t len = chan_shm_bytes(&g);
	void *base = aligned_alloc(4096, len);
	memset(base, 0, len);
	chan_format(base, len, &g, 1);
	struct chan_shm *shm = base;
	struct chan_tx *tx;
	struct chan_rx *rx;
	if (chan_tx_new(shm, len, &tx) || chan_rx_new(shm, len, &rx))
		abort();
	chan_req sreq[64], rreq[64];
	int ns = 0, nr = 0;
	while (r.n) {
		uint32_t op = take(&r, 1) % 8, v = take(&r, 2);
		int done;
		uint64_t sz[CHAN_MAX_RECVS];
		switch (op) {
		case 0: { /* receive */
			int n = 1 + (int)(v % CHAN_MAX_RECVS);
			void *bufs[CHAN_MAX_RECVS];
			uint64_t caps[CHAN_MAX_RECVS];
			int32_t tags[CHAN_MAX_RECVS];
			for (int i = 0; i < n; i++) {
				bufs[i] = dst[nr % CHAN_MAX_REQS][i];
				caps[i] = take(&r, 1);
				tags[i] = (int32_t)(take(&r, 1) % 4);
			}
			if (nr < 64 && chan_rx_post(rx, n, bufs, caps, tags, &rreq[nr], NULL) == 0)
				nr++;
			break;
		}
		case 1: /* send */
			if (ns < 64 && chan_tx_post(tx, src, v % sizeof(src), (int32_t)(v % 4),
						    &sreq[ns], NULL) == 0)
				ns++;
			break;
		case 2:
			chan_tx_progress(tx, NULL);
			chan_rx_progress(rx, NULL);
			break;
		case 3:
			if (nr)
				chan_rx_test(rx, rreq[v % nr], &done, sz, NULL);
			break;
		case 4:
			if (ns)
				chan_tx_test(tx, sreq[v % ns], &done, sz, NULL);
			break;
		case 5: { /* the sender's side is hostile: descriptors and slots */
			size_t off = shm->desc_off + v % (len - shm->desc_off);
			((uint8_t *)base)[off] = (uint8_t)take(&r, 1);
			break;
		}
		case 6: { /* the receiver's side is hostile: the CTS ring */
			size_t off = offsetof(struct chan_shm, cts) + v % sizeof(shm->cts);
			((uint8_t *)base)[off] = (uint8_t)take(&r, 1);
			break;
		}
		case 7: { /* hostile counters */
			uint64_t x = take(&r, 2);
			if (v & 1)
				atomic_store(&shm->tx.head, atomic_load(&shm->tx.head) + x % 4);
			else
				atomic_store(&shm->rx.cts, atomic_load(&shm->rx.cts) + x % 4);
			break;
		}
		}
	}
	chan_tx_free(tx);
	chan_rx_free(rx);
	free(base);
	return 0;
}
