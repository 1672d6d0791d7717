// SPDX-License-Identifier: Apache-2.0
// Unit tests for version parsing and ordering (driver, firmware, NVOS and
// Kubernetes formats) and for the CUDA/NCCL ranges built from them.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/matrix.h"

static int cmp(const char *a, const char *b)
{
	struct matrix_version va;
	struct matrix_version vb;
	assert_int_equal(matrix_version_parse(a, &va), NV_OK);
	assert_int_equal(matrix_version_parse(b, &vb), NV_OK);
	int c = matrix_version_cmp(&va, &vb);
	// The order is antisymmetric whatever the inputs.
	assert_int_equal(matrix_version_cmp(&vb, &va), -c);
	return c;
}

static void test_matrix_version_cmp_driver(void **state)
{
	(void)state;
	assert_true(cmp("580.173.02", "580.95.05") > 0); // numeric, not text
	assert_int_equal(cmp("580.173.02", "580.173.2"), 0);
	assert_true(cmp("615.23", "580.173.02") > 0);
	assert_true(cmp("580.142", "580.142.01") < 0);
	assert_int_equal(cmp("580.142", "580.142.00"), 0);
	assert_true(cmp("570.158.01", "570.211.01") < 0);
}

static void test_matrix_version_cmp_firmware(void **state)
{
	(void)state;
	assert_true(cmp("97.00.B9.00.69", "97.00.C1.00.01") < 0);
	assert_true(cmp("97.00.B9.00.69", "97.00.B10.00.01") < 0);
	assert_true(cmp("25.06-A", "25.06") > 0);
	assert_true(cmp("25.06-A", "25.06-B") < 0);
	assert_true(cmp("25.06-B", "25.07") < 0);
	assert_int_equal(cmp("25.06-a", "25.06-A"), 0);
	assert_true(cmp("25.02.2445", "25.02.4317") < 0);
	assert_true(cmp("28.46.3048", "28.46.999") > 0);
}

static void test_matrix_version_cmp_edges(void **state)
{
	(void)state;
	assert_int_equal(cmp("v1.34.1", "1.34.1"), 0);
	assert_true(cmp("1.34", "1.34.1") < 0);
	assert_int_equal(cmp("13", "13.0"), 0);
	assert_true(cmp("13.0", "13.0.1") < 0);
	assert_true(cmp("1.0rc10", "1.0rc9") > 0);
	assert_true(cmp("1.0.1", "1.0.a") < 0);
	assert_int_equal(cmp("00012", "12"), 0);
	assert_true(cmp("99999999999999999999999999", "9999") > 0);
	assert_true(cmp("6.8.0-1025-nvidia-64k", "6.8.0-1024-nvidia-64k") > 0);
	assert_int_equal(matrix_version_cmp_str("", ""), 0);
	assert_true(matrix_version_cmp_str("", "1") < 0);
}

static void test_matrix_version_parse_rejects(void **state)
{
	(void)state;
	struct matrix_version v;
	const char *bad[] = {"",     ".1",  "1.", "1..2",
	                     "1.2 ", "1/2", "-1", "1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16.17"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(matrix_version_parse(bad[i], &v), NV_OK);
	char longv[80];
	memset(longv, '1', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	assert_int_equal(matrix_version_parse(longv, &v), NV_E_TOO_LARGE);
	assert_int_equal(matrix_version_parse(NULL, &v), NV_E_PARSE);
	assert_int_equal(matrix_version_parse("25.06-A", &v), NV_OK);
	assert_int_equal(v.nseg, 3);
}

static void test_matrix_driver_parse_branch(void **state)
{
	(void)state;
	struct matrix_driver d;
	assert_int_equal(matrix_driver_parse("580.173.02", &d), NV_OK);
	assert_int_equal(d.branch, 580);
	assert_int_equal(matrix_driver_parse("615.23", &d), NV_OK);
	assert_int_equal(d.branch, 615);
	assert_int_not_equal(matrix_driver_parse("580", &d), NV_OK);
	assert_int_not_equal(matrix_driver_parse("580.1.2.3", &d), NV_OK);
	assert_int_not_equal(matrix_driver_parse("580.a", &d), NV_OK);
	unsigned b = 0;
	assert_int_equal(matrix_branch_parse("R580", &b), NV_OK);
	assert_int_equal(b, 580);
	assert_int_not_equal(matrix_branch_parse("Rx", &b), NV_OK);
	assert_int_not_equal(matrix_branch_parse("R", &b), NV_OK);
}

static bool in_range(const char *range, const char *v)
{
	struct matrix_range r;
	struct matrix_version x;
	assert_int_equal(matrix_range_parse(range, &r), NV_OK);
	assert_int_equal(matrix_version_parse(v, &x), NV_OK);
	return matrix_range_contains(&r, &x);
}

static void test_matrix_range_contains_bounds(void **state)
{
	(void)state;
	assert_true(in_range(">=12.8, <=13.0", "12.8"));
	assert_true(in_range(">=12.8, <=13.0", "13.0.2")); // 13.0.x is 13.0
	assert_false(in_range(">=12.8, <=13.0", "12.7.9"));
	assert_false(in_range(">=12.8, <=13.0", "13.1"));
	assert_true(in_range(">= 2.25.2 <2.29", "2.28.9"));
	assert_false(in_range(">=2.25.2,<2.29", "2.29.0"));
	assert_true(in_range("*", "1"));
	assert_true(in_range("2.27.7", "2.27.7"));
	assert_false(in_range("2.27.7", "2.27.8"));
	assert_true(in_range(">13.0", "13.1"));
	assert_false(in_range(">13.0", "13.0.5"));
	assert_true(in_range("<13", "12.9"));
}

static void test_matrix_range_parse_rejects(void **state)
{
	(void)state;
	struct matrix_range r;
	assert_int_not_equal(matrix_range_parse("", &r), NV_OK);
	assert_int_not_equal(matrix_range_parse(">=", &r), NV_OK);
	assert_int_not_equal(matrix_range_parse(">=1 <2 >3 <4 >5", &r), NV_OK);
	assert_int_not_equal(matrix_range_parse("=>1", &r), NV_OK);
	assert_int_equal(matrix_range_set_inclusive(&r, "13.0", "12.8"), NV_E_RANGE);
	assert_int_equal(matrix_range_set_inclusive(&r, "12.8", "13.0"), NV_OK);
	char s[64];
	matrix_range_format(&r, s, sizeof(s));
	assert_string_equal(s, ">=12.8, <=13.0");
	memset(&r, 0, sizeof(r));
	matrix_range_format(&r, s, sizeof(s));
	assert_string_equal(s, "*");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_matrix_version_cmp_driver),
	        cmocka_unit_test(test_matrix_version_cmp_firmware),
	        cmocka_unit_test(test_matrix_version_cmp_edges),
	        cmocka_unit_test(test_matrix_version_parse_rejects),
	        cmocka_unit_test(test_matrix_driver_parse_branch),
	        cmocka_unit_test(test_matrix_range_contains_bounds),
	        cmocka_unit_test(test_matrix_range_parse_rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
