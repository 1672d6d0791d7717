// SPDX-License-Identifier: Apache-2.0
// Unit tests for clocks and RFC 3339 timestamps as the API writes them.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/timeutil.h"

static void test_time_mono_ms_advances(void **state)
{
	(void)state;
	int64_t a = time_mono_ms();
	time_sleep_ms(20);
	int64_t b = time_mono_ms();
	assert_true(b - a >= 20);
	assert_true(time_wall_ms() > 1700000000000LL);
}

static void test_time_format_rfc3339_round_trip(void **state)
{
	(void)state;
	char s[TIME_RFC3339_LEN];
	int64_t t = 1795967391123LL; /* 2026-11-29T15:49:51.123Z */
	time_format_rfc3339(t, s);
	assert_string_equal(s, "2026-11-29T15:49:51Z");
	time_format_rfc3339_ms(t, s);
	assert_string_equal(s, "2026-11-29T15:49:51.123Z");
	int64_t back;
	assert_int_equal(time_parse_rfc3339(s, &back), NV_OK);
	assert_int_equal(back, t);
}

static void test_time_parse_rfc3339_offsets_and_fractions(void **state)
{
	(void)state;
	int64_t t;
	assert_int_equal(time_parse_rfc3339("1970-01-01T00:00:00Z", &t), NV_OK);
	assert_int_equal(t, 0);
	assert_int_equal(time_parse_rfc3339("1970-01-01T01:00:00+01:00", &t), NV_OK);
	assert_int_equal(t, 0);
	assert_int_equal(time_parse_rfc3339("1970-01-01T00:00:00.5Z", &t), NV_OK);
	assert_int_equal(t, 500);
	assert_int_equal(time_parse_rfc3339("1970-01-01T00:00:01.123456789Z", &t), NV_OK);
	assert_int_equal(t, 1123);
}

static void test_time_parse_rfc3339_rejects(void **state)
{
	(void)state;
	int64_t t = 42;
	const char *bad[] = {"",
	                     "2026-11-29",
	                     "2026-11-29T15:49:51",
	                     "2026-11-29 15:49:51Z",
	                     "2026-13-01T00:00:00Z",
	                     "2026-11-29T25:00:00Z",
	                     "2026-11-29T15:49:51Zjunk",
	                     "2026-11-29T15:49:51.Z",
	                     "2026-11-29T15:49:51+0100"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(time_parse_rfc3339(bad[i], &t), NV_OK);
	assert_int_equal(t, 42);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_time_mono_ms_advances),
	        cmocka_unit_test(test_time_format_rfc3339_round_trip),
	        cmocka_unit_test(test_time_parse_rfc3339_offsets_and_fractions),
	        cmocka_unit_test(test_time_parse_rfc3339_rejects),
	};
	return cmocka_run_group_tests_name("base/timeutil", tests, NULL, NULL);
}
