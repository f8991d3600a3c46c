/* SPDX-License-Identifier: MIT */
/*
 * gpu_share.c - GPU buffers between processes: exports (regMr of GPU memory), the server that
 * hands their handles to senders of the same user, and the imports a sender maps (gpu_int.h).
 */
#include "plugin/gpu_int.h"

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

#include "plugin/plog.h"
#include "sim/core/ctl.h"

/* ---- the export server: hands a region's handle to a sender of the same user ---------- */

/*
 * The protocol is the daemon's (sim/core/ctl.h: key=value lines, an empty line, an SCM_RIGHTS fd):
 *   request  op=region  proto=1  region=<id>  secret=<the server's secret>
 *   reply    errno=0  kind=legacy|fd  size=<bytes>  ipc=<128 hex digits> | fd=1 (+ the fd)
 *            or errno=<positive errno>
 */
static const char *const kind_names[] = {[EXPORT_LEGACY] = "legacy", [EXPORT_FD] = "fd"};

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
			gpu_hex_put(ipc, e.ipc.data, sizeof(e.ipc.data));
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
int gpu_server_start(char *why, size_t cap)
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
	if (dladdr((void *)gpu_server_start, &info) && info.dli_fname)
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
		snprintf(why, cap, "the GPU data path is %s",
			 G.describe[0] ? G.describe : "off (not set up)");
		return -ENOTSUP;
	}
	unsigned int type = 0, managed = 0, legacy = 0;
	unsigned long long allowed = 0, buffer_id = 0;
	cu_result r = attr(&type, CU_PA_MEMORY_TYPE, p);
	if (r != CU_SUCCESS || type != CU_MEMTYPE_DEVICE) {
		snprintf(why, cap, "not CUDA device memory (%s)", r ? gpu_cuerr(r) : "host memory");
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
		snprintf(why, cap, "cannot find the allocation: %s", gpu_cuerr(r));
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
	int rc = gpu_server_start(why, cap);
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
			 gpu_cuerr(r));
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
struct gimport *import_new(const char *where, uint64_t region, char *why, size_t cap)
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
				 (unsigned long long)region, gpu_cuerr(r),
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
					 (unsigned long long)region, gpu_cuerr(r));
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
				 gpu_cuerr(r));
	}
	if (r != CU_SUCCESS) {
		free(im);
		return NULL;
	}
	return im;
}

/* Both ends in this process: the region is mapped here already. */
struct gimport *import_self(uint64_t region, cu_ctx app, char *why, size_t cap)
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
void import_unmap(struct gimport *im)
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
void import_put(struct gimport *im)
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

struct gimport *import_find(const char *where, uint64_t region, cu_ctx ctx)
{
	struct gimport *im = G.imports;
	while (im && !(im->region == region && im->ctx == ctx && !strcmp(im->where, where)))
		im = im->next;
	return im;
}

void tx_sync(struct sfgpu_tx *t);
