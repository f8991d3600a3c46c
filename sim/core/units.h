/* SPDX-License-Identifier: MIT */
/*
 * units.h - the one parser of values with units: times, sizes and rates as
 * netem and people write them ("5us", "64K", "25gbit"), exactly, to
 * integers in base units: ns, bytes, bit/s, a count. Every time, size and rate of a
 * scenario (sim/scn/param.c's aliases, faults.c, job.c), of the daemon's
 * flags, of the harness's and of the NCCL job program's options goes through it.
 *
 * Header-only, libc only: one .c file of each program defines
 * SF_UNITS_IMPLEMENTATION before including it (sim/scn/units.c for the daemon,
 * tools/harness/main.c, tools/nccljob/opts.c), so the harness and the job program
 * take it without linking anything of sim/ (HACKING.md).
 *
 * The grammar: a decimal (digits, an optional fraction, an optional
 * exponent: "5", "1.5", "2e3"; no sign, no hex) then, with no space, a unit:
 *   time  ns, us (or µs), ms, s
 *   size  B; K, M, G, T (any case) alone or with B or iB: all binary,
 *         1K = 1KB = 1KiB = 1024 bytes (as `sizes:` and --conn-mem always were)
 *   rate  bits, SI (k = 1000): bit, bit/s, b/s with a prefix k, K, m, M, g,
 *         G, t, T (kbit, 25gbit, 400Gbit/s, 100Mb/s); bps with an upper-case
 *         prefix (Kbps, Mbps, Gbps, Tbps); bytes: Bps or B/s with k, K, M,
 *         G or T (12.5GBps, 12.5GB/s = 100 Gb/s). tc reads kbps, mbps, gbps
 *         and a bare bps as BYTES per second: those spellings are refused as
 *         ambiguous.
 *   count K, M, G, T (any case, binary: 64K = 65536), or a bare number
 * A bare number is the base unit where the caller says so (UNITS_BARE: the
 * faults' times, sizes), else only 0 may go bare (UNITS_BARE_ZERO).
 * The value must be a whole number of the base unit ("1.5ns" is refused,
 * "1.5us" is 1500 ns) and fit 64 bits.
 *
 * Errors are -EINVAL (or -ERANGE: too large) with the reason, naming the
 * value, in err; callers prefix the key and file:line:column.
 */
#ifndef SF_UNITS_H
#define SF_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum units_dim {
	UNITS_TIME,  /* ns */
	UNITS_SIZE,  /* bytes */
	UNITS_RATE,  /* bit/s */
	UNITS_COUNT, /* a count: K, M, G, T (binary, as sizes); a bare number always allowed */
	UNITS_NDIMS,
};

/* flags */
#define UNITS_BARE 0x1	    /* a number without a unit is in the base unit (ns, B) */
#define UNITS_BARE_ZERO 0x2 /* 0 may go without a unit (0 is 0 in any unit) */

/* A decimal "digits[.digits][e[+-]digits][%]" as (neg ? -1 : 1) * m * 10^e. */
struct units_dec {
	bool neg, pct;
	bool big; /* -ERANGE in the integer part: over 2^64 (before any unit) */
	uint64_t m;
	int e;
};

/*
 * Parse the decimal at the start of s into d; *end is where it stopped (a
 * sign '-' and a trailing '%' are taken: callers refuse them where they make
 * no sense). 0; -EINVAL (no number); -ERANGE (more significant digits than
 * 64 bits hold: nonzero ones lost).
 */
int units_dec_parse(const char *s, struct units_dec *d, const char **end);
/* |d| * 10^k as an integer: 0, or -EINVAL if it is not a whole number or does not fit 64 bits. */
int units_dec_scale(const struct units_dec *d, int k, uint64_t *out);

/* s for an error message, into out: non-printable bytes and backslashes as \xNN, at most 64
 * characters then "...". Returns out. (param_quote is this.) */
const char *units_quote(const char *s, char *out, size_t cap);

/* "a time", "a size", "a rate". */
const char *units_dim_name(enum units_dim dim);
/* The units of dim for a message: "ns, us, ms or s". */
const char *units_dim_units(enum units_dim dim);

/* text as a value of dim into *out (base units). 0 or -EINVAL/-ERANGE with the reason in err. */
int units_parse(const char *text, enum units_dim dim, unsigned flags, uint64_t *out, char *err,
		size_t errlen);

/* v (base units) in the largest unit that shows it exactly: 10000000000 ns -> "10s",
 * 1536 B -> "1536B", 2048 B -> "2KiB", 25e9 bit/s -> "25gbit". snprintf-like. */
int units_format(enum units_dim dim, uint64_t v, char *buf, size_t cap);

#endif /* SF_UNITS_H */

#if defined(SF_UNITS_IMPLEMENTATION) && !defined(SF_UNITS_IMPLEMENTED)
#define SF_UNITS_IMPLEMENTED
/* ---- the implementation: in one file per program ---------------------------------- */
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- decimals -------------------------------------------------------------------- */

int units_dec_parse(const char *s, struct units_dec *d, const char **end)
{
	int exp = 0;
	bool any = false, nonzero_lost = false, full = false;
	memset(d, 0, sizeof(*d));
	*end = s;
	if (*s == '-') {
		d->neg = true;
		s++;
	}
	for (; *s >= '0' && *s <= '9'; s++) {
		any = true;
		if (d->m == 0 && *s == '0')
			continue;
		if (!full && d->m <= (UINT64_MAX - (uint64_t)(*s - '0')) / 10) {
			d->m = d->m * 10 + (uint64_t)(*s - '0');
		} else {
			full = true;
			d->big |= *s != '0';
			nonzero_lost |= *s != '0';
			d->e++;
		}
	}
	if (*s == '.') {
		s++;
		bool frac = false;
		for (; *s >= '0' && *s <= '9'; s++) {
			frac = true;
			if (d->m == 0 && *s == '0') {
				d->e--;
				continue;
			}
			if (!full && d->m <= (UINT64_MAX - (uint64_t)(*s - '0')) / 10) {
				d->m = d->m * 10 + (uint64_t)(*s - '0');
				d->e--;
			} else {
				full = true;
				nonzero_lost |= *s != '0';
			}
		}
		if (!frac && !any)
			return -EINVAL;
		any = true;
	}
	if (!any)
		return -EINVAL;
	if (*s == 'e' || *s == 'E') {
		bool eneg = false, edig = false;
		s++;
		if (*s == '-' || *s == '+')
			eneg = *s++ == '-';
		for (; *s >= '0' && *s <= '9'; s++) {
			edig = true;
			if (exp < 100000)
				exp = exp * 10 + (*s - '0');
		}
		if (!edig)
			return -EINVAL;
		if (eneg)
			exp = -exp;
	}
	if (*s == '%') {
		d->pct = true;
		s++;
		exp -= 2;
	}
	*end = s;
	if (nonzero_lost)
		return -ERANGE;
	if (d->m == 0)
		d->e = 0;
	d->e += exp;
	return 0;
}

/* m * mul * 10^e exactly: 0; -EINVAL: not a whole number; -ERANGE: over 64 bits. */
static int scale(uint64_t m, uint64_t mul, int e, uint64_t *out)
{
	unsigned __int128 v = (unsigned __int128)m * mul;
	if (v == 0) {
		*out = 0;
		return 0;
	}
	for (; e > 0; e--) {
		if (v > UINT64_MAX)
			return -ERANGE;
		v *= 10;
	}
	for (; e < 0; e++) {
		if (v % 10)
			return -EINVAL;
		v /= 10;
	}
	if (v > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

int units_dec_scale(const struct units_dec *d, int k, uint64_t *out)
{
	return scale(d->m, 1, d->e + k, out) ? -EINVAL : 0;
}

/* ---- units ----------------------------------------------------------------------- */

struct unit {
	const char *name;
	uint64_t mul; /* base units */
};

static const struct unit time_units[] = {
	{"ns", 1}, {"us", 1000}, {"\xc2\xb5s", 1000}, {"ms", 1000000}, {"s", 1000000000}, {NULL, 0},
};

/* 0 and its multiplier, 1: ambiguous (tc's bytes), -1: not a rate unit. */
static int rate_unit(const char *u, uint64_t *mul)
{
	static const char prefixes[] = "kKmMgGtT";
	static const uint64_t pm[] = {1000,	  1000,	      1000000,	     1000000,
				      1000000000, 1000000000, 1000000000000, 1000000000000};
	const char *p = *u ? strchr(prefixes, *u) : NULL;
	uint64_t m = p ? pm[p - prefixes] : 1;
	bool lower = p && *u >= 'a';
	const char *rest = p ? u + 1 : u;
	if (!strcmp(rest, "bit") || !strcmp(rest, "bit/s") || !strcmp(rest, "b/s")) {
		*mul = m;
		return 0;
	}
	if (!strcmp(rest, "bps")) {
		*mul = m;
		return p && !lower ? 0 : 1;
	}
	if (!strcmp(rest, "Bps") || !strcmp(rest, "B/s")) {
		*mul = m * 8;
		return p && lower && *u != 'k' ? -1 : 0;
	}
	return -1;
}

static int size_unit(const char *u, uint64_t *mul)
{
	static const char prefixes[] = "kKmMgGtT";
	if (!strcmp(u, "B")) {
		*mul = 1;
		return 0;
	}
	const char *p = *u ? strchr(prefixes, *u) : NULL;
	if (!p || (u[1] && strcmp(u + 1, "B") && strcmp(u + 1, "iB")))
		return -1;
	*mul = 1ull << (10 * (1 + (p - prefixes) / 2));
	return 0;
}

/* u's multiplier in dim: 0, 1 (ambiguous), -1 (not a unit of dim). */
static int find_unit(enum units_dim dim, const char *u, uint64_t *mul)
{
	switch (dim) {
	case UNITS_TIME:
		for (int i = 0; time_units[i].name; i++) {
			if (!strcmp(u, time_units[i].name)) {
				*mul = time_units[i].mul;
				return 0;
			}
		}
		return -1;
	case UNITS_SIZE:
		return size_unit(u, mul);
	case UNITS_RATE:
		return rate_unit(u, mul);
	case UNITS_COUNT:
		return u[0] && !u[1] && strchr("kKmMgGtT", u[0]) ? size_unit(u, mul) : -1;
	default:
		return -1;
	}
}

static const char *const dim_names[UNITS_NDIMS] = {"a time", "a size", "a rate", "a count"};
static const char *const dim_units[UNITS_NDIMS] = {
	"ns, us, ms or s",
	"B, K, M, G or T, binary: 1K = 1KB = 1KiB = 1024 B",
	"bit/s: 25gbit, 400Gbps, 100Mbit/s (SI: 1k = 1000); or bytes/s: 12.5GBps, 12.5GB/s",
	"K, M, G or T, binary: 1K = 1024",
};
static const char *const base_names[UNITS_NDIMS] = {"nanoseconds", "bytes", "bit/s", ""};

const char *units_dim_name(enum units_dim dim)
{
	return dim >= 0 && dim < UNITS_NDIMS ? dim_names[dim] : "a value";
}

const char *units_dim_units(enum units_dim dim)
{
	return dim >= 0 && dim < UNITS_NDIMS ? dim_units[dim] : "";
}

const char *units_quote(const char *s, char *out, size_t cap)
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

int units_parse(const char *text, enum units_dim dim, unsigned flags, uint64_t *out, char *err,
		size_t errlen)
{
	static const char *const bare[UNITS_NDIMS] = {"ns", "bytes", "bit/s", "a count"};
	struct units_dec d;
	const char *u;
	char q[300], qu[300], takes[200];
	uint64_t mul = 1;
	if (dim == UNITS_COUNT)
		flags |= UNITS_BARE;
	units_quote(text, q, sizeof(q));
	snprintf(takes, sizeof(takes), "%s%s%s", dim_units[dim],
		 (flags & UNITS_BARE) ? "; a bare number is " : "",
		 (flags & UNITS_BARE) ? bare[dim] : "");
	int rc = units_dec_parse(text, &d, &u);
	if (rc == -ERANGE && d.big && !d.neg) {
		snprintf(err, errlen, "'%s' is too large (over 2^64%s%s)", q,
			 *base_names[dim] ? " " : "", base_names[dim]);
		return -ERANGE;
	}
	if (rc == -ERANGE) {
		snprintf(err, errlen, "'%s' has more significant digits than 64 bits hold", q);
		return -EINVAL;
	}
	if (rc || d.pct) {
		snprintf(err, errlen, "'%s' is not %s (a number then a unit: %s)", q,
			 dim_names[dim], takes);
		return -EINVAL;
	}
	if (d.neg) {
		snprintf(err, errlen, "'%s' is negative: %s is 0 or more", q, dim_names[dim]);
		return -EINVAL;
	}
	units_quote(u, qu, sizeof(qu));
	if (!*u) {
		if (!(flags & UNITS_BARE) && !(d.m == 0 && (flags & UNITS_BARE_ZERO))) {
			snprintf(err, errlen, "'%s' needs a unit: %s", q, takes);
			return -EINVAL;
		}
	} else {
		if (*u == ' ' || *u == '\t') {
			snprintf(err, errlen,
				 "'%s' has a space before its unit (write it without: %s)", q,
				 takes);
			return -EINVAL;
		}
		rc = find_unit(dim, u, &mul);
		if (rc == 1) {
			snprintf(err, errlen,
				 "'%s' is ambiguous: tc reads %s as BYTES per second; write bits "
				 "as "
				 "25gbit or 25Gbps, bytes as 25GBps or 25GB/s",
				 q, qu);
			return -EINVAL;
		}
		if (rc) {
			for (int o = 0; o < UNITS_NDIMS; o++) {
				uint64_t x;
				if (o != (int)dim && find_unit((enum units_dim)o, u, &x) == 0) {
					snprintf(err, errlen,
						 "'%s' has the unit of %s (%s), not of %s (%s)", q,
						 dim_names[o], qu, dim_names[dim], takes);
					return -EINVAL;
				}
			}
			snprintf(err, errlen, "'%s' has an unknown unit '%s' (%s takes %s)", q, qu,
				 dim_names[dim], takes);
			return -EINVAL;
		}
	}
	rc = scale(d.m, mul, d.e, out);
	if (rc == -EINVAL)
		snprintf(err, errlen, "'%s' is not a whole number%s%s", q,
			 *base_names[dim] ? " of " : "", base_names[dim]);
	else if (rc)
		snprintf(err, errlen, "'%s' is too large (over 2^64%s%s)", q,
			 *base_names[dim] ? " " : "", base_names[dim]);
	return rc;
}

int units_format(enum units_dim dim, uint64_t v, char *buf, size_t cap)
{
	/* Largest first; the last is the base unit. */
	static const struct unit units[UNITS_NDIMS][5] = {
		{{"s", 1000000000}, {"ms", 1000000}, {"us", 1000}, {"ns", 1}},
		{{"TiB", 1ull << 40},
		 {"GiB", 1ull << 30},
		 {"MiB", 1ull << 20},
		 {"KiB", 1ull << 10},
		 {"B", 1}},
		{{"tbit", 1000000000000},
		 {"gbit", 1000000000},
		 {"mbit", 1000000},
		 {"kbit", 1000},
		 {"bit", 1}},
		{{"T", 1ull << 40},
		 {"G", 1ull << 30},
		 {"M", 1ull << 20},
		 {"K", 1ull << 10},
		 {"", 1}},
	};
	if (!v || dim < 0 || dim >= UNITS_NDIMS)
		return snprintf(buf, cap, "%llu", (unsigned long long)v);
	const struct unit *t = units[dim];
	int i = 0;
	while (t[i].mul > 1 && v % t[i].mul)
		i++;
	return snprintf(buf, cap, "%llu%s", (unsigned long long)(v / t[i].mul), t[i].name);
}

#endif /* SF_UNITS_IMPLEMENTATION */
