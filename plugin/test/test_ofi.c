/* SPDX-License-Identifier: MIT */
/*
 * test_ofi.c - cross-host channels (sim/core/xchan.c) over real libfabric (plugin/ofi.c):
 * two processes, each with its own endpoint on tcp;ofi_rxm over loopback, exchange their
 * addresses through a pipe, then the child echoes what the parent sends over a second channel.
 * Exact data from 0 B to 8 MiB, grouped receives, a window of messages in flight, a size
 * error seen at both ends, and a dead peer failing what waits on it; and the same exchanges
 * with the payloads as one-sided writes into registered receive buffers (xnet.h), which the
 * tcp provider must offer.
 *
 * A build without libfabric's headers, or a machine without libfabric.so.1, skips every case
 * with the reason (SIMFABRIC_REQUIRE_OFI=1 makes that a failure); with libfabric there, a
 * missing tcp provider or any other error fails. `make deps` installs libfabric-dev.
 */
#include "plugin/ofi.c"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/core/xchan.h"
#include "sim/test/check.h"

enum { CONN_UP = 1, CONN_DOWN = 2, MAXSZ = 8 << 20 };

static uint64_t g_write_min; /* both processes' senders' (set before the fork); 0: no writes */

/* Open [p, p + len) to the peer's writes (g_write_min set): 0 and *mr, or -1. */
static int open_to_writes(struct sfofi *o, void *p, uint64_t len, struct xchan_wkey *wk, void **mr)
{
	*mr = NULL;
	*wk = (struct xchan_wkey){0};
	if (!g_write_min)
		return 0;
	const struct xnet *n = sfofi_net(o);
	if (!n->mr_open || n->mr_open(n->ctx, p, len, &wk->key, &wk->addr, mr))
		return -1;
	wk->ok = 1;
	return 0;
}

static void close_to_writes(struct sfofi *o, void *mr)
{
	if (mr)
		sfofi_net(o)->mr_close(sfofi_net(o)->ctx, mr);
}

struct side {
	struct sfofi *o;
	uint64_t peer;
	struct xchan_tx *tx;
	struct xchan_rx *rx;
};

static int open_or_skip(struct sfofi **o, const char *test)
{
	char why[256] = "";
	setenv("FI_TCP_IFACE", "lo", 0);
	int rc = sfofi_open(NULL, 1, o, why, sizeof(why));
	if (rc == 0)
		return 1;
	const char *req = getenv("SIMFABRIC_REQUIRE_OFI");
	int may_skip = (rc == -ENOSYS || rc == -ELIBACC) && !(req && !strcmp(req, "1"));
	CHECK(may_skip, "%s: cannot open a libfabric endpoint: %s", test, why);
	printf("%s: skipped: %s\n", test, why);
	return 0;
}

/* Swap addresses with the other process over two pipes. */
static int swap_addr(struct side *s, int wfd, int rfd)
{
	uint8_t a[SFOFI_ADDR_MAX], b[SFOFI_ADDR_MAX];
	size_t n = sizeof(a);
	if (sfofi_addr(s->o, a, &n))
		return -1;
	uint32_t len = (uint32_t)n;
	if (write(wfd, &len, 4) != 4 || write(wfd, a, n) != (ssize_t)n)
		return -1;
	if (read(rfd, &len, 4) != 4 || len > sizeof(b) || read(rfd, b, len) != (ssize_t)len)
		return -1;
	return sfofi_peer(s->o, b, len, &s->peer);
}

static int side_open(struct side *s, uint32_t tx_conn, uint32_t rx_conn)
{
	struct xchan_cfg t = {
		.net = sfofi_net(s->o), .peer = s->peer, .conn = tx_conn, .write_min = g_write_min};
	struct xchan_cfg r = t;
	r.conn = rx_conn;
	return xchan_tx_new(&t, &s->tx) || xchan_rx_new(&r, &s->rx) ? -1 : 0;
}

static void side_close(struct side *s)
{
	xchan_tx_free(s->tx);
	xchan_rx_free(s->rx);
	sfofi_close(s->o);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Post until taken, then test until done: one send. Drives the receive side too. */
static int send_one(struct side *s, const void *d, uint64_t n, int32_t tag, struct chan_err *e)
{
	chan_req q;
	int rc;
	int64_t until = mono_ms() + 20000;
	while ((rc = xchan_tx_post(s->tx, d, n, tag, &q, e)) == -EAGAIN && mono_ms() < until)
		xchan_rx_progress(s->rx, NULL);
	if (rc)
		return rc;
	for (int done = 0; !done && mono_ms() < until;) {
		if ((rc = xchan_tx_test(s->tx, q, &done, NULL, e)))
			return rc;
		xchan_rx_progress(s->rx, NULL);
	}
	return mono_ms() < until ? 0 : -ETIME;
}

static int recv_wait(struct side *s, chan_req q, uint64_t *sizes, struct chan_err *e)
{
	int64_t until = mono_ms() + 20000;
	for (int done = 0; mono_ms() < until;) {
		int rc = xchan_rx_test(s->rx, q, &done, sizes, e);
		if (rc || done)
			return rc;
		xchan_tx_progress(s->tx, NULL);
	}
	return -ETIME;
}

/*
 * The child: receive n buffers at a time (the sizes and tags the parent announces first in a
 * 64-byte message) and send each back with its tag, until a zero-buffer announcement.
 * Exit status: 0, or the step that failed.
 */
static int echo_child(int wfd, int rfd)
{
	struct side s = {0};
	char why[256];
	if (sfofi_open(NULL, 1, &s.o, why, sizeof(why)) || swap_addr(&s, wfd, rfd) ||
	    side_open(&s, CONN_DOWN, CONN_UP))
		_exit(10);
	uint8_t *buf = malloc((size_t)MAXSZ * 2);
	struct xchan_wkey arena;
	void *mr;
	if (open_to_writes(s.o, buf, (uint64_t)MAXSZ * 2, &arena, &mr))
		_exit(15);
	for (;;) {
		uint64_t ann[1 + CHAN_MAX_RECVS];
		chan_req q;
		uint64_t cap = sizeof(ann), got[CHAN_MAX_RECVS];
		struct chan_err e;
		if (xchan_rx_post(s.rx, 1, (void *[]){ann}, &cap, (int32_t[]){-1}, &q, &e) ||
		    recv_wait(&s, q, got, &e))
			_exit(11);
		int n = (int)ann[0];
		if (n == 0)
			break;
		void *bufs[CHAN_MAX_RECVS];
		uint64_t caps[CHAN_MAX_RECVS];
		int32_t tags[CHAN_MAX_RECVS];
		struct xchan_wkey wk[CHAN_MAX_RECVS];
		for (int b = 0, off = 0; b < n; off += (int)ann[1 + b], b++) {
			bufs[b] = buf + off;
			caps[b] = ann[1 + b];
			tags[b] = b;
			wk[b] = arena;
			wk[b].addr += (uint64_t)off;
		}
		int rc = xchan_rx_post_w(s.rx, n, bufs, caps, tags, wk, 0, &q, &e);
		if (!rc)
			rc = recv_wait(&s, q, got, &e);
		if (rc == -EMSGSIZE) { /* the parent's size test: say what this end saw */
			int code = e.value[0] == 5000 && e.value[1] == 4096 ? 30 : 31;
			_exit(code);
		}
		if (rc)
			_exit(12);
		for (int b = 0; b < n; b++)
			if (send_one(&s, bufs[b], got[b], b, &e))
				_exit(13);
	}
	int wrote = xchan_tx_written(s.tx) > 0;
	xchan_tx_free(s.tx);
	xchan_rx_free(s.rx);
	close_to_writes(s.o, mr); /* after the channels, before the endpoint */
	sfofi_close(s.o);
	free(buf);
	_exit(g_write_min && !wrote ? 16 : 0);
}

static pid_t start_child(struct side *s)
{
	int up[2], down[2];
	if (pipe(up) || pipe(down))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		echo_child(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	int rc = swap_addr(s, down[1], up[0]);
	close(down[1]);
	close(up[0]);
	if (rc || side_open(s, CONN_UP, CONN_DOWN)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

/* An endpoint, the echo process and both channels: its pid, or 0 (skipped or failed). */
static pid_t echo_or_skip(struct side *s, const char *test)
{
	if (!open_or_skip(&s->o, test))
		return 0;
	pid_t pid = start_child(s);
	CHECK(pid > 0, "%s: the echo process and both channels", test);
	if (pid > 0)
		return pid;
	sfofi_close(s->o);
	return 0;
}

static void fill(uint8_t *b, uint64_t n, uint32_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 29u + i * 13u + (i >> 11));
}

/* Send n buffers of these sizes to the echo, and check what comes back. */
static int round_trip(struct side *s, int n, const uint64_t *sizes, uint32_t seed)
{
	uint64_t ann[1 + CHAN_MAX_RECVS] = {(uint64_t)n};
	for (int b = 0; b < n; b++)
		ann[1 + b] = sizes[b];
	struct chan_err e;
	int rc = send_one(s, ann, sizeof(ann), -1, &e);
	CHECK(rc == 0, "announce: %d %s", rc, rc ? e.what : "");
	if (rc)
		return rc;
	uint8_t *src[CHAN_MAX_RECVS], *dst[CHAN_MAX_RECVS];
	void *bufs[CHAN_MAX_RECVS];
	int32_t tags[CHAN_MAX_RECVS];
	uint64_t caps[CHAN_MAX_RECVS], got[CHAN_MAX_RECVS];
	for (int b = 0; b < n; b++) {
		src[b] = malloc(sizes[b] + 1);
		dst[b] = calloc(1, sizes[b] + 1);
		fill(src[b], sizes[b], seed + (uint32_t)b);
		bufs[b] = dst[b];
		caps[b] = sizes[b];
		tags[b] = b;
	}
	chan_req q;
	struct xchan_wkey wk[CHAN_MAX_RECVS];
	void *mr[CHAN_MAX_RECVS] = {0};
	for (int b = 0; b < n; b++)
		CHECK(open_to_writes(s->o, dst[b], sizes[b] + 1, &wk[b], &mr[b]) == 0,
		      "buffer %d open to writes", b);
	rc = xchan_rx_post_w(s->rx, n, bufs, caps, tags, wk, 0, &q, &e);
	for (int b = n - 1; !rc && b >= 0; b--) /* the tags in reverse: matching is by tag */
		rc = send_one(s, src[b], sizes[b], b, &e);
	if (!rc)
		rc = recv_wait(s, q, got, &e);
	CHECK(rc == 0, "round trip of %d buffer(s): %d %s (%llu, %llu)", n, rc, rc ? e.what : "",
	      (unsigned long long)e.value[0], (unsigned long long)e.value[1]);
	for (int b = 0; !rc && b < n; b++)
		CHECK(got[b] == sizes[b] && !memcmp(src[b], dst[b], sizes[b]),
		      "buffer %d of %llu B came back exact (%llu B)", b,
		      (unsigned long long)sizes[b], (unsigned long long)got[b]);
	for (int b = 0; b < n; b++) {
		close_to_writes(s->o, mr[b]);
		free(src[b]);
		free(dst[b]);
	}
	return rc;
}

static void stop_child(struct side *s, pid_t pid, int want)
{
	uint64_t ann[1 + CHAN_MAX_RECVS] = {0};
	if (want == 0)
		CHECK(send_one(s, ann, sizeof(ann), -1, NULL) == 0, "goodbye");
	int st = 0;
	int64_t until = mono_ms() + 20000;
	while (waitpid(pid, &st, WNOHANG) == 0 && mono_ms() < until) {
		xchan_tx_progress(s->tx, NULL);
		xchan_rx_progress(s->rx, NULL);
	}
	if (mono_ms() >= until) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == want, "the echo process exited %d (want %d)",
	      WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st), want);
}

static void test_exact_across_processes_at_every_size(void)
{
	struct side s = {0};
	pid_t pid = echo_or_skip(&s, __func__);
	if (pid <= 0)
		return;
	static const uint64_t one[] = {0, 1, 63, 4096, 65537, 1 << 20, MAXSZ};
	for (size_t k = 0; k < sizeof(one) / sizeof(one[0]); k++)
		round_trip(&s, 1, &one[k], (uint32_t)k);
	static const uint64_t grouped[CHAN_MAX_RECVS] = {7, 0, 100000, 1, 4096, 3 << 20, 12, 65536};
	round_trip(&s, CHAN_MAX_RECVS, grouped, 99);
	for (uint32_t r = 0; r < 50; r++) { /* many small exchanges: ACKs, CTS rings wrap */
		uint64_t sz[3] = {r * 37 % 5000, r, 8};
		round_trip(&s, 3, sz, r);
	}
	stop_child(&s, pid, 0);
	side_close(&s);
}

/* The same exchanges with every payload of 1 B or more written into the receiver's buffers,
 * both ways: the tcp provider offers writes, and both processes used them. */
static void test_writes_exact_across_processes(void)
{
	g_write_min = 1;
	struct side s = {0};
	pid_t pid = echo_or_skip(&s, __func__);
	if (pid <= 0) {
		g_write_min = 0;
		return;
	}
	CHECK(sfofi_net(s.o)->write && strstr(sfofi_describe(s.o), "writes"),
	      "the endpoint writes: %s", sfofi_describe(s.o));
	static const uint64_t one[] = {1, 63, 4096, 65537, 1 << 20, MAXSZ};
	for (size_t k = 0; k < sizeof(one) / sizeof(one[0]); k++)
		round_trip(&s, 1, &one[k], (uint32_t)k + 7);
	static const uint64_t grouped[CHAN_MAX_RECVS] = {7, 0, 100000, 1, 4096, 3 << 20, 12, 65536};
	round_trip(&s, CHAN_MAX_RECVS, grouped, 98);
	for (uint32_t r = 0; r < 30; r++) {
		uint64_t sz[3] = {r * 37 % 5000 + 1, r + 1, 8};
		round_trip(&s, 3, sz, r);
	}
	CHECK(xchan_tx_written(s.tx) > 30, "this process wrote: %llu writes",
	      (unsigned long long)xchan_tx_written(s.tx));
	stop_child(&s, pid, 0); /* 16: the echo never wrote */
	side_close(&s);
	g_write_min = 0;
}

/*
 * xnet.h's promise for writes: a write the target refuses (here its registration closed under
 * the posted receive, which xchan.h forbids) fails the connection, so the header behind it is
 * never delivered as if the payload were in place. The echo's send fails (its exit 13); this
 * end's receive must not complete with the buffer's old bytes.
 */
static void test_a_refused_write_delivers_nothing_behind_it(void)
{
	g_write_min = 1;
	struct side s = {0};
	pid_t pid = echo_or_skip(&s, __func__);
	g_write_min = 0;
	if (pid <= 0)
		return;
	uint64_t ann[1 + CHAN_MAX_RECVS] = {1, 5000};
	struct chan_err e;
	CHECK(send_one(&s, ann, sizeof(ann), -1, &e) == 0, "announce 5000 B");
	static uint8_t src[5000], dst[5000];
	fill(src, sizeof(src), 3);
	struct xchan_wkey wk;
	void *mr;
	g_write_min = 1;
	CHECK(open_to_writes(s.o, dst, sizeof(dst), &wk, &mr) == 0, "open to writes");
	g_write_min = 0;
	chan_req q;
	CHECK(xchan_rx_post_w(s.rx, 1, (void *[]){dst}, (uint64_t[]){5000}, (int32_t[]){0}, &wk, 0,
			      &q, &e) == 0,
	      "receive posted");
	close_to_writes(s.o, mr); /* before the echo writes */
	CHECK(send_one(&s, src, sizeof(src), 0, &e) == 0, "the payload to the echo");
	int done = 0, rc = 0;
	for (int64_t until = mono_ms() + 3000; !rc && !done && mono_ms() < until;) {
		rc = xchan_rx_test(s.rx, q, &done, NULL, &e);
		xchan_tx_progress(s.tx, NULL);
	}
	CHECK(!done, "the receive completed with %s though the write was refused",
	      memcmp(dst, src, sizeof(src)) ? "the old bytes" : "the payload");
	printf("%s: the receive %s (%d %s)\n", __func__, rc ? "failed" : "waits", rc,
	       rc ? e.what : "");
	stop_child(&s, pid, 13);
	xchan_rx_peer_gone(s.rx);
	xchan_tx_peer_gone(s.tx);
	side_close(&s);
}

static void test_a_send_larger_than_the_receive_fails_both_processes(void)
{
	struct side s = {0};
	pid_t pid = echo_or_skip(&s, __func__);
	if (pid <= 0)
		return;
	uint64_t ann[1 + CHAN_MAX_RECVS] = {1, 4096};
	struct chan_err e;
	CHECK(send_one(&s, ann, sizeof(ann), -1, &e) == 0, "announce 4096 B");
	static uint8_t big[5000];
	int rc = send_one(&s, big, sizeof(big), 0, &e);
	CHECK(rc == -EMSGSIZE && e.value[0] == 5000 && e.value[1] == 4096,
	      "sender: %d (%llu, %llu)", rc, (unsigned long long)e.value[0],
	      (unsigned long long)e.value[1]);
	stop_child(&s, pid, 30);  /* the receiver saw (5000, 4096) too */
	xchan_rx_peer_gone(s.rx); /* the daemon's word that the process exited, to both */
	xchan_tx_peer_gone(s.tx);
	side_close(&s);
}

/* The echo up, one receive posted that it will never fill, and then the echo killed. 0 when
 * skipped or failed to start. */
static pid_t echo_killed(struct side *s, const char *test, uint64_t *d, chan_req *q)
{
	pid_t pid = echo_or_skip(s, test);
	if (pid <= 0)
		return 0;
	uint64_t sz = 1000, cap = 8 * sizeof(*d);
	round_trip(s, 1, &sz, 5); /* the connection is up */
	CHECK(xchan_rx_post(s->rx, 1, (void *[]){d}, &cap, (int32_t[]){-1}, q, NULL) == 0,
	      "a receive the echo will never fill");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return pid;
}

/* The daemon's word (xchan_*_peer_gone, what the federation will pass on) fails it at once.
 * The PING alone is no test here: whether rxm fails a send to a killed peer, or completes it,
 * depends on whether its connection had seen the reset (it failed 1 run of CI's, passed
 * others), so docs/scale-out.md calls that detection best effort; test_xchan checks the
 * PING's own rules over the in-memory transport. */
static void test_a_dead_peer_fails_what_waits_on_it(void)
{
	struct side s = {0};
	uint64_t d[8];
	chan_req q;
	if (!echo_killed(&s, __func__, d, &q))
		return;
	xchan_rx_peer_gone(s.rx);
	xchan_tx_peer_gone(s.tx);
	struct chan_err e;
	int64_t t0 = mono_ms();
	CHECK(recv_wait(&s, q, NULL, &e) == -ECONNRESET && mono_ms() - t0 < 5000,
	      "the receive fails at once: %d", e.code);
	side_close(&s);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_exact_across_processes_at_every_size),
	CHECK_CASE(test_writes_exact_across_processes),
	CHECK_CASE(test_a_refused_write_delivers_nothing_behind_it),
	CHECK_CASE(test_a_send_larger_than_the_receive_fails_both_processes),
	CHECK_CASE(test_a_dead_peer_fails_what_waits_on_it),
};

int main(int argc, char **argv)
{
	return check_main(argc, argv, cases, CHECK_NCASES(cases));
}
