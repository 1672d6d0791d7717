// SPDX-License-Identifier: Apache-2.0
// Integration suite for the controller pieces together on a real apiserver:
// an informer feeding a work queue with workers that reconcile a custom
// resource's conditions through the status subresource, the event
// recorder's aggregation of repeated events into one series, and what an
// informer's cache keeps of a Node and a Lease a kubelet-like writer left.
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube.h"
#include "nvl72/kube_ctrl.h"

static int failures;
static struct kube_client *C;

__attribute__((format(printf, 3, 4))) static void check(bool cond, const char *name,
                                                        const char *fmt, ...)
{
	char detail[600] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	printf("%s - %s%s%s%s\n", cond ? "ok" : "not ok", name, cond ? "" : " (",
	       cond ? "" : detail, cond ? "" : ")");
	failures += !cond;
	fflush(stdout);
}

static json_t *obj(const char *text)
{
	json_t *v = NULL;
	if (jx_loadb(text, strlen(text), NULL, &v, NULL) != NV_OK)
		exit(2);
	return v;
}

static const struct kube_res GADGETS = {"itest.nvl72.io", "v1", "gadgets", "Gadget", true};

static bool make_crd(void)
{
	struct kube_status st;
	json_t *crd = obj(
	        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
	        "\"metadata\":{\"name\":\"gadgets.itest.nvl72.io\"},\"spec\":{\"group\":\"itest."
	        "nvl72.io\","
	        "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"gadgets\",\"singular\":"
	        "\"gadget\","
	        "\"kind\":\"Gadget\",\"listKind\":\"GadgetList\"},\"versions\":[{\"name\":\"v1\","
	        "\"served\":true,\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":"
	        "{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"
	        "\"object\","
	        "\"x-kubernetes-preserve-unknown-fields\":true},\"status\":{\"type\":\"object\","
	        "\"x-kubernetes-preserve-unknown-fields\":true}}}}}]}}");
	enum nv_err rc = kube_create(C, &KUBE_RES_CRDS, NULL, crd, NULL, &st);
	json_decref(crd);
	for (int i = 0; rc == NV_OK && i < 100; i++) {
		json_t *l = NULL;
		if (kube_list(C, &GADGETS, "default", NULL, &l, &st) == NV_OK) {
			json_decref(l);
			return true;
		}
		time_sleep_ms(100);
	}
	return false;
}

/* ---- a small controller ---- */

struct ctl {
	struct kube_informer *inf;
	struct kube_workqueue *q;
	struct kube_recorder *rec;
	atomic_int writes;
	atomic_int reconciles;
};

static void enqueue(void *ud, json_t *o)
{
	struct ctl *c = ud;
	char key[512];
	if (kube_obj_key(o, key, sizeof(key)) == NV_OK)
		kube_workqueue_add(c->q, key);
}

static void on_update(void *ud, json_t *old, json_t *o)
{
	(void)old;
	enqueue(ud, o);
}

static void on_delete(void *ud, json_t *o, bool unknown)
{
	(void)unknown;
	enqueue(ud, o);
}

static struct kube_result reconcile(void *ud, const char *key)
{
	struct ctl *c = ud;
	struct kube_status st;
	json_t *cur = kube_informer_get(c->inf, key), *upd;
	enum nv_err rc = NV_OK;

	atomic_fetch_add(&c->reconciles, 1);
	if (cur == NULL)
		return (struct kube_result){0};
	upd = json_deep_copy(cur);
	int64_t gen = json_integer_value(jx_path(cur, "metadata.generation"));
	if (kube_condition_set(upd, "Ready", "True", "Reconciled", "spec applied", gen,
	                       time_wall_ms())) {
		jx_set_take(upd, "status.observedGeneration", json_integer(gen));
		rc = kube_update(C, &GADGETS, NULL, upd, "status", NULL, &st);
		atomic_fetch_add(&c->writes, 1);
		if (rc == NV_OK)
			kube_recorder_eventf(c->rec, cur, "Normal", "Reconciled", "Reconcile",
			                     "generation %lld is ready", (long long)gen);
	}
	json_decref(upd);
	json_decref(cur);
	/* A conflict means the cache was stale: the watch brings the new
	 * version and the rate-limited retry reconciles it. */
	return (struct kube_result){.err = rc};
}

static bool all_ready(struct ctl *c, int64_t gen_of_g1, int64_t ms)
{
	int64_t end = time_mono_ms() + ms;
	while (time_mono_ms() < end) {
		json_t *all = kube_informer_list(c->inf), *o;
		size_t i, ready = 0;
		json_array_foreach(all, i, o) {
			json_t *cd = kube_condition_find(o, "Ready");
			int64_t want = !strcmp(kube_obj_name(o), "g1") ? gen_of_g1 : 1;
			ready += kube_condition_is_true(o, "Ready") &&
			         json_integer_value(json_object_get(cd, "observedGeneration")) ==
			                 want;
		}
		size_t n = json_array_size(all);
		json_decref(all);
		if (n == 3 && ready == 3)
			return true;
		time_sleep_ms(50);
	}
	return false;
}

static void test_controller(void)
{
	struct kube_status st;
	struct ctl c = {0};
	check(make_crd(), "create the Gadget CRD", "%s", "");
	struct kube_informer_opts io = {.res = &GADGETS, .ns = "default"};
	kube_informer_new(C, &io, &c.inf);
	c.q = kube_workqueue_new("gadgets", NULL);
	c.rec = kube_recorder_new(C, "nvl72.io/itest", NULL);
	struct kube_handler h = {enqueue, on_update, on_delete, &c};
	kube_informer_add_handler(c.inf, &h);
	kube_informer_start(c.inf);
	check(kube_informer_wait_synced(c.inf, 10000), "informer synced before workers start", "%s",
	      "");
	struct kube_workers *w = kube_workers_start(c.q, 2, reconcile, &c);
	for (int i = 1; i <= 3; i++) {
		char text[256];
		snprintf(text, sizeof(text),
		         "{\"apiVersion\":\"itest.nvl72.io/v1\",\"kind\":\"Gadget\","
		         "\"metadata\":{\"name\":\"g%d\"},\"spec\":{\"n\":%d}}",
		         i, i);
		json_t *g = obj(text);
		kube_create(C, &GADGETS, "default", g, NULL, &st);
		json_decref(g);
	}
	check(all_ready(&c, 1, 20000),
	      "workers reconcile every object to Ready with observedGeneration", "writes=%d",
	      atomic_load(&c.writes));
	json_t *g1 = kube_informer_get(c.inf, "default/g1");
	char ltt[64];
	snprintf(ltt, sizeof(ltt), "%s",
	         jx_str_or(kube_condition_find(g1, "Ready"), "lastTransitionTime", ""));
	json_decref(g1);
	time_sleep_ms(1500);
	int writes = atomic_load(&c.writes);
	time_sleep_ms(2000);
	check(atomic_load(&c.writes) == writes && writes >= 3,
	      "steady state: no further API writes once converged", "writes %d -> %d", writes,
	      atomic_load(&c.writes));

	json_t *p = obj("{\"spec\":{\"n\":42}}");
	time_sleep_ms(1100); /* so a moved lastTransitionTime would show */
	kube_patch(C, &GADGETS, "default", "g1",
	           &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, p, NULL, &st);
	json_decref(p);
	check(all_ready(&c, 2, 20000), "a spec change bumps observedGeneration to 2", "%s", "");
	g1 = kube_informer_get(c.inf, "default/g1");
	check(!strcmp(ltt, jx_str_or(kube_condition_find(g1, "Ready"), "lastTransitionTime", "")),
	      "lastTransitionTime stays while the status does not flip", "was %s", ltt);
	json_decref(g1);

	kube_workers_stop(w);
	kube_informer_free(c.inf);
	kube_recorder_free(c.rec);
	kube_workqueue_free(c.q);
}

/* Events about one object, from the API. */
static json_t *events_about(const char *name, const char *reason)
{
	struct kube_status st;
	json_t *l = NULL, *e, *out = json_array();
	size_t i;
	kube_list(C, &KUBE_RES_EVENTS, "default", NULL, &l, &st);
	json_array_foreach(json_object_get(l, "items"), i, e) {
		if (!strcmp(jx_str_or(e, "regarding.name", ""), name) &&
		    !strcmp(jx_str_or(e, "reason", ""), reason))
			json_array_append(out, e);
	}
	json_decref(l);
	return out;
}

static void test_event_aggregation(void)
{
	struct kube_status st;
	json_t *cm = obj("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
	                 "{\"name\":\"flappy\",\"namespace\":\"default\"}}"),
	       *made = NULL;
	kube_create(C, &KUBE_RES_CONFIGMAPS, "default", cm, &made, &st);
	struct kube_recorder *r = kube_recorder_new(C, "nvl72.io/itest", "itest-1");
	for (int i = 0; i < 50; i++)
		kube_recorder_eventf(r, made, "Warning", "FabricDegraded", "Probe",
		                     "probe %d: link down", i);
	kube_recorder_eventf(r, made, "Normal", "FabricHealthy", "Probe", "link up");
	check(kube_recorder_flush(r, 10000), "the recorder drains its queue", "%s", "");
	json_t *ev = events_about("flappy", "FabricDegraded");
	struct kube_recorder_stats s;
	kube_recorder_stats(r, &s);
	check(json_array_size(ev) == 1 &&
	              json_integer_value(jx_path(json_array_get(ev, 0), "series.count")) == 2,
	      "50 repeats make one Event whose series opens at count 2", "events=%zu count=%lld",
	      json_array_size(ev),
	      (long long)json_integer_value(jx_path(json_array_get(ev, 0), "series.count")));
	check(s.created == 2 && s.series_updates == 1 && s.dropped == 0,
	      "51 occurrences cost 3 API writes", "created=%llu series=%llu",
	      (unsigned long long)s.created, (unsigned long long)s.series_updates);
	json_t *e0 = json_array_get(ev, 0);
	check(!strcmp(jx_str_or(e0, "reportingController", ""), "nvl72.io/itest") &&
	              !strcmp(jx_str_or(e0, "type", ""), "Warning") &&
	              !strcmp(jx_str_or(e0, "regarding.kind", ""), "ConfigMap") &&
	              *jx_str_or(e0, "regarding.uid", "") && *jx_str_or(e0, "eventTime", ""),
	      "the Event carries the events.k8s.io/v1 fields", "%s", "");
	json_decref(ev);
	kube_recorder_free(r);
	ev = events_about("flappy", "FabricDegraded");
	check(json_integer_value(jx_path(json_array_get(ev, 0), "series.count")) == 50,
	      "on shutdown the pending count is written: series.count 50", "count=%lld",
	      (long long)json_integer_value(jx_path(json_array_get(ev, 0), "series.count")));
	json_decref(ev);
	ev = events_about("flappy", "FabricHealthy");
	check(json_array_size(ev) == 1, "a different reason is a separate Event", "%s", "");
	json_decref(ev);
	json_decref(made);
	json_decref(cm);
}

/* ---- what the caches keep ---- */

static enum nv_err apply_as(const struct kube_res *r, const char *ns, const char *name,
                            const char *manager, const char *sub, const char *text)
{
	struct kube_status st;
	json_t *o = obj(text);
	enum nv_err rc = kube_patch(C, r, ns, name,
	                            &(struct kube_patch_opts){.type = KUBE_PATCH_APPLY,
	                                                      .field_manager = manager,
	                                                      .force = true,
	                                                      .subresource = sub},
	                            o, NULL, &st);
	json_decref(o);
	if (rc != NV_OK)
		printf("# apply %s as %s: %s %s\n", name, manager, nv_err_name(rc), st.message);
	return rc;
}

static const struct kube_res LEASES = {"coordination.k8s.io", "v1", "leases", "Lease", true};

/* A Node as a kubelet and node-feature-discovery leave it: the cache keeps
 * only the fields the operator reads, and the object on the server keeps
 * everything after a write through the cache's copy. */
static void test_cache_trim(void)
{
	struct kube_selector *sel = NULL;
	struct kube_status st;
	char why[100];
	static const char *const labels[] = {"nvl72.io/", NULL};
	struct kube_node_keep keep = {.label_prefixes = labels, .annotation_prefixes = labels};
	struct kube_informer *nodes = NULL, *leases = NULL, *full = NULL;
	json_t *n = NULL, *f = NULL, *l = NULL, *srv = NULL;

	check(kube_selector_parse("example.com/gpu-tray=yes", &sel, why, sizeof(why)) == NV_OK,
	      "a selector parses", "%s", why);
	keep.selector = sel;
	check(apply_as(
	              &KUBE_RES_NODES, NULL, "trim-n1", "kubelet", NULL,
	              "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"trim-n1\","
	              "\"labels\":{\"kubernetes.io/hostname\":\"trim-n1\",\"nvl72.io/rack\":\"r1\","
	              "\"example.com/gpu-tray\":\"yes\"},\"annotations\":{\"nvl72.io/cordoned-by\":"
	              "\"u1\",\"example.com/note\":\"kept on the server\"}},\"spec\":{"
	              "\"unschedulable\":true,\"podCIDR\":\"10.9.0.0/24\",\"taints\":[{\"key\":"
	              "\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"}]}}") == NV_OK &&
	              apply_as(&KUBE_RES_NODES, NULL, "trim-n1", "nfd-master", NULL,
	                       "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
	                       "\"trim-n1\",\"labels\":{\"feature.node.kubernetes.io/"
	                       "pci-10de.present\":\"true\"}}}") == NV_OK &&
	              apply_as(
	                      &KUBE_RES_NODES, NULL, "trim-n1", "kubelet", "status",
	                      "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
	                      "\"trim-n1\"},\"status\":{\"conditions\":[{\"type\":"
	                      "\"MemoryPressure\",\"status\":\"False\",\"reason\":\"R\"},{\"type\":"
	                      "\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\","
	                      "\"message\":\"ok\",\"lastHeartbeatTime\":\"2026-12-01T00:00:00Z\","
	                      "\"lastTransitionTime\":\"2026-12-01T00:00:00Z\"}],\"addresses\":[{"
	                      "\"type\":\"InternalIP\",\"address\":\"10.9.0.1\"}],\"images\":[{"
	                      "\"names\":[\"bench.invalid/a:v1\"],\"sizeBytes\":1}],\"nodeInfo\":{"
	                      "\"kubeletVersion\":\"v1.34.4\"}}}") == NV_OK,
	      "a Node written by three managers", "%s", "");
	check(apply_as(&LEASES, "default", "trim-l1", "agent", NULL,
	               "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
	               "{\"name\":\"trim-l1\",\"labels\":{\"example.com/x\":\"y\"}},\"spec\":{"
	               "\"holderIdentity\":\"a\",\"leaseDurationSeconds\":40,\"renewTime\":"
	               "\"2026-12-01T00:00:00.000000Z\",\"leaseTransitions\":3}}") == NV_OK,
	      "a Lease", "%s", "");
	check(apply_as(&LEASES, "default", "trim-l2", "agent", NULL,
	               "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":"
	               "{\"name\":\"trim-l2\"},\"spec\":{\"holderIdentity\":\"b\"}}") == NV_OK,
	      "a second Lease", "%s", "");

	kube_informer_new(C,
	                  &(struct kube_informer_opts){.res = &KUBE_RES_NODES,
	                                               .field_selector = "metadata.name=trim-n1",
	                                               .transform = kube_transform_node,
	                                               .transform_arg = &keep},
	                  &nodes);
	kube_informer_new(C,
	                  &(struct kube_informer_opts){.res = &KUBE_RES_NODES,
	                                               .field_selector = "metadata.name=trim-n1",
	                                               .keep_managed_fields = true},
	                  &full);
	kube_informer_new(C,
	                  &(struct kube_informer_opts){.res = &LEASES,
	                                               .ns = "default",
	                                               .page_size = 1,
	                                               .transform = kube_transform_lease},
	                  &leases);
	kube_informer_start(nodes);
	kube_informer_start(full);
	kube_informer_start(leases);
	check(kube_informer_wait_synced(nodes, 20000) && kube_informer_wait_synced(full, 20000) &&
	              kube_informer_wait_synced(leases, 20000),
	      "the trimming informers sync", "%s", "");
	n = kube_informer_get(nodes, "trim-n1");
	f = kube_informer_get(full, "trim-n1");
	l = kube_informer_get(leases, "default/trim-l1");
	check(n != NULL && f != NULL && l != NULL, "the objects are cached", "%s", "");
	check(json_array_size(jx_path(f, "metadata.managedFields")) >= 2,
	      "with keep_managed_fields the cache has the managers' entries", "n=%zu",
	      json_array_size(jx_path(f, "metadata.managedFields")));
	check(jx_path(n, "metadata.managedFields") == NULL, "the Node cache drops managedFields",
	      "%s", "");
	check(jx_path(n, "status.images") == NULL && jx_path(n, "status.nodeInfo") == NULL &&
	              jx_path(n, "spec.podCIDR") == NULL,
	      "the Node cache drops images, nodeInfo and podCIDR", "%s", "");
	check(json_object_get(jx_path(n, "metadata.labels"),
	                      "feature.node.kubernetes.io/pci-10de.present") == NULL &&
	              json_object_get(jx_path(n, "metadata.labels"), "kubernetes.io/hostname") ==
	                      NULL,
	      "labels no prefix or selector admits are dropped", "%s", "");
	check(!strcmp(jx_str_or(json_object_get(jx_path(n, "metadata.labels"), "nvl72.io/rack"), "",
	                        ""),
	              "r1") &&
	              json_is_string(json_object_get(jx_path(n, "metadata.labels"),
	                                             "example.com/gpu-tray")),
	      "the operator's labels and the selector's are kept", "%s", "");
	check(json_is_string(json_object_get(jx_path(n, "metadata.annotations"),
	                                     "nvl72.io/cordoned-by")) &&
	              json_object_get(jx_path(n, "metadata.annotations"), "example.com/note") ==
	                      NULL,
	      "only the operator's annotations are kept", "%s", "");
	json_t *conds = jx_path(n, "status.conditions");
	check(json_array_size(conds) == 1 && kube_condition_is_true(n, "Ready") &&
	              jx_path(json_array_get(conds, 0), "lastHeartbeatTime") == NULL &&
	              *jx_str_or(n, "metadata.uid", "") &&
	              *jx_str_or(n, "metadata.resourceVersion", ""),
	      "Ready alone is kept, without its heartbeat; uid and resourceVersion stay", "n=%zu",
	      json_array_size(conds));
	check(json_is_true(jx_path(n, "spec.unschedulable")) &&
	              /* the apiserver adds node.kubernetes.io/unschedulable itself */
	              !strcmp(jx_str_or(n, "spec.taints[0].key", ""), "nvidia.com/gpu") &&
	              json_array_size(jx_path(n, "status.addresses")) == 1,
	      "unschedulable, taints and addresses are kept",
	      "unschedulable=%d taints=%zu addresses=%zu",
	      json_is_true(jx_path(n, "spec.unschedulable")),
	      json_array_size(jx_path(n, "spec.taints")),
	      json_array_size(jx_path(n, "status.addresses")));
	check(jx_path(l, "metadata.labels") == NULL &&
	              jx_path(l, "spec.leaseTransitions") == NULL &&
	              !strcmp(jx_str_or(l, "spec.holderIdentity", ""), "a") &&
	              json_integer_value(jx_path(l, "spec.leaseDurationSeconds")) == 40 &&
	              *jx_str_or(l, "spec.renewTime", ""),
	      "the Lease cache keeps holder, renew time and duration only", "%s", "");
	/* Listed a page of one at a time, item by item; the cache holds each
	 * object's compact text, which a read gives back. */
	json_t *l2 = kube_informer_get(leases, "default/trim-l2");
	struct kube_informer_stats ls;
	kube_informer_stats(leases, &ls);
	char *t1 = json_dumps(l, JSON_COMPACT), *t2 = json_dumps(l2, JSON_COMPACT);
	check(l2 != NULL && ls.lists == 1 && ls.objects == 2 && t1 && t2 &&
	              ls.bytes == strlen(t1) + strlen(t2),
	      "a paged list caches every object as its compact text",
	      "lists=%llu objects=%zu bytes=%zu", (unsigned long long)ls.lists, ls.objects,
	      ls.bytes);
	free(t1);
	free(t2);
	json_decref(l2);

	/* A write as the operator makes one from the trimmed copy: a merge
	 * patch of its own label, guarded by the cached resourceVersion. */
	json_t *patch = json_pack("{s:{s:s,s:{s:s}}}", "metadata", "resourceVersion",
	                          jx_str_or(n, "metadata.resourceVersion", ""), "labels",
	                          "nvl72.io/tray-index", "3");
	enum nv_err rc =
	        kube_patch(C, &KUBE_RES_NODES, NULL, "trim-n1",
	                   &(struct kube_patch_opts){.type = KUBE_PATCH_MERGE}, patch, &srv, &st);
	json_decref(patch);
	check(rc == NV_OK &&
	              json_is_string(json_object_get(jx_path(srv, "metadata.labels"),
	                                             "feature.node.kubernetes.io/"
	                                             "pci-10de.present")) &&
	              json_array_size(jx_path(srv, "status.images")) == 1 &&
	              json_is_string(json_object_get(jx_path(srv, "metadata.annotations"),
	                                             "example.com/note")) &&
	              json_array_size(jx_path(srv, "status.conditions")) == 2,
	      "a write from the trimmed copy keeps the fields the cache dropped on the server",
	      "rc=%s", nv_err_name(rc));
	bool seen = false;
	for (int i = 0; i < 200 && !seen; i++) {
		json_t *c = kube_informer_get(nodes, "trim-n1");
		seen = !strcmp(jx_str_or(json_object_get(jx_path(c, "metadata.labels"),
		                                         "nvl72.io/tray-index"),
		                         "", ""),
		               "3") &&
		       jx_path(c, "metadata.managedFields") == NULL &&
		       jx_path(c, "status.images") == NULL;
		json_decref(c);
		if (!seen)
			time_sleep_ms(50);
	}
	check(seen, "a watched update is trimmed as a listed object is", "%s", "");
	json_decref(srv);
	json_decref(n);
	json_decref(f);
	json_decref(l);
	kube_informer_free(nodes);
	kube_informer_free(full);
	kube_informer_free(leases);
	kube_selector_free(sel);
	(void)kube_delete(C, &KUBE_RES_NODES, NULL, "trim-n1", NULL, &st);
	(void)kube_delete(C, &LEASES, "default", "trim-l1", NULL, &st);
	(void)kube_delete(C, &LEASES, "default", "trim-l2", NULL, &st);
}

int main(void)
{
	struct kube_config *cfg = NULL;
	struct kube_status st;
	if (kube_config_load(NULL, &cfg, &st) != NV_OK ||
	    kube_client_new(cfg, NULL, &C, &st) != NV_OK) {
		printf("not ok - client from KUBECONFIG: %s\n", st.message);
		return 1;
	}
	test_controller();
	test_event_aggregation();
	test_cache_trim();
	kube_client_free(C);
	printf("%s - controller suite: %d failures\n", failures ? "not ok" : "ok", failures);
	return failures ? 1 : 0;
}
