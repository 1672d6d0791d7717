// SPDX-License-Identifier: Apache-2.0
// Unit tests for the validating webhook's rules, judged against an
// in-memory cache behind the same ops struct as the informers: every allow
// and deny path of racks, partitions, matrices and upgrades, with the
// message the user reads.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/webhook.h"
#include "../../../src/webhook/webhook_int.h"

/* ---- the in-memory cache --------------------------------------------------- */

struct fake_cache {
	json_t *lists[WEBHOOK__KINDS];
	bool unsynced[WEBHOOK__KINDS];
	unsigned calls;
};

static json_t *fake_list(void *arg, enum webhook_kind kind)
{
	struct fake_cache *c = arg;
	c->calls++;
	if (c->unsynced[kind])
		return NULL;
	return json_incref(c->lists[kind]);
}

static const struct webhook_cache_ops fake_ops = {.list = fake_list};

/* The API server behind the cache: objects the lists do not hold yet. */
static json_t *fake_server[WEBHOOK__KINDS];
static unsigned fake_gets;

static json_t *fake_get(void *arg, enum webhook_kind kind, const char *name)
{
	size_t i;
	json_t *o;
	(void)arg;
	fake_gets++;
	json_array_foreach(fake_server[kind], i, o) {
		if (strcmp(jx_str_or(o, "metadata.name", ""), name) == 0)
			return json_incref(o);
	}
	return NULL;
}

static const struct webhook_cache_ops fake_ops_read_through = {.list = fake_list, .get = fake_get};

static json_t *load(const char *path)
{
	json_error_t jerr;
	json_t *j = json_load_file(path, 0, &jerr);
	if (j == NULL) {
		fprintf(stderr, "%s: %s\n", path, jerr.text);
		abort();
	}
	return j;
}

#define RACK "tests/data/api/rack-gb300-r07.json"
#define PART_A "tests/data/api/rackpartition-gb300-r07-a.json"
#define PART_B "tests/data/api/rackpartition-gb300-r07-b.json"
#define MATRIX_GB300 "tests/data/matrix/compatibilitymatrix-gb300-2026.10.json"
#define MATRIX_GB200 "tests/data/matrix/compatibilitymatrix-gb200-2026.10.json"
#define UPGRADE "tests/data/api/rackupgrade-gb300-r07-r580-173.json"
#define UPGRADE_SEC "tests/data/api/rackupgrade-gb300-r07-nvidia-5821.json"

struct fixture {
	struct fake_cache cache;
	struct webhook *w;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	f->cache.lists[WEBHOOK_RACKS] = json_pack("[o]", load(RACK));
	f->cache.lists[WEBHOOK_PARTITIONS] = json_pack("[o, o]", load(PART_A), load(PART_B));
	f->cache.lists[WEBHOOK_MATRICES] =
	        json_pack("[o, o]", load(MATRIX_GB300), load(MATRIX_GB200));
	// The upgrade the canned approval names, as the apiserver stores it;
	// Completed, so it holds no rack for the one-upgrade-per-rack rule.
	json_t *u = load(UPGRADE);
	json_object_set_new(json_object_get(u, "metadata"), "uid",
	                    json_string("3b1f6a52-0c1d-4e8f-9a7b-1c2d3e4f5a6b"));
	json_object_set_new(u, "status", json_pack("{s:s}", "phase", "Completed"));
	f->cache.lists[WEBHOOK_UPGRADES] = json_pack("[o]", u);
	// A worker Node of r08 and the cluster's control-plane Node.
	f->cache.lists[WEBHOOK_NODES] = json_pack(
	        "[{s:{s:s,s:{s:s}}},{s:{s:s,s:{s:s}}}]", "metadata", "name", "gb300-r08-t01",
	        "labels", "feature.node.kubernetes.io/pci-10de.present", "true", "metadata", "name",
	        "cp-1", "labels", "node-role.kubernetes.io/control-plane", "");
	struct webhook_config cfg = {.cache = &fake_ops, .cache_arg = &f->cache};
	assert_int_equal(webhook_new(&cfg, &f->w), NV_OK);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	for (int k = 0; k < WEBHOOK__KINDS; k++)
		json_decref(f->cache.lists[k]);
	webhook_free(f->w);
	free(f);
	return 0;
}

/* What one review answered. */
struct answer {
	int http;
	bool allowed;
	int code;
	char msg[4096];
	size_t nwarn;
	char warn[1024]; /* the first warning */
};

/* Sends obj (and old, for an UPDATE) to /validate; takes both references. */
static struct answer judge_as(struct webhook *w, const char *op, const char *resource,
                              const char *kind, json_t *obj, json_t *old)
{
	json_t *req = json_pack("{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:s, s:o}", "uid",
	                        "0b0e7c4a-5f1e-4a57-9d64-1f6c2d2f8e11", "kind", "group", "nvl72.io",
	                        "version", "v1alpha1", "kind", kind, "resource", "group",
	                        "nvl72.io", "version", "v1alpha1", "resource", resource,
	                        "operation", op, "object", obj);
	if (old != NULL)
		json_object_set_new(req, "oldObject", old);
	json_t *review = json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1", "kind",
	                           "AdmissionReview", "request", req);
	char *text = json_dumps(review, JSON_COMPACT);
	struct buf out;
	struct answer a;
	memset(&a, 0, sizeof(a));
	buf_init(&out, 1 << 20);
	assert_int_equal(webhook_review(w, WEBHOOK_VALIDATE, "application/json", text, strlen(text),
	                                &a.http, &out),
	                 NV_OK);
	json_t *resp = json_loads(buf_str(&out), 0, NULL);
	assert_non_null(resp);
	a.allowed = json_is_true(jx_path(resp, "response.allowed"));
	a.code = (int)json_integer_value(jx_path(resp, "response.status.code"));
	snprintf(a.msg, sizeof(a.msg), "%s", jx_str_or(resp, "response.status.message", ""));
	a.nwarn = json_array_size(jx_path(resp, "response.warnings"));
	snprintf(a.warn, sizeof(a.warn), "%s",
	         a.nwarn ? json_string_value(json_array_get(jx_path(resp, "response.warnings"), 0))
	                 : "");
	assert_string_equal(jx_str_or(resp, "response.uid", ""),
	                    "0b0e7c4a-5f1e-4a57-9d64-1f6c2d2f8e11");
	if (!a.allowed)
		fprintf(stderr, "  denied %d: %s\n", a.code, a.msg);
	json_decref(resp);
	buf_clear(&out);
	free(text);
	json_decref(review);
	return a;
}

static struct answer judge(struct webhook *w, const char *resource, const char *kind, json_t *obj)
{
	return judge_as(w, "CREATE", resource, kind, obj, NULL);
}

#define assert_denied(a, code_, text)                                                              \
	do {                                                                                       \
		assert_false((a).allowed);                                                         \
		assert_int_equal((a).code, (code_));                                               \
		if (strstr((a).msg, (text)) == NULL)                                               \
			fprintf(stderr, "  wanted: %s\n", (text));                                 \
		assert_non_null(strstr((a).msg, (text)));                                          \
	} while (0)

static void set(json_t *root, const char *path, json_t *v)
{
	assert_int_equal(jx_set_take(root, path, v), NV_OK);
}

/* A second rack, r08, with nodes, addresses and serial of its own. */
static json_t *rack_r08(void)
{
	json_t *r = load(RACK);
	set(r, "metadata.name", json_string("gb300-r08"));
	set(r, "spec.chassisSerial", json_string("1821124000043"));
	json_t *trays = jx_path(r, "spec.computeTrays");
	for (size_t i = 0; i < json_array_size(trays); i++) {
		char node[32];
		snprintf(node, sizeof(node), "gb300-r08-t%02zu", i + 1);
		json_object_set_new(json_array_get(trays, i), "node", json_string(node));
	}
	json_t *sw = jx_path(r, "spec.switchTrays");
	for (size_t i = 0; i < json_array_size(sw); i++) {
		char a[32];
		snprintf(a, sizeof(a), "10.40.8.%zu", 101 + i);
		json_object_set_new(json_array_get(sw, i), "oobAddress", json_string(a));
		snprintf(a, sizeof(a), "10.41.8.%zu", 101 + i);
		json_object_set_new(json_array_get(sw, i), "bmcAddress", json_string(a));
	}
	return r;
}

/* ---- Rack ------------------------------------------------------------------- */

static void test_wh_validate_rack_allowed(void **state)
{
	struct fixture *f = *state;
	// The rack itself is in the cache: its own entry is its old version.
	struct answer a = judge(f->w, "racks", "Rack", load(RACK));
	assert_true(a.allowed);
	a = judge(f->w, "racks", "Rack", rack_r08());
	assert_true(a.allowed);
}

static void test_wh_validate_rack_node_in_two_racks(void **state)
{
	struct fixture *f = *state;
	json_t *r = rack_r08();
	json_object_set_new(json_array_get(jx_path(r, "spec.computeTrays"), 4), "node",
	                    json_string("gb300-r07-t05"));
	struct answer a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422,
	              "Rack \"gb300-r08\": spec.computeTrays[4].node: node \"gb300-r07-t05\" is "
	              "already tray 5 of rack \"gb300-r07\"");
}

/* The privileged agent would follow a Rack onto a control-plane Node. */
static void test_wh_validate_rack_control_plane_node(void **state)
{
	struct fixture *f = *state;
	json_t *r = rack_r08();
	json_object_set_new(json_array_get(jx_path(r, "spec.computeTrays"), 2), "node",
	                    json_string("cp-1"));
	struct answer a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422,
	              "Rack \"gb300-r08\": spec.computeTrays[2].node: Node \"cp-1\" is a "
	              "control-plane Node (label node-role.kubernetes.io/control-plane)");
	/* The legacy role label counts too. */
	json_object_set_new(
	        jx_path(json_array_get(f->cache.lists[WEBHOOK_NODES], 1), "metadata.labels"),
	        "node-role.kubernetes.io/master", json_string(""));
	json_object_del(
	        jx_path(json_array_get(f->cache.lists[WEBHOOK_NODES], 1), "metadata.labels"),
	        "node-role.kubernetes.io/control-plane");
	r = rack_r08();
	json_object_set_new(json_array_get(jx_path(r, "spec.computeTrays"), 2), "node",
	                    json_string("cp-1"));
	a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422, "(label node-role.kubernetes.io/master)");
	/* No Node cache yet: refused as unsynced, never admitted blind. */
	f->cache.unsynced[WEBHOOK_NODES] = true;
	a = judge(f->w, "racks", "Rack", rack_r08());
	assert_denied(a, 503, "the operator's cache of Nodes has not synced yet");
	f->cache.unsynced[WEBHOOK_NODES] = false;
}

static void test_wh_validate_rack_matrix_missing(void **state)
{
	struct fixture *f = *state;
	json_t *r = rack_r08();
	set(r, "spec.matrix.name", json_string("gb300-2027.01"));
	struct answer a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422,
	              "spec.matrix.name: CompatibilityMatrix \"gb300-2027.01\" does not exist");
}

static void test_wh_validate_rack_stack_and_platform(void **state)
{
	struct fixture *f = *state;
	json_t *r = rack_r08();
	set(r, "spec.matrix.stack", json_string("gb300-r999"));
	struct answer a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422,
	              "spec.matrix.stack: stack \"gb300-r999\" is not in CompatibilityMatrix "
	              "\"gb300-2026.10\"");
	r = rack_r08();
	set(r, "spec.matrix.name", json_string("gb200-2026.10"));
	set(r, "spec.matrix.stack", json_string("gb200-r580-95"));
	a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422,
	              "spec.platform: rack is gb300 but CompatibilityMatrix \"gb200-2026.10\" is "
	              "for gb200");
}

static void test_wh_validate_rack_schema_error(void **state)
{
	struct fixture *f = *state;
	json_t *r = rack_r08();
	json_object_set_new(json_array_get(jx_path(r, "spec.computeTrays"), 2), "node",
	                    json_string(""));
	struct answer a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422, "Rack \"gb300-r08\": spec.computeTrays[2].node");
	// Parse errors come before any cache read.
	f->cache.calls = 0;
	r = load(RACK);
	json_object_del(json_object_get(r, "spec"), "computeTrays");
	a = judge(f->w, "racks", "Rack", r);
	assert_false(a.allowed);
	assert_int_equal(f->cache.calls, 0);
}

static void test_wh_validate_rack_cache_not_synced(void **state)
{
	struct fixture *f = *state;
	f->cache.unsynced[WEBHOOK_RACKS] = true;
	struct answer a = judge(f->w, "racks", "Rack", rack_r08());
	assert_denied(a, 503,
	              "Rack \"gb300-r08\": the operator's cache of Racks has not synced yet");
	f->cache.unsynced[WEBHOOK_RACKS] = false;
}

/* ---- RackPartition -------------------------------------------------------- */

static void test_wh_validate_partition_overlap(void **state)
{
	struct fixture *f = *state;
	json_t *p = load(PART_B);
	json_array_append_new(jx_path(p, "spec.trays"), json_integer(9));
	struct answer a = judge(f->w, "rackpartitions", "RackPartition", p);
	assert_denied(a, 422,
	              "RackPartition \"gb300-r07-b\": spec.trays: tray 9 of rack \"gb300-r07\" is "
	              "already in partition \"gb300-r07-a\": partitions of one rack never overlap");
	a = judge(f->w, "rackpartitions", "RackPartition", load(PART_B));
	assert_true(a.allowed);
}

static void test_wh_validate_partition_rack_missing(void **state)
{
	struct fixture *f = *state;
	json_t *p = load(PART_B);
	set(p, "spec.rack", json_string("gb300-r99"));
	struct answer a = judge(f->w, "rackpartitions", "RackPartition", p);
	assert_denied(a, 422, "spec.rack: rack \"gb300-r99\" does not exist");
}

/* A Rack created a moment ago is not in the cache yet: the webhook reads it
 * from the API server rather than refuse the partition that names it; a
 * name the server does not know either is still refused. */
static void test_wh_validate_partition_rack_read_through(void **state)
{
	struct fixture *f = *state;
	struct webhook *w;
	struct webhook_config cfg = {.cache = &fake_ops_read_through, .cache_arg = &f->cache};
	json_t *rack = load(RACK);
	set(rack, "metadata.name", json_string("gb300-r09"));
	fake_server[WEBHOOK_RACKS] = json_pack("[o]", rack);
	fake_gets = 0;
	assert_int_equal(webhook_new(&cfg, &w), NV_OK);

	json_t *p = load(PART_B);
	set(p, "metadata.name", json_string("gb300-r09-b"));
	set(p, "spec.rack", json_string("gb300-r09"));
	struct answer a = judge(w, "rackpartitions", "RackPartition", p);
	assert_true(a.allowed);
	assert_int_equal(fake_gets, 1);

	p = load(PART_B);
	set(p, "spec.rack", json_string("gb300-r99"));
	a = judge(w, "rackpartitions", "RackPartition", p);
	assert_denied(a, 422, "spec.rack: rack \"gb300-r99\" does not exist");

	webhook_free(w);
	json_decref(fake_server[WEBHOOK_RACKS]);
	fake_server[WEBHOOK_RACKS] = NULL;
}

static void test_wh_validate_partition_other_rack_same_trays(void **state)
{
	struct fixture *f = *state;
	json_array_append_new(f->cache.lists[WEBHOOK_RACKS], rack_r08());
	json_t *p = load(PART_A);
	set(p, "metadata.name", json_string("gb300-r08-a"));
	set(p, "spec.rack", json_string("gb300-r08"));
	struct answer a = judge(f->w, "rackpartitions", "RackPartition", p);
	assert_true(a.allowed);
}

static void test_wh_validate_partition_many_in_cache(void **state)
{
	struct fixture *f = *state;
	// 10,000 cached partitions of other racks: judged, not choked on.
	json_t *parts = f->cache.lists[WEBHOOK_PARTITIONS];
	for (int i = 0; i < 10000; i++) {
		json_t *p = load(PART_A);
		char name[32];
		snprintf(name, sizeof(name), "p-%d", i);
		set(p, "metadata.name", json_string(name));
		set(p, "spec.rack", json_string(i % 2 ? "gb300-r08" : "gb300-r09"));
		json_array_append_new(parts, p);
	}
	struct answer a = judge(f->w, "rackpartitions", "RackPartition", load(PART_B));
	assert_true(a.allowed);
}

/* ---- CompatibilityMatrix -------------------------------------------------- */

static void test_wh_validate_matrix(void **state)
{
	struct fixture *f = *state;
	struct answer a =
	        judge(f->w, "compatibilitymatrices", "CompatibilityMatrix", load(MATRIX_GB300));
	assert_true(a.allowed);
	json_t *m = load(MATRIX_GB300);
	json_object_del(json_object_get(m, "spec"), "stacks");
	a = judge(f->w, "compatibilitymatrices", "CompatibilityMatrix", m);
	assert_denied(a, 422, "CompatibilityMatrix \"gb300-2026.10\": spec.stacks");
}

/* ---- RackUpgrade ---------------------------------------------------------- */

static void test_wh_validate_upgrade_allowed(void **state)
{
	struct fixture *f = *state;
	// r580-95 -> r580-173 has no direct edge; two listed edges do it.
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", load(UPGRADE));
	assert_true(a.allowed);
	a = judge(f->w, "rackupgrades", "RackUpgrade", load(UPGRADE_SEC));
	assert_true(a.allowed);
}

static void test_wh_validate_upgrade_single_hop(void **state)
{
	struct fixture *f = *state;
	struct webhook *w = NULL;
	struct webhook_config cfg = {
	        .cache = &fake_ops, .cache_arg = &f->cache, .single_hop = true};
	assert_int_equal(webhook_new(&cfg, &w), NV_OK);
	struct answer a = judge(w, "rackupgrades", "RackUpgrade", load(UPGRADE));
	assert_denied(a, 422, "spec.target.stack: no allowed move from \"gb300-r580-95\"");
	webhook_free(w);
}

/* r580-95 -> r580-173 takes a manual edge, which asks every touched layer
 * (node, for the driver, among them) to approve. With no window owner for
 * node, nobody could: the upgrade is refused. A security upgrade needs no
 * approval and still passes. */
static void test_wh_validate_upgrade_needs_window_owner(void **state)
{
	struct fixture *f = *state;
	json_t *resp =
	        jx_path(json_array_get(f->cache.lists[WEBHOOK_RACKS], 0), "spec.responsibilities");
	json_object_del(json_array_get(resp, 2), "windowOwner"); // node, approvalRequired false
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", load(UPGRADE));
	assert_denied(a, 422,
	              "spec.target.stack: the move from \"gb300-r580-95\" needs an approval of "
	              "layer node, but rack \"gb300-r07\" names no windowOwner for it");
	json_array_remove(resp, 2); // no entry at all
	a = judge(f->w, "rackupgrades", "RackUpgrade", load(UPGRADE));
	assert_denied(a, 422, "needs an approval of layer node");
	a = judge(f->w, "rackupgrades", "RackUpgrade", load(UPGRADE_SEC));
	assert_true(a.allowed);
	// A safe edge asks only the approvalRequired layers, which have owners.
	json_t *u = load(UPGRADE);
	set(u, "spec.target.stack", json_string("gb300-r580-159"));
	json_object_del(json_object_get(u, "spec"), "canary");
	a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_true(a.allowed);
}

static void test_wh_validate_upgrade_stack_missing(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE);
	set(u, "spec.target.stack", json_string("gb300-r590-1"));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "RackUpgrade \"gb300-r07-r580-173\": spec.target.stack: stack "
	              "\"gb300-r590-1\" is not in CompatibilityMatrix \"gb300-2026.10\"");
}

static void test_wh_validate_upgrade_matrix_missing_or_other_platform(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE);
	set(u, "spec.target.matrix", json_string("gb300-2027.01"));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "spec.target.matrix: CompatibilityMatrix \"gb300-2027.01\" does not exist");
	u = load(UPGRADE);
	set(u, "spec.target.matrix", json_string("gb200-2026.10"));
	set(u, "spec.target.stack", json_string("gb200-r580-95"));
	a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "spec.target.matrix: CompatibilityMatrix \"gb200-2026.10\" is for gb200 but "
	              "rack \"gb300-r07\" is gb300");
}

static void test_wh_validate_upgrade_rack_missing(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE);
	set(u, "spec.rack", json_string("gb300-r99"));
	json_object_del(json_object_get(u, "spec"), "canary");
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422, "spec.rack: rack \"gb300-r99\" does not exist");
}

static void test_wh_validate_upgrade_from_observed_stacks(void **state)
{
	struct fixture *f = *state;
	// The rack reports trays on r580-173: going back to r580-159 is blocked.
	json_t *rack = json_array_get(f->cache.lists[WEBHOOK_RACKS], 0);
	set(rack, "status",
	    json_pack("{s:s, s:[{s:i, s:s}, {s:i, s:s}]}", "stack", "mixed", "trays", "index", 1,
	              "stack", "gb300-r580-173", "index", 2, "stack", ""));
	json_t *u = load(UPGRADE);
	set(u, "spec.target.stack", json_string("gb300-r580-159"));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422, "spec.target.stack: no allowed move from \"gb300-r580-173\"");
}

static void test_wh_validate_upgrade_canary(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE);
	set(u, "spec.canary.partition", json_string("nowhere"));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422, "spec.canary.partition: RackPartition \"nowhere\" does not exist");
	json_t *p = load(PART_A);
	set(p, "metadata.name", json_string("gb300-r08-a"));
	set(p, "spec.rack", json_string("gb300-r08"));
	json_array_append_new(f->cache.lists[WEBHOOK_PARTITIONS], p);
	u = load(UPGRADE);
	set(u, "spec.canary.partition", json_string("gb300-r08-a"));
	a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "spec.canary.partition: RackPartition \"gb300-r08-a\" belongs to rack "
	              "\"gb300-r08\", not to rack \"gb300-r07\"");
}

static void test_wh_validate_upgrade_wave_size(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE);
	set(u, "spec.waveSize", json_integer(3));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "spec.waveSize: 3 trays per wave exceeds maxUnavailableTrays (2) of rack "
	              "\"gb300-r07\"");
}

static void test_wh_validate_upgrade_cve_not_fixed(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE_SEC);
	set(u, "spec.cves", json_pack("[s]", "CVE-2026-99999"));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "spec.cves[0]: CVE-2026-99999 is not fixed by stack \"gb300-r580-159\"");
}

static void test_wh_validate_upgrade_selector(void **state)
{
	struct fixture *f = *state;
	json_t *u = load(UPGRADE);
	json_object_del(json_object_get(u, "spec"), "rack");
	json_object_del(json_object_get(u, "spec"), "canary");
	set(u, "spec.rackSelector",
	    json_pack("{s:{s:s}}", "matchLabels", "nvl72.io/fleet", "training"));
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade", json_deep_copy(u));
	assert_true(a.allowed);
	set(u, "spec.waveSize", json_integer(4));
	a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422,
	              "spec.waveSize: 4 trays per wave exceeds maxUnavailableTrays (2) of rack "
	              "\"gb300-r07\"");
}

static void test_wh_validate_wrong_types(void **state)
{
	struct fixture *f = *state;
	json_t *p = load(PART_B);
	set(p, "spec.trays", json_string("1-9"));
	struct answer a = judge(f->w, "rackpartitions", "RackPartition", p);
	assert_denied(a, 422, "RackPartition \"gb300-r07-b\": spec.trays");
	json_t *r = load(RACK);
	json_object_set_new(r, "spec", json_array());
	a = judge(f->w, "racks", "Rack", r);
	assert_denied(a, 422, "Rack \"gb300-r07\": spec");
	json_t *u = load(UPGRADE);
	set(u, "spec.waveSize", json_string("two"));
	a = judge(f->w, "rackupgrades", "RackUpgrade", u);
	assert_denied(a, 422, "spec.waveSize");
	// A cached rack of the wrong shape is skipped, not trusted or crashed on.
	json_array_append_new(
	        f->cache.lists[WEBHOOK_RACKS],
	        json_pack("{s:{s:s}, s:s}", "metadata", "name", "broken", "spec", "x"));
	json_array_append_new(f->cache.lists[WEBHOOK_RACKS], json_integer(7));
	a = judge(f->w, "racks", "Rack", rack_r08());
	assert_true(a.allowed);
}

/* ---- one upgrade per rack ----------------------------------------------------- */

/* An upgrade of rack as named, without a canary (any rack may take it). */
static json_t *upgrade_of(const char *name, const char *rack, const char *phase)
{
	json_t *u = load(UPGRADE);
	set(u, "metadata.name", json_string(name));
	set(u, "spec.rack", json_string(rack));
	json_object_del(json_object_get(u, "spec"), "canary");
	if (phase != NULL)
		set(u, "status", json_pack("{s:s}", "phase", phase));
	return u;
}

static void test_wh_validate_upgrade_one_per_rack(void **state)
{
	struct fixture *f = *state;
	json_t *ups = f->cache.lists[WEBHOOK_UPGRADES];
	json_array_clear(ups); // only the upgrades this test places
	json_array_append_new(f->cache.lists[WEBHOOK_RACKS], rack_r08());
	json_array_append_new(ups, load(UPGRADE)); // no status yet: Proposed
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade",
	                        upgrade_of("gb300-r07-again", "gb300-r07", NULL));
	assert_denied(a, 422,
	              "RackUpgrade \"gb300-r07-again\": spec.rack: rack \"gb300-r07\" already has "
	              "an upgrade in flight: RackUpgrade \"gb300-r07-r580-173\" (phase Proposed); "
	              "one upgrade per rack at a time");
	// Another rack is free, and the upgrade in flight is not its own rival.
	a = judge(f->w, "rackupgrades", "RackUpgrade",
	          upgrade_of("gb300-r08-r580-173", "gb300-r08", NULL));
	assert_true(a.allowed);
	a = judge(f->w, "rackupgrades", "RackUpgrade", load(UPGRADE));
	assert_true(a.allowed);
	// Halted and Paused still hold the rack; Completed and Aborted free it.
	static const struct {
		const char *phase;
		bool held;
	} cases[] = {{"Canary", true},
	             {"Halted", true},
	             {"Paused", true},
	             {"Completed", false},
	             {"Aborted", false}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		set(json_array_get(ups, 0), "status", json_pack("{s:s}", "phase", cases[i].phase));
		a = judge(f->w, "rackupgrades", "RackUpgrade",
		          upgrade_of("gb300-r07-again", "gb300-r07", NULL));
		assert_int_equal(a.allowed, !cases[i].held);
		if (cases[i].held)
			assert_non_null(strstr(a.msg, cases[i].phase));
	}
	// A pause of the second one (already admitted) is not judged again.
	json_t *old = upgrade_of("gb300-r07-again", "gb300-r07", NULL);
	json_t *obj = upgrade_of("gb300-r07-again", "gb300-r07", NULL);
	set(json_array_get(ups, 0), "status", json_pack("{s:s}", "phase", "Canary"));
	set(obj, "spec.paused", json_true());
	a = judge_as(f->w, "UPDATE", "rackupgrades", "RackUpgrade", obj, old);
	assert_true(a.allowed);
}

static void test_wh_validate_upgrade_one_per_rack_selector(void **state)
{
	struct fixture *f = *state;
	json_t *sel = upgrade_of("training-fleet", "x", "RollingOut");
	json_object_del(json_object_get(sel, "spec"), "rack");
	set(sel, "spec.rackSelector",
	    json_pack("{s:{s:s}}", "matchLabels", "nvl72.io/fleet", "training"));
	set(sel, "metadata.uid", json_string("5d0c2a5e-0d8c-4f5e-9a51-6f3c1f0e2b7a"));
	json_array_append_new(f->cache.lists[WEBHOOK_UPGRADES], json_deep_copy(sel));
	// The selector picks gb300-r07: a single-rack upgrade of it waits.
	struct answer a = judge(f->w, "rackupgrades", "RackUpgrade",
	                        upgrade_of("gb300-r07-again", "gb300-r07", NULL));
	assert_denied(a, 422, "RackUpgrade \"training-fleet\" (phase RollingOut)");
	// The selector upgrade's own per-rack upgrade is not a rival.
	json_t *child = upgrade_of("training-fleet-gb300-r07", "gb300-r07", NULL);
	set(child, "metadata.ownerReferences",
	    json_pack("[{s:s, s:s, s:s, s:s}]", "apiVersion", "nvl72.io/v1alpha1", "kind",
	              "RackUpgrade", "name", "training-fleet", "uid",
	              "5d0c2a5e-0d8c-4f5e-9a51-6f3c1f0e2b7a"));
	a = judge(f->w, "rackupgrades", "RackUpgrade", child);
	assert_true(a.allowed);
	// A second selector upgrade over the same rack names it in its own field.
	json_t *sel2 = json_deep_copy(sel);
	set(sel2, "metadata.name", json_string("training-fleet-2"));
	json_object_del(json_object_get(sel2, "metadata"), "uid");
	json_object_del(sel2, "status");
	a = judge(f->w, "rackupgrades", "RackUpgrade", sel2);
	assert_denied(a, 422,
	              "spec.rackSelector: rack \"gb300-r07\" already has an upgrade in flight: "
	              "RackUpgrade \"training-fleet\"");
	// A rack whose labels the selector does not match is free.
	json_t *r08 = rack_r08();
	set(r08, "metadata.labels", json_pack("{s:s}", "nvl72.io/fleet", "inference"));
	json_array_append_new(f->cache.lists[WEBHOOK_RACKS], r08);
	a = judge(f->w, "rackupgrades", "RackUpgrade",
	          upgrade_of("gb300-r08-r580-173", "gb300-r08", NULL));
	assert_true(a.allowed);
	json_decref(sel);
}

/* The decision itself, on objects alone. */
static void test_wh_upgrade_in_flight_on(void **state)
{
	(void)state;
	json_t *rack = load(RACK);
	json_t *mine = upgrade_of("mine", "gb300-r07", NULL);
	json_t *other = upgrade_of("other", "gb300-r08", "Canary");
	json_t *done = upgrade_of("done", "gb300-r07", "Completed");
	json_t *list = json_pack("[O, O, O]", mine, other, done);
	assert_null(wh_upgrade_in_flight_on(mine, rack, list));
	json_t *busy = upgrade_of("busy", "gb300-r07", "Scheduled");
	json_array_append(list, busy);
	assert_ptr_equal(wh_upgrade_in_flight_on(mine, rack, list), busy);
	// Seen from busy, mine (no status yet: Proposed) is the one in flight.
	assert_ptr_equal(wh_upgrade_in_flight_on(busy, rack, list), mine);
	json_decref(busy);
	json_decref(list);
	json_decref(done);
	json_decref(other);
	json_decref(mine);
	json_decref(rack);
}

/* The cache lags a creation a moment ago; the live list does not. */
static json_t *live_upgrades;

static json_t *fake_list_live(void *arg, enum webhook_kind kind)
{
	(void)arg;
	return kind == WEBHOOK_UPGRADES ? json_incref(live_upgrades) : NULL;
}

static void test_wh_validate_upgrade_one_per_rack_live(void **state)
{
	struct fixture *f = *state;
	static const struct webhook_cache_ops live_ops = {.list = fake_list,
	                                                  .list_live = fake_list_live};
	struct webhook_config cfg = {.cache = &live_ops, .cache_arg = &f->cache};
	struct webhook *w = NULL;
	assert_int_equal(webhook_new(&cfg, &w), NV_OK);
	live_upgrades = json_pack("[o]", load(UPGRADE));
	struct answer a = judge(w, "rackupgrades", "RackUpgrade",
	                        upgrade_of("gb300-r07-again", "gb300-r07", NULL));
	assert_denied(a, 422, "RackUpgrade \"gb300-r07-r580-173\" (phase Proposed)");
	json_decref(live_upgrades);
	// No live list: the cache, which must have synced.
	live_upgrades = NULL;
	f->cache.unsynced[WEBHOOK_UPGRADES] = true;
	a = judge(w, "rackupgrades", "RackUpgrade",
	          upgrade_of("gb300-r07-again", "gb300-r07", NULL));
	assert_denied(a, 503, "the operator's cache of RackUpgrades has not synced yet");
	webhook_free(w);
}

/* ---- updates and what is not ours ------------------------------------------ */

static void test_wh_validate_update_unchanged_spec_passes(void **state)
{
	struct fixture *f = *state;
	// Even with every matrix gone, a label or finalizer change passes.
	json_decref(f->cache.lists[WEBHOOK_MATRICES]);
	f->cache.lists[WEBHOOK_MATRICES] = json_array();
	json_t *old = load(RACK);
	json_t *obj = load(RACK);
	set(obj, "metadata.finalizers", json_pack("[s]", "nvl72.io/rack"));
	struct answer a = judge_as(f->w, "UPDATE", "racks", "Rack", obj, old);
	assert_true(a.allowed);
	// A paused upgrade does not ask the matrix again...
	old = load(UPGRADE);
	obj = load(UPGRADE);
	set(obj, "spec.paused", json_true());
	a = judge_as(f->w, "UPDATE", "rackupgrades", "RackUpgrade", obj, old);
	assert_true(a.allowed);
	// ...nor the rack, even when it is gone and the caches have not synced.
	json_decref(f->cache.lists[WEBHOOK_RACKS]);
	f->cache.lists[WEBHOOK_RACKS] = json_array();
	f->cache.unsynced[WEBHOOK_PARTITIONS] = true;
	old = load(UPGRADE);
	obj = load(UPGRADE);
	set(obj, "spec.abort", json_true());
	a = judge_as(f->w, "UPDATE", "rackupgrades", "RackUpgrade", obj, old);
	assert_true(a.allowed);
	f->cache.unsynced[WEBHOOK_PARTITIONS] = false;
	// ...but a changed rack spec does.
	old = load(RACK);
	obj = load(RACK);
	set(obj, "spec.chassisSerial", json_string("1821124000099"));
	a = judge_as(f->w, "UPDATE", "racks", "Rack", obj, old);
	assert_denied(a, 422, "does not exist");
	// An object being deleted always passes.
	old = load(RACK);
	obj = load(RACK);
	set(obj, "spec.chassisSerial", json_string("1821124000099"));
	set(obj, "metadata.deletionTimestamp", json_string("2026-11-29T10:00:00Z"));
	a = judge_as(f->w, "UPDATE", "racks", "Rack", obj, old);
	assert_true(a.allowed);
}

/* The fixture rack moved by hand from stack `from` (its trays on `runs`;
 * NULL: not observed) to `to`; judged as an UPDATE. */
static struct answer judge_stack_move(struct fixture *f, const char *from, const char *runs,
                                      const char *to)
{
	json_t *old = load(RACK);
	json_t *obj = load(RACK);
	set(old, "spec.matrix.stack", json_string(from));
	set(obj, "spec.matrix.stack", json_string(to));
	if (runs != NULL) {
		set(old, "status.stack", json_string(runs));
		set(obj, "status.stack", json_string(runs));
	}
	return judge_as(f->w, "UPDATE", "racks", "Rack", obj, old);
}

/* The fixture's upgrade of gb300-r07 to gb300-r580-173, Completed at t. */
static json_t *completed_upgrade(const char *name, const char *stack, const char *t)
{
	json_t *u = load(UPGRADE);
	set(u, "metadata.name", json_string(name));
	set(u, "spec.target.stack", json_string(stack));
	json_object_set_new(u, "status",
	                    json_pack("{s:s, s:s}", "phase", "Completed", "completionTime", t));
	return u;
}

/* A Rack's stack changed outside a RackUpgrade is allowed with a warning
 * naming both stacks and what the trays run; a change that records what
 * the rack runs (its status.stack, or the target of its latest Completed
 * upgrade, as the operator writes it) is quiet, and so is any other
 * change of the spec. */
static void test_wh_validate_rack_stack_change_warns(void **state)
{
	struct fixture *f = *state;
	json_t *ups = f->cache.lists[WEBHOOK_UPGRADES];
	json_array_clear(ups);
	struct answer a = judge_stack_move(f, "gb300-r580-159", "gb300-r580-159", "gb300-r580-95");
	assert_true(a.allowed);
	assert_int_equal(a.nwarn, 1);
	assert_string_equal(a.warn,
	                    "Rack \"gb300-r07\": spec.matrix.stack changes from gb300-r580-159 to "
	                    "gb300-r580-95 outside a RackUpgrade; trays already running "
	                    "gb300-r580-159 are not moved by this (a RackUpgrade moves them)");
	// Trays not observed or mixed: the old spec names what they run.
	a = judge_stack_move(f, "gb300-r580-159", "mixed", "gb300-r580-95");
	assert_true(a.allowed);
	assert_non_null(strstr(a.warn, "trays already running gb300-r580-159 are not moved"));
	a = judge_stack_move(f, "gb300-r580-159", NULL, "gb300-r580-95");
	assert_int_equal(a.nwarn, 1);
	// Catching the spec up with what every tray runs is quiet.
	a = judge_stack_move(f, "gb300-r580-95", "gb300-r580-159", "gb300-r580-159");
	assert_true(a.allowed);
	assert_int_equal(a.nwarn, 0);
	// The target of the rack's latest Completed upgrade is quiet, before
	// the Rack controller has seen the trays on it...
	json_array_append_new(ups,
	                      completed_upgrade("u1", "gb300-r580-159", "2026-11-01T10:00:00Z"));
	json_array_append_new(ups,
	                      completed_upgrade("u2", "gb300-r580-173", "2026-11-02T10:00:00Z"));
	a = judge_stack_move(f, "gb300-r580-159", "gb300-r580-159", "gb300-r580-173");
	assert_int_equal(a.nwarn, 0);
	// ...an earlier upgrade's target is not.
	a = judge_stack_move(f, "gb300-r580-173", "gb300-r580-173", "gb300-r580-159");
	assert_int_equal(a.nwarn, 1);
	// Without an upgrade cache the warning still comes, never a denial.
	f->cache.unsynced[WEBHOOK_UPGRADES] = true;
	a = judge_stack_move(f, "gb300-r580-159", "gb300-r580-159", "gb300-r580-173");
	assert_true(a.allowed);
	assert_int_equal(a.nwarn, 1);
	f->cache.unsynced[WEBHOOK_UPGRADES] = false;
	// A create, and an update that keeps the stack, carry none.
	a = judge(f->w, "racks", "Rack", load(RACK));
	assert_int_equal(a.nwarn, 0);
	json_t *old = load(RACK);
	json_t *obj = load(RACK);
	set(obj, "spec.policy.cordonWhenDegraded", json_false());
	a = judge_as(f->w, "UPDATE", "racks", "Rack", obj, old);
	assert_true(a.allowed);
	assert_int_equal(a.nwarn, 0);
	// A denied move says why it is denied, and no more.
	a = judge_stack_move(f, "gb300-r580-159", "gb300-r580-159", "gb300-r590-1");
	assert_denied(a, 422, "spec.matrix.stack");
	assert_int_equal(a.nwarn, 0);
}

/* The rule itself: the status clause, and the latest Completed upgrade's
 * matrix and stack. */
static void test_wh_rack_stack_recorded(void **state)
{
	(void)state;
	json_t *old = load(RACK), *obj = load(RACK), *ups = json_array();
	set(obj, "spec.matrix.stack", json_string("gb300-r580-173"));
	assert_false(wh_rack_stack_recorded(obj, old, NULL));
	set(old, "status.stack", json_string("gb300-r580-173"));
	assert_true(wh_rack_stack_recorded(obj, old, NULL));
	set(old, "status.stack", json_string("gb300-r580-159"));
	json_array_append_new(ups,
	                      completed_upgrade("u1", "gb300-r580-173", "2026-11-01T10:00:00Z"));
	assert_true(wh_rack_stack_recorded(obj, old, ups));
	// Another matrix of the same stack name is not that target.
	set(obj, "spec.matrix.name", json_string("gb300-2027.01"));
	assert_false(wh_rack_stack_recorded(obj, old, ups));
	// Nor is a target of another rack.
	set(obj, "spec.matrix.name", json_string("gb300-2026.10"));
	set(json_array_get(ups, 0), "spec.rack", json_string("gb300-r08"));
	assert_false(wh_rack_stack_recorded(obj, old, ups));
	json_decref(ups);
	json_decref(obj);
	json_decref(old);
}

static void test_wh_validate_not_ours_passes(void **state)
{
	struct fixture *f = *state;
	struct answer a = judge(f->w, "computedomains", "ComputeDomain", json_object());
	assert_true(a.allowed);
	a = judge_as(f->w, "DELETE", "racks", "Rack", json_object(), NULL);
	assert_true(a.allowed);
}

/* ---- canned reviews ---------------------------------------------------------- */

/* The reviews in tests/data/webhook, as an apiserver sends them. */
static void test_wh_validate_canned_reviews(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *file;
		enum webhook_mode mode;
		bool allowed;
		const char *msg;
	} cases[] = {
	        {"review-rack-create.json", WEBHOOK_VALIDATE, true, ""},
	        {"review-rack-finalizer-update.json", WEBHOOK_VALIDATE, true, ""},
	        {"review-partition-overlap.json", WEBHOOK_VALIDATE, false,
	         "RackPartition \"gb300-r07-c\": spec.trays: tray 9 of rack \"gb300-r07\" is "
	         "already in partition \"gb300-r07-a\""},
	        {"review-upgrade-create.json", WEBHOOK_VALIDATE, true, ""},
	        {"review-upgrade-stack-missing.json", WEBHOOK_VALIDATE, false,
	         "spec.target.stack: stack \"gb300-r590-1\" is not in CompatibilityMatrix"},
	        {"review-matrix-create.json", WEBHOOK_VALIDATE, true, ""},
	        {"review-approval-forged.json", WEBHOOK_MUTATE, true, ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[256];
		snprintf(path, sizeof(path), "tests/data/webhook/%s", cases[i].file);
		json_t *r = load(path);
		char *text = json_dumps(r, JSON_COMPACT);
		struct buf out;
		int http = 0;
		buf_init(&out, 1 << 20);
		assert_int_equal(webhook_review(f->w, cases[i].mode, "application/json", text,
		                                strlen(text), &http, &out),
		                 NV_OK);
		json_t *resp = json_loads(buf_str(&out), 0, NULL);
		assert_int_equal(http, 200);
		assert_string_equal(jx_str_or(resp, "response.uid", ""),
		                    jx_str_or(r, "request.uid", "-"));
		assert_int_equal(json_is_true(jx_path(resp, "response.allowed")), cases[i].allowed);
		assert_non_null(
		        strstr(jx_str_or(resp, "response.status.message", ""), cases[i].msg));
		if (cases[i].mode == WEBHOOK_MUTATE)
			assert_string_equal(jx_str_or(resp, "response.patchType", ""), "JSONPatch");
		json_decref(resp);
		buf_clear(&out);
		free(text);
		json_decref(r);
	}
}

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_wh_validate_rack_allowed),
	        T(test_wh_validate_rack_node_in_two_racks),
	        T(test_wh_validate_rack_control_plane_node),
	        T(test_wh_validate_rack_matrix_missing),
	        T(test_wh_validate_rack_stack_and_platform),
	        T(test_wh_validate_rack_schema_error),
	        T(test_wh_validate_rack_cache_not_synced),
	        T(test_wh_validate_partition_overlap),
	        T(test_wh_validate_partition_rack_missing),
	        T(test_wh_validate_partition_rack_read_through),
	        T(test_wh_validate_partition_other_rack_same_trays),
	        T(test_wh_validate_partition_many_in_cache),
	        T(test_wh_validate_matrix),
	        T(test_wh_validate_upgrade_allowed),
	        T(test_wh_validate_upgrade_single_hop),
	        T(test_wh_validate_upgrade_needs_window_owner),
	        T(test_wh_validate_upgrade_stack_missing),
	        T(test_wh_validate_upgrade_matrix_missing_or_other_platform),
	        T(test_wh_validate_upgrade_rack_missing),
	        T(test_wh_validate_upgrade_from_observed_stacks),
	        T(test_wh_validate_upgrade_canary),
	        T(test_wh_validate_upgrade_wave_size),
	        T(test_wh_validate_upgrade_cve_not_fixed),
	        T(test_wh_validate_upgrade_selector),
	        T(test_wh_validate_upgrade_one_per_rack),
	        T(test_wh_validate_upgrade_one_per_rack_selector),
	        T(test_wh_validate_upgrade_one_per_rack_live),
	        cmocka_unit_test(test_wh_upgrade_in_flight_on),
	        T(test_wh_validate_update_unchanged_spec_passes),
	        T(test_wh_validate_rack_stack_change_warns),
	        cmocka_unit_test(test_wh_rack_stack_recorded),
	        T(test_wh_validate_not_ours_passes),
	        T(test_wh_validate_canned_reviews),
	        T(test_wh_validate_wrong_types),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
