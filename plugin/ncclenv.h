/* SPDX-License-Identifier: MIT */
/*
 * ncclenv.h - what the plugin tells NCCL through its environment about the NIC it emulates:
 * a GPUDirect RDMA NIC next to its GPU, as on H100/H200 nodes, when the GPU path is on.
 *
 * NCCL learns where a NIC sits from its PCI path; a virtual NIC has none, so NCCL puts it under
 * the CPU and, from that, keeps two things off that a NIC next to the GPU gets: GPUDirect
 * (src/graph/paths.cc, ncclTopoCheckGdr, below NCCL_NET_GDR_LEVEL) and the LL128 protocol over
 * the network (src/graph/tuning.cc, ncclTopoTuneModel: on Hopper only up to a PXN path). Both
 * are read by NCCL after the net plugin's init, so the plugin sets them there, only where the
 * user has not (the user's value always stands), and logs what it did.
 *
 * The decisions are pure functions of the settings (unit-tested in plugin/test/test_ncclenv.c);
 * sfenv_apply does the setenv and the logging. Called once, from the plugin's init.
 */
#ifndef SF_NCCLENV_H
#define SF_NCCLENV_H

#include <stddef.h>

/*
 * A setting that is one of words (NULL-terminated; v NULL or "": words[0]): its index in *out.
 * 0, or -EINVAL with why naming the setting, its value and the words ("NAME='v' is neither a
 * nor b", or "is not one of a, b, c"). The plugin's word settings all go through it.
 */
int sfenv_word(const char *name, const char *v, const char *const *words, int *out, char *why,
	       size_t cap);

/* SIMFABRIC_LL128=auto|on|off (unset: auto) */
enum sfenv_ll128 { SFENV_LL128_AUTO, SFENV_LL128_ON, SFENV_LL128_OFF };

/*
 * Parse SIMFABRIC_LL128's value (NULL or "" is auto). 0, or -EINVAL with a sentence in why
 * naming the value and what it may be.
 */
int sfenv_ll128_parse(const char *v, enum sfenv_ll128 *out, char *why, size_t cap);

/*
 * Whether to enable LL128 (set NCCL_PROTO=LL,LL128,Simple): 1 yes, 0 no, with the reason in
 * why either way. Over host memory LL128's 128-byte lines are not read atomically, which is why
 * NCCL keeps it off there, so never without GPUDirect: gpu_on (the GPU path is on) and
 * gdr_level (NCCL_NET_GDR_LEVEL as the user set it, NULL: unset, which the plugin sets to SYS)
 * SYS or PHB, where NCCL takes GPUDirect through our NIC. nccl_proto: NCCL_PROTO as set (NULL:
 * unset; the user's choice stands). In auto, only when this rank is its emulated node's only
 * GPU: NCCL_PROTO also enables LL128 between GPUs of one node, which NCCL keeps off over PCIe and
 * shared memory; so local_world (LOCAL_WORLD_SIZE) must be "1" and own_node set (NCCL_HOSTID or
 * SIMFABRIC_NODE names this rank's node, as simfabric launch does: NCCL groups ranks by host).
 */
int sfenv_ll128_decide(enum sfenv_ll128 mode, int gpu_on, const char *nccl_proto,
		       const char *gdr_level, const char *local_world, int own_node, char *why,
		       size_t cap);

/* Check SIMFABRIC_LL128 (at init, before anything is set): 0, or -EINVAL with why set. */
int sfenv_check(char *why, size_t cap);

/*
 * Apply both settings for a process whose GPU path is on (gpu_on) or off: NCCL_NET_GDR_LEVEL=SYS
 * and, per sfenv_ll128_decide, NCCL_PROTO. Call it last in a successful init: NCCL falls back
 * to another network when the plugin's init fails, and must not inherit them. 0, or -EINVAL with
 * why set (a bad SIMFABRIC_LL128). Not thread-safe (setenv): the plugin's init only. Also WARNs,
 * once, when NCCL_NET_OPTIONAL_RECV_COMPLETION=0 takes away the mark of NCCL's LL and LL128
 * receives (plugin/data.c), whatever gpu_on.
 */
int sfenv_apply(int gpu_on, char *why, size_t cap);

#endif
