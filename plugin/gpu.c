/* SPDX-License-Identifier: MIT */
/*
 * gpu.c - the GPU data path (see gpu.h): its state and its mode. The exports and their server
 * are in gpu_share.c, the copy engine in gpu_copy.c, gpu_issue.c and gpu_kern.c (gpu_int.h).
 */
#include "plugin/gpu_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "plugin/ncclenv.h"
#include "plugin/plog.h"
#include "sim/core/ctl.h"

/* ---- the mode ---------------------------------------------------------------------------- */

/*
 * A whole number from 1 to max in the variable name, into *v (left as it is when unset); else a
 * setup error naming it, and -1. what: "a number", "a byte count".
 */
static int env_count(const char *name, const char *what, uint64_t max, uint64_t *v)
{
	const char *e = getenv(name);
	if (!e || !*e)
		return 0;
	char *end = NULL;
	unsigned long long n = strtoull(e, &end, 10);
	if (*end || e[0] == '-' || n < 1 || n > max) {
		G.setup_err = -EINVAL;
		snprintf(G.setup_why, sizeof(G.setup_why), "%s='%.40s' is not %s from 1 to %llu",
			 name, e, what, (unsigned long long)max);
		return -1;
	}
	*v = n;
	return 0;
}

/* A setting that is one of two words (unset: the first): *second says which; -1 if neither. */
static int env_either(const char *name, const char *first, const char *second, int *is_second)
{
	const char *const words[] = {first, second, NULL};
	if (!sfenv_word(name, getenv(name), words, is_second, G.setup_why, sizeof(G.setup_why)))
		return 0;
	G.setup_err = -EINVAL;
	return -1;
}

static void setup_once(void)
{
	const char *v = getenv("SIMFABRIC_GPU");
	if (!v || !*v)
		v = "auto";
	int want_on = !strcmp(v, "on");
	if (!strcmp(v, "off")) {
		snprintf(G.describe, sizeof(G.describe), "off (SIMFABRIC_GPU=off)");
		return;
	}
	if (!want_on && strcmp(v, "auto")) {
		G.setup_err = -EINVAL;
		snprintf(G.setup_why, sizeof(G.setup_why),
			 "SIMFABRIC_GPU='%.40s' is not one of auto, on, off", v);
		return;
	}
	const char *cc = getenv("SIMFABRIC_GPU_COPY_CONTEXT");
	if (cc && *cc && strcmp(cc, "auto")) {
		if (!strcmp(cc, "own"))
			G.copy_ctx = COPY_CTX_OWN;
		else if (!strcmp(cc, "app"))
			G.copy_ctx = COPY_CTX_APP;
		else {
			G.setup_err = -EINVAL;
			snprintf(G.setup_why, sizeof(G.setup_why),
				 "SIMFABRIC_GPU_COPY_CONTEXT='%.40s' is not one of auto, own, app",
				 cc);
			return;
		}
	}
	uint64_t nv = 1;
	if (env_count("SIMFABRIC_GPU_STREAMS", "a number", SFGPU_MAX_STREAMS, &nv))
		return;
	G.own_streams = (int)nv;
	if (env_either("SIMFABRIC_GPU_SMALL", "off", "kernel", &G.small_kernel))
		return;
	G.small_max = SFK_SMALL_MAX;
	if (env_count("SIMFABRIC_GPU_SMALL_MAX", "a byte count", SFK_SLOT, &G.small_max))
		return;
	G.batch_max = SFGPU_BATCH_MAX;
	if (env_count("SIMFABRIC_GPU_BATCH_MAX", "a number", SFGPU_BATCH_MAX, &G.batch_max))
		return;
	if (env_either("SIMFABRIC_GPU_ISSUER", "thread", "sender", &G.sender_issues))
		return;
	/* whole by default: measured against off and pieces in docs/gpu-path.md */
	static const char *const arm_words[] = {"whole", "pieces", "off", NULL};
	int arm = 0;
	if (sfenv_word("SIMFABRIC_GPU_ARM", getenv("SIMFABRIC_GPU_ARM"), arm_words, &arm,
		       G.setup_why, sizeof(G.setup_why))) {
		G.setup_err = -EINVAL;
		return;
	}
	G.arm_off = arm == 2;
	sfgpu_dma.arm_whole = arm == 0;
	if (G.arm_off) /* the channel then never asks: held pieces start at their times */
		sfgpu_dma.arm = NULL, sfgpu_dma.fire = NULL;
	uint64_t ahead_us = SFGPU_ARM_AHEAD_NS / 1000;
	if (env_count("SIMFABRIC_GPU_ARM_AHEAD_US", "a number of microseconds", 1000000, &ahead_us))
		return;
	sfgpu_dma.arm_ahead_ns = (int64_t)ahead_us * 1000;
	char why[160];
	int rc = cudadrv_load(&G.cu, !want_on, why, sizeof(why));
	if (rc == 0) {
		cu_result r = G.cu.Init(0);
		int n = 0;
		if (r == CU_SUCCESS)
			r = G.cu.DeviceGetCount(&n);
		if (r != CU_SUCCESS || n < 1) {
			snprintf(why, sizeof(why), "CUDA has no usable device (%s, %d device(s))",
				 r ? gpu_cuerr(r) : "no error", n);
			rc = -ENODEV;
		}
	}
	if (rc) {
		if (want_on) {
			G.setup_err = rc;
			snprintf(G.setup_why, sizeof(G.setup_why), "SIMFABRIC_GPU=on, but %s", why);
		}
		snprintf(G.describe, sizeof(G.describe), "off (%s)", why);
		return;
	}
	int drv = 0, vmm = 0, fd = 0, major = 0;
	G.cu.DriverGetVersion(&drv);
	G.cu.DeviceGetAttribute(&vmm, CU_DA_VMM_SUPPORTED, 0);
	G.cu.DeviceGetAttribute(&fd, CU_DA_POSIX_FD_SUPPORTED, 0);
	G.cu.DeviceGetAttribute(&major, CU_DA_COMPUTE_MAJOR, 0);
	/*
	 * The socket's name is visible to every local user (/proc/net/unix); the secret is only
	 * in the channels' shared memory, which only the peers map. A sender that was pointed at
	 * this server by a lying receiver cannot ask without it.
	 */
	unsigned char rnd[8 + SFGPU_SECRET_HEX / 2];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(G.describe, sizeof(G.describe),
			 "off (no random bytes for the export "
			 "server's secret: %s)",
			 strerror(errno));
		return;
	}
	char hex[2 * sizeof(rnd) + 1];
	gpu_hex_put(hex, rnd, sizeof(rnd));
	snprintf(G.name, sizeof(G.name), "@sfgpu-%.16s", hex);
	snprintf(G.secret, sizeof(G.secret), "%s", hex + 16);
	snprintf(G.where, sizeof(G.where), "%.23s#%.32s", G.name, G.secret);
	G.mode = 1;
	cu_ctx cur = NULL, ctx_ignored;
	cu_stream ignored;
	char why2[160];
	G.cu.CtxGetCurrent(&cur);
	if (cur) /* early if we can; else with the first copy (see copy_stream) */
		(void)copy_stream(cur, 0, &ctx_ignored, &ignored, why2, sizeof(why2));
	snprintf(G.describe, sizeof(G.describe),
		 "on (one-sided copies into the receiver's GPU memory; driver %d, compute "
		 "capability %d.x, cuMem POSIX-fd export %s; copy context %s, copy engine %s; "
		 "held copies %s)",
		 drv, major, vmm && fd ? "yes" : "no, cudaMalloc memory only",
		 G.copy_ctx == COPY_CTX_OWN	      ? "own"
			 : G.copy_ctx == COPY_CTX_APP ? "the application's"
						      : "auto (own under MPS)",
		 G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1 ? "asked for (batch copy hint)"
								  : "not asked for (driver < "
								    "12.8)",
		 G.arm_off ? "start at their arrival (SIMFABRIC_GPU_ARM=off)"
			 : !G.cu.StreamWaitValue32 ? "start at their arrival (no "
						     "cuStreamWaitValue32)"
			 : sfgpu_dma.arm_whole ? "armed ahead whole where copies run in our own "
						 "context"
					       : "armed ahead in pieces where copies run in our "
						 "own "
						 "context");
}

int sfgpu_setup(char *why, size_t cap)
{
	pthread_once(&G.once, setup_once);
	if (G.setup_err) {
		snprintf(why, cap, "%s", G.setup_why);
		return G.setup_err;
	}
	return G.mode;
}

int sfgpu_on(void)
{
	return G.mode;
}

const char *sfgpu_describe(void)
{
	return G.describe[0] ? G.describe : "off (not set up)";
}

const char *sfgpu_where(void)
{
	return G.where;
}
