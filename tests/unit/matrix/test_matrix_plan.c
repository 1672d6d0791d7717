// SPDX-License-Identifier: Apache-2.0
// Unit tests for upgrade plans: ordered component steps, the drain and
// fabric-restart flags, intermediate tuples that are not stacks, and chains
// of several listed edges.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/api_upgrade.h"
#include "nvl72/matrix.h"

static struct matrix *load(const char *path)
{
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	assert_non_null(j);
	struct api_errors errs;
	api_errors_init(&errs);
	struct matrix *m = NULL;
	assert_int_equal(api_matrix_parse(j, &m, &errs), NV_OK);
	json_decref(j);
	return m;
}

static int setup(void **state)
{
	*state = load("tests/data/matrix/plan-cases.json");
	return 0;
}

static int teardown(void **state)
{
	matrix_free(*state);
	return 0;
}

static const char *stack_at(const struct matrix *m, unsigned i)
{
	return m->stacks[i].name;
}

static void test_matrix_plan_build_ordered_steps(void **state)
{
	const struct matrix *m = *state;
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "s1", "s3", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_MANUAL);
	assert_int_equal(p.nhops, 1);
	assert_int_equal(p.nsteps, 2);
	// Switch side first, and it lands on s2, itself a stack.
	assert_int_equal(p.steps[0].components, MATRIX_BIT(MATRIX_C_NVOS));
	assert_true(p.steps[0].fabric_restart);
	assert_false(p.steps[0].drain);
	assert_string_equal(stack_at(m, p.steps[0].from_stack), "s1");
	assert_string_equal(stack_at(m, p.steps[0].to_stack), "s2");
	assert_int_equal(p.steps[1].components, MATRIX_BIT(MATRIX_C_DRIVER));
	assert_true(p.steps[1].drain);
	assert_true(p.steps[1].reboot);
	assert_string_equal(stack_at(m, p.steps[1].to_stack), "s3");
	assert_int_equal(p.layers, MATRIX_BIT(MATRIX_L_FABRIC) | MATRIX_BIT(MATRIX_L_NODE));
	assert_true(p.needs_drain);
	assert_true(p.needs_fabric_restart);
	assert_false(p.reversible);
	assert_string_equal(p.problem, "");
}

static void test_matrix_plan_build_driver_first(void **state)
{
	const struct matrix *m = *state;
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "s4", "s3", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_MANUAL);
	assert_int_equal(p.nsteps, 2);
	assert_int_equal(p.steps[0].components, MATRIX_BIT(MATRIX_C_DRIVER));
	// The driver is already 580.173.02 on s4: the tuple stays s4.
	assert_string_equal(stack_at(m, p.steps[0].to_stack), "s4");
	assert_int_equal(p.steps[1].components, MATRIX_BIT(MATRIX_C_NVOS));
}

static void test_matrix_plan_build_intermediate_not_a_stack(void **state)
{
	struct matrix *m = *state;
	struct matrix_transition t;
	memset(&t, 0, sizeof(t));
	t.from = (unsigned)matrix_stack_index(m, "s1");
	t.to = (unsigned)matrix_stack_index(m, "s6");
	t.verdict = MATRIX_SAFE;
	t.nsteps = 2;
	t.steps[0].components = MATRIX_BIT(MATRIX_C_KUBERNETES);
	t.steps[1].components = MATRIX_BIT(MATRIX_C_NVOS) | MATRIX_BIT(MATRIX_C_DRIVER);
	assert_int_equal(matrix_transition_add(m, &t), NV_OK);
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "s1", "s6", MATRIX_PLAN_MULTI_HOP, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_BLOCKED);
	assert_int_equal(p.reason, MATRIX_R_BAD_STEPS);
	assert_string_equal(
	        p.problem,
	        "s1 -> s6: the tuple after step 1 (kubernetes) is not a stack of this matrix");
}

static void test_matrix_plan_build_step_missing(void **state)
{
	struct matrix *m = *state;
	struct matrix_transition t;
	memset(&t, 0, sizeof(t));
	t.from = (unsigned)matrix_stack_index(m, "s3");
	t.to = (unsigned)matrix_stack_index(m, "s5");
	t.verdict = MATRIX_SAFE;
	t.nsteps = 1;
	t.steps[0].components = MATRIX_BIT(MATRIX_C_DRIVER);
	assert_int_equal(matrix_transition_add(m, &t), NV_OK);
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "s3", "s5", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_BLOCKED);
	assert_string_equal(p.problem, "s3 -> s5: no step moves doca");
}

static void test_matrix_plan_build_multi_hop(void **state)
{
	const struct matrix *m = *state;
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "s2", "s6", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_BLOCKED);
	assert_int_equal(p.reason, MATRIX_R_UNLISTED);
	assert_string_equal(p.problem, "s2 -> s6 is not listed");
	assert_int_equal(matrix_plan_build(m, "s2", "s6", MATRIX_PLAN_MULTI_HOP, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_SAFE);
	assert_int_equal(p.nhops, 2);
	assert_int_equal(p.nsteps, 2);
	assert_int_equal(p.steps[0].components, MATRIX_BIT(MATRIX_C_DRIVER));
	assert_int_equal(p.steps[1].components, MATRIX_BIT(MATRIX_C_KUBERNETES));
	assert_string_equal(stack_at(m, p.steps[1].from_stack), "s3");
	assert_int_equal(p.layers, MATRIX_BIT(MATRIX_L_NODE) | MATRIX_BIT(MATRIX_L_KUBERNETES));
	// s1 -> s6: the all-safe route (3 hops) beats the one with a manual edge.
	assert_int_equal(matrix_plan_build(m, "s1", "s6", MATRIX_PLAN_MULTI_HOP, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_SAFE);
	assert_int_equal(p.nhops, 3);
	assert_string_equal(stack_at(m, m->transitions[p.hops[0]].to), "s2");
}

static void test_matrix_plan_build_blocked_reasons(void **state)
{
	const struct matrix *m = *state;
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "s4", "s1", MATRIX_PLAN_MULTI_HOP, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_BLOCKED);
	assert_int_equal(p.reason, MATRIX_R_LISTED);
	assert_string_equal(p.problem, "s4 -> s1 is listed as blocked");
	assert_int_equal(matrix_plan_build(m, "s2", "s1", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_BLOCKED);
	assert_int_equal(p.reason, MATRIX_R_REVERSE_UNLISTED);
	assert_non_null(strstr(p.problem, "downgrade never inherits"));
	assert_int_equal(p.nsteps, 0);
	assert_int_equal(matrix_plan_build(m, "s1", "zz", 0, &p), NV_E_NOT_FOUND);
	assert_int_equal(p.reason, MATRIX_R_UNKNOWN_STACK);
	assert_int_equal(matrix_plan_build(m, "s3", "s3", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_SAFE);
	assert_int_equal(p.reason, MATRIX_R_SAME_STACK);
	assert_int_equal(p.nsteps, 0);
}

static void test_matrix_plan_build_gb300_sample(void **state)
{
	(void)state;
	struct matrix *m = load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct matrix_plan p;
	assert_int_equal(matrix_plan_build(m, "gb300-r580-159", "gb300-r580-173", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_MANUAL);
	assert_int_equal(p.nsteps, 2);
	assert_string_equal(stack_at(m, p.steps[0].to_stack), "gb300-nvos4317-r580-159");
	assert_int_equal(p.steps[0].components, MATRIX_BIT(MATRIX_C_NMX) |
	                                                MATRIX_BIT(MATRIX_C_NVOS) |
	                                                MATRIX_BIT(MATRIX_C_SWITCH_TRAY_FIRMWARE));
	// Listed as blocked directly; two listed hops get there.
	assert_int_equal(matrix_plan_build(m, "gb300-r580-95", "gb300-r580-173", 0, &p), NV_OK);
	assert_int_equal(p.verdict, MATRIX_BLOCKED);
	assert_int_equal(
	        matrix_plan_build(m, "gb300-r580-95", "gb300-r580-173", MATRIX_PLAN_MULTI_HOP, &p),
	        NV_OK);
	assert_int_equal(p.verdict, MATRIX_MANUAL);
	assert_int_equal(p.nhops, 2);
	assert_int_equal(p.nsteps, 3);
	assert_int_equal(p.steps[0].components, MATRIX_BIT(MATRIX_C_DRIVER));
	matrix_free(m);
}

static void test_matrix_plan_trays_groups(void **state)
{
	const struct matrix *m = *state;
	const char *trays[18];
	for (unsigned i = 0; i < 18; i++)
		trays[i] = i < 9 ? "s2" : "s3";
	struct matrix_tray_plan *tp = calloc(1, sizeof(*tp));
	assert_int_equal(matrix_plan_trays(m, trays, 18, "s3", 0, tp), NV_OK);
	assert_int_equal(tp->verdict, MATRIX_SAFE);
	assert_int_equal(tp->ngroups, 2);
	assert_int_equal(tp->groups[0].trays, 0x3fe);
	assert_int_equal(tp->groups[0].plan.nsteps, 1);
	assert_int_equal(tp->groups[1].plan.reason, MATRIX_R_SAME_STACK);
	// One tray on s1 (a manual edge) and one unknown: blocked overall.
	trays[17] = "s1";
	assert_int_equal(matrix_plan_trays(m, trays, 18, "s3", 0, tp), NV_OK);
	assert_int_equal(tp->verdict, MATRIX_MANUAL);
	assert_int_equal(tp->ngroups, 3);
	trays[4] = NULL;
	assert_int_equal(matrix_plan_trays(m, trays, 18, "s3", 0, tp), NV_OK);
	assert_int_equal(tp->verdict, MATRIX_BLOCKED);
	assert_int_equal(tp->unknown_trays, 1u << 5);
	assert_string_equal(tp->problem, "tray 5 runs no stack of matrix plan-cases");
	assert_int_equal(matrix_plan_trays(m, trays, 18, "nope", 0, tp), NV_E_NOT_FOUND);
	assert_int_equal(matrix_plan_trays(m, trays, 0, "s3", 0, tp), NV_E_INVAL);
	free(tp);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_matrix_plan_build_ordered_steps),
	        T(test_matrix_plan_build_driver_first),
	        T(test_matrix_plan_build_intermediate_not_a_stack),
	        T(test_matrix_plan_build_step_missing),
	        T(test_matrix_plan_build_multi_hop),
	        T(test_matrix_plan_build_blocked_reasons),
	        cmocka_unit_test(test_matrix_plan_build_gb300_sample),
	        T(test_matrix_plan_trays_groups),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
