/* SPDX-License-Identifier: MIT */
/*
 * test_fstate.c - the data path on a modelled fabric: the shared fabric
 * state, FIFO contention between connections, and "never early": no message
 * completes before the time the model gives it, checked message by message
 * against a shadow copy of the model run in the same order.
 */
#include "sim/core/chan.h"
#include "sim/core/fstate.h"
#include "sim/core/model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sim/test/check.h"

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

enum { NLINK = 3, NCONN = 3 };

/* Links: 0 and 1 are two uplinks, 2 the shared downlink (an incast). */
static void links_init(struct model_link *l)
{
	char err[MODEL_ERR_LEN];
	for (int i = 0; i < NLINK; i++) {
		memset(&l[i], 0, sizeof(l[i]));
		l[i].rate_bps = i == 2 ? 10000000000ull : 25000000000ull; /* 10 and 25 Gb/s */
		l[i].latency_ns = 2000 + 500 * i;
		l[i].mtu = 4096;
		l[i].hdr_bytes = 64;
		if (model_link_resolve(&l[i], err, sizeof(err))) {
			fprintf(stderr, "link %d: %s\n", i, err);
			exit(1);
		}
	}
}

static void nic_init(struct model_nic *n)
{
	char err[MODEL_ERR_LEN];
	memset(n, 0, sizeof(*n));
	n->o_send_ns = 300;
	n->o_recv_ns = 300;
	n->ack_proc_ns = 200;
	n->timeout_exp = 20;
	n->retry_count = 7;
	n->timeout_scale_ppm = 1000000;
	if (model_nic_resolve(n, err, sizeof(err))) {
		fprintf(stderr, "nic: %s\n", err);
		exit(1);
	}
}

static void test_never_early(void)
{
	struct model_link links[NLINK];
	struct model_nic nic;
	links_init(links);
	nic_init(&nic);
	size_t flen = fst_bytes(NLINK, NCONN, 0);
	void *fbase = map(flen);
	CHECK(fst_format(fbase, flen, NLINK, links, NCONN, 42, now_ns()) == 0, "fst_format");
	struct fst_view *v;
	CHECK(fst_view_new(fbase, flen, &v) == 0, "view");
	CHECK(fst_check(fbase, flen - 4096) == -EPROTO || flen <= 4096, "short region");

	/* Three connections: two through uplink 0 (same sending NIC), one through uplink 1. */
	struct chan_geom g = {.slot_bytes = 65536, .nslots = 16};
	size_t clen = chan_shm_bytes(&g);
	struct chan_shm *shm[NCONN];
	struct chan_tx *tx[NCONN];
	struct chan_rx *rx[NCONN];
	struct model_path path[NCONN];
	for (int c = 0; c < NCONN; c++) {
		shm[c] = map(clen);
		CHECK(chan_format(shm[c], clen, &g, 100 + (uint64_t)c) == 0, "format");
		path[c] = (struct model_path){.nhops = 2, .switching = MODEL_CUT_THROUGH};
		path[c].link_id[0] = c == 2 ? 1 : 0;
		path[c].link_id[1] = 2;
		for (int j = 0; j < 2; j++)
			path[c].hop[j] = &links[path[c].link_id[j]];
		CHECK(chan_set_route(shm[c], &path[c], c == 2 ? 1 : 0, &nic, c, c + 1) == 0, "route");
		CHECK(chan_tx_new(shm[c], clen, &tx[c]) == 0 && chan_rx_new(shm[c], clen, &rx[c]) == 0,
		      "attach");
		CHECK(chan_tx_set_fabric(tx[c], v) == 0 && chan_rx_set_fabric(rx[c], v) == 0, "fab");
	}

	/* The shadow: the same model, the same calls, in the same order. */
	int64_t sh_busy[NLINK] = {0}, sh_host[NCONN] = {0};
	struct model_loss_state sh_loss[NLINK] = {{0}};
	struct model_conn sh_conn[NCONN];
	memset(sh_conn, 0, sizeof(sh_conn));
	uint64_t sh_msgs[NCONN] = {0};

	uint8_t *src = malloc(1 << 20), *dst = malloc(1 << 20);
	for (int i = 0; i < (1 << 20); i++)
		src[i] = (uint8_t)(i * 7);
	uint32_t x = 1;
	int checked = 0;
	for (int round = 0; round < 60; round++) {
		chan_req s[NCONN], r[NCONN];
		int64_t want[NCONN], posted[NCONN];
		uint64_t size[NCONN];
		for (int c = 0; c < NCONN; c++) {
			x = x * 1103515245 + 12345;
			size[c] = (x >> 4) % (256 << 10);
			void *b = dst + c * (300 << 10);
			uint64_t cap = 300 << 10;
			CHECK(chan_rx_post(rx[c], 1, &b, &cap, NULL, &r[c], NULL) == 0, "rx post");
		}
		for (int c = 0; c < NCONN; c++) {
			posted[c] = now_ns();
			CHECK(chan_tx_post(tx[c], src, size[c], 0, &s[c], NULL) == 0, "tx post");
			/* The shadow gets the same post time (a little earlier: it can only
			 * make `want` earlier, so the check stays sound). */
			struct model_key key = {.seed = 42, .conn = 100 + (uint64_t)c,
						.msg = sh_msgs[c]++};
			int64_t busy[2] = {sh_busy[path[c].link_id[0]], sh_busy[2]};
			struct model_loss_state ls[2] = {sh_loss[path[c].link_id[0]], sh_loss[2]};
			struct model_msg m;
			int nicid = c == 2 ? 1 : 0;
			CHECK(model_message(&path[c], &nic, posted[c], size[c], &key, &sh_host[nicid],
					    busy, ls, &sh_conn[c], &m) == 0, "shadow");
			sh_busy[path[c].link_id[0]] = busy[0];
			sh_busy[2] = busy[1];
			want[c] = m.recv_done_ns;
		}
		int done[NCONN] = {0}, sdone[NCONN] = {0};
		for (long spin = 0; spin < 200000000; spin++) {
			int all = 1;
			for (int c = 0; c < NCONN; c++) {
				if (!done[c]) {
					uint64_t got;
					CHECK(chan_rx_test(rx[c], r[c], &done[c], &got, NULL) == 0, "rx");
					if (done[c]) {
						int64_t t = now_ns();
						/* Never early: at or after the model's time, within slack
						 * for the shadow's slightly earlier post time. */
						CHECK(t >= want[c] - 2000, "message %d/%d done %lld ns early",
						      round, c, (long long)(want[c] - t));
						CHECK(got == size[c] && memcmp(dst + c * (300 << 10), src,
									       size[c]) == 0,
						      "data %d/%d", round, c);
						checked++;
					}
				}
				if (!sdone[c])
					CHECK(chan_tx_test(tx[c], s[c], &sdone[c], NULL, NULL) == 0, "tx");
				all &= done[c] && sdone[c];
			}
			if (all)
				break;
		}
		for (int c = 0; c < NCONN; c++)
			CHECK(done[c] && sdone[c], "round %d conn %d did not complete", round, c);
	}
	CHECK(checked == 60 * NCONN, "%d messages checked", checked);
	struct fst_link *st = (struct fst_link *)((uint8_t *)fbase + ((struct fst_shm *)fbase)->state_off);
	CHECK(atomic_load(&st[2].msgs) == 60 * NCONN, "downlink saw every message");
	CHECK(atomic_load(&st[2].late_n) == 60 * NCONN, "lateness recorded for each");
	CHECK(atomic_load(&st[2].early) == 0, "none early");
	CHECK(atomic_load(&st[0].msgs) == 120 && atomic_load(&st[1].msgs) == 60, "uplinks");
	CHECK(atomic_load(&st[2].queue_ns) > 0, "the incast queued on the downlink");

	for (int c = 0; c < NCONN; c++) {
		chan_tx_free(tx[c]);
		chan_rx_free(rx[c]);
		munmap(shm[c], clen);
	}
	fst_view_free(v);
	munmap(fbase, flen);
	free(src);
	free(dst);
	printf("test_fstate: %d messages, every one at or after its modelled time\n", checked);
}

/* A fabric state of the NLINK links for NCONN NICs, and a connection over uplink up and the
 * downlink. */
static struct fst_view *hops_fabric(struct model_link *links, void **base, size_t *len)
{
	links_init(links);
	*len = fst_bytes(NLINK, NCONN, 0);
	*base = map(*len);
	struct fst_view *v = NULL;
	CHECK(fst_format(*base, *len, NLINK, links, NCONN, 42, 0) == 0 &&
		      fst_view_new(*base, *len, &v) == 0,
	      "fabric");
	return v;
}

/* fst_record_xlateness: every delivery from another host counted on its last link and by the
 * sending host (sum and maximum), a host beyond FST_MAX_HOSTS on the link only. */
static void test_xlateness_by_host(void)
{
	struct model_link links[NLINK];
	void *base;
	size_t len;
	struct fst_view *v = hops_fabric(links, &base, &len);
	const struct fst_link *st = (const struct fst_link *)((uint8_t *)v->shm + v->shm->state_off);
	fst_record_xlateness(v->shm, 2, 5000, 3);
	fst_record_xlateness(v->shm, 2, 1000, 3);
	fst_record_xlateness(v->shm, 2, 7, 0);
	fst_record_xlateness(v->shm, 2, 9, FST_MAX_HOSTS);
	fst_record_xlateness(v->shm, 2, -1, 3); /* not a delivery time: not counted */
	const struct fst_xhost *h3 = fst_xhost(v->shm, 3), *h0 = fst_xhost(v->shm, 0);
	CHECK(h3 && h3->n == 2 && h3->late_sum_ns == 6000 && h3->late_max_ns == 5000,
	      "host 3: n %llu sum %llu max %llu", h3 ? (unsigned long long)h3->n : 0,
	      h3 ? (unsigned long long)h3->late_sum_ns : 0,
	      h3 ? (unsigned long long)h3->late_max_ns : 0);
	CHECK(h0 && h0->n == 1 && h0->late_max_ns == 7, "host 0");
	CHECK(!fst_xhost(v->shm, FST_MAX_HOSTS) && fst_xhost(v->shm, 1)->n == 0, "hosts' bounds");
	CHECK(st[2].xlate_n == 4 && st[2].xlate_sum_ns == 6016 && st[2].late_n == 4,
	      "link 2: xlate_n %llu", (unsigned long long)st[2].xlate_n);
	fst_view_free(v);
	munmap(base, len);
}

static struct fst_conn hops_conn(int up, uint64_t host_rate, enum model_switching sw)
{
	struct fst_conn c;
	memset(&c, 0, sizeof(c));
	c.id = 100 + (uint64_t)up;
	c.npath = 2;
	c.path[0] = (uint32_t)up;
	c.path[1] = 2;
	c.src_nic = (uint32_t)up;
	nic_init(&c.nic);
	c.nic.host_rate_bps = host_rate;
	c.switching = sw;
	return c;
}

static int64_t busy_of(struct fst_view *v, int link)
{
	struct fst_link *st = (struct fst_link *)((uint8_t *)v->shm + v->shm->state_off);
	return st[link].busy_until;
}

/*
 * fst_reserve_hops, a path in two pieces: two connections (uplinks 0 and 1) into one downlink,
 * 200 messages in post order of random sizes, each reserved as [0, 1) then [1, 2) from the
 * stamp between them, against fst_reserve on a second fabric state: every arrival and every
 * busy-until to the nanosecond (cut-through and store-and-forward, with a host stage), and
 * [0, 2) in one call the same.
 */
static void test_hops_split(void)
{
	for (int variant = 0; variant < 4; variant++) {
		struct model_link la[NLINK], lb[NLINK];
		void *ba, *bb;
		size_t len;
		struct fst_view *va = hops_fabric(la, &ba, &len), *vb = hops_fabric(lb, &bb, &len);
		enum model_switching sw = variant & 1 ? MODEL_STORE_FORWARD : MODEL_CUT_THROUGH;
		uint64_t host = variant & 2 ? 16000000000ull : 0;
		struct fst_conn ca[2] = {hops_conn(0, host, sw), hops_conn(1, host, sw)};
		struct fst_conn cb[2] = {ca[0], ca[1]};
		uint32_t x = 7;
		int64_t t = 1000;
		int same = 0;
		for (int i = 0; i < 200; i++) {
			x = x * 1103515245 + 12345;
			int k = (int)(x >> 30) & 1;
			uint64_t bytes = (x >> 8) % (300 << 10);
			t += (int64_t)((x >> 3) % 40000);
			struct model_msg m;
			CHECK(fst_reserve(va, &ca[k], t, bytes, &m, NULL) == 0, "fst_reserve");
			struct model_stamp in = {t + ca[k].nic.o_send_ns, t + ca[k].nic.o_send_ns,
						 0},
					   mid, end;
			if (i % 2) {
				CHECK(fst_reserve_hops(vb, &cb[k], 0, 1, bytes, t, &in, &mid, NULL) == 0 &&
					      fst_reserve_hops(vb, &cb[k], 1, 1, bytes, t, &mid,
							       &end, NULL) == 0,
				      "fst_reserve_hops");
			} else {
				CHECK(fst_reserve_hops(vb, &cb[k], 0, 2, bytes, t, &in, &end, NULL) == 0,
				      "fst_reserve_hops whole");
			}
			same += end.last_ns == m.arrive_ns && busy_of(va, 0) == busy_of(vb, 0) &&
				busy_of(va, 1) == busy_of(vb, 1) &&
				busy_of(va, 2) == busy_of(vb, 2);
		}
		CHECK(same == 200, "variant %d: %d of 200 the same", variant, same);
		fst_view_free(va);
		fst_view_free(vb);
		munmap(ba, len);
		munmap(bb, len);
	}
	/* what it refuses */
	struct model_link l[NLINK];
	void *b;
	size_t len;
	struct fst_view *v = hops_fabric(l, &b, &len);
	struct fst_conn c = hops_conn(0, 0, MODEL_CUT_THROUGH);
	struct model_stamp in = {0, 0, 0}, out;
	CHECK(fst_reserve_hops(v, &c, 1, 2, 8, 0, &in, &out, NULL) == -EINVAL, "beyond the path");
	CHECK(fst_reserve_hops(v, &c, -1, 1, 8, 0, &in, &out, NULL) == -EINVAL, "before it");
	v->links[2].loss.kind = MODEL_LOSS_BERNOULLI;
	CHECK(fst_reserve_hops(v, &c, 1, 1, 8, 0, &in, &out, NULL) == -EOPNOTSUPP, "a lossy hop");
	CHECK(fst_reserve_hops(v, &c, 0, 1, 8, 0, &in, &out, NULL) == 0, "an unimpaired one");
	fst_view_free(v);
	munmap(b, len);
}

/*
 * The approximation: A (uplink 0, 25 Gb/s, 2000 ns) posted at 0 and B (uplink 1, 2500 ns) at
 * 600, 64 KiB each, into the 10 Gb/s downlink (3000 ns; T(W) = (65536 + 16 * 64) * 0.8 =
 * 53248 ns). Their first bits reach the downlink at 2300 and 3400 (o_send 300). Reserved in
 * post order (one host): A's downlink train 2300..55548, B's 55548..108796. When B's record
 * reaches the downlink's owner first: B 3400..56648, A 56648..109896. So A arrives 54348 ns
 * later and B 52148 ns earlier: each moves by at most the other's train plus the 1100 ns
 * between their arrivals at the link, and the pair's last arrival by those 1100 ns (the link
 * is work-conserving in either order).
 */
static void test_hops_arrival_order(void)
{
	struct model_link l[NLINK];
	void *b;
	size_t len;
	int64_t post_order[2], swapped[2];
	for (int run = 0; run < 2; run++) {
		struct fst_view *v = hops_fabric(l, &b, &len);
		struct fst_conn c[2] = {hops_conn(0, 0, MODEL_CUT_THROUGH),
					hops_conn(1, 0, MODEL_CUT_THROUGH)};
		struct model_stamp in[2] = {{300, 300, 0}, {900, 900, 0}}, mid[2], end[2];
		for (int k = 0; k < 2; k++)
			CHECK(fst_reserve_hops(v, &c[k], 0, 1, 65536, in[k].first_ns, &in[k], &mid[k], NULL) == 0,
			      "uplink");
		for (int i = 0; i < 2; i++) {
			int k = run ? 1 - i : i;
			CHECK(fst_reserve_hops(v, &c[k], 1, 1, 65536, in[k].first_ns, &mid[k], &end[k], NULL) == 0,
			      "down");
		}
		for (int k = 0; k < 2; k++)
			(run ? swapped : post_order)[k] = end[k].last_ns;
		fst_view_free(v);
		munmap(b, len);
	}
	CHECK(post_order[0] == 55548 + 3000 && post_order[1] == 108796 + 3000,
	      "post order: %lld %lld", (long long)post_order[0], (long long)post_order[1]);
	CHECK(swapped[1] == 56648 + 3000 && swapped[0] == 109896 + 3000, "swapped: %lld %lld",
	      (long long)swapped[0], (long long)swapped[1]);
	printf("  fst_reserve_hops: reserved in arrival order, A %+lld ns, B %+lld ns, the last "
	       "%+lld ns\n",
	       (long long)(swapped[0] - post_order[0]), (long long)(swapped[1] - post_order[1]),
	       (long long)(swapped[0] - post_order[1]));
}

static const struct check_case cases[] = {
	CHECK_CASE(test_never_early),
	CHECK_CASE(test_hops_split),
	CHECK_CASE(test_xlateness_by_host),
	CHECK_CASE(test_hops_arrival_order),
};

CHECK_MAIN(cases)
