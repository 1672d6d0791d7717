// SPDX-License-Identifier: Apache-2.0
// Unit tests for checked parsing: every rejection path and the bounds.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/parse.h"

static void test_parse_i64_accepts_and_bounds(void **state)
{
	(void)state;
	int64_t v = 7;
	assert_int_equal(parse_i64("42", 0, 100, &v), NV_OK);
	assert_int_equal(v, 42);
	assert_int_equal(parse_i64("-5", -10, 10, &v), NV_OK);
	assert_int_equal(v, -5);
	v = 7;
	assert_int_equal(parse_i64("101", 0, 100, &v), NV_E_RANGE);
	assert_int_equal(v, 7);
	assert_int_equal(parse_i64("99999999999999999999", INT64_MIN, INT64_MAX, &v), NV_E_RANGE);
	assert_int_equal(v, 7);
}

static void test_parse_i64_rejects_garbage(void **state)
{
	(void)state;
	int64_t v = 7;
	const char *bad[] = {"", " 1", "1 ", "1x", "0x10", "--1", "+", "1.5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse_i64(bad[i], INT64_MIN, INT64_MAX, &v), NV_E_PARSE);
	assert_int_equal(parse_i64(NULL, 0, 1, &v), NV_E_PARSE);
	assert_int_equal(v, 7);
}

static void test_parse_u64_rejects_negative(void **state)
{
	(void)state;
	uint64_t v = 3;
	assert_int_equal(parse_u64("-1", 0, UINT64_MAX, &v), NV_E_PARSE);
	assert_int_equal(parse_u64("18446744073709551615", 0, UINT64_MAX, &v), NV_OK);
	assert_true(v == UINT64_MAX);
	assert_int_equal(parse_u64("18446744073709551616", 0, UINT64_MAX, &v), NV_E_RANGE);
}

static void test_parse_i64_n_reads_prefix(void **state)
{
	(void)state;
	int64_t v;
	assert_int_equal(parse_i64_n("1234abc", 4, 0, 10000, &v), NV_OK);
	assert_int_equal(v, 1234);
	assert_int_equal(parse_i64_n("12", 0, 0, 10, &v), NV_E_PARSE);
	assert_int_equal(parse_i64_n("1234567890123456789012345678901234", 34, 0, 10, &v),
	                 NV_E_RANGE);
}

static void test_parse_hex_u64_prefix_optional(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(parse_hex_u64("0x1f", &v), NV_OK);
	assert_int_equal(v, 31);
	assert_int_equal(parse_hex_u64("FF", &v), NV_OK);
	assert_int_equal(v, 255);
	assert_int_equal(parse_hex_u64("0x", &v), NV_E_PARSE);
	assert_int_equal(parse_hex_u64("12g", &v), NV_E_PARSE);
}

static void test_parse_double_rejects_nan_and_bounds(void **state)
{
	(void)state;
	double d;
	assert_int_equal(parse_double("0.95", 0, 1, &d), NV_OK);
	assert_true(d > 0.949 && d < 0.951);
	assert_int_equal(parse_double("nan", -1e9, 1e9, &d), NV_E_RANGE);
	assert_int_equal(parse_double("inf", -1e9, 1e9, &d), NV_E_RANGE);
	assert_int_equal(parse_double("2", 0, 1, &d), NV_E_RANGE);
	assert_int_equal(parse_double("1e", 0, 1, &d), NV_E_PARSE);
}

static void test_parse_bool_words(void **state)
{
	(void)state;
	bool b = false;
	assert_int_equal(parse_bool("TRUE", &b), NV_OK);
	assert_true(b);
	assert_int_equal(parse_bool("off", &b), NV_OK);
	assert_false(b);
	assert_int_equal(parse_bool("maybe", &b), NV_E_PARSE);
}

static void test_parse_duration_ms_units(void **state)
{
	(void)state;
	int64_t ms;
	assert_int_equal(parse_duration_ms("1h30m", &ms), NV_OK);
	assert_int_equal(ms, 5400000);
	assert_int_equal(parse_duration_ms("250ms", &ms), NV_OK);
	assert_int_equal(ms, 250);
	assert_int_equal(parse_duration_ms("7d", &ms), NV_OK);
	assert_int_equal(ms, 7LL * 86400000);
	assert_int_equal(parse_duration_ms("0", &ms), NV_OK);
	assert_int_equal(ms, 0);
	assert_int_equal(parse_duration_ms("10", &ms), NV_E_PARSE);
	assert_int_equal(parse_duration_ms("5y", &ms), NV_E_PARSE);
	assert_int_equal(parse_duration_ms("-5s", &ms), NV_E_PARSE);
	assert_int_equal(parse_duration_ms("99999999999999999999h", &ms), NV_E_RANGE);
}

static void test_str_copy_truncates_and_reports(void **state)
{
	(void)state;
	char small[4];
	assert_int_equal(str_copy(small, sizeof(small), "abc"), NV_OK);
	assert_string_equal(small, "abc");
	assert_int_equal(str_copy(small, sizeof(small), "abcd"), NV_E_TOO_LARGE);
	assert_string_equal(small, "abc");
	char s[] = "  x y \n";
	assert_string_equal(str_trim(s), "x y");
	assert_true(str_has_prefix("nvl72.io/rack", "nvl72.io/"));
	assert_true(str_has_suffix("config.cfg", ".cfg"));
	assert_false(str_has_suffix("a", "abc"));
}

static void test_parse_hostport_forms(void **state)
{
	(void)state;
	char host[16];
	int port = 7;
	assert_int_equal(parse_hostport("127.0.0.1:8080", host, sizeof(host), &port), NV_OK);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 8080);
	assert_int_equal(parse_hostport(":9400", host, sizeof(host), &port), NV_OK);
	assert_string_equal(host, "");
	assert_int_equal(port, 9400);
	assert_int_equal(parse_hostport("[::1]:9", host, sizeof(host), &port), NV_OK);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 9);
	assert_int_equal(parse_hostport("localhost:0", host, sizeof(host), &port), NV_OK);
	assert_string_equal(host, "localhost");
	assert_int_equal(port, 0);
	assert_int_equal(parse_hostport("0", host, sizeof(host), &port), NV_OK);
	assert_string_equal(host, "");
	assert_int_equal(port, -1);
	assert_int_equal(parse_hostport("", host, sizeof(host), &port), NV_OK);
	assert_int_equal(port, -1);
}

static void test_parse_hostport_rejects(void **state)
{
	(void)state;
	char host[16] = "kept";
	int port = 7;
	const char *bad[] = {"[::1]",
	                     "[::1]x:80",
	                     "[:80",
	                     "8080",
	                     "h:",
	                     "h:99999",
	                     "h:-1",
	                     "h:80x",
	                     "h: 80",
	                     "h:0x50",
	                     "a-host-name-too-long:80",
	                     "[0123:4567:89ab::1]:80"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse_hostport(bad[i], host, sizeof(host), &port), NV_E_INVAL);
	assert_string_equal(host, "kept");
	assert_int_equal(port, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_parse_i64_accepts_and_bounds),
	        cmocka_unit_test(test_parse_i64_rejects_garbage),
	        cmocka_unit_test(test_parse_u64_rejects_negative),
	        cmocka_unit_test(test_parse_i64_n_reads_prefix),
	        cmocka_unit_test(test_parse_hex_u64_prefix_optional),
	        cmocka_unit_test(test_parse_double_rejects_nan_and_bounds),
	        cmocka_unit_test(test_parse_bool_words),
	        cmocka_unit_test(test_parse_duration_ms_units),
	        cmocka_unit_test(test_str_copy_truncates_and_reports),
	        cmocka_unit_test(test_parse_hostport_forms),
	        cmocka_unit_test(test_parse_hostport_rejects),
	};
	return cmocka_run_group_tests_name("base/parse", tests, NULL, NULL);
}
