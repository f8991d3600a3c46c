/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - the control protocol's messages: a streaming parser, a builder and
 * the socket helpers both ends use. docs/control-protocol.md is the spec.
 *
 * The parser is fed arbitrary byte chunks (ctl_parser_feed) and hands out
 * complete messages; it never allocates per byte and never reads past what
 * it was given, so a fuzzer can drive it directly (sim/fuzz/fuzz_ctl.c).
 * Errors are negative errno values with a reason "line:column: text" in the
 * parser's err buffer.
 */
#ifndef SF_CTL_H
#define SF_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CTL_KEY_MAX 32
#define CTL_VALUE_MAX 1024
#define CTL_LINES_MAX 256
#define CTL_MSG_MAX (64u << 10)
#define CTL_ERR_LEN 160

struct ctl_kv {
	char key[CTL_KEY_MAX + 1];
	const char *value; /* points into the message's own storage, NUL-terminated */
};

/* One parsed message. Owns its storage; free with ctl_msg_free. */
struct ctl_msg {
	int n;
	struct ctl_kv kv[CTL_LINES_MAX];
	int fd; /* an SCM_RIGHTS descriptor that arrived with it, or -1 (owned) */
	size_t len;
	char text[CTL_MSG_MAX]; /* values live here */
};

struct ctl_msg *ctl_msg_new(void);
/* Frees the message and closes msg->fd if it is still >= 0. NULL-safe. */
void ctl_msg_free(struct ctl_msg *msg);
/* The value of key, or NULL. The first line of a request has key "op". */
const char *ctl_get(const struct ctl_msg *msg, const char *key);
/* Typed getters: 0, -ENOENT (absent) or -EINVAL (not a number in range). Hex with 0x prefix ok. */
int ctl_get_u64(const struct ctl_msg *msg, const char *key, uint64_t *out);
int ctl_get_int(const struct ctl_msg *msg, const char *key, int min, int max, int *out);
int ctl_get_i64(const struct ctl_msg *msg, const char *key, int64_t min, int64_t max,
		int64_t *out);

/* Builder: appends "key=value\n"; -E2BIG if the message would exceed the limits,
 * -EINVAL if the key or value has characters the framing forbids. */
int ctl_add(struct ctl_msg *msg, const char *key, const char *value);
int ctl_addf(struct ctl_msg *msg, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Serialise into buf (adds the final empty line). Returns bytes written or -E2BIG. */
ssize_t ctl_msg_format(const struct ctl_msg *msg, char *buf, size_t cap);

/* ---- streaming parser ---------------------------------------------------- */

struct ctl_parser;
struct ctl_parser *ctl_parser_new(void);
void ctl_parser_free(struct ctl_parser *p); /* NULL-safe; frees a half-built message */
/*
 * Feed len bytes. Consumes bytes up to the end of the first complete message
 * and returns how many it consumed (>= 0); if a message is complete, *out gets
 * it (caller frees) and the rest of the data must be fed again. Returns
 * -EINVAL on a framing error (reason in ctl_parser_error) after which the
 * parser must be freed; -ENOMEM if out of memory.
 */
ssize_t ctl_parser_feed(struct ctl_parser *p, const char *data, size_t len,
			struct ctl_msg **out);
const char *ctl_parser_error(const struct ctl_parser *p);
/* Part of a message received and not complete yet (bytes parsed or still buffered). */
bool ctl_parser_partial(const struct ctl_parser *p);

/* ---- sockets ------------------------------------------------------------- */

/*
 * Send a whole message on a blocking or non-blocking stream socket, with fd
 * (or -1) attached as SCM_RIGHTS to its first byte. Retries EINTR; on a
 * non-blocking socket it waits with poll() up to timeout_ms for room.
 * Returns 0 or a negative errno (-EPIPE/-ECONNRESET when the peer is gone,
 * -ETIMEDOUT).
 */
int ctl_send(int sock, const struct ctl_msg *msg, int fd, int timeout_ms);
/* One non-blocking sendmsg (MSG_DONTWAIT, MSG_NOSIGNAL) of buf[0..len) on sock, fd (if >= 0)
 * attached to its first byte (SCM_RIGHTS): what sendmsg returns, errno set on -1. The daemon's
 * output queue and ctl_send both write through it. */
ssize_t ctl_sendmsg_fd(int sock, const void *buf, size_t len, int fd);
/*
 * Receive one message: reads from sock (with recvmsg, collecting one
 * SCM_RIGHTS fd into msg->fd) and feeds parser p until a message completes.
 * Bytes after the message stay buffered in p for the next call.
 * timeout_ms: 0 = do not wait (returns -EAGAIN if no full message yet), -1 = wait forever.
 * Returns 0 with *out set, -EAGAIN, -ETIMEDOUT, -ECONNRESET (EOF) or another negative errno.
 */
int ctl_recv(int sock, struct ctl_parser *p, struct ctl_msg **out, int timeout_ms);

/* Default socket path: $SIMFABRIC_SOCKET, else $XDG_RUNTIME_DIR/simfabric/ctl.sock, else
 * <home>/.simfabric/ctl.sock (the euid's passwd entry, else $HOME: unlike /tmp, no other user
 * can create it first). Returns 0, -ENAMETOOLONG, or -ENOENT (no home directory). */
int ctl_default_socket(char *buf, size_t cap);
/*
 * Connect a SOCK_STREAM|SOCK_CLOEXEC Unix socket to path; returns fd or a negative errno:
 * -EPERM when another uid serves it (SO_PEERCRED).
 */
int ctl_connect(const char *path);
/*
 * A client's connect to the daemon, authenticated as ssh-agent's users would want: the socket's
 * directory must pass ctl_check_dir and the server's uid must be ours (ctl_check_peer).
 * Returns the fd, or a negative errno with the reason in err.
 */
int ctl_connect_daemon(const char *path, char *err, size_t errlen);
/* The directory of a socket path ("." for a bare name); truncated to cap. */
void ctl_socket_dir(const char *path, char *dir, size_t cap);
/* A socket directory fit to trust: lstat() says a real directory (not a symlink), owned by
 * the euid, no group/other access. 0, or a negative errno with the reason in err (may be NULL). */
int ctl_check_dir(const char *dir, char *err, size_t errlen);
/* The peer of a connected Unix socket runs as our euid (SO_PEERCRED): 0, or -EPERM naming its
 * uid and pid in err (may be NULL). */
int ctl_check_peer(int fd, char *err, size_t errlen);

#endif /* SF_CTL_H */
