/* SPDX-License-Identifier: MIT */
/*
 * fuzz_units.c - values with units (sim/scn/units.c) under libFuzzer.
 *
 * The input is a value's text (a NUL ends it early). For every dimension and
 * flags, units_parse must not read or write out of bounds (ASan) and must either
 *  - fail with one line of printable ASCII that quotes the value, or
 *  - give a value that units_format writes in a unit which parses back to
 *    the same value, and that scaled by 10 (the same text with one more
 *    digit before the unit, when it had a plain integer) is 10 times it or
 *    too large.
 * Seeds: the dictionary fuzz_units.dict.
 */
#include "sim/scn/units.c"

#include <assert.h>
#include <stdlib.h>

static void check_line(const char *err)
{
	assert(*err);
	for (const char *c = err; *c; c++)
		assert(*c >= 0x20 && *c < 0x7f);
	assert(err[0] == '\'');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[256];
	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	for (int d = 0; d < UNITS_NDIMS; d++) {
		for (unsigned flags = 0; flags < 4; flags++) {
			char err[512] = "", buf[64];
			uint64_t v = 0, back = 0;
			int rc = units_parse(text, (enum units_dim)d, flags, &v, err, sizeof(err));
			if (rc) {
				assert(rc == -EINVAL || rc == -ERANGE);
				check_line(err);
				continue;
			}
			units_format((enum units_dim)d, v, buf, sizeof(buf));
			rc = units_parse(buf, (enum units_dim)d, UNITS_BARE_ZERO, &back, err,
					 sizeof(err));
			assert(rc == 0 && back == v);
			/* "<digits><unit>" with a 0 appended to the digits: ten times as much. */
			size_t n = strspn(text, "0123456789");
			if (n > 0 && n < 18 && (!text[n] || strchr("nuµmsBkKMGTbg", text[n]))) {
				char ten[300];
				snprintf(ten, sizeof(ten), "%.*s0%s", (int)n, text, text + n);
				rc = units_parse(ten, (enum units_dim)d, flags, &back, err,
						 sizeof(err));
				assert((rc == 0 && back / 10 == v && back % 10 == 0) ||
				       (rc == -ERANGE && v > UINT64_MAX / 10));
			}
		}
	}
	return 0;
}
