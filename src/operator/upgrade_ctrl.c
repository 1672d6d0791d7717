// SPDX-License-Identifier: Apache-2.0
// The RackUpgrade controller: each pass reads the upgrade's status (its
// durable record), asks the engine (upgrade_eval.c) for the next status and
// one action, writes the status through the status subresource with the
// resourceVersion it read, and only then acts: maintenance and driver in
// ComputeTray specs, validation runs, drains and releases of Nodes. A crash
// between the write and the action repeats an idempotent action at most; a
// step recorded as done is never run again.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/drain.h"
#include "nvl72/operator_upgrade.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"

/* Opens --oob-backend; none leaves op->oob NULL, and upgrades whose plans
 * need it halt before touching a tray (upgrade_eval.c). */
static enum nv_err upgrade_oob_open(struct op *op)
{
	struct oob_config c;
	struct fabric_status st;
	const char *name = op->cfg.oob_backend;
	enum nv_err rc = NV_OK;

	oob_config_init(&c);
	op->oob_poll_ms = c.poll_interval_ms;
	if (name == NULL || name[0] == '\0' || strcmp(name, "none") == 0) {
		log_info(UPGRADE_COMP,
		         "no out-of-band backend: upgrades with switch-tray or "
		         "firmware steps halt",
		         "backend=none");
		return NV_OK;
	}
	memset(&st, 0, sizeof(st));
	if (str_copy(c.backend, sizeof(c.backend), name) != NV_OK ||
	    str_copy(c.sim_root, sizeof(c.sim_root),
	             op->cfg.oob_sim_root ? op->cfg.oob_sim_root : "") != NV_OK)
		rc = NV_E_CONFIG;
	c.sim_delay_ms = (long)op->cfg.oob_sim_delay_ms;
	if (rc == NV_OK)
		rc = oob_backend_new(&c, &op->oob, &st);
	if (rc != NV_OK)
		log_error(UPGRADE_COMP, "out-of-band backend not usable",
		          "backend=%s err=%s msg=\"%s\"", name, nv_err_name(rc), st.message);
	else
		log_info(UPGRADE_COMP, "out-of-band backend open", "backend=%s", name);
	return rc;
}

/* The one clock of the upgrade controller. */
static int64_t upgrade_clock(void)
{
	return time_wall_ms();
}

/* The longest a pass waiting on the wall clock (a notice, a window, an
 * earliest start, a soak) sleeps before it reads the clock again. Requeues
 * run on the monotonic clock, so without this a wall clock stepped forward
 * (NTP after a resume, a corrected drift) past the awaited time would be
 * noticed only when the sleep computed from the old clock ran out: hours
 * or days. Stepped back, the pass simply finds it is not time yet. */
#define UPGRADE_CLOCK_RECHECK_MS 60000

/* The most steps one pass ends and starts (a wave's Uncordon, the next
 * wave's Drain, its Apply, ...) before it leaves the rest to the next. */
#define UPGRADE_ROUNDS_MAX 8

/* ---- watches ---- */

/* The parent named as controller among obj's owners, or NULL. */
static const char *parent_of(const json_t *obj, const char **uid)
{
	const json_t *refs = jx_path(obj, "metadata.ownerReferences");
	for (size_t i = 0; i < json_array_size(refs); i++) {
		const json_t *r = json_array_get(refs, i);
		if (strcmp(jx_str_or(r, "kind", ""), "RackUpgrade") == 0 &&
		    json_is_true(json_object_get(r, "controller"))) {
			if (uid)
				*uid = jx_str_or(r, "uid", "");
			return jx_str_or(r, "name", "");
		}
	}
	return NULL;
}

/* The upgrades of a rack: all of them (index OP_INDEX_UPGRADE_RACK), or
 * those in flight (OP_INDEX_UPGRADE_ACTIVE): a finished one reads only the
 * Rack (its stack) and itself. */
static void enqueue_rack(struct op *op, const char *rack, const char *index,
                         struct kube_workqueue *q)
{
	json_t *keys, *k;
	size_t i;
	if (rack == NULL || rack[0] == '\0')
		return;
	keys = kube_informer_index_keys(op->upgrades, index, rack);
	json_array_foreach(keys, i, k)
		kube_workqueue_add(q, json_string_value(k));
	json_decref(keys);
}

/* An upgrade, and its parent when a selector upgrade owns it. */
static void map_upgrade(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	const char *parent = parent_of(obj, NULL);
	(void)op;
	kube_workqueue_add(q, kube_obj_name(obj));
	if (parent != NULL && parent[0] != '\0')
		kube_workqueue_add(q, parent);
}

static void map_approval(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	const char *u = jx_str_or(obj, "spec.upgrade", "");
	(void)op;
	if (u[0])
		kube_workqueue_add(q, u);
}

/* Trays and partitions name their rack in spec.rack. */
static void map_racked(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	enqueue_rack(op, jx_str_or(obj, "spec.rack", ""), OP_INDEX_UPGRADE_ACTIVE, q);
}

static bool racked_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !(json_equal(json_object_get(o, "spec"), json_object_get(n, "spec")) &&
	         json_equal(json_object_get(o, "status"), json_object_get(n, "status")));
}

static void map_rack(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	enqueue_rack(op, kube_obj_name(obj), OP_INDEX_UPGRADE_RACK, q);
}

static bool rack_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !(json_equal(json_object_get(o, "spec"), json_object_get(n, "spec")) &&
	         json_equal(jx_path(o, "status.stack"), jx_path(n, "status.stack")));
}

/* Node Readiness and cordons change what a wave may take: updates only. */
static void map_node(struct op *op, const json_t *o, const json_t *n, struct kube_workqueue *q)
{
	if (o && n)
		enqueue_rack(op, jx_str_or(n, "metadata.labels." OP_LABEL_RACK, ""),
		             OP_INDEX_UPGRADE_ACTIVE, q);
}

static bool node_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !(json_equal(jx_path(o, "spec.unschedulable"), jx_path(n, "spec.unschedulable")) &&
	         strcmp(op_node_ready(o), op_node_ready(n)) == 0);
}

static const struct op_watch upgrade_watches[] = {
        {.informer = OP_INFORMER(upgrades), .map = map_upgrade},
        {.informer = OP_INFORMER(approvals), .map = map_approval},
        {.informer = OP_INFORMER(trays), .map = map_racked, .changed = racked_changed},
        {.informer = OP_INFORMER(partitions), .map = map_racked, .changed = racked_changed},
        {.informer = OP_INFORMER(racks), .map = map_rack, .changed = rack_changed},
        {.informer = OP_INFORMER(nodes), .map2 = map_node, .changed = node_changed},
};

/* ---- one pass's inputs ---- */

struct upg_pass {
	json_t *obj; /* the RackUpgrade, then as last written */
	struct api_rack_upgrade *u;
	struct api_rack *rack;
	json_t *rack_obj;
	struct matrix *m;
	const json_t **trays; /* this rack's ComputeTrays (shared reads) */
	const json_t **nodes; /* their Nodes, by position in trays */
	struct op_upgrade_tray *tin;
	unsigned ntin;
	struct api_upgrade_approval **appr;
	unsigned nappr;
	struct api_rack_partition **parts;
	unsigned nparts;
	char owner[96];
	char (*nv)[OP_NVIDIA_NAME_MAX]; /* the NVIDIA ComputeDomain of each tray, by position */
	char nv_why[512];               /* why NVIDIA's ComputeDomains are unread, "" */
	const char *marked;             /* the phase rack_mark last wrote, or NULL */
};

static void pass_clear(struct upg_pass *p)
{
	for (unsigned i = 0; i < p->ntin; i++) {
		kube_shared_put(p->trays[i]);
		kube_shared_put(p->nodes[i]);
	}
	free(p->trays);
	free(p->nv);
	free(p->nodes);
	free(p->tin);
	for (unsigned i = 0; i < p->nappr; i++)
		api_upgrade_approval_free(p->appr[i]);
	free(p->appr);
	for (unsigned i = 0; i < p->nparts; i++)
		api_rack_partition_free(p->parts[i]);
	free(p->parts);
	matrix_free(p->m);
	api_rack_free(p->rack);
	json_decref(p->rack_obj);
	api_rack_upgrade_free(p->u);
	json_decref(p->obj);
}

static const char *cond_reason(const json_t *obj, const char *type)
{
	const json_t *c = kube_condition_find(obj, type);
	return c ? jx_str_or(c, "reason", "") : "";
}

/* A condition's message unless it is True ("" then, or when absent). */
static const char *cond_why(const json_t *obj, const char *type)
{
	const json_t *c = kube_condition_find(obj, type);
	return c && strcmp(jx_str_or(c, "status", ""), "True") != 0 ? jx_str_or(c, "message", "")
	                                                            : "";
}

/* Whether the tray and its Node report Ready: up, once out of maintenance
 * and schedulable. */
static bool tray_up(const json_t *t, const json_t *node)
{
	return kube_condition_is_true(t, "Ready") && node &&
	       strcmp(op_node_ready(node), "True") == 0;
}

static void tray_in(const json_t *t, const json_t *node, struct op_upgrade_tray *o)
{
	const json_t *bw = jx_path(t, "status.validation.busBandwidthGbps");
	o->index = (int)json_integer_value(jx_path(t, "spec.index"));
	o->node = jx_str_or(t, "spec.node", "");
	o->present = true;
	o->available = tray_up(t, node) && !json_is_true(jx_path(node, "spec.unschedulable")) &&
	               strcmp(jx_str_or(t, "spec.maintenance.state", "None"), "None") == 0;
	o->driver = jx_str_or(t, "status.driver.version", "");
	o->driver_ready = kube_condition_is_true(t, "DriverReady");
	o->driver_failed = strcmp(cond_reason(t, "DriverReady"), "ChangeFailed") == 0;
	o->driver_why = cond_why(t, "DriverReady");
	o->fabric_state = jx_str_or(t, "status.fabric.state", "");
	o->fabric_health = jx_str_or(t, "status.fabric.healthSummary", "");
	o->fabric_source = jx_str_or(t, "status.fabric.healthSource", "");
	o->fabric_why = cond_why(t, "FabricHealthy");
	o->has_imex = json_is_object(jx_path(t, "spec.imex"));
	o->imex_domain = jx_str_or(t, "status.imex.domainState", "");
	o->maint = jx_str_or(t, "spec.maintenance.state", "None");
	o->maint_upgrade = jx_str_or(t, "spec.maintenance.upgrade.name", "");
	o->validation_id = jx_str_or(t, "status.validation.id", "");
	o->validation_phase = jx_str_or(t, "status.validation.phase", "");
	o->validation_busbw = json_is_number(bw) ? (int)json_number_value(bw) : 0;
	o->validation_transport = jx_str_or(t, "status.validation.transport", "");
	o->validation_message = jx_str_or(t, "status.validation.message", "");
}

/* The trays of an action the pass just finished, as the cache will show
 * them once its writes come back: a drained tray is down; a released one
 * (uncordoned, out of maintenance) is up when it and its Node are Ready.
 * The next round of the same pass plans the next wave from these. */
static void trays_acted(struct upg_pass *p, const struct op_upgrade_out *a)
{
	for (unsigned i = 0; i < p->ntin; i++) {
		struct op_upgrade_tray *o = &p->tin[i];
		if (o->index < 1 || o->index > API_COMPUTE_TRAYS || !(a->trays & (1u << o->index)))
			continue;
		if (a->act == OP_UPG_DRAIN) {
			o->available = false;
			o->maint = "Draining";
		} else if (a->act == OP_UPG_RELEASE) {
			o->available = tray_up(p->trays[i], p->nodes[i]);
			o->maint = "None";
			o->maint_upgrade = "";
		}
	}
}

/* An approval counts only when it is bound to this very upgrade (the
 * webhook's stamp of its UID and target, created after it) and its stamped
 * user is in the windowOwner group of its layer; a layer without a
 * windowOwner counts none (see api_upgrade_approval_counts). */
static bool approval_counts(const struct upg_pass *p, const struct api_upgrade_approval *a)
{
	char why[512];
	if (api_upgrade_approval_counts(a, p->u, p->rack, why, sizeof(why)))
		return true;
	log_info(UPGRADE_COMP, "approval not counted",
	         "approval=%s upgrade=%s user=\"%s\" why=\"%s\"", a->meta.name, p->u->meta.name,
	         a->approved_by, why);
	return false;
}

/* Which trays NVIDIA's ComputeDomains use (read only, while served): a
 * step that would drain or change one holds (upgrade_eval.c). */
static void nvidia_load(struct op *op, struct upg_pass *p)
{
	const char **nodes = xcalloc(p->ntin + 1, sizeof(*nodes));

	p->nv = xcalloc(p->ntin + 1, sizeof(*p->nv));
	for (unsigned i = 0; i < p->ntin; i++)
		nodes[i] = p->tin[i].node;
	if (op_nvidia_busy(op, nodes, p->ntin, p->nv, p->nv_why, sizeof(p->nv_why)) !=
	    OP_NVIDIA_UNREAD)
		p->nv_why[0] = '\0';
	else if (p->nv_why[0] == '\0')
		snprintf(p->nv_why, sizeof(p->nv_why), "not read");
	for (unsigned i = 0; i < p->ntin; i++)
		p->tin[i].nvidia_domain = p->nv[i];
	free(nodes);
}

static void load_rack(struct op *op, struct upg_pass *p)
{
	struct api_errors e;
	json_t *all, *keys, *o;
	size_t i;

	api_errors_init(&e);
	p->rack_obj = kube_informer_get(op->racks, p->u->rack);
	if (p->rack_obj && api_rack_parse(p->rack_obj, &p->rack, &e) != NV_OK)
		log_warn(UPGRADE_COMP, "rack does not parse", "upgrade=%s rack=%s", p->u->meta.name,
		         p->u->rack);
	o = kube_informer_get(op->matrices, p->u->target_matrix);
	if (o && api_matrix_parse(o, &p->m, &e) != NV_OK)
		log_warn(UPGRADE_COMP, "matrix does not parse", "upgrade=%s matrix=%s",
		         p->u->meta.name, p->u->target_matrix);
	json_decref(o);

	keys = kube_informer_index_keys(op->trays, OP_INDEX_TRAY_RACK, p->u->rack);
	p->trays = xcalloc(json_array_size(keys) + 1, sizeof(*p->trays));
	p->tin = xcalloc(json_array_size(keys) + 1, sizeof(*p->tin));
	p->nodes = xcalloc(json_array_size(keys) + 1, sizeof(*p->nodes));
	json_array_foreach(keys, i, o) {
		const json_t *t = kube_informer_get_shared(op->trays, json_string_value(o));
		if (t == NULL) /* gone since the index was read */
			continue;
		p->trays[p->ntin] = t;
		p->nodes[p->ntin] =
		        kube_informer_get_shared(op->nodes, jx_str_or(t, "spec.node", ""));
		tray_in(t, p->nodes[p->ntin], &p->tin[p->ntin]);
		p->ntin++;
	}
	json_decref(keys);
	nvidia_load(op, p);

	all = kube_informer_list(op->approvals);
	p->appr = xcalloc(json_array_size(all) + 1, sizeof(*p->appr));
	json_array_foreach(all, i, o) {
		if (strcmp(jx_str_or(o, "spec.upgrade", ""), p->u->meta.name) != 0)
			continue;
		api_errors_init(&e);
		if (api_upgrade_approval_parse(o, &p->appr[p->nappr], &e) != NV_OK)
			continue;
		if (!approval_counts(p, p->appr[p->nappr])) {
			api_upgrade_approval_free(p->appr[p->nappr]);
			continue;
		}
		p->nappr++;
	}
	json_decref(all);
	all = kube_informer_by_index(op->partitions, OP_INDEX_PARTITION_RACK, p->u->rack);
	p->parts = xcalloc(json_array_size(all) + 1, sizeof(*p->parts));
	json_array_foreach(all, i, o) {
		api_errors_init(&e);
		if (api_rack_partition_parse(o, &p->parts[p->nparts], &e) == NV_OK)
			p->nparts++;
	}
	json_decref(all);
}

/* ---- writes ---- */

static enum nv_err patch(struct op *op, const struct kube_res *r, const char *name,
                         const json_t *body, const char *sub, json_t **out)
{
	struct kube_status st;
	enum nv_err rc =
	        kube_patch(op->c, r, NULL, name,
	                   &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE, .subresource = sub},
	                   body, out, &st);
	if (rc != NV_OK && rc != NV_E_CONFLICT)
		log_warn(UPGRADE_COMP, "patch failed", "object=%s/%s err=%s msg=\"%s\"",
		         r->resource, name, nv_err_name(rc), st.message);
	return rc;
}

/* Writes st as the upgrade's status (merge patch of the difference, with
 * the resourceVersion read), keeping the written object in p->obj. */
static enum nv_err status_write(struct op *op, struct upg_pass *p,
                                const struct api_rack_upgrade_status *st)
{
	json_t *want = json_deep_copy(p->obj), *body, *fresh = NULL;
	enum nv_err rc = NV_OK;
	json_object_set_new(want, "status", api_rack_upgrade_status_to_json(st));
	body = op_rack_status_patch(p->obj, want);
	if (body) {
		rc = patch(op, &OP_RES_UPGRADES, p->u->meta.name, body, "status", &fresh);
		if (rc == NV_OK && fresh) {
			json_decref(p->obj);
			p->obj = fresh;
		}
	}
	json_decref(body);
	json_decref(want);
	return rc;
}

static const json_t *tray_at(const struct upg_pass *p, int index, unsigned *pos)
{
	for (unsigned i = 0; i < p->ntin; i++)
		if (p->tin[i].index == index) {
			*pos = i;
			return p->trays[i];
		}
	return NULL;
}

/* Applies the merge patch body to the tray's spec when it changes it. */
static enum nv_err tray_patch(struct op *op, const json_t *tray, json_t *body)
{
	json_t *after = jx_merge_patch_apply(tray, body);
	enum nv_err rc = NV_OK;
	if (!json_equal(json_object_get(after, "spec"), json_object_get(tray, "spec")))
		rc = patch(op, &OP_RES_TRAYS, kube_obj_name(tray), body, NULL, NULL);
	json_decref(after);
	json_decref(body);
	return rc;
}

static enum nv_err node_label(struct op *op, const json_t *node, const char *value)
{
	const json_t *cur = node ? jx_path(node, "metadata.labels") : NULL;
	const json_t *v = cur ? json_object_get(cur, OP_LABEL_MAINTENANCE) : NULL;
	enum nv_err rc = NV_OK;
	json_t *body;
	if (node == NULL || (value == NULL && v == NULL) ||
	    (value && json_is_string(v) && strcmp(json_string_value(v), value) == 0))
		return NV_OK;
	body = json_pack("{s:{s:{s:o}}}", "metadata", "labels", OP_LABEL_MAINTENANCE,
	                 value ? json_string(value) : json_null());
	rc = patch(op, &KUBE_RES_NODES, kube_obj_name(node), body, NULL, NULL);
	json_decref(body);
	return rc;
}

static json_t *components_json(uint32_t comps)
{
	json_t *arr = json_array();
	for (unsigned c = 0; c < MATRIX_C__COUNT; c++)
		if (comps & MATRIX_BIT(c))
			json_array_append_new(
			        arr, json_string(matrix_component_name((enum matrix_component)c)));
	return arr;
}

static json_t *maint_json(const struct upg_pass *p, const char *state,
                          const struct op_upgrade_out *a)
{
	json_t *m;
	if (strcmp(state, "None") == 0)
		return json_pack("{s:s,s:n,s:n,s:n}", "state", "None", "reason", "requestor",
		                 "upgrade");
	m = json_pack("{s:s,s:s,s:s}", "state", state, "reason", "RackUpgrade step", "requestor",
	              p->owner);
	if (strcmp(state, "Upgrading") == 0)
		json_object_set_new(m, "upgrade",
		                    json_pack("{s:s,s:i,s:o}", "name", p->u->meta.name, "step",
		                              a->step, "components",
		                              components_json(a->components)));
	else
		json_object_set_new(m, "upgrade", json_null());
	return m;
}

/* The tray side of an action, on every tray of a->trays: maintenance state,
 * driver and validation request in the spec, the Node's label (for a drain
 * or a release, written by the drain with the cordon: nodes and cached
 * give it the Nodes by name and as cached). */
static enum nv_err trays_act(struct op *op, struct upg_pass *p, const struct op_upgrade_out *a,
                             const char **nodes, const json_t **cached, unsigned *nnodes)
{
	enum nv_err worst = NV_OK, rc;
	*nnodes = 0;
	for (int i = 1; i <= API_COMPUTE_TRAYS; i++) {
		unsigned pos = 0;
		const json_t *t;
		json_t *spec = json_object();
		const char *state = a->act == OP_UPG_DRAIN     ? "Draining"
		                    : a->act == OP_UPG_RELEASE ? "None"
		                                               : "Upgrading";
		if (!(a->trays & (1u << i)) || (t = tray_at(p, i, &pos)) == NULL) {
			json_decref(spec);
			continue;
		}
		cached[*nnodes] = p->nodes[pos];
		nodes[(*nnodes)++] = p->tin[pos].node;
		if (a->act == OP_UPG_VALIDATE)
			json_object_set_new(spec, "validation",
			                    json_pack("{s:s}", "id", a->validation_id));
		else
			json_object_set_new(spec, "maintenance", maint_json(p, state, a));
		if (a->act == OP_UPG_APPLY)
			json_object_set_new(spec, "driver",
			                    json_pack("{s:s}", "version", a->driver));
		if ((rc = tray_patch(op, t, json_pack("{s:o}", "spec", spec))) != NV_OK)
			worst = rc;
		if (a->act != OP_UPG_VALIDATE && a->act != OP_UPG_DRAIN &&
		    a->act != OP_UPG_RELEASE &&
		    (rc = node_label(op, p->nodes[pos], strcmp(state, "None") ? state : NULL)) !=
		            NV_OK)
			worst = rc;
	}
	return worst;
}

/* ---- metrics and events ---- */

static void step_observe(struct op *op, const struct api_upgrade_step *s)
{
	const char *lv[] = {api_step_action_name(s->action)};
	if (s->completion_ms > 0 && s->start_ms > 0)
		(void)metrics_histogram_observe(op->upg_step_seconds, lv,
		                                (double)(s->completion_ms - s->start_ms) / 1000.0);
}

/* Steps that ended in this pass: their durations. */
static void steps_observe(struct op *op, const struct api_rack_upgrade_status *before,
                          const struct api_rack_upgrade_status *after)
{
	for (unsigned i = 0; i < after->nsteps; i++) {
		const struct api_upgrade_step *s = &after->steps[i];
		bool was_open = i >= before->nsteps || before->steps[i].completion_ms == 0;
		if (!was_open || s->completion_ms == 0)
			continue;
		step_observe(op, s);
	}
}

/* before := the status just written (st), so that the next write of the
 * pass observes only the steps that end after it. */
static void status_rebase(struct api_rack_upgrade_status *before,
                          const struct api_rack_upgrade_status *st)
{
	if (st->nsteps > before->nsteps) {
		before->steps = xreallocarray(before->steps, st->nsteps, sizeof(*st->steps));
		before->nsteps = st->nsteps;
	}
	memcpy(before->steps, st->steps, st->nsteps * sizeof(*st->steps));
}

/* ---- the action ---- */

/* An out-of-band step: poll what the step records, start what comes next,
 * and write the status (new operation ids, or the step's end) before the
 * next poll; requeue after the poll interval while updates run. */
static struct kube_result oob_act(struct op *op, struct upg_pass *p,
                                  struct api_rack_upgrade_status *st,
                                  const struct op_upgrade_out *a)
{
	struct api_upgrade_step *s = &st->steps[a->step];
	struct op_upgrade_oob_result r;
	int64_t now = upgrade_clock();
	enum nv_err rc;

	if (op->oob == NULL)
		return (struct kube_result){.err = NV_E_STATE}; /* the engine knows: not reached */
	rc = op_upgrade_oob_step(op->oob, s, a, &r);
	if (rc != NV_OK) {
		log_warn(UPGRADE_COMP, "out-of-band backend error",
		         "upgrade=%s step=%d err=%s msg=\"%s\"", p->u->meta.name, a->step,
		         nv_err_name(rc), r.message);
		/* Operations it started are in s: keep them. */
		if (r.recorded)
			(void)status_write(op, p, st);
		return (struct kube_result){.err = rc};
	}
	if (r.failed)
		op_upgrade_step_finish(st, a->step, API_STEP_FAILED, r.message, now);
	else if (r.done)
		op_upgrade_step_finish(st, a->step, API_STEP_SUCCEEDED, r.message, now);
	if ((r.recorded || r.failed || r.done) && (rc = status_write(op, p, st)) != NV_OK)
		return (struct kube_result){.err = rc};
	if (r.started > 0 && !r.done && !r.failed)
		op_event(op, p->obj, "Normal", "OutOfBandStarted", "Upgrade",
		         "step %d (plan step %d): %u updates started on %u %s trays", a->step,
		         a->plan_step + 1, r.started, r.targets, s->trays ? "compute" : "switch");
	if (r.failed || r.done) {
		op_event(op, p->obj, r.failed ? "Warning" : "Normal",
		         r.failed ? "OutOfBandFailed" : "OutOfBandSucceeded", "Upgrade",
		         "step %d: %s", a->step, r.message);
		log_info(UPGRADE_COMP, "out-of-band step ended",
		         "upgrade=%s step=%d result=%s msg=\"%s\"", p->u->meta.name, a->step,
		         r.failed ? "Failed" : "Succeeded", r.message);
		step_observe(op, s);
		return (struct kube_result){0}; /* the write's watch event brings the next pass */
	}
	return (struct kube_result){.requeue_after_ms = op->oob_poll_ms};
}

/* Puts the sentence of an unfinished drain on its step and, as the engine
 * words a waiting step ("wave N: ..."), on the upgrade, so that a budget
 * refusing evictions or pods yet to checkpoint are visible in the status;
 * writes only when either changed. */
static enum nv_err drain_wait_record(struct op *op, struct upg_pass *p,
                                     struct api_rack_upgrade_status *st, int step, const char *msg)
{
	char was[sizeof(st->steps[0].message)];
	struct api_upgrade_step *s;

	if (step < 0 || (unsigned)step >= st->nsteps || msg == NULL || msg[0] == '\0')
		return NV_OK;
	s = &st->steps[step];
	snprintf(was, sizeof(was), "%s", s->message);
	snprintf(s->message, sizeof(s->message), "%s", msg);
	if (strcmp(was, s->message) == 0)
		return NV_OK;
	snprintf(st->message, sizeof(st->message), "wave %d: %s", s->wave, s->message);
	return status_write(op, p, st);
}

/* "1h0m0s", "45s": a duration as the Rack's spec writes one. */
static void dur_text(int64_t ms, char *out, size_t cap)
{
	long long sec = (long long)(ms / 1000);

	if (sec >= 3600)
		snprintf(out, cap, "%lldh%lldm%llds", sec / 3600, sec % 3600 / 60, sec % 60);
	else if (sec >= 60)
		snprintf(out, cap, "%lldm%llds", sec / 60, sec % 60);
	else
		snprintf(out, cap, "%llds", sec);
}

/* When a Drain step that began at start gives up: the Rack's
 * evictionDeadline after it, plus the checkpointDeadline in Checkpoint
 * mode (the pods may take that long to be asked and answer); 0: never. */
static int64_t drain_deadline(const struct api_rack *rack, int64_t start, int64_t *limit)
{
	const struct api_rack_policy *pol = &rack->policy;

	*limit = pol->eviction_deadline_ms +
	         (pol->drain_mode == API_DRAIN_CHECKPOINT ? pol->checkpoint_deadline_ms : 0);
	return pol->eviction_deadline_ms > 0 && start > 0 ? start + *limit : 0;
}

/* A drain that did not finish by its deadline: the step fails with what
 * holds it (the pod, its budget or its gang, in the drain's sentence), so
 * the upgrade halts for a person (spec.retry, spec.force on a security
 * upgrade, or spec.abort). Nothing is evicted against a budget. */
static struct kube_result drain_expired(struct op *op, struct upg_pass *p,
                                        struct api_rack_upgrade_status *st, int step, int64_t limit,
                                        const struct drain_result *dr, int64_t now)
{
	char d[32], msg[sizeof(st->steps[0].message) + 64]; /* cut to the step's size */
	enum nv_err rc;

	dur_text(limit, d, sizeof(d));
	snprintf(msg, sizeof(msg), "drain deadline passed (%s): %s", d,
	         dr->message[0] ? dr->message : "pods still on the trays");
	log_warn(UPGRADE_COMP, "drain deadline passed; halting", "upgrade=%s step=%d msg=\"%s\"",
	         p->u->meta.name, step, msg);
	op_upgrade_step_finish(st, step, API_STEP_FAILED, msg, now);
	step_observe(op, &st->steps[step]);
	if ((rc = status_write(op, p, st)) != NV_OK)
		return (struct kube_result){.err = rc};
	op_event(op, p->obj, "Warning", "DrainDeadlineExceeded", "Upgrade", "step %d: %s", step,
	         msg);
	return (struct kube_result){0};
}

/* act's drain or release of the nodes (n of them). A step that ends here
 * is finished in *st and *ended set: the caller records it with the next
 * step's start, in one write. */
static struct kube_result act_nodes(struct op *op, struct upg_pass *p,
                                    struct api_rack_upgrade_status *st,
                                    const struct op_upgrade_out *a, const char *const *nodes,
                                    unsigned n, const struct drain_node_write *w, int64_t now,
                                    bool *ended)
{
	struct kube_status ks;
	struct drain_result dr;
	enum nv_err rc;

	if (a->act == OP_UPG_OOB)
		return oob_act(op, p, st, a);
	if (a->act == OP_UPG_DRAIN) {
		struct drain_policy pol = {.mode = p->rack->policy.drain_mode,
		                           .checkpoint_deadline_ms =
		                                   p->rack->policy.checkpoint_deadline_ms,
		                           .force = p->u->force,
		                           .owner = p->owner,
		                           .write = *w};
		memset(&dr, 0, sizeof(dr));
		rc = drain_nodes(op->c, nodes, n, &pol, now, &dr, &ks);
		if (rc != NV_OK)
			return (struct kube_result){.err = rc};
		if (!dr.done) {
			int64_t limit = 0;
			int64_t until =
			        drain_deadline(p->rack, st->steps[a->step].start_ms, &limit);

			if (until > 0 && now >= until)
				return drain_expired(op, p, st, a->step, limit, &dr, now);
			log_info(UPGRADE_COMP, "draining",
			         "upgrade=%s pods=%d waiting_ack=%d msg=\"%s\"", p->u->meta.name,
			         dr.pods, dr.waiting_ack, dr.message);
			int64_t after = dr.next_check_ms > now ? dr.next_check_ms - now : 2000;
			if (until > 0 && until - now < after)
				after = until - now;
			/* What holds the drain (a budget, a checkpoint) belongs on
			 * the record, in the form the engine gives a waiting step,
			 * and is written only when the sentence changes. */
			if ((rc = drain_wait_record(op, p, st, a->step, dr.message)) != NV_OK)
				return (struct kube_result){.err = rc};
			return (struct kube_result){.requeue_after_ms = after};
		}
		/* Pods that held IMEX channel claims left in earlier passes,
		 * which said so: the step's record keeps it. */
		drain_message_keep_claims(dr.message, sizeof(dr.message),
		                          st->steps[a->step].message);
		op_upgrade_step_finish(st, a->step, API_STEP_SUCCEEDED,
		                       dr.message[0] ? dr.message : "drained", now);
	} else if (a->act == OP_UPG_RELEASE) {
		if ((rc = drain_release(op->c, nodes, n, p->owner, w, &ks)) != NV_OK)
			return (struct kube_result){.err = rc};
		op_upgrade_step_finish(st, a->step, API_STEP_SUCCEEDED, "trays out of maintenance",
		                       now);
	} else {
		return (struct kube_result){0};
	}
	*ended = true;
	return (struct kube_result){0};
}

static struct kube_result act(struct op *op, struct upg_pass *p, struct api_rack_upgrade_status *st,
                              const struct op_upgrade_out *a, bool *ended)
{
	const char *nodes[API_COMPUTE_TRAYS];
	const json_t *cached[API_COMPUTE_TRAYS];
	unsigned n = 0;
	enum nv_err rc = trays_act(op, p, a, nodes, cached, &n);
	int64_t now = upgrade_clock();
	/* The Nodes' maintenance label goes with their cordon (one write). */
	json_t *mark = json_pack("{s:o}", OP_LABEL_MAINTENANCE,
	                         a->act == OP_UPG_DRAIN ? json_string("Draining") : json_null());
	struct drain_node_write w = {.cached = cached, .labels = mark};
	struct kube_result r;

	if (rc != NV_OK)
		r = (struct kube_result){.err = rc};
	else
		r = act_nodes(op, p, st, a, nodes, n, &w, now, ended);
	json_decref(mark);
	return r;
}

/* Whether the cached upgrade is the latest version. A pass that acts
 * without writing first relies on the status it read; right after our own
 * write the cache may still hold the one before, and acting on it would
 * repeat a finished step. One GET, only on passes that act. */
static bool cache_current(struct op *op, struct upg_pass *p)
{
	struct kube_status ks;
	json_t *fresh = NULL;
	bool same;
	if (kube_get(op->c, &OP_RES_UPGRADES, NULL, p->u->meta.name, &fresh, &ks) != NV_OK)
		return false;
	same = strcmp(jx_str_or(fresh, "metadata.resourceVersion", ""),
	              jx_str_or(p->obj, "metadata.resourceVersion", "")) == 0;
	json_decref(fresh);
	return same;
}

/* Rack status.upgrade: which upgrade acts on the rack, in which phase. */
static void rack_mark(struct op *op, struct upg_pass *p, const struct api_rack_upgrade_status *st)
{
	const char *phase = api_upgrade_phase_name(st->phase);
	json_t *body;
	if (p->rack_obj == NULL || (p->marked != NULL && strcmp(p->marked, phase) == 0) ||
	    (p->marked == NULL &&
	     strcmp(jx_str_or(p->rack_obj, "status.upgrade.name", ""), p->u->meta.name) == 0 &&
	     strcmp(jx_str_or(p->rack_obj, "status.upgrade.phase", ""), phase) == 0))
		return;
	body = json_pack("{s:{s:{s:s,s:s}}}", "status", "upgrade", "name", p->u->meta.name, "phase",
	                 phase);
	if (patch(op, &OP_RES_RACKS, p->u->rack, body, "status", NULL) == NV_OK)
		p->marked = phase;
	json_decref(body);
}

/* ---- the rack's stack after Completed ---- */

/* spec.matrix = the upgrade's target, by server-side apply under the
 * operator's field manager with force: the operator then owns both fields,
 * so a later apply of a manifest with the old stack is refused with a
 * conflict naming it instead of moving the rack back unnoticed. */
static enum nv_err rack_stack_apply(struct op *op, const struct upg_pass *p, struct kube_status *ks)
{
	json_t *body = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s,s:s}}}", "apiVersion", API_VERSION,
	                         "kind", "Rack", "metadata", "name", p->u->rack, "spec", "matrix",
	                         "name", p->u->target_matrix, "stack", p->u->target_stack);
	enum nv_err rc = kube_patch(op->c, &OP_RES_RACKS, NULL, p->u->rack,
	                            &(struct kube_patch_opts){.type = KUBE_PATCH_APPLY,
	                                                      .field_manager = OP_FIELD_MANAGER,
	                                                      .force = true},
	                            body, NULL, ks);
	json_decref(body);
	return rc;
}

/* Once Completed, the Rack's spec.matrix moves to the target, once: the
 * RackStackSet condition records it (or why not), and with it present
 * nothing more is done. A crash between the Completed write and the apply
 * leaves no condition, so the next pass applies; one between the apply and
 * the condition finds the Rack on the target and only records it. */
static struct kube_result stack_settle(struct op *op, struct upg_pass *p,
                                       struct api_rack_upgrade_status *st)
{
	struct op_upgrade_stack_out so;
	struct kube_status ks;
	json_t *ups = kube_informer_by_index(op->upgrades, OP_INDEX_UPGRADE_RACK, p->u->rack);
	enum nv_err rc = NV_OK;

	op_upgrade_stack_next(p->u, st, p->rack, ups, upgrade_clock(), &so);
	json_decref(ups);
	if (so.act == OP_STACK_NONE || !cache_current(op, p))
		return (struct kube_result){0}; /* done, or our last write's event comes */
	memset(&ks, 0, sizeof(ks));
	if (so.act == OP_STACK_APPLY && (rc = rack_stack_apply(op, p, &ks)) != NV_OK) {
		log_warn(UPGRADE_COMP, "rack stack not set", "upgrade=%s rack=%s err=%s msg=\"%s\"",
		         p->u->meta.name, p->u->rack, nv_err_name(rc), ks.message);
		/* The webhook or the schema said no: record it rather than
		 * retry for ever; anything else is retried. */
		if (ks.http_code < 400 || ks.http_code >= 500 || ks.http_code == 409 ||
		    ks.http_code == 429)
			return (struct kube_result){.err = rc};
		so.cond.status = API_COND_FALSE;
		snprintf(so.cond.reason, sizeof(so.cond.reason), "Refused");
		snprintf(so.cond.message, sizeof(so.cond.message),
		         "Rack %.200s: spec.matrix.stack not moved to %.63s: %.200s", p->u->rack,
		         p->u->target_stack, ks.message);
	}
	if (so.act == OP_STACK_APPLY) {
		bool ok = so.cond.status == API_COND_TRUE;
		const char *reason = ok ? "RackStackSet" : "RackStackNotSet";
		op_event(op, p->rack_obj, ok ? "Normal" : "Warning", reason, "Upgrade",
		         "%s (RackUpgrade %s Completed)", so.cond.message, p->u->meta.name);
		op_event(op, p->obj, ok ? "Normal" : "Warning", reason, "Upgrade", "%s",
		         so.cond.message);
		log_info(UPGRADE_COMP, ok ? "rack stack set" : "rack stack refused",
		         "upgrade=%s rack=%s from=%s to=%s", p->u->meta.name, p->u->rack, so.from,
		         p->u->target_stack);
	}
	op_upgrade_condition_put(st, &so.cond);
	return (struct kube_result){.err = status_write(op, p, st)};
}

/* ---- selector upgrades ---- */

/* A child without its slot: the parent's name (op_upgrade_in.slot_parent). */
static const char *slot_parent(const json_t *obj)
{
	const json_t *ann = jx_path(obj, "metadata.annotations");
	const char *parent = parent_of(obj, NULL);
	if (parent == NULL || json_object_get(ann, OP_ANN_RACK_SLOT) != NULL)
		return NULL;
	return parent;
}

/* The child for rack r: the parent's spec for one rack, owned by the
 * parent (its deletion takes the children along) and labelled with its
 * name. Pause, abort and retry are each child's own. */
static json_t *fleet_child(const struct upg_pass *p, const struct api_upgrade_rack *r)
{
	json_t *spec = json_deep_copy(json_object_get(p->obj, "spec"));
	const char *drop[] = {"rackSelector", "maxParallelRacks", "onRackHalt", "paused", "abort",
	                      "retry"};
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		json_object_del(spec, drop[i]);
	json_object_set_new(spec, "rack", json_string(r->name));
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, s:o}",
	                 "apiVersion", jx_str_or(p->obj, "apiVersion", "nvl72.io/v1alpha1"), "kind",
	                 "RackUpgrade", "metadata", "name", r->upgrade, "labels",
	                 OP_LABEL_UPGRADE_PARENT, p->u->meta.name, "ownerReferences", "apiVersion",
	                 jx_str_or(p->obj, "apiVersion", "nvl72.io/v1alpha1"), "kind",
	                 "RackUpgrade", "name", p->u->meta.name, "uid", p->u->meta.uid,
	                 "controller", 1, "blockOwnerDeletion", 1, "spec", spec);
}

/* Creates rack i's child. A refusal (the webhook's, the schema's) is
 * recorded in st; a name already taken by an upgrade that is not ours
 * is one too. Other errors are returned for a retry. */
static enum nv_err fleet_create(struct op *op, struct upg_pass *p,
                                struct api_rack_upgrade_status *st, unsigned i)
{
	struct api_upgrade_rack *r = &st->racks[i];
	struct kube_status ks;
	json_t *obj = fleet_child(p, r), *live = NULL;
	enum nv_err rc =
	        obj ? kube_create(op->c, &OP_RES_UPGRADES, NULL, obj, NULL, &ks) : NV_E_INTERNAL;
	json_decref(obj);
	if (rc == NV_OK) {
		op_event(op, p->obj, "Normal", "RackUpgradeCreated", "Upgrade",
		         "rack %s: created RackUpgrade %s", r->name, r->upgrade);
		return NV_OK;
	}
	if (rc == NV_E_EXISTS) {
		const char *uid = "";
		rc = kube_get(op->c, &OP_RES_UPGRADES, NULL, r->upgrade, &live, &ks);
		bool ours = rc == NV_OK && parent_of(live, &uid) != NULL &&
		            strcmp(uid, p->u->meta.uid) == 0;
		json_decref(live);
		if (rc != NV_OK || ours)
			return rc; /* ours, made by an earlier pass: the cache lags */
		snprintf(ks.message, sizeof(ks.message),
		         "a RackUpgrade named %s exists and is not this upgrade's", r->upgrade);
		rc = NV_E_FORBIDDEN;
	}
	if (rc != NV_E_FORBIDDEN && rc != NV_E_INVALID_OBJECT && rc != NV_E_INVAL)
		return rc;
	op_fleet_refused(st, i, ks.message, upgrade_clock());
	op_event(op, p->obj, "Warning", "RackRefused", "Upgrade",
	         "rack %s: RackUpgrade %s not created: %s (tried again in %d s)", r->name,
	         r->upgrade, ks.message, OP_FLEET_RETRY_MS / 1000);
	return NV_OK;
}

static enum nv_err fleet_act(struct op *op, struct upg_pass *p, struct api_rack_upgrade_status *st,
                             enum op_fleet_act_kind kind, unsigned i, bool *refused)
{
	const struct api_upgrade_rack *r = &st->racks[i];
	char ts[TIME_RFC3339_LEN];
	json_t *body = NULL;
	enum nv_err rc;

	switch (kind) {
	case OP_FLEET_CREATE: {
		rc = fleet_create(op, p, st, i);
		*refused |= st->racks[i].refused;
		return rc;
	}
	case OP_FLEET_GRANT:
		time_format_rfc3339(r->slot_ms, ts);
		body = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", OP_ANN_RACK_SLOT, ts);
		break;
	case OP_FLEET_PAUSE:
		body = json_pack("{s:{s:{s:s}}, s:{s:b}}", "metadata", "annotations",
		                 OP_ANN_PAUSED_BY_PARENT, p->u->meta.name, "spec", "paused", 1);
		break;
	case OP_FLEET_RESUME:
		body = json_pack("{s:{s:{s:n}}, s:{s:b}}", "metadata", "annotations",
		                 OP_ANN_PAUSED_BY_PARENT, "spec", "paused", 0);
		break;
	case OP_FLEET_ABORT:
		body = json_pack("{s:{s:b}}", "spec", "abort", 1);
		break;
	}
	if (body == NULL)
		return NV_E_INTERNAL;
	rc = patch(op, &OP_RES_UPGRADES, r->upgrade, body, NULL, NULL);
	json_decref(body);
	return rc == NV_E_NOT_FOUND ? NV_OK : rc; /* deleted: the next pass records it */
}

/* One pass of a selector upgrade: its racks from the Rack cache, its
 * children from the upgrade cache (owned by its uid), op_fleet_eval, the
 * status written, then the acts. */
static struct kube_result fleet_reconcile(struct op *op, struct upg_pass *p,
                                          struct api_rack_upgrade_status *st)
{
	json_t *racks = kube_informer_list(op->racks), *ups = kube_informer_list(op->upgrades);
	const char **names = xcalloc(json_array_size(racks) + 1, sizeof(*names));
	struct op_fleet_child *kids = xcalloc(json_array_size(ups) + 1, sizeof(*kids));
	struct op_fleet_out *out = xcalloc(1, sizeof(*out));
	struct op_fleet_in in = {
	        .u = p->u, .racks = names, .children = kids, .now_ms = upgrade_clock()};
	struct kube_result r = {0};
	enum api_upgrade_phase was = st->phase;
	bool refused = false;
	size_t i;
	json_t *o;

	json_array_foreach(racks, i, o)
		if (api_rack_upgrade_selects(p->u, o))
			names[in.nracks++] = kube_obj_name(o);
	json_array_foreach(ups, i, o) {
		const char *uid = "";
		if (parent_of(o, &uid) == NULL || strcmp(uid, p->u->meta.uid) != 0)
			continue;
		struct op_fleet_child *c = &kids[in.nchildren++];
		const json_t *ann = jx_path(o, "metadata.annotations");
		c->name = kube_obj_name(o);
		c->rack = jx_str_or(o, "spec.rack", "");
		c->has_phase =
		        api_upgrade_phase_from_name(jx_str_or(o, "status.phase", ""), &c->phase);
		c->granted = json_object_get(ann, OP_ANN_RACK_SLOT) != NULL;
		c->paused_by_parent = json_object_get(ann, OP_ANN_PAUSED_BY_PARENT) != NULL;
		c->paused = json_is_true(jx_path(o, "spec.paused"));
		c->abort = json_is_true(jx_path(o, "spec.abort"));
		(void)time_parse_rfc3339(jx_str_or(o, "status.scheduledStart", ""),
		                         &c->scheduled_start_ms);
		c->message = jx_str_or(o, "status.message", "");
	}
	op_fleet_eval(&in, st, out);
	if (out->changed && (r.err = status_write(op, p, st)) != NV_OK)
		goto done; /* a stale read conflicts: nothing acts on it */
	for (unsigned k = 0; k < out->nevents; k++)
		op_event(op, p->obj, out->events[k].warning ? "Warning" : "Normal",
		         out->events[k].reason, "Upgrade", "%s", out->events[k].note);
	if (st->phase != was)
		log_info(UPGRADE_COMP, "phase", "upgrade=%s racks=%u from=%s to=%s msg=\"%s\"",
		         p->u->meta.name, st->nracks, api_upgrade_phase_name(was),
		         api_upgrade_phase_name(st->phase), st->message);
	if (out->nacts > 0 && !out->changed && !cache_current(op, p))
		goto done; /* our last write is not in the cache yet: its event comes */
	for (unsigned k = 0; k < out->nacts && r.err == NV_OK; k++)
		r.err = fleet_act(op, p, st, out->acts[k].kind, out->acts[k].rack, &refused);
	if (refused) {
		enum nv_err rc = status_write(op, p, st);
		if (r.err == NV_OK)
			r.err = rc;
	}
	if (r.err == NV_OK && refused)
		r.requeue_after_ms = OP_FLEET_RETRY_MS;
	if (r.err == NV_OK && out->wake_ms > 0 && r.requeue_after_ms == 0) {
		int64_t left = out->wake_ms - upgrade_clock();
		r.requeue_after_ms = left > 10 ? left : 10;
	}
done:
	free(out);
	free(kids);
	free(names);
	json_decref(ups);
	json_decref(racks);
	return r;
}

/* ---- reconcile ---- */

static struct kube_result upgrade_reconcile(void *ud, const char *key)
{
	struct op *op = ud;
	struct upg_pass p;
	struct api_errors e;
	struct api_rack_upgrade_status st, before;
	struct op_upgrade_out out;
	struct kube_result r = {0};
	enum nv_err rc;

	memset(&p, 0, sizeof(p));
	memset(&st, 0, sizeof(st));
	memset(&before, 0, sizeof(before));
	api_errors_init(&e);
	if ((p.obj = kube_informer_get(op->upgrades, key)) == NULL)
		return r;
	if (api_rack_upgrade_parse(p.obj, &p.u, &e) != NV_OK) {
		log_warn(UPGRADE_COMP, "upgrade does not parse", "upgrade=%s error=\"%s: %s\"", key,
		         e.n ? e.list[0].path : "", e.n ? e.list[0].msg : "");
		json_decref(p.obj);
		return (struct kube_result){.err = NV_E_INVALID_OBJECT, .terminal = true};
	}
	if (api_rack_upgrade_status_parse(jx_path(p.obj, "status"), &st, &e) != NV_OK ||
	    api_rack_upgrade_status_parse(jx_path(p.obj, "status"), &before, &e) != NV_OK) {
		op_event(op, p.obj, "Warning", "StatusInvalid", "Reconcile", "%s: %s",
		         e.n ? e.list[0].path : "status", e.n ? e.list[0].msg : "invalid");
		api_rack_upgrade_status_clear(&st);
		pass_clear(&p);
		return (struct kube_result){.err = NV_E_INVALID_OBJECT, .terminal = true};
	}
	if (p.u->rack[0] == '\0') {
		r = fleet_reconcile(op, &p, &st);
		goto out;
	}
	snprintf(p.owner, sizeof(p.owner), "rackupgrade/%.63s", p.u->meta.name);
	load_rack(op, &p);
	/* The stack the rack runs, as the Rack controller sees it; a rack with
	 * skew ("mixed") starts from its desired stack, and trays already on
	 * a later stack finish their steps at once. */
	const char *rstack = p.rack_obj ? jx_str_or(p.rack_obj, "status.stack", "") : "";
	if (p.rack && (p.m == NULL || matrix_stack_find(p.m, rstack) == NULL))
		rstack = p.rack->matrix_stack;
	struct op_upgrade_in in = {
	        .u = p.u,
	        .rack = p.rack,
	        .rack_stack = rstack,
	        .m = p.m,
	        .trays = p.tin,
	        .ntrays = p.ntin,
	        .approvals = (const struct api_upgrade_approval *const *)p.appr,
	        .napprovals = p.nappr,
	        .partitions = (const struct api_rack_partition *const *)p.parts,
	        .npartitions = p.nparts,
	        .oob_backend = op->oob != NULL,
	        .slot_parent = slot_parent(p.obj),
	        .nvidia_unread = p.nv_why[0] ? p.nv_why : NULL,
	        .now_ms = upgrade_clock(),
	};
	/* A Drain or Uncordon step the pass itself ends (ended) is recorded
	 * with what the engine starts next, in one write, and that acted on
	 * in the same pass: a wave's steps cost a status write each, not
	 * two. Rounds are bounded; the last one's end is written alone. */
	for (int round = 0;; round++) {
		bool ended = false, write;
		op_upgrade_eval(&in, &st, &out);
		write = out.changed || round > 0;
		/* Status first: the step about to act is recorded as Running. */
		if (write && (rc = status_write(op, &p, &st)) != NV_OK) {
			r.err = rc;
			goto out;
		}
		if (write) {
			steps_observe(op, &before, &st);
			status_rebase(&before, &st);
			for (unsigned i = 0; i < out.nevents; i++)
				op_event(op, p.obj, out.events[i].warning ? "Warning" : "Normal",
				         out.events[i].reason, "Upgrade", "%s", out.events[i].note);
			if (st.phase != out.was)
				log_info(UPGRADE_COMP, "phase",
				         "upgrade=%s rack=%s from=%s to=%s msg=\"%s\"",
				         p.u->meta.name, p.u->rack, api_upgrade_phase_name(out.was),
				         api_upgrade_phase_name(st.phase), st.message);
		}
		if (p.rack)
			rack_mark(op, &p, &st);
		if (st.phase == API_PHASE_COMPLETED && out.act == OP_UPG_NONE) {
			r = stack_settle(op, &p, &st);
			goto out;
		}
		if (out.act != OP_UPG_NONE && !write && !cache_current(op, &p))
			goto out; /* our last write is not in the cache yet: its event comes */
		if (out.act != OP_UPG_NONE)
			r = act(op, &p, &st, &out, &ended);
		if (!ended || r.err != NV_OK)
			break;
		if (round + 1 == UPGRADE_ROUNDS_MAX) {
			/* The step's end alone; the write's event brings the next pass. */
			if ((rc = status_write(op, &p, &st)) != NV_OK)
				r.err = rc;
			else
				steps_observe(op, &before, &st);
			goto out;
		}
		trays_acted(&p, &out);
		in.now_ms = upgrade_clock();
	}
	if (r.err == NV_OK && r.requeue_after_ms == 0 && out.wake_ms > 0) {
		int64_t left = out.wake_ms - upgrade_clock();
		r.requeue_after_ms = left > UPGRADE_CLOCK_RECHECK_MS ? UPGRADE_CLOCK_RECHECK_MS
		                     : left > 10                     ? left
		                                                     : 10;
	}
	log_debug(UPGRADE_COMP, "evaluated", "upgrade=%s phase=%s act=%s requeue_ms=%lld",
	          p.u->meta.name, api_upgrade_phase_name(st.phase), op_upgrade_act_name(out.act),
	          (long long)r.requeue_after_ms);
out:
	api_rack_upgrade_status_clear(&before);
	api_rack_upgrade_status_clear(&st);
	pass_clear(&p);
	return r;
}

static void upgrade_oob_close(struct op *op)
{
	oob_backend_free(op->oob);
	op->oob = NULL;
}

const struct op_controller op_upgrade_controller = {
        .name = UPGRADE_CONTROLLER,
        .comp = UPGRADE_COMP,
        .workers = OP_CONFIG(upgrade_workers),
        .watches = upgrade_watches,
        .nwatches = sizeof(upgrade_watches) / sizeof(upgrade_watches[0]),
        .reconcile = upgrade_reconcile,
        .open = upgrade_oob_open,
        .close = upgrade_oob_close,
        /* Every pass, a deleted upgrade's or an approval's included, ends
         * with the feed mirroring the caches (an unchanged list is not
         * resent); taking the lead publishes it too, an empty list
         * included: the page tells none from unknown. */
        .passed = op_feed_upgrades,
        .leading = op_feed_upgrades,
};
