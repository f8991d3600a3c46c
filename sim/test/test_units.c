/* SPDX-License-Identifier: MIT */
/*
 * test_units.c - values with units (sim/scn/units.c) and their spellings in scenarios:
 *   parse      a table of texts per dimension and flags: the value in base units, or the
 *              exact error (unknown unit, a unit of another dimension, tc's ambiguous
 *              bytes-per-second spellings, negative, not whole, overflow, syntax)
 *   format     units_format picks the largest exact unit, and parses back to the same value
 *   aliases    param_alias and param_find_key over the whole table: an alias for every
 *              _ns, _gbps and _mbps name, none for the others
 *   scenarios  a scenario written with units resolves to the same fabric JSON as the one
 *              written in the old keys; the errors of the new spellings, exact, with
 *              file:line:column and key (both spellings given, a unit on a _ns key, out of
 *              range in units, a time on a rate)
 */
#include "sim/scn/units.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scn/fabric.h"
#include "sim/scn/param.h"
#include "sim/scn/scenario.h"

#include "sim/test/check.h"

#define T UNITS_TIME
#define S UNITS_SIZE
#define R UNITS_RATE
#define C UNITS_COUNT
#define B UNITS_BARE
#define Z UNITS_BARE_ZERO

static void test_parse(void)
{
	static const struct {
		const char *text;
		enum units_dim dim;
		unsigned flags;
		uint64_t want;	 /* when err is NULL */
		const char *err; /* the exact reason */
	} cases[] = {
		/* times */
		{"5us", T, 0, 5000, NULL},
		{"1.5ms", T, 0, 1500000, NULL},
		{"0.25s", T, 0, 250000000, NULL},
		{"2e3ns", T, 0, 2000, NULL},
		{"1.5us", T, 0, 1500, NULL},
		{"10s", T, 0, 10000000000ull, NULL},
		{"7\xc2\xb5s", T, 0, 7000, NULL},
		{".5us", T, 0, 500, NULL},
		{"250", T, B, 250, NULL},
		{"0", T, Z, 0, NULL},
		{"0", T, B, 0, NULL},
		{"9223372036854775807ns", T, 0, 9223372036854775807ull, NULL},
		{"18446744073709551ms", T, 0, 0,
		 "'18446744073709551ms' is too large (over 2^64 nanoseconds)"},
		{"5", T, 0, 0, "'5' needs a unit: ns, us, ms or s"},
		{"5", T, Z, 0, "'5' needs a unit: ns, us, ms or s"},
		{"1.5ns", T, 0, 0, "'1.5ns' is not a whole number of nanoseconds"},
		{"-5us", T, 0, 0, "'-5us' is negative: a time is 0 or more"},
		{"5 us", T, B, 0,
		 "'5 us' has a space before its unit (write it without: ns, us, ms or s; a bare "
		 "number "
		 "is ns)"},
		{"5xs", T, 0, 0, "'5xs' has an unknown unit 'xs' (a time takes ns, us, ms or s)"},
		{"5min", T, 0, 0,
		 "'5min' has an unknown unit 'min' (a time takes ns, us, ms or s)"},
		{"5gbit", T, 0, 0,
		 "'5gbit' has the unit of a rate (gbit), not of a time (ns, us, ms or s)"},
		{"4K", T, 0, 0, "'4K' has the unit of a size (K), not of a time (ns, us, ms or s)"},
		{"18446744073709551615ns", T, 0, UINT64_MAX, NULL},
		{"12345678901234567891ns", T, 0, 12345678901234567891ull, NULL},
		{"1e30s", T, 0, 0, "'1e30s' is too large (over 2^64 nanoseconds)"},
		{"123456789012345678901.5ns", T, 0, 0,
		 "'123456789012345678901.5ns' is too large (over 2^64 nanoseconds)"},
		{"1.00000000000000000000001us", T, 0, 0,
		 "'1.00000000000000000000001us' has more significant digits than 64 bits hold"},
		{"1844674407370955161.5ns", T, 0, 0,
		 "'1844674407370955161.5ns' is not a whole number of nanoseconds"},
		{"18446744073709551616ns", T, 0, 0,
		 "'18446744073709551616ns' is too large (over 2^64 nanoseconds)"},
		{"abc", T, 0, 0, "'abc' is not a time (a number then a unit: ns, us, ms or s)"},
		{"", T, B, 0,
		 "'' is not a time (a number then a unit: ns, us, ms or s; a bare number is ns)"},
		{"5%", T, 0, 0, "'5%' is not a time (a number then a unit: ns, us, ms or s)"},
		{"0x10ns", T, 0, 0,
		 "'0x10ns' has an unknown unit 'x10ns' (a time takes ns, us, ms or s)"},
		{"5e", T, 0, 0, "'5e' is not a time (a number then a unit: ns, us, ms or s)"},
		/* sizes: binary, K = KB = KiB, any case */
		{"64K", S, 0, 65536, NULL},
		{"64k", S, 0, 65536, NULL},
		{"1MiB", S, 0, 1048576, NULL},
		{"1MB", S, 0, 1048576, NULL},
		{"64m", S, 0, 64ull << 20, NULL},
		{"2G", S, 0, 2ull << 30, NULL},
		{"1T", S, 0, 1ull << 40, NULL},
		{"1.5K", S, 0, 1536, NULL},
		{"512B", S, 0, 512, NULL},
		{"4096", S, B, 4096, NULL},
		{"1.1K", S, 0, 0, "'1.1K' is not a whole number of bytes"},
		{"16777216T", S, 0, 0, "'16777216T' is too large (over 2^64 bytes)"},
		{"4Kb", S, 0, 0,
		 "'4Kb' has an unknown unit 'Kb' (a size takes B, K, M, G or T, binary: 1K = 1KB = "
		 "1KiB = 1024 B)"},
		{"5ms", S, 0, 0,
		 "'5ms' has the unit of a time (ms), not of a size (B, K, M, G or T, binary: 1K = "
		 "1KB "
		 "= 1KiB = 1024 B)"},
		/* counts: binary, as sizes; a bare number always */
		{"100", C, 0, 100, NULL},
		{"64K", C, 0, 65536, NULL},
		{"2m", C, 0, 2ull << 20, NULL},
		{"1.5", C, 0, 0, "'1.5' is not a whole number"},
		{"64KB", C, 0, 0,
		 "'64KB' has the unit of a size (KB), not of a count (K, M, G or T, binary: 1K = "
		 "1024; "
		 "a bare number is a count)"},
		{"16777216T", C, 0, 0, "'16777216T' is too large (over 2^64)"},
		/* rates: bits, SI */
		{"25gbit", R, 0, 25000000000ull, NULL},
		{"25Gbit", R, 0, 25000000000ull, NULL},
		{"400Gbit/s", R, 0, 400000000000ull, NULL},
		{"100mbit", R, 0, 100000000ull, NULL},
		{"100Mb/s", R, 0, 100000000ull, NULL},
		{"25Gbps", R, 0, 25000000000ull, NULL},
		{"1Tbps", R, 0, 1000000000000ull, NULL},
		{"10kbit", R, 0, 10000, NULL},
		{"1200bit", R, 0, 1200, NULL},
		{"12.5gbit", R, 0, 12500000000ull, NULL},
		/* rates: bytes */
		{"12.5GBps", R, 0, 100000000000ull, NULL},
		{"12.5GB/s", R, 0, 100000000000ull, NULL},
		{"24GB/s", R, 0, 192000000000ull, NULL},
		{"1kB/s", R, 0, 8000, NULL},
		{"3Bps", R, 0, 24, NULL},
		{"0", R, Z, 0, NULL},
		{"25", R, Z, 0,
		 "'25' needs a unit: bit/s: 25gbit, 400Gbps, 100Mbit/s (SI: 1k = 1000); or "
		 "bytes/s: "
		 "12.5GBps, 12.5GB/s"},
		{"25gbps", R, 0, 0,
		 "'25gbps' is ambiguous: tc reads gbps as BYTES per second; write bits as 25gbit "
		 "or "
		 "25Gbps, bytes as 25GBps or 25GB/s"},
		{"1kbps", R, 0, 0,
		 "'1kbps' is ambiguous: tc reads kbps as BYTES per second; write bits as 25gbit or "
		 "25Gbps, bytes as 25GBps or 25GB/s"},
		{"9bps", R, 0, 0,
		 "'9bps' is ambiguous: tc reads bps as BYTES per second; write bits as 25gbit or "
		 "25Gbps, bytes as 25GBps or 25GB/s"},
		{"1mB/s", R, 0, 0,
		 "'1mB/s' has an unknown unit 'mB/s' (a rate takes bit/s: 25gbit, 400Gbps, "
		 "100Mbit/s "
		 "(SI: 1k = 1000); or bytes/s: 12.5GBps, 12.5GB/s)"},
		{"5us", R, 0, 0,
		 "'5us' has the unit of a time (us), not of a rate (bit/s: 25gbit, 400Gbps, "
		 "100Mbit/s "
		 "(SI: 1k = 1000); or bytes/s: 12.5GBps, 12.5GB/s)"},
		{"1.5bit", R, 0, 0, "'1.5bit' is not a whole number of bit/s"},
		{"20000000Tbit", R, 0, 0, "'20000000Tbit' is too large (over 2^64 bit/s)"},
		{"-1gbit", R, 0, 0, "'-1gbit' is negative: a rate is 0 or more"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256] = "";
		uint64_t v = 12345;
		int rc = units_parse(cases[i].text, cases[i].dim, cases[i].flags, &v, err,
				     sizeof(err));
		if (!cases[i].err)
			CHECK(rc == 0 && v == cases[i].want,
			      "case %zu '%s': rc %d (%s), %llu, want %llu", i, cases[i].text, rc,
			      err, (unsigned long long)v, (unsigned long long)cases[i].want);
		else
			CHECK(rc < 0 && !strcmp(err, cases[i].err),
			      "case %zu '%s': rc %d\n  got:  %s\n  want: %s", i, cases[i].text, rc,
			      err, cases[i].err);
	}
}

static void test_format(void)
{
	static const struct {
		enum units_dim dim;
		uint64_t v;
		const char *want;
	} cases[] = {
		{T, 0, "0"},
		{T, 10000000000ull, "10s"},
		{T, 1500, "1500ns"},
		{T, 2000, "2us"},
		{T, 130, "130ns"},
		{T, 3000000, "3ms"},
		{S, 65536, "64KiB"},
		{S, 1536, "1536B"},
		{S, 1ull << 40, "1TiB"},
		{R, 1000000, "1mbit"},
		{R, 25000000000ull, "25gbit"},
		{R, 1000000000000000ull, "1000tbit"},
		{R, 7, "7bit"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[64], err[256];
		uint64_t back = 0;
		units_format(cases[i].dim, cases[i].v, buf, sizeof(buf));
		CHECK(!strcmp(buf, cases[i].want), "format %zu: '%s', want '%s'", i, buf,
		      cases[i].want);
		CHECK(units_parse(buf, cases[i].dim, UNITS_BARE_ZERO, &back, err, sizeof(err)) ==
				      0 &&
			      back == cases[i].v,
		      "format %zu: '%s' parses back to %llu (%s)", i, buf, (unsigned long long)back,
		      err);
	}
	/* Every power of ten and of two, times 1..9, in every dimension: format, then parse back. */
	for (int d = 0; d < UNITS_NDIMS; d++) {
		for (uint64_t base = 1; base && base <= UINT64_MAX / 10; base *= 10) {
			for (uint64_t k = 1; k <= 9; k++) {
				uint64_t v = base * k, two = 1ull << (k * 7 % 64), back = 0;
				char buf[64], err[256];
				for (int j = 0; j < 2; j++, v = two) {
					units_format((enum units_dim)d, v, buf, sizeof(buf));
					int rc = units_parse(buf, (enum units_dim)d, 0, &back, err,
							     sizeof(err));
					CHECK(rc == 0 && back == v,
					      "dim %d %llu -> '%s' -> %llu (%s)", d,
					      (unsigned long long)v, buf, (unsigned long long)back,
					      err);
				}
			}
		}
	}
}

static void test_aliases(void)
{
	static const struct {
		enum param_scope scope;
		const char *alias, *name;
	} want[] = {
		{PARAM_FABRIC, "latency", "latency_ns"},
		{PARAM_FABRIC, "speed", "speed_mbps"},
		{PARAM_LINK, "rate", "rate_gbps"},
		{PARAM_LINK, "latency", "latency_ns"},
		{PARAM_LINK, "jitter.sd", "jitter.sd_ns"},
		{PARAM_LINK, "reorder_delay", "reorder_delay_ns"},
		{PARAM_NIC, "host_rate", "host_rate_gbps"},
		{PARAM_NIC, "o_send", "o_send_ns"},
		{PARAM_NIC, "o_recv", "o_recv_ns"},
		{PARAM_NIC, "ack_proc", "ack_proc_ns"},
		{PARAM_SWITCH, "port_rate", "port_rate_gbps"},
		{PARAM_SWITCH, "latency", "latency_ns"},
	};
	int n = 0;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		bool alias = false;
		const struct param *p = param_find_key(want[i].scope, want[i].alias, &alias);
		CHECK(p && alias && !strcmp(p->name, want[i].name), "%s: %s", want[i].alias,
		      p ? p->name : "(none)");
		p = param_find_key(want[i].scope, want[i].name, &alias);
		CHECK(p && !alias && !strcmp(p->name, want[i].name), "%s", want[i].name);
	}
	for (int i = 0; i < param_count; i++) {
		char a[PARAM_NAME_MAX];
		const char *al = param_alias(&param_table[i], a, sizeof(a));
		n += al != NULL;
		size_t len = strlen(param_table[i].name);
		bool suffixed = (len > 3 && !strcmp(param_table[i].name + len - 3, "_ns") &&
				 param_table[i].type != PARAM_TABLE) ||
			(len > 5 && !strcmp(param_table[i].name + len - 5, "_gbps")) ||
			(len > 5 && !strcmp(param_table[i].name + len - 5, "_mbps"));
		CHECK(suffixed == (al != NULL), "%s: alias %s", param_table[i].name,
		      al ? al : "none");
	}
	CHECK(n == (int)(sizeof(want) / sizeof(want[0])), "%d aliases", n);
	bool alias;
	CHECK(param_find_key(PARAM_LINK, "hdr", &alias) == NULL, "no alias for hdr_bytes");
	CHECK(param_find_key(PARAM_LINK, "mtu", &alias) && !alias, "mtu");
}

/* The fabric JSON of a scenario, without its "scenario" (file name) field; NULL on error. */
static char *json_of(const char *yaml, char *err)
{
	struct scenario *sc = NULL;
	const char *text;
	size_t len;
	if (scn_load_buffer("t.yaml", yaml, strlen(yaml), &sc, err, SCN_ERR_LEN))
		return NULL;
	char *out = NULL;
	if (scenario_json(sc, false, &text, &len) == 0)
		out = strndup(text, len);
	scenario_free(sc);
	return out;
}

static void test_scenarios(void)
{
	static const struct {
		const char *units, *old;
	} same[] = {
		{"fabric:\n  defaults:\n    link: {rate: 25gbit, latency: 1.5us, mtu: 4K, jitter: "
		 "{dist: normal, sd: 2us}, reorder_delay: 2us}\n    nic: {host_rate: 24GB/s, "
		 "o_send: "
		 "0.42us, o_recv: 420ns, ack_proc: 0}\n  nodes: {count: 2}\n  switches: [{name: s, "
		 "port_rate: 400Gbps, latency: 130ns}]\n  links: [{ends: [[n0, n1], s]}]\n",
		 "fabric:\n  defaults:\n    link: {rate_gbps: 25, latency_ns: 1500, mtu: 4096, "
		 "jitter: "
		 "{dist: normal, sd_ns: 2000}, reorder_delay_ns: 2000}\n    nic: {host_rate_gbps: "
		 "192, "
		 "o_send_ns: 420, o_recv_ns: 420, ack_proc_ns: 0}\n  nodes: {count: 2}\n  "
		 "switches: "
		 "[{name: s, port_rate_gbps: 400, latency_ns: 130}]\n  links: [{ends: [[n0, n1], "
		 "s]}]\n"},
		{"fabric:\n  nodes: {count: 2}\n  links: [{ends: [n0, n1], rate: 12.5GB/s, loss: "
		 "0.1%, "
		 "b_to_a: {latency: 2ms}}]\n",
		 "fabric:\n  nodes: {count: 2}\n  links: [{ends: [n0, n1], rate_gbps: 100, loss: "
		 "{model: "
		 "bernoulli, p: 0.001}, b_to_a: {latency_ns: 2000000}}]\n"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {jitter: {dist: table, table: "
		 "[0, "
		 "500ns, 1.5us, 2ms]}}}\n",
		 "fabric:\n  nodes: {count: 2}\n  defaults: {link: {jitter: {dist: table, table: "
		 "[0, "
		 "500, 1500, 2000000]}}}\n"},
		{"fabric: {kind: ideal, speed: 100gbit, latency: 2us}\n",
		 "fabric: {kind: ideal, speed_mbps: 100000, latency_ns: 2000}\n"},
		{"fabric:\n  nodes: {count: 2}\nfaults:\n  - {action: degrade, link: n0, for: 1ms, "
		 "set: {rate: 10gbit, add_latency: 3us}}\n",
		 "fabric:\n  nodes: {count: 2}\nfaults:\n  - {action: degrade, link: n0, for: "
		 "1000000, "
		 "set: {rate_gbps: 10, add_latency_ns: 3000}}\n"},
		{"fabric:\n  nodes: {count: 2}\njob: {program: harness, timeout: 2s, bound: "
		 "1.5ms}\n"
		 "expect: {failure: {error: ncclRemoteError, within: 500ms}}\n",
		 "fabric:\n  nodes: {count: 2}\njob: {program: harness, timeout_s: 2, bound_s: "
		 "0.0015}\n"
		 "expect: {failure: {error: ncclRemoteError, within_s: 0.5}}\n"},
		{"fabric:\n  nodes: {count: 2}\njob: {program: nccl, op_timeout: 30s}\n",
		 "fabric:\n  nodes: {count: 2}\njob: {program: nccl, op_timeout_s: 30}\n"},
		{"fabric:\n  nodes: {count: 2}\njob: {program: nccl, sizes: [1KiB, 64K, 1MB]}\n",
		 "fabric:\n  nodes: {count: 2}\njob: {program: nccl, sizes: [1024, 65536, "
		 "1048576]}\n"},
	};
	char err[SCN_ERR_LEN];
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		char *a = json_of(same[i].units, err);
		CHECK(a, "same %zu (units): %s", i, err);
		char *b = json_of(same[i].old, err);
		CHECK(b, "same %zu (old keys): %s", i, err);
		CHECK(a && b && !strcmp(a, b), "same %zu:\n  units: %s\n  old:   %s", i, a, b);
		free(a);
		free(b);
	}
	static const struct {
		const char *yaml, *err;
	} bad[] = {
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {latency: 5us, latency_ns: "
		 "5}}\n",
		 "t.yaml:3:35: latency_ns: latency is given too: two spellings of one parameter, "
		 "keep "
		 "one (latency takes a unit, latency_ns a bare number in ns)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {rate_gbps: 25, rate: "
		 "25gbit}}\n",
		 "t.yaml:3:36: rate: rate_gbps is given too: two spellings of one parameter, keep "
		 "one "
		 "(rate takes a unit, rate_gbps a bare number in Gb/s)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {jitter: {dist: normal, sd_ns: "
		 "5, "
		 "sd: 5ns}}}\n",
		 "t.yaml:3:54: sd: sd_ns is given too: two spellings of one parameter, keep one "
		 "(sd "
		 "takes a unit, sd_ns a bare number in ns)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {latency_ns: 5us}}\n",
		 "t.yaml:3:33: latency_ns: '5us' is not an integer in 0..10000000000 (ns); with a "
		 "unit, "
		 "write latency: 5us"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {latency: 20s}}\n",
		 "t.yaml:3:30: latency: '20s' is not a time in 0..10s"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {rate: 5us}}\n",
		 "t.yaml:3:27: rate: '5us' has the unit of a time (us), not of a rate (bit/s: "
		 "25gbit, "
		 "400Gbps, 100Mbit/s (SI: 1k = 1000); or bytes/s: 12.5GBps, 12.5GB/s)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {rate: 100bit}}\n",
		 "t.yaml:3:27: rate: '100bit' is not a rate in 1mbit..1000tbit (or 0: unlimited)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {mtu: 1M}}\n",
		 "t.yaml:3:26: mtu: '1M' is not a size in 64B..64KiB"},
		{"fabric: {kind: ideal, speed: 1500kbit}\n",
		 "t.yaml:1:30: speed: '1500kbit' is not a whole number of Mbit/s"},
		{"fabric:\n  nodes: {count: 2}\nfaults:\n  - {action: degrade, link: n0, set: "
		 "{add_latency_ns: 3, add_latency: 3us}}\n",
		 "t.yaml:4:58: add_latency: add_latency_ns is given too: two spellings of one "
		 "parameter, keep one (add_latency takes a unit, add_latency_ns a bare number in "
		 "ns)"},
		{"fabric:\n  nodes: {count: 2}\njob: {program: harness, bound: 5us}\n",
		 "t.yaml:3:32: bound: '5us' is not a time in 1ms..86400s"},
		{"fabric:\n  nodes: {count: 2}\njob: {program: harness, timeout: 2500ms}\n",
		 "t.yaml:3:34: timeout: '2500ms' is not a whole number of seconds"},
		{"fabric:\n  nodes: {count: 2}\njob: {program: harness, bound: 1s, bound_s: 1}\n",
		 "t.yaml:3:36: bound_s: bound is given too: two spellings of one parameter, keep "
		 "one "
		 "(bound takes a unit, bound_s a bare number in seconds)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {nic: {delay: 5us}}\n",
		 "t.yaml:3:20: delay: unknown key in defaults.nic (known: host_rate_gbps, "
		 "o_send_ns, "
		 "o_recv_ns, ack_proc_ns, timeout_exp, retry_count, timeout_scale; with a unit: "
		 "host_rate, o_send, o_recv, ack_proc)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {jitter: {dist: normal, std: "
		 "2us}}}\n",
		 "t.yaml:3:44: std: unknown key in jitter (known: dist, sd_ns, corr, table; with a "
		 "unit: sd)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {jitter: {dist: table, table: "
		 "[1us, "
		 "11s]}}}\n",
		 "t.yaml:3:56: jitter.table: '11s' is not a time in 0..10s"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {jitter: {dist: table, table: "
		 "[1us, "
		 "1gbit]}}}\n",
		 "t.yaml:3:56: jitter.table: '1gbit' has the unit of a rate (gbit), not of a time "
		 "(ns, "
		 "us, ms or s; a bare number is ns)"},
		{"fabric:\n  nodes: {count: 2}\n  defaults: {link: {loss: 200%}}\n",
		 "t.yaml:3:27: loss: '200%' is not a probability in 0..1 (like 0.001, 1e-6 or "
		 "0.1%)"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *a = json_of(bad[i].yaml, err);
		CHECK(!a && !strcmp(err, bad[i].err), "bad %zu:\n  got:  %s\n  want: %s", i,
		      a ? "(loaded)" : err, bad[i].err);
		free(a);
	}
}

static const struct check_case cases[] = {
	CHECK_CASE(test_parse),
	CHECK_CASE(test_format),
	CHECK_CASE(test_aliases),
	CHECK_CASE(test_scenarios),
};

CHECK_MAIN(cases)
