/* SPDX-License-Identifier: MIT */
/*
 * srv.c - simfabricd's server: the state behind the control protocol.
 * See srv.h for how it meets its event loop, docs/control-protocol.md for
 * what the requests mean.
 *
 * The hub of the daemon: connections, sessions, listeners, channels, connect
 * and its faults, op=fault, the op table. Its leaves call nothing here:
 * srv_look.c (the ops that only look), fabmon.c (a modelled fabric's shared
 * state, fault daemon, sampler and fidelity monitor), sock.c (the socket
 * file); srv_int.h holds the objects srv.c and srv_look.c share.
 *
 * Object lifetimes, in one place:
 *  - A connection (srv_conn) lives until EOF, a write error, a protocol error
 *    (after its error reply is flushed) or shutdown. Killing one only marks
 *    it and moves it to s->dead; settle() frees dead connections at the end
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
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/random.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/ctl.h"
#include "sim/core/fstate.h"
#include "sim/fabmon.h"
#include "sim/faultd.h"
#include "sim/log.h"
#include "sim/scn/scenario.h"
#include "sim/srv_int.h"

#define SRV_READ_BATCH 64    /* messages per readable callback before yielding */
#define SRV_TRIM_CONNS 32    /* connections freed between two malloc_trim()s */
#define SRV_ACCEPT_BATCH 64  /* connections per accept callback */
#define SRV_CLOSED_KEEP 256  /* freed channels still listed by show */

/* ---- small helpers ------------------------------------------------------- */

static const char *end_name(int side)
{
	return side == END_TX ? "send" : "recv";
}

/* ---- output -------------------------------------------------------------- */

static void mark_dirty(struct srv_conn *c)
{
	if (!c->dead && c->dirty.next == &c->dirty)
		dl_push(&c->srv->dirty, &c->dirty);
}

static void watch(struct srv_conn *c, bool rd, bool wr)
{
	if (c->rd_on == rd && c->wr_on == wr)
		return;
	c->rd_on = rd;
	c->wr_on = wr;
	if (c->io)
		c->srv->ops.watch(c->srv->ops.ctx, c->io, rd, wr);
}

static struct channel *chan_find(struct srv *s, uint64_t id);
static void chan_end_gone(struct srv *s, struct channel *ch, int side, const char *why);

/*
 * Queue msg for c, with fd (owned from here on, or -1) on its first byte.
 * chan/side: the channel end this message hands out (0 if none). Never kills
 * c and never writes: settle() does both, once the current request is done.
 */
static void conn_queue(struct srv_conn *c, const struct ctl_msg *msg, int fd, uint64_t chan,
		       int side)
{
	struct srv *s = c->srv;
	ssize_t n = ctl_msg_format(msg, s->wire, sizeof(s->wire));
	struct out_item *it = n < 0 ? NULL : malloc(sizeof(*it) + (size_t)n);
	if (!it) {
		log_error("conn#%llu: cannot queue a %zd-byte reply: %s", (unsigned long long)c->id,
			  n, n < 0 ? "message too long" : "out of memory");
		if (fd >= 0)
			close(fd);
		struct channel *ch = chan ? chan_find(s, chan) : NULL;
		if (ch)
			chan_end_gone(s, ch, side, "its reply could not be queued");
		if (!c->kill_why)
			c->kill_why = "out of memory queueing a reply";
		mark_dirty(c);
		return;
	}
	it->next = NULL;
	it->fd = fd;
	it->chan = chan;
	it->side = side;
	it->len = (size_t)n;
	it->off = 0;
	memcpy(it->data, s->wire, (size_t)n);
	*c->out_tail = it;
	c->out_tail = &it->next;
	c->out_bytes += (size_t)n;
	mark_dirty(c);
}

static void reply_error(struct srv_conn *c, int e, const char *text)
{
	struct ctl_msg *m = c->srv->out;
	char clean[CTL_VALUE_MAX + 1];
	size_t i = 0;
	/* Error texts quote client values; keep them valid protocol values whatever happens. */
	for (; text[i] && i < CTL_VALUE_MAX; i++)
		clean[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
	clean[i] = 0;
	msg_reset(m);
	ctl_add(m, "error", clean);
	ctl_addf(m, "errno", "%d", e);
	conn_queue(c, m, -1, 0, 0);
}

static void conn_kill(struct srv_conn *c, const char *why);

static void item_free(struct srv *s, struct out_item *it, bool abandoned)
{
	if (abandoned && it->chan) {
		struct channel *ch = chan_find(s, it->chan);
		if (ch)
			chan_end_gone(s, ch, it->side, "its connection closed before delivery");
	}
	if (it->fd >= 0)
		close(it->fd);
	free(it);
}

/* Write what the socket takes now. May kill c. */
static void conn_flush(struct srv_conn *c)
{
	struct srv *s = c->srv;
	if (c->kill_why) {
		conn_kill(c, c->kill_why);
		return;
	}
	while (c->out_head) {
		struct out_item *it = c->out_head;
		ssize_t w = ctl_sendmsg_fd(c->fd, it->data + it->off, it->len - it->off, it->fd);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			char why[96];
			snprintf(why, sizeof(why), "write: %s",
				 w < 0 ? strerror(errno) : "no progress");
			conn_kill(c, why);
			return;
		}
		if (it->fd >= 0) {
			/* The kernel holds its own reference now; ours is no longer needed. */
			close(it->fd);
			it->fd = -1;
		}
		it->off += (size_t)w;
		c->out_bytes -= (size_t)w;
		if (it->off == it->len) {
			c->out_head = it->next;
			if (!c->out_head)
				c->out_tail = &c->out_head;
			item_free(s, it, false);
		}
	}
	if (c->out_bytes > s->cfg.outq_max) {
		char why[128];
		snprintf(why, sizeof(why),
			 "%zu bytes of replies queued (limit %zu): the client does not read them",
			 c->out_bytes, s->cfg.outq_max);
		log_warn("conn#%llu (pid %d): %s; disconnecting", (unsigned long long)c->id,
			 (int)c->pid, why);
		conn_kill(c, why);
		return;
	}
	if (!c->out_head && c->draining) {
		conn_kill(c, c->why[0] ? c->why : "done");
		return;
	}
	watch(c, !c->draining, c->out_head != NULL);
}

/* ---- channels ------------------------------------------------------------ */

static struct channel *chan_find(struct srv *s, uint64_t id)
{
	/* Linear: one lookup per op=close; channels number in the hundreds. */
	struct dl *p, *t;
	dl_each_safe(p, t, &s->chans)
	{
		struct channel *ch = dl_entry(p, struct channel, link);
		if (ch->id == id)
			return ch;
	}
	return NULL;
}

static void chan_unmap(struct channel *ch, char mark)
{
	if (!ch->shm)
		return;
	if (mark)
		chan_mark_dead(ch->shm, mark);
	chan_stats(ch->shm, &ch->last);
	munmap(ch->shm, ch->len);
	ch->shm = NULL;
}

/* Unmap the channel once neither end is open; its record stays (for show) until chan_trim. */
static void chan_maybe_free(struct srv *s, struct channel *ch)
{
	if (!ch->shm || ch->end[END_TX].st == END_OPEN || ch->end[END_RX].st == END_OPEN)
		return;
	chan_unmap(ch, 0);
	s->nchans_open--;
	s->nchans_closed++;
	log_info("chan 0x%llx freed: %llu msg(s), %llu byte(s) delivered",
		 (unsigned long long)ch->id, (unsigned long long)ch->last.rx_msgs,
		 (unsigned long long)ch->last.rx_bytes);
}

/* Forget the oldest freed records beyond the limit. Only from settle(): nobody holds one. */
static void chan_trim(struct srv *s)
{
	struct dl *p, *t;
	dl_each_safe(p, t, &s->chans)
	{
		if (s->nchans_closed <= SRV_CLOSED_KEEP)
			break;
		struct channel *old = dl_entry(p, struct channel, link);
		if (old->shm)
			continue;
		dl_del(&old->link);
		free(old);
		s->nchans_closed--;
		s->nodes_gc = true;
	}
}

/*
 * The ideal fabric forgets the nodes nothing holds: no session, no channel record (open or
 * kept for show). Node pointers live only there; the next node in a slot gets a new id.
 * Only from settle(), after something let a node go.
 */
static void node_gc(struct srv *s)
{
	static bool held[FABRIC_MAX_NODES];
	int slots = fabric_node_slots(s->fabric);
	struct dl *p;
	s->nodes_gc = false;
	if (!fabric_is_ideal(s->fabric) || fabric_nnodes(s->fabric) == s->nsessions)
		return;
	memset(held, 0, sizeof(held));
	for (p = s->sessions.next; p != &s->sessions; p = p->next)
		held[dl_entry(p, struct session, link)->node->id % FABRIC_MAX_NODES] = true;
	for (p = s->chans.next; p != &s->chans; p = p->next) {
		const struct channel *ch = dl_entry(p, struct channel, link);
		held[ch->end[END_TX].node->id % FABRIC_MAX_NODES] = true;
		held[ch->end[END_RX].node->id % FABRIC_MAX_NODES] = true;
	}
	for (int i = 0; i < slots; i++) {
		const struct fabric_node *n = fabric_node_at(s->fabric, i);
		if (n && !held[i]) {
			log_info("node %s (id %d) forgotten: no session or channel holds it", n->name,
				 n->id);
			fabric_node_forget(s->fabric, n->id);
		}
	}
}

/* An end's process is gone (or the end can never be attached): tell the peer in shm. */
static void chan_end_gone(struct srv *s, struct channel *ch, int side, const char *why)
{
	struct chan_end *e = &ch->end[side];
	if (!ch->shm || e->st != END_OPEN)
		return;
	chan_mark_dead(ch->shm, side == END_TX ? 't' : 'r');
	e->st = END_DEAD;
	log_info("chan 0x%llx: %s end (pid %d) dead: %s", (unsigned long long)ch->id,
		 end_name(side), (int)e->pid, why);
	chan_maybe_free(s, ch);
}

/* Make a channel's shared memory. Returns the memfd (the channel keeps only the mapping). */
static int chan_create(struct srv *s, struct channel **out, char *err, size_t errlen)
{
	const char *step = "memfd_create";
	size_t len = s->shm_bytes;
	void *base = MAP_FAILED;
	struct channel *ch = NULL;
	int fd = memfd_create("simfabric-chan", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		goto fail;
	step = "fchmod 0600";
	if (fchmod(fd, 0600) < 0)
		goto fail;
	step = "ftruncate";
	if (ftruncate(fd, (off_t)len) < 0)
		goto fail;
	/* Sealed, so no client can shrink the region under the other's mapping (SIGBUS). */
	step = "sealing";
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	step = "mmap";
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		goto fail;
	step = "allocating the channel";
	errno = ENOMEM;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		goto fail;
	ch->id = s->next_chan++;
	step = "chan_format";
	int rc = chan_format(base, len, &s->cfg.geom, ch->id);
	if (rc) {
		errno = -rc;
		goto fail;
	}
	ch->shm = base;
	ch->len = len;
	dl_push(&s->chans, &ch->link);
	s->nchans_open++;
	fabmon_chan_opened(s->mon, now_ns());
	*out = ch;
	return fd;
fail:;
	int e = errno ? errno : EIO;
	snprintf(err, errlen, "cannot create the channel's shared memory (%zu bytes): %s: %s", len,
		 step, strerror(e));
	free(ch);
	if (base != MAP_FAILED)
		munmap(base, len);
	if (fd >= 0)
		close(fd);
	return -e;
}

/* ---- sessions, listeners, pending connects ------------------------------- */

/* The session of a visible pid (pid > 0), or of a token (not 0): a session whose pid this
 * daemon cannot see (0) is found by its token only. */
static struct session *session_find(struct srv *s, pid_t pid, uint64_t token)
{
	struct dl *p, *t;
	dl_each_safe(p, t, &s->sessions)
	{
		struct session *se = dl_entry(p, struct session, link);
		if ((pid > 0 && se->pid == pid) || (token && se->token == token))
			return se;
	}
	return NULL;
}

static bool session_alive(struct srv *s, uint64_t serial)
{
	struct dl *p, *t;
	dl_each_safe(p, t, &s->sessions)
	{
		if (dl_entry(p, struct session, link)->serial == serial)
			return true;
	}
	return false;
}

static struct listener *listener_find(struct srv *s, uint64_t id)
{
	struct dl *p, *t;
	dl_each_safe(p, t, &s->listeners)
	{
		struct listener *l = dl_entry(p, struct listener, link);
		if (l->id == id)
			return l;
	}
	return NULL;
}

static struct tomb *tomb_find(struct srv *s, uint64_t id)
{
	for (int i = 0; i < SRV_TOMBS; i++)
		if (s->tombs[i].used && s->tombs[i].id == id)
			return &s->tombs[i];
	return NULL;
}

static void pending_remove(struct srv_conn *c)
{
	if (!c->pending)
		return;
	dl_del(&c->pend_link);
	c->pending = false;
	c->srv->npending--;
}

/* Drop a listener. Its connection goes too, unless keep_conn (it is draining an error). */
static void listener_drop(struct srv *s, struct listener *l, const char *why, bool keep_conn)
{
	struct tomb *tb = &s->tombs[s->tomb_pos];
	s->tomb_pos = (s->tomb_pos + 1) % SRV_TOMBS;
	*tb = (struct tomb){.id = l->id, .sess_serial = l->sess->serial, .pid = l->sess->pid,
			    .used = true};
	dl_del(&l->link);
	s->nlisteners--;
	struct srv_conn *c = l->conn;
	c->lis = NULL;
	c->role = R_NONE;
	log_info("listener 0x%llx (pid %d, %s/%d) dropped: %s; it accepted %llu connection(s)",
		 (unsigned long long)l->id, (int)l->sess->pid, l->sess->node->name, l->nic, why,
		 (unsigned long long)l->accepted);
	free(l);
	if (!keep_conn)
		conn_kill(c, why);
}

static void session_end(struct srv *s, struct session *se, const char *why)
{
	int ends = 0, nl = 0, np = 0;
	char buf[128];
	struct dl *p, *t;
	dl_del(&se->link);
	s->nsessions--;
	s->nodes_gc = true;
	se->conn->sess = NULL;
	se->conn->role = R_NONE;
	log_info("session pid %d (node %s, %s) ended: %s", (int)se->pid, se->node->name, se->client,
		 why);
	snprintf(buf, sizeof(buf), "the session of pid %d ended", (int)se->pid);
	dl_each_safe(p, t, &s->chans)
	{
		struct channel *ch = dl_entry(p, struct channel, link);
		for (int side = 0; side < 2; side++) {
			if (ch->end[side].sess != se)
				continue;
			ch->end[side].sess = NULL;
			if (ch->shm && ch->end[side].st == END_OPEN) {
				ends++;
				chan_end_gone(s, ch, side, buf); /* unmaps, never frees, ch */
			}
		}
	}
	dl_each_safe(p, t, &s->listeners)
	{
		struct listener *l = dl_entry(p, struct listener, link);
		if (l->sess == se) {
			nl++;
			listener_drop(s, l, buf, false);
		}
	}
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *pc = dl_entry(p, struct srv_conn, pend_link);
		if (pc->pend_sess == se) {
			np++;
			pending_remove(pc);
			reply_error(pc, ECONNABORTED, buf);
		}
	}
	log_info("session pid %d: %d channel end(s) marked dead, %d listener(s) dropped, %d "
		 "pending connect(s) refused",
		 (int)se->pid, ends, nl, np);
	free(se);
}

/* Undo what a connection stands for (session, listener, waiting connect). Idempotent. */
static void conn_retire(struct srv_conn *c, const char *why, bool keep_conn)
{
	struct srv *s = c->srv;
	if (c->role == R_SESSION && c->sess)
		session_end(s, c->sess, why);
	else if (c->role == R_LISTENER && c->lis)
		listener_drop(s, c->lis, why, keep_conn);
	pending_remove(c);
	c->role = R_NONE;
}

static void conn_kill(struct srv_conn *c, const char *why)
{
	struct srv *s = c->srv;
	if (c->dead)
		return;
	c->dead = true;
	if (why != c->why)
		snprintf(c->why, sizeof(c->why), "%s", why);
	log_debug("conn#%llu (pid %d) closed: %s", (unsigned long long)c->id, (int)c->pid, c->why);
	conn_retire(c, c->why, false);
	dl_del(&c->part_link);
	dl_del(&c->link);
	dl_push(&s->dead, &c->link);
	s->nconns--;
	if (c->dirty.next != &c->dirty)
		dl_del(&c->dirty);
}

/* Stop reading from c, write what is queued (an error reply), then close it. */
static void conn_drain(struct srv_conn *c, const char *why)
{
	if (c->dead || c->draining)
		return;
	snprintf(c->why, sizeof(c->why), "%s", why);
	c->draining = true;
	dl_del(&c->part_link);
	conn_retire(c, c->why, true);
	mark_dirty(c);
}

/*
 * Close a socket we are done with. Unread input at close() makes the peer's
 * next read fail with ECONNRESET instead of a clean EOF after our last reply,
 * so read what is already there first (bounded: this never waits).
 */
static void close_gently(int fd)
{
	char sink[4096];
	shutdown(fd, SHUT_WR);
	for (int i = 0; i < 16; i++) {
		ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
	}
	close(fd);
}

static void conn_free(struct srv *s, struct srv_conn *c, bool abandon)
{
	while (c->out_head) {
		struct out_item *it = c->out_head;
		c->out_head = it->next;
		item_free(s, it, abandon);
	}
	if (c->io)
		s->ops.detach(s->ops.ctx, c->io);
	if (c->fd >= 0 && c->draining)
		close_gently(c->fd);
	else if (c->fd >= 0)
		close(c->fd);
	dl_del(&c->part_link);
	ctl_parser_free(c->parser);
	free(c);
	s->freed_untrimmed++;
}

/* Write what was queued, then free what was killed. Every entry point ends here. */
static void settle(struct srv *s)
{
	while (!dl_empty(&s->dirty)) {
		struct srv_conn *c = dl_entry(s->dirty.next, struct srv_conn, dirty);
		dl_del(&c->dirty);
		if (!c->dead)
			conn_flush(c);
	}
	while (!dl_empty(&s->dead)) {
		struct srv_conn *c = dl_entry(s->dead.next, struct srv_conn, link);
		dl_del(&c->link);
		conn_free(s, c, true);
	}
	/* Each connection had a 16 KiB read buffer and maybe a 64 KiB message: give the heap's
	 * free pages back after a crowd has gone, not only keep them for the next crowd. */
	if (s->freed_untrimmed >= SRV_TRIM_CONNS) {
		s->freed_untrimmed = 0;
		malloc_trim(0);
	}
	chan_trim(s);
	if (s->nodes_gc)
		node_gc(s);
}

/* ---- connecting ---------------------------------------------------------- */

/* Make the channel for connect c to listener l and hand its two ends out. */
static void do_connect(struct srv *s, struct srv_conn *c, struct session *se, struct listener *l,
		       int nic)
{
	char err[SRV_ERR_LEN];
	struct channel *ch = NULL;
	struct ctl_msg *m = s->out;
	c->role = R_CONNECT;
	if (fabmon_faults(s->mon) && !c->faults_done) {
		int64_t until = 0, now = now_ns();
		uint32_t fid = 0;
		int v = faultd_connect(fabmon_faults(s->mon), se->node->id, l->sess->node->id, now, &until, &fid,
				       err, sizeof(err));
		if (v < 0) {
			log_warn("connect %s/%d (pid %d) -> %s/%d (listener 0x%llx): %s",
				 se->node->name, nic, (int)c->pid, l->sess->node->name, l->nic,
				 (unsigned long long)l->id, err);
			reply_error(c, ECONNABORTED, err);
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
	int fd = chan_create(s, &ch, err, sizeof(err));
	if (fd < 0) {
		log_error("connect from pid %d to listener 0x%llx: %s", (int)c->pid,
			  (unsigned long long)l->id, err);
		reply_error(c, -fd, err);
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
		reply_error(c, e, err);
		close(fd);
		ch->end[END_TX].st = ch->end[END_RX].st = END_DEAD;
		chan_maybe_free(s, ch);
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
		int prc = snic ? fabric_path(s->fabric, se->node->id, nic, l->sess->node->id, l->nic,
					     &path, err, sizeof(err))
			       : -ENODEV;
		if (prc == 0)
			prc = chan_set_route(ch->shm, &path, (uint32_t)snic->gid, &snic->model,
					     se->node->id, l->sess->node->id);
		if (prc == 0) /* a comm_hang or node_freeze already on holds it from the start */
			chan_set_hold(ch->shm,
				      faultd_hold_bits(fabmon_faults(s->mon), se->node->id,
						       l->sess->node->id),
				      1);
		if (prc) {
			log_error("chan 0x%llx: no route %s/%d -> %s/%d: %s", (unsigned long long)id,
				  se->node->name, nic, l->sess->node->name, l->nic,
				  prc == -ENODEV ? "no such NIC" : err);
			reply_error(c, -prc, "no route between these NICs in the fabric");
			close(fd);
			close(fd2);
			ch->end[END_TX].st = ch->end[END_RX].st = END_DEAD;
			chan_maybe_free(s, ch);
			return;
		}
	}

	/* Neither queue call frees ch, except on out-of-memory: use only id from here. */
	msg_reset(m);
	ctl_addf(m, "chan", "0x%llx", (unsigned long long)id);
	ctl_addf(m, "shm_bytes", "%zu", s->shm_bytes);
	ctl_add(m, "fd", "1");
	ctl_add(m, "errno", "0");
	conn_queue(c, m, fd2, id, END_TX);

	msg_reset(m);
	ctl_add(m, "op", "incoming");
	ctl_addf(m, "chan", "0x%llx", (unsigned long long)id);
	ctl_addf(m, "shm_bytes", "%zu", s->shm_bytes);
	ctl_add(m, "from_node", se->node->name);
	ctl_addf(m, "from_nic", "%d", nic);
	ctl_addf(m, "listener", "0x%llx", (unsigned long long)l->id);
	ctl_add(m, "fd", "1");
	conn_queue(l->conn, m, fd, id, END_RX);
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
			se = session_find(s, 0, token);
		if (!se)
			snprintf(err, SRV_ERR_LEN,
				 "session='%s' is no live session's token (its hello's reply has it)",
				 clip(tv, q));
		else if (c->pid > 0 && se->pid > 0 && se->pid != c->pid) {
			snprintf(err, SRV_ERR_LEN,
				 "session='%s' is pid %d's, and this connection is pid %d's",
				 clip(tv, q), (int)se->pid, (int)c->pid);
			se = NULL;
		}
		return se;
	}
	struct session *se = session_find(s, c->pid, 0);
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

static int op_hello(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		    struct ctl_msg *rep, char *err)
{
	char q[72];
	int rc = need_fresh(c, "hello", err), version, pid;
	if (rc)
		return rc;
	struct session *old = session_find(s, c->pid, 0);
	if (old && old->conn->fd >= 0) {
		/* A plugin copy unloaded with objects still open closes its socket without a
		 * word, and a reloaded copy says hello at once: if the old socket is at EOF, that
		 * session is over (we just have not read the EOF yet). */
		char b;
		if (recv(old->conn->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			conn_kill(old->conn, "the peer closed the connection (seen at its new hello)");
			old = session_find(s, c->pid, 0);
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
	} while (!se->token || session_find(s, 0, se->token));
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
			log_warn("session pid %d joins node %s while a fault holds it stopped: SIGSTOP",
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
	conn_queue(c, rep, fd, 0, 0);
	return SRV_DONE;
}

static int op_listen(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		     struct ctl_msg *rep, char *err)
{
	uint64_t id;
	int nic, rc;
	struct session *se = need_session(s, c, req, err);
	if (!se)
		return -EPERM;
	if ((rc = need_fresh(c, "listen", err)) || (rc = get_u64(req, "listener", &id, err)) ||
	    (rc = get_nic(req, se->node, &nic, err)))
		return rc;
	struct listener *dup = listener_find(s, id);
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
	struct tomb *tb = tomb_find(s, id);
	if (tb)
		tb->used = false;
	log_info("listener 0x%llx: pid %d, %s/%d, conn#%llu", (unsigned long long)id, (int)se->pid,
		 se->node->name, nic, (unsigned long long)c->id);

	/* The reply goes first: incoming events for waiting connects follow it. */
	ctl_add(rep, "errno", "0");
	conn_queue(c, rep, -1, 0, 0);
	struct dl *p, *t;
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *pc = dl_entry(p, struct srv_conn, pend_link);
		if (pc->pend_listener != id || pc->pend_held)
			continue;
		pending_remove(pc);
		log_debug("conn#%llu: connect to listener 0x%llx waited %lld ms",
			  (unsigned long long)pc->id, (unsigned long long)id,
			  (long long)((now_ns() - pc->pend_since) / 1000000));
		do_connect(s, pc, pc->pend_sess, l, pc->pend_nic);
	}
	return SRV_DONE;
}

static int op_connect(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
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
	struct listener *l = listener_find(s, id);
	if (l) {
		do_connect(s, c, se, l, nic);
		return SRV_DONE;
	}
	struct tomb *tb = tomb_find(s, id);
	if (tb && session_alive(s, tb->sess_serial)) {
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

static int op_close(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		    struct ctl_msg *rep, char *err)
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
	struct channel *ch = chan_find(s, id);
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
	chan_maybe_free(s, ch);
	return 0;
}

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

/*
 * Live faults (docs/control-protocol.md, op=fault):
 *   verb=apply spec=<a fault as one line of YAML flow syntax> [at_ns=<delay from now>]
 *   verb=clear id=<n>|all [at_ns=<delay from now>]
 *   verb=list [skip=<n>]
 * A new fault is checked against the fabric first (the scenario parser's
 * rules and messages), then published whole: a sender sees all of it or none
 * of it. Its at: counts from the effective time now + at_ns.
 */
static int op_fault(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		    struct ctl_msg *rep, char *err)
{
	(void)c;
	const char *verb = ctl_get(req, "verb");
	if (!fabmon_faults(s->mon)) {
		snprintf(err, SRV_ERR_LEN, "faults need an explicit fabric (a scenario with links); "
					   "this daemon runs the ideal fabric");
		return -EOPNOTSUPP;
	}
	uint64_t at = 0, skip = 0;
	if (ctl_get(req, "at_ns") && get_u64(req, "at_ns", &at, err))
		return -EINVAL;
	if (at > 1000000000000000ull) {
		snprintf(err, SRV_ERR_LEN, "at_ns: %llu is more than 1e15 ns", (unsigned long long)at);
		return -EINVAL;
	}
	int64_t now = now_ns(), eff = now + (int64_t)at;
	const struct fst_shm *fs = fabmon_shm(s->mon);
	if (!strcmp(verb, "apply")) {
		const char *spec = ctl_get(req, "spec");
		if (!spec || !*spec) {
			snprintf(err, SRV_ERR_LEN, "spec: missing (a fault in YAML flow syntax, like "
						   "{action: link_down, link: [node0, sw0], for: 5ms})");
			return -EINVAL;
		}
		if (ctl_get(req, "skip")) {
			snprintf(err, SRV_ERR_LEN, "skip: only with verb=list");
			return -EINVAL;
		}
		struct fault_plan *plan = NULL;
		char why[SCN_ERR_LEN];
		/* one fault, or a list of them */
		char buf[CTL_VALUE_MAX + 8];
		snprintf(buf, sizeof(buf), spec[0] == '[' ? "%s" : "[%s]", spec);
		int rc = scn_load_faults(s->fabric, "spec", buf, strlen(buf), &plan, why, sizeof(why));
		if (rc) {
			snprintf(err, SRV_ERR_LEN, "%.*s", SRV_ERR_LEN - 1, why);
			return rc;
		}
		if ((int)faultd_count(fabmon_faults(s->mon)) + plan->n > FAULT_MAX) {
			snprintf(err, SRV_ERR_LEN, "the fabric has room for %d more fault(s); this "
						   "spec has %d",
				 FAULT_MAX - (int)faultd_count(fabmon_faults(s->mon)), plan->n);
			fault_plan_free(plan);
			return -ENOSPC;
		}
		for (int i = 0; i < plan->n; i++) {
			uint32_t id;
			plan->f[i].line = 0;
			rc = faultd_apply(fabmon_faults(s->mon), &plan->f[i], eff, &id, err, SRV_ERR_LEN);
			if (rc) {
				fault_plan_free(plan);
				return rc;
			}
			char k[24];
			snprintf(k, sizeof(k), "id.%d", i);
			ctl_addf(rep, k, "%u", id);
		}
		ctl_addf(rep, "faults", "%d", plan->n);
		ctl_addf(rep, "effective_ns", "%lld", (long long)(eff - fs->epoch_ns));
		fault_plan_free(plan);
		faultd_tick(fabmon_faults(s->mon), now);
		return 0;
	}
	if (ctl_get(req, "spec")) {
		snprintf(err, SRV_ERR_LEN, "spec: only with verb=apply");
		return -EINVAL;
	}
	if (!strcmp(verb, "clear")) {
		const char *ids = ctl_get(req, "id");
		uint64_t id = 0;
		if (!ids) {
			snprintf(err, SRV_ERR_LEN, "id: missing (a fault's id, or all)");
			return -EINVAL;
		}
		if (strcmp(ids, "all") && get_u64(req, "id", &id, err))
			return -EINVAL;
		int n;
		int rc = faultd_clear(fabmon_faults(s->mon), strcmp(ids, "all") ? (int64_t)id : -1, eff, &n, err,
				      SRV_ERR_LEN);
		if (rc)
			return rc;
		faultd_tick(fabmon_faults(s->mon), now); /* a clear effective now ends its window now */
		ctl_addf(rep, "cleared", "%d", n);
		ctl_addf(rep, "effective_ns", "%lld", (long long)(eff - fs->epoch_ns));
		return 0;
	}
	if (!strcmp(verb, "list")) {
		if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
			return -EINVAL;
		uint32_t n = faultd_count(fabmon_faults(s->mon));
		ctl_addf(rep, "faults", "%u", n);
		ctl_addf(rep, "now_ns", "%lld", (long long)(now - fs->epoch_ns));
		ctl_addf(rep, "epoch_ns", "%lld", (long long)fs->epoch_ns);
		for (uint64_t i = skip; i < n; i++) {
			char k[24], v[CTL_VALUE_MAX + 1];
			if (faultd_describe(fabmon_faults(s->mon), (uint32_t)i, now, v, sizeof(v)))
				continue;
			snprintf(k, sizeof(k), "fault.%llu", (unsigned long long)i);
			if (!srv_add_paged(rep, k, v, i))
				break;
		}
		return 0;
	}
	snprintf(err, SRV_ERR_LEN, "verb: '%s' is not apply, clear or list", verb);
	return -EINVAL;
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})
static const struct op_def {
	const char *name;
	op_fn fn;
	const char *const *required;
	const char *const *optional;
	bool looks; /* only reads: logged here, at debug (the others log what they do) */
} op_table[] = {
	{"hello", op_hello, KEYS("node", "pid", "version", "client"), KEYS("gpu"), false},
	{"listen", op_listen, KEYS("listener", "nic"), KEYS("session"), false},
	{"connect", op_connect, KEYS("listener", "nic"), KEYS("session"), false},
	{"close", op_close, KEYS("chan", "side"), KEYS("session"), false},
	{"show", srv_op_show, KEYS(NULL), KEYS("skip"), true},
	{"fabric", srv_op_fabric, KEYS(NULL), KEYS("skip"), true},
	{"stats", srv_op_stats, KEYS(NULL), KEYS("skip"), true},
	{"series", srv_op_series, KEYS(NULL), KEYS("skip"), true},
	{"fault", op_fault, KEYS("verb"), KEYS("spec", "id", "at_ns", "skip"), false},
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
			kl += (size_t)snprintf(known + kl, sizeof(known) - kl, "%s%s", i ? ", " : "",
					       op_table[i].name);
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
		const char *op = d ? d->name
			       : strcmp(req->kv[0].key, "op") == 0 ? clip(req->kv[0].value, q)
								    : "(none)";
		log_info("conn#%llu (pid %d): op=%s refused: %s: %s", (unsigned long long)c->id,
			 (int)c->pid, op, errname(-rc), err);
		reply_error(c, -rc, err);
		return;
	}
	if (d->looks)
		log_debug("conn#%llu (pid %d): op=%s", (unsigned long long)c->id, (int)c->pid,
			  d->name);
	if (ctl_add(rep, "errno", "0") != 0) {
		/* Cannot happen: every reply leaves room for its errno line. */
		reply_error(c, EOVERFLOW, "reply too long");
		return;
	}
	conn_queue(c, rep, -1, 0, 0);
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

/* node_kill, node_freeze, straggle: signal every live session of node (its processes are
 * the ranks; sig 0 only counts them). */
static int signal_node(void *ctx, int node, int sig, int quiet, const char *why)
{
	struct srv *s = ctx;
	int n = 0;
	struct dl *p;
	for (p = s->sessions.next; p != &s->sessions; p = p->next) {
		struct session *se = dl_entry(p, struct session, link);
		if (!se->node || se->node->id != node)
			continue;
		if (se->pid <= 0) { /* kill(0, ...) would signal the daemon's own process group */
			if (!quiet)
				log_warn("%s: cannot send SIG%s to the session of hello pid %d (node %s): "
					 "this daemon cannot see its pid (another pid namespace)",
					 why, sig ? sigabbrev_np(sig) : "0", (int)se->said_pid,
					 se->node->name);
			continue;
		}
		if (kill(se->pid, sig) == 0) {
			if (!quiet)
				log_warn("%s: SIG%s pid %d (node %s)", why, sigabbrev_np(sig),
					 (int)se->pid, se->node->name);
			n++;
		} else {
			log_warn("%s: cannot send SIG%s to pid %d (node %s): %s", why,
				 sig ? sigabbrev_np(sig) : "0 (is it there?)", (int)se->pid,
				 se->node->name, strerror(errno));
		}
	}
	if (!n && !quiet)
		log_warn("%s: no process of that node is connected to the daemon", why);
	return n;
}

/*
 * The open channels from node src to node dst (FAULT_ANY: any) that a fault acts on: reset
 * (fid: chan_mark_reset) when hold is 0, else hold or release (on) the CHAN_HOLD_* bits in hold.
 * One line each, but for the receive holds of a freeze. Returns how many.
 */
static int act_conns(struct srv *s, int src, int dst, uint32_t fid, uint32_t hold, int on,
		     const char *why)
{
	int n = 0;
	struct dl *p;
	for (p = s->chans.next; p != &s->chans; p = p->next) {
		struct channel *ch = dl_entry(p, struct channel, link);
		const struct fabric_node *a = ch->end[END_TX].node, *b = ch->end[END_RX].node;
		if (!ch->shm || !a || !b || !fault_conn_match(src, dst, a->id, b->id))
			continue;
		if (hold)
			chan_set_hold(ch->shm, hold, on);
		else
			chan_mark_reset(ch->shm, fid);
		if (!hold || (hold & CHAN_HOLD_HANG))
			log_warn("%s: chan 0x%llx (%s -> %s) %s", why, (unsigned long long)ch->id,
				 a->name, b->name, !hold ? "reset" : on ? "hangs" : "released");
		n++;
	}
	return n;
}

/* node_freeze, comm_hang: hold (or release) the channels. */
static int hold_conns(void *ctx, int src, int dst, uint32_t bits, int on, const char *why)
{
	return bits ? act_conns(ctx, src, dst, 0, bits, on, why) : 0;
}

/* reset: the channels fail on both ends. */
static int reset_conns(void *ctx, int src, int dst, uint32_t fid, const char *why)
{
	return act_conns(ctx, src, dst, fid, 0, 0, why);
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
		snprintf(err, errlen, "bad channel geometry: %u slots of %u bytes", cfg->geom.nslots,
			 cfg->geom.slot_bytes);
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
	int rc = !s->out		  ? -ENOMEM
		 : cfg->use_scenario ? (s->scn = cfg->use_scenario, 0)
				     : ideal_scenario(&cfg->fabric, &s->scn, err, errlen);
	s->cfg.use_scenario = NULL;
	if (!rc)
		s->fabric = s->scn->fabric;
	if (!rc && !fabric_is_ideal(s->fabric)) {
		const struct faultd_ops fops = {
			.signal = signal_node, .hold = hold_conns, .reset = reset_conns, .ctx = s};
		rc = fabmon_new(s->fabric, s->scn->faults, cfg->sample_ms, cfg->series_samples,
				&fops, now_ns(), &s->mon, err, errlen);
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
	/* Tell waiting connects why, as far as their sockets take it now. */
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *pc = dl_entry(p, struct srv_conn, pend_link);
		pending_remove(pc);
		reply_error(pc, ESHUTDOWN, "the daemon is shutting down");
	}
	settle(s);
	log_info("shutting down: %d session(s), %d listener(s), %d open channel(s)", s->nsessions,
		 s->nlisteners, s->nchans_open);
	dl_each_safe(p, t, &s->chans)
	{
		struct channel *ch = dl_entry(p, struct channel, link);
		chan_unmap(ch, 'd');
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
		conn_free(s, dl_entry(p, struct srv_conn, link), false);
	}
	fabmon_free(s->mon); /* before the fabric: its fault daemon names the fabric's links */
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
	close_gently(fd);
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
	close_gently(fd);
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
			log_warn("cannot watch the connection of pid %d; dropping it", (int)cr.pid);
			ctl_parser_free(parser);
			free(c);
			close(fd);
			continue;
		}
		dl_push(&s->conns, &c->link);
		s->nconns++;
		log_debug("conn#%llu: pid %d connected (%d connection(s))", (unsigned long long)c->id,
			  (int)c->pid, s->nconns);
	}
	settle(s);
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
				conn_drain(c, "the peer closed its side; sending what it is owed");
			else
				conn_kill(c, "the peer closed the connection");
		} else if (rc == -EINVAL) {
			char why[CTL_ERR_LEN + 32];
			snprintf(why, sizeof(why), "framing error: %s", ctl_parser_error(c->parser));
			log_warn("conn#%llu (pid %d): %s; replying and disconnecting",
				 (unsigned long long)c->id, (int)c->pid, why);
			reply_error(c, EINVAL, ctl_parser_error(c->parser));
			conn_drain(c, why);
		} else {
			char why[96];
			snprintf(why, sizeof(why), "read: %s", strerror(-rc));
			conn_kill(c, why);
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
		watch(c, false, c->wr_on);
	settle(s);
}

void srv_conn_writable(struct srv_conn *c)
{
	mark_dirty(c);
	settle(c->srv);
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
		reply_error(c, ETIMEDOUT, err);
		conn_drain(c, "a message not complete in time");
	}
	dl_each_safe(p, t, &s->pending)
	{
		struct srv_conn *c = dl_entry(p, struct srv_conn, pend_link);
		if (c->pend_deadline > now)
			continue;
		if (c->pend_held) { /* a connect_delay is over: go on, if the listener still is */
			pending_remove(c);
			c->pend_held = false;
			c->faults_done = true;
			struct listener *l = listener_find(s, c->pend_listener);
			if (l && c->pend_sess) {
				do_connect(s, c, c->pend_sess, l, c->pend_nic);
			} else {
				char err[SRV_ERR_LEN];
				snprintf(err, sizeof(err),
					 "listener 0x%llx was closed while a connect_delay fault held "
					 "this connect",
					 (unsigned long long)c->pend_listener);
				reply_error(c, ECONNREFUSED, err);
			}
			continue;
		}
		char err[SRV_ERR_LEN];
		snprintf(err, sizeof(err), "listener 0x%llx is not known (waited %d ms)",
			 (unsigned long long)c->pend_listener, s->cfg.connect_wait_ms);
		log_info("conn#%llu (pid %d): op=connect refused: ECONNREFUSED: %s",
			 (unsigned long long)c->id, (int)c->pid, err);
		pending_remove(c);
		reply_error(c, ECONNREFUSED, err);
	}
	settle(s);
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
