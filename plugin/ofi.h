/* SPDX-License-Identifier: MIT */
/*
 * ofi.h - a libfabric endpoint, as the transport (sim/core/xnet.h) that cross-host
 * channels (sim/core/xchan.h) run over. docs/scale-out.md §3 has the design.
 *
 * libfabric is loaded at run time (dlopen "libfabric.so.1", as plugin/cudadrv.c loads CUDA's
 * driver): the plugin links nothing new, and a machine without libfabric fails only the
 * cross-host connect, with the reason. One reliable-datagram (FI_EP_RDM) endpoint with tagged
 * messages and directed receives per sfofi_open (plugin/xhost.c opens two a process, one per
 * direction); the provider is "tcp;ofi_rxm" unless
 * SIMFABRIC_OFI_PROVIDER (or libfabric's own FI_PROVIDER) says otherwise; FI_TCP_IFACE and
 * the other FI_* variables apply as libfabric documents them. Where the provider has them, the
 * endpoint also writes into peers' registered memory (FI_RMA, with sends ordered after writes:
 * FI_ORDER_SAW), which xnet.h's write ops expose: only on tcp (tcp;ofi_rxm), whose one stream
 * per connection also places a write's data before a later message's, as xnet.h needs and
 * FI_ORDER_SAW alone does not promise; verbs and efa go without. Local buffers are never
 * registered and keys are ours (mr_mode 0), so providers that need either (efa, verbs without
 * FI_MR_LOCAL emulation) are not offered yet.
 *
 * Threads: every function may be called from any thread; one mutex serialises the calls into
 * libfabric. Errors are negative errno values, with a line for the log in why.
 * Ownership: sfofi_open's object is the caller's, freed by sfofi_close (NULL-safe), which must
 * come after every channel over it is freed.
 */
#ifndef SF_OFI_H
#define SF_OFI_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/xnet.h"

#define SFOFI_DEFAULT_PROVIDER "tcp;ofi_rxm"
#define SFOFI_ADDR_MAX 56 /* an endpoint's address (tcp: a sockaddr_in6 and a few bytes) */

struct sfofi;

/*
 * Load libfabric and open an endpoint on provider prov (NULL: the default above), with writes
 * if wants_writes and the provider has them (else without; sfofi_describe says which). 0, or
 * -ENOSYS (this build has no libfabric headers), -ELIBACC (libfabric.so.1 could not be
 * loaded), -ENODEV (no such provider here) or libfabric's error; why says which.
 */
int sfofi_open(const char *prov, int wants_writes, struct sfofi **out, char *why, size_t whylen);
/* This endpoint's address, for a peer's sfofi_peer. 0 or -ENOBUFS (*len: the size needed). */
int sfofi_addr(struct sfofi *o, void *addr, size_t *len);
/* A peer's address into the address vector: *peer is its address for the transport. */
int sfofi_peer(struct sfofi *o, const void *addr, size_t len, uint64_t *peer);
/* The transport's table (lives as long as o). */
const struct xnet *sfofi_net(struct sfofi *o);
/*
 * The pump (plugin/agent.c, SIMFABRIC_XHOST_PUMP): one thread that drives this endpoint's
 * progress in a loop while receives are in flight, so that libfabric copies the bytes in that
 * thread and NCCL's proxy thread is left to send. sfofi_pumped(o, 1) while it does: the
 * channels' own progress then only tries the lock, and yields to the pump when it is in.
 * sfofi_pump drives progress once: the completions it found (>= 0), or the transport's error
 * (then every later call on o returns it). It steps aside first for a thread waiting to post.
 */
void sfofi_pumped(struct sfofi *o, int on);
int sfofi_pump(struct sfofi *o);
/* In a child forked from a process with o open: a fresh lock, and every call fails with
 * -ECONNRESET (the parent's connections are not the child's). */
void sfofi_forked(struct sfofi *o);
/* The provider and domain in use ("tcp;ofi_rxm on lo, writes"), for the log. */
const char *sfofi_describe(const struct sfofi *o);
void sfofi_close(struct sfofi *o);

#endif /* SF_OFI_H */
