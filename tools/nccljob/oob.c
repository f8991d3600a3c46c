/* SPDX-License-Identifier: MIT */
/*
 * oob.c - the out-of-band channel: a TCP star with rank 0 in the
 * middle, on MASTER_ADDR:MASTER_PORT. It carries the bootstrap (HELLO, then
 * the ncclUniqueId), the step barriers and results, and the failures; it does
 * not depend on NCCL, so it still works when NCCL has failed.
 *
 * Framing: struct nj_hdr, then len bytes. Sockets are non-blocking; what
 * arrives is parsed into a queue per connection, except the two messages that
 * come unasked: ERROR (a peer tells rank 0 it failed), ABORT (rank 0 tells
 * a peer to stop) and SHRINK (rank 0 tells a peer to carry on without the
 * lost ranks). Those, and a connection that closes before its FINAL
 * report, become the channel's failure (have_fail), which every wait and
 * oob_check() return at once; after a shrink, oob_forgive() clears it. Every
 * wait has a deadline.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/common/sendall.h"
#include "tools/nccljob/nccljob.h"

#define NJ_MAGIC 0x424a434eu /* "NCJB" */
#define NJ_MAX_MSG 4096
#define NJ_SEND_BOUND_MS 5000

struct nj_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t pad;
	int32_t from;
	uint32_t len;
};

struct nj_msgq {
	struct nj_msgq *next;
	uint32_t type, len;
	char data[];
};

struct nj_conn {
	int fd;
	int rank;               /* -1 until its HELLO */
	char *in;
	size_t in_len, in_cap;
	struct nj_msgq *head, **tail;
	int eof;                /* closed by the other end, broken, or a bad message */
	int finished;           /* it sent FINAL (or DONE): a close is expected now */
	int failed;             /* it sent ERROR, or was lost: fail */
	int gone;               /* lost, and a shrink has left it behind */
	struct nj_fail fail;
	char why[160];          /* why eof */
};

static const char *const msg_names[NJM_NTYPE] = {
	[NJM_HELLO] = "HELLO",   [NJM_WELCOME] = "WELCOME", [NJM_INFO] = "INFO",
	[NJM_GO] = "GO",         [NJM_RESULT] = "RESULT",   [NJM_NEXT] = "NEXT",
	[NJM_ERROR] = "ERROR",   [NJM_ABORT] = "ABORT",     [NJM_FINAL] = "FINAL",
	[NJM_DONE] = "DONE",     [NJM_SHRINK] = "SHRINK",
};

static const char *msg_name(int type)
{
	return type > 0 && type < NJM_NTYPE ? msg_names[type] : "?";
}

static void conn_init(struct nj_conn *c, int fd, int rank)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->rank = rank;
	c->tail = &c->head;
}

/* Structs move by value; an empty queue's tail points into the struct itself. */
static void conn_move(struct nj_conn *dst, struct nj_conn *src)
{
	*dst = *src;
	if (!dst->head)
		dst->tail = &dst->head;
}

static void conn_free(struct nj_conn *c)
{
	struct nj_msgq *m, *next;

	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	for (m = c->head; m; m = next) {
		next = m->next;
		free(m);
	}
	c->head = NULL;
	c->tail = &c->head;
	free(c->in);
	c->in = NULL;
	c->in_len = c->in_cap = 0;
}

static int set_socket_opts(int fd)
{
	int one = 1;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* The other end is gone: a failure unless it had already said goodbye. */
static void conn_lost(struct nj_oob *o, struct nj_conn *c, const char *why)
{
	if (c->eof)
		return;
	c->eof = 1;
	snprintf(c->why, sizeof(c->why), "%s", why);
	if (c->finished || c->failed || c->rank < 0)
		return;
	c->failed = 1;
	if (o->rank == 0)
		nj_fail_set(&c->fail, NJ_PEER_LOST, c->rank, o->t0, "peer_lost",
			    "rank %d's out-of-band connection to rank 0 closed before it reported "
			    "(%s): did it crash or get killed? See its stderr",
			    c->rank, why);
	else
		nj_fail_set(&c->fail, NJ_PEER_LOST, 0, o->t0, "peer_lost",
			    "the out-of-band connection to rank 0 closed (%s): did rank 0 crash or "
			    "get killed? See its stderr",
			    why);
	c->fail.after_ms = (nj_now() - o->t0) * 1e3; /* when we saw it, on our clock */
	if (!o->have_fail) {
		o->have_fail = 1;
		o->fail = c->fail;
	}
}

static void conn_ingest(struct nj_oob *o, struct nj_conn *c, const struct nj_hdr *h,
			const char *data)
{
	struct nj_msgq *m;

	if ((o->rank == 0 && h->type == NJM_ERROR) || (o->rank != 0 && h->type == NJM_ABORT)) {
		struct nj_fail f;

		if (h->len != sizeof(f))
			return;
		memcpy(&f, data, sizeof(f));
		f.code[sizeof(f.code) - 1] = f.phase[sizeof(f.phase) - 1] = '\0';
		f.msg[sizeof(f.msg) - 1] = '\0';
		if (o->rank == 0 && f.gen < o->gen)
			return; /* about the loss a shrink since has handled */
		if (!c->failed) {
			c->failed = 1;
			c->fail = f;
		}
		if (!o->have_fail) {
			o->have_fail = 1;
			o->fail = f;
		}
		return;
	}
	if (o->rank != 0 && h->type == NJM_SHRINK) {
		if (h->len != sizeof(o->shrink) || o->have_shrink)
			return;
		memcpy(&o->shrink, data, sizeof(o->shrink));
		o->have_shrink = 1;
		if (!o->have_fail) { /* every wait returns: the peer is to shrink at once */
			o->have_fail = 1;
			o->fail = o->shrink.why;
		}
		return;
	}
	if (h->type == NJM_FINAL || h->type == NJM_DONE)
		c->finished = 1;
	m = malloc(sizeof(*m) + h->len);
	if (!m) {
		conn_lost(o, c, "out of memory");
		return;
	}
	m->next = NULL;
	m->type = h->type;
	m->len = h->len;
	memcpy(m->data, data, h->len);
	*c->tail = m;
	c->tail = &m->next;
}

/* Reads what is there without blocking and parses every whole message. */
static void conn_drain(struct nj_oob *o, struct nj_conn *c)
{
	struct nj_hdr h;
	size_t off = 0;
	const char *lost = NULL;

	while (c->fd >= 0 && !c->eof && !lost) {
		ssize_t n;

		if (c->in_cap - c->in_len < 4096) {
			size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
			char *nb = realloc(c->in, cap);

			if (!nb) {
				conn_lost(o, c, "out of memory");
				return;
			}
			c->in = nb;
			c->in_cap = cap;
		}
		n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
		if (n > 0) {
			c->in_len += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		/* what came before the end is taken in first: a rank that reports and exits at
		 * once (the watchdog) sends its ERROR and its EOF in one go */
		lost = n == 0 ? "end of file" : strerror(errno);
	}
	while (c->in_len - off >= sizeof(h)) {
		memcpy(&h, c->in + off, sizeof(h));
		if (h.magic != NJ_MAGIC || h.len > NJ_MAX_MSG || !h.type || h.type >= NJM_NTYPE) {
			conn_lost(o, c, "a message that is not simfabric-nccljob's: is another program "
					"using MASTER_PORT?");
			c->in_len = 0;
			return;
		}
		if (c->in_len - off < sizeof(h) + h.len)
			break;
		conn_ingest(o, c, &h, c->in + off + sizeof(h));
		off += sizeof(h) + h.len;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	if (lost)
		conn_lost(o, c, lost);
}

static int conn_send(struct nj_oob *o, struct nj_conn *c, int type, const void *p, uint32_t len)
{
	struct nj_hdr h = {.magic = NJ_MAGIC, .type = (uint16_t)type, .from = o->rank, .len = len};
	char buf[sizeof(h) + NJ_MAX_MSG];

	if (c->fd < 0 || c->eof || len > NJ_MAX_MSG)
		return -1;
	memcpy(buf, &h, sizeof(h));
	if (len)
		memcpy(buf + sizeof(h), p, len);
	if (sendall(c->fd, buf, sizeof(h) + len, NJ_SEND_BOUND_MS, 50) < 0) {
		conn_lost(o, c, strerror(errno));
		return -1;
	}
	return 0;
}

static struct nj_conn *conn_of(struct nj_oob *o, int rank)
{
	if (!o->conn)
		return NULL;
	if (o->rank != 0)
		return rank == 0 ? &o->conn[0] : NULL;
	return rank > 0 && rank < o->nranks ? &o->conn[rank] : NULL;
}

int oob_send(struct nj_oob *o, int to, int type, const void *p, uint32_t len)
{
	struct nj_conn *c = conn_of(o, to);
	struct nj_fail f;

	if (c && type == NJM_ERROR && len == sizeof(f)) { /* stamped: see nj_fail.gen */
		memcpy(&f, p, sizeof(f));
		f.gen = o->gen;
		p = &f;
	}
	return c ? conn_send(o, c, type, p, len) : -1;
}

/* oob_send, and if it fails, why (the lost connection's failure) in f */
int oob_send_f(struct nj_oob *o, int to, int type, const void *p, uint32_t len,
	       struct nj_fail *f)
{
	struct nj_conn *c = conn_of(o, to);

	if (oob_send(o, to, type, p, len) == 0)
		return 0;
	if (c && c->failed)
		*f = c->fail;
	else
		nj_fail_set(f, NJ_PEER_LOST, to, o->t0, "peer_lost",
			    "cannot send %s to rank %d: its connection is gone (%s)", msg_name(type),
			    to, c && c->why[0] ? c->why : "never connected");
	return -1;
}

void oob_bcast(struct nj_oob *o, int type, const void *p, uint32_t len)
{
	int r;

	for (r = 1; r < o->nranks; r++)
		oob_send(o, r, type, p, len);
}

int oob_alive(const struct nj_oob *o, int rank)
{
	struct nj_conn *c = conn_of((struct nj_oob *)o, rank);

	return c && c->fd >= 0 && !c->eof;
}

const struct nj_fail *oob_rank_fail(const struct nj_oob *o, int rank)
{
	struct nj_conn *c = conn_of((struct nj_oob *)o, rank);

	return c && c->failed ? &c->fail : NULL;
}

int oob_lost(struct nj_oob *o, int32_t *lost, int max)
{
	int n = 0;

	for (int r = 1; o->rank == 0 && o->conn && r < o->nranks && n < max; r++) {
		struct nj_conn *c = &o->conn[r];

		if (c->eof && !c->finished && !c->gone)
			lost[n++] = r;
	}
	return n;
}

void oob_forgive(struct nj_oob *o)
{
	int first = o->rank == 0 ? 1 : 0, last = o->rank == 0 ? o->nranks : 1;

	for (int r = first; o->conn && r < last; r++) {
		struct nj_conn *c = &o->conn[r];

		if (c->eof)
			c->gone = 1; /* still failed: its final report says it was lost */
		else
			c->failed = 0;
	}
	o->have_fail = o->have_shrink = 0;
	memset(&o->fail, 0, sizeof(o->fail));
	o->gen++;
}

/* Waits up to ms for input on any live connection, and takes it in. */
static void oob_pump(struct nj_oob *o, int ms)
{
	struct pollfd pfd[1024];
	struct nj_conn *who[1024];
	int n = 0, i, first = o->rank == 0 ? 1 : 0, last = o->rank == 0 ? o->nranks : 1;

	for (i = first; i < last && n < 1024; i++) {
		if (o->conn[i].fd < 0 || o->conn[i].eof)
			continue;
		pfd[n].fd = o->conn[i].fd;
		pfd[n].events = POLLIN;
		pfd[n].revents = 0;
		who[n++] = &o->conn[i];
	}
	if (!n) {
		if (ms > 0)
			nanosleep(&(struct timespec){.tv_nsec = (long)ms * 1000000}, NULL);
		return;
	}
	if (poll(pfd, (nfds_t)n, ms) <= 0)
		return;
	for (i = 0; i < n; i++)
		if (pfd[i].revents)
			conn_drain(o, who[i]);
}

int oob_check(struct nj_oob *o, struct nj_fail *f)
{
	if (!o->conn)
		return 0;
	oob_pump(o, 0);
	if (!o->have_fail)
		return 0;
	*f = o->fail;
	return 1;
}

static int take(struct nj_conn *c, int type, void *p, uint32_t len)
{
	struct nj_msgq **pp, *m;

	for (pp = &c->head; (m = *pp); pp = &m->next) {
		if (m->type != (uint32_t)type)
			continue;
		*pp = m->next;
		if (c->tail == &m->next)
			c->tail = pp;
		memset(p, 0, len);
		memcpy(p, m->data, m->len < len ? m->len : len);
		free(m);
		return 1;
	}
	return 0;
}

int oob_wait(struct nj_oob *o, int from, int type, void *p, uint32_t len, double deadline,
	     int flags, struct nj_fail *f)
{
	struct nj_conn *c = conn_of(o, from);

	if (!c) {
		nj_fail_set(f, NJ_SETUP, from, o->t0, "internal", "no connection to rank %d", from);
		return -1;
	}
	for (;;) {
		double left;

		if (take(c, type, p, len))
			return 0;
		if (!(flags & NJ_WAIT_IGNORE_FAIL) && o->have_fail) {
			*f = o->fail;
			return -1;
		}
		if (c->eof) {
			if (c->failed)
				*f = c->fail;
			else
				nj_fail_set(f, NJ_PEER_LOST, from, o->t0, "peer_lost",
					    "rank %d's connection closed before it sent %s (%s)", from,
					    msg_name(type), c->why);
			return -1;
		}
		if (nj_signal && !(flags & NJ_WAIT_IGNORE_FAIL)) {
			nj_fail_set(f, NJ_SIGNAL, o->rank, o->t0,
				    nj_signal == SIGINT ? "SIGINT" : "SIGTERM",
				    "interrupted by signal %d", (int)nj_signal);
			f->exit_code = 128 + nj_signal;
			return -1;
		}
		left = deadline - nj_now();
		if (left <= 0) {
			nj_fail_set(f, NJ_TIMEOUT, o->rank, o->t0, "timeout",
				    "rank %d sent no %s in time", from, msg_name(type));
			return -1;
		}
		oob_pump(o, left > 0.1 ? 100 : (int)(left * 1e3) + 1);
	}
}

/* ---- bootstrap ---------------------------------------------------------- */

static int resolve(const char *addr, const char *port, int passive, struct addrinfo **res,
		   struct nj_fail *f, double t0, int rank)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
	int rc;

	hints.ai_flags = passive ? AI_PASSIVE : 0;
	rc = getaddrinfo(addr, port, &hints, res);
	if (rc) {
		nj_fail_set(f, NJ_SETUP, rank, t0, "bootstrap",
			    "cannot resolve MASTER_ADDR=%s MASTER_PORT=%s: %s", addr, port,
			    gai_strerror(rc));
		return -1;
	}
	return 0;
}

static int listen_on(struct nj_oob *o, const char *addr, const char *port, struct nj_fail *f)
{
	struct addrinfo *res, *ai;
	int fd = -1, err = 0, one = 1, pass;

	if (resolve(addr, port, 1, &res, f, o->t0, 0) < 0)
		return -1;
	/* MASTER_ADDR's own address first; if it is not this machine's, any address */
	for (pass = 0; pass < 2 && fd < 0; pass++) {
		for (ai = res; ai && fd < 0; ai = ai->ai_next) {
			struct sockaddr_storage ss;
			struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

			memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
			if (pass == 1 && ss.ss_family == AF_INET)
				in4->sin_addr.s_addr = htonl(INADDR_ANY);
			else if (pass == 1 && ss.ss_family == AF_INET6)
				in6->sin6_addr = in6addr_any;
			fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
			if (fd < 0) {
				err = errno;
				continue;
			}
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) < 0 ||
			    listen(fd, 128) < 0 || set_socket_opts(fd) < 0) {
				err = errno;
				close(fd);
				fd = -1;
			}
		}
		if (err == EADDRINUSE)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		nj_fail_set(f, NJ_SETUP, 0, o->t0, "bootstrap",
			    "rank 0 cannot listen on MASTER_ADDR=%s MASTER_PORT=%s: %s%s", addr, port,
			    strerror(err),
			    err == EADDRINUSE ? " (another job, or a previous run's socket in "
						"TIME_WAIT? pick another MASTER_PORT)" : "");
		return -1;
	}
	o->lfd = fd;
	return 0;
}

/*
 * Rank 0: accept every rank's HELLO (rank in range, same world size, no
 * duplicate) until all are in or the deadline. hellos[r] is rank r's; what
 * the hellos say (the options' hash) is for the caller to judge.
 */
int oob_serve(struct nj_oob *o, const char *addr, const char *port, double deadline,
	      struct nj_hello *hellos, struct nj_fail *f)
{
	struct nj_conn pend[64];
	int npend = 0, joined = 1, i;

	o->conn = calloc((size_t)o->nranks, sizeof(*o->conn));
	if (!o->conn) {
		nj_fail_set(f, NJ_SETUP, 0, o->t0, "bootstrap", "out of memory");
		return -1;
	}
	for (i = 0; i < o->nranks; i++)
		conn_init(&o->conn[i], -1, i);
	if (o->nranks == 1)
		return 0;
	if (listen_on(o, addr, port, f) < 0)
		return -1;
	while (joined < o->nranks) {
		struct pollfd pfd[65];
		double left = deadline - nj_now();
		int n = 0;

		if (left <= 0) {
			char missing[256] = "";
			size_t len = 0;

			for (i = 1; i < o->nranks && len + 16 < sizeof(missing); i++)
				if (o->conn[i].fd < 0)
					len += (size_t)snprintf(missing + len, sizeof(missing) - len,
								"%s%d", len ? "," : "", i);
			nj_fail_set(f, NJ_TIMEOUT, 0, o->t0, "bootstrap_timeout",
				    "rank(s) %s did not connect to rank 0 on %s:%s within --timeout-s "
				    "(%d of %d ranks joined): were they started, with the same "
				    "MASTER_ADDR, MASTER_PORT and WORLD_SIZE?",
				    missing, addr, port, joined, o->nranks);
			goto fail;
		}
		if (nj_signal) {
			nj_fail_set(f, NJ_SIGNAL, 0, o->t0, "signal", "interrupted by signal %d",
				    (int)nj_signal);
			f->exit_code = 128 + nj_signal;
			goto fail;
		}
		pfd[n++] = (struct pollfd){.fd = o->lfd, .events = POLLIN};
		for (i = 0; i < npend; i++)
			pfd[n++] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
		if (poll(pfd, (nfds_t)n, left > 0.2 ? 200 : (int)(left * 1e3) + 1) <= 0)
			continue;
		if (pfd[0].revents && npend < 64) {
			int cfd = accept(o->lfd, NULL, NULL);

			if (cfd >= 0 && set_socket_opts(cfd) == 0)
				conn_init(&pend[npend++], cfd, -1);
			else if (cfd >= 0)
				close(cfd);
		}
		for (i = 0; i < npend; i++) {
			struct nj_conn *c = &pend[i];
			struct nj_hello h;
			const char *bad = NULL;
			char why[200];

			conn_drain(o, c);
			if (!c->eof && !take(c, NJM_HELLO, &h, sizeof(h)))
				continue;
			if (c->eof) {
				fprintf(stderr, "nccljob[rank 0]: warning: dropped a connection before "
						"its HELLO (%s)\n", c->why);
			} else if (h.proto != 1) {
				bad = "another version of simfabric-nccljob";
			} else if (h.nranks != o->nranks) {
				snprintf(why, sizeof(why), "it has WORLD_SIZE=%d, rank 0 has %d",
					 h.nranks, o->nranks);
				bad = why;
			} else if (h.rank <= 0 || h.rank >= o->nranks) {
				snprintf(why, sizeof(why), "RANK=%d is out of range", h.rank);
				bad = why;
			} else if (o->conn[h.rank].fd >= 0) {
				snprintf(why, sizeof(why), "two processes say RANK=%d", h.rank);
				bad = why;
			} else {
				h.host[sizeof(h.host) - 1] = '\0';
				hellos[h.rank] = h;
				conn_move(&o->conn[h.rank], c);
				o->conn[h.rank].rank = h.rank;
				joined++;
				if (i != --npend)
					conn_move(&pend[i], &pend[npend]);
				i--;
				continue;
			}
			if (bad) {
				struct nj_go g = {.ok = 0};

				nj_fail_set(&g.fail, NJ_SETUP, 0, o->t0, "bootstrap",
					    "rank 0 refused a rank (pid %d): %s", h.pid, bad);
				conn_send(o, c, NJM_WELCOME, &g, sizeof(g));
				*f = g.fail;
				goto fail;
			}
			conn_free(c);
			if (i != --npend)
				conn_move(&pend[i], &pend[npend]);
			i--;
		}
	}
	for (i = 0; i < npend; i++)
		conn_free(&pend[i]);
	close(o->lfd);
	o->lfd = -1;
	return 0;
fail:
	for (i = 0; i < npend; i++)
		conn_free(&pend[i]);
	return -1;
}

/* A peer: connect to rank 0, retrying until the deadline, and say HELLO. */
int oob_connect(struct nj_oob *o, const char *addr, const char *port, double deadline,
		const struct nj_hello *mine, struct nj_fail *f)
{
	char last[200] = "no attempt";
	double pause = 0.05;
	int tries = 0;

	o->conn = calloc(1, sizeof(*o->conn));
	if (!o->conn) {
		nj_fail_set(f, NJ_SETUP, o->rank, o->t0, "bootstrap", "out of memory");
		return -1;
	}
	conn_init(&o->conn[0], -1, 0);
	while (nj_now() < deadline) {
		struct addrinfo *res, *ai;

		if (nj_signal) {
			nj_fail_set(f, NJ_SIGNAL, o->rank, o->t0, "signal",
				    "interrupted by signal %d", (int)nj_signal);
			f->exit_code = 128 + nj_signal;
			return -1;
		}
		tries++;
		if (resolve(addr, port, 0, &res, f, o->t0, o->rank) < 0) {
			snprintf(last, sizeof(last), "%.199s", f->msg);
			res = NULL;
		}
		for (ai = res; ai; ai = ai->ai_next) {
			int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol), err = 0;
			socklen_t el = sizeof(err);
			struct pollfd pfd;

			if (fd < 0 || set_socket_opts(fd) < 0) {
				snprintf(last, sizeof(last), "socket: %s", strerror(errno));
				if (fd >= 0)
					close(fd);
				continue;
			}
			if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
				snprintf(last, sizeof(last), "%s", strerror(errno));
				close(fd);
				continue;
			}
			pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, 2000) <= 0) {
				snprintf(last, sizeof(last), "connect timed out");
				close(fd);
				continue;
			}
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
			if (err) {
				snprintf(last, sizeof(last), "%s", strerror(err));
				close(fd);
				continue;
			}
			freeaddrinfo(res);
			conn_init(&o->conn[0], fd, 0);
			if (conn_send(o, &o->conn[0], NJM_HELLO, mine, sizeof(*mine)) < 0) {
				nj_fail_set(f, NJ_SETUP, o->rank, o->t0, "bootstrap",
					    "sending HELLO to rank 0 at %s:%s failed: %s", addr, port,
					    o->conn[0].why);
				return -1;
			}
			return 0;
		}
		if (res)
			freeaddrinfo(res);
		nanosleep(&(struct timespec){.tv_nsec = (long)(pause * 1e9)}, NULL);
		pause = pause * 2 > 0.5 ? 0.5 : pause * 2;
	}
	nj_fail_set(f, NJ_TIMEOUT, o->rank, o->t0, "bootstrap_timeout",
		    "could not reach rank 0 at MASTER_ADDR=%s MASTER_PORT=%s within --timeout-s "
		    "(%d attempts; last: %s): is rank 0 running?",
		    addr, port, tries, last);
	return -1;
}

void oob_close(struct nj_oob *o)
{
	int i, n = o->rank == 0 ? o->nranks : 1;

	if (o->lfd >= 0)
		close(o->lfd);
	o->lfd = -1;
	if (!o->conn)
		return;
	for (i = 0; i < n; i++)
		conn_free(&o->conn[i]);
	free(o->conn);
	o->conn = NULL;
}
