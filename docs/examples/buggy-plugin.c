/* SPDX-License-Identifier: MIT */
/*
 * buggy-plugin.c - "another" NCCL net plugin, for trying simfabric-harness on a plugin that is not
 * simfabric's: it exports ncclNetPlugin_v12 (name "buggy"), forwards every call to a real plugin,
 * and breaks one rule of the API when BUGGY_BUG says so:
 *
 *   BUGGY_BUG=hint         irecv that would block leaves NCCL's 0x1 hint in *request
 *                          instead of writing NULL (reference section 3.5.3)
 *   BUGGY_BUG=early-sizes  test writes sizes[0] while the request is not done yet (section 3.5.4)
 *   unset                  no bug: a faithful wrapper
 *
 * The real plugin is BUGGY_INNER (default build/libnccl-net-simfabric.so, so run it from the
 * repository root with a simfabric daemon up). Build:
 *
 *   cc -shared -fPIC -O2 -Wall -I. -o libnccl-net-buggy.so docs/examples/buggy-plugin.c -ldl
 *
 * The table is filled by a constructor, which runs inside dlopen, before NCCL (or the harness)
 * looks the symbol up. If the real plugin cannot be loaded, the table stays all NULL and the
 * harness refuses it ("ncclNetPlugin_v12.init is NULL").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/ncclnet.h" /* simfabric's own declarations of the ABI */

__attribute__((visibility("default"))) ncclNet_v12_t ncclNetPlugin_v12;

static ncclNet_v12_t inner;
static enum { BUG_NONE, BUG_HINT, BUG_EARLY_SIZES } bug;

static ncclResult_t buggy_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request)
{
	void *preloaded = *request; /* NCCL may have put NCCL_NET_OPTIONAL_RECV_COMPLETION here */
	ncclResult_t rc = inner.irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
	if (bug == BUG_HINT && rc == ncclSuccess && *request == NULL)
		*request = preloaded; /* the bug: "would block" without writing NULL */
	return rc;
}

static ncclResult_t buggy_test(void *request, int *done, int *sizes)
{
	ncclResult_t rc = inner.test(request, done, sizes);
	if (bug == BUG_EARLY_SIZES && rc == ncclSuccess && !*done && sizes)
		sizes[0] = 0; /* the bug: a size reported before completion */
	return rc;
}

__attribute__((constructor)) static void buggy_load(void)
{
	const char *path = getenv("BUGGY_INNER"), *b = getenv("BUGGY_BUG");
	void *dl;
	const ncclNet_v12_t *t;

	if (!path || !*path)
		path = "build/libnccl-net-simfabric.so";
	dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	t = dl ? (const ncclNet_v12_t *)dlsym(dl, "ncclNetPlugin_v12") : NULL;
	if (!t) {
		fprintf(stderr, "buggy-plugin: cannot load ncclNetPlugin_v12 from %s: %s\n", path,
			dl ? "no such symbol" : dlerror());
		return;
	}
	if (b && !strcmp(b, "hint"))
		bug = BUG_HINT;
	else if (b && !strcmp(b, "early-sizes"))
		bug = BUG_EARLY_SIZES;
	inner = *t;
	ncclNetPlugin_v12 = *t;
	ncclNetPlugin_v12.name = "buggy";
	ncclNetPlugin_v12.irecv = buggy_irecv;
	ncclNetPlugin_v12.test = buggy_test;
}
