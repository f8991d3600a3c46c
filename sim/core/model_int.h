/* SPDX-License-Identifier: MIT */
/*
 * model_int.h - what the model core's files share (model.c, model_jitter.c);
 * nothing else includes it.
 */
#ifndef SF_MODEL_INT_H
#define SF_MODEL_INT_H

#include <stddef.h>

/* Writes the message into err (when there is room) and returns -EINVAL. */
__attribute__((format(printf, 3, 4))) int model_fail(char *err, size_t errlen, const char *fmt,
						     ...);

#endif /* SF_MODEL_INT_H */
