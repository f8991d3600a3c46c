/* SPDX-License-Identifier: MIT */
/*
 * test_chan_direct.c - chan's one-sided delivery (the GPU path's protocol),
 * in one process, over a stand-in copy engine: "regions" are host buffers,
 * a copy is done at start but reported done only after a few polls, so the
 * tests see the sender wait for its copy and never for the receiver.
 */
#include "sim/core/chan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sim/test/check.h"
#include "sim/test/fenv.h"

/* ---- the stand-in copy engine ---------------------------------------------------------- */

#define NREG 4
struct fake_dma {
	uint8_t *reg[NREG + 1]; /* region id -> memory (id 0 unused) */
	uint64_t reg_len[NREG + 1];
	int polls_needed; /* polls before a copy is reported done */
	int hold;	  /* while set, no copy is reported done */
	int fail_start;	  /* start returns this (negative errno) */
	int fail_at;	  /* the fail_at-th start (from 1) returns -EIO */
	int fail_poll;	  /* poll returns this */
	int polls[CHAN_MAX_SENDS * 4];
	uint64_t next;
	int started, drained;
	int64_t started_at[8];	 /* when the first copies started (CLOCK_MONOTONIC ns) */
	uint64_t started_end[8]; /* ... and where in their region they ended */
	uint32_t flips;
	struct armed *armed_by; /* armed_ops only */
	char where[CHAN_WHERE_LEN];
};

static int fake_start(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		      uint64_t len, const struct chan_flip *flips, uint32_t nflips,
		      uint64_t *ticket)
{
	struct fake_dma *d = ctx;
	snprintf(d->where, sizeof(d->where), "%s", where);
	if (d->fail_start)
		return d->fail_start;
	if (d->fail_at && d->started + 1 == d->fail_at)
		return -EIO;
	if (region == 0 || region > NREG || off > d->reg_len[region] ||
	    len > d->reg_len[region] - off)
		return -ERANGE;
	memcpy(d->reg[region] + off, src, len);
	for (uint32_t k = 0; k < nflips; k++)
		d->reg[region][off + flips[k].off] ^= flips[k].mask;
	d->flips += nflips;
	if (d->started < 8) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		d->started_at[d->started] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		d->started_end[d->started] = off + len;
	}
	*ticket = d->next++;
	d->polls[*ticket % (sizeof(d->polls) / sizeof(d->polls[0]))] = 0;
	d->started++;
	return 0;
}

static int fake_poll(void *ctx, uint64_t ticket)
{
	struct fake_dma *d = ctx;
	if (d->fail_poll)
		return d->fail_poll;
	int *p = &d->polls[ticket % (sizeof(d->polls) / sizeof(d->polls[0]))];
	return ++*p > d->polls_needed && !d->hold;
}

static void fake_drain(void *ctx)
{
	((struct fake_dma *)ctx)->drained++;
}

static const struct chan_dma fake_ops = {
	.start = fake_start, .poll = fake_poll, .drain = fake_drain};

/*
 * The same engine with armed copies: arm records the copy and does nothing more; fire makes it
 * (and stamps when); drain fires what is still armed; a poll of a copy not yet fired counts as an
 * error (the channel must never wait for one it has not let go). arm_eop_from: arm answers
 * -EOPNOTSUPP from that arm on (from 1); arm_fail_at: that arm fails with -EIO.
 */
#define ARMED_MAX 64
static int64_t mono_ns(void);
struct armed {
	struct fake_dma *d;
	int arm_eop_from, arm_fail_at;
	int armed, fired, polled_unfired, out_of_order, src_dev;
	struct {
		uint64_t ticket, region, off, len;
		const void *src;
		int fired;
	} c[ARMED_MAX];
	int64_t fired_at[ARMED_MAX];
	int64_t armed_at[ARMED_MAX];
};

static struct armed *armed_of(void *ctx)
{
	return ((struct fake_dma *)ctx)->armed_by;
}

static int fake_arm(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		    int src_dev, uint64_t len, uint64_t *ticket)
{
	struct fake_dma *d = ctx;
	struct armed *a = armed_of(ctx);
	snprintf(d->where, sizeof(d->where), "%s", where);
	if (a->arm_eop_from && a->armed + 1 >= a->arm_eop_from)
		return -EOPNOTSUPP;
	if (a->arm_fail_at && a->armed + 1 == a->arm_fail_at)
		return -EIO;
	if (region == 0 || region > NREG || off > d->reg_len[region] ||
	    len > d->reg_len[region] - off || a->armed == ARMED_MAX)
		return -ERANGE;
	int i = a->armed++;
	a->armed_at[i] = mono_ns();
	a->c[i].region = region, a->c[i].off = off, a->c[i].len = len, a->c[i].src = src;
	a->src_dev = src_dev;
	*ticket = a->c[i].ticket = d->next++;
	d->polls[*ticket % (sizeof(d->polls) / sizeof(d->polls[0]))] = 0;
	return 0;
}

/* The armed copy of ticket t, or -1 (a started one). */
static int armed_index(struct armed *a, uint64_t t)
{
	for (int i = 0; i < a->armed; i++)
		if (a->c[i].ticket == t)
			return i;
	return -1;
}

static void fake_fire(void *ctx, uint64_t ticket)
{
	struct fake_dma *d = ctx;
	struct armed *a = armed_of(ctx);
	int i = armed_index(a, ticket);
	if (i < 0 || a->c[i].fired)
		return;
	for (int k = 0; k < i; k++) /* every armed copy before it was fired first */
		a->out_of_order += !a->c[k].fired;
	memcpy(d->reg[a->c[i].region] + a->c[i].off, a->c[i].src, a->c[i].len);
	a->c[i].fired = 1;
	a->fired_at[i] = mono_ns();
	a->fired++;
}

static int fake_poll_armed(void *ctx, uint64_t ticket)
{
	struct armed *a = armed_of(ctx);
	int i = armed_index(a, ticket);
	if (i >= 0 && !a->c[i].fired) {
		a->polled_unfired++;
		return 0;
	}
	return fake_poll(ctx, ticket);
}

static void fake_drain_armed(void *ctx)
{
	struct armed *a = armed_of(ctx);
	for (int i = 0; i < a->armed; i++)
		if (!a->c[i].fired) {
			a->c[i].fired = 1; /* let go, as the engine's drain does */
			a->fired++;
		}
	fake_drain(ctx);
}

static const struct chan_dma armed_ops = {.start = fake_start,
					  .poll = fake_poll_armed,
					  .drain = fake_drain_armed,
					  .arm = fake_arm,
					  .fire = fake_fire};
static const struct chan_dma armed_whole_ops = {.start = fake_start,
						.poll = fake_poll_armed,
						.drain = fake_drain_armed,
						.arm = fake_arm,
						.fire = fake_fire,
						.arm_whole = 1};
#define AHEAD_NS 5000000 /* armed at most 5 ms ahead */
static const struct chan_dma armed_whole_ahead_ops = {.start = fake_start,
						      .poll = fake_poll_armed,
						      .drain = fake_drain_armed,
						      .arm = fake_arm,
						      .fire = fake_fire,
						      .arm_ahead_ns = AHEAD_NS,
						      .arm_whole = 1};
static const struct chan_dma armed_ahead_ops = {.start = fake_start,
						.poll = fake_poll_armed,
						.drain = fake_drain_armed,
						.arm = fake_arm,
						.fire = fake_fire,
						.arm_ahead_ns = AHEAD_NS};

/* ---- a channel ------------------------------------------------------------------------- */

struct fix {
	void *base;
	size_t len;
	struct chan_tx *tx;
	struct chan_rx *rx;
	struct fake_dma dma;
};

static void fix_up(struct fix *f, uint32_t nslots)
{
	memset(f, 0, sizeof(*f));
	struct chan_geom g = {.slot_bytes = 4096, .nslots = nslots};
	f->len = chan_shm_bytes(&g);
	f->base = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f->base == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	CHECK(chan_format(f->base, f->len, &g, 5) == 0, "format");
	CHECK(chan_tx_new(f->base, f->len, &f->tx) == 0 &&
		      chan_rx_new(f->base, f->len, &f->rx) == 0,
	      "attach");
	f->dma.polls_needed = 3;
	CHECK(chan_tx_set_dma(f->tx, &fake_ops, &f->dma) == 0, "set dma");
	CHECK(chan_rx_set_where(f->rx, "proc-42") == 0, "set where");
}

static void fix_down(struct fix *f)
{
	chan_tx_free(f->tx);
	chan_rx_free(f->rx);
	munmap(f->base, f->len);
	for (int i = 0; i <= NREG; i++)
		free(f->dma.reg[i]);
}

static uint8_t *region(struct fix *f, uint64_t id, uint64_t len)
{
	f->dma.reg[id] = malloc(len);
	f->dma.reg_len[id] = len;
	memset(f->dma.reg[id], 0xee, len);
	return f->dma.reg[id];
}

static void fill(uint8_t *p, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Test the send until done, never touching the receiver: the one-sided property. */
static int send_alone(struct fix *f, chan_req s, uint64_t *sent, int *polls)
{
	int done = 0, rc = 0;
	for (*polls = 0; *polls < 1000000 && !done; ++*polls)
		if ((rc = chan_tx_test(f->tx, s, &done, sent, NULL)))
			return rc;
	return done ? 0 : -ETIMEDOUT;
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_one_sided(void)
{
	struct fix f;
	fix_up(&f, 4);
	enum { N = 100000 }; /* far more than a 4-slot x 4 KiB staging ring */
	uint8_t *mem = region(&f, 2, N + 4096), src[N];
	fill(src, N, 1);
	void *bufs[1] = {mem + 4096};
	uint64_t cap = N, got = 0, sent = 0;
	struct chan_region where = {.id = 2, .off = 4096};
	chan_req r, s;
	CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &where, 0, &r, NULL) == 0, "post");
	CHECK(chan_tx_post(f.tx, src, N, 0, &s, NULL) == 0, "send");
	CHECK(strcmp(f.dma.where, "proc-42") == 0, "the engine got the receiver's where: '%s'",
	      f.dma.where);
	int polls;
	CHECK(send_alone(&f, s, &sent, &polls) == 0 && sent == N,
	      "the send completes with no call on the receiving side");
	/* the post polled once, then each test once */
	CHECK(polls >= f.dma.polls_needed, "not before its copy is done (%d tests)", polls);
	CHECK(memcmp(mem + 4096, src, N) == 0 && mem[4095] == 0xee, "exact, in place");
	int done = 0;
	for (int i = 0; i < 100 && !done; i++)
		CHECK(chan_rx_test(f.rx, r, &done, &got, NULL) == 0, "rx test");
	CHECK(done && got == N, "the receive completes: %" PRIu64, got);
	struct chan_stats st;
	chan_stats(f.base, &st);
	CHECK(st.tx_bytes == N && st.rx_bytes == N && st.tx_msgs == 1 && st.rx_msgs == 1,
	      "counted like a staged message: %" PRIu64 " %" PRIu64, st.tx_bytes, st.rx_bytes);
	fix_down(&f);
}

/* Host and GPU receives interleaved on one channel: each by its path, all in order. */
static void test_mixed_order(void)
{
	struct fix f;
	fix_up(&f, 8);
	enum { K = 24, N = 9000 };
	uint8_t *mem = region(&f, 1, (uint64_t)K * N);
	uint8_t *host = calloc(K, N), *src = malloc((size_t)K * N);
	fill(src, (uint64_t)K * N, 9);
	chan_req r[K], s[K];
	for (int k = 0; k < K; k++) {
		int gpu = k % 3 != 0;
		void *bufs[1] = {gpu ? mem + (size_t)k * N : host + (size_t)k * N};
		uint64_t cap = N;
		struct chan_region w = {.id = gpu ? 1 : 0, .off = (uint64_t)k * N};
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, 0, &r[k], NULL) == 0,
		      "post %d", k);
		int rc;
		do /* the staging ring (8 slots) fills up: let the receiver drain it */
			rc = chan_tx_post(f.tx, src + (size_t)k * N, N - k, 0, &s[k], NULL);
		while (rc == -EAGAIN && chan_rx_progress(f.rx, NULL) == 0);
		CHECK(rc == 0, "send %d: %d", k, rc);
	}
	int left = 2 * K, sd[K] = {0}, rd[K] = {0};
	for (long i = 0; i < 1000000 && left; i++)
		for (int k = 0; k < K; k++) {
			uint64_t n;
			if (!rd[k]) {
				CHECK(chan_rx_test(f.rx, r[k], &rd[k], &n, NULL) == 0, "rx %d", k);
				if (rd[k]) {
					left--;
					CHECK(n == (uint64_t)(N - k), "recv %d size %" PRIu64, k,
					      n);
				}
			}
			if (!sd[k]) {
				CHECK(chan_tx_test(f.tx, s[k], &sd[k], &n, NULL) == 0, "tx %d", k);
				left -= sd[k];
			}
		}
	CHECK(left == 0, "all done (%d left)", left);
	for (int k = 0; k < K; k++) {
		const uint8_t *dst = k % 3 ? mem + (size_t)k * N : host + (size_t)k * N;
		CHECK(memcmp(dst, src + (size_t)k * N, N - k) == 0, "message %d exact", k);
	}
	free(host);
	free(src);
	fix_down(&f);
}

/* The two ends disagree on where memory lives: both get a clear -EPROTO. */
static void test_mismatch(void)
{
	struct fix f;
	fix_up(&f, 4);
	uint8_t *mem = region(&f, 1, 64), src[64] = {0}, host[64];
	void *bufs[1] = {mem};
	uint64_t cap = 64;
	struct chan_region w = {.id = 1, .off = 0};
	chan_req r, s;
	struct chan_err e;
	/* a tx without a copy engine, facing a GPU receive */
	struct chan_tx *bare = NULL;
	CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, 0, &r, NULL) == 0, "post");
	chan_tx_free(f.tx);
	f.tx = NULL;
	void *b2 = NULL;
	struct chan_geom g = {.slot_bytes = 4096, .nslots = 4};
	size_t len2 = chan_shm_bytes(&g);
	b2 = mmap(NULL, len2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct chan_rx *rx2 = NULL;
	CHECK(chan_format(b2, len2, &g, 6) == 0 && chan_tx_new(b2, len2, &bare) == 0 &&
		      chan_rx_new(b2, len2, &rx2) == 0,
	      "second channel");
	CHECK(chan_rx_post_in(rx2, 1, bufs, &cap, NULL, &w, 0, &r, NULL) == 0, "post 2");
	CHECK(chan_tx_post(bare, src, 8, 0, &s, &e) == -EPROTO &&
		      strstr(e.what, "no GPU data path"),
	      "no engine: %s", e.what);
	/* a device source facing a host receive */
	void *b3 = mmap(NULL, len2, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct chan_tx *tx3 = NULL;
	struct chan_rx *rx3 = NULL;
	CHECK(chan_format(b3, len2, &g, 7) == 0 && chan_tx_new(b3, len2, &tx3) == 0 &&
		      chan_rx_new(b3, len2, &rx3) == 0 &&
		      chan_tx_set_dma(tx3, &fake_ops, &f.dma) == 0,
	      "third channel");
	bufs[0] = host;
	CHECK(chan_rx_post(rx3, 1, bufs, &cap, NULL, &r, NULL) == 0, "host post");
	CHECK(chan_tx_post_src(tx3, src, 8, 0, CHAN_MEM_DEVICE, &s, &e) == -EPROTO &&
		      strstr(e.what, "from GPU memory into a receive in host memory"),
	      "device source, host receive: %s", e.what);
	int done;
	CHECK(chan_rx_test(rx3, r, &done, NULL, &e) == -ECONNRESET && e.value[0] == EPROTO,
	      "the receiver fails too, naming the sender's error: %d %" PRIu64, e.code, e.value[0]);
	chan_tx_free(bare);
	chan_rx_free(rx2);
	chan_tx_free(tx3);
	chan_rx_free(rx3);
	munmap(b2, len2);
	munmap(b3, len2);
	fix_down(&f);
}

/* A sender that lies: a one-sided descriptor for a host buffer, a staged chunk for a GPU one. */
static void test_hostile(void)
{
	for (int which = 0; which < 2; which++) {
		struct fix f;
		fix_up(&f, 4);
		uint8_t *mem = region(&f, 1, 64), host[64];
		void *bufs[1] = {which ? (void *)mem : (void *)host};
		uint64_t cap = 64;
		struct chan_region w = {.id = which ? 1 : 0, .off = 0};
		chan_req r;
		struct chan_err e = {0};
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, 0, &r, NULL) == 0, "post");
		struct chan_shm *shm = f.base;
		struct chan_desc *d = (struct chan_desc *)((uint8_t *)f.base + shm->desc_off);
		*d = (struct chan_desc){.msg = 0,
					.recv = 0,
					.total = 8,
					.len = which ? 8 : 0,
					.flags = CHAN_F_LAST | (which ? 0 : CHAN_F_DIRECT)};
		atomic_store(&shm->tx.head, 1);
		int done = 0;
		CHECK(chan_rx_test(f.rx, r, &done, NULL, &e) == -EPROTO && !done &&
			      strstr(e.what,
				     which ? "staged chunk for a receive buffer in GPU"
					   : "one-sided descriptor does not match"),
		      "case %d: %s", which, e.what ? e.what : "(none)");
		fix_down(&f);
	}
}

/* A receive of 64 bytes into region 1 (made here) at offset off. */
static void post_region(struct fix *f, uint64_t off, chan_req *r)
{
	uint8_t *mem = region(f, 1, 64);
	void *bufs[1] = {mem};
	uint64_t cap = 64;
	struct chan_region w = {.id = 1, .off = off};
	CHECK(chan_rx_post_in(f->rx, 1, bufs, &cap, NULL, &w, 0, r, NULL) == 0, "post");
}

/* A receive whose buffer offset would wrap a piece's offset past 2^64: the send fails. */
static void test_offset_overflow(void)
{
	struct fix f;
	fix_up(&f, 4);
	uint8_t src[8] = {0};
	chan_req r, s;
	struct chan_err e = {0};
	post_region(&f, UINT64_MAX - 4, &r);
	CHECK(chan_tx_post(f.tx, src, sizeof(src), 0, &s, &e) == -EPROTO && e.what &&
		      strstr(e.what, "offset in its region overflows") && f.dma.started == 0,
	      "%s", e.what ? e.what : "(none)");
	fix_down(&f);
}

static void test_engine_failures(void)
{
	struct fix f;
	fix_up(&f, 4);
	uint8_t src[64] = {0};
	chan_req r, s;
	struct chan_err e;
	post_region(&f, 0, &r);
	f.dma.fail_poll = -EFAULT;
	CHECK(chan_tx_post(f.tx, src, 8, 0, &s, NULL) == 0, "send");
	int done = 0;
	CHECK(chan_tx_test(f.tx, s, &done, NULL, &e) == -EIO && e.value[1] == EFAULT,
	      "a copy that fails fails the send: %d", e.code);
	CHECK(chan_rx_test(f.rx, r, &done, NULL, &e) == -ECONNRESET, "and the receive, as peer's");
	fix_down(&f);

	fix_up(&f, 4);
	post_region(&f, 0, &r);
	f.dma.fail_start = -ERANGE;
	CHECK(chan_tx_post(f.tx, src, 8, 0, &s, &e) == -EIO && e.value[1] == ERANGE,
	      "a refused copy fails at post: %d", e.code);
	fix_down(&f);
	CHECK(f.dma.drained == 0, "nothing in flight, nothing drained");
}

/*
 * On a modelled fabric: a one-sided send never completes before the model's
 * send time, the receive never before its delivery time, and a corrupting
 * link flips exactly the bits it flips on the staged path.
 */
/* A NIC with RC's retries, for the modelled tests (resolve it with their links). */
static const struct model_nic test_nic = {.o_send_ns = 300,
					  .o_recv_ns = 300,
					  .ack_proc_ns = 200,
					  .timeout_exp = 10,
					  .retry_count = 7,
					  .timeout_scale_ppm = 1000000};

/* Two links of a route, rate_bps and latency_ns each, 4 KiB packets with 64 B headers. */
static void two_links(struct model_link links[2], uint64_t rate_bps, int64_t latency_ns)
{
	memset(links, 0, 2 * sizeof(links[0]));
	for (int i = 0; i < 2; i++) {
		links[i].rate_bps = rate_bps;
		links[i].latency_ns = latency_ns;
		links[i].mtu = 4096;
		links[i].hdr_bytes = 64;
	}
}

/* A fabric state of links[2] (resolved) and a channel routed over both, in f. */
struct mfab {
	void *base;
	size_t len;
	struct fst_view *v;
};

static void fix_up_modelled(struct fix *f, struct mfab *m, const struct model_link *links,
			    const struct model_nic *nic, uint64_t seed)
{
	m->v = fenv_map(2, links, 2, seed, &m->base, &m->len);
	fix_up(f, 4);
	struct model_path p = {.nhops = 2, .switching = MODEL_CUT_THROUGH};
	p.link_id[1] = 1;
	p.hop[0] = &m->v->links[0];
	p.hop[1] = &m->v->links[1];
	CHECK(chan_set_route(f->base, &p, 0, nic, 0, 1) == 0 &&
		      chan_tx_set_fabric(f->tx, m->v) == 0 && chan_rx_set_fabric(f->rx, m->v) == 0,
	      "route");
}

static void fix_down_modelled(struct fix *f, struct mfab *m)
{
	fix_down(f);
	fenv_unmap(m->v, m->base, m->len);
}

static void test_modelled(void)
{
	struct model_link links[2];
	two_links(links, 1000000000ull, 20000); /* 1 Gb/s: 64 KiB take ~0.5 ms */
	links[1].corrupt_p = MODEL_PROB_ONE / 2;
	struct model_nic nic = test_nic;
	fenv_resolve(links, 2, &nic);
	enum { N = 65536 };
	static uint8_t src[N], out[2][N];
	fill(src, N, 4);
	for (int direct = 0; direct < 2; direct++) {
		struct fix f;
		struct mfab mf;
		fix_up_modelled(&f, &mf, links, &nic, 77);
		uint8_t *mem = region(&f, 1, N);
		void *bufs[1] = {direct ? (void *)mem : (void *)out[0]};
		uint64_t cap = N;
		struct chan_region w = {.id = direct ? 1 : 0};
		chan_req r, s;
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, 0, &r, NULL) == 0, "post");
		CHECK(chan_tx_post(f.tx, src, N, 0, &s, NULL) == 0, "send");
		struct chan_times t;
		chan_tx_times(f.tx, s, &t);
		int sd = 0, rd = 0;
		int64_t sdone_at = 0, rdone_at = 0, deadline = mono_ns() + 5000000000LL;
		while ((!sd || !rd) && mono_ns() < deadline) {
			if (!sd && chan_tx_test(f.tx, s, &sd, NULL, NULL) == 0 && sd)
				sdone_at = mono_ns();
			if (!rd && chan_rx_test(f.rx, r, &rd, NULL, NULL) == 0 && rd)
				rdone_at = mono_ns();
		}
		CHECK(sd && rd, "delivered (%d)", direct);
		CHECK(t.done_ns > 0 && sdone_at >= t.done_ns,
		      "send done %" PRId64 " ns before the model's time (direct %d)",
		      t.done_ns - sdone_at, direct);
		CHECK(t.ready_ns > 0 && rdone_at >= t.ready_ns,
		      "receive done %" PRId64 " ns before the model's time (direct %d)",
		      t.ready_ns - rdone_at, direct);
		if (direct) {
			memcpy(out[1], mem, N);
			CHECK(f.dma.flips > 0, "the model corrupted some packets");
		}
		fix_down_modelled(&f, &mf);
	}
	int diff[2] = {0, 0}, same = 1;
	for (int i = 0; i < N; i++) {
		diff[0] += out[0][i] != src[i];
		diff[1] += out[1][i] != src[i];
		same &= out[0][i] == out[1][i];
	}
	CHECK(same, "the same bits flipped on both paths (%d and %d bytes differ)", diff[0],
	      diff[1]);
	CHECK(memcmp(out[0], src, N) != 0, "and some were");
}

/* A receive of n bytes into host (staged) or region 1 (one-sided), read as it fills or not,
 * poisoned with 0xee, and the send of src into it. Returns the buffer. */
static uint8_t *post_one(struct fix *f, int direct, int flag, uint8_t *host, const uint8_t *src,
			 uint64_t n, chan_req *r, chan_req *s)
{
	uint8_t *mem = direct ? region(f, 1, n) : host;
	memset(mem, 0xee, n);
	void *bufs[1] = {mem};
	struct chan_region w = {.id = direct ? 1 : 0};
	CHECK(chan_rx_post_in(f->rx, 1, bufs, &n, NULL, &w, flag ? CHAN_RX_AT_DELIVERY : 0, r,
			      NULL) == 0,
	      "post");
	CHECK(chan_tx_post(f->tx, src, n, 0, s, NULL) == 0, "send");
	return mem;
}

/* Test both ends until done or failed (10 s at most): the send's and the receive's codes. */
static void run_both(struct fix *f, chan_req s, chan_req r, int *src, int *rrc)
{
	int sd = 0, rd = 0;
	*src = *rrc = 0;
	int64_t deadline = mono_ns() + 10000000000LL;
	while ((!(sd || *src) || !(rd || *rrc)) && mono_ns() < deadline) {
		if (!sd && !*src)
			*src = chan_tx_test(f->tx, s, &sd, NULL, NULL);
		if (!rd && !*rrc)
			*rrc = chan_rx_test(f->rx, r, &rd, NULL, NULL);
	}
	if (!*src && !sd)
		*src = -ETIME;
	if (!*rrc && !rd)
		*rrc = -ETIME;
}

/*
 * A receive read as it fills (CHAN_RX_AT_DELIVERY: NCCL's LL and LL128) gets no byte before the
 * model's delivery time, staged (the receiver holds its chunks) or one-sided (the sender holds
 * its copy); a plain receive may fill early, and on a 2 x 10 ms route it does: without the flag
 * the same check fails, so the test can.
 */
static void test_at_delivery(void)
{
	struct model_link links[2];
	two_links(links, 10000000000ull, 10000000); /* 20 ms away: far above any poll gap */
	struct model_nic nic = test_nic;
	fenv_resolve(links, 2, &nic);
	enum { N = 10000 }; /* 3 chunks of a 4-slot x 4 KiB ring */
	static uint8_t src[N], host[N];
	fill(src, N, 9);
	for (int direct = 0; direct < 2; direct++)
		for (int flag = 0; flag < 2; flag++) {
			struct fix f;
			struct mfab mf;
			fix_up_modelled(&f, &mf, links, &nic, 78);
			chan_req r, s;
			uint8_t *mem = post_one(&f, direct, flag, host, src, N, &r, &s);
			struct chan_times t;
			chan_tx_times(f.tx, s, &t);
			int sd = 0, rd = 0;
			/* when byte 0 (the first chunk) and byte N - 1 (the last) were first seen */
			int64_t seen[2] = {0, 0}, rdone_at = 0, deadline = mono_ns() + 5000000000LL;
			while ((!sd || !rd) && mono_ns() < deadline) {
				if (!sd && chan_tx_test(f.tx, s, &sd, NULL, NULL) != 0)
					break;
				if (!rd && chan_rx_test(f.rx, r, &rd, NULL, NULL) != 0)
					break;
				if (rd && !rdone_at)
					rdone_at = mono_ns();
				/* read, then the clock: a byte seen landed no later than that */
				int landed[2] = {mem[0] != 0xee, mem[N - 1] != 0xee};
				int64_t now = mono_ns();
				for (int k = 0; k < 2; k++)
					if (landed[k] && !seen[k])
						seen[k] = now;
			}
			CHECK(sd && rd && memcmp(mem, src, N) == 0,
			      "delivered exact (direct %d, flag %d)", direct, flag);
			CHECK(t.ready_ns > 0 && rdone_at >= t.ready_ns, "completion never early");
			/* the last byte arrives o_recv (300 ns) before the completion; staged, the first
			 * chunk (4096 B) streams in (N - 4096) byte times (800 ps at 10 Gb/s) before
			 * the last; one-sided, the whole message lands at once */
			int64_t last_due = t.ready_ns - nic.o_recv_ns;
			int64_t first_due = direct ? last_due : last_due - (N - 4096) * 800 / 1000;
			if (flag)
				CHECK(seen[0] >= first_due && seen[1] >= last_due,
				      "landed before the model's arrival times (direct %d): first "
				      "chunk %" PRId64 " ns, last %" PRId64 " ns early",
				      direct, first_due - seen[0], last_due - seen[1]);
			else
				CHECK(seen[0] && seen[0] < t.ready_ns - 10000000,
				      "a plain receive fills at once (direct %d: %" PRId64
				      " us before the delivery time)",
				      direct, (t.ready_ns - seen[0]) / 1000);
			fix_down_modelled(&f, &mf);
		}
}

/*
 * A message the model fails (every packet lost: retries exhausted) never lands in a receive read
 * as it fills, staged or one-sided (whose copy is not even started); a plain receive takes its
 * bytes as they come, and fails all the same.
 */
static void test_at_delivery_failed_message(void)
{
	struct model_link links[2];
	two_links(links, 10000000000ull, 1000);
	links[0].loss.kind = MODEL_LOSS_BERNOULLI;
	links[0].loss.p[0] = UINT32_MAX; /* every packet, every retry */
	struct model_nic nic = test_nic;
	nic.timeout_exp = 4; /* a few ms for the retries to run out */
	nic.retry_count = 2;
	fenv_resolve(links, 2, &nic);
	enum { N = 10000 };
	static uint8_t src[N], host[N];
	fill(src, N, 11);
	for (int direct = 0; direct < 2; direct++)
		for (int flag = 0; flag < 2; flag++) {
			struct fix f;
			struct mfab mf;
			fix_up_modelled(&f, &mf, links, &nic, 79);
			chan_req r, s;
			uint8_t *mem = post_one(&f, direct, flag, host, src, N, &r, &s);
			int src_, rrc;
			run_both(&f, s, r, &src_, &rrc);
			CHECK(src_ == -ETIMEDOUT && rrc == -ETIMEDOUT,
			      "both ends fail (direct %d, flag %d): %d %d", direct, flag, src_,
			      rrc);
			int landed = 0;
			for (int i = 0; i < N; i++)
				landed += mem[i] != 0xee;
			if (flag)
				CHECK(landed == 0 && (!direct || f.dma.started == 0),
				      "a failed message landed (direct %d): %d bytes, %d copies",
				      direct, landed, f.dma.started);
			else
				CHECK(landed > 0, "a plain receive took the bytes (direct %d)",
				      direct);
			fix_down_modelled(&f, &mf);
		}
}

/*
 * Held one-sided copies (CHAN_RX_AT_DELIVERY) each start at their own arrival, not once the copy
 * ahead of them is seen done: with the first copy still running, the second starts all the same,
 * and neither before its arrival time.
 */
static void test_at_delivery_copies_overlap(void)
{
	struct model_link links[2];
	two_links(links, 10000000000ull, 1000000); /* 2 ms away */
	struct model_nic nic = test_nic;
	fenv_resolve(links, 2, &nic);
	enum { N = 1000 };
	static uint8_t src[2][N];
	fill(src[0], N, 12);
	fill(src[1], N, 13);
	struct fix f;
	struct mfab mf;
	fix_up_modelled(&f, &mf, links, &nic, 80);
	uint8_t *mem = region(&f, 1, 2 * N);
	chan_req r[2], s[2];
	struct chan_times t[2];
	for (int i = 0; i < 2; i++) {
		void *bufs[1] = {mem + i * N};
		uint64_t cap = N;
		struct chan_region w = {.id = 1, .off = (uint64_t)i * N};
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, CHAN_RX_AT_DELIVERY, &r[i],
				      NULL) == 0,
		      "post %d", i);
		CHECK(chan_tx_post(f.tx, src[i], N, 0, &s[i], NULL) == 0, "send %d", i);
		chan_tx_times(f.tx, s[i], &t[i]);
	}
	f.dma.hold = 1; /* the first copy runs until let go */
	int64_t last_due = t[1].ready_ns - nic.o_recv_ns;
	int d0 = 0, rc = 0;
	while (mono_ns() < last_due + 1000000 && rc == 0 && !d0)
		rc = chan_tx_test(f.tx, s[0], &d0, NULL, NULL);
	if (rc == 0 && !d0) /* one call after that time, however long this thread was off the CPU */
		rc = chan_tx_test(f.tx, s[0], &d0, NULL, NULL);
	CHECK(rc == 0 && !d0, "the first send waits for its copy (rc %d, done %d)", rc, d0);
	CHECK(f.dma.started == 2,
	      "both copies started, the first still running: %d started 1 ms after the second's "
	      "arrival",
	      f.dma.started);
	for (int i = 0; i < 2 && i < f.dma.started; i++)
		CHECK(f.dma.started_at[i] >= t[i].ready_ns - nic.o_recv_ns,
		      "copy %d started %" PRId64 " ns before its arrival", i,
		      t[i].ready_ns - nic.o_recv_ns - f.dma.started_at[i]);
	f.dma.hold = 0;
	int sd[2] = {0, 0}, rd[2] = {0, 0};
	int64_t deadline = mono_ns() + 5000000000LL;
	while (!(sd[0] && sd[1] && rd[0] && rd[1]) && mono_ns() < deadline)
		for (int i = 0; i < 2; i++) {
			if (!sd[i])
				CHECK(chan_tx_test(f.tx, s[i], &sd[i], NULL, NULL) == 0, "test %d",
				      i);
			if (!rd[i])
				CHECK(chan_rx_test(f.rx, r[i], &rd[i], NULL, NULL) == 0, "test %d",
				      i);
		}
	CHECK(sd[0] && sd[1] && rd[0] && rd[1] && memcmp(mem, src[0], N) == 0 &&
		      memcmp(mem + N, src[1], N) == 0,
	      "both delivered exact");
	fix_down_modelled(&f, &mf);
}

/* A modelled channel over two 250 Mb/s links 1 ms long (32 ns a byte: 2 MiB take 67 ms). */
static void fix_up_quarter(struct fix *f, struct mfab *m, struct model_nic *nic, uint64_t seed)
{
	struct model_link links[2];
	two_links(links, 250000000ull, 1000000);
	*nic = test_nic;
	fenv_resolve(links, 2, nic);
	fix_up_modelled(f, m, links, nic, seed);
}

/*
 * A held one-sided copy streams in as on the wire: a 2 MiB message over 250 Mb/s links (67 ms
 * on the wire) lands in 8 pieces, each started no earlier than the arrival of its last byte
 * (computed here from the route's byte time, not the channel's), the first of them long
 * before the message's last byte: the receiver's kernel reads it while the rest is in flight.
 */
static void test_at_delivery_streams_in_pieces(void)
{
	enum { N = 2 << 20, PIECE = N / CHAN_PIECES_MAX };
	static uint8_t src[N];
	fill(src, N, 14);
	struct fix f;
	struct mfab mf;
	struct model_nic nic;
	fix_up_quarter(&f, &mf, &nic, 81);
	chan_req r, s;
	uint8_t *mem = post_one(&f, 1, 1, NULL, src, N, &r, &s);
	struct chan_times t;
	chan_tx_times(f.tx, s, &t);
	int sd = 0, rd = 0;
	int64_t rdone_at = 0, deadline = mono_ns() + 10000000000LL;
	int trc = 0;
	while ((!sd || !rd) && mono_ns() < deadline && trc == 0) {
		if (!sd)
			trc = chan_tx_test(f.tx, s, &sd, NULL, NULL);
		if (!rd && chan_rx_test(f.rx, r, &rd, NULL, NULL) == 0 && rd)
			rdone_at = mono_ns();
	}
	CHECK(trc == 0, "send: %d", trc);
	CHECK(sd && rd && memcmp(mem, src, N) == 0, "delivered exact");
	CHECK(rdone_at >= t.ready_ns, "completion never early");
	CHECK(f.dma.started == CHAN_PIECES_MAX, "%d pieces, not %d", f.dma.started,
	      CHAN_PIECES_MAX);
	int64_t last_due = t.ready_ns - nic.o_recv_ns;
	for (int k = 0; k < CHAN_PIECES_MAX && k < f.dma.started; k++) {
		int64_t due = last_due - (int64_t)(N - (uint64_t)(k + 1) * PIECE) * 32;
		CHECK(f.dma.started_at[k] >= due,
		      "piece %d started %" PRId64 " ns before its arrival", k,
		      due - f.dma.started_at[k]);
	}
	/* the first piece arrives 7/8 of 67 ms before the last byte: a third of that leaves a
	 * loaded machine 39 ms to run this thread */
	CHECK(f.dma.started_at[0] < last_due - 20000000,
	      "the first piece started only %" PRId64 " us before the last byte's arrival",
	      (last_due - f.dma.started_at[0]) / 1000);
	fix_down_modelled(&f, &mf);
}

/* A modelled channel over two 1 Gb/s links 1 ms long (8 ns a byte), for the piece tests. */
static void fix_up_slow(struct fix *f, struct mfab *m, struct model_nic *nic, uint64_t seed)
{
	struct model_link links[2];
	two_links(links, 1000000000ull, 1000000);
	*nic = test_nic;
	fenv_resolve(links, 2, nic);
	fix_up_modelled(f, m, links, nic, seed);
}

/*
 * Pieces at the edges: a message just over a piece boundary ends in one larger piece, never a
 * sliver (448 KiB + 1 in 7, 64 KiB + 1 and 3 bytes in one), each exact and none early; a copy
 * refused at the fourth piece fails the send and the receive, and what started is drained
 * before the send is told (its copies read the caller's buffer).
 */
static void test_at_delivery_piece_edges(void)
{
	static const struct {
		uint64_t n;
		int pieces;
	} cases[] = {{(448u << 10) + 1, 7}, {(64u << 10) + 1, 1}, {3, 1}};
	static uint8_t src[(448u << 10) + 1];
	fill(src, sizeof(src), 15);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct fix f;
		struct mfab mf;
		struct model_nic nic;
		fix_up_slow(&f, &mf, &nic, 82);
		chan_req r, s;
		uint8_t *mem = post_one(&f, 1, 1, NULL, src, cases[c].n, &r, &s);
		struct chan_times t;
		chan_tx_times(f.tx, s, &t);
		int src_rc, rrc;
		run_both(&f, s, r, &src_rc, &rrc);
		CHECK(src_rc == 0 && rrc == 0 && memcmp(mem, src, cases[c].n) == 0,
		      "%" PRIu64 " B delivered exact (%d, %d)", cases[c].n, src_rc, rrc);
		CHECK(f.dma.started == cases[c].pieces, "%" PRIu64 " B in %d pieces, not %d",
		      cases[c].n, f.dma.started, cases[c].pieces);
		/* the first piece's last byte: one piece of 64 KiB, or the whole message */
		uint64_t first_end = cases[c].pieces > 1 ? 64u << 10 : cases[c].n;
		int64_t due = t.ready_ns - nic.o_recv_ns - (int64_t)(cases[c].n - first_end) * 8;
		CHECK(f.dma.started_at[0] >= due, "%" PRIu64 " B: first piece %" PRId64 " ns early",
		      cases[c].n, due - f.dma.started_at[0]);
		fix_down_modelled(&f, &mf);
	}
	struct fix f;
	struct mfab mf;
	struct model_nic nic;
	fix_up_slow(&f, &mf, &nic, 83);
	f.dma.fail_at = 4;
	chan_req r, s;
	post_one(&f, 1, 1, NULL, src, 448u << 10, &r, &s);
	int src_rc, rrc;
	run_both(&f, s, r, &src_rc, &rrc);
	CHECK(src_rc == -EIO && rrc == -ECONNRESET && f.dma.started == 3,
	      "a refused fourth piece fails both ends: %d %d, %d started", src_rc, rrc,
	      f.dma.started);
	CHECK(f.dma.drained == 1,
	      "the pieces started were drained before the send was told no "
	      "(%d)",
	      f.dma.drained);
	fix_down_modelled(&f, &mf);
}

/*
 * A full staging ring holds a one-sided send's descriptor, not its copies: with 4 descriptors
 * out and none taken by the receiver, a held 512 KiB send still starts its 8 pieces as they
 * arrive, and completes once the receiver frees a slot.
 */
static void test_at_delivery_pieces_need_no_slot(void)
{
	struct fix f;
	struct mfab mf;
	struct model_nic nic;
	fix_up_slow(&f, &mf, &nic, 84);
	enum { N = 512u << 10, SMALL = 64 };
	static uint8_t src[N];
	fill(src, N, 16);
	uint8_t *mem = region(&f, 1, N + 4 * SMALL);
	chan_req r[5], s[5];
	for (int i = 0; i < 5; i++) {
		void *bufs[1] = {mem + (i == 4 ? 4 * SMALL : (uint64_t)i * SMALL)};
		uint64_t cap = i == 4 ? N : SMALL;
		struct chan_region w = {.id = 1, .off = i == 4 ? 4 * SMALL : (uint64_t)i * SMALL};
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w,
				      i == 4 ? CHAN_RX_AT_DELIVERY : 0, &r[i], NULL) == 0,
		      "post %d", i);
		CHECK(chan_tx_post(f.tx, src, i == 4 ? N : SMALL, 0, &s[i], NULL) == 0, "send %d",
		      i);
	}
	struct chan_times t;
	chan_tx_times(f.tx, s[4], &t);
	int64_t until = t.ready_ns - nic.o_recv_ns + 1000000;
	int done = 0;
	while (mono_ns() < until)
		CHECK(chan_tx_test(f.tx, s[4], &done, NULL, NULL) == 0 && !done,
		      "waits for a slot");
	CHECK(chan_tx_test(f.tx, s[4], &done, NULL, NULL) == 0 && !done, "still waits");
	CHECK(atomic_load(&((struct chan_shm *)f.base)->tx.head) == 4, "the ring is full");
	CHECK(f.dma.started == 4 + CHAN_PIECES_MAX, "the held send's pieces started: %d of %d",
	      f.dma.started - 4, CHAN_PIECES_MAX);
	for (int i = 0; i < 5; i++) {
		int src_rc, rrc;
		run_both(&f, s[i], r[i], &src_rc, &rrc);
		CHECK(src_rc == 0 && rrc == 0, "message %d delivered (%d, %d)", i, src_rc, rrc);
	}
	CHECK(memcmp(mem + 4 * SMALL, src, N) == 0, "exact");
	fix_down_modelled(&f, &mf);
}

/*
 * Armed pieces (a copy engine with arm and fire, as the GPU's), a held 2 MiB message over
 * 250 Mb/s links (pieces 8.4 ms apart). Whatever the engine does, every copy goes (is fired, or
 * started) no earlier than the arrival of its last byte, exact, fired in the order armed, never
 * polled before; and unless it goes whole, the first goes long before the last byte (it streams
 * in). Per engine:
 *   pieces            all 8 armed at the post, none made then
 *   declining from 3  2 armed, 6 started at their times (a host source: src_dev 0)
 *   5 ms ahead        none armed at the post, each no earlier than 5 ms before its arrival
 *   whole             one copy armed at the post, let go at the last byte's arrival
 *   whole, declining  in pieces, each started at its time
 *   whole, 5 ms ahead it could not be armed before its first piece is due: in pieces, each
 *                     started at its time
 */
static void test_at_delivery_armed(void)
{
	enum { N = 2 << 20 };
	static uint8_t src[N];
	fill(src, N, 17);
	static const struct {
		const struct chan_dma *ops;
		int eop_from, host, at_post, armed, started;
	} V[] = {
		{&armed_ops, 0, 0, CHAN_PIECES_MAX, CHAN_PIECES_MAX, 0},
		{&armed_ops, 3, 1, 2, 2, CHAN_PIECES_MAX - 2},
		{&armed_ahead_ops, 0, 0, 0, CHAN_PIECES_MAX, 0},
		{&armed_whole_ops, 0, 0, 1, 1, 0},
		{&armed_whole_ops, 1, 0, 0, 0, CHAN_PIECES_MAX},
		{&armed_whole_ahead_ops, 0, 0, 0, 0, CHAN_PIECES_MAX},
	};
	for (size_t v = 0; v < sizeof(V) / sizeof(V[0]); v++) {
		struct fix f;
		struct mfab mf;
		struct model_nic nic;
		fix_up_quarter(&f, &mf, &nic, 85);
		struct armed a = {.d = &f.dma, .arm_eop_from = V[v].eop_from};
		f.dma.armed_by = &a;
		CHECK(chan_tx_set_dma(f.tx, V[v].ops, &f.dma) == 0, "the engine with arm");
		uint8_t *mem = region(&f, 1, N);
		void *bufs[1] = {mem};
		uint64_t cap = N;
		struct chan_region w = {.id = 1};
		chan_req r, s;
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, CHAN_RX_AT_DELIVERY, &r,
				      NULL) == 0,
		      "post");
		CHECK(chan_tx_post_src(f.tx, src, N, 0, V[v].host ? CHAN_MEM_HOST : CHAN_MEM_DEVICE,
				       &s, NULL) == 0,
		      "send");
		CHECK(a.armed == V[v].at_post && a.fired == 0 && f.dma.started == 0 &&
			      (!a.armed || a.src_dev == !V[v].host),
		      "at the post (v %zu): %d armed (want %d), %d fired, %d started (src_dev %d)",
		      v, a.armed, V[v].at_post, a.fired, f.dma.started, a.src_dev);
		struct chan_times t;
		chan_tx_times(f.tx, s, &t);
		int src_rc, rrc;
		run_both(&f, s, r, &src_rc, &rrc);
		CHECK(src_rc == 0 && rrc == 0 && memcmp(mem, src, N) == 0,
		      "delivered exact (v %zu): %d %d", v, src_rc, rrc);
		CHECK(a.armed == V[v].armed && a.fired == V[v].armed &&
			      f.dma.started == V[v].started,
		      "v %zu: %d armed, %d fired, %d started (want %d, %d)", v, a.armed, a.fired,
		      f.dma.started, V[v].armed, V[v].started);
		CHECK(a.polled_unfired == 0 && a.out_of_order == 0,
		      "v %zu: %d polls of a piece not let go, %d fired out of order", v,
		      a.polled_unfired, a.out_of_order);
		/* each copy's last byte arrives (N - end) byte times (32 ns) before the last one */
		int64_t last_due = t.ready_ns - nic.o_recv_ns, first = INT64_MAX;
		for (int k = 0; k < a.armed + f.dma.started && k < 8 + ARMED_MAX; k++) {
			int armed = k < a.armed;
			uint64_t end = armed ? a.c[k].off + a.c[k].len
					     : f.dma.started_end[k - a.armed];
			int64_t at = armed ? a.fired_at[k] : f.dma.started_at[k - a.armed];
			int64_t due = last_due - (int64_t)(N - end) * 32;
			CHECK(at >= due,
			      "v %zu: a copy (%s) ending at %" PRIu64 " went %" PRId64 " ns before "
			      "its "
			      "arrival",
			      v, armed ? "armed" : "started", end, due - at);
			if (V[v].ops->arm_ahead_ns && armed)
				CHECK(a.armed_at[k] >= due - AHEAD_NS,
				      "v %zu: armed %" PRId64 " us ahead (5 ms at most)", v,
				      (due - a.armed_at[k]) / 1000);
			first = at < first ? at : first;
		}
		if (V[v].armed == 1)
			CHECK(a.c[0].len == N, "whole: one copy of %" PRIu64 " B", a.c[0].len);
		else
			CHECK(first < last_due - 20000000,
			      "v %zu: the first copy went only %" PRId64 " us before the last "
			      "byte's arrival",
			      v, (last_due - first) / 1000);
		fix_down_modelled(&f, &mf);
	}
}

/*
 * A whole send armed later: over 2 x 50 ms links, a 100 KiB message (one piece, 3.3 ms on the
 * wire) is due about 103 ms after its post, so an engine that wants it 20 ms ahead at most gets
 * nothing at the post, and then one copy armed within 20 ms of its arrival (the channel comes
 * back for it), let go no earlier than that arrival.
 */
static void test_at_delivery_whole_armed_later(void)
{
	static const struct chan_dma ops = {.start = fake_start,
					    .poll = fake_poll_armed,
					    .drain = fake_drain_armed,
					    .arm = fake_arm,
					    .fire = fake_fire,
					    .arm_ahead_ns = 20000000,
					    .arm_whole = 1};
	struct model_link links[2];
	two_links(links, 250000000ull, 50000000);
	struct model_nic nic = test_nic;
	fenv_resolve(links, 2, &nic);
	enum { N = 100 << 10 };
	static uint8_t src[N];
	fill(src, N, 19);
	struct fix f;
	struct mfab mf;
	fix_up_modelled(&f, &mf, links, &nic, 87);
	struct armed a = {.d = &f.dma};
	f.dma.armed_by = &a;
	CHECK(chan_tx_set_dma(f.tx, &ops, &f.dma) == 0, "the engine with arm");
	chan_req r, s;
	uint8_t *mem = region(&f, 1, N);
	void *bufs[1] = {mem};
	uint64_t cap = N;
	struct chan_region w = {.id = 1};
	CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, CHAN_RX_AT_DELIVERY, &r, NULL) == 0,
	      "post");
	CHECK(chan_tx_post_src(f.tx, src, N, 0, CHAN_MEM_DEVICE, &s, NULL) == 0, "send");
	CHECK(a.armed == 0 && f.dma.started == 0, "nothing at the post: %d armed, %d started",
	      a.armed, f.dma.started);
	struct chan_times t;
	chan_tx_times(f.tx, s, &t);
	int src_rc, rrc;
	run_both(&f, s, r, &src_rc, &rrc);
	int64_t due = t.ready_ns - nic.o_recv_ns;
	CHECK(src_rc == 0 && rrc == 0 && memcmp(mem, src, N) == 0, "exact: %d %d", src_rc, rrc);
	CHECK(a.armed == 1 && a.fired == 1 && f.dma.started == 0 && a.c[0].len == N,
	      "one copy armed: %d armed, %d started", a.armed, f.dma.started);
	CHECK(a.armed_at[0] >= due - 20000000 && a.fired_at[0] >= due,
	      "armed %" PRId64 " us before its arrival (20 ms at most), let go %" PRId64 " ns "
	      "after it",
	      (due - a.armed_at[0]) / 1000, a.fired_at[0] - due);
	fix_down_modelled(&f, &mf);
}

/*
 * An arm that fails (not declines) fails the send at its post like a refused start: the pieces
 * armed before it are let go by the drain, the receive fails, nothing hangs.
 */
static void test_at_delivery_arm_fails(void)
{
	struct fix f;
	struct mfab mf;
	struct model_nic nic;
	fix_up_slow(&f, &mf, &nic, 86);
	struct armed a = {.d = &f.dma, .arm_fail_at = 4};
	f.dma.armed_by = &a;
	CHECK(chan_tx_set_dma(f.tx, &armed_ops, &f.dma) == 0, "the engine with arm");
	static uint8_t src[448u << 10];
	fill(src, sizeof(src), 18);
	uint8_t *mem = region(&f, 1, sizeof(src));
	void *bufs[1] = {mem};
	uint64_t cap = sizeof(src);
	struct chan_region w = {.id = 1};
	chan_req r, s;
	CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, CHAN_RX_AT_DELIVERY, &r, NULL) == 0,
	      "post");
	struct chan_err e = {0};
	int rc = chan_tx_post_src(f.tx, src, sizeof(src), 0, CHAN_MEM_DEVICE, &s, &e);
	CHECK(rc == -EIO && strstr(e.what, "refused a one-sided copy") && a.armed == 3 &&
		      f.dma.drained == 1 && a.fired == 3,
	      "a failed fourth arm: %d '%s', %d armed, %d drains, %d let go", rc, e.what, a.armed,
	      f.dma.drained, a.fired);
	int rd = 0, rrc = 0;
	int64_t deadline = mono_ns() + 5000000000LL;
	while (!rd && !rrc && mono_ns() < deadline)
		rrc = chan_rx_test(f.rx, r, &rd, NULL, NULL);
	CHECK(rrc < 0 && !rd, "the receive fails: %d", rrc);
	fix_down_modelled(&f, &mf);
	int unfired = 0;
	for (int i = 0; i < a.armed; i++)
		unfired += !a.c[i].fired;
	CHECK(unfired == 0, "%d armed copies never let go", unfired);
}

/*
 * A send that fails with armed pieces not yet let go (here the receiver closes once some are
 * armed, 1 ms ahead at most): before the failure is reported the engine lets them all go and
 * has drained (they would read the caller's buffer); nothing is armed on the channel afterwards
 * (a peer's failure leaves the channel's progress running: without the stop, the failed send's
 * later pieces were armed after the drain, read its buffer and left the count wrong), and the
 * other send fails too.
 */
static void test_at_delivery_failed_send_drains_armed(void)
{
	struct fix f;
	struct mfab mf;
	struct model_nic nic;
	fix_up_slow(&f, &mf, &nic, 88);
	static const struct chan_dma ops = {.start = fake_start,
					    .poll = fake_poll_armed,
					    .drain = fake_drain_armed,
					    .arm = fake_arm,
					    .fire = fake_fire,
					    .arm_ahead_ns = 1000000};
	struct armed a = {.d = &f.dma};
	f.dma.armed_by = &a;
	CHECK(chan_tx_set_dma(f.tx, &ops, &f.dma) == 0, "the engine with arm");
	enum { N = 448u << 10 };
	static uint8_t src[N];
	fill(src, N, 20);
	uint8_t *mem = region(&f, 1, 2 * (uint64_t)N);
	chan_req r[2], s[2];
	for (int i = 0; i < 2; i++) {
		void *bufs[1] = {mem + (uint64_t)i * N};
		uint64_t cap = N;
		struct chan_region w = {.id = 1, .off = (uint64_t)i * N};
		CHECK(chan_rx_post_in(f.rx, 1, bufs, &cap, NULL, &w, CHAN_RX_AT_DELIVERY, &r[i],
				      NULL) == 0,
		      "post %d", i);
		CHECK(chan_tx_post_src(f.tx, src, N, 0, CHAN_MEM_DEVICE, &s[i], NULL) == 0,
		      "send %d", i);
	}
	int done = 0, rc = 0;
	int64_t deadline = mono_ns() + 5000000000LL;
	while (a.armed - a.fired < 1 && !rc && !done && mono_ns() < deadline)
		rc = chan_tx_test(f.tx, s[0], &done, NULL, NULL);
	int armed0 = a.armed;
	CHECK(rc == 0 && !done && a.armed > a.fired, "some armed, not all let go: %d, %d", a.armed,
	      a.fired);
	chan_rx_free(f.rx); /* the receiver goes */
	f.rx = NULL;
	while (!rc && !done && mono_ns() < deadline)
		rc = chan_tx_test(f.tx, s[0], &done, NULL, NULL);
	CHECK(rc < 0 && f.dma.drained == 1 && a.fired == a.armed && a.armed >= armed0,
	      "the first send fails (%d) with its pieces let go and drained: %d drains, %d of %d "
	      "let go",
	      rc, f.dma.drained, a.fired, a.armed);
	armed0 = a.armed;
	done = rc = 0;
	while (!rc && !done && mono_ns() < deadline)
		rc = chan_tx_test(f.tx, s[1], &done, NULL, NULL);
	/* and well past every piece's arrival: the channel's progress goes on, arming nothing */
	for (int64_t until = mono_ns() + 6000000; mono_ns() < until;)
		chan_tx_progress(f.tx, NULL);
	CHECK(rc < 0 && a.armed == armed0 && a.fired == a.armed && a.out_of_order == 0 &&
		      f.dma.drained == 1,
	      "the second fails too (%d): %d armed since, %d not let go, %d drains", rc,
	      a.armed - armed0, a.armed - a.fired, f.dma.drained);
	fix_down_modelled(&f, &mf);
}

/* The engine's calls: arm without fire (or fire without arm) is refused. */
static void test_arm_needs_fire(void)
{
	struct fix f;
	fix_up(&f, 4);
	struct chan_dma half = armed_ops;
	half.fire = NULL;
	CHECK(chan_tx_set_dma(f.tx, &half, &f.dma) == -EINVAL, "arm without fire");
	half = armed_ops;
	half.arm = NULL;
	CHECK(chan_tx_set_dma(f.tx, &half, &f.dma) == -EINVAL, "fire without arm");
	fix_down(&f);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_one_sided),
	CHECK_CASE(test_mixed_order),
	CHECK_CASE(test_mismatch),
	CHECK_CASE(test_hostile),
	CHECK_CASE(test_offset_overflow),
	CHECK_CASE(test_engine_failures),
	CHECK_CASE(test_modelled),
	CHECK_CASE(test_at_delivery),
	CHECK_CASE(test_at_delivery_failed_message),
	CHECK_CASE(test_at_delivery_copies_overlap),
	CHECK_CASE(test_at_delivery_streams_in_pieces),
	CHECK_CASE(test_at_delivery_piece_edges),
	CHECK_CASE(test_at_delivery_pieces_need_no_slot),
	CHECK_CASE(test_at_delivery_armed),
	CHECK_CASE(test_at_delivery_whole_armed_later),
	CHECK_CASE(test_at_delivery_arm_fails),
	CHECK_CASE(test_at_delivery_failed_send_drains_armed),
	CHECK_CASE(test_arm_needs_fire),
};

CHECK_MAIN(cases)
