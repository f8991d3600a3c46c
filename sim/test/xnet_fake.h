/* SPDX-License-Identifier: MIT */
/*
 * xnet_fake.h - an in-memory transport behind struct xnet (sim/core/xnet.h) for the unit
 * tests: several endpoints in one process, tagged messages matched exactly as libfabric
 * matches them, and the knobs the tests need to be hostile: messages of different tags
 * delivered in a seeded shuffled order, every k-th send refused with -EAGAIN, a peer gone.
 * A message is read from the sender's buffers only when it is delivered, so a sender that
 * touched its buffers before the op was DONE would be caught. Writes (xf_ep_writes) travel on
 * the same wire: a shuffled delivery may reorder writes among themselves and around messages
 * sent before them, never a message sent after one (the order xnet.h promises); a write is
 * checked against the target's open registrations when it lands and fails with -EACCES
 * outside them, and then what its sender had sent the target behind it fails undelivered
 * (-ECONNRESET: the connection broke; later sends go over a new one). With late_writes = k a
 * write's op completes k progress calls after it lands (after the ACK of its header, for k of
 * 8 or so), and the fake checks that its buffer was left alone until then. Single-threaded; test-only.
 */
#ifndef SF_TEST_XNET_FAKE_H
#define SF_TEST_XNET_FAKE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/xnet.h"

#define XF_MAX_EP 4
#define XF_MAX 4096
#define XF_MAX_MR 256
#define XF_RADDR0 0x40000000ull /* registration i's address for writers: XF_RADDR0 * (i + 1) */

struct xf_msg {
	int src, dst;
	int write; /* a write to key at raddr, from iov[0] */
	uint64_t raddr, key;
	uint64_t tag;
	struct iovec iov[XNET_MAX_IOV];
	int niov;
	struct xnet_op *op; /* the send's; NULL once buffered as unexpected */
	uint8_t *copy;	    /* unexpected: the payload */
	uint64_t len;
};

struct xf_mr {
	int ep, open;
	uint8_t *base;
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
	int trickle;	  /* progress delivers one message (so the order of arrivals shows) */
	int late_writes;  /* a write's op completes this many progress calls after it lands */
	struct {
		int left;
		struct xnet_op *op;
		const uint8_t *src;
		uint64_t len, sum;
	} late[XF_MAX];
	int nlate;
	uint64_t reused; /* late writes whose buffer changed before their op completed */
	int nsends;
	int dead[XF_MAX_EP]; /* the endpoint's process is gone */
	uint64_t delivered;
	struct xf_mr mr[XF_MAX_MR]; /* key i + 100: registration i */
	int nmr;
	uint64_t writes, write_bytes, writes_refused; /* writes landed, and failed */
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

/* May src put one more on the wire to dst? 0, or the error the send (or write) returns. */
static int xf_admit(struct xf_world *w, int src, int dst)
{
	if (w->dead[dst] || w->dead[src])
		return -ECONNRESET;
	if (w->eagain_every && ++w->nsends % w->eagain_every == 0)
		return -EAGAIN;
	return w->nwire == XF_MAX ? -EAGAIN : 0;
}

static int xf_send(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		   struct xnet_op *op)
{
	struct xf_ep *e = ctx;
	struct xf_world *w = e->w;
	if (peer >= XF_MAX_EP || niov < 1 || niov > XNET_MAX_IOV)
		return -EINVAL;
	int rc = xf_admit(w, e->id, (int)peer);
	if (rc)
		return rc;
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

static int xf_mr_open(void *ctx, void *base, uint64_t len, uint64_t *key, uint64_t *raddr,
		      void **mr)
{
	struct xf_ep *e = ctx;
	struct xf_world *w = e->w;
	if (!base || !len || !key || !raddr || !mr)
		return -EINVAL;
	if (w->nmr == XF_MAX_MR)
		return -ENOSPC;
	int i = w->nmr++;
	w->mr[i].ep = e->id;
	w->mr[i].open = 1;
	w->mr[i].base = base;
	w->mr[i].len = len;
	*key = (uint64_t)i + 100;
	*raddr = XF_RADDR0 * (uint64_t)(i + 1);
	*mr = &w->mr[i];
	return 0;
}

static void xf_mr_close(void *ctx, void *mr)
{
	(void)ctx;
	if (mr)
		((struct xf_mr *)mr)->open = 0;
}

static int xf_write(void *ctx, uint64_t peer, const void *buf, uint64_t len, uint64_t raddr,
		    uint64_t key, struct xnet_op *op)
{
	struct xf_ep *e = ctx;
	struct xf_world *w = e->w;
	if (peer >= XF_MAX_EP || !len || !buf)
		return -EINVAL;
	int rc = xf_admit(w, e->id, (int)peer);
	if (rc)
		return rc;
	w->wire[w->nwire++] = (struct xf_msg){.src = e->id,
					      .dst = (int)peer,
					      .write = 1,
					      .raddr = raddr,
					      .key = key,
					      .iov = {{(void *)buf, len}},
					      .niov = 1,
					      .op = op,
					      .len = len};
	return 0;
}

static uint64_t xf_sum(const void *p, uint64_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (uint64_t i = 0; i < len; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
	return h;
}

/* A write lands: into the target's open registration that covers it, else -EACCES. */
static void xf_land(struct xf_world *w, const struct xf_msg *m)
{
	uint64_t i = m->key - 100;
	if (m->key < 100 || i >= (uint64_t)w->nmr || !w->mr[i].open || w->mr[i].ep != m->dst ||
	    m->raddr < XF_RADDR0 * (i + 1) || m->raddr - XF_RADDR0 * (i + 1) > w->mr[i].len ||
	    m->len > w->mr[i].len - (m->raddr - XF_RADDR0 * (i + 1))) {
		w->writes_refused++;
		xop_finish(m->op, -EACCES, 0);
		for (int k = 0; k < w->nwire; k++) /* the connection broke: what followed is lost */
			if (w->wire[k].src == m->src && w->wire[k].dst == m->dst) {
				xop_finish(w->wire[k].op, -ECONNRESET, 0);
				memmove(&w->wire[k], &w->wire[k + 1],
					sizeof(w->wire[0]) * (size_t)(--w->nwire - k));
				k--;
			}
		return;
	}
	memcpy(w->mr[i].base + (m->raddr - XF_RADDR0 * (i + 1)), m->iov[0].iov_base, m->len);
	w->writes++;
	w->write_bytes += m->len;
	if (w->late_writes && w->nlate < XF_MAX) {
		w->late[w->nlate].left = w->late_writes;
		w->late[w->nlate].op = m->op;
		w->late[w->nlate].src = m->iov[0].iov_base;
		w->late[w->nlate].len = m->len;
		w->late[w->nlate++].sum = xf_sum(m->iov[0].iov_base, m->len);
		return;
	}
	xop_finish(m->op, 0, m->len);
}

/* Late writes whose time has come complete, each checked: its buffer as it was when it
 * landed. */
static void xf_finish_late(struct xf_world *w)
{
	for (int i = 0; i < w->nlate; i++) {
		if (--w->late[i].left > 0)
			continue;
		w->reused += xf_sum(w->late[i].src, w->late[i].len) != w->late[i].sum;
		xop_finish(w->late[i].op, 0, w->late[i].len);
		w->late[i--] = w->late[--w->nlate];
	}
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
	if (m.write) {
		xf_land(w, &m);
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
	xf_finish_late(w);
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
		if (w->rng) { /* any message that is the oldest of its (src, dst, tag) and
			       * has no write before it (src, dst); any write */
			w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL;
			k = (int)((w->rng >> 33) % (uint64_t)w->nwire);
			for (int j = 0; j < k && !w->wire[k].write; j++)
				if (w->wire[j].src == w->wire[k].src &&
				    w->wire[j].dst == w->wire[k].dst &&
				    (w->wire[j].write || w->wire[j].tag == w->wire[k].tag)) {
					k = j;
					break;
				}
		}
		xf_deliver(w, k);
		if (w->trickle)
			break;
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

/* Give the endpoint writes (mr_open, mr_close, write). */
static void xf_ep_writes(struct xf_ep *e)
{
	e->net.mr_open = xf_mr_open;
	e->net.mr_close = xf_mr_close;
	e->net.write = xf_write;
}

/* Free what the world still holds (unexpected copies). */
static void xf_world_free(struct xf_world *w)
{
	for (int i = 0; i < w->nunexp; i++)
		free(w->unexp[i].copy);
	w->nunexp = 0;
}

#endif /* SF_TEST_XNET_FAKE_H */
