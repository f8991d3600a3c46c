/* SPDX-License-Identifier: MIT */
/*
 * gpu.c - the GPU data path (see gpu.h): the mode, the exports and the
 * server that hands them out, the imports, and the copy engine.
 */
#include "plugin/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "plugin/copier_ptx.h"
#include "plugin/cudadrv.h"
#include "plugin/plog.h"
#include "sim/core/ctl.h"

#define SFGPU_PROTO 1
#define SFGPU_IO_TIMEOUT_MS 5000   /* an export request: the peer's server answers at once */
#define SFGPU_TX_IMPORTS 64	   /* regions one sendComm keeps mapped (least recently used go) */
#define SFGPU_MAX_CTX 16	   /* CUDA contexts (devices) one process copies from */
#define SFGPU_MAX_STREAMS 8	   /* copy streams in our own context (SIMFABRIC_GPU_STREAMS) */
#define SFGPU_SECRET_HEX 32	   /* the export server's secret, in hex digits */
#define SFGPU_SLOW_NS 2000000000LL /* a copy still running after this is worth a WARN */
#define SFGPU_BATCH_MAX 32	   /* copies in one batch call (SIMFABRIC_GPU_BATCH_MAX) */
#define SFGPU_BATCH_EVENTS 128	   /* batches in flight per stream: their events, in turn */

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum { EXPORT_LEGACY = 1, EXPORT_FD = 2, EXPORT_SELF = 3 /* an import of our own export */ };

/* SIMFABRIC_GPU_COPY_CONTEXT: where the copies run (see copy_stream). */
enum copy_ctx { COPY_CTX_AUTO = 0, COPY_CTX_OWN, COPY_CTX_APP };

struct gexport {
	struct gexport *next;
	uint64_t region;
	uintptr_t base;
	uint64_t size;
	uint64_t buffer_id; /* CUDA's per-allocation id: a new allocation at a reused base differs */
	int kind;
	int fd;			  /* EXPORT_FD */
	struct cu_ipc_handle ipc; /* EXPORT_LEGACY */
	int refs;
};

struct gimport {
	struct gimport *next;
	char where[CHAN_WHERE_LEN];
	uint64_t region;
	cu_ptr va;
	uint64_t size;
	cu_ctx ctx; /* where va is mapped: the copy context it was imported in, or ours (self) */
	int kind;
	int refs; /* sendComms using it */
};

/*
 * Small copies (SIMFABRIC_GPU_SMALL=kernel, in our own context only): a resident kernel
 * (plugin/copier.cu) polls a ring of descriptors in host-mapped memory and copies each message
 * from a host staging slot into the receiver's buffer, so that a small message from host memory
 * (LL's sends) costs a memcpy and a store instead of a copy launch and an event.
 */
#define SFK_RING 64u	     /* descriptors, a power of two: one staging slot each */
#define SFK_SLOT (64u << 10) /* a staging slot: the largest small copy there can be */
/* The default largest small copy: one block reads host memory at roughly 10 GB/s, beyond which
 * the copy engine wins. */
#define SFK_SMALL_MAX (16u << 10)
_Static_assert((SFK_RING & (SFK_RING - 1)) == 0, "the kernel masks its ring index");
#define SFK_WAIT_NS 10000000000LL /* how long a drain waits for the kernel before it gives up */
struct sfk_desc {		  /* as copier.cu reads it */
	uint64_t src, dst, len, seq;
};
struct gkern {
	pthread_mutex_t lock;		/* descriptors and staging: any sendComm's thread */
	volatile struct sfk_desc *ring; /* host-mapped; written by us, read by the kernel */
	volatile uint64_t *done;	/* written by the kernel: the last seq copied */
	volatile uint32_t *stop;	/* ends the kernel */
	volatile uint64_t *running;	/* set by the kernel once resident */
	cu_event ended;			/* recorded after it: complete once it has returned */
	pid_t pid;			/* the process that launched it (not a fork's child) */
	uint8_t *staging;		/* SFK_RING slots of SFK_SLOT bytes */
	cu_ptr staging_d;		/* ... as the kernel sees it */
	uint64_t next;			/* the next descriptor's seq (from 1) */
};

/*
 * Copies waiting for their stream, which go out together: one batch call and one event for all
 * of them, issued by the process's issuer thread (see "batches" below). One per copy stream; any
 * sendComm's thread queues, under lock.
 */
struct gqueue {
	pthread_mutex_t lock;  /* the pending list: held for a few stores */
	pthread_mutex_t issue; /* one issuer at a time, in the order the lists were taken */
	cu_stream s;
	cu_ctx ctx;		 /* the stream's */
	_Atomic uint64_t issued; /* batches issued: batch b's event is ev[b % SFGPU_BATCH_EVENTS] */
	_Atomic uint64_t completed; /* every batch up to this one has ended */
	cu_event ev[SFGPU_BATCH_EVENTS];
	int n;		 /* copies queued */
	int64_t since;	 /* when the oldest came (ns) */
	int ring_warned; /* under issue */
	cu_ptr dst[SFGPU_BATCH_MAX], src[SFGPU_BATCH_MAX];
	size_t len[SFGPU_BATCH_MAX];
	uint64_t *mark[SFGPU_BATCH_MAX]; /* its sendComm's batch[] entry: set when issued */
	const char *desc[SFGPU_BATCH_MAX];
};
#define BATCH_QUEUED UINT64_MAX	      /* batch[]: waiting in the queue */
#define BATCH_FAILED (UINT64_MAX - 1) /* batch[]: its batch call failed */

struct sfgpu_tx {
	struct sfgpu_tx *next; /* in G.txs */
	cu_ctx ctx;	       /* where its stream and events are: its copy context (copy_stream) */
	cu_ctx app;	       /* the caller's context at its first copy: where the sources are */
	cu_stream stream;      /* the copy stream, once it exists */
	uint64_t done_ticket;  /* every copy before this ticket has completed */
	uint64_t next_ticket;
	struct gqueue *q; /* its stream's queue (NULL: no batch call, every copy alone) */
	cu_event ev[CHAN_MAX_SENDS];
	/* per slot: the batch its copy went out in (0: alone, with ev[slot]), or BATCH_* */
	uint64_t batch[CHAN_MAX_SENDS];
	int64_t t_start[CHAN_MAX_SENDS]; /* per event slot: when its copy was issued (ns) */
	uint64_t len[CHAN_MAX_SENDS];
	uint64_t kseq[CHAN_MAX_SENDS]; /* per event slot: the kernel's seq of a small copy, or 0 */
	struct gkern *kern;	       /* the small-copy kernel of its context, or NULL */
	uint64_t kern_last;	       /* the seq of its last small copy */
	int slow_warned;
	int nimp;
	struct {
		struct gimport *im; /* a reference held */
		uint64_t last;	    /* the ticket of the last copy into it */
	} imp[SFGPU_TX_IMPORTS];
	char desc[96];
};

static struct {
	pthread_mutex_t lock;	  /* exports: the server thread takes only this one */
	pthread_mutex_t imp_lock; /* imports, txs, streams; never held while a peer's server
				     answers, and never needed by our own server */
	pthread_once_t once;
	int mode;      /* 1 on, 0 off */
	int setup_err; /* negative errno of a failed setup */
	char setup_why[192];
	char describe[256];
	struct cudrv cu;
	struct gexport *exports;
	uint64_t next_region;
	struct gimport *imports;
	struct sfgpu_tx *txs;
	int copy_ctx;	  /* enum copy_ctx: SIMFABRIC_GPU_COPY_CONTEXT */
	int own_streams;  /* SIMFABRIC_GPU_STREAMS: sendComms spread over this many (own context) */
	int small_kernel; /* SIMFABRIC_GPU_SMALL=kernel */
	uint64_t small_max; /* SIMFABRIC_GPU_SMALL_MAX: the largest message the kernel copies */
	uint64_t batch_max; /* SIMFABRIC_GPU_BATCH_MAX: copies per batch call (1: each alone) */
	int sender_issues;  /* SIMFABRIC_GPU_ISSUER=sender: no issuer thread, no queue */
	struct gqueue queues[SFGPU_MAX_CTX * (1 + SFGPU_MAX_STREAMS)]; /* nqueues used */
	int nqueues;
	int nstreams;
	struct {
		cu_ctx ctx;  /* the application's context */
		cu_stream s; /* every copy issued in it, in one FIFO (see copy_stream) */
		cu_ctx own;  /* our own context on its device (own_stream), or NULL */
		cu_stream own_s[SFGPU_MAX_STREAMS]; /* its streams, own_n of them (0: not in use) */
		int own_n;
		unsigned own_next;  /* the next sendComm's, round robin */
		struct gkern *kern; /* its small-copy kernel, or NULL */
		int own_tried;
	} streams[SFGPU_MAX_CTX];
	int srv_fd;
	int srv_started;
	char name[24]; /* "@sfgpu-" + 16 hex digits: the abstract socket's name */
	char secret[SFGPU_SECRET_HEX + 1];
	char where[CHAN_WHERE_LEN]; /* name + "#" + secret: only peers that read it may ask */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .imp_lock = PTHREAD_MUTEX_INITIALIZER,
       .once = PTHREAD_ONCE_INIT,
       .srv_fd = -1};

static const char *cuerr(cu_result r)
{
	static __thread char buf[32];
	return cudadrv_err(&G.cu, r, buf, sizeof(buf));
}

static int copy_stream(cu_ctx app, int self, cu_ctx *ctx, cu_stream *out, char *why, size_t cap);

static void hex_put(char *out, const unsigned char *b, size_t n);

/* ---- the mode ---------------------------------------------------------------------------- */

/*
 * A whole number from 1 to max in the variable name, into *v (left as it is when unset); else a
 * setup error naming it, and -1. what: "a number", "a byte count".
 */
static int env_count(const char *name, const char *what, uint64_t max, uint64_t *v)
{
	const char *e = getenv(name);
	if (!e || !*e)
		return 0;
	char *end = NULL;
	unsigned long long n = strtoull(e, &end, 10);
	if (*end || e[0] == '-' || n < 1 || n > max) {
		G.setup_err = -EINVAL;
		snprintf(G.setup_why, sizeof(G.setup_why), "%s='%.40s' is not %s from 1 to %llu",
			 name, e, what, (unsigned long long)max);
		return -1;
	}
	*v = n;
	return 0;
}

/* A setting that is one of two words (unset: the first): *second says which; -1 if neither. */
static int env_either(const char *name, const char *first, const char *second, int *is_second)
{
	const char *e = getenv(name);
	*is_second = e && !strcmp(e, second);
	if (!e || !*e || *is_second || !strcmp(e, first))
		return 0;
	G.setup_err = -EINVAL;
	snprintf(G.setup_why, sizeof(G.setup_why), "%s='%.40s' is neither %s nor %s", name, e,
		 first, second);
	return -1;
}

static void setup_once(void)
{
	const char *v = getenv("SIMFABRIC_GPU");
	if (!v || !*v)
		v = "auto";
	int want_on = !strcmp(v, "on");
	if (!strcmp(v, "off")) {
		snprintf(G.describe, sizeof(G.describe), "off (SIMFABRIC_GPU=off)");
		return;
	}
	if (!want_on && strcmp(v, "auto")) {
		G.setup_err = -EINVAL;
		snprintf(G.setup_why, sizeof(G.setup_why),
			 "SIMFABRIC_GPU='%.40s' is not one of auto, on, off", v);
		return;
	}
	const char *cc = getenv("SIMFABRIC_GPU_COPY_CONTEXT");
	if (cc && *cc && strcmp(cc, "auto")) {
		if (!strcmp(cc, "own"))
			G.copy_ctx = COPY_CTX_OWN;
		else if (!strcmp(cc, "app"))
			G.copy_ctx = COPY_CTX_APP;
		else {
			G.setup_err = -EINVAL;
			snprintf(G.setup_why, sizeof(G.setup_why),
				 "SIMFABRIC_GPU_COPY_CONTEXT='%.40s' is not one of auto, own, app",
				 cc);
			return;
		}
	}
	uint64_t nv = 1;
	if (env_count("SIMFABRIC_GPU_STREAMS", "a number", SFGPU_MAX_STREAMS, &nv))
		return;
	G.own_streams = (int)nv;
	if (env_either("SIMFABRIC_GPU_SMALL", "off", "kernel", &G.small_kernel))
		return;
	G.small_max = SFK_SMALL_MAX;
	if (env_count("SIMFABRIC_GPU_SMALL_MAX", "a byte count", SFK_SLOT, &G.small_max))
		return;
	G.batch_max = SFGPU_BATCH_MAX;
	if (env_count("SIMFABRIC_GPU_BATCH_MAX", "a number", SFGPU_BATCH_MAX, &G.batch_max))
		return;
	if (env_either("SIMFABRIC_GPU_ISSUER", "thread", "sender", &G.sender_issues))
		return;
	char why[160];
	int rc = cudadrv_load(&G.cu, !want_on, why, sizeof(why));
	if (rc == 0) {
		cu_result r = G.cu.Init(0);
		int n = 0;
		if (r == CU_SUCCESS)
			r = G.cu.DeviceGetCount(&n);
		if (r != CU_SUCCESS || n < 1) {
			snprintf(why, sizeof(why), "CUDA has no usable device (%s, %d device(s))",
				 r ? cuerr(r) : "no error", n);
			rc = -ENODEV;
		}
	}
	if (rc) {
		if (want_on) {
			G.setup_err = rc;
			snprintf(G.setup_why, sizeof(G.setup_why), "SIMFABRIC_GPU=on, but %s", why);
		}
		snprintf(G.describe, sizeof(G.describe), "off (%s)", why);
		return;
	}
	int drv = 0, vmm = 0, fd = 0, major = 0;
	G.cu.DriverGetVersion(&drv);
	G.cu.DeviceGetAttribute(&vmm, CU_DA_VMM_SUPPORTED, 0);
	G.cu.DeviceGetAttribute(&fd, CU_DA_POSIX_FD_SUPPORTED, 0);
	G.cu.DeviceGetAttribute(&major, CU_DA_COMPUTE_MAJOR, 0);
	/*
	 * The socket's name is visible to every local user (/proc/net/unix); the secret is only
	 * in the channels' shared memory, which only the peers map. A sender that was pointed at
	 * this server by a lying receiver cannot ask without it.
	 */
	unsigned char rnd[8 + SFGPU_SECRET_HEX / 2];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(G.describe, sizeof(G.describe),
			 "off (no random bytes for the export "
			 "server's secret: %s)",
			 strerror(errno));
		return;
	}
	char hex[2 * sizeof(rnd) + 1];
	hex_put(hex, rnd, sizeof(rnd));
	snprintf(G.name, sizeof(G.name), "@sfgpu-%.16s", hex);
	snprintf(G.secret, sizeof(G.secret), "%s", hex + 16);
	snprintf(G.where, sizeof(G.where), "%.23s#%.32s", G.name, G.secret);
	G.mode = 1;
	cu_ctx cur = NULL, ctx_ignored;
	cu_stream ignored;
	char why2[160];
	G.cu.CtxGetCurrent(&cur);
	if (cur) /* early if we can; else with the first copy (see copy_stream) */
		(void)copy_stream(cur, 0, &ctx_ignored, &ignored, why2, sizeof(why2));
	snprintf(G.describe, sizeof(G.describe),
		 "on (one-sided copies into the receiver's GPU memory; driver %d, compute "
		 "capability %d.x, cuMem POSIX-fd export %s; copy context %s, copy engine %s)",
		 drv, major, vmm && fd ? "yes" : "no, cudaMalloc memory only",
		 G.copy_ctx == COPY_CTX_OWN	      ? "own"
			 : G.copy_ctx == COPY_CTX_APP ? "the application's"
						      : "auto (own under MPS)",
		 G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1 ? "asked for (batch copy hint)"
								  : "not asked for (driver < "
								    "12.8)");
}

int sfgpu_setup(char *why, size_t cap)
{
	pthread_once(&G.once, setup_once);
	if (G.setup_err) {
		snprintf(why, cap, "%s", G.setup_why);
		return G.setup_err;
	}
	return G.mode;
}

int sfgpu_on(void)
{
	return G.mode;
}

const char *sfgpu_describe(void)
{
	return G.describe[0] ? G.describe : "off (not set up)";
}

const char *sfgpu_where(void)
{
	return G.where;
}

int sfgpu_is_device(const void *p)
{
	unsigned int type = 0, managed = 0;
	if (!G.mode || G.cu.PointerGetAttribute(&type, CU_PA_MEMORY_TYPE, (cu_ptr)(uintptr_t)p))
		return 0;
	if (type != CU_MEMTYPE_DEVICE)
		return 0;
	return !(G.cu.PointerGetAttribute(&managed, CU_PA_IS_MANAGED, (cu_ptr)(uintptr_t)p) == 0 &&
		 managed);
}

/* ---- the export server: hands a region's handle to a sender of the same user ---------- */

/*
 * The protocol is the daemon's (sim/core/ctl.h: key=value lines, an empty line, an SCM_RIGHTS fd):
 *   request  op=region  proto=1  region=<id>  secret=<the server's secret>
 *   reply    errno=0  kind=legacy|fd  size=<bytes>  ipc=<128 hex digits> | fd=1 (+ the fd)
 *            or errno=<positive errno>
 */
static const char *const kind_names[] = {[EXPORT_LEGACY] = "legacy", [EXPORT_FD] = "fd"};

static void hex_put(char *out, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int hex_get(const char *in, unsigned char *b, size_t n)
{
	if (!in || strlen(in) != 2 * n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(in + 2 * i, "%2x", &v) != 1)
			return -EINVAL;
		b[i] = (unsigned char)v;
	}
	return 0;
}

/* where is "@name[#secret]": the address of the abstract socket "name". */
static socklen_t abstract_addr(const char *where, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	const char *hash = strchr(where, '#');
	size_t n = hash ? (size_t)(hash - where - 1) : strlen(where + 1); /* skip the '@' */
	if (n > sizeof(a->sun_path) - 2)
		n = sizeof(a->sun_path) - 2;
	memcpy(a->sun_path + 1, where + 1, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* Constant time, so the secret cannot be guessed a byte at a time. */
static int secret_ok(const char *got)
{
	if (!got || strlen(got) != SFGPU_SECRET_HEX)
		return 0;
	unsigned char d = 0;
	for (int i = 0; i < SFGPU_SECRET_HEX; i++)
		d |= (unsigned char)(got[i] ^ G.secret[i]);
	return d == 0;
}

static void set_timeouts(int fd)
{
	struct timeval tv = {.tv_sec = SFGPU_IO_TIMEOUT_MS / 1000,
			     .tv_usec = (SFGPU_IO_TIMEOUT_MS % 1000) * 1000};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Same user, or root: the handles give write access to this process's GPU memory. */
static int peer_allowed(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return 0;
	*uid = cr.uid;
	return cr.uid == geteuid() || cr.uid == 0;
}

static void serve_one(int cfd)
{
	uid_t uid = (uid_t)-1;
	int fd = -1, err = 0;
	uint64_t region = 0, proto = 0;
	struct ctl_msg *req = NULL, *rep = ctl_msg_new();
	struct ctl_parser *p = ctl_parser_new();
	struct gexport e = {0};
	if (!rep || !p) {
		err = ENOMEM;
	} else if (!peer_allowed(cfd, &uid)) {
		PWARN("GPU export server %s: refused a request from uid %d (this process runs as "
		      "uid %d)",
		      G.name, (int)uid, (int)geteuid());
		err = EACCES;
	} else if (ctl_recv(cfd, p, &req, SFGPU_IO_TIMEOUT_MS) != 0 ||
		   strcmp(ctl_get(req, "op") ? ctl_get(req, "op") : "", "region") ||
		   ctl_get_u64(req, "proto", &proto) || proto != SFGPU_PROTO ||
		   ctl_get_u64(req, "region", &region)) {
		err = EPROTO;
	} else if (!secret_ok(ctl_get(req, "secret"))) {
		PWARN("GPU export server %s: refused a request without its secret (a receiver "
		      "pointed a sender at the wrong process?)",
		      G.name);
		err = EACCES;
	} else {
		pthread_mutex_lock(&G.lock);
		struct gexport *x = G.exports;
		while (x && x->region != region)
			x = x->next;
		if (x)
			e = *x;
		if (x && x->kind == EXPORT_FD && (fd = fcntl(x->fd, F_DUPFD_CLOEXEC, 0)) < 0)
			err = errno;
		pthread_mutex_unlock(&G.lock);
		if (!x)
			err = ENOENT;
	}
	if (rep) {
		char ipc[2 * CU_IPC_HANDLE_BYTES + 1];
		int rc = ctl_addf(rep, "errno", "%d", err);
		if (!err) {
			rc |= ctl_add(rep, "kind", kind_names[e.kind]);
			rc |= ctl_addf(rep, "size", "%llu", (unsigned long long)e.size);
			hex_put(ipc, e.ipc.data, sizeof(e.ipc.data));
			if (e.kind == EXPORT_LEGACY)
				rc |= ctl_add(rep, "ipc", ipc);
			else
				rc |= ctl_add(rep, "fd",
					      "1"); /* ctl's rule: the message claims it */
		}
		if (rc == 0)
			(void)ctl_send(cfd, rep, err ? -1 : fd, SFGPU_IO_TIMEOUT_MS);
	}
	if (fd >= 0)
		close(fd);
	ctl_msg_free(req);
	ctl_msg_free(rep);
	ctl_parser_free(p);
}

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int cfd = accept4(G.srv_fd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE)
				continue;
			PWARN("GPU export server %s stopped: accept: %s", G.name, strerror(errno));
			return NULL;
		}
		serve_one(cfd);
		close(cfd);
	}
}

/* Under G.lock. The thread runs for the life of the process, so the library must too. */
static int server_start(char *why, size_t cap)
{
	if (G.srv_started)
		return 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a;
	socklen_t alen = abstract_addr(G.where, &a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) != 0 || listen(fd, 64) != 0) {
		snprintf(why, cap, "cannot serve GPU exports on %s: %s", G.name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	Dl_info info;
	if (dladdr((void *)server_start, &info) && info.dli_fname)
		(void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE); /* pin: never unloaded */
	G.srv_fd = fd;
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &at, serve, NULL);
	pthread_attr_destroy(&at);
	if (rc) {
		close(fd);
		G.srv_fd = -1;
		snprintf(why, cap, "cannot start the GPU export server thread: %s", strerror(rc));
		return -rc;
	}
	G.srv_started = 1;
	return 0;
}

/* ---- exports ----------------------------------------------------------------------------- */

static int attr(void *out, int a, const void *p)
{
	return G.cu.PointerGetAttribute(out, a, (cu_ptr)(uintptr_t)p);
}

/*
 * Is [base, base + len) one cuMem allocation? The pointer attributes give the mapped range, which
 * for memory mapped piece by piece (PyTorch's expandable segments) may cover several; an
 * importer maps one handle, so both ends must be the same allocation (the driver returns the
 * handle value used to map each address).
 */
static int one_allocation(cu_ptr base, size_t len)
{
	cu_handle a = 0, b = 0;
	int same = len && G.cu.MemRetainAllocationHandle(&a, (void *)(uintptr_t)base) == CU_SUCCESS;
	if (same) {
		same = G.cu.MemRetainAllocationHandle(&b, (void *)(uintptr_t)(base + len - 1)) ==
				CU_SUCCESS &&
			a == b;
		if (b)
			G.cu.MemRelease(b);
		G.cu.MemRelease(a);
	}
	return same;
}

int sfgpu_register(const void *p, size_t size, int export, struct sfgpu_reg *out, char *why,
		   size_t cap)
{
	if (!G.mode) {
		snprintf(why, cap, "the GPU data path is %s", sfgpu_describe());
		return -ENOTSUP;
	}
	unsigned int type = 0, managed = 0, legacy = 0;
	unsigned long long allowed = 0, buffer_id = 0;
	cu_result r = attr(&type, CU_PA_MEMORY_TYPE, p);
	if (r != CU_SUCCESS || type != CU_MEMTYPE_DEVICE) {
		snprintf(why, cap, "not CUDA device memory (%s)", r ? cuerr(r) : "host memory");
		return -ENOTSUP;
	}
	if (attr(&managed, CU_PA_IS_MANAGED, p) == CU_SUCCESS && managed) {
		snprintf(why, cap, "managed (cudaMallocManaged) memory cannot be exported");
		return -ENOTSUP;
	}
	if (!export) { /* a send buffer: the copy engine reads it here, nobody maps it */
		*out = (struct sfgpu_reg){0};
		return 0;
	}
	attr(&legacy, CU_PA_IS_LEGACY_IPC_CAPABLE, p);
	attr(&allowed, CU_PA_ALLOWED_HANDLE_TYPES, p);
	attr(&buffer_id, CU_PA_BUFFER_ID, p);
	cu_ptr base = 0;
	size_t asize = 0;
	int kind;
	if (legacy) {
		kind = EXPORT_LEGACY;
		r = G.cu.MemGetAddressRange(&base, &asize, (cu_ptr)(uintptr_t)p);
	} else if (allowed & CU_HANDLE_POSIX_FD) {
		kind = EXPORT_FD;
		r = attr(&base, CU_PA_RANGE_START_ADDR, p);
		if (r == CU_SUCCESS)
			r = attr(&asize, CU_PA_RANGE_SIZE, p);
	} else {
		snprintf(why, cap,
			 "a cuMem (VMM) allocation without a POSIX-fd handle type cannot be "
			 "exported (allowed handle types 0x%llx); NCCL falls back to its own "
			 "buffers",
			 allowed);
		return -ENOTSUP;
	}
	if (r != CU_SUCCESS) {
		snprintf(why, cap, "cannot find the allocation: %s", cuerr(r));
		return -EIO;
	}
	uintptr_t up = (uintptr_t)p;
	if (up < base || up - base > asize || size > asize - (up - base) ||
	    (kind == EXPORT_FD && !one_allocation(base, asize))) {
		snprintf(why, cap,
			 "the range spans more than one allocation (allocation [0x%llx, +%zu); a "
			 "PyTorch expandable segment, say); NCCL falls back to its own buffers",
			 (unsigned long long)base, asize);
		return -EXDEV;
	}
	pthread_mutex_lock(&G.lock);
	struct gexport *e = G.exports;
	while (e && !(e->base == base && e->buffer_id == buffer_id && e->size == asize))
		e = e->next;
	if (e) {
		e->refs++;
		goto done;
	}
	int rc = server_start(why, cap);
	if (rc) {
		pthread_mutex_unlock(&G.lock);
		return rc;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&G.lock);
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	e->fd = -1;
	e->kind = kind;
	e->base = base;
	e->size = asize;
	e->buffer_id = buffer_id;
	if (kind == EXPORT_LEGACY) {
		r = G.cu.IpcGetMemHandle(&e->ipc, base);
	} else {
		cu_handle h = 0;
		r = G.cu.MemRetainAllocationHandle(&h, (void *)p);
		if (r == CU_SUCCESS) {
			r = G.cu.MemExportToShareableHandle(&e->fd, h, CU_HANDLE_POSIX_FD, 0);
			G.cu.MemRelease(h);
		}
	}
	if (r != CU_SUCCESS) {
		pthread_mutex_unlock(&G.lock);
		snprintf(why, cap, "cannot export the allocation (%s): %s",
			 kind == EXPORT_LEGACY ? "cuIpcGetMemHandle"
					       : "cuMemExportToShareableHandle",
			 cuerr(r));
		free(e);
		return -EIO;
	}
	e->region = ++G.next_region;
	e->refs = 1;
	e->next = G.exports;
	G.exports = e;
done:
	*out = (struct sfgpu_reg){.region = e->region, .base = e->base, .size = e->size};
	pthread_mutex_unlock(&G.lock);
	return 0;
}

void sfgpu_unregister(uint64_t region)
{
	pthread_mutex_lock(&G.lock);
	for (struct gexport **pp = &G.exports; *pp; pp = &(*pp)->next) {
		struct gexport *e = *pp;
		if (e->region != region)
			continue;
		if (--e->refs == 0) {
			*pp = e->next;
			if (e->fd >= 0)
				close(e->fd);
			free(e);
		}
		break;
	}
	pthread_mutex_unlock(&G.lock);
}

/* ---- imports ----------------------------------------------------------------------------- */

struct answer {
	int kind;
	uint64_t size;
	struct cu_ipc_handle ipc;
};

/* Ask the process at where ("@name#secret") for region: the answer and, for a cuMem export,
 * its fd. Blocks up to twice SFGPU_IO_TIMEOUT_MS: call it without locks. */
static int ask(const char *where_secret, uint64_t region, struct answer *ans, int *fd, char *why,
	       size_t cap)
{
	*fd = -1;
	char where[CHAN_WHERE_LEN]; /* for messages: the name, never the secret */
	const char *hash = strchr(where_secret, '#');
	snprintf(where, sizeof(where), "%.*s",
		 (int)(hash ? hash - where_secret : (ptrdiff_t)strlen(where_secret)), where_secret);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(why, cap, "socket: %s", strerror(errno));
		return -errno;
	}
	set_timeouts(s);
	struct sockaddr_un a;
	socklen_t alen = abstract_addr(where_secret, &a);
	struct ctl_msg *req = ctl_msg_new(), *rep = NULL;
	struct ctl_parser *p = ctl_parser_new();
	uid_t uid = (uid_t)-1;
	int rc = 0, err = 0;
	const char *kind;
	if (!req || !p) {
		rc = -ENOMEM;
		snprintf(why, cap, "out of memory");
	} else if (connect(s, (struct sockaddr *)&a, alen) != 0) {
		rc = -errno;
		snprintf(why, cap, "cannot reach the receiver's GPU export server %s: %s", where,
			 strerror(errno));
	} else if (!peer_allowed(s, &uid)) {
		rc = -EACCES;
		snprintf(why, cap, "the GPU export server %s runs as uid %d, not ours (%d)", where,
			 (int)uid, (int)geteuid());
	} else if ((rc = ctl_add(req, "op", "region")) ||
		   (rc = ctl_addf(req, "proto", "%d", SFGPU_PROTO)) ||
		   (rc = ctl_addf(req, "region", "%llu", (unsigned long long)region)) ||
		   (rc = ctl_add(req, "secret", hash ? hash + 1 : "")) ||
		   (rc = ctl_send(s, req, -1, SFGPU_IO_TIMEOUT_MS)) ||
		   (rc = ctl_recv(s, p, &rep, SFGPU_IO_TIMEOUT_MS))) {
		snprintf(why, cap, "no answer from %s about region %llu: %s", where,
			 (unsigned long long)region, strerror(-rc));
	} else if (ctl_get_int(rep, "errno", 0, 4095, &err) || err) {
		rc = err ? -err : -EPROTO;
		snprintf(why, cap, "%s refused region %llu: %s", where, (unsigned long long)region,
			 err ? strerror(err) : "a malformed answer");
	} else if (!(kind = ctl_get(rep, "kind")) || ctl_get_u64(rep, "size", &ans->size) ||
		   (strcmp(kind, "fd") && strcmp(kind, "legacy")) ||
		   (!strcmp(kind, "legacy") &&
		    hex_get(ctl_get(rep, "ipc"), ans->ipc.data, sizeof(ans->ipc.data))) ||
		   (!strcmp(kind, "fd") && rep->fd < 0)) {
		rc = -EPROTO;
		snprintf(why, cap, "%s answered region %llu with a malformed export", where,
			 (unsigned long long)region);
	} else {
		ans->kind = strcmp(kind, "fd") ? EXPORT_LEGACY : EXPORT_FD;
		if (ans->kind == EXPORT_FD) {
			*fd = rep->fd; /* ours now */
			rep->fd = -1;
		}
	}
	ctl_msg_free(req);
	ctl_msg_free(rep);
	ctl_parser_free(p);
	close(s);
	return rc;
}

/*
 * Map a region of another process into ours (in the caller's context). Asks its server first,
 * so it may block for seconds: called without locks; the caller inserts the result.
 */
static struct gimport *import_new(const char *where, uint64_t region, char *why, size_t cap)
{
	struct answer rep;
	int fd;
	int rc = ask(where, region, &rep, &fd, why, cap);
	if (rc)
		return NULL;
	struct gimport *im = calloc(1, sizeof(*im));
	if (!im) {
		if (fd >= 0)
			close(fd);
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	snprintf(im->where, sizeof(im->where), "%s", where);
	im->region = region;
	im->size = rep.size;
	G.cu.CtxGetCurrent(&im->ctx); /* the sendComm's copy context, entered */
	im->kind = (int)rep.kind;
	cu_result r;
	if (rep.kind == EXPORT_LEGACY) {
		r = G.cu.IpcOpenMemHandle(&im->va, rep.ipc, CU_IPC_LAZY_PEER_ACCESS);
		if (r != CU_SUCCESS) {
			/* CUDA opens a process's legacy handles in one context per device: ours
			 * (own) and the application's cannot both */
			snprintf(why, cap, "cuIpcOpenMemHandle of region %llu: %s%s",
				 (unsigned long long)region, cuerr(r),
				 G.copy_ctx != COPY_CTX_APP ? " (copies in our own context: if the "
							      "application opens "
							      "this peer's IPC handles too, set "
							      "SIMFABRIC_GPU_COPY_CONTEXT=app)"
							    : "");
		} else {
			/* the size is the peer's word: believe the driver instead, or a copy could
			 * land past the allocation (and poison the context) */
			cu_ptr base = 0;
			size_t real = 0;
			r = G.cu.MemGetAddressRange(&base, &real, im->va);
			if (r == CU_SUCCESS && (base != im->va || real < im->size)) {
				snprintf(why, cap,
					 "region %llu: the exporter says %llu bytes, the handle "
					 "maps %zu "
					 "at offset %llu: refused",
					 (unsigned long long)region, (unsigned long long)im->size,
					 real, (unsigned long long)(im->va - base));
				r = -1;
			} else if (r != CU_SUCCESS) {
				snprintf(why, cap, "cuMemGetAddressRange of region %llu: %s",
					 (unsigned long long)region, cuerr(r));
			}
			if (r != CU_SUCCESS)
				G.cu.IpcCloseMemHandle(im->va);
		}
	} else {
		cu_handle h = 0;
		cu_device dev = 0;
		r = G.cu.MemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
						      CU_HANDLE_POSIX_FD);
		close(fd);
		const char *step = "cuMemImportFromShareableHandle";
		if (r == CU_SUCCESS) {
			/* cuMemMap refuses a size larger than the allocation: the peer's word is
			 * checked by the driver here */
			step = "cuMemAddressReserve";
			r = G.cu.MemAddressReserve(&im->va, im->size, 0, 0, 0);
			if (r == CU_SUCCESS) {
				step = "cuMemMap";
				r = G.cu.MemMap(im->va, im->size, 0, h, 0);
				if (r != CU_SUCCESS)
					G.cu.MemAddressFree(im->va, im->size);
			}
			G.cu.MemRelease(h); /* the mapping holds the allocation now */
		}
		if (r == CU_SUCCESS) {
			step = "cuMemSetAccess";
			r = G.cu.CtxGetDevice(&dev);
			struct cu_access_desc d = {{CU_LOCATION_DEVICE, dev}, CU_ACCESS_RW};
			if (r == CU_SUCCESS)
				r = G.cu.MemSetAccess(im->va, im->size, &d, 1);
			if (r != CU_SUCCESS) {
				G.cu.MemUnmap(im->va, im->size);
				G.cu.MemAddressFree(im->va, im->size);
			}
		}
		if (r != CU_SUCCESS)
			snprintf(why, cap, "%s of region %llu (%llu bytes): %s", step,
				 (unsigned long long)region, (unsigned long long)im->size,
				 cuerr(r));
	}
	if (r != CU_SUCCESS) {
		free(im);
		return NULL;
	}
	return im;
}

/* Both ends in this process: the region is mapped here already. */
static struct gimport *import_self(uint64_t region, cu_ctx app, char *why, size_t cap)
{
	pthread_mutex_lock(&G.lock);
	struct gexport *e = G.exports;
	while (e && e->region != region)
		e = e->next;
	struct gimport *im = e ? calloc(1, sizeof(*im)) : NULL;
	if (im) {
		im->va = e->base;
		im->size = e->size;
	}
	pthread_mutex_unlock(&G.lock);
	if (!im) {
		snprintf(why, cap, "region %llu of this process: %s", (unsigned long long)region,
			 e ? "out of memory" : "not exported");
		return NULL;
	}
	snprintf(im->where, sizeof(im->where), "%s", G.where);
	im->region = region;
	im->kind = EXPORT_SELF;
	im->ctx = app;
	return im;
}

/* Unmap it, in the context it was mapped in. No copy into it may still be running. */
static void import_unmap(struct gimport *im)
{
	cu_ctx cur = NULL, popped;
	G.cu.CtxGetCurrent(&cur);
	int push = im->kind != EXPORT_SELF && im->ctx && im->ctx != cur &&
		G.cu.CtxPushCurrent(im->ctx) == CU_SUCCESS;
	if (im->kind == EXPORT_LEGACY) {
		G.cu.IpcCloseMemHandle(im->va);
	} else if (im->kind == EXPORT_FD) {
		G.cu.MemUnmap(im->va, im->size);
		G.cu.MemAddressFree(im->va, im->size);
	}
	if (push)
		G.cu.CtxPopCurrent(&popped);
	free(im);
}

/* Under G.imp_lock: a sendComm lets go of it (its copies into it are done). The last one
 * unmaps it, which releases the exporter's memory if it has been freed meanwhile. */
static void import_put(struct gimport *im)
{
	if (--im->refs > 0)
		return;
	for (struct gimport **pp = &G.imports; *pp; pp = &(*pp)->next)
		if (*pp == im) {
			*pp = im->next;
			break;
		}
	import_unmap(im);
}

static struct gimport *import_find(const char *where, uint64_t region, cu_ctx ctx)
{
	struct gimport *im = G.imports;
	while (im && !(im->region == region && im->ctx == ctx && !strcmp(im->where, where)))
		im = im->next;
	return im;
}

static void tx_sync(struct sfgpu_tx *t);

/*
 * Make room in a sendComm's full list of regions: let go of the least recently used one
 * whose copies are done (if none is, wait for this sendComm's copies first). Regions are
 * never reused, so a receiver that registers and deregisters buffers (user buffers, graphs)
 * would otherwise fill the list and keep its freed memory mapped here.
 */
static void tx_evict(struct sfgpu_tx *t)
{
	int lru = 0;
	for (int i = 1; i < t->nimp; i++)
		if (t->imp[i].last < t->imp[lru].last)
			lru = i;
	if (t->imp[lru].last >= t->done_ticket)
		tx_sync(t); /* its last copy may still be running */
	pthread_mutex_lock(&G.imp_lock);
	if (t->imp[lru].last < t->done_ticket)
		import_put(t->imp[lru].im);
	/* else a copy may still write into it: it stays mapped (a leak beats a fault) */
	pthread_mutex_unlock(&G.imp_lock);
	t->imp[lru] = t->imp[--t->nimp];
}

/* The region's mapping here, for a sendComm: its own list first, then the process's. */
/* The region's mapping if this sendComm holds it already (no CUDA call), else NULL. */
static struct gimport *tx_cached(struct sfgpu_tx *t, const char *where, uint64_t region)
{
	for (int i = 0; i < t->nimp; i++)
		if (t->imp[i].im->region == region && !strcmp(t->imp[i].im->where, where)) {
			t->imp[i].last = t->next_ticket;
			return t->imp[i].im;
		}
	return NULL;
}

static struct gimport *tx_region(struct sfgpu_tx *t, const char *where, uint64_t region)
{
	struct gimport *hit = tx_cached(t, where, region);
	if (hit)
		return hit;
	if (t->nimp == SFGPU_TX_IMPORTS)
		tx_evict(t);
	char why[256] = "";
	pthread_mutex_lock(&G.imp_lock);
	struct gimport *im = import_find(where, region, t->ctx);
	if (im)
		im->refs++;
	pthread_mutex_unlock(&G.imp_lock);
	if (!im) {
		/* no lock held while the peer's server answers: it may take seconds */
		struct gimport *fresh = !strcmp(where, G.where)
			? import_self(region, t->app, why, sizeof(why))
			: import_new(where, region, why, sizeof(why));
		if (!fresh) {
			PWARN("%s: cannot map the receiver's GPU buffer: %s", t->desc, why);
			return NULL;
		}
		pthread_mutex_lock(&G.imp_lock);
		im = import_find(where, region, t->ctx); /* another sendComm may have mapped it */
		if (!im) {
			im = fresh;
			fresh = NULL;
			im->next = G.imports;
			G.imports = im;
		}
		im->refs++;
		pthread_mutex_unlock(&G.imp_lock);
		if (fresh)
			import_unmap(fresh);
	}
	t->imp[t->nimp].im = im;
	t->imp[t->nimp].last = t->next_ticket;
	t->nimp++;
	return im;
}

/* ---- the copy engine --------------------------------------------------------------------- */

int sfgpu_tx_new(const char *desc, struct sfgpu_tx **out)
{
	struct sfgpu_tx *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	snprintf(t->desc, sizeof(t->desc), "%s", desc);
	pthread_mutex_lock(&G.imp_lock);
	t->next = G.txs;
	G.txs = t;
	pthread_mutex_unlock(&G.imp_lock);
	*out = t;
	return 0;
}

/* The pause between two looks at something the GPU will write (bounded waits only). */
static void nap(void)
{
	struct timespec ts = {0, 20000};
	nanosleep(&ts, NULL);
}

/* A non-blocking stream at the current context's highest priority (copies never wait). */
static cu_result top_stream(cu_stream *s)
{
	int least = 0, greatest = 0;
	G.cu.CtxGetStreamPriorityRange(&least, &greatest);
	return G.cu.StreamCreateWithPriority(s, CU_STREAM_NON_BLOCKING_, greatest);
}

static int own_streams(void)
{
	return G.own_streams > 0 ? G.own_streams : 1;
}

/*
 * cuCtxCreate with CUDA_DEVICE_MAX_CONNECTIONS at our stream count for the while, in case the
 * driver reads it per context: under MPS every context's queues come out of one pool (on an
 * H200, 2 ranks at 32 queues each could not make a third context: out of memory).
 */
static cu_result own_ctx_create(cu_ctx *own, cu_device dev)
{
	const char *was = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	char saved[32] = "";
	/* Only an existing variable is changed: setenv then replaces one pointer in place, which
	 * another thread's getenv reads whole; adding one could move environ under it. */
	char want[16];
	snprintf(want, sizeof(want), "%d", own_streams() + G.small_kernel); /* + the kernel's */
	if (was && snprintf(saved, sizeof(saved), "%s", was) < (int)sizeof(saved))
		setenv("CUDA_DEVICE_MAX_CONNECTIONS", want, 1);
	else
		saved[0] = 0;
	cu_result r = G.cu.CtxCreate(own, 0, dev);
	if (saved[0])
		setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved, 1);
	return r;
}

/* At exit: stop every kernel and wait (bounded) until it has returned, so that no MPS client
 * of ours ends with work still running on the GPU. Not in a fork's child (no kernel there). */
static void kern_stop_all(void)
{
	for (int i = 0; i < G.nstreams; i++)
		if (G.streams[i].kern && G.streams[i].kern->pid == getpid())
			*G.streams[i].kern->stop = 1;
	int64_t t0 = mono_ns();
	for (int i = 0; i < G.nstreams; i++) {
		struct gkern *k = G.streams[i].kern;
		while (k && k->pid == getpid() && G.cu.EventQuery(k->ended) == CU_ERROR_NOT_READY &&
		       mono_ns() - t0 < 1000000000LL) {
			nap();
		}
	}
}

/*
 * Start the small-copy kernel in our own context (current), on a stream of its own: it never
 * ends, so no copy may queue behind it (our context asked for a queue more than its copy
 * streams). NULL when it cannot run, said in the log: copies then all take the copy engine.
 */
static struct gkern *kern_start(void)
{
	const char *step = "a driver without cuModuleLoadData, cuLaunchKernel or cuMemHostAlloc";
	cu_result r = -1;
	cu_module m = NULL;
	cu_function f = NULL;
	cu_stream ks = NULL;
	void *host = NULL;
	cu_ptr dev = 0;
	size_t head = SFK_RING * sizeof(struct sfk_desc) + 64; /* ring, done, stop */
	const char *q = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
	int nq = q && atoi(q) > 0 ? atoi(q) : 8; /* unset: CUDA's default, 8 */
	if (nq < own_streams() + 1) {
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU small copies: no kernel (CUDA_DEVICE_MAX_CONNECTIONS=%s leaves no "
		      "hardware "
		      "queue of its own next to %d copy stream(s))",
		      q ? q : "unset (8)", own_streams());
		return NULL;
	}
	if (G.cu.ModuleLoadData && G.cu.ModuleGetFunction && G.cu.LaunchKernel &&
	    G.cu.MemHostAlloc && G.cu.MemHostGetDevicePointer) {
		step = "cuModuleLoadData";
		r = G.cu.ModuleLoadData(&m, sfgpu_copier_ptx);
		if (r == CU_SUCCESS) {
			step = "cuModuleGetFunction";
			r = G.cu.ModuleGetFunction(&f, m, "sf_copier");
		}
		if (r == CU_SUCCESS) {
			step = "cuMemHostAlloc";
			r = G.cu.MemHostAlloc(&host, head + (size_t)SFK_RING * SFK_SLOT,
					      CU_MEMHOSTALLOC_DEVICEMAP_);
		}
		if (r == CU_SUCCESS) {
			memset(host, 0, head);
			step = "cuMemHostGetDevicePointer";
			r = G.cu.MemHostGetDevicePointer(&dev, host, 0);
		}
		if (r == CU_SUCCESS) {
			step = "cuStreamCreateWithPriority";
			r = top_stream(&ks);
		}
	}
	struct gkern *k = r == CU_SUCCESS ? calloc(1, sizeof(*k)) : NULL;
	if (k) {
		/* after the ring: done (8 bytes), stop (4, padded to 8), running (8), as copier.cu
		 * indexes them from done */
		size_t tail = SFK_RING * sizeof(struct sfk_desc);
		k->ring = host;
		k->done = (volatile uint64_t *)((char *)host + tail);
		k->stop = (volatile uint32_t *)((char *)host + tail + 8);
		k->running = (volatile uint64_t *)((char *)host + tail + 16);
		k->staging = (uint8_t *)host + head;
		k->staging_d = dev + head;
		k->pid = getpid();
		k->next = 1;
		pthread_mutex_init(&k->lock, NULL);
		cu_ptr ring_d = dev, done_d = dev + tail, stop_d = done_d + 8;
		unsigned n = SFK_RING;
		void *params[] = {&ring_d, &n, &done_d, &stop_d};
		step = "cuLaunchKernel";
		r = G.cu.LaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, ks, params, NULL);
		if (r == CU_SUCCESS) {
			step = "cuEventRecord after the kernel";
			r = G.cu.EventCreate(&k->ended, CU_EVENT_DISABLE_TIMING_);
			if (r == CU_SUCCESS)
				r = G.cu.EventRecord(k->ended, ks);
			if (r != CU_SUCCESS)
				*k->stop = 1;
		}
		/* Resident before any copy relies on it: launched late (NCCL's kernels spinning
		 * on every SM), it might never start, and its copies would hang. */
		int64_t t0 = mono_ns();
		while (r == CU_SUCCESS && !__atomic_load_n(k->running, __ATOMIC_ACQUIRE)) {
			if (mono_ns() - t0 > 1000000000LL) {
				*k->stop = 1; /* it returns at once if it ever starts */
				step = "the kernel's start (not resident after 1 s)";
				r = -1;
				break;
			}
			nap();
		}
		if (r != CU_SUCCESS) {
			free(k);
			k = NULL;
		}
	}
	if (!k) {
		/* what was made stays: our context holds it, and it is small */
		PWARN("GPU small copies: %s failed (%s): every copy takes the copy engine", step,
		      r == -1 ? "missing or timed out" : cuerr(r));
		return NULL;
	}
	static int once;
	if (!once++)
		atexit(kern_stop_all);
	PINFO(NCCL_INIT | NCCL_NET,
	      "GPU small copies: a resident kernel copies host messages up to %llu bytes "
	      "(SIMFABRIC_GPU_SMALL=kernel)",
	      (unsigned long long)G.small_max);
	return k;
}

/*
 * With the kernel resident, does work on each copy stream still run? A stream that shares the
 * kernel's hardware queue would wait behind it for ever. Our context current.
 */
static int streams_run(cu_stream *s, int n)
{
	cu_event ev[SFGPU_MAX_STREAMS] = {0};
	int ok = 1;
	for (int j = 0; j < n && ok; j++)
		ok = G.cu.EventCreate(&ev[j], CU_EVENT_DISABLE_TIMING_) == CU_SUCCESS &&
			G.cu.EventRecord(ev[j], s[j]) == CU_SUCCESS;
	int64_t t0 = mono_ns();
	for (int j = 0; j < n && ok; j++) {
		cu_result r;
		while ((r = G.cu.EventQuery(ev[j])) == CU_ERROR_NOT_READY &&
		       mono_ns() - t0 < 200000000LL) {
			nap();
		}
		ok = r == CU_SUCCESS;
	}
	for (int j = 0; j < n; j++)
		if (ev[j])
			G.cu.EventDestroy(ev[j]); /* released by the driver once complete */
	return ok;
}

/*
 * Under G.imp_lock, with entry i's application context current: make our own context on its
 * device and its streams (SIMFABRIC_GPU_STREAMS), when auto under MPS or
 * SIMFABRIC_GPU_COPY_CONTEXT=own asks. Said once in the log either way; on failure auto copies
 * in the application's context and own fails the copies (copy_stream).
 */
static void own_context(int i)
{
	cu_device dev = 0;
	int mps = 0;
	if (G.copy_ctx == COPY_CTX_APP)
		return;
	const char *step = "cuCtxGetDevice";
	cu_result r = G.cu.CtxGetDevice(&dev);
	if (r == CU_SUCCESS && G.cu.DeviceGetAttribute)
		G.cu.DeviceGetAttribute(&mps, CU_DA_MPS_ENABLED, dev);
	if (r == CU_SUCCESS && G.copy_ctx == COPY_CTX_AUTO && !mps)
		return; /* auto: our own context under MPS only (see copy_stream) */
	if (r == CU_SUCCESS && !(G.cu.CtxCreate && G.cu.MemcpyPeerAsync)) {
		step = "cuCtxCreate_v2 or cuMemcpyPeerAsync (a driver without them)";
		r = -1;
	}
	cu_ctx own = NULL, popped;
	cu_stream s[SFGPU_MAX_STREAMS] = {0};
	int n = 0;
	if (r == CU_SUCCESS) {
		step = "cuCtxCreate";
		r = own_ctx_create(&own, dev); /* and makes it current */
		if (r == CU_SUCCESS) {
			step = "cuStreamCreateWithPriority";
			while (n < own_streams() && (r = top_stream(&s[n])) == CU_SUCCESS)
				n++;
			if (n) /* fewer streams than asked is still a copy context */
				r = CU_SUCCESS;
			G.cu.CtxPopCurrent(&popped);
		}
	}
	if (r == CU_SUCCESS) {
		G.streams[i].own = own;
		memcpy(G.streams[i].own_s, s, sizeof(s));
		G.streams[i].own_n = n;
		/* MPS only: without it our context time-slices with the application's, and a
		 * kernel that never ends would take every other slice */
		if (G.small_kernel && mps && G.cu.CtxPushCurrent(own) == CU_SUCCESS) {
			struct gkern *k = kern_start();
			if (k && !streams_run(s, n)) {
				*k->stop = 1; /* frees the queue it blocks */
				PWARN("GPU small copies: a copy stream shares a hardware queue "
				      "with the "
				      "kernel (CUDA_DEVICE_MAX_CONNECTIONS): no kernel");
				k = NULL;
			}
			G.streams[i].kern = k;
			G.cu.CtxPopCurrent(&popped);
		}
		PINFO(NCCL_INIT | NCCL_NET,
		      "GPU copies run in a CUDA context of their own on device %d, %d stream(s) "
		      "(SIMFABRIC_GPU_COPY_CONTEXT=%s%s): no application stream shares their "
		      "hardware queues",
		      (int)dev, n, G.copy_ctx == COPY_CTX_OWN ? "own" : "auto",
		      mps ? ", under MPS" : "; without MPS contexts time-slice");
		return;
	}
	/* the context, if made, stays: destroying it could disturb the application's */
	if (G.copy_ctx == COPY_CTX_OWN)
		PWARN("SIMFABRIC_GPU_COPY_CONTEXT=own: %s failed on device %d (%s); no GPU copy "
		      "can "
		      "start",
		      step, (int)dev, r == -1 ? "missing" : cuerr(r));
	else
		PWARN("GPU copies: %s failed on device %d (%s), so they run in the application's "
		      "context, where under MPS a copy can wait behind a kernel that waits for it "
		      "(a hang). Under MPS every context's hardware queues come out of one pool: "
		      "give each rank fewer (CUDA_DEVICE_MAX_CONNECTIONS=32 / ranks per GPU; "
		      "docs/gpu-path.md)",
		      step, (int)dev, r == -1 ? "missing" : cuerr(r));
}

/*
 * Where a sendComm's copies run: a stream in a context, one per application context (so per
 * device), made early (at setup when a context is current, else by the first copy), at the
 * highest priority. A copy must never wait for NCCL's kernel, which spins until this very copy
 * lands; on an H200 under MPS two things made it wait. (1) The GPU runs a context's streams on a
 * few hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), assigned in order of creation, and a copy
 * queued behind the kernel never runs: a stream per comm hung LL128 and Simple at once, and one
 * early stream still shared a queue with one of PyTorch's dozens. (2) A device-to-device copy
 * may run as a kernel, and the ranks' spinning kernels can hold every SM (copy_in asks for the
 * copy engine). 4 PyTorch ranks' all_to_all hung with either fix alone and passed with both.
 * So under MPS (auto) the copies run in a context of our own, whose queues no application
 * stream shares, as a NIC's DMA engine is not behind the application's kernels; without MPS
 * (a GPU per rank) two contexts would time-slice, and auto stays in the application's. If our
 * context cannot be made (MPS hands out queues from one pool), auto falls back to the
 * application's with a WARN; SIMFABRIC_GPU_COPY_CONTEXT=own fails instead. self: the receiver is
 * in this process (its memory is in the application's context): always the application's stream.
 */
static int copy_stream(cu_ctx app, int self, cu_ctx *ctx, cu_stream *out, char *why, size_t cap)
{
	pthread_mutex_lock(&G.imp_lock);
	int i, rc = 0;
	for (i = 0; i < G.nstreams; i++)
		if (G.streams[i].ctx == app)
			break;
	if (i == G.nstreams) {
		cu_stream s = NULL;
		if (G.nstreams == SFGPU_MAX_CTX) {
			snprintf(why, cap, "more than %d CUDA contexts copy in this process",
				 SFGPU_MAX_CTX);
			rc = -ENOSPC;
		} else {
			cu_result r = top_stream(&s);
			if (r != CU_SUCCESS) {
				snprintf(why, cap, "cuStreamCreateWithPriority: %s", cuerr(r));
				rc = -EIO;
			}
		}
		if (rc) {
			pthread_mutex_unlock(&G.imp_lock);
			return rc;
		}
		memset(&G.streams[i], 0, sizeof(G.streams[i]));
		G.streams[i].ctx = app;
		G.streams[i].s = s;
		G.nstreams++;
	}
	if (!G.streams[i].own_tried) {
		G.streams[i].own_tried = 1;
		own_context(i);
		if (!G.streams[i].own_n && G.copy_ctx != COPY_CTX_OWN &&
		    !getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
			/* Too late to set (CUDA read it at its init): say so now, not after a hang. */
			PWARN("GPU copies run in the application's CUDA context and "
			      "CUDA_DEVICE_MAX_CONNECTIONS is unset (CUDA's default: 8 hardware "
			      "queues): a copy may queue behind an NCCL kernel that waits for it, "
			      "and the job hangs. simfabric launch and run set it; under your own "
			      "launcher set it for every rank (32 with a GPU per rank; "
			      "docs/gpu-path.md), or SIMFABRIC_GPU=off");
	}
	if (!self && G.streams[i].own_n) {
		*ctx = G.streams[i].own;
		/* sendComms spread over the streams; each keeps one, so its copies stay in order */
		*out = G.streams[i].own_s[G.streams[i].own_next++ % (unsigned)G.streams[i].own_n];
	} else if (!self && G.copy_ctx == COPY_CTX_OWN) {
		snprintf(why, cap,
			 "SIMFABRIC_GPU_COPY_CONTEXT=own, but no copy context could be made on "
			 "this "
			 "device (the WARN at its first try says why)");
		rc = -EIO;
	} else {
		*ctx = app;
		*out = G.streams[i].s;
	}
	pthread_mutex_unlock(&G.imp_lock);
	return rc;
}

/* ---- batches (struct gqueue) and their issuer ------------------------------------------ */

/*
 * The issuer: a thread of ours that issues the queued copies, so that NCCL's proxy thread,
 * which serves every channel of the process, pays a queue entry per message (well under a
 * microsecond) instead of a copy launch and an event record (4-6 us under MPS, most of what it
 * spent per LL step). It takes every copy queued while it was issuing the last batch, so batches
 * grow with the load, as a NIC's doorbell batching does. It spins SFGPU_SPIN_NS after its last
 * batch (a message's latency must not include a wake-up), then sleeps until the next copy comes.
 * One per process, started by the first copy; stopped at exit. Without it (it could not be
 * started, or a fork's child) every copy is issued by its poster, as with
 * SIMFABRIC_GPU_BATCH_MAX=1.
 */
#define SFGPU_SPIN_NS 100000
#define SFGPU_STUCK_NS 200000 /* an issuer not seen this long: pollers issue and reap */
#define SFGPU_BACKOFF_NS 2000 /* between looks at a long batch, after SFGPU_BACKOFF_AFTER */
#define SFGPU_BACKOFF_AFTER 64
static int64_t stuck_ns = SFGPU_STUCK_NS; /* a variable for the tests */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	_Atomic int work;     /* copies queued since the issuer last looked */
	_Atomic int sleeping; /* it waits on cv */
	_Atomic int stop;
	_Atomic int running;  /* in this process (not in a fork's child) */
	_Atomic int64_t beat; /* when it last went round its loop (ns) */
	int failed; /* it could not be started, or this is a fork's child: posters issue */
	int hooked; /* atexit and atfork handlers registered */
	pthread_t th;
} W = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/*
 * The queue of stream st (in ctx), made on its first use; under G.imp_lock. NULL without the
 * batch call (drivers before 12.8) or with SIMFABRIC_GPU_ISSUER=sender: each sender issues its
 * own copies, one call and one event each.
 */
static struct gqueue *queue_for(cu_stream st, cu_ctx ctx)
{
	if (!(G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1) || G.sender_issues || !G.batch_max)
		return NULL;
	int n = G.nqueues;
	for (int i = 0; i < n; i++)
		if (G.queues[i].s == st)
			return &G.queues[i];
	if (n == (int)(sizeof(G.queues) / sizeof(G.queues[0])))
		return NULL;
	struct gqueue *q = &G.queues[n];
	pthread_mutex_init(&q->lock, NULL);
	pthread_mutex_init(&q->issue, NULL);
	q->s = st;
	q->ctx = ctx;
	__atomic_store_n(&G.nqueues, n + 1, __ATOMIC_RELEASE); /* the issuer reads it unlocked */
	return q;
}

/* Batch b (and so every earlier one) has ended. Any thread. */
static void queue_ended(struct gqueue *q, uint64_t b)
{
	uint64_t c = atomic_load_explicit(&q->completed, memory_order_acquire);
	while (c < b &&
	       !atomic_compare_exchange_weak_explicit(&q->completed, &c, b, memory_order_acq_rel,
						      memory_order_acquire))
		;
}

/*
 * Issue what is queued as one batch, on a copy engine where the driver takes the hint (see
 * copy_in), and record the batch's event; each copy's sendComm learns its batch number (or
 * BATCH_FAILED, with a WARN). Any thread, one at a time per queue (q->issue); the pending list is
 * taken under q->lock, so posters never wait for the driver. how: ISSUE_BY_ISSUER (the issuer,
 * which keeps the stream's context current; others enter it for the while), ISSUE_WAIT, or
 * ISSUE_TRY (not if another issues now). 1 done (or nothing queued), 0 not now: another was
 * issuing (ISSUE_TRY), or the batch SFGPU_BATCH_EVENTS before is still running, whose event this
 * one needs (the copies stay queued; never dropped for a GPU that is merely slow).
 */
enum { ISSUE_BY_ISSUER, ISSUE_WAIT, ISSUE_TRY };
static int queue_issue(struct gqueue *q, int how)
{
	cu_ptr dst[SFGPU_BATCH_MAX], src[SFGPU_BATCH_MAX];
	size_t len[SFGPU_BATCH_MAX], ncopies = 0;
	uint64_t *mark[SFGPU_BATCH_MAX];
	const char *desc = NULL;
	if (how == ISSUE_TRY) {
		if (pthread_mutex_trylock(&q->issue))
			return 0;
	} else
		pthread_mutex_lock(&q->issue);
	uint64_t b = atomic_load_explicit(&q->issued, memory_order_relaxed) + 1;
	cu_event *e = &q->ev[b % SFGPU_BATCH_EVENTS];
	if (*e &&
	    atomic_load_explicit(&q->completed, memory_order_acquire) + SFGPU_BATCH_EVENTS < b) {
		if (G.cu.EventQuery(*e) != CU_SUCCESS) {
			pthread_mutex_lock(&q->lock);
			int64_t waited = q->n ? mono_ns() - q->since : 0;
			pthread_mutex_unlock(&q->lock);
			if (waited > SFGPU_SLOW_NS && !q->ring_warned++)
				PWARN("%s: %d batches of copies are still running after %lld ms; "
				      "the "
				      "GPU is not running this process's copies (raise "
				      "CUDA_DEVICE_MAX_CONNECTIONS: docs/gpu-path.md)",
				      q->desc[0], SFGPU_BATCH_EVENTS,
				      (long long)(waited / 1000000));
			pthread_mutex_unlock(&q->issue);
			return 0;
		}
		queue_ended(q, b - SFGPU_BATCH_EVENTS);
	}
	pthread_mutex_lock(&q->lock);
	int n = q->n;
	for (int i = 0; i < n; i++) {
		mark[i] = q->mark[i];
		if (q->len[i]) { /* a message of 0 bytes only needs its place in the order */
			dst[ncopies] = q->dst[i], src[ncopies] = q->src[i];
			len[ncopies++] = q->len[i];
		}
	}
	if (n)
		desc = q->desc[0];
	q->n = 0;
	pthread_mutex_unlock(&q->lock);
	if (!n) {
		pthread_mutex_unlock(&q->issue);
		return 1;
	}
	cu_ctx cur = NULL, popped;
	int pushed = 0;
	cu_result r = G.cu.CtxGetCurrent(&cur);
	if (r == CU_SUCCESS && cur != q->ctx) {
		if (how == ISSUE_BY_ISSUER)
			r = G.cu.CtxSetCurrent(q->ctx); /* our own thread: it stays */
		else
			pushed = (r = G.cu.CtxPushCurrent(q->ctx)) == CU_SUCCESS;
	}
	if (r == CU_SUCCESS && !*e)
		r = G.cu.EventCreate(e, CU_EVENT_DISABLE_TIMING_);
	if (r == CU_SUCCESS && ncopies) {
		size_t idx = 0, fail = 0;
		struct cu_memcpy_attr a = {.src_access_order = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM_,
					   .flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE_};
		r = G.cu.MemcpyBatchAsync2
			? G.cu.MemcpyBatchAsync2(dst, src, len, ncopies, &a, &idx, 1, q->s)
			: G.cu.MemcpyBatchAsync1(dst, src, len, ncopies, &a, &idx, 1, &fail, q->s);
	}
	if (r == CU_SUCCESS)
		r = G.cu.EventRecord(*e, q->s);
	if (pushed)
		G.cu.CtxPopCurrent(&popped);
	if (r != CU_SUCCESS)
		PWARN("%s: a batch of %zu copies into receivers' GPU memory: %s", desc, ncopies,
		      cuerr(r));
	if (r == CU_SUCCESS)
		atomic_store_explicit(&q->issued, b, memory_order_release);
	for (int i = 0; i < n; i++)
		__atomic_store_n(mark[i], r == CU_SUCCESS ? b : BATCH_FAILED, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&q->issue);
	return 1;
}

/*
 * Advance q->completed over the batches that have ended, oldest first (one query each, up to the
 * first still running): 1 if any ended. The issuer's job, so that NCCL's proxy thread, polling
 * its requests, reads a counter instead of calling the driver (whose calls serialize with the
 * issuer's: a poller that queried events delayed each batch by microseconds).
 */
static int queue_reap(struct gqueue *q)
{
	int any = 0;
	uint64_t issued = atomic_load_explicit(&q->issued, memory_order_acquire);
	uint64_t c = atomic_load_explicit(&q->completed, memory_order_acquire);
	while (c < issued && G.cu.EventQuery(q->ev[(c + 1) % SFGPU_BATCH_EVENTS]) == CU_SUCCESS) {
		queue_ended(q, ++c);
		any = 1;
	}
	return any;
}

/* Is the issuer going round (it reaps and issues), or must pollers do it? */
static int issuer_alive(void)
{
	return atomic_load_explicit(&W.running, memory_order_acquire) &&
		mono_ns() - atomic_load_explicit(&W.beat, memory_order_relaxed) < stuck_ns;
}

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *issuer_main(void *arg)
{
	(void)arg;
	int64_t last = mono_ns();
	int fruitless = 0; /* looks in a row at running batches that found none ended */
	while (!atomic_load(&W.stop)) {
		int64_t now = mono_ns();
		atomic_store_explicit(&W.beat, now, memory_order_relaxed);
		int busy = 0, did = 0;
		if (atomic_exchange(&W.work, 0)) {
			/* after the exchange: a queue made by the copy that set work is seen */
			int nq = __atomic_load_n(&G.nqueues, __ATOMIC_ACQUIRE);
			for (int i = 0; i < nq; i++)
				queue_issue(&G.queues[i], ISSUE_BY_ISSUER);
			did = 1;
		}
		int nq = __atomic_load_n(&G.nqueues, __ATOMIC_ACQUIRE);
		for (int i = 0; i < nq; i++) {
			struct gqueue *q = &G.queues[i];
			did |= queue_reap(q);
			busy |= atomic_load(&q->completed) < atomic_load(&q->issued);
			if (q->n) /* left queued (its batch's event was not free): again */
				atomic_store(&W.work, 1);
		}
		if (did) {
			last = now;
			fruitless = 0;
			continue;
		}
		if (busy) {
			/* never asleep while a copy may end; after many looks at a long batch, look
			 * less often (each look is a driver call beside the application's) */
			int64_t until = ++fruitless > SFGPU_BACKOFF_AFTER ? now + SFGPU_BACKOFF_NS
									  : 0;
			do
				cpu_pause();
			while (until && mono_ns() < until && !atomic_load(&W.work));
			continue;
		}
		fruitless = 0;
		if (now - last < SFGPU_SPIN_NS) {
			cpu_pause();
			continue;
		}
		pthread_mutex_lock(&W.lock);
		atomic_store(&W.sleeping, 1);
		while (!atomic_load(&W.work) && !atomic_load(&W.stop))
			pthread_cond_wait(&W.cv, &W.lock);
		atomic_store(&W.sleeping, 0);
		pthread_mutex_unlock(&W.lock);
		last = mono_ns();
	}
	return NULL;
}

/* At exit: no thread of ours may be inside the driver while CUDA tears down (bounded). */
static void issuer_stop(void)
{
	if (!atomic_load(&W.running))
		return;
	pthread_mutex_lock(&W.lock);
	atomic_store(&W.stop, 1);
	pthread_cond_signal(&W.cv);
	pthread_mutex_unlock(&W.lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if (pthread_timedjoin_np(W.th, NULL, &until))
		PWARN("GPU copies: the issuer thread has not ended 1 s after exit began (inside "
		      "the "
		      "CUDA driver?)");
	atomic_store(&W.running, 0);
}

/*
 * A fork's child has no issuer (and no usable CUDA): its posters issue. Its locks are made anew:
 * a thread of the parent may have held one at the fork.
 */
static void issuer_forked(void)
{
	atomic_store(&W.running, 0);
	W.failed = 1;
	pthread_mutex_init(&W.lock, NULL);
	pthread_cond_init(&W.cv, NULL);
	for (int i = 0; i < G.nqueues; i++) {
		pthread_mutex_init(&G.queues[i].lock, NULL);
		pthread_mutex_init(&G.queues[i].issue, NULL);
	}
}

/* The issuer of this process, started on first use: 1 running, 0 none (posters issue). */
static int issuer_up(void)
{
	if (__builtin_expect(atomic_load_explicit(&W.running, memory_order_acquire), 1))
		return 1;
	pthread_mutex_lock(&W.lock);
	int up = atomic_load(&W.running);
	if (!up && !W.failed && !atomic_load(&W.stop)) {
		int rc = pthread_create(&W.th, NULL, issuer_main, NULL);
		if (rc) {
			W.failed = 1;
			PWARN("GPU copies: cannot start the thread that issues them (%s); each "
			      "sender issues its own",
			      strerror(rc));
		} else {
			atomic_store(&W.running, 1);
			if (!W.hooked) {
				atexit(issuer_stop);
				pthread_atfork(NULL, NULL, issuer_forked);
				W.hooked = 1;
			}
			up = 1;
		}
	}
	pthread_mutex_unlock(&W.lock);
	return up;
}

/*
 * Everything queued out now (a drain, a copy that must follow them in the stream, no issuer),
 * waiting for a batch's event to be free if need be.
 */
static void queue_out(struct gqueue *q)
{
	while (q && !queue_issue(q, ISSUE_WAIT)) {
		queue_reap(q);
		nap();
	}
}

/* Queue one copy (len 0: its place in the order only); *mark learns its batch. */
static void queue_add(struct gqueue *q, cu_ptr dst, const void *src, uint64_t len, uint64_t *mark,
		      const char *desc)
{
	__atomic_store_n(mark, BATCH_QUEUED, __ATOMIC_RELAXED);
	for (;;) {
		pthread_mutex_lock(&q->lock);
		if ((uint64_t)q->n < G.batch_max)
			break;
		pthread_mutex_unlock(&q->lock);
		if (!queue_issue(q, ISSUE_WAIT)) /* full: the issuer is behind, help it */
			nap();			 /* (all batches' events in use: one must end) */
	}
	if (!q->n)
		q->since = mono_ns();
	q->dst[q->n] = dst;
	q->src[q->n] = (cu_ptr)(uintptr_t)src;
	q->len[q->n] = len;
	q->mark[q->n] = mark;
	q->desc[q->n] = desc;
	q->n++;
	pthread_mutex_unlock(&q->lock);
	if (!issuer_up()) {
		queue_out(q);
		return;
	}
	atomic_store(&W.work, 1);
	if (atomic_load(&W.sleeping)) {
		pthread_mutex_lock(&W.lock);
		pthread_cond_signal(&W.cv);
		pthread_mutex_unlock(&W.lock);
	}
}

/*
 * Enter the sendComm's copy context: its stream and events live there. In the application's
 * context it normally is the caller's already (NCCL's proxy threads keep their device's context
 * current) and this costs one call; otherwise it is pushed, and tx_leave pops it: the caller's
 * context is never changed behind its back. *pushed says which. self (the first copy only): the
 * receiver is in this process.
 */
static int tx_enter(struct sfgpu_tx *t, int self, int *pushed)
{
	cu_ctx cur = NULL;
	*pushed = 0;
	G.cu.CtxGetCurrent(&cur);
	if (__builtin_expect(t->stream != NULL, 1)) {
		if (cur != t->ctx) {
			cu_result r = G.cu.CtxPushCurrent(t->ctx);
			if (r != CU_SUCCESS) {
				PWARN("%s: cannot enter the copy context: cuCtxPushCurrent: %s",
				      t->desc, cuerr(r));
				return -EIO;
			}
			*pushed = 1;
		}
		return 0;
	}
	char why[160];
	if (!cur) {
		PWARN("%s: cannot copy to the GPU: no CUDA context is current in this thread",
		      t->desc);
		return -EIO;
	}
	cu_ctx ctx = NULL;
	int rc = copy_stream(cur, self, &ctx, &t->stream, why, sizeof(why));
	if (rc) {
		t->stream = NULL;
		PWARN("%s: cannot copy to the GPU: %s", t->desc, why);
		return rc;
	}
	t->ctx = ctx;
	t->app = cur;
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < G.nstreams && !self; i++)
		if (G.streams[i].own == ctx && ctx)
			t->kern = G.streams[i].kern;
	t->q = queue_for(t->stream, ctx);
	pthread_mutex_unlock(&G.imp_lock);
	if (ctx != cur) {
		cu_result r = G.cu.CtxPushCurrent(ctx);
		if (r != CU_SUCCESS) {
			PWARN("%s: cannot enter the copy context: cuCtxPushCurrent: %s", t->desc,
			      cuerr(r));
			return -EIO;
		}
		*pushed = 1;
	}
	return 0;
}

static void tx_leave(int pushed)
{
	cu_ctx ignored;
	if (pushed)
		G.cu.CtxPopCurrent(&ignored);
}

/*
 * May the CPU read src (the kernel path stages it with memcpy)? Only when the driver says host
 * memory, or does not know the pointer at all (malloc'd memory): a query that fails for any
 * other reason must not send a device pointer to memcpy.
 */
static int cpu_readable(const void *src)
{
	unsigned int type = 0;
	cu_result r = G.cu.PointerGetAttribute(&type, CU_PA_MEMORY_TYPE, (cu_ptr)(uintptr_t)src);
	return (r == CU_SUCCESS && type == CU_MEMTYPE_HOST) || r == 1 /* INVALID_VALUE */;
}

/* Has the kernel copied up to seq? */
static inline int kern_done(const struct gkern *k, uint64_t seq)
{
	return __atomic_load_n(k->done, __ATOMIC_ACQUIRE) >= seq;
}

/* Wait (bounded) until the kernel has copied up to seq. */
static int kern_wait(const struct gkern *k, uint64_t seq)
{
	int64_t t0 = mono_ns();
	while (!kern_done(k, seq)) {
		if (mono_ns() - t0 > 1000000 && G.cu.EventQuery(k->ended) != CU_ERROR_NOT_READY)
			return kern_done(k, seq) ? 0
						 : -EIO; /* it has returned: nothing more comes */
		if (mono_ns() - t0 > SFK_WAIT_NS) {
			PWARN("GPU small copies: the kernel has not copied descriptor %llu after "
			      "%lld s (done: %llu)",
			      (unsigned long long)seq, SFK_WAIT_NS / 1000000000LL,
			      (unsigned long long)*k->done);
			return -ETIMEDOUT;
		}
		nap();
	}
	return 0;
}

/*
 * A small copy from host memory through the kernel: staged, then one descriptor. 0 with *seq,
 * or -EAGAIN when the ring is full (the caller takes the copy engine instead).
 */
static int kern_copy(struct gkern *k, cu_ptr dst, const void *src, uint64_t len, uint64_t *seq)
{
	pthread_mutex_lock(&k->lock);
	uint64_t n = k->next;
	if (n - __atomic_load_n(k->done, __ATOMIC_ACQUIRE) > SFK_RING || *k->stop) {
		pthread_mutex_unlock(&k->lock);
		return -EAGAIN;
	}
	uint32_t i = (uint32_t)((n - 1) & (SFK_RING - 1));
	memcpy(k->staging + (size_t)i * SFK_SLOT, src, len);
	volatile struct sfk_desc *d = &k->ring[i];
	d->src = k->staging_d + (uint64_t)i * SFK_SLOT;
	d->dst = dst;
	d->len = len;
	__atomic_store_n(&((struct sfk_desc *)d)->seq, n, __ATOMIC_RELEASE);
	k->next = n + 1;
	pthread_mutex_unlock(&k->lock);
	*seq = n;
	return 0;
}

/* Wait for this sendComm's copies (and any others on its stream). */
static void tx_sync(struct sfgpu_tx *t)
{
	int pushed;
	if (!t->stream || tx_enter(t, 0, &pushed))
		return;
	if (t->kern && t->kern_last)
		kern_wait(t->kern, t->kern_last);
	queue_out(t->q);
	if (G.cu.StreamSynchronize(t->stream) == CU_SUCCESS &&
	    (!t->kern || kern_done(t->kern, t->kern_last)))
		t->done_ticket = t->next_ticket;
	tx_leave(pushed);
}

/*
 * One copy into the receiver's memory (mapped in im->ctx) on the sendComm's stream, on a copy
 * engine where the driver takes the hint (cuMemcpyBatchAsync, CU_MEMCPY_FLAG_PREFER_OVERLAP_
 * WITH_COMPUTE, as NCCL's own copy-engine collectives ask): a device-to-device copy may
 * otherwise run as a kernel, which needs an SM, and under MPS NCCL's spinning kernels of
 * several ranks can hold them all (4 PyTorch ranks' all_to_all hung so, in our own context too).
 * Without the batch call (drivers before 12.8): in the application's context a plain copy; from
 * our own context a peer copy names both contexts (the source is the application's), and a host
 * source as host memory (memory pinned by cuMemHostRegister without PORTABLE looks pageable from
 * our context: staged, still correct).
 */
static cu_result copy_in(struct sfgpu_tx *t, const struct gimport *im, cu_ptr dst, const void *src,
			 uint64_t len)
{
	if (G.cu.MemcpyBatchAsync2 || G.cu.MemcpyBatchAsync1) {
		cu_ptr d = dst, sp = (cu_ptr)(uintptr_t)src;
		size_t n = len, idx = 0, fail = 0;
		struct cu_memcpy_attr a = {.src_access_order = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM_,
					   .flags = CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE_};
		if (G.cu.MemcpyBatchAsync2)
			return G.cu.MemcpyBatchAsync2(&d, &sp, &n, 1, &a, &idx, 1, t->stream);
		return G.cu.MemcpyBatchAsync1(&d, &sp, &n, 1, &a, &idx, 1, &fail, t->stream);
	}
	if (t->ctx == t->app)
		return G.cu.MemcpyAsync(dst, (cu_ptr)(uintptr_t)src, len, t->stream);
	if (sfgpu_is_device(src))
		return G.cu.MemcpyPeerAsync(dst, im->ctx, (cu_ptr)(uintptr_t)src, t->app, len,
					    t->stream);
	return G.cu.MemcpyHtoDAsync(dst, src, len, t->stream);
}

/*
 * The model's corrupted bits, flipped in the receiver's copy after the copy, in stream order:
 * read back from there (the copy made it the source's), changed, written again.
 */
static cu_result flip_bits(struct sfgpu_tx *t, cu_ptr dst, const struct chan_flip *flips,
			   uint32_t nflips)
{
	cu_result r = CU_SUCCESS;
	for (uint32_t k = 0; r == CU_SUCCESS && k < nflips; k++) {
		uint8_t b = 0;
		/* on our own stream, never the legacy one: that would wait for the application's
		 * kernels, which may be waiting for us */
		r = G.cu.MemcpyDtoHAsync(&b, dst + flips[k].off, 1, t->stream);
		if (r == CU_SUCCESS)
			r = G.cu.StreamSynchronize(t->stream);
		b ^= flips[k].mask;
		if (r == CU_SUCCESS) /* from pageable memory: staged before the call returns */
			r = G.cu.MemcpyHtoDAsync(dst + flips[k].off, &b, 1, t->stream);
	}
	return r;
}

static int dma_start(void *ctx, const char *where, uint64_t region, uint64_t off, const void *src,
		     uint64_t len, const struct chan_flip *flips, uint32_t nflips, uint64_t *ticket)
{
	struct sfgpu_tx *t = ctx;
	if (where[0] != '@' || !strchr(where, '#')) {
		PWARN("%s: the receiver published no GPU export server ('%.20s')", t->desc, where);
		return -EPROTO;
	}
	/* A queued copy needs no context: enter it only for a first mapping or a copy now. */
	int pushed = 0, entered = 0, rc;
	int queued = t->q && !nflips && !t->kern;
	struct gimport *im = queued ? tx_cached(t, where, region) : NULL;
	if (!im) {
		rc = tx_enter(t, !strcmp(where, G.where), &pushed);
		if (rc)
			return rc;
		entered = 1;
		queued = t->q && !nflips && !t->kern; /* a first copy has just made its queue */
		im = tx_region(t, where, region);
		if (!im) {
			tx_leave(pushed);
			return -EIO;
		}
	}
	/* Validated before anything is issued: a bad copy would poison the application's context. */
	if (off > im->size || len > im->size - off) {
		PWARN("%s: a copy of %llu bytes at offset %llu does not fit the receiver's region "
		      "%llu (%llu bytes)",
		      t->desc, (unsigned long long)len, (unsigned long long)off,
		      (unsigned long long)region, (unsigned long long)im->size);
		if (entered)
			tx_leave(pushed);
		return -ERANGE;
	}
	uint32_t slot = (uint32_t)(t->next_ticket % CHAN_MAX_SENDS);
	t->kseq[slot] = 0;
	t->t_start[slot] = 0; /* stamped by the first poll: keeps the clock off this path */
	t->len[slot] = len;
	if (queued) {
		queue_add(t->q, im->va + off, src, len, &t->batch[slot], t->desc);
		if (entered)
			tx_leave(pushed);
		*ticket = t->next_ticket++;
		return 0;
	}
	t->batch[slot] = 0;
	cu_result r = CU_SUCCESS;
	uint64_t kseq = 0;
	if (t->kern && len && len <= G.small_max && !nflips && cpu_readable(src) &&
	    kern_copy(t->kern, im->va + off, src, len, &kseq) == 0) {
		tx_leave(pushed);
		t->kseq[slot] = t->kern_last = kseq;
		*ticket = t->next_ticket++;
		return 0;
	}
	queue_out(t->q); /* the stream keeps the tickets' order */
	if (len)
		r = copy_in(t, im, im->va + off, src, len);
	if (r == CU_SUCCESS && nflips)
		r = flip_bits(t, im->va + off, flips, nflips);
	if (r == CU_SUCCESS && !t->ev[slot])
		r = G.cu.EventCreate(&t->ev[slot], CU_EVENT_DISABLE_TIMING_);
	if (r == CU_SUCCESS)
		r = G.cu.EventRecord(t->ev[slot], t->stream);
	tx_leave(pushed);
	if (r != CU_SUCCESS) {
		PWARN("%s: copy of %llu bytes into region %llu: %s", t->desc,
		      (unsigned long long)len, (unsigned long long)region, cuerr(r));
		return -EIO;
	}
	*ticket = t->next_ticket++;
	return 0;
}

/*
 * A queued or batched copy: CU_SUCCESS done, CU_ERROR_NOT_READY not yet, else the event's error;
 * *failed set if its batch call failed (said then).
 */
static cu_result batch_state(struct sfgpu_tx *t, uint32_t slot, int *failed)
{
	struct gqueue *q = t->q;
	uint64_t b = __atomic_load_n(&t->batch[slot], __ATOMIC_ACQUIRE);
	if (b == BATCH_QUEUED) {
		/* the issuer's job; if it is not going round, ours (never waiting for it) */
		if (!issuer_alive())
			queue_issue(q, ISSUE_TRY);
		b = __atomic_load_n(&t->batch[slot], __ATOMIC_ACQUIRE);
		if (b == BATCH_QUEUED)
			return CU_ERROR_NOT_READY;
	}
	if (b == BATCH_FAILED) {
		*failed = 1;
		return CU_ERROR_NOT_READY;
	}
	if (b <= atomic_load_explicit(&q->completed, memory_order_acquire))
		return CU_SUCCESS;
	/* The issuer reaps ended batches; ask the driver here only when it is not going round.
	 * (An event reused by a later batch says not ready: only once b has ended, which the
	 * next look at completed sees.) */
	if (issuer_alive())
		return CU_ERROR_NOT_READY;
	cu_result r = G.cu.EventQuery(q->ev[b % SFGPU_BATCH_EVENTS]);
	if (r == CU_SUCCESS)
		queue_ended(q, b);
	return r;
}

static int dma_poll(void *ctx, uint64_t ticket)
{
	struct sfgpu_tx *t = ctx;
	uint32_t slot = (uint32_t)(ticket % CHAN_MAX_SENDS);
	cu_result r;
	if (t->kseq[slot])
		r = kern_done(t->kern, t->kseq[slot]) ? CU_SUCCESS : CU_ERROR_NOT_READY;
	else if (__atomic_load_n(&t->batch[slot], __ATOMIC_RELAXED)) {
		int failed = 0;
		r = batch_state(t, slot, &failed);
		if (failed)
			return -EIO;
	} else
		r = G.cu.EventQuery(t->ev[slot]);
	if (r == CU_SUCCESS) {
		/* one stream: earlier copies are done too, unless the kernel still has some */
		if (!t->kseq[slot] && ticket >= t->done_ticket &&
		    (!t->kern || kern_done(t->kern, t->kern_last)))
			t->done_ticket = ticket + 1;
		return 1;
	}
	if (r == CU_ERROR_NOT_READY) {
		/* A copy the GPU never runs hangs the job silently: say so once per comm. */
		int64_t now = mono_ns();
		if (!t->t_start[slot])
			t->t_start[slot] = now;
		else if (t->kseq[slot] && now - t->t_start[slot] > 1000000 &&
			 (r = G.cu.EventQuery(t->kern->ended)) != CU_ERROR_NOT_READY &&
			 !kern_done(t->kern, t->kseq[slot])) {
			/* the kernel has returned (or faulted) with this copy undone */
			PWARN("%s: the small-copy kernel ended (%s) before copying ticket %llu",
			      t->desc, r == CU_SUCCESS ? "stopped" : cuerr(r),
			      (unsigned long long)ticket);
			return -EIO;
		} else if (now - t->t_start[slot] > SFGPU_SLOW_NS && !t->slow_warned++)
			PWARN("%s: a copy of %llu bytes into the receiver's GPU memory (ticket "
			      "%llu) "
			      "has not completed after %lld ms; the GPU is not running this "
			      "process's "
			      "copies (raise CUDA_DEVICE_MAX_CONNECTIONS: docs/gpu-path.md)",
			      t->desc, (unsigned long long)t->len[slot], (unsigned long long)ticket,
			      (long long)((now - t->t_start[slot]) / 1000000));
		return 0;
	}
	PWARN("%s: the copy into the receiver's GPU memory failed: %s", t->desc, cuerr(r));
	return -EIO;
}

static void dma_drain(void *ctx)
{
	tx_sync(ctx);
}

const struct chan_dma sfgpu_dma = {dma_start, dma_poll, dma_drain};

void sfgpu_drain_all(void)
{
	cu_stream s[(1 + SFGPU_MAX_STREAMS) * SFGPU_MAX_CTX];
	struct gkern *ks[SFGPU_MAX_CTX];
	uint64_t kn[SFGPU_MAX_CTX]; /* the last descriptor each kernel had been given */
	int n = 0, nk = 0;
	pthread_mutex_lock(&G.imp_lock);
	int nq = G.nqueues;
	pthread_mutex_unlock(&G.imp_lock);
	for (int i = 0; i < nq; i++) /* queues are never taken back: no lock needed to reach them */
		queue_out(&G.queues[i]);
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < G.nstreams; i++) {
		s[n++] = G.streams[i].s;
		for (int k = 0; k < G.streams[i].own_n; k++)
			s[n++] = G.streams[i].own_s[k];
		if (G.streams[i].kern) {
			ks[nk] = G.streams[i].kern;
			pthread_mutex_lock(&ks[nk]->lock);
			kn[nk] = ks[nk]->next - 1;
			pthread_mutex_unlock(&ks[nk]->lock);
			nk++;
		}
	}
	pthread_mutex_unlock(&G.imp_lock);
	/* each stream once: a stream handle names its context, any thread may wait on it */
	for (int i = 0; i < n; i++)
		G.cu.StreamSynchronize(s[i]);
	for (int i = 0; i < nk; i++)
		kern_wait(ks[i], kn[i]);
}

void sfgpu_tx_free(struct sfgpu_tx *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&G.imp_lock);
	for (struct sfgpu_tx **pp = &G.txs; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	pthread_mutex_unlock(&G.imp_lock);
	int pushed;
	queue_out(t->q); /* its queued copies name its batch[]: out before it goes */
	if (t->stream)	 /* before any unmap, whatever happens below; the context's stream stays */
		G.cu.StreamSynchronize(t->stream);
	int leak = t->kern && t->kern_last && kern_wait(t->kern, t->kern_last);
	if (t->stream && tx_enter(t, 0, &pushed) == 0) {
		for (int i = 0; i < CHAN_MAX_SENDS; i++)
			if (t->ev[i])
				G.cu.EventDestroy(t->ev[i]);
		tx_leave(pushed);
	}
	pthread_mutex_lock(&G.imp_lock);
	for (int i = 0; i < t->nimp && !leak; i++) /* the kernel may still write: keep */
		import_put(t->imp[i].im);
	pthread_mutex_unlock(&G.imp_lock);
	free(t);
}
