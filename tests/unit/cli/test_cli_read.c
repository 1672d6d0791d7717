// SPDX-License-Identifier: Apache-2.0
// Unit tests for what the plugin's views read out of an object: tray sets
// as ranges and durations in the largest two units.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../../src/cli/cli_int.h"
#include "nvl72/json.h"

static void test_cli_trays_str_ranges(void **state)
{
	(void)state;
	char out[64];
	json_t *a = json_pack("[i,i,i,i,i]", 1, 2, 3, 7, 9);
	cli_trays_str(a, out, sizeof(out));
	assert_string_equal(out, "1-3,7,9");
	cli_trays_str(NULL, out, sizeof(out));
	assert_string_equal(out, "-");
	json_decref(a);
}

static void test_cli_duration_units(void **state)
{
	(void)state;
	char out[32];
	cli_duration(50 * 3600000LL, out, sizeof(out));
	assert_string_equal(out, "2d2h");
	cli_duration(3 * 3600000LL + 30 * 60000, out, sizeof(out));
	assert_string_equal(out, "3h30m");
	cli_duration(45 * 60000, out, sizeof(out));
	assert_string_equal(out, "45m");
	cli_duration(12000, out, sizeof(out));
	assert_string_equal(out, "12s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cli_trays_str_ranges),
	        cmocka_unit_test(test_cli_duration_units),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
