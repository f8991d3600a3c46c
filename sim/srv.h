/* SPDX-License-Identifier: MIT */
/*
 * srv.h - simfabricd's server: sessions, listeners, pending connects and
 * channels, driven by control-protocol requests (docs/control-protocol.md).
 *
 * No libevent here (this file is linked into the harness and unit tests too):
 * the server does its own non-blocking reads and writes, and asks its host
 * (sim/simfabricd.c) through struct srv_ops which descriptors to watch. The
 * host calls back into srv_accept / srv_conn_readable / srv_conn_writable /
 * srv_tick when they are ready, and keeps one timer armed at srv_timeout_us.
 * Every entry point finishes its work (flushes what it queued, frees what it
 * closed) before it returns, so a srv_conn handed to the host is valid until
 * its ops->detach.
 *
 * Single-threaded: everything runs on the host's loop thread.
 */
#ifndef SF_SRV_H
#define SF_SRV_H

#include <stddef.h>
#include <stdint.h>

#include "sim/core/chan.h"
#include "sim/scn/fabric.h"

#define SRV_ERR_LEN 512
#define SRV_OUTQ_MAX (1u << 20) /* a client that lets more replies pile up is dropped */
#define SRV_CONNECT_WAIT_MS 10000
#define SRV_MAX_CONNS 4096     /* connections at once (--max-conns); more are refused */
#define SRV_PARTIAL_MS 10000   /* a message must be complete this long after its first byte */

struct srv_config {
	struct fabric_config fabric;	/* the ideal fabric's settings, when use_scenario is NULL */
	struct scenario *use_scenario; /* a loaded scenario (sim/scn/scenario.h): srv_new takes it
					* over, also when it fails; srv_free frees it */
	struct chan_geom geom;	 /* every channel's geometry */
	int connect_wait_ms;	 /* how long a connect waits for an unknown listener */
	int max_conns;		 /* connections at once; more are refused (EMFILE) */
	int partial_ms;		 /* a connection whose message is not complete this long after
				  * its first byte is answered ETIMEDOUT and closed */
	size_t outq_max;	 /* per-connection output queue limit, bytes */
	int sample_ms;		 /* a modelled fabric's links sampled this often (op=series); 0: off */
	uint32_t series_samples; /* the newest samples kept (sim/series.h caps them by memory) */
	/* One daemon per host of a run over several (docs/scale-out.md): the run's host count
	 * (0: this host alone) and this daemon's host rank; routes between hosts (op=xroute)
	 * are split by the placement of a modelled fabric on them. */
	int hosts, host_rank;
	int64_t epoch_ns; /* CLOCK_MONOTONIC ns of virtual time 0, the same for every daemon of
			     the run (its hosts share one clock, or have agreed on the instant);
			     0: when the fabric is built */
};

struct scenario;
struct srv;
struct srv_conn;

struct srv_ops {
	void *ctx;
	/* Start watching a new connection's fd for reading; the handle comes back in the
	 * other calls. NULL: could not (the connection is dropped). */
	void *(*attach)(void *ctx, struct srv_conn *c, int fd);
	/* Watch for readability (rd) and writability (wr), 0 or 1 each. */
	void (*watch)(void *ctx, void *io, int rd, int wr);
	/* Call srv_conn_readable again soon: input is left in user-space buffers. */
	void (*again)(void *ctx, void *io);
	/* The connection is being freed; release the handle (the fd is closed after). */
	void (*detach)(void *ctx, void *io);
};

/* Defaults for everything in srv_config. */
void srv_config_init(struct srv_config *cfg);

int srv_new(const struct srv_config *cfg, const struct srv_ops *ops, struct srv **out, char *err,
	    size_t errlen);
/*
 * Shut down: answer waiting connects (ESHUTDOWN) as far as sockets take it
 * without blocking, mark daemon_gone in every channel, unmap them, close
 * every connection (detach first) and free everything. NULL-safe.
 */
void srv_free(struct srv *s);

/* The listening socket is readable: accept what is waiting. 0, or -EMFILE/-ENFILE/-ENOMEM
 * (out of descriptors or memory: pause accepting for a moment) or another negative errno. */
int srv_accept(struct srv *s, int lfd);
void srv_conn_readable(struct srv_conn *c);
void srv_conn_writable(struct srv_conn *c);
/* Microseconds until the next deadline (>= 1), or -1 if none. */
int64_t srv_timeout_us(const struct srv *s);
/* Expire what is due. */
void srv_tick(struct srv *s);
/* 1 once op=stop was received. */
int srv_stopping(const struct srv *s);

/* Daemon-facing facts, for the startup line. */
const char *srv_fabric_kind(const struct srv *s);
uint64_t srv_conn_mem(const struct srv *s);   /* staging bytes per connection */
size_t srv_shm_bytes(const struct srv *s);    /* shared memory per connection */
const char *srv_instance(const struct srv *s); /* hex token of this run */

#endif /* SF_SRV_H */
