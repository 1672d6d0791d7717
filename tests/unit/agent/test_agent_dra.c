// SPDX-License-Identifier: Apache-2.0
// Unit tests for the pure half of the kubelet plugin: the tray as the
// plugin sees it, the node's ResourceSlice and when it differs, the checks
// on canned ResourceClaims (tests/data/agent/dra/), and the record of
// prepared claims.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/agent.h"
#include "nvl72/base.h"
#include "nvl72/json.h"

#define CD_UID "8d3c1b2a-4e5f-4a6b-9c7d-0e1f2a3b4c5d"
#define CLAIM_UID "5f0c3e1a-9b2d-4c61-8e7f-2a4b6c8d0e13"
#define CLIQUE "3c9a5e21-7f04-4b6d-8e2a-91d0c4f7a6b3.32766"

static json_t *load(const char *name)
{
	char path[256];
	json_error_t e;
	json_t *o;

	snprintf(path, sizeof(path), "tests/data/agent/dra/%s", name);
	o = json_load_file(path, 0, &e);
	if (o == NULL)
		fail_msg("%s: %s", path, e.text);
	return o;
}

/* The tray node-03 in ComputeDomain team-a/train, IMEX Up. */
static void view_member(struct agent_dra_view *v)
{
	memset(v, 0, sizeof(*v));
	str_copy(v->node, sizeof(v->node), "node-03");
	str_copy(v->domain_uid, sizeof(v->domain_uid), CD_UID);
	str_copy(v->domain_ns, sizeof(v->domain_ns), "team-a");
	str_copy(v->domain_name, sizeof(v->domain_name), "train");
	v->imex_ready = true;
	str_copy(v->clique, sizeof(v->clique), CLIQUE);
	str_copy(v->rack, sizeof(v->rack), "r1");
	v->tray = 3;
	v->slots = 4;
	v->channel_count = 16;
	v->n_channel_ids = 2;
	v->channel_ids[0] = 0;
	v->channel_ids[1] = 3;
}

static enum nv_err check(const char *file, const char *ns, const char *name, const char *uid,
                         const struct agent_dra_view *v, struct agent_dra_plan *plan, char *err,
                         size_t errsz)
{
	json_t *claim = load(file);
	enum nv_err rc = agent_dra_claim_check(claim, ns, name, uid, v, plan, err, errsz);
	json_decref(claim);
	return rc;
}

/* ---- claims ---- */

static void test_agent_dra_claim_check_single(void **state)
{
	struct agent_dra_view v;
	struct agent_dra_plan plan;
	unsigned ch[8];
	char err[512] = "";

	(void)state;
	view_member(&v);
	assert_int_equal(check("claim-single.json", "team-a", "job-channel", CLAIM_UID, &v, &plan,
	                       err, sizeof(err)),
	                 NV_OK);
	/* Only this node's device of this driver; the claim's own config. */
	assert_int_equal(plan.n_devices, 1);
	assert_string_equal(plan.devices[0].request, "channel");
	assert_string_equal(plan.devices[0].pool, "node-03");
	assert_string_equal(plan.devices[0].device, "slot-1");
	assert_string_equal(plan.domain_uid, CD_UID);
	assert_false(plan.all);
	assert_int_equal(agent_dra_plan_channels(&plan, &v, ch, 8), 1);
	assert_int_equal(ch[0], 0);
}

static void test_agent_dra_claim_check_all(void **state)
{
	struct agent_dra_view v;
	struct agent_dra_plan plan;
	unsigned ch[32];
	char err[512] = "";

	(void)state;
	view_member(&v);
	assert_int_equal(check("claim-all.json", "team-a", "job-all", CLAIM_UID, &v, &plan, err,
	                       sizeof(err)),
	                 NV_OK);
	assert_true(plan.all);
	/* The tray's channel ids ... */
	assert_int_equal(agent_dra_plan_channels(&plan, &v, ch, 32), 2);
	assert_int_equal(ch[1], 3);
	/* ... or every channel below the count with allocationMode All. */
	v.channels_all = true;
	assert_int_equal(agent_dra_plan_channels(&plan, &v, ch, 32), 16);
	assert_int_equal(ch[15], 15);
	assert_int_equal(agent_dra_plan_channels(&plan, &v, ch, 4), 4);
	/* None named: All cannot be served. */
	v.channels_all = false;
	v.n_channel_ids = 0;
	assert_int_equal(check("claim-all.json", "team-a", "job-all", CLAIM_UID, &v, &plan, err,
	                       sizeof(err)),
	                 NV_E_STATE);
	assert_non_null(strstr(err, "claim team-a/job-all: allocationMode All"));
}

struct refusal {
	const char *file, *ns, *name, *uid;
	void (*tweak)(struct agent_dra_view *v);
	enum nv_err rc;
	const char *err;
};

static void no_domain(struct agent_dra_view *v)
{
	v->domain_uid[0] = v->domain_ns[0] = v->domain_name[0] = '\0';
	v->imex_ready = false;
}

static void other_domain(struct agent_dra_view *v)
{
	str_copy(v->domain_uid, sizeof(v->domain_uid), "11111111-2222-4333-8444-555555555555");
	str_copy(v->domain_name, sizeof(v->domain_name), "other");
}

static void imex_down(struct agent_dra_view *v)
{
	v->imex_ready = false;
}

static void test_agent_dra_claim_check_refusals(void **state)
{
	static const struct refusal rows[] = {
	        {"claim-single.json", "team-a", "job-channel",
	         "6a1d4f2b-0c3e-4d72-9f80-3b5c7d9e1f24", NULL, NV_E_INVAL,
	         "claim team-a/job-channel: its UID is " CLAIM_UID
	         ", not 6a1d4f2b-0c3e-4d72-9f80-3b5c7d9e1f24 (the claim was replaced)"},
	        {"claim-unallocated.json", "team-a", "unallocated", CLAIM_UID, NULL, NV_E_INVAL,
	         "claim team-a/unallocated: it is not allocated (no status.allocation)"},
	        {"claim-other-pool.json", "team-a", "elsewhere", CLAIM_UID, NULL, NV_E_INVAL,
	         "claim team-a/elsewhere: status.allocation.devices.results has no device of "
	         "driver imex.nvl72.io in pool node-03"},
	        {"claim-no-config.json", "team-a", "no-config", CLAIM_UID, NULL, NV_E_INVAL,
	         "claim team-a/no-config: status.allocation.devices.config has no opaque config "
	         "of driver imex.nvl72.io"},
	        {"claim-bad-kind.json", "team-a", "bad-kind", CLAIM_UID, NULL, NV_E_INVAL,
	         "claim team-a/bad-kind: opaque parameters are nvl72.io/v1alpha1 "
	         "ComputeDomainChannelConfig, not nvl72.io/v1alpha1 ImexChannelConfig"},
	        /* The kubelet names the claim's namespace; the domain's is team-a. */
	        {"claim-single.json", "team-b", "job-channel", CLAIM_UID, NULL, NV_E_INVAL,
	         "claim team-b/job-channel: namespace team-b is not the namespace of "
	         "ComputeDomain team-a/train"},
	        {"claim-single.json", "team-a", "job-channel", CLAIM_UID, no_domain, NV_E_INVAL,
	         "claim team-a/job-channel: this tray (node-03) is in no ComputeDomain, not "
	         "in " CD_UID},
	        {"claim-single.json", "team-a", "job-channel", CLAIM_UID, other_domain, NV_E_INVAL,
	         "claim team-a/job-channel: this tray (node-03) is in ComputeDomain team-a/other "
	         "(11111111-2222-4333-8444-555555555555), not in " CD_UID},
	        {"claim-single.json", "team-a", "job-channel", CLAIM_UID, imex_down, NV_E_STATE,
	         "claim team-a/job-channel: the IMEX daemon of this tray (node-03) is not READY "
	         "for "
	         "ComputeDomain team-a/train"},
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(rows); i++) {
		struct agent_dra_view v;
		struct agent_dra_plan plan;
		char err[512] = "";
		view_member(&v);
		if (rows[i].tweak)
			rows[i].tweak(&v);
		assert_int_equal(check(rows[i].file, rows[i].ns, rows[i].name, rows[i].uid, &v,
		                       &plan, err, sizeof(err)),
		                 rows[i].rc);
		assert_string_equal(err, rows[i].err);
	}
}

/* ---- the view ---- */

static void test_agent_dra_view_build_member(void **state)
{
	const char *text =
	        "{\"metadata\":{\"name\":\"r1-t03\",\"labels\":{\"nvl72.io/partition\":\"p1\"}},"
	        "\"spec\":{\"rack\":\"r1\",\"index\":3,\"node\":\"node-03\",\"imex\":{"
	        "\"domain\":\"team-a.train\",\"domainUID\":\"" CD_UID
	        "\",\"peers\":[\"10.0.0.3\"]}}}";
	json_t *tray = NULL;
	struct agent_spec spec;
	struct host_obs obs;
	struct agent_dra_view v;
	char err[256];

	(void)state;
	assert_int_equal(jx_loadb(text, strlen(text), NULL, &tray, NULL), NV_OK);
	assert_int_equal(agent_spec_parse(tray, "10.0.0.3", &spec, err, sizeof(err)), NV_OK);
	/* Nothing observed yet: four slots, IMEX not ready. */
	agent_dra_view_build(tray, &spec, NULL, "node-03", &v);
	assert_string_equal(v.domain_uid, CD_UID);
	assert_string_equal(v.domain_ns, "team-a");
	assert_string_equal(v.domain_name, "train");
	assert_string_equal(v.partition, "p1");
	assert_string_equal(v.rack, "r1");
	assert_int_equal(v.tray, 3);
	assert_int_equal(v.slots, AGENT_DRA_SLOTS_DEFAULT);
	assert_false(v.imex_ready);

	memset(&obs, 0, sizeof(obs));
	obs.n_gpus = 2;
	obs.has_clique = true;
	str_copy(obs.clique, sizeof(obs.clique), CLIQUE);
	obs.imex_read = true;
	obs.imex.daemon = HOST_IMEXD_READY;
	obs.imex.dom.domain = HOST_IMEX_DOMAIN_UP;
	agent_dra_view_build(tray, &spec, &obs, "node-03", &v);
	assert_true(v.imex_ready);
	assert_int_equal(v.slots, 2);
	assert_string_equal(v.clique, CLIQUE);
	obs.imex.dom.domain = HOST_IMEX_DOMAIN_DEGRADED;
	agent_dra_view_build(tray, &spec, &obs, "node-03", &v);
	assert_false(v.imex_ready);
	json_decref(tray);
}

/* ---- the slice ---- */

static void test_agent_dra_slice_build_attributes(void **state)
{
	struct agent_dra_view v;
	json_t *s, *d;

	(void)state;
	view_member(&v);
	s = agent_dra_slice_build(&v, 7);
	assert_non_null(s);
	assert_string_equal(jx_str_or(s, "metadata.name", ""), "node-03-imex.nvl72.io");
	assert_string_equal(jx_str_or(s, "spec.driver", ""), "imex.nvl72.io");
	assert_string_equal(jx_str_or(s, "spec.nodeName", ""), "node-03");
	assert_string_equal(jx_str_or(s, "spec.pool.name", ""), "node-03");
	assert_int_equal(json_integer_value(jx_path(s, "spec.pool.generation")), 7);
	assert_int_equal(json_integer_value(jx_path(s, "spec.pool.resourceSliceCount")), 1);
	assert_int_equal(json_array_size(jx_path(s, "spec.devices")), 4);
	d = jx_path(s, "spec.devices[3]");
	assert_string_equal(jx_str_or(d, "name", ""), "slot-3");
	assert_string_equal(jx_str_or(d, "attributes.domain.string", "x"), CD_UID);
	assert_string_equal(jx_str_or(d, "attributes.domainNamespace.string", "x"), "team-a");
	assert_string_equal(jx_str_or(d, "attributes.domainName.string", "x"), "train");
	assert_true(json_is_true(jx_path(d, "attributes.imexReady.bool")));
	assert_string_equal(jx_str_or(d, "attributes.clique.string", "x"), CLIQUE);
	assert_string_equal(jx_str_or(d, "attributes.rack.string", "x"), "r1");
	assert_string_equal(jx_str_or(d, "attributes.partition.string", "x"), "");
	assert_int_equal(json_integer_value(jx_path(d, "attributes.tray.int")), 3);
	assert_int_equal(json_integer_value(jx_path(d, "attributes.channel.int")), 0);
	assert_int_equal(json_object_size(jx_path(d, "attributes")), 9);
	json_decref(s);

	/* Out of any domain: every attribute still there, empty or false. */
	no_domain(&v);
	s = agent_dra_slice_build(&v, 1);
	d = jx_path(s, "spec.devices[0]");
	assert_string_equal(jx_str_or(d, "attributes.domain.string", "x"), "");
	assert_string_equal(jx_str_or(d, "attributes.domainName.string", "x"), "");
	assert_true(json_is_false(jx_path(d, "attributes.imexReady.bool")));
	assert_int_equal(json_object_size(jx_path(d, "attributes")), 9);
	json_decref(s);
}

static void test_agent_dra_slice_differs(void **state)
{
	struct agent_dra_view v;
	json_t *a, *b;

	(void)state;
	view_member(&v);
	a = agent_dra_slice_build(&v, 1);
	b = agent_dra_slice_build(&v, 5);
	/* What the API server adds and the generation are not content. */
	jx_set_str(b, "metadata.resourceVersion", "42");
	jx_set_str(b, "metadata.uid", "u");
	assert_false(agent_dra_slice_differs(b, a));
	json_decref(b);
	v.imex_ready = false;
	b = agent_dra_slice_build(&v, 1);
	assert_true(agent_dra_slice_differs(b, a));
	json_decref(b);
	view_member(&v);
	v.slots = 3;
	b = agent_dra_slice_build(&v, 1);
	assert_true(agent_dra_slice_differs(b, a));
	json_decref(b);
	assert_true(agent_dra_slice_differs(NULL, a));
	json_decref(a);
}

static void test_agent_dra_slice_name_too_long(void **state)
{
	char node[260], name[300];

	(void)state;
	memset(node, 'a', 250);
	node[250] = '\0';
	assert_int_equal(agent_dra_slice_name(node, name, sizeof(name)), NV_E_TOO_LARGE);
	assert_int_equal(agent_dra_slice_name("", name, sizeof(name)), NV_E_TOO_LARGE);
	assert_int_equal(agent_dra_slice_name("n", name, sizeof(name)), NV_OK);
	assert_string_equal(name, "n-imex.nvl72.io");
}

/* ---- the record ---- */

static void test_agent_dra_record_round_trip(void **state)
{
	struct agent_dra_view v;
	struct agent_dra_plan plan;
	unsigned ch[] = {0};
	char err[512] = "", *text;
	json_t *e, *root, *back = NULL;

	(void)state;
	view_member(&v);
	assert_int_equal(check("claim-single.json", "team-a", "job-channel", CLAIM_UID, &v, &plan,
	                       err, sizeof(err)),
	                 NV_OK);
	e = agent_dra_record_entry("team-a", "job-channel", CLAIM_UID, &plan, ch, 1, 234,
	                           1796000000000LL);
	assert_string_equal(jx_str_or(e, "cdiDeviceIDs[0]", ""),
	                    "imex.nvl72.io/channel=" CLAIM_UID);
	assert_string_equal(jx_str_or(e, "devices[0].deviceName", ""), "slot-1");
	assert_string_equal(jx_str_or(e, "devices[0].requestNames[0]", ""), "channel");
	assert_string_equal(jx_str_or(e, "allocationMode", ""), "Single");
	root = json_pack("{s:{s:o}}", "claims", CLAIM_UID, e);
	text = json_dumps(root, 0);
	assert_int_equal(agent_dra_record_parse(text, strlen(text), &back, err, sizeof(err)),
	                 NV_OK);
	assert_true(json_equal(root, back));
	free(text);
	json_decref(back);

	/* A damaged entry fails the record, naming the claim and the field. */
	json_object_del(jx_path(root, "claims." CLAIM_UID), "major");
	text = json_dumps(root, 0);
	back = NULL;
	assert_int_equal(agent_dra_record_parse(text, strlen(text), &back, err, sizeof(err)),
	                 NV_E_PARSE);
	assert_null(back);
	assert_string_equal(err, "claims." CLAIM_UID ": major is missing or malformed");
	free(text);
	json_decref(root);
	assert_int_equal(agent_dra_record_parse("{\"claims\":[]}", 13, &back, err, sizeof(err)),
	                 NV_E_PARSE);
	assert_int_equal(agent_dra_record_parse("{\"claims\":", 10, &back, err, sizeof(err)),
	                 NV_E_PARSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_agent_dra_claim_check_single),
	        cmocka_unit_test(test_agent_dra_claim_check_all),
	        cmocka_unit_test(test_agent_dra_claim_check_refusals),
	        cmocka_unit_test(test_agent_dra_view_build_member),
	        cmocka_unit_test(test_agent_dra_slice_build_attributes),
	        cmocka_unit_test(test_agent_dra_slice_differs),
	        cmocka_unit_test(test_agent_dra_slice_name_too_long),
	        cmocka_unit_test(test_agent_dra_record_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
