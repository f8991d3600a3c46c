/* SPDX-License-Identifier: MIT */
/*
 * ofi.c - the libfabric transport (ofi.h). Only five libfabric functions are real symbols
 * (fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric, fi_strerror): they come from dlsym. The
 * rest of libfabric's API is inline calls through the objects' operation tables, which need
 * no symbol, so the plugin still links with -z defs and nothing more.
 */
#include "plugin/ofi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<rdma/fabric.h>)
#define SF_HAVE_OFI 1
#endif
#endif

#ifndef SF_HAVE_OFI

int sfofi_open(const char *prov, int wants_writes, struct sfofi **out, char *why, size_t whylen)
{
	snprintf(why, whylen,
		 "this build has no libfabric headers (install libfabric-dev and "
		 "rebuild)");
	return -ENOSYS;
}
int sfofi_addr(struct sfofi *o, void *addr, size_t *len)
{
	return -ENOSYS;
}
int sfofi_peer(struct sfofi *o, const void *addr, size_t len, uint64_t *peer)
{
	return -ENOSYS;
}
const struct xnet *sfofi_net(struct sfofi *o)
{
	return NULL;
}
const char *sfofi_describe(const struct sfofi *o)
{
	return "none";
}
void sfofi_pumped(struct sfofi *o, int on)
{
}
int sfofi_pump(struct sfofi *o)
{
	return -ENOSYS;
}
void sfofi_forked(struct sfofi *o)
{
}
void sfofi_close(struct sfofi *o)
{
}

#else

#include <dlfcn.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sched.h>
#include <stdatomic.h>

#define SFOFI_API FI_VERSION(1, 9) /* FI_DIRECTED_RECV, fi_tsendv: long there */
#define SFOFI_CQ_BATCH 16
#define SFOFI_PEERS 1024 /* addresses remembered: libfabric warns on a second insert */

struct ofi_lib {
	void *dl;
	int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
		       struct fi_info **);
	void (*freeinfo)(struct fi_info *);
	struct fi_info *(*dupinfo)(const struct fi_info *);
	int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	const char *(*strerror)(int);
};

struct sfofi {
	struct ofi_lib lib;
	pthread_mutex_t lock;
	_Atomic int pumped; /* a pump drives this endpoint: other threads' progress only tries */
	_Atomic int want;   /* threads waiting for lock to post: the pump lets them in first */
	_Atomic int err;    /* the completion queue's failure, once seen: every caller's after */
	_Atomic int forked; /* this is a child forked with o open: nothing enters libfabric */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct xnet net;
	int writes;	   /* the provider writes (FI_RMA) and orders sends after them */
	uint64_t next_key; /* the next key asked for (mr_mode without FI_MR_PROV_KEY) */
	char desc[96];
	int npeers;
	struct {
		uint8_t len;
		uint8_t addr[SFOFI_ADDR_MAX];
		fi_addr_t fa;
	} peers[SFOFI_PEERS];
};

static int lib_load(struct ofi_lib *l, char *why, size_t whylen)
{
	l->dl = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!l->dl) {
		snprintf(why, whylen, "cannot load libfabric.so.1 (%s)", dlerror());
		return -ELIBACC;
	}
	*(void **)&l->getinfo = dlsym(l->dl, "fi_getinfo");
	*(void **)&l->freeinfo = dlsym(l->dl, "fi_freeinfo");
	*(void **)&l->dupinfo = dlsym(l->dl, "fi_dupinfo");
	*(void **)&l->fabric = dlsym(l->dl, "fi_fabric");
	*(void **)&l->strerror = dlsym(l->dl, "fi_strerror");
	if (!l->getinfo || !l->freeinfo || !l->dupinfo || !l->fabric || !l->strerror) {
		snprintf(why, whylen,
			 "libfabric.so.1 lacks fi_getinfo, fi_freeinfo, fi_dupinfo, "
			 "fi_fabric or fi_strerror");
		dlclose(l->dl);
		l->dl = NULL;
		return -ELIBACC;
	}
	return 0;
}

/* libfabric's errors are errno values (fi_errno.h), negated; its own codes (>= 256) are not. */
static int ofi_err(int rc)
{
	if (rc >= 0)
		return rc;
	return -rc < FI_ERRNO_OFFSET ? rc : -EIO;
}

/* The endpoint's sticky failure (its completion queue failed, or this is a forked child), or 0:
 * checked before any call that would enter libfabric, so that a child never enters the parent's
 * provider, whose locks a parent thread may have held at the fork. */
static inline int ofi_failed(const struct sfofi *o)
{
	return atomic_load_explicit(&o->err, memory_order_relaxed);
}

/* The lock for a post (or any call but progress): counted in want while waited for, so that a
 * pump (sfofi_pump), which retakes the lock at once and again, steps aside (mutexes are not
 * fair). */
static void lock_to_post(struct sfofi *o)
{
	atomic_fetch_add_explicit(&o->want, 1, memory_order_relaxed);
	pthread_mutex_lock(&o->lock);
	atomic_fetch_sub_explicit(&o->want, 1, memory_order_relaxed);
}

static int ofi_send(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		    struct xnet_op *op)
{
	struct sfofi *o = ctx;
	int err = ofi_failed(o);
	if (err)
		return err;
	lock_to_post(o);
	ssize_t rc = fi_tsendv(o->ep, iov, NULL, (size_t)niov, (fi_addr_t)peer, tag, op);
	pthread_mutex_unlock(&o->lock);
	return rc == -FI_EAGAIN ? -EAGAIN : ofi_err((int)rc);
}

static int ofi_recv(void *ctx, uint64_t peer, uint64_t tag, const struct iovec *iov, int niov,
		    struct xnet_op *op)
{
	struct sfofi *o = ctx;
	int err = ofi_failed(o);
	if (err)
		return err;
	lock_to_post(o);
	ssize_t rc = fi_trecvv(o->ep, iov, NULL, (size_t)niov, (fi_addr_t)peer, tag, 0, op);
	pthread_mutex_unlock(&o->lock);
	return rc == -FI_EAGAIN ? -EAGAIN : ofi_err((int)rc);
}

static int ofi_write(void *ctx, uint64_t peer, const void *buf, uint64_t len, uint64_t raddr,
		     uint64_t key, struct xnet_op *op)
{
	struct sfofi *o = ctx;
	int err = ofi_failed(o);
	if (err)
		return err;
	lock_to_post(o);
	ssize_t rc = fi_write(o->ep, buf, (size_t)len, NULL, (fi_addr_t)peer, raddr, key, op);
	pthread_mutex_unlock(&o->lock);
	return rc == -FI_EAGAIN ? -EAGAIN : ofi_err((int)rc);
}

/* Registrations for peers' writes. The domain's mr_mode is one we asked for (hints_new): keys
 * are ours to choose unless FI_MR_PROV_KEY, and addresses offsets unless FI_MR_VIRT_ADDR. */
static int ofi_mr_open(void *ctx, void *base, uint64_t len, uint64_t *key, uint64_t *raddr,
		       void **mr)
{
	struct sfofi *o = ctx;
	int err = ofi_failed(o);
	if (err)
		return err;
	if (!base || !len || !key || !raddr || !mr)
		return -EINVAL;
	struct fid_mr *m = NULL;
	int mode = o->info->domain_attr->mr_mode;
	lock_to_post(o);
	uint64_t asked = o->next_key++;
	int rc = fi_mr_reg(o->domain, base, (size_t)len, FI_REMOTE_WRITE, 0, asked, 0, &m, NULL);
	pthread_mutex_unlock(&o->lock);
	if (rc)
		return ofi_err(rc);
	*key = (mode & FI_MR_PROV_KEY) ? fi_mr_key(m) : asked;
	*raddr = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)base : 0;
	*mr = m;
	return 0;
}

static void ofi_mr_close(void *ctx, void *mr)
{
	struct sfofi *o = ctx;
	/* a forked child leaves the parent's provider alone; a failed endpoint still closes its
	 * registrations, so that a freed buffer takes no write */
	if (!mr || atomic_load_explicit(&o->forked, memory_order_relaxed))
		return;
	lock_to_post(o);
	fi_close(&((struct fid_mr *)mr)->fid);
	pthread_mutex_unlock(&o->lock);
}

static int ofi_cancel(void *ctx, struct xnet_op *op)
{
	struct sfofi *o = ctx;
	int err = ofi_failed(o);
	if (err)
		return err;
	lock_to_post(o);
	ssize_t rc = fi_cancel(&o->ep->fid, op);
	pthread_mutex_unlock(&o->lock);
	return ofi_err((int)rc);
}

/* An error completion: the op fails with the errno it names (a peer gone: -ECONNRESET). */
/* 0, or -EIO when the error entry cannot be read (the CQ is broken: no spinning on it). */
static int ofi_take_error(struct sfofi *o)
{
	struct fi_cq_err_entry e;
	memset(&e, 0, sizeof(e));
	if (fi_cq_readerr(o->cq, &e, 0) != 1)
		return -EIO;
	if (!e.op_context)
		return 0;
	int status;
	switch (e.err) {
	case FI_ECANCELED:
		status = -ECANCELED;
		break;
	case FI_ETRUNC:
		status = -EMSGSIZE;
		break;
	case FI_ENOMEM:
		status = -ENOMEM;
		break;
	default: /* the connection under the peer's address broke */
		status = -ECONNRESET;
		break;
	}
	xop_finish(e.op_context, status, (e.flags & FI_RECV) ? e.len + e.olen : 0);
	return 0;
}

/* Under o->lock. The completions found (>= 0), or the queue's error, kept in o->err. */
static int progress_locked(struct sfofi *o)
{
	struct fi_cq_tagged_entry ent[SFOFI_CQ_BATCH];
	int rc = ofi_failed(o), found = 0;
	if (rc)
		return rc;
	for (;;) {
		ssize_t n = fi_cq_read(o->cq, ent, SFOFI_CQ_BATCH);
		if (n == -FI_EAVAIL) {
			if ((rc = ofi_take_error(o)))
				break;
			continue;
		}
		if (n == -FI_EAGAIN || n == 0)
			break;
		if (n < 0) { /* the completion queue itself failed: every channel over it does */
			rc = ofi_err((int)n);
			break;
		}
		for (ssize_t i = 0; i < n; i++)
			if (ent[i].op_context)
				xop_finish(ent[i].op_context, 0,
					   (ent[i].flags & FI_RECV) ? ent[i].len : 0);
		found += (int)n;
		/* a full batch: more may wait, unless a post is waiting for the lock */
		if (n < SFOFI_CQ_BATCH || atomic_load_explicit(&o->want, memory_order_relaxed))
			break;
	}
	if (rc)
		atomic_store_explicit(&o->err, rc, memory_order_relaxed);
	return rc ? rc : found;
}

/*
 * A channel's progress. While a pump drives the endpoint, a thread that finds it inside
 * libfabric goes on at once: the pump is doing this very work (the bytes arriving are copied
 * in its thread, not in NCCL's proxy thread), and an op it completes is seen through its
 * state (xnet.h).
 */
static int ofi_progress(void *ctx)
{
	struct sfofi *o = ctx;
	if (atomic_load_explicit(&o->pumped, memory_order_relaxed)) {
		if (pthread_mutex_trylock(&o->lock) != 0) /* the pump is in: its error, if any */
			return ofi_failed(o);
	} else {
		pthread_mutex_lock(&o->lock);
	}
	int rc = progress_locked(o);
	pthread_mutex_unlock(&o->lock);
	return rc < 0 ? rc : 0;
}

void sfofi_pumped(struct sfofi *o, int on)
{
	if (o)
		atomic_store_explicit(&o->pumped, !!on, memory_order_relaxed);
}

int sfofi_pump(struct sfofi *o)
{
	if (!o)
		return -EINVAL;
	int err = ofi_failed(o);
	if (err)
		return err;
	if (atomic_load_explicit(&o->want, memory_order_relaxed))
		sched_yield(); /* a post waits for the lock: it goes first */
	pthread_mutex_lock(&o->lock);
	int rc = progress_locked(o);
	pthread_mutex_unlock(&o->lock);
	return rc;
}

void sfofi_forked(struct sfofi *o)
{
	if (!o)
		return;
	/* the parent's threads are gone, one perhaps holding the lock: a fresh one, and every
	 * call fails (the parent's connections are not the child's) */
	pthread_mutex_init(&o->lock, NULL);
	atomic_store_explicit(&o->pumped, 0, memory_order_relaxed);
	atomic_store_explicit(&o->want, 0, memory_order_relaxed);
	atomic_store_explicit(&o->err, -ECONNRESET, memory_order_relaxed);
	atomic_store_explicit(&o->forked, 1, memory_order_relaxed);
}

/* writes: also one-sided writes into registered memory, with a send after a write delivered
 * after it (FI_ORDER_SAW: xnet.h's contract). Keys and offsets as mr_mode 0 has them. */
static struct fi_info *hints_new(const struct ofi_lib *l, const char *prov, int writes)
{
	struct fi_info *h = l->dupinfo(NULL);
	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_DIRECTED_RECV | (writes ? FI_RMA | FI_WRITE | FI_REMOTE_WRITE : 0);
	h->mode = 0; /* an op's context is ours: no FI_CONTEXT space in it */
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = 0;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->tx_attr->msg_order = FI_ORDER_SAS | (writes ? FI_ORDER_SAW : 0);
	h->rx_attr->msg_order = FI_ORDER_SAS | (writes ? FI_ORDER_SAW : 0);
	h->fabric_attr->prov_name = strdup(prov); /* fi_freeinfo frees it */
	return h;
}

#define TRY(call, what)                                                                            \
	do {                                                                                       \
		int rc_ = (int)(call);                                                             \
		if (rc_) {                                                                         \
			snprintf(why, whylen, "%s on %s: %s", what, prov, o->lib.strerror(-rc_));  \
			sfofi_close(o);                                                            \
			return ofi_err(rc_);                                                       \
		}                                                                                  \
	} while (0)

int sfofi_open(const char *prov, int wants_writes, struct sfofi **out, char *why, size_t whylen)
{
	if (!out)
		return -EINVAL;
	wants_writes = !!wants_writes;
	if (!prov || !*prov)
		prov = getenv("SIMFABRIC_OFI_PROVIDER");
	if (!prov || !*prov)
		prov = SFOFI_DEFAULT_PROVIDER;
	struct sfofi *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	pthread_mutex_init(&o->lock, NULL);
	int rc = lib_load(&o->lib, why, whylen);
	if (rc) {
		free(o);
		return rc;
	}
	/* with writes if the provider has them and places a connection's data in order (xnet.h:
	 * tcp's one stream per connection; FI_ORDER_SAW alone orders headers, not data), and
	 * SIMFABRIC_XHOST_WRITE does not say off; else tagged messages alone */
	if (strncmp(prov, "tcp", 3) || (prov[3] && prov[3] != ';'))
		wants_writes = 0;
	for (int writes = wants_writes; writes >= 0; writes--) {
		struct fi_info *h = hints_new(&o->lib, prov, writes);
		if (!h) {
			snprintf(why, whylen, "out of memory for libfabric's hints");
			sfofi_close(o);
			return -ENOMEM;
		}
		rc = o->lib.getinfo(SFOFI_API, NULL, NULL, 0, h, &o->info);
		o->lib.freeinfo(h);
		o->writes = writes;
		if (!rc && o->info)
			break;
		o->info = NULL;
	}
	if (rc || !o->info) {
		snprintf(why, whylen,
			 "no libfabric provider '%s' with reliable tagged messages here "
			 "(fi_getinfo: "
			 "%s; SIMFABRIC_OFI_PROVIDER chooses another)",
			 prov, rc ? o->lib.strerror(-rc) : "nothing");
		o->info = NULL;
		sfofi_close(o);
		return -ENODEV;
	}
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	TRY(o->lib.fabric(o->info->fabric_attr, &o->fabric, NULL), "fi_fabric");
	TRY(fi_domain(o->fabric, o->info, &o->domain, NULL), "fi_domain");
	TRY(fi_cq_open(o->domain, &cqa, &o->cq, NULL), "fi_cq_open");
	TRY(fi_av_open(o->domain, &ava, &o->av, NULL), "fi_av_open");
	TRY(fi_endpoint(o->domain, o->info, &o->ep, NULL), "fi_endpoint");
	TRY(fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind (cq)");
	TRY(fi_ep_bind(o->ep, &o->av->fid, 0), "fi_ep_bind (av)");
	TRY(fi_enable(o->ep), "fi_enable");
	o->net = (struct xnet){.ctx = o,
			       .send = ofi_send,
			       .recv = ofi_recv,
			       .cancel = ofi_cancel,
			       .progress = ofi_progress};
	if (o->writes) {
		o->net.mr_open = ofi_mr_open;
		o->net.mr_close = ofi_mr_close;
		o->net.write = ofi_write;
		o->next_key = 1;
	}
	snprintf(o->desc, sizeof(o->desc), "%s on %s%s", o->info->fabric_attr->prov_name,
		 o->info->domain_attr->name ? o->info->domain_attr->name : "?",
		 o->writes ? ", writes" : "");
	*out = o;
	return 0;
}

int sfofi_addr(struct sfofi *o, void *addr, size_t *len)
{
	if (!o || !addr || !len)
		return -EINVAL;
	int err = ofi_failed(o);
	if (err)
		return err;
	lock_to_post(o);
	int rc = fi_getname(&o->ep->fid, addr, len);
	pthread_mutex_unlock(&o->lock);
	return rc == -FI_ETOOSMALL ? -ENOBUFS : ofi_err(rc);
}

int sfofi_peer(struct sfofi *o, const void *addr, size_t len, uint64_t *peer)
{
	if (!o || !addr || !len || len > SFOFI_ADDR_MAX || !peer)
		return -EINVAL;
	int err = ofi_failed(o);
	if (err)
		return err;
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	lock_to_post(o);
	for (int i = 0; i < o->npeers; i++)
		if (o->peers[i].len == len && !memcmp(o->peers[i].addr, addr, len)) {
			*peer = (uint64_t)o->peers[i].fa;
			pthread_mutex_unlock(&o->lock);
			return 0;
		}
	int n = fi_av_insert(o->av, addr, 1, &a, 0, NULL);
	if (n == 1 && a != FI_ADDR_NOTAVAIL && o->npeers < SFOFI_PEERS) {
		o->peers[o->npeers].len = (uint8_t)len;
		memcpy(o->peers[o->npeers].addr, addr, len);
		o->peers[o->npeers++].fa = a;
	}
	pthread_mutex_unlock(&o->lock);
	if (n != 1 || a == FI_ADDR_NOTAVAIL)
		return n < 0 ? ofi_err(n) : -EADDRNOTAVAIL;
	*peer = (uint64_t)a;
	return 0;
}

const struct xnet *sfofi_net(struct sfofi *o)
{
	return o ? &o->net : NULL;
}

const char *sfofi_describe(const struct sfofi *o)
{
	return o ? o->desc : "none";
}

void sfofi_close(struct sfofi *o)
{
	if (!o)
		return;
	if (o->ep)
		fi_close(&o->ep->fid);
	if (o->av)
		fi_close(&o->av->fid);
	if (o->cq)
		fi_close(&o->cq->fid);
	if (o->domain)
		fi_close(&o->domain->fid);
	if (o->fabric)
		fi_close(&o->fabric->fid);
	if (o->info)
		o->lib.freeinfo(o->info);
	/* libfabric stays loaded: its providers keep threads and atexit handlers */
	pthread_mutex_destroy(&o->lock);
	free(o);
}

#endif /* SF_HAVE_OFI */
