// SPDX-License-Identifier: Apache-2.0
// The admission webhook's HTTP side: bounded decoding of AdmissionReview v1,
// the response review, the two routes, and the mutating handler that stamps
// the requesting user into an UpgradeApproval. The rules are in
// webhook_validate.c, the verdicts both reach in webhook_verdict.c, the
// serving certificate in webhook_cert.c.
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/matrix.h"
#include "nvl72/metrics.h"
#include "nvl72/timeutil.h"
#include "nvl72/web.h"
#include "webhook_int.h"

/* ---- text ---------------------------------------------------------------- */

/* A JSON string of text that may have been cut inside a UTF-8 sequence (a
 * bounded message quoting the object) or that quotes raw input (a parser's
 * error): non-ASCII bytes become '?' when the text is not valid UTF-8. */
static json_t *json_text(const char *s)
{
	json_t *j = json_string(s);
	if (j != NULL)
		return j;
	char *copy = xstrdup(s);
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(copy);
	free(copy);
	return j;
}

/* ---- decoding ------------------------------------------------------------ */

static bool fail(char *why, size_t whylen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static bool fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return false;
}

/* A string member copied into dst: absent is fine unless required. */
static bool get_str(const json_t *o, const char *obj_path, const char *key, bool required,
                    char *dst, size_t cap, char *why, size_t whylen)
{
	const json_t *v = json_object_get(o, key);
	dst[0] = '\0';
	if (v == NULL || json_is_null(v)) {
		if (required)
			return fail(why, whylen, "%s.%s: missing", obj_path, key);
		return true;
	}
	if (!json_is_string(v))
		return fail(why, whylen, "%s.%s: expected a string, got %s", obj_path, key,
		            jx_type_name(v));
	if (json_string_length(v) >= cap || strlen(json_string_value(v)) != json_string_length(v))
		return fail(why, whylen, "%s.%s: longer than %zu bytes or holds a NUL", obj_path,
		            key, cap - 1);
	(void)str_copy(dst, cap, json_string_value(v));
	if (required && dst[0] == '\0')
		return fail(why, whylen, "%s.%s: must not be empty", obj_path, key);
	return true;
}

static bool get_obj(const json_t *o, const char *obj_path, const char *key, bool required,
                    const json_t **out, char *why, size_t whylen)
{
	const json_t *v = json_object_get(o, key);
	*out = NULL;
	if (v == NULL || json_is_null(v)) {
		if (required)
			return fail(why, whylen, "%s.%s: missing", obj_path, key);
		return true;
	}
	if (!json_is_object(v))
		return fail(why, whylen, "%s.%s: expected an object, got %s", obj_path, key,
		            jx_type_name(v));
	*out = v;
	return true;
}

static bool decode_gvk(const json_t *req, struct wh_request *out, char *why, size_t whylen)
{
	const json_t *k = NULL;
	const json_t *r = NULL;
	char version[64];
	if (!get_obj(req, "request", "kind", true, &k, why, whylen) ||
	    !get_obj(req, "request", "resource", true, &r, why, whylen))
		return false;
	// The rules match on the resource (plural), as the configurations do.
	return get_str(k, "request.kind", "version", true, version, sizeof(version), why, whylen) &&
	       get_str(k, "request.kind", "kind", true, out->kind, sizeof(out->kind), why,
	               whylen) &&
	       get_str(r, "request.resource", "group", false, out->group, sizeof(out->group), why,
	               whylen) &&
	       get_str(r, "request.resource", "resource", true, out->resource,
	               sizeof(out->resource), why, whylen);
}

static bool decode_operation(const json_t *req, struct wh_request *out, char *why, size_t whylen)
{
	static const char *const ops[] = {"CREATE", "UPDATE", "DELETE", "CONNECT"};
	char op[16];
	if (!get_str(req, "request", "operation", true, op, sizeof(op), why, whylen))
		return false;
	for (size_t i = 0; i < ARRAY_LEN(ops); i++)
		if (strcmp(op, ops[i]) == 0)
			return str_copy(out->operation, sizeof(out->operation), op) == NV_OK;
	return fail(why, whylen,
	            "request.operation: \"%s\" is not CREATE, UPDATE, DELETE or CONNECT", op);
}

static bool decode_objects(const json_t *req, struct wh_request *out, char *why, size_t whylen)
{
	bool is_update = strcmp(out->operation, "UPDATE") == 0;
	bool needs_obj = is_update || strcmp(out->operation, "CREATE") == 0;
	const json_t *dry = json_object_get(req, "dryRun");
	if (dry != NULL && !json_is_null(dry) && !json_is_boolean(dry))
		return fail(why, whylen, "request.dryRun: expected a boolean, got %s",
		            jx_type_name(dry));
	out->dry_run = json_is_true(dry);
	return get_obj(req, "request", "object", needs_obj, &out->object, why, whylen) &&
	       get_obj(req, "request", "oldObject", is_update, &out->old_object, why, whylen) &&
	       get_obj(req, "request", "userInfo", false, &out->user_info, why, whylen);
}

enum nv_err wh_review_decode(const json_t *review, struct wh_request *out, bool *uid_ok, char *why,
                             size_t whylen)
{
	char s[64];
	const json_t *req = NULL;
	*uid_ok = false;
	memset(out, 0, sizeof(*out));
	if (!json_is_object(review)) {
		(void)fail(why, whylen, "expected an AdmissionReview object, got %s",
		           jx_type_name(review));
		return NV_E_PARSE;
	}
	if (!get_str(review, "AdmissionReview", "apiVersion", true, s, sizeof(s), why, whylen))
		return NV_E_PARSE;
	if (strcmp(s, WH_REVIEW_VERSION) != 0) {
		(void)fail(why, whylen, "apiVersion: \"%s\" is not %s (the only version served)", s,
		           WH_REVIEW_VERSION);
		return NV_E_UNSUPPORTED;
	}
	if (!get_str(review, "AdmissionReview", "kind", true, s, sizeof(s), why, whylen))
		return NV_E_PARSE;
	if (strcmp(s, "AdmissionReview") != 0) {
		(void)fail(why, whylen, "kind: \"%s\" is not AdmissionReview", s);
		return NV_E_PARSE;
	}
	if (!get_obj(review, "AdmissionReview", "request", true, &req, why, whylen) ||
	    !get_str(req, "request", "uid", true, out->uid, sizeof(out->uid), why, whylen))
		return NV_E_PARSE;
	*uid_ok = true;
	if (!decode_gvk(req, out, why, whylen) || !decode_operation(req, out, why, whylen) ||
	    !get_str(req, "request", "name", false, out->name, sizeof(out->name), why, whylen) ||
	    !decode_objects(req, out, why, whylen))
		return NV_E_PARSE;
	if (out->name[0] == '\0' && out->object != NULL)
		(void)str_copy(out->name, sizeof(out->name),
		               jx_str_or(out->object, "metadata.name", ""));
	return NV_OK;
}

/* ---- the response -------------------------------------------------------- */

enum nv_err wh_response_write(const char *uid, const struct wh_verdict *v, struct buf *out)
{
	json_t *resp = json_object();
	json_t *review =
	        json_pack("{s:s, s:s}", "apiVersion", WH_REVIEW_VERSION, "kind", "AdmissionReview");
	enum nv_err rc = NV_OK;
	char *text = NULL;
	json_object_set_new(resp, "uid", json_string(uid));
	json_object_set_new(resp, "allowed", json_boolean(v->allowed));
	if (!v->allowed) {
		json_t *st = json_pack("{s:i, s:s, s:s, s:o}", "code", v->code, "status", "Failure",
		                       "reason", v->reason, "message", json_text(buf_str(&v->msg)));
		json_object_set_new(resp, "status", st);
	} else if (v->patch.len > 0) {
		struct buf b64;
		buf_init(&b64, WH_PATCH_MAX * 2);
		rc = b64_encode(v->patch.data, v->patch.len, &b64);
		if (rc == NV_OK) {
			json_object_set_new(resp, "patchType", json_string("JSONPatch"));
			json_object_set_new(resp, "patch", json_string(buf_str(&b64)));
		}
		buf_clear(&b64);
	}
	if (v->nwarnings > 0) {
		json_t *w = json_array();
		for (unsigned i = 0; i < v->nwarnings && i < WH_WARNINGS_MAX; i++)
			json_array_append_new(w, json_text(v->warnings[i]));
		json_object_set_new(resp, "warnings", w);
	}
	json_object_set_new(review, "response", resp);
	if (rc != NV_OK)
		goto out;
	text = json_dumps(review, JSON_COMPACT);
	rc = text ? buf_append_str(out, text) : NV_E_INTERNAL;
out:
	free(text);
	json_decref(review);
	return rc;
}

/* ---- the mutating handler ------------------------------------------------ */

static bool user_str(const json_t *ui, const char *key, size_t max, bool required, json_t **out,
                     struct wh_verdict *v)
{
	const json_t *s = json_object_get(ui, key);
	*out = NULL;
	if (s == NULL || json_is_null(s)) {
		if (required) {
			wh_deny(v, 400, "BadRequest",
			        "request.userInfo.%s: missing: the approval cannot be stamped",
			        key);
			return false;
		}
		*out = json_string("");
		return true;
	}
	if (!json_is_string(s) || json_string_length(s) > max ||
	    strlen(json_string_value(s)) != json_string_length(s) ||
	    (required && json_string_length(s) == 0)) {
		wh_deny(v, 400, "BadRequest",
		        "request.userInfo.%s: must be a non-empty string of at most %zu bytes", key,
		        max);
		return false;
	}
	// jansson checked the UTF-8 when it read the review.
	*out = json_string(json_string_value(s));
	return true;
}

static json_t *user_groups(const json_t *ui, struct wh_verdict *v)
{
	const json_t *g = json_object_get(ui, "groups");
	json_t *out = json_array();
	if (g == NULL || json_is_null(g))
		return out;
	if (!json_is_array(g) || json_array_size(g) > WEBHOOK_GROUPS_MAX) {
		wh_deny(v, 400, "BadRequest",
		        "request.userInfo.groups: must be a list of at most %d groups (an approval "
		        "records %d)",
		        WEBHOOK_GROUPS_MAX, WEBHOOK_GROUPS_MAX);
		json_decref(out);
		return NULL;
	}
	for (size_t i = 0; i < json_array_size(g); i++) {
		const json_t *e = json_array_get(g, i);
		if (!json_is_string(e) || json_string_length(e) > 253 ||
		    strlen(json_string_value(e)) != json_string_length(e)) {
			wh_deny(v, 400, "BadRequest",
			        "request.userInfo.groups[%zu]: must be a string of at most 253 "
			        "bytes",
			        i);
			json_decref(out);
			return NULL;
		}
		json_array_append_new(out, json_string(json_string_value(e)));
	}
	return out;
}

static json_t *approved_by(const json_t *ui, struct wh_verdict *v)
{
	json_t *user = NULL;
	json_t *uid = NULL;
	json_t *groups = NULL;
	if (ui == NULL) {
		wh_deny(v, 400, "BadRequest",
		        "request.userInfo: missing: the approval cannot be stamped");
		return NULL;
	}
	if (!user_str(ui, "username", 253, true, &user, v) ||
	    !user_str(ui, "uid", 128, false, &uid, v) || (groups = user_groups(ui, v)) == NULL) {
		json_decref(user);
		json_decref(uid);
		return NULL;
	}
	return json_pack("{s:o, s:o, s:o}", "username", user, "uid", uid, "groups", groups);
}

/* The RackUpgrade named name from the cache, else read through it (a new
 * reference), or NULL after denying: an approval must name an upgrade that
 * exists, and a cache that has not synced cannot say which one. */
static json_t *upgrade_named(struct webhook *w, const struct wh_request *req, const char *name,
                             struct wh_verdict *v)
{
	json_t *list = w->cache->list(w->cache_arg, WEBHOOK_UPGRADES), *o, *found = NULL;
	size_t i;
	if (!json_is_array(list)) {
		json_decref(list);
		wh_deny(v, 503, "ServiceUnavailable",
		        "UpgradeApproval \"%s\": the operator's cache of RackUpgrades has "
		        "not synced yet; retry shortly",
		        req->name);
		return NULL;
	}
	json_array_foreach(list, i, o)
		if (strcmp(jx_str_or(o, "metadata.name", ""), name) == 0)
			found = json_incref(o);
	json_decref(list);
	if (found == NULL && w->cache->get != NULL)
		found = w->cache->get(w->cache_arg, WEBHOOK_UPGRADES, name);
	if (found == NULL)
		wh_deny(v, 422, "Invalid",
		        "UpgradeApproval \"%s\": spec.upgrade: RackUpgrade \"%s\" does not exist",
		        req->name, name);
	return found;
}

/* spec.upgradeRef for the upgrade the approval names: its UID and target,
 * so that the approval counts for this upgrade only, never for a later
 * one created under the same name. NULL after denying. */
static json_t *upgrade_ref(struct webhook *w, const struct wh_request *req, const json_t *spec,
                           struct wh_verdict *v)
{
	const json_t *name = json_object_get(spec, "upgrade");
	json_t *u, *ref = NULL;
	if (!json_is_string(name) || json_string_length(name) == 0 ||
	    json_string_length(name) > 63) {
		wh_deny(v, 422, "Invalid",
		        "UpgradeApproval \"%s\": spec.upgrade: must name a RackUpgrade (a "
		        "string of 1 to 63 bytes)",
		        req->name);
		return NULL;
	}
	if ((u = upgrade_named(w, req, json_string_value(name), v)) == NULL)
		return NULL;
	const char *uid = jx_str_or(u, "metadata.uid", "");
	const char *matrix = jx_str_or(u, "spec.target.matrix", "");
	const char *stack = jx_str_or(u, "spec.target.stack", "");
	if (jx_path(u, "metadata.deletionTimestamp") != NULL)
		wh_deny(v, 422, "Invalid",
		        "UpgradeApproval \"%s\": spec.upgrade: RackUpgrade \"%s\" is being deleted",
		        req->name, json_string_value(name));
	else if (uid[0] == '\0' || strlen(uid) > 63 || matrix[0] == '\0' || stack[0] == '\0' ||
	         strlen(matrix) > 63 || strlen(stack) > 63)
		wh_deny(v, 422, "Invalid",
		        "UpgradeApproval \"%s\": spec.upgrade: RackUpgrade \"%s\" has no usable "
		        "metadata.uid and spec.target",
		        req->name, json_string_value(name));
	else
		ref = json_pack("{s:s, s:{s:s, s:s}}", "uid", uid, "target", "matrix", matrix,
		                "stack", stack);
	json_decref(u);
	return ref;
}

static void stamp_patch(const struct wh_request *req, json_t *by, json_t *ref, struct wh_verdict *v)
{
	// "add" replaces a member that exists: whatever the client claimed goes.
	json_t *patch = json_pack("[{s:s, s:s, s:o}, {s:s, s:s, s:o}]", "op", "add", "path",
	                          "/spec/approvedBy", "value", by, "op", "add", "path",
	                          "/spec/upgradeRef", "value", ref);
	char *text = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
	if (text == NULL || buf_append_str(&v->patch, text) != NV_OK)
		wh_deny(v, 500, "InternalError", "UpgradeApproval \"%s\": the stamp does not fit",
		        req->name);
	else
		log_info(WH_COMP, "approval stamped", "name=%s user=\"%s\" upgrade_uid=%s",
		         req->name, jx_str_or(req->user_info, "username", ""),
		         jx_str_or(ref, "uid", ""));
	free(text);
	json_decref(patch);
}

void wh_mutate(struct webhook *w, const struct wh_request *req, struct wh_verdict *v)
{
	// Only creation stamps: the spec is immutable afterwards (CEL).
	if (strcmp(req->group, API_GROUP) != 0 || strcmp(req->resource, "upgradeapprovals") != 0 ||
	    strcmp(req->operation, "CREATE") != 0)
		return;
	const json_t *spec = json_object_get(req->object, "spec");
	if (!json_is_object(spec)) {
		wh_deny(v, 400, "BadRequest",
		        "UpgradeApproval \"%s\": spec: expected an object, got %s", req->name,
		        spec ? jx_type_name(spec) : "nothing");
		return;
	}
	json_t *by = approved_by(req->user_info, v);
	if (by == NULL)
		return;
	json_t *ref = upgrade_ref(w, req, spec, v);
	if (ref == NULL) {
		json_decref(by);
		return;
	}
	stamp_patch(req, by, ref, v);
}

/* ---- one review ---------------------------------------------------------- */

static enum nv_err error_body(struct buf *out, int *http_status, int code, const char *why)
{
	json_t *j = json_pack("{s:o}", "error", json_text(why));
	char *text = json_dumps(j, JSON_COMPACT);
	*http_status = code;
	enum nv_err rc = text ? buf_append_str(out, text) : NV_E_INTERNAL;
	free(text);
	json_decref(j);
	return rc;
}

static bool content_type_ok(const char *ct)
{
	static const char json_ct[] = "application/json";
	if (ct == NULL || ct[0] == '\0')
		return true;
	return strncasecmp(ct, json_ct, sizeof(json_ct) - 1) == 0 &&
	       (ct[sizeof(json_ct) - 1] == '\0' || ct[sizeof(json_ct) - 1] == ';' ||
	        ct[sizeof(json_ct) - 1] == ' ');
}

static void log_verdict(enum webhook_mode mode, const struct wh_request *req,
                        const struct wh_verdict *v)
{
	if (v->allowed) {
		log_debug(WH_COMP, "allowed", "mode=%s kind=%s name=%s op=%s",
		          mode == WEBHOOK_MUTATE ? "mutate" : "validate", req->kind, req->name,
		          req->operation);
		return;
	}
	log_info(WH_COMP, "denied", "mode=%s kind=%s name=%s op=%s code=%d msg=\"%s\"",
	         mode == WEBHOOK_MUTATE ? "mutate" : "validate", req->kind, req->name,
	         req->operation, v->code, buf_str(&v->msg));
}

/* Counts one decision. The resource label is one of ours or "other", so
 * a hostile review cannot grow the family. */
static void count(struct webhook *w, enum webhook_mode mode, const char *resource,
                  const char *result)
{
	static const char *const known[] = {"racks", "rackpartitions", "compatibilitymatrices",
	                                    "rackupgrades", "upgradeapprovals"};
	const char *res = "other";
	if (w->admissions == NULL)
		return;
	for (size_t i = 0; resource && i < ARRAY_LEN(known); i++)
		if (strcmp(resource, known[i]) == 0)
			res = known[i];
	const char *values[] = {mode == WEBHOOK_MUTATE ? "mutate" : "validate", res, result};
	(void)metrics_counter_inc(w->admissions, values);
}

enum nv_err webhook_review(struct webhook *w, enum webhook_mode mode, const char *content_type,
                           const char *body, size_t len, int *http_status, struct buf *out)
{
	struct jx_limits lim = {.max_bytes = w->review_max, .max_depth = WEBHOOK_DEPTH_MAX};
	struct jx_err je;
	json_t *review = NULL;
	struct wh_request req;
	struct wh_verdict v;
	char why[384];
	bool uid_ok = false;
	enum nv_err rc;
	if (!content_type_ok(content_type) || len > w->review_max) {
		count(w, mode, NULL, "error");
		return content_type_ok(content_type)
		               ? error_body(out, http_status, 413,
		                            "the AdmissionReview is too large")
		               : error_body(out, http_status, 415,
		                            "the body must be application/json");
	}
	rc = jx_loadb(body, len, &lim, &review, &je);
	if (rc != NV_OK) {
		log_warn(WH_COMP, "unreadable review", "err=\"%s\"", je.msg);
		count(w, mode, NULL, "error");
		return error_body(out, http_status, rc == NV_E_TOO_LARGE ? 413 : 400, je.msg);
	}
	wh_verdict_init(&v);
	rc = wh_review_decode(review, &req, &uid_ok, why, sizeof(why));
	if (rc != NV_OK && !uid_ok) {
		log_warn(WH_COMP, "malformed review", "err=\"%s\"", why);
		count(w, mode, NULL, "error");
		rc = error_body(out, http_status, 400, why);
		goto out;
	}
	if (rc != NV_OK)
		wh_deny(&v, 400, "BadRequest", "malformed AdmissionReview: %s", why);
	else if (mode == WEBHOOK_MUTATE)
		wh_mutate(w, &req, &v);
	else
		wh_validate(w, &req, &v);
	log_verdict(mode, &req, &v);
	count(w, mode, req.resource, v.allowed ? "allowed" : "denied");
	*http_status = 200;
	rc = wh_response_write(req.uid, &v, out);
out:
	wh_verdict_clear(&v);
	json_decref(review);
	return rc;
}

/* ---- routes -------------------------------------------------------------- */

static enum nv_err route(struct webhook *w, enum webhook_mode mode, const struct web_request *req,
                         struct web_response *resp)
{
	int status = 500;
	enum nv_err rc = webhook_review(w, mode, req->content_type, req->body, req->body_len,
	                                &status, &resp->body);
	resp->status = status;
	resp->content_type = "application/json";
	return rc;
}

static enum nv_err route_validate(void *arg, const struct web_request *req,
                                  struct web_response *resp)
{
	return route(arg, WEBHOOK_VALIDATE, req, resp);
}

static enum nv_err route_mutate(void *arg, const struct web_request *req, struct web_response *resp)
{
	return route(arg, WEBHOOK_MUTATE, req, resp);
}

enum nv_err webhook_register(struct web_server *s, struct webhook *w)
{
	enum nv_err rc = web_route_post(s, WEBHOOK_PATH_VALIDATE, route_validate, w);
	if (rc == NV_OK)
		rc = web_route_post(s, WEBHOOK_PATH_MUTATE, route_mutate, w);
	return rc;
}

/* ---- lifecycle and the informer cache ------------------------------------ */

static enum nv_err admissions_family(struct metrics_registry *r, struct metrics_family **out)
{
	static const char *const labels[] = {"webhook", "resource", "result", NULL};
	static const struct metrics_desc d = {
	        .name = "nvl72_webhook_admissions_total",
	        .help = "Admission reviews answered, by webhook (validate, mutate), resource and "
	                "result (allowed, denied, error).",
	        .type = METRICS_COUNTER,
	        .labels = labels,
	        .max_series = 64,
	};
	enum nv_err rc = metrics_family_register(r, &d, out);
	if (rc == NV_E_EXISTS) { // a second webhook on the same registry
		*out = metrics_registry_find(r, d.name);
		rc = *out ? NV_OK : NV_E_INTERNAL;
	}
	return rc;
}

enum nv_err webhook_new(const struct webhook_config *cfg, struct webhook **out)
{
	if (cfg == NULL || cfg->cache == NULL || cfg->cache->list == NULL)
		return NV_E_INVAL;
	struct webhook *w = xcalloc(1, sizeof(*w));
	w->cache = cfg->cache;
	w->cache_arg = cfg->cache_arg;
	w->review_max = cfg->review_max ? cfg->review_max : WEBHOOK_REVIEW_MAX_DEFAULT;
	w->plan_flags = cfg->single_hop ? 0 : MATRIX_PLAN_MULTI_HOP;
	if (cfg->metrics != NULL && admissions_family(cfg->metrics, &w->admissions) != NV_OK) {
		free(w);
		return NV_E_INVAL;
	}
	*out = w;
	return NV_OK;
}

void webhook_free(struct webhook *w)
{
	free(w);
}

static json_t *informer_list(void *arg, enum webhook_kind kind)
{
	struct webhook_informers *c = arg;
	if (c == NULL || (unsigned)kind >= WEBHOOK__KINDS || c->inf[kind] == NULL ||
	    !kube_informer_synced(c->inf[kind]))
		return NULL;
	return kube_informer_list(c->inf[kind]);
}

static const struct kube_res informer_res[WEBHOOK__KINDS] = {
        [WEBHOOK_RACKS] = {"nvl72.io", "v1alpha1", "racks", "Rack", false},
        [WEBHOOK_PARTITIONS] = {"nvl72.io", "v1alpha1", "rackpartitions", "RackPartition", false},
        [WEBHOOK_MATRICES] = {"nvl72.io", "v1alpha1", "compatibilitymatrices",
                              "CompatibilityMatrix", false},
        [WEBHOOK_UPGRADES] = {"nvl72.io", "v1alpha1", "rackupgrades", "RackUpgrade", false},
        [WEBHOOK_NODES] = {"", "v1", "nodes", "Node", false},
};

/* FNV-1a of kind and name, never 0 (the free slot). */
static uint64_t miss_key(enum webhook_kind kind, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h ? h : 1;
}

static bool miss_known(struct webhook_read_guard *g, uint64_t key, int64_t now)
{
	for (size_t i = 0; i < WEBHOOK_MISSES_MAX; i++)
		if (g->miss[i].key == key && g->miss[i].until_ms > now)
			return true;
	return false;
}

/* Takes a free or expired slot, else the one closest to expiry. */
static void miss_put(struct webhook_read_guard *g, uint64_t key, int64_t now)
{
	size_t pick = 0;
	for (size_t i = 0; i < WEBHOOK_MISSES_MAX; i++) {
		if (g->miss[i].key == 0 || g->miss[i].until_ms <= now) {
			pick = i;
			break;
		}
		if (g->miss[i].until_ms < g->miss[pick].until_ms)
			pick = i;
	}
	g->miss[pick].key = key;
	g->miss[pick].until_ms = now + WEBHOOK_MISS_TTL_MS;
}

/* Takes one read from the bucket; false past WEBHOOK_READS_PER_S. */
static bool read_allowed(struct webhook_read_guard *g, int64_t now)
{
	if (g->refilled_ms == 0) {
		g->tokens = WEBHOOK_READ_BURST;
		g->refilled_ms = now;
	}
	g->tokens += (double)(now - g->refilled_ms) * WEBHOOK_READS_PER_S / 1000.0;
	if (g->tokens > WEBHOOK_READ_BURST)
		g->tokens = WEBHOOK_READ_BURST;
	g->refilled_ms = now;
	if (g->tokens < 1.0)
		return false;
	g->tokens -= 1.0;
	return true;
}

static json_t *informer_get(void *arg, enum webhook_kind kind, const char *name)
{
	struct webhook_informers *c = arg;
	struct kube_status st;
	json_t *obj = NULL;
	if (c == NULL || c->client == NULL || (unsigned)kind >= WEBHOOK__KINDS)
		return NULL;
	int64_t now = time_mono_ms();
	uint64_t key = miss_key(kind, name);
	if (miss_known(&c->guard, key, now))
		return NULL;
	if (!read_allowed(&c->guard, now)) {
		log_debug(WH_COMP, "read-through skipped: too many reads", "resource=%s name=%s",
		          informer_res[kind].resource, name);
		return NULL;
	}
	enum nv_err rc = kube_get_once(c->client, &informer_res[kind], NULL, name,
	                               WEBHOOK_READ_TIMEOUT_MS, &obj, &st);
	if (rc != NV_OK) {
		if (rc != NV_E_NOT_FOUND)
			log_warn(WH_COMP, "read-through failed; judging the name missing",
			         "resource=%s name=%s err=%s", informer_res[kind].resource, name,
			         nv_err_name(rc));
		miss_put(&c->guard, key, time_mono_ms());
		return NULL;
	}
	return obj;
}

static json_t *informer_list_live(void *arg, enum webhook_kind kind)
{
	struct webhook_informers *c = arg;
	struct kube_status st;
	json_t *list = NULL;
	json_t *items = NULL;
	if (c == NULL || c->client == NULL || (unsigned)kind >= WEBHOOK__KINDS)
		return NULL;
	if (kube_list_once(c->client, &informer_res[kind], NULL, WEBHOOK_READ_TIMEOUT_MS, &list,
	                   &st) != NV_OK) {
		log_warn(WH_COMP, "live list failed; judging on the cache",
		         "resource=%s err=\"%s\"", informer_res[kind].resource, st.message);
		return NULL;
	}
	items = json_object_get(list, "items");
	if (json_is_array(items))
		json_incref(items);
	else
		items = NULL;
	json_decref(list);
	return items;
}

const struct webhook_cache_ops webhook_informer_cache = {
        .list = informer_list,
        .get = informer_get,
        .list_live = informer_list_live,
};
