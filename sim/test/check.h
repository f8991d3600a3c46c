/* SPDX-License-Identifier: MIT */
/*
 * check.h - the C unit tests' one assertion: CHECK(cond, fmt, ...) counts the
 * check, and on failure prints file:line, the condition and a message naming
 * the values, then carries on (so one run reports every failure). Each test
 * program includes it once and exits non-zero if `failures` is set.
 */
#ifndef SF_TEST_CHECK_H
#define SF_TEST_CHECK_H

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

static int failures, checks;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

/* The scenarios directory: ./scenarios (make runs tests from the top), else the one of the
 * tree the binary was built in (<top>/<build>/test/<binary>). */
static inline const char *check_scenarios_dir(char *buf, size_t cap)
{
	if (access("scenarios/ideal.yaml", R_OK) == 0)
		return "scenarios";
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return "scenarios";
	exe[n] = 0;
	snprintf(buf, cap, "%s/scenarios", dirname(dirname(dirname(exe))));
	return buf;
}

#endif /* SF_TEST_CHECK_H */
