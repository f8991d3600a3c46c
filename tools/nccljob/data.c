/* SPDX-License-Identifier: MIT */
/*
 * data.c - data types, the input pattern, the expected results, the
 * checks, and (for --dry-run) what NCCL would have written.
 *
 * Why the checks can be exact. Rank r's element i is a small integer taken
 * from a pattern of period `span`:
 *     k(r, i) = (h(i) + g(r)) mod span,  h(i) = 5 i + 3 floor(i / span),
 *     g(r) = 37 r + 11
 * (the floor term makes a shift by a multiple of span show; 37 keeps the
 * ranks apart). The element is value[k]:
 *   sum, min, max, and all data movement: k - span/2 (signed types) or k.
 *     A floating type with a p-bit significand holds every integer up to 2^p
 *     exactly; for sum, span <= 2^p / nranks, so every partial sum, in any
 *     order, is an integer of at most 2^(p-1) in magnitude: no rounding, and
 *     the result cannot depend on how NCCL orders the reduction. Integer
 *     types wrap modulo 2^bits, which is order-independent too.
 *   prod: 2 where k % 4 == 0, else 1. Products of powers of two are exact,
 *     and as every factor is >= 1 no partial product exceeds the final one:
 *     an overflow to infinity (half: 2^16) happens in every order or none.
 * The reduction over ranks of value[(h + g(r)) mod span] depends on h only,
 * so the expected result is a table of `span` entries folded once; checking
 * is one table look-up and one compare of the raw bits per element.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/nccljob/nccljob.h"

static const struct {
	const char *name;
	size_t size;
	int is_float, is_signed;
	unsigned sig_bits; /* significand bits, implicit one included */
} dtypes[NJ_NDTYPE] = {
	[NJ_INT8] = {"int8", 1, 0, 1, 0},     [NJ_UINT8] = {"uint8", 1, 0, 0, 0},
	[NJ_INT32] = {"int32", 4, 0, 1, 0},   [NJ_UINT32] = {"uint32", 4, 0, 0, 0},
	[NJ_INT64] = {"int64", 8, 0, 1, 0},   [NJ_UINT64] = {"uint64", 8, 0, 0, 0},
	[NJ_HALF] = {"half", 2, 1, 1, 11},    [NJ_FLOAT] = {"float", 4, 1, 1, 24},
	[NJ_DOUBLE] = {"double", 8, 1, 1, 53}, [NJ_BF16] = {"bfloat16", 2, 1, 1, 8},
};

static const struct {
	const char *alias;
	int dt;
} dtype_aliases[] = {
	{"char", NJ_INT8},      {"int", NJ_INT32},     {"float16", NJ_HALF}, {"fp16", NJ_HALF},
	{"float32", NJ_FLOAT},  {"fp32", NJ_FLOAT},    {"float64", NJ_DOUBLE},
	{"fp64", NJ_DOUBLE},    {"bf16", NJ_BF16},
};

static const char *const coll_names[NJ_NCOLL] = {
	"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv",
};

static const char *const coll_bytes[NJ_NCOLL] = {
	[NJ_ALLREDUCE] = "count x size: each rank's send buffer (= its receive buffer)",
	[NJ_ALLGATHER] = "the receive buffer: nranks x what each rank sends",
	[NJ_REDUCESCATTER] = "the send buffer: nranks x what each rank receives",
	[NJ_BROADCAST] = "count x size: the root's buffer (= every rank's receive buffer)",
	[NJ_REDUCE] = "count x size: each rank's send buffer (= the root's receive buffer)",
	[NJ_ALLTOALL] = "each rank's send buffer: nranks x what it sends each rank",
	[NJ_SENDRECV] = "count x size: what each rank sends to rank+1 (and receives from rank-1)",
};

static const char *const op_names[NJ_NOP] = {"sum", "prod", "min", "max"};

size_t nj_dtype_size(int dt)
{
	return dtypes[dt].size;
}

const char *nj_dtype_name(int dt)
{
	return dtypes[dt].name;
}

int nj_dtype_parse(const char *s)
{
	size_t i;

	for (i = 0; i < NJ_NDTYPE; i++)
		if (!strcmp(s, dtypes[i].name))
			return (int)i;
	for (i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]); i++)
		if (!strcmp(s, dtype_aliases[i].alias))
			return dtype_aliases[i].dt;
	return -1;
}

const char *nj_op_name(int op)
{
	return op_names[op];
}

int nj_op_parse(const char *s)
{
	int i;

	for (i = 0; i < NJ_NOP; i++)
		if (!strcmp(s, op_names[i]))
			return i;
	return -1;
}

const char *nj_coll_name(int c)
{
	return coll_names[c];
}

/* "all_reduce", "all-reduce" and "AllReduce" are allreduce; "bcast" is broadcast. */
int nj_coll_parse(const char *s)
{
	char buf[32];
	size_t n = 0;
	int i;

	for (; *s && n + 1 < sizeof(buf); s++)
		if (*s != '_' && *s != '-')
			buf[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
	if (*s)
		return -1;
	buf[n] = '\0';
	if (!strcmp(buf, "bcast"))
		return NJ_BROADCAST;
	for (i = 0; i < NJ_NCOLL; i++)
		if (!strcmp(buf, coll_names[i]))
			return i;
	return -1;
}

int nj_coll_reduces(int c)
{
	return c == NJ_ALLREDUCE || c == NJ_REDUCESCATTER || c == NJ_REDUCE;
}

const char *nj_coll_bytes_def(int c)
{
	return coll_bytes[c];
}

/* nccl-tests' bus bandwidth factors: what each rank's link carries per byte. */
double nj_busbw_factor(int c, int nranks)
{
	double n = nranks;

	switch (c) {
	case NJ_ALLREDUCE:
		return 2.0 * (n - 1) / n;
	case NJ_ALLGATHER:
	case NJ_REDUCESCATTER:
	case NJ_ALLTOALL:
		return (n - 1) / n;
	default:
		return 1.0;
	}
}

/* ---- raw bits <-> values ----------------------------------------------- */

static uint64_t dt_mask(int dt)
{
	return dtypes[dt].size == 8 ? ~0ull : (1ull << (8 * dtypes[dt].size)) - 1;
}

static int64_t as_int(int dt, uint64_t b)
{
	unsigned bits = 8 * (unsigned)dtypes[dt].size;

	if (dtypes[dt].is_signed && bits < 64 && (b >> (bits - 1)) & 1)
		return (int64_t)(b | ~dt_mask(dt));
	return (int64_t)b;
}

/*
 * Round v to a binary format with a p-bit significand, smallest normal
 * exponent emin and largest finite value maxv, to nearest, ties to even;
 * past maxv it is infinity. The quantum is a power of two, so v / q is
 * exact and nearbyint() does the one rounding (default mode: to even).
 */
static double round_fmt(double v, int p, int emin, double maxv)
{
	int e;
	double q, r;

	if (v == 0 || isnan(v) || isinf(v))
		return v;
	frexp(v, &e); /* |v| in [2^(e-1), 2^e) */
	q = ldexp(1.0, (e - 1 < emin ? emin : e - 1) - (p - 1));
	r = nearbyint(v / q) * q;
	if (fabs(r) > maxv)
		return r < 0 ? -INFINITY : INFINITY;
	return r;
}

static uint16_t half_bits(double v)
{
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	double r = round_fmt(v, 11, -14, 65504.0), a = fabs(r);
	int e;

	if (isnan(r))
		return 0x7e00;
	if (isinf(r))
		return sign | 0x7c00;
	if (a < ldexp(1.0, -14)) /* subnormal or zero: multiples of 2^-24 */
		return sign | (uint16_t)(a * 16777216.0);
	frexp(a, &e);
	return sign | (uint16_t)((e - 1 + 15) << 10) |
	       (uint16_t)((ldexp(a, 1 - e) - 1.0) * 1024.0);
}

static double half_value(uint16_t h)
{
	unsigned exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	double v;

	if (exp == 0)
		v = ldexp(mant, -24);
	else if (exp == 31)
		v = mant ? NAN : INFINITY;
	else
		v = ldexp(mant | 0x400, (int)exp - 25);
	return h & 0x8000 ? -v : v;
}

static uint16_t bf16_bits(double v)
{
	double r = round_fmt(v, 8, -126, 0x1.fep127);
	float f = (float)r; /* exact: r already has 8 significant bits */
	uint32_t x;

	if (isnan(r))
		return 0x7fc0;
	memcpy(&x, &f, sizeof(x));
	return (uint16_t)(x >> 16);
}

static double bf16_value(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

static double as_float(int dt, uint64_t b)
{
	float f;
	double d;
	uint32_t x = (uint32_t)b;

	switch (dt) {
	case NJ_HALF:
		return half_value((uint16_t)b);
	case NJ_BF16:
		return bf16_value((uint16_t)b);
	case NJ_FLOAT:
		memcpy(&f, &x, sizeof(f));
		return f;
	default:
		memcpy(&d, &b, sizeof(d));
		return d;
	}
}

static uint64_t from_float(int dt, double v)
{
	float f;
	uint32_t x;
	uint64_t b;

	switch (dt) {
	case NJ_HALF:
		return half_bits(v);
	case NJ_BF16:
		return bf16_bits(v);
	case NJ_FLOAT:
		f = (float)v;
		memcpy(&x, &f, sizeof(x));
		return x;
	default:
		memcpy(&b, &v, sizeof(b));
		return b;
	}
}

uint64_t nj_load(int dt, const void *buf, size_t i)
{
	const char *p = (const char *)buf + i * dtypes[dt].size;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (dtypes[dt].size) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	default:
		memcpy(&u64, p, 8);
		return u64;
	}
}

void nj_store(int dt, void *buf, size_t i, uint64_t bits)
{
	char *p = (char *)buf + i * dtypes[dt].size;
	uint8_t u8 = (uint8_t)bits;
	uint16_t u16 = (uint16_t)bits;
	uint32_t u32 = (uint32_t)bits;

	switch (dtypes[dt].size) {
	case 1:
		memcpy(p, &u8, 1);
		break;
	case 2:
		memcpy(p, &u16, 2);
		break;
	case 4:
		memcpy(p, &u32, 4);
		break;
	default:
		memcpy(p, &bits, 8);
	}
}

/* a op b in the type's own arithmetic, rounded to the type after each step as a GPU does */
static uint64_t reduce2(int dt, int op, uint64_t a, uint64_t b)
{
	double x, y, z;
	int lt;

	if (!dtypes[dt].is_float) {
		if (op == NJ_SUM)
			return (a + b) & dt_mask(dt);
		if (op == NJ_PROD)
			return (a * b) & dt_mask(dt);
		lt = dtypes[dt].is_signed ? as_int(dt, a) < as_int(dt, b) : a < b;
		return (op == NJ_MIN) == lt ? a : b;
	}
	x = as_float(dt, a);
	y = as_float(dt, b);
	switch (op) {
	case NJ_SUM:
		z = x + y;
		break;
	case NJ_PROD:
		z = x * y;
		break;
	case NJ_MIN:
		z = x < y ? x : y;
		break;
	default:
		z = x > y ? x : y;
	}
	if (dt == NJ_FLOAT)
		z = (float)z; /* double then float can round twice; our values never round */
	return from_float(dt, z);
}

void nj_format(int dt, uint64_t bits, char *out, size_t n)
{
	int hex = (int)dtypes[dt].size * 2;

	if (!dtypes[dt].is_float) {
		if (dtypes[dt].is_signed)
			snprintf(out, n, "%lld", (long long)as_int(dt, bits));
		else
			snprintf(out, n, "%llu", (unsigned long long)bits);
		return;
	}
	snprintf(out, n, dt == NJ_DOUBLE ? "%.17g [0x%0*llx]" : "%.9g [0x%0*llx]",
		 as_float(dt, bits), hex, (unsigned long long)bits);
}

/* ---- the pattern -------------------------------------------------------- */

static uint64_t rank_offset(unsigned span, int rank)
{
	return ((uint64_t)rank * 37 + 11) % span;
}

/* k(i) for consecutive i without a division per element */
struct pit {
	unsigned span, step, k;
	uint64_t g, i, left;
};

static void pit_seek(struct pit *p, uint64_t i)
{
	uint64_t s = p->span;

	p->i = i;
	p->k = (unsigned)((5 * (i % s) + 3 * ((i / s) % s) + p->g) % s);
	p->left = s - i % s;
}

static void pit_init(struct pit *p, unsigned span, uint64_t g, uint64_t i)
{
	p->span = span;
	p->step = 5 % span;
	p->g = g;
	pit_seek(p, i);
}

static unsigned pit_next(struct pit *p)
{
	unsigned k = p->k;

	p->i++;
	if (--p->left == 0) {
		pit_seek(p, p->i);
	} else {
		p->k += p->step;
		if (p->k >= p->span)
			p->k -= p->span;
	}
	return k;
}

static uint64_t value_of(const struct nj_data *d, int reduces, unsigned k)
{
	unsigned span = reduces ? d->span_red : d->span_mov;
	int64_t v;

	if (reduces && d->op == NJ_PROD)
		v = k % 4 == 0 ? 2 : 1;
	else
		v = (int64_t)k - (dtypes[d->dtype].is_signed ? (int64_t)(span / 2) : 0);
	if (dtypes[d->dtype].is_float)
		return from_float(d->dtype, (double)v);
	return (uint64_t)v & dt_mask(d->dtype);
}

/* Rank r's input element i, straight from the formula (no iterator, no table). */
static uint64_t input_of(const struct nj_data *d, int reduces, int r, uint64_t i)
{
	uint64_t s = reduces ? d->span_red : d->span_mov;
	unsigned k = (unsigned)((5 * i + 3 * (i / s) + rank_offset((unsigned)s, r)) % s);

	return value_of(d, reduces, k);
}

static unsigned span_for(int dt, int op, int nranks)
{
	uint64_t lim;

	if (op != NJ_SUM || !dtypes[dt].is_float)
		return 251;
	lim = (1ull << dtypes[dt].sig_bits) / (uint64_t)nranks;
	return lim >= 251 ? 251 : lim ? (unsigned)lim : 1;
}

int nj_span_warning(int dt, int op, int nranks, char *buf, size_t n)
{
	unsigned s = span_for(dt, op, nranks);

	if (s >= 16)
		return 0;
	snprintf(buf, n,
		 "%s sums over %d ranks are exact only for %u distinct input values: the check of "
		 "reducing collectives is weak (use float, or fewer ranks)",
		 dtypes[dt].name, nranks, s);
	return 1;
}

void nj_data_init(struct nj_data *d, int dt, int op, int nranks)
{
	unsigned h, r;

	memset(d, 0, sizeof(*d));
	d->dtype = dt;
	d->op = op;
	d->nranks = nranks;
	d->span_mov = 251;
	d->span_red = span_for(dt, op, nranks);
	for (h = 0; h < d->span_red; h++) {
		uint64_t acc = 0;

		for (r = 0; r < (unsigned)nranks; r++) {
			uint64_t g = rank_offset(d->span_red, (int)r);
			uint64_t v = value_of(d, 1, (unsigned)((h + g) % d->span_red));

			acc = r ? reduce2(dt, op, acc, v) : v;
		}
		d->table[h] = acc;
	}
}

void nj_fill(const struct nj_data *d, int coll, int rank, void *buf, size_t n)
{
	int red = nj_coll_reduces(coll);
	unsigned span = red ? d->span_red : d->span_mov;
	uint64_t vals[256];
	struct pit p;
	size_t i;

	for (i = 0; i < span; i++)
		vals[i] = value_of(d, red, (unsigned)i);
	pit_init(&p, span, rank_offset(span, rank), 0);
	for (i = 0; i < n; i++)
		nj_store(d->dtype, buf, i, vals[pit_next(&p)]);
}

/*
 * The expected output, as segments: output [off, off + len) holds tab[k] for
 * the pattern (span, g) starting at input index i0. Returns 0 past the last.
 */
struct seg {
	int table; /* 1: tab is the reduction table, 0: movement values */
	uint64_t g, i0;
	size_t off, len;
};

static int out_segment(const struct nj_data *d, int coll, int rank, int root, size_t chunk,
		       size_t n, int s, struct seg *sg)
{
	int nr = d->nranks, src = rank;

	memset(sg, 0, sizeof(*sg));
	sg->len = n;
	switch (coll) {
	case NJ_ALLGATHER:
	case NJ_ALLTOALL:
		if (s >= nr)
			return 0;
		sg->off = (size_t)s * chunk;
		sg->len = chunk;
		sg->i0 = coll == NJ_ALLTOALL ? (uint64_t)rank * chunk : 0;
		sg->g = rank_offset(d->span_mov, s);
		return 1;
	case NJ_REDUCE:
		if (rank != root)
			return 0; /* only the root's output is defined */
		/* fall through */
	case NJ_ALLREDUCE:
	case NJ_REDUCESCATTER:
		if (s)
			return 0;
		sg->table = 1;
		sg->i0 = coll == NJ_REDUCESCATTER ? (uint64_t)rank * chunk : 0;
		return 1;
	case NJ_BROADCAST:
		src = root;
		break;
	case NJ_SENDRECV:
		src = (rank + nr - 1) % nr;
		break;
	}
	if (s)
		return 0;
	sg->g = rank_offset(d->span_mov, src);
	return 1;
}

void nj_verify(const struct nj_data *d, int coll, int rank, int root, size_t chunk,
	       const void *buf, size_t n, struct nj_check *c)
{
	uint64_t mov[256];
	struct seg sg;
	struct pit p;
	size_t j;
	int s;

	memset(c, 0, sizeof(*c));
	c->first = -1;
	for (j = 0; j < d->span_mov; j++)
		mov[j] = value_of(d, 0, (unsigned)j);
	for (s = 0; out_segment(d, coll, rank, root, chunk, n, s, &sg); s++) {
		const uint64_t *tab = sg.table ? d->table : mov;

		pit_init(&p, sg.table ? d->span_red : d->span_mov, sg.g, sg.i0);
		for (j = 0; j < sg.len; j++) {
			uint64_t want = tab[pit_next(&p)], got = nj_load(d->dtype, buf, sg.off + j);

			if (got == want)
				continue;
			if (!c->wrong++) {
				c->first = (int64_t)(sg.off + j);
				nj_format(d->dtype, got, c->got, sizeof(c->got));
				nj_format(d->dtype, want, c->expected, sizeof(c->expected));
			}
		}
		c->checked += sg.len;
	}
}

/*
 * --dry-run: what a correct collective leaves in rank's output, computed the
 * long way from every rank's input (input_of, not the iterator or the table),
 * reducing in another order than nj_data_init (from this rank downwards), in
 * the type's arithmetic. Checking this with nj_verify tests both.
 */
void nj_simulate(const struct nj_data *d, int coll, int rank, int root, size_t chunk, void *buf,
		 size_t n)
{
	int nr = d->nranks, t;
	size_t j;

	if (coll == NJ_REDUCE && rank != root)
		return;
	for (j = 0; j < n; j++) {
		uint64_t v, i = j;

		switch (coll) {
		case NJ_REDUCESCATTER:
			i = (uint64_t)rank * chunk + j;
			/* fall through */
		case NJ_ALLREDUCE:
		case NJ_REDUCE:
			v = input_of(d, 1, rank, i);
			for (t = 1; t < nr; t++)
				v = reduce2(d->dtype, d->op, v,
					    input_of(d, 1, (rank + nr - t) % nr, i));
			break;
		case NJ_BROADCAST:
			v = input_of(d, 0, root, j);
			break;
		case NJ_ALLGATHER:
			v = input_of(d, 0, (int)(j / chunk), j % chunk);
			break;
		case NJ_ALLTOALL:
			v = input_of(d, 0, (int)(j / chunk), (uint64_t)rank * chunk + j % chunk);
			break;
		default:
			v = input_of(d, 0, (rank + nr - 1) % nr, j);
		}
		nj_store(d->dtype, buf, j, v);
	}
}
