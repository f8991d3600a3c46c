/* SPDX-License-Identifier: MIT */
/*
 * faults.c - the scenario's faults: section (and `simfabric fault
 * apply`'s text) to a struct fault_plan, checked against the fabric. The
 * schema is in scenarios/README.md ("Faults"); the semantics in fault.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/core/fault.h"
#include "sim/scn/jbuf.h"
#include "sim/scn/scenario.h"
#include "sim/scn/scn_int.h"
#include "sim/scn/units.h"

/* ---- values ---------------------------------------------------------------------- */

/* A value for an error message: control bytes and backslashes escaped, long ones cut. */
#define shown(t) param_quote((t), (char[80]){0}, 80)

/* "5ms", "1.5s", "200us", "100ns", "250" (ns): exact to the ns, at most FAULT_TIME_MAX. */
#define FAULT_TIME_MAX 1000000000000000LL /* 1000000 s */
/* v's text in dim's units (sim/scn/units.h; a bare number allowed) into *x, else the error
 * recorded: what, when it is not a scalar; units_parse's, when its text is not such a value. */
static int get_units(struct scn *s, const yaml_node_t *v, const char *key, enum units_dim dim,
		     const char *what, uint64_t *x)
{
	char why[PARAM_ERR_LEN];
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, what))
		return s->rc;
	if (units_parse(scn_text(v), dim, UNITS_BARE, x, why, sizeof(why)))
		return scn_fail(s, v, key, "%s", why);
	return 0;
}

static int get_time(struct scn *s, const yaml_node_t *v, const char *key, int64_t *out)
{
	uint64_t x;
	if (get_units(s, v, key, UNITS_TIME, "a time like 5ms, 200us or 1.5s", &x))
		return s->rc;
	const char *t = scn_text(v);
	if (x > (uint64_t)FAULT_TIME_MAX)
		return scn_fail(s, v, key,
				"'%s' is not a time up to 1000000s (a number with ns, us, ms or s; "
				"a bare number is ns)",
				shown(t));
	*out = (int64_t)x;
	return 0;
}

/* A probability or duty: a decimal in 0..1 or a percentage ("0.25", "25%"), the grammar of
 * sim/scn/units.h's numbers. */
static int get_fraction(struct scn *s, const yaml_node_t *v, const char *key, double *out)
{
	struct units_dec d;
	const char *end;
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a number in 0..1"))
		return s->rc;
	const char *t = scn_text(v);
	double x = -1;
	if (units_dec_parse(t, &d, &end) == 0 && !*end && !d.neg)
		x = strtod(t, NULL) / (d.pct ? 100 : 1);
	if (!(x >= 0 && x <= 1))
		return scn_fail(s, v, key, "'%s' is not a number in 0..1 (or a percentage)", shown(t));
	*out = x;
	return 0;
}

/* A positive count ("100", "64K") or, under key bytes, a size ("1MiB"): binary, as everywhere. */
static int get_size(struct scn *s, const yaml_node_t *v, const char *key, uint64_t *out)
{
	uint64_t x;
	if (get_units(s, v, key, strcmp(key, "bytes") ? UNITS_COUNT : UNITS_SIZE,
		      "a count like 100, 64K or 1M", &x))
		return s->rc;
	const char *t = scn_text(v);
	if (x == 0 || x > (UINT64_MAX >> 31))
		return scn_fail(s, v, key, "'%s' is not a positive count (K, M, G suffixes allowed)",
				shown(t));
	*out = x;
	return 0;
}

/* ---- names -------------------------------------------------------------------- */

/* "node", "node/1" or "switch": its endpoints. A node without an index is all its NICs. */
struct eps {
	int n;
	struct fabric_ep ep[FABRIC_MAX_NICS];
};

static int get_eps(struct scn *s, const yaml_node_t *v, const char *key, int allow_switch,
		   struct eps *out)
{
	struct scn_place p;
	out->n = 0;
	if (scn_get_place(s, v, key,
			  SCN_PLACE_NODE | SCN_PLACE_NIC | (allow_switch ? SCN_PLACE_SWITCH : 0), &p))
		return s->rc;
	if (p.sw) {
		out->ep[out->n++] = (struct fabric_ep){FABRIC_EP_SWITCH, p.sw->id, 0};
		return 0;
	}
	for (int i = 0; i < p.node->nnics; i++)
		if (p.nic < 0 || p.nic == i)
			out->ep[out->n++] = (struct fabric_ep){FABRIC_EP_NIC, p.node->id, i};
	return 0;
}

static int ep_in(const struct fabric_ep *e, const struct eps *set)
{
	for (int i = 0; i < set->n; i++)
		if (set->ep[i].kind == e->kind && set->ep[i].id == e->id &&
		    (e->kind == FABRIC_EP_SWITCH || set->ep[i].nic == e->nic))
			return 1;
	return 0;
}

static int add_link(struct scn *s, const yaml_node_t *at, const char *key, struct fault_spec *f,
		    uint32_t id)
{
	for (uint32_t i = 0; i < f->nlinks; i++)
		if (f->link[i] == id)
			return 0;
	if (f->nlinks == FAULT_MAX_LINKS)
		return scn_fail(s, at, key, "more than %d directed links in one fault",
				FAULT_MAX_LINKS);
	f->link[f->nlinks++] = id;
	return 0;
}

enum dir { DIR_BOTH, DIR_FORWARD, DIR_BACKWARD };

/* link: [a, b] (the cables between them) or a (its NICs' cables). */
static int get_links(struct scn *s, const yaml_node_t *v, const char *key, enum dir dir,
		     struct fault_spec *f)
{
	struct eps a = {0}, b = {0};
	int pair = 0;
	if (v->type == YAML_SEQUENCE_NODE) {
		if (scn_nitems(v) != 2)
			return scn_fail(s, v, key, "a link is [end, end] or one NIC, not %d items",
					scn_nitems(v));
		if (get_eps(s, scn_item(s, v, 0), key, 1, &a) ||
		    get_eps(s, scn_item(s, v, 1), key, 1, &b))
			return s->rc;
		pair = 1;
	} else if (get_eps(s, v, key, 0, &a)) {
		return s->rc;
	}
	uint32_t before = f->nlinks;
	for (int i = 0; i < fabric_nlinks(s->f); i++) {
		const struct fabric_link *l = fabric_link(s->f, (uint32_t)i);
		int fwd, bwd;
		if (pair) {
			fwd = ep_in(&l->from, &a) && ep_in(&l->to, &b);
			bwd = ep_in(&l->from, &b) && ep_in(&l->to, &a);
		} else {
			fwd = ep_in(&l->from, &a); /* out of the NIC */
			bwd = ep_in(&l->to, &a);   /* into it */
		}
		if ((fwd && dir != DIR_BACKWARD) || (bwd && dir != DIR_FORWARD))
			if (add_link(s, v, key, f, l->id))
				return s->rc;
	}
	if (f->nlinks == before)
		return scn_fail(s, v, key, "no link of this fabric joins these ends%s",
				pair ? " (a link is a cable: its two ends, like [node0, sw0])" : "");
	return 0;
}

static int get_node(struct scn *s, const yaml_node_t *v, const char *key, int32_t *out)
{
	struct scn_place p;
	if (scn_get_place(s, v, key, SCN_PLACE_NODE | SCN_PLACE_ANY, &p))
		return s->rc;
	*out = p.node ? p.node->id : FAULT_ANY;
	return 0;
}

/* conn: [a, b] (both ways: two specs), {from: a, to: b}, or all. *both set for [a, b]. */
static int get_conn(struct scn *s, const yaml_node_t *v, const char *key, int32_t *src,
		    int32_t *dst, int *both)
{
	*both = 0;
	*src = *dst = FAULT_ANY;
	if (v->type == YAML_SCALAR_NODE && !strcmp(scn_text(v), "all"))
		return 0;
	if (v->type == YAML_SEQUENCE_NODE) {
		if (scn_nitems(v) != 2)
			return scn_fail(s, v, key, "a connection is [node, node] (both ways), "
						   "{from: node, to: node} or all");
		*both = 1;
		return get_node(s, scn_item(s, v, 0), key, src) ||
		       get_node(s, scn_item(s, v, 1), key, dst);
	}
	if (scn_expect(s, v, YAML_MAPPING_NODE, key,
		       "[node, node] (both ways), {from: node, to: node} or all"))
		return s->rc;
	for (int i = 0; i < scn_npairs(v); i++) {
		const char *name;
		yaml_node_t *k, *x;
		if (scn_pair_key(s, v, i, &name, &k, &x))
			return s->rc;
		if (!strcmp(name, "from")) {
			if (get_node(s, x, "from", src))
				return s->rc;
		} else if (!strcmp(name, "to")) {
			if (get_node(s, x, "to", dst))
				return s->rc;
		} else {
			return scn_fail(s, k, name, "unknown key in %s (known: from, to)", key);
		}
	}
	return 0;
}

/* ---- one fault ------------------------------------------------------------------- */

static int parse_after(struct scn *s, const yaml_node_t *v, struct fault_spec *f, int *both)
{
	if (scn_expect(s, v, YAML_MAPPING_NODE, "after",
		       "a mapping like {messages: 100, link: node0} or {first_traffic: node0}"))
		return s->rc;
	const yaml_node_t *what = NULL, *lk = NULL, *cn = NULL, *ft = NULL, *lkey = NULL;
	for (int i = 0; i < scn_npairs(v); i++) {
		const char *name;
		yaml_node_t *k, *x;
		if (scn_pair_key(s, v, i, &name, &k, &x))
			return s->rc;
		if (!strcmp(name, "messages") || !strcmp(name, "bytes") ||
		    !strcmp(name, "first_traffic")) {
			if (what)
				return scn_fail(s, k, name, "one of messages, bytes, first_traffic");
			what = k;
			if (!strcmp(name, "first_traffic")) {
				f->trigger = FAULT_T_FIRST_TRAFFIC;
				ft = x;
			} else {
				f->trigger = name[0] == 'm' ? FAULT_T_MESSAGES : FAULT_T_BYTES;
				if (get_size(s, x, name, &f->threshold))
					return s->rc;
			}
		} else if (!strcmp(name, "link")) {
			lk = x;
			lkey = k;
		} else if (!strcmp(name, "conn")) {
			cn = x;
		} else {
			return scn_fail(s, k, name, "unknown key in after (known: messages, bytes, "
						    "first_traffic, link, conn)");
		}
	}
	if (!what)
		return scn_fail(s, v, "after", "needs messages, bytes or first_traffic");
	if (ft && lk)
		return scn_fail(s, lkey, "link", "first_traffic names the trigger's link; not both");
	const char *lname = ft ? "first_traffic" : "link";
	if (ft)
		lk = ft;
	if (lk && cn)
		return scn_fail(s, cn, "conn", "a trigger counts on a link or a connection, not both");
	f->trig_link = -1;
	f->trig_src = f->trig_dst = FAULT_ANY;
	*both = 0;
	if (lk) {
		/* the trigger's link: one directed link (a NIC: its outgoing one) */
		struct fault_spec tmp = {0};
		if (get_links(s, lk, lname, DIR_FORWARD, &tmp))
			return s->rc;
		if (tmp.nlinks != 1)
			return scn_fail(s, lk, lname, "a trigger counts on one directed link; this "
						      "names %u",
					tmp.nlinks);
		f->trig_link = (int32_t)tmp.link[0];
	} else if (cn) {
		if (get_conn(s, cn, "conn", &f->trig_src, &f->trig_dst, both))
			return s->rc;
		if (*both)
			return scn_fail(s, cn, "conn", "a trigger counts one direction: use {from: "
						       "a, to: b}");
	} else if (f->trigger == FAULT_T_FIRST_TRAFFIC) {
		return scn_fail(s, v, "first_traffic", "needs a link");
	}
	return 0;
}

static int parse_set(struct scn *s, const yaml_node_t *v, struct fault_spec *f)
{
	if (scn_expect(s, v, YAML_MAPPING_NODE, "set",
		       "a mapping of rate_gbps, add_latency_ns, loss, corrupt"))
		return s->rc;
	struct model_link base;
	param_defaults(PARAM_LINK, &base);
	struct layer l;
	scn_layer_init(&l, PARAM_LINK, &base);
	for (int i = 0; i < scn_npairs(v); i++) {
		const char *name;
		yaml_node_t *k, *x;
		if (scn_pair_key(s, v, i, &name, &k, &x))
			return s->rc;
		if (!strcmp(name, "add_latency_ns") || !strcmp(name, "add_latency")) {
			bool unit = !strcmp(name, "add_latency");
			if (f->set & FAULT_SET_LATENCY)
				return scn_fail(s, k, name,
						"%s is given too: two spellings of one parameter, "
						"keep one (add_latency takes a unit, "
						"add_latency_ns a bare number in ns)",
						unit ? "add_latency_ns" : "add_latency");
			if (unit ? get_time(s, x, name, &f->extra_latency_ns)
				 : scn_get_int(s, x, name, 0, MODEL_TIME_MAX_NS, "ns",
					       &f->extra_latency_ns))
				return s->rc;
			if (f->extra_latency_ns > MODEL_TIME_MAX_NS)
				return scn_fail(s, x, name, "'%s' is not a time in 0..%llds",
						shown(scn_text(x)),
						(long long)(MODEL_TIME_MAX_NS / 1000000000));
			f->set |= FAULT_SET_LATENCY;
		} else if (!strcmp(name, "rate_gbps") || !strcmp(name, "rate") ||
			   !strcmp(name, "loss") || !strcmp(name, "corrupt")) {
			if (scn_param_pair(s, PARAM_LINK, name, k, x, &l, "set", ""))
				return s->rc;
		} else {
			return scn_fail(s, k, name,
					"unknown key in set (known: rate_gbps or rate, "
					"add_latency_ns or add_latency, loss, corrupt)");
		}
	}
	if (scn_layer_has(&l, param_find(PARAM_LINK, "rate_gbps"))) {
		f->rate_bps = l.v.link.rate_bps;
		f->set |= FAULT_SET_RATE;
	}
	if (scn_layer_has(&l, param_find(PARAM_LINK, "loss.model"))) {
		char why[MODEL_ERR_LEN];
		if (model_loss_check(&l.v.link.loss, why, sizeof(why)))
			return scn_fail(s, v, "loss", "%s", why);
		f->loss = l.v.link.loss;
		f->set |= FAULT_SET_LOSS;
	}
	if (scn_layer_has(&l, param_find(PARAM_LINK, "corrupt"))) {
		f->corrupt_p = l.v.link.corrupt_p;
		f->set |= FAULT_SET_CORRUPT;
	}
	return 0;
}

/* Where each key of a fault entry is, for the checks that need the whole entry. */
enum { K_NAME, K_ACTION, K_LINK, K_DIR, K_NIC, K_CONN, K_NODE, K_AT, K_FOR, K_EVERY, K_COUNT,
       K_PROB, K_AFTER, K_PERIOD, K_DUTY, K_SET, K_P, K_DELAY, K_NTH, K_FRACTION, K_ERROR, K_N };
static const char *const keys[K_N] = {"name", "action", "link", "direction", "nic", "conn",
				      "node", "at", "for", "every", "count", "probability",
				      "after", "period", "duty", "set", "p", "delay",
				      "nth", "fraction", "error"};

static int need(struct scn *s, const yaml_node_t *m, const yaml_node_t *const *val, int key,
		const char *kind)
{
	if (!val[key])
		return scn_fail(s, m, keys[key], "missing: %s needs %s", kind, keys[key]);
	return 0;
}

static int refuse(struct scn *s, const yaml_node_t *const *val, int key, const char *kind)
{
	if (val[key])
		return scn_fail(s, val[key], keys[key], "does not apply to %s", kind);
	return 0;
}

/* Actions on a node's processes: they need one node. */
static int on_process(uint32_t action)
{
	return action == FAULT_A_KILL || action == FAULT_A_FREEZE || action == FAULT_A_STRAGGLE;
}

/* regmr_fail, connect_fail, accept_fail: nth or fraction (neither: every call), error. */
static int parse_calls(struct scn *s, const yaml_node_t *const *val, struct fault_spec *f)
{
	f->frac = MODEL_PROB_ONE;
	if (val[K_NTH] && val[K_FRACTION])
		return scn_fail(s, val[K_FRACTION], "fraction",
				"nth fails one call, fraction a share of them: not both");
	if (val[K_NTH]) {
		int64_t n;
		if (scn_get_int(s, val[K_NTH], "nth", 1, INT32_MAX, "calls", &n))
			return s->rc;
		f->nth = (uint64_t)n;
	}
	if (val[K_FRACTION]) {
		double p;
		if (get_fraction(s, val[K_FRACTION], "fraction", &p))
			return s->rc;
		if (p <= 0)
			return scn_fail(s, val[K_FRACTION], "fraction", "0 fails no call");
		f->frac = model_prob(p);
	}
	if (val[K_ERROR]) {
		if (scn_expect(s, val[K_ERROR], YAML_SCALAR_NODE, "error", "system, internal or remote"))
			return s->rc;
		const char *t = scn_text(val[K_ERROR]);
		uint32_t e = 0;
		while (e < FAULT_E_COUNT && strcmp(fault_err_names[e], t))
			e++;
		if (e == FAULT_E_COUNT)
			return scn_fail(s, val[K_ERROR], "error",
					"'%s' is not system (ncclSystemError), internal "
					"(ncclInternalError) or remote (ncclRemoteError)",
					shown(t));
		f->err_kind = e;
	}
	return 0;
}

/* straggle: period (the stop/run cycle, default 20ms) and duty (the stopped share, 0.5). */
static int parse_slow(struct scn *s, const yaml_node_t *const *val, struct fault_spec *f)
{
	double duty = 0.5;
	f->slow_period_ns = FAULT_SLOW_PERIOD_NS;
	if (val[K_PERIOD] && get_time(s, val[K_PERIOD], "period", &f->slow_period_ns))
		return s->rc;
	if (f->slow_period_ns < FAULT_SLOW_MIN_NS)
		return scn_fail(s, val[K_PERIOD], "period",
				"'%s' is below 1ms: the daemon signals the node twice a period",
				shown(scn_text(val[K_PERIOD])));
	if (val[K_DUTY] && get_fraction(s, val[K_DUTY], "duty", &duty))
		return s->rc;
	if (duty <= 0 || duty >= 1)
		return scn_fail(s, val[K_DUTY], "duty",
				"the share of each period the node is stopped: in (0, 1)");
	f->frac = model_prob(duty);
	return 0;
}

static int parse_one(struct scn *s, const yaml_node_t *m, int index, struct fault_plan *plan)
{
	if (scn_expect(s, m, YAML_MAPPING_NODE, "faults",
		       "a mapping like {action: link_down, link: [node0, sw0], at: 5ms, for: 1ms}"))
		return s->rc;
	const yaml_node_t *val[K_N] = {0};
	struct scn_key known[K_N];
	for (int j = 0; j < K_N; j++)
		known[j] = (struct scn_key){keys[j], &val[j], NULL};
	if (scn_get_keys(s, m, "a fault", known, K_N))
		return s->rc;
	if (need(s, m, val, K_ACTION, "a fault"))
		return s->rc;
	if (scn_expect(s, val[K_ACTION], YAML_SCALAR_NODE, "action", "an action name"))
		return s->rc;
	struct fault_spec f = {0};
	const char *an = scn_text(val[K_ACTION]);
	int kind = 0;
	while (kind < FAULT_K_COUNT && strcmp(fault_kind_names[kind], an))
		kind++;
	if (kind == FAULT_K_COUNT) {
		char list[256] = "";
		for (int i = 0; i < FAULT_K_COUNT; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
				 fault_kind_names[i]);
		return scn_fail(s, val[K_ACTION], "action", "'%s' is not one of %s", shown(an), list);
	}
	f.kind = (uint32_t)kind;
	f.action = fault_kind_action((enum fault_kind)kind);
	f.line = (int32_t)m->start_mark.line + 1;
	f.trig_link = -1;
	f.trig_src = f.trig_dst = FAULT_ANY;
	f.src_node = f.dst_node = f.node = FAULT_ANY;
	f.prob = MODEL_PROB_ONE;
	f.count = 1;
	f.duration_ns = FAULT_FOREVER;
	if (val[K_NAME]) {
		if (scn_expect(s, val[K_NAME], YAML_SCALAR_NODE, "name", "a name"))
			return s->rc;
		const char *t = scn_text(val[K_NAME]);
		if (strlen(t) > FAULT_NAME_MAX || strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
							    "OPQRSTUVWXYZ0123456789._-") != strlen(t))
			return scn_fail(s, val[K_NAME], "name",
					"'%s' is not 1..%d of [A-Za-z0-9._-]", shown(t), FAULT_NAME_MAX);
		snprintf(f.name, sizeof(f.name), "%s", t);
	} else {
		snprintf(f.name, sizeof(f.name), "%s-%d", an, index);
	}

	/* the scope */
	const char *kn = fault_kind_names[kind];
	enum dir dir = DIR_BOTH;
	if (val[K_DIR]) {
		if (scn_expect(s, val[K_DIR], YAML_SCALAR_NODE, "direction", "both, forward or backward"))
			return s->rc;
		const char *d = scn_text(val[K_DIR]);
		if (!strcmp(d, "both"))
			dir = DIR_BOTH;
		else if (!strcmp(d, "forward") || !strcmp(d, "out"))
			dir = DIR_FORWARD;
		else if (!strcmp(d, "backward") || !strcmp(d, "in"))
			dir = DIR_BACKWARD;
		else
			return scn_fail(s, val[K_DIR], "direction",
					"'%s' is not both, forward (as the link is written; a NIC: "
					"out) or backward (in)",
					shown(d));
	}
	int both = 0;
	switch (f.kind) {
	case FAULT_K_LINK_DOWN:
	case FAULT_K_FLAP:
	case FAULT_K_DEGRADE:
	case FAULT_K_CORRUPT:
		if (need(s, m, val, K_LINK, kn) || refuse(s, val, K_CONN, kn) ||
		    refuse(s, val, K_NIC, kn) || get_links(s, val[K_LINK], "link", dir, &f))
			return s->rc;
		break;
	case FAULT_K_NIC_DOWN: {
		if (need(s, m, val, K_NIC, kn) || refuse(s, val, K_LINK, kn) ||
		    refuse(s, val, K_CONN, kn) || get_links(s, val[K_NIC], "nic", dir, &f))
			return s->rc;
		break;
	}
	case FAULT_K_STALL:
		if (val[K_LINK] && val[K_CONN])
			return scn_fail(s, val[K_CONN], "conn", "a stall is on a link or on "
								"connections, not both");
		if (!val[K_LINK] && !val[K_CONN])
			return scn_fail(s, m, "link", "missing: a stall needs a link or a conn");
		if (val[K_LINK] && get_links(s, val[K_LINK], "link", dir, &f))
			return s->rc;
		if (val[K_CONN]) {
			f.conn_scope = 1;
			if (get_conn(s, val[K_CONN], "conn", &f.src_node, &f.dst_node, &both))
				return s->rc;
		}
		break;
	case FAULT_K_RESET:
	case FAULT_K_COMM_HANG:
		if (need(s, m, val, K_CONN, kn) || refuse(s, val, K_LINK, kn))
			return s->rc;
		f.conn_scope = 1;
		if (get_conn(s, val[K_CONN], "conn", &f.src_node, &f.dst_node, &both))
			return s->rc;
		break;
	default: /* node-scoped: connects, calls and the node's processes */
		if (refuse(s, val, K_LINK, kn) || refuse(s, val, K_CONN, kn) ||
		    refuse(s, val, K_NIC, kn))
			return s->rc;
		if (on_process(f.action) && need(s, m, val, K_NODE, kn))
			return s->rc;
		if (val[K_NODE] && get_node(s, val[K_NODE], "node", &f.node))
			return s->rc;
		if (on_process(f.action) && f.node == FAULT_ANY)
			return scn_fail(s, val[K_NODE], "node", "%s needs one node, not any", kn);
		break;
	}
	if (val[K_NODE] && (f.conn_scope || f.nlinks))
		return scn_fail(s, val[K_NODE], "node", "does not apply to %s", kn);
	if (val[K_DIR] && !val[K_LINK] && !val[K_NIC])
		return scn_fail(s, val[K_DIR], "direction", "goes with link or nic");

	/* the action's own settings */
	if (f.kind == FAULT_K_DEGRADE) {
		if (need(s, m, val, K_SET, kn) || parse_set(s, val[K_SET], &f))
			return s->rc;
	} else if (refuse(s, val, K_SET, kn)) {
		return s->rc;
	}
	if (f.kind == FAULT_K_CORRUPT) {
		double p;
		if (need(s, m, val, K_P, kn) || get_fraction(s, val[K_P], "p", &p))
			return s->rc;
		f.corrupt_p = model_prob(p);
		f.set = FAULT_SET_CORRUPT;
	} else if (refuse(s, val, K_P, kn)) {
		return s->rc;
	}
	if (f.action == FAULT_A_CALLFAIL) {
		if (parse_calls(s, val, &f))
			return s->rc;
	} else if (refuse(s, val, K_NTH, kn) || refuse(s, val, K_FRACTION, kn) ||
		   refuse(s, val, K_ERROR, kn)) {
		return s->rc;
	}
	if (f.kind == FAULT_K_CONNECT_DELAY) {
		if (need(s, m, val, K_DELAY, kn) || get_time(s, val[K_DELAY], "delay", &f.delay_ns))
			return s->rc;
		if (f.delay_ns <= 0)
			return scn_fail(s, val[K_DELAY], "delay", "must be positive");
	} else if (refuse(s, val, K_DELAY, kn)) {
		return s->rc;
	}

	/* the schedule */
	int trig_both = 0;
	if (val[K_AFTER] && parse_after(s, val[K_AFTER], &f, &trig_both))
		return s->rc;
	if (val[K_AT] && get_time(s, val[K_AT], "at", &f.start_ns))
		return s->rc;
	if (f.kind == FAULT_K_FLAP) {
		if (need(s, m, val, K_PERIOD, kn) || refuse(s, val, K_EVERY, kn) ||
		    refuse(s, val, K_FOR, kn))
			return s->rc;
		double duty = 0.5;
		if (get_time(s, val[K_PERIOD], "period", &f.period_ns))
			return s->rc;
		if (f.period_ns < 1000)
			return scn_fail(s, val[K_PERIOD], "period", "%" PRId64 " ns is below 1 us",
					f.period_ns);
		if (val[K_DUTY] && get_fraction(s, val[K_DUTY], "duty", &duty))
			return s->rc;
		if (duty <= 0 || duty >= 1)
			return scn_fail(s, val[K_DUTY] ? val[K_DUTY] : m, "duty",
					"the fraction of each period the link is down: in (0, 1)");
		f.duration_ns = (int64_t)llround((double)f.period_ns * duty);
		if (f.duration_ns <= 0 || f.duration_ns >= f.period_ns)
			return scn_fail(s, val[K_PERIOD], "period", "too short for duty %g", duty);
		f.count = 0;
	} else {
		if (f.kind == FAULT_K_STRAGGLE) {
			if (parse_slow(s, val, &f))
				return s->rc;
		} else if (refuse(s, val, K_PERIOD, kn) || refuse(s, val, K_DUTY, kn)) {
			return s->rc;
		}
		if (val[K_FOR] && get_time(s, val[K_FOR], "for", &f.duration_ns))
			return s->rc;
		if (val[K_FOR] && f.duration_ns <= 0)
			return scn_fail(s, val[K_FOR], "for", "must be positive");
		if (val[K_EVERY]) {
			if (get_time(s, val[K_EVERY], "every", &f.period_ns))
				return s->rc;
			if (!val[K_FOR])
				return scn_fail(s, val[K_EVERY], "every", "a repeating fault needs for:");
			f.count = 0;
		}
		/* instantaneous actions: a short window is enough to catch the next message */
		if (!val[K_FOR] && (f.kind == FAULT_K_NODE_KILL))
			f.duration_ns = 1;
	}
	if (val[K_COUNT]) {
		int64_t c;
		if (scn_get_int(s, val[K_COUNT], "count", 1, INT64_MAX, "windows", &c))
			return s->rc;
		if (c > 1 && !f.period_ns)
			return scn_fail(s, val[K_COUNT], "count", "more than one window needs every:");
		f.count = (uint64_t)c;
	}
	if (val[K_PROB]) {
		double p;
		if (get_fraction(s, val[K_PROB], "probability", &p))
			return s->rc;
		f.prob = model_prob(p);
	}

	char why[256];
	if (fault_spec_check(&f, why, sizeof(why))) {
		size_t k = strcspn(why, ":");
		char key[32] = "faults";
		if (why[k] == ':' && k < sizeof(key)) {
			memcpy(key, why, k);
			key[k] = 0;
		}
		const yaml_node_t *at = NULL;
		for (int j = 0; j < K_N; j++)
			if (!strcmp(keys[j], key))
				at = val[j];
		return scn_fail(s, at ? at : m, key, "%s", why[k] == ':' ? why + k + 2 : why);
	}
	/* a down link on a NIC with no ACK timer would never retry: a hang, not a fault */
	if (f.action == FAULT_A_DOWN)
		for (int id = 0; id < fabric_nnodes(s->f); id++) {
			const struct fabric_node *c = fabric_node(s->f, id);
			for (int j = 0; j < c->nnics; j++)
				if (model_timeout_ns(&c->nic[j].model) == MODEL_NEVER)
					return scn_fail(s, val[K_ACTION], "action",
							"%s: node %s has timeout_exp 0 (no ACK timer): "
							"its transport would never retry after a lost "
							"packet, so a down link would hang it; set "
							"timeout_exp",
							kn, c->name);
		}
	int copies = both ? 2 : 1;
	for (int c = 0; c < copies; c++) {
		if (plan->n == FAULT_MAX)
			return scn_fail(s, m, "faults", "more than %d faults", FAULT_MAX);
		struct fault_spec *g = &plan->f[plan->n++];
		*g = f;
		if (c == 1) {
			int32_t t = g->src_node;
			g->src_node = g->dst_node;
			g->dst_node = t;
		}
	}
	return 0;
}

/* ---- the dump ------------------------------------------------------------------ */

static const char *node_name(const struct fabric *fab, int32_t id)
{
	const struct fabric_node *n = id >= 0 ? fabric_node(fab, id) : NULL;
	return n ? n->name : "any";
}

/* ,"key":{"from":"a","to":"b"} */
static void json_conn(struct jbuf *b, const char *key, const struct fabric *fab, int32_t from,
		      int32_t to)
{
	jbuf_printf(b, ",\"%s\":{\"from\":", key);
	jbuf_str(b, node_name(fab, from));
	jbuf_puts(b, ",\"to\":");
	jbuf_str(b, node_name(fab, to));
	jbuf_puts(b, "}");
}

static void json_set(struct jbuf *b, const struct fault_spec *f)
{
	const char *sep = "";
	jbuf_puts(b, ",\"set\":{");
	if (f->set & FAULT_SET_RATE) {
		jbuf_printf(b, "\"rate_bps\":%" PRIu64, f->rate_bps);
		sep = ",";
	}
	if (f->set & FAULT_SET_LATENCY) {
		jbuf_printf(b, "%s\"add_latency_ns\":%" PRId64, sep, f->extra_latency_ns);
		sep = ",";
	}
	if (f->set & FAULT_SET_LOSS) {
		jbuf_printf(b, "%s\"loss\":{\"kind\":%d,\"p\":[", sep, (int)f->loss.kind);
		for (int j = 0; j < 5; j++)
			jbuf_printf(b, "%s%.9g", j ? "," : "", model_prob_value(f->loss.p[j]));
		jbuf_puts(b, "]}");
		sep = ",";
	}
	if (f->set & FAULT_SET_CORRUPT)
		jbuf_printf(b, "%s\"corrupt_p\":%.9g", sep, model_prob_value(f->corrupt_p));
	jbuf_puts(b, "}");
}

static void json_spec(struct jbuf *b, int id, const struct fault_spec *f, const struct fabric *fab)
{
	static const char *const trig[] = {"time", "first_traffic", "messages", "bytes"};
	jbuf_printf(b, "{\"id\":%d,\"name\":", id);
	jbuf_str(b, f->name);
	jbuf_printf(b, ",\"action\":\"%s\",\"line\":%d,\"links\":[", fault_kind_names[f->kind],
		    f->line);
	for (uint32_t j = 0; j < f->nlinks; j++)
		jbuf_printf(b, "%s%u", j ? "," : "", f->link[j]);
	jbuf_puts(b, "]");
	if (f->conn_scope)
		json_conn(b, "conn", fab, f->src_node, f->dst_node);
	if (!f->conn_scope && !f->nlinks) {
		jbuf_puts(b, ",\"node\":");
		jbuf_str(b, node_name(fab, f->node));
	}
	jbuf_printf(b, ",\"trigger\":{\"kind\":\"%s\"", trig[f->trigger]);
	if (f->trigger == FAULT_T_MESSAGES || f->trigger == FAULT_T_BYTES)
		jbuf_printf(b, ",\"threshold\":%" PRIu64, f->threshold);
	if (f->trigger != FAULT_T_TIME) {
		if (f->trig_link >= 0)
			jbuf_printf(b, ",\"link\":%d", f->trig_link);
		else
			json_conn(b, "conn", fab, f->trig_src, f->trig_dst);
	}
	/* the clock start_ns counts on, said so a reader cannot take it for the job's */
	jbuf_printf(b, "},\"clock\":\"%s\",\"start_ns\":%" PRId64 ",\"duration_ns\":",
		    f->trigger == FAULT_T_TIME ? "fabric_start" : "trigger", f->start_ns);
	if (f->duration_ns == FAULT_FOREVER)
		jbuf_puts(b, "null");
	else
		jbuf_printf(b, "%" PRId64, f->duration_ns);
	jbuf_printf(b, ",\"period_ns\":%" PRId64 ",\"count\":", f->period_ns);
	if (f->count)
		jbuf_printf(b, "%" PRIu64, f->count);
	else
		jbuf_puts(b, "null");
	jbuf_printf(b, ",\"probability\":%.9g", model_prob_value(f->prob));
	if (f->action == FAULT_A_DEGRADE)
		json_set(b, f);
	if (f->action == FAULT_A_DELAY)
		jbuf_printf(b, ",\"delay_ns\":%" PRId64, f->delay_ns);
	if (f->action == FAULT_A_STRAGGLE)
		jbuf_printf(b, ",\"period_slow_ns\":%" PRId64 ",\"duty\":%.9g", f->slow_period_ns,
			    model_prob_value(f->frac));
	if (f->action == FAULT_A_CALLFAIL) {
		jbuf_printf(b, ",\"nth\":%" PRIu64 ",\"fraction\":%.9g,\"error\":\"%s\"", f->nth,
			    f->nth ? 0.0 : model_prob_value(f->frac), fault_err_names[f->err_kind]);
	}
	jbuf_puts(b, "}");
}

char *fault_plan_json(const struct fault_plan *p, const struct fabric *fab)
{
	struct jbuf b = JBUF_INIT;
	char *text;
	jbuf_puts(&b, "[");
	for (int i = 0; i < p->n; i++) {
		jbuf_puts(&b, i ? "," : "");
		json_spec(&b, i, &p->f[i], fab);
	}
	jbuf_puts(&b, "]");
	return jbuf_take(&b, &text, NULL) ? NULL : text;
}

int scn_parse_faults(struct scn *s, const yaml_node_t *v)
{
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, "faults", "a list of faults"))
		return s->rc;
	if (fabric_is_ideal(s->f))
		return scn_fail(s, v, "faults", "faults need an explicit fabric (kind: explicit, with "
						"links); the ideal fabric has no links to fail");
	struct fault_plan *plan = calloc(1, sizeof(*plan));
	if (!plan)
		return scn_fail_oom(s);
	for (int i = 0; i < scn_nitems(v); i++)
		if (parse_one(s, scn_item(s, v, i), i, plan)) {
			free(plan);
			return s->rc;
		}
	char *json = fault_plan_json(plan, s->f);
	if (!json) {
		free(plan);
		return scn_fail_oom(s);
	}
	fault_plan_free(s->sc->faults);
	s->sc->faults = plan;
	free(s->sc->faults_json);
	s->sc->faults_json = json;
	return 0;
}
