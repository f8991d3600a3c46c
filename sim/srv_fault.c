/* SPDX-License-Identifier: MIT */
/*
 * srv_fault.c - faults on the server's objects: op=fault (live faults:
 * apply, clear, list) and what the fault daemon (sim/faultd.h) does through
 * its faultd_ops: signal a node's sessions, hold or reset its channels. A
 * leaf under the hub sim/srv.c: it calls only srv_look.c's paging.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/ctl.h"
#include "sim/core/fault.h"
#include "sim/core/fstate.h"
#include "sim/fabmon.h"
#include "sim/faultd.h"
#include "sim/log.h"
#include "sim/mpskill.h"
#include "sim/scn/scenario.h"
#include "sim/srv_int.h"

/*
 * Live faults (docs/control-protocol.md, op=fault):
 *   verb=apply spec=<a fault as one line of YAML flow syntax> [at_ns=<delay from now> |
 *     effective_ns=<fabric time>] [first_id=<n>: refused (ESTALE) unless its first fault gets
 *     id n, so that the hosts of a run keep one numbering; the same spec at the same time
 *     again at n is answered as the first time, not applied twice (a launch agent that did not
 *     hear the answer asks again)]
 *   verb=clear id=<n>|all [at_ns=<delay from now> | effective_ns=<fabric time>]
 *     [name=<fault n's name>: refused (EINVAL) when fault n here has another]
 *   verb=list [skip=<n>]: each fault's line (fault.<id>), and before the first fault of a
 *     live spec the spec (live.<id>) and its effective time (live_ns.<id>), which the launch
 *     agents apply on the run's other hosts at the same fabric time
 *   verb=fire id=<n> origin_ns=<fabric time> [name=<the fault's name>]: a trigger that fired
 *     on another host of the run (the first publication wins; docs/scale-out.md, section 5)
 * A new fault is checked against the fabric first (the scenario parser's
 * rules and messages), then published whole: a sender sees all of it or none
 * of it. Its at: counts from the effective time now + at_ns.
 */
typedef int fault_verb_fn(struct srv *s, const struct ctl_msg *req, struct ctl_msg *rep, char *err);

/* at_ns or effective_ns: the effective time (CLOCK_MONOTONIC ns; now without either). */
static int when(struct srv *s, const struct ctl_msg *req, int64_t *eff, char *err)
{
	uint64_t at = 0, abs_eff = 0;
	if (ctl_get(req, "at_ns") && get_u64(req, "at_ns", &at, err))
		return -EINVAL;
	if (ctl_get(req, "effective_ns") && get_u64(req, "effective_ns", &abs_eff, err))
		return -EINVAL;
	if (at > 1000000000000000ull || abs_eff > 1000000000000000ull) {
		snprintf(err, SRV_ERR_LEN, "%s: %llu is more than 1e15 ns",
			 at ? "at_ns" : "effective_ns", (unsigned long long)(at ? at : abs_eff));
		return -EINVAL;
	}
	if (ctl_get(req, "at_ns") && ctl_get(req, "effective_ns")) {
		snprintf(err, SRV_ERR_LEN,
			 "at_ns and effective_ns: one or the other (a delay from now, or a "
			 "fabric time)");
		return -EINVAL;
	}
	*eff = now_ns() + (int64_t)at;
	if (ctl_get(req, "effective_ns")) /* another host's time: the same windows here */
		*eff = fabmon_shm(s->mon)->epoch_ns + (int64_t)abs_eff;
	return 0;
}

static void reply_applied(struct ctl_msg *rep, uint32_t first, int n, int64_t eff_vt)
{
	for (int i = 0; i < n; i++) {
		char k[24];
		snprintf(k, sizeof(k), "id.%d", i);
		ctl_addf(rep, k, "%u", first + (uint32_t)i);
	}
	ctl_addf(rep, "faults", "%d", n);
	ctl_addf(rep, "effective_ns", "%lld", (long long)eff_vt);
}

static int verb_apply(struct srv *s, const struct ctl_msg *req, struct ctl_msg *rep, char *err)
{
	struct faultd *fd = fabmon_faults(s->mon);
	const char *spec = ctl_get(req, "spec");
	int64_t eff;
	if (!spec || !*spec) {
		snprintf(err, SRV_ERR_LEN,
			 "spec: missing (a fault in YAML flow syntax, like "
			 "{action: link_down, link: [node0, sw0], for: 5ms})");
		return -EINVAL;
	}
	int rc = when(s, req, &eff, err);
	if (rc)
		return rc;
	int64_t eff_vt = eff - fabmon_shm(s->mon)->epoch_ns;
	struct fault_plan *plan = NULL;
	char why[SCN_ERR_LEN];
	/* one fault, or a list of them */
	char buf[CTL_VALUE_MAX + 8];
	snprintf(buf, sizeof(buf), spec[0] == '[' ? "%s" : "[%s]", spec);
	rc = scn_load_faults(s->fabric, "spec", buf, strlen(buf), &plan, why, sizeof(why));
	if (rc) {
		snprintf(err, SRV_ERR_LEN, "%.*s", SRV_ERR_LEN - 1, why);
		return rc;
	}
	if (plan->n == 0) {
		snprintf(err, SRV_ERR_LEN, "spec: an empty list (no fault to apply)");
		rc = -EINVAL;
		goto out;
	}
	uint32_t next = faultd_count(fd);
	uint64_t want = next;
	if (ctl_get(req, "first_id") && get_u64(req, "first_id", &want, err)) {
		rc = -EINVAL;
		goto out;
	}
	if (want < next && s->live_spec[want] && !strcmp(s->live_spec[want], spec) &&
	    s->live_eff[want] == eff_vt) { /* asked again: the answer it did not hear */
		log_info("live fault #%llu: the same spec at the same time again: already applied",
			 (unsigned long long)want);
		reply_applied(rep, (uint32_t)want, plan->n, eff_vt);
		goto out;
	}
	if (want != next) {
		snprintf(err, SRV_ERR_LEN,
			 "first_id: this daemon's next fault is #%u, not #%llu: its faults "
			 "differ from the host's that applied it (a live fault sent to one "
			 "host alone?)",
			 next, (unsigned long long)want);
		rc = -ESTALE;
		goto out;
	}
	if (next >= FAULT_MAX || (int)next + plan->n > FAULT_MAX) {
		snprintf(err, SRV_ERR_LEN,
			 "the fabric has room for %d more fault(s); this "
			 "spec has %d",
			 FAULT_MAX - (int)next, plan->n);
		rc = -ENOSPC;
		goto out;
	}
	/* all of them checked before the first is applied: a list applies whole or not at all,
	 * so the ids of the run's hosts stay one numbering */
	for (int i = 0; i < plan->n; i++) {
		plan->f[i].line = 0;
		if ((rc = faultd_check(fd, &plan->f[i], err, SRV_ERR_LEN)))
			goto out;
	}
	for (int i = 0; i < plan->n; i++) {
		uint32_t id;
		if ((rc = faultd_apply(fd, &plan->f[i], eff, &id, err, SRV_ERR_LEN)))
			goto out; /* not after the checks (the room is checked above) */
	}
	reply_applied(rep, next, plan->n, eff_vt);
	/* for the run's other hosts: op=fault verb=list */
	free(s->live_spec[next]);
	s->live_spec[next] = strdup(spec);
	s->live_eff[next] = eff_vt;
	if (!s->live_spec[next])
		log_warn("live fault #%u: out of memory keeping its spec: the run's other hosts "
			 "will not be told of it",
			 next);
	faultd_tick(fd, now_ns());
out:
	fault_plan_free(plan);
	return rc;
}

static int verb_clear(struct srv *s, const struct ctl_msg *req, struct ctl_msg *rep, char *err)
{
	const char *ids = ctl_get(req, "id"), *name = ctl_get(req, "name");
	uint64_t id = 0;
	int64_t eff;
	if (!ids) {
		snprintf(err, SRV_ERR_LEN, "id: missing (a fault's id, or all)");
		return -EINVAL;
	}
	int all = !strcmp(ids, "all");
	if (!all && get_u64(req, "id", &id, err))
		return -EINVAL;
	if (!all && id > UINT32_MAX) { /* not -1, which faultd_clear takes for all */
		snprintf(err, SRV_ERR_LEN, "id: out of range");
		return -EINVAL;
	}
	if (name && all) {
		snprintf(err, SRV_ERR_LEN, "name: only with a fault's id, not id=all");
		return -EINVAL;
	}
	/* the name another host knows it by: clearing another fault would be worse than none */
	const struct fst_fault *ff = all ? NULL : fst_fault(fabmon_shm(s->mon), (uint32_t)id);
	if (name && ff && strcmp(name, ff->spec.name)) {
		char q[72];
		snprintf(err, SRV_ERR_LEN, "name: fault #%llu here is '%s', not '%s'",
			 (unsigned long long)id, ff->spec.name, clip(name, q));
		return -EINVAL;
	}
	int rc = when(s, req, &eff, err);
	if (rc)
		return rc;
	int n;
	rc = faultd_clear(fabmon_faults(s->mon), all ? -1 : (int64_t)id, eff, &n, err, SRV_ERR_LEN);
	if (rc)
		return rc;
	faultd_tick(fabmon_faults(s->mon),
		    now_ns()); /* a clear effective now ends its window now */
	ctl_addf(rep, "cleared", "%d", n);
	ctl_addf(rep, "effective_ns", "%lld", (long long)(eff - fabmon_shm(s->mon)->epoch_ns));
	return 0;
}

static int verb_list(struct srv *s, const struct ctl_msg *req, struct ctl_msg *rep, char *err)
{
	uint64_t skip = 0;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	const struct fst_shm *fs = fabmon_shm(s->mon);
	int64_t now = now_ns();
	uint32_t n = faultd_count(fabmon_faults(s->mon));
	ctl_addf(rep, "faults", "%u", n);
	ctl_addf(rep, "now_ns", "%lld", (long long)(now - fs->epoch_ns));
	ctl_addf(rep, "epoch_ns", "%lld", (long long)fs->epoch_ns);
	for (uint64_t i = skip; i < n; i++) {
		char k[24], v[CTL_VALUE_MAX + 1];
		if (faultd_describe(fabmon_faults(s->mon), (uint32_t)i, now, v, sizeof(v)))
			continue;
		/* a live spec's text and time with its first fault (a page may end between
		 * them: the next one says them again) */
		if (i < FAULT_MAX && s->live_spec[i]) {
			char t[24];
			snprintf(k, sizeof(k), "live_ns.%llu", (unsigned long long)i);
			snprintf(t, sizeof(t), "%lld", (long long)s->live_eff[i]);
			if (!srv_add_paged(rep, k, t, i))
				break;
			snprintf(k, sizeof(k), "live.%llu", (unsigned long long)i);
			if (!srv_add_paged(rep, k, s->live_spec[i], i))
				break;
		}
		snprintf(k, sizeof(k), "fault.%llu", (unsigned long long)i);
		if (!srv_add_paged(rep, k, v, i))
			break;
	}
	return 0;
}

static int verb_fire(struct srv *s, const struct ctl_msg *req, struct ctl_msg *rep, char *err)
{
	struct fst_shm *fs = fabmon_shm(s->mon);
	uint64_t id, origin;
	if (!ctl_get(req, "id") || !ctl_get(req, "origin_ns")) {
		snprintf(err, SRV_ERR_LEN, "%s: missing (verb=fire takes id and origin_ns)",
			 ctl_get(req, "id") ? "origin_ns" : "id");
		return -EINVAL;
	}
	if (get_u64(req, "id", &id, err) || get_u64(req, "origin_ns", &origin, err))
		return -EINVAL;
	if (origin == 0) {
		snprintf(err, SRV_ERR_LEN,
			 "origin_ns: 0 is the fabric's start; a trigger fires "
			 "after it");
		return -EINVAL;
	}
	if (id > UINT32_MAX || origin > (uint64_t)INT64_MAX / 2) {
		snprintf(err, SRV_ERR_LEN, "%s: out of range",
			 id > UINT32_MAX ? "id" : "origin_ns");
		return -EINVAL;
	}
	/* the publisher's name for it: a live fault applied to one daemon alone shifts
	 * that daemon's ids, and firing another fault would be worse than none */
	const char *name = ctl_get(req, "name");
	const struct fst_fault *ff = fst_fault(fs, (uint32_t)id);
	if (name && ff && strcmp(name, ff->spec.name)) {
		char q[72];
		snprintf(err, SRV_ERR_LEN, "name: fault #%llu here is '%s', not '%s'",
			 (unsigned long long)id, ff->spec.name, clip(name, q));
		return -EINVAL;
	}
	int set;
	int64_t had;
	int rc = faultd_fire(fabmon_faults(s->mon), (uint32_t)id, fs->epoch_ns + (int64_t)origin,
			     &set, &had, err, SRV_ERR_LEN);
	if (rc)
		return rc;
	faultd_tick(fabmon_faults(s->mon), now_ns());
	ctl_addf(rep, "fired", "%d", set);
	ctl_addf(rep, "origin_ns", "%lld",
		 (long long)((set ? fs->epoch_ns + (int64_t)origin : had) - fs->epoch_ns));
	return 0;
}

/* Each verb and the keys it takes besides op and verb (one table: the check below and the
 * refusals' words come from it). */
static const struct fault_verb {
	const char *name;
	fault_verb_fn *fn;
	const char *keys[5];
} fault_verbs[] = {
	{"apply", verb_apply, {"spec", "at_ns", "effective_ns", "first_id"}},
	{"clear", verb_clear, {"id", "at_ns", "effective_ns", "name"}},
	{"list", verb_list, {"skip"}},
	{"fire", verb_fire, {"id", "origin_ns", "name"}},
};
#define NVERBS (sizeof(fault_verbs) / sizeof(fault_verbs[0]))

static bool verb_takes(const struct fault_verb *v, const char *key)
{
	for (size_t i = 0; i < sizeof(v->keys) / sizeof(v->keys[0]) && v->keys[i]; i++)
		if (!strcmp(v->keys[i], key))
			return true;
	return false;
}

/* "<key>: only with verb=apply or clear" */
static void only_with(const char *key, char *err)
{
	size_t len = (size_t)snprintf(err, SRV_ERR_LEN, "%s: only with verb=", key);
	const char *sep = "";
	for (size_t i = 0; i < NVERBS && len < SRV_ERR_LEN; i++)
		if (verb_takes(&fault_verbs[i], key)) {
			len += (size_t)snprintf(err + len, SRV_ERR_LEN - len, "%s%s", sep,
						fault_verbs[i].name);
			sep = " or ";
		}
}

int srv_op_fault(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err)
{
	(void)c;
	const char *verb = ctl_get(req, "verb");
	if (!fabmon_faults(s->mon)) {
		snprintf(err, SRV_ERR_LEN,
			 "faults need an explicit fabric (a scenario with links); "
			 "this daemon runs the ideal fabric");
		return -EOPNOTSUPP;
	}
	const struct fault_verb *v = NULL;
	for (size_t i = 0; i < NVERBS; i++)
		if (!strcmp(fault_verbs[i].name, verb))
			v = &fault_verbs[i];
	if (!v) {
		char q[72];
		snprintf(err, SRV_ERR_LEN, "verb: '%s' is not apply, clear, list or fire",
			 clip(verb, q));
		return -EINVAL;
	}
	for (int i = 1; i < req->n; i++) { /* check_request knows op=fault's keys */
		const char *k = req->kv[i].key;
		if (strcmp(k, "verb") && !verb_takes(v, k)) {
			only_with(k, err);
			return -EINVAL;
		}
	}
	return v->fn(s, req, rep, err);
}

/* node_kill, node_freeze, straggle: signal every live session of node (its processes are
 * the ranks; sig 0 only counts them). */
int srv_signal_node(void *ctx, int node, int sig, int quiet, const char *why)
{
	struct srv *s = ctx;
	int n = 0;
	struct dl *p;
	for (p = s->sessions.next; p != &s->sessions; p = p->next) {
		struct session *se = dl_entry(p, struct session, link);
		if (!se->node || se->node->id != node)
			continue;
		/* Killed: an MPS client stays stopped for up to MPSKILL_BOUND_S before its SIGKILL,
		 * and a freeze's or a straggle's SIGCONT must not wake it to see MPS end its work */
		if (se->killed && sig != 0)
			continue;
		if (se->pid <= 0) { /* kill(0, ...) would signal the daemon's own process group */
			if (!quiet)
				log_warn("%s: cannot send SIG%s to the session of hello pid %d "
					 "(node %s): "
					 "this daemon cannot see its pid (another pid namespace)",
					 why, sig ? sigabbrev_np(sig) : "0", (int)se->said_pid,
					 se->node->name);
			continue;
		}
		char how[160] = "";
		int rc = sig == SIGKILL
			? mpskill(se->pid, how, sizeof(how)) /* MPS: see mpskill.h */
			: (kill(se->pid, sig) ? -errno : 0);
		if (rc >= 0) {
			se->killed = se->killed || sig == SIGKILL;
			if (!quiet)
				log_warn("%s: SIG%s pid %d (node %s)%s%s", why, sigabbrev_np(sig),
					 (int)se->pid, se->node->name, *how ? ": " : "", how);
			n++;
		} else {
			log_warn("%s: cannot send SIG%s to pid %d (node %s): %s", why,
				 sig ? sigabbrev_np(sig) : "0 (is it there?)", (int)se->pid,
				 se->node->name, strerror(-rc));
		}
	}
	if (!n && !quiet)
		log_warn("%s: no process of that node is connected to the daemon", why);
	return n;
}

/*
 * The open channels from node src to node dst (FAULT_ANY: any) that a fault acts on: reset
 * (fid: chan_mark_reset) when hold is 0, else hold or release (on) the CHAN_HOLD_* bits in hold.
 * One line each, but for the receive holds of a freeze. Returns how many.
 */
static int act_conns(struct srv *s, int src, int dst, uint32_t fid, uint32_t hold, int on,
		     const char *why)
{
	int n = 0;
	struct dl *p;
	for (p = s->chans.next; p != &s->chans; p = p->next) {
		struct channel *ch = dl_entry(p, struct channel, link);
		const struct fabric_node *a = ch->end[END_TX].node, *b = ch->end[END_RX].node;
		if (!ch->shm || !a || !b || !fault_conn_match(src, dst, a->id, b->id))
			continue;
		if (hold)
			chan_set_hold(ch->shm, hold, on);
		else
			chan_mark_reset(ch->shm, fid);
		if (!hold || (hold & CHAN_HOLD_HANG))
			log_warn("%s: chan 0x%llx (%s -> %s) %s", why, (unsigned long long)ch->id,
				 a->name, b->name,
				 !hold	      ? "reset"
					 : on ? "hangs"
					      : "released");
		n++;
	}
	return n;
}

/* node_freeze, comm_hang: hold (or release) the channels. */
int srv_hold_conns(void *ctx, int src, int dst, uint32_t bits, int on, const char *why)
{
	return bits ? act_conns(ctx, src, dst, 0, bits, on, why) : 0;
}

/* reset: the channels fail on both ends. */
int srv_reset_conns(void *ctx, int src, int dst, uint32_t fid, const char *why)
{
	return act_conns(ctx, src, dst, fid, 0, 0, why);
}
