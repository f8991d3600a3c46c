/* SPDX-License-Identifier: MIT */
/*
 * srv_look.c - the control ops that only look: show (nodes and channels),
 * stats (per-link counters from the shared fabric state), series (the link
 * sampler's ring) and fabric (the resolved fabric's JSON). Each is paged: a
 * reply carries next=<i> when more is left, and the client asks again with
 * skip=<i>. They change nothing; the hub, srv.c, dispatches them from its op
 * table. The replies are described in docs/control-protocol.md.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "sim/core/fstate.h"
#include "sim/core/version.h"
#include "sim/scn/scenario.h"
#include "sim/series.h"
#include "sim/srv_int.h"

/* What node's sessions said of the GPU data path: "on", "off", "on,off" or "" (none said). */
static void node_gpu(struct srv *s, const struct fabric_node *n, char *buf, size_t cap)
{
	int on = 0, off = 0;
	struct dl *p, *t;
	dl_each_safe(p, t, &s->sessions)
	{
		struct session *se = dl_entry(p, struct session, link);
		on |= se->node == n && !strcmp(se->gpu, "on");
		off |= se->node == n && !strcmp(se->gpu, "off");
	}
	snprintf(buf, cap, "%s%s%s", on ? "on" : "", on && off ? "," : "", off ? "off" : "");
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
	char gpu[8];
	node_gpu(s, n, gpu, sizeof(gpu));
	if (gpu[0]) {
		snprintf(k, sizeof(k), "node.%d.gpu", n->id);
		rc |= ctl_add(m, k, gpu);
	}
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
	/* where a hung connection stands: receives posted, sends posted, slots published and
	 * consumed (one per one-sided message) */
	snprintf(k, sizeof(k), "chan.0x%llx.ring", id);
	rc |= ctl_addf(m, k, "recvs=%llu sends=%llu slots=%llu consumed=%llu",
		       (unsigned long long)st.rx_cts, (unsigned long long)st.tx_msgs,
		       (unsigned long long)st.tx_head, (unsigned long long)st.rx_head);
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
bool srv_add_paged(struct ctl_msg *rep, const char *key, const char *v, uint64_t i)
{
	int n0 = rep->n;
	size_t l0 = rep->len;
	return page_keep(rep, ctl_add(rep, key, v), n0, l0, i);
}

int srv_op_show(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		char *err)
{
	uint64_t skip = 0;
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	ctl_add(rep, "fabric", fabric_kind(s->fabric));
	ctl_add(rep, "instance", s->instance);
	ctl_add(rep, "version", SF_VERSION);
	ctl_addf(rep, "seed", "%llu", (unsigned long long)fabric_seed(s->fabric));
	ctl_addf(rep, "conn_mem", "%llu", (unsigned long long)s->conn_mem);
	ctl_addf(rep, "sessions", "%d", s->nsessions);
	ctl_addf(rep, "nodes", "%d", fabric_nnodes(s->fabric));
	ctl_addf(rep, "chans", "%d", s->nchans_open + s->nchans_closed);
	ctl_addf(rep, "chans_open", "%d", s->nchans_open);
	ctl_addf(rep, "listeners", "%d", s->nlisteners);
	ctl_addf(rep, "pending", "%d", s->npending);
	if (s->clock.checks) { /* op=clock: this host's clock against host 0's */
		ctl_addf(rep, "clock_offset_ns", "%lld", (long long)s->clock.offset_ns);
		ctl_addf(rep, "clock_rtt_ns", "%llu", (unsigned long long)s->clock.rtt_ns);
		ctl_addf(rep, "clock_moved_ns", "%lld",
			 (long long)(s->clock.offset_ns - s->clock.first_ns));
		ctl_addf(rep, "clock_checks", "%d", s->clock.checks);
		ctl_addf(rep, "clock_age_ms", "%lld",
			 (long long)((now_ns() - s->clock.at_ns) / 1000000));
	}

	uint64_t idx = 0;
	int nn = fabric_node_slots(s->fabric);
	struct dl *p = s->chans.next;
	for (;; idx++) {
		const struct fabric_node *node = NULL;
		const struct channel *ch = NULL;
		if (idx < (uint64_t)nn) {
			node = fabric_node_at(s->fabric, (int)idx);
			if (!node) /* forgotten: its slot keeps the paging's indices */
				continue;
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
			len += (size_t)snprintf(out + len, cap - len, "%s%d:%llu", len ? "/" : "",
						b, (unsigned long long)h[b]);
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
		 (unsigned long long)atomic_load(&l->msgs),
		 (unsigned long long)atomic_load(&l->bytes),
		 (unsigned long long)atomic_load(&l->packets),
		 (unsigned long long)atomic_load(&l->lost),
		 (unsigned long long)atomic_load(&l->timeouts),
		 (unsigned long long)atomic_load(&l->duplicates),
		 (unsigned long long)atomic_load(&l->reordered),
		 (unsigned long long)atomic_load(&l->corrupted),
		 (unsigned long long)atomic_load(&l->failed),
		 (unsigned long long)atomic_load(&l->queue_ns), (unsigned long long)qmax,
		 (unsigned long long)fst_hist_le(qh, FST_QUEUE_BUCKETS, qn, 50, qmax),
		 (unsigned long long)fst_hist_le(qh, FST_QUEUE_BUCKETS, qn, 99, qmax),
		 (unsigned long long)atomic_load(&l->late_n),
		 (unsigned long long)atomic_load(&l->late_sum_ns), (unsigned long long)lmax,
		 (unsigned long long)fst_hist_le(lh, FST_LATE_BUCKETS, ln, 50, lmax),
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
int srv_op_stats(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		 char *err)
{
	uint64_t skip = 0;
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	struct fst_shm *fs = fabmon_shm(s->mon);
	uint32_t n = fs ? fs->nlinks : 0;
	ctl_addf(rep, "links", "%u", n);
	ctl_addf(rep, "queue_buckets", "%d", FST_QUEUE_BUCKETS);
	ctl_addf(rep, "late_buckets", "%d", FST_LATE_BUCKETS);
	if (fs)
		ctl_addf(rep, "lock_steals", "%llu",
			 (unsigned long long)atomic_load(&fs->lock_steals));
	uint64_t i;
	for (i = skip; i < n; i++) {
		struct fst_link *l = (struct fst_link *)((uint8_t *)fs + fs->state_off) + i;
		int n0 = rep->n;
		size_t l0 = rep->len;
		if (!page_keep(rep, add_link_stats(rep, l, i), n0, l0, i))
			return 0;
	}
	/* then the deliveries here from each other host of a run: records n + h, paged alike */
	for (i = i > n ? i : n; fs && i < (uint64_t)n + FST_MAX_HOSTS; i++) {
		const struct fst_xhost *x = fst_xhost(fs, (uint32_t)(i - n));
		uint64_t xn = atomic_load(&x->n);
		char k[32], v[96];
		if (!xn)
			continue;
		snprintf(k, sizeof(k), "from_host.%llu", (unsigned long long)(i - n));
		snprintf(v, sizeof(v), "n=%llu,late_sum_ns=%llu,late_max_ns=%llu",
			 (unsigned long long)xn, (unsigned long long)atomic_load(&x->late_sum_ns),
			 (unsigned long long)atomic_load(&x->late_max_ns));
		if (!srv_add_paged(rep, k, v, i))
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
int srv_op_series(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err)
{
	uint64_t skip = 0;
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	struct series *ser = fabmon_series(s->mon);
	if (!ser) {
		snprintf(err, SRV_ERR_LEN, "%s",
			 s->mon ? "this daemon does not sample its links (simfabricd "
				  "--sample-ms 0)"
				: "the ideal fabric has no links to sample (a scenario's has)");
		return -EOPNOTSUPP;
	}
	int64_t now = now_ns();
	if (!ctl_get(req, "skip"))
		fabmon_sample_now(s->mon, now, s->nchans_open);
	const struct fst_shm *fs = fabmon_shm(s->mon);
	uint32_t nl = fs->nlinks;
	uint64_t chunks = nl ? (nl + SRV_SERIES_LINKS - 1) / SRV_SERIES_LINKS : 1;
	uint64_t from = series_first(ser) * chunks, end = series_taken(ser) * chunks;
	if (skip > end) {
		snprintf(err, SRV_ERR_LEN,
			 "skip=%llu is beyond the %llu line(s) of the %llu "
			 "sample(s) taken",
			 (unsigned long long)skip, (unsigned long long)end,
			 (unsigned long long)series_taken(ser));
		return -EINVAL;
	}
	ctl_addf(rep, "period_ns", "%lld", (long long)fabmon_period_ns(s->mon));
	ctl_addf(rep, "links", "%u", nl);
	ctl_addf(rep, "links_per_line", "%d", SRV_SERIES_LINKS);
	ctl_addf(rep, "capacity", "%u", series_capacity(ser));
	ctl_addf(rep, "taken", "%llu", (unsigned long long)series_taken(ser));
	ctl_addf(rep, "first", "%llu", (unsigned long long)series_first(ser));
	ctl_addf(rep, "epoch_ns", "%lld", (long long)fs->epoch_ns);
	ctl_addf(rep, "now_ns", "%lld", (long long)(now - fs->epoch_ns));
	for (uint64_t p = skip < from ? from : skip; p < end; p++) {
		struct series_sample sm;
		char k[CTL_KEY_MAX + 1], v[CTL_VALUE_MAX + 1];
		uint64_t seq = p / chunks, c0 = p % chunks * SRV_SERIES_LINKS;
		if (series_get(ser, seq, &sm))
			break; /* cannot happen: [from, end) is what the ring holds */
		size_t len = (size_t)snprintf(v, sizeof(v), "%lld,%lld", (long long)sm.t_ns,
					      (long long)sm.dt_ns);
		for (uint64_t i = c0; i < nl && i < c0 + SRV_SERIES_LINKS; i++)
			len += (size_t)snprintf(v + len, sizeof(v) - len, ",%llu",
						(unsigned long long)sm.bytes[i]);
		snprintf(k, sizeof(k), "s.%llu.%llu", (unsigned long long)seq,
			 (unsigned long long)(p % chunks));
		if (!srv_add_paged(rep, k, v, p))
			break;
	}
	return 0;
}

/*
 * The resolved fabric as JSON (scenario_json), cut into json.<i> values of
 * SRV_JSON_CHUNK bytes, SRV_JSON_PAGE of them per reply; next=<i> says where
 * the next page starts (ask again with skip=<i>). A request without skip
 * takes a fresh snapshot of the ideal fabric (its nodes come and go); later
 * pages read the same snapshot. An explicit fabric's JSON never changes.
 */
#define SRV_JSON_CHUNK CTL_VALUE_MAX
#define SRV_JSON_PAGE 60
int srv_op_fabric(struct srv *s, struct srv_conn *c, const struct ctl_msg *req, struct ctl_msg *rep,
		  char *err)
{
	uint64_t skip = 0;
	const char *json;
	size_t len;
	char k[CTL_KEY_MAX + 1], v[SRV_JSON_CHUNK + 1];
	(void)c;
	if (ctl_get(req, "skip") && get_u64(req, "skip", &skip, err))
		return -EINVAL;
	if (scenario_json(s->scn, skip == 0 && fabric_is_ideal(s->fabric), &json, &len)) {
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
			snprintf(err, SRV_ERR_LEN,
				 "the fabric's JSON has a byte the protocol "
				 "cannot carry");
			return -EINVAL;
		}
	}
	if (skip + SRV_JSON_PAGE < chunks)
		ctl_addf(rep, "next", "%llu", (unsigned long long)(skip + SRV_JSON_PAGE));
	return 0;
}
