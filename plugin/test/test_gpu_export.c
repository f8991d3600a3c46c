/* SPDX-License-Identifier: MIT */
/*
 * test_gpu_export.c - the GPU path's export server, its client and the copy engine's
 * bookkeeping (plugin/gpu*.c), without a GPU: exports are planted by hand (a memfd stands in for
 * a cuMem POSIX fd, bytes for a legacy IPC handle) and asked for over the real socket and
 * protocol, as a sender would; the CUDA calls of the copy engine are stubs that record what
 * they were asked to do.
 */

#include "plugin/cudadrv.c"
#include "plugin/gpu.c"
#include "plugin/gpu_base.c"
#include "plugin/gpu_copy.c"
#include "plugin/gpu_issue.c"
#include "plugin/gpu_kern.c"
#include "plugin/gpu_share.c"
#include "plugin/ncclenv.c"

#include <sys/mman.h>
#include <sys/stat.h>

#include "sim/test/check.h"

_Atomic(ncclDebugLogger_t) plog_fn; /* silent: no NCCL here */

/* ---- a stub CUDA driver: contexts are tokens, copies are recorded ---------------------- */

#define CTX_A ((cu_ctx)(uintptr_t)0xA0)
#define CTX_B ((cu_ctx)(uintptr_t)0xB0)
#define MAPPED (1u << 20) /* what every legacy handle really maps */
static __thread cu_ctx cur, stack[4];
static __thread int depth;
static int opens, closes;
static cu_ptr last_dst;
static cu_ctx open_ctx, close_ctx; /* current at the last IPC open and close */
static cu_result s_get(cu_ctx *c)
{
	*c = cur;
	return 0;
}
static cu_result s_set(cu_ctx c)
{
	cur = c;
	return 0;
}
static cu_result s_push(cu_ctx c)
{
	stack[depth++] = cur;
	cur = c;
	return 0;
}
static cu_result s_pop(cu_ctx *c)
{
	*c = cur;
	cur = stack[--depth];
	return 0;
}
static cu_result s_dev(cu_device *d)
{
	*d = 0;
	return 0;
}
static cu_result s_open(cu_ptr *p, struct cu_ipc_handle h, unsigned f)
{
	(void)h, (void)f;
	open_ctx = cur;
	*p = 0x7f0000000000ull + ((cu_ptr)++opens << 32);
	return 0;
}
static cu_result s_range(cu_ptr *b, size_t *n, cu_ptr p)
{
	*b = p, *n = MAPPED;
	return 0;
}
static cu_result s_close(cu_ptr p)
{
	(void)p, closes++;
	close_ctx = cur;
	return 0;
}
static cu_result s_cpy(cu_ptr d, cu_ptr s, size_t n, cu_stream st)
{
	(void)s, (void)n, (void)st;
	last_dst = d;
	return 0;
}
static uintptr_t next_event = 8;
static cu_event k_ended_ev;    /* the event recorded after the kernel (on its stream) */
static cu_stream k_stream;     /* the stream it was launched on */
static volatile int k_running; /* the kernel thread has not returned */
static cu_result s_evc(cu_event *e, unsigned f)
{
	(void)f, *e = (cu_event)(next_event += 8);
	return 0;
}
static cu_result s_evd(cu_event e)
{
	(void)e;
	return 0;
}
static void ev_gate_note(cu_event e, cu_stream s);
static cu_result s_evr(cu_event e, cu_stream s)
{
	if (s && s == k_stream)
		k_ended_ev = e; /* completes when the kernel returns */
	ev_gate_note(e, s);
	return 0;
}
static int flips_read, flips_written; /* a corrupted copy's bytes, read back and written */
static cu_result s_dtoh(void *d, cu_ptr sp, size_t n, cu_stream st)
{
	(void)sp, (void)st;
	memset(d, 0, n);
	flips_read++;
	return 0;
}
static cu_result s_htod(cu_ptr d, const void *sp, size_t n, cu_stream st)
{
	(void)d, (void)sp, (void)n, (void)st;
	flips_written++;
	return 0;
}
/* cuStreamWaitValue32: a stream's work after a wait runs once the word allows. An event recorded
 * on a stream behind a wait completes only then; with share_queue, so does one recorded on any
 * stream while a wait is pending (streams sharing a hardware queue). Calls are logged in order. */
static pthread_mutex_t wv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	cu_stream s;
	cu_ptr addr;
	uint32_t val;
} wv_last[64];
static int wv_n, waits, share_queue, share_gates; /* share_gates: gates share one queue */
static struct {
	cu_event e;
	cu_ptr addr;
	uint32_t val;
} ev_gate[512];
static int ev_gate_n;
static struct {
	char what; /* 'w' a wait, 'c' a batch copy */
	cu_stream s;
	uint64_t v; /* the wait's number, the copy's destination */
} calls[4096];
static int ncalls;
static void call_log(char what, cu_stream s, uint64_t v)
{
	pthread_mutex_lock(&wv_lock);
	if (ncalls < 4096)
		calls[ncalls].what = what, calls[ncalls].s = s, calls[ncalls].v = v, ncalls++;
	pthread_mutex_unlock(&wv_lock);
}
static cu_result s_wait(cu_stream s, cu_ptr addr, uint32_t val, unsigned flags)
{
	if (flags != CU_STREAM_WAIT_VALUE_GEQ_)
		return 1;
	call_log('w', s, val);
	pthread_mutex_lock(&wv_lock);
	int i;
	for (i = 0; i < wv_n && wv_last[i].s != s; i++)
		;
	if (i == wv_n && wv_n < 64)
		wv_n++;
	wv_last[i].s = s, wv_last[i].addr = addr, wv_last[i].val = val;
	waits++;
	pthread_mutex_unlock(&wv_lock);
	return 0;
}
static int wv_open(cu_ptr addr, uint32_t val)
{
	return (int32_t)(__atomic_load_n((uint32_t *)(uintptr_t)addr, __ATOMIC_ACQUIRE) - val) >= 0;
}
/* Record event e on s: behind the last wait on s (or, sharing queues, any still closed). */
static void ev_gate_note(cu_event e, cu_stream s)
{
	pthread_mutex_lock(&wv_lock);
	int w = -1, gate = 0;
	for (int i = 0; i < wv_n; i++)
		gate |= wv_last[i].s == s;
	for (int i = 0; i < wv_n; i++)
		if (wv_last[i].s == s ||
		    ((share_queue || (share_gates && gate)) &&
		     !wv_open(wv_last[i].addr, wv_last[i].val)))
			w = i;
	int j;
	for (j = 0; j < ev_gate_n && ev_gate[j].e != e; j++)
		;
	if (w >= 0 || j < ev_gate_n) {
		if (j == ev_gate_n && ev_gate_n < 512)
			ev_gate_n++;
		ev_gate[j].e = e;
		ev_gate[j].addr = w >= 0 ? wv_last[w].addr : 0;
		ev_gate[j].val = w >= 0 ? wv_last[w].val : 0;
	}
	pthread_mutex_unlock(&wv_lock);
}
static int ev_gate_closed(cu_event e)
{
	int closed = 0;
	pthread_mutex_lock(&wv_lock);
	for (int j = 0; j < ev_gate_n; j++)
		if (ev_gate[j].e == e && ev_gate[j].addr)
			closed = !wv_open(ev_gate[j].addr, ev_gate[j].val);
	pthread_mutex_unlock(&wv_lock);
	return closed;
}
static _Atomic int gated_queries; /* queries of an event behind a closed gate */

static int evq_busy;	    /* every event but the kernel's says not ready: a busy stream */
static __thread int my_evq; /* queries this thread made */
static cu_result s_evq(cu_event e)
{
	my_evq++;
	if (evq_busy)
		return CU_ERROR_NOT_READY;
	if (ev_gate_closed(e)) {
		gated_queries++;
		return CU_ERROR_NOT_READY;
	}
	return e && e == k_ended_ev && k_running ? CU_ERROR_NOT_READY : 0;
}
static cu_result s_sync(cu_stream s)
{
	(void)s;
	return 0;
}
static cu_result s_prio(int *l, int *g)
{
	*l = 0, *g = -1;
	return 0;
}
static int nstreams_made;
static cu_result s_stream(cu_stream *s, unsigned f, int pr)
{
	(void)f, (void)pr;
	*s = (cu_stream)(uintptr_t)(0x100 + ++nstreams_made);
	return 0;
}

/* Device memory for regMr: [VA, VA + 2 MiB) mapped as two 1 MiB cuMem allocations (the way
 * PyTorch's expandable segments map), reported by the attributes as one range. */
#define VA 0x7e0000000000ull
static int retained, released;
static cu_result s_attr(void *data, int a, cu_ptr p)
{
	if (p < VA || p >= VA + 2 * MAPPED)
		return 1; /* CUDA_ERROR_INVALID_VALUE: not ours */
	switch (a) {
	case CU_PA_MEMORY_TYPE:
		*(unsigned *)data = CU_MEMTYPE_DEVICE;
		return 0;
	case CU_PA_IS_MANAGED:
	case CU_PA_IS_LEGACY_IPC_CAPABLE:
		*(unsigned *)data = 0;
		return 0;
	case CU_PA_ALLOWED_HANDLE_TYPES:
		*(unsigned long long *)data = CU_HANDLE_POSIX_FD;
		return 0;
	case CU_PA_BUFFER_ID:
		*(unsigned long long *)data = 1 + (p - VA) / MAPPED;
		return 0;
	case CU_PA_RANGE_START_ADDR:
		*(cu_ptr *)data = VA;
		return 0;
	case CU_PA_RANGE_SIZE:
		*(size_t *)data = 2 * MAPPED;
		return 0;
	}
	return 1;
}
static cu_result s_retain(cu_handle *h, void *addr)
{
	cu_ptr p = (cu_ptr)(uintptr_t)addr;
	if (p < VA || p >= VA + 2 * MAPPED)
		return 1;
	*h = 100 + (p - VA) / MAPPED;
	retained++;
	return 0;
}
static cu_result s_release(cu_handle h)
{
	(void)h, released++;
	return 0;
}

/* SIMFABRIC_GPU_COPY_CONTEXT=own: a context of our own, and peer copies out of it. */
#define CTX_C ((cu_ctx)(uintptr_t)0xC0)
#define CTX_OWN ((cu_ctx)(uintptr_t)0xD0)
static int ctxs_made, peer_copies;
static cu_ctx peer_dst_ctx, peer_src_ctx;
static cu_stream peer_stream;
static cu_result s_ctx_create(cu_ctx *c, unsigned f, cu_device d)
{
	(void)f, (void)d;
	ctxs_made++;
	*c = CTX_OWN;
	return s_push(CTX_OWN); /* as cuCtxCreate: the new context is current */
}
static cu_result s_peer(cu_ptr d, cu_ctx dc, cu_ptr s, cu_ctx sc, size_t n, cu_stream st)
{
	(void)s, (void)n;
	peer_copies++;
	last_dst = d, peer_dst_ctx = dc, peer_src_ctx = sc, peer_stream = st;
	return 0;
}
static int mps_on = 1;
static cu_result s_dattr(int *v, int a, cu_device d)
{
	(void)d;
	*v = a == CU_DA_MPS_ENABLED && mps_on;
	return 0;
}
static cu_result s_ctx_oom(cu_ctx *c, unsigned f, cu_device d)
{
	(void)c, (void)f, (void)d;
	return 2; /* CUDA_ERROR_OUT_OF_MEMORY: MPS's pool of queues is spent */
}
/* cuMemcpyBatchAsync_v2: one copy, on a copy engine if the hint says so */
static int batch_copies;
static unsigned batch_flags;
static int batch_order;
static cu_stream batch_stream;
static size_t batch_count;   /* copies in the last call */
static cu_ptr batch_dst[64]; /* their destinations */
static size_t batch_len[64];
static cu_result batch_fail; /* what the next call returns */
static size_t batch_seen[8]; /* the counts of the calls since the last reset, oldest first */
static cu_result s_batch(cu_ptr *d, cu_ptr *s, size_t *n, size_t count, struct cu_memcpy_attr *a,
			 size_t *idx, size_t na, cu_stream st)
{
	(void)s;
	if (count < 1 || count > 64 || na != 1 || idx[0] != 0)
		return 1;
	if (batch_fail)
		return batch_fail;
	memmove(batch_seen + 1, batch_seen, sizeof(batch_seen) - sizeof(batch_seen[0]));
	batch_seen[0] = count;
	batch_copies++;
	batch_count = count;
	for (size_t i = 0; i < count; i++)
		batch_dst[i] = d[i], batch_len[i] = n[i];
	last_dst = d[count - 1], batch_flags = a->flags, batch_order = a->src_access_order;
	batch_stream = st;
	call_log('c', st, d[0]);
	return 0;
}

/* SIMFABRIC_GPU_SMALL=kernel: the copier kernel, played by a thread over the same ring. It
 * records what it would copy (the destinations are fake addresses) and says done. */
static int k_loaded, k_launched;
static volatile int k_paused;
static struct {
	cu_ptr dst;
	uint64_t len;
	unsigned char first[64];
} k_log[512];
static volatile uint64_t k_copies;
struct k_args {
	volatile struct sfk_desc *ring;
	unsigned n;
	volatile uint64_t *done;
	volatile uint32_t *stop;
};
static void *k_thread(void *arg)
{
	struct k_args a = *(struct k_args *)arg;
	free(arg);
	uint64_t seq = 1;
	unsigned i = 0;
	a.done[2] = 1; /* resident */
	while (!*a.stop) {
		if (k_paused ||
		    __atomic_load_n(&((struct sfk_desc *)a.ring)[i].seq, __ATOMIC_ACQUIRE) != seq) {
			usleep(50);
			continue;
		}
		uint64_t c = k_copies;
		k_log[c % 512].dst = a.ring[i].dst;
		k_log[c % 512].len = a.ring[i].len;
		memcpy(k_log[c % 512].first, (const void *)(uintptr_t)a.ring[i].src,
		       a.ring[i].len < 64 ? a.ring[i].len : 64);
		k_copies = c + 1;
		__atomic_store_n((uint64_t *)a.done, seq, __ATOMIC_RELEASE);
		seq++;
		i = (i + 1) & (a.n - 1);
	}
	k_running = 0;
	return NULL;
}
static cu_result s_modload(cu_module *m, const void *image)
{
	k_loaded += strstr(image, ".entry sf_copier") != NULL;
	*m = (cu_module)(uintptr_t)0x11;
	return 0;
}
static cu_result s_getfn(cu_function *f, cu_module m, const char *name)
{
	(void)m;
	*f = (cu_function)(uintptr_t)0x22;
	return strcmp(name, "sf_copier") ? 500 : 0;
}
static cu_result s_hostalloc(void **p, size_t size, unsigned flags)
{
	*p = flags == CU_MEMHOSTALLOC_DEVICEMAP_ ? aligned_alloc(4096, (size + 4095) & ~4095ul)
						 : NULL;
	return *p ? 0 : 1;
}
static cu_result s_hostdev(cu_ptr *d, void *p, unsigned flags)
{
	(void)flags;
	*d = (cu_ptr)(uintptr_t)p; /* the thread reads it as it is */
	return 0;
}
static cu_result s_launch(cu_function f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			  unsigned by, unsigned bz, unsigned shmem, cu_stream st, void **params,
			  void **extra)
{
	(void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
	k_stream = st;
	k_running = 1;
	(void)extra;
	struct k_args *a = malloc(sizeof(*a));
	a->ring = (volatile struct sfk_desc *)(uintptr_t) * (cu_ptr *)params[0];
	a->n = *(unsigned *)params[1];
	a->done = (volatile uint64_t *)(uintptr_t) * (cu_ptr *)params[2];
	a->stop = (volatile uint32_t *)(uintptr_t) * (cu_ptr *)params[3];
	pthread_t th;
	k_launched++;
	if (pthread_create(&th, NULL, k_thread, a))
		return 1;
	pthread_detach(th);
	return 0;
}

static void stub_cuda(void)
{
	G.cu.PointerGetAttribute = s_attr;
	G.cu.MemRetainAllocationHandle = s_retain;
	G.cu.MemRelease = s_release;
	G.cu.CtxGetCurrent = s_get;
	G.cu.CtxPushCurrent = s_push;
	G.cu.CtxPopCurrent = s_pop;
	G.cu.CtxSetCurrent = s_set;
	G.cu.CtxGetDevice = s_dev;
	G.cu.IpcOpenMemHandle = s_open;
	G.cu.IpcCloseMemHandle = s_close;
	G.cu.MemGetAddressRange = s_range;
	G.cu.MemcpyAsync = s_cpy;
	G.cu.EventCreate = s_evc;
	G.cu.EventDestroy = s_evd;
	G.cu.EventRecord = s_evr;
	G.cu.EventQuery = s_evq;
	G.cu.StreamSynchronize = s_sync;
	G.cu.CtxGetStreamPriorityRange = s_prio;
	G.cu.StreamCreateWithPriority = s_stream;
}

/* A peer's export server that says every region is 1 TiB. */
static void *liar(void *arg)
{
	int l = (int)(intptr_t)arg;
	for (;;) {
		int c = accept(l, NULL, NULL);
		if (c < 0)
			return NULL;
		struct ctl_parser *p = ctl_parser_new();
		struct ctl_msg *m = NULL, *r = ctl_msg_new();
		char ipc[2 * CU_IPC_HANDLE_BYTES + 1];
		memset(ipc, 'a', sizeof(ipc) - 1);
		ipc[sizeof(ipc) - 1] = 0;
		if (ctl_recv(c, p, &m, 2000) == 0) {
			ctl_add(r, "errno", "0");
			ctl_add(r, "kind", "legacy");
			ctl_add(r, "size", "1099511627776");
			ctl_add(r, "ipc", ipc);
			ctl_send(c, r, -1, 2000);
		}
		ctl_msg_free(m);
		ctl_msg_free(r);
		ctl_parser_free(p);
		close(c);
	}
}

static struct gexport *plant(int kind, uint64_t size)
{
	struct gexport *e = calloc(1, sizeof(*e));
	e->kind = kind;
	e->size = size;
	e->fd = -1;
	if (kind == EXPORT_FD) {
		e->fd = memfd_create("fake-cumem", MFD_CLOEXEC);
		CHECK(e->fd >= 0 && ftruncate(e->fd, (off_t)size) == 0, "memfd");
	} else {
		for (int i = 0; i < CU_IPC_HANDLE_BYTES; i++)
			e->ipc.data[i] = (unsigned char)(i * 7 + 1);
	}
	pthread_mutex_lock(&G.lock);
	e->region = ++G.next_region;
	e->refs = 1;
	e->next = G.exports;
	G.exports = e;
	pthread_mutex_unlock(&G.lock);
	return e;
}

/* Poll until done or failed (the issuer thread issues): its last answer. */
static int poll_done(struct sfgpu_tx *t, uint64_t ticket)
{
	int r = 0;
	for (int i = 0; i < 200000 && (r = dma_poll(t, ticket)) == 0; i++)
		usleep(10);
	return r;
}

/* The issuer busy: its lock held by another thread (held_up: it has it) until hold_want copies
 * wait, and 5 ms more (bounded by 2 s), so that the copies queued meanwhile go out together. */
static _Atomic int held_up, hold_want;
static void *hold_issue(void *q)
{
	struct gqueue *g = q;
	pthread_mutex_lock(&g->issue);
	atomic_store(&held_up, 1);
	for (int i = 0; i < 20000; i++) {
		pthread_mutex_lock(&g->lock);
		int n = g->n;
		pthread_mutex_unlock(&g->lock);
		if (n >= atomic_load(&hold_want))
			break;
		usleep(100);
	}
	usleep(5000);
	atomic_store(&held_up, 0);
	pthread_mutex_unlock(&g->issue);
	return NULL;
}

/* The stream's batches end 20 ms from now. */
static void *unbusy_later(void *arg)
{
	(void)arg;
	usleep(20000);
	evq_busy = 0;
	return NULL;
}

/* Start hold_issue on q, until want copies wait; returns once it holds the issuer's lock. */
static pthread_t hold_until(struct gqueue *q, int want)
{
	pthread_t h;
	atomic_store(&hold_want, want);
	pthread_create(&h, NULL, hold_issue, q);
	while (!atomic_load(&held_up))
		usleep(100);
	return h;
}

static void test_export(void)
{
	char why[256] = "";
	G.mode = 1;
	stub_cuda();
	snprintf(G.name, sizeof(G.name), "@sfgpu-t%d", (int)getpid());
	snprintf(G.secret, sizeof(G.secret), "0123456789abcdef0123456789abcdef");
	snprintf(G.where, sizeof(G.where), "%s#%s", G.name, G.secret);
	pthread_mutex_lock(&G.lock);
	CHECK(gpu_server_start(why, sizeof(why)) == 0, "server: %s", why);
	pthread_mutex_unlock(&G.lock);

	struct gexport *fd_exp = plant(EXPORT_FD, 2 << 20);
	struct gexport *ipc_exp = plant(EXPORT_LEGACY, 1 << 20);
	struct answer a;
	int fd = -1;

	memset(&a, 0, sizeof(a));
	int rc = ask(G.where, fd_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == 0, "cuMem export: %d %s", rc, why);
	CHECK(a.kind == EXPORT_FD && a.size == 2 << 20, "kind %d size %llu", a.kind,
	      (unsigned long long)a.size);
	struct stat st;
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 2 << 20,
	      "the fd came over SCM_RIGHTS and is the same file (%d)", fd);
	if (fd >= 0)
		close(fd);

	memset(&a, 0, sizeof(a));
	rc = ask(G.where, ipc_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == 0 && a.kind == EXPORT_LEGACY && a.size == 1 << 20 && fd == -1,
	      "legacy export: %d %s", rc, why);
	CHECK(memcmp(a.ipc.data, ipc_exp->ipc.data, CU_IPC_HANDLE_BYTES) == 0,
	      "the 64-byte IPC handle travels intact");

	rc = ask(G.where, 999, &a, &fd, why, sizeof(why));
	CHECK(rc == -ENOENT && strstr(why, "refused region 999"), "unknown region: %d %s", rc, why);

	/* the name alone, or a wrong secret: a receiver cannot point a sender at another process */
	char where2[CHAN_WHERE_LEN];
	snprintf(where2, sizeof(where2), "%s", G.name);
	rc = ask(where2, fd_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == -EACCES && fd < 0, "without the secret: %d %s", rc, why);
	snprintf(where2, sizeof(where2), "%s#0123456789abcdef0123456789abcdee", G.name);
	rc = ask(where2, fd_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == -EACCES && fd < 0 && !strstr(why, "0123456789"),
	      "a wrong secret, and no secret in the message: %d %s", rc, why);

	rc = ask("@simfabric-gpu-nobody-here#x", 1, &a, &fd, why, sizeof(why));
	CHECK(rc == -ECONNREFUSED && strstr(why, "cannot reach"), "no server: %d %s", rc, why);

	/* a client that speaks nonsense gets EPROTO and the server carries on */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa;
	socklen_t alen = abstract_addr(G.where, &sa);
	CHECK(connect(s, (struct sockaddr *)&sa, alen) == 0, "connect");
	const char junk[] = "op=region\nproto=7\nregion=1\n\n";
	CHECK(write(s, junk, sizeof(junk) - 1) == (ssize_t)sizeof(junk) - 1, "write");
	char buf[256] = "";
	ssize_t n = read(s, buf, sizeof(buf) - 1);
	CHECK(n > 0 && strstr(buf, "errno=71"), "a wrong proto version is refused: '%s'", buf);
	close(s);
	rc = ask(G.where, fd_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == 0, "still serving after a bad client: %s", why);
	if (fd >= 0)
		close(fd);

	sfgpu_unregister(ipc_exp->region);
	rc = ask(G.where, 2, &a, &fd, why, sizeof(why));
	CHECK(rc == -ENOENT, "an unregistered region is gone: %d", rc);

	/* regMr of VMM memory whose mapped range is two allocations: refused, NCCL falls back */
	struct sfgpu_reg reg;
	rc = sfgpu_register((void *)(uintptr_t)(VA + 4096), 8192, 1, &reg, why, sizeof(why));
	CHECK(rc == -EXDEV && strstr(why, "more than one allocation"), "two allocations: %d %s", rc,
	      why);
	CHECK(retained == released, "every handle retained is released (%d, %d)", retained,
	      released);
	rc = sfgpu_register((void *)(uintptr_t)(VA + 4096), 8192, 0, &reg, why, sizeof(why));
	CHECK(rc == 0 && reg.region == 0, "a send buffer is only checked, not exported: %d", rc);
	rc = sfgpu_register((void *)(uintptr_t)0x1000, 64, 1, &reg, why, sizeof(why));
	CHECK(rc == -ENOTSUP && strstr(why, "not CUDA device memory"), "host memory: %d %s", rc,
	      why);

	/* the copy engine, from here on: the exporter is "another process" with our server */
	char srv[CHAN_WHERE_LEN];
	snprintf(srv, sizeof(srv), "%s", G.where);
	snprintf(G.where, sizeof(G.where), "@not-me#x");
	static char src[4096];
	uint64_t ticket, region = plant(EXPORT_LEGACY, MAPPED)->region;

	/* the caller's context is never changed behind its back (one process, two devices) */
	struct sfgpu_tx *t;
	CHECK(sfgpu_tx_new("A", &t) == 0, "tx");
	cur = CTX_B;
	rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && cur == CTX_B && depth == 0, "first copy in B: %d, now %p", rc,
	      (void *)cur);
	cur = CTX_A;
	rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && cur == CTX_A && depth == 0,
	      "a copy from A's thread runs in the comm's B and leaves A current: %d, now %p", rc,
	      (void *)cur);
	CHECK(dma_poll(t, ticket) == 1, "polled");
	sfgpu_tx_free(t);
	CHECK(cur == CTX_A && depth == 0, "closing leaves the caller's context: %p", (void *)cur);
	CHECK(nstreams_made == 1, "one copy stream for B (%d made)", nstreams_made);

	/* a receiver that registers, is copied into and deregisters, 200 times (user buffers) */
	CHECK(sfgpu_tx_new("B", &t) == 0, "tx");
	int first_fail = -1;
	opens = closes = 0;
	for (int i = 0; i < 200; i++) {
		uint64_t r = plant(EXPORT_LEGACY, MAPPED)->region;
		rc = dma_start(t, srv, r, 0, src, 16, NULL, 0, &ticket);
		(void)dma_poll(t, ticket);
		sfgpu_unregister(r);
		if (rc && first_fail < 0)
			first_fail = i;
	}
	CHECK(first_fail < 0, "every round copies (first failure at round %d)", first_fail);
	CHECK(opens - closes <= SFGPU_TX_IMPORTS, "stale mappings are let go: %d open",
	      opens - closes);
	sfgpu_tx_free(t);
	CHECK(opens == closes, "closing unmaps all: %d opened, %d closed", opens, closes);

	/* a peer that says its region is bigger than what its handle maps is not believed */
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sl;
	char liar_where[CHAN_WHERE_LEN];
	snprintf(liar_where, sizeof(liar_where), "@liar-%d#secret", (int)getpid());
	socklen_t llen = abstract_addr(liar_where, &sl);
	CHECK(bind(l, (struct sockaddr *)&sl, llen) == 0 && listen(l, 4) == 0, "liar");
	pthread_t th;
	pthread_create(&th, NULL, liar, (void *)(intptr_t)l);
	CHECK(sfgpu_tx_new("C", &t) == 0, "tx");
	last_dst = 0;
	rc = dma_start(t, liar_where, 1, 1ull << 39, src, 4096, NULL, 0, &ticket);
	CHECK(rc != 0 && last_dst == 0, "a copy 512 GiB into a 1 MiB handle is refused: %d", rc);
	sfgpu_tx_free(t);

	/* SIMFABRIC_GPU_COPY_CONTEXT=own: copies leave from our own context, which the caller
	 * never sees current; imports are mapped and unmapped there */
	G.copy_ctx = COPY_CTX_OWN;
	G.cu.CtxCreate = s_ctx_create;
	G.cu.MemcpyPeerAsync = s_peer;
	G.cu.DeviceGetAttribute = s_dattr;
	region = plant(EXPORT_LEGACY, MAPPED)->region;
	void *dsrc = (void *)(uintptr_t)(VA + 64); /* device memory of the caller's context */
	CHECK(sfgpu_tx_new("D", &t) == 0, "tx");
	cur = CTX_C;
	int made = nstreams_made;
	rc = dma_start(t, srv, region, 128, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && cur == CTX_C && depth == 0, "own context: %d, now %p depth %d", rc,
	      (void *)cur, depth);
	CHECK(ctxs_made == 1 && nstreams_made == made + 2,
	      "one context of our own and its stream (and the caller's, for self-sends): %d %d",
	      ctxs_made, nstreams_made - made);
	CHECK(peer_copies == 1 && peer_dst_ctx == CTX_OWN && peer_src_ctx == CTX_C &&
		      peer_stream == (cu_stream)(uintptr_t)(0x100 + nstreams_made),
	      "a peer copy from the caller's context into ours, on our stream: %d %p %p",
	      peer_copies, (void *)peer_dst_ctx, (void *)peer_src_ctx);
	CHECK(open_ctx == CTX_OWN, "the import is mapped in our context: %p", (void *)open_ctx);
	rc = dma_start(t, srv, region, 256, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && ctxs_made == 1 && peer_copies == 2 && cur == CTX_C && depth == 0,
	      "the second copy reuses both: %d %d %d", rc, ctxs_made, peer_copies);
	sfgpu_tx_free(t);
	CHECK(close_ctx == CTX_OWN && cur == CTX_C && depth == 0,
	      "unmapped in our context, the caller's current again: %p %p", (void *)close_ctx,
	      (void *)cur);
	G.copy_ctx = COPY_CTX_AUTO;

	/* auto: our own context under MPS, the caller's without (a fresh application context
	 * each, so that each gets its own decision) */
#define CTX_E ((cu_ctx)(uintptr_t)0xE0)
#define CTX_F ((cu_ctx)(uintptr_t)0xF0)
#define CTX_G ((cu_ctx)(uintptr_t)0xF8)
	int ctxs0 = ctxs_made, peers0 = peer_copies;
	CHECK(sfgpu_tx_new("E", &t) == 0, "tx");
	cur = CTX_E;
	rc = dma_start(t, srv, region, 128, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && ctxs_made == ctxs0 + 1 && peer_copies == peers0 + 1 && cur == CTX_E,
	      "auto under MPS: a context of our own, peer copies out of it: %d %d %d", rc,
	      ctxs_made - ctxs0, peer_copies - peers0);
	sfgpu_tx_free(t);
	mps_on = 0;
	CHECK(sfgpu_tx_new("F", &t) == 0, "tx");
	cur = CTX_F;
	last_dst = 0;
	rc = dma_start(t, srv, region, 128, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && ctxs_made == ctxs0 + 1 && peer_copies == peers0 + 1 && last_dst,
	      "auto without MPS: the caller's context, a plain copy: %d %d %d", rc,
	      ctxs_made - ctxs0, peer_copies - peers0);
	sfgpu_tx_free(t);
	mps_on = 1;
	/* our context cannot be made: auto copies from the caller's (with a WARN), never fails */
	G.cu.CtxCreate = s_ctx_oom;
	CHECK(sfgpu_tx_new("G", &t) == 0, "tx");
	cur = CTX_G;
	last_dst = 0;
	rc = dma_start(t, srv, region, 128, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && last_dst && peer_copies == peers0 + 1 && cur == CTX_G && depth == 0,
	      "auto falls back to the caller's context: %d", rc);
	sfgpu_tx_free(t);
	G.cu.CtxCreate = s_ctx_create;

	/* with the batch call, every copy asks for the copy engine, in stream order, on the
	 * sendComm's stream, whichever context it runs in */
	G.cu.MemcpyBatchAsync2 = s_batch;
	CHECK(sfgpu_tx_new("H", &t) == 0, "tx");
	cur = CTX_E; /* our own context (made above) */
	last_dst = 0;
	rc = dma_start(t, srv, region, 192, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && batch_copies == 1 && peer_copies == peers0 + 1 &&
		      batch_flags == CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE_ &&
		      batch_order == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM_ && last_dst,
	      "a batch copy with the copy-engine hint: %d copies %d flags %u order %d", rc,
	      batch_copies, batch_flags, batch_order);
	sfgpu_tx_free(t);
	CHECK(sfgpu_tx_new("I", &t) == 0, "tx");
	cur = CTX_F; /* the caller's context */
	rc = dma_start(t, srv, region, 192, src, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && batch_copies == 2, "... from a host source too: %d %d", rc, batch_copies);
	sfgpu_tx_free(t);

	/* batches: posters queue, the issuer thread issues whatever is queued in one call and
	 * records one event; a queue held up (the issuer busy: its lock held here) goes out
	 * whole, in order */
	G.batch_max = SFGPU_BATCH_MAX;
	CHECK(sfgpu_tx_new("Q", &t) == 0, "tx");
	cur = CTX_F;
	uint64_t qa, qb[5];
	int c0 = batch_copies;
	stuck_ns = 10 * 1000000000LL; /* a loaded machine must not make pollers take over */
	rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &qa);
	CHECK(rc == 0 && t->q && atomic_load(&W.running) && poll_done(t, qa) == 1 &&
		      batch_copies == c0 + 1 && batch_count == 1,
	      "a copy: queued, the issuer starts and issues it: %d %d", rc, batch_copies - c0);
	/* the issuer also reaps ended batches: the poster never asks the driver meanwhile */
	evq_busy = 1;
	rc = dma_start(t, srv, region, 16, src, 16, NULL, 0, &qa);
	for (int i = 0; i < 200000 && __atomic_load_n(&batch_copies, __ATOMIC_ACQUIRE) != c0 + 2;
	     i++)
		usleep(10);
	int q_before = my_evq;
	CHECK(rc == 0 && dma_poll(t, qa) == 0 && dma_poll(t, qa) == 0 && my_evq == q_before,
	      "a running batch: polls say not yet, and query nothing: %d", my_evq - q_before);
	evq_busy = 0;
	CHECK(poll_done(t, qa) == 1 && my_evq == q_before,
	      "it ends: the issuer saw it, the poster only read a counter: %d", my_evq - q_before);
	c0 = batch_copies;
	pthread_mutex_lock(&t->q->issue); /* the issuer is busy */
	for (int k = 0; k < 4 && rc == 0; k++)
		rc = dma_start(t, srv, region, 64 + 16 * (uint64_t)k, src, k == 2 ? 0 : 16, NULL, 0,
			       &qb[k]);
	CHECK(rc == 0 && batch_copies == c0 && t->q->n == 4 &&
		      t->batch[qb[3] % CHAN_MAX_SENDS] == BATCH_QUEUED,
	      "while it is busy, copies wait: %d queued, %d calls", t->q->n, batch_copies - c0);
	pthread_mutex_unlock(&t->q->issue);
	CHECK(poll_done(t, qb[3]) == 1 && batch_copies == c0 + 1 && batch_count == 3 &&
		      batch_dst[0] == t->imp[0].im->va + 64 &&
		      batch_dst[1] == t->imp[0].im->va + 80 &&
		      batch_dst[2] == t->imp[0].im->va + 112 && batch_len[2] == 16,
	      "then one call for the three copies, in order (the empty message only holds its "
	      "place): count %zu",
	      batch_count);
	CHECK(dma_poll(t, qb[0]) == 1 && dma_poll(t, qb[2]) == 1 && t->done_ticket == qb[3] + 1,
	      "all four done, the empty one included");
	/* a full queue: its poster issues it (the issuer being behind), and then queues */
	G.batch_max = 4;
	pthread_t h;
	h = hold_until(t->q, 4);
	int c1 = batch_copies;
	for (int k = 0; k < 5 && rc == 0; k++)
		rc = dma_start(t, srv, region, 16 * (uint64_t)k, src, 16, NULL, 0, &qb[k]);
	pthread_join(h, NULL);
	CHECK(rc == 0 && poll_done(t, qb[4]) == 1 && batch_copies == c1 + 2 && batch_seen[1] == 4 &&
		      batch_seen[0] == 1,
	      "SIMFABRIC_GPU_BATCH_MAX copies at most per call: %d calls, of %zu and %zu",
	      batch_copies - c1, batch_seen[1], batch_seen[0]);
	G.batch_max = SFGPU_BATCH_MAX;
	/* a failed batch call fails its copies, and the connection learns it at its poll */
	batch_fail = 2;
	rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &qa);
	CHECK(rc == 0 && poll_done(t, qa) == -EIO, "a failed batch: the copy fails");
	batch_fail = 0;
	/* a copy with flips is issued by its poster, after what waits: the stream keeps order */
	c1 = batch_copies;
	h = hold_until(t->q, 1);
	rc = dma_start(t, srv, region, 16, src, 16, NULL, 0, &qb[0]);
	struct chan_flip fl = {.off = 3, .mask = 0x10};
	G.cu.MemcpyDtoHAsync = s_dtoh;
	G.cu.MemcpyHtoDAsync = s_htod;
	rc |= dma_start(t, srv, region, 32, src, 16, &fl, 1, &qb[1]);
	pthread_join(h, NULL);
	CHECK(rc == 0 && batch_copies == c1 + 2 && batch_dst[0] == t->imp[0].im->va + 32 &&
		      batch_seen[0] == 1 && poll_done(t, qb[0]) == 1 && poll_done(t, qb[1]) == 1,
	      "a corrupted copy: what waited went first, then it: %d calls", batch_copies - c1);
	CHECK(flips_read == 1 && flips_written == 1, "its bit flipped after it: %d %d", flips_read,
	      flips_written);
	/* freeing the sendComm issues what waits first (its slots name it) */
	struct gqueue *tq = t->q;
	/* a poll while the issuer is taken as stuck, and another thread issues: no waiting */
	h = hold_until(tq, 1);
	rc = dma_start(t, srv, region, 48, src, 16, NULL, 0, &qb[0]);
	stuck_ns = 0;
	int64_t p0 = gpu_now_ns();
	CHECK(dma_poll(t, qb[0]) == 0 && gpu_now_ns() - p0 < 2000000 && tq->n == 1,
	      "a poll that would issue for a stuck issuer does not wait for another issuing");
	stuck_ns = 10 * 1000000000LL;
	c1 = batch_copies;
	sfgpu_tx_free(t); /* waits for the holder, then issues */
	CHECK(rc == 0 && tq->n == 0 && batch_copies == c1 + 1,
	      "freed: its waiting copy went out before the free returned: %d, %d left",
	      batch_copies - c1, tq->n);
	pthread_join(h, NULL);
	/* without the issuer (stopped, as at exit), posters issue their own copies */
	issuer_stop();
	CHECK(!atomic_load(&W.running), "the issuer stops at exit");
	W.failed = 1;
	CHECK(sfgpu_tx_new("S", &t) == 0, "tx");
	cur = CTX_F;
	c1 = batch_copies;
	rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &qa);
	CHECK(rc == 0 && batch_copies == c1 + 1 && dma_poll(t, qa) == 1,
	      "no issuer: the poster issues at once: %d", batch_copies - c1);
	/* every batch's event in use (SFGPU_BATCH_EVENTS running): the next waits for one to
	 * end, and is never dropped */
	evq_busy = 1;
	for (int k = 0; k < SFGPU_BATCH_EVENTS && rc == 0; k++) {
		rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &qa);
		rc |= dma_poll(t, qa) < 0; /* keeps the slots turning */
	}
	pthread_create(&h, NULL, unbusy_later, NULL);
	c1 = batch_copies;
	p0 = gpu_now_ns();
	rc |= dma_start(t, srv, region, 0, src, 16, NULL, 0, &qa);
	CHECK(rc == 0 && batch_copies == c1 + 1 && gpu_now_ns() - p0 >= 10000000 &&
		      poll_done(t, qa) == 1,
	      "the batch after %d running waited for one to end, then went: %d calls, %lld ms",
	      SFGPU_BATCH_EVENTS, batch_copies - c1, (long long)((gpu_now_ns() - p0) / 1000000));
	pthread_join(h, NULL);
	sfgpu_tx_free(t);
	W.failed = 0;
	G.sender_issues = 1; /* SIMFABRIC_GPU_ISSUER=sender: no queue, every copy alone */
	CHECK(sfgpu_tx_new("R", &t) == 0, "tx");
	cur = (cu_ctx)(uintptr_t)0xF4; /* a fresh application context: its own stream */
	rc = dma_start(t, srv, region, 0, src, 16, NULL, 0, &qa);
	CHECK(rc == 0 && !t->q && dma_poll(t, qa) == 1,
	      "no queue with SIMFABRIC_GPU_ISSUER=sender");
	sfgpu_tx_free(t);
	G.sender_issues = 0;
	G.batch_max = SFGPU_BATCH_MAX;
	stuck_ns = SFGPU_STUCK_NS;

	/* SIMFABRIC_GPU_STREAMS=3: our context gets three streams and sendComms take them in turn
	 * (each keeps its own, so its copies stay in order) */
	G.own_streams = 3;
	cur = (cu_ctx)(uintptr_t)0x90; /* a context not seen yet */
	int made3 = nstreams_made, ctxs3 = ctxs_made;
	struct sfgpu_tx *tt[4];
	cu_stream got[4];
	for (int k = 0; k < 4; k++) {
		CHECK(sfgpu_tx_new("J", &tt[k]) == 0, "tx %d", k);
		rc = dma_start(tt[k], srv, region, 64, dsrc, 16, NULL, 0, &ticket);
		CHECK(rc == 0 && poll_done(tt[k], ticket) == 1, "copy %d: %d", k, rc);
		got[k] = batch_stream;
	}
	CHECK(ctxs_made == ctxs3 + 1 && nstreams_made == made3 + 4,
	      "one context, three streams (and the caller's): %d %d", ctxs_made - ctxs3,
	      nstreams_made - made3);
	CHECK(got[0] != got[1] && got[1] != got[2] && got[0] != got[2] && got[3] == got[0],
	      "sendComms take the streams in turn: %p %p %p %p", (void *)got[0], (void *)got[1],
	      (void *)got[2], (void *)got[3]);
	rc = dma_start(tt[1], srv, region, 64, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && poll_done(tt[1], ticket) == 1 && batch_stream == got[1],
	      "a sendComm keeps its stream: %p %p", (void *)batch_stream, (void *)got[1]);
	for (int k = 0; k < 4; k++)
		sfgpu_tx_free(tt[k]);
	G.own_streams = 1;

	/* Armed copies: in our own context (under MPS, auto) a fresh application context gets
	 * SFGPU_GATES gates, checked to leave the copy streams running while they wait. An armed copy
	 * from device memory goes out on a gate behind the wait for its number, never without it,
	 * and is not done (nor asked about) before it is let go; a host source is declined. */
	G.cu.StreamWaitValue32 = s_wait;
	G.cu.MemHostAlloc = s_hostalloc;
	G.cu.MemHostGetDevicePointer = s_hostdev;
	cur = (cu_ctx)(uintptr_t)0x70;
	CHECK(sfgpu_tx_new("AR", &t) == 0, "tx");
	rc = dma_start(t, srv, region, 0, dsrc, 16, NULL, 0, &ticket); /* maps, makes the stream */
	CHECK(rc == 0 && poll_done(t, ticket) == 1 && t->ngates == SFGPU_GATES && t->gates,
	      "a fresh context of ours has %d gates: %d", SFGPU_GATES, t->ngates);
	uint64_t at[3];
	int calls0 = ncalls, q0 = gated_queries;
	rc = dma_arm(t, srv, region, 1024, dsrc, 1, 64, &at[0]);
	struct ggate *g0 = &t->gates[t->gk[at[0] % SFGPU_TICKETS]];
	for (int i = 0; i < 200000 && __atomic_load_n(&g0->q->issued, __ATOMIC_ACQUIRE) == 0; i++)
		usleep(10);
	usleep(2000); /* the issuer goes round a while: it must not ask about a closed gate */
	CHECK(rc == 0 && ncalls == calls0 + 2 && calls[calls0].what == 'w' &&
		      calls[calls0].s == g0->s &&
		      calls[calls0].v == t->gseq[at[0] % SFGPU_TICKETS] &&
		      calls[calls0 + 1].what == 'c' && calls[calls0 + 1].s == g0->s &&
		      calls[calls0 + 1].v == t->imp[0].im->va + 1024,
	      "armed: the wait for its number, then the copy, on its gate (%d calls)",
	      ncalls - calls0);
	CHECK(dma_poll(t, at[0]) == 0 && dma_poll(t, at[0]) == 0 && gated_queries == q0,
	      "not done before it is let go, and nobody asks the driver: %d queries",
	      gated_queries - q0);
	rc = dma_start(t, srv, region, 0, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && poll_done(t, ticket) == 1 && t->done_ticket <= at[0],
	      "a copy after it ends on the sendComm's stream, done_ticket stays behind the armed "
	      "one");
	dma_fire(t, at[0]);
	CHECK(poll_done(t, at[0]) == 1 && *g0->word == t->gseq[at[0] % SFGPU_TICKETS] &&
		      t->gated_out == 0,
	      "let go: its number in the word, and it ends");
	CHECK(dma_arm(t, srv, region, 0, src, 0, 64, &at[1]) == -EOPNOTSUPP,
	      "a host source is not armed");
	/* a deregistration drains every copy: an armed one not yet let go goes once it must be
	 * due (arm_ahead_ns after the drain began, as none is armed earlier), not before */
	rc = dma_arm(t, srv, region, 2048, dsrc, 1, 64, &at[1]);
	int64_t d0 = gpu_now_ns();
	sfgpu_drain_all();
	int64_t d1 = gpu_now_ns();
	struct ggate *g1 = &t->gates[t->gk[at[1] % SFGPU_TICKETS]];
	CHECK(rc == 0 && d1 - d0 >= sfgpu_dma.arm_ahead_ns &&
		      gate_fired(g1, t->gseq[at[1] % SFGPU_TICKETS]) && poll_done(t, at[1]) == 1 &&
		      G.arm_draining == 0,
	      "drained: let go after %lld us (not before %lld), ended",
	      (long long)((d1 - d0) / 1000), (long long)(sfgpu_dma.arm_ahead_ns / 1000));
	CHECK(dma_arm(t, srv, region, MAPPED - 8, dsrc, 1, 64, &at[1]) == -ERANGE,
	      "a range past the region is refused before anything is queued");
	/* a gate holding a sendComm's copies not yet let go is its own: another takes another */
	struct sfgpu_tx *t3;
	CHECK(sfgpu_tx_new("AR2", &t3) == 0, "tx");
	rc = dma_start(t3, srv, region, 0, dsrc, 16, NULL, 0, &ticket);
	rc |= poll_done(t3, ticket) != 1;
	rc |= dma_arm(t, srv, region, 0, dsrc, 1, 64, &at[1]);
	rc |= dma_arm(t3, srv, region, 64, dsrc, 1, 64, &at[2]);
	CHECK(rc == 0 && t->gk[at[1] % SFGPU_TICKETS] != t3->gk[at[2] % SFGPU_TICKETS],
	      "two sendComms' armed copies on two gates: %d %d", t->gk[at[1] % SFGPU_TICKETS],
	      t3->gk[at[2] % SFGPU_TICKETS]);
	/* every gate full (SFGPU_GATE_UNFIRED each): the next is declined, not queued */
	int armed_ok = 0;
	uint64_t atk;
	while (dma_arm(t, srv, region, 0, dsrc, 1, 64, &atk) == 0 && armed_ok < 4 * SFGPU_TICKETS)
		armed_ok++;
	CHECK(armed_ok == (SFGPU_GATES - 1) * SFGPU_GATE_UNFIRED - 1,
	      "the gates t3 does not hold fill up: %d armed", armed_ok);
	dma_fire(t3, at[2]);
	CHECK(poll_done(t3, at[2]) == 1, "t3's ends without waiting for t's");
	sfgpu_tx_free(t3);
	int64_t f1 = gpu_now_ns();
	sfgpu_tx_free(t); /* lets every armed copy go and waits for them */
	CHECK(gpu_now_ns() - f1 < 5000000000LL && g0->owner == NULL, "freed: all let go, ended");
	/* SIMFABRIC_GPU_ARM=off: no gates, nothing armed */
	G.arm_off = 1;
	cur = (cu_ctx)(uintptr_t)0x74;
	CHECK(sfgpu_tx_new("AO", &t) == 0, "tx");
	rc = dma_start(t, srv, region, 0, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && poll_done(t, ticket) == 1 && !t->gates &&
		      dma_arm(t, srv, region, 0, dsrc, 1, 64, &atk) == -EOPNOTSUPP,
	      "SIMFABRIC_GPU_ARM=off: no gates, declined");
	sfgpu_tx_free(t);
	G.arm_off = 0;
	/* gates that would hold up a copy stream (a shared hardware queue), or wait behind one
	 * another (one queue among them): no gates, said (a fresh application context each) */
	for (int shared = 0; shared < 2; shared++) {
		share_queue = !shared, share_gates = shared;
		cur = (cu_ctx)(uintptr_t)(0x78 + 4 * shared);
		CHECK(sfgpu_tx_new("AS", &t) == 0, "tx");
		rc = dma_start(t, srv, region, 0, dsrc, 16, NULL, 0, &ticket);
		CHECK(rc == 0 && poll_done(t, ticket) == 1 && !t->gates,
		      "gates that %s are not used",
		      shared ? "wait behind one another" : "hold up the copy streams");
		sfgpu_tx_free(t);
	}
	share_queue = share_gates = 0;
	G.cu.StreamWaitValue32 = NULL;

	/* SIMFABRIC_GPU_SMALL=kernel: small messages from host memory go through the kernel's
	 * ring (staged, one descriptor), the rest through the copy engine */
	G.small_kernel = 1;
	G.small_max = SFK_SMALL_MAX;
	G.cu.ModuleLoadData = s_modload;
	G.cu.ModuleGetFunction = s_getfn;
	G.cu.MemHostAlloc = s_hostalloc;
	G.cu.MemHostGetDevicePointer = s_hostdev;
	G.cu.LaunchKernel = s_launch;
	cur = (cu_ctx)(uintptr_t)0x88; /* a fresh application context */
	CHECK(sfgpu_tx_new("K", &t) == 0, "tx");
	unsigned char msg[100];
	for (int k = 0; k < 100; k++)
		msg[k] = (unsigned char)(k * 7 + 1);
	int b0 = batch_copies;
	rc = dma_start(t, srv, region, 320, msg, 100, NULL, 0, &ticket);
	CHECK(rc == 0 && k_loaded == 1 && k_launched == 1,
	      "the kernel is loaded and launched: %d %d %d", rc, k_loaded, k_launched);
	int polls = 0;
	while (dma_poll(t, ticket) == 0 && polls++ < 200000)
		usleep(10);
	CHECK(k_copies == 1 && k_log[0].len == 100 && !memcmp(k_log[0].first, msg, 64) &&
		      k_log[0].dst == t->imp[0].im->va + 320 && batch_copies == b0,
	      "a small host message: staged, copied by the kernel, not the copy engine: %llu %llu",
	      (unsigned long long)k_copies, (unsigned long long)k_log[0].len);
	rc = dma_start(t, srv, region, 64, dsrc, 16, NULL, 0, &ticket);
	CHECK(rc == 0 && batch_copies == b0 + 1 && k_copies == 1,
	      "device memory takes the copy engine: %d %d", rc, batch_copies - b0);
	static unsigned char big[SFK_SMALL_MAX + 1];
	rc = dma_start(t, srv, region, 0, big, sizeof(big), NULL, 0, &ticket);
	CHECK(rc == 0 && batch_copies == b0 + 2, "so does a host message over %u bytes: %d",
	      SFK_SMALL_MAX, batch_copies - b0);
	/* a kernel that does not keep up: a full ring sends the rest to the copy engine */
	k_paused = 1;
	uint64_t tk[SFK_RING + 1];
	for (unsigned k = 0; k < SFK_RING + 1; k++)
		CHECK(dma_start(t, srv, region, 0, msg, 8, NULL, 0, &tk[k]) == 0, "copy %u", k);
	CHECK(batch_copies == b0 + 3 && dma_poll(t, tk[0]) == 0,
	      "a full ring: the 65th takes the copy engine, the first is not done: %d",
	      batch_copies - b0);
	k_paused = 0;
	polls = 0;
	while (dma_poll(t, tk[SFK_RING - 1]) == 0 && polls++ < 200000)
		usleep(10);
	CHECK(k_copies == 1 + SFK_RING && dma_poll(t, tk[0]) == 1,
	      "the kernel catches up, in order: %llu", (unsigned long long)k_copies);
	k_paused = 1;
	rc = dma_start(t, srv, region, 0, msg, 8, NULL, 0, &ticket);
	CHECK(rc == 0 && dma_poll(t, ticket) == 0 && t->done_ticket <= ticket,
	      "a small copy in flight: not done, and done_ticket stays behind it");
	k_paused = 0;
	sfgpu_tx_free(t); /* waits for the kernel before it unmaps */
	CHECK(k_copies == 2 + SFK_RING, "freeing waited for the kernel: %llu",
	      (unsigned long long)k_copies);
	struct sfgpu_tx *t2;
	CHECK(sfgpu_tx_new("K2", &t2) == 0, "tx");
	/* a kernel that ends with copies undone: the copy fails, it does not hang */
	k_paused = 1;
	rc = dma_start(t2, srv, region, 0, msg, 8, NULL, 0, &ticket);
	CHECK(rc == 0 && dma_poll(t2, ticket) == 0, "queued: %d", rc);
	kern_stop_all(); /* waits (bounded) for the kernel to return */
	CHECK(!k_running, "at exit the kernel is stopped and waited for");
	usleep(2000);
	CHECK(dma_poll(t2, ticket) < 0, "a copy the kernel never made fails once it has ended");
	CHECK(dma_start(t2, srv, region, 0, msg, 8, NULL, 0, &ticket) == 0 &&
		      batch_copies == b0 + 4,
	      "after it, small copies take the copy engine: %d", batch_copies - b0);
	int64_t f0 = gpu_now_ns();
	sfgpu_tx_free(t2); /* the kernel is gone: no 10 s wait for it */
	CHECK(gpu_now_ns() - f0 < 1000000000LL,
	      "freeing after the kernel ended does not wait it out");
	k_paused = 0;
	G.small_kernel = 0;
	G.cu.MemcpyBatchAsync2 = NULL;
}

static const struct check_case cases[] = {
	CHECK_CASE(test_export),
};

CHECK_MAIN(cases)
