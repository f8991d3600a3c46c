/* SPDX-License-Identifier: MIT */
/*
 * gpu_int.h - what the GPU path's files share (plugin/gpu.h is the contract to the rest of the
 * plugin): the state of the process's GPU path (G), exports and imports, the copy engine's
 * sendComm state, its queues and the small-copy kernel. Internal to plugin/gpu*.c: gpu.c the mode,
 * gpu_share.c the exports, their server and the imports, gpu_copy.c the copy engine (contexts,
 * streams, the chan_dma operations), gpu_issue.c the batches and their issuer thread, gpu_kern.c
 * the resident small-copy kernel.
 */
#ifndef SF_GPU_INT_H
#define SF_GPU_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "plugin/cudadrv.h"
#include "plugin/gpu.h"
#include "sim/core/chan.h"

#define SFGPU_PROTO 1
#define SFGPU_IO_TIMEOUT_MS 5000   /* an export request: the peer's server answers at once */
#define SFGPU_TX_IMPORTS 64	   /* regions one sendComm keeps mapped (least recently used go) */
#define SFGPU_MAX_CTX 16	   /* CUDA contexts (devices) one process copies from */
#define SFGPU_MAX_STREAMS 8	   /* copy streams in our own context (SIMFABRIC_GPU_STREAMS) */
#define SFGPU_SECRET_HEX 32	   /* the export server's secret, in hex digits */
#define SFGPU_SLOW_NS 2000000000LL /* a copy still running after this is worth a WARN */
#define SFGPU_BATCH_MAX 32	   /* copies in one batch call (SIMFABRIC_GPU_BATCH_MAX) */
#define SFGPU_BATCH_EVENTS 128	   /* batches in flight per stream: their events, in turn */
#define SFGPU_GATES 4		   /* gate streams per copy context (armed copies) */
#define SFGPU_GATE_UNFIRED 64	   /* armed copies a gate holds not yet let go, at most */
/* armed copies the issuer issues per gate before it looks again at the copies due now */
#define SFGPU_GATE_TURN 2
/* How long before its arrival a held piece is armed (SIMFABRIC_GPU_ARM_AHEAD_US): more than
 * the issuer takes to queue it, less than a burst of a whole window of sends' pieces. */
#define SFGPU_ARM_AHEAD_NS 50000

enum { EXPORT_LEGACY = 1, EXPORT_FD = 2, EXPORT_SELF = 3 /* an import of our own export */ };

/* SIMFABRIC_GPU_COPY_CONTEXT: where the copies run (see copy_stream). */
enum copy_ctx { COPY_CTX_AUTO = 0, COPY_CTX_OWN, COPY_CTX_APP };

struct gexport {
	struct gexport *next;
	uint64_t region;
	uintptr_t base;
	uint64_t size;
	uint64_t buffer_id; /* CUDA's per-allocation id: a new allocation at a reused base differs */
	int kind;
	int fd;			  /* EXPORT_FD */
	struct cu_ipc_handle ipc; /* EXPORT_LEGACY */
	int refs;
};

struct gimport {
	struct gimport *next;
	char where[CHAN_WHERE_LEN];
	uint64_t region;
	cu_ptr va;
	uint64_t size;
	cu_ctx ctx; /* where va is mapped: the copy context it was imported in, or ours (self) */
	int kind;
	int refs; /* sendComms using it */
};

/*
 * Small copies (SIMFABRIC_GPU_SMALL=kernel, in our own context only): a resident kernel
 * (plugin/copier.cu) polls a ring of descriptors in host-mapped memory and copies each message
 * from a host staging slot into the receiver's buffer, so that a small message from host memory
 * (LL's sends) costs a memcpy and a store instead of a copy launch and an event.
 */
#define SFK_RING 64u	     /* descriptors, a power of two: one staging slot each */
#define SFK_SLOT (64u << 10) /* a staging slot: the largest small copy there can be */
/* The default largest small copy: one block reads host memory at roughly 10 GB/s, beyond which
 * the copy engine wins. */
#define SFK_SMALL_MAX (16u << 10)
_Static_assert((SFK_RING & (SFK_RING - 1)) == 0, "the kernel masks its ring index");
#define SFK_WAIT_NS 10000000000LL /* how long a drain waits for the kernel before it gives up */
struct sfk_desc {		  /* as copier.cu reads it */
	uint64_t src, dst, len, seq;
};
struct gkern {
	pthread_mutex_t lock;		/* descriptors and staging: any sendComm's thread */
	volatile struct sfk_desc *ring; /* host-mapped; written by us, read by the kernel */
	volatile uint64_t *done;	/* written by the kernel: the last seq copied */
	volatile uint32_t *stop;	/* ends the kernel */
	volatile uint64_t *running;	/* set by the kernel once resident */
	cu_event ended;			/* recorded after it: complete once it has returned */
	pid_t pid;			/* the process that launched it (not a fork's child) */
	uint8_t *staging;		/* SFK_RING slots of SFK_SLOT bytes */
	cu_ptr staging_d;		/* ... as the kernel sees it */
	uint64_t next;			/* the next descriptor's seq (from 1) */
};

/*
 * Armed copies (SIMFABRIC_GPU_ARM=whole or pieces; in our own context only): a held piece's copy from device
 * memory is queued when its send is posted, on a gate stream behind cuStreamWaitValue32 on the
 * gate's host-mapped word, and let go at its arrival by storing its number there (fire: a store,
 * no driver call), so that it lands a flag's latency after its arrival, not a copy launch's.
 * A gate belongs to one sendComm while it holds copies of it not yet let go (owner), so no
 * copy waits behind another sendComm's arrival; a sendComm fires its own in the order it armed
 * them, and the word only grows (cyclically: the wait compares as int32_t).
 */
struct ggate {
	cu_stream s;
	struct gqueue *q;	 /* the issuer issues each of its copies as a batch of its own */
	volatile uint32_t *word; /* host-mapped: the number of the last copy let go */
	cu_ptr word_d;		 /* ... as the GPU reads it */
	uint32_t armed;		 /* the number of the last copy armed (under G.gate_lock) */
	struct sfgpu_tx *owner;	 /* whose copies it holds not yet let go (under G.gate_lock) */
};

/*
 * Copies waiting for their stream, which go out together: one batch call and one event for all
 * of them, issued by the process's issuer thread (see "batches" below). One per copy stream; any
 * sendComm's thread queues, under lock.
 */
struct gqueue {
	pthread_mutex_t lock;  /* the pending list: held for a few stores */
	pthread_mutex_t issue; /* one issuer at a time, in the order the lists were taken */
	cu_stream s;
	cu_ctx ctx;		 /* the stream's */
	_Atomic uint64_t issued; /* batches issued: batch b's event is ev[b % SFGPU_BATCH_EVENTS] */
	_Atomic uint64_t completed; /* every batch up to this one has ended */
	cu_event ev[SFGPU_BATCH_EVENTS];
	int n;		 /* copies queued */
	int64_t since;	 /* when the oldest came (ns) */
	int ring_warned; /* under issue */
	cu_ptr dst[SFGPU_BATCH_MAX], src[SFGPU_BATCH_MAX];
	size_t len[SFGPU_BATCH_MAX];
	uint64_t *mark[SFGPU_BATCH_MAX]; /* its sendComm's batch[] entry: set when issued */
	const char *desc[SFGPU_BATCH_MAX];
	/* a gate's queue: each copy a batch of its own, behind the wait for its number */
	struct ggate *gate;
	uint32_t gseq[SFGPU_BATCH_MAX];	   /* each queued copy's number */
	uint32_t bseq[SFGPU_BATCH_EVENTS]; /* each batch's (by its event): none ends before it */
};
#define BATCH_QUEUED UINT64_MAX	      /* batch[]: waiting in the queue */
#define BATCH_FAILED (UINT64_MAX - 1) /* batch[]: its batch call failed */

/* Copies in flight on one sendComm: a send's pieces each (sim/core/chan.h, CHAN_PIECES_MAX),
 * so that two unfinished tickets never share a slot. */
#define SFGPU_TICKETS (CHAN_MAX_SENDS * CHAN_PIECES_MAX)

struct sfgpu_tx {
	struct sfgpu_tx *next; /* in G.txs */
	cu_ctx ctx;	       /* where its stream and events are: its copy context (copy_stream) */
	cu_ctx app;	       /* the caller's context at its first copy: where the sources are */
	cu_stream stream;      /* the copy stream, once it exists */
	uint64_t done_ticket;  /* every copy before this ticket has completed */
	uint64_t next_ticket;
	struct gqueue *q; /* its stream's queue (NULL: no batch call, every copy alone) */
	cu_event ev[SFGPU_TICKETS];
	/* per slot: the batch its copy went out in (0: alone, with ev[slot]), or BATCH_* */
	uint64_t batch[SFGPU_TICKETS];
	int64_t t_start[SFGPU_TICKETS]; /* per event slot: when its copy was issued (ns) */
	uint64_t len[SFGPU_TICKETS];
	uint64_t kseq[SFGPU_TICKETS]; /* per event slot: the kernel's seq of a small copy, or 0 */
	struct gkern *kern;	      /* the small-copy kernel of its context, or NULL */
	struct ggate *gates;	      /* its context's gates (armed copies), or NULL */
	int ngates;
	int gated_out;		       /* armed copies whose end it has not yet seen */
	uint64_t n_copies, n_armed;    /* copies asked for, of which armed (said at close) */
	uint64_t gtk[SFGPU_TICKETS];   /* per slot: the ticket of the armed copy in it */
	uint64_t arm_q[SFGPU_TICKETS]; /* armed tickets in order, [arm_head, arm_tail) */
	uint64_t arm_head, arm_tail;
	int gate_failed; /* an armed copy's batch failed: its write may still come (keep maps) */
	int8_t gk[SFGPU_TICKETS];     /* per slot: the gate of an armed copy, or -1 */
	uint8_t gated[SFGPU_TICKETS]; /* ... armed, its end not yet seen */
	uint32_t gseq[SFGPU_TICKETS]; /* ... its number at its gate */
	uint64_t kern_last;	      /* the seq of its last small copy */
	int slow_warned;
	int nimp;
	struct {
		struct gimport *im; /* a reference held */
		uint64_t last;	    /* the ticket of the last copy into it */
	} imp[SFGPU_TX_IMPORTS];
	char desc[96];
};

struct sfgpu_state {
	pthread_mutex_t lock;	  /* exports: the server thread takes only this one */
	pthread_mutex_t imp_lock; /* imports, txs, streams; never held while a peer's server
				     answers, and never needed by our own server */
	pthread_once_t once;
	int mode;      /* 1 on, 0 off */
	int setup_err; /* negative errno of a failed setup */
	char setup_why[192];
	char describe[384];
	struct cudrv cu;
	struct gexport *exports;
	uint64_t next_region;
	struct gimport *imports;
	struct sfgpu_tx *txs;
	int copy_ctx;	  /* enum copy_ctx: SIMFABRIC_GPU_COPY_CONTEXT */
	int own_streams;  /* SIMFABRIC_GPU_STREAMS: sendComms spread over this many (own context) */
	int small_kernel; /* SIMFABRIC_GPU_SMALL=kernel */
	uint64_t small_max; /* SIMFABRIC_GPU_SMALL_MAX: the largest message the kernel copies */
	uint64_t batch_max; /* SIMFABRIC_GPU_BATCH_MAX: copies per batch call (1: each alone) */
	int sender_issues;  /* SIMFABRIC_GPU_ISSUER=sender: no issuer thread, no queue */
	int arm_off;	    /* SIMFABRIC_GPU_ARM=off: held pieces start at their arrival */
	int arm_draining;   /* drains running (under gate_lock): nothing is armed meanwhile */
	pthread_mutex_t gate_lock; /* the gates' owners and numbers armed */
	struct gqueue queues[SFGPU_MAX_CTX * (1 + SFGPU_MAX_STREAMS)]; /* nqueues used */
	int nqueues;
	int nstreams;
	struct {
		cu_ctx ctx;  /* the application's context */
		cu_stream s; /* every copy issued in it, in one FIFO (see copy_stream) */
		cu_ctx own;  /* our own context on its device (own_stream), or NULL */
		cu_stream own_s[SFGPU_MAX_STREAMS]; /* its streams, own_n of them (0: not in use) */
		int own_n;
		unsigned own_next;		 /* the next sendComm's, round robin */
		struct gkern *kern;		 /* its small-copy kernel, or NULL */
		struct ggate gates[SFGPU_GATES]; /* ngates of them in our context (armed copies) */
		int ngates;
		int own_tried;
	} streams[SFGPU_MAX_CTX];
	int srv_fd;
	int srv_started;
	char name[24]; /* "@sfgpu-" + 16 hex digits: the abstract socket's name */
	char secret[SFGPU_SECRET_HEX + 1];
	char where[CHAN_WHERE_LEN]; /* name + "#" + secret: only peers that read it may ask */
};
extern struct sfgpu_state G;

/* ---- gpu_base.c: used by all, calls none of them */
int64_t gpu_now_ns(void); /* CLOCK_MONOTONIC */
const char *gpu_cuerr(cu_result r);
void gpu_nap(void); /* 20 us: a bounded poll's pause */
void gpu_hex_put(char *out, const unsigned char *b, size_t n);
cu_result gpu_top_stream(cu_stream *s); /* non-blocking, the current context's top priority */
/* streams of our own context, per device */
int own_streams(void);
/* n copies in one cuMemcpyBatchAsync on s, asking for a copy engine (see copy_in in
 * gpu_copy.c); the batch call must exist */
cu_result gpu_batch_copy(cu_ptr *dst, cu_ptr *src, size_t *len, size_t n, cu_stream s);

/* ---- gpu_share.c */
int gpu_server_start(char *why, size_t cap);
struct gimport *import_find(const char *where, uint64_t region, cu_ctx ctx); /* imp_lock */
struct gimport *import_new(const char *where, uint64_t region, char *why, size_t cap);
struct gimport *import_self(uint64_t region, cu_ctx app, char *why, size_t cap);
void import_unmap(struct gimport *im);
void import_put(struct gimport *im); /* under G.imp_lock */

/* ---- gpu_copy.c */
int copy_stream(cu_ctx app, int self, cu_ctx *ctx, cu_stream *out, char *why, size_t cap);

/* ---- gpu_issue.c */
struct gqueue *queue_for(cu_stream st, cu_ctx ctx);
void queue_ended(struct gqueue *q, uint64_t b);
enum { ISSUE_BY_ISSUER, ISSUE_WAIT, ISSUE_TRY };
int queue_issue(struct gqueue *q, int how);
int issuer_alive(void);
void queue_out(struct gqueue *q);
void queue_add(struct gqueue *q, cu_ptr dst, const void *src, uint64_t len, uint64_t *mark,
	       const char *desc, uint32_t gseq);
void issuer_kick(void); /* a gate's word has moved: its copies may end */
/* Has the gate let copy number n go? */
static inline int gate_fired(const struct ggate *g, uint32_t n)
{
	return (int32_t)(__atomic_load_n(g->word, __ATOMIC_ACQUIRE) - n) >= 0;
}

/* ---- gpu_kern.c */
struct gkern *kern_start(void);
int gpu_cpu_readable(const void *src);
int kern_done(const struct gkern *k, uint64_t seq);
int kern_wait(const struct gkern *k, uint64_t seq);
int kern_copy(struct gkern *k, cu_ptr dst, const void *src, uint64_t len, uint64_t *seq);
void kern_stop_all(void);
int streams_run(cu_stream *s, int n);

#endif
