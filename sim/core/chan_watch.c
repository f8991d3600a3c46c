/* SPDX-License-Identifier: MIT */
/* chan_watch.c - what watches a channel's data path without steering it: the trace accessors
 * and the "never early" monitor. See chan.h. */
#include "sim/core/chan.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "sim/core/chan_int.h"

/* ---- trace accessors (plugin/trace.c; see chan.h) -------------------------------------------
 * A self-contained block: reads the request tables and the peer's ACK count, changes nothing.
 */
int chan_tx_times(const struct chan_tx *tx, chan_req req, struct chan_times *out)
{
	if (!tx || !out || req < 0 || req >= CHAN_MAX_SENDS)
		return -EINVAL;
	const struct tx_send *s = &tx->sends[req];
	memset(out, 0, sizeof(*out));
	out->ready_ns = s->ready_ns;
	out->done_ns = s->done_ns;
	out->msg = s->msg;
	out->recv = s->recv;
	out->bytes = s->size;
	out->buf = s->buf;
	out->fault = s->fault;
	out->started = s->started;
	out->arrived = ACQ(&tx->shm->rx.msgs) > s->msg;
	out->doomed = s->doomed;
	out->in_use = s->in_use;
	return 0;
}

int chan_rx_times(const struct chan_rx *rx, chan_req req, struct chan_times *out)
{
	if (!rx || !out || req < 0 || req >= CHAN_MAX_REQS)
		return -EINVAL;
	const struct rx_recv *r = &rx->recvs[req];
	memset(out, 0, sizeof(*out));
	uint64_t got = 0;
	for (uint32_t b = 0; b < r->n && b < CHAN_MAX_RECVS; b++)
		got += r->got[b];
	out->ready_ns = r->ready_ns;
	out->msg = out->recv = r->seq;
	out->bytes = got;
	out->fault = r->fail_fault;
	out->started = got > 0 || r->nfilled > 0;
	out->arrived = r->n > 0 && r->nfilled == r->n;
	out->doomed = r->doomed;
	out->in_use = r->in_use;
	return 0;
}
/* ---- end of trace accessors ---------------------------------------------------------------- */

/* ---- the "never early" monitor ----------------------------------------------------------------
 * The gate above holds a receive until r->ready_ns, so checking a completion against ready_ns
 * right after it proves nothing. This checks it against a clock the gate does not use: the
 * sender's stamp of when it posted each message (post_us) plus the least time the model can give
 * a message of its size on this route (fst_floor_ns: an idle path, no jitter, impairment or fault
 * delay). A gate that lets a receive through early, or a model run that puts ready_ns before what
 * the route allows, counts in the links' `early`. A test build with CHAN_INJECT_EARLY set
 * (build/inject/) skips the gate on purpose, to show the counter counts.
 */

/* The post time in microseconds, low 32 bits (wraps every 71 minutes; 0: not stamped). */
uint32_t chan_post_stamp(int64_t post_ns)
{
	return (uint32_t)((uint64_t)post_ns / 1000);
}

/* A message's last chunk is in: the soonest its receive may complete goes up to its floor. */
void chan_rx_note_floor(struct chan_rx *rx, struct rx_recv *r, const struct chan_desc *d)
{
	const struct chan_route *rt = &rx->route; /* checked at set_fabric */
	if (!rx->fab || !d->post_us || (d->flags & CHAN_F_FAIL))
		return;
	/* The stamp's full time: the latest before now with these low bits, rounded down to the
	 * microsecond (an earlier post only lowers the floor). */
	uint64_t now_us = (uint64_t)now_ns() / 1000;
	uint64_t age_us = (uint32_t)((uint32_t)now_us - d->post_us);
	int64_t post = (int64_t)((now_us - age_us) * 1000);
	int64_t floor_ns = post +
		fst_floor_ns(rx->fab, rt->path, (int)rt->npath, &rt->nic,
			     (enum model_switching)rt->switching, d->total);
	if (floor_ns > r->floor_ns)
		r->floor_ns = floor_ns;
}

/* A receive completes at now: its lateness against the model's time, and whether it is early. */
void chan_rx_record_delivery(struct chan_rx *rx, const struct rx_recv *r, int64_t now)
{
	if (!rx->fab)
		return;
	int early = now < r->floor_ns || now < r->ready_ns;
	fst_record_lateness(rx->fab->shm, rx->last_link, now - r->ready_ns, early);
}
