// SPDX-License-Identifier: Apache-2.0
// Unit tests for the bounded buffer: growth, the cap, and ownership moves.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/buf.h"

static void test_buf_append_grows_and_terminates(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 1 << 20);
	assert_string_equal(buf_str(&b), "");
	for (int i = 0; i < 1000; i++)
		assert_int_equal(buf_append(&b, "abc", 3), NV_OK);
	assert_int_equal(b.len, 3000);
	assert_int_equal(b.data[b.len], '\0');
	assert_memory_equal(b.data + 2997, "abc", 3);
	buf_clear(&b);
	assert_null(b.data);
}

static void test_buf_append_over_cap_fails_unchanged(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 8);
	assert_int_equal(buf_append_str(&b, "12345678"), NV_OK);
	assert_int_equal(buf_append_byte(&b, 'x'), NV_E_TOO_LARGE);
	assert_string_equal(buf_str(&b), "12345678");
	assert_true(b.cap <= 9);
	buf_reset(&b);
	assert_int_equal(buf_append_str(&b, "123456789"), NV_E_TOO_LARGE);
	assert_int_equal(b.len, 0);
	buf_clear(&b);
}

static void test_buf_printf_formats_and_respects_cap(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 16);
	assert_int_equal(buf_printf(&b, "%s=%d", "trays", 18), NV_OK);
	assert_string_equal(buf_str(&b), "trays=18");
	assert_int_equal(buf_printf(&b, " %s", "a long value here"), NV_E_TOO_LARGE);
	assert_string_equal(buf_str(&b), "trays=18");
	buf_clear(&b);
}

static void test_buf_consume_shifts(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 64);
	buf_append_str(&b, "line1\nline2\n");
	buf_consume(&b, 6);
	assert_string_equal(buf_str(&b), "line2\n");
	buf_consume(&b, 100);
	assert_int_equal(b.len, 0);
	assert_string_equal(buf_str(&b), "");
	buf_clear(&b);
}

static void test_buf_take_moves_ownership(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 64);
	char *empty = buf_take(&b);
	assert_string_equal(empty, "");
	free(empty);
	buf_append_str(&b, "secret");
	char *s = buf_take(&b);
	assert_string_equal(s, "secret");
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	free(s);
	buf_append_str(&b, "token");
	buf_clear_secure(&b);
	assert_null(b.data);
}

/* A secret buffer keeps its contents through growth, and what reset and
 * consume drop is zeroed in place (the allocation is still ours to read). */
static void test_buf_secret_wipes_what_it_drops(void **state)
{
	(void)state;
	struct buf b;
	buf_init_secret(&b, 1 << 20);
	assert_true(b.secret);
	assert_int_equal(buf_append_str(&b, "Bearer abc.def"), NV_OK);
	for (int i = 0; i < 200; i++)
		assert_int_equal(buf_append_str(&b, "0123456789"), NV_OK);
	assert_int_equal(b.len, 14 + 2000);
	assert_memory_equal(b.data, "Bearer abc.def0123", 18);
	assert_true(b.secret);
	buf_consume(&b, 1000);
	assert_int_equal(b.len, 1014);
	for (size_t i = b.len + 1; i < 2015; i++)
		assert_int_equal(b.data[i], 0);
	size_t len = b.len;
	buf_reset(&b);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(b.data[i], 0);
	buf_clear(&b);
	assert_null(b.data);
	// A plain buffer is not marked.
	buf_init(&b, 64);
	assert_false(b.secret);
	buf_clear(&b);
}

static void test_buf_init_huge_max_is_clamped(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, SIZE_MAX);
	assert_true(b.max < SIZE_MAX);
	assert_int_equal(buf_append(&b, "x", 1), NV_OK);
	buf_clear(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_buf_append_grows_and_terminates),
	        cmocka_unit_test(test_buf_append_over_cap_fails_unchanged),
	        cmocka_unit_test(test_buf_printf_formats_and_respects_cap),
	        cmocka_unit_test(test_buf_consume_shifts),
	        cmocka_unit_test(test_buf_take_moves_ownership),
	        cmocka_unit_test(test_buf_init_huge_max_is_clamped),
	        cmocka_unit_test(test_buf_secret_wipes_what_it_drops),
	};
	return cmocka_run_group_tests_name("base/buf", tests, NULL, NULL);
}
