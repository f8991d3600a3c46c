/* SPDX-License-Identifier: MIT */
/*
 * srv.c - simfabricd's server: the state behind the control protocol.
 * See srv.h for how it meets its event loop, docs/control-protocol.md for
 * what the requests mean.
 *
 * The hub of the daemon: the op table and the requests' checks, the entry
 * points (srv_new/free, accept, read, write, tick). Its leaves call nothing
 * here: srv_session.c (hello, listen, connect, close), srv_fault.c (op=fault,
 * the fault daemon's hands), srv_look.c (the ops that only look), srv_conn.c
 * (connections, their output), srv_reg.c (channels, sessions, listeners),
 * fabmon.c (a modelled fabric's shared state, fault daemon, sampler and
 * fidelity monitor), sock.c (the socket file); srv_int.h holds the objects
 * they share and what each leaf offers.
 *
 * Object lifetimes, in one place:
 *  - A connection (srv_conn) lives until EOF, a write error, a protocol error
 *    (after its error reply is flushed) or shutdown. Killing one only marks
 *    it and moves it to s->dead; srv_settle() frees dead connections at the end
 *    of every entry point, so pointers held during a request stay valid.
 *  - A session belongs to its hello connection and ends with it.
 *  - A listener belongs to its listen connection; it also ends with its
 *    session. Its id is remembered for a while afterwards (tombstones) so a
 *    late connect learns whether the listener closed or its process died.
 *  - A channel lives while either end is open. When both ends are closed or
 *    dead it is unmapped, and its record (final counters) is kept in the
 *    list, state "closed", until SRV_CLOSED_KEEP newer ones push it out.
 *  - An output item that hands out a channel end (connect reply, incoming
 *    event) and is never fully written marks that end dead when its
 *    connection goes: nobody will ever attach it.
 */
#include "sim/srv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sim/core/ctl.h"
#include "sim/fabmon.h"
#include "sim/faultd.h"
#include "sim/log.h"
#include "sim/scn/place.h"
#include "sim/scn/scenario.h"
#include "sim/srv_int.h"

#define SRV_READ_BATCH 64   /* messages per readable callback before yielding */
#define SRV_ACCEPT_BATCH 64 /* connections per accept callback */

static int op_ping(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		   struct ctl_msg *rep, char *err)
{
	(void)c, (void)req, (void)err;
	ctl_addf(rep, "pid", "%d", (int)getpid());
	ctl_add(rep, "instance", s->instance);
	ctl_add(rep, "scenario", fabric_scenario(s->fabric) ? fabric_scenario(s->fabric) : "");
	return 0;
}

static int op_stop(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		   struct ctl_msg *rep, char *err)
{
	(void)req, (void)rep, (void)err;
	log_info("stop requested by pid %d (conn#%llu)", (int)c->pid, (unsigned long long)c->id);
	s->stopping = true;
	return 0;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})
static const struct op_def {
	const char *name;
	op_fn fn;
	const char *const *required;
	const char *const *optional;
	bool looks; /* only reads: logged here, at debug (the others log what they do) */
} op_table[] = {
	{"hello", srv_op_hello, KEYS("node", "pid", "version", "client"), KEYS("gpu"), false},
	{"listen", srv_op_listen, KEYS("listener", "nic"), KEYS("session"), false},
	{"connect", srv_op_connect, KEYS("listener", "nic"), KEYS("session"), false},
	{"close", srv_op_close, KEYS("chan", "side"), KEYS("session"), false},
	{"show", srv_op_show, KEYS(NULL), KEYS("skip"), true},
	{"fabric", srv_op_fabric, KEYS(NULL), KEYS("skip"), true},
	{"stats", srv_op_stats, KEYS(NULL), KEYS("skip"), true},
	{"series", srv_op_series, KEYS(NULL), KEYS("skip"), true},
	{"fault", srv_op_fault, KEYS("verb"),
	 KEYS("spec", "id", "at_ns", "skip", "origin_ns", "name", "effective_ns", "first_id"),
	 false},
	{"xroute", srv_op_xroute, KEYS("from_node", "from_nic", "to_node", "to_nic"),
	 KEYS("connect"), false},
	{"clock", srv_op_clock, KEYS("offset_ns", "rtt_ns"), KEYS(NULL), false},
	{"ping", op_ping, KEYS(NULL), KEYS(NULL), true},
	{"stop", op_stop, KEYS(NULL), KEYS(NULL), false},
};
#undef KEYS

static bool in_list(const char *const *list, const char *key)
{
	for (; *list; list++)
		if (strcmp(*list, key) == 0)
			return true;
	return false;
}

/* Check the request's shape against its op's keys. 0 or -errno with err. */
static int check_request(const struct ctl_msg *req, const struct op_def **out, char *err)
{
	char q[72];
	if (strcmp(req->kv[0].key, "op") != 0) {
		snprintf(err, SRV_ERR_LEN, "line 1 is '%s=...'; a request starts with op=<verb>",
			 req->kv[0].key);
		return -EINVAL;
	}
	const char *op = req->kv[0].value;
	const struct op_def *d = NULL;
	char known[256];
	size_t kl = 0;
	for (size_t i = 0; i < sizeof(op_table) / sizeof(op_table[0]); i++) {
		if (strcmp(op_table[i].name, op) == 0)
			d = &op_table[i];
		if (kl < sizeof(known))
			kl += (size_t)snprintf(known + kl, sizeof(known) - kl, "%s%s",
					       i ? ", " : "", op_table[i].name);
	}
	if (!d) {
		snprintf(err, SRV_ERR_LEN, "unknown op '%s' (known: %s)", clip(op, q), known);
		return -EOPNOTSUPP;
	}
	for (int i = 1; i < req->n; i++) {
		const char *k = req->kv[i].key;
		if (!in_list(d->required, k) && !in_list(d->optional, k)) {
			snprintf(err, SRV_ERR_LEN, "op=%s: unknown key '%s' (line %d)", d->name, k,
				 i + 1);
			return -EINVAL;
		}
		for (int j = 0; j < i; j++) {
			if (strcmp(req->kv[j].key, k) == 0) {
				snprintf(err, SRV_ERR_LEN,
					 "op=%s: key '%s' appears twice (lines %d and %d)", d->name,
					 k, j + 1, i + 1);
				return -EINVAL;
			}
		}
	}
	for (const char *const *k = d->required; *k; k++) {
		if (!ctl_get(req, *k)) {
			snprintf(err, SRV_ERR_LEN, "op=%s: missing key '%s'", d->name, *k);
			return -EINVAL;
		}
	}
	*out = d;
	return 0;
}

static void handle(struct srv *s, struct srv_conn *c, const struct ctl_msg *req)
{
	char err[SRV_ERR_LEN];
	const struct op_def *d = NULL;
	struct ctl_msg *rep = s->out;
	err[0] = 0;
	msg_reset(rep);
	int rc = check_request(req, &d, err);
	if (!rc)
		rc = d->fn(s, c, req, rep, err);
	if (rc == SRV_DONE)
		return;
	if (rc < 0) {
		if (!err[0])
			snprintf(err, SRV_ERR_LEN, "%s", strerror(-rc));
		char q[72];
		const char *op = d			    ? d->name
			: strcmp(req->kv[0].key, "op") == 0 ? clip(req->kv[0].value, q)
							    : "(none)";
		log_info("conn#%llu (pid %d): op=%s refused: %s: %s", (unsigned long long)c->id,
			 (int)c->pid, op, errname(-rc), err);
		srv_reply_error(c, -rc, err);
		return;
	}
	if (d->looks)
		log_debug("conn#%llu (pid %d): op=%s", (unsigned long long)c->id, (int)c->pid,
			  d->name);
	if (ctl_add(rep, "errno", "0") != 0) {
		/* Cannot happen: every reply leaves room for its errno line. */
		srv_reply_error(c, EOVERFLOW, "reply too long");
		return;
	}
	srv_conn_queue(c, rep, -1, 0, 0);
}

/* ---- entry points -------------------------------------------------------- */

void srv_config_init(struct srv_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	fabric_config_init(&cfg->fabric);
	if (chan_geom_for((uint64_t)CHAN_DEFAULT_NSLOTS * CHAN_DEFAULT_SLOT_BYTES,
			  CHAN_DEFAULT_SLOT_BYTES, &cfg->geom) != 0)
		cfg->geom = (struct chan_geom){CHAN_DEFAULT_SLOT_BYTES, CHAN_DEFAULT_NSLOTS};
	cfg->connect_wait_ms = SRV_CONNECT_WAIT_MS;
	cfg->max_conns = SRV_MAX_CONNS;
	cfg->partial_ms = SRV_PARTIAL_MS;
	cfg->outq_max = SRV_OUTQ_MAX;
	cfg->sample_ms = SERIES_DEFAULT_PERIOD_MS;
	cfg->series_samples = SERIES_DEFAULT_SAMPLES;
}

/*
 * Over several hosts a trigger is counted where the messages it counts are reserved: a link's
 * by its owner, a sending node's by that node's host. One that counts every node's messages
 * would be counted by each host for its own nodes and fire at different times: refused.
 */
static int hosts_trigger_check(const struct scenario *sc, char *err, size_t errlen)
{
	for (int i = 0; sc->faults && i < sc->faults->n; i++) {
		const struct fault_spec *f = &sc->faults->f[i];
		if (f->trigger == FAULT_T_TIME || f->trig_link >= 0 || f->trig_src != FAULT_ANY)
			continue;
		snprintf(err, errlen,
			 "%s:%d: fault '%s': its trigger counts every node's messages, which a run "
			 "over several hosts counts on each host apart (docs/scale-out.md, section "
			 "5): give its after: a link (link: NODE) or a sending node (conn: {from: "
			 "NODE, to: NODE})",
			 fabric_scenario(sc->fabric) ? fabric_scenario(sc->fabric) : "the scenario",
			 f->line, f->name);
		return -EINVAL;
	}
	return 0;
}

/* The ideal fabric with cfg's settings, as a scenario of it alone. */
static int ideal_scenario(const struct fabric_config *cfg, struct scenario **out, char *err,
			  size_t errlen)
{
	struct fabric *f;
	int rc = fabric_new_ideal(cfg, &f, err, errlen);
	if (!rc && (rc = scenario_new(f, out)) != 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

int srv_new(const struct srv_config *cfg, const struct srv_ops *ops, struct srv **out, char *err,
	    size_t errlen)
{
	*out = NULL;
	size_t shm = chan_shm_bytes(&cfg->geom);
	if (shm == 0) {
		scenario_free(cfg->use_scenario);
		snprintf(err, errlen, "bad channel geometry: %u slots of %u bytes",
			 cfg->geom.nslots, cfg->geom.slot_bytes);
		return -EINVAL;
	}
	struct srv *s = calloc(1, sizeof(*s));
	if (!s) {
		scenario_free(cfg->use_scenario);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->cfg = *cfg;
	s->ops = *ops;
	s->shm_bytes = shm;
	s->conn_mem = (uint64_t)cfg->geom.nslots * cfg->geom.slot_bytes;
	dl_init(&s->conns);
	dl_init(&s->dead);
	dl_init(&s->dirty);
	dl_init(&s->sessions);
	dl_init(&s->listeners);
	dl_init(&s->pending);
	dl_init(&s->partial);
	dl_init(&s->chans);
	s->next_chan = 1;
	uint64_t tok = 0;
	if (getrandom(&tok, sizeof(tok), GRND_NONBLOCK) != (ssize_t)sizeof(tok))
		tok = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(s->instance, sizeof(s->instance), "%016llx", (unsigned long long)tok);
	s->out = ctl_msg_new();
	int rc = !s->out	    ? -ENOMEM
		: cfg->use_scenario ? (s->scn = cfg->use_scenario, 0)
				    : ideal_scenario(&cfg->fabric, &s->scn, err, errlen);
	s->cfg.use_scenario = NULL;
	if (!rc)
		s->fabric = s->scn->fabric;
	if (!rc && !fabric_is_ideal(s->fabric)) {
		const struct faultd_ops fops = {.signal = srv_signal_node,
						.hold = srv_hold_conns,
						.reset = srv_reset_conns,
						.ctx = s};
		rc = fabmon_new(s->fabric, s->scn->faults, cfg->sample_ms, cfg->series_samples,
				&fops, cfg->epoch_ns ? cfg->epoch_ns : now_ns(), &s->mon, err,
				errlen);
		if (!rc && cfg->hosts) /* kept for op=xroute, and shown by op=fabric's "hosts" */
			rc = place_compute(s->fabric, s->scn->placement, cfg->hosts, &s->place, err,
					   errlen);
		if (!rc && cfg->hosts)
			rc = scenario_place(s->scn, cfg->hosts, err, errlen);
		if (!rc && cfg->hosts > 1)
			rc = hosts_trigger_check(s->scn, err, errlen);
		if (!rc && cfg->hosts > 1)
			fabmon_set_host(s->mon, cfg->host_rank, now_ns());
		if (!rc && cfg->hosts > FST_MAX_HOSTS)
			log_warn("--hosts %d: the late deliveries per pair of hosts count hosts 0 "
				 "to %d "
				 "only (the others' are counted on their links)",
				 cfg->hosts, FST_MAX_HOSTS - 1);
		if (rc) {
			fabmon_free(s->mon);
			s->mon = NULL;
			placement_free(s->place);
			s->place = NULL;
		}
		if (rc) {
			scenario_free(s->scn);
			s->scn = NULL;
			s->fabric = NULL;
		}
	}
	if (rc) {
		if (!s->out)
			scenario_free(cfg->use_scenario);
		if (rc == -ENOMEM && !s->out)
			snprintf(err, errlen, "out of memory");
		ctl_msg_free(s->out);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void srv_free(struct srv *s)
{
	if (!s)
		return;
	struct dl *p, *t;
	faultd_release(fabmon_faults(s->mon)); /* no process stays stopped, no channel held */
	for (int i = 0; i < FAULT_MAX; i++)
		free(s->live_spec[i]);
	/* Tell waiting connects why, as far as their sockets take it now. */
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *pc = dl_entry(p, struct srv_conn, pend_link);
		srv_pending_remove(pc);
		srv_reply_error(pc, ESHUTDOWN, "the daemon is shutting down");
	}
	srv_settle(s);
	log_info("shutting down: %d session(s), %d listener(s), %d open channel(s)", s->nsessions,
		 s->nlisteners, s->nchans_open);
	dl_each_safe(p, t, &s->chans)
	{
		struct channel *ch = dl_entry(p, struct channel, link);
		srv_chan_unmap(ch, 'd');
		free(ch);
	}
	dl_each_safe(p, t, &s->listeners)
	{
		free(dl_entry(p, struct listener, link));
	}
	dl_each_safe(p, t, &s->sessions)
	{
		free(dl_entry(p, struct session, link));
	}
	dl_each_safe(p, t, &s->conns)
	{
		srv_conn_free(s, dl_entry(p, struct srv_conn, link), false);
	}
	fabmon_free(s->mon); /* before the fabric: its fault daemon names the fabric's links */
	placement_free(s->place);
	free(s->warned_links);
	scenario_free(s->scn);
	ctl_msg_free(s->out);
	free(s);
}

/* Refuse a peer of another user: one best-effort error reply, then close. */
static void refuse_peer(int fd, uid_t uid)
{
	char buf[160];
	int n = snprintf(buf, sizeof(buf),
			 "error=peer uid %u is not this daemon's uid %u\nerrno=%d\n\n",
			 (unsigned)uid, (unsigned)geteuid(), EPERM);
	if (n > 0 && send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("refusing uid %u: %s", (unsigned)uid, strerror(errno));
	srv_close_gently(fd);
}

/* Over --max-conns: say so to the peer, and in the log (the first, then powers of 2). */
static void refuse_full(struct srv *s, int fd, pid_t pid)
{
	char buf[200];
	uint64_t n = ++s->refused;
	int len = snprintf(buf, sizeof(buf),
			   "error=the daemon serves %d connections, its limit (--max-conns)\n"
			   "errno=%d\n\n",
			   s->nconns, EMFILE);
	if (len > 0 && send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("refusing pid %d: %s", (int)pid, strerror(errno));
	srv_close_gently(fd);
	if ((n & (n - 1)) == 0)
		log_warn("refused a connection from pid %d: %d connections open, the limit "
			 "(--max-conns); %llu refused so far",
			 (int)pid, s->nconns, (unsigned long long)n);
}

int srv_accept(struct srv *s, int lfd)
{
	int rc = 0;
	for (int i = 0; i < SRV_ACCEPT_BATCH; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			rc = -errno;
			log_warn("accept: %s", strerror(errno));
			break;
		}
		struct ucred cr;
		socklen_t crlen = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
			log_warn("SO_PEERCRED: %s; dropping the connection", strerror(errno));
			close(fd);
			continue;
		}
		if (cr.uid != geteuid()) {
			log_warn("refusing a connection from pid %d uid %u (not our uid %u)",
				 (int)cr.pid, (unsigned)cr.uid, (unsigned)geteuid());
			refuse_peer(fd, cr.uid);
			continue;
		}
		if (s->nconns >= s->cfg.max_conns) {
			refuse_full(s, fd, cr.pid);
			continue;
		}
		struct srv_conn *c = calloc(1, sizeof(*c));
		struct ctl_parser *parser = c ? ctl_parser_new() : NULL;
		if (!parser) {
			log_warn("out of memory accepting pid %d", (int)cr.pid);
			free(c);
			close(fd);
			rc = -ENOMEM;
			break;
		}
		c->srv = s;
		c->id = ++s->next_conn;
		c->fd = fd;
		c->pid = cr.pid;
		c->uid = cr.uid;
		c->parser = parser;
		c->out_tail = &c->out_head;
		c->rd_on = true;
		dl_init(&c->dirty);
		dl_init(&c->pend_link);
		dl_init(&c->part_link);
		c->io = s->ops.attach(s->ops.ctx, c, fd);
		if (!c->io) {
			log_warn("cannot srv_watch the connection of pid %d; dropping it",
				 (int)cr.pid);
			ctl_parser_free(parser);
			free(c);
			close(fd);
			continue;
		}
		dl_push(&s->conns, &c->link);
		s->nconns++;
		log_debug("conn#%llu: pid %d connected (%d connection(s))",
			  (unsigned long long)c->id, (int)c->pid, s->nconns);
	}
	srv_settle(s);
	return rc;
}

void srv_conn_readable(struct srv_conn *c)
{
	struct srv *s = c->srv;
	int i;
	for (i = 0; i < SRV_READ_BATCH && !c->dead && !c->draining; i++) {
		struct ctl_msg *m;
		int rc = ctl_recv(c->fd, c->parser, &m, 0);
		if (rc == 0) {
			dl_del(&c->part_link); /* complete: the next one has its own clock */
			handle(s, c, m);
			ctl_msg_free(m);
			continue;
		}
		if (rc == -EAGAIN)
			break;
		if (rc == -ECONNRESET) {
			if (c->out_head) /* a half-close (socat, nc -N): it still reads our replies */
				srv_conn_drain(c,
					       "the peer closed its side; sending what it is owed");
			else
				srv_conn_kill(c, "the peer closed the connection");
		} else if (rc == -EINVAL) {
			char why[CTL_ERR_LEN + 32];
			snprintf(why, sizeof(why), "framing error: %s",
				 ctl_parser_error(c->parser));
			log_warn("conn#%llu (pid %d): %s; replying and disconnecting",
				 (unsigned long long)c->id, (int)c->pid, why);
			srv_reply_error(c, EINVAL, ctl_parser_error(c->parser));
			srv_conn_drain(c, why);
		} else {
			char why[96];
			snprintf(why, sizeof(why), "read: %s", strerror(-rc));
			srv_conn_kill(c, why);
		}
		break;
	}
	if (!c->dead && !c->draining && !ctl_parser_partial(c->parser)) {
		dl_del(&c->part_link);
	} else if (!c->dead && !c->draining && dl_empty(&c->part_link)) {
		c->part_since = now_ns(); /* a message begun: it has cfg.partial_ms to end */
		dl_push(&s->partial, &c->part_link);
	}
	if (i == SRV_READ_BATCH && !c->dead && !c->draining)
		s->ops.again(s->ops.ctx, c->io); /* more may be buffered: come back after others */
	if (c->draining)
		srv_watch(c, false, c->wr_on);
	srv_settle(s);
}

void srv_conn_writable(struct srv_conn *c)
{
	srv_mark_dirty(c);
	srv_settle(c->srv);
}

int64_t srv_timeout_us(const struct srv *s)
{
	int64_t first = INT64_MAX;
	const struct dl *p;
	if (!dl_empty(&s->partial)) /* the oldest message in progress */
		first = dl_entry(s->partial.next, const struct srv_conn, part_link)->part_since +
			(int64_t)s->cfg.partial_ms * 1000000;
	for (p = s->pending.next; p != &s->pending; p = p->next) {
		const struct srv_conn *c = dl_entry(p, const struct srv_conn, pend_link);
		if (c->pend_deadline < first)
			first = c->pend_deadline;
	}
	int64_t fn = fabmon_next_ns(s->mon, now_ns());
	if (fn < first)
		first = fn;
	if (first == INT64_MAX)
		return -1;
	int64_t us = (first - now_ns() + 999) / 1000;
	return us < 1 ? 1 : us;
}

void srv_tick(struct srv *s)
{
	int64_t now = now_ns();
	fabmon_tick(s->mon, now, s->nchans_open);
	struct dl *p, *t;
	while (!dl_empty(&s->partial)) {
		struct srv_conn *c = dl_entry(s->partial.next, struct srv_conn, part_link);
		if (c->part_since + (int64_t)s->cfg.partial_ms * 1000000 > now)
			break;
		char err[SRV_ERR_LEN];
		snprintf(err, sizeof(err),
			 "the message was not complete %d ms after its first byte (a message is "
			 "keys and values ending in an empty line)",
			 s->cfg.partial_ms);
		log_warn("conn#%llu (pid %d): %s; closing it", (unsigned long long)c->id,
			 (int)c->pid, err);
		dl_del(&c->part_link);
		srv_reply_error(c, ETIMEDOUT, err);
		srv_conn_drain(c, "a message not complete in time");
	}
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *c = dl_entry(p, struct srv_conn, pend_link);
		if (c->pend_deadline > now)
			continue;
		if (c->pend_held) { /* a connect_delay is over: go on, if the listener still is */
			srv_pending_remove(c);
			c->pend_held = false;
			c->faults_done = true;
			struct listener *l = srv_listener_find(s, c->pend_listener);
			if (l && c->pend_sess) {
				srv_do_connect(s, c, c->pend_sess, l, c->pend_nic);
			} else {
				char err[SRV_ERR_LEN];
				snprintf(err, sizeof(err),
					 "listener 0x%llx was closed while a connect_delay fault "
					 "held "
					 "this connect",
					 (unsigned long long)c->pend_listener);
				srv_reply_error(c, ECONNREFUSED, err);
			}
			continue;
		}
		char err[SRV_ERR_LEN];
		snprintf(err, sizeof(err), "listener 0x%llx is not known (waited %d ms)",
			 (unsigned long long)c->pend_listener, s->cfg.connect_wait_ms);
		log_info("conn#%llu (pid %d): op=connect refused: ECONNREFUSED: %s",
			 (unsigned long long)c->id, (int)c->pid, err);
		srv_pending_remove(c);
		srv_reply_error(c, ECONNREFUSED, err);
	}
	srv_settle(s);
}

int srv_stopping(const struct srv *s)
{
	return s->stopping;
}

const char *srv_fabric_kind(const struct srv *s)
{
	return fabric_kind(s->fabric);
}

uint64_t srv_conn_mem(const struct srv *s)
{
	return s->conn_mem;
}

size_t srv_shm_bytes(const struct srv *s)
{
	return s->shm_bytes;
}

const char *srv_instance(const struct srv *s)
{
	return s->instance;
}
