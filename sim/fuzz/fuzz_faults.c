/* SPDX-License-Identifier: MIT */
/*
 * fuzz_faults.c - live fault specs (scn_load_faults, what `simfabric fault
 * apply` sends) under libFuzzer, against a fixed small fabric, and what the
 * data path then does with them.
 *
 * The input is the YAML text of a faults list (or {faults: [...]}). For every
 * input scn_load_faults must not read or write out of bounds or leak (ASan),
 * and must either
 *  - fail with one line "spec:<line>:<column>: <key>: <reason>" and no plan, or
 *  - give a plan of at most FAULT_MAX specs, each passing fault_spec_check,
 *    naming only links, nodes and trigger scopes of the fabric, whose JSON
 *    (fault_plan_json) is printable ASCII and the same when loaded again.
 * Then the plan is published into a fabric state (virtual time, origin 1 s)
 * and a few messages are reserved on every connection at times around each
 * fault's first windows: fst_reserve must succeed; a message must never
 * arrive before the unfaulted model would have it (model_message on the same
 * shared state, the fault's degrade ignored only where it could make it
 * faster: none here, the harness clamps degrades to slower links); a failed
 * one never before its post; fault_window's answers stay inside the query's
 * reach and the fault's schedule.
 * Seeds: the dictionary fuzz_faults.dict (whole specs among its words).
 *
 * fuzz-libs: sim/core/model.c sim/core/model_rand.c sim/scn/param.c sim/scn/units.c sim/scn/fabric.c sim/scn/fabric_out.c sim/log.c sim/scn/scenario.c sim/scn/yaml.c sim/core/fault.c sim/scn/faults.c sim/scn/job.c sim/scn/jbuf.c sim/scn/place.c sim/core/fstate.c sim/core/fstate_fault.c -lyaml
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim/scn/fabric.h"
#include "sim/core/fault.h"
#include "sim/core/fstate.h"
#include "sim/log.h"
#include "sim/core/model.h"
#include "sim/scn/scenario.h"
#include "sim/fuzz/fuzz_err.h"

/* node0, node1 (one NIC each) and node2 (two NICs) on sw0; a lossy, jittery default link. */
static const char fabric_yaml[] =
	"seed: 9\n"
	"fabric:\n"
	"  defaults:\n"
	"    link: {rate_gbps: 25, latency_ns: 500, loss: {model: bernoulli, p: 0.001}}\n"
	"    nic: {timeout_exp: 10, retry_count: 7}\n"
	"  nodes:\n"
	"    - {names: [node0, node1]}\n"
	"    - {names: [node2], nics: 2}\n"
	"  switches: [{name: sw0}]\n"
	"  links:\n"
	"    - ends: [[node0, node1, node2], sw0]\n";

#define ORIGIN 1000000000LL

static struct scenario *scn; /* the fixed fabric's, for the process's life */
static struct fabric *fab;

static void check_node(int32_t id)
{
	assert(id == FAULT_ANY || (id >= 0 && id < fabric_nnodes(fab)));
}

static void check_spec(const struct fault_spec *f)
{
	char why[256];
	assert(fault_spec_check(f, why, sizeof(why)) == 0);
	assert(memchr(f->name, 0, sizeof(f->name)) && f->name[0]);
	for (uint32_t i = 0; i < f->nlinks; i++)
		assert(f->link[i] < (uint32_t)fabric_nlinks(fab));
	check_node(f->src_node);
	check_node(f->dst_node);
	check_node(f->node);
	check_node(f->trig_src);
	check_node(f->trig_dst);
	assert(f->trig_link >= -1 && f->trig_link < fabric_nlinks(fab));
	assert(f->line >= 1);
}

/* fault_window's answer for [lo, hi] is a window of the schedule that reaches into it. */
static void check_window(const struct fault_spec *f, uint32_t id, int64_t until, int64_t lo,
			 int64_t hi)
{
	int64_t a, b;
	if (!fault_window(f, 9, id, ORIGIN, until, lo, hi, &a, &b))
		return;
	assert(a <= hi && b > lo && a < b && b <= until);
	assert(a >= ORIGIN + f->start_ns || ORIGIN > INT64_MAX - f->start_ns);
	if (f->period_ns > 0 && a < INT64_MAX / 2)
		assert((a - ORIGIN - f->start_ns) % f->period_ns == 0);
}

struct env {
	void *base;
	size_t len;
	struct fst_view *v;
};

static struct fst_link *lstate(struct env *e, uint32_t id)
{
	return (struct fst_link *)((uint8_t *)e->base + e->v->shm->state_off) + id;
}

/* Arrival on the unfaulted model from the shared state as it is now. */
static struct model_msg unfaulted(struct env *e, const struct fst_conn *c, int64_t t,
				  uint64_t bytes)
{
	struct model_path p = {.nhops = c->npath, .switching = c->switching};
	int64_t busy[MODEL_MAX_HOPS];
	struct model_loss_state ls[MODEL_MAX_HOPS];
	for (int j = 0; j < c->npath; j++) {
		p.link_id[j] = c->path[j];
		p.hop[j] = &e->v->links[c->path[j]];
		busy[j] = lstate(e, c->path[j])->busy_until;
		ls[j] = lstate(e, c->path[j])->loss;
	}
	int64_t host = ((struct fst_nic *)((uint8_t *)e->base + e->v->shm->nics_off))[c->src_nic]
			       .host_busy;
	struct model_conn mc = c->mc;
	struct model_key key = {.seed = e->v->shm->seed, .conn = c->id, .msg = c->msgs};
	struct model_msg m;
	assert(model_message(&p, &c->nic, t, bytes, &key, &host, busy, ls, &mc, &m) == 0);
	return m;
}

static void run_data_path(const struct fault_plan *plan, const uint8_t *data, size_t size)
{
	int nl = fabric_nlinks(fab), nn = fabric_nnics(fab);
	struct model_link *links = calloc((size_t)nl, sizeof(*links));
	assert(links);
	for (int i = 0; i < nl; i++)
		links[i] = fabric_link(fab, (uint32_t)i)->model;
	struct env e;
	e.len = fst_bytes((uint32_t)nl, (uint32_t)nn, 0);
	e.base = mmap(NULL, e.len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert(e.base != MAP_FAILED);
	assert(fst_format(e.base, e.len, (uint32_t)nl, links, (uint32_t)nn, 9, 0) == 0);
	assert(fst_view_new(e.base, e.len, &e.v) == 0);
	free(links);
	int slower = 1; /* degrades that could make a message faster void the "never early" check */
	for (int i = 0; i < plan->n; i++) {
		const struct fault_spec *f = &plan->f[i];
		uint32_t id;
		assert(fst_fault_add(e.v->shm, f, f->trigger == FAULT_T_TIME ? ORIGIN : 0, &id) == 0);
		assert(id == (uint32_t)i);
		if (f->action == FAULT_A_DEGRADE && (f->set & (FAULT_SET_RATE | FAULT_SET_LOSS)))
			slower = 0;
		int64_t until = FAULT_FOREVER;
		if (size && (data[0] & 1))
			until = ORIGIN + f->start_ns + (int64_t)(data[0] >> 1) * 1000;
		if (until != FAULT_FOREVER)
			atomic_store(&fst_fault(e.v->shm, id)->until, until);
		for (int64_t k = 0; k < 4; k++) {
			int64_t lo = ORIGIN + f->start_ns + k * (f->period_ns ? f->period_ns : 1000) - 7;
			check_window(f, id, until, lo, lo);
			check_window(f, id, until, lo, lo + 10000000);
			check_window(f, id, until, 0, INT64_MAX);
		}
	}
	/* connections node0 -> node1, node1 -> node2/1, node2/0 -> node0 */
	static const int ends[3][4] = {{0, 0, 1, 0}, {1, 0, 2, 1}, {2, 0, 0, 0}};
	struct fst_conn c[3];
	for (int k = 0; k < 3; k++) {
		struct model_path p;
		char err[FABRIC_ERR_LEN];
		assert(fabric_path(fab, ends[k][0], ends[k][1], ends[k][2], ends[k][3], &p, err,
				   sizeof(err)) == 0);
		memset(&c[k], 0, sizeof(c[k]));
		c[k].id = 100 + (uint64_t)k;
		c[k].npath = p.nhops;
		for (int j = 0; j < p.nhops; j++)
			c[k].path[j] = p.link_id[j];
		const struct fabric_node *sn = fabric_node(fab, ends[k][0]);
		c[k].src_nic = (uint32_t)sn->nic[ends[k][1]].gid;
		c[k].src_node = ends[k][0];
		c[k].dst_node = ends[k][2];
		c[k].nic = sn->nic[ends[k][1]].model;
		c[k].switching = p.switching;
	}
	/* messages around each fault's first windows, in time order */
	int64_t t = ORIGIN - 100000;
	for (int m = 0; m < 24; m++) {
		uint8_t b = size ? data[(size_t)m % size] : 0;
		int64_t step = (int64_t)(b % 16) * 250000;
		if (plan->n && (b & 0x10)) {
			const struct fault_spec *f = &plan->f[(size_t)m % (size_t)plan->n];
			int64_t w = ORIGIN + f->start_ns + (int64_t)(b >> 5) * 1000;
			if (w > t && w < ORIGIN + 1000000000000LL)
				step = w - t;
		}
		t += step;
		struct fst_conn *k = &c[m % 3];
		uint64_t bytes = (uint64_t)(b & 0xe0) << 8;
		struct model_msg want = unfaulted(&e, k, t, bytes), got;
		struct fst_hit hit;
		int was_failed = k->mc.failed;
		assert(fst_reserve(e.v, k, t, bytes, &got, &hit) == 0);
		if (got.failed) {
			assert(got.arrive_ns >= t && got.recv_done_ns == got.arrive_ns);
		} else {
			assert(!was_failed);
			if (slower)
				assert(got.arrive_ns >= want.arrive_ns &&
				       got.recv_done_ns >= want.recv_done_ns);
			assert(hit.delay_ns >= 0);
		}
		assert(hit.fault >= -1 && hit.fault < plan->n);
		if (got.failed && k->mc.failed) { /* a fresh connection in its place */
			uint64_t id = k->id + 3;
			struct fst_conn fresh = *k;
			memset(&fresh.mc, 0, sizeof(fresh.mc));
			fresh.id = id;
			fresh.msgs = 0;
			*k = fresh;
		}
	}
	fst_view_free(e.v);
	munmap(e.base, e.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[SCN_ERR_LEN];
	if (!fab) {
		log_init("fuzz", LOG_LEVEL_ERROR);
		int rc = scn_load_buffer("f.yaml", fabric_yaml, sizeof(fabric_yaml) - 1, &scn, err,
					 sizeof(err));
		if (rc) {
			fprintf(stderr, "fuzz_faults: the fixed fabric: %s\n", err);
			abort();
		}
		fab = scn->fabric;
	}
	struct fault_plan *plan = (struct fault_plan *)1;
	int rc = scn_load_faults(fab, "spec", (const char *)data, size, &plan, err, sizeof(err));
	if (rc) {
		assert(plan == NULL);
		if (rc != -ENOMEM && rc != -EFBIG)
			fuzz_check_error(err, "spec");
		return 0;
	}
	assert(plan && plan->n >= 0 && plan->n <= FAULT_MAX);
	for (int i = 0; i < plan->n; i++)
		check_spec(&plan->f[i]);
	char *js = fault_plan_json(plan, fab);
	assert(js && js[0] == '[' && js[strlen(js) - 1] == ']');
	for (const char *c = js; *c; c++)
		assert(*c >= 0x20 && *c < 0x7f);
	struct fault_plan *again = NULL;
	assert(scn_load_faults(fab, "spec", (const char *)data, size, &again, err, sizeof(err)) == 0);
	char *js2 = fault_plan_json(again, fab);
	assert(js2 && !strcmp(js, js2));
	free(js);
	free(js2);
	fault_plan_free(again);
	run_data_path(plan, data, size);
	fault_plan_free(plan);
	return 0;
}
