/* SPDX-License-Identifier: MIT */
/*
 * xnet_fake.h - an in-memory transport behind struct xnet (sim/core/xnet.h) for the unit
 * tests: several endpoints in one process, tagged messages matched exactly as libfabric
 * matches them, and the knobs the tests need to be hostile: messages of different tags
 * delivered in a seeded shuffled order, every k-th send refused with -EAGAIN, a peer gone.
 * A message is read from the sender's buffers only when it is delivered, so a sender that
 * touched its buffers before the op was DONE would be caught. Single-threaded; test-only.
 */
#ifndef SF_TEST_XNET_FAKE_H
#define SF_TEST_XNET_FAKE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/xnet.h"

#define XF_MAX_EP 4
#define XF_MAX 4096

struct xf_msg {
	int src, dst;
	uint64_t tag;
	struct iovec iov[XNET_MAX_IOV];
	int niov;
	struct xnet_op *op; /* the send's; NULL once buffered as unexpected */
	uint8_t *copy;	    /* unexpected: the payload */
	uint64_t len;
};

struct xf_recv {
	int ep, src;
	uint64_t tag;
	struct iovec iov[XNET_MAX_IOV];
	int niov;
	struct xnet_op *op;
};

struct xf_world {
	struct xf_msg wire[XF_MAX]; /* sent, not delivered: in send order */
	int nwire;
	struct xf_msg unexp[XF_MAX]; /* delivered before their receive was posted */
	int nunexp;
	struct xf_recv posted[XF_MAX]; /* in post order */
	int nposted;
	uint64_t rng;	  /* 0: deliver in send order; else shuffle (FIFO per tag kept) */
	int eagain_every; /* every k-th send returns -EAGAIN (0: never) */
	int nsends;
	int dead[XF_MAX_EP]; /* the endpoint's process is gone */
	uint64_t delivered;
};

/* One endpoint's view: ctx of its struct xnet. */
struct xf_ep {
	struct xf_world *w;
	int id;
	struct xnet net;
};

static uint64_t xf_len(const struct iovec *iov, int n)
{
	uint64_t l = 0;
	for (int i = 0; i < n; i++)
		l += iov[i].iov_len;
	return l;
}

/* Scatter len bytes (from a flat copy or a gather list) into a receive's buffers. */
static void xf_scatter(const struct xf_recv *r, const struct xf_msg *m)
{
	uint64_t cap = xf_len(r->iov, r->niov);
	uint64_t n = m->len < cap ? m->len : cap, done = 0;
	int si = 0;
	uint64_t soff = 0;
	for (int di = 0; di < r->niov && done < n; di++) {
		uint64_t doff = 0;
		while (doff < r->iov[di].iov_len && done < n) {
			const uint8_t *src;
			uint64_t avail;
			if (m->copy) {
				src = m->copy + done;
				avail = n - done;
			} else {
				while (soff == m->iov[si].iov_len) {
					si++;
					soff = 0;
				}
				src = (const uint8_t *)m->iov[si].iov_base + soff;
				avail = m->iov[si].iov_len - soff;
			}
			uint64_t k = r->iov[di].iov_len - doff;
			if (k > avail)
				k = avail;
			if (k > n - done)
				k = n - done;
			memcpy((uint8_t *)r->iov[di].iov_base + doff, src, k);
			doff += k;
			done += k;
			soff += k;
		}
	}
	xop_finish(r->op, m->len > cap ? -EMSGSIZE : 0, m->len);
}

static int xf_send(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		   struct xnet_op *op)
{
	struct xf_ep *e = ctx;
	struct xf_world *w = e->w;
	if (peer >= XF_MAX_EP || niov < 1 || niov > XNET_MAX_IOV)
		return -EINVAL;
	if (w->dead[peer] || w->dead[e->id])
		return -ECONNRESET;
	if (w->eagain_every && ++w->nsends % w->eagain_every == 0)
		return -EAGAIN;
	if (w->nwire == XF_MAX)
		return -EAGAIN;
	struct xf_msg *m = &w->wire[w->nwire++];
	*m = (struct xf_msg){.src = e->id,
			     .dst = (int)peer,
			     .tag = tag,
			     .niov = niov,
			     .op = op,
			     .len = xf_len(iov, niov)};
	memcpy(m->iov, iov, sizeof(*iov) * (size_t)niov);
	return 0;
}

static int xf_recv(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		   struct xnet_op *op)
{
	struct xf_ep *e = ctx;
	struct xf_world *w = e->w;
	if ((peer >= XF_MAX_EP && peer != XNET_ANY_PEER) || niov < 1 || niov > XNET_MAX_IOV)
		return -EINVAL;
	struct xf_recv r = {.ep = e->id, .src = (int)peer, .tag = tag, .niov = niov, .op = op};
	memcpy(r.iov, iov, sizeof(*iov) * (size_t)niov);
	for (int i = 0; i < w->nunexp; i++) {
		struct xf_msg *m = &w->unexp[i];
		if (m->dst == e->id && (m->src == (int)peer || peer == XNET_ANY_PEER) &&
		    m->tag == tag) {
			xf_scatter(&r, m);
			free(m->copy);
			memmove(m, m + 1, sizeof(*m) * (size_t)(--w->nunexp - i));
			return 0;
		}
	}
	if (w->nposted == XF_MAX)
		return -EAGAIN;
	w->posted[w->nposted++] = r;
	return 0;
}

static int xf_cancel(void *ctx, struct xnet_op *op)
{
	struct xf_world *w = ((struct xf_ep *)ctx)->w;
	for (int i = 0; i < w->nposted; i++)
		if (w->posted[i].op == op) {
			memmove(&w->posted[i], &w->posted[i + 1],
				sizeof(w->posted[0]) * (size_t)(--w->nposted - i));
			xop_finish(op, -ECANCELED, 0);
			return 0;
		}
	return -ENOENT;
}

/* Deliver message k of the wire: into the first matching posted receive, else unexpected. */
static void xf_deliver(struct xf_world *w, int k)
{
	struct xf_msg m = w->wire[k];
	memmove(&w->wire[k], &w->wire[k + 1], sizeof(m) * (size_t)(--w->nwire - k));
	if (w->dead[m.dst]) {
		xop_finish(m.op, -ECONNRESET, 0);
		return;
	}
	w->delivered++;
	for (int i = 0; i < w->nposted; i++) {
		struct xf_recv *r = &w->posted[i];
		if (r->ep == m.dst && (r->src == m.src || r->src == -1) && r->tag == m.tag) {
			xf_scatter(r, &m);
			memmove(r, r + 1, sizeof(*r) * (size_t)(--w->nposted - i));
			xop_finish(m.op, 0, m.len);
			return;
		}
	}
	struct xf_msg *u = &w->unexp[w->nunexp++];
	*u = m;
	u->copy = malloc(m.len ? m.len : 1);
	struct xf_recv sink = {.niov = 1, .iov = {{u->copy, m.len}}, .op = &(struct xnet_op){0}};
	xf_scatter(&sink, &m);
	u->op = NULL;
	xop_finish(m.op, 0, m.len);
}

static int xf_progress(void *ctx)
{
	struct xf_world *w = ((struct xf_ep *)ctx)->w;
	for (int i = 0; i < w->nposted; i++) /* a dead peer's receives fail */
		if ((w->posted[i].src >= 0 && w->dead[w->posted[i].src]) ||
		    w->dead[w->posted[i].ep]) {
			xop_finish(w->posted[i].op, -ECONNRESET, 0);
			memmove(&w->posted[i], &w->posted[i + 1],
				sizeof(w->posted[0]) * (size_t)(--w->nposted - i));
			i--;
		}
	while (w->nwire) {
		int k = 0;
		if (w->rng) { /* any message that is the oldest of its (src, dst, tag) */
			w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL;
			k = (int)((w->rng >> 33) % (uint64_t)w->nwire);
			for (int j = 0; j < k; j++)
				if (w->wire[j].src == w->wire[k].src &&
				    w->wire[j].dst == w->wire[k].dst &&
				    w->wire[j].tag == w->wire[k].tag) {
					k = j;
					break;
				}
		}
		xf_deliver(w, k);
	}
	return 0;
}

static void xf_ep_init(struct xf_ep *e, struct xf_world *w, int id)
{
	*e = (struct xf_ep){.w = w, .id = id};
	e->net = (struct xnet){.ctx = e,
			       .send = xf_send,
			       .recv = xf_recv,
			       .cancel = xf_cancel,
			       .progress = xf_progress};
}

/* Free what the world still holds (unexpected copies). */
static void xf_world_free(struct xf_world *w)
{
	for (int i = 0; i < w->nunexp; i++)
		free(w->unexp[i].copy);
	w->nunexp = 0;
}

#endif /* SF_TEST_XNET_FAKE_H */
