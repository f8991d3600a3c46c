/* SPDX-License-Identifier: MIT */
/*
 * tests.c - the non-destructive tests that move data (connect, props, sizes,
 * tags, inflight, allreduce, alltoall), plus load/unload. Their shared
 * helpers: testlib.c; the lifecycle tests: lifecycle.c.
 *
 * Every test runs on every rank with the same plan; connections are set up
 * through the engine's plans (eng_links), data is a pattern that depends on
 * (sender, size or slot, iteration) and is checked byte for byte, and every
 * test closes what it opened, failure or not (deregMr first, as NCCL does).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/harness/harness.h"

int hx_base_threads = -1;

/* ---- load / unload --------------------------------------------------------------- */

struct t_rankinfo {
	int ndev;
	struct hx_devinfo dev[HX_MAX_DEVS];
};

void t_load(struct hx_test *t)
{
	struct t_rankinfo *all;
	char err[1024], hello[300];
	int ndev = 0, d, r, ok = 1;
	double t_init;
	ncclResult_t rc;

	hx_base_threads = hx_count_threads();
	all = calloc((size_t)hx_w.nranks, sizeof(*all));
	if (!all)
		exit(1);
	if (pl_load(hx_opt.plugin, hx_opt.api_version, err, sizeof(err)) < 0) {
		hx_fail(t, "%s", err);
		ok = 0;
	}
	if (ok) {
		js_int(t->metrics, "api_version", pl.version);
		js_str(t->metrics, "name", pl.name);
		t_init = hx_now();
		rc = pl_init();
		js_num(t->metrics, "init_seconds", hx_now() - t_init);
		if (rc != ncclSuccess) {
			char warn[512];

			pl_warn_last(warn, sizeof(warn));
			hx_fail(t, "init returned %s (last WARN: %s)", hx_rc_str(rc), warn);
			ok = 0;
		}
	}
	if (ok) {
		rc = pl_devices(&ndev);
		if (rc != ncclSuccess || ndev <= 0) {
			hx_fail(t, "devices() returned %s with ndev = %d; NCCL would disable the plugin",
				hx_rc_str(rc), ndev);
			ok = 0;
		}
		if (ndev > HX_MAX_DEVS) {
			hx_note(t, "%d devices; the harness uses the first %d", ndev, HX_MAX_DEVS);
			ndev = HX_MAX_DEVS;
		}
		js_int(t->metrics, "ndev", ndev);
	}
	for (d = 0; ok && d < ndev; d++) {
		struct pl_props p;

		rc = pl_get_props(d, &p);
		if (rc != ncclSuccess) {
			hx_fail(t, "getProperties(%d) returned %s", d, hx_rc_str(rc));
			ok = 0;
			break;
		}
		all[hx_w.rank].dev[d].max_recvs = p.max_recvs < 1 ? 1 : p.max_recvs;
		if (all[hx_w.rank].dev[d].max_recvs > HX_MAX_RECVS)
			all[hx_w.rank].dev[d].max_recvs = HX_MAX_RECVS;
		all[hx_w.rank].dev[d].max_p2p = (p.has & PL_F_MAXP2P) ? p.max_p2p : (1ULL << 30);
	}
	all[hx_w.rank].ndev = ok ? ndev : 0;
	if (ok) {
		size_t n = (size_t)snprintf(hello, sizeof(hello), "%s", pl.name ? pl.name : "(null)");

		oob_send(OOB_HELLO, (uint32_t)pl.version, hello, n);
	} else {
		free(all);
		return;
	}
	if (oob_allgather(all, sizeof(*all)) < 0) {
		t_aborted(t, "the device exchange");
		free(all);
		return;
	}
	for (r = 0; r < hx_w.nranks; r++) {
		hx_w.ndev[r] = all[r].ndev;
		memcpy(hx_w.dev[r], all[r].dev, sizeof(all[r].dev));
	}
	free(all);
}

void t_unload(struct hx_test *t)
{
	if (!pl.dl) {
		hx_note(t, "plugin not loaded");
		return;
	}
	js_int(t->metrics, "warns", pl_warn_count());
	js_int(t->metrics, "profiler_calls", (long long)pl.prof_calls);
	if (hx_opt.profiler) {
		js_int(t->metrics, "profiler_starts", (long long)plp.starts);
		js_int(t->metrics, "profiler_stops", (long long)plp.stops);
		js_int(t->metrics, "profiler_live", pl_prof_live());
		js_int(t->metrics, "profiler_simfabric", (long long)plp.sf);
		js_int(t->metrics, "profiler_send_bytes", (long long)plp.send_bytes);
		js_int(t->metrics, "profiler_bad", (long long)plp.bad);
		if (plp.bad)
			hx_fail(t, "profiler events: %lu bad, the first: %s", plp.bad,
				plp.first_bad);
		else if (pl_prof_live())
			hx_fail(t, "profiler events: %ld started and never stopped (every comm is "
				"closed)", pl_prof_live());
	}
	t_unload_plugin(t);
}

/* ---- connect ----------------------------------------------------------------------- */

#define T_MAX_CONNECT_LINKS 4096

/*
 * The connect test's round trip on every link l of ls: the message goes l->src -> l->dst on l,
 * its echo (echo) back on l's reverse, rev[i] (none where it is -1), into ebufs, completing
 * ops[n + i]. Posts this rank's side of one leg: its receives (send == 0) or its sends; the
 * message is 64..124 bytes by link, the receive's buffer 64 bytes longer, poisoned.
 */
static void t_connect_post(struct hx_test *t, struct eng_links *ls, const int *rev, int me,
			   int echo, int send, void **bufs, void **ebufs, struct eng_op *ops)
{
	for (int i = 0; i < ls->n && !hx_failed(t); i++) {
		struct eng_link *l = &ls->v[i];
		size_t sz = 64 + (size_t)(i % 61);
		int from = echo ? l->dst : l->src, to = echo ? l->src : l->dst;
		struct eng_op *op = &ops[echo ? ls->n + i : i];
		void *mh;

		if ((send ? from : to) != me || (echo && rev[i] < 0))
			continue;
		struct eng_link *on = echo ? &ls->v[rev[i]] : l;
		if (send) {
			if (!echo) {
				bufs[i] = hx_alloc(sz);
				hx_fill(bufs[i], sz,
					hx_seed(T_SEED_CONNECT, (uint64_t)me, (uint64_t)i, 0));
			}
			if (eng_reg(on->send, bufs[i], 4096, &mh) == 0)
				eng_send(on->send, bufs[i], sz, me, mh, op);
			continue;
		}
		void **b = echo ? ebufs : bufs;
		b[i] = hx_alloc(sz + 64);
		memset(b[i], HX_POISON_BYTE, sz + 64);
		op->want_sizes = 1;
		if (eng_reg(on->recv, b[i], 4096, &mh) == 0)
			eng_recv1(on->recv, b[i], sz + 64, from, mh, op);
	}
}

/* Checks what this rank received in one leg of the round trip (t_connect_post). */
static void t_connect_check(struct hx_test *t, struct eng_links *ls, const int *rev, int me,
			    int echo, void **bufs, void **ebufs, struct eng_op *ops)
{
	for (int i = 0; i < ls->n && !hx_failed(t); i++) {
		struct eng_link *l = &ls->v[i];
		size_t sz = 64 + (size_t)(i % 61);
		struct eng_op *op = &ops[echo ? ls->n + i : i];
		char what[96];

		if ((echo ? l->src : l->dst) != me || (echo && rev[i] < 0))
			continue;
		if (echo)
			snprintf(what, sizeof(what), "connect: echo from rank %d dev %d", l->dst,
				 l->rdev);
		else
			snprintf(what, sizeof(what), "connect: message from rank %d dev %d to dev %d",
				 l->src, l->sdev, l->rdev);
		t_check(t, what, echo ? ebufs[i] : bufs[i], sz, sz + 64,
			hx_seed(T_SEED_CONNECT, (uint64_t)l->src, (uint64_t)i, 0), op->sizes[0],
			op->sizes_known);
	}
}

void t_connect(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_op *ops = NULL;
	void **bufs = NULL, **ebufs = NULL;
	int *rev = NULL, i, k, s, r, ds, dr, n, me = hx_w.rank, nnull = 0, limited = 0;
	double t_setup;
	long calls_c = 0, calls_a = 0;

	eng_init(&e, t, "connect");
	for (s = 0; s < hx_w.nranks; s++)
		for (r = 0; r < hx_w.nranks; r++) {
			if (r == s)
				continue;
			for (ds = 0; ds < hx_w.ndev[s]; ds++)
				for (dr = 0; dr < hx_w.ndev[r]; dr++) {
					int flags = ((s + r + ds + dr) & 1) ? ENG_L_NULL_DEVCOMM : 0;

					if (ls.n >= T_MAX_CONNECT_LINKS) {
						limited = 1;
						continue;
					}
					nnull += flags != 0;
					eng_links_add(&ls, s, ds, r, dr, -1, flags);
				}
		}
	if (limited)
		hx_note(t, "limited to %d connections", T_MAX_CONNECT_LINKS);
	n = ls.n;
	js_int(t->metrics, "connections", n);
	js_int(t->metrics, "null_devcomm", nnull);

	t_setup = hx_now();
	if (eng_links_open(&e, &ls) < 0)
		goto close;
	js_num(t->metrics, "setup_seconds", hx_now() - t_setup);
	for (i = 0; i < n; i++) {
		calls_c += ls.v[i].nconnect;
		calls_a += ls.v[i].naccept;
	}
	js_int(t->metrics, "connect_calls", calls_c);
	js_int(t->metrics, "accept_calls", calls_a);

	/* A round trip on every link: i -> j on the link, then back on its reverse. */
	ops = calloc((size_t)n * 2, sizeof(*ops));
	bufs = calloc((size_t)n, sizeof(*bufs));
	ebufs = calloc((size_t)n, sizeof(*ebufs));
	rev = calloc((size_t)n, sizeof(*rev));
	if (!ops || !bufs || !ebufs || !rev)
		exit(1);
	for (i = 0; i < n; i++) {
		rev[i] = -1;
		for (k = 0; k < n; k++)
			if (ls.v[k].src == ls.v[i].dst && ls.v[k].dst == ls.v[i].src &&
			    ls.v[k].sdev == ls.v[i].rdev && ls.v[k].rdev == ls.v[i].sdev)
				rev[i] = k;
	}
	t_connect_post(t, &ls, rev, me, 0, 0, bufs, ebufs, ops); /* every receive first */
	t_connect_post(t, &ls, rev, me, 0, 1, bufs, ebufs, ops);
	if (!hx_failed(t))
		eng_wait_all(&e);
	t_connect_check(t, &ls, rev, me, 0, bufs, ebufs, ops);
	/* Echo back on the reverse link; the original sender compares with what it sent. */
	t_connect_post(t, &ls, rev, me, 1, 0, bufs, ebufs, ops);
	t_connect_post(t, &ls, rev, me, 1, 1, bufs, ebufs, ops);
	if (!hx_failed(t))
		eng_wait_all(&e);
	t_connect_check(t, &ls, rev, me, 1, bufs, ebufs, ops);
close:
	eng_links_close(&e, &ls, 0, ls.n);
	if (!hx_failed(t) && bufs) {
		for (i = 0; i < n; i++) {
			hx_free(bufs[i]);
			hx_free(ebufs[i]);
		}
	}
	free(ops);
	free(bufs);
	free(ebufs);
	free(rev);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- props ----------------------------------------------------------------------- */

void t_props(struct hx_test *t)
{
	struct pl_props p[HX_MAX_DEVS], again;
	int ndev = hx_w.ndev[hx_w.rank], d, k, i;
	ncclResult_t rc;

	js_arr(t->metrics, "devices");
	for (d = 0; d < ndev; d++) {
		rc = pl_get_props(d, &p[d]);
		if (rc != ncclSuccess) {
			hx_fail(t, "getProperties(%d) returned %s", d, hx_rc_str(rc));
			p[d].has = 0;
			continue;
		}
		for (i = 0; i < PL_NFIELDS; i++) {
			unsigned f = 1u << i;

			/* pciPath may be NULL; only a field left entirely untouched is flagged. */
			if (p[d].unset & f)
				hx_fail(t, "getProperties(%d) left %s unset (NCCL does not zero the "
					"struct)", d, pl_field_name(f));
		}
		if (!p[d].name)
			hx_fail(t, "device %d: name is NULL", d);
		if (p[d].speed <= 0)
			hx_fail(t, "device %d: speed = %d Mbps, want > 0", d, p[d].speed);
		if (p[d].max_recvs < 1)
			hx_fail(t, "device %d: maxRecvs = %d, want >= 1", d, p[d].max_recvs);
		if (p[d].max_recvs > HX_MAX_RECVS)
			hx_fail(t, "device %d: maxRecvs = %d is more than NCCL can group (%d)", d,
				p[d].max_recvs, HX_MAX_RECVS);
		if (!(p[d].ptr_support & NCCL_PTR_HOST))
			hx_fail(t, "device %d: ptrSupport = 0x%x lacks NCCL_PTR_HOST", d,
				p[d].ptr_support);
		if ((p[d].has & PL_F_MAXP2P) &&
		    (p[d].max_p2p == 0 || p[d].max_p2p > NCCL_MAX_NET_SIZE_BYTES))
			hx_fail(t, "device %d: maxP2pBytes = %llu, want in (0, 2^40]", d,
				(unsigned long long)p[d].max_p2p);
		if ((p[d].has & PL_F_MAXCOLL) &&
		    (p[d].max_coll == 0 || p[d].max_coll > NCCL_MAX_NET_SIZE_BYTES))
			hx_fail(t, "device %d: maxCollBytes = %llu, want in (0, 2^40]", d,
				(unsigned long long)p[d].max_coll);
		if (p[d].dev_type != NCCL_NET_DEVICE_HOST)
			hx_fail(t, "device %d: netDeviceType = %d, want NCCL_NET_DEVICE_HOST (0)", d,
				p[d].dev_type);
		if (p[d].has & PL_F_VPROPS) {
			if (p[d].vndevs < 1 || p[d].vndevs > p[d].vmax)
				hx_fail(t, "device %d: vProps.ndevs = %d, want 1..%d", d, p[d].vndevs,
					p[d].vmax);
			for (k = 0; k < p[d].vndevs && k < p[d].vmax; k++)
				if (p[d].vdevs[k] < 0 || p[d].vdevs[k] >= ndev)
					hx_fail(t, "device %d: vProps.devs[%d] = %d, not a device", d, k,
						p[d].vdevs[k]);
			if (p[d].vndevs == 1 && p[d].vdevs[0] != d)
				hx_fail(t, "device %d: vProps = {1, {%d}}, a physical device lists itself",
					d, p[d].vdevs[0]);
		}
		/* Reentrant and stable: a second call says the same thing. */
		rc = pl_get_props(d, &again);
		if (rc != ncclSuccess || !again.name || !p[d].name || strcmp(again.name, p[d].name) ||
		    again.speed != p[d].speed || again.guid != p[d].guid)
			hx_fail(t, "device %d: a second getProperties call disagrees with the first", d);

		js_obj(t->metrics, NULL);
		js_int(t->metrics, "dev", d);
		js_str(t->metrics, "name", p[d].name);
		js_str(t->metrics, "pciPath", p[d].pci_path);
		{
			char g[24];

			/* Hex: a 64-bit guid does not survive a JSON reader's doubles. */
			snprintf(g, sizeof(g), "0x%016llx", (unsigned long long)p[d].guid);
			js_str(t->metrics, "guid", g);
		}
		js_int(t->metrics, "ptrSupport", p[d].ptr_support);
		js_int(t->metrics, "regIsGlobal", p[d].reg_is_global);
		if (p[d].has & PL_F_FORCEFLUSH)
			js_int(t->metrics, "forceFlush", p[d].force_flush);
		js_int(t->metrics, "speed", p[d].speed);
		js_int(t->metrics, "port", p[d].port);
		js_num(t->metrics, "latency", p[d].latency);
		js_int(t->metrics, "maxComms", p[d].max_comms);
		js_int(t->metrics, "maxRecvs", p[d].max_recvs);
		js_int(t->metrics, "netDeviceType", p[d].dev_type);
		js_int(t->metrics, "netDeviceVersion", p[d].dev_version);
		if (p[d].has & PL_F_VPROPS) {
			js_arr(t->metrics, "vProps");
			for (k = 0; k < p[d].vndevs && k < p[d].vmax; k++)
				js_int(t->metrics, NULL, p[d].vdevs[k]);
			js_end_arr(t->metrics);
		}
		if (p[d].has & PL_F_MAXP2P)
			js_int(t->metrics, "maxP2pBytes", (long long)p[d].max_p2p);
		if (p[d].has & PL_F_MAXCOLL)
			js_int(t->metrics, "maxCollBytes", (long long)p[d].max_coll);
		if (p[d].has & PL_F_MAXMULTI)
			js_int(t->metrics, "maxMultiRequestSize", p[d].max_multi);
		if (p[d].has & PL_F_RAIL) {
			js_int(t->metrics, "railId", p[d].rail_id);
			js_int(t->metrics, "planeId", p[d].plane_id);
		}
		js_end_obj(t->metrics);
	}
	js_end_arr(t->metrics);
	/* Names are the topology's lookup key: duplicates make devices vanish. */
	for (d = 0; d < ndev; d++)
		for (k = d + 1; k < ndev; k++)
			if (p[d].name && p[k].name && !strcmp(p[d].name, p[k].name))
				hx_fail(t, "devices %d and %d share the name '%s'", d, k, p[d].name);
}

/* ---- sizes ------------------------------------------------------------------------- */

int t_size_list(size_t *out, int cap)
{
	static const size_t odd[] = {0, 1, 3, 1023, 4097, 65537, 1048583};
	size_t s;
	int n = 0, i;

	for (i = 0; i < (int)(sizeof(odd) / sizeof(odd[0])) && n < cap; i++)
		if (odd[i] <= hx_opt.max_bytes)
			out[n++] = odd[i];
	for (s = 4096; s <= (64u << 20) && n < cap; s *= 4)
		if (s <= hx_opt.max_bytes)
			out[n++] = s;
	if ((64u << 20) <= hx_opt.max_bytes && n < cap)
		out[n++] = 64u << 20;
	if (hx_opt.max_bytes > (64u << 20) && n < cap)
		out[n++] = hx_opt.max_bytes;
	return n;
}

void t_sizes(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc, *rc;
	size_t sizes[32], bytes = 0;
	uint64_t limit;
	int n, i, iter, me = hx_w.rank, prev = hx_ring_prev(), next = hx_ring_next(), nx = 0;
	double t_data;

	eng_init(&e, t, "sizes");
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	sc = t_ring_send(&ls);
	rc = t_ring_recv(&ls);
	n = t_size_list(sizes, 32);
	/* Each side of a transfer must accept it: the smaller maxP2pBytes rules. */
	limit = hx_w.dev[me][0].max_p2p;
	if (hx_w.dev[next][0].max_p2p < limit)
		limit = hx_w.dev[next][0].max_p2p;
	if (hx_w.dev[prev][0].max_p2p < limit)
		limit = hx_w.dev[prev][0].max_p2p;
	t_data = hx_now();
	for (i = 0; i < n && !hx_failed(t); i++) {
		if (sizes[i] > limit) {
			hx_note(t, "sizes above maxP2pBytes = %llu skipped", (unsigned long long)limit);
			break;
		}
		for (iter = 0; iter < 2 && !hx_failed(t); iter++) {
			size_t cap = iter ? sizes[i] + sizes[i] / 4 + 4099 : sizes[i];

			if (t_xfer(&e, sc, rc, sizes[i], cap,
				   hx_seed(T_SEED_SIZES, (uint64_t)me, sizes[i], (uint64_t)iter),
				   hx_seed(T_SEED_SIZES, (uint64_t)prev, sizes[i], (uint64_t)iter), me,
				   prev) == 0) {
				bytes += sizes[i];
				nx++;
			}
		}
	}
	js_int(t->metrics, "transfers", nx);
	js_int(t->metrics, "bytes", (long long)bytes);
	/* What this rank put on the wire, to compare with the fabric's counters. */
	js_int(t->metrics, "msgs_sent", nx);
	js_int(t->metrics, "bytes_sent", (long long)bytes);
	js_int(t->metrics, "largest", n ? (long long)sizes[n - 1] : 0);
	js_num(t->metrics, "seconds", hx_now() - t_data);
	js_int(t->metrics, "would_block", (long long)e.nblocked);
	js_int(t->metrics, "test_calls", (long long)e.ntests);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- tags -------------------------------------------------------------------------- */

static size_t t_tag_size(int n, int k)
{
	return 1000 + 333 * (size_t)k + 7 * (size_t)n;
}

static size_t t_tag_cap(int n, int k)
{
	return t_tag_size(n, k) + 128 * (size_t)k + (size_t)(k & 1);
}

static int t_tag_tag(int n, int k)
{
	return n == 1 ? 4242 : 1000 * n + 17 * k + 5;
}

/* The n values of the rounds a receiver with maxRecvs m takes part in. */
static int t_tag_rounds(int m, int *ns)
{
	int c = 0, n;

	ns[c++] = 1;
	for (n = 2; n <= m && n <= HX_MAX_RECVS; n++)
		ns[c++] = n;
	return c;
}

void t_tags(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc, *rc;
	int me = hx_w.rank, prev = hx_ring_prev(), next = hx_ring_next();
	int rns[HX_MAX_RECVS + 1], sns[HX_MAX_RECVS + 1], nr, ns, round, k;
	int mr_me = hx_w.dev[me][0].max_recvs;

	eng_init(&e, t, "tags");
	js_int(t->metrics, "maxRecvs", mr_me);
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	sc = t_ring_send(&ls);
	rc = t_ring_recv(&ls);
	nr = t_tag_rounds(mr_me, rns);		      /* what I receive, by my maxRecvs */
	ns = t_tag_rounds(hx_w.dev[next][0].max_recvs, sns); /* what I send, by next's */
	if (mr_me == 1)
		hx_note(t, "skipped: maxRecvs=1 (only n=1 with a tag ran)");

	for (round = 0; (round < nr || round < ns) && !hx_failed(t); round++) {
		struct eng_op rop, sops[HX_MAX_RECVS];
		void *rpool = NULL, *spool = NULL, *rmh = NULL, *smh = NULL;
		void *rdata[HX_MAX_RECVS], *rmhs[HX_MAX_RECVS];
		size_t rcaps[HX_MAX_RECVS], roff[HX_MAX_RECVS + 1], soff[HX_MAX_RECVS + 1];
		int rtags[HX_MAX_RECVS], rn = round < nr ? rns[round] : 0;
		int sn = round < ns ? sns[round] : 0;

		memset(&rop, 0, sizeof(rop));
		memset(sops, 0, sizeof(sops));
		/* One registration, n sub-ranges, as NCCL's shared buffer pool does. */
		roff[0] = 0;
		for (k = 0; k < rn; k++)
			roff[k + 1] = (roff[k] + t_tag_cap(rn, k) + 7) & ~(size_t)7;
		soff[0] = 0;
		for (k = 0; k < sn; k++)
			soff[k + 1] = soff[k] + t_tag_size(sn, k);
		if (rn) {
			rpool = hx_alloc(roff[rn]);
			memset(rpool, HX_POISON_BYTE, roff[rn]);
			if (eng_reg(rc, rpool, t_reglen(roff[rn]), &rmh) < 0)
				break;
			for (k = 0; k < rn; k++) {
				rdata[k] = (char *)rpool + roff[k];
				rcaps[k] = t_tag_cap(rn, k);
				rtags[k] = t_tag_tag(rn, k);
				rmhs[k] = rmh;
			}
			rop.want_sizes = 1;
			if (eng_recv(rc, rn, rdata, rcaps, rtags, rmhs, &rop) < 0)
				break;
		}
		if (sn) {
			spool = hx_alloc(soff[sn]);
			for (k = 0; k < sn; k++)
				hx_fill((char *)spool + soff[k], t_tag_size(sn, k),
					hx_seed(T_SEED_TAGS, (uint64_t)me, (uint64_t)sn,
						(uint64_t)t_tag_tag(sn, k)));
			if (eng_reg(sc, spool, t_reglen(soff[sn]), &smh) < 0)
				break;
			/* Reverse buffer order: only the tag says where each one goes. */
			for (k = sn - 1; k >= 0; k--)
				if (eng_send(sc, (char *)spool + soff[k], t_tag_size(sn, k),
					     t_tag_tag(sn, k), smh, &sops[k]) < 0)
					break;
		}
		/* Never wait after a failure of our own: the peer may wait for us. */
		if (!hx_failed(t))
			eng_wait_all(&e);
		eng_cancel(&e, &rop);
		for (k = 0; k < sn; k++)
			eng_cancel(&e, &sops[k]);
		if (hx_failed(t))
			break;
		for (k = 0; k < rn && !hx_failed(t); k++) {
			char what[96];

			snprintf(what, sizeof(what), "n=%d buffer %d (tag %d) from rank %d", rn, k,
				 rtags[k], prev);
			t_check(t, what, rdata[k], t_tag_size(rn, k), rcaps[k],
				hx_seed(T_SEED_TAGS, (uint64_t)prev, (uint64_t)rn, (uint64_t)rtags[k]),
				rop.sizes[k], rop.sizes_known);
		}
		if (rn)
			eng_dereg(rc, rmh);
		if (sn)
			eng_dereg(sc, smh);
		hx_free(rpool);
		hx_free(spool);
	}
	js_int(t->metrics, "rounds", nr);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- inflight ----------------------------------------------------------------------- */

#define T_INFL_K NCCL_NET_MAX_REQUESTS
#define T_INFL_MAX (4 * NCCL_NET_MAX_REQUESTS)
#define T_INFL_CAP 2048

static size_t t_infl_size(int phase, int k)
{
	return 100 + (size_t)(37 * k + 11 * phase) % 1900;
}

/* Checks the k-th receive of a phase: FIFO matching means it holds the k-th send. */
static void t_infl_check(struct hx_test *t, int phase, int k, const char *buf,
			 const struct eng_op *op)
{
	char what[80];

	snprintf(what, sizeof(what), "phase %d receive #%d from rank %d", phase, k, hx_ring_prev());
	t_check(t, what, buf, t_infl_size(phase, k), T_INFL_CAP,
		hx_seed(T_SEED_INFLIGHT, (uint64_t)hx_ring_prev(), (uint64_t)phase, (uint64_t)k),
		op->sizes[0], op->sizes_known);
}

void t_inflight(struct hx_test *t)
{
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc = NULL, *rc = NULL;
	struct eng_op *rops = NULL, *sops = NULL;
	char *rpool = NULL, *spool = NULL;
	void *rmh = NULL, *smh = NULL;
	int me = hx_w.rank, next = hx_ring_next(), k, phase, nrecv, nsend, *counts = NULL;
	int sent_before = 0;
	double t_end;

	eng_init(&e, t, "inflight");
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	sc = t_ring_send(&ls);
	rc = t_ring_recv(&ls);
	rops = calloc(T_INFL_MAX, sizeof(*rops));
	sops = calloc(T_INFL_MAX, sizeof(*sops));
	counts = calloc((size_t)hx_w.nranks, sizeof(int));
	rpool = hx_alloc((size_t)T_INFL_MAX * T_INFL_CAP);
	spool = hx_alloc((size_t)T_INFL_MAX * T_INFL_CAP);
	if (!rops || !sops || !counts)
		exit(1);
	if (eng_reg(rc, rpool, (size_t)T_INFL_MAX * T_INFL_CAP, &rmh) < 0 ||
	    eng_reg(sc, spool, (size_t)T_INFL_MAX * T_INFL_CAP, &smh) < 0)
		goto out;

	for (phase = 0; phase < 3 && !hx_failed(t); phase++) {
		memset(rpool, HX_POISON_BYTE, (size_t)T_INFL_MAX * T_INFL_CAP);
		memset(rops, 0, T_INFL_MAX * sizeof(*rops));
		memset(sops, 0, T_INFL_MAX * sizeof(*sops));
		for (k = 0; k < T_INFL_MAX; k++)
			hx_fill(spool + (size_t)k * T_INFL_CAP, t_infl_size(phase, k),
				hx_seed(T_SEED_INFLIGHT, (uint64_t)me, (uint64_t)phase, (uint64_t)k));
		nrecv = nsend = 0;
		if (phase == 0) {
			/* Exactly NCCL_NET_MAX_REQUESTS: the plugin must take them all. */
			for (k = 0; k < T_INFL_K; k++) {
				double t_grace = hx_now() + 2;
				int r;

				rops[k].want_sizes = 1;
				while ((r = t_irecv1(rc, rpool + (size_t)k * T_INFL_CAP, T_INFL_CAP,
						     hx_ring_prev(), rmh, &rops[k])) == 1 &&
				       hx_now() < t_grace)
					eng_idle(&e, eng_progress(&e));
				if (r == 1)
					hx_fail(t, "irecv #%d kept returning NULL with %d receives in flight; "
						"a comm must take %d (NCCL_NET_MAX_REQUESTS)", k, k,
						T_INFL_K);
				if (r != 0)
					break;
			}
			nrecv = k;
			for (k = 0; k < T_INFL_K && !hx_failed(t); k++)
				if (eng_send(sc, spool + (size_t)k * T_INFL_CAP, t_infl_size(phase, k),
					     me, smh, &sops[k]) < 0)
					break;
			nsend = k;
		} else if (phase == 1) {
			/* Receive backpressure: post until would-block; NULL is correct, errors are not. */
			int r = 0;

			for (k = 0; k < T_INFL_MAX; k++) {
				rops[k].want_sizes = 1;
				r = t_irecv1(rc, rpool + (size_t)k * T_INFL_CAP, T_INFL_CAP,
					     hx_ring_prev(), rmh, &rops[k]);
				if (r != 0)
					break;
			}
			if (r < 0)
				break;
			nrecv = k;
			js_int(t->metrics, "recvs_accepted", nrecv);
			if (nrecv < T_INFL_K)
				hx_fail(t, "only %d receives accepted before would-block; want >= %d",
					nrecv, T_INFL_K);
			memset(counts, 0, (size_t)hx_w.nranks * sizeof(int));
			counts[me] = nrecv;
			if (oob_allgather(counts, sizeof(int)) < 0) {
				t_aborted(t, "the receive-count exchange");
				break;
			}
			for (k = 0; k < counts[next] && !hx_failed(t); k++)
				if (eng_send(sc, spool + (size_t)k * T_INFL_CAP, t_infl_size(phase, k),
					     me, smh, &sops[k]) < 0)
					break;
			nsend = k;
		} else {
			/* Sends before any receive: may would-block; retried while progressing. */
			int m = 2 * T_INFL_K, r;

			for (k = 0; k < m; k++)
				if ((r = eng_isend(sc, spool + (size_t)k * T_INFL_CAP, t_infl_size(phase, k),
						   me, smh, &sops[k])) != 0)
					break;
			sent_before = nsend = k;
			js_int(t->metrics, "sends_accepted_before_recvs", sent_before);
			if (k < m && sops[k].state == ENG_OP_FAILED)
				break;
			if (t_barrier(t) < 0)
				break;
			t_end = e.deadline;
			while ((nrecv < m || nsend < m) && hx_now() < t_end && !hx_failed(t)) {
				int moved = 0;

				if (nrecv < m) {
					rops[nrecv].want_sizes = 1;
					r = t_irecv1(rc, rpool + (size_t)nrecv * T_INFL_CAP, T_INFL_CAP,
						     hx_ring_prev(), rmh, &rops[nrecv]);
					if (r == 0)
						nrecv++, moved++;
					else if (r < 0)
						break;
				}
				if (nsend < m) {
					r = eng_isend(sc, spool + (size_t)nsend * T_INFL_CAP,
						      t_infl_size(phase, nsend), me, smh, &sops[nsend]);
					if (r == 0)
						nsend++, moved++;
					else if (r < 0)
						break;
				}
				moved += eng_progress(&e);
				eng_idle(&e, moved);
				if (eng_expired(&e) == 2)
					break;
			}
			if ((nrecv < m || nsend < m) && !hx_failed(t))
				hx_fail(t, "phase 2: only %d of %d receives and %d of %d sends posted "
					"after %.1f s", nrecv, m, nsend, m, hx_now() - t->t0);
		}
		if (hx_failed(t))
			break;
		if (eng_wait_all(&e) < 0)
			break;
		for (k = 0; k < nrecv && !hx_failed(t); k++)
			t_infl_check(t, phase, k, rpool + (size_t)k * T_INFL_CAP, &rops[k]);
	}
out:
	js_int(t->metrics, "would_block", (long long)e.nblocked);
	if (!hx_failed(t)) {
		eng_dereg(rc, rmh);
		eng_dereg(sc, smh);
	}
	eng_links_close(&e, &ls, 0, ls.n);
	if (!hx_failed(t)) {
		hx_free(rpool);
		hx_free(spool);
	}
	free(rops);
	free(sops);
	free(counts);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- allreduce -------------------------------------------------------------------- */

#define T_AR_SLICE (128u << 10) /* bytes per isend, like a SIMPLE step */
#define T_AR_WINDOW 8		/* NCCL_STEPS */

static float t_ar_val(int r, size_t i)
{
	return (float)((int)((i * 7 + (size_t)r * 13) % 17) - 8);
}

/*
 * Posts the slices of [buf, +bytes) from *posted on while fewer than T_AR_WINDOW are past *done:
 * sends tagged tag (send), else receives from tag. -1 on a failure, else how many it posted.
 */
static int t_ar_post(int send, struct eng_conn *c, char *buf, size_t bytes, void *mh,
		     struct eng_op *ops, int tag, size_t n, size_t done, size_t *posted)
{
	int moved = 0;
	while (*posted < n && *posted - done < T_AR_WINDOW) {
		size_t off = *posted * T_AR_SLICE;
		size_t len = bytes - off < T_AR_SLICE ? bytes - off : T_AR_SLICE;
		struct eng_op *op = &ops[*posted % T_AR_WINDOW];
		int r = send ? eng_isend(c, buf + off, len, tag, mh, op)
			     : t_irecv1(c, buf + off, len, tag, mh, op);

		if (r < 0)
			return -1;
		if (r)
			break;
		(*posted)++, moved++;
	}
	return moved;
}

/* Counts the slices from *done on that completed, up to posted; -1 if one failed. */
static int t_ar_reap(const struct eng_op *ops, size_t posted, size_t *done)
{
	while (*done < posted && ops[*done % T_AR_WINDOW].state != ENG_OP_PENDING) {
		if (ops[*done % T_AR_WINDOW].state != ENG_OP_DONE)
			return -1;
		(*done)++;
	}
	return 0;
}

/* Sends [sbuf, +sbytes) and receives [rbuf, +rbytes) in slices, at most 8 of each in flight. */
static int t_ar_step_ops(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, char *sbuf,
			 size_t sbytes, void *smh, char *rbuf, size_t rbytes, void *rmh,
			 struct eng_op *sops, struct eng_op *rops)
{
	size_t ns = (sbytes + T_AR_SLICE - 1) / T_AR_SLICE, nr = (rbytes + T_AR_SLICE - 1) / T_AR_SLICE;
	size_t sp = 0, sd = 0, rp = 0, rd = 0;
	int me = hx_w.rank, prev = hx_ring_prev();

	while (sd < ns || rd < nr) {
		int why, rm = t_ar_post(0, rc, rbuf, rbytes, rmh, rops, prev, nr, rd, &rp);
		int sm = rm < 0 ? -1 : t_ar_post(1, sc, sbuf, sbytes, smh, sops, me, ns, sd, &sp);

		if (sm < 0)
			return -1;
		int moved = rm + sm + eng_progress(e);
		if (t_ar_reap(rops, rp, &rd) || t_ar_reap(sops, sp, &sd))
			return -1;
		why = eng_expired(e);
		if (why) {
			hx_fail(e->t, why == 2 ? "allreduce: aborted (another rank failed), %zu/%zu slices "
						 "sent, %zu/%zu received"
					       : "allreduce: timed out with %zu/%zu slices sent and "
						 "%zu/%zu received",
				sd, ns, rd, nr);
			return -1;
		}
		eng_idle(e, moved);
	}
	return 0;
}

static int t_ar_step(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, char *sbuf,
		     size_t sbytes, void *smh, char *rbuf, size_t rbytes, void *rmh)
{
	struct eng_op sops[T_AR_WINDOW], rops[T_AR_WINDOW];
	int r, k;

	memset(sops, 0, sizeof(sops));
	memset(rops, 0, sizeof(rops));
	r = t_ar_step_ops(e, sc, rc, sbuf, sbytes, smh, rbuf, rbytes, rmh, sops, rops);
	for (k = 0; k < T_AR_WINDOW; k++) {
		eng_cancel(e, &sops[k]);
		eng_cancel(e, &rops[k]);
	}
	return r;
}

void t_allreduce(struct hx_test *t)
{
	static const size_t counts[] = {1024, 65537, 1u << 20};
	struct eng e;
	struct eng_links ls = {0};
	struct eng_conn *sc, *rc;
	int me = hx_w.rank, n = hx_w.nranks, ci, s, r;
	double t_data;

	eng_init(&e, t, "allreduce");
	e.sizes_null_every = 2;
	if (t_ring_open(&e, &ls) < 0)
		goto out;
	sc = t_ring_send(&ls);
	rc = t_ring_recv(&ls);
	t_data = hx_now();
	js_arr(t->metrics, "counts");
	for (ci = 0; ci < 3 && !hx_failed(t); ci++) {
		size_t count = counts[ci], i, maxc = 0;
		float *data, *tmp;
		void *dmh_s = NULL, *dmh_r = NULL, *tmh = NULL;
		size_t lo[HX_MAX_RANKS + 1];

		if (count * sizeof(float) > hx_opt.max_bytes)
			continue;
		for (s = 0; s <= n; s++)
			lo[s] = count * (size_t)s / (size_t)n;
		for (s = 0; s < n; s++)
			if (lo[s + 1] - lo[s] > maxc)
				maxc = lo[s + 1] - lo[s];
		data = hx_alloc(count * sizeof(float));
		tmp = hx_alloc((maxc ? maxc : 1) * sizeof(float));
		for (i = 0; i < count; i++)
			data[i] = t_ar_val(me, i);
		/* The same memory registered on both comms, as NCCL does with shared pools. */
		if (eng_reg(sc, data, t_reglen(count * sizeof(float)), &dmh_s) < 0 ||
		    eng_reg(rc, data, t_reglen(count * sizeof(float)), &dmh_r) < 0 ||
		    eng_reg(rc, tmp, t_reglen(maxc * sizeof(float)), &tmh) < 0)
			break;
		/* Reduce-scatter: after n-1 steps rank r owns the sum of chunk r+1. */
		for (s = 0; s < n - 1 && !hx_failed(t); s++) {
			int sendc = (me - s + n) % n, recvc = (me - s - 1 + 2 * n) % n;

			if (t_ar_step(&e, sc, rc, (char *)(data + lo[sendc]),
				      (lo[sendc + 1] - lo[sendc]) * sizeof(float), dmh_s, (char *)tmp,
				      (lo[recvc + 1] - lo[recvc]) * sizeof(float), tmh) < 0)
				break;
			for (i = 0; i < lo[recvc + 1] - lo[recvc]; i++)
				data[lo[recvc] + i] += tmp[i];
		}
		/* Allgather: pass the owned chunks around, straight into place. */
		for (s = 0; s < n - 1 && !hx_failed(t); s++) {
			int sendc = (me - s + 1 + n) % n, recvc = (me - s + n) % n;

			if (t_ar_step(&e, sc, rc, (char *)(data + lo[sendc]),
				      (lo[sendc + 1] - lo[sendc]) * sizeof(float), dmh_s,
				      (char *)(data + lo[recvc]),
				      (lo[recvc + 1] - lo[recvc]) * sizeof(float), dmh_r) < 0)
				break;
		}
		for (i = 0; i < count && !hx_failed(t); i++) {
			float want = 0;

			for (r = 0; r < n; r++)
				want += t_ar_val(r, i);
			if (data[i] != want)
				hx_fail(t, "allreduce of %zu floats over %d ranks: element %zu = %g, "
					"want %g", count, n, i, (double)data[i], (double)want);
		}
		js_int(t->metrics, NULL, (long long)count);
		if (!hx_failed(t)) {
			eng_dereg(sc, dmh_s);
			eng_dereg(rc, dmh_r);
			eng_dereg(rc, tmh);
			hx_free(data);
			hx_free(tmp);
		}
	}
	js_end_arr(t->metrics);
	js_num(t->metrics, "seconds", hx_now() - t_data);
out:
	eng_links_close(&e, &ls, 0, ls.n);
	eng_links_free(&ls);
	eng_free(&e);
}

/* ---- alltoall ----------------------------------------------------------------------- */

static size_t t_a2a_size(size_t base, int s, int d)
{
	return base + 8 * (size_t)((s * 7 + d * 3) % 13);
}

void t_alltoall(struct hx_test *t)
{
	static const size_t bases[] = {1024, 65536, 1u << 20};
	struct eng e;
	struct eng_links ls = {0};
	int me = hx_w.rank, n = hx_w.nranks, s, d, b;
	struct eng_op *rops, *sops;
	void **rbufs, **sbufs;

	eng_init(&e, t, "alltoall");
	for (s = 0; s < n; s++)
		for (d = 0; d < n; d++)
			if (s != d)
				eng_links_add(&ls, s, 0, d, 0, -1, 0);
	rops = calloc((size_t)n, sizeof(*rops));
	sops = calloc((size_t)n, sizeof(*sops));
	rbufs = calloc((size_t)n, sizeof(void *));
	sbufs = calloc((size_t)n, sizeof(void *));
	if (!rops || !sops || !rbufs || !sbufs)
		exit(1);
	js_arr(t->metrics, "block_bases");
	if (eng_links_open(&e, &ls) < 0)
		goto out;
	for (b = 0; b < 3 && !hx_failed(t); b++) {
		size_t base = bases[b];
		void *rmh[HX_MAX_RANKS], *smh[HX_MAX_RANKS];

		if (t_a2a_size(base, n, n) > hx_opt.max_bytes)
			continue;
		memset(rops, 0, (size_t)n * sizeof(*rops));
		memset(sops, 0, (size_t)n * sizeof(*sops));
		for (s = 0; s < n && !hx_failed(t); s++) {
			struct eng_link *l = eng_link_find(&ls, s, me, 0);
			size_t cap = t_a2a_size(base, s, me) + 256;

			if (s == me)
				continue;
			rbufs[s] = hx_alloc(cap);
			memset(rbufs[s], HX_POISON_BYTE, cap);
			rops[s].want_sizes = 1;
			if (eng_reg(l->recv, rbufs[s], t_reglen(cap), &rmh[s]) == 0)
				eng_recv1(l->recv, rbufs[s], cap, s, rmh[s], &rops[s]);
		}
		/* Everyone sends to everyone at once, starting at a different peer each. */
		for (d = 1; d < n && !hx_failed(t); d++) {
			int peer = (me + d) % n;
			struct eng_link *l = eng_link_find(&ls, me, peer, 0);
			size_t sz = t_a2a_size(base, me, peer);

			sbufs[peer] = hx_alloc(sz);
			hx_fill(sbufs[peer], sz, hx_seed(T_SEED_A2A, (uint64_t)me, (uint64_t)peer, base));
			if (eng_reg(l->send, sbufs[peer], t_reglen(sz), &smh[peer]) == 0)
				eng_send(l->send, sbufs[peer], sz, me, smh[peer], &sops[peer]);
		}
		if (hx_failed(t) || eng_wait_all(&e) < 0)
			break;
		for (s = 0; s < n && !hx_failed(t); s++) {
			char what[80];

			if (s == me)
				continue;
			snprintf(what, sizeof(what), "block from rank %d (base %zu)", s, base);
			t_check(t, what, rbufs[s], t_a2a_size(base, s, me), t_a2a_size(base, s, me) + 256,
				hx_seed(T_SEED_A2A, (uint64_t)s, (uint64_t)me, base), rops[s].sizes[0],
				rops[s].sizes_known);
		}
		for (s = 0; s < n && !hx_failed(t); s++) {
			if (s == me)
				continue;
			eng_dereg(eng_link_find(&ls, s, me, 0)->recv, rmh[s]);
			eng_dereg(eng_link_find(&ls, me, s, 0)->send, smh[s]);
			hx_free(rbufs[s]);
			hx_free(sbufs[s]);
			rbufs[s] = sbufs[s] = NULL;
		}
		js_int(t->metrics, NULL, (long long)base);
	}
out:
	js_end_arr(t->metrics);
	eng_links_close(&e, &ls, 0, ls.n);
	free(rops);
	free(sops);
	free(rbufs);
	free(sbufs);
	eng_links_free(&ls);
	eng_free(&e);
}
