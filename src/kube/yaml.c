// SPDX-License-Identifier: Apache-2.0
// Bounded YAML-to-JSON conversion for kubeconfig files, on libyaml's event
// parser. Depth, node count and scalar size are capped, aliases refused, and
// every error names the path of the node it is about.
#include <stdio.h>
#include <string.h>

#include <yaml.h>

#include "kube_int.h"

#define YAML_MAX_DEPTH 32
#define YAML_MAX_NODES 100000
#define YAML_MAX_SCALAR ((size_t)256 << 10)

struct yframe {
	json_t *node; /* borrowed: owned by its parent or by the root */
	bool is_map;
	char *key;    /* map: the key awaiting its value */
	size_t index; /* sequence: next index */
};

struct yconv {
	struct yframe st[YAML_MAX_DEPTH];
	int depth;
	json_t *root;
	size_t nodes;
	char *err;
	size_t errlen;
};

static void yconv_path(const struct yconv *y, char *out, size_t outsz)
{
	size_t n = 0;

	out[0] = '\0';
	for (int i = 0; i < y->depth && n + 1 < outsz; i++) {
		const struct yframe *f = &y->st[i];
		int w;
		if (f->is_map && f->key != NULL)
			w = snprintf(out + n, outsz - n, "%s%s", n ? "." : "", f->key);
		else if (!f->is_map)
			w = snprintf(out + n, outsz - n, "[%zu]", f->index);
		else
			break;
		if (w < 0)
			break;
		n += (size_t)w;
		if (n >= outsz)
			n = outsz - 1;
	}
	if (n == 0)
		snprintf(out, outsz, "(top level)");
}

__attribute__((format(printf, 2, 3))) static enum nv_err yfail(struct yconv *y, const char *fmt,
                                                               ...)
{
	char path[256], what[192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	yconv_path(y, path, sizeof(path));
	snprintf(y->err, y->errlen, "%s: %s", path, what);
	return NV_E_CONFIG;
}

static json_t *yscalar(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	int64_t n;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return json_stringn(s, len);
	if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
		return json_true();
	if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
		return json_false();
	if (len == 0 || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null"))
		return json_null();
	if (len < 19 && parse_i64(s, INT64_MIN, INT64_MAX, &n) == NV_OK)
		return json_integer((json_int_t)n);
	return json_stringn(s, len);
}

/* Attaches v (taken) to the current container or makes it the root. A
 * container keeps its key in the parent frame until it ends, for paths. */
static enum nv_err yattach(struct yconv *y, json_t *v, bool container)
{
	struct yframe *f;

	if (v == NULL)
		return yfail(y, "value is not valid UTF-8");
	if (++y->nodes > YAML_MAX_NODES) {
		json_decref(v);
		return yfail(y, "more than %d nodes", YAML_MAX_NODES);
	}
	if (y->depth == 0) {
		if (y->root != NULL) {
			json_decref(v);
			return yfail(y, "more than one document");
		}
		y->root = v;
		return NV_OK;
	}
	f = &y->st[y->depth - 1];
	if (!f->is_map) {
		json_array_append_new(f->node, v);
		if (!container)
			f->index++;
		return NV_OK;
	}
	if (f->key == NULL) {
		if (!json_is_string(v)) {
			json_decref(v);
			return yfail(y, "mapping key must be a string");
		}
		f->key = xstrdup(json_string_value(v));
		json_decref(v);
		return NV_OK;
	}
	json_object_set_new(f->node, f->key, v);
	if (!container) {
		free(f->key);
		f->key = NULL;
	}
	return NV_OK;
}

static enum nv_err ypush(struct yconv *y, bool is_map)
{
	json_t *v = is_map ? json_object() : json_array();
	enum nv_err rc;

	if (y->depth >= YAML_MAX_DEPTH) {
		json_decref(v);
		return yfail(y, "nested deeper than %d levels", YAML_MAX_DEPTH);
	}
	json_incref(v);
	rc = yattach(y, v, true);
	if (rc != NV_OK) {
		json_decref(v);
		return rc;
	}
	y->st[y->depth++] = (struct yframe){.node = v, .is_map = is_map};
	json_decref(v); /* the parent (or root) holds it now */
	return NV_OK;
}

static enum nv_err yevent(struct yconv *y, const yaml_event_t *ev, bool *done)
{
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return yfail(y, "YAML aliases are not allowed");
	case YAML_SCALAR_EVENT:
		if (ev->data.scalar.length > YAML_MAX_SCALAR)
			return yfail(y, "value of %zu bytes exceeds the limit of %zu",
			             ev->data.scalar.length, YAML_MAX_SCALAR);
		return yattach(y, yscalar(ev), false);
	case YAML_SEQUENCE_START_EVENT:
		return ypush(y, false);
	case YAML_MAPPING_START_EVENT:
		return ypush(y, true);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (y->depth > 0) {
			y->depth--;
			free(y->st[y->depth].key);
			y->st[y->depth].key = NULL;
		}
		if (y->depth > 0 && y->st[y->depth - 1].is_map) {
			free(y->st[y->depth - 1].key);
			y->st[y->depth - 1].key = NULL;
		} else if (y->depth > 0) {
			y->st[y->depth - 1].index++;
		}
		return NV_OK;
	case YAML_DOCUMENT_END_EVENT:
		if (y->root == NULL)
			y->root = json_null();
		*done = true;
		return NV_OK;
	case YAML_STREAM_END_EVENT:
		*done = true;
		return NV_OK;
	default:
		return NV_OK;
	}
}

enum nv_err kube_yaml_load(const char *data, size_t len, json_t **out, char *err, size_t errlen)
{
	struct yconv y = {.err = err, .errlen = errlen};
	yaml_parser_t p;
	yaml_event_t ev;
	bool done = false;
	enum nv_err rc = NV_OK;

	if (len > KUBECONFIG_MAX_BYTES) {
		snprintf(err, errlen, "document of %zu bytes exceeds the limit of %zu", len,
		         KUBECONFIG_MAX_BYTES);
		return NV_E_TOO_LARGE;
	}
	if (!yaml_parser_initialize(&p))
		return NV_E_INTERNAL;
	yaml_parser_set_input_string(&p, (const unsigned char *)data, len);
	while (!done && rc == NV_OK) {
		if (!yaml_parser_parse(&p, &ev)) {
			snprintf(err, errlen, "YAML syntax error at line %zu: %s",
			         p.problem_mark.line + 1, p.problem ? p.problem : "unknown");
			rc = NV_E_PARSE;
			break;
		}
		rc = yevent(&y, &ev, &done);
		// A kubeconfig's scalars include its tokens and keys.
		if (ev.type == YAML_SCALAR_EVENT && ev.data.scalar.value != NULL)
			secure_wipe(ev.data.scalar.value, ev.data.scalar.length);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	for (int i = 0; i < y.depth; i++)
		free(y.st[i].key);
	if (rc == NV_OK && y.root == NULL)
		y.root = json_object();
	if (rc != NV_OK) {
		json_decref(y.root);
		return rc;
	}
	*out = y.root;
	return NV_OK;
}
