// SPDX-License-Identifier: Apache-2.0
// What the Rack controller writes, computed without the API: the rack's
// status and conditions, and minimal merge patches for Node labels, cordons
// and the ComputeTrays the rack owns.
#include <stdio.h>
#include <string.h>

#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/operator_rack.h"
#include "nvl72/parse.h"

void op_tray_name(const char *rack, int index, char out[64])
{
	snprintf(out, 64, "%.58s-t%02d", rack, index);
}

static json_t *trays_json(const struct op_rack_eval *ev)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < ev->ntrays; i++) {
		const struct op_tray_eval *t = &ev->trays[i];
		json_t *o = json_pack("{s:i,s:s,s:b,s:s}", "index", t->index, "node", t->node,
		                      "ready", t->ready, "maintenance", t->maintenance);
		if (t->stack[0])
			json_object_set_new(o, "stack", json_string(t->stack));
		if (t->driver[0])
			json_object_set_new(o, "driverVersion", json_string(t->driver));
		if (t->clique[0])
			json_object_set_new(o, "cliqueID", json_string(t->clique));
		if (!t->ready && t->why)
			json_object_set_new(o, "reason", json_string(t->why));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *skew_json(const struct op_rack_eval *ev)
{
	json_t *a = json_array();
	for (unsigned i = 0; i < ev->nskew; i++) {
		const struct op_skew *s = &ev->skew[i];
		if (s->n < 2)
			continue;
		json_t *v = json_array();
		for (unsigned k = 0; k < s->n; k++)
			json_array_append_new(v, json_string(s->v[k]));
		json_array_append_new(
		        a, json_pack("{s:s,s:o}", "component", s->component, "versions", v));
	}
	return a;
}

static json_t *fabric_json(const struct op_rack_eval *ev)
{
	json_t *f = json_pack("{s:s}", "state", ev->fabric), *cl = json_array();
	if (ev->cluster_uuid[0])
		json_object_set_new(f, "clusterUUID", json_string(ev->cluster_uuid));
	for (unsigned i = 0; i < ev->ncliques; i++) {
		json_t *tr = json_array();
		json_t *c = json_pack("{s:s}", "cliqueID", ev->cliques[i].id);
		for (int k = 1; k <= API_COMPUTE_TRAYS; k++)
			if (ev->cliques[i].trays & (1u << k))
				json_array_append_new(tr, json_integer(k));
		if (ev->cliques[i].partition[0])
			json_object_set_new(c, "partition", json_string(ev->cliques[i].partition));
		json_object_set_new(c, "trays", tr);
		json_array_append_new(cl, c);
	}
	json_object_set_new(f, "cliques", cl);
	return f;
}

/* "t03 TrayNotReady, t07 HeartbeatStale" for the trays that count. */
static void down_list(const struct op_rack_eval *ev, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	for (unsigned i = 0; i < ev->ntrays && len + 1 < cap; i++) {
		const struct op_tray_eval *t = &ev->trays[i];
		if (t->ready || t->pending)
			continue;
		int w = snprintf(out + len, cap - len, "%st%02d %s", len ? ", " : "", t->index,
		                 t->why ? t->why : "NotReady");
		if (w < 0 || (size_t)w >= cap - len)
			break;
		len += (size_t)w;
	}
}

static void conditions_apply(json_t *obj, const struct op_rack_eval *ev, bool cordoned, int64_t gen,
                             int64_t now)
{
	char msg[1024], list[768];
	const char *st;

	if (ev->reporting == 0 && ev->ready == 0)
		kube_condition_set(obj, "Ready", "False", "AwaitingAgents",
		                   "no tray agent has reported yet", gen, now);
	else {
		snprintf(msg, sizeof(msg), "%d of %u trays ready (minHealthyTrays %d)", ev->ready,
		         ev->ntrays, ev->min_healthy);
		kube_condition_set(obj, "Ready", ev->ready >= ev->min_healthy ? "True" : "False",
		                   ev->ready >= ev->min_healthy ? "CapacityMet"
		                                                : "CapacityBelowMinimum",
		                   msg, gen, now);
	}
	st = strcmp(ev->fabric, "Healthy") == 0   ? "True"
	     : strcmp(ev->fabric, "Unknown") == 0 ? "Unknown"
	                                          : "False";
	kube_condition_set(obj, "FabricHealthy", st, ev->fabric_reason, ev->fabric_msg, gen, now);

	if (ev->stack[0] == '\0' && ev->reporting == 0) {
		kube_condition_set(obj, "VersionsConsistent", "Unknown", "NoData",
		                   "no tray has reported a driver yet", gen, now);
	} else if (strcmp(ev->stack, "mixed") == 0 || ev->stack[0] == '\0') {
		size_t len = 0;
		msg[0] = '\0';
		for (unsigned i = 0; i < ev->nskew && len + 1 < sizeof(msg); i++) {
			if (ev->skew[i].n < 2)
				continue;
			int w = snprintf(msg + len, sizeof(msg) - len, "%s%s: %u versions",
			                 len ? "; " : "", ev->skew[i].component, ev->skew[i].n);
			len += w > 0 ? (size_t)w : 0;
		}
		if (!msg[0])
			snprintf(msg, sizeof(msg),
			         "trays run a driver that matches no stack of the matrix");
		kube_condition_set(obj, "VersionsConsistent", "False",
		                   ev->stack[0] ? "VersionSkew" : "UnknownStack", msg, gen, now);
	} else if (ev->vbios_odd[0]) {
		/* One stack, but GPU firmware (VBIOS) differs inside the NVLink
		 * domain: name the GPUs off the rack's common version. */
		snprintf(msg, sizeof(msg),
		         "every reporting tray runs %s, but the VBIOS differs: %s; "
		         "the rest run %s",
		         ev->stack, ev->vbios_odd, ev->vbios_common);
		kube_condition_set(obj, "VersionsConsistent", "False", "FirmwareSkew", msg, gen,
		                   now);
	} else {
		snprintf(msg, sizeof(msg), "every reporting tray runs %s", ev->stack);
		kube_condition_set(obj, "VersionsConsistent", "True", "OneStack", msg, gen, now);
	}

	down_list(ev, list, sizeof(list));
	if (ev->degraded) {
		snprintf(msg, sizeof(msg), "%d trays unavailable (threshold %d): %s; %s",
		         ev->counted, ev->threshold, list,
		         cordoned            ? "the rack's Nodes are cordoned"
		         : ev->cordon_policy ? "cordoning the rack's Nodes"
		                             : "cordonWhenDegraded is off");
		kube_condition_set(obj, "Degraded", "True", "TraysUnavailable", msg, gen, now);
	} else {
		snprintf(msg, sizeof(msg), "%d tray%s unavailable (threshold %d)%s%s", ev->counted,
		         ev->counted == 1 ? "" : "s", ev->threshold, list[0] ? ": " : "", list);
		kube_condition_set(obj, "Degraded", "False", "BelowThreshold", msg, gen, now);
	}
}

/* UpgradeInProgress mirrors status.upgrade, which the upgrade controller
 * writes. */
static void upgrade_condition(json_t *obj, int64_t gen, int64_t now)
{
	const char *name = jx_str_or(obj, "status.upgrade.name", "");
	const char *phase = jx_str_or(obj, "status.upgrade.phase", "");
	char msg[160];
	if (!name[0] || !phase[0] || api_upgrade_phase_name_final(phase)) {
		kube_condition_set(obj, "UpgradeInProgress", "False", "NoUpgrade",
		                   "no RackUpgrade is acting on the rack", gen, now);
		return;
	}
	snprintf(msg, sizeof(msg), "%s is in phase %s", name, phase);
	kube_condition_set(obj, "UpgradeInProgress", "True", phase, msg, gen, now);
}

void op_rack_status_apply(json_t *obj, const struct op_rack_eval *ev, bool cordoned, int64_t now_ms)
{
	int64_t gen = json_integer_value(jx_path(obj, "metadata.generation"));
	json_t *cap = json_pack("{s:i,s:i,s:i,s:i,s:i}", "trays", (int)ev->ntrays, "readyTrays",
	                        ev->ready, "unavailableTrays", ev->unavailable, "gpus", ev->gpus,
	                        "healthyGPUs", ev->healthy_gpus);

	jx_set_take(obj, "status.observedGeneration", json_integer(gen));
	jx_set_str(obj, "status.stack", ev->stack);
	jx_set_take(obj, "status.trays", trays_json(ev));
	jx_set_take(obj, "status.versionSkew", skew_json(ev));
	jx_set_take(obj, "status.fabric", fabric_json(ev));
	jx_set_take(obj, "status.capacity", cap);
	conditions_apply(obj, ev, cordoned, gen, now_ms);
	upgrade_condition(obj, gen, now_ms);
}

json_t *op_rack_status_patch(const json_t *rack, const json_t *want)
{
	json_t *from = json_object_get(rack, "status");
	json_t *to = json_object_get(want, "status");
	json_t *diff, *patch;

	diff = jx_merge_patch_diff(from ? from : json_null(), to ? to : json_null());
	if (json_is_object(diff) && json_object_size(diff) == 0) {
		json_decref(diff);
		return NULL;
	}
	patch = json_pack("{s:{s:s},s:o}", "metadata", "resourceVersion",
	                  jx_str_or(rack, "metadata.resourceVersion", ""), "status", diff);
	return patch;
}

/* A string member of an object (keys may hold dots), or def. */
static const char *member_str(const json_t *obj, const char *key, const char *def)
{
	const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : def;
}

/* Adds key: value (or key: null when value is NULL or "") to labels when
 * it differs from node's. */
static void label_want(json_t *labels, const json_t *cur, const char *key, const char *value)
{
	const char *have = member_str(cur, key, NULL);
	if (value && value[0]) {
		if (!have || strcmp(have, value) != 0)
			json_object_set_new(labels, key, json_string(value));
	} else if (have) {
		json_object_set_new(labels, key, json_null());
	}
}

json_t *op_node_labels_patch(const json_t *node, const char *rack, int index, const char *clique,
                             const char *partition)
{
	const json_t *cur = jx_path(node, "metadata.labels");
	json_t *labels = json_object();
	char idx[16];

	snprintf(idx, sizeof(idx), "%d", index);
	label_want(labels, cur, OP_LABEL_RACK, rack);
	label_want(labels, cur, OP_LABEL_TRAY_INDEX, rack ? idx : NULL);
	label_want(labels, cur, OP_LABEL_CLIQUE, rack ? clique : NULL);
	label_want(labels, cur, OP_LABEL_PARTITION, rack ? partition : NULL);
	if (json_object_size(labels) == 0) {
		json_decref(labels);
		return NULL;
	}
	return json_pack("{s:{s:o}}", "metadata", "labels", labels);
}

static json_t *owner_ref(const json_t *rack)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:b,s:b}", "apiVersion", API_VERSION, "kind", "Rack",
	                 "name", jx_str_or(rack, "metadata.name", ""), "uid",
	                 jx_str_or(rack, "metadata.uid", ""), "controller", 1, "blockOwnerDeletion",
	                 1);
}

json_t *op_tray_build(const json_t *rack, int index, const char *node, const char *driver)
{
	const char *rname = jx_str_or(rack, "metadata.name", "");
	char name[64];
	json_t *t;

	op_tray_name(rname, index, name);
	t = json_pack("{s:s,s:s,s:{s:s,s:{s:s},s:[o]},s:{s:s,s:i,s:s}}", "apiVersion", API_VERSION,
	              "kind", "ComputeTray", "metadata", "name", name, "labels", OP_LABEL_RACK,
	              rname, "ownerReferences", owner_ref(rack), "spec", "rack", rname, "index",
	              index, "node", node);
	if (driver && driver[0])
		jx_set_take(t, "spec.driver", json_pack("{s:s}", "version", driver));
	return t;
}

/* The controller ownerReference of obj (borrowed), or NULL. */
static const json_t *controller_ref(const json_t *obj)
{
	const json_t *refs = jx_path(obj, "metadata.ownerReferences"), *r;
	size_t i;
	json_array_foreach(refs, i, r)
		if (json_is_true(json_object_get(r, "controller")))
			return r;
	return NULL;
}

enum op_tray_check op_tray_check(const json_t *tray, const json_t *rack, int index,
                                 const char *node, json_t **patch)
{
	const char *rname = jx_str_or(rack, "metadata.name", "");
	const json_t *ctl = controller_ref(tray);
	json_t *p = json_object();
	bool label_ok;

	if (ctl && strcmp(jx_str_or(ctl, "uid", ""), jx_str_or(rack, "metadata.uid", "")) != 0) {
		json_decref(p);
		return OP_TRAY_FOREIGN;
	}
	if (strcmp(jx_str_or(tray, "spec.node", ""), node) != 0 ||
	    strcmp(jx_str_or(tray, "spec.rack", ""), rname) != 0 ||
	    json_integer_value(jx_path(tray, "spec.index")) != index) {
		json_decref(p);
		return OP_TRAY_RECREATE;
	}
	label_ok =
	        strcmp(member_str(jx_path(tray, "metadata.labels"), OP_LABEL_RACK, ""), rname) == 0;
	if (ctl && label_ok) {
		json_decref(p);
		return OP_TRAY_OK;
	}
	jx_set_str(p, "metadata.resourceVersion", jx_str_or(tray, "metadata.resourceVersion", ""));
	if (!label_ok)
		json_object_set_new(json_object_get(p, "metadata"), "labels",
		                    json_pack("{s:s}", OP_LABEL_RACK, rname));
	if (!ctl) {
		/* Adopt: keep the other (non-controller) references. */
		json_t *refs = json_deep_copy(jx_path(tray, "metadata.ownerReferences"));
		if (!json_is_array(refs)) {
			json_decref(refs);
			refs = json_array();
		}
		json_array_append_new(refs, owner_ref(rack));
		json_object_set_new(json_object_get(p, "metadata"), "ownerReferences", refs);
	}
	*patch = p;
	return OP_TRAY_PATCH;
}

bool op_tray_owned_by(const json_t *tray, const json_t *rack)
{
	const json_t *ctl = controller_ref(tray);
	const char *uid = jx_str_or(rack, "metadata.uid", "");
	return ctl != NULL && uid[0] && strcmp(jx_str_or(ctl, "uid", ""), uid) == 0;
}

bool op_has_finalizer(const json_t *obj, const char *name)
{
	const json_t *f;
	size_t i;
	json_array_foreach(jx_path(obj, "metadata.finalizers"), i, f) {
		if (json_is_string(f) && strcmp(json_string_value(f), name) == 0)
			return true;
	}
	return false;
}

json_t *op_finalizer_patch(const json_t *obj, const char *name, bool want)
{
	json_t *list;
	const json_t *f;
	size_t i;

	if (op_has_finalizer(obj, name) == want)
		return NULL;
	list = json_array();
	json_array_foreach(jx_path(obj, "metadata.finalizers"), i, f) {
		if (!json_is_string(f) || strcmp(json_string_value(f), name) != 0)
			json_array_append(list, (json_t *)f);
	}
	if (want)
		json_array_append_new(list, json_string(name));
	return json_pack("{s:{s:s,s:o}}", "metadata", "resourceVersion",
	                 jx_str_or(obj, "metadata.resourceVersion", ""), "finalizers", list);
}
