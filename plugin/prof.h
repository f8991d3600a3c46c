/* SPDX-License-Identifier: MIT */
/*
 * prof.h - the plugin's network events through NCCL's profiler callback
 * (v10 and later; `init` hands it over).
 *
 * Each send, and each buffer of a receive, whose pHandle NCCL gave is one
 * event: Start when it is posted, Stop when test() says done or fails, or
 * when its comm closes with it still in flight. NCCL forwards them to a
 * loaded profiler plugin as ncclProfileNetPlugin events under the proxy step
 * (src/plugin/profiler.cc, ncclProfilerCallback); without one the callback
 * returns at once. No Start is sent for a NULL pHandle (NCCL dereferences it:
 * bootstrap traffic passes NULL), and no Stop for an event the profiler did
 * not take (eHandle left NULL).
 *
 * pluginId is SFPROF_TYPE | SFPROF_VERSION: a profiler recognises our
 * descriptor by the type bits (IB's are 1 << 16, Socket's 2 << 16) and its
 * layout by the version. extData points to a struct sfprof_descr_v1 that is
 * valid during the Start call only (a profiler copies what it keeps, as the
 * example profiler does for IB's and Socket's).
 */
#ifndef SF_PROF_H
#define SF_PROF_H

#include <stdint.h>

#include "plugin/ncclnet.h"

#define SFPROF_TYPE (0x5346u << 16) /* "SF" */
#define SFPROF_VERSION 1u

enum sfprof_kind { SFPROF_SEND = 1, SFPROF_RECV = 2 };

/* Version 1 of the descriptor (extData of a Start). */
struct sfprof_descr_v1 {
	uint8_t kind;	   /* enum sfprof_kind */
	uint8_t buf;	   /* the buffer's index in its receive (0 for a send) */
	uint16_t reserved;
	int32_t tag;
	uint64_t size;	   /* bytes posted (a receive's capacity) */
	uint64_t chan;	   /* the connection's channel id, as in `simfabric show` and traces */
	uint32_t node;	   /* the fabric's id of this process's node */
	uint32_t dev;	   /* the NIC: NCCL's device index */
};
_Static_assert(sizeof(struct sfprof_descr_v1) == 32, "sfprof_descr_v1 layout");

struct sfnet_comm;
struct sfnet_req;

/* Start the request's events (n: its buffers; phandles NULL or per buffer). */
void sfprof_start(struct sfnet_comm *c, struct sfnet_req *r, void *const *phandles,
		  const size_t *sizes, const int *tags);
/* Stop whatever of r's events were started (done, failed or abandoned). */
void sfprof_stop(struct sfnet_comm *c, struct sfnet_req *r);

#endif /* SF_PROF_H */
