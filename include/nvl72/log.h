/* SPDX-License-Identifier: Apache-2.0 */
/* The logger: one line per event with time, level, component, message and
 * key=value pairs. Levels are checked before arguments are evaluated, and
 * debug can be switched on per component at run time. */
/* Contract: log_write, log_enabled and the macros may be called from any
 * thread. The setters are for start-up, before other threads log: they are
 * plain stores (log_set_debug takes the lock, but log_enabled reads without
 * it). log_write blocks for one write and flush of the stream under the
 * logger's lock, so a stalled stream stalls every thread that logs. Names
 * returned are static. */
#ifndef NVL72_LOG_H
#define NVL72_LOG_H

#include <stdbool.h>
#include <stdio.h>

enum log_level {
	LOG_LVL_ERROR = 0,
	LOG_LVL_WARN,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG,
};

enum log_format {
	LOG_FMT_TEXT = 0, /* 2026-11-29T15:49:51.123Z info kube: msg k=v */
	LOG_FMT_JSON,     /* {"ts":"…","level":"info","comp":"kube","msg":"…","k":"v"} */
};

/* Sets the global level. */
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
void log_set_format(enum log_format fmt);
/* "kube,agent" turns debug on for those components; "*" for all; "" off. */
void log_set_debug(const char *components);
/* Where lines go; stderr by default. Not owned: it must stay open while
 * any thread may log. */
void log_set_stream(FILE *f);
/* Parses "error|warn|info|debug". Returns false on an unknown name. */
bool log_level_parse(const char *s, enum log_level *out);
const char *log_level_name(enum log_level lvl);

bool log_enabled(enum log_level lvl, const char *comp);

/* msg is a plain message; kv is a printf format of space-separated
 * key=value pairs (may be NULL). A value with spaces is written quoted by
 * the caller (err="%s"). Control characters in msg and kv are escaped so an
 * event is always one line; the JSON format turns the pairs into fields.
 * Secrets never go in either. Safe to call from any thread. */
void log_write(enum log_level lvl, const char *comp, const char *msg, const char *kv, ...)
        __attribute__((format(printf, 4, 5)));

#define LOG_AT(lvl, comp, ...)                                                                     \
	do {                                                                                       \
		if (log_enabled((lvl), (comp)))                                                    \
			log_write((lvl), (comp), __VA_ARGS__);                                     \
	} while (0)

#define log_error(comp, ...) LOG_AT(LOG_LVL_ERROR, comp, __VA_ARGS__)
#define log_warn(comp, ...) LOG_AT(LOG_LVL_WARN, comp, __VA_ARGS__)
#define log_info(comp, ...) LOG_AT(LOG_LVL_INFO, comp, __VA_ARGS__)
#define log_debug(comp, ...) LOG_AT(LOG_LVL_DEBUG, comp, __VA_ARGS__)

#endif
