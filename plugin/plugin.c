/* SPDX-License-Identifier: MIT */
/*
 * plugin.c - the exported ncclNetPlugin_v8 .. _v12 tables: v12 and v11 point
 * straight at plugin/net.c; v10, v9 and v8 are thin shims over it.
 *
 * NCCL 2.30 takes v12, 2.28 takes v11 (it knows no v12), older releases the
 * newest they know. These five objects are the library's only exports.
 *
 * Slots left NULL, on purpose:
 *  - getDeviceMr: only for device offload (netDeviceType != HOST).
 *  - irecvConsumed: NCCL would call it with a request that test() already
 *    reported done, which we have recycled by then.
 *  - makeVDevice: our NICs have a NULL pciPath, so NCCL hangs them all under
 *    one CPU at distance PORT and, given a makeVDevice, would try to fuse
 *    them into virtual NICs. NULL keeps the physical devices.
 * regMrDmaBuf is set, and refuses (see sfnet_reg_mr_dmabuf); ptrSupport has
 * no DMABUF bit, so NCCL never calls it.
 */
#include <limits.h>
#include <string.h>

#include "plugin/ncclnet.h"
#include "plugin/net.h"
#include "plugin/plog.h"
#include "sim/core/chan.h"

#define SF_EXPORT __attribute__((visibility("default")))

extern SF_EXPORT const ncclNet_v12_t ncclNetPlugin_v12;
extern SF_EXPORT const ncclNet_v11_t ncclNetPlugin_v11;
extern SF_EXPORT const ncclNet_v10_t ncclNetPlugin_v10;
extern SF_EXPORT const ncclNet_v9_t ncclNetPlugin_v9;
extern SF_EXPORT const ncclNet_v8_t ncclNetPlugin_v8;

/* ---- properties in the older layouts -------------------------------------------- */

static ncclResult_t props_v11(int dev, ncclNetProperties_v11_t *p)
{
	ncclNetProperties_v12_t q;
	ncclResult_t res = sfnet_get_properties(dev, &q);
	if (res != ncclSuccess || !p)
		return res;
	memset(p, 0, sizeof(*p));
	p->name = q.name;
	p->pciPath = q.pciPath;
	p->guid = q.guid;
	p->ptrSupport = q.ptrSupport;
	p->regIsGlobal = q.regIsGlobal;
	p->forceFlush = q.forceFlush;
	p->speed = q.speed;
	p->port = q.port;
	p->latency = q.latency;
	p->maxComms = q.maxComms;
	p->maxRecvs = q.maxRecvs;
	p->netDeviceType = q.netDeviceType;
	p->netDeviceVersion = q.netDeviceVersion;
	p->vProps.ndevs = 1; /* only physical devices: one entry fits every layout */
	p->vProps.devs[0] = q.vProps.devs[0];
	p->maxP2pBytes = q.maxP2pBytes;
	p->maxCollBytes = q.maxCollBytes;
	p->maxMultiRequestSize = q.maxMultiRequestSize;
	return ncclSuccess;
}

static ncclResult_t props_v9(int dev, ncclNetProperties_v9_t *p)
{
	ncclNetProperties_v11_t q;
	ncclResult_t res = props_v11(dev, &q);
	if (res != ncclSuccess || !p)
		return res;
	/* v9/v10 are v11 without its last field, maxMultiRequestSize. */
	memcpy(p, &q, sizeof(*p));
	return ncclSuccess;
}

_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) ==
		       sizeof(ncclNetProperties_v9_t),
	       "v9 properties are a prefix of v11's");

static ncclResult_t props_v8(int dev, ncclNetProperties_v8_t *p)
{
	ncclNetProperties_v12_t q;
	ncclResult_t res = sfnet_get_properties(dev, &q);
	if (res != ncclSuccess || !p)
		return res;
	memset(p, 0, sizeof(*p));
	p->name = q.name;
	p->pciPath = q.pciPath;
	p->guid = q.guid;
	p->ptrSupport = q.ptrSupport;
	p->regIsGlobal = q.regIsGlobal;
	p->speed = q.speed;
	p->port = q.port;
	p->latency = q.latency;
	p->maxComms = q.maxComms;
	p->maxRecvs = q.maxRecvs;
	p->netDeviceType = q.netDeviceType;
	p->netDeviceVersion = q.netDeviceVersion;
	return ncclSuccess;
}

/* ---- v10 .. v8: no ctx, no finalize ------------------------------------------------ */

static ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler)
{
	return sfnet_init_default(logger, profiler);
}

static ncclResult_t init_v9(ncclDebugLogger_t logger)
{
	return sfnet_init_default(logger, NULL);
}

static ncclResult_t listen_v10(int dev, void *handle, void **listen_comm)
{
	return sfnet_listen(sfnet_default_ctx(), dev, handle, listen_comm);
}

static ncclResult_t connect_v10(int dev, ncclNetCommConfig_t *config, void *handle,
				void **send_comm, ncclNetDeviceHandle_t **send_dev_comm)
{
	int tc = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
	return sfnet_connect_tc(sfnet_default_ctx(), dev, tc, handle, send_comm, send_dev_comm);
}

static ncclResult_t connect_v9(int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_t **send_dev_comm)
{
	return sfnet_connect_tc(sfnet_default_ctx(), dev, NCCL_NET_TRAFFIC_CLASS_UNDEF, handle,
				send_comm, send_dev_comm);
}

static ncclResult_t isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request)
{
	return sfnet_isend(send_comm, data, size, tag, mhandle, phandle, request);
}

static ncclResult_t isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			     void **request)
{
	return sfnet_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			     void **mhandles, void **request)
{
	return sfnet_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

static ncclResult_t isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle,
			     void **request)
{
	if (size < 0) {
		if (request)
			*request = NULL;
		PWARN("isend: negative size %d", size);
		return ncclInternalError;
	}
	return sfnet_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags,
			     void **mhandles, void **request)
{
	size_t wide[CHAN_MAX_RECVS];
	if (n < 1 || n > CHAN_MAX_RECVS || !sizes) {
		if (request)
			*request = NULL;
		PWARN("irecv: n %d out of [1, %d] or no sizes", n, CHAN_MAX_RECVS);
		return ncclInternalError;
	}
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			if (request)
				*request = NULL;
			PWARN("irecv: negative size %d for buffer %d", sizes[i], i);
			return ncclInternalError;
		}
		wide[i] = (size_t)sizes[i];
	}
	return sfnet_irecv(recv_comm, n, data, wide, tags, mhandles, NULL, request);
}

/* ---- the tables ------------------------------------------------------------------------ */

SF_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = SFNET_NAME,
	.init = sfnet_init,
	.devices = sfnet_devices,
	.getProperties = sfnet_get_properties,
	.listen = sfnet_listen,
	.connect = sfnet_connect,
	.accept = sfnet_accept,
	.regMr = sfnet_reg_mr,
	.regMrDmaBuf = sfnet_reg_mr_dmabuf,
	.deregMr = sfnet_dereg_mr,
	.isend = sfnet_isend,
	.irecv = sfnet_irecv,
	.iflush = sfnet_iflush,
	.test = sfnet_test,
	.closeSend = sfnet_close_send,
	.closeRecv = sfnet_close_recv,
	.closeListen = sfnet_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
	.finalize = sfnet_finalize,
	.setNetAttr = sfnet_set_net_attr,
};

SF_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = SFNET_NAME,
	.init = sfnet_init,
	.devices = sfnet_devices,
	.getProperties = props_v11,
	.listen = sfnet_listen,
	.connect = sfnet_connect,
	.accept = sfnet_accept,
	.regMr = sfnet_reg_mr,
	.regMrDmaBuf = sfnet_reg_mr_dmabuf,
	.deregMr = sfnet_dereg_mr,
	.isend = sfnet_isend,
	.irecv = sfnet_irecv,
	.iflush = sfnet_iflush,
	.test = sfnet_test,
	.closeSend = sfnet_close_send,
	.closeRecv = sfnet_close_recv,
	.closeListen = sfnet_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
	.finalize = sfnet_finalize,
	.setNetAttr = sfnet_set_net_attr,
};

SF_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = SFNET_NAME,
	.init = init_v10,
	.devices = sfnet_devices,
	.getProperties = props_v9,
	.listen = listen_v10,
	.connect = connect_v10,
	.accept = sfnet_accept,
	.regMr = sfnet_reg_mr,
	.regMrDmaBuf = sfnet_reg_mr_dmabuf,
	.deregMr = sfnet_dereg_mr,
	.isend = isend_v10,
	.irecv = sfnet_irecv,
	.iflush = sfnet_iflush,
	.test = sfnet_test,
	.closeSend = sfnet_close_send,
	.closeRecv = sfnet_close_recv,
	.closeListen = sfnet_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};

SF_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = SFNET_NAME,
	.init = init_v9,
	.devices = sfnet_devices,
	.getProperties = props_v9,
	.listen = listen_v10,
	.connect = connect_v9,
	.accept = sfnet_accept,
	.regMr = sfnet_reg_mr,
	.regMrDmaBuf = sfnet_reg_mr_dmabuf,
	.deregMr = sfnet_dereg_mr,
	.isend = isend_v9,
	.irecv = irecv_v9,
	.iflush = sfnet_iflush,
	.test = sfnet_test,
	.closeSend = sfnet_close_send,
	.closeRecv = sfnet_close_recv,
	.closeListen = sfnet_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};

SF_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = SFNET_NAME,
	.init = init_v9,
	.devices = sfnet_devices,
	.getProperties = props_v8,
	.listen = listen_v10,
	.connect = connect_v9,
	.accept = sfnet_accept,
	.regMr = sfnet_reg_mr,
	.regMrDmaBuf = sfnet_reg_mr_dmabuf,
	.deregMr = sfnet_dereg_mr,
	.isend = isend_v8,
	.irecv = irecv_v8,
	.iflush = sfnet_iflush,
	.test = sfnet_test,
	.closeSend = sfnet_close_send,
	.closeRecv = sfnet_close_recv,
	.closeListen = sfnet_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
};
