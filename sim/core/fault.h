/* SPDX-License-Identifier: MIT */
/*
 * fault.h - faults: what a scenario's faults: section (or `simfabric fault
 * apply`) asks for, resolved against the fabric, and the small pure
 * functions that say when a fault is on and what it does to a message.
 *
 * A fault is an action on a scope during windows of time:
 *   DOWN     links lose every packet (link_down, nic_down, flap): the sender's
 *            RC transport retries at each ACK timeout T_o; the first retry at or
 *            after the window's end gets through. More than retry_count
 *            retries without progress fail the message (and its connection).
 *   STALL    links or connections hold packets (a PFC pause, a wedged switch
 *            queue): nothing is lost, traffic resumes at the window's end,
 *            unless the sender's ACK timer runs out of retries first.
 *   DEGRADE  links run with other parameters (rate, extra latency, loss,
 *            corruption) for messages posted inside the window.
 *   RESET    connections fail: both ends get an error on their next message.
 *   REFUSE   connects to or from a node are refused.
 *   DELAY    connects are held for a while before they complete.
 *   KILL     a node's processes are SIGKILLed (by the daemon, which knows
 *            each session's pid).
 *   FREEZE   a node's processes are SIGSTOPped for the window, then SIGCONTed:
 *            alive, holding their sockets, answering nothing.
 *   STRAGGLE a node's processes run slower for the window: stopped for a fraction
 *            (frac) of every slow_period_ns, running for the rest.
 *   CALLFAIL the node's regMr, connect or accept calls (by kind) fail in the plugin:
 *            the nth call counted from the fault's origin, or a seeded fraction (frac)
 *            of them; with the error err_kind names.
 *   HANG     connections stop completing anything, with no error, until the window
 *            ends (or the fault is cleared).
 * The budget: a DOWN or STALL window of length D only delays traffic when
 * D <= retry_count x T_o; longer, the message fails at u + (retry_count + 1)
 * x T_o, u the moment its first packet was lost or held.
 *
 * The schedule: a trigger gives the fault its origin (fabric start, the
 * first traffic on a link, the Nth message or byte on a link or connection);
 * windows start at origin + start_ns + i x period_ns for i < count, each
 * lasting duration_ns, each taken with probability prob (a draw keyed by
 * (seed, fault, i): the same windows for the same seed). A fault can be
 * cleared at a time (until_ns), which ends every window there.
 *
 * Units are the model's (int64 ns of CLOCK_MONOTONIC, bytes, bit/s,
 * probabilities as fractions of 2^32). Errors are negative errno values.
 */
#ifndef SF_FAULT_H
#define SF_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/model.h"

#define FAULT_MAX 256	     /* faults in one fabric, scenario and live ones together */
#define FAULT_MAX_LINKS 32   /* directed links one fault acts on */
#define FAULT_NAME_MAX 47
#define FAULT_FOREVER INT64_MAX
#define FAULT_SCAN_MAX 4096  /* windows looked at per query: a bound on the work per message */
#define FAULT_P_WINDOW 9     /* enum model_purpose slot of the per-window draw */
#define FAULT_ANY (-1)	     /* a connection end that matches every node */

enum fault_action {
	FAULT_A_NONE = 0,
	FAULT_A_DOWN,
	FAULT_A_STALL,
	FAULT_A_DEGRADE,
	FAULT_A_RESET,
	FAULT_A_REFUSE,
	FAULT_A_DELAY,
	FAULT_A_KILL,
	FAULT_A_FREEZE,
	FAULT_A_STRAGGLE,
	FAULT_A_CALLFAIL,
	FAULT_A_HANG,
};

/* The action as written: what messages and the docs call it. */
enum fault_kind {
	FAULT_K_LINK_DOWN = 0,
	FAULT_K_NIC_DOWN,
	FAULT_K_FLAP,
	FAULT_K_STALL,
	FAULT_K_DEGRADE,
	FAULT_K_CORRUPT,
	FAULT_K_RESET,
	FAULT_K_CONNECT_REFUSE,
	FAULT_K_CONNECT_DELAY,
	FAULT_K_NODE_KILL,
	FAULT_K_NODE_FREEZE,
	FAULT_K_STRAGGLE,
	FAULT_K_REGMR_FAIL,
	FAULT_K_CONNECT_FAIL,
	FAULT_K_ACCEPT_FAIL,
	FAULT_K_COMM_HANG,
	FAULT_K_COUNT,
};
extern const char *const fault_kind_names[FAULT_K_COUNT]; /* "link_down", ... */
enum fault_action fault_kind_action(enum fault_kind k);	  /* FAULT_A_NONE out of range */

/* CALLFAIL: the error the failing call returns, as NCCL's IB plugin would (err_kind). */
enum fault_err {
	FAULT_E_SYSTEM = 0, /* ncclSystemError: a verbs call failed (ibv_reg_mr, ibv_create_qp) */
	FAULT_E_INTERNAL,   /* ncclInternalError */
	FAULT_E_REMOTE,	    /* ncclRemoteError: the peer's side */
	FAULT_E_COUNT,
};
extern const char *const fault_err_names[FAULT_E_COUNT]; /* "system", "internal", "remote" */

#define FAULT_SLOW_PERIOD_NS 20000000LL /* straggle: the default stop/run cycle (20 ms) */
#define FAULT_SLOW_MIN_NS 1000000LL	/* ... and the shortest (1 ms: a signal per 0.5 ms) */
#define FAULT_P_CALL 10			/* enum model_purpose slot of the per-call draw */

enum fault_trigger {
	FAULT_T_TIME = 0,      /* origin: the fabric's start (virtual time 0) */
	FAULT_T_FIRST_TRAFFIC, /* the first message posted on trig_link */
	FAULT_T_MESSAGES,      /* the threshold-th message on the trigger's link or connection */
	FAULT_T_BYTES,	       /* the message that brings its bytes to threshold */
};

/* degrade: which fields are set */
#define FAULT_SET_RATE 0x1
#define FAULT_SET_LATENCY 0x2
#define FAULT_SET_LOSS 0x4
#define FAULT_SET_CORRUPT 0x8

/* One fault, resolved (names to ids); plain data, also stored in shared memory (its layout is
 * pinned in sim/core/fstate.h). */
struct fault_spec {
	char name[FAULT_NAME_MAX + 1];
	uint32_t kind;	 /* enum fault_kind */
	uint32_t action; /* enum fault_action */
	uint32_t trigger; /* enum fault_trigger */
	uint32_t nlinks;  /* DOWN, STALL, DEGRADE on links */
	uint32_t link[FAULT_MAX_LINKS];
	int32_t src_node, dst_node; /* connection scope: node ids or FAULT_ANY; both FAULT_ANY
				       with nlinks 0 means every connection */
	int32_t conn_scope;	    /* 1: the action applies to connections, not links */
	int32_t node;		    /* KILL, REFUSE, DELAY: the node (FAULT_ANY: any) */
	/* the trigger's scope (MESSAGES, BYTES, FIRST_TRAFFIC) */
	int32_t trig_link; /* a directed link, or -1 */
	int32_t trig_src, trig_dst; /* else a connection's nodes (FAULT_ANY matches any) */
	uint64_t threshold;
	/* the schedule, relative to the origin */
	int64_t start_ns, duration_ns, period_ns;
	uint64_t count; /* windows; 0: unbounded (a period is then required) */
	uint32_t prob;	/* per window; MODEL_PROB_ONE: every one */
	uint32_t set;	/* FAULT_SET_* for DEGRADE */
	uint64_t rate_bps;
	int64_t extra_latency_ns;
	struct model_loss loss;
	uint32_t corrupt_p;
	int64_t delay_ns; /* DELAY: how long a connect is held */
	int32_t line;	  /* where it was defined (scenario line; 0: live) */
	uint32_t frac;	  /* STRAGGLE: the stopped fraction of each cycle; CALLFAIL (nth 0): the
			     fraction of calls that fail (MODEL_PROB_ONE: all) */
	int64_t slow_period_ns; /* STRAGGLE: the stop/run cycle */
	uint64_t nth;		/* CALLFAIL: only the nth call fails (1-based; 0: by frac) */
	uint32_t err_kind;	/* CALLFAIL: enum fault_err */
	uint32_t reserved;
};

/* A resolved plan: what a scenario's faults: section gave. */
struct fault_plan {
	int n;
	struct fault_spec f[FAULT_MAX];
};
void fault_plan_free(struct fault_plan *p); /* NULL-safe */

/* ---- pure functions of the schedule ---------------------------------------- */

/*
 * The schedule, the one place it is computed (the data path through
 * fault_window, the daemon's timers through this): window i of f, given its
 * origin (absolute ns) and the time it was cleared (until; FAULT_FOREVER:
 * never). 1 with [*a, *b): a = origin + start + i x period, b = a + duration
 * clipped to until (FAULT_FOREVER: it never closes); or 0 when there is no
 * window i: past count, a second one without a period, one opening at or
 * after until, or beyond int64 ns. Whether window i is taken (probability)
 * is fault_window_taken's.
 */
int fault_window_nth(const struct fault_spec *f, int64_t origin, int64_t until, uint64_t i,
		     int64_t *a, int64_t *b);

/*
 * The first window of f that overlaps [lo, hi] (lo <= hi), given its origin
 * (absolute ns; 0: not triggered yet, so none) and the time it was cleared
 * (FAULT_FOREVER: never). 1 with [*a, *b) (b clipped to until), or 0.
 * Looks at no more than FAULT_SCAN_MAX windows, taking the last one looked at
 * when the scan is cut short (never misses a window; may call one early).
 */
int fault_window(const struct fault_spec *f, uint64_t seed, uint32_t fid, int64_t origin,
		 int64_t until, int64_t lo, int64_t hi, int64_t *a, int64_t *b);
/* Is window i taken (prob)? */
int fault_window_taken(const struct fault_spec *f, uint64_t seed, uint32_t fid, uint64_t i);

/*
 * The effect of one outage on a message: its first packet lost (DOWN) or held
 * (STALL) at u, the window ending at b, T_o the ACK timeout (MODEL_NEVER: no
 * timer), retries_left of the budget. Returns 0 with *resume (the time it goes
 * on) and *used (retries spent), or 1 (it fails) with *resume the failure
 * time: u + (retries_left + 1) x T_o.
 */
int fault_recover(enum fault_action action, int64_t u, int64_t b, int64_t timeout_ns,
		  uint32_t retries_left, int64_t *resume, uint32_t *used);

/*
 * CALLFAIL: does call number n (1-based, counted by the fault from its origin) fail? The nth
 * when nth is set, else a draw keyed by (seed, fid, n) below frac: the same calls for the same
 * seed, whatever the timing.
 */
int fault_call_fails(const struct fault_spec *f, uint64_t seed, uint32_t fid, uint64_t n);

/* Does a connection from node src to node dst match a (src, dst) scope? */
int fault_conn_match(int32_t want_src, int32_t want_dst, int32_t src, int32_t dst);

/* Check a spec's internal consistency (the parser's result, or a live one). 0 or -EINVAL with
 * "key: reason" in err. */
int fault_spec_check(const struct fault_spec *f, char *err, size_t errlen);

/*
 * A fault whose windows are all over without touching a message (hit, delayed and failed all
 * 0): 1, with one line in buf naming the fault, when its first window opened and its last
 * closed (ns of fabric time, counted from the daemon's start; closed < 0: unknown) and, for a
 * clock (`at:`) fault, that `after: {first_traffic: LINK}` counts from traffic instead.
 * 0 (buf untouched) when it hit something.
 */
int fault_missed_text(const struct fault_spec *f, uint32_t id, uint64_t hit, uint64_t delayed,
		      uint64_t failed, int64_t opened, int64_t closed, char *buf, size_t cap);

/* "12.5ms", "3s", "250ns": a time for messages. Returns buf. */
const char *fault_fmt_ns(int64_t ns, char *buf, size_t cap);

#endif /* SF_FAULT_H */
