// SPDX-License-Identifier: Apache-2.0
// Clocks and RFC 3339 timestamps. Deadlines and backoff use the monotonic
// clock so a wall-clock step never fires or stalls a timer.
#include "nvl72/timeutil.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nvl72/parse.h"

int64_t time_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t time_mono_ms(void)
{
	return time_mono_us() / 1000;
}

int64_t time_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void time_sleep_ms(int64_t ms)
{
	if (ms <= 0)
		return;
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void to_tm(int64_t wall_ms, struct tm *tm)
{
	time_t secs = (time_t)(wall_ms >= 0 ? wall_ms / 1000 : (wall_ms - 999) / 1000);
	gmtime_r(&secs, tm);
}

void time_format_rfc3339(int64_t wall_ms, char out[TIME_RFC3339_LEN])
{
	struct tm tm;
	to_tm(wall_ms, &tm);
	strftime(out, TIME_RFC3339_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void time_format_rfc3339_ms(int64_t wall_ms, char out[TIME_RFC3339_LEN])
{
	struct tm tm;
	to_tm(wall_ms, &tm);
	char base[24];
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	int ms = (int)(((wall_ms % 1000) + 1000) % 1000);
	snprintf(out, TIME_RFC3339_LEN, "%s.%03dZ", base, ms);
}

/* Reads exactly n digits into *v. */
static bool digits(const char **p, int n, int *v)
{
	int x = 0;
	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return false;
		x = x * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*v = x;
	return true;
}

static bool expect(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

enum nv_err time_parse_rfc3339(const char *s, int64_t *out_wall_ms)
{
	int y, mo, d, h, mi, se, ms = 0;
	const char *p = s;
	if (!digits(&p, 4, &y) || !expect(&p, '-') || !digits(&p, 2, &mo) || !expect(&p, '-') ||
	    !digits(&p, 2, &d))
		return NV_E_PARSE;
	if (*p != 'T' && *p != 't')
		return NV_E_PARSE;
	p++;
	if (!digits(&p, 2, &h) || !expect(&p, ':') || !digits(&p, 2, &mi) || !expect(&p, ':') ||
	    !digits(&p, 2, &se))
		return NV_E_PARSE;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return NV_E_RANGE;
	if (*p == '.') {
		p++;
		int n = 0;
		while (isdigit((unsigned char)*p)) {
			if (n < 3)
				ms = ms * 10 + (*p - '0');
			n++;
			p++;
		}
		if (n == 0)
			return NV_E_PARSE;
		for (; n < 3; n++)
			ms *= 10;
	}
	int off_min = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, oh, om;
		p++;
		if (!digits(&p, 2, &oh) || !expect(&p, ':') || !digits(&p, 2, &om))
			return NV_E_PARSE;
		if (oh > 23 || om > 59)
			return NV_E_RANGE;
		off_min = sign * (oh * 60 + om);
	} else {
		return NV_E_PARSE;
	}
	if (*p != '\0')
		return NV_E_PARSE;
	struct tm tm = {.tm_year = y - 1900,
	                .tm_mon = mo - 1,
	                .tm_mday = d,
	                .tm_hour = h,
	                .tm_min = mi,
	                .tm_sec = se};
	time_t t = timegm(&tm);
	if (t == (time_t)-1 && !(y == 1969 && mo == 12 && d == 31))
		return NV_E_RANGE;
	*out_wall_ms = ((int64_t)t - (int64_t)off_min * 60) * 1000 + ms;
	return NV_OK;
}
