/* SPDX-License-Identifier: MIT */
/*
 * place.c - nodes on hosts and links' owners (place.h), and the scenario's placement:
 * section (scn_parse_placement, one of the loader's section parsers: scn_int.h).
 */
#include "sim/scn/place.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/jbuf.h"
#include "sim/scn/scn_int.h"

int place_block_host(int i, int n, int h)
{
	/* the largest host g with g * n / h <= i, i.e. g * n < (i + 1) * h */
	return (int)(((int64_t)(i + 1) * h - 1) / n);
}

void place_map_free(struct place_map *m)
{
	if (!m)
		return;
	free(m->file);
	free(m->rule);
	free(m);
}

void placement_free(struct placement *p)
{
	if (!p)
		return;
	free(p->node_host);
	free(p->link_owner);
	free(p);
}

/* ---- the owners of switch-to-switch links -------------------------------------------- */

struct tiers {
	int ns, nn;
	int *level;	 /* by switch: hops to the nearest NIC; INT32_MAX: none */
	uint64_t *under; /* by switch: the nodes under it, a bitset of nn bits */
	size_t words;
};

static uint64_t *under_of(const struct tiers *t, int sw)
{
	return t->under + (size_t)sw * t->words;
}

/* Levels by a breadth-first walk from the leaves, and each switch's nodes as the union of
 * those of its neighbours one level down (a node under a switch is at exactly its level). */
static int tiers_build(const struct fabric *f, struct tiers *t)
{
	int nl = fabric_nlinks(f);
	t->ns = fabric_nswitches(f);
	t->nn = fabric_nnodes(f);
	t->words = ((size_t)t->nn + 63) / 64;
	t->level = malloc(sizeof(int) * (size_t)(t->ns ? t->ns : 1));
	int *queue = malloc(sizeof(int) * (size_t)(t->ns ? t->ns : 1));
	t->under =
		calloc((size_t)(t->ns ? t->ns : 1) * (t->words ? t->words : 1), sizeof(uint64_t));
	if (!t->level || !queue || !t->under) {
		free(queue);
		return -ENOMEM;
	}
	int head = 0, tail = 0;
	for (int s = 0; s < t->ns; s++)
		t->level[s] = INT32_MAX;
	for (int id = 0; id < nl; id++) {
		const struct fabric_link *l = fabric_link(f, (uint32_t)id);
		if (l->from.kind != FABRIC_EP_NIC || l->to.kind != FABRIC_EP_SWITCH)
			continue;
		under_of(t, l->to.id)[l->from.id / 64] |= 1ULL << (l->from.id % 64);
		if (t->level[l->to.id] != 1) {
			t->level[l->to.id] = 1;
			queue[tail++] = l->to.id;
		}
	}
	/* each switch once, in level order; links scanned per level (fabrics are small) */
	while (head < tail) {
		int lv = t->level[queue[head]], end = tail;
		for (int id = 0; id < nl; id++) {
			const struct fabric_link *l = fabric_link(f, (uint32_t)id);
			if (l->from.kind != FABRIC_EP_SWITCH || l->to.kind != FABRIC_EP_SWITCH ||
			    t->level[l->from.id] != lv)
				continue;
			int up = l->to.id;
			if (t->level[up] == INT32_MAX) {
				t->level[up] = lv + 1;
				queue[tail++] = up;
			}
			if (t->level[up] == lv + 1)
				for (size_t w = 0; w < t->words; w++)
					under_of(t, up)[w] |= under_of(t, l->from.id)[w];
		}
		head = end;
	}
	free(queue);
	return 0;
}

static int switch_link_owner(const struct tiers *t, const struct placement *p,
			     const struct fabric_link *l, int *count)
{
	int a = l->from.id, b = l->to.id;
	int low = t->level[a] < t->level[b] || (t->level[a] == t->level[b] && a < b) ? a : b;
	memset(count, 0, sizeof(int) * (size_t)p->nhosts);
	const uint64_t *u = under_of(t, low);
	for (int n = 0; n < t->nn; n++)
		if (u[n / 64] >> (n % 64) & 1)
			count[p->node_host[n]]++;
	int best = 0;
	for (int h = 1; h < p->nhosts; h++)
		if (count[h] > count[best])
			best = h;
	return best;
}

/* ---- placement ------------------------------------------------------------------------ */

/* An error at rule r, or at the section when r is NULL (m: the map; NULL: no section). */
static int rule_fail(const struct place_map *m, const struct place_rule *r, char *err,
		     size_t errlen, const char *why)
{
	int line = r ? r->line : m ? m->line : 0, col = r ? r->col : m ? m->col : 0;
	snprintf(err, errlen, "%s:%d:%d: placement: %s", m && m->file ? m->file : "?", line, col,
		 why);
	return -EINVAL;
}

static int place_nodes(const struct place_map *m, struct placement *p, char *err, size_t errlen)
{
	char why[FABRIC_ERR_LEN];
	for (int i = 0; i < p->nnodes; i++)
		p->node_host[i] = place_block_host(i, p->nnodes, p->nhosts);
	for (int k = 0; m && k < m->nrules; k++) {
		const struct place_rule *r = &m->rule[k];
		if (r->host >= p->nhosts) {
			snprintf(why, sizeof(why),
				 "'%s' on host %d, but there are %d hosts (0..%d)", r->key, r->host,
				 p->nhosts, p->nhosts - 1);
			return rule_fail(m, r, err, errlen, why);
		}
		for (int i = r->first; i <= r->last; i++)
			p->node_host[i] = r->host;
	}
	int *held = calloc((size_t)p->nhosts, sizeof(int));
	if (!held)
		return -ENOMEM;
	for (int i = 0; i < p->nnodes; i++)
		held[p->node_host[i]]++;
	int h = 0;
	while (h < p->nhosts && held[h])
		h++;
	free(held);
	if (h == p->nhosts)
		return 0;
	snprintf(why, sizeof(why), "host %d of %d holds no node: every host needs one", h,
		 p->nhosts);
	return rule_fail(m, NULL, err, errlen, why);
}

int place_compute(const struct fabric *f, const struct place_map *m, int nhosts,
		  struct placement **out, char *err, size_t errlen)
{
	*out = NULL;
	if (fabric_is_ideal(f)) {
		snprintf(err, errlen,
			 "--hosts %d: the ideal fabric makes its nodes on demand; "
			 "placing nodes on hosts needs a fabric that lists them",
			 nhosts);
		return -EINVAL;
	}
	int nn = fabric_nnodes(f);
	if (nhosts < 1 || nhosts > PLACE_MAX_HOSTS || nhosts > nn) {
		snprintf(err, errlen,
			 "--hosts %d: not in 1..%d (the fabric's %d nodes, at most %d)", nhosts,
			 nn < PLACE_MAX_HOSTS ? nn : PLACE_MAX_HOSTS, nn, PLACE_MAX_HOSTS);
		return -EINVAL;
	}
	struct placement *p = calloc(1, sizeof(*p));
	struct tiers t = {0};
	int *count = calloc((size_t)nhosts, sizeof(int));
	int rc = -ENOMEM;
	if (!p || !count)
		goto out;
	p->nhosts = nhosts;
	p->nnodes = nn;
	p->nlinks = fabric_nlinks(f);
	p->node_host = calloc((size_t)nn, sizeof(int));
	p->link_owner = calloc((size_t)(p->nlinks ? p->nlinks : 1), sizeof(int));
	if (!p->node_host || !p->link_owner)
		goto out;
	rc = place_nodes(m, p, err, errlen);
	if (rc || (rc = tiers_build(f, &t)))
		goto out;
	for (int id = 0; id < p->nlinks; id++) {
		const struct fabric_link *l = fabric_link(f, (uint32_t)id);
		if (l->from.kind == FABRIC_EP_NIC)
			p->link_owner[id] = p->node_host[l->from.id];
		else if (l->to.kind == FABRIC_EP_NIC)
			p->link_owner[id] = p->node_host[l->to.id];
		else
			p->link_owner[id] = switch_link_owner(&t, p, l, count);
	}
	*out = p;
	p = NULL;
out:
	if (rc == -ENOMEM)
		snprintf(err, errlen, "placement: out of memory");
	free(t.level);
	free(t.under);
	free(count);
	placement_free(p);
	return rc;
}

static void jints(struct jbuf *b, const char *name, const int *v, int n)
{
	jbuf_printf(b, ",\"%s\":[", name);
	for (int i = 0; i < n; i++)
		jbuf_printf(b, "%s%d", i ? "," : "", v[i]);
	jbuf_puts(b, "]");
}

char *placement_json(const struct placement *p, const struct fabric *f)
{
	struct jbuf b = JBUF_INIT;
	jbuf_printf(&b, "{\"count\":%d", p->nhosts);
	jints(&b, "node_host", p->node_host, p->nnodes);
	jints(&b, "link_owner", p->link_owner, p->nlinks);
	jbuf_puts(&b, ",\"nodes\":[");
	for (int h = 0; h < p->nhosts; h++) {
		jbuf_puts(&b, h ? ",[" : "[");
		for (int i = 0, k = 0; i < p->nnodes; i++)
			if (p->node_host[i] == h) {
				jbuf_puts(&b, k++ ? "," : "");
				jbuf_str(&b, fabric_node(f, i)->name);
			}
		jbuf_puts(&b, "]");
	}
	jbuf_puts(&b, "]}");
	char *text;
	return jbuf_take(&b, &text, NULL) ? NULL : text;
}

char *place_map_json(const struct place_map *m, const struct fabric *f)
{
	struct jbuf b = JBUF_INIT;
	jbuf_puts(&b, "[");
	for (int k = 0; k < m->nrules; k++) {
		const struct place_rule *r = &m->rule[k];
		jbuf_puts(&b, k ? ",{\"nodes\":" : "{\"nodes\":");
		jbuf_str(&b, r->key);
		jbuf_puts(&b, ",\"first\":");
		jbuf_str(&b, fabric_node(f, r->first)->name);
		jbuf_puts(&b, ",\"last\":");
		jbuf_str(&b, fabric_node(f, r->last)->name);
		jbuf_printf(&b, ",\"host\":%d}", r->host);
	}
	jbuf_puts(&b, "]");
	char *text;
	return jbuf_take(&b, &text, NULL) ? NULL : text;
}

/* ---- the placement: section ----------------------------------------------------------- */

/* A node of the fabric by name, or an error at k naming it within the key. */
static int rule_node(struct scn *s, const yaml_node_t *k, const char *name, int *id)
{
	char q[80];
	const struct fabric_node *nd = fabric_node_find(s->f, name);
	if (!nd && !strcmp(name, scn_text(k)))
		return scn_fail(s, k, "placement", "unknown node '%s'",
				param_quote(name, q, sizeof(q)));
	if (!nd)
		return scn_fail(s, k, "placement", "'%s': unknown node '%s'",
				param_quote(scn_text(k), q, sizeof(q)), name);
	*id = nd->id;
	return 0;
}

/* One key: a node name, or "first..last" (a name may itself hold "..": a whole name wins). */
static int rule_nodes(struct scn *s, const yaml_node_t *k, struct place_rule *r)
{
	char q[80];
	const char *t = scn_text(k), *dots = strstr(t, "..");
	if (strlen(t) >= sizeof(r->key))
		return scn_fail(s, k, "placement", "'%s' is not a node name or range",
				param_quote(t, q, sizeof(q)));
	snprintf(r->key, sizeof(r->key), "%s", t);
	if (fabric_node_find(s->f, t) || !dots) {
		if (rule_node(s, k, t, &r->first))
			return s->rc;
		r->last = r->first;
		return 0;
	}
	char a[sizeof(r->key)];
	snprintf(a, sizeof(a), "%.*s", (int)(dots - t), t);
	if (rule_node(s, k, a, &r->first) || rule_node(s, k, dots + 2, &r->last))
		return s->rc;
	if (r->first > r->last)
		return scn_fail(s, k, "placement",
				"'%s': %s comes after %s in the fabric's node order",
				param_quote(t, q, sizeof(q)), a, dots + 2);
	return 0;
}

/* Every node at most once: who[node] is the rule that placed it, -1 none. */
static int rule_once(struct scn *s, const yaml_node_t *k, const struct place_map *m, int i,
		     int *who)
{
	char q[80];
	const struct place_rule *r = &m->rule[i];
	for (int j = r->first; j <= r->last; j++) {
		if (who[j] >= 0) {
			const struct place_rule *o = &m->rule[who[j]];
			return scn_fail(s, k, "placement",
					"'%s': node %s is placed already, by '%s' (line %d)",
					param_quote(r->key, q, sizeof(q)),
					fabric_node(s->f, j)->name, o->key, o->line);
		}
		who[j] = i;
	}
	return 0;
}

int scn_parse_placement(struct scn *s, const yaml_node_t *v)
{
	if (scn_expect(s, v, YAML_MAPPING_NODE, "placement",
		       "a mapping of node names or ranges (first..last) to host ranks"))
		return s->rc;
	if (fabric_is_ideal(s->f))
		return scn_fail(s, v, "placement",
				"the ideal fabric makes its nodes on demand; placement needs a "
				"fabric that lists them");
	int n = scn_npairs(v);
	struct place_map *m = calloc(1, sizeof(*m));
	if (!m || !(m->file = strdup(s->file)) ||
	    !(m->rule = calloc((size_t)(n ? n : 1), sizeof(*m->rule)))) {
		place_map_free(m);
		return scn_fail_oom(s);
	}
	m->line = (int)v->start_mark.line + 1;
	m->col = (int)v->start_mark.column + 1;
	int nn = fabric_nnodes(s->f);
	int *who = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
	if (!who) {
		place_map_free(m);
		return scn_fail_oom(s);
	}
	for (int j = 0; j < nn; j++)
		who[j] = -1;
	for (int i = 0; i < n; i++) {
		const char *name;
		yaml_node_t *k, *val;
		struct place_rule *r = &m->rule[i];
		int64_t host;
		if (scn_pair_key(s, v, i, &name, &k, &val) || rule_nodes(s, k, r) ||
		    scn_get_int(s, val, "placement", 0, PLACE_MAX_HOSTS - 1, "a host rank", &host))
			break;
		r->host = (int)host;
		r->line = (int)k->start_mark.line + 1;
		r->col = (int)k->start_mark.column + 1;
		if (rule_once(s, k, m, i, who))
			break;
		m->nrules++;
	}
	free(who);
	if (s->rc) {
		place_map_free(m);
		return s->rc;
	}
	char *js = place_map_json(m, s->f);
	if (!js) {
		place_map_free(m);
		return scn_fail_oom(s);
	}
	place_map_free(s->sc->placement);
	free(s->sc->placement_json);
	s->sc->placement = m;
	s->sc->placement_json = js;
	return 0;
}
