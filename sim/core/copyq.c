/* SPDX-License-Identifier: MIT */
/* copyq.c - a process's copy threads. See copyq.h. */
#include "sim/core/copyq.h"

#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct copyq_job *head, **tail;
	_Atomic int queued;   /* jobs in the queue: workers poll it without the lock */
	int sleepers;	      /* workers waiting on wake (under lock) */
	int nthreads, want;   /* started; configured (-1: not read yet) */
	int stopping;
	pid_t pid;	      /* the process that started them: a forked child has none */
	uint64_t seq;	      /* jobs ever queued (under lock): each job's number, from 1 */
	pthread_t th[COPYQ_MAX_THREADS];
	/* the number of the job each worker runs, 0 when none: copyq_drain reads them */
	_Atomic uint64_t running[COPYQ_MAX_THREADS];
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, &q.head, 0, 0, 0, -1, 0, 0, 0,
       {0}, {0}};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum copyq_env copyq_env(long *n)
{
	const char *e = getenv("SIMFABRIC_COPY_THREADS");
	*n = 0;
	if (!e || !*e)
		return COPYQ_ENV_UNSET;
	char *end;
	*n = strtol(e, &end, 10); /* out of range is LONG_MIN/MAX: caught below */
	if (*end || *n < 0)
		return COPYQ_ENV_BAD;
	return *n > COPYQ_MAX_THREADS ? COPYQ_ENV_CAPPED : COPYQ_ENV_OK;
}

static int configured(void)
{
	long n;
	switch (copyq_env(&n)) {
	case COPYQ_ENV_OK:
		return (int)n;
	case COPYQ_ENV_CAPPED:
		return COPYQ_MAX_THREADS;
	case COPYQ_ENV_BAD:
		return 0; /* the plugin's init warns about a bad value */
	default:
		break;
	}
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus >= COPYQ_MIN_CPUS ? COPYQ_DEFAULT_THREADS : 0;
}

static struct copyq_job *pop(void)
{
	struct copyq_job *j = q.head;
	if (j) {
		q.head = j->next;
		if (!q.head)
			q.tail = &q.head;
		atomic_fetch_sub(&q.queued, 1);
	}
	return j;
}

static void *worker(void *arg)
{
	int self = (int)(intptr_t)arg;
	for (;;) {
		/* spin a little: chunks come every few microseconds while a transfer runs */
		int64_t until = mono_ns() + COPYQ_SPIN_NS;
		while (!atomic_load_explicit(&q.queued, memory_order_relaxed) && mono_ns() < until)
			sched_yield();
		pthread_mutex_lock(&q.lock);
		struct copyq_job *j;
		while (!(j = pop()) && !q.stopping) {
			q.sleepers++;
			pthread_cond_wait(&q.wake, &q.lock);
			q.sleepers--;
		}
		if (j) /* before the lock goes: a drain never sees the job in neither place */
			atomic_store_explicit(&q.running[self], j->seq, memory_order_relaxed);
		pthread_mutex_unlock(&q.lock);
		if (!j)
			return NULL; /* stopping, and nothing left */
		j->fn(j->dst, j->src, j->len);
		atomic_store_explicit(&j->state, 2, memory_order_release);
		atomic_store_explicit(&q.running[self], 0, memory_order_release);
	}
}

/* fork() while another thread holds the lock must not leave the child's copy locked */
static void fork_prepare(void)
{
	pthread_mutex_lock(&q.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&q.lock);
}

static void fork_child(void)
{
	pthread_mutex_init(&q.lock, NULL);
	pthread_cond_init(&q.wake, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Under q.lock. */
static void start_locked(void)
{
	if (q.want < 0)
		q.want = configured();
	if (q.pid != getpid()) { /* a forked child: its parent's threads are not here */
		q.nthreads = 0;
		q.head = NULL;
		q.tail = &q.head;
		atomic_store(&q.queued, 0);
		q.sleepers = 0;
		q.pid = getpid();
	}
	while (q.nthreads < q.want) {
		atomic_store(&q.running[q.nthreads], 0);
		if (pthread_create(&q.th[q.nthreads], NULL, worker, (void *)(intptr_t)q.nthreads) != 0)
			break;
		q.nthreads++;
	}
}

int copyq_enabled(void)
{
	if (q.want < 0) {
		pthread_mutex_lock(&q.lock);
		if (q.want < 0)
			q.want = configured();
		pthread_mutex_unlock(&q.lock);
	}
	return q.want > 0;
}

int copyq_submit(struct copyq_job *j)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_lock(&q.lock);
	if (!q.stopping && (q.pid != getpid() || q.nthreads < q.want))
		start_locked();
	if (q.nthreads == 0 || q.stopping) {
		pthread_mutex_unlock(&q.lock);
		return -1;
	}
	atomic_store_explicit(&j->state, 1, memory_order_relaxed);
	j->seq = ++q.seq;
	j->next = NULL;
	*q.tail = j;
	q.tail = &j->next;
	atomic_fetch_add(&q.queued, 1);
	if (q.sleepers)
		pthread_cond_signal(&q.wake);
	pthread_mutex_unlock(&q.lock);
	return 0;
}

void copyq_wait(struct copyq_job *j)
{
	while (atomic_load_explicit(&j->state, memory_order_acquire) == 1)
		sched_yield();
}

void copyq_drain(void)
{
	if (q.want <= 0)
		return; /* never enabled: every copy ran on its caller's thread */
	pthread_mutex_lock(&q.lock);
	uint64_t upto = q.seq;
	int ours = q.pid == getpid(); /* a forked child's queue is its parent's leftovers */
	pthread_mutex_unlock(&q.lock);
	if (!ours)
		return;
	/* The queue is FIFO: a job up to upto is queued (head first) or running. */
	for (;;) {
		pthread_mutex_lock(&q.lock);
		int busy = q.head && q.head->seq <= upto;
		for (int i = 0; i < q.nthreads && !busy; i++) {
			uint64_t r = atomic_load_explicit(&q.running[i], memory_order_acquire);
			busy = r && r <= upto;
		}
		pthread_mutex_unlock(&q.lock);
		if (!busy)
			return;
		sched_yield();
	}
}

void copyq_stop(void)
{
	pthread_mutex_lock(&q.lock);
	if (q.pid != getpid() || q.nthreads == 0) {
		pthread_mutex_unlock(&q.lock);
		return;
	}
	q.stopping = 1;
	pthread_cond_broadcast(&q.wake);
	int n = q.nthreads;
	pthread_mutex_unlock(&q.lock);
	for (int i = 0; i < n; i++)
		pthread_join(q.th[i], NULL);
	pthread_mutex_lock(&q.lock);
	q.nthreads = 0;
	q.stopping = 0;
	pthread_mutex_unlock(&q.lock);
}
