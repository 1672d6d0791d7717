// SPDX-License-Identifier: Apache-2.0
// Unit tests for CompatibilityMatrix validation: the schema and CEL rules
// at their exact field paths, and the whole-matrix rule that the tuple
// after each step of a transition is itself a stack.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_upgrade.h"

static int setup(void **state)
{
	*state = test_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	return 0;
}

static int teardown(void **state)
{
	json_decref(*state);
	return 0;
}

#define REJECTS(obj, path, msg) TEST_REJECTS(api_matrix_parse, struct matrix, obj, path, msg)

static void test_api_matrix_parse_sample(void **state)
{
	struct api_errors e;
	struct matrix *m = NULL;
	api_errors_init(&e);
	assert_int_equal(api_matrix_parse(*state, &m, &e), NV_OK);
	assert_string_equal(m->name, "gb300-2026.10");
	assert_int_equal(m->tier, MATRIX_TIER_SUPPORTED);
	assert_int_equal(m->nstacks, 4);
	assert_int_equal(m->ntransitions, 7);
	const struct matrix_stack *s = matrix_stack_find(m, "gb300-r580-173");
	assert_non_null(s);
	assert_string_equal(s->tuple.version[MATRIX_C_DRIVER].text, "580.173.02");
	assert_string_equal(s->tuple.extra[MATRIX_C_DRIVER], "open");
	assert_string_equal(s->tuple.extra[MATRIX_C_KERNEL], "arm64/64k");
	assert_string_equal(s->tuple.extra[MATRIX_C_OS], "Ubuntu");
	assert_int_equal(s->gate.dcgm_diag_level, 2);
	assert_int_equal(s->gate.soak_ms, 3600000);
	matrix_free(m);
}

static void test_api_matrix_parse_driver_rules(void **state)
{
	test_set(*state, "spec.stacks[1].components.driver.version", json_string("581.1.1"));
	REJECTS(*state, "spec.stacks[1].components.driver.version",
	        "driver.version must belong to driver.branch (580.x for R580)");
	test_set(*state, "spec.stacks[1].components.driver.version", json_string("615.23"));
	test_set(*state, "spec.stacks[1].components.driver.branch", json_string("R615"));
	test_set(*state, "spec.stacks[1].components.driver.flavour", json_string("proprietary"));
	REJECTS(*state, "spec.stacks[1].components.driver.flavour",
	        "driver.flavour must be open from branch R615 on");
	REJECTS(*state, "spec.stacks[1].components.imex",
	        "components.imex must equal components.driver.version");
	test_set(*state, "spec.stacks[1].components.driver", NULL);
	REJECTS(*state, "spec.stacks[1].components.driver", "is required");
}

static void test_api_matrix_parse_component_formats(void **state)
{
	test_set(*state, "spec.stacks[0].components.kubernetes", json_string("2.0"));
	REJECTS(*state, "spec.stacks[0].components.kubernetes", "must be a Kubernetes version");
	test_set(*state, "spec.stacks[0].components.kubernetes", json_string("1.34.2"));
	test_set(*state, "spec.stacks[0].components.kernel.pageSize", json_string("16k"));
	REJECTS(*state, "spec.stacks[0].components.kernel.pageSize", "must be one of: 4k, 64k");
	test_set(*state, "spec.stacks[0].components.kernel.pageSize", json_string("64k"));
	test_set(*state, "spec.stacks[0].components.nvos", json_string("25..02"));
	REJECTS(*state, "spec.stacks[0].components.nvos", "must be a version");
	test_set(*state, "spec.stacks[0].components.nvos", json_string("25.02 x"));
	REJECTS(*state, "spec.stacks[0].components.nvos", "must be a version");
	test_set(*state, "spec.stacks[0].components.nvos", json_string("25.02.2445"));
	test_set(*state, "spec.stacks[0].components.os.name", json_string(""));
	REJECTS(*state, "spec.stacks[0].components.os.name", "must not be empty");
}

static void test_api_matrix_parse_workloads_and_cves(void **state)
{
	test_set(*state, "spec.stacks[0].workloads.cuda.min", json_string("13.1"));
	REJECTS(*state, "spec.stacks[0].workloads.cuda.max", "must not be below min (13.1)");
	test_set(*state, "spec.stacks[0].workloads.cuda.min", json_string("12.8"));
	test_set(*state, "spec.stacks[0].workloads.nccl.max", NULL);
	REJECTS(*state, "spec.stacks[0].workloads.nccl.max", "is required");
	test_set(*state, "spec.stacks[0].workloads.nccl.max", json_string("2.28.3"));
	test_set(*state, "spec.stacks[1].fixedCVEs[0]", json_string("CVE-26-1"));
	REJECTS(*state, "spec.stacks[1].fixedCVEs[0]", "must be a CVE id");
	test_set(*state, "spec.stacks[1].fixedCVEs[0]", json_string("CVE-2026-24187"));
	test_set(*state, "spec.stacks[1].openCVEs", json_pack("[s]", "CVE-2026-24187"));
	REJECTS(*state, "spec.stacks[1].openCVEs", "CVE-2026-24187 is also in fixedCVEs");
}

static void test_api_matrix_parse_gate(void **state)
{
	test_set(*state, "spec.stacks[0].gate.ncclAllReduce.floorGBps", json_integer(0));
	REJECTS(*state, "spec.stacks[0].gate.ncclAllReduce.floorGBps",
	        "must be between 1 and 100000");
	test_set(*state, "spec.stacks[0].gate.ncclAllReduce.floorGBps", json_integer(500));
	test_set(*state, "spec.stacks[0].gate.soak", json_string("1d"));
	REJECTS(*state, "spec.stacks[0].gate.soak", "must be a duration");
	test_set(*state, "spec.stacks[0].gate.soak", json_string("1h30m"));
	test_set(*state, "spec.stacks[0].gate.ncclAllReduce.tolerancePercent", json_integer(60));
	REJECTS(*state, "spec.stacks[0].gate.ncclAllReduce.tolerancePercent",
	        "must be between 0 and 50");
}

static void test_api_matrix_parse_stack_names(void **state)
{
	test_set(*state, "spec.stacks[2].name", json_string("gb300-r580-95"));
	REJECTS(*state, "spec.stacks[2].name", "duplicate stack name (also spec.stacks[0])");
	test_set(*state, "spec.stacks[2].name", json_string("Bad_Name"));
	REJECTS(*state, "spec.stacks[2].name", "must be a stack name");
	test_set(*state, "spec.stacks", json_array());
	REJECTS(*state, "spec.stacks", "must have at least 1 items");
	test_set(*state, "spec.platform", NULL);
	REJECTS(*state, "spec.platform", "is required");
}

static void test_api_matrix_parse_transition_rules(void **state)
{
	test_set(*state, "spec.transitions[0].from", json_string("nope"));
	REJECTS(*state, "spec.transitions[0].from", "stack \"nope\" is not in spec.stacks");
	test_set(*state, "spec.transitions[0].from", json_string("gb300-r580-159"));
	REJECTS(*state, "spec.transitions[0].to", "must connect two different stacks");
	test_set(*state, "spec.transitions[0].from", json_string("gb300-r580-95"));
	test_set(*state, "spec.transitions[0].steps", NULL);
	REJECTS(*state, "spec.transitions[0].steps",
	        "safe and manual transitions must list their ordered steps");
	test_set(*state, "spec.transitions[0].verdict", json_string("blocked"));
	test_set(*state, "spec.transitions[0].notes", NULL);
	REJECTS(*state, "spec.transitions[0].notes", "a blocked transition must explain itself");
	test_set(*state, "spec.transitions[0].verdict", json_string("unknown"));
	REJECTS(*state, "spec.transitions[0].verdict", "must be one of: blocked, manual, safe");
}

static void test_api_matrix_parse_step_rules(void **state)
{
	test_set(*state, "spec.transitions[4].steps[1].components[0]", json_string("nvos"));
	REJECTS(*state, "spec.transitions[4].steps[1].components[0]",
	        "each component may appear in only one step");
	test_set(*state, "spec.transitions[4].steps[1].components[0]", json_string("imex"));
	REJECTS(*state, "spec.transitions[4].steps[1].components[0]", "must be one of");
	test_set(*state, "spec.transitions[4].steps[1].components[0]", json_string("driver"));
	test_set(*state, "spec.transitions[1].from", json_string("gb300-r580-95"));
	test_set(*state, "spec.transitions[1].to", json_string("gb300-r580-159"));
	REJECTS(*state, "spec.transitions[1]",
	        "each (from, to) pair may appear only once (also spec.transitions[0])");
}

static void test_api_matrix_parse_intermediate_not_a_stack(void **state)
{
	// Change the intermediate stack so that the switch-first move from
	// gb300-r580-159 lands on a tuple no stack has.
	test_set(*state, "spec.stacks[2].components.doca", json_string("3.9.9"));
	REJECTS(*state, "spec.transitions[4].steps",
	        "gb300-r580-159 -> gb300-r580-173: the tuple after step 1 "
	        "(nvos,switchTrayFirmware,nmx) is not a stack of this matrix");
	REJECTS(*state, "spec.transitions[2].steps",
	        "gb300-r580-159 -> gb300-nvos4317-r580-159: no step moves doca");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_api_matrix_parse_sample),
	        T(test_api_matrix_parse_driver_rules),
	        T(test_api_matrix_parse_component_formats),
	        T(test_api_matrix_parse_workloads_and_cves),
	        T(test_api_matrix_parse_gate),
	        T(test_api_matrix_parse_stack_names),
	        T(test_api_matrix_parse_transition_rules),
	        T(test_api_matrix_parse_step_rules),
	        T(test_api_matrix_parse_intermediate_not_a_stack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
