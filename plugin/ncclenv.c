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

int sfenv_word(const char *name, const char *v, const char *const *words, int *out, char *why,
	       size_t cap)
{
	int n = 0, len = 0;
	*out = 0;
	if (!v || !*v)
		return 0;
	for (; words[n]; n++)
		if (!strcmp(v, words[n])) {
			*out = n;
			return 0;
		}
	if (n == 2) {
		snprintf(why, cap, "%s='%.40s' is neither %s nor %s", name, v, words[0], words[1]);
		return -EINVAL;
	}
	len = snprintf(why, cap, "%s='%.40s' is not one of ", name, v);
	for (int i = 0; i < n && len >= 0 && (size_t)len < cap; i++)
		len += snprintf(why + len, cap - (size_t)len, "%s%s", i ? ", " : "", words[i]);
	return -EINVAL;
}

int sfenv_ll128_parse(const char *v, enum sfenv_ll128 *out, char *why, size_t cap)
{
	/* enum sfenv_ll128's order */
	static const char *const words[] = {"auto", "on", "off", NULL};
	int i;
	int rc = sfenv_word("SIMFABRIC_LL128", v, words, &i, why, cap);
	*out = (enum sfenv_ll128)i;
	return rc;
}

int sfenv_ll128_decide(enum sfenv_ll128 mode, int gpu_on, const char *nccl_proto,
		       const char *gdr_level, const char *local_world, int own_node, char *why,
		       size_t cap)
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
	if (gdr_level && strcmp(gdr_level, "SYS") && strcmp(gdr_level, "PHB")) {
		snprintf(why, cap,
			 "NCCL_NET_GDR_LEVEL=%.20s may keep GPUDirect off through this NIC, and "
			 "LL128 over host memory is what NCCL keeps off",
			 gdr_level);
		return 0;
	}
	if (mode == SFENV_LL128_ON) {
		snprintf(why, cap, "SIMFABRIC_LL128=on");
		return 1;
	}
	if (!local_world || strcmp(local_world, "1") || !own_node) {
		snprintf(why, cap,
			 "%s: between GPUs of one node NCCL chooses for itself "
			 "(SIMFABRIC_LL128=on to enable it anyway)",
			 !local_world ? "LOCAL_WORLD_SIZE is unset, so this node may have other "
					"GPUs"
				 : !own_node ? "neither NCCL_HOSTID nor SIMFABRIC_NODE names this "
					       "rank's node"
					     : "this node has several GPUs (LOCAL_WORLD_SIZE)");
		return 0;
	}
	snprintf(why, cap, "each rank is its own node (LOCAL_WORLD_SIZE=1)");
	return 1;
}

int sfenv_check(char *why, size_t cap)
{
	enum sfenv_ll128 mode;
	return sfenv_ll128_parse(getenv("SIMFABRIC_LL128"), &mode, why, cap);
}

static int applied; /* a later init (another ctx) would read our own values back as the user's */

int sfenv_apply(int gpu_on, char *why, size_t cap)
{
	enum sfenv_ll128 mode;
	int rc = sfenv_ll128_parse(getenv("SIMFABRIC_LL128"), &mode, why, cap);
	if (rc)
		return rc;
	static int told;
	const char *orc = getenv("NCCL_NET_OPTIONAL_RECV_COMPLETION");
	if (!told && orc && *orc && strtol(orc, NULL, 0) == 0) {
		told = 1; /* NCCL then marks no receive as read while it fills (plugin/data.c) */
		PWARN("NCCL_NET_OPTIONAL_RECV_COMPLETION=%s: NCCL will not mark its LL and LL128 "
		      "receives, so their lines land before the model's delivery time on a "
		      "modelled "
		      "fabric, and small messages run faster than the fabric carries them",
		      orc);
	}
	if (!gpu_on || applied)
		return 0;
	applied = 1;
	const char *user_gdr = getenv("NCCL_NET_GDR_LEVEL");
	int own_node = (getenv("NCCL_HOSTID") && *getenv("NCCL_HOSTID")) ||
		(getenv("SIMFABRIC_NODE") && *getenv("SIMFABRIC_NODE"));
	char r[200];
	int ll128 = sfenv_ll128_decide(mode, gpu_on, getenv("NCCL_PROTO"), user_gdr,
				       getenv("LOCAL_WORLD_SIZE"), own_node, r, sizeof(r));
	if (!user_gdr) {
		setenv("NCCL_NET_GDR_LEVEL", "SYS", 0);
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU data path on: set NCCL_NET_GDR_LEVEL=SYS so that "
		      "NCCL uses GPUDirect through this NIC");
	}
	if (ll128) {
		setenv("NCCL_PROTO", ALL_PROTOCOLS, 0);
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU data path on: set NCCL_PROTO=%s so that NCCL may use LL128 over this "
		      "NIC, as over a NIC next to the GPU (%s)",
		      ALL_PROTOCOLS, r);
	} else
		PINFO(NCCL_INIT | NCCL_NET, "LL128 over this NIC left to NCCL: %s", r);
	return 0;
}
