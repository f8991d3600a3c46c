/* SPDX-License-Identifier: MIT */
/* fabric.c - the emulated fabric's description. See fabric.h. */
#include "sim/scn/fabric.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/fabric_int.h"
#include "sim/scn/param.h"

/* GUIDs: "SF" in the top bytes, then the node id, then the NIC index. */
#define GUID_BASE 0x5346000000000000ULL
#define DIST_INF 0xffffu

static int oom(char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* ---- settings --------------------------------------------------------------- */

void fabric_config_init(struct fabric_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	param_defaults(PARAM_FABRIC, cfg);
}

int fabric_config_set(struct fabric_config *cfg, const char *name, const char *value, char *err,
		      size_t errlen)
{
	char q[80], why[PARAM_ERR_LEN];
	const struct param *p = param_find(PARAM_FABRIC, name);
	if (!p) {
		snprintf(err, errlen, "unknown fabric parameter '%s'", param_quote(name, q, sizeof(q)));
		return -ENOENT;
	}
	int rc = param_parse(p, value, cfg, why, sizeof(why));
	if (rc)
		snprintf(err, errlen, "%s: %s", p->name, why);
	return rc;
}

int fabric_config_check(const struct fabric_config *cfg, char *err, size_t errlen)
{
	char why[PARAM_ERR_LEN];
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope != PARAM_FABRIC)
			continue;
		if (param_check(p, cfg, why, sizeof(why))) {
			snprintf(err, errlen, "%s: %s", p->name, why);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- names ------------------------------------------------------------------- */

int fabric_name_check(const char *name, char *err, size_t errlen)
{
	char q[80];
	size_t n = strlen(name);
	if (n == 0) {
		snprintf(err, errlen, "node name is empty (1..%d characters of [A-Za-z0-9._-])",
			 FABRIC_NAME_MAX);
		return -EINVAL;
	}
	if (n > FABRIC_NAME_MAX) {
		snprintf(err, errlen, "node name '%s' is %zu characters long; the limit is %d",
			 param_quote(name, q, sizeof(q)), n, FABRIC_NAME_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '_' || c == '-')
			continue;
		char what[8];
		if (c > 0x20 && c < 0x7f)
			snprintf(what, sizeof(what), "'%c'", c);
		else
			snprintf(what, sizeof(what), "0x%02x", c);
		snprintf(err, errlen,
			 "node name '%s' has character %s at position %zu; allowed are "
			 "[A-Za-z0-9._-]",
			 param_quote(name, q, sizeof(q)), what, i + 1);
		return -EINVAL;
	}
	return 0;
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* A node id's slot: its low bits. The ideal fabric reuses the slots of nodes it forgot, with
 * the slot's generation in the high bits, so an id is never handed out twice (until the
 * generation wraps, after FABRIC_NODE_GENS nodes in one slot). Explicit fabrics: id == slot. */
static int id_slot(int id)
{
	return id & (FABRIC_MAX_NODES - 1);
}

static const char *who_name(const struct fabric *f, int who)
{
	return who >= 0 ? f->nodes[id_slot(who)]->name : f->switches[-who - 1]->name;
}

/* The slot of name, or of the empty place where it would go. */
static size_t name_slot(const struct fabric *f, const char *name)
{
	size_t mask = f->names_cap - 1, i = name_hash(name) & mask;
	while (f->names[i] != INT32_MIN && strcmp(who_name(f, f->names[i]), name) != 0)
		i = (i + 1) & mask;
	return i;
}

/* who for name: node id, -(switch id) - 1, or INT32_MIN if unknown. */
static int name_lookup(const struct fabric *f, const char *name)
{
	return f->names_cap ? f->names[name_slot(f, name)] : INT32_MIN;
}

static int name_insert(struct fabric *f, const char *name, int who)
{
	if ((f->names_used + 1) * 2 > f->names_cap) {
		size_t cap = f->names_cap ? f->names_cap * 2 : 64;
		int *old = f->names;
		size_t oldcap = f->names_cap;
		f->names = malloc(cap * sizeof(int));
		if (!f->names) {
			f->names = old;
			return -ENOMEM;
		}
		for (size_t i = 0; i < cap; i++)
			f->names[i] = INT32_MIN;
		f->names_cap = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i] != INT32_MIN)
				f->names[name_slot(f, who_name(f, old[i]))] = old[i];
		free(old);
	}
	f->names[name_slot(f, name)] = who;
	f->names_used++;
	return 0;
}

/* Linear probing's delete: empty the slot, then re-place the rest of its cluster. */
static void name_remove(struct fabric *f, const char *name)
{
	size_t mask = f->names_cap - 1, i = name_slot(f, name);
	if (f->names[i] == INT32_MIN)
		return;
	f->names[i] = INT32_MIN;
	f->names_used--;
	for (size_t j = (i + 1) & mask; f->names[j] != INT32_MIN; j = (j + 1) & mask) {
		int w = f->names[j];
		f->names[j] = INT32_MIN;
		f->names[name_slot(f, who_name(f, w))] = w;
	}
}

/* ---- life cycle ---------------------------------------------------------------- */

static int fabric_alloc(enum fabric_kind_id kind, const struct fabric_config *cfg,
			struct fabric **out, char *err, size_t errlen)
{
	*out = NULL;
	int rc = fabric_config_check(cfg, err, errlen);
	if (rc)
		return rc;
	struct fabric *f = calloc(1, sizeof(*f));
	if (!f)
		return oom(err, errlen);
	f->kind = kind;
	f->cfg = *cfg;
	*out = f;
	return 0;
}

int fabric_new_ideal(const struct fabric_config *cfg, struct fabric **out, char *err,
		     size_t errlen)
{
	int rc = fabric_alloc(KIND_IDEAL, cfg, out, err, errlen);
	if (!rc)
		(*out)->finished = true;
	return rc;
}

int fabric_new_explicit(const struct fabric_config *cfg, struct fabric **out, char *err,
			size_t errlen)
{
	return fabric_alloc(KIND_EXPLICIT, cfg, out, err, errlen);
}

void fabric_free(struct fabric *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->nnodes; i++)
		free(f->nodes[i]);
	free(f->nodes);
	free(f->gen);
	for (int i = 0; i < f->nswitches; i++)
		free(f->switches[i]);
	free(f->switches);
	free(f->links);
	free(f->names);
	free(f->by_gid);
	free(f->dist);
	free(f->adj_off);
	free(f->adj);
	while (f->adopted) {
		struct adopted *a = f->adopted;
		f->adopted = a->next;
		free(a->mem);
		free(a);
	}
	free(f->scenario);
	free(f->name);
	free(f->description);
	free(f->json);
	free(f);
}

int fabric_adopt(struct fabric *f, void *mem)
{
	struct adopted *a = malloc(sizeof(*a));
	if (!a) {
		free(mem);
		return -ENOMEM;
	}
	a->mem = mem;
	a->next = f->adopted;
	f->adopted = a;
	return 0;
}

static int dup_str(char **dst, const char *s)
{
	free(*dst);
	*dst = NULL;
	if (!s)
		return 0;
	*dst = strdup(s);
	return *dst ? 0 : -ENOMEM;
}

int fabric_set_source(struct fabric *f, const char *scenario, const char *name,
		      const char *description)
{
	if (dup_str(&f->scenario, scenario) || dup_str(&f->name, name) ||
	    dup_str(&f->description, description))
		return -ENOMEM;
	return 0;
}

/* ---- accessors ----------------------------------------------------------------- */

const char *fabric_kind(const struct fabric *f)
{
	return f->kind == KIND_IDEAL ? "ideal" : "explicit";
}

bool fabric_is_ideal(const struct fabric *f)
{
	return f->kind == KIND_IDEAL;
}

const struct fabric_config *fabric_config(const struct fabric *f)
{
	return &f->cfg;
}

uint64_t fabric_seed(const struct fabric *f)
{
	return f->cfg.seed;
}

void fabric_set_seed(struct fabric *f, uint64_t seed)
{
	f->cfg.seed = seed;
	free(f->json);
	f->json = NULL;
}

const char *fabric_scenario(const struct fabric *f)
{
	return f->scenario;
}

const char *fabric_name(const struct fabric *f)
{
	return f->name;
}

int fabric_nnodes(const struct fabric *f)
{
	return f->nlive;
}

int fabric_node_slots(const struct fabric *f)
{
	return f->nnodes;
}

const struct fabric_node *fabric_node_at(const struct fabric *f, int slot)
{
	return slot >= 0 && slot < f->nnodes ? f->nodes[slot] : NULL;
}

int fabric_nnics(const struct fabric *f)
{
	return f->nnics;
}

const struct fabric_node *fabric_node(const struct fabric *f, int id)
{
	const struct fabric_node *n = id >= 0 ? fabric_node_at(f, id_slot(id)) : NULL;
	return n && n->id == id ? n : NULL;
}

const struct fabric_node *fabric_node_find(const struct fabric *f, const char *name)
{
	int who = name_lookup(f, name);
	return who >= 0 && who != INT32_MIN ? f->nodes[id_slot(who)] : NULL;
}

const struct fabric_nic *fabric_nic(const struct fabric_node *node, int index)
{
	return index >= 0 && index < node->nnics ? &node->nic[index] : NULL;
}

const struct fabric_nic *fabric_nic_by_gid(const struct fabric *f, int gid)
{
	if (gid < 0 || gid >= f->nnics)
		return NULL;
	if (f->by_gid)
		return f->by_gid[gid];
	for (int i = 0; i < f->nnodes; i++) { /* the ideal fabric: no table */
		const struct fabric_node *n = f->nodes[i];
		if (n && gid >= n->nic[0].gid && gid < n->nic[0].gid + n->nnics)
			return &n->nic[gid - n->nic[0].gid];
	}
	return NULL;
}

int fabric_nswitches(const struct fabric *f)
{
	return f->nswitches;
}

const struct fabric_switch *fabric_switch(const struct fabric *f, int id)
{
	return id >= 0 && id < f->nswitches ? f->switches[id] : NULL;
}

const struct fabric_switch *fabric_switch_find(const struct fabric *f, const char *name)
{
	int who = name_lookup(f, name);
	return who < 0 && who != INT32_MIN ? f->switches[-who - 1] : NULL;
}

int fabric_nlinks(const struct fabric *f)
{
	return f->nlinks;
}

const struct fabric_link *fabric_link(const struct fabric *f, uint32_t id)
{
	return id < (uint32_t)f->nlinks ? &f->links[id] : NULL;
}

/* ---- nodes ----------------------------------------------------------------------- */

static void nic_model_ideal(struct model_nic *m)
{
	char err[MODEL_ERR_LEN];
	param_defaults(PARAM_NIC, m);
	m->host_rate_bps = 0;
	m->o_send_ns = m->o_recv_ns = m->ack_proc_ns = 0;
	model_nic_resolve(m, err, sizeof(err)); /* cannot fail: defaults */
}

/* A new node with nnics NICs; names and limits checked by the caller. */
static int node_new(struct fabric *f, const char *name, int nnics, const struct model_nic *model,
		    int tag, struct fabric_node **out, char *err, size_t errlen)
{
	char q[80];
	if (f->nlive == FABRIC_MAX_NODES) {
		snprintf(err, errlen, "cannot add node '%s': the fabric has %d nodes%s, the limit",
			 param_quote(name, q, sizeof(q)), FABRIC_MAX_NODES,
			 f->kind == KIND_IDEAL ? " in use (sessions or channels hold them)" : "");
		return -ENOSPC;
	}
	int slot = f->nnodes;
	if (slot == FABRIC_MAX_NODES) /* the ideal fabric forgot some: reuse a slot */
		for (slot = 0; f->nodes[slot]; slot++)
			;
	if (slot == f->cap) {
		int cap = f->cap ? f->cap * 2 : 16;
		struct fabric_node **nodes = realloc(f->nodes, sizeof(*nodes) * (size_t)cap);
		if (!nodes) {
			snprintf(err, errlen, "out of memory adding node '%s'", name);
			return -ENOMEM;
		}
		f->nodes = nodes;
		uint32_t *gen = realloc(f->gen, sizeof(*gen) * (size_t)cap);
		if (!gen) {
			snprintf(err, errlen, "out of memory adding node '%s'", name);
			return -ENOMEM;
		}
		memset(gen + f->cap, 0, sizeof(*gen) * (size_t)(cap - f->cap));
		f->gen = gen;
		f->cap = cap;
	}
	struct fabric_node *n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "out of memory adding node '%s'", name);
		return -ENOMEM;
	}
	memcpy(n->name, name, strlen(name) + 1);
	n->id = (int)(f->gen[slot] % FABRIC_NODE_GENS) * FABRIC_MAX_NODES + slot;
	n->nnics = nnics;
	n->tag = tag;
	for (int i = 0; i < n->nnics; i++) {
		struct fabric_nic *nic = &n->nic[i];
		snprintf(nic->name, sizeof(nic->name), "%s-nic%d", name, i);
		nic->index = i;
		nic->node = n->id;
		nic->gid = slot < f->nnodes ? slot * nnics + i : f->nnics + i; /* ideal: all alike */
		nic->guid = GUID_BASE | ((uint64_t)n->id << 8) | (uint64_t)i;
		nic->speed_mbps = f->cfg.speed_mbps;
		nic->latency_ns = f->cfg.latency_ns;
		nic->link_out = nic->link_in = -1;
		nic->model = *model; /* resolved by the caller */
	}
	f->nodes[slot] = n;
	if (name_insert(f, name, n->id)) {
		f->nodes[slot] = NULL;
		free(n);
		snprintf(err, errlen, "out of memory adding node '%s'", name);
		return -ENOMEM;
	}
	if (slot == f->nnodes) {
		f->nnodes++;
		f->nnics += nnics;
	}
	f->nlive++;
	*out = n;
	return 0;
}

int fabric_node_forget(struct fabric *f, int id)
{
	struct fabric_node *n = (struct fabric_node *)fabric_node(f, id);
	if (f->kind != KIND_IDEAL || !n)
		return -ENOENT;
	name_remove(f, n->name);
	f->nodes[id_slot(id)] = NULL;
	f->gen[id_slot(id)]++;
	f->nlive--;
	free(n);
	free(f->json); /* the dump shows the nodes now */
	f->json = NULL;
	return 0;
}

int fabric_node_get(struct fabric *f, const char *name, const struct fabric_node **out, char *err,
		    size_t errlen)
{
	*out = NULL;
	int rc = fabric_name_check(name, err, errlen);
	if (rc)
		return rc;
	const struct fabric_node *found = fabric_node_find(f, name);
	if (found) {
		*out = found;
		return 0;
	}
	if (f->kind != KIND_IDEAL) {
		char list[160];
		size_t len = 0;
		list[0] = 0;
		for (int i = 0; i < f->nnodes && len < sizeof(list); i++) {
			if (len + strlen(f->nodes[i]->name) + 8 >= sizeof(list)) {
				snprintf(list + len, sizeof(list) - len, ", ...");
				break;
			}
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
						f->nodes[i]->name);
		}
		snprintf(err, errlen, "node '%s' is not in scenario %s (its %d node(s): %s)", name,
			 f->scenario ? f->scenario : "(built in)", f->nnodes, list);
		return -ENOENT;
	}
	struct model_nic m;
	nic_model_ideal(&m);
	struct fabric_node *n;
	rc = node_new(f, name, (int)f->cfg.nics_per_node, &m, -1, &n, err, errlen);
	if (rc)
		return rc;
	free(f->json); /* the dump shows the nodes so far */
	f->json = NULL;
	*out = n;
	return 0;
}

static int check_building(struct fabric *f, char *err, size_t errlen)
{
	if (f->kind == KIND_EXPLICIT && !f->finished)
		return 0;
	snprintf(err, errlen, "the fabric is %s", f->finished ? "already finished" : "ideal");
	return -EINVAL;
}

/* A node or switch may be added under name: the fabric is being built, the name is free. */
static int check_new_name(struct fabric *f, const char *name, char *err, size_t errlen)
{
	int rc = check_building(f, err, errlen);
	if (!rc)
		rc = fabric_name_check(name, err, errlen);
	if (rc)
		return rc;
	int who = name_lookup(f, name);
	if (who != INT32_MIN) {
		snprintf(err, errlen, "'%s' is already the name of a %s", name,
			 who >= 0 ? "node" : "switch");
		return -EEXIST;
	}
	return 0;
}

int fabric_add_node(struct fabric *f, const char *name, int nnics, const struct model_nic *nic,
		    int tag, char *err, size_t errlen)
{
	int rc = check_new_name(f, name, err, errlen);
	if (rc)
		return rc;
	if (nnics < 1 || nnics > FABRIC_MAX_NICS) {
		snprintf(err, errlen, "a node has 1..%d NICs, not %d", FABRIC_MAX_NICS, nnics);
		return -EINVAL;
	}
	char why[MODEL_ERR_LEN];
	struct model_nic m = *nic;
	if (model_nic_resolve(&m, why, sizeof(why))) {
		snprintf(err, errlen, "%s", why);
		return -EINVAL;
	}
	struct fabric_node *n;
	return node_new(f, name, nnics, &m, tag, &n, err, errlen);
}

int fabric_add_switch(struct fabric *f, const char *name, const struct fabric_switch_cfg *cfg,
		      int tag, char *err, size_t errlen)
{
	int rc = check_new_name(f, name, err, errlen);
	if (rc)
		return rc;
	if (f->nswitches == FABRIC_MAX_SWITCHES) {
		snprintf(err, errlen, "cannot add switch '%s': the fabric has %d switches, the limit",
			 name, FABRIC_MAX_SWITCHES);
		return -ENOSPC;
	}
	if (f->nswitches == f->swcap) {
		int cap = f->swcap ? f->swcap * 2 : 8;
		struct fabric_switch **sw = realloc(f->switches, sizeof(*sw) * (size_t)cap);
		if (!sw)
			return oom(err, errlen);
		f->switches = sw;
		f->swcap = cap;
	}
	struct fabric_switch *s = calloc(1, sizeof(*s));
	if (!s)
		return oom(err, errlen);
	memcpy(s->name, name, strlen(name) + 1);
	s->id = f->nswitches;
	s->tag = tag;
	s->cfg = *cfg;
	f->switches[f->nswitches] = s;
	if (name_insert(f, name, -s->id - 1)) {
		free(s);
		return oom(err, errlen);
	}
	f->nswitches++;
	return 0;
}

/* ---- links ------------------------------------------------------------------------ */

const char *fabric_ep_name(const struct fabric *f, const struct fabric_ep *e, char *buf,
			   size_t cap)
{
	if (e->kind == FABRIC_EP_SWITCH)
		snprintf(buf, cap, "%s", f->switches[e->id]->name);
	else
		snprintf(buf, cap, "%s/%d", f->nodes[e->id]->name, e->nic);
	return buf;
}

static struct fabric_nic *ep_nic(struct fabric *f, const struct fabric_ep *e)
{
	return &f->nodes[e->id]->nic[e->nic];
}

static int ep_check(struct fabric *f, const struct fabric_ep *e, char *err, size_t errlen)
{
	if (e->kind == FABRIC_EP_SWITCH) {
		if (e->id >= 0 && e->id < f->nswitches)
			return 0;
		snprintf(err, errlen, "no switch %d", e->id);
		return -ENODEV;
	}
	if (e->kind != FABRIC_EP_NIC || e->id < 0 || e->id >= f->nnodes) {
		snprintf(err, errlen, "no node %d", e->id);
		return -ENODEV;
	}
	const struct fabric_node *n = f->nodes[e->id];
	if (e->nic < 0 || e->nic >= n->nnics) {
		snprintf(err, errlen, "node %s has %d NIC(s) (0..%d); there is no NIC %d", n->name,
			 n->nnics, n->nnics - 1, e->nic);
		return -ENODEV;
	}
	return 0;
}

static bool ep_same(const struct fabric_ep *a, const struct fabric_ep *b)
{
	return a->kind == b->kind && a->id == b->id && (a->kind == FABRIC_EP_SWITCH || a->nic == b->nic);
}

int fabric_add_link(struct fabric *f, const struct fabric_ep *a, const struct fabric_ep *b,
		    const struct model_link *ab, const struct model_link *ba, int tag,
		    int *other_tag, char *err, size_t errlen)
{
	char na[FABRIC_NIC_NAME_MAX + 8], nb[FABRIC_NIC_NAME_MAX + 8];
	const struct fabric_ep *ends[2] = {a, b};
	int rc = check_building(f, err, errlen);
	*other_tag = -1;
	if (!rc)
		rc = ep_check(f, a, err, errlen);
	if (!rc)
		rc = ep_check(f, b, err, errlen);
	if (rc)
		return rc;
	if (ep_same(a, b)) {
		snprintf(err, errlen, "a link cannot connect %s to itself",
			 fabric_ep_name(f, a, na, sizeof(na)));
		return -EINVAL;
	}
	for (int dir = 0; dir < 2; dir++) {
		char why[MODEL_ERR_LEN];
		struct model_link m = dir ? *ba : *ab;
		if (model_link_resolve(&m, why, sizeof(why))) {
			snprintf(err, errlen, "%s (%s -> %s)", why,
				 fabric_ep_name(f, ends[dir], na, sizeof(na)),
				 fabric_ep_name(f, ends[!dir], nb, sizeof(nb)));
			return -EINVAL;
		}
	}
	for (int i = 0; i < 2; i++) {
		const struct fabric_ep *e = ends[i];
		if (e->kind == FABRIC_EP_NIC) {
			const struct fabric_nic *nic = ep_nic(f, e);
			if (nic->link_out >= 0) {
				const struct fabric_link *l = &f->links[nic->link_out];
				*other_tag = l->tag;
				snprintf(err, errlen,
					 "NIC %s (%s) already has a link, to %s; a NIC has one port",
					 fabric_ep_name(f, e, na, sizeof(na)), nic->name,
					 fabric_ep_name(f, &l->to, nb, sizeof(nb)));
				return -EBUSY;
			}
		} else {
			const struct fabric_switch *s = f->switches[e->id];
			if (s->ports_used >= s->cfg.ports) {
				snprintf(err, errlen,
					 "switch %s has %lld port(s), all taken: this would be link "
					 "%d on it",
					 s->name, (long long)s->cfg.ports, s->ports_used + 1);
				return -ENOSPC;
			}
		}
	}
	if (f->nlinks / 2 >= FABRIC_MAX_CABLES) {
		snprintf(err, errlen, "the fabric has %d links, the limit", FABRIC_MAX_CABLES);
		return -ENOSPC;
	}
	if (f->nlinks + 2 > f->lcap) {
		int cap = f->lcap ? f->lcap * 2 : 32;
		struct fabric_link *l = realloc(f->links, sizeof(*l) * (size_t)cap);
		if (!l)
			return oom(err, errlen);
		f->links = l;
		f->lcap = cap;
	}
	int cable = f->nlinks / 2;
	for (int dir = 0; dir < 2; dir++) {
		struct fabric_link *l = &f->links[f->nlinks + dir];
		memset(l, 0, sizeof(*l));
		l->id = (uint32_t)(2 * cable + dir);
		l->cable = cable;
		l->tag = tag;
		l->from = *ends[dir];
		l->to = *ends[!dir];
		l->param = dir ? *ba : *ab;
		l->param.fs_per_byte = 0; /* derived: only in model */
		l->model = l->param;
	}
	for (int i = 0; i < 2; i++) {
		if (ends[i]->kind == FABRIC_EP_NIC) {
			struct fabric_nic *nic = ep_nic(f, ends[i]);
			nic->link_out = 2 * cable + i;
			nic->link_in = 2 * cable + !i;
		} else {
			f->switches[ends[i]->id]->ports_used++;
		}
	}
	f->nlinks += 2;
	return 0;
}

/* ---- paths --------------------------------------------------------------------------- */

int64_t fabric_path_latency(const struct model_path *p)
{
	int64_t t = 0;
	for (int i = 0; i < p->nhops; i++)
		t += p->hop[i]->latency_ns;
	return t;
}

static void path_push(const struct fabric *f, struct model_path *p, int id)
{
	p->link_id[p->nhops] = (uint32_t)id;
	p->hop[p->nhops] = &f->links[id].model;
	p->nhops++;
}

static int unreachable(const struct fabric *f, const struct fabric_nic *a,
		       const struct fabric_nic *b, const char *why, char *err, size_t errlen)
{
	snprintf(err, errlen, "no path from %s/%d (%s) to %s/%d (%s): %s", f->nodes[a->node]->name,
		 a->index, a->name, f->nodes[b->node]->name, b->index, b->name, why);
	return -EHOSTUNREACH;
}

int fabric_route(const struct fabric *f, const struct fabric_nic *a, const struct fabric_nic *b,
		 struct model_path *out, char *err, size_t errlen)
{
	char why[200];
	out->nhops = 0;
	out->switching = (enum model_switching)f->cfg.switching;
	if (a == b || f->kind == KIND_IDEAL)
		return 0;
	const struct fabric_link *up = &f->links[a->link_out], *down = &f->links[b->link_in];
	if (up->to.kind == FABRIC_EP_NIC) {
		if (up->to.id == b->node && up->to.nic == b->index) {
			path_push(f, out, a->link_out);
			return 0;
		}
		snprintf(why, sizeof(why), "%s is cabled straight to %s/%d", a->name,
			 f->nodes[up->to.id]->name, up->to.nic);
		return unreachable(f, a, b, why, err, errlen);
	}
	if (down->from.kind == FABRIC_EP_NIC) {
		snprintf(why, sizeof(why), "%s is cabled straight to %s/%d", b->name,
			 f->nodes[down->from.id]->name, down->from.nic);
		return unreachable(f, a, b, why, err, errlen);
	}
	int s = up->to.id, t = down->from.id, S = f->nswitches;
	unsigned d = f->dist[(size_t)s * (size_t)S + (size_t)t];
	if (d == DIST_INF) {
		snprintf(why, sizeof(why), "switch %s does not reach switch %s", f->switches[s]->name,
			 f->switches[t]->name);
		return unreachable(f, a, b, why, err, errlen);
	}
	if (d + 2 > MODEL_MAX_HOPS) {
		snprintf(err, errlen, "the path from %s to %s has %u hops; the limit is %d", a->name,
			 b->name, d + 2, MODEL_MAX_HOPS);
		return -ELOOP;
	}
	path_push(f, out, a->link_out);
	for (int u = s; u != t;) {
		unsigned du = f->dist[(size_t)u * (size_t)S + (size_t)t];
		int k = 0, pick, v = -1;
		for (int i = f->adj_off[u]; i < f->adj_off[u + 1]; i++)
			k += f->dist[(size_t)f->links[f->adj[i]].to.id * (size_t)S + (size_t)t] ==
			     du - 1;
		pick = b->gid % k;
		for (int i = f->adj_off[u]; i < f->adj_off[u + 1]; i++) {
			const struct fabric_link *l = &f->links[f->adj[i]];
			if (f->dist[(size_t)l->to.id * (size_t)S + (size_t)t] != du - 1 || pick--)
				continue;
			path_push(f, out, (int)l->id);
			v = l->to.id;
			break;
		}
		u = v;
	}
	path_push(f, out, b->link_in);
	return 0;
}

static int nic_arg(const struct fabric *f, int node, int nic, const struct fabric_nic **out,
		   char *err, size_t errlen)
{
	const struct fabric_node *n = fabric_node(f, node);
	*out = n ? fabric_nic(n, nic) : NULL;
	if (*out)
		return 0;
	if (!n)
		snprintf(err, errlen, "no node %d (the fabric has %d)", node, f->nnodes);
	else
		snprintf(err, errlen, "node %s has %d NIC(s); there is no NIC %d", n->name,
			 n->nnics, nic);
	return -ENODEV;
}

int fabric_path(const struct fabric *f, int src_node, int src_nic, int dst_node, int dst_nic,
		struct model_path *out, char *err, size_t errlen)
{
	const struct fabric_nic *a, *b;
	int rc = nic_arg(f, src_node, src_nic, &a, err, errlen);
	if (!rc)
		rc = nic_arg(f, dst_node, dst_nic, &b, err, errlen);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	if (!f->finished) {
		snprintf(err, errlen, "the fabric is not finished: no routes yet");
		return -EHOSTUNREACH;
	}
	return fabric_route(f, a, b, out, err, errlen);
}

/* ---- finishing ------------------------------------------------------------------------ */

static int build_routes(struct fabric *f, char *err, size_t errlen)
{
	size_t S = (size_t)f->nswitches;
	f->adj_off = calloc(S + 1, sizeof(int));
	f->adj = malloc(sizeof(uint32_t) * (size_t)(f->nlinks ? f->nlinks : 1));
	f->dist = malloc(sizeof(uint16_t) * (S ? S * S : 1));
	int *queue = malloc(sizeof(int) * (S ? S : 1));
	if (!f->adj_off || !f->adj || !f->dist || !queue) {
		free(queue);
		return oom(err, errlen);
	}
	/* Switch-to-switch links per switch, in id order (counting sort by source). */
	for (int i = 0; i < f->nlinks; i++) {
		const struct fabric_link *l = &f->links[i];
		if (l->from.kind == FABRIC_EP_SWITCH && l->to.kind == FABRIC_EP_SWITCH)
			f->adj_off[l->from.id + 1]++;
	}
	for (size_t u = 0; u < S; u++)
		f->adj_off[u + 1] += f->adj_off[u];
	int *fill = calloc(S ? S : 1, sizeof(int));
	if (!fill) {
		free(queue);
		return oom(err, errlen);
	}
	for (int i = 0; i < f->nlinks; i++) {
		const struct fabric_link *l = &f->links[i];
		if (l->from.kind == FABRIC_EP_SWITCH && l->to.kind == FABRIC_EP_SWITCH)
			f->adj[f->adj_off[l->from.id] + fill[l->from.id]++] = l->id;
	}
	free(fill);
	/* Hop counts: a BFS from every switch (links come in pairs, so distances are symmetric). */
	for (size_t t = 0; t < S; t++) {
		uint16_t *row = &f->dist[t * S];
		for (size_t u = 0; u < S; u++)
			row[u] = DIST_INF;
		int head = 0, tail = 0;
		row[t] = 0;
		queue[tail++] = (int)t;
		while (head < tail) {
			int u = queue[head++];
			for (int i = f->adj_off[u]; i < f->adj_off[u + 1]; i++) {
				int v = f->links[f->adj[i]].to.id;
				if (row[v] == DIST_INF) {
					row[v] = (uint16_t)(row[u] + 1); /* < S <= 1024 */
					queue[tail++] = v;
				}
			}
		}
	}
	free(queue);
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* What a NIC reports: see fabric.h. */
static void nic_report(struct fabric *f, struct fabric_nic *a, int64_t *lat)
{
	const struct fabric_link *up = &f->links[a->link_out];
	uint64_t mbps = up->model.rate_bps / 1000000;
	a->speed_mbps = up->model.rate_bps == 0 ? FABRIC_IDEAL_SPEED_MBPS : mbps ? (int64_t)mbps : 1;

	int others = f->nnodes - 1, n = 0;
	struct model_path p;
	char err[FABRIC_ERR_LEN];
	if (others > 0) {
		int take = others < FABRIC_TYPICAL_PEERS ? others : FABRIC_TYPICAL_PEERS;
		for (int k = 0; k < take; k++) {
			int m = (int)((int64_t)k * others / take);
			if (m >= a->node)
				m++; /* skip its own node */
			const struct fabric_node *peer = f->nodes[m];
			const struct fabric_nic *b = &peer->nic[a->index % peer->nnics];
			if (fabric_route(f, a, b, &p, err, sizeof(err)) == 0)
				lat[n++] = model_ideal_ns(&p, &a->model, 0);
		}
	} else {
		const struct fabric_node *self = f->nodes[a->node];
		for (int i = 0; i < self->nnics; i++) {
			const struct fabric_nic *b = &self->nic[i];
			if ((b != a || self->nnics == 1) &&
			    fabric_route(f, a, b, &p, err, sizeof(err)) == 0)
				lat[n++] = model_ideal_ns(&p, &a->model, 0);
		}
	}
	if (n == 0) { /* cannot happen: a NIC reaches at least itself */
		a->latency_ns = a->model.o_send_ns + a->model.o_recv_ns;
		return;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_i64);
	a->latency_ns = lat[(n - 1) / 2];
}

int fabric_finish(struct fabric *f, int *bad_tag, char *err, size_t errlen)
{
	*bad_tag = -1;
	int rc = check_building(f, err, errlen);
	if (rc)
		return rc;
	/* Every NIC has its cable. */
	for (int i = 0; i < f->nnodes; i++) {
		const struct fabric_node *n = f->nodes[i];
		for (int j = 0; j < n->nnics; j++) {
			if (n->nic[j].link_out >= 0)
				continue;
			*bad_tag = n->tag;
			snprintf(err, errlen,
				 "NIC %s/%d (%s) has no link: every NIC needs one (add it to a "
				 "links entry)",
				 n->name, j, n->nic[j].name);
			return -ENOTCONN;
		}
	}
	/* The model's view of every hop, and what the switches add up to. */
	for (int i = 0; i < f->nlinks; i++) {
		struct fabric_link *l = &f->links[i];
		char why[MODEL_ERR_LEN];
		l->model = l->param;
		if (l->to.kind == FABRIC_EP_SWITCH)
			l->model.latency_ns += f->switches[l->to.id]->cfg.latency_ns;
		if (model_link_resolve(&l->model, why, sizeof(why))) {
			char na[FABRIC_NIC_NAME_MAX + 8], nb[FABRIC_NIC_NAME_MAX + 8];
			*bad_tag = l->tag;
			snprintf(err, errlen, "%s (hop %s -> %s)", why,
				 fabric_ep_name(f, &l->from, na, sizeof(na)),
				 fabric_ep_name(f, &l->to, nb, sizeof(nb)));
			return -EINVAL;
		}
		if (l->from.kind == FABRIC_EP_SWITCH) {
			struct fabric_switch *s = f->switches[l->from.id];
			if (l->to.kind == FABRIC_EP_NIC) {
				s->nic_links++;
				s->nic_bps += l->model.rate_bps;
			} else {
				s->switch_links++;
				s->switch_bps += l->model.rate_bps;
			}
		}
	}
	f->by_gid = malloc(sizeof(*f->by_gid) * (size_t)(f->nnics ? f->nnics : 1));
	if (!f->by_gid)
		return oom(err, errlen);
	for (int i = 0; i < f->nnodes; i++)
		for (int j = 0; j < f->nodes[i]->nnics; j++)
			f->by_gid[f->nodes[i]->nic[j].gid] = &f->nodes[i]->nic[j];
	if ((rc = build_routes(f, err, errlen)))
		return rc;
	/* Every NIC reaches every other: check from NIC 0, then the longest switch distance. */
	struct model_path p;
	for (int g = 1; g < f->nnics; g++) {
		if ((rc = fabric_route(f, f->by_gid[0], f->by_gid[g], &p, err, errlen)))
			return rc;
		if ((rc = model_path_check(&p, err, errlen)))
			return rc;
		if ((rc = fabric_route(f, f->by_gid[g], f->by_gid[0], &p, err, errlen)))
			return rc;
	}
	{
		/* Switches that have NICs: every pair within MODEL_MAX_HOPS - 2 switch hops. */
		int S = f->nswitches, nh = 0;
		int *host = malloc(sizeof(int) * (size_t)(S ? S : 1));
		int *first = malloc(sizeof(int) * (size_t)(S ? S : 1));
		if (!host || !first) {
			free(host);
			free(first);
			return oom(err, errlen);
		}
		for (int s = 0; s < S; s++)
			first[s] = -1;
		for (int g = 0; g < f->nnics; g++) {
			const struct fabric_link *up = &f->links[f->by_gid[g]->link_out];
			if (up->to.kind == FABRIC_EP_SWITCH && first[up->to.id] < 0) {
				first[up->to.id] = g;
				host[nh++] = up->to.id;
			}
		}
		rc = 0;
		for (int i = 0; i < nh && !rc; i++)
			for (int j = 0; j < nh && !rc; j++)
				rc = fabric_route(f, f->by_gid[first[host[i]]],
						  f->by_gid[first[host[j]]], &p, err, errlen);
		free(host);
		free(first);
		if (rc)
			return rc;
	}
	int64_t *lat = malloc(sizeof(int64_t) * (FABRIC_TYPICAL_PEERS + FABRIC_MAX_NICS));
	if (!lat)
		return oom(err, errlen);
	for (int g = 0; g < f->nnics; g++)
		nic_report(f, (struct fabric_nic *)f->by_gid[g], lat);
	free(lat);
	f->finished = true;
	return 0;
}
