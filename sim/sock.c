/* SPDX-License-Identifier: MIT */
/*
 * sock.c - the daemon's listening socket file. See sock.h.
 */
#include "sim/sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sim/core/ctl.h"
#include "sim/log.h"

static int check_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(dir, &st) < 0) {
		if (errno != ENOENT) {
			snprintf(err, errlen, "socket directory %s: %s", dir, strerror(errno));
			return -errno;
		}
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create socket directory %s: %s", dir,
				 strerror(errno));
			return -errno;
		}
	}
	/* The clients' rule too (lstat: a symlinked directory can be swapped under us). */
	return ctl_check_dir(dir, err, errlen);
}

/* Hold PATH.lock, so two daemons never both decide a socket is stale. */
static int take_lock(struct srv_sock *sk, char *err, size_t errlen)
{
	for (int tries = 0; tries < 5; tries++) {
		int fd = open(sk->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			snprintf(err, errlen, "cannot open lock file %s: %s", sk->lock_path,
				 strerror(errno));
			return -errno;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			close(fd);
			if (e == EWOULDBLOCK) {
				snprintf(err, errlen,
					 "simfabricd is already running at %s (%s is locked)",
					 sk->path, sk->lock_path);
				return -EADDRINUSE;
			}
			snprintf(err, errlen, "cannot lock %s: %s", sk->lock_path, strerror(e));
			return -e;
		}
		/* The previous owner may have unlinked it between our open and flock. */
		struct stat a, b;
		if (fstat(fd, &a) == 0 && stat(sk->lock_path, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino) {
			sk->lock_fd = fd;
			return 0;
		}
		close(fd);
	}
	snprintf(err, errlen, "cannot lock %s: it keeps being replaced", sk->lock_path);
	return -EAGAIN;
}

int srv_sock_open(struct srv_sock *sk, const char *path, char *err, size_t errlen)
{
	int rc;
	sk->fd = sk->lock_fd = -1;
	sk->path[0] = sk->lock_path[0] = 0;
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(sk->path)) {
		snprintf(err, errlen, "socket path '%s' is %zu bytes; it must be 1..%zu", path, len,
			 sizeof(sk->path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sk->path, path, len + 1);
	snprintf(sk->lock_path, sizeof(sk->lock_path), "%s.lock", path);

	char dir[sizeof(sk->path)];
	ctl_socket_dir(path, dir, sizeof(dir));
	if ((rc = check_dir(dir, err, errlen)) || (rc = take_lock(sk, err, errlen)))
		goto fail;

	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			rc = -EEXIST;
			goto fail;
		}
		int fd = ctl_connect(path);
		if (fd >= 0) {
			close(fd);
			snprintf(err, errlen, "simfabricd is already running at %s", path);
			rc = -EADDRINUSE;
			goto fail;
		}
		if (fd != -ECONNREFUSED && fd != -ENOENT) {
			snprintf(err, errlen, "cannot check the existing socket %s: %s", path,
				 strerror(-fd));
			rc = fd;
			goto fail;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			snprintf(err, errlen, "cannot remove the stale socket %s: %s", path,
				 strerror(errno));
			rc = -errno;
			goto fail;
		}
		log_info("removed a stale socket at %s", path);
	}

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		rc = -errno;
		goto fail;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, len + 1);
	mode_t old = umask(077);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (b < 0) {
		snprintf(err, errlen, "cannot bind %s: %s", path, strerror(e));
		close(fd);
		rc = -e;
		goto fail;
	}
	if (listen(fd, SOMAXCONN) < 0) {
		e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		close(fd);
		unlink(path);
		rc = -e;
		goto fail;
	}
	sk->fd = fd;
	return 0;
fail:
	srv_sock_close(sk);
	return rc;
}

void srv_sock_close(struct srv_sock *sk)
{
	if (sk->fd >= 0) {
		unlink(sk->path);
		close(sk->fd);
		sk->fd = -1;
	}
	if (sk->lock_fd >= 0) {
		unlink(sk->lock_path);
		close(sk->lock_fd);
		sk->lock_fd = -1;
	}
}
