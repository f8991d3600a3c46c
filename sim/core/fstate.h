/* SPDX-License-Identifier: MIT */
/*
 * fstate.h - the fabric's shared state: one region for the whole fabric.
 *
 * The daemon creates it (a sealed memfd) when it loads a scenario and hands
 * it to every process at hello. It holds what every sender must agree on:
 * each directed link's model parameters (read-only after format), its
 * "busy until" time and Markov loss state (the FIFO reservation: written
 * under the fabric lock), and its counters and fidelity monitor (atomics).
 * Senders reserve a message's path in one short critical section (pure
 * arithmetic, no syscall); the lock records its holder's pid so a process
 * killed inside it cannot wedge the fabric: a waiter that has spun for
 * FST_LOCK_STEAL_NS and finds the holder gone takes the lock over.
 *
 * Errors are negative errno values.
 */
#ifndef SF_FSTATE_H
#define SF_FSTATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/core/fault.h"
#include "sim/core/model.h"

#define FST_MAGIC 0x3154534653465353ULL /* "SSFSFST1" */
/* The layout's version: a plugin and a daemon of other builds refuse each other's region. */
#define FST_VERSION 6
#define FST_MAX_LINKS 131072
#define FST_MAX_HOSTS 256 /* hosts of a run whose deliveries here are counted apart */
/* Histograms of ns: bucket 0 counts 0 ns, bucket b [2^(b-1), 2^b) ns, the last one also all above. */
#define FST_LATE_BUCKETS 24  /* lateness: the last from 2^22 ns (4 ms) */
#define FST_QUEUE_BUCKETS 40 /* queueing: the last from 2^38 ns (275 s), beyond any sane backlog */
#define FST_LOCK_STEAL_NS 50000000LL	 /* after this, a dead holder's lock is taken over */
#define FST_LOCK_DEADLOCK_NS 10000000000LL /* and a live one held this long is a bug */

/* One directed link's shared state. */
struct fst_link {
	_Alignas(64) int64_t busy_until;  /* under the lock */
	struct model_loss_state loss;	  /* under the lock */
	uint64_t table_off, table_n;	  /* its jitter table in the region (read-only) */
	_Atomic uint64_t msgs, bytes, packets, lost, timeouts, duplicates, reordered, corrupted;
	_Atomic uint64_t failed;	/* messages that exhausted the retries on it */
	/* Queueing: how long the link was still busy with earlier messages when a message
	 * entering it was posted (0 if idle); every message that enters it is counted. */
	_Atomic uint64_t queue_ns, queue_max_ns;
	_Atomic uint64_t queue_hist[FST_QUEUE_BUCKETS];
	/* Fidelity monitor, at the receiver of messages whose last hop this is. */
	_Atomic uint64_t late_n, late_sum_ns, late_max_ns;
	_Atomic uint64_t early; /* completions before the model allows: a bug if ever non-zero
				   (fst_record_lateness: checked on the sender's clock) */
	_Atomic uint64_t late_hist[FST_LATE_BUCKETS];
	/* Of those, the deliveries of connections between hosts (fst_record_xlateness): the
	 * monitor then blames the hosts' network, not this machine. */
	_Atomic uint64_t xlate_n, xlate_sum_ns;
};

/* The deliveries here of connections from another host of the run (fst_record_xlateness), by
 * that host: the fidelity monitor names the pair of hosts whose network is slow. */
struct fst_xhost {
	_Atomic uint64_t n, late_sum_ns, late_max_ns, reserved;
};

/* One NIC's shared state: its host-to-NIC stage, shared by all its connections. */
struct fst_nic {
	_Alignas(64) int64_t host_busy; /* under the lock */
};

/*
 * One fault slot. The daemon fills spec, then publishes used = 1 (release);
 * after that spec never changes (a slot is never reused while the fabric
 * lives), so readers need no lock. origin is set once, by the daemon (time
 * triggers, live faults) or by the sender whose message fires the trigger;
 * until by a clear.
 */
struct fst_fault {
	_Alignas(64) _Atomic uint32_t used;
	_Atomic uint32_t calls; /* CALLFAIL: matching calls counted in its windows so far */
	_Atomic int64_t origin; /* absolute ns of the trigger; 0: not yet */
	_Atomic int64_t until;	/* cleared at; FAULT_FOREVER: not cleared */
	_Atomic uint64_t seen;	/* trigger progress: messages or bytes counted */
	_Atomic uint64_t hit;	/* messages it touched */
	_Atomic uint64_t delayed, failed, delay_ns;
	struct fault_spec spec;
};

struct fst_shm {
	uint64_t magic;
	uint32_t version;
	uint32_t nlinks;
	uint64_t seed;
	int64_t epoch_ns; /* CLOCK_MONOTONIC at fabric start: virtual time 0 */
	uint64_t total_bytes;
	uint64_t params_off; /* struct model_link[nlinks], table pointers NULL */
	uint64_t state_off;  /* struct fst_link[nlinks] */
	uint64_t tables_off; /* int64_t[], the jitter tables */
	uint32_t nnics;
	uint32_t reserved;
	uint64_t nics_off; /* struct fst_nic[nnics] */
	uint64_t faults_off; /* struct fst_fault[FAULT_MAX] */
	_Atomic uint32_t nfaults; /* slots handed out so far (readers scan [0, nfaults)) */
	_Atomic uint32_t call_kinds; /* 1 << kind for every CALLFAIL, comm_hang or node_kill kind
					published: the plugin's one branch before a regMr, connect
					or accept, and a cross-host connection's test */
	uint64_t xhosts_off;	     /* struct fst_xhost[FST_MAX_HOSTS], by the sending host */
	_Alignas(64) _Atomic uint32_t lock;
	_Atomic int32_t lock_pid;
	_Atomic uint64_t lock_steals;
};

/*
 * The region's layout, pinned (as plugin/ncclnet.h pins the ABI): a plugin and
 * a daemon of the same FST_VERSION must agree byte for byte, and fst_check
 * only sees sizes. Change one of these structs and bump FST_VERSION, then
 * write the new figures here; a change without a bump fails the build.
 */
#define FST_LAYOUT(cond) _Static_assert(cond, "the fabric state's layout changed: bump FST_VERSION")
FST_LAYOUT(FST_VERSION == 6 && sizeof(struct model_link) == 128 &&
	   offsetof(struct model_link, latency_ns) == 16 && offsetof(struct model_link, jitter) == 40 &&
	   offsetof(struct model_link, loss) == 80 && offsetof(struct model_link, corrupt_p) == 124);
FST_LAYOUT(sizeof(struct model_loss_state) == 16 && sizeof(struct fault_spec) == 360 &&
	   offsetof(struct fault_spec, link) == 64 && offsetof(struct fault_spec, start_ns) == 232 &&
	   offsetof(struct fault_spec, prob) == 264 && offsetof(struct fault_spec, nth) == 344);
FST_LAYOUT(sizeof(struct fst_link) == 704 && offsetof(struct fst_link, loss) == 8 &&
	   offsetof(struct fst_link, msgs) == 40 && offsetof(struct fst_link, queue_hist) == 128 &&
	   offsetof(struct fst_link, late_hist) == 480 && offsetof(struct fst_link, xlate_n) == 672);
FST_LAYOUT(sizeof(struct fst_nic) == 64 && sizeof(struct fst_fault) == 448 &&
	   offsetof(struct fst_fault, origin) == 8 && offsetof(struct fst_fault, until) == 16 &&
	   offsetof(struct fst_fault, spec) == 64);
FST_LAYOUT(sizeof(struct fst_shm) == 192 && offsetof(struct fst_shm, epoch_ns) == 24 &&
	   offsetof(struct fst_shm, params_off) == 40 && offsetof(struct fst_shm, faults_off) == 80 &&
	   offsetof(struct fst_shm, nfaults) == 88 && offsetof(struct fst_shm, xhosts_off) == 96 &&
	   sizeof(struct fst_xhost) == 32 && offsetof(struct fst_shm, lock) == 128 &&
	   offsetof(struct fst_shm, lock_steals) == 136);
#undef FST_LAYOUT

/* ---- daemon side ---------------------------------------------------------- */

/* Bytes for nlinks links whose jitter tables have table_entries entries in all; 0 if too many. */
size_t fst_bytes(uint32_t nlinks, uint32_t nnics, uint64_t table_entries);
/* Format a zeroed region: copies links[] (their tables too). 0 or -EINVAL. */
int fst_format(void *base, size_t len, uint32_t nlinks, const struct model_link *links,
	       uint32_t nnics, uint64_t seed, int64_t epoch_ns);
/* Validate a region's header. 0, -EPROTONOSUPPORT (a region of another FST_VERSION: the
 * plugin and the daemon come from different builds) or -EPROTO (not a fabric state). */
int fst_check(const void *base, size_t len);
/*
 * Publish a fault (checked with fault_spec_check first) with its origin (0:
 * a trigger will set it). Its slot number is its id. -ENOSPC when FAULT_MAX
 * slots have been handed out.
 */
int fst_fault_add(struct fst_shm *shm, const struct fault_spec *spec, int64_t origin,
		  uint32_t *id);
/* Slot id, or NULL when unused or out of range. */
struct fst_fault *fst_fault(struct fst_shm *shm, uint32_t id);

/*
 * CALLFAIL: must this call of kind (FAULT_K_REGMR_FAIL, _CONNECT_FAIL, _ACCEPT_FAIL) made on
 * node (a fabric node id) at now_ns fail? Every fault of that kind in a window at now_ns whose
 * node matches counts the call (shared by the node's processes); the first that fails it
 * wins. 1 with *fid and *call (its number for that fault; counted hit and failed), else 0. Any thread; lock-free. Callers
 * first test fst_call_armed, the one branch a run without such faults pays.
 */
int fst_call_fault(struct fst_shm *shm, uint32_t kind, int32_t node, int64_t now_ns,
		   uint32_t *fid, uint64_t *call);
/*
 * comm_hang for a connection the daemon holds no channel of (between hosts): is the connection
 * src -> dst (fabric node ids) held at now_ns by a comm_hang window? 1 with *fid (the first
 * such fault), else 0. Counts nothing (the caller counts the connections it holds). Any
 * thread; lock-free. Callers first test fst_call_armed(shm, FAULT_K_COMM_HANG).
 */
int fst_conn_hung(struct fst_shm *shm, int32_t src, int32_t dst, int64_t now_ns, uint32_t *fid);
/*
 * node_kill of a peer the daemon holds no channel of (on another host, whose daemon kills its
 * processes): has a window of a node_kill of node (a fabric node id) begun by now_ns? 1 with
 * *fid (the first such fault), else 0. Counts nothing (the killing daemon counts the processes).
 * Any thread; lock-free. Callers first test fst_call_armed(shm, FAULT_K_NODE_KILL).
 */
int fst_node_killed(struct fst_shm *shm, int32_t node, int64_t now_ns, uint32_t *fid);
static inline int fst_call_armed(const struct fst_shm *shm, uint32_t kind)
{
	return __builtin_expect(shm && (atomic_load_explicit(&((struct fst_shm *)shm)->call_kinds,
							     memory_order_relaxed) &
					(1u << kind)),
				0);
}

/* ---- every process -------------------------------------------------------- */

/* A process's view: the mapping plus local copies of the parameters with table pointers set. */
struct fst_view {
	struct fst_shm *shm;
	size_t len;
	uint32_t nlinks, nnics;
	struct model_link *links; /* owned, nlinks entries */
};

/* Attach to a mapped, checked region (not owned: unmap after fst_view_free). 0, -ENOMEM, or
 * fst_check's error. */
int fst_view_new(void *base, size_t len, struct fst_view **out);
void fst_view_free(struct fst_view *v); /* NULL-safe; does not unmap */

/* A sender's per-connection model state. */
struct fst_conn {
	uint64_t id;  /* the channel id: part of every random key */
	uint64_t msgs; /* messages reserved so far */
	int npath;
	uint32_t path[MODEL_MAX_HOPS];
	uint32_t src_nic;     /* the sending NIC's index in the fabric (gid) */
	int32_t src_node, dst_node; /* the connection's nodes, for connection-scoped faults */
	struct model_nic nic; /* its parameters */
	enum model_switching switching;
	struct model_conn mc; /* FIFO clamp, jitter scores */
};

/* What a fault did to a message (fst_reserve). */
struct fst_hit {
	int fault;	     /* the fault that decided its fate (id), or -1 */
	uint32_t action;     /* enum fault_action of that fault */
	uint32_t link;	     /* the link it acted on (DOWN, STALL on links, DEGRADE) */
	int64_t delay_ns;    /* added by outages */
	int64_t window_a, window_b; /* the window that hit it */
	int nfaults;	     /* faults that touched it */
	int corrupt_set;     /* a degrade set hop j's corruption to corrupt_p[j] */
	uint32_t corrupt_p[MODEL_MAX_HOPS];
	uint64_t degrades[FAULT_MAX / 64]; /* the degrade faults applied (bit id) */
};

/*
 * Reserve one message of bytes posted at now_ns on the connection's path, in
 * FIFO order with every other sender, and say when it arrives, completes at
 * the receiver, completes at the sender, or fails. Faults apply here: a
 * degrade in force at now_ns changes a hop's parameters; DOWN and STALL
 * windows that the message meets delay it or fail it; a RESET fails it; a
 * message can fire a fault's trigger (after the check, so the Nth message
 * itself is not hit). hit (may be NULL) says what a fault did. Updates the
 * links' and the faults' counters. 0, -EINVAL (a bad path), -EDEADLK (the lock could not be had).
 */
int fst_reserve(struct fst_view *v, struct fst_conn *c, int64_t now_ns, uint64_t bytes,
		struct model_msg *out, struct fst_hit *hit);
/* The connection's route on this fabric as a model path (hop parameters: the view's). 0, or
 * -EINVAL for a hop count out of range or a link the fabric does not have. */
int fst_conn_path(const struct fst_view *v, const struct fst_conn *c, struct model_path *p);
/*
 * The distributed fabric clock's step (docs/scale-out.md section 4): reserve hops
 * [first, first + n) of the connection's path for one message of bytes posted at post_ns (this
 * host's clock), from its stamp at hop first (*in), FIFO with every other sender on those
 * links, and give its stamp after hop first + n - 1 in *out (model_hop's, hop after hop; after
 * the path's last hop out->last_ns is the arrival). With first == 0 the sending NIC's host stage
 * comes first and *in is the post time plus o_send, {t, t, 0}. Reserving [0, k) then
 * [k, npath) from the stamp between them is one model_message reservation of an unimpaired
 * path, to the nanosecond, while nothing else reserves those links in between (test_fstate);
 * otherwise each link serves reservations in the order they reach it, not in post order, which
 * is the approximation scale-out.md describes.
 * Faults: as fst_reserve's, on these hops only: degrades of rate and latency, outages (DOWN,
 * STALL, RESET) met between entering hop first and leaving the last (a delay moves *out
 * later), and triggers on these hops' links; what acts on the connection as a whole (its
 * faults and triggers) only in the piece with first == 0. hit (may be NULL) says what a fault
 * did. Duplicates are drawn from the message's key (c->id, c->msgs: the caller sets msgs to
 * the message's number) for every hop, so a piece carries those of the hops before it too.
 * Jitter and the per-connection FIFO clamp are the caller's, once per message at the route's
 * end (as model_message adds them after the trains); a link's corruption costs no time (the
 * receiver flips the bits); loss recovery and reordering are the whole route's: a reserved hop
 * with one of them, or a degrade that sets loss, is refused (-EOPNOTSUPP; such a route is
 * replayed: fst_reserve_front below). Counts msgs, bytes, packets and queueing on each
 * reserved link.
 * Returns 0; 1 when a fault failed the message (retries exhausted, a reset) or the connection
 * had failed already (RC: later messages fail too): out->last_ns is then when, hit->fault
 * which (-1: the earlier failure); -EINVAL (a bad range or path), -EOPNOTSUPP, -EDEADLK.
 */
int fst_reserve_hops(struct fst_view *v, struct fst_conn *c, int first, int n, uint64_t bytes,
		     int64_t post_ns, const struct model_stamp *in, struct model_stamp *out,
		     struct fst_hit *hit);

/*
 * A route whose loss recovery or reordering spans both hosts' pieces (scale-out.md section 4,
 * "Loss across hosts"): the receiving host replays the whole route, model_message's attempts
 * over every hop, from the sender's piece as it stood at the post. The sender reserves its
 * hops for the first attempt (fst_reserve_front) and sends this front with the message; the
 * receiver replays (fst_reserve_rest), commits its own hops and sends back what the
 * retransmissions did to the sender's (struct fst_back), which the sender commits on the ACK
 * (fst_commit_back); a failed message's counters the receiver counts itself, whatever the hop
 * (its sender may end before the ACK). Times are this host's clock; the caller converts them
 * for the wire.
 */
struct fst_front {
	int64_t post_ns;			      /* the post, on the sender's clock */
	int whole_outages; /* the sender left its hops' outages to the replay (it asked for it) */
	int64_t delay_ns;  /* else: the outages' delay in the sender's piece */
	int64_t host_busy;			      /* the NIC's host stage, before the message */
	int64_t busy[MODEL_MAX_HOPS];		      /* hops [0, split), before the message */
	struct model_loss_state loss[MODEL_MAX_HOPS]; /* ... and their Markov states */
	uint64_t degrades[FAULT_MAX / 64];	      /* degrades in force on them at the post */
};
struct fst_back {
	int64_t host_busy;			      /* hops [0, split): the replay's commits */
	int64_t busy[MODEL_MAX_HOPS];
	struct model_loss_state loss[MODEL_MAX_HOPS]; /* their Markov states after every attempt */
	uint64_t expect[MODEL_MAX_HOPS]; /* ... to be taken if the link's state still counts this
					    many packets (no other message crossed it since) */
	struct model_msg counts;	 /* lost, timeouts, retx, duplicates, reordered, failed,
					    fail_hop: for the sender to count on its first hop */
};
/*
 * Does this route need the replay? 1 if a hop has loss or reordering, or a degrade fault of the
 * plan (any window) sets loss on one of its links; else 0. Lock-free.
 */
int fst_route_replayed(const struct fst_view *v, const struct fst_conn *c);
/*
 * The sender's piece of a replayed route: fst_reserve_hops(v, c, 0, split, ...) for the first
 * attempt, its hops' loss and reordering allowed (their Markov chains advance over the first
 * attempt's packets), and the front filled: the busy-until and Markov states before the
 * message, the degrades in force. replay: the sender asks the receiver to replay (the route
 * needs it: fst_route_replayed), so the outages of its hops are left to the replay, which
 * meets them over every attempt (front->whole_outages); otherwise they apply here and the
 * front carries their delay. Returns as fst_reserve_hops.
 */
int fst_reserve_front(struct fst_view *v, struct fst_conn *c, int split, uint64_t bytes,
		      int64_t post_ns, int replay, struct model_stamp *out,
		      struct fst_front *front, struct fst_hit *hit);
/*
 * The receiver's replay: model_message over the whole route, the sender's hops [0, split) with
 * the front's busy-until, Markov states and degrades (times on this host's clock), this host's
 * hops with their own state and the degrades in force when the message reached them (in->first_ns);
 * then the outages, as fst_reserve meets them: of every hop from the post (whole_outages), or
 * the sender's delay and this host's hops' outages; commits this host's hops only, counts
 * their queueing and the triggers on them, and fills *back. c->mc (the FIFO clamp, the jitter
 * scores) is the receiver's. 0 with *out (failed or not: out->failed), -EINVAL, -EDEADLK.
 * -EPROTO, before anything is committed, for a front that does not give the stamp *in (the
 * sender's first attempt, recomputed from it) or whose degrades name no degrade fault here.
 */
int fst_reserve_rest(struct fst_view *v, struct fst_conn *c, int split, uint64_t bytes,
		     const struct fst_front *front, const struct model_stamp *in,
		     struct model_msg *out, struct fst_back *back, struct fst_hit *hit);
/* The sender, on the ACK of a replayed message: its hops' commits (busy-until raised, Markov
 * states taken where no other message crossed since) and its counters. -EINVAL for a bad split. */
int fst_commit_back(struct fst_view *v, struct fst_conn *c, int split, const struct fst_back *b);
/*
 * The fidelity monitor: a receive on a path whose last hop is link completed late_ns after the
 * model's time; early: before the soonest the model could ever give it (fst_floor_ns, from the
 * sender's post time), or before the model's time (late_ns < 0). An early one is only counted.
 */
void fst_record_lateness(struct fst_shm *shm, uint32_t link, int64_t late_ns, int early);
/* The same for a delivery of a connection between hosts (late_ns >= 0), also counted apart: on
 * the link, and by the sending host (from_host < FST_MAX_HOSTS; another is counted on the link
 * only). */
void fst_record_xlateness(struct fst_shm *shm, uint32_t link, int64_t late_ns, uint32_t from_host);
/* The deliveries here from host h (fst_record_xlateness), or NULL (h beyond FST_MAX_HOSTS). */
const struct fst_xhost *fst_xhost(const struct fst_shm *shm, uint32_t h);
/* n packets of messages whose last hops this host reserved were corrupted on purpose (the
 * receiver of a connection between hosts flips them): counted on link. */
void fst_count_corrupted(struct fst_shm *shm, uint32_t link, uint64_t n);
/*
 * The least time (ns from its post) the model can give a message of bytes on this route, on
 * this fabric, whatever the load: an idle path without jitter, impairments or fault delays
 * (model_ideal_ns), each hop at the fastest rate a degrade fault may set on it. 0 for a route
 * that does not fit the fabric.
 */
int64_t fst_floor_ns(const struct fst_view *v, const uint32_t *path, int npath,
		     const struct model_nic *nic, enum model_switching sw, uint64_t bytes);
/* A histogram's bucket for v ns (FST_LATE_BUCKETS or FST_QUEUE_BUCKETS of them: nbuckets). */
int fst_bucket(uint64_t v, int nbuckets);
/*
 * The pct-th percentile of the n values counted in histogram h[nbuckets] (fst_bucket's
 * buckets), as an upper bound: the top of the bucket that holds it (2^b; 0 for bucket 0).
 * The last bucket also counts everything above its top: there the bound is max, the
 * largest value counted, where that is higher. 0 when n is 0.
 */
uint64_t fst_hist_le(const uint64_t *h, int nbuckets, uint64_t n, unsigned pct, uint64_t max);

/*
 * Payload bytes that have crossed each link by now_ns, into bytes[nlinks]: its byte
 * counter (counted when a message is reserved, maybe long before it is on the wire)
 * less the backlog it still has reserved past now_ns, (busy_until - now_ns) at its
 * payload rate (mtu / (mtu + hdr_bytes) of its rate), at least 0. An estimate while a
 * link has a backlog (a message's extra header bytes, retransmissions and the gaps
 * between reservations make it low), exact once it has none. Unlimited links count
 * every byte at once. Reads without the lock (the daemon must not wait for it).
 * Returns how many links still have a backlog.
 */
uint32_t fst_crossed(const struct fst_shm *shm, int64_t now_ns, uint64_t *bytes);

#endif /* SF_FSTATE_H */
