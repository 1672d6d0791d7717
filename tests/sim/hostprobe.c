// SPDX-License-Identifier: Apache-2.0
// hostprobe: drives the agent's host layer against one simulated tray and
// prints what it returns as JSON, one object per line, so shell tests can
// check the real code paths without an API server.
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "nvl72/agent.h"
#include "nvl72/host.h"
#include "nvl72/base.h"

struct probe {
	struct host h;
	char root[1024], nvml[1024], tools[1024];
	char bin[6][1100];
	const char *installer[3];
};

static int usage(void)
{
	fprintf(stderr, "usage: hostprobe [--root HOSTROOT] [--nvml LIB] [--tools DIR] "
	                "[--timeout-ms N] CMD\n"
	                "  gpus | observe | status | channels N | unit NAME\n"
	                "  unit NAME running|stopped|masked allow|deny\n"
	                "  imex-apply process|host[-by-name] DOMAIN BIND_IP PORT CMD_PORT PEER...\n"
	                "  imex-status | imex-stop process|host\n"
	                "  driver-step TARGET | driver-change TARGET\n");
	return 2;
}

static void emit(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);

	if (s != NULL) {
		printf("%s\n", s);
		fflush(stdout);
		free(s);
	}
	json_decref(o);
}

static json_t *gpu_json(const struct host_gpu *g)
{
	char health[256];

	json_t *o;

	host_health_describe(&g->health, health, sizeof(health));
	o = json_pack("{s:i,s:s,s:s,s:i,s:s,s:i,s:i,s:s,s:s,s:i,s:i,s:s,s:i,s:i}", "index",
	              (int)g->index, "uuid", g->uuid, "state",
	              host_fabric_state_name(g->fabric_state), "status", g->fabric_status,
	              "cluster", g->has_cluster ? g->cluster_uuid : "", "clique", (int)g->clique_id,
	              "healthMask", (int)g->health_mask, "summary",
	              host_health_summary_name(g->health_summary), "health", health, "tray",
	              (int)g->tray_index, "slot", (int)g->slot, "chassis", g->chassis_serial,
	              "module", (int)g->module_id, "nvmlError", g->nvml_error);
	json_object_set_new(o, "healthSource",
	                    json_string(host_health_source_name(g->health_source)));
	json_object_set_new(o, "vbios", json_string(g->vbios));
	json_object_set_new(o, "pci", json_string(g->pci_bus_id));
	json_object_set_new(o, "part", json_string(g->board_part));
	json_object_set_new(o, "serial", json_string(g->serial));
	return o;
}

static int cmd_gpus(struct probe *p)
{
	struct host_gpu gpus[HOST_GPU_MAX];
	struct host_driver_info drv;
	char clique[HOST_CLIQUE_LEN] = "", why[256] = "";
	bool has = false;
	size_t n = 0;
	enum nv_err rc;
	json_t *arr = json_array(), *o;

	rc = host_driver_read(&p->h, &drv);
	o = json_pack("{s:b,s:s,s:b,s:s,s:s}", "loaded", drv.loaded, "version", drv.version, "open",
	              drv.open_module, "nvml", drv.nvml_driver, "nvmlVersion", drv.nvml_version);
	if (rc == NV_OK)
		rc = host_gpus_read(&p->h, gpus, HOST_GPU_MAX, &n);
	for (size_t i = 0; rc == NV_OK && i < n; i++)
		json_array_append_new(arr, gpu_json(&gpus[i]));
	if (rc == NV_OK) {
		rc = host_tray_clique(gpus, n, &has, clique, why, sizeof(why));
		json_object_set_new(o, "cliqueError",
		                    json_string(rc == NV_OK ? "" : nv_err_name(rc)));
		rc = NV_OK;
	} else {
		snprintf(why, sizeof(why), "%s", p->h.err);
	}
	json_object_set_new(o, "gpus", arr);
	json_object_set_new(o, "fabricState",
	                    json_string(host_fabric_state_name(host_tray_fabric_state(gpus, n))));
	json_object_set_new(o, "clique", json_string(has ? clique : ""));
	json_object_set_new(o, "why", json_string(why));
	json_object_set_new(o, "error", json_string(rc == NV_OK ? "" : nv_err_name(rc)));
	emit(o);
	return rc == NV_OK ? 0 : 1;
}

static int cmd_imex_apply(struct probe *p, int argc, char **argv)
{
	struct host_imex_cfg *c = xcalloc(1, sizeof(*c));
	struct host_imex_apply r = {0};
	enum nv_err rc = NV_E_INVAL;
	int64_t port, cport;

	if (argc < 6 || parse_i64(argv[3], 1, 65535, &port) != NV_OK ||
	    parse_i64(argv[4], 1, 65535, &cport) != NV_OK)
		goto out;
	c->mode = strncmp(argv[0], "host", 4) == 0 ? HOST_IMEX_HOST : HOST_IMEX_PROCESS;
	c->by_name = strstr(argv[0], "-by-name") != NULL;
	str_copy(c->domain, sizeof(c->domain), argv[1]);
	str_copy(c->bind_ip, sizeof(c->bind_ip), argv[2]);
	c->server_port = (unsigned)port;
	c->cmd_port = (unsigned)cport;
	c->grace_s = -1;
	for (int i = 5; i < argc && c->n_peers < HOST_IMEX_NODES_MAX; i++)
		str_copy(c->peers[c->n_peers++], HOST_HOSTNAME_LEN, argv[i]);
	rc = host_imex_apply(&p->h, c, &r);
out:
	emit(json_pack("{s:s,s:b,s:b,s:b,s:I,s:s,s:s,s:i,s:s}", "error",
	               rc == NV_OK ? "" : nv_err_name(rc), "changed", r.changed, "restarted",
	               r.restarted, "signalled", r.signalled, "retryMs", (json_int_t)r.retry_ms,
	               "hash", r.hash, "nodesHash", r.nodes_hash, "pid", (int)r.pid, "why",
	               rc == NV_OK ? "" : p->h.err));
	free(c);
	return rc == NV_OK ? 0 : 1;
}

static json_t *nodes_json(const struct host_imex_domain_status *d)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < d->n_nodes; i++) {
		const struct host_imex_node *nd = &d->nodes[i];
		char row[HOST_IMEX_NODES_MAX + 1];
		for (size_t k = 0; k < nd->n_conn; k++)
			row[k] = host_imex_conn_name(nd->conn[k])[0];
		row[nd->n_conn] = '\0';
		json_array_append_new(arr,
		                      json_pack("{s:i,s:s,s:s,s:s}", "index", (int)nd->index,
		                                "host", nd->host, "status",
		                                host_imex_daemon_name(nd->status), "row", row));
	}
	return arr;
}

static int cmd_imex_status(struct probe *p, const char *self)
{
	struct host_imex_status *st = xcalloc(1, sizeof(*st));
	unsigned ready = 0, conn = 0;
	enum nv_err rc;
	int64_t t0 = time_mono_ms();

	rc = host_imex_status(&p->h, st);
	if (st->nodes_ok)
		host_imex_domain_count(&st->dom, self, &ready, &conn);
	emit(json_pack("{s:s,s:s,s:s,s:b,s:i,s:i,s:s,s:o,s:i}", "error",
	               rc == NV_OK ? "" : nv_err_name(rc), "daemon",
	               host_imex_daemon_name(st->daemon), "domain",
	               host_imex_domain_name(st->dom.domain), "nodesOk", st->nodes_ok, "peersReady",
	               (int)ready, "peersConnected", (int)conn, "err", st->err, "nodes",
	               nodes_json(&st->dom), "ms", (int)(time_mono_ms() - t0)));
	free(st);
	return rc == NV_OK ? 0 : 1;
}

static const char *err_name(enum nv_err rc)
{
	return rc == NV_OK ? "" : nv_err_name(rc);
}

static int cmd_observe(struct probe *p)
{
	struct host_obs *o = xcalloc(1, sizeof(*o));
	enum nv_err rc = host_observe(&p->h, HOST_IMEX_PROCESS, o);

	emit(json_pack("{s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "error",
	               err_name(rc), "driverErr", err_name(o->driver_part.err), "driverWhy",
	               o->driver_part.why, "channels", (int)o->imex_channel_count, "fabric",
	               host_fabric_state_name(o->fabric), "health",
	               host_health_summary_name(o->health), "clique", o->clique, "cliqueErr",
	               err_name(o->clique_part.err), "cliqueWhy", o->clique_part.why, "gpusErr",
	               err_name(o->gpus_part.err), "fmErr", err_name(o->fm_part.err), "fmWhy",
	               o->fm_part.why, "imexErr", err_name(o->imex_part.err), "daemon",
	               host_imex_daemon_name(o->imex.daemon), "version", o->driver.version,
	               "domain", host_imex_domain_name(o->imex.dom.domain)));
	free(o);
	return rc == NV_OK ? 0 : 1;
}

/* The ComputeTray status the agent would write for this host, with a
 * spec that asks for nothing (no driver target, no IMEX): what a tray
 * reports before the operator gives it work. */
static int cmd_status(struct probe *p)
{
	struct host_obs *o = xcalloc(1, sizeof(*o));
	struct host_driver_params params = {0};
	struct agent_spec spec;
	struct agent_report rep;
	json_t *st;

	memset(&spec, 0, sizeof(spec));
	memset(&rep, 0, sizeof(rep));
	(void)host_observe(&p->h, HOST_IMEX_OFF, o);
	if (o->driver.loaded && host_params_read(&p->h, &params) != NV_OK)
		params.n = 0;
	if (host_driver_ondisk(&p->h, rep.ondisk, sizeof(rep.ondisk)) != NV_OK)
		rep.ondisk[0] = '\0';
	str_copy(spec.maint_state, sizeof(spec.maint_state), "None");
	rep.spec = &spec;
	rep.spec_error = "";
	rep.node_ip = "";
	rep.obs = o;
	rep.params = &params;
	rep.lease = "";
	st = agent_status_build(&rep, NULL, time_wall_ms());
	emit(st);
	free(o);
	return 0;
}

static int cmd_unit(struct probe *p, int argc, char **argv)
{
	static const char *const wants[] = {"running", "stopped", "masked"};
	struct host_unit_state us = {0};
	bool changed = false;
	enum nv_err rc;
	size_t w;

	if (argc == 1) {
		rc = host_unit_query(&p->h, argv[0], &us);
	} else {
		if (argc != 3)
			return usage();
		for (w = 0; w < ARRAY_LEN(wants) && strcmp(wants[w], argv[1]) != 0; w++)
			;
		if (w == ARRAY_LEN(wants))
			return usage();
		rc = host_unit_reconcile(&p->h, argv[0], (enum host_unit_want)w,
		                         strcmp(argv[2], "allow") == 0, &changed);
		if (rc == NV_OK || rc == NV_E_STATE)
			(void)host_unit_query(&p->h, argv[0], &us);
	}
	emit(json_pack("{s:s,s:i,s:b,s:b,s:b,s:s}", "error", rc == NV_OK ? "" : nv_err_name(rc),
	               "active", (int)us.active, "enabled", us.enabled, "masked", us.masked,
	               "changed", changed, "why", rc == NV_OK ? "" : p->h.err));
	return rc == NV_OK ? 0 : 1;
}

static void step_emit(enum nv_err rc, const struct host_drv_step *s)
{
	emit(json_pack("{s:s,s:s,s:b,s:s,s:s,s:s}", "error", rc == NV_OK ? "" : nv_err_name(rc),
	               "phase", host_drv_phase_name(s->phase), "finished", s->finished, "loaded",
	               s->loaded, "ondisk", s->ondisk, "detail", s->detail));
}

static int cmd_driver(struct probe *p, const char *target, bool loop)
{
	struct host_drv_step s;
	enum nv_err rc;
	int64_t deadline = time_mono_ms() + 120000;

	for (;;) {
		rc = host_driver_step(&p->h, target, HOST_IMEX_PROCESS, &s);
		step_emit(rc, &s);
		if (!loop || s.finished || rc != NV_OK || time_mono_ms() > deadline)
			break;
		if (s.phase == HOST_DRV_INSTALLER_RUNNING)
			time_sleep_ms(100);
	}
	return rc == NV_OK && s.phase == HOST_DRV_DONE ? 0 : 1;
}

static int cmd_channels(struct probe *p, const char *count)
{
	unsigned created = 0;
	int64_t n;
	enum nv_err rc = parse_i64(count, 0, 1 << 20, &n);

	if (rc == NV_OK)
		rc = host_channels_ensure(&p->h, (unsigned)n, &created);
	emit(json_pack("{s:s,s:i,s:s}", "error", rc == NV_OK ? "" : nv_err_name(rc), "created",
	               (int)created, "why", rc == NV_OK ? "" : p->h.err));
	return rc == NV_OK ? 0 : 1;
}

static void probe_tools(struct probe *p)
{
	static const char *const names[] = {"systemctl",       "modprobe",
	                                    "modinfo",         "nvidia-imex",
	                                    "nvidia-imex-ctl", "nvl72-sim-installer"};

	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		snprintf(p->bin[i], sizeof(p->bin[i]), "%s/%s", p->tools, names[i]);
	p->installer[0] = p->bin[5];
	p->installer[1] = "{version}";
	p->installer[2] = NULL;
}

static int dispatch(struct probe *p, int argc, char **argv)
{
	const char *c = argv[0];

	if (strcmp(c, "gpus") == 0)
		return cmd_gpus(p);
	if (strcmp(c, "observe") == 0)
		return cmd_observe(p);
	if (strcmp(c, "status") == 0)
		return cmd_status(p);
	if (strcmp(c, "imex-apply") == 0 && argc >= 2)
		return cmd_imex_apply(p, argc - 1, argv + 1);
	if (strcmp(c, "imex-status") == 0)
		return cmd_imex_status(p, argc > 1 ? argv[1] : NULL);
	if (strcmp(c, "imex-stop") == 0 && argc == 2) {
		enum nv_err rc = host_imex_stop(
		        &p->h, strcmp(argv[1], "host") == 0 ? HOST_IMEX_HOST : HOST_IMEX_PROCESS);
		emit(json_pack("{s:s}", "error", rc == NV_OK ? "" : nv_err_name(rc)));
		return rc == NV_OK ? 0 : 1;
	}
	if (strcmp(c, "channels") == 0 && argc == 2)
		return cmd_channels(p, argv[1]);
	if (strcmp(c, "unit") == 0 && argc >= 2)
		return cmd_unit(p, argc - 1, argv + 1);
	if ((strcmp(c, "driver-step") == 0 || strcmp(c, "driver-change") == 0) && argc == 2)
		return cmd_driver(p, argv[1], c[7] == 'c');
	return usage();
}

int main(int argc, char **argv)
{
	static struct probe p;
	struct host_cfg cfg = {0};
	const char *sim = getenv("NVL72_SIM_ROOT");
	int i, rc;

	snprintf(p.root, sizeof(p.root), "%s/host", sim ? sim : ".");
	snprintf(p.nvml, sizeof(p.nvml), "build/sim/lib/libnvidia-ml.so.1");
	snprintf(p.tools, sizeof(p.tools), "build/sim/bin");
	for (i = 1; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (strcmp(argv[i], "--root") == 0)
			snprintf(p.root, sizeof(p.root), "%s", argv[i + 1]);
		else if (strcmp(argv[i], "--nvml") == 0)
			snprintf(p.nvml, sizeof(p.nvml), "%s", argv[i + 1]);
		else if (strcmp(argv[i], "--tools") == 0)
			snprintf(p.tools, sizeof(p.tools), "%s", argv[i + 1]);
		else if (strcmp(argv[i], "--timeout-ms") != 0 ||
		         parse_i64(argv[i + 1], 1, 600000, &cfg.tool_timeout_ms) != NV_OK)
			return usage();
	}
	if (i >= argc)
		return usage();
	probe_tools(&p);
	cfg.host_root = p.root;
	cfg.nvml_path = p.nvml;
	cfg.systemctl = p.bin[0];
	cfg.modprobe = p.bin[1];
	cfg.modinfo = p.bin[2];
	cfg.imex_bin = p.bin[3];
	cfg.imex_ctl = p.bin[4];
	cfg.installer = p.installer;
	host_init(&p.h, &cfg, NULL);
	rc = dispatch(&p, argc - i, argv + i);
	host_clear(&p.h);
	return rc;
}
