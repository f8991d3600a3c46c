/* SPDX-License-Identifier: MIT */
/*
 * main.c - simfabric-harness: the parent process and the rank processes'
 * main loop (the command line: opts.c).
 *
 * The parent forks one process per rank (each its own emulated node:
 * SIMFABRIC_NODE and NCCL_HOSTID are set before the plugin is loaded), then
 * sits in one poll loop: it tells every rank which test to run, relays their
 * allgathers and barriers, collects one result per rank per test, and kills
 * everything if a rank dies or a test outlives --timeout. It never loads the
 * plugin itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* the one parser of values with units, header-only: its code is compiled here */
#include "sim/core/version.h"
#include "tools/harness/harness.h"

const struct hx_test_def hx_tests[] = {
	{"load", t_load, HX_T_INTERNAL, "dlopen, pick the newest ncclNetPlugin_vN, init, devices"},
	{"connect", t_connect, 0,
	 "every ordered pair, every device pair: listen, non-blocking connect/accept, round trip"},
	{"props", t_props, 0, "getProperties of every device: every field set, values sane"},
	{"sizes", t_sizes, 0,
	 "0 B .. 64 MiB and odd sizes between ring neighbours, byte-exact, capacity == and >"},
	{"tags", t_tags, 0, "grouped irecv (n = 2..maxRecvs) with distinct tags, sends out of order"},
	{"inflight", t_inflight, 0,
	 "32 requests in flight per comm; posting past the limit may only would-block"},
	{"allreduce", t_allreduce, 0, "ring allreduce of host floats, checked exactly"},
	{"alltoall", t_alltoall, 0, "every rank sends a distinct block to every other, concurrently"},
	{"close_inflight", t_close_inflight, 0,
	 "rank 0 closes comms with requests in flight; rank 1's operations fail or complete"},
	{"listen_reuse", t_listen_reuse, 0, "one listen comm accepts two connections from every peer"},
	{"threads", t_threads, 0, "--threads threads per rank: concurrent setup and transfers"},
	{"reload", t_reload, 0, "finalize, dlclose, dlopen, init again, then a transfer"},
	{"mr", t_mr, 0, "regMr with NCCL_PTR_CUDA on host memory, regMrDmaBuf, overlapping regs"},
	{"truncate", t_truncate, HX_T_DESTRUCTIVE,
	 "4096 B into a 1024 B receive: both sides get ncclInvalidUsage, the WARN names both"},
	{"peer_death", t_peer_death, HX_T_DESTRUCTIVE | HX_T_TERMINAL,
	 "rank N-1 _exit()s mid-traffic: the others get ncclRemoteError within --bound"},
	{"daemon_death", t_daemon_death, HX_T_DESTRUCTIVE | HX_T_TERMINAL,
	 "prints READY; someone kills the daemon; every rank gets ncclSystemError"},
	{"bench", t_bench, HX_T_BENCH,
	 "(--bench) latency, shared-memory floor, streaming bandwidth, memcpy; 2 ranks"},
	{"flows", t_flows, HX_T_NAMED,
	 "(--flows) given rank pairs stream at once; per-flow throughput and completion times"},
	{"faults", t_faults, HX_T_NAMED,
	 "(on request) a ring of timed messages under the scenario's faults: exact data, "
	 "or the error --fault-expect says"},
	{"landing", t_landing, HX_T_NAMED,
	 "(on request) when a receive's bytes appear: rank 0 sends --fault-bytes to rank 1, who "
	 "reads the buffer while it tests"},
	{"unload", t_unload, HX_T_INTERNAL, "finalize, check helper threads are gone, dlclose"},
};
const int hx_ntests = (int)(sizeof(hx_tests) / sizeof(hx_tests[0]));

/* ---- rank process ------------------------------------------------------------- */

static void hx_run_test(int k)
{
	const struct hx_test_def *d = &hx_tests[k];
	struct hx_test t;
	struct js m;
	struct oob_result r;
	double margin = hx_opt.timeout * 0.1 < 5 ? hx_opt.timeout * 0.1 : 5;
	char detail[HX_DETAIL_LEN + 64];
	char *msg;
	size_t dl;
	int ab;

	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.lock, NULL);
	t.def = d;
	t.t0 = hx_now();
	/* Ranks report their own timeouts before the parent's --timeout kill. */
	t.deadline = t.t0 + hx_opt.timeout - margin;
	t.warn_mark = pl_warn_count();
	js_init(&m);
	js_obj(&m, NULL);
	t.metrics = &m;
	oob_set_test(k);
	hx_log("test %s: start", d->name);
	d->fn(&t);
	hx_free_all();
	js_end_all(&m);

	/* A failure that follows another rank's is most likely its consequence: say so. */
	ab = t.nfail ? oob_aborted() : 0;
	if (ab && ab <= HX_MAX_RANKS && ab - 1 != hx_w.rank && !t.aborted &&
	    strncmp(t.detail, "aborted", 7) != 0) {
		char tmp[HX_DETAIL_LEN];

		snprintf(tmp, sizeof(tmp), "%s", t.detail);
		snprintf(t.detail, sizeof(t.detail), "after rank %d failed: %.980s", ab - 1, tmp);
		t.aborted = 1;
	}
	if (t.nfail > 1)
		snprintf(detail, sizeof(detail), "%s (and %d more failures)", t.detail, t.nfail - 1);
	else
		snprintf(detail, sizeof(detail), "%s", t.nfail ? t.detail : t.note);
	memset(&r, 0, sizeof(r));
	r.test = k;
	r.ok = t.nfail == 0;
	r.aborted = t.aborted;
	r.seconds = hx_now() - t.t0;
	dl = strlen(detail);
	r.detail_len = (uint32_t)dl;
	r.metrics_len = (uint32_t)m.len;
	msg = malloc(sizeof(r) + dl + m.len);
	if (!msg) {
		fprintf(stderr, "[rank %d] harness: out of memory (result)\n", hx_w.rank);
		exit(1);
	}
	memcpy(msg, &r, sizeof(r));
	memcpy(msg + sizeof(r), detail, dl);
	memcpy(msg + sizeof(r) + dl, m.buf, m.len);
	if (oob_send(OOB_RESULT, (uint32_t)k, msg, sizeof(r) + dl + m.len) < 0)
		exit(1);
	free(msg);
	js_free(&m);
	pthread_mutex_destroy(&t.lock);
}

static void hx_child(int rank, int fd, pid_t parent)
{
	char node[64];
	int k;

	/* Never outlive the parent, whatever it died of. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	/* The plugin gets the default dispositions an NCCL application has. */
	signal(SIGPIPE, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);

	hx_w.rank = rank;
	hx_w.nranks = hx_opt.nranks;
	snprintf(node, sizeof(node), "%s%d", hx_opt.node_prefix, rank);
	/* A launcher's placement of ranks on nodes (simfabric launch sets both) wins. */
	if (!hx_opt.launched || !getenv("SIMFABRIC_NODE")) {
		setenv("SIMFABRIC_NODE", node, 1);
		setenv("NCCL_HOSTID", node, 1);
	}
	pl_log_setup(rank);
	oob_child_init(fd);
	while ((k = oob_next_command()) >= 0 && k < hx_ntests)
		hx_run_test(k);
	fflush(stdout);
	fflush(stderr);
	exit(0);
}

/* ---- parent ------------------------------------------------------------------------ */

struct hx_rank {
	pid_t pid;
	struct oob_peer rd;
	int alive, expected_exit, exited, status;
	int exiting; /* said OOB_NOTE_EXITING */
	int has_result, ready;
	int gathered;
	char *gdata;
	size_t glen;
};

struct hx_result {
	int test, rank, ok, aborted, order;
	double seconds;
	char *detail, *metrics;
};

static struct hx_rank hx_r[HX_MAX_RANKS];
static struct hx_result *hx_res;
static int hx_nres, hx_capres;
static char hx_plugin_name[256];
static int hx_api_version;
static volatile sig_atomic_t hx_signalled;
static int hx_quitting; /* QUIT sent: a launched rank's EOF is its clean exit */
static int hx_cur_pos; /* position in the schedule: orders the report */

static void hx_on_signal(int sig)
{
	hx_signalled = sig;
}

static void hx_add_result(int test, int rank, int ok, int aborted, double secs, const char *detail,
			  size_t dlen, const char *metrics, size_t mlen)
{
	struct hx_result *r;

	if (hx_nres == hx_capres) {
		int cap = hx_capres ? 2 * hx_capres : 64;
		struct hx_result *nv = realloc(hx_res, (size_t)cap * sizeof(*nv));

		if (!nv) {
			fprintf(stderr, "harness: out of memory (results)\n");
			exit(1);
		}
		hx_res = nv;
		hx_capres = cap;
	}
	r = &hx_res[hx_nres++];
	r->test = test;
	r->order = hx_cur_pos;
	r->rank = rank;
	r->ok = ok;
	r->aborted = aborted;
	r->seconds = secs;
	r->detail = strndup(detail ? detail : "", dlen);
	r->metrics = metrics && mlen ? strndup(metrics, mlen) : strdup("{}");
	if (!ok)
		fprintf(stderr, "FAIL test=%s rank=%d: %s\n", hx_tests[test].name, rank, r->detail);
}

static const char *hx_describe_status(int st, char *buf, size_t cap)
{
	if (WIFSIGNALED(st))
		snprintf(buf, cap, "killed by signal %d (%s)%s", WTERMSIG(st),
			 strsignal(WTERMSIG(st)), WCOREDUMP(st) ? ", core dumped" : "");
	else if (WIFEXITED(st))
		snprintf(buf, cap, "exited with status %d", WEXITSTATUS(st));
	else
		snprintf(buf, cap, "wait status 0x%x", st);
	return buf;
}

/* Reap whatever exited; returns how many did. */
static int hx_reap(int nranks)
{
	int n = 0, i, st;

	for (i = 0; i < nranks; i++) {
		if (hx_r[i].exited)
			continue;
		if (hx_r[i].pid <= 0) {
			/* A launched rank is not our child: it has gone when its channel is at EOF (its
			 * exit status is its launcher's to see). It exited cleanly if it said it would,
			 * or was told to; otherwise status 1 stands for "vanished". */
			char c;

			if (recv(hx_r[i].rd.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0 ||
			    (!hx_r[i].alive && hx_r[i].rd.fd < 0)) {
				hx_r[i].exited = 1;
				hx_r[i].status = hx_r[i].exiting || hx_quitting ? 0 : 1 << 8;
				n++;
			}
			continue;
		}
		if (waitpid(hx_r[i].pid, &st, WNOHANG) == hx_r[i].pid) {
			hx_r[i].exited = 1;
			hx_r[i].status = st;
			n++;
		}
	}
	return n;
}

/* SIGTERM, a grace period, then SIGKILL; reaps everything. */
static void hx_kill_all(int nranks)
{
	double t_end;
	int i, left;

	for (i = 0; i < nranks; i++)
		if (!hx_r[i].exited && hx_r[i].pid > 0)
			kill(hx_r[i].pid, SIGTERM);
	t_end = hx_now() + 2;
	do {
		hx_reap(nranks);
		for (left = 0, i = 0; i < nranks; i++)
			left += !hx_r[i].exited;
		if (left)
			hx_sleep(0.02);
	} while (left && hx_now() < t_end);
	for (i = 0; i < nranks; i++) {
		if (!hx_r[i].exited && hx_r[i].pid <= 0) {
			/* Launched elsewhere: closing its channel tells it the run is over. */
			close(hx_r[i].rd.fd);
			hx_r[i].rd.fd = -1;
			hx_r[i].exited = 1;
		}
		if (!hx_r[i].exited) {
			kill(hx_r[i].pid, SIGKILL);
			if (waitpid(hx_r[i].pid, &hx_r[i].status, 0) == hx_r[i].pid)
				hx_r[i].exited = 1;
		}
		hx_r[i].alive = 0;
	}
}

static void hx_abort_test(int test, int failed_rank, int nranks)
{
	int32_t t32 = test;
	int i;

	for (i = 0; i < nranks; i++) {
		if (!hx_r[i].alive || hx_r[i].has_result)
			continue;
		oob_write(hx_r[i].rd.fd, OOB_ABORT, (uint32_t)failed_rank, &t32, sizeof(t32));
	}
	for (i = 0; i < nranks; i++) {
		free(hx_r[i].gdata);
		hx_r[i].gdata = NULL;
		hx_r[i].gathered = 0;
	}
}

/* Completes the pending gather once every live rank has contributed. */
static int hx_try_gather(int test, int nranks, int *aborted)
{
	size_t len = 0;
	char *all;
	int i, have = 0, need = 0, first = 1;

	for (i = 0; i < nranks; i++) {
		if (hx_r[i].gathered) {
			if (!first && hx_r[i].glen != len) {
				fprintf(stderr, "FAIL test=%s rank=%d: out-of-band gather of %zu bytes, "
					"others gave %zu\n", hx_tests[test].name, i, hx_r[i].glen, len);
				*aborted = 1;
				hx_abort_test(test, i, nranks);
				return -1;
			}
			len = hx_r[i].glen;
			first = 0;
			have++;
		}
		if (hx_r[i].alive)
			need += !hx_r[i].gathered;
	}
	if (!have || need)
		return 0;
	all = calloc((size_t)nranks, len ? len : 1);
	if (!all) {
		fprintf(stderr, "harness: out of memory (gather)\n");
		exit(1);
	}
	for (i = 0; i < nranks; i++)
		if (hx_r[i].gathered && len)
			memcpy(all + (size_t)i * len, hx_r[i].gdata, len);
	for (i = 0; i < nranks; i++) {
		if (hx_r[i].alive && hx_r[i].gathered)
			oob_write(hx_r[i].rd.fd, OOB_GATHER_REPLY, (uint32_t)test, all, len * (size_t)nranks);
		free(hx_r[i].gdata);
		hx_r[i].gdata = NULL;
		hx_r[i].gathered = 0;
	}
	free(all);
	return 1;
}

/* Runs one test on every live rank. 0 when every rank reported, -1 on a fatal event. */
static int hx_parent_test(int test, int nranks)
{
	const struct hx_test_def *d = &hx_tests[test];
	double t0 = hx_now();
	int i, aborted = 0, printed_ready = 0;

	for (i = 0; i < nranks; i++) {
		hx_r[i].has_result = 0;
		hx_r[i].ready = 0;
		if (hx_r[i].alive && oob_write(hx_r[i].rd.fd, OOB_RUN, (uint32_t)test, NULL, 0) < 0) {
			hx_add_result(test, i, 0, 0, 0, "could not reach the rank", 24, NULL, 0);
			return -1;
		}
	}
	for (;;) {
		struct pollfd pfd[HX_MAX_RANKS];
		int idx[HX_MAX_RANKS], np = 0, left = 0, ready = 0, nalive = 0;
		double now = hx_now();

		for (i = 0; i < nranks; i++) {
			if (!hx_r[i].alive)
				continue;
			nalive++;
			left += !hx_r[i].has_result;
			ready += hx_r[i].ready;
			pfd[np].fd = hx_r[i].rd.fd;
			pfd[np].events = POLLIN;
			idx[np++] = i;
		}
		if (!left)
			return 0;
		if (d->fn == t_daemon_death && !printed_ready && ready == nalive) {
			/* The cue for whoever kills the daemon. */
			printf("READY\n");
			fflush(stdout);
			printed_ready = 1;
		}
		if (hx_signalled) {
			for (i = 0; i < nranks; i++)
				if (hx_r[i].alive && !hx_r[i].has_result)
					hx_add_result(test, i, 0, 0, now - t0, "interrupted by a signal", 23,
						      NULL, 0);
			return -1;
		}
		if (now - t0 > hx_opt.timeout) {
			char msg[160];
			int n = snprintf(msg, sizeof(msg), "timeout: still running after %.1f s (--timeout %g)",
					 now - t0, hx_opt.timeout);

			for (i = 0; i < nranks; i++)
				if (hx_r[i].alive && !hx_r[i].has_result)
					hx_add_result(test, i, 0, 0, now - t0, msg, (size_t)n, NULL, 0);
			return -1;
		}
		if (poll(pfd, (nfds_t)np, 50) < 0 && errno != EINTR) {
			perror("harness: poll");
			return -1;
		}
		for (i = 0; i < np; i++) {
			struct hx_rank *r = &hx_r[idx[i]];
			int rank = idx[i], eof = 0, rc;
			struct oob_hdr h;
			char *data;

			if (!pfd[i].revents)
				continue;
			rc = oob_peer_read(&r->rd);
			if (rc != 0)
				eof = 1;
			while ((rc = oob_peer_next(&r->rd, &h, &data)) == 1) {
				if (h.type == OOB_HELLO) {
					hx_api_version = (int)h.arg;
					snprintf(hx_plugin_name, sizeof(hx_plugin_name), "%.*s",
						 (int)h.len, data);
				} else if (h.type == OOB_GATHER) {
					if (aborted || (int)h.arg != test)
						continue;
					free(r->gdata);
					r->gdata = h.len ? malloc(h.len) : NULL;
					if (h.len && !r->gdata) {
						fprintf(stderr, "harness: out of memory (gather)\n");
						exit(1);
					}
					if (h.len)
						memcpy(r->gdata, data, h.len);
					r->glen = h.len;
					r->gathered = 1;
					hx_try_gather(test, nranks, &aborted);
				} else if (h.type == OOB_RESULT && h.len >= sizeof(struct oob_result)) {
					struct oob_result res;

					memcpy(&res, data, sizeof(res));
					if (sizeof(res) + res.detail_len + res.metrics_len > h.len)
						continue;
					r->has_result = 1;
					hx_add_result(test, rank, res.ok, res.aborted, res.seconds,
						      data + sizeof(res), res.detail_len,
						      data + sizeof(res) + res.detail_len, res.metrics_len);
					/* A failure stops the others now; so does leaving while
					 * others wait in a gather this rank will never join. */
					if (!aborted) {
						int waiting = 0, k;

						for (k = 0; k < nranks; k++)
							waiting += hx_r[k].gathered;
						if (!res.ok || waiting) {
							aborted = 1;
							hx_abort_test(test, rank, nranks);
						}
					}
				} else if (h.type == OOB_NOTE && h.arg == OOB_NOTE_EXITING) {
					r->exiting = 1;
				} else if (h.type == OOB_NOTE && h.arg == OOB_NOTE_READY) {
					r->ready = 1;
				} else if (h.type == OOB_NOTE && h.arg == OOB_NOTE_FAILED && !aborted) {
					aborted = 1;
					hx_abort_test(test, rank, nranks);
				}
			}
			if (rc < 0) {
				fprintf(stderr, "harness: garbled message from rank %d\n", rank);
				eof = 1;
			}
			if (!eof)
				continue;
			/* The rank is gone. Expected only where the test says so. */
			{
				char why[160];
				int st = 0;
				double t_end = hx_now() + 2;

				while (!r->exited && hx_now() < t_end) {
					hx_reap(nranks);
					if (!r->exited)
						hx_sleep(0.01);
				}
				if (r->exited)
					st = r->status;
				r->alive = 0;
				/* Deaths by design: peer_death's last rank (_exit(0)); a node_kill's
				 * victim (--fault-lose): SIGKILL when forked here, or its connection
				 * gone when launched (another process's child). */
				const char *design = NULL;
				if (d->fn == t_peer_death && rank == nranks - 1 && r->exited &&
				    WIFEXITED(st) && WEXITSTATUS(st) == 0)
					design = "exited abruptly by design (_exit(0))";
				else if (d->fn == t_faults && rank == hx_opt.fault_lose &&
					 (r->pid <= 0 ||
					  (r->exited && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)))
					design = "lost on purpose (--fault-lose)";
				if (design && !r->has_result) {
					r->expected_exit = 1;
					r->has_result = 1;
					hx_add_result(test, rank, 1, 0, hx_now() - t0, design,
						      strlen(design), NULL, 0);
					if (!aborted)
						hx_try_gather(test, nranks, &aborted);
					continue;
				}
				if (r->exited)
					hx_describe_status(st, why, sizeof(why));
				else
					snprintf(why, sizeof(why), "closed its channel to the parent");
				if (r->pid <= 0 && !r->exiting)
					snprintf(why, sizeof(why), "closed its connection to rank 0's harness");
				{
					char msg[240];
					int n = snprintf(msg, sizeof(msg), "rank process died during the test: %s",
							 why);

					r->has_result = 1;
					hx_add_result(test, rank, 0, 0, hx_now() - t0, msg, (size_t)n, NULL, 0);
				}
				return -1;
			}
		}
		hx_reap(nranks);
	}
}

static int hx_cmp_result(const void *a, const void *b)
{
	const struct hx_result *x = a, *y = b;

	if (x->order != y->order)
		return x->order - y->order;
	return x->rank - y->rank;
}

static void hx_write_json(const char *path, int ok, double secs)
{
	struct js j;
	FILE *f;
	int i;

	qsort(hx_res, (size_t)hx_nres, sizeof(*hx_res), hx_cmp_result);
	js_init(&j);
	js_obj(&j, NULL);
	js_str(&j, "plugin", hx_opt.plugin);
	js_str(&j, "plugin_name", hx_plugin_name[0] ? hx_plugin_name : NULL);
	js_int(&j, "api_version", hx_api_version);
	js_int(&j, "nranks", hx_opt.nranks);
	js_num(&j, "timeout", hx_opt.timeout);
	js_num(&j, "seconds", secs);
	js_arr(&j, "tests");
	for (i = 0; i < hx_nres; i++) {
		struct hx_result *r = &hx_res[i];

		js_obj(&j, NULL);
		js_str(&j, "name", hx_tests[r->test].name);
		js_int(&j, "rank", r->rank);
		js_bool(&j, "ok", r->ok);
		js_str(&j, "detail", r->detail);
		js_num(&j, "seconds", r->seconds);
		if (r->aborted)
			js_bool(&j, "aborted", 1);
		js_raw(&j, "metrics", r->metrics, strlen(r->metrics));
		js_end_obj(&j);
	}
	js_end_arr(&j);
	js_bool(&j, "ok", ok);
	js_end_obj(&j);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%s\n", j.buf) < 0 || fclose(f) != 0) {
		fprintf(stderr, "harness: cannot write --json %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
	}
	js_free(&j);
}

/* One line per test once every rank reported. Returns 1 if it failed anywhere. */
static int hx_print_test(int test, int from)
{
	double secs = 0;
	int i, nfail = 0, n = 0;
	const char *note = "";

	for (i = from; i < hx_nres; i++) {
		if (hx_res[i].test != test)
			continue;
		n++;
		nfail += !hx_res[i].ok;
		if (hx_res[i].seconds > secs)
			secs = hx_res[i].seconds;
		if (hx_res[i].ok && hx_res[i].rank == 0)
			note = hx_res[i].detail;
	}
	if (hx_tests[test].flags & HX_T_INTERNAL && !nfail)
		return 0;
	if (nfail)
		printf("FAIL  %-15s %6.2f s  %d of %d ranks failed\n", hx_tests[test].name, secs,
		       nfail, n);
	else
		printf("ok    %-15s %6.2f s  %s\n", hx_tests[test].name, secs, note);
	fflush(stdout);
	return nfail != 0;
}

/* --launched: the world comes from the launcher; options that need one harness forking every
 * rank are refused. */
static int lx_hook_env(int argc, char **argv, int *rank)
{
	int given = hx_opt.nranks;

	if (hx_opt.bench)
		hx_usage_error("--bench needs the ranks forked by one harness (a shared page), not "
			       "--launched");
	lx_env(argc, argv, rank, &hx_opt.nranks);
	if (hx_nranks_set && given != hx_opt.nranks)
		hx_usage_error("--nranks %d, but the launcher says %d ranks", given, hx_opt.nranks);
	return 0;
}

int main(int argc, char **argv)
{
	const char *tests;
	int fds[HX_MAX_RANKS][2];
	int i, s, nranks, fatal = 0, ntests = 0, nfailed = 0, load_failed = 0, lrank = 0;
	double t_start = hx_now();
	struct sigaction sa;
	pid_t self = getpid();

	hx_parse_args(argc, argv, &tests);
	if (hx_opt.launched && lx_hook_env(argc, argv, &lrank) < 0)
		return 2;
	hx_build_schedule(tests);
	nranks = hx_opt.nranks;
	if (hx_opt.fault_lose >= nranks)
		hx_usage_error("--fault-lose %d: there are %d ranks (0 to %d)", hx_opt.fault_lose,
			       nranks, nranks - 1);
	for (i = 0; i < hx_nsched; i++)
		if (hx_tests[hx_sched[i]].fn == t_flows)
			hx_parse_flows(hx_opt.flows, nranks);
	hx_opt.comm_id = ((uint64_t)time(NULL) << 20) ^ (uint64_t)self ^ 0x5f1ab0c0ffee0000ULL;

	hx_shm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (hx_shm == MAP_FAILED) {
		perror("harness: mmap");
		return 1;
	}
	memset((void *)hx_shm, 0, sizeof(*hx_shm));

	if (hx_opt.launched) {
		int lfds[HX_MAX_RANKS], role = lx_start(lrank, nranks, lfds, &hx_r[0].pid);

		if (role < 0)
			return 1;
		if (role == 0)
			hx_child(lrank, lfds[0], getppid());
		for (i = 0; i < nranks; i++) {
			hx_r[i].alive = 1;
			hx_r[i].rd.fd = lfds[i];
			fcntl(lfds[i], F_SETFL, fcntl(lfds[i], F_GETFL) | O_NONBLOCK);
		}
	}
	for (i = 0; i < nranks && !hx_opt.launched; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds[i]) < 0) {
			perror("harness: socketpair");
			return 1;
		}
	}
	fflush(stdout);
	fflush(stderr);
	for (i = 0; i < nranks && !hx_opt.launched; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("harness: fork");
			hx_kill_all(i);
			return 1;
		}
		if (pid == 0) {
			int k;

			for (k = 0; k < nranks; k++) {
				close(fds[k][0]);
				if (k != i)
					close(fds[k][1]);
			}
			hx_child(i, fds[i][1], self);
		}
		hx_r[i].pid = pid;
		hx_r[i].alive = 1;
		hx_r[i].rd.fd = fds[i][0];
		close(fds[i][1]);
		fcntl(fds[i][0], F_SETFL, fcntl(fds[i][0], F_GETFL) | O_NONBLOCK);
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = hx_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	for (s = 0; s < hx_nsched && !fatal; s++) {
		int test = hx_sched[s], from = hx_nres, alive = 0;

		for (i = 0; i < nranks; i++)
			alive += hx_r[i].alive;
		if (!alive)
			break;
		if (load_failed && test != hx_ntests - 1)
			continue;
		hx_cur_pos = s;
		if (hx_parent_test(test, nranks) < 0)
			fatal = 1;
		if (test == 0 && hx_api_version && hx_plugin_name[0])
			printf("harness: plugin '%s' (ncclNetPlugin_v%d) from %s, %d ranks\n",
			       hx_plugin_name, hx_api_version, hx_opt.plugin, nranks);
		if (hx_print_test(test, from) && test == 0)
			load_failed = 1;
		if (!(hx_tests[test].flags & HX_T_INTERNAL))
			ntests++;
	}

	if (fatal && s < hx_nsched)
		fprintf(stderr, "harness: run stopped in test %s; %d scheduled tests not run\n",
			hx_tests[hx_sched[s - 1]].name, hx_nsched - s);
	hx_cur_pos = hx_nsched;
	if (!fatal) {
		double limit = hx_opt.timeout < 30 ? hx_opt.timeout : 30, t_end;
		int left;

		hx_quitting = 1;
		for (i = 0; i < nranks; i++)
			if (hx_r[i].alive)
				oob_write(hx_r[i].rd.fd, OOB_QUIT, 0, NULL, 0);
		t_end = hx_now() + limit;
		do {
			hx_reap(nranks);
			for (left = 0, i = 0; i < nranks; i++)
				left += !hx_r[i].exited;
			if (left)
				hx_sleep(0.01);
		} while (left && hx_now() < t_end);
		for (i = 0; i < nranks; i++) {
			char why[160], msg[240];
			int n;

			if (hx_r[i].exited && (hx_r[i].expected_exit ||
					       (WIFEXITED(hx_r[i].status) && !WEXITSTATUS(hx_r[i].status))))
				continue;
			if (hx_r[i].exited)
				hx_describe_status(hx_r[i].status, why, sizeof(why));
			else
				snprintf(why, sizeof(why), "did not exit within %.0f s of being told to",
					 limit);
			n = snprintf(msg, sizeof(msg), "rank process at exit: %s", why);
			hx_add_result(hx_ntests - 1, i, 0, 0, 0, msg, (size_t)n, NULL, 0);
		}
	}
	hx_kill_all(nranks);

	/* A test failed if it failed on any rank; load/unload count only when they failed. */
	{
		unsigned char failed[64] = {0};
		int ok;

		for (i = 0; i < hx_nres; i++)
			if (!hx_res[i].ok)
				failed[hx_res[i].test] = 1;
		for (i = 0; i < hx_ntests; i++)
			nfailed += failed[i];
		ok = !fatal && nfailed == 0;
		if (hx_opt.json)
			hx_write_json(hx_opt.json, ok, hx_now() - t_start);
		printf("harness: %d tests, %d failed\n", ntests, nfailed);
		return ok ? 0 : 1;
	}
}
