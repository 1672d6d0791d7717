// SPDX-License-Identifier: Apache-2.0
// Unit tests for the registry of backends: lookup by name and the list of
// names, over a table of stand-in ops structs.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/fabric/fabric_int.h"

struct fake_ops {
	const char *name;
	int id;
};

static const struct fake_ops one = {"one", 1}, two = {"two-x", 2};
static const void *const table[] = {&one, &two};
static char names[32];
static const struct fabric_registry reg = {table, ARRAY_LEN(table), names, sizeof(names)};

static void test_fabric_registry_find_by_name(void **state)
{
	(void)state;
	assert_ptr_equal(fabric_registry_find(&reg, "one"), &one);
	assert_ptr_equal(fabric_registry_find(&reg, "two-x"), &two);
	assert_null(fabric_registry_find(&reg, "two"));
	assert_null(fabric_registry_find(&reg, ""));
	assert_null(fabric_registry_find(&reg, NULL));
}

static void test_fabric_registry_names_in_order(void **state)
{
	static char small[6], empty[8];
	const struct fabric_registry cut = {table, ARRAY_LEN(table), small, sizeof(small)};
	const struct fabric_registry none = {table, 0, empty, sizeof(empty)};

	(void)state;
	assert_string_equal(fabric_registry_names(&reg), "one, two-x");
	assert_ptr_equal(fabric_registry_names(&reg), names);
	assert_string_equal(fabric_registry_names(&cut), "one, ");
	assert_string_equal(fabric_registry_names(&none), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_fabric_registry_find_by_name),
	        cmocka_unit_test(test_fabric_registry_names_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
