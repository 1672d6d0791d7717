// SPDX-License-Identifier: Apache-2.0
// Reads a List body item by item. A list of a few thousand Nodes is tens of
// megabytes of text and ten times that as one jansson tree; parsed one item
// at a time it costs the text and one item, and an informer stores each
// item (trimmed) before it reads the next.
#include <stdio.h>
#include <string.h>

#include "kube_int.h"

static size_t skip_ws(const char *d, size_t len, size_t i)
{
	while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r'))
		i++;
	return i;
}

/* d[i] is the opening quote; returns the index after the closing one, or
 * len when the string does not end. */
static size_t string_end(const char *d, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (d[i] == '\\')
			i++;
		else if (d[i] == '"')
			return i + 1;
	}
	return len;
}

/* The index after the value that starts at d[i] (an object, an array, a
 * string or a scalar), or len when it does not end. Only the brackets are
 * matched: jansson checks the rest when the value is parsed. */
static size_t value_end(const char *d, size_t len, size_t i)
{
	size_t depth = 0;

	if (i >= len)
		return len;
	if (d[i] == '"')
		return string_end(d, len, i);
	if (d[i] != '{' && d[i] != '[') {
		while (i < len && !strchr(",}] \t\r\n", d[i]))
			i++;
		return i;
	}
	while (i < len) {
		char ch = d[i];
		if (ch == '"') {
			i = string_end(d, len, i);
			continue;
		}
		if (ch == '{' || ch == '[')
			depth++;
		else if ((ch == '}' || ch == ']') && --depth == 0)
			return i + 1;
		i++;
	}
	return len;
}

static enum nv_err bad(struct jx_err *e, size_t at, const char *what)
{
	if (e != NULL)
		snprintf(e->msg, sizeof(e->msg), "list body: %s at byte %zu", what, at);
	return NV_E_PARSE;
}

/* The items array starting at d[*pi]: each item parsed alone and handed
 * to fn. */
static enum nv_err scan_items(const char *d, size_t len, size_t *pi, kube_item_fn fn, void *ud,
                              struct jx_err *e)
{
	const struct jx_limits lim = {.max_bytes = len};
	size_t i = *pi, end;
	enum nv_err rc;

	if (i >= len)
		return bad(e, i, "unterminated items");
	if (len - i >= 4 && memcmp(d + i, "null", 4) == 0) {
		*pi = i + 4;
		return NV_OK;
	}
	if (d[i] != '[')
		return bad(e, i, "items is not an array");
	for (i = skip_ws(d, len, i + 1); i < len && d[i] != ']';) {
		json_t *item = NULL;
		if (d[i] != '{')
			return bad(e, i, "an item is not an object");
		end = value_end(d, len, i);
		if (end >= len)
			return bad(e, i, "unterminated item");
		if ((rc = jx_loadb(d + i, end - i, &lim, &item, e)) != NV_OK)
			return rc;
		rc = fn(ud, item);
		json_decref(item);
		if (rc != NV_OK)
			return rc;
		i = skip_ws(d, len, end);
		if (i < len && d[i] == ',')
			i = skip_ws(d, len, i + 1);
		else if (i >= len || d[i] != ']')
			return bad(e, i, "expected ',' or ']' after an item");
	}
	if (i >= len)
		return bad(e, i, "unterminated items");
	*pi = i + 1;
	return NV_OK;
}

enum nv_err kube_list_scan(const char *d, size_t len, kube_item_fn fn, void *ud, json_t **meta,
                           struct jx_err *e)
{
	json_t *md = NULL;
	size_t i = skip_ws(d, len, 0), ks, ke;
	enum nv_err rc = NV_OK;

	if (i >= len || d[i] != '{')
		return bad(e, i, "not an object");
	i = skip_ws(d, len, i + 1);
	while (rc == NV_OK && i < len && d[i] != '}') {
		if (d[i] != '"') {
			rc = bad(e, i, "expected a key");
			break;
		}
		ks = i + 1;
		i = string_end(d, len, i);
		ke = i - 1;
		i = skip_ws(d, len, i);
		if (i >= len || d[i] != ':') {
			rc = bad(e, i, "expected ':'");
			break;
		}
		i = skip_ws(d, len, i + 1);
		if (ke - ks == 5 && memcmp(d + ks, "items", 5) == 0) {
			rc = scan_items(d, len, &i, fn, ud, e);
		} else {
			size_t end = value_end(d, len, i);
			if (end >= len) {
				rc = bad(e, i, "unterminated value");
			} else if (ke - ks == 8 && memcmp(d + ks, "metadata", 8) == 0) {
				json_decref(md);
				md = NULL;
				rc = jx_loadb(d + i, end - i, NULL, &md, e);
			}
			i = end;
		}
		i = skip_ws(d, len, i);
		if (rc == NV_OK && i < len && d[i] == ',')
			i = skip_ws(d, len, i + 1);
		else if (rc == NV_OK && (i >= len || d[i] != '}'))
			rc = bad(e, i, "expected ',' or '}'");
	}
	if (rc == NV_OK && i >= len)
		rc = bad(e, i, "unterminated list");
	if (rc == NV_OK && skip_ws(d, len, i + 1) != len)
		rc = bad(e, i + 1, "text after the list");
	if (rc == NV_OK && md != NULL && !json_is_object(md))
		rc = bad(e, 0, "metadata is not an object");
	if (rc != NV_OK) {
		json_decref(md);
		return rc;
	}
	*meta = md ? md : json_object();
	return NV_OK;
}
