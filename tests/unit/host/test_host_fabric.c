// SPDX-License-Identifier: Apache-2.0
// Unit tests for the fabric logic: the health mask fields and the tray's
// clique rule (all GPUs COMPLETED+Success and agreeing, or no clique at all).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/host.h"
#include "nvl72/base.h"

#define UUID "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3"

static void tray_fill(struct host_gpu g[4])
{
	memset(g, 0, 4 * sizeof(*g));
	for (unsigned i = 0; i < 4; i++) {
		g[i].index = i;
		g[i].fabric_state = HOST_FABRIC_COMPLETED;
		g[i].has_cluster = true;
		memcpy(g[i].cluster_uuid, UUID, sizeof(UUID));
		g[i].clique_id = 32766;
	}
}

static void test_agent_health_decode_clear_mask(void **state)
{
	struct host_fabric_health h;
	char d[128];

	(void)state;
	host_health_decode(HOST_HEALTH_MASK_CLEAR, &h);
	assert_int_equal(h.degraded_bw, 2);
	assert_int_equal(h.route_recovery, 2);
	assert_int_equal(h.route_unhealthy, 2);
	assert_int_equal(h.access_timeout, 2);
	assert_int_equal(h.incorrect_config, 1);
	assert_int_equal(h.partition, 0);
	assert_false(host_health_has_fault(&h));
	host_health_describe(&h, d, sizeof(d));
	assert_string_equal(d, "");
}

static void test_agent_health_decode_faults(void **state)
{
	struct host_fabric_health h;
	char d[128];

	(void)state;
	/* Degraded bandwidth, no partition, partition not assigned. */
	host_health_decode(0x1A9u & ~0xF00u, &h);
	host_health_decode((0x1A9u & ~0xF00u) | (4u << 8) | (2u << 12), &h);
	assert_int_equal(h.degraded_bw, 1);
	assert_int_equal(h.incorrect_config, 4);
	assert_int_equal(h.partition, 2);
	assert_true(host_health_has_fault(&h));
	host_health_describe(&h, d, sizeof(d));
	assert_string_equal(d, "degradedBandwidth,noPartition,partitionNotAssigned");
	host_health_describe(&h, d, 8);
	assert_int_equal(strlen(d) < 8, 1);
	host_health_decode(0, &h);
	assert_false(host_health_has_fault(&h));
}

/* What a driver without healthSummary (NVML API 12: R570, R575) leaves us:
 * the mask, whose fields 8..15 API 12 does not define (all clear is 0xAA). */
static void test_host_health_from_mask(void **state)
{
	struct host_fabric_health h;

	(void)state;
	host_health_decode(0xAAu, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_HEALTHY);
	host_health_decode(HOST_HEALTH_MASK_CLEAR, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_HEALTHY);
	/* Nothing supported: nothing decided. */
	host_health_decode(0, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_NOT_SUPPORTED);
	/* Degraded bandwidth alone still carries traffic. */
	host_health_decode(0xA9u, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_LIMITED_CAPACITY);
	/* Route unhealthy (bits 4..5 = 1), also next to degraded bandwidth. */
	host_health_decode(0x9Au, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_UNHEALTHY);
	host_health_decode(0x99u, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_UNHEALTHY);
	/* Route recovery, access-timeout recovery in progress. */
	host_health_decode(0xA6u, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_UNHEALTHY);
	host_health_decode(0x6Au, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_UNHEALTHY);
	/* API 13 fields: no partition; partition not assigned. */
	host_health_decode(0x4AAu, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_UNHEALTHY);
	host_health_decode(0x21AAu, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_UNHEALTHY);
	host_health_decode(0x11AAu, &h);
	assert_int_equal(host_health_from_mask(&h), HOST_HEALTH_HEALTHY);
}

static void test_host_tray_health_source(void **state)
{
	struct host_gpu g[4];

	(void)state;
	tray_fill(g);
	assert_int_equal(host_tray_health_source(g, 4), HOST_HEALTH_SRC_NONE);
	assert_string_equal(host_health_source_name(HOST_HEALTH_SRC_NONE), "");
	for (unsigned i = 0; i < 4; i++) {
		g[i].has_health = true;
		g[i].health_source = HOST_HEALTH_SRC_SUMMARY;
	}
	assert_int_equal(host_tray_health_source(g, 4), HOST_HEALTH_SRC_SUMMARY);
	assert_string_equal(host_health_source_name(HOST_HEALTH_SRC_SUMMARY), "summary");
	g[3].health_source = HOST_HEALTH_SRC_MASK;
	assert_int_equal(host_tray_health_source(g, 4), HOST_HEALTH_SRC_MASK);
	assert_string_equal(host_health_source_name(HOST_HEALTH_SRC_MASK), "mask");
	/* A GPU without a v2+ answer does not count. */
	g[3].has_health = false;
	assert_int_equal(host_tray_health_source(g, 4), HOST_HEALTH_SRC_SUMMARY);
}

static void test_agent_tray_clique_agree(void **state)
{
	struct host_gpu g[4];
	char c[HOST_CLIQUE_LEN], why[128] = "";
	bool has = false;

	(void)state;
	tray_fill(g);
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_OK);
	assert_true(has);
	assert_string_equal(c, UUID ".32766");
	assert_int_equal(host_tray_fabric_state(g, 4), HOST_FABRIC_COMPLETED);
}

static void test_agent_tray_clique_one_disagrees(void **state)
{
	struct host_gpu g[4];
	char c[HOST_CLIQUE_LEN], why[128] = "";
	bool has = false;

	(void)state;
	tray_fill(g);
	g[3].clique_id = 5;
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_E_CONFLICT);
	assert_non_null(strstr(why, "GPU 3"));
}

static void test_agent_tray_clique_in_progress(void **state)
{
	struct host_gpu g[4];
	char c[HOST_CLIQUE_LEN], why[128] = "";
	bool has = false;

	(void)state;
	tray_fill(g);
	g[1].fabric_state = HOST_FABRIC_IN_PROGRESS;
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_E_STATE);
	assert_non_null(strstr(why, "InProgress"));
	assert_int_equal(host_tray_fabric_state(g, 4), HOST_FABRIC_IN_PROGRESS);
	tray_fill(g);
	g[0].fabric_status = 17;
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_E_STATE);
	tray_fill(g);
	g[2].fabric_state = HOST_FABRIC_UNKNOWN;
	assert_int_equal(host_tray_fabric_state(g, 4), HOST_FABRIC_UNKNOWN);
}

static void test_agent_tray_clique_none(void **state)
{
	struct host_gpu g[4];
	char c[HOST_CLIQUE_LEN], why[128] = "";
	bool has = true;

	(void)state;
	tray_fill(g);
	for (int i = 0; i < 4; i++)
		g[i].has_cluster = false;
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_OK);
	assert_false(has);
	for (int i = 0; i < 4; i++)
		g[i].fabric_state = HOST_FABRIC_NOT_SUPPORTED;
	has = true;
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_OK);
	assert_false(has);
	assert_int_equal(host_tray_fabric_state(g, 4), HOST_FABRIC_NOT_SUPPORTED);
	/* Some GPUs on the fabric and some not: an error, not "no clique". */
	tray_fill(g);
	g[2].fabric_state = HOST_FABRIC_NOT_SUPPORTED;
	assert_int_equal(host_tray_clique(g, 4, &has, c, why, sizeof(why)), NV_E_CONFLICT);
	assert_int_equal(host_tray_clique(g, 0, &has, c, why, sizeof(why)), NV_E_STATE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_health_decode_clear_mask),
	        cmocka_unit_test(test_agent_health_decode_faults),
	        cmocka_unit_test(test_host_health_from_mask),
	        cmocka_unit_test(test_host_tray_health_source),
	        cmocka_unit_test(test_agent_tray_clique_agree),
	        cmocka_unit_test(test_agent_tray_clique_one_disagrees),
	        cmocka_unit_test(test_agent_tray_clique_in_progress),
	        cmocka_unit_test(test_agent_tray_clique_none),
	};
	return cmocka_run_group_tests_name("agent/host_fabric", tests, NULL, NULL);
}
