/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c - the tests of a plugin's lifecycle under traffic: closing with messages in
 * flight, reusing a listen address, calls from several threads, unloading and loading it
 * again, and registering memory. Same rules as tests.c: every rank runs the same plan,
 * data is checked byte for byte, and every test closes what it opened.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/harness/harness.h"

/* ---- close_inflight ------------------------------------------------------------------- */

#define T_CI_SIZE (64u << 10)

struct t_ci_op {
	struct eng_op op;
	const char *what;
	int posted; /* 0: would-block so far */
};

static int t_ci_post(struct eng_conn *c, struct t_ci_op *o, void *buf, void *mh, int tag)
{
	int r;

	if (c->is_send)
		r = eng_isend(c, buf, T_CI_SIZE, tag, mh, &o->op);
	else
		r = t_irecv1(c, buf, T_CI_SIZE, tag, mh, &o->op);
	if (r == 0 || r < 0)
		o->posted = 1;
	return r;
}

static const char *t_ci_outcome(const struct t_ci_op *o)
{
	if (!o->posted)
		return "would-block until the bound";
	if (o->op.state == ENG_OP_DONE)
		return "completed";
	if (o->op.state == ENG_OP_FAILED)
		return hx_rc_str(o->op.err);
	return "pending";
}

void t_close_inflight(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0}, fresh = {0};
	struct t_ci_op ops[16];
	void *bufs[16] = {0}, *mhs[16] = {0};
	int me = hx_w.rank, nops = 0, i, fds0 = hx_count_fds(), fds1;
	double t_close = 0, t_bound;

	eng_init(&e, t, "close_inflight");
	memset(ops, 0, sizeof(ops));
	/* Two connections each way between ranks 0 and 1; others only join the exchanges. */
	eng_links_add(&ls, 0, 0, 1, 0, -1, 0); /* A1: 0's unmatched sends */
	eng_links_add(&ls, 0, 0, 1, 0, -1, 0); /* A2: 1's pending receives */
	eng_links_add(&ls, 1, 0, 0, 0, -1, 0); /* B1: 0's unmatched receives */
	eng_links_add(&ls, 1, 0, 0, 0, -1, 0); /* B2: 1's pending sends */
	if (eng_links_open(&e, &ls) < 0)
		goto out;
	if (me > 1)
		hx_note(t, "not involved (ranks 0 and 1 only)");
	e.expect_errors = 1;
	if (me == 0 || me == 1) {
		struct eng_conn *mine[2];
		const char *names[2];
		int k, j;

		if (me == 0) {
			mine[0] = eng_link_find(&ls, 1, 0, 0)->recv; /* receives never matched */
			mine[1] = eng_link_find(&ls, 0, 1, 0)->send; /* sends that cannot complete */
			names[0] = "unmatched irecv";
			names[1] = "unmatched isend";
		} else {
			mine[0] = eng_link_find(&ls, 0, 1, 1)->recv;
			mine[1] = eng_link_find(&ls, 1, 0, 1)->send;
			names[0] = "pending irecv";
			names[1] = "pending isend";
		}
		for (j = 0; j < 2; j++) {
			for (k = 0; k < (me == 0 ? 4 : 2); k++) {
				struct t_ci_op *o = &ops[nops];

				bufs[nops] = hx_alloc(T_CI_SIZE);
				memset(bufs[nops], HX_POISON_BYTE, T_CI_SIZE);
				if (eng_reg(mine[j], bufs[nops], T_CI_SIZE, &mhs[nops]) < 0)
					goto out;
				o->what = names[j];
				if (t_ci_post(mine[j], o, bufs[nops], mhs[nops], me) < 0) {
					hx_fail(t, "%s #%d failed at post with %s before any close", o->what,
						k, hx_rc_str(o->op.err));
					goto out;
				}
				nops++;
			}
		}
	}
	if (t_barrier(t) < 0)
		goto out;
	if (me == 0) {
		/* Close everything with requests in flight, as NCCL's abort path does. */
		t_close = hx_now();
		if (eng_links_close(&e, &ls, 0, ls.n) < 0)
			hx_fail(t, "closing comms with requests in flight failed");
		js_num(t->metrics, "close_seconds", hx_now() - t_close);
	}
	if (t_barrier(t) < 0)
		goto out;
	if (me == 1) {
		/* And new operations on the comms rank 0 closed; each must resolve in the bound. */
		struct eng_conn *a1 = eng_link_find(&ls, 0, 1, 0)->recv;
		struct eng_conn *b1 = eng_link_find(&ls, 1, 0, 0)->send;
		struct eng_conn *extra[2] = {a1, b1};
		int j;

		for (j = 0; j < 2; j++) {
			struct t_ci_op *o = &ops[nops];

			bufs[nops] = hx_alloc(T_CI_SIZE);
			memset(bufs[nops], HX_POISON_BYTE, T_CI_SIZE);
			if (eng_reg(extra[j], bufs[nops], T_CI_SIZE, &mhs[nops]) < 0)
				goto out;
			o->what = j ? "new isend after the close" : "new irecv after the close";
			t_ci_post(extra[j], o, bufs[nops], mhs[nops], me);
			nops++;
		}
		t_bound = hx_now() + hx_opt.bound;
		e.deadline = t_bound < e.deadline ? t_bound : e.deadline;
		for (;;) {
			int unresolved = 0, moved = eng_progress(&e), why;

			for (i = 0; i < nops; i++) {
				struct t_ci_op *o = &ops[i];

				if (!o->posted) {
					struct eng_conn *c = i < 2 ? eng_link_find(&ls, 0, 1, 1)->recv
							   : i < 4  ? eng_link_find(&ls, 1, 0, 1)->send
								    : extra[i - 4];

					moved += t_ci_post(c, o, bufs[i], mhs[i], me) <= 0;
				}
				unresolved += !o->posted || o->op.state == ENG_OP_PENDING;
			}
			if (!unresolved)
				break;
			why = eng_expired(&e);
			if (why) {
				for (i = 0; i < nops; i++)
					if (!ops[i].posted || ops[i].op.state == ENG_OP_PENDING)
						hx_fail(t, "%s (op %d): neither failed nor completed %.1f s "
							"after rank 0 closed (%s)", ops[i].what, i,
							hx_opt.bound, t_ci_outcome(&ops[i]));
				break;
			}
			eng_idle(&e, moved);
		}
		js_num(t->metrics, "resolve_seconds", hx_now() - (t_bound - hx_opt.bound));
		js_obj(t->metrics, "outcomes");
		for (i = 0; i < nops; i++) {
			char key[48];

			snprintf(key, sizeof(key), "%d_%s", i, ops[i].what);
			js_str(t->metrics, key, t_ci_outcome(&ops[i]));
		}
		js_end_obj(t->metrics);
		for (i = 0; i < nops; i++)
			if (ops[i].op.state == ENG_OP_FAILED && ops[i].op.err != ncclRemoteError)
				hx_note(t, "%s ended with %s (ncclRemoteError expected)", ops[i].what,
					hx_rc_str(ops[i].op.err));
	}
	if (me == 1 && eng_links_close(&e, &ls, 0, ls.n) < 0)
		hx_fail(t, "closing comms after the peer closed failed");
	if (t_barrier(t) < 0)
		goto out;
	/* A fresh connection on the same devices must just work. */
	e.expect_errors = 0;
	e.deadline = t->deadline;
	eng_links_add(&fresh, 0, 0, 1, 0, -1, 0);
	eng_links_add(&fresh, 1, 0, 0, 0, -1, 0);
	if (eng_links_open(&e, &fresh) == 0 && (me == 0 || me == 1)) {
		int peer = 1 - me;

		t_xfer(&e, eng_link_find(&fresh, me, peer, 0)->send,
		       eng_link_find(&fresh, peer, me, 0)->recv, T_CI_SIZE, T_CI_SIZE,
		       hx_seed(T_SEED_CLOSE, (uint64_t)me, 1, 0),
		       hx_seed(T_SEED_CLOSE, (uint64_t)peer, 1, 0), me, peer);
	}
	eng_links_close(&e, &fresh, 0, fresh.n);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	if (!hx_failed(t))
		for (i = 0; i < nops; i++)
			hx_free(bufs[i]);
	/* Everything this test opened is closed: descriptors must be back where they were. */
	fds1 = hx_count_fds();
	js_int(t->metrics, "fd_delta", fds1 - fds0);
	if (!hx_failed(t) && fds1 > fds0)
		hx_fail(t, "%d more open file descriptors after every comm was closed (%d -> %d)",
			fds1 - fds0, fds0, fds1);
	eng_links_free(&fresh);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- listen_reuse --------------------------------------------------------------------- */

struct t_lr_hdr {
	uint32_t magic;
	int32_t src, nth, dst;
};
#define T_LR_MAGIC 0x4c525553u
#define T_LR_SIZE 8192

#define T_LR_TAG 0x51f /* the one tag of listen_reuse: see below */

void t_listen_reuse(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	int me = hx_w.rank, n = hx_w.nranks, s, d, k, i, nin = 0, nout = 0;
	struct eng_op *ops;
	void **bufs, **mhs;
	unsigned char seen[HX_MAX_RANKS][2];

	eng_init(&e, t, "listen_reuse");
	/* Group 0: each rank's one listen comm; every peer connects to it twice. */
	for (d = 0; d < n; d++)
		for (s = 0; s < n; s++)
			for (k = 0; k < 2; k++)
				if (s != d)
					eng_links_add(&ls, s, 0, d, 0, 0, 0);
	ops = calloc((size_t)ls.n, sizeof(*ops));
	bufs = calloc((size_t)ls.n, sizeof(void *));
	mhs = calloc((size_t)ls.n, sizeof(void *));
	if (!ops || !bufs || !mhs)
		exit(1);
	memset(seen, 0, sizeof(seen));
	if (eng_links_open(&e, &ls) < 0)
		goto out;
	for (i = 0; i < ls.n && !hx_failed(t); i++) {
		struct eng_link *l = &ls.v[i];

		if (l->dst != me)
			continue;
		bufs[i] = hx_alloc(T_LR_SIZE);
		memset(bufs[i], HX_POISON_BYTE, T_LR_SIZE);
		ops[i].want_sizes = 1;
		/* Accepts came in arrival order, so the sender of each is unknown here: both sides
		 * use one agreed tag (a plugin may match tags even for n == 1, as IB does), and
		 * the header in the payload says who sent it. */
		if (eng_reg(l->recv, bufs[i], T_LR_SIZE, &mhs[i]) == 0)
			eng_recv1(l->recv, bufs[i], T_LR_SIZE, T_LR_TAG, mhs[i], &ops[i]);
		nin++;
	}
	for (d = 0; d < n && !hx_failed(t); d++) {
		for (k = 0; k < 2 && d != me; k++) {
			struct eng_link *l = eng_link_find(&ls, me, d, k);
			struct t_lr_hdr *h;
			size_t idx = (size_t)(l - ls.v);

			bufs[idx] = hx_alloc(T_LR_SIZE);
			hx_fill(bufs[idx], T_LR_SIZE,
				hx_seed(T_SEED_REUSE, (uint64_t)me, (uint64_t)k, (uint64_t)d));
			h = bufs[idx];
			h->magic = T_LR_MAGIC;
			h->src = me;
			h->nth = k;
			h->dst = d;
			if (eng_reg(l->send, bufs[idx], T_LR_SIZE, &mhs[idx]) == 0)
				eng_send(l->send, bufs[idx], T_LR_SIZE, T_LR_TAG, mhs[idx], &ops[idx]);
			nout++;
		}
	}
	if (!hx_failed(t))
		eng_wait_all(&e);
	for (i = 0; i < ls.n && !hx_failed(t); i++) {
		struct eng_link *l = &ls.v[i];
		struct t_lr_hdr h;
		char what[96];

		if (l->dst != me)
			continue;
		memcpy(&h, bufs[i], sizeof(h));
		if (h.magic != T_LR_MAGIC || h.dst != me || h.src < 0 || h.src >= n || h.src == me ||
		    h.nth < 0 || h.nth > 1) {
			hx_fail(t, "accepted connection %d carried a message with a bad header "
				"(magic 0x%x src %d nth %d dst %d)", i, h.magic, h.src, h.nth, h.dst);
			break;
		}
		if (seen[h.src][h.nth]++) {
			hx_fail(t, "connection %d from rank %d arrived twice", h.nth, h.src);
			break;
		}
		/* Rebuild the sender's full message to compare past the header. */
		{
			uint8_t *want = hx_alloc(T_LR_SIZE);
			size_t off;

			hx_fill(want, T_LR_SIZE,
				hx_seed(T_SEED_REUSE, (uint64_t)h.src, (uint64_t)h.nth, (uint64_t)me));
			memcpy(want, &h, sizeof(h));
			for (off = 0; off < T_LR_SIZE; off++)
				if (((uint8_t *)bufs[i])[off] != want[off])
					break;
			snprintf(what, sizeof(what), "connection %d from rank %d", h.nth, h.src);
			if (off < T_LR_SIZE)
				hx_fail(t, "%s: byte %zu differs: expected 0x%02x, got 0x%02x", what, off,
					want[off], ((uint8_t *)bufs[i])[off]);
			else if (ops[i].sizes_known && ops[i].sizes[0] != T_LR_SIZE)
				hx_fail(t, "%s: test reported %d bytes, %d were sent", what,
					ops[i].sizes[0], T_LR_SIZE);
			hx_free(want);
		}
	}
	js_int(t->metrics, "accepted", nin);
	js_int(t->metrics, "connected", nout);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	if (!hx_failed(t))
		for (i = 0; i < ls.n; i++)
			hx_free(bufs[i]);
	free(ops);
	free(bufs);
	free(mhs);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- threads ---------------------------------------------------------------------------- */

struct t_thr {
	struct hx_test *t;
	struct eng_links *ls;
	pthread_barrier_t *bar;
	const int *exchanged;
	int id, lo, hi;
	long bytes;
};

static void *t_thread_main(void *arg)
{
	struct t_thr *th = arg;
	struct hx_test *t = th->t;
	struct eng e;
	size_t sizes[32];
	int n, i, me = hx_w.rank, prev = hx_ring_prev(), ok;
	char label[32];

	snprintf(label, sizeof(label), "threads[%d]", th->id);
	eng_init(&e, t, label);
	e.yield_after = 8;
	/* Listen concurrently, let the main thread exchange, then connect concurrently. */
	ok = eng_links_listen(&e, th->ls, th->lo, th->hi) == 0;
	pthread_barrier_wait(th->bar);
	pthread_barrier_wait(th->bar);
	if (ok && *th->exchanged && eng_links_establish(&e, th->ls, th->lo, th->hi) == 0) {
		struct eng_conn *sc = NULL, *rc = NULL;

		for (i = th->lo; i < th->hi; i++) {
			if (th->ls->v[i].src == me)
				sc = th->ls->v[i].send;
			if (th->ls->v[i].dst == me)
				rc = th->ls->v[i].recv;
		}
		n = t_size_list(sizes, 32);
		for (i = 0; i < n && !hx_failed(t); i++) {
			size_t sz = sizes[i];

			if (sz > (4u << 20) || sz > hx_w.dev[me][0].max_p2p)
				break;
			if (t_xfer(&e, sc, rc, sz, sz + (size_t)th->id * 8,
				   hx_seed(T_SEED_THREADS, (uint64_t)me, (uint64_t)th->id, sz),
				   hx_seed(T_SEED_THREADS, (uint64_t)prev, (uint64_t)th->id, sz),
				   1000 * th->id + me, 1000 * th->id + prev) < 0)
				break;
			th->bytes += (long)sz;
		}
	}
	eng_links_close(&e, th->ls, th->lo, th->hi);
	eng_free(&e);
	return NULL;
}

void t_threads(struct hx_test *t)
{
	struct eng_links ls = {0};
	struct t_thr th[HX_MAX_THREADS];
	pthread_t tid[HX_MAX_THREADS];
	pthread_barrier_t bar;
	struct eng e;
	int nt = hx_opt.threads, i, r, n = hx_w.nranks, started = 0, exchanged = 0;
	long bytes = 0;

	eng_init(&e, t, "threads");
	/* Thread i owns links [i*n, (i+1)*n): one ring per thread. */
	for (i = 0; i < nt; i++)
		for (r = 0; r < n; r++)
			eng_links_add(&ls, r, 0, (r + 1) % n, 0, -1, 0);
	pthread_barrier_init(&bar, NULL, (unsigned)nt + 1);
	for (i = 0; i < nt; i++) {
		th[i] = (struct t_thr){.t = t, .ls = &ls, .bar = &bar, .exchanged = &exchanged,
				       .id = i, .lo = i * n, .hi = (i + 1) * n};
		if (pthread_create(&tid[i], NULL, t_thread_main, &th[i]) != 0) {
			hx_fail(t, "pthread_create failed for thread %d: %s", i, strerror(errno));
			break;
		}
		started++;
	}
	if (started < nt) {
		/* Never leave threads waiting on a barrier that cannot fill. */
		fprintf(stderr, "[rank %d] harness: cannot start %d threads\n", hx_w.rank, nt);
		exit(1);
	}
	pthread_barrier_wait(&bar);
	exchanged = eng_links_exchange(&e, &ls) == 0;
	pthread_barrier_wait(&bar);
	for (i = 0; i < nt; i++) {
		pthread_join(tid[i], NULL);
		bytes += th[i].bytes;
	}
	pthread_barrier_destroy(&bar);
	js_int(t->metrics, "threads", nt);
	js_int(t->metrics, "bytes", bytes);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- reload ----------------------------------------------------------------------------- */

void t_reload(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	char err[1024], path[sizeof(pl.path)];
	int v = pl.version, ndev = 0, me = hx_w.rank, prev = hx_ring_prev();
	ncclResult_t rc;

	snprintf(path, sizeof(path), "%s", pl.path);
	if (t_unload_plugin(t) < 0 && !pl.dl)
		return;
	/* Left loaded (threads still running): init again in place, as NCCL would for its
	 * next communicator, so later tests still have a plugin. */
	if (!pl.dl && pl_load(path, v, err, sizeof(err)) < 0) {
		hx_fail(t, "second load: %s", err);
		return;
	}
	rc = pl_init();
	if (rc != ncclSuccess) {
		hx_fail(t, "init after dlclose + dlopen returned %s", hx_rc_str(rc));
		return;
	}
	rc = pl_devices(&ndev);
	if (rc != ncclSuccess || (ndev < HX_MAX_DEVS ? ndev : HX_MAX_DEVS) != hx_w.ndev[me]) {
		hx_fail(t, "devices() after reload returned %s, ndev %d (was %d)", hx_rc_str(rc), ndev,
			hx_w.ndev[me]);
		return;
	}
	eng_init(&e, t, "reload");
	if (t_ring_open(&e, &ls) == 0)
		t_xfer(&e, t_ring_send(&ls), t_ring_recv(&ls), 1u << 20, 1u << 20,
		       hx_seed(T_SEED_RELOAD, (uint64_t)me, 0, 0),
		       hx_seed(T_SEED_RELOAD, (uint64_t)prev, 0, 0), me, prev);
	eng_links_close(&e, &ls, 0, ls.n);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- mr ---------------------------------------------------------------------------------- */

void t_mr(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc, *rc;
	size_t len = 1u << 20;
	char *buf = NULL;
	void *mh, *mh2, *mh3;
	int me = hx_w.rank, prev = hx_ring_prev(), fd;
	ncclResult_t r;

	eng_init(&e, t, "mr");
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	sc = t_ring_send(&ls);
	rc = t_ring_recv(&ls);
	buf = hx_alloc(len);
	memset(buf, 0, len);

	/* Overlapping registrations of one buffer, on one comm and on two: NCCL does both. */
	if (eng_reg(sc, buf, len, &mh) == 0 && eng_reg(sc, buf + 4096, 65536, &mh2) == 0 &&
	    eng_reg(rc, buf, len, &mh3) == 0) {
		eng_dereg(sc, mh2);
		eng_dereg(sc, mh);
		eng_dereg(rc, mh3);
	}

	/* Device memory on a host pointer: must not crash; the code is recorded. */
	mh = NULL;
	r = pl_reg_mr(sc->comm, buf, len, NCCL_PTR_CUDA, &mh);
	js_str(t->metrics, "regMr_cuda_on_host", hx_rc_str(r));
	if (r == ncclSuccess) {
		hx_note(t, "regMr(NCCL_PTR_CUDA) on host memory returned ncclSuccess");
		pl_dereg_mr(sc->comm, mh);
	}
	if (pl_has_dmabuf()) {
		fd = memfd_create("harness-dmabuf", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, (off_t)len) == 0) {
			mh = NULL;
			r = pl_reg_mr_dmabuf(sc->comm, buf, len, NCCL_PTR_CUDA, 0, fd, &mh);
			js_str(t->metrics, "regMrDmaBuf_memfd", hx_rc_str(r));
			if (r == ncclSuccess)
				pl_dereg_mr(sc->comm, mh);
		}
		if (fd >= 0)
			close(fd); /* NCCL closes the fd right after the call too */
	} else {
		js_null(t->metrics, "regMrDmaBuf_memfd");
	}
	/* The comms still carry data after all that. */
	t_xfer(&e, sc, rc, 65536, 65536, hx_seed(T_SEED_MR, (uint64_t)me, 0, 0),
	       hx_seed(T_SEED_MR, (uint64_t)prev, 0, 0), me, prev);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	hx_free(buf);
	eng_links_free(&ls);
	eng_free(&e);
}
