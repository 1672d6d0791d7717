// SPDX-License-Identifier: Apache-2.0
// Unit tests for the host-output parsers: driver proc and sys files, module
// parameters, /proc/devices and nvidia-imex-ctl's -q and -N -j answers,
// with the documented samples and the hostile cases around them.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/host.h"
#include "nvl72/base.h"

static char *data_file(const char *name, size_t *len)
{
	char path[256];
	FILE *f;
	char *s = xcalloc(1, 65536);

	snprintf(path, sizeof(path), "tests/data/agent/%s", name);
	f = fopen(path, "rb");
	assert_non_null(f);
	*len = fread(s, 1, 65535, f);
	fclose(f);
	return s;
}

static void test_agent_proc_version_parse_open(void **state)
{
	struct host_driver_info d = {0};
	size_t len;
	char *s = data_file("proc-version-open.txt", &len);

	(void)state;
	assert_int_equal(host_proc_version_parse(s, len, &d), NV_OK);
	assert_true(d.loaded);
	assert_string_equal(d.version, "580.95.05");
	assert_true(d.open_module);
	assert_string_equal(d.arch, "aarch64");
	free(s);
}

static void test_agent_proc_version_parse_proprietary(void **state)
{
	static const char t[] = "GCC version:  gcc version 12.2.0 580.1.2\n"
	                        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  "
	                        "Sat Aug 19 01:15:15 UTC 2023\n";
	struct host_driver_info d = {0};

	(void)state;
	assert_int_equal(host_proc_version_parse(t, sizeof(t) - 1, &d), NV_OK);
	assert_string_equal(d.version, "535.104.05");
	assert_false(d.open_module);
	assert_string_equal(d.arch, "x86_64");
}

/* The driver lines of the simulator's platform profiles: three-part R580
 * versions (GB200, GB300) and the two-part 615.23 of the Vera Rubin
 * captures (NVIDIA/k8s-test-infra qx-vrnvl72.xml). */
static void test_agent_proc_version_parse_two_and_three_parts(void **state)
{
	static const char *const v[] = {"580.173.02", "580.95.05", "615.23"};
	char text[256], sys[64];

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct host_driver_info d = {0};
		snprintf(text, sizeof(text),
		         "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  %s  Release "
		         "Build  "
		         "(sim@nvl72)  Thu Oct  2 11:04:17 UTC 2025\nGCC version:  gcc version "
		         "13.3.0\n",
		         v[i]);
		assert_int_equal(host_proc_version_parse(text, strlen(text), &d), NV_OK);
		assert_string_equal(d.version, v[i]);
		assert_true(d.open_module);
		snprintf(text, sizeof(text), "%s\n", v[i]);
		assert_int_equal(host_sys_version_parse(text, strlen(text), sys, sizeof(sys)),
		                 NV_OK);
		assert_string_equal(sys, v[i]);
	}
}

static void test_agent_proc_version_parse_rejects(void **state)
{
	static const char *const bad[] = {
	        "",
	        "GCC version:  gcc version 13.3.0\n",
	        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64\n",
	        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580..95  Release\n",
	        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  x580.95  Release\n",
	        "NVRM version: something  580.95.05  else\n",
	};
	struct host_driver_info d = {0};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		assert_int_equal(host_proc_version_parse(bad[i], strlen(bad[i]), &d), NV_E_PARSE);
	/* Truncated in the middle of the version: still digits, still a version. */
	static const char cut[] = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.9";
	assert_int_equal(host_proc_version_parse(cut, sizeof(cut) - 1, &d), NV_OK);
	assert_string_equal(d.version, "580.9");
}

static void test_agent_sys_version_parse_cases(void **state)
{
	char v[HOST_VERSION_LEN];

	(void)state;
	assert_int_equal(host_sys_version_parse("580.95.05\n", 10, v, sizeof(v)), NV_OK);
	assert_string_equal(v, "580.95.05");
	assert_int_equal(host_sys_version_parse("", 0, v, sizeof(v)), NV_E_PARSE);
	assert_int_equal(host_sys_version_parse("580.95.05 extra\n", 16, v, sizeof(v)), NV_E_PARSE);
	assert_int_equal(host_sys_version_parse("580\0.95", 7, v, sizeof(v)), NV_E_PARSE);
}

static void test_agent_params_parse_sample(void **state)
{
	static const char t[] =
	        "ModifyDeviceFiles: 1\nDeviceFileMode: 438\n"
	        "ImexChannelCount: 2048\nCreateImexChannel0: 0\n\nRegistryDwords: \"\"\n";
	struct host_driver_params *p = xcalloc(1, sizeof(*p));

	(void)state;
	assert_int_equal(host_params_parse(t, sizeof(t) - 1, p), NV_OK);
	assert_int_equal(p->n, 5);
	assert_string_equal(host_params_get(p, "ImexChannelCount"), "2048");
	assert_string_equal(host_params_get(p, "RegistryDwords"), "\"\"");
	assert_null(host_params_get(p, "Nope"));
	assert_int_equal(host_params_parse("no colon here\n", 14, p), NV_E_PARSE);
	assert_int_equal(host_params_parse("bad name: 1\n", 12, p), NV_E_PARSE);
	free(p);
}

static void test_agent_params_parse_bounds(void **state)
{
	struct host_driver_params *p = xcalloc(1, sizeof(*p));
	struct buf b;

	(void)state;
	buf_init(&b, 1 << 20);
	for (int i = 0; i < HOST_PARAMS_MAX + 1; i++)
		assert_int_equal(buf_printf(&b, "P%d: %d\n", i, i), NV_OK);
	assert_int_equal(host_params_parse(b.data, b.len, p), NV_E_TOO_LARGE);
	buf_reset(&b);
	assert_int_equal(buf_printf(&b, "Long: %0300d\n", 1), NV_OK);
	assert_int_equal(host_params_parse(b.data, b.len, p), NV_E_TOO_LARGE);
	buf_clear(&b);
	free(p);
}

static void test_agent_version_cmp_components(void **state)
{
	int c;

	(void)state;
	assert_int_equal(host_version_cmp("580.142", "580.173.02", &c), NV_OK);
	assert_int_equal(c, -1);
	assert_int_equal(host_version_cmp("615.23", "580.173.02", &c), NV_OK);
	assert_int_equal(c, 1);
	assert_int_equal(host_version_cmp("580.95.05", "580.95.5", &c), NV_OK);
	assert_int_equal(c, 0);
	assert_int_equal(host_version_cmp("580.95", "580.95.0", &c), NV_OK);
	assert_int_equal(c, 0);
	assert_int_equal(host_version_cmp("580.x", "580", &c), NV_E_PARSE);
	assert_int_equal(host_version_cmp("", "580", &c), NV_E_PARSE);
	/* Found by fuzzing: a component too long for an int is not a version. */
	assert_int_equal(host_version_cmp("5111111111.1", "580", &c), NV_E_PARSE);
	assert_int_equal(host_version_cmp("511111111.1", "580", &c), NV_OK);
}

static void test_agent_proc_devices_major_full_name(void **state)
{
	static const char t[] = "Character devices:\n  1 mem\n195 nvidia\n235 nvidia-caps\n"
	                        "236 nvidia-caps-imex-channels\n237 nvidia-uvm\n\nBlock devices:\n"
	                        "240 nvidia-caps-imex-channels-x\n  7 loop\n";
	unsigned m = 0;

	(void)state;
	assert_int_equal(host_proc_devices_major(t, sizeof(t) - 1, "nvidia-caps", &m), NV_OK);
	assert_int_equal(m, 235);
	assert_int_equal(host_proc_devices_major(t, sizeof(t) - 1, "nvidia-caps-imex-channels", &m),
	                 NV_OK);
	assert_int_equal(m, 236);
	assert_int_equal(host_proc_devices_major(t, sizeof(t) - 1, "loop", &m), NV_E_NOT_FOUND);
	assert_int_equal(host_proc_devices_major("236 nvidia-caps-imex-channels\n", 30,
	                                         "nvidia-caps-imex-channels", &m),
	                 NV_E_NOT_FOUND);
	assert_int_equal(host_proc_devices_major("Character devices:\n99999 nvidia-caps\n", 37,
	                                         "nvidia-caps", &m),
	                 NV_E_PARSE);
}

static void test_agent_imex_q_parse_words(void **state)
{
	enum host_imex_daemon s;

	(void)state;
	assert_int_equal(host_imex_q_parse("READY\n", 6, &s), NV_OK);
	assert_int_equal(s, HOST_IMEXD_READY);
	assert_int_equal(host_imex_q_parse("WAITING_FOR_RECOVERY", 20, &s), NV_OK);
	assert_int_equal(s, HOST_IMEXD_WAITING_FOR_RECOVERY);
	assert_int_equal(host_imex_q_parse("READY\nREADY\n", 12, &s), NV_E_PARSE);
	assert_int_equal(host_imex_q_parse("", 0, &s), NV_E_PARSE);
	assert_int_equal(host_imex_q_parse("NOT_RUNNING\n", 12, &s), NV_E_PARSE);
	assert_int_equal(host_imex_q_parse("Connection refused\n", 19, &s), NV_E_PARSE);
}

static void test_agent_imex_nodes_parse_degraded(void **state)
{
	struct host_imex_domain_status *d = xcalloc(1, sizeof(*d));
	unsigned ready, conn;
	char why[128] = "";
	size_t len;
	char *s = data_file("imex-nodes-degraded.json", &len);

	(void)state;
	assert_int_equal(host_imex_nodes_parse(s, len, d, why, sizeof(why)), NV_OK);
	assert_int_equal(d->domain, HOST_IMEX_DOMAIN_DEGRADED);
	assert_int_equal(d->n_nodes, 3);
	assert_string_equal(d->nodes[2].host, "10.42.8.13");
	assert_int_equal(d->nodes[2].status, HOST_IMEXD_UNAVAILABLE);
	assert_int_equal(d->nodes[0].conn[2], HOST_IMEX_CONN_RECOVERING);
	host_imex_domain_count(d, "10.42.8.11", &ready, &conn);
	assert_int_equal(ready, 1);
	assert_int_equal(conn, 1);
	free(s);
	free(d);
}

static void test_agent_imex_nodes_parse_hostile(void **state)
{
	static const char *const bad[] = {
	        "",
	        "[]",
	        "{\"status\":\"UP\"}",
	        "{\"status\":1,\"nodes\":{}}",
	        "{\"status\":\"UP\",\"nodes\":{\"64\":{\"status\":\"READY\",\"host\":\"a\"}}}",
	        "{\"status\":\"UP\",\"nodes\":{\"-1\":{\"status\":\"READY\",\"host\":\"a\"}}}",
	        "{\"status\":\"UP\",\"nodes\":{\"0\":{\"status\":\"READY\"}}}",
	        ("{\"status\":\"UP\",\"nodes\":{\"0\":{\"status\":\"READY\",\"host\":\"a\","
	         "\"connections\":{\"99\":{\"status\":\"CONNECTED\"}}}}}"),
	        "{\"status\":\"UP\",\"nodes\":{\"0\":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}}",
	        "{\"status\":\"UP\",\"nodes\":{\"0\":{\"status\":\"READY\",\"host\":\"a\"}}",
	};
	struct host_imex_domain_status *d = xcalloc(1, sizeof(*d));
	char why[128];

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		why[0] = '\0';
		assert_int_not_equal(
		        host_imex_nodes_parse(bad[i], strlen(bad[i]), d, why, sizeof(why)), NV_OK);
		assert_true(why[0] != '\0');
	}
	/* Unknown words are kept as UNKNOWN, not rejected. */
	static const char odd[] = "{\"status\":\"WEIRD\",\"nodes\":{\"0\":{\"status\":\"NEW\","
	                          "\"host\":\"a\"}}}";
	assert_int_equal(host_imex_nodes_parse(odd, sizeof(odd) - 1, d, why, sizeof(why)), NV_OK);
	assert_int_equal(d->domain, HOST_IMEX_DOMAIN_UNKNOWN);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_proc_version_parse_open),
	        cmocka_unit_test(test_agent_proc_version_parse_proprietary),
	        cmocka_unit_test(test_agent_proc_version_parse_two_and_three_parts),
	        cmocka_unit_test(test_agent_proc_version_parse_rejects),
	        cmocka_unit_test(test_agent_sys_version_parse_cases),
	        cmocka_unit_test(test_agent_params_parse_sample),
	        cmocka_unit_test(test_agent_params_parse_bounds),
	        cmocka_unit_test(test_agent_version_cmp_components),
	        cmocka_unit_test(test_agent_proc_devices_major_full_name),
	        cmocka_unit_test(test_agent_imex_q_parse_words),
	        cmocka_unit_test(test_agent_imex_nodes_parse_degraded),
	        cmocka_unit_test(test_agent_imex_nodes_parse_hostile),
	};
	return cmocka_run_group_tests_name("agent/host_parse", tests, NULL, NULL);
}
