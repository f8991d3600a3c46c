/* SPDX-License-Identifier: MIT */
/*
 * copyq.h - a process's copy threads: the data path's bulk copies, off the
 * caller's thread.
 *
 * Why: NCCL drives every connection of a process from one proxy thread, so
 * one core does the process's sends' copies into shared memory and its
 * receives' copies out of it: a bidirectional collective saw half of what
 * a core copies. The channels (sim/chan.c) hand chunks of at least
 * COPYQ_MIN_BYTES to these threads and keep publishing in slot order, so
 * several copies of one process run at once while the protocol stays the
 * same.
 *
 * SIMFABRIC_COPY_THREADS=N sets the threads (0: copies stay on the caller's
 * thread); the default is 0 on machines with fewer than COPYQ_MIN_CPUS CPUs
 * (spare cores are what makes it pay) and COPYQ_DEFAULT_THREADS otherwise.
 * Threads start on the first submit, spin briefly for work and then sleep.
 * A forked child never uses its parent's threads (it copies inline), and
 * copyq_stop() joins them before the code that runs them is unloaded.
 *
 * A job lives in its submitter's memory until it is done; the submitter
 * polls copyq_done() and never frees a job in flight.
 */
#ifndef SF_COPYQ_H
#define SF_COPYQ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define COPYQ_MIN_BYTES (32u << 10) /* smaller chunks are copied inline */
#define COPYQ_MIN_CPUS 8
#define COPYQ_DEFAULT_THREADS 4
#define COPYQ_MAX_THREADS 32
#define COPYQ_SPIN_NS 100000 /* a thread polls this long for work before it sleeps */

typedef void (*copyq_fn)(void *dst, const void *src, size_t len);

struct copyq_job {
	void *dst;
	const void *src;
	size_t len;
	copyq_fn fn; /* memcpy, or the channel's streaming copy */
	_Atomic int state; /* 0 idle, 1 queued, 2 done */
	uint64_t seq;	   /* set by copyq_submit: its place in the queue */
	struct copyq_job *next;
};

/* Are copy threads in use in this process (0: the caller copies inline)? */
int copyq_enabled(void);

/* What SIMFABRIC_COPY_THREADS says: unset (or empty), a count within the limit, a count over
 * it (capped), or not a count at all (0 threads). *n gets the number as written. */
enum copyq_env { COPYQ_ENV_UNSET, COPYQ_ENV_OK, COPYQ_ENV_CAPPED, COPYQ_ENV_BAD };
enum copyq_env copyq_env(long *n);
/* Queue j (its fields set; state becomes 1). Returns 0, or -1 if it could not be queued
 * (the caller then copies inline). */
int copyq_submit(struct copyq_job *j);
static inline int copyq_done(struct copyq_job *j)
{
	return atomic_load_explicit(&j->state, memory_order_acquire) == 2;
}
/* Wait for j (spinning, then yielding): for teardown. */
void copyq_wait(struct copyq_job *j);
/*
 * Wait until every job queued before this call is done, whoever queued it:
 * after it no copy thread touches the memory those jobs named. For deregMr,
 * which NCCL may call (and then free the buffers) while requests are still
 * in flight, as in an abort, from a thread other than the data path's.
 */
void copyq_drain(void);

/* Stop and join the threads (they finish what is queued first). NULL-safe to call twice;
 * a later submit starts them again. */
void copyq_stop(void);

#endif /* SF_COPYQ_H */
