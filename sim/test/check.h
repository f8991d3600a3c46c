/* SPDX-License-Identifier: MIT */
/*
 * check.h - the C unit tests' one assertion: CHECK(cond, fmt, ...) counts the
 * check, and on failure prints file:line, the condition and a message naming
 * the values, then carries on (so one run reports every failure). Each test
 * program includes it once and exits non-zero if `failures` is set.
 */
#ifndef SF_TEST_CHECK_H
#define SF_TEST_CHECK_H

#include <stdio.h>

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

#endif /* SF_TEST_CHECK_H */
