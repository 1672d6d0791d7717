// SPDX-License-Identifier: Apache-2.0
// Unit tests for Rack parsing: the sample parses with its defaults, and
// each broken field is reported at its exact path with the CRD's message.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_rack.h"

#define RACK "tests/data/api/rack-gb300-r07.json"

static int setup(void **state)
{
	*state = test_load(RACK);
	return 0;
}

static int teardown(void **state)
{
	json_decref(*state);
	return 0;
}

#define REJECTS(obj, path, msg) TEST_REJECTS(api_rack_parse, struct api_rack, obj, path, msg)

static void test_api_rack_parse_sample(void **state)
{
	struct api_errors e;
	struct api_rack *r = NULL;
	api_errors_init(&e);
	assert_int_equal(api_rack_parse(*state, &r, &e), NV_OK);
	assert_int_equal(e.n, 0);
	assert_string_equal(r->meta.name, "gb300-r07");
	assert_int_equal(r->platform, MATRIX_GB300);
	assert_int_equal(r->ncompute, 18);
	assert_int_equal(r->nswitch, 9);
	assert_string_equal(r->matrix_stack, "gb300-r580-95");
	assert_int_equal(r->nresp, 5);
	assert_int_equal(r->resp[0].notice_ms, 168LL * 3600 * 1000);
	assert_false(r->resp[2].approval_required);
	assert_int_equal(r->nwindows, 2);
	assert_int_equal(r->windows[0].start_min, 22 * 60);
	assert_int_equal(r->windows[0].end_min, 4 * 60);
	assert_int_equal(r->windows[0].days, 0x0e); // Tue, Wed, Thu
	assert_int_equal(r->windows[1].layers,
	                 MATRIX_BIT(MATRIX_L_NODE) | MATRIX_BIT(MATRIX_L_KUBERNETES));
	assert_int_equal(r->nfreezes, 1);
	assert_true(r->freezes[0].end_ms > r->freezes[0].start_ms);
	assert_int_equal(r->policy.drain_mode, API_DRAIN_CHECKPOINT);
	assert_int_equal(r->policy.checkpoint_deadline_ms, 45 * 60000);
	assert_non_null(api_rack_tray_by_node(r, r->compute[4].node));
	assert_null(api_rack_tray_by_node(r, "elsewhere"));
	api_rack_free(r);
	api_rack_free(NULL);
}

static void test_api_rack_parse_defaults(void **state)
{
	json_t *j = *state;
	test_set(j, "spec.policy", NULL);
	test_set(j, "spec.maintenance", NULL);
	test_set(j, "spec.responsibilities", NULL);
	struct api_errors e;
	struct api_rack *r = NULL;
	api_errors_init(&e);
	assert_int_equal(api_rack_parse(j, &r, &e), NV_OK);
	assert_int_equal(r->policy.max_unavailable_trays, 2);
	assert_int_equal(r->policy.min_healthy_trays, 16);
	assert_int_equal(r->policy.degraded_threshold, 2);
	assert_true(r->policy.cordon_when_degraded);
	assert_int_equal(r->policy.drain_mode, API_DRAIN_EVICT);
	assert_int_equal(r->policy.eviction_deadline_ms, 3600000);
	assert_int_equal(r->policy.on_gate_failure, API_ON_GATE_HOLD);
	api_rack_free(r);
}

static void test_api_rack_parse_tray_node_empty(void **state)
{
	test_set(*state, "spec.computeTrays[3].node", json_string(""));
	REJECTS(*state, "spec.computeTrays[3].node", "must not be empty");
}

static void test_api_rack_parse_tray_node_type(void **state)
{
	test_set(*state, "spec.computeTrays[3].node", json_integer(3));
	REJECTS(*state, "spec.computeTrays[3].node", "must be a string, not a number");
}

static void test_api_rack_parse_tray_count(void **state)
{
	test_set(*state, "spec.computeTrays[17]", NULL);
	REJECTS(*state, "spec.computeTrays", "must have exactly 18 items, not 17");
}

static void test_api_rack_parse_tray_node_unique(void **state)
{
	json_t *j = *state;
	const char *n0 = json_string_value(json_object_get(
	        json_array_get(json_object_get(json_object_get(j, "spec"), "computeTrays"), 0),
	        "node"));
	test_set(j, "spec.computeTrays[5].node", json_string(n0));
	REJECTS(j, "spec.computeTrays[5].node", "must be unique");
}

static void test_api_rack_parse_tray_index(void **state)
{
	test_set(*state, "spec.computeTrays[2].index", json_integer(1));
	REJECTS(*state, "spec.computeTrays[2].index", "duplicate value 1");
	test_set(*state, "spec.computeTrays[2].index", json_integer(19));
	REJECTS(*state, "spec.computeTrays[2].index", "must be between 1 and 18");
}

static void test_api_rack_parse_switch_tray(void **state)
{
	test_set(*state, "spec.switchTrays[4].oobAddress", json_string("-bad"));
	REJECTS(*state, "spec.switchTrays[4].oobAddress", "must be a host name");
	test_set(*state, "spec.switchTrays[4]", NULL);
	REJECTS(*state, "spec.switchTrays", "must have exactly 9 items");
}

static void test_api_rack_parse_platform_and_matrix(void **state)
{
	test_set(*state, "spec.platform", json_string("gb100"));
	test_set(*state, "spec.matrix", NULL);
	REJECTS(*state, "spec.platform", "must be one of: gb200, gb300, vr200");
	REJECTS(*state, "spec.matrix", "is required");
}

static void test_api_rack_parse_policy_rules(void **state)
{
	test_set(*state, "spec.policy.minHealthyTrays", json_integer(17));
	REJECTS(*state, "spec.policy.minHealthyTrays",
	        "must not exceed 18, the number of compute trays");
	test_set(*state, "spec.policy.minHealthyTrays", json_integer(10));
	test_set(*state, "spec.policy.maxUnavailableTrays", json_integer(3));
	REJECTS(*state, "spec.policy.maxUnavailableTrays", "must not exceed degradedThreshold");
	test_set(*state, "spec.policy.drain.mode", json_string("Kill"));
	REJECTS(*state, "spec.policy.drain.mode", "must be one of: Evict, Checkpoint");
}

static void test_api_rack_parse_windows(void **state)
{
	test_set(*state, "spec.maintenance.windows[0].start", json_string("25:00"));
	REJECTS(*state, "spec.maintenance.windows[0].start", "must be a time of day");
	test_set(*state, "spec.maintenance.windows[0].start", json_string("04:00"));
	REJECTS(*state, "spec.maintenance.windows[0].end", "window end must differ from start");
	json_t *days = json_pack("[ss]", "Monday", "Monday");
	test_set(*state, "spec.maintenance.windows[1].days", days);
	REJECTS(*state, "spec.maintenance.windows[1].days[1]", "duplicate value");
	test_set(*state, "spec.maintenance.windows[1].days", json_array());
	REJECTS(*state, "spec.maintenance.windows[1].days", "must have at least 1 items");
}

static void test_api_rack_parse_freezes(void **state)
{
	test_set(*state, "spec.maintenance.freezes[0].end", json_string("2026-12-01T00:00:00Z"));
	REJECTS(*state, "spec.maintenance.freezes[0].end", "freeze end must be after start");
	test_set(*state, "spec.maintenance.freezes[0].start", json_string("tomorrow"));
	REJECTS(*state, "spec.maintenance.freezes[0].start", "must be an RFC 3339 date-time");
}

static void test_api_rack_parse_responsibilities(void **state)
{
	test_set(*state, "spec.responsibilities[1].layer", json_string("firmware"));
	REJECTS(*state, "spec.responsibilities[1].layer", "duplicate value \"firmware\"");
	test_set(*state, "spec.responsibilities[0].noticePeriod", json_string("3d"));
	REJECTS(*state, "spec.responsibilities[0].noticePeriod", "must be a duration");
	test_set(*state, "spec.responsibilities[2].owner", NULL);
	REJECTS(*state, "spec.responsibilities[2].owner", "is required");
}

static void test_api_rack_parse_metadata(void **state)
{
	char name[64];
	memset(name, 'r', 59);
	name[59] = '\0';
	test_set(*state, "metadata.name", json_string(name));
	REJECTS(*state, "metadata.name", "at most 58 characters");
	test_set(*state, "metadata.name", json_string("Rack_7"));
	REJECTS(*state, "metadata.name", "must be a DNS subdomain");
	test_set(*state, "kind", json_string("Rak"));
	REJECTS(*state, "kind", "must be Rack");
	test_set(*state, "apiVersion", json_string("nvl72.io/v1"));
	REJECTS(*state, "apiVersion", "must be nvl72.io/v1alpha1");
}

static void test_api_rack_parse_collects_all(void **state)
{
	json_t *j = *state;
	test_set(j, "spec.computeTrays[0].node", json_string(""));
	test_set(j, "spec.computeTrays[9].serial", json_string("a b"));
	test_set(j, "spec.chassisSerial", json_string("x/y"));
	struct api_errors e;
	struct api_rack *r = NULL;
	api_errors_init(&e);
	assert_int_equal(api_rack_parse(j, &r, &e), NV_E_INVALID_OBJECT);
	assert_int_equal(e.n, 3);
	struct buf b;
	buf_init(&b, 4096);
	assert_int_equal(api_errors_format(&e, &b), NV_OK);
	assert_string_equal(
	        buf_str(&b),
	        "spec.chassisSerial: must be a serial (letters, digits, '.', '_' and '-'); "
	        "spec.computeTrays[0].node: must not be empty; "
	        "spec.computeTrays[9].serial: must be a serial (letters, digits, '.', '_' and "
	        "'-')");
	buf_clear(&b);
	api_errors_init(&e);
	json_t *arr = json_array();
	assert_int_equal(api_rack_parse(arr, &r, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "", "must be an object"));
	json_decref(arr);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_api_rack_parse_sample),
	        T(test_api_rack_parse_defaults),
	        T(test_api_rack_parse_tray_node_empty),
	        T(test_api_rack_parse_tray_node_type),
	        T(test_api_rack_parse_tray_count),
	        T(test_api_rack_parse_tray_node_unique),
	        T(test_api_rack_parse_tray_index),
	        T(test_api_rack_parse_switch_tray),
	        T(test_api_rack_parse_platform_and_matrix),
	        T(test_api_rack_parse_policy_rules),
	        T(test_api_rack_parse_windows),
	        T(test_api_rack_parse_freezes),
	        T(test_api_rack_parse_responsibilities),
	        T(test_api_rack_parse_metadata),
	        T(test_api_rack_parse_collects_all),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
