/* SPDX-License-Identifier: MIT */
/*
 * flows.c - the flows test (--flows SPEC): given rank pairs stream at
 * once, each a fixed number of bytes, and every receiver reports its flow's
 * throughput and the completion time of every message. With --flow-window 1
 * each flow has one message in flight: its completion times are the
 * transport's per-message latency (docs/scale-out.md measures hosts so).
 *
 * What it is for: contention and oversubscription on a modelled fabric. The
 * flows of a phase start together after a barrier, each with up to
 * --flow-window messages in flight (default 8: NCCL_STEPS), so every flow is
 * greedy and the fabric's FIFO reservation decides the shares. Phases run one after another,
 * each over connections of its own.
 *
 * Connections are set up one at a time, in the order the flows are listed,
 * with a barrier after each: the daemon then numbers them the same way every
 * run, and with the same message sizes and counts per connection the model's
 * random decisions (keyed by seed, link, connection, message, packet) are the
 * same too. That is what the determinism tests rely on.
 *
 * Data: each of a sender's window's buffers is filled once with its own
 * pattern; a message carries its index in its first 8 bytes and the pattern
 * of buffer (index mod the window) after them. A receiver compares every byte
 * with memcmp against its copy of the patterns. A message that differs fails
 * the test, or with --corrupt-ok is counted and listed (index, first
 * differing byte) in the metrics.
 *
 * Metrics, one entry per flow and role (each rank lists the flows it is in):
 * "gbit_s" is payload bits over the receiver's time from the start to the
 * last message; "steady_gbit_s" leaves the first window out (the messages
 * after the first window, over the time after the window's last completed), so
 * who got onto a shared link first does not count. "done_us" lists the
 * receiver's completion time of every message, from the start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/harness/harness.h"

#define F_CORRUPT_KEEP 64 /* corrupted messages listed per flow */

struct f_flow {
	int idx;  /* in hx_flows */
	int send; /* 1: this rank sends it, 0: receives it */
	struct eng_conn *c;
	char *buf[HX_FLOW_WINDOW_MAX], *want[HX_FLOW_WINDOW_MAX];
	void *mh[HX_FLOW_WINDOW_MAX];
	struct eng_op op[HX_FLOW_WINDOW_MAX];
	long n, posted, done;
	double *t_done; /* per message, seconds from the start */
	long ncorrupt;
	long corrupt[F_CORRUPT_KEEP][2]; /* message, first differing byte */
};

static uint64_t f_seed(int flow, int slot)
{
	return hx_seed(T_SEED_FLOWS, (uint64_t)flow, (uint64_t)slot, hx_opt.comm_id);
}

static long f_messages(void)
{
	return (long)((hx_opt.flow_bytes + hx_opt.flow_msg - 1) / hx_opt.flow_msg);
}

static int f_setup(struct f_flow *f)
{
	size_t size = hx_opt.flow_msg, reg = size < 4096 ? 4096 : size;
	int k;

	f->n = f_messages();
	f->t_done = calloc((size_t)f->n, sizeof(double));
	if (!f->t_done)
		exit(1);
	for (k = 0; k < hx_opt.flow_window; k++) {
		f->buf[k] = hx_alloc(reg);
		if (f->send) {
			hx_fill(f->buf[k], size, f_seed(f->idx, k));
		} else {
			f->want[k] = hx_alloc(reg);
			hx_fill(f->want[k], size, f_seed(f->idx, k));
			memset(f->buf[k], HX_POISON_BYTE, size);
		}
		if (eng_reg(f->c, f->buf[k], reg, &f->mh[k]) < 0)
			return -1;
	}
	return 0;
}

/* Deregisters the buffers (when the comm is still open: dereg) and frees them. */
static void f_teardown(struct f_flow *f, int dereg)
{
	int k;

	for (k = 0; k < hx_opt.flow_window; k++) {
		if (dereg && f->mh[k])
			eng_dereg(f->c, f->mh[k]);
		hx_free(f->buf[k]);
		hx_free(f->want[k]);
	}
	free(f->t_done);
}

/* Checks message m as received into buffer k: 0, or -1 (reported, unless --corrupt-ok). */
static int f_check(struct hx_test *t, struct f_flow *f, long m, int k)
{
	const struct hx_flow *fl = &hx_flows[f->idx];
	const struct eng_op *op = &f->op[k];
	size_t size = hx_opt.flow_msg, off = SIZE_MAX, i, head = size < 8 ? size : 8;
	uint64_t stamp = (uint64_t)m;

	if (op->sizes_known && (size_t)op->sizes[0] != size) {
		hx_fail(t, "flow %d (rank %d -> %d), message %ld: test reported %d bytes, %zu were "
			"sent", f->idx, fl->src, fl->dst, m, op->sizes[0], size);
		return -1;
	}
	if (memcmp(f->buf[k], &stamp, head) != 0) {
		for (i = 0; i < head && off == SIZE_MAX; i++)
			if (((const uint8_t *)f->buf[k])[i] != ((const uint8_t *)&stamp)[i])
				off = i;
	} else if (size > head && memcmp(f->buf[k] + head, f->want[k] + head, size - head) != 0) {
		for (i = head; i < size && off == SIZE_MAX; i++)
			if (f->buf[k][i] != f->want[k][i])
				off = i;
	}
	if (off == SIZE_MAX)
		return 0;
	if (!hx_opt.corrupt_ok) {
		hx_fail(t, "flow %d (rank %d -> %d), message %ld: byte %zu of %zu differs", f->idx,
			fl->src, fl->dst, m, off, size);
		return -1;
	}
	if (f->ncorrupt < F_CORRUPT_KEEP) {
		f->corrupt[f->ncorrupt][0] = m;
		f->corrupt[f->ncorrupt][1] = (long)off;
	}
	f->ncorrupt++;
	return 0;
}

/* Posts what the window allows: the number posted, or -1. */
static int f_post(struct f_flow *f)
{
	int moved = 0;

	while (f->posted < f->n && f->posted - f->done < hx_opt.flow_window) {
		int k = (int)(f->posted % hx_opt.flow_window), tag = f->idx, r;
		size_t size = hx_opt.flow_msg;
		void *buf = f->buf[k];

		if (f->send) {
			uint64_t stamp = (uint64_t)f->posted;

			memcpy(f->buf[k], &stamp, size < 8 ? size : 8);
			r = eng_isend(f->c, buf, size, tag, f->mh[k], &f->op[k]);
		} else {
			r = eng_irecv(f->c, 1, &buf, &size, &tag, &f->mh[k], &f->op[k]);
		}
		if (r < 0)
			return -1;
		if (r)
			break;
		f->posted++;
		moved++;
	}
	return moved;
}

/* Harvests completions in order: the number, or -1. */
static int f_reap(struct hx_test *t, struct f_flow *f, double t0)
{
	int moved = 0;

	while (f->done < f->posted) {
		int k = (int)(f->done % hx_opt.flow_window);
		const struct eng_op *op = &f->op[k];

		if (op->state == ENG_OP_PENDING)
			break;
		if (op->state != ENG_OP_DONE)
			return -1;
		f->t_done[f->done] = op->t_done - t0;
		if (!f->send) {
			if (f_check(t, f, f->done, k) < 0)
				return -1;
			memset(f->buf[k], HX_POISON_BYTE, hx_opt.flow_msg < 8 ? hx_opt.flow_msg : 8);
		}
		f->done++;
		moved++;
	}
	return moved;
}

/* The steady rate (docs above: the messages after the first window, over the time after the
 * window's last completed) in Gb/s, or -1 where there is none (too few messages). */
static double f_steady_gbit_s(const struct f_flow *f)
{
	int w = hx_opt.flow_window;
	double last = f->n ? f->t_done[f->n - 1] : 0;

	if (f->n <= w || last <= f->t_done[w - 1])
		return -1;
	return (double)hx_opt.flow_msg * (double)(f->n - w) * 8 / (last - f->t_done[w - 1]) / 1e9;
}

static void f_metrics(struct hx_test *t, const struct f_flow *f, int phase)
{
	const struct hx_flow *fl = &hx_flows[f->idx];
	double bytes = (double)hx_opt.flow_msg * (double)f->n, last = f->n ? f->t_done[f->n - 1] : 0;
	long i;

	js_obj(t->metrics, NULL);
	js_int(t->metrics, "flow", f->idx);
	js_int(t->metrics, "phase", phase);
	js_int(t->metrics, "src", fl->src);
	js_int(t->metrics, "dst", fl->dst);
	js_str(t->metrics, "role", f->send ? "send" : "recv");
	js_int(t->metrics, "msgs", f->n);
	js_int(t->metrics, "msg_bytes", (long long)hx_opt.flow_msg);
	js_num(t->metrics, "bytes", bytes);
	js_num(t->metrics, "seconds", last);
	js_num(t->metrics, "gbit_s", last > 0 ? bytes * 8 / last / 1e9 : 0);
	double steady = f_steady_gbit_s(f);
	if (steady >= 0)
		js_num(t->metrics, "steady_gbit_s", steady);
	else
		js_null(t->metrics, "steady_gbit_s");
	if (!f->send) {
		js_int(t->metrics, "corrupt_msgs", f->ncorrupt);
		js_arr(t->metrics, "corrupt");
		for (i = 0; i < f->ncorrupt && i < F_CORRUPT_KEEP; i++) {
			js_arr(t->metrics, NULL);
			js_int(t->metrics, NULL, f->corrupt[i][0]);
			js_int(t->metrics, NULL, f->corrupt[i][1]);
			js_end_arr(t->metrics);
		}
		js_end_arr(t->metrics);
		js_arr(t->metrics, "done_us");
		for (i = 0; i < f->n; i++)
			js_num(t->metrics, NULL, f->t_done[i] * 1e6);
		js_end_arr(t->metrics);
	}
	js_end_obj(t->metrics);
}

/* Rank 0 prints every flow's receiver figures, gathered: one line per phase. */
static int f_print(struct hx_test *t, struct f_flow *mine, int nmine, int phase, int lo, int hi)
{
	int nf = hi - lo, i, r, me = hx_w.rank;
	double *g = calloc((size_t)hx_w.nranks * (size_t)nf * 2, sizeof(double));

	if (!g)
		exit(1);
	for (i = 0; i < nmine; i++) {
		const struct f_flow *f = &mine[i];
		double last = f->n ? f->t_done[f->n - 1] : 0;

		if (f->send || last <= 0)
			continue;
		g[((size_t)me * (size_t)nf + (size_t)(f->idx - lo)) * 2] =
			(double)hx_opt.flow_msg * (double)f->n * 8 / last / 1e9;
		double steady = f_steady_gbit_s(f);
		if (steady >= 0)
			g[((size_t)me * (size_t)nf + (size_t)(f->idx - lo)) * 2 + 1] = steady;
	}
	if (oob_allgather(g, (size_t)nf * 2 * sizeof(double)) < 0) {
		t_aborted(t, "the flows' summary");
		free(g);
		return -1;
	}
	if (me == 0) {
		printf("flows: phase %d, %d flow(s) of %zu x %zu B:", phase, nf, (size_t)f_messages(),
		       hx_opt.flow_msg);
		for (i = 0; i < nf; i++) {
			double a = 0, b = 0;

			for (r = 0; r < hx_w.nranks; r++) {
				a += g[((size_t)r * (size_t)nf + (size_t)i) * 2];
				b += g[((size_t)r * (size_t)nf + (size_t)i) * 2 + 1];
			}
			printf("%s %d>%d %.3f Gb/s (steady %.3f)", i ? "," : "", hx_flows[lo + i].src,
			       hx_flows[lo + i].dst, a, b);
		}
		printf("\n");
		fflush(stdout);
	}
	free(g);
	return 0;
}

/* One phase: flows hx_flows[lo, hi). 0, or -1 (reported). */
static int f_phase(struct hx_test *t, struct eng *e, int phase, int lo, int hi)
{
	struct eng_links ls = {0};
	struct f_flow *mine = calloc((size_t)(hi - lo), sizeof(*mine));
	int i, nmine = 0, me = hx_w.rank, ret = -1, left, why;
	double t0;

	if (!mine)
		exit(1);
	for (i = lo; i < hi; i++)
		eng_links_add(&ls, hx_flows[i].src, 0, hx_flows[i].dst, 0, -1, 0);
	if (eng_links_listen(e, &ls, 0, ls.n) < 0 || eng_links_exchange(e, &ls) < 0)
		goto out;
	/* One connection at a time, in flow order: the daemon numbers them the same every run. */
	for (i = 0; i < ls.n; i++)
		if (eng_links_establish(e, &ls, i, i + 1) < 0 || t_barrier(t) < 0)
			goto out;
	for (i = lo; i < hi; i++) {
		struct eng_link *l = &ls.v[i - lo];
		struct f_flow *f;

		if (l->src != me && l->dst != me)
			continue;
		f = &mine[nmine++];
		f->idx = i;
		f->send = l->src == me;
		f->c = f->send ? l->send : l->recv;
		if (f_setup(f) < 0)
			goto out;
	}
	if (t_barrier(t) < 0)
		goto out;
	t0 = hx_now();
	for (;;) {
		int moved = 0, r;

		for (i = 0; i < nmine; i++) {
			if ((r = f_post(&mine[i])) < 0)
				goto out;
			moved += r;
		}
		moved += eng_progress(e);
		for (i = 0, left = 0; i < nmine; i++) {
			if ((r = f_reap(t, &mine[i], t0)) < 0)
				goto out;
			moved += r;
			left += mine[i].done < mine[i].n;
		}
		if (!left)
			break;
		why = eng_expired(e);
		if (why) {
			for (i = 0; i < nmine && !hx_failed(t); i++)
				if (mine[i].done < mine[i].n)
					hx_fail(t, "flow %d (rank %d -> %d): %s after %ld of %ld "
						"messages", mine[i].idx, hx_flows[mine[i].idx].src,
						hx_flows[mine[i].idx].dst,
						why == 2 ? "aborted" : "timed out", mine[i].done,
						mine[i].n);
			goto out;
		}
		eng_idle(e, moved);
	}
	for (i = 0; i < nmine; i++)
		f_metrics(t, &mine[i], phase);
	if (f_print(t, mine, nmine, phase, lo, hi) < 0 || t_barrier(t) < 0)
		goto out;
	ret = 0;
out:
	if (ret < 0 && !hx_failed(t))
		hx_fail(t, "phase %d failed", phase);
	/* After a failure requests may still be pending on the buffers: close the comms (which
	 * deregisters what is left) before freeing them. */
	for (i = 0; i < nmine && ret == 0; i++)
		f_teardown(&mine[i], 1);
	eng_links_close(e, &ls, 0, ls.n);
	for (i = 0; i < nmine && ret < 0; i++)
		f_teardown(&mine[i], 0);
	eng_links_free(&ls);
	free(mine);
	return ret;
}

void t_flows(struct hx_test *t)
{
	struct eng e;
	int p, lo = 0, hi;

	eng_init(&e, t, "flows");
	js_int(t->metrics, "window", hx_opt.flow_window);
	js_int(t->metrics, "msg_bytes", (long long)hx_opt.flow_msg);
	js_int(t->metrics, "msgs_per_flow", f_messages());
	js_int(t->metrics, "phases", hx_nphases);
	js_arr(t->metrics, "flows");
	for (p = 0; p < hx_nphases && !hx_failed(t); p++) {
		for (hi = lo; hi < hx_nflows && hx_flows[hi].phase == p; hi++)
			;
		if (f_phase(t, &e, p, lo, hi) < 0)
			break;
		lo = hi;
	}
	js_end_arr(t->metrics);
	if (!hx_failed(t))
		hx_note(t, "%d flow(s) in %d phase(s), %ld x %zu B each", hx_nflows, hx_nphases,
			f_messages(), hx_opt.flow_msg);
	eng_free(&e);
}
