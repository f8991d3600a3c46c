/* SPDX-License-Identifier: MIT */
/*
 * yaml.c - the scenario loader's library (scn_int.h): first-error reporting,
 * the YAML tree helpers and typed values (names, numbers, times, sizes, word
 * lists), the fabric's places by name, and parameter maps into
 * layers. scenario.c's fabric walk, faults.c and job.c call it; it calls none
 * of them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "sim/scn/param.h"
#include "sim/scn/scn_int.h"
#include "sim/scn/units.h"

/* ---- errors ------------------------------------------------------------------------ */

__attribute__((format(printf, 5, 6))) int scn_fail_at(struct scn *s, int line, int col,
							  const char *key, const char *fmt, ...)
{
	if (s->rc)
		return s->rc;
	char k[80], kq[80];
	param_quote(key, k, sizeof(k));
	/* A key that is not a plain word (a space, a colon, nothing) is shown quoted. */
	if (!*key || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/") !=
			     strlen(key)) {
		size_t o = 0;
		kq[o++] = '\'';
		for (const char *c = k; *c && o + 6 < sizeof(kq); c++) {
			if (*c == '\'') {
				memcpy(kq + o, "\\x27", 4); /* keep the quoting unambiguous */
				o += 4;
			} else {
				kq[o++] = *c;
			}
		}
		kq[o++] = '\'';
		kq[o] = 0;
		memcpy(k, kq, o + 1 < sizeof(k) ? o + 1 : sizeof(k));
		k[sizeof(k) - 1] = 0;
	}
	int n = snprintf(s->err, s->errlen, "%s:%d:%d: %s: ", s->file, line, col, k);
	if (n >= 0 && (size_t)n < s->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	s->rc = -EINVAL;
	return s->rc;
}


/* A model check's "key: reason" at node, the key split off (else dflt is the key). */
int scn_fail_model(struct scn *s, const yaml_node_t *at, const char *dflt, const char *why,
		      const char *suffix)
{
	size_t k = strspn(why, "abcdefghijklmnopqrstuvwxyz0123456789_.");
	if (k > 0 && k < 40 && why[k] == ':' && why[k + 1] == ' ') {
		char key[40];
		memcpy(key, why, k);
		key[k] = 0;
		return scn_fail(s, at, key, "%s%s", why + k + 2, suffix);
	}
	return scn_fail(s, at, dflt, "%s%s", why, suffix);
}

int scn_fail_oom(struct scn *s)
{
	if (!s->rc) {
		snprintf(s->err, s->errlen, "%s: out of memory", s->file);
		s->rc = -ENOMEM;
	}
	return s->rc;
}

/* ---- tree helpers -------------------------------------------------------------------- */

yaml_node_t *scn_node(struct scn *s, int id)
{
	return yaml_document_get_node(&s->doc, id);
}

const char *scn_text(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

bool scn_is_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *t = scn_text(n);
	return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") ||
	       !strcmp(t, "NULL");
}

const char *scn_kind_name(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a sequence";
	default:
		return scn_is_null(n) ? "nothing (null)" : "a scalar";
	}
}

int scn_expect(struct scn *s, const yaml_node_t *n, yaml_node_type_t type, const char *key,
		  const char *what)
{
	if (n->type == type && !(type == YAML_SCALAR_NODE && scn_is_null(n))) {
		if (type == YAML_SCALAR_NODE && strlen(scn_text(n)) != n->data.scalar.length)
			return scn_fail(s, n, key, "the value has a NUL byte");
		return 0;
	}
	if (n->type == YAML_SCALAR_NODE && !scn_is_null(n)) {
		char q[80];
		return scn_fail(s, n, key, "expected %s, got the scalar '%s'", what,
			    param_quote(scn_text(n), q, sizeof(q)));
	}
	return scn_fail(s, n, key, "expected %s, got %s", what, scn_kind_name(n));
}

/* Pair i of mapping m: its key's text (checked: a plain scalar, not a repeat of an earlier one). */
int scn_pair_key(struct scn *s, const yaml_node_t *m, int i, const char **name,
		    yaml_node_t **k, yaml_node_t **v)
{
	yaml_node_pair_t *pairs = m->data.mapping.pairs.start;
	*k = scn_node(s, pairs[i].key);
	*v = scn_node(s, pairs[i].value);
	if (!*k || !*v)
		return scn_fail(s, m, "yaml", "a mapping entry without a key or value");
	if ((*k)->type != YAML_SCALAR_NODE || strlen(scn_text(*k)) != (*k)->data.scalar.length)
		return scn_fail(s, *k, "yaml", "keys are plain words, not %s", scn_kind_name(*k));
	*name = scn_text(*k);
	if (!**name)
		return scn_fail(s, *k, "yaml", "an empty key");
	for (int j = 0; j < i; j++) {
		yaml_node_t *o = scn_node(s, pairs[j].key);
		if (o && o->type == YAML_SCALAR_NODE && strcmp(scn_text(o), *name) == 0)
			return scn_fail(s, *k, *name, "duplicate key (first at %d:%d)",
				    (int)o->start_mark.line + 1, (int)o->start_mark.column + 1);
	}
	return 0;
}

int scn_npairs(const yaml_node_t *m)
{
	return (int)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
}

int scn_get_keys(struct scn *s, const yaml_node_t *m, const char *what, const struct scn_key *keys,
		 int n)
{
	for (int i = 0; i < scn_npairs(m); i++) {
		const char *name;
		yaml_node_t *k, *v;
		if (scn_pair_key(s, m, i, &name, &k, &v))
			return s->rc;
		int j = 0;
		bool alias = false;
		for (; j < n; j++) {
			if (!strcmp(keys[j].name, name))
				break;
			size_t len = strlen(keys[j].name);
			alias = len > 2 && !strcmp(keys[j].name + len - 2, "_s") &&
				strlen(name) == len - 2 && !strncmp(keys[j].name, name, len - 2);
			if (alias)
				break;
		}
		if (j < n &&
		    (alias || (strlen(name) > 2 && !strcmp(name + strlen(name) - 2, "_s")))) {
			/* timeout_s: 10 or timeout: 10s; not both. */
			char other[64];
			if (alias)
				snprintf(other, sizeof(other), "%s", keys[j].name);
			else
				snprintf(other, sizeof(other), "%.*s", (int)strlen(name) - 2, name);
			for (int i2 = 0; i2 < i; i2++) {
				yaml_node_t *o = scn_node(s, m->data.mapping.pairs.start[i2].key);
				if (o && o->type == YAML_SCALAR_NODE && !strcmp(scn_text(o), other))
					return scn_fail(s, k, name,
							"%s is given too: two spellings of one "
							"parameter, keep one (%s takes a unit, "
							"%s a bare number in seconds)",
							other, alias ? name : other,
							alias ? other : name);
			}
		}
		if (j < n) {
			*keys[j].val = v;
			if (keys[j].key)
				*keys[j].key = k;
			continue;
		}
		char list[512];
		size_t len = 0;
		for (j = 0; j < n && len < sizeof(list); j++)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", j ? ", " : "",
						keys[j].name);
		return scn_fail(s, k, name, "unknown key in %s (known: %s)", what, list);
	}
	return 0;
}

int scn_nitems(const yaml_node_t *q)
{
	return (int)(q->data.sequence.items.top - q->data.sequence.items.start);
}

yaml_node_t *scn_item(struct scn *s, const yaml_node_t *q, int i)
{
	return scn_node(s, q->data.sequence.items.start[i]);
}

/* A strict integer in min..max (decimal digits, optional '-' if min < 0). */
int scn_get_int(struct scn *s, const yaml_node_t *v, const char *key, int64_t min, int64_t max,
		   const char *unit, int64_t *out)
{
	char q[80];
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "an integer"))
		return s->rc;
	const char *t = scn_text(v), *p = t;
	bool neg = *p == '-';
	p += neg;
	uint64_t x = 0;
	bool ok = *p != 0;
	for (; *p && ok; p++) {
		if (*p < '0' || *p > '9' || x > (UINT64_MAX - 9) / 10)
			ok = false;
		else
			x = x * 10 + (uint64_t)(*p - '0');
	}
	if (ok && x <= (uint64_t)INT64_MAX) {
		int64_t y = neg ? -(int64_t)x : (int64_t)x;
		if (y >= min && y <= max) {
			*out = y;
			return 0;
		}
	}
	return scn_fail(s, v, key, "'%s' is not an integer in %lld..%lld%s%s%s", param_quote(t, q, sizeof(q)),
		    (long long)min, (long long)max, *unit ? " (" : "", unit, *unit ? ")" : "");
}

/* ---- values ----------------------------------------------------------------------------- */

/* Item i of sequence v (NULL, the error recorded, if the document lacks it). */
yaml_node_t *scn_get_item(struct scn *s, const yaml_node_t *v, int i, const char *key)
{
	yaml_node_t *e = scn_item(s, v, i);
	if (!e)
		scn_fail(s, v, key, "a missing entry");
	return e;
}

/* One of names (NULL-terminated): its index. */
int scn_get_enum(struct scn *s, const yaml_node_t *v, const char *key,
		    const char *const *names, int *out)
{
	char q[80], list[256];
	size_t len = 0;
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a name"))
		return s->rc;
	for (int i = 0; names[i]; i++) {
		if (!strcmp(scn_text(v), names[i])) {
			*out = i;
			return 0;
		}
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
					names[i]);
		if (len >= sizeof(list))
			len = sizeof(list) - 1;
	}
	return scn_fail(s, v, key, "'%s' is not one of %s", param_quote(scn_text(v), q, sizeof(q)), list);
}

/* A decimal number of seconds (or a ratio) in min..max: digits, an optional fraction. */
int scn_get_decimal(struct scn *s, const yaml_node_t *v, const char *key, double min,
		       double max, const char *unit, double *out)
{
	char q[80];
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a number"))
		return s->rc;
	const char *t = scn_text(v);
	size_t i = strspn(t, "0123456789");
	bool ok = i > 0 && i < 16;
	if (ok && t[i] == '.') {
		size_t f = strspn(t + i + 1, "0123456789");
		ok = f > 0 && f <= 9;
		i += 1 + f;
	}
	ok = ok && !t[i];
	double x = ok ? strtod(t, NULL) : 0;
	if (!ok || x < min || x > max)
		return scn_fail(s, v, key, "'%s' is not a number in %g..%g%s%s%s (like 2 or 0.5)",
				param_quote(scn_text(v), q, sizeof(q)), min, max, *unit ? " (" : "", unit,
				*unit ? ")" : "");
	*out = x;
	return 0;
}

/*
 * A time in seconds under key full ("bound_s": a decimal, scn_get_decimal) or, when the key node k
 * says so, its alias without "_s" ("bound": a time with a unit, "500ms"; sim/scn/units.h). whole:
 * only whole seconds (timeout_s).
 */
int scn_get_seconds(struct scn *s, const yaml_node_t *k, const yaml_node_t *v, const char *full,
		       double min, double max, bool whole, double *out)
{
	char why[PARAM_ERR_LEN], q[80];
	uint64_t ns;
	if (!k || !strcmp(scn_text(k), full)) {
		if (!whole)
			return scn_get_decimal(s, v, full, min, max, "seconds", out);
		int64_t i;
		if (scn_get_int(s, v, full, (int64_t)min, (int64_t)max, "seconds", &i))
			return s->rc;
		*out = (double)i;
		return 0;
	}
	const char *key = scn_text(k);
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a time with a unit, like 500ms or 2s"))
		return s->rc;
	if (units_parse(scn_text(v), UNITS_TIME, UNITS_BARE_ZERO, &ns, why, sizeof(why)))
		return scn_fail(s, v, key, "%s", why);
	if (whole && ns % 1000000000)
		return scn_fail(s, v, key, "'%s' is not a whole number of seconds",
				param_quote(scn_text(v), q, sizeof(q)));
	double x = (double)ns / 1e9;
	if (x < min || x > max) {
		char a[32], b[32];
		units_format(UNITS_TIME, (uint64_t)(min * 1e9 + 0.5), a, sizeof(a));
		units_format(UNITS_TIME, (uint64_t)(max * 1e9 + 0.5), b, sizeof(b));
		return scn_fail(s, v, key, "'%s' is not a time in %s..%s", param_quote(scn_text(v), q, sizeof(q)),
				a, b);
	}
	*out = x;
	return 0;
}

/* A byte count: "4096", "64K", "1MiB" (sim/scn/units.h: binary, K = KB = KiB = 1024). */
int scn_get_size(struct scn *s, const yaml_node_t *v, const char *key, uint64_t min,
		    uint64_t max, uint64_t *out)
{
	char q[80], why[PARAM_ERR_LEN];
	uint64_t x = 0;
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a size in bytes"))
		return s->rc;
	int rc = units_parse(scn_text(v), UNITS_SIZE, UNITS_BARE, &x, why, sizeof(why));
	if (rc && rc != -ERANGE)
		return scn_fail(s, v, key, "%s", why);
	if (rc || x < min || x > max)
		return scn_fail(s, v, key,
				"'%s' is not a size in %llu..%llu bytes (an integer, K, M, G suffixes "
				"allowed: 64K, 1M)",
				param_quote(scn_text(v), q, sizeof(q)), (unsigned long long)min, (unsigned long long)max);
	*out = x;
	return 0;
}

/* A list written as a YAML sequence of scalars or as one "a,b,c" scalar: calls fn per word. */
int scn_for_words(struct scn *s, const yaml_node_t *v, const char *key, scn_word_fn fn, void *ctx)
{
	if (v->type == YAML_SEQUENCE_NODE) {
		int n = scn_nitems(v);
		if (n < 1)
			return scn_fail(s, v, key, "an empty list");
		for (int i = 0; i < n; i++) {
			yaml_node_t *e = scn_get_item(s, v, i, key);
			if (!e || scn_expect(s, e, YAML_SCALAR_NODE, key, "a name") ||
			    fn(s, e, key, scn_text(e), ctx))
				return s->rc;
		}
		return 0;
	}
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, "a list like [a, b] or \"a,b\""))
		return s->rc;
	char *copy = strdup(scn_text(v)), *save = NULL;
	if (!copy)
		return scn_fail_oom(s);
	int any = 0;
	for (char *w = strtok_r(copy, ", ", &save); w; w = strtok_r(NULL, ", ", &save), any++)
		if (fn(s, v, key, w, ctx))
			break;
	free(copy);
	if (!s->rc && !any)
		return scn_fail(s, v, key, "an empty list");
	return s->rc;
}

/* ---- the fabric's places by name ----------------------------------------------------------- */

/* "node", "node or node/NIC", "node, node/NIC or switch", ...: the kinds accept allows. */
static const char *place_kinds(unsigned accept, char *buf, size_t cap)
{
	static const struct {
		unsigned bit;
		const char *name;
	} kinds[] = {
		{SCN_PLACE_NODE, "node"}, {SCN_PLACE_NIC, "node/NIC"}, {SCN_PLACE_SWITCH, "switch"}};
	const char *names[3];
	int n = 0;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (accept & kinds[i].bit)
			names[n++] = kinds[i].name;
	size_t len = 0;
	buf[0] = 0;
	for (int i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%s",
					!i ? "" : i == n - 1 ? " or " : ", ", names[i]);
	return buf;
}

/* "unknown node 'x' (the fabric's: node0, node1, ...)" */
static int fail_unknown(struct scn *s, const yaml_node_t *v, const char *key, const char *what)
{
	char list[256], q[80];
	size_t len = 0;
	int n = fabric_nnodes(s->f);
	for (int j = 0; j < n && len < sizeof(list) - 8; j++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", j ? ", " : "",
					fabric_node(s->f, j)->name);
	if (len >= sizeof(list) - 8)
		snprintf(list + sizeof(list) - 8, 8, ", ...");
	return scn_fail(s, v, key, "unknown %s '%s' (the fabric's: %s)", what,
			param_quote(scn_text(v), q, sizeof(q)), list);
}

int scn_get_place(struct scn *s, const yaml_node_t *v, const char *key, unsigned accept,
		  struct scn_place *out)
{
	char what[40], expect[48], q[80];
	place_kinds(accept, what, sizeof(what));
	snprintf(expect, sizeof(expect), "a %s name", what);
	*out = (struct scn_place){NULL, NULL, -1};
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, expect))
		return s->rc;
	const char *t = scn_text(v);
	if ((accept & SCN_PLACE_ANY) && (!strcmp(t, "any") || !strcmp(t, "*")))
		return 0;
	char name[FABRIC_NAME_MAX + 1];
	const char *slash = accept & SCN_PLACE_NIC ? strchr(t, '/') : NULL;
	if (accept & SCN_PLACE_NIC) {
		size_t len = slash ? (size_t)(slash - t) : strlen(t);
		if (len == 0 || len > FABRIC_NAME_MAX)
			return scn_fail(s, v, key, "'%s' is not a %s name",
					param_quote(t, q, sizeof(q)), what);
		memcpy(name, t, len);
		name[len] = 0;
		t = name;
	}
	const struct fabric_node *nd = accept & (SCN_PLACE_NODE | SCN_PLACE_NIC) ?
					       fabric_node_find(s->f, t) : NULL;
	if (nd && slash) {
		/* digits only: strtol alone would take " 1" and "+1" */
		const char *d = slash + 1;
		size_t nd_digits = strspn(d, "0123456789");
		long i = nd_digits && nd_digits <= 4 && !d[nd_digits] ? strtol(d, NULL, 10) : -1;
		if (i < 0 || i >= nd->nnics)
			return scn_fail(s, v, key, "'%s': node %s has NICs 0..%d",
					param_quote(scn_text(v), q, sizeof(q)), nd->name, nd->nnics - 1);
		out->node = nd;
		out->nic = (int)i;
		return 0;
	}
	if (nd && (accept & SCN_PLACE_NODE)) {
		out->node = nd;
		return 0;
	}
	const struct fabric_switch *sw = !slash && (accept & SCN_PLACE_SWITCH) ?
						 fabric_switch_find(s->f, t) : NULL;
	if (sw) {
		out->sw = sw;
		return 0;
	}
	if (accept & SCN_PLACE_LIST)
		return fail_unknown(s, v, key, what);
	return scn_fail(s, v, key, "'%s' is not a %s of this fabric",
			param_quote(scn_text(v), q, sizeof(q)), what);
}

/* ---- parameters ------------------------------------------------------------------------ */

void scn_layer_init(struct layer *l, enum param_scope scope, const void *base)
{
	memset(l, 0, sizeof(*l));
	size_t n = scope == PARAM_LINK	 ? sizeof(struct model_link)
		   : scope == PARAM_NIC	 ? sizeof(struct model_nic)
		   : scope == PARAM_SWITCH ? sizeof(struct fabric_switch_cfg)
					   : sizeof(struct fabric_config);
	memcpy(&l->v, base, n);
}

void scn_layer_apply(enum param_scope scope, void *dst, const struct layer *l)
{
	for (int i = 0; i < param_count; i++)
		if (param_table[i].scope == scope && ((l->set >> i) & 1u))
			param_copy(&param_table[i], dst, &l->v);
}

bool scn_layer_has(const struct layer *l, const struct param *p)
{
	return (l->set >> param_index(p)) & 1u;
}

/* "rate_gbps, latency_ns, ..., jitter, loss" for scope, after extra. */
static const char *known_keys(enum param_scope scope, const char *extra, char *buf, size_t cap)
{
	size_t len = (size_t)snprintf(buf, cap, "%s", extra);
	enum param_group last = PARAM_G_NONE;
	for (int i = 0; i < param_count && len < cap; i++) {
		const struct param *p = &param_table[i];
		if (p->scope != scope || (p->flags & PARAM_TOPLEVEL))
			continue;
		if (p->group != PARAM_G_NONE) {
			if (p->group == last)
				continue;
			last = p->group;
			len += (size_t)snprintf(buf + len, cap - len, "%s%.*s", len ? ", " : "",
						(int)(strchr(p->name, '.') - p->name), p->name);
		} else {
			len += (size_t)snprintf(buf + len, cap - len, "%s%s", len ? ", " : "",
						p->name);
		}
	}
	/* The aliases that take a unit: "; with a unit: rate, latency, reorder_delay". */
	for (int i = 0, first = 1; i < param_count && len < cap; i++) {
		const struct param *p = &param_table[i];
		char a[PARAM_NAME_MAX];
		if (p->scope != scope || (p->flags & PARAM_TOPLEVEL) || p->group != PARAM_G_NONE ||
		    !param_alias(p, a, sizeof(a)))
			continue;
		len += (size_t)snprintf(buf + len, cap - len, "%s%s",
					first ? "; with a unit: " : ", ", a);
		first = 0;
	}
	return buf;
}

/* The parameter of scope whose group is called name ("jitter"), as its selector. */
static const struct param *group_selector(enum param_scope scope, const char *name)
{
	size_t n = strlen(name);
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope == scope && (p->flags & PARAM_SELECTOR) && strncmp(p->name, name, n) == 0 &&
		    p->name[n] == '.')
			return p;
	}
	return NULL;
}

int scn_param_value(struct scn *s, const struct param *p, const char *key, bool alias,
		    const yaml_node_t *v, struct layer *l)
{
	char why[PARAM_ERR_LEN], what[80];
	uint64_t per;
	if (alias)
		snprintf(what, sizeof(what), "%s with a unit", units_dim_name(param_dim(p, &per)));
	else
		snprintf(what, sizeof(what), "%s %s", p->type == PARAM_ENUM ? "one of" : "a",
			 p->type == PARAM_ENUM		 ? "its names"
				 : p->type == PARAM_RATE ? "rate in Gb/s"
				 : p->type == PARAM_PROB ? "probability"
							 : "number");
	if (scn_expect(s, v, YAML_SCALAR_NODE, key, what))
		return s->rc;
	if ((alias ? param_parse_unit : param_parse)(p, scn_text(v), &l->v, why, sizeof(why))) {
		struct layer scratch = *l;
		char a[PARAM_NAME_MAX], why2[PARAM_ERR_LEN];
		const char *an = alias ? NULL : param_alias(p, a, sizeof(a));
		if (an && !param_parse_unit(p, scn_text(v), &scratch.v, why2, sizeof(why2)))
			return scn_fail(s, v, key, "%s; with a unit, write %s: %s", why,
					strchr(an, '.') ? strchr(an, '.') + 1 : an, scn_text(v));
		return scn_fail(s, v, key, "%s", why);
	}
	l->set |= 1ull << param_index(p);
	return 0;
}

int scn_param_scalar(struct scn *s, const struct param *p, const yaml_node_t *v, struct layer *l)
{
	return scn_param_value(s, p, p->name, false, v, l);
}

/* key spells p a second time in one map (latency beside latency_ns): the error. */
static int both_spellings(struct scn *s, const yaml_node_t *k, const struct param *p,
			  const char *key, bool alias)
{
	char a[PARAM_NAME_MAX];
	const char *named = param_leaf(p), *aliased = param_alias(p, a, sizeof(a));
	if (aliased && strchr(aliased, '.'))
		aliased = strchr(aliased, '.') + 1;
	return scn_fail(s, k, key,
			"%s is given too: two spellings of one parameter, keep one (%s "
			"takes a unit, %s a bare number in %s)",
			alias ? named : aliased, aliased, named, p->unit);
}

/* An entry of a table in ns (jitter.table): an integer of ns, or a time with a unit ("2us"). */
static int get_table_entry(struct scn *s, const struct param *p, const yaml_node_t *e, int64_t *out)
{
	char why[PARAM_ERR_LEN], q[80], b[32];
	uint64_t ns;
	if (e->type != YAML_SCALAR_NODE ||
	    strspn(scn_text(e), "-0123456789") == strlen(scn_text(e)))
		return scn_get_int(s, e, p->name, p->min, p->max, p->unit, out);
	if (units_parse(scn_text(e), UNITS_TIME, UNITS_BARE, &ns, why, sizeof(why)))
		return scn_fail(s, e, p->name, "%s", why);
	if (ns < (uint64_t)p->min || ns > (uint64_t)p->max) {
		units_format(UNITS_TIME, (uint64_t)p->max, b, sizeof(b));
		return scn_fail(s, e, p->name, "'%s' is not a time in 0..%s",
				param_quote(scn_text(e), q, sizeof(q)), b);
	}
	*out = (int64_t)ns;
	return 0;
}

static int parse_table(struct scn *s, const struct param *p, const yaml_node_t *v,
		       struct layer *l)
{
	char why[PARAM_ERR_LEN];
	if (scn_expect(s, v, YAML_SEQUENCE_NODE, p->name, "a list of times (ns, or 5us)"))
		return s->rc;
	int n = scn_nitems(v);
	if (n < 1 || n > MODEL_TABLE_MAX)
		return scn_fail(s, v, p->name, "a table has 1..%d entries, not %d", MODEL_TABLE_MAX, n);
	int64_t *t = malloc(sizeof(int64_t) * (size_t)n);
	if (!t || fabric_adopt(s->f, t))
		return scn_fail_oom(s);
	for (int i = 0; i < n; i++) {
		yaml_node_t *e = scn_item(s, v, i);
		if (!e)
			return scn_fail(s, v, p->name, "entry %d is missing", i + 1);
		if (get_table_entry(s, p, e, &t[i]))
			return s->rc;
	}
	if (param_set_table(p, &l->v, t, n, why, sizeof(why)))
		return scn_fail(s, v, p->name, "%s", why);
	l->set |= 1ull << param_index(p);
	return 0;
}

/* `loss: {model: ge, p: 0.01, r: 0.3}` (or `loss: none`): the whole group into l. */
static int parse_group(struct scn *s, const struct param *sel, const yaml_node_t *v,
		       struct layer *l)
{
	char gname[32], keys[256], q[80];
	snprintf(gname, sizeof(gname), "%.*s", (int)(strchr(sel->name, '.') - sel->name),
		 sel->name);
	const yaml_node_t *selv = v;
	if (v->type == YAML_MAPPING_NODE) {
		selv = NULL;
		for (int i = 0; i < scn_npairs(v); i++) {
			yaml_node_t *pk = scn_node(s, v->data.mapping.pairs.start[i].key);
			if (pk && pk->type == YAML_SCALAR_NODE && !strcmp(scn_text(pk), param_leaf(sel)))
				selv = scn_node(s, v->data.mapping.pairs.start[i].value);
		}
		if (!selv) {
			char r[128];
			size_t len = 0;
			for (int i = 0; sel->names[i] && len < sizeof(r); i++)
				len += (size_t)snprintf(r + len, sizeof(r) - len, "%s%s", i ? ", " : "",
							sel->names[i]);
			return scn_fail(s, v, gname, "missing key '%s' (one of %s)", param_leaf(sel), r);
		}
	} else if (v->type != YAML_SCALAR_NODE || scn_is_null(v)) {
		return scn_fail(s, v, gname, "expected a mapping like {%s: ...} or a %s name, got %s",
			    param_leaf(sel), param_leaf(sel), scn_kind_name(v));
	}
	/* netem's `loss 0.1%`: a bare probability is {model: bernoulli, p: 0.1%}. */
	const yaml_node_t *bare_p = NULL;
	const char *t0 = v->type == YAML_SCALAR_NODE ? scn_text(v) : "";
	if (sel->group == PARAM_G_LOSS && ((*t0 >= '0' && *t0 <= '9') || *t0 == '.')) {
		char why[PARAM_ERR_LEN];
		if (param_parse(sel, "bernoulli", &l->v, why, sizeof(why)))
			return scn_fail(s, v, gname, "%s", why);
		bare_p = v;
	} else if (scn_param_scalar(s, sel, selv, l)) {
		/* The selector, then the group's members for it at their defaults, then what is
		 * given; the whole group counts as set. */
		return s->rc;
	}
	param_group_defaults(sel, &l->v);
	for (int i = 0; i < param_count; i++)
		if (param_table[i].scope == sel->scope && param_table[i].group == sel->group)
			l->set |= 1ull << i;
	uint64_t given = 0;
	if (v->type == YAML_MAPPING_NODE) {
		for (int i = 0; i < scn_npairs(v); i++) {
			const char *name;
			yaml_node_t *pk, *pv;
			if (scn_pair_key(s, v, i, &name, &pk, &pv))
				return s->rc;
			if (!strcmp(name, param_leaf(sel)))
				continue;
			const struct param *p = NULL;
			bool alias = false;
			char a[PARAM_NAME_MAX];
			for (int j = 0; j < param_count && !p; j++) {
				const struct param *c = &param_table[j];
				if (c->scope != sel->scope || c->group != sel->group)
					continue;
				if (!strcmp(param_leaf(c), name))
					p = c;
				else if (param_alias(c, a, sizeof(a)) &&
					 !strcmp(strchr(a, '.') + 1, name))
					p = c, alias = true;
			}
			if (!p) {
				size_t len = (size_t)snprintf(keys, sizeof(keys), "%s", param_leaf(sel));
				for (int j = 0; j < param_count && len < sizeof(keys); j++) {
					const struct param *c = &param_table[j];
					if (c->scope == sel->scope && c->group == sel->group && c != sel)
						len += (size_t)snprintf(keys + len, sizeof(keys) - len,
									", %s", param_leaf(c));
				}
				for (int j = 0, first = 1; j < param_count && len < sizeof(keys);
				     j++) {
					const struct param *c = &param_table[j];
					if (c->scope != sel->scope || c->group != sel->group ||
					    !param_alias(c, a, sizeof(a)))
						continue;
					len += (size_t)snprintf(keys + len, sizeof(keys) - len,
								"%s%s",
								first ? "; with a unit: " : ", ",
								strchr(a, '.') + 1);
					first = 0;
				}
				return scn_fail(s, pk, name, "unknown key in %s (known: %s)", gname, keys);
			}
			if (!param_applies(p, &l->v)) {
				char vname[PARAM_VALUE_MAX];
				size_t len = 0;
				keys[0] = 0;
				for (int j = 0; j < param_count && len < sizeof(keys); j++) {
					const struct param *c = &param_table[j];
					if (c->scope == sel->scope && c->group == sel->group &&
					    c != sel && param_applies(c, &l->v))
						len += (size_t)snprintf(keys + len, sizeof(keys) - len,
									"%s%s", len ? ", " : "",
									param_leaf(c));
				}
				param_format_value(sel, (int64_t)param_get_u64(sel, &l->v), vname,
						   sizeof(vname));
				return scn_fail(s, pk, p->name, "not a parameter of %s %s %s (%s%s)", gname,
					    param_leaf(sel), vname, len ? "its parameters: " : "it has none",
					    keys);
			}
			if ((given >> param_index(p)) & 1u)
				return both_spellings(s, pk, p, name, alias);
			if (p->type == PARAM_TABLE
				    ? parse_table(s, p, pv, l)
				    : scn_param_value(s, p, alias ? a : p->name, alias, pv, l))
				return s->rc;
			given |= 1ull << param_index(p);
		}
	}
	if (bare_p) {
		const struct param *p = param_find(sel->scope, "loss.p");
		if (scn_param_value(s, p, gname, false, bare_p, l))
			return s->rc;
		given |= 1ull << param_index(p);
	}
	for (int i = 0; i < param_count; i++) {
		const struct param *p = &param_table[i];
		if (p->scope != sel->scope || p->group != sel->group || !(p->flags & PARAM_REQUIRED) ||
		    !param_applies(p, &l->v) || ((given >> i) & 1u))
			continue;
		char vname[PARAM_VALUE_MAX];
		param_format_value(sel, (int64_t)param_get_u64(sel, &l->v), vname, sizeof(vname));
		return scn_fail(s, v, gname, "%s %s needs '%s' (write %s: {%s: %s, %s: ...})",
			    param_leaf(sel), vname, param_leaf(p), gname, param_leaf(sel),
			    param_quote(vname, q, sizeof(q)), param_leaf(p));
	}
	/* What the model itself requires of the group as a whole. */
	char why[MODEL_ERR_LEN];
	if ((sel->group == PARAM_G_LOSS ? model_loss_check(&l->v.link.loss, why, sizeof(why))
					: model_jitter_check(&l->v.link.jitter, why, sizeof(why))))
		return scn_fail_model(s, v, gname, why, "");
	return 0;
}

/*
 * One key of a parameter map of scope: a parameter or a group. Unknown keys
 * fail naming ctx and listing extra (the caller's own keys) and the scope's.
 */
int scn_param_pair(struct scn *s, enum param_scope scope, const char *name,
			    const yaml_node_t *k, const yaml_node_t *v, struct layer *l,
			    const char *ctx, const char *extra)
{
	char keys[512];
	const struct param *sel = group_selector(scope, name);
	if (sel)
		return parse_group(s, sel, v, l);
	bool alias;
	const struct param *p = param_find_key(scope, name, &alias);
	if (!p || p->group != PARAM_G_NONE || (p->flags & PARAM_TOPLEVEL)) {
		if (p && (p->flags & PARAM_TOPLEVEL))
			return scn_fail(s, k, name, "goes at the top level of the scenario, not in %s",
				    ctx);
		return scn_fail(s, k, name, "unknown key in %s (known: %s)", ctx,
			    known_keys(scope, extra, keys, sizeof(keys)));
	}
	if (scope == PARAM_FABRIC && (p->flags & PARAM_IDEAL_ONLY) && !s->ideal)
		return scn_fail(s, k, name, "only with kind: ideal (an explicit fabric says it per node "
					"and link)");
	if (scope == PARAM_FABRIC && (p->flags & PARAM_EXPLICIT_ONLY) && s->ideal)
		return scn_fail(s, k, name, "not with kind: ideal");
	if (scn_layer_has(l, p))
		return both_spellings(s, k, p, name, alias);
	return scn_param_value(s, p, name, alias, v, l);
}

/* A map of parameters only (defaults.link, a_to_b, nic, ...) into l. */
int scn_param_map(struct scn *s, enum param_scope scope, const yaml_node_t *m,
			   const char *key, const char *ctx, struct layer *l)
{
	if (scn_expect(s, m, YAML_MAPPING_NODE, key, "a mapping of parameters"))
		return s->rc;
	for (int i = 0; i < scn_npairs(m); i++) {
		const char *name;
		yaml_node_t *k, *v;
		if (scn_pair_key(s, m, i, &name, &k, &v) ||
		    scn_param_pair(s, scope, name, k, v, l, ctx, ""))
			return s->rc;
	}
	return 0;
}
