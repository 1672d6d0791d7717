// SPDX-License-Identifier: Apache-2.0
// Bounded JSON parsing, path-addressed typed accessors and merge patches.
// Every error names the field path so a bad object can be fixed from the log.
#include "nvl72/json.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nvl72/base.h"

#define JX_KEY_MAX 256

__attribute__((format(printf, 2, 3))) static void jx_fail(struct jx_err *e, const char *fmt, ...)
{
	va_list ap;

	if (e == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

const char *jx_type_name(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

int jx_scan_depth(const char *data, size_t len, int limit)
{
	int depth = 0, max = 0;
	bool in_str = false, esc = false;

	for (size_t i = 0; i < len; i++) {
		char c = data[i];
		if (in_str) {
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > max)
				max = depth;
			if (max > limit)
				return limit + 1;
		} else if ((c == '}' || c == ']') && depth > 0) {
			depth--;
		}
	}
	return max;
}

enum nv_err jx_loadb(const char *data, size_t len, const struct jx_limits *lim, json_t **out,
                     struct jx_err *e)
{
	size_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : JX_DEFAULT_MAX_BYTES;
	int max_depth = lim && lim->max_depth > 0 ? lim->max_depth : JX_DEFAULT_MAX_DEPTH;
	json_error_t jerr;
	json_t *v;

	if (data == NULL && len > 0)
		return NV_E_INVAL;
	if (len > max_bytes) {
		jx_fail(e, "JSON document of %zu bytes exceeds the limit of %zu", len, max_bytes);
		return NV_E_TOO_LARGE;
	}
	if (jx_scan_depth(data, len, max_depth) > max_depth) {
		jx_fail(e, "JSON nesting deeper than %d levels", max_depth);
		return NV_E_TOO_LARGE;
	}
	v = json_loadb(data ? data : "", len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (v == NULL) {
		jx_fail(e, "invalid JSON at byte %d: %s", jerr.position, jerr.text);
		return NV_E_PARSE;
	}
	*out = v;
	return NV_OK;
}

/* Reads the next path segment into key (or *idx for "[n]"). Returns the
 * rest of the path, or NULL on a syntax error. *is_idx tells which. */
static const char *jx_next_seg(const char *p, char key[JX_KEY_MAX], size_t *idx, bool *is_idx)
{
	size_t n = 0;

	if (*p == '[') {
		int64_t v;
		const char *end = strchr(p, ']');
		if (end == NULL ||
		    parse_i64_n(p + 1, (size_t)(end - p - 1), 0, INT32_MAX, &v) != NV_OK)
			return NULL;
		*idx = (size_t)v;
		*is_idx = true;
		p = end + 1;
		return *p == '.' ? p + 1 : p;
	}
	*is_idx = false;
	while (*p != '\0' && *p != '.' && *p != '[') {
		if (*p == '\\' && p[1] == '.')
			p++;
		if (n + 1 >= JX_KEY_MAX)
			return NULL;
		key[n++] = *p++;
	}
	key[n] = '\0';
	if (n == 0)
		return NULL;
	return *p == '.' ? p + 1 : p;
}

json_t *jx_path(const json_t *root, const char *path)
{
	char key[JX_KEY_MAX];
	const json_t *cur = root;
	const char *p = path;

	if (path == NULL || *path == '\0')
		return (json_t *)root;
	while (cur != NULL && *p != '\0') {
		size_t idx = 0;
		bool is_idx;
		p = jx_next_seg(p, key, &idx, &is_idx);
		if (p == NULL)
			return NULL;
		if (is_idx)
			cur = json_is_array(cur) ? json_array_get(cur, idx) : NULL;
		else
			cur = json_is_object(cur) ? json_object_get(cur, key) : NULL;
	}
	return (json_t *)cur;
}

static json_t *jx_lookup(const json_t *root, const char *path, struct jx_err *e)
{
	json_t *v = jx_path(root, path);

	if (v == NULL || json_is_null(v)) {
		jx_fail(e, "%s: missing", path);
		return NULL;
	}
	return v;
}

enum nv_err jx_get_str(const json_t *root, const char *path, const char **out, struct jx_err *e)
{
	json_t *v = jx_lookup(root, path, e);

	if (v == NULL)
		return NV_E_NOT_FOUND;
	if (!json_is_string(v)) {
		jx_fail(e, "%s: expected a string, got %s", path, jx_type_name(v));
		return NV_E_INVAL;
	}
	*out = json_string_value(v);
	return NV_OK;
}

enum nv_err jx_get_int(const json_t *root, const char *path, int64_t min, int64_t max, int64_t *out,
                       struct jx_err *e)
{
	json_t *v = jx_lookup(root, path, e);
	json_int_t n;

	if (v == NULL)
		return NV_E_NOT_FOUND;
	if (!json_is_integer(v)) {
		jx_fail(e, "%s: expected an integer, got %s", path, jx_type_name(v));
		return NV_E_INVAL;
	}
	n = json_integer_value(v);
	if (n < min || n > max) {
		jx_fail(e, "%s: %lld is outside [%lld, %lld]", path, (long long)n, (long long)min,
		        (long long)max);
		return NV_E_RANGE;
	}
	*out = (int64_t)n;
	return NV_OK;
}

enum nv_err jx_get_bool(const json_t *root, const char *path, bool *out, struct jx_err *e)
{
	json_t *v = jx_lookup(root, path, e);

	if (v == NULL)
		return NV_E_NOT_FOUND;
	if (!json_is_boolean(v)) {
		jx_fail(e, "%s: expected a boolean, got %s", path, jx_type_name(v));
		return NV_E_INVAL;
	}
	*out = json_is_true(v);
	return NV_OK;
}

static enum nv_err jx_get_typed(const json_t *root, const char *path, json_type t, json_t **out,
                                struct jx_err *e)
{
	json_t *v = jx_lookup(root, path, e);

	if (v == NULL)
		return NV_E_NOT_FOUND;
	if (json_typeof(v) != t) {
		jx_fail(e, "%s: expected %s, got %s", path,
		        t == JSON_OBJECT ? "an object" : "an array", jx_type_name(v));
		return NV_E_INVAL;
	}
	*out = v;
	return NV_OK;
}

enum nv_err jx_get_obj(const json_t *root, const char *path, json_t **out, struct jx_err *e)
{
	return jx_get_typed(root, path, JSON_OBJECT, out, e);
}

enum nv_err jx_get_arr(const json_t *root, const char *path, json_t **out, struct jx_err *e)
{
	return jx_get_typed(root, path, JSON_ARRAY, out, e);
}

const char *jx_str_or(const json_t *root, const char *path, const char *def)
{
	json_t *v = jx_path(root, path);

	return json_is_string(v) ? json_string_value(v) : def;
}

enum nv_err jx_set_take(json_t *root, const char *path, json_t *val)
{
	char key[JX_KEY_MAX];
	json_t *cur = root;
	const char *p = path;
	enum nv_err rc = NV_E_INVAL;

	if (val == NULL || !json_is_object(root) || path == NULL || *path == '\0')
		goto out;
	for (;;) {
		size_t idx;
		bool is_idx;
		p = jx_next_seg(p, key, &idx, &is_idx);
		if (p == NULL || is_idx)
			goto out;
		if (*p == '\0')
			break;
		json_t *next = json_object_get(cur, key);
		if (!json_is_object(next)) {
			next = json_object();
			json_object_set_new(cur, key, next);
		}
		cur = next;
	}
	json_object_set_new(cur, key, val);
	return NV_OK;
out:
	json_decref(val);
	return rc;
}

enum nv_err jx_set_str(json_t *root, const char *path, const char *s)
{
	return jx_set_take(root, path, json_string(s));
}

json_t *jx_merge_patch_apply(const json_t *target, const json_t *patch)
{
	const char *key;
	json_t *pv, *res;

	if (!json_is_object(patch))
		return json_deep_copy(patch);
	res = json_is_object(target) ? json_deep_copy(target) : json_object();
	json_object_foreach((json_t *)patch, key, pv) {
		if (json_is_null(pv)) {
			json_object_del(res, key);
			continue;
		}
		json_object_set_new(res, key, jx_merge_patch_apply(json_object_get(res, key), pv));
	}
	return res;
}

json_t *jx_merge_patch_diff(const json_t *from, const json_t *to)
{
	const char *key;
	json_t *v, *patch;

	if (!json_is_object(from) || !json_is_object(to))
		return json_deep_copy(to);
	patch = json_object();
	json_object_foreach((json_t *)from, key, v) {
		if (json_object_get(to, key) == NULL)
			json_object_set_new(patch, key, json_null());
	}
	json_object_foreach((json_t *)to, key, v) {
		json_t *old = json_object_get(from, key);
		if (old == NULL) {
			json_object_set_new(patch, key, json_deep_copy(v));
		} else if (!json_equal(old, v)) {
			if (json_is_object(old) && json_is_object(v))
				json_object_set_new(patch, key, jx_merge_patch_diff(old, v));
			else
				json_object_set_new(patch, key, json_deep_copy(v));
		}
	}
	return patch;
}

char *jx_dumps(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

void jx_wipe(json_t *v)
{
	const char *key;
	json_t *m;
	size_t i;
	if (json_is_string(v)) {
		// jansson owns the bytes; they are overwritten, never resized.
		secure_wipe((char *)(uintptr_t)json_string_value(v), json_string_length(v));
	} else if (json_is_object(v)) {
		json_object_foreach(v, key, m)
			jx_wipe(m);
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, m)
			jx_wipe(m);
	}
}
