/* SPDX-License-Identifier: MIT */
/*
 * place.h - one fabric on several hosts: which host runs each emulated node, and which host
 * owns each directed link (docs/scale-out.md, sections 2 and 4).
 *
 * Nodes. N nodes on H hosts: host h holds the consecutive block of node ids
 * [h*N/H, (h+1)*N/H) (integer division), unless the scenario's `placement:` section
 * (a map of a node name, or a range "first..last" in the fabric's node order, to a host
 * rank) puts a node elsewhere; nodes it does not name keep their block. Every host holds
 * at least one node.
 *
 * Links. A directed link out of a NIC (an uplink, or a NIC-to-NIC cable) is owned by the
 * host of the sending node; a link into a NIC (a downlink) by the host of the receiving
 * node, so that every flow into one port is reserved in one place; a switch-to-switch
 * link by the host holding most nodes under the link's lower switch, ties to the lowest
 * host rank. A switch's level is its distance in hops from the nearest NIC (a leaf: 1);
 * the lower switch of a link is the end of lower level (equal levels: the lower switch
 * id); the nodes under a switch are those with a NIC at a distance of exactly its level
 * (a leaf's: the nodes cabled to it; a spine's: every node of the leaves below it).
 *
 * Every host computes the same placement from (the fabric, H, the map): it is a pure
 * function of them. Errors are 0 or a negative errno with the reason in err.
 */
#ifndef SF_PLACE_H
#define SF_PLACE_H

#include <stddef.h>

#include "sim/scn/fabric.h"

#define PLACE_MAX_HOSTS 1024

/* One entry of a placement: map: nodes first..last (ids) on host, written at line:col. */
struct place_rule {
	int first, last;
	int host;
	int line, col;
	char key[2 * FABRIC_NAME_MAX + 3]; /* as written: "node4" or "node4..node7" */
};

/* A scenario's placement: section, checked against its fabric's names (not against H). */
struct place_map {
	char *file;    /* the scenario, for errors */
	int line, col; /* the section */
	int nrules;
	struct place_rule *rule;
};
void place_map_free(struct place_map *m);

/* Where everything is, for H hosts. */
struct placement {
	int nhosts, nnodes, nlinks;
	int *node_host;	 /* by node id */
	int *link_owner; /* by directed link id */
};

/* Host of node i of n on h hosts by the default consecutive blocks (0 <= i < n, 1 <= h <= n). */
int place_block_host(int i, int n, int h);

/*
 * The placement of f's nodes and links on nhosts hosts, the map's rules (may be NULL) over
 * the default blocks, into a new *out (placement_free). Errors: -EINVAL for an ideal
 * fabric (its nodes come and go), nhosts outside 1..PLACE_MAX_HOSTS or above the number of
 * nodes ("--hosts N: ..."), a rule's host >= nhosts or a host left without a node
 * ("file:line:column: placement: ..."); -ENOMEM.
 */
int place_compute(const struct fabric *f, const struct place_map *m, int nhosts,
		  struct placement **out, char *err, size_t errlen);
void placement_free(struct placement *p);

/*
 * The placement as one JSON object, for the dump: {"count": H, "node_host": [host by node
 * id], "link_owner": [host by directed link id], "nodes": [[names of host 0's nodes], ...]}.
 * malloc'd; NULL when out of memory.
 */
char *placement_json(const struct placement *p, const struct fabric *f);
/* The map's rules as a JSON array [{"nodes": key, "first", "last", "host"}, ...]; NULL: OOM. */
char *place_map_json(const struct place_map *m, const struct fabric *f);

#endif /* SF_PLACE_H */
