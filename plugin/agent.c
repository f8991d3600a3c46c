/* SPDX-License-Identifier: MIT */
/*
 * agent.c - the receive agent (see agent.h): one thread per process while it has receive
 * comms, started by the first and joined when the last goes, so nothing runs once the plugin
 * could be unloaded.
 */
#include "plugin/agent.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/net_int.h"
#include "plugin/plog.h"
#include "plugin/xhost.h"
#include "sim/core/copyq.h"

#define AGENT_DEFAULT_US 20
#define AGENT_IDLE_NS 1000000 /* nothing in flight anywhere: look again in 1 ms */

static struct {
	pthread_mutex_t lock; /* the list, running, stop */
	pthread_cond_t wake;
	pthread_once_t once;
	int period_us; /* 0: off */
	int pump;      /* SIMFABRIC_XHOST_PUMP: spin on cross-host receives (plugin/ofi.h) */
	char describe[96];
	struct sfnet_comm *head;
	int running, stop;
	pthread_t th;
} A = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .once = PTHREAD_ONCE_INIT};

/* The wakeup's clock is CLOCK_MONOTONIC, as its deadlines are. */
static void wake_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&A.wake, &ca);
	pthread_condattr_destroy(&ca);
}

static void fork_child(void)
{
	/* only the forking thread survives: no agent here, and its comms are unusable */
	pthread_mutex_init(&A.lock, NULL);
	wake_init();
	A.running = A.stop = 0;
	A.head = NULL;
}

static int period_from_env(const char *v)
{
	char *end = NULL;
	long us = v ? strtol(v, &end, 10) : 0;
	if (!v || !*v || !strcmp(v, "auto")) /* where copy threads run, a core can be spared */
		return copyq_enabled() ? AGENT_DEFAULT_US : 0;
	if (!strcmp(v, "on"))
		return AGENT_DEFAULT_US;
	if (!strcmp(v, "off"))
		return 0;
	if (end && !*end && us >= 1 && us <= 1000000)
		return (int)us;
	PWARN("SIMFABRIC_RECV_AGENT='%.32s' is not auto, on, off or a period of 1 to 1000000 "
	      "microseconds; the receive agent stays off",
	      v);
	return 0;
}

static void configure(void)
{
	wake_init();
	pthread_atfork(NULL, NULL, fork_child);
	const char *v = getenv("SIMFABRIC_RECV_AGENT");
	int automatic = !v || !*v || !strcmp(v, "auto");
	A.period_us = period_from_env(v);
	const char *p = getenv("SIMFABRIC_XHOST_PUMP");
	if (p && !strcmp(p, "on"))
		A.pump = 1;
	else if (p && *p && strcmp(p, "off"))
		PWARN("SIMFABRIC_XHOST_PUMP='%.32s' is not on or off; the pump stays off", p);
	if (A.pump && !A.period_us) {
		PWARN("SIMFABRIC_XHOST_PUMP=on needs the receive agent, which is off here "
		      "(SIMFABRIC_RECV_AGENT=on starts it); the pump stays off");
		A.pump = 0;
	}
	const char *pump = A.pump ? ", pumping cross-host receives" : "";
	if (A.period_us && automatic)
		snprintf(A.describe, sizeof(A.describe), "on (auto, %d us%s)", A.period_us, pump);
	else if (A.period_us)
		snprintf(A.describe, sizeof(A.describe), "on (%d us%s)", A.period_us, pump);
	else if (automatic)
		snprintf(A.describe, sizeof(A.describe), "off (auto: no copy threads)");
	else
		snprintf(A.describe, sizeof(A.describe), "off (SIMFABRIC_RECV_AGENT=%.32s)", v);
}

const char *sfagent_describe(void)
{
	pthread_once(&A.once, configure);
	return A.describe;
}

static void deadline_in(struct timespec *ts, long ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_nsec += ns;
	while (ts->tv_nsec >= 1000000000L) {
		ts->tv_nsec -= 1000000000L;
		ts->tv_sec++;
	}
}

/* The pump: after this many scans with no cross-host receive in flight it stops; after this
 * many passes that found nothing it yields the core each pass, then waits the agent's period. */
#define PUMP_GRACE 64
#define PUMP_YIELD 64
#define PUMP_SPIN 4096

static void *agent_main(void *arg)
{
	(void)arg;
	int pumping = 0;
	unsigned idle_scans = 0, empty = 0;
	unsigned long long passes = 0, took = 0;
	pthread_mutex_lock(&A.lock);
	while (!A.stop) {
		int busy = 0, xbusy = 0;
		for (struct sfnet_comm *c = A.head; c; c = c->agent_next) {
			/* NCCL's thread is in this comm: it is progressing it already (a cross-host
			 * one keeps the pump going: its receives are in flight) */
			if (pthread_mutex_trylock(&c->rx_lock) != 0) {
				xbusy |= c->xrx != NULL;
				continue;
			}
			if (c->failed == ncclSuccess && c->rx && chan_rx_inflight(c->rx)) {
				busy = 1;
				/* errors stay in the channel (sticky); NCCL's test() reports them */
				(void)chan_rx_progress(c->rx, NULL);
			} else if (c->failed == ncclSuccess && c->xrx &&
				   xchan_rx_inflight(c->xrx)) {
				busy = xbusy =
					1; /* a cross-host receive: its ACKs go out from here */
				(void)xchan_rx_progress(c->xrx, NULL);
			}
			pthread_mutex_unlock(&c->rx_lock);
		}
		idle_scans = xbusy ? 0 : idle_scans + 1;
		if (A.pump && (xbusy || (pumping && idle_scans < PUMP_GRACE))) {
			/* the pump: drive the rx endpoint now and again at once, A.lock released so
			 * that comms come and go meanwhile; NCCL's thread then finds the bytes copied.
			 * Errors stay in the endpoint: the channels' test() reports them. */
			if (!pumping)
				sfxh_pumped(pumping = 1);
			pthread_mutex_unlock(&A.lock);
			int n = sfxh_pump();
			passes++;
			if (n > 0) {
				took += (unsigned long long)n;
				empty = 0;
			} else if (++empty > PUMP_YIELD && empty <= PUMP_SPIN) {
				sched_yield(); /* nothing arriving: let the ranks have the core */
			}
			pthread_mutex_lock(&A.lock);
			if (empty > PUMP_SPIN) { /* nothing for long: the agent's own period */
				struct timespec ts;
				deadline_in(&ts, (long)A.period_us * 1000);
				pthread_cond_timedwait(&A.wake, &A.lock, &ts);
			}
			continue;
		}
		if (pumping)
			sfxh_pumped(pumping = 0);
		struct timespec ts;
		deadline_in(&ts, busy ? (long)A.period_us * 1000 : AGENT_IDLE_NS);
		pthread_cond_timedwait(&A.wake, &A.lock, &ts);
	}
	if (pumping)
		sfxh_pumped(0);
	pthread_mutex_unlock(&A.lock);
	if (passes)
		PINFO(NCCL_NET,
		      "receive agent: the pump drove the cross-host receive endpoint %llu "
		      "times and took %llu completions",
		      passes, took);
	return NULL;
}

/* Under A.lock. */
static void start_locked(void)
{
	A.stop = 0;
	if (pthread_create(&A.th, NULL, agent_main, NULL) == 0)
		A.running = 1;
	else
		PWARN("cannot start the receive agent thread: %s; sends complete when their "
		      "receivers test",
		      strerror(errno));
}

void sfagent_add(struct sfnet_comm *c)
{
	pthread_once(&A.once, configure);
	if (!A.period_us || !c)
		return;
	pthread_mutex_lock(&A.lock);
	c->agent_next = A.head;
	A.head = c;
	c->agent_on = 1;
	if (!A.running)
		start_locked();
	pthread_mutex_unlock(&A.lock);
}

void sfagent_remove(struct sfnet_comm *c)
{
	if (!c || !c->agent_on)
		return;
	pthread_mutex_lock(&A.lock);
	for (struct sfnet_comm **pp = &A.head; *pp; pp = &(*pp)->agent_next)
		if (*pp == c) {
			*pp = c->agent_next;
			break;
		}
	c->agent_on = 0;
	if (A.head || !A.running || A.stop) {
		pthread_mutex_unlock(&A.lock);
		return;
	}
	/* the last comm: the thread ends now, so nothing of ours runs once we may be unloaded */
	A.stop = 1;
	pthread_cond_broadcast(&A.wake);
	pthread_t th = A.th;
	pthread_mutex_unlock(&A.lock);
	pthread_join(th, NULL);
	pthread_mutex_lock(&A.lock);
	A.running = 0;
	A.stop = 0;
	if (A.head) /* a comm came while it was ending */
		start_locked();
	pthread_mutex_unlock(&A.lock);
}
