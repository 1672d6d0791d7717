// SPDX-License-Identifier: Apache-2.0
// The Rack controller: keeps one owned ComputeTray per compute tray, labels
// and (when the rack is degraded) cordons the rack's Nodes, and writes the
// rack's status, only when something changed; its finalizer releases the
// Nodes and deletes the trays when the Rack goes. Level-based: every pass
// reads the caches and derives everything from them, the Rack's spec and
// its matrix through the api's parsers.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"

/* ---- watches: map any object to the racks it concerns ---- */

static void enqueue_rack(struct kube_workqueue *q, const char *rack)
{
	if (rack && rack[0])
		kube_workqueue_add(q, rack);
}

static void map_rack(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	(void)op;
	enqueue_rack(q, kube_obj_name(obj));
}

/* Trays and partitions name their rack in spec.rack. */
static void map_racked(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	(void)op;
	enqueue_rack(q, jx_str_or(obj, "spec.rack", ""));
}

/* The rack in the Node's label, and the racks that list it in
 * spec.computeTrays (the racks informer's node index: no scan). */
static void map_node(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	const json_t *labels = jx_path(obj, "metadata.labels");
	const json_t *r = json_is_object(labels) ? json_object_get(labels, OP_LABEL_RACK) : NULL;
	json_t *racks, *rk;
	size_t i;
	if (json_is_string(r))
		enqueue_rack(q, json_string_value(r));
	racks = kube_informer_index_keys(op->racks, OP_INDEX_RACK_NODE, kube_obj_name(obj));
	json_array_foreach(racks, i, rk)
		enqueue_rack(q, json_string_value(rk));
	json_decref(racks);
}

static const json_t *ready_status(const json_t *node)
{
	const json_t *c = kube_condition_find(node, "Ready");
	return c ? json_object_get(c, "status") : NULL;
}

/* Kubelet heartbeats change only status times: skip those. */
static bool node_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !(json_equal(jx_path(o, "metadata.labels"), jx_path(n, "metadata.labels")) &&
	         json_equal(jx_path(o, "metadata.annotations"),
	                    jx_path(n, "metadata.annotations")) &&
	         json_equal(jx_path(o, "spec"), jx_path(n, "spec")) &&
	         json_equal(ready_status(o), ready_status(n)));
}

/* Agent Leases are named after their ComputeTray. */
static void map_lease(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	json_t *t = kube_informer_get(op->trays, kube_obj_name(obj));
	if (t)
		enqueue_rack(q, jx_str_or(t, "spec.rack", ""));
	json_decref(t);
}

static void map_matrix(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	json_t *racks =
	        kube_informer_index_keys(op->racks, OP_INDEX_RACK_MATRIX, kube_obj_name(obj));
	json_t *r;
	size_t i;
	json_array_foreach(racks, i, r)
		enqueue_rack(q, json_string_value(r));
	json_decref(racks);
}

/* A Rack's own status writes bring no pass: a pass acts on its labels,
 * annotations, finalizers, deletion, spec and status.upgrade (the upgrade
 * controller's mark), and writes the rest of the status itself. */
static bool rack_changed(struct op *op, const json_t *o, const json_t *n)
{
	static const char *const paths[] = {"metadata.labels",
	                                    "metadata.annotations",
	                                    "metadata.finalizers",
	                                    "metadata.deletionTimestamp",
	                                    "spec",
	                                    "status.upgrade",
	                                    NULL};
	(void)op;
	for (const char *const *p = paths; *p; p++)
		if (!json_equal(jx_path(o, *p), jx_path(n, *p)) &&
		    (jx_path(o, *p) != NULL || jx_path(n, *p) != NULL))
			return true;
	return false;
}

/* A RackUpgrade matters here only when it goes (its mark in the Rack's
 * status.upgrade is then released): updates of its status bring no pass. */
static bool upgrade_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	(void)o;
	(void)n;
	return false;
}

static const struct op_watch rack_watches[] = {
        {.informer = OP_INFORMER(racks), .map = map_rack, .changed = rack_changed},
        {.informer = OP_INFORMER(trays), .map = map_racked},
        {.informer = OP_INFORMER(nodes), .map = map_node, .changed = node_changed},
        {.informer = OP_INFORMER(leases), .map = map_lease, .changed = op_lease_changed},
        {.informer = OP_INFORMER(matrices), .map = map_matrix},
        {.informer = OP_INFORMER(partitions), .map = map_racked},
        /* A RackUpgrade deleted mid-flight leaves its mark in status.upgrade. */
        {.informer = OP_INFORMER(upgrades), .map = map_racked, .changed = upgrade_changed},
};

/* ---- reconcile ---- */

/* Everything one pass reads, with the references it holds. */
struct rack_pass {
	json_t *rack;
	struct api_rack *spec;
	struct matrix *matrix; /* NULL: not known */
	json_t *parts;
	const json_t *trays[API_COMPUTE_TRAYS]; /* shared reads */
	const json_t *nodes[API_COMPUTE_TRAYS];
	char names[API_COMPUTE_TRAYS][64];
	char unmet[API_COMPUTE_TRAYS][160]; /* of --agent-node-selector, "" met */
	struct op_tray_in in[API_COMPUTE_TRAYS];
	unsigned n;
	int created;
};

static void pass_clear(struct rack_pass *p)
{
	json_decref(p->rack);
	api_rack_free(p->spec);
	matrix_free(p->matrix);
	json_decref(p->parts);
	for (unsigned i = 0; i < API_COMPUTE_TRAYS; i++) {
		kube_shared_put(p->trays[i]);
		kube_shared_put(p->nodes[i]);
	}
}

/* The RackPartition of this rack whose spec.trays lists index, or "". */
static const char *partition_of(const json_t *parts, const char *rack, int index)
{
	const json_t *p, *t;
	size_t i, j;
	json_array_foreach(parts, i, p) {
		if (strcmp(jx_str_or(p, "spec.rack", ""), rack) != 0 ||
		    json_is_string(jx_path(p, "metadata.deletionTimestamp")))
			continue;
		json_array_foreach(jx_path(p, "spec.trays"), j, t)
			if (json_integer_value(t) == index)
				return kube_obj_name(p);
	}
	return "";
}

/* A tray created before the matrix was in the cache has no driver in its
 * spec: give it the stack's once the matrix is known. Only an empty one is
 * filled; a version in the spec belongs to whoever wrote it (an upgrade). */
static enum nv_err driver_fill(struct op *op, struct rack_pass *p, unsigned i,
                               const char *desired_driver, struct kube_status *st)
{
	json_t *patch;
	enum nv_err rc;

	if (desired_driver[0] == '\0' ||
	    jx_str_or(p->trays[i], "spec.driver.version", "")[0] != '\0')
		return NV_OK;
	patch = json_pack("{s:{s:{s:s}}}", "spec", "driver", "version", desired_driver);
	rc = kube_patch(op->c, &OP_RES_TRAYS, NULL, p->names[i],
	                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, NULL, st);
	json_decref(patch);
	if (rc == NV_OK)
		log_info(RACK_COMP, "tray driver filled in from the matrix",
		         "rack=%s tray=%s driver=%s", kube_obj_name(p->rack), p->names[i],
		         desired_driver);
	return rc;
}

/* Creates, adopts or replaces the tray at slot i. */
static enum nv_err ensure_tray(struct op *op, struct rack_pass *p, unsigned i,
                               const char *desired_driver)
{
	const char *rname = kube_obj_name(p->rack);
	struct op_tray_in *in = &p->in[i];
	struct kube_status st;
	json_t *patch = NULL, *obj;
	enum nv_err rc = NV_OK;

	if (p->trays[i] == NULL) {
		obj = op_tray_build(p->rack, in->index, in->node_name, desired_driver);
		rc = kube_create(op->c, &OP_RES_TRAYS, NULL, obj, NULL, &st);
		json_decref(obj);
		if (rc == NV_OK) {
			p->created++;
			log_info(RACK_COMP, "tray created", "rack=%s tray=%s node=%s", rname,
			         p->names[i], in->node_name);
		}
		return rc == NV_E_EXISTS ? NV_OK : rc; /* the cache lags: next pass sees it */
	}
	switch (op_tray_check(p->trays[i], p->rack, in->index, in->node_name, &patch)) {
	case OP_TRAY_OK:
		rc = driver_fill(op, p, i, desired_driver, &st);
		break;
	case OP_TRAY_PATCH:
		rc = kube_patch(op->c, &OP_RES_TRAYS, NULL, p->names[i],
		                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, NULL,
		                &st);
		json_decref(patch);
		if (rc == NV_OK)
			log_info(RACK_COMP, "tray adopted", "rack=%s tray=%s", rname, p->names[i]);
		break;
	case OP_TRAY_RECREATE:
		op_event(op, p->rack, "Normal", "TrayReplaced", "Replace",
		         "ComputeTray %s names another node; replacing it for %s", p->names[i],
		         in->node_name);
		rc = kube_delete(
		        op->c, &OP_RES_TRAYS, NULL, p->names[i],
		        &(struct kube_delete_opts){
		                .grace_period_s = -1,
		                .precondition_uid = jx_str_or(p->trays[i], "metadata.uid", NULL)},
		        &st);
		if (rc == NV_E_NOT_FOUND)
			rc = NV_OK;
		break;
	case OP_TRAY_FOREIGN:
		log_warn(RACK_COMP, "tray owned by another controller", "rack=%s tray=%s", rname,
		         p->names[i]);
		break;
	}
	if (rc != NV_OK)
		log_warn(RACK_COMP, "tray write failed", "rack=%s tray=%s err=%s msg=\"%s\"", rname,
		         p->names[i], nv_err_name(rc), st.message);
	return rc;
}

static enum nv_err node_patch(struct op *op, const char *node, const json_t *patch)
{
	struct kube_status st;
	enum nv_err rc =
	        kube_patch(op->c, &KUBE_RES_NODES, NULL, node,
	                   &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, NULL, &st);
	if (rc != NV_OK)
		log_warn(RACK_COMP, "node patch failed", "node=%s err=%s msg=\"%s\"", node,
		         nv_err_name(rc), st.message);
	return rc;
}

/* Labels and cordons of the rack's Nodes; counts cordon changes made. */
static enum nv_err nodes_sync(struct op *op, struct rack_pass *p, const struct op_rack_eval *ev,
                              bool want_cordon, int *cordoned, int *uncordoned)
{
	const char *rname = kube_obj_name(p->rack);
	enum nv_err worst = NV_OK, rc;
	char owner[128];
	json_t *patch;

	snprintf(owner, sizeof(owner), "rack/%s", rname);
	for (unsigned i = 0; i < p->n; i++) {
		if (p->nodes[i] == NULL)
			continue;
		const struct op_tray_eval *t = &ev->trays[i];
		patch = op_node_labels_patch(p->nodes[i], rname, t->index, t->clique, t->partition);
		if (patch && (rc = node_patch(op, t->node, patch)) != NV_OK)
			worst = rc;
		json_decref(patch);
		patch = drain_cordon_patch(p->nodes[i], owner, want_cordon);
		if (patch) {
			if ((rc = node_patch(op, t->node, patch)) != NV_OK)
				worst = rc;
			else if (want_cordon)
				(*cordoned)++;
			else
				(*uncordoned)++;
		}
		json_decref(patch);
	}
	return worst;
}

/* Nodes still labelled with this rack that it no longer lists (or all of
 * them when the rack is gone): drop our labels and our cordon. */
static enum nv_err nodes_release(struct op *op, const char *rack, const struct rack_pass *p)
{
	/* Names first: the Nodes the pass lists (every one, mostly) are not
	 * read again. */
	json_t *names = kube_informer_index_keys(op->nodes, "rack", rack), *name, *n, *patch;
	enum nv_err worst = NV_OK, rc;
	char owner[128];
	size_t i;

	snprintf(owner, sizeof(owner), "rack/%s", rack);
	json_array_foreach(names, i, name) {
		bool listed = false;
		for (unsigned k = 0; p && k < p->n; k++)
			listed |= strcmp(p->in[k].node_name, json_string_value(name)) == 0;
		if (listed || (n = kube_informer_get(op->nodes, json_string_value(name))) == NULL)
			continue;
		if ((patch = drain_cordon_patch(n, owner, false)) != NULL) {
			if ((rc = node_patch(op, kube_obj_name(n), patch)) != NV_OK)
				worst = rc;
			json_decref(patch);
		}
		if ((patch = op_node_labels_patch(n, NULL, 0, NULL, NULL)) != NULL) {
			if ((rc = node_patch(op, kube_obj_name(n), patch)) != NV_OK)
				worst = rc;
			json_decref(patch);
		}
		log_info(RACK_COMP, "node released", "rack=%s node=%s", rack, kube_obj_name(n));
		json_decref(n);
	}
	json_decref(names);
	return worst;
}

/* Adds (want) or removes our finalizer on the Rack. */
static enum nv_err rack_finalizer_set(struct op *op, const json_t *rack, bool want)
{
	json_t *patch = op_finalizer_patch(rack, OP_FINALIZER_RACK, want);
	struct kube_status st;
	enum nv_err rc = NV_OK;
	if (patch == NULL)
		return NV_OK;
	rc = kube_patch(op->c, &OP_RES_RACKS, NULL, kube_obj_name(rack),
	                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, NULL, &st);
	json_decref(patch);
	if (rc != NV_OK && rc != NV_E_CONFLICT)
		log_warn(RACK_COMP, "finalizer write failed", "rack=%s err=%s msg=\"%s\"",
		         kube_obj_name(rack), nv_err_name(rc), st.message);
	return rc;
}

/* Deletes the ComputeTrays this Rack (this uid) controls. The apiserver's
 * garbage collector would do it after the Rack is gone, but only where a
 * kube-controller-manager runs; deleting them here makes the release the
 * same everywhere, and the trays are gone before the Rack is. */
static enum nv_err trays_delete(struct op *op, const json_t *rack, int *deleted)
{
	json_t *trays = kube_informer_list(op->trays), *t;
	enum nv_err worst = NV_OK, rc;
	struct kube_status st;
	size_t i;

	json_array_foreach(trays, i, t) {
		if (!op_tray_owned_by(t, rack) ||
		    json_is_string(jx_path(t, "metadata.deletionTimestamp")))
			continue;
		rc = kube_delete(op->c, &OP_RES_TRAYS, NULL, kube_obj_name(t),
		                 &(struct kube_delete_opts){
		                         .grace_period_s = -1,
		                         .precondition_uid = jx_str_or(t, "metadata.uid", NULL)},
		                 &st);
		if (rc == NV_OK)
			(*deleted)++;
		else if (rc != NV_E_NOT_FOUND) {
			log_warn(RACK_COMP, "tray delete failed",
			         "rack=%s tray=%s err=%s msg=\"%s\"", kube_obj_name(rack),
			         kube_obj_name(t), nv_err_name(rc), st.message);
			worst = rc;
		}
	}
	json_decref(trays);
	return worst;
}

/* A Rack being deleted: release its Nodes (our labels, our cordons only),
 * delete its trays, then let it go. Any failure keeps the finalizer and the
 * pass is retried. */
static enum nv_err rack_finalize(struct op *op, const json_t *rack)
{
	const char *rname = kube_obj_name(rack);
	json_t *nodes = kube_informer_by_index(op->nodes, "rack", rname);
	size_t nnodes = json_array_size(nodes);
	int deleted = 0;
	enum nv_err rc, r2;

	json_decref(nodes);
	rc = nodes_release(op, rname, NULL);
	if ((r2 = trays_delete(op, rack, &deleted)) != NV_OK)
		rc = r2;
	if (rc != NV_OK)
		return rc;
	if (nnodes > 0 || deleted > 0)
		op_event(op, rack, "Normal", "RackReleased", "Release",
		         "rack deleted: released %zu Nodes (labels and this rack's cordons), "
		         "deleted %d ComputeTrays",
		         nnodes, deleted);
	rc = rack_finalizer_set(op, rack, false);
	if (rc == NV_OK)
		log_info(RACK_COMP, "released", "rack=%s nodes=%zu trays=%d", rname, nnodes,
		         deleted);
	return rc;
}

/* The Rack's spec, read with the api's parser. The apiserver's schema and
 * the admission webhook let no spec through that it refuses; should one
 * come, it is reported and left alone until the object changes. */
static enum nv_err spec_read(struct op *op, struct rack_pass *p)
{
	struct api_errors *errs = op_spec_errors_new();
	enum nv_err rc = api_rack_parse(p->rack, &p->spec, errs);
	return op_spec_report_take(op, p->rack, RACK_COMP, "rack", "Reconcile", rc, errs);
}

/* The matrix the Rack names, parsed; NULL while it is not in the cache.
 * The webhook admits no matrix the parser refuses; one that comes anyway
 * is logged and counts as not known. */
static struct matrix *matrix_read(struct op *op, const struct api_rack *r)
{
	json_t *obj = kube_informer_get(op->matrices, r->matrix_name);
	struct api_errors *errs;
	struct matrix *m = NULL;

	if (obj == NULL)
		return NULL;
	errs = op_spec_errors_new();
	if (api_matrix_parse(obj, &m, errs) != NV_OK)
		log_warn(RACK_COMP, "matrix does not parse", "rack=%s matrix=%s error=\"%s: %s\"",
		         r->meta.name, r->matrix_name, errs->n ? errs->list[0].path : "",
		         errs->n ? errs->list[0].msg : "");
	free(errs);
	json_decref(obj);
	return m;
}

/* The requirement of the agent's node selector that the Node fails, into
 * out ("" when met, no selector, or no Node). The labels this controller
 * puts on the Node count as there: the selector's default is one of them,
 * and a new rack's Nodes get them on its first pass. */
static void agent_unmet(const struct op *op, const json_t *node, const char *rack, int index,
                        char *out, size_t cap)
{
	json_t *labels;
	char idx[16];

	out[0] = '\0';
	if (kube_selector_empty(op->agent_sel) || node == NULL)
		return;
	labels = json_deep_copy(jx_path(node, "metadata.labels"));
	if (!json_is_object(labels)) {
		json_decref(labels);
		labels = json_object();
	}
	snprintf(idx, sizeof(idx), "%d", index);
	json_object_set_new(labels, OP_LABEL_RACK, json_string(rack));
	json_object_set_new(labels, OP_LABEL_TRAY_INDEX, json_string(idx));
	(void)kube_selector_match(op->agent_sel, labels, out, cap);
	json_decref(labels);
}

static void pass_load(struct op *op, struct rack_pass *p)
{
	const char *rname = kube_obj_name(p->rack);

	p->matrix = matrix_read(op, p->spec);
	p->parts = kube_informer_by_index(op->partitions, OP_INDEX_PARTITION_RACK, rname);
	for (unsigned i = 0; i < p->spec->ncompute && p->n < API_COMPUTE_TRAYS; i++) {
		const struct api_rack_compute_tray *t = &p->spec->compute[i];
		struct op_tray_in *in = &p->in[p->n];
		in->index = t->index;
		in->node_name = t->node;
		op_tray_name(rname, in->index, p->names[p->n]);
		p->trays[p->n] = kube_informer_get_shared(op->trays, p->names[p->n]);
		p->nodes[p->n] = kube_informer_get_shared(op->nodes, in->node_name);
		in->tray = p->trays[p->n];
		in->node = p->nodes[p->n];
		in->lease_renew_ms = op_lease_renew_ms(op, p->names[p->n]);
		in->partition = partition_of(p->parts, rname, in->index);
		agent_unmet(op, in->node, rname, in->index, p->unmet[p->n], sizeof(p->unmet[0]));
		in->agent_unmet = p->unmet[p->n];
		p->n++;
	}
}

/* Whether the Rack's last written status already said the tray at index
 * had no agent scheduled: the event is for the change, not every pass. */
static bool was_unscheduled(const json_t *rack, int index)
{
	const json_t *t;
	size_t i;

	json_array_foreach(jx_path(rack, "status.trays"), i, t)
		if (json_integer_value(json_object_get(t, "index")) == index)
			return strcmp(jx_str_or(t, "reason", ""), "AgentNotScheduled") == 0;
	return false;
}

/* Events for the decisions a person wants to know about. An unscheduled
 * agent is told once, by the pass whose status write says so first (a
 * pass whose write waits for --rack-status-interval leaves it to that
 * one). */
static void rack_events(struct op *op, struct rack_pass *p, const struct op_rack_eval *ev,
                        int cordoned, int uncordoned, bool status_held)
{
	char list[512] = "";
	size_t len = 0;
	for (unsigned i = 0; i < ev->ntrays && len + 1 < sizeof(list); i++) {
		const struct op_tray_eval *t = &ev->trays[i];
		if (t->ready || t->pending)
			continue;
		int w = snprintf(list + len, sizeof(list) - len, "%st%02d %s", len ? ", " : "",
		                 t->index, t->why ? t->why : "NotReady");
		len += w > 0 ? (size_t)w : 0;
	}
	if (p->created > 0)
		op_event(op, p->rack, "Normal", "TraysCreated", "Create", "created %d ComputeTrays",
		         p->created);
	for (unsigned i = 0; i < p->n; i++)
		if (!status_held && p->in[i].agent_unmet[0] &&
		    !was_unscheduled(p->rack, p->in[i].index))
			op_event(op, p->rack, "Warning", "AgentNotScheduled", "Check",
			         "tray t%02d: Node %s does not match the agent's node selector (it "
			         "lacks %s), so no agent runs there; label the Node, or widen the "
			         "chart's agent.trayNodeLabel / agent.nodeSelector",
			         p->in[i].index, p->in[i].node_name, p->in[i].agent_unmet);
	if (cordoned > 0)
		op_event(op, p->rack, "Warning", "RackCordoned", "Cordon",
		         "%d trays unavailable, threshold %d (%s): cordoned %d Nodes", ev->counted,
		         ev->threshold, list, cordoned);
	if (uncordoned > 0)
		op_event(op, p->rack, "Normal", "RackUncordoned", "Uncordon",
		         "%d tray%s unavailable, threshold %d: uncordoned the %d Nodes this rack "
		         "had cordoned",
		         ev->counted, ev->counted == 1 ? "" : "s", ev->threshold, uncordoned);
}

/* status.upgrade names the RackUpgrade acting on the rack, written by the
 * upgrade controller, which cannot take it back once that object is
 * deleted: a mark whose upgrade the API server no longer has (asked, not
 * only the cache, which may lag the Rack's) is dropped from want, so that
 * UpgradeInProgress turns False. Its trays keep their maintenance state.
 * The mark of a finished upgrade (Completed, Aborted, RolledBack) says none is in
 * progress and stays. */
static void upgrade_gone(struct op *op, struct rack_pass *p, json_t *want)
{
	const char *name = jx_str_or(p->rack, "status.upgrade.name", "");
	const char *phase = jx_str_or(p->rack, "status.upgrade.phase", "");
	json_t *u = NULL;
	struct kube_status st;
	bool gone;

	/* A finished upgrade's mark says no upgrade is in progress: kept. */
	if (name[0] == '\0' || api_upgrade_phase_name_final(phase))
		return;
	if ((u = kube_informer_get(op->upgrades, name)) != NULL) {
		json_decref(u);
		return;
	}
	gone = kube_informer_synced(op->upgrades) &&
	       kube_get(op->c, &OP_RES_UPGRADES, NULL, name, &u, &st) == NV_E_NOT_FOUND;
	json_decref(u);
	if (!gone)
		return;
	op_event(
	        op, p->rack, "Warning", "UpgradeGone", "Reconcile",
	        "RackUpgrade %s was deleted in phase %s; no upgrade acts on the rack now. Trays it "
	        "had put in maintenance stay so until someone releases them",
	        name, phase);
	json_object_del(json_object_get(want, "status"), "upgrade");
}

/* --rack-status-interval. The status sums up the rack's 18 trays, so
 * during an upgrade each tray's maintenance, readiness and driver change
 * would otherwise be one write of the whole status (and one watch event to
 * every reader of Racks). A change inside the interval after the last
 * write waits for its end, the pass requeued then, and goes out with
 * whatever else changed meanwhile; one after a quiet interval, or one that
 * flips a condition, goes out at once. Returns how long the write must
 * still wait; 0: now. */
static int64_t status_hold_ms(struct op *op, const char *rack, int64_t now)
{
	int64_t every = op->cfg.rack_status_interval_ms, last;
	if (every <= 0)
		return 0;
	pthread_mutex_lock(&op->rack_mu);
	last = json_integer_value(json_object_get(op->rack_written, rack));
	pthread_mutex_unlock(&op->rack_mu);
	return last > 0 && now - last < every ? last + every - now : 0;
}

/* Whether a condition of want is new or has another status than in
 * have: such a change (Ready, Degraded, UpgradeInProgress flipping) goes
 * out at once, only the detail waits for the interval. */
static bool conditions_flipped(const json_t *have, const json_t *want)
{
	const json_t *c;
	size_t i;
	json_array_foreach(jx_path(want, "status.conditions"), i, c) {
		const json_t *o = kube_condition_find(have, jx_str_or(c, "type", ""));
		if (o == NULL ||
		    !json_equal(json_object_get(o, "status"), json_object_get(c, "status")))
			return true;
	}
	return false;
}

/* Records the write at now; now 0 forgets the rack (gone). */
static void status_written(struct op *op, const char *rack, int64_t now)
{
	pthread_mutex_lock(&op->rack_mu);
	if (now > 0)
		json_object_set_new(op->rack_written, rack, json_integer(now));
	else
		json_object_del(op->rack_written, rack);
	pthread_mutex_unlock(&op->rack_mu);
}

/* Writes the status when it changed and the interval allows; *hold_ms is
 * set to the wait when it does not. */
static enum nv_err status_sync(struct op *op, struct rack_pass *p, const struct op_rack_eval *ev,
                               bool cordoned, int64_t *hold_ms)
{
	json_t *want = json_deep_copy(p->rack), *patch;
	struct kube_status st;
	enum nv_err rc = NV_OK;
	int64_t now = time_mono_ms();

	*hold_ms = 0;
	upgrade_gone(op, p, want);
	op_rack_status_apply(want, ev, cordoned, time_wall_ms());
	patch = op_rack_status_patch(p->rack, want);
	if (patch && !conditions_flipped(p->rack, want) &&
	    (*hold_ms = status_hold_ms(op, kube_obj_name(p->rack), now)) > 0) {
		log_debug(RACK_COMP, "status write held", "rack=%s for_ms=%lld",
		          kube_obj_name(p->rack), (long long)*hold_ms);
	} else if (patch) {
		rc = kube_patch(op->c, &OP_RES_RACKS, NULL, kube_obj_name(p->rack),
		                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE,
		                                          .subresource = "status"},
		                patch, NULL, &st);
		if (rc == NV_OK) {
			status_written(op, kube_obj_name(p->rack), now);
			log_info(RACK_COMP, "status written",
			         "rack=%s ready=%d unavailable=%d stack=%s fabric=%s degraded=%d",
			         kube_obj_name(p->rack), ev->ready, ev->unavailable,
			         ev->stack[0] ? ev->stack : "-", ev->fabric, ev->degraded);
		} else if (rc != NV_E_CONFLICT)
			log_warn(RACK_COMP, "status write failed", "rack=%s err=%s msg=\"%s\"",
			         kube_obj_name(p->rack), nv_err_name(rc), st.message);
	}
	json_decref(patch);
	json_decref(want);
	return rc;
}

static struct kube_result rack_reconcile(void *ud, const char *key)
{
	struct op *op = ud;
	struct rack_pass p;
	struct op_rack_eval ev;
	int cordoned = 0, uncordoned = 0;
	int64_t hold_ms = 0;
	enum nv_err rc = NV_OK, r2;
	struct kube_result res = {0};

	memset(&p, 0, sizeof(p));
	p.rack = kube_informer_get(op->racks, key);
	if (p.rack == NULL) {
		/* Gone without our finalizer (removed by hand): release what is left. */
		rc = nodes_release(op, key, NULL);
		op_feed_rack_gone(op, key);
		status_written(op, key, 0);
		return (struct kube_result){.err = rc};
	}
	if (json_is_string(jx_path(p.rack, "metadata.deletionTimestamp"))) {
		if (op_has_finalizer(p.rack, OP_FINALIZER_RACK))
			rc = rack_finalize(op, p.rack);
		pass_clear(&p);
		return (struct kube_result){.err = rc};
	}
	if (!op_has_finalizer(p.rack, OP_FINALIZER_RACK)) { /* the update brings us back */
		rc = rack_finalizer_set(op, p.rack, true);
		pass_clear(&p);
		return (struct kube_result){.err = rc};
	}
	if ((rc = spec_read(op, &p)) != NV_OK) {
		pass_clear(&p);
		return (struct kube_result){.err = rc, .terminal = true};
	}
	pass_load(op, &p);
	op_rack_evaluate(p.spec, p.matrix, p.in, p.n, time_wall_ms(), op->cfg.heartbeat_timeout_ms,
	                 &ev);
	for (unsigned i = 0; i < p.n; i++)
		if ((r2 = ensure_tray(op, &p, i, ev.desired_driver)) != NV_OK)
			rc = r2;
	bool want_cordon = ev.degraded && ev.cordon_policy;
	if ((r2 = nodes_sync(op, &p, &ev, want_cordon, &cordoned, &uncordoned)) != NV_OK)
		rc = r2;
	if ((r2 = nodes_release(op, key, &p)) != NV_OK)
		rc = r2;
	/* The status says "cordoned" only once every Node is. */
	if ((r2 = status_sync(op, &p, &ev, want_cordon && rc == NV_OK, &hold_ms)) != NV_OK)
		rc = r2;
	rack_events(op, &p, &ev, cordoned, uncordoned, hold_ms > 0);
	op_feed_rack(op, p.rack, &ev, p.in, want_cordon);
	if (rc == NV_OK && ev.next_check_ms > 0) {
		int64_t d = ev.next_check_ms - time_wall_ms();
		res.requeue_after_ms = d > 1000 ? d : 1000;
	}
	if (rc == NV_OK && hold_ms > 0 &&
	    (res.requeue_after_ms == 0 || hold_ms < res.requeue_after_ms))
		res.requeue_after_ms = hold_ms;
	res.err = rc;
	pass_clear(&p);
	return res;
}

const struct op_controller op_rack_controller = {
        .name = RACK_CONTROLLER,
        .comp = RACK_COMP,
        .workers = OP_CONFIG(rack_workers),
        .watches = rack_watches,
        .nwatches = sizeof(rack_watches) / sizeof(rack_watches[0]),
        .reconcile = rack_reconcile,
};
