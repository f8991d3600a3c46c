/* SPDX-License-Identifier: MIT */
/*
 * xroute.c - a cross-host connection's route from the daemon, made into its end's model
 * (xroute.h has the contract).
 */
#include "plugin/xroute.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/client.h"
#include "plugin/net_int.h"
#include "plugin/plog.h"
#include "sim/core/ctl.h"

/* "a,b,c" into out[], at most max entries each in [0, lim): how many, or -1. */
static int parse_list(const char *s, uint32_t *out, int max, uint64_t lim)
{
	int n = 0;
	while (s && *s) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 10);
		if (errno || end == s || v >= lim || n == max || (*end && *end != ','))
			return -1;
		out[n++] = (uint32_t)v;
		s = *end ? end + 1 : end;
	}
	return n;
}

static int get_i64(const struct ctl_msg *m, const char *key, int64_t *out)
{
	uint64_t v;
	if (ctl_get_u64(m, key, &v) || v > (uint64_t)INT64_MAX / 4)
		return -1;
	*out = (int64_t)v;
	return 0;
}

static int get_u32(const struct ctl_msg *m, const char *key, uint32_t *out)
{
	uint64_t v;
	if (ctl_get_u64(m, key, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* The reply into r: 0, or -1 for something this build does not understand. */
static int parse_route(const struct ctl_msg *m, struct xmodel_route *r)
{
	struct fst_conn *c = &r->conn;
	uint32_t owner[MODEL_MAX_HOPS], sw, src_nic;
	int npath, split, src_node, dst_node;
	if (ctl_get_int(m, "npath", 1, MODEL_MAX_HOPS, &npath) ||
	    ctl_get_int(m, "split", 1, npath, &split) ||
	    ctl_get_int(m, "src_node", 0, INT32_MAX, &src_node) ||
	    ctl_get_int(m, "dst_node", 0, INT32_MAX, &dst_node) || get_u32(m, "switching", &sw) ||
	    sw > MODEL_STORE_FORWARD || get_u32(m, "src_nic", &src_nic) ||
	    parse_list(ctl_get(m, "path"), c->path, MODEL_MAX_HOPS, UINT32_MAX) != npath ||
	    parse_list(ctl_get(m, "owner"), owner, MODEL_MAX_HOPS, UINT16_MAX) != npath ||
	    get_i64(m, "o_send_ns", &c->nic.o_send_ns) ||
	    get_i64(m, "o_recv_ns", &c->nic.o_recv_ns) ||
	    get_i64(m, "ack_proc_ns", &c->nic.ack_proc_ns) ||
	    get_u32(m, "timeout_exp", &c->nic.timeout_exp) ||
	    get_u32(m, "retry_count", &c->nic.retry_count) ||
	    get_u32(m, "timeout_scale_ppm", &c->nic.timeout_scale_ppm) ||
	    ctl_get_u64(m, "host_rate_bps", &c->nic.host_rate_bps))
		return -1;
	c->npath = npath;
	c->switching = (enum model_switching)sw;
	c->src_nic = src_nic;
	c->src_node = src_node;
	c->dst_node = dst_node;
	r->split = split;
	r->from_host = owner[0]; /* the sender's host owns its uplink */
	return 0;
}

ncclResult_t sfxr_route(const char *from_node, int from_nic, const char *to_node, int to_nic,
			int connecting, const char *what, struct sfxr_route *out)
{
	memset(out, 0, sizeof(*out));
	struct sfc_conn conn = {.fd = -1};
	struct ctl_msg *m = ctl_msg_new(), *rep = NULL;
	ncclResult_t res = ncclSystemError;
	char why[256];
	int rc = m ? sfc_conn_open_why(&conn, sfnet_g.sock, why, sizeof(why)) : -ENOMEM;
	if (rc) {
		PWARN("%s: cannot ask the fabric daemon at %s for the route: %s", what,
		      sfnet_g.sock, rc == -ENOMEM ? "out of memory" : why);
		goto out;
	}
	rc = ctl_add(m, "op", "xroute");
	if (!rc)
		rc = ctl_add(m, "from_node", from_node);
	if (!rc)
		rc = ctl_addf(m, "from_nic", "%d", from_nic);
	if (!rc)
		rc = ctl_add(m, "to_node", to_node);
	if (!rc)
		rc = ctl_addf(m, "to_nic", "%d", to_nic);
	if (!rc && connecting)
		rc = ctl_add(m, "connect", "1");
	if (!rc)
		rc = sfc_conn_send(&conn, m, -1);
	if (!rc)
		rc = sfc_conn_recv(&conn, &rep, SFXR_TIMEOUT_MS);
	if (rc) {
		PWARN("%s: asking the fabric daemon at %s for the route (op=xroute) failed: %s",
		      what, sfnet_g.sock, rc == -EAGAIN ? "no reply in time" : strerror(-rc));
		goto out;
	}
	const char *text;
	int e = sfc_reply_errno(rep, &text);
	if (e == ECONNABORTED) { /* a connect_refuse fault: as an unreachable IB peer */
		PWARN("%s failed: %s (a fault of the emulated fabric refused it)", what, text);
		res = ncclRemoteError;
		goto out;
	}
	if (e) {
		PWARN("%s: the fabric daemon refused its route: %s%s%s", what,
		      e < 0 ? "reply without errno" : strerror(e), *text ? ": " : "", text);
		res = e == EOPNOTSUPP || e == EINVAL || e == ENODEV ? ncclInvalidUsage
								    : ncclSystemError;
		goto out;
	}
	uint64_t hold;
	if (parse_route(rep, &out->r) || ctl_get_u64(rep, "hold_ns", &hold) ||
	    hold > (uint64_t)INT64_MAX / 4) {
		PWARN("%s: the fabric daemon's route is malformed (a daemon of another build?)",
		      what);
		res = ncclInternalError;
		goto out;
	}
	out->hold_ns = (int64_t)hold;
	if (hold)
		PINFO(NCCL_NET,
		      "%s: held %.3f ms by a connect_delay fault (the daemon's log names it)", what,
		      (double)hold / 1e6);
	PINFO(NCCL_NET,
	      "%s: modelled across hosts over %d hop(s), %d of them reserved by the "
	      "sender's host (%s), the rest by the receiver's",
	      what, out->r.conn.npath, out->r.split, ctl_get(rep, "owner"));
	res = ncclSuccess;
out:
	sfc_conn_close(&conn);
	ctl_msg_free(m);
	ctl_msg_free(rep);
	return res;
}

ncclResult_t sfxr_model_new(const struct sfxr_route *route, enum xmodel_side side,
			    uint64_t listener, uint32_t xconn, const char *what,
			    struct xmodel **out)
{
	struct xmodel_route r = route->r;
	/* both ends compute it: the listener's random id and its number for the connection,
	 * mixed (splitmix64's finalizer); the top bit keeps it apart from the daemon's channel
	 * ids, which count from 1 */
	uint64_t z = listener ^ ((uint64_t)(xconn & XCHAN_MAX_CONN) << 32);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	r.conn.id = 1ull << 63 | (z ^ (z >> 31)) >> 1;
	int rc = xmodel_new(sfnet_g.session->fab, &r, side, out);
	if (rc) {
		PWARN("%s: the route does not fit this process's fabric state: %s", what,
		      rc == -ENOMEM ? "out of memory" : "links or NICs it does not have");
		return rc == -ENOMEM ? ncclSystemError : ncclInternalError;
	}
	return ncclSuccess;
}
