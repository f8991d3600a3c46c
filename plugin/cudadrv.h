/* SPDX-License-Identifier: MIT */
/*
 * cudadrv.h - the CUDA driver calls the GPU data path makes (plugin/gpu*.c),
 * resolved at run time from libcuda.so.1, so that the plugin builds and runs
 * on machines without CUDA.
 *
 * The types and values below are our own declarations of CUDA's driver ABI
 * (cuda.h, CUDA 11.3 and later: the values are stable across versions);
 * plugin/test/check_cudadrv.c compares each one with cuda.h at compile time
 * where CUDA is installed (make builds it there).
 *
 * Threads: cudadrv_load may be called from any thread, any number of times;
 * the table it fills is read-only afterwards.
 */
#ifndef SF_CUDADRV_H
#define SF_CUDADRV_H

#include <stddef.h>
#include <stdint.h>

typedef int cu_result;		      /* CUresult: 0 success */
typedef unsigned long long cu_ptr;    /* CUdeviceptr */
typedef unsigned long long cu_handle; /* CUmemGenericAllocationHandle */
typedef int cu_device;		      /* CUdevice */
typedef struct cu_ctx_st *cu_ctx;     /* CUcontext */
typedef struct cu_stream_st *cu_stream;
typedef struct cu_event_st *cu_event;
typedef struct cu_module_st *cu_module;
typedef struct cu_func_st *cu_function;

#define CU_SUCCESS 0
#define CU_ERROR_NOT_READY 600
#define CU_IPC_HANDLE_BYTES 64
#define CU_MEMHOSTALLOC_DEVICEMAP_ 0x02
#define CU_STREAM_WAIT_VALUE_GEQ_ 0 /* (int32_t)(*addr - value) >= 0: wraps safely */

struct cu_ipc_handle { /* CUipcMemHandle */
	unsigned char data[CU_IPC_HANDLE_BYTES];
};
struct cu_mem_location { /* CUmemLocation */
	int type;
	int id;
};
struct cu_access_desc { /* CUmemAccessDesc */
	struct cu_mem_location location;
	int flags;
};

struct cu_memcpy_attr { /* CUmemcpyAttributes (CUDA 12.8+) */
	int src_access_order;
	struct cu_mem_location src_loc_hint, dst_loc_hint;
	unsigned flags;
};
#define CU_MEMCPY_SRC_ACCESS_ORDER_STREAM_ 1
#define CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE_ 1

/* CUpointer_attribute */
#define CU_PA_MEMORY_TYPE 2
#define CU_PA_BUFFER_ID 7
#define CU_PA_IS_MANAGED 8
#define CU_PA_IS_LEGACY_IPC_CAPABLE 10
#define CU_PA_RANGE_START_ADDR 11
#define CU_PA_RANGE_SIZE 12
#define CU_PA_ALLOWED_HANDLE_TYPES 14
/* CUmemorytype */
#define CU_MEMTYPE_HOST 1
#define CU_MEMTYPE_DEVICE 2
/* CUmemAllocationHandleType, CUmemLocationType, CUmemAccess_flags */
#define CU_HANDLE_POSIX_FD 1
#define CU_LOCATION_DEVICE 1
#define CU_ACCESS_RW 3
/* flags */
#define CU_IPC_LAZY_PEER_ACCESS 1
#define CU_STREAM_NON_BLOCKING_ 1
#define CU_EVENT_DISABLE_TIMING_ 2
/* CUdevice_attribute */
#define CU_DA_COMPUTE_MAJOR 75
#define CU_DA_VMM_SUPPORTED 102
#define CU_DA_POSIX_FD_SUPPORTED 103
#define CU_DA_MPS_ENABLED 133

/* The calls, named as in cuda.h without the "cu" prefix (the versioned symbol where cuda.h
 * maps the name to one). */
struct cudrv {
	cu_result (*Init)(unsigned flags);
	cu_result (*DriverGetVersion)(int *v);
	cu_result (*DeviceGetCount)(int *n);
	cu_result (*DeviceGetAttribute)(int *v, int attr, cu_device dev);
	cu_result (*CtxGetCurrent)(cu_ctx *ctx);
	cu_result (*CtxGetDevice)(cu_device *dev);
	cu_result (*PointerGetAttribute)(void *data, int attr, cu_ptr p);
	cu_result (*MemGetAddressRange)(cu_ptr *base, size_t *size, cu_ptr p);
	cu_result (*IpcGetMemHandle)(struct cu_ipc_handle *h, cu_ptr p);
	cu_result (*IpcOpenMemHandle)(cu_ptr *p, struct cu_ipc_handle h, unsigned flags);
	cu_result (*IpcCloseMemHandle)(cu_ptr p);
	cu_result (*MemRetainAllocationHandle)(cu_handle *h, void *addr);
	cu_result (*MemExportToShareableHandle)(void *out, cu_handle h, int type,
						unsigned long long flags);
	cu_result (*MemImportFromShareableHandle)(cu_handle *h, void *os_handle, int type);
	cu_result (*MemRelease)(cu_handle h);
	cu_result (*MemAddressReserve)(cu_ptr *p, size_t size, size_t align, cu_ptr addr,
				       unsigned long long flags);
	cu_result (*MemAddressFree)(cu_ptr p, size_t size);
	cu_result (*MemMap)(cu_ptr p, size_t size, size_t off, cu_handle h,
			    unsigned long long flags);
	cu_result (*MemUnmap)(cu_ptr p, size_t size);
	cu_result (*MemSetAccess)(cu_ptr p, size_t size, const struct cu_access_desc *d, size_t n);
	cu_result (*StreamCreateWithPriority)(cu_stream *s, unsigned flags, int priority);
	cu_result (*CtxGetStreamPriorityRange)(int *least, int *greatest);
	cu_result (*StreamSynchronize)(cu_stream s);
	cu_result (*EventCreate)(cu_event *e, unsigned flags);
	cu_result (*EventDestroy)(cu_event e);
	cu_result (*EventRecord)(cu_event e, cu_stream s);
	cu_result (*EventQuery)(cu_event e);
	cu_result (*MemcpyAsync)(cu_ptr dst, cu_ptr src, size_t n, cu_stream s);
	cu_result (*MemcpyHtoDAsync)(cu_ptr dst, const void *src, size_t n, cu_stream s);
	cu_result (*MemcpyDtoHAsync)(void *dst, cu_ptr src, size_t n, cu_stream s);
	cu_result (*CtxPushCurrent)(cu_ctx ctx);
	cu_result (*CtxPopCurrent)(cu_ctx *ctx);
	cu_result (*CtxSetCurrent)(cu_ctx ctx);
	cu_result (*GetErrorName)(cu_result r, const char **name);
	/* Optional (NULL where the driver lacks them): a copy context of our own. */
	cu_result (*CtxCreate)(cu_ctx *ctx, unsigned flags, cu_device dev);
	cu_result (*MemcpyPeerAsync)(cu_ptr dst, cu_ctx dst_ctx, cu_ptr src, cu_ctx src_ctx,
				     size_t n, cu_stream s);
	/* Optional: batched copies with attributes, CUDA 13's (v2) and 12.8's (with failIdx). */
	cu_result (*MemcpyBatchAsync2)(cu_ptr *dsts, cu_ptr *srcs, size_t *sizes, size_t count,
				       struct cu_memcpy_attr *attrs, size_t *attr_idxs,
				       size_t nattrs, cu_stream s);
	cu_result (*MemcpyBatchAsync1)(cu_ptr *dsts, cu_ptr *srcs, size_t *sizes, size_t count,
				       struct cu_memcpy_attr *attrs, size_t *attr_idxs,
				       size_t nattrs, size_t *fail_idx, cu_stream s);
	/* Optional: the small-copy kernel (SIMFABRIC_GPU_SMALL=kernel, plugin/copier.cu). */
	cu_result (*ModuleLoadData)(cu_module *m, const void *image);
	cu_result (*ModuleGetFunction)(cu_function *f, cu_module m, const char *name);
	cu_result (*LaunchKernel)(cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				  unsigned by, unsigned bz, unsigned shmem, cu_stream s,
				  void **params, void **extra);
	cu_result (*MemHostAlloc)(void **p, size_t size, unsigned flags);
	cu_result (*MemHostGetDevicePointer)(cu_ptr *d, void *p, unsigned flags);
	/* Optional: armed copies (SIMFABRIC_GPU_ARM) wait on a host-mapped word. */
	cu_result (*StreamWaitValue32)(cu_stream s, cu_ptr addr, uint32_t value, unsigned flags);
};

/*
 * Fill *cu from libcuda.so.1. only_if_loaded: use the library only if the
 * process has already loaded it (NCCL has, before it initializes a net
 * plugin), never load CUDA into a process that does not use it. Returns 0,
 * -ENOENT (not loaded / not found) or -ENOSYS (a call is missing: a driver
 * older than CUDA 11.3), with why (a sentence) filled on error. The optional
 * calls are NULL where the library lacks them.
 */
int cudadrv_load(struct cudrv *cu, int only_if_loaded, char *why, size_t cap);

/* CUDA's name for r ("CUDA_ERROR_INVALID_VALUE"), or "CUDA error <r>"; static or buf. */
const char *cudadrv_err(const struct cudrv *cu, cu_result r, char *buf, size_t cap);

#endif /* SF_CUDADRV_H */
