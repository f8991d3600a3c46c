/* SPDX-License-Identifier: MIT */
/*
 * destructive.c - the destructive tests. Each one provokes a failure and
 * passes iff the plugin reports it the way the brief expects:
 *
 *   truncate      4096 B sent into a 1024 B receive: ncclInvalidUsage on both
 *                 sides, and a WARN on the receiver that names both sizes.
 *   peer_death    rank N-1 _exit(0)s with operations posted: every other rank
 *                 sees ncclRemoteError on a pending operation within --bound.
 *   daemon_death  traffic flows, READY is printed, an outside party kills the
 *                 daemon: every rank sees ncclSystemError before --timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "tools/harness/harness.h"

/* ---- truncate ------------------------------------------------------------------- */

#define T_TR_SEND 4096
#define T_TR_RECV 1024

void t_truncate(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_op op;
	void *buf = NULL, *mh = NULL;
	int me = hx_w.rank, r;
	double t_start;

	eng_init(&e, t, "truncate");
	memset(&op, 0, sizeof(op));
	eng_links_add(&ls, 0, 0, 1, 0, -1, 0);
	if (eng_links_open(&e, &ls) < 0)
		goto out;
	if (me > 1) {
		hx_note(t, "not involved (ranks 0 and 1 only)");
		goto out;
	}
	e.expect_errors = 1;
	e.quiet_timeout = 1;
	t_start = hx_now();
	if (me == 1) {
		struct eng_conn *rc = eng_link_find(&ls, 0, 1, 0)->recv;
		char warn[512];

		buf = hx_alloc(T_TR_RECV);
		memset(buf, HX_POISON_BYTE, T_TR_RECV);
		if (eng_reg(rc, buf, 4096, &mh) < 0)
			goto out;
		op.want_sizes = 1;
		r = eng_recv1(rc, buf, T_TR_RECV, 0, mh, &op);
		if (r == 0)
			eng_wait(&e, &op);
		js_str(t->metrics, "receiver", op.state == ENG_OP_DONE ? "completed" : hx_rc_str(op.err));
		if (op.state == ENG_OP_DONE)
			hx_fail(t, "the %d B receive completed (%d B reported) although %d B were sent",
				T_TR_RECV, op.sizes_known ? op.sizes[0] : -1, T_TR_SEND);
		else if (op.err != ncclInvalidUsage)
			hx_fail(t, "receiver got %s after %.2f s, want ncclInvalidUsage",
				hx_rc_str(op.err), hx_now() - t_start);
		if (!pl_warn_find(t->warn_mark, "4096", "1024", warn, sizeof(warn))) {
			pl_warn_last(warn, sizeof(warn));
			hx_fail(t, "no WARN names both 4096 and 1024 (%d WARNs during the test; last: %s)",
				pl_warn_count() - t->warn_mark, warn);
		} else {
			js_str(t->metrics, "warn", warn);
		}
	} else {
		struct eng_conn *sc = eng_link_find(&ls, 0, 1, 0)->send;

		buf = hx_alloc(T_TR_SEND);
		hx_fill(buf, T_TR_SEND, hx_seed(T_SEED_FAULT, 0, T_TR_SEND, 0));
		if (eng_reg(sc, buf, T_TR_SEND, &mh) < 0)
			goto out;
		r = eng_send(sc, buf, T_TR_SEND, 0, mh, &op);
		if (r == 0)
			eng_wait(&e, &op);
		js_str(t->metrics, "sender", op.state == ENG_OP_DONE ? "completed" : hx_rc_str(op.err));
		if (op.state == ENG_OP_DONE)
			hx_fail(t, "the %d B send into a %d B receive completed", T_TR_SEND, T_TR_RECV);
		else if (op.err != ncclInvalidUsage)
			hx_fail(t, "sender got %s after %.2f s, want ncclInvalidUsage (from isend or test)",
				hx_rc_str(op.err), hx_now() - t_start);
	}
	js_num(t->metrics, "seconds", hx_now() - t_start);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	hx_free(buf);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- peer_death ------------------------------------------------------------------- */

#define T_PD_SIZE (64u << 10)

void t_peer_death(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	int me = hx_w.rank, n = hx_w.nranks, victim = n - 1, r, k;
	struct eng_op ops[3];
	void *bufs[3] = {0}, *mhs[3] = {0};
	int posted[3] = {0};
	double t0, t_first = 0, t_bound;
	int first_err = -1, first_op = -1;

	eng_init(&e, t, "peer_death");
	memset(ops, 0, sizeof(ops));
	for (r = 0; r < victim; r++) {
		eng_links_add(&ls, r, 0, victim, 0, -1, 0);
		eng_links_add(&ls, victim, 0, r, 0, -1, 0);
	}
	if (eng_links_open(&e, &ls) < 0)
		goto out;
	/* Some traffic first, so the connections are known to work. */
	for (r = 0; r < victim && !hx_failed(t); r++) {
		if (me != victim && me != r)
			continue;
		{
			int peer = me == victim ? r : victim;

			t_xfer(&e, eng_link_find(&ls, me, peer, 0)->send,
			       eng_link_find(&ls, peer, me, 0)->recv, 4096, 4096,
			       hx_seed(T_SEED_FAULT, (uint64_t)me, (uint64_t)peer, 1),
			       hx_seed(T_SEED_FAULT, (uint64_t)peer, (uint64_t)me, 1), me, peer);
		}
	}
	if (hx_failed(t))
		goto out;
	e.expect_errors = 1;
	if (me == victim) {
		/* Post a receive and a send to every peer, nothing of which can complete... */
		for (r = 0; r < victim; r++) {
			struct eng_conn *sc = eng_link_find(&ls, me, r, 0)->send;
			struct eng_conn *rc = eng_link_find(&ls, r, me, 0)->recv;
			struct eng_op *o = calloc(2, sizeof(*o));
			void *b = hx_alloc(T_PD_SIZE), *m1 = NULL, *m2 = NULL;

			if (!o)
				exit(1);
			memset(b, 0, T_PD_SIZE);
			if (eng_reg(rc, b, T_PD_SIZE, &m1) == 0)
				eng_irecv(rc, 1, &b, &(size_t){T_PD_SIZE}, &r, &m1, &o[0]);
			if (eng_reg(sc, b, T_PD_SIZE, &m2) == 0)
				eng_isend(sc, b, T_PD_SIZE, me, m2, &o[1]);
		}
		oob_barrier();
		/*
		 * ...leave a forked child behind (as a DataLoader worker would be), holding
		 * copies of every descriptor the plugin had, for longer than the bound: the
		 * peers must still learn of the death in time...
		 */
		fflush(stdout);
		fflush(stderr);
		if (fork() == 0) {
			/* Not the harness's own pipes and OOB socket: only what the plugin had. */
			int dn = open("/dev/null", O_RDWR);
			for (int fd = 0; fd < 3 && dn >= 0; fd++)
				dup2(dn, fd);
			oob_child_detach();
			alarm((unsigned)(hx_opt.bound * 3 + 5)); /* never outlives the run for long */
			hx_sleep(hx_opt.bound * 2 + 1);
			_exit(0);
		}
		/* ...and die without closing anything. */
		oob_send(OOB_NOTE, OOB_NOTE_EXITING, NULL, 0);
		_exit(0);
	}
	if (t_barrier(t) < 0)
		goto out;
	t0 = hx_now();
	t_bound = t0 + hx_opt.bound;
	e.deadline = t_bound < e.deadline ? t_bound : e.deadline;
	for (k = 0; k < 3; k++) {
		bufs[k] = hx_alloc(T_PD_SIZE);
		memset(bufs[k], HX_POISON_BYTE, T_PD_SIZE);
	}
	{
		struct eng_conn *rc = eng_link_find(&ls, victim, me, 0)->recv;
		struct eng_conn *sc = eng_link_find(&ls, me, victim, 0)->send;

		if (eng_reg(rc, bufs[0], T_PD_SIZE, &mhs[0]) < 0 ||
		    eng_reg(rc, bufs[1], T_PD_SIZE, &mhs[1]) < 0 ||
		    eng_reg(sc, bufs[2], T_PD_SIZE, &mhs[2]) < 0)
			goto out;
		/* Two receives (at most one can match the victim's last send) and a send. */
		for (;;) {
			int moved = 0, why;

			for (k = 0; k < 3; k++) {
				if (posted[k])
					continue;
				if (k < 2)
					r = eng_irecv(rc, 1, &bufs[k], &(size_t){T_PD_SIZE}, &victim,
						      &mhs[k], &ops[k]);
				else
					r = eng_isend(sc, bufs[k], T_PD_SIZE, me, mhs[k], &ops[k]);
				if (r <= 0) {
					posted[k] = 1;
					moved++;
				}
			}
			moved += eng_progress(&e);
			for (k = 0; k < 3 && first_op < 0; k++) {
				if (posted[k] && ops[k].state == ENG_OP_FAILED) {
					first_op = k;
					first_err = ops[k].err;
					t_first = hx_now();
				}
			}
			if (first_op >= 0)
				break;
			why = eng_expired(&e);
			if (why) {
				if (why == 2)
					t_aborted(t, "the wait for the failure");
				else
					hx_fail(t, "no operation failed within --bound %.1f s after rank %d "
						"died (receives: %s/%s, send: %s)", hx_opt.bound, victim,
						posted[0] ? (ops[0].state == ENG_OP_DONE ? "done" : "pending")
							  : "would-block",
						posted[1] ? (ops[1].state == ENG_OP_DONE ? "done" : "pending")
							  : "would-block",
						posted[2] ? (ops[2].state == ENG_OP_DONE ? "done" : "pending")
							  : "would-block");
				break;
			}
			eng_idle(&e, moved);
		}
	}
	if (first_op >= 0) {
		static const char *what[3] = {"first irecv", "second irecv", "isend"};

		js_num(t->metrics, "detect_seconds", t_first - t0);
		js_str(t->metrics, "code", hx_rc_str(first_err));
		js_str(t->metrics, "op", what[first_op]);
		if (first_err != ncclRemoteError)
			hx_fail(t, "the %s to the dead rank %d failed with %s after %.2f s, want "
				"ncclRemoteError", what[first_op], victim, hx_rc_str(first_err),
				t_first - t0);
	}
out:
	{
		double t_c = hx_now();

		/* Closing with requests in flight to a dead peer: must return, and succeed. */
		e.deadline = t->deadline;
		eng_links_close(&e, &ls, 0, ls.n);
		js_num(t->metrics, "close_seconds", hx_now() - t_c);
	}
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- daemon_death ------------------------------------------------------------------ */

#define T_DD_SIZE 4096
#define T_DD_READY_ROUNDS 20

void t_daemon_death(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc, *rc;
	void *sbuf = NULL, *rbuf = NULL, *smh = NULL, *rmh = NULL;
	int me = hx_w.rank, prev = hx_ring_prev(), err = -1, ready = 0;
	long rounds = 0;
	double t_ready = 0, t_fail = 0, *fails = NULL, first;
	struct eng_op sop, rop; /* function scope: still queued after a failure */

	eng_init(&e, t, "daemon_death");
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	sc = t_ring_send(&ls);
	rc = t_ring_recv(&ls);
	sbuf = hx_alloc(T_DD_SIZE);
	rbuf = hx_alloc(T_DD_SIZE);
	if (eng_reg(sc, sbuf, T_DD_SIZE, &smh) < 0 || eng_reg(rc, rbuf, T_DD_SIZE, &rmh) < 0)
		goto out;
	e.expect_errors = 1;
	e.quiet_timeout = 1;
	/* A ring of small transfers, until the plugin reports the daemon gone. */
	while (err < 0) {
		int r;

		memset(&sop, 0, sizeof(sop));
		memset(&rop, 0, sizeof(rop));
		hx_fill(sbuf, T_DD_SIZE, hx_seed(T_SEED_FAULT, (uint64_t)me, (uint64_t)rounds, 7));
		r = eng_recv1(rc, rbuf, T_DD_SIZE, prev, rmh, &rop);
		if (r == 0)
			r = eng_send(sc, sbuf, T_DD_SIZE, me, smh, &sop);
		if (r == 0)
			r = eng_wait(&e, &rop);
		if (r == 0)
			r = eng_wait(&e, &sop);
		if (r < 0) {
			int code = rop.state == ENG_OP_FAILED ? rop.err : sop.err;

			if (code == ENG_ETIMEDOUT || code == ENG_EABORTED || code == 0) {
				if (code != ENG_EABORTED) /* the engine said so already */
					hx_fail(t, "no operation failed within --timeout %.0f s (%ld rounds "
						"done, READY %s); the daemon must be killed after READY",
						hx_opt.timeout, rounds, ready ? "sent" : "not reached");
				break;
			}
			err = code;
			t_fail = hx_now();
			break;
		}
		rounds++;
		if (!ready && rounds >= T_DD_READY_ROUNDS) {
			oob_send(OOB_NOTE, OOB_NOTE_READY, NULL, 0);
			t_ready = hx_now();
			ready = 1;
		}
	}
	js_int(t->metrics, "rounds", rounds);
	if (err >= 0) {
		js_str(t->metrics, "code", hx_rc_str(err));
		if (ready)
			js_num(t->metrics, "seconds_after_ready", t_fail - t_ready);
		/* CLOCK_MONOTONIC, as a test's own clock: how long after it killed the daemon */
		js_num(t->metrics, "failed_at_s", t_fail);
		if (err != ncclSystemError)
			hx_fail(t, "first failure was %s after %ld rounds, want ncclSystemError",
				hx_rc_str(err), rounds);
	}
	/* Keep the comms open until every rank failed (a close would show as a remote error),
	 * then compare failure times: one monotonic clock for every process. */
	fails = calloc((size_t)hx_w.nranks, sizeof(double));
	if (!fails)
		exit(1);
	fails[me] = err >= 0 ? t_fail : 0;
	if (oob_allgather(fails, sizeof(double)) == 0) {
		int r;

		first = 0;
		for (r = 0; r < hx_w.nranks; r++)
			if (fails[r] > 0 && (first == 0 || fails[r] < first))
				first = fails[r];
		if (err >= 0 && first > 0)
			js_num(t->metrics, "seconds_after_first_failure", t_fail - first);
	}
	free(fails);
out:
	e.deadline = t->deadline;
	eng_links_close(&e, &ls, 0, ls.n);
	hx_free(sbuf);
	hx_free(rbuf);
	eng_links_free(&ls);
	eng_free(&e);
}
