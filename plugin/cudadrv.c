/* SPDX-License-Identifier: MIT */
/*
 * cudadrv.c - the CUDA driver table (see cudadrv.h): one dlsym per call.
 */
#include "plugin/cudadrv.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The table's slots in order, with the symbol each one takes. */
#define CUDRV_SLOT(field, sym)                                                                     \
	{                                                                                          \
		offsetof(struct cudrv, field), sym                                                 \
	}
struct slot {
	size_t off;
	const char *sym;
};
static const struct slot slots[] = {
	CUDRV_SLOT(Init, "cuInit"),
	CUDRV_SLOT(DriverGetVersion, "cuDriverGetVersion"),
	CUDRV_SLOT(DeviceGetCount, "cuDeviceGetCount"),
	CUDRV_SLOT(DeviceGetAttribute, "cuDeviceGetAttribute"),
	CUDRV_SLOT(CtxGetCurrent, "cuCtxGetCurrent"),
	CUDRV_SLOT(CtxGetDevice, "cuCtxGetDevice"),
	CUDRV_SLOT(PointerGetAttribute, "cuPointerGetAttribute"),
	CUDRV_SLOT(MemGetAddressRange, "cuMemGetAddressRange_v2"),
	CUDRV_SLOT(IpcGetMemHandle, "cuIpcGetMemHandle"),
	CUDRV_SLOT(IpcOpenMemHandle, "cuIpcOpenMemHandle_v2"),
	CUDRV_SLOT(IpcCloseMemHandle, "cuIpcCloseMemHandle"),
	CUDRV_SLOT(MemRetainAllocationHandle, "cuMemRetainAllocationHandle"),
	CUDRV_SLOT(MemExportToShareableHandle, "cuMemExportToShareableHandle"),
	CUDRV_SLOT(MemImportFromShareableHandle, "cuMemImportFromShareableHandle"),
	CUDRV_SLOT(MemRelease, "cuMemRelease"),
	CUDRV_SLOT(MemAddressReserve, "cuMemAddressReserve"),
	CUDRV_SLOT(MemAddressFree, "cuMemAddressFree"),
	CUDRV_SLOT(MemMap, "cuMemMap"),
	CUDRV_SLOT(MemUnmap, "cuMemUnmap"),
	CUDRV_SLOT(MemSetAccess, "cuMemSetAccess"),
	CUDRV_SLOT(StreamCreateWithPriority, "cuStreamCreateWithPriority"),
	CUDRV_SLOT(CtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange"),
	CUDRV_SLOT(StreamSynchronize, "cuStreamSynchronize"),
	CUDRV_SLOT(EventCreate, "cuEventCreate"),
	CUDRV_SLOT(EventDestroy, "cuEventDestroy_v2"),
	CUDRV_SLOT(EventRecord, "cuEventRecord"),
	CUDRV_SLOT(EventQuery, "cuEventQuery"),
	CUDRV_SLOT(MemcpyAsync, "cuMemcpyAsync"),
	CUDRV_SLOT(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
	CUDRV_SLOT(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
	CUDRV_SLOT(CtxPushCurrent, "cuCtxPushCurrent_v2"),
	CUDRV_SLOT(CtxPopCurrent, "cuCtxPopCurrent_v2"),
	CUDRV_SLOT(CtxSetCurrent, "cuCtxSetCurrent"),
	CUDRV_SLOT(GetErrorName, "cuGetErrorName"),
};
static const struct slot optional[] = {
	CUDRV_SLOT(CtxCreate, "cuCtxCreate_v2"),
	CUDRV_SLOT(MemcpyPeerAsync, "cuMemcpyPeerAsync"),
	CUDRV_SLOT(MemcpyBatchAsync2, "cuMemcpyBatchAsync_v2"),
	CUDRV_SLOT(MemcpyBatchAsync1, "cuMemcpyBatchAsync"),
	CUDRV_SLOT(ModuleLoadData, "cuModuleLoadData"),
	CUDRV_SLOT(ModuleGetFunction, "cuModuleGetFunction"),
	CUDRV_SLOT(LaunchKernel, "cuLaunchKernel"),
	CUDRV_SLOT(MemHostAlloc, "cuMemHostAlloc"),
	CUDRV_SLOT(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
	CUDRV_SLOT(StreamWaitValue32, "cuStreamWaitValue32_v2"),
};

int cudadrv_load(struct cudrv *cu, int only_if_loaded, char *why, size_t cap)
{
	memset(cu, 0, sizeof(*cu));
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | (only_if_loaded ? RTLD_NOLOAD : 0));
	if (!lib) {
		const char *e = dlerror();
		snprintf(why, cap, "%s",
			 only_if_loaded ? "the process has not loaded CUDA"
				 : e	? e
					: "libcuda.so.1 not found");
		return -ENOENT;
	}
	/* The handle stays open: the table points into the library for the process's life. */
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++) {
		void *f = dlsym(lib, slots[i].sym);
		if (!f) {
			snprintf(why, cap,
				 "libcuda.so.1 has no %s (a driver older than CUDA 11.3?)",
				 slots[i].sym);
			memset(cu, 0, sizeof(*cu));
			return -ENOSYS;
		}
		memcpy((char *)cu + slots[i].off, &f, sizeof(f));
	}
	for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++) {
		void *f = dlsym(lib, optional[i].sym);
		memcpy((char *)cu + optional[i].off, &f, sizeof(f));
	}
	return 0;
}

const char *cudadrv_err(const struct cudrv *cu, cu_result r, char *buf, size_t cap)
{
	const char *name = NULL;
	if (cu->GetErrorName && cu->GetErrorName(r, &name) == CU_SUCCESS && name)
		return name;
	snprintf(buf, cap, "CUDA error %d", r);
	return buf;
}
