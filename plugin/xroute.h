/* SPDX-License-Identifier: MIT */
/*
 * xroute.h - the distributed fabric clock for a cross-host connection on a modelled fabric:
 * the connection's route, owners and split from this host's daemon (op=xroute,
 * sim/srv_xroute.c), made into the end's model (sim/core/xmodel.h) over the process's view of
 * its host's fabric state.
 *
 * Threads: called under sfnet_g.lock from connect and accept; blocks for one request and its
 * reply on a local socket (SFXR_TIMEOUT_MS at most). Errors: ncclResult_t, each with a WARN
 * naming the connection (what) and the daemon's reason.
 */
#ifndef SF_PLUGIN_XROUTE_H
#define SF_PLUGIN_XROUTE_H

#include "plugin/ncclnet.h"
#include "sim/core/xmodel.h"

#define SFXR_TIMEOUT_MS 10000

/* A cross-host connection's route as the daemon gave it, and its connect verdict. */
struct sfxr_route {
	struct xmodel_route r;
	int64_t hold_ns; /* connect_delay: hold the connect this long before it goes on (0: none) */
};

/*
 * Ask this host's daemon for the route from from_node's NIC from_nic to to_node's NIC to_nic
 * into *out. connecting: the connecting end, once per connect (the connect faults apply:
 * connect_refuse fails it with ncclRemoteError, as an unreachable peer; connect_delay sets
 * hold_ns). Else ncclInvalidUsage when the daemon refuses the route (its reason: impairments, a
 * hop of a third host, a daemon not started for several hosts), ncclSystemError when the daemon
 * cannot be asked, ncclInternalError for a reply this build does not understand.
 */
ncclResult_t sfxr_route(const char *from_node, int from_nic, const char *to_node, int to_nic,
			int connecting, const char *what, struct sfxr_route *out);

/*
 * The model of one end (side) of that route, into *out (xmodel_free). listener (the listen
 * handle's random id) and xconn (xchan's number for the connection, given by that listener):
 * both ends know them, and together they name the connection in the whole fabric; they key the
 * model's draws (jitter, duplicates, corruption). ncclSystemError (out of memory),
 * ncclInternalError (a route that does not fit this process's fabric state).
 */
ncclResult_t sfxr_model_new(const struct sfxr_route *route, enum xmodel_side side,
			    uint64_t listener, uint32_t xconn, const char *what,
			    struct xmodel **out);

#endif /* SF_PLUGIN_XROUTE_H */
