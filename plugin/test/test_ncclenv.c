/* SPDX-License-Identifier: MIT */
/*
 * test_ncclenv.c - the NCCL settings of the emulated GPUDirect NIC (plugin/ncclenv.c): every
 * decision of SIMFABRIC_LL128 against the user's NCCL_PROTO, the GPU path and the ranks per
 * node, and what sfenv_apply leaves in the environment.
 */

#include "plugin/ncclenv.c"

#include "sim/test/check.h"

_Atomic(ncclDebugLogger_t) plog_fn; /* silent: no NCCL here */

static const struct {
	enum sfenv_ll128 mode;
	int gpu_on;
	const char *proto, *local_world;
	int want;
	const char *why; /* a part of the reason */
} cases[] = {
	{SFENV_LL128_AUTO, 1, NULL, "1", 1, "its own node"},
	{SFENV_LL128_AUTO, 1, NULL, "2", 0, "LOCAL_WORLD_SIZE=2 GPUs in this node"},
	{SFENV_LL128_AUTO, 1, NULL, NULL, 0, "LOCAL_WORLD_SIZE is unset"},
	{SFENV_LL128_AUTO, 1, "Simple", "1", 0, "NCCL_PROTO is set (Simple)"},
	{SFENV_LL128_AUTO, 0, NULL, "1", 0, "the GPU path is off"},
	{SFENV_LL128_ON, 1, NULL, "8", 1, "SIMFABRIC_LL128=on"},
	{SFENV_LL128_ON, 1, NULL, NULL, 1, "SIMFABRIC_LL128=on"},
	{SFENV_LL128_ON, 0, NULL, "1", 0, "the GPU path is off"},
	{SFENV_LL128_ON, 1, "^LL128", "1", 0, "yours stands"},
	{SFENV_LL128_OFF, 1, NULL, "1", 0, "SIMFABRIC_LL128=off"},
};

int main(void)
{
	char why[200];
	enum sfenv_ll128 m = SFENV_LL128_OFF;
	CHECK(sfenv_ll128_parse(NULL, &m, why, sizeof why) == 0 && m == SFENV_LL128_AUTO,
	      "unset is auto");
	CHECK(sfenv_ll128_parse("", &m, why, sizeof why) == 0 && m == SFENV_LL128_AUTO,
	      "empty is auto");
	CHECK(sfenv_ll128_parse("on", &m, why, sizeof why) == 0 && m == SFENV_LL128_ON, "on");
	CHECK(sfenv_ll128_parse("off", &m, why, sizeof why) == 0 && m == SFENV_LL128_OFF, "off");
	CHECK(sfenv_ll128_parse("yes", &m, why, sizeof why) == -EINVAL &&
		      !strcmp(why, "SIMFABRIC_LL128='yes' is not one of auto, on, off"),
	      "a bad value names itself: %s", why);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = sfenv_ll128_decide(cases[i].mode, cases[i].gpu_on, cases[i].proto,
					     cases[i].local_world, why, sizeof why);
		CHECK(got == cases[i].want && strstr(why, cases[i].why), "case %zu: %d (%s)", i,
		      got, why);
	}

	/* sfenv_apply: only where the user has not set them, and only with the GPU path on */
	unsetenv("NCCL_PROTO");
	unsetenv("NCCL_NET_GDR_LEVEL");
	setenv("LOCAL_WORLD_SIZE", "1", 1);
	unsetenv("SIMFABRIC_LL128");
	CHECK(sfenv_apply(0, why, sizeof why) == 0 && !getenv("NCCL_PROTO") &&
		      !getenv("NCCL_NET_GDR_LEVEL"),
	      "GPU path off: nothing set");
	CHECK(sfenv_apply(1, why, sizeof why) == 0 && getenv("NCCL_PROTO") &&
		      !strcmp(getenv("NCCL_PROTO"), "LL,LL128,Simple") &&
		      !strcmp(getenv("NCCL_NET_GDR_LEVEL"), "SYS"),
	      "GPU path on, one GPU per node: both set");
	setenv("NCCL_PROTO", "Simple", 1);
	setenv("NCCL_NET_GDR_LEVEL", "PHB", 1);
	CHECK(sfenv_apply(1, why, sizeof why) == 0 && !strcmp(getenv("NCCL_PROTO"), "Simple") &&
		      !strcmp(getenv("NCCL_NET_GDR_LEVEL"), "PHB"),
	      "the user's values stand");
	unsetenv("NCCL_PROTO");
	setenv("SIMFABRIC_LL128", "maybe", 1);
	CHECK(sfenv_apply(1, why, sizeof why) == -EINVAL && strstr(why, "'maybe'") &&
		      !getenv("NCCL_PROTO"),
	      "a bad SIMFABRIC_LL128 is an error, and sets nothing: %s", why);

	if (failures) {
		fprintf(stderr, "test_ncclenv: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_ncclenv: %d checks passed\n", checks);
	return 0;
}
