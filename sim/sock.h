/* SPDX-License-Identifier: MIT */
/*
 * sock.h - the daemon's listening socket file: a private directory, a lock
 * file that says which daemon owns the path, and a stale socket cleared.
 * simfabricd opens it before the server (sim/srv.h) and hands accepted
 * connections to srv_accept.
 */
#ifndef SF_SOCK_H
#define SF_SOCK_H

#include <stddef.h>

struct srv_sock {
	int fd;	     /* listening, non-blocking, close-on-exec; -1 if none */
	int lock_fd; /* flock'd PATH.lock, held while we own PATH */
	char path[108];
	char lock_path[116];
};

/*
 * Create the parent directory (0700) if missing and check it is ours with no
 * group/other access; take PATH.lock; refuse if a daemon answers at PATH,
 * unlink it if stale; bind and listen. Returns 0, or a negative errno with a
 * message naming the path (and owner/mode found) in err.
 */
int srv_sock_open(struct srv_sock *sk, const char *path, char *err, size_t errlen);
/* Close and unlink the socket and its lock file. Safe on a failed or closed srv_sock. */
void srv_sock_close(struct srv_sock *sk);

#endif /* SF_SOCK_H */
