/* SPDX-License-Identifier: MIT */
/*
 * fstate_fault.c - the faults in the fabric's shared state (fstate.h): their slots, the calls
 * and connections they fail or hold, and what they do to a reservation over a run of hops
 * (fstate_int.h): degrades, outages and resets, triggers.
 */
#include <errno.h>
#include <string.h>

#include "sim/core/fstate_int.h"

static struct fst_fault *fault_slot(struct fst_shm *shm, uint32_t id)
{
	return (struct fst_fault *)((uint8_t *)shm + shm->faults_off) + id;
}

int fst_fault_add(struct fst_shm *shm, const struct fault_spec *spec, int64_t origin, uint32_t *id)
{
	/* Only the daemon adds, from its one thread: no race between slots. */
	uint32_t n = atomic_load(&shm->nfaults);
	if (n >= FAULT_MAX)
		return -ENOSPC;
	struct fst_fault *f = fault_slot(shm, n);
	memset(f, 0, sizeof(*f));
	f->spec = *spec;
	f->spec.name[FAULT_NAME_MAX] = 0;
	atomic_store(&f->origin, origin);
	atomic_store(&f->until, FAULT_FOREVER);
	atomic_store_explicit(&f->used, 1, memory_order_release);
	atomic_store_explicit(&shm->nfaults, n + 1, memory_order_release);
	if ((spec->action == FAULT_A_CALLFAIL || spec->action == FAULT_A_HANG ||
	     spec->action == FAULT_A_KILL) &&
	    spec->kind < 32)
		atomic_fetch_or(&shm->call_kinds, 1u << spec->kind);
	*id = n;
	return 0;
}

/* Has fault id (ff) a window that reaches into [from, now] and has begun by now? from == now:
 * is it in one at now. */
static int window_in(struct fst_shm *shm, struct fst_fault *ff, uint32_t id, int64_t from,
		     int64_t now)
{
	int64_t a, b;
	return fault_window(&ff->spec, shm->seed, id, atomic_load(&ff->origin),
			    atomic_load(&ff->until), from, now, &a, &b) == 1 &&
		a <= now;
}

int fst_call_fault(struct fst_shm *shm, uint32_t kind, int32_t node, int64_t now_ns, uint32_t *fid,
		   uint64_t *call)
{
	uint32_t n = atomic_load_explicit(&shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(shm, id);
		if (!ff || ff->spec.kind != kind ||
		    (ff->spec.node != FAULT_ANY && ff->spec.node != node) ||
		    !window_in(shm, ff, id, now_ns, now_ns))
			continue;
		uint64_t k = (uint64_t)atomic_fetch_add(&ff->calls, 1) + 1;
		if (!fault_call_fails(&ff->spec, shm->seed, id, k))
			continue;
		atomic_fetch_add(&ff->hit, 1);
		atomic_fetch_add(&ff->failed, 1);
		*fid = id;
		*call = k;
		return 1;
	}
	return 0;
}

int fst_conn_hung(struct fst_shm *shm, int32_t src, int32_t dst, int64_t now_ns, uint32_t *fid)
{
	uint32_t n = atomic_load_explicit(&shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(shm, id);
		if (!ff || ff->spec.action != FAULT_A_HANG ||
		    !fault_conn_match(ff->spec.src_node, ff->spec.dst_node, src, dst) ||
		    !window_in(shm, ff, id, now_ns, now_ns))
			continue;
		*fid = id;
		return 1;
	}
	return 0;
}

int fst_node_killed(struct fst_shm *shm, int32_t node, int64_t now_ns, uint32_t *fid)
{
	uint32_t n = atomic_load_explicit(&shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(shm, id);
		/* its windows are instants (1 ns by default): a kill that has begun is for good */
		if (!ff || ff->spec.action != FAULT_A_KILL || ff->spec.node != node ||
		    !window_in(shm, ff, id, 0, now_ns))
			continue;
		*fid = id;
		return 1;
	}
	return 0;
}

struct fst_fault *fst_fault(struct fst_shm *shm, uint32_t id)
{
	if (!shm || id >= atomic_load_explicit(&shm->nfaults, memory_order_acquire))
		return NULL;
	struct fst_fault *f = fault_slot(shm, id);
	return atomic_load_explicit(&f->used, memory_order_acquire) ? f : NULL;
}

int fst_on_path(const struct fst_conn *c, uint32_t link, int *hop)
{
	for (int j = 0; j < c->npath; j++)
		if (c->path[j] == link) {
			*hop = j;
			return 1;
		}
	return 0;
}

/* Does fault f act on this connection's messages in these hops, and at which hop (-1: the
 * connection)? */
static int fault_scope(const struct fault_spec *f, const struct fst_conn *c, struct fst_hops r,
		       int *hop)
{
	*hop = -1;
	if (f->conn_scope)
		return r.lo == 0 &&
			fault_conn_match(f->src_node, f->dst_node, c->src_node, c->dst_node);
	for (uint32_t i = 0; i < f->nlinks; i++)
		if (fst_on_path(c, f->link[i], hop) && *hop >= r.lo && *hop < r.hi)
			return 1;
	*hop = -1;
	return 0;
}

static int trigger_scope(const struct fault_spec *f, const struct fst_conn *c, struct fst_hops r)
{
	int hop;
	if (f->trig_link >= 0)
		return fst_on_path(c, (uint32_t)f->trig_link, &hop) && hop >= r.lo && hop < r.hi;
	return r.lo == 0 && fault_conn_match(f->trig_src, f->trig_dst, c->src_node, c->dst_node);
}

static void note_hit(struct fst_hit *hit, uint32_t id, const struct fault_spec *f, uint32_t link,
		     int64_t a, int64_t b)
{
	hit->fault = (int)id;
	hit->action = f->action;
	hit->link = link;
	hit->window_a = a;
	hit->window_b = b;
}

/* Degrade f sets its parameters on the hops of r it names, on copies (tmp) that p then points
 * to; returns the first such hop's link + 1, or 0 if it names none of them. */
static uint32_t degrade_hops(const struct fst_conn *c, struct fst_hops r,
			     const struct fault_spec *f, struct model_link *tmp,
			     struct model_path *p)
{
	uint32_t first = 0;
	for (uint32_t i = 0; i < f->nlinks; i++) {
		int j;
		if (!fst_on_path(c, f->link[i], &j) || j < r.lo || j >= r.hi)
			continue;
		if (p->hop[j] != &tmp[j]) {
			tmp[j] = *p->hop[j];
			p->hop[j] = &tmp[j];
		}
		if (f->set & FAULT_SET_RATE)
			tmp[j].rate_bps = f->rate_bps;
		if (f->set & FAULT_SET_LATENCY)
			tmp[j].latency_ns += f->extra_latency_ns;
		if (f->set & FAULT_SET_LOSS)
			tmp[j].loss = f->loss;
		if (f->set & FAULT_SET_CORRUPT)
			tmp[j].corrupt_p = f->corrupt_p;
		if (!first)
			first = f->link[i] + 1;
	}
	return first;
}

/* A degrade in force at t on link: its parameters replace the hop's, on a copy. */
void fst_apply_degrades(struct fst_view *v, const struct fst_conn *c, struct fst_hops r, int64_t t,
			struct model_link *tmp, struct model_path *p, struct fst_hit *hit)
{
	uint32_t n = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(v->shm, id);
		if (!ff || ff->spec.action != FAULT_A_DEGRADE)
			continue;
		const struct fault_spec *f = &ff->spec;
		int64_t wa, wb;
		if (fault_window(f, v->shm->seed, id, atomic_load(&ff->origin),
				 atomic_load(&ff->until), t, t, &wa, &wb) != 1 ||
		    wa > t)
			continue;
		uint32_t first = degrade_hops(c, r, f, tmp, p);
		if (!first)
			continue;
		if (f->set & FAULT_SET_CORRUPT)
			hit->corrupt_set = 1;
		if (hit->fault < 0)
			note_hit(hit, id, f, first - 1, wa, wb);
		if (hit->degrades[id / 64] >> (id % 64) & 1)
			continue; /* counted for this message by the host of the route's front */
		hit->degrades[id / 64] |= 1ull << (id % 64);
		hit->nfaults++;
		atomic_fetch_add_explicit(&ff->hit, 1, memory_order_relaxed);
	}
}

/* The degrades another host found in force on its hops r (a front's mask), applied again here
 * without counting them (that host did). -EPROTO for a bit that names no degrade fault. */
int fst_apply_degrade_mask(struct fst_view *v, const struct fst_conn *c, struct fst_hops r,
			   const uint64_t *mask, struct model_link *tmp, struct model_path *p,
			   struct fst_hit *hit)
{
	uint32_t n = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < FAULT_MAX; id++) {
		if (!(mask[id / 64] >> (id % 64) & 1))
			continue;
		struct fst_fault *ff = id < n ? fst_fault(v->shm, id) : NULL;
		if (!ff || ff->spec.action != FAULT_A_DEGRADE)
			return -EPROTO;
		uint32_t first = degrade_hops(c, r, &ff->spec, tmp, p);
		if (first && (ff->spec.set & FAULT_SET_CORRUPT))
			hit->corrupt_set = 1;
		if (first &&
		    hit->fault < 0) /* the fault a failure under it names, as fst_reserve */
			note_hit(hit, id, &ff->spec, first - 1, 0, 0);
	}
	return 0;
}

/*
 * Outages (DOWN, STALL) and resets the message meets between its post and its
 * arrival, in time order: each delays what is left of it, or fails it. The
 * retry budget is shared by outages that follow each other without progress.
 */
/*
 * A message caught at u resumes at r and then still needs what was to come at u: the rest
 * of its transit, at most what it takes on an idle path (own_ns). It arrives at
 * max(the model's arrival, r + that). Delays are maxima, not sums, so a message queued
 * behind an earlier delayed one (on a link, or by its connection's FIFO order) does not pay
 * that delay twice.
 */
void fst_apply_outages(struct fst_view *v, struct fst_conn *c, struct fst_hops r, int64_t t_post,
		       int64_t own_ns, struct model_msg *out, struct fst_hit *hit, int *fail_hop)
{
	uint32_t n = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	const int64_t to = model_timeout_ns(&c->nic);
	int64_t t = t_post, end = out->arrive_ns, delay = 0, last_resume = -1;
	uint32_t used = 0;
	uint64_t seen[FAULT_MAX / 64] = {0}; /* faults counted for this message already */
	for (int round = 0; round < 4 * FAULT_MAX; round++) {
		/* the earliest window (of any matching fault) that overlaps [t, end] */
		int best = -1, best_hop = -1, undecided = 0;
		int64_t ba = 0, bb = 0;
		for (uint32_t id = 0; id < n; id++) {
			struct fst_fault *ff = fst_fault(v->shm, id);
			if (!ff)
				continue;
			const struct fault_spec *f = &ff->spec;
			if (f->action != FAULT_A_DOWN && f->action != FAULT_A_STALL &&
			    f->action != FAULT_A_RESET)
				continue;
			int hop;
			int64_t wa, wb;
			if (!fault_scope(f, c, r, &hop))
				continue;
			int w = fault_window(f, v->shm->seed, id, atomic_load(&ff->origin),
					     atomic_load(&ff->until), t, end, &wa, &wb);
			if (!w)
				continue;
			int64_t u = wa > t ? wa : t;
			if (best < 0 || u < ba) {
				best = (int)id;
				best_hop = hop;
				ba = u;
				bb = wb;
				undecided = w == 2;
			}
		}
		if (best < 0)
			break;
		if (undecided) { /* a scan cut short: nothing before ba, look again from there */
			t = ba;
			continue;
		}
		struct fst_fault *ff = fst_fault(v->shm, (uint32_t)best);
		const struct fault_spec *f = &ff->spec;
		uint32_t link = best_hop >= 0 ? c->path[best_hop] : (c->npath ? c->path[0] : 0);
		if (hit->fault < 0 || hit->action == FAULT_A_DEGRADE)
			note_hit(hit, (uint32_t)best, f, link, ba, bb);
		/* counters count messages, not the windows one message meets */
		int first = !(seen[best / 64] >> (best % 64) & 1);
		seen[best / 64] |= 1ull << (best % 64);
		if (first) {
			hit->nfaults++;
			atomic_fetch_add_explicit(&ff->hit, 1, memory_order_relaxed);
		}
		int64_t resume;
		uint32_t spent = 0;
		int failed;
		if (f->action == FAULT_A_RESET) {
			failed = 1;
			resume = ba;
		} else {
			if (ba > last_resume)
				used = 0; /* progress since the last outage: RC resets its counter */
			uint32_t left = c->nic.retry_count > used ? c->nic.retry_count - used : 0;
			failed = fault_recover((enum fault_action)f->action, ba, bb, to, left,
					       &resume, &spent);
		}
		if (failed) {
			note_hit(hit, (uint32_t)best, f, link, ba, bb);
			atomic_fetch_add_explicit(&ff->failed, 1, memory_order_relaxed);
			if (resume < t_post)
				resume = t_post;
			out->failed = 1;
			out->timeouts += spent + (f->action == FAULT_A_RESET ? 0 : 1);
			out->arrive_ns = out->recv_done_ns = out->send_done_ns = resume;
			*fail_hop = best_hop;
			c->mc.failed = 1;
			c->mc.last_arrive = resume;
			hit->delay_ns = delay;
			return;
		}
		used += spent;
		out->timeouts += f->action == FAULT_A_DOWN ? spent : 0;
		out->lost += f->action == FAULT_A_DOWN ? 1 : 0;
		/* what was still to come at ba: its own transit, or less if it was under way */
		int64_t rem = end - ba < own_ns ? end - ba : own_ns;
		int64_t want = resume > INT64_MAX - rem ? INT64_MAX : resume + rem;
		int64_t d = want > end ? want - end : 0;
		if (first)
			atomic_fetch_add_explicit(&ff->delayed, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&ff->delay_ns, (uint64_t)d, memory_order_relaxed);
		delay += d;
		end += d;
		t = resume;
		last_resume = resume;
	}
	if (delay) { /* a stall without end and no ACK timer: MODEL_NEVER, not an overflow */
		out->arrive_ns = model_tadd(out->arrive_ns, delay);
		out->recv_done_ns = model_tadd(out->recv_done_ns, delay);
		out->send_done_ns = model_tadd(out->send_done_ns, delay);
		c->mc.last_arrive = out->arrive_ns;
	}
	hit->delay_ns = delay;
}

/* Triggers the message fires: counted after the check, so the Nth message is not hit itself. */
void fst_count_triggers(struct fst_view *v, const struct fst_conn *c, struct fst_hops r,
			int64_t t_post, uint64_t bytes)
{
	uint32_t n = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(v->shm, id);
		if (!ff || ff->spec.trigger == FAULT_T_TIME || atomic_load(&ff->origin))
			continue;
		if (!trigger_scope(&ff->spec, c, r))
			continue;
		uint64_t add = ff->spec.trigger == FAULT_T_BYTES ? bytes : 1;
		uint64_t need = ff->spec.trigger == FAULT_T_FIRST_TRAFFIC ? 1 : ff->spec.threshold;
		uint64_t was = atomic_fetch_add(&ff->seen, add);
		if (was < need && was + add >= need) {
			int64_t zero = 0;
			atomic_compare_exchange_strong(&ff->origin, &zero, t_post > 0 ? t_post : 1);
		}
	}
}
