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
	uint32_t from_host;
	enum xmodel_side side;
	int64_t epoch;			  /* the fabric's: virtual time 0 on this host's clock */
	int64_t rev_ns;			  /* the route's latency, back (the ACK's way) */
	uint64_t held_by[FAULT_MAX / 64]; /* comm_hang faults that have held it (counted once) */
	int corrupts; /* a hop of the route has corrupt_p: rx_deliver flips bits */
	int replay;   /* the route's loss recovery spans both pieces (fst_route_replayed) */
	uint32_t replay_nfaults; /* ... as of this many faults (a live fault may change it) */
	/* rx: the corruption a degrade set on the last message that arrive replayed (deliver
	 * follows arrive for the same message) */
	int degraded;
	uint64_t degraded_msg;
	uint32_t corrupt_p[MODEL_MAX_HOPS];
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
	m->from_host = r->from_host;
	m->side = side;
	m->epoch = v->shm->epoch_ns;
	for (int j = 0; j < m->c.npath; j++) {
		m->rev_ns += v->links[m->c.path[j]].latency_ns;
		m->corrupts |= v->links[m->c.path[j]].corrupt_p != 0;
	}
	m->replay = fst_route_replayed(v, &m->c);
	m->replay_nfaults = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	*out = m;
	return 0;
}

/* Does the route need the replay (xmodel.h)? Asked again when the fault table grows. */
static int replayed(struct xmodel *m)
{
	uint32_t n = atomic_load_explicit(&m->v->shm->nfaults, memory_order_acquire);
	if (n != m->replay_nfaults) {
		m->replay = fst_route_replayed(m->v, &m->c);
		m->replay_nfaults = n;
	}
	return m->replay;
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

int xmodel_peer_killed(struct xmodel *m, int64_t now_ns, uint32_t *fid)
{
	return fst_call_armed(m->v->shm, FAULT_K_NODE_KILL) &&
		fst_node_killed(m->v->shm, m->side == XMODEL_TX ? m->c.dst_node : m->c.src_node,
				now_ns - XMODEL_KILL_SEEN_NS, fid);
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

/*
 * The replay's words in a stamp's x[] (fstate.h, struct fst_front and fst_back), times
 * virtual. A Markov state is one word: its state in the top 3 bits, its packet count below.
 */
enum {
	XF_POST = 0,
	XF_DELAY,
	XF_HOST,
	XF_BUSY,
	XF_LOSS = XF_BUSY + MODEL_MAX_HOPS,
	XF_DEGRADES = XF_LOSS + MODEL_MAX_HOPS,
	XF_END = XF_DEGRADES + FAULT_MAX / 64,
	XB_HOST = 0,
	XB_BUSY,
	XB_LOSS = XB_BUSY + MODEL_MAX_HOPS,
	XB_EXPECT = XB_LOSS + MODEL_MAX_HOPS,
	XB_LOST = XB_EXPECT + MODEL_MAX_HOPS,
	XB_RETX,
	XB_DUPS,
	XB_FAILED,
	XB_END
};
_Static_assert(XF_END <= XCHAN_STAMP_X && XB_END <= XCHAN_STAMP_X, "the replay's words fit");
#define XLOSS_PACKETS ((1ull << 61) - 1)

static uint64_t loss_word(const struct model_loss_state *l)
{
	return (uint64_t)(l->state & 7) << 61 | (l->packets & XLOSS_PACKETS);
}

static int loss_of(uint64_t w, struct model_loss_state *l)
{
	l->state = (uint32_t)(w >> 61);
	l->packets = w & XLOSS_PACKETS;
	return l->state <= 4 ? 0 : -EPROTO;
}

/* A time this host reserved until, for the peer: no earlier than floor (which is no loss:
 * the model takes max(busy, when the message is there)), virtual. */
static uint64_t busy_word(const struct xmodel *m, int64_t t, int64_t floor)
{
	return (uint64_t)to_virtual(m, t > floor ? t : floor);
}

static void front_pack(const struct xmodel *m, const struct fst_front *f, struct xchan_stamp *s)
{
	s->x[XF_POST] = (uint64_t)to_virtual(m, f->post_ns);
	s->x[XF_DELAY] = (uint64_t)f->delay_ns;
	s->x[XF_HOST] = busy_word(m, f->host_busy, f->post_ns);
	for (int j = 0; j < m->split; j++) {
		s->x[XF_BUSY + j] = busy_word(m, f->busy[j], f->post_ns);
		s->x[XF_LOSS + j] = loss_word(&f->loss[j]);
	}
	memcpy(&s->x[XF_DEGRADES], f->degrades, sizeof(f->degrades));
}

static int front_unpack(const struct xmodel *m, const struct xchan_stamp *s, int64_t now_ns,
			struct fst_front *f)
{
	memset(f, 0, sizeof(*f));
	int64_t post = (int64_t)s->x[XF_POST], host = (int64_t)s->x[XF_HOST];
	f->delay_ns = (int64_t)s->x[XF_DELAY];
	if (!time_ok(m, post, now_ns) || post == MODEL_NEVER || !time_ok(m, host, now_ns) ||
	    f->delay_ns < 0 || f->delay_ns > XMODEL_AHEAD_NS)
		return -EPROTO;
	if (host == MODEL_NEVER) /* a time an honest front never has: it would hold links */
		return -EPROTO;
	f->post_ns = to_abs(m, post);
	f->host_busy = to_abs(m, host);
	f->whole_outages = (s->flags & XCHAN_S_REPLAY) != 0;
	for (int j = 0; j < m->split; j++) {
		int64_t b = (int64_t)s->x[XF_BUSY + j];
		if (!time_ok(m, b, now_ns) || b == MODEL_NEVER ||
		    loss_of(s->x[XF_LOSS + j], &f->loss[j]))
			return -EPROTO;
		f->busy[j] = to_abs(m, b);
	}
	memcpy(f->degrades, &s->x[XF_DEGRADES], sizeof(f->degrades));
	return 0;
}

static void back_pack(const struct xmodel *m, const struct fst_back *b, int64_t floor,
		      struct xchan_stamp *ack)
{
	ack->x[XB_HOST] = busy_word(m, b->host_busy, floor);
	for (int j = 0; j < m->split; j++) {
		ack->x[XB_BUSY + j] = busy_word(m, b->busy[j], floor);
		ack->x[XB_LOSS + j] = loss_word(&b->loss[j]);
		ack->x[XB_EXPECT + j] = b->expect[j];
	}
	const struct model_msg *c = &b->counts;
	ack->x[XB_LOST] = (uint64_t)c->lost | (uint64_t)c->timeouts << 32;
	ack->x[XB_RETX] = c->retx_packets;
	ack->x[XB_DUPS] = (uint64_t)c->duplicates | (uint64_t)c->reordered << 32;
	ack->x[XB_FAILED] = (uint64_t)(c->failed != 0) | (uint64_t)(uint32_t)(c->fail_hop + 1) << 8;
	ack->flags |= XCHAN_S_REPLAY;
}

static int back_unpack(const struct xmodel *m, const struct xchan_stamp *ack, int64_t now_ns,
		       struct fst_back *b)
{
	memset(b, 0, sizeof(*b));
	int64_t host = (int64_t)ack->x[XB_HOST];
	if (!time_ok(m, host, now_ns))
		return -EPROTO;
	b->host_busy = host == MODEL_NEVER ? 0 : to_abs(m, host);
	for (int j = 0; j < m->split; j++) {
		int64_t t = (int64_t)ack->x[XB_BUSY + j];
		if (!time_ok(m, t, now_ns) || loss_of(ack->x[XB_LOSS + j], &b->loss[j]))
			return -EPROTO;
		b->busy[j] = t == MODEL_NEVER ? 0 : to_abs(m, t); /* never: nothing to commit */
		b->expect[j] = ack->x[XB_EXPECT + j];
	}
	struct model_msg *c = &b->counts;
	c->lost = (uint32_t)ack->x[XB_LOST];
	c->timeouts = (uint32_t)(ack->x[XB_LOST] >> 32);
	c->retx_packets = ack->x[XB_RETX];
	c->duplicates = (uint32_t)ack->x[XB_DUPS];
	c->reordered = (uint32_t)(ack->x[XB_DUPS] >> 32);
	c->failed = (int)(ack->x[XB_FAILED] & 1);
	uint64_t hop = ack->x[XB_FAILED] >> 8;
	if (hop > (uint64_t)m->split || (ack->x[XB_FAILED] & 0xfe))
		return -EPROTO;
	c->fail_hop = (int)hop - 1;
	if (c->fail_hop >= m->split)
		return -EPROTO;
	return 0;
}

static int tx_post(void *ctx, int64_t now_ns, uint64_t bytes, struct xchan_stamp *s)
{
	struct xmodel *m = ctx;
	if (m->side != XMODEL_TX)
		return -EINVAL;
	struct model_stamp out;
	struct fst_front f;
	struct fst_hit hit;
	int replay = replayed(m);
	int rc = fst_reserve_front(m->v, &m->c, m->split, bytes, now_ns, replay, &out, &f, &hit);
	if (rc < 0)
		return rc;
	m->c.msgs++;
	memset(s, 0, sizeof(*s));
	s->hop = (uint32_t)m->split;
	front_pack(m, &f, s); /* always: the receiver may find the replay needed by itself */
	if (replay)	      /* ... and it has this piece's outages to meet (f.whole_outages) */
		s->flags |= XCHAN_S_REPLAY;
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
		jit = model_tadd(jit, model_jitter_ns(&l->jitter, &k, &m->c.mc.jit_z[j]));
	}
	return jit;
}

/* The fidelity monitor: how late the bytes were for the model's delivery time. */
static void record_late(struct xmodel *m, int64_t now_ns, int64_t ready_ns)
{
	if (ready_ns < MODEL_NEVER) {
		int64_t late = now_ns - ready_ns;
		fst_record_xlateness(m->v->shm, last_link(m), late > 0 ? late : 0, m->from_host);
	}
}

/* The replay (fstate.h): the whole route's attempts from the sender's front. */
static int rx_replay(struct xmodel *m, int64_t now_ns, uint64_t bytes, const struct xchan_stamp *s,
		     const struct model_stamp *in, int64_t *ready_ns, struct xchan_stamp *ack)
{
	struct fst_front f;
	struct fst_back b;
	struct model_msg out;
	struct fst_hit hit;
	if (front_unpack(m, s, now_ns, &f))
		return -EPROTO;
	int rc = fst_reserve_rest(m->v, &m->c, m->split, bytes, &f, in, &out, &b, &hit);
	if (rc < 0)
		return rc;
	back_pack(m, &b, f.post_ns, ack);
	m->degraded = hit.corrupt_set;
	m->degraded_msg = m->c.msgs - 1;
	memcpy(m->corrupt_p, hit.corrupt_p, sizeof(m->corrupt_p));
	if (out.failed) {
		struct fst_hit h = hit;
		if (h.fault < 0) /* the model's own: retries exhausted by loss on this hop */
			h.link = m->c.path[out.fail_hop >= 0 ? out.fail_hop : 0];
		stamp_fail(ack, to_virtual(m, out.arrive_ns), &h);
		ack->timeouts = out.timeouts;
		*ready_ns = out.arrive_ns;
		return 0;
	}
	*ready_ns = out.recv_done_ns;
	ack->t[0] = to_virtual(m, out.send_done_ns);
	record_late(m, now_ns, *ready_ns);
	return 0;
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
	ack->flags &= ~(uint32_t)XCHAN_S_REPLAY;
	memset(ack->x, 0, sizeof(ack->x));
	m->degraded = 0;
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
	m->c.msgs = msg; /* the draws' key: the message's number, as the sender's */
	if ((s->flags & XCHAN_S_REPLAY) || replayed(m))
		return rx_replay(m, now_ns, bytes, s, &in, ready_ns, ack);
	struct fst_hit hit;
	int n = m->c.npath - m->split;
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
	int64_t fifo = model_tadd(m->c.mc.last_arrive, out.last_tx_ns);
	if (arrive < fifo)
		arrive = fifo;
	m->c.mc.last_arrive = arrive;
	*ready_ns = model_tadd(arrive, m->c.nic.o_recv_ns);
	ack->t[0] = to_virtual(
		m,
		model_tadd(model_tadd(model_tadd(arrive, m->c.nic.ack_proc_ns), m->rev_ns),
			   m->c.nic.o_recv_ns));
	record_late(m, now_ns, *ready_ns);
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
	if (ack->flags & XCHAN_S_REPLAY) { /* the replay's commits on this host's hops */
		struct fst_back b;
		if (back_unpack(m, ack, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, &b))
			return -EPROTO;
		int rc = fst_commit_back(m->v, &m->c, m->split, &b);
		if (rc)
			return rc;
	}
	if (ack->flags & XCHAN_S_FAIL) { /* RC: the connection is in error from here on, and
					    what follows flushes from the failure on */
		m->c.mc.failed = 1;
		if (*done_ns > m->c.mc.last_arrive)
			m->c.mc.last_arrive = *done_ns;
	}
	return 0;
}

/* Silent corruption (the links' corrupt_p), as the shared-memory channel flips it: each packet
 * the model corrupts gets one bit flipped, in the receiver's buffer; counted on the link where
 * this host's piece of the route begins. */
static void rx_deliver(void *ctx, uint64_t msg, void *buf, uint64_t len)
{
	struct xmodel *m = ctx;
	int degraded = m->degraded && m->degraded_msg == msg;
	if (m->side != XMODEL_RX || (!m->corrupts && !degraded))
		return;
	struct model_path p;
	struct model_link tmp[MODEL_MAX_HOPS];
	uint64_t mtu;
	if (fst_conn_path(m->v, &m->c, &p) || !(mtu = model_path_mtu(&p)))
		return;
	for (int j = 0; degraded && j < p.nhops; j++) { /* what the replay's degrades set */
		tmp[j] = *p.hop[j];
		tmp[j].corrupt_p = m->corrupt_p[j];
		p.hop[j] = &tmp[j];
	}
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
