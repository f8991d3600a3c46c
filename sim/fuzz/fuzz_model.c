/* SPDX-License-Identifier: MIT */
/*
 * fuzz_model.c - libFuzzer harness for the model core. The input picks a path
 * (0..8 hops, every parameter and impairment), a NIC and a few messages on
 * three connections; whatever the validators accept must then hold up:
 *  - model_message succeeds, never delivers before the uncontended ideal,
 *    keeps every connection in FIFO order, and its busy-until values never go
 *    back;
 *  - a second run from the same state gives the same results (determinism);
 *  - on a path without impairments, model_hop stage by stage (the NIC's host
 *    stage, then every hop) from the same busy-until values gives what
 *    model_message reserved and delivered; every step keeps its stamp in order
 *    and is monotone in its busy-until;
 *  - a loss pattern answers any increasing sequence of queries as a full
 *    enumeration of its runs does, and leaves the same Markov state.
 * Sizes are kept small (64 KiB) so that pathological loss rates stay fast.
 *
 * fuzz-libs: sim/core/model_rand.c
 */
#include "sim/core/model.c"

#include <stdlib.h>

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++) {
		v = v << 8 | (in->n ? *in->p : 0);
		if (in->n)
			in->p++, in->n--;
	}
	return v;
}

/* A probability: mostly 0, sometimes an edge, sometimes anything. */
static uint32_t prob(struct in *in)
{
	switch (take(in, 1) & 7) {
	case 0:
	case 1:
	case 2:
		return 0;
	case 3:
		return MODEL_PROB_ONE;
	case 4:
		return (uint32_t)take(in, 1) << 20;
	default:
		return (uint32_t)take(in, 4);
	}
}

static const uint64_t rates[] = {0, 1000000, 999999937ULL, 100000000000ULL, 192000000000ULL,
				 200000000000ULL, 400000000000ULL, 1000000000000000ULL};
static int64_t table[64];

static void mk_link(struct in *in, struct model_link *l)
{
	memset(l, 0, sizeof(*l));
	uint8_t c = (uint8_t)take(in, 1);
	l->rate_bps = c & 0x80 ? take(in, 8) : rates[c & 7];
	l->latency_ns = (int64_t)take(in, 2);
	l->mtu = (uint32_t)take(in, 2);
	if (c & 0x40)
		l->mtu = 4096;
	l->hdr_bytes = (uint32_t)take(in, 1);
	l->hdr_first_extra = (uint32_t)take(in, 1) & 31;
	l->hdr_last_extra = (uint32_t)take(in, 1) & 7;
	uint8_t j = (uint8_t)take(in, 1);
	l->jitter.dist = (enum model_dist)(j % 7);
	l->jitter.sd_ns = (int64_t)take(in, 3);
	l->jitter.rho = (j & 0x80) ? (double)take(in, 1) / 256 : 0;
	if (l->jitter.dist == MODEL_DIST_TABLE) {
		int n = 1 + (int)(take(in, 1) % 64);
		int64_t v = 0;
		for (int i = 0; i < n; i++)
			table[i] = v += (int64_t)take(in, 1);
		l->jitter.table = table;
		l->jitter.ntable = n;
	}
	l->loss.kind = (enum model_loss_kind)(take(in, 1) % 5);
	for (int i = 0; i < 5; i++)
		l->loss.p[i] = prob(in);
	l->reorder_p = prob(in);
	l->reorder_delay_ns = (int64_t)take(in, 2);
	l->duplicate_p = prob(in);
	l->corrupt_p = prob(in);
}

struct world {
	int64_t host, busy[MODEL_MAX_HOPS];
	struct model_loss_state ls[MODEL_MAX_HOPS];
	struct model_conn conn[3];
};

#define NMSG 8

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_model: %s\n", what);
		abort();
	}
}

/* What a failing case was, for the log. */
static void dump(const struct model_path *p, const struct model_nic *nic, int64_t t, uint64_t bytes,
		 const struct model_msg *m, int64_t ideal)
{
	fprintf(stderr, "path: %d hops, switching %d; nic host %llu b/s o_send %lld o_recv %lld "
			"ack %lld timeout_exp %u retry %u scale %u\n",
		p->nhops, (int)p->switching, (unsigned long long)nic->host_rate_bps,
		(long long)nic->o_send_ns, (long long)nic->o_recv_ns, (long long)nic->ack_proc_ns,
		nic->timeout_exp, nic->retry_count, nic->timeout_scale_ppm);
	for (int j = 0; j < p->nhops; j++) {
		const struct model_link *l = p->hop[j];
		fprintf(stderr, "  hop %d: %llu b/s d %lld mtu %u hdr %u+%u+%u jitter %d/%lld/%g "
				"loss %d [%u %u %u %u %u] reorder %u/%lld dup %u corrupt %u\n",
			j, (unsigned long long)l->rate_bps, (long long)l->latency_ns, l->mtu,
			l->hdr_bytes, l->hdr_first_extra, l->hdr_last_extra, (int)l->jitter.dist,
			(long long)l->jitter.sd_ns, l->jitter.rho, (int)l->loss.kind, l->loss.p[0],
			l->loss.p[1], l->loss.p[2], l->loss.p[3], l->loss.p[4], l->reorder_p,
			(long long)l->reorder_delay_ns, l->duplicate_p, l->corrupt_p);
	}
	fprintf(stderr, "message: t %lld, %llu B: arrive %lld, ideal arrival %lld; %llu packets, "
			"lost %u timeouts %u retx %llu dup %u reordered %u\n",
		(long long)t, (unsigned long long)bytes, (long long)m->arrive_ns,
		(long long)(t + ideal), (unsigned long long)m->packets, m->lost, m->timeouts,
		(unsigned long long)m->retx_packets, m->duplicates, m->reordered);
}

/* The loss pattern of one train, fully enumerated, against a replay answering arbitrary
 * increasing queries; both must leave the same Markov state. */
static void loss_iter_check(struct in *in)
{
	struct model_link l;
	mk_link(in, &l);
	if (model_loss_check(&l.loss, NULL, 0))
		return;
	uint64_t n = 1 + take(in, 2) % 4096;
	struct model_loss_state s0 = {(uint32_t)take(in, 1) % 6, take(in, 2)};
	struct model_loss_state sa = s0, sb = s0, sc = s0;
	struct model_key key = {.seed = take(in, 8), .link = 3, .conn = 1, .msg = 2,
				.packet = take(in, 1)};
	uint64_t attempt = take(in, 1) & 3;
	static uint8_t lost[4096];
	memset(lost, 0, n);
	struct model_loss_iter a, b;
	model_loss_begin(&a, &l.loss, &sa, &key, n, attempt);
	uint64_t from = 0, first = n;
	while (from < n) {
		uint64_t x = model_loss_next(&a, from, 1);
		check(x >= from && x <= n, "next lost out of range");
		if (x >= n)
			break;
		uint64_t y = model_loss_next(&a, x, 0);
		check(y > x && y <= n, "next kept out of range");
		if (first == n)
			first = x;
		for (uint64_t i = x; i < y; i++)
			lost[i] = 1;
		from = y;
	}
	model_loss_end(&a);
	if (attempt == 0)
		check(model_first_loss(&l.loss, &sc, &key, n) == first &&
			      sc.state == sa.state && sc.packets == sa.packets,
		      "model_first_loss disagrees");
	model_loss_begin(&b, &l.loss, &sb, &key, n, attempt);
	uint64_t q = 0;
	while (in->n && q < n) {
		q += take(in, 1) % 64;
		if (q >= n)
			break;
		int want = (int)(take(in, 1) & 1);
		uint64_t r = model_loss_next(&b, q, want);
		uint64_t e = q;
		while (e < n && lost[e] != want)
			e++;
		check(r == e, "a query disagrees with the enumeration");
		q = r;
	}
	model_loss_end(&b);
	check(sa.state == sb.state && sa.packets == sb.packets,
	      "the Markov state depends on the queries");
}

static int impaired(const struct model_path *p)
{
	for (int j = 0; j < p->nhops; j++) {
		const struct model_link *l = p->hop[j];
		if (l->loss.kind != MODEL_LOSS_NONE || l->jitter.dist != MODEL_DIST_NONE ||
		    l->reorder_p || l->duplicate_p)
			return 1;
	}
	return 0;
}

/* model_hop over the message's stages from busy-until values host and busy[] (not changed):
 * each stage's done in done[] (the host stage's in *host_done), the arrival returned, the
 * last stage's last-packet time in *gap. */
static int64_t hop_chain(const struct model_path *p, const struct model_nic *nic, int64_t t,
			 uint64_t bytes, int64_t host, const int64_t *busy, int64_t *host_done,
			 int64_t *done, int64_t *gap)
{
	struct model_train tr;
	model_train_init(&tr, p, bytes);
	struct model_stamp st = {t, t, 0};
	struct model_hop_times h;
	*gap = 0;
	if (nic->host_rate_bps) {
		struct model_link hl;
		memset(&hl, 0, sizeof(hl));
		hl.rate_bps = nic->host_rate_bps;
		model_hop(&hl, p->switching, &tr, 0, host, &st, &h);
		*host_done = h.done_ns;
		st = h.next;
		*gap = h.next.last_tx_ns;
	}
	for (int j = 0; j < p->nhops; j++) {
		int64_t b = busy[j];
		model_hop(p->hop[j], p->switching, &tr, 0, b, &st, &h);
		check(h.start_ns >= st.first_ns && h.start_ns >= b && h.done_ns >= h.start_ns &&
			      h.next.last_ns >= h.done_ns && h.next.first_ns <= h.next.last_ns &&
			      h.next.last_ns >= st.last_ns,
		      "model_hop: a stamp out of order");
		struct model_hop_times later;
		model_hop(p->hop[j], p->switching, &tr, 0, b + 1000, &st, &later);
		check(later.done_ns >= h.done_ns && later.next.first_ns >= h.next.first_ns &&
			      later.next.last_ns >= h.next.last_ns,
		      "model_hop: a later busy-until gave an earlier time");
		done[j] = h.done_ns;
		st = h.next;
		*gap = h.next.last_tx_ns;
	}
	return st.last_ns;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = {data, size};
	if (take(&in, 1) & 1) {
		loss_iter_check(&in);
		return 0;
	}
	struct model_link links[MODEL_MAX_HOPS];
	struct model_path p;
	memset(&p, 0, sizeof(p));
	p.nhops = (int)(take(&in, 1) % (MODEL_MAX_HOPS + 2)); /* 9: refused */
	uint8_t sw = (uint8_t)take(&in, 1);
	p.switching = (enum model_switching)(sw % 3);
	char err[MODEL_ERR_LEN];
	for (int j = 0; j < p.nhops && j < MODEL_MAX_HOPS; j++) {
		mk_link(&in, &links[j]);
		if (sw & 0x10) { /* timing only: model_hop's check below applies */
			links[j].loss.kind = MODEL_LOSS_NONE;
			links[j].jitter.dist = MODEL_DIST_NONE;
			links[j].reorder_p = links[j].duplicate_p = 0;
		}
		err[0] = 0;
		if (model_link_resolve(&links[j], err, sizeof(err))) {
			check(memchr(err, 0, sizeof(err)) && err[0], "link error message");
			return 0;
		}
		p.hop[j] = &links[j];
		p.link_id[j] = (uint32_t)j;
	}
	if (model_path_check(&p, err, sizeof(err)))
		return 0;
	struct model_nic nic;
	memset(&nic, 0, sizeof(nic));
	nic.host_rate_bps = take(&in, 1) & 1 ? rates[take(&in, 1) & 7] : 0;
	nic.o_send_ns = (int64_t)take(&in, 2);
	nic.o_recv_ns = (int64_t)take(&in, 2);
	nic.ack_proc_ns = (int64_t)take(&in, 2);
	nic.timeout_exp = (uint32_t)take(&in, 1) % 34;
	nic.retry_count = (uint32_t)take(&in, 1) % 9;
	nic.timeout_scale_ppm = (uint32_t)take(&in, 3);
	if (model_nic_resolve(&nic, err, sizeof(err)))
		return 0;

	struct {
		int64_t t;
		uint64_t bytes;
		int conn;
	} msg[NMSG];
	int64_t t = 0;
	for (int i = 0; i < NMSG; i++) {
		t += (int64_t)take(&in, 2);
		msg[i].t = t;
		msg[i].bytes = take(&in, 2) % (64 << 10);
		msg[i].conn = (int)(take(&in, 1) % 3);
	}
	uint64_t seed = take(&in, 8);

	static struct world w[2];
	static struct model_msg out[2][NMSG];
	for (int run = 0; run < 2; run++) {
		memset(&w[run], 0, sizeof(w[run]));
		for (int i = 0; i < NMSG; i++) {
			struct world *x = &w[run];
			int c = msg[i].conn;
			int64_t prev = x->conn[c].last_arrive, host = x->host;
			int64_t busy[MODEL_MAX_HOPS];
			memcpy(busy, x->busy, sizeof(busy));
			struct model_key k = {
				.seed = seed, .conn = (uint64_t)c, .msg = (uint64_t)i};
			struct model_msg *m = &out[run][i];
			int plain = !impaired(&p) && !x->conn[c].failed && run == 0;
			int64_t hdone = 0, done[MODEL_MAX_HOPS], gap = 0, arr = 0;
			if (plain)
				arr = hop_chain(&p, &nic, msg[i].t + nic.o_send_ns, msg[i].bytes,
						x->host, busy, &hdone, done, &gap);
			int rc = model_message(&p, &nic, msg[i].t, msg[i].bytes, &k, &x->host,
					       x->busy, x->ls, &x->conn[c], m);
			check(rc == 0, "model_message failed");
			check(m->packets == model_packets(&p, msg[i].bytes), "packet count");
			check(m->arrive_ns >= prev, "FIFO order broken on a connection");
			check(m->recv_done_ns >= m->arrive_ns && m->send_done_ns >= m->arrive_ns,
			      "completion before arrival");
			check(x->host >= host, "host busy went back");
			if (plain && !m->failed) {
				check(m->arrive_ns == (arr > prev + gap ? arr : prev + gap),
				      "model_hop's arrival is not model_message's");
				check(!nic.host_rate_bps ||
					      x->host == (hdone > host ? hdone : host),
				      "model_hop's host stage is not model_message's");
				for (int j = 0; j < p.nhops; j++)
					check(x->busy[j] == (done[j] > busy[j] ? done[j] : busy[j]),
					      "model_hop's reservation is not model_message's");
			}
			for (int j = 0; j < p.nhops; j++)
				check(x->busy[j] >= busy[j], "busy went back");
			if (!m->failed) {
				int64_t ideal = model_ideal_ns(&p, &nic, msg[i].bytes);
				ideal -= nic.o_recv_ns;
				if (m->arrive_ns < msg[i].t + ideal)
					dump(&p, &nic, msg[i].t, msg[i].bytes, m, ideal);
				check(m->arrive_ns >= msg[i].t + ideal, "earlier than the ideal");
			}
			for (uint64_t q = model_corrupt_next(&p, &k, 0, m->packets);
			     q < m->packets; q = model_corrupt_next(&p, &k, q + 1, m->packets)) {
				k.packet = q;
				check(model_corrupt_bit(&k, 1 + q % 4096) < 8 * (1 + q % 4096),
				      "corrupt bit");
			}
		}
	}
	check(memcmp(out[0], out[1], sizeof(out[0])) == 0 &&
		      memcmp(&w[0], &w[1], sizeof(w[0])) == 0,
	      "not deterministic");
	return 0;
}
