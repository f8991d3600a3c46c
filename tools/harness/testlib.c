/* SPDX-License-Identifier: MIT */
/*
 * testlib.c - what the harness's test files share (harness.h, "Helpers the test files
 * share"): ring links, the byte-for-byte receive check, one transfer each way, the
 * out-of-band barrier, and unloading the plugin with what it leaves behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/harness/harness.h"

int t_ring_open(struct eng *e, struct eng_links *ls)
{
	int r, n = hx_w.nranks;

	for (r = 0; r < n; r++)
		eng_links_add(ls, r, 0, (r + 1) % n, 0, -1, 0);
	return eng_links_open(e, ls);
}

struct eng_conn *t_ring_send(struct eng_links *ls)
{
	struct eng_link *l = eng_link_find(ls, hx_w.rank, hx_ring_next(), 0);

	return l ? l->send : NULL;
}

struct eng_conn *t_ring_recv(struct eng_links *ls)
{
	struct eng_link *l = eng_link_find(ls, hx_ring_prev(), hx_w.rank, 0);

	return l ? l->recv : NULL;
}

int t_check(struct hx_test *t, const char *what, const void *buf, size_t size, size_t cap,
	    uint64_t seed, int reported, int reported_known)
{
	uint8_t want, got;
	size_t off;

	if (reported_known && (reported < 0 || (size_t)reported != size)) {
		hx_fail(t, "%s: test reported %d bytes received, %zu were sent", what, reported, size);
		return -1;
	}
	off = hx_check(buf, size, seed, &want, &got);
	if (off != SIZE_MAX) {
		hx_fail(t, "%s: byte %zu of %zu differs: expected 0x%02x, got 0x%02x", what, off, size,
			want, got);
		return -1;
	}
	off = hx_check_poison(buf, size, cap);
	if (off != SIZE_MAX) {
		hx_fail(t, "%s: byte %zu written past the %zu-byte message (capacity %zu): 0x%02x",
			what, off, size, cap, ((const uint8_t *)buf)[off]);
		return -1;
	}
	return 0;
}

void t_aborted(struct hx_test *t, const char *during)
{
	int ab = oob_aborted();

	if (ab > HX_MAX_RANKS || ab <= 0)
		hx_fail(t, "aborted during %s: lost the parent", during);
	else if (ab - 1 == hx_w.rank)
		hx_fail(t, "stopped during %s after this rank's own failure", during);
	else
		hx_fail(t, "aborted during %s: rank %d failed this test", during, ab - 1);
	if (ab > 0 && ab - 1 != hx_w.rank)
		t->aborted = 1;
}

int t_barrier(struct hx_test *t)
{
	if (oob_barrier() == 0)
		return 0;
	t_aborted(t, "a barrier");
	return -1;
}

int t_irecv1(struct eng_conn *c, void *buf, size_t cap, int tag, void *mh, struct eng_op *op)
{
	return eng_irecv(c, 1, &buf, &cap, &tag, &mh, op);
}

size_t t_reglen(size_t n)
{
	return n < 4096 ? 4096 : n;
}

int t_xfer(struct eng *e, struct eng_conn *sc, struct eng_conn *rc, size_t size, size_t cap,
	   uint64_t sseed, uint64_t rseed, int stag, int rtag)
{
	struct eng_op sop, rop;
	void *sbuf = NULL, *rbuf = NULL, *smh = NULL, *rmh = NULL;
	int ret = -1, sreg = 0, rreg = 0;
	char what[96];

	memset(&sop, 0, sizeof(sop));
	memset(&rop, 0, sizeof(rop));
	if (sc) {
		sbuf = hx_alloc(size);
		hx_fill(sbuf, size, sseed);
		if (eng_reg(sc, sbuf, t_reglen(size), &smh) < 0)
			goto out;
		sreg = 1;
	}
	if (rc) {
		rbuf = hx_alloc(cap);
		memset(rbuf, HX_POISON_BYTE, cap);
		if (eng_reg(rc, rbuf, t_reglen(cap), &rmh) < 0)
			goto out;
		rreg = 1;
		rop.want_sizes = 1;
		if (eng_recv1(rc, rbuf, cap, rtag, rmh, &rop) < 0)
			goto out;
	}
	if (sc && eng_send(sc, sbuf, size, stag, smh, &sop) < 0)
		goto out;
	if (rc && eng_wait(e, &rop) < 0)
		goto out;
	if (sc && eng_wait(e, &sop) < 0)
		goto out;
	if (rc) {
		snprintf(what, sizeof(what), "%zu B from rank %d", size, rc->peer);
		if (t_check(e->t, what, rbuf, size, cap, rseed, rop.sizes[0], rop.sizes_known) < 0)
			goto out;
	}
	ret = 0;
out:
	if (ret < 0) {
		eng_cancel(e, &sop);
		eng_cancel(e, &rop);
	}
	/* Drop registrations only once nothing is in flight on them, or at close. */
	if (ret == 0) {
		if (sreg)
			eng_dereg(sc, smh);
		if (rreg)
			eng_dereg(rc, rmh);
	}
	/* On failure the plugin may still hold them until the comm closes: the test's end
	 * frees them then (hx_free_all). */
	if (ret == 0 || (!sreg && !rreg)) {
		hx_free(sbuf);
		hx_free(rbuf);
	}
	return ret;
}

int t_unload_plugin(struct hx_test *t)
{
	int v = pl.version, ret = 0, n = -1;
	double t_end;
	ncclResult_t rc;

	if (pl_has_finalize()) {
		rc = pl_finalize();
		if (rc != ncclSuccess) {
			hx_fail(t, "finalize returned %s", hx_rc_str(rc));
			ret = -1;
		}
	}
	/* NCCL may dlclose right after the last finalize: helper threads must be gone. */
	t_end = hx_now() + 2;
	do {
		n = hx_count_threads();
		if (n > hx_base_threads)
			hx_sleep(0.01);
	} while (n > hx_base_threads && hx_now() < t_end);
	js_int(t->metrics, "threads_after_finalize", n - hx_base_threads);
	if (n > hx_base_threads) {
		if (v >= 11) {
			hx_fail(t, "%d plugin thread(s) still running 2 s after finalize returned; NCCL "
				"dlcloses the library right after the last finalize", n - hx_base_threads);
			ret = -1;
		} else {
			hx_note(t, "%d plugin thread(s) still running before dlclose (v%d has no finalize)",
				n - hx_base_threads, v);
		}
	}
	if (ret < 0) {
		/* Unmapping code that threads still run would turn a failure into a crash. */
		js_bool(t->metrics, "left_loaded", 1);
		return ret;
	}
	pl_unload();
	js_bool(t->metrics, "unmapped", hx_maps_contain(pl.path) == 0);
	return ret;
}
