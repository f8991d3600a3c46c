/* SPDX-License-Identifier: MIT */
/*
 * jbuf.h - a growing JSON text in memory: the fabric dump (sim/scn/fabric.c), the
 * scenario's job:/expect: (sim/scn/job.c) and faults: (sim/scn/faults.c) sections
 * build theirs with it. (sim/core/jsonw.h is its counterpart for JSON written
 * straight to a FILE, by the trace writers.)
 *
 * A struct jbuf starts zeroed (JBUF_INIT) and lives where the caller puts it.
 * Appends never fail: the first allocation failure marks the buffer, every
 * later append does nothing, and jbuf_take reports it once (-ENOMEM). So a
 * builder appends without checking and asks once, at the end.
 *
 * Ownership: the buffer owns its text until jbuf_take hands it to the caller
 * (who frees it with free()); jbuf_free drops a text that was never taken.
 * Single-threaded; one buffer per builder.
 */
#ifndef SF_JBUF_H
#define SF_JBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct jbuf {
	char *p;	  /* the text, NUL-terminated (NULL before the first append) */
	size_t len, cap;  /* its length; the allocation's size */
	bool oom;	  /* an allocation (or a format) failed: appends do nothing */
};

#define JBUF_INIT {0}

/* n bytes of s, as they are. */
void jbuf_raw(struct jbuf *b, const char *s, size_t n);
void jbuf_puts(struct jbuf *b, const char *s);
/* Formatted text, of any length. */
__attribute__((format(printf, 2, 3))) void jbuf_printf(struct jbuf *b, const char *fmt, ...);
void jbuf_vprintf(struct jbuf *b, const char *fmt, va_list ap);
/*
 * s as a JSON string (NULL: null) in printable ASCII only, since these texts
 * travel in protocol values: quotes and backslashes escaped, everything else
 * outside 0x20..0x7e as \uXXXX (UTF-8 decoded, beyond the BMP as a surrogate
 * pair; a byte that is not UTF-8 as \u00XX).
 */
void jbuf_str(struct jbuf *b, const char *s);

/*
 * Hands the text over: on success *text (never NULL; "" if nothing was
 * appended) is the caller's to free(), *len (if len is not NULL) its length,
 * and b is empty again. If an append failed, -ENOMEM: the text is freed,
 * *text is NULL and b is empty.
 */
int jbuf_take(struct jbuf *b, char **text, size_t *len);
/* Frees a text not taken and empties b (NULL-safe; b itself is the caller's). */
void jbuf_free(struct jbuf *b);

#endif /* SF_JBUF_H */
