/* SPDX-License-Identifier: MIT */
/*
 * net.h - the ncclNet v12 implementation (prefix sfnet_): plugin/net.c
 * (init, devices, close), plugin/conn.c (listen, connect, accept) and
 * plugin/data.c (registration, the data path). plugin/plugin.c exports it
 * as ncclNetPlugin_v12 and v11 directly and wraps it for v10..v8.
 *
 * Objects, and who owns them:
 *  - a ctx per init (per NCCL communicator): config, commId, logger, the
 *    setNetAttr hints. finalize(ctx) closes whatever is still tied to it.
 *  - process-wide, under one mutex and refcounted by the live ctxs: the
 *    daemon session, the device table (the NICs from hello), the list of
 *    every comm, listener and pending connect (so finalize and the close
 *    calls can tell a live object from a stale pointer).
 *  - a listenComm holds its own daemon connection (op=listen); a pending
 *    connect holds one until the reply (op=connect) brings the memfd.
 *  - a sendComm/recvComm maps the channel's shared memory and owns its
 *    chan_tx/chan_rx and a fixed request pool. Its data path (isend, irecv,
 *    test) takes no lock, allocates nothing and makes no syscall except the
 *    liveness poll(), at most once per SIMFABRIC_LIVENESS_MS.
 *
 * Environment: SIMFABRIC_SOCKET (daemon socket; default from
 * ctl_default_socket), SIMFABRIC_NODE (our node; else NCCL_HOSTID, else the
 * hostname), SIMFABRIC_CONNECT_TIMEOUT_MS (connect/accept, default 120000),
 * SIMFABRIC_LIVENESS_MS (daemon liveness check period, default 100).
 */
#ifndef SF_NET_H
#define SF_NET_H

#include <stdint.h>

#include "plugin/ncclnet.h"

#define SFNET_NAME "simfabric"
#include "sim/core/version.h"
#define SFNET_VERSION SF_VERSION /* sim/core/version.h */

/*
 * The 128-byte connection handle, filled by listen and shipped by NCCL to the
 * connecting peer. Only plain values: nothing in it is a pointer, so a copy
 * of it works anywhere (connect keys its pending state by the buffer's
 * address instead, see sfnet_connect). Little-endian, all ranks are on one
 * machine.
 */
#define SFNET_HANDLE_MAGIC 0x31444854454e4653ULL /* "SFNETHD1" */
#define SFNET_HANDLE_VERSION 1
#define SFNET_HANDLE_NODE_LEN 96

struct sfnet_handle {
	uint64_t magic;			  /* SFNET_HANDLE_MAGIC */
	uint32_t version;		  /* SFNET_HANDLE_VERSION */
	uint32_t nic;			  /* the listener's NIC index on its node */
	uint64_t instance;		  /* token of the daemon run that knows the listener */
	uint64_t listener;		  /* the listener id (random, chosen by listen) */
	char node[SFNET_HANDLE_NODE_LEN]; /* the listener's node, NUL-terminated, for messages */
};
_Static_assert(sizeof(struct sfnet_handle) == NCCL_NET_HANDLE_MAXSIZE, "handle is 128 bytes");

/*
 * Version 2, written when cross-host connections are on (SIMFABRIC_HOST, plugin/xhost.h): the
 * same first 32 bytes, then the listener's host, its endpoint's address and handshake port, and
 * a shorter node name. A connect from the same host uses the daemon as with version 1; from
 * another host, the handshake.
 */
#define SFNET_HANDLE_VERSION_XHOST 2
#define SFNET_HANDLE2_NODE_LEN 32
struct sfnet_handle2 {
	uint64_t magic;
	uint32_t version; /* SFNET_HANDLE_VERSION_XHOST */
	uint32_t nic;
	uint64_t instance;
	uint64_t listener;
	uint16_t host;
	uint16_t addr_len;
	uint32_t port;
	uint8_t addr[56];
	char node[SFNET_HANDLE2_NODE_LEN];
};
_Static_assert(sizeof(struct sfnet_handle2) == NCCL_NET_HANDLE_MAXSIZE, "handle is 128 bytes");

/*
 * Largest message: test() reports sizes as int, so nothing above INT_MAX
 * could be reported back; NCCL's own p2p chunks are far below it.
 */
#define SFNET_MAX_MSG_BYTES 0x7fffffffULL

/* ---- the v12 entry points ------------------------------------------------ */

ncclResult_t sfnet_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
			ncclDebugLogger_t logger, ncclProfilerCallback_t profiler);
ncclResult_t sfnet_devices(int *ndev);
ncclResult_t sfnet_get_properties(int dev, ncclNetProperties_v12_t *props);
ncclResult_t sfnet_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t sfnet_connect(void *ctx, int dev, void *handle, void **send_comm,
			   ncclNetDeviceHandle_t **send_dev_comm);
ncclResult_t sfnet_accept(void *listen_comm, void **recv_comm,
			  ncclNetDeviceHandle_t **recv_dev_comm);
ncclResult_t sfnet_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t sfnet_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle);
ncclResult_t sfnet_dereg_mr(void *comm, void *mhandle);
ncclResult_t sfnet_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			 void *phandle, void **request);
ncclResult_t sfnet_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			 void **mhandles, void **phandles, void **request);
ncclResult_t sfnet_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			  void **request);
ncclResult_t sfnet_test(void *request, int *done, int *sizes);
ncclResult_t sfnet_close_send(void *send_comm);
ncclResult_t sfnet_close_recv(void *recv_comm);
ncclResult_t sfnet_close_listen(void *listen_comm);
ncclResult_t sfnet_finalize(void *ctx);
ncclResult_t sfnet_set_net_attr(void *ctx, ncclNetAttr_t *attr);

/* ---- for the v10..v8 shims ----------------------------------------------- */

/*
 * The old APIs have no ctx and no finalize: their init sets up one
 * process-wide default ctx, once (later calls only refresh the logger), and
 * sfnet_default_ctx() returns it (NULL before a successful init).
 */
ncclResult_t sfnet_init_default(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler);
void *sfnet_default_ctx(void);
/* connect with an explicit traffic class (v10 passes its config to connect, not to init). */
ncclResult_t sfnet_connect_tc(void *ctx, int dev, int traffic_class, void *handle, void **send_comm,
			      ncclNetDeviceHandle_t **send_dev_comm);

#endif /* SF_NET_H */
