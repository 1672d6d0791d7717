// SPDX-License-Identifier: Apache-2.0
// Unit tests for label selectors: each operator of the apiserver's text
// form, the meaning of a missing label, the requirement reported as unmet,
// and the errors a malformed selector gets.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/kube_ctrl.h"

static bool matches(const char *sel, const char *labels_json, char *unmet, size_t cap)
{
	struct kube_selector *s = NULL;
	char err[200];
	json_t *labels = labels_json ? json_loads(labels_json, 0, NULL) : NULL;
	bool ok;

	assert_int_equal(kube_selector_parse(sel, &s, err, sizeof(err)), NV_OK);
	ok = kube_selector_match(s, labels, unmet, cap);
	json_decref(labels);
	kube_selector_free(s);
	return ok;
}

static void test_kube_selector_operators(void **state)
{
	const char *node = "{\"nvl72.io/rack\":\"r01\",\"tier\":\"gpu\",\"empty\":\"\"}";
	char unmet[400];
	(void)state;

	assert_true(matches("", node, unmet, sizeof(unmet)));
	assert_true(matches("nvl72.io/rack", node, unmet, sizeof(unmet)));
	assert_true(matches("nvl72.io/rack=r01", node, unmet, sizeof(unmet)));
	assert_true(matches("nvl72.io/rack==r01", node, unmet, sizeof(unmet)));
	assert_true(matches("tier!=cpu", node, unmet, sizeof(unmet)));
	assert_true(matches("missing!=x", node, unmet, sizeof(unmet)));
	assert_true(matches("!missing", node, unmet, sizeof(unmet)));
	assert_true(matches("empty=", node, unmet, sizeof(unmet)));
	assert_true(matches("tier in (cpu, gpu)", node, unmet, sizeof(unmet)));
	assert_true(matches("tier notin (cpu,fpga)", node, unmet, sizeof(unmet)));
	assert_true(matches("missing notin (a)", node, unmet, sizeof(unmet)));
	assert_true(matches(" nvl72.io/rack , tier = gpu ,!missing ", node, unmet, sizeof(unmet)));

	assert_false(matches("nvl72.io/rack=r02", node, unmet, sizeof(unmet)));
	assert_string_equal(unmet, "nvl72.io/rack=r02");
	assert_false(matches("tier,nvl72.io/tray", node, unmet, sizeof(unmet)));
	assert_string_equal(unmet, "nvl72.io/tray");
	assert_false(matches("!tier", node, unmet, sizeof(unmet)));
	assert_string_equal(unmet, "!tier");
	assert_false(matches("tier in (cpu,fpga)", node, unmet, sizeof(unmet)));
	assert_string_equal(unmet, "tier in (cpu,fpga)");
	assert_false(matches("tier notin (gpu)", node, unmet, sizeof(unmet)));
	assert_string_equal(unmet, "tier notin (gpu)");
	assert_false(matches("missing in (a)", node, unmet, sizeof(unmet)));
	/* A Node without labels meets only negative requirements. */
	assert_false(matches("nvl72.io/rack", NULL, unmet, sizeof(unmet)));
	assert_true(matches("!nvl72.io/rack,a!=b", NULL, unmet, sizeof(unmet)));
	/* A label that is not a string is no value. */
	assert_false(matches("n=1", "{\"n\":1}", unmet, sizeof(unmet)));
}

static void test_kube_selector_errors(void **state)
{
	static const char *const bad[] = {
	        "=a",     "a=b,",  "a b",  "a in b", "a in (b", "a in (b c)",
	        "a >= 1", "a=b/c", "!a=b", ",",      "a,,b",    "a notin",
	};
	char err[200];
	struct kube_selector *s = (struct kube_selector *)&err;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(kube_selector_parse(bad[i], &s, err, sizeof(err)), NV_E_INVAL);
		assert_null(s);
		assert_non_null(strstr(err, "at offset "));
	}
	/* The message names the offending part. */
	assert_int_equal(kube_selector_parse("tier ~ gpu", &s, err, sizeof(err)), NV_E_INVAL);
	assert_non_null(strstr(err, "after key \"tier\""));
	/* Too long a value is refused, not cut. */
	char big[100];
	memset(big, 'v', sizeof(big));
	memcpy(big, "k=", 2);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(kube_selector_parse(big, &s, err, sizeof(err)), NV_E_INVAL);
	assert_non_null(strstr(err, "longer than 63"));
	assert_int_equal(kube_selector_parse("", &s, err, sizeof(err)), NV_OK);
	assert_true(kube_selector_empty(s));
	kube_selector_free(s);
	assert_true(kube_selector_empty(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kube_selector_operators),
	        cmocka_unit_test(test_kube_selector_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
