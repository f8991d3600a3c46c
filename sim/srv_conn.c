/* SPDX-License-Identifier: MIT */
/*
 * srv_conn.c - the server's connections: the output queue and its flush, and
 * the end of a connection with what it stands for (its session, listener or
 * waiting connect). Killing only marks; srv_settle(), at the end of every
 * entry point of srv.c, writes what was queued and frees what was killed.
 * A leaf under the hub sim/srv.c: it calls only the registries (srv_reg.c).
 */
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sim/core/ctl.h"
#include "sim/log.h"
#include "sim/srv_int.h"

#define SRV_TRIM_CONNS 32 /* connections freed between two malloc_trim()s */

/* ---- output -------------------------------------------------------------- */

void srv_mark_dirty(struct srv_conn *c)
{
	if (!c->dead && c->dirty.next == &c->dirty)
		dl_push(&c->srv->dirty, &c->dirty);
}

void srv_watch(struct srv_conn *c, bool rd, bool wr)
{
	if (c->rd_on == rd && c->wr_on == wr)
		return;
	c->rd_on = rd;
	c->wr_on = wr;
	if (c->io)
		c->srv->ops.watch(c->srv->ops.ctx, c->io, rd, wr);
}

/*
 * Queue msg for c, with fd (owned from here on, or -1) on its first byte.
 * chan/side: the channel end this message hands out (0 if none). Never kills
 * c and never writes: srv_settle() does both, once the current request is done.
 */
void srv_conn_queue(struct srv_conn *c, const struct ctl_msg *msg, int fd, uint64_t chan, int side)
{
	struct srv *s = c->srv;
	ssize_t n = ctl_msg_format(msg, s->wire, sizeof(s->wire));
	struct out_item *it = n < 0 ? NULL : malloc(sizeof(*it) + (size_t)n);
	if (!it) {
		log_error("conn#%llu: cannot queue a %zd-byte reply: %s", (unsigned long long)c->id,
			  n, n < 0 ? "message too long" : "out of memory");
		if (fd >= 0)
			close(fd);
		struct channel *ch = chan ? srv_chan_find(s, chan) : NULL;
		if (ch)
			srv_chan_end_gone(s, ch, side, "its reply could not be queued");
		if (!c->kill_why)
			c->kill_why = "out of memory queueing a reply";
		srv_mark_dirty(c);
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
	srv_mark_dirty(c);
}

void srv_reply_error(struct srv_conn *c, int e, const char *text)
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
	srv_conn_queue(c, m, -1, 0, 0);
}

static void item_free(struct srv *s, struct out_item *it, bool abandoned)
{
	if (abandoned && it->chan) {
		struct channel *ch = srv_chan_find(s, it->chan);
		if (ch)
			srv_chan_end_gone(s, ch, it->side, "its connection closed before delivery");
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
		srv_conn_kill(c, c->kill_why);
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
			srv_conn_kill(c, why);
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
		srv_conn_kill(c, why);
		return;
	}
	if (!c->out_head && c->draining) {
		srv_conn_kill(c, c->why[0] ? c->why : "done");
		return;
	}
	srv_watch(c, !c->draining, c->out_head != NULL);
}

void srv_pending_remove(struct srv_conn *c)
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
	*tb = (struct tomb){
		.id = l->id, .sess_serial = l->sess->serial, .pid = l->sess->pid, .used = true};
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
		srv_conn_kill(c, why);
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
				srv_chan_end_gone(s, ch, side, buf); /* unmaps, never frees, ch */
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
			srv_pending_remove(pc);
			srv_reply_error(pc, ECONNABORTED, buf);
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
	srv_pending_remove(c);
	c->role = R_NONE;
}

void srv_conn_kill(struct srv_conn *c, const char *why)
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
void srv_conn_drain(struct srv_conn *c, const char *why)
{
	if (c->dead || c->draining)
		return;
	snprintf(c->why, sizeof(c->why), "%s", why);
	c->draining = true;
	dl_del(&c->part_link);
	conn_retire(c, c->why, true);
	srv_mark_dirty(c);
}

/*
 * Close a socket we are done with. Unread input at close() makes the peer's
 * next read fail with ECONNRESET instead of a clean EOF after our last reply,
 * so read what is already there first (bounded: this never waits).
 */
void srv_close_gently(int fd)
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

void srv_conn_free(struct srv *s, struct srv_conn *c, bool abandon)
{
	while (c->out_head) {
		struct out_item *it = c->out_head;
		c->out_head = it->next;
		item_free(s, it, abandon);
	}
	if (c->io)
		s->ops.detach(s->ops.ctx, c->io);
	if (c->fd >= 0 && c->draining)
		srv_close_gently(c->fd);
	else if (c->fd >= 0)
		close(c->fd);
	dl_del(&c->part_link);
	ctl_parser_free(c->parser);
	free(c);
	s->freed_untrimmed++;
}

/* Write what was queued, then free what was killed. Every entry point ends here. */
void srv_settle(struct srv *s)
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
		srv_conn_free(s, c, true);
	}
	/* Each connection had a 16 KiB read buffer and maybe a 64 KiB message: give the heap's
	 * free pages back after a crowd has gone, not only keep them for the next crowd. */
	if (s->freed_untrimmed >= SRV_TRIM_CONNS) {
		s->freed_untrimmed = 0;
		malloc_trim(0);
	}
	srv_chan_trim(s);
	if (s->nodes_gc)
		srv_node_gc(s);
}
