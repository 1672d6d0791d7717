// SPDX-License-Identifier: Apache-2.0
// Unit tests for the drain's rules on plain JSON pods: which pods stay
// (DaemonSet, mirror, finished), which are already going, the checkpoint
// handshake and its deadline, gangs (job labels and ComputeDomain claims),
// the sentence naming the claims of our DRA driver, and the cordon owned by
// a drain.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
	drain_plan_build(pods, NULL, &CKPT, NOW, &pl);
	assert_int_equal(pl.n, 3);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_HOLD);
	assert_string_equal(pl.pods[0].gang, "job-a");
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_WAIT);
	assert_int_equal(pl.pods[2].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.first_deadline_ms, NOW + 60000);
	drain_plan_clear(&pl);

	/* b's deadline passes: the gang goes together. */
	drain_plan_build(pods, NULL, &CKPT, NOW + 60000, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.first_deadline_ms, 0);
	drain_plan_clear(&pl);

	/* Or b acknowledges first. */
	annotate(b, DRAIN_ANN_CHECKPOINT_ACK, "1");
	drain_plan_build(pods, NULL, &CKPT, NOW, &pl);
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
	drain_plan_build(pods, NULL, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_HOLD);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_ASK);
	assert_int_equal(pl.pods[2].act, DRAIN_ACT_SKIP);
	assert_int_equal(pl.first_deadline_ms, NOW + 300000);
	drain_plan_clear(&pl);
	/* In Evict mode a gang is evicted at once, all of it. */
	drain_plan_build(pods, NULL, &EVICT, NOW, &pl);
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
	drain_plan_build(pods, NULL, &CKPT, NOW, &pl);
	assert_int_equal(pl.n, 0);
	assert_null(pl.pods);
	drain_plan_clear(&pl);
	json_decref(pods);
}

/* ---- claims of our DRA driver ---- */

static void claim_ref(json_t *p, const char *ref, const char *claim)
{
	json_t *a = json_object_get(json_object_get(p, "spec"), "resourceClaims");
	if (a == NULL) {
		a = json_array();
		json_object_set_new(json_object_get(p, "spec"), "resourceClaims", a);
	}
	json_array_append_new(a,
	                      json_pack("{s:s,s:s}", "name", ref,
	                                claim ? "resourceClaimName" : "resourceClaimTemplateName",
	                                claim ? claim : "channel-template"));
}

/* A claim allocated by driver from node's pool, its opaque config in the
 * allocation naming the domain (NULL: no config). */
static json_t *claim_new(const char *name, const char *driver, const char *node, const char *domain,
                         const char *uid)
{
	json_t *c =
	        json_pack("{s:{s:s,s:s},s:{s:{s:{s:[{s:s,s:s,s:s,s:s}]}}}}", "metadata", "name",
	                  name, "namespace", "team-a", "status", "allocation", "devices", "results",
	                  "request", "channel", "driver", driver, "pool", node, "device", "slot-0");
	if (domain)
		jx_set_take(c, "status.allocation.devices.config",
		            json_pack("[{s:s,s:[s],s:{s:s,s:{s:s,s:s,s:s,s:s}}}]", "source",
		                      "FromClaim", "requests", "channel", "opaque", "driver",
		                      DRAIN_DRA_DRIVER, "parameters", "kind", "ImexChannelConfig",
		                      "domainUID", uid, "domain", domain, "allocationMode",
		                      "Single"));
	return c;
}

static void test_drain_pod_claim_names_direct_and_template(void **state)
{
	(void)state;
	const char *names[4];
	json_t *p = pod("trainer-0");
	assert_int_equal(drain_pod_claim_names(p, names, 4), 0);
	assert_false(drain_pod_wants_claims(p));
	claim_ref(p, "gpu", "shared-gpus");
	claim_ref(p, "channel", NULL);
	/* The template's claim is not made yet: only the direct one. */
	assert_int_equal(drain_pod_claim_names(p, names, 4), 1);
	assert_string_equal(names[0], "shared-gpus");
	jx_set_take(p, "status.resourceClaimStatuses",
	            json_pack("[{s:s,s:s}]", "name", "channel", "resourceClaimName",
	                      "trainer-0-channel-x7k2"));
	assert_int_equal(drain_pod_claim_names(p, names, 4), 2);
	assert_string_equal(names[1], "trainer-0-channel-x7k2");
	assert_int_equal(drain_pod_claim_names(p, names, 1), 1);
	assert_true(drain_pod_wants_claims(p));
	/* Pods the drain leaves alone need no claim read. */
	jx_set_str(p, "status.phase", "Succeeded");
	assert_false(drain_pod_wants_claims(p));
	json_decref(p);
}

static void test_drain_claim_read_ours_on_this_node(void **state)
{
	(void)state;
	struct drain_claim c;
	json_t *cl = claim_new("ch-0", DRAIN_DRA_DRIVER, "r07-t01", "team-a/train-4", "uid-cd");
	assert_true(drain_claim_read(cl, "r07-t01", &c));
	assert_string_equal(c.name, "ch-0");
	assert_string_equal(c.domain, "team-a/train-4");
	assert_string_equal(c.domain_uid, "uid-cd");
	assert_string_equal(c.device, "slot-0");
	/* Allocated on another node's pool: not this tray's. */
	assert_false(drain_claim_read(cl, "r07-t02", &c));
	json_decref(cl);
	/* Another driver's claim (NVIDIA's), or one not allocated. */
	cl = claim_new("cd-0", "compute-domain.nvidia.com", "r07-t01", "team-a/x", "u");
	assert_false(drain_claim_read(cl, "r07-t01", &c));
	json_decref(cl);
	assert_false(drain_claim_read(NULL, "r07-t01", &c));
	/* No config in the allocation: the claim's own spec names the domain;
	 * a config for other requests does not count. */
	cl = claim_new("ch-1", DRAIN_DRA_DRIVER, "r07-t01", NULL, NULL);
	jx_set_take(cl, "spec.devices.config",
	            json_pack("[{s:[s],s:{s:s,s:{s:s}}},{s:{s:s,s:{s:s,s:s}}}]", "requests",
	                      "other", "opaque", "driver", DRAIN_DRA_DRIVER, "parameters", "domain",
	                      "team-a/wrong", "opaque", "driver", DRAIN_DRA_DRIVER, "parameters",
	                      "domain", "team-a/train-8", "domainUID", "uid-8"));
	assert_true(drain_claim_read(cl, "r07-t01", &c));
	assert_string_equal(c.domain, "team-a/train-8");
	assert_string_equal(c.domain_uid, "uid-8");
	json_decref(cl);
}

/* Pods of one ComputeDomain on two drained nodes: one gang. */
static void test_drain_plan_build_domain_gang_across_nodes(void **state)
{
	(void)state;
	char later[TIME_RFC3339_LEN];
	struct drain_plan pl;
	json_t *pods = json_array(), *claims = json_object();
	json_t *a = pod("rank-0"), *b = pod("rank-1"), *c = pod("other"), *d = pod("plain");
	time_format_rfc3339(NOW + 60000, later);
	jx_set_str(b, "spec.nodeName", "r07-t02");
	jx_set_str(c, "spec.nodeName", "r07-t02");
	claim_ref(a, "channel", "rank-0-ch");
	claim_ref(b, "channel", "rank-1-ch");
	claim_ref(c, "channel", "other-ch");
	json_object_set_new(
	        claims, "team-a/rank-0-ch",
	        claim_new("rank-0-ch", DRAIN_DRA_DRIVER, "r07-t01", "team-a/train-4", "uid-4"));
	json_object_set_new(
	        claims, "team-a/rank-1-ch",
	        claim_new("rank-1-ch", DRAIN_DRA_DRIVER, "r07-t02", "team-a/train-4", "uid-4"));
	json_object_set_new(
	        claims, "team-a/other-ch",
	        claim_new("other-ch", DRAIN_DRA_DRIVER, "r07-t02", "team-a/train-2", "uid-2"));
	for (json_t **x = (json_t *[]){a, b, c, d, NULL}; *x; x++) {
		annotate(*x, DRAIN_ANN_CHECKPOINT, later);
		json_array_append(pods, *x);
	}
	annotate(a, DRAIN_ANN_CHECKPOINT_ACK, "1");
	annotate(c, DRAIN_ANN_CHECKPOINT_ACK, "1");
	annotate(d, DRAIN_ANN_CHECKPOINT_ACK, "1");

	/* rank-1 has not acknowledged: rank-0, on the other tray, waits with
	 * it; the other domain's pod and the plain one go. */
	drain_plan_build(pods, claims, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_HOLD);
	assert_string_equal(pl.pods[0].domain_gang, "cd:uid-4");
	assert_int_equal(pl.pods[0].nclaims, 1);
	assert_string_equal(pl.pods[0].claim.domain, "team-a/train-4");
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_WAIT);
	assert_int_equal(pl.pods[2].act, DRAIN_ACT_EVICT);
	assert_string_equal(pl.pods[2].domain_gang, "cd:uid-2");
	assert_int_equal(pl.pods[3].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[3].nclaims, 0);
	drain_plan_clear(&pl);

	/* rank-1 acknowledges: the domain's pods go together. */
	annotate(b, DRAIN_ANN_CHECKPOINT_ACK, "1");
	drain_plan_build(pods, claims, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_EVICT);
	drain_plan_clear(&pl);

	/* Without the claims read, no domain gang and no claim. */
	json_object_del(json_object_get(b, "metadata"), "annotations");
	jx_set_take(b, "metadata.annotations", json_object());
	annotate(b, DRAIN_ANN_CHECKPOINT, later);
	drain_plan_build(pods, NULL, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	assert_int_equal(pl.pods[0].nclaims, 0);
	drain_plan_clear(&pl);
	/* A claim allocated on another tray's pool is not this pod's tray's. */
	json_object_set_new(
	        claims, "team-a/rank-1-ch",
	        claim_new("rank-1-ch", DRAIN_DRA_DRIVER, "r07-t09", "team-a/train-4", "uid-4"));
	drain_plan_build(pods, claims, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[1].nclaims, 0);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_EVICT);
	drain_plan_clear(&pl);
	for (json_t **x = (json_t *[]){a, b, c, d, NULL}; *x; x++)
		json_decref(*x);
	json_decref(claims);
	json_decref(pods);
}

/* A pod in a job gang and a domain gang waits for either. */
static void test_drain_plan_build_both_gangs(void **state)
{
	(void)state;
	struct drain_plan pl;
	json_t *pods = json_array(), *claims = json_object();
	json_t *a = pod("a"), *b = pod("b"), *c = pod("c");
	claim_ref(a, "channel", "a-ch");
	claim_ref(c, "channel", "c-ch");
	json_object_set_new(claims, "team-a/a-ch",
	                    claim_new("a-ch", DRAIN_DRA_DRIVER, "r07-t01", "team-a/d", "uid-d"));
	json_object_set_new(claims, "team-a/c-ch",
	                    claim_new("c-ch", DRAIN_DRA_DRIVER, "r07-t01", "team-a/d", "uid-d"));
	label(a, DRAIN_LABEL_GANG, "job");
	label(b, DRAIN_LABEL_GANG, "job");
	annotate(a, DRAIN_ANN_CHECKPOINT_ACK, "1");
	annotate(c, DRAIN_ANN_CHECKPOINT_ACK, "1");
	json_array_append_new(pods, a);
	json_array_append_new(pods, b);
	json_array_append_new(pods, c);
	/* b (job gang, not asked yet) holds a, and through a's domain nothing
	 * else: c only shares the domain with a, and a does not wait. */
	drain_plan_build(pods, claims, &CKPT, NOW, &pl);
	assert_int_equal(pl.pods[0].act, DRAIN_ACT_HOLD);
	assert_int_equal(pl.pods[1].act, DRAIN_ACT_ASK);
	assert_int_equal(pl.pods[2].act, DRAIN_ACT_EVICT);
	drain_plan_clear(&pl);
	json_decref(claims);
	json_decref(pods);
}

static void test_drain_claims_note_names_claim_pod_domain(void **state)
{
	(void)state;
	struct drain_plan pl;
	char note[320], small[160];
	json_t *pods = json_array(), *claims = json_object();
	for (int i = 0; i < 6; i++) {
		char name[32], cn[32], key[48];
		json_t *p;
		snprintf(name, sizeof(name), "rank-%d", i);
		snprintf(cn, sizeof(cn), "rank-%d-ch", i);
		snprintf(key, sizeof(key), "team-a/%s", cn);
		p = pod(name);
		claim_ref(p, "channel", cn);
		json_object_set_new(
		        claims, key,
		        claim_new(cn, DRAIN_DRA_DRIVER, "r07-t01", "team-a/train-4", "uid-4"));
		json_array_append_new(pods, p);
	}
	json_array_append_new(pods, pod("plain"));
	drain_plan_build(pods, claims, &EVICT, NOW, &pl);
	drain_claims_note(&pl, note, sizeof(note));
	const char *want =
	        DRAIN_CLAIMS_NOTE ": ResourceClaim team-a/rank-0-ch of pod team-a/rank-0 "
	                          "(ComputeDomain team-a/train-4, node r07-t01); "
	                          "ResourceClaim team-a/rank-1-ch of pod team-a/rank-1 ";
	assert_true(strncmp(note, want, strlen(want)) == 0);
	/* Six do not fit: those left out are counted. */
	assert_non_null(strstr(note, " more"));
	assert_null(strstr(note, "plain"));
	assert_true(strlen(note) < sizeof(note));
	/* Room for none: the count alone. */
	drain_claims_note(&pl, small, 80);
	assert_string_equal(small, DRAIN_CLAIMS_NOTE ": 6 pods");
	drain_plan_clear(&pl);
	/* No claim: no note. */
	json_object_clear(claims);
	drain_plan_build(pods, claims, &EVICT, NOW, &pl);
	drain_claims_note(&pl, note, sizeof(note));
	assert_string_equal(note, "");
	drain_plan_clear(&pl);
	json_decref(claims);
	json_decref(pods);
}

static void test_drain_message_join_keeps_the_note(void **state)
{
	(void)state;
	char out[64], core[200];
	drain_message_join(out, sizeof(out), "1 node drained", "");
	assert_string_equal(out, "1 node drained");
	drain_message_join(out, sizeof(out), "draining", "NOTE");
	assert_string_equal(out, "draining; NOTE");
	memset(core, 'x', sizeof(core) - 1);
	core[sizeof(core) - 1] = '\0';
	/* A long sentence is cut, the note kept whole. */
	drain_message_join(out, sizeof(out), core, "the note");
	assert_int_equal(strlen(out), sizeof(out) - 1);
	assert_string_equal(out + strlen(out) - 10, "; the note");

	/* The drain's last sentence keeps the note of an earlier pass. */
	char msg[200] = "2 nodes drained: cordoned, no pod left to evict";
	drain_message_keep_claims(msg, sizeof(msg),
	                          "draining 2 nodes: 1 pod to move; " DRAIN_CLAIMS_NOTE ": X");
	assert_string_equal(
	        msg, "2 nodes drained: cordoned, no pod left to evict; " DRAIN_CLAIMS_NOTE ": X");
	drain_message_keep_claims(msg, sizeof(msg), DRAIN_CLAIMS_NOTE ": Y");
	assert_non_null(strstr(msg, ": X")); /* has one already */
	char plain[64] = "1 node drained";
	drain_message_keep_claims(plain, sizeof(plain), "draining 1 node");
	assert_string_equal(plain, "1 node drained");
	drain_message_keep_claims(plain, sizeof(plain), NULL);
	assert_string_equal(plain, "1 node drained");
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
	        cmocka_unit_test(test_drain_pod_claim_names_direct_and_template),
	        cmocka_unit_test(test_drain_claim_read_ours_on_this_node),
	        cmocka_unit_test(test_drain_plan_build_domain_gang_across_nodes),
	        cmocka_unit_test(test_drain_plan_build_both_gangs),
	        cmocka_unit_test(test_drain_claims_note_names_claim_pod_domain),
	        cmocka_unit_test(test_drain_message_join_keeps_the_note),
	        cmocka_unit_test(test_drain_backoff_ms_grows_with_the_drain),
	        cmocka_unit_test(test_drain_cordon_owner_is_the_whole_value),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
