/* SPDX-License-Identifier: MIT */
/*
 * xchan.c - the cross-host channel: chan's protocol in transport messages (xchan.h says
 * which). Every transport op lives in the endpoint that posted it, and a slot is reused only
 * once the transport has given its op back, so a failure or a close never frees what the
 * transport still writes.
 */
#include "sim/core/xchan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define XW_MAGIC 0x58434832u /* "2HCX" (1: before writes): also catches the other byte order */
#define XT_CTS_RING CHAN_MAX_REQS
#define XT_ACK_RING 64
#define XR_ACK_RING (2 * CHAN_MAX_SENDS)
#define XCTL_EMSGSIZE 1
#define XCTL_CLOSE 2
#define XCTL_PING 3 /* liveness: a send that fails once the peer's endpoint is gone */

struct xw_cts {
	uint32_t magic;
	uint32_t n;
	uint64_t seq;
	uint64_t sizes[CHAN_MAX_RECVS];
	int32_t tags[CHAN_MAX_RECVS];
	uint32_t writable; /* bit b: buffer b takes writes, at wkey[b] and waddr[b] */
	uint32_t reserved;
	uint64_t wkey[CHAN_MAX_RECVS];
	uint64_t waddr[CHAN_MAX_RECVS];
};

#define XW_H_WRITTEN 0x1 /* the payload went ahead as a write: this header alone follows it */

struct xw_hdr {
	uint32_t magic;
	uint16_t buf;
	uint16_t flags; /* XW_H_* */
	uint64_t msg;
	uint64_t recv;
	uint64_t total;
	struct xchan_stamp st;
};

struct xw_ack {
	uint32_t magic;
	uint32_t reserved;
	uint64_t msg;
	struct xchan_stamp st;
};

/* EMSGSIZE: v = send size, capacity. CLOSE: v[0] = the messages the peer waits for that this
 * end sent (DATA from tx, ACK from rx) before closing. */
struct xw_ctl {
	uint32_t magic;
	uint32_t code;
	uint64_t v[2];
};

_Static_assert(sizeof(struct xw_cts) == 248 && sizeof(struct xw_hdr) == 344 &&
		       sizeof(struct xw_ack) == 328 && sizeof(struct xw_ctl) == 24,
	       "the wire layout changed: both ends must agree");

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fail(struct chan_err *err, int code, const char *what, uint64_t a, uint64_t b)
{
	if (err)
		*err = (struct chan_err){.code = code, .value = {a, b}, .what = what};
	return code;
}

/* What failed a message the model failed (chan_err's what): a fault (id + 1), or the model's
 * own loss (0), as the shared-memory channel says it. */
static const char *failed_why(uint32_t fault)
{
	return fault ? "the fabric failed the message" : "retry count exhausted on link";
}

/* An endpoint's sticky failure: recorded once, returned by every later call. */
struct sticky {
	int code;
	struct chan_err err;
};

static int stick(struct sticky *s, struct chan_err *err, int code, const char *what, uint64_t a,
		 uint64_t b)
{
	if (!s->code) {
		s->code = code;
		fail(&s->err, code, what, a, b);
	}
	if (err)
		*err = s->err;
	return s->code;
}

static int sticky_get(const struct sticky *s, struct chan_err *err)
{
	if (s->code && err)
		*err = s->err;
	return s->code;
}

static int cfg_check(const struct xchan_cfg *c)
{
	if (!c || !c->net || !c->net->send || !c->net->recv || !c->net->cancel ||
	    !c->net->progress || c->conn < 1 || c->conn > XCHAN_MAX_CONN)
		return -EINVAL;
	if (!c->net->mr_open != !c->net->write || !c->net->mr_close != !c->net->write)
		return -EINVAL; /* writes are all three or none */
	if (c->model && (!c->model->post || !c->model->arrive || !c->model->acked))
		return -EINVAL;
	return 0;
}

static int post_recv(const struct xchan_cfg *c, uint64_t tag, void *a, size_t alen, void *b,
		     size_t blen, struct xnet_op *op)
{
	struct iovec iov[2] = {{a, alen}, {b, blen}};
	atomic_store_explicit(&op->state, XOP_POSTED, memory_order_relaxed);
	int rc = c->net->recv(c->net->ctx, c->peer, tag, iov, b ? 2 : 1, op);
	if (rc)
		atomic_store_explicit(&op->state, XOP_IDLE, memory_order_relaxed);
	return rc;
}

static int post_send(const struct xchan_cfg *c, uint64_t tag, const void *a, size_t alen,
		     const void *b, size_t blen, struct xnet_op *op)
{
	struct iovec iov[2] = {{(void *)a, alen}, {(void *)b, blen}};
	atomic_store_explicit(&op->state, XOP_POSTED, memory_order_relaxed);
	int rc = c->net->send(c->net->ctx, c->peer, tag, iov, b || blen ? 2 : 1, op);
	if (rc)
		atomic_store_explicit(&op->state, XOP_IDLE, memory_order_relaxed);
	return rc;
}

static int post_write(const struct xchan_cfg *c, const void *buf, uint64_t len, uint64_t raddr,
		      uint64_t key, struct xnet_op *op)
{
	atomic_store_explicit(&op->state, XOP_POSTED, memory_order_relaxed);
	int rc = c->net->write(c->net->ctx, c->peer, buf, len, raddr, key, op);
	if (rc)
		atomic_store_explicit(&op->state, XOP_IDLE, memory_order_relaxed);
	return rc;
}

/* Withdraw a posted receive; its op comes back DONE (-ECANCELED or its message) later. */
static void cancel_op(const struct xchan_cfg *c, struct xnet_op *op)
{
	if (xop_busy(op))
		c->net->cancel(c->net->ctx, op);
}

int xnet_drain(const struct xnet *net, struct xnet_op *const *ops, size_t n, int ms)
{
	int64_t until = now_ns() + (int64_t)ms * 1000000;
	for (;;) {
		size_t busy = 0;
		for (size_t i = 0; i < n; i++)
			busy += xop_busy(ops[i]) != 0;
		if (!busy)
			return 1;
		if (!net || now_ns() > until)
			return 0;
		net->progress(net->ctx);
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
}

static int drain_for(const struct xchan_cfg *c, struct xnet_op *const *ops, size_t n, int ms)
{
	return xnet_drain(c->net, ops, n, ms);
}

static int drain(const struct xchan_cfg *c, struct xnet_op *const *ops, size_t n)
{
	return drain_for(c, ops, n, XCHAN_DRAIN_MS);
}

/* At close: a peer known gone may never take what was sent to it, so wait less for it. */
static int drain_close(const struct xchan_cfg *c, struct xnet_op *const *ops, size_t n,
		       int peer_gone)
{
	return drain_for(c, ops, n, peer_gone ? XCHAN_GONE_DRAIN_MS : XCHAN_DRAIN_MS);
}

/* ---- sender -------------------------------------------------------------------------------- */

struct xtx_send {
	const void *data;
	uint64_t size, msg;
	int64_t done_ns; /* the model's completion time, from the ACK (0: now) */
	uint8_t in_use;	 /* handed to the caller as a request, not yet reported */
	uint8_t queued;	 /* waiting for the transport to take it (-EAGAIN) */
	uint8_t acked;	 /* the receiver has it */
	uint8_t doomed;	 /* the model fails it at done_ns */
	uint8_t write;	 /* the payload goes as a write to wkey at waddr, then the header */
	uint8_t written; /* ... and the write is posted */
	uint32_t fault, link, timeouts;
	int64_t delay_ns;
	uint64_t wkey, waddr;
	struct xw_hdr hdr;
	struct xnet_op op;  /* the header and payload, or the header alone */
	struct xnet_op wop; /* the write */
};

struct xchan_tx {
	struct xchan_cfg c;
	struct sticky failed;
	uint64_t next_msg;    /* messages posted */
	uint64_t nwritten;    /* ... whose payload went as a write */
	uint64_t cut_at;      /* a refused write's message: none after it reached the receiver */
	uint64_t queued_from; /* the first not handed to the transport yet */
	uint64_t cur_recv;    /* the head receive the next send fills */
	uint32_t nfilled;
	uint8_t filled[CHAN_MAX_RECVS];
	uint64_t acks_in;
	int inflight;
	int peer_closed; /* the receiver closed after sending peer_acks ACKs */
	uint64_t peer_acks;
	int closing;
	struct xw_cts cts[CHAN_MAX_REQS]; /* received, by seq % CHAN_MAX_REQS */
	uint8_t cts_have[CHAN_MAX_REQS];
	struct xw_cts cts_in[XT_CTS_RING];
	struct xnet_op cts_op[XT_CTS_RING];
	struct xw_ack ack_in[XT_ACK_RING];
	struct xnet_op ack_op[XT_ACK_RING];
	struct xw_ctl ctl_in, ctl_out, ping;
	struct xnet_op ctl_in_op, ctl_out_op, ping_op;
	int64_t ping_ns; /* when the PING out was posted */
	struct xtx_send sends[CHAN_MAX_SENDS];
};

static int tx_post_cts_recv(struct xchan_tx *tx, int i)
{
	return post_recv(&tx->c, xchan_tag(XCHAN_CTS, tx->c.conn, 0), &tx->cts_in[i],
			 sizeof(tx->cts_in[i]), NULL, 0, &tx->cts_op[i]);
}

static int tx_post_ack_recv(struct xchan_tx *tx, int i)
{
	return post_recv(&tx->c, xchan_tag(XCHAN_ACK, tx->c.conn, 0), &tx->ack_in[i],
			 sizeof(tx->ack_in[i]), NULL, 0, &tx->ack_op[i]);
}

static int ctl_recv(const struct xchan_cfg *c, uint32_t dir, struct xw_ctl *in, struct xnet_op *op)
{
	return post_recv(c, xchan_tag(XCHAN_CTL, c->conn, dir), in, sizeof(*in), NULL, 0, op);
}

/* A control message to the peer; at most one is out at a time (an EMSGSIZE, then a CLOSE). */
static void ctl_send(const struct xchan_cfg *c, uint32_t dir, struct xw_ctl *out,
		     struct xnet_op *op, uint32_t code, uint64_t a, uint64_t b)
{
	if (xop_busy(op))
		drain(c, &op, 1);
	if (xop_busy(op))
		return;
	*out = (struct xw_ctl){.magic = XW_MAGIC, .code = code, .v = {a, b}};
	for (int tries = 0; tries < 1000; tries++) {
		int rc = post_send(c, xchan_tag(XCHAN_CTL, c->conn, dir), out, sizeof(*out), NULL,
				   0, op);
		if (rc != -EAGAIN)
			return;
		c->net->progress(c->net->ctx);
	}
}

/*
 * Liveness: a PING to the peer unless one is still out. Its send fails once the peer's
 * endpoint is gone (its process died: its connections reset), which is how a peer on another
 * host that dies while nothing is in flight to it gets noticed. 0, or the failed PING's
 * status.
 */
static int ping(const struct xchan_cfg *c, uint32_t dir, struct xw_ctl *out, struct xnet_op *op,
		int64_t *since)
{
	const int64_t dead =
		(int64_t)(c->ping_dead_ms ? c->ping_dead_ms : XCHAN_PING_DEAD_MS) * 1000000;
	if (xop_busy(op)) /* the transport could not hand it to the peer's host for this long */
		return now_ns() - *since > dead ? -ETIMEDOUT : 0;
	if (xop_done(op)) {
		if (op->status)
			return op->status;
		atomic_store_explicit(&op->state, XOP_IDLE, memory_order_relaxed);
		*since = 0; /* handed over: the next PING starts its own clock */
	}
	int64_t t = now_ns();
	if (!*since) /* the first try of this PING: refusals (-EAGAIN) count as not handed over */
		*since = t;
	*out = (struct xw_ctl){.magic = XW_MAGIC, .code = XCTL_PING};
	int rc = post_send(c, xchan_tag(XCHAN_CTL, c->conn, dir), out, sizeof(*out), NULL, 0, op);
	if (rc == -EAGAIN)
		return t - *since > dead ? -ETIMEDOUT : 0;
	return rc;
}

/* Control messages travel on two tags: 1 from tx to rx, 2 from rx to tx. */
#define XDIR_TO_RX 1
#define XDIR_TO_TX 2

int xchan_tx_new(const struct xchan_cfg *cfg, struct xchan_tx **out)
{
	if (!out || cfg_check(cfg))
		return -EINVAL;
	struct xchan_tx *tx = calloc(1, sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	tx->c = *cfg;
	tx->cut_at = UINT64_MAX;
	int rc = 0;
	for (int i = 0; i < XT_CTS_RING && !rc; i++)
		rc = tx_post_cts_recv(tx, i);
	for (int i = 0; i < XT_ACK_RING && !rc; i++)
		rc = tx_post_ack_recv(tx, i);
	if (!rc)
		rc = ctl_recv(&tx->c, XDIR_TO_TX, &tx->ctl_in, &tx->ctl_in_op);
	if (rc) {
		tx->closing = 1;
		xchan_tx_free(tx);
		return rc == -EAGAIN ? -ENOMEM : rc;
	}
	*out = tx;
	return 0;
}

/* Hand the queued sends to the transport, in order. */
static int tx_push(struct xchan_tx *tx, struct chan_err *err)
{
	while (tx->queued_from < tx->next_msg) {
		struct xtx_send *s = &tx->sends[tx->queued_from % CHAN_MAX_SENDS];
		uint32_t low = (uint32_t)(s->hdr.recv << 3 | s->hdr.buf);
		uint64_t len = s->doomed ? 0 : s->size; /* a failed message carries no payload */
		if (s->write && !s->written) { /* the payload first: the header is ordered after */
			int rc = post_write(&tx->c, s->data, s->size, s->waddr, s->wkey, &s->wop);
			if (rc == -EAGAIN)
				return 0;
			if (rc)
				return stick(&tx->failed, err, rc, "the transport refused a write",
					     s->msg, s->size);
			s->written = 1;
			tx->nwritten++;
		}
		if (s->write)
			len = 0;
		int rc = post_send(&tx->c, xchan_tag(XCHAN_DATA, tx->c.conn, low), &s->hdr,
				   sizeof(s->hdr), len ? s->data : NULL, len, &s->op);
		if (rc == -EAGAIN)
			return 0;
		if (rc)
			return stick(&tx->failed, err, rc, "the transport refused a send", s->msg,
				     0);
		s->queued = 0;
		tx->queued_from++;
	}
	return 0;
}

static int tx_take_cts(struct xchan_tx *tx, int i, struct chan_err *err)
{
	struct xnet_op *op = &tx->cts_op[i];
	struct xw_cts c = tx->cts_in[i];
	if (op->status)
		return tx->closing ? 0
				   : stick(&tx->failed, err, -ECONNRESET,
					   "the receiver's host is gone (clear-to-send)",
					   (uint64_t)-op->status, 0);
	if (op->len != sizeof(c) || c.magic != XW_MAGIC || c.n < 1 || c.n > CHAN_MAX_RECVS ||
	    (c.writable >> c.n) || c.seq < tx->cur_recv || c.seq >= tx->cur_recv + CHAN_MAX_REQS)
		return stick(&tx->failed, err, -EPROTO, "corrupt receive post", c.seq, c.n);
	tx->cts[c.seq % CHAN_MAX_REQS] = c;
	tx->cts_have[c.seq % CHAN_MAX_REQS] = 1;
	int rc = tx_post_cts_recv(tx, i);
	return rc ? stick(&tx->failed, err, rc, "could not post a receive for clear-to-send", 0, 0)
		  : 0;
}

static int tx_take_ack(struct xchan_tx *tx, int i, struct chan_err *err)
{
	struct xnet_op *op = &tx->ack_op[i];
	struct xw_ack a = tx->ack_in[i];
	if (op->status)
		return tx->closing
			? 0
			: stick(&tx->failed, err, -ECONNRESET, "the receiver's host is gone (ACK)",
				(uint64_t)-op->status, 0);
	struct xtx_send *s = &tx->sends[a.msg % CHAN_MAX_SENDS];
	if (op->len != sizeof(a) || a.magic != XW_MAGIC || !s->in_use || s->msg != a.msg ||
	    s->acked)
		return stick(&tx->failed, err, -EPROTO, "ACK for no message in flight", a.msg, 0);
	s->acked = 1;
	tx->acks_in++;
	if (tx->c.model) {
		int rc = tx->c.model->acked(tx->c.model_ctx, &a.st, &s->done_ns);
		if (rc)
			return stick(&tx->failed, err, rc, "the fabric model refused an ACK", a.msg,
				     0);
	}
	if (a.st.flags & XCHAN_S_FAIL) {
		s->doomed = 1;
		s->fault = a.st.fault;
		s->link = a.st.link;
		s->timeouts = a.st.timeouts;
		s->delay_ns = a.st.delay_ns;
	}
	int rc = tx_post_ack_recv(tx, i);
	return rc ? stick(&tx->failed, err, rc, "could not post a receive for ACKs", 0, 0) : 0;
}

static int tx_take_ctl(struct xchan_tx *tx, struct chan_err *err)
{
	struct xnet_op *op = &tx->ctl_in_op;
	struct xw_ctl m = tx->ctl_in;
	if (op->status)
		return tx->closing ? 0
				   : stick(&tx->failed, err, -ECONNRESET,
					   "the receiver's host is gone", (uint64_t)-op->status, 0);
	if (op->len != sizeof(m) || m.magic != XW_MAGIC)
		return stick(&tx->failed, err, -EPROTO, "corrupt control message", m.code, 0);
	if (m.code == XCTL_EMSGSIZE)
		return stick(&tx->failed, err, -EMSGSIZE, "send larger than the posted receive",
			     m.v[0], m.v[1]);
	if (m.code == XCTL_PING) {
		int rc = ctl_recv(&tx->c, XDIR_TO_TX, &tx->ctl_in, &tx->ctl_in_op);
		return rc ? stick(&tx->failed, err, rc, "could not post a control receive", 0, 0)
			  : 0;
	}
	if (m.code != XCTL_CLOSE)
		return stick(&tx->failed, err, -EPROTO, "unknown control message", m.code, 0);
	tx->peer_closed = 1;
	tx->peer_acks = m.v[0];
	return 0; /* one CLOSE per connection: no receive for another */
}

static int tx_harvest(struct xchan_tx *tx, struct chan_err *err)
{
	int rc = tx->c.net->progress(tx->c.net->ctx);
	if (rc)
		return stick(&tx->failed, err, rc, "the transport failed", 0, 0);
	for (int i = 0; i < XT_CTS_RING; i++)
		if (xop_done(&tx->cts_op[i]) && (rc = tx_take_cts(tx, i, err)))
			return rc;
	for (int i = 0; i < XT_ACK_RING; i++)
		if (xop_done(&tx->ack_op[i]) && (rc = tx_take_ack(tx, i, err)))
			return rc;
	if (xop_done(&tx->ctl_in_op)) {
		atomic_store_explicit(&tx->ctl_in_op.state, XOP_IDLE, memory_order_relaxed);
		if ((rc = tx_take_ctl(tx, err)))
			return rc;
	}
	return tx_push(tx, err);
}

int xchan_tx_progress(struct xchan_tx *tx, struct chan_err *err)
{
	if (!tx)
		return fail(err, -EINVAL, "no endpoint", 0, 0);
	int rc = sticky_get(&tx->failed, err);
	return rc ? rc : tx_harvest(tx, err);
}

int xchan_tx_post(struct xchan_tx *tx, const void *data, uint64_t size, int32_t tag, chan_req *req,
		  struct chan_err *err)
{
	if (!tx || !req || (size && !data))
		return fail(err, -EINVAL, "send without a buffer", size, 0);
	int rc = sticky_get(&tx->failed, err);
	if (rc)
		return rc;
	struct xtx_send *s = &tx->sends[tx->next_msg % CHAN_MAX_SENDS];
	if (s->in_use || xop_busy(&s->op) || xop_busy(&s->wop))
		return fail(err, -EAGAIN, "too many sends in flight", CHAN_MAX_SENDS, 0);
	struct xw_cts *c = &tx->cts[tx->cur_recv % CHAN_MAX_REQS];
	if (!tx->cts_have[tx->cur_recv % CHAN_MAX_REQS] && (rc = tx_harvest(tx, err)))
		return rc;
	if (tx->peer_closed)
		return stick(&tx->failed, err, -ECONNRESET, "the receiver closed the connection",
			     tx->next_msg, 0);
	if (!tx->cts_have[tx->cur_recv % CHAN_MAX_REQS] || c->seq != tx->cur_recv)
		return fail(err, -EAGAIN, "no receive posted yet", 0, 0);
	uint32_t b;
	for (b = 0; b < c->n; b++)
		if (!tx->filled[b] && c->tags[b] == tag)
			break;
	if (b == c->n)
		return fail(err, -EAGAIN, "no buffer with this tag in the head receive",
			    (uint64_t)(uint32_t)tag, c->n);
	if (size > c->sizes[b]) {
		ctl_send(&tx->c, XDIR_TO_RX, &tx->ctl_out, &tx->ctl_out_op, XCTL_EMSGSIZE, size,
			 c->sizes[b]);
		return stick(&tx->failed, err, -EMSGSIZE, "send larger than the posted receive",
			     size, c->sizes[b]);
	}
	*s = (struct xtx_send){
		.data = data, .size = size, .msg = tx->next_msg, .in_use = 1, .queued = 1};
	s->hdr = (struct xw_hdr){.magic = XW_MAGIC,
				 .buf = (uint16_t)b,
				 .msg = s->msg,
				 .recv = c->seq,
				 .total = size};
	if (tx->c.model) {
		rc = tx->c.model->post(tx->c.model_ctx, now_ns(), size, &s->hdr.st);
		if (rc) {
			s->in_use = 0;
			return stick(&tx->failed, err, rc,
				     "the fabric model could not reserve the route", (uint64_t)-rc,
				     0);
		}
		s->doomed = (s->hdr.st.flags & XCHAN_S_FAIL) != 0;
	}
	if (!s->doomed && size && tx->c.write_min && size >= tx->c.write_min && tx->c.net->write &&
	    (c->writable >> b & 1)) {
		s->write = 1;
		s->wkey = c->wkey[b];
		s->waddr = c->waddr[b];
		s->hdr.flags = XW_H_WRITTEN;
	}
	tx->filled[b] = 1;
	if (++tx->nfilled == c->n) {
		tx->cts_have[tx->cur_recv % CHAN_MAX_REQS] = 0;
		tx->cur_recv++;
		tx->nfilled = 0;
		memset(tx->filled, 0, sizeof(tx->filled));
	}
	*req = (chan_req)(tx->next_msg % CHAN_MAX_SENDS);
	tx->next_msg++;
	tx->inflight++;
	return tx_push(tx, err);
}

static void tx_recycle(struct xchan_tx *tx, struct xtx_send *s)
{
	s->in_use = 0;
	tx->inflight--;
}

int xchan_tx_test(struct xchan_tx *tx, chan_req req, int *done, uint64_t *size,
		  struct chan_err *err)
{
	if (!tx || !done || req < 0 || req >= CHAN_MAX_SENDS || !tx->sends[req].in_use)
		return fail(err, -EINVAL, "unknown send request", (uint64_t)req, 0);
	struct xtx_send *s = &tx->sends[req];
	*done = 0;
	int rc = sticky_get(&tx->failed, err);
	if (!rc)
		rc = tx_harvest(tx, err);
	if (rc) {
		tx_recycle(tx, s);
		return rc;
	}
	if (s->write && xop_done(&s->wop) && s->wop.status) {
		tx_recycle(tx, s);
		/* -EIO whatever the transport said: the CLOSE at free then tells the receiver,
		 * whose receive the refused write left waiting (xnet.h: nothing after it came) */
		if (s->msg < tx->cut_at)
			tx->cut_at = s->msg;
		return stick(&tx->failed, err, -EIO, "the write into the receiver's buffer failed",
			     (uint64_t)-s->wop.status, s->msg);
	}
	if (s->acked && xop_done(&s->op) && (!s->write || xop_done(&s->wop))) {
		if (s->op.status) {
			tx_recycle(tx, s);
			return stick(&tx->failed, err, -ECONNRESET, "the receiver's host is gone",
				     (uint64_t)-s->op.status, s->msg);
		}
		if (s->done_ns && now_ns() < s->done_ns)
			return 0;
		tx_recycle(tx, s);
		if (s->doomed) {
			fail(err, -ETIMEDOUT, failed_why(s->fault), s->link, s->timeouts);
			if (err) {
				err->msg = s->msg;
				err->fault = s->fault;
				err->delay_ns = s->delay_ns;
			}
			return -ETIMEDOUT;
		}
		*done = 1;
		if (size)
			*size = s->size;
		return 0;
	}
	if (xop_done(&s->op) && s->op.status) {
		tx_recycle(tx, s);
		return stick(&tx->failed, err, -ECONNRESET, "the receiver's host is gone",
			     (uint64_t)-s->op.status, s->msg);
	}
	if (tx->peer_closed && tx->acks_in >= tx->peer_acks) {
		tx_recycle(tx, s);
		return stick(&tx->failed, err, -ECONNRESET, "the receiver closed the connection",
			     s->msg, 0);
	}
	return 0;
}

int xchan_tx_ping(struct xchan_tx *tx, struct chan_err *err)
{
	if (!tx)
		return fail(err, -EINVAL, "no endpoint", 0, 0);
	int rc = sticky_get(&tx->failed, err);
	if (!rc && (rc = ping(&tx->c, XDIR_TO_RX, &tx->ping, &tx->ping_op, &tx->ping_ns)))
		rc = stick(&tx->failed, err, -ECONNRESET,
			   "the receiver's process is gone (its host takes no message for it)",
			   (uint64_t)-rc, 0);
	return rc;
}

void xchan_tx_peer_gone(struct xchan_tx *tx)
{
	if (tx)
		stick(&tx->failed, NULL, -ECONNRESET, "the receiver's process is gone", 0, 0);
}

int xchan_tx_inflight(const struct xchan_tx *tx)
{
	return tx ? tx->inflight : 0;
}

uint64_t xchan_tx_sent(const struct xchan_tx *tx)
{
	return tx ? tx->next_msg : 0;
}

uint64_t xchan_tx_written(const struct xchan_tx *tx)
{
	return tx ? tx->nwritten : 0;
}

void xchan_tx_free(struct xchan_tx *tx)
{
	if (!tx)
		return;
	tx->closing = 1;
	tx->c.net->progress(tx->c.net->ctx);
	/* The peer knows of a reset (it is gone) and of an EMSGSIZE (it was told); any other
	 * failure of this end alone (the transport or the model refused, a corrupt message)
	 * it learns only from the CLOSE, else its receives wait for ever. */
	if (tx->failed.code != -ECONNRESET && tx->failed.code != -EMSGSIZE)
		ctl_send(&tx->c, XDIR_TO_RX, &tx->ctl_out, &tx->ctl_out_op, XCTL_CLOSE,
			 tx->queued_from < tx->cut_at ? tx->queued_from : tx->cut_at, 0);
	struct xnet_op *ops[XT_CTS_RING + XT_ACK_RING + 3 + 2 * CHAN_MAX_SENDS];
	size_t n = 0;
	for (int i = 0; i < XT_CTS_RING; i++)
		ops[n++] = &tx->cts_op[i];
	for (int i = 0; i < XT_ACK_RING; i++)
		ops[n++] = &tx->ack_op[i];
	ops[n++] = &tx->ctl_in_op;
	ops[n++] = &tx->ctl_out_op;
	ops[n++] = &tx->ping_op;
	for (int i = 0; i < CHAN_MAX_SENDS; i++) {
		ops[n++] = &tx->sends[i].op;
		ops[n++] = &tx->sends[i].wop;
	}
	for (size_t i = 0; i < XT_CTS_RING + XT_ACK_RING + 1; i++)
		cancel_op(&tx->c, ops[i]);
	if (drain_close(&tx->c, ops, n, tx->failed.code == -ECONNRESET))
		free(tx);
}

/* ---- receiver ------------------------------------------------------------------------------ */

struct xrx_buf {
	void *data; /* where the transport puts the payload */
	void *user; /* CHAN_RX_AT_DELIVERY: the caller's buffer, filled at delivery */
	uint64_t cap, got;
	int32_t tag;
	uint8_t in;	  /* its message is here */
	uint8_t writable; /* offered to writes in the CTS */
	struct xw_hdr hdr;
	struct xnet_op op;
};

struct xrx_recv {
	uint64_t seq;
	uint16_t n;
	uint8_t in_use;
	uint8_t doomed;
	int nin;
	int64_t ready_ns;
	uint32_t fault, link, timeouts;
	int64_t delay_ns;
	struct xrx_buf b[CHAN_MAX_RECVS];
	struct xw_cts cts;
	struct xnet_op cts_op;
};

struct xchan_rx {
	struct xchan_cfg c;
	struct sticky failed;
	uint64_t next_seq; /* receives posted */
	uint64_t cts_from; /* the first whose CTS the transport has not taken yet */
	uint64_t msgs_in;  /* messages arrived */
	uint64_t acks_out; /* ACKs handed to the transport */
	int inflight;
	int peer_closed; /* the sender closed after sending peer_msgs messages */
	uint64_t peer_msgs;
	int closing;
	struct xrx_recv recvs[CHAN_MAX_REQS];
	/* CHAN_RX_AT_DELIVERY receives' landing buffers, per receive slot and buffer, grown as
	 * needed and kept for the next receive of the slot */
	void *land[CHAN_MAX_REQS][CHAN_MAX_RECVS];
	uint64_t land_cap[CHAN_MAX_REQS][CHAN_MAX_RECVS];
	/* ACKs in arrival order: [ack_head, ack_tail) wait for the transport; a slot is free
	 * again once the transport has sent it (twice the sends in flight: never short) */
	uint64_t ack_head, ack_tail;
	struct xw_ack ack_out[XR_ACK_RING];
	struct xnet_op ack_op[XR_ACK_RING];
	struct xw_ctl ctl_in, ctl_out, ping;
	struct xnet_op ctl_in_op, ctl_out_op, ping_op;
	int64_t ping_ns;
};

int xchan_rx_new(const struct xchan_cfg *cfg, struct xchan_rx **out)
{
	if (!out || cfg_check(cfg))
		return -EINVAL;
	struct xchan_rx *rx = calloc(1, sizeof(*rx));
	if (!rx)
		return -ENOMEM;
	rx->c = *cfg;
	int rc = ctl_recv(&rx->c, XDIR_TO_RX, &rx->ctl_in, &rx->ctl_in_op);
	if (rc) {
		free(rx);
		return rc == -EAGAIN ? -ENOMEM : rc;
	}
	*out = rx;
	return 0;
}

static int rx_push(struct xchan_rx *rx, struct chan_err *err)
{
	while (rx->cts_from < rx->next_seq) {
		struct xrx_recv *r = &rx->recvs[rx->cts_from % CHAN_MAX_REQS];
		int rc = post_send(&rx->c, xchan_tag(XCHAN_CTS, rx->c.conn, 0), &r->cts,
				   sizeof(r->cts), NULL, 0, &r->cts_op);
		if (rc == -EAGAIN)
			break;
		if (rc)
			return stick(&rx->failed, err, rc, "the transport refused a clear-to-send",
				     r->seq, 0);
		rx->cts_from++;
	}
	while (rx->ack_head < rx->ack_tail) {
		int i = (int)(rx->ack_head % XR_ACK_RING);
		int rc = post_send(&rx->c, xchan_tag(XCHAN_ACK, rx->c.conn, 0), &rx->ack_out[i],
				   sizeof(rx->ack_out[i]), NULL, 0, &rx->ack_op[i]);
		if (rc == -EAGAIN)
			break;
		if (rc)
			return stick(&rx->failed, err, rc, "the transport refused an ACK",
				     rx->ack_out[i].msg, 0);
		rx->ack_head++;
		rx->acks_out++;
	}
	return 0;
}

static int rx_take_data(struct xchan_rx *rx, struct xrx_recv *r, int b, struct chan_err *err)
{
	struct xrx_buf *x = &r->b[b];
	struct xw_hdr h = x->hdr;
	if (x->op.status == -EMSGSIZE) { /* the transport's length counts the header */
		uint64_t sent = x->op.len > sizeof(h) ? x->op.len - sizeof(h) : 0;
		ctl_send(&rx->c, XDIR_TO_TX, &rx->ctl_out, &rx->ctl_out_op, XCTL_EMSGSIZE, sent,
			 x->cap);
		return stick(&rx->failed, err, -EMSGSIZE, "send larger than the posted receive",
			     sent, x->cap);
	}
	if (x->op.status)
		return rx->closing
			? 0
			: stick(&rx->failed, err, -ECONNRESET, "the sender's host is gone",
				(uint64_t)-x->op.status, r->seq);
	if (x->op.len < sizeof(h) || h.magic != XW_MAGIC || h.recv != r->seq || h.buf != b ||
	    (h.flags & ~XW_H_WRITTEN))
		return stick(&rx->failed, err, -EPROTO, "message does not match a posted receive",
			     h.recv, r->seq);
	int doomed = (h.st.flags & XCHAN_S_FAIL) != 0;
	x->got = x->op.len - sizeof(h);
	if (h.flags & XW_H_WRITTEN) { /* the payload is in already (xnet.h: the order) */
		if (!x->writable || x->got || doomed)
			return stick(&rx->failed, err, -EPROTO,
				     "a write into a buffer not offered to writes", h.msg, h.total);
		x->got = h.total;
	}
	if ((!doomed && x->got != h.total) || h.total > x->cap)
		return stick(&rx->failed, err, -EPROTO, "message size differs from its header",
			     x->got, h.total);
	int i = (int)(rx->ack_tail % XR_ACK_RING);
	if (xop_busy(&rx->ack_op[i]) || rx->ack_tail - rx->ack_head >= XR_ACK_RING)
		return stick(&rx->failed, err, -EPROTO, "more messages in flight than sends", h.msg,
			     0);
	rx->ack_out[i] = (struct xw_ack){.magic = XW_MAGIC, .msg = h.msg, .st = h.st};
	if (rx->c.model) {
		int64_t ready = 0;
		int rc = rx->c.model->arrive(rx->c.model_ctx, now_ns(), h.msg, h.total, &h.st,
					     &ready, &rx->ack_out[i].st);
		if (rc)
			return stick(&rx->failed, err, rc, "the fabric model refused a message",
				     h.msg, 0);
		if (ready > r->ready_ns)
			r->ready_ns = ready;
	}
	/* the sender's hops, or this host's (arrive's word, carried back in the ACK) */
	const struct xchan_stamp *fs = doomed		   ? &h.st
		: (rx->ack_out[i].st.flags & XCHAN_S_FAIL) ? &rx->ack_out[i].st
							   : NULL;
	if (!fs && rx->c.model && rx->c.model->deliver && x->got)
		rx->c.model->deliver(rx->c.model_ctx, h.msg, x->data, x->got);
	if (fs && !r->doomed) {
		r->doomed = 1;
		r->fault = fs->fault;
		r->link = fs->link;
		r->timeouts = fs->timeouts;
		r->delay_ns = fs->delay_ns;
	}
	x->in = 1;
	r->nin++;
	rx->msgs_in++;
	rx->ack_tail++;
	return 0;
}

static int rx_take_ctl(struct xchan_rx *rx, struct chan_err *err)
{
	struct xnet_op *op = &rx->ctl_in_op;
	struct xw_ctl m = rx->ctl_in;
	if (op->status)
		return rx->closing ? 0
				   : stick(&rx->failed, err, -ECONNRESET,
					   "the sender's host is gone", (uint64_t)-op->status, 0);
	if (op->len != sizeof(m) || m.magic != XW_MAGIC)
		return stick(&rx->failed, err, -EPROTO, "corrupt control message", m.code, 0);
	if (m.code == XCTL_EMSGSIZE)
		return stick(&rx->failed, err, -EMSGSIZE, "send larger than the posted receive",
			     m.v[0], m.v[1]);
	if (m.code == XCTL_PING) {
		int rc = ctl_recv(&rx->c, XDIR_TO_RX, &rx->ctl_in, &rx->ctl_in_op);
		return rc ? stick(&rx->failed, err, rc, "could not post a control receive", 0, 0)
			  : 0;
	}
	if (m.code != XCTL_CLOSE)
		return stick(&rx->failed, err, -EPROTO, "unknown control message", m.code, 0);
	rx->peer_closed = 1;
	rx->peer_msgs = m.v[0];
	return 0;
}

static int rx_harvest(struct xchan_rx *rx, struct chan_err *err)
{
	int rc = rx->c.net->progress(rx->c.net->ctx);
	if (rc)
		return stick(&rx->failed, err, rc, "the transport failed", 0, 0);
	for (int q = 0; q < CHAN_MAX_REQS; q++) { /* receives complete in any order */
		struct xrx_recv *r = &rx->recvs[q];
		for (int b = 0; r->in_use && b < r->n; b++)
			if (!r->b[b].in && xop_done(&r->b[b].op) &&
			    (rc = rx_take_data(rx, r, b, err)))
				return rc;
	}
	if (xop_done(&rx->ctl_in_op)) {
		atomic_store_explicit(&rx->ctl_in_op.state, XOP_IDLE, memory_order_relaxed);
		if ((rc = rx_take_ctl(rx, err)))
			return rc;
	}
	return rx_push(rx, err);
}

int xchan_rx_progress(struct xchan_rx *rx, struct chan_err *err)
{
	if (!rx)
		return fail(err, -EINVAL, "no endpoint", 0, 0);
	int rc = sticky_get(&rx->failed, err);
	return rc ? rc : rx_harvest(rx, err);
}

static int recv_busy(const struct xrx_recv *r)
{
	if (r->in_use || xop_busy(&r->cts_op))
		return 1;
	for (int b = 0; b < CHAN_MAX_RECVS; b++)
		if (xop_busy(&r->b[b].op))
			return 1;
	return 0;
}

int xchan_rx_post(struct xchan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		  const int32_t *tags, chan_req *req, struct chan_err *err)
{
	return xchan_rx_post_w(rx, n, data, sizes, tags, NULL, 0, req, err);
}

/* The landing buffer of slot q's buffer b, at least cap bytes; NULL if it cannot grow. */
static void *rx_land(struct xchan_rx *rx, uint64_t q, int b, uint64_t cap)
{
	if (rx->land_cap[q][b] < cap) {
		void *p = realloc(rx->land[q][b], cap);
		if (!p)
			return NULL;
		rx->land[q][b] = p;
		rx->land_cap[q][b] = cap;
	}
	return rx->land[q][b];
}

int xchan_rx_post_w(struct xchan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		    const int32_t *tags, const struct xchan_wkey *wkeys, uint32_t flags,
		    chan_req *req, struct chan_err *err)
{
	if (!rx || !req || n < 1 || n > CHAN_MAX_RECVS || !data || !sizes || !tags)
		return fail(err, -EINVAL, "bad receive", (uint64_t)n, 0);
	if (flags & ~(uint32_t)CHAN_RX_AT_DELIVERY)
		return fail(err, -EINVAL, "unknown receive flags", flags, CHAN_RX_AT_DELIVERY);
	for (int b = 0; b < n; b++)
		if (sizes[b] && !data[b])
			return fail(err, -EINVAL, "receive without a buffer", (uint64_t)b,
				    sizes[b]);
	int rc = sticky_get(&rx->failed, err);
	if (rc)
		return rc;
	if (rx->peer_closed)
		return stick(&rx->failed, err, -ECONNRESET, "the sender closed the connection",
			     rx->next_seq, 0);
	uint64_t q = rx->next_seq % CHAN_MAX_REQS;
	struct xrx_recv *r = &rx->recvs[q];
	if (recv_busy(r))
		return fail(err, -EAGAIN, "too many receives in flight", CHAN_MAX_REQS, 0);
	/* read as it fills (and only modelled fabrics have a delivery time): land elsewhere */
	int land = (flags & CHAN_RX_AT_DELIVERY) && rx->c.model;
	for (int b = 0; land && b < n; b++)
		if (data[b] && sizes[b] && !rx_land(rx, q, b, sizes[b]))
			return fail(err, -ENOMEM, "no memory to land a receive read as it fills",
				    (uint64_t)b, sizes[b]);
	*r = (struct xrx_recv){.seq = rx->next_seq, .n = (uint16_t)n};
	r->cts = (struct xw_cts){.magic = XW_MAGIC, .n = (uint32_t)n, .seq = r->seq};
	for (int b = 0; b < n; b++) {
		r->b[b] = (struct xrx_buf){.data = data[b], .cap = sizes[b], .tag = tags[b]};
		if (land && data[b] && sizes[b]) {
			r->b[b].user = data[b];
			r->b[b].data = rx->land[q][b];
		}
		r->cts.sizes[b] = sizes[b];
		r->cts.tags[b] = tags[b];
		if (wkeys && wkeys[b].ok && !r->b[b].user && data[b] && sizes[b] &&
		    rx->c.net->write) {
			r->b[b].writable = 1;
			r->cts.writable |= 1u << b;
			r->cts.wkey[b] = wkeys[b].key;
			r->cts.waddr[b] = wkeys[b].addr;
		}
		uint32_t low = (uint32_t)(r->seq << 3 | (uint64_t)b);
		rc = post_recv(&rx->c, xchan_tag(XCHAN_DATA, rx->c.conn, low), &r->b[b].hdr,
			       sizeof(r->b[b].hdr), data[b] ? r->b[b].data : NULL,
			       data[b] ? sizes[b] : 0, &r->b[b].op);
		if (rc) { /* withdraw what is posted; the slot stays busy until they are back */
			for (int k = 0; k < b; k++)
				cancel_op(&rx->c, &r->b[k].op);
			if (rc == -EAGAIN)
				return fail(err, -EAGAIN, "the transport has no room for a receive",
					    0, 0);
			return stick(&rx->failed, err, rc, "the transport refused a receive",
				     r->seq, 0);
		}
	}
	r->in_use = 1;
	*req = (chan_req)(rx->next_seq % CHAN_MAX_REQS);
	rx->next_seq++;
	rx->inflight++;
	return rx_push(rx, err);
}

static void rx_recycle(struct xchan_rx *rx, struct xrx_recv *r)
{
	for (int b = 0; b < r->n; b++)
		if (!r->b[b].in)
			cancel_op(&rx->c, &r->b[b].op);
	r->in_use = 0;
	rx->inflight--;
}

int xchan_rx_test(struct xchan_rx *rx, chan_req req, int *done, uint64_t *sizes,
		  struct chan_err *err)
{
	if (!rx || !done || req < 0 || req >= CHAN_MAX_REQS || !rx->recvs[req].in_use)
		return fail(err, -EINVAL, "unknown receive request", (uint64_t)req, 0);
	struct xrx_recv *r = &rx->recvs[req];
	*done = 0;
	int rc = sticky_get(&rx->failed, err);
	if (!rc)
		rc = rx_harvest(rx, err);
	if (rc) {
		rx_recycle(rx, r);
		return rc;
	}
	if (r->nin == r->n) {
		if (r->ready_ns && now_ns() < r->ready_ns)
			return 0;
		rx_recycle(rx, r);
		if (r->doomed) {
			fail(err, -ETIMEDOUT, failed_why(r->fault), r->link, r->timeouts);
			if (err) {
				err->msg = r->seq;
				err->fault = r->fault;
				err->delay_ns = r->delay_ns;
			}
			return -ETIMEDOUT;
		}
		*done = 1;
		for (int b = 0; b < r->n; b++) {
			if (r->b[b].user && r->b[b].got) /* its delivery time: the bytes land */
				memcpy(r->b[b].user, r->b[b].data, r->b[b].got);
			if (sizes)
				sizes[b] = r->b[b].got;
		}
		return 0;
	}
	if (rx->peer_closed && rx->msgs_in >= rx->peer_msgs) {
		rx_recycle(rx, r);
		return stick(&rx->failed, err, -ECONNRESET, "the sender closed the connection",
			     r->seq, 0);
	}
	return 0;
}

int xchan_rx_ping(struct xchan_rx *rx, struct chan_err *err)
{
	if (!rx)
		return fail(err, -EINVAL, "no endpoint", 0, 0);
	int rc = sticky_get(&rx->failed, err);
	if (!rc && (rc = ping(&rx->c, XDIR_TO_TX, &rx->ping, &rx->ping_op, &rx->ping_ns)))
		rc = stick(&rx->failed, err, -ECONNRESET,
			   "the sender's process is gone (its host takes no message for it)",
			   (uint64_t)-rc, 0);
	return rc;
}

void xchan_rx_peer_gone(struct xchan_rx *rx)
{
	if (rx)
		stick(&rx->failed, NULL, -ECONNRESET, "the sender's process is gone", 0, 0);
}

int xchan_rx_inflight(const struct xchan_rx *rx)
{
	return rx ? rx->inflight : 0;
}

void xchan_rx_free(struct xchan_rx *rx)
{
	if (!rx)
		return;
	rx->closing = 1;
	rx->c.net->progress(rx->c.net->ctx);
	rx_push(rx, NULL); /* ACKs still owed go out before the CLOSE that counts them */
	if (rx->failed.code != -ECONNRESET && rx->failed.code != -EMSGSIZE) /* as tx_free */
		ctl_send(&rx->c, XDIR_TO_TX, &rx->ctl_out, &rx->ctl_out_op, XCTL_CLOSE,
			 rx->acks_out, 0);
	struct xnet_op *ops[CHAN_MAX_REQS * (CHAN_MAX_RECVS + 1) + XR_ACK_RING + 3];
	size_t n = 0;
	ops[n++] = &rx->ctl_in_op;
	for (int q = 0; q < CHAN_MAX_REQS; q++)
		for (int b = 0; b < CHAN_MAX_RECVS; b++)
			ops[n++] = &rx->recvs[q].b[b].op;
	for (size_t i = 0; i < n; i++)
		cancel_op(&rx->c, ops[i]);
	for (int q = 0; q < CHAN_MAX_REQS; q++)
		ops[n++] = &rx->recvs[q].cts_op;
	for (int i = 0; i < XR_ACK_RING; i++)
		ops[n++] = &rx->ack_op[i];
	ops[n++] = &rx->ctl_out_op;
	ops[n++] = &rx->ping_op;
	if (drain_close(&rx->c, ops, n, rx->failed.code == -ECONNRESET)) {
		for (int q = 0; q < CHAN_MAX_REQS; q++)
			for (int b = 0; b < CHAN_MAX_RECVS; b++)
				free(rx->land[q][b]);
		free(rx);
	}
}
