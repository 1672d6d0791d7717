// SPDX-License-Identifier: Apache-2.0
// Unit tests for ComputeDomain placement (one clique, best fit, stable
// members, no hoarding), failed members and their replacement by spares,
// the peer list, the tray and Node patches with the channel allocation, and
// the status the controller writes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"
#include "nvl72/operator_domain.h"
#include "nvl72/timeutil.h"

#define NOW 1795000000000LL
#define CQ1 "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.1"
#define CQ2 "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.2"

struct fx {
	struct op_domain_cand c[18];
	char tray[18][16], node[18][16], ip[18][16];
};

/* 18 healthy, free, selected trays of rack r07: 1..9 in CQ1, 10..18 in
 * CQ2, listed in reverse order (the cache has no order). */
static void fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	for (int i = 0; i < 18; i++) {
		int idx = 18 - i;
		struct op_domain_cand *c = &f->c[i];
		snprintf(f->tray[i], sizeof(f->tray[i]), "r07-t%02d", idx);
		snprintf(f->node[i], sizeof(f->node[i]), "n%02d", idx);
		snprintf(f->ip[i], sizeof(f->ip[i]), "10.0.0.%d", idx);
		c->tray = f->tray[i];
		c->node = f->node[i];
		c->rack = "r07";
		c->index = idx;
		c->clique = idx <= 9 ? CQ1 : CQ2;
		c->ip = f->ip[i];
		c->owner = "";
		c->healthy = c->selected = true;
	}
}

static struct op_domain_cand *at(struct fx *f, int index)
{
	return &f->c[18 - index];
}

static int member_index(const struct fx *f, const struct op_domain_plan *p, unsigned k)
{
	return f->c[p->member[k]].index;
}

static void test_op_domain_place_best_fit_lowest_indexes(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	/* CQ2 has 8 free after one is taken: the tighter fit for 4. */
	at(&f, 18)->owner = "ns.other";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_true(p.placed);
	assert_int_equal(p.n, 4);
	assert_int_equal(p.npicked, 4);
	assert_string_equal(p.clique, CQ2);
	assert_string_equal(p.rack, "r07");
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(member_index(&f, &p, k), 10 + (int)k);
	assert_string_equal(p.reason, "Placed");
}

static void test_op_domain_place_skips_unhealthy_unselected_taken(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 10; i <= 18; i++)
		at(&f, i)->selected = false;
	at(&f, 1)->healthy = false;
	at(&f, 2)->owner = "ns.other";
	at(&f, 3)->clique = "";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_true(p.placed);
	assert_string_equal(p.clique, CQ1);
	int want[] = {4, 5, 6, 7};
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(member_index(&f, &p, k), want[k]);
}

/* Trays NVIDIA's DRA driver manages are never picked, as members or as
 * spares, and a placement short of trays says how many were skipped. */
static void test_op_domain_place_skips_nvidia_managed(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	json_t *t = json_pack("{s:{s:{s:s,s:s}}}", "status", "nvidiaDRA", "driver",
	                      "compute-domain.nvidia.com", "resourceSlice", "n05-cd");
	assert_true(op_domain_tray_nvidia(t));
	json_object_del(json_object_get(t, "status"), "nvidiaDRA");
	assert_false(op_domain_tray_nvidia(t));
	json_decref(t);

	fx_init(&f);
	for (int i = 10; i <= 18; i++)
		at(&f, i)->selected = false;
	for (int i = 3; i <= 6; i++)
		at(&f, i)->nvidia = true;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_true(p.placed);
	int want[] = {1, 2, 7, 8};
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(member_index(&f, &p, k), want[k]);

	/* Six trays are needed; CQ1 has five that are not NVIDIA's. */
	op_domain_place(f.c, 18, "ns.cd", 6, &p);
	assert_false(p.placed);
	assert_int_equal(p.n, 0);
	assert_string_equal(p.reason, "InsufficientTrays");
	assert_non_null(strstr(p.message, "(4 free trays skipped: NVIDIA's DRA driver manages "
	                                  "their IMEX)"));

	/* A failed member's spare is not an NVIDIA-managed tray either. */
	for (int i = 1; i <= 9; i++)
		at(&f, i)->owner = i <= 2 || i == 7 || i == 8 ? "ns.cd" : "";
	at(&f, 9)->nvidia = true;
	at(&f, 2)->failure = "NodeGone";
	at(&f, 2)->failed_since_ms = NOW - 60000;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_replace_failed(f.c, 18, 4, 1000, NOW, &p);
	assert_int_equal(p.nreplaced, 0);
	assert_int_equal(p.nunreplaced, 1);
}

static void test_op_domain_place_no_clique_fits_claims_nothing(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	op_domain_place(f.c, 18, "ns.cd", 10, &p); /* each clique has 9 */
	assert_false(p.placed);
	assert_false(p.ready);
	assert_int_equal(p.n, 0);
	assert_string_equal(p.reason, "InsufficientTrays");
}

static void test_op_domain_place_members_stay(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	/* Members 3 and 17 (two cliques: a misreport) stay even unhealthy;
	 * the first member's clique decides where the rest come from. */
	at(&f, 3)->owner = at(&f, 17)->owner = "ns.cd";
	at(&f, 3)->healthy = false;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_true(p.placed);
	assert_int_equal(p.npicked, 2);
	assert_string_equal(p.clique, CQ1);
	int want[] = {1, 2, 3, 17};
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(member_index(&f, &p, k), want[k]);

	/* More members than wanted: the first ones by index are kept. */
	fx_init(&f);
	for (int i = 1; i <= 6; i++)
		at(&f, i)->owner = "ns.cd";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_int_equal(p.n, 4);
	assert_int_equal(p.npicked, 0);
	assert_int_equal(member_index(&f, &p, 3), 4);

	/* A member short and no spare in its clique: kept, not placed. */
	fx_init(&f);
	for (int i = 1; i <= 9; i++)
		at(&f, i)->owner = i <= 3 ? "ns.cd" : "ns.other";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_int_equal(p.n, 3);
	assert_false(p.placed);
}

static void test_op_domain_place_ready_needs_every_member(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 4; i++) {
		at(&f, i)->owner = "ns.cd";
		at(&f, i)->imex_ready = true;
	}
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_true(p.ready);
	at(&f, 2)->imex_ready = false;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_true(p.placed);
	assert_false(p.ready);
	at(&f, 2)->imex_ready = true;
	at(&f, 2)->ip = "";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_false(p.ready);
	assert_false(p.addresses);
	assert_string_equal(p.reason, "NoAddress");
	assert_null(op_domain_peers(f.c, &p));
}

static void test_op_domain_peers_by_tray_index(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 12; i <= 15; i++)
		at(&f, i)->owner = "ns.cd";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	json_t *peers = op_domain_peers(f.c, &p);
	char *s = json_dumps(peers, JSON_COMPACT);
	assert_string_equal(s, "[\"10.0.0.12\",\"10.0.0.13\",\"10.0.0.14\",\"10.0.0.15\"]");
	free(s);
	json_decref(peers);
}

static void test_op_domain_key_fits_label(void **state)
{
	(void)state;
	char k[OP_DOMAIN_KEY_MAX];
	char longname[80];
	assert_true(op_domain_key("team-a", "train", k));
	assert_string_equal(k, "team-a.train");
	memset(longname, 'x', 60);
	longname[60] = '\0';
	assert_false(op_domain_key("team-a", longname, k));
}

static void test_op_domain_tray_patch_and_release(void **state)
{
	(void)state;
	json_t *tray = json_pack("{s:{s:s,s:s},s:{s:s,s:i}}", "metadata", "name", "r07-t01",
	                         "resourceVersion", "7", "spec", "rack", "r07", "index", 1);
	json_t *peers = json_pack("[s,s]", "10.0.0.1", "10.0.0.2");

	json_t *p =
	        op_domain_tray_patch(tray, "ns.cd", "u-1", NULL, OP_CHANNELS_SINGLE); /* claim */
	assert_string_equal(jx_str_or(p, "metadata.resourceVersion", ""), "7");
	assert_string_equal(json_string_value(json_object_get(jx_path(p, "metadata.annotations"),
	                                                      OP_LABEL_COMPUTE_DOMAIN)),
	                    "ns.cd");
	assert_null(jx_path(p, "spec"));
	json_decref(p);

	p = op_domain_tray_patch(tray, "ns.cd", "u-1", peers, OP_CHANNELS_SINGLE);
	assert_string_equal(jx_str_or(p, "spec.imex.mode", ""), "process");
	assert_string_equal(jx_str_or(p, "spec.imex.domainUID", ""), "u-1");
	assert_string_equal(jx_str_or(p, "spec.imex.channels.allocationMode", ""), "Single");
	assert_int_equal(json_array_size(jx_path(p, "spec.imex.channels.ids")), 1);
	assert_int_equal(json_integer_value(jx_path(p, "spec.imex.channels.ids[0]")), 0);
	assert_string_equal(jx_str_or(p, "spec.imex.domain", ""), "ns.cd");
	assert_true(json_equal(jx_path(p, "spec.imex.peers"), peers));
	/* Applied, nothing is left to do. */
	json_t *now = jx_merge_patch_apply(tray, p);
	json_decref(p);
	assert_null(op_domain_tray_patch(now, "ns.cd", "u-1", peers, OP_CHANNELS_SINGLE));
	assert_null(op_domain_tray_release_patch(now, "ns.other"));
	/* A domain of the same name made again is another domain: the uid
	 * alone is written. */
	p = op_domain_tray_patch(now, "ns.cd", "u-2", peers, OP_CHANNELS_SINGLE);
	assert_string_equal(jx_str_or(p, "spec.imex.domainUID", ""), "u-2");
	assert_true(json_equal(jx_path(p, "spec.imex.peers"), peers));
	json_decref(p);

	p = op_domain_tray_release_patch(now, "ns.cd");
	assert_true(json_is_null(
	        json_object_get(jx_path(p, "metadata.annotations"), OP_LABEL_COMPUTE_DOMAIN)));
	assert_true(json_is_null(jx_path(p, "spec.imex"))); /* domainUID with it */
	json_t *after = jx_merge_patch_apply(now, p);
	assert_null(op_domain_tray_release_patch(after, "ns.cd"));
	assert_string_equal(jx_str_or(after, "spec.rack", ""), "r07");
	json_decref(p);
	json_decref(after);
	json_decref(now);
	json_decref(peers);
	json_decref(tray);
}

static void test_op_domain_node_patch_only_our_label(void **state)
{
	(void)state;
	json_t *node =
	        json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", "n01", "labels", "team", "ml");
	json_t *p = op_domain_node_patch(node, "ns.cd", true);
	json_t *labels = jx_path(p, "metadata.labels");
	assert_int_equal(json_object_size(labels), 1);
	assert_string_equal(json_string_value(json_object_get(labels, OP_LABEL_COMPUTE_DOMAIN)),
	                    "ns.cd");
	assert_null(op_domain_node_patch(node, "ns.cd", false));
	json_t *now = jx_merge_patch_apply(node, p);
	json_decref(p);
	assert_null(op_domain_node_patch(now, "ns.cd", true));
	assert_null(op_domain_node_patch(now, "ns.other", false)); /* not ours to remove */
	p = op_domain_node_patch(now, "ns.cd", false);
	assert_true(json_is_null(
	        json_object_get(jx_path(p, "metadata.labels"), OP_LABEL_COMPUTE_DOMAIN)));
	json_decref(p);
	json_decref(now);
	json_decref(node);
}

static void test_op_domain_status_apply_shape_and_no_change(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 4; i++) {
		at(&f, i)->owner = "ns.cd";
		at(&f, i)->imex_ready = i != 3;
	}
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	json_t *d = json_pack("{s:{s:s,s:s,s:i}}", "metadata", "name", "cd", "namespace", "ns",
	                      "generation", 2);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	assert_string_equal(jx_str_or(d, "status.status", ""), "NotReady");
	assert_int_equal(json_integer_value(jx_path(d, "status.observedGeneration")), 2);
	json_t *nodes = jx_path(d, "status.nodes");
	assert_int_equal(json_array_size(nodes), 4);
	json_t *n2 = json_array_get(nodes, 2);
	assert_string_equal(jx_str_or(n2, "name", ""), "n03");
	assert_int_equal(json_integer_value(json_object_get(n2, "index")), 2);
	assert_string_equal(jx_str_or(n2, "ipAddress", ""), "10.0.0.3");
	assert_string_equal(jx_str_or(n2, "cliqueID", ""), CQ1);
	assert_string_equal(jx_str_or(n2, "status", ""), "NotReady");
	assert_string_equal(json_string_value(json_object_get(jx_path(d, "status.nodeSelector"),
	                                                      OP_LABEL_COMPUTE_DOMAIN)),
	                    "ns.cd");
	assert_string_equal(jx_str_or(d, "status.rack", ""), "r07");
	assert_string_equal(jx_str_or(d, "status.cliqueID", ""), CQ1);
	assert_true(kube_condition_is_true(d, "Placed"));
	assert_false(kube_condition_is_true(d, "Ready"));
	assert_string_equal(jx_str_or(kube_condition_find(d, "Ready"), "message", ""),
	                    "IMEX not ready on n03");

	/* The same inputs again change nothing. */
	json_t *again = json_deep_copy(d);
	op_domain_status_apply(again, "ns.cd", f.c, &p, NOW + 5000);
	assert_true(json_equal(d, again));
	json_decref(again);

	at(&f, 3)->imex_ready = true;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW + 9000);
	assert_string_equal(jx_str_or(d, "status.status", ""), "Ready");
	assert_true(kube_condition_is_true(d, "Ready"));
	json_decref(d);
}

static void test_op_domain_tray_patch_channels_all(void **state)
{
	(void)state;
	json_t *tray = json_pack("{s:{s:s,s:s},s:{s:s,s:i,s:{s:s,s:s,s:[s],s:{s:i,s:s,s:[i]}}}}",
	                         "metadata", "name", "r07-t01", "resourceVersion", "8", "spec",
	                         "rack", "r07", "index", 1, "imex", "mode", "process", "domain",
	                         "ns.cd", "peers", "10.0.0.1", "channels", "count", 2048,
	                         "allocationMode", "Single", "ids", 0);
	json_t *peers = json_pack("[s]", "10.0.0.1");
	jx_set_take(tray, "metadata.annotations",
	            json_pack("{s:s}", OP_LABEL_COMPUTE_DOMAIN, "ns.cd"));

	/* Single already there: nothing to write. */
	assert_null(op_domain_tray_patch(tray, "ns.cd", "", peers, OP_CHANNELS_SINGLE));
	/* All: the mode changes and the ids go, the count stays. */
	json_t *p = op_domain_tray_patch(tray, "ns.cd", "", peers, OP_CHANNELS_ALL);
	assert_non_null(p);
	assert_string_equal(jx_str_or(p, "spec.imex.channels.allocationMode", ""), "All");
	json_t *now = jx_merge_patch_apply(tray, p);
	assert_null(jx_path(now, "spec.imex.channels.ids"));
	assert_int_equal(json_integer_value(jx_path(now, "spec.imex.channels.count")), 2048);
	assert_null(op_domain_tray_patch(now, "ns.cd", "", peers, OP_CHANNELS_ALL));
	/* A tray claimed before domains had uids in it gets the uid. */
	json_decref(p);
	p = op_domain_tray_patch(now, "ns.cd", "u-1", peers, OP_CHANNELS_ALL);
	assert_int_equal(json_object_size(jx_path(p, "spec.imex")), 5);
	assert_string_equal(jx_str_or(p, "spec.imex.domainUID", ""), "u-1");
	json_decref(p);
	json_decref(now);
	json_decref(peers);
	json_decref(tray);
}

/* The DRA contract's template for ComputeDomain ns/cd (uid u-1), exactly. */
#define TEMPLATE_SINGLE                                                                            \
	"{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaimTemplate\","               \
	"\"metadata\":{\"name\":\"cd-channel\",\"namespace\":\"ns\","                              \
	"\"labels\":{\"nvl72.io/compute-domain\":\"ns.cd\"},"                                      \
	"\"ownerReferences\":[{\"apiVersion\":\"nvl72.io/v1alpha1\",\"kind\":\"ComputeDomain\","   \
	"\"name\":\"cd\",\"uid\":\"u-1\",\"controller\":true,\"blockOwnerDeletion\":true}]},"      \
	"\"spec\":{\"spec\":{\"devices\":{"                                                        \
	"\"requests\":[{\"name\":\"channel\",\"exactly\":{"                                        \
	"\"deviceClassName\":\"imex-channel.nvl72.io\",\"allocationMode\":\"ExactCount\","         \
	"\"count\":1,\"selectors\":[{\"cel\":{\"expression\":"                                     \
	"\"device.attributes[\\\"imex.nvl72.io\\\"].domain == \\\"u-1\\\" && "                     \
	"device.attributes[\\\"imex.nvl72.io\\\"].imexReady\"}}]}}],"                              \
	"\"config\":[{\"requests\":[\"channel\"],\"opaque\":{\"driver\":\"imex.nvl72.io\","        \
	"\"parameters\":{\"apiVersion\":\"nvl72.io/v1alpha1\",\"kind\":\"ImexChannelConfig\","     \
	"\"domainUID\":\"u-1\",\"domain\":\"ns/cd\",\"allocationMode\":\"Single\"}}}]}}}}"

static json_t *domain_obj(void)
{
	return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:i}}", "apiVersion", "nvl72.io/v1alpha1", "kind",
	                 "ComputeDomain", "metadata", "name", "cd", "namespace", "ns", "uid", "u-1",
	                 "generation", 1);
}

static void test_op_domain_claim_template_body(void **state)
{
	(void)state;
	json_t *dom = domain_obj();
	json_t *want = json_loads(TEMPLATE_SINGLE, 0, NULL);
	json_t *t = op_domain_claim_template(dom, "ns.cd", "cd-channel", OP_CHANNELS_SINGLE);
	assert_non_null(want);
	if (!json_equal(t, want)) {
		char *s = jx_dumps(t);
		fail_msg("template: %s", s);
	}
	json_decref(t);
	t = op_domain_claim_template(dom, "ns.cd", "cd-channel", OP_CHANNELS_ALL);
	assert_string_equal(
	        jx_str_or(t, "spec.spec.devices.config[0].opaque.parameters.allocationMode", ""),
	        "All");
	json_decref(t);
	json_decref(want);
	json_decref(dom);

	json_t *dc = op_domain_device_class();
	json_t *dc_want = json_loads(
	        "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":{"
	        "\"name\":\"imex-channel.nvl72.io\"},\"spec\":{\"selectors\":[{\"cel\":{"
	        "\"expression\":\"device.driver == \\\"imex.nvl72.io\\\"\"}}]}}",
	        0, NULL);
	assert_true(json_equal(dc, dc_want));
	json_decref(dc_want);
	json_decref(dc);
}

/* The template as the API server returns it: with its uid, times and the
 * members it adds (spec.metadata). */
static json_t *as_served(const json_t *want)
{
	json_t *t = json_deep_copy(want);
	jx_set_take(t, "metadata.uid", json_string("t-9"));
	jx_set_take(t, "metadata.resourceVersion", json_string("42"));
	jx_set_take(t, "spec.metadata", json_object());
	return t;
}

static void test_op_domain_claim_judge(void **state)
{
	(void)state;
	json_t *dom = domain_obj();
	json_t *want = op_domain_claim_template(dom, "ns.cd", "cd-channel", OP_CHANNELS_SINGLE);
	json_t *have = as_served(want);
	char why[256];

	assert_int_equal(op_domain_claim_judge(have, want, why, sizeof(why)), OP_CLAIM_MATCHES);
	/* The allocation mode is in the opaque config: another is another spec. */
	json_t *all = op_domain_claim_template(dom, "ns.cd", "cd-channel", OP_CHANNELS_ALL);
	assert_int_equal(op_domain_claim_judge(have, all, why, sizeof(why)), OP_CLAIM_DIFFERS);
	assert_non_null(strstr(why, "spec"));
	json_decref(all);
	/* A selector that is not the domain's. */
	json_t *x = as_served(want);
	jx_set_take(
	        json_array_get(jx_path(x, "spec.spec.devices.requests[0].exactly.selectors"), 0),
	        "cel.expression", json_string("true"));
	assert_int_equal(op_domain_claim_judge(x, want, why, sizeof(why)), OP_CLAIM_DIFFERS);
	json_decref(x);
	/* A second request. */
	x = as_served(want);
	json_array_append(jx_path(x, "spec.spec.devices.requests"),
	                  jx_path(x, "spec.spec.devices.requests[0]"));
	assert_int_equal(op_domain_claim_judge(x, want, why, sizeof(why)), OP_CLAIM_DIFFERS);
	json_decref(x);
	/* Its label changed. */
	x = as_served(want);
	jx_set_take(x, "metadata.labels", json_pack("{s:s}", OP_LABEL_COMPUTE_DOMAIN, "ns.other"));
	assert_int_equal(op_domain_claim_judge(x, want, why, sizeof(why)), OP_CLAIM_DIFFERS);
	assert_non_null(strstr(why, "label nvl72.io/compute-domain=ns.cd"));
	json_decref(x);
	/* Left by an earlier domain of the name. */
	x = as_served(want);
	jx_set_take(json_array_get(jx_path(x, "metadata.ownerReferences"), 0), "uid",
	            json_string("u-0"));
	assert_int_equal(op_domain_claim_judge(x, want, why, sizeof(why)), OP_CLAIM_DIFFERS);
	assert_non_null(strstr(why, "earlier ComputeDomain cd (uid u-0)"));
	/* Another domain's: left alone, named. */
	jx_set_take(json_array_get(jx_path(x, "metadata.ownerReferences"), 0), "name",
	            json_string("other"));
	assert_int_equal(op_domain_claim_judge(x, want, why, sizeof(why)), OP_CLAIM_FOREIGN);
	assert_string_equal(why, "belongs to ComputeDomain ns/other");
	/* Someone's own template of that name. */
	json_object_del(json_object_get(x, "metadata"), "ownerReferences");
	assert_int_equal(op_domain_claim_judge(x, want, why, sizeof(why)), OP_CLAIM_FOREIGN);
	assert_string_equal(why, "has no controller owner reference");
	json_decref(x);
	json_decref(have);
	json_decref(want);
	json_decref(dom);
}

static void test_op_domain_claim_status_apply(void **state)
{
	(void)state;
	json_t *d = domain_obj();
	struct op_domain_claim c = {.name = "cd-channel", .ready = true, .reason = "TemplateReady"};
	snprintf(c.message, sizeof(c.message), "ResourceClaimTemplate ns/cd-channel");

	op_domain_claim_status_apply(d, &c, NOW);
	assert_string_equal(jx_str_or(d, "status.resourceClaimTemplate.name", ""), "cd-channel");
	assert_true(kube_condition_is_true(d, OP_COND_CLAIM_TEMPLATE));
	json_t *again = json_deep_copy(d);
	op_domain_claim_status_apply(again, &c, NOW + 5000);
	assert_true(json_equal(d, again)); /* nothing to write */
	json_decref(again);

	c = (struct op_domain_claim){.name = NULL, .ready = false, .reason = "DRAUnavailable"};
	op_domain_claim_status_apply(d, &c, NOW + 9000);
	assert_null(jx_path(d, "status.resourceClaimTemplate"));
	json_t *cond = kube_condition_find(d, OP_COND_CLAIM_TEMPLATE);
	assert_string_equal(jx_str_or(cond, "status", ""), "False");
	assert_string_equal(jx_str_or(cond, "reason", ""), "DRAUnavailable");
	json_decref(d);
}

static json_t *cond_obj(const char *ready, const char *driver, const char *fabric)
{
	return json_pack("{s:{s:i},s:{s:[{s:s,s:s},{s:s,s:s},{s:s,s:s},{s:s,s:s}]}}", "metadata",
	                 "generation", 2, "status", "conditions", "type", "Ready", "status", ready,
	                 "type", "DriverReady", "status", driver, "type", "FabricReady", "status",
	                 fabric, "type", "FabricHealthy", "status", "True");
}

static void test_op_domain_member_failure_reasons(void **state)
{
	(void)state;
	json_t *node = json_pack("{s:{s:[{s:s,s:s}]}}", "status", "conditions", "type", "Ready",
	                         "status", "True");
	json_t *sick = json_pack("{s:{s:[{s:s,s:s}]}}", "status", "conditions", "type", "Ready",
	                         "status", "False");
	json_t *t = cond_obj("True", "True", "True");
	assert_null(op_domain_member_failure(t, node, "ns.cd"));
	assert_string_equal(op_domain_member_failure(t, NULL, "ns.cd"), "NodeGone");
	assert_string_equal(op_domain_member_failure(t, sick, "ns.cd"), "NodeNotReady");
	json_decref(t);

	/* Not Ready only because a peer left the domain: no failure of its own. */
	t = cond_obj("False", "True", "True");
	assert_null(op_domain_member_failure(t, node, "ns.cd"));
	json_decref(t);
	t = cond_obj("False", "True", "False");
	assert_string_equal(op_domain_member_failure(t, node, "ns.cd"), "FabricUnhealthy");
	json_decref(t);
	t = cond_obj("False", "False", "Unknown");
	assert_string_equal(op_domain_member_failure(t, node, "ns.cd"), "TrayNotReady");
	json_decref(t);

	/* Its own daemon, configured for this domain and reported for this
	 * generation, is not running. */
	t = cond_obj("False", "True", "True");
	jx_set_take(t, "spec", json_pack("{s:{s:s}}", "imex", "domain", "ns.cd"));
	jx_set_take(t, "status.imex", json_pack("{s:s}", "daemonState", "NotRunning"));
	jx_set_take(t, "status.observedGeneration", json_integer(2));
	assert_string_equal(op_domain_member_failure(t, node, "ns.cd"), "IMEXDaemonDown");
	assert_null(op_domain_member_failure(t, node, "ns.other"));
	/* A status from before the spec change says nothing yet. */
	jx_set_take(t, "status.observedGeneration", json_integer(1));
	assert_null(op_domain_member_failure(t, node, "ns.cd"));
	jx_set_take(t, "status.observedGeneration", json_integer(2));
	jx_set_take(t, "status.imex", json_pack("{s:s}", "daemonState", "WaitingForPeers"));
	assert_null(op_domain_member_failure(t, node, "ns.cd"));
	json_decref(t);
	json_decref(node);
	json_decref(sick);
}

static void test_op_domain_failed_since_from_status(void **state)
{
	(void)state;
	json_t *d = json_pack("{s:{s:[{s:s,s:s},{s:s}]}}", "status", "nodes", "name", "n02",
	                      "failedSince", "2026-11-19T08:00:00Z", "name", "n03");
	int64_t t;
	assert_int_equal(time_parse_rfc3339("2026-11-19T08:00:00Z", &t), NV_OK);
	assert_int_equal(op_domain_failed_since(d, "n02", t + 5000), t);
	assert_int_equal(op_domain_failed_since(d, "n03", t + 5000), t + 5000);
	assert_int_equal(op_domain_failed_since(d, "n09", t + 5000), t + 5000);
	json_decref(d);
}

static void test_op_domain_replace_failed_after_grace(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 4; i++)
		at(&f, i)->owner = "ns.cd";
	at(&f, 5)->owner = "ns.other"; /* in another domain: never a spare */
	at(&f, 6)->healthy = false;
	at(&f, 2)->failure = "NodeGone";
	at(&f, 2)->failed_since_ms = NOW - 10000;
	at(&f, 2)->healthy = false;

	/* Inside the grace: kept, marked, and looked at again when it ends. */
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_replace_failed(f.c, 18, 4, 30000, NOW, &p);
	assert_int_equal(p.nreplaced, 0);
	assert_int_equal(p.next_check_ms, NOW + 20000);
	assert_int_equal(member_index(&f, &p, 1), 2);
	assert_false(p.ready);

	/* Past it: the lowest free, healthy tray of the clique takes its place. */
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_replace_failed(f.c, 18, 4, 5000, NOW, &p);
	assert_int_equal(p.nreplaced, 1);
	assert_int_equal(f.c[p.replaced_from[0]].index, 2);
	assert_int_equal(f.c[p.replaced_to[0]].index, 7);
	assert_int_equal(p.n, 4);
	assert_true(p.placed);
	int want[] = {1, 3, 4, 7};
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(member_index(&f, &p, k), want[k]);
	json_t *peers = op_domain_peers(f.c, &p);
	assert_string_equal(json_string_value(json_array_get(peers, 3)), "10.0.0.7");
	json_decref(peers);

	/* No spare left in the clique: the failed member stays. */
	for (int i = 7; i <= 9; i++)
		at(&f, i)->owner = "ns.other";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_replace_failed(f.c, 18, 4, 5000, NOW, &p);
	assert_int_equal(p.nreplaced, 0);
	assert_int_equal(p.nunreplaced, 1);
	assert_int_equal(member_index(&f, &p, 1), 2);
}

static void test_op_domain_status_apply_failed_member(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 2; i++) {
		at(&f, i)->owner = "ns.cd";
		at(&f, i)->imex_ready = true;
	}
	at(&f, 2)->failure = "IMEXDaemonDown";
	at(&f, 2)->failed_since_ms = NOW - 1000;
	op_domain_place(f.c, 18, "ns.cd", 2, &p);
	json_t *d = json_pack("{s:{s:s,s:s,s:i}}", "metadata", "name", "cd", "namespace", "ns",
	                      "generation", 1);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	assert_string_equal(jx_str_or(d, "status.status", ""), "NotReady");
	assert_string_equal(jx_str_or(d, "status.nodes[0].status", ""), "Ready");
	assert_null(jx_path(d, "status.nodes[0].reason"));
	assert_string_equal(jx_str_or(d, "status.nodes[1].status", ""), "NotReady");
	assert_string_equal(jx_str_or(d, "status.nodes[1].reason", ""), "IMEXDaemonDown");
	int64_t t = 0;
	assert_int_equal(time_parse_rfc3339(jx_str_or(d, "status.nodes[1].failedSince", ""), &t),
	                 NV_OK);
	assert_int_equal(t, (NOW - 1000) / 1000 * 1000);
	assert_non_null(strstr(jx_str_or(kube_condition_find(d, "Ready"), "message", ""),
	                       "n02 (IMEXDaemonDown)"));
	json_decref(d);
}

static json_t *dom_with_clique(const char *clique)
{
	json_t *d = json_pack("{s:{s:s,s:s,s:i}}", "metadata", "name", "cd", "namespace", "ns",
	                      "generation", 1);
	if (clique)
		jx_set_take(d, "status", json_pack("{s:s}", "cliqueID", clique));
	return d;
}

static void test_op_domain_clique_split_marks_moved_members(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 4; i++)
		at(&f, i)->owner = "ns.cd";
	/* A partition change moved trays 3 and 4 to CQ2. */
	at(&f, 3)->clique = CQ2;
	at(&f, 4)->clique = CQ2;
	json_t *d = dom_with_clique(CQ1);
	assert_string_equal(op_domain_clique_split(f.c, 18, "ns.cd", d, NOW), CQ1);
	assert_null(at(&f, 1)->failure);
	assert_null(at(&f, 2)->failure);
	assert_string_equal(at(&f, 3)->failure, OP_DOMAIN_CLIQUE_CHANGED);
	assert_string_equal(at(&f, 4)->failure, OP_DOMAIN_CLIQUE_CHANGED);
	assert_int_equal(at(&f, 3)->failed_since_ms, NOW);
	assert_null(at(&f, 12)->failure); /* not a member */

	/* Without replaceFailedNodes: the members stay, the domain is NotReady
	 * and its Ready condition says why. */
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	assert_string_equal(p.clique, CQ1);
	assert_false(p.ready);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	const json_t *ready = kube_condition_find(d, "Ready");
	assert_string_equal(jx_str_or(ready, "status", ""), "False");
	assert_string_equal(jx_str_or(ready, "reason", ""), "CliqueSplit");
	assert_non_null(strstr(jx_str_or(ready, "message", ""), "split across cliques"));
	assert_non_null(strstr(jx_str_or(ready, "message", ""),
	                       "n03 (CliqueChanged: now in clique " CQ2 ")"));
	assert_string_equal(jx_str_or(d, "status.nodes[2].reason", ""), "CliqueChanged");

	/* With it: replaced at once (no grace) by the lowest free trays of the
	 * domain's clique, not of the clique they moved to. */
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_replace_failed(f.c, 18, 4, 120000, NOW, &p);
	assert_int_equal(p.nreplaced, 2);
	assert_int_equal(p.next_check_ms, 0);
	int want[] = {1, 2, 5, 6};
	for (unsigned k = 0; k < 4; k++)
		assert_int_equal(member_index(&f, &p, k), want[k]);
	json_decref(d);
}

static void test_op_domain_clique_split_majority_and_ties(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f);
	for (int i = 1; i <= 4; i++)
		at(&f, i)->owner = "ns.cd";
	/* The recorded clique is gone from every member: the majority wins. */
	for (int i = 2; i <= 4; i++)
		at(&f, i)->clique = CQ2;
	json_t *d = dom_with_clique("elsewhere.9");
	assert_string_equal(op_domain_clique_split(f.c, 18, "ns.cd", d, NOW), CQ2);
	assert_string_equal(at(&f, 1)->failure, OP_DOMAIN_CLIQUE_CHANGED);
	assert_null(at(&f, 2)->failure);
	json_decref(d);

	/* Two and two, nothing recorded: the lowest tray index decides; a
	 * member with no clique yet (a change in progress) is left alone. */
	fx_init(&f);
	for (int i = 1; i <= 4; i++)
		at(&f, i)->owner = "ns.cd";
	at(&f, 1)->clique = CQ2;
	at(&f, 2)->clique = CQ2;
	at(&f, 4)->clique = "";
	d = dom_with_clique(NULL);
	assert_string_equal(op_domain_clique_split(f.c, 18, "ns.cd", d, NOW), CQ2);
	assert_null(at(&f, 1)->failure);
	assert_string_equal(at(&f, 3)->failure, OP_DOMAIN_CLIQUE_CHANGED);
	assert_null(at(&f, 4)->failure);

	/* One clique: nothing to mark. */
	fx_init(&f);
	for (int i = 1; i <= 4; i++)
		at(&f, i)->owner = "ns.cd";
	assert_string_equal(op_domain_clique_split(f.c, 18, "ns.cd", d, NOW), CQ1);
	for (int i = 1; i <= 4; i++)
		assert_null(at(&f, i)->failure);
	json_decref(d);
}

static void test_op_domain_member_heartbeat_stale(void **state)
{
	(void)state;
	char hb[TIME_RFC3339_LEN];
	int64_t at_ms = -1;
	json_t *t = json_object();

	/* Never reported, or the check off: nothing to say, no timer. */
	assert_null(op_domain_member_heartbeat(t, 0, 120000, NOW, &at_ms));
	assert_int_equal(at_ms, 0);
	time_format_rfc3339(NOW - 60000, hb);
	jx_set_take(t, "status", json_pack("{s:s}", "heartbeatTime", hb));
	assert_null(op_domain_member_heartbeat(t, 0, 0, NOW, &at_ms));
	assert_int_equal(at_ms, 0);

	/* Fresh: the timer is set to the moment it goes stale. */
	assert_null(op_domain_member_heartbeat(t, 0, 120000, NOW, &at_ms));
	assert_int_equal(at_ms, NOW - 60000 + 120000 + 1);
	/* At the timeout still fresh (the Rack controller's rule), past it stale. */
	assert_null(op_domain_member_heartbeat(t, 0, 60000, NOW, NULL));
	assert_string_equal(op_domain_member_heartbeat(t, 0, 59000, NOW, &at_ms), "HeartbeatStale");
	assert_int_equal(at_ms, 0);
	/* A later Lease renewal counts as a sign of life. */
	assert_null(op_domain_member_heartbeat(t, NOW - 1000, 59000, NOW, &at_ms));
	assert_int_equal(at_ms, NOW - 1000 + 59000 + 1);
	json_decref(t);
}

static void test_op_domain_replace_failed_no_spare_recorded(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 9; i++)
		at(&f, i)->owner = i <= 2 ? "ns.cd" : "ns.other"; /* CQ1 is full */
	at(&f, 2)->failure = "HeartbeatStale";
	at(&f, 2)->failed_since_ms = NOW - 60000;
	op_domain_place(f.c, 18, "ns.cd", 2, &p);
	op_domain_replace_failed(f.c, 18, 2, 30000, NOW, &p);
	assert_int_equal(p.nreplaced, 0);
	assert_int_equal(p.nunreplaced, 1);
	assert_int_equal(f.c[p.unreplaced[0]].index, 2);
	json_t *d = dom_with_clique(CQ1);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	assert_string_equal(jx_str_or(d, "status.nodes[1].reason", ""), "HeartbeatStale");
	assert_string_equal(jx_str_or(d, "status.nodes[1].replacement", ""), "NoSpare");
	assert_null(jx_path(d, "status.nodes[0].replacement"));

	/* Still inside its grace: no verdict on spares yet. */
	op_domain_place(f.c, 18, "ns.cd", 2, &p);
	op_domain_replace_failed(f.c, 18, 2, 120000, NOW, &p);
	assert_int_equal(p.nunreplaced, 0);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	assert_null(jx_path(d, "status.nodes[1].replacement"));
	json_decref(d);
}

/* A spare takes the failed member's slot: the survivors keep their lines
 * of the peer list (and so their IMEX node names and connections), as the
 * status recorded them, across passes. */
static void test_op_domain_replacement_keeps_slots(void **state)
{
	(void)state;
	struct fx f;
	struct op_domain_plan p;
	fx_init(&f);
	for (int i = 1; i <= 4; i++)
		at(&f, i)->owner = "ns.cd";
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	json_t *d = dom_with_clique(CQ1);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	for (int i = 1; i <= 18; i++)
		at(&f, i)->has_slot = op_domain_prior_slot(d, at(&f, i)->node, &at(&f, i)->slot);
	assert_true(at(&f, 3)->has_slot);
	assert_int_equal(at(&f, 3)->slot, 2);
	assert_false(at(&f, 5)->has_slot);

	at(&f, 2)->failure = "NodeGone";
	at(&f, 2)->failed_since_ms = NOW - 60000;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	op_domain_replace_failed(f.c, 18, 4, 5000, NOW, &p);
	assert_int_equal(p.nreplaced, 1);
	json_t *peers = op_domain_peers(f.c, &p);
	char *s = json_dumps(peers, JSON_COMPACT);
	assert_string_equal(s, "[\"10.0.0.1\",\"10.0.0.5\",\"10.0.0.3\",\"10.0.0.4\"]");
	free(s);
	json_decref(peers);
	op_domain_status_apply(d, "ns.cd", f.c, &p, NOW);
	assert_string_equal(jx_str_or(d, "status.nodes[1].name", ""), "n05");
	assert_int_equal(json_integer_value(jx_path(d, "status.nodes[1].index")), 1);
	assert_string_equal(jx_str_or(d, "status.nodes[2].name", ""), "n03");

	/* A status with a slot out of range or taken twice: the lowest tray
	 * index keeps it, the others fill the free slots. */
	at(&f, 2)->failure = NULL;
	at(&f, 2)->owner = "ns.other";
	at(&f, 5)->owner = "ns.cd";
	at(&f, 5)->has_slot = true;
	at(&f, 5)->slot = 0;
	at(&f, 4)->slot = 9;
	op_domain_place(f.c, 18, "ns.cd", 4, &p);
	peers = op_domain_peers(f.c, &p);
	s = json_dumps(peers, JSON_COMPACT);
	assert_string_equal(s, "[\"10.0.0.1\",\"10.0.0.4\",\"10.0.0.3\",\"10.0.0.5\"]");
	free(s);
	json_decref(peers);
	json_decref(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_domain_place_best_fit_lowest_indexes),
	        cmocka_unit_test(test_op_domain_place_skips_unhealthy_unselected_taken),
	        cmocka_unit_test(test_op_domain_place_skips_nvidia_managed),
	        cmocka_unit_test(test_op_domain_place_no_clique_fits_claims_nothing),
	        cmocka_unit_test(test_op_domain_place_members_stay),
	        cmocka_unit_test(test_op_domain_place_ready_needs_every_member),
	        cmocka_unit_test(test_op_domain_peers_by_tray_index),
	        cmocka_unit_test(test_op_domain_key_fits_label),
	        cmocka_unit_test(test_op_domain_tray_patch_and_release),
	        cmocka_unit_test(test_op_domain_tray_patch_channels_all),
	        cmocka_unit_test(test_op_domain_claim_template_body),
	        cmocka_unit_test(test_op_domain_claim_judge),
	        cmocka_unit_test(test_op_domain_claim_status_apply),
	        cmocka_unit_test(test_op_domain_member_failure_reasons),
	        cmocka_unit_test(test_op_domain_failed_since_from_status),
	        cmocka_unit_test(test_op_domain_replace_failed_after_grace),
	        cmocka_unit_test(test_op_domain_status_apply_failed_member),
	        cmocka_unit_test(test_op_domain_clique_split_marks_moved_members),
	        cmocka_unit_test(test_op_domain_clique_split_majority_and_ties),
	        cmocka_unit_test(test_op_domain_member_heartbeat_stale),
	        cmocka_unit_test(test_op_domain_replace_failed_no_spare_recorded),
	        cmocka_unit_test(test_op_domain_replacement_keeps_slots),
	        cmocka_unit_test(test_op_domain_node_patch_only_our_label),
	        cmocka_unit_test(test_op_domain_status_apply_shape_and_no_change),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
