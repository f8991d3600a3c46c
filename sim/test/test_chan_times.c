/* SPDX-License-Identifier: MIT */
/*
 * test_chan_times.c - chan's read-only trace accessors (chan_tx_times,
 * chan_rx_times; plugin/trace.c uses them): what they say before, during and
 * after a message, on the ideal fabric, in one process.
 */
#include "sim/core/chan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "sim/test/check.h"

static void test_times(void)
{
	struct chan_geom g = {.slot_bytes = 4096, .nslots = 4};
	size_t len = chan_shm_bytes(&g);
	void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(base != MAP_FAILED, "mmap: %s", strerror(errno));
	if (base == MAP_FAILED)
		return;
	struct chan_tx *tx;
	struct chan_rx *rx;
	CHECK(chan_format(base, len, &g, 9) == 0, "format");
	CHECK(chan_tx_new(base, len, &tx) == 0 && chan_rx_new(base, len, &rx) == 0, "attach");
	struct chan_times t;
	CHECK(chan_tx_times(tx, -1, &t) == -EINVAL && chan_tx_times(tx, CHAN_MAX_SENDS, &t) ==
							     -EINVAL,
	      "tx range");
	CHECK(chan_rx_times(rx, CHAN_MAX_REQS, &t) == -EINVAL && chan_rx_times(NULL, 0, &t) ==
							     -EINVAL,
	      "rx range");

	/* two receives, then a 10000-byte and a 0-byte send: 3 + 1 chunks, 4 slots */
	enum { N = 10000 };
	uint8_t *src = malloc(N), *dst = calloc(1, N), *dst2 = calloc(1, 16);
	memset(src, 0x5a, N);
	void *d1[1] = {dst}, *d2[1] = {dst2};
	uint64_t c1[1] = {N}, c2[1] = {16};
	int32_t tags[1] = {3};
	chan_req r1, r2, s1, s2;
	CHECK(chan_rx_post(rx, 1, d1, c1, tags, &r1, NULL) == 0, "post r1");
	CHECK(chan_rx_post(rx, 1, d2, c2, tags, &r2, NULL) == 0, "post r2");
	CHECK(chan_rx_times(rx, r1, &t) == 0 && t.in_use && !t.started && !t.arrived &&
		      t.msg == 0 && t.bytes == 0,
	      "r1 posted: nothing yet");
	CHECK(chan_tx_post(tx, src, N, 3, &s1, NULL) == 0, "post s1");
	CHECK(chan_tx_post(tx, src, 0, 3, &s2, NULL) == 0, "post s2");
	CHECK(chan_tx_times(tx, s1, &t) == 0 && t.in_use && t.started && !t.arrived &&
		      t.msg == 0 && t.recv == 0 && t.bytes == N && t.ready_ns == 0 && !t.doomed,
	      "s1 posted: in staging, not counted (started %u arrived %u)", t.started, t.arrived);
	CHECK(chan_tx_times(tx, s2, &t) == 0 && t.msg == 1 && t.recv == 1, "s2 fills r2");

	int done = 0, sdone = 0;
	uint64_t got[1], sent;
	for (int i = 0; i < 1000000 && !done; i++)
		CHECK(chan_rx_test(rx, r1, &done, got, NULL) == 0, "rx test");
	CHECK(done && got[0] == N, "r1 done");
	CHECK(chan_rx_times(rx, r1, &t) == 0 && !t.in_use && t.started && t.arrived &&
		      t.bytes == N,
	      "r1 after done: still readable (bytes %llu)", (unsigned long long)t.bytes);
	CHECK(chan_tx_times(tx, s1, &t) == 0 && t.arrived, "s1: the receiver counted it");
	for (int i = 0; i < 1000000 && !sdone; i++)
		CHECK(chan_tx_test(tx, s1, &sdone, &sent, NULL) == 0, "tx test");
	CHECK(sdone && chan_tx_times(tx, s1, &t) == 0 && !t.in_use && t.arrived, "s1 done");
	done = 0;
	for (int i = 0; i < 1000000 && !done; i++)
		CHECK(chan_rx_test(rx, r2, &done, got, NULL) == 0, "rx test r2");
	CHECK(done && chan_rx_times(rx, r2, &t) == 0 && t.started && t.arrived && t.bytes == 0,
	      "a 0-byte message starts and arrives");
	sdone = 0;
	for (int i = 0; i < 1000000 && !sdone; i++)
		CHECK(chan_tx_test(tx, s2, &sdone, &sent, NULL) == 0, "tx test s2");

	chan_tx_free(tx);
	chan_rx_free(rx);
	munmap(base, len);
	free(src);
	free(dst);
	free(dst2);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_times),
};

CHECK_MAIN(cases)
