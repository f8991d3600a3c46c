/* SPDX-License-Identifier: MIT */
/*
 * mpskill.h - SIGKILL of a rank that is an MPS client, done so that the other clients live.
 *
 * Under MPS every client's work runs in the server's one GPU context. A client killed while its
 * kernels run (an NCCL kernel waiting for a peer always is) is torn down by the server with
 * those kernels still running, and the fault that follows is every client's: on an H100 under
 * MPS (NCCL 2.28.9), the survivors of a node_kill all got cudaErrorIllegalAddress and the
 * server log said "encountered a fatal GPU error ... to be torn down" for each of them. MPS's
 * control has a command for this, terminate_client <server pid> <client pid>, which ends the
 * client's GPU work first; the kill follows it. The client is stopped (SIGSTOP) before either,
 * at the fault's instant, so that it cannot react to MPS ending its work: a dead node does
 * nothing more. Whether MPS ends a stopped client's work is not documented: if it has not
 * answered within MPSKILL_STOPPED_MS, the client is let run (the log says so) until it has;
 * it may then die of MPS's ending its work (PyTorch aborts: SIGABRT) before the SIGKILL, and
 * simfabric run's expectations take that death as the kill's for that pid only
 * (tools/sf/recipe.py, mps_let_run).
 *
 * Whether a process is an MPS client is read from its environment (/proc/<pid>/environ:
 * CUDA_MPS_PIPE_DIRECTORY, as simfabric launch sets it, or MPS's default directory) and the
 * control socket there. The daemon's one thread must not wait for MPS, so the control and the
 * kill are done by a detached helper process, bounded by MPSKILL_BOUND_S (after which it kills
 * anyway); it writes what MPS answered to the daemon's stderr (its log).
 *
 * Errors: negative errno values of kill(2) or fork(2). Threads: the daemon's thread.
 */
#ifndef SF_MPSKILL_H
#define SF_MPSKILL_H

#include <stddef.h>
#include <sys/types.h>

#define MPSKILL_BOUND_S 5 /* the helper kills by then whatever MPS did */
/* MPS has this long to end a stopped client's work before the helper lets the client run */
#define MPSKILL_STOPPED_MS 2000

/*
 * SIGKILL pid. 0: killed now (no MPS client: kill(2)); 1: stopped now and handed to the helper
 * (an MPS client: terminate_client, then SIGKILL; where no helper can be forked, killed now and
 * 0); how
 * says which in a few words, for the log; or the negative errno of kill(2) (the process is not
 * there or not ours).
 */
int mpskill(pid_t pid, char *how, size_t cap);

/*
 * The MPS pipe directory in an environment block (NUL-separated NAME=VALUE strings, len bytes,
 * as /proc/<pid>/environ holds it): CUDA_MPS_PIPE_DIRECTORY's value into out, else MPS's
 * default; 1 when the variable was set, 0 when the default was used, -ENAMETOOLONG.
 */
int mpskill_pipe_dir(const char *env, size_t len, char *out, size_t cap);

#endif
