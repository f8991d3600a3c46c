/* SPDX-License-Identifier: MIT */
/* log.c - see log.h. */
#include "sim/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int cur_level = LOG_LEVEL_INFO;
static char ident[32] = "simfabricd";

static const char *const names[] = {"error", "warn", "info", "debug"};

void log_init(const char *id, enum log_level level)
{
	if (id)
		snprintf(ident, sizeof(ident), "%s", id);
	log_set_level(level);
}

void log_set_level(enum log_level level)
{
	if (level < LOG_LEVEL_ERROR)
		level = LOG_LEVEL_ERROR;
	if (level > LOG_LEVEL_DEBUG)
		level = LOG_LEVEL_DEBUG;
	atomic_store_explicit(&cur_level, (int)level, memory_order_relaxed);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load_explicit(&cur_level, memory_order_relaxed);
}

int log_enabled(enum log_level level)
{
	return (int)level <= atomic_load_explicit(&cur_level, memory_order_relaxed);
}

int log_level_parse(const char *name, enum log_level *out)
{
	for (int i = 0; i <= LOG_LEVEL_DEBUG; i++) {
		if (strcmp(name, names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	if (strcmp(name, "warning") == 0) {
		*out = LOG_LEVEL_WARN;
		return 0;
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	return level >= LOG_LEVEL_ERROR && level <= LOG_LEVEL_DEBUG ? names[level] : "?";
}

size_t log_wall_time(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	char off[8];
	size_t n;

	if (cap == 0)
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	/* strftime's %z is +hhmm; ISO 8601's extended form, as the date has, is +hh:mm. */
	if (strftime(off, sizeof(off), "%z", &tm) != 5)
		snprintf(off, sizeof(off), "+0000");
	n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	if (n == 0) {
		buf[0] = '\0';
		return 0;
	}
	int m = snprintf(buf + n, cap - n, ".%06ld%.3s:%.2s", ts.tv_nsec / 1000, off, off + 3);
	return m < 0 ? n : n + (size_t)m < cap ? n + (size_t)m : cap - 1;
}

static void log_write(const char *lvl, const char *fmt, va_list ap)
{
	int saved = errno;
	char now[LOG_WALL_MAX];
	log_wall_time(now, sizeof(now));
	char line[LOG_LINE_MAX + 1];
	size_t cap = LOG_LINE_MAX; /* one byte kept back for the newline */
	int n = snprintf(line, cap, "[%s] %s[%d] %s: ", now, ident, (int)getpid(), lvl);
	size_t len = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
	n = vsnprintf(line + len, cap - len, fmt, ap);
	if (n > 0 && len + (size_t)n >= cap) {
		len = cap - 1;
		memcpy(line + len - 3, "...", 3);
	} else if (n > 0) {
		len += (size_t)n;
	}
	while (len > 0 && line[len - 1] == '\n')
		len--;
	line[len++] = '\n';
	/* One write per line; a short write to a pipe would only cut this line. */
	ssize_t w;
	do
		w = write(STDERR_FILENO, line, len);
	while (w < 0 && errno == EINTR);
	errno = saved;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_write(log_level_name(level), fmt, ap);
	va_end(ap);
}

void log_always(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_write(log_level_name(LOG_LEVEL_INFO), fmt, ap);
	va_end(ap);
}
