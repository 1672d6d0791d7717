// SPDX-License-Identifier: Apache-2.0
// Unit tests for reading a List body item by item: every item reaches the
// callback whole and in order, the metadata comes back wherever it sits,
// the callback's error stops the scan, and malformed text is refused with
// the byte where it went wrong.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"

struct seen {
	json_t *items;
	size_t stop_after; /* 0: never */
};

static enum nv_err collect(void *ud, json_t *item)
{
	struct seen *s = ud;
	json_array_append(s->items, item);
	if (s->stop_after && json_array_size(s->items) == s->stop_after)
		return NV_E_CANCELLED;
	return NV_OK;
}

static enum nv_err scan(const char *text, struct seen *s, json_t **meta, struct jx_err *e)
{
	return kube_list_scan(text, strlen(text), collect, s, meta, e);
}

static void test_kube_list_scan_hands_over_each_item(void **state)
{
	(void)state;
	/* Brackets and quotes inside strings must not end an item early. */
	const char *text =
	        " {\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"items\": [\n"
	        "  {\"metadata\":{\"name\":\"a\",\"annotations\":{\"x\":\"}]\\\"[{\"}}},\n"
	        "  {\"metadata\":{\"name\":\"b\"},\"spec\":{\"n\":[1,2,{\"c\":null}]}}\n"
	        " ], \"metadata\":{\"resourceVersion\":\"42\",\"continue\":\"tok\"}}\n";
	struct seen s = {json_array(), 0};
	struct jx_err e;
	json_t *meta = NULL;

	assert_int_equal(scan(text, &s, &meta, &e), NV_OK);
	assert_int_equal(json_array_size(s.items), 2);
	assert_string_equal(kube_obj_name(json_array_get(s.items, 0)), "a");
	assert_string_equal(jx_str_or(json_array_get(s.items, 0), "metadata.annotations.x", ""),
	                    "}]\"[{");
	assert_int_equal(json_array_size(jx_path(json_array_get(s.items, 1), "spec.n")), 3);
	assert_string_equal(jx_str_or(meta, "resourceVersion", ""), "42");
	assert_string_equal(jx_str_or(meta, "continue", ""), "tok");
	json_decref(meta);
	json_decref(s.items);
}

static void test_kube_list_scan_empty_and_null_items(void **state)
{
	(void)state;
	const char *texts[] = {"{\"items\":[],\"metadata\":{}}", "{\"items\":null}", "{}",
	                       "{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[ ]}"};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct seen s = {json_array(), 0};
		struct jx_err e;
		json_t *meta = NULL;
		assert_int_equal(scan(texts[i], &s, &meta, &e), NV_OK);
		assert_int_equal(json_array_size(s.items), 0);
		assert_true(json_is_object(meta));
		json_decref(meta);
		json_decref(s.items);
	}
}

static void test_kube_list_scan_stops_on_callback_error(void **state)
{
	(void)state;
	const char *text = "{\"items\":[{\"a\":1},{\"a\":2},{\"a\":3}]}";
	struct seen s = {json_array(), 2};
	struct jx_err e;
	json_t *meta = NULL;

	assert_int_equal(scan(text, &s, &meta, &e), NV_E_CANCELLED);
	assert_int_equal(json_array_size(s.items), 2);
	assert_null(meta);
	json_decref(s.items);
}

static void test_kube_list_scan_refuses_malformed(void **state)
{
	(void)state;
	const char *bad[] = {
	        "",
	        "[]",
	        "{\"items\":[{\"a\":1}",                /* unterminated */
	        "{\"items\":[{\"a\":1} {\"a\":2}]}",    /* no comma */
	        "{\"items\":[1,2]}",                    /* not objects */
	        "{\"items\":{\"a\":1}}",                /* not an array */
	        "{\"items\":[{\"a\":tru}]}",            /* jansson refuses the item */
	        "{\"items\":[]} trailing",              /* text after the list */
	        "{\"metadata\":[],\"items\":[]}",       /* metadata not an object */
	        "{items:[]}",                           /* unquoted key */
	        "{\"items\":[{\"a\":\"unterminated}]}", /* a string that never ends */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct seen s = {json_array(), 0};
		struct jx_err e = {{0}};
		json_t *meta = NULL;
		assert_int_equal(scan(bad[i], &s, &meta, &e), NV_E_PARSE);
		assert_null(meta);
		assert_true(e.msg[0] != '\0');
		json_decref(s.items);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_list_scan_hands_over_each_item),
	        cmocka_unit_test(test_kube_list_scan_empty_and_null_items),
	        cmocka_unit_test(test_kube_list_scan_stops_on_callback_error),
	        cmocka_unit_test(test_kube_list_scan_refuses_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
