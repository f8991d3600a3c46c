/* SPDX-License-Identifier: MIT */
/*
 * trace.h - an opt-in trace of every message, as Chrome trace / Perfetto JSON.
 *
 * SIMFABRIC_TRACE=FILE ("%p": the pid, "%n": the node, "%%": a percent sign)
 * turns it on for the process; SIMFABRIC_TRACE_MAX bounds it (events,
 * default 1e6: past it nothing more is recorded, and the file's metadata says
 * how much was dropped). Unset, the data path pays one predictable branch per
 * call: every hook is SFTRACE(...).
 *
 * Per message, on both ends: posted (the isend/irecv that took it), first
 * byte (the sender: its first chunk in staging, the emulated wire, since the
 * model reports no start; the receiver: its first chunk landed), delivered
 * (the later of the model's delivery time and the data's actual arrival: on
 * the receiver its completion gate), completed (test() said done, or failed,
 * and with which error and fault). Times are CLOCK_MONOTONIC, so traces of
 * several processes merge on one timeline (`simfabric trace merge`).
 *
 * The hooks run on the comm's own thread (NCCL drives a comm from one thread
 * at a time) and take no lock but when a comm is first seen; records go to
 * per-comm buffers. The file is written whole (to a temporary, then renamed)
 * when the last ctx is finalized and at exit, so it is always valid JSON.
 *
 * NCCL's profiler callback gets its own events: plugin/prof.h.
 */
#ifndef SF_TRACE_H
#define SF_TRACE_H

#include <stdatomic.h>
#include <stddef.h>

#include "plugin/ncclnet.h"

struct chan_err;
struct sfnet_comm;
struct sfnet_req;

/* Set by sftrace_init when SIMFABRIC_TRACE names a file it can write; cleared at unload. */
extern _Atomic int sftrace_on;

#define SFTRACE(call)                                                                              \
	do {                                                                                       \
		if (__builtin_expect(atomic_load_explicit(&sftrace_on, memory_order_relaxed), 0))  \
			call;                                                                      \
	} while (0)

/* Read the environment (the first call of each load of the library does; later ones return). */
void sftrace_init(void);
/* Write the file now if anything changed since the last write (the last finalize). */
void sftrace_flush(void);

/* CLOCK_MONOTONIC in ns: isend takes it on entry, when tracing, for sftrace_isend. */
long long sftrace_now(void);

/* The data path's hooks (plugin/data.c). entered: sftrace_now() at isend's entry, so that the
 * trace says how long the post took (isend_us: the copy's issue on the GPU path). */
void sftrace_isend(struct sfnet_comm *c, const struct sfnet_req *r, size_t size, int tag,
		   long long entered);
void sftrace_irecv(struct sfnet_comm *c, const struct sfnet_req *r, int n, const size_t *sizes,
		   const int *tags);
/* After chan's test of r: rc its return (a negative errno), done its flag, e its error. */
void sftrace_test(struct sfnet_comm *c, const struct sfnet_req *r, int rc, int done,
		  const struct chan_err *e);
/* The comm failed (sticky): op, chan's code and error (e may be NULL), and what NCCL gets. */
void sftrace_fail(struct sfnet_comm *c, const char *op, int code, ncclResult_t res,
		  const struct chan_err *e);
/* The comm is being closed (before its channel end is freed): what is in flight is unfinished. */
void sftrace_close(struct sfnet_comm *c);

#endif /* SF_TRACE_H */
