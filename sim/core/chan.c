/* SPDX-License-Identifier: MIT */
/*
 * chan.c - the shared-memory data path of one emulated connection.
 * See chan.h for the protocol; this file keeps to its single-writer rule:
 * tx writes shm->tx, the descriptors and the slots; rx writes shm->rx and the
 * CTS ring; the daemon writes only the dead flags.
 */
#include "sim/core/chan.h"
#include "sim/core/chan_int.h"
#include "sim/core/copyq.h"
#include "sim/core/fstate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* ---- endpoints ----------------------------------------------------------- */

/* The "never early" monitor's test build (chan_watch.c has the monitor). */
#ifndef CHAN_INJECT_EARLY
#define CHAN_INJECT_EARLY 0 /* 1 in a test build only (build/inject/): receives may skip the gate */
#endif
#if CHAN_INJECT_EARLY
int chan_inject_early = 1; /* skip it (sim/test/test_early.c turns it off and on) */
/*
 * The same build lets a test play the hostile peer between a check of the region and what
 * follows it (sim/test/test_chan_race.c): where is one of CHAN_HOOK_* (chan.h's test
 * section); the hook may write anything in the region, as the peer can at any moment.
 */
void (*chan_inject_hook)(struct chan_shm *shm, int where);
#define INJECT_HOOK(shm, where)                                                                    \
	do {                                                                                       \
		if (chan_inject_hook)                                                              \
			chan_inject_hook(shm, where);                                              \
	} while (0)
#else
#define chan_inject_early 0
#define INJECT_HOOK(shm, where) ((void)0)
#endif

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
	INJECT_HOOK(shm, CHAN_HOOK_CHECKED);
	const volatile struct chan_shm *v = shm;
	*g = (struct chan_geom){.slot_bytes = v->slot_bytes, .nslots = v->nslots};
	off[0] = v->desc_off;
	off[1] = v->data_off;
	size_t need = chan_shm_bytes(g);
	if (need == 0 || len < need || off[0] != chan_desc_off() || off[1] != chan_data_off(g))
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
	INJECT_HOOK(tx->shm, CHAN_HOOK_TX_ROUTE);
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
	uint64_t slowest = r->nic.host_rate_bps;
	for (uint32_t j = 0; j < r->npath; j++) {
		uint64_t bps = fab->links[r->path[j]].rate_bps;
		if (bps && (!slowest || bps < slowest))
			slowest = bps;
	}
	tx->ps_per_byte = slowest ? 8000000000000ull / slowest : 0;
	tx->fab = fab;
	return 0;
}

/*
 * When a message's last byte reached the receiver, for a receive read as it fills: its
 * completion less o_recv (model.c's model_message). The one rule both ends use.
 */
static inline int64_t arrival_ns(int64_t ready_ns, const struct model_nic *nic)
{
	return ready_ns - nic->o_recv_ns;
}

/* n rounded up to the route's whole packets (n itself without an mtu). */
static inline uint64_t whole_packets(const struct chan_tx *tx, uint64_t n)
{
	return tx->mtu ? (n + tx->mtu - 1) / tx->mtu * tx->mtu : n;
}

/*
 * A chunk's stamp for the receiver: the last chunk's is the message's delivery time (its
 * completion; its bytes arrived o_recv before, when the NIC wrote them); an earlier chunk's is
 * when its own last byte arrived, for a receive read as it fills: a byte time of the route's
 * slowest stage earlier for each byte after it (the message streams in at that rate), never
 * before the post. 0 on the ideal fabric.
 */
static int64_t chunk_ready(const struct chan_tx *tx, const struct tx_send *s, uint64_t end)
{
	if (!s->ready_ns || end >= s->size)
		return s->ready_ns;
	end = whole_packets(tx, end); /* the model delivers whole packets: this chunk's last */
	int64_t arrive = arrival_ns(s->ready_ns, &tx->conn.nic);
	if (end >= s->size)
		return arrive;
	unsigned __int128 ps = (unsigned __int128)(s->size - end) * tx->ps_per_byte;
	int64_t early = ps / 1000 > (unsigned __int128)INT64_MAX ? INT64_MAX : (int64_t)(ps / 1000);
	return arrive - s->post_ns > early ? arrive - early : s->post_ns;
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
	INJECT_HOOK(rx->shm, CHAN_HOOK_RX_ROUTE);
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
		uint64_t at; /* the byte, in the message */
		uint8_t mask;
		int has = model_corrupt_at(&key, k, tx->mtu, s->size, &at, &mask);
		if (has && at >= off + len)
			break; /* its byte is in the next chunk: resume there */
		if (has && at >= off)
			fn(arg, at, mask);
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
 * Where a held copy's next piece ends: pieces of an eighth of the message, CHAN_PIECE_MIN at
 * least, on whole packets; the last takes what is left (under two pieces). A message the model corrupts goes
 * whole (its flips are drawn over the message, for one copy).
 */
static uint64_t piece_end(const struct chan_tx *tx, const struct tx_send *s)
{
	uint64_t len = s->size / CHAN_PIECES_MAX;
	len = whole_packets(tx, len < CHAN_PIECE_MIN ? CHAN_PIECE_MIN : len);
	/* the last piece takes a remainder under len too: no piece is smaller than len */
	if (s->corrupted || s->size - s->started_bytes < 2 * len ||
	    s->pieces + 1 >= CHAN_PIECES_MAX || (s->whole && !s->pieces))
		return s->size;
	return s->started_bytes + len;
}

/*
 * Start the copy of a send's bytes [started_bytes, end) (the model's corruption included), or,
 * with arm, queue it to run at fire: 0, 1 the copy engine would not arm it (nothing done), or
 * the channel's failure.
 */
static int tx_start_piece(struct chan_tx *tx, struct tx_send *s, uint64_t end, int arm,
			  struct chan_err *err)
{
	uint64_t region = s->region, off = s->started_bytes;
	if (!tx->where[0]) {
		memcpy(tx->where, (const void *)tx->shm->rx_where, CHAN_WHERE_LEN);
		tx->where[CHAN_WHERE_LEN - 1] = 0;
	}
	int rc;
	if (arm) {
		rc = tx->dma->arm(tx->dma_ctx, tx->where, region, s->roff + off, s->data + off,
				  s->src_dev, end - off, &s->ticket[s->pieces]);
		if (rc == -EOPNOTSUPP) {
			s->noarm = 1;
			return 1;
		}
	} else {
		struct flip_list fl = {.v = tx->flips, .n = 0};
		if (s->corrupted && tx->fab) /* whole: piece_end */
			corrupt_each(tx, s, 0, s->size, flip_add, &fl);
		rc = tx->dma->start(tx->dma_ctx, tx->where, region, s->roff + off, s->data + off,
				    end - off, fl.v, fl.n, &s->ticket[s->pieces]);
	}
	if (rc)
		return side_fail(&tx->shm->tx, &tx->failed, &tx->ferr, err, -EIO,
				 "the GPU copy engine refused a one-sided copy (values: region, "
				 "errno)",
				 region, (uint64_t)-rc);
	if (!s->pieces)
		tx->direct_busy++;
	s->pieces++;
	if (!arm)
		s->fired = s->pieces; /* running now (tx_start_direct fired those before it) */
	else
		tx->unfired++;
	s->started_bytes = end;
	return 0;
}

/*
 * A send failed: the engine lets every armed piece go now and waits for every copy (drain), and
 * nothing is armed on this channel again, so that none still reads a buffer its caller was told
 * no about (the channel's other sends may go on: a peer's failure does not set tx->failed).
 */
static void tx_drain_failed(struct chan_tx *tx)
{
	tx->dma->drain(tx->dma_ctx);
	tx->unfired = 0;
	tx->arm_off = 1; /* and no send is planned whole, nor fires what the drain let go: */
	for (int i = 0; i < CHAN_MAX_SENDS; i++) {
		tx->sends[i].fired = tx->sends[i].pieces;
		tx->sends[i].whole = 0;
	}
}

/* The sooner of two times, 0 meaning none. */
static inline int64_t sooner(int64_t a, int64_t b)
{
	return a && (!b || a < b) ? a : b;
}

/*
 * A held send planned whole (s->whole, due its arrival): armed as one copy if that can happen
 * before its first piece would be due, else in pieces started at their times (s->whole and
 * s->noarm: armed pieces measured slower than either), so that a send the engine cannot arm,
 * or arms late, streams in no later than it would have. 1 armed or in pieces now, 2 to be
 * armed later (*next lowered to when), or the channel's failure.
 */
static int tx_arm_whole(struct chan_tx *tx, struct tx_send *s, int64_t due, int64_t now,
			int64_t *next, struct chan_err *err)
{
	s->whole = 0;
	uint64_t e1 = piece_end(tx, s); /* the first piece, were it in pieces */
	int64_t first = e1 < s->size ? chunk_ready(tx, s, e1) : due;
	if (now >= first || now >= due || s->noarm || due < tx->arm_due) {
		s->noarm = 1;
		return 1;
	}
	int64_t ahead = tx->dma->arm_ahead_ns;
	s->whole = 1;
	if (ahead > 0 && due - now > ahead) {
		*next = sooner(*next, sooner(due - ahead, first));
		return 2;
	}
	int rc = tx_start_piece(tx, s, s->size, 1, err);
	if (rc < 0)
		return rc;
	if (rc == 1) { /* declined: in pieces */
		s->whole = 0;
		return 1;
	}
	s->piece_due[0] = tx->arm_due = due;
	*next = sooner(*next, due);
	return 1;
}

/*
 * Start the one-sided copies of a reserved send that may start: all of it at once, or for a
 * held one (a receive read as it fills) each piece whose last byte has arrived, s->due_ns then
 * saying when to come back (0: all running). A held piece not yet due is armed where the copy
 * engine can (queued ahead, no earlier than arm_ahead_ns before its arrival, and let go then by
 * fire), else started at its time; pieces are armed in the order of their times, so that fired
 * in order none goes early. 0, or the channel's failure.
 */
static int tx_start_direct(struct chan_tx *tx, struct tx_send *s, struct chan_err *err)
{
	int64_t now = 0, next = 0; /* next: when something is due (0: nothing left) */
	while (s->fired < s->pieces) { /* armed pieces, in order */
		if (!now)
			now = now_ns();
		if (now < s->piece_due[s->fired]) {
			next = s->piece_due[s->fired];
			break;
		}
		tx->dma->fire(tx->dma_ctx, s->ticket[s->fired++]);
		tx->unfired--;
	}
	while (s->started_bytes < s->size || !s->pieces) {
		uint64_t end = s->held ? piece_end(tx, s) : s->size;
		if (s->held) {
			int64_t due = end < s->size ? chunk_ready(tx, s, end)
						    : arrival_ns(s->ready_ns, &tx->conn.nic);
			if (!now)
				now = now_ns();
			if (s->whole && !s->pieces) {
				int w = tx_arm_whole(tx, s, due, now, &next, err);
				if (w < 0)
					return tx->failed;
				if (w == 2)
					break; /* armed later */
				continue;  /* armed, or in pieces from here */
			}
			if (now < due) {
				int64_t ahead = tx->dma->arm_ahead_ns;
				if (tx->dma->arm && !tx->arm_off && !s->noarm && !s->corrupted &&
				    due >= tx->arm_due) {
					if (ahead > 0 && due - now > ahead) { /* armed later */
						next = sooner(next, due - ahead);
						break;
					}
					int rc = tx_start_piece(tx, s, end, 1, err);
					if (rc < 0)
						return tx->failed;
					if (rc == 0) {
						s->piece_due[s->pieces - 1] = tx->arm_due = due;
						next = sooner(next, due);
						continue;
					}
				}
				next = sooner(next, due);
				break;
			}
			if (s->fired < s->pieces) /* due before an armed one: after it */
				break;
		}
		if (tx_start_piece(tx, s, end, 0, err))
			return tx->failed;
	}
	s->due_ns = next;
	return 0;
}

/*
 * A one-sided send whose copy is done takes one slot for its descriptor
 * (no data). 0 published (in its turn, behind staged copies still running),
 * 1 not yet: its copy is still running or failed (the channel failed then).
 */
static int tx_publish_direct(struct chan_tx *tx, struct tx_send *s)
{
	if (s->due_ns) { /* CHAN_RX_AT_DELIVERY: its pieces start at their arrivals */
		if (now_ns() < s->due_ns)
			return 1;
		if (tx_start_direct(tx, s, NULL) || s->due_ns)
			return 1;
	}
	while (!s->nocopy && s->polled < s->pieces) {
		int p = tx->dma->poll(tx->dma_ctx, s->ticket[s->polled]);
		if (p < 0) {
			side_fail(&tx->shm->tx, &tx->failed, &tx->ferr, NULL, -EIO,
				  "the GPU copy engine failed a one-sided copy (values: message, "
				  "errno)",
				  s->msg, (uint64_t)-p);
			return 1;
		}
		if (p == 0)
			return 1;
		s->polled++;
	}
	uint32_t i = (uint32_t)(tx->sub_head & tx->mask);
	struct chan_desc *d = &tx->desc[i];
	*d = (struct chan_desc){.msg = s->msg, .recv = s->recv, .offset = 0, .total = s->size,
				.ready_ns = s->ready_ns, .len = 0, .buf = s->buf,
				.flags = CHAN_F_LAST | CHAN_F_DIRECT, .tag = s->tag,
				.post_us = tx->fab ? chan_post_stamp(s->post_ns) : 0};
	if (s->doomed) {
		d->flags |= CHAN_F_FAIL;
		d->reserved = s->fail_link;
		d->fault = s->fault;
	}
	s->pushed = s->size;
	s->started = 1;
	s->slot = tx->sub_head;
	if (!s->nocopy)
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

/*
 * Start the held one-sided copies of s and of the sends behind it that have come due, while s
 * cannot be published. Each waits for its own arrival only, never for the copy ahead of it to
 * be seen done (several LL steps of one hop would otherwise land a copy's latency apart, one
 * after another), nor for a staging slot, which only its descriptor needs. (The copy engine
 * keeps the order in which they start; descriptors still go out in message order.)
 */
static void tx_start_due(struct chan_tx *tx, const struct tx_send *s)
{
	int64_t now = 0;
	for (uint64_t m = s->msg; m < tx->next_msg && !tx->failed; m++) {
		struct tx_send *t = &tx->sends[m % CHAN_MAX_SENDS];
		if (!t->direct || !t->due_ns)
			continue; /* staged, started, or never to land */
		if (!now)
			now = now_ns();
		if (now >= t->due_ns)
			tx_start_direct(tx, t, NULL);
	}
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
				if (tx->sub_head - tx->tail_seen > tx->mask) {
					if (s->direct)
						tx_start_due(tx, s);
					goto out;
				}
			}
			if (s->direct) {
				if (tx_publish_direct(tx, s)) {
					/* its copy is still running (or not due, or failed) */
					tx_start_due(tx, s);
					goto out;
				}
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
			/* Every chunk carries its arrival time: a receive posted
			 * CHAN_RX_AT_DELIVERY copies none before it; completion reads the last's. */
			d->ready_ns = chunk_ready(tx, s, s->pushed);
			d->reserved = 0;
			d->fault = 0;
			d->post_us = d->flags && tx->fab ? chan_post_stamp(s->post_ns) : 0;
			if (s->doomed) /* on every chunk: a receive read as it fills takes none */
				d->flags |= CHAN_F_FAIL;
			if (d->flags == (CHAN_F_LAST | CHAN_F_FAIL)) {
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
	if (!tx || !dma || !dma->start || !dma->poll || !dma->drain || !dma->arm != !dma->fire)
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
	if (region && c.roff[b] > UINT64_MAX - size) /* a piece's offset must not wrap */
		return side_fail(&shm->tx, &tx->failed, &tx->ferr, err, -EPROTO,
				 "corrupt receive post: the buffer's offset in its region overflows",
				 c.roff[b], size);
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
	if (region) {
		s->direct = 1;
		s->region = region;
		s->roff = c.roff[b];
		/* A receive read as it fills: nothing lands before the model's arrival time, and
		 * a message the model fails (lost for good) never lands. */
		s->src_dev = src_mem == CHAN_MEM_DEVICE;
		s->held = (c.flags & CHAN_RX_AT_DELIVERY) && tx->fab;
		s->whole = s->held && tx->dma->arm && tx->dma->arm_whole && !tx->arm_off &&
			   !s->corrupted;
		if (s->held && s->doomed)
			s->nocopy = 1;
		else if (tx_start_direct(tx, s, err)) {
			if (s->pieces) /* none may read the caller's buffer once it is told no */
				tx_drain_failed(tx);
			s->in_use = 0;
			return tx->failed;
		}
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
	/* armed pieces, or started ones not yet seen done, would read the caller's buffer, which
	 * it may reuse once told no */
	if (tx->unfired || (s->direct && !s->nocopy && s->polled < s->pieces))
		tx_drain_failed(tx);
	s->in_use = 0;
	tx->inflight--;
	return rc;
}

int chan_rx_post(struct chan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		 const int32_t *tags, chan_req *req, struct chan_err *err)
{
	return chan_rx_post_in(rx, n, data, sizes, tags, NULL, 0, req, err);
}

int chan_rx_post_in(struct chan_rx *rx, int n, void *const *data, const uint64_t *sizes,
		    const int32_t *tags, const struct chan_region *regions, uint32_t flags,
		    chan_req *req, struct chan_err *err)
{
	struct chan_shm *shm = rx->shm;
	if (rx->failed) {
		if (err)
			*err = rx->ferr;
		return rx->failed;
	}
	if (n < 1 || n > CHAN_MAX_RECVS || !req || !sizes || !data)
		return fail(err, -EINVAL, "bad receive count", (uint64_t)n, CHAN_MAX_RECVS);
	if (flags & ~(uint32_t)CHAN_RX_AT_DELIVERY)
		return fail(err, -EINVAL, "unknown receive flags", flags, CHAN_RX_AT_DELIVERY);
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
	r->at_delivery = (flags & CHAN_RX_AT_DELIVERY) != 0;
	struct chan_cts *c = &shm->cts[rx->posted % CHAN_MAX_REQS];
	c->seq = rx->posted;
	c->n = (uint32_t)n;
	c->flags = flags;
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
		if (r->floor_msg != d->msg + 1)
			chan_rx_note_floor(rx, r, d);
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
	int64_t now = 0;
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
		/* read as it fills: no byte before its arrival (the clock read afresh only when
		 * the last reading was before it) */
		int64_t due = d->flags & CHAN_F_LAST ? arrival_ns(d->ready_ns, &rx->route.nic)
						     : d->ready_ns;
		if (r->at_delivery && d->ready_ns > 0 && !chan_inject_early && now < due) {
			now = now_ns();
			if (now < due) {
				/* its floor now, not on the way to its completion */
				if ((d->flags & CHAN_F_LAST) && r->floor_msg != d->msg + 1) {
					chan_rx_note_floor(rx, r, d);
					r->floor_msg = d->msg + 1;
				}
				break;
			}
		}
		r->sub[d->buf] += d->len;
		if (d->flags & CHAN_F_LAST)
			r->sub_last[d->buf] = 1;
		uint8_t *dst = r->data[d->buf] + d->offset;
		const uint8_t *src = rx->slots + (size_t)i * rx->slot_bytes;
		/* a message the model fails never lands in a receive read as it fills */
		uint32_t clen = r->at_delivery && (d->flags & CHAN_F_FAIL) ? 0 : d->len;
		if (rx->pool && (clen >= COPYQ_MIN_BYTES || rx->sub_tail != rx->tail)) {
			/* A big chunk goes to a copy thread; a small one behind it is copied now
			 * but counted in its turn. */
			struct copyq_job *j = &rx->jobs[i];
			rx->pend[i] = dcopy;
			*j = (struct copyq_job){.dst = dst, .src = src, .len = clen, .fn = copy_out};
			if (clen < COPYQ_MIN_BYTES || copyq_submit(j) != 0) {
				if (clen)
					copy_out(dst, src, clen);
				atomic_store_explicit(&j->state, 2, memory_order_relaxed);
			}
			rx->sub_tail++;
			continue;
		}
		if (clen)
			copy_out(dst, src, clen);
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
		chan_rx_record_delivery(rx, r, now);
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
