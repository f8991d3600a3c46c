/* SPDX-License-Identifier: MIT */
/*
 * engine.c - requests and progress the way NCCL's proxy drives them,
 * plus connection setup the way its service thread does.
 *
 * Progress: every pass tests the oldest outstanding request of every comm
 * (NCCL never tests a younger one, so a plugin must not depend on it), and a
 * wait makes passes over all comms, not just the one it waits on, since a
 * plugin may only move a comm forward when that comm is tested. Each call is
 * checked against the rules of reference section 3.5: *request always
 * written (we preload a poison value, or the 0x1 hint for single receives on
 * v9+), *done always written (poisoned before each test), sizes written only
 * on completion and only n of them, sizes == NULL accepted now and then.
 *
 * Setup: one loop calls connect and accept for every pending connection in
 * turn, non-blocking, from one thread; a listen comm is closed right after
 * its (last) accept.
 */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/harness/harness.h"

#define ENG_POISON_REQ ((void *)(uintptr_t)0x5afe0bad0001ULL)
#define ENG_LL_STEP_BYTES (64u << 10) /* NCCL's LL steps: 512 KiB of lines over NCCL_STEPS */
#define ENG_DONE_POISON 0x5A5A5A5A
#define ENG_SIZE_POISON (-1515870811) /* 0xA5A5A5A5 */
#define ENG_MAX_GROUPS 64

void eng_init(struct eng *e, struct hx_test *t, const char *what)
{
	memset(e, 0, sizeof(*e));
	e->t = t;
	e->deadline = t->deadline;
	e->sizes_null_every = 3;
	e->yield_after = 64;
	e->what = what;
}

void eng_free(struct eng *e)
{
	free(e->conns);
	e->conns = NULL;
	e->nconns = e->capconns = 0;
}

struct eng_conn *eng_conn_new(struct eng *e, void *comm, int is_send, int peer, int dev,
			      int peer_dev)
{
	struct eng_conn *c = calloc(1, sizeof(*c));

	if (!c || (e->nconns == e->capconns && e->capconns > 1 << 20)) {
		fprintf(stderr, "[rank %d] harness: out of memory (conn)\n", hx_w.rank);
		exit(1);
	}
	if (e->nconns == e->capconns) {
		int cap = e->capconns ? 2 * e->capconns : 16;
		struct eng_conn **nv = realloc(e->conns, (size_t)cap * sizeof(*nv));

		if (!nv) {
			fprintf(stderr, "[rank %d] harness: out of memory (conns)\n", hx_w.rank);
			exit(1);
		}
		e->conns = nv;
		e->capconns = cap;
	}
	c->e = e;
	c->comm = comm;
	c->is_send = is_send;
	c->peer = peer;
	c->dev = dev;
	c->peer_dev = peer_dev;
	e->conns[e->nconns++] = c;
	return c;
}

static const char *eng_side(const struct eng_conn *c)
{
	return c->is_send ? "send" : "recv";
}

size_t eng_describe(const struct eng_op *op, char *out, size_t cap)
{
	const struct eng_conn *c = op->c;

	if (!c)
		return (size_t)snprintf(out, cap, "request #%ld on a closed comm", op->seq);
	if (c->is_send)
		return (size_t)snprintf(out, cap, "isend #%ld (%zu B, tag %d) to rank %d dev %d->%d",
					op->seq, op->size, op->tag, c->peer, c->dev, c->peer_dev);
	return (size_t)snprintf(out, cap,
				"irecv #%ld (n=%d, %zu B capacity, tag %d) from rank %d dev %d<-%d",
				op->seq, op->n, op->size, op->tag, c->peer, c->dev, c->peer_dev);
}

static void eng_fail_rc(struct eng *e, const char *call, const struct eng_op *op, int rc)
{
	char what[160], warn[512];

	eng_describe(op, what, sizeof(what));
	pl_warn_last(warn, sizeof(warn));
	hx_fail(e->t, "%s: %s returned %s (last WARN: %s)", what, call, hx_rc_str(rc), warn);
}

int eng_reg(struct eng_conn *c, void *buf, size_t size, void **mh)
{
	struct eng_mr *m;
	ncclResult_t rc;

	*mh = NULL;
	rc = pl_reg_mr(c->comm, buf, size, NCCL_PTR_HOST, mh);
	if (rc != ncclSuccess) {
		char warn[512];

		pl_warn_last(warn, sizeof(warn));
		hx_fail(c->e->t, "regMr(%s comm, rank %d, %zu B, NCCL_PTR_HOST) returned %s (last WARN: %s)",
			eng_side(c), c->peer, size, hx_rc_str(rc), warn);
		*mh = NULL;
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		fprintf(stderr, "[rank %d] harness: out of memory (mr)\n", hx_w.rank);
		exit(1);
	}
	m->mh = *mh;
	m->next = c->mrs;
	c->mrs = m;
	return 0;
}

int eng_dereg(struct eng_conn *c, void *mh)
{
	struct eng_mr **pp, *m;
	ncclResult_t rc;

	for (pp = &c->mrs; *pp && (*pp)->mh != mh; pp = &(*pp)->next)
		;
	m = *pp;
	if (!m)
		return 0; /* never registered (a failed regMr): nothing to undo */
	*pp = m->next;
	free(m);
	rc = pl_dereg_mr(c->comm, mh);
	if (rc != ncclSuccess) {
		hx_fail(c->e->t, "deregMr(%s comm, rank %d, mhandle %p) returned %s", eng_side(c),
			c->peer, mh, hx_rc_str(rc));
		return -1;
	}
	return 0;
}

int eng_conn_close(struct eng_conn *c)
{
	struct eng *e;
	ncclResult_t rc;
	int i, ret = 0;

	if (!c)
		return 0;
	e = c->e;
	/* NCCL's teardown order: deregister every buffer, then close. */
	while (c->mrs)
		if (eng_dereg(c, c->mrs->mh) < 0)
			ret = -1;
	rc = c->is_send ? pl_close_send(c->comm) : pl_close_recv(c->comm);
	if (rc != ncclSuccess) {
		/* NCCL skips the rest of its cleanup on a non-success close. */
		hx_fail(e->t, "close%s(comm to rank %d, %d requests in flight) returned %s",
			c->is_send ? "Send" : "Recv", c->peer, c->npending, hx_rc_str(rc));
		ret = -1;
	}
	/* Requests still queued are abandoned: their storage may already be gone, so
	 * only the links are dropped, never the ops themselves touched. */
	c->head = c->tail = NULL;
	for (i = 0; i < e->nconns; i++) {
		if (e->conns[i] == c) {
			e->conns[i] = e->conns[--e->nconns];
			break;
		}
	}
	free(c);
	return ret;
}

static void eng_enqueue(struct eng_conn *c, struct eng_op *op)
{
	op->c = c;
	op->state = ENG_OP_PENDING;
	op->err = 0;
	op->sizes_known = 0;
	op->ntests = 0;
	op->seq = c->nposted++;
	op->t_post = hx_now();
	op->next = NULL;
	op->linked = 1;
	if (c->tail)
		c->tail->next = op;
	else
		c->head = op;
	c->tail = op;
	c->npending++;
}

/* After a successful isend/irecv: NULL is "would block" (post again later), else track it. */
static int eng_posted(struct eng_conn *c, struct eng_op *op, void *req)
{
	if (!req) {
		c->e->nblocked++;
		op->state = ENG_OP_IDLE;
		return 1;
	}
	op->req = req;
	eng_enqueue(c, op);
	return 0;
}

int eng_isend(struct eng_conn *c, void *data, size_t size, int tag, void *mh, struct eng_op *op)
{
	struct eng *e = c->e;
	void *req = ENG_POISON_REQ; /* NCCL never clears a send slot between uses */
	ncclResult_t rc;

	op->c = c;
	op->n = 1;
	op->size = size;
	op->tag = tag;
	op->seq = c->nposted;
	rc = pl_isend(c->comm, data, size, tag, mh, &req);
	if (rc != ncclSuccess) {
		op->state = ENG_OP_FAILED;
		op->err = rc;
		e->nfailed++;
		if (!e->expect_errors)
			eng_fail_rc(e, "isend", op, rc);
		return -1;
	}
	if (req == ENG_POISON_REQ) {
		hx_fail(e->t, "isend (%zu B, tag %d) to rank %d returned ncclSuccess without writing *request",
			size, tag, c->peer);
		op->state = ENG_OP_FAILED;
		op->err = ENG_EPROTO;
		e->nfailed++;
		return -1;
	}
	return eng_posted(c, op, req);
}

int eng_irecv(struct eng_conn *c, int n, void **data, size_t *sizes, int *tags, void **mh,
	      struct eng_op *op)
{
	struct eng *e = c->e;
	size_t sz[HX_MAX_RECVS], total = 0;
	void *req;
	ncclResult_t rc;
	int i;

	if (n < 1 || n > HX_MAX_RECVS) {
		hx_fail(e->t, "harness bug: irecv with n=%d", n);
		return -1;
	}
	for (i = 0; i < n; i++) {
		sz[i] = sizes[i];
		total += sizes[i];
	}
	op->c = c;
	op->n = n;
	op->size = total;
	op->tag = tags ? tags[0] : 0;
	op->seq = c->nposted;
	/* NCCL preloads the optional-completion hint for its single LL and LL128 receives (v9+
	 * see it; the adapter clears it for v8 as NCCL's shim does), which the plugin then fills
	 * no earlier than the model's arrival times. The harness marks the single receives that
	 * could be LL's (an LL step holds 64 KiB), or all with e->mark_all; larger ones are
	 * Simple's, whose slot holds a stale value, as grouped slots do. */
	req = n == 1 && (e->mark_all || total <= ENG_LL_STEP_BYTES)
		? (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION
		: ENG_POISON_REQ;
	rc = pl_irecv(c->comm, n, data, sz, tags, mh, &req);
	if (rc != ncclSuccess) {
		op->state = ENG_OP_FAILED;
		op->err = rc;
		e->nfailed++;
		if (!e->expect_errors)
			eng_fail_rc(e, "irecv", op, rc);
		return -1;
	}
	if (req == (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION ||
	    req == ENG_POISON_REQ) {
		char what[160];

		eng_describe(op, what, sizeof(what));
		hx_fail(e->t, "%s: irecv returned ncclSuccess but left *request = %p (%s); NCCL would "
			"test that value", what, req,
			req == ENG_POISON_REQ ? "not written" : "the 0x1 hint");
		op->state = ENG_OP_FAILED;
		op->err = ENG_EPROTO;
		e->nfailed++;
		return -1;
	}
	return eng_posted(c, op, req);
}

static void eng_violation(struct eng *e, struct eng_op *op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void eng_violation(struct eng *e, struct eng_op *op, const char *fmt, ...)
{
	char what[160], msg[256];
	va_list ap;

	eng_describe(op, what, sizeof(what));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	hx_fail(e->t, "%s: test (call %ld): %s", what, op->ntests, msg);
	op->state = ENG_OP_FAILED;
	op->err = ENG_EPROTO;
	e->nfailed++;
}

/* Tests one request. 1 if it resolved (done or failed), 0 if still pending. */
static int eng_test(struct eng *e, struct eng_op *op)
{
	struct eng_conn *c = op->c;
	int sizes[HX_MAX_RECVS], done = ENG_DONE_POISON, use_sizes, i;
	ncclResult_t rc;

	use_sizes = op->want_sizes || !e->sizes_null_every ||
		    (e->ntests % (unsigned long)e->sizes_null_every) != 0;
	if (use_sizes)
		for (i = 0; i < HX_MAX_RECVS; i++)
			sizes[i] = ENG_SIZE_POISON;
	rc = pl_test(op->req, &done, use_sizes ? sizes : NULL);
	e->ntests++;
	op->ntests++;
	if (rc != ncclSuccess) {
		e->nfailed++;
		op->state = ENG_OP_FAILED;
		op->err = rc;
		op->t_done = hx_now();
		if (!e->expect_errors)
			eng_fail_rc(e, "test", op, rc);
		return 1;
	}
	if (done == ENG_DONE_POISON) {
		eng_violation(e, op, "returned ncclSuccess without writing *done");
		return 1;
	}
	if (done != 0 && done != 1) {
		eng_violation(e, op, "wrote *done = %d (want 0 or 1)", done);
		return 1;
	}
	if (!done) {
		if (use_sizes)
			for (i = 0; i < HX_MAX_RECVS; i++)
				if (sizes[i] != ENG_SIZE_POISON) {
					eng_violation(e, op, "wrote sizes[%d] = %d while *done = 0", i,
						      sizes[i]);
					return 1;
				}
		return 0;
	}
	if (use_sizes) {
		for (i = 0; i < op->n; i++)
			if (sizes[i] == ENG_SIZE_POISON) {
				eng_violation(e, op, "done but sizes[%d] not written (n=%d)", i, op->n);
				return 1;
			}
		/* For a send NCCL passes one int: anything past it is NCCL's stack. */
		for (i = op->n; i < HX_MAX_RECVS; i++)
			if (sizes[i] != ENG_SIZE_POISON) {
				eng_violation(e, op, "wrote sizes[%d] = %d, past n", i, sizes[i]);
				return 1;
			}
		memcpy(op->sizes, sizes, sizeof(int) * (size_t)op->n);
		op->sizes_known = 1;
		if (c->is_send && (size_t)sizes[0] != op->size) {
			eng_violation(e, op, "reported sizes[0] = %d for a send of %zu bytes",
				      sizes[0], op->size);
			return 1;
		}
	}
	op->state = ENG_OP_DONE;
	op->t_done = hx_now();
	/* NCCL hands a finished receive back once the GPU consumed it, if the slot is set. */
	if (!c->is_send && pl_has_irecv_consumed()) {
		rc = pl_irecv_consumed(c->comm, op->n, op->req);
		if (rc != ncclSuccess)
			eng_fail_rc(e, "irecvConsumed", op, rc);
	}
	return 1;
}

static void eng_dequeue_head(struct eng_conn *c)
{
	struct eng_op *op = c->head;

	c->head = op->next;
	if (!c->head)
		c->tail = NULL;
	op->next = NULL;
	op->linked = 0;
	c->npending--;
}

void eng_cancel(struct eng *e, struct eng_op *op)
{
	struct eng_conn *c = NULL;
	struct eng_op **pp, *prev = NULL;
	int i;

	if (op->state == ENG_OP_PENDING) {
		op->state = ENG_OP_FAILED;
		op->err = ENG_EABORTED;
	}
	/* Its comm may be closed and freed already: compare pointers before touching it. */
	for (i = 0; i < e->nconns && op->linked; i++)
		if (e->conns[i] == op->c)
			c = op->c;
	if (!c) {
		op->linked = 0;
		return;
	}
	for (pp = &c->head; *pp && *pp != op; pp = &(*pp)->next)
		prev = *pp;
	if (*pp) {
		*pp = op->next;
		if (c->tail == op)
			c->tail = prev;
		c->npending--;
	}
	op->next = NULL;
	op->linked = 0;
}

int eng_progress(struct eng *e)
{
	int i, resolved = 0;

	e->npasses++;
	for (i = 0; i < e->nconns; i++) {
		struct eng_conn *c = e->conns[i];

		while (c->head) {
			struct eng_op *op = c->head;

			/* Given up on (timeout, abort): never tested again. */
			if (op->state != ENG_OP_PENDING) {
				eng_dequeue_head(c);
				continue;
			}
			if (!eng_test(e, op))
				break;
			eng_dequeue_head(c);
			resolved++;
		}
	}
	return resolved;
}

void eng_idle(struct eng *e, int progressed)
{
	if (progressed) {
		e->idle = 0;
		return;
	}
	/* Oversubscribed CPUs (8 ranks on 2 cores) must let the peer run. */
	if (e->yield_after && ++e->idle >= (unsigned)e->yield_after)
		sched_yield();
}

int eng_expired(struct eng *e)
{
	double now = hx_now();

	if (now > e->deadline)
		return 1;
	if (now - e->last_abort_check > 0.005) {
		e->last_abort_check = now;
		int ab = oob_aborted();

		if (ab) {
			/* Test what is in flight once more before giving up: an error that already
			 * happened at this end (the same fault's other side, failing at the same
			 * model time) is this rank's to report, not masked by the abort. A rank
			 * kept off its CPU past the failure used to see the abort first. */
			if (ab - 1 != hx_w.rank && !e->t->aborted) {
				e->t->aborted = 1;
				eng_progress(e);
			}
			return 2;
		}
	}
	return 0;
}

static void eng_report_expiry(struct eng *e, int why, const char *waiting)
{
	int ab;

	if (why == 2) {
		ab = oob_aborted();
		if (ab > HX_MAX_RANKS)
			hx_fail(e->t, "aborted: lost the parent while waiting for %s", waiting);
		else if (ab - 1 == hx_w.rank)
			hx_fail(e->t, "stopped waiting for %s after this rank's own failure", waiting);
		else
			hx_fail(e->t, "aborted: rank %d failed this test (was waiting for %s)", ab - 1,
				waiting);
		return;
	}
	if (!e->quiet_timeout)
		hx_fail(e->t, "%s%stimed out after %.1f s waiting for %s", e->what ? e->what : "",
			e->what ? ": " : "", hx_now() - e->t->t0, waiting);
}

int eng_wait(struct eng *e, struct eng_op *op)
{
	while (op->state == ENG_OP_PENDING) {
		int n = eng_progress(e), why;

		if (op->state != ENG_OP_PENDING)
			break;
		why = eng_expired(e);
		if (why) {
			char what[200];
			size_t l = eng_describe(op, what, sizeof(what));

			snprintf(what + l, sizeof(what) - (l < sizeof(what) ? l : sizeof(what)),
				 ", tested %ld times", op->ntests);
			eng_report_expiry(e, why, what);
			op->state = ENG_OP_FAILED;
			op->err = why == 2 ? ENG_EABORTED : ENG_ETIMEDOUT;
			return -1;
		}
		eng_idle(e, n);
	}
	return op->state == ENG_OP_DONE ? 0 : -1;
}

static struct eng_op *eng_first_pending(struct eng *e, int *npending)
{
	struct eng_op *first = NULL;
	int i;

	*npending = 0;
	for (i = 0; i < e->nconns; i++) {
		struct eng_op *op;

		for (op = e->conns[i]->head; op; op = op->next) {
			if (op->state != ENG_OP_PENDING)
				continue;
			if (!first)
				first = op;
			(*npending)++;
		}
	}
	return first;
}

int eng_wait_all(struct eng *e)
{
	unsigned long nfailed0 = e->nfailed;

	for (;;) {
		int n = eng_progress(e), npending, why, i;
		struct eng_op *first = eng_first_pending(e, &npending);

		if (!first)
			break;
		why = eng_expired(e);
		if (why) {
			char what[240];
			size_t l = eng_describe(first, what, sizeof(what));

			snprintf(what + l, sizeof(what) - (l < sizeof(what) ? l : sizeof(what)),
				 " (tested %ld times) and %d more", first->ntests, npending - 1);
			eng_report_expiry(e, why, what);
			for (i = 0; i < e->nconns; i++) {
				struct eng_op *op;

				for (op = e->conns[i]->head; op; op = op->next)
					if (op->state == ENG_OP_PENDING) {
						op->state = ENG_OP_FAILED;
						op->err = why == 2 ? ENG_EABORTED : ENG_ETIMEDOUT;
					}
			}
			return -1;
		}
		eng_idle(e, n);
	}
	/* Failures were reported where they happened. */
	return e->nfailed != nfailed0 ? -1 : 0;
}

static int eng_retry(struct eng_conn *c, struct eng_op *op, int r, const char *call)
{
	struct eng *e = c->e;
	int why;

	if (r <= 0)
		return r;
	eng_idle(e, eng_progress(e));
	why = eng_expired(e);
	if (why) {
		char what[200], msg[260];

		eng_describe(op, what, sizeof(what));
		snprintf(msg, sizeof(msg), "%s to be accepted (%s kept returning a NULL request)",
			 what, call);
		eng_report_expiry(e, why, msg);
		op->state = ENG_OP_FAILED;
		op->err = why == 2 ? ENG_EABORTED : ENG_ETIMEDOUT;
		return -1;
	}
	return 1;
}

int eng_send(struct eng_conn *c, void *data, size_t size, int tag, void *mh, struct eng_op *op)
{
	int r;

	do
		r = eng_retry(c, op, eng_isend(c, data, size, tag, mh, op), "isend");
	while (r > 0);
	return r;
}

int eng_recv(struct eng_conn *c, int n, void **data, size_t *sizes, int *tags, void **mh,
	     struct eng_op *op)
{
	int r;

	do
		r = eng_retry(c, op, eng_irecv(c, n, data, sizes, tags, mh, op), "irecv");
	while (r > 0);
	return r;
}

int eng_recv1(struct eng_conn *c, void *data, size_t cap, int tag, void *mh, struct eng_op *op)
{
	return eng_recv(c, 1, &data, &cap, &tag, &mh, op);
}

/* ---- connection plans --------------------------------------------------------- */

void eng_links_add(struct eng_links *ls, int src, int sdev, int dst, int rdev, int group,
		   int flags)
{
	struct eng_link *l;

	if (ls->n == ls->cap) {
		int cap = ls->cap ? 2 * ls->cap : 32;
		struct eng_link *nv = realloc(ls->v, (size_t)cap * sizeof(*nv));

		if (!nv) {
			fprintf(stderr, "[rank %d] harness: out of memory (links)\n", hx_w.rank);
			exit(1);
		}
		ls->v = nv;
		ls->cap = cap;
	}
	l = &ls->v[ls->n++];
	memset(l, 0, sizeof(*l));
	l->src = src;
	l->sdev = sdev;
	l->dst = dst;
	l->rdev = rdev;
	l->group = group;
	l->flags = flags;
}

void eng_links_free(struct eng_links *ls)
{
	free(ls->v);
	ls->v = NULL;
	ls->n = ls->cap = 0;
}

struct eng_link *eng_link_find(struct eng_links *ls, int src, int dst, int nth)
{
	int i;

	for (i = 0; i < ls->n; i++)
		if (ls->v[i].src == src && ls->v[i].dst == dst && nth-- == 0)
			return &ls->v[i];
	return NULL;
}

/* The first link of l's listener group in [lo, hi), where its listen comm lives. */
static struct eng_link *eng_group_head(struct eng_links *ls, int lo, int hi, struct eng_link *l)
{
	int i;

	if (l->group < 0)
		return l;
	for (i = lo; i < hi; i++)
		if (ls->v[i].dst == l->dst && ls->v[i].group == l->group)
			return &ls->v[i];
	return l;
}

int eng_links_listen(struct eng *e, struct eng_links *ls, int lo, int hi)
{
	int i, me = hx_w.rank;

	for (i = lo; i < hi; i++) {
		struct eng_link *l = &ls->v[i], *h;
		ncclResult_t rc;

		if (l->dst != me)
			continue;
		h = eng_group_head(ls, lo, hi, l);
		if (h != l) {
			memcpy(l->handle, h->handle, sizeof(l->handle));
			l->lcomm = h->lcomm;
			continue;
		}
		/* NCCL hands listen a zeroed handle and ships all 128 bytes. */
		memset(l->handle, 0, sizeof(l->handle));
		l->lcomm = NULL;
		rc = pl_listen(l->rdev, l->handle, &l->lcomm);
		if (rc != ncclSuccess) {
			char warn[512];

			pl_warn_last(warn, sizeof(warn));
			hx_fail(e->t, "listen(dev %d) for rank %d returned %s (last WARN: %s)", l->rdev,
				l->src, hx_rc_str(rc), warn);
			return -1;
		}
		if (!l->lcomm) {
			hx_fail(e->t, "listen(dev %d) returned ncclSuccess with a NULL listenComm",
				l->rdev);
			return -1;
		}
	}
	return 0;
}

int eng_links_exchange(struct eng *e, struct eng_links *ls)
{
	size_t part = (size_t)ls->n * NCCL_NET_HANDLE_MAXSIZE;
	char *buf = calloc((size_t)hx_w.nranks, part ? part : 1);
	int i, me = hx_w.rank;

	if (!buf) {
		fprintf(stderr, "[rank %d] harness: out of memory (handles)\n", me);
		exit(1);
	}
	for (i = 0; i < ls->n; i++)
		if (ls->v[i].dst == me)
			memcpy(buf + (size_t)me * part + (size_t)i * NCCL_NET_HANDLE_MAXSIZE,
			       ls->v[i].handle, NCCL_NET_HANDLE_MAXSIZE);
	if (oob_allgather(buf, part) < 0) {
		eng_report_expiry(e, 2, "the handle exchange");
		e->t->aborted = 1;
		free(buf);
		return -1;
	}
	for (i = 0; i < ls->n; i++)
		if (ls->v[i].src == me)
			memcpy(ls->v[i].handle,
			       buf + (size_t)ls->v[i].dst * part + (size_t)i * NCCL_NET_HANDLE_MAXSIZE,
			       NCCL_NET_HANDLE_MAXSIZE);
	free(buf);
	return 0;
}

int eng_links_establish(struct eng *e, struct eng_links *ls, int lo, int hi)
{
	int i, me = hx_w.rank;
	ncclResult_t rc;

	rc = pl_set_net_attr();
	if (rc != ncclSuccess)
		hx_fail(e->t, "setNetAttr (all fields undefined) returned %s", hx_rc_str(rc));
	for (;;) {
		unsigned char tried[ENG_MAX_GROUPS] = {0};
		int progressed = 0, nconn = 0, nacc = 0, why;
		long calls_c = 0, calls_a = 0;

		for (i = lo; i < hi; i++) {
			struct eng_link *l = &ls->v[i];
			ncclNetDeviceHandle_t *dh = NULL;

			if (l->src == me && !l->send) {
				void *sc = NULL;

				l->nconnect++;
				rc = pl_connect(l->sdev, l->handle, &sc,
						(l->flags & ENG_L_NULL_DEVCOMM) ? NULL : &dh);
				if (rc != ncclSuccess) {
					char warn[512];

					pl_warn_last(warn, sizeof(warn));
					hx_fail(e->t, "connect(dev %d) to rank %d dev %d returned %s on call "
						"%ld (last WARN: %s)", l->sdev, l->dst, l->rdev,
						hx_rc_str(rc), l->nconnect, warn);
					return -1;
				}
				if (dh)
					hx_fail(e->t, "connect(dev %d) to rank %d wrote a device handle %p; "
						"a HOST plugin must leave it NULL", l->sdev, l->dst,
						(void *)dh);
				if (sc) {
					l->send = eng_conn_new(e, sc, 1, l->dst, l->sdev, l->rdev);
					progressed++;
				} else {
					nconn++;
				}
			}
			if (l->dst == me && !l->recv) {
				struct eng_link *h = eng_group_head(ls, lo, hi, l), *t;
				void *rcomm = NULL;
				int g = l->group;

				if (g >= 0 && g < ENG_MAX_GROUPS && tried[g]) {
					nacc++;
					continue;
				}
				if (g >= 0 && g < ENG_MAX_GROUPS)
					tried[g] = 1;
				if (!h->lcomm) {
					hx_fail(e->t, "harness bug: no listen comm for link %d", i);
					return -1;
				}
				l->naccept++;
				rc = pl_accept(h->lcomm, &rcomm, &dh);
				if (rc != ncclSuccess) {
					char warn[512];

					pl_warn_last(warn, sizeof(warn));
					hx_fail(e->t, "accept(dev %d) from rank %d returned %s on call %ld "
						"(last WARN: %s)", l->rdev, l->src, hx_rc_str(rc),
						l->naccept, warn);
					return -1;
				}
				if (dh)
					hx_fail(e->t, "accept(dev %d) wrote a device handle %p; a HOST plugin "
						"must leave it NULL", l->rdev, (void *)dh);
				if (!rcomm) {
					nacc++;
					continue;
				}
				/* Grouped accepts come in arrival order; the peer is whoever
				 * connected, so tests identify senders by message content. */
				l->recv = eng_conn_new(e, rcomm, 0, l->src, l->rdev, l->sdev);
				progressed++;
				if (g < 0) {
					ncclResult_t crc = pl_close_listen(l->lcomm);

					if (crc != ncclSuccess)
						hx_fail(e->t, "closeListen right after accept returned %s",
							hx_rc_str(crc));
					l->lcomm = NULL;
				} else {
					int left = 0, k;

					for (k = lo; k < hi; k++) {
						t = &ls->v[k];
						if (t->dst == me && t->group == g && !t->recv)
							left++;
					}
					if (!left) {
						ncclResult_t crc = pl_close_listen(h->lcomm);

						if (crc != ncclSuccess)
							hx_fail(e->t, "closeListen after the last accept "
								"returned %s", hx_rc_str(crc));
						for (k = lo; k < hi; k++)
							if (ls->v[k].dst == me && ls->v[k].group == g)
								ls->v[k].lcomm = NULL;
					}
				}
			}
		}
		if (!nconn && !nacc)
			return 0;
		why = eng_expired(e);
		if (why) {
			char msg[200];

			for (i = lo; i < hi; i++) {
				calls_c += ls->v[i].nconnect;
				calls_a += ls->v[i].naccept;
			}
			snprintf(msg, sizeof(msg), "connections: %d connects and %d accepts still "
				 "pending (%ld connect and %ld accept calls made)", nconn, nacc,
				 calls_c, calls_a);
			eng_report_expiry(e, why, msg);
			return -1;
		}
		eng_idle(e, progressed);
	}
}

int eng_links_open(struct eng *e, struct eng_links *ls)
{
	if (eng_links_listen(e, ls, 0, ls->n) < 0)
		return -1;
	if (eng_links_exchange(e, ls) < 0)
		return -1;
	return eng_links_establish(e, ls, 0, ls->n);
}

int eng_links_close(struct eng *e, struct eng_links *ls, int lo, int hi)
{
	int i, k, ret = 0;

	(void)e;
	for (i = lo; i < hi; i++) {
		struct eng_link *l = &ls->v[i];

		if (l->send && eng_conn_close(l->send) < 0)
			ret = -1;
		l->send = NULL;
		if (l->recv && eng_conn_close(l->recv) < 0)
			ret = -1;
		l->recv = NULL;
		if (l->lcomm) {
			void *lc = l->lcomm;
			ncclResult_t rc = pl_close_listen(lc);

			if (rc != ncclSuccess) {
				hx_fail(e->t, "closeListen (never accepted) returned %s", hx_rc_str(rc));
				ret = -1;
			}
			for (k = lo; k < hi; k++)
				if (ls->v[k].lcomm == lc)
					ls->v[k].lcomm = NULL;
		}
	}
	return ret;
}
