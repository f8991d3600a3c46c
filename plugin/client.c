/* SPDX-License-Identifier: MIT */
/*
 * client.c - the plugin's side of the control protocol: connections, the
 * session and its hello. See client.h.
 */
#include "plugin/client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "plugin/gpu.h"
#include "plugin/plog.h"
#include "sim/core/fstate.h"

/* ---- one connection ------------------------------------------------------ */

int sfc_conn_open(struct sfc_conn *c, const char *path)
{
	return sfc_conn_open_why(c, path, NULL, 0);
}

int sfc_conn_open_why(struct sfc_conn *c, const char *path, char *why, size_t whylen)
{
	c->fd = -1;
	c->parser = NULL;
	/* Only a daemon of our own uid, in a directory only we control, may see our traffic. */
	int fd = ctl_connect_daemon(path, why, whylen);
	if (fd < 0)
		return fd;
	/* Non-blocking, so that every wait is ctl's bounded poll(), never a stuck read. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	c->parser = ctl_parser_new();
	if (!c->parser) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	return 0;
}

void sfc_conn_close(struct sfc_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	ctl_parser_free(c->parser);
	c->fd = -1;
	c->parser = NULL;
}

int sfc_conn_send(struct sfc_conn *c, const struct ctl_msg *m, int fd)
{
	if (c->fd < 0)
		return -EBADF;
	return ctl_send(c->fd, m, fd, SFC_IO_TIMEOUT_MS);
}

int sfc_conn_recv(struct sfc_conn *c, struct ctl_msg **out, int timeout_ms)
{
	*out = NULL;
	if (c->fd < 0 || !c->parser)
		return -EBADF;
	return ctl_recv(c->fd, c->parser, out, timeout_ms);
}

int sfc_is_event(const struct ctl_msg *m)
{
	return m->n > 0 && strcmp(m->kv[0].key, "op") == 0;
}

int sfc_reply_errno(const struct ctl_msg *m, const char **text)
{
	const char *t = ctl_get(m, "error");
	*text = t ? t : "";
	int e;
	if (ctl_get_int(m, "errno", 0, 4095, &e) != 0)
		return -EPROTO;
	return e;
}

int sfc_fd_hup(int fd)
{
	if (fd < 0)
		return 1;
	/* Ask for nothing readable: a reply waiting for its requester must not count. */
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	int rc = poll(&p, 1, 0);
	if (rc < 0)
		return 0; /* EINTR or ENOMEM: no news; the next check will tell */
	return (p.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) != 0;
}

/* ---- the session ----------------------------------------------------------- */

static void copy_name(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* Wait for the next reply on c (skipping any event), within SFC_IO_TIMEOUT_MS. */
static int wait_reply(struct sfc_conn *c, struct ctl_msg **out)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= SFC_IO_TIMEOUT_MS)
			return -ETIMEDOUT;
		int rc = sfc_conn_recv(c, out, SFC_IO_TIMEOUT_MS - (int)ms);
		if (rc)
			return rc;
		if (!sfc_is_event(*out))
			return 0;
		PTRACE(NCCL_NET, "ignoring event op=%s on the session", ctl_get(*out, "op"));
		ctl_msg_free(*out);
		*out = NULL;
	}
}

/* Fill s from a hello reply; -EPROTO with why on a missing or bad key. */
static int parse_hello(struct sfc_session *s, const struct ctl_msg *r, char *why, size_t whylen)
{
	const char *v;
	char key[CTL_KEY_MAX + 1];
	uint64_t u;

	copy_name(s->fabric, sizeof(s->fabric), ctl_get(r, "fabric"));
	v = ctl_get(r, "instance");
	if (!v || !*v) {
		snprintf(why, whylen, "hello reply has no instance token");
		return -EPROTO;
	}
	copy_name(s->instance_text, sizeof(s->instance_text), v);
	char *end;
	errno = 0;
	s->instance = strtoull(v, &end, 16); /* a hex token, with or without 0x */
	if (errno || *end) {
		snprintf(why, whylen, "hello reply has a bad instance token '%s'", v);
		return -EPROTO;
	}
	/* A daemon that cannot see our pid (another pid namespace) knows our listen and connect
	 * connections by this token only; an older daemon gives none and wants none. */
	if (ctl_get(r, "session") && ctl_get_u64(r, "session", &s->token) != 0) {
		snprintf(why, whylen, "hello reply has a bad session token '%s'",
			 ctl_get(r, "session"));
		return -EPROTO;
	}
	v = ctl_get(r, "node");
	if (v && *v)
		copy_name(s->node, sizeof(s->node), v);
	if (ctl_get_int(r, "node_id", 0, 1 << 30, &s->node_id) != 0)
		s->node_id = 0;
	if (ctl_get_u64(r, "conn_mem", &u) == 0)
		s->conn_mem = u;
	int n;
	if (ctl_get_int(r, "nics", 0, 1 << 20, &n) != 0) {
		snprintf(why, whylen, "hello reply has no valid nics count");
		return -EPROTO;
	}
	if (n > SFC_MAX_NICS) {
		PTRACE(NCCL_NET | NCCL_INIT, "the daemon reports %d NICs; using the first %d", n,
		       SFC_MAX_NICS);
		n = SFC_MAX_NICS;
	}
	for (int i = 0; i < n; i++) {
		struct sfc_nic *nic = &s->nics[i];
		snprintf(key, sizeof(key), "nic.%d.name", i);
		v = ctl_get(r, key);
		if (!v || !*v) {
			snprintf(why, whylen, "hello reply has no %s", key);
			return -EPROTO;
		}
		copy_name(nic->name, sizeof(nic->name), v);
		snprintf(key, sizeof(key), "nic.%d.speed_mbps", i);
		if (ctl_get_int(r, key, 0, 1 << 30, &nic->speed_mbps) != 0)
			nic->speed_mbps = 0; /* NCCL reads <= 0 as 10 Gb/s */
		snprintf(key, sizeof(key), "nic.%d.latency_ns", i);
		if (ctl_get_u64(r, key, &nic->latency_ns) != 0)
			nic->latency_ns = 0;
		snprintf(key, sizeof(key), "nic.%d.guid", i);
		if (ctl_get_u64(r, key, &nic->guid) != 0)
			/* Unique per node and NIC, so NCCL never merges two ports' bandwidth. */
			nic->guid = ((uint64_t)(uint32_t)s->node_id << 16) | (uint64_t)i;
	}
	s->nnics = n;
	return 0;
}

/*
 * A modelled fabric comes with its shared state: every sender reserves its
 * messages' paths there (sim/fstate.h). The ideal fabric sends none.
 */
static int map_fabric(struct sfc_session *s, struct ctl_msg *r, char *why, size_t whylen)
{
	uint64_t len;
	if (ctl_get_u64(r, "fabric_bytes", &len) != 0)
		return 0;
	if (r->fd < 0 || len == 0 || len > (1ull << 32)) {
		snprintf(why, whylen, "hello reply announces %llu bytes of fabric state but %s",
			 (unsigned long long)len, r->fd < 0 ? "carries no memfd" : "the size is bad");
		return -EPROTO;
	}
	void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, 0);
	if (base == MAP_FAILED) {
		snprintf(why, whylen, "mmap of the fabric state (%llu bytes): %s",
			 (unsigned long long)len, strerror(errno));
		return -errno;
	}
	int rc = fst_view_new(base, len, &s->fab);
	if (rc == -EPROTONOSUPPORT) /* the header is there: fst_check read it */
		snprintf(why, whylen,
			 "the fabric state has layout version %u, this plugin's is %u: the plugin "
			 "and the daemon come from different builds of simfabric (run the daemon of "
			 "the plugin's build)",
			 ((const struct fst_shm *)base)->version, FST_VERSION);
	else if (rc)
		snprintf(why, whylen, "the fabric state fails its check: %s", strerror(-rc));
	if (rc) {
		munmap(base, len);
		return rc;
	}
	s->fab_base = base;
	s->fab_len = len;
	return 0;
}

int sfc_session_open(const char *path, const char *node, struct sfc_session **out, char *why,
		     size_t whylen, bool *connected)
{
	struct ctl_msg *m = NULL, *r = NULL;
	int rc;

	*out = NULL;
	why[0] = 0;
	*connected = false;
	struct sfc_session *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	s->conn.fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	copy_name(s->path, sizeof(s->path), path);
	copy_name(s->node, sizeof(s->node), node);

	rc = sfc_conn_open_why(&s->conn, path, why, whylen);
	if (rc)
		goto fail;
	*connected = true;
	m = ctl_msg_new();
	if (!m) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto fail;
	}
	rc = ctl_add(m, "op", "hello");
	if (!rc)
		rc = ctl_add(m, "node", node);
	if (!rc)
		rc = ctl_addf(m, "pid", "%d", (int)getpid());
	if (!rc)
		rc = ctl_add(m, "version", "1");
	if (!rc)
		rc = ctl_add(m, "client", "plugin");
	if (!rc) /* for `simfabric status` */
		rc = ctl_add(m, "gpu", sfgpu_on() ? "on" : "off");
	if (rc) {
		snprintf(why, whylen, "cannot build hello (node name '%s'): %s", node,
			 strerror(-rc));
		goto fail;
	}
	rc = sfc_conn_send(&s->conn, m, -1);
	if (rc) {
		snprintf(why, whylen, "sending hello: %s", strerror(-rc));
		goto fail;
	}
	rc = wait_reply(&s->conn, &r);
	if (rc) {
		snprintf(why, whylen, "waiting for the hello reply: %s",
			 rc == -ECONNRESET ? "the daemon closed the connection" : strerror(-rc));
		goto fail;
	}
	const char *text;
	int e = sfc_reply_errno(r, &text);
	if (e != 0) {
		rc = e < 0 ? e : -e;
		snprintf(why, whylen, "the daemon refused hello: %s%s%s",
			 e < 0 ? "reply without errno" : strerror(e), *text ? ": " : "", text);
		goto fail;
	}
	rc = parse_hello(s, r, why, whylen);
	if (rc)
		goto fail;
	rc = map_fabric(s, r, why, whylen);
	if (rc)
		goto fail;
	ctl_msg_free(m);
	ctl_msg_free(r);
	*out = s;
	return 0;
fail:
	ctl_msg_free(m);
	ctl_msg_free(r);
	sfc_session_close(s);
	return rc;
}

void sfc_session_close(struct sfc_session *s)
{
	if (!s)
		return;
	/* Closing the session is the daemon's cue that every channel end of ours is gone. */
	sfc_conn_close(&s->conn);
	/* Every comm is closed by now (the last ctx's finalize closes its objects first). */
	fst_view_free(s->fab);
	if (s->fab_base)
		munmap(s->fab_base, s->fab_len);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* Read and drop replies to earlier notices that have arrived; never waits. Under s->lock. */
static void drain_acks(struct sfc_session *s)
{
	while (s->unacked > 0) {
		struct ctl_msg *r;
		int rc = sfc_conn_recv(&s->conn, &r, 0);
		if (rc == -EAGAIN)
			return;
		if (rc) {
			atomic_store(&s->gone, 1);
			return;
		}
		if (!sfc_is_event(r)) {
			const char *text;
			int e = sfc_reply_errno(r, &text);
			if (e)
				PTRACE(NCCL_NET, "the daemon answered a notice with errno %d %s", e,
				       text);
			s->unacked--;
		}
		ctl_msg_free(r);
	}
}

int sfc_session_notify(struct sfc_session *s, const struct ctl_msg *m)
{
	if (!s)
		return -EBADF;
	if (atomic_load(&s->gone))
		return -ECONNRESET;
	pthread_mutex_lock(&s->lock);
	drain_acks(s);
	int rc = sfc_conn_send(&s->conn, m, -1);
	if (rc == 0)
		s->unacked++;
	else if (rc == -EPIPE || rc == -ECONNRESET)
		atomic_store(&s->gone, 1);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int sfc_session_gone(struct sfc_session *s)
{
	if (!s || atomic_load_explicit(&s->gone, memory_order_relaxed))
		return 1;
	if (sfc_fd_hup(s->conn.fd)) {
		atomic_store(&s->gone, 1);
		return 1;
	}
	return 0;
}

uint64_t sfc_random_id(void)
{
	uint64_t v = 0;
	ssize_t n;
	do
		n = getrandom(&v, sizeof(v), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(v)) {
		/* No getrandom (old kernel, seccomp): mix time, pid and a counter (splitmix64). */
		static _Atomic uint64_t ctr;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
		    ((uint64_t)getpid() << 40) ^ atomic_fetch_add(&ctr, 1);
		v += 0x9e3779b97f4a7c15ULL;
		v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ULL;
		v = (v ^ (v >> 27)) * 0x94d049bb133111ebULL;
		v ^= v >> 31;
	}
	return v ? v : 1;
}
