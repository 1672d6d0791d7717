// SPDX-License-Identifier: Apache-2.0
// Typed readers for the members of a JSON object, with the CRDs' bounds,
// enums and string patterns. The apiserver applies the same rules from the
// schema; these run where it cannot (the webhook, tests, the agent).
#include <ctype.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"

const char *const api_layer_names[5] = {"firmware", "fabric", "node", "kubernetes", "workload"};
const char *const api_platform_names[3] = {"gb200", "gb300", "vr200"};
const char *const api_component_names[MATRIX_C__COUNT] = {
        "nvos",          "switchTrayFirmware", "nmx",         "gpuFirmware", "hmcFirmware",
        "bmcFirmware",   "nicFirmware",        "dpuFirmware", "driver",      "doca",
        "ncclNetPlugin", "draDriver",          "kernel",      "os",          "kubernetes",
};
const char *const api_alloc_mode_names[2] = {"Single", "All"};

static bool is_lower_alnum(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

// ^[a-z0-9]([-a-z0-9<extra>]*[a-z0-9])?$ on [s, s + len).
static bool dns_like(const char *s, size_t len, const char *extra)
{
	if (len == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-' && strchr(extra, s[i]) == NULL)
			return false;
	return true;
}

static bool dns_subdomain(const char *s)
{
	for (;;) {
		size_t n = strcspn(s, ".");
		if (!dns_like(s, n, ""))
			return false;
		if (s[n] == '\0')
			return true;
		s += n + 1;
	}
}

static bool chars_in(const char *s, const char *extra, bool alnum)
{
	for (; *s != '\0'; s++)
		if (!(alnum && isalnum((unsigned char)*s)) && strchr(extra, *s) == NULL)
			return false;
	return true;
}

// ^d{min_first,max_first}(\.d{1,max_rest}){0,max_more}$
static bool dotted_digits(const char *s, size_t min_first, size_t max_first, size_t max_rest,
                          size_t max_more)
{
	size_t n = strspn(s, "0123456789");
	if (n < min_first || n > max_first)
		return false;
	s += n;
	for (size_t more = 0; *s != '\0'; more++) {
		if (*s != '.' || more >= max_more)
			return false;
		n = strspn(++s, "0123456789");
		if (n < 1 || n > max_rest)
			return false;
		s += n;
	}
	return true;
}

static bool cve_id(const char *s)
{
	if (strncmp(s, "CVE-", 4) != 0 || strspn(s + 4, "0123456789") != 4 || s[8] != '-')
		return false;
	size_t n = strspn(s + 9, "0123456789");
	return n >= 4 && s[9 + n] == '\0';
}

static bool hhmm(const char *s)
{
	if (strlen(s) != 5 || s[2] != ':' || !isdigit((unsigned char)s[0]) ||
	    !isdigit((unsigned char)s[1]) || !isdigit((unsigned char)s[3]) ||
	    !isdigit((unsigned char)s[4]))
		return false;
	return (s[0] - '0') * 10 + (s[1] - '0') < 24 && s[3] < '6';
}

static bool edge_alnum(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

bool api_str_matches(enum api_str kind, const char *s)
{
	switch (kind) {
	case API_S_ANY:
		return true;
	case API_S_DNS_LABEL:
		return dns_like(s, strlen(s), "");
	case API_S_DNS_SUBDOMAIN:
		return dns_subdomain(s);
	case API_S_STACK:
		return dns_like(s, strlen(s), ".");
	case API_S_SERIAL:
		return chars_in(s, "._-", true);
	case API_S_HOST:
		return edge_alnum(s) && chars_in(s, ".:-", true);
	case API_S_VERSION:
		return isalnum((unsigned char)s[0]) && chars_in(s, "._+~-", true);
	case API_S_DRIVER:
		return dotted_digits(s, 3, 3, 3, 2);
	case API_S_BRANCH:
		return s[0] == 'R' && dotted_digits(s + 1, 3, 3, 0, 0);
	case API_S_NUMVER:
		return dotted_digits(s, 1, 4, 4, 2);
	case API_S_K8S:
		return s[0] == '1' && s[1] == '.' && dotted_digits(s + 2, 1, 3, 3, 1);
	case API_S_CVE:
		return cve_id(s);
	case API_S_HHMM:
		return hhmm(s);
	case API_S_OS_NAME:
		return isalnum((unsigned char)s[0]) && chars_in(s, " ._-", true);
	case API_S_TENANT:
		return s[0] == '\0' || (edge_alnum(s) && chars_in(s, "-_.", true));
	case API_S_PARAM_VALUE:
		return chars_in(s, "._:,/-", true);
	case API_S__COUNT:
		break;
	}
	return false;
}

static const char *const pattern_desc[API_S__COUNT] = {
        [API_S_DNS_LABEL] = "a DNS label (lowercase letters, digits and '-')",
        [API_S_DNS_SUBDOMAIN] = "a DNS subdomain (lowercase letters, digits, '-' and '.')",
        [API_S_STACK] = "a stack name (lowercase letters, digits, '-' and '.')",
        [API_S_SERIAL] = "a serial (letters, digits, '.', '_' and '-')",
        [API_S_HOST] = "a host name or address",
        [API_S_VERSION] = "a version (letters, digits and . _ + ~ -)",
        [API_S_DRIVER] = "a driver version such as 580.173.02 or 615.23",
        [API_S_BRANCH] = "a driver branch such as R580",
        [API_S_NUMVER] = "a numeric version such as 13.0",
        [API_S_K8S] = "a Kubernetes version such as 1.34.2",
        [API_S_CVE] = "a CVE id such as CVE-2025-23280",
        [API_S_HHMM] = "a time of day as HH:MM",
        [API_S_OS_NAME] = "an OS name (letters, digits, space, '.', '_' and '-')",
        [API_S_TENANT] = "a tenant name (letters, digits, '-', '_' and '.')",
        [API_S_PARAM_VALUE] = "a module parameter value (letters, digits and . _ : , / -)",
};

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		break;
	}
	return "null";
}

// The member, or NULL (with an error when required). JSON null counts as
// absent, as it does for the apiserver.
static const json_t *member(struct api_ctx *c, const json_t *obj, const char *field, bool required)
{
	const json_t *v = json_is_object(obj) ? json_object_get(obj, field) : NULL;
	if (v != NULL && !json_is_null(v))
		return v;
	if (required)
		api_fail_at(c, field, "is required");
	return NULL;
}

bool api_get_object(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                    const json_t **out)
{
	const json_t *v = member(c, obj, field, required);
	if (v == NULL)
		return false;
	if (!json_is_object(v)) {
		api_fail_at(c, field, "must be an object, not %s", type_name(v));
		return false;
	}
	*out = v;
	return true;
}

bool api_get_array(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                   size_t min_items, size_t max_items, const json_t **out)
{
	const json_t *v = member(c, obj, field, required);
	if (v == NULL)
		return false;
	if (!json_is_array(v)) {
		api_fail_at(c, field, "must be an array, not %s", type_name(v));
		return false;
	}
	size_t n = json_array_size(v);
	if (n < min_items || n > max_items) {
		if (min_items == max_items)
			api_fail_at(c, field, "must have exactly %zu items, not %zu", min_items, n);
		else if (n < min_items)
			api_fail_at(c, field, "must have at least %zu items", min_items);
		else
			api_fail_at(c, field, "must have at most %zu items", max_items);
		return false;
	}
	*out = v;
	return true;
}

bool api_check_string(struct api_ctx *c, const json_t *v, size_t min_len, size_t max_len,
                      enum api_str kind, char *out, size_t cap)
{
	if (!json_is_string(v)) {
		api_fail(c, "must be a string, not %s", type_name(v));
		return false;
	}
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);
	if (len != strlen(s)) {
		api_fail(c, "must not contain NUL");
		return false;
	}
	if (len < min_len) {
		api_fail(c, min_len == 1 ? "must not be empty" : "must be at least %zu characters",
		         min_len);
		return false;
	}
	if (len > max_len || len >= cap) {
		api_fail(c, "must be at most %zu characters", max_len);
		return false;
	}
	if (len > 0 && !api_str_matches(kind, s)) {
		api_fail(c, "must be %s", pattern_desc[kind]);
		return false;
	}
	memcpy(out, s, len + 1);
	return true;
}

bool api_get_string(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                    size_t min_len, size_t max_len, enum api_str kind, char *out, size_t cap)
{
	const json_t *v = member(c, obj, field, required);
	if (v == NULL)
		return false;
	size_t old = api_path_push(c, field);
	bool ok = api_check_string(c, v, min_len, max_len, kind, out, cap);
	api_path_pop(c, old);
	return ok;
}

bool api_check_int(struct api_ctx *c, const json_t *v, int64_t min, int64_t max, int64_t *out)
{
	if (!json_is_integer(v)) {
		api_fail(c, "must be an integer, not %s", type_name(v));
		return false;
	}
	json_int_t x = json_integer_value(v);
	if (x < min || x > max) {
		api_fail(c, "must be between %lld and %lld", (long long)min, (long long)max);
		return false;
	}
	*out = (int64_t)x;
	return true;
}

bool api_get_int(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                 int64_t min, int64_t max, int64_t *out)
{
	const json_t *v = member(c, obj, field, required);
	if (v == NULL)
		return false;
	size_t old = api_path_push(c, field);
	bool ok = api_check_int(c, v, min, max, out);
	api_path_pop(c, old);
	return ok;
}

bool api_get_bool(struct api_ctx *c, const json_t *obj, const char *field, bool *out)
{
	const json_t *v = member(c, obj, field, false);
	if (v == NULL)
		return false;
	if (!json_is_boolean(v)) {
		api_fail_at(c, field, "must be a boolean, not %s", type_name(v));
		return false;
	}
	*out = json_is_true(v);
	return true;
}

bool api_check_enum(struct api_ctx *c, const json_t *v, const char *const *names, size_t n,
                    int *out)
{
	const char *s = json_string_value(v);
	for (size_t i = 0; s != NULL && i < n; i++) {
		if (strcmp(names[i], s) == 0) {
			*out = (int)i;
			return true;
		}
	}
	char list[API_MSG_LEN] = "";
	size_t len = 0;
	for (size_t i = 0; i < n && len + 32 < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "",
		                        names[i]);
	api_fail(c, "must be one of: %s", list);
	return false;
}

bool api_get_enum(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                  const char *const *names, size_t n, int *out)
{
	const json_t *v = member(c, obj, field, required);
	if (v == NULL)
		return false;
	size_t old = api_path_push(c, field);
	bool ok = api_check_enum(c, v, names, n, out);
	api_path_pop(c, old);
	return ok;
}

// ^([0-9]{1,5}h)?([0-9]{1,5}m)?([0-9]{1,5}s)?$, at least one part.
static bool duration_parse(const char *s, int64_t *out_ms)
{
	static const char units[] = "hms";
	static const int64_t scale[] = {3600000, 60000, 1000};
	int64_t total = 0;
	unsigned u = 0;
	if (*s == '\0')
		return false;
	while (*s != '\0') {
		size_t n = strspn(s, "0123456789");
		if (n < 1 || n > 5)
			return false;
		const char *unit = strchr(units + u, s[n]);
		if (s[n] == '\0' || unit == NULL)
			return false;
		int64_t v = 0;
		if (parse_i64_n(s, n, 0, 99999, &v) != NV_OK)
			return false;
		u = (unsigned)(unit - units);
		total += v * scale[u];
		u++;
		s += n + 1;
	}
	*out_ms = total;
	return true;
}

bool api_get_duration(struct api_ctx *c, const json_t *obj, const char *field, int64_t *out_ms)
{
	char s[24];
	if (!api_get_string(c, obj, field, false, 2, 20, API_S_ANY, s, sizeof(s)))
		return false;
	if (!duration_parse(s, out_ms)) {
		api_fail_at(c, field, "must be a duration such as 72h, 90m or 1h30m");
		return false;
	}
	return true;
}

bool api_get_time(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                  int64_t *out_ms)
{
	char s[65];
	if (!api_get_string(c, obj, field, required, 1, 64, API_S_ANY, s, sizeof(s)))
		return false;
	if (time_parse_rfc3339(s, out_ms) != NV_OK) {
		api_fail_at(c, field, "must be an RFC 3339 date-time");
		return false;
	}
	return true;
}

const json_t *api_envelope(struct api_ctx *c, const json_t *obj, const char *kind, bool namespaced,
                           struct api_meta *meta, bool *meta_ok)
{
	const json_t *spec = NULL;
	bool ok = false;
	if (!json_is_object(obj)) {
		api_fail(c, "must be an object");
	} else {
		ok = api_meta_parse(c, obj, kind, namespaced, meta);
		if (!api_get_object(c, obj, "spec", true, &spec))
			spec = NULL;
	}
	if (meta_ok)
		*meta_ok = ok;
	return spec;
}

bool api_meta_parse(struct api_ctx *c, const json_t *obj, const char *kind, bool namespaced,
                    struct api_meta *out)
{
	char s[64];
	size_t errs = c->errs->n;
	if (api_get_string(c, obj, "apiVersion", false, 0, 63, API_S_ANY, s, sizeof(s)) &&
	    strcmp(s, API_VERSION) != 0)
		api_fail_at(c, "apiVersion", "must be %s", API_VERSION);
	if (api_get_string(c, obj, "kind", false, 0, 63, API_S_ANY, s, sizeof(s)) &&
	    strcmp(s, kind) != 0)
		api_fail_at(c, "kind", "must be %s", kind);
	const json_t *md = NULL;
	if (api_get_object(c, obj, "metadata", true, &md)) {
		size_t old = api_path_push(c, "metadata");
		// Every CRD caps names at 63: they end up in label values.
		(void)api_get_string(c, md, "name", true, 1, 63, API_S_DNS_SUBDOMAIN, out->name,
		                     sizeof(out->name));
		(void)api_get_string(c, md, "namespace", namespaced, 1, 63, API_S_DNS_LABEL,
		                     out->ns, sizeof(out->ns));
		(void)api_get_string(c, md, "uid", false, 0, 63, API_S_ANY, out->uid,
		                     sizeof(out->uid));
		(void)api_get_string(c, md, "resourceVersion", false, 0, 63, API_S_ANY,
		                     out->resource_version, sizeof(out->resource_version));
		(void)api_get_int(c, md, "generation", false, 0, INT64_MAX, &out->generation);
		(void)api_get_time(c, md, "creationTimestamp", false, &out->created_ms);
		api_path_pop(c, old);
	}
	return c->errs->n == errs;
}

void api_each_object(struct api_ctx *c, const json_t *arr, const char *field, api_item_fn fn,
                     void *arg)
{
	size_t old = api_path_push(c, field);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		const json_t *item = json_array_get(arr, i);
		if (json_is_object(item))
			fn(c, item, i, arg);
		else
			api_fail(c, "must be an object, not %s", type_name(item));
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

bool api_get_enum_set(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                      size_t min_items, const char *const *names, size_t n, uint32_t *out)
{
	const json_t *arr = NULL;
	if (!api_get_array(c, obj, field, required, min_items, n, &arr))
		return false;
	size_t old = api_path_push(c, field);
	uint32_t set = 0;
	bool ok = true;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		int v = 0;
		if (!api_check_enum(c, json_array_get(arr, i), names, n, &v)) {
			ok = false;
		} else if (set & (1u << v)) {
			api_fail(c, "duplicate value \"%s\"", names[v]);
			ok = false;
		}
		set |= 1u << v;
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
	if (ok)
		*out = set;
	return ok;
}

bool api_get_tray_set(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                      size_t min_items, uint32_t *out)
{
	const json_t *arr = NULL;
	if (!api_get_array(c, obj, field, required, min_items, 18, &arr))
		return false;
	size_t old = api_path_push(c, field);
	uint32_t set = 0;
	bool ok = true;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		int64_t v = 0;
		if (!api_check_int(c, json_array_get(arr, i), 1, 18, &v)) {
			ok = false;
		} else if (set & (1u << v)) {
			api_fail(c, "duplicate value %lld", (long long)v);
			ok = false;
		}
		set |= 1u << (v & 31);
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
	if (ok)
		*out = set;
	return ok;
}
