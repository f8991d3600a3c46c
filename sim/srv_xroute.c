/* SPDX-License-Identifier: MIT */
/*
 * srv_xroute.c - op=xroute: the route of a connection between two hosts of a run, for the
 * distributed fabric clock (docs/scale-out.md section 4, sim/core/xmodel.h). Both ends ask
 * their own daemon; every daemon of the run loaded the same scenario and computed the same
 * placement, so both get the same route, owners and split.
 *
 * Request: from_node, from_nic (the sending node's name and NIC index), to_node, to_nic;
 * connect=1 from the connecting end, once per connect: the connect faults apply then as to a
 * connect within a host (faultd_connect): connect_refuse fails it (ECONNABORTED, the fault
 * named), connect_delay adds hold_ns (how long to hold the connect before it goes on).
 * Reply: host, hosts (this daemon's), npath, path (link ids, comma-separated), owner (host
 * rank per hop), split (hops the sending host reserves), switching, src_nic (the sending
 * NIC's gid), src_node, dst_node (ids), and the sending NIC's model: o_send_ns, o_recv_ns,
 * ack_proc_ns, timeout_exp, retry_count, timeout_scale_ppm, host_rate_bps.
 * Refused with the reason: a daemon of one host (EOPNOTSUPP), the ideal fabric (EOPNOTSUPP:
 * its cross-host connections need no route), an unknown node or NIC (ENODEV), two nodes of
 * one host or neither of this one (EINVAL), a route whose first hop the sender's host does not
 * own (EOPNOTSUPP: a placement that does not fit). A hop after the sender's run that the
 * receiver's host does not own (a third host's core link, or owners that alternate) is the
 * receiver's to reserve, said once per link (warn_borrowed_links). Impairments are the
 * plugin's business: loss and reordering make the receiving host replay the route
 * (sim/core/xmodel.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "sim/core/fstate.h"
#include "sim/fabmon.h"
#include "sim/faultd.h"
#include "sim/log.h"
#include "sim/scn/place.h"
#include "sim/srv_int.h"

/*
 * A hop of a route between hosts that neither end's host owns in the split (a core link owned
 * by a third host, or one the sender's host owns after the receiver's began): the receiving
 * host reserves it for this connection in its own state, so this connection's traffic there
 * does not contend with what the owner reserves. The reservation records of docs/scale-out.md
 * section 4 would make it contend; until then it is said, once per link, by the receiving
 * host's daemon.
 */
static void warn_borrowed_links(struct srv *s, const struct model_path *p, int split,
				const char *from, const char *to, int ha, int hb)
{
	for (int j = split; j < p->nhops; j++) {
		uint32_t id = p->link_id[j];
		int o = s->place->link_owner[id];
		if (o == hb || srv_link_warned(s, id))
			continue;
		char ln[128];
		log_warn("fidelity: %s (host %d) -> %s (host %d) crosses %s, which host %d owns: "
			 "host %d reserves it for its connections from host %d, so their traffic "
			 "on it does not contend with what host %d reserves there "
			 "(docs/scale-out.md, section 4); keep each switch's nodes on one "
			 "host (placement:, scenarios/README.md)",
			 from, ha, to, hb, faultd_link_name(s->fabric, id, ln, sizeof(ln)), o, hb,
			 ha, o);
	}
}

/* The NIC a request names by node_key and nic_key: 0, -ENODEV or -EINVAL with err. */
static int find_nic(struct srv *s, const struct ctl_msg *req, const char *node_key,
		    const char *nic_key, const struct fabric_nic **out, char *err)
{
	char q[72];
	uint64_t idx;
	const char *name = ctl_get(req, node_key);
	const struct fabric_node *n = fabric_node_find(s->fabric, name);
	if (!n) {
		snprintf(err, SRV_ERR_LEN, "%s='%s': no such node in the fabric", node_key,
			 clip(name, q));
		return -ENODEV;
	}
	if (get_u64(req, nic_key, &idx, err))
		return -EINVAL;
	*out = idx < (uint64_t)n->nnics ? fabric_nic(n, (int)idx) : NULL;
	if (*out)
		return 0;
	snprintf(err, SRV_ERR_LEN, "%s=%llu: node %s has %d NIC(s)", nic_key,
		 (unsigned long long)idx, n->name, n->nnics);
	return -ENODEV;
}

int srv_op_xroute(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err)
{
	(void)c;
	if (!s->cfg.hosts) {
		snprintf(err, SRV_ERR_LEN,
			 "this daemon serves one host: routes between hosts need "
			 "--hosts H --host-rank R");
		return -EOPNOTSUPP;
	}
	if (!s->place) {
		snprintf(err, SRV_ERR_LEN,
			 "the ideal fabric has no routes: connections between "
			 "hosts run unmodelled on it");
		return -EOPNOTSUPP;
	}
	const struct fabric_nic *a, *b;
	int rc = find_nic(s, req, "from_node", "from_nic", &a, err);
	if (!rc)
		rc = find_nic(s, req, "to_node", "to_nic", &b, err);
	if (rc)
		return rc;
	const struct fabric_node *na = fabric_node(s->fabric, a->node),
				 *nb = fabric_node(s->fabric, b->node);
	int ha = s->place->node_host[a->node], hb = s->place->node_host[b->node];
	if (ha == hb) {
		snprintf(err, SRV_ERR_LEN,
			 "%s and %s are both on host %d: a connection within a "
			 "host goes through its daemon",
			 na->name, nb->name, ha);
		return -EINVAL;
	}
	if (ha != s->cfg.host_rank && hb != s->cfg.host_rank) {
		snprintf(err, SRV_ERR_LEN,
			 "%s (host %d) and %s (host %d): neither is on this "
			 "daemon's host %d",
			 na->name, ha, nb->name, hb, s->cfg.host_rank);
		return -EINVAL;
	}
	struct model_path p;
	char why[SRV_ERR_LEN / 2];
	rc = fabric_path(s->fabric, a->node, a->index, b->node, b->index, &p, why, sizeof(why));
	if (rc) {
		snprintf(err, SRV_ERR_LEN, "no route %s/%d -> %s/%d: %s", na->name, a->index,
			 nb->name, b->index, why);
		return rc;
	}
	/* the sender's host owns a first run of hops, the receiver's the rest; a hop after that
	 * run that the receiver's host does not own is reserved by it all the same (said) */
	int split = 0;
	while (split < p.nhops && s->place->link_owner[p.link_id[split]] == ha)
		split++;
	if (split == 0) {
		char ln[128];
		snprintf(err, SRV_ERR_LEN,
			 "the route %s -> %s begins with %s, owned by host %d, not the sender's "
			 "host %d: the placement does not fit the fabric",
			 na->name, nb->name,
			 faultd_link_name(s->fabric, p.link_id[0], ln, sizeof(ln)),
			 s->place->link_owner[p.link_id[0]], ha);
		return -EOPNOTSUPP;
	}
	if (hb == s->cfg.host_rank)
		warn_borrowed_links(s, &p, split, na->name, nb->name, ha, hb);
	char v[CTL_VALUE_MAX + 1], o[CTL_VALUE_MAX + 1];
	size_t vl = 0, ol = 0;
	for (int j = 0; j < p.nhops; j++) {
		vl += (size_t)snprintf(v + vl, sizeof(v) - vl, "%s%u", j ? "," : "", p.link_id[j]);
		ol += (size_t)snprintf(o + ol, sizeof(o) - ol, "%s%d", j ? "," : "",
				       s->place->link_owner[p.link_id[j]]);
	}
	int64_t hold_ns = 0;
	if (ctl_get(req, "connect") && strcmp(ctl_get(req, "connect"), "1")) {
		snprintf(err, SRV_ERR_LEN, "connect='%s': 1 or absent", ctl_get(req, "connect"));
		return -EINVAL;
	}
	if (ctl_get(req, "connect") && fabmon_faults(s->mon)) {
		int64_t until = 0, now = now_ns();
		uint32_t fid = 0;
		char cwhy[SRV_ERR_LEN / 2];
		int verdict = faultd_connect(fabmon_faults(s->mon), a->node, b->node, now, &until,
					     &fid, cwhy, sizeof(cwhy));
		if (verdict)
			log_warn("connect %s/%d -> %s/%d (to host %d): %s", na->name, a->index,
				 nb->name, b->index, hb, cwhy);
		if (verdict < 0) {
			snprintf(err, SRV_ERR_LEN, "%s", cwhy);
			return -ECONNABORTED;
		}
		if (verdict > 0 && until > now)
			hold_ns = until - now;
	}
	const struct model_nic *m = &a->model;
	ctl_addf(rep, "host", "%d", s->cfg.host_rank);
	ctl_addf(rep, "hold_ns", "%lld", (long long)hold_ns);
	ctl_addf(rep, "hosts", "%d", s->cfg.hosts);
	ctl_addf(rep, "npath", "%d", p.nhops);
	ctl_add(rep, "path", v);
	ctl_add(rep, "owner", o);
	ctl_addf(rep, "split", "%d", split);
	ctl_addf(rep, "switching", "%d", (int)p.switching);
	ctl_addf(rep, "src_nic", "%d", a->gid);
	ctl_addf(rep, "src_node", "%d", a->node);
	ctl_addf(rep, "dst_node", "%d", b->node);
	ctl_addf(rep, "o_send_ns", "%lld", (long long)m->o_send_ns);
	ctl_addf(rep, "o_recv_ns", "%lld", (long long)m->o_recv_ns);
	ctl_addf(rep, "ack_proc_ns", "%lld", (long long)m->ack_proc_ns);
	ctl_addf(rep, "timeout_exp", "%u", m->timeout_exp);
	ctl_addf(rep, "retry_count", "%u", m->retry_count);
	ctl_addf(rep, "timeout_scale_ppm", "%u", m->timeout_scale_ppm);
	ctl_addf(rep, "host_rate_bps", "%llu", (unsigned long long)m->host_rate_bps);
	return 0;
}

/* op=clock offset_ns rtt_ns (docs/scale-out.md, section 4): this host's clock against host 0's,
 * as its launch agent measured it at the rendezvous and every minute after (host 0's clock less
 * this host's; the sample's round trip bounds the error at half of it). The daemon does not move
 * its epoch: it keeps the reading for show and logs it, with its move since the first, so a
 * drift that shifts every stamp between the hosts is on record where the fabric is. */
int srv_op_clock(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err)
{
	/* CLOCK_MONOTONIC counts from each machine's boot: hosts are apart by their uptimes
	 * (hours, days). Bounded so that the move since the first check fits in 64 bits. */
	const int64_t far = (int64_t)1 << 61;
	int64_t off, rtt;
	(void)c, (void)rep;
	if (s->cfg.hosts < 2) {
		snprintf(err, SRV_ERR_LEN, "op=clock: this daemon serves one host (no --hosts)");
		return -EOPNOTSUPP;
	}
	if (ctl_get_i64(req, "offset_ns", -far, far, &off)) {
		snprintf(err, SRV_ERR_LEN, "offset_ns='%.32s' is not a number of ns within 2^61",
			 ctl_get(req, "offset_ns"));
		return -EINVAL;
	}
	if (ctl_get_i64(req, "rtt_ns", 0, 10000000000LL, &rtt)) {
		snprintf(err, SRV_ERR_LEN, "rtt_ns='%.32s' is not a number of ns in 0..10 s",
			 ctl_get(req, "rtt_ns"));
		return -EINVAL;
	}
	if (!s->clock.checks)
		s->clock.first_ns = off;
	s->clock.offset_ns = off;
	s->clock.rtt_ns = (uint64_t)rtt;
	s->clock.at_ns = now_ns();
	s->clock.checks++;
	log_info("clock: host %d's offset to host 0 %+.1f us (round trip %.1f us; check %d), "
		 "%+.1f us since the first",
		 s->cfg.host_rank, (double)off / 1e3, (double)rtt / 1e3, s->clock.checks,
		 (double)(off - s->clock.first_ns) / 1e3);
	return 0;
}
