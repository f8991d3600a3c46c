/* SPDX-License-Identifier: MIT */
/*
 * xnet.h - the message transport a cross-host channel (sim/core/xchan.h) runs over: reliable
 * tagged messages between the endpoints of two processes, as libfabric's RDM endpoints give
 * them (plugin/ofi.c: tcp;ofi_rxm, verbs;ofi_rxm, efa). The unit tests put an in-memory
 * stand-in behind the same table (sim/test/xnet_fake.h), so the protocol is tested without a
 * network.
 *
 * The contract every transport keeps:
 *   - A message sent with tag T to a peer lands in a receive that peer posted for exactly T
 *     (no wildcard bits); receives with one tag are filled in the order they were posted, and
 *     messages with one tag arrive in the order they were sent. Nothing else is ordered:
 *     messages with different tags may complete in any order, so xchan never relies on it.
 *   - A message that arrives before its receive is posted waits for it (libfabric's
 *     unexpected-message queue).
 *   - A message longer than the receive's buffers fails that receive with -EMSGSIZE.
 *   - Every op a call accepted (return 0) completes exactly once: the transport sets its
 *     status and len and then stores XOP_DONE with release semantics, from whichever thread
 *     drives progress; the op's owner reads state with acquire and only then the rest. Until
 *     then the op and its buffers belong to the transport. Nothing else is called back, so a
 *     completion for one channel found while progressing another touches no channel state.
 *   - A peer that is gone fails the ops that involve it with -ECONNRESET (or -EHOSTUNREACH).
 *   - Writes (optional: mr_open, mr_close and write all set, or none): a write's bytes are
 *     placed in the peer's memory before any message this endpoint sends to that peer after
 *     the write is delivered, so a header sent after its payload's write tells the receiver
 *     the payload is in place: one trip, as an RDMA write with a send behind it on an RC
 *     queue pair. That is data placement, more than libfabric's FI_ORDER_SAW promises (the
 *     order of transport headers): plugin/ofi.c offers writes only on providers that carry a
 *     connection's operations in one in-order stream. A write op completes when its buffer
 *     may be reused. A write the target refuses (outside an open registration) fails the
 *     op and the connection: nothing this endpoint sent that peer after it is delivered.
 *
 * Threads: every function may be called from any thread (the transport locks what it shares).
 * Errors are negative errno values.
 */
#ifndef SF_XNET_H
#define SF_XNET_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#define XNET_MAX_IOV 2
#define XNET_ANY_PEER UINT64_MAX /* a receive's peer: from anyone (a listener's handshake) */

enum xop_state { XOP_IDLE = 0, XOP_POSTED = 1, XOP_DONE = 2 };

/* One send or receive in flight. Owned by the caller; lent to the transport while POSTED. */
struct xnet_op {
	_Atomic int state; /* enum xop_state */
	int status;	   /* when DONE: 0, or a negative errno */
	uint64_t len;	   /* when DONE: bytes received (receives), bytes sent (sends) */
};

struct xnet {
	void *ctx;
	/*
	 * Send the niov (1..XNET_MAX_IOV) buffers as one message with tag to peer (an address
	 * from the transport's own peer table). The buffers stay untouched by the caller until
	 * op is DONE. 0 (op is POSTED), -EAGAIN (nothing sent: try again after progress) or a
	 * negative errno.
	 */
	int (*send)(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		    struct xnet_op *op);
	/* Post a receive for the message with exactly this tag from peer (XNET_ANY_PEER: from
	 * any peer), into the buffers. */
	int (*recv)(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		    struct xnet_op *op);
	/* Withdraw a posted receive: it completes (soon, through progress) with -ECANCELED, or
	 * with its message if that won the race. 0 or a negative errno. */
	int (*cancel)(void *ctx, struct xnet_op *op);
	/* Drive the transport: completions found mark their ops DONE. 0 or a negative errno
	 * for the transport as a whole. */
	int (*progress)(void *ctx);
	/*
	 * Optional (NULL: the transport has no writes; xchan then sends every payload as a
	 * message). Open [base, base + len) to the peers' writes: a write to *raddr + k with *key
	 * lands at base + k; *mr is the registration, for mr_close. 0 or a negative errno.
	 */
	int (*mr_open)(void *ctx, void *base, uint64_t len, uint64_t *key, uint64_t *raddr,
		       void **mr);
	/* Close a registration (NULL-safe): later writes into it fail. */
	void (*mr_close)(void *ctx, void *mr);
	/* Write len (>= 1) bytes of buf into the peer's registration key at raddr (as mr_open
	 * named it). The buffer stays untouched by the caller until op is DONE. 0, -EAGAIN or a
	 * negative errno, as send. */
	int (*write)(void *ctx, uint64_t peer, const void *buf, uint64_t len, uint64_t raddr,
		     uint64_t key, struct xnet_op *op);
};

static inline int xop_done(const struct xnet_op *op)
{
	return atomic_load_explicit(&op->state, memory_order_acquire) == XOP_DONE;
}

static inline int xop_busy(const struct xnet_op *op)
{
	return atomic_load_explicit(&op->state, memory_order_acquire) == XOP_POSTED;
}

/* For transports: finish an op (status, then len, then the release store of DONE). */
static inline void xop_finish(struct xnet_op *op, int status, uint64_t len)
{
	op->status = status;
	op->len = len;
	atomic_store_explicit(&op->state, XOP_DONE, memory_order_release);
}

#endif /* SF_XNET_H */
