/* SPDX-License-Identifier: MIT */
/*
 * ncclnet.h - our own declarations of the NCCL net plugin ABI, v8 to v12.
 *
 * Written from NCCL's source (NVIDIA/nccl at v2.28.9-1, and v2.30.7-1 for v12:
 * nccl.h's ncclResult_t, src/include/plugin/nccl_net.h and
 * src/include/plugin/net/net_v8.h to net_v12.h), not copied from its headers.
 * Every size and offset of those headers is checked by a static assertion at
 * the end of this file, so a mistake here fails the build instead of
 * corrupting NCCL's stack at run time.
 *
 * Used by the plugin (plugin/) and by the harness (tools/), which can drive
 * any plugin through these layouts. Never include NCCL's nccl.h next to this.
 */
#ifndef SF_NCCLNET_H
#define SF_NCCLNET_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7, /* never returned by a plugin: NCCLCHECK lets it through */
	ncclNumResults = 8
} ncclResult_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
	NCCL_INIT = 0x1,
	NCCL_COLL = 0x2,
	NCCL_P2P = 0x4,
	NCCL_SHM = 0x8,
	NCCL_NET = 0x10,
	NCCL_GRAPH = 0x20,
	NCCL_TUNING = 0x40,
	NCCL_ENV = 0x80,
	NCCL_ALLOC = 0x100,
	NCCL_CALL = 0x200,
	NCCL_PROXY = 0x400,
	NCCL_NVLS = 0x800,
	NCCL_BOOTSTRAP = 0x1000,
	NCCL_REG = 0x2000,
	NCCL_PROFILE = 0x4000,
	NCCL_RAS = 0x8000,
	NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file,
				  int line, const char *fmt, ...);

enum {
	ncclProfilerNetEventStart = 0,
	ncclProfilerNetEventStop = 1,
	ncclProfilerNetEventUpdate = 2,
	ncclProfilerNetEventUpdateAndStop = 3
};
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40)
#define NCCL_NET_MAX_DEVS_PER_NIC_V11 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)
#define NCCL_NET_ATTR_UNDEF (-1)
#define NCCL_NET_ID_UNDEF (-1)

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
	NCCL_NET_DEVICE_GIN_PROXY = 2,
	NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

/* Identical from v7 to v12. */
typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_t;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
	int trafficClass;
} ncclNetCommConfig_t; /* v10, v11, v12 */

typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_t; /* v11, v12 */

typedef struct {
	ncclNetCommAttr_t sendCommAttr;
	ncclNetCommAttr_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_t; /* v11, v12 */

/* ---- properties ---------------------------------------------------------- */

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v11_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v9_t; /* also v10 */

typedef ncclNetProperties_v9_t ncclNetProperties_v10_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v11_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;
	int16_t planeId;
} ncclNetProperties_v12_t;

/* ---- function tables ----------------------------------------------------- */

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
} ncclNet_v9_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
} ncclNet_v10_t;

/* v11 and v12 have the same 22 slots; only the property and vprops types differ. */
#define SF_NCCLNET_V11_BODY(PROPS, VPROPS)                                                    \
	const char *name;                                                                      \
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,         \
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction); \
	ncclResult_t (*devices)(int *ndev);                                                    \
	ncclResult_t (*getProperties)(int dev, PROPS *props);                                  \
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);           \
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,             \
				ncclNetDeviceHandle_t **sendDevComm);                          \
	ncclResult_t (*accept)(void *listenComm, void **recvComm,                              \
			       ncclNetDeviceHandle_t **recvDevComm);                           \
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);  \
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,             \
				    uint64_t offset, int fd, void **mhandle);                  \
	ncclResult_t (*deregMr)(void *comm, void *mhandle);                                    \
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, \
			      void *phandle, void **request);                                  \
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,    \
			      void **mhandles, void **phandles, void **request);               \
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes,                 \
			       void **mhandles, void **request);                               \
	ncclResult_t (*test)(void *request, int *done, int *sizes);                            \
	ncclResult_t (*closeSend)(void *sendComm);                                             \
	ncclResult_t (*closeRecv)(void *recvComm);                                             \
	ncclResult_t (*closeListen)(void *listenComm);                                         \
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);           \
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);                   \
	ncclResult_t (*makeVDevice)(int *d, VPROPS *props);                                    \
	ncclResult_t (*finalize)(void *ctx);                                                   \
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_t *netAttr)

typedef struct {
	SF_NCCLNET_V11_BODY(ncclNetProperties_v11_t, ncclNetVDeviceProps_v11_t);
} ncclNet_v11_t;

typedef struct {
	SF_NCCLNET_V11_BODY(ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t);
} ncclNet_v12_t;

/* ---- layout checks (reference sections 2.5 to 2.8, x86-64 LP64) -------- */

#define SF_ABI_OFF(T, F, N) _Static_assert(offsetof(T, F) == (N), #T "." #F " offset")
#define SF_ABI_SIZE(T, N) _Static_assert(sizeof(T) == (N), "sizeof " #T)

SF_ABI_SIZE(ncclResult_t, 4);
SF_ABI_SIZE(ncclDebugLogLevel, 4);
SF_ABI_SIZE(ncclNetDeviceType, 4);

SF_ABI_SIZE(ncclNetDeviceHandle_t, 32);
SF_ABI_OFF(ncclNetDeviceHandle_t, netDeviceVersion, 4);
SF_ABI_OFF(ncclNetDeviceHandle_t, handle, 8);
SF_ABI_OFF(ncclNetDeviceHandle_t, size, 16);
SF_ABI_OFF(ncclNetDeviceHandle_t, needsProxyProgress, 24);

SF_ABI_SIZE(ncclNetVDeviceProps_v11_t, 20);
SF_ABI_SIZE(ncclNetVDeviceProps_v12_t, 36);
SF_ABI_SIZE(ncclNetCommConfig_t, 4);
SF_ABI_SIZE(ncclNetCommAttr_t, 16);
SF_ABI_SIZE(ncclNetAttr_t, 44);
SF_ABI_OFF(ncclNetAttr_t, recvCommAttr, 16);
SF_ABI_OFF(ncclNetAttr_t, op, 32);
SF_ABI_OFF(ncclNetAttr_t, algo, 36);
SF_ABI_OFF(ncclNetAttr_t, proto, 40);

SF_ABI_SIZE(ncclNetProperties_v8_t, 64);
SF_ABI_OFF(ncclNetProperties_v8_t, pciPath, 8);
SF_ABI_OFF(ncclNetProperties_v8_t, guid, 16);
SF_ABI_OFF(ncclNetProperties_v8_t, ptrSupport, 24);
SF_ABI_OFF(ncclNetProperties_v8_t, regIsGlobal, 28);
SF_ABI_OFF(ncclNetProperties_v8_t, speed, 32);
SF_ABI_OFF(ncclNetProperties_v8_t, port, 36);
SF_ABI_OFF(ncclNetProperties_v8_t, latency, 40);
SF_ABI_OFF(ncclNetProperties_v8_t, maxComms, 44);
SF_ABI_OFF(ncclNetProperties_v8_t, maxRecvs, 48);
SF_ABI_OFF(ncclNetProperties_v8_t, netDeviceType, 52);
SF_ABI_OFF(ncclNetProperties_v8_t, netDeviceVersion, 56);

SF_ABI_SIZE(ncclNetProperties_v9_t, 104);
SF_ABI_OFF(ncclNetProperties_v9_t, ptrSupport, 24);
SF_ABI_OFF(ncclNetProperties_v9_t, regIsGlobal, 28);
SF_ABI_OFF(ncclNetProperties_v9_t, forceFlush, 32);
SF_ABI_OFF(ncclNetProperties_v9_t, speed, 36);
SF_ABI_OFF(ncclNetProperties_v9_t, port, 40);
SF_ABI_OFF(ncclNetProperties_v9_t, latency, 44);
SF_ABI_OFF(ncclNetProperties_v9_t, maxComms, 48);
SF_ABI_OFF(ncclNetProperties_v9_t, maxRecvs, 52);
SF_ABI_OFF(ncclNetProperties_v9_t, netDeviceType, 56);
SF_ABI_OFF(ncclNetProperties_v9_t, netDeviceVersion, 60);
SF_ABI_OFF(ncclNetProperties_v9_t, vProps, 64);
SF_ABI_OFF(ncclNetProperties_v9_t, maxP2pBytes, 88);
SF_ABI_OFF(ncclNetProperties_v9_t, maxCollBytes, 96);

SF_ABI_SIZE(ncclNetProperties_v11_t, 112);
SF_ABI_OFF(ncclNetProperties_v11_t, vProps, 64);
SF_ABI_OFF(ncclNetProperties_v11_t, maxP2pBytes, 88);
SF_ABI_OFF(ncclNetProperties_v11_t, maxCollBytes, 96);
SF_ABI_OFF(ncclNetProperties_v11_t, maxMultiRequestSize, 104);

SF_ABI_SIZE(ncclNetProperties_v12_t, 128);
SF_ABI_OFF(ncclNetProperties_v12_t, speed, 36);
SF_ABI_OFF(ncclNetProperties_v12_t, latency, 44);
SF_ABI_OFF(ncclNetProperties_v12_t, vProps, 64);
SF_ABI_OFF(ncclNetProperties_v12_t, maxP2pBytes, 104);
SF_ABI_OFF(ncclNetProperties_v12_t, maxCollBytes, 112);
SF_ABI_OFF(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
SF_ABI_OFF(ncclNetProperties_v12_t, railId, 124);
SF_ABI_OFF(ncclNetProperties_v12_t, planeId, 126);

SF_ABI_SIZE(ncclNet_v8_t, 152);
SF_ABI_OFF(ncclNet_v8_t, init, 8);
SF_ABI_OFF(ncclNet_v8_t, listen, 32);
SF_ABI_OFF(ncclNet_v8_t, regMr, 56);
SF_ABI_OFF(ncclNet_v8_t, isend, 80);
SF_ABI_OFF(ncclNet_v8_t, test, 104);
SF_ABI_OFF(ncclNet_v8_t, closeListen, 128);
SF_ABI_OFF(ncclNet_v8_t, irecvConsumed, 144);

SF_ABI_SIZE(ncclNet_v9_t, 160);
SF_ABI_OFF(ncclNet_v9_t, isend, 80);
SF_ABI_OFF(ncclNet_v9_t, irecv, 88);
SF_ABI_OFF(ncclNet_v9_t, makeVDevice, 152);

SF_ABI_SIZE(ncclNet_v10_t, 160);
SF_ABI_OFF(ncclNet_v10_t, connect, 40);
SF_ABI_OFF(ncclNet_v10_t, isend, 80);
SF_ABI_OFF(ncclNet_v10_t, makeVDevice, 152);

SF_ABI_SIZE(ncclNet_v11_t, 176);
SF_ABI_OFF(ncclNet_v11_t, init, 8);
SF_ABI_OFF(ncclNet_v11_t, getProperties, 24);
SF_ABI_OFF(ncclNet_v11_t, iflush, 96);
SF_ABI_OFF(ncclNet_v11_t, makeVDevice, 152);
SF_ABI_OFF(ncclNet_v11_t, finalize, 160);
SF_ABI_OFF(ncclNet_v11_t, setNetAttr, 168);

SF_ABI_SIZE(ncclNet_v12_t, 176);
SF_ABI_OFF(ncclNet_v12_t, finalize, 160);
SF_ABI_OFF(ncclNet_v12_t, setNetAttr, 168);

#endif /* SF_NCCLNET_H */
