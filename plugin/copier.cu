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
	// Thread 0 polls and hands the descriptor to the block through shared memory, so that
	// every thread copies the same one; the barriers keep the rounds apart.
	__shared__ unsigned long long s_src, s_dst, s_len;
	__shared__ int s_go;
	unsigned long long seq = 1;
	unsigned i = 0;
	for (;;) {
		if (threadIdx.x == 0) {
			int go = 0;
			for (;;) {
				if (ring[i].seq == seq) {
					go = 1;
					break;
				}
				if (*stop)
					break;
				__nanosleep(128);
			}
			if (go) {
				__threadfence_system(); // the fields after seq
				s_src = ring[i].src;
				s_dst = ring[i].dst;
				s_len = ring[i].len;
			}
			s_go = go;
		}
		__syncthreads();
		if (!s_go)
			return;
		const unsigned long long s = s_src, d = s_dst, len = s_len;
		if (((s | d | len) & 15) == 0) {
			for (unsigned long long o = threadIdx.x * 16ull; o < len; o += blockDim.x * 16ull)
				*(uint4 *)(d + o) = __ldcv((const uint4 *)(s + o));
		} else {
			for (unsigned long long o = threadIdx.x; o < len; o += blockDim.x)
				*(unsigned char *)(d + o) = __ldcv((const unsigned char *)(s + o));
		}
		// every thread's bytes visible (to the receiver and the CPU) before done says so
		__threadfence_system();
		__syncthreads();
		if (threadIdx.x == 0)
			*done = seq;
		seq++;
		i = (i + 1) & (nring - 1);
	}
}
