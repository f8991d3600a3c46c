/* SPDX-License-Identifier: MIT */
/*
 * chan_int.h - what the channel's files share (chan.c: the endpoints and the
 * data path; chan_shm.c: the region's geometry and the daemon's side of it;
 * chan_watch.c: the trace accessors and the "never early" monitor). Nothing
 * else includes it.
 */
#ifndef SF_CHAN_INT_H
#define SF_CHAN_INT_H

#include <stdint.h>
#include <time.h>

#include "sim/core/chan.h"
#include "sim/core/copyq.h"
#include "sim/core/fstate.h"

#define ACQ(p) atomic_load_explicit((p), memory_order_acquire)
#define RLX(p) atomic_load_explicit((p), memory_order_relaxed)
#define REL(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define SET(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

#define PAGE 4096u

/* CLOCK_MONOTONIC in ns: the model's clock. */
static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Fills *err (when given) and returns code: how every call of the data path fails. */
static inline int fail(struct chan_err *err, int code, const char *what, uint64_t v0, uint64_t v1)
{
	if (err) {
		err->code = code;
		err->what = what;
		err->value[0] = v0;
		err->value[1] = v1;
		err->msg = 0;
		err->fault = 0;
		err->delay_ns = 0;
	}
	return code;
}

/* ---- the region's geometry ----------------------------------------------------------------- */

static inline int chan_geom_ok(const struct chan_geom *g)
{
	return g && g->slot_bytes >= CHAN_MIN_SLOT_BYTES && g->slot_bytes % 64 == 0 &&
		g->nslots >= 2 && g->nslots <= 65536 && (g->nslots & (g->nslots - 1)) == 0;
}

static inline uint64_t chan_align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static inline uint64_t chan_desc_off(void)
{
	return chan_align_up(sizeof(struct chan_shm), 64);
}

static inline uint64_t chan_data_off(const struct chan_geom *g)
{
	return chan_align_up(chan_desc_off() + (uint64_t)g->nslots * sizeof(struct chan_desc),
			     PAGE);
}

/* ---- the endpoints -------------------------------------------------------------------------- */

struct tx_send {
	const uint8_t *data;
	uint64_t size;
	uint64_t msg;
	uint64_t pushed; /* bytes copied into staging */
	uint64_t recv;
	uint16_t buf;
	uint8_t in_use;
	uint8_t started; /* first chunk pushed (a 0-byte send has one chunk) */
	uint8_t doomed;	 /* the model says it fails at done_ns */
	int32_t tag;
	int64_t ready_ns; /* modelled: the receive completes, 0 on the ideal fabric */
	int64_t done_ns;  /* modelled: the send completes (or fails, if doomed) */
	uint32_t timeouts;
	uint32_t fail_link;
	uint32_t corrupted;  /* packets the model corrupts: bits flipped in the staged copy */
	uint32_t fault;	     /* the fault that dooms it, id + 1 */
	uint8_t corrupt_set; /* a degrade fault sets the hops' corruption: corrupt_p */
	uint32_t corrupt_p[MODEL_MAX_HOPS];
	int64_t delay_ns; /* what faults added before that */
	uint64_t key_msg; /* the model's message number, for the corruption draws */
	uint8_t direct;	  /* one-sided: the copy engine writes the receiver's buffer */
	uint8_t held;	  /* direct: into a receive read as it fills, on a modelled fabric */
	uint8_t pieces;	  /* direct: copies started (held ones stream in CHAN_PIECES_MAX) */
	uint8_t polled;	  /* direct: of which seen done */
	uint64_t ticket[CHAN_PIECES_MAX]; /* direct: the copy engine's, a piece each */
	uint64_t started_bytes;		  /* direct: the message's bytes whose copies started */
	int64_t due_ns;	 /* direct, CHAN_RX_AT_DELIVERY: the next piece's copy starts then (0: all
			   started) */
	uint8_t nocopy;	 /* direct, CHAN_RX_AT_DELIVERY, doomed: its bytes never land */
	uint8_t src_dev; /* direct: the source is device memory (CHAN_MEM_DEVICE) */
	uint8_t fired;	 /* direct: pieces running (started, or armed and fired); the rest of
			    [0, pieces) are armed, each waiting for its piece_due */
	uint8_t noarm;	 /* direct: the copy engine would not arm a piece of it */
	uint8_t whole;	 /* direct, held: to go in one armed copy (chan_dma.arm_whole), if it can
			    be armed before its first piece would be due; else in pieces */
	int64_t piece_due[CHAN_PIECES_MAX]; /* direct: an armed piece's arrival */
	uint64_t region; /* direct: the receiver's region and the buffer's offset in it */
	uint64_t roff;
	uint64_t slot;	    /* direct: the slot of its descriptor (out once head passes it) */
	uint64_t corrupt_k; /* the next packet the model corrupts (chunks are flipped in order) */
	int64_t post_ns;    /* the time the model was asked for it (stamped on its last chunk) */
};

struct chan_tx {
	struct chan_shm *shm;
	struct chan_desc *desc;
	uint8_t *slots;
	uint32_t slot_bytes;
	uint32_t mask;
	uint64_t head;	    /* slots published (we are the only writer) */
	uint64_t tail_seen; /* cached rx.head */
	uint64_t cts_seen;  /* cached rx.cts */
	uint64_t cur_recv;  /* the head receive: the oldest not fully matched */
	uint8_t filled[CHAN_MAX_RECVS];
	uint32_t nfilled;
	uint64_t next_msg; /* sends posted */
	uint64_t push_msg; /* oldest send not fully pushed */
	uint64_t acked;	   /* cached rx.msgs */
	uint64_t bytes;
	int inflight;
	int failed; /* sticky negative errno */
	struct chan_err ferr;
	struct fst_view *fab; /* NULL: the ideal fabric */
	struct fst_conn conn;
	struct model_path mpath; /* the route, for the corruption draws */
	uint32_t mtu;
	uint64_t ps_per_byte; /* the route's slowest stage, picoseconds a byte (0: unlimited) */
	/* Copies handed to the copy threads (sim/copyq.h): slots [head, sub_head) are filled
	 * or being filled and published in order once their copies are done. */
	uint64_t sub_head;
	int pool;
	struct copyq_job *jobs;	    /* per slot */
	struct tx_pend *pend;	    /* per slot */
	const struct chan_dma *dma; /* one-sided copies (NULL: none) */
	void *dma_ctx;
	uint32_t direct_busy;	    /* direct copies started and not yet published */
	int64_t arm_due;	    /* the arrival of the last piece armed (they fire in order) */
	uint32_t unfired;	    /* pieces armed and not yet fired */
	int arm_off;		    /* a send failed: nothing is armed on this channel again */
	struct chan_flip *flips;    /* CHAN_MAX_FLIPS, allocated with the copy engine */
	char where[CHAN_WHERE_LEN]; /* the receiver's, read once */
	struct tx_send sends[CHAN_MAX_SENDS];
};

/* A slot whose copy is in flight: what to do once it is done. */
struct tx_pend {
	uint32_t send; /* index in sends[] */
	uint32_t len;
	uint64_t off;	 /* of the chunk in its message */
	uint8_t corrupt; /* flip the model's bits in it first */
};

struct rx_recv {
	uint8_t *data[CHAN_MAX_RECVS];
	uint64_t cap[CHAN_MAX_RECVS];
	uint64_t got[CHAN_MAX_RECVS];	  /* bytes landed so far, per buffer */
	uint8_t complete[CHAN_MAX_RECVS]; /* its last chunk is in */
	uint64_t sub[CHAN_MAX_RECVS];	  /* bytes handed to copies so far (>= got) */
	uint8_t sub_last[CHAN_MAX_RECVS]; /* its last chunk is being copied */
	uint8_t direct[CHAN_MAX_RECVS];	  /* the buffer has a region: filled one-sided only */
	uint8_t doomed;			  /* a message of it fails at ready_ns */
	uint8_t at_delivery;		  /* CHAN_RX_AT_DELIVERY: no chunk copied before its time */
	uint32_t fail_link;
	uint32_t fail_fault;
	uint64_t fail_msg;
	int64_t ready_ns;   /* modelled completion: the latest of its messages' */
	int64_t floor_ns;   /* the soonest any model run could complete it (early) */
	uint64_t floor_msg; /* the message (+1) whose floor was noted while held back */
	uint64_t seq;
	uint32_t n;
	uint32_t nfilled;
	uint8_t in_use;
};

struct chan_rx {
	struct chan_shm *shm;
	struct chan_desc *desc;
	uint8_t *slots;
	uint32_t slot_bytes;
	uint32_t mask;
	uint64_t tail;	    /* slots consumed (we are the only writer) */
	uint64_t head_seen; /* cached tx.head */
	uint64_t posted;    /* receives posted */
	uint64_t msgs;	    /* messages delivered */
	uint64_t bytes;
	int inflight;
	int failed;
	struct chan_err ferr;
	struct fst_view *fab;	 /* NULL: the ideal fabric */
	uint32_t last_link;	 /* the route's last hop: where lateness is recorded */
	struct chan_route route; /* copied from the region once and checked, at set_fabric */
	/* Copies handed to the copy threads: slots [tail, sub_tail) are being copied out and
	 * are counted (and freed for the sender) in order once done. */
	uint64_t sub_tail;
	int pool;
	struct copyq_job *jobs; /* per slot */
	struct chan_desc *pend; /* per slot: the checked descriptor */
	struct rx_recv recvs[CHAN_MAX_REQS];
};

/* The "never early" monitor (chan_watch.c), called by the receive path. */
/* The post time in microseconds, low 32 bits (wraps every 71 minutes; 0: not stamped). */
uint32_t chan_post_stamp(int64_t post_ns);
/* A message's last chunk is in: the soonest its receive may complete goes up to its floor. */
void chan_rx_note_floor(struct chan_rx *rx, struct rx_recv *r, const struct chan_desc *d);
/* A receive completes at now: its lateness against the model's time, and whether it is early. */
void chan_rx_record_delivery(struct chan_rx *rx, const struct rx_recv *r, int64_t now);

#endif /* SF_CHAN_INT_H */
