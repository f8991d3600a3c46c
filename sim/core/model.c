/* SPDX-License-Identifier: MIT */
/*
 * model.c - the fabric's model core. See model.h for the API and
 * docs/models.md for the formulas in words.
 *
 * Layout: loss (runs of kept and lost packets, lazily); links, NICs and
 * paths; the packet train through a path's stages; model_message;
 * corruption. Probabilities, random numbers, the normal distribution and
 * jitter, which all of it draws from: model_rand.c (a leaf: it calls
 * nothing here).
 */
#include "sim/core/model.h"
#include "sim/core/model_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

#define NS_BITS 8000000000ULL /* bits per byte times ns per second */
#define RUN_INF UINT64_MAX    /* a run that never ends */

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* model.h's model_tadd, short: the recurrences below use it at every step */
static inline int64_t tadd(int64_t a, int64_t b)
{
	return model_tadd(a, b);
}

static inline uint64_t uadd_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? RUN_INF : r;
}

/*
 * Failures before the first success of a Bernoulli(q) sequence, from one
 * uniform draw: floor(log u / log(1 - q)), lq = log(1 - q). lq == 0 (q = 0):
 * never; lq == -inf (q = 1): 0.
 */
static uint64_t geom(double lq, uint64_t r)
{
	if (lq == 0.0)
		return RUN_INF;
	if (lq == -INFINITY)
		return 0;
	double g = floor(log(model_unit64(r)) / lq);
	return g < 0x1p62 ? (uint64_t)g : RUN_INF;
}

/* ---- loss ------------------------------------------------------------------ */

/*
 * Every model is produced as runs of kept and lost packets, each run's length
 * drawn geometrically, keyed by the position where it starts:
 *  - Bernoulli(q): a kept run ends in a loss (q), a lost run in a kept
 *    packet (1 - q).
 *  - Gilbert-Elliott: sojourns in good/bad (Geometric >= 1, ended by p or r),
 *    and Bernoulli runs of the state's loss probability inside each. Per
 *    packet this is netem's order: the loss uses the state before the
 *    transition.
 *  - 4-state: the chain itself: a packet is lost when its (new) state is 3
 *    or 4. Stays in a state are geometric; an exit picks its destination.
 *    From 1 the exits are p13 + p14 together (netem before 3.13 compared
 *    against p13 alone), and every case ends with its own break.
 * Geometric lengths are memoryless, so a run cut by the end of a train is
 * drawn afresh at the start of the next: the chain stays exact across trains.
 */

static inline uint64_t draw(struct model_loss_iter *it, uint32_t purpose, uint64_t pos,
			    uint64_t k)
{
	it->key.purpose = purpose;
	it->key.packet = it->base + pos;
	return model_rand(&it->key, k);
}

static inline uint32_t markov_state(const struct model_loss_state *st, uint32_t max)
{
	return st->state >= 1 && st->state <= max ? st->state : 1;
}

void model_loss_begin(struct model_loss_iter *it, const struct model_loss *l,
		      struct model_loss_state *st, const struct model_key *key, uint64_t n,
		      uint64_t attempt)
{
	memset(it, 0, sizeof(*it));
	it->l = l;
	it->st = st ? st : &it->own;
	it->key = *key;
	it->n = n;
	it->attempt = attempt;
	it->fresh = 1;
	for (int s = 0; s < 5; s++)
		it->le[s] = NAN;
	for (int s = 0; s < 3; s++)
		it->lk[s] = it->ll[s] = NAN;
	const uint32_t *p = l->p;
	switch (l->kind) {
	case MODEL_LOSS_BERNOULLI: {
		double q = model_prob_value(p[0]);
		it->base = key->packet;
		it->pl[1] = q;
		if (q == 0) { /* all kept: one run */
			it->end = n;
			it->fresh = 0;
		}
		break;
	}
	case MODEL_LOSS_GE: {
		double pr = model_prob_value(p[0]), r = model_prob_value(p[1]);
		double bad = model_prob_value(p[2]), good = model_prob_value(p[3]);
		it->key.conn = it->key.msg = 0;
		it->base = it->st->packets;
		it->s = markov_state(it->st, 2);
		it->pe[1] = pr;
		it->pe[2] = r;
		it->pl[1] = good;
		it->pl[2] = bad;
		it->pend = 1; /* no sojourn drawn yet: the first takes st's state */
		break;
	}
	case MODEL_LOSS_4STATE: {
		double p13 = model_prob_value(p[0]), p31 = model_prob_value(p[1]);
		double p32 = model_prob_value(p[2]), p23 = model_prob_value(p[3]);
		double p14 = model_prob_value(p[4]);
		double e1 = p13 + p14, e3 = p31 + p32;
		it->key.conn = it->key.msg = 0;
		it->base = it->st->packets;
		it->s = markov_state(it->st, 4);
		it->pe[1] = e1 < 1 ? e1 : 1;
		it->pe[2] = p23;
		it->pe[3] = e3 < 1 ? e3 : 1;
		it->split[1] = e1 > 0 ? p13 / e1 : 0; /* an exit from 1 goes to 3 */
		it->split[3] = e3 > 0 ? p31 / e3 : 0; /* an exit from 3 goes to 1 */
		break;
	}
	default: /* none: one kept run */
		it->end = n;
		it->fresh = 0;
		break;
	}
}

/* The logarithms, computed once per iterator when first needed. */
static inline double lk_of(struct model_loss_iter *it, uint32_t s)
{
	return isnan(it->lk[s]) ? (it->lk[s] = log1p(-it->pl[s])) : it->lk[s];
}

static inline double ll_of(struct model_loss_iter *it, uint32_t s)
{
	return isnan(it->ll[s]) ? (it->ll[s] = log(it->pl[s])) : it->ll[s];
}

static inline double le_of(struct model_loss_iter *it, uint32_t s)
{
	return isnan(it->le[s]) ? (it->le[s] = log1p(-it->pe[s])) : it->le[s];
}

/* The next Bernoulli run from x, not past limit, with state s's loss probability. */
static void bern_run(struct model_loss_iter *it, uint64_t x, uint64_t limit, uint32_t s,
		     uint64_t k0)
{
	uint64_t len;
	if (it->fresh || it->lost) { /* a kept run, ended by a loss */
		uint64_t g = geom(lk_of(it, s), draw(it, MODEL_P_LOSS, x, k0));
		len = it->fresh ? g : uadd_sat(g, 1);
		it->lost = 0;
	} else { /* a lost run, ended by a kept packet */
		len = uadd_sat(geom(ll_of(it, s), draw(it, MODEL_P_LOSS, x, k0 + 1)), 1);
		it->lost = 1;
	}
	it->fresh = 0;
	it->pos = x;
	it->end = len >= limit - x ? limit : x + len;
}

/* GE: start the sojourn at x (the first one in st's state). */
static void ge_sojourn(struct model_loss_iter *it, uint64_t x)
{
	if (it->pend)
		it->pend = 0;
	else
		it->s = 3 - it->s;
	uint64_t g = geom(le_of(it, it->s), draw(it, MODEL_P_LOSS_STATE, x, 0));
	it->soj_end = uadd_sat(x, uadd_sat(g, 1));
	it->fresh = 1;
}

/* Make [pos, end) the next run; 0 when the train is done. */
static int loss_step(struct model_loss_iter *it)
{
	uint64_t x = it->end, n = it->n;
	switch (it->l->kind) {
	case MODEL_LOSS_BERNOULLI:
		if (x >= n)
			return 0;
		bern_run(it, x, n, 1, 2 * it->attempt);
		return 1;
	case MODEL_LOSS_GE: {
		if (x >= n)
			return 0;
		if (x >= it->soj_end)
			ge_sojourn(it, x);
		bern_run(it, x, it->soj_end < n ? it->soj_end : n, it->s, 0);
		return 1;
	}
	case MODEL_LOSS_4STATE: {
		if (it->pend) { /* the single exit packet after a stay */
			it->pend = 0;
			it->pos = it->cur - 1;
			it->end = it->cur;
			it->lost = it->pend_lost;
			return 1;
		}
		x = it->cur;
		if (x >= n)
			return 0;
		uint32_t s = it->s;
		if (s == 4) { /* 4 -> 1 always: kept */
			it->pos = x;
			it->end = it->cur = x + 1;
			it->lost = 0;
			it->s = 1;
			return 1;
		}
		/* a stay in s (kept in 1 and 2, lost in 3), then its exit packet */
		uint64_t g = geom(le_of(it, s), draw(it, MODEL_P_LOSS_STATE, x, 0));
		it->pos = x;
		it->lost = s == 3;
		if (g >= n - x) {
			it->end = it->cur = n;
			return 1;
		}
		uint64_t e = x + g;
		uint32_t dest;
		if (s == 1)
			dest = model_unit64(draw(it, MODEL_P_LOSS_STATE, e, 1)) < it->split[1] ? 3 : 4;
		else if (s == 2)
			dest = 3;
		else
			dest = model_unit64(draw(it, MODEL_P_LOSS_STATE, e, 1)) < it->split[3] ? 1 : 2;
		it->end = e;
		it->cur = e + 1;
		it->s = dest;
		it->pend = 1;
		it->pend_lost = dest >= 3;
		return 1;
	}
	default:
		return 0;
	}
}

uint64_t model_loss_next(struct model_loss_iter *it, uint64_t from, int lost)
{
	uint64_t n = it->n, res, from0;
	lost = !!lost;
	if (from >= n)
		return n;
	if (it->q_valid && from < it->q_res) {
		/* inside the last query's scan: [q_from, q_res) are all !q_lost */
		if (from < it->q_from)
			from = it->q_from;
		return lost != it->q_lost ? from : it->q_res;
	}
	from0 = from;
	for (;;) {
		while (it->end <= from)
			if (!loss_step(it)) {
				res = n;
				goto done;
			}
		if (it->lost == lost) {
			res = from;
			goto done;
		}
		from = it->end;
		if (from >= n) {
			res = n;
			goto done;
		}
	}
done:
	it->q_valid = 1;
	it->q_from = from0;
	it->q_res = res;
	it->q_lost = lost;
	return res;
}

void model_loss_end(struct model_loss_iter *it)
{
	uint64_t n = it->n;
	switch (it->l->kind) {
	case MODEL_LOSS_GE:
		/* only the sojourns matter for the state: skip the runs inside them */
		while (it->soj_end < n)
			ge_sojourn(it, it->soj_end);
		it->st->state = it->soj_end > n ? it->s : 3 - it->s;
		it->st->packets += n;
		break;
	case MODEL_LOSS_4STATE:
		while (loss_step(it))
			;
		it->st->state = it->s;
		it->st->packets += n;
		break;
	default:
		break;
	}
}

uint64_t model_first_loss(const struct model_loss *l, struct model_loss_state *st,
			  const struct model_key *key, uint64_t n)
{
	struct model_loss_iter it;
	model_loss_begin(&it, l, st, key, n, 0);
	uint64_t r = model_loss_next(&it, 0, 1);
	model_loss_end(&it);
	return r;
}

double model_loss_rate(const struct model_loss *l)
{
	const uint32_t *p = l->p;
	switch (l->kind) {
	case MODEL_LOSS_BERNOULLI:
		return model_prob_value(p[0]);
	case MODEL_LOSS_GE: {
		double pr = model_prob_value(p[0]), r = model_prob_value(p[1]);
		double bad = pr + r > 0 ? pr / (pr + r) : 0;
		return (1 - bad) * model_prob_value(p[3]) + bad * model_prob_value(p[2]);
	}
	case MODEL_LOSS_4STATE: {
		double p13 = model_prob_value(p[0]), p31 = model_prob_value(p[1]);
		double p32 = model_prob_value(p[2]), p23 = model_prob_value(p[3]);
		double p14 = model_prob_value(p[4]);
		if (p13 + p14 == 0)
			return 0; /* stays in 1 */
		if (p13 == 0)
			return p14 / (1 + p14); /* 1 <-> 4 only */
		if (p31 == 0) {			/* never back to 1: ends in {2, 3} */
			if (p32 == 0)
				return 1;
			return p23 == 0 ? 0 : p23 / (p23 + p32);
		}
		/* balance: pi4 = p14 pi1, pi3 = p13 pi1 / p31, pi2 = p32 pi3 / p23 */
		double w3 = p13 / p31, w2 = 0;
		if (p32 > 0) {
			if (p23 == 0)
				return 0; /* 2 absorbs */
			w2 = w3 * p32 / p23;
		}
		return (w3 + p14) / (1 + w2 + w3 + p14);
	}
	default:
		return 0;
	}
}

int model_loss_check(const struct model_loss *l, char *err, size_t errlen)
{
	if (!l)
		return model_fail(err, errlen, "loss: missing");
	if ((int)l->kind < MODEL_LOSS_NONE || l->kind > MODEL_LOSS_4STATE)
		return model_fail(err, errlen,
				  "loss.model: %d is not one of none (0), bernoulli, ge, "
				  "4state (3)",
				  (int)l->kind);
	if (l->kind == MODEL_LOSS_4STATE) {
		double p13 = model_prob_value(l->p[0]), p31 = model_prob_value(l->p[1]);
		double p32 = model_prob_value(l->p[2]), p14 = model_prob_value(l->p[4]);
		if (p13 + p14 > 1)
			return model_fail(err, errlen,
					  "loss.p14: %.9g with p13 %.9g leaves state 1 with "
					  "probability %.9g > 1",
					  p14, p13, p13 + p14);
		if (p31 + p32 > 1)
			return model_fail(err, errlen,
					  "loss.p32: %.9g with p31 %.9g leaves state 3 with "
					  "probability %.9g > 1",
					  p32, p31, p31 + p32);
	}
	return 0;
}

/* ---- links, NICs and paths ------------------------------------------------- */

static uint64_t fs_per_byte(uint64_t rate_bps)
{
	return rate_bps ? (8000000000000000ULL + rate_bps / 2) / rate_bps : 0;
}

static int rate_check(const char *key, uint64_t r, char *err, size_t errlen)
{
	if (r && (r < MODEL_RATE_MIN_BPS || r > MODEL_RATE_MAX_BPS))
		return model_fail(err, errlen,
				  "%s: %.9g Gb/s (%llu b/s) is out of range 0.001..1000000 Gb/s "
				  "(0: unlimited)",
				  key, (double)r / 1e9, (unsigned long long)r);
	return 0;
}

static int time_check(const char *key, int64_t t, char *err, size_t errlen)
{
	if (t < 0 || t > MODEL_TIME_MAX_NS)
		return model_fail(err, errlen, "%s: %lld is out of range 0..%lld ns", key,
				  (long long)t, (long long)MODEL_TIME_MAX_NS);
	return 0;
}

int model_link_resolve(struct model_link *l, char *err, size_t errlen)
{
	int rc;
	if ((rc = rate_check("rate_gbps", l->rate_bps, err, errlen)) ||
	    (rc = time_check("latency_ns", l->latency_ns, err, errlen)))
		return rc;
	if (l->mtu < MODEL_MTU_MIN || l->mtu > MODEL_MTU_MAX)
		return model_fail(err, errlen, "mtu: %u is out of range %u..%u bytes", l->mtu,
				  MODEL_MTU_MIN, MODEL_MTU_MAX);
	if (l->hdr_bytes > MODEL_HDR_MAX)
		return model_fail(err, errlen, "hdr_bytes: %u is out of range 0..%u", l->hdr_bytes,
				  MODEL_HDR_MAX);
	if (l->hdr_first_extra > MODEL_HDR_MAX)
		return model_fail(err, errlen, "hdr_first_extra: %u is out of range 0..%u",
				  l->hdr_first_extra, MODEL_HDR_MAX);
	if (l->hdr_last_extra > MODEL_HDR_MAX)
		return model_fail(err, errlen, "hdr_last_extra: %u is out of range 0..%u",
				  l->hdr_last_extra, MODEL_HDR_MAX);
	if ((rc = model_jitter_check(&l->jitter, err, errlen)) ||
	    (rc = model_loss_check(&l->loss, err, errlen)) ||
	    (rc = time_check("reorder_delay_ns", l->reorder_delay_ns, err, errlen)))
		return rc;
	if (l->reorder_p && !l->reorder_delay_ns)
		return model_fail(err, errlen,
				  "reorder_delay_ns: 0 with reorder %.9g; a reordered packet needs "
				  "a delay > 0",
				  model_prob_value(l->reorder_p));
	l->fs_per_byte = fs_per_byte(l->rate_bps);
	return 0;
}

int model_nic_resolve(struct model_nic *n, char *err, size_t errlen)
{
	int rc;
	if ((rc = rate_check("host_rate_gbps", n->host_rate_bps, err, errlen)) ||
	    (rc = time_check("o_send_ns", n->o_send_ns, err, errlen)) ||
	    (rc = time_check("o_recv_ns", n->o_recv_ns, err, errlen)) ||
	    (rc = time_check("ack_proc_ns", n->ack_proc_ns, err, errlen)))
		return rc;
	if (n->timeout_exp > 31)
		return model_fail(err, errlen, "timeout_exp: %u is out of range 0..31 (0: never)",
				  n->timeout_exp);
	if (n->retry_count > 7)
		return model_fail(err, errlen, "retry_count: %u is out of range 0..7",
				  n->retry_count);
	if (n->timeout_scale_ppm > 1000000)
		return model_fail(err, errlen, "timeout_scale: %.6f (%u ppm) is out of range 0..1",
				  n->timeout_scale_ppm / 1e6, n->timeout_scale_ppm);
	n->host_fs_per_byte = fs_per_byte(n->host_rate_bps);
	return 0;
}

int64_t model_timeout_ns(const struct model_nic *n)
{
	if (n->timeout_exp == 0)
		return MODEL_NEVER;
	uint64_t scale = n->timeout_scale_ppm ? n->timeout_scale_ppm : 1000000;
	unsigned exp = n->timeout_exp < 31 ? n->timeout_exp : 31;
	return (int64_t)(((4096ULL << exp) * scale) / 1000000);
}

int model_path_check(const struct model_path *p, char *err, size_t errlen)
{
	if (!p)
		return model_fail(err, errlen, "path: missing");
	if (p->nhops < 0 || p->nhops > MODEL_MAX_HOPS)
		return model_fail(err, errlen, "path: %d hops; 0..%d are possible", p->nhops,
				  MODEL_MAX_HOPS);
	for (int j = 0; j < p->nhops; j++)
		if (!p->hop[j])
			return model_fail(err, errlen, "path: hop %d (link %u) has no link", j,
					  p->link_id[j]);
	if (p->switching != MODEL_CUT_THROUGH && p->switching != MODEL_STORE_FORWARD)
		return model_fail(err, errlen,
				  "switching: %d is not cut_through (0) or store_forward (1)",
				  (int)p->switching);
	return 0;
}

uint32_t model_path_mtu(const struct model_path *p)
{
	uint32_t m = 0;
	for (int j = 0; j < p->nhops; j++)
		if (!m || p->hop[j]->mtu < m)
			m = p->hop[j]->mtu;
	return m;
}

uint64_t model_packets(const struct model_path *p, uint64_t bytes)
{
	uint64_t m = model_path_mtu(p);
	return m && bytes > m ? (bytes + m - 1) / m : 1;
}

/* ---- the packet train ------------------------------------------------------ */

/* x bytes at rate bit/s: ceil(x * 8e9 / rate) ns, exact; 0 for an unlimited rate. */
static int64_t tx_ns(uint64_t x, uint64_t rate)
{
	if (!rate || !x)
		return 0;
	if (x <= UINT64_MAX / NS_BITS) {
		uint64_t b = x * NS_BITS;
		return (int64_t)(b / rate + (b % rate != 0));
	}
	u128 b = (u128)x * NS_BITS;
	u128 q = b / rate + (b % rate != 0);
	return q > (u128)INT64_MAX ? MODEL_NEVER : (int64_t)q;
}

/*
 * The stages a message crosses: the host-to-NIC transfer (payload only: a link with no
 * headers and no latency at the NIC's host rate), then each hop's link.
 */
struct train_ctx {
	const struct model_link *st[MODEL_MAX_HOPS + 1];
	struct model_link host; /* stage 0 when the NIC has a host rate */
	int ns, first_link;	/* stages; index of hop 0's stage */
	struct model_train tr;	/* the whole message: packets [0, n) */
	enum model_switching sw;
};

void model_train_init(struct model_train *tr, const struct model_path *p, uint64_t bytes)
{
	uint64_t m = model_path_mtu(p);
	tr->bytes = bytes;
	tr->mtu = m;
	tr->packets = m && bytes > m ? (bytes + m - 1) / m : 1;
	tr->lo = 0;
	tr->hi = tr->packets;
}

static void ctx_init(struct train_ctx *c, const struct model_path *p, const struct model_nic *nic,
		     uint64_t bytes)
{
	c->ns = 0;
	if (nic->host_rate_bps) {
		memset(&c->host, 0, sizeof(c->host));
		c->host.rate_bps = nic->host_rate_bps;
		c->st[c->ns++] = &c->host;
	}
	c->first_link = c->ns;
	for (int j = 0; j < p->nhops; j++)
		c->st[c->ns++] = p->hop[j];
	model_train_init(&c->tr, p, bytes);
	c->sw = p->switching;
}

/* Payload of packet i. */
static inline uint64_t pay(const struct model_train *tr, uint64_t i)
{
	return i + 1 < tr->packets ? tr->mtu : tr->bytes - (tr->packets - 1) * tr->mtu;
}

/* Bytes of packet i on a link. */
static inline uint64_t pkt_wire(const struct model_train *tr, const struct model_link *l,
				uint64_t i)
{
	return pay(tr, i) + l->hdr_bytes + (i == 0 ? l->hdr_first_extra : 0) +
		(i + 1 == tr->packets ? l->hdr_last_extra : 0);
}

/* Bytes of packets [lo, hi) on a link. */
static inline uint64_t train_wire(const struct model_train *tr, const struct model_link *l,
				  uint64_t lo, uint64_t hi)
{
	uint64_t b = hi == tr->packets ? tr->bytes - lo * tr->mtu : (hi - lo) * tr->mtu;
	return b + (hi - lo) * l->hdr_bytes + (lo == 0 ? l->hdr_first_extra : 0) +
		(hi == tr->packets ? l->hdr_last_extra : 0);
}

/*
 * One hop (model.h): the train [lo, hi) on link l, free from busy, carrying extra more
 * bytes (duplicates). With in = the stamp at the hop:
 *   s = max(busy, in.first)
 *   f = max(s + T(W), in.last + tail)
 *   tail = T(last) store-and-forward; max(0, T(last) - in.last_tx) cut-through
 *   next = {s + d + (store-and-forward ? T(first) : 0), f + d, T(last)}
 * At the first stage in = {t, t, 0} gives s = max(t, busy), f = s + T(W) (T(W) >= T(last)).
 */
void model_hop(const struct model_link *l, enum model_switching sw, const struct model_train *tr,
	       uint64_t extra_bytes, int64_t busy_ns, const struct model_stamp *in,
	       struct model_hop_times *out)
{
	int sf = sw == MODEL_STORE_FORWARD;
	uint64_t rate = l->rate_bps;
	int64_t tw = tx_ns(train_wire(tr, l, tr->lo, tr->hi) + extra_bytes, rate);
	int64_t ta = sf ? tx_ns(pkt_wire(tr, l, tr->lo), rate) : 0;
	int64_t tz = tx_ns(pkt_wire(tr, l, tr->hi - 1), rate);
	int64_t tail = sf ? tz : (tz > in->last_tx_ns ? tz - in->last_tx_ns : 0);
	int64_t s = max64(busy_ns, in->first_ns);
	int64_t f = max64(tadd(s, tw), tadd(in->last_ns, tail));
	out->start_ns = s;
	out->done_ns = f;
	out->next.first_ns = tadd(tadd(s, l->latency_ns), ta);
	out->next.last_ns = tadd(f, l->latency_ns);
	out->next.last_tx_ns = tz;
}

/*
 * Packets [lo, hi) through every stage, the first starting no earlier than t:
 * stage k is free from b[k] and carries x[k] more bytes (duplicates; x may be
 * NULL). Fills each stage's start s[k] and finish f[k] (last byte out) and
 * returns the last byte's arrival at the receiver: model_hop, stage after stage.
 */
static int64_t train_run(const struct train_ctx *c, uint64_t lo, uint64_t hi, int64_t t,
			 const int64_t *b, const uint64_t *x, int64_t *s, int64_t *f)
{
	struct model_train tr = c->tr;
	struct model_hop_times h = {.next = {t, t, 0}};
	tr.lo = lo;
	tr.hi = hi;
	for (int k = 0; k < c->ns; k++) {
		struct model_stamp in = h.next;
		model_hop(c->st[k], c->sw, &tr, x ? x[k] : 0, b[k], &in, &h);
		s[k] = h.start_ns;
		f[k] = h.done_ns;
	}
	return h.next.last_ns;
}

int64_t model_ideal_ns(const struct model_path *p, const struct model_nic *nic, uint64_t bytes)
{
	struct train_ctx c;
	ctx_init(&c, p, nic, bytes);
	int64_t dsum = 0, best = 0, acc = 0, a = 0;
	for (int k = 0; k < c.ns; k++) {
		const struct model_link *g = c.st[k];
		const uint64_t n = c.tr.packets;
		dsum = tadd(dsum, g->latency_ns);
		int64_t tw = tx_ns(train_wire(&c.tr, g, 0, n), g->rate_bps);
		int64_t tz = tx_ns(pkt_wire(&c.tr, g, n - 1), g->rate_bps);
		/* closed forms: the bottleneck stage m carries the whole train, every stage
		 * after it adds (cut-through) what its last packet takes longer than on the
		 * stage before, or (store-and-forward) the last packet's full time; with
		 * store-and-forward every stage before m adds its first packet's time. */
		if (c.sw == MODEL_STORE_FORWARD) {
			acc = k ? tadd(acc, tz) : 0;
			if (k == 0 || tadd(a, tw) > acc)
				acc = tadd(a, tw);
			a = tadd(a, tx_ns(pkt_wire(&c.tr, g, 0), g->rate_bps));
		} else {
			const struct model_link *h = c.st[k ? k - 1 : 0];
			int64_t pz = k ? tx_ns(pkt_wire(&c.tr, h, n - 1), h->rate_bps) : 0;
			acc = k ? tadd(acc, tz > pz ? tz - pz : 0) : 0;
			if (tw > acc)
				acc = tw;
		}
		best = acc;
	}
	return tadd(tadd(tadd(nic->o_send_ns, dsum), best), nic->o_recv_ns);
}

/* ---- one message ----------------------------------------------------------- */

/* The next index in [from, n) where an event of probability q (lq = log(1 - q)) happens;
 * the draw is keyed at from. */
static uint64_t event_next(struct model_key *k, double lq, uint64_t from, uint64_t n, uint64_t kk)
{
	if (from >= n)
		return n;
	k->packet = from;
	uint64_t g = geom(lq, model_rand(k, kk));
	return g >= n - from ? n : from + g;
}

/* Duplicates of packets [lo, n) per hop: counted, and their bytes added to the stage
 * where they happen and every stage after it. */
/* Duplicates of packets [lo, n) of train tr on path p (attempt: the draws' repeat index): into
 * x[j] the extra wire bytes of hop j (a packet duplicated at hop j crosses every hop from j on);
 * returns how many were duplicated at hops [from, to). */
static uint32_t dup_draws(const struct model_path *p, const struct model_train *tr,
			  const struct model_key *key, uint64_t lo, uint64_t attempt, uint64_t *x,
			  int from, int to)
{
	uint32_t count = 0;
	memset(x, 0, sizeof(uint64_t) * (size_t)p->nhops);
	for (int j = 0; j < p->nhops; j++) {
		uint32_t dp = p->hop[j]->duplicate_p;
		if (!dp)
			continue;
		struct model_key k = *key;
		k.link = p->link_id[j];
		k.purpose = MODEL_P_DUPLICATE;
		double lq = log1p(-model_prob_value(dp));
		const uint64_t n = tr->packets;
		for (uint64_t i = event_next(&k, lq, lo, n, attempt); i < n;
		     i = event_next(&k, lq, i + 1, n, attempt)) {
			count += j >= from && j < to;
			for (int s = j; s < p->nhops; s++)
				x[s] += pkt_wire(tr, p->hop[s], i);
		}
	}
	return count;
}

/* The same for model_message's stages (x[] by stage: none on the host stage). */
static uint32_t duplicates(const struct train_ctx *c, const struct model_path *p,
			   const struct model_key *key, uint64_t lo, uint64_t attempt, uint64_t *x)
{
	uint64_t xh[MODEL_MAX_HOPS];
	uint32_t count = dup_draws(p, &c->tr, key, lo, attempt, xh, 0, p->nhops);
	memset(x, 0, sizeof(uint64_t) * (size_t)c->ns);
	for (int j = 0; j < p->nhops; j++)
		x[c->first_link + j] = xh[j];
	return count;
}

uint32_t model_duplicate_bytes(const struct model_path *p, const struct model_key *key,
			       uint64_t bytes, uint64_t *x, int from, int to)
{
	struct model_train tr;
	model_train_init(&tr, p, bytes);
	return dup_draws(p, &tr, key, 0, 0, x, from, to);
}

/* How many packets of the train [lo, n) that began on the first stage at s0 had begun
 * there before t (>= 1 when t > s0): what a sender stopped at t has already sent. */
static uint64_t sent_before(const struct train_ctx *c, uint64_t lo, int64_t s0, int64_t t)
{
	uint64_t a = 0, b = c->tr.packets - lo - 1; /* packet lo + a begins before t: the last */
	if (!c->ns || !c->st[0]->rate_bps || t <= s0)
		return t <= s0 ? 0 : c->tr.packets - lo;
	while (a < b) {
		uint64_t m = a + (b - a + 1) / 2;
		if (tadd(s0, tx_ns(train_wire(&c->tr, c->st[0], lo, lo + m), c->st[0]->rate_bps)) <
		    t)
			a = m;
		else
			b = m - 1;
	}
	return a + 1;
}

static int markov(const struct model_link *l)
{
	return l->loss.kind == MODEL_LOSS_GE || l->loss.kind == MODEL_LOSS_4STATE;
}

/*
 * The attempts: the train [lo, n) goes out; the hops' loss patterns give the
 * first packet lost on any hop (i*) and the first packet after it that
 * crosses every hop. If there is one, the receiver NAKs when it arrives
 * (go-back-N); if not, the sender's ACK timer expires T_o after the train
 * left the NIC. Either way packets i*..n-1 go again from then, behind what
 * the sender had already put on the wire (every packet that had begun on
 * the first stage; it cannot recall them, and they still occupy the links
 * downstream). A retry
 * without progress (same i*) counts; retry_count + 1 of them fail the
 * message. What happens before the first timeout is reserved on the links;
 * what follows a timeout is timed on its own (a reservation seconds ahead
 * would block every other flow on the link until then).
 */
int model_message(const struct model_path *p, const struct model_nic *nic, int64_t t_post,
		  uint64_t bytes, const struct model_key *key, int64_t *host_busy, int64_t *busy,
		  struct model_loss_state *loss_state, struct model_conn *conn,
		  struct model_msg *out)
{
	if (!p || !nic || !key || !conn || !out || p->nhops < 0 || p->nhops > MODEL_MAX_HOPS ||
	    (p->nhops && !busy) || (nic->host_rate_bps && !host_busy) || bytes > MODEL_MAX_BYTES)
		return -EINVAL;
	int lossy = 0, jittery = 0, reorders = 0;
	for (int j = 0; j < p->nhops; j++) {
		const struct model_link *l = p->hop[j];
		if (!l)
			return -EINVAL;
		if (l->loss.kind != MODEL_LOSS_NONE)
			lossy = 1;
		if (markov(l) && !loss_state)
			return -EINVAL;
		jittery |= l->jitter.dist != MODEL_DIST_NONE;
		reorders |= l->reorder_p != 0;
	}

	struct train_ctx c;
	ctx_init(&c, p, nic, bytes);
	const uint64_t n = c.tr.packets;
	memset(out, 0, sizeof(*out));
	out->packets = n;
	out->fail_hop = -1;
	if (conn->failed) { /* flush: the connection is in error */
		int64_t t = max64(t_post, conn->last_arrive);
		out->arrive_ns = out->recv_done_ns = out->send_done_ns = t;
		out->failed = 1;
		return 0;
	}

	int64_t b[MODEL_MAX_HOPS + 1], cm[MODEL_MAX_HOPS + 1]; /* busy: this attempt's, commit */
	int64_t s[MODEL_MAX_HOPS + 1], f[MODEL_MAX_HOPS + 1], s2[MODEL_MAX_HOPS + 1];
	int64_t f2[MODEL_MAX_HOPS + 1];
	uint64_t x[MODEL_MAX_HOPS + 1];
	for (int k = 0; k < c.ns; k++)
		b[k] = k < c.first_link ? *host_busy : busy[k - c.first_link];
	memcpy(cm, b, sizeof(b[0]) * (size_t)c.ns);
	int64_t rev = 0;
	for (int j = 0; j < p->nhops; j++)
		rev = tadd(rev, p->hop[j]->latency_ns);
	const int64_t to = model_timeout_ns(nic);

	int64_t t = tadd(t_post, nic->o_send_ns), arr, t_err = 0;
	uint64_t lo = 0, attempt = 0, base = 0;
	uint32_t retries = 0;
	int deferred = 0, failed = 0, hang = 0;
	for (;;) {
		out->duplicates += duplicates(&c, p, key, lo, attempt, x);
		arr = train_run(&c, lo, n, t, b, x, s, f);
		if (!deferred)
			for (int k = 0; k < c.ns; k++)
				cm[k] = max64(cm[k], f[k]);
		if (!lossy)
			break;

		struct model_loss_iter it[MODEL_MAX_HOPS];
		uint64_t len = n - lo, first = len, after;
		int lhop = -1, nl = 0;
		for (int j = 0; j < p->nhops; j++) {
			if (p->hop[j]->loss.kind == MODEL_LOSS_NONE)
				continue;
			struct model_key k = *key;
			k.link = p->link_id[j];
			k.packet = lo;
			struct model_loss_state *st = loss_state ? &loss_state[j] : NULL;
			model_loss_begin(&it[nl], &p->hop[j]->loss, st, &k, len, attempt);
			uint64_t r = model_loss_next(&it[nl], 0, 1);
			if (r < first) {
				first = r;
				lhop = j;
			}
			nl++;
		}
		after = first + 1;
		if (first < len) /* the first packet after i* that crosses every lossy hop */
			for (int changed = 1; changed && after < len;) {
				changed = 0;
				for (int i = 0; i < nl && after < len; i++) {
					uint64_t r = model_loss_next(&it[i], after, 0);
					if (r > after) {
						after = r;
						changed = 1;
					}
				}
			}
		for (int i = 0; i < nl; i++)
			model_loss_end(&it[i]);
		if (first == len)
			break;

		uint64_t istar = lo + first;
		int64_t tev;
		out->lost++;
		if (after < len) { /* NAK when packet `after` arrives out of order */
			int64_t tooo = train_run(&c, lo, lo + after + 1, t, b, NULL, s2, s2);
			tev = tadd(tadd(tooo, nic->ack_proc_ns), rev);
		} else { /* nothing after i* arrives: the ACK timer */
			out->timeouts++;
			if (to == MODEL_NEVER) {
				hang = 1;
				break;
			}
			tev = tadd(f[c.first_link], to);
		}
		if (istar > base) {
			base = istar;
			retries = 0;
		}
		if (++retries > nic->retry_count) {
			failed = 1;
			t_err = tev;
			out->fail_hop = lhop;
			break;
		}
		if (after >= len)
			deferred = 1;
		/* the next attempt queues behind the packets this one had sent by tev */
		uint64_t m = sent_before(&c, lo, s[0], tev);
		if (m) {
			train_run(&c, lo, lo + m, t, b, NULL, s2, f2);
			for (int k = 0; k < c.ns; k++)
				b[k] = max64(b[k], f2[k]);
		}
		out->retx_packets += n - istar;
		lo = istar;
		t = tev;
		attempt++;
	}

	/* commit the reservations */
	for (int k = 0; k < c.ns; k++) {
		if (k < c.first_link)
			*host_busy = max64(*host_busy, cm[k]);
		else
			busy[k - c.first_link] = max64(busy[k - c.first_link], cm[k]);
	}

	if (hang) {
		out->arrive_ns = out->recv_done_ns = out->send_done_ns = MODEL_NEVER;
		conn->last_arrive = MODEL_NEVER;
		return 0;
	}
	if (failed) {
		t_err = max64(t_err, conn->last_arrive);
		out->arrive_ns = out->recv_done_ns = out->send_done_ns = t_err;
		out->failed = 1;
		conn->failed = 1;
		conn->last_arrive = t_err;
		return 0;
	}

	/* reordered packets of the final train arrive late; the message waits for the last */
	if (reorders)
		for (int j = 0; j < p->nhops; j++) {
			const struct model_link *l = p->hop[j];
			if (!l->reorder_p)
				continue;
			struct model_key k = *key;
			k.link = p->link_id[j];
			k.purpose = MODEL_P_REORDER;
			double lq = log1p(-model_prob_value(l->reorder_p));
			uint64_t last = n;
			for (uint64_t i = event_next(&k, lq, lo, n, attempt); i < n;
			     i = event_next(&k, lq, i + 1, n, attempt)) {
				out->reordered++;
				last = i;
			}
			if (last < n) {
				int64_t a = train_run(&c, lo, last + 1, t, b, NULL, s2, s2);
				arr = max64(arr, tadd(a, l->reorder_delay_ns));
			}
		}

	int64_t jit = 0;
	if (jittery)
		for (int j = 0; j < p->nhops; j++) {
			if (p->hop[j]->jitter.dist == MODEL_DIST_NONE)
				continue;
			struct model_key k = *key;
			k.link = p->link_id[j];
			jit = tadd(jit, model_jitter_ns(&p->hop[j]->jitter, &k, &conn->jit_z[j]));
		}
	/* FIFO per connection: never before the previous message's arrival plus this
	 * message's last packet time on the last link */
	int64_t gap = c.ns ? tx_ns(pkt_wire(&c.tr, c.st[c.ns - 1], n - 1), c.st[c.ns - 1]->rate_bps)
			   : 0;
	int64_t ta = max64(tadd(arr, jit), tadd(conn->last_arrive, gap));
	conn->last_arrive = ta;
	out->arrive_ns = ta;
	out->recv_done_ns = tadd(ta, nic->o_recv_ns);
	out->send_done_ns = tadd(tadd(tadd(ta, nic->ack_proc_ns), rev), nic->o_recv_ns);

	for (uint64_t i = model_corrupt_next(p, key, 0, n); i < n;
	     i = model_corrupt_next(p, key, i + 1, n))
		out->corrupted++;
	return 0;
}

/* ---- silent corruption ----------------------------------------------------- */

uint64_t model_corrupt_next(const struct model_path *p, const struct model_key *key,
			    uint64_t from, uint64_t npackets)
{
	double lq = 0; /* log of the probability that no hop corrupts a packet */
	for (int j = 0; j < p->nhops; j++)
		if (p->hop[j]->corrupt_p)
			lq += log1p(-model_prob_value(p->hop[j]->corrupt_p));
	if (lq == 0)
		return npackets;
	struct model_key k = *key;
	k.link = p->nhops ? p->link_id[0] : 0;
	k.purpose = MODEL_P_CORRUPT;
	return event_next(&k, lq, from, npackets, 0);
}

uint64_t model_corrupt_bit(const struct model_key *key, uint64_t len)
{
	if (!len || len > UINT64_MAX / 8)
		return UINT64_MAX;
	struct model_key k = *key;
	k.purpose = MODEL_P_CORRUPT_BIT;
	return (uint64_t)(((u128)model_rand(&k, 0) * (len * 8)) >> 64);
}

int model_corrupt_at(const struct model_key *key, uint64_t k, uint64_t mtu, uint64_t len,
		     uint64_t *at, uint8_t *mask)
{
	uint64_t start = k * mtu, plen = len - start < mtu ? len - start : mtu;
	struct model_key bk = *key;
	bk.packet = k;
	uint64_t bit = model_corrupt_bit(&bk, plen);
	if (bit == UINT64_MAX)
		return 0;
	*at = start + bit / 8;
	*mask = (uint8_t)(1u << (bit % 8));
	return 1;
}
