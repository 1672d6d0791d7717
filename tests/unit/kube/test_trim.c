// SPDX-License-Identifier: Apache-2.0
// Unit tests for what the informers' caches keep of a Node and a Lease:
// the fields the operator reads stay, everything else goes, and odd shapes
// (no labels, a condition list without Ready, members of the wrong type)
// neither crash nor keep what they should not.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"

static json_t *load(const char *text)
{
	json_t *v = json_loads(text, 0, NULL);
	assert_non_null(v);
	return v;
}

static const char *const OWN[] = {"nvl72.io/", NULL};

static void test_kube_transform_node_keeps_what_is_read(void **state)
{
	struct kube_selector *sel = NULL;
	char err[100];
	(void)state;
	assert_int_equal(
	        kube_selector_parse("!example.com/no,tier in (gpu)", &sel, err, sizeof(err)),
	        NV_OK);
	struct kube_node_keep keep = {OWN, OWN, sel};
	json_t *n =
	        load("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
	             "\"uid\":\"u\",\"resourceVersion\":\"7\",\"generation\":2,"
	             "\"creationTimestamp\":\"2026-12-01T00:00:00Z\",\"managedFields\":[{}],"
	             "\"ownerReferences\":[],\"labels\":{\"nvl72.io/rack\":\"r\",\"tier\":\"gpu\","
	             "\"example.com/no\":\"x\",\"zone\":\"a\"},\"annotations\":{\"other\":\"1\"}},"
	             "\"spec\":{\"unschedulable\":true,\"taints\":[],\"providerID\":\"p\"},"
	             "\"status\":{\"images\":[],\"capacity\":{},\"addresses\":[],"
	             "\"conditions\":[{\"type\":\"DiskPressure\"},{\"type\":\"Ready\","
	             "\"status\":\"True\",\"lastHeartbeatTime\":\"t\",\"reason\":\"R\"}]}}");
	kube_transform_node(n, &keep);
	json_t *want =
	        load("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
	             "\"uid\":\"u\",\"resourceVersion\":\"7\","
	             "\"creationTimestamp\":\"2026-12-01T00:00:00Z\",\"labels\":{"
	             "\"nvl72.io/rack\":\"r\",\"tier\":\"gpu\",\"example.com/no\":\"x\"}},"
	             "\"spec\":{\"unschedulable\":true,\"taints\":[]},\"status\":{"
	             "\"addresses\":[],\"conditions\":[{\"type\":\"Ready\",\"status\":"
	             "\"True\",\"reason\":\"R\"}]}}");
	char *got = json_dumps(n, JSON_SORT_KEYS);
	assert_true(json_equal(n, want) || (printf("got %s\n", got), false));
	free(got);
	json_decref(want);
	json_decref(n);
	kube_selector_free(sel);
}

static void test_kube_transform_node_odd_shapes(void **state)
{
	(void)state;
	/* No keep at all: no labels or annotations survive. */
	json_t *n = load("{\"metadata\":{\"name\":\"n\",\"labels\":{\"nvl72.io/a\":\"b\"},"
	                 "\"annotations\":7},\"spec\":[],\"status\":{\"conditions\":"
	                 "[{\"type\":\"MemoryPressure\"},3]}}");
	kube_transform_node(n, NULL);
	assert_null(jx_path(n, "metadata.labels"));
	assert_true(json_is_integer(jx_path(n, "metadata.annotations")));
	assert_true(json_is_array(jx_path(n, "spec")));
	assert_int_equal(json_array_size(jx_path(n, "status.conditions")), 0);
	json_decref(n);
	/* Not an object at all. */
	n = json_array();
	kube_transform_node(n, NULL);
	kube_transform_lease(n, NULL);
	json_decref(n);
}

static void test_kube_transform_lease(void **state)
{
	(void)state;
	json_t *l =
	        load("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
	             "\"metadata\":{\"name\":\"t\",\"namespace\":\"ns\",\"resourceVersion\":\"3\","
	             "\"labels\":{\"a\":\"b\"},\"managedFields\":[]},\"spec\":{"
	             "\"holderIdentity\":\"h\",\"renewTime\":\"r\",\"leaseDurationSeconds\":40,"
	             "\"acquireTime\":\"a\",\"leaseTransitions\":2}}");
	json_t *want = load("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
	                    "\"metadata\":{\"name\":\"t\",\"namespace\":\"ns\",\"resourceVersion\":"
	                    "\"3\"},\"spec\":{\"holderIdentity\":\"h\",\"renewTime\":\"r\","
	                    "\"leaseDurationSeconds\":40}}");
	kube_transform_lease(l, NULL);
	assert_true(json_equal(l, want));
	json_decref(want);
	json_decref(l);
}

static void test_kube_selector_names(void **state)
{
	struct kube_selector *s = NULL;
	char err[100];
	(void)state;
	assert_int_equal(kube_selector_parse("a=1,!b,c notin (x)", &s, err, sizeof(err)), NV_OK);
	assert_true(kube_selector_names(s, "a"));
	assert_true(kube_selector_names(s, "b"));
	assert_true(kube_selector_names(s, "c"));
	assert_false(kube_selector_names(s, "d"));
	assert_false(kube_selector_names(NULL, "a"));
	kube_selector_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_transform_node_keeps_what_is_read),
	        cmocka_unit_test(test_kube_transform_node_odd_shapes),
	        cmocka_unit_test(test_kube_transform_lease),
	        cmocka_unit_test(test_kube_selector_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
