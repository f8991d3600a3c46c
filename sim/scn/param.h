/* SPDX-License-Identifier: MIT */
/*
 * param.h - the one table of the fabric's parameters.
 *
 * Every tunable number of the emulated fabric is an entry of param_table:
 * its name as a scenario file writes it, the object it belongs to (a scope:
 * the fabric, one direction of a link, a NIC, a switch), its type and unit,
 * its range and default, where it lives in that object's struct (offset and
 * size), whether a running fabric may change it, and one line of doc. That
 * one table drives
 *   - parsing and range checks (param_parse: a scenario's values, daemon flags),
 *   - the resolved fabric's JSON dump (param_format: in the setter's own
 *     syntax, so a dumped value reads back to the same stored value),
 *   - the generated docs table (param_dump_markdown: `simfabricd
 *     --dump-params markdown`, pasted into scenarios/README.md and checked by
 *     a test).
 *
 * Scopes and their structs:
 *   PARAM_FABRIC  struct fabric_config      (sim/scn/fabric.h)
 *   PARAM_LINK    struct model_link          (sim/core/model.h) one direction of a link
 *   PARAM_NIC     struct model_nic           (sim/core/model.h)
 *   PARAM_SWITCH  struct fabric_switch_cfg   (sim/scn/fabric.h)
 *
 * Values are stored in the model's integer units; scenario files use human
 * units, converted exactly (no floating point except PARAM_REAL):
 *   PARAM_INT   integer, stored as int64_t (size 8) or uint32_t (size 4)
 *   PARAM_U64   integer 0..2^64-1, decimal or 0x hex, stored as uint64_t
 *   PARAM_RATE  Gb/s, a decimal with up to 9 places ("200", "12.5"), stored as
 *               uint64_t bit/s; 0 means unlimited
 *   PARAM_PROB  probability: a decimal, scientific or percent ("0.001", "1e-6",
 *               "0.1%") in 0..1, stored as a uint32_t fraction of 2^32 (1 is
 *               stored as 2^32-1); a nonzero value below 2^-33 is refused
 *   PARAM_PPM   a fraction in millionths ("0.001"), stored as uint32_t ppm
 *   PARAM_REAL  a decimal, stored as double; min and max are in millionths
 *   PARAM_ENUM  one of names[], stored as an int (size 4) or int64_t (size 8)
 *   PARAM_TABLE a YAML list of integers in min..max, stored as an int count
 *               (offset2) and a const int64_t * (offset); the fabric owns it
 * For every type min, max and def are in the stored unit (RATE: bit/s,
 * PROB: 2^-32, PPM: 1e-6, REAL: 1e-6, ENUM: the value).
 *
 * Groups: "jitter.*" and "loss.*" parameters form a group chosen by its
 * selector (jitter.dist, loss.model). A group parameter applies only to the
 * selector values in its kinds mask (bit v for value v); param_applies()
 * says whether it does for an object's current selector. A scenario writes a
 * group as one map (`loss: {model: ge, p: 0.01}`) that replaces the inherited
 * group as a whole.
 *
 * Errors are 0 or a negative errno, with the reason (without the parameter's
 * name: callers prefix their own context) in a caller's err buffer.
 */
#ifndef SF_PARAM_H
#define SF_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PARAM_ERR_LEN 256
#define PARAM_VALUE_MAX 64 /* param_format's output for anything but a table */
#define PARAM_NAME_MAX 32  /* a name or alias, with its NUL */
#define PARAM_MAX 64	   /* entries in the table, at most (so a bitmask covers it) */

enum param_scope {
	PARAM_FABRIC = 0,
	PARAM_LINK,
	PARAM_NIC,
	PARAM_SWITCH,
	PARAM_NSCOPES,
};

enum param_type {
	PARAM_INT,
	PARAM_U64,
	PARAM_RATE,
	PARAM_PROB,
	PARAM_PPM,
	PARAM_REAL,
	PARAM_ENUM,
	PARAM_TABLE,
};

enum param_group {
	PARAM_G_NONE = 0,
	PARAM_G_JITTER, /* selector jitter.dist (enum model_dist) */
	PARAM_G_LOSS,	/* selector loss.model (enum model_loss_kind) */
};

/* flags */
#define PARAM_RUNTIME 0x1	 /* a running fabric may change it (faults, later) */
#define PARAM_SELECTOR 0x2	 /* chooses its group's kind */
#define PARAM_IDEAL_ONLY 0x4	 /* only in `kind: ideal` fabrics */
#define PARAM_EXPLICIT_ONLY 0x8 /* only in explicit fabrics */
#define PARAM_REQUIRED 0x10	 /* a group member that must be given when it applies */
#define PARAM_TOPLEVEL 0x20	 /* written at the scenario's top level, not under fabric: */
#define PARAM_ZERO_OK 0x40	 /* 0 is allowed besides min..max (rates: 0 is unlimited) */

struct param {
	const char *name; /* "rate_gbps", "loss.p" */
	enum param_scope scope;
	size_t offset, size; /* of the field in the scope's struct */
	size_t offset2;	     /* PARAM_TABLE: the int count; else 0 */
	enum param_type type;
	const char *unit; /* "Gb/s", "ns", "B", "count", "probability", "" */
	int64_t min, max, def; /* PARAM_U64: min and max unused (the full range) */
	const char *const *names; /* PARAM_ENUM: NULL-terminated, value i = names[i] */
	enum param_group group;
	unsigned kinds; /* group members: selector values it applies to (bit v) */
	unsigned flags;
	const char *doc;
};

extern const struct param param_table[];
extern const int param_count;

/* Scope names: "fabric", "link", "nic", "switch". */
const char *param_scope_name(enum param_scope scope);
/* The entry of scope called name, or NULL. */
const struct param *param_find(enum param_scope scope, const char *name);
/* Its index in param_table (0..param_count-1). */
int param_index(const struct param *p);
/* The selector of p's group (p itself for a selector), or NULL for ungrouped entries. */
const struct param *param_selector(const struct param *p);
/* "loss.p" -> "p"; "rate_gbps" -> "rate_gbps". */
const char *param_leaf(const struct param *p);

/*
 * Units. A parameter whose name carries its unit (latency_ns, rate_gbps, speed_mbps,
 * jitter.sd_ns) takes a bare number in that unit, as it always did; its alias, the name without
 * the suffix (latency, rate, speed, jitter.sd), takes a value with a unit (sim/scn/units.h:
 * "5us", "25gbit", "12.5GB/s"; 0 may go bare). A parameter in bytes whose name has no unit (mtu,
 * hdr_first_extra, hdr_last_extra) takes a bare number of bytes or a size with a unit ("4KiB").
 * A scenario gives one spelling of a parameter, not both.
 */
/* The units_dim of p's values and how many base units (ns, B, bit/s) one stored unit is, or -1:
 * p takes no units. */
int param_dim(const struct param *p, uint64_t *per);
/* p's alias into buf ("latency_ns" -> "latency", "jitter.sd_ns" -> "jitter.sd"), or NULL. */
const char *param_alias(const struct param *p, char *buf, size_t cap);
/* The entry of scope called name, or whose alias is name (then *alias is true), or NULL. */
const struct param *param_find_key(enum param_scope scope, const char *name, bool *alias);
/* param_parse for the alias spelling: text is a value with a unit (0 may go bare). */
int param_parse_unit(const struct param *p, const char *text, void *obj, char *err, size_t errlen);

/* Set every parameter of scope in obj to its default (group members: those of the default kind). */
void param_defaults(enum param_scope scope, void *obj);
void param_set_default(const struct param *p, void *obj);
/* The group of selector sel, for sel's current value in obj: members that apply at their
 * defaults, the others zero. */
void param_group_defaults(const struct param *sel, void *obj);
/* Does p apply to obj as configured (its group's selector value is in p->kinds)? */
bool param_applies(const struct param *p, const void *obj);

/*
 * Parse text as p's value and store it into obj. PARAM_TABLE cannot be
 * parsed from text (see param_set_table). 0, or -EINVAL with the reason in
 * err, e.g. "'2x' is not an integer in 1..8 (count)"; obj is unchanged then.
 */
int param_parse(const struct param *p, const char *text, void *obj, char *err, size_t errlen);
/* Store a table (not copied: the caller keeps it alive); checks count and entries. */
int param_set_table(const struct param *p, void *obj, const int64_t *v, int n, char *err,
		    size_t errlen);
/* Is obj's value of p within its range? 0 or -EINVAL with the reason (the value shown). */
int param_check(const struct param *p, const void *obj, char *err, size_t errlen);
/* Copy p's field(s) from src to dst (both of p's scope). */
void param_copy(const struct param *p, void *dst, const void *src);

/* The stored value as an integer (INT, U64, RATE, PROB, PPM, ENUM); 0 for the others. */
uint64_t param_get_u64(const struct param *p, const void *obj);
double param_get_real(const struct param *p, const void *obj);

/*
 * p's value in obj written as a JSON value in the setter's syntax: numbers
 * in the scenario's units (rate_gbps 12.5, a probability as the shortest
 * decimal that parses back to the same fraction), enum names as strings,
 * tables as arrays. Returns the length it needed (snprintf-like).
 */
int param_format(const struct param *p, const void *obj, char *buf, size_t cap);
/* A stored number (min, max or def of p) in the setter's syntax, not quoted. */
int param_format_value(const struct param *p, int64_t v, char *buf, size_t cap);

/* s for an error message, into out: non-printable bytes and backslashes as \xNN, at most 64
 * characters then "...". Returns out. */
const char *param_quote(const char *s, char *out, size_t cap);

/* The table for people: "markdown" (the docs section) or "json". 0, or -EINVAL for another format. */
int param_dump(FILE *out, const char *format);

#endif /* SF_PARAM_H */
