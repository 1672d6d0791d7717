// SPDX-License-Identifier: Apache-2.0
// Unit tests for out-of-band updates through the simulator backend: which
// components and targets are accepted, an update that completes after the
// delay and changes the version, one count per step even when asked again
// (also from a second backend, as after an operator restart), and an
// injected failure.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "nvl72/base.h"
#include "nvl72/oob.h"

struct fx {
	char dir[64];
	struct oob_config c;
	struct oob_backend *b;
};

static void fx_init(struct fx *x, long delay_ms)
{
	struct fabric_status st;

	snprintf(x->dir, sizeof(x->dir), "/tmp/nvl72-oob-test.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	oob_config_init(&x->c);
	str_copy(x->c.sim_root, sizeof(x->c.sim_root), x->dir);
	x->c.sim_delay_ms = delay_ms;
	x->c.poll_interval_ms = 20;
	x->c.poll_max_interval_ms = 50;
	x->c.op_deadline_ms = 10000;
	assert_int_equal(oob_backend_new(&x->c, &x->b, &st), NV_OK);
	assert_string_equal(oob_backend_name(x->b), "sim");
}

static void fx_clear(struct fx *x)
{
	char p[128];
	static const char *const files[] = {"oob/state", "oob/lock", "oob/fail.nvos.switch-3"};

	oob_backend_free(x->b);
	for (size_t i = 0; i < ARRAY_LEN(files); i++) {
		snprintf(p, sizeof(p), "%s/%s", x->dir, files[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/oob", x->dir);
	rmdir(p);
	rmdir(x->dir);
}

/* The number of accepted updates of key ("nvos.switch-3") in oob/state. */
static int count(struct fx *x, const char *key)
{
	char p[128], line[256], want[96];
	int n = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s/oob/state", x->dir);
	snprintf(want, sizeof(want), "n.%s=", key);
	f = fopen(p, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, want, strlen(want)) == 0)
			n = atoi(line + strlen(want));
	fclose(f);
	return n;
}

static void test_oob_target_check_components_and_indices(void **state)
{
	char why[128];

	(void)state;
	assert_true(oob_component_is_oob(MATRIX_C_NVOS));
	assert_true(oob_component_is_oob(MATRIX_C_BMC_FIRMWARE));
	assert_false(oob_component_is_oob(MATRIX_C_DRIVER));
	assert_false(oob_component_is_oob(MATRIX_C_KUBERNETES));
	assert_int_equal(oob_target_check(MATRIX_C_NVOS, &(struct oob_target){OOB_SWITCH_TRAY, 9},
	                                  why, sizeof(why)),
	                 NV_OK);
	assert_int_equal(oob_target_check(MATRIX_C_GPU_FIRMWARE,
	                                  &(struct oob_target){OOB_COMPUTE_TRAY, 18}, why,
	                                  sizeof(why)),
	                 NV_OK);
	assert_int_equal(oob_target_check(MATRIX_C_NVOS, &(struct oob_target){OOB_SWITCH_TRAY, 10},
	                                  why, sizeof(why)),
	                 NV_E_INVAL);
	assert_non_null(strstr(why, "outside 1..9"));
	assert_int_equal(oob_target_check(MATRIX_C_NVOS, &(struct oob_target){OOB_SWITCH_TRAY, 0},
	                                  why, sizeof(why)),
	                 NV_E_INVAL);
	assert_int_equal(oob_target_check(MATRIX_C_NVOS, &(struct oob_target){OOB_COMPUTE_TRAY, 1},
	                                  why, sizeof(why)),
	                 NV_E_INVAL);
	assert_non_null(strstr(why, "not updated on compute trays"));
	assert_int_equal(oob_target_check(MATRIX_C_DRIVER,
	                                  &(struct oob_target){OOB_COMPUTE_TRAY, 1}, why,
	                                  sizeof(why)),
	                 NV_E_INVAL);
	assert_non_null(strstr(why, "not updated out of band"));
}

static void test_oob_update_completes_after_delay(void **state)
{
	struct oob_target t = {OOB_SWITCH_TRAY, 3};
	struct fabric_status st;
	struct oob_op op;
	struct fx x;
	char v[64];

	(void)state;
	fx_init(&x, 200);
	assert_int_equal(oob_version(x.b, MATRIX_C_NVOS, &t, v, sizeof(v), &st), NV_E_NOT_FOUND);
	assert_int_equal(oob_update(x.b, MATRIX_C_NVOS, &t, "25.02.2445", &op, &st), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_IN_PROGRESS);
	assert_int_equal(op.component, MATRIX_C_NVOS);
	assert_int_equal(op.target.index, 3);
	assert_int_equal(count(&x, "nvos.switch-3"), 1);
	/* Not yet: the old (unknown) version stands while in progress. */
	assert_int_equal(oob_version(x.b, MATRIX_C_NVOS, &t, v, sizeof(v), &st), NV_E_NOT_FOUND);
	assert_int_equal(oob_op_wait(x.b, &op, NULL, &st), NV_OK);
	assert_int_equal(op.state, FABRIC_OP_COMPLETED);
	assert_non_null(strstr(op.message, "done"));
	assert_int_equal(oob_version(x.b, MATRIX_C_NVOS, &t, v, sizeof(v), &st), NV_OK);
	assert_string_equal(v, "25.02.2445");
	/* Other targets are untouched. */
	t.index = 4;
	assert_int_equal(oob_version(x.b, MATRIX_C_NVOS, &t, v, sizeof(v), &st), NV_E_NOT_FOUND);
	assert_int_equal(oob_update(x.b, MATRIX_C_DRIVER, &t, "580.95.05", &op, &st), NV_E_INVAL);
	assert_int_equal(oob_update(x.b, MATRIX_C_NVOS, &t, "25 02", &op, &st), NV_E_INVAL);
	assert_non_null(strstr(st.message, "not a version"));
	fx_clear(&x);
}

static void test_oob_update_counts_each_step_once(void **state)
{
	struct oob_target t = {OOB_SWITCH_TRAY, 3};
	struct oob_backend *b2 = NULL;
	struct fabric_status st;
	struct oob_op op, again, other;
	struct fx x;

	(void)state;
	fx_init(&x, 300);
	assert_int_equal(oob_update(x.b, MATRIX_C_NVOS, &t, "25.02.2445", &op, &st), NV_OK);
	/* Asked again while in flight, from a restarted operator: the same op. */
	assert_int_equal(oob_backend_new(&x.c, &b2, &st), NV_OK);
	assert_int_equal(oob_update(b2, MATRIX_C_NVOS, &t, "25.02.2445", &again, &st), NV_OK);
	assert_string_equal(again.id, op.id);
	assert_int_equal(again.state, FABRIC_OP_IN_PROGRESS);
	assert_int_equal(oob_op_wait(b2, &again, NULL, &st), NV_OK);
	/* Asked again when done: completed at once, not counted. */
	assert_int_equal(oob_update(x.b, MATRIX_C_NVOS, &t, "25.02.2445", &again, &st), NV_OK);
	assert_int_equal(again.state, FABRIC_OP_COMPLETED);
	assert_string_not_equal(again.id, op.id);
	assert_int_equal(count(&x, "nvos.switch-3"), 1);
	/* Every switch tray once. */
	for (unsigned i = 1; i <= 9; i++) {
		struct oob_target ti = {OOB_SWITCH_TRAY, i};
		assert_int_equal(
		        oob_update(x.b, MATRIX_C_SWITCH_TRAY_FIRMWARE, &ti, "1.2.3", &other, &st),
		        NV_OK);
	}
	assert_int_equal(oob_op_wait(x.b, &other, NULL, &st), NV_OK);
	assert_int_equal(count(&x, "switchTrayFirmware.switch-1"), 1);
	assert_int_equal(count(&x, "switchTrayFirmware.switch-9"), 1);
	assert_int_equal(oob_op_poll(x.b, "oob-999", &other, &st), NV_E_NOT_FOUND);
	oob_backend_free(b2);
	fx_clear(&x);
}

static void test_oob_update_injected_failure(void **state)
{
	struct oob_target t = {OOB_SWITCH_TRAY, 3};
	struct fabric_status st;
	struct oob_op op;
	struct fx x;
	char p[128], v[64];
	FILE *f;

	(void)state;
	fx_init(&x, 50);
	snprintf(p, sizeof(p), "%s/oob/fail.nvos.switch-3", x.dir);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(oob_update(x.b, MATRIX_C_NVOS, &t, "25.02.2445", &op, &st), NV_OK);
	assert_int_equal(oob_op_wait(x.b, &op, NULL, &st), NV_E_STATE);
	assert_int_equal(op.state, FABRIC_OP_FAILED);
	assert_non_null(strstr(st.message, "failed"));
	assert_int_equal(oob_version(x.b, MATRIX_C_NVOS, &t, v, sizeof(v), &st), NV_E_NOT_FOUND);
	fx_clear(&x);
}

static void test_oob_backend_new_bad_config(void **state)
{
	struct oob_config c;
	struct oob_backend *b = NULL;
	struct fabric_status st;

	(void)state;
	oob_config_init(&c);
	assert_int_equal(oob_backend_new(&c, &b, &st), NV_E_CONFIG);
	assert_non_null(strstr(st.message, "sim_root"));
	str_copy(c.backend, sizeof(c.backend), "redfish");
	assert_int_equal(oob_backend_new(&c, &b, &st), NV_E_CONFIG);
	assert_non_null(strstr(st.message, "not one of"));
	str_copy(c.backend, sizeof(c.backend), "sim");
	str_copy(c.sim_root, sizeof(c.sim_root), "/nonexistent/rack");
	assert_int_equal(oob_backend_new(&c, &b, &st), NV_E_NOT_FOUND);
	assert_null(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_oob_target_check_components_and_indices),
	        cmocka_unit_test(test_oob_update_completes_after_delay),
	        cmocka_unit_test(test_oob_update_counts_each_step_once),
	        cmocka_unit_test(test_oob_update_injected_failure),
	        cmocka_unit_test(test_oob_backend_new_bad_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
