/* SPDX-License-Identifier: MIT */
/*
 * fabmon.h - a modelled fabric's daemon side: the shared fabric state
 * (sim/core/fstate.h) every session maps, the fault daemon that runs the
 * scenario's faults over it (sim/faultd.h), the link sampler behind op=series
 * (sim/series.h) and the fidelity monitor that warns when this machine cannot
 * keep up with the model. The ideal fabric has none of these: srv.c keeps a
 * NULL fabmon then, and every call below takes NULL.
 *
 * It calls nothing of the server's: what a fault does to processes and
 * channels (kill a node, reset connections) comes in through faultd_ops.
 * Times are CLOCK_MONOTONIC ns, passed in by the caller. Single-threaded, on
 * the daemon's loop.
 */
#ifndef SF_FABMON_H
#define SF_FABMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/core/fstate.h"
#include "sim/faultd.h"
#include "sim/scn/fabric.h"
#include "sim/series.h"

struct fabmon;

/*
 * The shared state of fabric f (not owned; it must outlive the fabmon), its
 * faults from plan (NULL: none) run by a fault daemon calling ops, and, with
 * sample_ms > 0, a sampler keeping the newest series_samples samples. 0, or a
 * negative errno with err saying what failed.
 */
int fabmon_new(struct fabric *f, const struct fault_plan *plan, int sample_ms,
	       uint32_t series_samples, const struct faultd_ops *ops, int64_t now,
	       struct fabmon **out, char *err, size_t errlen);
void fabmon_free(struct fabmon *m); /* NULL-safe */

/* This daemon serves host `host` of a run over several hosts: the fidelity monitor also judges
 * the deliveries here from each other host (a line per slow pair of hosts), and the sampler
 * runs from now (CLOCK_MONOTONIC ns) on, all along (connections between hosts open no channel
 * here). NULL-safe. */
void fabmon_set_host(struct fabmon *m, int host, int64_t now);
/* The region: its memfd (sealed; dup it to hand it out), mapping and size. */
int fabmon_fd(const struct fabmon *m);
struct fst_shm *fabmon_shm(const struct fabmon *m);
size_t fabmon_bytes(const struct fabmon *m);
struct faultd *fabmon_faults(const struct fabmon *m);

/* A channel opened: sample from now on (it may still be on, draining backlogs). */
void fabmon_chan_opened(struct fabmon *m, int64_t now);
/* What is due at now: a sample, the fidelity check, the faults' timers. nchans_open: the
 * server's open channels (the sampler stops once none is open and the links have drained). */
void fabmon_tick(struct fabmon *m, int64_t now, int nchans_open);
/* The next of those deadlines, or INT64_MAX. */
int64_t fabmon_next_ns(const struct fabmon *m, int64_t now);

/* The sampler's ring (NULL: no sampling) and its period. */
struct series *fabmon_series(const struct fabmon *m);
int64_t fabmon_period_ns(const struct fabmon *m);
/* A sample of what moved since the last one, at once (op=series' freshest data). */
void fabmon_sample_now(struct fabmon *m, int64_t now, int nchans_open);

#endif /* SF_FABMON_H */
