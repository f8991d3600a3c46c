/* SPDX-License-Identifier: MIT */
/*
 * mpskill.c - SIGKILL of an MPS client after MPS's terminate_client (mpskill.h).
 */
#include "sim/mpskill.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MPS_DEFAULT_PIPE_DIR "/tmp/nvidia-mps" /* MPS's own default */
#define MPS_CTL "nvidia-cuda-mps-control"
#define ENV_MAX (1 << 20)

int mpskill_pipe_dir(const char *env, size_t len, char *out, size_t cap)
{
	static const char key[] = "CUDA_MPS_PIPE_DIRECTORY=";
	const char *v = NULL;
	for (size_t i = 0; i < len;) {
		const char *e = env + i;
		size_t n = strnlen(e, len - i);
		if (n >= sizeof(key) - 1 && !memcmp(e, key, sizeof(key) - 1)) {
			v = e + sizeof(key) - 1;
			if (snprintf(out, cap, "%.*s", (int)(n - (sizeof(key) - 1)), v) >= (int)cap)
				return -ENAMETOOLONG;
		}
		i += n + 1;
	}
	if (!v)
		snprintf(out, cap, "%s", MPS_DEFAULT_PIPE_DIR);
	return v != NULL;
}

/* The process's environment as it was started: len bytes into a malloc'd buffer, or NULL. */
static char *read_environ(pid_t pid, size_t *len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *buf = malloc(ENV_MAX);
	size_t n = 0;
	ssize_t r;
	while (buf && n < ENV_MAX && (r = read(fd, buf + n, ENV_MAX - n)) > 0)
		n += (size_t)r;
	close(fd);
	*len = n;
	return buf;
}

/* Is dir/control a socket (MPS's control is up there)? */
static int control_up(const char *dir)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/control", dir);
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* ---- the helper (a detached grandchild of the daemon) --------------------------------------- */

static pid_t victim;
static char late[160]; /* on_alarm's line, made before the alarm is set (no snprintf there) */
static int late_len;

static void on_alarm(int sig)
{
	(void)sig;
	ssize_t w = write(2, late, (size_t)late_len);
	(void)w;
	kill(victim, SIGKILL);
	_exit(0);
}

static void say(const char *what)
{
	char line[1200];
	int n = snprintf(line, sizeof(line), "simfabricd: mps: pid %d: %s\n", (int)victim, what);
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	ssize_t w = write(2, line, (size_t)n);
	(void)w;
}

/*
 * Run MPS's control with cmd on its stdin; its stdout into out (NUL-terminated). 0 or -1.
 * stopped: the victim is stopped and cmd needs MPS to end its work; if MPS has not answered
 * after MPSKILL_STOPPED_MS, the victim is let run (SIGCONT), in case MPS needs the client to
 * take part (not known: MPS's documentation does not say), and the log says so.
 */
static int run_ctl(const char *dir, const char *cmd, char *out, size_t cap, int stopped)
{
	int in[2], res[2];
	out[0] = 0;
	if (pipe(in) || pipe(res))
		return -1;
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		dup2(in[0], 0);
		dup2(res[1], 1);
		close(in[1]);
		close(res[0]);
		setenv("CUDA_MPS_PIPE_DIRECTORY", dir, 1);
		execlp(MPS_CTL, MPS_CTL, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(res[1]);
	ssize_t w = write(in[1], cmd, strlen(cmd));
	(void)w;
	close(in[1]);
	size_t n = 0;
	int waited = 0;
	struct pollfd pf = {.fd = res[0], .events = POLLIN};
	while (n + 1 < cap) {
		int k = poll(&pf, 1, stopped ? 100 : -1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0) { /* only while stopped */
			if ((waited += 100) >= MPSKILL_STOPPED_MS) {
				stopped = 0;
				kill(victim, SIGCONT);
				say("MPS has not ended its work with the client stopped: "
				    "letting it run (SIGCONT) until MPS answers or the bound");
			}
			continue;
		}
		ssize_t r = k < 0 ? -1 : read(res[0], out + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = 0;
	close(res[0]);
	int st = 0;
	waitpid(p, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* In the helper: terminate_client on every server MPS lists, then the kill. Never returns. */
static void helper(const char *dir)
{
	for (int fd = 3; fd < 1024; fd++) /* the daemon's sockets are not ours to hold */
		close(fd);
	/* a Ctrl-C to the launcher's process group must not end the helper and leave the victim
	 * stopped for good */
	setsid();
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	late_len = snprintf(late, sizeof(late),
			    "simfabricd: mps: pid %d: MPS did not answer within %d s: SIGKILL "
			    "without it\n",
			    (int)victim, MPSKILL_BOUND_S);
	if (late_len < 0 || late_len >= (int)sizeof(late))
		late_len = (int)strlen(late);
	signal(SIGALRM, on_alarm);
	alarm(MPSKILL_BOUND_S);
	char servers[512], out[512], cmd[96], msg[800];
	if (run_ctl(dir, "get_server_list\n", servers, sizeof(servers), 0) < 0) {
		snprintf(msg, sizeof(msg),
			 MPS_CTL " get_server_list failed (%.400s): killing without it", servers);
		say(msg);
		servers[0] = 0; /* what it printed is no server list */
	}
	for (char *s = servers, *end; *s; s = end) {
		long spid = strtol(s, &end, 10);
		if (end == s) {
			end = s + 1;
			continue;
		}
		snprintf(cmd, sizeof(cmd), "terminate_client %ld %d\n", spid, (int)victim);
		int rc = run_ctl(dir, cmd, out, sizeof(out), 1);
		out[strcspn(out, "\n")] = 0;
		snprintf(msg, sizeof(msg), "terminate_client %ld %s%s%.500s%s", spid,
			 rc ? "failed" : "done", *out ? " (" : "", out, *out ? ")" : "");
		say(msg);
	}
	say("SIGKILL");
	kill(victim, SIGKILL);
	_exit(0);
}

int mpskill(pid_t pid, char *how, size_t cap)
{
	size_t len = 0;
	char dir[4096];
	char *env = read_environ(pid, &len);
	int set = env ? mpskill_pipe_dir(env, len, dir, sizeof(dir)) : -1;
	free(env);
	if (set < 0 || !control_up(dir)) {
		snprintf(how, cap, "not an MPS client");
		return kill(pid, SIGKILL) ? -errno : 0;
	}
	/*
	 * Stopped now, at the fault's instant: a dead node does nothing more. Left running, it
	 * would see MPS end its work (cudaErrorMpsClientTerminated) and could die of that first:
	 * PyTorch's watchdog turned it into SIGABRT on an H100, and the run said the victim died of
	 * SIGABRT, not of the fault's SIGKILL. MPS ends a client's work in its server without the
	 * client's help.
	 */
	if (kill(pid, SIGSTOP))
		return -errno;
	pid_t child = fork();
	if (child == 0) { /* detach: the helper is init's child, the daemon reaps only this one */
		victim = pid;
		pid_t g = fork();
		if (g == 0)
			helper(dir);
		_exit(g < 0);
	}
	int st = 1;
	while (child > 0 && waitpid(child, &st, 0) < 0 && errno == EINTR)
		;
	if (child < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) { /* no helper: what kill(2) does */
		snprintf(how, cap, "an MPS client, but no helper could be forked: killed at once");
		return kill(pid, SIGKILL) ? -errno : 0;
	}
	snprintf(how, cap, "an MPS client (MPS at %s): terminate_client, then SIGKILL, by a helper",
		 dir);
	return 1;
}
