/* SPDX-License-Identifier: MIT */
/*
 * job.c - the scenario's job: (what to run over the fabric) and expect:
 * (what must come of it). See scn_int.h; the schema is in scenarios/README.md
 * ("Jobs: job: and expect:").
 *
 * Both sections are validated against the finished fabric and resolved,
 * defaults filled in, into JSON texts that the fabric dump carries under
 * "job" and "expect"; `simfabric run` (tools/sf/recipe.py) reads them there and
 * never parses YAML itself. Errors are "file:line:column: key: reason" like
 * the rest of the loader.
 *
 * expect: is parsed after job: (parse_top's order) and reads the job's rank
 * count and program back from the job's JSON, which starts with them in a
 * fixed shape for that: {"ranks":N,"program":"name",...}.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/fault.h"
#include "sim/scn/jbuf.h"
#include "sim/scn/param.h"
#include "sim/scn/scn_int.h"

#define JOB_MAX_NODES 4096
#define JOB_MAX_RANKS 65536
#define JOB_MAX_GPUS_PER_NODE 64
#define JOB_MAX_ARGS 256
#define JOB_MAX_ENV 64
#define JOB_MAX_TEXT 4096 /* one argument or environment value */
#define JOB_MAX_SIZES 256
#define JOB_MAX_SIZE (16ull << 30) /* bytes */
#define JOB_DEFAULT_TIMEOUT_S 600
#define JOB_MAX_SECONDS 86400

/* Hands the text to the scenario's slot (or fails for lack of memory). */
static int set_section(struct scn *s, struct jbuf *b, char **slot)
{
	char *text;
	if (jbuf_take(b, &text, NULL))
		return scn_fail_oom(s);
	free(*slot);
	*slot = text;
	return 0;
}

/* ,"key":value (fmt) if have, else ,"key":null. */
__attribute__((format(printf, 4, 5))) static void json_opt(struct jbuf *b, const char *key,
							   bool have, const char *fmt, ...)
{
	jbuf_printf(b, ",\"%s\":", key);
	if (!have) {
		jbuf_puts(b, "null");
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	jbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

static const char *quote(const yaml_node_t *v, char *q, size_t cap)
{
	return param_quote(scn_text(v), q, cap);
}

/* ---- collectives ----------------------------------------------------------------------- */

static const char *const coll_names[] = {"allreduce", "allgather", "reducescatter", "broadcast",
					 "reduce",    "alltoall",  "sendrecv",	    NULL};
#define NCOLLS 7
#define COLL_REDUCE 4

struct colls {
	unsigned set; /* bit per coll_names entry */
	bool all;
	bool torch; /* tools/torch_collectives.py has no reduce */
};

static int coll_word(struct scn *s, const yaml_node_t *at, const char *key, const char *w,
		     void *ctx)
{
	struct colls *c = ctx;
	char q[80];
	if (!strcmp(w, "all")) {
		c->all = true;
		return 0;
	}
	for (int i = 0; coll_names[i]; i++) {
		if (strcmp(w, coll_names[i]))
			continue;
		if (c->torch && i == COLL_REDUCE)
			return scn_fail(s, at, key,
					"'reduce' is not among tools/torch_collectives.py's collectives "
					"(allreduce, allgather, reducescatter, broadcast, alltoall, "
					"sendrecv)");
		if (c->set & (1u << i))
			return scn_fail(s, at, key, "'%s' is listed twice", w);
		c->set |= 1u << i;
		return 0;
	}
	return scn_fail(s, at, key,
			"'%s' is not a collective (known: all, allreduce, allgather, reducescatter, "
			"broadcast, reduce, alltoall, sendrecv)",
			param_quote(w, q, sizeof(q)));
}

static int parse_colls(struct scn *s, const yaml_node_t *v, const char *key, bool torch,
		       struct colls *c)
{
	c->set = 0;
	c->all = false;
	c->torch = torch;
	if (scn_for_words(s, v, key, coll_word, c))
		return s->rc;
	if (c->all && c->set)
		return scn_fail(s, v, key, "'all' already names every collective");
	return 0;
}

static void json_colls(struct jbuf *b, const struct colls *c)
{
	jbuf_puts(b, "[");
	for (int i = 0, n = 0; i < NCOLLS; i++)
		if ((c->all && !(c->torch && i == COLL_REDUCE)) || (c->set & (1u << i)))
			jbuf_printf(b, "%s\"%s\"", n++ ? "," : "", coll_names[i]);
	jbuf_puts(b, "]");
}

/* ---- job: ------------------------------------------------------------------------------- */

enum program { P_HARNESS, P_NCCL, P_TORCH, P_COMMAND };
static const char *const program_names[] = {"harness", "nccl", "torch", "command", NULL};

#define FOR_H (1u << P_HARNESS)
#define FOR_N (1u << P_NCCL)
#define FOR_T (1u << P_TORCH)
#define FOR_C (1u << P_COMMAND)
#define FOR_ALL (FOR_H | FOR_N | FOR_T | FOR_C)

enum jkey {
	J_PROGRAM,
	J_NODES,
	J_RANKS,
	J_GPUS,
	J_TIMEOUT,
	J_ENV,
	J_ARGS,
	J_TESTS,
	J_MAX_BYTES,
	J_BOUND,
	J_API,
	J_COLLS,
	J_SIZES,
	J_ITERS,
	J_WARMUP,
	J_DTYPE,
	J_OP,
	J_OP_TIMEOUT,
	J_COMMAND,
	J_NKEYS
};

static const struct {
	const char *name;
	unsigned programs;
} job_keys[J_NKEYS] = {
	[J_PROGRAM] = {"program", FOR_ALL},
	[J_NODES] = {"nodes", FOR_ALL},
	[J_RANKS] = {"ranks", FOR_ALL},
	[J_GPUS] = {"gpus_per_node", FOR_ALL},
	[J_TIMEOUT] = {"timeout_s", FOR_ALL},
	[J_ENV] = {"env", FOR_ALL},
	[J_ARGS] = {"args", FOR_ALL},
	[J_TESTS] = {"tests", FOR_H},
	[J_MAX_BYTES] = {"max_bytes", FOR_H},
	[J_BOUND] = {"bound_s", FOR_H},
	[J_API] = {"api_version", FOR_H},
	[J_COLLS] = {"collectives", FOR_N | FOR_T},
	[J_SIZES] = {"sizes", FOR_N | FOR_T},
	[J_ITERS] = {"iters", FOR_N | FOR_T},
	[J_WARMUP] = {"warmup", FOR_N | FOR_T},
	[J_DTYPE] = {"dtype", FOR_N},
	[J_OP] = {"op", FOR_N},
	[J_OP_TIMEOUT] = {"op_timeout_s", FOR_N},
	[J_COMMAND] = {"command", FOR_C},
};

static const char *keys_of(unsigned programs, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = 0;
	for (int i = 0; i < J_NKEYS && len < cap; i++)
		if (job_keys[i].programs & programs)
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
						job_keys[i].name);
	return buf;
}

/* The variables the launcher sets per rank: a job's env: may not set them. */
static const char *const launcher_env[] = {
	"RANK",		 "LOCAL_RANK",	     "WORLD_SIZE",	  "LOCAL_WORLD_SIZE", "GROUP_RANK",
	"NODE_RANK",	 "MASTER_ADDR",	     "MASTER_PORT",	  "NCCL_NET",	      "NCCL_NET_PLUGIN",
	"NCCL_HOSTID",	 "SIMFABRIC_SOCKET", "SIMFABRIC_NODE",	  "SIMFABRIC_RESULT", "SIMFABRIC_RUN_DIR",
	"CUDA_VISIBLE_DEVICES", NULL};

static int parse_env(struct scn *s, const yaml_node_t *v, struct jbuf *b)
{
	char q[80];
	if (scn_expect(s, v, YAML_MAPPING_NODE, "env", "a mapping of NAME: value"))
		return s->rc;
	if (scn_npairs(v) > JOB_MAX_ENV)
		return scn_fail(s, v, "env", "%d variables; the limit is %d", scn_npairs(v),
				JOB_MAX_ENV);
	jbuf_puts(b, "{");
	for (int i = 0; i < scn_npairs(v); i++) {
		const char *name;
		yaml_node_t *k, *val;
		if (scn_pair_key(s, v, i, &name, &k, &val))
			return s->rc;
		size_t n = strlen(name);
		bool ok = n <= 128 && strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
						   "0123456789_") == n &&
			  !(name[0] >= '0' && name[0] <= '9');
		if (!ok)
			return scn_fail(s, k, "env", "'%s' is not a variable name ([A-Za-z_][A-Za-z0-9_]*)",
					param_quote(name, q, sizeof(q)));
		for (int j = 0; launcher_env[j]; j++)
			if (!strcmp(name, launcher_env[j]))
				return scn_fail(s, k, name,
						"set by the launcher for every rank; a job cannot set "
						"it");
		if (scn_expect(s, val, YAML_SCALAR_NODE, name, "a string"))
			return s->rc;
		if (strlen(scn_text(val)) > JOB_MAX_TEXT)
			return scn_fail(s, val, name, "%zu characters; the limit is %d",
					strlen(scn_text(val)), JOB_MAX_TEXT);
		jbuf_puts(b, i ? "," : "");
		jbuf_str(b, name);
		jbuf_puts(b, ":");
		jbuf_str(b, scn_text(val));
	}
	jbuf_puts(b, "}");
	return 0;
}

/* A list of argument strings (args:, command:). */
static int parse_argv(struct scn *s, const yaml_node_t *v, const char *key, int min,
		      struct jbuf *b)
{
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, key,
		       "a list of arguments like [python3, -c, \"print(1)\"]"))
		return s->rc;
	int n = scn_nitems(v);
	if (n < min)
		return scn_fail(s, v, key, "an empty list (the program to run comes first)");
	if (n > JOB_MAX_ARGS)
		return scn_fail(s, v, key, "%d arguments; the limit is %d", n, JOB_MAX_ARGS);
	jbuf_puts(b, "[");
	for (int i = 0; i < n; i++) {
		yaml_node_t *e = scn_get_item(s, v, i, key);
		if (!e || scn_expect(s, e, YAML_SCALAR_NODE, key, "a string"))
			return s->rc;
		if (strlen(scn_text(e)) > JOB_MAX_TEXT)
			return scn_fail(s, e, key, "%zu characters; the limit is %d",
					strlen(scn_text(e)), JOB_MAX_TEXT);
		jbuf_puts(b, i ? "," : "");
		jbuf_str(b, scn_text(e));
	}
	jbuf_puts(b, "]");
	return 0;
}

struct words {
	struct jbuf *b;
	int n;
	bool all;
};

static int test_word(struct scn *s, const yaml_node_t *at, const char *key, const char *w,
		     void *ctx)
{
	struct words *t = ctx;
	char q[80];
	size_t n = strlen(w);
	if (!strcmp(w, "all")) {
		t->all = true;
		return 0;
	}
	if (!n || n > 32 || strspn(w, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
		return scn_fail(s, at, key,
				"'%s' is not a test name ([a-z0-9_]; `simfabric-harness --list` "
				"lists them)",
				param_quote(w, q, sizeof(q)));
	jbuf_puts(t->b, t->n++ ? "," : "");
	jbuf_str(t->b, w);
	return 0;
}

/* sizes: [8, 4K, 1M] or {min: 8, max: 64M, factor: 2}. */
static int parse_sizes(struct scn *s, const yaml_node_t *v, struct jbuf *b)
{
	uint64_t list[JOB_MAX_SIZES];
	int n = 0;
	if (v->type == YAML_SEQUENCE_NODE) {
		n = scn_nitems(v);
		if (n < 1 || n > JOB_MAX_SIZES)
			return scn_fail(s, v, "sizes", "a list of 1..%d sizes, not %d", JOB_MAX_SIZES,
					n);
		for (int i = 0; i < n; i++) {
			yaml_node_t *e = scn_get_item(s, v, i, "sizes");
			if (!e || scn_get_size(s, e, "sizes", 1, JOB_MAX_SIZE, &list[i]))
				return s->rc;
		}
	} else if (v->type == YAML_MAPPING_NODE) {
		const yaml_node_t *vmin = NULL, *vmax = NULL, *vfac = NULL;
		const struct scn_key keys[] = {
			{"min", &vmin, NULL}, {"max", &vmax, NULL}, {"factor", &vfac, NULL}};
		if (scn_get_keys(s, v, "sizes", keys, SCN_NKEYS(keys)))
			return s->rc;
		uint64_t lo = 8, hi = 64ull << 20;
		int64_t factor = 2;
		if ((vmin && scn_get_size(s, vmin, "min", 1, JOB_MAX_SIZE, &lo)) ||
		    (vmax && scn_get_size(s, vmax, "max", 1, JOB_MAX_SIZE, &hi)) ||
		    (vfac && scn_get_int(s, vfac, "factor", 2, 1024, "", &factor)))
			return s->rc;
		if (lo > hi)
			return scn_fail(s, vmax ? vmax : v, "max", "%llu is below min %llu",
					(unsigned long long)hi, (unsigned long long)lo);
		for (uint64_t x = lo; x <= hi; x *= (uint64_t)factor) {
			if (n == JOB_MAX_SIZES)
				return scn_fail(s, v, "sizes", "more than %d sizes from %llu to %llu",
						JOB_MAX_SIZES, (unsigned long long)lo,
						(unsigned long long)hi);
			list[n++] = x;
		}
	} else {
		return scn_expect(s, v, YAML_SEQUENCE_NODE, "sizes",
				  "a list of sizes or {min: 8, max: 64M, factor: 2}");
	}
	jbuf_puts(b, "[");
	for (int i = 0; i < n; i++)
		jbuf_printf(b, "%s%llu", i ? "," : "", (unsigned long long)list[i]);
	jbuf_puts(b, "]");
	return 0;
}

/* The job's node names, resolved: nodes: N (the fabric's first N, or node0.. on the ideal one) or
 * a list of names. */
struct nodes {
	char (*name)[FABRIC_NAME_MAX + 1];
	int n;
};

static int resolve_nodes(struct scn *s, const yaml_node_t *job, const yaml_node_t *v,
			 struct nodes *out)
{
	char err[FABRIC_ERR_LEN];
	int nfab = fabric_nnodes(s->f);
	int64_t n = nfab;
	bool listed = v && v->type != YAML_SCALAR_NODE;
	if (!v && s->ideal)
		return scn_fail(s, job, "nodes",
				"missing: the ideal fabric makes nodes on demand, so the job says how "
				"many (nodes: N)");
	if (v && !listed &&
	    scn_get_int(s, v, "nodes", 1, s->ideal ? JOB_MAX_NODES : nfab, "count", &n))
		return s->rc;
	if (listed) {
		if (scn_expect(s, v, YAML_SEQUENCE_NODE, "nodes", "a count or a list of node names"))
			return s->rc;
		n = scn_nitems(v);
		if (n < 1 || n > JOB_MAX_NODES)
			return scn_fail(s, v, "nodes", "a list of 1..%d nodes, not %d", JOB_MAX_NODES,
					(int)n);
	}
	out->n = (int)n;
	out->name = calloc((size_t)n, sizeof(*out->name));
	if (!out->name)
		return scn_fail_oom(s);
	for (int i = 0; i < out->n; i++) {
		if (!listed) { /* the fabric's first n, or node0.. on the ideal one */
			if (s->ideal)
				snprintf(out->name[i], sizeof(out->name[i]), "node%d", i);
			else
				strcpy(out->name[i], fabric_node(s->f, i)->name);
			continue;
		}
		yaml_node_t *e = scn_get_item(s, v, i, "nodes");
		struct scn_place p;
		if (!e)
			return s->rc;
		if (s->ideal) {
			if (scn_expect(s, e, YAML_SCALAR_NODE, "nodes", "a node name"))
				return s->rc;
			if (fabric_name_check(scn_text(e), err, sizeof(err)))
				return scn_fail(s, e, "nodes", "%s", err);
		} else if (scn_get_place(s, e, "nodes", SCN_PLACE_NODE | SCN_PLACE_LIST, &p)) {
			return s->rc;
		}
		const char *nm = scn_text(e);
		for (int j = 0; j < i; j++)
			if (!strcmp(out->name[j], nm))
				return scn_fail(s, e, "nodes", "'%s' is listed twice", nm);
		snprintf(out->name[i], sizeof(out->name[i]), "%s", nm);
	}
	return 0;
}

/* The harness names its ranks <prefix><rank>: the nodes must be exactly that. */
static int harness_prefix(struct scn *s, const yaml_node_t *at, const struct nodes *nd,
			  char *prefix, size_t cap)
{
	const char *first = nd->name[0];
	size_t k = strlen(first);
	while (k > 0 && first[k - 1] >= '0' && first[k - 1] <= '9')
		k--;
	if (k >= cap)
		k = cap - 1;
	memcpy(prefix, first, k);
	prefix[k] = 0;
	for (int i = 0; i < nd->n; i++) {
		char want[FABRIC_NAME_MAX + 16];
		snprintf(want, sizeof(want), "%s%d", prefix, i);
		if (strcmp(nd->name[i], want))
			return scn_fail(s, at, "nodes",
					"the harness names its ranks <prefix><rank> (%s0, %s1, ...): "
					"node %d is '%s', not '%s'",
					prefix, prefix, i, nd->name[i], want);
	}
	return 0;
}

int scn_parse_job(struct scn *s, const yaml_node_t *v)
{
	const yaml_node_t *val[J_NKEYS] = {0}, *key[J_NKEYS] = {0};
	char keys[512];
	struct jbuf b = JBUF_INIT, sub = JBUF_INIT;
	struct nodes nd = {0};
	int prog = -1;

	struct scn_key known[J_NKEYS];
	for (int j = 0; j < J_NKEYS; j++)
		known[j] = (struct scn_key){job_keys[j].name, &val[j], &key[j]};
	if (scn_expect(s, v, YAML_MAPPING_NODE, "job",
		       "a mapping like {program: nccl, nodes: 2, collectives: all}") ||
	    scn_get_keys(s, v, "job", known, J_NKEYS))
		return s->rc;
	if (!val[J_PROGRAM])
		return scn_fail(s, v, "program", "missing: a job needs a program (one of harness, nccl, "
						 "torch, command)");
	if (scn_get_enum(s, val[J_PROGRAM], "program", program_names, &prog))
		return s->rc;
	for (int j = 0; j < J_NKEYS; j++)
		if (val[j] && !(job_keys[j].programs & (1u << prog)))
			return scn_fail(s, key[j], job_keys[j].name,
					"not a key of program %s (its keys: %s)", program_names[prog],
					keys_of(1u << prog, keys, sizeof(keys)));
	if (prog == P_COMMAND && !val[J_COMMAND])
		return scn_fail(s, v, "command",
				"missing: program command needs command: [the program, its "
				"arguments...]");

	/* nodes, ranks, GPUs per node */
	int64_t ranks = 0, gpn = 1, timeout_s = JOB_DEFAULT_TIMEOUT_S;
	if (resolve_nodes(s, v, val[J_NODES], &nd))
		goto out;
	if (val[J_GPUS] &&
	    scn_get_int(s, val[J_GPUS], "gpus_per_node", 1, JOB_MAX_GPUS_PER_NODE, "ranks per node",
			&gpn))
		goto out;
	if (val[J_RANKS]) {
		if (scn_get_int(s, val[J_RANKS], "ranks", 1, JOB_MAX_RANKS, "", &ranks))
			goto out;
		if (val[J_GPUS] && ranks != nd.n * gpn) {
			scn_fail(s, val[J_RANKS], "ranks",
				 "%lld is not nodes x gpus_per_node = %d x %lld", (long long)ranks, nd.n,
				 (long long)gpn);
			goto out;
		}
		if (ranks % nd.n) {
			scn_fail(s, val[J_RANKS], "ranks",
				 "%lld ranks do not split evenly over %d node(s)%s", (long long)ranks,
				 nd.n, val[J_NODES] ? "" : " (the fabric's; say nodes: too)");
			goto out;
		}
		gpn = ranks / nd.n;
	}
	ranks = nd.n * gpn;
	if (ranks > JOB_MAX_RANKS) {
		scn_fail(s, val[J_GPUS] ? val[J_GPUS] : v, "ranks", "%lld ranks; the limit is %d",
			 (long long)ranks, JOB_MAX_RANKS);
		goto out;
	}
	if (prog == P_HARNESS && gpn != 1) {
		scn_fail(s, val[J_GPUS] ? val[J_GPUS] : val[J_RANKS], "gpus_per_node",
			 "the harness runs one process per node, so %lld ranks per node cannot be",
			 (long long)gpn);
		goto out;
	}
	double tmo = 0;
	if (val[J_TIMEOUT] &&
	    scn_get_seconds(s, key[J_TIMEOUT], val[J_TIMEOUT], "timeout_s", 1, JOB_MAX_SECONDS, true,
			&tmo))
		goto out;
	if (val[J_TIMEOUT])
		timeout_s = (int64_t)tmo;

	/* The fixed head that scn_parse_expect reads back. */
	jbuf_printf(&b, "{\"ranks\":%lld,\"program\":\"%s\",\"nodes\":[", (long long)ranks,
		    program_names[prog]);
	for (int i = 0; i < nd.n; i++) {
		jbuf_puts(&b, i ? "," : "");
		jbuf_str(&b, nd.name[i]);
	}
	jbuf_printf(&b, "],\"gpus_per_node\":%lld,\"timeout_s\":%lld,\"env\":", (long long)gpn,
		    (long long)timeout_s);
	if (val[J_ENV]) {
		if (parse_env(s, val[J_ENV], &b))
			goto out;
	} else {
		jbuf_puts(&b, "{}");
	}
	jbuf_puts(&b, ",\"args\":");
	if (val[J_ARGS]) {
		if (parse_argv(s, val[J_ARGS], "args", 0, &b))
			goto out;
	} else {
		jbuf_puts(&b, "[]");
	}

	if (prog == P_HARNESS) {
		char prefix[FABRIC_NAME_MAX + 1];
		if (harness_prefix(s, val[J_NODES] ? val[J_NODES] : v, &nd, prefix, sizeof(prefix)))
			goto out;
		struct words t = {.b = &sub};
		if (val[J_TESTS] && scn_for_words(s, val[J_TESTS], "tests", test_word, &t))
			goto out;
		if (t.all && t.n) {
			scn_fail(s, val[J_TESTS], "tests", "'all' already names every non-destructive "
							   "test");
			goto out;
		}
		bool bench = sub.p && strstr(sub.p, "\"bench\"");
		if (bench && nd.n != 2) {
			scn_fail(s, val[J_NODES] ? val[J_NODES] : val[J_TESTS], "tests",
				 "the harness's bench runs on 2 ranks, not %d", nd.n);
			goto out;
		}
		jbuf_puts(&b, ",\"tests\":");
		if (t.n) {
			jbuf_puts(&b, "[");
			jbuf_puts(&b, sub.p);
			jbuf_puts(&b, "]");
		} else {
			jbuf_puts(&b, "\"all\"");
		}
		uint64_t mb = 0;
		int64_t api = 0;
		double bound = 0;
		if ((val[J_MAX_BYTES] &&
		     scn_get_size(s, val[J_MAX_BYTES], "max_bytes", 1, JOB_MAX_SIZE, &mb)) ||
		    (val[J_BOUND] &&
		     scn_get_seconds(s, key[J_BOUND], val[J_BOUND], "bound_s", 0.001, JOB_MAX_SECONDS,
				 false, &bound)) ||
		    (val[J_API] && scn_get_int(s, val[J_API], "api_version", 8, 12, "", &api)))
			goto out;
		json_opt(&b, "max_bytes", mb, "%llu", (unsigned long long)mb);
		json_opt(&b, "bound_s", val[J_BOUND], "%.9g", bound);
		json_opt(&b, "api_version", api, "%lld", (long long)api);
		jbuf_puts(&b, ",\"node_prefix\":");
		jbuf_str(&b, prefix);
	} else if (prog == P_NCCL || prog == P_TORCH) {
		struct colls c = {.all = true, .torch = prog == P_TORCH};
		if (val[J_COLLS] && parse_colls(s, val[J_COLLS], "collectives", prog == P_TORCH, &c))
			goto out;
		jbuf_puts(&b, ",\"collectives\":");
		json_colls(&b, &c);
		jbuf_puts(&b, ",\"sizes\":");
		if (val[J_SIZES]) {
			if (parse_sizes(s, val[J_SIZES], &b))
				goto out;
		} else if (prog == P_NCCL) {
			/* 8 B .. 64 MiB, doubling: what nccl-tests' -b 8 -e 64M -f 2 sweeps */
			jbuf_puts(&b, "[");
			for (uint64_t x = 8, i = 0; x <= (64ull << 20); x *= 2, i++)
				jbuf_printf(&b, "%s%llu", i ? "," : "", (unsigned long long)x);
			jbuf_puts(&b, "]");
		} else {
			jbuf_puts(&b, "[8,4096,1048576,67108864]");
		}
		int64_t iters = 20, warmup = 5;
		if ((val[J_ITERS] && scn_get_int(s, val[J_ITERS], "iters", 1, 1000000, "", &iters)) ||
		    (val[J_WARMUP] && scn_get_int(s, val[J_WARMUP], "warmup", 0, 1000000, "", &warmup)))
			goto out;
		jbuf_printf(&b, ",\"iters\":%lld,\"warmup\":%lld", (long long)iters, (long long)warmup);
		if (prog == P_NCCL) {
			static const char *const dtypes[] = {
				"int8",	   "uint8",	 "int32",  "uint32", "int64",	"uint64",
				"half",	   "float",	 "double", "bfloat16", "float16", "float32",
				"float64", NULL};
			static const char *const canon[] = {"int8",  "uint8",	"int32",  "uint32",
							    "int64", "uint64", "half",	  "float",
							    "double", "bfloat16", "half", "float",
							    "double"};
			static const char *const ops[] = {"sum", "prod", "min", "max", NULL};
			int dt = 7, op = 0;
			double opt = 0;
			if ((val[J_DTYPE] && scn_get_enum(s, val[J_DTYPE], "dtype", dtypes, &dt)) ||
			    (val[J_OP] && scn_get_enum(s, val[J_OP], "op", ops, &op)) ||
			    (val[J_OP_TIMEOUT] &&
			     scn_get_seconds(s, key[J_OP_TIMEOUT], val[J_OP_TIMEOUT], "op_timeout_s",
					 0.001, JOB_MAX_SECONDS, false, &opt)))
				goto out;
			jbuf_printf(&b, ",\"dtype\":\"%s\",\"op\":\"%s\"", canon[dt], ops[op]);
			json_opt(&b, "op_timeout_s", val[J_OP_TIMEOUT], "%.9g", opt);
		}
	} else {
		jbuf_puts(&b, ",\"command\":");
		if (parse_argv(s, val[J_COMMAND], "command", 1, &b))
			goto out;
	}
	jbuf_puts(&b, "}");
	free(nd.name);
	jbuf_free(&sub);
	return set_section(s, &b, &s->sc->job_json);
out:
	free(nd.name);
	jbuf_free(&sub);
	jbuf_free(&b);
	return s->rc;
}

/* ---- expect: ------------------------------------------------------------------------------ */

static const char *const data_names[] = {"exact", "wrong", "unchecked", NULL};
enum { D_EXACT, D_WRONG, D_UNCHECKED };

static const char *const model_names[] = {"best", "ring", "tree", NULL};

/* The failures a job can be expected to show: NCCL's result codes, and a hang. */
static const char *const error_names[] = {
	"ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError", "ncclInvalidArgument",
	"ncclInvalidUsage",	  "ncclRemoteError", "ncclInProgress",	  "timeout",
	NULL};

/* failure: survivors: what the ranks not listed in ranks: must show */
static const char *const survivor_names[] = {"exact", NULL};

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{"SIGHUP", SIGHUP},   {"SIGINT", SIGINT},   {"SIGQUIT", SIGQUIT}, {"SIGILL", SIGILL},
	{"SIGTRAP", SIGTRAP}, {"SIGABRT", SIGABRT}, {"SIGBUS", SIGBUS},	  {"SIGFPE", SIGFPE},
	{"SIGKILL", SIGKILL}, {"SIGUSR1", SIGUSR1}, {"SIGSEGV", SIGSEGV}, {"SIGUSR2", SIGUSR2},
	{"SIGPIPE", SIGPIPE}, {"SIGALRM", SIGALRM}, {"SIGTERM", SIGTERM},
};

/* [lo, hi]: measured / model, 0 <= lo < hi, hi >= 1 (never faster than the model beyond hi). */
static int parse_bounds(struct scn *s, const yaml_node_t *v, const char *key, double b[2])
{
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, key, "[lo, hi]: measured / model") )
		return s->rc;
	if (scn_nitems(v) != 2)
		return scn_fail(s, v, key, "[lo, hi] has 2 numbers, not %d", scn_nitems(v));
	for (int i = 0; i < 2; i++) {
		yaml_node_t *e = scn_get_item(s, v, i, key);
		if (!e || scn_get_decimal(s, e, key, 0, 100, "measured / model", &b[i]))
			return s->rc;
	}
	if (b[0] >= b[1])
		return scn_fail(s, v, key, "lo %g is not below hi %g", b[0], b[1]);
	if (b[1] < 1)
		return scn_fail(s, scn_item(s, v, 1), key,
				"hi %g is below 1: the measurement would have to be slower than the "
				"model (hi says how much faster than the model it may be)",
				b[1]);
	return 0;
}

/* Does the job's JSON (ours: no spaces) list the harness test "bench"? */
static bool harness_benches(const char *jobjson)
{
	const char *t = strstr(jobjson, ",\"tests\":[");
	const char *end = t ? strchr(t, ']') : NULL;
	const char *b = t ? strstr(t, "\"bench\"") : NULL;
	return b && b < end;
}

static int parse_timing(struct scn *s, const yaml_node_t *v, const char *prog,
			const char *jobjson, long long nnodes, struct jbuf *b)
{
	const yaml_node_t *vm = NULL, *vb = NULL, *vl = NULL, *vmin = NULL, *vc = NULL;
	const struct scn_key keys[] = {{"model", &vm, NULL},
				       {"busbw", &vb, NULL},
				       {"latency", &vl, NULL},
				       {"min_bytes", &vmin, NULL},
				       {"collectives", &vc, NULL}};
	if (scn_expect(s, v, YAML_MAPPING_NODE, "timing",
		       "a mapping like {busbw: [0.3, 1.05], min_bytes: 1M}"))
		return s->rc;
	if (s->ideal)
		return scn_fail(s, v, "timing",
				"the ideal fabric has no latency or bandwidth to hold a job to");
	if (!strcmp(prog, "harness") && !harness_benches(jobjson))
		return scn_fail(s, v, "timing",
				"the harness measures only in its bench test (job: tests: [bench])");
	if (nnodes < 2)
		return scn_fail(s, v, "timing",
				"a job on one node crosses no fabric link: there is nothing to model");
	if (scn_get_keys(s, v, "timing", keys, SCN_NKEYS(keys)))
		return s->rc;
	if (!vb)
		return scn_fail(s, v, "busbw",
				"missing: timing needs busbw: [lo, hi] (measured busbw / the model's)");
	int model = 0;
	double bw[2], lat[2] = {0, 0};
	uint64_t min_bytes = 1u << 20;
	if ((vm && scn_get_enum(s, vm, "model", model_names, &model)) ||
	    parse_bounds(s, vb, "busbw", bw) || (vl && parse_bounds(s, vl, "latency", lat)) ||
	    (vmin && scn_get_size(s, vmin, "min_bytes", 0, JOB_MAX_SIZE, &min_bytes)))
		return s->rc;
	if (!vl)
		lat[1] = bw[1];
	jbuf_printf(b, "{\"model\":\"%s\",\"busbw\":[%.9g,%.9g],\"latency\":[%.9g,%.9g],"
		       "\"min_bytes\":%llu,\"collectives\":",
		    model_names[model], bw[0], bw[1], lat[0], lat[1], (unsigned long long)min_bytes);
	if (vc) {
		struct colls c;
		if (parse_colls(s, vc, "collectives", false, &c))
			return s->rc;
		json_colls(b, &c);
	} else {
		jbuf_puts(b, "null");
	}
	jbuf_puts(b, "}");
	return 0;
}

/* [r, ...]: distinct ranks of the job, as JSON. */
static int rank_list(struct scn *s, const yaml_node_t *v, const char *key, int64_t nranks,
		     struct jbuf *b)
{
	int n = scn_nitems(v);
	if (n < 1)
		return scn_fail(s, v, key, "an empty list");
	int64_t seen[64];
	jbuf_puts(b, "[");
	for (int i = 0; i < n; i++) {
		yaml_node_t *x = scn_get_item(s, v, i, key);
		int64_t r;
		if (!x || scn_get_int(s, x, key, 0, nranks - 1, "the job's ranks", &r))
			return s->rc;
		for (int j = 0; j < i && j < 64; j++)
			if (seen[j] == r)
				return scn_fail(s, x, key, "rank %lld is listed twice", (long long)r);
		if (i < 64)
			seen[i] = r;
		jbuf_printf(b, "%s%lld", i ? "," : "", (long long)r);
	}
	jbuf_puts(b, "]");
	return 0;
}

static int parse_failure(struct scn *s, const yaml_node_t *v, int64_t nranks,
			 int64_t timeout_s, struct jbuf *b)
{
	const yaml_node_t *ve = NULL, *vx = NULL, *vs = NULL, *vr = NULL, *vw = NULL, *kw = NULL;
	const yaml_node_t *vh = NULL, *kh = NULL, *vv = NULL;
	/* hang_s last: no key before it goes with it */
	const struct scn_key keys[] = {{"error", &ve, NULL},	{"exit", &vx, NULL},
				       {"signal", &vs, NULL},	{"ranks", &vr, NULL},
				       {"within_s", &vw, &kw},	{"survivors", &vv, NULL},
				       {"hang_s", &vh, &kh}};
	char q[80];
	if (scn_expect(s, v, YAML_MAPPING_NODE, "failure",
		       "a mapping like {error: ncclRemoteError, ranks: [0], within_s: 10}") ||
	    scn_get_keys(s, v, "failure", keys, SCN_NKEYS(keys)))
		return s->rc;
	for (int i = 0; i < SCN_NKEYS(keys); i++)
		if (*keys[i].val && scn_is_null(*keys[i].val))
			*keys[i].val = NULL; /* written but empty: as if not given */
	if (vx && vs)
		return scn_fail(s, vs, "signal", "give exit or signal, not both (a process that dies "
						 "of a signal has no exit status)");
	/* hang: no rank ends before it; how they would have ended cannot be asked too */
	for (int i = 0; vh && i < SCN_NKEYS(keys) - 1; i++)
		if (*keys[i].val)
			return scn_fail(s, *keys[i].val, keys[i].name,
					"not with hang (a hang expects no rank to end: the launcher "
					"ends them all at the hang's time)");
	/* survivors: the ranks listed are lost, and the others carry on (a shrink) and pass */
	int surv = 0;
	if (vv && scn_get_enum(s, vv, "survivors", survivor_names, &surv))
		return s->rc;
	if (vv && (!vr || vr->type != YAML_SEQUENCE_NODE))
		return scn_fail(s, vv, "survivors",
				"needs ranks: [...], the ranks that are lost (the others must exit 0 "
				"with exact results)");
	double hang = 0;
	if (vh && scn_get_seconds(s, kh, vh, "hang_s", 0.1, JOB_MAX_SECONDS, false, &hang))
		return s->rc;
	if (vh && hang >= (double)timeout_s)
		return scn_fail(s, vh, scn_text(kh), "%g s is not below the job's timeout_s (%lld)",
				hang, (long long)timeout_s);
	jbuf_puts(b, "{\"error\":");
	int e = 0;
	if (ve) {
		if (scn_get_enum(s, ve, "error", error_names, &e))
			return s->rc;
		jbuf_printf(b, "\"%s\"", error_names[e]);
	} else {
		jbuf_puts(b, "null");
	}
	jbuf_puts(b, ",\"exit\":");
	if (vx) {
		int n = vx->type == YAML_SEQUENCE_NODE ? scn_nitems(vx) : 1;
		if (vx->type == YAML_SEQUENCE_NODE && n < 1)
			return scn_fail(s, vx, "exit", "an empty list");
		jbuf_puts(b, "[");
		for (int i = 0; i < n; i++) {
			const yaml_node_t *x =
				vx->type == YAML_SEQUENCE_NODE ? scn_get_item(s, vx, i, "exit") : vx;
			int64_t code;
			if (!x || scn_get_int(s, x, "exit", 1, 255, "exit status", &code))
				return s->rc;
			jbuf_printf(b, "%s%lld", i ? "," : "", (long long)code);
		}
		jbuf_puts(b, "]");
	} else {
		jbuf_puts(b, "null");
	}
	const char *found = NULL;
	if (vs) {
		if (scn_expect(s, vs, YAML_SCALAR_NODE, "signal", "a signal name like SIGKILL"))
			return s->rc;
		const char *t = scn_text(vs);
		for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]) && !found; i++) {
			long num = strspn(t, "0123456789") == strlen(t) && *t ? strtol(t, NULL, 10) : -1;
			if (!strcmp(t, signals[i].name) || !strcmp(t, signals[i].name + 3) ||
			    num == signals[i].sig)
				found = signals[i].name;
		}
		if (!found)
			return scn_fail(s, vs, "signal",
					"'%s' is not a signal (SIGKILL, KILL or 9; known: SIGHUP, SIGINT, "
					"SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGKILL, "
					"SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM)",
					quote(vs, q, sizeof(q)));
	}
	json_opt(b, "signal", found, "\"%s\"", found);
	jbuf_puts(b, ",\"ranks\":");
	if (!vr) {
		jbuf_puts(b, "\"any\"");
	} else if (vr->type == YAML_SCALAR_NODE && !scn_is_null(vr) &&
		   (!strcmp(scn_text(vr), "all") || !strcmp(scn_text(vr), "any"))) {
		jbuf_printf(b, "\"%s\"", scn_text(vr));
	} else {
		if (scn_expect(s, vr, YAML_SEQUENCE_NODE, "ranks", "a list of ranks, all or any") ||
		    rank_list(s, vr, "ranks", nranks, b))
			return s->rc;
	}
	double w = 0;
	if (vw && scn_get_seconds(s, kw, vw, "within_s", 0.001, JOB_MAX_SECONDS, false, &w))
		return s->rc;
	if (vw && w > (double)timeout_s)
		return scn_fail(s, vw, "within_s", "%g s is longer than the job's timeout_s (%lld)", w,
				(long long)timeout_s);
	json_opt(b, "within_s", vw, "%.9g", w);
	if (vh) /* only when asked for: the dumps of other failures stay as they were */
		jbuf_printf(b, ",\"hang_s\":%.9g", hang);
	if (vv)
		jbuf_printf(b, ",\"survivors\":\"%s\"", survivor_names[surv]);
	jbuf_puts(b, "}");
	return 0;
}

/* expect: faults: {may_miss: [name, ...] | all}: the faults allowed to hit nothing (a fault
 * whose windows all pass without touching a message fails the run's faults check otherwise). */
struct miss_ctx {
	struct jbuf *b;
	int n;
};

static int miss_word(struct scn *s, const yaml_node_t *at, const char *key, const char *word,
		     void *ctx)
{
	struct miss_ctx *c = ctx;
	const struct fault_plan *p = s->sc->faults;
	char names[256] = "";
	size_t len = 0;
	for (int i = 0; p && i < p->n; i++) {
		if (!strcmp(p->f[i].name, word)) {
			jbuf_puts(c->b, c->n++ ? "," : "");
			jbuf_str(c->b, word);
			return 0;
		}
		if (len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
						p->f[i].name);
	}
	return scn_fail(s, at, key, "'%s' is not a fault of this scenario (its faults: %s)", word,
			p && p->n ? names : "none");
}

static int parse_expect_faults(struct scn *s, const yaml_node_t *v, struct jbuf *b)
{
	const yaml_node_t *vm = NULL;
	const struct scn_key keys[] = {{"may_miss", &vm, NULL}};
	if (scn_expect(s, v, YAML_MAPPING_NODE, "faults",
		       "a mapping like {may_miss: [flap]} (faults allowed to hit nothing)") ||
	    scn_get_keys(s, v, "faults", keys, SCN_NKEYS(keys)))
		return s->rc;
	if (!s->sc->faults || !s->sc->faults->n)
		return scn_fail(s, v, "faults", "the scenario has no faults: section");
	jbuf_puts(b, "{\"may_miss\":");
	if (!vm || scn_is_null(vm)) {
		jbuf_puts(b, "[]");
	} else if (vm->type == YAML_SCALAR_NODE && !strcmp(scn_text(vm), "all")) {
		jbuf_puts(b, "\"all\"");
	} else {
		struct miss_ctx c = {b, 0};
		jbuf_puts(b, "[");
		if (scn_for_words(s, vm, "may_miss", miss_word, &c))
			return s->rc;
		jbuf_puts(b, "]");
	}
	jbuf_puts(b, "}");
	return 0;
}

/*
 * expect: flight_recorder: {collective, missing, prefix}: PyTorch's flight recorder dumps in
 * the run directory (files PREFIX<rank>) name a collective that never completed and the ranks
 * that never joined it (simfabric run reads them).
 */
static int parse_flight_recorder(struct scn *s, const yaml_node_t *v, const char *prog,
				 int64_t nranks, struct jbuf *b)
{
	const yaml_node_t *vc = NULL, *vm = NULL, *vp = NULL;
	const struct scn_key keys[] = {
		{"collective", &vc, NULL}, {"missing", &vm, NULL}, {"prefix", &vp, NULL}};
	if (scn_expect(s, v, YAML_MAPPING_NODE, "flight_recorder",
		       "a mapping like {collective: all_reduce, missing: [1]}") ||
	    scn_get_keys(s, v, "flight_recorder", keys, SCN_NKEYS(keys)))
		return s->rc;
	if (strcmp(prog, "torch") && strcmp(prog, "command"))
		return scn_fail(s, v, "flight_recorder",
				"PyTorch writes flight recorder dumps: program torch or command, not %s",
				prog);
	if (!vc || !vm)
		return scn_fail(s, v, vc ? "missing" : "collective",
				"missing: flight_recorder needs collective: (the one that hung, as "
				"the dump names it: all_reduce) and missing: [ranks that never "
				"joined it]");
	if (scn_expect(s, vc, YAML_SCALAR_NODE, "collective", "a collective's name") ||
	    scn_expect(s, vm, YAML_SEQUENCE_NODE, "missing", "a list of ranks") ||
	    (vp && scn_expect(s, vp, YAML_SCALAR_NODE, "prefix", "a file name prefix")))
		return s->rc;
	if (vp && (strchr(scn_text(vp), '/') || strlen(scn_text(vp)) > JOB_MAX_TEXT))
		return scn_fail(s, vp, "prefix",
				"a file name in the run directory (no '/', at most %d characters)",
				JOB_MAX_TEXT);
	jbuf_puts(b, "{\"collective\":");
	jbuf_str(b, scn_text(vc));
	jbuf_puts(b, ",\"missing\":");
	if (rank_list(s, vm, "missing", nranks, b))
		return s->rc;
	jbuf_puts(b, ",\"prefix\":");
	jbuf_str(b, vp ? scn_text(vp) : "nccl_trace_rank_");
	jbuf_puts(b, "}");
	return 0;
}

int scn_parse_expect(struct scn *s, const yaml_node_t *v)
{
	const yaml_node_t *vd = NULL, *vt = NULL, *vf = NULL, *vq = NULL, *vr = NULL;
	const struct scn_key keys[] = {{"data", &vd, NULL},
				       {"timing", &vt, NULL},
				       {"failure", &vf, NULL},
				       {"faults", &vq, NULL},
				       {"flight_recorder", &vr, NULL}};
	const char *job = s->sc->job_json;
	char prog[16];
	long long nranks = 0, timeout_s = JOB_DEFAULT_TIMEOUT_S;
	struct jbuf b = JBUF_INIT;

	if (!job || sscanf(job, "{\"ranks\":%lld,\"program\":\"%15[a-z]\"", &nranks, prog) != 2)
		return scn_fail(s, v, "expect", "needs a job: section (what to run)");
	const char *t = strstr(job, ",\"timeout_s\":");
	if (t)
		timeout_s = strtoll(t + 13, NULL, 10);
	long long gpn = 1;
	t = strstr(job, ",\"gpus_per_node\":");
	if (t)
		gpn = strtoll(t + 17, NULL, 10);
	if (scn_expect(s, v, YAML_MAPPING_NODE, "expect",
		       "a mapping like {data: exact, timing: {busbw: [0.3, 1.05]}}") ||
	    scn_get_keys(s, v, "expect", keys, SCN_NKEYS(keys)))
		return s->rc;
	int data = D_EXACT;
	if (vd && scn_get_enum(s, vd, "data", data_names, &data))
		return s->rc;
	if (data == D_UNCHECKED && (!strcmp(prog, "harness") || !strcmp(prog, "torch")))
		return scn_fail(s, vd, "data", "program %s always checks its data (exact or wrong)",
				prog);
	if (data == D_WRONG && vf)
		return scn_fail(s, vf, "failure",
				"data: wrong is a failure of its own; not with failure: as well");
	if (data == D_WRONG && vt)
		return scn_fail(s, vt, "timing", "not with data: wrong (a failing job's times are not "
						 "held to the model)");
	if (vt && vf)
		return scn_fail(s, vt, "timing", "not with failure: (a failing job's times are not "
						 "held to the model)");
	jbuf_printf(&b, "{\"data\":\"%s\",\"timing\":", data_names[data]);
	if (vt) {
		if (parse_timing(s, vt, prog, job, gpn > 0 ? nranks / gpn : nranks, &b))
			goto out;
	} else {
		jbuf_puts(&b, "null");
	}
	jbuf_puts(&b, ",\"failure\":");
	if (vf) {
		if (parse_failure(s, vf, nranks, timeout_s, &b))
			goto out;
	} else {
		jbuf_puts(&b, "null");
	}
	if (vq && !scn_is_null(vq)) {
		jbuf_puts(&b, ",\"faults\":");
		if (parse_expect_faults(s, vq, &b))
			goto out;
	}
	if (vr && !scn_is_null(vr)) { /* only when given: other dumps stay as they were */
		jbuf_puts(&b, ",\"flight_recorder\":");
		if (parse_flight_recorder(s, vr, prog, nranks, &b))
			goto out;
	}
	jbuf_puts(&b, "}");
	return set_section(s, &b, &s->sc->expect_json);
out:
	jbuf_free(&b);
	return s->rc;
}
