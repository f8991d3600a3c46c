/* SPDX-License-Identifier: MIT */
/*
 * scenario.c - scenario files to a resolved fabric. See scenario.h; the
 * schema is documented in scenarios/README.md.
 *
 * The walk: libyaml loads the document; parse_top() reads the top-level
 * sections, parse_fabric() the fabric in a fixed order (kind and fabric
 * parameters, defaults, nodes, switches, links) whatever the order in the
 * file, building an explicit fabric through fabric.h's builder calls, and
 * fabric_finish() checks and resolves what needs the whole picture (every
 * NIC connected, every NIC reaching every other). Every object built gets a
 * tag: an index into s->locs, so errors found later still point into the
 * file.
 *
 * Parameter maps (defaults.link, a link entry, a_to_b, ...) are parsed into
 * a layer: a struct of the scope with a bitmask of the parameters given.
 * Layers apply in order: built-in defaults, fabric.defaults, (for a link's
 * rate) its switches' port_rate_gbps, the link entry, its direction. A
 * `jitter:` or `loss:` map sets its whole group, so it replaces an inherited
 * one instead of mixing with it.
 */
#include "sim/scn/scenario.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "sim/scn/param.h"
#include "sim/core/fault.h"
#include "sim/scn/place.h"
#include "sim/scn/scn_int.h"

#define NAME_TEXT_MAX 128
#define DESCRIPTION_MAX 4096
#define RESERVED_ALL "all" /* selects every node in links */
#define IMPLICIT_SWITCH "sw0"

/* ---- tags: where each built object came from ----------------------------------------- */

static int add_loc(struct scn *s, const yaml_node_t *n, const char *key)
{
	if (s->nlocs == s->caplocs) {
		int cap = s->caplocs ? s->caplocs * 2 : 64;
		struct loc *l = realloc(s->locs, sizeof(*l) * (size_t)cap);
		if (!l)
			return -1;
		s->locs = l;
		s->caplocs = cap;
	}
	s->locs[s->nlocs] = (struct loc){(int)n->start_mark.line + 1, (int)n->start_mark.column + 1,
					 key};
	return s->nlocs++;
}

/* ---- nodes ---------------------------------------------------------------------------- */

static int check_free_name(struct scn *s, const yaml_node_t *at, const char *key,
			   const char *name)
{
	const struct fabric_node *n = fabric_node_find(s->f, name);
	const struct fabric_switch *w = n ? NULL : fabric_switch_find(s->f, name);
	if (n || w) {
		const struct loc *l = &s->locs[n ? n->tag : w->tag];
		return scn_fail(s, at, key, "duplicate name '%s': a %s of that name is at %d:%d", name,
			    n ? "node" : "switch", l->line, l->col);
	}
	if (!strcmp(name, RESERVED_ALL))
		return scn_fail(s, at, key, "'%s' is reserved (it stands for every node in links)",
			    RESERVED_ALL);
	return 0;
}

static int add_node(struct scn *s, const yaml_node_t *at, const char *key, const char *name,
		    int nics, const struct model_nic *nic)
{
	char why[FABRIC_ERR_LEN];
	if (check_free_name(s, at, key, name))
		return s->rc;
	int tag = add_loc(s, at, key);
	if (tag < 0)
		return scn_fail_oom(s);
	int rc = fabric_add_node(s->f, name, nics, nic, tag, why, sizeof(why));
	if (rc == -ENOMEM)
		return scn_fail_oom(s);
	if (rc)
		return scn_fail(s, at, key, "%s", why);
	return 0;
}

static int parse_node_group(struct scn *s, const yaml_node_t *g)
{
	const yaml_node_t *names = NULL, *count = NULL, *pattern = NULL, *first = NULL,
			  *nics = NULL, *nic = NULL, *count_key = NULL;
	if (scn_expect(s, g, YAML_MAPPING_NODE, "nodes",
		   "a mapping like {names: [a, b]} or {count: 8, name: \"n{i}\"}"))
		return s->rc;
	for (int i = 0; i < scn_npairs(g); i++) {
		const char *name;
		yaml_node_t *k, *v;
		if (scn_pair_key(s, g, i, &name, &k, &v))
			return s->rc;
		if (!strcmp(name, "names"))
			names = v;
		else if (!strcmp(name, "count"))
			count = v, count_key = k;
		else if (!strcmp(name, "name"))
			pattern = v;
		else if (!strcmp(name, "first"))
			first = v;
		else if (!strcmp(name, "nics"))
			nics = v;
		else if (!strcmp(name, "nic"))
			nic = v;
		else
			return scn_fail(s, k, name,
				    "unknown key in a nodes entry (known: names, count, name, first, "
				    "nics, nic)");
	}
	if (names && count)
		return scn_fail(s, count_key, "count", "give names or count, not both");
	if (!names && !count)
		return scn_fail(s, g, "nodes", "a nodes entry needs names: [...] or count: N");
	if (names && (pattern || first))
		return scn_fail(s, pattern ? pattern : first, pattern ? "name" : "first",
			    "goes with count:, not with names:");
	int64_t nn = 1, n0 = 0, nc = 1;
	if (nics && scn_get_int(s, nics, "nics", 1, FABRIC_MAX_NICS, "count", &nc))
		return s->rc;
	struct layer l;
	char why[MODEL_ERR_LEN];
	scn_layer_init(&l, PARAM_NIC, &s->dnic);
	if (nic && scn_param_map(s, PARAM_NIC, nic, "nic", "a node's nic", &l))
		return s->rc;
	struct model_nic m = l.v.nic;
	if (model_nic_resolve(&m, why, sizeof(why)))
		return scn_fail_model(s, nic ? nic : g, "nic", why, "");
	if (names) {
		if (scn_expect(s, names, YAML_SEQUENCE_NODE, "names", "a list of node names"))
			return s->rc;
		if (scn_nitems(names) == 0)
			return scn_fail(s, names, "names", "the list is empty");
		for (int i = 0; i < scn_nitems(names); i++) {
			yaml_node_t *e = scn_item(s, names, i);
			if (!e || scn_expect(s, e, YAML_SCALAR_NODE, "names", "a node name") ||
			    add_node(s, e, "names", scn_text(e), (int)nc, &l.v.nic))
				return s->rc ? s->rc : scn_fail(s, names, "names", "a missing entry");
		}
		return 0;
	}
	if (scn_get_int(s, count, "count", 1, FABRIC_MAX_NODES, "nodes", &nn) ||
	    (first && scn_get_int(s, first, "first", 0, 1000000000, "", &n0)))
		return s->rc;
	const char *pat = "n{i}";
	if (pattern) {
		if (scn_expect(s, pattern, YAML_SCALAR_NODE, "name", "a name pattern like \"n{i}\""))
			return s->rc;
		pat = scn_text(pattern);
	}
	const char *hole = strstr(pat, "{i}");
	if ((!hole && nn > 1) || (hole && strstr(hole + 3, "{i}"))) {
		char q[80];
		return scn_fail(s, pattern ? pattern : count, "name",
			    "pattern '%s' needs {i} exactly once (the node's number)",
			    param_quote(pat, q, sizeof(q)));
	}
	for (int64_t i = 0; i < nn; i++) {
		char name[FABRIC_NAME_MAX + 32];
		if (hole)
			snprintf(name, sizeof(name), "%.*s%lld%s", (int)(hole - pat), pat,
				 (long long)(n0 + i), hole + 3);
		else
			snprintf(name, sizeof(name), "%s", pat);
		if (add_node(s, count, "count", name, (int)nc, &l.v.nic))
			return s->rc;
	}
	return 0;
}

static int parse_nodes(struct scn *s, const yaml_node_t *v)
{
	if (v->type == YAML_MAPPING_NODE)
		return parse_node_group(s, v);
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, "nodes", "a nodes mapping or a list of them"))
		return s->rc;
	if (scn_nitems(v) == 0)
		return scn_fail(s, v, "nodes", "the list is empty");
	for (int i = 0; i < scn_nitems(v); i++) {
		yaml_node_t *g = scn_item(s, v, i);
		if (!g || parse_node_group(s, g))
			return s->rc ? s->rc : scn_fail(s, v, "nodes", "a missing entry");
	}
	return 0;
}

/* ---- switches --------------------------------------------------------------------------- */

static int parse_switches(struct scn *s, const yaml_node_t *v)
{
	char why[FABRIC_ERR_LEN];
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, "switches", "a list of switches"))
		return s->rc;
	for (int i = 0; i < scn_nitems(v); i++) {
		yaml_node_t *m = scn_item(s, v, i), *name = NULL;
		if (!m || scn_expect(s, m, YAML_MAPPING_NODE, "switches",
				 "a mapping like {name: sw0, ports: 40}"))
			return s->rc ? s->rc : scn_fail(s, v, "switches", "a missing entry");
		struct layer l;
		scn_layer_init(&l, PARAM_SWITCH, &s->dswitch);
		for (int j = 0; j < scn_npairs(m); j++) {
			const char *key;
			yaml_node_t *k, *pv;
			if (scn_pair_key(s, m, j, &key, &k, &pv))
				return s->rc;
			if (!strcmp(key, "name"))
				name = pv;
			else if (scn_param_pair(s, PARAM_SWITCH, key, k, pv, &l, "a switch", "name"))
				return s->rc;
		}
		if (!name)
			return scn_fail(s, m, "switches", "a switch needs a name");
		if (scn_expect(s, name, YAML_SCALAR_NODE, "name", "a switch name") ||
		    check_free_name(s, name, "name", scn_text(name)))
			return s->rc;
		int tag = add_loc(s, name, "name");
		if (tag < 0)
			return scn_fail_oom(s);
		int rc = fabric_add_switch(s->f, scn_text(name), &l.v.sw, tag, why, sizeof(why));
		if (rc == -ENOMEM)
			return scn_fail_oom(s);
		if (rc)
			return scn_fail(s, name, "name", "%s", why);
	}
	return 0;
}

/* ---- links -------------------------------------------------------------------------------- */

struct ends {
	struct fabric_ep *ep;
	const yaml_node_t **at; /* the scalar each came from */
	int n, cap;
};

static int ends_push(struct scn *s, struct ends *e, const struct fabric_ep *ep,
		     const yaml_node_t *at)
{
	if (e->n == e->cap) {
		int cap = e->cap ? e->cap * 2 : 8;
		struct fabric_ep *a = realloc(e->ep, sizeof(*a) * (size_t)cap);
		if (!a)
			return scn_fail_oom(s);
		e->ep = a;
		const yaml_node_t **b = realloc(e->at, sizeof(*b) * (size_t)cap);
		if (!b)
			return scn_fail_oom(s);
		e->at = b;
		e->cap = cap;
	}
	e->ep[e->n] = *ep;
	e->at[e->n++] = at;
	return 0;
}

static int node_nics(struct scn *s, struct ends *e, const struct fabric_node *n,
		     const yaml_node_t *at)
{
	for (int i = 0; i < n->nnics; i++) {
		struct fabric_ep ep = {FABRIC_EP_NIC, n->id, i};
		if (ends_push(s, e, &ep, at))
			return s->rc;
	}
	return 0;
}

/* One end spec: a switch, a node (all its NICs), node/i, <node>-nic<i>, all, all/i. */
static int parse_end(struct scn *s, const yaml_node_t *v, struct ends *e)
{
	char q[80];
	if (scn_expect(s, v, YAML_SCALAR_NODE, "ends",
		   "a switch, a node, node/<nic>, all or all/<nic>"))
		return s->rc;
	const char *t = scn_text(v), *slash = strchr(t, '/');
	char name[FABRIC_NAME_MAX + 2];
	size_t nlen = slash ? (size_t)(slash - t) : strlen(t);
	if (nlen > FABRIC_NAME_MAX)
		return scn_fail(s, v, "ends", "unknown node or switch '%s'", param_quote(t, q, sizeof(q)));
	memcpy(name, t, nlen);
	name[nlen] = 0;
	int64_t nic = -1;
	if (slash) {
		const char *p = slash + 1;
		nic = 0;
		if (!*p || strlen(p) > 3)
			nic = -2;
		for (; *p && nic >= 0; p++)
			nic = *p >= '0' && *p <= '9' ? nic * 10 + (*p - '0') : -2;
		if (nic < 0)
			return scn_fail(s, v, "ends", "'%s': after the '/' comes a NIC index",
				    param_quote(t, q, sizeof(q)));
	}
	if (!strcmp(name, RESERVED_ALL)) {
		if (fabric_nnodes(s->f) == 0)
			return scn_fail(s, v, "ends", "'all': there are no nodes");
		for (int i = 0; i < fabric_nnodes(s->f); i++) {
			const struct fabric_node *n = fabric_node(s->f, i);
			if (nic < 0) {
				if (node_nics(s, e, n, v))
					return s->rc;
				continue;
			}
			if (nic >= n->nnics)
				return scn_fail(s, v, "ends",
					    "'%s' needs NIC %lld on every node; node %s has %d NIC(s)",
					    param_quote(t, q, sizeof(q)), (long long)nic, n->name, n->nnics);
			struct fabric_ep ep = {FABRIC_EP_NIC, n->id, (int)nic};
			if (ends_push(s, e, &ep, v))
				return s->rc;
		}
		return 0;
	}
	const struct fabric_node *n = fabric_node_find(s->f, name);
	const struct fabric_switch *w = fabric_switch_find(s->f, name);
	if (w) {
		if (slash)
			return scn_fail(s, v, "ends",
				    "'%s': %s is a switch; a NIC index goes with a node name",
				    param_quote(t, q, sizeof(q)), w->name);
		struct fabric_ep ep = {FABRIC_EP_SWITCH, w->id, 0};
		return ends_push(s, e, &ep, v);
	}
	if (!n && !slash) {
		/* <node>-nic<i>, the NIC's own name */
		const char *dash = strrchr(t, '-');
		if (dash && !strncmp(dash, "-nic", 4) && dash[4] >= '0' && dash[4] <= '9' &&
		    strlen(dash + 4) <= 3 && strspn(dash + 4, "0123456789") == strlen(dash + 4)) {
			name[dash - t] = 0;
			n = fabric_node_find(s->f, name);
			nic = atoi(dash + 4);
		}
	}
	if (!n)
		return scn_fail(s, v, "ends", "unknown node or switch '%s'", param_quote(t, q, sizeof(q)));
	if (nic < 0)
		return node_nics(s, e, n, v);
	if (nic >= n->nnics)
		return scn_fail(s, v, "ends", "node %s has %d NIC(s) (0..%d); there is no NIC %lld",
			    n->name, n->nnics, n->nnics - 1, (long long)nic);
	struct fabric_ep ep = {FABRIC_EP_NIC, n->id, (int)nic};
	return ends_push(s, e, &ep, v);
}

/* An element of ends: one spec, or a list of them. */
static int parse_end_list(struct scn *s, const yaml_node_t *v, struct ends *e)
{
	if (v->type != YAML_SEQUENCE_NODE)
		return parse_end(s, v, e);
	if (scn_nitems(v) == 0)
		return scn_fail(s, v, "ends", "an empty list of ends");
	for (int i = 0; i < scn_nitems(v); i++) {
		yaml_node_t *x = scn_item(s, v, i);
		if (!x || parse_end(s, x, e))
			return s->rc ? s->rc : scn_fail(s, v, "ends", "a missing entry");
	}
	return 0;
}

/* The lower port rate of the switch ends that set one, or 0. */
static uint64_t port_rate(struct scn *s, const struct fabric_ep *a, const struct fabric_ep *b)
{
	uint64_t r = 0;
	const struct fabric_ep *e[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		if (e[i]->kind != FABRIC_EP_SWITCH)
			continue;
		uint64_t p = fabric_switch(s->f, e[i]->id)->cfg.port_rate_bps;
		if (p && (!r || p < r))
			r = p;
	}
	return r;
}

static void link_dir(struct scn *s, const struct fabric_ep *a, const struct fabric_ep *b,
		     const struct layer *l0, const struct layer *ld, struct model_link *out)
{
	const struct param *rate = param_find(PARAM_LINK, "rate_gbps");
	*out = s->dlink;
	uint64_t pr = port_rate(s, a, b);
	if (pr && !scn_layer_has(l0, rate) && !scn_layer_has(ld, rate))
		out->rate_bps = pr;
	scn_layer_apply(PARAM_LINK, out, l0);
	scn_layer_apply(PARAM_LINK, out, ld);
}

static int add_link(struct scn *s, const struct fabric_ep *a, const struct fabric_ep *b,
		    const yaml_node_t *at, const struct layer *l0, const struct layer *lab,
		    const struct layer *lba)
{
	char why[FABRIC_ERR_LEN];
	struct model_link ab, ba;
	link_dir(s, a, b, l0, lab, &ab);
	link_dir(s, b, a, l0, lba, &ba);
	for (int dir = 0; dir < 2; dir++) {
		struct model_link m = dir ? ba : ab;
		if (model_link_resolve(&m, why, sizeof(why))) {
			const struct fabric_ep *x = dir ? b : a, *y = dir ? a : b;
			char sfx[2 * 96 + 16], nx[96], ny[96];
			for (int k = 0; k < 2; k++) {
				const struct fabric_ep *e = k ? y : x;
				char *o = k ? ny : nx;
				if (e->kind == FABRIC_EP_SWITCH)
					snprintf(o, 96, "%s", fabric_switch(s->f, e->id)->name);
				else
					snprintf(o, 96, "%s/%d", fabric_node(s->f, e->id)->name, e->nic);
			}
			snprintf(sfx, sizeof(sfx), " (link %s -> %s)", nx, ny);
			return scn_fail_model(s, at, "ends", why, sfx);
		}
	}
	int tag = add_loc(s, at, "ends"), other = -1;
	if (tag < 0)
		return scn_fail_oom(s);
	int rc = fabric_add_link(s->f, a, b, &ab, &ba, tag, &other, why, sizeof(why));
	if (rc == -ENOMEM)
		return scn_fail_oom(s);
	if (rc == -EBUSY && other >= 0)
		return scn_fail(s, at, "ends", "%s (the other link: %d:%d)", why, s->locs[other].line,
			    s->locs[other].col);
	if (rc)
		return scn_fail(s, at, "ends", "%s", why);
	return 0;
}

static int parse_link(struct scn *s, const yaml_node_t *m)
{
	const yaml_node_t *ends = NULL;
	struct layer l0, lab, lba;
	struct ends ea = {0}, eb = {0};
	if (scn_expect(s, m, YAML_MAPPING_NODE, "links", "a mapping like {ends: [n0, sw0]}"))
		return s->rc;
	scn_layer_init(&l0, PARAM_LINK, &s->dlink);
	scn_layer_init(&lab, PARAM_LINK, &s->dlink);
	scn_layer_init(&lba, PARAM_LINK, &s->dlink);
	for (int i = 0; i < scn_npairs(m); i++) {
		const char *key;
		yaml_node_t *k, *v;
		if (scn_pair_key(s, m, i, &key, &k, &v))
			return s->rc;
		if (!strcmp(key, "ends"))
			ends = v;
		else if (!strcmp(key, "a_to_b") || !strcmp(key, "b_to_a"))
			scn_param_map(s, PARAM_LINK, v, key, key, key[0] == 'a' ? &lab : &lba);
		else
			scn_param_pair(s, PARAM_LINK, key, k, v, &l0, "a link",
					 "ends, a_to_b, b_to_a");
		if (s->rc)
			return s->rc;
	}
	if (!ends)
		return scn_fail(s, m, "links", "a link needs ends: [a, b]");
	if (scn_expect(s, ends, YAML_SEQUENCE_NODE, "ends", "a list of two ends, like [n0, sw0]"))
		return s->rc;
	if (scn_nitems(ends) != 2)
		return scn_fail(s, ends, "ends", "a link has two ends, not %d", scn_nitems(ends));
	yaml_node_t *xa = scn_item(s, ends, 0), *xb = scn_item(s, ends, 1);
	if (!xa || !xb)
		return scn_fail(s, ends, "ends", "a missing end");
	if (!parse_end_list(s, xa, &ea) && !parse_end_list(s, xb, &eb)) {
		if (ea.n > 1 && eb.n > 1)
			scn_fail(s, ends, "ends",
			     "both ends stand for several endpoints (%d and %d); one end must be a "
			     "switch, a NIC or a one-NIC node",
			     ea.n, eb.n);
		for (int i = 0; i < ea.n && !s->rc; i++)
			for (int j = 0; j < eb.n && !s->rc; j++)
				add_link(s, &ea.ep[i], &eb.ep[j], eb.n > 1 ? eb.at[j] : ea.at[i], &l0,
					 &lab, &lba); /* where: the end that varies, else the first */
	}
	free(ea.ep);
	free(ea.at);
	free(eb.ep);
	free(eb.at);
	return s->rc;
}

static int parse_links(struct scn *s, const yaml_node_t *v)
{
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, "links", "a list of links"))
		return s->rc;
	for (int i = 0; i < scn_nitems(v); i++) {
		yaml_node_t *m = scn_item(s, v, i);
		if (!m || parse_link(s, m))
			return s->rc ? s->rc : scn_fail(s, v, "links", "a missing entry");
	}
	return 0;
}

/* No switches: and no links: one switch, every NIC on it. */
static int implicit_switch(struct scn *s, const yaml_node_t *at)
{
	char why[FABRIC_ERR_LEN];
	int nn = fabric_nnodes(s->f), nics = fabric_nnics(s->f);
	if (fabric_node_find(s->f, IMPLICIT_SWITCH))
		return scn_fail(s, at, "nodes",
			    "a node is called %s, the name of the implicit switch: write switches: "
			    "and links:",
			    IMPLICIT_SWITCH);
	if (nics > FABRIC_MAX_PORTS)
		return scn_fail(s, at, "nodes",
			    "%d NICs do not fit the implicit switch (%d ports at most): write "
			    "switches: and links:",
			    nics, FABRIC_MAX_PORTS);
	struct fabric_switch_cfg cfg = s->dswitch;
	cfg.ports = nics;
	int tag = add_loc(s, at, "nodes");
	if (tag < 0)
		return scn_fail_oom(s);
	if (fabric_add_switch(s->f, IMPLICIT_SWITCH, &cfg, tag, why, sizeof(why)))
		return scn_fail(s, at, "nodes", "%s", why);
	struct layer none;
	scn_layer_init(&none, PARAM_LINK, &s->dlink);
	struct fabric_ep sw = {FABRIC_EP_SWITCH, fabric_switch_find(s->f, IMPLICIT_SWITCH)->id, 0};
	for (int i = 0; i < nn; i++) {
		const struct fabric_node *n = fabric_node(s->f, i);
		const struct loc *l = &s->locs[n->tag];
		for (int j = 0; j < n->nnics; j++) {
			struct fabric_ep ep = {FABRIC_EP_NIC, i, j};
			struct model_link ab, ba;
			int other;
			link_dir(s, &ep, &sw, &none, &none, &ab);
			link_dir(s, &sw, &ep, &none, &none, &ba);
			if (fabric_add_link(s->f, &ep, &sw, &ab, &ba, n->tag, &other, why, sizeof(why)))
				return scn_fail_at(s, l->line, l->col, l->key, "%s", why);
		}
	}
	return 0;
}

/* ---- the fabric and the document ---------------------------------------------------------- */

static int parse_defaults(struct scn *s, const yaml_node_t *v)
{
	if (scn_expect(s, v, YAML_MAPPING_NODE, "defaults", "a mapping with link, nic, switch"))
		return s->rc;
	for (int i = 0; i < scn_npairs(v); i++) {
		const char *key;
		yaml_node_t *k, *m;
		struct layer l;
		if (scn_pair_key(s, v, i, &key, &k, &m))
			return s->rc;
		if (!strcmp(key, "link")) {
			scn_layer_init(&l, PARAM_LINK, &s->dlink);
			if (!scn_param_map(s, PARAM_LINK, m, "link", "defaults.link", &l))
				s->dlink = l.v.link;
		} else if (!strcmp(key, "nic")) {
			scn_layer_init(&l, PARAM_NIC, &s->dnic);
			if (!scn_param_map(s, PARAM_NIC, m, "nic", "defaults.nic", &l))
				s->dnic = l.v.nic;
		} else if (!strcmp(key, "switch")) {
			scn_layer_init(&l, PARAM_SWITCH, &s->dswitch);
			if (!scn_param_map(s, PARAM_SWITCH, m, "switch", "defaults.switch", &l))
				s->dswitch = l.v.sw;
		} else {
			return scn_fail(s, k, key, "unknown key in defaults (known: link, nic, switch)");
		}
		if (s->rc)
			return s->rc;
	}
	return 0;
}

static int parse_fabric(struct scn *s, const yaml_node_t *m)
{
	char why[FABRIC_ERR_LEN];
	enum { F_KIND, F_DEFAULTS, F_NODES, F_SWITCHES, F_LINKS, F_N };
	static const char *const names[F_N] = {"kind", "defaults", "nodes", "switches", "links"};
	const yaml_node_t *val[F_N] = {0}, *key[F_N] = {0};
	if (scn_expect(s, m, YAML_MAPPING_NODE, "fabric", "a mapping (kind, nodes, switches, links, ...)"))
		return s->rc;
	/* kind first: it decides which parameters are allowed. */
	for (int i = 0; i < scn_npairs(m); i++) {
		const char *name;
		yaml_node_t *k, *v;
		if (scn_pair_key(s, m, i, &name, &k, &v))
			return s->rc;
		for (int j = 0; j < F_N; j++)
			if (!strcmp(name, names[j]))
				val[j] = v, key[j] = k;
	}
	if (val[F_KIND]) {
		if (scn_expect(s, val[F_KIND], YAML_SCALAR_NODE, "kind", "ideal or explicit"))
			return s->rc;
		if (!strcmp(scn_text(val[F_KIND]), "ideal"))
			s->ideal = true;
		else if (strcmp(scn_text(val[F_KIND]), "explicit")) {
			char q[80];
			return scn_fail(s, val[F_KIND], "kind", "'%s' is not one of ideal, explicit",
				    param_quote(scn_text(val[F_KIND]), q, sizeof(q)));
		}
	}
	struct layer l;
	scn_layer_init(&l, PARAM_FABRIC, &s->cfg);
	for (int i = 0; i < scn_npairs(m); i++) {
		const char *name;
		yaml_node_t *k, *v;
		bool ours = false;
		scn_pair_key(s, m, i, &name, &k, &v);
		for (int j = 0; j < F_N; j++)
			ours |= !strcmp(name, names[j]);
		if (!ours && scn_param_pair(s, PARAM_FABRIC, name, k, v, &l, "fabric",
					      "kind, defaults, nodes, switches, links"))
			return s->rc;
	}
	s->cfg = l.v.fab;
	if (s->ideal) {
		for (int j = F_DEFAULTS; j < F_N; j++)
			if (key[j])
				return scn_fail(s, key[j], names[j],
					    "not with kind: ideal (the ideal fabric makes nodes as "
					    "they say hello, and has no switches or links)");
		if (fabric_new_ideal(&s->cfg, &s->f, why, sizeof(why)))
			return scn_fail(s, m, "fabric", "%s", why);
		return 0;
	}
	if (fabric_new_explicit(&s->cfg, &s->f, why, sizeof(why)))
		return scn_fail(s, m, "fabric", "%s", why);
	if (val[F_DEFAULTS] && parse_defaults(s, val[F_DEFAULTS]))
		return s->rc;
	if (!val[F_NODES])
		return scn_fail(s, m, "nodes", "missing: an explicit fabric needs nodes (or write kind: "
					   "ideal)");
	if (parse_nodes(s, val[F_NODES]))
		return s->rc;
	if (val[F_SWITCHES] && parse_switches(s, val[F_SWITCHES]))
		return s->rc;
	s->links_at = (yaml_node_t *)(key[F_LINKS] ? key[F_LINKS] : key[F_NODES]);
	if (val[F_LINKS]) {
		if (parse_links(s, val[F_LINKS]))
			return s->rc;
	} else if (val[F_SWITCHES]) {
		return scn_fail(s, key[F_SWITCHES], "links",
			    "missing: with switches: given, links: says what connects to what");
	} else if (implicit_switch(s, key[F_NODES])) {
		return s->rc;
	}
	int bad = -1, rc = fabric_finish(s->f, &bad, why, sizeof(why));
	if (rc == -ENOMEM)
		return scn_fail_oom(s);
	if (rc && bad >= 0 && bad < s->nlocs)
		return scn_fail_at(s, s->locs[bad].line, s->locs[bad].col, s->locs[bad].key, "%s", why);
	if (rc)
		return scn_fail(s, s->links_at, "links", "%s", why);
	return 0;
}

static int parse_text(struct scn *s, const yaml_node_t *v, const char *key, size_t max,
		      char **out)
{
	if (scn_is_null(v))
		return 0;
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a string"))
		return s->rc;
	if (strlen(scn_text(v)) > max)
		return scn_fail(s, v, key, "is %zu characters long; the limit is %zu", strlen(scn_text(v)),
			    max);
	free(*out);
	*out = strdup(scn_text(v));
	return *out ? 0 : scn_fail_oom(s);
}

static int parse_top(struct scn *s, const yaml_node_t *root)
{
	const yaml_node_t *fab = NULL, *seed = NULL, *faults = NULL, *job = NULL, *expct = NULL,
			  *place = NULL;
	if (root->type != YAML_MAPPING_NODE)
		return scn_fail(s, root, "document",
				"a scenario is a mapping of sections (name, description, seed, "
				"fabric, faults, job, expect, placement), not %s",
				scn_kind_name(root));
	for (int i = 0; i < scn_npairs(root); i++) {
		const char *name;
		yaml_node_t *k, *v;
		if (scn_pair_key(s, root, i, &name, &k, &v))
			return s->rc;
		if (!strcmp(name, "fabric")) {
			fab = v;
		} else if (!strcmp(name, "faults")) {
			faults = v;
		} else if (!strcmp(name, "job")) {
			job = v;
		} else if (!strcmp(name, "expect")) {
			expct = v;
		} else if (!strcmp(name, "placement")) {
			place = v;
		} else if (!strcmp(name, "seed")) {
			seed = v;
		} else if (!strcmp(name, "name")) {
			if (parse_text(s, v, "name", NAME_TEXT_MAX, &s->name))
				return s->rc;
		} else if (!strcmp(name, "description")) {
			if (parse_text(s, v, "description", DESCRIPTION_MAX, &s->description))
				return s->rc;
		} else {
			return scn_fail(s, k, name,
					"unknown top-level key (known: name, description, seed, "
					"fabric, faults, job, expect, placement)");
		}
	}
	if (seed) {
		struct layer l;
		scn_layer_init(&l, PARAM_FABRIC, &s->cfg);
		if (scn_param_scalar(s, param_find(PARAM_FABRIC, "seed"), seed, &l))
			return s->rc;
		s->cfg = l.v.fab;
	}
	if (!fab)
		return scn_fail(s, root, "fabric", "missing: a scenario needs a fabric: section");
	/* The fabric first, whatever the order in the file: the others refer to its names. */
	if (parse_fabric(s, fab))
		return s->rc;
	if (faults && !scn_is_null(faults) && scn_parse_faults(s, faults))
		return s->rc;
	if (job && !scn_is_null(job) && scn_parse_job(s, job))
		return s->rc;
	if (expct && !scn_is_null(expct) && scn_parse_expect(s, expct))
		return s->rc;
	if (place && !scn_is_null(place) && scn_parse_placement(s, place))
		return s->rc;
	return 0;
}

/* Line and column of a byte offset (reader errors carry only the offset). */
static void offset_pos(const struct scn *s, size_t off, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < s->len; i++) {
		if (s->data[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int yaml_failed(struct scn *s, const yaml_parser_t *p)
{
	int line = (int)p->problem_mark.line + 1, col = (int)p->problem_mark.column + 1;
	if (p->error == YAML_MEMORY_ERROR)
		return scn_fail_oom(s);
	if (p->error == YAML_READER_ERROR)
		offset_pos(s, p->problem_offset, &line, &col);
	if (p->context)
		return scn_fail_at(s, line, col, "yaml", "%s (%s at line %d)",
			       p->problem ? p->problem : "syntax error", p->context,
			       (int)p->context_mark.line + 1);
	return scn_fail_at(s, line, col, "yaml", "%s", p->problem ? p->problem : "syntax error");
}

static int load_doc(struct scn *s)
{
	yaml_parser_t p;
	if (!yaml_parser_initialize(&p))
		return scn_fail_oom(s);
	yaml_parser_set_input_string(&p, (const unsigned char *)s->data, s->len);
	if (!yaml_parser_load(&p, &s->doc)) {
		yaml_failed(s, &p);
		yaml_parser_delete(&p);
		return s->rc;
	}
	s->have_doc = true;
	yaml_node_t *root = yaml_document_get_root_node(&s->doc);
	if (!root) {
		yaml_parser_delete(&p);
		return scn_fail_at(s, 1, 1, "document",
			       "the scenario is empty (it needs at least a fabric: section)");
	}
	yaml_document_t second;
	if (!yaml_parser_load(&p, &second)) {
		yaml_failed(s, &p);
	} else {
		yaml_node_t *r2 = yaml_document_get_root_node(&second);
		if (r2)
			scn_fail(s, r2, "document", "a scenario is one YAML document; a second one "
						"starts here");
		yaml_document_delete(&second);
	}
	yaml_parser_delete(&p);
	return s->rc;
}

static const char *base_name(const char *file, char *buf, size_t cap)
{
	const char *b = strrchr(file, '/');
	b = b ? b + 1 : file;
	size_t n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".yaml"))
		n -= 5;
	else if (n > 4 && !strcmp(b + n - 4, ".yml"))
		n -= 4;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, b, n);
	buf[n] = 0;
	return buf;
}

int scenario_new(struct fabric *f, struct scenario **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out) {
		fabric_free(f);
		return -ENOMEM;
	}
	(*out)->fabric = f;
	return 0;
}

void scenario_free(struct scenario *sc)
{
	if (!sc)
		return;
	fabric_free(sc->fabric);
	fault_plan_free(sc->faults);
	free(sc->job_json);
	free(sc->expect_json);
	free(sc->faults_json);
	place_map_free(sc->placement);
	free(sc->placement_json);
	free(sc->hosts_json);
	free(sc);
}

int scenario_json(struct scenario *sc, bool refresh, const char **text, size_t *len)
{
	struct fabric_json_member sections[5] = {
		{"job", sc->job_json}, {"expect", sc->expect_json}, {"faults", sc->faults_json}};
	int n = 3;
	if (sc->placement_json)
		sections[n++] = (struct fabric_json_member){"placement", sc->placement_json};
	if (sc->hosts_json)
		sections[n++] = (struct fabric_json_member){"hosts", sc->hosts_json};
	return fabric_json(sc->fabric, sections, n, refresh, text, len);
}

int scenario_place(struct scenario *sc, int nhosts, char *err, size_t errlen)
{
	struct placement *p;
	int rc = place_compute(sc->fabric, sc->placement, nhosts, &p, err, errlen);
	if (rc)
		return rc;
	char *js = placement_json(p, sc->fabric);
	placement_free(p);
	if (!js) {
		snprintf(err, errlen, "placement: out of memory");
		return -ENOMEM;
	}
	free(sc->hosts_json);
	sc->hosts_json = js;
	return 0;
}

int scn_load_buffer(const char *file, const char *data, size_t len, struct scenario **out,
		    char *err, size_t errlen)
{
	struct scn s = {.file = file, .data = data, .len = len, .err = err, .errlen = errlen};
	*out = NULL;
	err[0] = 0;
	fabric_config_init(&s.cfg);
	param_defaults(PARAM_LINK, &s.dlink);
	param_defaults(PARAM_NIC, &s.dnic);
	param_defaults(PARAM_SWITCH, &s.dswitch);
	if (len > SCN_FILE_MAX) {
		snprintf(err, errlen, "%s: %zu bytes; the limit is %u MiB", file, len,
			 SCN_FILE_MAX >> 20);
		return -EFBIG;
	}
	s.sc = calloc(1, sizeof(*s.sc));
	if (!s.sc)
		return scn_fail_oom(&s);
	if (!load_doc(&s))
		parse_top(&s, yaml_document_get_root_node(&s.doc));
	if (!s.rc) {
		char nm[NAME_TEXT_MAX + 1];
		if (fabric_set_source(s.f, file, s.name ? s.name : base_name(file, nm, sizeof(nm)),
				      s.description))
			scn_fail_oom(&s);
	}
	if (s.have_doc)
		yaml_document_delete(&s.doc);
	free(s.locs);
	free(s.name);
	free(s.description);
	if (s.rc) {
		scenario_free(s.sc);
		fabric_free(s.f);
		return s.rc;
	}
	s.sc->fabric = s.f;
	*out = s.sc;
	return 0;
}

int scn_load(const char *path, struct scenario **out, char *err, size_t errlen)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, errlen, "%s: not a regular file", path);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > SCN_FILE_MAX) {
		close(fd);
		snprintf(err, errlen, "%s: %lld bytes; the limit is %u MiB", path,
			 (long long)st.st_size, SCN_FILE_MAX >> 20);
		return -EFBIG;
	}
	size_t cap = (size_t)st.st_size + 1, len = 0;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			snprintf(err, errlen, "%s: %s", path, strerror(e));
			close(fd);
			free(buf);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == cap) { /* it grew while we read: stop at the limit */
			if (cap > SCN_FILE_MAX) {
				close(fd);
				free(buf);
				snprintf(err, errlen, "%s: more than %u MiB", path, SCN_FILE_MAX >> 20);
				return -EFBIG;
			}
			char *b = realloc(buf, cap * 2);
			if (!b) {
				close(fd);
				free(buf);
				snprintf(err, errlen, "%s: out of memory", path);
				return -ENOMEM;
			}
			buf = b;
			cap *= 2;
		}
	}
	close(fd);
	int rc = scn_load_buffer(path, buf, len, out, err, errlen);
	free(buf);
	return rc;
}

int scn_load_faults(struct fabric *f, const char *file, const char *data, size_t len,
		    struct fault_plan **out, char *err, size_t errlen)
{
	struct scenario parsed = {0}; /* only its plan and that plan's text are filled */
	struct scn s = {.file = file, .data = data, .len = len, .err = err, .errlen = errlen, .f = f,
			.sc = &parsed};
	*out = NULL;
	err[0] = 0;
	if (len > SCN_FILE_MAX) {
		snprintf(err, errlen, "%s: %zu bytes; the limit is %u MiB", file, len,
			 SCN_FILE_MAX >> 20);
		return -EFBIG;
	}
	if (!load_doc(&s)) {
		yaml_node_t *root = yaml_document_get_root_node(&s.doc);
		if (root->type == YAML_MAPPING_NODE) {
			yaml_node_t *list = NULL;
			for (int i = 0; i < scn_npairs(root) && !s.rc; i++) {
				const char *name;
				yaml_node_t *k, *v;
				if (scn_pair_key(&s, root, i, &name, &k, &v))
					break;
				if (strcmp(name, "faults"))
					scn_fail(&s, k, name, "expected only faults: here");
				list = v;
			}
			if (!s.rc && !list)
				scn_fail(&s, root, "faults", "missing");
			if (!s.rc)
				scn_parse_faults(&s, list);
		} else {
			scn_parse_faults(&s, root);
		}
	}
	if (s.have_doc)
		yaml_document_delete(&s.doc);
	free(s.locs);
	free(parsed.faults_json);
	if (s.rc) {
		fault_plan_free(parsed.faults);
		return s.rc;
	}
	*out = parsed.faults;
	return 0;
}
