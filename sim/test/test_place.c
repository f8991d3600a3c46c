/* SPDX-License-Identifier: MIT */
/*
 * test_place.c - one fabric on several hosts (sim/scn/place.h): the default blocks, the
 * placement: section's rules and its exact errors, and each directed link's owner by
 * docs/scale-out.md section 4's table, on a leaf-spine and on a three-tier fabric.
 */
#include "sim/scn/place.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/scenario.h"
#include "sim/test/check.h"

#define EQ(got, want)                                                                              \
	CHECK((long long)(got) == (long long)(want), "%s = %lld, want %lld", #got,                 \
	      (long long)(got), (long long)(want))

/* scenarios/leafspine-8node-2to1.yaml's fabric, and what a test adds after it. */
#define LEAFSPINE                                                                                  \
	"fabric:\n"                                                                                \
	"  nodes: {count: 8, name: \"node{i}\"}\n"                                                 \
	"  switches: [{name: leaf0}, {name: leaf1}, {name: spine0}, {name: spine1}]\n"             \
	"  links:\n"                                                                               \
	"    - ends: [[node0, node1, node2, node3], leaf0]\n"                                      \
	"    - ends: [[node4, node5, node6, node7], leaf1]\n"                                      \
	"    - ends: [leaf0, [spine0, spine1]]\n"                                                  \
	"    - ends: [leaf1, [spine0, spine1]]\n"

static struct scenario *load(const char *yaml, char *err)
{
	struct scenario *sc = NULL;
	int rc = scn_load_buffer("t.yaml", yaml, strlen(yaml), &sc, err, SCN_ERR_LEN);
	CHECK(rc == 0 && sc, "load: %d %s\n%s", rc, err, yaml);
	return rc ? NULL : sc;
}

static struct placement *place(struct scenario *sc, int hosts)
{
	char err[SCN_ERR_LEN];
	struct placement *p = NULL;
	int rc = place_compute(sc->fabric, sc->placement, hosts, &p, err, sizeof(err));
	CHECK(rc == 0 && p, "place_compute(%d): %d %s", hosts, rc, err);
	return p;
}

/* The owner of the directed link from -> to (names as the dump writes them). */
static int owner(const struct scenario *sc, const struct placement *p, const char *from,
		 const char *to)
{
	const struct fabric *f = sc->fabric;
	for (int i = 0; i < fabric_nlinks(f); i++) {
		const struct fabric_link *l = fabric_link(f, (uint32_t)i);
		const struct fabric_ep *e[2] = {&l->from, &l->to};
		char name[2][96];
		for (int k = 0; k < 2; k++)
			if (e[k]->kind == FABRIC_EP_SWITCH)
				snprintf(name[k], 96, "%s", fabric_switch(f, e[k]->id)->name);
			else
				snprintf(name[k], 96, "%s/%d", fabric_node(f, e[k]->id)->name,
					 e[k]->nic);
		if (!strcmp(name[0], from) && !strcmp(name[1], to))
			return p->link_owner[i];
	}
	CHECK(0, "no link %s -> %s", from, to);
	return -1;
}

/* What a placement must be: the hosts of nodes 0..7 (all -1: not checked) and some owners. */
struct want {
	const char *yaml; /* the scenario */
	int hosts;
	int node_host[8];
	struct {
		const char *from, *to;
		int owner;
	} link[6];
};

static void check_place(const struct want *w)
{
	char err[SCN_ERR_LEN];
	struct scenario *sc = load(w->yaml, err);
	struct placement *p = sc ? place(sc, w->hosts) : NULL;
	for (int i = 0; p && i < 8 && i < p->nnodes; i++)
		CHECK(w->node_host[i] < 0 || p->node_host[i] == w->node_host[i],
		      "%d hosts: node %d on host %d, want %d", w->hosts, i, p->node_host[i],
		      w->node_host[i]);
	for (int k = 0; p && k < 6 && w->link[k].from; k++)
		CHECK(owner(sc, p, w->link[k].from, w->link[k].to) == w->link[k].owner,
		      "%d hosts: %s -> %s owned by %d, want %d", w->hosts, w->link[k].from,
		      w->link[k].to, owner(sc, p, w->link[k].from, w->link[k].to),
		      w->link[k].owner);
	placement_free(p);
	scenario_free(sc);
}

/* [h*N/H, (h+1)*N/H) for every N up to 64 and H up to N, against the definition. */
static void test_blocks(void)
{
	for (int n = 1; n <= 64; n++)
		for (int h = 1; h <= n; h++)
			for (int g = 0; g < h; g++)
				for (int i = g * n / h; i < (g + 1) * n / h; i++)
					CHECK(place_block_host(i, n, h) == g,
					      "node %d of %d on %d hosts: %d", i, n, h,
					      place_block_host(i, n, h));
	EQ(place_block_host(1000, 1001, 16), 15);
}

/*
 * Leaf-spine, 8 nodes. 2 hosts: nodes 0-3 | 4-7; every leaf's links to the spines (both
 * directions) are owned by the host of all its nodes. 3 hosts: blocks [0,2) [2,5) [5,8), so
 * leaf0 has 2 nodes on host 0 and 2 on host 1 (a tie: host 0), leaf1 1 on host 1 and 3 on
 * host 2 (host 2). Uplinks go with the sender, downlinks with the receiver.
 */
static void test_leafspine(void)
{
	static const struct want w[] = {
		{LEAFSPINE,
		 2,
		 {0, 0, 0, 0, 1, 1, 1, 1},
		 {{"node0/0", "leaf0", 0},
		  {"leaf1", "node5/0", 1},
		  {"leaf0", "spine1", 0},
		  {"spine1", "leaf0", 0},
		  {"spine0", "leaf1", 1},
		  {"leaf1", "spine0", 1}}},
		{LEAFSPINE,
		 3,
		 {0, 0, 1, 1, 1, 2, 2, 2},
		 {{"node2/0", "leaf0", 1},
		  {"leaf0", "node1/0", 0},
		  {"leaf0", "spine0", 0},
		  {"spine1", "leaf0", 0},
		  {"leaf1", "spine1", 2}}},
		{LEAFSPINE, 8, {0, 1, 2, 3, 4, 5, 6, 7}, {{"spine0", "leaf1", 4}}},
	};
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		check_place(&w[i]);
}

/* A placement: map over the blocks: node3 and node4 swap hosts, so each leaf has 3 nodes on
 * its block's host and 1 on the other; node6..node7 on host 0 turns leaf1's majority. */
static void test_map(void)
{
	static const struct want w[] = {
		{LEAFSPINE "placement: {node3: 1, node4: 0}\n",
		 2,
		 {0, 0, 0, 1, 0, 1, 1, 1},
		 {{"node3/0", "leaf0", 1},
		  {"leaf0", "node3/0", 1},
		  {"leaf0", "spine0", 0},
		  {"spine1", "leaf1", 1}}},
		{LEAFSPINE "placement:\n  node4..node5: 0\n  node6..node7: 0\n  node0: 1\n",
		 2,
		 {1, 0, 0, 0, 0, 0, 0, 0},
		 {{"leaf1", "spine0", 0}, {"leaf0", "spine0", 0}}},
	};
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		check_place(&w[i]);
	char err[SCN_ERR_LEN];
	struct scenario *sc = load(w[1].yaml, err);
	if (!sc)
		return;
	EQ(sc->placement->nrules, 3);
	/* the dump carries the rules and, after scenario_place, the hosts */
	const char *js;
	size_t jl;
	EQ(scenario_place(sc, 2, err, sizeof(err)), 0);
	EQ(scenario_json(sc, true, &js, &jl), 0);
	CHECK(strstr(js,
		     "\"placement\":[{\"nodes\":\"node4..node5\",\"first\":\"node4\",\"last\":"
		     "\"node5\",\"host\":0},") != NULL,
	      "placement in the dump: %s", js);
	CHECK(strstr(js,
		     "\"hosts\":{\"count\":2,\"node_host\":[1,0,0,0,0,0,0,0],\"link_owner\":[1,"
		     "1,0,0,") != NULL,
	      "hosts in the dump: %s", js);
	CHECK(strstr(js,
		     "\"nodes\":[[\"node1\",\"node2\",\"node3\",\"node4\",\"node5\",\"node6\","
		     "\"node7\"],[\"node0\"]]}") != NULL,
	      "hosts' nodes in the dump: %s", js);
	scenario_free(sc);
}

/*
 * Three tiers: 2 pods of 2 leaves of 2 nodes, a spine per pod, one core. 2 hosts put the pods
 * apart: spine-core links go with their pod (the spine is the lower switch: level 2 against
 * 3), leaf-spine links with their leaf. With node1 and node2 moved to host 1, pod 0 holds 2
 * nodes on each host: the tie goes to host 0.
 */
#define THREE_TIERS                                                                                \
	"fabric:\n"                                                                                \
	"  nodes: {count: 8, name: \"n{i}\"}\n"                                                    \
	"  switches: [{name: l0}, {name: l1}, {name: l2}, {name: l3}, {name: s0}, {name: s1},\n"   \
	"             {name: core}]\n"                                                             \
	"  links:\n"                                                                               \
	"    - ends: [[n0, n1], l0]\n"                                                             \
	"    - ends: [[n2, n3], l1]\n"                                                             \
	"    - ends: [[n4, n5], l2]\n"                                                             \
	"    - ends: [[n6, n7], l3]\n"                                                             \
	"    - ends: [[l0, l1], s0]\n"                                                             \
	"    - ends: [[l2, l3], s1]\n"                                                             \
	"    - ends: [[s0, s1], core]\n"

static void test_three_tiers(void)
{
	static const struct want w[] = {
		{THREE_TIERS,
		 2,
		 {0, 0, 0, 0, 1, 1, 1, 1},
		 {{"s0", "core", 0}, {"core", "s0", 0}, {"core", "s1", 1}, {"l3", "s1", 1}}},
		{THREE_TIERS "placement: {n1..n2: 1}\n",
		 2,
		 {0, 1, 1, 0, 1, 1, 1, 1},
		 {{"core", "s0", 0}, {"s0", "l0", 0}, {"l1", "s0", 0}, {"s1", "core", 1}}},
	};
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		check_place(&w[i]);
}

/* Every error of the section, exactly, at its place; then those that need H. */
static void test_errors(void)
{
	static const struct {
		const char *add, *want;
	} cases[] = {
		{"placement: [node0]\n",
		 "t.yaml:9:12: placement: expected a mapping of node names or ranges (first..last) "
		 "to host ranks, got a sequence"},
		{"placement: {node9: 0}\n", "t.yaml:9:13: placement: unknown node 'node9'"},
		{"placement: {node0..node9: 0}\n",
		 "t.yaml:9:13: placement: 'node0..node9': unknown node 'node9'"},
		{"placement: {node5..node2: 0}\n",
		 "t.yaml:9:13: placement: 'node5..node2': node5 comes after node2 in the fabric's "
		 "node order"},
		{"placement: {leaf0: 0}\n", "t.yaml:9:13: placement: unknown node 'leaf0'"},
		{"placement: {node0: -1}\n",
		 "t.yaml:9:20: placement: '-1' is not an integer in 0..1023 (a host rank)"},
		{"placement: {node0: x}\n",
		 "t.yaml:9:20: placement: 'x' is not an integer in 0..1023 (a host rank)"},
		{"placement:\n  node0..node3: 0\n  node3: 1\n",
		 "t.yaml:11:3: placement: 'node3': node node3 is placed already, by 'node0..node3' "
		 "(line 10)"},
	};
	char err[SCN_ERR_LEN], yaml[1024];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct scenario *sc = NULL;
		snprintf(yaml, sizeof(yaml), "%s%s", LEAFSPINE, cases[i].add);
		int rc = scn_load_buffer("t.yaml", yaml, strlen(yaml), &sc, err, sizeof(err));
		CHECK(rc == -EINVAL && !strcmp(err, cases[i].want), "case %zu: %d '%s', want '%s'",
		      i, rc, err, cases[i].want);
		scenario_free(sc);
	}
	struct scenario *sc = NULL;
	const char *ideal = "fabric: {kind: ideal}\nplacement: {node0: 0}\n";
	scn_load_buffer("t.yaml", ideal, strlen(ideal), &sc, err, sizeof(err));
	CHECK(!strcmp(err,
		      "t.yaml:2:12: placement: the ideal fabric makes its nodes on demand; "
		      "placement needs a fabric that lists them"),
	      "ideal: %s", err);
	scenario_free(sc);

	struct placement *p = NULL;
	sc = load(LEAFSPINE "placement: {node0..node1: 2}\n", err);
	if (!sc)
		return;
	EQ(place_compute(sc->fabric, sc->placement, 2, &p, err, sizeof(err)), -EINVAL);
	CHECK(!strcmp(err,
		      "t.yaml:9:13: placement: 'node0..node1' on host 2, but there are 2 "
		      "hosts (0..1)"),
	      "host beyond H: %s", err);
	EQ(place_compute(sc->fabric, sc->placement, 9, &p, err, sizeof(err)), -EINVAL);
	CHECK(!strcmp(err, "--hosts 9: not in 1..8 (the fabric's 8 nodes, at most 1024)"),
	      "more hosts than nodes: %s", err);
	scenario_free(sc);
	sc = load(LEAFSPINE "placement: {node0..node3: 1}\n", err);
	if (!sc)
		return;
	EQ(place_compute(sc->fabric, sc->placement, 2, &p, err, sizeof(err)), -EINVAL);
	CHECK(!strcmp(err,
		      "t.yaml:9:12: placement: host 0 of 2 holds no node: every host needs "
		      "one"),
	      "empty host: %s", err);
	EQ(p == NULL, 1);
	scenario_free(sc);
	sc = load("fabric: {kind: ideal}\n", err);
	if (!sc)
		return;
	EQ(place_compute(sc->fabric, NULL, 2, &p, err, sizeof(err)), -EINVAL);
	CHECK(!strcmp(err,
		      "--hosts 2: the ideal fabric makes its nodes on demand; placing nodes "
		      "on hosts needs a fabric that lists them"),
	      "ideal: %s", err);
	scenario_free(sc);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_blocks),      CHECK_CASE(test_leafspine), CHECK_CASE(test_map),
	CHECK_CASE(test_three_tiers), CHECK_CASE(test_errors),
};

CHECK_MAIN(cases)
