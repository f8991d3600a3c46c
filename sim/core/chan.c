/* SPDX-License-Identifier: MIT */
/*
 * chan.c - the shared-memory data path of one emulated connection.
 * See chan.h for the protocol; this file keeps to its single-writer rule:
 * tx writes shm->tx, the descriptors and the slots; rx writes shm->rx and the
 * CTS ring; the daemon writes only the dead flags.
 */
#include "sim/core/chan.h"
#include "sim/core/copyq.h"
#include "sim/core/fstate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ACQ(p) atomic_load_explicit((p), memory_order_acquire)
#define RLX(p) atomic_load_explicit((p), memory_order_relaxed)
#define REL(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define SET(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)

#define PAGE 4096u

/*
 * The receiver's copy out of staging uses streaming (non-temporal) stores for
 * large chunks: the destination is written, not read, so there is no point
 * fetching its lines first, and the staging ring stays in cache instead of
 * being evicted by them. Measured here: 1 MiB messages 14 GB/s -> 26 GB/s.
 * Small chunks keep memcpy: the fence would cost more than it saves.
 */
#define CHAN_NT_MIN_BYTES (16u << 10)

#if defined(__x86_64__)
#include <emmintrin.h>
static void copy_out(void *dst, const void *src, size_t n)
{
	if (n < CHAN_NT_MIN_BYTES) {
		memcpy(dst, src, n);
		return;
	}
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	memcpy(d, s, head);
	d += head, s += head, n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
	/* Streaming stores are weakly ordered: fence them before the release that publishes. */
	_mm_sfence();
}
#else
#define copy_out memcpy
#endif

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fail(struct chan_err *err, int code, const char *what, uint64_t v0, uint64_t v1)
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

/* ---- geometry and the daemon side ---------------------------------------- */

static int geom_ok(const struct chan_geom *g)
{
	return g && g->slot_bytes >= CHAN_MIN_SLOT_BYTES && g->slot_bytes % 64 == 0 &&
	       g->nslots >= 2 && g->nslots <= 65536 && (g->nslots & (g->nslots - 1)) == 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t desc_off_for(void)
{
	return align_up(sizeof(struct chan_shm), 64);
}

static uint64_t data_off_for(const struct chan_geom *g)
{
	return align_up(desc_off_for() + (uint64_t)g->nslots * sizeof(struct chan_desc), PAGE);
}

size_t chan_shm_bytes(const struct chan_geom *g)
{
	if (!geom_ok(g))
		return 0;
	uint64_t total = data_off_for(g) + (uint64_t)g->nslots * g->slot_bytes;
	return total > CHAN_MAX_SHM_BYTES ? 0 : (size_t)total;
}

int chan_geom_for(uint64_t mem_bytes, uint32_t slot_bytes, struct chan_geom *out)
{
	if (slot_bytes == 0)
		slot_bytes = CHAN_DEFAULT_SLOT_BYTES;
	uint64_t n = slot_bytes ? mem_bytes / slot_bytes : 0;
	uint32_t p = 1;
	while ((uint64_t)p * 2 <= n && p < 65536)
		p *= 2;
	struct chan_geom g = {.slot_bytes = slot_bytes, .nslots = p};
	if (n < 2 || chan_shm_bytes(&g) == 0)
		return -EINVAL;
	*out = g;
	return 0;
}

int chan_format(void *base, size_t len, const struct chan_geom *g, uint64_t chan_id)
{
	size_t need = chan_shm_bytes(g);
	if (!base || need == 0 || len < need)
		return -EINVAL;
	struct chan_shm *shm = base;
	memset(shm, 0, sizeof(*shm));
	shm->version = CHAN_VERSION;
	shm->slot_bytes = g->slot_bytes;
	shm->nslots = g->nslots;
	shm->chan_id = chan_id;
	shm->total_bytes = need;
	shm->desc_off = desc_off_for();
	shm->data_off = data_off_for(g);
	/* Magic last, so a half-formatted region never passes chan_check. */
	atomic_thread_fence(memory_order_release);
	shm->magic = CHAN_MAGIC;
	return 0;
}

int chan_set_route(struct chan_shm *shm, const struct model_path *p, uint32_t src_nic,
		   const struct model_nic *nic, int32_t src_node, int32_t dst_node)
{
	if (!shm || !p || !nic || p->nhops < 0 || p->nhops > MODEL_MAX_HOPS)
		return -EINVAL;
	memset(&shm->route, 0, sizeof(shm->route));
	shm->route.npath = (uint32_t)p->nhops;
	shm->route.switching = (uint32_t)p->switching;
	for (int j = 0; j < p->nhops; j++)
		shm->route.path[j] = p->link_id[j];
	shm->route.src_nic = src_nic;
	shm->route.src_node = src_node;
	shm->route.dst_node = dst_node;
	shm->route.nic = *nic;
	return 0;
}

int chan_check(const void *base, size_t len, struct chan_err *err)
{
	const struct chan_shm *shm = base;
	if (!base || len < sizeof(*shm))
		return fail(err, -EPROTO, "region smaller than the channel header", len,
			    sizeof(*shm));
	if (shm->magic != CHAN_MAGIC)
		return fail(err, -EPROTO, "bad channel magic", shm->magic, CHAN_MAGIC);
	if (shm->version != CHAN_VERSION)
		return fail(err, -EPROTO, "unsupported channel version", shm->version,
			    CHAN_VERSION);
	struct chan_geom g = {.slot_bytes = shm->slot_bytes, .nslots = shm->nslots};
	size_t need = chan_shm_bytes(&g);
	if (need == 0)
		return fail(err, -EPROTO, "bad channel geometry (slot bytes, slots)",
			    shm->slot_bytes, shm->nslots);
	if (shm->total_bytes != need || len < need)
		return fail(err, -EPROTO, "channel size does not match its geometry", len, need);
	if (shm->desc_off != desc_off_for() || shm->data_off != data_off_for(&g))
		return fail(err, -EPROTO, "bad channel offsets", shm->desc_off, shm->data_off);
	if (shm->route.npath > MODEL_MAX_HOPS)
		return fail(err, -EPROTO, "bad route length", shm->route.npath, MODEL_MAX_HOPS);
	return 0;
}

void chan_abandon(struct chan_shm *shm, char which, int error)
{
	if (!shm || (which != 't' && which != 'r'))
		return;
	struct chan_side *side = which == 't' ? &shm->tx : &shm->rx;
	SET(&side->error, error);
	uint32_t st = CHAN_ST_INIT;
	atomic_compare_exchange_strong(&side->state, &st, CHAN_ST_FAILED);
}

void chan_mark_dead(struct chan_shm *shm, char which)
{
	if (!shm)
		return;
	if (which == 't')
		REL(&shm->tx_dead, 1);
	else if (which == 'r')
		REL(&shm->rx_dead, 1);
	else if (which == 'd')
		REL(&shm->daemon_gone, 1);
}

void chan_mark_reset(struct chan_shm *shm, uint32_t fault_id)
{
	REL(&shm->reset_fault, fault_id + 1);
}

uint32_t chan_set_hold(struct chan_shm *shm, uint32_t bits, int on)
{
	if (!shm)
		return 0;
	return on ? atomic_fetch_or(&shm->hold, bits) : atomic_fetch_and(&shm->hold, ~bits);
}

void chan_stats(const struct chan_shm *shm, struct chan_stats *out)
{
	/* The counters are single-writer atomics; a torn pair only skews a display. */
	struct chan_shm *s = (struct chan_shm *)shm;
	memset(out, 0, sizeof(*out));
	out->tx_msgs = RLX(&s->tx.msgs);
	out->tx_bytes = RLX(&s->tx.bytes);
	out->rx_msgs = RLX(&s->rx.msgs);
	out->rx_bytes = RLX(&s->rx.bytes);
	out->tx_state = RLX(&s->tx.state);
	out->rx_state = RLX(&s->rx.state);
	out->tx_pid = RLX(&s->tx.pid);
	out->rx_pid = RLX(&s->rx.pid);
	out->tx_error = RLX(&s->tx.error);
	out->rx_error = RLX(&s->rx.error);
	out->tx_head = RLX(&s->tx.head);
	out->rx_head = RLX(&s->rx.head);
	out->rx_cts = RLX(&s->rx.cts);
	out->inflight_slots = out->tx_head - out->rx_head;
}

/* ---- endpoints ----------------------------------------------------------- */

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
	uint32_t corrupted; /* packets the model corrupts: bits flipped in the staged copy */
	uint32_t fault;	    /* the fault that dooms it, id + 1 */
	uint8_t corrupt_set; /* a degrade fault sets the hops' corruption: corrupt_p */
	uint32_t corrupt_p[MODEL_MAX_HOPS];
	int64_t delay_ns;   /* what faults added before that */
	uint64_t key_msg;   /* the model's message number, for the corruption draws */
	uint8_t direct;	    /* one-sided: the copy engine writes the receiver's buffer */
	uint64_t ticket;    /* direct: the copy engine's */
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
	/* Copies handed to the copy threads (sim/copyq.h): slots [head, sub_head) are filled
	 * or being filled and published in order once their copies are done. */
	uint64_t sub_head;
	int pool;
	struct copyq_job *jobs; /* per slot */
	struct tx_pend *pend;	/* per slot */
	const struct chan_dma *dma; /* one-sided copies (NULL: none) */
	void *dma_ctx;
	uint32_t direct_busy;	    /* direct copies started and not yet published */
	struct chan_flip *flips;    /* CHAN_MAX_FLIPS, allocated with the copy engine */
	char where[CHAN_WHERE_LEN]; /* the receiver's, read once */
	struct tx_send sends[CHAN_MAX_SENDS];
};

/* A slot whose copy is in flight: what to do once it is done. */
struct tx_pend {
	uint32_t send;	 /* index in sends[] */
	uint32_t len;
	uint64_t off;	 /* of the chunk in its message */
	uint8_t corrupt; /* flip the model's bits in it first */
};

struct rx_recv {
	uint8_t *data[CHAN_MAX_RECVS];
	uint64_t cap[CHAN_MAX_RECVS];
	uint64_t got[CHAN_MAX_RECVS];	 /* bytes landed so far, per buffer */
	uint8_t complete[CHAN_MAX_RECVS]; /* its last chunk is in */
	uint64_t sub[CHAN_MAX_RECVS];	 /* bytes handed to copies so far (>= got) */
	uint8_t sub_last[CHAN_MAX_RECVS]; /* its last chunk is being copied */
	uint8_t direct[CHAN_MAX_RECVS];	   /* the buffer has a region: filled one-sided only */
	uint8_t doomed;			   /* a message of it fails at ready_ns */
	uint32_t fail_link;
	uint32_t fail_fault;
	uint64_t fail_msg;
	int64_t ready_ns;		   /* modelled completion: the latest of its messages' */
	int64_t floor_ns;		   /* the soonest any model run could complete it (early) */
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
	struct fst_view *fab; /* NULL: the ideal fabric */
	uint32_t last_link;   /* the route's last hop: where lateness is recorded */
	struct chan_route route; /* copied from the region once and checked, at set_fabric */
	/* Copies handed to the copy threads: slots [tail, sub_tail) are being copied out and
	 * are counted (and freed for the sender) in order once done. */
	uint64_t sub_tail;
	int pool;
	struct copyq_job *jobs;	 /* per slot */
	struct chan_desc *pend; /* per slot: the checked descriptor */
	struct rx_recv recvs[CHAN_MAX_REQS];
};

/* The "never early" monitor, at the end of this file. */
#ifndef CHAN_INJECT_EARLY
#define CHAN_INJECT_EARLY 0 /* 1 in a test build only (build/inject/): receives may skip the gate */
#endif
#if CHAN_INJECT_EARLY
int chan_inject_early = 1; /* skip it (sim/test/test_early.c turns it off and on) */
#else
#define chan_inject_early 0
#endif
static uint32_t post_stamp(int64_t post_ns);
static void rx_note_floor(struct chan_rx *rx, struct rx_recv *r, const struct chan_desc *d);
static void rx_record_delivery(struct chan_rx *rx, const struct rx_recv *r, int64_t now);

/*
 * Attach one side. The peer can write the header, so the values used after the check are read
 * once into *g and *off and checked as read: a change after chan_check cannot slip past it.
 */
static int attach(struct chan_shm *shm, size_t len, struct chan_side *side, struct chan_geom *g,
		  uint64_t off[2])
{
	struct chan_err e;
	int rc = chan_check(shm, len, &e);
	if (rc)
		return rc;
	const volatile struct chan_shm *v = shm;
	*g = (struct chan_geom){.slot_bytes = v->slot_bytes, .nslots = v->nslots};
	off[0] = v->desc_off;
	off[1] = v->data_off;
	size_t need = chan_shm_bytes(g);
	if (need == 0 || len < need || off[0] != desc_off_for() || off[1] != data_off_for(g))
		return -EPROTO; /* changed since chan_check */
	uint32_t st = CHAN_ST_INIT;
	if (!atomic_compare_exchange_strong(&side->state, &st, CHAN_ST_OPEN))
		return -EPROTO; /* side already attached: the daemon hands each end out once */
	SET(&side->pid, (uint32_t)getpid());
	return 0;
}

int chan_tx_new(struct chan_shm *shm, size_t len, struct chan_tx **out)
{
	struct chan_tx *tx = calloc(1, sizeof(*tx));
	if (!tx)
		return -ENOMEM;
	struct chan_geom g;
	uint64_t off[2];
	int rc = attach(shm, len, &shm->tx, &g, off);
	if (rc) {
		free(tx);
		return rc;
	}
	tx->shm = shm;
	tx->desc = (struct chan_desc *)((uint8_t *)shm + off[0]);
	tx->slots = (uint8_t *)shm + off[1];
	tx->slot_bytes = g.slot_bytes;
	tx->mask = g.nslots - 1;
	if (copyq_enabled() && tx->slot_bytes >= COPYQ_MIN_BYTES) {
		tx->jobs = calloc(g.nslots, sizeof(*tx->jobs));
		tx->pend = calloc(g.nslots, sizeof(*tx->pend));
		tx->pool = tx->jobs && tx->pend; /* else copy inline: slower, never wrong */
	}
	*out = tx;
	return 0;
}

int chan_rx_new(struct chan_shm *shm, size_t len, struct chan_rx **out)
{
	struct chan_rx *rx = calloc(1, sizeof(*rx));
	if (!rx)
		return -ENOMEM;
	struct chan_geom g;
	uint64_t off[2];
	int rc = attach(shm, len, &shm->rx, &g, off);
	if (rc) {
		free(rx);
		return rc;
	}
	rx->shm = shm;
	rx->desc = (struct chan_desc *)((uint8_t *)shm + off[0]);
	rx->slots = (uint8_t *)shm + off[1];
	rx->slot_bytes = g.slot_bytes;
	rx->mask = g.nslots - 1;
	if (copyq_enabled() && rx->slot_bytes >= COPYQ_MIN_BYTES) {
		rx->jobs = calloc(g.nslots, sizeof(*rx->jobs));
		rx->pend = calloc(g.nslots, sizeof(*rx->pend));
		rx->pool = rx->jobs && rx->pend;
	}
	*out = rx;
	return 0;
}

/* The route as it is now, read once from the peer-writable region: check the copy, use it. */
static void route_copy(const struct chan_shm *shm, struct chan_route *r)
{
	const volatile uint8_t *src = (const volatile uint8_t *)&shm->route;
	uint8_t *dst = (uint8_t *)r;
	for (size_t i = 0; i < sizeof(*r); i++)
		dst[i] = src[i];
}

int chan_tx_set_fabric(struct chan_tx *tx, struct fst_view *fab)
{
	struct chan_route route, *r = &route;
	route_copy(tx->shm, r);
	if (r->npath > MODEL_MAX_HOPS)
		return -EINVAL;
	if (!fab || r->npath == 0) {
		tx->fab = NULL;
		return 0;
	}
	for (uint32_t j = 0; j < r->npath; j++)
		if (r->path[j] >= fab->nlinks)
			return -EINVAL;
	if (r->src_nic >= fab->nnics)
		return -EINVAL;
	memset(&tx->conn, 0, sizeof(tx->conn));
	tx->conn.id = tx->shm->chan_id;
	tx->conn.npath = (int)r->npath;
	memcpy(tx->conn.path, r->path, sizeof(r->path));
	tx->conn.nic = r->nic;
	tx->conn.src_nic = r->src_nic;
	tx->conn.src_node = r->src_node;
	tx->conn.dst_node = r->dst_node;
	tx->conn.switching = (enum model_switching)r->switching;
	tx->mpath = (struct model_path){.nhops = (int)r->npath, .switching = tx->conn.switching};
	for (uint32_t j = 0; j < r->npath; j++) {
		tx->mpath.link_id[j] = r->path[j];
		tx->mpath.hop[j] = &fab->links[r->path[j]];
	}
	tx->mtu = model_path_mtu(&tx->mpath);
	tx->fab = fab;
	return 0;
}

int chan_rx_set_fabric(struct chan_rx *rx, struct fst_view *fab)
{
	struct chan_route *r = &rx->route;
	route_copy(rx->shm, r);
	if (r->npath > MODEL_MAX_HOPS)
		return -EINVAL;
	if (!fab || r->npath == 0) {
		rx->fab = NULL;
		return 0;
	}
	if (r->path[r->npath - 1] >= fab->nlinks)
		return -EINVAL;
	rx->last_link = r->path[r->npath - 1];
	rx->fab = fab;
	return 0;
}

static void close_side(struct chan_side *side)
{
	uint32_t st = CHAN_ST_OPEN;
	/* A failed side stays failed: its error is what the peer should report. */
	atomic_compare_exchange_strong(&side->state, &st, CHAN_ST_CLOSED);
}

void chan_tx_free(struct chan_tx *tx)
{
	if (!tx)
		return;
	/* copies still in flight read the caller's buffers and write the region: let them end */
	for (uint64_t k = tx->head; tx->pool && k < tx->sub_head; k++)
		copyq_wait(&tx->jobs[k & tx->mask]);
	/* one-sided copies still in flight read the caller's buffers: let them end too */
	if (tx->dma && tx->direct_busy)
		tx->dma->drain(tx->dma_ctx);
	close_side(&tx->shm->tx);
	free(tx->flips);
	free(tx->jobs);
	free(tx->pend);
	free(tx);
}

void chan_rx_free(struct chan_rx *rx)
{
	if (!rx)
		return;
	for (uint64_t k = rx->tail; rx->pool && k < rx->sub_tail; k++)
		copyq_wait(&rx->jobs[k & rx->mask]);
	close_side(&rx->shm->rx);
	free(rx->jobs);
	free(rx->pend);
	free(rx);
}

static void copy_in(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

/* Make a side's failure sticky and visible to the peer. */
static int side_fail(struct chan_side *side, int *failed, struct chan_err *ferr,
		     struct chan_err *err, int code, const char *what, uint64_t v0, uint64_t v1)
{
	fail(ferr, code, what, v0, v1);
	*failed = code;
	SET(&side->detail[0], v0);
	SET(&side->detail[1], v1);
	SET(&side->error, -code);
	REL(&side->state, CHAN_ST_FAILED);
	if (err)
		*err = *ferr;
	return code;
}

/* What the peer's side, the daemon's flags and our own history say about the channel. */
/*
 * head/tail: for a receiver, the sender's published count and what we consumed:
 * a peer that closed or died is only an error once everything it published is
 * in (data sent before a close or a crash is still delivered). NULL for a sender.
 * The state is read before the head, so a close seen implies its last chunks are seen.
 */
static int peer_error(struct chan_shm *shm, struct chan_side *peer, _Atomic uint32_t *dead,
		      _Atomic uint64_t *head, uint64_t tail, struct chan_err *err)
{
	if (ACQ(&shm->daemon_gone))
		return fail(err, -ESHUTDOWN, "the fabric daemon shut down", 0, 0);
	uint32_t rf = ACQ(&shm->reset_fault);
	if (rf) {
		int rc = fail(err, -ETIMEDOUT, "the connection was reset on link",
			      shm->route.npath ? shm->route.path[0] : 0, UINT64_MAX);
		if (err)
			err->fault = rf;
		return rc;
	}
	uint32_t st = ACQ(&peer->state);
	int peer_dead = (int)ACQ(dead);
	int drained = !head || ACQ(head) == tail;
	if (st == CHAN_ST_FAILED) {
		/* A size mismatch is both ends' usage error; anything else is the peer's failure. */
		int code = (int)RLX(&peer->error);
		if (code == EMSGSIZE)
			return fail(err, -EMSGSIZE, "send larger than the posted receive",
				    RLX(&peer->detail[0]), RLX(&peer->detail[1]));
		if (code == ETIMEDOUT) { /* the model failed its message: the same failure here */
			int rc = fail(err, -ETIMEDOUT, "retry count exhausted on link",
				      RLX(&peer->detail[0]), UINT64_MAX);
			if (err)
				err->fault = RLX(&peer->fault);
			return rc;
		}
		return fail(err, -ECONNRESET, "the peer's end failed (value: its errno)",
			    (uint64_t)code, 0);
	}
	if (peer_dead && drained)
		return fail(err, -ECONNRESET, "the peer process died", 0, 0);
	if (st == CHAN_ST_CLOSED && drained)
		return fail(err, -ECONNRESET, "the peer closed the connection", 0, 0);
	return 0;
}

/*
 * Silent corruption, the one model that lets wrong data through (on purpose):
 * for each packet the model corrupts whose flipped byte lies in [off,
 * off + len), the byte (in the message) and the bit. The sender's own buffer
 * is never touched: the bits are flipped in the staged copy, or in the
 * receiver's buffer after a one-sided copy. The packets are the model's own
 * sequence, walked from packet 0 (as fst_reserve counts them) and resumed
 * chunk after chunk, so the flips do not depend on the staging geometry.
 */
static void corrupt_each(struct chan_tx *tx, struct tx_send *s, uint64_t off, uint64_t len,
			 void (*fn)(void *arg, uint64_t at, uint8_t mask), void *arg)
{
	if (!tx->mtu)
		return;
	uint64_t npk = s->size ? (s->size + tx->mtu - 1) / tx->mtu : 1;
	struct model_key key = {.seed = tx->fab->shm->seed, .conn = tx->conn.id, .msg = s->key_msg};
	/* A corrupt fault's burst: the probabilities the model used for this message. */
	struct model_path pp = tx->mpath;
	struct model_link tmp[MODEL_MAX_HOPS];
	if (s->corrupt_set)
		for (int j = 0; j < pp.nhops; j++) {
			tmp[j] = *pp.hop[j];
			tmp[j].corrupt_p = s->corrupt_p[j];
			pp.hop[j] = &tmp[j];
		}
	uint64_t k = off == 0 ? model_corrupt_next(&pp, &key, 0, npk) : s->corrupt_k;
	for (; k < npk && k * tx->mtu < off + len; k = model_corrupt_next(&pp, &key, k + 1, npk)) {
		uint64_t pstart = k * tx->mtu, plen = s->size - pstart < tx->mtu ? s->size - pstart
										 : tx->mtu;
		struct model_key bk = key;
		bk.packet = k;
		uint64_t bit = model_corrupt_bit(&bk, plen);
		uint64_t at = pstart + bit / 8; /* the byte, in the message */
		if (bit != UINT64_MAX && at >= off + len)
			break; /* its byte is in the next chunk: resume there */
		if (bit != UINT64_MAX && at >= off)
			fn(arg, at, (uint8_t)(1u << (bit % 8)));
	}
	s->corrupt_k = k;
}

struct flip_slot {
	uint8_t *slot;
	uint64_t off;
};

static void flip_in_slot(void *arg, uint64_t at, uint8_t mask)
{
	struct flip_slot *f = arg;
	f->slot[at - f->off] ^= mask;
}

static void corrupt_chunk(struct chan_tx *tx, struct tx_send *s, uint8_t *slot,
			  uint64_t off, uint32_t len)
{
	struct flip_slot f = {.slot = slot, .off = off};
	corrupt_each(tx, s, off, len, flip_in_slot, &f);
}

struct flip_list {
	struct chan_flip *v;
	uint32_t n;
};

static void flip_add(void *arg, uint64_t at, uint8_t mask)
{
	struct flip_list *l = arg;
	if (l->n < CHAN_MAX_FLIPS)
		l->v[l->n++] = (struct chan_flip){.off = at, .mask = mask};
}

/* Publish, in slot order, the slots whose copies are done. */
static void tx_retire(struct chan_tx *tx)
{
	while (tx->head < tx->sub_head) {
		uint32_t i = (uint32_t)(tx->head & tx->mask);
		if (!copyq_done(&tx->jobs[i]))
			return;
		const struct tx_pend *p = &tx->pend[i];
		if (p->corrupt)
			corrupt_chunk(tx, &tx->sends[p->send], tx->slots + (size_t)i * tx->slot_bytes,
				      p->off, p->len);
		atomic_store_explicit(&tx->jobs[i].state, 0, memory_order_relaxed);
		REL(&tx->shm->tx.head, ++tx->head);
	}
}

/*
 * A one-sided send whose copy is done takes one slot for its descriptor
 * (no data). 0 published (in its turn, behind staged copies still running),
 * 1 not yet: its copy is still running or failed (the channel failed then).
 */
static int tx_publish_direct(struct chan_tx *tx, struct tx_send *s)
{
	int p = tx->dma->poll(tx->dma_ctx, s->ticket);
	if (p < 0) {
		side_fail(&tx->shm->tx, &tx->failed, &tx->ferr, NULL, -EIO,
			  "the GPU copy engine failed a one-sided copy (values: message, errno)",
			  s->msg, (uint64_t)-p);
		return 1;
	}
	if (p == 0)
		return 1;
	uint32_t i = (uint32_t)(tx->sub_head & tx->mask);
	struct chan_desc *d = &tx->desc[i];
	*d = (struct chan_desc){.msg = s->msg, .recv = s->recv, .offset = 0, .total = s->size,
				.ready_ns = s->ready_ns, .len = 0, .buf = s->buf,
				.flags = CHAN_F_LAST | CHAN_F_DIRECT, .tag = s->tag,
				.post_us = tx->fab ? post_stamp(s->post_ns) : 0};
	if (s->doomed) {
		d->flags |= CHAN_F_FAIL;
		d->reserved = s->fail_link;
		d->fault = s->fault;
	}
	s->pushed = s->size;
	s->started = 1;
	s->slot = tx->sub_head;
	tx->direct_busy--;
	tx->bytes += s->size;
	if (tx->pool && tx->sub_head != tx->head) {
		/* staged copies ahead of it are still running: published in its turn */
		tx->pend[i] = (struct tx_pend){.send = (uint32_t)(s->msg % CHAN_MAX_SENDS)};
		atomic_store_explicit(&tx->jobs[i].state, 2, memory_order_relaxed);
		tx->sub_head++;
		return 0;
	}
	tx->sub_head++;
	REL(&tx->shm->tx.head, ++tx->head);
	return 0;
}

/* Copy as much of the pending sends into staging as the ring has room for. */
static void tx_push(struct chan_tx *tx)
{
	if (tx->sub_head != tx->head)
		tx_retire(tx);
	while (tx->push_msg < tx->next_msg) {
		struct tx_send *s = &tx->sends[tx->push_msg % CHAN_MAX_SENDS];
		while (!s->started || s->pushed < s->size) {
			if (tx->sub_head - tx->tail_seen > tx->mask) {
				uint64_t t = ACQ(&tx->shm->rx.head);
				if (t > tx->head || t < tx->tail_seen) {
					side_fail(&tx->shm->tx, &tx->failed, &tx->ferr, NULL, -EPROTO,
						  "receiver consumed slots that were never sent", t,
						  tx->head);
					return;
				}
				tx->tail_seen = t;
				if (tx->sub_head - tx->tail_seen > tx->mask)
					goto out;
			}
			if (s->direct) {
				if (tx_publish_direct(tx, s))
					goto out; /* its copy is still running, or failed */
				continue;
			}
			uint64_t left = s->size - s->pushed;
			uint32_t len = left < tx->slot_bytes ? (uint32_t)left : tx->slot_bytes;
			uint32_t i = (uint32_t)(tx->sub_head & tx->mask);
			struct chan_desc *d = &tx->desc[i];
			d->msg = s->msg;
			d->recv = s->recv;
			d->offset = s->pushed;
			d->total = s->size;
			d->len = len;
			d->buf = s->buf;
			d->tag = s->tag;
			s->pushed += len;
			s->started = 1;
			d->flags = s->pushed == s->size ? CHAN_F_LAST : 0;
			/* The model gates completion, not copying: only the last chunk carries it. */
			d->ready_ns = d->flags ? s->ready_ns : 0;
			d->reserved = 0;
			d->fault = 0;
			d->post_us = d->flags && tx->fab ? post_stamp(s->post_ns) : 0;
			if (d->flags && s->doomed) {
				d->flags |= CHAN_F_FAIL;
				d->reserved = s->fail_link; /* for the receiver's message */
				d->fault = s->fault;
			}
			uint8_t *slot = tx->slots + (size_t)i * tx->slot_bytes;
			tx->bytes += len;
			if (tx->pool && (len >= COPYQ_MIN_BYTES || tx->sub_head != tx->head)) {
				/* A big chunk goes to a copy thread; a small one behind it is copied
				 * now but published in its turn. */
				struct copyq_job *j = &tx->jobs[i];
				tx->pend[i] = (struct tx_pend){
					.send = (uint32_t)(tx->push_msg % CHAN_MAX_SENDS),
					.len = len, .off = d->offset, .corrupt = s->corrupted && len};
				*j = (struct copyq_job){.dst = slot, .src = s->data + d->offset,
							.len = len, .fn = copy_in};
				if (len < COPYQ_MIN_BYTES || copyq_submit(j) != 0) {
					if (len)
						memcpy(slot, s->data + d->offset, len);
					atomic_store_explicit(&j->state, 2, memory_order_relaxed);
				}
				tx->sub_head++;
				continue;
			}
			if (len)
				memcpy(slot, s->data + d->offset, len);
			if (s->corrupted && len)
				corrupt_chunk(tx, s, slot, d->offset, len);
			/* Publish chunk by chunk so the receiver copies out while we copy in. */
			tx->sub_head++;
			REL(&tx->shm->tx.head, ++tx->head);
		}
		tx->push_msg++;
	}
out:
	if (tx->sub_head != tx->head)
		tx_retire(tx);
	SET(&tx->shm->tx.bytes, tx->bytes);
}

int chan_tx_progress(struct chan_tx *tx, struct chan_err *err)
{
	if (tx->failed) {
		if (err)
			*err = tx->ferr;
		return tx->failed;
	}
	tx_push(tx);
	if (tx->failed && err)
		*err = tx->ferr;
	return tx->failed;
}

int chan_tx_post(struct chan_tx *tx, const void *data, uint64_t size, int32_t tag, chan_req *req,
		 struct chan_err *err)
{
	return chan_tx_post_src(tx, data, size, tag, CHAN_MEM_HOST, req, err);
}

int chan_tx_set_dma(struct chan_tx *tx, const struct chan_dma *dma, void *ctx)
{
	if (!tx || !dma || !dma->start || !dma->poll || !dma->drain)
		return -EINVAL;
	if (!tx->flips) {
		tx->flips = calloc(CHAN_MAX_FLIPS, sizeof(*tx->flips));
		if (!tx->flips)
			return -ENOMEM;
	}
	tx->dma = dma;
	tx->dma_ctx = ctx;
	return 0;
}

int chan_rx_set_where(struct chan_rx *rx, const char *where)
{
	size_t n = where ? strlen(where) : 0;
	if (!rx || n == 0 || n >= CHAN_WHERE_LEN)
		return -EINVAL;
	memcpy(rx->shm->rx_where, where, n + 1);
	return 0;
}

/* Start a one-sided copy of a just-reserved send (the model's corruption included). */
static int tx_start_direct(struct chan_tx *tx, struct tx_send *s, uint64_t region, uint64_t roff,
			   struct chan_err *err)
{
	if (!tx->where[0]) {
		memcpy(tx->where, (const void *)tx->shm->rx_where, CHAN_WHERE_LEN);
		tx->where[CHAN_WHERE_LEN - 1] = 0;
	}
	struct flip_list fl = {.v = tx->flips, .n = 0};
	if (s->corrupted && tx->fab)
		corrupt_each(tx, s, 0, s->size, flip_add, &fl);
	int rc = tx->dma->start(tx->dma_ctx, tx->where, region, roff, s->data, s->size, fl.v, fl.n,
				&s->ticket);
	if (rc)
		return side_fail(&tx->shm->tx, &tx->failed, &tx->ferr, err, -EIO,
				 "the GPU copy engine refused a one-sided copy (values: region, "
				 "errno)",
				 region, (uint64_t)-rc);
	s->direct = 1;
	tx->direct_busy++;
	return 0;
}

int chan_tx_post_src(struct chan_tx *tx, const void *data, uint64_t size, int32_t tag,
		     enum chan_mem src_mem, chan_req *req, struct chan_err *err)
{
	struct chan_shm *shm = tx->shm;
	if (tx->failed) {
		if (err)
			*err = tx->ferr;
		return tx->failed;
	}
	if (!req || (size && !data))
		return fail(err, -EINVAL, "send without a buffer", size, 0);
	int rc = peer_error(shm, &shm->rx, &shm->rx_dead, NULL, 0, err);
	if (rc)
		return rc;
	struct tx_send *s = &tx->sends[tx->next_msg % CHAN_MAX_SENDS];
	if (s->in_use)
		return fail(err, -EAGAIN, "too many sends in flight", CHAN_MAX_SENDS, 0);
	if (tx->cur_recv >= tx->cts_seen) {
		tx->cts_seen = ACQ(&shm->rx.cts);
		if (tx->cur_recv >= tx->cts_seen)
			return fail(err, -EAGAIN, "no receive posted yet", 0, 0);
	}
	/* A local copy: the receiver owns the entry and could rewrite it under us. */
	struct chan_cts c;
	memcpy(&c, (const void *)&shm->cts[tx->cur_recv % CHAN_MAX_REQS], sizeof(c));
	atomic_signal_fence(memory_order_seq_cst);
	uint32_t n = c.n;
	if (n < 1 || n > CHAN_MAX_RECVS || c.seq != tx->cur_recv)
		return side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -EPROTO,
				 "corrupt receive post", c.seq, n);
	/*
	 * Tags choose a buffer inside the head receive only (NCCL's rule), and they
	 * always matter, n == 1 included: with maxRecvs > 1 NCCL shares one comm
	 * between several peers, each posting its own receives with its own tag.
	 */
	uint32_t b;
	for (b = 0; b < n; b++)
		if (!tx->filled[b] && c.tags[b] == tag)
			break;
	if (b == n)
		return fail(err, -EAGAIN, "no buffer with this tag in the head receive",
			    (uint64_t)(uint32_t)tag, n);
	if (size > c.sizes[b])
		return side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -EMSGSIZE,
				 "send larger than the posted receive", size, c.sizes[b]);
	uint64_t region = c.region[b];
	if (region && !tx->dma)
		return side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -EPROTO,
				 "the receiver posted GPU memory but this sender has no GPU data "
				 "path (SIMFABRIC_GPU differs between ranks?)",
				 region, c.roff[b]);
	if (!region && src_mem == CHAN_MEM_DEVICE)
		return side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -EPROTO,
				 "a send from GPU memory into a receive in host memory (the "
				 "receiver has no GPU data path: SIMFABRIC_GPU differs between "
				 "ranks?)",
				 size, 0);
	tx->filled[b] = 1;
	if (++tx->nfilled == n) {
		tx->cur_recv++;
		tx->nfilled = 0;
		memset(tx->filled, 0, sizeof(tx->filled));
	}
	*s = (struct tx_send){.data = data, .size = size, .msg = tx->next_msg,
			      .recv = c.seq, .buf = (uint16_t)b, .in_use = 1, .tag = tag};
	if (tx->fab) {
		struct model_msg m;
		struct fst_hit hit;
		s->post_ns = now_ns();
		int rc2 = fst_reserve(tx->fab, &tx->conn, s->post_ns, size, &m, &hit);
		if (rc2) {
			s->in_use = 0;
			return side_fail(&shm->tx, &tx->failed, &tx->ferr, err, rc2 == -EDEADLK ? -EDEADLK : -EINVAL,
					 "the fabric model could not reserve the route", (uint64_t)-rc2, 0);
		}
		/* 0 stays "no gate" for the receiver: a real time is never 0. */
		s->ready_ns = m.recv_done_ns > 0 ? m.recv_done_ns : 1;
		s->done_ns = m.send_done_ns;
		s->doomed = (uint8_t)(m.failed != 0);
		s->timeouts = m.timeouts;
		s->corrupted = m.corrupted;
		s->key_msg = tx->conn.msgs - 1; /* fst_reserve used this number, then counted it */
		s->fail_link = m.failed && m.fail_hop >= 0 && m.fail_hop < tx->conn.npath
				       ? tx->conn.path[m.fail_hop] : 0;
		if (hit.corrupt_set && s->corrupted) {
			s->corrupt_set = 1;
			memcpy(s->corrupt_p, hit.corrupt_p, sizeof(s->corrupt_p));
		}
		if (s->doomed && hit.fault >= 0) {
			s->fault = (uint32_t)hit.fault + 1;
			s->fail_link = hit.link;
			s->delay_ns = hit.delay_ns;
		}
		if (s->doomed)
			s->done_ns = s->ready_ns;
	}
	if (region && tx_start_direct(tx, s, region, c.roff[b], err)) {
		s->in_use = 0;
		return tx->failed;
	}
	*req = (chan_req)(tx->next_msg % CHAN_MAX_SENDS);
	tx->next_msg++;
	tx->inflight++;
	SET(&shm->tx.msgs, tx->next_msg);
	tx_push(tx);
	return 0;
}

/* A one-sided send's descriptor is out: its data are in the receiver's buffer. */
static inline int tx_published(const struct chan_tx *tx, const struct tx_send *s)
{
	return s->direct && s->started && tx->head > s->slot;
}

/*
 * After the channel failed: was this send acknowledged before (the receiver counted it, or its
 * one-sided copy was published), and not itself doomed? Then it completes as it would have.
 */
static int tx_delivered(struct chan_tx *tx, const struct tx_send *s)
{
	if (s->doomed)
		return 0;
	uint64_t a = ACQ(&tx->shm->rx.msgs);
	return (a > s->msg && a <= tx->next_msg) || tx_published(tx, s);
}

/*
 * node_freeze of the receiver: a send whose every chunk is published into a receive the
 * receiver had posted is as good as delivered (a NIC would write and ACK it; the receiving
 * process sees it when it runs again). A send without a posted receive waits, as on a NIC.
 */
static int tx_staged_frozen(const struct chan_tx *tx, const struct tx_send *s, uint32_t hold)
{
	return (hold & CHAN_HOLD_RX_FROZEN) && s->started && tx->push_msg > s->msg &&
	       tx->sub_head == tx->head;
}

int chan_tx_test(struct chan_tx *tx, chan_req req, int *done, uint64_t *size,
		 struct chan_err *err)
{
	struct chan_shm *shm = tx->shm;
	*done = 0;
	if (req < 0 || req >= CHAN_MAX_SENDS || !tx->sends[req].in_use)
		return fail(err, -EINVAL, "unknown send request", (uint64_t)req, 0);
	struct tx_send *s = &tx->sends[req];
	uint32_t hold = RLX(&shm->hold);
	if (hold & CHAN_HOLD_HANG)
		return 0; /* comm_hang: no progress, no completion, no error */
	int rc = chan_tx_progress(tx, err);
	if (rc && !tx_delivered(tx, s))
		goto failed;
	if (rc) /* RC completes in order: what was acknowledged before the failure stays done */
		goto delivered;
	if (tx->acked <= s->msg) {
		uint64_t a = ACQ(&shm->rx.msgs);
		if (a > tx->next_msg || a < tx->acked) {
			rc = side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -EPROTO,
				       "receiver acknowledged messages that were never sent", a,
				       tx->next_msg);
			goto failed;
		}
		tx->acked = a;
	}
	if (s->doomed) {
		if (now_ns() < s->done_ns)
			goto pending;
		/* Like RC after retry_count expirations: this request and the connection fail. */
		SET(&shm->tx.fault, s->fault); /* before the state: the peer reads it after */
		rc = side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -ETIMEDOUT,
			       "retry count exhausted on link", s->fail_link, s->timeouts);
		tx->ferr.msg = s->msg;
		tx->ferr.fault = s->fault;
		tx->ferr.delay_ns = s->delay_ns;
		if (err)
			*err = tx->ferr;
		goto failed;
	}
	if (tx->acked > s->msg || tx_published(tx, s) || (hold && tx_staged_frozen(tx, s, hold))) {
	delivered:
		if (s->done_ns && now_ns() < s->done_ns)
			return 0; /* delivered, but the model's ACK is still on its way */
		*done = 1;
		if (size)
			*size = s->size;
		s->in_use = 0;
		tx->inflight--;
		return 0;
	}
pending:
	rc = peer_error(shm, &shm->rx, &shm->rx_dead, NULL, 0, err);
	if (!rc)
		return 0;
failed:
	s->in_use = 0;
	tx->inflight--;
	return rc;
}

int chan_rx_post(struct chan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		 const int32_t *tags, chan_req *req, struct chan_err *err)
{
	return chan_rx_post_in(rx, n, data, sizes, tags, NULL, req, err);
}

int chan_rx_post_in(struct chan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		    const int32_t *tags, const struct chan_region *regions, chan_req *req,
		    struct chan_err *err)
{
	struct chan_shm *shm = rx->shm;
	if (rx->failed) {
		if (err)
			*err = rx->ferr;
		return rx->failed;
	}
	if (n < 1 || n > CHAN_MAX_RECVS || !req || !sizes || !data)
		return fail(err, -EINVAL, "bad receive count", (uint64_t)n, CHAN_MAX_RECVS);
	for (int i = 0; i < n; i++)
		if (sizes[i] && !data[i])
			return fail(err, -EINVAL, "receive without a buffer", (uint64_t)i,
				    sizes[i]);
	struct rx_recv *r = &rx->recvs[rx->posted % CHAN_MAX_REQS];
	if (r->in_use)
		return fail(err, -EAGAIN, "too many receives in flight", CHAN_MAX_REQS, 0);
	/* Don't post into a dead channel: a peer that failed or went away won't send. */
	int rc = peer_error(shm, &shm->tx, &shm->tx_dead, &shm->tx.head, rx->tail, err);
	if (rc)
		return rc;
	memset(r, 0, sizeof(*r));
	r->n = (uint32_t)n;
	r->seq = rx->posted;
	r->in_use = 1;
	struct chan_cts *c = &shm->cts[rx->posted % CHAN_MAX_REQS];
	c->seq = rx->posted;
	c->n = (uint32_t)n;
	for (int i = 0; i < n; i++) {
		r->data[i] = data[i];
		r->cap[i] = sizes[i];
		c->sizes[i] = sizes[i];
		c->tags[i] = tags ? tags[i] : 0;
		c->region[i] = regions ? regions[i].id : 0;
		c->roff[i] = regions ? regions[i].off : 0;
		r->direct[i] = c->region[i] != 0;
	}
	*req = (chan_req)(rx->posted % CHAN_MAX_REQS);
	rx->posted++;
	rx->inflight++;
	REL(&shm->rx.cts, rx->posted);
	return 0;
}

/* Count a copied slot (in slot order) and free it for the sender. */
static void rx_account(struct chan_rx *rx, const struct chan_desc *d)
{
	struct chan_shm *shm = rx->shm;
	struct rx_recv *r = &rx->recvs[d->recv % CHAN_MAX_REQS];
	uint64_t len = d->flags & CHAN_F_DIRECT ? d->total : d->len;
	rx->bytes += len;
	r->got[d->buf] += len;
	if (d->flags & CHAN_F_LAST) {
		r->complete[d->buf] = 1;
		r->nfilled++;
		rx->msgs++;
		if (d->ready_ns > r->ready_ns)
			r->ready_ns = d->ready_ns;
		rx_note_floor(rx, r, d);
		if (d->flags & CHAN_F_FAIL) {
			r->doomed = 1;
			r->fail_link = d->reserved;
			r->fail_fault = d->fault;
			r->fail_msg = d->msg;
		}
	}
	rx->tail++;
	/* Free the slot (and ACK whole messages) at once: the sender is waiting for room. */
	REL(&shm->rx.head, rx->tail);
	if (d->flags & CHAN_F_LAST)
		REL(&shm->rx.msgs, rx->msgs);
}

/* Count, in slot order, the slots whose copies are done. */
static int rx_retire(struct chan_rx *rx)
{
	int moved = 0;
	while (rx->tail < rx->sub_tail) {
		uint32_t i = (uint32_t)(rx->tail & rx->mask);
		if (!copyq_done(&rx->jobs[i]))
			break;
		atomic_store_explicit(&rx->jobs[i].state, 0, memory_order_relaxed);
		rx_account(rx, &rx->pend[i]);
		moved = 1;
	}
	return moved;
}

/*
 * A one-sided message's descriptor: the sender's copy engine already wrote the
 * whole message into the buffer; check it fills exactly that buffer, then
 * count it in its turn. 1 counted now, 0 queued behind copies, < 0 failed.
 */
static int rx_direct(struct chan_rx *rx, struct rx_recv *r, const struct chan_desc *d,
		     uint32_t i, struct chan_err *err)
{
	if (!r->in_use || r->seq != d->recv || d->buf >= r->n || !r->direct[d->buf] ||
	    d->len != 0 || d->offset != 0 || r->sub[d->buf] != 0 || r->sub_last[d->buf] ||
	    d->total > r->cap[d->buf] || !(d->flags & CHAN_F_LAST))
		return side_fail(&rx->shm->rx, &rx->failed, &rx->ferr, err, -EPROTO,
				 "one-sided descriptor does not match a posted GPU receive",
				 d->recv, d->msg);
	r->sub[d->buf] = d->total;
	r->sub_last[d->buf] = 1;
	if (rx->pool && rx->sub_tail != rx->tail) {
		rx->pend[i] = *d;
		atomic_store_explicit(&rx->jobs[i].state, 2, memory_order_relaxed);
		rx->sub_tail++;
		return 0;
	}
	rx->sub_tail++;
	rx_account(rx, d);
	return 1;
}

int chan_rx_progress(struct chan_rx *rx, struct chan_err *err)
{
	struct chan_shm *shm = rx->shm;
	if (rx->failed) {
		if (err)
			*err = rx->ferr;
		return rx->failed;
	}
	int moved = rx->sub_tail != rx->tail ? rx_retire(rx) : 0;
	for (;;) {
		if (rx->sub_tail == rx->head_seen) {
			rx->head_seen = ACQ(&shm->tx.head);
			if (rx->sub_tail == rx->head_seen)
				break;
		}
		if (rx->head_seen - rx->tail > (uint64_t)rx->mask + 1)
			return side_fail(&shm->rx, &rx->failed, &rx->ferr, err, -EPROTO,
					 "sender published more slots than exist",
					 rx->head_seen - rx->tail, rx->mask + 1);
		uint32_t i = (uint32_t)(rx->sub_tail & rx->mask);
		/* A local copy: the peer could rewrite the shared one between check and use. */
		struct chan_desc dcopy;
		memcpy(&dcopy, (const void *)&rx->desc[i], sizeof(dcopy));
		atomic_signal_fence(memory_order_seq_cst);
		const struct chan_desc *d = &dcopy;
		struct rx_recv *r = &rx->recvs[d->recv % CHAN_MAX_REQS];
		if (d->flags & CHAN_F_DIRECT) {
			int rc = rx_direct(rx, r, &dcopy, i, err);
			if (rc < 0)
				return rc;
			moved |= rc;
			continue;
		}
		/* Chunks of a buffer arrive in order, exactly once, and end exactly at its size
		 * (checked against what was handed to copies: they may still be running). */
		if (!r->in_use || r->seq != d->recv || d->buf >= r->n || d->len > rx->slot_bytes ||
		    d->total > r->cap[d->buf] || r->sub_last[d->buf] ||
		    d->offset != r->sub[d->buf] || d->len > d->total - d->offset ||
		    ((d->flags & CHAN_F_LAST) != 0) != (d->offset + d->len == d->total))
			return side_fail(&shm->rx, &rx->failed, &rx->ferr, err, -EPROTO,
					 "descriptor does not match a posted receive", d->recv,
					 d->msg);
		if (r->direct[d->buf])
			return side_fail(&shm->rx, &rx->failed, &rx->ferr, err, -EPROTO,
					 "a staged chunk for a receive buffer in GPU memory (the "
					 "sender has no GPU data path: SIMFABRIC_GPU differs between "
					 "ranks?)",
					 d->recv, d->msg);
		r->sub[d->buf] += d->len;
		if (d->flags & CHAN_F_LAST)
			r->sub_last[d->buf] = 1;
		uint8_t *dst = r->data[d->buf] + d->offset;
		const uint8_t *src = rx->slots + (size_t)i * rx->slot_bytes;
		if (rx->pool && (d->len >= COPYQ_MIN_BYTES || rx->sub_tail != rx->tail)) {
			/* A big chunk goes to a copy thread; a small one behind it is copied now
			 * but counted in its turn. */
			struct copyq_job *j = &rx->jobs[i];
			rx->pend[i] = dcopy;
			*j = (struct copyq_job){.dst = dst, .src = src, .len = d->len, .fn = copy_out};
			if (d->len < COPYQ_MIN_BYTES || copyq_submit(j) != 0) {
				if (d->len)
					copy_out(dst, src, d->len);
				atomic_store_explicit(&j->state, 2, memory_order_relaxed);
			}
			rx->sub_tail++;
			continue;
		}
		if (d->len)
			copy_out(dst, src, d->len);
		rx->sub_tail++;
		rx_account(rx, d);
		moved = 1;
	}
	if (rx->sub_tail != rx->tail)
		moved |= rx_retire(rx);
	if (moved)
		SET(&shm->rx.bytes, rx->bytes);
	return 0;
}

int chan_rx_test(struct chan_rx *rx, chan_req req, int *done, uint64_t *sizes,
		 struct chan_err *err)
{
	struct chan_shm *shm = rx->shm;
	*done = 0;
	if (req < 0 || req >= CHAN_MAX_REQS || !rx->recvs[req].in_use)
		return fail(err, -EINVAL, "unknown receive request", (uint64_t)req, 0);
	struct rx_recv *r = &rx->recvs[req];
	if (RLX(&shm->hold) & CHAN_HOLD_HANG)
		return 0; /* comm_hang: no progress, no completion, no error */
	int rc = chan_rx_progress(rx, err);
	/* RC completes in order: a receive whose every byte arrived before the failure completes */
	if (rc && !(r->nfilled == r->n && !r->doomed))
		goto failed;
	if (r->nfilled == r->n && r->ready_ns) {
		int64_t now = now_ns();
		if (now < r->ready_ns && !chan_inject_early)
			return 0; /* the bytes are here; the model's delivery time is not yet */
		if (r->doomed) {
			SET(&shm->rx.fault, r->fail_fault);
			rc = side_fail(&shm->rx, &rx->failed, &rx->ferr, err, -ETIMEDOUT,
				       "retry count exhausted on link", r->fail_link, UINT64_MAX);
			rx->ferr.msg = r->fail_msg;
			rx->ferr.fault = r->fail_fault;
			if (err)
				*err = rx->ferr;
			goto failed;
		}
		rx_record_delivery(rx, r, now);
	}
	if (r->nfilled == r->n) {
		*done = 1;
		if (sizes)
			for (uint32_t b = 0; b < r->n; b++)
				sizes[b] = r->got[b];
		r->in_use = 0;
		rx->inflight--;
		return 0;
	}
	rc = peer_error(shm, &shm->tx, &shm->tx_dead, &shm->tx.head, rx->tail, err);
	if (!rc)
		return 0;
	if (rc == -EMSGSIZE || rc == -EPROTO)
		side_fail(&shm->rx, &rx->failed, &rx->ferr, NULL, rc, err ? err->what : "",
			  err ? err->value[0] : 0, err ? err->value[1] : 0);
failed:
	r->in_use = 0;
	rx->inflight--;
	return rc;
}

int chan_tx_inflight(const struct chan_tx *tx)
{
	return tx ? tx->inflight : 0;
}

int chan_rx_inflight(const struct chan_rx *rx)
{
	return rx ? rx->inflight : 0;
}

/* ---- trace accessors (plugin/trace.c; see chan.h) -------------------------------------------
 * A self-contained block: reads the request tables and the peer's ACK count, changes nothing.
 */
int chan_tx_times(const struct chan_tx *tx, chan_req req, struct chan_times *out)
{
	if (!tx || !out || req < 0 || req >= CHAN_MAX_SENDS)
		return -EINVAL;
	const struct tx_send *s = &tx->sends[req];
	memset(out, 0, sizeof(*out));
	out->ready_ns = s->ready_ns;
	out->done_ns = s->done_ns;
	out->msg = s->msg;
	out->recv = s->recv;
	out->bytes = s->size;
	out->buf = s->buf;
	out->fault = s->fault;
	out->started = s->started;
	out->arrived = ACQ(&tx->shm->rx.msgs) > s->msg;
	out->doomed = s->doomed;
	out->in_use = s->in_use;
	return 0;
}

int chan_rx_times(const struct chan_rx *rx, chan_req req, struct chan_times *out)
{
	if (!rx || !out || req < 0 || req >= CHAN_MAX_REQS)
		return -EINVAL;
	const struct rx_recv *r = &rx->recvs[req];
	memset(out, 0, sizeof(*out));
	uint64_t got = 0;
	for (uint32_t b = 0; b < r->n && b < CHAN_MAX_RECVS; b++)
		got += r->got[b];
	out->ready_ns = r->ready_ns;
	out->msg = out->recv = r->seq;
	out->bytes = got;
	out->fault = r->fail_fault;
	out->started = got > 0 || r->nfilled > 0;
	out->arrived = r->n > 0 && r->nfilled == r->n;
	out->doomed = r->doomed;
	out->in_use = r->in_use;
	return 0;
}
/* ---- end of trace accessors ---------------------------------------------------------------- */

/* ---- the "never early" monitor ----------------------------------------------------------------
 * The gate above holds a receive until r->ready_ns, so checking a completion against ready_ns
 * right after it proves nothing. This checks it against a clock the gate does not use: the
 * sender's stamp of when it posted each message (post_us) plus the least time the model can give
 * a message of its size on this route (fst_floor_ns: an idle path, no jitter, impairment or fault
 * delay). A gate that lets a receive through early, or a model run that puts ready_ns before what
 * the route allows, counts in the links' `early`. A test build with CHAN_INJECT_EARLY set
 * (build/inject/) skips the gate on purpose, to show the counter counts.
 */

/* The post time in microseconds, low 32 bits (wraps every 71 minutes; 0: not stamped). */
static uint32_t post_stamp(int64_t post_ns)
{
	return (uint32_t)((uint64_t)post_ns / 1000);
}

/* A message's last chunk is in: the soonest its receive may complete goes up to its floor. */
static void rx_note_floor(struct chan_rx *rx, struct rx_recv *r, const struct chan_desc *d)
{
	const struct chan_route *rt = &rx->route; /* checked at set_fabric */
	if (!rx->fab || !d->post_us || (d->flags & CHAN_F_FAIL))
		return;
	/* The stamp's full time: the latest before now with these low bits, rounded down to the
	 * microsecond (an earlier post only lowers the floor). */
	uint64_t now_us = (uint64_t)now_ns() / 1000;
	uint64_t age_us = (uint32_t)((uint32_t)now_us - d->post_us);
	int64_t post = (int64_t)((now_us - age_us) * 1000);
	int64_t floor_ns = post + fst_floor_ns(rx->fab, rt->path, (int)rt->npath, &rt->nic,
					       (enum model_switching)rt->switching, d->total);
	if (floor_ns > r->floor_ns)
		r->floor_ns = floor_ns;
}

/* A receive completes at now: its lateness against the model's time, and whether it is early. */
static void rx_record_delivery(struct chan_rx *rx, const struct rx_recv *r, int64_t now)
{
	if (!rx->fab)
		return;
	int early = now < r->floor_ns || now < r->ready_ns;
	fst_record_lateness(rx->fab->shm, rx->last_link, now - r->ready_ns, early);
}
