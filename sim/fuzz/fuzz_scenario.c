/* SPDX-License-Identifier: MIT */
/*
 * fuzz_scenario.c - the scenario parser under libFuzzer.
 *
 * The input is a scenario file. For every input scn_load_buffer must not
 * read or write out of bounds or leak (ASan), and must either
 *  - fail with exactly one message "t.yaml:<line>:<column>: <key>: <reason>"
 *    (line and column >= 1, key and reason not empty) and no fabric, or
 *  - give a fabric whose JSON dump is one line of printable ASCII, the same
 *    when the input is loaded again (deterministic), whose links all pass
 *    model_link_resolve, and in which every NIC reaches every other: paths
 *    that pass model_path_check and chain from the source NIC, hop by hop,
 *    to the destination NIC; whose faults (the faults: section) each pass
 *    fault_spec_check and name only links and nodes of the fabric.
 * Seeds: the shipped scenarios (tools/scripts/fuzz.sh copies them into the corpus;
 * fault-*.yaml have faults: sections) and the dictionary fuzz_scenario.dict.
 * The other section parsers (faults:, job:, expect:) are compiled alongside
 * (fuzz-libs), not included: their static helpers share names with scenario.c's.
 *
 * fuzz-libs: sim/core/model_rand.c sim/scn/fabric_out.c sim/scn/units.c sim/scn/yaml.c sim/core/fault.c sim/scn/faults.c sim/scn/job.c sim/scn/jbuf.c sim/scn/place.c -lyaml
 */
#include "sim/core/model.c"
#include "sim/scn/param.c"
#include "sim/scn/fabric.c"
#include "sim/log.c"
#include "sim/scn/scenario.c" /* last: it defines a fail() macro */

#include "sim/core/fault.h"

#include <assert.h>
#include <stdio.h>

#include "sim/fuzz/fuzz_err.h"

static bool ep_is_nic(const struct fabric_ep *e, const struct fabric_nic *n)
{
	return e->kind == FABRIC_EP_NIC && e->id == n->node && e->nic == n->index;
}

static void check_fabric(struct scenario *sc, const char *again, size_t again_len)
{
	struct fabric *f = sc->fabric;
	const char *js;
	size_t jl;
	char err[FABRIC_ERR_LEN];
	assert(scenario_json(sc, false, &js, &jl) == 0 && jl == strlen(js));
	assert(js[0] == '{' && js[jl - 1] == '}');
	for (size_t i = 0; i < jl; i++)
		assert(js[i] >= 0x20 && js[i] < 0x7f);
	if (again) {
		assert(again_len == jl && memcmp(again, js, jl) == 0);
		return;
	}
	const struct fault_plan *plan = sc->faults;
	assert(!plan || (plan->n >= 0 && plan->n <= FAULT_MAX && strstr(js, "\"faults\":[")));
	for (int i = 0; plan && i < plan->n; i++) {
		const struct fault_spec *s = &plan->f[i];
		char why[256];
		assert(fault_spec_check(s, why, sizeof(why)) == 0);
		for (uint32_t j = 0; j < s->nlinks; j++)
			assert(s->link[j] < (uint32_t)fabric_nlinks(f));
		const int32_t nodes[] = {s->src_node, s->dst_node, s->node, s->trig_src, s->trig_dst};
		for (size_t j = 0; j < sizeof(nodes) / sizeof(nodes[0]); j++)
			assert(nodes[j] == FAULT_ANY || (nodes[j] >= 0 && nodes[j] < fabric_nnodes(f)));
		assert(s->trig_link >= -1 && s->trig_link < fabric_nlinks(f));
	}
	for (int i = 0; i < fabric_nlinks(f); i++) {
		struct model_link m = fabric_link(f, (uint32_t)i)->model;
		char why[MODEL_ERR_LEN];
		assert(model_link_resolve(&m, why, sizeof(why)) == 0);
	}
	int n = fabric_nnics(f), step = n > 24 ? n / 24 : 1;
	for (int a = 0; a < n; a += step) {
		for (int b = 0; b < n; b += step) {
			const struct fabric_nic *x = fabric_nic_by_gid(f, a), *y = fabric_nic_by_gid(f, b);
			struct model_path p;
			assert(x && y);
			assert(fabric_path(f, x->node, x->index, y->node, y->index, &p, err,
					   sizeof(err)) == 0);
			assert(model_path_check(&p, err, sizeof(err)) == 0);
			if (fabric_is_ideal(f) || a == b) {
				assert(p.nhops == 0);
				continue;
			}
			assert(p.nhops >= 1 && p.nhops <= MODEL_MAX_HOPS);
			const struct fabric_link *first = fabric_link(f, p.link_id[0]),
						 *last = fabric_link(f, p.link_id[p.nhops - 1]);
			assert(ep_is_nic(&first->from, x) && ep_is_nic(&last->to, y));
			for (int h = 0; h + 1 < p.nhops; h++) {
				const struct fabric_link *u = fabric_link(f, p.link_id[h]),
							 *v = fabric_link(f, p.link_id[h + 1]);
				assert(p.hop[h] == &u->model);
				assert(u->to.kind == FABRIC_EP_SWITCH && v->from.kind == FABRIC_EP_SWITCH &&
				       u->to.id == v->from.id);
			}
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	char err[SCN_ERR_LEN];
	struct scenario *sc = (struct scenario *)1;
	if (!quiet) {
		log_init("fuzz", LOG_LEVEL_ERROR);
		quiet = true;
	}
	int rc = scn_load_buffer("t.yaml", (const char *)data, size, &sc, err, sizeof(err));
	if (rc) {
		assert(sc == NULL);
		if (rc != -ENOMEM && rc != -EFBIG)
			fuzz_check_error(err, "t.yaml");
		return 0;
	}
	assert(sc && sc->fabric);
	check_fabric(sc, NULL, 0);
	const char *js;
	size_t jl;
	scenario_json(sc, false, &js, &jl);
	char *copy = malloc(jl + 1);
	assert(copy);
	memcpy(copy, js, jl + 1);
	scenario_free(sc);
	assert(scn_load_buffer("t.yaml", (const char *)data, size, &sc, err, sizeof(err)) == 0);
	check_fabric(sc, copy, jl);
	free(copy);
	scenario_free(sc);
	return 0;
}
