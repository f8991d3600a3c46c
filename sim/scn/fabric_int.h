/* SPDX-License-Identifier: MIT */
/*
 * fabric_int.h - the fabric's insides, shared by the files that make it
 * (fabric.c: building, names, paths) and the one that reports on it
 * (fabric_out.c: hazards and the JSON dump). Nothing else includes it.
 */
#ifndef SF_FABRIC_INT_H
#define SF_FABRIC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/scn/fabric.h"

enum fabric_kind_id { KIND_IDEAL, KIND_EXPLICIT };

struct adopted {
	struct adopted *next;
	void *mem;
};

struct fabric {
	enum fabric_kind_id kind;
	struct fabric_config cfg;
	char *scenario, *name, *description;
	int nnodes, cap, nnics; /* nnodes: slots used so far (nodes[] may hold NULLs: forgotten) */
	int nlive;		/* nodes in the table now */
	struct fabric_node **nodes; /* each allocated once, so pointers stay put */
	uint32_t *gen;		    /* per slot: how many nodes it has held before (ideal only) */
	int nswitches, swcap;
	struct fabric_switch **switches;
	int nlinks, lcap; /* directed */
	struct fabric_link *links;
	/* names of nodes and switches: open addressing, who = node id or -(switch id) - 1 */
	int *names;
	size_t names_cap, names_used;
	bool finished;
	/* after fabric_finish: */
	const struct fabric_nic **by_gid;
	uint16_t *dist; /* nswitches x nswitches hop counts between switches */
	int *adj_off;	/* switch u's links to switches: adj[adj_off[u] .. adj_off[u+1]) */
	uint32_t *adj;
	struct adopted *adopted;
	char *json;
	size_t json_len;
};

/* "n0/1" for a NIC, the name for a switch. Returns buf. */
const char *fabric_ep_name(const struct fabric *f, const struct fabric_ep *e, char *buf,
			   size_t cap);
/* The route from NIC a to NIC b, or -EHOSTUNREACH / -ELOOP with the reason. Needs the routing
 * tables (fabric_finish). */
int fabric_route(const struct fabric *f, const struct fabric_nic *a, const struct fabric_nic *b,
		 struct model_path *out, char *err, size_t errlen);

#endif /* SF_FABRIC_INT_H */
