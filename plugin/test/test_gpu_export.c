/* SPDX-License-Identifier: MIT */
/*
 * test_gpu_export.c - the GPU path's export server and its client (plugin/gpu.c), without a
 * GPU: exports are planted by hand (a memfd stands in for a cuMem POSIX fd, bytes for a legacy
 * IPC handle), then asked for over the real socket and protocol, as a sender would.
 */

#include "plugin/gpu.c"
#include "plugin/cudadrv.c"

#include <sys/mman.h>
#include <sys/stat.h>

#include "sim/test/check.h"

_Atomic(ncclDebugLogger_t) plog_fn; /* silent: no NCCL here */

static struct gexport *plant(int kind, uint64_t size)
{
	struct gexport *e = calloc(1, sizeof(*e));
	e->kind = kind;
	e->size = size;
	e->fd = -1;
	if (kind == EXPORT_FD) {
		e->fd = memfd_create("fake-cumem", MFD_CLOEXEC);
		CHECK(e->fd >= 0 && ftruncate(e->fd, (off_t)size) == 0, "memfd");
	} else {
		for (int i = 0; i < CU_IPC_HANDLE_BYTES; i++)
			e->ipc.data[i] = (unsigned char)(i * 7 + 1);
	}
	pthread_mutex_lock(&G.lock);
	e->region = ++G.next_region;
	e->refs = 1;
	e->next = G.exports;
	G.exports = e;
	pthread_mutex_unlock(&G.lock);
	return e;
}

int main(void)
{
	char why[256] = "";
	G.mode = 1;
	snprintf(G.where, sizeof(G.where), "@simfabric-gpu-test-%d", (int)getpid());
	pthread_mutex_lock(&G.lock);
	CHECK(server_start(why, sizeof(why)) == 0, "server: %s", why);
	pthread_mutex_unlock(&G.lock);

	struct gexport *fd_exp = plant(EXPORT_FD, 2 << 20);
	struct gexport *ipc_exp = plant(EXPORT_LEGACY, 1 << 20);
	struct answer a;
	int fd = -1;

	memset(&a, 0, sizeof(a));
	int rc = ask(G.where, fd_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == 0, "cuMem export: %d %s", rc, why);
	CHECK(a.kind == EXPORT_FD && a.size == 2 << 20, "kind %d size %llu", a.kind,
	      (unsigned long long)a.size);
	struct stat st;
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 2 << 20,
	      "the fd came over SCM_RIGHTS and is the same file (%d)", fd);
	if (fd >= 0)
		close(fd);

	memset(&a, 0, sizeof(a));
	rc = ask(G.where, ipc_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == 0 && a.kind == EXPORT_LEGACY && a.size == 1 << 20 && fd == -1,
	      "legacy export: %d %s", rc, why);
	CHECK(memcmp(a.ipc.data, ipc_exp->ipc.data, CU_IPC_HANDLE_BYTES) == 0,
	      "the 64-byte IPC handle travels intact");

	rc = ask(G.where, 999, &a, &fd, why, sizeof(why));
	CHECK(rc == -ENOENT && strstr(why, "refused region 999"), "unknown region: %d %s", rc,
	      why);

	rc = ask("@simfabric-gpu-nobody-here", 1, &a, &fd, why, sizeof(why));
	CHECK(rc == -ECONNREFUSED && strstr(why, "cannot reach"), "no server: %d %s", rc, why);

	/* a client that speaks nonsense gets EPROTO and the server carries on */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa;
	socklen_t alen = abstract_addr(G.where, &sa);
	CHECK(connect(s, (struct sockaddr *)&sa, alen) == 0, "connect");
	const char junk[] = "op=region\nproto=7\nregion=1\n\n";
	CHECK(write(s, junk, sizeof(junk) - 1) == (ssize_t)sizeof(junk) - 1, "write");
	char buf[256] = "";
	ssize_t n = read(s, buf, sizeof(buf) - 1);
	CHECK(n > 0 && strstr(buf, "errno=71"), "a wrong proto version is refused: '%s'", buf);
	close(s);
	rc = ask(G.where, fd_exp->region, &a, &fd, why, sizeof(why));
	CHECK(rc == 0, "still serving after a bad client: %s", why);
	if (fd >= 0)
		close(fd);

	sfgpu_unregister(ipc_exp->region);
	rc = ask(G.where, 2, &a, &fd, why, sizeof(why));
	CHECK(rc == -ENOENT, "an unregistered region is gone: %d", rc);

	if (failures) {
		fprintf(stderr, "test_gpu_export: %d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("test_gpu_export: %d checks passed\n", checks);
	return 0;
}
