/* SPDX-License-Identifier: MIT */
/*
 * srv_reg.c - the server's registries: channels (their shared memory, their
 * ends, the records kept for show), sessions, listeners and their tombstones,
 * and the ideal fabric's nodes nothing holds any more. A leaf under the hub
 * sim/srv.c: it calls nothing of the server.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/core/chan.h"
#include "sim/fabmon.h"
#include "sim/log.h"
#include "sim/shm.h"
#include "sim/srv_int.h"

#define SRV_CLOSED_KEEP 256 /* freed channels still listed by show */

/* ---- channels ------------------------------------------------------------ */

struct channel *srv_chan_find(struct srv *s, uint64_t id)
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

void srv_chan_unmap(struct channel *ch, char mark)
{
	if (!ch->shm)
		return;
	if (mark)
		chan_mark_dead(ch->shm, mark);
	chan_stats(ch->shm, &ch->last);
	munmap(ch->shm, ch->len);
	ch->shm = NULL;
}

/* Unmap the channel once neither end is open; its record stays (for show) until srv_chan_trim. */
void srv_chan_maybe_free(struct srv *s, struct channel *ch)
{
	if (!ch->shm || ch->end[END_TX].st == END_OPEN || ch->end[END_RX].st == END_OPEN)
		return;
	srv_chan_unmap(ch, 0);
	s->nchans_open--;
	s->nchans_closed++;
	log_info("chan 0x%llx freed: %llu msg(s), %llu byte(s) delivered",
		 (unsigned long long)ch->id, (unsigned long long)ch->last.rx_msgs,
		 (unsigned long long)ch->last.rx_bytes);
}

/* Forget the oldest freed records beyond the limit. Only from srv_settle(): nobody holds one. */
void srv_chan_trim(struct srv *s)
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
 * Only from srv_settle(), after something let a node go.
 */
void srv_node_gc(struct srv *s)
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
			log_info("node %s (id %d) forgotten: no session or channel holds it",
				 n->name, n->id);
			fabric_node_forget(s->fabric, n->id);
		}
	}
}

/* An end's process is gone (or the end can never be attached): tell the peer in shm. */
void srv_chan_end_gone(struct srv *s, struct channel *ch, int side, const char *why)
{
	struct chan_end *e = &ch->end[side];
	if (!ch->shm || e->st != END_OPEN)
		return;
	chan_mark_dead(ch->shm, side == END_TX ? 't' : 'r');
	e->st = END_DEAD;
	log_info("chan 0x%llx: %s end (pid %d) dead: %s", (unsigned long long)ch->id,
		 end_name(side), (int)e->pid, why);
	srv_chan_maybe_free(s, ch);
}

/* Make a channel's shared memory. Returns the memfd (the channel keeps only the mapping). */
int srv_chan_create(struct srv *s, struct channel **out, char *err, size_t errlen)
{
	const char *step;
	size_t len = s->shm_bytes;
	void *base;
	struct channel *ch = NULL;
	int fd = shm_sealed("simfabric-chan", len, &base, &step);
	if (fd < 0)
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
struct session *srv_session_find(struct srv *s, pid_t pid, uint64_t token)
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

bool srv_session_alive(struct srv *s, uint64_t serial)
{
	struct dl *p, *t;
	dl_each_safe(p, t, &s->sessions)
	{
		if (dl_entry(p, struct session, link)->serial == serial)
			return true;
	}
	return false;
}

struct listener *srv_listener_find(struct srv *s, uint64_t id)
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

struct tomb *srv_tomb_find(struct srv *s, uint64_t id)
{
	for (int i = 0; i < SRV_TOMBS; i++)
		if (s->tombs[i].used && s->tombs[i].id == id)
			return &s->tombs[i];
	return NULL;
}
