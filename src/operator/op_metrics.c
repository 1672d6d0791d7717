// SPDX-License-Identifier: Apache-2.0
// Domain metrics of docs/metrics.md for racks, trays, GPUs, IMEX,
// partitions, ComputeDomains and upgrades. They are written from the
// informer caches into each scrape's response, by the leader only (a
// standby exports none): nothing is kept between scrapes, they cost no API
// call, and a deleted object's series vanish with it. The trays are read
// one at a time, so a scrape holds one tray's tree and the response.
#include <stdio.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/operator_part.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"
#include "op_int.h"

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *const MAINT_STATES[] = {"None", "Cordoned", "Draining", "Drained", "Upgrading"};

/* ---- the families written at each scrape ---- */

enum dfam {
	F_RACK_INFO,
	F_RACK_TRAYS,
	F_RACK_TRAYS_READY,
	F_RACK_TRAYS_UNAVAILABLE,
	F_RACK_GPUS_HEALTHY,
	F_RACK_MIN_HEALTHY,
	F_RACK_THRESHOLD,
	F_RACK_DEGRADED,
	F_RACK_FABRIC_STATE,
	F_VERSION_SKEW,
	F_TRAY_READY,
	F_TRAY_HEARTBEAT,
	F_TRAY_CLIQUE,
	F_TRAY_DRIVER,
	F_TRAY_MAINTENANCE,
	F_GPU_STATE,
	F_GPU_STATUS_OK,
	F_GPU_DEGRADED,
	F_GPU_MASK,
	F_GPU_SUMMARY,
	F_IMEX_DAEMON,
	F_IMEX_DOMAIN,
	F_IMEX_CONNECTED,
	F_IMEX_PEERS,
	F_IMEX_CONFIG,
	F_UPGRADE_INFO,
	F_UPGRADE_PHASE,
	F_UPGRADE_PHASE_START,
	F_UPGRADE_WAVE,
	F_UPGRADE_WAVES,
	F_UPGRADE_APPROVALS_PENDING,
	F_UPGRADE_GATE_PASSED,
	F_UPGRADE_GATE_BUSBW,
	F_UPGRADE_GATE_FLOOR,
	F_DRAIN_WAIT,
	F_DRAIN_DEADLINE,
	F_PARTITION_PHASE,
	F_DOMAIN_READY,
	F_DOMAIN_NODES,
	F_COUNT
};

static const char *const LR[] = {"rack", NULL};
static const char *const LT[] = {"rack", "tray", "node", NULL};
static const char *const LG[] = {"rack", "tray", "node", "gpu", "uuid", NULL};
static const char *const LI[] = {"rack", "tray", "node", "domain", NULL};
static const char *const LU[] = {"upgrade", "rack", NULL};
static const char *const LUW[] = {"upgrade", "rack", "wave", NULL};
static const char *const LD[] = {"rack", "tray", "node", "mode", NULL};
static const char *const LCD[] = {"computedomain_namespace", "computedomain", "rack", NULL};
static const char *const L_RACK_INFO[] = {"rack",  "platform",      "matrix",
                                          "stack", "desired_stack", NULL};
static const char *const L_SKEW[] = {"rack", "component", NULL};
static const char *const L_CLIQUE[] = {"rack",         "tray",      "node", "partition",
                                       "cluster_uuid", "clique_id", NULL};
static const char *const L_DRIVER[] = {"rack",    "tray", "node", "version", "desired_version",
                                       "flavour", NULL};
static const char *const L_MAINT[] = {"rack", "tray", "node", "state", NULL};
static const char *const L_IMEX_CONFIG[] = {"rack", "tray", "node", "domain", "config_hash", NULL};
static const char *const L_UPGRADE_INFO[] = {"upgrade",    "rack",         "class",
                                             "from_stack", "target_stack", NULL};
static const char *const L_UPGRADE_PHASE[] = {"upgrade", "rack", "phase", NULL};
static const char *const L_PART_PHASE[] = {"rack", "partition", "phase", NULL};

/* Bounded by the cluster, not by outside input: 277 racks have 19,944
 * GPUs, so the per-GPU families take the hard maximum. */
#define DF(id, name, help, labels)                                                                 \
	[id] = {name, help, METRICS_GAUGE, labels, NULL, 0, METRICS_SERIES_HARD_MAX}

static const struct metrics_desc DFAMS[F_COUNT] = {
        DF(F_RACK_INFO, "nvl72_rack_info",
           "One per Rack: platform, matrix, observed and desired stack.", L_RACK_INFO),
        DF(F_RACK_TRAYS, "nvl72_rack_trays", "Compute trays in the rack's inventory.", LR),
        DF(F_RACK_TRAYS_READY, "nvl72_rack_trays_ready", "Ready compute trays.", LR),
        DF(F_RACK_TRAYS_UNAVAILABLE, "nvl72_rack_trays_unavailable", "Unavailable compute trays.",
           LR),
        DF(F_RACK_GPUS_HEALTHY, "nvl72_rack_gpus_healthy",
           "GPUs with fabric Completed and a healthy summary.", LR),
        DF(F_RACK_MIN_HEALTHY, "nvl72_rack_min_healthy_trays", "spec.policy.minHealthyTrays.", LR),
        DF(F_RACK_THRESHOLD, "nvl72_rack_degraded_threshold", "spec.policy.degradedThreshold.", LR),
        DF(F_RACK_DEGRADED, "nvl72_rack_degraded", "1 when the rack's Degraded condition is True.",
           LR),
        DF(F_RACK_FABRIC_STATE, "nvl72_rack_fabric_state",
           "0 Unknown, 1 Healthy, 2 Degraded, 3 Unhealthy.", LR),
        DF(F_VERSION_SKEW, "nvl72_version_skew",
           "Distinct versions of a component among the rack's trays.", L_SKEW),
        DF(F_TRAY_READY, "nvl72_tray_ready", "1 when the tray is Ready with a fresh heartbeat.",
           LT),
        DF(F_TRAY_HEARTBEAT, "nvl72_tray_heartbeat_timestamp_seconds",
           "The agent's last sign of life.", LT),
        DF(F_TRAY_CLIQUE, "nvl72_tray_clique_info", "The tray's fabric clique.", L_CLIQUE),
        DF(F_TRAY_DRIVER, "nvl72_tray_driver_info", "Loaded and desired driver.", L_DRIVER),
        DF(F_TRAY_MAINTENANCE, "nvl72_tray_maintenance_state",
           "spec.maintenance.state as a state set.", L_MAINT),
        DF(F_GPU_STATE, "nvl72_gpu_fabric_state",
           "0 NotSupported, 1 NotStarted, 2 InProgress, 3 Completed, 4 unknown.", LG),
        DF(F_GPU_STATUS_OK, "nvl72_gpu_fabric_status_ok", "1 when Completed with status Success.",
           LG),
        DF(F_GPU_DEGRADED, "nvl72_gpu_fabric_health_degraded",
           "1 when the fabric health is degraded.", LG),
        DF(F_GPU_MASK, "nvl72_gpu_fabric_health_mask", "Raw fabric health mask.", LG),
        DF(F_GPU_SUMMARY, "nvl72_gpu_fabric_health_summary",
           "0 NotSupported, 1 Healthy, 2 Unhealthy, 3 LimitedCapacity.", LG),
        DF(F_IMEX_DAEMON, "nvl72_imex_daemon_state", "IMEX daemon state in DCGM's numbering.", LI),
        DF(F_IMEX_DOMAIN, "nvl72_imex_domain_state", "0 Unknown, 1 Up, 2 Degraded, 3 Down.", LI),
        DF(F_IMEX_CONNECTED, "nvl72_imex_peers_connected", "IMEX peers connected.", LI),
        DF(F_IMEX_PEERS, "nvl72_imex_peers", "IMEX peers in the domain.", LI),
        DF(F_IMEX_CONFIG, "nvl72_imex_config_info", "Hash of the IMEX peer list.", L_IMEX_CONFIG),
        DF(F_UPGRADE_INFO, "nvl72_upgrade_info", "One per RackUpgrade acting on one rack.",
           L_UPGRADE_INFO),
        DF(F_UPGRADE_PHASE, "nvl72_upgrade_phase",
           "status.phase of each RackUpgrade as a state set.", L_UPGRADE_PHASE),
        DF(F_UPGRADE_PHASE_START, "nvl72_upgrade_phase_start_timestamp_seconds",
           "status.phaseTime as Unix seconds.", LU),
        DF(F_UPGRADE_WAVE, "nvl72_upgrade_wave", "Wave in progress or last finished (0 = canary).",
           LU),
        DF(F_UPGRADE_WAVES, "nvl72_upgrade_waves", "Waves planned so far.", LU),
        DF(F_UPGRADE_APPROVALS_PENDING, "nvl72_upgrade_approvals_pending",
           "Required layers without a counted approval.", LU),
        DF(F_UPGRADE_GATE_PASSED, "nvl72_upgrade_gate_passed",
           "Verdict of the wave's Validate step.", LUW),
        DF(F_UPGRADE_GATE_BUSBW, "nvl72_upgrade_gate_bus_bandwidth_gbps",
           "Bus bandwidth measured by the wave's Validate step.", LUW),
        DF(F_UPGRADE_GATE_FLOOR, "nvl72_upgrade_gate_floor_gbps",
           "Pass mark of the gate: floor x (100 - tolerance) / 100.", LUW),
        DF(F_DRAIN_WAIT, "nvl72_drain_wait_seconds",
           "Seconds since the drain of the tray began, while it drains.", LD),
        DF(F_DRAIN_DEADLINE, "nvl72_drain_deadline_seconds", "The drain's total deadline.", LD),
        DF(F_PARTITION_PHASE, "nvl72_partition_phase",
           "status.phase of each RackPartition as a state set.", L_PART_PHASE),
        DF(F_DOMAIN_READY, "nvl72_computedomain_ready",
           "1 when the ComputeDomain's status is Ready.", LCD),
        DF(F_DOMAIN_NODES, "nvl72_computedomain_nodes",
           "Entries in the ComputeDomain's status.nodes.", LCD),
};

/* One scrape's writing: the sink and the families' handles on it. */
struct dw {
	struct op *op;
	struct metrics_sink *s;
	int id[F_COUNT];
	int64_t now;
	json_t *parts; /* the RackPartitions, for the trays' partition label */
};

static void set(struct dw *w, enum dfam f, const char *const *labels, double v)
{
	(void)metrics_sink_value(w->s, w->id[f], labels, v);
}

static void set_state(struct dw *w, enum dfam f, const char *const *labels,
                      const char *const *states, size_t n, const char *cur)
{
	(void)metrics_sink_state(w->s, w->id[f], labels, states, n, cur);
}

static double enum_index(const char *v, const char *const *names, size_t n, double def)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return (double)i;
	return def;
}

static void rack_series(struct dw *w, const json_t *r)
{
	const char *name = kube_obj_name(r);
	const char *rl[] = {name};
	const char *info[] = {
	        name, jx_str_or(r, "spec.platform", ""), jx_str_or(r, "spec.matrix.name", ""),
	        jx_str_or(r, "status.stack", ""), jx_str_or(r, "spec.matrix.stack", "")};
	static const char *const fabric[] = {"Unknown", "Healthy", "Degraded", "Unhealthy"};
	const json_t *cap = jx_path(r, "status.capacity"), *s;
	size_t i;

	set(w, F_RACK_INFO, info, 1);
	if (json_is_object(cap)) {
		set(w, F_RACK_TRAYS, rl, (double)json_integer_value(json_object_get(cap, "trays")));
		set(w, F_RACK_TRAYS_READY, rl,
		    (double)json_integer_value(json_object_get(cap, "readyTrays")));
		set(w, F_RACK_TRAYS_UNAVAILABLE, rl,
		    (double)json_integer_value(json_object_get(cap, "unavailableTrays")));
		set(w, F_RACK_GPUS_HEALTHY, rl,
		    (double)json_integer_value(json_object_get(cap, "healthyGPUs")));
	}
	set(w, F_RACK_MIN_HEALTHY, rl,
	    (double)json_integer_value(jx_path(r, "spec.policy.minHealthyTrays")));
	set(w, F_RACK_THRESHOLD, rl,
	    (double)json_integer_value(jx_path(r, "spec.policy.degradedThreshold")));
	if (kube_condition_find(r, "Degraded"))
		set(w, F_RACK_DEGRADED, rl, kube_condition_is_true(r, "Degraded"));
	set(w, F_RACK_FABRIC_STATE, rl,
	    enum_index(jx_str_or(r, "status.fabric.state", "Unknown"), fabric, 4, 0));
	/* One series per observed component, 1 when consistent. */
	static const char *const comps[] = {"driver", "imex", "gpuFirmware"};
	for (size_t c = 0; json_is_object(jx_path(r, "status")) && c < 3; c++) {
		double n = 1;
		json_array_foreach(jx_path(r, "status.versionSkew"), i, s)
			if (strcmp(jx_str_or(s, "component", ""), comps[c]) == 0)
				n = (double)json_array_size(json_object_get(s, "versions"));
		const char *sl[] = {name, comps[c]};
		set(w, F_VERSION_SKEW, sl, n);
	}
}

static bool rack_visit(void *ud, json_t *r)
{
	rack_series(ud, r);
	return true;
}

static void gpu_series(struct dw *w, const char *rack, const char *tray, const char *node,
                       const json_t *g)
{
	static const char *const states[] = {"NotSupported", "NotStarted", "InProgress",
	                                     "Completed"};
	static const char *const sums[] = {"NotSupported", "Healthy", "Unhealthy",
	                                   "LimitedCapacity"};
	char idx[16];
	const char *st = jx_str_or(g, "fabric.state", "");
	const char *sum = jx_str_or(g, "fabric.healthSummary", "");
	const char *fs = jx_str_or(g, "fabric.status", "");
	const char *incorrect = jx_str_or(g, "fabric.health.incorrectConfiguration", "None");
	bool ok = strcmp(st, "Completed") == 0 && strcmp(fs, "Success") == 0;
	bool deg = strcmp(sum, "Unhealthy") == 0 || strcmp(sum, "LimitedCapacity") == 0 ||
	           json_is_true(jx_path(g, "fabric.health.degradedBandwidth")) ||
	           json_is_true(jx_path(g, "fabric.health.routeRecoveryInProgress")) ||
	           json_is_true(jx_path(g, "fabric.health.routeUnhealthy")) ||
	           json_is_true(jx_path(g, "fabric.health.accessTimeoutRecoveryInProgress")) ||
	           (strcmp(incorrect, "None") != 0 && strcmp(incorrect, "NotSupported") != 0);
	snprintf(idx, sizeof(idx), "%lld",
	         (long long)json_integer_value(json_object_get(g, "index")));
	const char *gl[] = {rack, tray, node, idx, jx_str_or(g, "uuid", "")};

	set(w, F_GPU_STATE, gl, st[0] ? enum_index(st, states, 4, 4) : 4);
	set(w, F_GPU_STATUS_OK, gl, ok);
	set(w, F_GPU_DEGRADED, gl, deg);
	if (json_is_integer(jx_path(g, "fabric.healthMask")))
		set(w, F_GPU_MASK, gl, (double)json_integer_value(jx_path(g, "fabric.healthMask")));
	if (sum[0])
		set(w, F_GPU_SUMMARY, gl, enum_index(sum, sums, 4, 0));
}

static void imex_series(struct dw *w, const char *rack, const char *tray, const char *node,
                        const json_t *t)
{
	static const char *const daemon[] = {"Initializing",    "StartingAuthServer",
	                                     "WaitingForPeers", "WaitingForRecovery",
	                                     "InitGPU",         "Ready",
	                                     "ShuttingDown",    "Unavailable"};
	static const char *const domain[] = {"Unknown", "Up", "Degraded", "Down"};
	const char *ds = jx_str_or(t, "status.imex.daemonState", "");
	const char *il[] = {rack, tray, node, jx_str_or(t, "spec.imex.domain", "")};
	double dv = strcmp(ds, "NotRunning") == 0 ? 7 : enum_index(ds, daemon, 8, -1);

	if (ds[0])
		set(w, F_IMEX_DAEMON, il, dv);
	set(w, F_IMEX_DOMAIN, il,
	    enum_index(jx_str_or(t, "status.imex.domainState", "Unknown"), domain, 4, 0));
	if (json_is_integer(jx_path(t, "status.imex.peersConnected")))
		set(w, F_IMEX_CONNECTED, il,
		    (double)json_integer_value(jx_path(t, "status.imex.peersConnected")));
	if (json_is_integer(jx_path(t, "status.imex.peersTotal")))
		set(w, F_IMEX_PEERS, il,
		    (double)json_integer_value(jx_path(t, "status.imex.peersTotal")));
	const char *cl[] = {rack, tray, node, il[3], jx_str_or(t, "status.imex.configHash", "")};
	if (cl[4][0])
		set(w, F_IMEX_CONFIG, cl, 1);
}

static bool tray_visit(void *ud, json_t *t)
{
	struct dw *w = ud;
	struct op *op = w->op;
	const char *rack = jx_str_or(t, "spec.rack", ""), *tray = kube_obj_name(t);
	const char *node = jx_str_or(t, "spec.node", "");
	const char *tl[] = {rack, tray, node};
	char part[64] = "";
	int64_t renew, hb;
	const json_t *p, *x, *g;
	size_t i, j;

	renew = op_lease_renew_ms(op, tray);
	hb = op_tray_heartbeat_ms(t, renew);
	bool fresh = hb > 0 && (op->cfg.heartbeat_timeout_ms == 0 ||
	                        w->now - hb <= op->cfg.heartbeat_timeout_ms);
	set(w, F_TRAY_READY, tl, fresh && kube_condition_is_true(t, "Ready"));
	if (hb > 0)
		set(w, F_TRAY_HEARTBEAT, tl, (double)hb / 1000.0);
	json_array_foreach(w->parts, i, p) {
		if (strcmp(jx_str_or(p, "spec.rack", ""), rack) != 0)
			continue;
		json_array_foreach(jx_path(p, "spec.trays"), j, x)
			if (json_integer_value(x) == json_integer_value(jx_path(t, "spec.index")))
				snprintf(part, sizeof(part), "%s", kube_obj_name(p));
	}
	const char *ql[] = {rack,
	                    tray,
	                    node,
	                    part,
	                    jx_str_or(t, "status.fabric.clusterUUID", ""),
	                    jx_str_or(t, "status.fabric.cliqueID", "")};
	set(w, F_TRAY_CLIQUE, ql, 1);
	const char *dl[] = {rack,
	                    tray,
	                    node,
	                    jx_str_or(t, "status.driver.version", ""),
	                    jx_str_or(t, "spec.driver.version", ""),
	                    jx_str_or(t, "status.driver.flavour", "")};
	set(w, F_TRAY_DRIVER, dl, 1);
	set_state(w, F_TRAY_MAINTENANCE, tl, MAINT_STATES, 5,
	          jx_str_or(t, "spec.maintenance.state", "None"));
	json_array_foreach(jx_path(t, "status.gpus"), i, g)
		gpu_series(w, rack, tray, node, g);
	if (json_is_object(jx_path(t, "spec.imex")))
		imex_series(w, rack, tray, node, t);
	return true;
}

static const char *const UPGRADE_PHASES[] = {
        "Proposed",   "Notice",      "AwaitingApproval", "Scheduled", "Canary",
        "Validating", "RollingOut",  "Completed",        "Halted",    "Paused",
        "Aborted",    "RollingBack", "RolledBack"};

static double time_s(const json_t *o, const char *path)
{
	int64_t ms = 0;
	if (time_parse_rfc3339(jx_str_or(o, path, ""), &ms) != NV_OK)
		return 0;
	return (double)ms / 1000.0;
}

static double dur_s(const json_t *o, const char *path)
{
	const char *d = jx_str_or(o, path, "");
	int64_t ms = 0;
	return d[0] && parse_duration_ms(d, &ms) == NV_OK ? (double)ms / 1000.0 : 0;
}

/* Gate series of each wave's last Validate step, and the drain in
 * progress. */
static void upgrade_steps(struct dw *w, const json_t *u, const char *name, const char *rack)
{
	json_t *r = kube_informer_get(w->op->racks, rack), *s, *t;
	const char *mode = jx_str_or(r, "spec.policy.drain.mode", "Evict");
	double deadline =
	        dur_s(r, "spec.policy.drain.evictionDeadline") +
	        (strcmp(mode, "Checkpoint") == 0 ? dur_s(r, "spec.policy.drain.checkpointDeadline")
	                                         : 0);
	size_t i, k;
	json_array_foreach(jx_path(u, "status.steps"), i, s) {
		char wave[16];
		const char *action = jx_str_or(s, "action", "");
		const json_t *ev = json_object_get(s, "evidence");
		snprintf(wave, sizeof(wave), "%lld",
		         (long long)json_integer_value(json_object_get(s, "wave")));
		const char *wl[] = {name, rack, wave};
		if (strcmp(action, "Validate") == 0 && json_is_object(ev)) {
			int64_t floor = json_integer_value(json_object_get(ev, "floorGBps"));
			int64_t tol = json_integer_value(json_object_get(ev, "tolerancePercent"));
			set(w, F_UPGRADE_GATE_PASSED, wl,
			    json_is_true(json_object_get(ev, "passed")));
			set(w, F_UPGRADE_GATE_BUSBW, wl,
			    (double)json_integer_value(json_object_get(ev, "busBandwidthGBps")));
			set(w, F_UPGRADE_GATE_FLOOR, wl, (double)(floor * (100 - tol)) / 100.0);
		}
		if (strcmp(action, "Drain") != 0 ||
		    strcmp(jx_str_or(s, "phase", ""), "Running") != 0)
			continue;
		double start = time_s(s, "startTime");
		json_array_foreach(json_object_get(s, "trays"), k, t) {
			char idx[8];
			const char *node = "";
			json_t *c;
			size_t j;
			snprintf(idx, sizeof(idx), "%lld", (long long)json_integer_value(t));
			json_array_foreach(jx_path(r, "spec.computeTrays"), j, c)
				if (json_integer_value(json_object_get(c, "index")) ==
				    json_integer_value(t))
					node = jx_str_or(c, "node", "");
			const char *dl[] = {rack, idx, node, mode};
			set(w, F_DRAIN_WAIT, dl, (double)w->now / 1000.0 - start);
			set(w, F_DRAIN_DEADLINE, dl, deadline);
		}
	}
	json_decref(r);
}

/* The upgrade families of docs/metrics.md, from one cached RackUpgrade. */
static bool upgrade_visit(void *ud, json_t *u)
{
	struct dw *w = ud;
	const char *name = kube_obj_name(u), *rack = jx_str_or(u, "spec.rack", "");
	const json_t *waves = jx_path(u, "status.waves"), *wv, *a;
	double cur = 0;
	int pending = 0;
	size_t k;

	if (rack[0] == '\0')
		return true; /* a selector upgrade: its children carry the series */
	const char *lv[] = {name, rack};
	const char *info[] = {name, rack, jx_str_or(u, "spec.class", "routine"),
	                      jx_str_or(u, "status.fromStack", ""),
	                      jx_str_or(u, "spec.target.stack", "")};
	set(w, F_UPGRADE_INFO, info, 1);
	set_state(w, F_UPGRADE_PHASE, lv, UPGRADE_PHASES,
	          sizeof(UPGRADE_PHASES) / sizeof(UPGRADE_PHASES[0]),
	          jx_str_or(u, "status.phase", "Proposed"));
	set(w, F_UPGRADE_PHASE_START, lv, time_s(u, "status.phaseTime"));
	json_array_foreach(waves, k, wv)
		if (strcmp(jx_str_or(wv, "phase", ""), "Pending") != 0)
			cur = (double)json_integer_value(json_object_get(wv, "index"));
	set(w, F_UPGRADE_WAVE, lv, cur);
	set(w, F_UPGRADE_WAVES, lv, (double)json_array_size(waves));
	json_array_foreach(jx_path(u, "status.requiredApprovals"), k, a) {
		bool got = false;
		const json_t *r;
		size_t j;
		json_array_foreach(jx_path(u, "status.approvals"), j, r)
			got |= json_equal(json_object_get(r, "layer"), a) &&
			       strcmp(jx_str_or(r, "decision", ""), "Approved") == 0;
		pending += !got;
	}
	set(w, F_UPGRADE_APPROVALS_PENDING, lv, pending);
	upgrade_steps(w, u, name, rack);
	return true;
}

/* RackPartitions (the list the trays' pass read) and ComputeDomains. */
static void partition_series(struct dw *w)
{
	const char *phases[8];
	const json_t *o;
	size_t i;
	for (unsigned k = 0; k < 8; k++)
		phases[k] = op_part_phase_name((enum api_partition_phase)k);
	json_array_foreach(w->parts, i, o) {
		const char *pl[] = {jx_str_or(o, "spec.rack", ""), kube_obj_name(o)};
		set_state(w, F_PARTITION_PHASE, pl, phases, 8,
		          jx_str_or(o, "status.phase", "Pending"));
	}
}

static bool domain_visit(void *ud, json_t *o)
{
	struct dw *w = ud;
	const char *dl[] = {kube_obj_namespace(o), kube_obj_name(o),
	                    jx_str_or(o, "status.rack", "")};
	set(w, F_DOMAIN_READY, dl, strcmp(jx_str_or(o, "status.status", ""), "Ready") == 0);
	set(w, F_DOMAIN_NODES, dl, (double)json_array_size(jx_path(o, "status.nodes")));
	return true;
}

/* The writer: every domain family, from the caches, into the scrape. */
static void write_domain(void *arg, struct metrics_sink *s)
{
	struct dw w = {.op = arg, .s = s};

	if (!op_is_leading(w.op))
		return;
	for (size_t f = 0; f < F_COUNT; f++)
		if (metrics_sink_family(s, &DFAMS[f], &w.id[f]) != NV_OK)
			w.id[f] = -1;
	w.now = time_wall_ms();
	w.parts = kube_informer_list(w.op->partitions);
	kube_informer_foreach(w.op->racks, rack_visit, &w);
	kube_informer_foreach(w.op->trays, tray_visit, &w);
	kube_informer_foreach(w.op->upgrades, upgrade_visit, &w);
	partition_series(&w);
	kube_informer_foreach(w.op->domains, domain_visit, &w);
	json_decref(w.parts);
	alloc_release_free();
}

/* client-go's rest_client_* series from each finished exchange. A watch
 * counts as a request; its life is no request latency, so it stays out of
 * the histogram. */
static void rest_observe(void *arg, const struct kube_exchange *ex)
{
	struct op *op = arg;
	const char *host = kube_client_host(op->c);
	char code[24];

	if (ex->code > 0)
		snprintf(code, sizeof(code), "%ld", ex->code);
	else
		snprintf(code, sizeof(code), "<error>");
	(void)metrics_counter_inc(op->std.rest_client_requests_total,
	                          (const char *[]){code, ex->method, host});
	if (!ex->watch)
		(void)metrics_histogram_observe(op->std.rest_client_request_duration_seconds,
		                                (const char *[]){ex->method, host}, ex->seconds);
}

/* The workqueue_* series of one controller's queue, labelled name and
 * controller alike as controller-runtime does. */
static void wq_added(void *arg)
{
	struct op_ctrl *c = arg;
	const char *l[] = {c->row->name, c->row->name};
	(void)metrics_counter_inc(c->op->std.workqueue_adds_total, l);
}

static void wq_retried(void *arg)
{
	struct op_ctrl *c = arg;
	const char *l[] = {c->row->name, c->row->name};
	(void)metrics_counter_inc(c->op->std.workqueue_retries_total, l);
}

static void wq_waited(void *arg, double s)
{
	struct op_ctrl *c = arg;
	const char *l[] = {c->row->name, c->row->name};
	(void)metrics_histogram_observe(c->op->std.workqueue_queue_duration_seconds, l, s);
}

static void wq_worked(void *arg, double s)
{
	struct op_ctrl *c = arg;
	const char *l[] = {c->row->name, c->row->name};
	(void)metrics_histogram_observe(c->op->std.workqueue_work_duration_seconds, l, s);
}

/* The gauges of every queue, read at the scrape. */
static void wq_gauges(struct op *op)
{
	for (size_t i = 0; i < op->nctrl; i++) {
		struct op_ctrl *c = &op->ctrl[i];
		const char *l[] = {c->row->name, c->row->name};
		double unfinished, longest;

		kube_workqueue_in_progress(c->q, &unfinished, &longest);
		(void)metrics_gauge_set(op->std.workqueue_depth, l,
		                        (double)kube_workqueue_len(c->q));
		(void)metrics_gauge_set(op->std.workqueue_unfinished_work_seconds, l, unfinished);
		(void)metrics_gauge_set(op->std.workqueue_longest_running_processor_seconds, l,
		                        longest);
	}
}

/* Counters kept by the transport, exported as what grew since the last
 * scrape; m->mu held. */
static void kube_counters(struct op *op, struct op_domain_metrics *m)
{
	struct kube_client_stats ks;
	const char *host[] = {kube_client_host(op->c)};

	kube_client_stats(op->c, &ks);
	(void)metrics_counter_add(m->kube_probes, host, (double)(ks.probes - m->probes_seen));
	(void)metrics_counter_add(m->kube_redials, host, (double)(ks.redials - m->redials_seen));
	m->probes_seen = ks.probes;
	m->redials_seen = ks.redials;
}

/* The shared parsed trays and Nodes (--parsed-cache-mib); m->mu held. */
static void parsed_cache(struct op *op, struct op_domain_metrics *m)
{
	struct kube_informer *inf[] = {op->trays, op->nodes};
	const char *kind[] = {"ComputeTray", "Node"};

	for (size_t i = 0; i < 2; i++) {
		struct kube_informer_stats st;
		if (inf[i] == NULL)
			continue;
		kube_informer_stats(inf[i], &st);
		(void)metrics_counter_add(m->parsed_reads, L(kind[i], "kept"),
		                          (double)(st.memo_hits - m->parsed_seen[i][0]));
		(void)metrics_counter_add(m->parsed_reads, L(kind[i], "parsed"),
		                          (double)(st.memo_misses - m->parsed_seen[i][1]));
		(void)metrics_gauge_set(m->parsed_bytes, L(kind[i]), (double)st.memo_bytes);
		m->parsed_seen[i][0] = st.memo_hits;
		m->parsed_seen[i][1] = st.memo_misses;
	}
}

static void collect(void *arg)
{
	struct op *op = arg;
	struct op_domain_metrics *m = &op->dm;

	wq_gauges(op);
	pthread_mutex_lock(&m->mu);
	kube_counters(op, m);
	parsed_cache(op, m);
	pthread_mutex_unlock(&m->mu);
}

void op_metrics_leading(struct op *op, bool leading)
{
	const char *ln[] = {op->cfg.leader_election_id};
	(void)metrics_gauge_set(op->std.leader_election_master_status, ln, leading);
}

enum nv_err op_metrics_register(struct op *op)
{
	struct op_domain_metrics *m = &op->dm;
	static const double step_buckets[] = {10,   30,   60,   120,  300,  600,
	                                      1200, 1800, 3600, 7200, 14400};
	struct metrics_desc hd = {.name = "nvl72_upgrade_step_duration_seconds",
	                          .help = "Duration of finished RackUpgrade steps, by action.",
	                          .type = METRICS_HISTOGRAM,
	                          .labels = L("action"),
	                          .buckets = step_buckets,
	                          .nbuckets = sizeof(step_buckets) / sizeof(step_buckets[0])};
	struct metrics_desc bi = {.name = "nvl72_build_info",
	                          .help = "Version of the running operator.",
	                          .type = METRICS_GAUGE,
	                          .labels = L("version")};
	struct metrics_desc kp = {
	        .name = "nvl72_kube_liveness_probes_total",
	        .help = "Probes sent on the apiserver connection after a silence.",
	        .type = METRICS_COUNTER,
	        .labels = L("host")};
	struct metrics_desc kr = {
	        .name = "nvl72_kube_redials_total",
	        .help = "Apiserver connections dropped for a probe left unanswered.",
	        .type = METRICS_COUNTER,
	        .labels = L("host")};
	struct metrics_desc pr = {
	        .name = "nvl72_parsed_cache_reads_total",
	        .help = "Shared reads of cached objects by the Rack, RackPartition and RackUpgrade "
	                "passes: served from a kept tree, or parsed from the cache's text.",
	        .type = METRICS_COUNTER,
	        .labels = L("kind", "result")};
	struct metrics_desc pb = {
	        .name = "nvl72_parsed_cache_bytes",
	        .help = "What the kept parsed trees count for against --parsed-cache-mib.",
	        .type = METRICS_GAUGE,
	        .labels = L("kind")};
	enum nv_err rc;

	pthread_mutex_init(&m->mu, NULL);
	if ((rc = metrics_family_register(op->reg, &bi, &m->build_info)) ||
	    (rc = metrics_family_register(op->reg, &hd, &op->upg_step_seconds)) ||
	    (rc = metrics_family_register(op->reg, &kp, &m->kube_probes)) ||
	    (rc = metrics_family_register(op->reg, &kr, &m->kube_redials)) ||
	    (rc = metrics_family_register(op->reg, &pr, &m->parsed_reads)) ||
	    (rc = metrics_family_register(op->reg, &pb, &m->parsed_bytes)))
		return rc;
	(void)metrics_gauge_set(m->build_info, L(NVL72_VERSION), 1);
	op_metrics_leading(op, false);
	kube_counters(op, m);
	kube_client_observe(op->c, rest_observe, op);
	for (size_t i = 0; i < op->nctrl; i++) {
		struct kube_workqueue_metrics wm = {.arg = &op->ctrl[i],
		                                    .added = wq_added,
		                                    .retried = wq_retried,
		                                    .waited = wq_waited,
		                                    .worked = wq_worked};
		kube_workqueue_set_metrics(op->ctrl[i].q, &wm);
	}
	wq_gauges(op);
	if ((rc = metrics_registry_add_collector(op->reg, collect, op)) != NV_OK)
		return rc;
	return metrics_registry_add_writer(op->reg, write_domain, op);
}
