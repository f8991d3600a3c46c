/* SPDX-License-Identifier: MIT */
/*
 * srv.c - simfabricd's server: the state behind the control protocol.
 * See srv.h for how it meets its event loop, docs/control-protocol.md for
 * what the requests mean.
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
#include <signal.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sim/ctl.h"
#include "sim/faultd.h"
#include "sim/fstate.h"
#include "sim/log.h"
#include "sim/scenario.h"
#include "sim/series.h"

#define SRV_READ_BATCH 64    /* messages per readable callback before yielding */
#define SRV_ACCEPT_BATCH 64  /* connections per accept callback */
#define SRV_TOMBS 4096	     /* dropped listener ids remembered */
#define SRV_CLOSED_KEEP 256  /* freed channels still listed by show */
#define SRV_CLIENT_MAX 32

/* Handler results besides 0 (reply with errno=0) and -errno (error reply). */
#define SRV_DONE 1 /* the handler queued its reply itself, or will later */

/* ---- intrusive lists ----------------------------------------------------- */

struct dl {
	struct dl *prev, *next;
};

static void dl_init(struct dl *h)
{
	h->prev = h->next = h;
}

static bool dl_empty(const struct dl *h)
{
	return h->next == h;
}

static void dl_push(struct dl *h, struct dl *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static void dl_del(struct dl *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#define dl_entry(p, type, member) ((type *)(void *)((char *)(p) - offsetof(type, member)))
#define dl_each_safe(pos, tmp, head)                                                               \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head);                           \
	     (pos) = (tmp), (tmp) = (pos)->next)

/* ---- objects ------------------------------------------------------------- */

enum role { R_NONE, R_SESSION, R_LISTENER, R_CONNECT };
static const char *const role_names[] = {"nothing", "session", "listener", "connect"};

enum { END_TX = 0, END_RX = 1 };
enum end_state { END_OPEN, END_CLOSED, END_DEAD };

struct out_item {
	struct out_item *next;
	int fd;	       /* descriptor to attach to the first byte, or -1; owned */
	uint64_t chan; /* channel whose end this hands out, or 0 */
	int side;
	size_t len, off;
	char data[];
};

struct session;
struct listener;

struct srv_conn {
	struct srv *srv;
	struct dl link;	 /* s->conns, or s->dead once killed */
	struct dl dirty; /* s->dirty while output waits to be written */
	uint64_t id;
	int fd;
	pid_t pid;
	uid_t uid;
	void *io;
	struct ctl_parser *parser;
	struct out_item *out_head, **out_tail;
	size_t out_bytes;
	bool rd_on, wr_on;
	bool draining; /* no more input; close once the output is written */
	bool dead;
	const char *kill_why; /* set where killing at once is unsafe; settle() does it */
	enum role role;
	struct session *sess;
	struct listener *lis;
	/* A connect waiting for its listener (role R_CONNECT, pending). */
	bool pending;
	struct dl pend_link;
	uint64_t pend_listener;
	int pend_nic;
	struct session *pend_sess;
	int64_t pend_deadline, pend_since;
	bool pend_held;	   /* held by a connect_delay fault until pend_deadline, listener known */
	bool faults_done;  /* the connect faults were applied already */
	char why[CTL_ERR_LEN + 64]; /* why it closed, for the log */
};

struct session {
	struct dl link;
	uint64_t serial;
	pid_t pid;
	const struct fabric_node *node;
	char client[SRV_CLIENT_MAX + 1];
	struct srv_conn *conn;
};

struct listener {
	struct dl link;
	uint64_t id;
	struct session *sess;
	int nic;
	struct srv_conn *conn;
	uint64_t accepted;
};

struct tomb {
	uint64_t id;
	uint64_t sess_serial;
	pid_t pid;
	bool used;
};

struct chan_end {
	struct session *sess; /* NULL once its session ended */
	pid_t pid;
	const struct fabric_node *node;
	int nic;
	enum end_state st;
};

struct channel {
	struct dl link; /* s->chans, in creation order */
	uint64_t id, listener;
	struct chan_shm *shm; /* NULL once freed */
	size_t len;
	struct chan_end end[2];
	struct chan_stats last; /* final counters, once freed */
};

struct srv {
	struct srv_config cfg;
	struct srv_ops ops;
	struct fabric *fabric;
	size_t shm_bytes;
	uint64_t conn_mem;
	char instance[17];
	struct dl conns, dead, dirty, sessions, listeners, pending, chans;
	int nconns, nsessions, nlisteners, npending, nchans_open, nchans_closed;
	uint64_t next_conn, next_serial, next_chan;
	struct tomb tombs[SRV_TOMBS];
	int tomb_pos;
	bool stopping;
	struct ctl_msg *out; /* scratch for building replies */
	/* A modelled fabric's shared state (sim/fstate.h), handed to every session at hello. */
	int fab_fd;
	void *fab_base;
	size_t fab_len;
	/* The fidelity monitor's last look, per link: deliveries and lateness summed so far. */
	int64_t fid_next_ns;
	uint64_t *fid_n, *fid_sum;
	int64_t *fid_warned_ns;
	struct faultd *faults; /* NULL on the ideal fabric */
	/* The sampler (op=series): on from the first open channel until none is open and the
	 * links' backlogs have drained. NULL: no sampling (ideal fabric, or sample_ms 0). */
	struct series *series;
	uint64_t *ser_cum; /* scratch: fst_crossed's counts */
	int64_t ser_period_ns, ser_next_ns, ser_prev_ns;
	bool ser_on;
	char wire[CTL_MSG_MAX];
};

#define SRV_FIDELITY_PERIOD_NS 1000000000LL
#define SRV_FIDELITY_MIN_MSGS 16	  /* deliveries in a period before it judges */
#define SRV_FIDELITY_LATE_NS 20000ull /* mean lateness that counts as "cannot keep up" */

/* ---- small helpers ------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* A value quoted into an error text: at most 64 characters ("..." if cut). */
static const char *clip(const char *v, char out[static 72])
{
	size_t n = strlen(v);
	if (n <= 64)
		return v;
	memcpy(out, v, 61);
	memcpy(out + 61, "...", 4);
	return out;
}

static void msg_reset(struct ctl_msg *m)
{
	m->n = 0;
	m->len = 0;
	m->fd = -1;
}

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
		struct iovec iov = {.iov_base = it->data + it->off, .iov_len = it->len - it->off};
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cm;
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
		if (it->fd >= 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.b;
			mh.msg_controllen = sizeof(cm.b);
			struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_RIGHTS;
			h->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(h), &it->fd, sizeof(int));
		}
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
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

/* ---- the sampler ---------------------------------------------------------- */

/* A channel opened: sample from now on (it may still be on, draining backlogs). */
static void sampler_wake(struct srv *s)
{
	if (!s->series || s->ser_on)
		return;
	int64_t now = now_ns();
	s->ser_on = true;
	s->ser_prev_ns = now;
	s->ser_next_ns = now + s->ser_period_ns;
}

/*
 * One sample of what crossed every link since the last, when it is due, or with flush at
 * once if anything moved (op=series: the newest bytes without waiting for the period). It
 * goes off once no channel is open and no link has a backlog left, so the samples add up
 * to op=stats' bytes and an idle daemon takes none. Memory reads only: never blocks.
 */
static void sampler_poll(struct srv *s, int64_t now, bool flush)
{
	if (!s->series || !s->ser_on || (!flush && now < s->ser_next_ns))
		return;
	const struct fst_shm *fs = s->fab_base;
	uint32_t backlogged = fst_crossed(fs, now, s->ser_cum);
	if (!flush || series_changed(s->series, s->ser_cum)) {
		series_add(s->series, now - fs->epoch_ns, now - s->ser_prev_ns, s->ser_cum);
		s->ser_prev_ns = now;
	}
	/* On a fixed grid, so that timer lateness does not add up; a stalled loop skips ahead. */
	if (!flush && s->ser_next_ns <= now)
		s->ser_next_ns += ((now - s->ser_next_ns) / s->ser_period_ns + 1) * s->ser_period_ns;
	if (!backlogged && s->nchans_open == 0)
		s->ser_on = false;
}

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

static const char *chan_state(const struct channel *ch)
{
	if (!ch->shm)
		return "closed";
	if (ch->end[END_TX].st == END_DEAD || ch->end[END_RX].st == END_DEAD)
		return "dead";
	if (ch->end[END_TX].st == END_CLOSED || ch->end[END_RX].st == END_CLOSED)
		return "closing";
	return "open";
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
	sampler_wake(s);
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

static struct session *session_by_pid(struct srv *s, pid_t pid)
{
	struct dl *p, *t;
	dl_each_safe(p, t, &s->sessions)
	{
		struct session *se = dl_entry(p, struct session, link);
		if (se->pid == pid)
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
	ctl_parser_free(c->parser);
	free(c);
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
	chan_trim(s);
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
	if (s->faults && !c->faults_done) {
		int64_t until = 0, now = now_ns();
		uint32_t fid = 0;
		int v = faultd_connect(s->faults, se->node->id, l->sess->node->id, now, &until, &fid,
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
	if (s->fab_fd >= 0) {
		struct model_path path;
		const struct fabric_nic *snic = fabric_nic(se->node, nic);
		int prc = snic ? fabric_path(s->fabric, se->node->id, nic, l->sess->node->id, l->nic,
					     &path, err, sizeof(err))
			       : -ENODEV;
		if (prc == 0)
			prc = chan_set_route(ch->shm, &path, (uint32_t)snic->gid, &snic->model,
					     se->node->id, l->sess->node->id);
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

typedef int (*op_fn)(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		     struct ctl_msg *rep, char *err);

static struct session *need_session(struct srv *s, struct srv_conn *c, char *err)
{
	struct session *se = session_by_pid(s, c->pid);
	if (!se)
		snprintf(err, SRV_ERR_LEN,
			 "hello first: pid %d has no session (send op=hello on a connection "
			 "that stays open)",
			 (int)c->pid);
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

static int get_u64(const struct ctl_msg *req, const char *key, uint64_t *out, char *err)
{
	char q[72];
	if (ctl_get_u64(req, key, out) == 0)
		return 0;
	snprintf(err, SRV_ERR_LEN, "%s='%s' is not a u64 (decimal, or hex with 0x)", key,
		 clip(ctl_get(req, key), q));
	return -EINVAL;
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

/*
 * Sessions are keyed by the socket's pid: the plugin's listen and connect come on connections
 * of their own. A daemon in a pid namespace that does not contain its client sees pid 0 for
 * every such process, so every rank would be one "process": refuse, saying how to fix it.
 */
static int need_visible_pid(const struct srv_conn *c, char *err)
{
	if (c->pid > 0)
		return 0;
	snprintf(err, SRV_ERR_LEN,
		 "this daemon cannot see the client's pid (SO_PEERCRED says %d: the daemon runs in "
		 "a pid namespace that does not hold its clients, e.g. another container); sessions "
		 "are per process, so run simfabricd in the ranks' pid namespace or an ancestor of "
		 "it (docker --pid=host, Kubernetes shareProcessNamespace)",
		 (int)c->pid);
	return -ESRCH;
}

static int op_hello(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		    struct ctl_msg *rep, char *err)
{
	char q[72];
	int rc = need_fresh(c, "hello", err), version, pid;
	if (rc || (rc = need_visible_pid(c, err)))
		return rc;
	struct session *old = session_by_pid(s, c->pid);
	if (old && old->conn->fd >= 0) {
		/* A plugin copy unloaded with objects still open closes its socket without a
		 * word, and a reloaded copy says hello at once: if the old socket is at EOF, that
		 * session is over (we just have not read the EOF yet). */
		char b;
		if (recv(old->conn->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
			conn_kill(old->conn, "the peer closed the connection (seen at its new hello)");
			old = session_by_pid(s, c->pid);
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
	const struct fabric_node *node;
	char ferr[FABRIC_ERR_LEN];
	rc = fabric_node_get(s->fabric, ctl_get(req, "node"), &node, ferr, sizeof(ferr));
	if (rc) {
		snprintf(err, SRV_ERR_LEN, "%s", ferr);
		return rc;
	}
	struct session *se = calloc(1, sizeof(*se));
	if (!se) {
		snprintf(err, SRV_ERR_LEN, "out of memory");
		return -ENOMEM;
	}
	se->serial = ++s->next_serial;
	se->pid = c->pid;
	se->node = node;
	snprintf(se->client, sizeof(se->client), "%s", client);
	se->conn = c;
	dl_push(&s->sessions, &se->link);
	s->nsessions++;
	c->role = R_SESSION;
	c->sess = se;
	if (pid != (int)c->pid)
		log_info("conn#%llu: hello says pid=%d, the socket says pid %d (another pid "
			 "namespace?); using %d",
			 (unsigned long long)c->id, pid, (int)c->pid, (int)c->pid);
	log_info("session pid %d: node %s (id %d), client %s, conn#%llu", (int)se->pid, node->name,
		 node->id, se->client, (unsigned long long)c->id);

	ctl_add(rep, "fabric", fabric_kind(s->fabric));
	ctl_add(rep, "instance", s->instance);
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
	if (s->fab_fd < 0)
		return 0;
	/* A modelled fabric: the session gets the shared fabric state with the reply. */
	int fd = fcntl(s->fab_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, SRV_ERR_LEN, "cannot duplicate the fabric state's memfd: %s",
			 strerror(errno));
		return -EMFILE;
	}
	ctl_addf(rep, "fabric_bytes", "%zu", s->fab_len);
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
	struct session *se = need_session(s, c, err);
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
	struct session *se = need_session(s, c, err);
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
	struct session *se = need_session(s, c, err);
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
			 e->pid == c->pid ? " (an earlier session)" : "");
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

/* A comma list of the pids of node's live sessions, cut with "..." to fit a value. */
static void node_pids(struct srv *s, const struct fabric_node *n, char *buf, size_t cap)
{
	size_t len = 0;
	buf[0] = 0;
	struct dl *p, *t;
	dl_each_safe(p, t, &s->sessions)
	{
		struct session *se = dl_entry(p, struct session, link);
		if (se->node != n)
			continue;
		char one[16];
		int k = snprintf(one, sizeof(one), "%s%d", len ? "," : "", (int)se->pid);
		if (len + (size_t)k + 4 >= cap) {
			memcpy(buf + len, ",...", 5);
			return;
		}
		memcpy(buf + len, one, (size_t)k + 1);
		len += (size_t)k;
	}
}

static int add_node(struct srv *s, struct ctl_msg *m, const struct fabric_node *n)
{
	char pids[CTL_VALUE_MAX + 1], k[CTL_KEY_MAX + 1];
	int rc = 0;
	node_pids(s, n, pids, sizeof(pids));
	snprintf(k, sizeof(k), "node.%d.name", n->id);
	rc |= ctl_add(m, k, n->name);
	snprintf(k, sizeof(k), "node.%d.pids", n->id);
	rc |= ctl_add(m, k, pids);
	snprintf(k, sizeof(k), "node.%d.nics", n->id);
	rc |= ctl_addf(m, k, "%d", n->nnics);
	for (int i = 0; i < n->nnics; i++) {
		snprintf(k, sizeof(k), "nic.%d.%d.name", n->id, i);
		rc |= ctl_add(m, k, n->nic[i].name);
	}
	return rc;
}

static int add_chan(struct ctl_msg *m, const struct channel *ch)
{
	char k[CTL_KEY_MAX + 1];
	struct chan_stats st = ch->last;
	int rc = 0;
	if (ch->shm)
		chan_stats(ch->shm, &st);
	unsigned long long id = (unsigned long long)ch->id;
	const struct chan_end *tx = &ch->end[END_TX], *rx = &ch->end[END_RX];
	snprintf(k, sizeof(k), "chan.0x%llx.src", id);
	rc |= ctl_addf(m, k, "%s/%d", tx->node->name, tx->nic);
	snprintf(k, sizeof(k), "chan.0x%llx.dst", id);
	rc |= ctl_addf(m, k, "%s/%d", rx->node->name, rx->nic);
	snprintf(k, sizeof(k), "chan.0x%llx.state", id);
	rc |= ctl_add(m, k, chan_state(ch));
	snprintf(k, sizeof(k), "chan.0x%llx.msgs", id);
	rc |= ctl_addf(m, k, "%llu", (unsigned long long)st.rx_msgs);
	snprintf(k, sizeof(k), "chan.0x%llx.bytes", id);
	rc |= ctl_addf(m, k, "%llu", (unsigned long long)st.rx_bytes);
	snprintf(k, sizeof(k), "chan.0x%llx.shm_bytes", id);
	rc |= ctl_addf(m, k, "%zu", ch->len);
	snprintf(k, sizeof(k), "chan.0x%llx.src_pid", id);
	rc |= ctl_addf(m, k, "%d", (int)tx->pid);
	snprintf(k, sizeof(k), "chan.0x%llx.dst_pid", id);
	rc |= ctl_addf(m, k, "%d", (int)rx->pid);
	return rc;
}

/*
 * The fabric's live state. Records (one per node, then one per channel) that
 * do not fit one message are left for the next page: the reply then carries
 * next=<records listed so far> and the client asks again with skip=<next>.
 */
/* Paged replies: is there still room for the longest trailer (next=, errno=)? Tries it,
 * then takes it back. */
static bool trailer_fits(struct ctl_msg *rep)
{
	int n = rep->n;
	size_t len = rep->len;
	int rc = ctl_add(rep, "next", "18446744073709551615");
	if (!rc)
		rc = ctl_add(rep, "errno", "0");
	rep->n = n;
	rep->len = len;
	return rc == 0;
}

/*
 * A record i of a paged reply (its lines added from n0/l0 on; rc: their ctl_add results,
 * or-ed) goes whole or not at all: kept if it and the longest trailer fit, else taken back
 * for next=<i>, and false.
 */
static bool page_keep(struct ctl_msg *rep, int rc, int n0, size_t l0, uint64_t i)
{
	if (!rc && !trailer_fits(rep))
		rc = -E2BIG;
	if (!rc)
		return true;
	rep->n = n0;
	rep->len = l0;
	ctl_addf(rep, "next", "%llu", (unsigned long long)i);
	return false;
}

/* One line of a paged reply: added, or (it does not fit) next=<i> instead and false. */
static bool add_paged(struct ctl_msg *rep, const char *key, const char *v, uint64_t i)
{
	int n0 = rep->n;
	size_t l0 = rep->len;
	return page_keep(rep, ctl_add(rep, key, v), n0, l0, i);
}

static int op_show(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		   struct ctl_msg *rep, char *err)
{
	uint64_t skip = 0;
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	ctl_add(rep, "fabric", fabric_kind(s->fabric));
	ctl_add(rep, "instance", s->instance);
	ctl_addf(rep, "seed", "%llu", (unsigned long long)fabric_seed(s->fabric));
	ctl_addf(rep, "conn_mem", "%llu", (unsigned long long)s->conn_mem);
	ctl_addf(rep, "sessions", "%d", s->nsessions);
	ctl_addf(rep, "nodes", "%d", fabric_nnodes(s->fabric));
	ctl_addf(rep, "chans", "%d", s->nchans_open + s->nchans_closed);
	ctl_addf(rep, "chans_open", "%d", s->nchans_open);
	ctl_addf(rep, "listeners", "%d", s->nlisteners);
	ctl_addf(rep, "pending", "%d", s->npending);

	uint64_t idx = 0;
	int nn = fabric_nnodes(s->fabric);
	struct dl *p = s->chans.next;
	for (;; idx++) {
		const struct fabric_node *node = NULL;
		const struct channel *ch = NULL;
		if (idx < (uint64_t)nn) {
			node = fabric_node(s->fabric, (int)idx);
		} else {
			if (p == &s->chans)
				break;
			ch = dl_entry(p, struct channel, link);
			p = p->next;
		}
		if (idx < skip)
			continue;
		int n0 = rep->n;
		size_t l0 = rep->len;
		if (!page_keep(rep, node ? add_node(s, rep, node) : add_chan(rep, ch), n0, l0, idx))
			break;
	}
	return 0;
}

/* A histogram's snapshot: its buckets, and what they hold in all. */
static uint64_t hist_load(const _Atomic uint64_t *h, int nb, uint64_t *out)
{
	uint64_t n = 0;
	for (int b = 0; b < nb; b++)
		n += out[b] = atomic_load(&h[b]);
	return n;
}

/* Its non-empty buckets, "B:COUNT/B:COUNT/...". Each takes at most 2 + 1 + 20 + 1 bytes. */
static void hist_text(const uint64_t *h, int nb, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = 0;
	for (int b = 0; b < nb; b++)
		if (h[b] && len < cap)
			len += (size_t)snprintf(out + len, cap - len, "%s%d:%llu", len ? "/" : "", b,
						(unsigned long long)h[b]);
}
_Static_assert(FST_QUEUE_BUCKETS * 24 <= CTL_VALUE_MAX && FST_LATE_BUCKETS * 24 <= CTL_VALUE_MAX,
	       "a full histogram fits one value");

/* One link's record: link.<i> (about 600 bytes at most), link.<i>.queue_hist, .late_hist. */
static int add_link_stats(struct ctl_msg *rep, struct fst_link *l, uint64_t i)
{
	char key[CTL_KEY_MAX + 1], v[CTL_VALUE_MAX + 1];
	uint64_t qh[FST_QUEUE_BUCKETS], lh[FST_LATE_BUCKETS];
	uint64_t qn = hist_load(l->queue_hist, FST_QUEUE_BUCKETS, qh);
	uint64_t ln = hist_load(l->late_hist, FST_LATE_BUCKETS, lh);
	/* after the buckets: a writer raises the maximum before it counts the value */
	uint64_t qmax = atomic_load(&l->queue_max_ns), lmax = atomic_load(&l->late_max_ns);
	int rc = 0;
	snprintf(key, sizeof(key), "link.%llu", (unsigned long long)i);
	snprintf(v, sizeof(v),
		 "msgs=%llu,bytes=%llu,packets=%llu,lost=%llu,timeouts=%llu,duplicates=%llu,"
		 "reordered=%llu,corrupted=%llu,failed=%llu,queue_ns=%llu,queue_max_ns=%llu,"
		 "queue_p50_le_ns=%llu,queue_p99_le_ns=%llu,late_n=%llu,late_sum_ns=%llu,"
		 "late_max_ns=%llu,late_p50_le_ns=%llu,late_p99_le_ns=%llu,early=%llu",
		 (unsigned long long)atomic_load(&l->msgs), (unsigned long long)atomic_load(&l->bytes),
		 (unsigned long long)atomic_load(&l->packets), (unsigned long long)atomic_load(&l->lost),
		 (unsigned long long)atomic_load(&l->timeouts),
		 (unsigned long long)atomic_load(&l->duplicates),
		 (unsigned long long)atomic_load(&l->reordered),
		 (unsigned long long)atomic_load(&l->corrupted),
		 (unsigned long long)atomic_load(&l->failed),
		 (unsigned long long)atomic_load(&l->queue_ns),
		 (unsigned long long)qmax, (unsigned long long)fst_hist_le(qh, FST_QUEUE_BUCKETS, qn, 50, qmax),
		 (unsigned long long)fst_hist_le(qh, FST_QUEUE_BUCKETS, qn, 99, qmax),
		 (unsigned long long)atomic_load(&l->late_n),
		 (unsigned long long)atomic_load(&l->late_sum_ns),
		 (unsigned long long)lmax, (unsigned long long)fst_hist_le(lh, FST_LATE_BUCKETS, ln, 50, lmax),
		 (unsigned long long)fst_hist_le(lh, FST_LATE_BUCKETS, ln, 99, lmax),
		 (unsigned long long)atomic_load(&l->early));
	rc |= ctl_add(rep, key, v);
	snprintf(key, sizeof(key), "link.%llu.queue_hist", (unsigned long long)i);
	hist_text(qh, FST_QUEUE_BUCKETS, v, sizeof(v));
	rc |= ctl_add(rep, key, v);
	snprintf(key, sizeof(key), "link.%llu.late_hist", (unsigned long long)i);
	hist_text(lh, FST_LATE_BUCKETS, v, sizeof(v));
	rc |= ctl_add(rep, key, v);
	return rc;
}

/*
 * Per directed link, from the shared fabric state: what crossed it, how long messages
 * queued for it, what the impairments did, and the fidelity monitor (how late the real
 * deliveries were against the model). One record of three lines per link (docs/
 * control-protocol.md); paged with skip/next like show. The ideal fabric has no links.
 */
static int op_stats(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		    struct ctl_msg *rep, char *err)
{
	uint64_t skip = 0;
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	struct fst_shm *fs = s->fab_base;
	uint32_t n = fs ? fs->nlinks : 0;
	ctl_addf(rep, "links", "%u", n);
	ctl_addf(rep, "queue_buckets", "%d", FST_QUEUE_BUCKETS);
	ctl_addf(rep, "late_buckets", "%d", FST_LATE_BUCKETS);
	if (fs)
		ctl_addf(rep, "lock_steals", "%llu", (unsigned long long)atomic_load(&fs->lock_steals));
	for (uint64_t i = skip; i < n; i++) {
		struct fst_link *l = (struct fst_link *)((uint8_t *)fs + fs->state_off) + i;
		int n0 = rep->n;
		size_t l0 = rep->len;
		if (!page_keep(rep, add_link_stats(rep, l, i), n0, l0, i))
			break;
	}
	return 0;
}

/*
 * The sampler's ring (sim/series.h), one line per sample and SRV_SERIES_LINKS links:
 * s.<seq>.<chunk>=<t_ns>,<dt_ns>,<bytes of each link chunk x SRV_SERIES_LINKS ...>, t_ns in
 * fabric time. Paged by lines: line p is sample p / chunks, chunk p % chunks; ask again
 * with skip=<next>. A request without skip first samples what moved since the last
 * sample, so the reply is up to date.
 */
#define SRV_SERIES_LINKS 40
_Static_assert((SRV_SERIES_LINKS + 2) * 21 <= CTL_VALUE_MAX, "a line of op=series fits a value");
static int op_series(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		     struct ctl_msg *rep, char *err)
{
	uint64_t skip = 0;
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	if (!s->series) {
		snprintf(err, SRV_ERR_LEN, "%s",
			 s->fab_base ? "this daemon does not sample its links (simfabricd "
				       "--sample-ms 0)"
				     : "the ideal fabric has no links to sample (a scenario's has)");
		return -EOPNOTSUPP;
	}
	int64_t now = now_ns();
	if (!ctl_get(req, "skip"))
		sampler_poll(s, now, true);
	const struct fst_shm *fs = s->fab_base;
	uint32_t nl = fs->nlinks;
	uint64_t chunks = nl ? (nl + SRV_SERIES_LINKS - 1) / SRV_SERIES_LINKS : 1;
	uint64_t from = series_first(s->series) * chunks, end = series_taken(s->series) * chunks;
	if (skip > end) {
		snprintf(err, SRV_ERR_LEN, "skip=%llu is beyond the %llu line(s) of the %llu "
					   "sample(s) taken",
			 (unsigned long long)skip, (unsigned long long)end,
			 (unsigned long long)series_taken(s->series));
		return -EINVAL;
	}
	ctl_addf(rep, "period_ns", "%lld", (long long)s->ser_period_ns);
	ctl_addf(rep, "links", "%u", nl);
	ctl_addf(rep, "links_per_line", "%d", SRV_SERIES_LINKS);
	ctl_addf(rep, "capacity", "%u", series_capacity(s->series));
	ctl_addf(rep, "taken", "%llu", (unsigned long long)series_taken(s->series));
	ctl_addf(rep, "first", "%llu", (unsigned long long)series_first(s->series));
	ctl_addf(rep, "epoch_ns", "%lld", (long long)fs->epoch_ns);
	ctl_addf(rep, "now_ns", "%lld", (long long)(now - fs->epoch_ns));
	for (uint64_t p = skip < from ? from : skip; p < end; p++) {
		struct series_sample sm;
		char k[CTL_KEY_MAX + 1], v[CTL_VALUE_MAX + 1];
		uint64_t seq = p / chunks, c0 = p % chunks * SRV_SERIES_LINKS;
		if (series_get(s->series, seq, &sm))
			break; /* cannot happen: [from, end) is what the ring holds */
		size_t len = (size_t)snprintf(v, sizeof(v), "%lld,%lld", (long long)sm.t_ns,
					      (long long)sm.dt_ns);
		for (uint64_t i = c0; i < nl && i < c0 + SRV_SERIES_LINKS; i++)
			len += (size_t)snprintf(v + len, sizeof(v) - len, ",%llu",
						(unsigned long long)sm.bytes[i]);
		snprintf(k, sizeof(k), "s.%llu.%llu", (unsigned long long)seq,
			 (unsigned long long)(p % chunks));
		if (!add_paged(rep, k, v, p))
			break;
	}
	return 0;
}

/*
 * The resolved fabric as JSON (fabric_json), cut into json.<i> values of
 * SRV_JSON_CHUNK bytes, SRV_JSON_PAGE of them per reply; next=<i> says where
 * the next page starts (ask again with skip=<i>). A request without skip
 * takes a fresh snapshot of the ideal fabric (its nodes come and go); later
 * pages read the same snapshot. An explicit fabric's JSON never changes.
 */
#define SRV_JSON_CHUNK CTL_VALUE_MAX
#define SRV_JSON_PAGE 60
static int op_fabric(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		     struct ctl_msg *rep, char *err)
{
	uint64_t skip = 0;
	const char *json;
	size_t len;
	char k[CTL_KEY_MAX + 1], v[SRV_JSON_CHUNK + 1];
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	if (fabric_json(s->fabric, skip == 0 && fabric_is_ideal(s->fabric), &json, &len)) {
		snprintf(err, SRV_ERR_LEN, "out of memory writing the fabric's JSON");
		return -ENOMEM;
	}
	uint64_t chunks = (len + SRV_JSON_CHUNK - 1) / SRV_JSON_CHUNK;
	if (skip > chunks) {
		snprintf(err, SRV_ERR_LEN, "skip=%llu is beyond the %llu chunk(s)",
			 (unsigned long long)skip, (unsigned long long)chunks);
		return -EINVAL;
	}
	ctl_addf(rep, "bytes", "%zu", len);
	ctl_addf(rep, "chunks", "%llu", (unsigned long long)chunks);
	for (uint64_t i = skip; i < chunks && i < skip + SRV_JSON_PAGE; i++) {
		size_t off = (size_t)i * SRV_JSON_CHUNK;
		size_t n = len - off < SRV_JSON_CHUNK ? len - off : SRV_JSON_CHUNK;
		memcpy(v, json + off, n);
		v[n] = 0;
		snprintf(k, sizeof(k), "json.%llu", (unsigned long long)i);
		if (ctl_add(rep, k, v)) {
			snprintf(err, SRV_ERR_LEN, "the fabric's JSON has a byte the protocol "
						   "cannot carry");
			return -EINVAL;
		}
	}
	if (skip + SRV_JSON_PAGE < chunks)
		ctl_addf(rep, "next", "%llu", (unsigned long long)(skip + SRV_JSON_PAGE));
	return 0;
}

/* Who answers: a client that started a daemon can tell whether this is the one (simfabric up). */
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
	if (!s->faults) {
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
	const struct fst_shm *fs = s->fab_base;
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
		if ((int)faultd_count(s->faults) + plan->n > FAULT_MAX) {
			snprintf(err, SRV_ERR_LEN, "the fabric has room for %d more fault(s); this "
						   "spec has %d",
				 FAULT_MAX - (int)faultd_count(s->faults), plan->n);
			fault_plan_free(plan);
			return -ENOSPC;
		}
		for (int i = 0; i < plan->n; i++) {
			uint32_t id;
			plan->f[i].line = 0;
			rc = faultd_apply(s->faults, &plan->f[i], eff, &id, err, SRV_ERR_LEN);
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
		faultd_tick(s->faults, now);
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
		int rc = faultd_clear(s->faults, strcmp(ids, "all") ? (int64_t)id : -1, eff, &n, err,
				      SRV_ERR_LEN);
		if (rc)
			return rc;
		ctl_addf(rep, "cleared", "%d", n);
		ctl_addf(rep, "effective_ns", "%lld", (long long)(eff - fs->epoch_ns));
		return 0;
	}
	if (!strcmp(verb, "list")) {
		if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
			return -EINVAL;
		uint32_t n = faultd_count(s->faults);
		ctl_addf(rep, "faults", "%u", n);
		ctl_addf(rep, "now_ns", "%lld", (long long)(now - fs->epoch_ns));
		ctl_addf(rep, "epoch_ns", "%lld", (long long)fs->epoch_ns);
		for (uint64_t i = skip; i < n; i++) {
			char k[24], v[CTL_VALUE_MAX + 1];
			if (faultd_describe(s->faults, (uint32_t)i, now, v, sizeof(v)))
				continue;
			snprintf(k, sizeof(k), "fault.%llu", (unsigned long long)i);
			if (!add_paged(rep, k, v, i))
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
	{"hello", op_hello, KEYS("node", "pid", "version", "client"), KEYS(NULL), false},
	{"listen", op_listen, KEYS("listener", "nic"), KEYS(NULL), false},
	{"connect", op_connect, KEYS("listener", "nic"), KEYS(NULL), false},
	{"close", op_close, KEYS("chan", "side"), KEYS(NULL), false},
	{"show", op_show, KEYS(NULL), KEYS("skip"), true},
	{"fabric", op_fabric, KEYS(NULL), KEYS("skip"), true},
	{"stats", op_stats, KEYS(NULL), KEYS("skip"), true},
	{"series", op_series, KEYS(NULL), KEYS("skip"), true},
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
	cfg->outq_max = SRV_OUTQ_MAX;
	cfg->sample_ms = SERIES_DEFAULT_PERIOD_MS;
	cfg->series_samples = SERIES_DEFAULT_SAMPLES;
}

/* The shared fabric state of a modelled fabric: every link's parameters and reservation state. */
/* node_kill: SIGKILL every live session of node (their processes are the ranks). */
static int kill_node(void *ctx, int node, const char *why)
{
	struct srv *s = ctx;
	int n = 0;
	struct dl *p;
	for (p = s->sessions.next; p != &s->sessions; p = p->next) {
		struct session *se = dl_entry(p, struct session, link);
		if (!se->node || se->node->id != node || se->pid <= 0)
			continue;
		if (kill(se->pid, SIGKILL) == 0) {
			log_warn("%s: SIGKILL pid %d (node %s)", why, (int)se->pid, se->node->name);
			n++;
		} else {
			log_warn("%s: cannot SIGKILL pid %d (node %s): %s", why, (int)se->pid,
				 se->node->name, strerror(errno));
		}
	}
	if (!n)
		log_warn("%s: no process of that node is connected to the daemon", why);
	return n;
}

/* reset: every open channel from node src to node dst fails on both ends. */
static int reset_conns(void *ctx, int src, int dst, uint32_t fid, const char *why)
{
	struct srv *s = ctx;
	int n = 0;
	struct dl *p;
	for (p = s->chans.next; p != &s->chans; p = p->next) {
		struct channel *ch = dl_entry(p, struct channel, link);
		const struct fabric_node *a = ch->end[END_TX].node, *b = ch->end[END_RX].node;
		if (!ch->shm || !a || !b || !fault_conn_match(src, dst, a->id, b->id))
			continue;
		chan_mark_reset(ch->shm, fid);
		log_warn("%s: chan 0x%llx (%s -> %s) reset", why, (unsigned long long)ch->id, a->name,
			 b->name);
		n++;
	}
	return n;
}

static int fabric_state_create(struct srv *s, char *err, size_t errlen)
{
	uint32_t nlinks = (uint32_t)fabric_nlinks(s->fabric);
	uint64_t entries = 0;
	struct model_link *links = calloc(nlinks ? nlinks : 1, sizeof(*links));
	if (!links) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < nlinks; i++) {
		links[i] = fabric_link(s->fabric, i)->model;
		if (links[i].jitter.dist == MODEL_DIST_TABLE)
			entries += (uint64_t)links[i].jitter.ntable;
	}
	const char *step = "sizing";
	size_t len = fst_bytes(nlinks, (uint32_t)fabric_nnics(s->fabric), entries);
	int fd = -1, rc = -EINVAL;
	void *base = MAP_FAILED;
	if (!len)
		goto fail;
	step = "memfd_create";
	fd = memfd_create("simfabric-fabric", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)len) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail_errno;
	step = "mmap";
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		goto fail_errno;
	step = "fst_format";
	rc = fst_format(base, len, nlinks, links, (uint32_t)fabric_nnics(s->fabric),
			fabric_seed(s->fabric), now_ns());
	if (rc)
		goto fail;
	free(links);
	s->fid_n = calloc(nlinks ? nlinks : 1, sizeof(*s->fid_n));
	s->fid_sum = calloc(nlinks ? nlinks : 1, sizeof(*s->fid_sum));
	s->fid_warned_ns = calloc(nlinks ? nlinks : 1, sizeof(*s->fid_warned_ns));
	const struct faultd_ops fops = {.kill = kill_node, .reset = reset_conns, .ctx = s};
	if (!s->fid_n || !s->fid_sum || !s->fid_warned_ns) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	} else {
		rc = faultd_new(base, s->fabric, fabric_faults(s->fabric), &fops, &s->faults, err,
				errlen);
	}
	if (rc) {
		free(s->fid_n);
		free(s->fid_sum);
		free(s->fid_warned_ns);
		s->fid_n = s->fid_sum = NULL;
		s->fid_warned_ns = NULL;
		munmap(base, len);
		close(fd);
		return rc;
	}
	s->fid_next_ns = now_ns() + SRV_FIDELITY_PERIOD_NS;
	s->fab_fd = fd;
	s->fab_base = base;
	s->fab_len = len;
	log_info("fabric state: %u directed link(s), %d NIC(s), %zu bytes of shared memory, seed %llu",
		 nlinks, fabric_nnics(s->fabric), len, (unsigned long long)fabric_seed(s->fabric));
	return 0;
fail_errno:
	rc = -errno;
fail:
	snprintf(err, errlen, "cannot create the fabric's shared state (%zu bytes): %s: %s", len,
		 step, strerror(-rc));
	free(links);
	if (base != MAP_FAILED)
		munmap(base, len);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The sampler's ring, for a modelled fabric with sampling on (see sampler_poll). */
static int sampler_create(struct srv *s, char *err, size_t errlen)
{
	const struct srv_config *cfg = &s->cfg;
	if (cfg->sample_ms <= 0)
		return 0;
	uint32_t nlinks = (uint32_t)fabric_nlinks(s->fabric);
	if (cfg->sample_ms > SERIES_MAX_PERIOD_MS) {
		snprintf(err, errlen, "sample_ms: %d is not in 0..%d", cfg->sample_ms,
			 SERIES_MAX_PERIOD_MS);
		return -EINVAL;
	}
	int rc = series_new(nlinks, cfg->series_samples, &s->series);
	if (rc == -EINVAL) {
		snprintf(err, errlen, "series_samples: %u is not in 1..%u", cfg->series_samples,
			 SERIES_MAX_SAMPLES);
		return rc;
	}
	s->ser_cum = rc ? NULL : calloc(nlinks ? nlinks : 1, sizeof(*s->ser_cum));
	if (!s->ser_cum) {
		snprintf(err, errlen, "out of memory for the link sampler");
		series_free(s->series);
		s->series = NULL;
		return -ENOMEM;
	}
	s->ser_period_ns = (int64_t)cfg->sample_ms * 1000000;
	uint32_t cap = series_capacity(s->series);
	log_info("link sampler: every %d ms while a channel is open, the newest %u sample(s) of %u "
		 "link(s) kept (%zu bytes)%s",
		 cfg->sample_ms, cap, nlinks, series_bytes(s->series),
		 cap < cfg->series_samples ? ", fewer than asked: the ring's memory bound" : "");
	return 0;
}

int srv_new(const struct srv_config *cfg, const struct srv_ops *ops, struct srv **out, char *err,
	    size_t errlen)
{
	*out = NULL;
	size_t shm = chan_shm_bytes(&cfg->geom);
	if (shm == 0) {
		fabric_free(cfg->use_fabric);
		snprintf(err, errlen, "bad channel geometry: %u slots of %u bytes", cfg->geom.nslots,
			 cfg->geom.slot_bytes);
		return -EINVAL;
	}
	struct srv *s = calloc(1, sizeof(*s));
	if (!s) {
		fabric_free(cfg->use_fabric);
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
	dl_init(&s->chans);
	s->next_chan = 1;
	uint64_t tok = 0;
	if (getrandom(&tok, sizeof(tok), GRND_NONBLOCK) != (ssize_t)sizeof(tok))
		tok = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	snprintf(s->instance, sizeof(s->instance), "%016llx", (unsigned long long)tok);
	s->out = ctl_msg_new();
	s->fab_fd = -1;
	int rc = !s->out		? -ENOMEM
		 : cfg->use_fabric ? (s->fabric = cfg->use_fabric, 0)
				   : fabric_new_ideal(&cfg->fabric, &s->fabric, err, errlen);
	s->cfg.use_fabric = NULL;
	if (!rc && !fabric_is_ideal(s->fabric)) {
		rc = sampler_create(s, err, errlen);
		if (!rc)
			rc = fabric_state_create(s, err, errlen);
		if (rc) {
			series_free(s->series);
			free(s->ser_cum);
			fabric_free(s->fabric);
			s->fabric = NULL;
		}
	}
	if (rc) {
		if (!s->out)
			fabric_free(cfg->use_fabric);
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
	faultd_free(s->faults);
	fabric_free(s->fabric);
	if (s->fab_base)
		munmap(s->fab_base, s->fab_len);
	if (s->fab_fd >= 0)
		close(s->fab_fd);
	free(s->fid_n);
	free(s->fid_sum);
	free(s->fid_warned_ns);
	series_free(s->series);
	free(s->ser_cum);
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
	for (p = s->pending.next; p != &s->pending; p = p->next) {
		const struct srv_conn *c = dl_entry(p, const struct srv_conn, pend_link);
		if (c->pend_deadline < first)
			first = c->pend_deadline;
	}
	if (s->fab_base && s->fid_next_ns < first)
		first = s->fid_next_ns;
	if (s->ser_on && s->ser_next_ns < first)
		first = s->ser_next_ns;
	int64_t fn = faultd_next_ns(s->faults, now_ns());
	if (fn && fn < first)
		first = fn;
	if (first == INT64_MAX)
		return -1;
	int64_t us = (first - now_ns() + 999) / 1000;
	return us < 1 ? 1 : us;
}

/* An end of a link, for messages: "node3-nic0" or "sw0". */
static const char *ep_name(const struct fabric *f, const struct fabric_ep *e)
{
	if (e->kind == FABRIC_EP_SWITCH) {
		const struct fabric_switch *sw = fabric_switch(f, e->id);
		return sw ? sw->name : "?";
	}
	const struct fabric_node *n = fabric_node(f, e->id);
	const struct fabric_nic *nic = n ? fabric_nic(n, e->nic) : NULL;
	return nic ? nic->name : "?";
}

/*
 * The fidelity monitor, once a second: a link whose recent deliveries came
 * well after the model's time is faster than this machine can emulate (one
 * core copies 10-25 GB/s; ranks may share cores). Say so loudly, at most once
 * a minute per link: the run is slower than the scenario claims.
 */
static void fidelity_check(struct srv *s, int64_t now)
{
	if (!s->fab_base || now < s->fid_next_ns)
		return;
	s->fid_next_ns = now + SRV_FIDELITY_PERIOD_NS;
	const struct fst_shm *fs = s->fab_base;
	struct fst_link *l = (struct fst_link *)((uint8_t *)s->fab_base + fs->state_off);
	for (uint32_t i = 0; i < fs->nlinks; i++) {
		uint64_t n = atomic_load(&l[i].late_n), sum = atomic_load(&l[i].late_sum_ns);
		uint64_t dn = n - s->fid_n[i], ds = sum - s->fid_sum[i];
		s->fid_n[i] = n;
		s->fid_sum[i] = sum;
		if (dn < SRV_FIDELITY_MIN_MSGS || ds / dn < SRV_FIDELITY_LATE_NS ||
		    (s->fid_warned_ns[i] && now - s->fid_warned_ns[i] < 60 * 1000000000LL))
			continue;
		s->fid_warned_ns[i] = now;
		const struct fabric_link *fl = fabric_link(s->fabric, i);
		log_warn("fidelity: link %u (%s -> %s): %llu deliveries in the last second completed "
			 "%.1f us after the model's time on average (max so far %.1f us): this machine "
			 "cannot emulate the fabric at this speed, so the run is slower than the scenario "
			 "says (per-link figures: op=stats)",
			 i, fl ? ep_name(s->fabric, &fl->from) : "?", fl ? ep_name(s->fabric, &fl->to) : "?",
			 (unsigned long long)dn, (double)ds / (double)dn / 1000.0,
			 (double)atomic_load(&l[i].late_max_ns) / 1000.0);
	}
}

void srv_tick(struct srv *s)
{
	int64_t now = now_ns();
	sampler_poll(s, now, false);
	fidelity_check(s, now);
	faultd_tick(s->faults, now);
	struct dl *p, *t;
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

/* ---- the listening socket ------------------------------------------------ */

static int check_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(dir, &st) < 0) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "socket directory %s: %s", dir, strerror(errno));
			return -errno;
		}
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create socket directory %s: %s", dir,
				 strerror(errno));
			return -errno;
		}
	}
	/* The clients' rule too (lstat: a symlinked directory can be swapped under us). */
	return ctl_check_dir(dir, err, errlen);
}

/* Hold PATH.lock, so two daemons never both decide a socket is stale. */
static int take_lock(struct srv_sock *sk, char *err, size_t errlen)
{
	for (int tries = 0; tries < 5; tries++) {
		int fd = open(sk->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			snprintf(err, errlen, "cannot open lock file %s: %s", sk->lock_path,
				 strerror(errno));
			return -errno;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			close(fd);
			if (e == EWOULDBLOCK) {
				snprintf(err, errlen,
					 "simfabricd is already running at %s (%s is locked)",
					 sk->path, sk->lock_path);
				return -EADDRINUSE;
			}
			snprintf(err, errlen, "cannot lock %s: %s", sk->lock_path, strerror(e));
			return -e;
		}
		/* The previous owner may have unlinked it between our open and flock. */
		struct stat a, b;
		if (fstat(fd, &a) == 0 && stat(sk->lock_path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			sk->lock_fd = fd;
			return 0;
		}
		close(fd);
	}
	snprintf(err, errlen, "cannot lock %s: it keeps being replaced", sk->lock_path);
	return -EAGAIN;
}

int srv_sock_open(struct srv_sock *sk, const char *path, char *err, size_t errlen)
{
	int rc;
	sk->fd = sk->lock_fd = -1;
	sk->path[0] = sk->lock_path[0] = 0;
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(sk->path)) {
		snprintf(err, errlen, "socket path '%s' is %zu bytes; it must be 1..%zu", path, len,
			 sizeof(sk->path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sk->path, path, len + 1);
	snprintf(sk->lock_path, sizeof(sk->lock_path), "%s.lock", path);

	char dir[sizeof(sk->path)];
	ctl_socket_dir(path, dir, sizeof(dir));
	if ((rc = check_dir(dir, err, errlen)) || (rc = take_lock(sk, err, errlen)))
		goto fail;

	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			rc = -EEXIST;
			goto fail;
		}
		int fd = ctl_connect(path);
		if (fd >= 0) {
			close(fd);
			snprintf(err, errlen, "simfabricd is already running at %s", path);
			rc = -EADDRINUSE;
			goto fail;
		}
		if (fd != -ECONNREFUSED && fd != -ENOENT) {
			snprintf(err, errlen, "cannot check the existing socket %s: %s", path,
				 strerror(-fd));
			rc = fd;
			goto fail;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			snprintf(err, errlen, "cannot remove the stale socket %s: %s", path,
				 strerror(errno));
			rc = -errno;
			goto fail;
		}
		log_info("removed a stale socket at %s", path);
	}

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		rc = -errno;
		goto fail;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, len + 1);
	mode_t old = umask(077);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (b < 0) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(e));
		close(fd);
		rc = -e;
		goto fail;
	}
	if (listen(fd, SOMAXCONN) < 0) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		close(fd);
		unlink(path);
		rc = -e;
		goto fail;
	}
	sk->fd = fd;
	return 0;
fail:
	srv_sock_close(sk);
	return rc;
}

void srv_sock_close(struct srv_sock *sk)
{
	if (sk->fd >= 0) {
		unlink(sk->path);
		close(sk->fd);
		sk->fd = -1;
	}
	if (sk->lock_fd >= 0) {
		unlink(sk->lock_path);
		close(sk->lock_fd);
		sk->lock_fd = -1;
	}
}
