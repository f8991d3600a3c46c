/* SPDX-License-Identifier: MIT */
/*
 * series.h - per-link traffic over time: a bounded ring of samples, each the
 * payload bytes every directed link carried in one interval.
 *
 * The caller (the daemon, every --sample-ms) hands in each link's
 * cumulative count (fst_crossed); the ring stores what each grew since the
 * previous sample. A count that falls back (an estimate) records 0 until it
 * passes its previous high again, so the deltas add up to the last count.
 * Samples are numbered from 0 for the ring's life (seq); once the ring is
 * full the oldest go, and series_first says which is the oldest kept.
 * Memory: capacity x nlinks x 8 bytes, the capacity cut so that this stays
 * within SERIES_MAX_BYTES however many links the fabric has.
 *
 * Single-threaded. Errors are negative errno values.
 */
#ifndef SF_SERIES_H
#define SF_SERIES_H

#include <stddef.h>
#include <stdint.h>

#define SERIES_DEFAULT_PERIOD_MS 10
#define SERIES_MAX_PERIOD_MS 60000
#define SERIES_DEFAULT_SAMPLES 4096
#define SERIES_MAX_SAMPLES (1u << 20)
#define SERIES_MAX_BYTES (64u << 20) /* of deltas, at most: fewer samples on a large fabric */

struct series;

struct series_sample {
	int64_t t_ns;	       /* the interval's end (the caller's clock) */
	int64_t dt_ns;	       /* and its length */
	const uint64_t *bytes; /* per link, what it carried; valid until the next series_add */
};

/* A ring for nlinks links keeping up to want samples (1..SERIES_MAX_SAMPLES; fewer if
 * SERIES_MAX_BYTES says so). 0, -EINVAL or -ENOMEM. */
int series_new(uint32_t nlinks, uint32_t want, struct series **out);
void series_free(struct series *s); /* NULL-safe */

uint32_t series_capacity(const struct series *s); /* samples it keeps at most */
size_t series_bytes(const struct series *s);	   /* what they take */
uint64_t series_taken(const struct series *s);	   /* samples added so far: seqs [0, taken) */
uint64_t series_first(const struct series *s);	   /* the oldest kept (== taken when none) */

/* Would a sample of these cumulative counts (cum[nlinks]) record any bytes? */
int series_changed(const struct series *s, const uint64_t *cum);
/* Add the sample of the interval of dt_ns that ends at t_ns, from cumulative counts. */
void series_add(struct series *s, int64_t t_ns, int64_t dt_ns, const uint64_t *cum);
/* Sample seq: 0, or -ENOENT when it was dropped or is not taken yet. */
int series_get(const struct series *s, uint64_t seq, struct series_sample *out);

#endif /* SF_SERIES_H */
