/* SPDX-License-Identifier: MIT */
/*
 * gpu_issue.c - the copies' queues and the issuer thread that issues them in batches and reaps
 * their events (gpu_int.h; docs/gpu-path.md, "Who issues the copies").
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

/* ---- batches (struct gqueue) and their issuer ------------------------------------------ */

/*
 * The issuer: a thread of ours that issues the queued copies, so that NCCL's proxy thread,
 * which serves every channel of the process, pays a queue entry per message (well under a
 * microsecond) instead of a copy launch and an event record (4-6 us under MPS, most of what it
 * spent per LL step). It takes every copy queued while it was issuing the last batch, so batches
 * grow with the load, as a NIC's doorbell batching does. It spins SFGPU_SPIN_NS after its last
 * batch (a message's latency must not include a wake-up), then sleeps until the next copy comes.
 * One per process, started by the first copy; stopped at exit. Without it (it could not be
 * started, or a fork's child) every copy is issued by its poster, as with
 * SIMFABRIC_GPU_BATCH_MAX=1.
 */
#define SFGPU_SPIN_NS 100000
#define SFGPU_STUCK_NS 200000 /* an issuer not seen this long: pollers issue and reap */
#define SFGPU_BACKOFF_NS 2000 /* between looks at a long batch, after SFGPU_BACKOFF_AFTER */
#define SFGPU_BACKOFF_AFTER 64
static int64_t stuck_ns = SFGPU_STUCK_NS; /* a variable for the tests */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	_Atomic int work;     /* copies queued since the issuer last looked */
	_Atomic int sleeping; /* it waits on cv */
	_Atomic int stop;
	_Atomic int running;  /* in this process (not in a fork's child) */
	_Atomic int64_t beat; /* when it last went round its loop (ns) */
	int failed; /* it could not be started, or this is a fork's child: posters issue */
	int hooked; /* atexit and atfork handlers registered */
	pthread_t th;
} W = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/*
 * The queue of stream st (in ctx), made on its first use; under G.imp_lock. NULL without the
 * batch call (drivers before 12.8) or with SIMFABRIC_GPU_ISSUER=sender: each sender issues its
 * own copies, one call and one event each.
 */
struct gqueue *queue_for(cu_stream st, cu_ctx ctx)
{
	if (!(G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1) || G.sender_issues || !G.batch_max)
		return NULL;
	int n = G.nqueues;
	for (int i = 0; i < n; i++)
		if (G.queues[i].s == st)
			return &G.queues[i];
	if (n == (int)(sizeof(G.queues) / sizeof(G.queues[0])))
		return NULL;
	struct gqueue *q = &G.queues[n];
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->issue, NULL);
	q->s = st;
	q->ctx = ctx;
	__atomic_store_n(&G.nqueues, n + 1, __ATOMIC_RELEASE); /* the issuer reads it unlocked */
	return q;
}

/* Batch b (and so every earlier one) has ended. Any thread. */
void queue_ended(struct gqueue *q, uint64_t b)
{
	uint64_t c = atomic_load_explicit(&q->completed, memory_order_acquire);
	while (c < b &&
	       !atomic_compare_exchange_weak_explicit(&q->completed, &c, b, memory_order_acq_rel,
						      memory_order_acquire))
		;
}

/*
 * Make q's context current to issue on its stream: the issuer keeps it (its own thread), any
 * other thread pushes it for the while (*pushed: pop it after, queue_leave).
 */
static cu_result queue_enter(const struct gqueue *q, int how, int *pushed)
{
	cu_ctx cur = NULL;
	*pushed = 0;
	cu_result r = G.cu.CtxGetCurrent(&cur);
	if (r == CU_SUCCESS && cur != q->ctx) {
		if (how == ISSUE_BY_ISSUER)
			r = G.cu.CtxSetCurrent(q->ctx); /* our own thread: it stays */
		else
			*pushed = (r = G.cu.CtxPushCurrent(q->ctx)) == CU_SUCCESS;
	}
	return r;
}

static void queue_leave(int pushed)
{
	cu_ctx popped;
	if (pushed)
		G.cu.CtxPopCurrent(&popped);
}

/*
 * A gate's queue (queue_issue): each armed copy as a batch of its own, the wait for its number
 * first, so that each ends (and is seen to) on its own. As many as have a free event, in order;
 * the rest stay queued (an event is held by a copy not yet let go: SFGPU_GATE_UNFIRED keeps them
 * fewer than the events). q->issue held; returns with it released: 1 all out, 0 some left.
 */
static int gate_issue(struct gqueue *q, int how)
{
	cu_ptr dst[SFGPU_BATCH_MAX], src[SFGPU_BATCH_MAX];
	size_t len[SFGPU_BATCH_MAX];
	uint32_t gseq[SFGPU_BATCH_MAX];
	uint64_t *mark[SFGPU_BATCH_MAX];
	const char *desc = NULL;
	pthread_mutex_lock(&q->lock);
	int n = q->n;
	for (int i = 0; i < n; i++) {
		dst[i] = q->dst[i], src[i] = q->src[i], len[i] = q->len[i];
		gseq[i] = q->gseq[i], mark[i] = q->mark[i];
	}
	if (n)
		desc = q->desc[0];
	pthread_mutex_unlock(&q->lock);
	if (how == ISSUE_BY_ISSUER && n > SFGPU_GATE_TURN)
		n = SFGPU_GATE_TURN; /* the rest next time round, after the copies due now */
	int pushed = 0, done = 0;
	cu_result r = n ? queue_enter(q, how, &pushed) : CU_SUCCESS;
	for (; done < n; done++) {
		uint64_t b = atomic_load_explicit(&q->issued, memory_order_relaxed) + 1;
		cu_event *e = &q->ev[b % SFGPU_BATCH_EVENTS];
		if (r == CU_SUCCESS && *e &&
		    atomic_load_explicit(&q->completed, memory_order_acquire) + SFGPU_BATCH_EVENTS <
			    b) {
			if (G.cu.EventQuery(*e) != CU_SUCCESS)
				break; /* its copy still waits or runs: later */
			queue_ended(q, b - SFGPU_BATCH_EVENTS);
		}
		cu_result ri = r;
		if (ri == CU_SUCCESS && !*e)
			ri = G.cu.EventCreate(e, CU_EVENT_DISABLE_TIMING_);
		/* never the copy without its wait before it: it would land early */
		if (ri == CU_SUCCESS)
			ri = G.cu.StreamWaitValue32(q->s, q->gate->word_d, gseq[done],
						    CU_STREAM_WAIT_VALUE_GEQ_);
		if (ri == CU_SUCCESS && len[done])
			ri = gpu_batch_copy(&dst[done], &src[done], &len[done], 1, q->s);
		if (ri == CU_SUCCESS)
			ri = G.cu.EventRecord(*e, q->s);
		if (ri == CU_SUCCESS) {
			__atomic_store_n(&q->bseq[b % SFGPU_BATCH_EVENTS], gseq[done],
					 __ATOMIC_RELAXED); /* published by issued's release */
			atomic_store_explicit(&q->issued, b, memory_order_release);
		} else
			PWARN("%s: an armed copy of %zu bytes into a receiver's GPU memory: %s",
			      desc, len[done], gpu_cuerr(ri));
		__atomic_store_n(mark[done], ri == CU_SUCCESS ? b : BATCH_FAILED, __ATOMIC_RELEASE);
	}
	queue_leave(pushed);
	pthread_mutex_lock(&q->lock); /* posters only append meanwhile */
	int left = q->n - done;
	memmove(q->dst, q->dst + done, (size_t)left * sizeof(q->dst[0]));
	memmove(q->src, q->src + done, (size_t)left * sizeof(q->src[0]));
	memmove(q->len, q->len + done, (size_t)left * sizeof(q->len[0]));
	memmove(q->mark, q->mark + done, (size_t)left * sizeof(q->mark[0]));
	memmove(q->desc, q->desc + done, (size_t)left * sizeof(q->desc[0]));
	memmove(q->gseq, q->gseq + done, (size_t)left * sizeof(q->gseq[0]));
	q->n = left;
	if (left)
		q->since = gpu_now_ns();
	pthread_mutex_unlock(&q->lock);
	pthread_mutex_unlock(&q->issue);
	return done == n && !left;
}

/*
 * Issue what is queued as one batch, on a copy engine where the driver takes the hint (see
 * copy_in), and record the batch's event; each copy's sendComm learns its batch number (or
 * BATCH_FAILED, with a WARN). Any thread, one at a time per queue (q->issue); the pending list is
 * taken under q->lock, so posters never wait for the driver. how: ISSUE_BY_ISSUER (the issuer,
 * which keeps the stream's context current; others enter it for the while), ISSUE_WAIT, or
 * ISSUE_TRY (not if another issues now). 1 done (or nothing queued), 0 not now: another was
 * issuing (ISSUE_TRY), or the batch SFGPU_BATCH_EVENTS before is still running, whose event this
 * one needs (the copies stay queued; never dropped for a GPU that is merely slow).
 */
int queue_issue(struct gqueue *q, int how)
{
	cu_ptr dst[SFGPU_BATCH_MAX], src[SFGPU_BATCH_MAX];
	size_t len[SFGPU_BATCH_MAX], ncopies = 0;
	uint64_t *mark[SFGPU_BATCH_MAX];
	const char *desc = NULL;
	if (how == ISSUE_TRY) {
		if (pthread_mutex_trylock(&q->issue))
			return 0;
	} else
		pthread_mutex_lock(&q->issue);
	if (q->gate)
		return gate_issue(q, how);
	uint64_t b = atomic_load_explicit(&q->issued, memory_order_relaxed) + 1;
	cu_event *e = &q->ev[b % SFGPU_BATCH_EVENTS];
	if (*e &&
	    atomic_load_explicit(&q->completed, memory_order_acquire) + SFGPU_BATCH_EVENTS < b) {
		if (G.cu.EventQuery(*e) != CU_SUCCESS) {
			pthread_mutex_lock(&q->lock);
			int64_t waited = q->n ? gpu_now_ns() - q->since : 0;
			pthread_mutex_unlock(&q->lock);
			if (waited > SFGPU_SLOW_NS && !q->ring_warned++)
				PWARN("%s: %d batches of copies are still running after %lld ms; "
				      "the "
				      "GPU is not running this process's copies (raise "
				      "CUDA_DEVICE_MAX_CONNECTIONS: docs/gpu-path.md)",
				      q->desc[0], SFGPU_BATCH_EVENTS,
				      (long long)(waited / 1000000));
			pthread_mutex_unlock(&q->issue);
			return 0;
		}
		queue_ended(q, b - SFGPU_BATCH_EVENTS);
	}
	pthread_mutex_lock(&q->lock);
	int n = q->n;
	for (int i = 0; i < n; i++) {
		mark[i] = q->mark[i];
		if (q->len[i]) { /* a message of 0 bytes only needs its place in the order */
			dst[ncopies] = q->dst[i], src[ncopies] = q->src[i];
			len[ncopies++] = q->len[i];
		}
	}
	if (n)
		desc = q->desc[0];
	q->n = 0;
	pthread_mutex_unlock(&q->lock);
	if (!n) {
		pthread_mutex_unlock(&q->issue);
		return 1;
	}
	int pushed;
	cu_result r = queue_enter(q, how, &pushed);
	if (r == CU_SUCCESS && !*e)
		r = G.cu.EventCreate(e, CU_EVENT_DISABLE_TIMING_);
	if (r == CU_SUCCESS && ncopies)
		r = gpu_batch_copy(dst, src, len, ncopies, q->s);
	if (r == CU_SUCCESS)
		r = G.cu.EventRecord(*e, q->s);
	queue_leave(pushed);
	if (r != CU_SUCCESS)
		PWARN("%s: a batch of %zu copies into receivers' GPU memory: %s", desc, ncopies,
		      gpu_cuerr(r));
	if (r == CU_SUCCESS)
		atomic_store_explicit(&q->issued, b, memory_order_release);
	for (int i = 0; i < n; i++)
		__atomic_store_n(mark[i], r == CU_SUCCESS ? b : BATCH_FAILED, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->issue);
	return 1;
}

/* Can batch b end yet? Not a gate's copy not yet let go: no driver call is spent asking. */
static int queue_may_end(const struct gqueue *q, uint64_t b)
{
	return !q->gate ||
		gate_fired(q->gate,
			   __atomic_load_n(&q->bseq[b % SFGPU_BATCH_EVENTS], __ATOMIC_RELAXED));
}

/*
 * Advance q->completed over the batches that have ended, oldest first (one query each, up to the
 * first still running): 1 if any ended. The issuer's job, so that NCCL's proxy thread, polling
 * its requests, reads a counter instead of calling the driver (whose calls serialize with the
 * issuer's: a poller that queried events delayed each batch by microseconds).
 */
static int queue_reap(struct gqueue *q)
{
	int any = 0;
	uint64_t issued = atomic_load_explicit(&q->issued, memory_order_acquire);
	uint64_t c = atomic_load_explicit(&q->completed, memory_order_acquire);
	while (c < issued && queue_may_end(q, c + 1) &&
	       G.cu.EventQuery(q->ev[(c + 1) % SFGPU_BATCH_EVENTS]) == CU_SUCCESS) {
		queue_ended(q, ++c);
		any = 1;
	}
	return any;
}

/* Is the issuer going round (it reaps and issues), or must pollers do it? */
int issuer_alive(void)
{
	return atomic_load_explicit(&W.running, memory_order_acquire) &&
		gpu_now_ns() - atomic_load_explicit(&W.beat, memory_order_relaxed) < stuck_ns;
}

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *issuer_main(void *arg)
{
	(void)arg;
	int64_t last = gpu_now_ns();
	int fruitless = 0; /* looks in a row at running batches that found none ended */
	while (!atomic_load(&W.stop)) {
		int64_t now = gpu_now_ns();
		atomic_store_explicit(&W.beat, now, memory_order_relaxed);
		int busy = 0, did = 0;
		if (atomic_exchange(&W.work, 0)) {
			/* after the exchange: a queue made by the copy that set work is seen. Copies
			 * due now first, then a few armed ones per gate (gate_issue), then again */
			int nq = __atomic_load_n(&G.nqueues, __ATOMIC_ACQUIRE);
			for (int pass = 0; pass < 2; pass++)
				for (int i = 0; i < nq; i++)
					if (!G.queues[i].gate == !pass)
						queue_issue(&G.queues[i], ISSUE_BY_ISSUER);
			did = 1;
		}
		int nq = __atomic_load_n(&G.nqueues, __ATOMIC_ACQUIRE);
		for (int i = 0; i < nq; i++) {
			struct gqueue *q = &G.queues[i];
			did |= queue_reap(q);
			uint64_t c = atomic_load(&q->completed);
			busy |= c < atomic_load(&q->issued) && queue_may_end(q, c + 1);
			if (q->n) /* left queued (its batch's event was not free): again */
				atomic_store(&W.work, 1);
		}
		if (did) {
			last = now;
			fruitless = 0;
			continue;
		}
		if (busy) {
			/* never asleep while a copy may end; after many looks at a long batch, look
			 * less often (each look is a driver call beside the application's) */
			int64_t until = ++fruitless > SFGPU_BACKOFF_AFTER ? now + SFGPU_BACKOFF_NS
									  : 0;
			do
				cpu_pause();
			while (until && gpu_now_ns() < until && !atomic_load(&W.work));
			continue;
		}
		fruitless = 0;
		if (now - last < SFGPU_SPIN_NS) {
			cpu_pause();
			continue;
		}
		pthread_mutex_lock(&W.lock);
		atomic_store(&W.sleeping, 1);
		while (!atomic_load(&W.work) && !atomic_load(&W.stop))
			pthread_cond_wait(&W.cv, &W.lock);
		atomic_store(&W.sleeping, 0);
		pthread_mutex_unlock(&W.lock);
		last = gpu_now_ns();
	}
	return NULL;
}

/* At exit: no thread of ours may be inside the driver while CUDA tears down (bounded). */
static void issuer_stop(void)
{
	if (!atomic_load(&W.running))
		return;
	pthread_mutex_lock(&W.lock);
	atomic_store(&W.stop, 1);
	pthread_cond_signal(&W.cv);
	pthread_mutex_unlock(&W.lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_timedjoin_np(W.th, NULL, &until))
		PWARN("GPU copies: the issuer thread has not ended 1 s after exit began (inside "
		      "the "
		      "CUDA driver?)");
	atomic_store(&W.running, 0);
}

/*
 * A fork's child has no issuer (and no usable CUDA): its posters issue. Its locks are made anew:
 * a thread of the parent may have held one at the fork.
 */
static void issuer_forked(void)
{
	atomic_store(&W.running, 0);
	W.failed = 1;
	pthread_mutex_init(&W.lock, NULL);
	pthread_cond_init(&W.cv, NULL);
	pthread_mutex_init(&G.gate_lock, NULL);
	for (int i = 0; i < G.nqueues; i++) {
		pthread_mutex_init(&G.queues[i].lock, NULL);
		pthread_mutex_init(&G.queues[i].issue, NULL);
	}
}

/* The issuer of this process, started on first use: 1 running, 0 none (posters issue). */
static int issuer_up(void)
{
	if (__builtin_expect(atomic_load_explicit(&W.running, memory_order_acquire), 1))
		return 1;
	pthread_mutex_lock(&W.lock);
	int up = atomic_load(&W.running);
	if (!up && !W.failed && !atomic_load(&W.stop)) {
		int rc = pthread_create(&W.th, NULL, issuer_main, NULL);
		if (rc) {
			W.failed = 1;
			PWARN("GPU copies: cannot start the thread that issues them (%s); each "
			      "sender issues its own",
			      strerror(rc));
		} else {
			atomic_store(&W.running, 1);
			if (!W.hooked) {
				atexit(issuer_stop);
				pthread_atfork(NULL, NULL, issuer_forked);
				W.hooked = 1;
			}
			up = 1;
		}
	}
	pthread_mutex_unlock(&W.lock);
	return up;
}

/*
 * Everything queued out now (a drain, a copy that must follow them in the stream, no issuer),
 * waiting for a batch's event to be free if need be.
 */
void queue_out(struct gqueue *q)
{
	while (q && !queue_issue(q, ISSUE_WAIT)) {
		queue_reap(q);
		gpu_nap();
	}
}

/* Queue one copy (len 0: its place in the order only); *mark learns its batch. */
void queue_add(struct gqueue *q, cu_ptr dst, const void *src, uint64_t len, uint64_t *mark,
	       const char *desc, uint32_t gseq)
{
	__atomic_store_n(mark, BATCH_QUEUED, __ATOMIC_RELAXED);
	for (;;) {
		pthread_mutex_lock(&q->lock);
		if ((uint64_t)q->n < G.batch_max)
			break;
		pthread_mutex_unlock(&q->lock);
		if (!queue_issue(q, ISSUE_WAIT)) /* full: the issuer is behind, help it */
			gpu_nap();		 /* (all batches' events in use: one must end) */
	}
	if (!q->n)
		q->since = gpu_now_ns();
	q->dst[q->n] = dst;
	q->src[q->n] = (cu_ptr)(uintptr_t)src;
	q->len[q->n] = len;
	q->mark[q->n] = mark;
	q->desc[q->n] = desc;
	q->gseq[q->n] = gseq;
	q->n++;
	pthread_mutex_unlock(&q->lock);
	if (!issuer_up()) {
		queue_out(q);
		return;
	}
	issuer_kick();
}

void issuer_kick(void)
{
	atomic_store(&W.work, 1);
	if (atomic_load(&W.sleeping)) {
		pthread_mutex_lock(&W.lock);
		pthread_cond_signal(&W.cv);
		pthread_mutex_unlock(&W.lock);
	}
}
