/* SPDX-License-Identifier: MIT */
/*
 * test_copyq.c - the copy threads (sim/core/copyq.c): jobs run and are marked done;
 * copyq_drain returns only when every job queued before it is done, queued
 * and running ones alike, while later jobs may still be going; copyq_stop
 * finishes what is queued; a submit after a stop starts the threads again.
 * Slow copies (a sleep in the copy function) make the drain's wait visible.
 */
#include "sim/core/copyq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/test/check.h"

enum { NJOBS = 12, LEN = 4096 };

static _Atomic int copies_started;

/* A copy that takes 5 ms: long enough that a drain which did not wait would be caught. */
static void slow_copy(void *dst, const void *src, size_t n)
{
	atomic_fetch_add(&copies_started, 1);
	struct timespec ts = {0, 5 * 1000 * 1000};
	nanosleep(&ts, NULL);
	memcpy(dst, src, n);
}

static int all_done(struct copyq_job *j, int n)
{
	for (int i = 0; i < n; i++)
		if (!copyq_done(&j[i]))
			return 0;
	return 1;
}

/* Queue n jobs copying src[i] to dst[i]; inline (and done) where the queue refused one. */
static int submit_all(struct copyq_job *j, int n, uint8_t (*dst)[LEN], uint8_t (*src)[LEN])
{
	int queued = 0;
	for (int i = 0; i < n; i++) {
		j[i] = (struct copyq_job){.dst = dst[i], .src = src[i], .len = LEN, .fn = slow_copy};
		if (copyq_submit(&j[i]) == 0) {
			queued++;
		} else {
			slow_copy(dst[i], src[i], LEN);
			atomic_store(&j[i].state, 2);
		}
	}
	return queued;
}

static void test_drain_and_stop(void)
{
	static uint8_t src[2 * NJOBS][LEN], dst[2 * NJOBS][LEN];
	static struct copyq_job jobs[2 * NJOBS];
	for (int i = 0; i < 2 * NJOBS; i++)
		memset(src[i], i + 1, LEN);

	setenv("SIMFABRIC_COPY_THREADS", "3", 1);
	CHECK(copyq_enabled(), "SIMFABRIC_COPY_THREADS=3 enables the threads");

	/* 12 jobs of 5 ms over 3 threads: about 20 ms of work; the drain must see all of it */
	int q = submit_all(jobs, NJOBS, dst, src);
	CHECK(q == NJOBS, "all %d jobs queued (got %d)", NJOBS, q);
	copyq_drain();
	CHECK(all_done(jobs, NJOBS), "drain returned with a job before it not done");
	for (int i = 0; i < NJOBS; i++)
		CHECK(memcmp(dst[i], src[i], LEN) == 0, "job %d copied its bytes", i);

	/* a drain with nothing queued returns at once */
	copyq_drain();

	/* jobs queued after a drain began are not waited for, but the earlier ones are */
	submit_all(jobs, NJOBS, dst, src);
	copyq_drain();
	CHECK(all_done(jobs, NJOBS), "second batch done after its drain");
	submit_all(jobs + NJOBS, NJOBS, dst + NJOBS, src + NJOBS);
	copyq_stop(); /* finishes the queued ones before the threads end */
	CHECK(all_done(jobs + NJOBS, NJOBS), "stop finished every queued job");
	for (int i = NJOBS; i < 2 * NJOBS; i++)
		CHECK(memcmp(dst[i], src[i], LEN) == 0, "job %d copied its bytes", i);

	/* a submit after a stop starts them again; drain and stop are safe to repeat */
	memset(dst[0], 0, LEN);
	submit_all(jobs, 1, dst, src);
	copyq_drain();
	CHECK(copyq_done(&jobs[0]) && memcmp(dst[0], src[0], LEN) == 0, "restarted threads copy");
	copyq_stop();
	copyq_stop();
	copyq_drain();
	CHECK(atomic_load(&copies_started) == 3 * NJOBS + 1, "every copy ran once (%d)",
	      atomic_load(&copies_started));
}

static const struct check_case cases[] = {
	CHECK_CASE(test_drain_and_stop),
};

CHECK_MAIN(cases)
