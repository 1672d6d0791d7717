// SPDX-License-Identifier: Apache-2.0
// Unit tests for RackPartition and ComputeDomain parsing and for the rules
// between a compute domain and the rack and partition it selects.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_domain.h"

#define PART_A "tests/data/api/rackpartition-gb300-r07-a.json"
#define DOMAIN "tests/data/api/computedomain-llm-pretrain.json"

#define PART_REJECTS(obj, path, msg)                                                               \
	TEST_REJECTS(api_rack_partition_parse, struct api_rack_partition, obj, path, msg)
#define CD_REJECTS(obj, path, msg)                                                                 \
	TEST_REJECTS(api_compute_domain_parse, struct api_compute_domain, obj, path, msg)

static void test_api_rack_partition_parse_sample(void **state)
{
	(void)state;
	json_t *j = test_load(PART_A);
	struct api_errors e;
	struct api_rack_partition *p = NULL;
	api_errors_init(&e);
	assert_int_equal(api_rack_partition_parse(j, &p, &e), NV_OK);
	assert_string_equal(p->rack, "gb300-r07");
	assert_int_equal(p->trays, 0x3fe); // trays 1..9
	assert_true(p->canary_eligible);
	assert_string_equal(p->tenant, "team-a");
	api_rack_partition_free(p);
	json_decref(j);
}

static void test_api_rack_partition_parse_errors(void **state)
{
	(void)state;
	json_t *j = test_load(PART_A);
	test_set(j, "spec.trays[3]", json_integer(2));
	PART_REJECTS(j, "spec.trays[3]", "duplicate value 2");
	test_set(j, "spec.trays[3]", json_integer(0));
	PART_REJECTS(j, "spec.trays[3]", "must be between 1 and 18");
	test_set(j, "spec.trays", json_array());
	PART_REJECTS(j, "spec.trays", "must have at least 1 items");
	test_set(j, "spec.tenant", json_string("-x"));
	PART_REJECTS(j, "spec.tenant", "must be a tenant name");
	test_set(j, "metadata.name", json_string("a.b"));
	PART_REJECTS(j, "metadata.name", "must be a DNS label");
	json_decref(j);
}

static void test_api_compute_domain_parse_sample(void **state)
{
	(void)state;
	json_t *j = test_load(DOMAIN);
	struct api_errors e;
	struct api_compute_domain *d = NULL;
	api_errors_init(&e);
	assert_int_equal(api_compute_domain_parse(j, &d, &e), NV_OK);
	assert_string_equal(d->meta.ns, "team-a");
	assert_int_equal(d->num_nodes, 8);
	assert_string_equal(d->partition, "gb300-r07-a");
	assert_int_equal(d->alloc_mode, API_ALLOC_SINGLE);
	assert_string_equal(d->claim_template, "llm-pretrain-channel"); /* the default */
	api_compute_domain_free(d);
	json_decref(j);
}

static void test_api_compute_domain_parse_claim_template(void **state)
{
	(void)state;
	json_t *j = test_load(DOMAIN);
	struct api_errors e;
	struct api_compute_domain *d = NULL;
	api_errors_init(&e);
	test_set(j, "spec.channel.resourceClaimTemplate", json_pack("{s:s}", "name", "imex.train"));
	assert_int_equal(api_compute_domain_parse(j, &d, &e), NV_OK);
	assert_string_equal(d->claim_template, "imex.train");
	api_compute_domain_free(d);
	test_set(j, "spec.channel.resourceClaimTemplate.name", json_string("Imex_Train"));
	CD_REJECTS(j, "spec.channel.resourceClaimTemplate.name", "must be a DNS subdomain");
	test_set(j, "spec.channel.resourceClaimTemplate.name", json_string(""));
	CD_REJECTS(j, "spec.channel.resourceClaimTemplate.name", "must not be empty");
	test_set(j, "spec.channel.resourceClaimTemplate.name", NULL);
	CD_REJECTS(j, "spec.channel.resourceClaimTemplate.name", "is required");
	test_set(j, "spec.channel.resourceClaimTemplate", json_string("x"));
	CD_REJECTS(j, "spec.channel.resourceClaimTemplate", "must be an object");
	json_decref(j);
}

static void test_api_compute_domain_parse_errors(void **state)
{
	(void)state;
	json_t *j = test_load(DOMAIN);
	test_set(j, "spec.numNodes", json_integer(19));
	CD_REJECTS(j, "spec.numNodes", "must be between 1 and 18");
	test_set(j, "spec.numNodes", NULL);
	CD_REJECTS(j, "spec.numNodes", "is required");
	test_set(j, "spec.numNodes", json_integer(4));
	test_set(j, "spec.channel.allocationMode", json_string("Many"));
	CD_REJECTS(j, "spec.channel.allocationMode", "must be one of: Single, All");
	test_set(j, "spec.channel.allocationMode", json_string("All"));
	test_set(j, "metadata.namespace", NULL);
	CD_REJECTS(j, "metadata.namespace", "is required");
	json_decref(j);
}

static void test_api_compute_domain_parse_replace_failed_nodes(void **state)
{
	(void)state;
	json_t *j = test_load(DOMAIN);
	struct api_errors e;
	struct api_compute_domain *d = NULL;
	api_errors_init(&e);
	test_set(j, "spec.replaceFailedNodes", NULL);
	assert_int_equal(api_compute_domain_parse(j, &d, &e), NV_OK);
	assert_false(d->replace_failed_nodes); /* the CRD's default */
	api_compute_domain_free(d);
	d = NULL;
	test_set(j, "spec.replaceFailedNodes", json_true());
	assert_int_equal(api_compute_domain_parse(j, &d, &e), NV_OK);
	assert_true(d->replace_failed_nodes);
	api_compute_domain_free(d);
	test_set(j, "spec.replaceFailedNodes", json_string("yes"));
	CD_REJECTS(j, "spec.replaceFailedNodes", "must be a boolean");
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_api_rack_partition_parse_sample),
	        cmocka_unit_test(test_api_rack_partition_parse_errors),
	        cmocka_unit_test(test_api_compute_domain_parse_sample),
	        cmocka_unit_test(test_api_compute_domain_parse_errors),
	        cmocka_unit_test(test_api_compute_domain_parse_claim_template),
	        cmocka_unit_test(test_api_compute_domain_parse_replace_failed_nodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
