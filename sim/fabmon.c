/* SPDX-License-Identifier: MIT */
/*
 * fabmon.c - a modelled fabric's daemon side. See fabmon.h.
 */
#include "sim/fabmon.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/log.h"
#include "sim/shm.h"

#define FABMON_FIDELITY_PERIOD_NS 1000000000LL
#define FABMON_FIDELITY_MIN_MSGS 16	 /* deliveries in a period before it judges */
#define FABMON_FIDELITY_LATE_NS 20000ull /* mean lateness that counts as "cannot keep up" */

struct fabmon {
	struct fabric *fabric; /* not owned */
	/* The shared state (sim/core/fstate.h), handed to every session at hello. */
	int fd;
	void *base;
	size_t len;
	/* The fidelity monitor's last look, per link: deliveries and lateness summed so far. */
	int64_t fid_next_ns;
	uint64_t *fid_n, *fid_sum, *fid_xn; /* deliveries so far, their lateness, across hosts */
	int64_t *fid_warned_ns;
	/* ... and per sending host of the run (fst_xhost), when this is one host of several */
	int host; /* this daemon's host rank; -1: one host alone */
	uint64_t fid_hn[FST_MAX_HOSTS], fid_hsum[FST_MAX_HOSTS];
	int64_t fid_hwarned_ns[FST_MAX_HOSTS];
	struct faultd *faults;
	/* The sampler (op=series): on from the first open channel until none is open and the
	 * links' backlogs have drained; on one host of several, on all along (fabmon_set_host
	 * says why). NULL: no sampling (sample_ms 0). */
	struct series *series;
	uint64_t *ser_cum; /* scratch: fst_crossed's counts */
	int64_t ser_period_ns, ser_next_ns, ser_prev_ns;
	bool ser_on;
};

/* ---- the sampler ---------------------------------------------------------- */

/* A channel opened: sample from now on (it may still be on, draining backlogs). */
void fabmon_chan_opened(struct fabmon *m, int64_t now)
{
	if (!m || !m->series || m->ser_on)
		return;
	m->ser_on = true;
	m->ser_prev_ns = now;
	m->ser_next_ns = now + m->ser_period_ns;
}

/*
 * One sample of what crossed every link since the last, when it is due, or with flush at
 * once if anything moved (op=series: the newest bytes without waiting for the period). It
 * goes off once no channel is open and no link has a backlog left, so the samples add up
 * to op=stats' bytes and an idle daemon takes none. Memory reads only: never blocks.
 */
static void sampler_poll(struct fabmon *m, int64_t now, bool flush, int nchans_open)
{
	if (!m->series || !m->ser_on || (!flush && now < m->ser_next_ns))
		return;
	const struct fst_shm *fs = m->base;
	uint32_t backlogged = fst_crossed(fs, now, m->ser_cum);
	if (!flush || series_changed(m->series, m->ser_cum)) {
		series_add(m->series, now - fs->epoch_ns, now - m->ser_prev_ns, m->ser_cum);
		m->ser_prev_ns = now;
	}
	/* On a fixed grid, so that timer lateness does not add up; a stalled loop skips ahead. */
	if (!flush && m->ser_next_ns <= now)
		m->ser_next_ns +=
			((now - m->ser_next_ns) / m->ser_period_ns + 1) * m->ser_period_ns;
	/* one host of several samples all along (fabmon_set_host) */
	if (!backlogged && nchans_open == 0 && m->host < 0)
		m->ser_on = false;
}

void fabmon_sample_now(struct fabmon *m, int64_t now, int nchans_open)
{
	if (m)
		sampler_poll(m, now, true, nchans_open);
}

/* The sampler's ring, for a modelled fabric with sampling on (see sampler_poll). */
static int sampler_create(struct fabmon *m, int sample_ms, uint32_t series_samples, char *err,
			  size_t errlen)
{
	if (sample_ms <= 0)
		return 0;
	uint32_t nlinks = (uint32_t)fabric_nlinks(m->fabric);
	if (sample_ms > SERIES_MAX_PERIOD_MS) {
		snprintf(err, errlen, "sample_ms: %d is not in 0..%d", sample_ms,
			 SERIES_MAX_PERIOD_MS);
		return -EINVAL;
	}
	int rc = series_new(nlinks, series_samples, &m->series);
	if (rc == -EINVAL) {
		snprintf(err, errlen, "series_samples: %u is not in 1..%u", series_samples,
			 SERIES_MAX_SAMPLES);
		return rc;
	}
	m->ser_cum = rc ? NULL : calloc(nlinks ? nlinks : 1, sizeof(*m->ser_cum));
	if (!m->ser_cum) {
		snprintf(err, errlen, "out of memory for the link sampler");
		series_free(m->series);
		m->series = NULL;
		return -ENOMEM;
	}
	m->ser_period_ns = (int64_t)sample_ms * 1000000;
	uint32_t cap = series_capacity(m->series);
	log_info("link sampler: every %d ms while a channel is open, the newest %u sample(s) of %u "
		 "link(s) kept (%zu bytes)%s",
		 sample_ms, cap, nlinks, series_bytes(m->series),
		 cap < series_samples ? ", fewer than asked: the ring's memory bound" : "");
	return 0;
}

/* ---- the shared state ------------------------------------------------------- */

/* The shared fabric state of a modelled fabric: every link's parameters and reservation state. */
static int fabric_state_create(struct fabmon *m, const struct fault_plan *plan,
			       const struct faultd_ops *ops, int64_t now, char *err, size_t errlen)
{
	uint32_t nlinks = (uint32_t)fabric_nlinks(m->fabric);
	uint64_t entries = 0;
	struct model_link *links = calloc(nlinks ? nlinks : 1, sizeof(*links));
	if (!links) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nlinks; i++) {
		links[i] = fabric_link(m->fabric, i)->model;
		if (links[i].jitter.dist == MODEL_DIST_TABLE)
			entries += (uint64_t)links[i].jitter.ntable;
	}
	const char *step = "sizing";
	size_t len = fst_bytes(nlinks, (uint32_t)fabric_nnics(m->fabric), entries);
	int fd = -1, rc = -EINVAL;
	void *base = MAP_FAILED;
	if (!len)
		goto fail;
	fd = shm_sealed("simfabric-fabric", len, &base, &step);
	if (fd < 0)
		goto fail_errno;
	step = "fst_format";
	rc = fst_format(base, len, nlinks, links, (uint32_t)fabric_nnics(m->fabric),
			fabric_seed(m->fabric), now);
	if (rc)
		goto fail;
	free(links);
	m->fid_n = calloc(nlinks ? nlinks : 1, sizeof(*m->fid_n));
	m->fid_sum = calloc(nlinks ? nlinks : 1, sizeof(*m->fid_sum));
	m->fid_xn = calloc(nlinks ? nlinks : 1, sizeof(*m->fid_xn));
	m->fid_warned_ns = calloc(nlinks ? nlinks : 1, sizeof(*m->fid_warned_ns));
	if (!m->fid_n || !m->fid_sum || !m->fid_xn || !m->fid_warned_ns) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	} else {
		rc = faultd_new(base, m->fabric, plan, ops, &m->faults, err, errlen);
	}
	if (rc) {
		free(m->fid_n);
		free(m->fid_sum);
		free(m->fid_xn);
		free(m->fid_warned_ns);
		m->fid_n = m->fid_sum = m->fid_xn = NULL;
		m->fid_warned_ns = NULL;
		munmap(base, len);
		close(fd);
		return rc;
	}
	m->fid_next_ns = now + FABMON_FIDELITY_PERIOD_NS;
	m->fd = fd;
	m->base = base;
	m->len = len;
	log_info("fabric state: %u directed link(s), %d NIC(s), %zu bytes of shared memory, seed "
		 "%llu",
		 nlinks, fabric_nnics(m->fabric), len, (unsigned long long)fabric_seed(m->fabric));
	return 0;
fail_errno:
	rc = -errno;
fail:
	snprintf(err, errlen, "cannot create the fabric's shared state (%zu bytes): %s: %s", len,
		 step, strerror(-rc));
	free(links);
	if (base != MAP_FAILED)
		munmap(base, len);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* ---- the fidelity monitor ------------------------------------------------ */

/* An end of a link, for messages: "node3-nic0" or "sw0". */
static const char *ep_name(const struct fabric *f, const struct fabric_ep *e)
{
	if (e->kind == FABRIC_EP_SWITCH) {
		const struct fabric_switch *sw = fabric_switch(f, e->id);
		return sw ? sw->name : "?";
	}
	const struct fabric_node *n = fabric_node(f, e->id);
	const struct fabric_nic *nic = n ? fabric_nic(n, e->nic) : NULL;
	return nic ? nic->name : "?";
}

/* What came since the monitor's last look (deliveries n, lateness sum, taken into *seen_n and
 * *seen_sum): *dn and *ds. Say it? Enough of them, late on average, and not said in the last
 * minute (*warned: when it was, taken on yes). */
static bool fidelity_due(uint64_t n, uint64_t sum, uint64_t *seen_n, uint64_t *seen_sum,
			 int64_t *warned, int64_t now, uint64_t *dn, uint64_t *ds)
{
	*dn = n - *seen_n;
	*ds = sum - *seen_sum;
	*seen_n = n;
	*seen_sum = sum;
	if (*dn < FABMON_FIDELITY_MIN_MSGS || *ds / *dn < FABMON_FIDELITY_LATE_NS ||
	    (*warned && now - *warned < 60 * 1000000000LL))
		return false;
	*warned = now;
	return true;
}

/* The deliveries here from host h in the last period: late on average, most likely the hosts'
 * network between them (a host's own links are judged per link above). */
static void fidelity_pair(struct fabmon *m, int h, int64_t now, const char *spans)
{
	const struct fst_xhost *x = fst_xhost(m->base, (uint32_t)h);
	if (!x || h == m->host)
		return;
	uint64_t dn, ds;
	if (!fidelity_due(atomic_load(&x->n), atomic_load(&x->late_sum_ns), &m->fid_hn[h],
			  &m->fid_hsum[h], &m->fid_hwarned_ns[h], now, &dn, &ds))
		return;
	log_warn("fidelity: host %d -> host %d: %llu deliveries in the last %s completed %.1f us "
		 "after the model's time on average (max so far %.1f us): the network between the "
		 "hosts cannot carry the fabric at this speed, so the run is slower than the "
		 "scenario says (per-host-pair figures: op=stats)",
		 h, m->host, (unsigned long long)dn, spans, (double)ds / (double)dn / 1000.0,
		 (double)atomic_load(&x->late_max_ns) / 1000.0);
}

/*
 * The fidelity monitor, once a second: a link whose recent deliveries came
 * well after the model's time is faster than this machine can emulate (one
 * core copies 10-25 GB/s; ranks may share cores). Say so loudly, at most once
 * a minute per link: the run is slower than the scenario claims.
 */
static void fidelity_check(struct fabmon *m, int64_t now, bool final)
{
	if (!final && now < m->fid_next_ns)
		return;
	/* the last period, at the daemon's end, is a part of one: a run shorter than a period
	 * still hears it */
	int64_t span = now - (m->fid_next_ns - FABMON_FIDELITY_PERIOD_NS);
	char spans[32] = "second";
	if (span < FABMON_FIDELITY_PERIOD_NS * 95 / 100)
		snprintf(spans, sizeof(spans), "%.2f s", (double)span / 1e9);
	m->fid_next_ns = now + FABMON_FIDELITY_PERIOD_NS;
	const struct fst_shm *fs = m->base;
	struct fst_link *l = (struct fst_link *)((uint8_t *)m->base + fs->state_off);
	for (uint32_t i = 0; i < fs->nlinks; i++) {
		uint64_t xn = atomic_load(&l[i].xlate_n), dxn = xn - m->fid_xn[i], dn, ds;
		m->fid_xn[i] = xn;
		if (!fidelity_due(atomic_load(&l[i].late_n), atomic_load(&l[i].late_sum_ns),
				  &m->fid_n[i], &m->fid_sum[i], &m->fid_warned_ns[i], now, &dn,
				  &ds))
			continue;
		const struct fabric_link *fl = fabric_link(m->fabric, i);
		/* most of them came from another host: the hosts' network is what is slow */
		char cause[160];
		if (2 * dxn > dn)
			snprintf(cause, sizeof(cause),
				 "%llu of them from another host: the network between the hosts "
				 "cannot carry the fabric at this speed",
				 (unsigned long long)dxn);
		else
			snprintf(cause, sizeof(cause),
				 "this machine cannot emulate the fabric at this speed");
		log_warn("fidelity: link %u (%s -> %s): %llu deliveries in the last %s "
			 "completed %.1f us after the model's time on average (max so far %.1f "
			 "us): "
			 "%s, so the run is slower than the scenario says (per-link figures: "
			 "op=stats)",
			 i, fl ? ep_name(m->fabric, &fl->from) : "?",
			 fl ? ep_name(m->fabric, &fl->to) : "?", (unsigned long long)dn, spans,
			 (double)ds / (double)dn / 1000.0,
			 (double)atomic_load(&l[i].late_max_ns) / 1000.0, cause);
	}
	for (int h = 0; m->host >= 0 && h < FST_MAX_HOSTS; h++)
		fidelity_pair(m, h, now, spans);
}

/* ---- entry points -------------------------------------------------------- */

void fabmon_set_host(struct fabmon *m, int host, int64_t now)
{
	if (!m)
		return;
	m->host = host;
	/* Connections between hosts reserve links here with no channel this daemon sees open:
	 * the sampler runs from now on, idle samples included, as one host's does while a
	 * channel is open (a host whose nodes talk only to other hosts would take none). */
	if (host >= 0)
		fabmon_chan_opened(m, now);
}

int fabmon_new(struct fabric *f, const struct fault_plan *plan, int sample_ms,
	       uint32_t series_samples, const struct faultd_ops *ops, int64_t now,
	       struct fabmon **out, char *err, size_t errlen)
{
	*out = NULL;
	struct fabmon *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->fabric = f;
	m->fd = -1;
	m->host = -1;
	int rc = sampler_create(m, sample_ms, series_samples, err, errlen);
	if (!rc)
		rc = fabric_state_create(m, plan, ops, now, err, errlen);
	if (rc) {
		fabmon_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

void fabmon_free(struct fabmon *m)
{
	if (!m)
		return;
	if (m->base && m->fid_n) { /* what the last part of a period saw */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		fidelity_check(m, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, true);
	}
	faultd_free(m->faults);
	if (m->base)
		munmap(m->base, m->len);
	if (m->fd >= 0)
		close(m->fd);
	free(m->fid_n);
	free(m->fid_sum);
	free(m->fid_xn);
	free(m->fid_warned_ns);
	series_free(m->series);
	free(m->ser_cum);
	free(m);
}

int fabmon_fd(const struct fabmon *m)
{
	return m ? m->fd : -1;
}

struct fst_shm *fabmon_shm(const struct fabmon *m)
{
	return m ? m->base : NULL;
}

size_t fabmon_bytes(const struct fabmon *m)
{
	return m ? m->len : 0;
}

struct faultd *fabmon_faults(const struct fabmon *m)
{
	return m ? m->faults : NULL;
}

struct series *fabmon_series(const struct fabmon *m)
{
	return m ? m->series : NULL;
}

int64_t fabmon_period_ns(const struct fabmon *m)
{
	return m ? m->ser_period_ns : 0;
}

void fabmon_tick(struct fabmon *m, int64_t now, int nchans_open)
{
	if (!m)
		return;
	sampler_poll(m, now, false, nchans_open);
	fidelity_check(m, now, false);
	faultd_tick(m->faults, now);
}

int64_t fabmon_next_ns(const struct fabmon *m, int64_t now)
{
	int64_t first = INT64_MAX;
	if (!m)
		return first;
	if (m->fid_next_ns < first)
		first = m->fid_next_ns;
	if (m->ser_on && m->ser_next_ns < first)
		first = m->ser_next_ns;
	int64_t fn = faultd_next_ns(m->faults, now);
	if (fn && fn < first)
		first = fn;
	return first;
}
