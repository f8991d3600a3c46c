/* SPDX-License-Identifier: MIT */
/*
 * model.h - the fabric's model core: small pure functions in virtual time.
 *
 * Units everywhere: time in int64 nanoseconds of CLOCK_MONOTONIC (or of a
 * test's virtual clock), sizes in bytes, rates in bits per second, and
 * probabilities as uint32 fractions of 2^32 where UINT32_MAX means exactly 1
 * (netem's "100%"). Timing is exact integer arithmetic: x bytes on a link of R
 * bit/s take ceil(x * 8e9 / R) ns, computed without overflow for any size up
 * to MODEL_MAX_BYTES and any rate down to MODEL_RATE_MIN_BPS; every time is
 * rounded up once, where it is computed, so the numbers can be checked by hand
 * (docs/models.md). Floating point is used only to sample distributions, and
 * deterministically: the same inputs give the same result (no FMA
 * contraction under -std=c11; libm's log, log1p, exp, erfc, cbrt, sqrt).
 *
 * Randomness is counter-based: every draw is a pure function of
 * (seed, link, purpose, connection, message, packet, k), so an impairment
 * schedule does not depend on which process got there first
 * (docs/models.md, "Determinism"). Markov loss models carry
 * state per directed link, advanced in packet order by the link's owner; their
 * draws are keyed by the packet's ordinal on the link.
 *
 * Errors are negative errno values; validation functions fill an err buffer
 * with "key: reason" naming the bad value. model_message trusts parameters that
 * passed model_link_resolve, model_nic_resolve and model_path_check.
 */
#ifndef SF_MODEL_H
#define SF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_HOPS 8
#define MODEL_TABLE_MAX 4096 /* entries of a user inverse-CDF table */
#define MODEL_ERR_LEN 200

#define MODEL_NEVER INT64_MAX		  /* a time that never comes (infinite ACK timeout) */
#define MODEL_MAX_BYTES (1ULL << 40)	  /* largest message model_message takes */
#define MODEL_RATE_MIN_BPS 1000000ULL	  /* 1 Mb/s; 0 is "unlimited" */
#define MODEL_RATE_MAX_BPS 1000000000000000ULL /* 1 Pb/s */
#define MODEL_TIME_MAX_NS 1000000000000LL /* 1000 s: bound on latencies and overheads */
#define MODEL_SD_MAX_NS 10000000000LL	  /* 10 s: bound on a jitter sd */
#define MODEL_MTU_MIN 64
#define MODEL_MTU_MAX (1u << 24)
#define MODEL_HDR_MAX 4096 /* bound on hdr_bytes and on each first/last extra */
#define MODEL_PROB_ONE UINT32_MAX

/* a + b for b >= 0, stuck at MODEL_NEVER instead of overflowing: how times add up. */
static inline int64_t model_tadd(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) ? MODEL_NEVER : r;
}

/* p in [0, 1] as a fraction of 2^32 (1 -> MODEL_PROB_ONE); NaN and < 0 give 0. */
uint32_t model_prob(double p);
/* The probability a fraction stands for: p / 2^32, MODEL_PROB_ONE = 1 exactly. */
double model_prob_value(uint32_t p);

/* ---- random numbers ------------------------------------------------------ */

enum model_purpose {
	MODEL_P_JITTER = 1,
	MODEL_P_LOSS = 2,	/* Bernoulli runs (per message), GE runs in a state (per link) */
	MODEL_P_LOSS_STATE = 3, /* Markov sojourns and exits (per link) */
	MODEL_P_REORDER = 4,
	MODEL_P_DUPLICATE = 5,
	MODEL_P_CORRUPT = 6,
	MODEL_P_CORRUPT_BIT = 7,
	MODEL_P_ACK = 8, /* reserved: ACKs and NAKs are not lost yet */
};

struct model_key {
	uint64_t seed;
	uint32_t link;	  /* directed link id */
	uint32_t purpose; /* enum model_purpose */
	uint64_t conn;	  /* connection (channel) id */
	uint64_t msg;	  /* message sequence on the connection */
	uint64_t packet;  /* packet index within the message, or on the link for Markov models */
};
/* 64 uniformly distributed bits for (key, k); k counts repeated draws of one purpose. */
uint64_t model_rand(const struct model_key *key, uint64_t k);
/* Uniform in (0, 1), never 0 or 1 exactly: (top 53 bits + 0.5) / 2^53. */
double model_unit(const struct model_key *key, uint64_t k);

/* ---- latency and jitter ---------------------------------------------------- */

/*
 * Every distribution is one-sided (a delay, never early against the no-jitter
 * model) and scaled so that its standard deviation is sd_ns exactly; the
 * shift that makes it non-negative is its mean (docs/models.md):
 *   uniform       on [0, 2 sqrt(3) sd]                    mean 1.7321 sd
 *   normal        N(0,1) truncated to [-4, 4], shifted +4  mean 4.0021 sd
 *   pareto        shape 3 (netem's), top 0.1% cut, - 1     mean 0.6928 sd
 *   paretonormal  netem's (normal + 3 pareto) / 4 quantile mean 1.5865 sd
 *   table         table[i] - table[0]: sd_ns is ignored    mean(table) - table[0]
 */
enum model_dist {
	MODEL_DIST_NONE = 0,
	MODEL_DIST_UNIFORM,
	MODEL_DIST_NORMAL,
	MODEL_DIST_PARETO,
	MODEL_DIST_PARETONORMAL,
	MODEL_DIST_TABLE, /* a user inverse CDF: table[i] = quantile (i + 0.5) / n, in ns */
};

struct model_jitter {
	enum model_dist dist;
	int64_t sd_ns; /* the configured spread, always stated as a standard deviation */
	/* Correlation: Gaussian-copula AR(1) on the draws of one connection (rho in [0, 1)):
	 * keeps the marginal distribution exact, unlike netem's method. */
	double rho;
	int ntable;
	const int64_t *table; /* MODEL_DIST_TABLE only, non-decreasing; not owned */
};

/*
 * The jitter X >= 0 (ns) added to one message's arrival. key->link, seed,
 * conn and msg select the draw (purpose and packet are set here). *z is the
 * connection's AR(1) Gaussian score for this jitter process: 0.0 means
 * "fresh" (the first draw is stationary); with rho = 0 it is left alone.
 */
int64_t model_jitter_ns(const struct model_jitter *j, const struct model_key *key, double *z);
/* Quantile of the configured distribution at u in (0, 1), in ns before rounding. */
double model_jitter_quantile(const struct model_jitter *j, double u);
/* Mean and standard deviation of the configured distribution, in ns. */
double model_jitter_mean(const struct model_jitter *j);
double model_jitter_sd(const struct model_jitter *j);
int model_jitter_check(const struct model_jitter *j, char *err, size_t errlen);

/* Standard normal CDF and its inverse (Wichura's AS241), as the sampler uses them. */
double model_phi(double z);
double model_phi_inv(double u);

/* ---- loss ------------------------------------------------------------------ */

enum model_loss_kind {
	MODEL_LOSS_NONE = 0,
	MODEL_LOSS_BERNOULLI, /* p */
	MODEL_LOSS_GE,	      /* Gilbert-Elliott: p (good->bad), r (bad->good), 1-h, 1-k */
	MODEL_LOSS_4STATE,    /* netem's 4-state Markov: p13, p31, p32, p23, p14 */
};

struct model_loss {
	enum model_loss_kind kind;
	uint32_t p[5]; /* fractions of 2^32, in the order the kind lists them */
};

/*
 * Per-link Markov state, owned by whoever advances the link; all-zero is the
 * start (state 0 reads as 1). GE: state of the next packet, 1 good, 2 bad
 * (netem: a packet's loss uses the state before its transition). 4-state:
 * state of the last packet, 1..4 (a packet's loss uses the state after it).
 */
struct model_loss_state {
	uint32_t state;
	uint64_t packets; /* packets seen on the link so far: the draws' ordinal */
};

/*
 * The loss pattern of one train of n packets on one link, produced lazily as
 * runs of kept and lost packets, in O(runs) whatever n is. Bernoulli draws
 * are keyed by (key->seed, link, conn, msg, key->packet + i, attempt), so
 * key->packet is the message index of the train's first packet; Markov draws
 * by (seed, link, ordinal on the link). Every packet of the train counts as
 * crossing the link (go-back-N sends the rest of a train after a loss).
 */
struct model_loss_iter {
	const struct model_loss *l;
	struct model_loss_state *st;
	struct model_key key;
	uint64_t n, attempt, base; /* base: key->packet (Bernoulli) or st->packets (Markov) */
	uint64_t pos, end;	   /* the current run [pos, end), train-relative */
	int lost, fresh, pend, pend_lost;
	uint32_t s;		    /* Markov state (see struct model_loss_state) */
	uint64_t cur, soj_end;	    /* chain cursor; GE: end of the current sojourn */
	double pl[3], pe[5], split[5]; /* per state: loss, exit probability; where exits go */
	double lk[3], ll[3], le[5];    /* log(1 - pl), log(pl), log(1 - pe), when first needed */
	uint64_t q_from, q_res;	    /* the last query: [q_from, q_res) all !q_lost */
	int q_lost, q_valid;
	struct model_loss_state own; /* the state when st is NULL (a Markov chain from 1) */
};
void model_loss_begin(struct model_loss_iter *it, const struct model_loss *l,
		      struct model_loss_state *st, const struct model_key *key, uint64_t n,
		      uint64_t attempt);
/* The first index >= from in [0, n) that is lost (lost = 1) or kept (0), else n. from
 * must not decrease from call to call. */
uint64_t model_loss_next(struct model_loss_iter *it, uint64_t from, int lost);
/* The train is over: a Markov state moves on to its end (st->packets += n). */
void model_loss_end(struct model_loss_iter *it);

/*
 * Which packets of an n-packet train are lost on this link: the index of the
 * first loss in [0, n), or n if none (begin, next, end; attempt 0; st may be
 * NULL: a Markov chain then starts in state 1 and is forgotten). O(1) for
 * Bernoulli, O(state changes) for the Markov models.
 */
uint64_t model_first_loss(const struct model_loss *l, struct model_loss_state *st,
			  const struct model_key *key, uint64_t n);
/* Long-run fraction of packets lost (a Markov chain started in state 1). */
double model_loss_rate(const struct model_loss *l);
int model_loss_check(const struct model_loss *l, char *err, size_t errlen);

/* ---- links, paths and the timing of one message --------------------------- */

enum model_switching {
	MODEL_CUT_THROUGH = 0,	 /* InfiniBand and most datacenter switches: the default */
	MODEL_STORE_FORWARD = 1, /* per packet */
};

struct model_link {
	uint64_t rate_bps;    /* 0: unlimited */
	uint64_t fs_per_byte; /* derived by model_link_resolve, rounded: for display only */
	int64_t latency_ns;   /* propagation + forwarding */
	uint32_t mtu;	      /* payload bytes per packet */
	uint32_t hdr_bytes;   /* per-packet header bytes on the wire */
	uint32_t hdr_first_extra; /* more on a message's first packet (IB RETH: 16) */
	uint32_t hdr_last_extra;  /* more on its last packet (IB ImmDt: 4) */
	struct model_jitter jitter;
	struct model_loss loss;
	uint32_t reorder_p;	  /* a packet takes an extra delay with this probability */
	int64_t reorder_delay_ns; /* ... of this much */
	uint32_t duplicate_p;
	uint32_t corrupt_p; /* only when asked for: lets wrong data through, on purpose */
};
int model_link_resolve(struct model_link *l, char *err, size_t errlen);

struct model_nic {
	uint64_t host_rate_bps; /* host-to-NIC (PCIe) limit on payload bytes, 0: none */
	uint64_t host_fs_per_byte; /* derived by model_nic_resolve, rounded: for display only */
	int64_t o_send_ns, o_recv_ns, ack_proc_ns;
	uint32_t timeout_exp; /* ACK timeout 4096 ns * 2^timeout_exp * timeout_scale; 0: never */
	uint32_t retry_count;	/* failure after retry_count + 1 retries without progress */
	uint32_t timeout_scale_ppm; /* test-only compression of the timeout, 1e6 = 1 */
};
int model_nic_resolve(struct model_nic *n, char *err, size_t errlen);
/* The ACK timeout T_o in ns (floor), or MODEL_NEVER for timeout_exp 0. */
int64_t model_timeout_ns(const struct model_nic *n);

struct model_path {
	int nhops; /* 0 (a NIC to itself) .. MODEL_MAX_HOPS */
	uint32_t link_id[MODEL_MAX_HOPS];
	const struct model_link *hop[MODEL_MAX_HOPS];
	enum model_switching switching;
};
int model_path_check(const struct model_path *p, char *err, size_t errlen);
/* The path's MTU (its hops' smallest; 0 for 0 hops) and a message's packet count. */
uint32_t model_path_mtu(const struct model_path *p);
uint64_t model_packets(const struct model_path *p, uint64_t bytes);

/* A connection's own model state (all-zero to start). */
struct model_conn {
	int64_t last_arrive;		/* FIFO clamp: the previous message's arrival */
	double jit_z[MODEL_MAX_HOPS];	/* AR(1) score of each hop's jitter */
	int failed;			/* a message failed: later ones fail at once */
};

/* What one message costs: every time absolute, in ns. */
struct model_msg {
	int64_t arrive_ns;    /* last byte at the receiver (after jitter, FIFO clamp) */
	int64_t recv_done_ns; /* the receive completes */
	int64_t send_done_ns; /* the send completes (ACK back) */
	uint64_t packets;     /* packets of the message */
	uint32_t lost;	      /* loss recoveries: NAKs and timeouts (each costs a retransmission) */
	uint32_t timeouts;    /* ACK-timeout expirations among them */
	uint64_t retx_packets; /* packets sent again */
	uint32_t duplicates;  /* dropped by the transport, counted (extra wire time) */
	uint32_t reordered;   /* packets that arrived late; the message waits for them */
	uint32_t corrupted;   /* packets whose payload gets a flipped bit (model_corrupt_next) */
	int failed;	      /* retries exhausted: every time above is the error time */
	int fail_hop;	      /* the hop whose loss exhausted them; -1 none or flushed */
};

/*
 * The timing of one message of `bytes` posted at t_post on a path (the
 * reference's §7.5 recurrences, exact integers; docs/models.md): FIFO
 * reservation on each stage, in call order; each stage is a model_hop (the
 * NIC's host-to-NIC stage one with no headers and no latency). host_busy is the sending NIC's
 * host-to-NIC stage's "busy until" (used only when nic->host_rate_bps != 0;
 * may be NULL otherwise), busy[j] hop j's, loss_state[j] hop j's Markov state
 * (may be NULL when no hop has a Markov model): all in/out, committed. key
 * gives seed, conn and msg. Returns 0, or -EINVAL for a NULL argument, a bad
 * hop count or bytes > MODEL_MAX_BYTES.
 */
int model_message(const struct model_path *p, const struct model_nic *nic, int64_t t_post,
		  uint64_t bytes, const struct model_key *key, int64_t *host_busy, int64_t *busy,
		  struct model_loss_state *loss_state, struct model_conn *conn,
		  struct model_msg *out);

/*
 * One hop of a message, the step model_message loops over (and the distributed
 * fabric clock reserves a path with, a run of hops at a time: docs/scale-out.md
 * section 4). A train is packets [lo, hi) of a message of `bytes` cut at the
 * path's MTU; a stamp is what the next hop needs to know of it.
 */
struct model_train {
	uint64_t bytes;	  /* the message */
	uint64_t mtu;	  /* the path's (model_path_mtu): every packet but the last carries it */
	uint64_t packets; /* the message's (model_packets) */
	uint64_t lo, hi;  /* this train: packets [lo, hi), lo < hi <= packets */
};
/* The whole message on path p: packets [0, model_packets(p, bytes)). */
void model_train_init(struct model_train *tr, const struct model_path *p, uint64_t bytes);

struct model_stamp {
	int64_t first_ns;   /* the first packet may begin: its first bit is at the hop
			     * (cut-through), or all of it (store-and-forward) */
	int64_t last_ns;    /* the train's last bit is at the hop */
	int64_t last_tx_ns; /* the last packet's transmission time on the stage before (0 at
			     * the first): cut-through forwards its head last_tx_ns earlier */
};

struct model_hop_times {
	int64_t start_ns;	 /* the first packet begins on the link */
	int64_t done_ns;	 /* the last bit leaves: the link's busy-until after the train */
	struct model_stamp next; /* the stamp at the next hop; after a path's last hop,
				  * next.last_ns is the arrival at the receiver */
};

/*
 * The train tr crossing link l (its rate, latency, headers; nothing else of it),
 * free from busy_ns, carrying extra_bytes more on the wire (duplicates; 0
 * otherwise), when its stamp at the link is *in:
 *   start = max(busy, in.first)
 *   done  = max(start + T(W), in.last + tail), W the train's bytes on the link
 *           (payload, hdr_bytes per packet, the first/last extras) + extra_bytes
 *   tail  = T(last packet) store-and-forward,
 *           max(0, T(last packet) - in.last_tx) cut-through
 *   next  = {start + latency (+ T(first packet) store-and-forward),
 *            done + latency, T(last packet)}
 * where T(x) = ceil(x * 8e9 / rate) ns (0 at rate 0). A message posted at t
 * enters its first stage with {t, t, 0}. Times in ns, sizes in bytes; saturates
 * at MODEL_NEVER. Pure: it reads l, tr and in, writes only *out, and reserves
 * nothing: the caller commits busy = max(busy, out->done_ns) if it takes it.
 * Trusts what model_message trusts (l resolved, tr consistent with a path).
 */
void model_hop(const struct model_link *l, enum model_switching sw, const struct model_train *tr,
	       uint64_t extra_bytes, int64_t busy_ns, const struct model_stamp *in,
	       struct model_hop_times *out);

/*
 * The duplicates of a message's first attempt on path p (each hop's duplicate_p), as
 * model_message draws them (key: seed, conn and msg): into x[j], for every hop j of the path,
 * the extra wire bytes hop j carries (a packet duplicated at hop j crosses every hop from j
 * on); returns how many packets were duplicated at hops [from, to). For a piece of a route
 * reserved hop by hop (model_hop's extra_bytes: fst_reserve_hops).
 */
uint32_t model_duplicate_bytes(const struct model_path *p, const struct model_key *key,
			       uint64_t bytes, uint64_t *x, int from, int to);

/*
 * The uncontended closed form of model_message without impairments: recv_done -
 * t_post for a message on an idle path (for tests and NCCL's tuner).
 */
int64_t model_ideal_ns(const struct model_path *p, const struct model_nic *nic, uint64_t bytes);

/* ---- silent corruption, for the data path ------------------------------- */

/*
 * The next packet index >= from in [0, npackets) whose payload is corrupted on
 * this path, else npackets (the same decisions model_message counts; key gives
 * seed, conn and msg; enumerate with from = 0, then found + 1).
 */
uint64_t model_corrupt_next(const struct model_path *p, const struct model_key *key,
			    uint64_t from, uint64_t npackets);
/* Which bit of a len-byte payload to flip, in [0, 8 len) (key->packet: the packet). */
uint64_t model_corrupt_bit(const struct model_key *key, uint64_t len);
/*
 * Where packet k of a len-byte message cut at mtu gets its flipped bit (key: seed, conn, msg;
 * the packet is set here): 1 with the byte's offset in the message (*at) and the bit (*mask),
 * 0 when the packet has no bit to flip. What every data path that corrupts flips.
 */
int model_corrupt_at(const struct model_key *key, uint64_t k, uint64_t mtu, uint64_t len,
		     uint64_t *at, uint8_t *mask);

#endif /* SF_MODEL_H */
