/* SPDX-License-Identifier: MIT */
/*
 * xhost.c - the process's libfabric endpoint and the cross-host handshake (xhost.h).
 */
#include "plugin/xhost.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/client.h"
#include "plugin/plog.h"
#include "sim/core/xchan.h"

#define XH_MAGIC 0x32485853u /* "SXH2" (1: before payloads as writes) */
#define XH_MAGIC_OF(v) (0x00485853u | (uint32_t)(v) << 24)
#define XH_DRAIN_MS 2000

struct xh_hello {
	uint32_t magic;
	uint32_t nonce; /* the connector's: names its WELCOME */
	uint16_t host;
	uint16_t len;
	uint32_t nic;
	uint8_t addr[SFOFI_ADDR_MAX];
	char node[SFXH_NODE_LEN];
};

struct xh_welcome {
	uint32_t magic;
	int32_t status; /* 0, or the positive errno the listener refused with */
	uint32_t conn;
	uint32_t nonce;
};

_Static_assert(sizeof(struct xh_hello) == 136 && sizeof(struct xh_welcome) == 16,
	       "the handshake's layout changed: both ends must agree");

/*
 * The process's endpoints, one per direction: the receiving side's (listeners, their handshakes
 * and the recvComms' channels) and the sending side's (connects and the sendComms' channels).
 * A connection then runs between a sender's tx endpoint and a receiver's rx endpoint, so a
 * transport connection carries one direction's payload, and the small CTS and ACK going back
 * never queue behind the other direction's megabytes on one TCP stream; each endpoint has its
 * own lock and completion queue, so NCCL's proxy thread sending and the receive agent
 * receiving progress them side by side. Under sfnet_g.lock.
 */
static struct {
	int parsed, host; /* SIMFABRIC_HOST, -1 off */
	int rails;	  /* SIMFABRIC_XHOST_RAILS, 0 before it is read */
	int write_parsed;
	uint64_t write_min;	      /* SIMFABRIC_XHOST_WRITE */
	int tried[2][SFXH_RAILS_MAX]; /* the endpoint was opened, or failed to (said so once) */
	/* written once, under sfnet_g.lock; the receive agent's pump reads them without it */
	struct sfofi *_Atomic o[2][SFXH_RAILS_MAX];
	uint32_t next_port, next_conn, next_tx;
} X;

static struct sfofi *ep_of(enum sfxh_side side, uint32_t rail)
{
	return rail < SFXH_RAILS_MAX ? atomic_load_explicit(&X.o[side][rail], memory_order_acquire)
				     : NULL;
}

int sfxh_host(void)
{
	if (!X.parsed) {
		X.parsed = 1;
		X.host = -1;
		const char *e = getenv("SIMFABRIC_HOST");
		char *end = NULL;
		long v = e && *e ? strtol(e, &end, 10) : -1;
		if (e && *e && (*end || v < 0 || v > 65535))
			PWARN("SIMFABRIC_HOST='%s' is not a host number (0..65535): cross-host "
			      "connections are off",
			      e);
		else
			X.host = (int)v;
	}
	return X.host;
}

int sfxh_rails(void)
{
	if (!X.rails) {
		X.rails = 1;
		const char *e = getenv("SIMFABRIC_XHOST_RAILS");
		char *end = NULL;
		long v = e && *e ? strtol(e, &end, 10) : 1;
		if (e && *e && (*end || v < 1 || v > SFXH_RAILS_MAX))
			PWARN("SIMFABRIC_XHOST_RAILS='%.32s' is not a number of rails from 1 "
			      "to %d: one rail",
			      e, SFXH_RAILS_MAX);
		else
			X.rails = (int)v;
	}
	return X.rails;
}

uint64_t sfxh_write_min(void)
{
	if (!X.write_parsed) {
		uint64_t v = SFXH_WRITE_MIN;
		const char *e = getenv("SIMFABRIC_XHOST_WRITE");
		char *end = NULL;
		if (e && *e && strcmp(e, "on")) {
			unsigned long long n = 0; /* off */
			int ok = !strcmp(e, "off");
			if (!ok && *e >= '0' &&
			    *e <= '9') { /* strtoull takes '+', '-' and spaces */
				n = strtoull(e, &end, 10);
				ok = !*end && n <= SFXH_WRITE_MAX_MIN;
			}
			if (ok)
				v = n;
			else
				PWARN("SIMFABRIC_XHOST_WRITE='%.32s' is not on, off or a size in "
				      "bytes "
				      "up to %llu: on (writes from %d bytes)",
				      e, SFXH_WRITE_MAX_MIN, SFXH_WRITE_MIN);
		}
		X.write_min = v;
		X.write_parsed = 1;
	}
	return X.write_min;
}

const struct xnet *sfxh_net(enum sfxh_side side, uint32_t rail)
{
	struct sfofi *o = ep_of(side, rail);
	return o ? sfofi_net(o) : NULL;
}

/* A child forked without exec (a DataLoader worker, say) has the parent's endpoints but none
 * of its threads: their calls fail there instead of waiting on a lock a parent thread held. */
static void fork_child(void)
{
	for (int i = 0; i < 2; i++)
		for (uint32_t r = 0; r < SFXH_RAILS_MAX; r++)
			sfofi_forked(ep_of((enum sfxh_side)i, r));
}

static void at_fork_once(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

void sfxh_pumped(int on)
{
	for (uint32_t r = 0; r < SFXH_RAILS_MAX; r++)
		sfofi_pumped(ep_of(SFXH_RX, r), on);
}

int sfxh_pump(void)
{
	int took = 0, open = 0, failed = 0, err = 0;
	for (uint32_t r = 0; r < SFXH_RAILS_MAX; r++) {
		struct sfofi *o = ep_of(SFXH_RX, r);
		if (!o)
			continue;
		open++;
		int n = sfofi_pump(o);
		if (n < 0) { /* a failed rail sticks (its channels hear it): the others go on */
			failed++;
			err = n;
		} else {
			took += n;
		}
	}
	if (!open)
		return -ENODEV;
	return failed == open ? err : took;
}

static int endpoint(enum sfxh_side side, uint32_t rail, const char *what)
{
	if (ep_of(side, rail))
		return 0;
	const char *dir = side == SFXH_TX ? "sends" : "receives";
	/* with one rail (the default) the log reads as before rails existed */
	char on[32] = "", of[32] = "";
	if (sfxh_rails() > 1) {
		snprintf(on, sizeof(on), " on rail %u", rail);
		snprintf(of, sizeof(of), " (rail %u of %d)", rail, sfxh_rails());
	}
	if (X.tried[side][rail]) {
		PWARN("%s: no endpoint for cross-host %s%s (it failed to open: see the first WARN)",
		      what, dir, on);
		return -ENODEV;
	}
	X.tried[side][rail] = 1;
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, at_fork_once);
	char why[256] = "";
	struct sfofi *o = NULL;
	int rc = sfofi_open(NULL, sfxh_write_min() > 0, &o, why, sizeof(why));
	if (rc) {
		PWARN("%s: no endpoint for cross-host %s%s: %s; "
		      "this process %s same-host connections only",
		      what, dir, on, why, side == SFXH_TX ? "makes" : "takes");
		return rc;
	}
	atomic_store_explicit(&X.o[side][rail], o, memory_order_release);
	PINFO(NCCL_INIT | NCCL_NET, "cross-host %s from host %d over libfabric %s%s", dir, X.host,
	      sfofi_describe(o), of);
	return 0;
}

/* The rail to use for *rail: that one, or rail 0 when that one could not be opened (a rail that
 * failed stays failed; the connections it would have had go to the first). */
static int usable_rail(enum sfxh_side side, uint32_t *rail, const char *what)
{
	if (*rail && X.tried[side][*rail] && !ep_of(side, *rail))
		*rail = 0;
	int rc = endpoint(side, *rail, what);
	if (rc && *rail) {
		*rail = 0;
		rc = endpoint(side, 0, what);
	}
	return rc;
}

static int post(enum sfxh_side side, uint32_t rail, int send, uint64_t peer, uint64_t tag,
		void *buf, size_t len, struct xnet_op *op)
{
	const struct xnet *net = sfxh_net(side, rail);
	struct iovec iov = {buf, len};
	atomic_store_explicit(&op->state, XOP_POSTED, memory_order_relaxed);
	int rc = send ? net->send(net->ctx, peer, tag, &iov, 1, op)
		      : net->recv(net->ctx, peer, tag, &iov, 1, op);
	if (rc)
		atomic_store_explicit(&op->state, XOP_IDLE, memory_order_relaxed);
	return rc;
}

/* A connection id for a new channel into this process. */
static uint32_t conn_id(void)
{
	X.next_conn = X.next_conn % XCHAN_MAX_CONN + 1;
	return X.next_conn;
}

/* ---- the listener's side ------------------------------------------------------------------ */

#define XH_WELCOMES 4 /* answers in flight per listener (NCCL connects once per listener) */

struct sfxh_listen {
	uint32_t port;
	uint32_t rail; /* the rx endpoint it listens on */
	char what[96];
	struct xh_hello hello;
	struct xnet_op hello_op;
	struct xh_welcome wel[XH_WELCOMES];
	struct xnet_op wel_op[XH_WELCOMES];
};

static int listen_post(struct sfxh_listen *l)
{
	return post(SFXH_RX, l->rail, 0, XNET_ANY_PEER, xchan_tag(XCHAN_HELLO, l->port, 0),
		    &l->hello, sizeof(l->hello), &l->hello_op);
}

int sfxh_listen_new(const char *what, struct sfxh_listen **out, struct sfxh_addr *a)
{
	*out = NULL;
	memset(a, 0, sizeof(*a)); /* len 0: no endpoint, whatever fails below */
	a->host = (uint16_t)sfxh_host();
	/* listeners take the rails in turn: NCCL listens once per channel and peer */
	uint32_t port = X.next_port % XCHAN_MAX_CONN + 1;
	uint32_t rail = (port - 1) % (uint32_t)sfxh_rails();
	X.next_port = port;
	int rc = usable_rail(SFXH_RX, &rail, what);
	if (rc)
		return rc;
	struct sfxh_listen *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	snprintf(l->what, sizeof(l->what), "%s", what);
	l->port = port;
	l->rail = rail;
	size_t len = sizeof(a->addr);
	rc = sfofi_addr(ep_of(SFXH_RX, rail), a->addr, &len);
	if (!rc)
		rc = listen_post(l);
	if (rc) {
		PWARN("%s: cannot set up the cross-host handshake: %s", what, strerror(-rc));
		free(l);
		return rc;
	}
	a->len = (uint16_t)len;
	a->port = l->port;
	*out = l;
	return 0;
}

static int welcome_as(struct sfxh_listen *l, const struct sfxh_peer *p, int status, uint32_t magic)
{
	int i = 0;
	while (i < XH_WELCOMES && xop_busy(&l->wel_op[i]))
		i++;
	if (i == XH_WELCOMES) {
		PWARN("%s: %d cross-host answers still in flight", l->what, XH_WELCOMES);
		return -EAGAIN;
	}
	l->wel[i] = (struct xh_welcome){
		.magic = magic, .status = status, .conn = status ? 0 : p->conn, .nonce = p->nonce};
	int rc = post(SFXH_RX, l->rail, 1, p->peer, xchan_tag(XCHAN_WELCOME, p->nonce, 0),
		      &l->wel[i], sizeof(l->wel[i]), &l->wel_op[i]);
	if (rc)
		PWARN("%s: cannot answer the cross-host connect from %s: %s", l->what, p->node,
		      strerror(-rc));
	return rc;
}

/* A connect from another simfabric build (the handshake's version differs; its layout is the
 * same in both): say so, and answer in its version, refusing, so that it fails at once too. */
static void refuse_version(struct sfxh_listen *l, const struct xh_hello *h)
{
	struct sfxh_peer p = {.nonce = h->nonce};
	PWARN("%s: a cross-host connect from %.64s on host %u speaks handshake version %c, this "
	      "plugin %c: every host must run the same simfabric build; refused",
	      l->what, h->node, h->host, (char)(h->magic >> 24), (char)(XH_MAGIC >> 24));
	if (sfofi_peer(ep_of(SFXH_RX, l->rail), h->addr, h->len, &p.peer) == 0)
		welcome_as(l, &p, EPROTO, h->magic);
}

int sfxh_accept_poll(struct sfxh_listen *l, struct sfxh_peer *p)
{
	const struct xnet *net = sfxh_net(SFXH_RX, l->rail);
	int rc = net->progress(net->ctx);
	if (rc) {
		PWARN("%s: the cross-host endpoint failed: %s", l->what, strerror(-rc));
		return rc;
	}
	if (!xop_done(&l->hello_op))
		return 0;
	struct xh_hello h = l->hello;
	int status = l->hello_op.status;
	uint64_t len = l->hello_op.len;
	rc = listen_post(l); /* for the next connect; a listener that cannot wait for one fails */
	if (rc) {
		PWARN("%s: cannot wait for the next cross-host connect: %s", l->what,
		      strerror(-rc));
		return rc;
	}
	if (!status && len == sizeof(h) && h.magic != XH_MAGIC &&
	    XH_MAGIC_OF(h.magic >> 24) == h.magic && h.len && h.len <= SFOFI_ADDR_MAX) {
		refuse_version(l, &h);
		return 0;
	}
	if (status || len != sizeof(h) || h.magic != XH_MAGIC || !h.len || h.len > SFOFI_ADDR_MAX) {
		PWARN("%s: a malformed cross-host connect (%llu bytes, status %d, magic 0x%x): "
		      "ignored",
		      l->what, (unsigned long long)len, status, h.magic);
		return 0;
	}
	memset(p, 0, sizeof(*p));
	rc = sfofi_peer(ep_of(SFXH_RX, l->rail), h.addr, h.len, &p->peer);
	if (rc) { /* no way to answer it: its connect times out, naming this host */
		PWARN("%s: the connect from host %u cannot be answered: its address is refused "
		      "(%s); ignored",
		      l->what, h.host, strerror(-rc));
		return 0;
	}
	p->conn = conn_id();
	p->nonce = h.nonce;
	p->host = h.host;
	p->nic = h.nic;
	p->rail = l->rail;
	memcpy(p->node, h.node, sizeof(p->node));
	p->node[sizeof(p->node) - 1] = 0;
	return 1;
}

int sfxh_welcome(struct sfxh_listen *l, const struct sfxh_peer *p, int status)
{
	return welcome_as(l, p, status, XH_MAGIC);
}

void sfxh_listen_free(struct sfxh_listen *l)
{
	if (!l)
		return;
	const struct xnet *net = sfxh_net(SFXH_RX, l->rail);
	if (xop_busy(&l->hello_op))
		net->cancel(net->ctx, &l->hello_op);
	struct xnet_op *ops[1 + XH_WELCOMES] = {&l->hello_op};
	for (int i = 0; i < XH_WELCOMES; i++)
		ops[1 + i] = &l->wel_op[i];
	if (xnet_drain(net, ops, 1 + XH_WELCOMES, XH_DRAIN_MS))
		free(l);
}

/* ---- the connector's side ----------------------------------------------------------------- */

struct sfxh_pconn {
	uint64_t peer;
	uint32_t nonce, nic;
	char node[SFXH_NODE_LEN];
	struct xh_hello hello;
	struct xh_welcome wel;
	struct xnet_op hello_op, wel_op;
	uint32_t port; /* the listener's */
	uint32_t rail; /* the tx endpoint it connects from */
	int hello_out; /* the transport took the HELLO (rxm says -EAGAIN until it has a
			   connection to the peer: the poll tries again) */
	char what[96];
};

static int pconn_send_hello(struct sfxh_pconn *pc)
{
	if (pc->hello_out)
		return 0;
	int rc = post(SFXH_TX, pc->rail, 1, pc->peer, xchan_tag(XCHAN_HELLO, pc->port, 0),
		      &pc->hello, sizeof(pc->hello), &pc->hello_op);
	if (rc == -EAGAIN)
		return 0;
	if (rc)
		PWARN("%s: cannot send the cross-host connect: %s", pc->what, strerror(-rc));
	else
		pc->hello_out = 1;
	return rc;
}

int sfxh_pconn_new(const struct sfxh_addr *a, const char *node, uint32_t nic, const char *what,
		   struct sfxh_pconn **out)
{
	*out = NULL;
	/* connects take the tx rails in turn, as listeners take the rx ones */
	uint32_t rail = X.next_tx++ % (uint32_t)sfxh_rails();
	int rc = usable_rail(SFXH_TX, &rail, what);
	if (rc)
		return rc;
	struct sfxh_pconn *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	snprintf(pc->what, sizeof(pc->what), "%s", what);
	pc->rail = rail;
	pc->nonce = (uint32_t)(sfc_random_id() % XCHAN_MAX_CONN) + 1;
	rc = a->len && a->len <= SFOFI_ADDR_MAX
		? sfofi_peer(ep_of(SFXH_TX, rail), a->addr, a->len, &pc->peer)
		: -EINVAL;
	if (rc) {
		PWARN("%s: the listener's address in the handle is refused (%u bytes): %s", what,
		      a->len, strerror(-rc));
		free(pc);
		return rc;
	}
	pc->hello = (struct xh_hello){
		.magic = XH_MAGIC, .nonce = pc->nonce, .host = (uint16_t)X.host, .nic = nic};
	size_t len = sizeof(pc->hello.addr);
	rc = sfofi_addr(ep_of(SFXH_TX, rail), pc->hello.addr, &len);
	pc->hello.len = (uint16_t)len;
	snprintf(pc->hello.node, sizeof(pc->hello.node), "%s", node);
	pc->port = a->port;
	if (!rc)
		rc = post(SFXH_TX, rail, 0, pc->peer, xchan_tag(XCHAN_WELCOME, pc->nonce, 0),
			  &pc->wel, sizeof(pc->wel), &pc->wel_op);
	if (rc)
		PWARN("%s: cannot wait for the answer to a cross-host connect: %s", what,
		      strerror(-rc));
	if (!rc)
		rc = pconn_send_hello(pc);
	if (rc) {
		sfxh_pconn_free(pc);
		return rc;
	}
	*out = pc;
	return 0;
}

int sfxh_pconn_poll(struct sfxh_pconn *pc, struct sfxh_peer *p)
{
	const struct xnet *net = sfxh_net(SFXH_TX, pc->rail);
	net->progress(net->ctx);
	int rc = pconn_send_hello(pc);
	if (rc)
		return rc;
	if (xop_done(&pc->hello_op) && pc->hello_op.status) {
		PWARN("%s: the cross-host connect could not be sent: %s", pc->what,
		      strerror(-pc->hello_op.status));
		return pc->hello_op.status;
	}
	if (!xop_done(&pc->wel_op))
		return 0;
	struct xh_welcome w = pc->wel;
	if (!pc->wel_op.status && pc->wel_op.len == sizeof(w) && w.magic != XH_MAGIC &&
	    XH_MAGIC_OF(w.magic >> 24) == w.magic) {
		PWARN("%s: the listener speaks handshake version %c, this plugin %c: every host "
		      "must run the same simfabric build",
		      pc->what, (char)(w.magic >> 24), (char)(XH_MAGIC >> 24));
		return -EPROTO;
	}
	if (pc->wel_op.status || pc->wel_op.len != sizeof(w) || w.magic != XH_MAGIC ||
	    w.nonce != pc->nonce) {
		PWARN("%s: a malformed answer to the cross-host connect (status %d, %llu bytes)",
		      pc->what, pc->wel_op.status, (unsigned long long)pc->wel_op.len);
		return -EPROTO;
	}
	if (w.status) {
		PWARN("%s: the listener refused the cross-host connect: %s", pc->what,
		      strerror(w.status));
		return -w.status;
	}
	if (w.conn < 1 || w.conn > XCHAN_MAX_CONN) {
		PWARN("%s: the listener answered with connection id %u", pc->what, w.conn);
		return -EPROTO;
	}
	memset(p, 0, sizeof(*p));
	p->peer = pc->peer;
	p->conn = w.conn;
	p->rail = pc->rail;
	return 1;
}

void sfxh_pconn_free(struct sfxh_pconn *pc)
{
	if (!pc)
		return;
	const struct xnet *net = sfxh_net(SFXH_TX, pc->rail);
	if (net && xop_busy(&pc->wel_op))
		net->cancel(net->ctx, &pc->wel_op);
	struct xnet_op *ops[2] = {&pc->hello_op, &pc->wel_op};
	if (xnet_drain(net, ops, 2, XH_DRAIN_MS))
		free(pc);
}
