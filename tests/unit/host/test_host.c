// SPDX-License-Identifier: Apache-2.0
// Unit tests for the host object: paths under the host root and as the
// tools see them, bounded reads, atomic writes, and the driver readers
// against a temp host root.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_fixture.h"

static void test_host_path_joins(void **state)
{
	struct host h;
	struct host_cfg cfg = {.host_root = "/host/"};
	char out[64];

	(void)state;
	host_init(&h, &cfg, NULL);
	assert_int_equal(host_path(&h, "/proc/devices", out, sizeof(out)), NV_OK);
	assert_string_equal(out, "/host/proc/devices");
	assert_int_equal(host_path(&h, "/proc/devices", out, 8), NV_E_TOO_LARGE);
	host_clear(&h);
	host_init(&h, NULL, NULL);
	assert_int_equal(host_path(&h, "etc/x", out, sizeof(out)), NV_OK);
	assert_string_equal(out, "/etc/x");
	assert_string_equal(h.cfg.imex_dir, "/etc/nvidia-imex");
	host_clear(&h);
}

/* The agent opens a host file under its root; a tool in the host's mount
 * namespace is handed the host's own path, one in ours the joined path. */
static void test_host_tool_path_by_namespace(void **state)
{
	struct host h;
	struct host_cfg cfg = {.host_root = "/host/"};
	char out[64];

	(void)state;
	host_init(&h, &cfg, NULL);
	assert_int_equal(h.cfg.tool_ns, HOST_TOOL_NS_HOST);
	assert_int_equal(host_tool_path(&h, "/etc/nvidia-imex/config.cfg", out, sizeof(out)),
	                 NV_OK);
	assert_string_equal(out, "/etc/nvidia-imex/config.cfg");
	assert_int_equal(host_tool_path(&h, "etc/x", out, sizeof(out)), NV_OK);
	assert_string_equal(out, "/etc/x");
	assert_int_equal(host_tool_path(&h, "/etc/x", out, 6), NV_E_TOO_LARGE);
	assert_int_equal(host_path(&h, "/etc/x", out, sizeof(out)), NV_OK);
	assert_string_equal(out, "/host/etc/x");
	host_clear(&h);
	cfg.tool_ns = HOST_TOOL_NS_AGENT;
	host_init(&h, &cfg, NULL);
	assert_int_equal(host_tool_path(&h, "/etc/nvidia-imex/config.cfg", out, sizeof(out)),
	                 NV_OK);
	assert_string_equal(out, "/host/etc/nvidia-imex/config.cfg");
	host_clear(&h);
	/* On the tray itself (root "/") the two views are one. */
	host_init(&h, NULL, NULL);
	assert_int_equal(host_tool_path(&h, "/etc/x", out, sizeof(out)), NV_OK);
	assert_string_equal(out, "/etc/x");
	h.cfg.tool_ns = HOST_TOOL_NS_AGENT;
	assert_int_equal(host_tool_path(&h, "/etc/x", out, sizeof(out)), NV_OK);
	assert_string_equal(out, "/etc/x");
	host_clear(&h);
}

static void test_host_write_atomic_and_read(void **state)
{
	struct fx x;
	struct buf b;

	(void)state;
	fx_init(&x, NULL);
	assert_int_equal(host_write_atomic(&x.h, "/a/b/c.cfg", "one\n", 4, 0600), NV_OK);
	assert_int_equal(host_read(&x.h, "/a/b/c.cfg", 64, &b), NV_OK);
	assert_string_equal(buf_str(&b), "one\n");
	buf_clear(&b);
	assert_int_equal(host_write_atomic(&x.h, "/a/b/c.cfg", "two\n", 4, 0644), NV_OK);
	assert_int_equal(host_read(&x.h, "/a/b/c.cfg", 3, &b), NV_E_TOO_LARGE);
	assert_int_equal(host_read(&x.h, "/a/none", 64, &b), NV_E_NOT_FOUND);
	fx_clear(&x);
}

static void test_host_driver_read_not_loaded(void **state)
{
	struct host_driver_info d;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	assert_int_equal(host_driver_read(&x.h, &d), NV_OK);
	assert_false(d.loaded);
	fx_clear(&x);
}

static void test_host_driver_read_loaded(void **state)
{
	struct host_driver_params *p = xcalloc(1, sizeof(*p));
	struct host_driver_info d;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_file(&x, "proc/driver/nvidia/version",
	        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build"
	        "  (b@h)  Thu Oct  2 11:04:17 UTC 2025\n");
	fx_file(&x, "sys/module/nvidia/version", "580.95.05\n");
	fx_file(&x, "proc/driver/nvidia/params", "ImexChannelCount: 2048\n");
	assert_int_equal(host_driver_read(&x.h, &d), NV_OK);
	assert_true(d.loaded);
	assert_string_equal(d.version, "580.95.05");
	assert_string_equal(d.sys_version, "580.95.05");
	assert_string_equal(d.nvml_driver, "");
	assert_int_equal(host_params_read(&x.h, p), NV_OK);
	assert_string_equal(host_params_get(p, "ImexChannelCount"), "2048");
	/* A truncated proc file is an error with a reason, not a crash. */
	fx_file(&x, "proc/driver/nvidia/version", "NVRM vers");
	assert_int_equal(host_driver_read(&x.h, &d), NV_E_PARSE);
	assert_non_null(strstr(x.h.err, "NVRM"));
	fx_clear(&x);
	free(p);
}

static void test_host_gpus_read_without_nvml(void **state)
{
	struct host_gpu g[HOST_GPU_MAX];
	size_t n = 0;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	assert_int_equal(host_gpus_read(&x.h, g, HOST_GPU_MAX, &n), NV_E_UNSUPPORTED);
	assert_non_null(strstr(x.h.err, "cannot load"));
	fx_clear(&x);
}

static void test_host_kind_read_nvl72_and_hgx(void **state)
{
	struct host_kind k;
	struct fx x;

	(void)state;
	fx_init(&x, NULL);
	fx_file(&x, "sys/class/infiniband/mlx5_0/device/vpd", "PN\x00MCX75310AAS\x00V0");
	assert_int_equal(host_kind_read(&x.h, &k), NV_OK);
	assert_false(k.local_nvswitch);
	assert_false(k.switch_via_cx);
	assert_false(k.driver_container);
	assert_false(host_kind_wants_fm(&k));
	fx_file(&x, "proc/driver/nvidia-nvswitch/devices/0000:05:00.0", "");
	fx_file(&x, "sys/class/infiniband/mlx5_1/device/vpd", "xxSW_MNGyy");
	fx_file(&x, "run/nvidia/validations/.driver-ctr-ready", "");
	assert_int_equal(host_kind_read(&x.h, &k), NV_OK);
	assert_true(k.local_nvswitch);
	assert_true(k.switch_via_cx);
	assert_true(k.driver_container);
	assert_true(host_kind_wants_fm(&k));
	fx_clear(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_host_path_joins),
	        cmocka_unit_test(test_host_tool_path_by_namespace),
	        cmocka_unit_test(test_host_write_atomic_and_read),
	        cmocka_unit_test(test_host_driver_read_not_loaded),
	        cmocka_unit_test(test_host_driver_read_loaded),
	        cmocka_unit_test(test_host_gpus_read_without_nvml),
	        cmocka_unit_test(test_host_kind_read_nvl72_and_hgx),
	};
	return cmocka_run_group_tests_name("agent/host", tests, NULL, NULL);
}
