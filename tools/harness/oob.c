/* SPDX-License-Identifier: MIT */
/*
 * oob.c - the out-of-band channel: one AF_UNIX stream socketpair per
 * rank, framed messages (struct oob_hdr + payload), the parent in the middle.
 *
 * A rank only ever blocks reading when it is waiting for an answer (a gather
 * reply or its next command); the one message the parent sends unasked is
 * ABORT ("another rank failed this test"), which ranks pick up without
 * blocking from their wait loops, so one failing rank stops the others at
 * once instead of at their deadlines.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tools/common/sendall.h"
#include "tools/harness/harness.h"

#define OOB_SEND_BOUND_MS 30000 /* a peer that reads nothing for this long is stuck */

static int oob_fd = -1;
static pthread_mutex_t oob_lock = PTHREAD_MUTEX_INITIALIZER;
static int oob_test = -1;
static volatile int oob_abort_rank; /* failed rank + 1, for oob_test */
static int oob_stashed_cmd = -2;    /* a RUN/QUIT read early (-2: none) */

void oob_child_init(int fd)
{
	oob_fd = fd;
}

void oob_set_test(int idx)
{
	pthread_mutex_lock(&oob_lock);
	oob_test = idx;
	oob_abort_rank = 0;
	pthread_mutex_unlock(&oob_lock);
}

int oob_write(int fd, uint32_t type, uint32_t arg, const void *data, size_t len)
{
	struct oob_hdr h = {.type = type, .arg = arg, .len = len};

	if (sendall(fd, &h, sizeof(h), OOB_SEND_BOUND_MS, 100) < 0)
		return -1;
	if (len && sendall(fd, data, len, OOB_SEND_BOUND_MS, 100) < 0)
		return -1;
	return 0;
}

void oob_child_detach(void)
{
	if (oob_fd >= 0)
		close(oob_fd);
	oob_fd = -1;
}

int oob_send(uint32_t type, uint32_t arg, const void *data, size_t len)
{
	int rc;

	pthread_mutex_lock(&oob_lock);
	rc = oob_write(oob_fd, type, arg, data, len);
	pthread_mutex_unlock(&oob_lock);
	return rc;
}

int oob_try_send(uint32_t type, uint32_t arg, const void *data, size_t len)
{
	int rc;

	if (pthread_mutex_trylock(&oob_lock) != 0)
		return -1;
	rc = oob_write(oob_fd, type, arg, data, len);
	pthread_mutex_unlock(&oob_lock);
	return rc;
}

static int oob_read_all(void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = read(oob_fd, p, len);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else {
			return -1;
		}
	}
	return 0;
}

/* Reads one message; *data is malloc'ed (NULL for an empty payload). Lock held. */
static int oob_read_msg(struct oob_hdr *h, char **data)
{
	*data = NULL;
	if (oob_read_all(h, sizeof(*h)) < 0)
		return -1;
	if (h->len > OOB_MAX_MSG)
		return -1;
	if (h->len) {
		*data = malloc(h->len);
		if (!*data || oob_read_all(*data, h->len) < 0) {
			free(*data);
			*data = NULL;
			return -1;
		}
	}
	return 0;
}

/* Handles a message that is not the one being waited for. Lock held. */
static void oob_aside(const struct oob_hdr *h, const char *data)
{
	int32_t test = -1;

	if (h->type == OOB_ABORT) {
		if (h->len >= sizeof(test))
			memcpy(&test, data, sizeof(test));
		if (test == oob_test)
			oob_abort_rank = (int)h->arg + 1;
	} else if (h->type == OOB_RUN) {
		oob_stashed_cmd = (int)h->arg;
	} else if (h->type == OOB_QUIT) {
		oob_stashed_cmd = -1;
	}
}

int oob_aborted(void)
{
	struct pollfd pfd = {.fd = oob_fd, .events = POLLIN};

	if (oob_abort_rank)
		return oob_abort_rank;
	/* Another thread is talking to the parent: it will see any ABORT itself. */
	if (pthread_mutex_trylock(&oob_lock) != 0)
		return oob_abort_rank;
	while (!oob_abort_rank && poll(&pfd, 1, 0) == 1) {
		struct oob_hdr h;
		char *data;

		if (!(pfd.revents & POLLIN) || oob_read_msg(&h, &data) < 0) {
			/* The parent is gone: nothing can complete any more. */
			oob_abort_rank = HX_MAX_RANKS + 1;
			break;
		}
		oob_aside(&h, data);
		free(data);
	}
	pthread_mutex_unlock(&oob_lock);
	return oob_abort_rank;
}

int oob_allgather(void *buf, size_t len)
{
	char *own = buf ? (char *)buf + (size_t)hx_w.rank * len : NULL;
	int rc = -1;

	pthread_mutex_lock(&oob_lock);
	if (oob_abort_rank)
		goto out;
	if (oob_write(oob_fd, OOB_GATHER, (uint32_t)oob_test, own, len) < 0) {
		oob_abort_rank = HX_MAX_RANKS + 1;
		goto out;
	}
	for (;;) {
		struct oob_hdr h;
		char *data;

		if (oob_read_msg(&h, &data) < 0) {
			oob_abort_rank = HX_MAX_RANKS + 1;
			goto out;
		}
		if (h.type == OOB_GATHER_REPLY) {
			if (h.len == len * (size_t)hx_w.nranks) {
				if (len)
					memcpy(buf, data, h.len);
				rc = 0;
			} else {
				fprintf(stderr, "[rank %d] harness: gather reply of %llu bytes, want %zu\n",
					hx_w.rank, (unsigned long long)h.len,
					len * (size_t)hx_w.nranks);
			}
			free(data);
			goto out;
		}
		oob_aside(&h, data);
		free(data);
		if (oob_abort_rank)
			goto out;
	}
out:
	pthread_mutex_unlock(&oob_lock);
	return rc;
}

int oob_barrier(void)
{
	return oob_allgather(NULL, 0);
}

int oob_next_command(void)
{
	int cmd = -1;

	pthread_mutex_lock(&oob_lock);
	while (oob_stashed_cmd == -2) {
		struct oob_hdr h;
		char *data;

		if (oob_read_msg(&h, &data) < 0) {
			oob_stashed_cmd = -1;
			break;
		}
		oob_aside(&h, data);
		free(data);
	}
	cmd = oob_stashed_cmd;
	oob_stashed_cmd = -2;
	pthread_mutex_unlock(&oob_lock);
	return cmd;
}

/* ---- parent side ------------------------------------------------------------ */

int oob_peer_read(struct oob_peer *p)
{
	for (;;) {
		ssize_t n;

		if (p->cap - p->len < 65536) {
			size_t cap = p->cap ? p->cap * 2 : 131072;
			char *nb = realloc(p->buf, cap);

			if (!nb)
				return -1;
			p->buf = nb;
			p->cap = cap;
		}
		n = read(p->fd, p->buf + p->len, p->cap - p->len);
		if (n > 0) {
			p->len += (size_t)n;
			continue;
		}
		if (n == 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return 0;
		return errno == ECONNRESET ? 1 : -1;
	}
}

/* Consumed messages are dropped from the front lazily: data stays valid until
 * the next call. */
int oob_peer_next(struct oob_peer *p, struct oob_hdr *h, char **data)
{
	static const size_t hs = sizeof(struct oob_hdr);
	size_t consumed;

	/* The previous message (if any) was left at the front; skip it now. */
	if (p->len >= hs && p->buf && ((struct oob_hdr *)p->buf)->type & 0x80000000u) {
		struct oob_hdr old;

		memcpy(&old, p->buf, hs);
		consumed = hs + old.len;
		memmove(p->buf, p->buf + consumed, p->len - consumed);
		p->len -= consumed;
	}
	if (p->len < hs)
		return 0;
	memcpy(h, p->buf, hs);
	if (h->len > OOB_MAX_MSG)
		return -1;
	if (p->len < hs + h->len)
		return 0;
	*data = p->buf + hs;
	/* Mark as handed out; children never set the top bit of a type. */
	((struct oob_hdr *)p->buf)->type |= 0x80000000u;
	return 1;
}
