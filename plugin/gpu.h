/* SPDX-License-Identifier: MIT */
/*
 * gpu.h - the GPU data path: emulated GPUDirect RDMA over CUDA IPC.
 *
 * What a real cluster's NIC does with NCCL_PTR_CUDA, done with the GPU's copy
 * engines: regMr of device memory exports its allocation once (a cuMem POSIX
 * fd, or a legacy IPC handle for cudaMalloc memory), cached by allocation; a
 * receive names (region, offset) in its clear-to-send; the sender's copy
 * engine imports the region on first use (asking the receiver's process over
 * a Unix socket: SCM_RIGHTS for fds, the server's secret in the request), then
 * copies each message straight into the receive buffer on its context's copy
 * stream (one per context, made early: see copy_stream in gpu_copy.c) and polls an
 * event for it (struct chan_dma, sim/chan.h). No payload through host memory,
 * and the receiving process is not needed for a send to complete. A sendComm
 * keeps up to 64 regions mapped and lets the least recently used go.
 *
 * The switch is SIMFABRIC_GPU=auto|on|off, read once per process:
 *   auto (default)  on when the process has already loaded CUDA (NCCL has)
 *                   and the driver has the calls; off otherwise (the CPU
 *                   harness, machines without CUDA)
 *   on              the same, but an unusable CUDA is an error
 *   off             host memory only (ptrSupport NCCL_PTR_HOST)
 *
 * Errors are negative errno values with a sentence in why. Threads: every
 * function may be called from any thread; a struct sfgpu_tx is driven by one
 * thread at a time (its comm's). CUDA calls run in the caller's current
 * context (NCCL's proxy threads have their device's primary context current).
 */
#ifndef SF_GPU_H
#define SF_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/chan.h"

/* Decide the mode (once per process). 1 on, 0 off, or a negative errno when
 * SIMFABRIC_GPU is malformed or "on" cannot be honoured (why says which). */
int sfgpu_setup(char *why, size_t cap);
/* 1 when the GPU path is on (after sfgpu_setup). */
int sfgpu_on(void);
/* One line for the init log and status: "on (driver 13000, ...)" or "off (reason)". */
const char *sfgpu_describe(void);

/* An exported registration: the region id a receive names, and its allocation's base. */
struct sfgpu_reg {
	uint64_t region;
	uintptr_t base; /* offsets in the region are from here */
	uint64_t size;	/* of the allocation */
};

/*
 * Check that [p, p + size) is device memory the copy engine may use and, with
 * export (a receive buffer), export the allocation holding it (cached: a second
 * registration in the same allocation shares the export). Send buffers are not
 * exported: no other process needs to map them. -ENOTSUP for memory that cannot
 * be used or exported (managed, host, VMM without a POSIX-fd handle type),
 * -EXDEV for a range over several allocations, -EIO or another errno for a
 * CUDA or server failure. out->region is 0 without export.
 */
int sfgpu_register(const void *p, size_t size, int export, struct sfgpu_reg *out, char *why,
		   size_t cap);
/* Drop one registration of region (the export goes with the last). */
void sfgpu_unregister(uint64_t region);
/* Where a sender asks for this process's regions (for chan_rx_set_where). */
const char *sfgpu_where(void);
/* Is p device memory the CPU cannot read? (The corruption flips read such a source on the GPU.) */
int sfgpu_is_device(const void *p);

/* One sendComm's copy engine: a stream, events, the regions it imported. */
struct sfgpu_tx;
int sfgpu_tx_new(const char *desc, struct sfgpu_tx **out);
/* Waits for its copies, releases its imports. NULL-safe. */
void sfgpu_tx_free(struct sfgpu_tx *t);
/* Wait for every copy of every sendComm in the process (before a source buffer is freed). */
void sfgpu_drain_all(void);
/* The chan_dma operations over a struct sfgpu_tx. */
extern struct chan_dma sfgpu_dma; /* its arm_ahead_ns set once, at setup */

#endif /* SF_GPU_H */
