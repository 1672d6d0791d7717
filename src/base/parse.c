// SPDX-License-Identifier: Apache-2.0
// Checked number, boolean, duration and listen-address parsing: the only
// way text from outside becomes a number, so every value is range-checked
// on entry.
#include "nvl72/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum nv_err parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
	if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
		return NV_E_PARSE;
	char *end = NULL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (*end != '\0')
		return NV_E_PARSE;
	if (errno == ERANGE || v < min || v > max)
		return NV_E_RANGE;
	*out = v;
	return NV_OK;
}

enum nv_err parse_i64_n(const char *s, size_t len, int64_t min, int64_t max, int64_t *out)
{
	char tmp[32];
	if (len == 0 || len >= sizeof(tmp))
		return len ? NV_E_RANGE : NV_E_PARSE;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	if (strlen(tmp) != len)
		return NV_E_PARSE;
	return parse_i64(tmp, min, max, out);
}

enum nv_err parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	/* strtoull accepts "-1" and wraps it; only digits are allowed here. */
	if (s == NULL || !isdigit((unsigned char)*s))
		return NV_E_PARSE;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end != '\0')
		return NV_E_PARSE;
	if (errno == ERANGE || v < min || v > max)
		return NV_E_RANGE;
	*out = v;
	return NV_OK;
}

enum nv_err parse_int(const char *s, int min, int max, int *out)
{
	int64_t v;
	enum nv_err e = parse_i64(s, min, max, &v);
	if (e == NV_OK)
		*out = (int)v;
	return e;
}

enum nv_err parse_hex_u64(const char *s, uint64_t *out)
{
	if (s == NULL)
		return NV_E_PARSE;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (!isxdigit((unsigned char)*s))
		return NV_E_PARSE;
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 16);
	if (*end != '\0')
		return NV_E_PARSE;
	if (errno == ERANGE)
		return NV_E_RANGE;
	*out = v;
	return NV_OK;
}

enum nv_err parse_double(const char *s, double min, double max, double *out)
{
	if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
		return NV_E_PARSE;
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (*end != '\0')
		return NV_E_PARSE;
	if (errno == ERANGE || !isfinite(v) || v < min || v > max)
		return NV_E_RANGE;
	*out = v;
	return NV_OK;
}

enum nv_err parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};
	if (s == NULL)
		return NV_E_PARSE;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return NV_OK;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return NV_OK;
		}
	}
	return NV_E_PARSE;
}

static int64_t unit_ms(const char *u, size_t n)
{
	static const struct {
		const char *name;
		int64_t ms;
	} units[] = {
	        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
	};
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strlen(units[i].name) == n && strncmp(units[i].name, u, n) == 0)
			return units[i].ms;
	return 0;
}

enum nv_err parse_duration_ms(const char *s, int64_t *out_ms)
{
	if (s == NULL || *s == '\0')
		return NV_E_PARSE;
	if (strcmp(s, "0") == 0) {
		*out_ms = 0;
		return NV_OK;
	}
	int64_t total = 0;
	const char *p = s;
	while (*p) {
		if (!isdigit((unsigned char)*p))
			return NV_E_PARSE;
		int64_t v = 0;
		while (isdigit((unsigned char)*p)) {
			if (v > (INT64_MAX - 9) / 10)
				return NV_E_RANGE;
			v = v * 10 + (*p++ - '0');
		}
		const char *u = p;
		while (isalpha((unsigned char)*p))
			p++;
		int64_t mult = unit_ms(u, (size_t)(p - u));
		if (mult == 0)
			return NV_E_PARSE;
		if (v > (INT64_MAX - total) / mult)
			return NV_E_RANGE;
		total += v * mult;
	}
	*out_ms = total;
	return NV_OK;
}

enum nv_err parse_hostport(const char *addr, char *host, size_t hostsz, int *port)
{
	const char *colon, *h;
	size_t n;
	int p;

	if (addr[0] == '\0' || strcmp(addr, "0") == 0) {
		if (hostsz == 0)
			return NV_E_INVAL;
		host[0] = '\0';
		*port = -1;
		return NV_OK;
	}
	colon = strrchr(addr, ':');
	if (colon == NULL || parse_int(colon + 1, 0, 65535, &p) != NV_OK)
		return NV_E_INVAL;
	h = addr;
	n = (size_t)(colon - addr);
	if (n > 0 && h[0] == '[') { /* [::1]:80 */
		if (n < 2 || h[n - 1] != ']')
			return NV_E_INVAL;
		h++;
		n -= 2;
	}
	if (n >= hostsz)
		return NV_E_INVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = p;
	return NV_OK;
}

enum nv_err str_copy(char *dst, size_t dstsz, const char *src)
{
	if (dstsz == 0)
		return NV_E_TOO_LARGE;
	size_t n = strlen(src);
	if (n >= dstsz) {
		memcpy(dst, src, dstsz - 1);
		dst[dstsz - 1] = '\0';
		return NV_E_TOO_LARGE;
	}
	memcpy(dst, src, n + 1);
	return NV_OK;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

char *str_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}
