/* SPDX-License-Identifier: MIT */
/*
 * faultd.h - the daemon's side of faults: it publishes the scenario's faults
 * into the fabric's shared state (sim/core/fstate.h) where the data path applies
 * them, adds and clears live ones (`simfabric fault`), logs every window as
 * it begins and ends with its virtual and wall time, carries out the actions
 * only the daemon can (node_kill, node_freeze, straggle, comm_hang, connect_refuse,
 * connect_delay) and
 * describes each fault for `fault list` and the stats.
 *
 * Virtual time is the fabric's: ns of CLOCK_MONOTONIC since the fabric state
 * was created (fst_shm.epoch_ns). Single-threaded, on the daemon's loop.
 * Errors are negative errno values with a reason in err.
 */
#ifndef SF_FAULTD_H
#define SF_FAULTD_H

#include <stddef.h>
#include <stdint.h>

#include "sim/scn/fabric.h"
#include "sim/core/fault.h"
#include "sim/core/fstate.h"

#define FAULTD_POLL_NS 2000000LL /* how often armed triggers, and the windows of faults the daemon
				  * only logs, are looked at */
#define FAULTD_LOG_WINDOWS 16	 /* windows of one fault logged one by one; then powers of 2 */

struct faultd;

/* What the daemon must do for a KILL, FREEZE or STRAGGLE window: send sig to every process of
 * node (ids as the fabric's); returns how many it signalled. quiet: one log line per call, not
 * per process (a straggle's duty cycle). */
typedef int (*faultd_signal_fn)(void *ctx, int node, int sig, int quiet, const char *why);
/* Set (on) or clear the CHAN_HOLD_* bits of every open channel from node src to node dst
 * (FAULT_ANY: any); returns how many. */
typedef int (*faultd_hold_fn)(void *ctx, int src, int dst, uint32_t bits, int on,
			      const char *why);
/* What the daemon must do when a RESET window begins: fail every open channel from node src
 * to node dst (FAULT_ANY: any) on both ends, naming fault fid; returns how many. */
typedef int (*faultd_reset_fn)(void *ctx, int src, int dst, uint32_t fid, const char *why);

struct faultd_ops {
	faultd_signal_fn signal;
	faultd_hold_fn hold;
	faultd_reset_fn reset;
	void *ctx;
};

/* Publish plan (may be NULL) into shm; f outlives the faultd. */
int faultd_new(struct fst_shm *shm, const struct fabric *f, const struct fault_plan *plan,
	       const struct faultd_ops *ops, struct faultd **out, char *err, size_t errlen);
void faultd_free(struct faultd *d); /* NULL-safe */
/* End what open windows do to processes and channels (SIGCONT the stopped, release the held)
 * now, while the ops' ctx is whole: the daemon is going away. NULL-safe. */
void faultd_release(struct faultd *d);
/* A process joined node: is the node held stopped now (a freeze on, a straggle in its stopped
 * phase)? Then the freezes on it count the process hit. NULL-safe. */
int faultd_node_joined(struct faultd *d, int node);
/* The CHAN_HOLD_* bits a new channel from node src to node dst starts with (faults on now);
 * each fault that holds it counts it hit. */
uint32_t faultd_hold_bits(struct faultd *d, int src, int dst);

/* Would faultd_apply take spec? 0 or -EINVAL with err; changes nothing (a live spec of several
 * faults is checked whole before its first is applied, so that it applies whole or not). */
int faultd_check(const struct faultd *d, const struct fault_spec *spec, char *err, size_t errlen);
/*
 * A live fault, effective at now (its at: counts from there). Checked with
 * fault_spec_check. 0 with *id; -EINVAL; -ENOSPC (FAULT_MAX faults so far).
 */
int faultd_apply(struct faultd *d, const struct fault_spec *spec, int64_t now, uint32_t *id,
		 char *err, size_t errlen);
/* End fault id (or every one: id < 0) at time at. *n: how many were live. 0 or -ENOENT. */
int faultd_clear(struct faultd *d, int64_t id, int64_t at, int *n, char *err, size_t errlen);

/*
 * A trigger that fired on another host (docs/scale-out.md, section 5): fault id's origin is
 * origin (absolute ns on this host's clock), unless it has one already (the first publication
 * wins). *set: 1 when this call set it, else 0 and *had its origin. 0; -ENOENT (no such fault);
 * -EINVAL (a fault of the clock, whose origin is the fabric's start, or origin <= 0).
 */
int faultd_fire(struct faultd *d, uint32_t id, int64_t origin, int *set, int64_t *had, char *err,
		size_t errlen);

/* Log windows that began or ended by now; run the kills that are due. */
void faultd_tick(struct faultd *d, int64_t now);
/* The next time faultd_tick has work (absolute ns), or 0 for none. */
int64_t faultd_next_ns(const struct faultd *d, int64_t now);

/*
 * A connect from node src to node dst at now: 0 (go on), 1 (hold it until
 * *until: connect_delay) or -1 (refuse it). *fid is the fault, *why its
 * description.
 */
int faultd_connect(struct faultd *d, int src, int dst, int64_t now, int64_t *until,
		   uint32_t *fid, char *why, size_t whylen);

uint32_t faultd_count(const struct faultd *d);

/*
 * simfabricd --trace FILE: every fault window, and every trigger, as Chrome trace / Perfetto
 * JSON on CLOCK_MONOTONIC (the plugin's SIMFABRIC_TRACE clock: `simfabric trace merge` puts them
 * on one timeline). Written whole (temporary, rename) at most once a second while windows come
 * and go, and by faultd_free. Call before faultd_new; NULL turns it off.
 */
void faultd_trace_to(const char *path);
/* One line for fault list and stats: name, action, scope, schedule, state, counters. */
int faultd_describe(const struct faultd *d, uint32_t id, int64_t now, char *buf, size_t cap);
/* "link 3 (node0-nic0 -> sw0)" */
const char *faultd_link_name(const struct fabric *f, uint32_t link, char *buf, size_t cap);

#endif /* SF_FAULTD_H */
