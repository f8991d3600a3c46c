/* SPDX-License-Identifier: MIT */
/*
 * net_int.h - what plugin/net.c (lifecycle, devices, close), plugin/conn.c
 * (listen, connect, accept) and plugin/data.c (registration, the data path)
 * share: the objects and the process-wide state. Not an API: nothing
 * outside plugin/ includes it.
 */
#ifndef SF_NET_INT_H
#define SF_NET_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "plugin/client.h"
#include "plugin/ncclnet.h"
#include "plugin/net.h"
#include "sim/core/chan.h"
#include "sim/core/fstate.h"
#include "sim/core/xchan.h"

struct sfxh_listen;
struct sfxh_pconn;
struct sfxr_route;
struct xmodel;

#define SFNET_DEFAULT_CONNECT_TIMEOUT_MS 120000
#define SFNET_DEFAULT_LIVENESS_MS 100
#define SFNET_DESC_LEN 192
#define SFNET_MAX_COMMS 65536 /* reported as maxComms; NCCL does not enforce it */
#define SFNET_IDEAL_HOST_MBPS 200000 /* the daemon's ideal-fabric speed (FABRIC_IDEAL_SPEED_MBPS) */
#define SFNET_IDEAL_GPU_MBPS 400000  /* ... reported instead with the GPU data path (NDR) */

_Static_assert(sizeof(size_t) == sizeof(uint64_t), "irecv passes size_t sizes to chan as-is");
_Static_assert(sizeof(int) == sizeof(int32_t), "irecv passes int tags to chan as-is");

#define SFNET_OBJ_MAGIC 0x4f4e4653u /* "SFNO" */
#define SFNET_CTX_MAGIC 0x584e4653u /* "SFNX" */
#define SFNET_REQ_MAGIC 0x514e4653u /* "SFNQ" */
#define SFNET_MR_MAGIC 0x4d4e4653u  /* "SFNM" */

enum sfnet_kind { SFNET_LISTEN = 1, SFNET_PCONN, SFNET_SEND, SFNET_RECV };

struct sfnet_ctx {
	uint32_t magic;
	struct sfnet_ctx *next;
	uint64_t comm_id;
	int traffic_class;
	ncclDebugLogger_t logger;
	ncclProfilerCallback_t profiler; /* network events (plugin/prof.c); NULL before v10 */
	pthread_mutex_t attr_lock;	 /* setNetAttr comes from two proxy threads */
	ncclNetAttr_t attr;
	int attr_set;
};

/* Common head of everything registered in sfnet_g.objs. */
struct sfnet_obj {
	uint32_t magic;
	enum sfnet_kind kind;
	struct sfnet_ctx *ctx;
	struct sfnet_obj *prev, *next;
};

struct sfnet_listen {
	struct sfnet_obj obj;
	struct sfc_conn conn; /* op=listen; then the daemon's op=incoming events */
	uint64_t id;
	int dev;
	int replied;	     /* the listen reply (errno=0) has been read */
	ncclResult_t failed; /* sticky */
	int64_t deadline_ms; /* of the accept in progress; 0 when none */
	struct sfxh_listen *x; /* the cross-host handshake (plugin/xhost.h), else NULL */
};

/* A connect in progress: NCCL retries connect with the same handle buffer. */
struct sfnet_pconn {
	struct sfnet_obj obj;
	const void *handle_addr; /* the key, with the listener id */
	uint64_t listener;
	struct sfc_conn conn; /* op=connect, until the reply */
	int dev;
	int traffic_class;
	int64_t deadline_ms;
	uint32_t peer_nic;
	char peer_node[SFNET_HANDLE_NODE_LEN];
	struct sfxh_pconn *x; /* a connect to another host (plugin/xhost.h): no daemon connection */
	uint32_t peer_host;
	struct sfxr_route *xr; /* ... its route on a modelled fabric (plugin/xroute.h), owned */
	int64_t hold_until_ms;  /* ... a connect_delay fault holds the handshake until then */
};

struct sfnet_comm;
struct sftrace_comm;
struct sfgpu_tx;

struct sfnet_req {
	struct sfnet_comm *comm;
	uint32_t magic; /* SFNET_REQ_MAGIC while handed out, 0 in the pool */
	uint16_t n;	/* buffers of a receive */
	uint16_t is_send;
	chan_req creq;
	int next_free;
	uint16_t npev;		       /* profiler events started (plugin/prof.c) */
	ncclResult_t failed;	       /* posted after the peer was gone: test() reports this */
	void *pev[CHAN_MAX_RECVS];     /* their handles, per buffer (NULL: not taken) */
};

struct sfnet_mr {
	uint32_t magic;
	struct sfnet_comm *comm;
	struct sfnet_mr *next;
	uintptr_t base;
	size_t size;
	int gpu;	     /* GPU memory (plugin/gpu.h) */
	uint64_t region;     /* a GPU receive buffer's exported region; 0: none */
	uintptr_t rbase;     /* ... and its allocation's base, where region offsets start */
	void *xmr;		  /* open to a cross-host sender's writes (sim/core/xnet.h); NULL: not */
	const struct xnet *xnet;  /* ... on this transport (the recvComm's rail) */
	uint64_t xkey, xaddr;	  /* ... with this key, base being at xaddr for the writer */
};

/* A sendComm or recvComm: one channel end. The first block is the data path's. */
struct sfnet_comm {
	struct sfnet_obj obj;
	ncclResult_t failed; /* sticky: every later call returns it */
	int free_head;	     /* request pool free list (index, -1 = empty) */
	struct chan_tx *tx;
	struct chan_rx *rx;
	struct xchan_tx *xtx; /* a connection to another host: these instead of tx, rx, shm */
	struct xchan_rx *xrx;
	const struct xnet *xnet; /* ... the transport they run on (its registrations: regMr) */
	struct xmodel *xmodel; /* ... on a modelled fabric: its end of the distributed clock */
	struct chan_shm *shm;
	struct sfc_session *session;
	int64_t live_next_ns; /* next liveness check (CLOCK_MONOTONIC_COARSE) */
	int64_t live_period_ns;

	size_t shm_len;
	uint64_t chan_id;
	int dev;
	int traffic_class;
	int mr_warned;		   /* a buffer outside its registration was reported */
	struct sftrace_comm *trace; /* SIMFABRIC_TRACE's state (plugin/trace.c), else NULL */
	struct sfgpu_tx *gpu;	   /* sendComm: the GPU copy engine (plugin/gpu.h), else NULL */
	pthread_mutex_t rx_lock;   /* recvComm: NCCL's calls against the receive agent's */
	struct sfnet_comm *agent_next; /* in the receive agent's list (plugin/agent.c) */
	int agent_on;
	int where_set;		   /* recvComm: the GPU export server is published in the channel */
	struct sfnet_mr *mrs;	   /* under sfnet_g.lock */
	char desc[SFNET_DESC_LEN]; /* "send n0/n0-nic0 -> n1/nic0 chan 0x5", for messages */
	struct sfnet_req reqs[CHAN_MAX_SENDS]; /* a recvComm uses the first CHAN_MAX_REQS */
};

struct sfnet_dev {
	char name[SFC_NAME_MAX];
	uint64_t guid;
	int speed_mbps;
	float latency_us;
};

/* Process-wide state (plugin/net.c); everything in it is under its lock. */
struct sfnet_global {
	pthread_mutex_t lock;
	int nctx; /* live ctxs: the refcount of the session */
	struct sfnet_ctx *ctxs;
	struct sfnet_ctx *default_ctx; /* the v10..v8 shims' */
	struct sfnet_obj *objs;	       /* every listener, pending connect and comm */
	struct sfc_session *session;
	int ndev;
	struct sfnet_dev devs[SFC_MAX_NICS];
	char sock[SFC_NAME_MAX];
	char node[SFC_NAME_MAX];
	int connect_timeout_ms;
	int liveness_ms;
};
extern struct sfnet_global sfnet_g;

static inline int64_t sfnet_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* CLOCK_MONOTONIC in ns: the fabric state's clock. */
static inline int64_t sfnet_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The data path's clock: CLOCK_MONOTONIC at tick resolution (a few ms),
 * read from the vDSO without rdtsc and never by a syscall, whatever the
 * clocksource. Plenty for a 100 ms liveness period.
 */
static inline int64_t sfnet_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * regmr_fail, connect_fail, accept_fail (kind: FAULT_K_*): is a fault of this kind published?
 * The one branch a call pays when none is. Then sfnet_call_fault (plugin/conn.c) says whether
 * this call fails: ncclSuccess, or the fault's error, logged with what names the call.
 */
static inline int sfnet_call_armed(uint32_t kind)
{
	const struct sfc_session *s = sfnet_g.session;
	return fst_call_armed(s && s->fab ? s->fab->shm : NULL, kind);
}
ncclResult_t sfnet_call_fault(uint32_t kind, const char *what);

/* The object registry (plugin/net.c), all under sfnet_g.lock. */
void sfnet_obj_link(struct sfnet_obj *o, enum sfnet_kind kind, struct sfnet_ctx *ctx);
void sfnet_obj_unlink(struct sfnet_obj *o);
/* Is p a live object of this kind? Never dereferences a pointer it has not found. */
struct sfnet_obj *sfnet_obj_find(const void *p, enum sfnet_kind kind);
struct sfnet_ctx *sfnet_ctx_find(const void *p);
/* Free an unlinked object: close its connection or channel end (with the daemon notice). */
void sfnet_obj_destroy(struct sfnet_obj *o);

#endif /* SF_NET_INT_H */
