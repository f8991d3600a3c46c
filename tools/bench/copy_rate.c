/* SPDX-License-Identifier: MIT */
/*
 * copy_rate.c - how many small copies a second the GPU runs, and how long one takes, from one
 * or several processes at once (docs/gpu-path.md, "Why LL is slow at 4 ranks"). The GPU path
 * issues one copy per message; under MPS the copies of every rank meet on the same engines.
 *
 *   make copy-rate && build/simfabric-copy-rate [--procs N] [--mode M] [--bytes B] [--count C]
 *
 * Modes (one copy, or a group of 8 copies to 8 destinations, as an LL step's messages of 8
 * channels):
 *   h2d       cuMemcpyHtoDAsync from pinned host memory
 *   d2d       cuMemcpyDtoDAsync
 *   sep       a group: 8 host-to-device copies in one cuMemcpyBatchAsync (as the plugin's issuer)
 *   gather    a group: memcpy into one pinned staging buffer, one host-to-device copy of it, then
 *             8 device-to-device copies in one cuMemcpyBatchAsync
 *   pageable  as sep, from malloc'd memory (NCCL's buffers look so from the plugin's own context)
 * Each process issues --count copies (groups) back to back on one stream and waits once (the
 * rate), then 100 times one copy (group) and its event, polled (the latency); then it reads the
 * destinations back and fails (exit 3) unless each holds its source's bytes. The processes
 * start the timed part together, once each is ready. Run it under MPS as the ranks do:
 * `nvidia-cuda-mps-control -d` first, or from inside `simfabric launch`. The single modes are
 * plain copies (a device-to-device one may run as a kernel); the plugin issues every copy as
 * a batch with the copy-engine hint, as the group modes do. A group counts as 8 copies (the
 * gathered one's staging copy not among them).
 * It loads CUDA's driver (libcuda.so.1) when it runs, as the plugin does, and says so where there
 * is none; built where cuda.h is.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GROUP 8
#define AREA (64u << 20) /* each destination's span, and the sources' */
#define NSTAGE 8	 /* gather's host staging slots, each reused once its copy is done */
#define MAX_COUNT 100000 /* so that a run ends well within the children's alarm */
#define ALARM_S 600

enum mode { M_H2D, M_D2D, M_SEP, M_GATHER, M_PAGEABLE };
static const char *const mode_names[] = {"h2d", "d2d", "sep", "gather", "pageable"};

struct run {
	enum mode mode;
	size_t bytes;
	CUstream s;
	CUdeviceptr dst, dsrc, dstage;
	char *hpin, *hpage, *hstage;
	CUevent staged[NSTAGE]; /* after each host staging slot's copy */
	unsigned next_stage;
	CUmemcpyAttributes at;
};

/* The driver's calls, by the names cuda.h gives them (cuMemAlloc is cuMemAlloc_v2, ...). */
#define STR(x) #x
#define XSTR(x) STR(x)
#define DRIVER(X)                                                                                  \
	X(cuInit)                                                                                  \
	X(cuDeviceGet)                                                                             \
	X(cuDevicePrimaryCtxRetain)                                                                \
	X(cuCtxSetCurrent)                                                                         \
	X(cuMemAlloc)                                                                              \
	X(cuMemHostAlloc)                                                                          \
	X(cuCtxGetStreamPriorityRange)                                                             \
	X(cuStreamCreateWithPriority)                                                              \
	X(cuEventCreate)                                                                           \
	X(cuMemcpyHtoDAsync)                                                                       \
	X(cuMemcpyDtoDAsync)                                                                       \
	X(cuMemcpyHtoD)                                                                            \
	X(cuMemcpyDtoH)                                                                            \
	X(cuStreamSynchronize)                                                                     \
	X(cuEventRecord)                                                                           \
	X(cuEventQuery)                                                                            \
	X(cuGetErrorString)
#define DECLARE(f) static __typeof__(&f) d_##f;
DRIVER(DECLARE)
static __typeof__(&cuMemcpyBatchAsync) d_cuMemcpyBatchAsync; /* the group modes' only */

/* 0, or -1 having said why (no driver here, or one without a call this program makes). */
static int load_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "copy_rate: no CUDA driver here (%s)\n", dlerror());
		return -1;
	}
#define LOAD(f)                                                                                    \
	if (!(d_##f = (__typeof__(d_##f))dlsym(h, XSTR(f)))) {                                     \
		fprintf(stderr,                                                                    \
			"copy_rate: the CUDA driver lacks %s (a driver for CUDA 13 or later "      \
			"has it)\n",                                                               \
			XSTR(f));                                                                  \
		return -1;                                                                         \
	}
	DRIVER(LOAD)
	d_cuMemcpyBatchAsync = (__typeof__(d_cuMemcpyBatchAsync))dlsym(h, XSTR(cuMemcpyBatchAsync));
	return 0;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void check(CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return;
	const char *s = NULL;
	d_cuGetErrorString(r, &s);
	fprintf(stderr, "copy_rate[%d]: %s: %s\n", (int)getpid(), what, s ? s : "unknown error");
	exit(2);
}

/* The bytes a source holds at x: different for the pinned and the pageable sources. */
static unsigned char pattern(size_t x, unsigned seed)
{
	return (unsigned char)(x * 131u + (x >> 9) + seed);
}

/* Wait until an event has completed (never recorded: at once). */
static void wait_event(CUevent e, const char *what)
{
	CUresult q;
	while ((q = d_cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
		;
	check(q, what);
}

/*
 * Copy (group) i: a single copy at (i % 64) * bytes, from the same offset of its source; a
 * group's k-th copy from ((i % 8) * 8 + k) * bytes to k * AREA / 8 + (i % 8) * bytes (all inside
 * AREA for bytes <= 1 MiB). So each destination always receives the same source bytes, and
 * what it holds at the end can be checked.
 */
static void issue(struct run *r, unsigned i)
{
	size_t one = (size_t)(i % 64) * r->bytes, g = (size_t)(i % 8);
	CUdeviceptr d[GROUP], src[GROUP], stage = 0;
	size_t len[GROUP], idx = 0;
	const char *base = r->mode == M_PAGEABLE ? r->hpage : r->hpin;
	switch (r->mode) {
	case M_H2D:
		check(d_cuMemcpyHtoDAsync(r->dst + one, r->hpin + one, r->bytes, r->s), "H2D copy");
		return;
	case M_D2D:
		check(d_cuMemcpyDtoDAsync(r->dst + one, r->dsrc + one, r->bytes, r->s), "D2D copy");
		return;
	case M_GATHER: {
		/* a slot is written only once its last copy has read it, a wait that counts */
		unsigned j = r->next_stage++ % NSTAGE;
		char *h = r->hstage + (size_t)j * GROUP * r->bytes;
		wait_event(r->staged[j], "a staging slot's copy");
		for (int k = 0; k < GROUP; k++)
			memcpy(h + (size_t)k * r->bytes,
			       r->hpin + (g * GROUP + (size_t)k) * r->bytes, r->bytes);
		stage = r->dstage; /* one is enough: the stream orders its reuse */
		check(d_cuMemcpyHtoDAsync(stage, h, GROUP * r->bytes, r->s),
		      "the gathered H2D copy");
		check(d_cuEventRecord(r->staged[j], r->s), "cuEventRecord");
		break;
	}
	default:
		break;
	}
	for (int k = 0; k < GROUP; k++) {
		d[k] = r->dst + (size_t)k * (AREA / GROUP) + g * r->bytes;
		src[k] = stage
			? stage + (size_t)k * r->bytes
			: (CUdeviceptr)(uintptr_t)(base + (g * GROUP + (size_t)k) * r->bytes);
		len[k] = r->bytes;
	}
	check(d_cuMemcpyBatchAsync(d, src, len, GROUP, &r->at, &idx, 1, r->s), "the batch call");
}

/* Does every destination hold its source's bytes? 0, or 3 having said where not. */
static int verify(struct run *r)
{
	unsigned char *got = malloc(AREA);
	if (!got) {
		fprintf(stderr, "copy_rate: out of memory\n");
		return 2;
	}
	check(d_cuMemcpyDtoH(got, r->dst, AREA), "reading the destinations back");
	int single = r->mode <= M_D2D;
	unsigned seed = r->mode == M_PAGEABLE ? 2 : 1;
	for (unsigned c = 0; c < (single ? 64u : GROUP * GROUP); c++) {
		/* single: copy c at c * bytes; group: g = c / 8, k = c % 8 */
		size_t to = single ? c * r->bytes
				   : (c % GROUP) * (AREA / GROUP) + (c / GROUP) * r->bytes;
		size_t from = single ? c * r->bytes : ((c / GROUP) * GROUP + c % GROUP) * r->bytes;
		for (size_t b = 0; b < r->bytes; b++)
			if (got[to + b] != pattern(from + b, seed)) {
				fprintf(stderr,
					"copy_rate[%d]: %s: destination byte %zu holds %u, not its "
					"source's %u (source byte %zu)\n",
					(int)getpid(), mode_names[r->mode], to + b, got[to + b],
					pattern(from + b, seed), from + b);
				free(got);
				return 3;
			}
	}
	free(got);
	return 0;
}

/* One process: set up, say ready on `ready`, wait for `go`, measure, check. Its exit status. */
static int one_process(enum mode mode, size_t bytes, unsigned count, int ready, int go)
{
	struct run r = {.mode = mode, .bytes = bytes};
	CUdevice dev;
	CUcontext ctx;
	CUevent ev;
	int lo, hi;
	check(d_cuInit(0), "cuInit");
	check(d_cuDeviceGet(&dev, 0), "cuDeviceGet");
	check(d_cuDevicePrimaryCtxRetain(&ctx, dev), "the primary context");
	check(d_cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
	/* only what the mode copies from: 64 processes of one mode hold no other's buffers */
	check(d_cuMemAlloc(&r.dst, AREA), "cuMemAlloc");
	if (mode == M_PAGEABLE) {
		r.hpage = malloc(AREA);
		if (!r.hpage) {
			fprintf(stderr, "copy_rate: out of memory\n");
			return 2;
		}
		for (size_t x = 0; x < AREA; x++)
			r.hpage[x] = (char)pattern(x, 2);
	} else {
		check(d_cuMemHostAlloc((void **)&r.hpin, AREA, 0), "cuMemHostAlloc");
		for (size_t x = 0; x < AREA; x++)
			r.hpin[x] = (char)pattern(x, 1);
	}
	if (mode == M_D2D) {
		check(d_cuMemAlloc(&r.dsrc, AREA), "cuMemAlloc");
		check(d_cuMemcpyHtoD(r.dsrc, r.hpin, AREA), "filling the device source");
	}
	if (mode == M_GATHER) {
		check(d_cuMemAlloc(&r.dstage, (size_t)GROUP * bytes), "cuMemAlloc");
		check(d_cuMemHostAlloc((void **)&r.hstage, (size_t)NSTAGE * GROUP * bytes, 0),
		      "cuMemHostAlloc");
	}
	r.at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
	r.at.flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE; /* as the plugin asks */
	check(d_cuCtxGetStreamPriorityRange(&lo, &hi), "cuCtxGetStreamPriorityRange");
	check(d_cuStreamCreateWithPriority(&r.s, CU_STREAM_NON_BLOCKING, hi), "cuStreamCreate");
	check(d_cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	for (int j = 0; j < NSTAGE; j++)
		check(d_cuEventCreate(&r.staged[j], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	for (unsigned i = 0; i < 20; i++)
		issue(&r, i);
	check(d_cuStreamSynchronize(r.s), "warm-up");
	char c = 1;
	/* every process begins together; ready closed, so that one that never gets here ends the
	 * parent's wait (its read sees the end once no child holds the pipe) */
	int said = write(ready, &c, 1) == 1;
	close(ready);
	if (!said || read(go, &c, 1) != 1)
		return 2;
	double t0 = now();
	for (unsigned i = 0; i < count; i++)
		issue(&r, i);
	double t1 = now();
	check(d_cuStreamSynchronize(r.s), "cuStreamSynchronize");
	double t2 = now(), lat = 0;
	for (unsigned i = 0; i < 100; i++) {
		double a = now();
		issue(&r, i);
		check(d_cuEventRecord(ev, r.s), "cuEventRecord");
		wait_event(ev, "cuEventQuery");
		lat += now() - a;
	}
	check(d_cuStreamSynchronize(r.s), "cuStreamSynchronize");
	unsigned per = mode <= M_D2D ? 1 : GROUP;
	printf("pid %d  %-8s %zu B%s x %u: issue %.2f us, done %.2f us each (%.0f copies/s, "
	       "%.2f GB/s); one alone, post to done: %.2f us\n",
	       (int)getpid(), mode_names[mode], bytes, per > 1 ? " x 8" : "", count,
	       (t1 - t0) / count * 1e6, (t2 - t0) / count * 1e6, count * per / (t2 - t0),
	       (double)count * per * (double)bytes / (t2 - t0) / 1e9, lat / 100 * 1e6);
	fflush(stdout);
	return verify(&r);
}

/* Stop the children started so far (a fork failed, or one died before it was ready). */
static void stop_all(const pid_t *kids, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		kill(kids[k], SIGKILL);
	for (unsigned k = 0; k < n; k++)
		waitpid(kids[k], NULL, 0);
}

static int usage(const char *why)
{
	fprintf(stderr,
		"copy_rate: %s\nusage: simfabric-copy-rate [--procs N (1..64)] [--mode "
		"h2d|d2d|sep|gather|pageable] [--bytes B (16..1048576, a multiple of 16)] "
		"[--count C (1..100000)]\n",
		why);
	return 1;
}

static int number(const char *v, unsigned long long lo, unsigned long long hi,
		  unsigned long long *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi)
		return -1;
	*out = x;
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long long procs = 1, bytes = 8192, count = 4000;
	int mode = M_H2D;
	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char why[160];
		if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
			usage("how many small copies a second the GPU runs (docs/gpu-path.md)");
			return 0;
		}
		if (!v) {
			snprintf(why, sizeof(why), "%.40s needs a value", o);
			return usage(why);
		}
		i++;
		int bad = 0;
		if (!strcmp(o, "--procs"))
			bad = number(v, 1, 64, &procs);
		else if (!strcmp(o, "--bytes"))
			bad = number(v, 16, 1 << 20, &bytes) || bytes % 16;
		else if (!strcmp(o, "--count"))
			bad = number(v, 1, MAX_COUNT, &count);
		else if (!strcmp(o, "--mode")) {
			for (mode = 0; mode <= M_PAGEABLE && strcmp(v, mode_names[mode]); mode++)
				;
			bad = mode > M_PAGEABLE;
		} else {
			snprintf(why, sizeof(why), "unknown option '%.40s'", o);
			return usage(why);
		}
		if (bad) {
			snprintf(why, sizeof(why), "%s: bad value '%.40s'", o, v);
			return usage(why);
		}
	}
	if (load_driver())
		return 2;
	if (mode >= M_SEP && !d_cuMemcpyBatchAsync) {
		fprintf(stderr,
			"copy_rate: --mode %s needs %s, which this CUDA driver lacks (CUDA 13 "
			"or later has it)\n",
			mode_names[mode], XSTR(cuMemcpyBatchAsync));
		return 2;
	}
	int ready[2], go[2];
	if (pipe(ready) || pipe(go)) {
		perror("copy_rate: pipe");
		return 2;
	}
	pid_t kids[64];
	for (unsigned k = 0; k < procs; k++) {
		kids[k] = fork();
		if (kids[k] < 0) {
			perror("copy_rate: fork");
			stop_all(kids, k);
			return 2;
		}
		if (kids[k] == 0) {
			close(ready[0]);
			close(go[1]);
			alarm(ALARM_S); /* a GPU that never runs the copies ends the run */
			_exit(one_process((enum mode)mode, bytes, (unsigned)count, ready[1],
					  go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	/* every child ready, or one gone before it was (then none waits for ever at go) */
	unsigned n_ready = 0;
	char c;
	while (n_ready < procs && read(ready[0], &c, 1) == 1)
		n_ready++;
	if (n_ready < procs) {
		fprintf(stderr, "copy_rate: %u of %llu processes did not get ready\n",
			(unsigned)procs - n_ready, procs);
		stop_all(kids, (unsigned)procs);
		return 2;
	}
	for (unsigned k = 0; k < procs; k++)
		if (write(go[1], &c, 1) != 1) {
			perror("copy_rate: starting the processes");
			stop_all(kids, (unsigned)procs);
			return 2;
		}
	int rc = 0;
	for (unsigned k = 0; k < procs; k++) {
		int st = 0;
		if (waitpid(kids[k], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			if (WIFSIGNALED(st))
				fprintf(stderr, "copy_rate: process %d ended by signal %d%s\n",
					(int)kids[k], WTERMSIG(st),
					WTERMSIG(st) == SIGALRM ? " (not done in time)" : "");
			rc = rc ? rc : WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : 2;
		}
	}
	return rc;
}
