/* SPDX-License-Identifier: Apache-2.0 */
/* Field readers shared by the parsers of every kind. Each one reads one
 * member of a JSON object, checks it as the CRD schema does and, when it is
 * wrong, records an error at the member's full path. */
/* Private to src/api/ and its unit test tests/unit/api/test_api_field.c;
 * other modules go through nvl72/api*.h. */
#ifndef NVL72_API_INT_H
#define NVL72_API_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/api.h"
#include "nvl72/matrix.h"

/* Where validation is in the object, and the list it reports to. */
struct api_ctx {
	struct api_errors *errs;
	unsigned start; /* errors (kept or dropped) when validation began */
	size_t len;
	char path[API_PATH_LEN];
};

void api_ctx_init(struct api_ctx *c, struct api_errors *errs);
/* Whether this validation has reported anything since api_ctx_init. */
bool api_ctx_failed(const struct api_ctx *c);
/* Appends ".field" (or "field" at the root) or "[i]"; returns the length
 * to give back to api_path_pop. */
size_t api_path_push(struct api_ctx *c, const char *field);
size_t api_path_push_index(struct api_ctx *c, size_t i);
void api_path_pop(struct api_ctx *c, size_t len);
/* Records an error at the current path, or at path.field. */
void api_fail(struct api_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void api_fail_at(struct api_ctx *c, const char *field, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/* The string patterns of the CRDs. */
enum api_str {
	API_S_ANY = 0,
	API_S_DNS_LABEL,     /* ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ */
	API_S_DNS_SUBDOMAIN, /* DNS labels joined by dots */
	API_S_STACK,         /* ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ */
	API_S_SERIAL,        /* ^[A-Za-z0-9._-]*$ */
	API_S_HOST,          /* ^[A-Za-z0-9]([A-Za-z0-9.:-]*[A-Za-z0-9])?$ */
	API_S_VERSION,       /* ^[0-9A-Za-z][0-9A-Za-z._+~-]*$ */
	API_S_DRIVER,        /* ^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?$ */
	API_S_BRANCH,        /* ^R[0-9]{3}$ */
	API_S_NUMVER,        /* ^[0-9]{1,4}(\.[0-9]{1,4}){0,2}$ */
	API_S_K8S,           /* ^1\.[0-9]{1,3}(\.[0-9]{1,3})?$ */
	API_S_CVE,           /* ^CVE-[0-9]{4}-[0-9]{4,}$ */
	API_S_HHMM,          /* ^([01][0-9]|2[0-3]):[0-5][0-9]$ */
	API_S_OS_NAME,       /* ^[A-Za-z0-9][A-Za-z0-9 ._-]*$ */
	API_S_TENANT,        /* ^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$ */
	API_S_PARAM_VALUE,   /* ^[A-Za-z0-9._:,/-]*$ */
	API_S__COUNT
};

bool api_str_matches(enum api_str kind, const char *s);

/* Object and array members. A missing required member is an error; a
 * present one of the wrong type always is. true when *out was set. */
bool api_get_object(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                    const json_t **out);
bool api_get_array(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                   size_t min_items, size_t max_items, const json_t **out);
/* A string of min_len..max_len bytes matching kind, copied into out (cap
 * bytes). Left untouched when absent or wrong. */
bool api_get_string(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                    size_t min_len, size_t max_len, enum api_str kind, char *out, size_t cap);
/* Checks a string already at hand (an array item) at the current path. */
bool api_check_string(struct api_ctx *c, const json_t *v, size_t min_len, size_t max_len,
                      enum api_str kind, char *out, size_t cap);
bool api_get_int(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                 int64_t min, int64_t max, int64_t *out);
bool api_check_int(struct api_ctx *c, const json_t *v, int64_t min, int64_t max, int64_t *out);
bool api_get_bool(struct api_ctx *c, const json_t *obj, const char *field, bool *out);
/* One of names[0..n); *out is its index. */
bool api_get_enum(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                  const char *const *names, size_t n, int *out);
bool api_check_enum(struct api_ctx *c, const json_t *v, const char *const *names, size_t n,
                    int *out);
/* The CRDs' "1h30m" durations (hours, minutes, seconds, each at most five
 * digits). */
bool api_get_duration(struct api_ctx *c, const json_t *obj, const char *field, int64_t *out_ms);
/* An RFC 3339 date-time. */
bool api_get_time(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                  int64_t *out_ms);

/* Calls fn on each item of arr (the member field), with the path at
 * field[i]; an item that is no object is an error instead. */
typedef void (*api_item_fn)(struct api_ctx *c, const json_t *item, size_t i, void *arg);
void api_each_object(struct api_ctx *c, const json_t *arr, const char *field, api_item_fn fn,
                     void *arg);
/* A list-type=set of enum values as a bitmask (1 << index); n <= 32. */
bool api_get_enum_set(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                      size_t min_items, const char *const *names, size_t n, uint32_t *out);
/* A set of tray indices 1..18 as a bitmask (1 << index). */
bool api_get_tray_set(struct api_ctx *c, const json_t *obj, const char *field, bool required,
                      size_t min_items, uint32_t *out);

/* apiVersion and kind (checked when present) and metadata.name. */
bool api_meta_parse(struct api_ctx *c, const json_t *obj, const char *kind, bool namespaced,
                    struct api_meta *out);
/* The envelope every kind shares: an object with metadata and a spec.
 * Returns the spec, or NULL once the reason is reported; *meta_ok (may be
 * NULL) tells whether the metadata parsed. */
const json_t *api_envelope(struct api_ctx *c, const json_t *obj, const char *kind, bool namespaced,
                           struct api_meta *meta, bool *meta_ok);

/* The CRDs' enums, in the order of enum matrix_layer, matrix_platform
 * and matrix_component. */
extern const char *const api_layer_names[5];
extern const char *const api_platform_names[3];
extern const char *const api_component_names[MATRIX_C__COUNT];
/* channel.allocationMode of a ComputeDomain and imex.channels.allocationMode
 * of a ComputeTray, in the order of enum api_alloc_mode. */
extern const char *const api_alloc_mode_names[2];

/* A tray bitmask as a JSON array of indices (new reference). */
json_t *api_tray_set_to_json(uint32_t trays);
/* A MATRIX_BIT(component) mask as a JSON array of names. */
json_t *api_components_to_json(uint32_t comps);

/* Adds s to a JSON object when it is not empty (borrowed key, new value). */
void api_json_set_str(json_t *obj, const char *key, const char *s);
void api_json_set_time(json_t *obj, const char *key, int64_t wall_ms);

#endif
