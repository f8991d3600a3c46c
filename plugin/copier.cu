// SPDX-License-Identifier: MIT
// copier.cu - the small-copy kernel of the GPU path (plugin/gpu.c, "small copies"): one block,
// resident in the plugin's own CUDA context, that polls a ring of descriptors in host-mapped
// memory and copies each from the host staging into the receiver's GPU buffer. A descriptor
// costs a store and a poll, not a copy launch (about 5 us under MPS, measured). The block
// holds one SM for as long as the process copies; *stop ends it.
// The plugin embeds its PTX (plugin/copier_ptx.h, made by `make ptx`): nothing is compiled
// at run time but by the driver's JIT, and a build without nvcc still builds the plugin.
// Written by the CPU, fields first, seq last (release): the kernel reads seq, then the rest.
struct sfk_desc {
	unsigned long long src, dst, len, seq;
};

extern "C" __global__ void sf_copier(const volatile sfk_desc *ring, unsigned nring,
				     volatile unsigned long long *done, const volatile unsigned *stop)
{
	__shared__ unsigned long long sh_s, sh_d, sh_len;
	__shared__ int sh_go;
	unsigned long long seq = 1;
	unsigned i = 0;
	if (threadIdx.x == 0)
		done[2] = 1; // "running": kern_copy uses the ring only once it reads this (host +16)
	for (;;) {
		if (threadIdx.x == 0) {
			int go;
			for (;;) {
				if (ring[i].seq == seq) { go = 1; break; }
				if (*stop) { go = 0; break; }
				__nanosleep(128);
			}
			__threadfence_system(); // acquire: the fields and the staging after seq
			if (go) {
				sh_s = ring[i].src;
				sh_d = ring[i].dst;
				sh_len = ring[i].len;
			}
			sh_go = go;
		}
		__syncthreads(); // every thread sees the same decision and descriptor
		if (!sh_go)
			return; // all threads together: no barrier is left half-entered
		const unsigned long long s = sh_s, d = sh_d, len = sh_len;
		if (((s | d | len) & 15) == 0) {
			const uint4 *src = (const uint4 *)s;
			uint4 *dst = (uint4 *)d;
			const unsigned long long nv = len / 16;
			for (unsigned long long b = 0; b < nv; b += 8ull * blockDim.x) {
				uint4 v[8]; // 8 reads in flight per thread: one PCIe round trip per 16 KiB
#pragma unroll
				for (int u = 0; u < 8; u++) {
					unsigned long long j = b + u * blockDim.x + threadIdx.x;
					if (j < nv)
						v[u] = __ldcv(src + j);
				}
#pragma unroll
				for (int u = 0; u < 8; u++) {
					unsigned long long j = b + u * blockDim.x + threadIdx.x;
					if (j < nv)
						dst[j] = v[u];
				}
			}
		} else {
			for (unsigned long long o = threadIdx.x; o < len; o += blockDim.x)
				*(unsigned char *)(d + o) = __ldcv((const unsigned char *)(s + o));
		}
		__threadfence_system(); // each thread's stores, before the barrier
		__syncthreads(); // also: thread 0 rewrites sh_* only after everyone has read them
		if (threadIdx.x == 0) {
			__threadfence_system();
			*done = seq;
		}
		seq++;
		i = (i + 1) & (nring - 1);
	}
}
