/* SPDX-License-Identifier: MIT */
/*
 * ncclprof.h - our own declarations of NCCL's profiler plugin ABI, version 5
 * (the newest in NCCL 2.28.9; 2.30 still loads it, through its v5 shim).
 *
 * Written from NCCL's sources at v2.28.9-1 (src/include/plugin/nccl_profiler.h,
 * src/include/plugin/profiler/profiler_v5.h, src/plugin/profiler.cc), not
 * copied from them; every size and offset is checked by a static assertion at
 * the end, for x86-64 LP64. Used by tools/profcheck/profcheck.c only. Never include
 * NCCL's headers next to this.
 *
 * How NCCL uses it (2.28.9):
 *  - NCCL_PROFILER_PLUGIN names the library (a path, or a suffix X for
 *    libnccl-profiler-X.so; "none" turns profiling off); NCCL looks up the data
 *    symbol ncclProfiler_v5, then _v4 ... _v1.
 *  - init runs once per communicator and writes the activation mask (a
 *    process-wide int of NCCL's). A task snapshots the mask when it is
 *    enqueued; every parent level (Group, Coll/P2p, ProxyOp, ProxyStep) also
 *    starts when only PROF_NET_PLUGIN is set, so that bit alone is enough.
 *  - A net plugin's Start reaches startEvent as a PROF_NET_PLUGIN event whose
 *    parentObj is the handle startEvent gave the proxy step (NULL if it gave
 *    none); its Stop reaches stopEvent(*eHandle) unchecked (NULL if the
 *    profiler took no handle and the plugin stops anyway).
 */
#ifndef SF_NCCLPROF_H
#define SF_NCCLPROF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/ncclnet.h" /* ncclResult_t, ncclDebugLogger_t, SF_ABI_OFF/SIZE */

/* Event types: descriptor .type and activation-mask bits. */
enum {
	PROF_GROUP = 1 << 0,
	PROF_COLL = 1 << 1,
	PROF_P2P = 1 << 2,
	PROF_PROXY_OP = 1 << 3,
	PROF_PROXY_STEP = 1 << 4,
	PROF_PROXY_CTRL = 1 << 5,
	PROF_KERNEL_CH = 1 << 6,
	PROF_NET_PLUGIN = 1 << 7,
	PROF_GROUP_API = 1 << 8,
	PROF_COLL_API = 1 << 9,
	PROF_P2P_API = 1 << 10,
	PROF_KERNEL_LAUNCH = 1 << 11,
};
#define PROF_NTYPES 12

/* The one event state a net plugin's events get (Update, UpdateAndStop). */
#define PROF_STATE_NET_PLUGIN_UPDATE 21

/* A net event's id (the plugin's pluginId): type in bits 16 and up, version below. */
#define PROF_NET_VER_MASK 0xffffu
#define PROF_NET_TYPE_MASK 0xffff0000u
#define PROF_NET_TYPE_IB (1u << 16)
#define PROF_NET_TYPE_SOCK (2u << 16)

typedef struct {
	uint64_t type;	 /* one PROF_* bit */
	void *parentObj; /* the parent event's handle, as startEvent gave it */
	int rank;
	union {
		struct {
			_Bool graphCaptured;
			int groupDepth;
		} groupApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			int root;
			void *stream;
			_Bool graphCaptured;
		} collApi;
		struct {
			const char *func;
			size_t count;
			const char *datatype;
			void *stream;
			_Bool graphCaptured;
		} p2pApi;
		struct {
			void *stream;
		} kernelLaunch;
		struct {
			uint64_t seqNumber;
			const char *func;
			const void *sendBuff;
			void *recvBuff;
			size_t count;
			int root;
			const char *datatype;
			uint8_t nChannels;
			uint8_t nWarps;
			const char *algo;
			const char *proto;
			void *parentGroup;
		} coll;
		struct {
			const char *func;
			void *buff;
			const char *datatype;
			size_t count;
			int peer;
			uint8_t nChannels;
			void *parentGroup;
		} p2p;
		struct {
			pid_t pid;
			uint8_t channelId;
			int peer;
			int nSteps;
			int chunkSize;
			int isSend;
		} proxyOp;
		struct {
			int step;
		} proxyStep;
		struct {
			uint8_t channelId;
			uint64_t pTimer;
		} kernelCh;
		struct {
			int64_t id; /* the net plugin's pluginId */
			void *data; /* its extData, valid during this call only */
		} netPlugin;
	};
} ncclProfilerEventDescr_v5_t;

typedef union {
	struct {
		size_t transSize;
	} proxyStep;
	struct {
		int appendedProxyOps;
	} proxyCtrl;
	struct {
		void *data;
	} netPlugin;
	struct {
		uint64_t pTimer;
	} kernelCh;
} ncclProfilerEventStateArgs_v5_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
			     const char *commName, int nNodes, int nranks, int rank,
			     ncclDebugLogger_t logfn);
	ncclResult_t (*startEvent)(void *context, void **eHandle,
				   ncclProfilerEventDescr_v5_t *eDescr);
	ncclResult_t (*stopEvent)(void *eHandle);
	/* eState is NCCL's ncclProfilerEventState_t, an enum (4 bytes) */
	ncclResult_t (*recordEventState)(void *eHandle, int eState,
					 ncclProfilerEventStateArgs_v5_t *eStateArgs);
	ncclResult_t (*finalize)(void *context);
} ncclProfiler_v5_t;

/* ---- layout checks (x86-64 LP64; the offsets of NCCL's own header) ------ */

SF_ABI_SIZE(ncclProfilerEventDescr_v5_t, 112);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, parentObj, 8);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, rank, 16);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, groupApi.groupDepth, 28);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, collApi.graphCaptured, 64);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, coll.seqNumber, 24);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, coll.nChannels, 80);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, coll.parentGroup, 104);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, p2p.peer, 56);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, p2p.parentGroup, 64);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, proxyOp.channelId, 28);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, proxyOp.peer, 32);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, proxyOp.isSend, 44);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, proxyStep.step, 24);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, kernelCh.pTimer, 32);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, netPlugin.id, 24);
SF_ABI_OFF(ncclProfilerEventDescr_v5_t, netPlugin.data, 32);
SF_ABI_SIZE(ncclProfilerEventStateArgs_v5_t, 8);
SF_ABI_SIZE(ncclProfiler_v5_t, 48);
SF_ABI_OFF(ncclProfiler_v5_t, init, 8);
SF_ABI_OFF(ncclProfiler_v5_t, startEvent, 16);
SF_ABI_OFF(ncclProfiler_v5_t, stopEvent, 24);
SF_ABI_OFF(ncclProfiler_v5_t, recordEventState, 32);
SF_ABI_OFF(ncclProfiler_v5_t, finalize, 40);

#endif /* SF_NCCLPROF_H */
