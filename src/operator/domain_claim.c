// SPDX-License-Identifier: Apache-2.0
// The ComputeDomain controller's DRA objects: the DeviceClass of the
// imex.nvl72.io driver, applied at leader start, and one ResourceClaimTemplate
// per domain in its namespace, through which pods claim the domain's IMEX
// channel. The bodies and the decisions are domain_eval.c's; this file reads
// and writes them, and copes with an API server that serves no DRA.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/api_domain.h"
#include "nvl72/json.h"
#include "nvl72/log.h"
#include "nvl72/operator_domain.h"
#include "op_ctx.h"

/* resource.k8s.io/v1, GA in Kubernetes 1.34 (k8s.io/api v0.34, resource/v1). */
#define DRA_GROUP_PATH "/apis/resource.k8s.io/v1"
static const struct kube_res RES_CLAIM_TEMPLATES = {
        "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", true};
static const struct kube_res RES_DEVICE_CLASSES = {"resource.k8s.io", "v1", "deviceclasses",
                                                   "DeviceClass", false};
#define FIELD_MANAGER "nvl72-operator"
/* The leader-start calls run on the main thread while the workers already
 * run: each is one attempt, so a slow API server holds that thread (and its
 * view of leadership) for at most this long per call. */
#define DRA_CALL_TIMEOUT_MS 10000

/* ---- the state ---- */

static enum op_dra_state dra_state(struct op *op)
{
	pthread_mutex_lock(&op->dra.mu);
	enum op_dra_state s = op->dra.state;
	pthread_mutex_unlock(&op->dra.mu);
	return s;
}

/* Records that DRA is not served, with one log line for the process. */
static void dra_unavailable(struct op *op, const char *why)
{
	pthread_mutex_lock(&op->dra.mu);
	bool said = op->dra.said_unavailable;
	op->dra.state = OP_DRA_UNAVAILABLE;
	op->dra.said_unavailable = true;
	pthread_mutex_unlock(&op->dra.mu);
	if (!said)
		log_warn(DOMAIN_COMP,
		         "resource.k8s.io/v1 is not served: ComputeDomains get no "
		         "ResourceClaimTemplate",
		         "why=\"%s\"", why);
}

/* One discovery GET of the group version: OP_DRA_UNAVAILABLE when the API
 * server answers 404 or lists no ResourceClaimTemplates; OP_DRA_SERVED
 * otherwise, also when it cannot be asked (the writes will tell). */
static enum op_dra_state dra_discover(struct op *op, char *why, size_t cap)
{
	struct kube_status st;
	json_t *list = NULL, *r;
	bool templates = false, classes = false;
	size_t i;
	enum nv_err rc = kube_request(op->c,
	                              &(struct kube_raw_req){.method = "GET",
	                                                     .path = DRA_GROUP_PATH,
	                                                     .timeout_ms = DRA_CALL_TIMEOUT_MS,
	                                                     .no_retry = true},
	                              &list, &st);

	if (rc == NV_E_NOT_FOUND) {
		snprintf(why, cap, "GET %s: 404", DRA_GROUP_PATH);
		return OP_DRA_UNAVAILABLE;
	}
	if (rc != NV_OK) {
		log_warn(DOMAIN_COMP, "cannot tell whether resource.k8s.io/v1 is served; trying",
		         "err=%s msg=\"%s\"", nv_err_name(rc), st.message);
		return OP_DRA_SERVED;
	}
	json_array_foreach(json_object_get(list, "resources"), i, r) {
		const char *name = jx_str_or(r, "name", "");
		templates |= strcmp(name, RES_CLAIM_TEMPLATES.resource) == 0;
		classes |= strcmp(name, RES_DEVICE_CLASSES.resource) == 0;
	}
	json_decref(list);
	if (templates && classes)
		return OP_DRA_SERVED;
	snprintf(why, cap, "%s lists no resourceclaimtemplates or deviceclasses", DRA_GROUP_PATH);
	return OP_DRA_UNAVAILABLE;
}

/* ---- the template cache ---- */

/* A template's domain: its controller ComputeDomain in its namespace, and
 * the domain its label names. */
static void template_map(struct op *op, const json_t *t)
{
	struct kube_workqueue *q = op_queue(op, DOMAIN_CONTROLLER);
	const json_t *l = jx_path(t, "metadata.labels"), *v, *r;
	char key[OP_DOMAIN_KEY_MAX];
	size_t i;

	if (q == NULL)
		return;
	json_array_foreach(jx_path(t, "metadata.ownerReferences"), i, r)
		if (json_is_true(json_object_get(r, "controller")) &&
		    strcmp(jx_str_or(r, "kind", ""), "ComputeDomain") == 0) {
			snprintf(key, sizeof(key), "%.63s/%.120s", kube_obj_namespace(t),
			         jx_str_or(r, "name", ""));
			kube_workqueue_add(q, key);
		}
	v = json_is_object(l) ? json_object_get(l, OP_LABEL_COMPUTE_DOMAIN) : NULL;
	const char *dkey = json_is_string(v) ? json_string_value(v) : "";
	const char *dot = strchr(dkey, '.');
	if (dot && dot != dkey && dot[1]) {
		snprintf(key, sizeof(key), "%.*s/%.120s", (int)(dot - dkey), dkey, dot + 1);
		kube_workqueue_add(q, key);
	}
}

static void on_template_add(void *ud, json_t *obj)
{
	template_map(ud, obj);
}

static void on_template_update(void *ud, json_t *old, json_t *obj)
{
	template_map(ud, old);
	template_map(ud, obj);
}

static void on_template_delete(void *ud, json_t *obj, bool unknown)
{
	(void)unknown;
	template_map(ud, obj);
}

/* Makes and starts the cache once; a later term keeps it. */
static void templates_start(struct op *op)
{
	struct kube_informer *inf = NULL;
	struct kube_informer_opts o = {.res = &RES_CLAIM_TEMPLATES,
	                               .label_selector = OP_LABEL_COMPUTE_DOMAIN};
	const struct kube_handler h = {.on_add = on_template_add,
	                               .on_update = on_template_update,
	                               .on_delete = on_template_delete,
	                               .ud = op};

	if (op->dra.templates != NULL) /* main thread: its only writer */
		return;
	if (kube_informer_new(op->c, &o, &inf) != NV_OK ||
	    kube_informer_add_handler(inf, &h) != NV_OK || kube_informer_start(inf) != NV_OK) {
		log_warn(DOMAIN_COMP, "ResourceClaimTemplate cache not started: reading each one",
		         "resource=%s", RES_CLAIM_TEMPLATES.resource);
		kube_informer_free(inf);
		return;
	}
	pthread_mutex_lock(&op->dra.mu);
	op->dra.templates = inf;
	pthread_mutex_unlock(&op->dra.mu);
}

/* The template ns/name: from the cache once it has synced; otherwise, or
 * when the cache lacks it (an unlabelled one is not there), with a GET.
 * NV_E_NOT_FOUND when it does not exist. */
static enum nv_err template_get(struct op *op, const char *ns, const char *name, json_t **out)
{
	struct kube_status st;
	char key[320];
	json_t *t = NULL;
	enum nv_err rc;

	snprintf(key, sizeof(key), "%s/%s", ns, name);
	pthread_mutex_lock(&op->dra.mu);
	struct kube_informer *inf = op->dra.templates;
	if (inf && kube_informer_synced(inf))
		t = kube_informer_get(inf, key);
	pthread_mutex_unlock(&op->dra.mu);
	if (t) {
		*out = t;
		return NV_OK;
	}
	rc = kube_get(op->c, &RES_CLAIM_TEMPLATES, ns, name, &t, &st);
	if (rc == NV_OK)
		*out = t;
	else if (rc != NV_E_NOT_FOUND)
		log_warn(DOMAIN_COMP, "ResourceClaimTemplate read failed",
		         "template=%s/%s err=%s msg=\"%s\"", ns, name, nv_err_name(rc), st.message);
	return rc;
}

/* ---- leader start ---- */

/* The DeviceClass by server-side apply, as the field manager
 * nvl72-operator, forced: the class is the operator's. One attempt (a raw
 * PATCH, as kube_patch would send it, without its retries). */
static void device_class_apply(struct op *op)
{
	struct kube_status st;
	json_t *body = op_domain_device_class();
	enum nv_err rc = kube_request(
	        op->c,
	        &(struct kube_raw_req){.method = "PATCH",
	                               .path = DRA_GROUP_PATH "/deviceclasses/" OP_DRA_DEVICE_CLASS,
	                               .query = "fieldManager=" FIELD_MANAGER "&force=true",
	                               .content_type = "application/apply-patch+yaml",
	                               .body = body,
	                               .timeout_ms = DRA_CALL_TIMEOUT_MS,
	                               .no_retry = true},
	        NULL, &st);
	json_decref(body);
	if (rc == NV_E_NOT_FOUND)
		dra_unavailable(op, "apply of the DeviceClass: 404");
	else if (rc != NV_OK)
		log_warn(
		        DOMAIN_COMP,
		        "DeviceClass not applied: claims cannot be allocated until the next leader "
		        "start",
		        "deviceclass=%s err=%s msg=\"%s\"", OP_DRA_DEVICE_CLASS, nv_err_name(rc),
		        st.message);
	else
		log_info(DOMAIN_COMP, "DeviceClass applied", "deviceclass=%s driver=%s",
		         OP_DRA_DEVICE_CLASS, OP_DRA_DRIVER);
}

void op_claim_leading(struct op *op)
{
	struct kube_workqueue *q = op_queue(op, DOMAIN_CONTROLLER);
	char why[160] = "", key[OP_DOMAIN_KEY_MAX];
	json_t *ds, *d;
	size_t i;

	if (dra_discover(op, why, sizeof(why)) == OP_DRA_UNAVAILABLE) {
		dra_unavailable(op, why);
	} else {
		pthread_mutex_lock(&op->dra.mu);
		op->dra.state = OP_DRA_SERVED;
		pthread_mutex_unlock(&op->dra.mu);
		templates_start(op);
		device_class_apply(op);
	}
	/* Passes that ran before this knew nothing of DRA. */
	ds = kube_informer_list(op->domains);
	json_array_foreach(ds, i, d)
		if (q && kube_obj_key(d, key, sizeof(key)) == NV_OK)
			kube_workqueue_add(q, key);
	json_decref(ds);
}

/* ---- one domain ---- */

__attribute__((format(printf, 5, 6))) static void claim_say(struct op_domain_claim *out,
                                                            const char *name, bool ready,
                                                            const char *reason, const char *fmt,
                                                            ...)
{
	va_list ap;
	out->name = name;
	out->ready = ready;
	out->reason = reason;
	va_start(ap, fmt);
	vsnprintf(out->message, sizeof(out->message), fmt, ap);
	va_end(ap);
}

/* Whether dom's ClaimTemplateReady condition already gives reason. */
static bool said(const json_t *dom, const char *reason)
{
	const json_t *c = kube_condition_find(dom, OP_COND_CLAIM_TEMPLATE);
	return c && strcmp(jx_str_or(c, "reason", ""), reason) == 0;
}

static void unavailable_say(struct op *op, const json_t *dom, struct op_domain_claim *out)
{
	claim_say(out, NULL, false, "DRAUnavailable",
	          "the API server serves no resource.k8s.io/v1 (Kubernetes 1.34 or later with "
	          "DRA): no ResourceClaimTemplate");
	if (!said(dom, "DRAUnavailable"))
		op_event(op, dom, "Warning", "DRAUnavailable", "ClaimTemplate", "%s", out->message);
}

/* Creates want. A 404 is asked about once more: a resource no longer
 * served makes DRA unavailable; anything else is an error. */
static enum nv_err template_create(struct op *op, const json_t *dom, const json_t *want,
                                   const char *name, struct op_domain_claim *out)
{
	const char *ns = kube_obj_namespace(dom);
	struct kube_status st;
	char why[160] = "";
	enum nv_err rc = kube_create(op->c, &RES_CLAIM_TEMPLATES, ns, want, NULL, &st);

	if (rc == NV_E_NOT_FOUND && dra_discover(op, why, sizeof(why)) == OP_DRA_UNAVAILABLE) {
		dra_unavailable(op, why);
		unavailable_say(op, dom, out);
		return NV_OK;
	}
	if (rc == NV_E_EXISTS) /* made meanwhile: the next pass judges it */
		return NV_E_CONFLICT;
	if (rc != NV_OK) {
		claim_say(out, NULL, false, "TemplateError",
		          "creating ResourceClaimTemplate %s/%s failed: %s: %.200s", ns, name,
		          nv_err_name(rc), st.message);
		log_warn(DOMAIN_COMP, "ResourceClaimTemplate not created",
		         "domain=%s/%s template=%s err=%s msg=\"%s\"", ns, kube_obj_name(dom), name,
		         nv_err_name(rc), st.message);
		return rc;
	}
	log_info(DOMAIN_COMP, "ResourceClaimTemplate created", "domain=%s/%s template=%s", ns,
	         kube_obj_name(dom), name);
	op_event(
	        op, dom, "Normal", "ClaimTemplateCreated", "ClaimTemplate",
	        "created ResourceClaimTemplate %s/%s: pods claim the domain's IMEX channel from it",
	        ns, name);
	claim_say(out, name, true, "TemplateReady", "ResourceClaimTemplate %s/%s", ns, name);
	return NV_OK;
}

/* Deletes have (a template of dom's) if it is still the object read. */
static enum nv_err template_delete(struct op *op, const json_t *have)
{
	struct kube_status st;
	enum nv_err rc = kube_delete(
	        op->c, &RES_CLAIM_TEMPLATES, kube_obj_namespace(have), kube_obj_name(have),
	        &(struct kube_delete_opts){.grace_period_s = -1,
	                                   .precondition_uid =
	                                           jx_str_or(have, "metadata.uid", NULL)},
	        &st);
	if (rc == NV_E_NOT_FOUND)
		return NV_OK;
	if (rc != NV_OK)
		log_warn(DOMAIN_COMP, "ResourceClaimTemplate not deleted",
		         "template=%s/%s err=%s msg=\"%s\"", kube_obj_namespace(have),
		         kube_obj_name(have), nv_err_name(rc), st.message);
	return rc;
}

enum nv_err op_claim_sync(struct op *op, const json_t *dom, const char *key, const char *name,
                          enum op_domain_channels channels, struct op_domain_claim *out)
{
	const char *ns = kube_obj_namespace(dom);
	enum op_dra_state s = dra_state(op);
	json_t *want = NULL, *have = NULL;
	char why[256];
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	if (s == OP_DRA_UNKNOWN)
		return NV_OK;
	if (s == OP_DRA_UNAVAILABLE) {
		unavailable_say(op, dom, out);
		return NV_OK;
	}
	want = op_domain_claim_template(dom, key, name, channels);
	rc = template_get(op, ns, name, &have);
	if (rc == NV_E_NOT_FOUND) {
		rc = template_create(op, dom, want, name, out);
		goto out;
	}
	if (rc != NV_OK) {
		claim_say(out, NULL, false, "TemplateError",
		          "reading ResourceClaimTemplate %s/%s failed", ns, name);
		goto out;
	}
	switch (op_domain_claim_judge(have, want, why, sizeof(why))) {
	case OP_CLAIM_MATCHES:
		claim_say(out, name, true, "TemplateReady", "ResourceClaimTemplate %s/%s", ns,
		          name);
		break;
	case OP_CLAIM_FOREIGN:
		claim_say(out, NULL, false, "NameConflict",
		          "ResourceClaimTemplate %s/%s %s: not touched; name another in "
		          "spec.channel.resourceClaimTemplate.name",
		          ns, name, why);
		if (!said(dom, "NameConflict"))
			op_event(op, dom, "Warning", "ClaimTemplateConflict", "ClaimTemplate", "%s",
			         out->message);
		break;
	case OP_CLAIM_DIFFERS:
		/* A template's spec is immutable: it is made again. Claims
		 * already made from it keep what they were given. */
		if ((rc = template_delete(op, have)) != NV_OK) {
			claim_say(out, NULL, false, "TemplateError",
			          "deleting ResourceClaimTemplate %s/%s failed", ns, name);
			break;
		}
		op_event(op, dom, "Warning", "ClaimTemplateReplaced", "ClaimTemplate",
		         "ResourceClaimTemplate %s/%s %s: deleted, to be made again", ns, name,
		         why);
		log_info(DOMAIN_COMP, "ResourceClaimTemplate replaced",
		         "domain=%s/%s template=%s why=\"%s\"", ns, kube_obj_name(dom), name, why);
		rc = template_create(op, dom, want, name, out);
		break;
	}
out:
	json_decref(have);
	json_decref(want);
	return rc;
}

enum nv_err op_claim_release(struct op *op, const json_t *dom, const char *const *names, size_t n)
{
	const char *ns = kube_obj_namespace(dom), *uid = jx_str_or(dom, "metadata.uid", "");
	enum nv_err worst = NV_OK, rc;

	if (dra_state(op) == OP_DRA_UNAVAILABLE)
		return NV_OK;
	for (size_t i = 0; i < n; i++) {
		const json_t *r;
		json_t *have = NULL;
		bool ours = false, dup = false;
		size_t k;

		for (size_t j = 0; j < i; j++)
			dup |= strcmp(names[j], names[i]) == 0;
		if (dup || names[i][0] == '\0')
			continue;
		rc = template_get(op, ns, names[i], &have);
		if (rc == NV_E_NOT_FOUND)
			continue;
		if (rc != NV_OK) {
			worst = rc;
			continue;
		}
		json_array_foreach(jx_path(have, "metadata.ownerReferences"), k, r)
			ours |= json_is_true(json_object_get(r, "controller")) &&
			        strcmp(jx_str_or(r, "uid", ""), uid) == 0;
		if (ours && (rc = template_delete(op, have)) != NV_OK)
			worst = rc;
		else if (ours)
			log_info(DOMAIN_COMP, "ResourceClaimTemplate deleted",
			         "domain=%s/%s template=%s", ns, kube_obj_name(dom), names[i]);
		json_decref(have);
	}
	return worst;
}
