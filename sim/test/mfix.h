/* SPDX-License-Identifier: MIT */
/*
 * mfix.h - the model tests' fixtures (test_model.c, test_model_stats.c): resolved links, NICs
 * and paths, and one sender's idle state. Include sim/test/check.h first: a fixture that does
 * not resolve is a failed CHECK.
 */
#ifndef SF_TEST_MFIX_H
#define SF_TEST_MFIX_H

#include <stdint.h>
#include <string.h>

#include "sim/core/model.h"

#define EQ(got, want)                                                                              \
	CHECK((long long)(got) == (long long)(want), "%s = %lld, want %lld", #got,                 \
	      (long long)(got), (long long)(want))

#define GBPS 1000000000ULL
#define ONE MODEL_PROB_ONE

static inline struct model_link mklink(uint64_t rate, int64_t lat, uint32_t mtu, uint32_t hdr)
{
	struct model_link l;
	memset(&l, 0, sizeof(l));
	l.rate_bps = rate;
	l.latency_ns = lat;
	l.mtu = mtu;
	l.hdr_bytes = hdr;
	char err[MODEL_ERR_LEN];
	int rc = model_link_resolve(&l, err, sizeof(err));
	CHECK(rc == 0, "mklink: %s", err);
	return l;
}

static inline struct model_nic mknic(uint64_t host_rate, int64_t o_send, int64_t o_recv,
				     int64_t ack)
{
	struct model_nic n;
	memset(&n, 0, sizeof(n));
	n.host_rate_bps = host_rate;
	n.o_send_ns = o_send;
	n.o_recv_ns = o_recv;
	n.ack_proc_ns = ack;
	n.timeout_exp = 20;
	n.retry_count = 7;
	n.timeout_scale_ppm = 1000000;
	char err[MODEL_ERR_LEN];
	int rc = model_nic_resolve(&n, err, sizeof(err));
	CHECK(rc == 0, "mknic: %s", err);
	return n;
}

static inline struct model_path mkpath(int nhops, struct model_link *hops, enum model_switching sw)
{
	struct model_path p;
	memset(&p, 0, sizeof(p));
	p.nhops = nhops;
	p.switching = sw;
	for (int j = 0; j < nhops; j++) {
		p.hop[j] = &hops[j];
		p.link_id[j] = 100 + (uint32_t)j;
	}
	char err[MODEL_ERR_LEN];
	CHECK(model_path_check(&p, err, sizeof(err)) == 0, "mkpath: %s", err);
	return p;
}

/* Link, connection and NIC state of one sender, all idle. */
struct st {
	int64_t host, busy[MODEL_MAX_HOPS];
	struct model_loss_state ls[MODEL_MAX_HOPS];
	struct model_conn conn;
};

static inline struct model_msg send1(const struct model_path *p, const struct model_nic *nic,
				     struct st *s, uint64_t conn, uint64_t msg, int64_t t,
				     uint64_t bytes)
{
	struct model_key k = {.seed = 42, .conn = conn, .msg = msg};
	struct model_msg m;
	int rc = model_message(p, nic, t, bytes, &k, &s->host, s->busy, s->ls, &s->conn, &m);
	CHECK(rc == 0, "model_message: %d", rc);
	return m;
}

#endif /* SF_TEST_MFIX_H */
