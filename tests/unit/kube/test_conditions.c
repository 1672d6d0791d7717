// SPDX-License-Identifier: Apache-2.0
// Unit tests for the conditions helper and the small request helpers: the
// lastTransitionTime rule, change reporting, path and query encoding, the
// HTTP-to-error mapping and Status decoding.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/kube/kube_int.h"
#include "nvl72/kube_ctrl.h"

static void test_kube_condition_set_transition_rules(void **state)
{
	(void)state;
	json_t *o = json_object();
	int64_t t1 = 1764431391000, t2 = t1 + 60000;
	assert_true(kube_condition_set(o, "Ready", "False", "Starting", "", 1, t1));
	assert_string_equal(jx_str_or(kube_condition_find(o, "Ready"), "lastTransitionTime", ""),
	                    "2025-11-29T15:49:51Z");
	/* Same everything: no change reported, nothing touched. */
	assert_false(kube_condition_set(o, "Ready", "False", "Starting", "", 1, t2));
	/* Reason and generation change: in place, time kept. */
	assert_true(kube_condition_set(o, "Ready", "False", "Waiting", "imex", 2, t2));
	json_t *c = kube_condition_find(o, "Ready");
	assert_string_equal(jx_str_or(c, "lastTransitionTime", ""), "2025-11-29T15:49:51Z");
	assert_int_equal(json_integer_value(json_object_get(c, "observedGeneration")), 2);
	/* Status flips: the time moves. */
	assert_true(kube_condition_set(o, "Ready", "True", "Ready", "", 2, t2));
	assert_string_equal(jx_str_or(kube_condition_find(o, "Ready"), "lastTransitionTime", ""),
	                    "2025-11-29T15:50:51Z");
	assert_true(kube_condition_is_true(o, "Ready"));
	assert_true(kube_condition_set(o, "Degraded", "False", "AsExpected", "", 2, t2));
	assert_int_equal(json_array_size(jx_path(o, "status.conditions")), 2);
	assert_true(kube_condition_remove(o, "Degraded"));
	assert_false(kube_condition_remove(o, "Degraded"));
	assert_false(kube_condition_is_true(o, "Degraded"));
	json_decref(o);
}

static void test_kube_path_build_escapes(void **state)
{
	(void)state;
	struct buf b;
	buf_init(&b, 256);
	assert_int_equal(kube_path_build(&b, &KUBE_RES_PODS, "ns 1", "a/b", "eviction"), NV_OK);
	assert_string_equal(buf_str(&b), "/api/v1/namespaces/ns%201/pods/a%2Fb/eviction");
	buf_reset(&b);
	assert_int_equal(kube_path_build(&b, &KUBE_RES_LEASES, "kube-system", NULL, NULL), NV_OK);
	assert_string_equal(buf_str(&b),
	                    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");
	buf_reset(&b);
	assert_int_equal(kube_path_build(&b, &KUBE_RES_NODES, "ignored", "n1", NULL), NV_OK);
	assert_string_equal(buf_str(&b), "/api/v1/nodes/n1");
	buf_clear(&b);
	buf_init(&b, 16);
	assert_int_equal(kube_path_build(&b, &KUBE_RES_PODS, "default", "long-name-here", NULL),
	                 NV_E_TOO_LARGE);
	buf_clear(&b);
	buf_init(&b, 256);
	assert_int_equal(kube_query_add(&b, "labelSelector", "app in (a,b),tier!=x"), NV_OK);
	assert_int_equal(kube_query_add(&b, "limit", "5"), NV_OK);
	assert_string_equal(buf_str(&b),
	                    "labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dx&limit=5");
	buf_clear(&b);
}

static void test_kube_http_err_maps_reasons(void **state)
{
	(void)state;
	assert_int_equal(kube_http_err(409, "AlreadyExists"), NV_E_EXISTS);
	assert_int_equal(kube_http_err(409, "Conflict"), NV_E_CONFLICT);
	assert_int_equal(kube_http_err(410, ""), NV_E_GONE);
	assert_int_equal(kube_http_err(500, "Expired"), NV_E_GONE);
	assert_int_equal(kube_http_err(429, ""), NV_E_THROTTLED);
	assert_int_equal(kube_http_err(422, "Invalid"), NV_E_INVALID_OBJECT);
	assert_int_equal(kube_http_err(503, ""), NV_E_SERVER);
	assert_int_equal(kube_http_err(504, ""), NV_E_TIMEOUT);
	assert_int_equal(kube_http_err(201, ""), NV_OK);
	assert_int_equal(kube_http_err(302, ""), NV_E_HTTP);
}

static void test_kube_status_from_body_non_status(void **state)
{
	(void)state;
	struct kube_status st = {0};
	st.retry_after_s = -1;
	kube_status_from_body(&st, 502, "<html>bad gateway</html>", 24);
	assert_int_equal(st.http_code, 502);
	assert_non_null(strstr(st.message, "HTTP 502: <html>"));
	char micro[40];
	kube_format_micro(1764431391123456, micro);
	assert_string_equal(micro, "2025-11-29T15:49:51.123456Z");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_condition_set_transition_rules),
	        cmocka_unit_test(test_kube_path_build_escapes),
	        cmocka_unit_test(test_kube_http_err_maps_reasons),
	        cmocka_unit_test(test_kube_status_from_body_non_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
