// SPDX-License-Identifier: Apache-2.0
// The RackPartition controller: cordons and drains the member Nodes (the
// drain module: checkpoint handshake, evictions under PodDisruptionBudgets),
// asks the fabric backend for the partition change, follows the operation,
// waits until every member GPU reports the new clique and the Node labels
// and IMEX have caught up, then lifts its cordons. A finalizer deletes the backend
// partition. The status is the durable record; writes happen on change only.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/operator_domain.h"
#include "nvl72/operator_part.h"
#include "nvl72/parse.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"
#include "nvl72/b64.h"

/* ---- the backend ---- */

#define SECRET_VALUE_MAX (1 << 20)

/* Reads the --fabric-secret Secret once into c; its values are wiped. */
static enum nv_err secret_load(struct op *op, struct fabric_config *c)
{
	const char *ref = op->cfg.fabric_secret, *slash = strchr(ref, '/'), *k;
	static const char *const keys[] = {"username", "password", "token", "ca.crt"};
	char ns[64];
	json_t *sec = NULL, *v;
	struct kube_status st;
	enum nv_err rc;

	if (slash == NULL || slash == ref || slash[1] == '\0' ||
	    (size_t)(slash - ref) >= sizeof(ns)) {
		log_error(PART_COMP, "--fabric-secret must be namespace/name", "value=\"%s\"", ref);
		return NV_E_CONFIG;
	}
	snprintf(ns, sizeof(ns), "%.*s", (int)(slash - ref), ref);
	if ((rc = kube_get(op->c, &KUBE_RES_SECRETS, ns, slash + 1, &sec, &st)) != NV_OK) {
		log_error(PART_COMP, "cannot read the fabric backend's Secret",
		          "secret=%s err=%s msg=\"%s\"", ref, nv_err_name(rc), st.message);
		return rc;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && rc == NV_OK; i++) {
		char *val = NULL;
		size_t len = 0;
		k = keys[i];
		v = json_object_get(json_object_get(sec, "data"), k);
		if (!json_is_string(v))
			continue;
		rc = b64_decode(json_string_value(v), SECRET_VALUE_MAX, &val, &len);
		if (rc == NV_OK)
			rc = fabric_config_set_secret(c, k, val, len);
		if (rc != NV_OK)
			log_error(PART_COMP, "bad value in the fabric backend's Secret",
			          "secret=%s field=data.%s err=%s", ref, k, nv_err_name(rc));
		if (val) {
			secure_wipe(val, len);
			free(val);
		}
	}
	json_object_foreach(json_object_get(sec, "data"), k, v)
		if (json_is_string(v))
			secure_wipe((char *)(uintptr_t)json_string_value(v), json_string_length(v));
	json_decref(sec);
	return rc;
}

static enum nv_err part_backend_open(struct op *op)
{
	struct fabric_config c;
	struct fabric_status st;
	const char *name = op->cfg.fabric_backend;
	enum nv_err rc = NV_OK;

	if (name == NULL || name[0] == '\0' || strcmp(name, "none") == 0) {
		log_info(PART_COMP, "no fabric backend: RackPartitions stay Pending",
		         "backend=none");
		return NV_OK;
	}
	fabric_config_init(&c);
	memset(&st, 0, sizeof(st));
	if (str_copy(c.backend, sizeof(c.backend), name) != NV_OK ||
	    str_copy(c.endpoint, sizeof(c.endpoint), op->cfg.fabric_endpoint) != NV_OK ||
	    str_copy(c.sim_root, sizeof(c.sim_root), op->cfg.fabric_sim_root) != NV_OK)
		rc = NV_E_CONFIG;
	c.sim_delay_ms = (long)op->cfg.fabric_sim_delay_ms;
	c.poll_interval_ms = (long)op->cfg.fabric_poll_ms;
	if (rc == NV_OK && op->cfg.fabric_secret[0])
		rc = secret_load(op, &c);
	if (rc == NV_OK)
		rc = fabric_backend_new(&c, &op->fabric, &st);
	fabric_config_clear(&c);
	if (rc != NV_OK)
		log_error(PART_COMP, "fabric backend not usable", "backend=%s err=%s msg=\"%s\"",
		          name, nv_err_name(rc), st.message);
	else
		log_info(PART_COMP, "fabric backend open", "backend=%s", name);
	return rc;
}

/* ---- watches ---- */

static void enqueue_rack_parts(struct op *op, const char *rack, struct kube_workqueue *q)
{
	json_t *ps = kube_informer_by_index(op->partitions, OP_INDEX_PARTITION_RACK, rack), *p;
	size_t i;
	json_array_foreach(ps, i, p)
		kube_workqueue_add(q, kube_obj_name(p));
	json_decref(ps);
}

static void map_part(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	(void)op;
	kube_workqueue_add(q, kube_obj_name(obj));
}

static void map_rack(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	enqueue_rack_parts(op, kube_obj_name(obj), q);
}

static bool rack_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !json_equal(jx_path(o, "spec"), jx_path(n, "spec"));
}

static void map_tray(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	enqueue_rack_parts(op, jx_str_or(obj, "spec.rack", ""), q);
}

/* What a partition reads of a tray: its fabric, GPUs and IMEX. */
static bool tray_moved(struct op *op, const json_t *o, const json_t *n)
{
	static const char *const paths[] = {"status.fabric", "status.gpus", "status.imex",
	                                    "spec.imex"};
	(void)op;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (!json_equal(jx_path(o, paths[i]), jx_path(n, paths[i])))
			return true;
	return false;
}

/* The partitions a Node names: its partition label and our cordon mark. */
static void node_parts(const json_t *n, struct kube_workqueue *q)
{
	const json_t *l = json_object_get(jx_path(n, "metadata.labels"), OP_LABEL_PARTITION);
	const json_t *a =
	        json_object_get(jx_path(n, "metadata.annotations"), DRAIN_ANN_CORDONED_BY);
	if (json_is_string(l))
		kube_workqueue_add(q, json_string_value(l));
	if (json_is_string(a) && str_has_prefix(json_string_value(a), OP_PART_CORDON_PREFIX))
		kube_workqueue_add(q, json_string_value(a) + strlen(OP_PART_CORDON_PREFIX));
}

/* Both states of a Node: the partition it left and the one it joined. */
static void map_node(struct op *op, const json_t *o, const json_t *n, struct kube_workqueue *q)
{
	(void)op;
	if (o)
		node_parts(o, q);
	if (n)
		node_parts(n, q);
}

static bool node_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !(json_equal(jx_path(o, "metadata.labels"), jx_path(n, "metadata.labels")) &&
	         json_equal(jx_path(o, "metadata.annotations"),
	                    jx_path(n, "metadata.annotations")) &&
	         json_equal(jx_path(o, "spec.unschedulable"), jx_path(n, "spec.unschedulable")));
}

static const struct op_watch part_watches[] = {
        {.informer = OP_INFORMER(partitions), .map = map_part},
        {.informer = OP_INFORMER(racks), .map = map_rack, .changed = rack_changed},
        {.informer = OP_INFORMER(trays), .map = map_tray, .changed = tray_moved},
        {.informer = OP_INFORMER(nodes), .map2 = map_node, .changed = node_changed},
};

/* ---- one pass ---- */

struct part_pass {
	json_t *part;
	struct api_rack_partition *spec;
	struct api_rack *rack;
	struct buf rack_errs; /* why the parser refused the Rack */
	const json_t *trays[API_COMPUTE_TRAYS], *nodes[API_COMPUTE_TRAYS]; /* shared reads */
	struct op_part_in in;
	struct op_part_backend be;
	const char *name;
	char nv[API_COMPUTE_TRAYS][OP_NVIDIA_NAME_MAX]; /* NVIDIA ComputeDomain per tray */
	char nv_why[512];                               /* why unread, "" */
};

static void pass_clear(struct part_pass *p)
{
	for (unsigned i = 0; i < API_COMPUTE_TRAYS; i++) {
		kube_shared_put(p->trays[i]);
		kube_shared_put(p->nodes[i]);
	}
	buf_clear(&p->rack_errs);
	api_rack_free(p->rack);
	api_rack_partition_free(p->spec);
	json_decref(p->part);
}

/* Parses the RackPartition. One the parser refuses (the CRD's schema and
 * the webhook let none through) is logged and reported in a SpecInvalid
 * event; its status is left alone. */
static enum nv_err spec_read(struct op *op, struct part_pass *p)
{
	struct api_errors *errs = op_spec_errors_new();
	enum nv_err rc = api_rack_partition_parse(p->part, &p->spec, errs);

	return op_spec_report_take(op, p->part, PART_COMP, "partition", "Reconcile", rc, errs);
}

/* What a deletion needs of a spec the parser refused: the rack and the
 * member trays, read as far as they are well formed. A spec that became
 * invalid (a stricter schema after an upgrade of the CRDs) must not hold
 * the deletion of its partition: the backend partition is still deleted
 * and our cordons still lifted. */
static void spec_fallback(struct part_pass *p)
{
	const json_t *t;
	size_t i;

	p->spec = xcalloc(1, sizeof(*p->spec));
	(void)str_copy(p->spec->rack, sizeof(p->spec->rack), jx_str_or(p->part, "spec.rack", ""));
	json_array_foreach(jx_path(p->part, "spec.trays"), i, t) {
		json_int_t idx = json_integer_value(t);
		if (json_is_integer(t) && idx >= 1 && idx <= API_COMPUTE_TRAYS)
			p->spec->trays |= 1u << idx;
	}
}

/* Parses the partition's Rack from the cache. A Rack the parser refuses is
 * left out, as if it did not exist, with the reason kept for the message. */
static void rack_read(struct op *op, struct part_pass *p)
{
	json_t *obj = kube_informer_get(op->racks, p->spec->rack);
	struct api_errors *errs;

	if (obj == NULL)
		return;
	errs = op_spec_errors_new();
	if (api_rack_parse(obj, &p->rack, errs) != NV_OK) {
		buf_init(&p->rack_errs, 4096);
		(void)api_errors_format(errs, &p->rack_errs);
		p->in.rack_invalid = buf_str(&p->rack_errs);
		log_warn(PART_COMP, "rack refused", "partition=%s rack=%s err=\"%s\"", p->name,
		         p->spec->rack, p->in.rack_invalid);
	}
	free(errs);
	json_decref(obj);
}

/* Which of the rack's trays NVIDIA's ComputeDomains use (read only, while
 * served): a change reaching one holds (part_eval.c). */
static void nvidia_load(struct op *op, struct part_pass *p)
{
	const char *nodes[API_COMPUTE_TRAYS];

	for (unsigned i = 0; i < p->in.ntrays; i++)
		nodes[i] = p->in.trays[i].node;
	if (op_nvidia_busy(op, nodes, p->in.ntrays, p->nv, p->nv_why, sizeof(p->nv_why)) ==
	    OP_NVIDIA_UNREAD)
		p->in.nvidia_unread = p->nv_why[0] ? p->nv_why : "not read";
	for (unsigned i = 0; i < p->in.ntrays; i++)
		p->in.trays[i].nvidia_domain = p->nv[i];
}

static void pass_load(struct op *op, struct part_pass *p)
{
	rack_read(op, p);
	p->in.part = p->part;
	p->in.spec = p->spec;
	p->in.rack = p->rack;
	p->in.be = &p->be;
	p->be.configured = op->fabric != NULL;
	p->be.name = op->fabric ? fabric_backend_name(op->fabric) : "none";
	p->be.poll_ms = op->cfg.fabric_poll_ms;
	p->in.now_ms = time_wall_ms();
	p->in.silent_ms = op->cfg.heartbeat_timeout_ms;
	for (unsigned k = 0; p->rack && k < p->rack->ncompute; k++) {
		const struct api_rack_compute_tray *t = &p->rack->compute[k];
		char tname[64];
		op_tray_name(p->spec->rack, t->index, tname);
		p->trays[k] = kube_informer_get_shared(op->trays, tname);
		p->nodes[k] = kube_informer_get_shared(op->nodes, t->node);
		p->in.trays[k] =
		        (struct op_part_tray){.index = t->index,
		                              .node = t->node,
		                              .tray = p->trays[k],
		                              .node_o = p->nodes[k],
		                              .heartbeat_ms = op_tray_heartbeat_ms(
		                                      p->trays[k], op_lease_renew_ms(op, tname))};
		p->in.ntrays++;
	}
	nvidia_load(op, p);
}

/* Asks the backend what it has: the recorded operation, then (unless it
 * still runs) the partition by recorded id or by name. */
static void look(struct op *op, struct part_pass *p)
{
	struct op_part_backend *be = &p->be;
	const char *op_id = jx_str_or(p->part, "status.backend.operationId", "");
	const char *id = jx_str_or(p->part, "status.backend.partitionId", "");

	be->looked = true;
	if (op_id[0]) {
		be->op_err = fabric_op_poll(op->fabric, op_id, &be->op, &be->st);
		if (be->op_err == NV_OK && !fabric_op_done(be->op.state))
			return;
		if (be->op_err != NV_OK && be->op_err != NV_E_NOT_FOUND)
			return;
	}
	be->find_err = NV_E_NOT_FOUND;
	if (id[0]) {
		be->find_err = fabric_partition_get(op->fabric, id, &be->part, &be->st);
		if (be->find_err == NV_OK && strcmp(be->part.name, p->name) != 0)
			be->find_err = NV_E_NOT_FOUND; /* the id now names another partition */
	}
	if (be->find_err == NV_E_NOT_FOUND)
		be->find_err = fabric_partition_find(op->fabric, p->name, &be->part, &be->st);
}

static enum nv_err patch(struct op *op, const struct kube_res *r, const char *name,
                         const json_t *body, const char *sub)
{
	struct kube_status st;
	enum nv_err rc =
	        kube_patch(op->c, r, NULL, name,
	                   &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE, .subresource = sub},
	                   body, NULL, &st);
	if (rc != NV_OK && rc != NV_E_CONFLICT && rc != NV_E_NOT_FOUND)
		log_warn(PART_COMP, "patch failed", "object=%s/%s err=%s msg=\"%s\"", r->resource,
		         name, nv_err_name(rc), st.message);
	return rc;
}

/* Cordons or uncordons one Node. The patch carries the Node's
 * resourceVersion; the kubelet and the Rack controller move it too, so on a
 * conflict the Node is read again and the patch computed afresh. */
static enum nv_err cordon_one(struct op *op, struct part_pass *p, const struct op_part_tray *t,
                              bool want, int changed[2])
{
	json_t *body = op_part_cordon_patch(t->node_o, p->name, want), *fresh = NULL;
	struct kube_status st;
	enum nv_err rc = NV_OK;
	for (int attempt = 0; body && attempt < 3; attempt++) {
		rc = patch(op, &KUBE_RES_NODES, t->node, body, NULL);
		json_decref(body);
		body = NULL;
		if (rc == NV_OK) {
			changed[want ? 0 : 1]++;
			log_info(PART_COMP, want ? "node cordoned" : "node uncordoned",
			         "partition=%s node=%s", p->name, t->node);
		}
		if (rc != NV_E_CONFLICT)
			break;
		json_decref(fresh);
		fresh = NULL;
		if ((rc = kube_get(op->c, &KUBE_RES_NODES, NULL, t->node, &fresh, &st)) != NV_OK)
			break;
		body = op_part_cordon_patch(fresh, p->name, want);
	}
	json_decref(body);
	json_decref(fresh);
	return rc;
}

/* Whether the cached Node carries this partition's cordon mark. */
static bool marked_by(const json_t *node, const char *owner)
{
	const json_t *a =
	        json_object_get(jx_path(node, "metadata.annotations"), DRAIN_ANN_CORDONED_BY);
	return json_is_string(a) && strcmp(json_string_value(a), owner) == 0;
}

/* Cordons the Nodes of the trays in mask for this partition and lifts the
 * partition's cordon from every other Node of the rack; counts both in
 * changed[0] and changed[1]. A Node we release goes through drain_release,
 * which also drops the checkpoint handshake from the pods that stayed; only
 * Nodes that carry our mark are looked at, so steady state reads nothing. */
static enum nv_err cordons_sync(struct op *op, struct part_pass *p, uint32_t mask, int changed[2])
{
	char owner[128];
	enum nv_err worst = NV_OK, rc;
	snprintf(owner, sizeof(owner), "%s%s", OP_PART_CORDON_PREFIX, p->name);
	for (unsigned i = 0; i < p->in.ntrays; i++) {
		const struct op_part_tray *t = &p->in.trays[i];
		struct kube_status st;
		if (t->node_o == NULL)
			continue;
		if (mask & (1u << t->index)) {
			rc = cordon_one(op, p, t, true, changed);
		} else if (!marked_by(t->node_o, owner)) {
			continue;
		} else if ((rc = drain_release(op->c, &t->node, 1, owner, NULL, &st)) == NV_OK) {
			changed[1]++;
			log_info(PART_COMP, "node uncordoned", "partition=%s node=%s", p->name,
			         t->node);
		} else {
			log_warn(PART_COMP, "release failed",
			         "partition=%s node=%s err=%s msg=\"%s\"", p->name, t->node,
			         nv_err_name(rc), st.message);
		}
		if (rc != NV_OK)
			worst = rc;
	}
	return worst;
}

/* Drains the pods of the Nodes the change cordons (members, and trays
 * that leave) before the request goes out; folds the pass into d. */
static enum nv_err drain_members(struct op *op, struct part_pass *p, struct op_part_decision *d)
{
	const char *nodes[API_COMPUTE_TRAYS];
	char owner[128];
	struct drain_policy pol;
	struct drain_result dr;
	struct kube_status st;
	int64_t now = time_wall_ms();
	unsigned n = 0;
	enum nv_err rc;

	for (unsigned i = 0; i < p->in.ntrays; i++)
		if ((d->cordon & (1u << p->in.trays[i].index)) && p->in.trays[i].node_o)
			nodes[n++] = p->in.trays[i].node;
	op_part_drain_policy(&p->in, now, owner, sizeof(owner), &pol);
	memset(&dr, 0, sizeof(dr));
	if (n > 0 && (rc = drain_nodes(op->c, nodes, n, &pol, now, &dr, &st)) != NV_OK) {
		log_warn(PART_COMP, "drain failed", "partition=%s err=%s msg=\"%s\"", p->name,
		         nv_err_name(rc), st.message);
		return rc;
	}
	if (n == 0)
		dr.done = true;
	op_part_drained(d, &dr, now);
	if (!dr.done)
		log_info(PART_COMP, "draining",
		         "partition=%s pods=%d waiting_ack=%d blocked=%d "
		         "terminating=%d msg=\"%s\"",
		         p->name, dr.pods, dr.waiting_ack, dr.blocked, dr.terminating, dr.message);
	return NV_OK;
}

static enum nv_err finalizer_set(struct op *op, struct part_pass *p, bool want)
{
	json_t *list = json_array(), *f, *body;
	enum nv_err rc;
	size_t i;
	json_array_foreach(jx_path(p->part, "metadata.finalizers"), i, f)
		if (!json_is_string(f) || strcmp(json_string_value(f), OP_FINALIZER_PARTITION) != 0)
			json_array_append(list, f);
	if (want)
		json_array_append_new(list, json_string(OP_FINALIZER_PARTITION));
	body = json_pack("{s:{s:s,s:o}}", "metadata", "resourceVersion",
	                 jx_str_or(p->part, "metadata.resourceVersion", ""), "finalizers", list);
	rc = patch(op, &OP_RES_PARTITIONS, p->name, body, NULL);
	json_decref(body);
	return rc;
}

/* ComputeDomains with a member in this rack place and configure against
 * the trays' cliques: look at them again once the fabric moved. */
static void domains_requeue(struct op *op, struct part_pass *p)
{
	for (unsigned i = 0; i < p->in.ntrays; i++) {
		const json_t *a =
		        json_object_get(jx_path(p->in.trays[i].tray, "metadata.annotations"),
		                        OP_LABEL_COMPUTE_DOMAIN);
		const char *v = json_is_string(a) ? json_string_value(a) : NULL;
		const char *dot = v ? strchr(v, '.') : NULL;
		char key[OP_DOMAIN_KEY_MAX];
		if (dot == NULL || dot == v)
			continue;
		snprintf(key, sizeof(key), "%.*s/%s", (int)(dot - v), v, dot + 1);
		kube_workqueue_add(op_queue(op, DOMAIN_CONTROLLER), key);
	}
}

/* Sends the decided CREATE, UPDATE or DELETE and folds the answer in. */
static void backend_request(struct op *op, struct part_pass *p, struct op_part_decision *d)
{
	struct fabric_op fop;
	struct fabric_status st;
	enum nv_err rc;
	memset(&fop, 0, sizeof(fop));
	memset(&st, 0, sizeof(st));
	if (d->action == OP_PART_CREATE)
		rc = fabric_partition_create(op->fabric, &d->spec, &fop, &st);
	else if (d->action == OP_PART_UPDATE)
		rc = fabric_partition_update(op->fabric, d->backend_id, &d->spec, &fop, &st);
	else
		rc = fabric_partition_delete(op->fabric, d->backend_id, &fop, &st);
	log_info(PART_COMP, rc == NV_OK ? "backend change requested" : "backend refused the change",
	         "partition=%s action=%s err=%s op=%s msg=\"%s\"", p->name,
	         d->action == OP_PART_CREATE   ? "create"
	         : d->action == OP_PART_UPDATE ? "update"
	                                       : "delete",
	         nv_err_name(rc), fop.id, st.message);
	op_part_requested(d, p->be.name, rc, &fop, &st, op->cfg.fabric_poll_ms);
}

/* Writes the status. After a backend request (requested), a conflict
 * means the cache was behind our own last write: the object is read again
 * and the status written onto it, so that the operation id is recorded. */
static enum nv_err status_sync(struct op *op, struct part_pass *p, const struct op_part_decision *d,
                               bool requested)
{
	json_t *want = json_deep_copy(p->part), *body, *fresh = NULL;
	const char *was = jx_str_or(p->part, "status.phase", "");
	const char *now = op_part_phase_name(d->phase);
	struct kube_status st;
	enum nv_err rc = NV_OK;

	op_part_status_apply(want, &p->in, d, time_wall_ms());
	body = op_rack_status_patch(p->part, want);
	if (body) {
		rc = patch(op, &OP_RES_PARTITIONS, p->name, body, "status");
		for (int attempt = 0; requested && rc == NV_E_CONFLICT && attempt < 3; attempt++) {
			json_decref(fresh);
			fresh = NULL;
			if ((rc = kube_get(op->c, &OP_RES_PARTITIONS, NULL, p->name, &fresh,
			                   &st)) != NV_OK)
				break;
			json_decref(want);
			json_decref(body);
			want = json_deep_copy(fresh);
			op_part_status_apply(want, &p->in, d, time_wall_ms());
			body = op_rack_status_patch(fresh, want);
			rc = body ? patch(op, &OP_RES_PARTITIONS, p->name, body, "status") : NV_OK;
		}
		if (rc == NV_OK)
			log_info(PART_COMP, "status written", "partition=%s phase=%s op=%s",
			         p->name, now, d->op_id);
		if (rc == NV_OK && strcmp(was, now) != 0)
			op_event(op, p->part, d->phase == API_PART_FAILED ? "Warning" : "Normal",
			         now, "Reconcile", "%s", d->message);
	}
	json_decref(body);
	json_decref(want);
	json_decref(fresh);
	return rc;
}

static struct kube_result release(struct op *op, struct part_pass *p,
                                  const struct op_part_decision *d)
{
	int changed[2] = {0, 0};
	enum nv_err rc = cordons_sync(op, p, 0, changed);
	if (rc == NV_OK && (rc = finalizer_set(op, p, false)) == NV_E_NOT_FOUND)
		return (struct kube_result){0}; /* released by an earlier pass */
	if (rc == NV_OK && d->silent)
		op_event(op, p->part, "Warning", "ReleasedWithoutReport", "Delete",
		         "%s; %d Nodes uncordoned", d->message, changed[1]);
	else if (rc == NV_OK)
		op_event(op, p->part, "Normal", "Released", "Delete",
		         "backend partition gone, %d Nodes uncordoned", changed[1]);
	if (rc == NV_OK)
		domains_requeue(op, p);
	return (struct kube_result){.err = rc};
}

static struct kube_result part_reconcile(void *ud, const char *key)
{
	struct op *op = ud;
	struct part_pass p;
	struct op_part_decision *d = xcalloc(1, sizeof(*d));
	struct kube_result res = {0};
	enum nv_err rc = NV_OK, r2;
	int changed[2] = {0, 0};

	memset(&p, 0, sizeof(p));
	p.part = kube_informer_get(op->partitions, key);
	if (p.part == NULL)
		goto out; /* gone: its finalizer already ran */
	p.name = kube_obj_name(p.part);
	bool deleting = json_is_string(jx_path(p.part, "metadata.deletionTimestamp"));
	const json_t *fins = jx_path(p.part, "metadata.finalizers"), *f;
	bool ours = false;
	size_t i;
	json_array_foreach(fins, i, f)
		ours |= json_is_string(f) &&
		        strcmp(json_string_value(f), OP_FINALIZER_PARTITION) == 0;
	if (!ours) {
		if (!deleting) /* the update brings us back */
			res.err = finalizer_set(op, &p, true);
		goto out;
	}
	if ((rc = spec_read(op, &p)) != NV_OK) {
		if (!deleting) { /* until the object changes */
			res = (struct kube_result){.err = rc, .terminal = true};
			goto out;
		}
		spec_fallback(&p);
	}
	pass_load(op, &p);
	if (op_part_wants_backend(&p.in))
		look(op, &p);
	op_part_decide(&p.in, d);
	if (d->action == OP_PART_RELEASE) {
		res = release(op, &p, d);
		goto out;
	}
	if (!d->keep_cordons)
		rc = cordons_sync(op, &p, d->cordon, changed);
	if (changed[0] > 0)
		op_event(op, p.part, "Normal", "Draining", "Cordon",
		         "cordoned %d Nodes for the partition change; their pods are drained "
		         "before the fabric request",
		         changed[0]);
	/* A change is sent only once its Nodes are cordoned and drained. */
	if (rc == NV_OK && (d->action == OP_PART_CREATE || d->action == OP_PART_UPDATE))
		rc = drain_members(op, &p, d);
	if (rc == NV_OK && d->reason && strcmp(d->reason, "DrainBlocked") == 0 &&
	    strcmp(jx_str_or(kube_condition_find(p.part, "Ready"), "reason", ""), "DrainBlocked") !=
	            0)
		op_event(op, p.part, "Warning", "DrainBlocked", "Drain", "%s", d->message);
	if (rc == NV_OK && d->reason && strcmp(d->reason, OP_PART_NVIDIA_REASON) == 0 &&
	    strcmp(jx_str_or(kube_condition_find(p.part, "Ready"), "message", ""), d->message) != 0)
		op_event(op, p.part, "Warning", "HeldByNVIDIAComputeDomain", "Reconcile", "%s",
		         d->message);
	bool requested = d->action != OP_PART_NOTHING && rc == NV_OK;
	if (requested)
		backend_request(op, &p, d);
	if ((d->phase == API_PART_REFRESHING_IMEX || d->phase == API_PART_ACTIVE) &&
	    strcmp(jx_str_or(p.part, "status.phase", ""), op_part_phase_name(d->phase)) != 0)
		domains_requeue(op, &p);
	/* Only an accepted request has an operation id that must not be lost. */
	if ((r2 = status_sync(op, &p, d, requested && d->op_id[0])) != NV_OK)
		rc = r2;
	if (rc == NV_OK && d->retry)
		rc = NV_E_STATE; /* the workqueue's per-item backoff paces the retry */
	res.err = rc;
	res.requeue_after_ms = rc == NV_OK ? d->requeue_ms : 0;
out:
	free(d);
	pass_clear(&p);
	return res;
}

static void part_backend_close(struct op *op)
{
	fabric_backend_free(op->fabric);
	op->fabric = NULL;
}

const struct op_controller op_part_controller = {
        .name = PART_CONTROLLER,
        .comp = PART_COMP,
        .workers = OP_CONFIG(partition_workers),
        /* Backend failures back off from 1 s to 5 min per partition. */
        .queue = {.base_delay_ms = 1000, .max_delay_ms = 300000},
        .watches = part_watches,
        .nwatches = sizeof(part_watches) / sizeof(part_watches[0]),
        .reconcile = part_reconcile,
        .open = part_backend_open,
        .close = part_backend_close,
};
