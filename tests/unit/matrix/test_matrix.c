// SPDX-License-Identifier: Apache-2.0
// Unit tests for the matrix engine: every verdict path, the CUDA/NCCL check
// of a workload, CVE lookups, the validation gate and the builder's rules.
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
	enum nv_err rc = api_matrix_parse(j, &m, &errs);
	for (unsigned i = 0; i < errs.n; i++)
		print_message("%s: %s\n", errs.list[i].path, errs.list[i].msg);
	assert_int_equal(rc, NV_OK);
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

static enum matrix_verdict verdict(const struct matrix *m, const char *from, const char *to,
                                   enum matrix_reason reason)
{
	struct matrix_verdict_info vi;
	enum matrix_verdict v = matrix_verdict_get(m, from, to, &vi);
	assert_int_equal(vi.verdict, v);
	assert_string_equal(matrix_reason_name(vi.reason), matrix_reason_name(reason));
	return v;
}

static void add_edge(struct matrix *m, const char *from, const char *to, enum matrix_verdict v,
                     uint32_t step1, uint32_t step2)
{
	struct matrix_transition t;
	memset(&t, 0, sizeof(t));
	t.from = (unsigned)matrix_stack_index(m, from);
	t.to = (unsigned)matrix_stack_index(m, to);
	t.verdict = v;
	t.steps[t.nsteps++].components = step1;
	if (step2 != 0)
		t.steps[t.nsteps++].components = step2;
	assert_int_equal(matrix_transition_add(m, &t), NV_OK);
}

static void test_matrix_verdict_get_listed(void **state)
{
	const struct matrix *m = *state;
	assert_int_equal(verdict(m, "s1", "s2", MATRIX_R_LISTED), MATRIX_SAFE);
	assert_int_equal(verdict(m, "s1", "s3", MATRIX_R_LISTED), MATRIX_MANUAL);
	assert_int_equal(verdict(m, "s4", "s1", MATRIX_R_LISTED), MATRIX_BLOCKED);
	struct matrix_verdict_info vi;
	(void)matrix_verdict_get(m, "s4", "s1", &vi);
	assert_true(vi.downgrade);
	assert_non_null(vi.edge);
	// A listed downgrade keeps its own verdict and says it is one.
	assert_int_equal(verdict(m, "s3", "s2", MATRIX_R_LISTED), MATRIX_MANUAL);
	(void)matrix_verdict_get(m, "s3", "s2", &vi);
	assert_true(vi.downgrade);
	(void)matrix_verdict_get(m, "s1", "s2", &vi);
	assert_false(vi.downgrade);
}

static void test_matrix_verdict_get_fails_closed(void **state)
{
	const struct matrix *m = *state;
	assert_int_equal(verdict(m, "s2", "s4", MATRIX_R_UNLISTED), MATRIX_BLOCKED);
	// s4 -> s1 is listed (blocked), which says nothing about s1 -> s4.
	assert_int_equal(verdict(m, "s1", "s4", MATRIX_R_REVERSE_UNLISTED), MATRIX_BLOCKED);
	assert_int_equal(verdict(m, "s1", "nope", MATRIX_R_UNKNOWN_STACK), MATRIX_BLOCKED);
	assert_int_equal(verdict(m, NULL, "s1", MATRIX_R_UNKNOWN_STACK), MATRIX_BLOCKED);
	assert_int_equal(verdict(m, "s1", "s1", MATRIX_R_SAME_STACK), MATRIX_SAFE);
}

static void test_matrix_verdict_get_downgrade_not_inherited(void **state)
{
	const struct matrix *m = *state;
	// s1 -> s2 is safe and reversible; s2 -> s1 is not listed.
	const struct matrix_transition *fwd = matrix_transition_find(m, 0, 1);
	assert_non_null(fwd);
	assert_true(fwd->reversible);
	assert_int_equal(fwd->verdict, MATRIX_SAFE);
	assert_int_equal(verdict(m, "s2", "s1", MATRIX_R_REVERSE_UNLISTED), MATRIX_BLOCKED);
}

static void test_matrix_verdict_get_bad_steps(void **state)
{
	struct matrix *m = *state;
	// kubernetes first lands on a tuple that is no stack.
	add_edge(m, "s1", "s6", MATRIX_SAFE, MATRIX_BIT(MATRIX_C_KUBERNETES),
	         MATRIX_BIT(MATRIX_C_NVOS) | MATRIX_BIT(MATRIX_C_DRIVER));
	assert_int_equal(verdict(m, "s1", "s6", MATRIX_R_BAD_STEPS), MATRIX_BLOCKED);
	// doca changes but no step moves it.
	add_edge(m, "s3", "s5", MATRIX_SAFE, MATRIX_BIT(MATRIX_C_DRIVER), 0);
	assert_int_equal(verdict(m, "s3", "s5", MATRIX_R_BAD_STEPS), MATRIX_BLOCKED);
}

static void test_matrix_stack_check_workload_ranges(void **state)
{
	const struct matrix *m = *state;
	const struct matrix_stack *s1 = matrix_stack_find(m, "s1");
	struct matrix_workload_check w;
	assert_int_equal(matrix_stack_check_workload(s1, "12.9", "2.27.7", &w), NV_OK);
	assert_true(w.ok);
	assert_int_equal(matrix_stack_check_workload(s1, "13.0.2", "2.28.3", &w), NV_OK);
	assert_true(w.ok);
	assert_int_equal(matrix_stack_check_workload(s1, "13.1", NULL, &w), NV_OK);
	assert_false(w.ok);
	assert_false(w.cuda_ok);
	assert_string_equal(w.problem, "CUDA 13.1 is outside >=12.8, <=13.0");
	assert_int_equal(matrix_stack_check_workload(s1, NULL, "2.24.3", &w), NV_OK);
	assert_false(w.nccl_ok);
	assert_true(w.cuda_ok);
	assert_non_null(strstr(w.problem, "NCCL 2.24.3"));
	assert_int_equal(matrix_stack_check_workload(s1, NULL, NULL, &w), NV_OK);
	assert_true(w.ok);
	assert_int_equal(matrix_stack_check_workload(s1, "13..0", NULL, &w), NV_E_PARSE);
	// The newer stack takes CUDA 13.1.
	const struct matrix_stack *s6 = matrix_stack_find(m, "s6");
	assert_int_equal(matrix_stack_check_workload(s6, "13.1", NULL, &w), NV_OK);
	assert_true(w.ok);
	// No range: fail closed.
	struct matrix_stack bare;
	memset(&bare, 0, sizeof(bare));
	assert_int_equal(matrix_stack_check_workload(&bare, "12.9", NULL, &w), NV_OK);
	assert_false(w.ok);
	assert_string_equal(w.problem, "stack sets no CUDA range");
}

static void test_matrix_cve_fixed_by_lookup(void **state)
{
	const struct matrix *m = *state;
	unsigned idx[8];
	assert_int_equal(matrix_cve_fixed_by(m, "CVE-2026-24187", idx, 8), 4);
	assert_string_equal(m->stacks[idx[0]].name, "s3");
	assert_string_equal(m->stacks[idx[3]].name, "s6");
	assert_int_equal(matrix_cve_fixed_by(m, "CVE-2026-30001", idx, 8), 1);
	assert_string_equal(m->stacks[idx[0]].name, "s6");
	assert_int_equal(matrix_cve_fixed_by(m, "CVE-2020-0001", idx, 8), 0);
	assert_int_equal(matrix_cve_fixed_by(m, "CVE-2026-24187", idx, 2), 4);
	assert_true(matrix_stack_is_affected(matrix_stack_find(m, "s1"), "CVE-2026-24187"));
	assert_false(matrix_stack_fixes(matrix_stack_find(m, "s1"), "CVE-2026-24187"));
}

static void test_matrix_gate_passes_tolerance(void **state)
{
	const struct matrix *m = *state;
	const struct matrix_gate *g = &matrix_stack_find(m, "s1")->gate;
	assert_true(g->has_nccl);
	assert_int_equal(g->floor_gbps, 500);
	assert_string_equal(g->transport, "NVLS");
	assert_int_equal(g->soak_ms, 30 * 60 * 1000);
	assert_true(matrix_gate_passes(g, 450));
	assert_false(matrix_gate_passes(g, 449));
	struct matrix_gate none;
	memset(&none, 0, sizeof(none));
	assert_true(matrix_gate_passes(&none, 0));
}

static void test_matrix_builder_rules(void **state)
{
	struct matrix *m = *state;
	struct matrix_stack *s = calloc(1, sizeof(*s));
	memcpy(s, matrix_stack_find(m, "s1"), sizeof(*s));
	assert_int_equal(matrix_stack_add(m, s), NV_E_EXISTS);
	s->name[0] = '\0';
	assert_int_equal(matrix_stack_add(m, s), NV_E_INVAL);
	free(s);
	struct matrix_transition t;
	memset(&t, 0, sizeof(t));
	t.from = 0;
	t.to = 1;
	assert_int_equal(matrix_transition_add(m, &t), NV_E_EXISTS);
	t.to = 99;
	assert_int_equal(matrix_transition_add(m, &t), NV_E_NOT_FOUND);
	t.to = 0;
	assert_int_equal(matrix_transition_add(m, &t), NV_E_INVAL);
}

static void test_matrix_names_roundtrip(void **state)
{
	(void)state;
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++) {
		enum matrix_component x;
		assert_true(matrix_component_parse(matrix_component_name((enum matrix_component)c),
		                                   &x));
		assert_int_equal(x, c);
	}
	enum matrix_component x;
	assert_false(matrix_component_parse("imex", &x));
	assert_int_equal(matrix_component_layer(MATRIX_C_NVOS), MATRIX_L_FABRIC);
	assert_int_equal(matrix_component_layer(MATRIX_C_GPU_FIRMWARE), MATRIX_L_FIRMWARE);
	assert_int_equal(matrix_component_layer(MATRIX_C_DRIVER), MATRIX_L_NODE);
	enum matrix_verdict v;
	assert_true(matrix_verdict_parse("manual", &v));
	assert_int_equal(v, MATRIX_MANUAL);
	assert_false(matrix_verdict_parse("unknown", &v));
	assert_string_equal(matrix_verdict_name((enum matrix_verdict)7), "blocked");
	enum matrix_layer l;
	assert_true(matrix_layer_parse("fabric", &l));
	assert_string_equal(matrix_layer_name(l), "fabric");
}

static void test_matrix_samples_parse(void **state)
{
	(void)state;
	const char *files[] = {
	        "tests/data/matrix/compatibilitymatrix-gb200-2026.10.json",
	        "tests/data/matrix/compatibilitymatrix-gb300-2026.10.json",
	        "tests/data/matrix/compatibilitymatrix-vr200-preview-2026.10.json",
	};
	for (size_t i = 0; i < 3; i++) {
		struct matrix *m = load(files[i]);
		assert_true(m->nstacks >= 1);
		matrix_free(m);
	}
	struct matrix *m = load(files[1]);
	assert_int_equal(m->platform, MATRIX_GB300);
	struct matrix_verdict_info vi;
	assert_int_equal(matrix_verdict_get(m, "gb300-r580-159", "gb300-r580-173", &vi),
	                 MATRIX_MANUAL);
	assert_int_equal(matrix_verdict_get(m, "gb300-r580-95", "gb300-r580-173", &vi),
	                 MATRIX_BLOCKED);
	assert_int_equal(vi.reason, MATRIX_R_LISTED);
	matrix_free(m);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_matrix_verdict_get_listed),
	        T(test_matrix_verdict_get_fails_closed),
	        T(test_matrix_verdict_get_downgrade_not_inherited),
	        T(test_matrix_verdict_get_bad_steps),
	        T(test_matrix_stack_check_workload_ranges),
	        T(test_matrix_cve_fixed_by_lookup),
	        T(test_matrix_gate_passes_tolerance),
	        T(test_matrix_builder_rules),
	        cmocka_unit_test(test_matrix_names_roundtrip),
	        cmocka_unit_test(test_matrix_samples_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
