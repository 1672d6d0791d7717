/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the api unit tests: load a sample object from tests/data,
 * change one member by its field path, and show the errors a parse left. */
#ifndef NVL72_TEST_API_TEST_H
#define NVL72_TEST_API_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "nvl72/api.h"

static inline json_t *test_load(const char *path)
{
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (j == NULL) {
		fprintf(stderr, "%s: %s\n", path, jerr.text);
		abort();
	}
	return j;
}

/* Sets (v non-NULL, reference taken) or deletes (v NULL) the member at a
 * path like "spec.computeTrays[3].node". */
static inline void test_set(json_t *root, const char *path, json_t *v)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", path);
	json_t *cur = root;
	char *p = buf;
	for (;;) {
		size_t n = strcspn(p, ".[");
		char sep = p[n];
		p[n] = '\0';
		if (sep == '\0') {
			if (v != NULL)
				json_object_set_new(cur, p, v);
			else
				json_object_del(cur, p);
			return;
		}
		if (n > 0)
			cur = json_object_get(cur, p);
		if (sep == '[') {
			size_t idx = (size_t)strtoul(p + n + 1, &p, 10);
			p++; /* ']' */
			if (*p == '\0') {
				if (v != NULL)
					json_array_set_new(cur, idx, v);
				else
					json_array_remove(cur, idx);
				return;
			}
			cur = json_array_get(cur, idx);
			p++; /* '.' */
		} else {
			p += n + 1;
		}
	}
}

static inline void test_show(const struct api_errors *e)
{
	for (unsigned i = 0; i < e->n; i++)
		fprintf(stderr, "  %s: %s\n", e->list[i].path, e->list[i].msg);
}

/* Parses obj with fn and checks that it fails with an error at path whose
 * message contains msg. */
#define TEST_REJECTS(fn, type, obj, path, msg)                                                     \
	do {                                                                                       \
		struct api_errors e_;                                                              \
		type *x_ = NULL;                                                                   \
		api_errors_init(&e_);                                                              \
		assert_int_equal(fn((obj), &x_, &e_), NV_E_INVALID_OBJECT);                        \
		assert_null(x_);                                                                   \
		if (!api_errors_has(&e_, (path), (msg)))                                           \
			test_show(&e_);                                                            \
		assert_true(api_errors_has(&e_, (path), (msg)));                                   \
	} while (0)

#endif
