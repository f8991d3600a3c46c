/* SPDX-License-Identifier: MIT */
/*
 * jsonw.h - writing JSON strings to a FILE: the trace writers of the plugin
 * (plugin/trace.c) and of the daemon (sim/faultd.c) share it.
 */
#ifndef SF_JSONW_H
#define SF_JSONW_H

#include <stdio.h>

/* s (NULL: "") as a JSON string: quotes and backslashes escaped, control bytes as \u00XX. */
static inline void jsonw_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

#endif /* SF_JSONW_H */
