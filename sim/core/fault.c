/* SPDX-License-Identifier: MIT */
/*
 * fault.c - the fault schedule and its effect on a message: pure functions.
 * See fault.h. The scenario syntax is parsed by sim/scn/faults.c; the data
 * path applies faults in sim/core/fstate.c, the daemon its own actions in srv.c.
 */
#include "sim/core/fault.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const fault_kind_names[FAULT_K_COUNT] = {
	"link_down",	"nic_down",	"flap",		"stall",	"degrade",
	"corrupt",	"reset",	"connect_refuse", "connect_delay", "node_kill",
	"node_freeze",	"straggle",	"regmr_fail",	"connect_fail", "accept_fail",
	"comm_hang",
};

/* Each kind's action: the one table (a new kind is a row here and a name above). */
static const uint8_t kind_action[FAULT_K_COUNT] = {
	[FAULT_K_LINK_DOWN] = FAULT_A_DOWN,	   [FAULT_K_NIC_DOWN] = FAULT_A_DOWN,
	[FAULT_K_FLAP] = FAULT_A_DOWN,		   [FAULT_K_STALL] = FAULT_A_STALL,
	[FAULT_K_DEGRADE] = FAULT_A_DEGRADE,	   [FAULT_K_CORRUPT] = FAULT_A_DEGRADE,
	[FAULT_K_RESET] = FAULT_A_RESET,	   [FAULT_K_CONNECT_REFUSE] = FAULT_A_REFUSE,
	[FAULT_K_CONNECT_DELAY] = FAULT_A_DELAY,   [FAULT_K_NODE_KILL] = FAULT_A_KILL,
	[FAULT_K_NODE_FREEZE] = FAULT_A_FREEZE,	   [FAULT_K_STRAGGLE] = FAULT_A_STRAGGLE,
	[FAULT_K_REGMR_FAIL] = FAULT_A_CALLFAIL,   [FAULT_K_CONNECT_FAIL] = FAULT_A_CALLFAIL,
	[FAULT_K_ACCEPT_FAIL] = FAULT_A_CALLFAIL,  [FAULT_K_COMM_HANG] = FAULT_A_HANG,
};

const char *const fault_err_names[FAULT_E_COUNT] = {"system", "internal", "remote"};

enum fault_action fault_kind_action(enum fault_kind k)
{
	return (unsigned)k < FAULT_K_COUNT ? (enum fault_action)kind_action[k] : FAULT_A_NONE;
}

void fault_plan_free(struct fault_plan *p)
{
	free(p);
}

static int64_t sat_add(int64_t a, int64_t b)
{
	if (b > 0 && a > INT64_MAX - b)
		return INT64_MAX;
	return a + b;
}

static int64_t sat_mul(int64_t a, uint64_t k)
{
	if (a <= 0 || k == 0)
		return 0;
	if ((uint64_t)a > (uint64_t)INT64_MAX / k)
		return INT64_MAX;
	return (int64_t)((uint64_t)a * k);
}

int fault_window_taken(const struct fault_spec *f, uint64_t seed, uint32_t fid, uint64_t i)
{
	if (f->prob == MODEL_PROB_ONE)
		return 1;
	if (f->prob == 0)
		return 0;
	struct model_key k = {.seed = seed, .link = fid, .purpose = FAULT_P_WINDOW, .msg = i};
	return (model_rand(&k, 0) >> 32) < f->prob;
}

int fault_window_nth(const struct fault_spec *f, int64_t origin, int64_t until, uint64_t i,
		     int64_t *a, int64_t *b)
{
	if ((f->count && i >= f->count) || (i > 0 && f->period_ns <= 0))
		return 0;
	/* saturated at FAULT_FOREVER, which is never before until */
	int64_t wa = sat_add(sat_add(origin, f->start_ns), sat_mul(f->period_ns, i));
	if (wa >= until)
		return 0;
	int64_t wb = f->duration_ns == FAULT_FOREVER ? FAULT_FOREVER : sat_add(wa, f->duration_ns);
	*a = wa;
	*b = wb > until ? until : wb;
	return 1;
}

int fault_window(const struct fault_spec *f, uint64_t seed, uint32_t fid, int64_t origin,
		 int64_t until, int64_t lo, int64_t hi, int64_t *a, int64_t *b)
{
	if (origin <= 0 || f->action == FAULT_A_NONE)
		return 0;
	int64_t first = sat_add(origin, f->start_ns);
	if (first >= until || first > hi)
		return 0;
	uint64_t i = 0;
	if (f->period_ns > 0 && lo > first) {
		/* the window that could still reach lo: earlier ones end before it */
		uint64_t n = (uint64_t)(lo - first) / (uint64_t)f->period_ns;
		uint64_t back = f->duration_ns == FAULT_FOREVER
					? n
					: (uint64_t)(f->duration_ns / f->period_ns) + 1;
		i = n > back ? n - back : 0;
	}
	for (uint64_t scanned = 0;; i++, scanned++) {
		int64_t wa, wb;
		if (!fault_window_nth(f, origin, until, i, &wa, &wb) || wa > hi)
			return 0;
		if (scanned >= FAULT_SCAN_MAX) {
			*a = *b = wa; /* no window taken in [lo, wa): the caller asks again from wa */
			return 2;
		}
		if (wb > lo && fault_window_taken(f, seed, fid, i)) {
			*a = wa;
			*b = wb;
			return 1;
		}
	}
}

int fault_recover(enum fault_action action, int64_t u, int64_t b, int64_t timeout_ns,
		  uint32_t retries_left, int64_t *resume, uint32_t *used)
{
	int64_t d = b > u ? b - u : 0;
	*used = 0;
	if (timeout_ns == MODEL_NEVER || timeout_ns <= 0) {
		/* no ACK timer: a stall simply resumes; a down link never gets a retry (the
		 * loader refuses that combination, so this is only a safe answer) */
		*resume = action == FAULT_A_STALL ? b : FAULT_FOREVER;
		return action == FAULT_A_STALL ? 0 : 1;
	}
	int64_t budget = sat_mul(timeout_ns, retries_left);
	if (d > budget || b == FAULT_FOREVER) {
		*resume = sat_add(u, sat_mul(timeout_ns, (uint64_t)retries_left + 1));
		*used = retries_left;
		return 1;
	}
	if (action == FAULT_A_STALL) {
		*resume = b;
		*used = (uint32_t)(d / timeout_ns);
		return 0;
	}
	/* DOWN: the k-th retry (at u + k T_o) is the first at or after b; k >= 1 */
	uint64_t k = d ? (uint64_t)((d + timeout_ns - 1) / timeout_ns) : 1;
	*resume = sat_add(u, sat_mul(timeout_ns, k));
	*used = (uint32_t)k;
	return 0;
}

int fault_call_fails(const struct fault_spec *f, uint64_t seed, uint32_t fid, uint64_t n)
{
	if (f->nth)
		return n == f->nth;
	if (f->frac == MODEL_PROB_ONE)
		return 1;
	struct model_key k = {.seed = seed, .link = fid, .purpose = FAULT_P_CALL, .msg = n};
	return (model_rand(&k, 0) >> 32) < f->frac;
}

int fault_conn_match(int32_t want_src, int32_t want_dst, int32_t src, int32_t dst)
{
	return (want_src == FAULT_ANY || want_src == src) && (want_dst == FAULT_ANY || want_dst == dst);
}

__attribute__((format(printf, 3, 4))) static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int fault_spec_check(const struct fault_spec *f, char *err, size_t errlen)
{
	if (f->kind >= FAULT_K_COUNT || f->action != (uint32_t)fault_kind_action(f->kind))
		return bad(err, errlen, "action: unknown action %u", f->kind);
	if (f->nlinks > FAULT_MAX_LINKS)
		return bad(err, errlen, "link: more than %d directed links", FAULT_MAX_LINKS);
	if (f->trigger > FAULT_T_BYTES)
		return bad(err, errlen, "after: unknown trigger %u", f->trigger);
	if (f->start_ns < 0)
		return bad(err, errlen, "at: negative");
	if (f->duration_ns <= 0)
		return bad(err, errlen, "for: must be positive");
	if (f->period_ns < 0 || (f->period_ns > 0 && f->period_ns < 1000))
		return bad(err, errlen, "every: %" PRId64 " ns is below 1 us", f->period_ns);
	if (f->duration_ns == FAULT_FOREVER && (f->period_ns || f->count != 1))
		return bad(err, errlen, "for: a window without an end cannot repeat");
	if (f->count == 0 && f->period_ns == 0)
		return bad(err, errlen, "count: unbounded windows need a period (every:)");
	if (f->period_ns > 0 && f->duration_ns != FAULT_FOREVER && f->duration_ns > f->period_ns)
		return bad(err, errlen, "for: a window (%" PRId64 " ns) longer than its period "
					"(%" PRId64 " ns) overlaps the next",
			   f->duration_ns, f->period_ns);
	if ((f->trigger == FAULT_T_MESSAGES || f->trigger == FAULT_T_BYTES) && f->threshold == 0)
		return bad(err, errlen, "after: the count must be at least 1");
	switch (f->action) {
	case FAULT_A_DOWN:
	case FAULT_A_DEGRADE:
		if (!f->nlinks)
			return bad(err, errlen, "link: %s needs links", fault_kind_names[f->kind]);
		break;
	case FAULT_A_STALL:
		if (!f->nlinks && !f->conn_scope)
			return bad(err, errlen, "link: a stall needs a link or a connection");
		break;
	case FAULT_A_RESET:
		if (!f->conn_scope)
			return bad(err, errlen, "conn: a reset needs a connection scope");
		break;
	case FAULT_A_DELAY:
		if (f->delay_ns <= 0)
			return bad(err, errlen, "delay: must be positive");
		break;
	case FAULT_A_KILL:
	case FAULT_A_FREEZE:
	case FAULT_A_STRAGGLE:
		if (f->node < 0)
			return bad(err, errlen, "node: %s needs a node", fault_kind_names[f->kind]);
		if (f->action == FAULT_A_STRAGGLE &&
		    (f->slow_period_ns < FAULT_SLOW_MIN_NS || f->frac == 0 || f->frac == MODEL_PROB_ONE))
			return bad(err, errlen, "period: a straggle stops its node for a fraction "
						"(duty, in (0, 1)) of a period of at least 1ms");
		break;
	case FAULT_A_CALLFAIL:
		if (f->err_kind >= FAULT_E_COUNT)
			return bad(err, errlen, "error: unknown error %u", f->err_kind);
		if (!f->nth && !f->frac)
			return bad(err, errlen, "fraction: 0 fails no call");
		break;
	case FAULT_A_HANG:
		if (!f->conn_scope)
			return bad(err, errlen, "conn: comm_hang needs a connection scope");
		break;
	default:
		break;
	}
	if (f->action == FAULT_A_DEGRADE && !f->set)
		return bad(err, errlen, "set: a degrade changes at least one of rate_gbps, "
					"add_latency_ns, loss, corrupt");
	return 0;
}

const char *fault_fmt_ns(int64_t ns, char *buf, size_t cap)
{
	if (ns == FAULT_FOREVER)
		snprintf(buf, cap, "forever");
	else if (ns % 1000000000 == 0 && ns)
		snprintf(buf, cap, "%" PRId64 "s", ns / 1000000000);
	else if (ns >= 1000000)
		snprintf(buf, cap, "%.6gms", (double)ns / 1e6);
	else if (ns >= 1000)
		snprintf(buf, cap, "%.6gus", (double)ns / 1e3);
	else
		snprintf(buf, cap, "%" PRId64 "ns", ns);
	return buf;
}

int fault_missed_text(const struct fault_spec *f, uint32_t id, uint64_t hit, uint64_t delayed,
		      uint64_t failed, int64_t opened, int64_t closed, char *buf, size_t cap)
{
	char t1[32], t2[32];
	if (hit || delayed || failed)
		return 0;
	int n = snprintf(buf, cap, "fault #%u '%s' opened at %s", id, f->name,
			 fault_fmt_ns(opened, t1, sizeof(t1)));
	if (n >= 0 && (size_t)n < cap && closed >= 0)
		n += snprintf(buf + n, cap - (size_t)n, " and closed at %s",
			      fault_fmt_ns(closed, t2, sizeof(t2)));
	if (n >= 0 && (size_t)n < cap)
		snprintf(buf + n, cap - (size_t)n, "%s",
			 f->trigger == FAULT_T_TIME
				 ? " (fabric time, from the daemon's start): it hit nothing; `at:` "
				   "counts from the daemon's start, not the job's: `after: "
				   "{first_traffic: LINK}` counts from the first message on LINK"
				 : " (fabric time, from the daemon's start): it hit nothing");
	return 1;
}
