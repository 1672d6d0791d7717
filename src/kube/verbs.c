// SPDX-License-Identifier: Apache-2.0
// The typed verbs on top of kube_request: get, paged list, create, update,
// the three patch flavours, delete with options, and eviction. Objects stay
// json_t end to end so unknown fields survive a read-modify-write.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_int.h"

const struct kube_res KUBE_RES_NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
const struct kube_res KUBE_RES_NODES = {"", "v1", "nodes", "Node", false};
const struct kube_res KUBE_RES_PODS = {"", "v1", "pods", "Pod", true};
const struct kube_res KUBE_RES_CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
const struct kube_res KUBE_RES_SECRETS = {"", "v1", "secrets", "Secret", true};
const struct kube_res KUBE_RES_LEASES = {"coordination.k8s.io", "v1", "leases", "Lease", true};
const struct kube_res KUBE_RES_EVENTS = {"events.k8s.io", "v1", "events", "Event", true};
const struct kube_res KUBE_RES_CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                       "CustomResourceDefinition", false};

#define PATH_MAX_BYTES 4096
#define QUERY_MAX_BYTES 8192

/* How one verb call is bounded: the client's policy, or one attempt. */
struct verb_bound {
	struct kube_stop *stop;
	int64_t timeout_ms; /* 0: the client's */
	bool once;
};

/* Runs method on r/ns/name/sub with query q; the shared body of the verbs. */
static enum nv_err verb_bounded(struct kube_client *c, const char *method, const struct kube_res *r,
                                const char *ns, const char *name, const char *sub,
                                const struct buf *q, const char *ctype, const json_t *body,
                                const struct verb_bound *b, json_t **out, struct kube_status *st)
{
	struct buf path;
	enum nv_err rc;

	kube_status_set(st, 0, "", "%s", "");
	if (r->namespaced && (ns == NULL || *ns == '\0') && name != NULL) {
		kube_status_set(st, 0, "", "%s %s: a namespace is required", method, r->resource);
		return NV_E_INVAL;
	}
	buf_init(&path, PATH_MAX_BYTES);
	rc = kube_path_build(&path, r, ns, name, sub);
	if (rc != NV_OK) {
		kube_status_set(st, 0, "", "%s %s: bad or oversized name", method, r->resource);
	} else {
		struct kube_raw_req req = {.method = method,
		                           .path = buf_str(&path),
		                           .query = q ? buf_str(q) : NULL,
		                           .content_type = ctype,
		                           .body = body,
		                           .timeout_ms = b->timeout_ms,
		                           .no_retry = b->once,
		                           .stop = b->stop};
		rc = kube_request(c, &req, out, st);
	}
	buf_clear(&path);
	return rc;
}

static enum nv_err verb_stop(struct kube_client *c, const char *method, const struct kube_res *r,
                             const char *ns, const char *name, const char *sub, const struct buf *q,
                             const char *ctype, const json_t *body, struct kube_stop *stop,
                             json_t **out, struct kube_status *st)
{
	const struct verb_bound b = {.stop = stop};
	return verb_bounded(c, method, r, ns, name, sub, q, ctype, body, &b, out, st);
}

static enum nv_err verb(struct kube_client *c, const char *method, const struct kube_res *r,
                        const char *ns, const char *name, const char *sub, const struct buf *q,
                        const char *ctype, const json_t *body, json_t **out, struct kube_status *st)
{
	return verb_stop(c, method, r, ns, name, sub, q, ctype, body, NULL, out, st);
}

enum nv_err kube_get(struct kube_client *c, const struct kube_res *r, const char *ns,
                     const char *name, json_t **out, struct kube_status *st)
{
	return verb(c, "GET", r, ns, name, NULL, NULL, NULL, NULL, out, st);
}

enum nv_err kube_get_once(struct kube_client *c, const struct kube_res *r, const char *ns,
                          const char *name, int64_t timeout_ms, json_t **out,
                          struct kube_status *st)
{
	const struct verb_bound b = {.timeout_ms = timeout_ms, .once = true};
	return verb_bounded(c, "GET", r, ns, name, NULL, NULL, NULL, NULL, &b, out, st);
}

enum nv_err kube_list_once(struct kube_client *c, const struct kube_res *r, const char *ns,
                           int64_t timeout_ms, json_t **out, struct kube_status *st)
{
	const struct verb_bound b = {.timeout_ms = timeout_ms, .once = true};
	return verb_bounded(c, "GET", r, ns, NULL, NULL, NULL, NULL, NULL, &b, out, st);
}

enum nv_err kube_create_once(struct kube_client *c, const struct kube_res *r, const char *ns,
                             const json_t *obj, int64_t timeout_ms, json_t **out,
                             struct kube_status *st)
{
	const struct verb_bound b = {.timeout_ms = timeout_ms, .once = true};
	if (ns == NULL || *ns == '\0')
		ns = kube_obj_namespace(obj);
	return verb_bounded(c, "POST", r, ns, NULL, NULL, NULL, "application/json", obj, &b, out,
	                    st);
}

static enum nv_err list_query(struct buf *q, const struct kube_list_opts *o)
{
	char lim[32];
	enum nv_err rc = NV_OK;

	if (o == NULL)
		return NV_OK;
	snprintf(lim, sizeof(lim), "%lld", (long long)o->limit);
	if (rc == NV_OK)
		rc = kube_query_add(q, "labelSelector", o->label_selector);
	if (rc == NV_OK)
		rc = kube_query_add(q, "fieldSelector", o->field_selector);
	if (rc == NV_OK)
		rc = kube_query_add(q, "resourceVersion", o->resource_version);
	if (rc == NV_OK)
		rc = kube_query_add(q, "resourceVersionMatch", o->resource_version_match);
	if (rc == NV_OK && o->limit > 0)
		rc = kube_query_add(q, "limit", lim);
	if (rc == NV_OK)
		rc = kube_query_add(q, "continue", o->continue_token);
	return rc;
}

enum nv_err kube_list(struct kube_client *c, const struct kube_res *r, const char *ns,
                      const struct kube_list_opts *o, json_t **out, struct kube_status *st)
{
	struct buf q;
	enum nv_err rc;

	buf_init(&q, QUERY_MAX_BYTES);
	rc = list_query(&q, o);
	if (rc == NV_OK)
		rc = verb_stop(c, "GET", r, ns, NULL, NULL, &q, NULL, NULL, o ? o->stop : NULL, out,
		               st);
	else
		kube_status_set(st, 0, "", "list %s: selectors too long", r->resource);
	buf_clear(&q);
	return rc;
}

static enum nv_err list_pages(struct kube_client *c, const struct kube_res *r, const char *ns,
                              struct kube_list_opts o, json_t **out, struct kube_status *st)
{
	json_t *all = NULL, *page = NULL;
	char *cont = NULL;
	enum nv_err rc;

	for (;;) {
		o.continue_token = cont;
		rc = kube_list(c, r, ns, &o, &page, st);
		if (rc != NV_OK)
			break;
		free(cont);
		cont = NULL;
		if (*jx_str_or(page, "metadata.continue", "") != '\0')
			cont = xstrdup(jx_str_or(page, "metadata.continue", ""));
		if (all == NULL) {
			all = page;
		} else {
			json_array_extend(json_object_get(all, "items"),
			                  json_object_get(page, "items"));
			json_object_set(all, "metadata", json_object_get(page, "metadata"));
			json_decref(page);
		}
		page = NULL;
		if (cont == NULL)
			break;
		/* Later pages must not repeat the first page's RV: the token carries it. */
		o.resource_version = NULL;
		o.resource_version_match = NULL;
	}
	free(cont);
	if (rc != NV_OK) {
		json_decref(all);
		return rc;
	}
	if (json_is_object(json_object_get(all, "metadata")))
		json_object_del(json_object_get(all, "metadata"), "continue");
	*out = all;
	return NV_OK;
}

enum nv_err kube_list_all(struct kube_client *c, const struct kube_res *r, const char *ns,
                          const struct kube_list_opts *o, json_t **out, struct kube_status *st)
{
	struct kube_list_opts lo = {0};
	enum nv_err rc;

	if (o != NULL)
		lo = *o;
	if (lo.limit <= 0)
		lo.limit = 500;
	rc = list_pages(c, r, ns, lo, out, st);
	if (rc == NV_E_GONE) {
		/* An expired continue token: one full list, as client-go's pager. */
		lo.limit = 0;
		lo.resource_version = NULL;
		lo.resource_version_match = NULL;
		rc = list_pages(c, r, ns, lo, out, st);
	}
	return rc;
}

/* One page of a list, as text. */
static enum nv_err list_page_text(struct kube_client *c, const struct kube_res *r, const char *ns,
                                  const struct kube_list_opts *o, struct buf *out,
                                  struct kube_status *st)
{
	struct buf q, path;
	enum nv_err rc;

	kube_status_set(st, 0, "", "%s", "");
	buf_init(&q, QUERY_MAX_BYTES);
	buf_init(&path, PATH_MAX_BYTES);
	if ((rc = list_query(&q, o)) != NV_OK)
		kube_status_set(st, 0, "", "list %s: selectors too long", r->resource);
	else if ((rc = kube_path_build(&path, r, ns, NULL, NULL)) != NV_OK)
		kube_status_set(st, 0, "", "list %s: bad or oversized namespace", r->resource);
	else
		rc = kube_request_text(c,
		                       &(struct kube_raw_req){.method = "GET",
		                                              .path = buf_str(&path),
		                                              .query = buf_str(&q),
		                                              .stop = o->stop},
		                       out, st);
	buf_clear(&path);
	buf_clear(&q);
	return rc;
}

static enum nv_err each_pages(struct kube_client *c, const struct kube_res *r, const char *ns,
                              struct kube_list_opts o, kube_item_fn fn, void *ud, char **rv,
                              struct kube_status *st)
{
	struct buf text;
	struct jx_err je;
	json_t *meta = NULL;
	char *cont = NULL;
	enum nv_err rc;

	buf_init(&text, 0);
	for (;;) {
		o.continue_token = cont;
		if ((rc = list_page_text(c, r, ns, &o, &text, st)) != NV_OK)
			break;
		json_decref(meta);
		meta = NULL;
		rc = kube_list_scan(buf_str(&text), text.len, fn, ud, &meta, &je);
		buf_clear(&text); /* the page's text goes before the next is read */
		if (rc != NV_OK) {
			if (rc == NV_E_PARSE)
				kube_status_set(st, 200, "", "list %s: %s", r->resource, je.msg);
			break;
		}
		free(cont);
		cont = NULL;
		if (*jx_str_or(meta, "continue", "") != '\0')
			cont = xstrdup(jx_str_or(meta, "continue", ""));
		if (cont == NULL)
			break;
		/* Later pages must not repeat the first page's RV: the token carries it. */
		o.resource_version = NULL;
		o.resource_version_match = NULL;
	}
	if (rc == NV_OK)
		*rv = xstrdup(jx_str_or(meta, "resourceVersion", ""));
	free(cont);
	json_decref(meta);
	buf_clear(&text);
	return rc;
}

enum nv_err kube_list_each(struct kube_client *c, const struct kube_res *r, const char *ns,
                           const struct kube_list_opts *o, kube_item_fn fn, void *ud, char **rv,
                           struct kube_status *st)
{
	struct kube_list_opts lo = {0};
	enum nv_err rc;

	if (o != NULL)
		lo = *o;
	if (lo.limit <= 0)
		lo.limit = 500;
	rc = each_pages(c, r, ns, lo, fn, ud, rv, st);
	if (rc == NV_E_GONE) {
		/* An expired continue token: the list again from a consistent
		 * read, still paged (client-go's pager reads it unpaged, which
		 * at the size that makes tokens expire may pass the body cap). */
		lo.resource_version = NULL;
		lo.resource_version_match = NULL;
		rc = each_pages(c, r, ns, lo, fn, ud, rv, st);
	}
	return rc;
}

enum nv_err kube_create(struct kube_client *c, const struct kube_res *r, const char *ns,
                        const json_t *obj, json_t **out, struct kube_status *st)
{
	if (ns == NULL || *ns == '\0')
		ns = kube_obj_namespace(obj);
	return verb(c, "POST", r, ns, NULL, NULL, NULL, "application/json", obj, out, st);
}

enum nv_err kube_update(struct kube_client *c, const struct kube_res *r, const char *ns,
                        const json_t *obj, const char *subresource, json_t **out,
                        struct kube_status *st)
{
	const char *name = kube_obj_name(obj);

	if (ns == NULL || *ns == '\0')
		ns = kube_obj_namespace(obj);
	if (*name == '\0') {
		kube_status_set(st, 0, "", "update %s: metadata.name: missing", r->resource);
		return NV_E_INVAL;
	}
	return verb(c, "PUT", r, ns, name, subresource, NULL, "application/json", obj, out, st);
}

enum nv_err kube_patch(struct kube_client *c, const struct kube_res *r, const char *ns,
                       const char *name, const struct kube_patch_opts *o, const json_t *patch,
                       json_t **out, struct kube_status *st)
{
	static const char *const ctypes[] = {"application/merge-patch+json",
	                                     "application/json-patch+json",
	                                     "application/apply-patch+yaml"};
	struct buf q;
	enum nv_err rc = NV_OK;

	if (o->type == KUBE_PATCH_APPLY && (o->field_manager == NULL || !*o->field_manager)) {
		kube_status_set(st, 0, "", "apply %s/%s: a field manager is required", r->resource,
		                name);
		return NV_E_INVAL;
	}
	if ((unsigned)o->type >= ARRAY_LEN(ctypes))
		return NV_E_INVAL;
	buf_init(&q, QUERY_MAX_BYTES);
	rc = kube_query_add(&q, "fieldManager", o->field_manager);
	if (rc == NV_OK && o->force && o->type == KUBE_PATCH_APPLY)
		rc = kube_query_add(&q, "force", "true");
	if (rc == NV_OK)
		rc = verb(c, "PATCH", r, ns, name, o->subresource, &q, ctypes[o->type], patch, out,
		          st);
	buf_clear(&q);
	return rc;
}

static json_t *delete_body(const struct kube_delete_opts *o)
{
	json_t *b = json_pack("{s:s,s:s}", "apiVersion", "v1", "kind", "DeleteOptions");

	if (o == NULL)
		return b;
	if (o->propagation != NULL)
		jx_set_str(b, "propagationPolicy", o->propagation);
	if (o->grace_period_s >= 0)
		jx_set_take(b, "gracePeriodSeconds", json_integer(o->grace_period_s));
	if (o->precondition_uid != NULL)
		jx_set_str(b, "preconditions.uid", o->precondition_uid);
	if (o->precondition_rv != NULL)
		jx_set_str(b, "preconditions.resourceVersion", o->precondition_rv);
	return b;
}

enum nv_err kube_delete(struct kube_client *c, const struct kube_res *r, const char *ns,
                        const char *name, const struct kube_delete_opts *o, struct kube_status *st)
{
	json_t *body = delete_body(o);
	enum nv_err rc =
	        verb(c, "DELETE", r, ns, name, NULL, NULL, "application/json", body, NULL, st);

	json_decref(body);
	return rc;
}

enum nv_err kube_evict(struct kube_client *c, const char *ns, const char *pod,
                       const struct kube_delete_opts *o, struct kube_status *st)
{
	json_t *body = json_pack("{s:s,s:s,s:{s:s,s:s},s:o}", "apiVersion", "policy/v1", "kind",
	                         "Eviction", "metadata", "name", pod, "namespace", ns,
	                         "deleteOptions", delete_body(o));
	enum nv_err rc = verb(c, "POST", &KUBE_RES_PODS, ns, pod, "eviction", NULL,
	                      "application/json", body, NULL, st);

	json_decref(body);
	return rc;
}
