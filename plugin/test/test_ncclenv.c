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
	const char *proto, *gdr, *local_world;
	int own_node;
	int want;
	const char *why; /* a part of the reason */
} decide_cases[] = {
	{SFENV_LL128_AUTO, 1, NULL, NULL, "1", 1, 1, "its own node"},
	{SFENV_LL128_AUTO, 1, NULL, "SYS", "1", 1, 1, "its own node"},
	{SFENV_LL128_AUTO, 1, NULL, "PHB", "1", 1, 1, "its own node"},
	{SFENV_LL128_AUTO, 1, NULL, NULL, "2", 1, 0, "several GPUs (LOCAL_WORLD_SIZE)"},
	{SFENV_LL128_AUTO, 1, NULL, NULL, NULL, 1, 0, "LOCAL_WORLD_SIZE is unset"},
	{SFENV_LL128_AUTO, 1, NULL, NULL, "1", 0, 0, "neither NCCL_HOSTID nor SIMFABRIC_NODE"},
	{SFENV_LL128_AUTO, 1, "Simple", NULL, "1", 1, 0, "NCCL_PROTO is set (Simple)"},
	{SFENV_LL128_AUTO, 0, NULL, NULL, "1", 1, 0, "the GPU path is off"},
	{SFENV_LL128_AUTO, 1, NULL, "LOC", "1", 1, 0, "NCCL_NET_GDR_LEVEL=LOC may keep"},
	{SFENV_LL128_AUTO, 1, NULL, "PXB", "1", 1, 0, "NCCL_NET_GDR_LEVEL=PXB may keep"},
	{SFENV_LL128_ON, 1, NULL, NULL, "8", 0, 1, "SIMFABRIC_LL128=on"},
	{SFENV_LL128_ON, 1, NULL, NULL, NULL, 0, 1, "SIMFABRIC_LL128=on"},
	{SFENV_LL128_ON, 1, NULL, "2", "1", 1, 0, "NCCL_NET_GDR_LEVEL=2 may keep"},
	{SFENV_LL128_ON, 0, NULL, NULL, "1", 1, 0, "the GPU path is off"},
	{SFENV_LL128_ON, 1, "^LL128", NULL, "1", 1, 0, "yours stands"},
	{SFENV_LL128_OFF, 1, NULL, NULL, "1", 1, 0, "SIMFABRIC_LL128=off"},
};

static void test_decide(void)
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

	static const char *const two[] = {"thread", "sender", NULL};
	int w = -1;
	CHECK(sfenv_word("X", NULL, two, &w, why, sizeof why) == 0 && w == 0, "unset: the first");
	CHECK(sfenv_word("X", "sender", two, &w, why, sizeof why) == 0 && w == 1, "sender: 1");
	CHECK(sfenv_word("X", "poster", two, &w, why, sizeof why) == -EINVAL &&
		      !strcmp(why, "X='poster' is neither thread nor sender"),
	      "two words: neither ... nor: %s", why);

	for (size_t i = 0; i < sizeof(decide_cases) / sizeof(decide_cases[0]); i++) {
		int got = sfenv_ll128_decide(decide_cases[i].mode, decide_cases[i].gpu_on,
					     decide_cases[i].proto, decide_cases[i].gdr,
					     decide_cases[i].local_world, decide_cases[i].own_node,
					     why, sizeof why);
		CHECK(got == decide_cases[i].want && strstr(why, decide_cases[i].why),
		      "case %zu: %d (%s)", i, got, why);
	}
}

static void test_apply(void)
{
	char why[200];
	/* sfenv_apply: only where the user has not set them, only with the GPU path on, once */
	unsetenv("NCCL_PROTO");
	unsetenv("NCCL_NET_GDR_LEVEL");
	setenv("LOCAL_WORLD_SIZE", "1", 1);
	setenv("SIMFABRIC_NODE", "node0", 1);
	setenv("SIMFABRIC_LL128", "maybe", 1);
	CHECK(sfenv_check(why, sizeof why) == -EINVAL && strstr(why, "'maybe'"),
	      "a bad SIMFABRIC_LL128 is found at init: %s", why);
	CHECK(sfenv_apply(1, why, sizeof why) == -EINVAL && !getenv("NCCL_PROTO") &&
		      !getenv("NCCL_NET_GDR_LEVEL"),
	      "... and sets nothing: %s", why);
	unsetenv("SIMFABRIC_LL128");
	CHECK(sfenv_check(why, sizeof why) == 0, "unset is fine");
	CHECK(sfenv_apply(0, why, sizeof why) == 0 && !getenv("NCCL_PROTO") &&
		      !getenv("NCCL_NET_GDR_LEVEL"),
	      "GPU path off: nothing set");
	CHECK(sfenv_apply(1, why, sizeof why) == 0 && getenv("NCCL_PROTO") &&
		      !strcmp(getenv("NCCL_PROTO"), "LL,LL128,Simple") &&
		      !strcmp(getenv("NCCL_NET_GDR_LEVEL"), "SYS"),
	      "GPU path on, a GPU per node: both set");
	setenv("NCCL_PROTO", "Simple", 1);
	setenv("NCCL_NET_GDR_LEVEL", "PHB", 1);
	applied = 0;
	CHECK(sfenv_apply(1, why, sizeof why) == 0 && !strcmp(getenv("NCCL_PROTO"), "Simple") &&
		      !strcmp(getenv("NCCL_NET_GDR_LEVEL"), "PHB"),
	      "the user's values stand");
	unsetenv("NCCL_PROTO");
	applied = 0;
	setenv("NCCL_NET_GDR_LEVEL", "PIX", 1);
	CHECK(sfenv_apply(1, why, sizeof why) == 0 && !getenv("NCCL_PROTO") &&
		      !strcmp(getenv("NCCL_NET_GDR_LEVEL"), "PIX"),
	      "a GDR level of the user's that may keep GPUDirect off: no LL128, the level stands");
	unsetenv("NCCL_NET_GDR_LEVEL");
	CHECK(sfenv_apply(1, why, sizeof why) == 0 && !getenv("NCCL_PROTO"),
	      "applied once: a later init changes nothing");
}

static const struct check_case cases[] = {
	CHECK_CASE(test_decide),
	CHECK_CASE(test_apply),
};

CHECK_MAIN(cases)
