/* SPDX-License-Identifier: MIT */
/*
 * fuzz_chan.c - the data path against a hostile or corrupt peer.
 *
 * The input is a program: posts, progress calls and tests on both ends of one
 * channel, interleaved with arbitrary writes into the parts of the shared
 * region that the *peer* owns (descriptors, slots, the CTS ring, the peer's
 * counters). Whatever is written there, an endpoint must never read or write
 * outside its own buffers and the region; ASan checks that. Both the inline
 * copies and the copy threads' path run (SIMFABRIC_COPY_THREADS=1 when unset),
 * and one-sided delivery too: receives into two "regions" (host buffers that a
 * stand-in copy engine writes, checking every range as the GPU one must), on the
 * ideal fabric or a modelled one (a 2-link route whose rate, latency and loss the
 * input picks), where receives read as they fill hold their bytes to the model's
 * arrival times and large one-sided ones stream in pieces, started at their times or armed
 * ahead and fired then (the engine checks that they are fired in order and never polled before).
 *
 * fuzz-libs: sim/core/chan_shm.c sim/core/chan_watch.c sim/core/model.c sim/core/model_rand.c sim/core/fstate.c sim/core/fstate_fault.c sim/core/fault.c sim/core/copyq.c -lpthread
 */
#include "sim/core/chan.c"

#include <stdio.h>

#include "sim/fuzz/fuzz_input.h"
#include "sim/test/fenv.h"

/* The stand-in copy engine: regions 1 and 2; copies land at start, are "done" every other poll. */
#define FZ_REGION (256u << 10) /* room for a one-sided message of several pieces */
static uint8_t fz_region[3][FZ_REGION];
static int fz_start(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		    uint64_t len, const struct chan_flip *flips, uint32_t nflips, uint64_t *ticket)
{
	(void)ctx, (void)where;
	if (region < 1 || region > 2 || off > FZ_REGION || len > FZ_REGION - off)
		return -ERANGE; /* what the GPU engine checks before it issues anything */
	memcpy(fz_region[region] + off, src, len);
	for (uint32_t k = 0; k < nflips; k++)
		if (flips[k].off < len)
			fz_region[region][off + flips[k].off] ^= flips[k].mask;
	*ticket = 0;
	return 0;
}
static int fz_poll(void *ctx, uint64_t ticket)
{
	static int n;
	(void)ctx, (void)ticket;
	return ++n & 1;
}
static void fz_drain(void *ctx)
{
	(void)ctx;
}
static const struct chan_dma fz_dma = {.start = fz_start, .poll = fz_poll, .drain = fz_drain};

/*
 * The engine with arm (the input's choice): an armed copy waits in a table until fired, checked
 * as start's are. The channel's promises abort when broken: fired in the order armed, never
 * polled before fired; drain lets the rest go.
 */
#define FZ_ARMED 64
#define FZ_ARM_BIT (1ull << 63)
static struct {
	uint64_t region, off, len;
	const void *src;
} fz_armed[FZ_ARMED];
static uint64_t fz_next, fz_oldest; /* [fz_oldest, fz_next) armed, not yet fired */
static uint64_t fz_drained;	    /* those below it were let go by a drain */
static int fz_arm(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		  int src_dev, uint64_t len, uint64_t *ticket)
{
	(void)ctx, (void)where, (void)src_dev;
	if (region < 1 || region > 2 || off > FZ_REGION || len > FZ_REGION - off)
		return -ERANGE;
	if (fz_next - fz_oldest == FZ_ARMED)
		return -EOPNOTSUPP;
	uint64_t i = fz_next % FZ_ARMED;
	fz_armed[i].region = region, fz_armed[i].off = off, fz_armed[i].len = len;
	fz_armed[i].src = src;
	*ticket = fz_next++ | FZ_ARM_BIT;
	return 0;
}
static void fz_fire(void *ctx, uint64_t ticket)
{
	(void)ctx;
	if (!(ticket & FZ_ARM_BIT) || (ticket & ~FZ_ARM_BIT) >= fz_next)
		abort(); /* not an armed copy */
	if ((ticket & ~FZ_ARM_BIT) < fz_drained)
		return; /* let go by a drain: nothing to do, as the GPU's */
	if ((ticket & ~FZ_ARM_BIT) != fz_oldest)
		abort(); /* out of the order armed */
	uint64_t i = fz_oldest++ % FZ_ARMED;
	memcpy(fz_region[fz_armed[i].region] + fz_armed[i].off, fz_armed[i].src, fz_armed[i].len);
}
static int fz_poll_armed(void *ctx, uint64_t ticket)
{
	if ((ticket & FZ_ARM_BIT) && (ticket & ~FZ_ARM_BIT) >= fz_oldest)
		abort(); /* waited on before it was let go */
	return fz_poll(ctx, ticket);
}
static void fz_drain_armed(void *ctx)
{
	while (fz_oldest < fz_next)
		fz_fire(ctx, fz_oldest | FZ_ARM_BIT);
	fz_drained = fz_next;
}
static const struct chan_dma fz_dma_armed = {.start = fz_start,
					     .poll = fz_poll_armed,
					     .drain = fz_drain_armed,
					     .arm = fz_arm,
					     .fire = fz_fire};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setenv("SIMFABRIC_COPY_THREADS", "1", 0); /* the copy threads too, not only inline copies */
	static uint8_t src[FZ_REGION + 1], dst[CHAN_MAX_REQS][CHAN_MAX_RECVS][256];
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
	uint32_t engine = take(&r, 1);
	int direct = engine & 1; /* the sender has a copy engine (bit 1: that arms, see below) */
	fz_oldest = fz_drained = fz_next;
	static struct chan_dma armed; /* bit 2: whole sends; bit 3: armed 20 us ahead at most */
	armed = fz_dma_armed;
	armed.arm_whole = (engine >> 2) & 1;
	armed.arm_ahead_ns = engine & 8 ? 20000 : 0;
	if (direct && chan_tx_set_dma(tx, engine & 2 ? &armed : &fz_dma, NULL))
		abort();
	uint32_t fabric = take(&r, 1); /* odd: a modelled route of 2 links */
	struct fst_view *fv = NULL;
	void *fbase = NULL;
	size_t flen = 0;
	if (fabric & 1) {
		struct model_link links[2];
		memset(links, 0, sizeof(links));
		for (int i = 0; i < 2; i++) {
			links[i].rate_bps = 1000000000ull << (fabric >> 1 & 7); /* 1 to 128 Gb/s */
			links[i].latency_ns = fabric >> 4 & 3 ? 1000 * (fabric >> 4 & 3) : 0;
			links[i].mtu = 4096;
			links[i].hdr_bytes = 64;
		}
		if (fabric & 0x40) { /* every packet lost: messages fail */
			links[1].loss.kind = MODEL_LOSS_BERNOULLI;
			links[1].loss.p[0] = UINT32_MAX;
		}
		struct model_nic nic = {.o_send_ns = 300, .o_recv_ns = 300, .ack_proc_ns = 200,
					.timeout_exp = 1, .retry_count = 1,
					.timeout_scale_ppm = 1000000};
		fenv_resolve(links, 2, &nic);
		fv = fenv_map(2, links, 2, fabric, &fbase, &flen);
		struct model_path p = {.nhops = 2, .switching = MODEL_CUT_THROUGH};
		p.link_id[1] = 1;
		p.hop[0] = &fv->links[0];
		p.hop[1] = &fv->links[1];
		if (chan_set_route(shm, &p, 0, &nic, 0, 1) || chan_tx_set_fabric(tx, fv) ||
		    chan_rx_set_fabric(rx, fv))
			abort();
	}
	chan_req sreq[64], rreq[64];
	int ns = 0, nr = 0;
	while (r.n) {
		uint32_t op = take(&r, 1) % 8, v = take(&r, 3);
		int done;
		uint64_t sz[CHAN_MAX_RECVS];
		switch (op) {
		case 0: { /* receive */
			int n = 1 + (int)(v % CHAN_MAX_RECVS);
			void *bufs[CHAN_MAX_RECVS];
			uint64_t caps[CHAN_MAX_RECVS];
			int32_t tags[CHAN_MAX_RECVS];
			struct chan_region where[CHAN_MAX_RECVS];
			int regions = (v >> 8) & 1;
			for (int i = 0; i < n; i++) {
				bufs[i] = dst[nr % CHAN_MAX_REQS][i];
				tags[i] = (int32_t)(take(&r, 1) % 4);
				uint32_t w = take(&r, 1); /* a region, or host memory */
				where[i] = (struct chan_region){.id = w % 3, .off = (w >> 2) * 64};
				/* a host buffer holds 256 bytes; a region's range is the copy engine's
				 * to check */
				caps[i] = regions && where[i].id ? take(&r, 3) % (FZ_REGION + 1)
								 : take(&r, 1);
			}
			if (nr < 64 && chan_rx_post_in(rx, n, bufs, caps, tags, regions ? where : NULL,
						       (uint32_t)(v >> 9) & 3, /* 2, 3: unknown */
						       &rreq[nr], NULL) == 0)
				nr++;
			break;
		}
		case 1: /* send */
			if (ns < 64 && chan_tx_post_src(tx, src, v % sizeof(src), (int32_t)(v % 4),
							(v >> 15) & direct ? CHAN_MEM_DEVICE : CHAN_MEM_HOST,
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
		case 6: { /* the receiver's side is hostile: the CTS ring and its export address */
			size_t from = offsetof(struct chan_shm, rx_where);
			size_t off = from + v % (sizeof(shm->rx_where) + sizeof(shm->cts));
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
	if (fv)
		fenv_unmap(fv, fbase, flen);
	return 0;
}
