/* SPDX-License-Identifier: MIT */
/* faultd.c - the daemon's side of faults. See faultd.h. */
#include "sim/faultd.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/core/chan.h"
#include "sim/core/jsonw.h"
#include "sim/log.h"

struct fstate_d {
	uint64_t next_win;  /* the next window whose start is to be logged */
	uint64_t open_win;  /* a window whose end is to be logged, +1 (0: none) */
	int64_t open_end;   /* its end */
	uint64_t windows;   /* windows begun so far */
	int64_t first_open; /* the first window's start (0: none yet) */
	int missed_said;    /* the "it hit nothing" warning is logged */
	int64_t logged_origin;
	int64_t open_start;  /* the open window's start (a straggle's cycle counts from it) */
	int acting;	     /* the open window's action is in force (begun, not ended) */
	int slow_stopped;    /* straggle: the node is stopped now */
	int64_t slow_next;   /* straggle: the next edge of its cycle */
	int64_t slow_since;  /* straggle: when it was stopped */
};

/* --trace's record of one window. */
struct ftr_win {
	uint32_t id;
	uint32_t open; /* its end is not known yet */
	uint64_t i;
	int64_t a, b;
};

struct faultd {
	struct fst_shm *shm;
	const struct fabric *f;
	struct faultd_ops ops;
	struct fstate_d st[FAULT_MAX];
	struct ftr_win *tw; /* --trace: the windows so far (NULL: not tracing) */
	size_t ntw, captw;
	uint64_t tw_dropped;
	int tw_dirty;
	int64_t tw_written_ns;
	int64_t last_tick_ns; /* the last faultd_tick */
	int nnodes;
	int *stops; /* per node: freezes on and straggles in their stopped phase (SIGSTOP at 0 -> 1,
		       SIGCONT at 1 -> 0, so overlapping faults on a node never continue it early) */
};

static void ftr_begin(struct faultd *d, uint32_t id, uint64_t i, int64_t a, int64_t b);
static void ftr_end(struct faultd *d, uint32_t id, uint64_t i, int64_t e);
static void ftr_write(struct faultd *d, int64_t now, int force);
static char ftr_path[4096]; /* --trace FILE ("": off) */
#define FTR_MAX_WINDOWS 100000

static int64_t vt(const struct faultd *d, int64_t t)
{
	return t - d->shm->epoch_ns;
}

const char *faultd_link_name(const struct fabric *f, uint32_t link, char *buf, size_t cap)
{
	const struct fabric_link *l = fabric_link(f, link);
	char a[FABRIC_NIC_NAME_MAX + 1] = "?", b[FABRIC_NIC_NAME_MAX + 1] = "?";
	for (int k = 0; l && k < 2; k++) {
		const struct fabric_ep *e = k ? &l->to : &l->from;
		char *o = k ? b : a;
		if (e->kind == FABRIC_EP_SWITCH) {
			const struct fabric_switch *sw = fabric_switch(f, e->id);
			snprintf(o, sizeof(a), "%s", sw ? sw->name : "?");
		} else {
			const struct fabric_node *n = fabric_node(f, e->id);
			const struct fabric_nic *c = n ? fabric_nic(n, e->nic) : NULL;
			snprintf(o, sizeof(a), "%s", c ? c->name : "?");
		}
	}
	snprintf(buf, cap, "link %u (%s -> %s)", link, a, b);
	return buf;
}

static const char *node_name(const struct fabric *f, int id)
{
	const struct fabric_node *n = id >= 0 ? fabric_node(f, id) : NULL;
	return n ? n->name : "any";
}

/* "link_down on link 3 (a -> b) and 1 more", "reset on node0 -> node1" */
static void scope_text(const struct faultd *d, const struct fault_spec *f, char *buf, size_t cap)
{
	char l[160];
	if (f->nlinks) {
		faultd_link_name(d->f, f->link[0], l, sizeof(l));
		if (f->nlinks > 1)
			snprintf(buf, cap, "%s on %s and %u more", fault_kind_names[f->kind], l,
				 f->nlinks - 1);
		else
			snprintf(buf, cap, "%s on %s", fault_kind_names[f->kind], l);
	} else if (f->conn_scope) {
		snprintf(buf, cap, "%s on connections %s -> %s", fault_kind_names[f->kind],
			 node_name(d->f, f->src_node), node_name(d->f, f->dst_node));
	} else {
		snprintf(buf, cap, "%s of node %s", fault_kind_names[f->kind], node_name(d->f, f->node));
	}
}

int faultd_check(const struct faultd *d, const struct fault_spec *spec, char *err, size_t errlen)
{
	char why[256];
	if (fault_spec_check(spec, why, sizeof(why))) {
		snprintf(err, errlen, "fault '%s': %s", spec->name, why);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < spec->nlinks; i++)
		if (spec->link[i] >= d->shm->nlinks) {
			snprintf(err, errlen, "fault '%s': link: %u is not a link of this fabric",
				 spec->name, spec->link[i]);
			return -EINVAL;
		}
	return 0;
}

static int publish(struct faultd *d, const struct fault_spec *spec, int64_t origin, uint32_t *id,
		   char *err, size_t errlen)
{
	int rc = faultd_check(d, spec, err, errlen);
	if (rc)
		return rc;
	rc = fst_fault_add(d->shm, spec, origin, id);
	if (rc) {
		snprintf(err, errlen, "fault '%s': the fabric has had %d faults, its limit", spec->name,
			 FAULT_MAX);
		return rc;
	}
	memset(&d->st[*id], 0, sizeof(d->st[*id]));
	char sc[256], t1[32], t2[32], t3[32];
	scope_text(d, spec, sc, sizeof(sc));
	log_info("fault #%u '%s': %s, %s%s%s, for %s%s%s", *id, spec->name, sc,
		 spec->trigger == FAULT_T_TIME ? "at " : "after a trigger, +",
		 fault_fmt_ns(spec->trigger == FAULT_T_TIME && origin ? vt(d, origin) + spec->start_ns
								     : spec->start_ns,
			      t1, sizeof(t1)),
		 spec->trigger == FAULT_T_TIME ? " (fabric time)" : "",
		 fault_fmt_ns(spec->duration_ns, t2, sizeof(t2)),
		 spec->period_ns ? ", every " : "",
		 spec->period_ns ? fault_fmt_ns(spec->period_ns, t3, sizeof(t3)) : "");
	return 0;
}

int faultd_new(struct fst_shm *shm, const struct fabric *f, const struct fault_plan *plan,
	       const struct faultd_ops *ops, struct faultd **out, char *err, size_t errlen)
{
	*out = NULL;
	struct faultd *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->shm = shm;
	d->f = f;
	if (ops)
		d->ops = *ops;
	d->nnodes = fabric_nnodes(f);
	d->stops = calloc(d->nnodes > 0 ? (size_t)d->nnodes : 1, sizeof(*d->stops));
	if (!d->stops) {
		free(d);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (ftr_path[0]) {
		d->captw = 256;
		d->tw = calloc(d->captw, sizeof(*d->tw));
		if (!d->tw)
			log_warn("--trace %s: out of memory; no trace of the fault windows", ftr_path);
	}
	for (int i = 0; plan && i < plan->n; i++) {
		uint32_t id;
		const struct fault_spec *sp = &plan->f[i];
		int rc = publish(d, sp, sp->trigger == FAULT_T_TIME ? shm->epoch_ns : 0, &id, err,
				 errlen);
		if (rc) {
			free(d->stops);
			free(d);
			return rc;
		}
	}
	*out = d;
	return 0;
}

void faultd_free(struct faultd *d)
{
	if (d && d->tw) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ftr_write(d, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, 1);
		free(d->tw);
	}
	if (d)
		free(d->stops);
	free(d);
}

int faultd_apply(struct faultd *d, const struct fault_spec *spec, int64_t now, uint32_t *id,
		 char *err, size_t errlen)
{
	return publish(d, spec, spec->trigger == FAULT_T_TIME ? now : 0, id, err, errlen);
}

int faultd_clear(struct faultd *d, int64_t id, int64_t at, int *n, char *err, size_t errlen)
{
	*n = 0;
	uint32_t total = atomic_load(&d->shm->nfaults);
	if (id >= 0 && (uint64_t)id >= total) {
		snprintf(err, errlen, "id: no fault #%lld (there are %u)", (long long)id, total);
		return -ENOENT;
	}
	for (uint32_t i = 0; i < total; i++) {
		if (id >= 0 && i != (uint64_t)id)
			continue;
		struct fst_fault *ff = fst_fault(d->shm, i);
		if (!ff)
			continue;
		int64_t u = atomic_load(&ff->until);
		if (u <= at)
			continue;
		atomic_store(&ff->until, at);
		(*n)++;
		char t[32];
		log_info("fault #%u '%s': cleared at %s (fabric time)", i, ff->spec.name,
			 fault_fmt_ns(vt(d, at), t, sizeof(t)));
	}
	return 0;
}

int faultd_fire(struct faultd *d, uint32_t id, int64_t origin, int *set, int64_t *had, char *err,
		size_t errlen)
{
	*set = 0;
	*had = 0;
	uint32_t total = atomic_load(&d->shm->nfaults);
	struct fst_fault *ff = id < total ? fst_fault(d->shm, id) : NULL;
	if (!ff) {
		snprintf(err, errlen, "id: no fault #%u (there are %u)", id, total);
		return -ENOENT;
	}
	if (ff->spec.trigger == FAULT_T_TIME) {
		snprintf(err, errlen, "fault #%u '%s' runs on the clock: it has no trigger to fire", id,
			 ff->spec.name);
		return -EINVAL;
	}
	if (origin <= 0) {
		snprintf(err, errlen, "origin_ns: before the fabric's start");
		return -EINVAL;
	}
	int64_t zero = 0;
	if (atomic_compare_exchange_strong(&ff->origin, &zero, origin)) {
		*set = 1;
		char t[32];
		log_info("fault #%u '%s': its trigger fired on another host at %s (fabric time)", id,
			 ff->spec.name, fault_fmt_ns(vt(d, origin), t, sizeof(t)));
	} else {
		*had = zero;
	}
	return 0;
}

static int log_this(uint64_t i)
{
	return i < FAULTD_LOG_WINDOWS || (i & (i - 1)) == 0;
}

/* After window end e: when it was the fault's last and nothing was hit, one warning. */
static void warn_if_missed(struct faultd *d, uint32_t id, struct fst_fault *ff, int64_t origin,
			   int64_t until, int64_t e)
{
	struct fstate_d *st = &d->st[id];
	char line[512];
	int64_t a, b;
	if (st->missed_said || !st->first_open ||
	    fault_window_nth(&ff->spec, origin, until, st->next_win, &a, &b))
		return;
	st->missed_said = 1;
	if (fault_missed_text(&ff->spec, id, atomic_load(&ff->hit), atomic_load(&ff->delayed),
			      atomic_load(&ff->failed), vt(d, st->first_open), vt(d, e), line,
			      sizeof(line)))
		log_warn("%s", line);
}

/* ---- the actions the daemon carries out at a window's edges ---------------------------------- */

static void fault_why(const struct faultd *d, uint32_t id, const struct fault_spec *f, char *buf,
		      size_t cap)
{
	if (f->conn_scope)
		snprintf(buf, cap, "fault #%u '%s' (%s of %s -> %s)", id, f->name,
			 fault_kind_names[f->kind], node_name(d->f, f->src_node),
			 node_name(d->f, f->dst_node));
	else
		snprintf(buf, cap, "fault #%u '%s' (%s of %s)", id, f->name, fault_kind_names[f->kind],
			 node_name(d->f, f->node));
}

static int64_t slow_stop_ns(const struct fault_spec *f)
{
	return (int64_t)(((unsigned __int128)f->slow_period_ns * f->frac) >> 32);
}

static void begin_kill(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	if (d->ops.signal)
		atomic_fetch_add(&ff->hit, (uint64_t)d->ops.signal(d->ops.ctx, ff->spec.node, SIGKILL,
								   0, why));
	d->st[id].acting = 0; /* nothing to undo */
}

static void begin_reset(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	/* a queue pair in error flushes what is posted on both ends, idle or not */
	const struct fault_spec *f = &ff->spec;
	if (d->ops.reset)
		atomic_fetch_add(&ff->failed, (uint64_t)d->ops.reset(d->ops.ctx, f->src_node,
								     f->dst_node, id, why));
	d->st[id].acting = 0;
}

/* One more (stop) or one fewer (!stop) reason for node to be stopped: SIGSTOP on the first,
 * SIGCONT on the last; in between only counts its processes (signal 0). Returns that count. */
static int node_hold(struct faultd *d, int node, int stop, int quiet, const char *why)
{
	if (node < 0 || node >= d->nnodes || !d->ops.signal)
		return 0;
	int *n = &d->stops[node];
	int edge = stop ? (*n)++ == 0 : *n > 0 && --*n == 0;
	return d->ops.signal(d->ops.ctx, node, edge ? (stop ? SIGSTOP : SIGCONT) : 0,
			     edge ? quiet : 1, why);
}

/* node_freeze: the processes stop; a send into a receive they had posted still completes. */
static void begin_freeze(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	(void)id;
	int node = ff->spec.node;
	if (d->ops.hold)
		d->ops.hold(d->ops.ctx, FAULT_ANY, node, CHAN_HOLD_RX_FROZEN, 1, why);
	atomic_fetch_add(&ff->hit, (uint64_t)node_hold(d, node, 1, 0, why));
}

static void end_freeze(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	int node = ff->spec.node;
	node_hold(d, node, 0, 0, why);
	/* another freeze of this node still on keeps its receives held */
	uint32_t n = atomic_load(&d->shm->nfaults);
	for (uint32_t k = 0; k < n; k++) {
		struct fst_fault *o = fst_fault(d->shm, k);
		if (k != id && o && o->spec.action == FAULT_A_FREEZE && o->spec.node == node &&
		    d->st[k].acting)
			return;
	}
	if (d->ops.hold)
		d->ops.hold(d->ops.ctx, FAULT_ANY, node, CHAN_HOLD_RX_FROZEN, 0, why);
}

static void begin_slow(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	const struct fault_spec *f = &ff->spec;
	char t1[32], t2[32];
	log_warn("%s: mechanism: duty-cycled SIGSTOP/SIGCONT of the node's processes, stopped %s "
		 "of every %s (%.3g%%); cgroup CPU quotas are not used (they need a delegated cgroup "
		 "per node)",
		 why, fault_fmt_ns(slow_stop_ns(f), t1, sizeof(t1)),
		 fault_fmt_ns(f->slow_period_ns, t2, sizeof(t2)), 100.0 * model_prob_value(f->frac));
	struct fstate_d *st = &d->st[id];
	st->slow_stopped = 0;
	if (d->ops.signal)
		atomic_fetch_add(&ff->hit, (uint64_t)d->ops.signal(d->ops.ctx, f->node, 0, 1, why));
}

static void end_slow(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	struct fstate_d *st = &d->st[id];
	if (st->slow_stopped)
		node_hold(d, ff->spec.node, 0, 0, why);
	st->slow_stopped = 0;
}

static void begin_hang(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	(void)id;
	const struct fault_spec *f = &ff->spec;
	if (d->ops.hold)
		atomic_fetch_add(&ff->hit, (uint64_t)d->ops.hold(d->ops.ctx, f->src_node, f->dst_node,
								 CHAN_HOLD_HANG, 1, why));
}

static void end_hang(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why)
{
	(void)id;
	if (d->ops.hold)
		d->ops.hold(d->ops.ctx, ff->spec.src_node, ff->spec.dst_node, CHAN_HOLD_HANG, 0, why);
}

typedef void (*act_fn)(struct faultd *d, uint32_t id, struct fst_fault *ff, const char *why);
/* The daemon's actions, by enum fault_action: what a window's start and end do. The others are
 * the data path's (sim/core/fstate.c) or the plugin's (CALLFAIL), or connects' (faultd_connect). */
static const struct {
	act_fn begin, end;
} acts[] = {
	[FAULT_A_KILL] = {begin_kill, NULL},	      [FAULT_A_RESET] = {begin_reset, NULL},
	[FAULT_A_FREEZE] = {begin_freeze, end_freeze}, [FAULT_A_STRAGGLE] = {begin_slow, end_slow},
	[FAULT_A_HANG] = {begin_hang, end_hang},      [FAULT_A_CALLFAIL] = {NULL, NULL},
};

_Static_assert(sizeof(acts) / sizeof(acts[0]) == FAULT_A_HANG + 1, "a row for every action");

static void act_begin(struct faultd *d, uint32_t id, struct fst_fault *ff, int64_t a, int64_t now)
{
	char why[320];
	struct fstate_d *st = &d->st[id];
	if (!acts[ff->spec.action].begin)
		return;
	fault_why(d, id, &ff->spec, why, sizeof(why));
	st->acting = 1;
	st->open_start = a;
	st->slow_next = now;
	acts[ff->spec.action].begin(d, id, ff, why);
}

static void act_end(struct faultd *d, uint32_t id, struct fst_fault *ff, int64_t e)
{
	char why[320], t[32];
	struct fstate_d *st = &d->st[id];
	if (!st->acting)
		return;
	st->acting = 0;
	if (!acts[ff->spec.action].end)
		return;
	fault_why(d, id, &ff->spec, why, sizeof(why));
	snprintf(why + strlen(why), sizeof(why) - strlen(why), ", window ended at %s",
		 fault_fmt_ns(vt(d, e), t, sizeof(t)));
	acts[ff->spec.action].end(d, id, ff, why);
}

/* straggle: stopped for the first stop_ns of each period from the window's start. */
static void slow_cycle(struct faultd *d, uint32_t id, struct fst_fault *ff, int64_t now)
{
	struct fstate_d *st = &d->st[id];
	const struct fault_spec *f = &ff->spec;
	if (now < st->slow_next)
		return;
	int64_t per = f->slow_period_ns, stop = slow_stop_ns(f);
	int64_t ph = (now - st->open_start) % per;
	int want = ph < stop;
	if (want != st->slow_stopped) {
		char why[320];
		fault_why(d, id, f, why, sizeof(why));
		node_hold(d, f->node, want, 1, why);
		if (want) {
			st->slow_since = now;
			atomic_fetch_add(&ff->delayed, 1);
		} else if (st->slow_since) {
			atomic_fetch_add(&ff->delay_ns, (uint64_t)(now - st->slow_since));
		}
		st->slow_stopped = want;
	}
	st->slow_next = now - ph + (want ? stop : per);
}

void faultd_release(struct faultd *d)
{
	if (!d)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	uint32_t n = atomic_load(&d->shm->nfaults);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(d->shm, id);
		if (ff && d->st[id].acting) {
			log_warn("fault #%u '%s': the daemon is stopping: its window ends now", id,
				 ff->spec.name);
			act_end(d, id, ff, now);
		}
	}
}

int faultd_node_joined(struct faultd *d, int node)
{
	if (!d || node < 0 || node >= d->nnodes || d->stops[node] <= 0)
		return 0;
	uint32_t n = atomic_load(&d->shm->nfaults);
	for (uint32_t k = 0; k < n; k++) {
		struct fst_fault *ff = fst_fault(d->shm, k);
		if (ff && ff->spec.action == FAULT_A_FREEZE && ff->spec.node == node && d->st[k].acting)
			atomic_fetch_add(&ff->hit, 1);
	}
	return 1;
}

uint32_t faultd_hold_bits(struct faultd *d, int src, int dst)
{
	uint32_t bits = 0, n = d ? atomic_load(&d->shm->nfaults) : 0;
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(d->shm, id);
		if (!ff || !d->st[id].acting)
			continue;
		const struct fault_spec *f = &ff->spec;
		if (f->action == FAULT_A_HANG && fault_conn_match(f->src_node, f->dst_node, src, dst)) {
			bits |= CHAN_HOLD_HANG;
			atomic_fetch_add(&ff->hit, 1);
		}
		if (f->action == FAULT_A_FREEZE && f->node == dst)
			bits |= CHAN_HOLD_RX_FROZEN;
	}
	return bits;
}

static void tick_one(struct faultd *d, uint32_t id, struct fst_fault *ff, int64_t now)
{
	const struct fault_spec *f = &ff->spec;
	struct fstate_d *st = &d->st[id];
	int64_t origin = atomic_load(&ff->origin), until = atomic_load(&ff->until);
	char w[LOG_WALL_MAX], t1[32], t2[32], sc[256];
	if (!origin)
		return;
	if (!st->logged_origin) {
		st->logged_origin = origin;
		if (f->trigger != FAULT_T_TIME) {
			log_wall_time(w, sizeof(w));
			log_warn("fault #%u '%s': triggered at %s (fabric time; wall %s): %s", id,
				 f->name, fault_fmt_ns(vt(d, origin), t1, sizeof(t1)), w,
				 f->trigger == FAULT_T_FIRST_TRAFFIC ? "first traffic on its link"
				 : f->trigger == FAULT_T_MESSAGES    ? "message count reached"
								     : "byte count reached");
		}
	}
	scope_text(d, f, sc, sizeof(sc));
	/* a window still open: its end */
	if (st->open_win && (st->open_end <= now || until < st->open_end)) {
		int64_t e = st->open_end < until ? st->open_end : until;
		if (e <= now) {
			uint64_t i = st->open_win - 1;
			if (log_this(i)) {
				log_wall_time(w, sizeof(w));
				log_warn("fault #%u '%s': %s: window %llu ends at %s (fabric time; wall "
					 "%s)",
					 id, f->name, sc, (unsigned long long)i,
					 fault_fmt_ns(vt(d, e), t1, sizeof(t1)), w);
			}
			st->open_win = 0;
			act_end(d, id, ff, e);
			ftr_end(d, id, i, e);
			warn_if_missed(d, id, ff, origin, until, e);
		}
	}
	for (int guard = 0; guard < 100000; guard++) {
		int64_t a, b;
		if (!fault_window_nth(f, origin, until, st->next_win, &a, &b) || a > now)
			break;
		uint64_t i = st->next_win++;
		if (!fault_window_taken(f, d->shm->seed, id, i))
			continue;
		st->windows++;
		if (!st->first_open)
			st->first_open = a;
		ftr_begin(d, id, i, a, b);
		if (log_this(i)) {
			log_wall_time(w, sizeof(w));
			log_warn("fault #%u '%s': %s: window %llu begins at %s (fabric time; wall %s)%s%s",
				 id, f->name, sc, (unsigned long long)i,
				 fault_fmt_ns(vt(d, a), t1, sizeof(t1)), w,
				 b == FAULT_FOREVER ? ", no end" : ", until ",
				 b == FAULT_FOREVER ? "" : fault_fmt_ns(vt(d, b), t2, sizeof(t2)));
		}
		act_begin(d, id, ff, a, now);
		if (b > now) {
			st->open_win = i + 1;
			st->open_end = b;
			st->open_start = a;
		} else {
			act_end(d, id, ff, b);
			if (log_this(i))
				log_warn("fault #%u '%s': %s: window %llu ends at %s (fabric time)", id,
					 f->name, sc, (unsigned long long)i,
					 fault_fmt_ns(vt(d, b), t1, sizeof(t1)));
			warn_if_missed(d, id, ff, origin, until, b);
		}
	}
	if (st->open_win && st->acting && f->action == FAULT_A_STRAGGLE)
		slow_cycle(d, id, ff, now); /* after a begin too: a period starts stopped */
}

void faultd_tick(struct faultd *d, int64_t now)
{
	if (!d)
		return;
	d->last_tick_ns = now;
	uint32_t n = atomic_load(&d->shm->nfaults);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(d->shm, id);
		if (ff)
			tick_one(d, id, ff, now);
	}
	ftr_write(d, now, 0);
}

int64_t faultd_next_ns(const struct faultd *d, int64_t now)
{
	if (!d)
		return 0;
	int64_t next = 0;
	uint32_t n = atomic_load(&d->shm->nfaults);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(d->shm, id);
		if (!ff)
			continue;
		const struct fstate_d *st = &d->st[id];
		int64_t origin = atomic_load(&ff->origin), until = atomic_load(&ff->until), t = 0;
		if (!origin || !st->logged_origin) {
			t = now + FAULTD_POLL_NS; /* an armed trigger: look again soon */
		} else {
			int64_t a, b;
			if (fault_window_nth(&ff->spec, origin, until, st->next_win, &a, &b))
				t = a;
			if (st->open_win && (!t || st->open_end < t))
				t = st->open_end;
			if (st->open_win && st->acting && ff->spec.action == FAULT_A_STRAGGLE &&
			    st->slow_next < t)
				t = st->slow_next;
			/* Only the actions in acts[] act at a window's edge; the data path evaluates the
			 * others' windows itself, so for them the daemon only counts and logs
			 * (each line says the fabric time it happened): at most every
			 * FAULTD_POLL_NS after the last tick, not at every edge of a 1 us period. */
			int64_t poll = d->last_tick_ns + FAULTD_POLL_NS;
			if (t && t < poll && !acts[ff->spec.action].begin)
				t = poll;
		}
		if (t && (!next || t < next))
			next = t;
	}
	return next;
}

int faultd_connect(struct faultd *d, int src, int dst, int64_t now, int64_t *until,
		   uint32_t *fid, char *why, size_t whylen)
{
	if (!d)
		return 0;
	uint32_t n = atomic_load(&d->shm->nfaults);
	int verdict = 0;
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(d->shm, id);
		if (!ff || (ff->spec.action != FAULT_A_REFUSE && ff->spec.action != FAULT_A_DELAY))
			continue;
		const struct fault_spec *f = &ff->spec;
		if (f->node != FAULT_ANY && f->node != src && f->node != dst)
			continue;
		int64_t a, b;
		if (fault_window(f, d->shm->seed, id, atomic_load(&ff->origin),
				 atomic_load(&ff->until), now, now, &a, &b) != 1 ||
		    a > now)
			continue;
		atomic_fetch_add(&ff->hit, 1);
		char t[32];
		*fid = id;
		if (f->action == FAULT_A_REFUSE) {
			atomic_fetch_add(&ff->failed, 1);
			snprintf(why, whylen, "refused by fault #%u '%s' (connect_refuse%s%s, window "
					      "until %s fabric time)",
				 id, f->name, f->node == FAULT_ANY ? "" : " of node ",
				 f->node == FAULT_ANY ? "" : node_name(d->f, f->node),
				 b == FAULT_FOREVER ? "forever" : fault_fmt_ns(vt(d, b), t, sizeof(t)));
			return -1;
		}
		atomic_fetch_add(&ff->delayed, 1);
		atomic_fetch_add(&ff->delay_ns, (uint64_t)f->delay_ns);
		if (!verdict || now + f->delay_ns > *until)
			*until = now + f->delay_ns;
		snprintf(why, whylen, "held for %s by fault #%u '%s' (connect_delay)",
			 fault_fmt_ns(f->delay_ns, t, sizeof(t)), id, f->name);
		verdict = 1;
	}
	return verdict;
}

uint32_t faultd_count(const struct faultd *d)
{
	return d ? atomic_load(&d->shm->nfaults) : 0;
}

int faultd_describe(const struct faultd *d, uint32_t id, int64_t now, char *buf, size_t cap)
{
	struct fst_fault *ff = fst_fault(d->shm, id);
	if (!ff)
		return -ENOENT;
	const struct fault_spec *f = &ff->spec;
	int64_t origin = atomic_load(&ff->origin), until = atomic_load(&ff->until), a, b;
	const char *state = "armed";
	if (origin) {
		if (fault_window(f, d->shm->seed, id, origin, until, now, now, &a, &b) == 1 && a <= now)
			state = "on";
		else if (until <= now ||
			 !fault_window_nth(f, origin, until, d->st[id].next_win, &a, &b))
			state = d->st[id].open_win ? "on" : "over";
		else
			state = "waiting";
	}
	char sc[256];
	scope_text(d, f, sc, sizeof(sc));
	for (char *c = sc; *c; c++)
		if (*c == ',')
			*c = ';';
	snprintf(buf, cap,
		 "name=%s,action=%s,scope=%s,state=%s,origin_ns=%lld,until_ns=%lld,windows=%llu,"
		 "hit=%llu,delayed=%llu,failed=%llu,delay_ns=%llu,line=%d",
		 f->name, fault_kind_names[f->kind], sc, state,
		 origin ? (long long)vt(d, origin) : -1LL,
		 until == FAULT_FOREVER ? -1LL : (long long)vt(d, until),
		 (unsigned long long)d->st[id].windows, (unsigned long long)atomic_load(&ff->hit),
		 (unsigned long long)atomic_load(&ff->delayed),
		 (unsigned long long)atomic_load(&ff->failed),
		 (unsigned long long)atomic_load(&ff->delay_ns), f->line);
	return 0;
}

/* ---- --trace FILE: the fault windows as Chrome trace JSON ------------------------------------ */

void faultd_trace_to(const char *path)
{
	char cwd[2048] = "";
	if (path && *path && *path != '/' && !getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	snprintf(ftr_path, sizeof(ftr_path), "%s%s%s", cwd, cwd[0] ? "/" : "", path ? path : "");
}

static void ftr_begin(struct faultd *d, uint32_t id, uint64_t i, int64_t a, int64_t b)
{
	if (!d->tw)
		return;
	if (d->ntw == d->captw) {
		struct ftr_win *n = d->captw < FTR_MAX_WINDOWS
					    ? realloc(d->tw, 2 * d->captw * sizeof(*d->tw))
					    : NULL;
		if (!n) {
			d->tw_dropped++;
			d->tw_dirty = 1;
			return;
		}
		d->tw = n;
		d->captw *= 2;
	}
	d->tw[d->ntw++] = (struct ftr_win){.id = id, .i = i, .a = a, .b = b, .open = 1};
	d->tw_dirty = 1;
}

static void ftr_end(struct faultd *d, uint32_t id, uint64_t i, int64_t e)
{
	for (size_t k = d->ntw; d->tw && k-- > 0;)
		if (d->tw[k].id == id && d->tw[k].i == i) {
			d->tw[k].b = e;
			d->tw[k].open = 0;
			d->tw_dirty = 1;
			return;
		}
}

static void ftr_us(FILE *f, int64_t ns)
{
	fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

/* A window's end as far as it is known at now (an open or endless one: now, or its clear). */
static int64_t ftr_until(const struct faultd *d, const struct ftr_win *w, int64_t now)
{
	int64_t b = w->b;
	struct fst_fault *ff = fst_fault(d->shm, w->id);
	int64_t until = ff ? atomic_load(&ff->until) : FAULT_FOREVER;
	if (b > until)
		b = until;
	if (b > now)
		b = now;
	return b < w->a ? w->a : b;
}

static void ftr_write(struct faultd *d, int64_t now, int force)
{
	if (!d || !d->tw || (!force && (!d->tw_dirty || now - d->tw_written_ns < 1000000000LL)))
		return;
	d->tw_dirty = 0;
	d->tw_written_ns = now;
	char tmp[sizeof(ftr_path) + 32];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", ftr_path, (int)getpid());
	FILE *f = jsonw_create(tmp); /* never through a link planted at the name */
	if (!f) {
		log_warn("--trace: cannot write %s: %s", tmp, strerror(errno));
		return;
	}
	int pid = (int)getpid();
	uint32_t n = atomic_load(&d->shm->nfaults);
	fprintf(f, "{\"metadata\":{\"simfabric_trace\":1,\"pid\":%d,\"node\":\"simfabricd\","
		   "\"clock\":\"CLOCK_MONOTONIC\",\"epoch_us\":",
		pid);
	ftr_us(f, d->shm->epoch_ns);
	fprintf(f, ",\"faults\":%u,\"windows\":%zu,\"messages\":0,\"dropped\":%llu},\n"
		   "\"displayTimeUnit\":\"ns\",\n\"traceEvents\":[\n",
		n, d->ntw, (unsigned long long)d->tw_dropped);
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":"
		   "{\"name\":\"simfabricd (faults)\"}},\n",
		pid);
	for (uint32_t id = 0; id < n; id++) {
		struct fst_fault *ff = fst_fault(d->shm, id);
		if (!ff)
			continue;
		char sc[256], name[FAULT_NAME_MAX + 300];
		scope_text(d, &ff->spec, sc, sizeof(sc));
		snprintf(name, sizeof(name), "fault #%u '%s': %s", id, ff->spec.name, sc);
		fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"name\":\"thread_name\",\"args\":"
			   "{\"name\":",
			pid, id + 1);
		jsonw_str(f, name);
		fputs("}},\n", f);
		int64_t origin = atomic_load(&ff->origin);
		if (origin && ff->spec.trigger != FAULT_T_TIME) {
			fprintf(f, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"fault\",\"pid\":%d,\"tid\":%u,"
				   "\"ts\":",
				pid, id + 1);
			ftr_us(f, origin);
			fprintf(f, ",\"name\":\"triggered\",\"args\":{\"fault_id\":%u}},\n", id);
		}
	}
	/* windows by start: within one fault they already are; across faults the merge sorts */
	for (size_t k = 0; k < d->ntw; k++) {
		const struct ftr_win *w = &d->tw[k];
		struct fst_fault *ff = fst_fault(d->shm, w->id);
		if (!ff)
			continue;
		int64_t b = ftr_until(d, w, now);
		int open = w->open && b == now;
		fprintf(f, "{\"ph\":\"X\",\"cat\":\"fault\",\"pid\":%d,\"tid\":%u,\"ts\":", pid,
			w->id + 1);
		ftr_us(f, w->a);
		fputs(",\"dur\":", f);
		ftr_us(f, b - w->a);
		fputs(",\"name\":", f);
		jsonw_str(f, ff->spec.name);
		fprintf(f, ",\"args\":{\"fault_id\":%u,\"window\":%llu,\"kind\":\"%s\","
			   "\"fabric_begin_ns\":%lld,\"fabric_end_ns\":%lld,\"open\":%s}},\n",
			w->id, (unsigned long long)w->i, fault_kind_names[ff->spec.kind],
			(long long)vt(d, w->a), (long long)vt(d, b), open ? "true" : "false");
	}
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_labels\",\"args\":"
		   "{\"labels\":\"simfabric\"}}\n]}\n",
		pid);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, ftr_path) != 0) {
		log_warn("--trace: writing %s failed: %s", ftr_path, strerror(errno));
		unlink(tmp);
	}
}
