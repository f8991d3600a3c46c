/* SPDX-License-Identifier: MIT */
/*
 * trace.c - the message trace (see trace.h).
 *
 * The data path's hooks keep each comm's messages in flight in a table of
 * their own, indexed by chan's request number, and watch them move (first
 * byte, delivery) on every test() of the comm, oldest first, through chan's
 * read-only accessors. A finished message is copied into the comm's record
 * chunks, which only grow, are published with release stores and are read by
 * the writer alone; the budget (SIMFABRIC_TRACE_MAX) is one atomic counter.
 *
 * The writer runs at the last finalize and at exit. It lays each
 * connection's messages out on as many tracks ("lanes") as it has messages in
 * flight at once, because a Chrome trace track may only hold slices that nest
 * and pipelined messages overlap; sorts every event by time; writes a
 * temporary file and renames it over FILE, so FILE is always whole.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/net_int.h"
#include "plugin/plog.h"
#include "plugin/trace.h"
#include "sim/core/chan.h"
#include "sim/core/fstate.h"
#include "sim/core/jsonw.h"

#define TR_DEFAULT_MAX 1000000ULL
#define TR_CHUNK 256		     /* records per chunk */
#define TR_TID_LANES 1000	     /* a connection's tracks: tid = serial x 1000 + lane */
#define TR_TID_INSTANCE 100000000    /* a reloaded library's tracks are offset by this */
#define TR_MAX_INSTANCES 20	     /* FILE, FILE.1 ... for reloads within one process */
#define TR_PEER_LEN (2 * SFC_NAME_MAX + 2)

_Atomic int sftrace_on;

enum { TR_OK = 0, TR_FAILED, TR_UNFINISHED };

/* One message: a send, or a (multi-)receive. */
struct tr_msg {
	int64_t post, first, deliv, done; /* CLOCK_MONOTONIC ns; first, deliv 0: not seen */
	int64_t model_ready, model_done;  /* what the model said (0: not modelled) */
	int64_t post_ns;		  /* send: time inside isend */
	uint64_t bytes;			  /* send: its size; receive: what landed */
	uint64_t seq;			  /* send: the message's number; receive: the receive's */
	uint64_t recv;			  /* send: the receive it fills */
	const char *what;		  /* chan's static text, for a failure */
	int32_t tag;
	int32_t err;	/* a failure's positive errno */
	uint32_t fault; /* the fault that failed it, id + 1 */
	uint16_t n, buf;
	uint16_t lane; /* the writer's */
	uint8_t status;
	uint8_t live; /* in flight (the table's) */
};

struct tr_chunk {
	_Atomic(struct tr_chunk *) next;
	_Atomic uint32_t n; /* records published */
	struct tr_msg m[TR_CHUNK];
};

/* Why the comm failed (its first failure: failures are sticky). */
struct tr_fail {
	int64_t ts;
	const char *op, *what, *kind;
	ncclResult_t res;
	int code; /* chan's negative errno (0: the daemon went away) */
	uint64_t msg, link;
	uint32_t fault; /* id + 1 */
	char fault_name[FAULT_NAME_MAX + 1];
};

struct sftrace_comm {
	struct sftrace_comm *next; /* tr.comms, under tr.lock */
	int is_send, dev;
	uint32_t serial;
	uint64_t chan_id;
	char desc[SFNET_DESC_LEN];
	char peer[TR_PEER_LEN];
	int64_t open_ns;
	_Atomic int64_t close_ns;
	_Atomic int failed; /* fail is set (release) */
	struct tr_fail fail;
	_Atomic(struct tr_chunk *) head; /* finished messages, in completion order */
	struct tr_chunk *tail;
	/* In flight (the comm's thread only): by chan request, and their post order. */
	int cap;
	struct tr_msg *live;
	chan_req *order;
	uint64_t nposted, cur_first, cur_deliv;
	/* The writer's, under tr.lock. */
	uint32_t nlanes;
};

static struct {
	pthread_mutex_t lock; /* the comm list and the writer */
	int inited, freed;
	pid_t pid;
	int instance;
	char path[PATH_MAX];
	uint64_t max;
	_Atomic uint64_t reserved, dropped, dropped_msgs;
	_Atomic int said_full, dirty;
	int written;
	struct sftrace_comm *comms;
	uint32_t ncomms;
	int64_t start_ns;
	char node[SFC_NAME_MAX];
	int ndev;
	char devs[SFC_MAX_NICS][SFC_NAME_MAX];
} tr = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int64_t tr_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* FILE with %p, %n and %% expanded, made absolute (the process may chdir before exit). */
static int expand_path(const char *tmpl, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = 0;
	if (tmpl[0] != '/') {
		if (!getcwd(out, cap))
			return -1;
		o = strlen(out);
		if (o + 1 >= cap)
			return -1;
		out[o++] = '/';
	}
	for (const char *p = tmpl; *p; p++) {
		char buf[SFC_NAME_MAX];
		const char *add = NULL;
		if (*p == '%' && p[1] == 'p') {
			snprintf(buf, sizeof(buf), "%d", (int)getpid());
			add = buf;
		} else if (*p == '%' && p[1] == 'n') {
			snprintf(buf, sizeof(buf), "%s", tr.node);
			for (char *q = buf; *q; q++)
				if (*q == '/')
					*q = '_';
			add = buf;
		} else if (*p == '%' && p[1] == '%') {
			add = "%";
		}
		if (add) {
			p++;
		} else {
			buf[0] = *p;
			buf[1] = 0;
			add = buf;
		}
		size_t n = strlen(add);
		if (o + n >= cap)
			return -1;
		memcpy(out + o, add, n);
		o += n;
	}
	out[o] = 0;
	return 0;
}

/* Did an earlier load of the library in this process write path? (Its header says.) */
static int written_by_us(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char buf[256];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strstr(buf, "\"pid\":");
	return strstr(buf, "\"simfabric_trace\"") && p && atol(p + 6) == (long)getpid();
}

/* FILE for instance 0; FILE with ".k" before a ".json" ending (else after it) for k > 0. */
static int instance_path(const char *base, int k, char *out, size_t cap)
{
	size_t n = strlen(base);
	int w;
	if (k == 0)
		w = snprintf(out, cap, "%s", base);
	else if (n > 5 && strcmp(base + n - 5, ".json") == 0)
		w = snprintf(out, cap, "%.*s.%d.json", (int)(n - 5), base, k);
	else
		w = snprintf(out, cap, "%s.%d", base, k);
	return w < 0 || (size_t)w >= cap ? -1 : 0;
}

static uint64_t env_max(void)
{
	const char *v = getenv("SIMFABRIC_TRACE_MAX");
	if (!v || !*v)
		return TR_DEFAULT_MAX;
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || *end || !(x >= 0) || x > 1e15) {
		PWARN("ignoring SIMFABRIC_TRACE_MAX=%s: not a number of events in [0, 1e15]; using "
		      "%llu",
		      v, TR_DEFAULT_MAX);
		return TR_DEFAULT_MAX;
	}
	return (uint64_t)x;
}

static void tr_free_all(void);
static void tr_write(int verbose);

/* At exit, or when the library is unloaded: write what changed; free it all when unused. */
static void tr_atexit(void)
{
	if (!sftrace_on || getpid() != tr.pid)
		return; /* a child forked from a rank is not that rank */
	pthread_mutex_lock(&tr.lock);
	if (atomic_load(&tr.dirty) || !tr.written)
		tr_write(0); /* NCCL may be half torn down: say nothing */
	pthread_mutex_unlock(&tr.lock);
	/* Free only if no comm can still be running (every ctx is gone). */
	if (pthread_mutex_trylock(&sfnet_g.lock) == 0) {
		if (sfnet_g.nctx == 0 && !sfnet_g.objs)
			tr_free_all();
		pthread_mutex_unlock(&sfnet_g.lock);
	}
}

/* Under sfnet_g.lock, after the session is open (the node and NICs are known). */
void sftrace_init(void)
{
	if (tr.inited)
		return;
	tr.inited = 1;
	const char *v = getenv("SIMFABRIC_TRACE");
	if (!v || !*v)
		return;
	snprintf(tr.node, sizeof(tr.node), "%s",
		 sfnet_g.session ? sfnet_g.session->node : sfnet_g.node);
	tr.ndev = sfnet_g.ndev;
	for (int i = 0; i < tr.ndev; i++)
		snprintf(tr.devs[i], sizeof(tr.devs[i]), "%s", sfnet_g.devs[i].name);
	tr.max = env_max();
	char base[PATH_MAX];
	if (expand_path(v, base, sizeof(base))) {
		PWARN("SIMFABRIC_TRACE=%s: the path is too long (or the working directory unknown); "
		      "not tracing",
		      v);
		return;
	}
	int k = 0;
	for (;; k++) {
		if (instance_path(base, k, tr.path, sizeof(tr.path))) {
			PWARN("SIMFABRIC_TRACE=%s: the path is too long; not tracing", v);
			return;
		}
		if (k + 1 == TR_MAX_INSTANCES || !written_by_us(tr.path))
			break;
	}
	tr.instance = k;
	/* Find out now, not at exit, whether the file can be written at all. */
	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", tr.path, (int)getpid());
	FILE *f = jsonw_create(tmp);
	if (!f) {
		PWARN("SIMFABRIC_TRACE: cannot write %s (%s); not tracing", tmp, strerror(errno));
		return;
	}
	fclose(f);
	unlink(tmp);
	tr.pid = getpid();
	tr.start_ns = tr_now();
	atexit(tr_atexit);
	sftrace_on = 1;
	if (k)
		PINFO(NCCL_INIT | NCCL_NET,
		      "trace: %s was written by an earlier load of the plugin in this process; this "
		      "one writes %s (merge them with `simfabric trace merge`)",
		      base, tr.path);
	PINFO(NCCL_INIT | NCCL_NET,
	      "trace: recording every message to %s (at finalize and at exit; "
	      "SIMFABRIC_TRACE_MAX %llu events)",
	      tr.path, (unsigned long long)tr.max);
}

/* ---- the data path's side ---------------------------------------------------------------- */

static int tr_times(const struct sfnet_comm *c, const struct sftrace_comm *tc, chan_req q,
		    struct chan_times *t)
{
	return tc->is_send ? chan_tx_times(c->tx, q, t) : chan_rx_times(c->rx, q, t);
}

/* "send node0/nic0 -> node1/nic0 chan 0x1": the peer is the word after the arrow. */
static void peer_of(const char *desc, char *out, size_t cap)
{
	const char *a = strstr(desc, "-> ");
	if (!a)
		a = strstr(desc, "<- ");
	out[0] = 0;
	if (!a)
		return;
	a += 3;
	size_t n = strcspn(a, " ");
	snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), a);
}

__attribute__((cold, noinline)) static struct sftrace_comm *tr_comm_new(struct sfnet_comm *c)
{
	struct sftrace_comm *tc = calloc(1, sizeof(*tc));
	int cap = c->obj.kind == SFNET_SEND ? CHAN_MAX_SENDS : CHAN_MAX_REQS;
	if (tc) {
		tc->live = calloc((size_t)cap, sizeof(*tc->live));
		tc->order = calloc((size_t)cap, sizeof(*tc->order));
	}
	if (!tc || !tc->live || !tc->order) {
		if (tc) {
			free(tc->live);
			free(tc->order);
			free(tc);
		}
		PWARN("trace: out of memory for %s's trace; tracing stops", c->desc);
		sftrace_on = 0;
		return NULL;
	}
	tc->cap = cap;
	tc->is_send = c->obj.kind == SFNET_SEND;
	tc->dev = c->dev;
	tc->chan_id = c->chan_id;
	snprintf(tc->desc, sizeof(tc->desc), "%s", c->desc);
	peer_of(c->desc, tc->peer, sizeof(tc->peer));
	tc->open_ns = tr_now();
	pthread_mutex_lock(&tr.lock);
	tc->serial = ++tr.ncomms;
	tc->next = tr.comms;
	tr.comms = tc;
	pthread_mutex_unlock(&tr.lock);
	atomic_store(&tr.dirty, 1);
	c->trace = tc;
	return tc;
}

static inline struct sftrace_comm *tr_comm(struct sfnet_comm *c)
{
	if (__builtin_expect(c->trace != NULL, 1))
		return c->trace;
	return c->tx || c->rx ? tr_comm_new(c) : NULL; /* cross-host comms: not traced yet */
}

/* The events a finished message becomes (the writer writes exactly these). */
static uint32_t msg_events(const struct sftrace_comm *tc, const struct tr_msg *m)
{
	uint32_t k = 1 + (m->first != 0) + (m->deliv != 0) + (m->status == TR_FAILED);
	if (m->status == TR_OK)
		k += tc->is_send ? 1 : m->n; /* the flows from sender to receiver */
	return k;
}

__attribute__((cold, noinline)) static void tr_full(const struct sftrace_comm *tc,
						    const struct tr_msg *m)
{
	if (atomic_exchange(&tr.said_full, 1))
		return;
	PINFO(NCCL_INIT | NCCL_NET,
	      "trace: SIMFABRIC_TRACE_MAX (%llu events) reached at %s message #%llu; recording "
	      "stops here (%s's metadata counts what was dropped)",
	      (unsigned long long)tr.max, tc->desc, (unsigned long long)m->seq, tr.path);
}

static struct tr_chunk *tr_chunk_new(struct sftrace_comm *tc)
{
	struct tr_chunk *k = malloc(sizeof(*k));
	if (!k)
		return NULL;
	atomic_init(&k->next, NULL);
	atomic_init(&k->n, 0);
	if (tc->tail)
		atomic_store_explicit(&tc->tail->next, k, memory_order_release);
	else
		atomic_store_explicit(&tc->head, k, memory_order_release);
	tc->tail = k;
	return k;
}

/* A message is done (or failed, or unfinished at close): keep it if the budget allows. */
static void tr_finish(struct sftrace_comm *tc, struct tr_msg *m)
{
	m->live = 0;
	uint32_t k = msg_events(tc, m);
	uint64_t before = atomic_fetch_add_explicit(&tr.reserved, k, memory_order_relaxed);
	struct tr_chunk *ch = tc->tail;
	uint32_t n = ch ? atomic_load_explicit(&ch->n, memory_order_relaxed) : TR_CHUNK;
	if (before + k <= tr.max && n == TR_CHUNK) {
		ch = tr_chunk_new(tc);
		n = 0;
	}
	if (before + k > tr.max || !ch) {
		atomic_fetch_add_explicit(&tr.dropped, k, memory_order_relaxed);
		atomic_fetch_add_explicit(&tr.dropped_msgs, 1, memory_order_relaxed);
		atomic_store_explicit(&tr.dirty, 1, memory_order_relaxed);
		tr_full(tc, m);
		return;
	}
	ch->m[n] = *m;
	atomic_store_explicit(&ch->n, n + 1, memory_order_release);
	atomic_store_explicit(&tr.dirty, 1, memory_order_relaxed);
}

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* Delivered: the later of the model's time and the data's arrival, seen now. */
static void set_delivered(struct sftrace_comm *tc, struct tr_msg *m, const struct chan_times *t,
			  int64_t now)
{
	if (!tc->is_send) {
		m->model_ready = t->ready_ns;
		m->bytes = t->bytes;
	}
	if (!m->first)
		m->first = now;
	m->deliv = max64(m->model_ready, now);
}

/*
 * What moved since the last look, oldest first: chunks go out and land in
 * post order, so each cursor stops at the first message that has not moved.
 */
static void tr_observe(struct sfnet_comm *c, struct sftrace_comm *tc, int64_t now)
{
	struct chan_times t;
	if (tc->nposted - tc->cur_first > (uint64_t)tc->cap)
		tc->cur_first = tc->nposted - (uint64_t)tc->cap;
	if (tc->nposted - tc->cur_deliv > (uint64_t)tc->cap)
		tc->cur_deliv = tc->nposted - (uint64_t)tc->cap;
	for (; tc->cur_first < tc->nposted; tc->cur_first++) {
		chan_req q = tc->order[tc->cur_first % (uint64_t)tc->cap];
		struct tr_msg *m = &tc->live[q];
		if (!m->live || m->first)
			continue;
		if (tr_times(c, tc, q, &t) || !t.started)
			break;
		m->first = now;
	}
	for (; tc->cur_deliv < tc->nposted; tc->cur_deliv++) {
		chan_req q = tc->order[tc->cur_deliv % (uint64_t)tc->cap];
		struct tr_msg *m = &tc->live[q];
		if (!m->live || m->deliv)
			continue;
		if (tr_times(c, tc, q, &t) || !t.arrived)
			break;
		if (!t.doomed) /* a message the model fails is never delivered */
			set_delivered(tc, m, &t, now);
	}
}

static struct tr_msg *tr_post(struct sftrace_comm *tc, chan_req q)
{
	if (q < 0 || q >= tc->cap)
		return NULL;
	tc->order[tc->nposted++ % (uint64_t)tc->cap] = q;
	return &tc->live[q];
}

long long sftrace_now(void)
{
	return tr_now();
}

void sftrace_isend(struct sfnet_comm *c, const struct sfnet_req *r, size_t size, int tag,
		   long long entered)
{
	int64_t now = tr_now(); /* before a first message's comm setup */
	struct sftrace_comm *tc = tr_comm(c);
	struct chan_times t;
	if (!tc || chan_tx_times(c->tx, r->creq, &t))
		return;
	struct tr_msg *m = tr_post(tc, r->creq);
	if (!m)
		return;
	*m = (struct tr_msg){.post = now, .first = t.started ? now : 0, .model_ready = t.ready_ns,
			     .model_done = t.done_ns, .bytes = size, .seq = t.msg, .recv = t.recv,
			     .tag = tag, .n = 1, .buf = (uint16_t)t.buf, .live = 1,
			     .post_ns = entered ? now - entered : 0};
}

void sftrace_irecv(struct sfnet_comm *c, const struct sfnet_req *r, int n, const size_t *sizes,
		   const int *tags)
{
	int64_t now = tr_now();
	struct sftrace_comm *tc = tr_comm(c);
	struct chan_times t;
	if (!tc || chan_rx_times(c->rx, r->creq, &t))
		return;
	struct tr_msg *m = tr_post(tc, r->creq);
	if (!m)
		return;
	uint64_t cap = 0;
	for (int i = 0; i < n; i++)
		cap += sizes[i];
	*m = (struct tr_msg){.post = now, .bytes = cap, .seq = t.msg, .recv = t.recv,
			     .tag = tags ? tags[0] : 0, .n = (uint16_t)n, .live = 1};
}

void sftrace_test(struct sfnet_comm *c, const struct sfnet_req *r, int rc, int done,
		  const struct chan_err *e)
{
	struct sftrace_comm *tc = c->trace;
	if (!tc)
		return;
	int64_t now = tr_now();
	tr_observe(c, tc, now);
	if (rc == 0 && !done)
		return;
	struct chan_times t;
	if (r->creq < 0 || r->creq >= tc->cap || tr_times(c, tc, r->creq, &t))
		return;
	struct tr_msg *m = &tc->live[r->creq];
	if (!m->live)
		return;
	if (!m->first)
		m->first = now;
	if (rc == 0) {
		if (!m->deliv)
			set_delivered(tc, m, &t, now);
		if (m->deliv > now)
			m->deliv = now; /* cannot be: done waits for the model; never out of order */
		m->status = TR_OK;
	} else {
		m->status = TR_FAILED;
		m->deliv = 0; /* never delivered */
		m->err = -rc;
		m->what = e ? e->what : NULL;
		m->fault = e && e->fault ? e->fault : t.fault;
		if (!tc->is_send)
			m->bytes = t.bytes;
	}
	m->done = now;
	tr_finish(tc, m);
}

void sftrace_fail(struct sfnet_comm *c, const char *op, int code, ncclResult_t res,
		  const struct chan_err *e)
{
	struct sftrace_comm *tc = tr_comm(c);
	if (!tc || atomic_load_explicit(&tc->failed, memory_order_relaxed))
		return;
	struct tr_fail *f = &tc->fail;
	memset(f, 0, sizeof(*f));
	f->ts = tr_now();
	f->op = op;
	f->code = code;
	f->res = res;
	f->what = e && e->what && *e->what ? e->what
		  : code == 0		   ? "the fabric daemon went away"
					   : NULL;
	if (e) {
		f->msg = e->msg;
		f->fault = e->fault;
		f->link = e->value[0];
	}
	struct fst_view *fab = c->session ? c->session->fab : NULL;
	struct fst_fault *ff = fab && f->fault ? fst_fault(fab->shm, f->fault - 1) : NULL;
	if (ff) {
		snprintf(f->fault_name, sizeof(f->fault_name), "%s", ff->spec.name);
		f->kind = ff->spec.kind < FAULT_K_COUNT ? fault_kind_names[ff->spec.kind] : NULL;
	}
	atomic_store_explicit(&tc->failed, 1, memory_order_release);
	atomic_store_explicit(&tr.dirty, 1, memory_order_relaxed);
}

void sftrace_close(struct sfnet_comm *c)
{
	struct sftrace_comm *tc = c->trace;
	if (!tc)
		return;
	int64_t now = tr_now();
	tr_observe(c, tc, now);
	uint64_t from = tc->nposted > (uint64_t)tc->cap ? tc->nposted - (uint64_t)tc->cap : 0;
	for (uint64_t k = from; k < tc->nposted; k++) {
		struct tr_msg *m = &tc->live[tc->order[k % (uint64_t)tc->cap]];
		if (!m->live)
			continue;
		m->status = TR_UNFINISHED;
		m->what = "in flight when the connection was closed";
		m->done = now;
		tr_finish(tc, m);
	}
	free(tc->live);
	free(tc->order);
	tc->live = NULL;
	tc->order = NULL;
	atomic_store_explicit(&tc->close_ns, now, memory_order_release);
	atomic_store_explicit(&tr.dirty, 1, memory_order_relaxed);
	c->trace = NULL;
}

/* ---- the writer ----------------------------------------------------------------------------- */

enum ev_kind {
	EV_OPEN, /* on the NIC's track */
	EV_X,
	EV_FIRST,
	EV_FLOW_OUT,
	EV_DELIV,
	EV_FLOW_IN,
	EV_FAILED,
	EV_FAIL_CONN, /* the comm's failure, on its first track */
	EV_FAIL_NIC,  /* ... and on the NIC's */
	EV_CLOSE,
};

struct tr_ev {
	int64_t ts;
	const struct tr_msg *m;
	const struct sftrace_comm *c;
	uint16_t kind, sub; /* sub: a receive's buffer, for its flows */
};

static int ev_cmp(const void *a, const void *b)
{
	const struct tr_ev *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->c != y->c)
		return x->c->serial < y->c->serial ? -1 : 1;
	return x->m == y->m ? 0 : x->m < y->m ? -1 : 1;
}

static int post_cmp(const void *a, const void *b)
{
	const struct tr_msg *x = *(const struct tr_msg *const *)a;
	const struct tr_msg *y = *(const struct tr_msg *const *)b;
	if (x->post != y->post)
		return x->post < y->post ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void put_us(FILE *f, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

static long long tid_base(void)
{
	return (long long)tr.instance * TR_TID_INSTANCE;
}

static long long tid_nic(int dev)
{
	return tid_base() + dev + 1;
}

static long long tid_lane(const struct sftrace_comm *c, unsigned lane)
{
	return tid_base() + (long long)c->serial * TR_TID_LANES + lane;
}

static const char *errno_name(int e)
{
	switch (e) {
	case ETIMEDOUT:
		return "ETIMEDOUT";
	case ECONNRESET:
		return "ECONNRESET";
	case ESHUTDOWN:
		return "ESHUTDOWN";
	case EMSGSIZE:
		return "EMSGSIZE";
	case EPROTO:
		return "EPROTO";
	case EINVAL:
		return "EINVAL";
	case ENOMEM:
		return "ENOMEM";
	case EDEADLK:
		return "EDEADLK";
	case 0:
		return "";
	}
	return "errno";
}

static const char *nccl_name(ncclResult_t r)
{
	static const char *const names[] = {"ncclSuccess",	    "ncclUnhandledCudaError",
					    "ncclSystemError",	    "ncclInternalError",
					    "ncclInvalidArgument",  "ncclInvalidUsage",
					    "ncclRemoteError",	    "ncclInProgress"};
	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "ncclResult?";
}

static void put_head(FILE *f, const char *ph, const char *cat, long long tid, int64_t ts)
{
	fprintf(f, "{\"ph\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%lld,\"ts\":", ph, cat,
		(int)tr.pid, tid);
	put_us(f, ts);
}

/* Same-ts ordering keeps a flow's end strictly inside its slice where it can. */
static int64_t inside(const struct tr_msg *m, int64_t ts)
{
	if (ts < m->post)
		ts = m->post;
	if (ts >= m->done && m->done > m->post)
		ts = m->done - 1;
	return ts;
}

static uint64_t flow_id(const struct sftrace_comm *c, uint64_t recv, unsigned buf)
{
	/* unique per message of the fabric: (connection, receive, buffer); < 2^53 */
	return ((c->chan_id & 0x1fffff) << 32) | ((recv << 3 | buf) & 0xffffffffULL);
}

static void put_fault_name(FILE *f, const struct tr_fail *fl)
{
	char name[FAULT_NAME_MAX + 64];
	snprintf(name, sizeof(name), "fault '%s' (%s)", fl->fault_name,
		 fl->kind ? fl->kind : "?");
	jsonw_str(f, name);
}

static void put_msg_args(FILE *f, const struct sftrace_comm *c, const struct tr_msg *m)
{
	int failed = atomic_load_explicit(&c->failed, memory_order_acquire);
	fprintf(f, ",\"args\":{\"chan\":\"0x%llx\",\"msg\":%llu", (unsigned long long)c->chan_id,
		(unsigned long long)m->seq);
	if (c->is_send)
		fprintf(f, ",\"recv\":%llu,\"buf\":%u", (unsigned long long)m->recv, m->buf);
	else
		fprintf(f, ",\"n\":%u", m->n);
	fprintf(f, ",\"tag\":%d,\"bytes\":%llu,\"peer\":", m->tag, (unsigned long long)m->bytes);
	jsonw_str(f, c->peer);
	fprintf(f, ",\"status\":\"%s\",\"posted_us\":",
		m->status == TR_OK ? "ok" : m->status == TR_FAILED ? "failed" : "unfinished");
	put_us(f, m->post);
	if (m->post_ns)
		fprintf(f, ",\"isend_us\":%.3f", m->post_ns / 1e3);
	if (m->first) {
		fprintf(f, ",\"first_byte_us\":");
		put_us(f, m->first);
	}
	if (m->deliv) {
		fprintf(f, ",\"delivered_us\":");
		put_us(f, m->deliv);
	}
	fprintf(f, ",\"completed_us\":");
	put_us(f, m->done);
	if (m->model_ready) {
		fprintf(f, ",\"model_delivered_us\":");
		put_us(f, m->model_ready);
	}
	if (m->model_done) {
		fprintf(f, ",\"model_completed_us\":");
		put_us(f, m->model_done);
	}
	if (m->status != TR_OK) {
		char err[160];
		snprintf(err, sizeof(err), "%s%s%s", errno_name(m->err), m->err ? ": " : "",
			 m->what ? m->what : "");
		fprintf(f, ",\"error\":");
		jsonw_str(f, err);
		if (failed)
			fprintf(f, ",\"nccl\":\"%s\"", nccl_name(c->fail.res));
	}
	if (m->fault) {
		fprintf(f, ",\"fault_id\":%u", m->fault - 1);
		if (failed && c->fail.fault == m->fault && c->fail.fault_name[0]) {
			fprintf(f, ",\"fault\":");
			jsonw_str(f, c->fail.fault_name);
		}
	}
	fputs("}}", f);
}

static void put_fail_args(FILE *f, const struct sftrace_comm *c)
{
	const struct tr_fail *fl = &c->fail;
	fprintf(f, ",\"args\":{\"chan\":\"0x%llx\",\"conn\":", (unsigned long long)c->chan_id);
	jsonw_str(f, c->desc);
	fprintf(f, ",\"op\":");
	jsonw_str(f, fl->op);
	fprintf(f, ",\"nccl\":\"%s\",\"errno\":\"%s\",\"what\":", nccl_name(fl->res),
		errno_name(-fl->code));
	jsonw_str(f, fl->what);
	fprintf(f, ",\"msg\":%llu", (unsigned long long)fl->msg);
	if (fl->fault) {
		fprintf(f, ",\"fault_id\":%u,\"fault\":", fl->fault - 1);
		jsonw_str(f, fl->fault_name);
		fprintf(f, ",\"kind\":");
		jsonw_str(f, fl->kind);
		fprintf(f, ",\"link\":%llu", (unsigned long long)fl->link);
	}
	fputs("}}", f);
}

static void put_ev(FILE *f, const struct tr_ev *e)
{
	const struct sftrace_comm *c = e->c;
	const struct tr_msg *m = e->m;
	const char *dir = c->is_send ? "send" : "recv";
	char name[SFNET_DESC_LEN + 32];
	switch (e->kind) {
	case EV_OPEN:
	case EV_CLOSE:
		put_head(f, "i", "conn", tid_nic(c->dev), e->ts);
		snprintf(name, sizeof(name), "%s %s", e->kind == EV_OPEN ? "open" : "close", c->desc);
		fputs(",\"s\":\"t\",\"name\":", f);
		jsonw_str(f, name);
		fprintf(f, ",\"args\":{\"chan\":\"0x%llx\"}}", (unsigned long long)c->chan_id);
		break;
	case EV_X:
		put_head(f, "X", "msg", tid_lane(c, m->lane), e->ts);
		fputs(",\"dur\":", f);
		put_us(f, m->done - m->post);
		snprintf(name, sizeof(name), "%s%s", dir,
			 m->status == TR_OK	    ? ""
			 : m->status == TR_FAILED ? " (failed)"
						  : " (unfinished)");
		fputs(",\"name\":", f);
		jsonw_str(f, name);
		put_msg_args(f, c, m);
		break;
	case EV_FIRST:
	case EV_DELIV:
		put_head(f, "i", "msg", tid_lane(c, m->lane), e->ts);
		fprintf(f, ",\"s\":\"t\",\"name\":\"%s\",\"args\":{\"chan\":\"0x%llx\",\"msg\":%llu}}",
			e->kind == EV_FIRST ? "first byte" : "delivered",
			(unsigned long long)c->chan_id, (unsigned long long)m->seq);
		break;
	case EV_FLOW_OUT:
	case EV_FLOW_IN: {
		uint64_t id = c->is_send ? flow_id(c, m->recv, m->buf) : flow_id(c, m->seq, e->sub);
		put_head(f, e->kind == EV_FLOW_OUT ? "s" : "f", "flow", tid_lane(c, m->lane), e->ts);
		fprintf(f, ",\"name\":\"message\",\"id\":%llu%s}", (unsigned long long)id,
			e->kind == EV_FLOW_IN ? ",\"bp\":\"e\"" : "");
		break;
	}
	case EV_FAILED: {
		int named = atomic_load_explicit(&c->failed, memory_order_acquire) && m->fault &&
			    c->fail.fault == m->fault && c->fail.fault_name[0];
		put_head(f, "i", "fault", tid_lane(c, m->lane), e->ts);
		fputs(",\"s\":\"t\",\"name\":", f);
		if (named) {
			snprintf(name, sizeof(name), "failed: fault '%s' (%s)", c->fail.fault_name,
				 c->fail.kind ? c->fail.kind : "?");
		} else {
			snprintf(name, sizeof(name), "failed: %s", errno_name(m->err));
		}
		jsonw_str(f, name);
		fprintf(f, ",\"args\":{\"chan\":\"0x%llx\",\"msg\":%llu,\"error\":",
			(unsigned long long)c->chan_id, (unsigned long long)m->seq);
		jsonw_str(f, m->what);
		fputs("}}", f);
		break;
	}
	case EV_FAIL_CONN:
	case EV_FAIL_NIC:
		put_head(f, "i", "fault",
			 e->kind == EV_FAIL_NIC ? tid_nic(c->dev) : tid_lane(c, 0), e->ts);
		fputs(",\"s\":\"t\",\"name\":", f);
		if (c->fail.fault && c->fail.fault_name[0]) {
			put_fault_name(f, &c->fail);
		} else {
			snprintf(name, sizeof(name), "error: %s", nccl_name(c->fail.res));
			jsonw_str(f, name);
		}
		put_fail_args(f, c);
		break;
	}
	fputs(",\n", f);
}

static void put_meta(FILE *f, const char *what, long long tid, const char *key, const char *sval,
		     long long ival)
{
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%lld,\"name\":\"%s\",\"args\":{\"%s\":",
		(int)tr.pid, tid, what, key);
	if (sval)
		jsonw_str(f, sval);
	else
		fprintf(f, "%lld", ival);
	fputs("}},\n", f);
}

/* Lay a comm's messages out on lanes: the lowest lane free at each one's post. */
static uint32_t assign_lanes(struct tr_msg **ms, size_t n)
{
	qsort(ms, n, sizeof(*ms), post_cmp);
	int64_t ends[TR_TID_LANES];
	uint32_t nl = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t l = 0;
		while (l < nl && ends[l] > ms[i]->post)
			l++;
		if (l == nl) {
			if (nl < TR_TID_LANES)
				nl++;
			else
				l = nl - 1; /* cannot be: more in flight than chan allows */
		}
		ends[l] = ms[i]->done;
		ms[i]->lane = (uint16_t)l;
	}
	return nl;
}

struct tr_snap {
	struct sftrace_comm *c;
	struct tr_msg **ms;
	size_t n;
};

/* Count (out NULL) or collect, up to max, a comm's published records. */
static size_t collect(struct sftrace_comm *c, struct tr_msg **out, size_t max)
{
	size_t n = 0;
	for (struct tr_chunk *k = atomic_load_explicit(&c->head, memory_order_acquire); k;
	     k = atomic_load_explicit(&k->next, memory_order_acquire)) {
		uint32_t kn = atomic_load_explicit(&k->n, memory_order_acquire);
		for (uint32_t i = 0; i < kn && n < max; i++, n++)
			if (out)
				out[n] = &k->m[i];
	}
	return n;
}

static void add_ev(struct tr_ev *ev, size_t *n, int64_t ts, const struct sftrace_comm *c,
		   const struct tr_msg *m, int kind, unsigned sub)
{
	ev[(*n)++] = (struct tr_ev){.ts = ts, .c = c, .m = m, .kind = (uint16_t)kind,
				    .sub = (uint16_t)sub};
}

static size_t msg_to_events(struct tr_ev *ev, size_t n, const struct sftrace_comm *c,
			    const struct tr_msg *m)
{
	add_ev(ev, &n, m->post, c, m, EV_X, 0);
	if (m->first)
		add_ev(ev, &n, m->first, c, m, EV_FIRST, 0);
	if (m->deliv)
		add_ev(ev, &n, m->deliv, c, m, EV_DELIV, 0);
	if (m->status == TR_FAILED)
		add_ev(ev, &n, m->done, c, m, EV_FAILED, 0);
	if (m->status == TR_OK && c->is_send)
		add_ev(ev, &n, inside(m, m->first), c, m, EV_FLOW_OUT, 0);
	if (m->status == TR_OK && !c->is_send)
		for (unsigned b = 0; b < m->n; b++)
			add_ev(ev, &n, inside(m, m->deliv), c, m, EV_FLOW_IN, b);
	return n;
}

static void put_header(FILE *f, size_t nmsgs, size_t nev, size_t nmeta, uint32_t ncomms,
		       uint32_t nopen)
{
	fputs("{\"metadata\":{\"simfabric_trace\":1,", f);
	fprintf(f, "\"pid\":%d,\"node\":", (int)tr.pid);
	jsonw_str(f, tr.node);
	fprintf(f, ",\"instance\":%d,\"file\":", tr.instance);
	jsonw_str(f, tr.path);
	fputs(",\"clock\":\"CLOCK_MONOTONIC\",\"start_us\":", f);
	put_us(f, tr.start_ns);
	fputs(",\"written_us\":", f);
	put_us(f, tr_now());
	fprintf(f,
		",\"messages\":%zu,\"events\":%zu,\"max_events\":%llu,\"dropped\":%llu,"
		"\"dropped_messages\":%llu,\"connections\":%u,\"open_connections\":%u},\n",
		nmsgs, nev + nmeta, (unsigned long long)tr.max,
		(unsigned long long)atomic_load(&tr.dropped),
		(unsigned long long)atomic_load(&tr.dropped_msgs), ncomms, nopen);
	fputs("\"displayTimeUnit\":\"ns\",\n\"traceEvents\":[\n", f);
}

static void put_tracks(FILE *f, const struct tr_snap *s, size_t ns)
{
	put_meta(f, "process_name", 0, "name", tr.node, 0);
	for (int d = 0; d < tr.ndev; d++) {
		char name[SFC_NAME_MAX + 8];
		snprintf(name, sizeof(name), "NIC %s", tr.devs[d]);
		put_meta(f, "thread_name", tid_nic(d), "name", name, 0);
		put_meta(f, "thread_sort_index", tid_nic(d), "sort_index", NULL, tid_nic(d));
	}
	for (size_t i = 0; i < ns; i++) {
		const struct sftrace_comm *c = s[i].c;
		for (uint32_t l = 0; l < (c->nlanes ? c->nlanes : 1); l++) {
			char name[TR_PEER_LEN + 64];
			/* "send -> node1/nic0 chan 0x1", the lanes after the first numbered */
			snprintf(name, sizeof(name), "%s %s %s chan 0x%llx", c->is_send ? "send" : "recv",
				 c->is_send ? "->" : "<-", c->peer, (unsigned long long)c->chan_id);
			if (l) {
				size_t o = strlen(name);
				snprintf(name + o, sizeof(name) - o, " #%u", l + 1);
			}
			put_meta(f, "thread_name", tid_lane(c, l), "name", name, 0);
			put_meta(f, "thread_sort_index", tid_lane(c, l), "sort_index", NULL,
				 tid_lane(c, l));
		}
	}
}

static size_t meta_count(const struct tr_snap *s, size_t ns)
{
	size_t k = 2 + 2 * (size_t)tr.ndev; /* process_name, process_labels, the NICs' */
	for (size_t i = 0; i < ns; i++)
		k += 2 * (s[i].c->nlanes ? s[i].c->nlanes : 1);
	return k;
}

/* Under tr.lock. verbose: say what was written (not at exit: NCCL may be torn down). */
static void tr_write(int verbose)
{
	atomic_store(&tr.dirty, 0);
	size_t ns = 0, nmsgs = 0, nev = 0;
	uint32_t nopen = 0;
	for (struct sftrace_comm *c = tr.comms; c; c = c->next)
		ns++;
	struct tr_snap *s = calloc(ns ? ns : 1, sizeof(*s));
	if (!s)
		goto oom;
	size_t i = 0;
	for (struct sftrace_comm *c = tr.comms; c; c = c->next, i++) {
		s[i].c = c;
		/* Records may still be appended (at exit): take what was published at the count. */
		size_t cnt = collect(c, NULL, SIZE_MAX);
		s[i].ms = malloc((cnt ? cnt : 1) * sizeof(*s[i].ms));
		if (!s[i].ms)
			goto oom;
		s[i].n = collect(c, s[i].ms, cnt);
		c->nlanes = assign_lanes(s[i].ms, s[i].n);
		nmsgs += s[i].n;
		for (size_t j = 0; j < s[i].n; j++)
			nev += msg_events(c, s[i].ms[j]);
		nev += 4; /* open, close, its failure on two tracks */
	}
	struct tr_ev *ev = malloc((nev ? nev : 1) * sizeof(*ev));
	if (!ev)
		goto oom;
	size_t n = 0;
	for (i = 0; i < ns; i++) {
		const struct sftrace_comm *c = s[i].c;
		add_ev(ev, &n, c->open_ns, c, NULL, EV_OPEN, 0);
		int64_t closed = atomic_load_explicit(&c->close_ns, memory_order_acquire);
		if (closed)
			add_ev(ev, &n, closed, c, NULL, EV_CLOSE, 0);
		else
			nopen++;
		if (atomic_load_explicit(&c->failed, memory_order_acquire)) {
			add_ev(ev, &n, c->fail.ts, c, NULL, EV_FAIL_CONN, 0);
			add_ev(ev, &n, c->fail.ts, c, NULL, EV_FAIL_NIC, 0);
		}
		for (size_t j = 0; j < s[i].n; j++)
			n = msg_to_events(ev, n, c, s[i].ms[j]);
	}
	qsort(ev, n, sizeof(*ev), ev_cmp);

	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", tr.path, (int)getpid());
	FILE *f = jsonw_create(tmp);
	if (!f) {
		if (verbose)
			PWARN("trace: cannot write %s: %s", tmp, strerror(errno));
		free(ev);
		goto out;
	}
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	put_header(f, nmsgs, n, meta_count(s, ns), (uint32_t)ns, nopen);
	put_tracks(f, s, ns);
	for (size_t k = 0; k < n; k++)
		put_ev(f, &ev[k]);
	/* The last element: a metadata event, so that no comma dangles. */
	fprintf(f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_labels\","
		   "\"args\":{\"labels\":\"simfabric\"}}\n]}\n",
		(int)tr.pid);
	free(ev);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, tr.path) != 0) {
		if (verbose)
			PWARN("trace: writing %s failed: %s", tr.path, strerror(errno));
		unlink(tmp);
		goto out;
	}
	tr.written = 1;
	if (verbose)
		PINFO(NCCL_NET, "trace: %zu message(s), %zu event(s)%s written to %s", nmsgs, n,
		      atomic_load(&tr.dropped) ? " (SIMFABRIC_TRACE_MAX reached: some dropped)" : "",
		      tr.path);
	goto out;
oom:
	if (verbose)
		PWARN("trace: out of memory writing %s", tr.path);
out:
	if (s)
		for (i = 0; i < ns; i++)
			free(s[i].ms);
	free(s);
}

void sftrace_flush(void)
{
	if (!sftrace_on || tr.freed)
		return;
	pthread_mutex_lock(&tr.lock);
	if (atomic_load(&tr.dirty) || !tr.written)
		tr_write(1);
	pthread_mutex_unlock(&tr.lock);
}

/* Unused from here on (every ctx is gone): give everything back, so leak checkers stay quiet. */
static void tr_free_all(void)
{
	pthread_mutex_lock(&tr.lock);
	for (struct sftrace_comm *c = tr.comms, *next; c; c = next) {
		next = c->next;
		for (struct tr_chunk *k = atomic_load(&c->head), *kn; k; k = kn) {
			kn = atomic_load(&k->next);
			free(k);
		}
		free(c->live);
		free(c->order);
		free(c);
	}
	tr.comms = NULL;
	tr.freed = 1;
	sftrace_on = 0;
	pthread_mutex_unlock(&tr.lock);
}
