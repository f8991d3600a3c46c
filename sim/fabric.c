/* SPDX-License-Identifier: MIT */
/* fabric.c - the emulated fabric's description. See fabric.h. */
#include "sim/fabric.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GUIDs: "SF" in the top bytes, then the node id, then the NIC index. */
#define GUID_BASE 0x5346000000000000ULL

enum fabric_kind_id { KIND_IDEAL };

struct fabric {
	enum fabric_kind_id kind;
	struct fabric_config cfg;
	int nnodes, cap;
	struct fabric_node **nodes; /* each allocated once, so pointers stay put */
};

#define P(field) offsetof(struct fabric_config, field)
const struct fabric_param fabric_params[] = {
	{"nics_per_node", "count", 1, FABRIC_MAX_NICS, 1, P(nics_per_node),
	 "NICs on every node (daemon flag --nics)"},
	{"speed_mbps", "Mbit/s", 1, 100000000, FABRIC_IDEAL_SPEED_MBPS, P(speed_mbps),
	 "speed each NIC reports to NCCL; the ideal fabric does not throttle to it"},
	{"latency_ns", "ns", 0, 10000000000LL, 0, P(latency_ns),
	 "latency each NIC reports to NCCL; the ideal fabric adds none"},
};
#undef P
const int fabric_nparams = (int)(sizeof(fabric_params) / sizeof(fabric_params[0]));

/* Copy s into out for an error message: escaped, at most 64 characters then "...". */
static const char *quote(const char *s, char *out, size_t cap)
{
	size_t o = 0, i = 0;
	for (; s[i] && o + 8 < cap && i < 64; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
	}
	if (s[i] && o + 4 <= cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = 0;
	return out;
}

const struct fabric_param *fabric_param_find(const char *name)
{
	for (int i = 0; i < fabric_nparams; i++)
		if (strcmp(fabric_params[i].name, name) == 0)
			return &fabric_params[i];
	return NULL;
}

static int64_t *field(struct fabric_config *cfg, const struct fabric_param *p)
{
	return (int64_t *)((char *)cfg + p->offset);
}

int64_t fabric_config_get(const struct fabric_config *cfg, const struct fabric_param *p)
{
	return *(const int64_t *)((const char *)cfg + p->offset);
}

void fabric_config_init(struct fabric_config *cfg)
{
	for (int i = 0; i < fabric_nparams; i++)
		*field(cfg, &fabric_params[i]) = fabric_params[i].def;
}

static int range_error(const struct fabric_param *p, const char *shown, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s: '%s' is not an integer in %lld..%lld (%s)", p->name, shown,
		 (long long)p->min, (long long)p->max, p->unit);
	return -EINVAL;
}

int fabric_config_set(struct fabric_config *cfg, const char *name, const char *value, char *err,
		      size_t errlen)
{
	char q[80];
	const struct fabric_param *p = fabric_param_find(name);
	if (!p) {
		snprintf(err, errlen, "unknown fabric parameter '%s'", quote(name, q, sizeof(q)));
		return -ENOENT;
	}
	/* Strict decimal: an optional '-', digits, nothing else; overflow is out of range. */
	const char *s = value;
	bool neg = *s == '-';
	s += neg;
	if (!*s)
		return range_error(p, quote(value, q, sizeof(q)), err, errlen);
	uint64_t v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return range_error(p, quote(value, q, sizeof(q)), err, errlen);
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return range_error(p, quote(value, q, sizeof(q)), err, errlen);
	int64_t x = neg ? -(int64_t)v : (int64_t)v;
	if (x < p->min || x > p->max)
		return range_error(p, quote(value, q, sizeof(q)), err, errlen);
	*field(cfg, p) = x;
	return 0;
}

int fabric_config_check(const struct fabric_config *cfg, char *err, size_t errlen)
{
	for (int i = 0; i < fabric_nparams; i++) {
		const struct fabric_param *p = &fabric_params[i];
		int64_t v = fabric_config_get(cfg, p);
		if (v < p->min || v > p->max) {
			char num[24];
			snprintf(num, sizeof(num), "%lld", (long long)v);
			return range_error(p, num, err, errlen);
		}
	}
	return 0;
}

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
			 quote(name, q, sizeof(q)), n, FABRIC_NAME_MAX);
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
			 quote(name, q, sizeof(q)), what, i + 1);
		return -EINVAL;
	}
	return 0;
}

int fabric_new_ideal(const struct fabric_config *cfg, struct fabric **out, char *err,
		     size_t errlen)
{
	*out = NULL;
	int rc = fabric_config_check(cfg, err, errlen);
	if (rc)
		return rc;
	struct fabric *f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	f->kind = KIND_IDEAL;
	f->cfg = *cfg;
	*out = f;
	return 0;
}

void fabric_free(struct fabric *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->nnodes; i++)
		free(f->nodes[i]);
	free(f->nodes);
	free(f);
}

const char *fabric_kind(const struct fabric *f)
{
	(void)f; /* one kind so far */
	return "ideal";
}

const struct fabric_config *fabric_config(const struct fabric *f)
{
	return &f->cfg;
}

int fabric_nnodes(const struct fabric *f)
{
	return f->nnodes;
}

const struct fabric_node *fabric_node(const struct fabric *f, int id)
{
	return id >= 0 && id < f->nnodes ? f->nodes[id] : NULL;
}

const struct fabric_node *fabric_node_find(const struct fabric *f, const char *name)
{
	/* Linear: nodes are few (one per emulated host), and looked up once per hello. */
	for (int i = 0; i < f->nnodes; i++)
		if (strcmp(f->nodes[i]->name, name) == 0)
			return f->nodes[i];
	return NULL;
}

const struct fabric_nic *fabric_nic(const struct fabric_node *node, int index)
{
	return index >= 0 && index < node->nnics ? &node->nic[index] : NULL;
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
	if (f->nnodes == FABRIC_MAX_NODES) {
		snprintf(err, errlen, "cannot add node '%s': the fabric has %d nodes, the limit",
			 name, FABRIC_MAX_NODES);
		return -ENOSPC;
	}
	if (f->nnodes == f->cap) {
		int cap = f->cap ? f->cap * 2 : 16;
		struct fabric_node **nodes = realloc(f->nodes, sizeof(*nodes) * (size_t)cap);
		if (!nodes) {
			snprintf(err, errlen, "out of memory adding node '%s'", name);
			return -ENOMEM;
		}
		f->nodes = nodes;
		f->cap = cap;
	}
	struct fabric_node *n = calloc(1, sizeof(*n));
	if (!n) {
		snprintf(err, errlen, "out of memory adding node '%s'", name);
		return -ENOMEM;
	}
	memcpy(n->name, name, strlen(name) + 1);
	n->id = f->nnodes;
	n->nnics = (int)f->cfg.nics_per_node;
	for (int i = 0; i < n->nnics; i++) {
		struct fabric_nic *nic = &n->nic[i];
		snprintf(nic->name, sizeof(nic->name), "%s-nic%d", name, i);
		nic->index = i;
		nic->guid = GUID_BASE | ((uint64_t)n->id << 8) | (uint64_t)i;
		nic->speed_mbps = f->cfg.speed_mbps;
		nic->latency_ns = f->cfg.latency_ns;
	}
	f->nodes[f->nnodes++] = n;
	*out = n;
	return 0;
}
