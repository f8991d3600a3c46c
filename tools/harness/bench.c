/* SPDX-License-Identifier: MIT */
/*
 * bench.c - --bench, on 2 ranks:
 *   (a) 8-byte ping-pong through the plugin: one-way latency = median round trip / 2, and the
 *       fastest round trip / 2;
 *   (b) the machine's floor: the two rank processes ping-pong one cache line in a
 *       MAP_SHARED page the parent mapped before fork, no plugin involved;
 *   (c) streaming bandwidth at 64 KiB, 1 MiB and 16 MiB, rank 0 -> rank 1, up to 8
 *       sends in flight (NCCL_STEPS), each size run for at least 0.5 s;
 *   (d) memcpy of the same sizes inside one process, buffers warmed: over 8 + 8 buffers
 *       cycled (the stream's working set) and over one cache-resident pair ("hot").
 * Waits busy-poll here (no sched_yield): this measures, it does not share the CPU.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/harness/harness.h"

#define B_WINDOW 8
#define B_MIN_SECONDS 0.5
#define B_LAT_SECONDS 1.0
#define B_LAT_MAX 200000
#define B_LAT_WARMUP 1000
#define B_STOP UINT64_MAX

static int b_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double b_median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), b_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* (a) 8-byte ping-pong. Rank 0 decides when to stop and tells rank 1 in the payload. */
static double b_latency(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, long *iters,
			double *fastest)
{
	uint64_t *sbuf = hx_alloc(8), *rbuf = hx_alloc(8), *rbuf2 = hx_alloc(8);
	void *smh = NULL, *rmh = NULL, *rmh2 = NULL;
	double *rt = calloc(B_LAT_MAX, sizeof(double)), t_end = 0, med = -1;
	int me = hx_w.rank, peer = 1 - me;
	long i, n = 0;

	if (!rt)
		exit(1);
	if (eng_reg(sc, sbuf, 4096, &smh) < 0 || eng_reg(rc, rbuf, 4096, &rmh) < 0 ||
	    eng_reg(rc, rbuf2, 4096, &rmh2) < 0)
		goto out;
	for (i = 0;; i++) {
		static struct eng_op sop, rop; /* outlive a failure: the comm still lists them */
		double t0;

		memset(&sop, 0, sizeof(sop));
		if (me == 0 || i == 0) /* the echo's rop is posted ahead, at the end of a round */
			memset(&rop, 0, sizeof(rop));
		if (me == 0) {
			if (i == B_LAT_WARMUP)
				t_end = hx_now() + B_LAT_SECONDS;
			*sbuf = (i > B_LAT_WARMUP && (hx_now() > t_end || n >= B_LAT_MAX)) ? B_STOP
											 : (uint64_t)i;
			t0 = hx_now();
			if (eng_recv1(rc, rbuf, 8, peer, rmh, &rop) < 0 ||
			    eng_send(sc, sbuf, 8, me, smh, &sop) < 0 || eng_wait(e, &rop) < 0 ||
			    eng_wait(e, &sop) < 0)
				goto out;
			if (i > B_LAT_WARMUP && *sbuf != B_STOP)
				rt[n++] = hx_now() - t0;
			if (*rbuf != *sbuf) {
				hx_fail(e->t, "latency: echo %llu for ping %llu",
					(unsigned long long)*rbuf, (unsigned long long)*sbuf);
				goto out;
			}
			if (*sbuf == B_STOP)
				break;
		} else {
			/*
			 * The echo: its receive for the next ping is posted before its send
			 * completes (the sender's ACK takes a one-way latency on a modelled
			 * fabric), as NCCL pre-posts receives; otherwise the next ping waits
			 * for a clear-to-send and the loop measures 1.5 round trips.
			 */
			if (i == 0 && eng_recv1(rc, rbuf, 8, peer, rmh, &rop) < 0)
				goto out;
			if (eng_wait(e, &rop) < 0)
				goto out;
			*sbuf = *rbuf;
			if (eng_send(sc, sbuf, 8, me, smh, &sop) < 0)
				goto out;
			if (*sbuf != B_STOP) {
				memset(&rop, 0, sizeof(rop));
				if (eng_recv1(rc, rbuf2, 8, peer, rmh2, &rop) < 0)
					goto out;
			}
			if (eng_wait(e, &sop) < 0)
				goto out;
			if (*sbuf == B_STOP)
				break;
			/* The next ping lands in rbuf2: swap the buffers. */
			uint64_t *tb = rbuf;
			void *tm = rmh;
			rbuf = rbuf2;
			rmh = rmh2;
			rbuf2 = tb;
			rmh2 = tm;
			continue;
		}
	}
	med = b_median(rt, (size_t)n) / 2;
	*fastest = n ? rt[0] / 2 : -1; /* sorted by b_median */
	*iters = n;
	eng_dereg(sc, smh);
	eng_dereg(rc, rmh);
	eng_dereg(rc, rmh2);
	hx_free(sbuf);
	hx_free(rbuf);
	hx_free(rbuf2);
out:
	free(rt);
	return med;
}

/* (b) one cache line, two processes: odd values are pings, even ones pongs. */
static double b_shm_floor(struct hx_test *t, long *iters)
{
	enum { BATCH = 64, NBATCH = 4000, WARM = 20000 };
	volatile uint64_t *line = &hx_shm->line;
	double *bt = calloc(NBATCH, sizeof(double)), med;
	uint64_t v = 0;
	long b, k, spins = 0;
	int me = hx_w.rank;

	if (!bt)
		exit(1);
	if (me == 0)
		*line = 0;
	if (t_barrier(t) < 0) {
		free(bt);
		return -1;
	}
	for (b = -WARM / BATCH; b < NBATCH; b++) {
		double t0 = hx_now();

		for (k = 0; k < BATCH; k++) {
			if (me == 0) {
				__atomic_store_n(line, v + 1, __ATOMIC_RELEASE);
				while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != v + 2)
					if (++spins % (1 << 20) == 0 && hx_now() > t->deadline)
						goto late;
			} else {
				while (__atomic_load_n(line, __ATOMIC_ACQUIRE) != v + 1)
					if (++spins % (1 << 20) == 0 && hx_now() > t->deadline)
						goto late;
				__atomic_store_n(line, v + 2, __ATOMIC_RELEASE);
			}
			v += 2;
		}
		if (b >= 0)
			bt[b] = (hx_now() - t0) / BATCH;
	}
	med = b_median(bt, NBATCH) / 2;
	*iters = (long)NBATCH * BATCH;
	free(bt);
	return me == 0 ? med : 0;
late:
	hx_fail(t, "shared-memory ping-pong stalled at round trip %llu (the peer is not running?)",
		(unsigned long long)(v / 2));
	free(bt);
	return -1;
}

/* (c) one streaming round of `count` messages; returns this side's seconds, or -1. */
static double b_stream_round(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, char **bufs,
			     void **mhs, size_t size, long count)
{
	static struct eng_op ops[B_WINDOW]; /* outlive a failure: the comm still lists them */
	long posted = 0, done = 0;
	int me = hx_w.rank, peer = 1 - me;
	double t0;

	memset(ops, 0, sizeof(ops));
	if (t_barrier(e->t) < 0)
		return -1;
	t0 = hx_now();
	while (done < count) {
		int moved = 0, why;

		while (posted < count && posted - done < B_WINDOW) {
			struct eng_op *op = &ops[posted % B_WINDOW];
			void *buf = bufs[posted % B_WINDOW];
			int r = me == 0 ? eng_isend(sc, buf, size, me, mhs[posted % B_WINDOW], op)
					: eng_irecv(rc, 1, &buf, &size, &peer, &mhs[posted % B_WINDOW], op);

			if (r < 0)
				return -1;
			if (r)
				break;
			posted++;
			moved++;
		}
		moved += eng_progress(e);
		while (done < posted && ops[done % B_WINDOW].state != ENG_OP_PENDING) {
			if (ops[done % B_WINDOW].state != ENG_OP_DONE)
				return -1;
			done++;
		}
		why = eng_expired(e);
		if (why) {
			hx_fail(e->t, "bandwidth at %zu B: %s after %ld of %ld messages", size,
				why == 2 ? "aborted" : "timed out", done, count);
			return -1;
		}
		eng_idle(e, moved);
	}
	return hx_now() - t0;
}

static double b_stream(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, size_t size,
		       long *count_out)
{
	struct eng_conn *c = hx_w.rank == 0 ? sc : rc;
	char *bufs[B_WINDOW];
	void *mhs[B_WINDOW];
	double secs[2], gbps = -1;
	long count = size >= (8u << 20) ? 16 : size >= (512u << 10) ? 256 : 4096;
	int i, round;

	for (i = 0; i < B_WINDOW; i++) {
		bufs[i] = hx_alloc(size);
		memset(bufs[i], i, size);
		if (eng_reg(c, bufs[i], size, &mhs[i]) < 0)
			return -1;
	}
	for (round = 0; round < 8; round++) {
		memset(secs, 0, sizeof(secs));
		secs[hx_w.rank] = b_stream_round(e, sc, rc, bufs, mhs, size, count);
		/* The receiver's clock counts: the data has landed when it stops. */
		if (oob_allgather(secs, sizeof(double)) < 0) {
			t_aborted(e->t, "the bandwidth runs");
			return -1;
		}
		if (secs[0] < 0 || secs[1] < 0) {
			if (!hx_failed(e->t))
				hx_fail(e->t, "bandwidth at %zu B: rank %d's run failed", size,
					secs[0] < 0 ? 0 : 1);
			return -1;
		}
		hx_log("bench: %zu B x %ld: sender %.3f s, receiver %.3f s", size, count, secs[0],
		       secs[1]);
		if (secs[1] >= B_MIN_SECONDS) {
			gbps = (double)size * (double)count / secs[1] / 1e9;
			*count_out = count;
			break;
		}
		count = (long)((double)count * (B_MIN_SECONDS * 1.6) / (secs[1] > 1e-3 ? secs[1] : 1e-3)) +
			1;
	}
	for (i = 0; i < B_WINDOW; i++) {
		eng_dereg(c, mhs[i]);
		hx_free(bufs[i]);
	}
	return gbps;
}

/* (d) memcpy in one process, buffers faulted in first. `nbuf` source and `nbuf` destination
 * buffers are cycled through: with B_WINDOW that is the stream's working set (what the plugin
 * is up against), with 1 one cache-resident pair (the machine's best case). */
static double b_memcpy(size_t size, int nbuf)
{
	char *src[B_WINDOW], *dst[B_WINDOW];
	double t0, t;
	long n = 0;
	int i;

	for (i = 0; i < nbuf; i++) {
		src[i] = hx_alloc(size);
		dst[i] = hx_alloc(size);
		memset(src[i], 1 + i, size);
		memset(dst[i], 2 + i, size);
	}
	t0 = hx_now();
	do {
		i = (int)(n % nbuf);
		memcpy(dst[i], src[i], size);
		src[i][n % size] = (char)n; /* keep the copy from being elided */
		n++;
		t = hx_now() - t0;
	} while (t < B_MIN_SECONDS);
	for (i = 0; i < nbuf; i++) {
		hx_free(src[i]);
		hx_free(dst[i]);
	}
	return (double)size * (double)n / t / 1e9;
}

/*
 * Pin each rank to its own CPU when there are at least two: two busy-polling
 * processes that the scheduler puts on one CPU measure time slices, not the
 * data path (seen here: 1 MiB streaming swinging between 2 and 25 GB/s).
 * Returns the CPU, or -1 if the ranks were left to the scheduler.
 */
static int b_pin(int rank)
{
	cpu_set_t allowed, one;
	int cpu, k = 0;

	if (sched_getaffinity(0, sizeof(allowed), &allowed) || CPU_COUNT(&allowed) < 2)
		return -1;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed))
			continue;
		if (k++ == rank) {
			CPU_ZERO(&one);
			CPU_SET(cpu, &one);
			return sched_setaffinity(0, sizeof(one), &one) ? -1 : cpu;
		}
	}
	return -1;
}

void t_bench(struct hx_test *t)
{
	static const size_t sizes[] = {64u << 10, 1u << 20, 16u << 20};
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc, *rc;
	double lat, lat_min = -1, floor_us, bw[3] = {-1, -1, -1}, mc[3] = {-1, -1, -1}, hot[3] = {-1, -1, -1};
	long lat_n = 0, floor_n = 0, counts[3] = {0};
	int i, me = hx_w.rank;
	char sz[32];

	if (hx_w.nranks != 2) {
		hx_fail(t, "the benchmark runs on 2 ranks, not %d", hx_w.nranks);
		return;
	}
	js_num(t->metrics, "cpu", b_pin(me));
	eng_init(&e, t, "bench");
	e.yield_after = 0;
	e.sizes_null_every = 0;
	eng_links_add(&ls, 0, 0, 1, 0, -1, 0);
	eng_links_add(&ls, 1, 0, 0, 0, -1, 0);
	if (eng_links_open(&e, &ls) < 0)
		goto out;
	sc = eng_link_find(&ls, me, 1 - me, 0)->send;
	rc = eng_link_find(&ls, 1 - me, me, 0)->recv;

	lat = b_latency(&e, sc, rc, &lat_n, &lat_min);
	if (hx_failed(t))
		goto out;
	floor_us = b_shm_floor(t, &floor_n);
	if (hx_failed(t))
		goto out;
	for (i = 0; i < 3 && !hx_failed(t); i++) {
		if (sizes[i] > hx_opt.max_bytes)
			continue;
		bw[i] = b_stream(&e, sc, rc, sizes[i], &counts[i]);
	}
	if (me == 0)
		for (i = 0; i < 3; i++)
			if (sizes[i] <= hx_opt.max_bytes) {
				mc[i] = b_memcpy(sizes[i], B_WINDOW);
				hot[i] = b_memcpy(sizes[i], 1);
			}
	if (hx_failed(t))
		goto out;

	js_num(t->metrics, "latency_us", lat * 1e6);
	/* the fastest round trip / 2: one that met no preemption, what a loaded machine still shows */
	js_num(t->metrics, "latency_min_us", lat_min * 1e6);
	js_int(t->metrics, "latency_round_trips", lat_n);
	if (me == 0) {
		js_num(t->metrics, "shm_floor_us", floor_us * 1e6);
		js_int(t->metrics, "shm_round_trips", floor_n);
	}
	js_arr(t->metrics, "bandwidth");
	for (i = 0; i < 3; i++) {
		if (sizes[i] > hx_opt.max_bytes)
			continue;
		js_obj(t->metrics, NULL);
		js_int(t->metrics, "bytes", (long long)sizes[i]);
		js_num(t->metrics, "plugin_gbps", bw[i]);
		js_int(t->metrics, "messages", counts[i]);
		if (me == 0) {
			js_num(t->metrics, "memcpy_gbps", mc[i]);
			js_num(t->metrics, "memcpy_hot_gbps", hot[i]);
		}
		js_end_obj(t->metrics);
	}
	js_end_arr(t->metrics);
	if (me == 0) {
		printf("bench: plugin '%s' (v%d), 2 ranks\n", pl.name ? pl.name : "?", pl.version);
		printf("  one-way latency, 8 B:  plugin %8.2f us   shared-memory floor %6.3f us\n",
		       lat * 1e6, floor_us * 1e6);
		printf("  %-10s %12s %12s %12s\n", "size", "plugin GB/s", "memcpy GB/s",
		       "memcpy hot");
		for (i = 0; i < 3; i++) {
			if (sizes[i] > hx_opt.max_bytes)
				continue;
			hx_fmt_bytes(sz, sizeof(sz), sizes[i]);
			printf("  %-10s %12.2f %12.2f %12.2f\n", sz, bw[i], mc[i], hot[i]);
		}
		printf("  (memcpy: %d source and %d destination buffers cycled, like the stream; "
		       "hot: one pair)\n", B_WINDOW, B_WINDOW);
		fflush(stdout);
	}
out:
	eng_links_close(&e, &ls, 0, ls.n);
	eng_links_free(&ls);
	eng_free(&e);
}
