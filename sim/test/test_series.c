/* SPDX-License-Identifier: MIT */
/*
 * test_series.c - seeing the fabric, in virtual time with exact values:
 *   queueing      fst_reserve's per-link queueing histogram, maximum and sum
 *                 for a known sequence of messages on a contended link
 *   percentiles   fst_hist_le: bucket tops, and the maximum past the last bucket's top
 *   crossed       fst_crossed: a link's bytes less its backlog, at its payload rate
 *   series        the sampler's ring: deltas, wrap, high marks, the memory bound
 *   layout        fst_check on a region of another layout version
 */
#include "sim/core/fstate.h"
#include "sim/series.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/test/check.h"
#include "sim/test/fenv.h"

/*
 * Round numbers: 8 Gb/s is one byte per ns; no headers, latency or overheads, so a
 * message of x bytes (one packet up to the MTU) holds a link for exactly x ns from its post.
 * Links 0 and 1: two uplinks; link 2 the shared one; link 3 has 24-byte headers on
 * 1000-byte packets (payload 1000/1024 of the wire); link 4 is unlimited.
 */
enum { NL = 5, NNIC = 3 };

struct env {
	void *base;
	size_t len;
	struct fst_view *v;
	struct model_nic nic;
};

static void env_init(struct env *e)
{
	struct model_link links[NL];
	memset(e, 0, sizeof(*e));
	memset(links, 0, sizeof(links));
	for (int i = 0; i < NL; i++) {
		links[i].rate_bps = i == 4 ? 0 : 8000000000ull;
		links[i].mtu = i == 3 ? 1000 : 4096;
		links[i].hdr_bytes = i == 3 ? 24 : 0;
	}
	e->nic = (struct model_nic){.timeout_exp = 20, .retry_count = 7,
				    .timeout_scale_ppm = 1000000};
	fenv_resolve(links, NL, &e->nic);
	e->v = fenv_map(NL, links, NNIC, 7, &e->base, &e->len);
}

static void env_fini(struct env *e)
{
	fenv_unmap(e->v, e->base, e->len);
}

static struct fst_conn conn(const struct env *e, uint64_t id, uint32_t nic, int npath,
			    uint32_t hop0, uint32_t hop1)
{
	struct fst_conn c;
	memset(&c, 0, sizeof(c));
	c.id = id;
	c.npath = npath;
	c.path[0] = hop0;
	c.path[1] = hop1;
	c.src_nic = nic;
	c.dst_node = 1;
	c.nic = e->nic;
	c.switching = MODEL_CUT_THROUGH;
	return c;
}

static struct fst_link *lstate(struct env *e, uint32_t id)
{
	return (struct fst_link *)((uint8_t *)e->base + e->v->shm->state_off) + id;
}

/* One message, and the link's busy time it leaves (the queueing below depends on it). */
static void post(struct env *e, struct fst_conn *c, int64_t t, uint64_t bytes, int64_t busy)
{
	struct model_msg m;
	CHECK(fst_reserve(e->v, c, t, bytes, &m, NULL) == 0, "fst_reserve at %lld",
	      (long long)t);
	uint32_t last = c->path[c->npath - 1];
	CHECK(lstate(e, last)->busy_until == busy, "link %u busy until %lld, want %lld", last,
	      (long long)lstate(e, last)->busy_until, (long long)busy);
}

static void test_buckets(void)
{
	CHECK(fst_bucket(0, FST_QUEUE_BUCKETS) == 0, "0 ns");
	CHECK(fst_bucket(1, FST_QUEUE_BUCKETS) == 1, "1 ns");
	CHECK(fst_bucket(2, FST_QUEUE_BUCKETS) == 2 && fst_bucket(3, FST_QUEUE_BUCKETS) == 2, "2-3");
	CHECK(fst_bucket(1023, FST_QUEUE_BUCKETS) == 10 && fst_bucket(1024, FST_QUEUE_BUCKETS) == 11,
	      "1023 | 1024");
	CHECK(fst_bucket((1ull << 38) - 1, FST_QUEUE_BUCKETS) == 38, "just under the last");
	CHECK(fst_bucket(1ull << 38, FST_QUEUE_BUCKETS) == 39 &&
		      fst_bucket(UINT64_MAX, FST_QUEUE_BUCKETS) == 39,
	      "the last bucket takes everything above");
	CHECK(fst_bucket(UINT64_MAX, FST_LATE_BUCKETS) == FST_LATE_BUCKETS - 1, "lateness's last");
}

/* Percentile bounds: the top of the bucket, and never below the value in the last one. */
static void test_hist_le(void)
{
	enum { NB = FST_LATE_BUCKETS };
	uint64_t h[NB] = {0}, vals[] = {0, 0, 700, 3000, 50000000}; /* the last: 50 ms */
	uint64_t max = 0;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		h[fst_bucket(vals[i], NB)]++;
		max = vals[i] > max ? vals[i] : max;
	}
	CHECK(fst_hist_le(h, NB, 0, 50, 0) == 0, "no values");
	CHECK(fst_hist_le(h, NB, 5, 40, max) == 0, "p40 is 0 ns (bucket 0)");
	CHECK(fst_hist_le(h, NB, 5, 50, max) == 1024, "p50: 700 ns is in [512, 1024): %llu",
	      (unsigned long long)fst_hist_le(h, NB, 5, 50, max));
	CHECK(fst_hist_le(h, NB, 5, 80, max) == 4096, "p80: 3000 ns, under 4096: %llu",
	      (unsigned long long)fst_hist_le(h, NB, 5, 80, max));
	/* 50 ms falls in the last bucket (from 2^22 ns, 4 ms, up): its top 2^23 is below it */
	uint64_t p99 = fst_hist_le(h, NB, 5, 99, max);
	CHECK(p99 >= 50000000 && p99 == max, "p99 of values up to 50 ms is bounded by %llu",
	      (unsigned long long)p99);
	/* in the last bucket but under its top: the top still bounds it */
	uint64_t g[NB] = {0};
	g[NB - 1] = 1;
	CHECK(fst_hist_le(g, NB, 1, 99, 5000000) == 1ull << (NB - 1), "5 ms: %llu",
	      (unsigned long long)fst_hist_le(g, NB, 1, 99, 5000000));
}

/*
 * Two connections from two NICs share link 2 (one hop each); a third crosses 0 then 2.
 * Each message's queueing is the time link 2 was still busy when it was posted.
 */
static void test_queueing(void)
{
	struct env e;
	env_init(&e);
	struct fst_conn a = conn(&e, 1, 0, 1, 2, 0), b = conn(&e, 2, 1, 1, 2, 0);
	struct fst_conn c = conn(&e, 3, 2, 2, 0, 2);
	post(&e, &a, 0, 1000, 1000);	   /* idle: 0 */
	post(&e, &b, 0, 1000, 2000);	   /* behind a: 1000 ns, bucket 10 [512, 1024) */
	post(&e, &a, 0, 1000, 3000);	   /* behind both: 2000 ns, bucket 11 */
	post(&e, &b, 2999, 1, 3001);	   /* 1 ns, bucket 1 */
	post(&e, &a, 3001, 4096, 7097);	   /* busy until exactly now: 0 */
	post(&e, &b, 3100, 100, 7197);	   /* 3997 ns, bucket 12 [2048, 4096) */
	post(&e, &a, 10000, 10, 10010);	   /* idle again: 0 */
	post(&e, &c, 20000, 500, 20500);   /* both hops idle: 0 on each */

	uint64_t want[FST_QUEUE_BUCKETS] = {0};
	want[0] = 4;
	want[1] = want[10] = want[11] = want[12] = 1;
	struct fst_link *l = lstate(&e, 2);
	uint64_t total = 0;
	for (int k = 0; k < FST_QUEUE_BUCKETS; k++) {
		uint64_t got = atomic_load(&l->queue_hist[k]);
		CHECK(got == want[k], "link 2 bucket %d: %llu, want %llu", k,
		      (unsigned long long)got, (unsigned long long)want[k]);
		total += got;
	}
	CHECK(total == atomic_load(&l->msgs) && total == 8, "every message entering it counted: "
	      "%llu of %llu", (unsigned long long)total, (unsigned long long)atomic_load(&l->msgs));
	CHECK(atomic_load(&l->queue_ns) == 1000 + 2000 + 1 + 3997, "queue_ns %llu",
	      (unsigned long long)atomic_load(&l->queue_ns));
	CHECK(atomic_load(&l->queue_max_ns) == 3997, "queue_max_ns %llu",
	      (unsigned long long)atomic_load(&l->queue_max_ns));
	/* the other hop of c's path: one message, no wait */
	struct fst_link *l0 = lstate(&e, 0);
	CHECK(atomic_load(&l0->msgs) == 1 && atomic_load(&l0->queue_hist[0]) == 1 &&
		      atomic_load(&l0->queue_max_ns) == 0,
	      "link 0: %llu msg(s), %llu in bucket 0", (unsigned long long)atomic_load(&l0->msgs),
	      (unsigned long long)atomic_load(&l0->queue_hist[0]));
	env_fini(&e);
}

static void test_crossed(void)
{
	struct env e;
	env_init(&e);
	uint64_t got[NL];
	struct fst_conn a = conn(&e, 1, 0, 1, 2, 0), b = conn(&e, 2, 1, 1, 2, 0);
	struct fst_conn h = conn(&e, 3, 2, 1, 3, 0), u = conn(&e, 4, 0, 1, 4, 0);
	CHECK(fst_crossed(e.v->shm, 0, got) == 0 && got[2] == 0, "nothing yet");
	post(&e, &a, 0, 1000, 1000);
	post(&e, &b, 0, 3000, 4000);
	post(&e, &h, 0, 10000, 10240); /* 10 packets of 1000 + 24 header bytes */
	post(&e, &u, 0, 777, lstate(&e, 4)->busy_until);
	CHECK(fst_crossed(e.v->shm, 0, got) == 2, "links 2 and 3 have a backlog at 0");
	CHECK(got[2] == 0 && got[3] == 0, "at 0 nothing has crossed: %llu, %llu",
	      (unsigned long long)got[2], (unsigned long long)got[3]);
	CHECK(got[4] == 777, "an unlimited link counts its bytes at once: %llu",
	      (unsigned long long)got[4]);
	fst_crossed(e.v->shm, 1500, got);
	CHECK(got[2] == 1500, "at 1500 ns: %llu", (unsigned long long)got[2]);
	fst_crossed(e.v->shm, 5120, got);
	CHECK(got[3] == 5000, "half the wire time, half the payload: %llu",
	      (unsigned long long)got[3]);
	CHECK(got[2] == 4000, "link 2 drained at 4000 ns: %llu", (unsigned long long)got[2]);
	CHECK(fst_crossed(e.v->shm, 10240, got) == 0 && got[3] == 10000, "all of it once idle");
	CHECK(fst_crossed(e.v->shm, -5000, got) == 2 && got[2] == 0,
	      "a backlog larger than the bytes counts 0, never wraps: %llu",
	      (unsigned long long)got[2]);
	env_fini(&e);
}

static void test_series(void)
{
	struct series *s = NULL;
	CHECK(series_new(3, 0, &s) == -EINVAL && !s, "0 samples");
	CHECK(series_new(3, SERIES_MAX_SAMPLES + 1, &s) == -EINVAL, "too many samples");
	CHECK(series_new(FST_MAX_LINKS, SERIES_DEFAULT_SAMPLES, &s) == 0, "a large fabric");
	CHECK(s && series_capacity(s) == SERIES_MAX_BYTES / (FST_MAX_LINKS * 8ull),
	      "capacity cut to the memory bound: %u", s ? series_capacity(s) : 0);
	CHECK(s && series_bytes(s) <= SERIES_MAX_BYTES + (FST_MAX_LINKS + 1) * 8ull + 1024 * 16,
	      "within the bound: %zu", s ? series_bytes(s) : 0);
	series_free(s);
	series_free(NULL);

	CHECK(series_new(2, 4, &s) == 0 && series_capacity(s) == 4, "a small ring");
	const uint64_t cum[][2] = {{10, 0}, {10, 5}, {8, 5}, {12, 5}, {20, 7}};
	for (int i = 0; i < 5; i++)
		series_add(s, 100 * (i + 1), 100, cum[i]);
	CHECK(series_taken(s) == 5 && series_first(s) == 1, "taken %llu, first %llu",
	      (unsigned long long)series_taken(s), (unsigned long long)series_first(s));
	struct series_sample sm;
	CHECK(series_get(s, 0, &sm) == -ENOENT && series_get(s, 5, &sm) == -ENOENT,
	      "dropped and not taken yet");
	/* a count that falls back (8 after 10) records 0 until it passes 10 again */
	const uint64_t want[][2] = {{0, 5}, {0, 0}, {2, 0}, {8, 2}};
	for (uint64_t q = 1; q < 5; q++) {
		CHECK(series_get(s, q, &sm) == 0 && sm.t_ns == 100 * (int64_t)(q + 1) &&
			      sm.dt_ns == 100 && sm.bytes[0] == want[q - 1][0] &&
			      sm.bytes[1] == want[q - 1][1],
		      "sample %llu: t %lld, %llu + %llu", (unsigned long long)q, (long long)sm.t_ns,
		      (unsigned long long)sm.bytes[0], (unsigned long long)sm.bytes[1]);
	}
	CHECK(!series_changed(s, cum[4]), "the same counts again move nothing");
	const uint64_t more[2] = {20, 8};
	CHECK(series_changed(s, more), "one more byte on link 1");
	series_free(s);

	CHECK(series_new(0, 3, &s) == 0, "a fabric without links");
	series_add(s, 1, 1, NULL);
	CHECK(series_get(s, 0, &sm) == 0 && sm.t_ns == 1 && !series_changed(s, NULL),
	      "samples of nothing");
	series_free(s);
}

static void test_layout(void)
{
	struct env e;
	env_init(&e);
	struct fst_shm *shm = e.base;
	CHECK(fst_check(e.base, e.len) == 0, "this build's region");
	shm->version = FST_VERSION - 1;
	CHECK(fst_check(e.base, e.len) == -EPROTONOSUPPORT, "another layout version");
	shm->version = FST_VERSION;
	shm->magic ^= 1;
	CHECK(fst_check(e.base, e.len) == -EPROTO, "not a fabric state");
	shm->magic ^= 1;
	env_fini(&e);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_buckets), CHECK_CASE(test_hist_le), CHECK_CASE(test_queueing),
	CHECK_CASE(test_crossed), CHECK_CASE(test_series),  CHECK_CASE(test_layout),
};

CHECK_MAIN(cases)
