/* SPDX-License-Identifier: MIT */
/*
 * test_mpskill.c - mpskill (sim/mpskill.h): the MPS pipe directory read from an environment
 * block; a process that is no MPS client killed at once; one that is killed by the helper after
 * terminate_client, asked of a stand-in nvidia-cuda-mps-control (a shell script on PATH that
 * logs its commands and names one server), with the helper's word on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/mpskill.h"
#include "sim/test/check.h"

static void test_pipe_dir(void)
{
	char out[64];
	static const char env[] = "A=1\0CUDA_MPS_PIPE_DIRECTORY=/run/x/mps-pipe\0B=2";
	CHECK(mpskill_pipe_dir(env, sizeof(env), out, sizeof(out)) == 1 &&
		      !strcmp(out, "/run/x/mps-pipe"),
	      "set: %s", out);
	static const char none[] = "A=1\0B=CUDA_MPS_PIPE_DIRECTORY=/no";
	CHECK(mpskill_pipe_dir(none, sizeof(none), out, sizeof(out)) == 0 &&
		      !strcmp(out, "/tmp/nvidia-mps"),
	      "unset: MPS's default, not a value that only contains the name: %s", out);
	/* the last string without its NUL (a block cut short): still read, within len */
	static const char cut[] = "CUDA_MPS_PIPE_DIRECTORY=/ab";
	CHECK(mpskill_pipe_dir(cut, sizeof(cut) - 1, out, sizeof(out)) == 1 && !strcmp(out, "/ab"),
	      "cut: %s", out);
	char tiny[4];
	CHECK(mpskill_pipe_dir(env, sizeof(env), tiny, sizeof(tiny)) == -ENAMETOOLONG,
	      "a value longer than the buffer is refused");
}

/* A child that sleeps with environment envp (what /proc/<pid>/environ shows). */
static pid_t sleeper(char *const envp[])
{
	pid_t p = fork();
	if (p == 0) {
		execle("/bin/sleep", "sleep", "30", (char *)NULL, envp);
		_exit(127);
	}
	struct timespec ts = {0, 20 * 1000000}; /* until it has exec'd */
	nanosleep(&ts, NULL);
	return p;
}

/* Wait up to 10 s for p; its status, or -1. */
static int reap(pid_t p)
{
	for (int i = 0; i < 1000; i++) {
		int st;
		if (waitpid(p, &st, WNOHANG) == p)
			return st;
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return -1;
}

static void test_not_a_client(void)
{
	char *envp[] = {"CUDA_MPS_PIPE_DIRECTORY=/nonexistent/mps", NULL};
	pid_t p = sleeper(envp);
	char how[160] = "";
	CHECK(mpskill(p, how, sizeof(how)) == 0 && !strcmp(how, "not an MPS client"), "%s", how);
	int st = reap(p);
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "killed at once: %#x", st);
	CHECK(mpskill(p, how, sizeof(how)) == -ESRCH, "a process no longer there: -ESRCH");
}

/* An MPS client killed by the helper; hangs: MPS's terminate_client never answers. */
static void client_case(int hangs)
{
	char dir[] = "/tmp/sf-mpskill-XXXXXX";
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	char path[256], log[256], pathenv[512], pipeenv[300];
	/* the control socket MPS would have */
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s/control", dir);
	CHECK(bind(s, (struct sockaddr *)&a, sizeof(a)) == 0, "bind %s", a.sun_path);
	/* the stand-in control: logs each command, names server 4242 */
	snprintf(log, sizeof(log), "%s/commands", dir);
	snprintf(path, sizeof(path), "%s/nvidia-cuda-mps-control", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL, "%s", path);
	fprintf(f,
		"#!/bin/sh\nread cmd\necho \"$CUDA_MPS_PIPE_DIRECTORY $cmd\" >>%s\n"
		"case $cmd in get_server_list) echo 4242;;\n"
		/* the client's state as MPS ends its work: stopped (T) */
		"terminate_client*) set -- $cmd; echo \"state $(cut -d' ' -f3 /proc/$3/stat)\" "
		">>%s%s;;\n"
		"esac\n",
		log, log, hangs ? "; exec sleep 8" : "");
	fclose(f);
	chmod(path, 0755);
	const char *old = getenv("PATH");
	snprintf(pathenv, sizeof(pathenv), "%s:%s", dir, old ? old : "/usr/bin:/bin");
	setenv("PATH", pathenv, 1);
	snprintf(pipeenv, sizeof(pipeenv), "CUDA_MPS_PIPE_DIRECTORY=%s", dir);
	char *envp[] = {pipeenv, NULL};
	pid_t p = sleeper(envp);
	char how[160] = "", errlog[300];
	/* the helper's lines (the daemon's log) into a file: its stderr is the daemon's */
	snprintf(errlog, sizeof(errlog), "%s/helper.log", dir);
	fflush(stderr);
	int saved = dup(2), efd = open(errlog, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(saved >= 0 && efd >= 0 && dup2(efd, 2) == 2, "stderr into %s", errlog);
	CHECK(mpskill(p, how, sizeof(how)) == 1 && strstr(how, "terminate_client"), "%s", how);
	dup2(saved, 2);
	close(saved);
	close(efd);
	int st = reap(p); /* within 10 s: the helper's bound is MPSKILL_BOUND_S */
	CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "killed by the helper: %#x",
	      st);
	char said[1024] = "";
	FILE *ef = fopen(errlog, "r");
	size_t ne = ef ? fread(said, 1, sizeof(said) - 1, ef) : 0;
	said[ne] = 0;
	if (ef)
		fclose(ef);
	CHECK(hangs ? strstr(said, "MPS did not answer within 5 s: SIGKILL without it") &&
			      strstr(said, "letting it run (SIGCONT)")
		    : strstr(said, "terminate_client 4242 done") && strstr(said, ": SIGKILL\n") &&
			      !strstr(said, "SIGCONT"),
	      "the helper said:\n%s", said);
	unlink(errlog);
	char got[512] = "", want[512];
	f = fopen(log, "r");
	size_t n = f ? fread(got, 1, sizeof(got) - 1, f) : 0;
	got[n] = 0;
	if (f)
		fclose(f);
	snprintf(want, sizeof(want), "%s get_server_list\n%s terminate_client 4242 %d\nstate T\n",
		 dir, dir, (int)p);
	CHECK(!strcmp(got, want),
	      "MPS was asked, in order, with its pipe directory, the client "
	      "stopped:\n%s\nwant:\n%s",
	      got, want);
	if (old)
		setenv("PATH", old, 1);
	close(s);
	unlink(a.sun_path);
	unlink(path);
	unlink(log);
	rmdir(dir);
}

static void test_client(void)
{
	client_case(0);
}

/* MPS never answers terminate_client: the victim is killed at the bound all the same, and the
 * log says so */
static void test_client_mps_hangs(void)
{
	client_case(1);
}

static const struct check_case cases[] = {
	CHECK_CASE(test_pipe_dir),
	CHECK_CASE(test_not_a_client),
	CHECK_CASE(test_client),
	CHECK_CASE(test_client_mps_hangs),
};

CHECK_MAIN(cases)
