/* SPDX-License-Identifier: MIT */
/*
 * ctl.c - the control protocol's messages, parser and socket helpers.
 * docs/control-protocol.md is the spec; sim/core/ctl.h the API.
 *
 * The plugin links this file into NCCL processes: it keeps no static mutable
 * state, prints nothing and never raises SIGPIPE (MSG_NOSIGNAL).
 */
#include "sim/core/ctl.h"

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Bytes ctl_recv reads at once (messages are parsed straight out of it). Small, because
 * every connection has one: the plugin keeps a listen connection per pending accept. */
#define CTL_RBUF (16u << 10)
/* Descriptors received but not yet claimed by a message (two is the most a sane peer needs). */
#define CTL_FDQ 4
/* Descriptors taken from one recvmsg; any beyond the first are closed. */
#define CTL_CMSG_FDS 8

enum pstate { P_LINE, P_KEY, P_VALUE };

struct ctl_pending_fd {
	int fd;
	uint64_t first; /* ordinal of the first message that may claim it */
};

struct ctl_parser {
	struct ctl_msg *cur; /* message being built; NULL between messages */
	enum pstate st;
	unsigned line, col; /* position of the next byte in the message, 1-based */
	size_t bytes;	    /* bytes of the current message consumed so far */
	size_t klen, vlen;
	size_t vstart; /* offset in cur->text of the current value */
	bool failed;
	char err[CTL_ERR_LEN];

	/* ctl_recv's state. */
	uint64_t started; /* messages whose first byte has been parsed */
	int nfds;
	struct ctl_pending_fd fds[CTL_FDQ];
	size_t rpos, rlen;
	char rbuf[CTL_RBUF];
};

/* ---- characters ---------------------------------------------------------- */

static bool key_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static bool value_char(unsigned char c)
{
	return c >= 0x20 && c <= 0x7e;
}

/* 0, -EINVAL (empty, or a character keys cannot have) or -E2BIG (too long). */
static int check_key(const char *key, size_t *len)
{
	size_t n = 0;
	for (; key[n]; n++) {
		if (!key_char((unsigned char)key[n]))
			return -EINVAL;
		if (n == CTL_KEY_MAX)
			return -E2BIG;
	}
	if (n == 0)
		return -EINVAL;
	*len = n;
	return 0;
}

/* ---- messages ------------------------------------------------------------ */

struct ctl_msg *ctl_msg_new(void)
{
	/* Not zeroed: 80 KiB per message, and only n, len and fd need a value. */
	struct ctl_msg *m = malloc(sizeof(*m));
	if (!m)
		return NULL;
	m->n = 0;
	m->len = 0;
	m->fd = -1;
	return m;
}

void ctl_msg_free(struct ctl_msg *msg)
{
	if (!msg)
		return;
	if (msg->fd >= 0)
		close(msg->fd);
	free(msg);
}

const char *ctl_get(const struct ctl_msg *msg, const char *key)
{
	for (int i = 0; i < msg->n; i++)
		if (strcmp(msg->kv[i].key, key) == 0)
			return msg->kv[i].value;
	return NULL;
}

/* Strict unsigned number: decimal, or hex after 0x/0X; no sign, no spaces, no overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned base = 10;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		unsigned d;
		unsigned char c = (unsigned char)*s;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (base == 16 && c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -EINVAL;
		if (v > (UINT64_MAX - d) / base)
			return -EINVAL;
		v = v * base + d;
	}
	*out = v;
	return 0;
}

int ctl_get_u64(const struct ctl_msg *msg, const char *key, uint64_t *out)
{
	const char *v = ctl_get(msg, key);
	if (!v)
		return -ENOENT;
	return parse_u64(v, out);
}

int ctl_get_i64(const struct ctl_msg *msg, const char *key, int64_t min, int64_t max,
		int64_t *out)
{
	const char *v = ctl_get(msg, key);
	if (!v)
		return -ENOENT;
	bool neg = v[0] == '-';
	uint64_t u;
	if (parse_u64(v + neg, &u) || u > (uint64_t)INT64_MAX)
		return -EINVAL;
	int64_t s = neg ? -(int64_t)u : (int64_t)u;
	if (s < min || s > max)
		return -EINVAL;
	*out = s;
	return 0;
}

int ctl_get_int(const struct ctl_msg *msg, const char *key, int min, int max, int *out)
{
	int64_t s;
	int rc = ctl_get_i64(msg, key, min, max, &s);
	if (rc == 0)
		*out = (int)s;
	return rc;
}

/* Bytes the message takes on the wire, final empty line included. */
static size_t wire_size(const struct ctl_msg *msg)
{
	/* text holds each value plus its NUL, the same count as value plus '\n'. */
	size_t n = msg->len + 1;
	for (int i = 0; i < msg->n; i++)
		n += strlen(msg->kv[i].key) + 1;
	return n;
}

int ctl_add(struct ctl_msg *msg, const char *key, const char *value)
{
	size_t klen, vlen;
	if (!value)
		return -EINVAL;
	int rc = check_key(key, &klen);
	if (rc)
		return rc;
	for (vlen = 0; value[vlen]; vlen++) {
		if (vlen == CTL_VALUE_MAX)
			return -E2BIG;
		if (!value_char((unsigned char)value[vlen]))
			return -EINVAL;
	}
	if (msg->n >= CTL_LINES_MAX || wire_size(msg) + klen + 1 + vlen + 1 > CTL_MSG_MAX)
		return -E2BIG;
	struct ctl_kv *kv = &msg->kv[msg->n++];
	memcpy(kv->key, key, klen + 1);
	memcpy(msg->text + msg->len, value, vlen + 1);
	kv->value = msg->text + msg->len;
	msg->len += vlen + 1;
	return 0;
}

int ctl_addf(struct ctl_msg *msg, const char *key, const char *fmt, ...)
{
	char buf[CTL_VALUE_MAX + 2];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n > CTL_VALUE_MAX)
		return -E2BIG;
	return ctl_add(msg, key, buf);
}

ssize_t ctl_msg_format(const struct ctl_msg *msg, char *buf, size_t cap)
{
	size_t need = wire_size(msg);
	if (need > cap)
		return -E2BIG;
	char *p = buf;
	for (int i = 0; i < msg->n; i++) {
		size_t k = strlen(msg->kv[i].key), v = strlen(msg->kv[i].value);
		memcpy(p, msg->kv[i].key, k);
		p += k;
		*p++ = '=';
		memcpy(p, msg->kv[i].value, v);
		p += v;
		*p++ = '\n';
	}
	*p++ = '\n';
	return p - buf;
}

/* ---- parser -------------------------------------------------------------- */

struct ctl_parser *ctl_parser_new(void)
{
	struct ctl_parser *p = malloc(sizeof(*p));
	if (!p)
		return NULL;
	p->cur = NULL;
	p->st = P_LINE;
	p->line = p->col = 1;
	p->bytes = p->klen = p->vlen = p->vstart = 0;
	p->failed = false;
	p->err[0] = 0;
	p->started = 0;
	p->nfds = 0;
	p->rpos = p->rlen = 0;
	return p;
}

void ctl_parser_free(struct ctl_parser *p)
{
	if (!p)
		return;
	ctl_msg_free(p->cur);
	for (int i = 0; i < p->nfds; i++)
		close(p->fds[i].fd);
	free(p);
}

const char *ctl_parser_error(const struct ctl_parser *p)
{
	return p->err;
}

bool ctl_parser_partial(const struct ctl_parser *p)
{
	return p->cur != NULL || p->rpos < p->rlen;
}

/* How a byte reads in an error: 'x' if printable, else its hex value. */
static void describe(unsigned char c, char out[static 8])
{
	if (value_char(c) && c != '\'')
		snprintf(out, 8, "'%c'", c);
	else
		snprintf(out, 8, "0x%02x", c);
}

static ssize_t __attribute__((format(printf, 2, 3)))
fail(struct ctl_parser *p, const char *fmt, ...)
{
	int n = snprintf(p->err, sizeof(p->err), "%u:%u: ", p->line, p->col);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(p->err))
		vsnprintf(p->err + n, sizeof(p->err) - n, fmt, ap);
	va_end(ap);
	p->failed = true;
	ctl_msg_free(p->cur);
	p->cur = NULL;
	return -EINVAL;
}

ssize_t ctl_parser_feed(struct ctl_parser *p, const char *data, size_t len, struct ctl_msg **out)
{
	*out = NULL;
	if (p->failed)
		return -EINVAL;
	char d[8];
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)data[i];
		if (!p->cur) {
			p->cur = ctl_msg_new();
			if (!p->cur)
				return -ENOMEM;
			p->started++;
			p->st = P_LINE;
			p->line = p->col = 1;
			p->bytes = 0;
		}
		struct ctl_msg *m = p->cur;
		if (p->bytes == CTL_MSG_MAX)
			return fail(p, "message longer than %u bytes", CTL_MSG_MAX);
		switch (p->st) {
		case P_LINE:
			if (c == '\n') {
				if (m->n == 0)
					return fail(p, "empty line before any key=value line");
				*out = m;
				p->cur = NULL;
				p->bytes = 0; /* between messages: nothing partial */
				return (ssize_t)(i + 1);
			}
			if (m->n == CTL_LINES_MAX)
				return fail(p, "more than %d lines", CTL_LINES_MAX);
			p->st = P_KEY;
			p->klen = 0;
			__attribute__((fallthrough)); /* c is the key's first byte */
		case P_KEY:
			if (c == '=') {
				if (p->klen == 0)
					return fail(p, "empty key");
				m->kv[m->n].key[p->klen] = 0;
				p->st = P_VALUE;
				p->vstart = m->len;
				p->vlen = 0;
			} else if (key_char(c)) {
				if (p->klen == CTL_KEY_MAX)
					return fail(p, "key longer than %d bytes", CTL_KEY_MAX);
				m->kv[m->n].key[p->klen++] = (char)c;
			} else if (c == '\n') {
				return fail(p, "line without '='");
			} else if (c == '\r') {
				return fail(p, "carriage return in key (lines end with \\n alone)");
			} else {
				describe(c, d);
				return fail(p, "character %s in key (keys are [a-z0-9_.])", d);
			}
			break;
		case P_VALUE:
			if (c == '\n') {
				m->text[m->len++] = 0;
				m->kv[m->n].value = m->text + p->vstart;
				m->n++;
				p->st = P_LINE;
				p->line++;
				p->col = 0; /* bumped to 1 below */
			} else if (value_char(c)) {
				if (p->vlen == CTL_VALUE_MAX)
					return fail(p, "value longer than %d bytes", CTL_VALUE_MAX);
				m->text[m->len++] = (char)c;
				p->vlen++;
			} else if (c == '\r') {
				return fail(p, "carriage return in value (lines end with \\n alone)");
			} else {
				return fail(p, "%s byte 0x%02x in value",
					    c < 0x20 || c == 0x7f ? "control" : "non-ASCII", c);
			}
			break;
		}
		p->bytes++;
		p->col++;
	}
	return (ssize_t)len;
}

/* ---- descriptors that arrive with the byte stream ------------------------ */

/*
 * Linux hands SCM_RIGHTS out with the first byte of the sendmsg that carried
 * them, and ends that recvmsg there; but the same read may also return bytes
 * of earlier messages. So a descriptor read while the parser had seen
 * `started` messages belongs to a message numbered started+1 or later: the
 * first one after that which says fd=1 claims it. A later claim closes
 * anything older that nobody claimed.
 */
static void fd_arrived(struct ctl_parser *p, int fd)
{
	if (p->nfds == CTL_FDQ) {
		close(p->fds[0].fd);
		memmove(&p->fds[0], &p->fds[1], sizeof(p->fds[0]) * (CTL_FDQ - 1));
		p->nfds--;
	}
	p->fds[p->nfds].fd = fd;
	p->fds[p->nfds].first = p->started + 1;
	p->nfds++;
}

static void fd_claim(struct ctl_parser *p, struct ctl_msg *m)
{
	const char *v = ctl_get(m, "fd");
	if (!v || strcmp(v, "1") != 0)
		return;
	uint64_t ord = p->started; /* the message just completed */
	int take = -1;
	for (int i = 0; i < p->nfds && p->fds[i].first <= ord; i++)
		take = i;
	if (take < 0)
		return;
	for (int i = 0; i < take; i++)
		close(p->fds[i].fd);
	m->fd = p->fds[take].fd;
	memmove(&p->fds[0], &p->fds[take + 1], sizeof(p->fds[0]) * (p->nfds - take - 1));
	p->nfds -= take + 1;
}

/* ---- sockets ------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on sock until deadline (-1: forever). 0, -ETIMEDOUT or a negative errno. */
static int wait_fd(int sock, short events, int64_t deadline)
{
	for (;;) {
		int ms = -1;
		if (deadline >= 0) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return -ETIMEDOUT;
			ms = left > 1000000 ? 1000000 : (int)left;
		}
		struct pollfd pfd = {.fd = sock, .events = events};
		int rc = poll(&pfd, 1, ms);
		if (rc > 0)
			return 0; /* readable, writable or in error: the next call says which */
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

ssize_t ctl_sendmsg_fd(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(h), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int ctl_send(int sock, const struct ctl_msg *msg, int fd, int timeout_ms)
{
	size_t len = wire_size(msg);
	char *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ssize_t n = ctl_msg_format(msg, buf, len);
	int rc = 0;
	if (n < 0) {
		rc = (int)n;
		goto out;
	}
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	size_t off = 0;
	while (off < len) {
		/* MSG_DONTWAIT on blocking sockets too, so timeout_ms always bounds the wait. */
		ssize_t w = ctl_sendmsg_fd(sock, buf + off, len - off, off == 0 ? fd : -1);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			rc = wait_fd(sock, POLLOUT, deadline);
			if (rc)
				goto out;
			continue;
		}
		rc = w < 0 ? -errno : -EIO;
		goto out;
	}
out:
	free(buf);
	return rc;
}

/* One recvmsg into p's buffer: bytes read (> 0), 0 on EOF, or a negative errno. */
static ssize_t recv_chunk(int sock, struct ctl_parser *p)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * CTL_CMSG_FDS)];
	} cm;
	struct iovec iov = {.iov_base = p->rbuf, .iov_len = sizeof(p->rbuf)};
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cm.b,
		.msg_controllen = sizeof(cm.b),
	};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
			if (i == 0 && n > 0)
				fd_arrived(p, fd);
			else
				close(fd); /* one descriptor per message, and only with data */
		}
	}
	p->rpos = 0;
	p->rlen = (size_t)n;
	return n;
}

int ctl_recv(int sock, struct ctl_parser *p, struct ctl_msg **out, int timeout_ms)
{
	*out = NULL;
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	for (;;) {
		while (p->rpos < p->rlen) {
			struct ctl_msg *m;
			ssize_t n = ctl_parser_feed(p, p->rbuf + p->rpos, p->rlen - p->rpos, &m);
			if (n < 0)
				return (int)n;
			p->rpos += (size_t)n;
			if (m) {
				fd_claim(p, m);
				*out = m;
				return 0;
			}
		}
		if (p->failed)
			return -EINVAL;
		ssize_t n = recv_chunk(sock, p);
		if (n > 0)
			continue;
		if (n == 0)
			return -ECONNRESET; /* EOF, possibly in the middle of a message */
		if (n != -EAGAIN && n != -EWOULDBLOCK)
			return (int)n;
		if (timeout_ms == 0)
			return -EAGAIN;
		int rc = wait_fd(sock, POLLIN, deadline);
		if (rc)
			return rc;
	}
}

/*
 * The home directory of the effective uid (its passwd entry, else $HOME): a place no other
 * user can create first, unlike /tmp. The daemon and its clients of one uid agree on it
 * whatever their environments say.
 */
static int home_dir(char *buf, size_t cap)
{
	struct passwd pw, *res = NULL;
	char tmp[4096];
	const char *home = NULL;
	if (getpwuid_r(geteuid(), &pw, tmp, sizeof(tmp), &res) == 0 && res && res->pw_dir &&
	    res->pw_dir[0] == '/')
		home = res->pw_dir;
	else if (getenv("HOME") && getenv("HOME")[0] == '/')
		home = getenv("HOME");
	if (!home)
		return -ENOENT;
	int n = snprintf(buf, cap, "%s", strcmp(home, "/") == 0 ? "" : home);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int ctl_default_socket(char *buf, size_t cap)
{
	const char *env = getenv("SIMFABRIC_SOCKET");
	const char *run = getenv("XDG_RUNTIME_DIR");
	char home[512];
	int n;
	if (env && *env)
		n = snprintf(buf, cap, "%s", env);
	else if (run && *run)
		n = snprintf(buf, cap, "%s/simfabric/ctl.sock", run);
	else {
		int rc = home_dir(home, sizeof(home));
		if (rc)
			return rc;
		n = snprintf(buf, cap, "%s/.simfabric/ctl.sock", home);
	}
	/* A path that does not fit sun_path could never be bound or connected. */
	if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int ctl_check_dir(const char *dir, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(dir, &st) < 0) {
		int e = errno;
		if (err)
			snprintf(err, errlen, "socket directory %s: %s", dir, strerror(e));
		return -e;
	}
	if (S_ISLNK(st.st_mode)) {
		if (err)
			snprintf(err, errlen,
				 "socket directory %s is a symbolic link; it must be a real directory "
				 "(whoever can change the link can move the socket)",
				 dir);
		return -ELOOP;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (err)
			snprintf(err, errlen, "socket directory %s is not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		if (err)
			snprintf(err, errlen,
				 "socket directory %s is owned by uid %u with mode %04o; it must be "
				 "owned by uid %u with no group/other access (chmod 700 %s)",
				 dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
				 (unsigned)geteuid(), dir);
		return -EPERM;
	}
	return 0;
}

int ctl_check_peer(int fd, char *err, size_t errlen)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) {
		int e = errno;
		if (err)
			snprintf(err, errlen, "SO_PEERCRED: %s", strerror(e));
		return -e;
	}
	if (cr.uid != geteuid()) {
		if (err)
			snprintf(err, errlen,
				 "the socket is served by uid %u (pid %d), not by this process's uid "
				 "%u; refusing it: another user's daemon could read and change every "
				 "message",
				 (unsigned)cr.uid, (int)cr.pid, (unsigned)geteuid());
		return -EPERM;
	}
	return 0;
}

/* connect() alone, retried after EINTR. */
static int connect_path(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, len + 1);
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		int e = errno;
		close(fd);
		if (e != EINTR)
			return -e;
		/* An interrupted connect may still complete on its own: start over cleanly. */
	}
}

int ctl_connect(const char *path)
{
	int fd = connect_path(path);
	if (fd >= 0 && ctl_check_peer(fd, NULL, 0) != 0) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

void ctl_socket_dir(const char *path, char *dir, size_t cap)
{
	snprintf(dir, cap, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, cap, ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
}

int ctl_connect_daemon(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(dir)) {
		snprintf(err, errlen, "socket path '%s' is %zu bytes; it must be 1..%zu", path, len,
			 sizeof(dir) - 1);
		return len ? -ENAMETOOLONG : -EINVAL;
	}
	ctl_socket_dir(path, dir, sizeof(dir));
	int rc = ctl_check_dir(dir, err, errlen);
	if (rc)
		return rc;
	int fd = connect_path(path);
	if (fd < 0) {
		snprintf(err, errlen, "connect to %s: %s", path, strerror(-fd));
		return fd;
	}
	rc = ctl_check_peer(fd, err, errlen);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}
