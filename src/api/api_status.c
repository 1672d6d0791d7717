// SPDX-License-Identifier: Apache-2.0
// Status serialisers of the rack-side kinds (Rack, ComputeTray and
// RackPartition). Each returns only the status object, ready to send as a
// merge patch of the status subresource; empty fields are left out.
#include <string.h>

#include "api_int.h"
#include "nvl72/api_rack.h"

static void set_int(json_t *o, const char *key, int64_t v)
{
	json_object_set_new(o, key, json_integer(v));
}

static void set_gen(json_t *o, int64_t gen)
{
	if (gen > 0)
		set_int(o, "observedGeneration", gen);
}

static json_t *rack_trays_to_json(const struct api_rack_status *s)
{
	json_t *arr = json_array();
	for (unsigned i = 0; i < s->ntrays && i < API_COMPUTE_TRAYS; i++) {
		const struct api_rack_tray_status *t = &s->trays[i];
		json_t *o = json_object();
		set_int(o, "index", t->index);
		api_json_set_str(o, "node", t->node);
		json_object_set_new(o, "ready", json_boolean(t->ready));
		api_json_set_str(o, "stack", t->stack);
		api_json_set_str(o, "driverVersion", t->driver_version);
		api_json_set_str(o, "cliqueID", t->clique_id);
		api_json_set_str(o, "maintenance", t->maintenance);
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *rack_skew_to_json(const struct api_rack_status *s)
{
	json_t *arr = json_array();
	for (unsigned i = 0; i < s->nskew && i < MATRIX_C__COUNT; i++) {
		const struct api_skew *k = &s->skew[i];
		json_t *o = json_object();
		json_t *v = json_array();
		json_object_set_new(o, "component",
		                    json_string(matrix_component_name(k->component)));
		for (unsigned j = 0; j < k->nversions && j < API_COMPUTE_TRAYS; j++)
			json_array_append_new(v, json_string(k->versions[j]));
		json_object_set_new(o, "versions", v);
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *rack_fabric_to_json(const struct api_rack_status *s)
{
	static const char *const health[] = {"Unknown", "Healthy", "Degraded", "Unhealthy"};
	json_t *o = json_object();
	json_t *cl = json_array();
	json_object_set_new(o, "state", json_string(health[(unsigned)s->fabric % 4]));
	api_json_set_str(o, "clusterUUID", s->cluster_uuid);
	for (unsigned i = 0; i < s->ncliques && i < API_COMPUTE_TRAYS; i++) {
		json_t *c = json_object();
		json_object_set_new(c, "cliqueID", json_string(s->cliques[i].clique_id));
		api_json_set_str(c, "partition", s->cliques[i].partition);
		json_object_set_new(c, "trays", api_tray_set_to_json(s->cliques[i].trays));
		json_array_append_new(cl, c);
	}
	json_object_set_new(o, "cliques", cl);
	return o;
}

json_t *api_rack_status_to_json(const struct api_rack_status *s)
{
	json_t *o = json_object();
	json_t *cap = json_object();
	json_t *m = json_object();
	set_gen(o, s->observed_generation);
	api_json_set_str(o, "stack", s->stack);
	json_object_set_new(o, "trays", rack_trays_to_json(s));
	json_object_set_new(o, "versionSkew", rack_skew_to_json(s));
	json_object_set_new(o, "fabric", rack_fabric_to_json(s));
	set_int(cap, "trays", s->cap_trays);
	set_int(cap, "readyTrays", s->cap_ready_trays);
	set_int(cap, "unavailableTrays", s->cap_unavailable_trays);
	set_int(cap, "gpus", s->cap_gpus);
	set_int(cap, "healthyGPUs", s->cap_healthy_gpus);
	json_object_set_new(o, "capacity", cap);
	if (s->upgrade_name[0] != '\0') {
		json_t *u = json_object();
		api_json_set_str(u, "name", s->upgrade_name);
		api_json_set_str(u, "phase", s->upgrade_phase);
		json_object_set_new(o, "upgrade", u);
	}
	json_object_set_new(m, "inWindow", json_boolean(s->in_window));
	json_object_set_new(m, "inFreeze", json_boolean(s->in_freeze));
	api_json_set_time(m, "nextWindowStart", s->next_window_ms);
	json_object_set_new(o, "maintenance", m);
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}

static json_t *gpu_to_json(const struct api_gpu_status *g)
{
	json_t *o = json_object();
	json_t *f = json_object();
	json_t *p = json_object();
	set_int(o, "index", g->index);
	api_json_set_str(o, "uuid", g->uuid);
	api_json_set_str(o, "pciBusId", g->pci_bus_id);
	api_json_set_str(o, "product", g->product);
	api_json_set_str(o, "vbios", g->vbios);
	api_json_set_str(o, "boardPartNumber", g->board_part_number);
	api_json_set_str(o, "serial", g->serial);
	api_json_set_str(f, "state", g->fabric_state);
	api_json_set_str(f, "status", g->fabric_status);
	api_json_set_str(f, "clusterUUID", g->cluster_uuid);
	if (g->clique_id >= 0)
		set_int(f, "cliqueId", g->clique_id);
	if (g->health_mask >= 0)
		set_int(f, "healthMask", g->health_mask);
	api_json_set_str(f, "healthSummary", g->health_summary);
	api_json_set_str(f, "healthSource", g->health_source);
	json_object_set_new(o, "fabric", f);
	api_json_set_str(p, "chassisSerial", g->chassis_serial);
	if (g->chassis_slot >= 0)
		set_int(p, "slotNumber", g->chassis_slot);
	if (g->tray_index >= 0)
		set_int(p, "trayIndex", g->tray_index);
	json_object_set_new(o, "platform", p);
	return o;
}

static json_t *tray_imex_to_json(const struct api_compute_tray_status *s)
{
	json_t *o = json_object();
	api_json_set_str(o, "mode", s->imex_mode);
	api_json_set_str(o, "address", s->imex_address);
	api_json_set_str(o, "version", s->imex_version);
	api_json_set_str(o, "daemonState", s->imex_daemon_state);
	api_json_set_str(o, "domainState", s->imex_domain_state);
	if (s->imex_node_index >= 0)
		set_int(o, "nodeIndex", s->imex_node_index);
	set_int(o, "peersConnected", s->imex_peers_connected);
	set_int(o, "peersTotal", s->imex_peers_total);
	api_json_set_str(o, "configHash", s->imex_config_hash);
	return o;
}

static json_t *tray_driver_to_json(const struct api_compute_tray_status *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "loaded", json_boolean(s->driver_loaded));
	api_json_set_str(o, "version", s->driver_version);
	api_json_set_str(o, "branch", s->driver_branch);
	api_json_set_str(o, "flavour", s->driver_flavour);
	api_json_set_str(o, "onDiskVersion", s->on_disk_version);
	api_json_set_str(o, "cudaVersion", s->cuda_version);
	return o;
}

static json_t *tray_validation_to_json(const struct api_tray_validation *v)
{
	json_t *o = json_object();
	api_json_set_str(o, "id", v->id);
	json_object_set_new(o, "phase", json_string(api_validation_phase_name(v->phase)));
	if (v->has_busbw)
		json_object_set_new(o, "busBandwidthGbps", json_real(v->busbw_gbps));
	api_json_set_str(o, "transport", v->transport);
	api_json_set_time(o, "startTime", v->start_ms);
	api_json_set_time(o, "completionTime", v->completion_ms);
	api_json_set_str(o, "message", v->message);
	return o;
}

json_t *api_compute_tray_status_to_json(const struct api_compute_tray_status *s)
{
	json_t *o = json_object();
	json_t *gpus = json_array();
	json_t *fab = json_object();
	json_t *maint = json_object();
	set_gen(o, s->observed_generation);
	api_json_set_time(o, "heartbeatTime", s->heartbeat_ms);
	api_json_set_str(o, "agentVersion", s->agent_version);
	json_object_set_new(o, "driver", tray_driver_to_json(s));
	for (unsigned i = 0; i < s->ngpus && i < API_GPUS_PER_TRAY; i++)
		json_array_append_new(gpus, gpu_to_json(&s->gpus[i]));
	json_object_set_new(o, "gpus", gpus);
	api_json_set_str(fab, "state", s->fabric_state);
	api_json_set_str(fab, "clusterUUID", s->cluster_uuid);
	api_json_set_str(fab, "cliqueID", s->clique_id);
	api_json_set_str(fab, "healthSummary", s->fabric_health);
	api_json_set_str(fab, "healthSource", s->fabric_health_source);
	json_object_set_new(o, "fabric", fab);
	json_object_set_new(o, "imex", tray_imex_to_json(s));
	if (s->host_fm_state[0] != '\0') {
		json_t *fm = json_object();
		api_json_set_str(fm, "state", s->host_fm_state);
		json_object_set_new(o, "hostFabricManager", fm);
	}
	json_object_set_new(maint, "state", json_string(api_maint_state_name(s->maint)));
	if (s->maint_step > 0)
		set_int(maint, "upgradeStep", s->maint_step);
	api_json_set_str(maint, "message", s->maint_message);
	json_object_set_new(o, "maintenance", maint);
	if (s->last_error_reason[0] != '\0') {
		json_t *e = json_object();
		api_json_set_time(e, "time", s->last_error_ms);
		api_json_set_str(e, "reason", s->last_error_reason);
		api_json_set_str(e, "message", s->last_error_message);
		json_object_set_new(o, "lastError", e);
	}
	if (s->validation.phase != API_VALIDATION_NONE)
		json_object_set_new(o, "validation", tray_validation_to_json(&s->validation));
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}

json_t *api_rack_partition_status_to_json(const struct api_rack_partition_status *s)
{
	static const char *const phases[] = {"Pending",          "Draining",       "Requesting",
	                                     "WaitingForFabric", "RefreshingIMEX", "Active",
	                                     "Failed",           "Deleting"};
	json_t *o = json_object();
	json_t *trays = json_array();
	set_gen(o, s->observed_generation);
	json_object_set_new(o, "phase", json_string(phases[(unsigned)s->phase % 8]));
	set_int(o, "trayCount", s->tray_count);
	api_json_set_str(o, "cliqueID", s->clique_id);
	if (s->backend_partition_id[0] || s->backend_operation_id[0]) {
		json_t *b = json_object();
		api_json_set_str(b, "partitionId", s->backend_partition_id);
		api_json_set_str(b, "operationId", s->backend_operation_id);
		json_object_set_new(o, "backend", b);
	}
	for (unsigned i = 0; i < s->ntrays && i < API_COMPUTE_TRAYS; i++) {
		json_t *t = json_object();
		set_int(t, "index", s->trays[i].index);
		api_json_set_str(t, "node", s->trays[i].node);
		api_json_set_str(t, "cliqueID", s->trays[i].clique_id);
		json_object_set_new(t, "ready", json_boolean(s->trays[i].ready));
		json_array_append_new(trays, t);
	}
	json_object_set_new(o, "trays", trays);
	api_json_set_time(o, "lastTransitionTime", s->last_transition_ms);
	api_json_set_str(o, "message", s->message);
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}
