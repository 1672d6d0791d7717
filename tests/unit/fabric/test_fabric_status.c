// SPDX-License-Identifier: Apache-2.0
// Unit tests for src/fabric/fabric_status.c: the schedule of polls that
// fabric_op_wait and oob_op_wait share.
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/fabric/fabric_int.h"

static void test_fabric_poll_next_doubles_up_to_the_cap(void **state)
{
	(void)state;
	struct fabric_poll p;
	struct fabric_status st = {0};
	fabric_poll_start(&p, 1, 3, 60000);
	assert_int_equal(fabric_poll_next(&p, "op-1", FABRIC_OP_PENDING, NULL, &st), NV_OK);
	assert_int_equal(p.interval_ms, 2);
	assert_int_equal(fabric_poll_next(&p, "op-1", FABRIC_OP_PENDING, NULL, &st), NV_OK);
	assert_int_equal(p.interval_ms, 3);
	assert_int_equal(fabric_poll_next(&p, "op-1", FABRIC_OP_PENDING, NULL, &st), NV_OK);
	assert_int_equal(p.interval_ms, 3);
	assert_string_equal(st.message, "");
}

static void test_fabric_poll_next_past_the_deadline(void **state)
{
	(void)state;
	struct fabric_poll p;
	struct fabric_status st = {0};
	fabric_poll_start(&p, 10, 10, 0);
	assert_int_equal(fabric_poll_next(&p, "op-2", FABRIC_OP_IN_PROGRESS, NULL, &st),
	                 NV_E_TIMEOUT);
	assert_string_equal(st.message, "operation op-2 still in-progress after 0 ms");
}

static void test_fabric_poll_next_sees_stop(void **state)
{
	(void)state;
	struct fabric_poll p;
	struct fabric_status st = {0};
	volatile bool stop = true;
	fabric_poll_start(&p, 10000, 10000, 60000);
	assert_int_equal(fabric_poll_next(&p, "op-3", FABRIC_OP_PENDING, &stop, &st),
	                 NV_E_CANCELLED);
	assert_string_equal(st.message, "stopped while waiting for operation op-3");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_fabric_poll_next_doubles_up_to_the_cap),
	        cmocka_unit_test(test_fabric_poll_next_past_the_deadline),
	        cmocka_unit_test(test_fabric_poll_next_sees_stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
