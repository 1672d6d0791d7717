// SPDX-License-Identifier: Apache-2.0
// Unit tests for ComputeTray parsing: the operator-agent contract, with
// its name rule, driver parameters, IMEX configuration, maintenance and
// validation runs, and the validation record the agent writes back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_rack.h"

static int setup(void **state)
{
	*state = test_load("tests/data/api/computetray-gb300-r07-t03.json");
	return 0;
}

static int teardown(void **state)
{
	json_decref(*state);
	return 0;
}

#define REJECTS(obj, path, msg)                                                                    \
	TEST_REJECTS(api_compute_tray_parse, struct api_compute_tray, obj, path, msg)

static void test_api_compute_tray_parse_sample(void **state)
{
	struct api_errors e;
	struct api_compute_tray *t = NULL;
	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_string_equal(t->rack, "gb300-r07");
	assert_int_equal(t->index, 3);
	assert_true(t->has_driver);
	assert_int_equal(t->driver.branch, 580);
	assert_string_equal(t->driver.version.text, "580.95.05");
	assert_int_equal(t->nparams, 2);
	assert_true(t->has_imex);
	assert_int_equal(t->npeers, 9);
	assert_string_equal(t->peers[0], "10.42.7.11");
	assert_int_equal(t->imex_port, 50000);
	assert_int_equal(t->channel_count, 2048);
	assert_int_equal(t->nchannel_ids, 1);
	assert_int_equal(t->maint, API_MAINT_NONE);
	assert_string_equal(api_maint_state_name(API_MAINT_DRAINED), "Drained");
	api_compute_tray_free(t);
}

static void test_api_compute_tray_parse_name_rule(void **state)
{
	test_set(*state, "metadata.name", json_string("gb300-r07-t3"));
	REJECTS(*state, "metadata.name", "for example gb300-r07-t03");
}

static void test_api_compute_tray_parse_driver(void **state)
{
	test_set(*state, "spec.driver.version", json_string("58.1.2"));
	REJECTS(*state, "spec.driver.version", "must be a driver version");
	test_set(*state, "spec.driver.version", json_string("615.23"));
	test_set(*state, "spec.driver.parameters.foo", json_string("1"));
	REJECTS(*state, "spec.driver.parameters.foo", "must be NVreg_ module parameters");
	test_set(*state, "spec.driver.parameters.foo", NULL);
	test_set(*state, "spec.driver.parameters.NVreg_X", json_string("a b"));
	REJECTS(*state, "spec.driver.parameters.NVreg_X", "must be a module parameter value");
	test_set(*state, "spec.driver.parameters.NVreg_X", NULL);
	test_set(*state, "spec.driver.activation", json_string("Kexec"));
	REJECTS(*state, "spec.driver.activation", "must be one of: Reload, Reboot");
}

static void test_api_compute_tray_parse_imex(void **state)
{
	test_set(*state, "spec.imex.commandPort", json_integer(50000));
	REJECTS(*state, "spec.imex.commandPort", "must differ from imex.port");
	test_set(*state, "spec.imex.commandPort", json_integer(80));
	REJECTS(*state, "spec.imex.commandPort", "must be between 1024 and 65535");
	test_set(*state, "spec.imex.commandPort", json_integer(50005));
	test_set(*state, "spec.imex.channels.ids[0]", json_integer(4096));
	REJECTS(*state, "spec.imex.channels.ids[0]", "must be below imex.channels.count");
	test_set(*state, "spec.imex.channels.ids[0]", json_integer(1));
	test_set(*state, "spec.imex.peers[4]", json_string("10.42.7.11"));
	REJECTS(*state, "spec.imex.peers[4]", "must not repeat an address");
	test_set(*state, "spec.imex.domain", NULL);
	REJECTS(*state, "spec.imex.domain", "is required");
	test_set(*state, "spec.imex.domain", json_string("gb300-r07"));
	test_set(*state, "spec.imex.peers", json_array());
	REJECTS(*state, "spec.imex.peers", "must have at least 1 items");
	test_set(*state, "spec.imex.peers", NULL);
	REJECTS(*state, "spec.imex.peers", "is required");
}

static void test_api_compute_tray_parse_channel_allocation(void **state)
{
	struct api_errors e;
	struct api_compute_tray *t = NULL;

	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_int_equal(t->channel_alloc, API_ALLOC_SINGLE);
	api_compute_tray_free(t);
	test_set(*state, "spec.imex.channels.allocationMode", json_string("All"));
	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_int_equal(t->channel_alloc, API_ALLOC_ALL);
	api_compute_tray_free(t);
	test_set(*state, "spec.imex.channels.allocationMode", json_string("Many"));
	REJECTS(*state, "spec.imex.channels.allocationMode", "must be one of: Single, All");
}

static void test_api_compute_tray_parse_imex_domain_uid(void **state)
{
	struct api_errors e;
	struct api_compute_tray *t = NULL;

	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_string_equal(t->imex_domain_uid, ""); /* optional */
	api_compute_tray_free(t);
	test_set(*state, "spec.imex.domainUID",
	         json_string("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"));
	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_string_equal(t->imex_domain_uid, "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f");
	api_compute_tray_free(t);
	test_set(*state, "spec.imex.domainUID",
	         json_string("6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f0"));
	REJECTS(*state, "spec.imex.domainUID", "must be at most 36 characters");
	test_set(*state, "spec.imex.domainUID", json_string("a b"));
	REJECTS(*state, "spec.imex.domainUID", "must be a serial");
	test_set(*state, "spec.imex.domainUID", json_string(""));
	REJECTS(*state, "spec.imex.domainUID", "must not be empty");
}

static void test_api_compute_tray_parse_maintenance(void **state)
{
	test_set(*state, "spec.maintenance.state", json_string("Upgrading"));
	REJECTS(*state, "spec.maintenance.upgrade",
	        "is required when maintenance.state is Upgrading");
	json_t *up = json_pack("{s:s, s:i, s:[s]}", "name", "gb300-r07-r580-173", "step", 1,
	                       "components", "imex");
	test_set(*state, "spec.maintenance.upgrade", up);
	REJECTS(*state, "spec.maintenance.upgrade.components[0]", "must be one of: nvos");
	struct api_errors e;
	struct api_compute_tray *t = NULL;
	test_set(*state, "spec.maintenance.upgrade.components[0]", json_string("driver"));
	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_int_equal(t->maint, API_MAINT_UPGRADING);
	assert_int_equal(t->maint_components, MATRIX_BIT(MATRIX_C_DRIVER));
	assert_true(t->has_maint_step);
	assert_int_equal(t->maint_step, 1);
	api_compute_tray_free(t);
	test_set(*state, "spec.maintenance.upgrade.step", NULL);
	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_false(t->has_maint_step);
	api_compute_tray_free(t);
}

static void test_api_compute_tray_parse_spec_required(void **state)
{
	test_set(*state, "spec.rack", NULL);
	test_set(*state, "spec.index", json_integer(0));
	test_set(*state, "spec.node", json_string("Node_3"));
	REJECTS(*state, "spec.rack", "is required");
	REJECTS(*state, "spec.index", "must be between 1 and 18");
	REJECTS(*state, "spec.node", "must be a DNS subdomain");
	test_set(*state, "spec", NULL);
	REJECTS(*state, "spec", "is required");
}

static void test_api_compute_tray_parse_validation(void **state)
{
	struct api_errors e;
	struct api_compute_tray *t = NULL;

	test_set(*state, "spec.validation",
	         json_pack("{s:s, s:[s,s]}", "id", "r07-canary-1", "args", "--partition", "a"));
	api_errors_init(&e);
	assert_int_equal(api_compute_tray_parse(*state, &t, &e), NV_OK);
	assert_true(t->has_validation);
	assert_string_equal(t->validation_id, "r07-canary-1");
	assert_int_equal(t->validation_timeout_s, 600); /* the default */
	assert_int_equal(t->nvalidation_args, 2);
	assert_string_equal(t->validation_args[1], "a");
	api_compute_tray_free(t);
	test_set(*state, "spec.validation.timeoutSeconds", json_integer(5));
	REJECTS(*state, "spec.validation.timeoutSeconds", "must be between 10 and 86400");
	test_set(*state, "spec.validation.timeoutSeconds", json_integer(900));
	test_set(*state, "spec.validation.id", json_string("-bad id"));
	REJECTS(*state, "spec.validation.id", "must");
	test_set(*state, "spec.validation.id", NULL);
	REJECTS(*state, "spec.validation.id", "is required");
	test_set(*state, "spec.validation.id", json_string("ok"));
	test_set(*state, "spec.validation.args[0]", json_integer(3));
	REJECTS(*state, "spec.validation.args[0]", "must be a string");
}

static void test_api_tray_validation_parse_status(void **state)
{
	struct api_tray_validation v;
	struct api_errors e;
	json_t *st;

	api_errors_init(&e);
	/* No record: phase None, not an error. */
	assert_int_equal(api_tray_validation_parse(*state, &v, &e), NV_OK);
	assert_int_equal(v.phase, API_VALIDATION_NONE);
	st = json_pack("{s:{s:s, s:s, s:f, s:s, s:s, s:s, s:s}}", "validation", "id", "c1", "phase",
	               "Succeeded", "busBandwidthGbps", 812.5, "transport", "NVLink", "startTime",
	               "2026-11-29T15:49:51Z", "completionTime", "2026-11-29T15:50:51Z", "message",
	               "bus bandwidth 812.50 GB/s");
	test_set(*state, "status", st);
	assert_int_equal(api_tray_validation_parse(*state, &v, &e), NV_OK);
	assert_string_equal(v.id, "c1");
	assert_int_equal(v.phase, API_VALIDATION_SUCCEEDED);
	assert_true(v.has_busbw && v.busbw_gbps == 812.5);
	assert_string_equal(v.transport, "NVLink");
	assert_int_equal(v.completion_ms - v.start_ms, 60000);
	assert_string_equal(api_validation_phase_name(v.phase), "Succeeded");
	/* An integer figure, as the apiserver may return it. */
	test_set(*state, "status.validation.busBandwidthGbps", json_integer(900));
	assert_int_equal(api_tray_validation_parse(*state, &v, &e), NV_OK);
	assert_true(v.busbw_gbps == 900.0);
	test_set(*state, "status.validation.busBandwidthGbps", json_string("fast"));
	api_errors_init(&e);
	assert_int_equal(api_tray_validation_parse(*state, &v, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "status.validation.busBandwidthGbps", "must be a number"));
	test_set(*state, "status.validation.busBandwidthGbps", json_integer(1));
	test_set(*state, "status.validation.phase", json_string("Maybe"));
	api_errors_init(&e);
	assert_int_equal(api_tray_validation_parse(*state, &v, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "status.validation.phase", "must be one of"));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_api_compute_tray_parse_sample),
	        T(test_api_compute_tray_parse_name_rule),
	        T(test_api_compute_tray_parse_driver),
	        T(test_api_compute_tray_parse_imex),
	        T(test_api_compute_tray_parse_channel_allocation),
	        T(test_api_compute_tray_parse_imex_domain_uid),
	        T(test_api_compute_tray_parse_maintenance),
	        T(test_api_compute_tray_parse_spec_required),
	        T(test_api_compute_tray_parse_validation),
	        T(test_api_tray_validation_parse_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
