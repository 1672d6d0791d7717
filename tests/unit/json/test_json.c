// SPDX-License-Identifier: Apache-2.0
// Unit tests for the JSON helpers: bounded parsing, path accessors whose
// errors name the field, and RFC 7386 merge patches.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/json.h"

static json_t *load(const char *s)
{
	json_t *v = NULL;
	assert_int_equal(jx_loadb(s, strlen(s), NULL, &v, NULL), NV_OK);
	return v;
}

static void test_jx_loadb_rejects_garbage_and_trailing(void **state)
{
	(void)state;
	struct jx_err e;
	json_t *v = NULL;
	assert_int_equal(jx_loadb("{\"a\":", 5, NULL, &v, &e), NV_E_PARSE);
	assert_non_null(strstr(e.msg, "invalid JSON"));
	assert_int_equal(jx_loadb("{} {}", 5, NULL, &v, &e), NV_E_PARSE);
	assert_null(v);
}

static void test_jx_loadb_caps_size_and_depth(void **state)
{
	(void)state;
	struct jx_err e;
	struct jx_limits lim = {.max_bytes = 8, .max_depth = 3};
	json_t *v = NULL;
	assert_int_equal(jx_loadb("[1,2,3,4,5]", 11, &lim, &v, &e), NV_E_TOO_LARGE);
	lim.max_bytes = 100;
	assert_int_equal(jx_loadb("[[[[1]]]]", 9, &lim, &v, &e), NV_E_TOO_LARGE);
	assert_non_null(strstr(e.msg, "nesting"));
	/* Brackets inside strings do not count. */
	assert_int_equal(jx_loadb("[\"[[[[[\"]", 9, &lim, &v, &e), NV_OK);
	json_decref(v);
}

static void test_jx_get_str_names_path(void **state)
{
	(void)state;
	struct jx_err e;
	const char *s = NULL;
	json_t *v = load("{\"metadata\":{\"name\":7,\"annotations\":{\"nvl72.io/rack\":\"r1\"}},"
	                 "\"items\":[{\"x\":\"y\"}]}");
	assert_int_equal(jx_get_str(v, "metadata.name", &s, &e), NV_E_INVAL);
	assert_string_equal(e.msg, "metadata.name: expected a string, got an integer");
	assert_int_equal(jx_get_str(v, "metadata.uid", &s, &e), NV_E_NOT_FOUND);
	assert_string_equal(e.msg, "metadata.uid: missing");
	assert_int_equal(jx_get_str(v, "metadata.annotations.nvl72\\.io/rack", &s, &e), NV_OK);
	assert_string_equal(s, "r1");
	assert_int_equal(jx_get_str(v, "items[0].x", &s, &e), NV_OK);
	assert_string_equal(s, "y");
	assert_null(jx_path(v, "items[1].x"));
	assert_null(jx_path(v, "items[x]"));
	assert_string_equal(jx_str_or(v, "nope", "def"), "def");
	json_decref(v);
}

static void test_jx_get_int_bool_range(void **state)
{
	(void)state;
	struct jx_err e;
	int64_t n = 0;
	bool b = false;
	json_t *o = NULL;
	json_t *v = load("{\"a\":{\"n\":42,\"b\":true,\"big\":99999}}");
	assert_int_equal(jx_get_int(v, "a.n", 0, 100, &n, &e), NV_OK);
	assert_int_equal(n, 42);
	assert_int_equal(jx_get_int(v, "a.big", 0, 100, &n, &e), NV_E_RANGE);
	assert_non_null(strstr(e.msg, "a.big"));
	assert_int_equal(jx_get_bool(v, "a.b", &b, &e), NV_OK);
	assert_true(b);
	assert_int_equal(jx_get_bool(v, "a.n", &b, &e), NV_E_INVAL);
	assert_int_equal(jx_get_obj(v, "a", &o, &e), NV_OK);
	assert_int_equal(jx_get_arr(v, "a", &o, &e), NV_E_INVAL);
	assert_string_equal(e.msg, "a: expected an array, got an object");
	json_decref(v);
}

static void test_jx_set_take_creates_objects(void **state)
{
	(void)state;
	json_t *v = json_object();
	assert_int_equal(jx_set_str(v, "metadata.labels.app", "x"), NV_OK);
	assert_string_equal(jx_str_or(v, "metadata.labels.app", ""), "x");
	assert_int_equal(jx_set_take(v, "a[0]", json_true()), NV_E_INVAL);
	json_decref(v);
}

static void test_jx_merge_patch_rfc7386_cases(void **state)
{
	(void)state;
	json_t *t = load("{\"a\":\"b\",\"c\":{\"d\":\"e\",\"f\":\"g\"},\"l\":[1,2]}");
	json_t *p = load("{\"a\":\"z\",\"c\":{\"f\":null},\"l\":[3],\"n\":{\"x\":null}}");
	json_t *want = load("{\"a\":\"z\",\"c\":{\"d\":\"e\"},\"l\":[3],\"n\":{}}");
	json_t *r = jx_merge_patch_apply(t, p);
	assert_true(json_equal(r, want));
	json_t *d = jx_merge_patch_diff(t, r);
	json_t *r2 = jx_merge_patch_apply(t, d);
	assert_true(json_equal(r2, r));
	json_t *same = jx_merge_patch_diff(t, t);
	assert_int_equal(json_object_size(same), 0);
	char *s = jx_dumps(d);
	assert_string_equal(s, "{\"a\":\"z\",\"c\":{\"f\":null},\"l\":[3],\"n\":{}}");
	free(s);
	json_decref(same);
	json_decref(r2);
	json_decref(d);
	json_decref(r);
	json_decref(want);
	json_decref(p);
	json_decref(t);
}

static void test_jx_wipe_zeroes_every_string(void **state)
{
	(void)state;
	json_t *j = json_pack("{s:{s:s, s:[s, i, {s:s}]}, s:s, s:b}", "data", "tls.key",
	                      "LS0tLS1CRUdJTg==", "list", "token-one", 7, "token", "token-two",
	                      "name", "kept-length", "flag", 1);
	jx_wipe(j);
	const char *paths[] = {"data.tls\\.key", "data.list[0]", "data.list[2].token", "name"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		const json_t *s = jx_path(j, paths[i]);
		assert_non_null(s);
		for (size_t k = 0; k < json_string_length(s); k++)
			assert_int_equal(json_string_value(s)[k], 0);
	}
	// Lengths, keys and other values are left alone.
	assert_int_equal(json_string_length(jx_path(j, "name")), 11);
	assert_int_equal(json_integer_value(jx_path(j, "data.list[1]")), 7);
	assert_true(json_is_true(jx_path(j, "flag")));
	jx_wipe(NULL);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_jx_loadb_rejects_garbage_and_trailing),
	        cmocka_unit_test(test_jx_loadb_caps_size_and_depth),
	        cmocka_unit_test(test_jx_get_str_names_path),
	        cmocka_unit_test(test_jx_get_int_bool_range),
	        cmocka_unit_test(test_jx_set_take_creates_objects),
	        cmocka_unit_test(test_jx_merge_patch_rfc7386_cases),
	        cmocka_unit_test(test_jx_wipe_zeroes_every_string),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
