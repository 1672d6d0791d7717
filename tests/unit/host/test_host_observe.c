// SPDX-License-Identifier: Apache-2.0
// Unit tests for one observation of the host: every part is read, and a
// broken part (truncated proc file, NVML failure, hung imex-ctl, a host
// Fabric Manager that should not run) is reported without hiding the rest.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "host_fixture.h"

static int nvml_mode; /* 0 healthy, 1 one GPU in progress + degraded, 2 failing */

static enum nv_err fake_nvml(struct host *h, struct host_gpu *gpus, size_t cap, size_t *n,
                             struct host_driver_info *drv, char *why, size_t whysz)
{
	(void)h;
	if (nvml_mode == 2) {
		snprintf(why, whysz, "nvmlInit: Unknown Error");
		return NV_E_IO;
	}
	if (drv != NULL)
		snprintf(drv->nvml_driver, sizeof(drv->nvml_driver), "580.95.05");
	if (gpus == NULL)
		return NV_OK;
	assert_true(cap >= 4);
	for (unsigned i = 0; i < 4; i++) {
		struct host_gpu *g = &gpus[i];
		memset(g, 0, sizeof(*g));
		g->index = i;
		g->fabric_state = HOST_FABRIC_COMPLETED;
		g->has_cluster = true;
		snprintf(g->cluster_uuid, sizeof(g->cluster_uuid),
		         "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3");
		g->clique_id = 32766;
		g->has_health = true;
		g->health_summary = HOST_HEALTH_HEALTHY;
	}
	if (nvml_mode == 1) {
		gpus[1].fabric_state = HOST_FABRIC_IN_PROGRESS;
		gpus[2].health_summary = HOST_HEALTH_LIMITED_CAPACITY;
	}
	*n = 4;
	return NV_OK;
}

static struct host_ops test_ops(void)
{
	struct host_ops o = host_real_ops;

	o.name = "test";
	o.nvml_read = fake_nvml;
	return o;
}

static void tray(struct fx *x, const struct host_ops *ops)
{
	fx_init(x, ops);
	fx_file(x, "proc/driver/nvidia/version",
	        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build"
	        "  (b@h)  Thu Oct  2 11:04:17 UTC 2025\n");
	fx_file(x, "proc/driver/nvidia/params", "ImexChannelCount: 2048\n");
	fx_script(x, FX_SYSTEMCTL,
	          "printf 'LoadState=not-found\\nActiveState=inactive\\n"
	          "UnitFileState=\\n'");
	fx_script(x, FX_IMEX_CTL, "echo 'connection refused' >&2; exit 1");
}

static void test_host_observe_healthy_tray(void **state)
{
	struct host_ops ops = test_ops();
	struct host_obs *o = xcalloc(1, sizeof(*o));
	struct fx x;

	(void)state;
	nvml_mode = 0;
	tray(&x, &ops);
	assert_int_equal(host_observe(&x.h, HOST_IMEX_PROCESS, o), NV_OK);
	assert_int_equal(o->driver_part.err, NV_OK);
	assert_string_equal(o->driver.version, "580.95.05");
	assert_string_equal(o->driver.nvml_driver, "580.95.05");
	assert_int_equal(o->imex_channel_count, 2048);
	assert_int_equal(o->n_gpus, 4);
	assert_int_equal(o->fabric, HOST_FABRIC_COMPLETED);
	assert_int_equal(o->health, HOST_HEALTH_HEALTHY);
	assert_true(o->has_clique);
	assert_string_equal(o->clique, "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766");
	assert_int_equal(o->fm_part.err, NV_OK);
	assert_int_equal(o->fm.active, HOST_UNIT_NOT_FOUND);
	assert_true(o->imex_read);
	assert_int_equal(o->imex.daemon, HOST_IMEXD_NOT_RUNNING);
	fx_clear(&x);
	free(o);
}

static void test_host_observe_reports_each_broken_part(void **state)
{
	struct host_ops ops = test_ops();
	struct host_obs *o = xcalloc(1, sizeof(*o));
	struct fx x;

	(void)state;
	nvml_mode = 1;
	tray(&x, &ops);
	x.h.cfg.tool_timeout_ms = 300;
	fx_file(&x, "proc/driver/nvidia/version", "NVRM versi");
	fx_script(&x, FX_SYSTEMCTL,
	          "printf 'LoadState=loaded\\nActiveState=active\\n"
	          "UnitFileState=enabled\\n'");
	fx_script(&x, FX_IMEX_CTL, "exec sleep 30");
	assert_int_equal(host_observe(&x.h, HOST_IMEX_PROCESS, o), NV_OK);
	assert_int_equal(o->driver_part.err, NV_E_PARSE);
	assert_non_null(strstr(o->driver_part.why, "NVRM"));
	assert_int_equal(o->gpus_part.err, NV_OK);
	assert_int_equal(o->fabric, HOST_FABRIC_IN_PROGRESS);
	assert_int_equal(o->health, HOST_HEALTH_LIMITED_CAPACITY);
	assert_int_equal(o->clique_part.err, NV_E_STATE);
	assert_non_null(strstr(o->clique_part.why, "GPU 1"));
	assert_false(o->has_clique);
	assert_int_equal(o->fm_part.err, NV_E_STATE);
	assert_int_equal(o->imex_part.err, NV_E_TIMEOUT);
	assert_non_null(strstr(o->imex_part.why, "timed out"));
	fx_clear(&x);
	free(o);
}

static void test_host_observe_nvml_failure(void **state)
{
	struct host_ops ops = test_ops();
	struct host_obs *o = xcalloc(1, sizeof(*o));
	struct fx x;

	(void)state;
	nvml_mode = 2;
	tray(&x, &ops);
	assert_int_equal(host_observe(&x.h, HOST_IMEX_OFF, o), NV_OK);
	assert_int_equal(o->driver_part.err, NV_OK);
	assert_int_equal(o->gpus_part.err, NV_E_IO);
	assert_non_null(strstr(o->gpus_part.why, "nvmlInit"));
	assert_int_equal(o->fabric, HOST_FABRIC_UNKNOWN);
	assert_int_equal(o->clique_part.err, NV_E_STATE);
	assert_false(o->imex_read);
	assert_int_equal(host_observe(&x.h, HOST_IMEX_OFF, NULL), NV_E_INVAL);
	fx_clear(&x);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_host_observe_healthy_tray),
	        cmocka_unit_test(test_host_observe_reports_each_broken_part),
	        cmocka_unit_test(test_host_observe_nvml_failure),
	};
	return cmocka_run_group_tests_name("agent/host_observe", tests, NULL, NULL);
}
