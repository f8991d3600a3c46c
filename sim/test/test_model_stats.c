/* SPDX-License-Identifier: MIT */
/*
 * test_model_stats.c - the model's random parts against their distributions:
 * jitter (normal, Pareto, Pareto-normal, uniform, tables: Kolmogorov-Smirnov) and its
 * FIFO order, and loss (Bernoulli, Gilbert-Elliott, 4-state), over >= 10^5
 * draws with fixed seeds (so they cannot flake). Exact timing: test_model.c.
 */
#include "sim/core/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/test/check.h"
#include "sim/test/mfix.h"

/* ---- jitter -------------------------------------------------------------------------- */

/* The test's own normal quantile: Acklam's approximation, polished by Halley steps. */
static double t_phi(double x)
{
	return 0.5 * erfc(-x / sqrt(2));
}

static double t_phi_inv(double p)
{
	static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
				   -2.759285104469687e+02, 1.383577518672690e+02,
				   -3.066479806614716e+01, 2.506628277459239e+00};
	static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
				   -1.556989798598866e+02, 6.680131188771972e+01,
				   -1.328068155288572e+01};
	static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
				   -2.400758277161838e+00, -2.549732539343734e+00,
				   4.374664141464968e+00,  2.938163982698783e+00};
	static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
				   2.445134137142996e+00, 3.754408661907416e+00};
	double x, q, r;
	if (p < 0.02425) {
		q = sqrt(-2 * log(p));
		x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	} else if (p > 1 - 0.02425) {
		q = sqrt(-2 * log(1 - p));
		x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	} else {
		q = p - 0.5;
		r = q * q;
		x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
		    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
	}
	for (int i = 0; i < 2; i++) {
		double e = (p < 0.5 ? t_phi(x) - p : -(0.5 * erfc(x / sqrt(2)) - (1 - p)));
		double u = e * sqrt(2 * M_PI) * exp(x * x / 2);
		x -= u / (1 + x * u / 2);
	}
	return x;
}

static void test_normal(void)
{
	double worst = 0;
	for (int i = -160; i <= 150; i++) {
		double u = i <= 0 ? pow(10, -16 + (i + 160) / 10.0) * 0.5
				  : 1 - pow(10, -i / 10.0) * 0.5;
		if (i == 0)
			u = 0.5;
		double d = fabs(model_phi_inv(u) - t_phi_inv(u));
		worst = d > worst ? d : worst;
	}
	CHECK(worst < 1e-9, "AS241 vs Acklam+Halley: %g", worst);
	for (double z = -8; z <= 6; z += 0.25) /* above 6, Phi(z) rounds toward 1 */
		CHECK(fabs(model_phi_inv(model_phi(z)) - z) < 1e-6, "round trip at %g: %.17g", z,
		      model_phi_inv(model_phi(z)));
	CHECK(model_phi_inv(0) == -INFINITY && model_phi_inv(1) == INFINITY, "ends");
}

/* Simpson's rule for the model's own quantile function: its mean and sd must be the
 * constants in model.h's table (this checks model.c's hard-coded constants). */
static void test_jitter_constants(void)
{
	static const struct {
		enum model_dist d;
		double mean;
	} c[] = {{MODEL_DIST_UNIFORM, 1.7320508075688772},
		 {MODEL_DIST_NORMAL, 4.0021431404195034},
		 {MODEL_DIST_PARETO, 0.69282032302755092},
		 {MODEL_DIST_PARETONORMAL, 1.5864950278960499}};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct model_jitter j = {.dist = c[i].d, .sd_ns = 1000000};
		/* substitute u = (1 - cos(pi t)) / 2 to resolve the steep ends */
		const int N = 1 << 18;
		double s1 = 0, s2 = 0;
		for (int k = 0; k <= N; k++) {
			double t = (double)k / N, u = (1 - cos(M_PI * t)) / 2;
			double w = (k == 0 || k == N) ? 1 : (k & 1) ? 4 : 2;
			double jac = M_PI / 2 * sin(M_PI * t);
			double x = model_jitter_quantile(&j, u) / 1e6;
			s1 += w * x * jac;
			s2 += w * x * x * jac;
		}
		s1 /= 3.0 * N;
		s2 /= 3.0 * N;
		double sd = sqrt(s2 - s1 * s1);
		double mm = model_jitter_mean(&j) / 1e6;
		CHECK(fabs(s1 - c[i].mean) < 1e-6 && fabs(mm - c[i].mean) < 1e-12,
		      "dist %d: mean %.9f by quadrature, %.9f from the model, want %.9f", c[i].d,
		      s1, mm, c[i].mean);
		CHECK(fabs(sd - 1) < 1e-6, "dist %d: sd %.9f by quadrature", c[i].d, sd);
		CHECK(model_jitter_quantile(&j, 0) >= 0 && model_jitter_quantile(&j, 0) < 1e-3 &&
			      model_jitter_quantile(&j, 1e-300) >= 0,
		      "dist %d: lower bound %g", c[i].d, model_jitter_quantile(&j, 0));
	}
}

/* The configured (shifted) CDFs, written independently of model.c. */
static double g_sd, g_pn_grid[(1 << 16) + 1];
static const int64_t *g_table;
static int g_ntable;

static double cdf_uniform(double x)
{
	double v = x / (2 * sqrt(3) * g_sd);
	return v < 0 ? 0 : v > 1 ? 1 : v;
}

static double s4(void)
{
	double a = t_phi(-4), phi4 = exp(-8) / sqrt(2 * M_PI);
	return sqrt(1 - 8 * phi4 / (1 - 2 * a));
}

static double cdf_normal(double x)
{
	double a = t_phi(-4), z = x * s4() / g_sd - 4;
	double v = (t_phi(z) - a) / (1 - 2 * a);
	return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* Pareto(3, 1) conditioned on Y <= 10, moments in closed form. */
static void pareto_moments(double *mu, double *sd)
{
	double c = 1 - 1e-3;
	*mu = 1.5 * (1 - 1e-2) / c;
	*sd = sqrt(3 * (1 - 0.1) / c - *mu * *mu);
}

static double cdf_pareto(double x)
{
	double mu, sd;
	pareto_moments(&mu, &sd);
	double y = 1 + x * sd / g_sd;
	double v = (1 - 1 / (y * y * y)) / (1 - 1e-3);
	return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* paretonormal: (N + 3 P) / 4 of the standardised quantiles, shifted and scaled to sd 1 by
 * quadrature here; the CDF by inverting a fine grid of the quantile. */
static void pn_grid(void)
{
	const int G = 1 << 16;
	double mu, sd, a = t_phi(-4);
	pareto_moments(&mu, &sd);
	for (int i = 0; i <= G; i++) {
		double u = (double)i / G;
		double n = t_phi_inv(a + u * (1 - 2 * a));
		double p = (1 / cbrt(1 - u * (1 - 1e-3)) - mu) / sd;
		g_pn_grid[i] = (n + 3 * p) / 4;
	}
	double lo = g_pn_grid[0], m = 0, m2 = 0;
	for (int i = 0; i < G; i++) { /* midpoint rule on the grid's cells */
		double v = (g_pn_grid[i] + g_pn_grid[i + 1]) / 2 - lo;
		m += v, m2 += v * v;
	}
	m /= G, m2 /= G;
	double s = sqrt(m2 - m * m);
	for (int i = 0; i <= G; i++)
		g_pn_grid[i] = (g_pn_grid[i] - lo) / s;
}

static double cdf_pn(double x)
{
	const int G = 1 << 16;
	double v = x / g_sd;
	if (v <= g_pn_grid[0])
		return 0;
	if (v >= g_pn_grid[G])
		return 1;
	int lo = 0, hi = G;
	while (hi - lo > 1) {
		int mid = (lo + hi) / 2;
		if (g_pn_grid[mid] <= v)
			lo = mid;
		else
			hi = mid;
	}
	double f = (v - g_pn_grid[lo]) / (g_pn_grid[hi] - g_pn_grid[lo]);
	return (lo + f) / G;
}

/* The table's discrete CDF at x: entries - entry 0 that are <= x, over n. */
static double cdf_table(double x)
{
	int k = 0;
	while (k < g_ntable && (double)(g_table[k] - g_table[0]) <= x)
		k++;
	return (double)k / g_ntable;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Kolmogorov's limit distribution with Stephens' small-sample correction. */
static double ks_p(double d, size_t n)
{
	double en = sqrt((double)n), lam = (en + 0.12 + 0.11 / en) * d, s = 0;
	if (lam < 0.3)
		return 1;
	for (int k = 1; k <= 100; k++) {
		double t = 2 * exp(-2.0 * k * k * lam * lam) * ((k & 1) ? 1 : -1);
		s += t;
		if (fabs(t) < 1e-12)
			break;
	}
	return s < 0 ? 0 : s > 1 ? 1 : s;
}

/* D of a sorted sample against F; a discrete F needs F(x-) too: the largest step below. */
static double ks_d(const int64_t *x, size_t n, double (*cdf)(double), int discrete)
{
	double d = 0;
	for (size_t i = 0; i < n;) {
		size_t k = i;
		while (k < n && x[k] == x[i])
			k++;
		double f = cdf((double)x[i]);
		double fm = discrete ? cdf((double)x[i] - 0.5) : f;
		double lo = fabs((double)i / n - fm), hi = fabs((double)k / n - f);
		d = lo > d ? lo : d;
		d = hi > d ? hi : d;
		i = k;
	}
	return d;
}

/*
 * For each distribution, without and with correlation rho = 0.5: 10^6 draws on one
 * connection. The sd of all draws within 2% of the configured one, the mean within 5
 * standard errors (2% for pareto's heavier tail); KS at p > 0.01 on every 10th draw
 * (10^5 nearly independent ones: at lag 10 the correlation is ~ 0.5^10) against the
 * configured, shifted CDF; the lag-1 correlation of the AR(1) Gaussian scores within 0.01
 * of rho and their sd within 1% of 1.
 */
static void test_jitter_stats(void)
{
	static int64_t table[1000];
	for (int i = 0; i < 1000; i++) /* an exponential (mean 50 us) above a 7 us floor */
		table[i] = 7000 + (int64_t)llround(-log(1 - (i + 0.5) / 1000) * 50000);
	g_table = table;
	g_ntable = 1000;
	pn_grid();
	static const struct {
		enum model_dist d;
		const char *name;
		double (*cdf)(double);
	} dists[] = {{MODEL_DIST_UNIFORM, "uniform", cdf_uniform},
		     {MODEL_DIST_NORMAL, "normal", cdf_normal},
		     {MODEL_DIST_PARETO, "pareto", cdf_pareto},
		     {MODEL_DIST_PARETONORMAL, "paretonormal", cdf_pn},
		     {MODEL_DIST_TABLE, "table", cdf_table}};
	const size_t N = 1000000, THIN = 10;
	int64_t *x = malloc(N * sizeof(*x)), *ks = malloc(N / THIN * sizeof(*ks));
	double *z = malloc(N * sizeof(*z));
	for (size_t di = 0; di < sizeof(dists) / sizeof(dists[0]); di++)
		for (int ci = 0; ci < 2; ci++) {
			struct model_jitter j = {.dist = dists[di].d, .sd_ns = 1000000,
						 .rho = ci ? 0.5 : 0};
			if (j.dist == MODEL_DIST_TABLE) {
				j.sd_ns = 0;
				j.table = table;
				j.ntable = 1000;
			}
			char err[MODEL_ERR_LEN];
			CHECK(model_jitter_check(&j, err, sizeof(err)) == 0, "%s", err);
			g_sd = 1e6;
			/* each distribution its own stream: KS is blind to monotone maps, so a
			 * shared stream would give every one the same D */
			struct model_key k = {.seed = 1234, .link = 5 + (uint32_t)di, .conn = 77};
			double zs = 0, s = 0, s2 = 0;
			int64_t mn = INT64_MAX;
			for (size_t i = 0; i < N; i++) {
				k.msg = i;
				x[i] = model_jitter_ns(&j, &k, &zs);
				z[i] = zs;
				s += (double)x[i];
				s2 += (double)x[i] * (double)x[i];
				mn = x[i] < mn ? x[i] : mn;
			}
			double mean = s / N, sd = sqrt(s2 / N - mean * mean);
			double want_sd = model_jitter_sd(&j), want_mean = model_jitter_mean(&j);
			for (size_t i = 0; i < N / THIN; i++)
				ks[i] = x[i * THIN];
			qsort(ks, N / THIN, sizeof(*ks), cmp_i64);
			double d = ks_d(ks, N / THIN, dists[di].cdf, j.dist == MODEL_DIST_TABLE);
			double p = ks_p(d, N / THIN);
			double r1 = 0, zm = 0, zv = 0;
			if (ci) {
				for (size_t i = 0; i < N; i++)
					zm += z[i];
				zm /= N;
				for (size_t i = 0; i < N; i++)
					zv += (z[i] - zm) * (z[i] - zm);
				for (size_t i = 0; i + 1 < N; i++)
					r1 += (z[i] - zm) * (z[i + 1] - zm);
				r1 /= zv;
				zv = sqrt(zv / N);
			}
			printf("  jitter %-12s rho %.1f: mean %10.1f (want %10.1f) sd %10.1f (want "
			       "%10.1f, %+.2f%%) min %lld KS D %.5f p %.3f",
			       dists[di].name, j.rho, mean, want_mean, sd, want_sd,
			       100 * (sd / want_sd - 1), (long long)mn, d, p);
			if (ci)
				printf(" lag-1 %.4f score sd %.4f", r1, zv);
			printf("\n");
			CHECK(mn >= 0, "%s: negative jitter %lld", dists[di].name, (long long)mn);
			const char *nm = dists[di].name;
			CHECK(fabs(sd / want_sd - 1) < 0.02, "%s rho %g: sd %g, want %g", nm, j.rho,
			      sd, want_sd);
			/* 5 standard errors; with rho = 0.5 the AR(1) factor sqrt((1 + rho) /
			 * (1 - rho)) = sqrt(3) of the scores bounds that of the draws */
			double se = want_sd / sqrt((double)N) * (ci ? sqrt(3) : 1);
			CHECK(fabs(mean - want_mean) < 5 * se, "%s rho %g: mean %g, want %g", nm,
			      j.rho, mean, want_mean);
			CHECK(p > 0.01, "%s rho %g: KS D = %g, p = %g", nm, j.rho, d, p);
			if (ci)
				CHECK(fabs(r1 - 0.5) < 0.01 && fabs(zv - 1) < 0.01,
				      "%s: lag-1 correlation %g, score sd %g", nm, r1, zv);
			else
				CHECK(zs == 0, "rho 0 leaves the score alone");
		}
	free(x);
	free(ks);
	free(z);
	/* The same sd with netem's method would have shrunk by sqrt((1 - rho) / (1 + rho)):
	 * ours keeps it (checked above). A table of one entry is a constant 0. */
	int64_t one = 5;
	struct model_jitter j1 = {.dist = MODEL_DIST_TABLE, .ntable = 1, .table = &one};
	struct model_key k = {.seed = 1};
	double zz = 0;
	EQ(model_jitter_ns(&j1, &k, &zz), 0);
	struct model_jitter j0 = {.dist = MODEL_DIST_NORMAL, .sd_ns = 0};
	EQ(model_jitter_ns(&j0, &k, &zz), 0);
	/* a garbage score restarts the process instead of poisoning the draw */
	struct model_jitter ju = {.dist = MODEL_DIST_UNIFORM, .sd_ns = 1000, .rho = 0.5};
	zz = NAN;
	int64_t v = model_jitter_ns(&ju, &k, &zz);
	CHECK(v >= 0 && v <= 3465 && isfinite(zz), "NaN score: %lld", (long long)v);
	zz = 0;
	EQ(model_jitter_ns(&ju, &k, &zz), v);
}

/*
 * Jitter never reorders messages on a connection and never makes one early: messages
 * every 100 ns on one hop (no rate), jitter sd 10 us: each arrival is >= the no-jitter
 * arrival and >= the previous one. Across two connections completions do reorder.
 */
static void test_jitter_fifo(void)
{
	struct model_link l = mklink(0, 1000, 4096, 26);
	l.jitter.dist = MODEL_DIST_PARETO;
	l.jitter.sd_ns = 10000;
	l.jitter.rho = 0.3;
	struct model_path p = mkpath(1, &l, MODEL_CUT_THROUGH);
	struct model_nic nic = mknic(0, 0, 0, 0);
	struct st a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	int64_t prev_a = 0, prev_b = 0;
	int early = 0, unordered = 0, crossed = 0;
	for (uint64_t i = 0; i < 100000; i++) {
		int64_t t = (int64_t)i * 100;
		struct model_msg ma = send1(&p, &nic, &a, 1, i, t, 64);
		struct model_msg mb = send1(&p, &nic, &b, 2, i, t, 64);
		early += ma.arrive_ns < t + 1000 || mb.arrive_ns < t + 1000;
		unordered += ma.arrive_ns < prev_a || mb.arrive_ns < prev_b;
		crossed += (ma.arrive_ns < mb.arrive_ns) != (prev_a < prev_b);
		prev_a = ma.arrive_ns;
		prev_b = mb.arrive_ns;
	}
	EQ(early, 0);
	EQ(unordered, 0);
	CHECK(crossed > 100, "completions across connections reordered %d times", crossed);
}

/* ---- loss statistics --------------------------------------------------------------- */

/* Count the losses and loss bursts over `trains` trains of `n` packets on one link,
 * merging a burst that runs across a train boundary. */
struct lstats {
	uint64_t packets, lost, bursts, isolated;
};

static struct lstats loss_run(const struct model_loss *l, uint64_t trains, uint64_t n)
{
	struct lstats r = {0};
	struct model_loss_state st = {0};
	int carry = 0; /* the previous train ended lost */
	uint64_t cur = 0;
	for (uint64_t t = 0; t < trains; t++) {
		struct model_key k = {.seed = 99, .link = 3, .conn = 1, .msg = t};
		struct model_loss_iter it;
		model_loss_begin(&it, l, &st, &k, n, 0);
		uint64_t from = 0;
		for (;;) {
			uint64_t a = model_loss_next(&it, from, 1);
			if (a >= n)
				break;
			uint64_t b = model_loss_next(&it, a, 0);
			r.lost += b - a;
			if (a == 0 && carry)
				cur += b - a;
			else {
				if (cur == 1)
					r.isolated++;
				r.bursts++;
				cur = b - a;
			}
			carry = b == n;
			from = b;
			if (b >= n)
				break;
		}
		if (from < n)
			carry = 0;
		model_loss_end(&it);
		r.packets += n;
	}
	if (cur == 1)
		r.isolated++;
	int markov = l->kind == MODEL_LOSS_GE || l->kind == MODEL_LOSS_4STATE;
	CHECK(st.packets == (markov ? r.packets : 0), "link ordinal %llu",
	      (unsigned long long)st.packets);
	return r;
}

static void test_loss_stats(void)
{
	/* Bernoulli 1% over 10^6 packets: inside the 99% binomial interval
	 * 10^4 +- 2.5758 * sqrt(10^6 * 0.01 * 0.99) = 10^4 +- 256.3 */
	struct model_loss b = {.kind = MODEL_LOSS_BERNOULLI, .p = {model_prob(0.01)}};
	struct lstats r = loss_run(&b, 7813, 128);
	double np = r.packets * 0.01, half = 2.5758 * sqrt(np * 0.99);
	printf("  bernoulli 1%%: %llu lost of %llu (99%% interval %.0f..%.0f), mean burst %.4f "
	       "(want %.4f)\n",
	       (unsigned long long)r.lost, (unsigned long long)r.packets, np - half, np + half,
	       (double)r.lost / r.bursts, 1 / 0.99);
	CHECK(fabs(r.lost - np) < half, "bernoulli: %llu lost", (unsigned long long)r.lost);
	CHECK(fabs((double)r.lost / r.bursts - 1 / 0.99) < 0.005, "bernoulli burst");
	/* the same in one big train, and p = 20% */
	b.p[0] = model_prob(0.2);
	r = loss_run(&b, 1, 1000000);
	np = r.packets * 0.2;
	half = 2.5758 * sqrt(np * 0.8);
	printf("  bernoulli 20%%: %llu lost of %llu (99%% interval %.0f..%.0f)\n",
	       (unsigned long long)r.lost, (unsigned long long)r.packets, np - half, np + half);
	CHECK(fabs(r.lost - np) < half, "bernoulli 20%%: %llu lost", (unsigned long long)r.lost);

	/* simple Gilbert: GE p = 1%, r = 25%, bad loses all, good none: bursts are the bad
	 * sojourns, mean 1 / r = 4; loss rate p / (p + r) = 3.846% (4 * 10^6 packets) */
	struct model_loss ge = {.kind = MODEL_LOSS_GE,
				.p = {model_prob(0.01), model_prob(0.25), ONE, 0}};
	r = loss_run(&ge, 4000, 1000);
	double burst = (double)r.lost / r.bursts, rate = (double)r.lost / r.packets;
	printf("  gilbert p 1%% r 25%%: mean burst %.4f (want 4, %+.2f%%), loss %.5f (want %.5f)\n",
	       burst, 100 * (burst / 4 - 1), rate, model_loss_rate(&ge));
	CHECK(fabs(burst / 4 - 1) < 0.05, "GE burst %g", burst);
	CHECK(fabs(rate / model_loss_rate(&ge) - 1) < 0.05, "GE rate %g", rate);
	/* general GE: p 2%, r 20%, 1-h 50%, 1-k 0.1%: rate 0.909 * 0.001 + 0.0909 * 0.5 */
	struct model_loss ge2 = {.kind = MODEL_LOSS_GE,
				 .p = {model_prob(0.02), model_prob(0.2), model_prob(0.5),
				       model_prob(0.001)}};
	r = loss_run(&ge2, 2000, 1000);
	rate = (double)r.lost / r.packets;
	printf("  ge p 2%% r 20%% 1-h 50%% 1-k 0.1%%: loss %.5f (want %.5f)\n", rate,
	       model_loss_rate(&ge2));
	CHECK(fabs(model_loss_rate(&ge2) - (0.2 / 0.22 * 0.001 + 0.02 / 0.22 * 0.5)) < 1e-9,
	      "GE rate formula");
	CHECK(fabs(rate / model_loss_rate(&ge2) - 1) < 0.05, "GE2 rate %g", rate);

	/* 4-state with all five: the isolated losses (state 4) count. Stationary weights
	 * pi1 : pi2 : pi3 : pi4 = 1 : (p13/p31) (p32/p23) : p13/p31 : p14; netem's pre-3.13
	 * bug (comparing against p13, not p13 + p14) would lose 13% of the losses. */
	struct model_loss s4 = {.kind = MODEL_LOSS_4STATE,
				.p = {model_prob(0.01), model_prob(0.3), model_prob(0.2),
				      model_prob(0.1), model_prob(0.005)}};
	double w3 = 0.01 / 0.3, w2 = w3 * 0.2 / 0.1, want = (w3 + 0.005) / (1 + w2 + w3 + 0.005);
	CHECK(fabs(model_loss_rate(&s4) - want) < 1e-9, "4-state rate %g, want %g",
	      model_loss_rate(&s4), want);
	r = loss_run(&s4, 4000, 1000);
	rate = (double)r.lost / r.packets;
	printf("  4state: loss %.5f (want %.5f), %llu bursts, %llu isolated\n", rate, want,
	       (unsigned long long)r.bursts, (unsigned long long)r.isolated);
	CHECK(fabs(rate / want - 1) < 0.05, "4-state rate %g", rate);
	/* tc's `state p13`: p31 = 1 - p13, p23 = 1: Bernoulli(p13) exactly */
	struct model_loss s4b = {.kind = MODEL_LOSS_4STATE,
				 .p = {model_prob(0.05), model_prob(0.95), 0, ONE, 0}};
	CHECK(fabs(model_loss_rate(&s4b) - 0.05) < 1e-9, "4-state as Bernoulli");
	r = loss_run(&s4b, 1000, 1000);
	np = r.packets * 0.05;
	half = 2.5758 * sqrt(np * 0.95);
	CHECK(fabs(r.lost - np) < half, "4-state as bernoulli: %llu", (unsigned long long)r.lost);
	CHECK(fabs((double)r.lost / r.bursts - 1 / 0.95) < 0.01, "its bursts");
	/* degenerate chains */
	struct model_loss d = {.kind = MODEL_LOSS_4STATE, .p = {0, 0, 0, 0, 0}};
	CHECK(model_loss_rate(&d) == 0, "stays in 1");
	d.p[0] = ONE;
	CHECK(model_loss_rate(&d) == 1, "absorbed in 3");
	r = loss_run(&d, 10, 100);
	EQ(r.lost, 1000);
	d.p[0] = 0, d.p[4] = ONE; /* 1 -> 4 -> 1: every other packet */
	CHECK(model_loss_rate(&d) == 0.5, "1 <-> 4");
	r = loss_run(&d, 10, 101);
	EQ(r.lost, 505);
	EQ(r.isolated, 505);
	struct model_loss none = {.kind = MODEL_LOSS_NONE};
	struct model_key k = {.seed = 1};
	EQ(model_first_loss(&none, NULL, &k, 77), 77);
	d.p[4] = 0, d.p[0] = ONE; /* no state given: a chain from state 1, lost at once */
	EQ(model_first_loss(&d, NULL, &k, 10), 0);
	CHECK(model_loss_rate(&none) == 0, "none");
}

static const struct check_case cases[] = {
	CHECK_CASE(test_normal),
	CHECK_CASE(test_jitter_constants),
	CHECK_CASE(test_jitter_fifo),
	CHECK_CASE(test_loss_stats),
	CHECK_CASE(test_jitter_stats),
};

CHECK_MAIN(cases)
