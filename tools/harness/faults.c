/* SPDX-License-Identifier: MIT */
/*
 * faults.c - the faults test: traffic for a fault scenario to act on.
 *
 * Every rank sends --fault-msgs messages of --fault-bytes to the next rank
 * of the ring and receives as many from the previous one, up to FT_DEPTH in
 * flight each way, a post every --fault-gap-us at most. Each message has
 * its own pattern, checked byte for byte. The first error ends the rank's
 * posting; what is still in flight gets --bound to resolve. The metrics say
 * what the pytest side compares with the fault timeline: every message's
 * post and completion time (CLOCK_MONOTONIC seconds, the clock the daemon's
 * fabric time counts on), the first error, its time and WARN.
 *
 * --fault-expect ok: every message completes exact; error: this rank gets
 * ncclRemoteError and a WARN naming a fault (or the retries) first;
 * either: one of the two, data exact wherever a message completed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/harness/harness.h"

#define FT_DEPTH 4

struct ft_side {
	struct eng_op op[FT_DEPTH];
	long idx[FT_DEPTH]; /* message in the slot, -1 free */
	void *buf[FT_DEPTH], *mh[FT_DEPTH];
	long next, done;
	double *t_post, *t_done;
};

static void side_free(struct ft_side *s)
{
	free(s->t_post);
	free(s->t_done);
}

static void put_times(struct hx_test *t, const char *key, const struct ft_side *s, long n)
{
	js_arr(t->metrics, key);
	for (long i = 0; i < n; i++) {
		char v[64];
		if (!s->t_post[i])
			break;
		int len = snprintf(v, sizeof(v), "[%.9f,%.9f]", s->t_post[i], s->t_done[i]);
		js_raw(t->metrics, NULL, v, (size_t)len);
	}
	js_end_arr(t->metrics);
}

/* CLOCK_MONOTONIC seconds to the ns (js_num keeps fewer digits). */
static void put_secs(struct hx_test *t, const char *key, double v)
{
	char b[64];
	int n = snprintf(b, sizeof(b), "%.9f", v);
	js_raw(t->metrics, key, b, (size_t)n);
}

void t_faults(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct ft_side S = {0}, R = {0};
	const long n = hx_opt.fault_msgs;
	const size_t bytes = hx_opt.fault_bytes;
	int me = hx_w.rank, next = hx_ring_next(), prev = hx_ring_prev();
	int first_err = 0, first_op = -1;
	long first_idx = -1, wrong = 0;
	double t_err = 0, t_last_post = 0, t_start;

	eng_init(&e, t, "faults");
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	struct eng_conn *sc = t_ring_send(&ls), *rc = t_ring_recv(&ls);
	S.t_post = calloc((size_t)n, sizeof(double));
	S.t_done = calloc((size_t)n, sizeof(double));
	R.t_post = calloc((size_t)n, sizeof(double));
	R.t_done = calloc((size_t)n, sizeof(double));
	if (!S.t_post || !S.t_done || !R.t_post || !R.t_done) {
		hx_fail(t, "out of memory for %ld message times", n);
		goto out;
	}
	for (int k = 0; k < FT_DEPTH; k++) {
		S.idx[k] = R.idx[k] = -1;
		S.buf[k] = hx_alloc(bytes ? bytes : 1);
		R.buf[k] = hx_alloc(bytes ? bytes : 1);
		if (eng_reg(sc, S.buf[k], bytes ? bytes : 1, &S.mh[k]) < 0 ||
		    eng_reg(rc, R.buf[k], bytes ? bytes : 1, &R.mh[k]) < 0)
			goto out;
	}
	if (t_barrier(t) < 0)
		goto out;
	e.expect_errors = 1;
	e.quiet_timeout = 1;
	t_start = hx_now();
	for (;;) {
		int moved = 0;
		double now = hx_now();
		for (int k = 0; k < FT_DEPTH && !first_err; k++) {
			if (R.idx[k] < 0 && R.next < n) {
				memset(&R.op[k], 0, sizeof(R.op[k]));
				memset(R.buf[k], HX_POISON_BYTE, bytes);
				R.op[k].want_sizes = 1;
				int r = eng_irecv(rc, 1, &R.buf[k], &(size_t){bytes}, &prev, &R.mh[k],
						  &R.op[k]);
				if (r == 0) {
					R.idx[k] = R.next;
					R.t_post[R.next++] = R.op[k].t_post ? R.op[k].t_post : now;
					moved++;
				} else if (r < 0 && !first_err) {
					first_err = R.op[k].err, first_op = 1, first_idx = R.next, t_err = now;
				}
			}
			if (S.idx[k] < 0 && S.next < n && now - t_last_post >= hx_opt.fault_gap) {
				memset(&S.op[k], 0, sizeof(S.op[k]));
				hx_fill(S.buf[k], bytes, hx_seed(T_SEED_FAULTS, (uint64_t)me,
								 (uint64_t)S.next, bytes));
				int r = eng_isend(sc, S.buf[k], bytes, me, S.mh[k], &S.op[k]);
				if (r == 0) {
					S.idx[k] = S.next;
					S.t_post[S.next++] = S.op[k].t_post ? S.op[k].t_post : now;
					t_last_post = now;
					moved++;
				} else if (r < 0 && !first_err) {
					first_err = S.op[k].err, first_op = 0, first_idx = S.next, t_err = now;
				}
			}
		}
		moved += eng_progress(&e);
		now = hx_now();
		int pending = 0;
		for (int side = 0; side < 2; side++) {
			struct ft_side *x = side ? &R : &S;
			for (int k = 0; k < FT_DEPTH; k++) {
				long i = x->idx[k];
				if (i < 0)
					continue;
				struct eng_op *o = &x->op[k];
				if (o->state == ENG_OP_DONE) {
					x->t_done[i] = o->t_done ? o->t_done : now;
					x->done++;
					x->idx[k] = -1;
					if (side) {
						uint8_t want, got;
						size_t bad = hx_check(R.buf[k], bytes,
								      hx_seed(T_SEED_FAULTS, (uint64_t)prev,
									      (uint64_t)i, bytes),
								      &want, &got);
						if (bad != (size_t)-1 || (o->sizes_known && (size_t)o->sizes[0] != bytes)) {
							if (!wrong)
								hx_note(t, "message %ld from rank %d: byte %zu "
									   "is 0x%02x, want 0x%02x (size %d)",
									i, prev, bad, got, want,
									o->sizes_known ? o->sizes[0] : -1);
							wrong++;
						}
					}
				} else if (o->state == ENG_OP_FAILED) {
					if (!first_err) {
						first_err = o->err, first_op = side, first_idx = i;
						t_err = o->t_done ? o->t_done : now;
					}
					x->idx[k] = -1;
				} else {
					pending++;
				}
			}
		}
		if (!pending && ((S.done == n && R.done == n) || first_err))
			break;
		if (first_err && now - t_err > hx_opt.bound)
			break;
		if (eng_expired(&e))
			break;
		eng_idle(&e, moved);
	}
	/* what is left in flight after an error: abandoned, as NCCL's abort does */
	for (int side = 0; side < 2; side++) {
		struct ft_side *x = side ? &R : &S;
		for (int k = 0; k < FT_DEPTH; k++)
			if (x->idx[k] >= 0 && x->op[k].state == ENG_OP_PENDING)
				eng_cancel(&e, &x->op[k]);
	}

	js_int(t->metrics, "msgs", n);
	js_int(t->metrics, "bytes", (long long)bytes);
	js_int(t->metrics, "sent", S.done);
	js_int(t->metrics, "received", R.done);
	js_int(t->metrics, "wrong", wrong);
	put_secs(t, "t_start", t_start);
	put_secs(t, "t_end", hx_now());
	char warn[1024] = "";
	int fault_warn = pl_warn_find(t->warn_mark, "fault #", NULL, warn, sizeof(warn)) ||
			 pl_warn_find(t->warn_mark, "retry count exhausted", NULL, warn, sizeof(warn));
	if (first_err) {
		js_obj(t->metrics, "first_error");
		js_str(t->metrics, "rc", hx_rc_str(first_err));
		js_str(t->metrics, "op", first_op ? "recv" : "send");
		js_int(t->metrics, "msg", first_idx);
		put_secs(t, "t", t_err);
		if (!fault_warn)
			pl_warn_last(warn, sizeof(warn));
		js_str(t->metrics, "warn", warn);
		js_end_obj(t->metrics);
	} else {
		js_null(t->metrics, "first_error");
	}
	put_times(t, "send_times", &S, n);
	put_times(t, "recv_times", &R, n);

	if (wrong && !hx_opt.corrupt_ok)
		hx_fail(t, "%ld message(s) from rank %d arrived wrong", wrong, prev);
	if (!first_err && (S.done != n || R.done != n) && !hx_failed(t)) {
		if (oob_aborted()) /* another rank failed: not a timeout (issue 16) */
			t_aborted(t, "the message stream");
		else
			hx_fail(t,
				"timed out after %.1f s: %ld of %ld sends and %ld of %ld receives "
				"completed",
				hx_now() - t_start, S.done, n, R.done, n);
	}
	switch (hx_opt.fault_expect) {
	case HX_FE_OK:
		if (first_err)
			hx_fail(t, "message %ld's %s failed with %s (want every message exact): %s",
				first_idx, first_op ? "receive" : "send", hx_rc_str(first_err), warn);
		break;
	case HX_FE_ERROR:
		if (!first_err)
			hx_fail(t, "every message completed; want ncclRemoteError");
		/* fall through */
	case HX_FE_EITHER:
		if (first_err && first_err != ncclRemoteError)
			hx_fail(t, "%s failed with %s, want ncclRemoteError (%s)",
				first_op ? "a receive" : "a send", hx_rc_str(first_err), warn);
		else if (first_err && !fault_warn)
			hx_fail(t, "ncclRemoteError without a WARN naming the fault (last WARN: %s)", warn);
		break;
	}
	(void)next;
out:
	eng_links_close(&e, &ls, 0, ls.n); /* failed comms too: NCCL closes them after an error */
	side_free(&S);
	side_free(&R);
	eng_links_free(&ls);
	eng_free(&e);
}
