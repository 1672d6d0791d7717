/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers on top of jansson: bounded parsing, typed accessors addressed by a
 * dotted path whose errors name that path, and JSON merge patches (RFC 7386).
 * Objects stay json_t so fields we do not know survive a read-modify-write. */
/* Contract: pure helpers, thread-safe on distinct values; they never
 * block. jansson values are not locked: a value being changed belongs to
 * one thread, while a value nobody changes may be read and json_incref'd
 * from any thread (jansson 2.11 and later count references atomically).
 * "New reference": the caller json_decref's it; "borrowed": valid while
 * the value it was read from lives and is not changed there. */
#ifndef NVL72_JSON_H
#define NVL72_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "nvl72/err.h"

/* A human-readable reason, always naming the field path when one applies:
 * "metadata.name: expected a string, got an integer". */
struct jx_err {
	char msg[384];
};

/* Bounds for jx_loadb. Zero means the default given below. */
struct jx_limits {
	size_t max_bytes; /* default 16 MiB */
	int max_depth;    /* default 64 nested arrays/objects */
};

#define JX_DEFAULT_MAX_BYTES ((size_t)16 << 20)
#define JX_DEFAULT_MAX_DEPTH 64

/* Parses exactly one JSON value from data[0..len). NV_E_TOO_LARGE when the
 * input or its nesting exceeds the limits (lim may be NULL), NV_E_PARSE on
 * malformed input. *out is a new reference, set only on success. */
enum nv_err jx_loadb(const char *data, size_t len, const struct jx_limits *lim, json_t **out,
                     struct jx_err *e);

/* Nesting depth of the JSON text in data, not counting brackets inside
 * strings; stops counting past limit (returns limit + 1). */
int jx_scan_depth(const char *data, size_t len, int limit);

/* Looks up a path: keys separated by '.', array indexes as "[n]", and "\."
 * for a dot that belongs to a key ("metadata.annotations.nvl72\.io/rack").
 * Returns a borrowed reference, or NULL when any step is absent. */
json_t *jx_path(const json_t *root, const char *path);

/* Typed getters. NV_E_NOT_FOUND when the path is absent (or null),
 * NV_E_INVAL when present with the wrong type; e names the path either way.
 * Every value returned (strings, objects, arrays) is borrowed from root;
 * *out is set only on NV_OK. */
enum nv_err jx_get_str(const json_t *root, const char *path, const char **out, struct jx_err *e);
enum nv_err jx_get_int(const json_t *root, const char *path, int64_t min, int64_t max, int64_t *out,
                       struct jx_err *e);
enum nv_err jx_get_bool(const json_t *root, const char *path, bool *out, struct jx_err *e);
enum nv_err jx_get_obj(const json_t *root, const char *path, json_t **out, struct jx_err *e);
enum nv_err jx_get_arr(const json_t *root, const char *path, json_t **out, struct jx_err *e);
/* Returns the string at path (borrowed from root), or def when absent or
 * not a string. */
const char *jx_str_or(const json_t *root, const char *path, const char *def);

/* Sets the value at a dotted path (no array indexes), creating objects on
 * the way; takes the reference to val on every path. */
enum nv_err jx_set_take(json_t *root, const char *path, json_t *val);
enum nv_err jx_set_str(json_t *root, const char *path, const char *s);

/* Applies an RFC 7386 merge patch to a copy of target (target may be NULL)
 * and returns it as a new reference. */
json_t *jx_merge_patch_apply(const json_t *target, const json_t *patch);
/* Builds the merge patch that turns from into to (new reference); an empty
 * object when they are equal. Arrays are replaced whole, as RFC 7386 says. */
json_t *jx_merge_patch_diff(const json_t *from, const json_t *to);

/* "a string", "an integer", ... for error messages. */
const char *jx_type_name(const json_t *v);
/* Compact serialisation with sorted keys; caller frees. NULL on failure. */
char *jx_dumps(const json_t *v);

/* Overwrites every string value in the tree under v with zero bytes, in
 * place, before a tree that held secrets (a kubeconfig's users, a
 * Secret's data) is released. Keys are left as they are; a tree shared
 * with another owner is wiped for it too. NULL does nothing. */
void jx_wipe(json_t *v);

#endif
