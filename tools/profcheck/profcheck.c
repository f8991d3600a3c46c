/* SPDX-License-Identifier: MIT */
/*
 * profcheck.c - libnccl-profiler-simfabric-check.so, a minimal NCCL profiler
 * plugin (ncclProfiler_v5, tools/profcheck/ncclprof.h) for tests: it shows that a real
 * NCCL forwards simfabric's network events to a profiler, and checks them.
 *
 *   NCCL_PROFILER_PLUGIN=$PWD/build/libnccl-profiler-simfabric-check.so
 *   SIMFABRIC_PROFCHECK_OUT=/tmp/profcheck-%p.json   the summary (%p: the pid);
 *                                                     unset: none is written
 *   SIMFABRIC_PROFCHECK_MASK=0x80                    the activation mask (default
 *                                                     ncclProfileNetPlugin alone)
 *
 * It counts every event NCCL starts, by type. A proxy step gets a handle (one
 * token for all), so that a net event can be seen to hang under one. A net
 * plugin's event gets a slot of a fixed pool: its Stop must name a live slot,
 * once. Net events are counted per pluginId type; simfabric's (plugin/prof.h)
 * have their descriptor checked (version, kind, buffer index, size, channel)
 * and summed per kind. Anything amiss is counted, and the first described.
 *
 * At every communicator's finalize (and at unload, if anything changed since)
 * the process's totals so far go to SIMFABRIC_PROFCHECK_OUT as one JSON
 * object, written to a temporary file and renamed, so the file is always
 * whole. Nothing is printed; NCCL's logger says where the file is (INFO, INIT).
 * NULL arguments, unknown event types and handles it never gave are counted,
 * never dereferenced.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/prof.h"
#include "sim/core/jsonw.h"
#include "tools/profcheck/ncclprof.h"

#define PC_MAGIC 0x6b636670u	 /* "pfck" */
#define PC_POOL (1 << 16)	 /* net events in flight at once */
#define PC_NET_TYPES 16		 /* distinct pluginId types counted one by one */
#define PC_CHANS 1024		 /* distinct simfabric channels counted */
#define PC_NODES 64		 /* distinct simfabric node ids listed */
#define PC_COMMS 16		 /* communicators listed */
#define PC_MAX_RECVS 8		 /* NCCL_NET_IB_MAX_RECVS: a grouped receive's buffers */
#define PC_MAX_SIZE (1ULL << 40) /* NCCL_MAX_NET_SIZE_BYTES */
#define PC_WHY 200
#define PC_IDX(bit) __builtin_ctz(bit) /* an event type's index in pc.starts */

static const char *const pc_type_names[PROF_NTYPES] = {
	"Group",    "Coll",	 "P2p",	    "ProxyOp", "ProxyStep", "ProxyCtrl",
	"KernelCh", "NetPlugin", "GroupApi", "CollApi", "P2pApi",    "KernelLaunch",
};

struct pc_ctx {
	uint32_t magic;
};

/* A net plugin event in flight. */
struct pc_ev {
	uint8_t live;
	uint8_t sf;   /* simfabric's type */
	int16_t type; /* index into pc.net.types, -1: past the table */
};

struct pc_kind {
	uint64_t events, bytes, min, max, zero;
};

struct pc_net_type {
	uint64_t type;	   /* pluginId >> 16 */
	uint64_t versions; /* bit v: version v seen (63: 63 and up) */
	uint64_t starts, stops;
};

static struct {
	pthread_mutex_t lock;
	int setup, mask;
	char path[PATH_MAX];
	ncclDebugLogger_t log;
	int dirty;
	int inits, finalizes;
	struct {
		uint64_t id;
		char name[64];
		int rank, nranks, nnodes;
	} comms[PC_COMMS];
	uint64_t starts[PROF_NTYPES], stops[PROF_NTYPES];
	uint64_t unknown_types, null_args, bad_context, records;
	struct {
		uint64_t starts, taken, stops, dropped, updates, bad_stops, null_stops;
		uint64_t parent_step, parent_none, parent_other, types_overflow;
		int ntypes;
		struct pc_net_type types[PC_NET_TYPES];
	} net;
	struct {
		uint64_t starts, stops, bad, chans_overflow, max_buf;
		struct pc_kind send, recv;
		int nchans, nnodes;
		uint64_t chans[PC_CHANS];
		uint32_t nodes[PC_NODES];
		char first_bad[PC_WHY];
	} sf;
	char first_error[PC_WHY];
	int cursor;
	struct pc_ev pool[PC_POOL];
} pc = {.lock = PTHREAD_MUTEX_INITIALIZER};

static char pc_step; /* every proxy step's handle */

#define PC_LOG(level, fmt, ...)                                                              \
	do {                                                                                 \
		if (pc.log)                                                                  \
			pc.log(level, NCCL_INIT, __FILE__, __LINE__,                         \
			       "PROFILER/simfabric-check: " fmt, __VA_ARGS__);               \
	} while (0)

__attribute__((format(printf, 2, 3))) static void pc_note(char *first, const char *fmt, ...)
{
	va_list ap;
	if (first[0])
		return;
	va_start(ap, fmt);
	vsnprintf(first, PC_WHY, fmt, ap);
	va_end(ap);
}

/* ---- setup ------------------------------------------------------------------------------ */

/* tmpl with %p (the pid) and %% expanded, made absolute, into pc.path: NULL, or ("" left
 * there) why it cannot be. */
static const char *pc_set_path(const char *tmpl)
{
	char *o = pc.path, *end = pc.path + sizeof(pc.path) - 16;
	pc.path[0] = 0;
	if (!tmpl || !tmpl[0])
		return NULL;
	if (tmpl[0] != '/') {
		if (!getcwd(pc.path, sizeof(pc.path) - 32)) {
			pc.path[0] = 0;
			return "is relative, and the working directory is out of reach (getcwd failed)";
		}
		o += strlen(pc.path);
		*o++ = '/';
	}
	for (const char *p = tmpl; *p && o < end; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			int n = snprintf(o, (size_t)(end - o), "%d", (int)getpid());
			if (n < 0 || n >= end - o)
				goto bad;
			o += n;
			p++;
		} else {
			*o++ = *p;
			p += p[0] == '%' && p[1] == '%';
		}
	}
	if (o < end) {
		*o = 0;
		return NULL;
	}
bad:
	pc.path[0] = 0;
	return "is too long once expanded (with the working directory, if relative)";
}

/* The first init reads the environment (under the lock). */
static void pc_setup(void)
{
	if (pc.setup++)
		return;
	const char *m = getenv("SIMFABRIC_PROFCHECK_MASK");
	char *end = NULL;
	long v = m ? strtol(m, &end, 0) : PROF_NET_PLUGIN;
	pc.mask = (m && (!*m || *end || v < 0 || v > INT32_MAX)) ? PROF_NET_PLUGIN : (int)v;
	const char *out = getenv("SIMFABRIC_PROFCHECK_OUT");
	const char *why = pc_set_path(out);
	if (why)
		PC_LOG(NCCL_LOG_WARN, "SIMFABRIC_PROFCHECK_OUT='%.80s%s' %s: no summary is written",
		       out, strlen(out) > 80 ? "..." : "", why);
	if (m && pc.mask != v)
		PC_LOG(NCCL_LOG_WARN, "SIMFABRIC_PROFCHECK_MASK='%s' is not a mask; using 0x%x", m,
		       pc.mask);
}

static void pc_add_comm(uint64_t id, const char *name, int nnodes, int nranks, int rank)
{
	int i = pc.inits - 1;
	if (i >= PC_COMMS)
		return;
	pc.comms[i].id = id;
	snprintf(pc.comms[i].name, sizeof(pc.comms[i].name), "%s", name ? name : "");
	pc.comms[i].rank = rank;
	pc.comms[i].nranks = nranks;
	pc.comms[i].nnodes = nnodes;
}

static ncclResult_t pc_init(void **context, uint64_t commId, int *eActivationMask,
			    const char *commName, int nNodes, int nranks, int rank,
			    ncclDebugLogger_t logfn)
{
	if (!context || !eActivationMask)
		return ncclInvalidArgument;
	*context = NULL;
	struct pc_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->magic = PC_MAGIC;
	pthread_mutex_lock(&pc.lock);
	if (logfn)
		pc.log = logfn;
	pc_setup();
	pc.inits++;
	pc.dirty = 1;
	pc_add_comm(commId, commName, nNodes, nranks, rank);
	__atomic_store_n(eActivationMask, pc.mask, __ATOMIC_RELAXED);
	*context = c;
	const char *out = getenv("SIMFABRIC_PROFCHECK_OUT");
	PC_LOG(NCCL_LOG_INFO, "comm 0x%llx rank %d of %d: mask 0x%x, summary to %s",
	       (unsigned long long)commId, rank, nranks, pc.mask,
	       pc.path[0]     ? pc.path
	       : out && *out ? "nowhere (SIMFABRIC_PROFCHECK_OUT unusable: see the warning)"
			     : "nowhere (SIMFABRIC_PROFCHECK_OUT unset)");
	pthread_mutex_unlock(&pc.lock);
	return ncclSuccess;
}

/* ---- net plugin events ------------------------------------------------------------------ */

static int pc_net_type(uint64_t type)
{
	for (int i = 0; i < pc.net.ntypes; i++)
		if (pc.net.types[i].type == type)
			return i;
	if (pc.net.ntypes == PC_NET_TYPES) {
		pc.net.types_overflow++;
		return -1;
	}
	pc.net.types[pc.net.ntypes].type = type;
	return pc.net.ntypes++;
}

static void pc_kind_add(struct pc_kind *k, uint64_t size)
{
	if (!k->events || size < k->min)
		k->min = size;
	if (size > k->max)
		k->max = size;
	k->events++;
	k->bytes += size;
	k->zero += size == 0;
}

static void pc_sf_seen(const struct sfprof_descr_v1 *d)
{
	int i;
	pc_kind_add(d->kind == SFPROF_SEND ? &pc.sf.send : &pc.sf.recv, d->size);
	if (d->buf > pc.sf.max_buf)
		pc.sf.max_buf = d->buf;
	for (i = 0; i < pc.sf.nchans && pc.sf.chans[i] != d->chan; i++)
		;
	if (i == pc.sf.nchans && i < PC_CHANS)
		pc.sf.chans[pc.sf.nchans++] = d->chan;
	else if (i == PC_CHANS)
		pc.sf.chans_overflow++;
	for (i = 0; i < pc.sf.nnodes && pc.sf.nodes[i] != d->node; i++)
		;
	if (i == pc.sf.nnodes && i < PC_NODES)
		pc.sf.nodes[pc.sf.nnodes++] = d->node;
}

/* A simfabric descriptor (plugin/prof.h): 0 if sane (then counted), else -1. */
static int pc_sf_check(unsigned version, const struct sfprof_descr_v1 *d)
{
	char *why = pc.sf.first_bad;
	if (version != SFPROF_VERSION)
		pc_note(why, "descriptor version %u, not %u", version, SFPROF_VERSION);
	else if (!d)
		pc_note(why, "no descriptor (extData NULL)");
	else if (d->kind != SFPROF_SEND && d->kind != SFPROF_RECV)
		pc_note(why, "kind %u is neither send (1) nor receive (2)", d->kind);
	else if ((d->kind == SFPROF_SEND && d->buf) || d->buf >= PC_MAX_RECVS)
		pc_note(why, "%s with buffer index %u", d->kind == SFPROF_SEND ? "send" : "receive",
			d->buf);
	else if (d->reserved)
		pc_note(why, "reserved field 0x%x", d->reserved);
	else if (d->size > PC_MAX_SIZE)
		pc_note(why, "size %llu over 2^40", (unsigned long long)d->size);
	else if (!d->chan)
		pc_note(why, "channel id 0 (the fabric's start at 1)");
	else {
		pc_sf_seen(d);
		return 0;
	}
	pc.sf.bad++;
	return -1;
}

static void pc_parent(const void *parent)
{
	if (parent == &pc_step)
		pc.net.parent_step++;
	else if (!parent)
		pc.net.parent_none++;
	else
		pc.net.parent_other++;
}

/* The next free slot after the last one taken (a slot is reused as late as can be, so a
 * second Stop of it is seen), or NULL when all are in flight. */
static struct pc_ev *pc_take(void)
{
	for (int n = 0; n < PC_POOL; n++) {
		struct pc_ev *e = &pc.pool[pc.cursor];
		pc.cursor = (pc.cursor + 1) % PC_POOL;
		if (!e->live)
			return e;
	}
	return NULL;
}

static void pc_net_start(void **eHandle, const ncclProfilerEventDescr_v5_t *d)
{
	uint64_t id = (uint64_t)d->netPlugin.id, v = id & PROF_NET_VER_MASK;
	int t = pc_net_type(id >> 16);
	int sf = (id & PROF_NET_TYPE_MASK) == SFPROF_TYPE && (id >> 32) == 0;
	pc.net.starts++;
	pc_parent(d->parentObj);
	if (t >= 0) {
		pc.net.types[t].starts++;
		pc.net.types[t].versions |= 1ULL << (v < 63 ? v : 63);
	}
	if (sf) {
		pc.sf.starts++;
		pc_sf_check((unsigned)v, d->netPlugin.data);
	}
	struct pc_ev *e = pc_take();
	if (!e) {
		pc.net.dropped++;
		return;
	}
	*e = (struct pc_ev){.live = 1, .sf = (uint8_t)sf, .type = (int16_t)t};
	pc.net.taken++;
	*eHandle = e;
}

/* The pool slot h names, or NULL (not a handle we gave: nothing is dereferenced). */
static struct pc_ev *pc_slot(const void *h)
{
	const char *p = h, *base = (const char *)pc.pool;
	if (p < base || p >= base + sizeof(pc.pool) || (size_t)(p - base) % sizeof(pc.pool[0]))
		return NULL;
	return (struct pc_ev *)p;
}

static void pc_net_stop(void *h)
{
	struct pc_ev *e = pc_slot(h);
	if (!e || !e->live) {
		pc.net.bad_stops++;
		pc_note(pc.first_error, "%s of handle %p", e ? "second Stop" : "Stop of unknown",
			h);
		return;
	}
	e->live = 0;
	pc.net.stops++;
	pc.stops[PC_IDX(PROF_NET_PLUGIN)]++;
	if (e->type >= 0)
		pc.net.types[e->type].stops++;
	pc.sf.stops += e->sf;
}

/* ---- the ABI ---------------------------------------------------------------------------- */

static int pc_type_index(uint64_t type)
{
	if (!type || (type & (type - 1)) || type >= 1u << PROF_NTYPES)
		return -1;
	return __builtin_ctzll(type);
}

static ncclResult_t pc_start(void *context, void **eHandle, ncclProfilerEventDescr_v5_t *d)
{
	const struct pc_ctx *c = context;
	if (eHandle)
		*eHandle = NULL;
	pthread_mutex_lock(&pc.lock);
	pc.dirty = 1;
	int t = d ? pc_type_index(d->type) : -1;
	if (!eHandle || !d)
		pc.null_args++;
	else if (!c || c->magic != PC_MAGIC)
		pc.bad_context++;
	else if (t < 0)
		pc.unknown_types++;
	else {
		pc.starts[t]++;
		if (d->type == PROF_PROXY_STEP)
			*eHandle = &pc_step;
		else if (d->type == PROF_NET_PLUGIN)
			pc_net_start(eHandle, d);
	}
	pthread_mutex_unlock(&pc.lock);
	return ncclSuccess;
}

static ncclResult_t pc_stop(void *eHandle)
{
	pthread_mutex_lock(&pc.lock);
	pc.dirty = 1;
	if (!eHandle)
		pc.net.null_stops++; /* NCCL checks its own: a net plugin stopped what we did not take */
	else if (eHandle == &pc_step)
		pc.stops[PC_IDX(PROF_PROXY_STEP)]++;
	else
		pc_net_stop(eHandle);
	pthread_mutex_unlock(&pc.lock);
	return ncclSuccess;
}

static ncclResult_t pc_record(void *eHandle, int eState, ncclProfilerEventStateArgs_v5_t *args)
{
	pthread_mutex_lock(&pc.lock);
	pc.records++;
	const struct pc_ev *e = pc_slot(eHandle);
	if (eState == PROF_STATE_NET_PLUGIN_UPDATE && e && e->live)
		pc.net.updates++;
	pthread_mutex_unlock(&pc.lock);
	return ncclSuccess;
}

/* ---- the summary ------------------------------------------------------------------------ */

static void pc_put_kind(FILE *f, const char *name, const struct pc_kind *k)
{
	fprintf(f, "\"%s\":{\"events\":%llu,\"bytes\":%llu,\"min\":%llu,\"max\":%llu,\"zero\":%llu}",
		name, (unsigned long long)k->events, (unsigned long long)k->bytes,
		(unsigned long long)k->min, (unsigned long long)k->max, (unsigned long long)k->zero);
}

static void pc_put_str(FILE *f, const char *s)
{
	if (s[0])
		jsonw_str(f, s);
	else
		fputs("null", f);
}

static const char *pc_net_type_name(uint64_t type)
{
	if (type << 16 == SFPROF_TYPE)
		return "simfabric";
	if (type << 16 == PROF_NET_TYPE_IB)
		return "ib";
	return type << 16 == PROF_NET_TYPE_SOCK ? "socket" : "other";
}

static void pc_put_net(FILE *f, uint64_t live)
{
	fprintf(f,
		"\"net\":{\"starts\":%llu,\"taken\":%llu,\"stops\":%llu,\"live\":%llu,"
		"\"dropped\":%llu,\"updates\":%llu,\"bad_stops\":%llu,\"null_stops\":%llu,"
		"\"parent\":{\"proxy_step\":%llu,\"none\":%llu,\"other\":%llu},"
		"\"types_overflow\":%llu,\"types\":[",
		(unsigned long long)pc.net.starts, (unsigned long long)pc.net.taken,
		(unsigned long long)pc.net.stops, (unsigned long long)live,
		(unsigned long long)pc.net.dropped, (unsigned long long)pc.net.updates,
		(unsigned long long)pc.net.bad_stops, (unsigned long long)pc.net.null_stops,
		(unsigned long long)pc.net.parent_step, (unsigned long long)pc.net.parent_none,
		(unsigned long long)pc.net.parent_other, (unsigned long long)pc.net.types_overflow);
	for (int i = 0; i < pc.net.ntypes; i++) {
		const struct pc_net_type *t = &pc.net.types[i];
		fprintf(f,
			"%s{\"type\":\"0x%llx\",\"name\":\"%s\",\"starts\":%llu,\"stops\":%llu,"
			"\"versions\":[",
			i ? "," : "", (unsigned long long)t->type, pc_net_type_name(t->type),
			(unsigned long long)t->starts, (unsigned long long)t->stops);
		for (int v = 0, n = 0; v < 64; v++)
			if (t->versions >> v & 1)
				fprintf(f, "%s%d", n++ ? "," : "", v);
		fputs("]}", f);
	}
	fputs("]}", f);
}

static void pc_put_sf(FILE *f)
{
	fprintf(f, "\"simfabric\":{\"starts\":%llu,\"stops\":%llu,\"bad\":%llu,\"first_bad\":",
		(unsigned long long)pc.sf.starts, (unsigned long long)pc.sf.stops,
		(unsigned long long)pc.sf.bad);
	pc_put_str(f, pc.sf.first_bad);
	fputc(',', f);
	pc_put_kind(f, "send", &pc.sf.send);
	fputc(',', f);
	pc_put_kind(f, "recv", &pc.sf.recv);
	fprintf(f, ",\"chans\":%d,\"chans_overflow\":%llu,\"max_buf\":%llu,\"nodes\":[",
		pc.sf.nchans, (unsigned long long)pc.sf.chans_overflow,
		(unsigned long long)pc.sf.max_buf);
	for (int i = 0; i < pc.sf.nnodes; i++)
		fprintf(f, "%s%u", i ? "," : "", pc.sf.nodes[i]);
	fputs("]}", f);
}

static void pc_put_head(FILE *f)
{
	fprintf(f,
		"{\"profiler\":\"simfabric-check\",\"abi\":\"ncclProfiler_v5\",\"pid\":%d,"
		"\"mask\":%d,\"inits\":%d,\"finalizes\":%d,\"comms\":[",
		(int)getpid(), pc.mask, pc.inits, pc.finalizes);
	for (int i = 0; i < pc.inits && i < PC_COMMS; i++) {
		fprintf(f, "%s{\"id\":\"0x%llx\",\"name\":", i ? "," : "",
			(unsigned long long)pc.comms[i].id);
		jsonw_str(f, pc.comms[i].name);
		fprintf(f, ",\"rank\":%d,\"nranks\":%d,\"nnodes\":%d}", pc.comms[i].rank,
			pc.comms[i].nranks, pc.comms[i].nnodes);
	}
	fputs("],\"events\":{", f);
	for (int t = 0; t < PROF_NTYPES; t++)
		fprintf(f, "%s\"%s\":{\"starts\":%llu,\"stops\":%llu}", t ? "," : "",
			pc_type_names[t], (unsigned long long)pc.starts[t],
			(unsigned long long)pc.stops[t]);
	fprintf(f,
		"},\"unknown_types\":%llu,\"null_args\":%llu,\"bad_context\":%llu,"
		"\"records\":%llu,",
		(unsigned long long)pc.unknown_types, (unsigned long long)pc.null_args,
		(unsigned long long)pc.bad_context, (unsigned long long)pc.records);
}

/* The totals so far into pc.path (under the lock). */
static void pc_write(void)
{
	char tmp[PATH_MAX + 32];
	uint64_t live = 0;
	if (!pc.path[0])
		return;
	for (int i = 0; i < PC_POOL; i++)
		live += pc.pool[i].live;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", pc.path, (int)getpid());
	FILE *f = jsonw_create(tmp);
	if (!f) {
		PC_LOG(NCCL_LOG_WARN, "cannot write %s: %s", tmp, strerror(errno));
		return;
	}
	int ok = !pc.sf.bad && !pc.net.bad_stops && !pc.net.null_stops && !live &&
		 !pc.net.dropped && !pc.null_args && !pc.bad_context;
	pc_put_head(f);
	pc_put_net(f, live);
	fputc(',', f);
	pc_put_sf(f);
	fputs(",\"first_error\":", f);
	pc_put_str(f, pc.first_error);
	fprintf(f, ",\"ok\":%s}\n", ok ? "true" : "false");
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, pc.path) != 0) {
		PC_LOG(NCCL_LOG_WARN, "writing %s failed: %s", pc.path, strerror(errno));
		unlink(tmp);
		return;
	}
	pc.dirty = 0;
}

static ncclResult_t pc_finalize(void *context)
{
	struct pc_ctx *c = context;
	pthread_mutex_lock(&pc.lock);
	if (!c || c->magic != PC_MAGIC) {
		pc.bad_context++;
	} else {
		c->magic = 0;
		free(c);
		pc.finalizes++;
	}
	pc_write();
	PC_LOG(NCCL_LOG_INFO, "finalize %d of %d: %llu net event(s), %llu simfabric's; %s",
	       pc.finalizes, pc.inits, (unsigned long long)pc.net.starts,
	       (unsigned long long)pc.sf.starts, pc.path[0] ? pc.path : "no summary written");
	pthread_mutex_unlock(&pc.lock);
	return ncclSuccess;
}

/* At unload or exit: what came after the last finalize (never waits for the lock). */
__attribute__((destructor)) static void pc_unload(void)
{
	if (pthread_mutex_trylock(&pc.lock) != 0)
		return;
	if (pc.dirty)
		pc_write();
	pthread_mutex_unlock(&pc.lock);
}

__attribute__((visibility("default"))) const ncclProfiler_v5_t ncclProfiler_v5 = {
	.name = "simfabric-check",
	.init = pc_init,
	.startEvent = pc_start,
	.stopEvent = pc_stop,
	.recordEventState = pc_record,
	.finalize = pc_finalize,
};
