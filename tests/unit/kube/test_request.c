// SPDX-License-Identifier: Apache-2.0
// Unit tests for the retry decision of the request path: Retry-After is
// honoured, a Retry-After of 0 still waits the backoff, the backoff is
// bounded, and retries stop after max_retries.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"

static struct kube_client client(void)
{
	struct kube_client c;

	memset(&c, 0, sizeof(c));
	c.o.max_retries = 10;
	c.o.backoff_base_ms = 200;
	c.o.backoff_max_ms = 10000;
	return c;
}

static struct kube_status status(long code, int retry_after_s)
{
	struct kube_status st;

	memset(&st, 0, sizeof(st));
	st.http_code = code;
	st.retry_after_s = retry_after_s;
	return st;
}

static void test_kube_should_retry_waits_retry_after(void **state)
{
	(void)state;
	struct kube_client c = client();
	struct kube_status st = status(429, 7);
	int64_t wait = -1;

	assert_true(kube_should_retry(&c, "PUT", NV_E_THROTTLED, &st, false, 0, &wait));
	assert_int_equal(wait, 7000);
	st = status(503, 3);
	assert_true(kube_should_retry(&c, "POST", NV_E_SERVER, &st, false, 4, &wait));
	assert_int_equal(wait, 3000);
}

static void test_kube_should_retry_429_without_retry_after_waits_1s(void **state)
{
	(void)state;
	struct kube_client c = client();
	struct kube_status st = status(429, -1);
	int64_t wait = -1;

	assert_true(kube_should_retry(&c, "GET", NV_E_THROTTLED, &st, false, 0, &wait));
	assert_int_equal(wait, 1000);
}

/* A Retry-After of 0 used to mean ten immediate repeats. */
static void test_kube_should_retry_retry_after_zero_waits_backoff(void **state)
{
	(void)state;
	struct kube_client c = client();
	struct kube_status st = status(429, 0);
	int64_t wait = -1;

	for (int attempt = 0; attempt < 10; attempt++) {
		int64_t full = 200LL << attempt;
		if (full > 10000)
			full = 10000;
		assert_true(
		        kube_should_retry(&c, "GET", NV_E_THROTTLED, &st, false, attempt, &wait));
		assert_in_range(wait, full / 2, full);
	}
	st = status(500, 0);
	assert_true(kube_should_retry(&c, "POST", NV_E_SERVER, &st, false, 0, &wait));
	assert_in_range(wait, 100, 200);
}

static void test_kube_should_retry_503_backs_off_within_cap(void **state)
{
	(void)state;
	struct kube_client c = client();
	struct kube_status st = status(503, -1);
	int64_t wait = -1;

	assert_true(kube_should_retry(&c, "PATCH", NV_E_SERVER, &st, false, 0, &wait));
	assert_in_range(wait, 100, 200);
	assert_true(kube_should_retry(&c, "PATCH", NV_E_SERVER, &st, false, 9, &wait));
	assert_in_range(wait, 5000, 10000);
}

static void test_kube_should_retry_stops_after_max_retries(void **state)
{
	(void)state;
	struct kube_client c = client();
	struct kube_status st = status(429, 1);
	int64_t wait = -1;

	assert_true(kube_should_retry(&c, "GET", NV_E_THROTTLED, &st, false, 9, &wait));
	assert_false(kube_should_retry(&c, "GET", NV_E_THROTTLED, &st, false, 10, &wait));
}

static void test_kube_should_retry_500_write_not_repeated(void **state)
{
	(void)state;
	struct kube_client c = client();
	struct kube_status st = status(500, -1);
	int64_t wait = -1;

	assert_false(kube_should_retry(&c, "POST", NV_E_SERVER, &st, false, 0, &wait));
	assert_true(kube_should_retry(&c, "GET", NV_E_SERVER, &st, false, 0, &wait));
	assert_true(kube_should_retry(&c, "POST", NV_E_TRANSPORT, &st, true, 0, &wait));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_should_retry_waits_retry_after),
	        cmocka_unit_test(test_kube_should_retry_429_without_retry_after_waits_1s),
	        cmocka_unit_test(test_kube_should_retry_retry_after_zero_waits_backoff),
	        cmocka_unit_test(test_kube_should_retry_503_backs_off_within_cap),
	        cmocka_unit_test(test_kube_should_retry_stops_after_max_retries),
	        cmocka_unit_test(test_kube_should_retry_500_write_not_repeated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
