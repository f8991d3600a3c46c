/* SPDX-License-Identifier: MIT */
/*
 * opts.c - the command line, the environment (RANK, WORLD_SIZE,
 * LOCAL_RANK, MASTER_ADDR, MASTER_PORT), the list of steps, and the hash of
 * the options that every rank must share. Every error names the option and
 * the value, and is a usage error (exit status 1).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the one parser of values with units, header-only: its code is compiled here */
#define SF_UNITS_IMPLEMENTATION
#include "sim/core/units.h"
#include "sim/core/version.h"
#include "tools/nccljob/nccljob.h"

static const char usage_text[] =
	"usage: " NJ_PROG " [options]\n"
	"\n"
	"Runs NCCL collectives across the ranks of a job, checks every result exactly and\n"
	"reports the time per size like nccl-tests: a table on rank 0's stdout, and JSON.\n"
	"Start one process per rank with the torchrun-style environment below; rank 0\n"
	"serves the ncclUniqueId over TCP and keeps that channel open for barriers,\n"
	"results and failures.\n"
	"\n"
	"What to run:\n"
	"  --coll LIST          comma-separated, or \"all\" (default allreduce): allreduce,\n"
	"                       allgather, reducescatter, broadcast, reduce, alltoall (grouped\n"
	"                       ncclSend/ncclRecv with every rank), sendrecv (a ring: send to\n"
	"                       rank+1, receive from rank-1)\n"
	"  --min BYTES          smallest size (default 8)\n"
	"  --max BYTES          largest size (default 8M)\n"
	"  --factor F           from --min, multiply by the integer F >= 2 up to --max (default 2)\n"
	"  --sizes LIST         exactly these sizes, comma-separated, instead of --min/--max/--factor\n"
	"                       (BYTES: a number, or with K, M, G or T, binary: 64K = 64KiB =\n"
	"                       65536, 1.5M; the units of simfabric's scenarios)\n"
	"  -b, -e, -f           nccl-tests' spellings of --min, --max, --factor (this program's\n"
	"                       defaults, not nccl-tests' 32M/32M)\n"
	"  --dtype T            int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
	"                       (default float)\n"
	"  --op OP              sum, prod, min or max, for allreduce, reducescatter and reduce\n"
	"                       (default sum)\n"
	"  --root R             the root of broadcast and reduce (default 0)\n"
	"\n"
	"How:\n"
	"  --warmup N           untimed iterations per size (default 5)\n"
	"  --iters N            timed iterations per size (default 20)\n"
	"  -w N, -n N           nccl-tests' spellings of --warmup and --iters\n"
	"  --timing loop|each   loop (default): the timed iterations are enqueued back to back\n"
	"                       between two CUDA events and waited for once; time = the events'\n"
	"                       difference / iters, so small sizes are not dominated by the host.\n"
	"                       each: events and a wait around every iteration (time = their mean;\n"
	"                       the result also gives max_us and the stalls: iterations over the\n"
	"                       median + 5 ms, and their neighbours over it + 1 ms; stall_us their\n"
	"                       excess over it, summed; stall_episodes the runs of them, and\n"
	"                       stall_top_us the largest runs' excess, largest first, up to 8)\n"
	"  --check 0|1|2        0: no checks. 1 (default): the output of the last warm-up\n"
	"                       iteration and the output after the timed ones, each run into a\n"
	"                       poisoned output buffer, all elements compared bit for bit with\n"
	"                       values computed on the host. 2: as 1, and every warm-up\n"
	"                       iteration on its own. Only the root's output of reduce is checked.\n"
	"                       -c 0|1 is nccl-tests' spelling of --check 0|1\n"
	"                       An option given in both spellings with different values is a\n"
	"                       usage error, as is --sizes with -b/-e/-f.\n"
	"  --device N           the CUDA device (default: LOCAL_RANK % the visible devices)\n"
	"  --buffers cuda|nccl  where the send and receive buffers come from: cudaMalloc\n"
	"                       (default) or ncclMemAlloc (cuMem, what NCCL allocates itself)\n"
	"  --register 0|1       1: ncclCommRegister both buffers, so that NCCL may hand them to\n"
	"                       the network plugin (user-buffer registration; default 0)\n"
	"  --blocking 0|1       the communicator's config.blocking (default 0: non-blocking, so\n"
	"                       no NCCL call can hang this program; 1 runs under the watchdog.\n"
	"                       Non-blocking costs NCCL a thread per collective, ~30 us: use 1\n"
	"                       to measure small-message latency)\n"
	"\n"
	"Bounds and output:\n"
	"  --timeout-s S        the whole job's bound, bootstrap included (default 300; seconds,\n"
	"                       or a time with a unit: 90s, 500ms)\n"
	"  --op-timeout-s S     the bound of each wait: communicator init, one warm-up or timed\n"
	"                       batch, a copy, the finalize (default 60)\n"
	"  --json FILE          the results as JSON. A \"%r\" in FILE becomes the rank: then\n"
	"                       every rank writes its own view and rank 0's file is the combined\n"
	"                       one; without \"%r\" only rank 0 writes FILE\n"
	"  -v, --verbose        every rank says what it does, on stderr\n"
	"  --on-peer-loss fail|shrink  what the survivors do when a rank other than 0 is lost\n"
	"                       (killed, crashed): fail (default: every rank aborts, exit 3), or\n"
	"                       shrink: rank 0 waits up to 10 s for the lost ranks' connections to\n"
	"                       close, tells the others, and every survivor gets a communicator\n"
	"                       without them (--shrink-by) and runs the step again, then the rest,\n"
	"                       on the smaller one, every result checked for its size; each survivor\n"
	"                       says so on stderr, the JSON lists the shrinks, and the job exits 0\n"
	"                       if the survivors' results are exact. Rank 0 is the coordinator:\n"
	"                       losing it is fatal. Not with --register 1\n"
	"  --shrink-by reinit|nccl  how the survivors get the smaller communicator: reinit\n"
	"                       (default: abort the old one and join a new one of the survivors,\n"
	"                       ncclCommInitRankConfig with an id rank 0 sends; what works after a\n"
	"                       network error, which leaves NCCL 2.28's communicator unable to\n"
	"                       shrink: ncclCommShrink's ncclCommEnsureReady returns the error), or\n"
	"                       nccl (ncclCommShrink with NCCL_SHRINK_ABORT: for a lost rank that\n"
	"                       left no error, a hang)\n"
	"  --dry-run            no CUDA and no NCCL: the bootstrap, the steps, the failure\n"
	"                       handling and the reports run as usual, and what NCCL would have\n"
	"                       written is computed on the host (the long way) and checked\n"
	"  --inject R:WHAT[:STEP]  rank R fails at step STEP (default 0; steps count from 0 in\n"
	"                       the table's order): setup (its set-up fails), exit (it kills\n"
	"                       itself with SIGKILL), hang (it stops taking part: a timeout),\n"
	"                       stuck (it sits in a call that never returns: the watchdog),\n"
	"                       data (one output element is changed before each check), flip\n"
	"                       (one element of the first warm-up iteration's output is changed\n"
	"                       where the collective wrote it, on the GPU, once: the iterations\n"
	"                       after it overwrite it, so with --warmup 2 or more only --check 2\n"
	"                       sees it), slow (a straggler: the middle timed iteration starts\n"
	"                       20 ms late on rank R, and the others wait for it; --timing each\n"
	"                       shows it as a stall), noisy (slow, and every 7th iteration 2 ms\n"
	"                       late, as a busy host: not stalls; the first 8 ms, a stall of its\n"
	"                       own), nccl\n"
	"                       (--dry-run only: a made-up ncclRemoteError)\n"
	"  -h, --help           this text\n"
	"  --version            the program's and NCCL's versions\n"
	"\n"
	"Sizes, as nccl-tests counts them (count = bytes / element size):\n"
	"  allreduce, broadcast, reduce  count x size: the send (and receive) buffer\n"
	"  sendrecv             count x size: what each rank sends to rank+1\n"
	"  allgather            the receive buffer: nranks x what each rank sends\n"
	"  reducescatter        the send buffer: nranks x what each rank receives\n"
	"  alltoall             the send buffer: nranks x what each rank sends each rank\n"
	"  A size is rounded down to a multiple of the element size (x nranks for allgather,\n"
	"  reducescatter, alltoall); one that rounds to 0 is skipped.\n"
	"  algbw = bytes / time; busbw = algbw x allreduce 2(n-1)/n; allgather, reducescatter,\n"
	"  alltoall (n-1)/n; broadcast, reduce, sendrecv 1. GB/s = 1e9 bytes/s. The time is the\n"
	"  slowest rank's.\n"
	"\n"
	"Environment:\n"
	"  RANK, WORLD_SIZE     this process's rank, the number of ranks (default 0 and 1)\n"
	"  LOCAL_RANK           picks the device (default: RANK)\n"
	"  MASTER_ADDR          where rank 0 listens and the others connect (needed when\n"
	"  MASTER_PORT          WORLD_SIZE > 1; a free TCP port)\n"
	"  CUDA_VISIBLE_DEVICES as usual\n"
	"  NCCL_HOSTID, NCCL_NET  read by NCCL; recorded in the JSON. Every other NCCL_* and\n"
	"                       SIMFABRIC_* variable is NCCL's and simfabric's, not this program's\n"
	"\n"
	"Exit status (every rank exits with the job's status when rank 0 could tell it):\n"
	"  0  every check passed          1  usage, environment, bootstrap or CUDA set-up error\n"
	"  2  wrong data                  3  an NCCL or CUDA error, or a rank was lost\n"
	"  4  a timeout                   128+N  stopped by signal N (SIGINT, SIGTERM)\n"
	"Every rank ends by --timeout-s + 65 s whatever happens (a watchdog guards the calls\n"
	"that cannot be polled). Failures go to stderr as \"nccljob[rank R]: ...\".\n";

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "nccljob: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see --help)\n");
	return -1;
}

/* A size with simfabric's units (sim/core/units.h): "4096", "64K", "1MiB", "1.5M". */
static int parse_bytes(const char *opt, const char *s, size_t *out)
{
	char why[256];
	uint64_t v;

	if (units_parse(s, UNITS_SIZE, UNITS_BARE, &v, why, sizeof(why)) < 0)
		return bad("%s: %s", opt, why);
	if (v > (1ull << 40))
		return bad("%s: '%s' is more than 1T", opt, s);
	*out = (size_t)v;
	return 0;
}

static int parse_int(const char *opt, const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end || errno || v < lo || v > hi)
		return bad("%s: '%s' is not an integer from %ld to %ld", opt, s, lo, hi);
	*out = (int)v;
	return 0;
}

/* Seconds: a bare number ("2.5"), or a time with a unit ("500ms", "90s"). */
static int parse_seconds(const char *opt, const char *s, double *out)
{
	char *end, why[256];
	double v = strtod(s, &end);
	uint64_t ns;

	if (end == s || *end) {
		if (units_parse(s, UNITS_TIME, 0, &ns, why, sizeof(why)) < 0)
			return bad("%s: %s", opt, why);
		v = (double)ns / 1e9;
	}
	if (!(v > 0) || v > 1e7)
		return bad("%s: '%s' is not a time > 0 and at most 1e7 s", opt, s);
	*out = v;
	return 0;
}

static int parse_colls(struct nj_opts *o, const char *s)
{
	char buf[256], *tok, *save;
	int c;

	o->ncolls = 0;
	if (!strcmp(s, "all")) {
		for (c = 0; c < NJ_NCOLL; c++)
			o->colls[o->ncolls++] = c;
		return 0;
	}
	if (strlen(s) >= sizeof(buf))
		return bad("--coll: the list is too long");
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		c = nj_coll_parse(tok);
		if (c < 0)
			return bad("--coll: unknown collective '%s' (allreduce, allgather, "
				   "reducescatter, broadcast, reduce, alltoall, sendrecv or all)", tok);
		if (o->ncolls == NJ_NCOLL)
			return bad("--coll: '%s' names a collective twice", s);
		o->colls[o->ncolls++] = c;
	}
	if (!o->ncolls)
		return bad("--coll: empty list");
	return 0;
}

static int parse_sizes(struct nj_opts *o, const char *s)
{
	char *buf = strdup(s), *tok, *save;
	int rc = 0;

	free(o->sizes);
	o->sizes = calloc(strlen(s) / 2 + 2, sizeof(*o->sizes));
	o->nsizes = 0;
	if (!buf || !o->sizes)
		return bad("out of memory");
	for (tok = strtok_r(buf, ",", &save); tok && !rc; tok = strtok_r(NULL, ",", &save))
		if (!(rc = parse_bytes("--sizes", tok, &o->sizes[o->nsizes])))
			o->nsizes++;
	free(buf);
	if (!rc && !o->nsizes)
		rc = bad("--sizes: empty list");
	return rc;
}

static int parse_inject(struct nj_opts *o, const char *s)
{
	static const char *const kinds[NJ_NINJ] = {
		[NJ_INJ_SETUP] = "setup", [NJ_INJ_EXIT] = "exit", [NJ_INJ_HANG] = "hang",
		[NJ_INJ_DATA] = "data",   [NJ_INJ_NCCL] = "nccl", [NJ_INJ_STUCK] = "stuck",
		[NJ_INJ_FLIP] = "flip",	  [NJ_INJ_SLOW] = "slow",   [NJ_INJ_NOISY] = "noisy",
	};
	char what[16] = "";
	int r, step = 0, n, k;

	n = sscanf(s, "%d:%15[a-z]:%d", &r, what, &step);
	if (n < 2 || r < 0 || step < 0)
		return bad("--inject: '%s' is not RANK:WHAT[:STEP]", s);
	for (k = 1; k < NJ_NINJ; k++)
		if (!strcmp(what, kinds[k]))
			break;
	if (k == NJ_NINJ)
		return bad("--inject: '%s': WHAT is setup, exit, hang, stuck, data, flip, slow, "
			   "noisy or nccl",
			   what);
	o->inject_rank = r;
	o->inject_kind = k;
	o->inject_step = step;
	return 0;
}

enum {
	OPT_COLL = 256, OPT_MIN, OPT_MAX, OPT_FACTOR, OPT_SIZES, OPT_DTYPE, OPT_OP, OPT_ROOT,
	OPT_WARMUP, OPT_ITERS, OPT_TIMING, OPT_CHECK, OPT_DEVICE, OPT_BLOCKING, OPT_TIMEOUT,
	OPT_OP_TIMEOUT, OPT_JSON, OPT_DRY, OPT_INJECT, OPT_VERSION, OPT_BUFFERS, OPT_REGISTER,
	OPT_ON_LOSS, OPT_SHRINK_BY
};

static const struct option long_opts[] = {
	{"coll", required_argument, NULL, OPT_COLL},
	{"min", required_argument, NULL, OPT_MIN},
	{"max", required_argument, NULL, OPT_MAX},
	{"factor", required_argument, NULL, OPT_FACTOR},
	{"sizes", required_argument, NULL, OPT_SIZES},
	{"dtype", required_argument, NULL, OPT_DTYPE},
	{"op", required_argument, NULL, OPT_OP},
	{"root", required_argument, NULL, OPT_ROOT},
	{"warmup", required_argument, NULL, OPT_WARMUP},
	{"iters", required_argument, NULL, OPT_ITERS},
	{"timing", required_argument, NULL, OPT_TIMING},
	{"check", required_argument, NULL, OPT_CHECK},
	{"device", required_argument, NULL, OPT_DEVICE},
	{"blocking", required_argument, NULL, OPT_BLOCKING},
	{"timeout-s", required_argument, NULL, OPT_TIMEOUT},
	{"op-timeout-s", required_argument, NULL, OPT_OP_TIMEOUT},
	{"json", required_argument, NULL, OPT_JSON},
	{"dry-run", no_argument, NULL, OPT_DRY},
	{"inject", required_argument, NULL, OPT_INJECT},
	{"buffers", required_argument, NULL, OPT_BUFFERS},
	{"register", required_argument, NULL, OPT_REGISTER},
	{"on-peer-loss", required_argument, NULL, OPT_ON_LOSS},
	{"shrink-by", required_argument, NULL, OPT_SHRINK_BY},
	{"verbose", no_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

/* 0: run; 1: done (help, version); -1: a usage error, already said */
int opts_parse(struct nj_job *j, int argc, char **argv)
{
	struct nj_opts *o = &j->o;
	size_t min = 8, max = 8 << 20;
	int factor = 2, sweep = 0, c, rc = 0, i;
	/* nccl-tests' short spellings, compared with the long ones once all are read */
	struct alias {
		int key;
		const char *longname;
		int set, lset; /* given as -key, as --longname */
		size_t v, lv;
	} al[] = {{'b', "--min", 0, 0, 0, 0},	 {'e', "--max", 0, 0, 0, 0},
		  {'f', "--factor", 0, 0, 0, 0}, {'w', "--warmup", 0, 0, 0, 0},
		  {'n', "--iters", 0, 0, 0, 0},	 {'c', "--check", 0, 0, 0, 0}};
	struct alias *a;
	int ival;

	*o = (struct nj_opts){.colls = {NJ_ALLREDUCE}, .ncolls = 1, .dtype = NJ_FLOAT,
			      .op = NJ_SUM, .warmup = 5, .iters = 20, .check = 1, .device = -1,
			      .timeout_s = 300, .op_timeout_s = 60, .inject_rank = -1};
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, ":hvb:e:f:n:w:c:", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_COLL: rc = parse_colls(o, optarg); break;
		case OPT_MIN: rc = parse_bytes("--min", optarg, &min); sweep = 1;
			al[0].lset = 1; al[0].lv = min; break;
		case OPT_MAX: rc = parse_bytes("--max", optarg, &max); sweep = 1;
			al[1].lset = 1; al[1].lv = max; break;
		case OPT_FACTOR: rc = parse_int("--factor", optarg, 2, 1 << 20, &factor); sweep = 1;
			al[2].lset = 1; al[2].lv = (size_t)factor; break;
		case 'b': rc = parse_bytes("-b", optarg, &al[0].v); al[0].set = sweep = 1; break;
		case 'e': rc = parse_bytes("-e", optarg, &al[1].v); al[1].set = sweep = 1; break;
		case 'f': rc = parse_int("-f", optarg, 2, 1 << 20, &ival); al[2].v = (size_t)ival;
			al[2].set = sweep = 1; break;
		case 'w': rc = parse_int("-w", optarg, 0, 1 << 20, &ival); al[3].v = (size_t)ival;
			al[3].set = 1; break;
		case 'n': rc = parse_int("-n", optarg, 1, 1 << 20, &ival); al[4].v = (size_t)ival;
			al[4].set = 1; break;
		case 'c':
			if (strcmp(optarg, "0") && strcmp(optarg, "1"))
				rc = bad("-c: '%s' is not 0 or 1 (nccl-tests' -c; --check 2 checks "
					 "every warm-up iteration)", optarg);
			al[5].v = (size_t)(optarg[0] - '0');
			al[5].set = 1;
			break;
		case OPT_SIZES: rc = parse_sizes(o, optarg); break;
		case OPT_DTYPE:
			if ((o->dtype = nj_dtype_parse(optarg)) < 0)
				rc = bad("--dtype: unknown type '%s' (int8 uint8 int32 uint32 int64 "
					 "uint64 half float double bfloat16)", optarg);
			break;
		case OPT_OP:
			if ((o->op = nj_op_parse(optarg)) < 0)
				rc = bad("--op: unknown reduction '%s' (sum prod min max)", optarg);
			break;
		case OPT_ROOT: rc = parse_int("--root", optarg, 0, 1 << 20, &o->root); break;
		case OPT_WARMUP: rc = parse_int("--warmup", optarg, 0, 1 << 20, &o->warmup);
			al[3].lset = 1; al[3].lv = (size_t)o->warmup; break;
		case OPT_ITERS: rc = parse_int("--iters", optarg, 1, 1 << 20, &o->iters);
			al[4].lset = 1; al[4].lv = (size_t)o->iters; break;
		case OPT_TIMING:
			if (strcmp(optarg, "loop") && strcmp(optarg, "each"))
				rc = bad("--timing: '%s' is neither loop nor each", optarg);
			o->each = !strcmp(optarg, "each");
			break;
		case OPT_CHECK: rc = parse_int("--check", optarg, 0, 2, &o->check);
			al[5].lset = 1; al[5].lv = (size_t)o->check; break;
		case OPT_DEVICE: rc = parse_int("--device", optarg, 0, 1024, &o->device); break;
		case OPT_BLOCKING: rc = parse_int("--blocking", optarg, 0, 1, &o->blocking); break;
		case OPT_TIMEOUT: rc = parse_seconds("--timeout-s", optarg, &o->timeout_s); break;
		case OPT_OP_TIMEOUT:
			rc = parse_seconds("--op-timeout-s", optarg, &o->op_timeout_s);
			break;
		case OPT_JSON: o->json = optarg; break;
		case OPT_DRY: o->dry = 1; break;
		case OPT_INJECT: rc = parse_inject(o, optarg); break;
		case OPT_BUFFERS:
			if (strcmp(optarg, "cuda") && strcmp(optarg, "nccl"))
				rc = bad("--buffers: '%s' is neither cuda nor nccl", optarg);
			o->nccl_mem = !strcmp(optarg, "nccl");
			break;
		case OPT_REGISTER: rc = parse_int("--register", optarg, 0, 1, &o->reg); break;
		case OPT_ON_LOSS:
			if (strcmp(optarg, "fail") && strcmp(optarg, "shrink"))
				rc = bad("--on-peer-loss: '%s' is neither fail nor shrink", optarg);
			o->on_loss = !strcmp(optarg, "shrink") ? NJ_LOSS_SHRINK : NJ_LOSS_FAIL;
			break;
		case OPT_SHRINK_BY:
			if (strcmp(optarg, "reinit") && strcmp(optarg, "nccl"))
				rc = bad("--shrink-by: '%s' is neither reinit nor nccl", optarg);
			o->shrink_by = !strcmp(optarg, "nccl") ? NJ_SHRINK_NCCL : NJ_SHRINK_REINIT;
			break;
		case 'v': o->verbose = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			return 1;
		case OPT_VERSION:
			dev_versions(j);
			printf(NJ_PROG " " SF_VERSION " (NCCL %d.%d.%d, CUDA runtime %d.%d)\n",
			       j->nccl_version / 10000, j->nccl_version / 100 % 100,
			       j->nccl_version % 100, j->cuda_runtime / 1000,
			       j->cuda_runtime % 1000 / 10);
			return 1;
		case ':':
			if (optopt && optopt < 256)
				rc = bad("-%c needs a value", optopt);
			else
				rc = bad("%s needs a value", argv[optind - 1]);
			break;
		default:
			rc = bad("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (rc)
		return -1;
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	for (i = 0; i < 6; i++) {
		a = &al[i];
		if (!a->set)
			continue;
		if (a->lset && a->lv != a->v)
			return bad("-%c %zu and %s %zu disagree (one option, two spellings)", a->key,
				   a->v, a->longname, a->lv);
		switch (a->key) {
		case 'b': min = a->v; break;
		case 'e': max = a->v; break;
		case 'f': factor = (int)a->v; break;
		case 'w': o->warmup = (int)a->v; break;
		case 'n': o->iters = (int)a->v; break;
		case 'c': o->check = (int)a->v; break;
		}
	}
	if (o->nsizes && sweep)
		return bad("--sizes and --min/--max/--factor (-b/-e/-f) do not go together");
	if (!o->nsizes) {
		size_t s;

		if (!min || min > max)
			return bad("--min %zu, --max %zu: need 0 < min <= max", min, max);
		o->sizes = calloc(64, sizeof(*o->sizes));
		for (s = min; s <= max && o->nsizes < 64; s *= (size_t)factor) {
			o->sizes[o->nsizes++] = s;
			if (s > max / (size_t)factor)
				break;
		}
	}
	/* a registration belongs to the communicator it was made with */
	if (o->on_loss == NJ_LOSS_SHRINK && o->reg)
		return bad("--on-peer-loss shrink with --register 1: the registrations would have "
			   "to be made again on the shrunk communicator; use one or the other");
	if (o->inject_kind == NJ_INJ_NCCL && !o->dry)
		return bad("--inject R:nccl is only for --dry-run (a real NCCL error cannot be "
			   "made up)");
	return 0;
}

static int parse_env_int(const char *name, const char *v, long lo, long hi, int *out)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (end == v || *end || errno || x < lo || x > hi) {
		fprintf(stderr, "nccljob: %s='%s' is not an integer from %ld to %ld\n", name, v, lo,
			hi);
		return -1;
	}
	*out = (int)x;
	return 0;
}

int opts_env(struct nj_job *j)
{
	const char *rank = getenv("RANK"), *ws = getenv("WORLD_SIZE"), *lr = getenv("LOCAL_RANK");
	int port;

	j->rank = 0;
	j->nranks = 1;
	if ((rank && !ws) || (ws && !rank)) {
		fprintf(stderr, "nccljob: %s is set but %s is not: set both (or neither, for one "
			"rank)\n", rank ? "RANK" : "WORLD_SIZE", rank ? "WORLD_SIZE" : "RANK");
		return -1;
	}
	if (ws && (parse_env_int("WORLD_SIZE", ws, 1, 1024, &j->nranks) < 0 ||
		   parse_env_int("RANK", rank, 0, j->nranks - 1, &j->rank) < 0))
		return -1;
	j->local_rank = j->rank;
	if (lr && parse_env_int("LOCAL_RANK", lr, 0, 1 << 20, &j->local_rank) < 0)
		return -1;
	j->addr = getenv("MASTER_ADDR");
	j->port = getenv("MASTER_PORT");
	if (j->nranks > 1 && (!j->addr || !*j->addr || !j->port)) {
		fprintf(stderr, "nccljob: WORLD_SIZE=%d needs MASTER_ADDR and MASTER_PORT (where rank "
			"0 listens)%s%s\n", j->nranks, j->addr ? "" : "; MASTER_ADDR is not set",
			j->port ? "" : "; MASTER_PORT is not set");
		return -1;
	}
	if (j->port && parse_env_int("MASTER_PORT", j->port, 1, 65535, &port) < 0)
		return -1;
	if (j->o.root >= j->nranks) {
		fprintf(stderr, "nccljob: --root %d: WORLD_SIZE is %d\n", j->o.root, j->nranks);
		return -1;
	}
	if (j->o.inject_kind && j->o.inject_rank >= j->nranks) {
		fprintf(stderr, "nccljob: --inject: rank %d: WORLD_SIZE is %d\n", j->o.inject_rank,
			j->nranks);
		return -1;
	}
	return 0;
}

/* The options that must be the same everywhere, or NCCL would hang. */
uint32_t opts_hash(const struct nj_job *j)
{
	const struct nj_opts *o = &j->o;
	char buf[128];
	uint32_t h = 2166136261u;
	int i;

#define MIX(p, n)                                                        \
	do {                                                             \
		const unsigned char *p_ = (const unsigned char *)(p);    \
		size_t n_ = (n), k_;                                     \
		for (k_ = 0; k_ < n_; k_++)                              \
			h = (h ^ p_[k_]) * 16777619u;                    \
	} while (0)
	for (i = 0; i < o->ncolls; i++)
		MIX(&o->colls[i], sizeof(o->colls[i]));
	for (i = 0; i < o->nsizes; i++)
		MIX(&o->sizes[i], sizeof(o->sizes[i]));
	snprintf(buf, sizeof(buf), "%d %d %d %d %d %d %d %d %d %d %d", o->dtype, o->op, o->root,
		 o->warmup, o->iters, o->check, o->each, o->blocking, o->dry, o->on_loss,
		 o->shrink_by);
	MIX(buf, strlen(buf));
#undef MIX
	return h;
}

/* A step's counts on n ranks: 0, or -1 when the size is too small for one element each. */
static int geometry(struct nj_step *st, size_t es, size_t n)
{
	int split = st->coll == NJ_ALLGATHER || st->coll == NJ_REDUCESCATTER ||
		    st->coll == NJ_ALLTOALL;

	st->chunk = st->req / es / (split ? n : 1);
	if (!st->chunk)
		return -1;
	st->count = st->chunk * (split ? n : 1);
	st->bytes = st->count * es;
	st->in_n = st->coll == NJ_ALLGATHER ? st->chunk : st->count;
	st->out_n = st->coll == NJ_REDUCESCATTER ? st->chunk : st->count;
	return 0;
}

/* Fewer ranks give every step at least one element each, and no more bytes than j->cap. */
void opts_geometry(struct nj_job *j, int n)
{
	for (int s = 0; s < j->nsteps; s++)
		geometry(&j->steps[s], nj_dtype_size(j->o.dtype), (size_t)n);
}

int opts_steps(struct nj_job *j)
{
	size_t es = nj_dtype_size(j->o.dtype), n = (size_t)j->nranks;
	int c, s;

	j->steps = calloc((size_t)(j->o.ncolls * j->o.nsizes), sizeof(*j->steps));
	if (!j->steps)
		return bad("out of memory");
	j->cap = 64;
	for (c = 0; c < j->o.ncolls; c++) {
		for (s = 0; s < j->o.nsizes; s++) {
			struct nj_step *st = &j->steps[j->nsteps];
			int coll = j->o.colls[c];

			st->coll = coll;
			st->req = j->o.sizes[s];
			if (geometry(st, es, n) < 0) {
				size_t len = strlen(j->skipped);

				if (len + 40 < sizeof(j->skipped))
					snprintf(j->skipped + len, sizeof(j->skipped) - len, "%s%s %zu B",
						 len ? ", " : "", nj_coll_name(coll), j->o.sizes[s]);
				else if (!strstr(j->skipped, "..."))
					strcat(j->skipped, ", ...");
				continue;
			}
			if (st->bytes > j->cap)
				j->cap = st->bytes;
			j->nsteps++;
		}
	}
	if (!j->nsteps)
		return bad("no size is large enough for one %s element%s", nj_dtype_name(j->o.dtype),
			   j->nranks > 1 ? " per rank" : "");
	return 0;
}
