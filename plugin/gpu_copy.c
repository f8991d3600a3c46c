/* SPDX-License-Identifier: MIT */
/*
 * gpu_copy.c - the GPU path's copy engine: where copies run (contexts and streams), a
 * sendComm's copies (struct sfgpu_tx) and the chan_dma operations over them (gpu_int.h).
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

#include "plugin/plog.h"

/* ---- the copy engine --------------------------------------------------------------------- */

int sfgpu_tx_new(const char *desc, struct sfgpu_tx **out)
{
	struct sfgpu_tx *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	snprintf(t->desc, sizeof(t->desc), "%s", desc);
	memset(t->gk, -1, sizeof(t->gk));
	pthread_mutex_lock(&G.imp_lock);
	t->next = G.txs;
	G.txs = t;
	pthread_mutex_unlock(&G.imp_lock);
	*out = t;
	return 0;
}

/* Will our context have gates (armed copies)? Not with SIMFABRIC_GPU_ARM=off, nor beside the
 * small-copy kernel (its queue check knows only the copy streams), nor without the calls or the
 * issuer's queues. */
static int gates_wanted(void)
{
	return !G.arm_off && !G.small_kernel && G.cu.StreamWaitValue32 && G.cu.MemHostAlloc &&
		G.cu.MemHostGetDevicePointer &&
		(G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1) && !G.sender_issues &&
		G.batch_max;
}

/*
 * Under G.imp_lock, with own (entry i's context of our own) current: its gate streams and their
 * words. A gate's wait holds up whatever shares its hardware queue, so a copy stream behind one
 * would wait for a held copy's arrival: checked with every gate waiting (the copy streams must
 * still run), and no gates if not, said once.
 */
static void gates_make(int i, cu_ctx own, cu_stream *copy, int ncopy)
{
	struct ggate *g = G.streams[i].gates;
	if (!gates_wanted())
		return;
	char *page = NULL;
	cu_ptr page_d = 0;
	int n = 0, ran = 0;
	const char *step = "cuMemHostAlloc";
	cu_result r = G.cu.MemHostAlloc((void **)&page, 4096, CU_MEMHOSTALLOC_DEVICEMAP_);
	if (r == CU_SUCCESS) {
		memset(page, 0, 4096);
		step = "cuMemHostGetDevicePointer";
		r = G.cu.MemHostGetDevicePointer(&page_d, page, 0);
	}
	/* each word on a line of its own; the last line is the check's */
	uint32_t *probe = (uint32_t *)(page + 4096 - 64);
	if (r == CU_SUCCESS)
		step = "cuStreamCreateWithPriority";
	while (r == CU_SUCCESS && n < SFGPU_GATES && (r = gpu_top_stream(&g[n].s)) == CU_SUCCESS)
		n++;
	if (r == CU_SUCCESS)
		step = "cuStreamWaitValue32";
	for (int k = 0; r == CU_SUCCESS && k < n; k++)
		r = G.cu.StreamWaitValue32(g[k].s, page_d + 4096 - 64, 1,
					   CU_STREAM_WAIT_VALUE_GEQ_);
	if (r == CU_SUCCESS) {
		step = "the check that the copy streams run while the gates wait";
		ran = streams_run(copy, ncopy);
	}
	if (page)
		__atomic_store_n(probe, 1, __ATOMIC_RELEASE);
	if (r == CU_SUCCESS && ran) {
		cu_stream gs[SFGPU_GATES];
		for (int k = 0; k < n; k++)
			gs[k] = g[k].s;
		step = "the check that the gates run once let go";
		ran = streams_run(gs, n) && n == SFGPU_GATES;
		/* and that none waits behind another's wait: each runs while the others wait (a
		 * gate behind another would wait for another connection's arrival, or for ever) */
		for (int k = 0; r == CU_SUCCESS && ran && k < n; k++) {
			step = "the check that each gate runs while the others wait";
			for (int j = 0; r == CU_SUCCESS && j < n; j++)
				if (j != k)
					r = G.cu.StreamWaitValue32(g[j].s, page_d + 4096 - 64,
								   (uint32_t)k + 2,
								   CU_STREAM_WAIT_VALUE_GEQ_);
			ran = r == CU_SUCCESS && streams_run(&gs[k], 1);
			__atomic_store_n(probe, (uint32_t)k + 2, __ATOMIC_RELEASE);
		}
		if (r == CU_SUCCESS && ran)
			ran = streams_run(gs, n);
	}
	for (int k = 0; r == CU_SUCCESS && ran && k < n; k++) {
		g[k].word = (volatile uint32_t *)(page + 64 * k);
		g[k].word_d = page_d + 64 * (cu_ptr)k;
		g[k].armed = 0;
		g[k].owner = NULL;
		g[k].q = queue_for(g[k].s, own);
		if (!g[k].q) {
			step = "a queue for each gate";
			ran = 0;
			break;
		}
		g[k].q->gate = &g[k];
	}
	if (r != CU_SUCCESS || !ran) {
		/* what was made stays (a page, a few streams): unused, and the waits let go */
		PWARN("GPU armed copies are off: %s %s; held copies start at their arrival "
		      "(SIMFABRIC_GPU_ARM=off says so without trying)",
		      step, r != CU_SUCCESS ? gpu_cuerr(r) : "failed");
		return;
	}
	G.streams[i].ngates = n;
}

/*
 * cuCtxCreate with CUDA_DEVICE_MAX_CONNECTIONS at our stream count for the while, in case the
 * driver reads it per context: under MPS every context's queues come out of one pool (on an
 * H200, 2 ranks at 32 queues each could not make a third context: out of memory).
 */
static cu_result own_ctx_create(cu_ctx *own, cu_device dev)
{
	const char *was = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	char saved[32] = "";
	/* Only an existing variable is changed: setenv then replaces one pointer in place, which
	 * another thread's getenv reads whole; adding one could move environ under it. */
	char want[16];
	/* + the kernel's, + the gates' (armed copies) */
	snprintf(want, sizeof(want), "%d",
		 own_streams() + G.small_kernel + (gates_wanted() ? SFGPU_GATES : 0));
	if (was && snprintf(saved, sizeof(saved), "%s", was) < (int)sizeof(saved))
		setenv("CUDA_DEVICE_MAX_CONNECTIONS", want, 1);
	else
		saved[0] = 0;
	cu_result r = G.cu.CtxCreate(own, 0, dev);
	if (saved[0])
		setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved, 1);
	return r;
}

/*
 * With the kernel resident, does work on each copy stream still run? A stream that shares the
 * kernel's hardware queue would wait behind it for ever. Our context current.
 */
int streams_run(cu_stream *s, int n)
{
	cu_event ev[SFGPU_MAX_STREAMS] = {0};
	int ok = 1;
	for (int j = 0; j < n && ok; j++)
		ok = G.cu.EventCreate(&ev[j], CU_EVENT_DISABLE_TIMING_) == CU_SUCCESS &&
			G.cu.EventRecord(ev[j], s[j]) == CU_SUCCESS;
	int64_t t0 = gpu_now_ns();
	for (int j = 0; j < n && ok; j++) {
		cu_result r;
		while ((r = G.cu.EventQuery(ev[j])) == CU_ERROR_NOT_READY &&
		       gpu_now_ns() - t0 < 200000000LL) {
			gpu_nap();
		}
		ok = r == CU_SUCCESS;
	}
	for (int j = 0; j < n; j++)
		if (ev[j])
			G.cu.EventDestroy(ev[j]); /* released by the driver once complete */
	return ok;
}

/*
 * Under G.imp_lock, with entry i's application context current: make our own context on its
 * device and its streams (SIMFABRIC_GPU_STREAMS), when auto under MPS or
 * SIMFABRIC_GPU_COPY_CONTEXT=own asks. Said once in the log either way; on failure auto copies
 * in the application's context and own fails the copies (copy_stream).
 */
static void own_context(int i)
{
	cu_device dev = 0;
	int mps = 0;
	if (G.copy_ctx == COPY_CTX_APP)
		return;
	const char *step = "cuCtxGetDevice";
	cu_result r = G.cu.CtxGetDevice(&dev);
	if (r == CU_SUCCESS && G.cu.DeviceGetAttribute)
		G.cu.DeviceGetAttribute(&mps, CU_DA_MPS_ENABLED, dev);
	if (r == CU_SUCCESS && G.copy_ctx == COPY_CTX_AUTO && !mps)
		return; /* auto: our own context under MPS only (see copy_stream) */
	if (r == CU_SUCCESS && !(G.cu.CtxCreate && G.cu.MemcpyPeerAsync)) {
		step = "cuCtxCreate_v2 or cuMemcpyPeerAsync (a driver without them)";
		r = -1;
	}
	cu_ctx own = NULL, popped;
	cu_stream s[SFGPU_MAX_STREAMS] = {0};
	int n = 0;
	if (r == CU_SUCCESS) {
		step = "cuCtxCreate";
		r = own_ctx_create(&own, dev); /* and makes it current */
		if (r == CU_SUCCESS) {
			step = "cuStreamCreateWithPriority";
			while (n < own_streams() && (r = gpu_top_stream(&s[n])) == CU_SUCCESS)
				n++;
			if (n) /* fewer streams than asked is still a copy context */
				r = CU_SUCCESS;
			G.cu.CtxPopCurrent(&popped);
		}
	}
	if (r == CU_SUCCESS && !G.small_kernel && G.cu.CtxPushCurrent(own) == CU_SUCCESS) {
		gates_make(i, own, s, n);
		G.cu.CtxPopCurrent(&popped);
	}
	if (r == CU_SUCCESS) {
		G.streams[i].own = own;
		memcpy(G.streams[i].own_s, s, sizeof(s));
		G.streams[i].own_n = n;
		/* MPS only: without it our context time-slices with the application's, and a
		 * kernel that never ends would take every other slice */
		if (G.small_kernel && mps && G.cu.CtxPushCurrent(own) == CU_SUCCESS) {
			struct gkern *k = kern_start();
			if (k && !streams_run(s, n)) {
				*k->stop = 1; /* frees the queue it blocks */
				PWARN("GPU small copies: a copy stream shares a hardware queue "
				      "with the "
				      "kernel (CUDA_DEVICE_MAX_CONNECTIONS): no kernel");
				k = NULL;
			}
			G.streams[i].kern = k;
			G.cu.CtxPopCurrent(&popped);
		}
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU copies run in a CUDA context of their own on device %d, %d stream(s) "
		      "and %d gate(s) for armed copies (SIMFABRIC_GPU_COPY_CONTEXT=%s%s): no "
		      "application stream shares their hardware queues",
		      (int)dev, n, G.streams[i].ngates, G.copy_ctx == COPY_CTX_OWN ? "own" : "auto",
		      mps ? ", under MPS" : "; without MPS contexts time-slice");
		return;
	}
	/* the context, if made, stays: destroying it could disturb the application's */
	if (G.copy_ctx == COPY_CTX_OWN)
		PWARN("SIMFABRIC_GPU_COPY_CONTEXT=own: %s failed on device %d (%s); no GPU copy "
		      "can "
		      "start",
		      step, (int)dev, r == -1 ? "missing" : gpu_cuerr(r));
	else
		PWARN("GPU copies: %s failed on device %d (%s), so they run in the application's "
		      "context, where under MPS a copy can wait behind a kernel that waits for it "
		      "(a hang). Under MPS every context's hardware queues come out of one pool: "
		      "give each rank fewer (CUDA_DEVICE_MAX_CONNECTIONS=32 / ranks per GPU; "
		      "docs/gpu-path.md)",
		      step, (int)dev, r == -1 ? "missing" : gpu_cuerr(r));
}

/*
 * Where a sendComm's copies run: a stream in a context, one per application context (so per
 * device), made early (at setup when a context is current, else by the first copy), at the
 * highest priority. A copy must never wait for NCCL's kernel, which spins until this very copy
 * lands; on an H200 under MPS two things made it wait. (1) The GPU runs a context's streams on a
 * few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), assigned in order of creation, and a copy
 * queued behind the kernel never runs: a stream per comm hung LL128 and Simple at once, and one
 * early stream still shared a queue with one of PyTorch's dozens. (2) A device-to-device copy
 * may run as a kernel, and the ranks' spinning kernels can hold every SM (copy_in asks for the
 * copy engine). 4 PyTorch ranks' all_to_all hung with either fix alone and passed with both.
 * So under MPS (auto) the copies run in a context of our own, whose queues no application
 * stream shares, as a NIC's DMA engine is not behind the application's kernels; without MPS
 * (a GPU per rank) two contexts would time-slice, and auto stays in the application's. If our
 * context cannot be made (MPS hands out queues from one pool), auto falls back to the
 * application's with a WARN; SIMFABRIC_GPU_COPY_CONTEXT=own fails instead. self: the receiver is
 * in this process (its memory is in the application's context): always the application's stream.
 */
int copy_stream(cu_ctx app, int self, cu_ctx *ctx, cu_stream *out, char *why, size_t cap)
{
	pthread_mutex_lock(&G.imp_lock);
	int i, rc = 0;
	for (i = 0; i < G.nstreams; i++)
		if (G.streams[i].ctx == app)
			break;
	if (i == G.nstreams) {
		cu_stream s = NULL;
		if (G.nstreams == SFGPU_MAX_CTX) {
			snprintf(why, cap, "more than %d CUDA contexts copy in this process",
				 SFGPU_MAX_CTX);
			rc = -ENOSPC;
		} else {
			cu_result r = gpu_top_stream(&s);
			if (r != CU_SUCCESS) {
				snprintf(why, cap, "cuStreamCreateWithPriority: %s", gpu_cuerr(r));
				rc = -EIO;
			}
		}
		if (rc) {
			pthread_mutex_unlock(&G.imp_lock);
			return rc;
		}
		memset(&G.streams[i], 0, sizeof(G.streams[i]));
		G.streams[i].ctx = app;
		G.streams[i].s = s;
		G.nstreams++;
	}
	if (!G.streams[i].own_tried) {
		G.streams[i].own_tried = 1;
		own_context(i);
		if (!G.streams[i].own_n && G.copy_ctx != COPY_CTX_OWN &&
		    !getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
			/* Too late to set (CUDA read it at its init): say so now, not after a hang. */
			PWARN("GPU copies run in the application's CUDA context and "
			      "CUDA_DEVICE_MAX_CONNECTIONS is unset (CUDA's default: 8 hardware "
			      "queues): a copy may queue behind an NCCL kernel that waits for it, "
			      "and the job hangs. simfabric launch and run set it; under your own "
			      "launcher set it for every rank (32 with a GPU per rank; "
			      "docs/gpu-path.md), or SIMFABRIC_GPU=off");
	}
	if (!self && G.streams[i].own_n) {
		*ctx = G.streams[i].own;
		/* sendComms spread over the streams; each keeps one, so its copies stay in order */
		*out = G.streams[i].own_s[G.streams[i].own_next++ % (unsigned)G.streams[i].own_n];
	} else if (!self && G.copy_ctx == COPY_CTX_OWN) {
		snprintf(why, cap,
			 "SIMFABRIC_GPU_COPY_CONTEXT=own, but no copy context could be made on "
			 "this "
			 "device (the WARN at its first try says why)");
		rc = -EIO;
	} else {
		*ctx = app;
		*out = G.streams[i].s;
	}
	pthread_mutex_unlock(&G.imp_lock);
	return rc;
}

static void tx_sync(struct sfgpu_tx *t);

/*
 * Make room in a sendComm's full list of regions: let go of the least recently used one
 * whose copies are done (if none is, wait for this sendComm's copies first). Regions are
 * never reused, so a receiver that registers and deregisters buffers (user buffers, graphs)
 * would otherwise fill the list and keep its freed memory mapped here.
 */
static void tx_evict(struct sfgpu_tx *t)
{
	/* the least recently used of those whose copies are all done, if any: syncing would let
	 * armed copies go early */
	int lru = 0;
	for (int i = 1; i < t->nimp; i++) {
		int done = t->imp[i].last < t->done_ticket,
		    lru_done = t->imp[lru].last < t->done_ticket;
		if (done > lru_done || (done == lru_done && t->imp[i].last < t->imp[lru].last))
			lru = i;
	}
	if (t->imp[lru].last >= t->done_ticket)
		tx_sync(t); /* its last copy may still be running */
	pthread_mutex_lock(&G.imp_lock);
	if (t->imp[lru].last < t->done_ticket && !t->gate_failed)
		import_put(t->imp[lru].im);
	/* else a copy may still write into it (or a failed armed one): it stays mapped (a leak
	 * beats a fault) */
	pthread_mutex_unlock(&G.imp_lock);
	t->imp[lru] = t->imp[--t->nimp];
}

/* The region's mapping if this sendComm holds it already (no CUDA call), else NULL. */
static struct gimport *tx_cached(struct sfgpu_tx *t, const char *where, uint64_t region)
{
	for (int i = 0; i < t->nimp; i++)
		if (t->imp[i].im->region == region && !strcmp(t->imp[i].im->where, where)) {
			t->imp[i].last = t->next_ticket;
			return t->imp[i].im;
		}
	return NULL;
}

/* The region's mapping here, for a sendComm: its own list first, then the process's. */

static struct gimport *tx_region(struct sfgpu_tx *t, const char *where, uint64_t region)
{
	struct gimport *hit = tx_cached(t, where, region);
	if (hit)
		return hit;
	if (t->nimp == SFGPU_TX_IMPORTS)
		tx_evict(t);
	char why[256] = "";
	pthread_mutex_lock(&G.imp_lock);
	struct gimport *im = import_find(where, region, t->ctx);
	if (im)
		im->refs++;
	pthread_mutex_unlock(&G.imp_lock);
	if (!im) {
		/* no lock held while the peer's server answers: it may take seconds */
		struct gimport *fresh = !strcmp(where, G.where)
			? import_self(region, t->app, why, sizeof(why))
			: import_new(where, region, why, sizeof(why));
		if (!fresh) {
			PWARN("%s: cannot map the receiver's GPU buffer: %s", t->desc, why);
			return NULL;
		}
		pthread_mutex_lock(&G.imp_lock);
		im = import_find(where, region, t->ctx); /* another sendComm may have mapped it */
		if (!im) {
			im = fresh;
			fresh = NULL;
			im->next = G.imports;
			G.imports = im;
		}
		im->refs++;
		pthread_mutex_unlock(&G.imp_lock);
		if (fresh)
			import_unmap(fresh);
	}
	t->imp[t->nimp].im = im;
	t->imp[t->nimp].last = t->next_ticket;
	t->nimp++;
	return im;
}

/*
 * Enter the sendComm's copy context: its stream and events live there. In the application's
 * context it normally is the caller's already (NCCL's proxy threads keep their device's context
 * current) and this costs one call; otherwise it is pushed, and tx_leave pops it: the caller's
 * context is never changed behind its back. *pushed says which. self (the first copy only): the
 * receiver is in this process.
 */
static int tx_enter(struct sfgpu_tx *t, int self, int *pushed)
{
	cu_ctx cur = NULL;
	*pushed = 0;
	G.cu.CtxGetCurrent(&cur);
	if (__builtin_expect(t->stream != NULL, 1)) {
		if (cur != t->ctx) {
			cu_result r = G.cu.CtxPushCurrent(t->ctx);
			if (r != CU_SUCCESS) {
				PWARN("%s: cannot enter the copy context: cuCtxPushCurrent: %s",
				      t->desc, gpu_cuerr(r));
				return -EIO;
			}
			*pushed = 1;
		}
		return 0;
	}
	char why[160];
	if (!cur) {
		PWARN("%s: cannot copy to the GPU: no CUDA context is current in this thread",
		      t->desc);
		return -EIO;
	}
	cu_ctx ctx = NULL;
	int rc = copy_stream(cur, self, &ctx, &t->stream, why, sizeof(why));
	if (rc) {
		t->stream = NULL;
		PWARN("%s: cannot copy to the GPU: %s", t->desc, why);
		return rc;
	}
	t->ctx = ctx;
	t->app = cur;
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < G.nstreams && !self; i++)
		if (G.streams[i].own == ctx && ctx) {
			t->kern = G.streams[i].kern;
			t->gates = G.streams[i].ngates ? G.streams[i].gates : NULL;
			t->ngates = G.streams[i].ngates;
		}
	t->q = queue_for(t->stream, ctx);
	pthread_mutex_unlock(&G.imp_lock);
	if (ctx != cur) {
		cu_result r = G.cu.CtxPushCurrent(ctx);
		if (r != CU_SUCCESS) {
			PWARN("%s: cannot enter the copy context: cuCtxPushCurrent: %s", t->desc,
			      gpu_cuerr(r));
			return -EIO;
		}
		*pushed = 1;
	}
	return 0;
}

static void tx_leave(int pushed)
{
	cu_ctx ignored;
	if (pushed)
		G.cu.CtxPopCurrent(&ignored);
}

/* Store n in the gate's word unless it is there already or beyond (it only grows). */
static void gate_let_go(struct ggate *g, uint32_t n)
{
	uint32_t cur = __atomic_load_n(g->word, __ATOMIC_RELAXED);
	while ((int32_t)(n - cur) > 0 &&
	       !__atomic_compare_exchange_n(g->word, &cur, n, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
}

static cu_result batch_state(struct sfgpu_tx *t, uint32_t slot, int *failed);

/* The oldest armed ticket whose end this sendComm has not seen, or UINT64_MAX. */
static uint64_t oldest_armed(struct sfgpu_tx *t)
{
	while (t->arm_head != t->arm_tail) {
		uint64_t tk = t->arm_q[t->arm_head % SFGPU_TICKETS];
		uint32_t slot = (uint32_t)(tk % SFGPU_TICKETS);
		if (t->gated[slot] && t->gtk[slot] == tk)
			return tk;
		t->arm_head++;
	}
	return UINT64_MAX;
}

/*
 * Let the copies armed on n gates go once each must be due, and return then: none was armed
 * more than arm_ahead_ns before its arrival, so after that long from now (their senders may let
 * them go sooner; the caller may be the thread that would). owner: only gates it owns, whose
 * copies are its own (NULL: every gate).
 */
static void gates_let_go_when_due(struct ggate *const *gs, int n, const struct sfgpu_tx *owner)
{
	int64_t until = gpu_now_ns() + sfgpu_dma.arm_ahead_ns + 20000;
	for (int pending = n > 0; pending;) {
		pending = 0;
		pthread_mutex_lock(&G.gate_lock);
		for (int j = 0; j < n; j++) {
			if (owner && gs[j]->owner != owner)
				continue;
			if (!gate_fired(gs[j], gs[j]->armed) && gpu_now_ns() >= until)
				gate_let_go(gs[j], gs[j]->armed);
			pending |= !gate_fired(gs[j], gs[j]->armed);
		}
		pthread_mutex_unlock(&G.gate_lock);
		if (pending)
			gpu_nap();
	}
	issuer_kick();
}

/*
 * Let every copy this sendComm armed go, none early (gates_let_go_when_due), and wait for each
 * to end (a drain, a close, a failed channel, a mapping to let go of). Its own copies only: a
 * gate it no longer owns may hold another's, which wait for their arrivals.
 */
static void tx_fire_all(struct sfgpu_tx *t)
{
	if (!t->gated_out)
		return;
	struct ggate *gs[SFGPU_GATES];
	for (int k = 0; k < t->ngates; k++)
		gs[k] = &t->gates[k];
	gates_let_go_when_due(gs, t->ngates, t);
	for (uint32_t slot = 0; slot < SFGPU_TICKETS; slot++) {
		if (!t->gated[slot])
			continue;
		struct gqueue *q = t->gates[t->gk[slot]].q;
		queue_out(q);
		int failed = 0;
		while (batch_state(t, slot, &failed) == CU_ERROR_NOT_READY && !failed)
			gpu_nap();
		t->gate_failed |= failed; /* its copy may still write: its mapping stays */
		t->gated[slot] = 0;	  /* a failure is the poll's to report */
	}
	t->gated_out = 0;
}

/* Wait for this sendComm's copies (and any others on its stream). */
static void tx_sync(struct sfgpu_tx *t)
{
	int pushed;
	if (!t->stream || tx_enter(t, 0, &pushed))
		return;
	if (t->kern && t->kern_last)
		kern_wait(t->kern, t->kern_last);
	tx_fire_all(t);
	queue_out(t->q);
	if (G.cu.StreamSynchronize(t->stream) == CU_SUCCESS &&
	    (!t->kern || kern_done(t->kern, t->kern_last)))
		t->done_ticket = t->next_ticket;
	tx_leave(pushed);
}

/*
 * One copy into the receiver's memory (mapped in im->ctx) on the sendComm's stream, on a copy
 * engine where the driver takes the hint (cuMemcpyBatchAsync, CU_MEMCPY_FLAG_PREFER_OVERLAP_
 * WITH_COMPUTE, as NCCL's own copy-engine collectives ask): a device-to-device copy may
 * otherwise run as a kernel, which needs an SM, and under MPS NCCL's spinning kernels of
 * several ranks can hold them all (4 PyTorch ranks' all_to_all hung so, in our own context too).
 * Without the batch call (drivers before 12.8): in the application's context a plain copy; from
 * our own context a peer copy names both contexts (the source is the application's), and a host
 * source as host memory (memory pinned by cuMemHostRegister without PORTABLE looks pageable from
 * our context: staged, still correct).
 */
static cu_result copy_in(struct sfgpu_tx *t, const struct gimport *im, cu_ptr dst, const void *src,
			 uint64_t len)
{
	if (G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1) {
		cu_ptr d = dst, sp = (cu_ptr)(uintptr_t)src;
		size_t n = len;
		return gpu_batch_copy(&d, &sp, &n, 1, t->stream);
	}
	if (t->ctx == t->app)
		return G.cu.MemcpyAsync(dst, (cu_ptr)(uintptr_t)src, len, t->stream);
	if (sfgpu_is_device(src))
		return G.cu.MemcpyPeerAsync(dst, im->ctx, (cu_ptr)(uintptr_t)src, t->app, len,
					    t->stream);
	return G.cu.MemcpyHtoDAsync(dst, src, len, t->stream);
}

/*
 * The model's corrupted bits, flipped in the receiver's copy after the copy, in stream order:
 * read back from there (the copy made it the source's), changed, written again.
 */
static cu_result flip_bits(struct sfgpu_tx *t, cu_ptr dst, const struct chan_flip *flips,
			   uint32_t nflips)
{
	cu_result r = CU_SUCCESS;
	for (uint32_t k = 0; r == CU_SUCCESS && k < nflips; k++) {
		uint8_t b = 0;
		/* on our own stream, never the legacy one: that would wait for the application's
		 * kernels, which may be waiting for us */
		r = G.cu.MemcpyDtoHAsync(&b, dst + flips[k].off, 1, t->stream);
		if (r == CU_SUCCESS)
			r = G.cu.StreamSynchronize(t->stream);
		b ^= flips[k].mask;
		if (r == CU_SUCCESS) /* from pageable memory: staged before the call returns */
			r = G.cu.MemcpyHtoDAsync(dst + flips[k].off, &b, 1, t->stream);
	}
	return r;
}

/* Does the copy fit the receiver's region? Checked before anything is issued: a bad copy would
 * poison the application's context. Said if not. */
static int fits(const struct sfgpu_tx *t, const struct gimport *im, uint64_t region, uint64_t off,
		uint64_t len)
{
	if (off <= im->size && len <= im->size - off)
		return 1;
	PWARN("%s: a copy of %llu bytes at offset %llu does not fit the receiver's region "
	      "%llu (%llu bytes)",
	      t->desc, (unsigned long long)len, (unsigned long long)off, (unsigned long long)region,
	      (unsigned long long)im->size);
	return 0;
}

/*
 * The event slot of the sendComm's next ticket, made ready for a copy of len bytes, plain
 * (gate -1) or armed on gate k with number n.
 */
static uint32_t slot_take(struct sfgpu_tx *t, uint64_t len, int gate, uint32_t n)
{
	uint32_t slot = (uint32_t)(t->next_ticket % SFGPU_TICKETS);
	t->kseq[slot] = 0;
	t->t_start[slot] = 0; /* stamped by the first poll: keeps the clock off this path */
	t->len[slot] = len;
	t->gk[slot] = (int8_t)gate;
	t->gated[slot] = gate >= 0;
	t->gseq[slot] = n;
	t->gtk[slot] = t->next_ticket;
	t->n_copies++;
	return slot;
}

static int dma_start(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		     uint64_t len, const struct chan_flip *flips, uint32_t nflips, uint64_t *ticket)
{
	struct sfgpu_tx *t = ctx;
	if (where[0] != '@' || !strchr(where, '#')) {
		PWARN("%s: the receiver published no GPU export server ('%.20s')", t->desc, where);
		return -EPROTO;
	}
	/* A queued copy needs no context: enter it only for a first mapping or a copy now. */
	int pushed = 0, entered = 0, rc;
	int queued = t->q && !nflips && !t->kern;
	struct gimport *im = queued ? tx_cached(t, where, region) : NULL;
	if (!im) {
		rc = tx_enter(t, !strcmp(where, G.where), &pushed);
		if (rc)
			return rc;
		entered = 1;
		queued = t->q && !nflips && !t->kern; /* a first copy has just made its queue */
		im = tx_region(t, where, region);
		if (!im) {
			tx_leave(pushed);
			return -EIO;
		}
	}
	if (!fits(t, im, region, off, len)) {
		if (entered)
			tx_leave(pushed);
		return -ERANGE;
	}
	uint32_t slot = slot_take(t, len, -1, 0);
	if (queued) {
		queue_add(t->q, im->va + off, src, len, &t->batch[slot], t->desc, 0);
		if (entered)
			tx_leave(pushed);
		*ticket = t->next_ticket++;
		return 0;
	}
	t->batch[slot] = 0;
	cu_result r = CU_SUCCESS;
	uint64_t kseq = 0;
	if (t->kern && len && len <= G.small_max && !nflips && gpu_cpu_readable(src) &&
	    kern_copy(t->kern, im->va + off, src, len, &kseq) == 0) {
		tx_leave(pushed);
		t->kseq[slot] = t->kern_last = kseq;
		*ticket = t->next_ticket++;
		return 0;
	}
	queue_out(t->q); /* the stream keeps the tickets' order */
	if (len)
		r = copy_in(t, im, im->va + off, src, len);
	if (r == CU_SUCCESS && nflips)
		r = flip_bits(t, im->va + off, flips, nflips);
	if (r == CU_SUCCESS && !t->ev[slot])
		r = G.cu.EventCreate(&t->ev[slot], CU_EVENT_DISABLE_TIMING_);
	if (r == CU_SUCCESS)
		r = G.cu.EventRecord(t->ev[slot], t->stream);
	tx_leave(pushed);
	if (r != CU_SUCCESS) {
		PWARN("%s: copy of %llu bytes into region %llu: %s", t->desc,
		      (unsigned long long)len, (unsigned long long)region, gpu_cuerr(r));
		return -EIO;
	}
	*ticket = t->next_ticket++;
	return 0;
}

/*
 * A queued or batched copy: CU_SUCCESS done, CU_ERROR_NOT_READY not yet, else the event's error;
 * *failed set if its batch call failed (said then).
 */
static cu_result batch_state(struct sfgpu_tx *t, uint32_t slot, int *failed)
{
	struct gqueue *q = t->gk[slot] >= 0 ? t->gates[t->gk[slot]].q : t->q;
	uint64_t b = __atomic_load_n(&t->batch[slot], __ATOMIC_ACQUIRE);
	if (b == BATCH_QUEUED) {
		/* the issuer's job; if it is not going round, ours (never waiting for it) */
		if (!issuer_alive())
			queue_issue(q, ISSUE_TRY);
		b = __atomic_load_n(&t->batch[slot], __ATOMIC_ACQUIRE);
		if (b == BATCH_QUEUED)
			return CU_ERROR_NOT_READY;
	}
	if (b == BATCH_FAILED) {
		*failed = 1;
		return CU_ERROR_NOT_READY;
	}
	if (b <= atomic_load_explicit(&q->completed, memory_order_acquire))
		return CU_SUCCESS;
	if (t->gated[slot] && !gate_fired(&t->gates[t->gk[slot]], t->gseq[slot]))
		return CU_ERROR_NOT_READY; /* not let go yet: nothing to ask the driver */
	/* The issuer reaps ended batches; ask the driver here only when it is not going round.
	 * (An event reused by a later batch says not ready: only once b has ended, which the
	 * next look at completed sees.) */
	if (issuer_alive())
		return CU_ERROR_NOT_READY;
	cu_result r = G.cu.EventQuery(q->ev[b % SFGPU_BATCH_EVENTS]);
	if (r == CU_SUCCESS)
		queue_ended(q, b);
	return r;
}

static int dma_poll(void *ctx, uint64_t ticket)
{
	struct sfgpu_tx *t = ctx;
	uint32_t slot = (uint32_t)(ticket % SFGPU_TICKETS);
	cu_result r;
	if (t->kseq[slot])
		r = kern_done(t->kern, t->kseq[slot]) ? CU_SUCCESS : CU_ERROR_NOT_READY;
	else if (__atomic_load_n(&t->batch[slot], __ATOMIC_RELAXED)) {
		int failed = 0;
		r = batch_state(t, slot, &failed);
		if (failed && t->gk[slot] >= 0)
			t->gate_failed = 1; /* its copy may still write: its mapping stays */
		if (failed)
			return -EIO;
	} else
		r = G.cu.EventQuery(t->ev[slot]);
	if (r == CU_SUCCESS) {
		if (t->gated[slot]) {
			t->gated[slot] = 0;
			t->gated_out--;
		}
		/* one stream: earlier copies are done too, unless the kernel still has some; armed
		 * ones (on gates of their own) only up to the oldest whose end is not yet seen */
		else if (!t->kseq[slot] && t->gk[slot] < 0 && ticket >= t->done_ticket &&
			 (!t->kern || kern_done(t->kern, t->kern_last))) {
			uint64_t cap = t->gated_out ? oldest_armed(t) : UINT64_MAX;
			uint64_t d = ticket + 1 < cap ? ticket + 1 : cap;
			if (d > t->done_ticket)
				t->done_ticket = d;
		}
		return 1;
	}
	if (r == CU_ERROR_NOT_READY) {
		/* A copy the GPU never runs hangs the job silently: say so once per comm. */
		int64_t now = gpu_now_ns();
		if (!t->t_start[slot])
			t->t_start[slot] = now;
		else if (t->kseq[slot] && now - t->t_start[slot] > 1000000 &&
			 (r = G.cu.EventQuery(t->kern->ended)) != CU_ERROR_NOT_READY &&
			 !kern_done(t->kern, t->kseq[slot])) {
			/* the kernel has returned (or faulted) with this copy undone */
			PWARN("%s: the small-copy kernel ended (%s) before copying ticket %llu",
			      t->desc, r == CU_SUCCESS ? "stopped" : gpu_cuerr(r),
			      (unsigned long long)ticket);
			return -EIO;
		} else if (now - t->t_start[slot] > SFGPU_SLOW_NS && !t->slow_warned++)
			PWARN("%s: a copy of %llu bytes into the receiver's GPU memory (ticket "
			      "%llu) "
			      "has not completed after %lld ms; the GPU is not running this "
			      "process's "
			      "copies (raise CUDA_DEVICE_MAX_CONNECTIONS: docs/gpu-path.md)",
			      t->desc, (unsigned long long)t->len[slot], (unsigned long long)ticket,
			      (long long)((now - t->t_start[slot]) / 1000000));
		return 0;
	}
	PWARN("%s: the copy into the receiver's GPU memory failed: %s", t->desc, gpu_cuerr(r));
	return -EIO;
}

static void dma_drain(void *ctx)
{
	tx_sync(ctx);
}

/*
 * An armed copy (chan_dma.arm): from device memory only (a host source may be read by the
 * driver when the copy is queued, or staged through memory the wait would hold), on a gate this
 * sendComm owns or one holding nothing not yet let go, queued for the issuer behind the wait for
 * its number. -EOPNOTSUPP where it cannot be (no gates here, all busy, a first copy to set up).
 */
static int dma_arm(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		   int src_dev, uint64_t len, uint64_t *ticket)
{
	struct sfgpu_tx *t = ctx;
	if (!src_dev || !len || !t->gates || !t->q || where[0] != '@')
		return -EOPNOTSUPP;
	struct gimport *im = tx_cached(t, where, region);
	if (!im) /* mapped by a first start (which may talk to the peer): not here */
		return -EOPNOTSUPP;
	if (!fits(t, im, region, off, len))
		return -ERANGE;
	int k, free_k = -1;
	uint32_t n = 0;
	pthread_mutex_lock(&G.gate_lock);
	for (k = G.arm_draining ? t->ngates : 0; k < t->ngates; k++) {
		struct ggate *g = &t->gates[k];
		uint32_t unfired = g->armed - __atomic_load_n(g->word, __ATOMIC_ACQUIRE);
		if (g->owner == t && unfired < SFGPU_GATE_UNFIRED)
			break;
		if (!unfired && free_k < 0)
			free_k = k;
	}
	if (k == t->ngates)
		k = G.arm_draining ? -1 : free_k;
	if (k >= 0) {
		t->gates[k].owner = t;
		n = ++t->gates[k].armed;
	}
	pthread_mutex_unlock(&G.gate_lock);
	if (k < 0)
		return -EOPNOTSUPP;
	uint32_t slot = slot_take(t, len, k, n);
	if (t->gated_out++)
		(void)oldest_armed(t); /* pops those seen ended: the queue spans < SFGPU_TICKETS */
	else
		t->arm_head = t->arm_tail;
	t->arm_q[t->arm_tail++ % SFGPU_TICKETS] = t->next_ticket;
	t->n_armed++;
	queue_add(t->gates[k].q, im->va + off, src, len, &t->batch[slot], t->desc, n);
	*ticket = t->next_ticket++;
	return 0;
}

/* Let an armed copy go (chan_dma.fire): a store, and a word to the issuer, which sees it end. */
static void dma_fire(void *ctx, uint64_t ticket)
{
	struct sfgpu_tx *t = ctx;
	uint32_t slot = (uint32_t)(ticket % SFGPU_TICKETS);
	if (t->gk[slot] < 0 || !t->gated[slot])
		return; /* let go already (tx_fire_all) */
	gate_let_go(&t->gates[t->gk[slot]], t->gseq[slot]);
	issuer_kick();
}

struct chan_dma sfgpu_dma = {.start = dma_start,
			     .poll = dma_poll,
			     .drain = dma_drain,
			     .arm = dma_arm,
			     .fire = dma_fire,
			     .arm_ahead_ns = SFGPU_ARM_AHEAD_NS};

void sfgpu_drain_all(void)
{
	cu_stream s[(1 + SFGPU_MAX_STREAMS + SFGPU_GATES) * SFGPU_MAX_CTX];
	struct gkern *ks[SFGPU_MAX_CTX];
	uint64_t kn[SFGPU_MAX_CTX]; /* the last descriptor each kernel had been given */
	int n = 0, nk = 0;
	pthread_mutex_lock(&G.imp_lock);
	int nq = G.nqueues;
	pthread_mutex_unlock(&G.imp_lock);
	for (int i = 0; i < nq; i++) /* queues are never taken back: no lock needed to reach them */
		queue_out(&G.queues[i]);
	/* Armed copies: none is armed meanwhile, and every armed one goes, none early; the wait
	 * holds no lock that a copy needs. */
	struct ggate *gs[SFGPU_MAX_CTX * SFGPU_GATES];
	int ng = 0;
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < G.nstreams; i++)
		for (int k = 0; k < G.streams[i].ngates; k++)
			gs[ng++] = &G.streams[i].gates[k];
	pthread_mutex_unlock(&G.imp_lock);
	pthread_mutex_lock(&G.gate_lock);
	G.arm_draining++;
	pthread_mutex_unlock(&G.gate_lock);
	gates_let_go_when_due(gs, ng, NULL);
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < G.nstreams; i++) {
		s[n++] = G.streams[i].s;
		for (int k = 0; k < G.streams[i].own_n; k++)
			s[n++] = G.streams[i].own_s[k];
		for (int k = 0; k < G.streams[i].ngates; k++)
			s[n++] = G.streams[i].gates[k].s;
		if (G.streams[i].kern) {
			ks[nk] = G.streams[i].kern;
			pthread_mutex_lock(&ks[nk]->lock);
			kn[nk] = ks[nk]->next - 1;
			pthread_mutex_unlock(&ks[nk]->lock);
			nk++;
		}
	}
	pthread_mutex_unlock(&G.imp_lock);
	/* each stream once: a stream handle names its context, any thread may wait on it */
	for (int i = 0; i < n; i++)
		G.cu.StreamSynchronize(s[i]);
	for (int i = 0; i < nk; i++)
		kern_wait(ks[i], kn[i]);
	pthread_mutex_lock(&G.gate_lock);
	G.arm_draining--;
	pthread_mutex_unlock(&G.gate_lock);
}

void sfgpu_tx_free(struct sfgpu_tx *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&G.imp_lock);
	for (struct sfgpu_tx **pp = &G.txs; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&G.imp_lock);
	int pushed;
	if (t->n_copies)
		PINFO(NCCL_NET, "%s: %llu GPU copies, %llu of them armed ahead of their arrival",
		      t->desc, (unsigned long long)t->n_copies, (unsigned long long)t->n_armed);
	tx_fire_all(t); /* its armed copies name its batch[] too, and read the caller's buffers */
	pthread_mutex_lock(&G.gate_lock);
	for (int k = 0; k < t->ngates; k++)
		if (t->gates[k].owner == t)
			t->gates[k].owner = NULL;
	pthread_mutex_unlock(&G.gate_lock);
	queue_out(t->q); /* its queued copies name its batch[]: out before it goes */
	if (t->stream)	 /* before any unmap, whatever happens below; the context's stream stays */
		G.cu.StreamSynchronize(t->stream);
	int leak = (t->kern && t->kern_last && kern_wait(t->kern, t->kern_last)) || t->gate_failed;
	if (t->stream && tx_enter(t, 0, &pushed) == 0) {
		for (int i = 0; i < SFGPU_TICKETS; i++)
			if (t->ev[i])
				G.cu.EventDestroy(t->ev[i]);
		tx_leave(pushed);
	}
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < t->nimp && !leak; i++) /* the kernel may still write: keep */
		import_put(t->imp[i].im);
	pthread_mutex_unlock(&G.imp_lock);
	free(t);
}
