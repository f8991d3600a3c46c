/* SPDX-License-Identifier: MIT */
/*
 * jsonw.h - writing JSON strings to a FILE: the trace writers of the plugin
 * (plugin/trace.c) and of the daemon (sim/faultd.c) share it.
 */
#ifndef SF_JSONW_H
#define SF_JSONW_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

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

/*
 * A new file at path, for a writer that fills it and renames it over its target. The name is
 * predictable (FILE.tmp.PID), so it is opened O_EXCL|O_NOFOLLOW: a file or a link someone else
 * planted there is never written through. One left there (a crashed run's, or a planted link)
 * is removed first, which removes a link and not what it points to. NULL with errno on failure.
 */
static inline FILE *jsonw_create(const char *path)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	int fd = open(path, flags, 0666);
	if (fd < 0 && errno == EEXIST && unlink(path) == 0)
		fd = open(path, flags, 0666);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

#endif /* SF_JSONW_H */
