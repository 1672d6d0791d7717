// SPDX-License-Identifier: Apache-2.0
// Integration suite for the request verbs against a real kube-apiserver:
// CRUD on core objects and on a custom resource of a CRD made here, paging
// and selectors, conflicts, server-side apply, the status subresource.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"

static int failures;

static void check(bool cond, const char *name, const struct kube_status *st)
{
	if (cond) {
		printf("ok - %s\n", name);
	} else {
		failures++;
		printf("not ok - %s (http=%ld reason=%s message=%s causes=%s)\n", name,
		       st ? st->http_code : 0L, st ? st->reason : "", st ? st->message : "",
		       st ? st->causes : "");
	}
	fflush(stdout);
}

static json_t *obj(const char *text)
{
	json_t *v = NULL;
	if (jx_loadb(text, strlen(text), NULL, &v, NULL) != NV_OK) {
		fprintf(stderr, "bad test JSON: %s\n", text);
		exit(2);
	}
	return v;
}

static const struct kube_res WIDGETS = {"itest.nvl72.io", "v1", "widgets", "Widget", true};

static const char *crd_json =
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"widgets.itest.nvl72.io\"},\"spec\":{\"group\":\"itest.nvl72.io\","
        "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\","
        "\"kind\":\"Widget\",\"listKind\":\"WidgetList\"},\"versions\":[{\"name\":\"v1\","
        "\"served\":true,\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":"
        "{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\","
        "\"x-kubernetes-preserve-unknown-fields\":true},\"status\":{\"type\":\"object\","
        "\"x-kubernetes-preserve-unknown-fields\":true}}}}}]}}";

static void test_core_crud(struct kube_client *c)
{
	struct kube_status st;
	json_t *cm = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
	                 "{\"name\":\"crud-1\",\"namespace\":\"default\"},\"data\":{\"a\":\"1\"}}");
	json_t *got = NULL, *upd = NULL, *stale = NULL, *res = NULL;
	enum nv_err rc;

	rc = kube_create(c, &KUBE_RES_CONFIGMAPS, "default", cm, &got, &st);
	check(rc == NV_OK && *kube_obj_rv(got), "create configmap", &st);
	rc = kube_create(c, &KUBE_RES_CONFIGMAPS, "default", cm, NULL, &st);
	check(rc == NV_E_EXISTS && st.http_code == 409 && !strcmp(st.reason, "AlreadyExists"),
	      "create twice is AlreadyExists", &st);
	stale = json_deep_copy(got);
	upd = json_deep_copy(got);
	jx_set_str(upd, "data.a", "2");
	json_decref(got);
	got = NULL;
	rc = kube_update(c, &KUBE_RES_CONFIGMAPS, NULL, upd, NULL, &got, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(got, "data.a", ""), "2"), "update configmap", &st);
	jx_set_str(stale, "data.a", "3");
	rc = kube_update(c, &KUBE_RES_CONFIGMAPS, NULL, stale, NULL, NULL, &st);
	check(rc == NV_E_CONFLICT && st.http_code == 409 && !strcmp(st.reason, "Conflict"),
	      "update with a stale resourceVersion is a conflict", &st);
	json_t *mp = obj("{\"data\":{\"b\":\"x\"}}");
	rc = kube_patch(c, &KUBE_RES_CONFIGMAPS, "default", "crud-1",
	                &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, mp, &res, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(res, "data.b", ""), "x") &&
	              !strcmp(jx_str_or(res, "data.a", ""), "2"),
	      "merge patch", &st);
	json_decref(res);
	res = NULL;
	json_t *jp = obj("[{\"op\":\"replace\",\"path\":\"/data/b\",\"value\":\"y\"}]");
	rc = kube_patch(c, &KUBE_RES_CONFIGMAPS, "default", "crud-1",
	                &(struct kube_patch_opts){.type = KUBE_PATCH_JSON}, jp, &res, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(res, "data.b", ""), "y"), "json patch", &st);
	rc = kube_delete(
	        c, &KUBE_RES_CONFIGMAPS, "default", "crud-1",
	        &(struct kube_delete_opts){.grace_period_s = -1, .precondition_uid = "nope"}, &st);
	check(rc == NV_E_CONFLICT, "delete with a wrong uid precondition is a conflict", &st);
	rc = kube_delete(
	        c, &KUBE_RES_CONFIGMAPS, "default", "crud-1",
	        &(struct kube_delete_opts){.grace_period_s = 0,
	                                   .propagation = "Background",
	                                   .precondition_uid = jx_str_or(res, "metadata.uid", "")},
	        &st);
	check(rc == NV_OK, "delete with propagation and preconditions", &st);
	json_decref(got);
	got = NULL;
	rc = kube_get(c, &KUBE_RES_CONFIGMAPS, "default", "crud-1", &got, &st);
	check(rc == NV_E_NOT_FOUND && st.http_code == 404, "get after delete is not found", &st);
	json_decref(jp);
	json_decref(mp);
	json_decref(res);
	json_decref(got);
	json_decref(upd);
	json_decref(stale);
	json_decref(cm);
}

static void test_list_paging(struct kube_client *c)
{
	struct kube_status st;
	json_t *list = NULL;
	bool ok = true;
	enum nv_err rc;

	for (int i = 0; i < 7; i++) {
		char text[256];
		snprintf(text, sizeof(text),
		         "{\"metadata\":{\"name\":\"page-%d\",\"labels\":"
		         "{\"suite\":\"paging\",\"odd\":\"%s\"}}}",
		         i, i % 2 ? "yes" : "no");
		json_t *o = obj(text);
		ok = ok && kube_create(c, &KUBE_RES_CONFIGMAPS, "default", o, NULL, &st) == NV_OK;
		json_decref(o);
	}
	check(ok, "create 7 labelled configmaps", &st);
	rc = kube_list_all(c, &KUBE_RES_CONFIGMAPS, "default",
	                   &(struct kube_list_opts){.label_selector = "suite=paging", .limit = 3},
	                   &list, &st);
	check(rc == NV_OK && json_array_size(json_object_get(list, "items")) == 7 &&
	              *jx_str_or(list, "metadata.resourceVersion", ""),
	      "list in pages of 3 sees all 7", &st);
	json_decref(list);
	list = NULL;
	rc = kube_list(c, &KUBE_RES_CONFIGMAPS, "default",
	               &(struct kube_list_opts){.label_selector = "suite=paging,odd=yes"}, &list,
	               &st);
	check(rc == NV_OK && json_array_size(json_object_get(list, "items")) == 3, "label selector",
	      &st);
	json_decref(list);
	list = NULL;
	rc = kube_list(c, &KUBE_RES_CONFIGMAPS, "default",
	               &(struct kube_list_opts){.field_selector = "metadata.name=page-4"}, &list,
	               &st);
	check(rc == NV_OK && json_array_size(json_object_get(list, "items")) == 1, "field selector",
	      &st);
	json_decref(list);
}

static bool crd_established(struct kube_client *c)
{
	struct kube_status st;

	for (int i = 0; i < 100; i++) {
		json_t *crd = NULL;
		if (kube_get(c, &KUBE_RES_CRDS, NULL, "widgets.itest.nvl72.io", &crd, &st) ==
		    NV_OK) {
			json_t *conds = jx_path(crd, "status.conditions"), *cd;
			size_t k;
			bool est = false;
			json_array_foreach(conds, k, cd) {
				if (!strcmp(jx_str_or(cd, "type", ""), "Established") &&
				    !strcmp(jx_str_or(cd, "status", ""), "True"))
					est = true;
			}
			json_decref(crd);
			if (est) {
				/* Discovery lags the condition a little. */
				json_t *l = NULL;
				if (kube_list(c, &WIDGETS, "default", NULL, &l, &st) == NV_OK) {
					json_decref(l);
					return true;
				}
			}
		}
		time_sleep_ms(100);
	}
	return false;
}

static void test_custom_resource(struct kube_client *c)
{
	struct kube_status st;
	json_t *crd = obj(crd_json), *got = NULL, *res = NULL;
	enum nv_err rc = kube_create(c, &KUBE_RES_CRDS, NULL, crd, NULL, &st);

	check(rc == NV_OK && crd_established(c), "create a CRD and wait until established", &st);
	json_t *w = obj("{\"apiVersion\":\"itest.nvl72.io/v1\",\"kind\":\"Widget\",\"metadata\":"
	                "{\"name\":\"w1\",\"namespace\":\"default\"},\"spec\":{\"size\":3,"
	                "\"future\":{\"deep\":[1,2]}}}");
	rc = kube_create(c, &WIDGETS, "default", w, &got, &st);
	check(rc == NV_OK && jx_path(got, "spec.future.deep[1]"), "create a custom resource", &st);
	jx_set_take(got, "spec.size", json_integer(4));
	jx_set_str(got, "status.phase", "ignored");
	rc = kube_update(c, &WIDGETS, NULL, got, NULL, &res, &st);
	check(rc == NV_OK && json_integer_value(jx_path(res, "spec.size")) == 4 &&
	              jx_path(res, "spec.future.deep[1]") && !jx_path(res, "status.phase"),
	      "update keeps unknown fields and ignores status", &st);
	jx_set_str(res, "status.phase", "Ready");
	json_decref(got);
	got = NULL;
	rc = kube_update(c, &WIDGETS, NULL, res, "status", &got, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(got, "status.phase", ""), "Ready"),
	      "update through the status subresource", &st);
	json_t *sp = obj("{\"status\":{\"phase\":\"Patched\"}}");
	json_decref(res);
	res = NULL;
	rc = kube_patch(
	        c, &WIDGETS, "default", "w1",
	        &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE, .subresource = "status"}, sp,
	        &res, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(res, "status.phase", ""), "Patched"),
	      "merge patch on status", &st);
	json_decref(sp);
	json_decref(res);
	json_decref(got);
	json_decref(w);
	json_decref(crd);
}

static enum nv_err apply(struct kube_client *c, const char *mgr, bool force, const char *spec,
                         json_t **out, struct kube_status *st)
{
	char text[512];
	snprintf(text, sizeof(text),
	         "{\"apiVersion\":\"itest.nvl72.io/v1\",\"kind\":\"Widget\","
	         "\"metadata\":{\"name\":\"w-ssa\",\"namespace\":\"default\"},\"spec\":%s}",
	         spec);
	json_t *p = obj(text);
	enum nv_err rc =
	        kube_patch(c, &WIDGETS, "default", "w-ssa",
	                   &(struct kube_patch_opts){
	                           .type = KUBE_PATCH_APPLY, .field_manager = mgr, .force = force},
	                   p, out, st);
	json_decref(p);
	return rc;
}

static void test_server_side_apply(struct kube_client *c)
{
	struct kube_status st;
	json_t *res = NULL;
	enum nv_err rc;

	rc = apply(c, "mgr-a", true, "{\"a\":\"1\",\"shared\":\"a\"}", NULL, &st);
	check(rc == NV_OK, "apply creates the object (manager a)", &st);
	rc = apply(c, "mgr-b", false, "{\"b\":\"2\"}", NULL, &st);
	check(rc == NV_OK, "apply a second field (manager b)", &st);
	rc = apply(c, "mgr-a", true, "{\"shared\":\"a2\"}", &res, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(res, "spec.b", ""), "2") &&
	              !strcmp(jx_str_or(res, "spec.shared", ""), "a2") && !jx_path(res, "spec.a"),
	      "re-apply by a keeps b's field and drops only its own omitted one", &st);
	json_decref(res);
	res = NULL;
	rc = apply(c, "mgr-b", false, "{\"b\":\"2\",\"shared\":\"b\"}", NULL, &st);
	check(rc == NV_E_CONFLICT && st.http_code == 409 && *st.causes,
	      "apply of another manager's field without force conflicts", &st);
	rc = apply(c, "mgr-b", true, "{\"b\":\"2\",\"shared\":\"b\"}", &res, &st);
	check(rc == NV_OK && !strcmp(jx_str_or(res, "spec.shared", ""), "b"),
	      "apply with force takes the field", &st);
	json_decref(res);
	rc = kube_patch(c, &WIDGETS, "default", "w-ssa",
	                &(struct kube_patch_opts){.type = KUBE_PATCH_APPLY}, NULL, NULL, &st);
	check(rc == NV_E_INVAL, "apply without a field manager is refused locally", &st);
}

static void test_eviction(struct kube_client *c)
{
	struct kube_status st;
	json_t *pod = obj("{\"metadata\":{\"name\":\"evict-me\"},\"spec\":{\"containers\":"
	                  "[{\"name\":\"c\",\"image\":\"busybox\"}]}}");
	enum nv_err rc = kube_create(c, &KUBE_RES_PODS, "default", pod, NULL, &st);

	check(rc == NV_OK, "create a pod", &st);
	rc = kube_evict(c, "default", "evict-me", &(struct kube_delete_opts){.grace_period_s = 0},
	                &st);
	check(rc == NV_OK, "evict the pod through the eviction subresource", &st);
	rc = kube_evict(c, "default", "evict-me", NULL, &st);
	check(rc == NV_E_NOT_FOUND, "evicting a missing pod is not found", &st);
	json_decref(pod);
}

int main(void)
{
	struct kube_config *cfg = NULL;
	struct kube_client *c = NULL;
	struct kube_status st;

	if (kube_config_load(NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &c, &st) != NV_OK) {
		printf("not ok - client from KUBECONFIG: %s\n", st.message);
		return 1;
	}
	test_core_crud(c);
	test_list_paging(c);
	test_custom_resource(c);
	test_server_side_apply(c);
	test_eviction(c);
	struct kube_client_stats cs;
	kube_client_stats(c, &cs);
	printf("# %llu requests over %llu connection(s), %llu on HTTP/2\n",
	       (unsigned long long)cs.transfers, (unsigned long long)cs.connections,
	       (unsigned long long)cs.http2);
	check(cs.connections <= 2 && cs.http2 == cs.transfers,
	      "requests reuse one HTTP/2 connection", NULL);
	kube_client_free(c);
	printf("%s - crud suite: %d failures\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
