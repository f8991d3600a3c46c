/* SPDX-License-Identifier: MIT */
/*
 * gpu_base.c - what every file of the GPU path uses (gpu_int.h): the path's state (G), the
 * clock, CUDA's error names, a bounded poll's pause, hex, the highest-priority stream, and
 * whether a pointer is device memory (gpu.h). Calls nothing of theirs.
 */
#include "plugin/gpu_int.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

struct sfgpu_state G = {.lock = PTHREAD_MUTEX_INITIALIZER,
			.imp_lock = PTHREAD_MUTEX_INITIALIZER,
			.gate_lock = PTHREAD_MUTEX_INITIALIZER,
			.once = PTHREAD_ONCE_INIT,
			.srv_fd = -1};

int64_t gpu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *gpu_cuerr(cu_result r)
{
	static __thread char buf[32];
	return cudadrv_err(&G.cu, r, buf, sizeof(buf));
}

void gpu_nap(void)
{
	struct timespec ts = {0, 20000};
	nanosleep(&ts, NULL);
}

int sfgpu_is_device(const void *p)
{
	unsigned int type = 0, managed = 0;
	if (!G.mode || G.cu.PointerGetAttribute(&type, CU_PA_MEMORY_TYPE, (cu_ptr)(uintptr_t)p))
		return 0;
	if (type != CU_MEMTYPE_DEVICE)
		return 0;
	return !(G.cu.PointerGetAttribute(&managed, CU_PA_IS_MANAGED, (cu_ptr)(uintptr_t)p) == 0 &&
		 managed);
}

void gpu_hex_put(char *out, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* A non-blocking stream at the current context's highest priority (copies never wait). */
cu_result gpu_top_stream(cu_stream *s)
{
	int least = 0, greatest = 0;
	G.cu.CtxGetStreamPriorityRange(&least, &greatest);
	return G.cu.StreamCreateWithPriority(s, CU_STREAM_NON_BLOCKING_, greatest);
}

/* The pause between two looks at something the GPU will write (bounded waits only). */

int own_streams(void)
{
	return G.own_streams > 0 ? G.own_streams : 1;
}

cu_result gpu_batch_copy(cu_ptr *dst, cu_ptr *src, size_t *len, size_t n, cu_stream s)
{
	size_t idx = 0, fail = 0;
	struct cu_memcpy_attr a = {.src_access_order = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM_,
				   .flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE_};
	return G.cu.MemcpyBatchAsync2
		? G.cu.MemcpyBatchAsync2(dst, src, len, n, &a, &idx, 1, s)
		: G.cu.MemcpyBatchAsync1(dst, src, len, n, &a, &idx, 1, &fail, s);
}
