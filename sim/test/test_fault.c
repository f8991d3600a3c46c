/* SPDX-License-Identifier: MIT */
/*
 * test_fault.c - a fault's schedule in virtual time, with exact expected values:
 *   fault_window_nth  window i: counted, cleared, one shot, forever, int64's end;
 *   fault_window      the schedule (single, forever, periodic, unbounded,
 *                     probabilistic, cleared, queries that straddle windows,
 *                     the FAULT_SCAN_MAX cut-off);
 *   fault_recover     one outage against the retry budget;
 *   fault_spec_check  every error;
 *   fault_missed_text the warning for a fault that touched nothing.
 * What faults do to messages on the data path: test_fault_path.c.
 */
#include "sim/core/fault.h"
#include "sim/core/model.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/test/check.h"
#include "sim/test/fspec.h"

/* ---- fault_window ------------------------------------------------------------------ */

/* fault_window's answer as one value: -1 (none) or the window, checked against a and b. */
static void win(const struct fault_spec *f, int64_t origin, int64_t until, int64_t lo, int64_t hi,
		int64_t want_a, int64_t want_b, int line)
{
	int64_t a = -7, b = -7;
	int r = fault_window(f, 1, 0, origin, until, lo, hi, &a, &b);
	if (want_a < 0)
		CHECK(r == 0, "line %d: [%" PRId64 ", %" PRId64 "]: a window [%" PRId64 ", %" PRId64
			      ") where none was expected",
		      line, lo, hi, a, b);
	else
		CHECK(r == 1 && a == want_a && b == want_b,
		      "line %d: [%" PRId64 ", %" PRId64 "]: got %d [%" PRId64 ", %" PRId64
		      "), want [%" PRId64 ", %" PRId64 ")",
		      line, lo, hi, r, a, b, want_a, want_b);
}
#define WIN(f, o, u, lo, hi, a, b) win(f, o, u, lo, hi, a, b, __LINE__)
#define NONE (-1)
#define FOREVER FAULT_FOREVER

static void test_window_single(void)
{
	/* origin 1000, at 500, for 100: [1500, 1600) */
	struct fault_spec f = on_link(FAULT_K_LINK_DOWN, 0, 500, 100);
	WIN(&f, 1000, FOREVER, 0, 1499, NONE, 0);
	WIN(&f, 1000, FOREVER, 0, 1500, 1500, 1600); /* hi touches the start: it overlaps */
	WIN(&f, 1000, FOREVER, 1500, 1500, 1500, 1600);
	WIN(&f, 1000, FOREVER, 1599, 1599, 1500, 1600);
	WIN(&f, 1000, FOREVER, 1600, 1600, NONE, 0); /* [a, b): b itself is up */
	WIN(&f, 1000, FOREVER, 1550, 1000000, 1500, 1600);
	WIN(&f, 1000, FOREVER, 0, INT64_MAX, 1500, 1600);
	/* not triggered: origin 0 (and a negative one) has no windows */
	WIN(&f, 0, FOREVER, 0, INT64_MAX, NONE, 0);
	WIN(&f, -5, FOREVER, 0, INT64_MAX, NONE, 0);
	/* at 0: the window starts at the origin */
	struct fault_spec g = on_link(FAULT_K_LINK_DOWN, 0, 0, 100);
	WIN(&g, 1000, FOREVER, 999, 999, NONE, 0);
	WIN(&g, 1000, FOREVER, 999, 1000, 1000, 1100);
	/* forever: for absent */
	struct fault_spec h = on_link(FAULT_K_LINK_DOWN, 0, 500, FOREVER);
	WIN(&h, 1000, FOREVER, 1000000000000000000LL, 1000000000000000000LL, 1500, FOREVER);
	WIN(&h, 1000, FOREVER, 0, 1499, NONE, 0);
	/* FAULT_A_NONE never has a window */
	struct fault_spec n = f;
	n.action = FAULT_A_NONE;
	WIN(&n, 1000, FOREVER, 0, INT64_MAX, NONE, 0);
}

/* Window i itself (fault_window_nth): what the daemon's timers and fault_window both use. */
static void test_window_nth(void)
{
	int64_t a = -7, b = -7;
	/* origin 1000, at 500, every 1000, for 100, 3 windows */
	struct fault_spec f = periodic(500, 100, 1000, 3);
	for (uint64_t i = 0; i < 3; i++)
		CHECK(fault_window_nth(&f, 1000, FOREVER, i, &a, &b) == 1 &&
			      a == 1500 + 1000 * (int64_t)i && b == a + 100,
		      "window %" PRIu64 ": [%" PRId64 ", %" PRId64 ")", i, a, b);
	CHECK(fault_window_nth(&f, 1000, FOREVER, 3, &a, &b) == 0, "past count");
	/* cleared at 2550: window 1 is cut there, window 2 (3500) never opens */
	CHECK(fault_window_nth(&f, 1000, 2550, 1, &a, &b) == 1 && a == 2500 && b == 2550, "cut");
	CHECK(fault_window_nth(&f, 1000, 2550, 2, &a, &b) == 0, "after the clear");
	CHECK(fault_window_nth(&f, 1000, 2500, 1, &a, &b) == 0, "cleared as it opens");
	/* one shot: no window 1; forever: no end */
	struct fault_spec g = on_link(FAULT_K_LINK_DOWN, 0, 0, FOREVER);
	CHECK(fault_window_nth(&g, 1000, FOREVER, 0, &a, &b) == 1 && a == 1000 && b == FOREVER,
	      "forever: [%" PRId64 ", %" PRId64 ")", a, b);
	CHECK(fault_window_nth(&g, 1000, FOREVER, 1, &a, &b) == 0, "one shot");
	/* unbounded: as far as int64 ns go, then none (no overflow) */
	struct fault_spec u = periodic(0, 10, 1000, 0);
	CHECK(fault_window_nth(&u, 1000, FOREVER, 1000000, &a, &b) == 1 && a == 1000001000 &&
		      b == 1000001010,
	      "unbounded: %" PRId64, a);
	CHECK(fault_window_nth(&u, 1000, FOREVER, UINT64_MAX / 2, &a, &b) == 0, "beyond int64");
	u.duration_ns = INT64_MAX - 1;
	u.period_ns = 0;
	u.count = 1;
	CHECK(fault_window_nth(&u, 1000, FOREVER, 0, &a, &b) == 1 && b == FOREVER, "end saturates");
	/* fault_window agrees with the first taken window_nth that reaches t, at every t */
	struct fault_spec p = periodic(300, 250, 1000, 40);
	p.prob = model_prob(0.5);
	int bad = 0;
	for (int64_t t = 0; t < 50000; t += 37) {
		int64_t wa = -1, wb = -1, na = -1, nb = -1;
		int r = fault_window(&p, 1, 0, 1000, 30000, t, t, &wa, &wb);
		for (uint64_t i = 0; fault_window_nth(&p, 1000, 30000, i, &a, &b) && a <= t; i++)
			if (b > t && fault_window_taken(&p, 1, 0, i)) {
				na = a;
				nb = b;
				break;
			}
		bad += r ? (wa != na || wb != nb) : na >= 0;
	}
	CHECK(bad == 0, "fault_window and fault_window_nth disagree %d times", bad);
}

static void test_window_periodic(void)
{
	/* origin 1000, for 100, every 1000, 3 windows: [1000,1100) [2000,2100) [3000,3100) */
	struct fault_spec f = periodic(0, 100, 1000, 3);
	WIN(&f, 1000, FOREVER, 1000, 1000, 1000, 1100);
	WIN(&f, 1000, FOREVER, 1100, 1999, NONE, 0); /* between windows */
	WIN(&f, 1000, FOREVER, 1100, 2000, 2000, 2100);
	WIN(&f, 1000, FOREVER, 2050, 2050, 2000, 2100);
	WIN(&f, 1000, FOREVER, 2500, 1000000000, 3000, 3100);
	WIN(&f, 1000, FOREVER, 3099, 3099, 3000, 3100);
	WIN(&f, 1000, FOREVER, 3100, INT64_MAX, NONE, 0); /* after the last: the 4th does not exist */
	WIN(&f, 1000, FOREVER, 4000, 4050, NONE, 0);
	/* straddling: the first window that overlaps [lo, hi] */
	WIN(&f, 1000, FOREVER, 1050, 3050, 1000, 1100);
	WIN(&f, 1000, FOREVER, 1100, 3050, 2000, 2100); /* window 0 ends at lo: not it */
	WIN(&f, 1000, FOREVER, 0, 999, NONE, 0);
	/* windows as long as the period: back to back */
	struct fault_spec g = periodic(0, 1000, 1000, 2);
	WIN(&g, 1000, FOREVER, 2000, 2000, 2000, 3000);
	WIN(&g, 1000, FOREVER, 1999, 1999, 1000, 2000);
	WIN(&g, 1000, FOREVER, 3000, 3000, NONE, 0);

	/* unbounded (count 0): window i = 10^9 starts at 1000 + 10^9 x 1000 */
	struct fault_spec u = periodic(250, 100, 1000, 0);
	int64_t w9 = 1000 + 250 + 1000000000LL * 1000;
	WIN(&u, 1000, FOREVER, w9 + 50, w9 + 50, w9, w9 + 100);
	WIN(&u, 1000, FOREVER, w9 + 100, w9 + 999, NONE, 0);
	WIN(&u, 1000, FOREVER, w9 + 100, w9 + 1000, w9 + 1000, w9 + 1100);
	/* a start past INT64_MAX saturates: no window there, no overflow */
	WIN(&u, INT64_MAX - 10, FOREVER, 0, INT64_MAX, NONE, 0);
}

static void test_window_until(void)
{
	struct fault_spec f = periodic(0, 100, 1000, 3); /* [1000,1100) [2000,2100) [3000,3100) */
	/* cleared at 2050: window 1 is cut there, window 2 never comes */
	WIN(&f, 1000, 2050, 2040, 2040, 2000, 2050);
	WIN(&f, 1000, 2050, 2050, 2050, NONE, 0);
	WIN(&f, 1000, 2050, 2050, INT64_MAX, NONE, 0);
	WIN(&f, 1000, 2050, 1050, 1050, 1000, 1100); /* an earlier window is whole */
	/* cleared exactly at a window's start: that window is gone */
	WIN(&f, 1000, 2000, 1100, INT64_MAX, NONE, 0);
	/* cleared before the first window: nothing */
	WIN(&f, 1000, 999, 0, INT64_MAX, NONE, 0);
	WIN(&f, 1000, 1000, 0, INT64_MAX, NONE, 0);
	/* a forever window cleared: it ends there */
	struct fault_spec h = on_link(FAULT_K_LINK_DOWN, 0, 0, FOREVER);
	WIN(&h, 1000, 5000, 4000, 4000, 1000, 5000);
	WIN(&h, 1000, 5000, 5000, 6000, NONE, 0);
}

/* The 99% two-sided binomial interval: |k - n p| <= 2.5758 sqrt(n p (1 - p)). */
static int binomial_ok(uint64_t k, uint64_t n, double p)
{
	double mean = (double)n * p, sd = sqrt((double)n * p * (1 - p));
	return fabs((double)k - mean) <= 2.5758 * sd;
}

static void test_window_probability(void)
{
	enum { N = 20000 };
	struct fault_spec f = periodic(0, 100, 1000, 0);
	const double ps[] = {0.5, 0.1, 0.9};
	for (size_t q = 0; q < sizeof(ps) / sizeof(ps[0]); q++) {
		f.prob = model_prob(ps[q]);
		uint64_t taken = 0, same = 0, differ = 0, otherfid = 0, bad = 0;
		for (uint64_t i = 0; i < N; i++) {
			int64_t a, b, mid = 1000 + (int64_t)i * 1000 + 50;
			/* window i is on at its middle iff it is taken (the next starts later) */
			int r1 = fault_window(&f, 1, 3, 1000, FOREVER, mid, mid, &a, &b);
			int r1b = fault_window(&f, 1, 3, 1000, FOREVER, mid, mid, &a, &b);
			int r2 = fault_window(&f, 2, 3, 1000, FOREVER, mid, mid, &a, &b);
			int r3 = fault_window(&f, 1, 4, 1000, FOREVER, mid, mid, &a, &b);
			if (r1 != fault_window_taken(&f, 1, 3, i))
				bad++;
			if (r1 && (a != mid - 50 || b != mid + 50))
				bad++;
			taken += (uint64_t)r1;
			same += r1 == r1b;
			differ += r1 != r2;
			otherfid += r1 != r3;
		}
		CHECK(bad == 0, "p %g: %" PRIu64 " windows disagree with fault_window_taken", ps[q], bad);
		CHECK(same == N, "p %g: the same seed gives the same windows", ps[q]);
		/* another seed (or fault id) is an independent draw: differs in 2p(1-p) of them */
		double pd = 2 * ps[q] * (1 - ps[q]);
		CHECK(binomial_ok(differ, N, pd), "p %g: seed 2 differs in %" PRIu64 " of %d (want ~%g)",
		      ps[q], differ, N, pd * N);
		CHECK(binomial_ok(otherfid, N, pd), "p %g: fault id 4 differs in %" PRIu64 " of %d",
		      ps[q], otherfid, N);
		CHECK(binomial_ok(taken, N, ps[q]), "p %g: %" PRIu64 " of %d windows taken", ps[q],
		      taken, N);
	}
	/* p = 1 takes every window, p = 0 none (where the scan is not cut short) */
	f.prob = MODEL_PROB_ONE;
	CHECK(fault_window_taken(&f, 9, 9, 12345), "p 1");
	f.prob = 0;
	CHECK(!fault_window_taken(&f, 9, 9, 12345), "p 0");
	WIN(&f, 1000, FOREVER, 1000, 100000, NONE, 0);
	/* a query that skips untaken windows lands on the next taken one, exactly */
	f.prob = model_prob(0.5);
	uint64_t first = 0;
	while (!fault_window_taken(&f, 1, 0, first))
		first++;
	uint64_t second = first + 1;
	while (!fault_window_taken(&f, 1, 0, second))
		second++;
	int64_t at2 = 1000 + (int64_t)second * 1000;
	WIN(&f, 1000, FOREVER, 1000 + (int64_t)first * 1000 + 100, INT64_MAX, at2, at2 + 100);
}

static void test_window_scan_max(void)
{
	/*
	 * probability 0: no window is ever taken. A query whose span covers more than
	 * FAULT_SCAN_MAX windows is cut short: it answers 2 with *a = *b = the first window
	 * not looked at (none taken before it), and the caller asks again from there. The
	 * scan starts at window 0 for lo = 1000 and looks at windows 0 .. FAULT_SCAN_MAX - 1.
	 */
	struct fault_spec f = periodic(0, 100, 1000, 0);
	f.prob = 0;
	int64_t cut = 1000 + (int64_t)FAULT_SCAN_MAX * 1000, a, b;
	WIN(&f, 1000, FOREVER, 1000, cut - 1, NONE, 0);
	CHECK(fault_window(&f, 1, 0, 1000, FOREVER, 1000, cut, &a, &b) == 2 && a == cut && b == cut,
	      "cut short at %" PRId64 ": [%" PRId64 ", %" PRId64 ")", cut, a, b);
	CHECK(fault_window(&f, 1, 0, 1000, FOREVER, 1000, INT64_MAX, &a, &b) == 2 && a == cut &&
		      b == cut,
	      "cut short at %" PRId64 ": [%" PRId64 ", %" PRId64 ")", cut, a, b);
	/* the scan starts near lo, so the cut-off counts from there */
	int64_t lo = 1000 + 50000LL * 1000 + 500; /* between windows 50000 and 50001 */
	CHECK(fault_window(&f, 1, 0, 1000, FOREVER, lo, INT64_MAX, &a, &b) == 2 && a > lo &&
		      a <= lo + (FAULT_SCAN_MAX + 2) * 1000 && b == a,
	      "cut-off from lo: [%" PRId64 ", %" PRId64 ")", a, b);
	/* a bounded fault ends the scan at its last window */
	f.count = FAULT_SCAN_MAX + 1;
	CHECK(fault_window(&f, 1, 0, 1000, FOREVER, 1000, INT64_MAX, &a, &b) == 2 && a == cut,
	      "bounded, cut short: %" PRId64, a);
	f.count = FAULT_SCAN_MAX;
	WIN(&f, 1000, FOREVER, 1000, INT64_MAX, NONE, 0);
	/* cleared before the cut-off window: nothing either */
	f.count = 0;
	WIN(&f, 1000, cut, 1000, INT64_MAX, NONE, 0);
}

/* ---- fault_recover ----------------------------------------------------------------- */

static void recover(enum fault_action act, int64_t u, int64_t b, int64_t to, uint32_t left,
		    int want_rc, int64_t want_resume, uint32_t want_used, int line)
{
	int64_t resume = -7;
	uint32_t used = 12345;
	int rc = fault_recover(act, u, b, to, left, &resume, &used);
	CHECK(rc == want_rc && resume == want_resume && used == want_used,
	      "line %d: got rc %d resume %" PRId64 " used %u, want %d %" PRId64 " %u", line, rc,
	      resume, used, want_rc, want_resume, want_used);
}
#define RECOVER(...) recover(__VA_ARGS__, __LINE__)

static void test_recover(void)
{
	/* the worked example: timeout_exp 10, retry_count 7 */
	struct model_nic nic = {.timeout_exp = 10, .retry_count = 7, .timeout_scale_ppm = 1000000};
	CHECK(model_timeout_ns(&nic) == TO, "T_o %" PRId64, model_timeout_ns(&nic));
	const int64_t u = 5 * MS;
	/* DOWN: D = 7 T_o exactly, just inside the budget: the 7th retry, at b, gets through */
	RECOVER(FAULT_A_DOWN, u, u + 7 * TO, TO, 7, 0, u + 7 * TO, 7);
	/* one ns more: the 7th retry is lost too; it fails at the 8th timeout, u + 33.55 ms */
	RECOVER(FAULT_A_DOWN, u, u + 7 * TO + 1, TO, 7, 1, u + 8 * TO, 7);
	CHECK(8 * TO == 33554432, "u + 33.6 ms");
	/* k = ceil(D / T_o) */
	RECOVER(FAULT_A_DOWN, u, u + 1, TO, 7, 0, u + TO, 1);
	RECOVER(FAULT_A_DOWN, u, u + TO, TO, 7, 0, u + TO, 1);
	RECOVER(FAULT_A_DOWN, u, u + TO + 1, TO, 7, 0, u + 2 * TO, 2);
	RECOVER(FAULT_A_DOWN, u, u + 5 * TO / 2, TO, 7, 0, u + 3 * TO, 3);
	/* a smaller budget: retries_left of it */
	RECOVER(FAULT_A_DOWN, u, u + 3 * TO, TO, 3, 0, u + 3 * TO, 3);
	RECOVER(FAULT_A_DOWN, u, u + 3 * TO + 1, TO, 3, 1, u + 4 * TO, 3);
	RECOVER(FAULT_A_DOWN, u, u + 1, TO, 0, 1, u + TO, 0);
	/* no end: fails at u + (left + 1) T_o */
	RECOVER(FAULT_A_DOWN, u, FAULT_FOREVER, TO, 7, 1, u + 8 * TO, 7);
	/* STALL: resumes at b itself; the timeouts it sat through are spent */
	RECOVER(FAULT_A_STALL, u, u + 5 * TO / 2, TO, 7, 0, u + 5 * TO / 2, 2);
	RECOVER(FAULT_A_STALL, u, u + 7 * TO, TO, 7, 0, u + 7 * TO, 7);
	RECOVER(FAULT_A_STALL, u, u + 7 * TO + 1, TO, 7, 1, u + 8 * TO, 7);
	RECOVER(FAULT_A_STALL, u, u + 100, TO, 7, 0, u + 100, 0);
	RECOVER(FAULT_A_STALL, u, FAULT_FOREVER, TO, 7, 1, u + 8 * TO, 7);
	/* no ACK timer (MODEL_NEVER): a stall simply resumes, a down link never recovers */
	RECOVER(FAULT_A_STALL, u, u + 1000 * MS, MODEL_NEVER, 7, 0, u + 1000 * MS, 0);
	RECOVER(FAULT_A_DOWN, u, u + 1, MODEL_NEVER, 7, 1, FAULT_FOREVER, 0);
	/* saturation: a huge timeout does not overflow */
	RECOVER(FAULT_A_DOWN, u, FAULT_FOREVER, INT64_MAX / 2, 7, 1, INT64_MAX, 7);
}

/* ---- fault_spec_check -------------------------------------------------------------- */

static void spec_err(const struct fault_spec *f, const char *want, int line)
{
	char err[256] = "";
	int rc = fault_spec_check(f, err, sizeof(err));
	if (!want)
		CHECK(rc == 0, "line %d: refused: %s", line, err);
	else
		CHECK(rc == -EINVAL && !strcmp(err, want), "line %d: rc %d '%s', want '%s'", line, rc,
		      err, want);
}
#define SPEC(f, want) spec_err(f, want, __LINE__)

static void test_spec_check(void)
{
	struct fault_spec ok = periodic(0, 100, 1000, 3), f;
	SPEC(&ok, NULL);
	f = ok;
	f.kind = FAULT_K_COUNT;
	SPEC(&f, "action: unknown action 16");
	f = ok;
	f.action = FAULT_A_STALL; /* not the kind's */
	SPEC(&f, "action: unknown action 2");
	f = ok;
	f.nlinks = FAULT_MAX_LINKS + 1;
	SPEC(&f, "link: more than 32 directed links");
	f = ok;
	f.trigger = 4;
	SPEC(&f, "after: unknown trigger 4");
	f = ok;
	f.start_ns = -1;
	SPEC(&f, "at: negative");
	f = ok;
	f.duration_ns = 0;
	SPEC(&f, "for: must be positive");
	f = ok;
	f.period_ns = -1;
	SPEC(&f, "every: -1 ns is below 1 us");
	f = ok;
	f.period_ns = 999;
	f.duration_ns = 10;
	SPEC(&f, "every: 999 ns is below 1 us");
	f.period_ns = 1000;
	SPEC(&f, NULL);
	f = ok;
	f.duration_ns = FAULT_FOREVER;
	SPEC(&f, "for: a window without an end cannot repeat");
	f = on_link(FAULT_K_LINK_DOWN, 0, 0, FAULT_FOREVER);
	SPEC(&f, NULL);
	f.count = 2;
	SPEC(&f, "for: a window without an end cannot repeat");
	f = ok;
	f.period_ns = 0;
	f.count = 0;
	SPEC(&f, "count: unbounded windows need a period (every:)");
	f = ok;
	f.duration_ns = 1001;
	SPEC(&f, "for: a window (1001 ns) longer than its period (1000 ns) overlaps the next");
	f.duration_ns = 1000;
	SPEC(&f, NULL);
	f = ok;
	f.trigger = FAULT_T_MESSAGES;
	SPEC(&f, "after: the count must be at least 1");
	f.trigger = FAULT_T_BYTES;
	SPEC(&f, "after: the count must be at least 1");
	f.threshold = 1;
	SPEC(&f, NULL);
	f.trigger = FAULT_T_FIRST_TRAFFIC;
	f.threshold = 0;
	SPEC(&f, NULL);
	/* scopes */
	f = on_link(FAULT_K_LINK_DOWN, 0, 0, 100);
	f.nlinks = 0;
	SPEC(&f, "link: link_down needs links");
	f = on_link(FAULT_K_NIC_DOWN, 0, 0, 100);
	f.nlinks = 0;
	SPEC(&f, "link: nic_down needs links");
	f = on_link(FAULT_K_DEGRADE, 0, 0, 100);
	f.set = FAULT_SET_RATE;
	f.rate_bps = 1000000000;
	SPEC(&f, NULL);
	f.nlinks = 0;
	SPEC(&f, "link: degrade needs links");
	f.nlinks = 1;
	f.set = 0;
	SPEC(&f, "set: a degrade changes at least one of rate_gbps, add_latency_ns, loss, corrupt");
	f = on_link(FAULT_K_STALL, 0, 0, 100);
	SPEC(&f, NULL);
	f.nlinks = 0;
	SPEC(&f, "link: a stall needs a link or a connection");
	f = on_conn(FAULT_K_STALL, 0, 1, 0, 100);
	SPEC(&f, NULL);
	f = on_conn(FAULT_K_RESET, 0, 1, 0, FAULT_FOREVER);
	SPEC(&f, NULL);
	f.conn_scope = 0;
	SPEC(&f, "conn: a reset needs a connection scope");
	f = spec(FAULT_K_CONNECT_DELAY, 0, 100);
	SPEC(&f, "delay: must be positive");
	f.delay_ns = 5;
	SPEC(&f, NULL);
	f = spec(FAULT_K_NODE_KILL, 0, 1);
	SPEC(&f, "node: node_kill needs a node");
	f.node = 2;
	SPEC(&f, NULL);
	f = spec(FAULT_K_CONNECT_REFUSE, 0, 100);
	SPEC(&f, NULL);
}

/* fault_missed_text: the line for a fault that hit nothing, and none for one that hit. */
static void test_missed_text(void)
{
	struct fault_spec f = {0};
	char buf[512] = "";
	snprintf(f.name, sizeof(f.name), "flap");
	f.trigger = FAULT_T_TIME;
	CHECK(fault_missed_text(&f, 0, 0, 0, 0, 50000000, 70000000, buf, sizeof(buf)) == 1, "missed");
	CHECK(strstr(buf, "fault #0 'flap' opened at 50ms and closed at 70ms") != NULL, "%s", buf);
	CHECK(strstr(buf, "it hit nothing") && strstr(buf, "after: {first_traffic: LINK}"), "%s",
	      buf);
	CHECK(strstr(buf, "daemon's start"), "the clock's origin named: %s", buf);
	strcpy(buf, "untouched");
	CHECK(fault_missed_text(&f, 0, 1, 0, 0, 1, 2, buf, sizeof(buf)) == 0, "a hit");
	CHECK(fault_missed_text(&f, 0, 0, 3, 0, 1, 2, buf, sizeof(buf)) == 0, "delayed");
	CHECK(fault_missed_text(&f, 0, 0, 0, 1, 1, 2, buf, sizeof(buf)) == 0, "failed");
	CHECK(!strcmp(buf, "untouched"), "%s", buf);
	f.trigger = FAULT_T_FIRST_TRAFFIC;
	CHECK(fault_missed_text(&f, 2, 0, 0, 0, 5000, -1, buf, sizeof(buf)) == 1, "missed");
	CHECK(!strcmp(buf, "fault #2 'flap' opened at 5us (fabric time, from the daemon's start): "
			   "it hit nothing"),
	      "%s", buf);
	char small[16];
	CHECK(fault_missed_text(&f, 2, 0, 0, 0, 5000, 9000, small, sizeof(small)) == 1 &&
		      strlen(small) == sizeof(small) - 1,
	      "truncated safely: %s", small);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_window_single),
	CHECK_CASE(test_window_nth),
	CHECK_CASE(test_window_periodic),
	CHECK_CASE(test_window_until),
	CHECK_CASE(test_window_probability),
	CHECK_CASE(test_window_scan_max),
	CHECK_CASE(test_recover),
	CHECK_CASE(test_spec_check),
	CHECK_CASE(test_missed_text),
};

CHECK_MAIN(cases)
