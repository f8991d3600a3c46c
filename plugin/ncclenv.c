/* SPDX-License-Identifier: MIT */
/*
 * ncclenv.c - the NCCL settings of an emulated GPUDirect NIC: see ncclenv.h.
 */
#include "plugin/ncclenv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/plog.h"

/* What NCCL would allow for a NIC next to the GPU: every protocol (src/graph/tuning.cc). */
#define ALL_PROTOCOLS "LL,LL128,Simple"

int sfenv_ll128_parse(const char *v, enum sfenv_ll128 *out, char *why, size_t cap)
{
	static const struct {
		const char *name;
		enum sfenv_ll128 mode;
	} names[] = {{"auto", SFENV_LL128_AUTO}, {"on", SFENV_LL128_ON}, {"off", SFENV_LL128_OFF}};
	if (!v || !*v) {
		*out = SFENV_LL128_AUTO;
		return 0;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(v, names[i].name)) {
			*out = names[i].mode;
			return 0;
		}
	snprintf(why, cap, "SIMFABRIC_LL128='%.40s' is not one of auto, on, off", v);
	return -EINVAL;
}

int sfenv_ll128_decide(enum sfenv_ll128 mode, int gpu_on, const char *nccl_proto,
		       const char *local_world, char *why, size_t cap)
{
	if (mode == SFENV_LL128_OFF) {
		snprintf(why, cap, "SIMFABRIC_LL128=off");
		return 0;
	}
	if (nccl_proto) {
		snprintf(why, cap, "NCCL_PROTO is set (%.60s): yours stands", nccl_proto);
		return 0;
	}
	if (!gpu_on) {
		snprintf(why, cap,
			 "the GPU path is off: LL128 over host memory is what NCCL keeps off");
		return 0;
	}
	if (mode == SFENV_LL128_ON) {
		snprintf(why, cap, "SIMFABRIC_LL128=on");
		return 1;
	}
	if (!local_world || strcmp(local_world, "1")) {
		snprintf(why, cap,
			 "%s%.20s%s: between GPUs of one node NCCL chooses for itself "
			 "(SIMFABRIC_LL128=on to enable it anyway)",
			 local_world ? "LOCAL_WORLD_SIZE=" : "LOCAL_WORLD_SIZE is unset",
			 local_world ? local_world : "",
			 local_world ? " GPUs in this node" : ", so this node may have other GPUs");
		return 0;
	}
	snprintf(why, cap, "each rank is its own node (LOCAL_WORLD_SIZE=1)");
	return 1;
}

int sfenv_apply(int gpu_on, char *why, size_t cap)
{
	enum sfenv_ll128 mode;
	int rc = sfenv_ll128_parse(getenv("SIMFABRIC_LL128"), &mode, why, cap);
	if (rc)
		return rc;
	if (!gpu_on)
		return 0;
	if (!getenv("NCCL_NET_GDR_LEVEL")) {
		setenv("NCCL_NET_GDR_LEVEL", "SYS", 0);
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU data path on: set NCCL_NET_GDR_LEVEL=SYS so that "
		      "NCCL uses GPUDirect through this NIC");
	}
	char r[160];
	if (sfenv_ll128_decide(mode, gpu_on, getenv("NCCL_PROTO"), getenv("LOCAL_WORLD_SIZE"), r,
			       sizeof(r))) {
		setenv("NCCL_PROTO", ALL_PROTOCOLS, 0);
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU data path on: set NCCL_PROTO=%s so that NCCL may use LL128 over this "
		      "NIC, as over a NIC next to the GPU (%s)",
		      ALL_PROTOCOLS, r);
	} else
		PINFO(NCCL_INIT | NCCL_NET, "LL128 over this NIC left to NCCL: %s", r);
	return 0;
}
