/* SPDX-License-Identifier: MIT */
/*
 * fuzz_input.h - reading a fuzzer's input as a program: take() gives the next 1..4 bytes as a
 * big-endian number, 0 once the input is used up (so a short input ends every loop).
 */
#ifndef SF_FUZZ_INPUT_H
#define SF_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct rd {
	const uint8_t *p;
	size_t n;
};

static inline uint32_t take(struct rd *r, int bytes)
{
	uint32_t v = 0;
	for (int i = 0; i < bytes && r->n; i++, r->p++, r->n--)
		v = v << 8 | *r->p;
	return v;
}

#endif /* SF_FUZZ_INPUT_H */
