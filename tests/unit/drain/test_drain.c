// SPDX-License-Identifier: Apache-2.0
// Unit tests for the drain's rules on plain JSON pods: which pods stay
// (DaemonSet, mirror, finished), which are already going, the checkpoint
// handshake and its deadline, gangs, and the cordon owned by a drain.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../../src/drain/drain_int.h"
#include "nvl72/json.h"
#include "nvl72/operator_rack.h"
#include "nvl72/timeutil.h"

#define NOW 1795000000000LL /* 2026-11-18T08:26:40Z */

static const struct drain_policy CKPT = {
        .mode = API_DRAIN_CHECKPOINT, .checkpoint_deadline_ms = 300000, .owner = "rackupgrade/u1"};
static const struct drain_policy EVICT = {.mode = API_DRAIN_EVICT, .owner = "rackupgrade/u1"};

static json_t *pod(const char *name)
{
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:{},s:{}},s:{s:s},s:{s:s}}", "apiVersion",
	                 "v1", "kind", "Pod", "metadata", "name", name, "namespace", "team-a",
	                 "uid", "uid-x", "resourceVersion", "7", "labels", "annotations", "spec",
	                 "nodeName", "r07-t01", "status", "phase", "Running");
}

static void annotate(json_t *p, const char *key, const char *value)
{
	json_object_set_new(jx_path(p, "metadata.annotations"), key, json_string(value));
}

static void label(json_t *p, const char *key, const char *value)
{
	json_object_set_new(jx_path(p, "metadata.labels"), key, json_string(value));
}

static enum drain_act act_of(const json_t *p, const struct drain_policy *pol, int64_t now)
{
	struct drain_pod d;
	drain_pod_classify(p, pol, now, &d);
	return d.act;
}

static void test_drain_pod_classify_daemonset_stays(void **state)
{
	(void)state;
	json_t *p = pod("ds-x");
	jx_set_take(p, "metadata.ownerReferences",
	            json_pack("[{s:s,s:s,s:s,s:s,s:b}]", "apiVersion", "apps/v1", "kind",
	                      "DaemonSet", "name", "agent", "uid", "u", "controller", 1));
	struct drain_pod d;
	drain_pod_classify(p, &EVICT, NOW, &d);
	assert_int_equal(d.act, DRAIN_ACT_SKIP);
	assert_string_equal(d.why, "owned by a DaemonSet");
	assert_string_equal(d.key, "team-a/ds-x");
	assert_int_equal(act_of(p, &CKPT, NOW), DRAIN_ACT_SKIP);
	json_decref(p);
	/* Owned by something else: it goes. */
	p = pod("rs-x");
	jx_set_take(p, "metadata.ownerReferences",
	            json_pack("[{s:s,s:s}]", "kind", "ReplicaSet", "name", "web"));
	assert_int_equal(act_of(p, &EVICT, NOW), DRAIN_ACT_EVICT);
	json_decref(p);
}

static void test_drain_pod_classify_mirror_stays(void **state)
{
	(void)state;
	json_t *p = pod("kube-proxy-r07-t01");
	annotate(p, DRAIN_ANN_MIRROR, "3f2a");
	assert_int_equal(act_of(p, &EVICT, NOW), DRAIN_ACT_SKIP);
	assert_int_equal(act_of(p, &CKPT, NOW), DRAIN_ACT_SKIP);
	json_decref(p);
}

static void test_drain_pod_classify_terminating_and_finished(void **state)
{
	(void)state;
	json_t *p = pod("going");
	jx_set_str(p, "metadata.deletionTimestamp", "2026-11-18T08:20:00Z");
	assert_int_equal(act_of(p, &EVICT, NOW), DRAIN_ACT_TERMINATING);
	assert_int_equal(act_of(p, &CKPT, NOW), DRAIN_ACT_TERMINATING);
	json_decref(p);
	p = pod("done");
	jx_set_str(p, "status.phase", "Succeeded");
	assert_int_equal(act_of(p, &EVICT, NOW), DRAIN_ACT_SKIP);
	jx_set_str(p, "status.phase", "Failed");
	assert_int_equal(act_of(p, &CKPT, NOW), DRAIN_ACT_SKIP);
	json_decref(p);
}

static void test_drain_pod_classify_evict_mode_at_once(void **state)
{
	(void)state;
	json_t *p = pod("web-1");
	struct drain_pod d;
	drain_pod_classify(p, &EVICT, NOW, &d);
	assert_int_equal(d.act, DRAIN_ACT_EVICT);
	assert_int_equal(d.deadline_ms, 0);
	json_decref(p);
}

static void test_drain_pod_classify_checkpoint_asks_with_deadline(void **state)
{
	(void)state;
	json_t *p = pod("train-0");
	struct drain_pod d;
	/* The annotation holds whole seconds: the deadline is rounded up. */
	drain_pod_classify(p, &CKPT, NOW + 1, &d);
	assert_int_equal(d.act, DRAIN_ACT_ASK);
	assert_int_equal(d.deadline_ms, NOW + 301000);
	drain_pod_classify(p, &CKPT, NOW, &d);
	assert_int_equal(d.deadline_ms, NOW + 300000);
	json_decref(p);
}

static void test_drain_pod_classify_deadline_kept_from_annotation(void **state)
{
	(void)state;
	json_t *p = pod("train-0");
	char when[TIME_RFC3339_LEN];
	struct drain_pod d;
	/* Asked 4 minutes ago with a 5 minute deadline; the policy (or a new
	 * replica) now says 30 minutes: the written deadline stands. */
	struct drain_policy longer = CKPT;
	longer.checkpoint_deadline_ms = 1800000;
	time_format_rfc3339(NOW + 60000, when);
	annotate(p, DRAIN_ANN_CHECKPOINT, when);
	drain_pod_classify(p, &longer, NOW, &d);
	assert_int_equal(d.act, DRAIN_ACT_WAIT);
	assert_int_equal(d.deadline_ms, NOW + 60000);
	drain_pod_classify(p, &longer, NOW + 59999, &d);
	assert_int_equal(d.act, DRAIN_ACT_WAIT);
	json_decref(p);
}

static void test_drain_pod_classify_deadline_passed(void **state)
{
	(void)state;
	json_t *p = pod("train-0");
	char when[TIME_RFC3339_LEN];
	struct drain_pod d;
	time_format_rfc3339(NOW, when);
	annotate(p, DRAIN_ANN_CHECKPOINT, when);
	drain_pod_classify(p, &CKPT, NOW, &d);
	assert_int_equal(d.act, DRAIN_ACT_EVICT);
	assert_string_equal(d.why, "deadline passed");
	json_decref(p);
}

static void test_drain_pod_classify_acknowledged(void **state)
{
	(void)state;
	json_t *p = pod("train-0");
	char when[TIME_RFC3339_LEN];
	struct drain_pod d;
	time_format_rfc3339(NOW + 60000, when);
	annotate(p, DRAIN_ANN_CHECKPOINT, when);
	annotate(p, DRAIN_ANN_CHECKPOINT_ACK, "step-1200");
	drain_pod_classify(p, &CKPT, NOW, &d);
	assert_int_equal(d.act, DRAIN_ACT_EVICT);
	assert_string_equal(d.why, "checkpoint acknowledged");
	json_decref(p);
	/* Acknowledged before being asked: a pod with nothing to save says so
	 * up front and is not kept waiting. */
	p = pod("stateless");
	annotate(p, DRAIN_ANN_CHECKPOINT_ACK, "always");
	assert_int_equal(act_of(p, &CKPT, NOW), DRAIN_ACT_EVICT);
	json_decref(p);
}

static void test_drain_pod_classify_bad_deadline(void **state)
{
	(void)state;
	json_t *p = pod("train-0");
	struct drain_pod d;
	annotate(p, DRAIN_ANN_CHECKPOINT, "tomorrow");
	drain_pod_classify(p, &CKPT, NOW, &d);
	assert_int_equal(d.act, DRAIN_ACT_EVICT);
	assert_true(d.bad_deadline);
	assert_string_equal(d.why, "deadline unreadable");
	json_decref(p);
}

static void test_drain_plan_build_gang_with_one_unacked_member(void **state)
{
	(void)state;
	char later[TIME_RFC3339_LEN];
	struct drain_plan pl;
	json_t *pods = json_array(), *a = pod("job-a-0"), *b = pod("job-a-1"), *c = pod("solo");
	time_format_rfc3339(NOW + 60000, later);
	label(a, DRAIN_LABEL_GANG, "job-a");
	label(b, DRAIN_LABEL_GANG, "job-a");
	annotate(a, DRAIN_ANN_CHECKPOINT, later);
	annotate(a, DRAIN_ANN_CHECKPOINT_ACK, "1");
	annotate(b, DRAIN_ANN_CHECKPOINT, later);
	annotate(c, DRAIN_ANN_CHECKPOINT, later);
	annotate(c, DRAIN_ANN_CHECKPOINT_ACK, "1");
	json_array_append_new(pods, a);
	json_array_append_new(pods, b);
	json_array_append_new(pods, c);

	/* b has not acknowledged: a waits with it; solo is on its own. */
	drain_plan_build(pods, &CKPT, NOW, &pl);
	assert_int_equal(pl.n, 3);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_HOLD);
	assert_string_equal(pl.pods[0].gang, "job-a");
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_WAIT);
	assert_int_equal(pl.pods[2].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.first_deadline_ms, NOW + 60000);
	drain_plan_clear(&pl);

	/* b's deadline passes: the gang goes together. */
	drain_plan_build(pods, &CKPT, NOW + 60000, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.first_deadline_ms, 0);
	drain_plan_clear(&pl);

	/* Or b acknowledges first. */
	annotate(b, DRAIN_ANN_CHECKPOINT_ACK, "1");
	drain_plan_build(pods, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_EVICT);
	drain_plan_clear(&pl);
	json_decref(pods);
}

static void test_drain_plan_build_gang_not_yet_asked_holds(void **state)
{
	(void)state;
	struct drain_plan pl;
	json_t *pods = json_array(), *a = pod("job-b-0"), *b = pod("job-b-1"), *d = pod("ds");
	label(a, DRAIN_LABEL_GANG, "job-b");
	label(b, DRAIN_LABEL_GANG, "job-b");
	label(d, DRAIN_LABEL_GANG, "job-b");
	annotate(a, DRAIN_ANN_CHECKPOINT_ACK, "1");
	annotate(d, DRAIN_ANN_MIRROR, "x");
	json_array_append_new(pods, a);
	json_array_append_new(pods, b);
	json_array_append_new(pods, d);
	drain_plan_build(pods, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_HOLD);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_ASK);
	assert_int_equal(pl.pods[2].act, DRAIN_ACT_SKIP);
	assert_int_equal(pl.first_deadline_ms, NOW + 300000);
	drain_plan_clear(&pl);
	/* In Evict mode a gang is evicted at once, all of it. */
	drain_plan_build(pods, &EVICT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_EVICT);
	drain_plan_clear(&pl);
	json_decref(pods);
}

static void test_drain_plan_build_empty(void **state)
{
	(void)state;
	struct drain_plan pl;
	json_t *pods = json_array();
	drain_plan_build(pods, &CKPT, NOW, &pl);
	assert_int_equal(pl.n, 0);
	assert_null(pl.pods);
	drain_plan_clear(&pl);
	json_decref(pods);
}

static void test_drain_backoff_ms_grows_with_the_drain(void **state)
{
	(void)state;
	struct drain_policy p = CKPT;
	assert_int_equal(drain_backoff_ms(&p, NOW), 2000); /* start unknown */
	p.started_ms = NOW;
	assert_int_equal(drain_backoff_ms(&p, NOW + 100), 1000);
	assert_int_equal(drain_backoff_ms(&p, NOW + 20000), 5000);
	assert_int_equal(drain_backoff_ms(&p, NOW + 3600000), 30000);
	p.started_ms = NOW + 5000; /* clock skew: a start in the future */
	assert_int_equal(drain_backoff_ms(&p, NOW), 2000);
}

static void test_drain_cordon_owner_is_the_whole_value(void **state)
{
	(void)state;
	json_t *n = json_pack("{s:{s:s,s:s,s:{}},s:{}}", "metadata", "name", "r07-t01",
	                      "resourceVersion", "9", "annotations", "spec");
	json_t *p = drain_cordon_patch(n, "rackupgrade/u1", true), *c;
	assert_string_equal(json_string_value(json_object_get(jx_path(p, "metadata.annotations"),
	                                                      DRAIN_ANN_CORDONED_BY)),
	                    "rackupgrade/u1");
	assert_string_equal(jx_str_or(p, "metadata.resourceVersion", ""), "9");
	c = jx_merge_patch_apply(n, p);
	json_decref(p);
	/* The rack's cordon logic and another upgrade leave it alone. */
	assert_null(drain_cordon_patch(c, "rack/r07", false));
	assert_null(drain_cordon_patch(c, "rackupgrade/u2", false));
	p = drain_cordon_patch(c, "rackupgrade/u1", false);
	assert_non_null(p);
	assert_true(json_is_null(jx_path(p, "spec.unschedulable")));
	json_decref(p);
	json_decref(c);
	json_decref(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_drain_pod_classify_daemonset_stays),
	        cmocka_unit_test(test_drain_pod_classify_mirror_stays),
	        cmocka_unit_test(test_drain_pod_classify_terminating_and_finished),
	        cmocka_unit_test(test_drain_pod_classify_evict_mode_at_once),
	        cmocka_unit_test(test_drain_pod_classify_checkpoint_asks_with_deadline),
	        cmocka_unit_test(test_drain_pod_classify_deadline_kept_from_annotation),
	        cmocka_unit_test(test_drain_pod_classify_deadline_passed),
	        cmocka_unit_test(test_drain_pod_classify_acknowledged),
	        cmocka_unit_test(test_drain_pod_classify_bad_deadline),
	        cmocka_unit_test(test_drain_plan_build_gang_with_one_unacked_member),
	        cmocka_unit_test(test_drain_plan_build_gang_not_yet_asked_holds),
	        cmocka_unit_test(test_drain_plan_build_empty),
	        cmocka_unit_test(test_drain_backoff_ms_grows_with_the_drain),
	        cmocka_unit_test(test_drain_cordon_owner_is_the_whole_value),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
