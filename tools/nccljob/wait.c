/* SPDX-License-Identifier: MIT */
/*
 * wait.c - waiting on what NCCL does: the polling loop every step uses
 * (job_wait: the out-of-band channel, signals and the deadlines between
 * polls) and the watchdog thread, a bound for the calls that cannot be
 * polled.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "tools/nccljob/nccljob.h"

/* ---- the watchdog: a bound for the calls that cannot be polled ---------- */

static struct {
	pthread_mutex_t lock;
	double armed;	 /* 0: not armed */
	double backstop; /* the whole job's last moment */
	char what[128];
	struct nj_job *job;
} wd = {.lock = PTHREAD_MUTEX_INITIALIZER};

void wd_arm(double seconds, const char *what)
{
	pthread_mutex_lock(&wd.lock);
	wd.armed = nj_now() + (seconds > 1 ? seconds : 1);
	snprintf(wd.what, sizeof(wd.what), "%s", what);
	pthread_mutex_unlock(&wd.lock);
}

void wd_disarm(void)
{
	pthread_mutex_lock(&wd.lock);
	wd.armed = 0;
	pthread_mutex_unlock(&wd.lock);
}

static void *wd_main(void *arg)
{
	struct nj_job *j = arg;

	for (;;) {
		char what[128];
		double armed, now;

		nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
		pthread_mutex_lock(&wd.lock);
		armed = wd.armed;
		snprintf(what, sizeof(what), "%s", wd.what);
		pthread_mutex_unlock(&wd.lock);
		now = nj_now();
		if (armed && now > armed) {
			/* the main thread is inside that call: the job's state is still */
			fprintf(stderr,
				"nccljob[rank %d]: watchdog: %s did not return in time; "
				"exiting with status 4 without cleaning up\n",
				j->rank, what);
			if (!j->failed) {
				job_failf(j, &j->fail, NJ_TIMEOUT, "watchdog",
					  "%s did not return in time (watchdog)", what);
				j->failed = 1;
			}
			j->job = job_own_final(j);
			j->job.kind = j->fail.kind;
			j->job.exit_code = 4;
			if (j->rank == 0) /* the channel is idle: the main thread is stuck */
				oob_bcast(&j->oob, NJM_ABORT, &j->fail, sizeof(j->fail));
			else if (j->fail.rank == j->rank)
				oob_send(&j->oob, 0, NJM_ERROR, &j->fail, sizeof(j->fail));
			if (j->o.json)
				report_json(j, j->o.json);
			fflush(stdout);
			_exit(4);
		}
		if (now > wd.backstop) {
			fprintf(stderr,
				"nccljob[rank %d]: watchdog: still running %.0f s after "
				"--timeout-s; exiting with status 4 (last phase: %s)\n",
				j->rank, now - j->deadline, j->phase);
			_exit(4);
		}
	}
	return NULL;
}

/* ---- waiting ------------------------------------------------------------ */

/*
 * Polls until poll() says done (1) or failed (-1), within timeout_s and the
 * job's deadline; between polls, the out-of-band channel and signals.
 */
int job_wait(struct nj_job *j, const char *what, double timeout_s,
	     int (*poll)(struct nj_job *, struct nj_fail *), struct nj_fail *f)
{
	double start = nj_now(), op_end = start + timeout_s;
	double end = op_end < j->deadline ? op_end : j->deadline;

	for (;;) {
		int rc = poll(j, f);
		double now, took;

		if (rc > 0)
			return 0;
		if (rc < 0)
			return -1;
		if (oob_check(&j->oob, f))
			return -1;
		if (nj_signal) {
			job_failf(j, f, NJ_SIGNAL, nj_signal == SIGINT ? "SIGINT" : "SIGTERM",
				  "stopped by signal %d during %s", (int)nj_signal, what);
			f->exit_code = 128 + nj_signal;
			return -1;
		}
		now = nj_now();
		took = now - start;
		if (now >= end) {
			if (end == op_end)
				job_failf(j, f, NJ_TIMEOUT, "timeout",
					  "%s did not complete within --op-timeout-s %g s", what,
					  timeout_s);
			else
				job_failf(j, f, NJ_TIMEOUT, "timeout",
					  "the job ran past --timeout-s %g s during %s (raise it "
					  "for "
					  "long sweeps)",
					  j->o.timeout_s, what);
			return -1;
		}
		/* spin for a millisecond, then 50 us naps, then 1 ms: timing is the events' job */
		if (took < 1e-3)
			sched_yield();
		else
			nanosleep(&(struct timespec){.tv_nsec = took < 0.1 ? 50000 : 1000000},
				  NULL);
	}
}

int wd_start(struct nj_job *j)
{
	pthread_t wt;

	wd.job = j;
	wd.backstop = j->deadline + NJ_FINAL_GRACE_S + NJ_ABORT_BOUND_S + 30;
	if (pthread_create(&wt, NULL, wd_main, j) != 0)
		return -1;
	pthread_detach(wt);
	return 0;
}
