/* SPDX-License-Identifier: MIT */
/*
 * test_fabric.c - the fabric description: node-name rules with their exact
 * messages, the parameter table, and the ideal fabric's on-demand nodes.
 */
#include "sim/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

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
	char err[FABRIC_ERR_LEN];
	fabric_config_init(&cfg);
	CHECK(cfg.nics_per_node == 1 && cfg.speed_mbps == 400000 && cfg.latency_ns == 0,
	      "defaults: %lld %lld %lld", (long long)cfg.nics_per_node, (long long)cfg.speed_mbps,
	      (long long)cfg.latency_ns);
	CHECK(fabric_config_check(&cfg, err, sizeof(err)) == 0, "defaults are valid: %s", err);
	/* Every table entry: default within bounds, findable, settable at min and max. */
	for (int i = 0; i < fabric_nparams; i++) {
		const struct fabric_param *p = &fabric_params[i];
		char v[32];
		CHECK(p->min <= p->def && p->def <= p->max, "%s: default in range", p->name);
		CHECK(fabric_param_find(p->name) == p, "%s: found", p->name);
		CHECK(p->unit && p->doc && *p->unit && *p->doc, "%s: unit and doc", p->name);
		snprintf(v, sizeof(v), "%lld", (long long)p->min);
		CHECK(fabric_config_set(&cfg, p->name, v, err, sizeof(err)) == 0 &&
			      fabric_config_get(&cfg, p) == p->min,
		      "%s = min", p->name);
		snprintf(v, sizeof(v), "%lld", (long long)p->max);
		CHECK(fabric_config_set(&cfg, p->name, v, err, sizeof(err)) == 0 &&
			      fabric_config_get(&cfg, p) == p->max,
		      "%s = max", p->name);
		snprintf(v, sizeof(v), "%lld", (long long)p->max + 1);
		CHECK(fabric_config_set(&cfg, p->name, v, err, sizeof(err)) == -EINVAL,
		      "%s = max+1", p->name);
	}
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
	CHECK(fabric_param_find("bogus") == NULL, "find unknown");
	fabric_config_init(&cfg);
	cfg.nics_per_node = 0;
	CHECK(fabric_config_check(&cfg, err, sizeof(err)) == -EINVAL &&
		      strcmp(err, "nics_per_node: '0' is not an integer in 1..8 (count)") == 0,
	      "check: '%s'", err);
	struct fabric *f = (struct fabric *)1;
	CHECK(fabric_new_ideal(&cfg, &f, err, sizeof(err)) == -EINVAL && f == NULL,
	      "new with a bad config");
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
		      strcmp(err, "cannot add node 'one-too-many': the fabric has 4096 nodes, the "
				  "limit") == 0,
	      "limit: '%s'", err);
	CHECK(fabric_node_get(f, "n0", &over, err, sizeof(err)) == 0 && over == a,
	      "existing nodes still found at the limit");
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

int main(void)
{
	test_names();
	test_params();
	test_ideal();
	if (failures) {
		fprintf(stderr, "test_fabric: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_fabric: %d checks passed\n", checks);
	return 0;
}
