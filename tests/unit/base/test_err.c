// SPDX-License-Identifier: Apache-2.0
// Unit tests for the error enum: every value has a name and a message, and
// only transient failures are retryable.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/err.h"

static void test_nv_err_name_every_value(void **state)
{
	(void)state;
	for (int e = 0; e < NV_E__COUNT; e++) {
		const char *n = nv_err_name((enum nv_err)e);
		assert_true(strncmp(n, "NV_", 3) == 0);
		assert_string_not_equal(n, "NV_E_UNKNOWN");
		assert_string_not_equal(nv_err_str((enum nv_err)e), "unknown error");
	}
	assert_string_equal(nv_err_name(NV_E_CONFLICT), "NV_E_CONFLICT");
	assert_string_equal(nv_err_name((enum nv_err)9999), "NV_E_UNKNOWN");
	assert_string_equal(nv_err_str((enum nv_err) - 1), "unknown error");
}

static void test_nv_err_retryable_only_transient(void **state)
{
	(void)state;
	assert_true(nv_err_retryable(NV_E_THROTTLED));
	assert_true(nv_err_retryable(NV_E_TRANSPORT));
	assert_true(nv_err_retryable(NV_E_SERVER));
	assert_true(nv_err_retryable(NV_E_TIMEOUT));
	assert_false(nv_err_retryable(NV_OK));
	assert_false(nv_err_retryable(NV_E_CONFLICT));
	assert_false(nv_err_retryable(NV_E_FORBIDDEN));
	assert_false(nv_err_retryable(NV_E_INVALID_OBJECT));
	assert_false(nv_err_retryable(NV_E_TLS));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_nv_err_name_every_value),
	        cmocka_unit_test(test_nv_err_retryable_only_transient),
	};
	return cmocka_run_group_tests_name("base/err", tests, NULL, NULL);
}
