/* SPDX-License-Identifier: MIT */
/*
 * chan.h - the shared-memory data path of one emulated connection.
 *
 * A channel is one direction of one connection: a sender (tx) in one process
 * and a receiver (rx) in another, joined by one shared-memory region that the
 * daemon creates (a memfd passed over its control socket) and then leaves
 * alone, apart from writing the "peer died" flags and reading counters.
 * No payload byte and no per-message wakeup go through the daemon.
 *
 * Protocol, in one paragraph. The receiver publishes each posted
 * (multi-)receive as a clear-to-send entry (CTS: n buffers, their capacities
 * and tags) in a ring of CHAN_MAX_REQS. The sender matches each send to the
 * oldest CTS (the head receive; never one further down: NCCL's ordering rule),
 * picking the buffer whose tag matches (n == 1 included: NCCL always matches), checks the
 * size against the capacity, and copies the payload through a ring of
 * fixed-size staging slots, one descriptor per slot. The receiver copies each
 * slot into the matched buffer and counts a message delivered when its last
 * chunk is in. A send completes when the receiver has counted it (as an RC
 * ACK would); a receive completes when all n of its buffers are filled.
 *
 * One-sided delivery (GPU memory, "emulated GPUDirect RDMA"). A receive
 * buffer may name a region the receiver exported (struct chan_region: an id
 * that means something to the sender's copy engine, and an offset in it).
 * The sender then copies the whole message straight into that buffer with
 * its copy engine (struct chan_dma, plugin/gpu_copy.c), like an RDMA write, and
 * publishes one descriptor (CHAN_F_DIRECT, no slot data) once the copy is
 * done. Such a send completes when its descriptor is out and the model's time
 * has come: the receiving process need not run for it, as long as the
 * descriptor ring has room (one slot per message; a receiver that has not
 * consumed nslots descriptors holds the sender back, as a full receive queue
 * would). The receiver counts
 * the descriptor as it counts staged chunks; its completion stays gated on
 * the model's delivery time as before.
 * Every index is a 64-bit counter with a single writer, published with
 * release stores and read with acquire loads; nothing in the region is ever
 * locked, so a process that dies leaves nothing held.
 *
 * Errors are negative errno values:
 *   -EAGAIN     would block (no CTS yet, or the request table is full)
 *   -EMSGSIZE   a send larger than the posted receive (both ends fail)
 *   -ECONNRESET the peer closed, died (daemon flag) or failed
 *   -ESHUTDOWN  the daemon shut down (its flag in the region)
 *   -EPROTO     the region holds something this code did not write, or the two
 *               ends disagree on where buffers live (GPU on one side only)
 *   -EIO        the sender's copy engine failed a one-sided copy
 *   -EINVAL     misuse (bad argument, unknown request)
 * A held channel (chan_set_hold) reports nothing done, and no error, while comm_hang holds it.
 *   -ETIMEDOUT  the model failed a message: retries exhausted (loss, a link
 *               down or stalled past the budget) or a connection reset;
 *               chan_err.fault names the fault, if one did it
 * Every failing call can fill a struct chan_err with the values involved, so
 * the caller can log one line naming them.
 *
 * Threads: one tx and one rx object are each used by one thread at a time
 * (NCCL drives a comm from one proxy thread); different channels are
 * independent. The daemon side (chan_format, chan_mark_dead, chan_stats) only
 * touches the header.
 */
#ifndef SF_CHAN_H
#define SF_CHAN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/core/model.h"

struct fst_view;

#define CHAN_MAGIC 0x314e414843465353ULL /* "SSFCHAN1" little-endian */
#define CHAN_VERSION 6
#define CHAN_MAX_RECVS 8	/* largest n of a grouped receive (maxRecvs) */
#define CHAN_MAX_REQS 32	/* receives in flight per channel (NCCL_NET_MAX_REQUESTS) */
#define CHAN_MAX_SENDS (CHAN_MAX_REQS * CHAN_MAX_RECVS) /* sends in flight */

#define CHAN_DEFAULT_SLOT_BYTES (64u << 10)
#define CHAN_DEFAULT_NSLOTS 32u /* 2 MiB of staging per connection */
#define CHAN_MIN_SLOT_BYTES 4096u
#define CHAN_MAX_SHM_BYTES (1ULL << 30)

/* chan_shm.state values (per side). */
enum chan_state {
	CHAN_ST_INIT = 0,   /* formatted by the daemon, side not attached yet */
	CHAN_ST_OPEN = 1,   /* attached */
	CHAN_ST_CLOSED = 2, /* closed by its owner; peer fails what can no longer complete */
	CHAN_ST_FAILED = 3  /* the side hit an error (error/detail say which) */
};

/* chan_shm.hold bits: faults that hold a channel without failing it. */
#define CHAN_HOLD_HANG 0x1	/* comm_hang: neither end completes anything; nothing fails */
#define CHAN_HOLD_RX_FROZEN 0x2 /* node_freeze of the receiver's process: a send fully staged
				   into a receive it had posted completes (its NIC would ACK it);
				   the receive itself completes once the process runs again */

/* Descriptor flags. */
#define CHAN_F_LAST 0x1 /* last chunk of its message */
#define CHAN_F_FAIL 0x2 /* the model says the message fails (retries exhausted) at ready_ns */
#define CHAN_F_DIRECT 0x4 /* one-sided: the sender wrote the whole message into the buffer */

/*
 * Receive flags (chan_rx_post_in, and the CTS's flags). CHAN_RX_AT_DELIVERY: the receiving
 * application reads the buffer while it fills, not only after the receive completes (NCCL's
 * LL and LL128 lines carry their own flags, which its kernels poll), so no byte of the
 * message may land before the model says it arrived: the receiver copies each staged chunk no
 * earlier than its arrival time, and a one-sided sender starts its copy at the delivery time.
 * Other receives may fill early, as only their completion is seen.
 */
#define CHAN_RX_AT_DELIVERY 0x1

#define CHAN_WHERE_LEN 64 /* the receiver's address for the sender's copy engine */
#define CHAN_MAX_FLIPS 1024 /* corrupted bits applied per one-sided message (the first ones) */

/* One posted receive, written by rx before it bumps rx.cts_head. */
struct chan_cts {
	uint64_t seq; /* receive sequence number on this channel (sanity stamp) */
	uint32_t n;
	uint32_t flags; /* CHAN_RX_AT_DELIVERY */
	uint64_t sizes[CHAN_MAX_RECVS]; /* capacities */
	int32_t tags[CHAN_MAX_RECVS];
	uint64_t region[CHAN_MAX_RECVS]; /* exported region of each buffer; 0: host memory */
	uint64_t roff[CHAN_MAX_RECVS];	 /* the buffer's offset in it */
};

/* One staging slot's descriptor, written by tx before it bumps tx.head. */
struct chan_desc {
	uint64_t msg;	  /* message sequence number on this channel */
	uint64_t recv;	  /* receive sequence number it fills */
	uint64_t offset;  /* byte offset of this chunk in the message */
	uint64_t total;	  /* message size */
	int64_t ready_ns; /* model: not deliverable before this CLOCK_MONOTONIC time (0: now) */
	uint32_t len;	  /* bytes in this slot */
	uint16_t buf;	  /* buffer index within the receive */
	uint16_t flags;	  /* CHAN_F_* */
	int32_t tag;
	uint32_t reserved; /* CHAN_F_FAIL: the link that failed it */
	uint32_t fault;	   /* CHAN_F_FAIL: the fault that failed it, id + 1 (0: none) */
	uint32_t post_us;  /* last chunk, modelled fabric: when the send was posted, in us, low
			      32 bits (the receiver's "never early" check; 0: not stamped) */
};

/* Per-side shared state. Each block has exactly one writer. */
struct chan_side {
	_Alignas(64) _Atomic uint64_t head; /* tx: slots published; rx: slots consumed (tail) */
	_Atomic uint64_t msgs;		    /* tx: messages posted; rx: messages delivered (ACK) */
	_Atomic uint64_t cts;		    /* rx only: receives posted */
	_Atomic uint64_t bytes;		    /* payload bytes copied by this side */
	_Atomic uint32_t state;		    /* enum chan_state */
	_Atomic int32_t error;		    /* positive errno when state == FAILED */
	_Atomic uint64_t detail[2];	    /* values behind error (EMSGSIZE: send, capacity) */
	_Atomic uint32_t pid;		    /* attached process, for show */
	_Atomic uint32_t fault;		    /* ETIMEDOUT: the fault behind it, id + 1 (0: none) */
};

/* The connection's route, written by the daemon at connect (npath 0: the ideal fabric). */
struct chan_route {
	uint32_t npath;
	uint32_t switching; /* enum model_switching */
	uint32_t path[MODEL_MAX_HOPS]; /* directed link ids, sender to receiver */
	uint32_t src_nic;	       /* the sending NIC's index in the fabric (gid) */
	int32_t src_node, dst_node;    /* the connection's node ids (connection-scoped faults) */
	uint32_t reserved;
	struct model_nic nic;	       /* the sending NIC */
};

struct chan_shm {
	uint64_t magic;
	uint32_t version;
	uint32_t slot_bytes;
	uint32_t nslots; /* power of two */
	_Atomic uint32_t hold; /* CHAN_HOLD_*: written by the daemon only (chan_set_hold) */
	uint64_t chan_id;
	uint64_t total_bytes; /* size of the whole region */
	uint64_t desc_off;    /* offset of struct chan_desc[nslots] */
	uint64_t data_off;    /* offset of the staging slots, page aligned */
	struct chan_route route;
	struct chan_side tx;
	struct chan_side rx;
	/* Written by the daemon only. */
	_Alignas(64) _Atomic uint32_t tx_dead; /* the sender's process is gone */
	_Atomic uint32_t rx_dead;	       /* the receiver's process is gone */
	_Atomic uint32_t daemon_gone;	       /* the daemon shut down */
	_Atomic uint32_t reset_fault;	       /* a reset fault failed the connection: id + 1 */
	/* Written by rx before its first receive with a region: where the sender's copy engine
	 * asks for the regions (opaque to chan; NUL-terminated). */
	char rx_where[CHAN_WHERE_LEN];
	struct chan_cts cts[CHAN_MAX_REQS];
};

struct chan_geom {
	uint32_t slot_bytes; /* >= CHAN_MIN_SLOT_BYTES, multiple of 64 */
	uint32_t nslots;     /* power of two, 2..65536 */
};

/* Why the last call failed: filled on every error return where given. */
struct chan_err {
	int code;	    /* the negative errno returned */
	uint64_t value[2];  /* EMSGSIZE: send size, receive capacity; else context */
	const char *what;   /* static text: "send larger than the posted receive", ... */
	uint64_t msg;	    /* the message concerned (its sequence number on the channel), if any */
	uint32_t fault;	    /* -ETIMEDOUT: the fault that failed it, id + 1 (0: the models' own) */
	int64_t delay_ns;   /* ... and what it had cost the message before (send side) */
};

/* ---- daemon side --------------------------------------------------------- */

/* Bytes of shared memory a channel of this geometry takes; 0 if the geometry is invalid. */
size_t chan_shm_bytes(const struct chan_geom *g);
/* Geometry for a per-connection budget of mem_bytes (staging rounded down to slots). */
int chan_geom_for(uint64_t mem_bytes, uint32_t slot_bytes, struct chan_geom *out);
/* Initialise a zeroed region of len bytes. Returns 0 or -EINVAL. */
int chan_format(void *base, size_t len, const struct chan_geom *g, uint64_t chan_id);
/* Set the route of a formatted region, before it is handed out. 0 or -EINVAL. */
int chan_set_route(struct chan_shm *shm, const struct model_path *p, uint32_t src_nic,
		   const struct model_nic *nic, int32_t src_node, int32_t dst_node);
/* Validate a region's header before trusting its offsets. 0, or -EPROTO with err filled. */
int chan_check(const void *base, size_t len, struct chan_err *err);
/*
 * An end that could not attach ('t' or 'r': out of memory, say) marks itself
 * failed with a positive errno, so the peer fails instead of waiting for it.
 */
void chan_abandon(struct chan_shm *shm, char which, int error);
/* Mark one side's process dead ('t' or 'r'), or the daemon gone ('d'). */
void chan_mark_dead(struct chan_shm *shm, char which);
/* A reset fault (id) failed the connection: both ends fail what they have (-ETIMEDOUT). */
void chan_mark_reset(struct chan_shm *shm, uint32_t fault_id);

/* Set (on) or clear the CHAN_HOLD_* bits in bits. Returns the bits as they were. */
uint32_t chan_set_hold(struct chan_shm *shm, uint32_t bits, int on);

struct chan_stats {
	uint64_t tx_msgs, tx_bytes, rx_msgs, rx_bytes;
	uint32_t tx_state, rx_state, tx_pid, rx_pid;
	int32_t tx_error, rx_error;
	uint64_t inflight_slots;
	uint64_t tx_head, rx_head, rx_cts; /* slots published, slots consumed, receives posted */
};
void chan_stats(const struct chan_shm *shm, struct chan_stats *out);

/* ---- endpoints ----------------------------------------------------------- */

struct chan_tx;
struct chan_rx;

/*
 * Attach an endpoint to a mapped, checked region. The endpoint does not own
 * the mapping: the caller unmaps it after chan_*_free. Returns 0, -ENOMEM or
 * -EPROTO.
 */
int chan_tx_new(struct chan_shm *shm, size_t len, struct chan_tx **out);
int chan_rx_new(struct chan_shm *shm, size_t len, struct chan_rx **out);
/*
 * Mark the side closed (the peer fails whatever can no longer complete) and
 * free the local state, requests still in flight included. NULL-safe.
 */
void chan_tx_free(struct chan_tx *tx);
void chan_rx_free(struct chan_rx *rx);

/*
 * Put an endpoint on a modelled fabric (the shared fabric state; not owned,
 * must outlive the endpoint). From then on each send is reserved on the
 * route at post time and completes no earlier than the model says; each
 * receive likewise, and its lateness is recorded. Without it (the ideal
 * fabric) completions are immediate. 0, or -EINVAL if the route does not fit.
 */
int chan_tx_set_fabric(struct chan_tx *tx, struct fst_view *fab);
int chan_rx_set_fabric(struct chan_rx *rx, struct fst_view *fab);

/* Requests are small integers, valid until reported done or failed. */
typedef int chan_req;

/* ---- one-sided delivery ---------------------------------------------------------------- */

/* Where a receive buffer lives: a region the receiver exported, and an offset in it. */
struct chan_region {
	uint64_t id;  /* 0: host memory (the staged path) */
	uint64_t off; /* of the buffer's first byte in the region */
};

/* One corrupted bit of a one-sided message: byte off (in the message) ^= mask. */
struct chan_flip {
	uint64_t off;
	uint8_t mask;
};

/*
 * A one-sided message into a receive read as it fills (CHAN_RX_AT_DELIVERY) on a modelled
 * fabric streams in as on the wire: in up to CHAN_PIECES_MAX copies of CHAN_PIECE_MIN bytes or
 * more, each started at the arrival of its last byte, so that NCCL's kernel reads the first
 * lines of a large LL128 step while the rest is in flight (a NIC writes each packet as it
 * comes), not all of them at the message's end. Other messages go in one copy.
 */
#define CHAN_PIECES_MAX 8
#define CHAN_PIECE_MIN (64u << 10)

/*
 * The sender's copy engine (plugin/gpu_copy.c on CUDA; a memcpy stand-in in the
 * unit tests). Called from the thread that drives the tx endpoint; never
 * blocks but in drain. Errors are negative errno values; a failed copy fails
 * the message (-EIO to the caller). Up to CHAN_MAX_SENDS * CHAN_PIECES_MAX
 * tickets may be unfinished at once.
 */
struct chan_dma {
	/*
	 * Start copying len bytes from src (host or device memory, as posted) into
	 * the receiver's region id at off, then apply the flips (offsets relative to
	 * the message), in that order. The range must be checked against the region
	 * before anything is issued. 0 with *ticket set, or a negative errno.
	 */
	int (*start)(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		     uint64_t len, const struct chan_flip *flips, uint32_t nflips, uint64_t *ticket);
	/* 1 the copy (and its flips) are visible in the receiver's memory, 0 not yet, < 0 failed. */
	int (*poll)(void *ctx, uint64_t ticket);
	/* Wait until every copy started has ended (close); armed copies are fired first. */
	void (*drain)(void *ctx);
	/*
	 * Optional, with fire (both NULL: a held piece is started by start at its arrival). As
	 * start, without flips, but the copy is queued now and runs only once fire(ticket) lets it
	 * go, which stores a word and calls nothing: a held piece then lands a flag's latency after
	 * its arrival instead of a copy launch's. src_dev: the source is device memory (as posted,
	 * CHAN_MEM_DEVICE). -EOPNOTSUPP: not this copy (it is started at its time instead); other
	 * errors fail the message as start's do. The channel fires a sendComm's armed copies in the
	 * order it armed them, and arms one only if its time is no earlier than the last one's.
	 */
	int (*arm)(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		   int src_dev, uint64_t len, uint64_t *ticket);
	void (*fire)(void *ctx, uint64_t ticket);
	/* How long before its arrival a piece is armed, at most (ns; 0: as soon as posted): so
	 * that a send's far pieces do not crowd the engine ahead of copies due now. */
	int64_t arm_ahead_ns;
	/* A held send the engine arms goes in one copy, not in pieces (its lines land together,
	 * a flag's latency after its last byte's arrival). */
	int arm_whole;
};

/* Give the sender a copy engine (not owned; must outlive the endpoint). 0 or -EINVAL (a call
 * missing, or arm without fire). */
int chan_tx_set_dma(struct chan_tx *tx, const struct chan_dma *dma, void *ctx);
/* Publish where the sender asks for this receiver's regions (at most CHAN_WHERE_LEN - 1). */
int chan_rx_set_where(struct chan_rx *rx, const char *where);

/* Where a send's source lives: the CPU cannot read device memory. */
enum chan_mem { CHAN_MEM_HOST = 0, CHAN_MEM_DEVICE = 1 };

/*
 * Post a send of size bytes from data with a tag. Copies what fits into the
 * staging ring now and the rest during later progress calls, so data must stay
 * valid until the request is done. Returns 0 with *req set, -EAGAIN (would
 * block: no matching CTS yet, or CHAN_MAX_SENDS in flight), -EMSGSIZE (size
 * larger than the matched buffer: the channel fails on both ends) or
 * -ECONNRESET.
 */
int chan_tx_post(struct chan_tx *tx, const void *data, uint64_t size, int32_t tag, chan_req *req,
		 struct chan_err *err);
/*
 * The same for a source in src_mem. A send matched to a buffer with a region
 * is copied one-sided (the tx needs a copy engine, else -EPROTO); a device
 * source matched to a host buffer is refused with -EPROTO (the CPU cannot
 * stage it). chan_tx_post is this with CHAN_MEM_HOST.
 */
int chan_tx_post_src(struct chan_tx *tx, const void *data, uint64_t size, int32_t tag,
		     enum chan_mem src_mem, chan_req *req, struct chan_err *err);
/*
 * Progress the channel, then report on one send: *done = 0 or 1; on done,
 * *size = bytes sent and the request is recycled. A failed request returns the
 * error and is recycled too.
 */
int chan_tx_test(struct chan_tx *tx, chan_req req, int *done, uint64_t *size,
		 struct chan_err *err);

/*
 * Post a receive of n (1..CHAN_MAX_RECVS) buffers with capacities and tags.
 * Returns 0 with *req set, -EAGAIN (CHAN_MAX_REQS receives in flight), -EINVAL
 * or -ECONNRESET.
 */
int chan_rx_post(struct chan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		 const int32_t *tags, chan_req *req, struct chan_err *err);
/*
 * The same with each buffer's region (NULL: all host memory) and flags (CHAN_RX_*; -EINVAL
 * for others). A buffer with a region is filled only one-sided; a staged chunk for it fails
 * the channel (-EPROTO), since the CPU may not be able to write it.
 */
int chan_rx_post_in(struct chan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		    const int32_t *tags, const struct chan_region *regions, uint32_t flags,
		    chan_req *req, struct chan_err *err);
/* Progress, then report on one receive: on done, sizes[i] = bytes landed in buffer i. */
int chan_rx_test(struct chan_rx *rx, chan_req req, int *done, uint64_t *sizes,
		 struct chan_err *err);

/* Drive the channel without testing a particular request (copy pending chunks). */
int chan_tx_progress(struct chan_tx *tx, struct chan_err *err);
int chan_rx_progress(struct chan_rx *rx, struct chan_err *err);

/* Number of requests in flight, for close-time reporting. */
int chan_tx_inflight(const struct chan_tx *tx);
int chan_rx_inflight(const struct chan_rx *rx);

/* ---- trace accessors (plugin/trace.c) ------------------------------------------------------
 * Read-only views of one request for the message trace: what the model said at post and how
 * far the data path has got. They never progress the channel and cost nothing unless called.
 * Valid while the request is in flight and after it was reported done or failed, until its
 * slot is posted again. 0, or -EINVAL for a request number out of range.
 */
struct chan_times {
	int64_t ready_ns; /* model: the receive completes (CLOCK_MONOTONIC; 0: not modelled;
			     rx: final once every buffer's last chunk is in) */
	int64_t done_ns;  /* tx, model: the send completes or fails (0: not modelled) */
	uint64_t msg;	  /* tx: the message's number on the channel; rx: the receive's */
	uint64_t recv;	  /* tx: the receive it fills; rx: the receive's number */
	uint64_t bytes;	  /* tx: the message's size; rx: bytes landed so far, all buffers */
	uint32_t buf;	  /* tx: the buffer it fills in that receive */
	uint32_t fault;	  /* the fault that dooms it, id + 1 (0: none) */
	uint8_t started;  /* tx: its first chunk is in staging; rx: a first chunk landed */
	uint8_t arrived;  /* tx: the receiver counted it (the ACK); rx: every last chunk is in */
	uint8_t doomed;	  /* the model fails it (tx at done_ns, rx at ready_ns) */
	uint8_t in_use;	  /* not reported done or failed yet */
};
int chan_tx_times(const struct chan_tx *tx, chan_req req, struct chan_times *out);
int chan_rx_times(const struct chan_rx *rx, chan_req req, struct chan_times *out);
/* ---- end of trace accessors ---------------------------------------------------------------- */

/*
 * Where the fault-injected test build (chan.c with CHAN_INJECT_EARLY=1, build/inject/) calls
 * its chan_inject_hook, a hostile peer's chance to write the region: right after attach's
 * chan_check passed, and after set_fabric checked the route, before it is used. The region's
 * values used after each must be the ones checked (sim/test/test_chan_race.c).
 */
enum { CHAN_HOOK_CHECKED = 1, CHAN_HOOK_TX_ROUTE, CHAN_HOOK_RX_ROUTE };

/*
 * The region's layout, pinned (as plugin/ncclnet.h pins the ABI): both ends
 * and the daemon must agree byte for byte. Change a struct and bump
 * CHAN_VERSION, then write the new figures here.
 */
#define CHAN_LAYOUT(cond) _Static_assert(cond, "the channel's layout changed: bump CHAN_VERSION")
CHAN_LAYOUT(CHAN_VERSION == 6 && sizeof(struct chan_shm) == 8128 &&
	    offsetof(struct chan_shm, route) == 56 && offsetof(struct chan_shm, tx) == 192 &&
	    offsetof(struct chan_shm, rx) == 256 && offsetof(struct chan_shm, tx_dead) == 320 &&
	    offsetof(struct chan_shm, rx_where) == 336 && offsetof(struct chan_shm, cts) == 400);
CHAN_LAYOUT(sizeof(struct chan_route) == 112 && sizeof(struct chan_side) == 64 &&
	    sizeof(struct chan_desc) == 64 && sizeof(struct chan_cts) == 240);
/* The sending NIC's model travels in chan_route. */
CHAN_LAYOUT(offsetof(struct chan_route, nic) == 56 && sizeof(struct model_nic) == 56 &&
	    offsetof(struct model_nic, timeout_exp) == 40);
#undef CHAN_LAYOUT

#endif /* SF_CHAN_H */
