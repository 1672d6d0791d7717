// SPDX-License-Identifier: Apache-2.0
// Domain metrics of docs/metrics.md for racks, trays, GPUs, IMEX,
// partitions, ComputeDomains and upgrades. They are
// rebuilt from the informer caches at each scrape, by the leader only (a
// standby exports none), so they cost no API call and a deleted object's
// series vanish with it.
#include <stdio.h>
#include <string.h>

#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/operator_part.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"
#include "op_int.h"

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *const MAINT_STATES[] = {"None", "Cordoned", "Draining", "Drained", "Upgrading"};

static enum nv_err reg(struct op *op, const char *name, const char *help, enum metrics_type t,
                       const char *const *labels, struct metrics_family **out)
{
	struct metrics_desc d = {
	        .name = name, .help = help, .type = t, .labels = labels, .max_series = 8192};
	return metrics_family_register(op->reg, &d, out);
}

static double enum_index(const char *v, const char *const *names, size_t n, double def)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return (double)i;
	return def;
}

static void rack_series(struct op_domain_metrics *m, const json_t *r)
{
	const char *name = kube_obj_name(r);
	const char *rl[] = {name};
	const char *info[] = {
	        name, jx_str_or(r, "spec.platform", ""), jx_str_or(r, "spec.matrix.name", ""),
	        jx_str_or(r, "status.stack", ""), jx_str_or(r, "spec.matrix.stack", "")};
	static const char *const fabric[] = {"Unknown", "Healthy", "Degraded", "Unhealthy"};
	const json_t *cap = jx_path(r, "status.capacity"), *s;
	size_t i;

	(void)metrics_gauge_set(m->rack_info, info, 1);
	if (json_is_object(cap)) {
		(void)metrics_gauge_set(m->rack_trays, rl,
		                        (double)json_integer_value(json_object_get(cap, "trays")));
		(void)metrics_gauge_set(
		        m->rack_trays_ready, rl,
		        (double)json_integer_value(json_object_get(cap, "readyTrays")));
		(void)metrics_gauge_set(
		        m->rack_trays_unavailable, rl,
		        (double)json_integer_value(json_object_get(cap, "unavailableTrays")));
		(void)metrics_gauge_set(
		        m->rack_gpus_healthy, rl,
		        (double)json_integer_value(json_object_get(cap, "healthyGPUs")));
	}
	(void)metrics_gauge_set(
	        m->rack_min_healthy, rl,
	        (double)json_integer_value(jx_path(r, "spec.policy.minHealthyTrays")));
	(void)metrics_gauge_set(
	        m->rack_threshold, rl,
	        (double)json_integer_value(jx_path(r, "spec.policy.degradedThreshold")));
	if (kube_condition_find(r, "Degraded"))
		(void)metrics_gauge_set(m->rack_degraded, rl,
		                        kube_condition_is_true(r, "Degraded"));
	(void)metrics_gauge_set(
	        m->rack_fabric_state, rl,
	        enum_index(jx_str_or(r, "status.fabric.state", "Unknown"), fabric, 4, 0));
	/* One series per observed component, 1 when consistent. */
	static const char *const comps[] = {"driver", "imex", "gpuFirmware"};
	for (size_t c = 0; json_is_object(jx_path(r, "status")) && c < 3; c++) {
		double n = 1;
		json_array_foreach(jx_path(r, "status.versionSkew"), i, s)
			if (strcmp(jx_str_or(s, "component", ""), comps[c]) == 0)
				n = (double)json_array_size(json_object_get(s, "versions"));
		const char *sl[] = {name, comps[c]};
		(void)metrics_gauge_set(m->version_skew, sl, n);
	}
}

static void gpu_series(struct op_domain_metrics *m, const char *rack, const char *tray,
                       const char *node, const json_t *g)
{
	static const char *const states[] = {"NotSupported", "NotStarted", "InProgress",
	                                     "Completed"};
	static const char *const sums[] = {"NotSupported", "Healthy", "Unhealthy",
	                                   "LimitedCapacity"};
	char idx[16];
	const char *st = jx_str_or(g, "fabric.state", "");
	const char *sum = jx_str_or(g, "fabric.healthSummary", "");
	const char *fs = jx_str_or(g, "fabric.status", "");
	bool ok = strcmp(st, "Completed") == 0 && strcmp(fs, "Success") == 0;
	bool deg = strcmp(sum, "Unhealthy") == 0 || strcmp(sum, "LimitedCapacity") == 0 ||
	           json_is_true(jx_path(g, "fabric.health.degradedBandwidth")) ||
	           json_is_true(jx_path(g, "fabric.health.routeRecoveryInProgress")) ||
	           json_is_true(jx_path(g, "fabric.health.routeUnhealthy")) ||
	           json_is_true(jx_path(g, "fabric.health.accessTimeoutRecoveryInProgress")) ||
	           (strcmp(jx_str_or(g, "fabric.health.incorrectConfiguration", "None"), "None") !=
	                    0 &&
	            strcmp(jx_str_or(g, "fabric.health.incorrectConfiguration", "None"),
	                   "NotSupported") != 0);
	snprintf(idx, sizeof(idx), "%lld",
	         (long long)json_integer_value(json_object_get(g, "index")));
	const char *gl[] = {rack, tray, node, idx, jx_str_or(g, "uuid", "")};

	(void)metrics_gauge_set(m->gpu_state, gl, st[0] ? enum_index(st, states, 4, 4) : 4);
	(void)metrics_gauge_set(m->gpu_status_ok, gl, ok);
	(void)metrics_gauge_set(m->gpu_degraded, gl, deg);
	if (json_is_integer(jx_path(g, "fabric.healthMask")))
		(void)metrics_gauge_set(
		        m->gpu_mask, gl,
		        (double)json_integer_value(jx_path(g, "fabric.healthMask")));
	if (sum[0])
		(void)metrics_gauge_set(m->gpu_summary, gl, enum_index(sum, sums, 4, 0));
}

static void imex_series(struct op_domain_metrics *m, const char *rack, const char *tray,
                        const char *node, const json_t *t)
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
		(void)metrics_gauge_set(m->imex_daemon, il, dv);
	(void)metrics_gauge_set(
	        m->imex_domain, il,
	        enum_index(jx_str_or(t, "status.imex.domainState", "Unknown"), domain, 4, 0));
	if (json_is_integer(jx_path(t, "status.imex.peersConnected")))
		(void)metrics_gauge_set(
		        m->imex_connected, il,
		        (double)json_integer_value(jx_path(t, "status.imex.peersConnected")));
	if (json_is_integer(jx_path(t, "status.imex.peersTotal")))
		(void)metrics_gauge_set(
		        m->imex_peers, il,
		        (double)json_integer_value(jx_path(t, "status.imex.peersTotal")));
	const char *cl[] = {rack, tray, node, il[3], jx_str_or(t, "status.imex.configHash", "")};
	if (cl[4][0])
		(void)metrics_gauge_set(m->imex_config, cl, 1);
}

static void tray_series(struct op *op, const json_t *t, const json_t *parts, int64_t now)
{
	struct op_domain_metrics *m = &op->dm;
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
	                        now - hb <= op->cfg.heartbeat_timeout_ms);
	(void)metrics_gauge_set(m->tray_ready, tl, fresh && kube_condition_is_true(t, "Ready"));
	if (hb > 0)
		(void)metrics_gauge_set(m->tray_heartbeat, tl, (double)hb / 1000.0);
	json_array_foreach(parts, i, p) {
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
	(void)metrics_gauge_set(m->tray_clique, ql, 1);
	const char *dl[] = {rack,
	                    tray,
	                    node,
	                    jx_str_or(t, "status.driver.version", ""),
	                    jx_str_or(t, "spec.driver.version", ""),
	                    jx_str_or(t, "status.driver.flavour", "")};
	(void)metrics_gauge_set(m->tray_driver, dl, 1);
	(void)metrics_gauge_set_state(m->tray_maintenance, tl, MAINT_STATES, 5,
	                              jx_str_or(t, "spec.maintenance.state", "None"));
	json_array_foreach(jx_path(t, "status.gpus"), i, g)
		gpu_series(m, rack, tray, node, g);
	if (json_is_object(jx_path(t, "spec.imex")))
		imex_series(m, rack, tray, node, t);
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
static void upgrade_steps(struct op *op, const json_t *u, const char *name, const char *rack,
                          int64_t now)
{
	struct op_domain_metrics *m = &op->dm;
	json_t *r = kube_informer_get(op->racks, rack), *s, *t;
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
			(void)metrics_gauge_set(m->upgrade_gate_passed, wl,
			                        json_is_true(json_object_get(ev, "passed")));
			(void)metrics_gauge_set(m->upgrade_gate_busbw, wl,
			                        (double)json_integer_value(
			                                json_object_get(ev, "busBandwidthGBps")));
			(void)metrics_gauge_set(m->upgrade_gate_floor, wl,
			                        (double)(floor * (100 - tol)) / 100.0);
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
			(void)metrics_gauge_set(m->drain_wait, dl, (double)now / 1000.0 - start);
			(void)metrics_gauge_set(m->drain_deadline, dl, deadline);
		}
	}
	json_decref(r);
}

/* The upgrade families of docs/metrics.md, from the RackUpgrade cache. */
static void upgrade_series(struct op *op, int64_t now)
{
	struct op_domain_metrics *m = &op->dm;
	json_t *ups = kube_informer_list(op->upgrades), *u, *a;
	size_t i, k;
	json_array_foreach(ups, i, u) {
		const char *name = kube_obj_name(u), *rack = jx_str_or(u, "spec.rack", "");
		if (rack[0] == '\0')
			continue; /* a selector upgrade: its children carry the series */
		const char *lv[] = {name, rack};
		const char *info[] = {name, rack, jx_str_or(u, "spec.class", "routine"),
		                      jx_str_or(u, "status.fromStack", ""),
		                      jx_str_or(u, "spec.target.stack", "")};
		const json_t *waves = jx_path(u, "status.waves"), *w;
		double cur = 0;
		int pending = 0;
		(void)metrics_gauge_set(m->upgrade_info, info, 1);
		(void)metrics_gauge_set_state(m->upgrade_phase, lv, UPGRADE_PHASES,
		                              sizeof(UPGRADE_PHASES) / sizeof(UPGRADE_PHASES[0]),
		                              jx_str_or(u, "status.phase", "Proposed"));
		(void)metrics_gauge_set(m->upgrade_phase_start, lv, time_s(u, "status.phaseTime"));
		json_array_foreach(waves, k, w)
			if (strcmp(jx_str_or(w, "phase", ""), "Pending") != 0)
				cur = (double)json_integer_value(json_object_get(w, "index"));
		(void)metrics_gauge_set(m->upgrade_wave, lv, cur);
		(void)metrics_gauge_set(m->upgrade_waves, lv, (double)json_array_size(waves));
		json_array_foreach(jx_path(u, "status.requiredApprovals"), k, a) {
			bool got = false;
			const json_t *r;
			size_t j;
			json_array_foreach(jx_path(u, "status.approvals"), j, r)
				got |= json_equal(json_object_get(r, "layer"), a) &&
				       strcmp(jx_str_or(r, "decision", ""), "Approved") == 0;
			pending += !got;
		}
		(void)metrics_gauge_set(m->upgrade_approvals_pending, lv, pending);
		upgrade_steps(op, u, name, rack, now);
	}
	json_decref(ups);
}

/* RackPartitions (the list collect() read for the trays) and
 * ComputeDomains, from their caches. */
static void partition_series(struct op *op, const json_t *parts)
{
	struct op_domain_metrics *m = &op->dm;
	json_t *ds, *o;
	const char *phases[8];
	size_t i;
	for (unsigned k = 0; k < 8; k++)
		phases[k] = op_part_phase_name((enum api_partition_phase)k);
	json_array_foreach(parts, i, o) {
		const char *pl[] = {jx_str_or(o, "spec.rack", ""), kube_obj_name(o)};
		(void)metrics_gauge_set_state(m->partition_phase, pl, phases, 8,
		                              jx_str_or(o, "status.phase", "Pending"));
	}
	ds = kube_informer_list(op->domains);
	json_array_foreach(ds, i, o) {
		const char *dl[] = {kube_obj_namespace(o), kube_obj_name(o),
		                    jx_str_or(o, "status.rack", "")};
		(void)metrics_gauge_set(m->domain_ready, dl,
		                        strcmp(jx_str_or(o, "status.status", ""), "Ready") == 0);
		(void)metrics_gauge_set(m->domain_nodes, dl,
		                        (double)json_array_size(jx_path(o, "status.nodes")));
	}
	json_decref(ds);
}

static void domain_reset(struct op_domain_metrics *m)
{
	struct metrics_family *all[] = {m->rack_info,
	                                m->rack_trays,
	                                m->rack_trays_ready,
	                                m->rack_trays_unavailable,
	                                m->rack_gpus_healthy,
	                                m->rack_min_healthy,
	                                m->rack_threshold,
	                                m->rack_degraded,
	                                m->rack_fabric_state,
	                                m->version_skew,
	                                m->tray_ready,
	                                m->tray_heartbeat,
	                                m->tray_clique,
	                                m->tray_driver,
	                                m->tray_maintenance,
	                                m->gpu_state,
	                                m->gpu_status_ok,
	                                m->gpu_degraded,
	                                m->gpu_mask,
	                                m->gpu_summary,
	                                m->imex_daemon,
	                                m->imex_domain,
	                                m->imex_connected,
	                                m->imex_peers,
	                                m->imex_config,
	                                m->upgrade_phase,
	                                m->upgrade_info,
	                                m->upgrade_phase_start,
	                                m->upgrade_wave,
	                                m->upgrade_waves,
	                                m->upgrade_approvals_pending,
	                                m->upgrade_gate_passed,
	                                m->upgrade_gate_busbw,
	                                m->upgrade_gate_floor,
	                                m->drain_wait,
	                                m->drain_deadline,
	                                m->partition_phase,
	                                m->domain_ready,
	                                m->domain_nodes};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		metrics_family_reset(all[i]);
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

static void collect(void *arg)
{
	struct op *op = arg;
	struct op_domain_metrics *m = &op->dm;
	json_t *racks, *trays, *parts, *o;
	size_t i;

	wq_gauges(op);
	pthread_mutex_lock(&m->mu);
	kube_counters(op, m);
	domain_reset(m);
	if (op_is_leading(op)) {
		int64_t now = time_wall_ms();
		racks = kube_informer_list(op->racks);
		trays = kube_informer_list(op->trays);
		parts = kube_informer_list(op->partitions);
		json_array_foreach(racks, i, o)
			rack_series(m, o);
		json_array_foreach(trays, i, o)
			tray_series(op, o, parts, now);
		upgrade_series(op, now);
		partition_series(op, parts);
		json_decref(racks);
		json_decref(trays);
		json_decref(parts);
	}
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
	const char *const *R = L("rack");
	const char *const *T = L("rack", "tray", "node");
	const char *const *G = L("rack", "tray", "node", "gpu", "uuid");
	const char *const *I = L("rack", "tray", "node", "domain");
	enum metrics_type GA = METRICS_GAUGE;
	enum nv_err rc;

	pthread_mutex_init(&m->mu, NULL);
	if ((rc = reg(op, "nvl72_build_info", "Version of the running operator.", GA, L("version"),
	              &m->build_info)) ||
	    (rc = reg(op, "nvl72_rack_info",
	              "One per Rack: platform, matrix, observed and desired stack.", GA,
	              L("rack", "platform", "matrix", "stack", "desired_stack"), &m->rack_info)) ||
	    (rc = reg(op, "nvl72_rack_trays", "Compute trays in the rack's inventory.", GA, R,
	              &m->rack_trays)) ||
	    (rc = reg(op, "nvl72_rack_trays_ready", "Ready compute trays.", GA, R,
	              &m->rack_trays_ready)) ||
	    (rc = reg(op, "nvl72_rack_trays_unavailable", "Unavailable compute trays.", GA, R,
	              &m->rack_trays_unavailable)) ||
	    (rc = reg(op, "nvl72_rack_gpus_healthy",
	              "GPUs with fabric Completed and a healthy summary.", GA, R,
	              &m->rack_gpus_healthy)) ||
	    (rc = reg(op, "nvl72_rack_min_healthy_trays", "spec.policy.minHealthyTrays.", GA, R,
	              &m->rack_min_healthy)) ||
	    (rc = reg(op, "nvl72_rack_degraded_threshold", "spec.policy.degradedThreshold.", GA, R,
	              &m->rack_threshold)) ||
	    (rc = reg(op, "nvl72_rack_degraded", "1 when the rack's Degraded condition is True.",
	              GA, R, &m->rack_degraded)) ||
	    (rc = reg(op, "nvl72_rack_fabric_state",
	              "0 Unknown, 1 Healthy, 2 Degraded, 3 Unhealthy.", GA, R,
	              &m->rack_fabric_state)) ||
	    (rc = reg(op, "nvl72_version_skew",
	              "Distinct versions of a component among the rack's trays.", GA,
	              L("rack", "component"), &m->version_skew)))
		return rc;
	if ((rc = reg(op, "nvl72_tray_ready", "1 when the tray is Ready with a fresh heartbeat.",
	              GA, T, &m->tray_ready)) ||
	    (rc = reg(op, "nvl72_tray_heartbeat_timestamp_seconds",
	              "The agent's last sign of life.", GA, T, &m->tray_heartbeat)) ||
	    (rc = reg(op, "nvl72_tray_clique_info", "The tray's fabric clique.", GA,
	              L("rack", "tray", "node", "partition", "cluster_uuid", "clique_id"),
	              &m->tray_clique)) ||
	    (rc = reg(op, "nvl72_tray_driver_info", "Loaded and desired driver.", GA,
	              L("rack", "tray", "node", "version", "desired_version", "flavour"),
	              &m->tray_driver)) ||
	    (rc = reg(op, "nvl72_tray_maintenance_state", "spec.maintenance.state as a state set.",
	              GA, L("rack", "tray", "node", "state"), &m->tray_maintenance)))
		return rc;
	if ((rc = reg(op, "nvl72_gpu_fabric_state",
	              "0 NotSupported, 1 NotStarted, 2 InProgress, 3 Completed, 4 unknown.", GA, G,
	              &m->gpu_state)) ||
	    (rc = reg(op, "nvl72_gpu_fabric_status_ok", "1 when Completed with status Success.", GA,
	              G, &m->gpu_status_ok)) ||
	    (rc = reg(op, "nvl72_gpu_fabric_health_degraded",
	              "1 when the fabric health is degraded.", GA, G, &m->gpu_degraded)) ||
	    (rc = reg(op, "nvl72_gpu_fabric_health_mask", "Raw fabric health mask.", GA, G,
	              &m->gpu_mask)) ||
	    (rc = reg(op, "nvl72_gpu_fabric_health_summary",
	              "0 NotSupported, 1 Healthy, 2 Unhealthy, 3 LimitedCapacity.", GA, G,
	              &m->gpu_summary)))
		return rc;
	if ((rc = reg(op, "nvl72_imex_daemon_state", "IMEX daemon state in DCGM's numbering.", GA,
	              I, &m->imex_daemon)) ||
	    (rc = reg(op, "nvl72_imex_domain_state", "0 Unknown, 1 Up, 2 Degraded, 3 Down.", GA, I,
	              &m->imex_domain)) ||
	    (rc = reg(op, "nvl72_imex_peers_connected", "IMEX peers connected.", GA, I,
	              &m->imex_connected)) ||
	    (rc = reg(op, "nvl72_imex_peers", "IMEX peers in the domain.", GA, I,
	              &m->imex_peers)) ||
	    (rc = reg(op, "nvl72_imex_config_info", "Hash of the IMEX peer list.", GA,
	              L("rack", "tray", "node", "domain", "config_hash"), &m->imex_config)))
		return rc;
	static const double step_buckets[] = {10,   30,   60,   120,  300,  600,
	                                      1200, 1800, 3600, 7200, 14400};
	const char *const *U = L("upgrade", "rack");
	const char *const *UW = L("upgrade", "rack", "wave");
	const char *const *D = L("rack", "tray", "node", "mode");
	struct metrics_desc hd = {.name = "nvl72_upgrade_step_duration_seconds",
	                          .help = "Duration of finished RackUpgrade steps, by action.",
	                          .type = METRICS_HISTOGRAM,
	                          .labels = L("action"),
	                          .buckets = step_buckets,
	                          .nbuckets = sizeof(step_buckets) / sizeof(step_buckets[0])};
	if ((rc = reg(op, "nvl72_upgrade_info", "One per RackUpgrade acting on one rack.", GA,
	              L("upgrade", "rack", "class", "from_stack", "target_stack"),
	              &m->upgrade_info)) ||
	    (rc = reg(op, "nvl72_upgrade_phase", "status.phase of each RackUpgrade as a state set.",
	              GA, L("upgrade", "rack", "phase"), &m->upgrade_phase)) ||
	    (rc = reg(op, "nvl72_upgrade_phase_start_timestamp_seconds",
	              "status.phaseTime as Unix seconds.", GA, U, &m->upgrade_phase_start)) ||
	    (rc = reg(op, "nvl72_upgrade_wave", "Wave in progress or last finished (0 = canary).",
	              GA, U, &m->upgrade_wave)) ||
	    (rc = reg(op, "nvl72_upgrade_waves", "Waves planned so far.", GA, U,
	              &m->upgrade_waves)) ||
	    (rc = reg(op, "nvl72_upgrade_approvals_pending",
	              "Required layers without a counted approval.", GA, U,
	              &m->upgrade_approvals_pending)) ||
	    (rc = reg(op, "nvl72_upgrade_gate_passed", "Verdict of the wave's Validate step.", GA,
	              UW, &m->upgrade_gate_passed)) ||
	    (rc = reg(op, "nvl72_upgrade_gate_bus_bandwidth_gbps",
	              "Bus bandwidth measured by the wave's Validate step.", GA, UW,
	              &m->upgrade_gate_busbw)) ||
	    (rc = reg(op, "nvl72_upgrade_gate_floor_gbps",
	              "Pass mark of the gate: floor x (100 - tolerance) / 100.", GA, UW,
	              &m->upgrade_gate_floor)) ||
	    (rc = reg(op, "nvl72_drain_wait_seconds",
	              "Seconds since the drain of the tray began, while it drains.", GA, D,
	              &m->drain_wait)) ||
	    (rc = reg(op, "nvl72_drain_deadline_seconds", "The drain's total deadline.", GA, D,
	              &m->drain_deadline)) ||
	    (rc = metrics_family_register(op->reg, &hd, &op->upg_step_seconds)))
		return rc;
	const char *const *CD = L("computedomain_namespace", "computedomain", "rack");
	if ((rc = reg(op, "nvl72_partition_phase",
	              "status.phase of each RackPartition as a state set.", GA,
	              L("rack", "partition", "phase"), &m->partition_phase)) ||
	    (rc = reg(op, "nvl72_computedomain_ready",
	              "1 when the ComputeDomain's status is Ready.", GA, CD, &m->domain_ready)) ||
	    (rc = reg(op, "nvl72_computedomain_nodes",
	              "Entries in the ComputeDomain's status.nodes.", GA, CD, &m->domain_nodes)))
		return rc;
	if ((rc = reg(op, "nvl72_kube_liveness_probes_total",
	              "Probes sent on the apiserver connection after a silence.", METRICS_COUNTER,
	              L("host"), &m->kube_probes)) ||
	    (rc = reg(op, "nvl72_kube_redials_total",
	              "Apiserver connections dropped for a probe left unanswered.", METRICS_COUNTER,
	              L("host"), &m->kube_redials)))
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
	return metrics_registry_add_collector(op->reg, collect, op);
}
