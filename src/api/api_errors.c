// SPDX-License-Identifier: Apache-2.0
// The bounded list of field errors that validation fills, and the path
// bookkeeping that names each error's field. An admission webhook turns the
// list into one denial message; a reconciler into a condition.
#include "nvl72/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/matrix.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

void api_errors_init(struct api_errors *e)
{
	e->n = 0;
	e->dropped = 0;
}

__attribute__((format(printf, 3, 0))) static void
errors_vadd(struct api_errors *e, const char *path, const char *fmt, va_list ap)
{
	if (e->n >= API_ERRORS_MAX) {
		e->dropped++;
		return;
	}
	struct api_error *x = &e->list[e->n++];
	(void)str_copy(x->path, sizeof(x->path), path);
	if (vsnprintf(x->msg, sizeof(x->msg), fmt, ap) < 0)
		x->msg[0] = '\0';
}

void api_errors_add(struct api_errors *e, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	errors_vadd(e, path, fmt, ap);
	va_end(ap);
}

bool api_errors_has(const struct api_errors *e, const char *path, const char *msg)
{
	for (unsigned i = 0; i < e->n; i++) {
		if (strcmp(e->list[i].path, path) != 0)
			continue;
		if (msg == NULL || strstr(e->list[i].msg, msg) != NULL)
			return true;
	}
	return false;
}

enum nv_err api_errors_format(const struct api_errors *e, struct buf *out)
{
	enum nv_err rc = NV_OK;
	for (unsigned i = 0; i < e->n && rc == NV_OK; i++)
		rc = buf_printf(out, "%s%s: %s", i ? "; " : "", e->list[i].path, e->list[i].msg);
	if (rc == NV_OK && e->dropped > 0)
		rc = buf_printf(out, "; and %u more", e->dropped);
	return rc;
}

void api_ctx_init(struct api_ctx *c, struct api_errors *errs)
{
	c->errs = errs;
	c->start = errs->n + errs->dropped;
	c->len = 0;
	c->path[0] = '\0';
}

bool api_ctx_failed(const struct api_ctx *c)
{
	return c->errs->n + c->errs->dropped != c->start;
}

// A path too long to hold is cut; the error still lands near its field.
static void path_grow(struct api_ctx *c, size_t room, int n)
{
	if (n > 0)
		c->len += (size_t)n < room ? (size_t)n : room - 1;
}

size_t api_path_push(struct api_ctx *c, const char *field)
{
	size_t old = c->len;
	size_t room = sizeof(c->path) - c->len;
	path_grow(c, room, snprintf(c->path + c->len, room, "%s%s", c->len ? "." : "", field));
	return old;
}

size_t api_path_push_index(struct api_ctx *c, size_t i)
{
	size_t old = c->len;
	size_t room = sizeof(c->path) - c->len;
	path_grow(c, room, snprintf(c->path + c->len, room, "[%zu]", i));
	return old;
}

void api_path_pop(struct api_ctx *c, size_t len)
{
	c->len = len;
	c->path[len] = '\0';
}

void api_fail(struct api_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	errors_vadd(c->errs, c->path, fmt, ap);
	va_end(ap);
}

void api_fail_at(struct api_ctx *c, const char *field, const char *fmt, ...)
{
	size_t old = api_path_push(c, field);
	va_list ap;
	va_start(ap, fmt);
	errors_vadd(c->errs, c->path, fmt, ap);
	va_end(ap);
	api_path_pop(c, old);
}

json_t *api_conditions_to_json(const struct api_condition *c, unsigned n)
{
	static const char *const st[] = {"Unknown", "True", "False"};
	json_t *arr = json_array();
	for (unsigned i = 0; i < n && i < API_CONDITIONS_MAX; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "type", json_string(c[i].type));
		json_object_set_new(o, "status", json_string(st[(unsigned)c[i].status % 3]));
		if (c[i].observed_generation > 0)
			json_object_set_new(o, "observedGeneration",
			                    json_integer(c[i].observed_generation));
		api_json_set_time(o, "lastTransitionTime", c[i].last_transition_ms);
		json_object_set_new(o, "reason",
		                    json_string(c[i].reason[0] ? c[i].reason : "Unknown"));
		json_object_set_new(o, "message", json_string(c[i].message));
		json_array_append_new(arr, o);
	}
	return arr;
}

void api_json_set_str(json_t *obj, const char *key, const char *s)
{
	if (s != NULL && s[0] != '\0')
		json_object_set_new(obj, key, json_string(s));
}

void api_json_set_time(json_t *obj, const char *key, int64_t wall_ms)
{
	char ts[TIME_RFC3339_LEN];
	if (wall_ms <= 0)
		return;
	time_format_rfc3339(wall_ms, ts);
	json_object_set_new(obj, key, json_string(ts));
}

json_t *api_tray_set_to_json(uint32_t trays)
{
	json_t *arr = json_array();
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++)
		if (trays & (1u << i))
			json_array_append_new(arr, json_integer(i));
	return arr;
}

json_t *api_components_to_json(uint32_t comps)
{
	json_t *arr = json_array();
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if (comps & MATRIX_BIT(c))
			json_array_append_new(
			        arr, json_string(matrix_component_name((enum matrix_component)c)));
	return arr;
}
