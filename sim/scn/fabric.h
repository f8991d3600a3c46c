/* SPDX-License-Identifier: MIT */
/*
 * fabric.h - the emulated fabric's description: nodes, their NICs, switches,
 * links and the paths between NICs.
 *
 * Two kinds:
 *  - *ideal* (the default, and `kind: ideal` in a scenario): no latency,
 *    unlimited bandwidth, any number of nodes, created on first use
 *    (op=hello), each with nics_per_node NICs named "<node>-nic<i>". Its NICs
 *    report speed_mbps 200000 (200 Gb/s) only because NCCL's tuner wants a
 *    number; nothing in the ideal fabric is throttled to it. The number is
 *    about what the emulation carries (its host copies run at some 16 GB/s):
 *    told 400 Gb/s, NCCL chose LL on 4 channels up to 1 MiB, which through
 *    host memory ran slower than its Socket transport there. It has no links:
 *    every path has 0 hops.
 *  - *explicit* (built from a scenario file by sim/scn/scenario.c through the
 *    builder calls below): a fixed set of nodes with 1..8 NICs each,
 *    switches, and links (cables) NIC-switch, switch-switch or NIC-NIC. Every
 *    cable is two directed links with their own struct model_link: directed
 *    link id 2c is cable c's a->b direction, 2c+1 its b->a direction. A NIC
 *    has exactly one cable.
 *
 * Hop latency. A directed link's model latency is its own latency_ns
 * (propagation) plus the forwarding latency (latency_ns) of the switch it
 * enters, if it enters one: with the defaults a NIC->switch hop costs 10 + 130
 * ns, a switch->NIC hop 10 ns, so a one-switch path has 150 ns.
 *
 * Paths. fabric_path() gives the route from one NIC to another as a struct
 * model_path: shortest in hops; where several next hops are equally short a
 * switch takes, among its links that lie on a shortest path (in link-id
 * order), the one at position (destination NIC's gid) mod (their number) --
 * destination-based spreading like an InfiniBand forwarding table, so traffic
 * to different NICs spreads over parallel uplinks and every process computes
 * the same path. A NIC to itself is 0 hops (loopback in the NIC); two NICs of
 * one node go through the switch like any other pair. Every NIC must reach
 * every other one in at most MODEL_MAX_HOPS hops (fabric_finish checks).
 *
 * What a NIC reports in op=hello: speed_mbps is the rate of its uplink
 * (NIC->switch direction; an unlimited one reports 200000), latency_ns the
 * latency to a typical peer: the median (the lower one of an even count),
 * over the other nodes (at most 256 of them, evenly spaced by id), of the
 * model's uncontended time of a zero-byte message (model_ideal_ns: o_send,
 * the hops' latencies and header bytes, o_recv) to that node's NIC of the
 * same index (or index mod its NIC count). A node alone measures to its own
 * NICs.
 *
 * Settings go through the parameter table (sim/scn/param.h), so daemon flags,
 * scenario files and the dump validate and print them the same way.
 *
 * Errors are 0 or a negative errno, with a reason naming the bad value in a
 * caller's err buffer (FABRIC_ERR_LEN is enough).
 */
#ifndef SF_FABRIC_H
#define SF_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/core/model.h"

#define FABRIC_NAME_MAX 63 /* node and switch names: 1..63 of [A-Za-z0-9._-] */
#define FABRIC_NIC_NAME_MAX (FABRIC_NAME_MAX + 8) /* "<node>-nic<i>" */
#define FABRIC_MAX_NICS 8
#define FABRIC_MAX_NODES 4096 /* a bound on what clients can make the daemon allocate (a power of 2) */
/* Node ids: slot + generation * FABRIC_MAX_NODES, below 2^30 (the plugin's bound). */
#define FABRIC_NODE_GENS (1 << 18)
#define FABRIC_MAX_SWITCHES 1024
#define FABRIC_MAX_CABLES 65536 /* directed links: twice that */
#define FABRIC_MAX_PORTS 1024
#define FABRIC_ERR_LEN 512
#define FABRIC_TYPICAL_PEERS 256 /* peers sampled for a NIC's reported latency */

/* The reported speed of an ideal (or unlimited) NIC: NCCL's tuning stand-in, not a limit. */
#define FABRIC_IDEAL_SPEED_MBPS 200000

/* Fabric-wide settings (scope PARAM_FABRIC of sim/scn/param.h). */
struct fabric_config {
	int64_t nics_per_node; /* ideal: NICs on every node */
	int64_t speed_mbps;    /* ideal: reported by every NIC */
	int64_t latency_ns;    /* ideal: reported by every NIC */
	uint64_t seed;	       /* every random draw of the models derives from it */
	int64_t switching;     /* enum model_switching, for every path */
};

/* A switch's settings (scope PARAM_SWITCH). */
struct fabric_switch_cfg {
	int64_t ports;		/* links it can take */
	uint64_t port_rate_bps; /* default rate of its links; 0: the links' own */
	int64_t latency_ns;	/* forwarding latency, added to every hop into it */
};

/* Every parameter at its default. */
void fabric_config_init(struct fabric_config *cfg);
/* Parse value and set parameter name; -ENOENT (unknown name) or -EINVAL (bad value),
 * with "name: reason" in err. */
int fabric_config_set(struct fabric_config *cfg, const char *name, const char *value, char *err,
		      size_t errlen);
/* Every field within its range: 0 or -EINVAL naming the first that is not. */
int fabric_config_check(const struct fabric_config *cfg, char *err, size_t errlen);

struct fabric_nic {
	char name[FABRIC_NIC_NAME_MAX + 1];
	int index; /* within its node */
	int node;  /* its node's id */
	int gid;   /* 0, 1, ... over all NICs, in node order */
	uint64_t guid; /* unique in the fabric, stable for a node id and index */
	int64_t speed_mbps;
	int64_t latency_ns;
	int link_out, link_in; /* directed link ids from and to it; -1 (ideal) */
	struct model_nic model; /* host limit, overheads, timeouts; derived fields filled */
};

struct fabric_node {
	char name[FABRIC_NAME_MAX + 1];
	int id; /* 0, 1, ... in order of creation; never reused */
	int nnics;
	int tag; /* the builder's cookie (scenario: where it was defined) */
	struct fabric_nic nic[FABRIC_MAX_NICS];
};

struct fabric_switch {
	char name[FABRIC_NAME_MAX + 1];
	int id;
	int tag;
	struct fabric_switch_cfg cfg;
	int ports_used;
	int nic_links, switch_links;	/* cables to NICs, to switches */
	uint64_t nic_bps, switch_bps; /* summed rates out of it toward NICs, toward switches */
};

enum fabric_ep_kind { FABRIC_EP_NIC = 0, FABRIC_EP_SWITCH = 1 };

/* A link's end: a NIC (node id, index) or a switch (id). */
struct fabric_ep {
	enum fabric_ep_kind kind;
	int id;	 /* node id or switch id */
	int nic; /* NIC index (FABRIC_EP_NIC) */
};

/* One direction of a cable. */
struct fabric_link {
	uint32_t id; /* 2 * cable + 0 (a->b) or 1 (b->a): the model's link id */
	int cable;
	int tag;
	struct fabric_ep from, to;
	struct model_link param; /* as configured */
	struct model_link model; /* what the model uses: hop latency, derived fields */
};

struct fabric;

/* The ideal fabric with cfg's settings (checked first). */
int fabric_new_ideal(const struct fabric_config *cfg, struct fabric **out, char *err,
		     size_t errlen);
/* Frees the fabric, its nodes, switches, links and the memory handed over with fabric_adopt.
 * NULL-safe. */
void fabric_free(struct fabric *f);

/* "ideal" or "explicit" */
const char *fabric_kind(const struct fabric *f);
bool fabric_is_ideal(const struct fabric *f);
const struct fabric_config *fabric_config(const struct fabric *f);
uint64_t fabric_seed(const struct fabric *f);
void fabric_set_seed(struct fabric *f, uint64_t seed);
/* The scenario file it was loaded from and its name (NULL if none). */
const char *fabric_scenario(const struct fabric *f);
const char *fabric_name(const struct fabric *f);

int fabric_nnodes(const struct fabric *f); /* in the table now */
/* The table's slots (ids of explicit fabrics are 0..slots-1), and the node in one (or NULL:
 * the ideal fabric forgot it). */
int fabric_node_slots(const struct fabric *f);
const struct fabric_node *fabric_node_at(const struct fabric *f, int slot);
/* The ideal fabric forgets a node (its name, its slot; pointers to it dangle): 0, or -ENOENT
 * (no such node, or not the ideal fabric). Its slot's next node gets a new id. */
int fabric_node_forget(struct fabric *f, int id);
int fabric_nnics(const struct fabric *f); /* over all nodes */
/* Node by id, or NULL. Node pointers stay valid until fabric_free (or fabric_node_forget). */
const struct fabric_node *fabric_node(const struct fabric *f, int id);
/* Node by name, or NULL. */
const struct fabric_node *fabric_node_find(const struct fabric *f, const char *name);
/*
 * Node by name, created if the fabric makes nodes on demand (the ideal one
 * does). 0; -EINVAL (bad name); -ENOENT (an explicit fabric without it: err
 * names the node and the scenario file); -ENOSPC (FABRIC_MAX_NODES in the table);
 * -ENOMEM.
 */
int fabric_node_get(struct fabric *f, const char *name, const struct fabric_node **out, char *err,
		    size_t errlen);
/* NIC index of node, or NULL if out of range. */
const struct fabric_nic *fabric_nic(const struct fabric_node *node, int index);
/* NIC by gid, or NULL. */
const struct fabric_nic *fabric_nic_by_gid(const struct fabric *f, int gid);

int fabric_nswitches(const struct fabric *f);
const struct fabric_switch *fabric_switch(const struct fabric *f, int id);
const struct fabric_switch *fabric_switch_find(const struct fabric *f, const char *name);
/* Directed links: ids 0..fabric_nlinks()-1. */
int fabric_nlinks(const struct fabric *f);
const struct fabric_link *fabric_link(const struct fabric *f, uint32_t id);

/*
 * The path from NIC (src_node, src_nic) to NIC (dst_node, dst_nic), written to
 * *out: hop[i] points into f's links (valid until fabric_free), link_id[i]
 * is its id, switching the fabric's. 0; -ENODEV (no such node or NIC);
 * -EHOSTUNREACH (no path: only before fabric_finish has checked). The ideal
 * fabric's paths have 0 hops.
 */
int fabric_path(const struct fabric *f, int src_node, int src_nic, int dst_node, int dst_nic,
		struct model_path *out, char *err, size_t errlen);
/* Sum of the hops' model latency_ns. */
int64_t fabric_path_latency(const struct model_path *p);

/* Is name a valid node or switch name? 0, or -EINVAL with the reason (the value quoted, escaped). */
int fabric_name_check(const char *name, char *err, size_t errlen);

/* A top-level member the dump carries for its caller (a scenario's sections, sim/scn/scenario.h):
 * its name and a JSON value (NULL: null). */
struct fabric_json_member {
	const char *name;
	const char *json;
};

/*
 * The resolved fabric as one line of JSON (printable ASCII, no newline):
 * kind, scenario, name, seed, config, the n members of extra (in order),
 * nodes with their NICs, switches, directed links, and every NIC-to-NIC path
 * when there are at most 1024 ordered pairs. The text is cached in f: refresh
 * rebuilds it (the ideal fabric grows), otherwise the last one is returned;
 * extra is read only when it is built, so a caller passes the same members
 * every time. 0 or -ENOMEM.
 */
int fabric_json(struct fabric *f, const struct fabric_json_member *extra, int n, bool refresh,
		const char **text, size_t *len);

/* ---- building an explicit fabric (sim/scn/scenario.c) ---------------------- */

/* tag: an opaque cookie the builder keeps per object and reports errors with. */
int fabric_new_explicit(const struct fabric_config *cfg, struct fabric **out, char *err,
			size_t errlen);
/* Name and scenario path (copied). */
int fabric_set_source(struct fabric *f, const char *scenario, const char *name,
		      const char *description);
/* Hand memory over (jitter tables): freed with the fabric. 0 or -ENOMEM (then freed now). */
int fabric_adopt(struct fabric *f, void *mem);
/* Names must be new among nodes and switches (-EEXIST otherwise); nic must pass
 * model_nic_resolve (-EINVAL with its "key: reason"). */
int fabric_add_node(struct fabric *f, const char *name, int nnics, const struct model_nic *nic,
		    int tag, char *err, size_t errlen);
int fabric_add_switch(struct fabric *f, const char *name, const struct fabric_switch_cfg *cfg,
		      int tag, char *err, size_t errlen);
/*
 * A cable between a and b with a model per direction (ab: a->b). Refused:
 * an end that does not exist (-ENODEV), a NIC that already has its cable
 * (-EBUSY, *other_tag its tag), a switch without a free port (-ENOSPC), both
 * ends the same or a model that fails model_link_resolve (-EINVAL: its
 * "key: reason (a -> b)"), too many cables (-ENOSPC).
 */
int fabric_add_link(struct fabric *f, const struct fabric_ep *a, const struct fabric_ep *b,
		    const struct model_link *ab, const struct model_link *ba, int tag,
		    int *other_tag, char *err, size_t errlen);
/*
 * Check and resolve: every NIC has its cable (else -ENOTCONN, *bad_tag its
 * node's tag), every NIC reaches every other (-EHOSTUNREACH, *bad_tag -1)
 * within MODEL_MAX_HOPS hops (-ELOOP); then the hop latencies, derived
 * rates, routes and the NICs' reported speed and latency. After this the
 * fabric is read-only.
 */
int fabric_finish(struct fabric *f, int *bad_tag, char *err, size_t errlen);

/*
 * Hazards of a finished fabric that load but will probably hurt a job, each
 * reported as one line through warn(ctx, msg) naming the link and the
 * parameters (the daemon logs them as WARN at load, --check too):
 *  - a lossy link crossed by traffic from a NIC with timeout_exp 0 (the
 *    IBA's infinite ACK timeout): a lost last packet is never recovered, so
 *    the message never completes and the job hangs;
 *  - a lossy link where a packet is likely to exhaust its sender's
 *    retry_count: lost on its first send and on every retry, at least one
 *    packet in 10^9 (FABRIC_LINT_FAIL_RATE), estimated from the link's
 *    long-run loss rate (bursts make it likelier still); the message and its
 *    connection then fail;
 *  - not a hazard (not counted): a lossy link crossed by traffic from a NIC
 *    whose ACK timeout is a second or more (timeout_exp >= FABRIC_LINT_SLOW_EXP,
 *    NCCL's default 20 among them): each lost packet that ends a message
 *    stalls it that long, which looks like a hang: one line for all such
 *    links, naming the first.
 * A link counts as crossed by the NICs whose routes use it; in fabrics of
 * more than FABRIC_LINT_EXACT_NICS NICs, a link that is not a NIC's uplink
 * is taken to be crossed by every NIC. At most FABRIC_LINT_LINES lines per
 * kind of hazard, then one that counts the rest. Returns the number of
 * hazardous links (0: none), or -ENOMEM.
 */
#define FABRIC_LINT_FAIL_RATE 1e-9
#define FABRIC_LINT_EXACT_NICS 1024
#define FABRIC_LINT_LINES 8
#define FABRIC_LINT_SLOW_EXP 18 /* 4.096 us x 2^18 = 1.07 s */
int fabric_lint(const struct fabric *f, void (*warn)(void *ctx, const char *msg), void *ctx);

#endif /* SF_FABRIC_H */
