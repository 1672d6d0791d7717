// SPDX-License-Identifier: Apache-2.0
// Unit tests for the informer's list/watch backoff: it doubles up to its
// cap, resets after a healthy stretch, and never waits less than the
// Retry-After of the attempt that failed.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"

static void test_kube_backoff_next_doubles_to_cap(void **state)
{
	(void)state;
	struct kube_backoff b = {800, 800, 30000, 0};
	int64_t step = 800;

	for (int i = 0; i < 10; i++) {
		assert_in_range(kube_backoff_next(&b, -1, 1000), step, 2 * step);
		step = step * 2 > 30000 ? 30000 : step * 2;
	}
	assert_int_equal(b.cur_ms, 30000);
}

/* A watch refused with 429 was retried after 0.8-1.6 s whatever the
 * Retry-After said. */
static void test_kube_backoff_next_waits_retry_after(void **state)
{
	(void)state;
	struct kube_backoff b = {800, 800, 30000, 0};

	assert_int_equal(kube_backoff_next(&b, 5, 1000), 5000);
	assert_int_equal(kube_backoff_next(&b, 5, 1000), 5000);
	/* The backoff has grown past Retry-After: the longer wait wins. */
	assert_in_range(kube_backoff_next(&b, 1, 1000), 3200, 6400);
	/* Retry-After 0 adds nothing. */
	assert_in_range(kube_backoff_next(&b, 0, 1000), 6400, 12800);
}

static void test_kube_backoff_next_resets_after_healthy(void **state)
{
	(void)state;
	struct kube_backoff b = {800, 800, 30000, 0};

	for (int i = 0; i < 5; i++)
		kube_backoff_next(&b, -1, 1000);
	b.healthy_since = 1000;
	assert_in_range(kube_backoff_next(&b, -1, 1000 + 120001), 800, 1600);
	assert_int_equal(b.healthy_since, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_backoff_next_doubles_to_cap),
	        cmocka_unit_test(test_kube_backoff_next_waits_retry_after),
	        cmocka_unit_test(test_kube_backoff_next_resets_after_healthy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
