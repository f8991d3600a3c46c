/* SPDX-License-Identifier: MIT */
/*
 * agent.h - the receive agent: the receiver's part of a host-path message done without the
 * receiving process's proxy thread.
 *
 * On the host path a send completes when the receiver has copied it out of staging and counted
 * it (the RC ACK), and the receiver did that only inside its own test(). So a sender whose
 * receiver's proxy was busy elsewhere, or descheduled, waited for it: the completion time
 * depended on the receiving process's scheduling, which a NIC's does not. The agent is one
 * thread per process that drains every receive comm with receives in flight, every period,
 * whenever NCCL's thread is not already doing it (try-lock): copies out, counts, and so lets the
 * sender complete. The GPU path needs no agent (one-sided by construction).
 *
 * SIMFABRIC_RECV_AGENT: auto (default: on where copy threads run, i.e. 8 CPUs or more; a 2-core
 * machine has no core to spare for it), on, off, or a period in microseconds (on = 20 us).
 * The cost, measured on a 2-core machine with the agent on and nothing to do but wait: one
 * wakeup per period while receives are in flight; idle comms cost nothing (1 ms naps).
 *
 * Threads: sfagent_add/remove from any thread (under the caller's sfnet_g.lock or not); the
 * comm's rx_lock serialises the agent with NCCL's calls on that comm.
 */
#ifndef SF_AGENT_H
#define SF_AGENT_H

struct sfnet_comm;

/* Put a receive comm under the agent (starts it on first use if it is on). */
void sfagent_add(struct sfnet_comm *c);
/* Take it out; when this returns the agent no longer touches c. NULL-safe. */
void sfagent_remove(struct sfnet_comm *c);
/* "on (20 us)", "off (SIMFABRIC_RECV_AGENT=off)", ... for the init line. */
const char *sfagent_describe(void);

#endif /* SF_AGENT_H */
