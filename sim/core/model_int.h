/* SPDX-License-Identifier: MIT */
/*
 * model_int.h - what the model core's files share (model.c, model_rand.c);
 * nothing else includes it.
 */
#ifndef SF_MODEL_INT_H
#define SF_MODEL_INT_H

#include <stddef.h>
#include <stdint.h>

/* Writes the message into err (when there is room) and returns -EINVAL. */
__attribute__((format(printf, 3, 4))) int model_fail(char *err, size_t errlen, const char *fmt,
						     ...);

/* A random 64-bit value as a double in (0, 1): its top 53 bits, centred. */
static inline double model_unit64(uint64_t r)
{
	return ((double)(r >> 11) + 0.5) * 0x1p-53;
}

#endif /* SF_MODEL_INT_H */
