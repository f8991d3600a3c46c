/* SPDX-License-Identifier: MIT */
/* fabric_out.c - what a finished fabric says about itself: its load-time hazards (fabric_lint)
 * and its JSON dump (fabric_json). See fabric.h. */
#include "sim/scn/fabric.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/fabric_int.h"
#include "sim/scn/jbuf.h"
#include "sim/scn/param.h"

#define JSON_PATHS_MAX 1024 /* ordered NIC pairs listed in the dump, at most */

/* ---- load-time hazards ---------------------------------------------------------------- */

/* Who sends across a directed link: the first NIC with an infinite ACK timeout (and how many),
 * the NIC with the fewest retries and the one with the longest (finite) ACK timeout. */
struct lint_use {
	bool used;
	int last;	     /* the NIC marked last: each NIC counts once */
	int ninf, first_inf; /* gids */
	uint32_t min_retry;
	int min_retry_gid;
	uint32_t max_exp; /* 0: none seen */
	int max_exp_gid;
};

static void lint_mark(struct lint_use *u, const struct fabric_nic *a)
{
	if (u->used && u->last == a->gid)
		return;
	u->used = true;
	u->last = a->gid;
	if (a->model.timeout_exp == 0 && u->ninf++ == 0)
		u->first_inf = a->gid;
	if (a->model.retry_count < u->min_retry) {
		u->min_retry = a->model.retry_count;
		u->min_retry_gid = a->gid;
	}
	if (a->model.timeout_exp > u->max_exp) {
		u->max_exp = a->model.timeout_exp;
		u->max_exp_gid = a->gid;
	}
}

static const char *const lint_loss_names[] = {"none", "bernoulli", "ge", "4state"};

/* "link 16 (leaf0 -> spine0, loss bernoulli, 1 % of packets)" */
static void lint_link(const struct fabric *f, const struct fabric_link *l, double rate, char *buf,
		      size_t cap)
{
	char na[FABRIC_NIC_NAME_MAX + 8], nb[FABRIC_NIC_NAME_MAX + 8];
	snprintf(buf, cap, "link %u (%s -> %s, loss %s, %.3g %% of packets)", l->id,
		 fabric_ep_name(f, &l->from, na, sizeof(na)),
		 fabric_ep_name(f, &l->to, nb, sizeof(nb)), lint_loss_names[l->model.loss.kind],
		 rate * 100);
}

int fabric_lint(const struct fabric *f, void (*warn)(void *ctx, const char *msg), void *ctx)
{
	if (!f->finished || f->kind == KIND_IDEAL)
		return 0;
	bool lossy = false;
	for (int i = 0; i < f->nlinks && !lossy; i++)
		lossy = model_loss_rate(&f->links[i].model.loss) > 0;
	if (!lossy)
		return 0;
	struct lint_use *use = calloc((size_t)f->nlinks, sizeof(*use));
	if (!use)
		return -ENOMEM;
	for (int i = 0; i < f->nlinks; i++)
		use[i].min_retry = UINT32_MAX;
	bool exact = f->nnics <= FABRIC_LINT_EXACT_NICS;
	for (int g = 0; g < f->nnics; g++) {
		const struct fabric_nic *a = f->by_gid[g];
		struct model_path p;
		char err[FABRIC_ERR_LEN];
		if (!exact) {
			for (int i = 0; i < f->nlinks; i++)
				if (f->links[i].from.kind == FABRIC_EP_SWITCH || i == a->link_out)
					lint_mark(&use[i], a);
			continue;
		}
		for (int h = 0; h < f->nnics; h++)
			if (h != g && fabric_route(f, a, f->by_gid[h], &p, err, sizeof(err)) == 0)
				for (int j = 0; j < p.nhops; j++)
					lint_mark(&use[p.link_id[j]], a);
	}

	int n[3] = {0, 0, 0}, hazards = 0, slow_link = -1, slow_gid = -1;
	uint32_t slow_exp = 0;
	char msg[1024], what[320];
	for (int i = 0; i < f->nlinks; i++) {
		const struct fabric_link *l = &f->links[i];
		const struct lint_use *u = &use[i];
		double rate = model_loss_rate(&l->model.loss);
		if (!u->used || rate <= 0)
			continue;
		/* A packet fails when its first send and all retry_count retries are lost. */
		double fail = pow(rate, (double)u->min_retry + 1);
		hazards += u->ninf > 0 || fail >= FABRIC_LINT_FAIL_RATE;
		if (u->ninf && ++n[0] <= FABRIC_LINT_LINES) {
			char ninf[32];
			snprintf(ninf, sizeof(ninf), "%d other NIC(s)", u->ninf - 1);
			lint_link(f, l, rate, what, sizeof(what));
			snprintf(msg, sizeof(msg),
				 "%s carries traffic from %s%s%s with timeout_exp 0 (an infinite ACK "
				 "timeout): a lost last packet is never recovered, so its message "
				 "never completes and the job hangs; give %s a timeout_exp of 1..31 "
				 "(NCCL's default 20: 4.3 s)",
				 what, f->by_gid[u->first_inf]->name, u->ninf > 1 ? " and " : "",
				 u->ninf > 1 ? ninf : "", u->ninf > 1 ? "those NICs" : "that NIC");
			warn(ctx, msg);
		}
		if (fail >= FABRIC_LINT_FAIL_RATE && ++n[1] <= FABRIC_LINT_LINES) {
			lint_link(f, l, rate, what, sizeof(what));
			snprintf(msg, sizeof(msg),
				 "%s carries traffic from %s with retry_count %u: about one packet "
				 "in %.*g is lost %u times in a row, which fails its message and "
				 "connection (ncclRemoteError); raise retry_count (at most 7, NCCL's "
				 "default) or lower the loss",
				 what, f->by_gid[u->min_retry_gid]->name, u->min_retry,
				 1 / fail < 1e6 ? 6 : 2, 1 / fail, u->min_retry + 1);
			warn(ctx, msg);
		}
		/* Not a hazard (the job completes), but every lost packet that ends a message
		 * stalls it for T_o: at NCCL's default 20, 4.3 s, which looks like a hang. One
		 * line for all such links (a lossy default usually makes every link one). */
		if (u->max_exp >= FABRIC_LINT_SLOW_EXP && n[2]++ == 0) {
			slow_link = i;
			slow_gid = u->max_exp_gid;
			slow_exp = u->max_exp;
		}
	}
	if (n[2]) {
		char who[FABRIC_NIC_NAME_MAX + 128];
		if (n[2] > 1)
			snprintf(who, sizeof(who),
				 " and %d more lossy link(s) carry traffic from NICs with timeout_exp "
				 "%d or more (%s: %u)",
				 n[2] - 1, FABRIC_LINT_SLOW_EXP, f->by_gid[slow_gid]->name, slow_exp);
		else
			snprintf(who, sizeof(who), " carries traffic from %s with timeout_exp %u",
				 f->by_gid[slow_gid]->name, slow_exp);
		lint_link(f, &f->links[slow_link], model_loss_rate(&f->links[slow_link].model.loss),
			  what, sizeof(what));
		snprintf(msg, sizeof(msg),
			 "%s%s: a lost packet that ends a message is retried only after an ACK "
			 "timeout of %.3g s (4.096 us x 2^%u), and each such loss stalls its "
			 "connection that long; a timeout_exp of 10 to 14 (4.2 to 67 ms) keeps a lossy "
			 "emulated fabric moving, as the shipped lossy scenarios do",
			 what, who, 4.096e-6 * ldexp(1.0, (int)slow_exp), slow_exp);
		warn(ctx, msg);
	}
	static const char *const kinds[2] = {"timeout_exp 0", "retry_count"};
	for (int k = 0; k < 2; k++)
		if (n[k] > FABRIC_LINT_LINES) {
			snprintf(msg, sizeof(msg), "... and %d more lossy link(s) with the same %s "
				 "hazard (tools/simfabric fabric lists every link)",
				 n[k] - FABRIC_LINT_LINES, kinds[k]);
			warn(ctx, msg);
		}
	free(use);
	return hazards;
}

/* ---- the JSON dump ------------------------------------------------------------------- */

/* Every parameter of scope in obj that applies, groups as nested objects. */
static void jparams(struct jbuf *b, enum param_scope scope, const void *obj, unsigned skip)
{
	char v[PARAM_VALUE_MAX];
	enum param_group open = PARAM_G_NONE;
	bool first = true, gfirst = true;
	jbuf_puts(b, "{");
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope != scope || (p->flags & skip) || !param_applies(p, obj))
			continue;
		if (open != PARAM_G_NONE && p->group != open) {
			jbuf_puts(b, "}");
			open = PARAM_G_NONE;
		}
		if (p->group != PARAM_G_NONE && open == PARAM_G_NONE) {
			char gname[32];
			snprintf(gname, sizeof(gname), "%.*s", (int)(strchr(p->name, '.') - p->name),
				 p->name);
			jbuf_printf(b, "%s\"%s\":{", first ? "" : ",", gname);
			open = p->group;
			gfirst = true;
			first = false;
		}
		if (open != PARAM_G_NONE) {
			jbuf_printf(b, "%s\"%s\":", gfirst ? "" : ",", param_leaf(p));
			gfirst = false;
		} else {
			jbuf_printf(b, "%s\"%s\":", first ? "" : ",", p->name);
			first = false;
		}
		if (p->type == PARAM_TABLE) {
			int n = param_format(p, obj, NULL, 0);
			char *t = malloc((size_t)n + 1);
			if (!t) {
				b->oom = true;
				return;
			}
			param_format(p, obj, t, (size_t)n + 1);
			jbuf_puts(b, t);
			free(t);
		} else {
			param_format(p, obj, v, sizeof(v));
			jbuf_puts(b, v);
		}
	}
	if (open != PARAM_G_NONE)
		jbuf_puts(b, "}");
	jbuf_puts(b, "}");
}

static void jep(struct jbuf *b, const struct fabric *f, const struct fabric_ep *e)
{
	char n[FABRIC_NIC_NAME_MAX + 8];
	jbuf_str(b, fabric_ep_name(f, e, n, sizeof(n)));
}

static void json_build(struct fabric *f, const struct fabric_json_member *extra, int nextra,
		       struct jbuf *b)
{
	unsigned skip = f->kind == KIND_IDEAL ? PARAM_EXPLICIT_ONLY : PARAM_IDEAL_ONLY;
	jbuf_printf(b, "{\"kind\":\"%s\",\"scenario\":", fabric_kind(f));
	jbuf_str(b, f->scenario);
	jbuf_puts(b, ",\"name\":");
	jbuf_str(b, f->name);
	jbuf_puts(b, ",\"description\":");
	jbuf_str(b, f->description);
	jbuf_printf(b, ",\"seed\":%llu,\"config\":", (unsigned long long)f->cfg.seed);
	jparams(b, PARAM_FABRIC, &f->cfg, skip);
	for (int i = 0; i < nextra; i++) {
		jbuf_printf(b, ",\"%s\":", extra[i].name);
		jbuf_puts(b, extra[i].json ? extra[i].json : "null");
	}
	jbuf_printf(b, ",\"counts\":{\"nodes\":%d,\"nics\":%d,\"switches\":%d,\"links\":%d}",
		    f->nlive, f->kind == KIND_IDEAL ? f->nlive * (int)f->cfg.nics_per_node : f->nnics,
		    f->nswitches, f->nlinks);

	jbuf_puts(b, ",\"nodes\":[");
	for (int i = 0, first = 1; i < f->nnodes; i++) {
		const struct fabric_node *n = f->nodes[i];
		if (!n)
			continue;
		jbuf_printf(b, "%s{\"id\":%d,\"name\":", first ? "" : ",", n->id);
		first = 0;
		jbuf_str(b, n->name);
		jbuf_puts(b, ",\"nics\":[");
		for (int j = 0; j < n->nnics; j++) {
			const struct fabric_nic *c = &n->nic[j];
			jbuf_printf(b, "%s{\"index\":%d,\"gid\":%d,\"name\":", j ? "," : "",
				    c->index, c->gid);
			jbuf_str(b, c->name);
			jbuf_printf(b,
				    ",\"guid\":\"0x%016llx\",\"speed_mbps\":%lld,"
				    "\"latency_ns\":%lld,\"host_fs_per_byte\":%llu,",
				    (unsigned long long)c->guid, (long long)c->speed_mbps,
				    (long long)c->latency_ns,
				    (unsigned long long)c->model.host_fs_per_byte);
			if (c->link_out >= 0)
				jbuf_printf(b, "\"link_out\":%d,\"link_in\":%d,", c->link_out,
					    c->link_in);
			else
				jbuf_puts(b, "\"link_out\":null,\"link_in\":null,");
			jbuf_puts(b, "\"params\":");
			jparams(b, PARAM_NIC, &c->model, 0);
			jbuf_puts(b, "}");
		}
		jbuf_puts(b, "]}");
	}
	jbuf_puts(b, "],\"switches\":[");
	for (int i = 0; i < f->nswitches; i++) {
		const struct fabric_switch *s = f->switches[i];
		jbuf_printf(b, "%s{\"id\":%d,\"name\":", i ? "," : "", s->id);
		jbuf_str(b, s->name);
		jbuf_puts(b, ",\"params\":");
		jparams(b, PARAM_SWITCH, &s->cfg, 0);
		char g1[32], g2[32];
		param_format_value(param_find(PARAM_LINK, "rate_gbps"), (int64_t)s->nic_bps, g1,
				   sizeof(g1));
		param_format_value(param_find(PARAM_LINK, "rate_gbps"), (int64_t)s->switch_bps, g2,
				   sizeof(g2));
		jbuf_printf(b,
			    ",\"ports_used\":%d,\"nic_links\":%d,\"switch_links\":%d,"
			    "\"nic_gbps\":%s,\"switch_gbps\":%s,\"oversubscription\":",
			    s->ports_used, s->nic_links, s->switch_links, g1, g2);
		if (s->nic_bps && s->switch_bps)
			jbuf_printf(b, "%.6g}", (double)s->nic_bps / (double)s->switch_bps);
		else
			jbuf_puts(b, "null}");
	}
	jbuf_puts(b, "],\"links\":[");
	for (int i = 0; i < f->nlinks; i++) {
		const struct fabric_link *l = &f->links[i];
		jbuf_printf(b, "%s{\"id\":%u,\"cable\":%d,\"from\":", i ? "," : "", l->id,
			    l->cable);
		jep(b, f, &l->from);
		jbuf_puts(b, ",\"to\":");
		jep(b, f, &l->to);
		jbuf_printf(b,
			    ",\"hop_latency_ns\":%lld,\"rate_bps\":%llu,\"fs_per_byte\":%llu,"
			    "\"params\":",
			    (long long)l->model.latency_ns, (unsigned long long)l->model.rate_bps,
			    (unsigned long long)l->model.fs_per_byte);
		jparams(b, PARAM_LINK, &l->param, 0);
		jbuf_puts(b, "}");
	}
	jbuf_puts(b, "]");
	int64_t pairs = (int64_t)f->nnics * (f->nnics - 1);
	jbuf_printf(b, ",\"path_pairs\":%lld,\"paths\":", (long long)pairs);
	if (f->kind == KIND_IDEAL || pairs > JSON_PATHS_MAX) {
		jbuf_puts(b, "null}");
		return;
	}
	jbuf_puts(b, "[");
	bool first = true;
	for (int x = 0; x < f->nnics; x++) {
		for (int y = 0; y < f->nnics; y++) {
			const struct fabric_nic *a = f->by_gid[x], *c = f->by_gid[y];
			struct model_path p;
			char err[FABRIC_ERR_LEN];
			if (x == y || fabric_route(f, a, c, &p, err, sizeof(err)))
				continue;
			jbuf_printf(b, "%s{\"src\":\"%s/%d\",\"dst\":\"%s/%d\",\"links\":[",
				    first ? "" : ",", f->nodes[a->node]->name, a->index,
				    f->nodes[c->node]->name, c->index);
			first = false;
			uint64_t slow = 0;
			for (int h = 0; h < p.nhops; h++) {
				jbuf_printf(b, "%s%u", h ? "," : "", p.link_id[h]);
				uint64_t r = p.hop[h]->rate_bps;
				if (r && (!slow || r < slow))
					slow = r;
			}
			jbuf_printf(b, "],\"latency_ns\":%lld,\"bottleneck_bps\":%llu}",
				    (long long)fabric_path_latency(&p), (unsigned long long)slow);
		}
	}
	jbuf_puts(b, "]}");
}

int fabric_json(struct fabric *f, const struct fabric_json_member *extra, int nextra,
		bool refresh, const char **text, size_t *len)
{
	if (refresh || !f->json) {
		struct jbuf b = JBUF_INIT;
		char *json;
		size_t n;
		json_build(f, extra, nextra, &b);
		if (jbuf_take(&b, &json, &n))
			return -ENOMEM;
		free(f->json);
		f->json = json;
		f->json_len = n;
	}
	*text = f->json;
	*len = f->json_len;
	return 0;
}
