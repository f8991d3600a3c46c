/* SPDX-License-Identifier: MIT */
/*
 * log.h - the daemon's (and the harness's) logger: one line per call on
 * stderr, "[<local time>] <ident>[<pid>] <level>: <text>", the time in ISO 8601 with
 * microseconds and the UTC offset ("[2026-12-04T11:15:25.354410+01:00]"): the wall clock NCCL's
 * own log ("[2026-12-04 11:15:25]") and the ranks' logs use, so the logs line up.
 *
 * The level is checked before anything is formatted; the log_* macros also
 * skip evaluating their arguments when the level is off. Each line goes out
 * with one write(2), so lines from several threads or processes sharing a
 * stderr never interleave. The plugin does not use this: it logs through
 * NCCL's logger.
 */
#ifndef SF_LOG_H
#define SF_LOG_H

#include <stddef.h>

/* Not LOG_INFO & co.: <syslog.h> defines those as macros. */
enum log_level {
	LOG_LEVEL_ERROR = 0,
	LOG_LEVEL_WARN = 1,
	LOG_LEVEL_INFO = 2,
	LOG_LEVEL_DEBUG = 3,
};

#define LOG_LINE_MAX 1024 /* longer lines are cut and end with "..." */

/* Set the ident printed before [pid] (default "simfabricd") and the level (default info).
 * Call before starting threads; ident is copied (up to 31 bytes). */
void log_init(const char *ident, enum log_level level);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* 1 if messages of this level are printed. */
int log_enabled(enum log_level level);
/* "error", "warn", "info", "debug" (also "warning"): 0, or -EINVAL. */
int log_level_parse(const char *name, enum log_level *out);
const char *log_level_name(enum log_level level);

/* Print one line (a trailing newline in fmt is not needed). Keeps errno. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same line at level info whatever the level is (the "listening on" line scripts wait for). */
void log_always(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The wall clock as the lines' prefix has it, "2026-12-04T11:15:25.354410+01:00" (local time,
 * microseconds, the UTC offset), into buf; its length. LOG_WALL_MAX holds it. */
#define LOG_WALL_MAX 40
size_t log_wall_time(char *buf, size_t cap);

#define log_at_(lvl, ...)                                                                          \
	do {                                                                                       \
		if (log_enabled(lvl))                                                              \
			log_msg(lvl, __VA_ARGS__);                                                 \
	} while (0)
#define log_error(...) log_at_(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_at_(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_at_(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_at_(LOG_LEVEL_DEBUG, __VA_ARGS__)

#endif /* SF_LOG_H */
