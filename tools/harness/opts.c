/* SPDX-License-Identifier: MIT */
/*
 * opts.c - simfabric-harness's command line: the usage text, the options into hx_opt (times,
 * sizes and counts through sim/core/units.h, compiled here), the test schedule and --flows.
 * A bad option ends the program with status 2 (hx_usage_error).
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the one parser of values with units, header-only: its code is compiled here */
#define SF_UNITS_IMPLEMENTATION
#include "sim/core/units.h"
#include "sim/core/version.h"
#include "tools/harness/harness.h"

/* ---- command line ------------------------------------------------------------ */

static void hx_usage(FILE *f)
{
	fprintf(f,
		"usage: simfabric-harness --plugin PATH [options]\n"
		"\n"
		"Drives an NCCL net plugin the way NCCL's proxy does, one process per rank,\n"
		"with no NCCL, MPI or GPU.\n"
		"\n"
		"  --plugin PATH       the plugin library (required)\n"
		"  --nranks N          ranks, each its own emulated node (default 2)\n"
		"  --tests LIST        comma-separated tests, or 'all' (default: all\n"
		"                      non-destructive tests); see --list\n"
		"  --json FILE         write the results as JSON\n"
		"  --timeout SEC       limit per test (default 120; seconds, or 90s, 500ms, ...)\n"
		"  --bound SEC         failure-detection bound (default 10)\n"
		"  --threads T         threads per rank in 'threads' (default 4)\n"
		"  --max-bytes B       largest message (default 64M)\n"
		"  --node-prefix P     node names are P<rank> (default 'node')\n"
		"  --api-version N     use ncclNetPlugin_vN (8..12) instead of the newest\n"
		"  --bench             run the benchmark (2 ranks)\n"
		"  --flows SPEC        run the flows test over SPEC: SRC>DST pairs, comma-\n"
		"                      separated, that stream at once; ';' starts a phase that\n"
		"                      runs after the previous one (default: the ring i>i+1)\n"
		"  --flow-bytes B      bytes each flow sends, in whole messages (default 64M)\n"
		"  --flow-msg B        message size of the flows (default 1M, at most --max-bytes)\n"
		"  --flow-window W     messages in flight per flow, 1 to 8 (default 8)\n"
		"  --corrupt-ok        flows: count messages that arrive wrong (metrics) instead\n"
		"                      of failing\n"
		"  --profiler          v10+: pass profiler handles as NCCL does with a profiler\n"
		"                      loaded, and check the plugin's events (Start per send and\n"
		"                      per receive buffer, one Stop each; metrics profiler_*)\n"
		"  --fault-msgs N      faults: messages each rank sends to the next (default 100,\n"
		"                      at most 1000000)\n"
		"  --fault-bytes B     faults: their size (default 64K, at most --max-bytes)\n"
		"  --fault-gap-us U    faults: pause between a rank's posts, in us, or a time\n"
		"                      with a unit (300us, 1ms; default 0)\n"
		"  --fault-expect E    faults: ok (every message exact), error (each rank gets\n"
		"                      ncclRemoteError and a WARN naming the fault) or either\n"
		"  --fault-lose R      faults: rank R (not 0) is lost on purpose (a node_kill of\n"
		"                      its node): its death is its result; with error, the\n"
		"                      others must see it as ncclRemoteError naming the fault\n"
		"  --launched          this process is one rank, started by a launcher: rank,\n"
		"                      size and rank 0's address from RANK, WORLD_SIZE,\n"
		"                      MASTER_ADDR, MASTER_PORT (or OMPI_COMM_WORLD_RANK/SIZE,\n"
		"                      SLURM_PROCID/NTASKS); rank 0 prints the report\n"
		"  --list              list the tests and exit\n"
		"  -v, --verbose       say more on stderr\n"
		"  -h, --help          this text\n"
		"  --version           simfabric's version\n"
		"\n"
		"Sizes (B) are bytes or take K, M, G, T (binary: 64K = 64KiB = 65536), times\n"
		"ns, us, ms or s: the units of simfabric's scenarios.\n"
		"\n"
		"Exit status: 0 all passed, 1 a test failed, 2 usage error.\n");
}

void hx_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "simfabric-harness: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see --help)\n");
	exit(2);
}

static long hx_parse_long(const char *opt, const char *v, long lo, long hi)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		hx_usage_error("%s: '%s' is not an integer in [%ld, %ld]", opt, v, lo, hi);
	return x;
}

/* A time: a bare number is seconds ("2.5"), else a time with a unit ("500ms", "2s";
 * sim/core/units.h). */
static double hx_parse_secs(const char *opt, const char *v)
{
	char *end, why[256];
	double x;
	uint64_t ns;

	errno = 0;
	x = strtod(v, &end);
	if (end == v || *end || errno) {
		if (units_parse(v, UNITS_TIME, 0, &ns, why, sizeof(why)) < 0)
			hx_usage_error("%s: %s", opt, why);
		x = (double)ns / 1e9;
	}
	if (!(x > 0) || x > 1e6)
		hx_usage_error("%s: '%s' is not a time in (0, 1e6] s (seconds, or 500ms, 2s, ...)",
			       opt, v);
	return x;
}

/* A size with the units grammar (sim/core/units.h): "4096", "64K", "1MiB", "1.5M". */
static size_t hx_parse_bytes(const char *opt, const char *v)
{
	char why[256];
	uint64_t x;

	if (units_parse(v, UNITS_SIZE, UNITS_BARE, &x, why, sizeof(why)) < 0)
		hx_usage_error("%s: %s", opt, why);
	if (x == 0 || x > (1ULL << 40))
		hx_usage_error("%s: '%s' is not a size in 1 B .. 1T", opt, v);
	return (size_t)x;
}

/* A count: a bare number, or with K, M, G (binary, as sizes: 64K = 65536). */
static long hx_parse_count(const char *opt, const char *v, long lo, long hi)
{
	char why[256];
	uint64_t x;

	if (units_parse(v, UNITS_COUNT, UNITS_BARE, &x, why, sizeof(why)) < 0)
		hx_usage_error("%s: %s", opt, why);
	if (x < (uint64_t)lo || x > (uint64_t)hi)
		hx_usage_error("%s: '%s' is not a count in [%ld, %ld]", opt, v, lo, hi);
	return (long)x;
}

/* --fault-gap-us: a bare number is microseconds, else a time with a unit ("1ms"). */
static double hx_parse_gap(const char *opt, const char *v)
{
	char why[256];
	uint64_t ns;
	char *end;
	long us;

	errno = 0;
	us = strtol(v, &end, 10);
	if (end != v && !*end && !errno && us >= 0)
		ns = (uint64_t)us * 1000;
	else if (units_parse(v, UNITS_TIME, 0, &ns, why, sizeof(why)) < 0)
		hx_usage_error("%s: %s", opt, why);
	if (ns > 10000000000ULL)
		hx_usage_error("%s: '%s' is more than 10 s", opt, v);
	return (double)ns / 1e9;
}

static int hx_find_test(const char *name)
{
	int i;

	for (i = 0; i < hx_ntests; i++)
		if (!strcmp(hx_tests[i].name, name) && !(hx_tests[i].flags & HX_T_INTERNAL))
			return i;
	return -1;
}

int hx_sched[64];
int hx_nsched;
int hx_nranks_set;

static void hx_sched_add(int k)
{
	int i;

	for (i = 0; i < hx_nsched; i++)
		if (hx_sched[i] == k)
			return;
	hx_sched[hx_nsched++] = k;
}

void hx_build_schedule(const char *list)
{
	int sel[64], nsel = 0, i, k, term = -1;
	char buf[1024], *tok, *save = NULL;

	if (list) {
		if (strlen(list) >= sizeof(buf))
			hx_usage_error("--tests: list too long");
		snprintf(buf, sizeof(buf), "%s", list);
		for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			if (!strcmp(tok, "all")) {
				for (i = 0; i < hx_ntests; i++)
					if (!hx_tests[i].flags && nsel < 64)
						sel[nsel++] = i;
				continue;
			}
			k = hx_find_test(tok);
			if (k < 0)
				hx_usage_error("--tests: unknown test '%s' (see --list)", tok);
			if (hx_tests[k].flags & HX_T_BENCH)
				hx_opt.bench = 1;
			else if (nsel < 64)
				sel[nsel++] = k;
		}
		if (!nsel && !hx_opt.bench && !hx_opt.flows)
			hx_usage_error("--tests: '%s' names no test", list);
	} else if (!hx_opt.bench && !hx_opt.flows) {
		for (i = 0; i < hx_ntests; i++)
			if (!hx_tests[i].flags)
				sel[nsel++] = i;
	}
	if (hx_opt.flows && nsel < 64) /* --flows names its test */
		sel[nsel++] = hx_find_test("flows");
	hx_sched_add(0); /* load */
	for (i = 0; i < nsel; i++) {
		if (hx_tests[sel[i]].flags & HX_T_TERMINAL) {
			if (term >= 0 && term != sel[i])
				hx_usage_error("--tests: %s and %s both end the run; pick one",
					       hx_tests[term].name, hx_tests[sel[i]].name);
			term = sel[i];
			continue;
		}
		hx_sched_add(sel[i]);
	}
	if (hx_opt.bench) {
		if (hx_nranks_set && hx_opt.nranks != 2)
			hx_usage_error("--bench runs on 2 ranks, not --nranks %d", hx_opt.nranks);
		hx_sched_add(hx_find_test("bench"));
	}
	/* A terminal test leaves a rank or the daemon dead: nothing but unload after it. */
	if (term >= 0)
		hx_sched_add(term);
	hx_sched_add(hx_ntests - 1); /* unload */
}

static void hx_list(void)
{
	int i;

	for (i = 0; i < hx_ntests; i++) {
		const struct hx_test_def *d = &hx_tests[i];

		if (d->flags & HX_T_INTERNAL)
			continue;
		printf("%-15s %-14s %s\n", d->name,
		       (d->flags & HX_T_BENCH)	      ? "[bench]"
		       : (d->flags & HX_T_DESTRUCTIVE) ? "[destructive]"
		       : (d->flags & HX_T_NAMED)       ? "[on request]"
						       : "",
		       d->desc);
	}
}

/* Options without a short spelling: getopt_long returns these. */
enum {
	HX_O_PLUGIN = 256,
	HX_O_NRANKS,
	HX_O_TESTS,
	HX_O_JSON,
	HX_O_TIMEOUT,
	HX_O_BOUND,
	HX_O_THREADS,
	HX_O_MAX_BYTES,
	HX_O_NODE_PREFIX,
	HX_O_API_VERSION,
	HX_O_BENCH,
	HX_O_FLOWS,
	HX_O_FLOW_BYTES,
	HX_O_FLOW_MSG,
	HX_O_FLOW_WINDOW,
	HX_O_CORRUPT_OK,
	HX_O_PROFILER,
	HX_O_FAULT_MSGS,
	HX_O_FAULT_BYTES,
	HX_O_FAULT_GAP_US,
	HX_O_FAULT_EXPECT,
	HX_O_FAULT_LOSE,
	HX_O_LIST,
	HX_O_VERSION,
	HX_O_LAUNCHED,
};

static const struct option hx_long_opts[] = {
	{"plugin", required_argument, NULL, HX_O_PLUGIN},
	{"nranks", required_argument, NULL, HX_O_NRANKS},
	{"tests", required_argument, NULL, HX_O_TESTS},
	{"json", required_argument, NULL, HX_O_JSON},
	{"timeout", required_argument, NULL, HX_O_TIMEOUT},
	{"bound", required_argument, NULL, HX_O_BOUND},
	{"threads", required_argument, NULL, HX_O_THREADS},
	{"max-bytes", required_argument, NULL, HX_O_MAX_BYTES},
	{"node-prefix", required_argument, NULL, HX_O_NODE_PREFIX},
	{"api-version", required_argument, NULL, HX_O_API_VERSION},
	{"bench", no_argument, NULL, HX_O_BENCH},
	{"flows", required_argument, NULL, HX_O_FLOWS},
	{"flow-bytes", required_argument, NULL, HX_O_FLOW_BYTES},
	{"flow-msg", required_argument, NULL, HX_O_FLOW_MSG},
	{"flow-window", required_argument, NULL, HX_O_FLOW_WINDOW},
	{"corrupt-ok", no_argument, NULL, HX_O_CORRUPT_OK},
	{"profiler", no_argument, NULL, HX_O_PROFILER},
	{"fault-msgs", required_argument, NULL, HX_O_FAULT_MSGS},
	{"fault-bytes", required_argument, NULL, HX_O_FAULT_BYTES},
	{"fault-gap-us", required_argument, NULL, HX_O_FAULT_GAP_US},
	{"fault-expect", required_argument, NULL, HX_O_FAULT_EXPECT},
	{"fault-lose", required_argument, NULL, HX_O_FAULT_LOSE},
	{"list", no_argument, NULL, HX_O_LIST},
	{"launched", no_argument, NULL, HX_O_LAUNCHED},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, HX_O_VERSION},
	{NULL, 0, NULL, 0},
};

/* "--name" of the option getopt_long returned as val (for the error messages). */
static const char *hx_opt_name(int val)
{
	static char name[40];
	const struct option *o;

	for (o = hx_long_opts; o->name; o++)
		if (o->val == val) {
			snprintf(name, sizeof(name), "--%s", o->name);
			return name;
		}
	snprintf(name, sizeof(name), "-%c", val);
	return name;
}

/* The option getopt_long refused, as the user wrote it (without any "=value"). */
static const char *hx_bad_opt(char **argv)
{
	static char name[64];
	const char *a = argv[optind - 1], *eq = strchr(a, '=');

	snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
	return name;
}

/* How many long options "--abbr" abbreviates (getopt_long refuses more than one). */
static int hx_prefix_of(const char *abbr)
{
	const struct option *o;
	int n = 0;

	if (strncmp(abbr, "--", 2) != 0)
		return 0;
	for (o = hx_long_opts; o->name; o++)
		n += !strncmp(o->name, abbr + 2, strlen(abbr + 2));
	return n;
}

void hx_parse_args(int argc, char **argv, const char **tests)
{
	int c, list = 0, nranks_set = 0, fault_bytes_set = 0;

	hx_opt.nranks = 2;
	hx_opt.fault_lose = -1;
	hx_opt.timeout = 120;
	hx_opt.bound = 10;
	hx_opt.threads = 4;
	hx_opt.max_bytes = 64u << 20;
	hx_opt.node_prefix = "node";
	hx_opt.flow_bytes = 64u << 20;
	hx_opt.flow_msg = 1u << 20;
	hx_opt.flow_window = HX_FLOW_WINDOW_MAX;
	hx_opt.fault_msgs = 100;
	hx_opt.fault_bytes = 64u << 10;
	*tests = NULL;

	opterr = 0; /* the errors below are one line each, with exit 2 */
	while ((c = getopt_long(argc, argv, "+:hv", hx_long_opts, NULL)) != -1) {
		const char *name = hx_opt_name(c), *v = optarg;

		switch (c) {
		case 'h':
			hx_usage(stdout);
			exit(0);
		case HX_O_VERSION:
			printf("simfabric-harness %s\n", SF_VERSION);
			exit(0);
		case 'v':
			hx_opt.verbose = 1;
			break;
		case HX_O_LIST:
			list = 1;
			break;
		case HX_O_BENCH:
			hx_opt.bench = 1;
			break;
		case HX_O_CORRUPT_OK:
			hx_opt.corrupt_ok = 1;
			break;
		case HX_O_PROFILER:
			hx_opt.profiler = 1;
			break;
		case HX_O_LAUNCHED:
			hx_opt.launched = 1;
			break;
		case HX_O_PLUGIN:
			hx_opt.plugin = v;
			break;
		case HX_O_NRANKS:
			hx_opt.nranks = (int)hx_parse_long(name, v, 2, HX_MAX_RANKS);
			nranks_set = 1;
			break;
		case HX_O_TESTS:
			*tests = v;
			break;
		case HX_O_JSON:
			hx_opt.json = v;
			break;
		case HX_O_TIMEOUT:
			hx_opt.timeout = hx_parse_secs(name, v);
			break;
		case HX_O_BOUND:
			hx_opt.bound = hx_parse_secs(name, v);
			break;
		case HX_O_THREADS:
			hx_opt.threads = (int)hx_parse_long(name, v, 1, HX_MAX_THREADS);
			break;
		case HX_O_MAX_BYTES:
			hx_opt.max_bytes = hx_parse_bytes(name, v);
			break;
		case HX_O_NODE_PREFIX:
			if (!*v || strlen(v) > 48 || strpbrk(v, " \t\n=/"))
				hx_usage_error("--node-prefix: '%s' is not a usable node name prefix", v);
			hx_opt.node_prefix = v;
			break;
		case HX_O_FLOWS:
			hx_opt.flows = v;
			break;
		case HX_O_FLOW_BYTES:
			hx_opt.flow_bytes = hx_parse_bytes(name, v);
			break;
		case HX_O_FLOW_MSG:
			hx_opt.flow_msg = hx_parse_bytes(name, v);
			break;
		case HX_O_FLOW_WINDOW:
			hx_opt.flow_window = (int)hx_parse_long(name, v, 1, HX_FLOW_WINDOW_MAX);
			break;
		case HX_O_FAULT_MSGS:
			hx_opt.fault_msgs = hx_parse_count(name, v, 1, 1000000);
			break;
		case HX_O_FAULT_BYTES:
			hx_opt.fault_bytes = hx_parse_bytes(name, v);
			fault_bytes_set = 1;
			break;
		case HX_O_FAULT_GAP_US:
			hx_opt.fault_gap = hx_parse_gap(name, v);
			break;
		case HX_O_FAULT_EXPECT:
			if (!strcmp(v, "ok"))
				hx_opt.fault_expect = HX_FE_OK;
			else if (!strcmp(v, "error"))
				hx_opt.fault_expect = HX_FE_ERROR;
			else if (!strcmp(v, "either"))
				hx_opt.fault_expect = HX_FE_EITHER;
			else
				hx_usage_error("--fault-expect: '%s' is not ok, error or either", v);
			break;
		case HX_O_FAULT_LOSE:
			hx_opt.fault_lose = (int)hx_parse_long(name, v, 1, HX_MAX_RANKS - 1);
			break;
		case HX_O_API_VERSION:
			hx_opt.api_version = (int)hx_parse_long(name, v, 8, 12);
			break;
		case ':':
			hx_usage_error("%s needs a value", optopt ? hx_opt_name(optopt) : hx_bad_opt(argv));
		default: /* '?': unknown, ambiguous, or a value given to a flag */
			if (optopt && optopt < 256)
				hx_usage_error("unknown option '-%c'", optopt);
			if (optopt && strchr(argv[optind - 1], '='))
				hx_usage_error("%s takes no value", hx_opt_name(optopt));
			if (hx_prefix_of(hx_bad_opt(argv)) > 1)
				hx_usage_error("ambiguous option '%s'", hx_bad_opt(argv));
			hx_usage_error("unknown option '%s'", hx_bad_opt(argv));
		}
	}
	if (optind < argc)
		hx_usage_error("unexpected argument '%s'", argv[optind]);
	if (list) {
		hx_list();
		exit(0);
	}
	if (!hx_opt.plugin)
		hx_usage_error("--plugin PATH is required");
	if (access(hx_opt.plugin, R_OK) != 0 && strchr(hx_opt.plugin, '/'))
		hx_usage_error("--plugin: cannot read '%s': %s", hx_opt.plugin, strerror(errno));
	hx_nranks_set = nranks_set;
	if (!fault_bytes_set && hx_opt.fault_bytes > hx_opt.max_bytes)
		hx_opt.fault_bytes = hx_opt.max_bytes; /* the default follows --max-bytes */
	if (hx_opt.fault_bytes > hx_opt.max_bytes || hx_opt.fault_bytes > INT_MAX)
		hx_usage_error("--fault-bytes: %zu bytes is more than --max-bytes %zu",
			       hx_opt.fault_bytes, hx_opt.max_bytes);
}

/* "0>4,1>5;0>1": SRC>DST pairs, ',' within a phase, ';' between phases. NULL: the ring.
 * Checks the other flows options too: only when the flows test runs. */
void hx_parse_flows(const char *spec, int nranks)
{
	const char *p = spec;
	int phase = 0;

	if (hx_opt.flow_msg > hx_opt.max_bytes)
		hx_usage_error("--flow-msg: %zu bytes is more than --max-bytes %zu", hx_opt.flow_msg,
			       hx_opt.max_bytes);
	if (hx_opt.flow_msg > INT_MAX)
		hx_usage_error("--flow-msg: %zu bytes does not fit the int sizes test reports",
			       hx_opt.flow_msg);
	if (hx_opt.flow_bytes / hx_opt.flow_msg >= 100000000)
		hx_usage_error("--flow-bytes: %zu bytes in %zu-byte messages is 10^8 or more of "
			       "them", hx_opt.flow_bytes, hx_opt.flow_msg);
	if (!spec) {
		for (int i = 0; i < nranks && i < HX_MAX_FLOWS; i++)
			hx_flows[hx_nflows++] = (struct hx_flow){0, i, (i + 1) % nranks};
		hx_nphases = 1;
		return;
	}
	for (;;) {
		char *end;
		long s, d;

		errno = 0;
		s = strtol(p, &end, 10);
		if (end == p || *end != '>' || errno)
			hx_usage_error("--flows: '%s': expected SRC>DST at '%s'", spec, p);
		p = end + 1;
		d = strtol(p, &end, 10);
		if (end == p || errno)
			hx_usage_error("--flows: '%s': expected a destination rank at '%s'", spec, p);
		if (s < 0 || s >= nranks || d < 0 || d >= nranks || s == d)
			hx_usage_error("--flows: '%ld>%ld': ranks are 0..%d and a flow needs two", s, d,
				       nranks - 1);
		if (hx_nflows == HX_MAX_FLOWS)
			hx_usage_error("--flows: more than %d flows", HX_MAX_FLOWS);
		hx_flows[hx_nflows++] = (struct hx_flow){phase, (int)s, (int)d};
		p = end;
		if (!*p)
			break;
		if (*p == ';')
			phase++;
		else if (*p != ',')
			hx_usage_error("--flows: '%s': unexpected '%c'", spec, *p);
		p++; /* an empty phase or a trailing separator fails the next strtol */
	}
	hx_nphases = phase + 1;
}
