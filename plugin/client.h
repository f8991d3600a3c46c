/* SPDX-License-Identifier: MIT */
/*
 * client.h - the plugin's side of the control protocol (docs/control-protocol.md).
 *
 * Two things live here:
 *  - struct sfc_conn: one non-blocking Unix-socket connection to simfabricd
 *    with its streaming parser. listen and connect each open their own.
 *  - struct sfc_session: the process's session connection (op=hello), which
 *    holds the fabric's description (instance token, NICs) and carries the
 *    close notices. Its lifetime is the daemon's view of this process, so the
 *    plugin keeps exactly one, opened at the first init and closed at the
 *    last finalize.
 *
 * Nothing here blocks without a bound: every wait is a poll() of at most
 * SFC_IO_TIMEOUT_MS, so a hung daemon cannot hang the plugin. Errors are
 * negative errno values; functions that can fail for a reason worth a log
 * line fill a caller's `why` buffer. Nothing here logs on its own except
 * TRACE detail.
 */
#ifndef SF_CLIENT_H
#define SF_CLIENT_H

struct fst_view;

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/core/ctl.h"

#define SFC_IO_TIMEOUT_MS 2000 /* bound on any request/reply wait */
#define SFC_MAX_NICS 64
#define SFC_NAME_MAX 256 /* node, NIC and fabric names, NUL included */
#define SFC_WHY_LEN 256

struct sfc_conn {
	int fd; /* -1 when closed */
	struct ctl_parser *parser;
};

/* Connect to the daemon at path (non-blocking afterwards). 0 or a negative errno: -EPERM when
 * its directory or its server fails the checks of ctl_connect_daemon. */
int sfc_conn_open(struct sfc_conn *c, const char *path);
/* The same, with the reason for a failure in why (may be NULL). */
int sfc_conn_open_why(struct sfc_conn *c, const char *path, char *why, size_t whylen);
/* Close the socket and free the parser; safe on a closed or zeroed-then-fd=-1 conn. */
void sfc_conn_close(struct sfc_conn *c);
/* Send a message (and fd, or -1) within SFC_IO_TIMEOUT_MS. */
int sfc_conn_send(struct sfc_conn *c, const struct ctl_msg *m, int fd);
/* Receive one message, waiting at most timeout_ms (0: don't wait: -EAGAIN). */
int sfc_conn_recv(struct sfc_conn *c, struct ctl_msg **out, int timeout_ms);

/* 1 if the message is an event pushed by the daemon (first key "op"), 0 if a reply. */
int sfc_is_event(const struct ctl_msg *m);
/* A reply's errno line: 0, a positive errno, or -EPROTO when the line is missing or bad.
 * *text gets the reply's error= text, or "" (never NULL). */
int sfc_reply_errno(const struct ctl_msg *m, const char **text);

/* 1 if the peer of this socket hung up or the socket is in error; one poll(), no wait. */
int sfc_fd_hup(int fd);

struct sfc_nic {
	char name[SFC_NAME_MAX];
	int speed_mbps;
	uint64_t latency_ns;
	uint64_t guid;
};

struct sfc_session {
	pthread_mutex_t lock; /* serialises use of conn (request/reply, notices) */
	struct sfc_conn conn;
	_Atomic int gone; /* the daemon closed the session (sticky) */
	int unacked;	  /* replies to notices not read yet (under lock) */
	char path[SFC_NAME_MAX];
	char node[SFC_NAME_MAX]; /* our node, as the daemon named it */
	char fabric[SFC_NAME_MAX];
	char instance_text[64]; /* as sent: shown in logs */
	uint64_t instance;	/* the daemon run's token, checked in handles */
	uint64_t token;		/* our session's, sent with listen and connect; 0: none given */
	int node_id;
	uint64_t conn_mem;
	int nnics;
	struct sfc_nic nics[SFC_MAX_NICS];
	/* A modelled fabric's shared state (fabric_bytes and an fd with hello), else NULL. */
	void *fab_base;
	size_t fab_len;
	struct fst_view *fab;
};

/*
 * Open the session: connect to path and say hello as node. On failure
 * returns a negative errno with a reason in why (the daemon's error text, a
 * missing key, ...). *connected says whether the connect itself succeeded: when it did not,
 * -ECONNREFUSED/-ENOENT mean no daemon listens there; when it did, the errno is the daemon's.
 */
int sfc_session_open(const char *path, const char *node, struct sfc_session **out, char *why,
		     size_t whylen, bool *connected);
/* Close the session connection and free it. NULL-safe. */
void sfc_session_close(struct sfc_session *s);
/*
 * Send a notice (e.g. op=close) on the session without waiting for its reply;
 * replies are read and dropped later, without blocking. A gone daemon is not
 * an error the caller needs to act on; returns 0 or a negative errno anyway.
 */
int sfc_session_notify(struct sfc_session *s, const struct ctl_msg *m);
/* 1 if the daemon has gone away (sticky once seen): one poll(), no wait, no lock. */
int sfc_session_gone(struct sfc_session *s);

/* A random 64-bit id (getrandom; never 0). */
uint64_t sfc_random_id(void);

#endif /* SF_CLIENT_H */
