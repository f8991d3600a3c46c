/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the daemon's shared regions: a memfd of len bytes, mode 0600, sealed so that no
 * client can shrink or grow it under another's mapping (SIGBUS), mapped read-write here. A
 * channel (srv_reg.c) and a modelled fabric's state (fabmon.c) are made this way; their
 * clients get the memfd with SCM_RIGHTS and map it themselves.
 */
#ifndef SF_SHM_H
#define SF_SHM_H

#include <stddef.h>

/*
 * The memfd (named name, for /proc), *base its mapping; or -1 with errno set, *step the call
 * that failed ("memfd_create", "fchmod 0600", "ftruncate", "sealing", "mmap") and nothing left
 * open or mapped (*base is MAP_FAILED).
 */
int shm_sealed(const char *name, size_t len, void **base, const char **step);

#endif /* SF_SHM_H */
