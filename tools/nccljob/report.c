/* SPDX-License-Identifier: MIT */
/*
 * report.c - the JSON file and rank 0's table.
 *
 * Rank 0's file is the combined view: per result the slowest rank's time and
 * every rank's wrong elements; per rank its device, host id and final status.
 * Any other rank's file (with "%r" in --json) has the same shape, with only
 * what that rank knows: its own results, device and status, and the job's
 * status if rank 0 could tell it. The file is written to FILE.tmp and renamed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/nccljob/nccljob.h"

/* ---- a small JSON writer (output only; commas and indentation by depth) - */

struct jw {
	FILE *f;
	int depth;
	int first[16];
	int inline_from; /* depth from which objects go on one line */
};

static void jw_sep(struct jw *w, const char *key)
{
	if (!w->first[w->depth])
		fputc(',', w->f);
	w->first[w->depth] = 0;
	if (w->depth > 0 && w->depth < w->inline_from)
		fprintf(w->f, "\n%*s", 2 * w->depth, "");
	else if (w->depth > 0)
		fputc(' ', w->f);
	if (key)
		fprintf(w->f, "\"%s\": ", key);
}

static void jw_str_raw(struct jw *w, const char *s)
{
	fputc('"', w->f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(w->f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", w->f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(w->f, "\\u%04x", c);
		else
			fputc(c, w->f);
	}
	fputc('"', w->f);
}

static void jw_open(struct jw *w, const char *key, char bracket)
{
	jw_sep(w, key);
	fputc(bracket, w->f);
	w->first[++w->depth] = 1;
}

static void jw_close(struct jw *w, char bracket)
{
	int empty = w->first[w->depth];

	w->depth--;
	if (!empty && w->depth < w->inline_from - 1)
		fprintf(w->f, "\n%*s", 2 * w->depth, "");
	else if (!empty)
		fputc(' ', w->f);
	fputc(bracket, w->f);
}

static void jw_str(struct jw *w, const char *key, const char *s)
{
	jw_sep(w, key);
	if (s)
		jw_str_raw(w, s);
	else
		fputs("null", w->f);
}

/* "" is null: for the strings that are empty when unknown */
static void jw_str0(struct jw *w, const char *key, const char *s)
{
	jw_str(w, key, s && *s ? s : NULL);
}

static void jw_int(struct jw *w, const char *key, long long v)
{
	jw_sep(w, key);
	fprintf(w->f, "%lld", v);
}

static void jw_num(struct jw *w, const char *key, double v)
{
	jw_sep(w, key);
	if (isfinite(v))
		fprintf(w->f, "%.6g", v);
	else
		fputs("null", w->f);
}

static void jw_bool(struct jw *w, const char *key, int v)
{
	jw_sep(w, key);
	fputs(v ? "true" : "false", w->f);
}

static void jw_null(struct jw *w, const char *key)
{
	jw_sep(w, key);
	fputs("null", w->f);
}

/* ---- what goes in -------------------------------------------------------- */

static void version_string(const struct nj_job *j, char *buf, size_t n)
{
	int v = j->nccl_version;

	if (!v)
		snprintf(buf, n, "%s", j->o.dry ? "none (--dry-run)" : "unknown");
	else
		snprintf(buf, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

static void write_fail(struct jw *w, const char *key, const struct nj_fail *f)
{
	jw_open(w, key, '{');
	jw_str(w, "code", f->code);
	jw_str(w, "status", nj_kind_status(f->kind));
	jw_str(w, "message", f->msg);
	jw_int(w, "rank", f->rank);
	jw_num(w, "after_ms", f->after_ms);
	jw_str0(w, "phase", f->phase);
	jw_close(w, '}');
}

/*
 * One step over the ranks this view knows: the slowest time, the wrong
 * elements summed, and the rank of the first with any.
 */
void report_combine(const struct nj_job *j, int step, double *time_us, double *wall_us,
		    uint64_t *wrong, int *wrong_rank)
{
	int n = j->rank == 0 ? j->nranks : 1, r;
	const struct nj_result *res = &j->res[(size_t)step * (size_t)n];

	*time_us = *wall_us = 0;
	*wrong = 0;
	*wrong_rank = -1;
	for (r = 0; r < n; r++) {
		if (res[r].time_us > *time_us)
			*time_us = res[r].time_us;
		if (res[r].wall_us > *wall_us)
			*wall_us = res[r].wall_us;
		if (res[r].wrong && *wrong_rank < 0)
			*wrong_rank = j->rank == 0 ? r : j->rank;
		*wrong += res[r].wrong;
	}
}

static void write_result(struct jw *w, const struct nj_job *j, int si)
{
	const struct nj_step *s = &j->steps[si];
	int n = j->rank == 0 ? j->nranks : 1, r, wr;
	const struct nj_result *res = &j->res[(size_t)si * (size_t)n];
	int ran_on = res[0].cranks ? res[0].cranks : j->nranks; /* fewer after a shrink */
	double t, wall, algbw, factor = nj_busbw_factor(s->coll, ran_on);
	uint64_t wrong;

	report_combine(j, si, &t, &wall, &wrong, &wr);
	algbw = t > 0 ? (double)s->bytes / t / 1e3 : 0; /* bytes/us / 1e3 = GB/s */
	jw_open(w, NULL, '{');
	jw_str(w, "coll", nj_coll_name(s->coll));
	jw_int(w, "bytes", (long long)s->bytes);
	jw_int(w, "count", (long long)s->count);
	jw_int(w, "nccl_count", (long long)s->chunk);
	jw_int(w, "iters", j->o.iters);
	jw_int(w, "nranks", ran_on);
	jw_num(w, "time_us", t);
	jw_num(w, "wall_us", wall);
	if (j->o.each) { /* the rank that stalled most */
		int worst = 0;
		for (r = 1; r < n; r++)
			if (res[r].stall_us > res[worst].stall_us)
				worst = r;
		jw_num(w, "max_us", res[worst].max_us);
		jw_num(w, "stall_us", res[worst].stall_us);
		jw_int(w, "stalls", res[worst].stalls);
		jw_int(w, "stall_episodes", res[worst].episodes);
		jw_open(w, "stall_top_us", '[');
		for (int k = 0; k < res[worst].episodes && k < NJ_TOP_STALLS; k++)
			jw_num(w, NULL, res[worst].top_us[k]);
		jw_close(w, ']');
	}
	jw_num(w, "algbw_gbps", algbw);
	jw_num(w, "busbw_gbps", algbw * factor);
	jw_num(w, "busbw_factor", factor);
	jw_bool(w, "checked", j->o.check > 0);
	jw_int(w, "wrong", (long long)wrong);
	jw_bool(w, "ok", wrong == 0);
	jw_open(w, "rank_time_us", '[');
	for (r = 0; r < n; r++)
		jw_num(w, NULL, res[r].time_us);
	jw_close(w, ']');
	jw_open(w, "rank_wrong", '[');
	for (r = 0; r < n; r++)
		jw_int(w, NULL, (long long)res[r].wrong);
	jw_close(w, ']');
	if (wr < 0) {
		jw_null(w, "first_wrong");
	} else {
		const struct nj_result *x = &res[j->rank == 0 ? wr : 0];

		jw_open(w, "first_wrong", '{');
		jw_int(w, "rank", wr);
		jw_int(w, "index", x->first);
		jw_str(w, "got", x->got);
		jw_str(w, "expected", x->expected);
		jw_close(w, '}');
	}
	jw_close(w, '}');
}

/* The first wrong result, as an "error" object for a job whose only fault is data. */
static void write_data_error(struct jw *w, const struct nj_job *j)
{
	struct nj_fail f;
	int si, wr;

	for (si = 0; si < j->steps_done; si++) {
		const struct nj_step *s = &j->steps[si];
		const struct nj_result *x;
		double t, wall;
		uint64_t wrong;

		report_combine(j, si, &t, &wall, &wrong, &wr);
		if (wr < 0)
			continue;
		x = &j->res[(size_t)si * (j->rank == 0 ? (size_t)j->nranks : 1) +
			    (j->rank == 0 ? (size_t)wr : 0)];
		nj_fail_set(&f, NJ_DATA, wr, j->t0, "data_error",
			    "%s %zu B: %llu wrong element(s) over all ranks; the first on rank %d "
			    "at index %lld: got %s, expected %s",
			    nj_coll_name(s->coll), s->bytes, (unsigned long long)wrong, wr,
			    (long long)x->first, x->got, x->expected);
		f.after_ms = NAN; /* not a moment: the checks of a whole sweep */
		snprintf(f.phase, sizeof(f.phase), "%s %zu B: check", nj_coll_name(s->coll),
			 s->bytes);
		write_fail(w, "error", &f);
		return;
	}
	jw_null(w, "error");
}

static void write_rank(struct jw *w, const struct nj_job *j, int r, const struct nj_info *in,
		       const struct nj_final *fin)
{
	jw_open(w, NULL, '{');
	jw_int(w, "rank", r);
	jw_bool(w, "lost", j->cmap && j->cmap[r] < 0); /* and shrunk away: the job carried on */
	if (fin) {
		jw_str(w, "status", nj_kind_status(fin->kind));
		jw_int(w, "exit_code", fin->exit_code);
		if (fin->kind == NJ_OK || fin->kind == NJ_DATA)
			jw_null(w, "error");
		else
			write_fail(w, "error", &fin->fail);
	} else {
		jw_str(w, "status", "unknown");
		jw_null(w, "exit_code");
		jw_null(w, "error");
	}
	if (in) {
		jw_int(w, "pid", in->pid);
		jw_str0(w, "host", in->host);
		jw_str0(w, "hostid", in->hostid);
		jw_str0(w, "nccl_net", in->net);
		jw_int(w, "local_rank", in->local_rank);
		jw_int(w, "device", in->device);
	}
	jw_close(w, '}');
}

static int write_all(const struct nj_job *j, FILE *f)
{
	struct jw w = {.f = f, .first = {1}, .inline_from = 3};
	const struct nj_final *job = &j->job;
	struct nj_final own = job_own_final(j);
	int combined = j->rank == 0, n = combined ? j->nranks : 1, r, c, si;
	char ver[32];

	version_string(j, ver, sizeof(ver));
	jw_open(&w, NULL, '{');
	jw_str(&w, "program", NJ_PROG);
	jw_int(&w, "version", 1);
	jw_str(&w, "view", combined ? "combined" : "rank");
	jw_int(&w, "rank", j->rank);
	jw_int(&w, "nranks", j->nranks);
	jw_str(&w, "nccl_version", ver);
	jw_int(&w, "nccl_version_code", j->nccl_version);
	jw_int(&w, "cuda_runtime_version", j->cuda_runtime);
	jw_int(&w, "cuda_driver_version", j->cuda_driver);
	jw_bool(&w, "dry_run", j->o.dry);
	jw_str(&w, "dtype", nj_dtype_name(j->o.dtype));
	jw_str(&w, "op", nj_op_name(j->o.op));
	jw_int(&w, "root", j->o.root);
	jw_int(&w, "warmup", j->o.warmup);
	jw_int(&w, "iters", j->o.iters);
	jw_int(&w, "check", j->o.check);
	jw_str(&w, "timing", j->o.each ? "each" : "loop");
	jw_int(&w, "blocking", j->o.blocking);
	jw_num(&w, "timeout_s", j->o.timeout_s);
	jw_num(&w, "op_timeout_s", j->o.op_timeout_s);
	jw_open(&w, "bytes_definition", '{');
	for (c = 0; c < j->o.ncolls; c++)
		jw_str(&w, nj_coll_name(j->o.colls[c]), nj_coll_bytes_def(j->o.colls[c]));
	jw_close(&w, '}');

	jw_open(&w, "cuda_devices", '[');
	for (r = 0; r < n; r++) {
		const struct nj_info *in = combined ? &j->ranks[r].info : &j->me;
		int known = combined ? j->ranks[r].have_info : 1;

		jw_open(&w, NULL, '{');
		jw_int(&w, "rank", combined ? r : j->rank);
		if (known) {
			jw_int(&w, "device", in->device);
			jw_str0(&w, "name", in->devname);
			jw_str0(&w, "pci_bus_id", in->pci);
		} else {
			jw_null(&w, "device");
		}
		jw_close(&w, '}');
	}
	jw_close(&w, ']');
	jw_open(&w, "hostids", '[');
	for (r = 0; r < n; r++) {
		const struct nj_info *in = combined ? &j->ranks[r].info : &j->me;

		jw_str0(&w, NULL, (combined ? j->ranks[r].have_info : 1) ? in->hostid : NULL);
	}
	jw_close(&w, ']');

	jw_str(&w, "on_peer_loss", j->o.on_loss == NJ_LOSS_SHRINK ? "shrink" : "fail");
	jw_open(&w, "shrinks", '[');
	for (si = 0; si < j->nshrinks; si++) {
		const struct nj_shrink *x = &j->shrinks[si];

		jw_open(&w, NULL, '{');
		jw_int(&w, "step", x->step);
		jw_open(&w, "lost", '[');
		for (r = 0; r < x->nlost; r++)
			jw_int(&w, NULL, x->lost[r]);
		jw_close(&w, ']');
		jw_int(&w, "nranks", x->cranks);
		jw_str(&w, "by", x->by == NJ_SHRINK_NCCL ? "ncclCommShrink" : "reinit");
		jw_num(&w, "after_ms", x->after_ms);
		write_fail(&w, "cause", &x->why);
		jw_close(&w, '}');
	}
	jw_close(&w, ']');
	jw_int(&w, "comm_nranks", j->cranks);
	jw_int(&w, "comm_rank", j->crank);

	jw_open(&w, "results", '[');
	for (si = 0; si < j->steps_done; si++)
		write_result(&w, j, si);
	jw_close(&w, ']');

	if (combined) {
		jw_str(&w, "status", nj_kind_status(job->kind));
		jw_int(&w, "exit_code", job->exit_code);
		if (job->kind == NJ_OK)
			jw_null(&w, "error");
		else if (job->kind == NJ_DATA)
			write_data_error(&w, j);
		else
			write_fail(&w, "error", &job->fail);
	} else {
		jw_str(&w, "status", nj_kind_status(own.kind));
		jw_int(&w, "exit_code", own.exit_code);
		if (own.kind == NJ_OK)
			jw_null(&w, "error");
		else if (own.kind == NJ_DATA)
			write_data_error(&w, j);
		else
			write_fail(&w, "error", &own.fail);
		/* what rank 0 said in DONE, if it could */
		jw_str(&w, "job_status", nj_kind_status(job->kind == NJ_ABORTED ? job->fail.kind
										   : job->kind));
		jw_int(&w, "job_exit_code", job->exit_code);
	}
	jw_open(&w, "ranks", '[');
	for (r = 0; r < n; r++) {
		if (!combined)
			write_rank(&w, j, j->rank, &j->me, &own);
		else
			write_rank(&w, j, r, j->ranks[r].have_info ? &j->ranks[r].info : NULL,
				   j->ranks[r].have_final || j->ranks[r].final.kind ?
				   &j->ranks[r].final : NULL);
	}
	jw_close(&w, ']');
	jw_close(&w, '}');
	fputc('\n', f);
	return ferror(f) ? -1 : 0;
}

int report_json(const struct nj_job *j, const char *path)
{
	char file[4096], tmp[4200];
	size_t o = 0;
	const char *p;
	FILE *f;
	int rc;

	if (j->rank != 0 && !strstr(path, "%r"))
		return 0; /* only rank 0 writes a file without %r */
	for (p = path; *p && o + 16 < sizeof(file); p++) {
		if (p[0] == '%' && p[1] == 'r') {
			o += (size_t)snprintf(file + o, sizeof(file) - o, "%d", j->rank);
			p++;
		} else {
			file[o++] = *p;
		}
	}
	file[o] = '\0';
	snprintf(tmp, sizeof(tmp), "%s.tmp%d", file, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	rc = write_all(j, f);
	if (fclose(f) != 0 || rc < 0 || rename(tmp, file) < 0) {
		int e = errno;

		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

/* ---- the table ------------------------------------------------------------ */

void report_header(const struct nj_job *j)
{
	char ver[32];
	int r;

	version_string(j, ver, sizeof(ver));
	if (j->o.dry)
		printf("# %s: %d rank%s, --dry-run: no GPU, no NCCL\n", NJ_PROG, j->nranks,
		       j->nranks == 1 ? "" : "s");
	else
		printf("# %s: %d rank%s, NCCL %s, CUDA runtime %d.%d, driver %d.%d\n", NJ_PROG,
		       j->nranks, j->nranks == 1 ? "" : "s", ver, j->cuda_runtime / 1000,
		       j->cuda_runtime % 1000 / 10, j->cuda_driver / 1000,
		       j->cuda_driver % 1000 / 10);
	printf("#   dtype %s, op %s, root %d, warmup %d, iters %d, timing %s, check %d, %s "
	       "communicator\n", nj_dtype_name(j->o.dtype), nj_op_name(j->o.op), j->o.root,
	       j->o.warmup, j->o.iters, j->o.each ? "each" : "loop", j->o.check,
	       j->o.blocking ? "blocking" : "non-blocking");
	for (r = 0; r < j->nranks; r++) {
		const struct nj_info *in = &j->ranks[r].info;

		printf("#   rank %2d: pid %d on %s, NCCL_HOSTID %s, NCCL_NET %s, device %d %s %s\n",
		       r, in->pid, in->host, in->hostid[0] ? in->hostid : "-",
		       in->net[0] ? in->net : "-", in->device, in->pci[0] ? in->pci : "",
		       in->devname);
	}
	if (j->skipped[0])
		printf("#   skipped, less than one %s element%s: %s\n", nj_dtype_name(j->o.dtype),
		       j->nranks > 1 ? " per rank" : "", j->skipped);
	printf("#\n# %13s %12s %12s %6s %5s %11s %11s %11s %8s\n", "coll", "bytes", "count", "redop",
	       "root", "time_us", "algbw_GB/s", "busbw_GB/s", "wrong");
	fflush(stdout);
}

void report_row(const struct nj_job *j, int si)
{
	const struct nj_step *s = &j->steps[si];
	double t, wall, algbw;
	uint64_t wrong;
	int wr, red = nj_coll_reduces(s->coll);
	int rooted = s->coll == NJ_BROADCAST || s->coll == NJ_REDUCE;
	char wbuf[24], rbuf[8];

	report_combine(j, si, &t, &wall, &wrong, &wr);
	algbw = t > 0 ? (double)s->bytes / t / 1e3 : 0;
	snprintf(wbuf, sizeof(wbuf), "%llu", (unsigned long long)wrong);
	snprintf(rbuf, sizeof(rbuf), "%d", j->o.root);
	printf("  %13s %12zu %12zu %6s %5s %11.2f %11.3f %11.3f %8s\n", nj_coll_name(s->coll),
	       s->bytes, s->count, red ? nj_op_name(j->o.op) : "-", rooted ? rbuf : "-", t, algbw,
	       algbw * nj_busbw_factor(s->coll, j->nranks), j->o.check ? wbuf : "-");
	fflush(stdout);
}

void report_summary(const struct nj_job *j)
{
	char line[800];
	uint64_t total = 0;
	int si, r;

	for (si = 0; si < j->steps_done; si++)
		for (r = 0; r < j->nranks; r++)
			total += j->res[(size_t)si * (size_t)j->nranks + (size_t)r].wrong;
	for (si = 0; si < j->nshrinks; si++) {
		const struct nj_shrink *x = &j->shrinks[si];

		printf("# shrink %d: at step %d, without rank(s)", si + 1, x->step);
		for (r = 0; r < x->nlost; r++)
			printf("%s %d", r ? "," : "", x->lost[r]);
		printf(" (%s), %d rank(s) after it, %.0f ms into the job\n", x->why.code,
		       x->cranks, x->after_ms);
	}
	if (j->job.kind == NJ_OK) {
		printf("# %d of %d results, %s: ok%s\n", j->steps_done, j->nsteps,
		       j->o.check ? "every element as expected" : "not checked (--check 0)",
		       j->nshrinks ? " (the survivors carried on)" : "");
		fflush(stdout);
		return;
	}
	if (j->job.kind == NJ_DATA) {
		printf("# %d of %d results, %llu wrong element(s): data_error\n", j->steps_done,
		       j->nsteps, (unsigned long long)total);
		fprintf(stderr, "nccljob[rank 0]: the job failed: data_error: %llu wrong element(s) "
			"(see the lines above from each rank)\n", (unsigned long long)total);
		fflush(stdout);
		return;
	}
	printf("# %d of %d results before the job failed: %s\n", j->steps_done, j->nsteps,
	       nj_kind_status(j->job.kind));
	fflush(stdout);
	nj_fail_line(&j->job.fail, line, sizeof(line));
	fprintf(stderr, "nccljob[rank 0]: the job failed on rank %d: %s [%s]; exit status %d\n",
		j->job.fail.rank, line, j->job.fail.phase, j->job.exit_code);
	for (r = 0; r < j->nranks; r++) {
		const struct nj_rankrec *x = &j->ranks[r];

		if (x->final.kind == NJ_OK || x->final.kind == NJ_DATA)
			continue;
		fprintf(stderr, "nccljob[rank 0]:   rank %d: %s%s%s\n", r,
			nj_kind_status(x->final.kind),
			x->final.kind == NJ_ABORTED ? "" : ": ",
			x->final.kind == NJ_ABORTED ? "" : x->final.fail.msg);
	}
}
