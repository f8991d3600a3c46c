/* SPDX-License-Identifier: MIT */
/*
 * srv_session.c - the ops a plugin's process makes: hello (its session),
 * listen, connect (the rendezvous, its faults, the channel and its route)
 * and close. A leaf under the hub sim/srv.c: it calls the connections
 * (srv_conn.c) and the registries (srv_reg.c), never the hub.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sim/core/ctl.h"
#include "sim/core/fstate.h"
#include "sim/fabmon.h"
#include "sim/faultd.h"
#include "sim/log.h"
#include "sim/scn/place.h"
#include "sim/srv_int.h"

/*
 * A daemon serving one host of several reserves the routes of its own connections in its own
 * fabric state. A route through a link another host owns (a leaf's uplink when the leaf's
 * nodes are split between hosts) is then reserved in two states, so the two hosts' traffic on
 * it does not contend. Said once per link: the placement is the remedy.
 */
bool srv_link_warned(struct srv *s, uint32_t id)
{
	if (s->warned_links && s->warned_links[id])
		return true;
	if (!s->warned_links)
		s->warned_links = calloc((size_t)fabric_nlinks(s->fabric), 1);
	if (s->warned_links)
		s->warned_links[id] = 1;
	return false;
}

static void warn_foreign_links(struct srv *s, const struct model_path *p, const char *from,
			       const char *to)
{
	for (int j = 0; j < p->nhops; j++) {
		uint32_t id = p->link_id[j];
		int o = s->place->link_owner[id];
		if (o == s->cfg.host_rank || srv_link_warned(s, id))
			continue;
		char ln[128];
		log_warn("fidelity: %s -> %s (both on host %d) crosses %s, which host %d owns: "
			 "each "
			 "host reserves it for its own connections, so their traffic on it does "
			 "not "
			 "contend; keep the nodes under one switch on one host (placement:, "
			 "scenarios/README.md)",
			 from, to, s->cfg.host_rank,
			 faultd_link_name(s->fabric, id, ln, sizeof(ln)), o);
	}
}

/* ---- connecting ---------------------------------------------------------- */

/* Make the channel for connect c to listener l and hand its two ends out. */
void srv_do_connect(struct srv *s, struct srv_conn *c, struct session *se, struct listener *l,
		    int nic)
{
	char err[SRV_ERR_LEN];
	struct channel *ch = NULL;
	struct ctl_msg *m = s->out;
	c->role = R_CONNECT;
	if (fabmon_faults(s->mon) && !c->faults_done) {
		int64_t until = 0, now = now_ns();
		uint32_t fid = 0;
		int v = faultd_connect(fabmon_faults(s->mon), se->node->id, l->sess->node->id, now,
				       &until, &fid, err, sizeof(err));
		if (v < 0) {
			log_warn("connect %s/%d (pid %d) -> %s/%d (listener 0x%llx): %s",
				 se->node->name, nic, (int)c->pid, l->sess->node->name, l->nic,
				 (unsigned long long)l->id, err);
			srv_reply_error(c, ECONNABORTED, err);
			return;
		}
		if (v > 0) {
			log_warn("connect %s/%d (pid %d) -> %s/%d (listener 0x%llx): %s",
				 se->node->name, nic, (int)c->pid, l->sess->node->name, l->nic,
				 (unsigned long long)l->id, err);
			c->pending = true;
			c->pend_held = true;
			c->pend_listener = l->id;
			c->pend_nic = nic;
			c->pend_sess = se;
			c->pend_since = now;
			c->pend_deadline = until;
			dl_push(&s->pending, &c->pend_link);
			s->npending++;
			return;
		}
	}
	int fd = srv_chan_create(s, &ch, err, sizeof(err));
	if (fd < 0) {
		log_error("connect from pid %d to listener 0x%llx: %s", (int)c->pid,
			  (unsigned long long)l->id, err);
		srv_reply_error(c, -fd, err);
		return;
	}
	uint64_t id = ch->id;
	ch->listener = l->id;
	ch->end[END_TX] = (struct chan_end){
		.sess = se, .pid = se->pid, .node = se->node, .nic = nic, .st = END_OPEN};
	ch->end[END_RX] = (struct chan_end){.sess = l->sess,
					    .pid = l->sess->pid,
					    .node = l->sess->node,
					    .nic = l->nic,
					    .st = END_OPEN};
	int fd2 = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd2 < 0) {
		int e = errno;
		snprintf(err, sizeof(err), "cannot duplicate the channel's memfd: %s", strerror(e));
		log_error("connect from pid %d to listener 0x%llx: %s", (int)c->pid,
			  (unsigned long long)l->id, err);
		srv_reply_error(c, e, err);
		close(fd);
		ch->end[END_TX].st = ch->end[END_RX].st = END_DEAD;
		srv_chan_maybe_free(s, ch);
		return;
	}
	l->accepted++;
	log_info("chan 0x%llx: %s/%d (pid %d) -> %s/%d (pid %d), listener 0x%llx, %zu bytes of "
		 "shared memory",
		 (unsigned long long)id, se->node->name, nic, (int)se->pid, l->sess->node->name,
		 l->nic, (int)l->sess->pid, (unsigned long long)l->id, s->shm_bytes);

	/* The route: every message on the channel is reserved along it (a modelled fabric). */
	if (s->mon) {
		struct model_path path;
		const struct fabric_nic *snic = fabric_nic(se->node, nic);
		int prc = snic ? fabric_path(s->fabric, se->node->id, nic, l->sess->node->id,
					     l->nic, &path, err, sizeof(err))
			       : -ENODEV;
		if (prc == 0)
			prc = chan_set_route(ch->shm, &path, (uint32_t)snic->gid, &snic->model,
					     se->node->id, l->sess->node->id);
		if (prc == 0 && s->place)
			warn_foreign_links(s, &path, se->node->name, l->sess->node->name);
		if (prc == 0) /* a comm_hang or node_freeze already on holds it from the start */
			chan_set_hold(ch->shm,
				      faultd_hold_bits(fabmon_faults(s->mon), se->node->id,
						       l->sess->node->id),
				      1);
		if (prc) {
			log_error("chan 0x%llx: no route %s/%d -> %s/%d: %s",
				  (unsigned long long)id, se->node->name, nic, l->sess->node->name,
				  l->nic, prc == -ENODEV ? "no such NIC" : err);
			srv_reply_error(c, -prc, "no route between these NICs in the fabric");
			close(fd);
			close(fd2);
			ch->end[END_TX].st = ch->end[END_RX].st = END_DEAD;
			srv_chan_maybe_free(s, ch);
			return;
		}
	}

	/* Neither queue call frees ch, except on out-of-memory: use only id from here. */
	msg_reset(m);
	ctl_addf(m, "chan", "0x%llx", (unsigned long long)id);
	ctl_addf(m, "shm_bytes", "%zu", s->shm_bytes);
	ctl_add(m, "fd", "1");
	ctl_add(m, "errno", "0");
	srv_conn_queue(c, m, fd2, id, END_TX);

	msg_reset(m);
	ctl_add(m, "op", "incoming");
	ctl_addf(m, "chan", "0x%llx", (unsigned long long)id);
	ctl_addf(m, "shm_bytes", "%zu", s->shm_bytes);
	ctl_add(m, "from_node", se->node->name);
	ctl_addf(m, "from_nic", "%d", nic);
	ctl_addf(m, "listener", "0x%llx", (unsigned long long)l->id);
	ctl_add(m, "fd", "1");
	srv_conn_queue(l->conn, m, fd, id, END_RX);
}

/* ---- requests ------------------------------------------------------------ */

/*
 * The session a request acts for: the session's own connection is its session; another
 * connection names it by session= (the hello's token) or, without one, by the socket's pid.
 * A daemon in a pid namespace that does not hold its clients sees pid 0 for all of them, so
 * there only the token can tell the processes apart.
 */
static struct session *need_session(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
				    char *err)
{
	char q[72];
	if (c->role == R_SESSION && c->sess)
		return c->sess;
	const char *tv = ctl_get(req, "session");
	if (tv) {
		uint64_t token;
		struct session *se = NULL;
		if (ctl_get_u64(req, "session", &token) == 0)
			se = srv_session_find(s, 0, token);
		if (!se)
			snprintf(err, SRV_ERR_LEN,
				 "session='%s' is no live session's token (its hello's reply has "
				 "it)",
				 clip(tv, q));
		else if (c->pid > 0 && se->pid > 0 && se->pid != c->pid) {
			snprintf(err, SRV_ERR_LEN,
				 "session='%s' is pid %d's, and this connection is pid %d's",
				 clip(tv, q), (int)se->pid, (int)c->pid);
			se = NULL;
		}
		return se;
	}
	struct session *se = srv_session_find(s, c->pid, 0);
	if (!se && c->pid > 0)
		snprintf(err, SRV_ERR_LEN,
			 "hello first: pid %d has no session (send op=hello on a connection "
			 "that stays open)",
			 (int)c->pid);
	else if (!se)
		snprintf(err, SRV_ERR_LEN,
			 "this daemon cannot see the client's pid (SO_PEERCRED says 0: another pid "
			 "namespace), so op=listen and op=connect must name their session: "
			 "session=<the token of the hello's reply>");
	return se;
}

static int need_fresh(struct srv_conn *c, const char *op, char *err)
{
	if (c->role == R_NONE)
		return 0;
	snprintf(err, SRV_ERR_LEN,
		 "op=%s needs a connection of its own; this one already carries a %s", op,
		 role_names[c->role]);
	return -EISCONN;
}

/* The nic key, checked against node's NICs. */
static int get_nic(const struct ctl_msg *req, const struct fabric_node *node, int *out, char *err)
{
	char q[72];
	if (ctl_get_int(req, "nic", 0, INT_MAX, out) != 0) {
		snprintf(err, SRV_ERR_LEN, "nic='%s' is not a NIC index",
			 clip(ctl_get(req, "nic"), q));
		return -EINVAL;
	}
	if (*out >= node->nnics) {
		snprintf(err, SRV_ERR_LEN, "nic %d does not exist on node %s (%d NIC(s): 0..%d)",
			 *out, node->name, node->nnics, node->nnics - 1);
		return -ENODEV;
	}
	return 0;
}

int srv_op_hello(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err)
{
	char q[72];
	int rc = need_fresh(c, "hello", err), version, pid;
	if (rc)
		return rc;
	struct session *old = srv_session_find(s, c->pid, 0);
	if (old && old->conn->fd >= 0) {
		/* A plugin copy unloaded with objects still open closes its socket without a
		 * word, and a reloaded copy says hello at once: if the old socket is at EOF, that
		 * session is over (we just have not read the EOF yet). */
		char b;
		if (recv(old->conn->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			srv_conn_kill(old->conn,
				      "the peer closed the connection (seen at its new hello)");
			old = srv_session_find(s, c->pid, 0);
		}
	}
	if (old) {
		snprintf(err, SRV_ERR_LEN, "pid %d already has a session (node %s, conn#%llu)",
			 (int)c->pid, old->node->name, (unsigned long long)old->conn->id);
		return -EEXIST;
	}
	if (ctl_get_int(req, "version", 0, INT_MAX, &version) != 0) {
		snprintf(err, SRV_ERR_LEN, "version='%s' is not a number",
			 clip(ctl_get(req, "version"), q));
		return -EINVAL;
	}
	if (version != 1) {
		snprintf(err, SRV_ERR_LEN, "protocol version %d is not supported (this daemon: 1)",
			 version);
		return -EPROTONOSUPPORT;
	}
	if (ctl_get_int(req, "pid", 1, INT_MAX, &pid) != 0) {
		snprintf(err, SRV_ERR_LEN, "pid='%s' is not a process id",
			 clip(ctl_get(req, "pid"), q));
		return -EINVAL;
	}
	const char *client = ctl_get(req, "client");
	if (!*client || strlen(client) > SRV_CLIENT_MAX) {
		snprintf(err, SRV_ERR_LEN, "client='%s' must be 1..%d characters", clip(client, q),
			 SRV_CLIENT_MAX);
		return -EINVAL;
	}
	const char *gpu = ctl_get(req, "gpu"); /* the plugin's GPU data path, for status */
	if (gpu && strcmp(gpu, "on") && strcmp(gpu, "off")) {
		snprintf(err, SRV_ERR_LEN, "gpu='%s' is not on or off", clip(gpu, q));
		return -EINVAL;
	}
	const struct fabric_node *node;
	char ferr[FABRIC_ERR_LEN];
	rc = fabric_node_get(s->fabric, ctl_get(req, "node"), &node, ferr, sizeof(ferr));
	if (rc) {
		snprintf(err, SRV_ERR_LEN, "%s", ferr);
		return rc;
	}
	struct session *se = calloc(1, sizeof(*se));
	if (!se) {
		s->nodes_gc = true;
		snprintf(err, SRV_ERR_LEN, "out of memory");
		return -ENOMEM;
	}
	se->serial = ++s->next_serial;
	se->pid = c->pid;
	se->said_pid = pid;
	do { /* unguessable and never 0 or another live session's */
		if (getrandom(&se->token, sizeof(se->token), GRND_NONBLOCK) !=
		    (ssize_t)sizeof(se->token))
			se->token = (uint64_t)now_ns() * 0x9e3779b97f4a7c15ull ^ se->serial;
	} while (!se->token || srv_session_find(s, 0, se->token));
	se->node = node;
	snprintf(se->client, sizeof(se->client), "%s", client);
	snprintf(se->gpu, sizeof(se->gpu), "%s", gpu ? gpu : "");
	se->conn = c;
	dl_push(&s->sessions, &se->link);
	s->nsessions++;
	c->role = R_SESSION;
	c->sess = se;
	if (c->pid <= 0)
		log_info("conn#%llu: hello says pid=%d, the socket says pid %d (another pid "
			 "namespace): the session goes by its token, and faults cannot signal it",
			 (unsigned long long)c->id, pid, (int)c->pid);
	else if (pid != (int)c->pid)
		log_info("conn#%llu: hello says pid=%d, the socket says pid %d (another pid "
			 "namespace?); using %d",
			 (unsigned long long)c->id, pid, (int)c->pid, (int)c->pid);
	log_info("session pid %d: node %s (id %d), client %s, conn#%llu", (int)se->pid, node->name,
		 node->id, se->client, (unsigned long long)c->id);
	if (faultd_node_joined(fabmon_faults(s->mon), node->id)) {
		/* a process that joins a frozen (or straggling, now stopped) node stops with it; the
		 * SIGCONT that ends the fault goes to every session of the node */
		if (se->pid <= 0) /* kill(0, ...) would stop the daemon's own process group */
			log_warn("session of hello pid %d joins node %s while a fault holds it "
				 "stopped, but this daemon cannot see its pid to stop it",
				 pid, node->name);
		else if (kill(se->pid, SIGSTOP) == 0)
			log_warn("session pid %d joins node %s while a fault holds it stopped: "
				 "SIGSTOP",
				 (int)se->pid, node->name);
	}

	ctl_add(rep, "fabric", fabric_kind(s->fabric));
	ctl_add(rep, "instance", s->instance);
	ctl_addf(rep, "session", "0x%016llx", (unsigned long long)se->token);
	ctl_add(rep, "node", node->name);
	ctl_addf(rep, "node_id", "%d", node->id);
	ctl_addf(rep, "nics", "%d", node->nnics);
	for (int i = 0; i < node->nnics; i++) {
		const struct fabric_nic *nic = &node->nic[i];
		char k[CTL_KEY_MAX + 1];
		snprintf(k, sizeof(k), "nic.%d.name", i);
		ctl_add(rep, k, nic->name);
		snprintf(k, sizeof(k), "nic.%d.speed_mbps", i);
		ctl_addf(rep, k, "%lld", (long long)nic->speed_mbps);
		snprintf(k, sizeof(k), "nic.%d.latency_ns", i);
		ctl_addf(rep, k, "%lld", (long long)nic->latency_ns);
		snprintf(k, sizeof(k), "nic.%d.guid", i);
		ctl_addf(rep, k, "0x%016llx", (unsigned long long)nic->guid);
	}
	ctl_addf(rep, "conn_mem", "%llu", (unsigned long long)s->conn_mem);
	ctl_addf(rep, "shm_bytes", "%zu", s->shm_bytes);
	ctl_addf(rep, "slot_bytes", "%u", s->cfg.geom.slot_bytes);
	ctl_addf(rep, "nslots", "%u", s->cfg.geom.nslots);
	if (!s->mon)
		return 0;
	/* A modelled fabric: the session gets the shared fabric state with the reply. */
	int fd = fcntl(fabmon_fd(s->mon), F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, SRV_ERR_LEN, "cannot duplicate the fabric state's memfd: %s",
			 strerror(errno));
		return -EMFILE;
	}
	ctl_addf(rep, "fabric_bytes", "%zu", fabmon_bytes(s->mon));
	ctl_add(rep, "fd", "1");
	ctl_add(rep, "errno", "0");
	srv_conn_queue(c, rep, fd, 0, 0);
	return SRV_DONE;
}

int srv_op_listen(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err)
{
	uint64_t id;
	int nic, rc;
	struct session *se = need_session(s, c, req, err);
	if (!se)
		return -EPERM;
	if ((rc = need_fresh(c, "listen", err)) || (rc = get_u64(req, "listener", &id, err)) ||
	    (rc = get_nic(req, se->node, &nic, err)))
		return rc;
	struct listener *dup = srv_listener_find(s, id);
	if (dup) {
		snprintf(err, SRV_ERR_LEN, "listener 0x%llx already exists (pid %d, node %s)",
			 (unsigned long long)id, (int)dup->sess->pid, dup->sess->node->name);
		return -EEXIST;
	}
	struct listener *l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, SRV_ERR_LEN, "out of memory");
		return -ENOMEM;
	}
	l->id = id;
	l->sess = se;
	l->nic = nic;
	l->conn = c;
	dl_push(&s->listeners, &l->link);
	s->nlisteners++;
	c->role = R_LISTENER;
	c->lis = l;
	struct tomb *tb = srv_tomb_find(s, id);
	if (tb)
		tb->used = false;
	log_info("listener 0x%llx: pid %d, %s/%d, conn#%llu", (unsigned long long)id, (int)se->pid,
		 se->node->name, nic, (unsigned long long)c->id);

	/* The reply goes first: incoming events for waiting connects follow it. */
	ctl_add(rep, "errno", "0");
	srv_conn_queue(c, rep, -1, 0, 0);
	struct dl *p, *t;
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *pc = dl_entry(p, struct srv_conn, pend_link);
		if (pc->pend_listener != id || pc->pend_held)
			continue;
		srv_pending_remove(pc);
		log_debug("conn#%llu: connect to listener 0x%llx waited %lld ms",
			  (unsigned long long)pc->id, (unsigned long long)id,
			  (long long)((now_ns() - pc->pend_since) / 1000000));
		srv_do_connect(s, pc, pc->pend_sess, l, pc->pend_nic);
	}
	return SRV_DONE;
}

int srv_op_connect(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		   struct ctl_msg *rep, char *err)
{
	uint64_t id;
	int nic, rc;
	(void)rep;
	struct session *se = need_session(s, c, req, err);
	if (!se)
		return -EPERM;
	if ((rc = need_fresh(c, "connect", err)) || (rc = get_u64(req, "listener", &id, err)) ||
	    (rc = get_nic(req, se->node, &nic, err)))
		return rc;
	struct listener *l = srv_listener_find(s, id);
	if (l) {
		srv_do_connect(s, c, se, l, nic);
		return SRV_DONE;
	}
	struct tomb *tb = srv_tomb_find(s, id);
	if (tb && srv_session_alive(s, tb->sess_serial)) {
		snprintf(err, SRV_ERR_LEN, "listener 0x%llx (pid %d) was closed",
			 (unsigned long long)id, (int)tb->pid);
		return -ECONNREFUSED;
	}
	if (tb) {
		snprintf(err, SRV_ERR_LEN, "listener 0x%llx is gone: its process (pid %d) ended",
			 (unsigned long long)id, (int)tb->pid);
		return -ECONNRESET;
	}
	if (s->cfg.connect_wait_ms == 0) {
		snprintf(err, SRV_ERR_LEN, "listener 0x%llx is not known", (unsigned long long)id);
		return -ECONNREFUSED;
	}
	/* Handles travel out of band, so a connect may overtake its listen: wait for it. */
	c->role = R_CONNECT;
	c->pending = true;
	c->pend_listener = id;
	c->pend_nic = nic;
	c->pend_sess = se;
	c->pend_since = now_ns();
	c->pend_deadline = c->pend_since + (int64_t)s->cfg.connect_wait_ms * 1000000;
	dl_push(&s->pending, &c->pend_link);
	s->npending++;
	log_debug("conn#%llu: connect from pid %d to unknown listener 0x%llx waits up to %d ms",
		  (unsigned long long)c->id, (int)c->pid, (unsigned long long)id,
		  s->cfg.connect_wait_ms);
	return SRV_DONE;
}

int srv_op_close(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err)
{
	char q[72];
	uint64_t id;
	int rc;
	(void)rep;
	struct session *se = need_session(s, c, req, err);
	if (!se)
		return -EPERM;
	if ((rc = get_u64(req, "chan", &id, err)))
		return rc;
	const char *sv = ctl_get(req, "side");
	int side;
	if (strcmp(sv, "send") == 0)
		side = END_TX;
	else if (strcmp(sv, "recv") == 0)
		side = END_RX;
	else {
		snprintf(err, SRV_ERR_LEN, "side='%s' must be send or recv", clip(sv, q));
		return -EINVAL;
	}
	struct channel *ch = srv_chan_find(s, id);
	if (!ch) {
		snprintf(err, SRV_ERR_LEN, "no channel 0x%llx", (unsigned long long)id);
		return -ENOENT;
	}
	struct chan_end *e = &ch->end[side];
	if (ch->shm && e->sess != se) {
		snprintf(err, SRV_ERR_LEN, "the %s end of channel 0x%llx belongs to pid %d%s",
			 end_name(side), (unsigned long long)id, (int)e->pid,
			 c->pid > 0 && e->pid == c->pid ? " (an earlier session)" : "");
		return -EPERM;
	}
	if (!ch->shm || e->st != END_OPEN) {
		snprintf(err, SRV_ERR_LEN, "the %s end of channel 0x%llx is already %s",
			 end_name(side), (unsigned long long)id,
			 e->st == END_DEAD ? "dead" : "closed");
		return -EALREADY;
	}
	e->st = END_CLOSED;
	log_info("chan 0x%llx: %s end closed by pid %d", (unsigned long long)id, end_name(side),
		 (int)c->pid);
	srv_chan_maybe_free(s, ch);
	return 0;
}
