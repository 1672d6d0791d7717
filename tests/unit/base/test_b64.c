// SPDX-License-Identifier: Apache-2.0
// Unit tests for src/base/b64.c: round trips and the bounded decoder's
// refusals.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/b64.h"
#include "nvl72/base.h"

static void test_b64_round_trip(void **state)
{
	(void)state;
	static const char *const in[] = {"", "a", "ab", "abc", "abcd", "{\"op\":\"add\"}"};
	for (size_t i = 0; i < ARRAY_LEN(in); i++) {
		struct buf b;
		buf_init(&b, 1024);
		assert_int_equal(b64_encode(in[i], strlen(in[i]), &b), NV_OK);
		char *raw = NULL;
		size_t len = 99;
		assert_int_equal(b64_decode(buf_str(&b), 1024, &raw, &len), NV_OK);
		assert_int_equal(len, strlen(in[i]));
		assert_memory_equal(raw, in[i], len);
		free(raw);
		buf_clear(&b);
	}
	char *raw = NULL;
	size_t len = 0;
	assert_int_equal(b64_decode("abc", 1024, &raw, &len), NV_E_PARSE);
	assert_int_equal(b64_decode("a!c=", 1024, &raw, &len), NV_E_PARSE);
	assert_int_equal(b64_decode("YWJjZA==", 2, &raw, &len), NV_E_TOO_LARGE);
}

static void test_b64_decode_refuses_embedded_nul(void **state)
{
	(void)state;
	char *raw = NULL;
	size_t len = 0;
	/* "YQBi" is "a\0b": not a C string, refused. */
	assert_int_equal(b64_decode("YQBi", 1024, &raw, &len), NV_E_PARSE);
	assert_null(raw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_b64_round_trip),
	        cmocka_unit_test(test_b64_decode_refuses_embedded_nul),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
