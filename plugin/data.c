/* SPDX-License-Identifier: MIT */
/*
 * data.c - the ncclNet v12 implementation, part three: memory registration
 * and the data path (isend, irecv, test, iflush).
 *
 * The data path is NCCL's proxy progress loop: it takes no lock, allocates
 * nothing (each comm has a fixed request pool), logs nothing on success and
 * makes no syscall but one poll() per liveness period. One comm's calls come
 * from one thread at a time (NCCL's rule), so the pool needs no lock either.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "plugin/client.h"
#include "plugin/gpu.h"
#include "plugin/net_int.h"
#include "plugin/plog.h"
#include "plugin/prof.h"
#include "plugin/trace.h"
#include "plugin/xhost.h"
#include "sim/core/copyq.h"
#include "sim/core/fstate.h"
#include "sim/core/xmodel.h"

/* ---- memory registration --------------------------------------------------------------- */

/*
 * Can the CPU read byte p? Asked of the kernel (a read of our own memory),
 * so a pointer the CPU cannot touch gives EFAULT instead of a crash.
 * 1 yes, 0 no, -1 cannot tell (process_vm_readv refused by a sandbox).
 */
static int cpu_readable(const void *p)
{
	char b;
	struct iovec local = {.iov_base = &b, .iov_len = 1};
	struct iovec remote = {.iov_base = (void *)p, .iov_len = 1};
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1)
		return 1;
	return errno == EFAULT ? 0 : -1;
}

/*
 * If libcuda is already in the process (NCCL loaded it), ask it whether a
 * "host" pointer is really device memory. Never loads CUDA ourselves: the
 * plugin must work on machines without it. CUDA may call host memory that
 * it maps itself (cuMem host allocations) "device" memory too, so a DEVICE
 * answer counts only if the CPU cannot read the buffer.
 */
typedef int (*cu_pointer_get_attribute_fn)(void *data, int attribute, unsigned long long ptr);
#define SF_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define SF_CU_POINTER_ATTRIBUTE_IS_MANAGED 8
#define SF_CU_MEMORYTYPE_DEVICE 2

static int is_device_memory(const void *p, size_t size)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
	if (!lib)
		return 0;
	int dev = 0;
	cu_pointer_get_attribute_fn get;
	*(void **)&get = dlsym(lib, "cuPointerGetAttribute");
	unsigned int type = 0, managed = 0;
	if (get && get(&type, SF_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (uintptr_t)p) == 0 &&
	    type == SF_CU_MEMORYTYPE_DEVICE) {
		/* Managed memory reports DEVICE but the CPU can copy it: let it through. */
		int is_managed =
			get(&managed, SF_CU_POINTER_ATTRIBUTE_IS_MANAGED, (uintptr_t)p) == 0 && managed;
		const char *last = (const char *)p + size - 1;
		dev = !is_managed && !(cpu_readable(p) == 1 && cpu_readable(last) == 1);
	}
	dlclose(lib);
	return dev;
}

static ncclResult_t gpu_unsupported(const char *op, const void *data, size_t size, int type)
{
	PWARN("%s of %zu bytes at %p (type 0x%x): %s; the GPU data path is %s", op, size, data,
	      type,
	      type == NCCL_PTR_CUDA ? "GPU memory needs the GPU data path"
				    : "this memory type is not supported (ptrSupport has no DMA-BUF)",
	      sfgpu_describe());
	return ncclInvalidUsage;
}

/*
 * A receive buffer of a connection to another host: open it to the sender's writes
 * (sim/core/xchan.h: the payload lands in it in one trip), as an RDMA NIC's registration does.
 * Without writes (SIMFABRIC_XHOST_WRITE=off, a provider without them, or a registration the
 * provider refuses) its receives take messages, as before. Under sfnet_g.lock.
 */
static void mr_open_to_writes(struct sfnet_comm *c, struct sfnet_mr *mr)
{
	const struct xnet *x = c->xnet;
	if (!x || !x->mr_open || !sfxh_write_min())
		return;
	int rc = x->mr_open(x->ctx, (void *)mr->base, mr->size, &mr->xkey, &mr->xaddr, &mr->xmr);
	if (rc) {
		mr->xmr = NULL;
		PWARN("%s: regMr of %zu bytes at %p: the transport cannot open it to writes (%s); "
		      "its receives take messages",
		      c->desc, mr->size, (void *)mr->base, strerror(-rc));
		return;
	}
	mr->xnet = x;
}

ncclResult_t sfnet_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	if (!mhandle)
		return ncclInternalError;
	*mhandle = NULL;
	if (sfnet_call_armed(FAULT_K_REGMR_FAIL)) { /* regmr_fail: as ibv_reg_mr failing */
		char what[96];
		snprintf(what, sizeof(what), "regMr of %zu bytes at %p", size, data);
		ncclResult_t r = sfnet_call_fault(FAULT_K_REGMR_FAIL, what);
		if (r != ncclSuccess)
			return r;
	}
	struct sfgpu_reg reg = {0};
	int gpu = 0;
	if (type == NCCL_PTR_CUDA && sfgpu_on()) {
		char why[256];
		pthread_mutex_lock(&sfnet_g.lock);
		int recv = sfnet_obj_find(comm, SFNET_RECV) != NULL; /* only receive buffers are exported */
		pthread_mutex_unlock(&sfnet_g.lock);
		int rc = sfgpu_register(data, size, recv, &reg, why, sizeof(why));
		if (rc) {
			/* NCCL falls back to its own buffers for a user buffer it cannot register */
			PWARN("regMr of %zu bytes of GPU memory at %p: %s", size, data, why);
			return rc == -ENOTSUP || rc == -EXDEV ? ncclInvalidUsage : ncclSystemError;
		}
		gpu = 1;
		/* NCCL_DEBUG_SUBSYS=NET: which buffers reach us (NCCL's own at connect, user
		 * buffers registered with ncclCommRegister as they are used) */
		PINFO(NCCL_NET, "regMr of %zu bytes of GPU memory at %p: %s region %llu", size, data,
		      recv ? "a receive buffer, exported as" : "a send buffer, in",
		      (unsigned long long)reg.region);
	} else if (type != NCCL_PTR_HOST) {
		return gpu_unsupported("regMr", data, size, type);
	} else if (size && is_device_memory(data, size)) {
		PWARN("regMr of %zu bytes at %p: the buffer is GPU device memory though registered "
		      "as NCCL_PTR_HOST; GPU memory is not supported yet",
		      size, data);
		return ncclInvalidUsage;
	}
	struct sfnet_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		PWARN("regMr: out of memory");
		if (reg.region)
			sfgpu_unregister(reg.region);
		return ncclSystemError;
	}
	mr->gpu = gpu;
	mr->region = reg.region;
	mr->rbase = reg.base;
	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_obj *o = sfnet_obj_find(comm, SFNET_SEND);
	if (!o)
		o = sfnet_obj_find(comm, SFNET_RECV);
	if (!o) {
		pthread_mutex_unlock(&sfnet_g.lock);
		if (reg.region)
			sfgpu_unregister(reg.region);
		free(mr);
		PWARN("regMr of %zu bytes at %p on an unknown comm %p", size, data, comm);
		return ncclInternalError;
	}
	struct sfnet_comm *c = (struct sfnet_comm *)o;
	mr->magic = SFNET_MR_MAGIC;
	mr->comm = c;
	mr->base = (uintptr_t)data;
	mr->size = size;
	if (c->xrx && size && !gpu)
		mr_open_to_writes(c, mr);
	mr->next = c->mrs;
	c->mrs = mr;
	pthread_mutex_unlock(&sfnet_g.lock);
	*mhandle = mr;
	return ncclSuccess;
}

/*
 * Implemented (rather than a NULL slot) so that a caller that ignores
 * ptrSupport gets a clear WARN instead of a crash through NULL; NCCL itself
 * never calls it, because ptrSupport has no NCCL_PTR_DMABUF bit. The fd is
 * NCCL's, which closes it.
 */
ncclResult_t sfnet_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle)
{
	(void)comm;
	(void)offset;
	(void)fd;
	if (mhandle)
		*mhandle = NULL;
	return gpu_unsupported("regMrDmaBuf", data, size, type);
}

ncclResult_t sfnet_dereg_mr(void *comm, void *mhandle)
{
	(void)comm; /* the mr knows its comm */
	if (!mhandle)
		return ncclSuccess;
	pthread_mutex_lock(&sfnet_g.lock);
	int found = 0;
	for (struct sfnet_obj *o = sfnet_g.objs; o && !found; o = o->next) {
		if (o->kind != SFNET_SEND && o->kind != SFNET_RECV)
			continue;
		for (struct sfnet_mr **pp = &((struct sfnet_comm *)o)->mrs; *pp; pp = &(*pp)->next)
			if (*pp == mhandle) {
				*pp = (*pp)->next;
				found = 1;
				break;
			}
	}
	pthread_mutex_unlock(&sfnet_g.lock);
	if (!found) {
		/* Never fail a deregistration: NCCL would skip the rest of its cleanup. */
		PWARN("deregMr of unknown mhandle %p ignored", mhandle);
		return ncclSuccess;
	}
	/*
	 * NCCL frees a buffer right after deregMr and before closing the comm, with
	 * requests possibly still in flight (an abort): no copy thread may still be
	 * reading or writing it when we return.
	 */
	copyq_drain();
	struct sfnet_mr *mr = mhandle;
	if (mr->gpu) {
		sfgpu_drain_all(); /* no GPU copy may still read the buffer either */
		if (mr->region)
			sfgpu_unregister(mr->region);
	}
	if (mr->xmr) /* a peer's write into it from now on fails at the peer */
		mr->xnet->mr_close(mr->xnet->ctx, mr->xmr);
	mr->magic = 0;
	free(mr);
	return ncclSuccess;
}

/* Sanity: a data-path pointer lies inside the registration it came with (NULL: no check). */
static inline int mr_covers(const void *mhandle, const void *data, size_t size)
{
	const struct sfnet_mr *mr = mhandle;
	if (!mr || !size)
		return 1;
	uintptr_t p = (uintptr_t)data;
	return mr->magic == SFNET_MR_MAGIC && p >= mr->base && p - mr->base <= mr->size &&
	       size <= mr->size - (p - mr->base);
}

/*
 * A buffer outside the registration it came with is the caller's bug, but
 * harmless to a plugin that copies through host memory: say so once per
 * comm and carry on, rather than fail a job on a sanity check.
 */
__attribute__((cold, noinline)) static void mr_outside(struct sfnet_comm *c, const char *op,
						       const void *mhandle, const void *data,
						       size_t size)
{
	if (c->mr_warned)
		return;
	c->mr_warned = 1;
	const struct sfnet_mr *mr = mhandle;
	int ours = mr->magic == SFNET_MR_MAGIC;
	PWARN("%s: %s of %zu bytes at %p lies outside its registration (%s [0x%llx, +%zu)); "
	      "continuing, this is reported once per comm",
	      c->desc, op, size, data, ours ? "mhandle" : "not an mhandle of ours",
	      ours ? (unsigned long long)mr->base : 0ULL, ours ? mr->size : (size_t)0);
}

/* The GPU region of a receive registration (0: host memory, or not an mhandle of ours). */
static inline uint64_t mr_region(const void *mhandle)
{
	const struct sfnet_mr *mr = mhandle;
	return mr && mr->magic == SFNET_MR_MAGIC ? mr->region : 0;
}

/* Is it a registration of GPU memory? */
static inline int mr_gpu(const void *mhandle)
{
	const struct sfnet_mr *mr = mhandle;
	return mr && mr->magic == SFNET_MR_MAGIC && mr->gpu;
}

/* A GPU buffer outside its registration cannot be copied safely: refuse it, naming both. */
__attribute__((cold, noinline)) static ncclResult_t gpu_outside(struct sfnet_comm *c,
								const char *op, const void *mhandle,
								const void *data, size_t size)
{
	const struct sfnet_mr *mr = mhandle;
	PWARN("%s: %s of %zu bytes of GPU memory at %p lies outside its registration [0x%llx, "
	      "+%zu): refused (a copy engine must never touch memory it was not given)",
	      c->desc, op, size, data, (unsigned long long)mr->base, mr->size);
	c->failed = ncclInvalidUsage;
	return ncclInvalidUsage;
}

/* ---- data path -------------------------------------------------------------------------- */

__attribute__((cold, noinline)) static ncclResult_t comm_daemon_gone(struct sfnet_comm *c,
								     const char *op)
{
	PWARN("%s: %s: the fabric daemon at %s went away; restart simfabricd and the job", c->desc,
	      op, sfnet_g.sock);
	SFTRACE(sftrace_fail(c, op, 0, ncclSystemError, NULL));
	c->failed = ncclSystemError;
	return ncclSystemError;
}

/* The fault e names (e->fault: id + 1) in the fabric state, or NULL. */
static struct fst_fault *err_fault(const struct sfnet_comm *c, const struct chan_err *e)
{
	struct fst_view *fab = c->session ? c->session->fab : NULL;
	return fab ? fst_fault(fab->shm, e->fault - 1) : NULL;
}

/* A fault failed the message: name it, its link, the connection and why, like IB would. */
__attribute__((cold, noinline)) static void fault_warn(struct sfnet_comm *c, const char *op,
						       const struct chan_err *e)
{
	struct fst_fault *ff = err_fault(c, e);
	const char *name = ff ? ff->spec.name : "?";
	uint32_t action = ff ? ff->spec.action : 0;
	const char *kind = ff && ff->spec.kind < FAULT_K_COUNT ? fault_kind_names[ff->spec.kind] : "?";
	const char *why;
	switch (action) {
	case FAULT_A_DOWN:
		why = "the link stayed down longer than the RC retry budget (retry_count x ACK "
		      "timeout): retry count exhausted";
		break;
	case FAULT_A_STALL:
		why = "no progress for longer than the RC retry budget (retry_count x ACK timeout): "
		      "retry count exhausted";
		break;
	case FAULT_A_RESET:
		why = "the connection was reset (its queue pair went to the error state)";
		break;
	default:
		why = "retry count exhausted under the fault's degraded link";
		break;
	}
	char d[32];
	PWARN("%s: %s: message #%llu failed: fault #%u '%s' (%s) on link %llu: %s%s%s, as an "
	      "InfiniBand RC transport would report (faults: `simfabric fault list`; links: "
	      "`simfabric fabric`)",
	      c->desc, op, (unsigned long long)e->msg, e->fault - 1, name, kind,
	      (unsigned long long)e->value[0], why, e->delay_ns ? "; it had already been delayed " : "",
	      e->delay_ns ? fault_fmt_ns(e->delay_ns, d, sizeof(d)) : "");
}

/* A node_kill of the peer's node on another host (dp_x_held): name the fault, as the killing
 * daemon's log does. Known by this text's address. */
static const char x_peer_killed[] = "the peer's node was killed (a node_kill fault)";
__attribute__((cold, noinline)) static void peer_killed_warn(struct sfnet_comm *c, const char *op,
							     const struct chan_err *e)
{
	struct fst_fault *ff = err_fault(c, e);
	PWARN("%s: %s: the peer is gone: its node was killed by fault #%u '%s' (node_kill, carried "
	      "out by its host's daemon; faults: `simfabric fault list`)",
	      c->desc, op, e->fault - 1, ff ? ff->spec.name : "?");
}

/* Map chan's negative errno to ncclResult_t, say why once, and make the failure sticky. */
__attribute__((cold, noinline)) static ncclResult_t comm_fail(struct sfnet_comm *c, const char *op,
							      int code, const struct chan_err *e)
{
	ncclResult_t res;
	const char *what = e && e->what ? e->what : "";
	unsigned long long v0 = e ? (unsigned long long)e->value[0] : 0;
	unsigned long long v1 = e ? (unsigned long long)e->value[1] : 0;
	switch (code) {
	case -EMSGSIZE:
		res = ncclInvalidUsage;
		PWARN("%s: %s: send of %llu bytes is larger than the posted receive of %llu bytes "
		      "(the ranks disagree on message sizes: same NCCL_PROTO, NCCL_ALGO, "
		      "NCCL_BUFFSIZE everywhere?)",
		      c->desc, op, v0, v1);
		break;
	case -ECONNRESET:
		/* A peer that lost the daemon closes its end: name the cause, not the symptom. */
		if (sfc_session_gone(c->session))
			return comm_daemon_gone(c, op);
		res = ncclRemoteError;
		if (e && e->what == x_peer_killed)
			peer_killed_warn(c, op, e);
		else
			PWARN("%s: %s: %s", c->desc, op, *what ? what : "the peer closed or died");
		break;
	case -ESHUTDOWN:
		res = ncclSystemError;
		PWARN("%s: %s: the fabric daemon at %s shut down", c->desc, op, sfnet_g.sock);
		break;
	case -ETIMEDOUT:
		res = ncclRemoteError;
		if (e && e->fault) {
			fault_warn(c, op, e);
			break;
		}
		/* The model exhausted the RC retries: name the link (simfabric fabric lists ids). */
		/* The receiver knows the link, not how many timeouts the sender saw (v1 = ~0). */
		if (v1 == ~0ULL)
			PWARN("%s: %s: message #%llu failed: %s %llu, as an InfiniBand RC transport "
			      "would report (link ids: `simfabric fabric`)",
			      c->desc, op, e ? (unsigned long long)e->msg : 0ULL,
			      *what ? what : "timed out on link", v0);
		else
			PWARN("%s: %s: message #%llu failed: %s %llu after %llu ACK timeouts, as an "
			      "InfiniBand RC transport would report (link ids: `simfabric fabric`)",
			      c->desc, op, e ? (unsigned long long)e->msg : 0ULL,
			      *what ? what : "timed out on link", v0, v1);
		break;
	case -EIO: /* plugin/gpu_copy.c has said what CUDA reported */
		res = ncclSystemError;
		PWARN("%s: %s: %s (values %llu, %llu)", c->desc, op, what, v0, v1);
		break;
	case -ENOMEM:
		res = ncclSystemError;
		PWARN("%s: %s: out of memory", c->desc, op);
		break;
	default: /* -EINVAL, -EPROTO and anything unexpected: a bug on one side */
		res = ncclInternalError;
		PWARN("%s: %s: %s (%s; values %llu, %llu)", c->desc, op, *what ? what : "failed",
		      strerror(-code), v0, v1);
		break;
	}
	SFTRACE(sftrace_fail(c, op, code, res, e));
	c->failed = res;
	return res;
}

/*
 * At most once per liveness period: has the daemon gone? The daemon's flag
 * in the region, then one poll() of the session socket for a hang-up. Peer
 * death needs no check here: the daemon flags it in the region and chan
 * reports -ECONNRESET.
 */
static inline ncclResult_t live_check(struct sfnet_comm *c, const char *op)
{
	int64_t now = sfnet_coarse_ns();
	if (__builtin_expect(now < c->live_next_ns, 1))
		return ncclSuccess;
	c->live_next_ns = now + c->live_period_ns;
	if ((c->shm && atomic_load_explicit(&c->shm->daemon_gone, memory_order_acquire)) ||
	    sfc_session_gone(c->session))
		return comm_daemon_gone(c, op);
	if (__builtin_expect(c->xtx || c->xrx, 0)) { /* no daemon sees a peer on another host */
		struct chan_err err;
		int rc;
		if (c->xtx) {
			rc = xchan_tx_ping(c->xtx, &err);
		} else { /* the receive agent progresses this endpoint under rx_lock (xchan.h:
			  * one thread at a time): the PING's sticky failure too */
			pthread_mutex_lock(&c->rx_lock);
			rc = xchan_rx_ping(c->xrx, &err);
			pthread_mutex_unlock(&c->rx_lock);
		}
		if (rc)
			return comm_fail(c, op, rc, &err);
	}
	return ncclSuccess;
}

/*
 * The channel under a comm: shared memory (sim/core/chan.h) within a host, messages
 * (sim/core/xchan.h) to another host. The same contract, so the rest of the data path does
 * not know which. (Cross-host comms carry host memory only: plugin/conn.c opens none with the
 * GPU path on.)
 */
static inline int dp_tx_post(struct sfnet_comm *c, const void *data, uint64_t size, int tag,
			     enum chan_mem src, chan_req *q, struct chan_err *e)
{
	if (__builtin_expect(c->xtx != NULL, 0))
		return xchan_tx_post(c->xtx, data, size, tag, q, e);
	return chan_tx_post_src(c->tx, data, size, tag, src, q, e);
}

static inline int dp_rx_post(struct sfnet_comm *c, int n, void **data, const uint64_t *sizes,
			     const int32_t *tags, const struct chan_region *where, uint32_t flags,
			     void *const *mhandles, chan_req *q, struct chan_err *e)
{
	if (__builtin_expect(c->xrx != NULL, 0)) {
		/* the buffers open to writes, each inside its registration */
		struct xchan_wkey wk[CHAN_MAX_RECVS];
		int any = 0;
		for (int i = 0; i < n; i++) {
			const struct sfnet_mr *mr = mhandles ? mhandles[i] : NULL;
			/* this comm's own: another rail's keys name other buffers */
			wk[i].ok = mr && mr->magic == SFNET_MR_MAGIC && mr->comm == c &&
				   mr->xmr && mr_covers(mr, data[i], sizes[i]);
			wk[i].key = wk[i].ok ? mr->xkey : 0;
			wk[i].addr = wk[i].ok ? mr->xaddr + ((uintptr_t)data[i] - mr->base) : 0;
			any |= wk[i].ok;
		}
		return xchan_rx_post_w(c->xrx, n, data, sizes, tags, any ? wk : NULL, flags, q, e);
	}
	return chan_rx_post_in(c->rx, n, data, sizes, tags, where, flags, q, e);
}

/* xmodel_peer_killed at now: 1 with *e naming the node_kill (-ECONNRESET), 0 if none. */
static int dp_x_killed(struct sfnet_comm *c, int64_t now, struct chan_err *e)
{
	uint32_t fid;
	if (!xmodel_peer_killed(c->xmodel, now, &fid))
		return 0;
	memset(e, 0, sizeof(*e));
	e->code = -ECONNRESET;
	e->what = x_peer_killed;
	e->fault = fid + 1;
	return 1;
}

/* comm_hang on a connection to another host: the daemon holds no channel of it, so the comm
 * asks the fabric state itself (xmodel_held) and completes nothing, with no error: 1 with *d 0.
 * A node_kill of the other end's node (whose daemon, on the other host, kills its processes)
 * fails it as a dead peer's channel does on one host, rather than leave it to the liveness ping
 * (xmodel_peer_killed): -ECONNRESET with *e naming the fault. 0: neither, test the endpoint. */
static int dp_x_held(struct sfnet_comm *c, int *d, struct chan_err *e)
{
	/* the one branch a run without comm_hang or node_kill pays, before any clock read */
	if (!c->xmodel) /* the ideal fabric: no fabric state, no faults */
		return 0;
	struct fst_shm *shm = sfnet_g.session->fab->shm;
	if (!fst_call_armed(shm, FAULT_K_COMM_HANG) && !fst_call_armed(shm, FAULT_K_NODE_KILL))
		return 0;
	int64_t now = sfnet_now_ns();
	if (dp_x_killed(c, now, e))
		return -ECONNRESET;
	if (!xmodel_held(c->xmodel, now))
		return 0;
	*d = 0;
	return 1;
}

/* The transport says the other end is gone (-ECONNRESET): if a node_kill of its node has
 * fired, however recently (its host's daemon killed it before this one's state let the kill be
 * seen), that is the fault to name, not a bare "gone". rc otherwise. */
__attribute__((cold, noinline)) static int dp_x_gone(struct sfnet_comm *c, int rc,
						      struct chan_err *e)
{
	if (rc == -ECONNRESET && c->xmodel)
		(void)dp_x_killed(c, sfnet_now_ns() + XMODEL_KILL_SEEN_NS, e);
	return rc;
}

static inline int dp_tx_test(struct sfnet_comm *c, chan_req q, int *d, uint64_t *size,
			     struct chan_err *e)
{
	if (__builtin_expect(c->xtx != NULL, 0)) {
		int h = dp_x_held(c, d, e); /* held: nothing done yet (0); failed: the errno */
		if (h)
			return h < 0 ? h : 0;
		int rc = xchan_tx_test(c->xtx, q, d, size, e);
		return rc < 0 ? dp_x_gone(c, rc, e) : rc;
	}
	return chan_tx_test(c->tx, q, d, size, e);
}

static inline int dp_rx_test(struct sfnet_comm *c, chan_req q, int *d, uint64_t *sizes,
			     struct chan_err *e)
{
	if (__builtin_expect(c->xrx != NULL, 0)) {
		int h = dp_x_held(c, d, e); /* held: nothing done yet (0); failed: the errno */
		if (h)
			return h < 0 ? h : 0;
		int rc = xchan_rx_test(c->xrx, q, d, sizes, e);
		return rc < 0 ? dp_x_gone(c, rc, e) : rc;
	}
	return chan_rx_test(c->rx, q, d, sizes, e);
}

static inline struct sfnet_req *req_get(struct sfnet_comm *c)
{
	int i = c->free_head;
	if (i < 0)
		return NULL;
	struct sfnet_req *r = &c->reqs[i];
	c->free_head = r->next_free;
	return r;
}

/* Back to the pool (LIFO, so the next request reuses a warm one). */
static inline void req_put(struct sfnet_comm *c, struct sfnet_req *r)
{
	r->magic = 0;
	r->next_free = c->free_head;
	c->free_head = (int)(r - c->reqs);
}

__attribute__((cold, noinline)) static ncclResult_t bad_call(const char *op, const void *p,
							     const char *why)
{
	PWARN("%s(%p): %s", op, p, why);
	return ncclInternalError;
}

/*
 * A post on a connection whose peer is gone (closed, died, or a fault failed it). An RC NIC's
 * post still succeeds there and the error comes with the completion, as in NCCL's IB and Socket
 * transports: so hand out a request that fails at test() with the error already reported,
 * rather than fail the post. Only an empty pool (back-pressure that test() clears) gives NULL.
 */
static ncclResult_t post_doomed(struct sfnet_comm *c, int is_send, void **request)
{
	struct sfnet_req *r = req_get(c);
	if (!r)
		return ncclSuccess;
	r->magic = SFNET_REQ_MAGIC;
	r->is_send = (uint16_t)is_send;
	r->n = 1;
	r->npev = 0;
	r->failed = c->failed;
	*request = r;
	return ncclSuccess;
}

ncclResult_t sfnet_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			 void *phandle, void **request)
{
	struct sfnet_comm *c = send_comm;
	long long entered = 0;
	SFTRACE(entered = sftrace_now());
	if (__builtin_expect(!request || !c || c->obj.magic != SFNET_OBJ_MAGIC ||
				     c->obj.kind != SFNET_SEND,
			     0))
		return bad_call("isend", c, "not a sendComm of ours, or no request slot");
	*request = NULL;
	if (__builtin_expect(c->failed != ncclSuccess, 0))
		return c->failed == ncclRemoteError ? post_doomed(c, 1, request) : c->failed;
	if (live_check(c, "isend"))
		return c->failed;
	if (__builtin_expect(size > SFNET_MAX_MSG_BYTES, 0)) {
		PWARN("%s: isend of %zu bytes: larger than maxP2pBytes (%llu)", c->desc, size,
		      SFNET_MAX_MSG_BYTES);
		return ncclInvalidUsage;
	}
	enum chan_mem src = mr_gpu(mhandle) ? CHAN_MEM_DEVICE : CHAN_MEM_HOST;
	if (__builtin_expect(!mr_covers(mhandle, data, size), 0)) {
		if (src == CHAN_MEM_DEVICE)
			return gpu_outside(c, "isend", mhandle, data, size);
		mr_outside(c, "isend", mhandle, data, size);
	}
	struct sfnet_req *r = req_get(c);
	if (!r)
		return ncclSuccess; /* all requests in flight: would block */
	struct chan_err err;
	int rc = dp_tx_post(c, data, size, tag, src, &r->creq, &err);
	if (rc) {
		req_put(c, r);
		if (rc == -EAGAIN)
			return ncclSuccess;
		ncclResult_t res = comm_fail(c, "isend", rc, &err);
		return res == ncclRemoteError ? post_doomed(c, 1, request) : res;
	}
	r->magic = SFNET_REQ_MAGIC;
	r->failed = ncclSuccess;
	r->is_send = 1;
	r->n = 1;
	sfprof_start(c, r, (void *const *)&phandle, &size, &tag);
	*request = r;
	SFTRACE(sftrace_isend(c, r, size, tag, entered));
	return ncclSuccess;
}

ncclResult_t sfnet_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			 void **mhandles, void **phandles, void **request)
{
	struct sfnet_comm *c = recv_comm;
	if (__builtin_expect(!request || !c || c->obj.magic != SFNET_OBJ_MAGIC ||
				     c->obj.kind != SFNET_RECV,
			     0))
		return bad_call("irecv", c, "not a recvComm of ours, or no request slot");
	/*
	 * NCCL's 0x1 "optional completion" hint marks an LL or LL128 receive, whose kernel reads
	 * the lines as they land: those must not land before the model's delivery time.
	 */
	uint32_t flags = *request == (void *)NCCL_NET_OPTIONAL_RECV_COMPLETION ? CHAN_RX_AT_DELIVERY
									      : 0;
	*request = NULL;
	if (__builtin_expect(c->failed != ncclSuccess, 0))
		return c->failed == ncclRemoteError ? post_doomed(c, 0, request) : c->failed;
	if (live_check(c, "irecv"))
		return c->failed;
	if (__builtin_expect(n < 1 || n > CHAN_MAX_RECVS || !data || !sizes, 0))
		return bad_call("irecv", c, "n out of [1, maxRecvs] or no buffers");
	struct chan_region where[CHAN_MAX_RECVS];
	int gpu = 0;
	for (int i = 0; mhandles && i < n; i++) {
		uint64_t region = mr_region(mhandles[i]);
		if (__builtin_expect(!mr_covers(mhandles[i], data[i], sizes[i]), 0)) {
			if (mr_gpu(mhandles[i]))
				return gpu_outside(c, "irecv", mhandles[i], data[i], sizes[i]);
			mr_outside(c, "irecv", mhandles[i], data[i], sizes[i]);
		}
		where[i].id = region;
		where[i].off = region ? (uintptr_t)data[i] - ((struct sfnet_mr *)mhandles[i])->rbase : 0;
		gpu |= region != 0;
	}
	if (__builtin_expect(gpu && !c->where_set, 0)) {
		/* senders ask this process for the regions named in the receives */
		if (chan_rx_set_where(c->rx, sfgpu_where()))
			return bad_call("irecv", c, "no GPU export server to publish");
		c->where_set = 1;
	}
	struct sfnet_req *r = req_get(c);
	if (!r)
		return ncclSuccess;
	struct chan_err err;
	pthread_mutex_lock(&c->rx_lock); /* the receive agent (plugin/agent.h) */
	int rc = dp_rx_post(c, n, data, (const uint64_t *)sizes, (const int32_t *)tags,
			    gpu ? where : NULL, flags, mhandles, &r->creq, &err);
	pthread_mutex_unlock(&c->rx_lock);
	if (rc) {
		req_put(c, r);
		if (rc == -EAGAIN)
			return ncclSuccess;
		ncclResult_t res = comm_fail(c, "irecv", rc, &err);
		return res == ncclRemoteError ? post_doomed(c, 0, request) : res;
	}
	r->magic = SFNET_REQ_MAGIC;
	r->failed = ncclSuccess;
	r->is_send = 0;
	r->n = (uint16_t)n;
	sfprof_start(c, r, phandles, sizes, tags);
	*request = r;
	SFTRACE(sftrace_irecv(c, r, n, sizes, tags));
	return ncclSuccess;
}

ncclResult_t sfnet_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			  void **request)
{
	(void)recv_comm;
	(void)n;
	(void)data;
	(void)sizes;
	(void)mhandles;
	/*
	 * Host memory: visible once test() said done. GPU memory: the copy engine's write
	 * was complete (its event) before the receive could complete, and a completed
	 * copy-engine write is visible to later kernels. Nothing to flush either way.
	 */
	if (request)
		*request = NULL;
	return ncclSuccess;
}

ncclResult_t sfnet_test(void *request, int *done, int *sizes)
{
	struct sfnet_req *r = request;
	if (__builtin_expect(!done, 0))
		return bad_call("test", r, "no done flag");
	*done = 0;
	if (__builtin_expect(!r || r->magic != SFNET_REQ_MAGIC, 0))
		return bad_call("test", r, "not a request in flight");
	struct sfnet_comm *c = r->comm;
	if (__builtin_expect(r->failed != ncclSuccess, 0)) {
		/* posted after the peer was gone: the error, once, and the request is spent */
		ncclResult_t res = r->failed;
		req_put(c, r);
		return res;
	}
	/*
	 * A failed comm still completes what was delivered before the failure (RC completes in
	 * order: a work request acknowledged before the queue pair failed is a success); chan
	 * says which. Anything else gets the failure, reported once.
	 */
	ncclResult_t sticky = c->failed;
	if (__builtin_expect(sticky == ncclSuccess, 1) && live_check(c, "test"))
		return c->failed;
	struct chan_err err;
	int d = 0, rc;
	if (r->is_send) {
		uint64_t sent = 0;
		rc = dp_tx_test(c, r->creq, &d, &sent, &err);
		if (sticky == ncclSuccess || d) /* a failure is traced once, when it happens */
			SFTRACE(sftrace_test(c, r, rc, d, &err));
		if (__builtin_expect(rc != 0, 0)) {
			sfprof_stop(c, r);
			return sticky != ncclSuccess ? sticky : comm_fail(c, "test (send)", rc, &err);
		}
		if (!d)
			return sticky;
		if (sizes)
			sizes[0] = (int)sent;
	} else {
		uint64_t got[CHAN_MAX_RECVS];
		pthread_mutex_lock(&c->rx_lock);
		rc = dp_rx_test(c, r->creq, &d, got, &err);
		if (sticky == ncclSuccess || d) /* reads the channel: under the lock */
			SFTRACE(sftrace_test(c, r, rc, d, &err));
		pthread_mutex_unlock(&c->rx_lock);
		if (__builtin_expect(rc != 0, 0)) {
			sfprof_stop(c, r);
			return sticky != ncclSuccess ? sticky : comm_fail(c, "test (recv)", rc, &err);
		}
		if (!d)
			return sticky;
		if (sizes)
			for (int i = 0; i < r->n; i++)
				sizes[i] = (int)got[i]; /* <= the send size <= INT_MAX */
	}
	if (r->npev)
		sfprof_stop(c, r);
	req_put(c, r); /* NCCL never tests a request again after done */
	*done = 1;
	return ncclSuccess;
}
