/* SPDX-License-Identifier: MIT */
/*
 * fstate_int.h - what fstate.c and fstate_fault.c share: the faults a reservation meets,
 * over a run of its hops. Not a contract for anything outside sim/core/fstate*.c.
 */
#ifndef SIM_CORE_FSTATE_INT_H
#define SIM_CORE_FSTATE_INT_H

#include "sim/core/fstate.h"

/*
 * The hops a reservation covers: [lo, hi) of the connection's path. A whole reservation
 * (fst_reserve) covers them all; a piece (fst_reserve_hops) the run its host owns. What acts
 * on the connection as a whole (connection-scoped faults and triggers) belongs to the piece
 * that starts the path, the sender's.
 */
struct fst_hops {
	int lo, hi;
};

/* Is link on c's path? *hop: its index there. */
int fst_on_path(const struct fst_conn *c, uint32_t link, int *hop);

/* The degrades in force at t on the hops of r: their parameters on copies (tmp) that p then
 * points to; each counted once per message (hit->degrades), the first noted in hit. */
void fst_apply_degrades(struct fst_view *v, const struct fst_conn *c, struct fst_hops r, int64_t t,
			struct model_link *tmp, struct model_path *p, struct fst_hit *hit);

/* The degrades another host found in force on its hops r (a front's mask), applied again here
 * without counting them. 0, or -EPROTO for a bit that names no degrade fault. */
int fst_apply_degrade_mask(struct fst_view *v, const struct fst_conn *c, struct fst_hops r,
			   const uint64_t *mask, struct model_link *tmp, struct model_path *p,
			   struct fst_hit *hit);

/* Outages and resets the message meets on r between t_post and its arrival: out's times
 * delayed, or out failed (*fail_hop: the hop, -1 the connection); hit says which. own_ns: its
 * transit on an idle path. Under the fabric lock. */
void fst_apply_outages(struct fst_view *v, struct fst_conn *c, struct fst_hops r, int64_t t_post,
		       int64_t own_ns, struct model_msg *out, struct fst_hit *hit, int *fail_hop);

/* The triggers on r this message counts (after the faults were checked: the Nth message is not
 * hit itself); one that reaches its threshold takes t_post as its origin. */
void fst_count_triggers(struct fst_view *v, const struct fst_conn *c, struct fst_hops r,
			int64_t t_post, uint64_t bytes);

#endif
