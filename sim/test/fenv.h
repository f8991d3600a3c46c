/* SPDX-License-Identifier: MIT */
/*
 * fenv.h - a fabric state in anonymous shared memory, for the unit tests that
 * reserve messages through sim/core/fstate.c: resolve the links and the NIC, map,
 * format and view the region. Any failure ends the test program: nothing
 * after it could mean anything.
 */
#ifndef SF_TEST_FENV_H
#define SF_TEST_FENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sim/core/fstate.h"
#include "sim/core/model.h"

/* Resolve links[nl] and *nic in place (model_*_resolve). */
static inline void fenv_resolve(struct model_link *links, uint32_t nl, struct model_nic *nic)
{
	char err[MODEL_ERR_LEN];
	for (uint32_t i = 0; i < nl; i++)
		if (model_link_resolve(&links[i], err, sizeof(err))) {
			fprintf(stderr, "link %u: %s\n", i, err);
			exit(1);
		}
	if (model_nic_resolve(nic, err, sizeof(err))) {
		fprintf(stderr, "nic: %s\n", err);
		exit(1);
	}
}

/* A formatted region of nl links and nnic NICs (*base, *len: unmap with fenv_unmap) and a
 * view of it (owned by the caller, freed by fenv_unmap). */
static inline struct fst_view *fenv_map(uint32_t nl, const struct model_link *links,
					uint32_t nnic, uint64_t seed, void **base, size_t *len)
{
	struct fst_view *v = NULL;
	*len = fst_bytes(nl, nnic, 0);
	*base = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (*base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	if (fst_format(*base, *len, nl, links, nnic, seed, 0) || fst_view_new(*base, *len, &v)) {
		fprintf(stderr, "fabric state\n");
		exit(1);
	}
	return v;
}

/* A fault of kind k from start for dur on no scope yet (FAULT_ANY nodes), one window, always. */
static inline struct fault_spec fenv_spec(enum fault_kind k, int64_t start, int64_t dur)
{
	struct fault_spec f;
	memset(&f, 0, sizeof(f));
	snprintf(f.name, sizeof(f.name), "t-%s", fault_kind_names[k]);
	f.kind = (uint32_t)k;
	f.action = (uint32_t)fault_kind_action(k);
	f.trigger = FAULT_T_TIME;
	f.src_node = f.dst_node = f.node = FAULT_ANY;
	f.trig_link = -1;
	f.trig_src = f.trig_dst = FAULT_ANY;
	f.start_ns = start;
	f.duration_ns = dur;
	f.count = 1;
	f.prob = MODEL_PROB_ONE;
	return f;
}

/* CLOCK_MONOTONIC in ns: the fabric's clock. */
static inline int64_t fenv_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void fenv_unmap(struct fst_view *v, void *base, size_t len)
{
	fst_view_free(v);
	munmap(base, len);
}

#endif /* SF_TEST_FENV_H */
