/* SPDX-License-Identifier: MIT */
/*
 * launched.c - --launched: one rank per process, started by a launcher
 * (torchrun, srun, mpirun, simfabric launch) instead of forked by the harness.
 *
 * The rank and the world size come from the launcher's environment; the
 * out-of-band channel is TCP to MASTER_ADDR:MASTER_PORT, where rank 0's
 * process serves: it forks its own rank and stays the parent of the forked
 * mode (main.c's relay, timeouts and report), with one TCP connection per rank
 * where it would have a socketpair. Other ranks only connect. A rank joins
 * with its rank, the harness version and a hash of its command line, so a
 * rank started with different options is refused by name instead of running
 * a different test. Issue 18: the CPU test of a fabric spread over hosts.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim/core/version.h"
#include "tools/harness/harness.h"

#define LX_JOIN 0x4c584a31u    /* "1JXL": a rank's first message, arg = its rank */
#define LX_WELCOME 0x4c585731u /* the answer: the run's comm_id, or a refusal text */

struct lx_join {
	uint64_t args_hash;
	char version[32];
};

static const char *lx_addr, *lx_port;
static uint64_t lx_args_hash;

/* The first of the launcher variables that is set, and its name. */
static const char *lx_getenv(const char *const *names, const char **which)
{
	for (; *names; names++) {
		const char *v = getenv(*names);

		if (v) {
			*which = *names;
			return v;
		}
	}
	return NULL;
}

static long lx_number(const char *name, const char *v, long lo, long hi)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (!*v || *end || errno || n < lo || n > hi) {
		fprintf(stderr,
			"simfabric-harness: --launched: %s='%s' is not a number in %ld..%ld (see "
			"--help)\n",
			name, v, lo, hi);
		exit(2);
	}
	return n;
}

static void lx_missing(const char *what)
{
	fprintf(stderr, "simfabric-harness: --launched: %s (see --help)\n", what);
	exit(2);
}

/* FNV-1a over the arguments: every rank must run the same tests with the same options. Where a
 * rank writes its report may differ (--json: each host's launcher points it into its own run
 * directory). */
static uint64_t lx_hash_args(int argc, char **argv)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	int i;

	for (i = 1; i < argc; i++) {
		const unsigned char *p = (const unsigned char *)argv[i];

		if (!strncmp(argv[i], "--json=", 7))
			continue;
		if (!strcmp(argv[i], "--json")) {
			i++;
			continue;
		}

		do {
			h = (h ^ *p) * 0x100000001b3ULL;
		} while (*p++);
	}
	return h;
}

int lx_env(int argc, char **argv, int *rank, int *nranks)
{
	/* torchrun's names first; then Open MPI's and Slurm's, which a launcher gives instead. */
	static const char *const rank_names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID",
						 NULL};
	static const char *const size_names[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
						 "SLURM_NTASKS", NULL};
	const char *rn = NULL, *sn = NULL, *rv, *sv;
	int i;

	rv = lx_getenv(rank_names, &rn);
	if (!rv)
		lx_missing("no rank in the environment: set RANK (torchrun), OMPI_COMM_WORLD_RANK "
			   "(mpirun) or SLURM_PROCID (srun)");
	/* The size from the same launcher as the rank: mixing two launchers' variables is wrong. */
	for (i = 0; rank_names[i] && strcmp(rank_names[i], rn); i++)
		;
	sn = size_names[i];
	sv = getenv(sn);
	if (!sv) {
		fprintf(stderr,
			"simfabric-harness: --launched: %s is not set (%s=%s is) (see --help)\n",
			sn, rn, rv);
		exit(2);
	}
	*nranks = (int)lx_number(sn, sv, 2, HX_MAX_RANKS);
	*rank = (int)lx_number(rn, rv, 0, *nranks - 1);
	lx_addr = getenv("MASTER_ADDR");
	lx_port = getenv("MASTER_PORT");
	if (!lx_addr || !*lx_addr)
		lx_missing("MASTER_ADDR is not set: it names the host of rank 0, which serves the "
			   "out-of-band exchange");
	if (!lx_port)
		lx_missing("MASTER_PORT is not set: rank 0 serves the out-of-band exchange there");
	lx_number("MASTER_PORT", lx_port, 1, 65535);
	lx_args_hash = lx_hash_args(argc, argv);
	return 0;
}

static struct addrinfo *lx_resolve(void)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
	int rc = getaddrinfo(lx_addr, lx_port, &hints, &ai);

	if (rc != 0) {
		fprintf(stderr,
			"simfabric-harness: --launched: MASTER_ADDR='%s': %s (see --help)\n",
			lx_addr, gai_strerror(rc));
		exit(2);
	}
	return ai;
}

static int lx_read_all(int fd, void *buf, size_t len, double t_end)
{
	char *p = buf;

	while (len) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (hx_now() > t_end)
			return -1;
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		n = read(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		} else if (n == 0 || errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

/* Connects to rank 0 (retrying while it starts) and joins. Returns the fd. */
static int lx_connect(int rank, uint64_t *comm_id)
{
	struct addrinfo *ai = lx_resolve(), *a;
	double t_end = hx_now() + hx_opt.timeout;
	struct lx_join j;
	struct oob_hdr h;
	char why[200] = "";
	int fd = -1, one = 1;

	while (fd < 0) {
		for (a = ai; a && fd < 0; a = a->ai_next) {
			fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
			if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
				snprintf(why, sizeof(why), "%s", strerror(errno));
				close(fd);
				fd = -1;
			}
		}
		if (fd >= 0)
			break;
		if (hx_now() > t_end) {
			fprintf(stderr,
				"[rank %d] harness: --launched: cannot reach rank 0 at "
				"MASTER_ADDR=%s MASTER_PORT=%s within --timeout %g s: %s\n",
				rank, lx_addr, lx_port, hx_opt.timeout, why);
			exit(1);
		}
		hx_sleep(0.05);
	}
	freeaddrinfo(ai);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&j, 0, sizeof(j));
	j.args_hash = lx_args_hash;
	snprintf(j.version, sizeof(j.version), "%s", SF_VERSION);
	if (oob_write(fd, LX_JOIN, (uint32_t)rank, &j, sizeof(j)) < 0 ||
	    lx_read_all(fd, &h, sizeof(h), t_end) < 0 || h.type != LX_WELCOME || h.len > 4096) {
		fprintf(stderr,
			"[rank %d] harness: --launched: rank 0 at %s:%s closed the connection "
			"before "
			"the run began (its error says why)\n",
			rank, lx_addr, lx_port);
		exit(1);
	}
	if (h.arg != 0) { /* refused: the payload says why */
		char msg[4097] = "";

		lx_read_all(fd, msg, h.len, t_end);
		fprintf(stderr, "[rank %d] harness: --launched: rank 0 refused us: %s\n", rank,
			msg);
		exit(1);
	}
	if (h.len != sizeof(*comm_id) || lx_read_all(fd, comm_id, sizeof(*comm_id), t_end) < 0) {
		fprintf(stderr, "[rank %d] harness: --launched: a garbled welcome from rank 0\n",
			rank);
		exit(1);
	}
	return fd;
}

static void lx_refuse(int fd, const char *msg)
{
	oob_write(fd, LX_WELCOME, 1, msg, strlen(msg));
}

/* Rank 0's server: accepts one joined connection per rank into fds[]. 0, or -1 with a line said. */
static int lx_serve(int lfd, int nranks, int *fds)
{
	double t_end = hx_now() + hx_opt.timeout;
	int joined = 0, i;

	for (i = 0; i < nranks; i++)
		fds[i] = -1;
	while (joined < nranks) {
		struct pollfd pfd = {.fd = lfd, .events = POLLIN};
		struct lx_join j;
		struct oob_hdr h;
		char msg[200];
		int fd, r;

		if (hx_now() > t_end) {
			char miss[200] = "";
			size_t o = 0;

			for (i = 0; i < nranks && o < sizeof(miss) - 8; i++)
				if (fds[i] < 0)
					o += (size_t)snprintf(miss + o, sizeof(miss) - o, " %d", i);
			fprintf(stderr,
				"harness: --launched: %d of %d ranks joined within --timeout %g s; "
				"missing:%s\n",
				joined, nranks, hx_opt.timeout, miss);
			return -1;
		}
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		/* A connection that is not a rank (a port scan) must not hold the others up long. */
		if (lx_read_all(fd, &h, sizeof(h), hx_now() + 5) < 0 || h.type != LX_JOIN ||
		    h.len != sizeof(j) || lx_read_all(fd, &j, sizeof(j), hx_now() + 5) < 0) {
			close(fd);
			continue;
		}
		r = (int)h.arg;
		j.version[sizeof(j.version) - 1] = 0;
		if (r < 0 || r >= nranks) {
			snprintf(msg, sizeof(msg), "rank %d is not in 0..%d (WORLD_SIZE %d here)",
				 r, nranks - 1, nranks);
		} else if (fds[r] >= 0) {
			snprintf(msg, sizeof(msg), "rank %d joined twice", r);
		} else if (strcmp(j.version, SF_VERSION) != 0) {
			snprintf(msg, sizeof(msg), "rank %d runs harness %s, rank 0 runs %s", r,
				 j.version, SF_VERSION);
		} else if (j.args_hash != lx_args_hash) {
			snprintf(msg, sizeof(msg),
				 "rank %d was started with other options than rank 0", r);
		} else {
			fds[r] = fd;
			joined++;
			continue;
		}
		fprintf(stderr, "harness: --launched: refused a rank: %s\n", msg);
		lx_refuse(fd, msg);
		close(fd);
		return -1;
	}
	return 0;
}

int lx_start(int rank, int nranks, int *fds, pid_t *pid0)
{
	struct addrinfo *ai, *a;
	int lfd = -1, one = 1, i, fd;
	char why[200] = "";
	uint64_t id;
	pid_t pid;

	if (rank != 0) {
		fd = lx_connect(rank, &hx_opt.comm_id);
		fds[0] = fd;
		return 0;
	}
	ai = lx_resolve();
	for (a = ai; a && lfd < 0; a = a->ai_next) {
		lfd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (lfd < 0)
			continue;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(lfd, a->ai_addr, a->ai_addrlen) < 0 || listen(lfd, HX_MAX_RANKS) < 0) {
			snprintf(why, sizeof(why), "%s", strerror(errno));
			close(lfd);
			lfd = -1;
		}
	}
	freeaddrinfo(ai);
	if (lfd < 0) {
		fprintf(stderr,
			"harness: --launched: rank 0 cannot serve at MASTER_ADDR=%s "
			"MASTER_PORT=%s: "
			"%s\n",
			lx_addr, lx_port, why);
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	/* Rank 0 itself joins over TCP like every other rank: one code path to test. */
	pid = fork();
	if (pid < 0) {
		perror("harness: fork");
		close(lfd);
		return -1;
	}
	if (pid == 0) {
		close(lfd);
		fds[0] = lx_connect(0, &hx_opt.comm_id);
		return 0;
	}
	*pid0 = pid;
	if (lx_serve(lfd, nranks, fds) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(lfd);
		for (i = 0; i < nranks; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		return -1;
	}
	close(lfd);
	id = hx_opt.comm_id;
	for (i = 0; i < nranks; i++) {
		setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		oob_write(fds[i], LX_WELCOME, 0, &id, sizeof(id));
	}
	return 1;
}
