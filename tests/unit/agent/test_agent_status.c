// SPDX-License-Identifier: Apache-2.0
// Unit tests for the agent's spec reader and status builder: the CRD's
// shape from one observation, conditions that keep their transition times,
// a standing error that keeps its time, and the comparison that decides
// whether a status write is needed at all.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/agent.h"
#include "nvl72/base.h"
#include "nvl72/json.h"

#define T0 1796000000000LL /* a wall time in ms */
#define CLIQUE "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.1"

static json_t *tray_json(const char *extra_spec)
{
	char text[2048];
	json_t *o = NULL;

	snprintf(text, sizeof(text),
	         "{\"metadata\":{\"name\":\"r1-t03\",\"uid\":\"u-3\",\"generation\":4},"
	         "\"spec\":{\"rack\":\"r1\",\"index\":3,\"node\":\"n3\"%s}}",
	         extra_spec);
	assert_int_equal(jx_loadb(text, strlen(text), NULL, &o, NULL), NV_OK);
	return o;
}

static void healthy_obs(struct host_obs *o)
{
	memset(o, 0, sizeof(*o));
	o->driver.loaded = true;
	str_copy(o->driver.version, sizeof(o->driver.version), "580.95.05");
	str_copy(o->driver.sys_version, sizeof(o->driver.sys_version), "580.95.05");
	o->driver.open_module = true;
	o->driver.cuda_version = 13000;
	o->imex_channel_count = 2048;
	o->n_gpus = 4;
	for (unsigned i = 0; i < 4; i++) {
		struct host_gpu *g = &o->gpus[i];
		g->index = i;
		snprintf(g->uuid, sizeof(g->uuid), "GPU-6b0e2f4c-1d3a-4c8e-9a71-0f5d2c3b8e1%u", i);
		g->fabric_state = HOST_FABRIC_COMPLETED;
		g->has_cluster = true;
		str_copy(g->cluster_uuid, sizeof(g->cluster_uuid),
		         "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3");
		g->clique_id = 1;
		g->has_health = true;
		g->health_mask = HOST_HEALTH_MASK_CLEAR;
		host_health_decode(g->health_mask, &g->health);
		g->health_summary = HOST_HEALTH_HEALTHY;
		g->has_platform = true;
		str_copy(g->chassis_serial, sizeof(g->chassis_serial), "1821124000042");
		g->slot = 13;
		g->tray_index = 3;
		g->module_id = i + 1;
	}
	o->fabric = HOST_FABRIC_COMPLETED;
	o->health = HOST_HEALTH_HEALTHY;
	o->has_clique = true;
	str_copy(o->clique, sizeof(o->clique), CLIQUE);
	o->fm.active = HOST_UNIT_NOT_FOUND;
}

struct fixture {
	json_t *tray;
	struct agent_spec spec;
	char spec_err[256];
	struct host_obs obs;
	struct agent_report rep;
};

static struct fixture *fixture_new(const char *extra_spec)
{
	struct fixture *f = xcalloc(1, sizeof(*f));

	f->tray = tray_json(extra_spec);
	(void)agent_spec_parse(f->tray, "10.0.0.3", &f->spec, f->spec_err, sizeof(f->spec_err));
	healthy_obs(&f->obs);
	f->rep.spec = &f->spec;
	f->rep.spec_error = f->spec_err;
	f->rep.node_ip = "10.0.0.3";
	f->rep.obs = &f->obs;
	f->rep.lease = "nvl72-system/r1-t03";
	str_copy(f->rep.ondisk, sizeof(f->rep.ondisk), "580.95.05");
	return f;
}

static void fixture_free(struct fixture *f)
{
	json_decref(f->tray);
	free(f);
}

/* "Status Reason" of a condition in a status object. */
static const char *cond(const json_t *status, const char *type, char *out, size_t outsz)
{
	json_t *c;
	size_t i;

	out[0] = '\0';
	json_array_foreach(jx_path(status, "conditions"), i, c) {
		if (strcmp(jx_str_or(c, "type", ""), type) == 0)
			snprintf(out, outsz, "%s %s", jx_str_or(c, "status", ""),
			         jx_str_or(c, "reason", ""));
	}
	return out;
}

static const char *cond_time(const json_t *status, const char *type)
{
	json_t *c;
	size_t i;

	json_array_foreach(jx_path(status, "conditions"), i, c) {
		if (strcmp(jx_str_or(c, "type", ""), type) == 0)
			return jx_str_or(c, "lastTransitionTime", "");
	}
	return "";
}

static const char *cond_message(const json_t *status, const char *type)
{
	json_t *c;
	size_t i;

	json_array_foreach(jx_path(status, "conditions"), i, c) {
		if (strcmp(jx_str_or(c, "type", ""), type) == 0)
			return jx_str_or(c, "message", "");
	}
	return "";
}

static void test_agent_spec_parse_full(void **state)
{
	struct fixture *f = fixture_new(
	        ",\"driver\":{\"version\":\"580.173.02\",\"activation\":\"Reboot\"},"
	        "\"imex\":{\"mode\":\"host\",\"domain\":\"ns.cd-a\",\"domainUID\":\"u-1\","
	        "\"peers\":[\"10.0.0.3\",\"10.0.0.4\"],"
	        "\"port\":51000,\"commandPort\":51005,\"channels\":{\"count\":16,\"ids\":[0,3]}},"
	        "\"maintenance\":{\"state\":\"Upgrading\",\"upgrade\":{\"name\":\"u\",\"step\":2,"
	        "\"components\":[\"driver\"]}}");

	(void)state;
	assert_string_equal(f->spec_err, "");
	assert_int_equal(f->spec.generation, 4);
	assert_string_equal(f->spec.name, "r1-t03");
	assert_true(f->spec.has_driver);
	assert_string_equal(f->spec.driver_version, "580.173.02");
	assert_int_equal(f->spec.activation, AGENT_ACTIVATE_REBOOT);
	assert_true(f->spec.has_imex);
	assert_int_equal(f->spec.imex.mode, HOST_IMEX_HOST);
	assert_string_equal(f->spec.imex_domain_uid, "u-1");
	assert_int_equal(f->spec.imex.n_peers, 2);
	assert_string_equal(f->spec.imex.peers[1], "10.0.0.4");
	assert_string_equal(f->spec.imex.bind_ip, "10.0.0.3");
	assert_int_equal(f->spec.imex.server_port, 51000);
	assert_int_equal(f->spec.imex.cmd_port, 51005);
	assert_int_equal(f->spec.n_channel_ids, 2);
	assert_int_equal(f->spec.channel_ids[1], 3);
	assert_false(f->spec.channels_all);
	assert_string_equal(f->spec.maint_state, "Upgrading");
	assert_true(f->spec.has_upgrade_step);
	assert_int_equal(f->spec.upgrade_step, 2);
	fixture_free(f);
}

static void test_agent_spec_parse_channel_allocation_mode(void **state)
{
	struct fixture *f = fixture_new(",\"imex\":{\"domain\":\"d\",\"peers\":[\"10.0.0.3\"],"
	                                "\"channels\":{\"count\":32,\"allocationMode\":\"All\"}}");

	(void)state;
	assert_string_equal(f->spec_err, "");
	assert_true(f->spec.has_imex);
	assert_true(f->spec.channels_all);
	assert_int_equal(f->spec.channel_count, 32);
	assert_string_equal(f->spec.imex_domain_uid, ""); /* no ComputeDomain */
	fixture_free(f);

	f = fixture_new(",\"imex\":{\"domain\":\"d\",\"peers\":[\"10.0.0.3\"],"
	                "\"channels\":{\"ids\":[0],\"allocationMode\":\"Single\"}}");
	assert_true(f->spec.has_imex);
	assert_false(f->spec.channels_all);
	assert_int_equal(f->spec.n_channel_ids, 1);
	fixture_free(f);

	f = fixture_new(",\"imex\":{\"domain\":\"d\",\"peers\":[\"10.0.0.3\"],"
	                "\"channels\":{\"allocationMode\":\"Many\"}}");
	assert_false(f->spec.has_imex);
	assert_false(f->spec.channels_all);
	assert_non_null(strstr(f->spec_err, "spec.imex.channels.allocationMode"));
	fixture_free(f);
}

static void test_agent_spec_parse_bad_imex_keeps_driver(void **state)
{
	struct fixture *f = fixture_new(",\"driver\":{\"version\":\"580.95.05\"},"
	                                "\"imex\":{\"domain\":\"d\",\"peers\":[]}");
	json_t *s;
	char c[128];

	(void)state;
	assert_false(f->spec.has_imex);
	assert_true(f->spec.has_driver);
	assert_non_null(strstr(f->spec_err, "spec.imex.peers"));
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "IMEXReady", c, sizeof(c)), "False SpecInvalid");
	assert_string_equal(jx_str_or(s, "lastError.reason", ""), "SpecInvalid");
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "True VersionMatches");
	json_decref(s);
	fixture_free(f);
	f = fixture_new(",\"driver\":{\"version\":\"latest\"}");
	assert_false(f->spec.has_driver);
	assert_non_null(strstr(f->spec_err, "spec.driver.version: must be a driver version"));
	fixture_free(f);
}

static void test_agent_spec_parse_refused_whole(void **state)
{
	json_t *t = tray_json(",\"driver\":{\"version\":\"580.95.05\"},"
	                      "\"maintenance\":{\"state\":\"Drained\"}");
	struct agent_spec s;
	char err[256];

	(void)state;
	/* The name no longer matches rack and index: no part is to blame. */
	json_object_set_new(json_object_get(t, "spec"), "index", json_integer(4));
	assert_int_equal(agent_spec_parse(t, "10.0.0.3", &s, err, sizeof(err)),
	                 NV_E_INVALID_OBJECT);
	assert_non_null(strstr(err, "metadata.name: "));
	assert_false(s.has_driver);
	assert_string_equal(s.maint_state, "None");
	assert_int_equal(s.generation, 4);
	json_decref(t);
}

static void test_agent_status_build_healthy(void **state)
{
	struct fixture *f = fixture_new("");
	json_t *s = agent_status_build(&f->rep, NULL, T0);
	char c[128];

	(void)state;
	assert_int_equal(json_integer_value(jx_path(s, "observedGeneration")), 4);
	assert_null(jx_path(s, "heartbeatTime"));
	assert_string_equal(jx_str_or(s, "driver.version", ""), "580.95.05");
	assert_string_equal(jx_str_or(s, "driver.branch", ""), "R580");
	assert_string_equal(jx_str_or(s, "driver.cudaVersion", ""), "13.0");
	assert_int_equal(json_array_size(jx_path(s, "gpus")), 4);
	assert_string_equal(jx_str_or(s, "gpus[2].fabric.state", ""), "Completed");
	assert_string_equal(jx_str_or(s, "gpus[2].fabric.status", ""), "Success");
	assert_int_equal(json_integer_value(jx_path(s, "gpus[2].fabric.healthMask")), 426);
	assert_string_equal(jx_str_or(s, "gpus[2].fabric.health.incorrectConfiguration", ""),
	                    "None");
	assert_string_equal(jx_str_or(s, "fabric.cliqueID", ""), CLIQUE);
	assert_string_equal(jx_str_or(s, "imex.address", ""), "10.0.0.3");
	assert_null(jx_path(s, "imex.mode"));
	assert_string_equal(jx_str_or(s, "hostFabricManager.state", ""), "NotInstalled");
	assert_null(jx_path(s, "lastError"));
	assert_string_equal(cond(s, "Ready", c, sizeof(c)), "True AllReady");
	assert_string_equal(cond(s, "FabricReady", c, sizeof(c)), "True Completed");
	assert_string_equal(cond(s, "FabricHealthy", c, sizeof(c)), "True Healthy");
	assert_string_equal(cond(s, "IMEXReady", c, sizeof(c)), "True NotRequested");
	assert_string_equal(cond(s, "HostFabricManagerOff", c, sizeof(c)), "True NotInstalled");
	assert_int_equal(json_array_size(jx_path(s, "conditions")), 7);
	json_decref(s);
	fixture_free(f);
}

/* An NVML API 12 driver (R570): v2 fabric info only, health decided from
 * the mask; then a fault in the mask names the GPU. Inventory as read. */
static void test_agent_status_build_health_from_mask(void **state)
{
	struct fixture *f = fixture_new("");
	json_t *s;
	char c[128];

	(void)state;
	for (unsigned i = 0; i < 4; i++) {
		struct host_gpu *g = &f->obs.gpus[i];
		g->health_mask = 0xAA;
		host_health_decode(g->health_mask, &g->health);
		g->health_source = HOST_HEALTH_SRC_MASK;
		g->health_summary = host_health_from_mask(&g->health);
		snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "%08X:06:00.0", 8 + i);
		str_copy(g->vbios, sizeof(g->vbios), "97.00.B9.00.69");
	}
	f->obs.health_source = HOST_HEALTH_SRC_MASK;
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(jx_str_or(s, "gpus[1].fabric.healthSummary", ""), "Healthy");
	assert_string_equal(jx_str_or(s, "gpus[1].fabric.healthSource", ""), "mask");
	assert_string_equal(jx_str_or(s, "fabric.healthSummary", ""), "Healthy");
	assert_string_equal(jx_str_or(s, "fabric.healthSource", ""), "mask");
	assert_string_equal(jx_str_or(s, "gpus[1].pciBusId", ""), "00000009:06:00.0");
	assert_string_equal(jx_str_or(s, "gpus[1].vbios", ""), "97.00.B9.00.69");
	assert_null(jx_path(s, "gpus[1].boardPartNumber"));
	assert_null(jx_path(s, "gpus[1].serial"));
	assert_string_equal(cond(s, "FabricHealthy", c, sizeof(c)), "True Healthy");
	json_decref(s);

	/* Route unhealthy on GPU 2. */
	f->obs.gpus[2].health_mask = 0x9A;
	host_health_decode(0x9A, &f->obs.gpus[2].health);
	f->obs.gpus[2].health_summary = host_health_from_mask(&f->obs.gpus[2].health);
	f->obs.health = host_tray_health_summary(f->obs.gpus, 4);
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(jx_str_or(s, "gpus[2].fabric.healthSummary", ""), "Unhealthy");
	assert_string_equal(jx_str_or(s, "fabric.healthSummary", ""), "Unhealthy");
	assert_string_equal(cond(s, "FabricHealthy", c, sizeof(c)), "False Unhealthy");
	assert_non_null(strstr(cond_message(s, "FabricHealthy"),
	                       "GPU 2: Unhealthy from the health mask (routeUnhealthy)"));
	json_decref(s);
	fixture_free(f);
}

/* A Vera Rubin tray as NVIDIA/k8s-test-infra's qx-vrnvl72.xml shows it:
 * a two-part driver version (615.23), CUDA 13.4, bus ids in PCI domains
 * 2 and 0xA and a board part number. The branch is the version's first
 * part, whatever the number of parts. */
static void test_agent_status_build_vera_rubin_shape(void **state)
{
	static const char *const pci[4] = {"00000002:81:00.0", "00000002:C1:00.0",
	                                   "0000000A:81:00.0", "0000000A:E1:00.0"};
	struct fixture *f = fixture_new("");
	json_t *s;

	(void)state;
	str_copy(f->obs.driver.version, sizeof(f->obs.driver.version), "615.23");
	str_copy(f->obs.driver.sys_version, sizeof(f->obs.driver.sys_version), "615.23");
	f->obs.driver.cuda_version = 13040;
	for (unsigned i = 0; i < 4; i++) {
		str_copy(f->obs.gpus[i].pci_bus_id, sizeof(f->obs.gpus[i].pci_bus_id), pci[i]);
		str_copy(f->obs.gpus[i].vbios, sizeof(f->obs.gpus[i].vbios), "99.00.1B.00.00");
		str_copy(f->obs.gpus[i].board_part, sizeof(f->obs.gpus[i].board_part),
		         "699-2G558-3201-TS3");
	}
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(jx_str_or(s, "driver.version", ""), "615.23");
	assert_string_equal(jx_str_or(s, "driver.branch", ""), "R615");
	assert_string_equal(jx_str_or(s, "driver.cudaVersion", ""), "13.4");
	assert_string_equal(jx_str_or(s, "gpus[3].pciBusId", ""), "0000000A:E1:00.0");
	assert_string_equal(jx_str_or(s, "gpus[0].pciBusId", ""), "00000002:81:00.0");
	assert_string_equal(jx_str_or(s, "gpus[3].vbios", ""), "99.00.1B.00.00");
	assert_string_equal(jx_str_or(s, "gpus[3].boardPartNumber", ""), "699-2G558-3201-TS3");
	json_decref(s);
	fixture_free(f);
}

static void test_agent_status_build_stable_and_transitions(void **state)
{
	struct fixture *f = fixture_new("");
	json_t *s1 = agent_status_build(&f->rep, NULL, T0), *s2, *s3;
	char c[128];

	(void)state;
	/* The same host a minute later: nothing to write. */
	s2 = agent_status_build(&f->rep, s1, T0 + 60000);
	assert_false(agent_status_differs(s1, s2));
	/* A GPU goes back to IN_PROGRESS: only the affected conditions move. */
	f->obs.gpus[2].fabric_state = HOST_FABRIC_IN_PROGRESS;
	f->obs.fabric = HOST_FABRIC_IN_PROGRESS;
	f->obs.has_clique = false;
	f->obs.clique[0] = '\0';
	f->obs.clique_part.err = NV_E_STATE;
	str_copy(f->obs.clique_part.why, sizeof(f->obs.clique_part.why), "GPU 2 is InProgress");
	s3 = agent_status_build(&f->rep, s2, T0 + 120000);
	assert_true(agent_status_differs(s2, s3));
	assert_string_equal(cond(s3, "FabricReady", c, sizeof(c)), "False InProgress");
	assert_string_equal(cond(s3, "Ready", c, sizeof(c)), "False FabricNotReady");
	assert_string_equal(jx_str_or(s3, "gpus[2].fabric.state", ""), "InProgress");
	assert_string_equal(jx_str_or(s3, "fabric.cliqueID", "x"), "");
	assert_string_not_equal(cond_time(s3, "Ready"), cond_time(s1, "Ready"));
	assert_string_equal(cond_time(s3, "DriverReady"), cond_time(s1, "DriverReady"));
	json_decref(s1);
	json_decref(s2);
	json_decref(s3);
	fixture_free(f);
}

static void test_agent_status_differs_ignores_heartbeat(void **state)
{
	json_t *a = json_pack("{s:s,s:i}", "heartbeatTime", "2026-11-01T10:00:00Z", "x", 1);
	json_t *b = json_pack("{s:s,s:i}", "heartbeatTime", "2026-11-01T10:05:00Z", "x", 1);
	json_t *c = json_pack("{s:i}", "x", 2);

	(void)state;
	assert_false(agent_status_differs(a, b));
	assert_true(agent_status_differs(a, c));
	assert_true(agent_status_differs(NULL, a));
	assert_false(agent_status_differs(NULL, NULL));
	json_decref(a);
	json_decref(b);
	json_decref(c);
}

static void test_agent_status_build_imex_faults(void **state)
{
	struct fixture *f = fixture_new(",\"imex\":{\"domain\":\"cd\",\"peers\":[\"10.0.0.3\","
	                                "\"10.0.0.4\",\"10.0.0.5\"]}");
	struct host_imex_domain_status *d = &f->obs.imex.dom;
	json_t *s1, *s2, *s3;
	char c[128];

	(void)state;
	f->obs.imex_read = true;
	f->obs.imex.daemon = HOST_IMEXD_READY;
	f->obs.imex.nodes_ok = true;
	d->domain = HOST_IMEX_DOMAIN_DEGRADED;
	d->n_nodes = 3;
	for (unsigned i = 0; i < 3; i++) {
		d->nodes[i].index = i;
		snprintf(d->nodes[i].host, sizeof(d->nodes[i].host), "10.0.0.%u", 3 + i);
		d->nodes[i].status = i == 2 ? HOST_IMEXD_UNAVAILABLE : HOST_IMEXD_READY;
		d->nodes[i].n_conn = 3;
	}
	f->rep.imex_applied = true;
	memset(f->rep.imex_hash, 'a', 64);
	s1 = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s1, "IMEXReady", c, sizeof(c)), "False DomainDegraded");
	assert_non_null(strstr(
	        json_string_value(jx_path(json_array_get(jx_path(s1, "conditions"), 4), "message")),
	        "10.0.0.5 (node 2) Unavailable"));
	assert_string_equal(jx_str_or(s1, "imex.domainState", ""), "Degraded");
	assert_int_equal(json_integer_value(jx_path(s1, "imex.nodeIndex")), 0);
	assert_int_equal(json_integer_value(jx_path(s1, "imex.peersTotal")), 3);

	/* A hung nvidia-imex-ctl: reported, and a standing error keeps its time. */
	f->obs.imex_part.err = NV_E_TIMEOUT;
	str_copy(f->obs.imex.err, sizeof(f->obs.imex.err),
	         "nvidia-imex-ctl -q timed out after 1000 ms");
	s2 = agent_status_build(&f->rep, s1, T0 + 1000);
	assert_string_equal(cond(s2, "IMEXReady", c, sizeof(c)), "False StatusTimeout");
	assert_string_equal(jx_str_or(s2, "lastError.reason", ""), "IMEXStatusTimeout");
	s3 = agent_status_build(&f->rep, s2, T0 + 90000);
	assert_false(agent_status_differs(s2, s3));
	assert_string_equal(jx_str_or(s3, "lastError.time", ""),
	                    jx_str_or(s2, "lastError.time", "x"));
	json_decref(s1);
	json_decref(s2);
	json_decref(s3);
	fixture_free(f);
}

static void test_agent_status_build_driver_change(void **state)
{
	struct fixture *f = fixture_new(",\"driver\":{\"version\":\"580.173.02\"}");
	json_t *s;
	char c[128];

	(void)state;
	f->rep.drv.active = true;
	f->rep.drv.waiting_maintenance = true;
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "False WaitingForMaintenance");
	json_decref(s);
	f->rep.drv.waiting_maintenance = false;
	f->rep.drv.phase = HOST_DRV_INSTALLER_RUNNING;
	str_copy(f->rep.drv.detail, sizeof(f->rep.drv.detail), "installer pid 42 still running");
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "False InstallerRunning");
	assert_string_equal(cond(s, "Ready", c, sizeof(c)), "False DriverNotReady");
	assert_string_equal(jx_str_or(s, "maintenance.message", ""),
	                    "installer pid 42 still running");
	json_decref(s);
	f->rep.drv.phase = HOST_DRV_FAILED;
	f->rep.drv.err = NV_E_IO;
	f->rep.drv.failures = AGENT_DRIVER_TRIES;
	str_copy(f->rep.drv.detail, sizeof(f->rep.drv.detail), "installer failed (status 1)");
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "False ChangeFailed");
	assert_string_equal(cond_message(s, "DriverReady"),
	                    "changing to 580.173.02: 3 steps in a row failed (the agent keeps "
	                    "trying); the last: installer failed (status 1)");
	/* A fourth failure says the same: no status write for it. */
	f->rep.drv.failures = AGENT_DRIVER_TRIES + 1;
	json_t *s4 = agent_status_build(&f->rep, s, T0 + 5000);
	assert_false(agent_status_differs(s, s4));
	json_decref(s4);
	assert_string_equal(jx_str_or(s, "lastError.reason", ""), "DriverChangeFailed");
	json_decref(s);
	fixture_free(f);
}

/* Failed steps count in a row towards one target: a step that goes on, a
 * change waiting for maintenance or over, or another target starts again. */
static void test_agent_drv_tally_in_a_row(void **state)
{
	struct agent_drv_tally t = {0};
	struct agent_drv_report d = {
	        .active = true, .phase = HOST_DRV_STOPPING_HOLDERS, .err = NV_E_TIMEOUT};

	(void)state;
	agent_drv_tally(&t, "580.95.05", 1000, &d);
	assert_int_equal(d.failures, 1);
	d.phase = HOST_DRV_FAILED;
	agent_drv_tally(&t, "580.95.05", 4000, &d);
	assert_int_equal(d.failures, 2);
	d.err = NV_OK; /* Failed alone is a failed step too */
	agent_drv_tally(&t, "580.95.05", 7000, &d);
	assert_int_equal(d.failures, 3);
	/* another target: its first failure */
	agent_drv_tally(&t, "580.159.03", 9000, &d);
	assert_int_equal(d.failures, 1);
	/* a step that went on */
	d = (struct agent_drv_report){.active = true, .phase = HOST_DRV_INSTALLING};
	agent_drv_tally(&t, "580.159.03", 12000, &d);
	assert_int_equal(d.failures, 0);
	d = (struct agent_drv_report){.active = true, .phase = HOST_DRV_RELOADING, .err = NV_E_IO};
	agent_drv_tally(&t, "580.159.03", 13000, &d);
	assert_int_equal(d.failures, 1);
	/* waiting for maintenance took no step */
	d = (struct agent_drv_report){.active = true, .waiting_maintenance = true, .err = NV_E_IO};
	agent_drv_tally(&t, "580.159.03", 14000, &d);
	assert_int_equal(d.failures, 0);
	d = (struct agent_drv_report){.active = true, .phase = HOST_DRV_FAILED, .err = NV_E_IO};
	agent_drv_tally(&t, "580.159.03", 15000, &d);
	assert_int_equal(d.failures, 1);
	/* the change is over */
	d = (struct agent_drv_report){.phase = HOST_DRV_DONE};
	agent_drv_tally(&t, "580.159.03", 16000, &d);
	assert_int_equal(d.failures, 0);
	assert_int_equal(t.fails, 0);
}

/* The retry of a failed step waits AGENT_DRIVER_RETRY_MS, whichever pass
 * comes first: a held pass reports the failure again, unchanged, and does
 * not count; then the step runs again. */
static void test_agent_drv_hold_spaces_retries(void **state)
{
	struct agent_drv_tally t = {0};
	struct agent_drv_report d = {
	        .active = true, .phase = HOST_DRV_STOPPING_HOLDERS, .err = NV_E_TIMEOUT};
	struct agent_drv_report h;

	(void)state;
	str_copy(d.detail, sizeof(d.detail), "systemctl timed out after 1000 ms");
	assert_false(agent_drv_hold(&t, "580.95.05", 1000, &h)); /* nothing failed yet */
	agent_drv_tally(&t, "580.95.05", 1000, &d);
	memset(&h, 0, sizeof(h));
	assert_true(agent_drv_hold(&t, "580.95.05", 1000 + AGENT_DRIVER_RETRY_MS - 1, &h));
	assert_true(h.held && h.active);
	assert_int_equal(h.failures, 1);
	assert_int_equal(h.err, NV_E_TIMEOUT);
	assert_string_equal(h.detail, "systemctl timed out after 1000 ms");
	agent_drv_tally(&t, "580.95.05", 1000 + AGENT_DRIVER_RETRY_MS - 1, &h);
	assert_int_equal(t.fails, 1);
	assert_false(agent_drv_hold(&t, "580.159.03", 1500, &h)); /* another target */
	assert_false(agent_drv_hold(&t, "580.95.05", 1000 + AGENT_DRIVER_RETRY_MS, &h));
}

/* A step that failed fewer than AGENT_DRIVER_TRIES times in a row is tried
 * again: Retrying, not the ChangeFailed that halts an upgrade, whether the
 * step ended Failed or a host tool erred in the middle of one. */
static void test_agent_status_build_driver_retrying(void **state)
{
	struct fixture *f = fixture_new(",\"driver\":{\"version\":\"580.95.05\"}");
	json_t *s;
	char c[128];

	(void)state;
	f->rep.drv.active = true;
	f->rep.drv.phase = HOST_DRV_STOPPING_HOLDERS;
	f->rep.drv.err = NV_E_TIMEOUT;
	f->rep.drv.failures = 1;
	str_copy(f->rep.drv.detail, sizeof(f->rep.drv.detail),
	         "/usr/bin/systemctl timed out after 1000 ms");
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "False Retrying");
	assert_string_equal(cond_message(s, "DriverReady"),
	                    "changing to 580.95.05: a step failed (1 of 3 in a row), trying again: "
	                    "/usr/bin/systemctl timed out after 1000 ms");
	assert_string_equal(cond(s, "Ready", c, sizeof(c)), "False DriverNotReady");
	json_decref(s);
	f->rep.drv.phase = HOST_DRV_FAILED;
	f->rep.drv.err = NV_E_TIMEOUT;
	f->rep.drv.failures = AGENT_DRIVER_TRIES - 1;
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "False Retrying");
	json_decref(s);
	f->rep.drv.failures = AGENT_DRIVER_TRIES;
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "DriverReady", c, sizeof(c)), "False ChangeFailed");
	json_decref(s);
	fixture_free(f);
}

static void test_agent_spec_parse_validation(void **state)
{
	struct fixture *f = fixture_new(",\"validation\":{\"id\":\"c-1\",\"timeoutSeconds\":60,"
	                                "\"args\":[\"-b\",\"8G\"]}");

	(void)state;
	assert_true(f->spec.has_validation);
	assert_string_equal(f->spec.validation.id, "c-1");
	assert_int_equal(f->spec.validation.timeout_ms, 60000);
	assert_int_equal(f->spec.validation.n_args, 2);
	assert_string_equal(f->spec.validation.args[1], "8G");
	fixture_free(f);
	f = fixture_new(",\"validation\":{\"id\":\"c-1\"}");
	assert_int_equal(f->spec.validation.timeout_ms, 600000); /* the default */
	fixture_free(f);
	f = fixture_new(",\"validation\":{\"id\":\"\"}");
	assert_false(f->spec.has_validation);
	assert_non_null(strstr(f->spec_err, "spec.validation.id"));
	fixture_free(f);
	f = fixture_new(",\"validation\":{\"id\":\"c\",\"timeoutSeconds\":1}");
	assert_false(f->spec.has_validation);
	assert_non_null(strstr(f->spec_err, "timeoutSeconds"));
	fixture_free(f);
}

static void test_agent_status_build_validation(void **state)
{
	struct fixture *f = fixture_new("");
	struct host_val_result *v = &f->rep.validation, back;
	json_t *s, *s2;

	(void)state;
	s = agent_status_build(&f->rep, NULL, T0);
	assert_null(jx_path(s, "validation")); /* no run recorded */
	json_decref(s);
	str_copy(v->id, sizeof(v->id), "c-1");
	v->phase = HOST_VAL_SUCCEEDED;
	v->has_busbw = true;
	v->busbw_gbps = 900.0;
	str_copy(v->transport, sizeof(v->transport), "NVLink");
	v->start_ms = T0;
	v->end_ms = T0 + 61000;
	str_copy(v->message, sizeof(v->message), "bus bandwidth 900.00 GB/s over NVLink");
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(jx_str_or(s, "validation.phase", ""), "Succeeded");
	/* A whole figure is an integer, as the apiserver hands it back. */
	assert_true(json_is_integer(jx_path(s, "validation.busBandwidthGbps")));
	assert_string_equal(jx_str_or(s, "validation.completionTime", ""), "2026-11-30T00:54:21Z");
	agent_validation_from_status(s, &back);
	assert_string_equal(back.id, "c-1");
	assert_int_equal(back.phase, HOST_VAL_SUCCEEDED);
	assert_true(back.busbw_gbps == 900.0);
	assert_int_equal(back.end_ms, T0 + 61000);
	v->busbw_gbps = 812.34;
	s2 = agent_status_build(&f->rep, s, T0);
	assert_true(json_is_real(jx_path(s2, "validation.busBandwidthGbps")));
	assert_true(agent_status_differs(s, s2));
	json_decref(s2);
	/* Running: no completion time yet. */
	v->phase = HOST_VAL_RUNNING;
	v->has_busbw = false;
	s2 = agent_status_build(&f->rep, s, T0);
	assert_null(jx_path(s2, "validation.completionTime"));
	assert_null(jx_path(s2, "validation.busBandwidthGbps"));
	json_decref(s2);
	json_decref(s);
	/* A stored record that is not one reads as none. */
	s = json_pack("{s:{s:s,s:s}}", "validation", "id", "x", "phase", "Sideways");
	agent_validation_from_status(s, &back);
	assert_int_equal(back.phase, HOST_VAL_NONE);
	json_decref(s);
	fixture_free(f);
}

/* The plugin's condition is there only with the plugin, and a failing
 * plugin leaves the tray Ready. */
static void test_agent_status_build_kubelet_plugin(void **state)
{
	struct fixture *f = fixture_new("");
	char c[128];
	json_t *st, *st2;

	(void)state;
	str_copy(f->rep.plugin.status, sizeof(f->rep.plugin.status), "False");
	str_copy(f->rep.plugin.reason, sizeof(f->rep.plugin.reason), "ResourceSlicesNotServed");
	str_copy(f->rep.plugin.message, sizeof(f->rep.plugin.message), "not served");
	st = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(st, "KubeletPluginReady", c, sizeof(c)),
	                    "False ResourceSlicesNotServed");
	assert_string_equal(cond(st, "Ready", c, sizeof(c)), "True AllReady");
	/* Turned off: the condition goes. */
	memset(&f->rep.plugin, 0, sizeof(f->rep.plugin));
	st2 = agent_status_build(&f->rep, st, T0 + 1000);
	assert_string_equal(cond(st2, "KubeletPluginReady", c, sizeof(c)), "");
	assert_true(agent_status_differs(st, st2));
	json_decref(st);
	json_decref(st2);
	fixture_free(f);
}

/* ---- NVIDIA's DRA driver on the tray ---- */

static json_t *slices_json(const char *const *names, const char *driver)
{
	json_t *a = json_array();
	for (; *names; names++)
		json_array_append_new(a,
		                      json_pack("{s:{s:s},s:{s:s,s:s}}", "metadata", "name", *names,
		                                "spec", "driver", driver, "nodeName", "n3"));
	return a;
}

static void test_agent_nvidia_judge(void **state)
{
	struct fixture *f = fixture_new(",\"imex\":{\"domain\":\"team-a.train-4\","
	                                "\"peers\":[\"10.0.0.3\"],\"channels\":{\"ids\":[0]}}");
	struct agent_nvidia_report r;
	json_t *sl =
	        slices_json((const char *const[]){"n3-cd-b", "n3-cd-a", NULL}, AGENT_NVIDIA_DRIVER);
	json_t *other = slices_json((const char *const[]){"n3-gpu", NULL}, "gpu.nvidia.com");

	(void)state;
	/* No slice of the ComputeDomain driver (another NVIDIA driver's does
	 * not count): ours, spec.imex kept. */
	agent_nvidia_judge(other, true, NULL, &f->spec, &r);
	assert_int_equal(r.state, AGENT_NVIDIA_NONE);
	assert_true(f->spec.has_imex);
	assert_false(r.imex_dropped);
	/* Its slices: NVIDIA-managed, the first by name reported, and our IMEX
	 * taken out of the spec. */
	agent_nvidia_judge(sl, true, NULL, &f->spec, &r);
	assert_int_equal(r.state, AGENT_NVIDIA_MANAGED);
	assert_int_equal(r.nslices, 2);
	assert_string_equal(r.slice, "n3-cd-a");
	assert_true(r.imex_dropped);
	assert_string_equal(r.imex_domain, "team-a.train-4");
	assert_false(f->spec.has_imex);
	fixture_free(f);
	/* Not read yet: not known, and no IMEX of ours either. */
	f = fixture_new(",\"imex\":{\"domain\":\"d\",\"peers\":[\"10.0.0.3\"]}");
	agent_nvidia_judge(NULL, false, "resource not served", &f->spec, &r);
	assert_int_equal(r.state, AGENT_NVIDIA_UNKNOWN);
	assert_string_equal(r.why, "resource not served");
	assert_false(f->spec.has_imex);
	assert_true(r.imex_dropped);
	agent_nvidia_judge(NULL, false, NULL, &f->spec, &r);
	assert_string_equal(r.why, "the ResourceSlices are not read yet");
	assert_false(r.imex_dropped); /* already out of this spec */
	fixture_free(f);
	json_decref(sl);
	json_decref(other);
}

static void test_agent_status_build_nvidia_managed(void **state)
{
	struct fixture *f = fixture_new(",\"imex\":{\"domain\":\"team-a.train-4\","
	                                "\"peers\":[\"10.0.0.3\"],\"channels\":{\"ids\":[0]}}");
	json_t *sl = slices_json((const char *const[]){"n3-cd", NULL}, AGENT_NVIDIA_DRIVER);
	json_t *s, *s2;
	char c[128];

	(void)state;
	agent_nvidia_judge(sl, true, NULL, &f->spec, &f->rep.nvidia);
	f->rep.nvidia.unit_read = true;
	f->rep.nvidia.unit.active = HOST_UNIT_INACTIVE;
	f->rep.nvidia.unit.masked = true;
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(jx_str_or(s, "nvidiaDRA.driver", ""), "compute-domain.nvidia.com");
	assert_string_equal(jx_str_or(s, "nvidiaDRA.resourceSlice", ""), "n3-cd");
	assert_string_equal(jx_str_or(s, "nvidiaDRA.hostIMEXUnit", ""), "Inactive");
	assert_string_equal(cond(s, "HostIMEXOff", c, sizeof(c)), "True Masked");
	/* Our IMEX is not applied, and says whose it is. */
	assert_null(jx_path(s, "imex.mode"));
	assert_string_equal(cond(s, "IMEXReady", c, sizeof(c)), "False NVIDIAManaged");
	assert_non_null(strstr(cond_message(s, "IMEXReady"),
	                       "NVIDIA's DRA driver compute-domain.nvidia.com runs IMEX on this "
	                       "tray (ResourceSlice n3-cd): spec.imex of domain team-a.train-4"));
	assert_string_equal(cond(s, "Ready", c, sizeof(c)), "False IMEXNotReady");

	/* Without spec.imex the tray is Ready; the host unit running is the
	 * conflict, named. */
	fixture_free(f);
	f = fixture_new("");
	agent_nvidia_judge(sl, true, NULL, &f->spec, &f->rep.nvidia);
	f->rep.nvidia.unit_read = true;
	f->rep.nvidia.unit.active = HOST_UNIT_NOT_FOUND;
	json_decref(s);
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "HostIMEXOff", c, sizeof(c)), "True NotInstalled");
	assert_string_equal(cond(s, "IMEXReady", c, sizeof(c)), "True NotRequested");
	assert_string_equal(cond(s, "Ready", c, sizeof(c)), "True AllReady");
	assert_int_equal(json_array_size(jx_path(s, "conditions")), 8);
	f->rep.nvidia.unit.active = HOST_UNIT_ACTIVE;
	s2 = agent_status_build(&f->rep, s, T0 + 1000);
	assert_string_equal(jx_str_or(s2, "nvidiaDRA.hostIMEXUnit", ""), "Active");
	assert_string_equal(cond(s2, "HostIMEXOff", c, sizeof(c)), "False ConflictsWithNVIDIADRA");
	assert_non_null(strstr(cond_message(s2, "HostIMEXOff"),
	                       "nvidia-imex.service is active on a tray whose IMEX NVIDIA's DRA "
	                       "driver compute-domain.nvidia.com runs (ResourceSlice n3-cd): the "
	                       "host daemon and the driver's daemon cannot hold the driver's IMEX "
	                       "session together; mask the unit"));
	assert_string_equal(cond(s2, "Ready", c, sizeof(c)), "False HostIMEXRunning");
	/* The unit could not be read: Unknown, not a conflict. */
	f->rep.nvidia.unit_err = NV_E_TIMEOUT;
	str_copy(f->rep.nvidia.unit_why, sizeof(f->rep.nvidia.unit_why), "systemctl timed out");
	json_decref(s);
	s = agent_status_build(&f->rep, s2, T0 + 2000);
	assert_string_equal(cond(s, "HostIMEXOff", c, sizeof(c)), "Unknown QueryFailed");
	assert_string_equal(jx_str_or(s, "nvidiaDRA.hostIMEXUnit", ""), "Unknown");
	json_decref(s2);

	/* NVIDIA's driver leaves: the field and the condition go. */
	json_t *none = json_array();
	agent_nvidia_judge(none, true, NULL, &f->spec, &f->rep.nvidia);
	json_decref(none);
	s2 = agent_status_build(&f->rep, s, T0 + 3000);
	assert_null(jx_path(s2, "nvidiaDRA"));
	assert_string_equal(cond(s2, "HostIMEXOff", c, sizeof(c)), "");
	assert_int_equal(json_array_size(jx_path(s2, "conditions")), 7);
	assert_string_equal(cond(s2, "Ready", c, sizeof(c)), "True AllReady");
	json_decref(s2);
	json_decref(s);

	/* Not known yet, with spec.imex: not applied until it is. */
	fixture_free(f);
	f = fixture_new(",\"imex\":{\"domain\":\"d\",\"peers\":[\"10.0.0.3\"]}");
	agent_nvidia_judge(NULL, false, "forbidden", &f->spec, &f->rep.nvidia);
	s = agent_status_build(&f->rep, NULL, T0);
	assert_string_equal(cond(s, "IMEXReady", c, sizeof(c)), "False NVIDIAUnknown");
	assert_non_null(strstr(cond_message(s, "IMEXReady"), "(forbidden)"));
	assert_null(jx_path(s, "nvidiaDRA"));
	assert_string_equal(cond(s, "HostIMEXOff", c, sizeof(c)), "");
	json_decref(s);
	json_decref(sl);
	fixture_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_spec_parse_full),
	        cmocka_unit_test(test_agent_spec_parse_channel_allocation_mode),
	        cmocka_unit_test(test_agent_spec_parse_bad_imex_keeps_driver),
	        cmocka_unit_test(test_agent_spec_parse_refused_whole),
	        cmocka_unit_test(test_agent_status_build_healthy),
	        cmocka_unit_test(test_agent_status_build_health_from_mask),
	        cmocka_unit_test(test_agent_status_build_vera_rubin_shape),
	        cmocka_unit_test(test_agent_status_build_stable_and_transitions),
	        cmocka_unit_test(test_agent_status_differs_ignores_heartbeat),
	        cmocka_unit_test(test_agent_status_build_imex_faults),
	        cmocka_unit_test(test_agent_status_build_driver_change),
	        cmocka_unit_test(test_agent_status_build_driver_retrying),
	        cmocka_unit_test(test_agent_drv_tally_in_a_row),
	        cmocka_unit_test(test_agent_drv_hold_spaces_retries),
	        cmocka_unit_test(test_agent_spec_parse_validation),
	        cmocka_unit_test(test_agent_status_build_validation),
	        cmocka_unit_test(test_agent_status_build_kubelet_plugin),
	        cmocka_unit_test(test_agent_nvidia_judge),
	        cmocka_unit_test(test_agent_status_build_nvidia_managed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
