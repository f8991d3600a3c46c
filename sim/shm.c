/* SPDX-License-Identifier: MIT */
/*
 * shm.c - the daemon's shared regions: see shm.h.
 */
#include "sim/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int shm_sealed(const char *name, size_t len, void **base, const char **step)
{
	*base = MAP_FAILED;
	*step = "memfd_create";
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	*step = "fchmod 0600";
	if (fchmod(fd, 0600) < 0)
		goto fail;
	*step = "ftruncate";
	if (ftruncate(fd, (off_t)len) < 0)
		goto fail;
	*step = "sealing";
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	*step = "mmap";
	*base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*base != MAP_FAILED)
		return fd;
fail:;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}
