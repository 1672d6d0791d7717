// SPDX-License-Identifier: Apache-2.0
// Unit tests for the field readers: the CRD string patterns, durations,
// path bookkeeping, and the enum tables agreeing with the matrix engine.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/api/api_int.h"

static void test_api_str_matches_patterns(void **state)
{
	(void)state;
	assert_true(api_str_matches(API_S_DNS_LABEL, "gb300-r07"));
	assert_false(api_str_matches(API_S_DNS_LABEL, "gb300-r07-"));
	assert_false(api_str_matches(API_S_DNS_LABEL, "a.b"));
	assert_true(api_str_matches(API_S_DNS_SUBDOMAIN, "gb300-2026.10"));
	assert_false(api_str_matches(API_S_DNS_SUBDOMAIN, "a..b"));
	assert_true(api_str_matches(API_S_STACK, "gb300-r580.173"));
	assert_true(api_str_matches(API_S_DRIVER, "580.173.02"));
	assert_true(api_str_matches(API_S_DRIVER, "615.23"));
	assert_false(api_str_matches(API_S_DRIVER, "5800.1"));
	assert_false(api_str_matches(API_S_DRIVER, "580.1234"));
	assert_true(api_str_matches(API_S_BRANCH, "R615"));
	assert_false(api_str_matches(API_S_BRANCH, "R61"));
	assert_true(api_str_matches(API_S_K8S, "1.34"));
	assert_true(api_str_matches(API_S_K8S, "1.34.2"));
	assert_false(api_str_matches(API_S_K8S, "1.34.2.1"));
	assert_true(api_str_matches(API_S_NUMVER, "13.0"));
	assert_false(api_str_matches(API_S_NUMVER, "13.0.1.1"));
	assert_true(api_str_matches(API_S_CVE, "CVE-2025-23280"));
	assert_true(api_str_matches(API_S_CVE, "CVE-2025-123456"));
	assert_false(api_str_matches(API_S_CVE, "CVE-2025-123"));
	assert_true(api_str_matches(API_S_HHMM, "23:59"));
	assert_false(api_str_matches(API_S_HHMM, "24:00"));
	assert_false(api_str_matches(API_S_HHMM, "12:60"));
	assert_true(api_str_matches(API_S_HOST, "10.40.7.101"));
	assert_true(api_str_matches(API_S_HOST, "fe80::1"));
	assert_false(api_str_matches(API_S_HOST, "host-"));
	assert_true(api_str_matches(API_S_TENANT, ""));
	assert_true(api_str_matches(API_S_OS_NAME, "DGX OS"));
	assert_true(api_str_matches(API_S_PARAM_VALUE, "/etc/x,y:1"));
	assert_false(api_str_matches(API_S_PARAM_VALUE, "a b"));
}

static void test_api_get_duration_forms(void **state)
{
	(void)state;
	struct api_errors e;
	struct api_ctx c;
	api_errors_init(&e);
	api_ctx_init(&c, &e);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "a", "1h30m", "b", "90s", "c", "30m1h",
	                      "d", "100000h", "e", "0s");
	int64_t ms = 0;
	assert_true(api_get_duration(&c, o, "a", &ms));
	assert_int_equal(ms, 90 * 60000);
	assert_true(api_get_duration(&c, o, "b", &ms));
	assert_int_equal(ms, 90000);
	assert_true(api_get_duration(&c, o, "e", &ms));
	assert_int_equal(ms, 0);
	assert_false(api_get_duration(&c, o, "c", &ms));
	assert_false(api_get_duration(&c, o, "d", &ms));
	assert_false(api_get_duration(&c, o, "missing", &ms));
	assert_int_equal(e.n, 2);
	assert_true(api_errors_has(&e, "c", "must be a duration"));
	json_decref(o);
}

static void test_api_path_push_pop(void **state)
{
	(void)state;
	struct api_errors e;
	struct api_ctx c;
	api_errors_init(&e);
	api_ctx_init(&c, &e);
	size_t a = api_path_push(&c, "spec");
	size_t b = api_path_push(&c, "computeTrays");
	size_t i = api_path_push_index(&c, 3);
	api_fail_at(&c, "node", "must not be empty");
	api_path_pop(&c, i);
	api_path_pop(&c, b);
	api_fail(&c, "x");
	api_path_pop(&c, a);
	assert_string_equal(e.list[0].path, "spec.computeTrays[3].node");
	assert_string_equal(e.list[1].path, "spec");
	assert_string_equal(c.path, "");
	for (int k = 0; k < 100; k++)
		(void)api_path_push(&c, "averyveryverylongfieldname");
	assert_int_equal(strlen(c.path), API_PATH_LEN - 1);
}

static void test_api_enum_tables_match_matrix(void **state)
{
	(void)state;
	for (unsigned i = 0; i < MATRIX_C__COUNT; i++)
		assert_string_equal(api_component_names[i],
		                    matrix_component_name((enum matrix_component)i));
	for (unsigned i = 0; i < MATRIX_L__COUNT; i++)
		assert_string_equal(api_layer_names[i], matrix_layer_name((enum matrix_layer)i));
	for (unsigned i = 0; i < 3; i++)
		assert_string_equal(api_platform_names[i],
		                    matrix_platform_name((enum matrix_platform)i));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_api_str_matches_patterns),
	        cmocka_unit_test(test_api_get_duration_forms),
	        cmocka_unit_test(test_api_path_push_pop),
	        cmocka_unit_test(test_api_enum_tables_match_matrix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
