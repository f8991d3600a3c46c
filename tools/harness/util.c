/* SPDX-License-Identifier: MIT */
/*
 * util.c - clocks, failure records, data patterns and /proc counters
 * shared by the harness modules.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/harness/harness.h"

void hx_sleep(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

const char *hx_rc_str(int rc)
{
	static const char *names[] = {
		"ncclSuccess(0)",	  "ncclUnhandledCudaError(1)", "ncclSystemError(2)",
		"ncclInternalError(3)", "ncclInvalidArgument(4)",	   "ncclInvalidUsage(5)",
		"ncclRemoteError(6)",	  "ncclInProgress(7)",	   "ncclNumResults(8)",
	};

	if (rc >= 0 && rc <= 8)
		return names[rc];
	switch (rc) {
	case ENG_ETIMEDOUT:
		return "timeout";
	case ENG_EPROTO:
		return "API violation";
	case ENG_EABORTED:
		return "aborted";
	}
	return "unknown result code";
}

static void hx_append(char *dst, size_t cap, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

static void hx_append(char *dst, size_t cap, const char *fmt, va_list ap)
{
	size_t len = strlen(dst);

	if (len && len + 2 < cap) {
		memcpy(dst + len, "; ", 3);
		len += 2;
	}
	if (len < cap)
		vsnprintf(dst + len, cap - len, fmt, ap);
}

void hx_fail(struct hx_test *t, const char *fmt, ...)
{
	va_list ap;

	int first;

	pthread_mutex_lock(&t->lock);
	first = t->nfail++ == 0;
	if (first) {
		va_start(ap, fmt);
		vsnprintf(t->detail, sizeof(t->detail), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&t->lock);
	/* Tell the parent now, so the other ranks stop waiting for this one. */
	if (first)
		oob_try_send(OOB_NOTE, OOB_NOTE_FAILED, NULL, 0);
	if (hx_opt.verbose) {
		va_start(ap, fmt);
		fprintf(stderr, "[rank %d] %s: ", hx_w.rank, t->def->name);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
}

void hx_note(struct hx_test *t, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&t->lock);
	va_start(ap, fmt);
	hx_append(t->note, sizeof(t->note), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&t->lock);
}

int hx_failed(struct hx_test *t)
{
	int n;

	pthread_mutex_lock(&t->lock);
	n = t->nfail;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void hx_vlog(const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "[rank %d] %s\n", hx_w.rank, line);
}

void hx_log(const char *fmt, ...)
{
	va_list ap;

	if (!hx_opt.verbose)
		return;
	va_start(ap, fmt);
	hx_vlog(fmt, ap);
	va_end(ap);
}

/* Every test buffer is tracked, so what a failing test had to leave with the plugin
 * (a buffer may only go once its comm is closed) is freed when the test is over. */
static pthread_mutex_t hx_alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static void **hx_allocs;
static size_t hx_nallocs, hx_capallocs;

void *hx_alloc(size_t n)
{
	void *p = NULL;
	size_t sz = (n + 4095) & ~(size_t)4095;

	if (sz == 0)
		sz = 4096;
	if (posix_memalign(&p, 4096, sz) != 0 || !p)
		goto oom;
	pthread_mutex_lock(&hx_alloc_lock);
	if (hx_nallocs == hx_capallocs) {
		size_t cap = hx_capallocs ? 2 * hx_capallocs : 256;
		void **nv = realloc(hx_allocs, cap * sizeof(*nv));

		if (!nv) {
			pthread_mutex_unlock(&hx_alloc_lock);
			goto oom;
		}
		hx_allocs = nv;
		hx_capallocs = cap;
	}
	hx_allocs[hx_nallocs++] = p;
	pthread_mutex_unlock(&hx_alloc_lock);
	return p;
oom:
	fprintf(stderr, "[rank %d] harness: out of memory allocating %zu bytes\n", hx_w.rank, n);
	exit(1);
}

void hx_free(void *p)
{
	size_t i;

	if (!p)
		return;
	pthread_mutex_lock(&hx_alloc_lock);
	for (i = hx_nallocs; i-- > 0;) {
		if (hx_allocs[i] == p) {
			hx_allocs[i] = hx_allocs[--hx_nallocs];
			break;
		}
	}
	pthread_mutex_unlock(&hx_alloc_lock);
	free(p);
}

void hx_free_all(void)
{
	pthread_mutex_lock(&hx_alloc_lock);
	while (hx_nallocs)
		free(hx_allocs[--hx_nallocs]);
	free(hx_allocs);
	hx_allocs = NULL;
	hx_capallocs = 0;
	pthread_mutex_unlock(&hx_alloc_lock);
}

/* splitmix64: fast, and every 8-byte word of a pattern differs. */
static uint64_t hx_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint64_t hx_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
	return hx_mix(hx_mix(hx_mix(hx_mix(a) ^ b) ^ c) ^ d);
}

/* Byte i of the pattern is byte i%8 of word i/8; the word depends on the offset,
 * so data landing at the wrong offset is caught too. */
static uint64_t hx_word(uint64_t seed, size_t k)
{
	return hx_mix(seed + (uint64_t)k * 0xd1b54a32d192ed03ULL);
}

uint8_t hx_pattern_byte(uint64_t seed, size_t off)
{
	uint64_t w = hx_word(seed, off / 8);

	return (uint8_t)(w >> (8 * (off % 8)));
}

void hx_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t k, nw = len / 8;

	for (k = 0; k < nw; k++) {
		uint64_t w = hx_word(seed, k);

		memcpy(p + 8 * k, &w, 8);
	}
	for (k = nw * 8; k < len; k++)
		p[k] = hx_pattern_byte(seed, k);
}

size_t hx_check(const void *buf, size_t len, uint64_t seed, uint8_t *want, uint8_t *got)
{
	const uint8_t *p = buf;
	size_t k, i, nw = len / 8;

	for (k = 0; k < nw; k++) {
		uint64_t w = hx_word(seed, k), v;

		memcpy(&v, p + 8 * k, 8);
		if (v == w)
			continue;
		for (i = 8 * k; i < 8 * k + 8; i++) {
			if (p[i] != hx_pattern_byte(seed, i)) {
				*want = hx_pattern_byte(seed, i);
				*got = p[i];
				return i;
			}
		}
	}
	for (i = nw * 8; i < len; i++) {
		if (p[i] != hx_pattern_byte(seed, i)) {
			*want = hx_pattern_byte(seed, i);
			*got = p[i];
			return i;
		}
	}
	return SIZE_MAX;
}

size_t hx_check_poison(const void *buf, size_t from, size_t to)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = from; i < to; i++)
		if (p[i] != HX_POISON_BYTE)
			return i;
	return SIZE_MAX;
}

static int hx_count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* The directory stream's own fd is counted too; only differences matter. */
int hx_count_fds(void)
{
	return hx_count_dir("/proc/self/fd");
}

int hx_count_threads(void)
{
	return hx_count_dir("/proc/self/task");
}

int hx_maps_contain(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096 + 256];
	int found = 0;

	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, path) != NULL;
	fclose(f);
	return found;
}

size_t hx_fmt_bytes(char *out, size_t cap, size_t n)
{
	if (n >= (1u << 20) && n % (1u << 20) == 0)
		return (size_t)snprintf(out, cap, "%zu MiB", n >> 20);
	if (n >= 1024 && n % 1024 == 0)
		return (size_t)snprintf(out, cap, "%zu KiB", n >> 10);
	return (size_t)snprintf(out, cap, "%zu B", n);
}

int hx_ring_next(void)
{
	return (hx_w.rank + 1) % hx_w.nranks;
}

int hx_ring_prev(void)
{
	return (hx_w.rank + hx_w.nranks - 1) % hx_w.nranks;
}
