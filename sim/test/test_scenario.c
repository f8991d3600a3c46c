/* SPDX-License-Identifier: MIT */
/*
 * test_scenario.c - scenario files: every shipped one loads (with a few
 * exact facts about each), every kind of error gives its exact
 * "file:line:column: key: reason", and defaults, overrides and per-direction
 * models resolve as scenarios/README.md says.
 */
#include "sim/scn/scenario.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/scn/param.h"

#include "sim/test/check.h"

#define GBPS 1000000000ull

static struct scenario *load(const char *yaml, char *err)
{
	struct scenario *sc = NULL;
	int rc = scn_load_buffer("t.yaml", yaml, strlen(yaml), &sc, err, SCN_ERR_LEN);
	CHECK(rc == 0 && sc, "load: %d %s\n%s", rc, err, yaml);
	return rc ? NULL : sc;
}

static const struct fabric_link *link_between(const struct fabric *f, const char *from,
					      const char *to)
{
	for (int i = 0; i < fabric_nlinks(f); i++) {
		const struct fabric_link *l = fabric_link(f, (uint32_t)i);
		char a[96], b[96];
		const struct fabric_ep *e[2] = {&l->from, &l->to};
		char *out[2] = {a, b};
		for (int k = 0; k < 2; k++) {
			if (e[k]->kind == FABRIC_EP_SWITCH)
				snprintf(out[k], 96, "%s", fabric_switch(f, e[k]->id)->name);
			else
				snprintf(out[k], 96, "%s/%d", fabric_node(f, e[k]->id)->name,
					 e[k]->nic);
		}
		if (!strcmp(a, from) && !strcmp(b, to))
			return l;
	}
	return NULL;
}

static void test_shipped(void)
{
	char dirbuf[PATH_MAX], path[PATH_MAX + 300], err[SCN_ERR_LEN];
	const char *dir = check_scenarios_dir(dirbuf, sizeof(dirbuf));
	DIR *d = opendir(dir);
	CHECK(d != NULL, "open %s", dir);
	if (!d)
		return;
	int n = 0;
	bool seen_ideal = false, seen_hdr = false, seen_ls = false, seen_roce = false,
	     seen_lossy = false;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 5, ".yaml"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		struct scenario *sc = NULL;
		int rc = scn_load(path, &sc, err, sizeof(err));
		CHECK(rc == 0 && sc, "%s: %s", path, err);
		if (rc)
			continue;
		struct fabric *f = sc->fabric;
		n++;
		char base[256];
		snprintf(base, sizeof(base), "%.*s", (int)(len - 5), e->d_name);
		CHECK(!strcmp(fabric_name(f), base), "%s: name '%s' is the file's", path,
		      fabric_name(f));
		const char *js;
		size_t jl;
		CHECK(scenario_json(sc, false, &js, &jl) == 0 && jl > 0 && !strchr(js, '\n'),
		      "%s: json", path);
		/* Every NIC reaches every other one. */
		struct model_path p;
		for (int a = 0; a < fabric_nnics(f) && a < 16; a++)
			for (int b = 0; b < fabric_nnics(f) && b < 16; b++) {
				const struct fabric_nic *x = fabric_nic_by_gid(f, a),
							*y = fabric_nic_by_gid(f, b);
				CHECK(fabric_path(f, x->node, x->index, y->node, y->index, &p, err,
						  sizeof(err)) == 0,
				      "%s: path %d -> %d: %s", path, a, b, err);
			}
		if (!strcmp(base, "ideal")) {
			seen_ideal = true;
			CHECK(fabric_is_ideal(f) && fabric_config(f)->nics_per_node == 1, "ideal");
		} else if (!strcmp(base, "hdr-2node")) {
			seen_hdr = true;
			const struct fabric_node *n0 = fabric_node_find(f, "node0");
			CHECK(fabric_nnodes(f) == 2 && n0 && n0->nic[0].speed_mbps == 200000 &&
				      n0->nic[0].latency_ns >= 1000 && n0->nic[0].latency_ns <= 2000,
			      "hdr-2node: %lld ns", n0 ? (long long)n0->nic[0].latency_ns : -1LL);
		} else if (!strcmp(base, "leafspine-8node-2to1")) {
			seen_ls = true;
			const struct fabric_switch *l0 = fabric_switch_find(f, "leaf0"),
						   *l1 = fabric_switch_find(f, "leaf1");
			CHECK(fabric_nnodes(f) == 8 && l0 && l1 && l0->nic_bps == 2 * l0->switch_bps &&
				      l1->nic_bps == 2 * l1->switch_bps && l0->nic_links == 4,
			      "leafspine: 2:1");
			CHECK(fabric_path(f, 0, 0, 7, 0, &p, err, sizeof(err)) == 0 && p.nhops == 4,
			      "leafspine: across the spine");
		} else if (!strcmp(base, "roce-4node-jitter")) {
			seen_roce = true;
			const struct fabric_link *l = fabric_link(f, 0);
			CHECK(fabric_nnodes(f) == 4 && l->param.hdr_bytes == 82 &&
				      l->param.jitter.dist == MODEL_DIST_NORMAL,
			      "roce");
		} else if (!strcmp(base, "slow-lossy")) {
			seen_lossy = true;
			const struct fabric_link *l = fabric_link(f, 0);
			CHECK(l->param.loss.kind == MODEL_LOSS_BERNOULLI && l->param.rate_bps == 10 * GBPS,
			      "slow-lossy");
		}
		scenario_free(sc);
	}
	closedir(d);
	CHECK(n >= 20 && seen_ideal && seen_hdr && seen_ls && seen_roce && seen_lossy,
	      "%d scenarios loaded", n);
}

/* Every kind of error, with its exact message. */
static void test_errors(void)
{
	static const struct {
		const char *yaml, *err;
	} cases[] = {
		/* YAML syntax */
		{"fabric: {nodes: [a, b",
		 "t.yaml:2:1: yaml: did not find expected ',' or ']' (while parsing a flow sequence "
		 "at line 1)"},
		{"fabric:\n  nodes: {count: 2}\n bad: 1\n",
		 "t.yaml:3:2: yaml: did not find expected key (while parsing a block mapping at line "
		 "1)"},
		{"fabric:\n  nodes: *x", "t.yaml:2:10: yaml: found undefined alias"},
		{"fabric:\n  nodes: {names: [a, \xff]}\n", "t.yaml:2:22: yaml: invalid leading UTF-8 octet"},
		/* the document */
		{"", "t.yaml:1:1: document: the scenario is empty (it needs at least a fabric: section)"},
		{"# nothing\n",
		 "t.yaml:1:1: document: the scenario is empty (it needs at least a fabric: section)"},
		{"fabric: {nodes: {count: 2}}\n---\nfabric: {}",
		 "t.yaml:3:1: document: a scenario is one YAML document; a second one starts here"},
		{"[1, 2]",
		 "t.yaml:1:1: document: a scenario is a mapping of sections (name, description, seed, "
		 "fabric, faults, job, expect, placement), not a sequence"},
		{"seed: 1", "t.yaml:1:1: fabric: missing: a scenario needs a fabric: section"},
		/* unknown keys */
		{"fabrik: {}",
		 "t.yaml:1:1: fabrik: unknown top-level key (known: name, description, seed, fabric, "
		 "faults, job, expect, placement)"},
		{"fabric:\n  nodes: {count: 2}\n  switches: [{name: sw}]\n  links:\n    - ends: [all, "
		 "sw]\n      rat_gbps: 100\n",
		 "t.yaml:6:7: rat_gbps: unknown key in a link (known: ends, a_to_b, b_to_a, rate_gbps, "
		 "latency_ns, mtu, hdr_bytes, hdr_first_extra, hdr_last_extra, jitter, loss, reorder, "
		 "reorder_delay_ns, duplicate, corrupt; with a unit: rate, latency, "
		 "reorder_delay)"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {link: {loss.p: 0.1}}",
		 "t.yaml:3:21: loss.p: unknown key in defaults.link (known: rate_gbps, latency_ns, mtu, "
		 "hdr_bytes, hdr_first_extra, hdr_last_extra, jitter, loss, reorder, reorder_delay_ns, "
		 "duplicate, corrupt; with a unit: rate, latency, reorder_delay)"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {bogus: {}}",
		 "t.yaml:3:14: bogus: unknown key in defaults (known: link, nic, switch)"},
		{"fabric:\n  nodes: {names: [a], colour: red}",
		 "t.yaml:2:23: colour: unknown key in a nodes entry (known: names, count, name, first, "
		 "nics, nic)"},
		{"fabric:\n  nodes: {count: 2}\n  \"\": 1", "t.yaml:3:3: yaml: an empty key"},
		{"? ' '", "t.yaml:1:3: ' ': unknown top-level key (known: name, description, seed, "
			  "fabric, faults, job, expect, placement)"},
		{"\"it's\": 1",
		 "t.yaml:1:1: 'it\\x27s': unknown top-level key (known: name, description, seed, "
		 "fabric, faults, job, expect, placement)"},
		{"\"a: b\": 1",
		 "t.yaml:1:1: 'a: b': unknown top-level key (known: name, description, seed, fabric, "
		 "faults, job, expect, placement)"},
		{"fabric:\n  nodes: {count: 2}\n  nodes: {count: 3}",
		 "t.yaml:3:3: nodes: duplicate key (first at 2:3)"},
		{"fabric: {kind: ideal, seed: 3}",
		 "t.yaml:1:23: seed: goes at the top level of the scenario, not in fabric"},
		/* wrong types */
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {rate_gbps: [1]}}",
		 "t.yaml:3:32: rate_gbps: expected a rate in Gb/s, got a sequence"},
		{"fabric:\n  nodes: {names: [a, b]}\n  defaults: {link: {rate_gbps: }}",
		 "t.yaml:3:32: rate_gbps: expected a rate in Gb/s, got nothing (null)"},
		{"name: [x]\nfabric: {kind: ideal}", "t.yaml:1:7: name: expected a string, got a sequence"},
		{"fabric: [a]",
		 "t.yaml:1:9: fabric: expected a mapping (kind, nodes, switches, links, ...), got a "
		 "sequence"},
		{"fabric:\n  nodes: 3",
		 "t.yaml:2:10: nodes: expected a nodes mapping or a list of them, got the scalar '3'"},
		{"fabric:\n  nodes: {names: [\"a\\0b\"]}", "t.yaml:2:19: names: the value has a NUL byte"},
		/* out of range, bad values */
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {rate_gbps: 1000001}}",
		 "t.yaml:3:32: rate_gbps: '1000001' is not a rate in 0.001..1000000 Gb/s (or 0: "
		 "unlimited; a decimal, at most 9 places)"},
		/* the model's own cross-field rules, at the group */
		{"fabric:\n  nodes: {count: 2}\n  defaults:\n    link:\n      loss: {model: 4state, "
		 "p13: 0.5, p14: 0.75}",
		 "t.yaml:5:13: loss.p14: 0.75 with p13 0.5 leaves state 1 with probability 1.25 > 1"},
		{"fabric:\n  kind: ideal\n  nics_per_node: 9",
		 "t.yaml:3:18: nics_per_node: '9' is not an integer in 1..8 (count)"},
		{"seed: -1\nfabric: {kind: ideal}",
		 "t.yaml:1:7: seed: '-1' is not an integer in 0..18446744073709551615 (decimal, or hex "
		 "with 0x)"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {nic: {timeout_scale: 0}}",
		 "t.yaml:3:35: timeout_scale: '0' is not a fraction in 0.000001..1 (at most 6 decimal "
		 "places)"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {link: {loss: gilbert}}",
		 "t.yaml:3:27: loss.model: 'gilbert' is not one of none, bernoulli, ge, 4state"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {link: {loss: none, jitter: {dist: "
		 "normal, sd_ns: 5, corr: 1}}}",
		 "t.yaml:3:72: jitter.corr: '1' is not a number in 0..0.999999"},
		{"fabric:\n  nodes: {names: [a]}\n  kind: fancy",
		 "t.yaml:3:9: kind: 'fancy' is not one of ideal, explicit"},
		{"fabric:\n  nodes: {count: 5000}",
		 "t.yaml:2:18: count: '5000' is not an integer in 1..4096 (nodes)"},
		{"fabric:\n  nodes: [{names: [a]}, {count: 4096}]",
		 "t.yaml:2:33: count: cannot add node 'n4095': the fabric has 4096 nodes, the limit"},
		{"fabric:\n  nodes: {names: [\"a b\"]}",
		 "t.yaml:2:19: names: node name 'a b' has character 0x20 at position 2; allowed are "
		 "[A-Za-z0-9._-]"},
		/* groups */
		{"fabric:\n  nodes: {count: 2}\n  defaults:\n    link:\n      loss: {model: bernoulli, "
		 "p: 0.1, r: 0.2}",
		 "t.yaml:5:40: loss.r: not a parameter of loss model bernoulli (its parameters: p)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults:\n    link:\n      loss: {p: 0.1}",
		 "t.yaml:5:13: loss: missing key 'model' (one of none, bernoulli, ge, 4state)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults:\n    link:\n      loss: {model: ge, p: 0.1}",
		 "t.yaml:5:13: loss: model ge needs 'r' (write loss: {model: ge, r: ...})"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {link: {loss: ge}}",
		 "t.yaml:3:27: loss: model ge needs 'p' (write loss: {model: ge, p: ...})"},
		{"fabric:\n  nodes: {count: 2}\n  defaults:\n    link:\n      jitter: {dist: table, "
		 "table: [1, 5, 3]}",
		 "t.yaml:5:36: jitter.table: entry 3 (3) is below entry 2 (5): the quantiles of an "
		 "inverse CDF never decrease"},
		{"fabric:\n  nodes: {count: 2}\n  defaults:\n    link:\n      jitter: {dist: table}",
		 "t.yaml:5:15: jitter: dist table needs 'table' (write jitter: {dist: table, table: "
		 "...})"},
		{"fabric:\n  nodes: {names: [a]}\n  defaults: {link: {jitter: {dist: none, sd_ns: 5}}}",
		 "t.yaml:3:42: jitter.sd_ns: not a parameter of jitter dist none (it has none)"},
		/* kinds */
		{"fabric:\n  nodes: {count: 2}\n  nics_per_node: 2",
		 "t.yaml:3:3: nics_per_node: only with kind: ideal (an explicit fabric says it per node "
		 "and link)"},
		{"fabric:\n  kind: ideal\n  nodes: {count: 2}",
		 "t.yaml:3:3: nodes: not with kind: ideal (the ideal fabric makes nodes as they say "
		 "hello, and has no switches or links)"},
		{"fabric: {}",
		 "t.yaml:1:9: nodes: missing: an explicit fabric needs nodes (or write kind: ideal)"},
		/* nodes */
		{"fabric:\n  nodes: {count: 2, names: [a]}",
		 "t.yaml:2:11: count: give names or count, not both"},
		{"fabric:\n  nodes: {count: 2, name: gpu}",
		 "t.yaml:2:27: name: pattern 'gpu' needs {i} exactly once (the node's number)"},
		{"fabric:\n  nodes: {}",
		 "t.yaml:2:10: nodes: a nodes entry needs names: [...] or count: N"},
		{"fabric:\n  nodes: {names: [a, all]}",
		 "t.yaml:2:22: names: 'all' is reserved (it stands for every node in links)"},
		/* duplicate names */
		{"fabric:\n  nodes: {names: [a, b, a]}",
		 "t.yaml:2:25: names: duplicate name 'a': a node of that name is at 2:19"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: b}]",
		 "t.yaml:3:21: name: duplicate name 'b': a node of that name is at 2:22"},
		{"fabric:\n  nodes: [{count: 2}, {names: [n1]}]",
		 "t.yaml:2:32: names: duplicate name 'n1': a node of that name is at 2:19"},
		/* links */
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n  links:\n    - ends: [a, "
		 "sw]\n    - ends: [c, sw]",
		 "t.yaml:6:14: ends: unknown node or switch 'c'"},
		{"fabric:\n  nodes: {names: [a, b], nics: 2}\n  switches: [{name: sw}]\n  links:\n    - "
		 "ends: [a/3, sw]",
		 "t.yaml:5:14: ends: node a has 2 NIC(s) (0..1); there is no NIC 3"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n  links:\n    - ends: "
		 "[sw/1, a]",
		 "t.yaml:5:14: ends: 'sw/1': sw is a switch; a NIC index goes with a node name"},
		{"fabric:\n  nodes: {names: [a, b], nics: 2}\n  switches: [{name: sw}]\n  links:\n    - "
		 "ends: [a, b]",
		 "t.yaml:5:13: ends: both ends stand for several endpoints (2 and 2); one end must be a "
		 "switch, a NIC or a one-NIC node"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n  links:\n    - ends: [a, "
		 "sw, b]",
		 "t.yaml:5:13: ends: a link has two ends, not 3"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n  links:\n    - ends: [a, "
		 "sw]\n    - ends: [b, sw]\n    - ends: [sw, a]",
		 "t.yaml:7:14: ends: NIC a/0 (a-nic0) already has a link, to sw; a NIC has one port "
		 "(the other link: 5:14)"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n  links: [{ends: [sw, "
		 "sw]}]",
		 "t.yaml:4:19: ends: a link cannot connect sw to itself"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]\n  links: [{rate_gbps: 1}]",
		 "t.yaml:4:11: links: a link needs ends: [a, b]"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: sw}]",
		 "t.yaml:3:3: links: missing: with switches: given, links: says what connects to what"},
		/* a switch with too many ports */
		{"fabric:\n  nodes: {count: 3}\n  switches: [{name: sw, ports: 2}]\n  links:\n    - ends: "
		 "[all, sw]",
		 "t.yaml:5:14: ends: switch sw has 2 port(s), all taken: this would be link 3 on it"},
		{"fabric:\n  nodes: {count: 3}\n  switches: [{name: sw, ports: 2}]\n  links:\n    - ends: "
		 "[[n0, n1, n2], sw]",
		 "t.yaml:5:23: ends: switch sw has 2 port(s), all taken: this would be link 3 on it"},
		/* a disconnected NIC */
		{"fabric:\n  nodes: {names: [a, b, c]}\n  switches: [{name: sw}]\n  links:\n    - ends: "
		 "[[a, b], sw]",
		 "t.yaml:2:25: names: NIC c/0 (c-nic0) has no link: every NIC needs one (add it to a "
		 "links entry)"},
		{"fabric:\n  nodes: {count: 2, nics: 2}\n  switches: [{name: sw}]\n  links:\n    - ends: "
		 "[all/0, sw]",
		 "t.yaml:2:18: count: NIC n0/1 (n0-nic1) has no link: every NIC needs one (add it to a "
		 "links entry)"},
		/* a path that does not exist */
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: x}, {name: y}]\n  links:\n    - "
		 "ends: [a, x]\n    - ends: [b, y]",
		 "t.yaml:4:3: links: no path from a/0 (a-nic0) to b/0 (b-nic0): switch x does not reach "
		 "switch y"},
		{"fabric:\n  nodes: {names: [a, b, c]}\n  links: [{ends: [a, b]}, {ends: [c, b]}]",
		 "t.yaml:3:35: ends: NIC b/0 (b-nic0) already has a link, to a/0; a NIC has one port "
		 "(the other link: 3:19)"},
		{"fabric:\n  nodes: {names: [a, b, c, d]}\n  links: [{ends: [a, b]}, {ends: [c, d]}]",
		 "t.yaml:3:3: links: no path from a/0 (a-nic0) to c/0 (c-nic0): a-nic0 is cabled "
		 "straight to b/0"},
		{"fabric:\n  nodes: {names: [a, b]}\n  switches: [{name: s1}, {name: s2}, {name: s3}, "
		 "{name: s4}, {name: s5}, {name: s6}, {name: s7}, {name: s8}]\n  links:\n    - ends: [a, "
		 "s1]\n    - ends: [s1, s2]\n    - ends: [s2, s3]\n    - ends: [s3, s4]\n    - ends: [s4, "
		 "s5]\n    - ends: [s5, s6]\n    - ends: [s6, s7]\n    - ends: [s7, s8]\n    - ends: [s8, "
		 "b]",
		 "t.yaml:4:3: links: the path from a-nic0 to b-nic0 has 9 hops; the limit is 8"},
	};
	char err[SCN_ERR_LEN];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct scenario *sc = (struct scenario *)1;
		err[0] = 0;
		int rc = scn_load_buffer("t.yaml", cases[i].yaml, strlen(cases[i].yaml), &sc, err,
					 sizeof(err));
		CHECK(rc == -EINVAL && sc == NULL && strcmp(err, cases[i].err) == 0,
		      "case %zu: %d\n  got:  %s\n  want: %s", i, rc, err, cases[i].err);
		if (rc == 0)
			scenario_free(sc);
	}
	/* Reading the file. */
	struct scenario *sc;
	CHECK(scn_load("/nonexistent/x.yaml", &sc, err, sizeof(err)) == -ENOENT && sc == NULL &&
		      strcmp(err, "/nonexistent/x.yaml: No such file or directory") == 0,
	      "missing file: '%s'", err);
	CHECK(scn_load("/", &sc, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "/: not a regular file") == 0,
	      "a directory: '%s'", err);
	/* A short err buffer is cut, never overrun. */
	char tiny[12];
	CHECK(scn_load_buffer("t.yaml", "fabrik: 1", 9, &sc, tiny, sizeof(tiny)) == -EINVAL &&
		      strlen(tiny) == sizeof(tiny) - 1,
	      "tiny: '%s'", tiny);
}

/* Defaults, overrides, port rates, per-direction models, group replacement. */
static void test_resolve(void)
{
	static const char yaml[] =
		"name: resolve\n"
		"description: defaults and overrides\n"
		"seed: 42\n"
		
		"fabric:\n"
		"  defaults:\n"
		"    link: {rate_gbps: 100, latency_ns: 20, loss: {model: bernoulli, p: 0.01}}\n"
		"    nic: {o_send_ns: 111}\n"
		"    switch: {latency_ns: 200, ports: 8}\n"
		"  nodes:\n"
		"    - {names: [a, b], nics: 2, nic: {o_recv_ns: 222}}\n"
		"    - {count: 2, name: \"x{i}\", first: 5}\n"
		"  switches:\n"
		"    - {name: sw, port_rate_gbps: 50}\n"
		"    - {name: core, ports: 4}\n"
		"  links:\n"
		"    - ends: [a, sw]\n"
		"    - ends: [b/0, sw]\n"
		"      rate_gbps: 75\n"
		"      b_to_a: {latency_ns: 99, loss: {model: ge, p: 0.1, r: 0.5}}\n"
		"    - ends: [b-nic1, core]\n"
		"      a_to_b: {loss: none}\n"
		"    - ends: [[x5, x6], core]\n"
		"      jitter: {dist: normal, sd_ns: 300}\n"
		"    - ends: [sw, core]\n";
	char err[SCN_ERR_LEN];
	struct scenario *sc = load(yaml, err);
	if (!sc)
		return;
	struct fabric *f = sc->fabric;
	CHECK(fabric_seed(f) == 42 && !strcmp(fabric_name(f), "resolve") &&
		      !strcmp(fabric_scenario(f), "t.yaml") && fabric_nnodes(f) == 4 &&
		      fabric_nnics(f) == 6,
	      "top level");
	const struct fabric_node *a = fabric_node_find(f, "a"), *x5 = fabric_node_find(f, "x5");
	CHECK(a && x5 && fabric_node_find(f, "x6") && !fabric_node_find(f, "x0"), "x5, x6");
	/* NICs: built-in < defaults.nic < the node entry's nic. */
	CHECK(a->nic[1].model.o_send_ns == 111 && a->nic[1].model.o_recv_ns == 222 &&
		      x5->nic[0].model.o_send_ns == 111 && x5->nic[0].model.o_recv_ns == 300 &&
		      x5->nic[0].model.host_rate_bps == 192 * GBPS,
	      "NIC layers");
	/* a's links: no rate given, so sw's port rate (50) over defaults.link (100). */
	const struct fabric_link *up = link_between(f, "a/0", "sw"), *dn = link_between(f, "sw", "a/0");
	CHECK(up && dn && up->model.rate_bps == 50 * GBPS && dn->model.rate_bps == 50 * GBPS &&
		      up->param.latency_ns == 20 && up->model.latency_ns == 220 &&
		      dn->model.latency_ns == 20 && up->param.loss.kind == MODEL_LOSS_BERNOULLI &&
		      up->param.loss.p[0] == 42949673 && dn->param.loss.p[0] == 42949673,
	      "a/0: port rate, defaults");
	CHECK(up->id % 2 == 0 && dn->id == up->id + 1 && a->nic[0].link_out == (int)up->id &&
		      a->nic[0].speed_mbps == 50000,
	      "a/0 ids and speed");
	/* b/0: the link's rate beats the port rate; b_to_a (sw -> b/0) has its own latency and
	 * loss, a whole new group: ge's 'bad' is its default 1, not bernoulli's leftovers. */
	up = link_between(f, "b/0", "sw");
	dn = link_between(f, "sw", "b/0");
	CHECK(up && dn && up->model.rate_bps == 75 * GBPS && dn->model.rate_bps == 75 * GBPS &&
		      up->param.latency_ns == 20 && dn->param.latency_ns == 99 &&
		      up->param.loss.kind == MODEL_LOSS_BERNOULLI &&
		      dn->param.loss.kind == MODEL_LOSS_GE && dn->param.loss.p[0] == 429496730 &&
		      dn->param.loss.p[1] == 2147483648u && dn->param.loss.p[2] == 0xffffffffu &&
		      dn->param.loss.p[3] == 0,
	      "b/0 per direction: %u %u %u %u", dn->param.loss.p[0], dn->param.loss.p[1],
	      dn->param.loss.p[2], dn->param.loss.p[3]);
	/* b/1 by its NIC name, to core (no port rate): defaults.link's 100; a_to_b drops loss. */
	up = link_between(f, "b/1", "core");
	dn = link_between(f, "core", "b/1");
	CHECK(up && dn && up->model.rate_bps == 100 * GBPS && up->param.loss.kind == MODEL_LOSS_NONE &&
		      dn->param.loss.kind == MODEL_LOSS_BERNOULLI && up->model.latency_ns == 220,
	      "b/1");
	/* The x links: jitter for both directions, loss inherited. */
	up = link_between(f, "x6/0", "core");
	dn = link_between(f, "core", "x6/0");
	CHECK(up && dn && up->param.jitter.dist == MODEL_DIST_NORMAL && up->param.jitter.sd_ns == 300 &&
		      dn->param.jitter.dist == MODEL_DIST_NORMAL &&
		      dn->param.loss.kind == MODEL_LOSS_BERNOULLI,
	      "x6");
	/* Switch to switch: the lower port rate of the ends that set one. */
	up = link_between(f, "sw", "core");
	CHECK(up && up->model.rate_bps == 50 * GBPS && up->model.latency_ns == 220 &&
		      link_between(f, "core", "sw")->model.rate_bps == 50 * GBPS,
	      "sw-core");
	const struct fabric_switch *core = fabric_switch_find(f, "core");
	CHECK(core && core->ports_used == 4 && core->cfg.ports == 4 && core->cfg.latency_ns == 200 &&
		      core->nic_links == 3 && core->switch_links == 1,
	      "core: full");
	struct model_path p;
	CHECK(fabric_path(f, a->id, 0, x5->id, 0, &p, err, sizeof(err)) == 0 && p.nhops == 3 &&
		      fabric_path_latency(&p) == 220 + 220 + 20,
	      "a/0 -> x5: %d hops", p.nhops);
	scenario_free(sc);

	/* The implicit switch: nodes alone, every NIC on one switch sw0 with a port each. */
	sc = load("fabric:\n  nodes: {count: 3, nics: 2}\n  defaults: {switch: {port_rate_gbps: 400}}",
		 err);
	if (sc) {
		f = sc->fabric;
		const struct fabric_switch *sw = fabric_switch_find(f, "sw0");
		CHECK(sw && fabric_nswitches(f) == 1 && sw->cfg.ports == 6 && sw->ports_used == 6 &&
			      fabric_link(f, 0)->model.rate_bps == 400 * GBPS &&
			      fabric_config(f)->seed == 1 && !strcmp(fabric_name(f), "t"),
		      "implicit switch");
		scenario_free(sc);
	}
	/* Multi-rail: all/<i> picks one rail. */
	sc = load("fabric:\n  nodes: {count: 2, nics: 2}\n  switches: [{name: r0}, {name: r1}]\n"
		 "  links:\n    - ends: [all/0, r0]\n    - ends: [all/1, r1]\n"
		 "    - ends: [r0, r1]\n",
		 err);
	if (sc) {
		f = sc->fabric;
		CHECK(link_between(f, "n1/1", "r1") && link_between(f, "n0/0", "r0") &&
			      !link_between(f, "n0/1", "r0"),
		      "rails");
		CHECK(fabric_path(f, 0, 0, 1, 1, &p, err, sizeof(err)) == 0 && p.nhops == 3,
		      "across rails");
		scenario_free(sc);
	}
	/* Ideal from a scenario, and kind: explicit spelled out. */
	sc = load("seed: 0x10\nfabric: {kind: ideal, nics_per_node: 3, speed_mbps: 100000}", err);
	if (sc) {
		f = sc->fabric;
		const struct fabric_node *n;
		CHECK(fabric_is_ideal(f) && fabric_seed(f) == 16 &&
			      fabric_node_get(f, "anyone", &n, err, sizeof(err)) == 0 && n->nnics == 3 &&
			      n->nic[2].speed_mbps == 100000,
		      "ideal scenario");
		scenario_free(sc);
	}
	sc = load("fabric: {kind: explicit, switching: store_forward, nodes: {names: [a, b]}}", err);
	if (sc) {
		f = sc->fabric;
		CHECK(fabric_path(f, 0, 0, 1, 0, &p, err, sizeof(err)) == 0 &&
			      p.switching == MODEL_STORE_FORWARD,
		      "switching");
		scenario_free(sc);
	}
	/* Values in every syntax the table takes, through the YAML. */
	sc = load("fabric:\n  nodes: {names: [a, b]}\n  defaults:\n    link: {rate_gbps: \"12.5\", "
		 "duplicate: 1%, corrupt: 1e-6, reorder: 0.25, mtu: 2048}\n"
		 "    nic: {timeout_scale: 0.001, host_rate_gbps: 0}",
		 err);
	if (sc) {
		f = sc->fabric;
		const struct fabric_link *l = fabric_link(f, 0);
		const struct fabric_nic *c = &fabric_node(f, 0)->nic[0];
		CHECK(l->param.rate_bps == 12500000000ull && l->param.duplicate_p == 42949673 &&
			      l->param.corrupt_p == 4295 && l->param.reorder_p == 1073741824u &&
			      l->param.mtu == 2048 && c->model.timeout_scale_ppm == 1000 &&
			      c->model.host_rate_bps == 0 && c->model.host_fs_per_byte == 0 &&
			      l->model.fs_per_byte == 640000,
		      "value syntaxes");
		scenario_free(sc);
	}
	/* A jitter table is kept by the fabric (copied out of the document). */
	sc = load("fabric:\n  nodes: {names: [a, b]}\n  defaults:\n    link:\n      jitter: {dist: "
		 "table, table: [0, 10, 20, 1000], corr: 0.25}",
		 err);
	if (sc) {
		f = sc->fabric;
		const struct fabric_link *l = fabric_link(f, 3);
		CHECK(l->param.jitter.dist == MODEL_DIST_TABLE && l->param.jitter.ntable == 4 &&
			      l->param.jitter.table[3] == 1000 && l->param.jitter.rho == 0.25 &&
			      l->model.jitter.table == l->param.jitter.table,
		      "table");
		const char *js;
		size_t jl;
		CHECK(scenario_json(sc, false, &js, &jl) == 0 &&
			      strstr(js, "\"jitter\":{\"dist\":\"table\",\"corr\":0.25,\"table\":[0,10,20,"
					 "1000]}"),
		      "table in json: %.400s", js);
		scenario_free(sc);
	}
	/* Text in the dump: UTF-8 as \u escapes, so the JSON stays printable ASCII. */
	sc = load("description: \"caf\u00e9 \\\"\U0001F600\\\" \\t\"\nfabric: {kind: ideal}", err);
	if (sc) {
		f = sc->fabric;
		const char *js;
		size_t jl;
		CHECK(scenario_json(sc, false, &js, &jl) == 0 &&
			      strstr(js, "\"description\":\"caf\\u00e9 \\\"\\ud83d\\ude00\\\" \\u0009\""),
		      "utf-8 in json: %.200s", js);
		scenario_free(sc);
	}
	/* Aliases work where a value is expected; anchors reuse a model. */
	sc = load("fabric:\n  defaults:\n    link: {loss: &l {model: bernoulli, p: 0.5}}\n"
		 "  nodes: {names: [a, b]}\n  switches: [{name: s}]\n"
		 "  links:\n    - {ends: [a, s]}\n    - {ends: [b, s], a_to_b: {loss: *l}}\n",
		 err);
	if (sc) {
		f = sc->fabric;
		CHECK(link_between(f, "b/0", "s")->param.loss.p[0] == 2147483648u, "alias");
		scenario_free(sc);
	}
}

static const struct check_case cases[] = {
	CHECK_CASE(test_shipped),
	CHECK_CASE(test_errors),
	CHECK_CASE(test_resolve),
};

CHECK_MAIN(cases)
