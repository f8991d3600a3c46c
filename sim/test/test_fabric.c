/* SPDX-License-Identifier: MIT */
/*
 * test_fabric.c - the fabric description: node-name rules with their exact
 * messages, the parameter table, the ideal fabric's on-demand nodes, routes,
 * and the load-time hazards fabric_lint reports.
 */
#include "sim/scn/fabric.h"
#include "sim/scn/param.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/test/check.h"

#define L63 "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789."

static void test_names(void)
{
	static const struct {
		const char *name;
		int rc;
		const char *err;
	} cases[] = {
		{"n0", 0, NULL},
		{"a", 0, NULL},
		{"Node-1.rack_2", 0, NULL},
		{"...", 0, NULL},
		{L63, 0, NULL},
		{"", -EINVAL, "node name is empty (1..63 characters of [A-Za-z0-9._-])"},
		{L63 "x", -EINVAL, "node name '" L63 "x' is 64 characters long; the limit is 63"},
		{"a b", -EINVAL,
		 "node name 'a b' has character 0x20 at position 2; allowed are [A-Za-z0-9._-]"},
		{"a/b", -EINVAL,
		 "node name 'a/b' has character '/' at position 2; allowed are [A-Za-z0-9._-]"},
		{"n:0", -EINVAL,
		 "node name 'n:0' has character ':' at position 2; allowed are [A-Za-z0-9._-]"},
		{"tab\there", -EINVAL,
		 "node name 'tab\\x09here' has character 0x09 at position 4; allowed are "
		 "[A-Za-z0-9._-]"},
		{"caf\xc3\xa9", -EINVAL,
		 "node name 'caf\\xc3\\xa9' has character 0xc3 at position 4; allowed are "
		 "[A-Za-z0-9._-]"},
		{"back\\slash", -EINVAL,
		 "node name 'back\\x5cslash' has character '\\' at position 5; allowed are "
		 "[A-Za-z0-9._-]"},
	};
	char err[FABRIC_ERR_LEN];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = 0;
		int rc = fabric_name_check(cases[i].name, err, sizeof(err));
		CHECK(rc == cases[i].rc && (!cases[i].err || strcmp(err, cases[i].err) == 0),
		      "name '%s': %d '%s', want %d '%s'", cases[i].name, rc, err, cases[i].rc,
		      cases[i].err ? cases[i].err : "");
	}
	/* A long bad name is quoted cut short, never overflowing err. */
	char big[300];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	CHECK(fabric_name_check(big, err, sizeof(err)) == -EINVAL &&
		      strstr(err, "xxx...' is 299 characters long") != NULL,
	      "long name: '%s'", err);
	char tiny[16];
	CHECK(fabric_name_check("a b", tiny, sizeof(tiny)) == -EINVAL && strlen(tiny) == 15,
	      "short err buffer truncates: '%s'", tiny);
}

static void test_params(void)
{
	struct fabric_config cfg;
	char err[FABRIC_ERR_LEN], buf[PARAM_VALUE_MAX];
	fabric_config_init(&cfg);
	CHECK(cfg.nics_per_node == 1 && cfg.speed_mbps == 200000 && cfg.latency_ns == 0 &&
		      cfg.seed == 1 && cfg.switching == MODEL_CUT_THROUGH,
	      "defaults: %lld %lld %lld %llu", (long long)cfg.nics_per_node,
	      (long long)cfg.speed_mbps, (long long)cfg.latency_ns, (unsigned long long)cfg.seed);
	CHECK(fabric_config_check(&cfg, err, sizeof(err)) == 0, "defaults are valid: %s", err);
	CHECK(param_count <= PARAM_MAX, "%d parameters fit the bitmasks", param_count);
	/* Every table entry: found, documented, default valid; integers settable at min and max
	 * and not beyond; every default formats to text that parses back to the same value. */
	union {
		struct fabric_config fab;
		struct model_link link;
		struct model_nic nic;
		struct fabric_switch_cfg sw;
	} obj, back;
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		memset(&obj, 0, sizeof(obj));
		param_defaults(p->scope, &obj);
		CHECK(param_find(p->scope, p->name) == p, "%s: found", p->name);
		CHECK(p->unit && p->doc && *p->doc, "%s: unit and doc", p->name);
		CHECK(p->offset + p->size <= sizeof(obj), "%s: offset", p->name);
		CHECK(param_check(p, &obj, err, sizeof(err)) == 0, "%s: default valid: %s", p->name,
		      err);
		if (p->group != PARAM_G_NONE)
			CHECK(param_selector(p) && param_selector(p)->group == p->group,
			      "%s: has a selector", p->name);
		if (p->type == PARAM_TABLE)
			continue;
		param_format_value(p, p->def, buf, sizeof(buf));
		memset(&back, 0xa5, sizeof(back));
		CHECK(param_parse(p, buf, &back, err, sizeof(err)) == 0 &&
			      (p->type == PARAM_REAL
				       ? param_get_real(p, &back) == (double)p->def / 1e6
				       : param_get_u64(p, &back) == (uint64_t)p->def),
		      "%s: default '%s' parses back: %s", p->name, buf, err);
		if (p->type != PARAM_INT)
			continue;
		snprintf(buf, sizeof(buf), "%lld", (long long)p->min);
		CHECK(param_parse(p, buf, &obj, err, sizeof(err)) == 0 &&
			      param_get_u64(p, &obj) == (uint64_t)p->min,
		      "%s = min", p->name);
		snprintf(buf, sizeof(buf), "%lld", (long long)p->max);
		CHECK(param_parse(p, buf, &obj, err, sizeof(err)) == 0 &&
			      param_get_u64(p, &obj) == (uint64_t)p->max,
		      "%s = max", p->name);
		snprintf(buf, sizeof(buf), "%lld", (long long)p->max + 1);
		CHECK(param_parse(p, buf, &obj, err, sizeof(err)) == -EINVAL &&
			      param_get_u64(p, &obj) == (uint64_t)p->max,
		      "%s = max+1 refused, value unchanged", p->name);
	}
	CHECK(param_find(PARAM_LINK, "latency_ns") != param_find(PARAM_SWITCH, "latency_ns") &&
		      param_find(PARAM_NIC, "latency_ns") == NULL,
	      "names are per scope");

	fabric_config_init(&cfg);
	static const struct {
		const char *value;
		int rc;
		int64_t want;
		const char *err;
	} nics[] = {
		{"1", 0, 1, NULL},
		{"8", 0, 8, NULL},
		{"0", -EINVAL, 0, "nics_per_node: '0' is not an integer in 1..8 (count)"},
		{"9", -EINVAL, 0, "nics_per_node: '9' is not an integer in 1..8 (count)"},
		{"-1", -EINVAL, 0, "nics_per_node: '-1' is not an integer in 1..8 (count)"},
		{"", -EINVAL, 0, "nics_per_node: '' is not an integer in 1..8 (count)"},
		{"-", -EINVAL, 0, "nics_per_node: '-' is not an integer in 1..8 (count)"},
		{"2x", -EINVAL, 0, "nics_per_node: '2x' is not an integer in 1..8 (count)"},
		{" 2", -EINVAL, 0, "nics_per_node: ' 2' is not an integer in 1..8 (count)"},
		{"0x2", -EINVAL, 0, "nics_per_node: '0x2' is not an integer in 1..8 (count)"},
		{"1.5", -EINVAL, 0, "nics_per_node: '1.5' is not an integer in 1..8 (count)"},
		{"99999999999999999999999", -EINVAL, 0,
		 "nics_per_node: '99999999999999999999999' is not an integer in 1..8 (count)"},
	};
	for (size_t i = 0; i < sizeof(nics) / sizeof(nics[0]); i++) {
		cfg.nics_per_node = 3;
		err[0] = 0;
		int rc = fabric_config_set(&cfg, "nics_per_node", nics[i].value, err, sizeof(err));
		CHECK(rc == nics[i].rc, "nics '%s': %d", nics[i].value, rc);
		if (rc == 0)
			CHECK(cfg.nics_per_node == nics[i].want, "nics '%s' = %lld", nics[i].value,
			      (long long)cfg.nics_per_node);
		else
			CHECK(cfg.nics_per_node == 3 && strcmp(err, nics[i].err) == 0,
			      "nics '%s': unchanged, '%s'", nics[i].value, err);
	}
	CHECK(fabric_config_set(&cfg, "nic", "1", err, sizeof(err)) == -ENOENT &&
		      strcmp(err, "unknown fabric parameter 'nic'") == 0,
	      "unknown parameter: '%s'", err);
	CHECK(param_find(PARAM_FABRIC, "bogus") == NULL, "find unknown");
	CHECK(fabric_config_set(&cfg, "seed", "0xff", err, sizeof(err)) == 0 && cfg.seed == 255,
	      "seed in hex");
	CHECK(fabric_config_set(&cfg, "seed", "18446744073709551615", err, sizeof(err)) == 0 &&
		      cfg.seed == UINT64_MAX,
	      "seed max");
	CHECK(fabric_config_set(&cfg, "seed", "18446744073709551616", err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "seed: '18446744073709551616' is not an integer in "
				  "0..18446744073709551615 (decimal, or hex with 0x)") == 0,
	      "seed overflow: '%s'", err);
	fabric_config_init(&cfg);
	cfg.nics_per_node = 0;
	CHECK(fabric_config_check(&cfg, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "nics_per_node: '0' is not an integer in 1..8 (count)") == 0,
	      "check: '%s'", err);
	struct fabric *f = (struct fabric *)1;
	CHECK(fabric_new_ideal(&cfg, &f, err, sizeof(err)) == -EINVAL && f == NULL,
	      "new with a bad config");
}

/* The value types, with their exact conversions and messages. */
static void test_param_types(void)
{
	static const struct {
		enum param_scope scope;
		const char *name, *text;
		int rc;
		uint64_t want; /* stored */
		const char *err;   /* or the formatted value when rc == 0 */
	} cases[] = {
		{PARAM_LINK, "rate_gbps", "200", 0, 200000000000ull, "200"},
		{PARAM_LINK, "rate_gbps", "12.5", 0, 12500000000ull, "12.5"},
		{PARAM_LINK, "rate_gbps", "0.001", 0, 1000000, "0.001"},
		{PARAM_LINK, "rate_gbps", "0.000000001e6", 0, 1000000, "0.001"},
		{PARAM_LINK, "rate_gbps", "1e2", 0, 100000000000ull, "100"},
		{PARAM_LINK, "rate_gbps", "0", 0, 0, "0"},
		{PARAM_LINK, "rate_gbps", "1000000", 0, 1000000000000000ull, "1000000"},
		{PARAM_LINK, "rate_gbps", "0.0005", -EINVAL, 0,
		 "'0.0005' is not a rate in 0.001..1000000 Gb/s (or 0: unlimited; a decimal, at most 9 "
		 "places)"},
		{PARAM_LINK, "rate_gbps", "0.0000000001", -EINVAL, 0,
		 "'0.0000000001' is not a rate in 0.001..1000000 Gb/s (or 0: unlimited; a decimal, at "
		 "most 9 places)"},
		{PARAM_LINK, "rate_gbps", "1000001", -EINVAL, 0,
		 "'1000001' is not a rate in 0.001..1000000 Gb/s (or 0: unlimited; a decimal, at most 9 "
		 "places)"},
		{PARAM_LINK, "rate_gbps", "-1", -EINVAL, 0,
		 "'-1' is not a rate in 0.001..1000000 Gb/s (or 0: unlimited; a decimal, at most 9 "
		 "places)"},
		{PARAM_LINK, "rate_gbps", "200G", -EINVAL, 0,
		 "'200G' is not a rate in 0.001..1000000 Gb/s (or 0: unlimited; a decimal, at most 9 "
		 "places)"},
		{PARAM_LINK, "reorder_delay_ns", "0", -EINVAL, 0,
		 "'0' is not an integer in 1..1000000000 (ns)"},
		{PARAM_LINK, "loss.p", "0.01", 0, 42949673, "0.01"},
		{PARAM_LINK, "loss.p", "1%", 0, 42949673, "0.01"},
		{PARAM_LINK, "loss.p", "1e-2", 0, 42949673, "0.01"},
		{PARAM_LINK, "loss.p", "1", 0, 0xffffffffu, "1"},
		{PARAM_LINK, "loss.p", "0", 0, 0, "0"},
		{PARAM_LINK, "loss.p", "1e-6", 0, 4295, "1e-06"},
		{PARAM_LINK, "loss.p", "1.5", -EINVAL, 0,
		 "'1.5' is not a probability in 0..1 (like 0.001, 1e-6 or 0.1%)"},
		{PARAM_LINK, "loss.p", "-0.1", -EINVAL, 0,
		 "'-0.1' is not a probability in 0..1 (like 0.001, 1e-6 or 0.1%)"},
		{PARAM_LINK, "loss.p", "1e-12", -EINVAL, 0,
		 "'1e-12' is below the resolution of probabilities (2^-32, about 2.3e-10)"},
		{PARAM_LINK, "loss.p", "lots", -EINVAL, 0,
		 "'lots' is not a probability in 0..1 (like 0.001, 1e-6 or 0.1%)"},
		{PARAM_LINK, "loss.model", "ge", 0, MODEL_LOSS_GE, "\"ge\""},
		{PARAM_LINK, "loss.model", "gilbert", -EINVAL, 0,
		 "'gilbert' is not one of none, bernoulli, ge, 4state"},
		{PARAM_LINK, "jitter.dist", "pareto", 0, MODEL_DIST_PARETO, "\"pareto\""},
		{PARAM_LINK, "mtu", "4096", 0, 4096, "4096"},
		{PARAM_LINK, "mtu", "32", -EINVAL, 0, "'32' is not an integer in 64..65536 (B)"},
		{PARAM_LINK, "latency_ns", "1e3", 0, 1000, "1000"},
		{PARAM_NIC, "timeout_scale", "0.001", 0, 1000, "0.001"},
		{PARAM_NIC, "timeout_scale", "1", 0, 1000000, "1"},
		{PARAM_NIC, "timeout_scale", "0.0000001", -EINVAL, 0,
		 "'0.0000001' is not a fraction in 0.000001..1 (at most 6 decimal places)"},
		{PARAM_NIC, "host_rate_gbps", "192", 0, 192000000000ull, "192"},
		{PARAM_NIC, "timeout_exp", "32", -EINVAL, 0, "'32' is not an integer in 0..31"},
		{PARAM_SWITCH, "ports", "0", -EINVAL, 0, "'0' is not an integer in 1..1024 (count)"},
		{PARAM_FABRIC, "switching", "store_forward", 0, MODEL_STORE_FORWARD,
		 "\"store_forward\""},
	};
	char err[PARAM_ERR_LEN], buf[PARAM_VALUE_MAX];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		union {
			struct model_link link;
			struct model_nic nic;
			struct fabric_switch_cfg sw;
			struct fabric_config fab;
		} obj;
		const struct param *p = param_find(cases[i].scope, cases[i].name);
		CHECK(p, "%s exists", cases[i].name);
		if (!p)
			continue;
		memset(&obj, 0, sizeof(obj));
		err[0] = 0;
		int rc = param_parse(p, cases[i].text, &obj, err, sizeof(err));
		if (cases[i].rc) {
			CHECK(rc == cases[i].rc && strcmp(err, cases[i].err) == 0,
			      "%s '%s': %d '%s', want '%s'", cases[i].name, cases[i].text, rc, err,
			      cases[i].err);
			continue;
		}
		param_format(p, &obj, buf, sizeof(buf));
		CHECK(rc == 0 && param_get_u64(p, &obj) == cases[i].want &&
			      strcmp(buf, cases[i].err) == 0,
		      "%s '%s': %d %llu '%s' (%s), want %llu '%s'", cases[i].name, cases[i].text, rc,
		      (unsigned long long)param_get_u64(p, &obj), buf, err,
		      (unsigned long long)cases[i].want, cases[i].err);
	}
	/* A real: jitter.corr in [0, 1). */
	struct model_link l;
	memset(&l, 0, sizeof(l));
	const struct param *corr = param_find(PARAM_LINK, "jitter.corr");
	CHECK(param_parse(corr, "0.5", &l, err, sizeof(err)) == 0 && l.jitter.rho == 0.5, "corr");
	CHECK(param_parse(corr, "1", &l, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "'1' is not a number in 0..0.999999") == 0 && l.jitter.rho == 0.5,
	      "corr 1: '%s'", err);
	/* Groups: a member applies only to its selector's kinds. */
	param_defaults(PARAM_LINK, &l);
	const struct param *r = param_find(PARAM_LINK, "loss.r");
	CHECK(!param_applies(r, &l), "loss.r not with none");
	l.loss.kind = MODEL_LOSS_BERNOULLI;
	CHECK(!param_applies(r, &l) && param_applies(param_find(PARAM_LINK, "loss.p"), &l),
	      "bernoulli: p, not r");
	l.loss.kind = MODEL_LOSS_GE;
	CHECK(param_applies(r, &l) && param_selector(r) == param_find(PARAM_LINK, "loss.model"),
	      "ge: r");
	/* Kinds share fields (loss.bad and loss.p32 are both p[2]): defaults per kind. */
	param_group_defaults(param_selector(r), &l);
	CHECK(l.loss.p[0] == 0 && l.loss.p[1] == 0 && l.loss.p[2] == 0xffffffffu &&
		      l.loss.p[3] == 0 && l.loss.p[4] == 0,
	      "ge defaults: bad = 1");
	l.loss.kind = MODEL_LOSS_4STATE;
	param_group_defaults(param_selector(r), &l);
	CHECK(l.loss.p[1] == 0xffffffffu && l.loss.p[2] == 0, "4state defaults: p31 = 1, p32 = 0");
	/* Tables: sorted quantiles, 1..4096 entries. */
	const struct param *t = param_find(PARAM_LINK, "jitter.table");
	static const int64_t good[] = {0, 10, 10, 400}, bad[] = {0, 20, 10};
	CHECK(param_set_table(t, &l, good, 4, err, sizeof(err)) == 0 && l.jitter.ntable == 4 &&
		      l.jitter.table == good,
	      "table");
	param_format(t, &l, buf, sizeof(buf));
	CHECK(strcmp(buf, "[0,10,10,400]") == 0, "table format '%s'", buf);
	CHECK(param_set_table(t, &l, bad, 3, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "entry 3 (10) is below entry 2 (20): the quantiles of an inverse "
				  "CDF never decrease") == 0,
	      "unsorted table: '%s'", err);
	CHECK(param_set_table(t, &l, good, 0, err, sizeof(err)) == -EINVAL, "empty table");
	/* The docs table has a row per parameter. */
	char *md = NULL;
	size_t mdlen = 0;
	FILE *mf = open_memstream(&md, &mdlen);
	CHECK(mf && param_dump(mf, "markdown") == 0 && param_dump(mf, "html") == -EINVAL, "dump");
	if (mf)
		fclose(mf);
	for (int i = 0; md && i < param_count; i++) {
		char row[80];
		snprintf(row, sizeof(row), "| `%s` |", param_table[i].name);
		CHECK(strstr(md, row) != NULL, "markdown row for %s", param_table[i].name);
	}
	free(md);
}

static void test_ideal(void)
{
	struct fabric_config cfg;
	struct fabric *f;
	char err[FABRIC_ERR_LEN];
	fabric_config_init(&cfg);
	fabric_config_set(&cfg, "nics_per_node", "2", err, sizeof(err));
	CHECK(fabric_new_ideal(&cfg, &f, err, sizeof(err)) == 0, "new: %s", err);
	CHECK(strcmp(fabric_kind(f), "ideal") == 0 && fabric_nnodes(f) == 0, "empty ideal fabric");
	CHECK(fabric_config(f)->nics_per_node == 2, "config kept");
	CHECK(fabric_node_find(f, "n0") == NULL && fabric_node(f, 0) == NULL, "no nodes yet");

	const struct fabric_node *a, *b, *a2;
	CHECK(fabric_node_get(f, "n0", &a, err, sizeof(err)) == 0, "create n0");
	CHECK(fabric_node_get(f, "gpu-box.1", &b, err, sizeof(err)) == 0, "create gpu-box.1");
	CHECK(fabric_node_get(f, "n0", &a2, err, sizeof(err)) == 0 && a2 == a, "n0 again: same");
	CHECK(fabric_nnodes(f) == 2 && a->id == 0 && b->id == 1, "ids in creation order");
	CHECK(fabric_node(f, 1) == b && fabric_node(f, 2) == NULL && fabric_node(f, -1) == NULL,
	      "by id");
	CHECK(fabric_node_find(f, "gpu-box.1") == b, "by name");
	CHECK(a->nnics == 2 && strcmp(a->nic[0].name, "n0-nic0") == 0 &&
		      strcmp(a->nic[1].name, "n0-nic1") == 0 &&
		      strcmp(b->nic[1].name, "gpu-box.1-nic1") == 0,
	      "NIC names");
	CHECK(a->nic[1].index == 1 && a->nic[0].speed_mbps == FABRIC_IDEAL_SPEED_MBPS &&
		      a->nic[0].latency_ns == 0,
	      "NIC properties");
	CHECK(fabric_nic(a, 1) == &a->nic[1] && fabric_nic(a, 2) == NULL &&
		      fabric_nic(a, -1) == NULL,
	      "fabric_nic bounds");
	CHECK(a->nic[0].guid == 0x5346000000000000ULL && b->nic[1].guid == 0x5346000000000101ULL,
	      "guids %llx %llx", (unsigned long long)a->nic[0].guid,
	      (unsigned long long)b->nic[1].guid);

	/* Bad names create nothing. */
	const struct fabric_node *bad = (const struct fabric_node *)1;
	CHECK(fabric_node_get(f, "no good", &bad, err, sizeof(err)) == -EINVAL && bad == NULL &&
		      fabric_nnodes(f) == 2 && strstr(err, "'no good'") != NULL,
	      "bad name: %s", err);

	/* Up to the limit; node pointers stay valid as the table grows; guids unique. */
	char name[32];
	for (int i = 2; i < FABRIC_MAX_NODES; i++) {
		snprintf(name, sizeof(name), "node%d", i);
		const struct fabric_node *n;
		if (fabric_node_get(f, name, &n, err, sizeof(err)) != 0 || n->id != i) {
			CHECK(0, "node %d: %s", i, err);
			break;
		}
	}
	CHECK(fabric_nnodes(f) == FABRIC_MAX_NODES, "%d nodes", fabric_nnodes(f));
	CHECK(strcmp(a->name, "n0") == 0 && fabric_node(f, 0) == a, "early pointers still valid");
	int dups = 0;
	for (int i = 1; i < fabric_nnodes(f); i++) {
		const struct fabric_node *n = fabric_node(f, i), *p = fabric_node(f, i - 1);
		dups += n->nic[0].guid == p->nic[0].guid || n->nic[0].guid == n->nic[1].guid;
	}
	CHECK(dups == 0, "guids unique: %d duplicates", dups);
	const struct fabric_node *over;
	CHECK(fabric_node_get(f, "one-too-many", &over, err, sizeof(err)) == -ENOSPC &&
		      strcmp(err, "cannot add node 'one-too-many': the fabric has 4096 nodes in use "
				  "(sessions or channels hold them), the limit") == 0,
	      "limit: '%s'", err);
	CHECK(fabric_node_get(f, "n0", &over, err, sizeof(err)) == 0 && over == a,
	      "existing nodes still found at the limit");

	/* Forgetting (red team finding 4): the name and slot go; the slot's next node gets a new
	 * id (the generation above the slot), its NICs the slot's gids; the others stay put. */
	const struct fabric_node *n7 = fabric_node(f, 7);
	int gid7 = n7->nic[1].gid;
	CHECK(fabric_node_forget(f, 7) == 0 && fabric_node_forget(f, 7) == -ENOENT &&
		      fabric_node(f, 7) == NULL && fabric_node_find(f, "node7") == NULL &&
		      fabric_node_at(f, 7) == NULL && fabric_nnodes(f) == FABRIC_MAX_NODES - 1 &&
		      fabric_node_slots(f) == FABRIC_MAX_NODES,
	      "node7 forgotten");
	int found = 0;
	for (int i = 0; i < FABRIC_MAX_NODES; i++) { /* every other name still in the table */
		snprintf(name, sizeof(name), i < 2 ? (i ? "gpu-box.1" : "n0") : "node%d", i);
		const struct fabric_node *n = fabric_node_find(f, name);
		found += n && n->id == i && fabric_node(f, i) == n;
	}
	CHECK(found == FABRIC_MAX_NODES - 1, "%d names found after a delete", found);
	CHECK(fabric_node_get(f, "one-more", &over, err, sizeof(err)) == 0 &&
		      over->id == FABRIC_MAX_NODES + 7 && fabric_node(f, 7) == NULL &&
		      fabric_node(f, FABRIC_MAX_NODES + 7) == over && fabric_node_at(f, 7) == over &&
		      over->nic[1].gid == gid7 && fabric_nic_by_gid(f, gid7) == &over->nic[1] &&
		      over->nic[0].guid == (0x5346000000000000ULL | (uint64_t)over->id << 8),
	      "slot 7 reused with id %d: %s", over ? over->id : -1, err);
	CHECK(fabric_node_get(f, "two-more", &over, err, sizeof(err)) == -ENOSPC, "full again");
	fabric_free(f);
	fabric_free(NULL);

	/* Eight NICs. */
	fabric_config_init(&cfg);
	cfg.nics_per_node = FABRIC_MAX_NICS;
	CHECK(fabric_new_ideal(&cfg, &f, err, sizeof(err)) == 0 &&
		      fabric_node_get(f, L63, &a, err, sizeof(err)) == 0 && a->nnics == 8 &&
		      strcmp(a->nic[7].name, L63 "-nic7") == 0,
	      "8 NICs on a 63-character node: %s", err);
	fabric_free(f);
}

/* A default link and NIC model (HDR), as a scenario's defaults would give. */
static struct model_link dlink(void)
{
	struct model_link l;
	param_defaults(PARAM_LINK, &l);
	return l;
}

static struct fabric_switch_cfg dswitch(int ports)
{
	struct fabric_switch_cfg c;
	param_defaults(PARAM_SWITCH, &c);
	c.ports = ports;
	return c;
}

#define NICEP(node, nic) (&(struct fabric_ep){FABRIC_EP_NIC, (node), (nic)})
#define SWEP(id) (&(struct fabric_ep){FABRIC_EP_SWITCH, (id), 0})

static void test_explicit(void)
{
	struct fabric_config cfg;
	struct fabric *f;
	struct model_nic nic;
	struct model_link l = dlink(), slow = dlink();
	struct fabric_switch_cfg sw = dswitch(3);
	char err[FABRIC_ERR_LEN];
	int other, bad;
	fabric_config_init(&cfg);
	param_defaults(PARAM_NIC, &nic);
	slow.rate_bps = 100000000000ull;
	CHECK(fabric_new_explicit(&cfg, &f, err, sizeof(err)) == 0, "new: %s", err);
	CHECK(strcmp(fabric_kind(f), "explicit") == 0 && !fabric_is_ideal(f), "kind");
	CHECK(fabric_add_node(f, "a", 2, &nic, 10, err, sizeof(err)) == 0 &&
		      fabric_add_node(f, "b", 1, &nic, 11, err, sizeof(err)) == 0 &&
		      fabric_add_switch(f, "sw", &sw, 12, err, sizeof(err)) == 0,
	      "build: %s", err);
	CHECK(fabric_add_node(f, "sw", 1, &nic, 13, err, sizeof(err)) == -EEXIST &&
		      strcmp(err, "'sw' is already the name of a switch") == 0,
	      "duplicate: '%s'", err);
	CHECK(fabric_add_switch(f, "a", &sw, 13, err, sizeof(err)) == -EEXIST &&
		      strcmp(err, "'a' is already the name of a node") == 0,
	      "duplicate: '%s'", err);
	CHECK(fabric_add_node(f, "c", 9, &nic, 13, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "a node has 1..8 NICs, not 9") == 0,
	      "9 NICs: '%s'", err);
	CHECK(fabric_add_node(f, "no/slash", 1, &nic, 13, err, sizeof(err)) == -EINVAL,
	      "bad name");
	const struct fabric_node *a = fabric_node_find(f, "a"), *b = fabric_node_find(f, "b");
	CHECK(a && b && a->nic[1].gid == 1 && b->nic[0].gid == 2 && fabric_nnics(f) == 3 &&
		      fabric_switch_find(f, "sw")->id == 0 && fabric_switch_find(f, "a") == NULL &&
		      fabric_node_find(f, "sw") == NULL,
	      "lookups");
	CHECK(fabric_add_link(f, NICEP(0, 0), SWEP(0), &l, &slow, 20, &other, err, sizeof(err)) == 0,
	      "link: %s", err);
	CHECK(fabric_add_link(f, SWEP(0), NICEP(0, 0), &l, &l, 21, &other, err, sizeof(err)) ==
			      -EBUSY &&
		      other == 20 &&
		      strcmp(err, "NIC a/0 (a-nic0) already has a link, to sw; a NIC has one "
				  "port") == 0,
	      "second link: '%s' %d", err, other);
	CHECK(fabric_add_link(f, SWEP(0), SWEP(0), &l, &l, 21, &other, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "a link cannot connect sw to itself") == 0,
	      "self: '%s'", err);
	CHECK(fabric_add_link(f, NICEP(0, 2), SWEP(0), &l, &l, 21, &other, err, sizeof(err)) ==
			      -ENODEV &&
		      strcmp(err, "node a has 2 NIC(s) (0..1); there is no NIC 2") == 0,
	      "no NIC: '%s'", err);
	struct model_link bad_l = l;
	bad_l.loss.kind = MODEL_LOSS_4STATE;
	bad_l.loss.p[0] = bad_l.loss.p[4] = 0xc0000000u;
	CHECK(fabric_add_link(f, NICEP(1, 0), SWEP(0), &l, &bad_l, 22, &other, err, sizeof(err)) ==
			      -EINVAL &&
		      strcmp(err, "loss.p14: 0.75 with p13 0.75 leaves state 1 with probability 1.5 > "
				  "1 (sw -> b/0)") == 0,
	      "model check: '%s'", err);
	CHECK(fabric_add_link(f, NICEP(1, 0), SWEP(0), &l, &l, 22, &other, err, sizeof(err)) == 0,
	      "b: %s", err);
	/* Not finished: a-nic1 has no link. */
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == -ENOTCONN && bad == 10 &&
		      strcmp(err, "NIC a/1 (a-nic1) has no link: every NIC needs one (add it to a "
				  "links entry)") == 0,
	      "disconnected: '%s' %d", err, bad);
	fabric_free(f);

	/* A complete one: a (2 NICs) and b on sw, sw full at 3 ports. */
	CHECK(fabric_new_explicit(&cfg, &f, err, sizeof(err)) == 0, "new");
	fabric_add_node(f, "a", 2, &nic, 10, err, sizeof(err));
	fabric_add_node(f, "b", 1, &nic, 11, err, sizeof(err));
	fabric_add_switch(f, "sw", &sw, 12, err, sizeof(err));
	CHECK(fabric_add_link(f, NICEP(0, 0), SWEP(0), &l, &slow, 20, &other, err, sizeof(err)) == 0 &&
		      fabric_add_link(f, SWEP(0), NICEP(0, 1), &l, &l, 21, &other, err, sizeof(err)) ==
			      0 &&
		      fabric_add_link(f, NICEP(1, 0), SWEP(0), &l, &l, 22, &other, err, sizeof(err)) ==
			      0,
	      "links: %s", err);
	fabric_add_switch(f, "sw2", &sw, 13, err, sizeof(err));
	CHECK(fabric_add_link(f, SWEP(0), SWEP(1), &l, &l, 23, &other, err, sizeof(err)) == -ENOSPC &&
		      strcmp(err, "switch sw has 3 port(s), all taken: this would be link 4 on it") ==
			      0,
	      "ports: '%s'", err);
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == 0, "finish: %s", err);
	CHECK(fabric_add_node(f, "late", 1, &nic, 1, err, sizeof(err)) == -EINVAL,
	      "read-only after finish");
	a = fabric_node(f, 0);
	b = fabric_node(f, 1);
	/* Directed links: 2c is a->b as written, 2c+1 back. */
	const struct fabric_link *l0 = fabric_link(f, 0), *l1 = fabric_link(f, 1),
				 *l2 = fabric_link(f, 2), *l3 = fabric_link(f, 3);
	CHECK(fabric_nlinks(f) == 6 && l0->cable == 0 && l1->cable == 0 && l2->cable == 1 &&
		      l0->from.kind == FABRIC_EP_NIC && l0->to.kind == FABRIC_EP_SWITCH &&
		      l2->from.kind == FABRIC_EP_SWITCH && l3->to.kind == FABRIC_EP_SWITCH &&
		      fabric_link(f, 6) == NULL,
	      "link ids");
	CHECK(a->nic[0].link_out == 0 && a->nic[0].link_in == 1 && a->nic[1].link_out == 3 &&
		      a->nic[1].link_in == 2 && b->nic[0].link_out == 4,
	      "NIC link ids");
	/* Hop latency = own + the switch entered; per direction models kept apart. */
	CHECK(l0->model.latency_ns == 140 && l1->model.latency_ns == 10 &&
		      l0->param.latency_ns == 10 && l0->model.rate_bps == 200000000000ull &&
		      l1->model.rate_bps == 100000000000ull && l0->model.fs_per_byte == 40000 &&
		      l1->model.fs_per_byte == 80000,
	      "models: %lld %lld %llu", (long long)l0->model.latency_ns,
	      (long long)l1->model.latency_ns, (unsigned long long)l1->model.fs_per_byte);
	CHECK(a->nic[0].model.host_fs_per_byte == 41667, "host fs/B %llu",
	      (unsigned long long)a->nic[0].model.host_fs_per_byte);
	const struct fabric_switch *s0 = fabric_switch(f, 0);
	CHECK(s0->ports_used == 3 && s0->nic_links == 3 && s0->switch_links == 0 &&
		      s0->nic_bps == 500000000000ull,
	      "switch sums %llu", (unsigned long long)s0->nic_bps);
	/* Paths. */
	struct model_path p;
	CHECK(fabric_path(f, 0, 0, 1, 0, &p, err, sizeof(err)) == 0 && p.nhops == 2 &&
		      p.link_id[0] == 0 && p.link_id[1] == 5 && p.hop[0] == &l0->model &&
		      fabric_path_latency(&p) == 150 && p.switching == MODEL_CUT_THROUGH,
	      "a/0 -> b: %d hops", p.nhops);
	CHECK(fabric_path(f, 1, 0, 0, 0, &p, err, sizeof(err)) == 0 && p.nhops == 2 &&
		      p.link_id[0] == 4 && p.link_id[1] == 1,
	      "b -> a/0");
	CHECK(fabric_path(f, 0, 0, 0, 1, &p, err, sizeof(err)) == 0 && p.nhops == 2 &&
		      p.link_id[0] == 0 && p.link_id[1] == 2,
	      "a/0 -> a/1 through the switch");
	CHECK(fabric_path(f, 0, 0, 0, 0, &p, err, sizeof(err)) == 0 && p.nhops == 0,
	      "a NIC to itself");
	CHECK(fabric_path(f, 0, 2, 1, 0, &p, err, sizeof(err)) == -ENODEV &&
		      strcmp(err, "node a has 2 NIC(s); there is no NIC 2") == 0,
	      "bad NIC: '%s'", err);
	CHECK(fabric_path(f, 5, 0, 1, 0, &p, err, sizeof(err)) == -ENODEV, "bad node");
	/* What the NICs report: uplink speed; the model's zero-byte time to the typical peer:
	 * o_send 300 + hops 140 + 10 + 46 header bytes at 200 Gb/s (2 ns) + o_recv 300. */
	CHECK(a->nic[0].speed_mbps == 200000 && a->nic[0].latency_ns == 752 &&
		      b->nic[0].latency_ns == 754 /* into a/0 at 100 Gb/s: headers take 4 ns */,
	      "reported %lld %lld", (long long)a->nic[0].speed_mbps, (long long)a->nic[0].latency_ns);
	/* hello of a node the scenario does not have. */
	const struct fabric_node *n;
	fabric_set_source(f, "x.yaml", "x", NULL);
	CHECK(fabric_node_get(f, "zz", &n, err, sizeof(err)) == -ENOENT &&
		      strcmp(err, "node 'zz' is not in scenario x.yaml (its 2 node(s): a, b)") == 0,
	      "unknown node: '%s'", err);
	CHECK(fabric_node_get(f, "b", &n, err, sizeof(err)) == 0 && n == b, "known node");
	/* The dump: one line of printable ASCII, the caller's members after the config. */
	const struct fabric_json_member extra[] = {{"x", "[1]"}, {"y", NULL}};
	const char *js;
	size_t jl;
	CHECK(fabric_json(f, extra, 2, false, &js, &jl) == 0 && jl == strlen(js) &&
		      strstr(js, "},\"x\":[1],\"y\":null,\"counts\":{"),
	      "json: %.300s", js);
	int odd = 0;
	for (size_t i = 0; i < jl; i++)
		odd += js[i] < 0x20 || js[i] > 0x7e;
	CHECK(odd == 0 && strstr(js, "\"paths\":[{\"src\":\"a/0\",\"dst\":\"a/1\",\"links\":[0,2]") &&
		      strstr(js, "\"hop_latency_ns\":140") && strstr(js, "\"kind\":\"explicit\""),
	      "json content: %.300s", js);
	fabric_set_seed(f, 99);
	CHECK(fabric_seed(f) == 99 && fabric_json(f, extra, 2, false, &js, &jl) == 0 &&
		      strstr(js, "\"seed\":99"),
	      "seed");
	fabric_free(f);
}

/*
 * Leaf-spine: n0..n3 on leaf0, n4..n7 on leaf1, spines s0 and s1 each linked
 * to both leaves. Equal-cost choice: destination gid mod 2 picks the spine.
 */
static void test_routes(void)
{
	struct fabric_config cfg;
	struct fabric *f;
	struct model_nic nic;
	struct model_link l = dlink();
	struct fabric_switch_cfg sw = dswitch(40);
	char err[FABRIC_ERR_LEN], name[16];
	int other, bad;
	fabric_config_init(&cfg);
	param_defaults(PARAM_NIC, &nic);
	fabric_new_explicit(&cfg, &f, err, sizeof(err));
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		fabric_add_node(f, name, 1, &nic, i, err, sizeof(err));
	}
	fabric_add_switch(f, "leaf0", &sw, 100, err, sizeof(err));
	fabric_add_switch(f, "leaf1", &sw, 101, err, sizeof(err));
	fabric_add_switch(f, "s0", &sw, 102, err, sizeof(err));
	fabric_add_switch(f, "s1", &sw, 103, err, sizeof(err));
	for (int i = 0; i < 8; i++) /* cables 0..7: directed 2i up, 2i+1 down */
		fabric_add_link(f, NICEP(i, 0), SWEP(i / 4), &l, &l, 200 + i, &other, err, sizeof(err));
	/* cables 8..11: leaf0-s0 (16,17), leaf0-s1 (18,19), leaf1-s0 (20,21), leaf1-s1 (22,23) */
	for (int leaf = 0; leaf < 2; leaf++)
		for (int sp = 0; sp < 2; sp++)
			CHECK(fabric_add_link(f, SWEP(leaf), SWEP(2 + sp), &l, &l, 300, &other, err,
					      sizeof(err)) == 0,
			      "uplink: %s", err);
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == 0, "finish: %s", err);
	struct model_path p;
	CHECK(fabric_path(f, 0, 0, 4, 0, &p, err, sizeof(err)) == 0 && p.nhops == 4 &&
		      p.link_id[0] == 0 && p.link_id[1] == 16 && p.link_id[2] == 21 &&
		      p.link_id[3] == 9 && fabric_path_latency(&p) == 140 * 3 + 10,
	      "n0 -> n4 (gid 4, even): via s0: %u %u %u %u", p.link_id[0], p.link_id[1],
	      p.link_id[2], p.link_id[3]);
	CHECK(fabric_path(f, 0, 0, 5, 0, &p, err, sizeof(err)) == 0 && p.nhops == 4 &&
		      p.link_id[1] == 18 && p.link_id[2] == 23 && p.link_id[3] == 11,
	      "n0 -> n5 (gid 5, odd): via s1: %u %u", p.link_id[1], p.link_id[2]);
	CHECK(fabric_path(f, 6, 0, 1, 0, &p, err, sizeof(err)) == 0 && p.nhops == 4 &&
		      p.link_id[0] == 12 && p.link_id[1] == 22 && p.link_id[2] == 19 &&
		      p.link_id[3] == 3,
	      "n6 -> n1 (odd): via s1: %u %u", p.link_id[1], p.link_id[2]);
	CHECK(fabric_path(f, 1, 0, 2, 0, &p, err, sizeof(err)) == 0 && p.nhops == 2, "same leaf");
	/* Typical peer latency: of 7 others, 3 at 150 ns, 4 at 430 ns of hops: the median is
	 * 430 + 600 of overheads + 2 of headers. */
	CHECK(fabric_node(f, 0)->nic[0].latency_ns == 1032, "typical latency %lld",
	      (long long)fabric_node(f, 0)->nic[0].latency_ns);
	const struct fabric_switch *leaf0 = fabric_switch(f, 0);
	CHECK(leaf0->nic_bps == 800000000000ull && leaf0->switch_bps == 400000000000ull,
	      "leaf sums");
	fabric_free(f);

	/* Two islands: no path, reported once at finish. */
	fabric_new_explicit(&cfg, &f, err, sizeof(err));
	fabric_add_node(f, "a", 1, &nic, 1, err, sizeof(err));
	fabric_add_node(f, "b", 1, &nic, 2, err, sizeof(err));
	fabric_add_switch(f, "x", &sw, 3, err, sizeof(err));
	fabric_add_switch(f, "y", &sw, 4, err, sizeof(err));
	fabric_add_link(f, NICEP(0, 0), SWEP(0), &l, &l, 5, &other, err, sizeof(err));
	fabric_add_link(f, NICEP(1, 0), SWEP(1), &l, &l, 6, &other, err, sizeof(err));
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == -EHOSTUNREACH && bad == -1 &&
		      strcmp(err, "no path from a/0 (a-nic0) to b/0 (b-nic0): switch x does not "
				  "reach switch y") == 0,
	      "islands: '%s'", err);
	fabric_free(f);

	/* NIC to NIC: two nodes back to back work; a third cannot be reached. */
	fabric_new_explicit(&cfg, &f, err, sizeof(err));
	fabric_add_node(f, "a", 1, &nic, 1, err, sizeof(err));
	fabric_add_node(f, "b", 1, &nic, 2, err, sizeof(err));
	fabric_add_link(f, NICEP(0, 0), NICEP(1, 0), &l, &l, 5, &other, err, sizeof(err));
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == 0, "back to back: %s", err);
	CHECK(fabric_path(f, 0, 0, 1, 0, &p, err, sizeof(err)) == 0 && p.nhops == 1 &&
		      p.link_id[0] == 0 && fabric_path_latency(&p) == 10 &&
		      fabric_path(f, 1, 0, 0, 0, &p, err, sizeof(err)) == 0 && p.link_id[0] == 1,
	      "back to back paths");
	fabric_free(f);

	/* A chain of 8 switches: 9 hops end to end, over the model's limit of 8. */
	fabric_new_explicit(&cfg, &f, err, sizeof(err));
	fabric_add_node(f, "a", 1, &nic, 1, err, sizeof(err));
	fabric_add_node(f, "b", 1, &nic, 2, err, sizeof(err));
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		fabric_add_switch(f, name, &sw, 10 + i, err, sizeof(err));
		if (i)
			fabric_add_link(f, SWEP(i - 1), SWEP(i), &l, &l, 20, &other, err, sizeof(err));
	}
	fabric_add_link(f, NICEP(0, 0), SWEP(0), &l, &l, 5, &other, err, sizeof(err));
	fabric_add_link(f, NICEP(1, 0), SWEP(7), &l, &l, 6, &other, err, sizeof(err));
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == -ELOOP &&
		      strcmp(err, "the path from a-nic0 to b-nic0 has 9 hops; the limit is 8") == 0,
	      "too long: '%s'", err);
	fabric_free(f);
}

/* fabric_lint's lines, collected. */
struct lint_log {
	int n;
	char line[16][1024];
};

static void lint_collect(void *ctx, const char *msg)
{
	struct lint_log *g = ctx;
	if (g->n < 16)
		snprintf(g->line[g->n], sizeof(g->line[0]), "%s", msg);
	g->n++;
}

/* The leaf-spine of test_routes; lossy[] gives cable c's a->b (2c) and b->a (2c+1) loss. */
static struct fabric *lint_fabric(const double *lossy, int nlossy, const struct model_nic *nics)
{
	struct fabric_config cfg;
	struct fabric *f;
	struct fabric_switch_cfg sw = dswitch(40);
	char err[FABRIC_ERR_LEN], name[16];
	int other, bad;
	fabric_config_init(&cfg);
	fabric_new_explicit(&cfg, &f, err, sizeof(err));
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		fabric_add_node(f, name, 1, &nics[i], i, err, sizeof(err));
	}
	fabric_add_switch(f, "leaf0", &sw, 100, err, sizeof(err));
	fabric_add_switch(f, "leaf1", &sw, 101, err, sizeof(err));
	fabric_add_switch(f, "s0", &sw, 102, err, sizeof(err));
	fabric_add_switch(f, "s1", &sw, 103, err, sizeof(err));
	for (int c = 0; c < 12; c++) {
		struct model_link l[2] = {dlink(), dlink()};
		for (int d = 0; d < 2; d++) {
			double p = 2 * c + d < nlossy ? lossy[2 * c + d] : 0;
			if (p > 0) {
				l[d].loss.kind = MODEL_LOSS_BERNOULLI;
				l[d].loss.p[0] = model_prob(p);
			}
		}
		if (c < 8) /* directed 2c up, 2c+1 down */
			fabric_add_link(f, NICEP(c, 0), SWEP(c / 4), &l[0], &l[1], 200 + c, &other,
					err, sizeof(err));
		else /* 16, 17 leaf0-s0; 18, 19 leaf0-s1; 20, 21 leaf1-s0; 22, 23 leaf1-s1 */
			fabric_add_link(f, SWEP((c - 8) / 2), SWEP(2 + (c - 8) % 2), &l[0], &l[1],
					300, &other, err, sizeof(err));
	}
	CHECK(fabric_finish(f, &bad, err, sizeof(err)) == 0, "lint fabric: %s", err);
	return f;
}

static void test_lint(void)
{
	struct model_nic nics[8];
	double loss[24] = {0};
	struct lint_log g = {0};
	struct fabric *f;
	for (int i = 0; i < 8; i++) {
		param_defaults(PARAM_NIC, &nics[i]);
		nics[i].timeout_exp = 10; /* the long-timeout line has a case of its own, below */
	}

	/* No loss: nothing to say, whatever the timeouts. */
	nics[0].timeout_exp = 0;
	f = lint_fabric(loss, 24, nics);
	CHECK(fabric_lint(f, lint_collect, &g) == 0 && g.n == 0, "lossless: %d lines", g.n);
	fabric_free(f);

	/*
	 * n0 never times out. Its downlink (1) is lossy, but only others send over it; s0 ->
	 * leaf0 (17) carries only leaf1's traffic; leaf0 -> s0 (16) and leaf0 -> s1 (18) carry
	 * n0's to leaf1: those hang. n1 and n5 give up after one retry: at 1e-5 (links 1, 16,
	 * 17, 18) that is one packet in 10^10, under the threshold, but leaf1 -> s1 (22, 5 %)
	 * carries n5's traffic to n1 and n3: one packet in 400 fails.
	 */
	nics[1].retry_count = 1;
	nics[5].retry_count = 1;
	loss[1] = 1e-5;
	loss[16] = 1e-5;
	loss[17] = 1e-5;
	loss[18] = 1e-5;
	loss[22] = 0.05;
	f = lint_fabric(loss, 24, nics);
	g.n = 0;
	int n = fabric_lint(f, lint_collect, &g);
	CHECK(n == 3 && g.n == 3, "hazards: %d, %d lines: '%s' '%s' '%s' '%s'", n, g.n, g.line[0],
	      g.line[1], g.line[2], g.line[3]);
	CHECK(strncmp(g.line[0], "link 16 (leaf0 -> s0, loss bernoulli, 0.001 % of packets) carries "
				 "traffic from n0-nic0 with timeout_exp 0 (an infinite ACK timeout): a "
				 "lost last packet is never recovered", 144) == 0 &&
		      strstr(g.line[0], "give that NIC a timeout_exp of 1..31") != NULL,
	      "timeout hazard: '%s'", g.line[0]);
	CHECK(strncmp(g.line[1], "link 18 (leaf0 -> s1,", 21) == 0 &&
		      strstr(g.line[1], "from n0-nic0 with timeout_exp 0") != NULL,
	      "timeout hazard: '%s'", g.line[1]);
	CHECK(strcmp(g.line[2], "link 22 (leaf1 -> s1, loss bernoulli, 5 % of packets) carries "
				"traffic from n5-nic0 with retry_count 1: about one packet in 400 is "
				"lost 2 times in a row, which fails its message and connection "
				"(ncclRemoteError); raise retry_count (at most 7, NCCL's default) or "
				"lower the loss") == 0,
	      "retry hazard: '%s'", g.line[2]);
	fabric_free(f);

	/* Everything lossy, nobody times out: 8 lines, then one counting the other 16. */
	for (int i = 0; i < 8; i++) {
		param_defaults(PARAM_NIC, &nics[i]);
		nics[i].timeout_exp = 0;
	}
	for (int i = 0; i < 24; i++)
		loss[i] = 1e-4;
	f = lint_fabric(loss, 24, nics);
	g.n = 0;
	n = fabric_lint(f, lint_collect, &g);
	CHECK(n == 24 && g.n == 9 &&
		      strstr(g.line[1], "link 1 (leaf0 -> n0/0, loss bernoulli, 0.01 % of packets) "
					"carries traffic from n1-nic0 and 6 other NIC(s) with "
					"timeout_exp 0") == g.line[1] &&
		      strcmp(g.line[8], "... and 16 more lossy link(s) with the same timeout_exp 0 "
					"hazard (tools/simfabric fabric lists every link)") == 0,
	      "capped: %d hazards, %d lines, '%s' '%s'", n, g.n, g.line[1], g.line[8]);
	fabric_free(f);

	/*
	 * NCCL's default ACK timeout (timeout_exp 20: 4.3 s) on a lossy path: a line, not a
	 * hazard. Only leaf0 -> n0 (1) is lossy; every other NIC sends to n0 over it, n1 first.
	 * At 17 (0.54 s) nothing is said.
	 */
	for (int i = 0; i < 24; i++)
		loss[i] = i == 1 ? 1e-3 : 0;
	for (int i = 0; i < 8; i++)
		param_defaults(PARAM_NIC, &nics[i]);
	CHECK(nics[0].timeout_exp == 20, "NCCL's default timeout_exp: %u", nics[0].timeout_exp);
	f = lint_fabric(loss, 24, nics);
	g.n = 0;
	n = fabric_lint(f, lint_collect, &g);
	CHECK(n == 0 && g.n == 1 &&
		      strcmp(g.line[0],
			     "link 1 (leaf0 -> n0/0, loss bernoulli, 0.1 % of packets) carries "
			     "traffic from n1-nic0 with timeout_exp 20: a lost packet that ends a "
			     "message is retried only after an ACK timeout of 4.29 s (4.096 us x 2^20), "
			     "and each such loss stalls its connection that long; a timeout_exp of 10 "
			     "to 14 (4.2 to 67 ms) keeps a lossy emulated fabric moving, as the shipped "
			     "lossy scenarios do") == 0,
	      "long timeout: %d hazards, %d lines, '%s'", n, g.n, g.line[0]);
	fabric_free(f);
	for (int i = 0; i < 8; i++)
		nics[i].timeout_exp = FABRIC_LINT_SLOW_EXP - 1;
	f = lint_fabric(loss, 24, nics);
	g.n = 0;
	CHECK(fabric_lint(f, lint_collect, &g) == 0 && g.n == 0, "0.54 s: %d lines '%s'", g.n,
	      g.line[0]);
	fabric_free(f);

	/* The ideal fabric has no links. */
	struct fabric_config cfg;
	char err[FABRIC_ERR_LEN];
	fabric_config_init(&cfg);
	fabric_new_ideal(&cfg, &f, err, sizeof(err));
	g.n = 0;
	CHECK(fabric_lint(f, lint_collect, &g) == 0 && g.n == 0, "ideal");
	fabric_free(f);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_names), CHECK_CASE(test_params),   CHECK_CASE(test_param_types),
	CHECK_CASE(test_ideal), CHECK_CASE(test_explicit), CHECK_CASE(test_routes),
	CHECK_CASE(test_lint),
};

CHECK_MAIN(cases)
