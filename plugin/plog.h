/* SPDX-License-Identifier: MIT */
/*
 * plog.h - the plugin's logging, over the logger NCCL hands to init.
 *
 * Everything the plugin says goes through NCCL's logger with the prefix
 * "NET/simfabric : ", never to stdout or stderr. Before init, or when a
 * caller passes a NULL logger, the macros are silent. The logger call is
 * not format-checked by the compiler (NCCL's typedef has no attribute), so
 * each macro also names plog_check, which is, and which compiles to nothing.
 *
 * Use PWARN for errors (always shown), PINFO(flags, ...) for notices (tag
 * the important init lines NCCL_INIT|NCCL_NET: NCCL's default mask shows
 * INIT but not NET), PTRACE(flags, ...) for detail. Never log on the data
 * path's success path: even a filtered call costs a function call.
 */
#ifndef SF_PLOG_H
#define SF_PLOG_H

#include <stdatomic.h>

#include "plugin/ncclnet.h"

#define PLOG_PREFIX "NET/simfabric : "

/* The logger of the most recent init that gave one (defined in plugin/net.c). */
extern _Atomic(ncclDebugLogger_t) plog_fn;

static inline __attribute__((format(printf, 1, 2), unused)) void plog_check(const char *fmt, ...)
{
	(void)fmt;
}

#define PLOG_(level, flags, where, fmt, ...)                                                       \
	do {                                                                                       \
		ncclDebugLogger_t plog_f_ = atomic_load_explicit(&plog_fn, memory_order_relaxed);  \
		if (0)                                                                             \
			plog_check(fmt, ##__VA_ARGS__);                                            \
		if (plog_f_)                                                                       \
			plog_f_((level), (flags), (where), __LINE__, PLOG_PREFIX fmt,              \
				##__VA_ARGS__);                                                    \
	} while (0)

/* NCCL's WARN passes the file name and INFO/TRACE the function name; so do we. */
#define PWARN(fmt, ...) PLOG_(NCCL_LOG_WARN, NCCL_ALL, __FILE__, fmt, ##__VA_ARGS__)
#define PINFO(flags, fmt, ...) PLOG_(NCCL_LOG_INFO, (flags), __func__, fmt, ##__VA_ARGS__)
#define PTRACE(flags, fmt, ...) PLOG_(NCCL_LOG_TRACE, (flags), __func__, fmt, ##__VA_ARGS__)

#endif /* SF_PLOG_H */
