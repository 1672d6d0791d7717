// SPDX-License-Identifier: Apache-2.0
// Unit tests for the allocation wrappers, including the out-of-memory abort.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvl72/alloc.h"

static void test_xstrndup_and_xasprintf(void **state)
{
	(void)state;
	char *a = xstrndup("abcdef", 3);
	assert_string_equal(a, "abc");
	char *b = xasprintf("%s/%d", "tray", 18);
	assert_string_equal(b, "tray/18");
	free(a);
	free(b);
	char *z = xmalloc(0);
	assert_non_null(z);
	free(z);
}

static void test_secure_free_str_null_ok(void **state)
{
	(void)state;
	secure_free_str(NULL);
	secure_free_str(xstrdup("token"));
	char key[8] = "secret!";
	secure_wipe(key, sizeof(key));
	for (size_t i = 0; i < sizeof(key); i++)
		assert_int_equal(key[i], 0);
}

static void test_xreallocarray_overflow_aborts(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(STDERR_FILENO);
		(void)xreallocarray(NULL, SIZE_MAX / 2, 4);
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGABRT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_xstrndup_and_xasprintf),
	        cmocka_unit_test(test_secure_free_str_null_ok),
	        cmocka_unit_test(test_xreallocarray_overflow_aborts),
	};
	return cmocka_run_group_tests_name("base/alloc", tests, NULL, NULL);
}
