/* SPDX-License-Identifier: MIT */
/*
 * units.h - the one parser of values with units: times, sizes and rates as
 * netem and people write them ("5us", "64K", "25gbit"), exactly, to
 * integers in base units: ns, bytes, bit/s, a count. Every time, size and rate of a
 * scenario (sim/scn/param.c's aliases, faults.c, job.c) and of the daemon's
 * flags goes through it.
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
