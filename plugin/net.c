/* SPDX-License-Identifier: MIT */
/*
 * net.c - the ncclNet v12 implementation, part one: init and finalize, the
 * device table, the object registry and close. plugin/conn.c sets
 * connections up, plugin/data.c moves the data. See net.h for the objects and
 * their owners, docs/net-plugin-guide.md for the contract (sections 4 and
 * 13, with NCCL's source cited).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <unistd.h>

#include "plugin/agent.h"
#include "plugin/gpu.h"
#include "plugin/ncclenv.h"
#include "plugin/net_int.h"
#include "plugin/plog.h"
#include "plugin/prof.h"
#include "plugin/trace.h"
#include "plugin/xhost.h"
#include "sim/core/copyq.h"
#include "sim/core/ctl.h"
#include "sim/core/xmodel.h"

_Atomic(ncclDebugLogger_t) plog_fn;

struct sfnet_global sfnet_g = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* ---- helpers, the object registry ------------------------------------------- */

static int env_ms(const char *name, int def, int min, int max)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || *end || x < min || x > max) {
		PWARN("ignoring %s=%s: not a number of milliseconds in [%d, %d]; using %d", name, v,
		      min, max, def);
		return def;
	}
	return (int)x;
}

/*
 * SIMFABRIC_COPY_THREADS is read by the copy threads (sim/core/copyq.c), which cannot log: a bad
 * value there means 0 threads and a large one is capped. Say so here, naming the value.
 */
static void check_copy_threads(void)
{
	const char *v = getenv("SIMFABRIC_COPY_THREADS");
	long n;
	enum copyq_env e = copyq_env(&n); /* the very reading the copy threads act on */
	if (e == COPYQ_ENV_UNSET)
		return;
	if (e == COPYQ_ENV_BAD)
		PWARN("ignoring SIMFABRIC_COPY_THREADS=%s: not a number of threads in [0, %d]; "
		      "using 0 (every copy runs on NCCL's proxy thread)",
		      v, COPYQ_MAX_THREADS);
	else if (e == COPYQ_ENV_CAPPED)
		PWARN("SIMFABRIC_COPY_THREADS=%s is above the limit of %d threads; using %d", v,
		      COPYQ_MAX_THREADS, COPYQ_MAX_THREADS);
	else
		PINFO(NCCL_INIT | NCCL_NET, "SIMFABRIC_COPY_THREADS=%ld: %ld copy thread(s)", n, n);
}

/* Our node: SIMFABRIC_NODE, else NCCL_HOSTID (each rank its own "host"), else the hostname. */
static void pick_node(char *buf, size_t cap)
{
	const char *v = getenv("SIMFABRIC_NODE");
	if (!v || !*v)
		v = getenv("NCCL_HOSTID");
	if (v && *v) {
		snprintf(buf, cap, "%s", v);
		return;
	}
	if (gethostname(buf, cap) != 0 || !buf[0])
		snprintf(buf, cap, "localhost");
	buf[cap - 1] = 0;
}

void sfnet_obj_link(struct sfnet_obj *o, enum sfnet_kind kind, struct sfnet_ctx *ctx)
{
	o->magic = SFNET_OBJ_MAGIC;
	o->kind = kind;
	o->ctx = ctx;
	o->prev = NULL;
	o->next = sfnet_g.objs;
	if (sfnet_g.objs)
		sfnet_g.objs->prev = o;
	sfnet_g.objs = o;
}

void sfnet_obj_unlink(struct sfnet_obj *o)
{
	if (o->prev)
		o->prev->next = o->next;
	else
		sfnet_g.objs = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->prev = o->next = NULL;
	o->magic = 0;
}

struct sfnet_obj *sfnet_obj_find(const void *p, enum sfnet_kind kind)
{
	for (struct sfnet_obj *o = sfnet_g.objs; o; o = o->next)
		if (o == p)
			return o->kind == kind ? o : NULL;
	return NULL;
}

struct sfnet_ctx *sfnet_ctx_find(const void *p)
{
	for (struct sfnet_ctx *c = sfnet_g.ctxs; c; c = c->next)
		if (c == p)
			return c;
	return NULL;
}

static const char *kind_name(enum sfnet_kind k)
{
	switch (k) {
	case SFNET_LISTEN:
		return "listen";
	case SFNET_PCONN:
		return "connect";
	case SFNET_SEND:
		return "send";
	case SFNET_RECV:
		return "recv";
	}
	return "?";
}

/* ---- destroying objects (under sfnet_g.lock) ---------------------------------- */

static void comm_destroy(struct sfnet_comm *c)
{
	SFTRACE(sftrace_close(c)); /* before the channel end goes: what is in flight */
	for (int i = 0; i < CHAN_MAX_SENDS; i++) /* a profiler sees in-flight events end */
		if (c->reqs[i].magic == SFNET_REQ_MAGIC && c->reqs[i].npev)
			sfprof_stop(c, &c->reqs[i]);
	int inflight = c->tx	  ? chan_tx_inflight(c->tx)
		       : c->rx	  ? chan_rx_inflight(c->rx)
		       : c->xtx ? xchan_tx_inflight(c->xtx)
				: xchan_rx_inflight(c->xrx);
	if (inflight)
		PINFO(NCCL_NET, "%s: closing with %d request(s) in flight", c->desc, inflight);
	if (c->xtx) /* which way the payloads went (SIMFABRIC_XHOST_WRITE) */
		PINFO(NCCL_NET, "%s: closing after %llu message(s), %llu written into the "
				"receiver's buffers",
		      c->desc, (unsigned long long)xchan_tx_sent(c->xtx),
		      (unsigned long long)xchan_tx_written(c->xtx));
	sfagent_remove(c); /* from here on only this thread touches the channel */
	/* Mark our side closed first: the peer fails what can no longer complete. */
	chan_tx_free(c->tx); /* waits for its GPU copies */
	chan_rx_free(c->rx);
	xchan_tx_free(c->xtx); /* its CLOSE tells the peer on the other host */
	xchan_rx_free(c->xrx);
	xmodel_free(c->xmodel); /* after the endpoint: nothing calls its hooks any more */
	sfgpu_tx_free(c->gpu);
	if (c->shm && c->session && !sfc_session_gone(c->session)) {
		struct ctl_msg *m = ctl_msg_new();
		if (m && ctl_add(m, "op", "close") == 0 &&
		    ctl_addf(m, "chan", "0x%llx", (unsigned long long)c->chan_id) == 0 &&
		    ctl_add(m, "side", c->obj.kind == SFNET_SEND ? "send" : "recv") == 0) {
			int rc = sfc_session_notify(c->session, m);
			if (rc)
				PTRACE(NCCL_NET, "%s: close notice not sent: %s", c->desc,
				       strerror(-rc));
		}
		ctl_msg_free(m);
	}
	if (c->shm)
		munmap(c->shm, c->shm_len);
	for (struct sfnet_mr *mr = c->mrs, *next; mr; mr = next) {
		next = mr->next;
		if (mr->xmr) /* after the channel: nothing of ours writes into it any more */
			mr->xnet->mr_close(mr->xnet->ctx, mr->xmr);
		mr->magic = 0;
		free(mr);
	}
	c->obj.magic = 0;
	pthread_mutex_destroy(&c->rx_lock);
	free(c);
}

void sfnet_obj_destroy(struct sfnet_obj *o)
{
	switch (o->kind) {
	case SFNET_LISTEN: {
		struct sfnet_listen *l = (struct sfnet_listen *)o;
		/* Closing the listener's connection drops the listener at the daemon. */
		sfc_conn_close(&l->conn);
		sfxh_listen_free(l->x);
		free(l);
		break;
	}
	case SFNET_PCONN: {
		struct sfnet_pconn *pc = (struct sfnet_pconn *)o;
		sfc_conn_close(&pc->conn);
		sfxh_pconn_free(pc->x);
		free(pc->xr);
		free(pc);
		break;
	}
	case SFNET_SEND:
	case SFNET_RECV:
		comm_destroy((struct sfnet_comm *)o);
		break;
	}
}

/* ---- init, finalize ------------------------------------------------------------- */

/* A relative socket path made absolute once, here: every later connect uses it, whatever
 * directory the process has moved to since (training scripts chdir). */
static int absolute_path(char *path, size_t cap)
{
	char cwd[PATH_MAX], tmp[sizeof(sfnet_g.sock)];
	if (path[0] == '/')
		return 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	int n = snprintf(tmp, sizeof(tmp), "%s/%s", cwd, path);
	if (n < 0 || (size_t)n >= sizeof(tmp) || (size_t)n >= cap ||
	    (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	memcpy(path, tmp, (size_t)n + 1);
	return 0;
}

/* Open the session and build the device table; first init only. Under sfnet_g.lock. */
static ncclResult_t fabric_open(void)
{
	char why[SFC_WHY_LEN];
	int rc = ctl_default_socket(sfnet_g.sock, sizeof(sfnet_g.sock));
	if (rc == 0)
		rc = absolute_path(sfnet_g.sock, sizeof(sfnet_g.sock));
	if (rc) {
		PWARN("cannot work out the daemon's socket path (SIMFABRIC_SOCKET, XDG_RUNTIME_DIR "
		      "or the home directory): %s",
		      strerror(-rc));
		return ncclSystemError;
	}
	pick_node(sfnet_g.node, sizeof(sfnet_g.node));
	rc = sfgpu_setup(why, sizeof(why));
	if (rc < 0) {
		PWARN("%s", why);
		return ncclInvalidUsage;
	}
	if (sfenv_check(why, sizeof(why))) {
		PWARN("%s", why);
		return ncclInvalidUsage;
	}
	sfnet_g.connect_timeout_ms = env_ms("SIMFABRIC_CONNECT_TIMEOUT_MS",
					    SFNET_DEFAULT_CONNECT_TIMEOUT_MS, 1, INT_MAX);
	sfnet_g.liveness_ms =
		env_ms("SIMFABRIC_LIVENESS_MS", SFNET_DEFAULT_LIVENESS_MS, 1, 3600000);
	check_copy_threads();

	struct sfc_session *s;
	bool connected;
	rc = sfc_session_open(sfnet_g.sock, sfnet_g.node, &s, why, sizeof(why), &connected);
	if (!connected && (rc == -ENOENT || rc == -ECONNREFUSED)) {
		PWARN("no fabric daemon answers at %s (%s); start one with: simfabricd --socket %s",
		      sfnet_g.sock, strerror(-rc), sfnet_g.sock);
		return ncclSystemError;
	}
	if (rc) {
		/* Something answers but not as a daemon would (hung, or another program). */
		char hint[SFC_NAME_MAX + 128] = "";
		if (rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EPROTO || rc == -EPIPE)
			snprintf(hint, sizeof(hint),
				 "; is a working simfabricd serving it? start one with: "
				 "simfabricd --socket %s",
				 sfnet_g.sock);
		PWARN("cannot open a session with the fabric daemon at %s as node '%s': %s%s",
		      sfnet_g.sock, sfnet_g.node, why, hint);
		return ncclSystemError;
	}
	if (s->nnics < 1) {
		PWARN("the fabric '%s' at %s gives node '%s' no NICs; check the daemon's fabric "
		      "description",
		      s->fabric, sfnet_g.sock, s->node);
		sfc_session_close(s);
		return ncclInvalidUsage;
	}
	sfnet_g.ndev = s->nnics;
	for (int i = 0; i < s->nnics; i++) {
		struct sfnet_dev *d = &sfnet_g.devs[i];
		snprintf(d->name, sizeof(d->name), "%s", s->nics[i].name);
		d->guid = s->nics[i].guid;
		d->speed_mbps = s->nics[i].speed_mbps;
		/*
		 * The ideal fabric's speed is only a hint for NCCL's tuner (the daemon's stand-in is
		 * 200 Gb/s, what the host path carries). The GPU path carries an NDR NIC's 400 Gb/s,
		 * so say that: NCCL then sizes channels and protocols as on an H100/H200 cluster.
		 */
		if (sfgpu_on() && !s->fab && d->speed_mbps == SFNET_IDEAL_HOST_MBPS)
			d->speed_mbps = SFNET_IDEAL_GPU_MBPS;
		d->latency_us = (float)s->nics[i].latency_ns / 1000.0f;
	}
	sfnet_g.session = s;
	/* what NCCL must know of a GPUDirect NIC next to the GPU (plugin/ncclenv.h): last, since
	 * NCCL falls back to another network when an init fails, which must not inherit them */
	sfenv_apply(sfgpu_on(), why, sizeof(why)); /* cannot fail: sfenv_check passed */
	PINFO(NCCL_INIT | NCCL_NET,
	      "plugin %s, socket %s, node %s (id %d), %d NIC%s (%s%s), fabric %s, instance %s, "
	      "GPU %s, receive agent %s",
	      SFNET_VERSION, sfnet_g.sock, s->node, s->node_id, sfnet_g.ndev,
	      sfnet_g.ndev == 1 ? "" : "s", sfnet_g.devs[0].name, sfnet_g.ndev > 1 ? ", ..." : "",
	      s->fabric, s->instance_text, sfgpu_describe(), sfagent_describe());
	return ncclSuccess;
}

/*
 * A child forked from a rank without exec (a DataLoader worker, say) inherits
 * our daemon sockets. If it kept them, a crash of the rank would go unnoticed
 * by the daemon for as long as the child lives, and the rank's peers would
 * wait instead of failing. The child is not that rank, so it lets them go;
 * any use of the plugin in the child then fails as "daemon gone".
 * glibc drops this handler when the library is dlclosed.
 */
static void atfork_child(void)
{
	/* Only this thread survives the fork; the lock may have been held by another. */
	pthread_mutex_init(&sfnet_g.lock, NULL);
	if (sfnet_g.session) {
		if (sfnet_g.session->conn.fd >= 0)
			close(sfnet_g.session->conn.fd);
		sfnet_g.session->conn.fd = -1;
		atomic_store(&sfnet_g.session->gone, 1);
		pthread_mutex_init(&sfnet_g.session->lock, NULL);
	}
	for (struct sfnet_obj *o = sfnet_g.objs; o; o = o->next) {
		struct sfc_conn *c = o->kind == SFNET_LISTEN	? &((struct sfnet_listen *)o)->conn
				     : o->kind == SFNET_PCONN ? &((struct sfnet_pconn *)o)->conn
							      : NULL;
		if (c && c->fd >= 0) {
			close(c->fd);
			c->fd = -1;
		}
	}
}

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static ncclResult_t init_locked(struct sfnet_ctx **out, uint64_t comm_id, int traffic_class,
				ncclDebugLogger_t logger, ncclProfilerCallback_t profiler)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, atfork_register);
	*out = NULL;
	/* The first init sets the logger even to NULL (a silent harness); later ones refresh it. */
	if (sfnet_g.nctx == 0 || logger)
		atomic_store(&plog_fn, logger);
	if (!sfnet_g.session) {
		ncclResult_t res = fabric_open();
		if (res != ncclSuccess)
			return res;
	} else if (sfc_session_gone(sfnet_g.session)) {
		PWARN("the fabric daemon at %s went away; restart simfabricd and the job",
		      sfnet_g.sock);
		return ncclSystemError;
	}
	sftrace_init(); /* SIMFABRIC_TRACE: read once per load of the library */
	struct sfnet_ctx *c = calloc(1, sizeof(*c));
	if (!c) {
		PWARN("out of memory allocating a ctx");
		if (sfnet_g.nctx == 0) {
			sfc_session_close(sfnet_g.session);
			sfnet_g.session = NULL;
		}
		return ncclSystemError;
	}
	c->magic = SFNET_CTX_MAGIC;
	c->comm_id = comm_id;
	c->traffic_class = traffic_class;
	c->logger = logger;
	c->profiler = profiler;
	pthread_mutex_init(&c->attr_lock, NULL);
	c->next = sfnet_g.ctxs;
	sfnet_g.ctxs = c;
	sfnet_g.nctx++;
	PTRACE(NCCL_INIT | NCCL_NET, "ctx %p for comm 0x%llx (traffic class %d), %d ctx(s) live",
	       (void *)c, (unsigned long long)comm_id, traffic_class, sfnet_g.nctx);
	*out = c;
	return ncclSuccess;
}

ncclResult_t sfnet_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
			ncclDebugLogger_t logger, ncclProfilerCallback_t profiler)
{
	if (!ctx)
		return ncclInternalError;
	*ctx = NULL; /* a failed init leaves NULL, which finalize accepts (2.28.9 calls it) */
	/* The config lives in NCCL's stack frame: copy the value. */
	int tc = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
	struct sfnet_ctx *c;
	pthread_mutex_lock(&sfnet_g.lock);
	ncclResult_t res = init_locked(&c, comm_id, tc, logger, profiler);
	pthread_mutex_unlock(&sfnet_g.lock);
	if (res == ncclSuccess)
		*ctx = c;
	return res;
}

/* Drop one ctx and everything tied to it; the last one closes the session. Under sfnet_g.lock. */
static void ctx_release(struct sfnet_ctx *c)
{
	int n = 0;
	for (struct sfnet_obj *o = sfnet_g.objs, *next; o; o = next) {
		next = o->next;
		if (o->ctx != c)
			continue;
		PTRACE(NCCL_NET, "finalize: closing a %s object left open", kind_name(o->kind));
		sfnet_obj_unlink(o);
		sfnet_obj_destroy(o);
		n++;
	}
	if (n)
		PINFO(NCCL_NET, "finalize closed %d object(s) still tied to ctx %p", n, (void *)c);
	for (struct sfnet_ctx **pp = &sfnet_g.ctxs; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	if (sfnet_g.default_ctx == c)
		sfnet_g.default_ctx = NULL;
	c->magic = 0;
	pthread_mutex_destroy(&c->attr_lock);
	free(c);
	if (--sfnet_g.nctx == 0) {
		sftrace_flush(); /* SIMFABRIC_TRACE: every comm is closed, the file is whole */
		/* Last ctx: no thread of ours exists; closing the session leaves no fd either. */
		sfc_session_close(sfnet_g.session);
		sfnet_g.session = NULL;
		copyq_stop(); /* every comm is closed: no copy is in flight */
		PTRACE(NCCL_INIT | NCCL_NET, "last ctx finalized; session closed");
	}
}

ncclResult_t sfnet_finalize(void *ctx)
{
	if (!ctx)
		return ncclSuccess;
	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_ctx *c = sfnet_ctx_find(ctx);
	if (c)
		ctx_release(c);
	else
		PINFO(NCCL_NET, "finalize of unknown ctx %p ignored", ctx);
	pthread_mutex_unlock(&sfnet_g.lock);
	return ncclSuccess;
}

ncclResult_t sfnet_init_default(ncclDebugLogger_t logger, ncclProfilerCallback_t profiler)
{
	ncclResult_t res = ncclSuccess;
	pthread_mutex_lock(&sfnet_g.lock);
	if (sfnet_g.default_ctx) {
		if (logger)
			atomic_store(&plog_fn, logger);
	} else {
		res = init_locked(&sfnet_g.default_ctx, 0, NCCL_NET_TRAFFIC_CLASS_UNDEF, logger,
				  profiler);
	}
	pthread_mutex_unlock(&sfnet_g.lock);
	return res;
}

void *sfnet_default_ctx(void)
{
	pthread_mutex_lock(&sfnet_g.lock);
	void *c = sfnet_g.default_ctx;
	pthread_mutex_unlock(&sfnet_g.lock);
	return c;
}

/*
 * The v10..v8 APIs have no finalize, so their default ctx would keep the
 * session fd open after NCCL dlcloses us. This runs at dlclose (and at exit)
 * and closes it, but only when nothing else could still be using it: no
 * other ctx, no open object, and nobody holding the lock. It registers
 * nothing that outlives the library.
 */
__attribute__((destructor)) static void sfnet_unload(void)
{
	if (pthread_mutex_trylock(&sfnet_g.lock) != 0)
		return;
	if (sfnet_g.default_ctx && sfnet_g.nctx == 1 && !sfnet_g.objs) {
		atomic_store(&plog_fn, NULL); /* NCCL may be half torn down at exit: stay quiet */
		ctx_release(sfnet_g.default_ctx);
	} else if (sfnet_g.session && pthread_mutex_trylock(&sfnet_g.session->lock) == 0) {
		/*
		 * Objects are still open (NCCL leaks a listenComm of an aborted setup; v8-v10
		 * have no finalize): leave them, they may still be in use at exit, but hang up
		 * on the daemon, so it ends our session and a reloaded copy can say hello.
		 */
		atomic_store(&plog_fn, NULL);
		sfc_conn_close(&sfnet_g.session->conn);
		atomic_store(&sfnet_g.session->gone, 1);
		pthread_mutex_unlock(&sfnet_g.session->lock);
	}
	copyq_stop(); /* no thread may run our code once it is unmapped */
	pthread_mutex_unlock(&sfnet_g.lock);
}

/* ---- devices --------------------------------------------------------------------- */

ncclResult_t sfnet_devices(int *ndev)
{
	if (!ndev)
		return ncclInternalError;
	pthread_mutex_lock(&sfnet_g.lock);
	int n = sfnet_g.nctx > 0 ? sfnet_g.ndev : 0;
	pthread_mutex_unlock(&sfnet_g.lock);
	*ndev = n;
	if (n == 0) {
		PWARN("devices() called before a successful init");
		return ncclInternalError;
	}
	return ncclSuccess;
}

ncclResult_t sfnet_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	if (!props)
		return ncclInternalError;
	pthread_mutex_lock(&sfnet_g.lock);
	if (sfnet_g.nctx == 0 || dev < 0 || dev >= sfnet_g.ndev) {
		int n = sfnet_g.nctx > 0 ? sfnet_g.ndev : 0;
		pthread_mutex_unlock(&sfnet_g.lock);
		PWARN("getProperties(%d): no such device (%d device(s)%s)", dev, n,
		      n ? "" : ", not initialized");
		return ncclInvalidArgument;
	}
	const struct sfnet_dev *d = &sfnet_g.devs[dev];
	memset(props, 0, sizeof(*props));
	props->name = (char *)d->name; /* static storage: outlives the call and the session */
	props->pciPath = NULL;	       /* a virtual NIC: NCCL hangs it under the first CPU */
	props->guid = d->guid;	       /* unique per NIC from the daemon: no shared-port merge */
	/* GPU memory: one-sided copies (plugin/gpu.h); no DMA-BUF (CUDA cannot import one) */
	props->ptrSupport = NCCL_PTR_HOST | (sfgpu_on() ? NCCL_PTR_CUDA : 0);
	props->regIsGlobal = 0;
	props->forceFlush = 0;
	props->speed = d->speed_mbps; /* Mbps */
	props->port = 1;
	props->latency = d->latency_us; /* NCCL truncates it to whole microseconds */
	props->maxComms = SFNET_MAX_COMMS;
	props->maxRecvs = CHAN_MAX_RECVS;
	props->netDeviceType = NCCL_NET_DEVICE_HOST;
	props->netDeviceVersion = 0;
	props->vProps.ndevs = 1;
	props->vProps.devs[0] = dev;
	props->maxP2pBytes = SFNET_MAX_MSG_BYTES;
	props->maxCollBytes = SFNET_MAX_MSG_BYTES;
	props->maxMultiRequestSize = 1;
	props->railId = NCCL_NET_ID_UNDEF;
	props->planeId = NCCL_NET_ID_UNDEF;
	pthread_mutex_unlock(&sfnet_g.lock);
	return ncclSuccess;
}

/* ---- close ---------------------------------------------------------------------------- */

/* Close never fails and never waits for the peer: NCCL skips its cleanup on an error. */
static ncclResult_t close_obj(void *p, enum sfnet_kind kind, const char *op)
{
	if (!p)
		return ncclSuccess;
	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_obj *o = sfnet_obj_find(p, kind);
	if (o) {
		sfnet_obj_unlink(o);
		sfnet_obj_destroy(o);
	}
	pthread_mutex_unlock(&sfnet_g.lock);
	if (!o)
		PWARN("%s of unknown %s comm %p ignored", op, kind_name(kind), p);
	return ncclSuccess;
}

ncclResult_t sfnet_close_send(void *send_comm)
{
	return close_obj(send_comm, SFNET_SEND, "closeSend");
}

ncclResult_t sfnet_close_recv(void *recv_comm)
{
	return close_obj(recv_comm, SFNET_RECV, "closeRecv");
}

ncclResult_t sfnet_close_listen(void *listen_comm)
{
	return close_obj(listen_comm, SFNET_LISTEN, "closeListen");
}

/* ---- hints ---------------------------------------------------------------------------- */

/*
 * Stored per ctx for now (the emulated fabric has no use for concurrency
 * hints yet). No sfnet_g.lock: it is called from the progress thread too, which
 * must never wait behind a slow setup call.
 */
ncclResult_t sfnet_set_net_attr(void *ctx, ncclNetAttr_t *attr)
{
	struct sfnet_ctx *c = ctx;
	if (!c || !attr)
		return ncclSuccess;
	if (c->magic != SFNET_CTX_MAGIC) {
		PWARN("setNetAttr on an unknown ctx %p ignored", ctx);
		return ncclSuccess;
	}
	pthread_mutex_lock(&c->attr_lock);
	c->attr = *attr;
	c->attr_set = 1;
	pthread_mutex_unlock(&c->attr_lock);
	return ncclSuccess;
}
