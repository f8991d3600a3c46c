/* SPDX-License-Identifier: MIT */
/*
 * xmodel.h - the distributed fabric clock for one end of a cross-host connection: xchan's
 * model hooks (sim/core/xchan.h, struct xchan_model) over this host's fabric state
 * (sim/core/fstate.h). docs/scale-out.md section 4 has the design.
 *
 * A route is split where its owners change: hops [0, split) belong to the sending node's host,
 * [split, npath) to the receiving node's (the daemon refuses routes that a third host owns a
 * hop of, or whose owners alternate: it tells the plugin the split with the route). Then:
 *   post    the sender reserves its hops from the post (fst_reserve_front) and stamps
 *           the message with the time its first and last bits reach hop split;
 *   arrive  the receiver reserves the rest from that stamp, adds the whole route's jitter
 *           (each hop's draw keyed by the message's number and conn.id, each hop's AR(1)
 *           score kept here) and the per-connection FIFO clamp, as model_message does after
 *           its trains; the receive completes at that arrival plus o_recv, never earlier; the
 *           ACK carries back the sender's completion time (arrival + ack_proc + the route's
 *           latency + o_recv);
 *   acked   the send completes at that time, never earlier.
 * Loss recovery and reordering are the whole route's, so a route with either on a hop, or a
 * degrade of the plan that sets loss or corruption on one of its links (fst_route_replayed,
 * asked again when the fault table grows), is replayed: the stamp also carries the sender's
 * front (its hops as they stood at the post: fstate.h's struct fst_front), the receiver runs
 * model_message over the whole route from it (fst_reserve_rest) and the ACK carries the back
 * (what the retransmissions did to the sender's hops), which the sender commits
 * (fst_commit_back). The stamp's x[] words hold them (xmodel.c has the layout); every stamp
 * carries a front, so a receiver that finds the replay needed by itself (a live fault of its
 * own) can replay.
 * A fault that fails the message in either piece fails both ends at the piece's time with
 * the fault's id and link (xchan carries them). Stamps travel in virtual time (this host's
 * CLOCK_MONOTONIC less the fabric's epoch_ns), so hosts whose daemons agree on the epoch's
 * instant agree on every time.
 *
 * Approximate, as the design says: each host's links serve reservations in the order they
 * reach them; the receiver's piece sees the post time as the moment the message reached its
 * first hop (a degrade applies if in force then; a trigger's origin is that moment).
 *
 * Threads: an xmodel is used by its endpoint's thread only; the fabric state is shared and
 * locked by fstate. Ownership: the view is not owned and must outlive the xmodel.
 * Errors: negative errno values (-EINVAL a bad route or argument, -EPROTO a peer's stamp,
 * front or back that does not fit the route, fstate's -EOPNOTSUPP and -EDEADLK).
 */
#ifndef SF_XMODEL_H
#define SF_XMODEL_H

#include "sim/core/fstate.h"
#include "sim/core/xchan.h"

enum xmodel_side { XMODEL_TX, XMODEL_RX };

struct xmodel_route {
	struct fst_conn conn; /* the route as the daemon gave it (msgs and mc: zero) */
	int split;	      /* hops [0, split) are the sender's host's, 1 <= split <= npath */
	uint32_t from_host;   /* the sender's host (its rank in the run): late deliveries here
				 are counted by it (fst_record_xlateness) */
};

struct xmodel;

/* A new end on view v: 0, -EINVAL (a route that does not fit v, a split outside 1..npath),
 * -ENOMEM. */
int xmodel_new(struct fst_view *v, const struct xmodel_route *r, enum xmodel_side side,
	       struct xmodel **out);
void xmodel_free(struct xmodel *m); /* NULL-safe */

/* The hooks; their ctx is the xmodel (struct xchan_cfg's model and model_ctx). */
extern const struct xchan_model xmodel_hooks;

/*
 * comm_hang (a fault the daemon applies by holding its channels, which a connection between
 * hosts has none of): is this connection held at now_ns? 1 (the endpoint must neither progress
 * nor complete anything, and report no error), 0 otherwise. The first time a fault holds it,
 * the fault's hit counter counts this end. Cheap when no comm_hang is published.
 */
int xmodel_held(struct xmodel *m, int64_t now_ns);

/*
 * node_kill of this connection's other end (its node on another host, whose daemon kills the
 * processes; this host's daemon has no channel to mark dead): did one begin by now_ns less
 * XMODEL_KILL_SEEN_NS? 1 with *fid (the endpoint fails as a channel with a dead peer does:
 * -ECONNRESET), 0 otherwise. The delay: the victim's daemon kills when the window opens in its
 * own state, which a trigger counted by another host reaches up to one relay period (20 ms)
 * later; a peer that saw the kill first could end its job before the victim is dead. Cheap
 * when no node_kill is published.
 */
#define XMODEL_KILL_SEEN_NS (200LL * 1000000)
int xmodel_peer_killed(struct xmodel *m, int64_t now_ns, uint32_t *fid);

#endif /* SF_XMODEL_H */
