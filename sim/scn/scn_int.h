/* SPDX-License-Identifier: MIT */
/*
 * scn_int.h - what the scenario parser's section parsers share: the parse
 * state and the loader's library, sim/scn/yaml.c (errors, YAML tree helpers,
 * places, parameter layers). Internal to the scenario loader (scenario.c,
 * yaml.c, faults.c, job.c, place.c); nothing else includes it.
 *
 * Errors: the first one wins. scn_fail() records "file:line:column: key:
 * reason" at a node and returns s->rc (-EINVAL); every later call returns the
 * same rc without overwriting it, so a parser can simply return what a
 * helper returned.
 */
#ifndef SF_SCN_INT_H
#define SF_SCN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <yaml.h>

#include "sim/scn/fabric.h"
#include "sim/scn/param.h"
#include "sim/scn/scenario.h"

struct loc {
	int line, col;
	const char *key; /* a static string */
};

struct layer {
	union {
		struct model_link link;
		struct model_nic nic;
		struct fabric_switch_cfg sw;
		struct fabric_config fab;
	} v;
	uint64_t set; /* bit param_index(p) */
};

struct scn {
	const char *file;
	const char *data;
	size_t len;
	yaml_document_t doc;
	bool have_doc;
	char *err;
	size_t errlen;
	int rc;
	struct fabric_config cfg;
	bool ideal;
	struct fabric *f;
	struct model_link dlink;
	struct model_nic dnic;
	struct fabric_switch_cfg dswitch;
	struct loc *locs;
	int nlocs, caplocs;
	yaml_node_t *links_at; /* where path errors point */
	char *name, *description;
	/* what the other sections' parsers resolve (its texts and plan; its fabric is set
	 * once everything loaded) */
	struct scenario *sc;
};

/*
 * The section parsers, called after the fabric is built (s->f, finished), so
 * they can check node, NIC and link names against it (scn_get_place). Each
 * stores its resolved JSON text in s->sc (job_json, expect_json, faults_json;
 * faults.c also its plan in s->sc->faults).
 */
int scn_parse_job(struct scn *s, const yaml_node_t *v);	   /* sim/scn/job.c */
int scn_parse_expect(struct scn *s, const yaml_node_t *v); /* sim/scn/job.c */
int scn_parse_faults(struct scn *s, const yaml_node_t *v); /* sim/scn/faults.c */
/* The placement: section into s->sc->placement and placement_json (sim/scn/place.c). */
int scn_parse_placement(struct scn *s, const yaml_node_t *v);

__attribute__((format(printf, 5, 6))) int scn_fail_at(struct scn *s, int line, int col,
						       const char *key, const char *fmt, ...);
#define scn_fail(s, node, key, ...)                                                                \
	scn_fail_at((s), (int)(node)->start_mark.line + 1, (int)(node)->start_mark.column + 1,     \
		    (key), __VA_ARGS__)
int scn_fail_oom(struct scn *s);

yaml_node_t *scn_node(struct scn *s, int id);
const char *scn_text(const yaml_node_t *n);
bool scn_is_null(const yaml_node_t *n);
/* "a mapping", "a sequence", "a scalar", "nothing (null)" */
const char *scn_kind_name(const yaml_node_t *n);
/* n is of type (a non-null scalar for YAML_SCALAR_NODE); else the error "expected what, got ...". */
int scn_expect(struct scn *s, const yaml_node_t *n, yaml_node_type_t type, const char *key,
	       const char *what);
/* Pair i of mapping m: its key's text (checked: a plain scalar, not a repeat of an earlier one). */
int scn_pair_key(struct scn *s, const yaml_node_t *m, int i, const char **name, yaml_node_t **k,
		 yaml_node_t **v);
int scn_npairs(const yaml_node_t *m);
/* One known key of a mapping: where its value goes, and its key node (if key is not NULL). */
struct scn_key {
	const char *name;
	const yaml_node_t **val;
	const yaml_node_t **key;
};
/* The pairs of mapping m (checked by scn_pair_key), by name into keys[0..n) (an absent key's
 * slots are left as they are); any other key is "unknown key in <what> (known: <the names, in
 * order>)", at that key. A name in seconds ("timeout_s") also matches its alias without "_s"
 * ("timeout", whose value has a unit: the caller tells them apart by the key's text); both in one
 * map is an error. */
int scn_get_keys(struct scn *s, const yaml_node_t *m, const char *what, const struct scn_key *keys,
		 int n);
#define SCN_NKEYS(keys) ((int)(sizeof(keys) / sizeof((keys)[0])))
int scn_nitems(const yaml_node_t *q);
yaml_node_t *scn_item(struct scn *s, const yaml_node_t *q, int i);
/* A strict integer in min..max (decimal digits, optional '-' if min < 0). */
int scn_get_int(struct scn *s, const yaml_node_t *v, const char *key, int64_t min, int64_t max,
		const char *unit, int64_t *out);
/* Item i of sequence v (NULL, the error recorded, if the document lacks it). */
yaml_node_t *scn_get_item(struct scn *s, const yaml_node_t *v, int i, const char *key);
/* One of names (NULL-terminated): its index. */
int scn_get_enum(struct scn *s, const yaml_node_t *v, const char *key, const char *const *names,
		 int *out);
/* A decimal number of seconds (or a ratio) in min..max: digits, an optional fraction. */
int scn_get_decimal(struct scn *s, const yaml_node_t *v, const char *key, double min, double max,
		    const char *unit, double *out);
/* A time in seconds under key full ("bound_s": a decimal) or, when the key node k says so, its
 * alias without "_s" ("bound": a time with a unit, "500ms"). whole: only whole seconds. */
int scn_get_seconds(struct scn *s, const yaml_node_t *k, const yaml_node_t *v, const char *full,
		    double min, double max, bool whole, double *out);
/* A byte count in min..max: "4096", "64K", "1MiB" (sim/scn/units.h: K = KB = KiB = 1024). */
int scn_get_size(struct scn *s, const yaml_node_t *v, const char *key, uint64_t min, uint64_t max,
		 uint64_t *out);
/* A list written as a YAML sequence of scalars or as one "a,b,c" scalar: calls fn per word
 * (at: the node to blame), stops at its first error. */
typedef int (*scn_word_fn)(struct scn *s, const yaml_node_t *at, const char *key, const char *word,
			   void *ctx);
int scn_for_words(struct scn *s, const yaml_node_t *v, const char *key, scn_word_fn fn, void *ctx);

/*
 * A place of the finished fabric (s->f) that a section names: a node, one NIC
 * of a node (node/<index>) or a switch.
 */
enum scn_place_accept {
	SCN_PLACE_NODE = 1 << 0,   /* a node's name */
	SCN_PLACE_NIC = 1 << 1,	   /* node/<NIC index> */
	SCN_PLACE_SWITCH = 1 << 2, /* a switch's name */
	SCN_PLACE_ANY = 1 << 3,	   /* "any" or "*": no place in particular */
	SCN_PLACE_LIST = 1 << 4,   /* an unknown name's error lists the fabric's nodes */
};
struct scn_place {
	const struct fabric_node *node;	  /* a node or a NIC's node; else NULL */
	const struct fabric_switch *sw;	  /* a switch; else NULL */
	int nic;			  /* node/<index>: the index; else -1 */
};
/*
 * The scalar v, of the kinds accept allows, resolved into *out (all NULL for
 * "any"). Errors at v name the value, the kinds accepted making up "what":
 * "a node, node/NIC or switch" and the like:
 *   expected a <what> name, got ...               (not a scalar)
 *   '<v>' is not a <what> name                    (nothing, or too long, before a '/')
 *   '<v>': node <n> has NICs 0..<k>               (no such NIC index)
 *   '<v>' is not a <what> of this fabric          (no such place, or not of these kinds)
 *   unknown <what> '<v>' (the fabric's: n0, ...)  (the same, with SCN_PLACE_LIST)
 * Only with SCN_PLACE_NIC does a '/' separate a NIC index.
 */
int scn_get_place(struct scn *s, const yaml_node_t *v, const char *key, unsigned accept,
		  struct scn_place *out);

/* A model check's "key: reason" (model_*_check's why) as an error at node: the key split off
 * the reason, else dflt is the key; suffix goes after the reason. */
int scn_fail_model(struct scn *s, const yaml_node_t *at, const char *dflt, const char *why,
		   const char *suffix);

/*
 * One key of a parameter map of scope into layer l: a parameter, or a group
 * (`loss: {...}`) that sets its whole group. Unknown keys fail naming ctx
 * (the enclosing map) and listing extra (the caller's own keys, "" for none)
 * and the scope's.
 */
int scn_param_pair(struct scn *s, enum param_scope scope, const char *name, const yaml_node_t *k,
		   const yaml_node_t *v, struct layer *l, const char *ctx, const char *extra);
/* One parameter's scalar value v into l (no groups, no scope checks), spelled key: its name,
 * or its alias (then v carries a unit). */
int scn_param_value(struct scn *s, const struct param *p, const char *key, bool alias,
		    const yaml_node_t *v, struct layer *l);
/* One parameter's scalar value v into l (no groups, no scope checks). */
int scn_param_scalar(struct scn *s, const struct param *p, const yaml_node_t *v, struct layer *l);
/* A map of parameters only (defaults.link, a_to_b, nic, ...) into l; key and ctx name it. */
int scn_param_map(struct scn *s, enum param_scope scope, const yaml_node_t *m, const char *key,
		  const char *ctx, struct layer *l);
/* A layer over base (a struct of scope), nothing set yet. */
void scn_layer_init(struct layer *l, enum param_scope scope, const void *base);
/* The parameters set in l over dst (a struct of scope). */
void scn_layer_apply(enum param_scope scope, void *dst, const struct layer *l);
bool scn_layer_has(const struct layer *l, const struct param *p);

#endif /* SF_SCN_INT_H */
