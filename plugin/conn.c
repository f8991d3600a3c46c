/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the ncclNet v12 implementation, part two: listen, connect and
 * accept, none of which ever blocks. Each listener and each pending connect
 * has a daemon connection of its own; NCCL's service thread polls them
 * through accept and connect until the daemon hands over a channel's memfd,
 * which becomes a sendComm or recvComm here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "plugin/agent.h"
#include "plugin/gpu.h"
#include "plugin/net_int.h"
#include "plugin/plog.h"
#include "plugin/xhost.h"
#include "plugin/xroute.h"
#include "sim/core/ctl.h"

/* A hex u64 as the protocol writes ids (with or without 0x). */
static int get_hex(const struct ctl_msg *m, const char *key, uint64_t *out)
{
	const char *v = ctl_get(m, key);
	if (!v || !*v)
		return -ENOENT;
	char *end;
	errno = 0;
	uint64_t x = strtoull(v, &end, 16);
	if (errno || *end)
		return -EINVAL;
	*out = x;
	return 0;
}

/* ---- failing setup calls (regmr_fail, connect_fail, accept_fail) ---------------------- */

ncclResult_t sfnet_call_fault(uint32_t kind, const char *what)
{
	/* the errors NCCL's IB plugin returns (src/transport/net_ib.cc: a failed ibv_reg_mr,
	 * ibv_create_qp or ibv_modify_qp is ncclSystemError through its wrap_ibv_* calls) */
	static const ncclResult_t res[FAULT_E_COUNT] = {
		[FAULT_E_SYSTEM] = ncclSystemError,
		[FAULT_E_INTERNAL] = ncclInternalError,
		[FAULT_E_REMOTE] = ncclRemoteError,
	};
	struct sfc_session *s = sfnet_g.session;
	struct timespec ts;
	uint32_t fid;
	uint64_t call = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (!s || !s->fab || !fst_call_fault(s->fab->shm, kind, s->node_id, now, &fid, &call))
		return ncclSuccess;
	const struct fst_fault *ff = fst_fault(s->fab->shm, fid);
	uint32_t e = ff && ff->spec.err_kind < FAULT_E_COUNT ? ff->spec.err_kind : 0;
	PWARN("%s on %s failed: fault #%u '%s' (%s of node %s, call %llu): as the verbs call behind "
	      "it failing on a real NIC (nccl%sError)",
	      what, s->node, fid, ff ? ff->spec.name : "?", fault_kind_names[kind], s->node,
	      (unsigned long long)call,
	      e == FAULT_E_SYSTEM ? "System" : e == FAULT_E_INTERNAL ? "Internal" : "Remote");
	return res[e];
}

/* ---- opening a channel end --------------------------------------------------------- */

/* What every comm has, whatever carries it: its place, its request pool, its name. */
static void comm_finish(struct sfnet_comm *c, enum sfnet_kind kind, int dev, uint64_t id,
			const char *peer_node, const char *peer_nic, int traffic_class,
			const char *idname)
{
	const char *me = sfnet_g.session->node;
	const char *mynic = sfnet_g.devs[dev].name;
	c->session = sfnet_g.session;
	c->chan_id = id;
	c->dev = dev;
	c->traffic_class = traffic_class;
	c->live_period_ns = (int64_t)sfnet_g.liveness_ms * 1000000;
	c->live_next_ns = sfnet_coarse_ns() + c->live_period_ns;
	int nreq = kind == SFNET_SEND ? CHAN_MAX_SENDS : CHAN_MAX_REQS;
	for (int i = 0; i < nreq; i++) {
		c->reqs[i].comm = c;
		c->reqs[i].next_free = i + 1 < nreq ? i + 1 : -1;
	}
	c->free_head = 0;
	if (snprintf(c->desc, sizeof(c->desc), "%s %s/%s %s %s/%s %s 0x%llx",
		     kind == SFNET_SEND ? "send" : "recv", me, mynic,
		     kind == SFNET_SEND ? "->" : "<-", peer_node, peer_nic, idname,
		     (unsigned long long)id) >= (int)sizeof(c->desc))
		PTRACE(NCCL_NET, "comm description truncated to '%s'", c->desc);
}

static void comm_link(struct sfnet_comm *c, enum sfnet_kind kind, struct sfnet_ctx *ctx)
{
	pthread_mutex_init(&c->rx_lock, NULL);
	sfnet_obj_link(&c->obj, kind, ctx);
	if (kind == SFNET_RECV)
		sfagent_add(c);
}

/*
 * Map a channel's memfd and attach one end. The caller keeps (and closes)
 * fd. peer_* name the other end for messages. Under sfnet_g.lock.
 */
static ncclResult_t comm_open(enum sfnet_kind kind, struct sfnet_ctx *ctx, int dev, int fd,
			      uint64_t chan_id, uint64_t shm_bytes, const char *peer_node,
			      const char *peer_nic, int traffic_class, struct sfnet_comm **out)
{
	*out = NULL;
	const char *me = sfnet_g.session->node;
	const char *mynic = sfnet_g.devs[dev].name;
	const char *side = kind == SFNET_SEND ? "send" : "recv";
	if (fd < 0) {
		PWARN("%s on %s/%s chan 0x%llx: the daemon sent no shared memory with its reply",
		      side, me, mynic, (unsigned long long)chan_id);
		return ncclInternalError;
	}
	struct stat st = {0};
	if (shm_bytes == 0 || shm_bytes > CHAN_MAX_SHM_BYTES || fstat(fd, &st) != 0 ||
	    (uint64_t)st.st_size < shm_bytes) {
		PWARN("%s on %s/%s chan 0x%llx: bad shared memory from the daemon (shm_bytes %llu, "
		      "memfd size %lld)",
		      side, me, mynic, (unsigned long long)chan_id, (unsigned long long)shm_bytes,
		      (long long)st.st_size);
		return ncclInternalError;
	}
	/* The daemon seals the memfd: without the seals a peer could shrink it and SIGBUS us. */
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		PWARN("%s on %s/%s chan 0x%llx: the shared memory is not sealed against shrinking "
		      "(seals 0x%x)", side, me, mynic, (unsigned long long)chan_id, seals);
		return ncclInternalError;
	}
	/* Populate now: page faults belong to setup, not to the first messages. */
	void *base =
		mmap(NULL, shm_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (base == MAP_FAILED) {
		PWARN("%s on %s/%s chan 0x%llx: mmap of %llu bytes failed: %s", side, me, mynic,
		      (unsigned long long)chan_id, (unsigned long long)shm_bytes, strerror(errno));
		return ncclSystemError;
	}
	struct chan_err err = {0};
	int rc = chan_check(base, shm_bytes, &err);
	if (rc) {
		PWARN("%s on %s/%s chan 0x%llx: the shared memory fails its check: %s (%llu, %llu)",
		      side, me, mynic, (unsigned long long)chan_id, err.what ? err.what : "?",
		      (unsigned long long)err.value[0], (unsigned long long)err.value[1]);
		munmap(base, shm_bytes);
		return ncclInternalError;
	}
	struct sfnet_comm *c = calloc(1, sizeof(*c));
	if (!c) {
		chan_abandon(base, kind == SFNET_SEND ? 't' : 'r', ENOMEM); /* the peer must not wait */
		munmap(base, shm_bytes);
		PWARN("%s on %s/%s: out of memory", side, me, mynic);
		return ncclSystemError;
	}
	c->shm = base;
	c->shm_len = shm_bytes;
	rc = kind == SFNET_SEND ? chan_tx_new(base, shm_bytes, &c->tx)
				: chan_rx_new(base, shm_bytes, &c->rx);
	if (rc) {
		PWARN("%s on %s/%s chan 0x%llx: cannot attach to the channel: %s", side, me, mynic,
		      (unsigned long long)chan_id,
		      rc == -EPROTO ? "that end is already attached" : strerror(-rc));
		if (rc == -ENOMEM)
			chan_abandon(base, kind == SFNET_SEND ? 't' : 'r', ENOMEM);
		munmap(base, shm_bytes);
		free(c);
		return rc == -ENOMEM ? ncclSystemError : ncclInternalError;
	}
	/* On a modelled fabric every message is reserved on the route the daemon wrote. */
	if (sfnet_g.session->fab) {
		rc = kind == SFNET_SEND ? chan_tx_set_fabric(c->tx, sfnet_g.session->fab)
					: chan_rx_set_fabric(c->rx, sfnet_g.session->fab);
		if (rc) {
			PWARN("%s on %s/%s chan 0x%llx: the route in the shared memory names links "
			      "the fabric does not have", side, me, mynic, (unsigned long long)chan_id);
			if (kind == SFNET_SEND)
				chan_tx_free(c->tx);
			else
				chan_rx_free(c->rx);
			munmap(base, shm_bytes);
			free(c);
			return ncclInternalError;
		}
	}
	comm_finish(c, kind, dev, chan_id, peer_node, peer_nic, traffic_class, "chan");
	/* A sender's copy engine, for receivers that post GPU memory (its stream comes later,
	 * with the first copy, in the proxy thread). */
	if (kind == SFNET_SEND && sfgpu_on() &&
	    (sfgpu_tx_new(c->desc, &c->gpu) || chan_tx_set_dma(c->tx, &sfgpu_dma, c->gpu))) {
		PWARN("%s: out of memory for the GPU copy engine", c->desc);
		sfgpu_tx_free(c->gpu);
		chan_tx_free(c->tx);
		munmap(base, shm_bytes);
		free(c);
		return ncclSystemError;
	}
	comm_link(c, kind, ctx);
	*out = c;
	return ncclSuccess;
}

/*
 * A channel end to another host (plugin/xhost.h): the same comm over sim/core/xchan. On a
 * modelled fabric its model is the distributed clock's (plugin/xroute.h: the route from the
 * daemon); host memory only (the GPU path stages through the copy engine, not yet). Under
 * sfnet_g.lock.
 */
static ncclResult_t comm_xopen(enum sfnet_kind kind, struct sfnet_ctx *ctx, int dev,
			       const struct sfxh_peer *p, uint64_t listener,
			       const struct sfxr_route *xr, int traffic_class,
			       struct sfnet_comm **out)
{
	*out = NULL;
	const char *side = kind == SFNET_SEND ? "send" : "recv";
	char what[SFNET_DESC_LEN];
	snprintf(what, sizeof(what), "%s %.64s/%.24s %s %.64s/nic%u on host %u", side,
		 sfnet_g.session->node, sfnet_g.devs[dev].name, kind == SFNET_SEND ? "->" : "<-",
		 p->node, p->nic, p->host);
	struct sfnet_comm *c = calloc(1, sizeof(*c));
	if (!c) {
		PWARN("%s: out of memory", what);
		return ncclSystemError;
	}
	if (sfnet_g.session->fab) { /* the sender asked at its connect; the receiver asks now */
		struct sfxr_route rr;
		ncclResult_t res =
			xr ? ncclSuccess
			   : sfxr_route(p->node, (int)p->nic, sfnet_g.session->node, dev, 0, what, &rr);
		if (res == ncclSuccess)
			res = sfxr_model_new(xr ? xr : &rr,
					     kind == SFNET_SEND ? XMODEL_TX : XMODEL_RX, listener,
					     p->conn, what, &c->xmodel);
		if (res != ncclSuccess) {
			free(c);
			return res;
		}
	}
	struct xchan_cfg cfg = {.net = sfxh_net(kind == SFNET_SEND ? SFXH_TX : SFXH_RX, p->rail),
				.peer = p->peer,
				.conn = p->conn,
				.model = c->xmodel ? &xmodel_hooks : NULL,
				.model_ctx = c->xmodel,
				.write_min = kind == SFNET_SEND ? sfxh_write_min() : 0};
	c->xnet = cfg.net;
	int rc = kind == SFNET_SEND ? xchan_tx_new(&cfg, &c->xtx) : xchan_rx_new(&cfg, &c->xrx);
	if (rc) {
		PWARN("%s: cannot open the cross-host channel: %s", what, strerror(-rc));
		xmodel_free(c->xmodel);
		free(c);
		return rc == -ENOMEM ? ncclSystemError : ncclInternalError;
	}
	char nic[24];
	snprintf(nic, sizeof(nic), "nic%u@host%u", p->nic, p->host);
	comm_finish(c, kind, dev, p->conn, p->node, nic, traffic_class, "xconn");
	comm_link(c, kind, ctx);
	*out = c;
	return ncclSuccess;
}

/* Why a connection to another host cannot be made here, or NULL. */
static const char *xhost_refusal(void)
{
	if (sfgpu_on())
		return "the GPU data path is on (SIMFABRIC_GPU), and cross-host connections carry "
		       "host memory only for now: set SIMFABRIC_GPU=off";
	return NULL;
}

/* ---- listen, accept ------------------------------------------------------------------ */

static int check_dev(const char *op, int dev)
{
	if (dev >= 0 && dev < sfnet_g.ndev)
		return 0;
	PWARN("%s: no device %d (this node has %d)", op, dev, sfnet_g.ndev);
	return -1;
}

ncclResult_t sfnet_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	if (!handle || !listen_comm)
		return ncclInternalError;
	*listen_comm = NULL;
	ncclResult_t res = ncclSuccess;
	struct ctl_msg *m = NULL;
	struct sfnet_listen *l = NULL;

	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_ctx *c = sfnet_ctx_find(ctx);
	if (!c) {
		PWARN("listen on device %d with an unknown ctx %p (init not called, or finalized)",
		      dev, ctx);
		res = ncclInternalError;
		goto out;
	}
	if (check_dev("listen", dev)) {
		res = ncclInternalError;
		goto out;
	}
	if (sfc_session_gone(sfnet_g.session)) {
		PWARN("listen on %s: the fabric daemon at %s went away", sfnet_g.devs[dev].name,
		      sfnet_g.sock);
		res = ncclSystemError;
		goto out;
	}
	l = calloc(1, sizeof(*l));
	m = ctl_msg_new();
	if (!l || !m) {
		PWARN("listen on %s: out of memory", sfnet_g.devs[dev].name);
		res = ncclSystemError;
		goto out;
	}
	l->conn.fd = -1;
	l->id = sfc_random_id();
	l->dev = dev;
	int rc = sfc_conn_open(&l->conn, sfnet_g.sock);
	if (rc) {
		PWARN("listen on %s: cannot reach the fabric daemon at %s: %s",
		      sfnet_g.devs[dev].name, sfnet_g.sock, strerror(-rc));
		res = ncclSystemError;
		goto out;
	}
	/* Don't wait for the reply: listen must not block. accept reads it (and any error). */
	rc = ctl_add(m, "op", "listen");
	if (!rc)
		rc = ctl_addf(m, "listener", "0x%016llx", (unsigned long long)l->id);
	if (!rc)
		rc = ctl_addf(m, "nic", "%d", dev);
	if (!rc && sfnet_g.session->token)
		rc = ctl_addf(m, "session", "0x%016llx", (unsigned long long)sfnet_g.session->token);
	if (!rc)
		rc = sfc_conn_send(&l->conn, m, -1);
	if (rc) {
		PWARN("listen on %s: sending op=listen to the daemon at %s failed: %s",
		      sfnet_g.devs[dev].name, sfnet_g.sock, strerror(-rc));
		res = ncclSystemError;
		goto out;
	}
	struct sfnet_handle h;
	memset(&h, 0, sizeof(h));
	h.magic = SFNET_HANDLE_MAGIC;
	h.version = SFNET_HANDLE_VERSION;
	h.nic = (uint32_t)dev;
	h.instance = sfnet_g.session->instance;
	h.listener = l->id;
	/* Only shown in the peer's messages: a long node name may be cut short. */
	size_t nlen = strnlen(sfnet_g.session->node, sizeof(h.node) - 1);
	memcpy(h.node, sfnet_g.session->node, nlen);
	memcpy(handle, &h, sizeof(h));
	struct sfxh_addr xa = {.host = (uint16_t)sfxh_host()};
	if (sfxh_host() >= 0) { /* version 2, endpoint or not: a connect then says why not */
		if (!xhost_refusal())
			sfxh_listen_new(sfnet_g.devs[dev].name, &l->x, &xa);
		struct sfnet_handle2 h2;
		memset(&h2, 0, sizeof(h2));
		memcpy(&h2, &h, offsetof(struct sfnet_handle2, host)); /* the common 32 bytes */
		h2.version = SFNET_HANDLE_VERSION_XHOST;
		h2.host = xa.host;
		h2.addr_len = xa.len;
		h2.port = xa.port;
		memcpy(h2.addr, xa.addr, sizeof(h2.addr));
		nlen = strnlen(sfnet_g.session->node, sizeof(h2.node) - 1);
		memcpy(h2.node, sfnet_g.session->node, nlen);
		memcpy(handle, &h2, sizeof(h2));
	}
	sfnet_obj_link(&l->obj, SFNET_LISTEN, c);
	PTRACE(NCCL_NET, "listen on %s/%s: listener 0x%016llx", sfnet_g.session->node,
	       sfnet_g.devs[dev].name, (unsigned long long)l->id);
	*listen_comm = l;
	l = NULL;
out:
	pthread_mutex_unlock(&sfnet_g.lock);
	ctl_msg_free(m);
	if (l) {
		sfc_conn_close(&l->conn);
		free(l);
	}
	return res;
}

/* Turn one op=incoming event into a recvComm. Under sfnet_g.lock. */
static ncclResult_t accept_incoming(struct sfnet_listen *l, const struct ctl_msg *ev,
				    struct sfnet_comm **out)
{
	uint64_t chan_id = 0, shm_bytes = 0;
	const char *from_node = ctl_get(ev, "from_node");
	const char *from_nic = ctl_get(ev, "from_nic");
	if (get_hex(ev, "chan", &chan_id) || ctl_get_u64(ev, "shm_bytes", &shm_bytes)) {
		PWARN("accept on %s/%s (listener 0x%016llx): malformed op=incoming from the daemon "
		      "(chan=%s shm_bytes=%s)",
		      sfnet_g.session->node, sfnet_g.devs[l->dev].name, (unsigned long long)l->id,
		      ctl_get(ev, "chan") ? ctl_get(ev, "chan") : "(none)",
		      ctl_get(ev, "shm_bytes") ? ctl_get(ev, "shm_bytes") : "(none)");
		return ncclInternalError;
	}
	char nic[32];
	if (!from_nic || !*from_nic)
		from_nic = "?";
	/* The daemon names the NIC by index; show it the way the send side does. */
	int by_index = strspn(from_nic, "0123456789") == strlen(from_nic);
	snprintf(nic, sizeof(nic), "%s%.24s", by_index ? "nic" : "", from_nic);
	return comm_open(SFNET_RECV, l->obj.ctx, l->dev, ev->fd, chan_id, shm_bytes,
			 from_node ? from_node : "?", nic, NCCL_NET_TRAFFIC_CLASS_UNDEF, out);
}

/*
 * Handle one message from a listener's connection: the reply to op=listen
 * (an error there fails the listener) or an event. *out gets a recvComm for
 * an op=incoming. Under sfnet_g.lock.
 */
static ncclResult_t listen_msg(struct sfnet_listen *l, const struct ctl_msg *m,
			       struct sfnet_comm **out)
{
	const char *node = sfnet_g.session->node, *nic = sfnet_g.devs[l->dev].name;
	*out = NULL;
	if (sfc_is_event(m)) {
		if (strcmp(ctl_get(m, "op"), "incoming") == 0)
			return accept_incoming(l, m, out);
		PTRACE(NCCL_NET, "listener 0x%016llx: ignoring event op=%s",
		       (unsigned long long)l->id, ctl_get(m, "op"));
		return ncclSuccess;
	}
	const char *text;
	int e = sfc_reply_errno(m, &text);
	if (e == 0) {
		l->replied = 1;
		return ncclSuccess;
	}
	PWARN("listen on %s/%s (listener 0x%016llx) was refused by the daemon: %s%s%s", node, nic,
	      (unsigned long long)l->id, e > 0 ? strerror(e) : "reply without errno",
	      *text ? ": " : "", text);
	return e == ENODEV ? ncclInvalidUsage : ncclSystemError;
}

ncclResult_t sfnet_accept(void *listen_comm, void **recv_comm,
			  ncclNetDeviceHandle_t **recv_dev_comm)
{
	(void)recv_dev_comm; /* host plugin: no device handle; NULL or not, leave it alone */
	if (!recv_comm)
		return ncclInternalError;
	*recv_comm = NULL;
	ncclResult_t res = ncclSuccess;
	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_listen *l = (struct sfnet_listen *)sfnet_obj_find(listen_comm, SFNET_LISTEN);
	if (!l) {
		PWARN("accept on an unknown listenComm %p", listen_comm);
		res = ncclInternalError;
		goto out;
	}
	if (l->failed) {
		res = l->failed; /* sticky: a failed listener stays failed */
		goto out;
	}
	const char *node = sfnet_g.session->node, *nic = sfnet_g.devs[l->dev].name;
	if (!l->deadline_ms)
		l->deadline_ms = sfnet_now_ms() + sfnet_g.connect_timeout_ms;
	struct sfnet_comm *c = NULL;
	struct sfxh_peer xp;
	int xk = l->x ? sfxh_accept_poll(l->x, &xp) : 0;
	if (xk < 0)
		res = ncclSystemError; /* logged: the listener fails (sticky, below) */
	if (xk == 1) { /* a connect from another host */
		const char *no = xhost_refusal();
		res = no ? ncclInvalidUsage
			 : comm_xopen(SFNET_RECV, l->obj.ctx, l->dev, &xp, l->id, NULL,
				      NCCL_NET_TRAFFIC_CLASS_UNDEF, &c);
		if (no)
			PWARN("accept on %s/%s: refusing the connect from %s on another host: %s",
			      node, nic, xp.node, no);
		if (sfxh_welcome(l->x, &xp, res == ncclSuccess ? 0 : ECONNREFUSED) && c) {
			sfnet_obj_unlink(&c->obj);
			sfnet_obj_destroy(&c->obj);
			c = NULL;
			res = ncclSystemError;
		}
	}
	while (!c && res == ncclSuccess) {
		struct ctl_msg *m;
		int rc = sfc_conn_recv(&l->conn, &m, 0);
		if (rc == -EAGAIN) {
			if (sfnet_now_ms() < l->deadline_ms)
				break; /* not yet: NCCL calls again */
			if (!l->replied) {
				PWARN("accept on %s/%s (listener 0x%016llx): the daemon at %s never "
				      "answered op=listen within %d ms: is it hung?",
				      node, nic, (unsigned long long)l->id, sfnet_g.sock,
				      sfnet_g.connect_timeout_ms);
				res = ncclSystemError;
				break;
			}
			PWARN("accept on %s/%s (listener 0x%016llx): no peer connected within "
			      "%d ms (SIMFABRIC_CONNECT_TIMEOUT_MS): the peer is gone or stuck",
			      node, nic, (unsigned long long)l->id, sfnet_g.connect_timeout_ms);
			res = ncclRemoteError;
		} else if (rc) {
			PWARN("accept on %s/%s (listener 0x%016llx): lost the daemon "
			      "connection: %s",
			      node, nic, (unsigned long long)l->id,
			      rc == -ECONNRESET ? "the fabric daemon went away" : strerror(-rc));
			res = ncclSystemError;
		} else {
			res = listen_msg(l, m, &c);
			ctl_msg_free(m); /* closes the memfd: the mapping keeps the memory */
		}
	}
	if (res == ncclSuccess && c && sfnet_call_armed(FAULT_K_ACCEPT_FAIL) &&
	    (res = sfnet_call_fault(FAULT_K_ACCEPT_FAIL, c->desc)) != ncclSuccess) {
		/* this accept fails, the listener lives on: the sender sees the end closed */
		l->deadline_ms = 0;
		sfnet_obj_unlink(&c->obj);
		sfnet_obj_destroy(&c->obj);
		goto out;
	}
	if (res != ncclSuccess) {
		l->failed = res;
	} else if (c) {
		l->deadline_ms = 0; /* the next accept on this listener gets a fresh timeout */
		PTRACE(NCCL_NET, "%s: accepted", c->desc);
		*recv_comm = c;
	}
out:
	pthread_mutex_unlock(&sfnet_g.lock);
	return res;
}

/* ---- connect ------------------------------------------------------------------------- */

static struct sfnet_pconn *pconn_find(const void *handle_addr)
{
	for (struct sfnet_obj *o = sfnet_g.objs; o; o = o->next)
		if (o->kind == SFNET_PCONN && ((struct sfnet_pconn *)o)->handle_addr == handle_addr)
			return (struct sfnet_pconn *)o;
	return NULL;
}

static void pconn_drop(struct sfnet_pconn *pc)
{
	sfnet_obj_unlink(&pc->obj);
	sfnet_obj_destroy(&pc->obj);
}

/* A pending connect's identity, whichever way it goes. node: NUL-terminated. */
static void pconn_init(struct sfnet_pconn *pc, const void *handle_addr, uint64_t listener,
		       int dev, int tc, uint32_t nic, const char *node)
{
	pc->conn.fd = -1;
	pc->handle_addr = handle_addr;
	pc->listener = listener;
	pc->dev = dev;
	pc->traffic_class = tc;
	pc->peer_nic = nic;
	snprintf(pc->peer_node, sizeof(pc->peer_node), "%s", node);
	pc->deadline_ms = sfnet_now_ms() + sfnet_g.connect_timeout_ms;
}

static ncclResult_t pconn_start(struct sfnet_ctx *ctx, int dev, int tc,
				const struct sfnet_handle *h, const void *handle_addr,
				struct sfnet_pconn **out)
{
	*out = NULL;
	struct sfnet_pconn *pc = calloc(1, sizeof(*pc));
	struct ctl_msg *m = ctl_msg_new();
	ncclResult_t res = ncclSuccess;
	if (!pc || !m) {
		PWARN("connect from %s: out of memory", sfnet_g.devs[dev].name);
		res = ncclSystemError;
		goto out;
	}
	pconn_init(pc, handle_addr, h->listener, dev, tc, h->nic, h->node);
	int rc = sfc_conn_open(&pc->conn, sfnet_g.sock);
	if (rc) {
		PWARN("connect from %s/%s to %s/nic%u: cannot reach the fabric daemon at %s: %s",
		      sfnet_g.session->node, sfnet_g.devs[dev].name, pc->peer_node, pc->peer_nic,
		      sfnet_g.sock, strerror(-rc));
		res = ncclSystemError;
		goto out;
	}
	rc = ctl_add(m, "op", "connect");
	if (!rc)
		rc = ctl_addf(m, "listener", "0x%016llx", (unsigned long long)h->listener);
	if (!rc)
		rc = ctl_addf(m, "nic", "%d", dev);
	if (!rc && sfnet_g.session->token)
		rc = ctl_addf(m, "session", "0x%016llx", (unsigned long long)sfnet_g.session->token);
	if (!rc)
		rc = sfc_conn_send(&pc->conn, m, -1);
	if (rc) {
		PWARN("connect from %s/%s to %s/nic%u: sending op=connect to the daemon failed: %s",
		      sfnet_g.session->node, sfnet_g.devs[dev].name, pc->peer_node, pc->peer_nic,
		      strerror(-rc));
		res = ncclSystemError;
		goto out;
	}
	sfnet_obj_link(&pc->obj, SFNET_PCONN, ctx);
	*out = pc;
	pc = NULL;
out:
	ctl_msg_free(m);
	if (pc) {
		sfc_conn_close(&pc->conn);
		free(pc);
	}
	return res;
}

/* The daemon's reply to op=connect: a channel for *out, or an error. Under sfnet_g.lock. */
static ncclResult_t connect_reply(struct sfnet_pconn *pc, const struct ctl_msg *m,
				  struct sfnet_comm **out)
{
	const char *me = sfnet_g.session->node, *nic = sfnet_g.devs[pc->dev].name;
	const char *text;
	int e = sfc_reply_errno(m, &text);
	if (e) {
		ncclResult_t res = ncclSystemError;
		const char *why = "";
		if (e == ECONNREFUSED) {
			res = ncclRemoteError;
			why = " (the daemon does not know that listener: the peer never listened, "
			      "or closed its listener)";
		} else if (e == ECONNRESET) {
			res = ncclRemoteError;
			why = " (the listening process is gone)";
		} else if (e == ECONNABORTED) {
			res = ncclRemoteError; /* a connect_refuse fault: as an unreachable IB peer */
			why = " (a fault of the emulated fabric refused it)";
		}
		PWARN("connect from %s/%s to %s/nic%u (listener 0x%016llx) failed: %s%s%s%s", me,
		      nic, pc->peer_node, pc->peer_nic, (unsigned long long)pc->listener,
		      e > 0 ? strerror(e) : "reply without errno", *text ? ": " : "", text, why);
		return res;
	}
	uint64_t chan_id = 0, shm_bytes = 0;
	if (get_hex(m, "chan", &chan_id) || ctl_get_u64(m, "shm_bytes", &shm_bytes)) {
		PWARN("connect from %s/%s to %s/nic%u: malformed reply from the daemon "
		      "(chan=%s shm_bytes=%s)",
		      me, nic, pc->peer_node, pc->peer_nic,
		      ctl_get(m, "chan") ? ctl_get(m, "chan") : "(none)",
		      ctl_get(m, "shm_bytes") ? ctl_get(m, "shm_bytes") : "(none)");
		return ncclInternalError;
	}
	char peer_nic[16];
	snprintf(peer_nic, sizeof(peer_nic), "nic%u", pc->peer_nic);
	return comm_open(SFNET_SEND, pc->obj.ctx, pc->dev, m->fd, chan_id, shm_bytes,
			 pc->peer_node, peer_nic, pc->traffic_class, out);
}

/* Poll a pending connect once. *out stays NULL while it is pending. Under sfnet_g.lock. */
static ncclResult_t pconn_poll(struct sfnet_pconn *pc, struct sfnet_comm **out)
{
	*out = NULL;
	const char *me = sfnet_g.session->node, *nic = sfnet_g.devs[pc->dev].name;
	for (;;) {
		struct ctl_msg *m;
		int rc = sfc_conn_recv(&pc->conn, &m, 0);
		if (rc == -EAGAIN) {
			if (sfnet_now_ms() < pc->deadline_ms)
				return ncclSuccess;
			PWARN("connect from %s/%s to %s/nic%u (listener 0x%016llx): the daemon did "
			      "not answer within %d ms (SIMFABRIC_CONNECT_TIMEOUT_MS)",
			      me, nic, pc->peer_node, pc->peer_nic,
			      (unsigned long long)pc->listener, sfnet_g.connect_timeout_ms);
			return ncclSystemError;
		}
		if (rc) {
			PWARN("connect from %s/%s to %s/nic%u: lost the daemon connection: %s", me,
			      nic, pc->peer_node, pc->peer_nic,
			      rc == -ECONNRESET ? "the fabric daemon went away" : strerror(-rc));
			return ncclSystemError;
		}
		if (sfc_is_event(m)) { /* none are defined on a connect's connection */
			ctl_msg_free(m);
			continue;
		}
		ncclResult_t res = connect_reply(pc, m, out);
		ctl_msg_free(m); /* closes the memfd: the mapping keeps the memory */
		return res;
	}
}

/*
 * A connect to a listener on another host (a version-2 handle): the handshake of
 * plugin/xhost.h instead of the daemon, polled like the daemon's reply. Under sfnet_g.lock.
 */
static ncclResult_t xconnect(struct sfnet_ctx *ctx, int dev, int tc, const struct sfnet_handle2 *h,
			     const void *handle_addr, void **send_comm)
{
	char what[SFNET_DESC_LEN];
	snprintf(what, sizeof(what), "connect from %.64s/%.24s to %.32s/nic%u on host %u",
		 sfnet_g.session->node, sfnet_g.devs[dev].name, h->node, h->nic, h->host);
	if (sfxh_host() < 0) {
		PWARN("%s: the listener is on another host, and this process has no host number "
		      "(SIMFABRIC_HOST): every rank of a multi-host run needs one",
		      what);
		return ncclInvalidUsage;
	}
	const char *no = xhost_refusal();
	if (no) {
		PWARN("%s: %s", what, no);
		return ncclInvalidUsage;
	}
	if (!h->addr_len) {
		PWARN("%s: the listener has no endpoint for cross-host connections (its own log says "
		      "why)",
		      what);
		return ncclSystemError;
	}
	ncclResult_t res;
	struct sfnet_pconn *pc = pconn_find(handle_addr);
	if (pc && (pc->listener != h->listener || (!pc->x && !pc->hold_until_ms))) {
		pconn_drop(pc); /* the buffer now holds another handle */
		pc = NULL;
	}
	if (!pc && sfnet_call_armed(FAULT_K_CONNECT_FAIL) &&
	    (res = sfnet_call_fault(FAULT_K_CONNECT_FAIL, what)) != ncclSuccess)
		return res;
	if (!pc) {
		pc = calloc(1, sizeof(*pc));
		if (!pc) {
			PWARN("%s: out of memory", what);
			return ncclSystemError;
		}
		pconn_init(pc, handle_addr, h->listener, dev, tc, h->nic, h->node);
		pc->peer_host = h->host;
		/* on a modelled fabric the route first, with the connect faults: a connect_refuse
		 * fails it here, a connect_delay holds the handshake (as the daemon holds a connect
		 * within a host) */
		if (sfnet_g.session->fab) {
			ncclResult_t r2 = ncclSystemError;
			pc->xr = malloc(sizeof(*pc->xr));
			if (!pc->xr)
				PWARN("%s: out of memory", what);
			else
				r2 = sfxr_route(sfnet_g.session->node, dev, h->node, (int)h->nic, 1,
						what, pc->xr);
			if (r2 != ncclSuccess) {
				free(pc->xr);
				free(pc);
				return r2;
			}
			if (pc->xr->hold_ns) {
				pc->hold_until_ms = sfnet_now_ms() + (pc->xr->hold_ns + 999999) / 1000000;
				pc->deadline_ms = pc->hold_until_ms + sfnet_g.connect_timeout_ms;
			}
		}
		sfnet_obj_link(&pc->obj, SFNET_PCONN, ctx);
	}
	if (pc->hold_until_ms && sfnet_now_ms() < pc->hold_until_ms)
		return ncclSuccess; /* held: NCCL calls again */
	if (!pc->x) {
		struct sfxh_addr a = {.host = h->host, .len = h->addr_len, .port = h->port};
		memcpy(a.addr, h->addr, sizeof(a.addr));
		if (sfxh_pconn_new(&a, sfnet_g.session->node, (uint32_t)dev, what, &pc->x)) {
			pconn_drop(pc);
			return ncclSystemError;
		}
	}
	struct sfxh_peer p;
	int k = sfxh_pconn_poll(pc->x, &p);
	if (k == 0 && sfnet_now_ms() < pc->deadline_ms)
		return ncclSuccess; /* not yet: NCCL calls again */
	if (k == 0)
		PWARN("%s: no answer from the listener within %d ms (SIMFABRIC_CONNECT_TIMEOUT_MS): "
		      "is host %u's rank running?",
		      what, sfnet_g.connect_timeout_ms, h->host);
	res = ncclRemoteError;
	struct sfnet_comm *sc = NULL;
	if (k == 1) {
		p.nic = h->nic;
		p.host = h->host;
		snprintf(p.node, sizeof(p.node), "%.63s", pc->peer_node);
		res = comm_xopen(SFNET_SEND, ctx, dev, &p, h->listener, pc->xr, tc, &sc);
	}
	pconn_drop(pc);
	if (sc) {
		PTRACE(NCCL_NET, "%s: connected", sc->desc);
		*send_comm = sc;
	}
	return res;
}

ncclResult_t sfnet_connect_tc(void *ctx, int dev, int traffic_class, void *handle, void **send_comm,
			      ncclNetDeviceHandle_t **send_dev_comm)
{
	(void)send_dev_comm; /* host plugin: no device handle; NULL or not, leave it alone */
	if (!handle || !send_comm)
		return ncclInternalError;
	*send_comm = NULL;
	struct sfnet_handle h;
	memcpy(&h, handle, sizeof(h)); /* NCCL's buffer has no alignment promise */
	ncclResult_t res = ncclSuccess;

	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_ctx *c = sfnet_ctx_find(ctx);
	if (!c) {
		PWARN("connect on device %d with an unknown ctx %p (init not called, or finalized)",
		      dev, ctx);
		res = ncclInternalError;
		goto out;
	}
	if (check_dev("connect", dev)) {
		res = ncclInternalError;
		goto out;
	}
	int v2 = h.magic == SFNET_HANDLE_MAGIC && h.version == SFNET_HANDLE_VERSION_XHOST;
	if (h.magic != SFNET_HANDLE_MAGIC || (h.version != SFNET_HANDLE_VERSION && !v2)) {
		PWARN("connect from %s: the handle is not a simfabric handle (magic 0x%016llx "
		      "version %u, want 0x%016llx version %u or %u): the ranks use different "
		      "plugins?",
		      sfnet_g.devs[dev].name, (unsigned long long)h.magic, h.version,
		      (unsigned long long)SFNET_HANDLE_MAGIC, SFNET_HANDLE_VERSION,
		      SFNET_HANDLE_VERSION_XHOST);
		res = ncclInvalidUsage;
		goto out;
	}
	if (v2) { /* the listener's host says which way; its shorter node name, for messages */
		struct sfnet_handle2 h2;
		memcpy(&h2, handle, sizeof(h2));
		h2.node[sizeof(h2.node) - 1] = 0;
		if ((int)h2.host != sfxh_host()) {
			res = xconnect(c, dev, traffic_class, &h2, handle, send_comm);
			goto out;
		}
		memset(h.node, 0, sizeof(h.node));
		memcpy(h.node, h2.node, sizeof(h2.node));
	}
	h.node[sizeof(h.node) - 1] = 0;
	if (h.instance != sfnet_g.session->instance) {
		PWARN("connect from %s/%s to %s/nic%u: the handle comes from another fabric daemon "
		      "(instance %llx, ours %s): all ranks must use the same simfabricd "
		      "(SIMFABRIC_SOCKET; this one is %s)",
		      sfnet_g.session->node, sfnet_g.devs[dev].name, h.node, h.nic,
		      (unsigned long long)h.instance, sfnet_g.session->instance_text, sfnet_g.sock);
		res = ncclInvalidUsage;
		goto out;
	}
	struct sfnet_pconn *pc = pconn_find(handle);
	if (pc && pc->listener != h.listener) {
		/* The buffer now holds another handle: the old connect was abandoned. */
		pconn_drop(pc);
		pc = NULL;
	}
	if (!pc && sfnet_call_armed(FAULT_K_CONNECT_FAIL)) {
		char what[SFNET_DESC_LEN];
		snprintf(what, sizeof(what), "connect %.64s/%.32s -> %.64s/nic%u", sfnet_g.session->node,
			 sfnet_g.devs[dev].name, h.node, h.nic);
		if ((res = sfnet_call_fault(FAULT_K_CONNECT_FAIL, what)) != ncclSuccess)
			goto out; /* before the daemon hears of it: as ibv_create_qp failing */
	}
	if (!pc) {
		res = pconn_start(c, dev, traffic_class, &h, handle, &pc);
		if (res != ncclSuccess)
			goto out;
	}
	struct sfnet_comm *sc;
	res = pconn_poll(pc, &sc);
	if (res != ncclSuccess || sc) {
		pconn_drop(pc); /* done either way: the daemon connection is no longer needed */
		if (sc) {
			PTRACE(NCCL_NET, "%s: connected", sc->desc);
			*send_comm = sc;
		}
	}
out:
	pthread_mutex_unlock(&sfnet_g.lock);
	return res;
}

ncclResult_t sfnet_connect(void *ctx, int dev, void *handle, void **send_comm,
			   ncclNetDeviceHandle_t **send_dev_comm)
{
	int tc = NCCL_NET_TRAFFIC_CLASS_UNDEF;
	pthread_mutex_lock(&sfnet_g.lock);
	struct sfnet_ctx *c = sfnet_ctx_find(ctx);
	if (c)
		tc = c->traffic_class;
	pthread_mutex_unlock(&sfnet_g.lock);
	return sfnet_connect_tc(ctx, dev, tc, handle, send_comm, send_dev_comm);
}
