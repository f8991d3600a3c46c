/* SPDX-License-Identifier: MIT */
/*
 * sendall.h - the tools' one bounded "send every byte" loop, for their out-of-band sockets
 * (the harness's socketpairs, the NCCL job program's TCP exchange). Header-only: the two
 * programs share no library, and this is all they share.
 *
 * sendall(fd, buf, len, bound_ms, poll_ms): 0 once all len bytes are sent, -1 with errno on
 * an error (ETIMEDOUT when a non-blocking fd still had bytes to take bound_ms after the call
 * began: the bound is the whole send's, however the reader drains); EINTR is retried, a full
 * socket waited on in poll()s of poll_ms. Never raises SIGPIPE. Any thread; no state.
 */
#ifndef SF_TOOLS_SENDALL_H
#define SF_TOOLS_SENDALL_H

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <sys/socket.h>
#include <time.h>

static inline long long sendall_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int sendall(int fd, const void *buf, size_t len, int bound_ms, int poll_ms)
{
	const char *p = buf;
	long long end = sendall_now_ms() + bound_ms;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && sendall_now_ms() < end) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};

			poll(&pfd, 1, poll_ms);
			continue;
		}
		if (n == 0)
			errno = EPIPE;
		else if (n > 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			errno = ETIMEDOUT;
		return -1;
	}
	return 0;
}

#endif /* SF_TOOLS_SENDALL_H */
