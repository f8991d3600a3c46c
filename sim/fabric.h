/* SPDX-License-Identifier: MIT */
/*
 * fabric.h - the emulated fabric's description: nodes and their NICs.
 *
 * For now only the built-in *ideal* fabric exists: no latency, unlimited
 * bandwidth, any number of nodes, created on first use (op=hello), each with
 * nics_per_node NICs named "<node>-nic<i>". Its NICs report speed_mbps
 * 400000 (400 Gb/s, an NDR-class port) only because NCCL's tuner wants a
 * number; nothing in the ideal fabric is throttled to it.
 *
 * Settings go through one parameter table (fabric_params: name, unit, min,
 * max, default), so the daemon's flags, a later scenario file and any dump
 * validate and print them the same way. A scenario loader will add explicit
 * nodes and links on top of this; the node/NIC structs are already what it
 * needs to fill.
 *
 * Errors are 0 or a negative errno, with a reason naming the bad value in a
 * caller's err buffer (FABRIC_ERR_LEN is enough).
 */
#ifndef SF_FABRIC_H
#define SF_FABRIC_H

#include <stddef.h>
#include <stdint.h>

#define FABRIC_NAME_MAX 63 /* node names: 1..63 of [A-Za-z0-9._-] */
#define FABRIC_NIC_NAME_MAX (FABRIC_NAME_MAX + 8) /* "<node>-nic<i>" */
#define FABRIC_MAX_NICS 8
#define FABRIC_MAX_NODES 4096 /* a bound on what clients can make the daemon allocate */
#define FABRIC_ERR_LEN 256

/* The reported speed of an ideal NIC: NCCL's tuning stand-in, not a limit. */
#define FABRIC_IDEAL_SPEED_MBPS 400000

/* Fabric-wide settings; fields are int64_t so the parameter table can address them alike. */
struct fabric_config {
	int64_t nics_per_node;
	int64_t speed_mbps; /* reported by every NIC */
	int64_t latency_ns; /* reported by every NIC */
};

struct fabric_param {
	const char *name;
	const char *unit; /* "count", "Mbit/s", "ns" */
	int64_t min, max, def;
	size_t offset; /* into struct fabric_config */
	const char *doc;
};

extern const struct fabric_param fabric_params[];
extern const int fabric_nparams;

/* The entry called name, or NULL. */
const struct fabric_param *fabric_param_find(const char *name);
/* Every parameter at its default. */
void fabric_config_init(struct fabric_config *cfg);
/* Parse value (decimal integer) and set it; -ENOENT (unknown name) or -EINVAL (bad value). */
int fabric_config_set(struct fabric_config *cfg, const char *name, const char *value, char *err,
		      size_t errlen);
/* Every field within its min..max: 0 or -EINVAL naming the first that is not. */
int fabric_config_check(const struct fabric_config *cfg, char *err, size_t errlen);
int64_t fabric_config_get(const struct fabric_config *cfg, const struct fabric_param *p);

struct fabric_nic {
	char name[FABRIC_NIC_NAME_MAX + 1];
	int index; /* within its node */
	uint64_t guid; /* unique in the fabric, stable for a node id and index */
	int64_t speed_mbps;
	int64_t latency_ns;
};

struct fabric_node {
	char name[FABRIC_NAME_MAX + 1];
	int id; /* 0, 1, ... in order of creation; never reused */
	int nnics;
	struct fabric_nic nic[FABRIC_MAX_NICS];
};

struct fabric;

/* The ideal fabric with cfg's settings (checked first). */
int fabric_new_ideal(const struct fabric_config *cfg, struct fabric **out, char *err,
		     size_t errlen);
/* Frees the fabric and all its nodes. NULL-safe. */
void fabric_free(struct fabric *f);

/* "ideal" */
const char *fabric_kind(const struct fabric *f);
const struct fabric_config *fabric_config(const struct fabric *f);
int fabric_nnodes(const struct fabric *f);
/* Node by id, or NULL. Node pointers stay valid until fabric_free. */
const struct fabric_node *fabric_node(const struct fabric *f, int id);
/* Node by name, or NULL. */
const struct fabric_node *fabric_node_find(const struct fabric *f, const char *name);
/*
 * Node by name, created if the fabric makes nodes on demand (the ideal one
 * does). 0; -EINVAL (bad name); -ENOSPC (FABRIC_MAX_NODES reached); -ENOMEM.
 */
int fabric_node_get(struct fabric *f, const char *name, const struct fabric_node **out, char *err,
		    size_t errlen);
/* NIC index of node, or NULL if out of range. */
const struct fabric_nic *fabric_nic(const struct fabric_node *node, int index);

/* Is name a valid node name? 0, or -EINVAL with the reason (the value quoted, escaped). */
int fabric_name_check(const char *name, char *err, size_t errlen);

#endif /* SF_FABRIC_H */
