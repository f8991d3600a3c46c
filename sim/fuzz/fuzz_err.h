/* SPDX-License-Identifier: MIT */
/*
 * fuzz_err.h - what the scenario harnesses (fuzz_scenario.c, fuzz_faults.c) demand of a
 * refused input's message: one line, "<file>:<line>:<column>: <key>: <reason>", line and
 * column from 1, the key a plain word or quoted, a reason after it.
 */
#ifndef SF_FUZZ_ERR_H
#define SF_FUZZ_ERR_H

#include <assert.h>
#include <stdio.h>
#include <string.h>

static inline void fuzz_check_error(const char *err, const char *file)
{
	size_t fl = strlen(file);
	int line = 0, col = 0, n = 0;
	assert(!strncmp(err, file, fl));
	assert(sscanf(err + fl, ":%d:%d:%n", &line, &col, &n) == 2 && n > 0);
	const char *at = err + fl + n;
	assert(line >= 1 && col >= 1 && at[0] == ' ' && at[1] != ' ');
	/* The key: a plain word, or quoted; then ": " and a reason. */
	const char *key = at + 1, *sep;
	if (*key == '\'') {
		sep = strchr(key + 1, '\'');
		assert(sep && sep[1] == ':' && sep[2] == ' ' && sep[3]);
	} else {
		sep = key +
			strspn(key,
			       "abcdefghijklmnopqrstuvwxyz"
			       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/");
		assert(sep > key && sep[0] == ':' && sep[1] == ' ' && sep[2]);
	}
	assert(!strchr(err, '\n'));
}

#endif /* SF_FUZZ_ERR_H */
