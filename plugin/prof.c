/* SPDX-License-Identifier: MIT */
/* prof.c - network events through NCCL's profiler callback. See prof.h. */
#include "plugin/prof.h"

#include <string.h>

#include "plugin/client.h"
#include "plugin/net_int.h"

void sfprof_start(struct sfnet_comm *c, struct sfnet_req *r, void *const *phandles,
		  const size_t *sizes, const int *tags)
{
	ncclProfilerCallback_t prof = c->obj.ctx ? c->obj.ctx->profiler : NULL;
	r->npev = 0;
	if (!prof || !phandles)
		return;
	struct sfprof_descr_v1 d = {
		.kind = r->is_send ? SFPROF_SEND : SFPROF_RECV,
		.chan = c->chan_id,
		.node = c->session ? (uint32_t)c->session->node_id : 0,
		.dev = (uint32_t)c->dev,
	};
	for (int i = 0; i < r->n; i++) {
		r->pev[i] = NULL;
		if (!phandles[i])
			continue; /* NCCL would dereference it */
		d.buf = (uint8_t)i;
		d.tag = tags ? tags[i] : 0;
		d.size = sizes[i];
		prof(&r->pev[i], ncclProfilerNetEventStart, phandles[i],
		     (int64_t)(SFPROF_TYPE | SFPROF_VERSION), &d);
	}
	r->npev = r->n;
}

void sfprof_stop(struct sfnet_comm *c, struct sfnet_req *r)
{
	ncclProfilerCallback_t prof = c->obj.ctx ? c->obj.ctx->profiler : NULL;
	for (int i = 0; prof && i < r->npev; i++)
		if (r->pev[i]) /* NCCL passes *eHandle to the profiler unchecked */
			prof(&r->pev[i], ncclProfilerNetEventStop, NULL, 0, NULL);
	memset(r->pev, 0, sizeof(r->pev[0]) * r->npev);
	r->npev = 0;
}
