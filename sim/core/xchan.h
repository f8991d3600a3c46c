/* SPDX-License-Identifier: MIT */
/*
 * xchan.h - one direction of an emulated connection whose two ends are on different hosts:
 * the shared-memory channel's protocol (sim/core/chan.h), in messages over a transport
 * (sim/core/xnet.h: libfabric RDM endpoints, plugin/ofi.c). docs/scale-out.md §3 has the
 * design.
 *
 * Protocol. Each message below is one transport message whose tag names its kind, the
 * connection (28 bits, unique between the two processes) and, for data, the receive and the
 * buffer it fills:
 *   CTS   rx -> tx  one per posted receive: its number, n buffers, their capacities and tags,
 *                   and for each buffer the receiver opened to writes its key and address. The
 *                   receiver has already posted one transport receive per buffer, straight into
 *                   the application's buffer (no staging copy).
 *   DATA  tx -> rx  one per send: a 344-byte header (message and receive numbers, buffer, size,
 *                   the model's stamp) and the payload, as one message of two parts; or, for a
 *                   payload of at least write_min bytes into a buffer open to writes, the
 *                   payload as a transport write into it and the header alone behind it (the
 *                   transport delivers a message sent after a write only once the write's bytes
 *                   are in: xnet.h), flagged so. One trip, where a large message costs a
 *                   rendezvous (libfabric's rxm: three) and a small one a copy out of bounce
 *                   buffers.
 *   ACK   rx -> tx  one per message, sent when its data are in (an RC NIC's ACK: it does not
 *                   wait for the receiving application to test), with the model's stamp back.
 *   CTL   either    EMSGSIZE (both ends fail, as the shared-memory channel does) or CLOSE (with
 *                   the number of messages the closing end sent, so the peer fails only what
 *                   can no longer come, whatever order the transport completes things in).
 * The sender matches each send to the oldest posted receive (never one further down: NCCL's
 * rule) and, inside it, the buffer whose tag matches (n == 1 included), exactly as chan does.
 * Nothing relies on the transport ordering messages of different tags.
 *
 * The model. Without one (the ideal fabric) completions come as soon as the data are in (rx)
 * and the ACK is back (tx). With one, a send asks it at post for the hops the sender's host
 * owns and carries the stamp; the receiver asks it, on arrival, for the rest and the delivery
 * time, and never completes the receive before that time; the ACK carries the sender's
 * completion time back, and the send never completes before it. A message the model fails
 * (retries exhausted) fails both ends at the model's time with -ETIMEDOUT and the fault (value[0]
 * the link; without a fault, the model's own loss, value[1] its ACK timeouts).
 *
 * Errors: negative errno values, as chan's (chan.h has the list), with a struct chan_err:
 *   -EAGAIN (would block), -EMSGSIZE, -ECONNRESET (the peer closed, died or its host is gone),
 *   -ETIMEDOUT (the model failed a message), -EPROTO (the peer sent what this code does not
 *   write), -EINVAL (misuse), or the transport's own error.
 *
 * Threads: an endpoint is used by one thread at a time; endpoints are independent of each
 * other and share the transport, which locks what it shares.
 * Ownership: the transport and the model (struct xchan_cfg) are not owned and must outlive the
 * endpoint; send and receive buffers stay the caller's, untouched, until reported done.
 */
#ifndef SF_XCHAN_H
#define SF_XCHAN_H

#include <stdint.h>

#include "sim/core/chan.h"
#include "sim/core/xnet.h"

#define XCHAN_MAX_CONN ((1u << 28) - 1)
#define XCHAN_S_FAIL 0x1   /* stamp flag: the model fails the message */
#define XCHAN_S_REPLAY 0x2 /* stamp flag: x[] holds the model's replay words (xmodel.c) */
#define XCHAN_STAMP_X 32   /* the model's words beyond t[] */

/* The model's word about one message, carried from sender to receiver and back. */
struct xchan_stamp {
	int64_t t[3];	   /* the model's times so far (its own business: virtual ns; room for a
			     model_stamp's first, last and last_tx) */
	uint32_t hop;	   /* the next hop of the route to reserve */
	uint32_t flags;	   /* XCHAN_S_* */
	uint32_t fault;	   /* XCHAN_S_FAIL: the fault that failed it, id + 1 (0: the models') */
	uint32_t link;	   /* ... and the link */
	int64_t delay_ns;  /* ... and what it had cost the message before */
	uint32_t timeouts; /* XCHAN_S_FAIL by the model's own loss (fault 0): its ACK timeouts */
	uint32_t reserved;
	uint64_t x[XCHAN_STAMP_X]; /* the model's own business too (XCHAN_S_REPLAY) */
};

/*
 * The model's side (sim/core/fstate.c behind it in the plugin; a table in the tests). Times
 * are this process's CLOCK_MONOTONIC ns. Every hook returns 0 or a negative errno, which fails
 * the message's endpoint with that error.
 */
struct xchan_model {
	/* Sender, at post: reserve what this host owns of the route; fill *s. */
	int (*post)(void *ctx, int64_t now_ns, uint64_t bytes, struct xchan_stamp *s);
	/* Receiver, when the data are in: reserve the rest; say when the receive completes
	 * (*ready_ns) and fill *ack for the sender. msg: the message's number on the connection
	 * (0, 1, ... in send order; the peer's word, so only a key for the model's draws). */
	int (*arrive)(void *ctx, int64_t now_ns, uint64_t msg, uint64_t bytes,
		      const struct xchan_stamp *s, int64_t *ready_ns, struct xchan_stamp *ack);
	/* Sender, on the ACK: when the send completes (*done_ns). */
	int (*acked)(void *ctx, const struct xchan_stamp *ack, int64_t *done_ns);
	/* Receiver, optional (NULL: none), after arrive for a message the model did not fail: it
	 * may change the len bytes delivered into buf (silent corruption, on purpose). */
	void (*deliver)(void *ctx, uint64_t msg, void *buf, uint64_t len);
};

struct xchan_cfg {
	const struct xnet *net;
	uint64_t peer; /* the other end's address in the transport's peer table */
	uint32_t conn; /* 1..XCHAN_MAX_CONN, the same at both ends, unique between the two */
	const struct xchan_model *model; /* NULL: the ideal fabric */
	void *model_ctx;
	uint32_t ping_dead_ms; /* a PING not handed over this long fails the endpoint (0: the
				  default, XCHAN_PING_DEAD_MS) */
	uint64_t write_min;    /* sender: payloads of at least this many bytes go as writes into
			       buffers open to them (0: never; a transport without writes: never) */
};

/* Where a receive buffer takes writes (xnet.h): the registration's key and the address its
 * first byte has for writers (mr_open's raddr plus the buffer's offset in the registration). */
struct xchan_wkey {
	uint64_t key;
	uint64_t addr;
	int ok; /* 0: the buffer takes messages only */
};

struct xchan_tx;
struct xchan_rx;

/* New endpoints: posts the receives for CTS, ACK and CTL (tx) or CTL (rx). 0, -EINVAL, -ENOMEM
 * or the transport's error. */
int xchan_tx_new(const struct xchan_cfg *cfg, struct xchan_tx **out);
int xchan_rx_new(const struct xchan_cfg *cfg, struct xchan_rx **out);
/*
 * Close: tell the peer (CLOSE, unless the endpoint failed), withdraw what is posted, and wait
 * (at most XCHAN_DRAIN_MS; XCHAN_GONE_DRAIN_MS when the peer is known gone) for the transport
 * to give every op back. An endpoint whose ops the transport still holds after that is left
 * allocated rather than freed under it (a leak, never a use after free). NULL-safe.
 * Known limits (docs/scale-out.md): the wait runs under the plugin's setup lock, so a peer that
 * holds many sends unfinished slows closes by up to XCHAN_DRAIN_MS each; and the application's
 * buffers of requests still held by the transport when the wait gives up are not protected
 * (the transport may still read or write them after the close returns).
 */
#define XCHAN_DRAIN_MS 2000
#define XCHAN_GONE_DRAIN_MS 100
void xchan_tx_free(struct xchan_tx *tx);
void xchan_rx_free(struct xchan_rx *rx);

/* As chan_tx_post / chan_tx_test (host or registered memory: the transport reads it). */
int xchan_tx_post(struct xchan_tx *tx, const void *data, uint64_t size, int32_t tag, chan_req *req,
		  struct chan_err *err);
int xchan_tx_test(struct xchan_tx *tx, chan_req req, int *done, uint64_t *size,
		  struct chan_err *err);
/* As chan_rx_post / chan_rx_test. */
int xchan_rx_post(struct xchan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		  const int32_t *tags, chan_req *req, struct chan_err *err);
/* As xchan_rx_post, with the buffers' write keys (n of them; NULL: none) and flags (chan.h's
 * CHAN_RX_*). A buffer with a key must stay open to writes (its registration not closed) until
 * the receive is reported done; one whose receive failed may still be written by the sender
 * until its registration closes. A receive posted CHAN_RX_AT_DELIVERY takes no writes: its
 * messages land in a buffer of the endpoint's, copied into the caller's at the model's
 * delivery time by the test that reports it done. -ENOMEM if that buffer cannot grow. */
int xchan_rx_post_w(struct xchan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		    const int32_t *tags, const struct xchan_wkey *wkeys, uint32_t flags,
		    chan_req *req, struct chan_err *err);
int xchan_rx_test(struct xchan_rx *rx, chan_req req, int *done, uint64_t *sizes,
		  struct chan_err *err);
/* Drive the endpoint (and the transport) without testing a request: the receive agent's
 * call, so that ACKs go out while the application computes. */
int xchan_tx_progress(struct xchan_tx *tx, struct chan_err *err);
int xchan_rx_progress(struct xchan_rx *rx, struct chan_err *err);
/*
 * Liveness, at most every so often (the plugin's liveness period): a PING to the peer. When the
 * transport fails it (the peer's endpoint is gone: its process died and its connections reset)
 * or cannot hand it over for XCHAN_PING_DEAD_MS (no connection to the peer's host can be made),
 * the endpoint fails with -ECONNRESET: a peer on another host that dies with nothing in flight
 * to it is noticed so. A stopped process (node_freeze) is not dead: its host's kernel still
 * takes the PING, as a frozen host's NIC still acknowledges. 0 or the endpoint's error.
 */
#define XCHAN_PING_DEAD_MS 30000 /* long past a node_freeze's usual window (seconds) */
int xchan_tx_ping(struct xchan_tx *tx, struct chan_err *err);
int xchan_rx_ping(struct xchan_rx *rx, struct chan_err *err);
/* The peer's process is gone (the daemon says so: the transport may never notice a posted
 * receive's peer dying): everything in flight and every later call fails with -ECONNRESET. */
void xchan_tx_peer_gone(struct xchan_tx *tx);
void xchan_rx_peer_gone(struct xchan_rx *rx);
int xchan_tx_inflight(const struct xchan_tx *tx);
/* Messages posted so far, and how many of their payloads went as writes (0 for NULL). */
uint64_t xchan_tx_sent(const struct xchan_tx *tx);
uint64_t xchan_tx_written(const struct xchan_tx *tx);
int xchan_rx_inflight(const struct xchan_rx *rx);

/*
 * Wait, at most ms, for the transport to give every one of ops back (progressing it meanwhile):
 * 1 when none is busy any more, 0 when some still are (never wait on a NULL transport).
 */
int xnet_drain(const struct xnet *net, struct xnet_op *const *ops, size_t n, int ms);

/* The tag of a message (exposed for the tests and the transport's logs). */
enum xchan_kind {
	XCHAN_CTS = 1,
	XCHAN_DATA = 2,
	XCHAN_ACK = 3,
	XCHAN_CTL = 4,
	XCHAN_HELLO = 5,  /* the plugin's handshake (plugin/xhost.c): a connect to a listener */
	XCHAN_WELCOME = 6 /* ... and the listener's answer */
};
static inline uint64_t xchan_tag(enum xchan_kind k, uint32_t conn, uint32_t low)
{
	return (uint64_t)k << 60 | (uint64_t)(conn & XCHAN_MAX_CONN) << 32 | low;
}

#endif /* SF_XCHAN_H */
