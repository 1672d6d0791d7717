// SPDX-License-Identifier: Apache-2.0
// Unit tests for RackUpgrade and UpgradeApproval parsing (CEL rules of the
// security class, rack or selector, rejections) and the upgrade status.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_upgrade.h"

#define ROUTINE "tests/data/api/rackupgrade-gb300-r07-r580-173.json"
#define SECURITY "tests/data/api/rackupgrade-gb300-r07-cve-2026-24101.json"
#define APPROVAL "tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json"

#define UP_REJECTS(obj, path, msg) \
	TEST_REJECTS(api_rack_upgrade_parse, struct api_rack_upgrade, obj, path, msg)
#define AP_REJECTS(obj, path, msg) \
	TEST_REJECTS(api_upgrade_approval_parse, struct api_upgrade_approval, obj, path, msg)

static void test_api_rack_upgrade_parse_samples(void **state)
{
	(void)state;
	struct api_errors e;
	struct api_rack_upgrade *u = NULL;
	json_t *j = test_load(ROUTINE);
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_parse(j, &u, &e), NV_OK);
	assert_string_equal(u->rack, "gb300-r07");
	assert_string_equal(u->target_stack, "gb300-r580-173");
	assert_int_equal(u->cls, API_UPGRADE_ROUTINE);
	assert_int_equal(u->canary_soak_ms, 2 * 3600000);
	assert_int_equal(u->wave_size, 2);
	assert_true(u->earliest_start_ms > 0);
	api_rack_upgrade_free(u);
	json_decref(j);
	j = test_load(SECURITY);
	assert_int_equal(api_rack_upgrade_parse(j, &u, &e), NV_OK);
	assert_int_equal(u->cls, API_UPGRADE_SECURITY);
	assert_int_equal(u->ncves, 1);
	assert_string_equal(u->cves[0], "CVE-2026-24101");
	api_rack_upgrade_free(u);
	json_decref(j);
}

static void test_api_rack_upgrade_parse_security_rules(void **state)
{
	(void)state;
	json_t *j = test_load(SECURITY);
	test_set(j, "spec.reason", NULL);
	UP_REJECTS(j, "spec.reason", "a security upgrade must carry a reason");
	test_set(j, "spec.reason", json_string("fix it"));
	test_set(j, "spec.cves", json_array());
	UP_REJECTS(j, "spec.cves", "a security upgrade must carry at least one CVE id");
	test_set(j, "spec.cves", json_pack("[ss]", "CVE-2026-24101", "CVE-2026-24101"));
	UP_REJECTS(j, "spec.cves[1]", "duplicate value");
	test_set(j, "spec.cves", json_pack("[s]", "cve-2026-1"));
	UP_REJECTS(j, "spec.cves[0]", "must be a CVE id");
	json_decref(j);
	j = test_load(ROUTINE);
	test_set(j, "spec.force", json_true());
	UP_REJECTS(j, "spec.force", "force is allowed only for the security class");
	json_decref(j);
}

static void test_api_rack_upgrade_parse_target(void **state)
{
	(void)state;
	json_t *j = test_load(ROUTINE);
	test_set(j, "spec.rackSelector", json_pack("{s:{s:s}}", "matchLabels",
						     "nvl72.io/fleet", "training"));
	UP_REJECTS(j, "spec.rack", "exactly one of rack and rackSelector must be set");
	test_set(j, "spec.rack", NULL);
	struct api_errors e;
	struct api_rack_upgrade *u = NULL;
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_parse(j, &u, &e), NV_OK);
	assert_int_equal(u->nselector, 1);
	assert_string_equal(u->selector[0].key, "nvl72.io/fleet");
	api_rack_upgrade_free(u);
	test_set(j, "spec.rackSelector", NULL);
	UP_REJECTS(j, "spec.rack", "exactly one of rack and rackSelector must be set");
	test_set(j, "spec.rack", json_string("gb300-r07"));
	test_set(j, "spec.target.stack", NULL);
	UP_REJECTS(j, "spec.target.stack", "is required");
	test_set(j, "spec.target", NULL);
	UP_REJECTS(j, "spec.target", "is required");
	test_set(j, "spec.waveSize", json_integer(0));
	UP_REJECTS(j, "spec.waveSize", "must be between 1 and 18");
	test_set(j, "spec.earliestStart", json_string("soon"));
	UP_REJECTS(j, "spec.earliestStart", "must be an RFC 3339 date-time");
	json_decref(j);
}

static void test_api_upgrade_approval_parse_rules(void **state)
{
	(void)state;
	json_t *j = test_load(APPROVAL);
	struct api_errors e;
	struct api_upgrade_approval *a = NULL;
	api_errors_init(&e);
	assert_int_equal(api_upgrade_approval_parse(j, &a, &e), NV_OK);
	assert_int_equal(a->layer, MATRIX_L_FABRIC);
	assert_false(a->rejected);
	assert_true(a->not_before_ms > 0);
	api_upgrade_approval_free(a);
	test_set(j, "spec.decision", json_string("Rejected"));
	test_set(j, "spec.comment", json_string(""));
	AP_REJECTS(j, "spec.comment", "a rejection must carry a comment");
	test_set(j, "spec.layer", json_string("network"));
	AP_REJECTS(j, "spec.layer", "must be one of: firmware, fabric, node, kubernetes, workload");
	test_set(j, "spec.upgrade", NULL);
	AP_REJECTS(j, "spec.upgrade", "is required");
	test_set(j, "spec.approvedBy", json_pack("{s:[i]}", "groups", 7));
	AP_REJECTS(j, "spec.approvedBy.groups[0]", "must be a string, not a number");
	json_decref(j);
}

static void test_api_rack_upgrade_status_to_json_plan(void **state)
{
	(void)state;
	json_t *jm = test_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_errors e;
	struct matrix *m = NULL;
	api_errors_init(&e);
	assert_int_equal(api_matrix_parse(jm, &m, &e), NV_OK);
	struct api_rack_upgrade_status *s = calloc(1, sizeof(*s));
	s->observed_generation = 3;
	s->phase = API_PHASE_CANARY;
	memcpy(s->from_stack, "gb300-r580-159", 15);
	s->has_plan = true;
	assert_int_equal(matrix_plan_build(m, "gb300-r580-159", "gb300-r580-173", 0,
					   &s->plan), NV_OK);
	s->required_approvals = s->plan.layers;
	struct api_upgrade_step step = {.index = 0, .action = API_ACT_VALIDATE,
					 .trays = 0x3fe, .phase = API_STEP_SUCCEEDED};
	step.evidence.set = true;
	step.evidence.busbw_gbps = 612;
	step.evidence.floor_gbps = 500;
	step.evidence.passed = true;
	s->steps = &step;
	s->nsteps = 1;
	json_t *o = api_rack_upgrade_status_to_json(s);
	char *txt = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(strstr(txt, "\"phase\":\"Canary\""));
	assert_non_null(strstr(txt, "\"verdict\":\"manual\""));
	assert_non_null(strstr(txt, "\"components\":[\"nvos\",\"switchTrayFirmware\",\"nmx\"]"));
	assert_non_null(strstr(txt, "\"requiredApprovals\":[\"fabric\",\"node\",\"workload\"]"));
	assert_non_null(strstr(txt, "\"trays\":[1,2,3,4,5,6,7,8,9]"));
	assert_non_null(strstr(txt, "\"busBandwidthGBps\":612"));
	assert_non_null(strstr(txt, "\"action\":\"Validate\""));
	free(txt);
	json_decref(o);
	free(s);
	matrix_free(m);
	json_decref(jm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_api_rack_upgrade_parse_samples),
		cmocka_unit_test(test_api_rack_upgrade_parse_security_rules),
		cmocka_unit_test(test_api_rack_upgrade_parse_target),
		cmocka_unit_test(test_api_upgrade_approval_parse_rules),
		cmocka_unit_test(test_api_rack_upgrade_status_to_json_plan),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
