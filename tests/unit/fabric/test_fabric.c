// SPDX-License-Identifier: Apache-2.0
// The fabric interface itself: the backend registry, configuration from a
// Secret's data and its validation messages, member lists and clique IDs.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/fabric/fabric_int.h"

static const char CA[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

static void test_fabric_backend_find_knows_both(void **state)
{
	(void)state;
	assert_ptr_equal(fabric_backend_find("nmx-m"), &fabric_nmxm_ops);
	assert_ptr_equal(fabric_backend_find("sim"), &fabric_sim_ops);
	assert_null(fabric_backend_find("fm"));
	assert_null(fabric_backend_find(NULL));
	assert_string_equal(fabric_backend_names(), "nmx-m, sim");
}

static void good_nmxm(struct fabric_config *c)
{
	fabric_config_init(c);
	snprintf(c->endpoint, sizeof(c->endpoint), "https://nmx-m.mgmt.example:443");
	assert_int_equal(fabric_config_set_secret(c, "username", "rw-user", 7), NV_OK);
	assert_int_equal(fabric_config_set_secret(c, "password", "pw\n", 3), NV_OK);
	assert_int_equal(fabric_config_set_secret(c, "ca.crt", CA, strlen(CA)), NV_OK);
}

static void expect_invalid(struct fabric_config *c, const char *needle)
{
	char why[256];

	assert_int_equal(fabric_config_validate(c, why, sizeof(why)), NV_E_CONFIG);
	if (strstr(why, needle) == NULL)
		fail_msg("\"%s\" not in \"%s\"", needle, why);
	fabric_config_clear(c);
}

static void test_fabric_config_validate_explains(void **state)
{
	(void)state;
	struct fabric_config c;
	char why[256];

	good_nmxm(&c);
	assert_int_equal(fabric_config_validate(&c, why, sizeof(why)), NV_OK);
	assert_string_equal(c.password, "pw");
	assert_int_equal(c.ca_pem_len, strlen(CA));
	fabric_config_clear(&c);
	assert_null(c.password);

	good_nmxm(&c);
	snprintf(c.endpoint, sizeof(c.endpoint), "http://nmx-m:80");
	expect_invalid(&c, "in the clear");
	good_nmxm(&c);
	c.endpoint[0] = '\0';
	expect_invalid(&c, "endpoint: required");
	good_nmxm(&c);
	snprintf(c.endpoint, sizeof(c.endpoint), "ftp://x");
	expect_invalid(&c, "https://");
	good_nmxm(&c);
	snprintf(c.endpoint, sizeof(c.endpoint), "https://");
	expect_invalid(&c, "not a URL");
	good_nmxm(&c);
	fabric_config_set_secret(&c, "token", "abc", 3);
	expect_invalid(&c, "not both");
	good_nmxm(&c);
	secure_free_str(c.password);
	c.password = NULL;
	expect_invalid(&c, "both username and password");
	good_nmxm(&c);
	fabric_config_clear(&c);
	expect_invalid(&c, "none given");
	good_nmxm(&c);
	fabric_config_set_secret(&c, "ca.crt", "junk", 4);
	expect_invalid(&c, "ca.crt");
	good_nmxm(&c);
	c.poll_interval_ms = 0;
	expect_invalid(&c, "poll_interval_ms: 0 is outside");
	good_nmxm(&c);
	c.poll_max_interval_ms = 10;
	expect_invalid(&c, "below poll_interval_ms");
	good_nmxm(&c);
	c.retries = 11;
	expect_invalid(&c, "retries");
	good_nmxm(&c);
	c.max_body = 10;
	expect_invalid(&c, "max_body");
	good_nmxm(&c);
	snprintf(c.backend, sizeof(c.backend), "fm");
	expect_invalid(&c, "\"fm\" is not one of nmx-m, sim");

	fabric_config_init(&c);
	snprintf(c.backend, sizeof(c.backend), "sim");
	expect_invalid(&c, "sim_root: required");
	fabric_config_init(&c);
	snprintf(c.backend, sizeof(c.backend), "sim");
	snprintf(c.sim_root, sizeof(c.sim_root), "/tmp");
	assert_int_equal(fabric_config_validate(&c, NULL, 0), NV_OK);
}

static void test_fabric_config_set_secret_rejects_unknown_keys(void **state)
{
	(void)state;
	struct fabric_config c;

	fabric_config_init(&c);
	assert_int_equal(fabric_config_set_secret(&c, "tls.key", "x", 1), NV_E_INVAL);
	assert_int_equal(fabric_config_set_secret(&c, "token", "t1", 2), NV_OK);
	assert_int_equal(fabric_config_set_secret(&c, "token", "t2", 2), NV_OK);
	assert_string_equal(c.token, "t2");
	fabric_config_clear(&c);
	fabric_config_clear(&c);
}

static void test_fabric_backend_new_refuses_bad_config(void **state)
{
	(void)state;
	struct fabric_config c;
	struct fabric_backend *b = NULL;
	struct fabric_status st;

	fabric_config_init(&c);
	assert_int_equal(fabric_backend_new(&c, &b, &st), NV_E_CONFIG);
	assert_null(b);
	assert_string_equal(st.message, "endpoint: required for the nmx-m backend");
	fabric_backend_free(NULL);
}

static void test_fabric_spec_add_tray_fills_modules(void **state)
{
	(void)state;
	struct fabric_partition_spec *s = malloc(sizeof(*s));

	fabric_spec_init(s);
	assert_int_equal(s->chassis_id, -1);
	assert_int_equal(fabric_spec_add_tray(s, 7, 16, 1), NV_OK);
	assert_int_equal(s->n_gpus, 4);
	assert_int_equal(s->gpus[3].tray, 7);
	assert_int_equal(s->gpus[3].module, 4);
	assert_int_equal(s->gpus[3].slot, 16);
	assert_int_equal(fabric_spec_add_tray(s, 7, 16, 1), NV_E_EXISTS);
	assert_int_equal(fabric_spec_add_tray(s, 0, 16, 1), NV_E_INVAL);
	for (unsigned t = 8; t <= 24; t++)
		assert_int_equal(fabric_spec_add_tray(s, t, 0, 0), NV_OK);
	assert_int_equal(s->n_gpus, FABRIC_GPUS_MAX);
	assert_int_equal(fabric_spec_add_tray(s, 25, 0, 0), NV_E_TOO_LARGE);
	free(s);
}

static void test_fabric_partition_clique_formats(void **state)
{
	(void)state;
	struct fabric_partition *p = calloc(1, sizeof(*p));
	char out[FABRIC_CLIQUE_LEN];

	assert_int_equal(fabric_partition_clique(p, "u", out), NV_E_STATE);
	p->has_partition_id = true;
	p->partition_id = 32766;
	assert_int_equal(fabric_partition_clique(p, "", out), NV_E_INVAL);
	assert_int_equal(fabric_partition_clique(p, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3", out),
	                 NV_OK);
	assert_string_equal(out, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766");
	free(p);
}

static void test_fabric_names(void **state)
{
	(void)state;
	assert_string_equal(fabric_op_state_name(FABRIC_OP_IN_PROGRESS), "in-progress");
	assert_string_equal(fabric_health_name(FABRIC_HEALTH_DEGRADED_BANDWIDTH),
	                    "DEGRADED_BANDWIDTH");
	assert_string_equal(fabric_member_kind_name(FABRIC_MEMBERS_GPU_ID), "gpu-id");
	assert_true(fabric_op_done(FABRIC_OP_FAILED));
	assert_false(fabric_op_done(FABRIC_OP_PENDING));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_fabric_backend_find_knows_both),
	        cmocka_unit_test(test_fabric_config_validate_explains),
	        cmocka_unit_test(test_fabric_config_set_secret_rejects_unknown_keys),
	        cmocka_unit_test(test_fabric_backend_new_refuses_bad_config),
	        cmocka_unit_test(test_fabric_spec_add_tray_fills_modules),
	        cmocka_unit_test(test_fabric_partition_clique_formats),
	        cmocka_unit_test(test_fabric_names),
	};
	log_set_level(LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
