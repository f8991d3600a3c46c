/* SPDX-License-Identifier: MIT */
/* param.c - the one table of the fabric's parameters. See param.h. */
#include "sim/scn/param.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/fabric.h"
#include "sim/core/model.h"
#include "sim/scn/units.h"

_Static_assert(sizeof(enum model_dist) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(enum model_loss_kind) == sizeof(int), "enums are stored as int");

static const char *const dist_names[] = {"none",   "uniform",	   "normal",
					 "pareto", "paretonormal", "table",  NULL};
static const char *const loss_names[] = {"none", "bernoulli", "ge", "4state", NULL};
static const char *const switching_names[] = {"cut_through", "store_forward", NULL};

#define FAB(f) PARAM_FABRIC, offsetof(struct fabric_config, f), sizeof(((struct fabric_config *)0)->f)
#define LNK(f) PARAM_LINK, offsetof(struct model_link, f), sizeof(((struct model_link *)0)->f)
#define NIC(f) PARAM_NIC, offsetof(struct model_nic, f), sizeof(((struct model_nic *)0)->f)
#define SWI(f)                                                                                     \
	PARAM_SWITCH, offsetof(struct fabric_switch_cfg, f),                                       \
		sizeof(((struct fabric_switch_cfg *)0)->f)

/* Kinds masks. */
#define K(v) (1u << (v))
#define J_SPREAD (K(MODEL_DIST_UNIFORM) | K(MODEL_DIST_NORMAL) | K(MODEL_DIST_PARETO) | K(MODEL_DIST_PARETONORMAL))
#define J_ANY (J_SPREAD | K(MODEL_DIST_TABLE))

#define GBPS 1000000000LL
#define RATE_MIN ((int64_t)MODEL_RATE_MIN_BPS)
#define RATE_MAX ((int64_t)MODEL_RATE_MAX_BPS)
#define PROB_ONE 0xffffffffLL
#define PPM_ONE 1000000LL
#define SEC_NS 1000000000LL

/* Keep a scope's entries together: the docs list them in this order. */
const struct param param_table[] = {
	/* ---- the fabric ---- */
	{"seed", FAB(seed), 0, PARAM_U64, "", 0, 0, 1, NULL, PARAM_G_NONE, 0, PARAM_TOPLEVEL,
	 "seed of every random draw (jitter, loss, ...); at the top level of a scenario; "
	 "`simfabricd --seed` overrides it"},
	{"switching", FAB(switching), 0, PARAM_ENUM, "", 0, 1, MODEL_CUT_THROUGH,
	 switching_names, PARAM_G_NONE, 0, 0,
	 "how packets cross a switch: cut_through (InfiniBand and most datacenter switches) or "
	 "store_forward (per packet)"},
	{"nics_per_node", FAB(nics_per_node), 0, PARAM_INT, "count", 1, FABRIC_MAX_NICS, 1, NULL,
	 PARAM_G_NONE, 0, PARAM_IDEAL_ONLY, "NICs on every node (daemon flag --nics)"},
	{"speed_mbps", FAB(speed_mbps), 0, PARAM_INT, "Mbit/s", 1, 100000000,
	 FABRIC_IDEAL_SPEED_MBPS, NULL, PARAM_G_NONE, 0, PARAM_IDEAL_ONLY,
	 "speed each NIC reports to NCCL; the ideal fabric does not throttle to it"},
	{"latency_ns", FAB(latency_ns), 0, PARAM_INT, "ns", 0, 10 * SEC_NS, 0, NULL,
	 PARAM_G_NONE, 0, PARAM_IDEAL_ONLY,
	 "latency each NIC reports to NCCL; the ideal fabric adds none"},

	/* ---- one direction of a link ---- */
	{"rate_gbps", LNK(rate_bps), 0, PARAM_RATE, "Gb/s", RATE_MIN, RATE_MAX, 200 * GBPS, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME | PARAM_ZERO_OK,
	 "data rate after encoding (HDR 200, NDR 400); 0: unlimited; a switch's port_rate_gbps "
	 "is the default of its links"},
	{"latency_ns", LNK(latency_ns), 0, PARAM_INT, "ns", 0, 10 * SEC_NS, 10, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME,
	 "propagation delay (cable); the hop also costs the forwarding latency of the switch it "
	 "enters"},
	{"mtu", LNK(mtu), 0, PARAM_INT, "B", 64, 65536, 4096, NULL, PARAM_G_NONE, 0, 0,
	 "payload bytes per packet; a path uses the smallest of its hops"},
	{"hdr_bytes", LNK(hdr_bytes), 0, PARAM_INT, "B", 0, MODEL_HDR_MAX, 26, NULL, PARAM_G_NONE, 0,
	 0, "header bytes per packet on the wire (InfiniBand LRH+BTH+ICRC+VCRC 26; RoCEv2 82)"},
	{"hdr_first_extra", LNK(hdr_first_extra), 0, PARAM_INT, "B", 0, MODEL_HDR_MAX, 16, NULL,
	 PARAM_G_NONE, 0, 0, "more header bytes on a message's first packet (InfiniBand RETH 16)"},
	{"hdr_last_extra", LNK(hdr_last_extra), 0, PARAM_INT, "B", 0, MODEL_HDR_MAX, 4, NULL,
	 PARAM_G_NONE, 0, 0, "more header bytes on a message's last packet (immediate data 4)"},
	{"jitter.dist", LNK(jitter.dist), 0, PARAM_ENUM, "", 0, MODEL_DIST_TABLE, MODEL_DIST_NONE,
	 dist_names, PARAM_G_JITTER, 0, PARAM_RUNTIME | PARAM_SELECTOR,
	 "distribution of the delay added to each message (one-sided: never early)"},
	{"jitter.sd_ns", LNK(jitter.sd_ns), 0, PARAM_INT, "ns", 0, SEC_NS, 0, NULL,
	 PARAM_G_JITTER, J_SPREAD, PARAM_RUNTIME | PARAM_REQUIRED,
	 "spread of the jitter, as a standard deviation"},
	{"jitter.corr", LNK(jitter.rho), 0, PARAM_REAL, "", 0, 999999, 0, NULL, PARAM_G_JITTER,
	 J_ANY, PARAM_RUNTIME,
	 "correlation of successive draws on a connection (Gaussian-copula AR(1) rho)"},
	{"jitter.table", LNK(jitter.table), offsetof(struct model_link, jitter.ntable),
	 PARAM_TABLE, "ns", 0, 10 * SEC_NS, 0, NULL, PARAM_G_JITTER, K(MODEL_DIST_TABLE),
	 PARAM_RUNTIME | PARAM_REQUIRED,
	 "inverse CDF: entry i is the quantile (i + 0.5) / n, non-decreasing, 1..4096 entries"},
	{"loss.model", LNK(loss.kind), 0, PARAM_ENUM, "", 0, MODEL_LOSS_4STATE, MODEL_LOSS_NONE,
	 loss_names, PARAM_G_LOSS, 0, PARAM_RUNTIME | PARAM_SELECTOR,
	 "packet loss: none, bernoulli, ge (Gilbert-Elliott) or 4state (netem's Markov model); "
	 "a loss costs an InfiniBand RC retransmission"},
	{"loss.p", LNK(loss.p[0]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_BERNOULLI) | K(MODEL_LOSS_GE), PARAM_RUNTIME | PARAM_REQUIRED,
	 "bernoulli: loss per packet; ge: good -> bad transition per packet"},
	{"loss.r", LNK(loss.p[1]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_GE), PARAM_RUNTIME | PARAM_REQUIRED,
	 "bad -> good transition per packet"},
	{"loss.bad", LNK(loss.p[2]), 0, PARAM_PROB, "probability", 0, PROB_ONE, PROB_ONE, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_GE), PARAM_RUNTIME,
	 "loss probability in the bad state (netem's 1-h)"},
	{"loss.good", LNK(loss.p[3]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_GE), PARAM_RUNTIME,
	 "loss probability in the good state (netem's 1-k)"},
	{"loss.p13", LNK(loss.p[0]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_4STATE), PARAM_RUNTIME | PARAM_REQUIRED,
	 "good reception -> burst loss"},
	{"loss.p31", LNK(loss.p[1]), 0, PARAM_PROB, "probability", 0, PROB_ONE, PROB_ONE, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_4STATE), PARAM_RUNTIME, "burst loss -> good reception"},
	{"loss.p32", LNK(loss.p[2]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_4STATE), PARAM_RUNTIME,
	 "burst loss -> good reception within a burst"},
	{"loss.p23", LNK(loss.p[3]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_4STATE), PARAM_RUNTIME,
	 "good reception within a burst -> burst loss"},
	{"loss.p14", LNK(loss.p[4]), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_LOSS, K(MODEL_LOSS_4STATE), PARAM_RUNTIME, "good reception -> isolated loss"},
	{"reorder", LNK(reorder_p), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME,
	 "a packet arrives late (out of order) with this probability; RC recovers it, messages "
	 "stay in order"},
	{"reorder_delay_ns", LNK(reorder_delay_ns), 0, PARAM_INT, "ns", 1, SEC_NS, 1000, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME, "how late a reordered packet arrives"},
	{"duplicate", LNK(duplicate_p), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME,
	 "a packet is sent twice (extra wire time; the transport drops the copy)"},
	{"corrupt", LNK(corrupt_p), 0, PARAM_PROB, "probability", 0, PROB_ONE, 0, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME,
	 "a packet's payload gets a flipped bit and is delivered so: wrong data on purpose"},

	/* ---- a NIC ---- */
	{"host_rate_gbps", NIC(host_rate_bps), 0, PARAM_RATE, "Gb/s", RATE_MIN, RATE_MAX,
	 192 * GBPS, NULL, PARAM_G_NONE, 0, PARAM_RUNTIME | PARAM_ZERO_OK,
	 "host-to-NIC (PCIe) limit on payload; 192 = 24 GB/s, NCCL's figure for a 200G NIC; 0: "
	 "none"},
	{"o_send_ns", NIC(o_send_ns), 0, PARAM_INT, "ns", 0, SEC_NS, 300, NULL, PARAM_G_NONE, 0,
	 PARAM_RUNTIME, "send overhead: doorbell, WQE fetch, start of the DMA read"},
	{"o_recv_ns", NIC(o_recv_ns), 0, PARAM_INT, "ns", 0, SEC_NS, 300, NULL, PARAM_G_NONE, 0,
	 PARAM_RUNTIME, "receive overhead: DMA write and completion"},
	{"ack_proc_ns", NIC(ack_proc_ns), 0, PARAM_INT, "ns", 0, SEC_NS, 200, NULL,
	 PARAM_G_NONE, 0, PARAM_RUNTIME, "responder's ACK/NAK generation"},
	{"timeout_exp", NIC(timeout_exp), 0, PARAM_INT, "", 0, 31, 20, NULL, PARAM_G_NONE, 0, 0,
	 "ACK timeout 4096 ns * 2^timeout_exp (NCCL_IB_TIMEOUT; 20: 4.3 s; 0: never)"},
	{"retry_count", NIC(retry_count), 0, PARAM_INT, "count", 0, 7, 7, NULL, PARAM_G_NONE, 0,
	 0, "a message fails after retry_count + 1 timeouts without progress (NCCL_IB_RETRY_CNT)"},
	{"timeout_scale", NIC(timeout_scale_ppm), 0, PARAM_PPM, "", 1, PPM_ONE, PPM_ONE, NULL,
	 PARAM_G_NONE, 0, 0,
	 "test-only compression of the ACK timeout (0.001: 4.3 ms instead of 4.3 s); logged"},

	/* ---- a switch ---- */
	{"ports", SWI(ports), 0, PARAM_INT, "count", 1, FABRIC_MAX_PORTS, 40, NULL,
	 PARAM_G_NONE, 0, 0, "links it can take (an HDR QM8700 has 40)"},
	{"port_rate_gbps", SWI(port_rate_bps), 0, PARAM_RATE, "Gb/s", RATE_MIN, RATE_MAX, 0, NULL,
	 PARAM_G_NONE, 0, PARAM_ZERO_OK,
	 "default rate_gbps of its links (the lower of two switches'); 0: the links' own"},
	{"latency_ns", SWI(latency_ns), 0, PARAM_INT, "ns", 0, SEC_NS, 130, NULL, PARAM_G_NONE,
	 0, PARAM_RUNTIME, "forwarding latency, added to every hop into the switch"},
};
#undef FAB
#undef LNK
#undef NIC
#undef SWI
const int param_count = (int)(sizeof(param_table) / sizeof(param_table[0]));
_Static_assert(sizeof(param_table) / sizeof(param_table[0]) <= PARAM_MAX, "PARAM_MAX");

static const char *const scope_names[PARAM_NSCOPES] = {"fabric", "link", "nic", "switch"};

const char *param_scope_name(enum param_scope scope)
{
	return scope >= 0 && scope < PARAM_NSCOPES ? scope_names[scope] : "?";
}

const struct param *param_find(enum param_scope scope, const char *name)
{
	for (int i = 0; i < param_count; i++)
		if (param_table[i].scope == scope && strcmp(param_table[i].name, name) == 0)
			return &param_table[i];
	return NULL;
}

int param_index(const struct param *p)
{
	return (int)(p - param_table);
}

const struct param *param_selector(const struct param *p)
{
	if (p->group == PARAM_G_NONE)
		return NULL;
	for (int i = 0; i < param_count; i++) {
		const struct param *q = &param_table[i];
		if (q->scope == p->scope && q->group == p->group && (q->flags & PARAM_SELECTOR))
			return q;
	}
	return NULL;
}

const char *param_leaf(const struct param *p)
{
	const char *dot = strchr(p->name, '.');
	return dot ? dot + 1 : p->name;
}

/* ---- units ------------------------------------------------------------------------- */

/* The unit suffixes of names whose alias takes a unit. */
static const char *const unit_suffixes[] = {"_ns", "_gbps", "_mbps", NULL};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n > k && !strcmp(s + n - k, suffix);
}

int param_dim(const struct param *p, uint64_t *per)
{
	*per = 1;
	if (p->type == PARAM_RATE)
		return UNITS_RATE;
	if (p->type != PARAM_INT)
		return -1;
	if (!strcmp(p->unit, "ns"))
		return UNITS_TIME;
	if (!strcmp(p->unit, "B"))
		return UNITS_SIZE;
	if (!strcmp(p->unit, "Mbit/s")) {
		*per = 1000000;
		return UNITS_RATE;
	}
	return -1;
}

const char *param_alias(const struct param *p, char *buf, size_t cap)
{
	uint64_t per;
	size_t n = strlen(p->name);
	if (param_dim(p, &per) < 0)
		return NULL;
	for (int i = 0; unit_suffixes[i]; i++) {
		if (ends_with(p->name, unit_suffixes[i])) {
			snprintf(buf, cap, "%.*s", (int)(n - strlen(unit_suffixes[i])), p->name);
			return buf;
		}
	}
	return NULL;
}

/* Does p take a unit in its own key (mtu: 4K)? Those with a dimension whose name names no
 * unit: neither an alias nor "_bytes" (hdr_bytes stays a bare number of bytes). */
static bool own_units(const struct param *p)
{
	char a[PARAM_NAME_MAX];
	uint64_t per;
	return param_dim(p, &per) >= 0 && !param_alias(p, a, sizeof(a)) &&
		!ends_with(p->name, "_bytes");
}

const struct param *param_find_key(enum param_scope scope, const char *name, bool *alias)
{
	char a[PARAM_NAME_MAX];
	*alias = false;
	const struct param *p = param_find(scope, name);
	for (int i = 0; i < param_count && !p; i++) {
		const struct param *q = &param_table[i];
		if (q->scope == scope && param_alias(q, a, sizeof(a)) && !strcmp(a, name)) {
			*alias = true;
			p = q;
		}
	}
	return p;
}

/* ---- raw field access ----------------------------------------------------- */

static void *fld(const struct param *p, const void *obj)
{
	return (char *)obj + p->offset;
}

uint64_t param_get_u64(const struct param *p, const void *obj)
{
	uint32_t u32;
	uint64_t u64;
	switch (p->type) {
	case PARAM_REAL:
	case PARAM_TABLE:
		return 0;
	default:
		break;
	}
	if (p->size == 4) {
		memcpy(&u32, fld(p, obj), 4);
		return u32;
	}
	memcpy(&u64, fld(p, obj), 8);
	return u64;
}

static void set_u64(const struct param *p, void *obj, uint64_t v)
{
	if (p->size == 4) {
		uint32_t u32 = (uint32_t)v;
		memcpy(fld(p, obj), &u32, 4);
	} else {
		memcpy(fld(p, obj), &v, 8);
	}
}

double param_get_real(const struct param *p, const void *obj)
{
	double d = 0;
	if (p->type == PARAM_REAL)
		memcpy(&d, fld(p, obj), sizeof(d));
	return d;
}

static void get_table(const struct param *p, const void *obj, const int64_t **v, int *n)
{
	memcpy(v, fld(p, obj), sizeof(*v));
	memcpy(n, (const char *)obj + p->offset2, sizeof(*n));
}

void param_copy(const struct param *p, void *dst, const void *src)
{
	memcpy((char *)dst + p->offset, (const char *)src + p->offset, p->size);
	if (p->type == PARAM_TABLE)
		memcpy((char *)dst + p->offset2, (const char *)src + p->offset2, sizeof(int));
}

void param_set_default(const struct param *p, void *obj)
{
	if (p->type == PARAM_TABLE) {
		const int64_t *none = NULL;
		int zero = 0;
		memcpy(fld(p, obj), &none, sizeof(none));
		memcpy((char *)obj + p->offset2, &zero, sizeof(zero));
	} else if (p->type == PARAM_REAL) {
		double d = (double)p->def / 1e6;
		memcpy(fld(p, obj), &d, sizeof(d));
	} else {
		set_u64(p, obj, (uint64_t)p->def);
	}
}

static void set_zero(const struct param *p, void *obj)
{
	double zero = 0;
	if (p->type == PARAM_TABLE)
		param_set_default(p, obj); /* no table */
	else if (p->type == PARAM_REAL)
		memcpy(fld(p, obj), &zero, sizeof(zero));
	else
		set_u64(p, obj, 0);
}

void param_group_defaults(const struct param *sel, void *obj)
{
	/* Members share fields across kinds (loss.r and loss.p31 are both p[1]): clear them
	 * all, then set the defaults of those that apply to the selector's value. */
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope == sel->scope && p->group == sel->group && p != sel)
			set_zero(p, obj);
	}
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope == sel->scope && p->group == sel->group && p != sel &&
		    param_applies(p, obj))
			param_set_default(p, obj);
	}
}

void param_defaults(enum param_scope scope, void *obj)
{
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope == scope && (p->group == PARAM_G_NONE || (p->flags & PARAM_SELECTOR)))
			param_set_default(p, obj);
	}
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope == scope && (p->flags & PARAM_SELECTOR))
			param_group_defaults(p, obj);
	}
}

bool param_applies(const struct param *p, const void *obj)
{
	if (p->group == PARAM_G_NONE || (p->flags & PARAM_SELECTOR))
		return true;
	const struct param *sel = param_selector(p);
	uint64_t v = sel ? param_get_u64(sel, obj) : 0;
	return v < 32 && ((p->kinds >> v) & 1u);
}

/* ---- decimal numbers -------------------------------------------------------- */

/* The whole of s as a decimal: 0; -EINVAL (syntax, or more after it); -ERANGE (more than 19
 * significant digits). */
static int dec_parse(const char *s, struct units_dec *d)
{
	const char *end;
	int rc = units_dec_parse(s, d, &end);
	return rc == -EINVAL || *end ? -EINVAL : rc;
}

/* A probability's fraction of 2^32 (rounded; 1 saturates to 2^32-1). -EINVAL: outside
 * 0..1; -ERANGE: nonzero but rounds to 0. */
static int dec_to_prob(const struct units_dec *d, uint32_t *out)
{
	if (d->m == 0) {
		*out = 0;
		return 0;
	}
	if (d->neg || d->e > 0)
		return -EINVAL;
	if (-d->e > 38)
		return -ERANGE;
	unsigned __int128 q = 1, m = d->m;
	for (int i = 0; i < -d->e; i++)
		q *= 10;
	if (m > q)
		return -EINVAL;
	unsigned __int128 f = ((m << 32) + q / 2) / q;
	if (f == 0)
		return -ERANGE;
	*out = f >= ((unsigned __int128)1 << 32) ? 0xffffffffu : (uint32_t)f;
	return 0;
}

/* ---- formatting -------------------------------------------------------------- */

/* An integer scaled by 10^-places, trailing zeros trimmed: 12500000000 @9 -> "12.5". */
static int fmt_fixed(uint64_t v, int places, char *buf, size_t cap)
{
	uint64_t div = 1;
	for (int i = 0; i < places; i++)
		div *= 10;
	uint64_t ip = v / div, fp = v % div;
	if (!fp)
		return snprintf(buf, cap, "%llu", (unsigned long long)ip);
	char frac[24];
	snprintf(frac, sizeof(frac), "%0*llu", places, (unsigned long long)fp);
	size_t n = strlen(frac);
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = 0;
	return snprintf(buf, cap, "%llu.%s", (unsigned long long)ip, frac);
}

static int fmt_prob(uint32_t f, char *buf, size_t cap)
{
	char tmp[40];
	double x = f == 0xffffffffu ? 1.0 : (double)f / 4294967296.0;
	for (int prec = 1; prec <= 17; prec++) {
		struct units_dec d;
		uint32_t back;
		snprintf(tmp, sizeof(tmp), "%.*g", prec, x);
		if (dec_parse(tmp, &d) == 0 && dec_to_prob(&d, &back) == 0 && back == f)
			break;
	}
	return snprintf(buf, cap, "%s", tmp);
}

static int fmt_real(double x, char *buf, size_t cap)
{
	char tmp[40];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(tmp, sizeof(tmp), "%.*g", prec, x);
		if (strtod(tmp, NULL) == x)
			break;
	}
	return snprintf(buf, cap, "%s", tmp);
}

int param_format_value(const struct param *p, int64_t v, char *buf, size_t cap)
{
	switch (p->type) {
	case PARAM_INT:
		return snprintf(buf, cap, "%lld", (long long)v);
	case PARAM_U64:
		return snprintf(buf, cap, "%llu", (unsigned long long)(uint64_t)v);
	case PARAM_RATE:
		return fmt_fixed((uint64_t)v, 9, buf, cap);
	case PARAM_PPM:
		return fmt_fixed((uint64_t)v, 6, buf, cap);
	case PARAM_PROB:
		return fmt_prob((uint32_t)v, buf, cap);
	case PARAM_REAL:
		return fmt_real((double)v / 1e6, buf, cap);
	case PARAM_ENUM: {
		int n = 0;
		while (p->names[n])
			n++;
		return snprintf(buf, cap, "%s", v >= 0 && v < n ? p->names[v] : "?");
	}
	case PARAM_TABLE:
		return snprintf(buf, cap, "%lld", (long long)v);
	}
	return snprintf(buf, cap, "?");
}

int param_format(const struct param *p, const void *obj, char *buf, size_t cap)
{
	if (p->type == PARAM_REAL)
		return fmt_real(param_get_real(p, obj), buf, cap);
	if (p->type == PARAM_ENUM) {
		char name[PARAM_VALUE_MAX];
		param_format_value(p, (int64_t)param_get_u64(p, obj), name, sizeof(name));
		return snprintf(buf, cap, "\"%s\"", name);
	}
	if (p->type == PARAM_TABLE) {
		const int64_t *v;
		int n;
		size_t len = 0;
		get_table(p, obj, &v, &n);
		/* snprintf-like: buf may be NULL (cap 0) to learn the length. */
#define AT (buf && len < cap ? buf + len : NULL), (buf && len < cap ? cap - len : 0)
		len += (size_t)snprintf(AT, "[");
		for (int i = 0; i < n; i++)
			len += (size_t)snprintf(AT, "%s%lld", i ? "," : "", (long long)v[i]);
		len += (size_t)snprintf(AT, "]");
#undef AT
		return (int)len;
	}
	return param_format_value(p, (int64_t)param_get_u64(p, obj), buf, cap);
}

/* ---- parsing and checking ---------------------------------------------------- */

const char *param_quote(const char *s, char *out, size_t cap)
{
	return units_quote(s, out, cap);
}

static void range_text(const struct param *p, char *buf, size_t cap)
{
	char a[PARAM_VALUE_MAX], b[PARAM_VALUE_MAX];
	if (p->type == PARAM_U64) {
		snprintf(buf, cap, "0..18446744073709551615");
		return;
	}
	if (p->type == PARAM_ENUM) {
		size_t len = 0;
		buf[0] = 0;
		for (int i = 0; p->names[i] && len < cap; i++)
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
						p->names[i]);
		return;
	}
	param_format_value(p, p->min, a, sizeof(a));
	param_format_value(p, p->max, b, sizeof(b));
	snprintf(buf, cap, "%s%s..%s", (p->flags & PARAM_ZERO_OK) && p->min > 0 ? "0, " : "", a, b);
}

static int bad_value(const struct param *p, const char *shown, char *err, size_t errlen)
{
	char q[80], r[160];
	param_quote(shown, q, sizeof(q));
	range_text(p, r, sizeof(r));
	switch (p->type) {
	case PARAM_INT:
		snprintf(err, errlen, "'%s' is not an integer in %s%s%s%s", q, r,
			 *p->unit ? " (" : "", p->unit, *p->unit ? ")" : "");
		break;
	case PARAM_U64:
		snprintf(err, errlen, "'%s' is not an integer in %s (decimal, or hex with 0x)", q, r);
		break;
	case PARAM_RATE:
		snprintf(err, errlen,
			 "'%s' is not a rate in %s Gb/s (%sa decimal, at most 9 places)", q,
			 strncmp(r, "0, ", 3) ? r : r + 3,
			 (p->flags & PARAM_ZERO_OK) ? "or 0: unlimited; " : "");
		break;
	case PARAM_PROB:
		snprintf(err, errlen, "'%s' is not a probability in 0..1 (like 0.001, 1e-6 or 0.1%%)",
			 q);
		break;
	case PARAM_PPM:
		snprintf(err, errlen, "'%s' is not a fraction in %s (at most 6 decimal places)", q, r);
		break;
	case PARAM_REAL:
		snprintf(err, errlen, "'%s' is not a number in %s", q, r);
		break;
	case PARAM_ENUM:
		snprintf(err, errlen, "'%s' is not one of %s", q, r);
		break;
	case PARAM_TABLE:
		snprintf(err, errlen, "'%s' is not a list of integers in %s (%s)", q, r, p->unit);
		break;
	}
	return -EINVAL;
}

static int parse_hex_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return -EINVAL;
		if (v >> 60)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

/* v (base units of dim) as p's stored value into obj: 0, or -EINVAL naming text and the range in
 * units. */
static int set_united(const struct param *p, int dim, uint64_t per, const char *text, uint64_t v,
		      void *obj, char *err, size_t errlen)
{
	char q[80], a[PARAM_VALUE_MAX], b[PARAM_VALUE_MAX];
	uint64_t x = v / per;
	bool zero_ok = (p->flags & PARAM_ZERO_OK) != 0;
	if (v % per) {
		snprintf(err, errlen, "'%s' is not a whole number of %s",
			 param_quote(text, q, sizeof(q)), p->unit);
		return -EINVAL;
	}
	if (x > (uint64_t)INT64_MAX ||
	    (((int64_t)x < p->min || (int64_t)x > p->max) && !(x == 0 && zero_ok))) {
		units_format((enum units_dim)dim, (uint64_t)p->min * per, a, sizeof(a));
		units_format((enum units_dim)dim, (uint64_t)p->max * per, b, sizeof(b));
		snprintf(err, errlen, "'%s' is not %s in %s..%s%s", param_quote(text, q, sizeof(q)),
			 units_dim_name((enum units_dim)dim), a, b,
			 zero_ok && p->min > 0 ? " (or 0: unlimited)" : "");
		return -EINVAL;
	}
	set_u64(p, obj, x);
	return 0;
}

int param_parse_unit(const struct param *p, const char *text, void *obj, char *err, size_t errlen)
{
	uint64_t per, v;
	int dim = param_dim(p, &per);
	if (dim < 0)
		return param_parse(p, text, obj, err, errlen);
	if (units_parse(text, (enum units_dim)dim, UNITS_BARE_ZERO, &v, err, errlen))
		return -EINVAL;
	return set_united(p, dim, per, text, v, obj, err, errlen);
}

int param_parse(const struct param *p, const char *text, void *obj, char *err, size_t errlen)
{
	struct units_dec d;
	uint64_t u = 0;
	int rc;
	switch (p->type) {
	case PARAM_ENUM:
		for (int i = 0; p->names[i]; i++) {
			if (strcmp(p->names[i], text) == 0 && i >= p->min && i <= p->max) {
				set_u64(p, obj, (uint64_t)i);
				return 0;
			}
		}
		return bad_value(p, text, err, errlen);
	case PARAM_TABLE:
		return bad_value(p, text, err, errlen);
	case PARAM_U64:
		if ((text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))) {
			if (parse_hex_u64(text + 2, &u))
				return bad_value(p, text, err, errlen);
		} else {
			/* Plain digits: all 20 of UINT64_MAX are significant here. */
			const char *c = text;
			if (!*c)
				return bad_value(p, text, err, errlen);
			for (; *c; c++) {
				unsigned dig = (unsigned)(*c - '0');
				if (*c < '0' || *c > '9' || u > (UINT64_MAX - dig) / 10)
					return bad_value(p, text, err, errlen);
				u = u * 10 + dig;
			}
		}
		set_u64(p, obj, u);
		return 0;
	case PARAM_REAL: {
		if (dec_parse(text, &d) || d.pct)
			return bad_value(p, text, err, errlen);
		double x = strtod(text, NULL);
		if (!(x >= (double)p->min / 1e6 && x <= (double)p->max / 1e6))
			return bad_value(p, text, err, errlen);
		memcpy(fld(p, obj), &x, sizeof(x));
		return 0;
	}
	case PARAM_PROB: {
		uint32_t f;
		rc = dec_parse(text, &d);
		if (!rc)
			rc = dec_to_prob(&d, &f);
		if (rc == -ERANGE && d.m != 0 && !d.neg) {
			char q[80];
			snprintf(err, errlen,
				 "'%s' is below the resolution of probabilities (2^-32, about "
				 "2.3e-10)",
				 param_quote(text, q, sizeof(q)));
			return -EINVAL;
		}
		if (rc || f < p->min || f > p->max)
			return bad_value(p, text, err, errlen);
		set_u64(p, obj, f);
		return 0;
	}
	case PARAM_INT:
	case PARAM_RATE:
	case PARAM_PPM: {
		int k = p->type == PARAM_RATE ? 9 : p->type == PARAM_PPM ? 6 : 0;
		uint64_t per;
		int dim = param_dim(p, &per);
		if (own_units(p) && dec_parse(text, &d) &&
		    !units_parse(text, (enum units_dim)dim, UNITS_BARE, &u, err, errlen))
			return set_united(p, dim, per, text, u, obj, err, errlen); /* mtu: 4KiB */
		if (dec_parse(text, &d) || d.pct || units_dec_scale(&d, k, &u) ||
		    u > (uint64_t)INT64_MAX)
			return bad_value(p, text, err, errlen);
		int64_t x = d.neg ? -(int64_t)u : (int64_t)u;
		if ((x < p->min || x > p->max) && !(x == 0 && (p->flags & PARAM_ZERO_OK)))
			return bad_value(p, text, err, errlen);
		set_u64(p, obj, (uint64_t)x);
		return 0;
	}
	}
	return bad_value(p, text, err, errlen);
}

int param_set_table(const struct param *p, void *obj, const int64_t *v, int n, char *err,
		    size_t errlen)
{
	if (p->type != PARAM_TABLE) {
		snprintf(err, errlen, "not a list parameter");
		return -EINVAL;
	}
	if (n < 1 || n > MODEL_TABLE_MAX) {
		snprintf(err, errlen, "a table has 1..%d entries, not %d", MODEL_TABLE_MAX, n);
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		if (v[i] < p->min || v[i] > p->max) {
			snprintf(err, errlen, "entry %d (%lld) is not in %lld..%lld (%s)", i + 1,
				 (long long)v[i], (long long)p->min, (long long)p->max, p->unit);
			return -EINVAL;
		}
		if (i && v[i] < v[i - 1]) {
			snprintf(err, errlen,
				 "entry %d (%lld) is below entry %d (%lld): the quantiles of an "
				 "inverse CDF never decrease",
				 i + 1, (long long)v[i], i, (long long)v[i - 1]);
			return -EINVAL;
		}
	}
	memcpy(fld(p, obj), &v, sizeof(v));
	memcpy((char *)obj + p->offset2, &n, sizeof(n));
	return 0;
}

int param_check(const struct param *p, const void *obj, char *err, size_t errlen)
{
	char shown[PARAM_VALUE_MAX];
	switch (p->type) {
	case PARAM_U64:
		return 0;
	case PARAM_TABLE: {
		const int64_t *v;
		int n;
		get_table(p, obj, &v, &n);
		if (n == 0 && !v)
			return 0;
		return param_set_table(p, (void *)obj, v, n, err, errlen);
	}
	case PARAM_REAL: {
		double x = param_get_real(p, obj);
		if (x >= (double)p->min / 1e6 && x <= (double)p->max / 1e6)
			return 0;
		fmt_real(x, shown, sizeof(shown));
		return bad_value(p, shown, err, errlen);
	}
	default: {
		uint64_t u = param_get_u64(p, obj);
		int64_t x = u > (uint64_t)INT64_MAX ? -1 : (int64_t)u; /* never in range */
		if ((x >= p->min && x <= p->max) || (x == 0 && (p->flags & PARAM_ZERO_OK)))
			return 0;
		if (p->type == PARAM_ENUM)
			snprintf(shown, sizeof(shown), "%lld", (long long)x);
		else
			param_format_value(p, x, shown, sizeof(shown));
		return bad_value(p, shown, err, errlen);
	}
	}
}

/* ---- the table for people ------------------------------------------------------ */

static const char *type_name(const struct param *p)
{
	switch (p->type) {
	case PARAM_INT:
	case PARAM_U64:
		return "integer";
	case PARAM_RATE:
		return "rate";
	case PARAM_PROB:
		return "probability";
	case PARAM_PPM:
		return "fraction";
	case PARAM_REAL:
		return "number";
	case PARAM_ENUM:
		return "enum";
	case PARAM_TABLE:
		return "list";
	}
	return "?";
}

/* When p applies: "loss.model ge, 4state", "kind ideal", or "". */
static void when_text(const struct param *p, char *buf, size_t cap)
{
	buf[0] = 0;
	if (p->flags & PARAM_IDEAL_ONLY) {
		snprintf(buf, cap, "kind ideal");
		return;
	}
	if (p->flags & PARAM_EXPLICIT_ONLY) {
		snprintf(buf, cap, "kind explicit");
		return;
	}
	const struct param *sel = param_selector(p);
	if (!sel || sel == p)
		return;
	size_t len = (size_t)snprintf(buf, cap, "%s", sel->name);
	for (int v = 0, first = 1; sel->names[v] && len < cap; v++) {
		if (!((p->kinds >> v) & 1u))
			continue;
		len += (size_t)snprintf(buf + len, cap - len, "%s%s", first ? " " : ", ",
					sel->names[v]);
		first = 0;
	}
	if ((p->flags & PARAM_REQUIRED) && len < cap)
		snprintf(buf + len, cap - len, " (required)");
}

static void default_text(const struct param *p, char *buf, size_t cap)
{
	if (p->type == PARAM_TABLE)
		snprintf(buf, cap, "-");
	else
		param_format_value(p, p->def, buf, cap);
}

/* The units column: "ns; `latency: 5us`", "B; or 4KiB", or the stored unit alone. */
static void unit_text(const struct param *p, char *buf, size_t cap)
{
	static const char *const examples[UNITS_NDIMS] = {"5us", "4K", "25gbit"};
	char a[PARAM_NAME_MAX];
	uint64_t per;
	int dim = param_dim(p, &per);
	if (dim >= 0 && param_alias(p, a, sizeof(a)))
		snprintf(buf, cap, "%s; `%s: %s`", p->unit, a, examples[dim]);
	else if (own_units(p))
		snprintf(buf, cap, "%s; or `%s`", p->unit, examples[dim]);
	else if (p->type == PARAM_TABLE && !strcmp(p->unit, "ns"))
		snprintf(buf, cap, "%s; or `%s`", p->unit, examples[UNITS_TIME]);
	else
		snprintf(buf, cap, "%s", p->unit);
}

static const char *const scope_where[PARAM_NSCOPES] = {
	"the `fabric:` map (`seed:` at the top level)",
	"`fabric.defaults.link`, a `fabric.links` entry, its `a_to_b` / `b_to_a`",
	"`fabric.defaults.nic`, a `fabric.nodes` entry's `nic`",
	"`fabric.defaults.switch`, a `fabric.switches` entry",
};

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

int param_dump(FILE *out, const char *format)
{
	char def[PARAM_VALUE_MAX], range[160], when[160], unit[80], alias[PARAM_NAME_MAX];
	if (strcmp(format, "markdown") == 0) {
		for (int s = 0; s < PARAM_NSCOPES; s++) {
			fprintf(out, "%s#### %s parameters\n\nIn %s.\n\n", s ? "\n" : "",
				scope_names[s], scope_where[s]);
			fprintf(out, "| key | type | unit | default | range | when | runtime | "
				     "meaning |\n|---|---|---|---|---|---|---|---|\n");
			for (int i = 0; i < param_count; i++) {
				const struct param *p = &param_table[i];
				if ((int)p->scope != s)
					continue;
				default_text(p, def, sizeof(def));
				range_text(p, range, sizeof(range));
				when_text(p, when, sizeof(when));
				unit_text(p, unit, sizeof(unit));
				fprintf(out, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n",
					p->name, type_name(p), unit, def, range, when,
					(p->flags & PARAM_RUNTIME) ? "yes" : "no", p->doc);
			}
		}
		return 0;
	}
	if (strcmp(format, "json") == 0) {
		fprintf(out, "[");
		for (int i = 0; i < param_count; i++) {
			const struct param *p = &param_table[i];
			fprintf(out, "%s\n  {\"name\": ", i ? "," : "");
			json_str(out, p->name);
			fprintf(out, ", \"scope\": \"%s\", \"type\": \"%s\", \"unit\": ",
				scope_names[p->scope], type_name(p));
			json_str(out, p->unit);
			fprintf(out, ", \"alias\": ");
			if (param_alias(p, alias, sizeof(alias)))
				json_str(out, alias);
			else
				fprintf(out, "null");
			default_text(p, def, sizeof(def));
			range_text(p, range, sizeof(range));
			when_text(p, when, sizeof(when));
			fprintf(out, ", \"default\": ");
			json_str(out, def);
			fprintf(out, ", \"range\": ");
			json_str(out, range);
			fprintf(out, ", \"when\": ");
			json_str(out, when);
			fprintf(out, ", \"runtime\": %s, \"doc\": ",
				(p->flags & PARAM_RUNTIME) ? "true" : "false");
			json_str(out, p->doc);
			fprintf(out, "}");
		}
		fprintf(out, "\n]\n");
		return 0;
	}
	return -EINVAL;
}
