// SPDX-License-Identifier: Apache-2.0
// The ComputeDomain controller: places each domain on Ready trays of one
// clique, marks the member ComputeTrays and labels their Nodes, writes one
// ordered IMEX peer list into every member's spec and reports readiness;
// a finalizer releases everything on delete. Level-based, writes on change.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/alloc.h"
#include "nvl72/api_domain.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/operator_domain.h"
#include "nvl72/timeutil.h"
#include "op_ctx.h"

/* ---- watches ---- */

/* "<ns>.<name>" (label or annotation value) to the queue key "<ns>/<name>". */
static void enqueue_dkey(struct kube_workqueue *q, const char *dkey)
{
	char key[OP_DOMAIN_KEY_MAX];
	const char *dot = dkey ? strchr(dkey, '.') : NULL;
	if (dot == NULL || dot == dkey || dot[1] == '\0')
		return;
	snprintf(key, sizeof(key), "%.*s/%s", (int)(dot - dkey), dkey, dot + 1);
	kube_workqueue_add(q, key);
}

static const char *member_of(const json_t *obj, const char *where)
{
	const json_t *m = jx_path(obj, where);
	const json_t *v = json_is_object(m) ? json_object_get(m, OP_LABEL_COMPUTE_DOMAIN) : NULL;
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Domains still short of members, or NotReady (a failed member may wait
 * for a spare), may want a tray that just became free or healthy; there
 * are few domains, so a scan. */
static void enqueue_unplaced(struct op *op, struct kube_workqueue *q)
{
	json_t *ds = kube_informer_list(op->domains), *d;
	char key[OP_DOMAIN_KEY_MAX];
	size_t i;
	json_array_foreach(ds, i, d) {
		if (kube_condition_is_true(d, "Placed") &&
		    strcmp(jx_str_or(d, "status.status", ""), "NotReady") != 0 &&
		    !json_is_string(jx_path(d, "metadata.deletionTimestamp")))
			continue;
		if (kube_obj_key(d, key, sizeof(key)) == NV_OK)
			kube_workqueue_add(q, key);
	}
	json_decref(ds);
}

static void map_domain(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	char key[OP_DOMAIN_KEY_MAX];
	(void)op;
	if (kube_obj_key(obj, key, sizeof(key)) == NV_OK)
		kube_workqueue_add(q, key);
}

/* The domain a member belonged to and the one it belongs to now; a tray or
 * Node that belongs to none may be what an unplaced domain waits for. */
static void on_member(struct op *op, const json_t *o, const json_t *n, const char *where,
                      struct kube_workqueue *q)
{
	const char *a = o ? member_of(o, where) : NULL, *b = n ? member_of(n, where) : NULL;
	enqueue_dkey(q, a);
	if (b && (a == NULL || strcmp(a, b) != 0))
		enqueue_dkey(q, b);
	if (b == NULL)
		enqueue_unplaced(op, q);
}

static void map_tray(struct op *op, const json_t *o, const json_t *n, struct kube_workqueue *q)
{
	on_member(op, o, n, "metadata.annotations", q);
}

static void map_node(struct op *op, const json_t *o, const json_t *n, struct kube_workqueue *q)
{
	on_member(op, o, n, "metadata.labels", q);
}

/* Kubelet heartbeats change only status times: skip those. */
static bool node_changed(struct op *op, const json_t *o, const json_t *n)
{
	(void)op;
	return !(json_equal(jx_path(o, "metadata.labels"), jx_path(n, "metadata.labels")) &&
	         json_equal(jx_path(o, "spec"), jx_path(n, "spec")) &&
	         json_equal(jx_path(o, "status.addresses"), jx_path(n, "status.addresses")) &&
	         strcmp(op_node_ready(o), op_node_ready(n)) == 0);
}

/* Agent Leases are named after their ComputeTray; a renewal after
 * staleness brings the member back. */
static void map_lease(struct op *op, const json_t *obj, struct kube_workqueue *q)
{
	json_t *t = kube_informer_get(op->trays, kube_obj_name(obj));
	if (t)
		enqueue_dkey(q, member_of(t, "metadata.annotations"));
	json_decref(t);
}

static const struct op_watch domain_watches[] = {
        {.informer = OP_INFORMER(domains), .map = map_domain},
        {.informer = OP_INFORMER(leases), .map = map_lease, .changed = op_lease_changed},
        {.informer = OP_INFORMER(trays), .map2 = map_tray},
        {.informer = OP_INFORMER(nodes), .map2 = map_node, .changed = node_changed},
};

/* ---- candidates ---- */

/* Everything one pass reads, with the references it holds. */
struct domain_pass {
	json_t *dom;
	struct api_compute_domain *spec;
	json_t *trays; /* the ComputeTrays the pass can act on (tray_keep) */
	json_t **nodes;
	struct op_domain_cand *cand;
	unsigned n;
	int64_t stale_at_ms; /* the earliest a member's fresh heartbeat goes stale */
	char dkey[OP_DOMAIN_KEY_MAX];
	char ns[64];
	char name[128];
};

static void pass_clear(struct domain_pass *p)
{
	for (unsigned i = 0; i < p->n; i++)
		json_decref(p->nodes[i]);
	free(p->nodes);
	free(p->cand);
	json_decref(p->trays);
	json_decref(p->dom);
	api_compute_domain_free(p->spec);
}

static const char *internal_ip(const json_t *node)
{
	const json_t *a;
	size_t i;
	json_array_foreach(jx_path(node, "status.addresses"), i, a)
		if (strcmp(jx_str_or(a, "type", ""), "InternalIP") == 0)
			return jx_str_or(a, "address", "");
	return "";
}

/* Whether tray is one of the partition's (NULL: the domain names one that
 * does not exist, so no tray is). */
static bool in_partition(const json_t *part, const json_t *tray)
{
	const json_t *t;
	bool in = false;
	size_t i;
	if (part && strcmp(jx_str_or(part, "spec.rack", ""), jx_str_or(tray, "spec.rack", "")) == 0)
		json_array_foreach(jx_path(part, "spec.trays"), i, t)
			in |= json_integer_value(t) ==
			      json_integer_value(jx_path(tray, "spec.index"));
	return in;
}

/* Ready, or every condition but IMEX's True: the IMEX state of a free
 * tray (still winding down from its last domain) is about to change. */
static bool tray_healthy(const json_t *t)
{
	return kube_condition_is_true(t, "Ready") ||
	       (kube_condition_is_true(t, "DriverReady") &&
	        kube_condition_is_true(t, "FabricReady") &&
	        kube_condition_is_true(t, "FabricHealthy") &&
	        kube_condition_is_true(t, "HostFabricManagerOff"));
}

static bool tray_imex_ready(const json_t *t, const char *dkey)
{
	const json_t *og = jx_path(t, "status.observedGeneration");
	return strcmp(jx_str_or(t, "spec.imex.domain", ""), dkey) == 0 &&
	       strcmp(jx_str_or(t, "status.imex.daemonState", ""), "Ready") == 0 &&
	       strcmp(jx_str_or(t, "status.imex.domainState", ""), "Up") == 0 &&
	       (!json_is_integer(og) ||
	        json_integer_value(og) >= json_integer_value(jx_path(t, "metadata.generation")));
}

/* A member's failure. A silent agent (stale heartbeat) comes after a Node
 * that is gone or not Ready, and before what the tray's own conditions say,
 * as those are as old as the heartbeat. */
static void member_judge(struct op *op, struct domain_pass *p, struct op_domain_cand *c,
                         const json_t *t, const json_t *node, int64_t now)
{
	int64_t stale_at = 0;
	const char *f = op_domain_member_failure(t, node, p->dkey);
	const char *hb = op_domain_member_heartbeat(t, op_lease_renew_ms(op, c->tray),
	                                            op->cfg.heartbeat_timeout_ms, now, &stale_at);
	if (hb && (f == NULL || (strcmp(f, "NodeGone") != 0 && strcmp(f, "NodeNotReady") != 0)))
		f = hb;
	if (stale_at > 0 && (p->stale_at_ms == 0 || stale_at < p->stale_at_ms))
		p->stale_at_ms = stale_at;
	if ((c->failure = f) != NULL)
		c->failed_since_ms = op_domain_failed_since(p->dom, c->node, now);
}

/* What pass_load keeps of the cache's trays. */
struct tray_pick {
	struct domain_pass *p;
	const json_t *part; /* the domain's partition, when it names one */
};

/* Keeps a tray the pass can act on: one of the domain's (by annotation or
 * spec.imex), or a free one the domain's rack and partition allow. Placement,
 * replacement and release look at nothing else (domain_eval.c: free_pick and
 * the owner's trays), so a rack-scoped domain in a large cluster holds its
 * rack's trees for the pass, not a tree of every tray. */
static bool tray_keep(void *ud, json_t *t)
{
	struct tray_pick *k = ud;
	struct domain_pass *p = k->p;
	const char *rack = p->spec->rack, *owner;

	if (t == NULL)
		return true;
	owner = member_of(t, "metadata.annotations");
	if ((owner && strcmp(owner, p->dkey) == 0) ||
	    strcmp(jx_str_or(t, "spec.imex.domain", ""), p->dkey) == 0 ||
	    ((owner == NULL || owner[0] == '\0') &&
	     (rack[0] == '\0' || strcmp(rack, jx_str_or(t, "spec.rack", "")) == 0) &&
	     (p->spec->partition[0] == '\0' || in_partition(k->part, t))))
		json_array_append(p->trays, t);
	return true;
}

static void pass_load(struct op *op, struct domain_pass *p)
{
	const char *rack = p->spec->rack;
	const char *part = p->spec->partition;
	int64_t now = time_wall_ms();
	struct tray_pick pick = {p, NULL};
	json_t *pobj = part[0] ? kube_informer_get(op->partitions, part) : NULL;
	const json_t *t;
	size_t i;

	pick.part = pobj;
	p->trays = json_array();
	kube_informer_foreach(op->trays, tray_keep, &pick);
	p->cand = xcalloc(json_array_size(p->trays) + 1, sizeof(*p->cand));
	p->nodes = xcalloc(json_array_size(p->trays) + 1, sizeof(*p->nodes));
	json_array_foreach(p->trays, i, t) {
		struct op_domain_cand *c = &p->cand[p->n];
		json_t *node = kube_informer_get(op->nodes, jx_str_or(t, "spec.node", ""));
		const char *owner = member_of(t, "metadata.annotations");
		p->nodes[p->n++] = node;
		c->tray = kube_obj_name(t);
		c->node = jx_str_or(t, "spec.node", "");
		c->rack = jx_str_or(t, "spec.rack", "");
		c->index = (int)json_integer_value(jx_path(t, "spec.index"));
		c->clique = jx_str_or(t, "status.fabric.cliqueID", "");
		c->ip = jx_str_or(t, "status.imex.address", "");
		if (c->ip[0] == '\0')
			c->ip = node ? internal_ip(node) : "";
		c->owner = owner ? owner : "";
		c->has_slot = op_domain_prior_slot(p->dom, c->node, &c->slot);
		c->healthy = node && tray_healthy(t) && kube_condition_is_true(node, "Ready") &&
		             !json_is_true(jx_path(node, "spec.unschedulable")) &&
		             strcmp(jx_str_or(t, "spec.maintenance.state", "None"), "None") == 0;
		c->selected = (rack[0] == '\0' || strcmp(rack, c->rack) == 0) &&
		              (part[0] == '\0' || in_partition(pobj, t));
		c->imex_ready = tray_imex_ready(t, p->dkey);
		c->nvidia = op_domain_tray_nvidia(t);
		if (strcmp(c->owner, p->dkey) == 0)
			member_judge(op, p, c, t, node, now);
	}
	json_decref(pobj);
	op_domain_clique_split(p->cand, p->n, p->dkey, p->dom, now);
}

/* ---- writes ---- */

static enum nv_err patch(struct op *op, const struct kube_res *r, const char *ns, const char *name,
                         const json_t *body, const char *sub)
{
	struct kube_status st;
	enum nv_err rc =
	        kube_patch(op->c, r, ns, name,
	                   &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE, .subresource = sub},
	                   body, NULL, &st);
	if (rc != NV_OK && rc != NV_E_CONFLICT)
		log_warn(DOMAIN_COMP, "patch failed", "object=%s/%s err=%s msg=\"%s\"", r->resource,
		         name, nv_err_name(rc), st.message);
	return rc;
}

/* Takes the domain's annotation, spec.imex and Node labels off everything
 * that carries them. */
static enum nv_err release_all(struct op *op, const char *dkey)
{
	json_t *trays = kube_informer_list(op->trays), *nodes, *t, *body;
	enum nv_err worst = NV_OK, rc;
	size_t i;

	json_array_foreach(trays, i, t) {
		if ((body = op_domain_tray_release_patch(t, dkey)) == NULL)
			continue;
		if ((rc = patch(op, &OP_RES_TRAYS, NULL, kube_obj_name(t), body, NULL)) != NV_OK)
			worst = rc;
		else
			log_info(DOMAIN_COMP, "tray released", "domain=%s tray=%s", dkey,
			         kube_obj_name(t));
		json_decref(body);
	}
	json_decref(trays);
	nodes = kube_informer_by_index(op->nodes, "domain", dkey);
	json_array_foreach(nodes, i, t) {
		if ((body = op_domain_node_patch(t, dkey, false)) == NULL)
			continue;
		if ((rc = patch(op, &KUBE_RES_NODES, NULL, kube_obj_name(t), body, NULL)) != NV_OK)
			worst = rc;
		json_decref(body);
	}
	json_decref(nodes);
	return worst;
}

static bool has_finalizer(const json_t *d)
{
	const json_t *f;
	size_t i;
	json_array_foreach(jx_path(d, "metadata.finalizers"), i, f)
		if (json_is_string(f) &&
		    strcmp(json_string_value(f), OP_FINALIZER_COMPUTE_DOMAIN) == 0)
			return true;
	return false;
}

/* Adds (want) or removes our finalizer, keeping the others. */
static enum nv_err finalizer_set(struct op *op, struct domain_pass *p, bool want)
{
	json_t *list = json_array(), *f, *body;
	enum nv_err rc;
	size_t i;
	json_array_foreach(jx_path(p->dom, "metadata.finalizers"), i, f)
		if (!json_is_string(f) ||
		    strcmp(json_string_value(f), OP_FINALIZER_COMPUTE_DOMAIN) != 0)
			json_array_append(list, f);
	if (want)
		json_array_append_new(list, json_string(OP_FINALIZER_COMPUTE_DOMAIN));
	body = json_pack("{s:{s:s,s:o}}", "metadata", "resourceVersion",
	                 jx_str_or(p->dom, "metadata.resourceVersion", ""), "finalizers", list);
	rc = patch(op, &OP_RES_DOMAINS, p->ns, p->name, body, NULL);
	json_decref(body);
	return rc;
}

/* Nodes labelled for the domain whose tray is gone or no longer a member. */
static enum nv_err stray_labels(struct op *op, const struct domain_pass *p,
                                const struct op_domain_plan *plan)
{
	json_t *nodes = kube_informer_by_index(op->nodes, "domain", p->dkey), *n, *body;
	enum nv_err worst = NV_OK, rc;
	size_t i;

	json_array_foreach(nodes, i, n) {
		bool member = false;
		for (unsigned k = 0; k < plan->n; k++)
			member |= strcmp(p->cand[plan->member[k]].node, kube_obj_name(n)) == 0;
		if (member || (body = op_domain_node_patch(n, p->dkey, false)) == NULL)
			continue;
		if ((rc = patch(op, &KUBE_RES_NODES, NULL, kube_obj_name(n), body, NULL)) != NV_OK)
			worst = rc;
		json_decref(body);
	}
	json_decref(nodes);
	return worst;
}

/* Claims (or configures) one member. The patch carries the tray's
 * resourceVersion so that two domains never claim one tray; the agent's
 * status writes move it too, so on a conflict the tray is read again and,
 * still free or ours, patched once more. */
static enum nv_err tray_claim(struct op *op, const json_t *tray, const char *dkey, const char *uid,
                              const json_t *peers, enum op_domain_channels channels)
{
	json_t *body = op_domain_tray_patch(tray, dkey, uid, peers, channels), *fresh = NULL;
	const char *name = kube_obj_name(tray);
	struct kube_status st;
	enum nv_err rc = NV_OK;

	for (int attempt = 0; body && attempt < 3; attempt++) {
		rc = patch(op, &OP_RES_TRAYS, NULL, name, body, NULL);
		json_decref(body);
		body = NULL;
		if (rc != NV_E_CONFLICT)
			break;
		json_decref(fresh);
		fresh = NULL;
		if ((rc = kube_get(op->c, &OP_RES_TRAYS, NULL, name, &fresh, &st)) != NV_OK)
			break;
		const char *owner = member_of(fresh, "metadata.annotations");
		if (owner && strcmp(owner, dkey) != 0) {
			rc = NV_E_CONFLICT; /* another domain took it: next pass */
			break;
		}
		body = op_domain_tray_patch(fresh, dkey, uid, peers, channels);
	}
	json_decref(body);
	json_decref(fresh);
	return rc;
}

static enum op_domain_channels domain_channels(const struct domain_pass *p)
{
	return p->spec->alloc_mode == API_ALLOC_ALL ? OP_CHANNELS_ALL : OP_CHANNELS_SINGLE;
}

/* Claims and configures the members, frees the trays it no longer keeps
 * and keeps the Node labels in step. */
static enum nv_err members_sync(struct op *op, struct domain_pass *p,
                                const struct op_domain_plan *plan)
{
	json_t *peers = plan->placed ? op_domain_peers(p->cand, plan) : NULL, *body;
	const char *uid = jx_str_or(p->dom, "metadata.uid", "");
	enum op_domain_channels channels = domain_channels(p);
	enum nv_err worst = NV_OK, rc;

	for (unsigned i = 0; i < p->n; i++) {
		const struct op_domain_cand *c = &p->cand[i];
		const json_t *t = json_array_get(p->trays, i);
		bool member = false;
		for (unsigned k = 0; k < plan->n; k++)
			member |= plan->member[k] == i;
		if (member)
			rc = tray_claim(op, t, p->dkey, uid, peers, channels);
		else if ((body = op_domain_tray_release_patch(t, p->dkey)) != NULL) {
			rc = patch(op, &OP_RES_TRAYS, NULL, c->tray, body, NULL);
			json_decref(body);
		} else
			rc = NV_OK;
		if (rc != NV_OK)
			worst = rc;
		if (p->nodes[i] == NULL || (member && !plan->placed))
			continue;
		body = op_domain_node_patch(p->nodes[i], p->dkey, member);
		if (body && (rc = patch(op, &KUBE_RES_NODES, NULL, c->node, body, NULL)) != NV_OK)
			worst = rc;
		json_decref(body);
	}
	json_decref(peers);
	if ((rc = stray_labels(op, p, plan)) != NV_OK)
		worst = rc;
	return worst;
}

/* claim->reason NULL: the template part of the status stays as it is. */
static enum nv_err status_sync(struct op *op, struct domain_pass *p,
                               const struct op_domain_plan *plan,
                               const struct op_domain_claim *claim)
{
	json_t *want = json_deep_copy(p->dom), *body;
	const char *was = jx_str_or(p->dom, "status.status", "");
	enum nv_err rc = NV_OK;

	op_domain_status_apply(want, p->dkey, p->cand, plan, time_wall_ms());
	if (claim->reason)
		op_domain_claim_status_apply(want, claim, time_wall_ms());
	body = op_rack_status_patch(p->dom, want);
	if (body) {
		rc = patch(op, &OP_RES_DOMAINS, p->ns, p->name, body, "status");
		if (rc == NV_OK && strcmp(was, plan->ready ? "Ready" : "NotReady") != 0) {
			if (plan->ready)
				op_event(op, p->dom, "Normal", "DomainReady", "Reconcile",
				         "%u nodes Ready in clique %s", plan->n, plan->clique);
			else if (was[0])
				op_event(op, p->dom, "Warning", "DomainNotReady", "Reconcile", "%s",
				         jx_str_or(kube_condition_find(want, "Ready"), "message",
				                   ""));
		}
		if (rc == NV_OK)
			log_info(DOMAIN_COMP, "status written", "domain=%s/%s status=%s nodes=%u",
			         p->ns, p->name, plan->ready ? "Ready" : "NotReady", plan->n);
	}
	json_decref(body);
	json_decref(want);
	return rc;
}

/* ---- reconcile ---- */

/* One Event per failed member a spare replaced in this pass. */
static void replaced_events(struct op *op, const struct domain_pass *p,
                            const struct op_domain_plan *plan)
{
	for (unsigned i = 0; i < plan->nreplaced; i++) {
		const struct op_domain_cand *from = &p->cand[plan->replaced_from[i]];
		const struct op_domain_cand *to = &p->cand[plan->replaced_to[i]];
		char since[TIME_RFC3339_LEN];
		time_format_rfc3339(from->failed_since_ms, since);
		op_event(op, p->dom, "Warning", "NodeReplaced", "Replace",
		         "replaced node %s (%s since %s) with node %s of clique %s", from->node,
		         from->failure, since, to->node, to->clique);
		log_info(DOMAIN_COMP, "member replaced", "domain=%s/%s from=%s reason=%s to=%s",
		         p->ns, p->name, from->node, from->failure, to->node);
	}
}

/* Whether the domain's last status already said node has no spare. */
static bool said_no_spare(const json_t *dom, const char *node)
{
	const json_t *e;
	size_t i;
	json_array_foreach(jx_path(dom, "status.nodes"), i, e)
		if (strcmp(jx_str_or(e, "name", ""), node) == 0 &&
		    strcmp(jx_str_or(e, "replacement", ""), "NoSpare") == 0)
			return true;
	return false;
}

/* One Warning per failure that found no spare: the status records it
 * (status.nodes[].replacement), so a later pass or another leader does not
 * repeat it; the member's recovery clears it. Called after the status was
 * written, with the domain as it was before. */
static void no_spare_events(struct op *op, const struct domain_pass *p,
                            const struct op_domain_plan *plan)
{
	for (unsigned i = 0; i < plan->nunreplaced; i++) {
		const struct op_domain_cand *x = &p->cand[plan->unreplaced[i]];
		if (said_no_spare(p->dom, x->node))
			continue;
		op_event(
		        op, p->dom, "Warning", "NoSpare", "Replace",
		        "node %s failed (%s) and no free, healthy tray of clique %s in rack %s can "
		        "replace it; the domain stays NotReady",
		        x->node, x->failure, plan->clique ? plan->clique : "", x->rack);
		log_info(DOMAIN_COMP, "no spare", "domain=%s/%s node=%s reason=%s", p->ns, p->name,
		         x->node, x->failure);
	}
}

/* The templates a domain going away may have: the one its spec names and
 * the one its status reports. The garbage collector would delete them
 * through their owner reference, but only where one runs, and only after
 * the domain is gone. */
static enum nv_err templates_release(struct op *op, struct domain_pass *p)
{
	struct api_errors *errs = op_spec_errors_new();
	struct api_compute_domain *d = NULL;
	const char *names[2] = {"", jx_str_or(p->dom, "status.resourceClaimTemplate.name", "")};
	enum nv_err rc;

	if (api_compute_domain_parse(p->dom, &d, errs) == NV_OK)
		names[0] = d->claim_template;
	rc = op_claim_release(op, p->dom, names, 2);
	api_compute_domain_free(d);
	free(errs);
	return rc;
}

static struct kube_result domain_delete(struct op *op, struct domain_pass *p)
{
	enum nv_err rc = release_all(op, p->dkey);
	if (rc == NV_OK && has_finalizer(p->dom))
		rc = templates_release(op, p);
	if (rc == NV_OK && has_finalizer(p->dom)) {
		rc = finalizer_set(op, p, false);
		if (rc == NV_E_NOT_FOUND) /* a pass before this one removed it: gone */
			return (struct kube_result){.err = NV_OK};
		if (rc == NV_OK)
			log_info(DOMAIN_COMP, "released", "domain=%s/%s", p->ns, p->name);
	}
	return (struct kube_result){.err = rc};
}

/* The domain's ResourceClaimTemplate; a domain key too long for its label
 * gets none. */
static enum nv_err claim_sync(struct op *op, struct domain_pass *p, bool fits,
                              struct op_domain_claim *claim)
{
	if (!fits) {
		memset(claim, 0, sizeof(*claim));
		claim->reason = "NameTooLong";
		snprintf(claim->message, sizeof(claim->message),
		         "\"%s\" is longer than a label value (63): no ResourceClaimTemplate",
		         p->dkey);
		return NV_OK;
	}
	return op_claim_sync(op, p->dom, p->dkey, p->spec->claim_template, domain_channels(p),
	                     claim);
}

/* The domain's spec, read with the api's parser. The apiserver's schema
 * lets no spec through that it refuses; should one come, it is reported
 * and left alone until the object changes. */
static enum nv_err spec_read(struct op *op, struct domain_pass *p)
{
	struct api_errors *errs = op_spec_errors_new();
	enum nv_err rc = api_compute_domain_parse(p->dom, &p->spec, errs);
	return op_spec_report_take(op, p->dom, DOMAIN_COMP, "domain", "Place", rc, errs);
}

static struct kube_result domain_reconcile(void *ud, const char *key)
{
	struct op *op = ud;
	struct domain_pass p;
	struct op_domain_plan plan;
	const char *slash = strchr(key, '/');
	enum nv_err rc = NV_OK, r2;

	memset(&p, 0, sizeof(p));
	if (slash == NULL)
		return (struct kube_result){.err = NV_E_INVAL, .terminal = true};
	snprintf(p.ns, sizeof(p.ns), "%.*s", (int)(slash - key), key);
	snprintf(p.name, sizeof(p.name), "%s", slash + 1);
	bool fits = op_domain_key(p.ns, p.name, p.dkey);
	p.dom = kube_informer_get(op->domains, key);
	if (p.dom == NULL || json_is_string(jx_path(p.dom, "metadata.deletionTimestamp"))) {
		struct kube_result r = domain_delete(op, &p);
		pass_clear(&p);
		op_feed_domains(op);
		return r;
	}
	if (!has_finalizer(p.dom)) { /* the update brings us back */
		rc = finalizer_set(op, &p, true);
		pass_clear(&p);
		return (struct kube_result){.err = rc};
	}
	if ((rc = spec_read(op, &p)) != NV_OK) {
		pass_clear(&p);
		return (struct kube_result){.err = rc, .terminal = true};
	}
	pass_load(op, &p);
	int num = p.spec->num_nodes;
	if (fits) {
		op_domain_place(p.cand, p.n, p.dkey, num, &plan);
	} else {
		memset(&plan, 0, sizeof(plan));
		plan.reason = "NameTooLong";
		snprintf(plan.message, sizeof(plan.message),
		         "\"%s\" is longer than a label value (63)", p.dkey);
	}
	if (fits && p.spec->replace_failed_nodes)
		op_domain_replace_failed(p.cand, p.n, num, op->cfg.domain_replace_grace_ms,
		                         time_wall_ms(), &plan);
	if (fits && (r2 = members_sync(op, &p, &plan)) != NV_OK)
		rc = r2;
	struct op_domain_claim claim;
	enum nv_err crc = claim_sync(op, &p, fits, &claim);
	if (rc == NV_OK)
		replaced_events(op, &p, &plan);
	if (plan.npicked > 0 && rc == NV_OK)
		op_event(op, p.dom, "Normal", "TraysPicked", "Place",
		         "picked %u trays (%u of %d) in clique %s of rack %s", plan.npicked, plan.n,
		         num, plan.clique, plan.rack);
	else if (!plan.placed && !jx_str_or(p.dom, "status.status", "")[0])
		op_event(op, p.dom, "Warning", plan.reason, "Place", "%s", plan.message);
	if (rc == NV_OK && (r2 = status_sync(op, &p, &plan, &claim)) != NV_OK)
		rc = r2;
	if (rc == NV_OK)
		no_spare_events(op, &p, &plan);
	if (rc == NV_OK)
		rc = crc; /* a template write that failed comes back */
	pass_clear(&p);
	/* A status written here comes back as an update and another pass,
	 * which publishes it from the cache. */
	op_feed_domains(op);
	struct kube_result res = {.err = rc};
	int64_t next = plan.next_check_ms;
	if (p.stale_at_ms > 0 && (next == 0 || p.stale_at_ms < next))
		next = p.stale_at_ms;
	if (rc == NV_OK && next > 0) {
		int64_t d = next - time_wall_ms();
		res.requeue_after_ms = d > 1000 ? d : 1000;
	}
	return res;
}

const struct op_controller op_domain_controller = {
        .name = DOMAIN_CONTROLLER,
        .comp = DOMAIN_COMP,
        .workers = OP_CONFIG(domain_workers),
        .watches = domain_watches,
        .nwatches = sizeof(domain_watches) / sizeof(domain_watches[0]),
        .reconcile = domain_reconcile,
        .leading = op_claim_leading,
};
