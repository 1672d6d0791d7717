// SPDX-License-Identifier: Apache-2.0
// The context the controllers share: the resources they read and write,
// events, leadership, the Lease and Node readings several of them make, and
// the one informer handler that turns any watched object into queue keys
// through its controller's map functions.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/api.h"
#include "nvl72/buf.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"

const struct kube_res OP_RES_RACKS = {"nvl72.io", "v1alpha1", "racks", "Rack", false};
const struct kube_res OP_RES_TRAYS = {"nvl72.io", "v1alpha1", "computetrays", "ComputeTray", false};
const struct kube_res OP_RES_MATRICES = {"nvl72.io", "v1alpha1", "compatibilitymatrices",
                                         "CompatibilityMatrix", false};
const struct kube_res OP_RES_PARTITIONS = {"nvl72.io", "v1alpha1", "rackpartitions",
                                           "RackPartition", false};
const struct kube_res OP_RES_DOMAINS = {"nvl72.io", "v1alpha1", "computedomains", "ComputeDomain",
                                        true};
const struct kube_res OP_RES_UPGRADES = {"nvl72.io", "v1alpha1", "rackupgrades", "RackUpgrade",
                                         false};
const struct kube_res OP_RES_APPROVALS = {"nvl72.io", "v1alpha1", "upgradeapprovals",
                                          "UpgradeApproval", false};

bool op_is_leading(struct op *op)
{
	pthread_mutex_lock(&op->mu);
	bool v = op->leading;
	pthread_mutex_unlock(&op->mu);
	return v;
}

void op_event(struct op *op, const json_t *obj, const char *type, const char *reason,
              const char *action, const char *fmt, ...)
{
	char note[1024], object[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	kube_recorder_eventf(op->rec, obj, type, reason, action, "%s", note);
	snprintf(object, sizeof(object), "%s/%s", jx_str_or(obj, "kind", "object"),
	         kube_obj_name(obj));
	for (char *c = object; *c && *c != '/'; c++)
		*c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
	log_info(OP_COMP, "event", "object=%s type=%s reason=%s note=\"%s\"", object, type, reason,
	         note);
	op_feed_event(op, type, reason, kube_obj_namespace(obj), object, note);
}

struct api_errors *op_spec_errors_new(void)
{
	struct api_errors *errs = xcalloc(1, sizeof(*errs));
	api_errors_init(errs);
	return errs;
}

enum nv_err op_spec_report_take(struct op *op, const json_t *obj, const char *comp, const char *key,
                                const char *action, enum nv_err rc, struct api_errors *errs)
{
	const char *ns = jx_str_or(obj, "metadata.namespace", "");
	struct buf text;

	if (rc != NV_OK) {
		buf_init(&text, 4096);
		(void)api_errors_format(errs, &text);
		log_warn(comp, "spec refused", "%s=%s%s%s err=\"%s\"", key, ns, ns[0] ? "/" : "",
		         kube_obj_name(obj), buf_str(&text));
		op_event(op, obj, "Warning", "SpecInvalid", action, "%s", buf_str(&text));
		buf_clear(&text);
	}
	free(errs);
	return rc;
}

/* ---- the generic handler ---- */

static void bound_add(void *ud, json_t *obj)
{
	const struct op_binding *b = ud;
	if (b->w->map2)
		b->w->map2(b->ctrl->op, NULL, obj, b->ctrl->q);
	else
		b->w->map(b->ctrl->op, obj, b->ctrl->q);
}

static void bound_update(void *ud, json_t *old, json_t *new_obj)
{
	const struct op_binding *b = ud;
	if (b->w->changed && !b->w->changed(b->ctrl->op, old, new_obj))
		return;
	if (b->w->map2)
		b->w->map2(b->ctrl->op, old, new_obj, b->ctrl->q);
	else
		b->w->map(b->ctrl->op, new_obj, b->ctrl->q);
}

static void bound_delete(void *ud, json_t *obj, bool final_state_unknown)
{
	const struct op_binding *b = ud;
	(void)final_state_unknown;
	if (b->w->map2)
		b->w->map2(b->ctrl->op, obj, NULL, b->ctrl->q);
	else
		b->w->map(b->ctrl->op, obj, b->ctrl->q);
}

static struct kube_informer *informer_at(struct op *op, size_t offset)
{
	return *(struct kube_informer **)(void *)((char *)op + offset);
}

enum nv_err op_ctrl_watch(struct op_ctrl *c)
{
	const struct op_controller *row = c->row;
	enum nv_err rc;
	if (row->nwatches == 0 || row->nwatches > OP_WATCH_MAX || row->watches[0].map == NULL) {
		log_error(OP_COMP, "controller row has no usable watches",
		          "controller=%s watches=%zu", row->name, row->nwatches);
		return NV_E_STATE;
	}
	for (size_t i = 0; i < row->nwatches; i++) {
		struct kube_informer *inf = informer_at(c->op, row->watches[i].informer);
		struct kube_handler h = {bound_add, bound_update, bound_delete, &c->bind[i]};
		c->bind[i] = (struct op_binding){c, &row->watches[i]};
		if (inf && (rc = kube_informer_add_handler(inf, &h)) != NV_OK)
			return rc;
	}
	return NV_OK;
}

void op_ctrl_enqueue_all(struct op_ctrl *c)
{
	const struct op_watch *w = &c->row->watches[0];
	json_t *all = kube_informer_list(informer_at(c->op, w->informer)), *o;
	size_t i;
	json_array_foreach(all, i, o)
		w->map(c->op, o, c->q);
	json_decref(all);
}

struct kube_workqueue *op_queue(struct op *op, const char *name)
{
	for (size_t i = 0; i < op->nctrl; i++)
		if (strcmp(op->ctrl[i].row->name, name) == 0)
			return op->ctrl[i].q;
	return NULL;
}

/* ---- readings several controllers make ---- */

int64_t op_lease_renew_ms(struct op *op, const char *tray)
{
	char key[160];
	int64_t ms = 0;
	json_t *l;
	if (op->leases == NULL)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", op->agent_ns, tray);
	l = kube_informer_get(op->leases, key);
	if (l && time_parse_rfc3339(jx_str_or(l, "spec.renewTime", ""), &ms) != NV_OK)
		ms = 0;
	json_decref(l);
	return ms;
}

bool op_lease_changed(struct op *op, const json_t *old, const json_t *new_obj)
{
	int64_t was = 0;
	return !(time_parse_rfc3339(jx_str_or(old, "spec.renewTime", ""), &was) == NV_OK &&
	         was > 0 &&
	         (op->cfg.heartbeat_timeout_ms == 0 ||
	          time_wall_ms() - was < op->cfg.heartbeat_timeout_ms) &&
	         json_equal(jx_path(old, "spec.holderIdentity"),
	                    jx_path(new_obj, "spec.holderIdentity")));
}

const char *op_node_ready(const json_t *node)
{
	const json_t *c = kube_condition_find(node, "Ready");
	return c ? jx_str_or(c, "status", "") : "";
}
