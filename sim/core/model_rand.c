/* SPDX-License-Identifier: MIT */
/*
 * model_rand.c - what the model draws from: probabilities as fractions of
 * 2^32, the seeded counter-based random numbers, the normal distribution (Phi
 * and its inverse) and a link's jitter distributions, their quantiles,
 * moments, the seeded draw and the check; and model_fail. A leaf of the model
 * core (model.c calls it, it calls nothing there). See model.h;
 * docs/models.md has the formulas.
 */
#include "sim/core/model.h"
#include "sim/core/model_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

/* ---- probabilities and random numbers ------------------------------------- */

int model_fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

uint32_t model_prob(double p)
{
	if (!(p > 0))
		return 0;
	if (p >= 1)
		return MODEL_PROB_ONE;
	double v = nearbyint(p * 4294967296.0);
	return v >= 4294967295.0 ? MODEL_PROB_ONE - 1 : (uint32_t)v;
}

double model_prob_value(uint32_t p)
{
	return p == MODEL_PROB_ONE ? 1.0 : p * 0x1p-32;
}

/* splitmix64's finalizer. */
static inline uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#define GOLDEN 0x9e3779b97f4a7c15ULL

uint64_t model_rand(const struct model_key *key, uint64_t k)
{
	/* One mixing round per field; each round is a bijection of the running hash for a
	 * fixed field, and the golden-ratio increment keeps zero from being a fixed point. */
	uint64_t h = mix64(key->seed + GOLDEN);
	h = mix64((h ^ (((uint64_t)key->link << 32) | key->purpose)) + GOLDEN);
	h = mix64((h ^ key->conn) + GOLDEN);
	h = mix64((h ^ key->msg) + GOLDEN);
	h = mix64((h ^ key->packet) + GOLDEN);
	return mix64((h ^ k) + GOLDEN);
}

double model_unit(const struct model_key *key, uint64_t k)
{
	return model_unit64(model_rand(key, k));
}

/* ---- the normal distribution ---------------------------------------------- */

double model_phi(double z)
{
	return 0.5 * erfc(-z * M_SQRT1_2);
}

/* Wichura, "Algorithm AS241: The Percentage Points of the Normal Distribution" (1988),
 * PPND16: about 1e-16 relative accuracy. */
double model_phi_inv(double u)
{
	if (!(u > 0))
		return -INFINITY;
	if (!(u < 1))
		return INFINITY;
	double q = u - 0.5, r, x;
	if (fabs(q) <= 0.425) {
		r = 0.180625 - q * q;
		return q *
		       (((((((2.5090809287301226727e+3 * r + 3.3430575583588128105e+4) * r +
			     6.7265770927008700853e+4) * r +
			    4.5921953931549871457e+4) * r +
			   1.3731693765509461125e+4) * r +
			  1.9715909503065514427e+3) * r +
			 1.3314166789178437745e+2) * r +
			3.3871328727963666080e+0) /
		       (((((((5.2264952788528545610e+3 * r + 2.8729085735721942674e+4) * r +
			     3.9307895800092710610e+4) * r +
			    2.1213794301586595867e+4) * r +
			   5.3941960214247511077e+3) * r +
			  6.8718700749205790830e+2) * r +
			 4.2313330701600911252e+1) * r +
			1.0);
	}
	r = sqrt(-log(q < 0 ? u : 1.0 - u));
	if (r <= 5.0) {
		r -= 1.6;
		x = (((((((7.7454501427834140764e-4 * r + 2.2723844989269184583e-2) * r +
			  2.4178072517745061177e-1) * r +
			 1.2704582524523683826e+0) * r +
			3.6478483247632045400e+0) * r +
		       5.7694972214606914055e+0) * r +
		      4.6303378461565452959e+0) * r +
		     1.4234371107496835773e+0) /
		    (((((((1.0507500716444168432e-9 * r + 5.4759380849953449460e-4) * r +
			  1.5198666563616457197e-2) * r +
			 1.4810397642748007459e-1) * r +
			6.8976733498510000455e-1) * r +
		       1.6763848301838038494e+0) * r +
		      2.0531916266377588219e+0) * r +
		     1.0);
	} else {
		r -= 5.0;
		x = (((((((2.0103343992922881327e-7 * r + 2.7115555687434875782e-5) * r +
			  1.2426609473880784386e-3) * r +
			 2.6532189526576123093e-2) * r +
			2.9656057182850489123e-1) * r +
		       1.7848265399172913358e+0) * r +
		      5.4637849111641143699e+0) * r +
		     6.6579046435011037772e+0) /
		    (((((((2.0442631033899397856e-15 * r + 1.4215117583164458887e-7) * r +
			  1.8463183175100546818e-5) * r +
			 7.8686913114561325910e-4) * r +
			1.4875361290850614853e-2) * r +
		       1.3692988092273580531e-1) * r +
		      5.9983220655588793769e-1) * r +
		     1.0);
	}
	return q < 0 ? -x : x;
}

/* ---- jitter ---------------------------------------------------------------- */

/*
 * Standardised one-sided quantiles: q(u) >= 0 with standard deviation 1.
 * Constants computed with mpmath at 40 digits (docs/models.md gives the
 * formulas; test_model.c recomputes them by quadrature).
 */
#define SQRT3 1.7320508075688772935
#define NRM_A 3.1671241833119921254e-05 /* Phi(-4) */
#define NRM_S 0.99946450180707960166	/* sd of N(0,1) truncated to [-4, 4] */
#define PAR_C 0.999			/* Pareto(3, 1) cut at its 0.999 quantile, 10 */
#define PAR_MU 1.4864864864864864865	/* mean of the cut Pareto */
#define PAR_SD 0.70218275982522052440	/* its sd */
#define PN_MIN (-1.5196152422706631881) /* (normal + 3 pareto) / 4 at u = 0 */
#define PN_SD 0.95784431438522682197	/* its sd */

static double std_quantile(enum model_dist d, double u)
{
	double x;
	switch (d) {
	case MODEL_DIST_UNIFORM:
		return 2 * SQRT3 * u;
	case MODEL_DIST_NORMAL:
		x = (model_phi_inv(NRM_A + u * (1 - 2 * NRM_A)) + 4) / NRM_S;
		break;
	case MODEL_DIST_PARETO:
		x = (1 / cbrt(1 - u * PAR_C) - 1) / PAR_SD;
		break;
	case MODEL_DIST_PARETONORMAL: {
		double n = model_phi_inv(NRM_A + u * (1 - 2 * NRM_A));
		double p = (1 / cbrt(1 - u * PAR_C) - PAR_MU) / PAR_SD;
		x = ((n + 3 * p) / 4 - PN_MIN) / PN_SD;
		break;
	}
	default:
		return 0;
	}
	return x > 0 ? x : 0;
}

static double std_mean(enum model_dist d)
{
	switch (d) {
	case MODEL_DIST_UNIFORM:
		return SQRT3;
	case MODEL_DIST_NORMAL:
		return 4 / NRM_S;
	case MODEL_DIST_PARETO:
		return (PAR_MU - 1) / PAR_SD;
	case MODEL_DIST_PARETONORMAL:
		return -PN_MIN / PN_SD;
	default:
		return 0;
	}
}

double model_jitter_quantile(const struct model_jitter *j, double u)
{
	if (j->dist == MODEL_DIST_TABLE) {
		if (j->ntable < 1 || !j->table)
			return 0;
		double v = u * j->ntable;
		int i = v > 0 ? (v < j->ntable ? (int)v : j->ntable - 1) : 0;
		return (double)(j->table[i] - j->table[0]);
	}
	if (j->sd_ns <= 0)
		return 0;
	return (double)j->sd_ns * std_quantile(j->dist, u);
}

double model_jitter_mean(const struct model_jitter *j)
{
	if (j->dist == MODEL_DIST_TABLE) {
		if (j->ntable < 1 || !j->table)
			return 0;
		double s = 0;
		for (int i = 0; i < j->ntable; i++)
			s += (double)(j->table[i] - j->table[0]);
		return s / j->ntable;
	}
	return j->sd_ns > 0 ? (double)j->sd_ns * std_mean(j->dist) : 0;
}

double model_jitter_sd(const struct model_jitter *j)
{
	if (j->dist == MODEL_DIST_TABLE) {
		if (j->ntable < 1 || !j->table)
			return 0;
		double m = model_jitter_mean(j), s = 0;
		for (int i = 0; i < j->ntable; i++) {
			double e = (double)(j->table[i] - j->table[0]) - m;
			s += e * e;
		}
		return sqrt(s / j->ntable);
	}
	return j->dist != MODEL_DIST_NONE && j->sd_ns > 0 ? (double)j->sd_ns : 0;
}

int64_t model_jitter_ns(const struct model_jitter *j, const struct model_key *key, double *z)
{
	if (j->dist == MODEL_DIST_NONE || (j->dist != MODEL_DIST_TABLE && j->sd_ns <= 0))
		return 0;
	struct model_key k = *key;
	k.purpose = MODEL_P_JITTER;
	k.packet = 0;
	double u = model_unit(&k, 0);
	if (j->rho > 0) {
		if (!isfinite(*z))
			*z = 0; /* garbage in the state: start afresh */
		/* Gaussian copula: an AR(1) on normal scores keeps N(0,1) as the marginal,
		 * so Phi(z) stays uniform and the quantile keeps the configured shape. */
		double e = model_phi_inv(u);
		double zz = *z == 0.0 ? e : j->rho * *z + sqrt(1 - j->rho * j->rho) * e;
		*z = zz;
		u = model_phi(zz);
	}
	double x = model_jitter_quantile(j, u) + 0.5;
	if (!(x >= 0.5))
		return 0;
	return x < 0x1p62 ? (int64_t)x : (int64_t)1 << 62;
}

int model_jitter_check(const struct model_jitter *j, char *err, size_t errlen)
{
	if (!j)
		return model_fail(err, errlen, "jitter: missing");
	if ((int)j->dist < MODEL_DIST_NONE || j->dist > MODEL_DIST_TABLE)
		return model_fail(err, errlen,
				  "jitter.dist: %d is not one of none (0), uniform, normal, "
				  "pareto, paretonormal, table (5)",
				  (int)j->dist);
	if (j->sd_ns < 0 || j->sd_ns > MODEL_SD_MAX_NS)
		return model_fail(err, errlen, "jitter.sd_ns: %lld is out of range 0..%lld",
				  (long long)j->sd_ns, (long long)MODEL_SD_MAX_NS);
	if (!(j->rho >= 0 && j->rho < 1))
		return model_fail(err, errlen, "jitter.corr: %g is out of range [0, 1)", j->rho);
	if (j->dist != MODEL_DIST_TABLE)
		return 0;
	if (j->ntable < 1 || j->ntable > MODEL_TABLE_MAX)
		return model_fail(err, errlen, "jitter.table: %d entries; 1..%d are needed",
				  j->ntable, MODEL_TABLE_MAX);
	if (!j->table)
		return model_fail(err, errlen, "jitter.table: missing (%d entries announced)",
				  j->ntable);
	for (int i = 0; i < j->ntable; i++) {
		if (j->table[i] < -MODEL_TIME_MAX_NS || j->table[i] > MODEL_TIME_MAX_NS)
			return model_fail(err, errlen,
					  "jitter.table: entry %d (%lld) is out of range "
					  "-%lld..%lld",
					  i, (long long)j->table[i], (long long)MODEL_TIME_MAX_NS,
					  (long long)MODEL_TIME_MAX_NS);
		if (i && j->table[i] < j->table[i - 1])
			return model_fail(err, errlen,
					  "jitter.table: entry %d (%lld) is below entry %d (%lld); "
					  "an inverse CDF must not decrease",
					  i, (long long)j->table[i], i - 1,
					  (long long)j->table[i - 1]);
	}
	if (j->table[j->ntable - 1] - j->table[0] > MODEL_TIME_MAX_NS)
		return model_fail(err, errlen, "jitter.table: spans %lld ns; at most %lld",
				  (long long)(j->table[j->ntable - 1] - j->table[0]),
				  (long long)MODEL_TIME_MAX_NS);
	return 0;
}
