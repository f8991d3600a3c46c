/* SPDX-License-Identifier: MIT */
/*
 * fspec.h - the fault specs the fault tests build (test_fault.c, test_fault_path.c), in their
 * virtual time: T_o is the ACK timeout of timeout_exp 10 (4096 ns << 10), faults' origin 1 s.
 */
#ifndef SF_TEST_FSPEC_H
#define SF_TEST_FSPEC_H

#include <stdint.h>

#include "sim/core/fault.h"
#include "sim/test/fenv.h"

#define TO 4194304LL	    /* T_o: 4096 << 10 ns */
#define ORIGIN 1000000000LL /* the faults' origin: 1 s of virtual time */
#define MS 1000000LL
#define US 1000LL

static inline struct fault_spec spec(enum fault_kind k, int64_t start, int64_t dur)
{
	return fenv_spec(k, start, dur);
}

static inline struct fault_spec on_link(enum fault_kind k, uint32_t link, int64_t start,
					int64_t dur)
{
	struct fault_spec f = spec(k, start, dur);
	f.nlinks = 1;
	f.link[0] = link;
	return f;
}

static inline struct fault_spec on_conn(enum fault_kind k, int32_t src, int32_t dst, int64_t start,
					int64_t dur)
{
	struct fault_spec f = spec(k, start, dur);
	f.conn_scope = 1;
	f.src_node = src;
	f.dst_node = dst;
	return f;
}

static inline struct fault_spec periodic(int64_t start, int64_t dur, int64_t period, uint64_t count)
{
	struct fault_spec f = on_link(FAULT_K_FLAP, 0, start, dur);
	f.period_ns = period;
	f.count = count;
	return f;
}

#endif /* SF_TEST_FSPEC_H */
