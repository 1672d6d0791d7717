// SPDX-License-Identifier: Apache-2.0
// The logger. Each event is formatted into a bounded line buffer and
// written with one call under a lock, so lines from threads never mix.
#include "nvl72/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "nvl72/buf.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

#define LOG_LINE_MAX 8192
#define LOG_DEBUG_COMPS_MAX 256

static struct {
	pthread_mutex_t lock;
	enum log_level level;
	enum log_format format;
	FILE *stream;
	char debug[LOG_DEBUG_COMPS_MAX]; /* ",kube,agent," or "*" */
} g = {
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .level = LOG_LVL_INFO,
        .format = LOG_FMT_TEXT,
};

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level lvl)
{
	g.level = lvl;
}
enum log_level log_get_level(void)
{
	return g.level;
}
void log_set_format(enum log_format fmt)
{
	g.format = fmt;
}
void log_set_stream(FILE *f)
{
	g.stream = f;
}

void log_set_debug(const char *components)
{
	pthread_mutex_lock(&g.lock);
	if (components == NULL || *components == '\0')
		g.debug[0] = '\0';
	else if (strcmp(components, "*") == 0)
		str_copy(g.debug, sizeof(g.debug), "*");
	else
		snprintf(g.debug, sizeof(g.debug), ",%s,", components);
	pthread_mutex_unlock(&g.lock);
}

bool log_level_parse(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return true;
		}
	}
	return false;
}

const char *log_level_name(enum log_level lvl)
{
	return (unsigned)lvl < 4 ? level_names[lvl] : "unknown";
}

bool log_enabled(enum log_level lvl, const char *comp)
{
	if (lvl <= g.level)
		return true;
	if (lvl != LOG_LVL_DEBUG || g.debug[0] == '\0')
		return false;
	if (g.debug[0] == '*')
		return true;
	char key[64];
	snprintf(key, sizeof(key), ",%s,", comp);
	return strstr(g.debug, key) != NULL;
}

/* Appends s with control characters escaped; in JSON also quotes and
 * backslashes. Truncation is fine here: a log line has a fixed cap. */
static void put_escaped(struct buf *b, const char *s, size_t n, bool json)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n')
			buf_append_str(b, "\\n");
		else if (c == '\t')
			buf_append_str(b, "\\t");
		else if (c == '\r')
			buf_append_str(b, "\\r");
		else if (c < 0x20 || c == 0x7f)
			buf_printf(b, json ? "\\u%04x" : "\\x%02x", c);
		else if (json && (c == '"' || c == '\\'))
			buf_printf(b, "\\%c", c);
		else
			buf_append_byte(b, (char)c);
	}
}

/* Splits "a=1 b=\"x y\" c=3" into JSON fields. A token without '=' is kept
 * under the key "extra" rather than dropped. */
static void put_json_pairs(struct buf *b, const char *kv)
{
	const char *p = kv;
	while (*p) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		const char *k = p;
		while (*p && *p != '=' && *p != ' ')
			p++;
		const char *kend = p;
		const char *v = "", *vend = v;
		if (*p == '=') {
			p++;
			if (*p == '"') {
				v = ++p;
				while (*p && !(*p == '"' && p[-1] != '\\'))
					p++;
				vend = p;
				if (*p)
					p++;
			} else {
				v = p;
				while (*p && *p != ' ')
					p++;
				vend = p;
			}
		} else {
			v = k;
			vend = kend;
			k = "extra";
			kend = k + 5;
		}
		buf_append_str(b, ",\"");
		put_escaped(b, k, (size_t)(kend - k), true);
		buf_append_str(b, "\":\"");
		put_escaped(b, v, (size_t)(vend - v), true);
		buf_append_byte(b, '"');
	}
}

void log_write(enum log_level lvl, const char *comp, const char *msg, const char *kv, ...)
{
	char ts[TIME_RFC3339_LEN];
	char kvtext[LOG_LINE_MAX / 2] = "";
	time_format_rfc3339_ms(time_wall_ms(), ts);
	if (kv) {
		va_list ap;
		va_start(ap, kv);
		vsnprintf(kvtext, sizeof(kvtext), kv, ap);
		va_end(ap);
	}

	struct buf line;
	buf_init(&line, LOG_LINE_MAX);
	bool json = g.format == LOG_FMT_JSON;
	if (json) {
		buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"%s\",\"comp\":\"", ts,
		           log_level_name(lvl));
		put_escaped(&line, comp, strlen(comp), true);
		buf_append_str(&line, "\",\"msg\":\"");
		put_escaped(&line, msg, strlen(msg), true);
		buf_append_byte(&line, '"');
		put_json_pairs(&line, kvtext);
		buf_append_byte(&line, '}');
	} else {
		buf_printf(&line, "%s %-5s %s: ", ts, log_level_name(lvl), comp);
		put_escaped(&line, msg, strlen(msg), false);
		if (kvtext[0]) {
			buf_append_byte(&line, ' ');
			put_escaped(&line, kvtext, strlen(kvtext), false);
		}
	}
	/* The cap may have cut the line short; the newline always fits. */
	line.max += 1;
	buf_append_byte(&line, '\n');

	pthread_mutex_lock(&g.lock);
	FILE *f = g.stream ? g.stream : stderr;
	fwrite(line.data, 1, line.len, f);
	fflush(f);
	pthread_mutex_unlock(&g.lock);
	buf_clear(&line);
}
