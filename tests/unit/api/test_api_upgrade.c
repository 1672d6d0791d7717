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
#include "nvl72/json.h"

#define ROUTINE "tests/data/api/rackupgrade-gb300-r07-r580-173.json"
#define SECURITY "tests/data/api/rackupgrade-gb300-r07-nvidia-5821.json"
#define APPROVAL "tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json"

#define UP_REJECTS(obj, path, msg)                                                                 \
	TEST_REJECTS(api_rack_upgrade_parse, struct api_rack_upgrade, obj, path, msg)
#define AP_REJECTS(obj, path, msg)                                                                 \
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
	assert_int_equal(u->ncves, 11);
	assert_string_equal(u->cves[0], "CVE-2025-33221");
	assert_string_equal(u->cves[2], "CVE-2026-24187");
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
	test_set(j, "spec.cves", json_pack("[ss]", "CVE-2026-24187", "CVE-2026-24187"));
	UP_REJECTS(j, "spec.cves[1]", "duplicate value");
	test_set(j, "spec.cves", json_pack("[s]", "cve-2026-1"));
	UP_REJECTS(j, "spec.cves[0]", "must be a CVE id");
	json_decref(j);
	j = test_load(ROUTINE);
	test_set(j, "spec.force", json_true());
	UP_REJECTS(j, "spec.force", "force is allowed only for the security class");
	json_decref(j);
	j = test_load(ROUTINE);
	test_set(j, "spec.retry", json_integer(-1));
	UP_REJECTS(j, "spec.retry", NULL);
	json_decref(j);
}

static void test_api_rack_upgrade_parse_target(void **state)
{
	(void)state;
	json_t *j = test_load(ROUTINE);
	test_set(j, "spec.rackSelector",
	         json_pack("{s:{s:s}}", "matchLabels", "nvl72.io/fleet", "training"));
	UP_REJECTS(j, "spec.rack", "exactly one of rack and rackSelector must be set");
	test_set(j, "spec.rack", NULL);
	UP_REJECTS(j, "spec.canary.partition", "a partition belongs to one rack");
	test_set(j, "spec.canary.partition", NULL);
	test_set(j, "spec.maxParallelRacks", json_integer(257));
	UP_REJECTS(j, "spec.maxParallelRacks", "must be between 1 and 256");
	test_set(j, "spec.maxParallelRacks", json_integer(4));
	test_set(j, "spec.onRackHalt", json_string("Pause"));
	UP_REJECTS(j, "spec.onRackHalt", NULL);
	test_set(j, "spec.onRackHalt", json_string("Stop"));
	struct api_errors e;
	struct api_rack_upgrade *u = NULL;
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_parse(j, &u, &e), NV_OK);
	assert_int_equal(u->nselector, 1);
	assert_string_equal(u->selector[0].key, "nvl72.io/fleet");
	assert_int_equal(u->max_parallel_racks, 4);
	assert_int_equal(u->on_rack_halt, API_ON_RACK_HALT_STOP);
	api_rack_upgrade_free(u);
	/* Only a selector upgrade has racks to run in parallel or stop. */
	test_set(j, "spec.rackSelector", NULL);
	test_set(j, "spec.rack", json_string("gb300-r07"));
	UP_REJECTS(j, "spec.maxParallelRacks", "only a rackSelector upgrade");
	test_set(j, "spec.maxParallelRacks", NULL);
	UP_REJECTS(j, "spec.onRackHalt", "only a rackSelector upgrade");
	test_set(j, "spec.onRackHalt", NULL);
	test_set(j, "spec.canary.partition", json_string("gb300-r07-a"));
	test_set(j, "spec.rack", NULL);
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
	assert_int_equal(matrix_plan_build(m, "gb300-r580-159", "gb300-r580-173", 0, &s->plan),
	                 NV_OK);
	s->required_approvals = s->plan.layers;
	struct api_upgrade_step step = {.index = 0,
	                                .action = API_ACT_VALIDATE,
	                                .trays = 0x3fe,
	                                .phase = API_STEP_SUCCEEDED};
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
	assert_non_null(strstr(txt, "\"requiredApprovals\":[\"fabric\",\"node\"]"));
	assert_non_null(strstr(txt, "\"trays\":[1,2,3,4,5,6,7,8,9]"));
	assert_non_null(strstr(txt, "\"busBandwidthGBps\":612"));
	assert_non_null(strstr(txt, "\"action\":\"Validate\""));
	free(txt);
	json_decref(o);
	free(s);
	matrix_free(m);
	json_decref(jm);
}

/* A full status: every field set, as the controller writes it. */
static void status_fill(struct api_rack_upgrade_status *s, struct matrix *m)
{
	s->observed_generation = 4;
	s->phase = API_PHASE_ROLLING_OUT;
	s->phase_ms = 1795000000000;
	memcpy(s->message, "wave 2 of 4", 12);
	memcpy(s->from_stack, "gb300-r580-159", 15);
	s->has_plan = true;
	assert_int_equal(matrix_plan_build(m, "gb300-r580-159", "gb300-r580-173", 0, &s->plan),
	                 NV_OK);
	s->notice_start_ms = 1794000000000;
	s->notice_end_ms = 1794259200000;
	s->required_approvals = MATRIX_BIT(MATRIX_L_FABRIC) | MATRIX_BIT(MATRIX_L_WORKLOAD);
	s->napprovals = 2;
	s->approvals[0] = (struct api_upgrade_approval_ref){.layer = MATRIX_L_FABRIC,
	                                                    .name = "a-fabric",
	                                                    .user = "alice",
	                                                    .time_ms = 1794100000000};
	s->approvals[1] = (struct api_upgrade_approval_ref){.layer = MATRIX_L_WORKLOAD,
	                                                    .name = "a-wl",
	                                                    .user = "system:serviceaccount:t:b",
	                                                    .rejected = true,
	                                                    .time_ms = 1794100001000};
	s->scheduled_start_ms = 1794300000000;
	memcpy(s->window, "weekday-night", 14);
	memcpy(s->canary_partition, "gb300-r07-a", 12);
	s->canary_trays = 0x6;
	s->nwaves = 2;
	s->waves[0] =
	        (struct api_upgrade_wave){0, 0x6, API_STEP_SUCCEEDED, 1794300000000, 1794300100000};
	s->waves[1] = (struct api_upgrade_wave){1, 0x18, API_STEP_RUNNING, 1794300200000, 0};
	s->nsteps = 3;
	s->steps = calloc(3, sizeof(*s->steps));
	s->steps[0] = (struct api_upgrade_step){.index = 0,
	                                        .action = API_ACT_DRAIN,
	                                        .trays = 0x6,
	                                        .phase = API_STEP_SUCCEEDED,
	                                        .start_ms = 1794300000000,
	                                        .completion_ms = 1794300010000};
	s->steps[1] = (struct api_upgrade_step){.index = 1,
	                                        .action = API_ACT_APPLY,
	                                        .components = MATRIX_BIT(MATRIX_C_DRIVER),
	                                        .trays = 0x6,
	                                        .phase = API_STEP_SKIPPED,
	                                        .message = "no switch-tray backend configured"};
	s->steps[2] = (struct api_upgrade_step){.index = 2,
	                                        .wave = 0,
	                                        .action = API_ACT_VALIDATE,
	                                        .trays = 0x6,
	                                        .phase = API_STEP_FAILED};
	s->steps[2].evidence = (struct api_gate_evidence){.set = true,
	                                                  .fabric_state = "Completed",
	                                                  .imex_domain_state = "UP",
	                                                  .busbw_gbps = 401,
	                                                  .floor_gbps = 500,
	                                                  .tolerance_pct = 10,
	                                                  .transport = "NVLS",
	                                                  .report = "401 < 450"};
	s->start_ms = 1794300000000;
	s->nconditions = 1;
	s->conditions[0] = (struct api_condition){.type = "Progressing",
	                                          .status = API_COND_TRUE,
	                                          .observed_generation = 4,
	                                          .last_transition_ms = 1794300000000,
	                                          .reason = "RollingOut",
	                                          .message = "wave 2"};
}

static void test_api_rack_upgrade_status_parse_round_trip(void **state)
{
	(void)state;
	json_t *jm = test_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_errors e;
	struct matrix *m = NULL;
	struct api_rack_upgrade_status *s = calloc(1, sizeof(*s));
	struct api_rack_upgrade_status *back = calloc(1, sizeof(*back));
	api_errors_init(&e);
	assert_int_equal(api_matrix_parse(jm, &m, &e), NV_OK);
	status_fill(s, m);
	json_t *a = api_rack_upgrade_status_to_json(s);
	assert_int_equal(api_rack_upgrade_status_parse(a, back, &e), NV_OK);
	json_t *b = api_rack_upgrade_status_to_json(back);
	assert_true(json_equal(a, b));
	assert_int_equal(back->phase, API_PHASE_ROLLING_OUT);
	assert_int_equal(back->nsteps, 3);
	assert_int_equal(back->steps[2].evidence.busbw_gbps, 401);
	assert_false(back->steps[2].evidence.passed);
	assert_true(back->approvals[1].rejected);
	assert_string_equal(back->approvals[1].user, "system:serviceaccount:t:b");
	assert_int_equal(back->canary_trays, 0x6);
	assert_int_equal(back->plan.nsteps, s->plan.nsteps);
	assert_int_equal(back->plan.layers, s->plan.layers);
	assert_true(back->plan.needs_drain);
	json_decref(a);
	json_decref(b);
	api_rack_upgrade_status_clear(back);
	api_rack_upgrade_status_clear(s);
	api_rack_upgrade_status_clear(NULL);
	free(back);
	free(s);
	matrix_free(m);
	json_decref(jm);
}

static void test_api_rack_upgrade_status_parse_empty(void **state)
{
	(void)state;
	struct api_errors e;
	struct api_rack_upgrade_status s;
	json_t *o = json_object();
	api_errors_init(&e);
	memset(&s, 0xff, sizeof(s));
	assert_int_equal(api_rack_upgrade_status_parse(NULL, &s, &e), NV_OK);
	assert_int_equal(s.phase, API_PHASE_PROPOSED);
	assert_null(s.steps);
	assert_int_equal(api_rack_upgrade_status_parse(o, &s, &e), NV_OK);
	assert_int_equal(s.nsteps, 0);
	json_decref(o);
}

#define ST_REJECTS(js, where, why)                                                                 \
	do {                                                                                       \
		struct api_errors e_;                                                              \
		struct api_rack_upgrade_status s_;                                                 \
		json_error_t je_;                                                                  \
		json_t *j_ = json_loads(js, 0, &je_);                                              \
		assert_non_null(j_);                                                               \
		api_errors_init(&e_);                                                              \
		memset(&s_, 0, sizeof(s_));                                                        \
		assert_int_equal(api_rack_upgrade_status_parse(j_, &s_, &e_),                      \
		                 NV_E_INVALID_OBJECT);                                             \
		if (!api_errors_has(&e_, where, why)) {                                            \
			for (unsigned i_ = 0; i_ < e_.n; i_++)                                     \
				fprintf(stderr, "%s: %s\n", e_.list[i_].path, e_.list[i_].msg);    \
			fail_msg("no error at %s", where);                                         \
		}                                                                                  \
		assert_null(s_.steps);                                                             \
		json_decref(j_);                                                                   \
	} while (0)

static void test_api_rack_upgrade_status_parse_rejects(void **state)
{
	(void)state;
	ST_REJECTS("[]", "status", "must be an object");
	ST_REJECTS("{\"phase\":\"Dancing\"}", "status.phase", NULL);
	ST_REJECTS("{\"phaseTime\":\"yesterday\"}", "status.phaseTime", "RFC 3339");
	ST_REJECTS("{\"steps\":[{\"index\":0,\"action\":\"Apply\",\"phase\":\"Bogus\"}]}",
	           "status.steps[0].phase", NULL);
	ST_REJECTS("{\"steps\":[{\"index\":1,\"action\":\"Apply\",\"phase\":\"Pending\"}]}",
	           "status.steps[0].index", "must be 0");
	ST_REJECTS("{\"steps\":[{\"index\":0,\"action\":\"Apply\",\"phase\":\"Pending\","
	           "\"trays\":[0]}]}",
	           "status.steps[0].trays[0]", NULL);
	ST_REJECTS("{\"approvals\":[{\"layer\":\"node\"}]}", "status.approvals[0].name", NULL);
	ST_REJECTS("{\"waves\":[{\"index\":0,\"trays\":[1,1]}]}", "status.waves[0].trays[1]",
	           "duplicate");
	ST_REJECTS("{\"steps\":[{\"index\":0,\"action\":\"Validate\",\"phase\":\"Failed\","
	           "\"evidence\":{\"tolerancePercent\":80}}]}",
	           "status.steps[0].evidence.tolerancePercent", NULL);
}

/* spec.retry and status.retried, the two halves of a person's retry. */
static void test_api_rack_upgrade_retry(void **state)
{
	(void)state;
	struct api_errors e;
	struct api_rack_upgrade *u = NULL;
	struct api_rack_upgrade_status st;
	json_t *j = test_load(ROUTINE);
	api_errors_init(&e);
	test_set(j, "spec.retry", json_integer(3));
	assert_int_equal(api_rack_upgrade_parse(j, &u, &e), NV_OK);
	assert_int_equal(u->retry, 3);
	api_rack_upgrade_free(u);
	json_decref(j);
	memset(&st, 0, sizeof(st));
	st.retried = 2;
	j = api_rack_upgrade_status_to_json(&st);
	assert_int_equal(json_integer_value(json_object_get(j, "retried")), 2);
	memset(&st, 0, sizeof(st));
	assert_int_equal(api_rack_upgrade_status_parse(j, &st, &e), NV_OK);
	assert_int_equal(st.retried, 2);
	api_rack_upgrade_status_clear(&st);
	json_decref(j);
	ST_REJECTS("{\"retried\":-1}", "status.retried", NULL);
}

static void test_api_step_action_name_crd_spelling(void **state)
{
	(void)state;
	assert_string_equal(api_step_action_name(API_ACT_CORDON), "Cordon");
	assert_string_equal(api_step_action_name(API_ACT_WAIT_FABRIC), "WaitFabric");
	assert_string_equal(api_step_action_name(API_ACT_WAIT_IMEX), "WaitIMEX");
	assert_string_equal(api_step_action_name(API_ACT_UNCORDON), "Uncordon");
	assert_string_equal(api_step_action_name(API_ACT_ROLL_BACK), "RollBack");
}

/* In flight is every phase but Completed and Aborted; no status yet is
 * Proposed, and a phase this build does not know holds the rack too. */
static void test_api_rack_upgrade_in_flight_phases(void **state)
{
	(void)state;
	static const struct {
		const char *phase; /* NULL: no status */
		bool in_flight;
	} cases[] = {
	        {NULL, true},
	        {"", true},
	        {"Proposed", true},
	        {"Notice", true},
	        {"AwaitingApproval", true},
	        {"Scheduled", true},
	        {"Canary", true},
	        {"Validating", true},
	        {"RollingOut", true},
	        {"Halted", true},
	        {"Paused", true},
	        {"Completed", false},
	        {"Aborted", false},
	        {"SomethingNewer", true},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = test_load(ROUTINE);
		if (cases[i].phase != NULL)
			json_object_set_new(j, "status",
			                    json_pack("{s:s}", "phase", cases[i].phase));
		if (api_rack_upgrade_in_flight(j) != cases[i].in_flight)
			fail_msg("phase \"%s\": in flight should be %d",
			         cases[i].phase ? cases[i].phase : "(none)", cases[i].in_flight);
		json_decref(j);
	}
	assert_true(api_upgrade_phase_final(API_PHASE_COMPLETED));
	assert_true(api_upgrade_phase_final(API_PHASE_ABORTED));
	assert_false(api_upgrade_phase_final(API_PHASE_HALTED));
	assert_false(api_upgrade_phase_final(API_PHASE_PAUSED));
}

/* A RackUpgrade of rack named name, Completed at time t (NULL: none). */
static json_t *completed(const char *name, const char *rack, const char *phase, const char *t)
{
	json_t *j = json_pack("{s:{s:s}, s:{s:s}, s:{s:s}}", "metadata", "name", name, "spec",
	                      "rack", rack, "status", "phase", phase);
	if (t != NULL)
		json_object_set_new(json_object_get(j, "status"), "completionTime", json_string(t));
	return j;
}

/* The last Completed upgrade of a rack: others' racks, other phases and
 * earlier completions lose; a tie goes to the greater name. */
static void test_api_rack_upgrade_latest_completed_picks(void **state)
{
	(void)state;
	json_t *ups = json_array();
	assert_null(api_rack_upgrade_latest_completed(ups, "r07"));
	assert_null(api_rack_upgrade_latest_completed(NULL, "r07"));
	json_array_append_new(ups, completed("a", "r07", "Completed", "2026-11-01T10:00:00Z"));
	json_array_append_new(ups, completed("b", "r07", "Completed", "2026-11-03T10:00:00Z"));
	json_array_append_new(ups, completed("c", "r07", "Aborted", "2026-11-05T10:00:00Z"));
	json_array_append_new(ups, completed("d", "r08", "Completed", "2026-11-06T10:00:00Z"));
	json_array_append_new(ups, completed("e", "r07", "Completed", NULL));
	json_array_append_new(ups, completed("f", "r07", "RollingOut", NULL));
	assert_string_equal(
	        jx_str_or(api_rack_upgrade_latest_completed(ups, "r07"), "metadata.name", ""), "b");
	assert_string_equal(
	        jx_str_or(api_rack_upgrade_latest_completed(ups, "r08"), "metadata.name", ""), "d");
	assert_null(api_rack_upgrade_latest_completed(ups, "r09"));
	assert_null(api_rack_upgrade_latest_completed(ups, ""));
	json_array_append_new(ups, completed("a2", "r07", "Completed", "2026-11-03T10:00:00Z"));
	json_array_append_new(ups, completed("b0", "r07", "Completed", "2026-11-03T10:00:00Z"));
	assert_string_equal(
	        jx_str_or(api_rack_upgrade_latest_completed(ups, "r07"), "metadata.name", ""),
	        "b0");
	json_decref(ups);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_api_rack_upgrade_parse_samples),
	        cmocka_unit_test(test_api_rack_upgrade_parse_security_rules),
	        cmocka_unit_test(test_api_rack_upgrade_parse_target),
	        cmocka_unit_test(test_api_upgrade_approval_parse_rules),
	        cmocka_unit_test(test_api_rack_upgrade_status_to_json_plan),
	        cmocka_unit_test(test_api_rack_upgrade_status_parse_round_trip),
	        cmocka_unit_test(test_api_rack_upgrade_status_parse_empty),
	        cmocka_unit_test(test_api_rack_upgrade_status_parse_rejects),
	        cmocka_unit_test(test_api_rack_upgrade_retry),
	        cmocka_unit_test(test_api_step_action_name_crd_spelling),
	        cmocka_unit_test(test_api_rack_upgrade_in_flight_phases),
	        cmocka_unit_test(test_api_rack_upgrade_latest_completed_picks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
