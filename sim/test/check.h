/* SPDX-License-Identifier: MIT */
/*
 * check.h - the C unit tests' one assertion and one runner. CHECK(cond, fmt,
 * ...) counts the check, and on failure prints file:line, the condition and a
 * message naming the values, then carries on (so one run reports every
 * failure). Each test program includes it once, lists its tests in a table
 * of CHECK_CASE()s, and its main() is check_main() over that table.
 */
#ifndef SF_TEST_CHECK_H
#define SF_TEST_CHECK_H

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
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

/* One test of a program: its name (the function's) and the function. */
struct check_case {
	const char *name;
	void (*fn)(void);
};
#define CHECK_CASE(fn) {#fn, fn}
#define CHECK_NCASES(table) (sizeof(table) / sizeof((table)[0]))

/*
 * A test program's main(): runs the cases in table order (given arguments,
 * only the cases whose names contain one of them; -l lists the names), then
 * says how it went, once: "<program>: N checks passed" on stdout, or
 * "<program>: F of N checks failed" on stderr. Exit status 0; 1 when a check
 * failed; 2 when an argument matched no case.
 */
static inline int check_main(int argc, char **argv, const struct check_case *cases, size_t n)
{
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (argc == 2 && !strcmp(argv[1], "-l")) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	for (int a = 1; a < argc; a++) {
		size_t i = 0;
		while (i < n && !strstr(cases[i].name, argv[a]))
			i++;
		if (i == n) {
			fprintf(stderr, "%s: no test named like '%s' (-l lists them)\n", prog,
				argv[a]);
			return 2;
		}
	}
	for (size_t i = 0; i < n; i++) {
		int run = argc < 2;
		for (int a = 1; a < argc && !run; a++)
			run = strstr(cases[i].name, argv[a]) != NULL;
		if (run)
			cases[i].fn();
	}
	if (failures) {
		fprintf(stderr, "%s: %d of %d checks failed\n", prog, failures, checks);
		return 1;
	}
	printf("%s: %d checks passed\n", prog, checks);
	return 0;
}

/* A program's main(): check_main over its table. */
#define CHECK_MAIN(table)                                                                          \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		return check_main(argc, argv, table, CHECK_NCASES(table));                         \
	}

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
