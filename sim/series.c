/* SPDX-License-Identifier: MIT */
/*
 * series.c - per-link traffic over time (see series.h).
 */
#include "sim/series.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct series {
	uint32_t nlinks, capacity;
	uint64_t taken;
	int64_t *t, *dt;  /* per slot */
	uint64_t *delta;  /* capacity x nlinks, slot-major */
	uint64_t *high;	  /* per link, the largest cumulative count seen */
};

int series_new(uint32_t nlinks, uint32_t want, struct series **out)
{
	*out = NULL;
	if (want < 1 || want > SERIES_MAX_SAMPLES)
		return -EINVAL;
	uint64_t per = (uint64_t)nlinks * sizeof(uint64_t);
	uint64_t fit = per ? SERIES_MAX_BYTES / per : want;
	uint32_t cap = fit < want ? (uint32_t)(fit ? fit : 1) : want;
	struct series *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->nlinks = nlinks;
	s->capacity = cap;
	s->t = calloc(cap, sizeof(*s->t));
	s->dt = calloc(cap, sizeof(*s->dt));
	/* +1: a fabric without links still has samples (of nothing), and calloc(0) may be NULL */
	s->delta = calloc((size_t)cap * nlinks + 1, sizeof(*s->delta));
	s->high = calloc((size_t)nlinks + 1, sizeof(*s->high));
	if (!s->t || !s->dt || !s->delta || !s->high) {
		series_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void series_free(struct series *s)
{
	if (!s)
		return;
	free(s->t);
	free(s->dt);
	free(s->delta);
	free(s->high);
	free(s);
}

uint32_t series_capacity(const struct series *s)
{
	return s->capacity;
}

size_t series_bytes(const struct series *s)
{
	return ((size_t)s->capacity * s->nlinks + s->nlinks) * sizeof(uint64_t) +
	       (size_t)s->capacity * 2 * sizeof(int64_t);
}

uint64_t series_taken(const struct series *s)
{
	return s->taken;
}

uint64_t series_first(const struct series *s)
{
	return s->taken > s->capacity ? s->taken - s->capacity : 0;
}

int series_changed(const struct series *s, const uint64_t *cum)
{
	for (uint32_t i = 0; i < s->nlinks; i++)
		if (cum[i] > s->high[i])
			return 1;
	return 0;
}

void series_add(struct series *s, int64_t t_ns, int64_t dt_ns, const uint64_t *cum)
{
	uint32_t slot = (uint32_t)(s->taken % s->capacity);
	uint64_t *d = s->delta + (size_t)slot * s->nlinks;
	s->t[slot] = t_ns;
	s->dt[slot] = dt_ns;
	for (uint32_t i = 0; i < s->nlinks; i++) {
		d[i] = cum[i] > s->high[i] ? cum[i] - s->high[i] : 0;
		if (cum[i] > s->high[i])
			s->high[i] = cum[i];
	}
	s->taken++;
}

int series_get(const struct series *s, uint64_t seq, struct series_sample *out)
{
	if (seq >= s->taken || seq < series_first(s))
		return -ENOENT;
	uint32_t slot = (uint32_t)(seq % s->capacity);
	out->t_ns = s->t[slot];
	out->dt_ns = s->dt[slot];
	out->bytes = s->delta + (size_t)slot * s->nlinks;
	return 0;
}
