// SPDX-License-Identifier: Apache-2.0
// Unit tests for the webhook's review handling: decoding AdmissionReview v1
// (and every way a hostile or broken one is refused without a crash), the
// response review, base64, and the UpgradeApproval stamping patch (the
// requesting user and the RackUpgrade's UID and target).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../../../src/webhook/webhook_int.h"
#include "nvl72/json.h"
#include "nvl72/metrics.h"

#define UID "7d1c4a8e-2b1f-4c3e-9a5d-6e0f1b2c3d4e"
#define APPROVAL "tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json"

#define UPGRADE "tests/data/api/rackupgrade-gb300-r07-r580-173.json"
#define UPGRADE_UID "3b1f6a52-0c1d-4e8f-9a7b-1c2d3e4f5a6b"

/* What the RackUpgrade cache holds: unsynced (NULL list), empty, the
 * upgrade the approval names, or that upgrade on its way out. */
enum upgrades_state { UPG_UNSYNCED, UPG_NONE, UPG_PRESENT, UPG_DELETING };
static enum upgrades_state upgrades = UPG_PRESENT;

/* Every cache empty except RackUpgrades, which holds upgrades. */
static json_t *empty_list(void *arg, enum webhook_kind kind)
{
	(void)arg;
	if (kind != WEBHOOK_UPGRADES || upgrades == UPG_NONE)
		return json_array();
	if (upgrades == UPG_UNSYNCED)
		return NULL;
	json_t *u = json_load_file(UPGRADE, 0, NULL);
	assert_non_null(u);
	assert_int_equal(jx_set_str(u, "metadata.uid", UPGRADE_UID), NV_OK);
	if (upgrades == UPG_DELETING)
		assert_int_equal(
		        jx_set_str(u, "metadata.deletionTimestamp", "2026-11-17T22:00:00Z"), NV_OK);
	return json_pack("[o]", u);
}

static const struct webhook_cache_ops empty_ops = {.list = empty_list};

static int setup(void **state)
{
	struct webhook *w = NULL;
	upgrades = UPG_PRESENT;
	struct webhook_config cfg = {.cache = &empty_ops, .review_max = 256 << 10};
	assert_int_equal(webhook_new(&cfg, &w), NV_OK);
	*state = w;
	return 0;
}

static int teardown(void **state)
{
	webhook_free(*state);
	return 0;
}

static json_t *load(const char *path)
{
	json_t *j = json_load_file(path, 0, NULL);
	assert_non_null(j);
	return j;
}

/* An approval review from user "alice"; takes obj. */
static json_t *approval_review(json_t *obj)
{
	return json_pack("{s:s, s:s, s:{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:s, s:s, "
	                 "s:o, s:{s:s, s:s, s:[s, s]}}}",
	                 "apiVersion", "admission.k8s.io/v1", "kind", "AdmissionReview", "request",
	                 "uid", UID, "kind", "group", "nvl72.io", "version", "v1alpha1", "kind",
	                 "UpgradeApproval", "resource", "group", "nvl72.io", "version", "v1alpha1",
	                 "resource", "upgradeapprovals", "operation", "CREATE", "name",
	                 "gb300-r07-r580-173-fabric", "object", obj, "userInfo", "username",
	                 "alice", "uid", "alice-uid", "groups", "fabric-team",
	                 "system:authenticated");
}

struct answer {
	int http;
	json_t *resp; /* the whole body */
	bool allowed;
	int code;
	const char *msg;
};

static struct answer send_text(struct webhook *w, enum webhook_mode mode, const char *ct,
                               const char *text, size_t len)
{
	struct buf out;
	struct answer a = {0};
	buf_init(&out, 1 << 20);
	assert_int_equal(webhook_review(w, mode, ct, text, len, &a.http, &out), NV_OK);
	a.resp = json_loads(buf_str(&out), 0, NULL);
	assert_non_null(a.resp);
	a.allowed = json_is_true(jx_path(a.resp, "response.allowed"));
	a.code = (int)json_integer_value(jx_path(a.resp, "response.status.code"));
	a.msg = jx_str_or(a.resp, "response.status.message", jx_str_or(a.resp, "error", ""));
	buf_clear(&out);
	return a;
}

/* Sends review (reference taken). */
static struct answer send_review(struct webhook *w, enum webhook_mode mode, json_t *review)
{
	char *text = json_dumps(review, JSON_COMPACT);
	struct answer a = send_text(w, mode, "application/json", text, strlen(text));
	free(text);
	json_decref(review);
	return a;
}

static void assert_msg(const struct answer *a, const char *text)
{
	if (strstr(a->msg, text) == NULL)
		fprintf(stderr, "  got: %s\n  wanted: %s\n", a->msg, text);
	assert_non_null(strstr(a->msg, text));
}

/* The JSON patch of an allowed mutating answer, decoded. */
static json_t *patch_of(const struct answer *a)
{
	assert_string_equal(jx_str_or(a->resp, "response.patchType", ""), "JSONPatch");
	char *raw = NULL;
	size_t len = 0;
	assert_int_equal(b64_decode(jx_str_or(a->resp, "response.patch", ""), 1 << 20, &raw, &len),
	                 NV_OK);
	json_t *p = json_loadb(raw, len, 0, NULL);
	free(raw);
	assert_non_null(p);
	return p;
}

/* ---- decoding ------------------------------------------------------------ */

static void test_wh_review_decode_fields(void **state)
{
	(void)state;
	json_t *r = approval_review(load(APPROVAL));
	struct wh_request req;
	bool uid_ok = false;
	char why[256];
	assert_int_equal(wh_review_decode(r, &req, &uid_ok, why, sizeof(why)), NV_OK);
	assert_true(uid_ok);
	assert_string_equal(req.uid, UID);
	assert_string_equal(req.group, "nvl72.io");
	assert_string_equal(req.resource, "upgradeapprovals");
	assert_string_equal(req.kind, "UpgradeApproval");
	assert_string_equal(req.operation, "CREATE");
	assert_string_equal(req.name, "gb300-r07-r580-173-fabric");
	assert_non_null(req.object);
	assert_null(req.old_object);
	assert_non_null(req.user_info);
	json_decref(r);
}

static void test_wh_review_unusable_is_400(void **state)
{
	struct webhook *w = *state;
	static const char *const bodies[] = {
	        "not json",
	        "[1,2,3]",
	        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
	        "{\"apiVersion\":\"admission.k8s.io/"
	        "v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
	        "{\"apiVersion\":\"admission.k8s.io/"
	        "v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}",
	        "{\"apiVersion\":\"admission.k8s.io/"
	        "v1\",\"kind\":\"AdmissionReview\",\"request\":\"x\"}",
	        "{\"apiVersion\":\"admission.k8s.io/"
	        "v1\",\"kind\":\"Pod\",\"request\":{\"uid\":\"a\"}}",
	        "",
	};
	static const char *const why[] = {
	        "",
	        "expected an AdmissionReview object, got an array",
	        "request: missing",
	        "request.uid: missing",
	        "request.uid: expected a string, got an integer",
	        "request: expected an object, got a string",
	        "kind: \"Pod\" is not AdmissionReview",
	        "",
	};
	for (size_t i = 0; i < ARRAY_LEN(bodies); i++) {
		struct answer a = send_text(w, WEBHOOK_VALIDATE, "application/json", bodies[i],
		                            strlen(bodies[i]));
		assert_int_equal(a.http, 400);
		assert_msg(&a, why[i]);
		json_decref(a.resp);
	}
}

static void test_wh_review_old_version_is_refused(void **state)
{
	struct webhook *w = *state;
	json_t *r = approval_review(load(APPROVAL));
	json_object_set_new(r, "apiVersion", json_string("admission.k8s.io/v1beta1"));
	struct answer a = send_review(w, WEBHOOK_MUTATE, r);
	assert_int_equal(a.http, 400);
	assert_msg(&a, "apiVersion: \"admission.k8s.io/v1beta1\" is not admission.k8s.io/v1");
	json_decref(a.resp);
}

static void test_wh_review_bad_fields_are_denied_by_uid(void **state)
{
	struct webhook *w = *state;
	static const struct {
		const char *path;
		json_t *(*value)(void);
		const char *why;
	} cases[] = {
	        {"request.object", json_true, "request.object: expected an object, got a boolean"},
	        {"request.operation", json_object, "request.operation: expected a string"},
	        {"request.kind", json_null, "request.kind: missing"},
	        {"request.dryRun", json_object, "request.dryRun: expected a boolean"},
	        {"request.userInfo", json_array, "request.userInfo: expected an object"},
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		json_t *r = approval_review(load(APPROVAL));
		assert_int_equal(jx_set_take(r, cases[i].path, cases[i].value()), NV_OK);
		struct answer a = send_review(w, WEBHOOK_VALIDATE, r);
		assert_int_equal(a.http, 200);
		assert_string_equal(jx_str_or(a.resp, "response.uid", ""), UID);
		assert_false(a.allowed);
		assert_int_equal(a.code, 400);
		assert_msg(&a, cases[i].why);
		json_decref(a.resp);
	}
	json_t *r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_str(r, "request.operation", "PATCH"), NV_OK);
	struct answer a = send_review(w, WEBHOOK_VALIDATE, r);
	assert_msg(&a, "request.operation: \"PATCH\" is not CREATE, UPDATE, DELETE or CONNECT");
	json_decref(a.resp);
	// An UPDATE without its old object.
	r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_str(r, "request.operation", "UPDATE"), NV_OK);
	a = send_review(w, WEBHOOK_VALIDATE, r);
	assert_msg(&a, "request.oldObject: missing");
	json_decref(a.resp);
}

static void test_wh_review_hostile_sizes(void **state)
{
	struct webhook *w = *state;
	// Over the review cap.
	size_t big = (256 << 10) + 1;
	char *text = malloc(big + 1);
	memset(text, ' ', big);
	text[big] = '\0';
	struct answer a = send_text(w, WEBHOOK_VALIDATE, "application/json", text, big);
	assert_int_equal(a.http, 413);
	json_decref(a.resp);
	free(text);
	// Nested past the depth bound.
	char deep[512];
	memset(deep, '[', 200);
	memset(deep + 200, ']', 200);
	deep[400] = '\0';
	a = send_text(w, WEBHOOK_VALIDATE, "application/json", deep, 400);
	assert_true(a.http == 413 || a.http == 400);
	json_decref(a.resp);
	// A very long uid.
	json_t *r = approval_review(load(APPROVAL));
	char uid[1024];
	memset(uid, 'u', sizeof(uid) - 1);
	uid[sizeof(uid) - 1] = '\0';
	assert_int_equal(jx_set_str(r, "request.uid", uid), NV_OK);
	a = send_review(w, WEBHOOK_VALIDATE, r);
	assert_int_equal(a.http, 400);
	assert_msg(&a, "request.uid: longer than 128 bytes");
	json_decref(a.resp);
	// A 10,000-entry tray list in a partition is refused by the parser.
	json_t *p = load("tests/data/api/rackpartition-gb300-r07-a.json");
	json_t *trays = json_array();
	for (int i = 0; i < 10000; i++)
		json_array_append_new(trays, json_integer(i % 18 + 1));
	assert_int_equal(jx_set_take(p, "spec.trays", trays), NV_OK);
	r = approval_review(p);
	assert_int_equal(jx_set_str(r, "request.resource.resource", "rackpartitions"), NV_OK);
	assert_int_equal(jx_set_str(r, "request.kind.kind", "RackPartition"), NV_OK);
	a = send_review(w, WEBHOOK_VALIDATE, r);
	assert_false(a.allowed);
	assert_int_equal(a.code, 422);
	assert_msg(&a, "RackPartition \"gb300-r07-r580-173-fabric\": spec.trays");
	json_decref(a.resp);
}

static void test_wh_review_invalid_utf8(void **state)
{
	struct webhook *w = *state;
	// The parser's error quotes the bad bytes; the answer is still JSON.
	static const char body[] = "{\"apiVersion\": \"\xff\xfe\x80\"}";
	struct answer a =
	        send_text(w, WEBHOOK_VALIDATE, "application/json", body, sizeof(body) - 1);
	assert_int_equal(a.http, 400);
	json_decref(a.resp);
	static const char junk[] = "\xc3\x28 {[\xe2\x82";
	a = send_text(w, WEBHOOK_MUTATE, "", junk, sizeof(junk) - 1);
	assert_int_equal(a.http, 400);
	json_decref(a.resp);
}

static void test_wh_review_content_type(void **state)
{
	struct webhook *w = *state;
	struct answer a = send_text(w, WEBHOOK_VALIDATE, "text/plain", "{}", 2);
	assert_int_equal(a.http, 415);
	json_decref(a.resp);
	a = send_text(w, WEBHOOK_VALIDATE, "application/jsonx", "{}", 2);
	assert_int_equal(a.http, 415);
	json_decref(a.resp);
	a = send_text(w, WEBHOOK_VALIDATE, "application/json; charset=utf-8", "{}", 2);
	assert_int_equal(a.http, 400);
	json_decref(a.resp);
}

/* ---- the response -------------------------------------------------------- */

static void test_wh_response_write_denial(void **state)
{
	(void)state;
	struct wh_verdict v;
	struct buf out;
	wh_verdict_init(&v);
	buf_init(&out, 4096);
	wh_deny(&v, 422, "Invalid", "Rack \"%s\": spec.platform: bad", "r1");
	assert_int_equal(wh_response_write("abc", &v, &out), NV_OK);
	json_t *j = json_loads(buf_str(&out), 0, NULL);
	assert_string_equal(jx_str_or(j, "apiVersion", ""), "admission.k8s.io/v1");
	assert_string_equal(jx_str_or(j, "kind", ""), "AdmissionReview");
	assert_string_equal(jx_str_or(j, "response.uid", ""), "abc");
	assert_true(json_is_false(jx_path(j, "response.allowed")));
	assert_int_equal(json_integer_value(jx_path(j, "response.status.code")), 422);
	assert_string_equal(jx_str_or(j, "response.status.reason", ""), "Invalid");
	assert_string_equal(jx_str_or(j, "response.status.message", ""),
	                    "Rack \"r1\": spec.platform: bad");
	assert_null(jx_path(j, "response.patch"));
	json_decref(j);
	buf_clear(&out);
	wh_verdict_clear(&v);
}

/* Warnings go out as response.warnings, allowed or denied, each cut at
 * the cap and at most WH_WARNINGS_MAX of them; none: no member. */
static void test_wh_response_write_warnings(void **state)
{
	(void)state;
	struct wh_verdict v;
	struct buf out;
	char longer[600];
	wh_verdict_init(&v);
	buf_init(&out, 8192);
	assert_int_equal(wh_response_write("abc", &v, &out), NV_OK);
	json_t *j = json_loads(buf_str(&out), 0, NULL);
	assert_null(jx_path(j, "response.warnings"));
	json_decref(j);
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	wh_warn(&v, "Rack \"%s\": spec.matrix.stack changes", "r1");
	wh_warn(&v, "%s", longer);
	for (int i = 0; i < WH_WARNINGS_MAX; i++)
		wh_warn(&v, "extra %d", i);
	buf_reset(&out);
	assert_int_equal(wh_response_write("abc", &v, &out), NV_OK);
	j = json_loads(buf_str(&out), 0, NULL);
	const json_t *w = jx_path(j, "response.warnings");
	assert_true(json_is_true(jx_path(j, "response.allowed")));
	assert_int_equal(json_array_size(w), WH_WARNINGS_MAX);
	assert_string_equal(json_string_value(json_array_get(w, 0)),
	                    "Rack \"r1\": spec.matrix.stack changes");
	assert_int_equal(strlen(json_string_value(json_array_get(w, 1))), WH_WARNING_MAX - 1);
	assert_string_equal(json_string_value(json_array_get(w, 2)), "extra 0");
	json_decref(j);
	// A denial keeps them beside its status.
	wh_deny(&v, 422, "Invalid", "Rack \"r1\": spec.platform: bad");
	buf_reset(&out);
	assert_int_equal(wh_response_write("abc", &v, &out), NV_OK);
	j = json_loads(buf_str(&out), 0, NULL);
	assert_true(json_is_false(jx_path(j, "response.allowed")));
	assert_int_equal(json_array_size(jx_path(j, "response.warnings")), WH_WARNINGS_MAX);
	json_decref(j);
	buf_clear(&out);
	wh_verdict_clear(&v);
}

/* ---- stamping ------------------------------------------------------------ */

/* The patch the webhook answers for user alice on the fixture upgrade. */
static json_t *stamp_for_alice(const char *uid, json_t *groups)
{
	return json_pack("[{s:s, s:s, s:{s:s, s:s, s:o}}, {s:s, s:s, s:{s:s, s:{s:s, s:s}}}]", "op",
	                 "add", "path", "/spec/approvedBy", "value", "username", "alice", "uid",
	                 uid, "groups", groups, "op", "add", "path", "/spec/upgradeRef", "value",
	                 "uid", UPGRADE_UID, "target", "matrix", "gb300-2026.10", "stack",
	                 "gb300-r580-173");
}

static void test_wh_mutate_stamps_requesting_user(void **state)
{
	struct webhook *w = *state;
	json_t *obj = load(APPROVAL);
	// The client claims to be someone else, approving another upgrade.
	assert_int_equal(jx_set_take(obj, "spec.approvedBy",
	                             json_pack("{s:s, s:s, s:[s]}", "username", "fabric-lead",
	                                       "uid", "forged", "groups", "fabric-owners")),
	                 NV_OK);
	assert_int_equal(jx_set_take(obj, "spec.upgradeRef",
	                             json_pack("{s:s, s:{s:s, s:s}}", "uid", "an-older-one",
	                                       "target", "matrix", "m", "stack", "s")),
	                 NV_OK);
	struct answer a = send_review(w, WEBHOOK_MUTATE, approval_review(obj));
	assert_int_equal(a.http, 200);
	assert_true(a.allowed);
	json_t *p = patch_of(&a);
	json_t *want = stamp_for_alice("alice-uid",
	                               json_pack("[s, s]", "fabric-team", "system:authenticated"));
	assert_true(json_equal(p, want));
	json_decref(want);
	json_decref(p);
	json_decref(a.resp);
}

static void test_wh_mutate_without_groups_stamps_empty(void **state)
{
	struct webhook *w = *state;
	json_t *r = approval_review(load(APPROVAL));
	json_object_del(jx_path(r, "request.userInfo"), "groups");
	json_object_del(jx_path(r, "request.userInfo"), "uid");
	struct answer a = send_review(w, WEBHOOK_MUTATE, r);
	assert_true(a.allowed);
	json_t *p = patch_of(&a);
	json_t *want = stamp_for_alice("", json_array());
	assert_true(json_equal(p, want));
	json_decref(want);
	json_decref(p);
	json_decref(a.resp);
}

/* An approval is bound to an upgrade that exists now; without one (or
 * without a spec naming it) there is nothing to bind to. */
static void test_wh_mutate_refuses_without_upgrade(void **state)
{
	struct webhook *w = *state;
	json_t *obj = load(APPROVAL);
	json_object_del(obj, "spec");
	struct answer a = send_review(w, WEBHOOK_MUTATE, approval_review(obj));
	assert_false(a.allowed);
	assert_msg(&a, "UpgradeApproval \"gb300-r07-r580-173-fabric\": spec: expected an object, "
	               "got nothing");
	json_decref(a.resp);

	obj = load(APPROVAL);
	assert_int_equal(jx_set_take(obj, "spec.upgrade", json_integer(7)), NV_OK);
	a = send_review(w, WEBHOOK_MUTATE, approval_review(obj));
	assert_false(a.allowed);
	assert_msg(&a, "spec.upgrade: must name a RackUpgrade");
	json_decref(a.resp);

	upgrades = UPG_NONE;
	a = send_review(w, WEBHOOK_MUTATE, approval_review(load(APPROVAL)));
	assert_false(a.allowed);
	assert_int_equal(a.code, 422);
	assert_msg(&a, "spec.upgrade: RackUpgrade \"gb300-r07-r580-173\" does not exist");
	json_decref(a.resp);

	upgrades = UPG_DELETING;
	a = send_review(w, WEBHOOK_MUTATE, approval_review(load(APPROVAL)));
	assert_false(a.allowed);
	assert_msg(&a, "RackUpgrade \"gb300-r07-r580-173\" is being deleted");
	json_decref(a.resp);

	upgrades = UPG_UNSYNCED;
	a = send_review(w, WEBHOOK_MUTATE, approval_review(load(APPROVAL)));
	assert_false(a.allowed);
	assert_int_equal(a.code, 503);
	assert_msg(&a, "the operator's cache of RackUpgrades has not synced yet");
	json_decref(a.resp);
}

static void test_wh_mutate_refuses_bad_user_info(void **state)
{
	struct webhook *w = *state;
	json_t *r = approval_review(load(APPROVAL));
	json_object_del(json_object_get(r, "request"), "userInfo");
	struct answer a = send_review(w, WEBHOOK_MUTATE, r);
	assert_false(a.allowed);
	assert_int_equal(a.code, 400);
	assert_msg(&a, "request.userInfo: missing: the approval cannot be stamped");
	json_decref(a.resp);

	r = approval_review(load(APPROVAL));
	json_t *groups = json_array();
	for (int i = 0; i < 10000; i++)
		json_array_append_new(groups, json_string("g"));
	assert_int_equal(jx_set_take(r, "request.userInfo.groups", groups), NV_OK);
	a = send_review(w, WEBHOOK_MUTATE, r);
	assert_false(a.allowed);
	assert_msg(&a, "request.userInfo.groups: must be a list of at most 64 groups");
	json_decref(a.resp);

	r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_take(r, "request.userInfo.groups", json_pack("[s, i]", "a", 3)),
	                 NV_OK);
	a = send_review(w, WEBHOOK_MUTATE, r);
	assert_msg(&a, "request.userInfo.groups[1]: must be a string");
	json_decref(a.resp);

	r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_take(r, "request.userInfo.username", json_integer(5)), NV_OK);
	a = send_review(w, WEBHOOK_MUTATE, r);
	assert_msg(&a, "request.userInfo.username: must be a non-empty string");
	json_decref(a.resp);

	r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_take(jx_path(r, "request.object"), "spec", json_string("x")),
	                 NV_OK);
	a = send_review(w, WEBHOOK_MUTATE, r);
	assert_msg(&a, "spec: expected an object, got a string");
	json_decref(a.resp);
}

static void test_wh_mutate_leaves_others_alone(void **state)
{
	struct webhook *w = *state;
	json_t *r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_str(r, "request.operation", "UPDATE"), NV_OK);
	assert_int_equal(jx_set_take(json_object_get(r, "request"), "oldObject", load(APPROVAL)),
	                 NV_OK);
	struct answer a = send_review(w, WEBHOOK_MUTATE, r);
	assert_true(a.allowed);
	assert_null(jx_path(a.resp, "response.patch"));
	json_decref(a.resp);
	r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_str(r, "request.resource.resource", "racks"), NV_OK);
	a = send_review(w, WEBHOOK_MUTATE, r);
	assert_true(a.allowed);
	assert_null(jx_path(a.resp, "response.patch"));
	json_decref(a.resp);
}

static void test_wh_review_counts_decisions(void **state)
{
	(void)state;
	struct metrics_registry *reg = metrics_registry_new();
	struct webhook *w = NULL;
	struct webhook_config cfg = {.cache = &empty_ops, .metrics = reg};
	upgrades = UPG_PRESENT;
	assert_int_equal(webhook_new(&cfg, &w), NV_OK);
	struct answer a = send_review(w, WEBHOOK_MUTATE, approval_review(load(APPROVAL)));
	json_decref(a.resp);
	json_t *r = approval_review(load(APPROVAL));
	json_object_del(json_object_get(r, "request"), "userInfo");
	a = send_review(w, WEBHOOK_MUTATE, r);
	json_decref(a.resp);
	a = send_text(w, WEBHOOK_VALIDATE, "application/json", "nope", 4);
	json_decref(a.resp);
	r = approval_review(load(APPROVAL));
	assert_int_equal(jx_set_str(r, "request.resource.resource", "a-hostile-made-up-name"),
	                 NV_OK);
	a = send_review(w, WEBHOOK_VALIDATE, r);
	json_decref(a.resp);
	struct metrics_family *f = metrics_registry_find(reg, "nvl72_webhook_admissions_total");
	assert_non_null(f);
	double v = 0;
	const char *allowed[] = {"mutate", "upgradeapprovals", "allowed"};
	const char *denied[] = {"mutate", "upgradeapprovals", "denied"};
	const char *error[] = {"validate", "other", "error"};
	const char *other[] = {"validate", "other", "allowed"};
	assert_int_equal(metrics_family_get(f, allowed, &v), NV_OK);
	assert_true(v == 1.0);
	assert_int_equal(metrics_family_get(f, denied, &v), NV_OK);
	assert_true(v == 1.0);
	assert_int_equal(metrics_family_get(f, error, &v), NV_OK);
	assert_true(v == 1.0);
	assert_int_equal(metrics_family_get(f, other, &v), NV_OK);
	assert_true(v == 1.0);
	// A second webhook on the same registry shares the family.
	struct webhook *w2 = NULL;
	assert_int_equal(webhook_new(&cfg, &w2), NV_OK);
	webhook_free(w2);
	webhook_free(w);
	metrics_registry_free(reg);
}

int main(void)
{
	log_set_level(LOG_LVL_ERROR);
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_wh_review_decode_fields),
	        T(test_wh_review_unusable_is_400),
	        T(test_wh_review_old_version_is_refused),
	        T(test_wh_review_bad_fields_are_denied_by_uid),
	        T(test_wh_review_hostile_sizes),
	        T(test_wh_review_invalid_utf8),
	        T(test_wh_review_content_type),
	        T(test_wh_response_write_denial),
	        T(test_wh_response_write_warnings),
	        T(test_wh_mutate_stamps_requesting_user),
	        T(test_wh_mutate_without_groups_stamps_empty),
	        T(test_wh_mutate_refuses_without_upgrade),
	        T(test_wh_mutate_refuses_bad_user_info),
	        T(test_wh_mutate_leaves_others_alone),
	        cmocka_unit_test(test_wh_review_counts_decisions),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
