/* SPDX-License-Identifier: MIT */
/*
 * srv_int.h - the server's objects (connections, sessions, listeners,
 * channels, struct srv), the small helpers on them, and what the server's
 * leaves offer the hub sim/srv.c: srv_conn.c (connections), srv_reg.c (the
 * registries), srv_session.c (hello, listen, connect, close), srv_fault.c
 * (op=fault, the fault daemon's hands) and srv_look.c (the ops that only
 * look). A leaf calls only the leaves listed after it here, never the hub.
 * Internal to the server; object lifetimes are described at the top of srv.c.
 */
#ifndef SF_SRV_INT_H
#define SF_SRV_INT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "sim/core/chan.h"
#include "sim/core/ctl.h"
#include "sim/dlist.h"
#include "sim/fabmon.h"
#include "sim/srv.h"

#define SRV_TOMBS 4096 /* dropped listener ids remembered */
#define SRV_CLIENT_MAX 32

/* Handler results besides 0 (reply with errno=0) and -errno (error reply). */
#define SRV_DONE 1 /* the handler queued its reply itself, or will later */

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
	bool pend_held;	  /* held by a connect_delay fault until pend_deadline, listener known */
	bool faults_done; /* the connect faults were applied already */
	/* Part of a message received (s->partial, oldest first), since part_since. */
	struct dl part_link;
	int64_t part_since;
	char why[CTL_ERR_LEN + 64]; /* why it closed, for the log */
};

struct session {
	struct dl link;
	uint64_t serial;
	pid_t pid;	/* the socket's (SO_PEERCRED); 0: not visible to this daemon */
	pid_t said_pid; /* the hello's, shown when pid is 0, never signalled */
	uint64_t token; /* in the hello's reply; listen and connect name the session by it */
	const struct fabric_node *node;
	char client[SRV_CLIENT_MAX + 1];
	char gpu[4]; /* the plugin's GPU data path: "on", "off", or "" (not said) */
	bool killed; /* node_kill signalled it: no later signal (a freeze's SIGCONT) may wake it */
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
	struct scenario *scn;  /* owned: the fabric, its faults, job and expect */
	struct fabric *fabric; /* scn's */
	size_t shm_bytes;
	uint64_t conn_mem;
	char instance[17];
	struct dl conns, dead, dirty, sessions, listeners, pending, chans, partial;
	uint64_t refused;    /* connections refused over max_conns */
	int freed_untrimmed; /* connections freed since the heap was last trimmed */
	int nconns, nsessions, nlisteners, npending, nchans_open, nchans_closed;
	uint64_t next_conn, next_serial, next_chan;
	struct tomb tombs[SRV_TOMBS];
	int tomb_pos;
	bool stopping;
	bool nodes_gc;	     /* a session or channel record went: node_gc() may forget nodes */
	struct ctl_msg *out; /* scratch for building replies */
	/* A modelled fabric's daemon side (sim/fabmon.h); NULL on the ideal fabric. */
	struct fabmon *mon;
	/* A modelled fabric over cfg.hosts hosts: where its nodes and links are; else NULL. */
	struct placement *place;
	uint8_t *warned_links; /* by link id: a connection of this host crossed another's link */
	/* Live faults (op=fault verb=apply), by the id of the first fault of each spec: the spec's
	 * text (owned) and its effective time (fabric time), which op=fault verb=list gives, for
	 * the launch agents to apply on the run's other hosts (docs/scale-out.md, section 5). */
	char *live_spec[FAULT_MAX];
	int64_t live_eff[FAULT_MAX];
	/* This host's clock against host 0's, as its launch agent measured it (op=clock): host
	 * 0's clock less this host's, the sample's round trip, when (CLOCK_MONOTONIC ns), how
	 * many checks, and the first check's offset (show reports them). */
	struct {
		int64_t offset_ns, first_ns, at_ns;
		uint64_t rtt_ns;
		int checks;
	} clock;
	char wire[CTL_MSG_MAX];
};

/* ---- small helpers ------------------------------------------------------- */

static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* A value quoted into an error text: at most 64 characters ("..." if cut). */
static inline const char *clip(const char *v, char out[static 72])
{
	size_t n = strlen(v);
	if (n <= 64)
		return v;
	memcpy(out, v, 61);
	memcpy(out + 61, "...", 4);
	return out;
}

static inline void msg_reset(struct ctl_msg *m)
{
	m->n = 0;
	m->len = 0;
	m->fd = -1;
}

static inline const char *chan_state(const struct channel *ch)
{
	if (!ch->shm)
		return "closed";
	if (ch->end[END_TX].st == END_DEAD || ch->end[END_RX].st == END_DEAD)
		return "dead";
	if (ch->end[END_TX].st == END_CLOSED || ch->end[END_RX].st == END_CLOSED)
		return "closing";
	return "open";
}

static inline const char *end_name(int side)
{
	return side == END_TX ? "send" : "recv";
}

static inline int get_u64(const struct ctl_msg *req, const char *key, uint64_t *out, char *err)
{
	char q[72];
	if (ctl_get_u64(req, key, out) == 0)
		return 0;
	snprintf(err, SRV_ERR_LEN, "%s='%s' is not a u64 (decimal, or hex with 0x)", key,
		 clip(ctl_get(req, key), q));
	return -EINVAL;
}

typedef int (*op_fn)(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		     struct ctl_msg *rep, char *err);

/* ---- the ops a process makes (srv_session.c) ------------------------------ */

int srv_op_hello(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err);
int srv_op_listen(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err);
int srv_op_connect(struct srv *s, struct srv_conn *c, const struct ctl_msg *req,
		   struct ctl_msg *rep, char *err);
int srv_op_close(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err);
/* Make the channel for connect c to listener l and hand its two ends out (or answer c why
 * not); a connect_delay fault parks c on s->pending instead. */
void srv_do_connect(struct srv *s, struct srv_conn *c, struct session *se, struct listener *l,
		    int nic);
/* Has this daemon said a fidelity line about link id yet? false the first time (and marks it:
 * one line per link, whatever the cause), true after. */
bool srv_link_warned(struct srv *s, uint32_t id);

/* ---- faults (srv_fault.c) ------------------------------------------------- */

int srv_op_fault(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err);
/* The fault daemon's faultd_ops (sim/faultd.h); ctx is the struct srv. */
int srv_signal_node(void *ctx, int node, int sig, int quiet, const char *why);
int srv_hold_conns(void *ctx, int src, int dst, uint32_t bits, int on, const char *why);
int srv_reset_conns(void *ctx, int src, int dst, uint32_t fid, const char *why);

/* ---- connections (srv_conn.c) --------------------------------------------- */

/* c has output to write: srv_settle() flushes it. */
void srv_mark_dirty(struct srv_conn *c);
/* Ask the host to watch c for reading (rd) and writing (wr). */
void srv_watch(struct srv_conn *c, bool rd, bool wr);
/*
 * Queue msg for c, with fd (owned from here on, or -1) on its first byte.
 * chan/side: the channel end this message hands out (0 if none). Never kills
 * c and never writes: srv_settle() does both, once the current request is done.
 */
void srv_conn_queue(struct srv_conn *c, const struct ctl_msg *msg, int fd, uint64_t chan, int side);
/* Queue an error reply (error=text, errno=e); text is made a valid protocol value. */
void srv_reply_error(struct srv_conn *c, int e, const char *text);
/* Take a waiting connect off s->pending (no-op if it is not waiting). */
void srv_pending_remove(struct srv_conn *c);
/* Mark c dead, end what it stands for; srv_settle() frees it. */
void srv_conn_kill(struct srv_conn *c, const char *why);
/* Stop reading from c, write what is queued (an error reply), then close it. */
void srv_conn_drain(struct srv_conn *c, const char *why);
/* Close a socket we are done with, reading what is unread first (never waits). */
void srv_close_gently(int fd);
/* Free c now: its queue (abandon: the channel ends it hands out go dead), handle, fd. */
void srv_conn_free(struct srv *s, struct srv_conn *c, bool abandon);
/* Write what was queued, then free what was killed. Every entry point ends here. */
void srv_settle(struct srv *s);

/* ---- registries (srv_reg.c) ----------------------------------------------- */

struct channel *srv_chan_find(struct srv *s, uint64_t id);
/* Unmap a channel's shared memory, keeping its final counters; mark: chan_mark_dead's, or 0. */
void srv_chan_unmap(struct channel *ch, char mark);
/* Unmap the channel once neither end is open; its record stays (for show) until srv_chan_trim. */
void srv_chan_maybe_free(struct srv *s, struct channel *ch);
/* Forget the oldest freed records beyond the limit. Only from srv_settle(): nobody holds one. */
void srv_chan_trim(struct srv *s);
/* The ideal fabric forgets the nodes nothing holds. Only from srv_settle(). */
void srv_node_gc(struct srv *s);
/* An end's process is gone (or the end can never be attached): tell the peer in shm. */
void srv_chan_end_gone(struct srv *s, struct channel *ch, int side, const char *why);
/* Make a channel's shared memory. Returns the memfd (the channel keeps only the mapping), or
 * -errno with err. */
int srv_chan_create(struct srv *s, struct channel **out, char *err, size_t errlen);
/* The session of a visible pid (pid > 0), or of a token (not 0). */
struct session *srv_session_find(struct srv *s, pid_t pid, uint64_t token);
bool srv_session_alive(struct srv *s, uint64_t serial);
struct listener *srv_listener_find(struct srv *s, uint64_t id);
struct tomb *srv_tomb_find(struct srv *s, uint64_t id);

/* ---- the ops that only look (srv_look.c) ---------------------------------- */

int srv_op_show(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		char *err);
int srv_op_stats(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err);
int srv_op_series(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err);
/* One line of a paged reply: added, or (it does not fit, with room for the longest trailer)
 * next=<i> instead and false. */
bool srv_add_paged(struct ctl_msg *rep, const char *key, const char *v, uint64_t i);
/* ---- cross-host routes (srv_xroute.c) ------------------------------------------------------ */

int srv_op_xroute(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err);
int srv_op_clock(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err);

int srv_op_fabric(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err);

#endif /* SF_SRV_INT_H */
