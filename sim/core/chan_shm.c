/* SPDX-License-Identifier: MIT */
/* chan_shm.c - a channel's region: its geometry, and what the daemon does to it (format,
 * route, check, abandon, mark, hold, stats). See chan.h. */
#include "sim/core/chan.h"

#include <errno.h>
#include <string.h>

#include "sim/core/chan_int.h"

size_t chan_shm_bytes(const struct chan_geom *g)
{
	if (!chan_geom_ok(g))
		return 0;
	uint64_t total = chan_data_off(g) + (uint64_t)g->nslots * g->slot_bytes;
	return total > CHAN_MAX_SHM_BYTES ? 0 : (size_t)total;
}

int chan_geom_for(uint64_t mem_bytes, uint32_t slot_bytes, struct chan_geom *out)
{
	if (slot_bytes == 0)
		slot_bytes = CHAN_DEFAULT_SLOT_BYTES;
	uint64_t n = slot_bytes ? mem_bytes / slot_bytes : 0;
	uint32_t p = 1;
	while ((uint64_t)p * 2 <= n && p < 65536)
		p *= 2;
	struct chan_geom g = {.slot_bytes = slot_bytes, .nslots = p};
	if (n < 2 || chan_shm_bytes(&g) == 0)
		return -EINVAL;
	*out = g;
	return 0;
}

int chan_format(void *base, size_t len, const struct chan_geom *g, uint64_t chan_id)
{
	size_t need = chan_shm_bytes(g);
	if (!base || need == 0 || len < need)
		return -EINVAL;
	struct chan_shm *shm = base;
	memset(shm, 0, sizeof(*shm));
	shm->version = CHAN_VERSION;
	shm->slot_bytes = g->slot_bytes;
	shm->nslots = g->nslots;
	shm->chan_id = chan_id;
	shm->total_bytes = need;
	shm->desc_off = chan_desc_off();
	shm->data_off = chan_data_off(g);
	/* Magic last, so a half-formatted region never passes chan_check. */
	atomic_thread_fence(memory_order_release);
	shm->magic = CHAN_MAGIC;
	return 0;
}

int chan_set_route(struct chan_shm *shm, const struct model_path *p, uint32_t src_nic,
		   const struct model_nic *nic, int32_t src_node, int32_t dst_node)
{
	if (!shm || !p || !nic || p->nhops < 0 || p->nhops > MODEL_MAX_HOPS)
		return -EINVAL;
	memset(&shm->route, 0, sizeof(shm->route));
	shm->route.npath = (uint32_t)p->nhops;
	shm->route.switching = (uint32_t)p->switching;
	for (int j = 0; j < p->nhops; j++)
		shm->route.path[j] = p->link_id[j];
	shm->route.src_nic = src_nic;
	shm->route.src_node = src_node;
	shm->route.dst_node = dst_node;
	shm->route.nic = *nic;
	return 0;
}

int chan_check(const void *base, size_t len, struct chan_err *err)
{
	const struct chan_shm *shm = base;
	if (!base || len < sizeof(*shm))
		return fail(err, -EPROTO, "region smaller than the channel header", len,
			    sizeof(*shm));
	if (shm->magic != CHAN_MAGIC)
		return fail(err, -EPROTO, "bad channel magic", shm->magic, CHAN_MAGIC);
	if (shm->version != CHAN_VERSION)
		return fail(err, -EPROTO, "unsupported channel version", shm->version,
			    CHAN_VERSION);
	struct chan_geom g = {.slot_bytes = shm->slot_bytes, .nslots = shm->nslots};
	size_t need = chan_shm_bytes(&g);
	if (need == 0)
		return fail(err, -EPROTO, "bad channel geometry (slot bytes, slots)",
			    shm->slot_bytes, shm->nslots);
	if (shm->total_bytes != need || len < need)
		return fail(err, -EPROTO, "channel size does not match its geometry", len, need);
	if (shm->desc_off != chan_desc_off() || shm->data_off != chan_data_off(&g))
		return fail(err, -EPROTO, "bad channel offsets", shm->desc_off, shm->data_off);
	if (shm->route.npath > MODEL_MAX_HOPS)
		return fail(err, -EPROTO, "bad route length", shm->route.npath, MODEL_MAX_HOPS);
	return 0;
}

void chan_abandon(struct chan_shm *shm, char which, int error)
{
	if (!shm || (which != 't' && which != 'r'))
		return;
	struct chan_side *side = which == 't' ? &shm->tx : &shm->rx;
	SET(&side->error, error);
	uint32_t st = CHAN_ST_INIT;
	atomic_compare_exchange_strong(&side->state, &st, CHAN_ST_FAILED);
}

void chan_mark_dead(struct chan_shm *shm, char which)
{
	if (!shm)
		return;
	if (which == 't')
		REL(&shm->tx_dead, 1);
	else if (which == 'r')
		REL(&shm->rx_dead, 1);
	else if (which == 'd')
		REL(&shm->daemon_gone, 1);
}

void chan_mark_reset(struct chan_shm *shm, uint32_t fault_id)
{
	REL(&shm->reset_fault, fault_id + 1);
}

uint32_t chan_set_hold(struct chan_shm *shm, uint32_t bits, int on)
{
	if (!shm)
		return 0;
	return on ? atomic_fetch_or(&shm->hold, bits) : atomic_fetch_and(&shm->hold, ~bits);
}

void chan_stats(const struct chan_shm *shm, struct chan_stats *out)
{
	/* The counters are single-writer atomics; a torn pair only skews a display. */
	struct chan_shm *s = (struct chan_shm *)shm;
	memset(out, 0, sizeof(*out));
	out->tx_msgs = RLX(&s->tx.msgs);
	out->tx_bytes = RLX(&s->tx.bytes);
	out->rx_msgs = RLX(&s->rx.msgs);
	out->rx_bytes = RLX(&s->rx.bytes);
	out->tx_state = RLX(&s->tx.state);
	out->rx_state = RLX(&s->rx.state);
	out->tx_pid = RLX(&s->tx.pid);
	out->rx_pid = RLX(&s->rx.pid);
	out->tx_error = RLX(&s->tx.error);
	out->rx_error = RLX(&s->rx.error);
	out->tx_head = RLX(&s->tx.head);
	out->rx_head = RLX(&s->rx.head);
	out->rx_cts = RLX(&s->rx.cts);
	out->inflight_slots = out->tx_head - out->rx_head;
}
