/* SPDX-License-Identifier: MIT */
/*
 * fstate.c - the fabric's shared state (see fstate.h).
 */
#include "sim/core/fstate.h"
#include "sim/core/fstate_int.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 64u
#define NS_BITS 8000000000ull /* bits x 1e9: bytes x NS_BITS / rate_bps = ns */

__extension__ typedef unsigned __int128 u128;

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* *a = max(*a, v), for counters that several processes raise at once. */
static void atomic_max(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
	while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								  memory_order_relaxed))
		;
}

struct layout {
	uint64_t params_off, state_off, nics_off, faults_off, xhosts_off, tables_off, total;
};

static int layout_for(uint32_t nlinks, uint32_t nnics, uint64_t table_entries, struct layout *l)
{
	if (nlinks > FST_MAX_LINKS || nnics > FST_MAX_LINKS ||
	    table_entries > (uint64_t)nlinks * MODEL_TABLE_MAX)
		return -EINVAL;
	l->params_off = align_up(sizeof(struct fst_shm), ALIGN);
	l->state_off = align_up(l->params_off + (uint64_t)nlinks * sizeof(struct model_link), ALIGN);
	l->nics_off = align_up(l->state_off + (uint64_t)nlinks * sizeof(struct fst_link), ALIGN);
	l->faults_off = align_up(l->nics_off + (uint64_t)nnics * sizeof(struct fst_nic), ALIGN);
	l->xhosts_off = align_up(l->faults_off + (uint64_t)FAULT_MAX * sizeof(struct fst_fault), ALIGN);
	l->tables_off =
		align_up(l->xhosts_off + (uint64_t)FST_MAX_HOSTS * sizeof(struct fst_xhost), ALIGN);
	l->total = align_up(l->tables_off + table_entries * sizeof(int64_t), 4096);
	return 0;
}

size_t fst_bytes(uint32_t nlinks, uint32_t nnics, uint64_t table_entries)
{
	struct layout l;
	return layout_for(nlinks, nnics, table_entries, &l) ? 0 : (size_t)l.total;
}

int fst_format(void *base, size_t len, uint32_t nlinks, const struct model_link *links,
	       uint32_t nnics, uint64_t seed, int64_t epoch_ns)
{
	uint64_t entries = 0;
	for (uint32_t i = 0; i < nlinks; i++)
		if (links[i].jitter.dist == MODEL_DIST_TABLE) {
			if (!links[i].jitter.table || links[i].jitter.ntable <= 0 ||
			    links[i].jitter.ntable > MODEL_TABLE_MAX)
				return -EINVAL;
			entries += (uint64_t)links[i].jitter.ntable;
		}
	struct layout l;
	if (!base || layout_for(nlinks, nnics, entries, &l) || len < l.total)
		return -EINVAL;
	struct fst_shm *shm = base;
	memset(shm, 0, sizeof(*shm));
	shm->version = FST_VERSION;
	shm->nlinks = nlinks;
	shm->seed = seed;
	shm->epoch_ns = epoch_ns;
	shm->total_bytes = l.total;
	shm->params_off = l.params_off;
	shm->state_off = l.state_off;
	shm->tables_off = l.tables_off;
	shm->nnics = nnics;
	shm->nics_off = l.nics_off;
	shm->faults_off = l.faults_off;
	shm->xhosts_off = l.xhosts_off;
	memset((uint8_t *)base + l.nics_off, 0, (size_t)nnics * sizeof(struct fst_nic));
	memset((uint8_t *)base + l.xhosts_off, 0, (size_t)FST_MAX_HOSTS * sizeof(struct fst_xhost));
	memset((uint8_t *)base + l.faults_off, 0, (size_t)FAULT_MAX * sizeof(struct fst_fault));
	struct model_link *params = (struct model_link *)((uint8_t *)base + l.params_off);
	struct fst_link *state = (struct fst_link *)((uint8_t *)base + l.state_off);
	int64_t *tables = (int64_t *)((uint8_t *)base + l.tables_off);
	uint64_t at = 0;
	for (uint32_t i = 0; i < nlinks; i++) {
		params[i] = links[i];
		params[i].jitter.table = NULL; /* pointers mean nothing in another process */
		memset(&state[i], 0, sizeof(state[i]));
		state[i].loss.state = 1;
		if (links[i].jitter.dist == MODEL_DIST_TABLE) {
			state[i].table_off = at;
			state[i].table_n = (uint64_t)links[i].jitter.ntable;
			memcpy(tables + at, links[i].jitter.table,
			       (size_t)links[i].jitter.ntable * sizeof(int64_t));
			at += (uint64_t)links[i].jitter.ntable;
		}
	}
	atomic_thread_fence(memory_order_release);
	shm->magic = FST_MAGIC;
	return 0;
}

int fst_check(const void *base, size_t len)
{
	const struct fst_shm *shm = base;
	if (!base || len < sizeof(*shm) || shm->magic != FST_MAGIC)
		return -EPROTO;
	if (shm->version != FST_VERSION)
		return -EPROTONOSUPPORT;
	struct layout l;
	uint64_t entries = 0;
	if (layout_for(shm->nlinks, shm->nnics, 0, &l))
		return -EPROTO;
	if (shm->params_off != l.params_off || shm->state_off != l.state_off ||
	    shm->nics_off != l.nics_off || shm->faults_off != l.faults_off ||
	    shm->xhosts_off != l.xhosts_off ||
	    atomic_load(&((struct fst_shm *)base)->nfaults) > FAULT_MAX ||
	    shm->tables_off != l.tables_off || shm->total_bytes > len ||
	    shm->total_bytes < l.tables_off)
		return -EPROTO;
	entries = (shm->total_bytes - l.tables_off) / sizeof(int64_t);
	const struct fst_link *state = (const struct fst_link *)((const uint8_t *)base + l.state_off);
	for (uint32_t i = 0; i < shm->nlinks; i++)
		if (state[i].table_n > MODEL_TABLE_MAX || state[i].table_off > entries ||
		    state[i].table_n > entries - state[i].table_off)
			return -EPROTO;
	return 0;
}

int fst_view_new(void *base, size_t len, struct fst_view **out)
{
	int rc = fst_check(base, len);
	if (rc)
		return rc;
	struct fst_shm *shm = base;
	struct fst_view *v = calloc(1, sizeof(*v));
	struct model_link *links = calloc(shm->nlinks ? shm->nlinks : 1, sizeof(*links));
	if (!v || !links) {
		free(v);
		free(links);
		return -ENOMEM;
	}
	const struct model_link *params =
		(const struct model_link *)((const uint8_t *)base + shm->params_off);
	const struct fst_link *state = (const struct fst_link *)((const uint8_t *)base + shm->state_off);
	const int64_t *tables = (const int64_t *)((const uint8_t *)base + shm->tables_off);
	for (uint32_t i = 0; i < shm->nlinks; i++) {
		links[i] = params[i];
		links[i].jitter.table = NULL;
		if (links[i].jitter.dist == MODEL_DIST_TABLE) {
			if (state[i].table_n == 0) {
				free(v);
				free(links);
				return -EPROTO;
			}
			links[i].jitter.table = tables + state[i].table_off;
			links[i].jitter.ntable = (int)state[i].table_n;
		}
	}
	v->shm = shm;
	v->len = len;
	v->nlinks = shm->nlinks;
	v->nnics = shm->nnics;
	v->links = links;
	*out = v;
	return 0;
}

void fst_view_free(struct fst_view *v)
{
	if (!v)
		return;
	free(v->links);
	free(v);
}

static struct fst_link *link_state(struct fst_shm *shm, uint32_t id)
{
	return (struct fst_link *)((uint8_t *)shm + shm->state_off) + id;
}

/* The holder's process is gone (kill(pid, 0) is safe here: every process shares our pid namespace). */
static int holder_gone(int32_t pid)
{
	return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static int fst_lock(struct fst_shm *shm)
{
	int32_t me = (int32_t)getpid();
	int64_t t0 = 0;
	for (unsigned spins = 0;; spins++) {
		uint32_t free_ = 0;
		if (atomic_compare_exchange_weak_explicit(&shm->lock, &free_, 1, memory_order_acquire,
							  memory_order_relaxed)) {
			atomic_store_explicit(&shm->lock_pid, me, memory_order_relaxed);
			return 0;
		}
		if ((spins & 1023) != 1023)
			continue;
		/* The holder may be off its CPU (ranks can outnumber cores): let it run. */
		sched_yield();
		int64_t now = mono_ns();
		if (!t0) {
			t0 = now;
			continue;
		}
		if (now - t0 < FST_LOCK_STEAL_NS)
			continue;
		int32_t pid = atomic_load(&shm->lock_pid);
		if (holder_gone(pid)) {
			/* Steal: the dead holder's reservation may be half-committed, which costs
			 * accuracy on those links, never safety. */
			atomic_store(&shm->lock_pid, me);
			atomic_fetch_add(&shm->lock_steals, 1);
			return 0;
		}
		/* A live holder takes nanoseconds; seconds mean a bug, not a busy machine. */
		if (now - t0 > FST_LOCK_DEADLOCK_NS)
			return -EDEADLK;
	}
}

static void fst_unlock(struct fst_shm *shm)
{
	atomic_store_explicit(&shm->lock_pid, 0, memory_order_relaxed);
	atomic_store_explicit(&shm->lock, 0, memory_order_release);
}

/* Can a piece of a route reserve this hop? Jitter is added at the end by the caller (model_message
 * adds it after the trains, whatever the hops' reservations), duplicates are drawn per hop from
 * the message's key (model_duplicate_bytes), corruption costs no time (the receiver flips the
 * bits: xmodel); loss recovery and reordering are the whole route's. */
static int splittable(const struct model_link *l)
{
	return l->loss.kind == MODEL_LOSS_NONE && !l->reorder_p;
}

static void count_queue(struct fst_link *s, uint64_t bytes, uint64_t packets, uint64_t q)
{
	atomic_fetch_add_explicit(&s->msgs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->bytes, bytes, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->packets, packets, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->queue_ns, q, memory_order_relaxed);
	atomic_max(&s->queue_max_ns, q);
	atomic_fetch_add_explicit(&s->queue_hist[fst_bucket(q, FST_QUEUE_BUCKETS)], 1,
				  memory_order_relaxed);
}

int fst_conn_path(const struct fst_view *v, const struct fst_conn *c, struct model_path *p)
{
	if (c->npath < 0 || c->npath > MODEL_MAX_HOPS)
		return -EINVAL;
	*p = (struct model_path){.nhops = c->npath, .switching = c->switching};
	for (int j = 0; j < c->npath; j++) {
		if (c->path[j] >= v->nlinks)
			return -EINVAL;
		p->link_id[j] = c->path[j];
		p->hop[j] = &v->links[c->path[j]];
	}
	return 0;
}

/* The impairment counters of one message, on link (fst_reserve's rule: on the first hop, or on
 * the hop whose loss failed it). */
static void count_impairments(struct fst_shm *shm, uint32_t link, const struct model_msg *m)
{
	struct fst_link *s = link_state(shm, link);
	atomic_fetch_add_explicit(&s->lost, m->lost, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->timeouts, m->timeouts, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->duplicates, m->duplicates, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->reordered, m->reordered, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->corrupted, m->corrupted, memory_order_relaxed);
	if (m->failed)
		atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
}

int fst_reserve(struct fst_view *v, struct fst_conn *c, int64_t now_ns, uint64_t bytes,
		struct model_msg *out, struct fst_hit *hit)
{
	struct fst_hit nohit;
	if (!hit)
		hit = &nohit;
	memset(hit, 0, sizeof(*hit));
	hit->fault = -1;
	struct model_path p;
	if (c->src_nic >= v->nnics || fst_conn_path(v, c, &p))
		return -EINVAL;
	struct model_key key = {.seed = v->shm->seed, .conn = c->id, .msg = c->msgs};
	const struct fst_hops all = {0, c->npath};
	int64_t busy[MODEL_MAX_HOPS], before[MODEL_MAX_HOPS];
	struct model_loss_state loss[MODEL_MAX_HOPS];
	struct model_link tmp[MODEL_MAX_HOPS];
	struct fst_nic *nic = (struct fst_nic *)((uint8_t *)v->shm + v->shm->nics_off) + c->src_nic;
	int faults = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire) != 0;
	int rc = fst_lock(v->shm);
	if (rc)
		return rc;
	if (faults) {
		fst_apply_degrades(v, c, all, now_ns, tmp, &p, hit);
		for (int j = 0; hit->corrupt_set && j < c->npath; j++)
			hit->corrupt_p[j] = p.hop[j]->corrupt_p; /* the data path flips the same bits */
	}
	int64_t host_busy = nic->host_busy;
	for (int j = 0; j < c->npath; j++) {
		struct fst_link *s = link_state(v->shm, c->path[j]);
		before[j] = busy[j] = s->busy_until;
		loss[j] = s->loss;
	}
	int was_failed = c->mc.failed;
	rc = model_message(&p, &c->nic, now_ns, bytes, &key, &host_busy, busy, loss, &c->mc, out);
	int fault_hop = -1;
	if (rc == 0 && faults && !was_failed && !out->failed && out->arrive_ns != MODEL_NEVER) {
		/* what the message takes on an idle path, up to its arrival */
		int64_t own = model_ideal_ns(&p, &c->nic, bytes) - c->nic.o_recv_ns;
		fst_apply_outages(v, c, all, now_ns, own > 0 ? own : 0, out, hit, &fault_hop);
	}
	if (rc == 0) {
		nic->host_busy = host_busy;
		for (int j = 0; j < c->npath; j++) {
			struct fst_link *s = link_state(v->shm, c->path[j]);
			s->busy_until = busy[j];
			s->loss = loss[j];
		}
		if (faults)
			fst_count_triggers(v, c, all, now_ns, bytes);
	}
	fst_unlock(v->shm);
	if (rc)
		return rc;
	if (out->failed && hit->fault >= 0 && fault_hop >= 0)
		out->fail_hop = fault_hop;
	else if (out->failed && hit->fault >= 0)
		out->fail_hop = -1;
	c->msgs++;
	for (int j = 0; j < c->npath; j++) {
		uint64_t q = before[j] > now_ns ? (uint64_t)(before[j] - now_ns) : 0;
		count_queue(link_state(v->shm, c->path[j]), bytes, out->packets, q);
	}
	/* Impairments are charged to the first hop: the model reports them per message. */
	if (c->npath > 0) {
		int hop = out->failed && out->fail_hop >= 0 && out->fail_hop < c->npath ? out->fail_hop : 0;
		count_impairments(v->shm, c->path[hop], out);
	}
	return 0;
}

/* What the train takes over hops [r.lo, r.hi) from stamp *in on idle links (outages' "own"). */
static int64_t idle_ns(const struct model_path *p, const struct model_train *tr, struct fst_hops r,
		       const struct model_stamp *in)
{
	struct model_hop_times h = {.next = *in};
	for (int j = r.lo; j < r.hi; j++) {
		struct model_stamp st = h.next;
		model_hop(p->hop[j], p->switching, tr, 0, INT64_MIN, &st, &h);
	}
	return h.next.last_ns - in->first_ns;
}

static int markov(const struct model_link *l)
{
	return l->loss.kind == MODEL_LOSS_GE || l->loss.kind == MODEL_LOSS_4STATE;
}

/*
 * A message's first attempt over hops [r.lo, r.hi) entering at stamp *in: the sending NIC's host
 * stage first when r starts at hop 0 (free from *host_busy, which it moves), then each hop j
 * free from busy[j] (each moved to the hop's busy-until after the train), with the attempt's
 * duplicates; *out: the stamp it leaves with, at[j]: its stamp's first_ns at hop j. Pure: what
 * reserve_piece commits under the lock and front_gives recomputes from the front.
 */
static void first_attempt(const struct model_path *p, const struct fst_conn *c,
			  const struct model_train *tr, const struct model_key *key, uint64_t bytes,
			  struct fst_hops r, int64_t *host_busy, int64_t *busy, int64_t *at,
			  uint32_t *ndup, const struct model_stamp *in, struct model_stamp *out)
{
	struct model_hop_times h = {.next = *in};
	if (r.lo == 0 && c->nic.host_rate_bps) {
		struct model_link host = {.rate_bps = c->nic.host_rate_bps};
		struct model_stamp st = h.next;
		model_hop(&host, p->switching, tr, 0, *host_busy, &st, &h);
		*host_busy = h.done_ns > *host_busy ? h.done_ns : *host_busy;
	}
	uint64_t dup[MODEL_MAX_HOPS];
	uint32_t nd = model_duplicate_bytes(p, key, bytes, dup, r.lo, r.hi);
	if (ndup)
		*ndup = nd;
	for (int j = r.lo; j < r.hi; j++) {
		struct model_stamp st = h.next;
		if (at)
			at[j] = st.first_ns;
		model_hop(p->hop[j], p->switching, tr, dup[j], busy[j], &st, &h);
		if (h.done_ns > busy[j])
			busy[j] = h.done_ns;
	}
	*out = h.next;
}

/* An outage's delay (fst_hit.delay_ns) on a stamp: never delivered stays never. */
static void delay_stamp(struct model_stamp *st, int64_t delay_ns)
{
	st->last_ns = model_tadd(st->last_ns, delay_ns);
	st->first_ns = st->last_ns == MODEL_NEVER ? MODEL_NEVER : st->first_ns + delay_ns;
}

/* fst_reserve_hops, and with front (first == 0) fst_reserve_front. */
static int reserve_piece(struct fst_view *v, struct fst_conn *c, int first, int n, uint64_t bytes,
			 int64_t post_ns, const struct model_stamp *in, struct model_stamp *out,
			 struct fst_hit *hit, struct fst_front *front)
{
	struct fst_hit nohit;
	if (!hit)
		hit = &nohit;
	memset(hit, 0, sizeof(*hit));
	hit->fault = -1;
	if (!v || !c || !in || !out || c->npath < 0 || c->npath > MODEL_MAX_HOPS || first < 0 ||
	    n < 0 || first + n > c->npath || c->src_nic >= v->nnics || bytes > MODEL_MAX_BYTES ||
	    (front && first))
		return -EINVAL;
	const struct fst_hops r = {first, first + n};
	struct model_path p;
	if (fst_conn_path(v, c, &p))
		return -EINVAL;
	if (front) {
		int whole = front->whole_outages;
		memset(front, 0, sizeof(*front));
		front->post_ns = post_ns;
		front->whole_outages = whole;
	}
	if (c->mc.failed) { /* RC: after a failure the connection flushes, reserving nothing */
		int64_t t = first == 0 ? post_ns : in->first_ns;
		*out = (struct model_stamp){0};
		out->first_ns = out->last_ns = t > c->mc.last_arrive ? t : c->mc.last_arrive;
		if (first == 0 && c->npath) /* counted as fst_reserve counts it, once */
			atomic_fetch_add_explicit(&link_state(v->shm, c->path[0])->failed, 1,
						  memory_order_relaxed);
		return 1;
	}
	struct model_link tmp[MODEL_MAX_HOPS];
	struct model_train tr;
	model_train_init(&tr, &p, bytes);
	int64_t before[MODEL_MAX_HOPS], busy[MODEL_MAX_HOPS], at[MODEL_MAX_HOPS];
	struct fst_nic *nic = (struct fst_nic *)((uint8_t *)v->shm + v->shm->nics_off) + c->src_nic;
	int faults = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire) != 0;
	int rc = fst_lock(v->shm);
	if (rc)
		return rc;
	if (faults) /* a degrade to loss or corruption: refused below, or the replay's (front) */
		fst_apply_degrades(v, c, r, post_ns, tmp, &p, hit);
	for (int j = first; j < first + n && !front; j++)
		if (!splittable(p.hop[j])) {
			fst_unlock(v->shm);
			return -EOPNOTSUPP;
		}
	if (front)
		front->host_busy = nic->host_busy;
	struct model_key key = {.seed = v->shm->seed, .conn = c->id, .msg = c->msgs};
	for (int j = first; j < first + n; j++)
		before[j] = busy[j] = link_state(v->shm, c->path[j])->busy_until;
	uint32_t ndup;
	first_attempt(&p, c, &tr, &key, bytes, r, &nic->host_busy, busy, at, &ndup, in, out);
	for (int j = first; j < first + n; j++) {
		struct fst_link *s = link_state(v->shm, c->path[j]);
		s->busy_until = busy[j];
		if (!front)
			continue;
		front->busy[j] = before[j];
		front->loss[j] = s->loss;
		if (markov(p.hop[j])) { /* the chain crosses the first attempt's packets, as
					   model_message's first attempt has it do */
			struct model_loss_iter it;
			struct model_key k = key;
			k.link = c->path[j];
			model_loss_begin(&it, &p.hop[j]->loss, &s->loss, &k, tr.packets, 0);
			model_loss_next(&it, 0, 1);
			model_loss_end(&it);
		}
	}
	int failed = 0;
	if (faults) {
		/* outages met between entering these hops and leaving them (fst_reserve's rule) */
		int64_t t0 = first == 0 ? post_ns : in->first_ns;
		struct model_msg m = {.arrive_ns = out->last_ns, .fail_hop = -1};
		int fault_hop = -1;
		int64_t own = idle_ns(&p, &tr, r, in) + (in->first_ns - t0);
		if (!front || !front->whole_outages) /* else the replay's, over every attempt */
			fst_apply_outages(v, c, r, t0, own > 0 ? own : 0, &m, hit, &fault_hop);
		if (m.failed) {
			failed = 1;
			out->first_ns = out->last_ns = m.arrive_ns;
		} else if (hit->delay_ns) {
			delay_stamp(out, hit->delay_ns);
		}
		fst_count_triggers(v, c, r, post_ns, bytes);
	}
	fst_unlock(v->shm);
	if (front) {
		front->delay_ns = hit->delay_ns;
		memcpy(front->degrades, hit->degrades, sizeof(front->degrades));
	}
	for (int j = first; j < first + n; j++) {
		uint64_t q = before[j] > at[j] ? (uint64_t)(before[j] - at[j]) : 0;
		count_queue(link_state(v->shm, c->path[j]), bytes, tr.packets, q);
	}
	if (ndup && n) /* as fst_reserve, charged to the first hop (of this piece) */
		atomic_fetch_add_explicit(&link_state(v->shm, c->path[first])->duplicates, ndup,
					  memory_order_relaxed);
	if (failed && hit->link < v->nlinks && hit->fault >= 0)
		atomic_fetch_add_explicit(&link_state(v->shm, hit->link)->failed, 1,
					  memory_order_relaxed);
	return failed;
}

int fst_reserve_hops(struct fst_view *v, struct fst_conn *c, int first, int n, uint64_t bytes,
		     int64_t post_ns, const struct model_stamp *in, struct model_stamp *out,
		     struct fst_hit *hit)
{
	return reserve_piece(v, c, first, n, bytes, post_ns, in, out, hit, NULL);
}

int fst_reserve_front(struct fst_view *v, struct fst_conn *c, int split, uint64_t bytes,
		      int64_t post_ns, int replay, struct model_stamp *out,
		      struct fst_front *front, struct fst_hit *hit)
{
	if (!front || !c)
		return -EINVAL;
	front->whole_outages = replay != 0;
	int64_t t = model_tadd(post_ns, c->nic.o_send_ns);
	struct model_stamp in = {t, t, 0};
	return reserve_piece(v, c, 0, split, bytes, post_ns, &in, out, hit, front);
}

int fst_route_replayed(const struct fst_view *v, const struct fst_conn *c)
{
	if (!v || !c || c->npath < 0 || c->npath > MODEL_MAX_HOPS)
		return 0;
	for (int j = 0; j < c->npath; j++) {
		const struct model_link *l = c->path[j] < v->nlinks ? &v->links[c->path[j]] : NULL;
		if (l && (l->loss.kind != MODEL_LOSS_NONE || l->reorder_p))
			return 1;
	}
	uint32_t n = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(v->shm, id);
		if (!ff || ff->spec.action != FAULT_A_DEGRADE ||
		    !(ff->spec.set & (FAULT_SET_LOSS | FAULT_SET_CORRUPT)))
			continue;
		for (uint32_t i = 0; i < ff->spec.nlinks; i++) {
			int hop;
			if (fst_on_path(c, ff->spec.link[i], &hop))
				return 1;
		}
	}
	return 0;
}

/* Does the front give the stamp? The sender's first attempt over its hops, recomputed from
 * the front as reserve_piece computed it (first_attempt from its busy-until and host stage; the
 * degrades are already on p), must be the stamp *in to the nanosecond: 0, else -EPROTO. */
static int front_gives(const struct model_path *p, const struct fst_conn *c,
		       const struct model_train *tr, const struct model_key *key, uint64_t bytes,
		       int split, const struct fst_front *f, const struct model_stamp *in)
{
	int64_t t = model_tadd(f->post_ns, c->nic.o_send_ns), host_busy = f->host_busy;
	int64_t busy[MODEL_MAX_HOPS];
	memcpy(busy, f->busy, sizeof(busy[0]) * (size_t)split);
	struct model_stamp want;
	first_attempt(p, c, tr, key, bytes, (struct fst_hops){0, split}, &host_busy, busy, NULL, NULL,
		      &(struct model_stamp){t, t, 0}, &want);
	if (!f->whole_outages && f->delay_ns) /* reserve_piece's outage delay */
		delay_stamp(&want, f->delay_ns);
	return want.first_ns == in->first_ns && want.last_ns == in->last_ns &&
			       want.last_tx_ns == in->last_tx_ns
		       ? 0
		       : -EPROTO;
}

int fst_reserve_rest(struct fst_view *v, struct fst_conn *c, int split, uint64_t bytes,
		     const struct fst_front *front, const struct model_stamp *in,
		     struct model_msg *out, struct fst_back *back, struct fst_hit *hit)
{
	struct fst_hit nohit;
	if (!hit)
		hit = &nohit;
	memset(hit, 0, sizeof(*hit));
	hit->fault = -1;
	if (!v || !c || !front || !in || !out || !back || c->npath < 1 ||
	    c->npath > MODEL_MAX_HOPS || split < 1 || split > c->npath || c->src_nic >= v->nnics ||
	    bytes > MODEL_MAX_BYTES)
		return -EINVAL;
	struct model_path p;
	if (fst_conn_path(v, c, &p))
		return -EINVAL;
	memset(back, 0, sizeof(*back));
	const struct fst_hops mine = {split, c->npath}, theirs = {0, split};
	struct model_key key = {.seed = v->shm->seed, .conn = c->id, .msg = c->msgs};
	struct model_link tmp[MODEL_MAX_HOPS];
	int64_t busy[MODEL_MAX_HOPS], before[MODEL_MAX_HOPS];
	struct model_loss_state loss[MODEL_MAX_HOPS];
	int faults = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire) != 0;
	int rc = fst_lock(v->shm);
	if (rc)
		return rc;
	rc = fst_apply_degrade_mask(v, c, theirs, front->degrades, tmp, &p, hit);
	struct model_train tr; /* one for the call: a degrade never changes the path's MTU */
	model_train_init(&tr, &p, bytes);
	if (!rc)
		rc = front_gives(&p, c, &tr, &key, bytes, split, front, in);
	if (rc) {
		fst_unlock(v->shm);
		return rc;
	}
	memcpy(hit->degrades, front->degrades, sizeof(hit->degrades)); /* counted there */
	if (faults)
		fst_apply_degrades(v, c, mine, in->first_ns, tmp, &p, hit);
	for (int j = 0; hit->corrupt_set && j < c->npath; j++)
		hit->corrupt_p[j] = p.hop[j]->corrupt_p; /* xmodel flips the same bits */
	int64_t host_busy = front->host_busy;
	for (int j = 0; j < c->npath; j++) {
		if (j < split) {
			before[j] = busy[j] = front->busy[j];
			loss[j] = front->loss[j];
		} else {
			struct fst_link *s = link_state(v->shm, c->path[j]);
			before[j] = busy[j] = s->busy_until;
			loss[j] = s->loss;
		}
	}
	int was_failed = c->mc.failed, fault_hop = -1;
	rc = model_message(&p, &c->nic, front->post_ns, bytes, &key, &host_busy, busy, loss, &c->mc,
			   out);
	if (rc == 0 && !was_failed && !out->failed && out->arrive_ns != MODEL_NEVER) {
		if (front->whole_outages && faults) { /* every hop's, over every attempt: as
							  fst_reserve meets them */
			int64_t own = model_ideal_ns(&p, &c->nic, bytes) - c->nic.o_recv_ns;
			fst_apply_outages(v, c, (struct fst_hops){0, c->npath}, front->post_ns,
				      own > 0 ? own : 0, out, hit, &fault_hop);
		} else if (!front->whole_outages) {
			if (front->delay_ns) { /* the sender's piece met outages */
				out->arrive_ns = model_tadd(out->arrive_ns, front->delay_ns);
				out->recv_done_ns = model_tadd(out->recv_done_ns, front->delay_ns);
				out->send_done_ns = model_tadd(out->send_done_ns, front->delay_ns);
				c->mc.last_arrive = out->arrive_ns;
			}
			if (faults) {
				int64_t own = idle_ns(&p, &tr, mine, in);
				fst_apply_outages(v, c, mine, in->first_ns, own > 0 ? own : 0, out, hit,
					      &fault_hop);
			}
		}
	}
	if (rc == 0) {
		for (int j = split; j < c->npath; j++) {
			struct fst_link *s = link_state(v->shm, c->path[j]);
			s->busy_until = busy[j];
			s->loss = loss[j];
		}
		if (faults)
			fst_count_triggers(v, c, mine, in->first_ns, bytes);
	}
	fst_unlock(v->shm);
	if (rc)
		return rc;
	if (out->failed && hit->fault >= 0) /* fst_reserve's rule */
		out->fail_hop = fault_hop >= 0 ? fault_hop : -1;
	c->msgs++;
	for (int j = split; j < c->npath; j++) {
		uint64_t q = before[j] > in->first_ns ? (uint64_t)(before[j] - in->first_ns) : 0;
		count_queue(link_state(v->shm, c->path[j]), bytes, out->packets, q);
	}
	/* what goes back: the replay's commits on the sender's hops ... */
	back->host_busy = host_busy;
	for (int j = 0; j < split; j++) {
		back->busy[j] = busy[j];
		back->loss[j] = loss[j];
		back->expect[j] = front->loss[j].packets + (markov(p.hop[j]) ? tr.packets : 0);
	}
	/* ... and the impairments, counted where fst_reserve counts them: the first hop (the
	 * sender's, less the first attempt's duplicates of its hops, which it counted at the
	 * post), or the hop whose loss failed it. This host counts them when that hop is one of
	 * its own, and for a failed message whatever the hop: its sender may never take the ACK
	 * that would carry them (it fails too, and ends), and a run's counters are every host's
	 * summed, so the link's totals are the same either way. */
	struct model_msg cnt = *out;
	cnt.corrupted = 0; /* the receiver counts what it flips (xmodel) */
	uint64_t x[MODEL_MAX_HOPS];
	uint32_t d0 = model_duplicate_bytes(&p, &key, bytes, x, 0, split);
	cnt.duplicates = cnt.duplicates > d0 ? cnt.duplicates - d0 : 0;
	int hop = out->failed && out->fail_hop >= 0 ? out->fail_hop : 0;
	if (hop >= split || out->failed) {
		count_impairments(v->shm, c->path[hop], &cnt);
		memset(&back->counts, 0, sizeof(back->counts));
		back->counts.fail_hop = -1;
	} else {
		back->counts = cnt;
	}
	return 0;
}

int fst_commit_back(struct fst_view *v, struct fst_conn *c, int split, const struct fst_back *b)
{
	if (!v || !c || !b || c->npath < 1 || c->npath > MODEL_MAX_HOPS || split < 1 ||
	    split > c->npath || c->src_nic >= v->nnics ||
	    (b->counts.fail_hop >= split && b->counts.fail_hop != -1) || b->counts.fail_hop < -1)
		return -EINVAL;
	for (int j = 0; j < split; j++)
		if (c->path[j] >= v->nlinks)
			return -EINVAL;
	struct fst_nic *nic = (struct fst_nic *)((uint8_t *)v->shm + v->shm->nics_off) + c->src_nic;
	int rc = fst_lock(v->shm);
	if (rc)
		return rc;
	if (c->nic.host_rate_bps && b->host_busy > nic->host_busy)
		nic->host_busy = b->host_busy;
	for (int j = 0; j < split; j++) {
		struct fst_link *s = link_state(v->shm, c->path[j]);
		if (b->busy[j] > s->busy_until)
			s->busy_until = b->busy[j];
		if (s->loss.packets == b->expect[j]) /* no other message crossed it since */
			s->loss = b->loss[j];
	}
	fst_unlock(v->shm);
	int hop = b->counts.failed && b->counts.fail_hop >= 0 ? b->counts.fail_hop : 0;
	count_impairments(v->shm, c->path[hop], &b->counts);
	return 0;
}

void fst_record_lateness(struct fst_shm *shm, uint32_t link, int64_t late_ns, int early)
{
	if (!shm || link >= shm->nlinks)
		return;
	struct fst_link *s = link_state(shm, link);
	if (early || late_ns < 0) {
		atomic_fetch_add_explicit(&s->early, 1, memory_order_relaxed);
		return;
	}
	uint64_t l = (uint64_t)late_ns;
	atomic_fetch_add_explicit(&s->late_n, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->late_sum_ns, l, memory_order_relaxed);
	atomic_max(&s->late_max_ns, l);
	atomic_fetch_add_explicit(&s->late_hist[fst_bucket(l, FST_LATE_BUCKETS)], 1,
				  memory_order_relaxed);
}

void fst_count_corrupted(struct fst_shm *shm, uint32_t link, uint64_t n)
{
	if (shm && link < shm->nlinks)
		atomic_fetch_add_explicit(&link_state(shm, link)->corrupted, n,
					  memory_order_relaxed);
}

void fst_record_xlateness(struct fst_shm *shm, uint32_t link, int64_t late_ns, uint32_t from_host)
{
	if (!shm || link >= shm->nlinks || late_ns < 0)
		return;
	fst_record_lateness(shm, link, late_ns, 0);
	struct fst_link *s = link_state(shm, link);
	atomic_fetch_add_explicit(&s->xlate_n, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->xlate_sum_ns, (uint64_t)late_ns, memory_order_relaxed);
	struct fst_xhost *x = (struct fst_xhost *)fst_xhost(shm, from_host);
	if (!x)
		return;
	atomic_fetch_add_explicit(&x->n, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&x->late_sum_ns, (uint64_t)late_ns, memory_order_relaxed);
	atomic_max(&x->late_max_ns, (uint64_t)late_ns);
}

const struct fst_xhost *fst_xhost(const struct fst_shm *shm, uint32_t h)
{
	if (!shm || h >= FST_MAX_HOSTS)
		return NULL;
	return (const struct fst_xhost *)((const uint8_t *)shm + shm->xhosts_off) + h;
}

int fst_bucket(uint64_t v, int nbuckets)
{
	int b = 0;
	while (v && b < nbuckets - 1) {
		v >>= 1;
		b++;
	}
	return b;
}

uint64_t fst_hist_le(const uint64_t *h, int nbuckets, uint64_t n, unsigned pct, uint64_t max)
{
	uint64_t seen = 0;
	for (int b = 0; b < nbuckets && n; b++) {
		seen += h[b];
		if (seen * 100 >= n * pct) {
			uint64_t top = b ? 1ull << b : 0;
			return b == nbuckets - 1 && max > top ? max : top;
		}
	}
	return 0;
}

uint32_t fst_crossed(const struct fst_shm *shm, int64_t now_ns, uint64_t *bytes)
{
	const struct model_link *params =
		(const struct model_link *)((const uint8_t *)shm + shm->params_off);
	const struct fst_link *state = (const struct fst_link *)((const uint8_t *)shm + shm->state_off);
	uint32_t backlogged = 0;
	for (uint32_t i = 0; i < shm->nlinks; i++) {
		const struct model_link *p = &params[i];
		/* The counter first: a reservation in between then only makes the backlog larger. */
		uint64_t b = atomic_load_explicit(&state[i].bytes, memory_order_relaxed);
		int64_t busy = __atomic_load_n(&state[i].busy_until, __ATOMIC_RELAXED);
		bytes[i] = b;
		if (!p->rate_bps || busy <= now_ns || !b)
			continue; /* unlimited, idle, or never used */
		backlogged++;
		/* wire bytes first, then their payload share: no step overflows 128 bits */
		u128 wire = (u128)(uint64_t)(busy - now_ns) * p->rate_bps / NS_BITS;
		u128 payload = wire * p->mtu / ((u128)p->mtu + p->hdr_bytes);
		bytes[i] = payload >= b ? 0 : b - (uint64_t)payload;
	}
	return backlogged;
}

int64_t fst_floor_ns(const struct fst_view *v, const uint32_t *path, int npath,
		     const struct model_nic *nic, enum model_switching sw, uint64_t bytes)
{
	struct model_link tmp[MODEL_MAX_HOPS];
	struct model_path p = {.nhops = npath, .switching = sw};
	if (npath < 1 || npath > MODEL_MAX_HOPS || bytes > MODEL_MAX_BYTES)
		return 0;
	for (int j = 0; j < npath; j++) {
		if (path[j] >= v->nlinks)
			return 0;
		tmp[j] = v->links[path[j]];
		p.link_id[j] = path[j];
		p.hop[j] = &tmp[j];
	}
	/* A degrade replaces a hop's rate, maybe with a faster one; latency it only adds. */
	uint32_t n = atomic_load_explicit(&v->shm->nfaults, memory_order_acquire);
	for (uint32_t id = 0; id < n; id++) {
		const struct fst_fault *ff = fst_fault(v->shm, id);
		if (!ff || ff->spec.action != FAULT_A_DEGRADE || !(ff->spec.set & FAULT_SET_RATE))
			continue;
		uint64_t r = ff->spec.rate_bps;
		for (uint32_t i = 0; i < ff->spec.nlinks; i++)
			for (int j = 0; j < npath; j++)
				if (ff->spec.link[i] == path[j] && tmp[j].rate_bps &&
				    (!r || r > tmp[j].rate_bps))
					tmp[j].rate_bps = r;
	}
	return model_ideal_ns(&p, nic, bytes);
}
