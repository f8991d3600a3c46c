/* SPDX-License-Identifier: MIT */
/*
 * gpu_kern.c - the resident small-copy kernel (SIMFABRIC_GPU_SMALL=kernel; plugin/copier.cu):
 * starting and stopping it, its ring of descriptors, its copies (gpu_int.h).
 */
#include "plugin/gpu_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "plugin/copier_ptx.h"
#include "plugin/plog.h"

/* At exit: stop every kernel and wait (bounded) until it has returned, so that no MPS client
 * of ours ends with work still running on the GPU. Not in a fork's child (no kernel there). */
void kern_stop_all(void)
{
	for (int i = 0; i < G.nstreams; i++)
		if (G.streams[i].kern && G.streams[i].kern->pid == getpid())
			*G.streams[i].kern->stop = 1;
	int64_t t0 = gpu_now_ns();
	for (int i = 0; i < G.nstreams; i++) {
		struct gkern *k = G.streams[i].kern;
		while (k && k->pid == getpid() && G.cu.EventQuery(k->ended) == CU_ERROR_NOT_READY &&
		       gpu_now_ns() - t0 < 1000000000LL) {
			gpu_nap();
		}
	}
}

/*
 * Start the small-copy kernel in our own context (current), on a stream of its own: it never
 * ends, so no copy may queue behind it (our context asked for a queue more than its copy
 * streams). NULL when it cannot run, said in the log: copies then all take the copy engine.
 */
struct gkern *kern_start(void)
{
	const char *step = "a driver without cuModuleLoadData, cuLaunchKernel or cuMemHostAlloc";
	cu_result r = -1;
	cu_module m = NULL;
	cu_function f = NULL;
	cu_stream ks = NULL;
	void *host = NULL;
	cu_ptr dev = 0;
	size_t head = SFK_RING * sizeof(struct sfk_desc) + 64; /* ring, done, stop */
	const char *q = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	int nq = q && atoi(q) > 0 ? atoi(q) : 8; /* unset: CUDA's default, 8 */
	if (nq < own_streams() + 1) {
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU small copies: no kernel (CUDA_DEVICE_MAX_CONNECTIONS=%s leaves no "
		      "hardware "
		      "queue of its own next to %d copy stream(s))",
		      q ? q : "unset (8)", own_streams());
		return NULL;
	}
	if (G.cu.ModuleLoadData && G.cu.ModuleGetFunction && G.cu.LaunchKernel &&
	    G.cu.MemHostAlloc && G.cu.MemHostGetDevicePointer) {
		step = "cuModuleLoadData";
		r = G.cu.ModuleLoadData(&m, sfgpu_copier_ptx);
		if (r == CU_SUCCESS) {
			step = "cuModuleGetFunction";
			r = G.cu.ModuleGetFunction(&f, m, "sf_copier");
		}
		if (r == CU_SUCCESS) {
			step = "cuMemHostAlloc";
			r = G.cu.MemHostAlloc(&host, head + (size_t)SFK_RING * SFK_SLOT,
					      CU_MEMHOSTALLOC_DEVICEMAP_);
		}
		if (r == CU_SUCCESS) {
			memset(host, 0, head);
			step = "cuMemHostGetDevicePointer";
			r = G.cu.MemHostGetDevicePointer(&dev, host, 0);
		}
		if (r == CU_SUCCESS) {
			step = "cuStreamCreateWithPriority";
			r = gpu_top_stream(&ks);
		}
	}
	struct gkern *k = r == CU_SUCCESS ? calloc(1, sizeof(*k)) : NULL;
	if (k) {
		/* after the ring: done (8 bytes), stop (4, padded to 8), running (8), as copier.cu
		 * indexes them from done */
		size_t tail = SFK_RING * sizeof(struct sfk_desc);
		k->ring = host;
		k->done = (volatile uint64_t *)((char *)host + tail);
		k->stop = (volatile uint32_t *)((char *)host + tail + 8);
		k->running = (volatile uint64_t *)((char *)host + tail + 16);
		k->staging = (uint8_t *)host + head;
		k->staging_d = dev + head;
		k->pid = getpid();
		k->next = 1;
		pthread_mutex_init(&k->lock, NULL);
		cu_ptr ring_d = dev, done_d = dev + tail, stop_d = done_d + 8;
		unsigned n = SFK_RING;
		void *params[] = {&ring_d, &n, &done_d, &stop_d};
		step = "cuLaunchKernel";
		r = G.cu.LaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, ks, params, NULL);
		if (r == CU_SUCCESS) {
			step = "cuEventRecord after the kernel";
			r = G.cu.EventCreate(&k->ended, CU_EVENT_DISABLE_TIMING_);
			if (r == CU_SUCCESS)
				r = G.cu.EventRecord(k->ended, ks);
			if (r != CU_SUCCESS)
				*k->stop = 1;
		}
		/* Resident before any copy relies on it: launched late (NCCL's kernels spinning
		 * on every SM), it might never start, and its copies would hang. */
		int64_t t0 = gpu_now_ns();
		while (r == CU_SUCCESS && !__atomic_load_n(k->running, __ATOMIC_ACQUIRE)) {
			if (gpu_now_ns() - t0 > 1000000000LL) {
				*k->stop = 1; /* it returns at once if it ever starts */
				step = "the kernel's start (not resident after 1 s)";
				r = -1;
				break;
			}
			gpu_nap();
		}
		if (r != CU_SUCCESS) {
			free(k);
			k = NULL;
		}
	}
	if (!k) {
		/* what was made stays: our context holds it, and it is small */
		PWARN("GPU small copies: %s failed (%s): every copy takes the copy engine", step,
		      r == -1 ? "missing or timed out" : gpu_cuerr(r));
		return NULL;
	}
	static int once;
	if (!once++)
		atexit(kern_stop_all);
	PINFO(NCCL_INIT | NCCL_NET,
	      "GPU small copies: a resident kernel copies host messages up to %llu bytes "
	      "(SIMFABRIC_GPU_SMALL=kernel)",
	      (unsigned long long)G.small_max);
	return k;
}

/*
 * May the CPU read src (the kernel path stages it with memcpy)? Only when the driver says host
 * memory, or does not know the pointer at all (malloc'd memory): a query that fails for any
 * other reason must not send a device pointer to memcpy.
 */
int gpu_cpu_readable(const void *src)
{
	unsigned int type = 0;
	cu_result r = G.cu.PointerGetAttribute(&type, CU_PA_MEMORY_TYPE, (cu_ptr)(uintptr_t)src);
	return (r == CU_SUCCESS && type == CU_MEMTYPE_HOST) || r == 1 /* INVALID_VALUE */;
}

/* Has the kernel copied up to seq? */
int kern_done(const struct gkern *k, uint64_t seq)
{
	return __atomic_load_n(k->done, __ATOMIC_ACQUIRE) >= seq;
}

/* Wait (bounded) until the kernel has copied up to seq. */
int kern_wait(const struct gkern *k, uint64_t seq)
{
	int64_t t0 = gpu_now_ns();
	while (!kern_done(k, seq)) {
		if (gpu_now_ns() - t0 > 1000000 && G.cu.EventQuery(k->ended) != CU_ERROR_NOT_READY)
			return kern_done(k, seq) ? 0
						 : -EIO; /* it has returned: nothing more comes */
		if (gpu_now_ns() - t0 > SFK_WAIT_NS) {
			PWARN("GPU small copies: the kernel has not copied descriptor %llu after "
			      "%lld s (done: %llu)",
			      (unsigned long long)seq, SFK_WAIT_NS / 1000000000LL,
			      (unsigned long long)*k->done);
			return -ETIMEDOUT;
		}
		gpu_nap();
	}
	return 0;
}

/*
 * A small copy from host memory through the kernel: staged, then one descriptor. 0 with *seq,
 * or -EAGAIN when the ring is full (the caller takes the copy engine instead).
 */
int kern_copy(struct gkern *k, cu_ptr dst, const void *src, uint64_t len, uint64_t *seq)
{
	pthread_mutex_lock(&k->lock);
	uint64_t n = k->next;
	if (n - __atomic_load_n(k->done, __ATOMIC_ACQUIRE) > SFK_RING || *k->stop) {
		pthread_mutex_unlock(&k->lock);
		return -EAGAIN;
	}
	uint32_t i = (uint32_t)((n - 1) & (SFK_RING - 1));
	memcpy(k->staging + (size_t)i * SFK_SLOT, src, len);
	volatile struct sfk_desc *d = &k->ring[i];
	d->src = k->staging_d + (uint64_t)i * SFK_SLOT;
	d->dst = dst;
	d->len = len;
	__atomic_store_n(&((struct sfk_desc *)d)->seq, n, __ATOMIC_RELEASE);
	k->next = n + 1;
	pthread_mutex_unlock(&k->lock);
	*seq = n;
	return 0;
}
