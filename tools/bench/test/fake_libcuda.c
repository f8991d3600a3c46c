/* SPDX-License-Identifier: MIT */
/*
 * fake_libcuda.c - a stand-in for CUDA's driver, libcuda.so.1, with the calls
 * simfabric-copy-rate makes, done on the CPU: "device" memory is malloc'd, a copy is a memcpy
 * when it is issued, every event has completed. test_39 runs the program over it where there
 * is no GPU. FAKE_CUDA_FAIL=init fails cuInit (no process gets ready); =corrupt flips the last
 * byte of each asynchronous single copy and the first of each batch's first copy (the program's
 * check must catch it).
 */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

static int fails(const char *what)
{
	const char *f = getenv("FAKE_CUDA_FAIL");
	return f && !strcmp(f, what);
}

CUresult cuInit(unsigned int flags)
{
	(void)flags;
	return fails("init") ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	(void)dev;
	*ctx = (CUcontext)(uintptr_t)0x1;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	(void)ctx;
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	void *m = malloc(n);
	*p = (CUdeviceptr)(uintptr_t)m;
	return m ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned int flags)
{
	(void)flags;
	*p = malloc(n);
	return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	*least = 0;
	*greatest = -1;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int priority)
{
	(void)flags, (void)priority;
	*s = (CUstream)(uintptr_t)0x2;
	return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
	(void)flags;
	*e = (CUevent)(uintptr_t)0x3;
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
	(void)e, (void)s;
	return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent e)
{
	(void)e;
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream s)
{
	(void)s;
	return CUDA_SUCCESS;
}

static void copy_async(CUdeviceptr d, const void *src, size_t n)
{
	memcpy((void *)(uintptr_t)d, src, n);
	if (n && fails("corrupt"))
		((unsigned char *)(uintptr_t)d)[n - 1] ^= 1;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s)
{
	(void)s;
	copy_async(d, h, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr src, size_t n, CUstream s)
{
	(void)s;
	copy_async(d, (const void *)(uintptr_t)src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n)
{
	memcpy((void *)(uintptr_t)d, h, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n)
{
	memcpy(h, (const void *)(uintptr_t)d, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
			       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
			       CUstream s)
{
	(void)attrs, (void)attrsIdxs, (void)numAttrs, (void)s;
	for (size_t i = 0; i < count; i++)
		memcpy((void *)(uintptr_t)dsts[i], (const void *)(uintptr_t)srcs[i], sizes[i]);
	if (count && sizes[0] && fails("corrupt"))
		*(unsigned char *)(uintptr_t)dsts[0] ^= 1;
	return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult r, const char **s)
{
	*s = r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device (fake)" : "an error (fake)";
	return CUDA_SUCCESS;
}
