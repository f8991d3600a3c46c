/* SPDX-License-Identifier: MIT */
/*
 * main.c - simfabric-nccljob: options and the job's flow (the wait loop and
 * the watchdog are wait.c's). See nccljob.h for the map of the files and --help for use.
 *
 * The flow, on every rank:
 *   bootstrap   rank 0 listens on MASTER_ADDR:MASTER_PORT, the others connect
 *               (retrying) and say HELLO with a hash of the options that must
 *               match; rank 0 answers WELCOME (or why not) once all are in
 *   set-up      CUDA device, stream, buffers; INFO to rank 0, which answers GO
 *               with the ncclUniqueId, or with the first rank's set-up error
 *   init        ncclCommInitRankConfig (non-blocking), polled
 *   steps       per collective and size: fill, warm up, check, time, check;
 *               RESULT to rank 0, which prints the row and answers NEXT
 *   finish      ncclCommFinalize; FINAL to rank 0, which answers DONE with the
 *               job's status; rank 0 writes the JSON; every rank exits with
 *               the job's status
 * A failure anywhere (an NCCL error, a timeout, a lost connection, a signal)
 * goes to rank 0 at once (ERROR), rank 0 tells everyone (ABORT), each rank
 * aborts its communicator and goes to "finish". With --on-peer-loss shrink, a
 * failure during the steps goes through recover() first: when ranks are gone,
 * rank 0 says SHRINK instead, and the survivors shrink the communicator and
 * run the step again (rank numbers in messages stay the job's RANKs; the data
 * and NCCL use the communicator's, crank of cranks). Options are in opts.c.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/nccljob/nccljob.h"

static void on_signal(int sig)
{
	if (nj_signal) { /* the second one is not polite */
		signal(sig, SIG_DFL);
		raise(sig);
	}
	nj_signal = sig;
}

static int poll_never(struct nj_job *j, struct nj_fail *f)
{
	return 0;
}

/* ---- failing ------------------------------------------------------------ */

/* The first failure wins: it is said on stderr and kept. */
static int job_note(struct nj_job *j, const struct nj_fail *f)
{
	char what[800];

	if (j->failed)
		return 0;
	j->failed = 1;
	j->fail = *f;
	if (f->kind <= NJ_OK || f->kind >= NJ_NKIND) /* a bug: still say something */
		job_failf(j, &j->fail, NJ_SETUP, "internal",
			  "internal error: a failure without a description (kind %d); please "
			  "report it with this rank's stderr", f->kind);
	if (!j->fail.phase[0])
		snprintf(j->fail.phase, sizeof(j->fail.phase), "%s", j->phase);
	nj_fail_line(f, what, sizeof(what));
	if (f->rank == j->rank)
		fprintf(stderr, "nccljob[rank %d]: %s [%s, after %.0f ms]\n", j->rank, what,
			j->fail.phase, f->after_ms);
	else
		fprintf(stderr, "nccljob[rank %d]: stopping, because rank %d failed: %s [%s]\n",
			j->rank, f->rank, what, j->fail.phase);
	return 1;
}

/* ... and spread: rank 0 tells everyone, a peer tells rank 0; then the abort. */
static void job_fail(struct nj_job *j, const struct nj_fail *f)
{
	if (!job_note(j, f))
		return;
	if (j->rank == 0)
		oob_bcast(&j->oob, NJM_ABORT, &j->fail, sizeof(j->fail));
	else if (f->rank == j->rank)
		oob_send(&j->oob, 0, NJM_ERROR, &j->fail, sizeof(j->fail));
	if (!j->o.dry)
		dev_abort(j);
}

/* ---- bootstrap and set-up ----------------------------------------------- */

static int bootstrap(struct nj_job *j, struct nj_fail *f)
{
	struct nj_hello me = {.proto = 1, .opt_hash = opts_hash(j), .rank = j->rank,
			      .nranks = j->nranks, .pid = (int32_t)getpid()};
	struct nj_go g = {.ok = 1};
	struct nj_hello *hellos;
	int r;

	gethostname(me.host, sizeof(me.host) - 1);
	snprintf(j->phase, sizeof(j->phase), "bootstrap");
	if (j->rank != 0) {
		nj_say(j, "connecting to rank 0 at %s:%s", j->addr, j->port);
		if (oob_connect(&j->oob, j->addr, j->port, j->deadline, &me, f) < 0 ||
		    oob_wait(&j->oob, 0, NJM_WELCOME, &g, sizeof(g), j->deadline, 0, f) < 0)
			return -1;
		if (!g.ok) {
			*f = g.fail;
			return -1;
		}
		return 0;
	}
	hellos = calloc((size_t)j->nranks, sizeof(*hellos));
	if (!hellos) {
		job_failf(j, f, NJ_SETUP, "oom", "out of memory");
		return -1;
	}
	nj_say(j, "waiting for %d rank(s) on %s:%s", j->nranks - 1, j->addr, j->port);
	if (oob_serve(&j->oob, j->addr, j->port, j->deadline, hellos, f) < 0)
		g.ok = 0;
	for (r = 1; g.ok && r < j->nranks; r++) {
		if (hellos[r].opt_hash == me.opt_hash)
			continue;
		job_failf(j, f, NJ_SETUP, "options_differ",
			  "rank %d (pid %d on %s) was started with other options than rank 0: "
			  "--coll, --sizes/--min/--max/--factor, --dtype, --op, --root, --warmup, "
			  "--iters, --check, --timing, --blocking and --dry-run must be the same on "
			  "every rank", r, hellos[r].pid, hellos[r].host);
		g.ok = 0;
	}
	free(hellos);
	if (!g.ok)
		g.fail = *f;
	oob_bcast(&j->oob, NJM_WELCOME, &g, sizeof(g));
	return g.ok ? 0 : -1;
}

static void fill_info(struct nj_job *j)
{
	const char *hostid = getenv("NCCL_HOSTID"), *net = getenv("NCCL_NET");

	j->me.rank = j->rank;
	j->me.local_rank = j->local_rank;
	j->me.device = -1;
	j->me.pid = (int32_t)getpid();
	gethostname(j->me.host, sizeof(j->me.host) - 1);
	snprintf(j->me.hostid, sizeof(j->me.hostid), "%s", hostid ? hostid : "");
	snprintf(j->me.net, sizeof(j->me.net), "%s", net ? net : "");
}

static int local_setup(struct nj_job *j, struct nj_fail *f)
{
	if (j->o.inject_kind == NJ_INJ_SETUP && j->o.inject_rank == j->rank) {
		job_failf(j, f, NJ_SETUP, "injected", "set-up failure made up by --inject");
		return -1;
	}
	if (!j->o.dry)
		return dev_setup(j, f);
	snprintf(j->me.devname, sizeof(j->me.devname), "none (--dry-run)");
	j->h_send = malloc(j->cap);
	j->h_recv = malloc(j->cap);
	if (!j->h_send || !j->h_recv) {
		job_failf(j, f, NJ_SETUP, "oom", "cannot allocate 2 x %zu bytes", j->cap);
		return -1;
	}
	return 0;
}

/* Set-up on every rank, then INFO to rank 0 and GO (with the id) back. */
static int setup(struct nj_job *j, uint8_t id[NJ_ID_BYTES], struct nj_fail *f)
{
	struct nj_go g = {.ok = 1};
	int r;

	snprintf(j->phase, sizeof(j->phase), "set-up");
	fill_info(j);
	if (local_setup(j, &j->me.fail) < 0) { /* INFO takes it to rank 0 */
		j->me.kind = NJ_SETUP;
		job_note(j, &j->me.fail);
	}
	nj_say(j, "set-up %s: device %d %s %s", j->me.kind ? "failed" : "done", j->me.device,
	       j->me.devname, j->me.pci);
	if (j->rank != 0) {
		if (oob_send_f(&j->oob, 0, NJM_INFO, &j->me, sizeof(j->me), f) < 0 ||
		    oob_wait(&j->oob, 0, NJM_GO, &g, sizeof(g), j->deadline, 0, f) < 0)
			return -1;
		if (!g.ok) {
			*f = g.fail;
			return -1;
		}
		memcpy(id, g.id, NJ_ID_BYTES);
		return 0;
	}
	j->ranks[0].info = j->me;
	j->ranks[0].have_info = 1;
	for (r = 1; r < j->nranks; r++) {
		if (oob_wait(&j->oob, r, NJM_INFO, &j->ranks[r].info, sizeof(j->ranks[r].info),
			     j->deadline, 0, f) < 0)
			return -1;
		j->ranks[r].have_info = 1;
	}
	for (r = 0; r < j->nranks && g.ok; r++) {
		if (j->ranks[r].info.kind != NJ_OK) {
			g.ok = 0;
			g.fail = j->ranks[r].info.fail;
		}
	}
	if (g.ok && !j->o.dry && dev_unique_id(j, g.id, &g.fail) < 0)
		g.ok = 0;
	oob_bcast(&j->oob, NJM_GO, &g, sizeof(g));
	if (!g.ok) {
		*f = g.fail;
		return -1;
	}
	memcpy(id, g.id, NJ_ID_BYTES);
	return 0;
}

/* ---- the steps ---------------------------------------------------------- */

/* timed: the timed loop (where --inject R:slow acts); each_us: its iteration times, or NULL */
static int exec(struct nj_job *j, const struct nj_step *s, int iters, int inj, int timed,
		double *us, double *each_us, struct nj_fail *f)
{
	char what[160];
	double t;

	snprintf(what, sizeof(what), "%s", j->phase);
	if (inj == NJ_INJ_HANG) {
		fprintf(stderr, "nccljob[rank %d]: --inject: not taking part in %s\n", j->rank,
			j->phase);
		return job_wait(j, what, j->o.op_timeout_s, poll_never, f);
	}
	if (inj == NJ_INJ_STUCK) {
		fprintf(stderr, "nccljob[rank %d]: --inject: stuck in a call that never returns, "
			"in %s\n", j->rank, j->phase);
		wd_arm(j->o.op_timeout_s, "a call that never returns (made up by --inject)");
		for (;;)
			pause();
	}
	if (inj == NJ_INJ_NCCL) {
		job_failf(j, f, NJ_NCCL, "ncclRemoteError",
			  "the communicator reported an asynchronous error: ncclRemoteError "
			  "(made up by --inject)");
		return -1;
	}
	/* the timed loop on the slow rank: its middle iteration starts late (noisy: others a
	 * little late too) */
	struct nj_late late = {.slow_at = iters / 2, .noisy = inj == NJ_INJ_NOISY};
	const struct nj_late *lp = (inj == NJ_INJ_SLOW || inj == NJ_INJ_NOISY) && timed ? &late
											   : NULL;
	if (!j->o.dry)
		return dev_run(j, s, iters, j->o.each, lp, us, each_us, f);
	*us = 0;
	for (int i = 0; i < (each_us ? iters : 1); i++) { /* once per batch: the long way */
		t = nj_now();
		unsigned late_us = 0;
		for (int k = each_us ? i : 0; k < (each_us ? i + 1 : iters); k++)
			late_us += nj_late_us(lp, k);
		if (late_us)
			usleep(late_us);
		nj_simulate(&j->data, s->coll, j->crank, j->o.root, s->chunk, j->h_recv, s->out_n);
		double one = (nj_now() - t) * 1e6;
		*us += one; /* the batch's time, as the events would say */
		if (each_us)
			each_us[i] = one;
	}
	return 0;
}

static int poison(struct nj_job *j, const struct nj_step *s, struct nj_fail *f)
{
	size_t bytes = s->out_n * nj_dtype_size(j->o.dtype);

	if (!j->o.check)
		return 0;
	if (j->o.dry) {
		memset(j->h_recv, 0xa5, bytes);
		return 0;
	}
	return dev_poison(j, bytes, f);
}

static int check_output(struct nj_job *j, const struct nj_step *s, int inj,
			struct nj_result *r, struct nj_fail *f)
{
	struct nj_check c;

	if (!j->o.check)
		return 0;
	if (!j->o.dry && dev_download(j, s->out_n * nj_dtype_size(j->o.dtype), f) < 0)
		return -1;
	if (inj == NJ_INJ_DATA) {
		size_t i = s->out_n / 2;

		nj_store(j->o.dtype, j->h_recv, i, nj_load(j->o.dtype, j->h_recv, i) ^ 0x3);
	}
	nj_verify(&j->data, s->coll, j->crank, j->o.root, s->chunk, j->h_recv, s->out_n, &c);
	r->checks++;
	r->checked = c.checked;
	if (c.wrong > r->wrong)
		r->wrong = c.wrong;
	if (c.wrong && r->first < 0) {
		r->first = c.first;
		memcpy(r->got, c.got, sizeof(r->got));
		memcpy(r->expected, c.expected, sizeof(r->expected));
	}
	return 0;
}

/* --inject R:flip: the collective's output, where it wrote it, gets one element changed. */
static int flip_output(struct nj_job *j, const struct nj_step *s, struct nj_fail *f)
{
	size_t i = s->out_n / 2;

	fprintf(stderr, "nccljob[rank %d]: --inject: element %zu of the first warm-up "
		"iteration's output changed\n", j->rank, i);
	if (!j->o.dry)
		return dev_flip(j, i, f);
	nj_store(j->o.dtype, j->h_recv, i, nj_load(j->o.dtype, j->h_recv, i) ^ 0x3);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* An episode's excess into the top list, largest first. */
static void top_add(struct nj_result *r, double x)
{
	int k = r->episodes < NJ_TOP_STALLS ? r->episodes : NJ_TOP_STALLS;
	if (k == NJ_TOP_STALLS && x <= r->top_us[k - 1])
		return;
	if (k == NJ_TOP_STALLS)
		k--;
	while (k > 0 && r->top_us[k - 1] < x) {
		r->top_us[k] = r->top_us[k - 1];
		k--;
	}
	r->top_us[k] = x;
}

/*
 * A fault's stall shows as a few iterations far over the rest: their excess over the median,
 * summed, measures it directly, where a difference of two runs' means would add both runs'
 * drift over every iteration (several ms over 1500 of them). A stall is an iteration over the
 * median + NJ_STALL_US, with its neighbours over + NJ_STALL_EDGE_US (a stall NCCL met between
 * two iterations falls into both). A busy host adds its own, a millisecond or two, scattered:
 * on an H100 under MPS, 9 to 142 iterations of 1500 over + 1 ms, which a bare threshold
 * counted as stalls (test_14_02's straggler measured as 22 of them); they are not counted.
 */
void nj_stalls(const double *us, int n, struct nj_result *r)
{
	r->max_us = r->stall_us = 0;
	r->stalls = r->episodes = 0;
	memset(r->top_us, 0, sizeof(r->top_us));
	if (n <= 0)
		return;
	double *v = malloc((size_t)n * sizeof(*v));
	if (!v) {
		r->stalls = -1; /* not measured (no memory), rather than "none" */
		return;
	}
	memcpy(v, us, (size_t)n * sizeof(*v));
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	r->max_us = v[n - 1];
	free(v);
	double ep = 0; /* the episode running, 0: none */
	for (int i = 0; i < n; i++) {
		int big = us[i] > med + NJ_STALL_US;
		int edge = us[i] > med + NJ_STALL_EDGE_US &&
			   ((i > 0 && us[i - 1] > med + NJ_STALL_US) ||
			    (i + 1 < n && us[i + 1] > med + NJ_STALL_US));
		if (big || edge) {
			r->stall_us += us[i] - med;
			r->stalls++;
			ep += us[i] - med;
		} else if (ep > 0) {
			top_add(r, ep);
			r->episodes++;
			ep = 0;
		}
	}
	if (ep > 0) {
		top_add(r, ep);
		r->episodes++;
	}
}

static int run_step(struct nj_job *j, int si, struct nj_result *r, struct nj_fail *f)
{
	const struct nj_step *s = &j->steps[si];
	int inj = j->o.inject_rank == j->rank && j->o.inject_step == si ? j->o.inject_kind : 0;
	int every = j->o.check == 2; /* check every warm-up iteration on its own */
	int batches = every ? j->o.warmup : j->o.warmup > 0;
	int b;
	double us, t;
	char head[64];

	memset(r, 0, sizeof(*r));
	r->step = si;
	r->first = -1;
	r->cranks = j->cranks;
	r->gen = j->nshrinks;
	snprintf(head, sizeof(head), "%s %zu B", nj_coll_name(s->coll), s->bytes);
	if (inj == NJ_INJ_EXIT) {
		fprintf(stderr, "nccljob[rank %d]: --inject: killing myself (SIGKILL) at %s\n",
			j->rank, head);
		fflush(stderr);
		kill(getpid(), SIGKILL);
	}
	snprintf(j->phase, sizeof(j->phase), "%s: input", head);
	nj_fill(&j->data, s->coll, j->crank, j->h_send, s->in_n);
	if (!j->o.dry && dev_upload(j, s->in_n * nj_dtype_size(j->o.dtype), f) < 0)
		return -1;
	snprintf(j->phase, sizeof(j->phase), "%s: warm-up", head);
	for (b = 0; b < batches; b++) {
		int n = every ? 1 : j->o.warmup;

		if (poison(j, s, f) < 0)
			return -1;
		if (inj == NJ_INJ_FLIP && b == 0 && (exec(j, s, 1, inj, 0, &us, NULL, f) < 0 ||
						     flip_output(j, s, f) < 0 || --n < 0))
			return -1;
		if (n > 0 && exec(j, s, n, inj, 0, &us, NULL, f) < 0)
			return -1;
		if ((every || b == batches - 1) && check_output(j, s, inj, r, f) < 0)
			return -1;
	}
	snprintf(j->phase, sizeof(j->phase), "%s: timed loop", head);
	if (poison(j, s, f) < 0)
		return -1;
	double *each_us = j->o.each ? calloc((size_t)j->o.iters, sizeof(double)) : NULL;
	if (j->o.each && !each_us) {
		job_failf(j, f, NJ_SETUP, "oom", "out of memory for %d iteration times",
			  j->o.iters);
		return -1;
	}
	t = nj_now();
	if (exec(j, s, j->o.iters, inj, 1, &us, each_us, f) < 0) {
		free(each_us);
		return -1;
	}
	r->wall_us = (nj_now() - t) * 1e6 / j->o.iters;
	r->time_us = us / j->o.iters;
	if (each_us)
		nj_stalls(each_us, j->o.iters, r);
	free(each_us);
	snprintf(j->phase, sizeof(j->phase), "%s: check", head);
	if (check_output(j, s, inj, r, f) < 0)
		return -1;
	if (r->wrong) {
		j->data_errors++;
		fprintf(stderr, "nccljob[rank %d]: %s (%s %s): %llu of %llu elements wrong; the "
			"first at index %lld: got %s, expected %s\n", j->rank, head,
			nj_dtype_name(j->o.dtype), nj_op_name(j->o.op),
			(unsigned long long)r->wrong, (unsigned long long)r->checked,
			(long long)r->first, r->got, r->expected);
	}
	nj_say(j, "%s: %.2f us per iteration, %llu wrong", head, r->time_us,
	       (unsigned long long)r->wrong);
	return 0;
}

/* Run one step, then the barrier: RESULT to rank 0, NEXT back. */
static int step(struct nj_job *j, int si, struct nj_fail *f)
{
	struct nj_result *mine = &j->res[(size_t)si * (j->rank ? 1 : (size_t)j->nranks)];
	double until;
	int32_t next = -1;
	int r;

	if (run_step(j, si, mine, f) < 0)
		return -1;
	snprintf(j->phase, sizeof(j->phase), "%s %zu B: step barrier",
		 nj_coll_name(j->steps[si].coll), j->steps[si].bytes);
	until = nj_now() + j->o.op_timeout_s + NJ_STEP_GRACE_S;
	if (until > j->deadline)
		until = j->deadline;
	if (j->rank != 0) {
		if (oob_send_f(&j->oob, 0, NJM_RESULT, mine, sizeof(*mine), f) < 0 ||
		    oob_wait(&j->oob, 0, NJM_NEXT, &next, sizeof(next), until, 0, f) < 0)
			return -1;
		j->steps_done = si + 1;
		return 0;
	}
	for (r = 1; r < j->nranks; r++) {
		struct nj_result *x = &mine[r];

		if (j->cmap[r] < 0) { /* lost, and shrunk away: no result */
			memset(x, 0, sizeof(*x));
			x->first = -1;
			continue;
		}
		do { /* a RESULT sent before the last shrink is of the run it repeated */
			if (oob_wait(&j->oob, r, NJM_RESULT, x, sizeof(*x), until, 0, f) < 0)
				return -1;
		} while (x->gen < j->nshrinks);
		if (x->step != si) {
			job_failf(j, f, NJ_SETUP, "protocol", "rank %d reported step %d, not %d",
				  r, x->step, si);
			return -1;
		}
		x->got[sizeof(x->got) - 1] = x->expected[sizeof(x->expected) - 1] = '\0';
	}
	j->steps_done = si + 1;
	report_row(j, si);
	next = si;
	oob_bcast(&j->oob, NJM_NEXT, &next, sizeof(next));
	return 0;
}

/* ---- the end ------------------------------------------------------------ */

/* Rank 0: the job's status from every rank's report. */
static void judge(struct nj_job *j)
{
	int r;

	j->job = job_own_final(j);
	if (j->failed) {
		j->job.kind = j->fail.kind;
		return;
	}
	for (r = 0; r < j->nranks; r++) {
		const struct nj_final *x = &j->ranks[r].final;

		if (x->kind == NJ_OK || x->kind == NJ_DATA || j->cmap[r] < 0) /* lost: carried on */
			continue;
		j->job = *x;
		j->job.kind = x->fail.kind;
		return;
	}
	for (r = 0; r < j->nranks; r++) {
		if (j->ranks[r].final.kind == NJ_DATA) {
			j->job.kind = NJ_DATA;
			j->job.exit_code = 2;
		}
	}
}

static int finish(struct nj_job *j, int exchange)
{
	struct nj_fail f;
	struct nj_final done;
	double until = nj_now() + NJ_FINAL_GRACE_S;
	int r;

	snprintf(j->phase, sizeof(j->phase), "final reports");
	if (j->rank != 0) {
		struct nj_final mine = job_own_final(j);

		j->job = mine;
		if (exchange && oob_send(&j->oob, 0, NJM_FINAL, &mine, sizeof(mine)) == 0 &&
		    oob_wait(&j->oob, 0, NJM_DONE, &done, sizeof(done), until + 5,
			     NJ_WAIT_IGNORE_FAIL, &f) == 0)
			j->job = done;
	} else {
		j->ranks[0].final = job_own_final(j);
		j->ranks[0].have_final = 1;
		for (r = 1; exchange && r < j->nranks; r++) {
			struct nj_rankrec *x = &j->ranks[r];

			if (oob_wait(&j->oob, r, NJM_FINAL, &x->final, sizeof(x->final), until,
				     NJ_WAIT_IGNORE_FAIL, &f) == 0) {
				x->have_final = 1;
				continue;
			}
			if (oob_rank_fail(&j->oob, r)) { /* its ERROR, or its lost connection */
				x->final.fail = *oob_rank_fail(&j->oob, r);
				x->final.kind = x->final.fail.rank == r ? x->final.fail.kind
									: NJ_ABORTED;
			} else {
				nj_fail_set(&x->final.fail, NJ_TIMEOUT, r, j->t0, "no_report",
					    "rank %d sent no final report within %.0f s", r,
					    NJ_FINAL_GRACE_S);
				x->final.kind = NJ_TIMEOUT;
			}
			x->final.exit_code = x->final.fail.exit_code;
		}
		judge(j);
		oob_bcast(&j->oob, NJM_DONE, &j->job, sizeof(j->job));
	}
	if (j->o.json && report_json(j, j->o.json) < 0)
		fprintf(stderr, "nccljob[rank %d]: cannot write the JSON file %s: %s\n", j->rank,
			j->o.json, strerror(errno));
	if (j->rank == 0)
		report_summary(j);
	return j->job.exit_code;
}

/* ---- --on-peer-loss shrink ---------------------------------------------- */

/* Rank 0: the ranks lost so far, waiting up to NJ_LOSS_GRACE_S for the first to show. */
static int find_lost(struct nj_job *j, struct nj_shrink *s)
{
	double end = nj_now() + NJ_LOSS_GRACE_S, settle = 0;
	struct nj_fail ignored;

	for (;;) {
		oob_check(&j->oob, &ignored); /* takes in what arrived: closes among it */
		s->nlost = oob_lost(&j->oob, s->lost, NJ_MAX_LOST);
		if (s->nlost && !settle) /* ranks killed together close within a moment */
			settle = nj_now() + 0.2;
		if ((settle && nj_now() >= settle) || (!settle && nj_now() >= end) || nj_signal)
			return s->nlost;
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
}

/* A peer: wait for rank 0's verdict on our failure f (SHRINK, or ABORT). 0: SHRINK. */
static int await_verdict(struct nj_job *j, struct nj_fail *f)
{
	double end = nj_now() + NJ_LOSS_GRACE_S + 10; /* rank 0's wait, and then some */
	struct nj_fail got;

	oob_send(&j->oob, 0, NJM_ERROR, f, sizeof(*f));
	while (!j->oob.have_fail && nj_now() < end && !nj_signal) {
		oob_check(&j->oob, &got);
		if (!j->oob.have_fail)
			nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
	if (j->oob.have_shrink)
		return 0;
	if (j->oob.have_fail)
		*f = j->oob.fail; /* the ABORT: it says why */
	return -1;
}

/*
 * After step si failed with f: 0 when the survivors have shrunk the communicator and may run
 * step si again; -1 (f says why) when this failure is fatal: no rank was lost (a timeout, an
 * error of our own), rank 0 was, a signal, or the shrink itself failed.
 */
static int recover(struct nj_job *j, int si, struct nj_fail *f)
{
	struct nj_shrink s = {.step = si};
	int excl[NJ_MAX_LOST], n = 0, i;
	char names[256] = "";
	size_t len = 0;

	if (j->o.on_loss != NJ_LOSS_SHRINK || f->kind == NJ_SIGNAL || j->nshrinks >= NJ_MAX_SHRINKS)
		return -1;
	if (j->rank == 0) {
		if (!find_lost(j, &s))
			return -1;
		s.why = *f;
		s.after_ms = (nj_now() - j->t0) * 1e3;
		s.by = j->o.shrink_by;
		/* the survivors' new communicator: its id before anyone is told */
		if (s.by == NJ_SHRINK_REINIT && !j->o.dry && dev_unique_id(j, s.id, f) < 0)
			return -1;
	} else {
		if (!j->oob.have_shrink && (j->oob.have_fail || await_verdict(j, f) < 0))
			return -1; /* rank 0 said ABORT, or was lost itself */
		s = j->oob.shrink;
	}
	for (i = 0; i < s.nlost && i < NJ_MAX_LOST; i++) {
		int r = s.lost[i];

		if (r <= 0 || r >= j->nranks || j->cmap[r] < 0)
			continue; /* rank 0 is never in it; nor one already gone */
		excl[n++] = j->cmap[r];
		len += (size_t)snprintf(names + len, len < sizeof(names) ? sizeof(names) - len : 0,
					"%s%d", n > 1 ? ", " : "", r);
	}
	s.cranks = j->cranks - n;
	if (!n || j->o.root >= s.cranks) { /* the same verdict on every survivor */
		job_failf(j, f, NJ_PEER_LOST, "peer_lost", "cannot carry on without rank(s) %s: %s",
			  names[0] ? names : "(none)", !n ? "no rank to exclude" :
			  "--root is not a rank of the smaller communicator");
		return -1;
	}
	oob_forgive(&j->oob);
	if (j->rank == 0)
		oob_bcast(&j->oob, NJM_SHRINK, &s, sizeof(s));
	/* the map: every rank's place among the survivors, in the old order (as NCCL's) */
	for (i = 0; i < n; i++)
		for (int r = 0; r < j->nranks; r++)
			if (j->cmap[r] == excl[i])
				j->cmap[r] = -1;
	j->cranks = 0;
	for (int r = 0; r < j->nranks; r++)
		if (j->cmap[r] >= 0)
			j->cmap[r] = j->cranks++;
	fprintf(stderr, "nccljob[rank %d]: lost rank(s) %s during %s (%s); shrinking the "
		"communicator to %d rank(s): now rank %d of %d; running step %d again (%s)\n",
		j->rank, names, j->phase, s.why.code[0] ? s.why.code : "?", j->cranks,
		j->cmap[j->rank], j->cranks, si,
		s.by == NJ_SHRINK_NCCL ? "ncclCommShrink" : "a new communicator of the survivors");
	j->crank = j->cmap[j->rank];
	snprintf(j->phase, sizeof(j->phase), "%s",
		 s.by == NJ_SHRINK_NCCL ? "ncclCommShrink" : "ncclCommInitRankConfig (survivors)");
	if (!j->o.dry && (s.by == NJ_SHRINK_NCCL ? dev_shrink(j, excl, n, f)
						  : dev_reinit(j, s.id, f)) < 0)
		return -1;
	nj_data_init(&j->data, j->o.dtype, j->o.op, j->cranks);
	opts_geometry(j, j->cranks);
	j->shrinks[j->nshrinks++] = s;
	return 0;
}

/* Each survivor's own word on how it carried on (rank 0's table has everyone's). */
static void survivor_line(const struct nj_job *j)
{
	uint64_t wrong = 0;
	int after = 0;

	if (!j->nshrinks || j->failed)
		return;
	for (int si = j->shrinks[0].step; si < j->steps_done; si++, after++)
		wrong += j->res[(size_t)si * (j->rank ? 1 : (size_t)j->nranks)].wrong;
	fprintf(stderr, "nccljob[rank %d]: survivor: %d shrink(s), rank %d of %d at the end; %d "
		"step(s) from step %d on the smaller communicator, %llu wrong element(s) here\n",
		j->rank, j->nshrinks, j->crank, j->cranks, after, j->shrinks[0].step,
		(unsigned long long)wrong);
}

static int job_run(struct nj_job *j)
{
	uint8_t id[NJ_ID_BYTES] = {0};
	struct nj_fail f;
	int si;

	if (bootstrap(j, &f) < 0) {
		job_fail(j, &f);
		return finish(j, 0);
	}
	nj_say(j, "bootstrap done: %d rank(s)", j->nranks);
	if (setup(j, id, &f) < 0) {
		job_fail(j, &f);
		return finish(j, 1);
	}
	snprintf(j->phase, sizeof(j->phase), "communicator init");
	if (!j->o.dry && dev_comm_init(j, id, &f) < 0) {
		job_fail(j, &f);
		return finish(j, 1);
	}
	nj_say(j, "communicator ready");
	if (j->rank == 0)
		report_header(j);
	for (si = 0; si < j->nsteps; si++) {
		if (step(j, si, &f) < 0) {
			if (recover(j, si, &f) == 0) {
				si--; /* the same step again, on the survivors */
				continue;
			}
			job_fail(j, &f);
			return finish(j, 1);
		}
	}
	survivor_line(j);
	snprintf(j->phase, sizeof(j->phase), "communicator finalize");
	if (!j->o.dry && dev_finalize(j, &f) < 0)
		job_fail(j, &f);
	return finish(j, 1);
}

int main(int argc, char **argv)
{
	static struct nj_job job;
	struct nj_job *j = &job;
	struct sigaction sa;
	char warn[256];
	int rc;

	j->t0 = nj_now();
	j->oob.lfd = -1;
	rc = opts_parse(j, argc, argv);
	if (rc)
		return rc < 0 ? 1 : 0;
	if (opts_env(j) < 0 || opts_steps(j) < 0)
		return 1;
	j->deadline = j->t0 + j->o.timeout_s;
	j->oob.rank = j->rank;
	j->oob.nranks = j->nranks;
	j->oob.t0 = j->t0;
	j->res = calloc((size_t)j->nsteps * (j->rank ? 1 : (size_t)j->nranks), sizeof(*j->res));
	j->ranks = calloc((size_t)j->nranks, sizeof(*j->ranks));
	j->cmap = calloc((size_t)j->nranks, sizeof(*j->cmap));
	if (!j->res || !j->ranks || !j->cmap) {
		fprintf(stderr, "nccljob: out of memory\n");
		return 1;
	}
	j->crank = j->rank;
	j->cranks = j->nranks;
	for (int r = 0; r < j->nranks; r++)
		j->cmap[r] = r;
	nj_data_init(&j->data, j->o.dtype, j->o.op, j->nranks);
	if (j->rank == 0 && j->o.check &&
	    nj_span_warning(j->o.dtype, j->o.op, j->nranks, warn, sizeof(warn)))
		fprintf(stderr, "nccljob[rank 0]: warning: %s\n", warn);
	if (!j->o.dry)
		dev_versions(j);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (wd_start(j) != 0) {
		fprintf(stderr, "nccljob: cannot start the watchdog thread\n");
		return 1;
	}

	rc = job_run(j);
	fflush(stdout);
	fflush(stderr);
	if (j->failed)
		_exit(rc); /* no CUDA or NCCL teardown after an abort: it could hang */
	oob_close(&j->oob);
	return rc;
}
