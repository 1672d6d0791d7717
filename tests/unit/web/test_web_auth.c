// SPDX-License-Identifier: Apache-2.0
// Unit tests for the headers the web server judges a client by: bearer
// tokens found, refused or too large.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/web.h"

static void test_web_bearer_parse_cases(void **state)
{
	(void)state;
	const char *tok = NULL;
	size_t n = 0;
	const char *h = "Bearer abc";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_OK);
	assert_int_equal(n, 3);
	assert_memory_equal(tok, "abc", 3);
	h = "  BEARER\tx.y.z  ";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_OK);
	assert_int_equal(n, 5);
	h = "Bearer";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_E_NOT_FOUND);
	h = "Bearer   ";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_E_NOT_FOUND);
	h = "Bearerabc";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_E_NOT_FOUND);
	h = "Basic abc";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_E_NOT_FOUND);
	h = "Bearer a b";
	assert_int_equal(web_bearer_parse(h, strlen(h), &tok, &n), NV_E_PARSE);
	char *big = malloc(WEB_TOKEN_MAX + 16);
	assert_non_null(big);
	memcpy(big, "Bearer ", 7);
	memset(big + 7, 'a', WEB_TOKEN_MAX + 1);
	assert_int_equal(web_bearer_parse(big, WEB_TOKEN_MAX + 8, &tok, &n), NV_E_TOO_LARGE);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_web_bearer_parse_cases),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
