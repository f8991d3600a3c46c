/* SPDX-License-Identifier: MIT */
/*
 * job.c - the job's small shared things: the clock, failure records and
 * their exit codes, the verbose log, a rank's own final status. Every other
 * file of the program uses these; they call nothing of the others.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tools/nccljob/nccljob.h"

volatile sig_atomic_t nj_signal;

double nj_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nj_kind_exit(int kind)
{
	static const int codes[NJ_NKIND] = {
		[NJ_OK] = 0,	  [NJ_DATA] = 2,    [NJ_SETUP] = 1,
		[NJ_NCCL] = 3,	  [NJ_CUDA] = 3,    [NJ_PEER_LOST] = 3,
		[NJ_TIMEOUT] = 4, [NJ_ABORTED] = 3, [NJ_SIGNAL] = 130,
	};

	return kind >= 0 && kind < NJ_NKIND ? codes[kind] : 1;
}

const char *nj_kind_status(int kind)
{
	static const char *const names[NJ_NKIND] = {
		[NJ_OK] = "ok",		  [NJ_DATA] = "data_error", [NJ_SETUP] = "setup_error",
		[NJ_NCCL] = "nccl_error", [NJ_CUDA] = "cuda_error", [NJ_PEER_LOST] = "peer_lost",
		[NJ_TIMEOUT] = "timeout", [NJ_ABORTED] = "aborted", [NJ_SIGNAL] = "interrupted",
	};

	return kind >= 0 && kind < NJ_NKIND ? names[kind] : "unknown";
}

void nj_fail_set(struct nj_fail *f, int kind, int rank, double t0, const char *code,
		 const char *fmt, ...)
{
	va_list ap;

	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->rank = rank;
	f->exit_code = nj_kind_exit(kind);
	f->after_ms = (nj_now() - t0) * 1e3;
	snprintf(f->code, sizeof(f->code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
}

/* "timeout: ..." or "nccl_error (ncclRemoteError): ..." */
void nj_fail_line(const struct nj_fail *f, char *buf, size_t n)
{
	const char *st = nj_kind_status(f->kind);

	if (!strcmp(st, f->code))
		snprintf(buf, n, "%s: %s", st, f->msg);
	else
		snprintf(buf, n, "%s (%s): %s", st, f->code, f->msg);
}

void job_failf(struct nj_job *j, struct nj_fail *f, int kind, const char *code, const char *fmt,
	       ...)
{
	va_list ap;

	nj_fail_set(f, kind, j->rank, j->t0, code, "%s", "");
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	snprintf(f->phase, sizeof(f->phase), "%s", j->phase);
}

void nj_say(const struct nj_job *j, const char *fmt, ...)
{
	char line[768];
	va_list ap;

	if (!j->o.verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "nccljob[rank %d]: +%.3f s: %s\n", j->rank, nj_now() - j->t0, line);
}

/* ---- the end ------------------------------------------------------------ */

struct nj_final job_own_final(const struct nj_job *j)
{
	struct nj_final m = {.kind = NJ_OK};

	if (j->failed) {
		m.fail = j->fail;
		m.kind = j->fail.rank == j->rank ? j->fail.kind : NJ_ABORTED;
		m.exit_code = j->fail.exit_code;
	} else if (j->data_errors) {
		m.kind = NJ_DATA;
		m.exit_code = 2;
	}
	return m;
}
