/* SPDX-License-Identifier: MIT */
/*
 * xmodel.c - the distributed fabric clock's hooks for xchan (xmodel.h has the contract).
 */
#include "sim/core/xmodel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct xmodel {
	struct fst_view *v;
	struct fst_conn c;
	int split;
	enum xmodel_side side;
	int64_t epoch;			  /* the fabric's: virtual time 0 on this host's clock */
	int64_t rev_ns;			  /* the route's latency, back (the ACK's way) */
	int64_t last_arrive;		  /* rx: FIFO per connection, as model_message clamps it */
	double jit_z[MODEL_MAX_HOPS];	  /* rx: each hop's jitter AR(1) score (model_conn's) */
	uint64_t held_by[FAULT_MAX / 64]; /* comm_hang faults that have held it (counted once) */
	int corrupts; /* a hop of the route has corrupt_p: rx_deliver flips bits */
};

int xmodel_new(struct fst_view *v, const struct xmodel_route *r, enum xmodel_side side,
	       struct xmodel **out)
{
	*out = NULL;
	if (!v || !r || r->conn.npath < 1 || r->conn.npath > MODEL_MAX_HOPS || r->split < 1 ||
	    r->split > r->conn.npath || r->conn.src_nic >= v->nnics ||
	    (side != XMODEL_TX && side != XMODEL_RX))
		return -EINVAL;
	for (int j = 0; j < r->conn.npath; j++)
		if (r->conn.path[j] >= v->nlinks)
			return -EINVAL;
	struct xmodel *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->v = v;
	m->c = r->conn;
	m->c.msgs = 0;
	memset(&m->c.mc, 0, sizeof(m->c.mc));
	m->split = r->split;
	m->side = side;
	m->epoch = v->shm->epoch_ns;
	for (int j = 0; j < m->c.npath; j++) {
		m->rev_ns += v->links[m->c.path[j]].latency_ns;
		m->corrupts |= v->links[m->c.path[j]].corrupt_p != 0;
	}
	*out = m;
	return 0;
}

void xmodel_free(struct xmodel *m)
{
	free(m);
}

int xmodel_held(struct xmodel *m, int64_t now_ns)
{
	uint32_t fid;
	if (!fst_call_armed(m->v->shm, FAULT_K_COMM_HANG) ||
	    !fst_conn_hung(m->v->shm, m->c.src_node, m->c.dst_node, now_ns, &fid))
		return 0;
	if (fid < FAULT_MAX && !(m->held_by[fid / 64] >> (fid % 64) & 1)) {
		m->held_by[fid / 64] |= 1ull << (fid % 64);
		struct fst_fault *ff = fst_fault(m->v->shm, fid);
		if (ff && m->side == XMODEL_TX) /* one connection, counted once (its sender's) */
			atomic_fetch_add(&ff->hit, 1);
	}
	return 1;
}

/* The link a receive's lateness is counted on: the route's last. */
static uint32_t last_link(const struct xmodel *m)
{
	return m->c.path[m->c.npath - 1];
}

/*
 * Times on the wire are virtual (this host's clock less the epoch), or MODEL_NEVER exactly: a
 * message the model never delivers (a stall without end on a NIC without ACK timer) hangs at
 * both ends, as on one host. Anything else a peer sends is bounded: not negative, and not more
 * than XMODEL_AHEAD_NS ahead of this host's virtual now, so that one bad stamp cannot reserve
 * this host's links for years; a last packet's time at most XMODEL_PKT_NS.
 */
#define XMODEL_AHEAD_NS (600LL * 1000000000) /* ten minutes of backlog ahead, at most */
#define XMODEL_PKT_NS 1000000000LL	     /* a packet's time on one link, at most */

static int64_t to_virtual(const struct xmodel *m, int64_t t)
{
	return t >= MODEL_NEVER ? MODEL_NEVER : t - m->epoch;
}

static int64_t to_abs(const struct xmodel *m, int64_t v)
{
	return v >= MODEL_NEVER ? MODEL_NEVER : v + m->epoch;
}

/* A peer's time: never, or virtual, not negative, at most XMODEL_AHEAD_NS past now. */
static int time_ok(const struct xmodel *m, int64_t v, int64_t now_ns)
{
	return v == MODEL_NEVER || (v >= 0 && v <= now_ns - m->epoch + XMODEL_AHEAD_NS);
}

static void stamp_fail(struct xchan_stamp *s, int64_t at_virtual, const struct fst_hit *hit)
{
	s->t[0] = s->t[1] = at_virtual;
	s->t[2] = 0;
	s->flags |= XCHAN_S_FAIL;
	s->fault = hit->fault >= 0 ? (uint32_t)hit->fault + 1 : 0;
	s->link = hit->link;
	s->delay_ns = hit->delay_ns;
}

static int tx_post(void *ctx, int64_t now_ns, uint64_t bytes, struct xchan_stamp *s)
{
	struct xmodel *m = ctx;
	if (m->side != XMODEL_TX)
		return -EINVAL;
	int64_t t = now_ns + m->c.nic.o_send_ns;
	struct model_stamp in = {t, t, 0}, out;
	struct fst_hit hit;
	int rc = fst_reserve_hops(m->v, &m->c, 0, m->split, bytes, now_ns, &in, &out, &hit);
	if (rc < 0)
		return rc;
	m->c.msgs++;
	memset(s, 0, sizeof(*s));
	s->hop = (uint32_t)m->split;
	if (rc == 1) {
		stamp_fail(s, to_virtual(m, out.last_ns), &hit);
		return 0;
	}
	s->t[0] = to_virtual(m, out.first_ns);
	s->t[1] = to_virtual(m, out.last_ns);
	s->t[2] = out.last_tx_ns;
	return 0;
}

/* The route's jitter for message msg, every hop's, as model_message draws it. */
static int64_t jitter_ns(struct xmodel *m, uint64_t msg)
{
	int64_t jit = 0;
	for (int j = 0; j < m->c.npath; j++) {
		const struct model_link *l = &m->v->links[m->c.path[j]];
		if (l->jitter.dist == MODEL_DIST_NONE)
			continue;
		struct model_key k = {
			.seed = m->v->shm->seed, .link = m->c.path[j], .conn = m->c.id, .msg = msg};
		jit = model_tadd(jit, model_jitter_ns(&l->jitter, &k, &m->jit_z[j]));
	}
	return jit;
}

static int rx_arrive(void *ctx, int64_t now_ns, uint64_t msg, uint64_t bytes,
		     const struct xchan_stamp *s, int64_t *ready_ns, struct xchan_stamp *ack)
{
	struct xmodel *m = ctx;
	if (m->side != XMODEL_RX)
		return -EINVAL;
	/* a peer's word: within the route, ordered, bounded */
	if (s->hop != (uint32_t)m->split || !time_ok(m, s->t[0], now_ns) ||
	    !time_ok(m, s->t[1], now_ns) || s->t[0] > s->t[1] || s->t[2] < 0 ||
	    s->t[2] > XMODEL_PKT_NS)
		return -EPROTO;
	*ack = *s;
	if (s->flags & XCHAN_S_FAIL) { /* failed on the sender's hops: at its time */
		*ready_ns = to_abs(m, s->t[1]);
		return 0;
	}
	if (s->t[1] == MODEL_NEVER) { /* never delivered: both ends hang, as on one host */
		*ready_ns = MODEL_NEVER;
		ack->t[0] = MODEL_NEVER;
		return 0;
	}
	struct model_stamp in = {to_abs(m, s->t[0]), to_abs(m, s->t[1]), s->t[2]}, out;
	struct fst_hit hit;
	int n = m->c.npath - m->split;
	m->c.msgs = msg; /* the draws' key: the message's number, as the sender's */
	int rc = n ? fst_reserve_hops(m->v, &m->c, m->split, n, bytes, in.first_ns, &in, &out, &hit)
		   : (out = in, 0);
	if (rc < 0)
		return rc;
	m->c.msgs++;
	if (rc == 1) {
		stamp_fail(ack, to_virtual(m, out.last_ns), &hit);
		*ready_ns = out.last_ns;
		return 0;
	}
	/* jitter, then FIFO per connection: never before the previous message's arrival plus
	 * this one's last packet on the last link (model_message's clamp) */
	int64_t arrive = model_tadd(out.last_ns, jitter_ns(m, msg));
	int64_t fifo = model_tadd(m->last_arrive, out.last_tx_ns);
	if (arrive < fifo)
		arrive = fifo;
	m->last_arrive = arrive;
	*ready_ns = model_tadd(arrive, m->c.nic.o_recv_ns);
	ack->t[0] = to_virtual(
		m,
		model_tadd(model_tadd(model_tadd(arrive, m->c.nic.ack_proc_ns), m->rev_ns),
			   m->c.nic.o_recv_ns));
	/* the fidelity monitor: how late the bytes were for the model's delivery time */
	if (*ready_ns < MODEL_NEVER) {
		int64_t late = now_ns - *ready_ns;
		fst_record_xlateness(m->v->shm, last_link(m), late > 0 ? late : 0);
	}
	return 0;
}

static int tx_acked(void *ctx, const struct xchan_stamp *ack, int64_t *done_ns)
{
	struct xmodel *m = ctx;
	if (m->side != XMODEL_TX)
		return -EINVAL;
	int64_t v = ack->flags & XCHAN_S_FAIL ? ack->t[1] : ack->t[0];
	/* the receiver's word: its time, or never; bounded as a stamp is (from this side's now:
	 * the ACK comes after the post, so a time this far ahead is no model's) */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (!time_ok(m, v, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec))
		return -EPROTO;
	*done_ns = to_abs(m, v);
	if (ack->flags & XCHAN_S_FAIL) /* RC: the connection is in error from here on */
		m->c.mc.failed = 1;
	return 0;
}

/* Silent corruption (the links' corrupt_p), as the shared-memory channel flips it: each packet
 * the model corrupts gets one bit flipped, in the receiver's buffer; counted on the link where
 * this host's piece of the route begins. */
static void rx_deliver(void *ctx, uint64_t msg, void *buf, uint64_t len)
{
	struct xmodel *m = ctx;
	if (m->side != XMODEL_RX || !m->corrupts)
		return;
	struct model_path p;
	uint64_t mtu;
	if (fst_conn_path(m->v, &m->c, &p) || !(mtu = model_path_mtu(&p)))
		return;
	uint64_t npk = (len + mtu - 1) / mtu, n = 0;
	struct model_key key = {.seed = m->v->shm->seed, .conn = m->c.id, .msg = msg};
	for (uint64_t k = model_corrupt_next(&p, &key, 0, npk); k < npk;
	     k = model_corrupt_next(&p, &key, k + 1, npk), n++) {
		uint64_t at;
		uint8_t mask;
		if (model_corrupt_at(&key, k, mtu, len, &at, &mask))
			((uint8_t *)buf)[at] ^= mask;
	}
	if (n)
		fst_count_corrupted(
			m->v->shm, m->c.path[m->split < m->c.npath ? m->split : m->c.npath - 1], n);
}

const struct xchan_model xmodel_hooks = {
	.post = tx_post, .arrive = rx_arrive, .acked = tx_acked, .deliver = rx_deliver};
