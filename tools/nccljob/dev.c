/* SPDX-License-Identifier: MIT */
/*
 * dev.c - everything that touches CUDA or NCCL, and nothing else.
 *
 * No call here waits without a bound. The communicator is non-blocking by
 * default (config.blocking = 0): a call that answers ncclInProgress is
 * followed by job_wait() polling ncclCommGetAsyncError. Completion is polled
 * with cudaEventQuery/cudaStreamQuery, never cudaStreamSynchronize, and every
 * poll also looks at the communicator's asynchronous error, the out-of-band
 * channel and the deadlines (job_wait). The calls that cannot be polled (set-up,
 * ncclCommAbort, ncclCommDestroy, a blocking communicator's calls) run under
 * the watchdog (wd_arm). Host buffers are pinned, so the copies are async too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "tools/nccljob/nccljob.h"

_Static_assert(NCCL_UNIQUE_ID_BYTES == NJ_ID_BYTES, "ncclUniqueId is not NJ_ID_BYTES long");

#define NJ_POISON 0xa5 /* what the output buffer holds before each checked run */

/*
 * A timed loop keeps at most 2 x NJ_WINDOW collectives queued: it waits for
 * the window before last while the last one runs, so the GPU never starves.
 * Why: on an abort every queued NCCL kernel still starts and spins (10000
 * polls of host memory, milliseconds) before it sees the abort flag, so a
 * loop that had queued a thousand would keep ncclCommAbort for many seconds.
 * The waits also poll ncclCommGetAsyncError during the loop.
 */
#define NJ_WINDOW 16

struct nj_dev {
	int device;
	cudaStream_t stream;
	cudaEvent_t ev0, ev1;
	cudaEvent_t evw[2]; /* the last two windows' ends */
	cudaEvent_t waiting; /* what poll_event queries */
	void *d_send, *d_recv;
	void *reg_send, *reg_recv; /* --register: ncclCommRegister's handles */
	ncclComm_t comm;
};

static const ncclDataType_t nccl_types[NJ_NDTYPE] = {
	[NJ_INT8] = ncclInt8,     [NJ_UINT8] = ncclUint8,   [NJ_INT32] = ncclInt32,
	[NJ_UINT32] = ncclUint32, [NJ_INT64] = ncclInt64,   [NJ_UINT64] = ncclUint64,
	[NJ_HALF] = ncclFloat16,  [NJ_FLOAT] = ncclFloat32, [NJ_DOUBLE] = ncclFloat64,
	[NJ_BF16] = ncclBfloat16,
};

static const ncclRedOp_t nccl_ops[NJ_NOP] = {
	[NJ_SUM] = ncclSum, [NJ_PROD] = ncclProd, [NJ_MIN] = ncclMin, [NJ_MAX] = ncclMax,
};

static const char *nccl_code(ncclResult_t r)
{
	static const char *const names[] = {
		"ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError",
		"ncclInternalError",   "ncclInvalidArgument",    "ncclInvalidUsage",
		"ncclRemoteError",     "ncclInProgress",
	};

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "ncclUnknownError";
}

static void fail_cuda(struct nj_job *j, struct nj_fail *f, int kind, cudaError_t e,
		      const char *call)
{
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");

	job_failf(j, f, kind, cudaGetErrorName(e), "%s failed: %s: %s%s%s%s", call,
		  cudaGetErrorName(e), cudaGetErrorString(e),
		  kind == NJ_SETUP ? " (CUDA_VISIBLE_DEVICES=" : "",
		  kind == NJ_SETUP ? (cvd ? cvd : "unset") : "", kind == NJ_SETUP ? ")" : "");
}

static void fail_nccl(struct nj_job *j, struct nj_fail *f, ncclResult_t r, const char *what)
{
	const char *last = ncclGetLastError(j->dev ? j->dev->comm : NULL);

	job_failf(j, f, NJ_NCCL, nccl_code(r), "%s: %s (%s)%s%s", what, nccl_code(r),
		  ncclGetErrorString(r), last && *last ? "; NCCL's last error: " : "",
		  last ? last : "");
}

void dev_versions(struct nj_job *j)
{
	if (ncclGetVersion(&j->nccl_version) != ncclSuccess)
		j->nccl_version = 0;
	if (cudaRuntimeGetVersion(&j->cuda_runtime) != cudaSuccess)
		j->cuda_runtime = 0;
	if (cudaDriverGetVersion(&j->cuda_driver) != cudaSuccess)
		j->cuda_driver = 0;
}

/* 0: nothing wrong (yet), -1: the communicator failed (f says how) */
static int async_error(struct nj_job *j, struct nj_fail *f)
{
	ncclResult_t st = ncclSuccess, r;

	if (!j->dev || !j->dev->comm)
		return 0;
	r = ncclCommGetAsyncError(j->dev->comm, &st);
	if (r != ncclSuccess) {
		fail_nccl(j, f, r, "ncclCommGetAsyncError failed");
		return -1;
	}
	if (st == ncclSuccess || st == ncclInProgress)
		return 0;
	fail_nccl(j, f, st, "the communicator reported an asynchronous error");
	return -1;
}

static int poll_async(struct nj_job *j, struct nj_fail *f)
{
	ncclResult_t st = ncclSuccess, r = ncclCommGetAsyncError(j->dev->comm, &st);

	if (r != ncclSuccess) {
		fail_nccl(j, f, r, "ncclCommGetAsyncError failed");
		return -1;
	}
	if (st == ncclInProgress)
		return 0;
	if (st == ncclSuccess)
		return 1;
	fail_nccl(j, f, st, "the communicator reported an asynchronous error");
	return -1;
}

static int poll_stream(struct nj_job *j, struct nj_fail *f)
{
	cudaError_t e = cudaStreamQuery(j->dev->stream);

	if (e == cudaSuccess)
		return 1;
	if (e != cudaErrorNotReady) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaStreamQuery");
		return -1;
	}
	return async_error(j, f);
}

static int poll_event(struct nj_job *j, struct nj_fail *f)
{
	cudaError_t e = cudaEventQuery(j->dev->waiting);

	if (e == cudaSuccess)
		return 1;
	if (e != cudaErrorNotReady) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaEventQuery");
		return -1;
	}
	return async_error(j, f);
}

/* name, (arguments): the message names the call without its arguments */
#define CUDA_SETUP(name, args)                                           \
	do {                                                             \
		cudaError_t e_ = name args;                              \
		if (e_ != cudaSuccess) {                                 \
			fail_cuda(j, f, NJ_SETUP, e_, #name);            \
			goto out;                                        \
		}                                                        \
	} while (0)

int dev_setup(struct nj_job *j, struct nj_fail *f)
{
	struct cudaDeviceProp prop;
	struct nj_dev *d = calloc(1, sizeof(*d));
	int n = 0, rc = -1;

	if (!d) {
		job_failf(j, f, NJ_SETUP, "oom", "out of memory");
		return -1;
	}
	j->dev = d;
	wd_arm(j->deadline - nj_now(), "CUDA set-up (device, stream, buffers)");
	CUDA_SETUP(cudaGetDeviceCount, (&n));
	if (n <= 0) {
		job_failf(j, f, NJ_SETUP, "cudaErrorNoDevice", "no CUDA device is visible "
			  "(CUDA_VISIBLE_DEVICES=%s)", getenv("CUDA_VISIBLE_DEVICES") ?
			  getenv("CUDA_VISIBLE_DEVICES") : "unset");
		goto out;
	}
	d->device = j->o.device >= 0 ? j->o.device : j->local_rank % n;
	if (d->device >= n) {
		job_failf(j, f, NJ_SETUP, "cudaErrorInvalidDevice",
			  "--device %d: only %d device(s) are visible (CUDA_VISIBLE_DEVICES=%s)",
			  d->device, n, getenv("CUDA_VISIBLE_DEVICES") ?
			  getenv("CUDA_VISIBLE_DEVICES") : "unset");
		goto out;
	}
	j->me.device = d->device;
	CUDA_SETUP(cudaSetDevice, (d->device));
	CUDA_SETUP(cudaGetDeviceProperties, (&prop, d->device));
	snprintf(j->me.devname, sizeof(j->me.devname), "%.95s", prop.name);
	CUDA_SETUP(cudaDeviceGetPCIBusId, (j->me.pci, (int)sizeof(j->me.pci), d->device));
	CUDA_SETUP(cudaStreamCreateWithFlags, (&d->stream, cudaStreamNonBlocking));
	CUDA_SETUP(cudaEventCreate, (&d->ev0));
	CUDA_SETUP(cudaEventCreate, (&d->ev1));
	CUDA_SETUP(cudaEventCreateWithFlags, (&d->evw[0], cudaEventDisableTiming));
	CUDA_SETUP(cudaEventCreateWithFlags, (&d->evw[1], cudaEventDisableTiming));
	if (j->o.nccl_mem) {
		ncclResult_t r = ncclMemAlloc(&d->d_send, j->cap);
		if (r == ncclSuccess)
			r = ncclMemAlloc(&d->d_recv, j->cap);
		if (r != ncclSuccess) {
			fail_nccl(j, f, r, "ncclMemAlloc failed (--buffers nccl)");
			f->kind = NJ_SETUP;
			f->exit_code = nj_kind_exit(NJ_SETUP);
			goto out;
		}
	} else {
		CUDA_SETUP(cudaMalloc, (&d->d_send, j->cap));
		CUDA_SETUP(cudaMalloc, (&d->d_recv, j->cap));
	}
	CUDA_SETUP(cudaMallocHost, (&j->h_send, j->cap));
	CUDA_SETUP(cudaMallocHost, (&j->h_recv, j->cap));
	rc = 0;
out:
	wd_disarm();
	return rc;
}

int dev_unique_id(struct nj_job *j, uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	ncclUniqueId uid;
	ncclResult_t r = ncclGetUniqueId(&uid);

	if (r != ncclSuccess) {
		fail_nccl(j, f, r, "ncclGetUniqueId failed");
		f->kind = NJ_SETUP;
		f->exit_code = nj_kind_exit(NJ_SETUP);
		return -1;
	}
	memcpy(id, &uid, NJ_ID_BYTES);
	return 0;
}

static int dev_register(struct nj_job *j, struct nj_fail *f);

static int comm_init_as(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], int nranks, int rank,
			struct nj_fail *f)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId uid;
	ncclResult_t r;

	memcpy(&uid, id, sizeof(uid));
	cfg.blocking = j->o.blocking;
	if (j->o.blocking)
		wd_arm(j->o.op_timeout_s, "ncclCommInitRankConfig (blocking communicator)");
	r = ncclCommInitRankConfig(&j->dev->comm, nranks, uid, rank, &cfg);
	wd_disarm();
	if (r == ncclInProgress &&
	    job_wait(j, "ncclCommInitRankConfig", j->o.op_timeout_s, poll_async, f) < 0)
		return -1;
	if (r != ncclSuccess && r != ncclInProgress) {
		fail_nccl(j, f, r, "ncclCommInitRankConfig failed");
		return -1;
	}
	return 0;
}

int dev_comm_init(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	if (comm_init_as(j, id, j->nranks, j->rank, f) < 0)
		return -1;
	return j->o.reg ? dev_register(j, f) : 0;
}

/* --register: both buffers, whole; NCCL gives them to the network plugin's regMr where its
 * transport can use them (a plugin that refuses one makes NCCL fall back, never fail) */
static int dev_register(struct nj_job *j, struct nj_fail *f)
{
	struct nj_dev *d = j->dev;
	ncclResult_t r;

	wd_arm(j->o.op_timeout_s, "ncclCommRegister");
	r = ncclCommRegister(d->comm, d->d_send, j->cap, &d->reg_send);
	if (r == ncclSuccess)
		r = ncclCommRegister(d->comm, d->d_recv, j->cap, &d->reg_recv);
	wd_disarm();
	if (r != ncclSuccess) {
		fail_nccl(j, f, r, "ncclCommRegister failed (--register 1)");
		return -1;
	}
	return 0;
}

int dev_upload(struct nj_job *j, size_t bytes, struct nj_fail *f)
{
	cudaError_t e = cudaMemcpyAsync(j->dev->d_send, j->h_send, bytes, cudaMemcpyHostToDevice,
					j->dev->stream);

	if (e != cudaSuccess) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaMemcpyAsync (input to the GPU)");
		return -1;
	}
	return job_wait(j, "copying the input to the GPU", j->o.op_timeout_s, poll_stream, f);
}

int dev_download(struct nj_job *j, size_t bytes, struct nj_fail *f)
{
	cudaError_t e = cudaMemcpyAsync(j->h_recv, j->dev->d_recv, bytes, cudaMemcpyDeviceToHost,
					j->dev->stream);

	if (e != cudaSuccess) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaMemcpyAsync (output from the GPU)");
		return -1;
	}
	return job_wait(j, "copying the output from the GPU", j->o.op_timeout_s, poll_stream, f);
}

int dev_flip(struct nj_job *j, size_t i, struct nj_fail *f)
{
	size_t es = nj_dtype_size(j->o.dtype);
	uint8_t *h = (uint8_t *)j->h_recv + i * es, *d = (uint8_t *)j->dev->d_recv + i * es;
	cudaError_t e = cudaMemcpyAsync(h, d, es, cudaMemcpyDeviceToHost, j->dev->stream);

	if (e == cudaSuccess && job_wait(j, "reading an output element", j->o.op_timeout_s,
					 poll_stream, f) < 0)
		return -1;
	if (e == cudaSuccess) {
		nj_store(j->o.dtype, j->h_recv, i, nj_load(j->o.dtype, j->h_recv, i) ^ 0x3);
		e = cudaMemcpyAsync(d, h, es, cudaMemcpyHostToDevice, j->dev->stream);
	}
	if (e != cudaSuccess) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaMemcpyAsync (--inject flip)");
		return -1;
	}
	return job_wait(j, "changing an output element", j->o.op_timeout_s, poll_stream, f);
}

/* stream-ordered before the collective, so no wait of its own */
int dev_poison(struct nj_job *j, size_t bytes, struct nj_fail *f)
{
	cudaError_t e = cudaMemsetAsync(j->dev->d_recv, NJ_POISON, bytes, j->dev->stream);

	if (e != cudaSuccess) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaMemsetAsync (poisoning the output)");
		return -1;
	}
	return 0;
}

/*
 * alltoall: a send of chunk p to rank p and a receive of chunk p from it, for
 * every p; sendrecv: the ring, to rank+1 and from rank-1. One group either way.
 */
static ncclResult_t group_send_recv(struct nj_job *j, const struct nj_step *s,
				    const char **call)
{
	struct nj_dev *d = j->dev;
	ncclDataType_t dt = nccl_types[j->o.dtype];
	size_t bytes = s->chunk * nj_dtype_size(j->o.dtype);
	int ring = s->coll == NJ_SENDRECV, n = ring ? 1 : j->cranks, p;
	ncclResult_t r, end;

	*call = "ncclGroupStart";
	r = ncclGroupStart();
	if (r != ncclSuccess)
		return r;
	for (p = 0; p < n; p++) {
		int to = ring ? (j->crank + 1) % j->cranks : p;
		int from = ring ? (j->crank + j->cranks - 1) % j->cranks : p;
		size_t off = ring ? 0 : (size_t)p * bytes;

		*call = "ncclSend";
		r = ncclSend((char *)d->d_send + off, s->chunk, dt, to, d->comm, d->stream);
		if (r != ncclSuccess && r != ncclInProgress)
			break;
		*call = "ncclRecv";
		r = ncclRecv((char *)d->d_recv + off, s->chunk, dt, from, d->comm, d->stream);
		if (r != ncclSuccess && r != ncclInProgress)
			break;
	}
	end = ncclGroupEnd(); /* always: a group left open breaks every later call */
	if (r != ncclSuccess && r != ncclInProgress)
		return r;
	*call = "ncclGroupEnd";
	return end;
}

/* One collective: enqueued, and if NCCL says ncclInProgress, waited for until enqueued. */
static int launch(struct nj_job *j, const struct nj_step *s, struct nj_fail *f)
{
	struct nj_dev *d = j->dev;
	ncclDataType_t dt = nccl_types[j->o.dtype];
	ncclRedOp_t op = nccl_ops[j->o.op];
	size_t n = s->chunk;
	const char *call = "";
	char what[160];
	ncclResult_t r = ncclSuccess;

	if (j->o.blocking)
		wd_arm(j->o.op_timeout_s, "an NCCL call on a blocking communicator");
	switch (s->coll) {
	case NJ_ALLREDUCE:
		call = "ncclAllReduce";
		r = ncclAllReduce(d->d_send, d->d_recv, n, dt, op, d->comm, d->stream);
		break;
	case NJ_ALLGATHER:
		call = "ncclAllGather";
		r = ncclAllGather(d->d_send, d->d_recv, n, dt, d->comm, d->stream);
		break;
	case NJ_REDUCESCATTER:
		call = "ncclReduceScatter";
		r = ncclReduceScatter(d->d_send, d->d_recv, n, dt, op, d->comm, d->stream);
		break;
	case NJ_BROADCAST:
		call = "ncclBroadcast";
		r = ncclBroadcast(d->d_send, d->d_recv, n, dt, j->o.root, d->comm, d->stream);
		break;
	case NJ_REDUCE:
		call = "ncclReduce";
		r = ncclReduce(d->d_send, d->d_recv, n, dt, op, j->o.root, d->comm, d->stream);
		break;
	case NJ_ALLTOALL:
	case NJ_SENDRECV:
		r = group_send_recv(j, s, &call);
		break;
	}
	wd_disarm();
	snprintf(what, sizeof(what), "%s", call);
	if (r == ncclInProgress)
		return job_wait(j, what, j->o.op_timeout_s, poll_async, f);
	if (r != ncclSuccess) {
		snprintf(what, sizeof(what), "%s failed", call);
		fail_nccl(j, f, r, what);
		return -1;
	}
	return 0;
}

static int record(struct nj_job *j, cudaEvent_t ev, struct nj_fail *f)
{
	cudaError_t e = cudaEventRecord(ev, j->dev->stream);

	if (e != cudaSuccess) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaEventRecord");
		return -1;
	}
	return 0;
}

static int elapsed_us(struct nj_job *j, double *us, struct nj_fail *f)
{
	float ms = 0;
	cudaError_t e = cudaEventElapsedTime(&ms, j->dev->ev0, j->dev->ev1);

	if (e != cudaSuccess) {
		fail_cuda(j, f, NJ_CUDA, e, "cudaEventElapsedTime");
		return -1;
	}
	*us += ms * 1e3;
	return 0;
}

/* Wait for ev (polled: async errors, the peers, signals and the bounds are watched). */
static int wait_event(struct nj_job *j, cudaEvent_t ev, const char *what, struct nj_fail *f)
{
	j->dev->waiting = ev;
	return job_wait(j, what, j->o.op_timeout_s, poll_event, f);
}

/*
 * iters collectives. each == 0: enqueued back to back between two events,
 * no more than 2 x NJ_WINDOW queued at a time. each == 1: events, enqueue and
 * wait around every one.
 */
int dev_run(struct nj_job *j, const struct nj_step *s, int iters, int each,
	    const struct nj_late *late, double *gpu_us, double *each_us, struct nj_fail *f)
{
	char what[160];
	int i;

	*gpu_us = 0;
	snprintf(what, sizeof(what), "%s (%d iteration%s)", j->phase, each ? 1 : iters,
		 (each ? 1 : iters) == 1 ? "" : "s");
	for (i = 0; i < iters; i++) {
		if ((each || i == 0) && record(j, j->dev->ev0, f) < 0)
			return -1;
		unsigned late_us = nj_late_us(late, i);
		if (late_us) /* a straggler: the GPU waits for this launch, the peers with it */
			usleep(late_us);
		if (launch(j, s, f) < 0)
			return -1;
		if (!each && i + 1 < iters) {
			int w = (i + 1) / NJ_WINDOW;
			if ((i + 1) % NJ_WINDOW)
				continue;
			/* the window before last is done: then this one may be queued behind */
			if (w >= 2 && wait_event(j, j->dev->evw[w & 1], what, f) < 0)
				return -1;
			if (record(j, j->dev->evw[w & 1], f) < 0)
				return -1;
			continue;
		}
		double before = *gpu_us;
		if (record(j, j->dev->ev1, f) < 0 || wait_event(j, j->dev->ev1, what, f) < 0 ||
		    elapsed_us(j, gpu_us, f) < 0)
			return -1;
		if (each && each_us)
			each_us[i] = *gpu_us - before;
	}
	return 0;
}

void dev_abort(struct nj_job *j)
{
	if (!j->dev || !j->dev->comm)
		return;
	wd_arm(NJ_ABORT_BOUND_S, "ncclCommAbort");
	ncclCommAbort(j->dev->comm);
	wd_disarm();
	j->dev->comm = NULL;
}

/*
 * --on-peer-loss shrink: the survivors' new communicator. NCCL_SHRINK_ABORT ends what is in
 * flight on the old one first (its collectives wait on the lost rank, or already failed), so
 * no revoke is needed before it; the old one is then aborted to free it, and the stream
 * drained of the aborted kernels before the step runs again. The new one inherits the
 * config (non-blocking): polled like init.
 */
int dev_shrink(struct nj_job *j, int *excl, int nexcl, struct nj_fail *f)
{
	struct nj_dev *d = j->dev;
	ncclComm_t old = d->comm, nc = NULL;
	ncclResult_t r;

	wd_arm(j->o.op_timeout_s, "ncclCommShrink");
	r = ncclCommShrink(old, excl, nexcl, &nc, NULL, NCCL_SHRINK_ABORT);
	wd_disarm();
	if (r != ncclSuccess && r != ncclInProgress) {
		fail_nccl(j, f, r, "ncclCommShrink failed");
		return -1;
	}
	d->comm = nc;
	if (r == ncclInProgress &&
	    job_wait(j, "ncclCommShrink", j->o.op_timeout_s, poll_async, f) < 0)
		return -1;
	wd_arm(NJ_ABORT_BOUND_S, "ncclCommAbort (the communicator before the shrink)");
	ncclCommAbort(old);
	wd_disarm();
	return job_wait(j, "the stream after the shrink", j->o.op_timeout_s, poll_stream, f);
}

/*
 * --shrink-by reinit: the old communicator is aborted (what is in flight on it ends, bounded),
 * the stream drained of its kernels, and the survivors join a new one with rank 0's id. What
 * NCCL 2.28 allows after a network error: its ncclCommShrink starts with ncclCommEnsureReady,
 * which returns the error the proxy recorded (src/init.cc), so the shrink itself fails there.
 */
int dev_reinit(struct nj_job *j, const uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	dev_abort(j);
	if (job_wait(j, "the stream after the abort", j->o.op_timeout_s, poll_stream, f) < 0)
		return -1;
	return comm_init_as(j, id, j->cranks, j->crank, f);
}

/* the good way out: finalize (polled), destroy, free */
int dev_finalize(struct nj_job *j, struct nj_fail *f)
{
	struct nj_dev *d = j->dev;
	ncclResult_t r;

	if (!d)
		return 0;
	if (d->comm) {
		/* registrations end before the communicator does */
		if (d->reg_send && (r = ncclCommDeregister(d->comm, d->reg_send)) != ncclSuccess) {
			fail_nccl(j, f, r, "ncclCommDeregister failed");
			return -1;
		}
		if (d->reg_recv && (r = ncclCommDeregister(d->comm, d->reg_recv)) != ncclSuccess) {
			fail_nccl(j, f, r, "ncclCommDeregister failed");
			return -1;
		}
		d->reg_send = d->reg_recv = NULL;
		r = ncclCommFinalize(d->comm);
		if (r == ncclInProgress &&
		    job_wait(j, "ncclCommFinalize", j->o.op_timeout_s, poll_async, f) < 0)
			return -1;
		if (r != ncclSuccess && r != ncclInProgress) {
			fail_nccl(j, f, r, "ncclCommFinalize failed");
			return -1;
		}
		wd_arm(j->o.op_timeout_s, "ncclCommDestroy");
		r = ncclCommDestroy(d->comm);
		wd_disarm();
		d->comm = NULL;
		if (r != ncclSuccess) {
			fail_nccl(j, f, r, "ncclCommDestroy failed");
			return -1;
		}
	}
	wd_arm(j->o.op_timeout_s, "freeing CUDA memory");
	cudaFreeHost(j->h_send);
	cudaFreeHost(j->h_recv);
	if (j->o.nccl_mem) {
		ncclMemFree(d->d_send);
		ncclMemFree(d->d_recv);
	} else {
		cudaFree(d->d_send);
		cudaFree(d->d_recv);
	}
	cudaEventDestroy(d->ev0);
	cudaEventDestroy(d->ev1);
	cudaEventDestroy(d->evw[0]);
	cudaEventDestroy(d->evw[1]);
	cudaStreamDestroy(d->stream);
	wd_disarm();
	j->h_send = j->h_recv = NULL;
	free(d);
	j->dev = NULL;
	return 0;
}
