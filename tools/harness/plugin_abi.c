/* SPDX-License-Identifier: MIT */
/*
 * plugin_abi.c - load a net plugin and present every ABI version (v8..v12)
 * through one v12-like interface, the way NCCL's compat shims do: sizes are
 * narrowed for v8 (and refused above 1 GiB, as NCCL does), the 0x1 receive
 * hint is cleared for v8, v10 gets the config at connect, v11+ get a ctx.
 *
 * Also the logger handed to init. It prints like NCCL, honouring NCCL_DEBUG
 * (default WARN here) and NCCL_DEBUG_SUBSYS, and keeps the last WARNs so
 * tests can check what the plugin said.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/harness/harness.h"
#include "plugin/prof.h"

struct pl_state pl;

#define T8 ((const ncclNet_v8_t *)pl.tab)
#define T9 ((const ncclNet_v9_t *)pl.tab)
#define T10 ((const ncclNet_v10_t *)pl.tab)
#define T11 ((const ncclNet_v11_t *)pl.tab)
#define T12 ((const ncclNet_v12_t *)pl.tab)

/* NCCL's v6..v8 shims refuse isend/irecv sizes above MAX_NET_SIZE. */
#define PL_V8_MAX_SIZE (1ULL << 30)

/* ---- logger ------------------------------------------------------------------ */

static pthread_mutex_t pl_log_lock = PTHREAD_MUTEX_INITIALIZER;
static int pl_log_rank;
static int pl_log_level = NCCL_LOG_WARN;
static unsigned long pl_log_mask = NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
static int pl_nwarn;
static char pl_warns[HX_WARN_KEEP][1024]; /* as long as one formatted message */

static const struct {
	const char *name;
	unsigned long bit;
} pl_subsys[] = {
	{"INIT", NCCL_INIT},	 {"COLL", NCCL_COLL},	 {"P2P", NCCL_P2P},
	{"SHM", NCCL_SHM},	 {"NET", NCCL_NET},	 {"GRAPH", NCCL_GRAPH},
	{"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},	 {"ALLOC", NCCL_ALLOC},
	{"CALL", NCCL_CALL},	 {"PROXY", NCCL_PROXY}, {"NVLS", NCCL_NVLS},
	{"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG}, {"PROFILE", NCCL_PROFILE},
	{"RAS", NCCL_RAS},	 {"ALL", (unsigned long)NCCL_ALL},
};

/* "INIT,NET" or "^COLL" (everything but), as NCCL parses NCCL_DEBUG_SUBSYS. */
static unsigned long pl_parse_subsys(const char *s)
{
	unsigned long mask = 0;
	int invert = 0;
	char buf[256], *tok, *save = NULL;
	size_t i;

	if (*s == '^') {
		invert = 1;
		s++;
	}
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		for (i = 0; i < sizeof(pl_subsys) / sizeof(pl_subsys[0]); i++)
			if (!strcasecmp(tok, pl_subsys[i].name))
				mask |= pl_subsys[i].bit;
	return invert ? ~mask : mask;
}

void pl_log_setup(int rank)
{
	const char *lv = getenv("NCCL_DEBUG"), *ss = getenv("NCCL_DEBUG_SUBSYS");

	pl_log_rank = rank;
	if (lv && *lv) {
		if (!strcasecmp(lv, "VERSION"))
			pl_log_level = NCCL_LOG_VERSION;
		else if (!strcasecmp(lv, "WARN"))
			pl_log_level = NCCL_LOG_WARN;
		else if (!strcasecmp(lv, "INFO"))
			pl_log_level = NCCL_LOG_INFO;
		else if (!strcasecmp(lv, "ABORT"))
			pl_log_level = NCCL_LOG_ABORT;
		else if (!strcasecmp(lv, "TRACE"))
			pl_log_level = NCCL_LOG_TRACE;
		else if (!strcasecmp(lv, "NONE"))
			pl_log_level = NCCL_LOG_NONE;
	}
	if (ss && *ss)
		pl_log_mask = pl_parse_subsys(ss);
}

static void pl_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void pl_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		      const char *fmt, ...)
{
	static const char *lvname[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
	char msg[1024];
	size_t n;
	va_list ap;
	int show;

	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';

	/* NCCL filters INFO and TRACE by subsystem; WARN always shows at level >= WARN. */
	show = (int)level <= pl_log_level;
	if (show && (level == NCCL_LOG_INFO || level == NCCL_LOG_TRACE) && !(flags & pl_log_mask))
		show = 0;

	pthread_mutex_lock(&pl_log_lock);
	if (level == NCCL_LOG_WARN) {
		snprintf(pl_warns[pl_nwarn % HX_WARN_KEEP], sizeof(pl_warns[0]), "%s", msg);
		pl_nwarn++;
	}
	if (show) {
		if (level == NCCL_LOG_TRACE)
			fprintf(stderr, "[rank %d] NCCL TRACE %s:%d %s\n", pl_log_rank,
				file ? file : "?", line, msg);
		else
			fprintf(stderr, "[rank %d] NCCL %s %s\n", pl_log_rank,
				(unsigned)level < 6 ? lvname[level] : "?", msg);
	}
	pthread_mutex_unlock(&pl_log_lock);
}

int pl_warn_count(void)
{
	int n;

	pthread_mutex_lock(&pl_log_lock);
	n = pl_nwarn;
	pthread_mutex_unlock(&pl_log_lock);
	return n;
}

int pl_warn_find(int since, const char *n1, const char *n2, char *out, size_t cap)
{
	int i, found = 0;

	pthread_mutex_lock(&pl_log_lock);
	if (since < pl_nwarn - HX_WARN_KEEP)
		since = pl_nwarn - HX_WARN_KEEP;
	for (i = since; i < pl_nwarn && !found; i++) {
		const char *w = pl_warns[i % HX_WARN_KEEP];

		if ((!n1 || strstr(w, n1)) && (!n2 || strstr(w, n2))) {
			found = 1;
			if (out && cap)
				snprintf(out, cap, "%s", w);
		}
	}
	pthread_mutex_unlock(&pl_log_lock);
	return found;
}

void pl_warn_last(char *out, size_t cap)
{
	pthread_mutex_lock(&pl_log_lock);
	if (pl_nwarn)
		snprintf(out, cap, "%s", pl_warns[(pl_nwarn - 1) % HX_WARN_KEEP]);
	else
		snprintf(out, cap, "(none)");
	pthread_mutex_unlock(&pl_log_lock);
}

/*
 * NCCL always passes a profiler callback (a no-op unless a profiler is loaded),
 * so a plugin may call it without checking. Without --profiler ours counts and
 * takes nothing. With it, it plays NCCL with a profiler loaded: a Start must
 * carry one of the pHandles we passed (pl_phandles) and gets an event handle
 * (or NULL when the table is full, as a profiler out of events does); a Stop
 * must name a live event, once. simfabric's descriptors (plugin/prof.h) are
 * checked too. Any breach is counted in prof_bad, the first one described.
 */
#define PL_PROF_MAX 4096
static struct {
	int live;
	size_t size;
} pl_prof_ev[PL_PROF_MAX];
static int pl_prof_free = -1, pl_prof_used; /* free list through size; slots used once */
static pthread_mutex_t pl_prof_lock = PTHREAD_MUTEX_INITIALIZER;
struct pl_prof_stats plp;
char pl_phandles[HX_MAX_RECVS]; /* NCCL's &sub->pHandles[i]: opaque to the plugin */

__attribute__((format(printf, 1, 2))) static int pl_prof_bad(const char *fmt, ...)
{
	va_list ap;
	if (plp.bad++ == 0) {
		va_start(ap, fmt);
		vsnprintf(plp.first_bad, sizeof(plp.first_bad), fmt, ap);
		va_end(ap);
	}
	return 0;
}

static int pl_prof_start(void **eHandle, void *pHandle, int64_t pluginId, void *extData)
{
	char *ph = pHandle;
	if (!eHandle)
		return pl_prof_bad("Start without an eHandle slot");
	*eHandle = NULL;
	if (ph < pl_phandles || ph >= pl_phandles + HX_MAX_RECVS)
		return pl_prof_bad("Start with pHandle %p, not one NCCL passed", pHandle);
	plp.starts++;
	size_t size = 0;
	if ((pluginId & ~0xffffLL) == SFPROF_TYPE) {
		const struct sfprof_descr_v1 *d = extData;
		plp.sf++;
		if ((pluginId & 0xffff) != SFPROF_VERSION || !d)
			return pl_prof_bad("simfabric Start: version %lld, descriptor %p",
					   (long long)(pluginId & 0xffff), extData);
		if ((d->kind != SFPROF_SEND && d->kind != SFPROF_RECV) || d->buf >= HX_MAX_RECVS ||
		    (d->kind == SFPROF_SEND && (d->buf || d->size > hx_opt.max_bytes)))
			return pl_prof_bad("simfabric Start: kind %u buf %u size %llu", d->kind,
					   d->buf, (unsigned long long)d->size);
		if (d->kind == SFPROF_SEND)
			plp.send_bytes += d->size;
		size = d->size;
	}
	int i = pl_prof_free;
	if (i >= 0)
		pl_prof_free = (int)pl_prof_ev[i].size;
	else if (pl_prof_used < PL_PROF_MAX)
		i = pl_prof_used++;
	else
		return 0; /* out of events: the plugin must not Stop this one */
	pl_prof_ev[i].live = 1;
	pl_prof_ev[i].size = size;
	*eHandle = &pl_prof_ev[i];
	return 0;
}

static int pl_prof_stop(void **eHandle)
{
	if (!eHandle || !*eHandle)
		return pl_prof_bad("Stop of an event the profiler did not take (eHandle %p)",
				   eHandle ? *eHandle : NULL);
	char *e = *eHandle, *base = (char *)pl_prof_ev;
	if (e < base || e >= base + sizeof(pl_prof_ev) || (e - base) % sizeof(pl_prof_ev[0]))
		return pl_prof_bad("Stop of %p, not an event handle we gave", *eHandle);
	int i = (int)((e - base) / (ptrdiff_t)sizeof(pl_prof_ev[0]));
	if (!pl_prof_ev[i].live)
		return pl_prof_bad("Stop of event %d twice", i);
	pl_prof_ev[i].live = 0;
	pl_prof_ev[i].size = (size_t)pl_prof_free;
	pl_prof_free = i;
	plp.stops++;
	return 0;
}

static ncclResult_t pl_profiler(void **eHandle, int type, void *pHandle, int64_t pluginId,
				void *extData)
{
	__atomic_add_fetch(&pl.prof_calls, 1, __ATOMIC_RELAXED);
	if (!hx_opt.profiler) {
		if (eHandle && type == ncclProfilerNetEventStart)
			*eHandle = NULL;
		return ncclSuccess;
	}
	pthread_mutex_lock(&pl_prof_lock);
	if (type == ncclProfilerNetEventStart)
		pl_prof_start(eHandle, pHandle, pluginId, extData);
	else if (type == ncclProfilerNetEventStop)
		pl_prof_stop(eHandle);
	else
		pl_prof_bad("event type %d: simfabric sends only Start and Stop", type);
	pthread_mutex_unlock(&pl_prof_lock);
	return ncclSuccess;
}

/* Events started and not stopped (under the lock). */
long pl_prof_live(void)
{
	long n = 0;
	pthread_mutex_lock(&pl_prof_lock);
	for (int i = 0; i < pl_prof_used; i++)
		n += pl_prof_ev[i].live;
	pthread_mutex_unlock(&pl_prof_lock);
	return n;
}

/* ---- loading ------------------------------------------------------------------- */

/* Slots NCCL calls without a NULL check (reference 3.8), by version. */
static int pl_check_slots(char *err, size_t errlen)
{
	const void *const *slot = (const void *const *)pl.tab;
	static const char *names[] = {
		"name",	  "init",	 "devices",   "getProperties", "listen",	  "connect",
		"accept", "regMr",	 "regMrDmaBuf", "deregMr",	 "isend",	  "irecv",
		"iflush", "test",	 "closeSend", "closeRecv",	 "closeListen", "getDeviceMr",
		"irecvConsumed", "makeVDevice", "finalize", "setNetAttr",
	};
	/* v8..v10 have no finalize/setNetAttr; the index of each mandatory slot: */
	static const int mandatory[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16};
	size_t i;

	for (i = 0; i < sizeof(mandatory) / sizeof(mandatory[0]); i++) {
		if (!slot[mandatory[i]]) {
			snprintf(err, errlen, "ncclNetPlugin_v%d.%s is NULL (NCCL calls it unchecked)",
				 pl.version, names[mandatory[i]]);
			return -1;
		}
	}
	if (pl.version >= 11 && !slot[20]) {
		snprintf(err, errlen, "ncclNetPlugin_v%d.finalize is NULL (NCCL calls it unchecked)",
			 pl.version);
		return -1;
	}
	return 0;
}

int pl_load(const char *path, int force, char *err, size_t errlen)
{
	char sym[32];
	int v;

	memset(&pl, 0, sizeof(pl));
	snprintf(pl.path, sizeof(pl.path), "%s", path);
	pl.config.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
	/* The flags NCCL uses: every undefined symbol must resolve now, none leak out. */
	pl.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!pl.dl) {
		snprintf(err, errlen, "dlopen(%s): %s", path, dlerror());
		return -1;
	}
	for (v = 12; v >= 8; v--) {
		if (force && v != force)
			continue;
		snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
		pl.tab = dlsym(pl.dl, sym);
		if (pl.tab)
			break;
	}
	if (!pl.tab) {
		if (force)
			snprintf(err, errlen, "%s has no symbol ncclNetPlugin_v%d", path, force);
		else
			snprintf(err, errlen, "%s exports none of ncclNetPlugin_v12..v8", path);
		dlclose(pl.dl);
		pl.dl = NULL;
		return -1;
	}
	pl.version = v;
	if (pl_check_slots(err, errlen) < 0) {
		dlclose(pl.dl);
		pl.dl = NULL;
		pl.tab = NULL;
		return -1;
	}
	pl.name = ((const ncclNet_v8_t *)pl.tab)->name;
	return 0;
}

void pl_unload(void)
{
	if (pl.dl)
		dlclose(pl.dl);
	pl.dl = NULL;
	pl.tab = NULL;
	pl.ctx = NULL;
}

int pl_has_finalize(void)
{
	return pl.version >= 11;
}

ncclResult_t pl_init(void)
{
	ncclNetCommConfig_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};

	pl.inited = 1;
	switch (pl.version) {
	case 8:
		return T8->init(pl_logger);
	case 9:
		return T9->init(pl_logger);
	case 10:
		return T10->init(pl_logger, pl_profiler);
	default:
		/* NCCL passes a stack config: the plugin must copy it, so ours dies here too. */
		pl.ctx = NULL;
		return T11->init(&pl.ctx, hx_opt.comm_id, &cfg, pl_logger, pl_profiler);
	}
}

ncclResult_t pl_finalize(void)
{
	ncclResult_t rc = ncclSuccess;

	if (pl.version >= 11 && pl.inited)
		rc = T11->finalize(pl.ctx);
	pl.ctx = NULL;
	pl.inited = 0;
	return rc;
}

ncclResult_t pl_devices(int *ndev)
{
	return T8->devices(ndev);
}

const char *pl_field_name(unsigned flag)
{
	static const char *names[PL_NFIELDS] = {
		"name",	       "pciPath",	"guid",		  "ptrSupport",		 "regIsGlobal",
		"forceFlush",  "speed",		"port",		  "latency",		 "maxComms",
		"maxRecvs",    "netDeviceType", "netDeviceVersion", "vProps",		 "maxP2pBytes",
		"maxCollBytes", "maxMultiRequestSize", "railId", "planeId",
	};
	int i;

	for (i = 0; i < PL_NFIELDS; i++)
		if (flag == 1u << i)
			return names[i];
	return "?";
}

/* Did getProperties leave the field's bytes exactly as we poisoned them? */
static int pl_untouched(const void *base, size_t off, size_t len)
{
	const unsigned char *p = (const unsigned char *)base + off;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != 0xA5)
			return 0;
	return 1;
}

#define PL_MARK(P, S, FIELD, FLAG)                                                      \
	do {                                                                           \
		(P)->has |= (FLAG);                                                    \
		if (pl_untouched(&(S), offsetof(__typeof__(S), FIELD), sizeof((S).FIELD))) \
			(P)->unset |= (FLAG);                                          \
	} while (0)

#define PL_GET(P, S, FIELD, FLAG, DST)                                                  \
	do {                                                                           \
		PL_MARK(P, S, FIELD, FLAG);                                            \
		(DST) = (S).FIELD;                                                     \
	} while (0)

/* The fields every version has, v8's names. */
#define PL_COMMON(P, S)                                                                  \
	do {                                                                            \
		PL_GET(P, S, name, PL_F_NAME, (P)->name);                               \
		PL_GET(P, S, pciPath, PL_F_PCIPATH, (P)->pci_path);                     \
		PL_GET(P, S, guid, PL_F_GUID, (P)->guid);                               \
		PL_GET(P, S, ptrSupport, PL_F_PTRSUPPORT, (P)->ptr_support);            \
		PL_GET(P, S, regIsGlobal, PL_F_REGISGLOBAL, (P)->reg_is_global);        \
		PL_GET(P, S, speed, PL_F_SPEED, (P)->speed);                            \
		PL_GET(P, S, port, PL_F_PORT, (P)->port);                               \
		PL_GET(P, S, latency, PL_F_LATENCY, (P)->latency);                      \
		PL_GET(P, S, maxComms, PL_F_MAXCOMMS, (P)->max_comms);                  \
		PL_GET(P, S, maxRecvs, PL_F_MAXRECVS, (P)->max_recvs);                  \
		PL_GET(P, S, netDeviceType, PL_F_DEVTYPE, (P)->dev_type);               \
		PL_GET(P, S, netDeviceVersion, PL_F_DEVVERSION, (P)->dev_version);      \
	} while (0)

#define PL_V9ON(P, S)                                                                  \
	do {                                                                          \
		int k_;                                                               \
		PL_GET(P, S, forceFlush, PL_F_FORCEFLUSH, (P)->force_flush);          \
		PL_MARK(P, S, vProps, PL_F_VPROPS);                                   \
		(P)->vndevs = (S).vProps.ndevs;                                       \
		(P)->vmax = (int)(sizeof((S).vProps.devs) / sizeof(int));             \
		for (k_ = 0; k_ < (P)->vmax; k_++)                                    \
			(P)->vdevs[k_] = (S).vProps.devs[k_];                         \
		PL_GET(P, S, maxP2pBytes, PL_F_MAXP2P, (P)->max_p2p);                 \
		PL_GET(P, S, maxCollBytes, PL_F_MAXCOLL, (P)->max_coll);              \
	} while (0)

ncclResult_t pl_get_props(int dev, struct pl_props *p)
{
	ncclResult_t rc;

	memset(p, 0, sizeof(*p));
	p->rail_id = p->plane_id = NCCL_NET_ID_UNDEF;
	switch (pl.version) {
	case 8: {
		ncclNetProperties_v8_t s;

		memset(&s, 0xA5, sizeof(s));
		rc = T8->getProperties(dev, &s);
		if (rc != ncclSuccess)
			return rc;
		PL_COMMON(p, s);
		p->vndevs = 1;
		p->vdevs[0] = dev;
		p->vmax = 1;
		break;
	}
	case 9:
	case 10: {
		ncclNetProperties_v9_t s;

		memset(&s, 0xA5, sizeof(s));
		rc = pl.version == 9 ? T9->getProperties(dev, &s) : T10->getProperties(dev, &s);
		if (rc != ncclSuccess)
			return rc;
		PL_COMMON(p, s);
		PL_V9ON(p, s);
		break;
	}
	case 11: {
		ncclNetProperties_v11_t s;

		memset(&s, 0xA5, sizeof(s));
		rc = T11->getProperties(dev, &s);
		if (rc != ncclSuccess)
			return rc;
		PL_COMMON(p, s);
		PL_V9ON(p, s);
		PL_GET(p, s, maxMultiRequestSize, PL_F_MAXMULTI, p->max_multi);
		break;
	}
	default: {
		ncclNetProperties_v12_t s;

		memset(&s, 0xA5, sizeof(s));
		rc = T12->getProperties(dev, &s);
		if (rc != ncclSuccess)
			return rc;
		PL_COMMON(p, s);
		PL_V9ON(p, s);
		PL_GET(p, s, maxMultiRequestSize, PL_F_MAXMULTI, p->max_multi);
		PL_GET(p, s, railId, PL_F_RAIL, p->rail_id);
		PL_GET(p, s, planeId, PL_F_PLANE, p->plane_id);
		break;
	}
	}
	/* Never hand a poisoned pointer to the caller to print. */
	if (p->unset & PL_F_NAME)
		p->name = NULL;
	if (p->unset & PL_F_PCIPATH)
		p->pci_path = NULL;
	return ncclSuccess;
}

ncclResult_t pl_listen(int dev, void *handle, void **lcomm)
{
	if (pl.version >= 11)
		return T11->listen(pl.ctx, dev, handle, lcomm);
	return T8->listen(dev, handle, lcomm);
}

ncclResult_t pl_connect(int dev, void *handle, void **scomm, ncclNetDeviceHandle_t **dcomm)
{
	switch (pl.version) {
	case 8:
		return T8->connect(dev, handle, scomm, dcomm);
	case 9:
		return T9->connect(dev, handle, scomm, dcomm);
	case 10:
		/* NCCL's v10 shim hands over its heap copy of the comm config. */
		return T10->connect(dev, &pl.config, handle, scomm, dcomm);
	default:
		return T11->connect(pl.ctx, dev, handle, scomm, dcomm);
	}
}

ncclResult_t pl_accept(void *lcomm, void **rcomm, ncclNetDeviceHandle_t **dcomm)
{
	return T8->accept(lcomm, rcomm, dcomm);
}

ncclResult_t pl_reg_mr(void *comm, void *data, size_t size, int type, void **mh)
{
	return T8->regMr(comm, data, size, type, mh);
}

int pl_has_dmabuf(void)
{
	return T8->regMrDmaBuf != NULL;
}

ncclResult_t pl_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t off, int fd,
			      void **mh)
{
	return T8->regMrDmaBuf(comm, data, size, type, off, fd, mh);
}

ncclResult_t pl_dereg_mr(void *comm, void *mh)
{
	return T8->deregMr(comm, mh);
}

ncclResult_t pl_isend(void *scomm, void *data, size_t size, int tag, void *mh, void **req)
{
	switch (pl.version) {
	case 8:
		if (size > PL_V8_MAX_SIZE)
			return ncclInternalError;
		return T8->isend(scomm, data, (int)size, tag, mh, req);
	case 9:
		return T9->isend(scomm, data, size, tag, mh, req);
	default:
		/* Bootstrap-style, no profiler handle, unless --profiler */
		return T10->isend(scomm, data, size, tag, mh, hx_opt.profiler ? pl_phandles : NULL,
				  req);
	}
}

ncclResult_t pl_irecv(void *rcomm, int n, void **data, size_t *sizes, int *tags, void **mh,
		      void **req)
{
	int isz[HX_MAX_RECVS], i;

	switch (pl.version) {
	case 8:
		if (n < 0 || n > HX_MAX_RECVS)
			return ncclInternalError;
		for (i = 0; i < n; i++) {
			if (sizes[i] > PL_V8_MAX_SIZE)
				return ncclInternalError;
			isz[i] = (int)sizes[i];
		}
		/* NCCL's v8 shim clears the optional-completion hint. */
		*req = NULL;
		return T8->irecv(rcomm, n, data, isz, tags, mh, req);
	case 9:
		return T9->irecv(rcomm, n, data, sizes, tags, mh, req);
	default:
		if (hx_opt.profiler && (n < 0 || n > HX_MAX_RECVS))
			return ncclInternalError;
		if (hx_opt.profiler) {
			void *ph[HX_MAX_RECVS];
			for (i = 0; i < n; i++)
				ph[i] = &pl_phandles[i];
			return T10->irecv(rcomm, n, data, sizes, tags, mh, ph, req);
		}
		return T10->irecv(rcomm, n, data, sizes, tags, mh, NULL, req);
	}
}

ncclResult_t pl_test(void *req, int *done, int *sizes)
{
	return T8->test(req, done, sizes);
}

int pl_has_irecv_consumed(void)
{
	return T8->irecvConsumed != NULL;
}

ncclResult_t pl_irecv_consumed(void *rcomm, int n, void *req)
{
	return T8->irecvConsumed(rcomm, n, req);
}

/* What NCCL sends at connect time when it knows nothing: every field undefined. */
ncclResult_t pl_set_net_attr(void)
{
	ncclNetAttr_t a;

	if (pl.version < 11 || !T11->setNetAttr)
		return ncclSuccess;
	memset(&a, 0xff, sizeof(a));
	return T11->setNetAttr(pl.ctx, &a);
}

ncclResult_t pl_close_send(void *c)
{
	return T8->closeSend(c);
}

ncclResult_t pl_close_recv(void *c)
{
	return T8->closeRecv(c);
}

ncclResult_t pl_close_listen(void *c)
{
	return T8->closeListen(c);
}
