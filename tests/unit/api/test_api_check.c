// SPDX-License-Identifier: Apache-2.0
// Unit tests for the cross-object rules: a node in two racks, overlapping
// partitions, a tray its rack does not list, a rack or an upgrade that does
// not fit its matrix (target, blocked moves, intermediate tuples, CVEs),
// approvals for upgrades that do not need them, and which approvals count:
// bound to the upgrade's UID and target, not older than it, from a member
// of the layer's windowOwner group.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api_test.h"
#include "nvl72/api_domain.h"
#include "nvl72/api_rack.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/timeutil.h"

// Defines name(path): the object parsed from a data file, which must be valid.
#define DEFINE_LOAD(name, type, fn)                                                                \
	static type *name(const char *path)                                                        \
	{                                                                                          \
		json_t *j = test_load(path);                                                       \
		struct api_errors e;                                                               \
		type *out = NULL;                                                                  \
		api_errors_init(&e);                                                               \
		enum nv_err rc = fn(j, &out, &e);                                                  \
		test_show(&e);                                                                     \
		assert_int_equal(rc, NV_OK);                                                       \
		json_decref(j);                                                                    \
		return out;                                                                        \
	}

DEFINE_LOAD(load_rack, struct api_rack, api_rack_parse)
DEFINE_LOAD(load_matrix, struct matrix, api_matrix_parse)
DEFINE_LOAD(load_partition, struct api_rack_partition, api_rack_partition_parse)
DEFINE_LOAD(load_upgrade, struct api_rack_upgrade, api_rack_upgrade_parse)
DEFINE_LOAD(load_approval, struct api_upgrade_approval, api_upgrade_approval_parse)

static struct api_rack *rack_load(void)
{
	return load_rack("tests/data/api/rack-gb300-r07.json");
}

static struct matrix *matrix_load(const char *path)
{
	return load_matrix(path);
}

// A second rack, r08, with its own nodes, addresses and serial.
static struct api_rack *rack_other(const struct api_rack *r)
{
	struct api_rack *o = malloc(sizeof(*o));
	memcpy(o, r, sizeof(*o));
	snprintf(o->meta.name, sizeof(o->meta.name), "gb300-r08");
	snprintf(o->chassis_serial, sizeof(o->chassis_serial), "R08");
	for (unsigned i = 0; i < o->ncompute; i++)
		snprintf(o->compute[i].node, sizeof(o->compute[i].node), "r08-t%02u", i + 1);
	for (unsigned i = 0; i < o->nswitch; i++)
		snprintf(o->switches[i].oob_address, sizeof(o->switches[i].oob_address),
		         "10.40.8.%u", 101 + i);
	return o;
}

static void test_api_rack_check_unique_node_in_two_racks(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct api_rack *o = rack_other(r);
	const struct api_rack *others[] = {r, o};
	struct api_errors e;
	api_errors_init(&e);
	assert_int_equal(api_rack_check_unique(r, others, 2, &e), NV_OK);
	memcpy(o->compute[4].node, r->compute[4].node, sizeof(o->compute[4].node));
	memcpy(o->switches[0].oob_address, r->switches[0].oob_address,
	       sizeof(o->switches[0].oob_address));
	assert_int_equal(api_rack_check_unique(r, others, 2, &e), NV_E_INVALID_OBJECT);
	assert_true(
	        api_errors_has(&e, "spec.computeTrays[4].node",
	                       "node \"gb300-r07-t05\" is already tray 5 of rack \"gb300-r08\""));
	assert_true(api_errors_has(&e, "spec.switchTrays[0].oobAddress",
	                           "is already switch tray 1 of rack \"gb300-r08\""));
	assert_int_equal(e.n, 2);
	free(o);
	api_rack_free(r);
}

static void test_api_rack_check_matrix_stack_and_platform(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct matrix *m = matrix_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_errors e;
	api_errors_init(&e);
	assert_int_equal(api_rack_check_matrix(r, m, &e), NV_OK);
	snprintf(r->matrix_stack, sizeof(r->matrix_stack), "gb300-r999");
	r->platform = MATRIX_GB200;
	assert_int_equal(api_rack_check_matrix(r, m, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(
	        &e, "spec.matrix.stack",
	        "stack \"gb300-r999\" is not in CompatibilityMatrix \"gb300-2026.10\""));
	assert_true(api_errors_has(&e, "spec.platform", "rack is gb200"));
	api_errors_init(&e);
	assert_int_equal(api_rack_check_matrix(r, NULL, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.matrix.name", "does not exist"));
	matrix_free(m);
	api_rack_free(r);
}

static void test_api_rack_partition_check_overlap(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct api_rack_partition *a =
	        load_partition("tests/data/api/rackpartition-gb300-r07-a.json");
	struct api_rack_partition *b =
	        load_partition("tests/data/api/rackpartition-gb300-r07-b.json");
	const struct api_rack_partition *others[] = {a, b};
	struct api_errors e;
	api_errors_init(&e);
	assert_int_equal(api_rack_partition_check(b, r, others, 2, &e), NV_OK);
	b->trays |= 1u << 9;
	assert_int_equal(api_rack_partition_check(b, r, others, 2, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(
	        &e, "spec.trays",
	        "tray 9 of rack \"gb300-r07\" is already in partition \"gb300-r07-a\""));
	// Another rack's partition with the same trays is no overlap.
	api_errors_init(&e);
	snprintf(a->rack, sizeof(a->rack), "gb300-r08");
	assert_int_equal(api_rack_partition_check(b, r, others, 2, &e), NV_OK);
	assert_int_equal(api_rack_partition_check(b, NULL, others, 2, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.rack", "rack \"gb300-r07\" does not exist"));
	api_rack_partition_free(a);
	api_rack_partition_free(b);
	api_rack_free(r);
}

static void test_api_rack_upgrade_check_matrix_moves(void **state)
{
	(void)state;
	struct matrix *m = matrix_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	struct api_errors e;
	api_errors_init(&e);
	const char *from_ok[] = {"gb300-r580-159", "gb300-r580-159", "gb300-r580-173"};
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from_ok, 3, 0, &e), NV_OK);
	const char *from_old[] = {"gb300-r580-95"};
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from_old, 1, 0, &e),
	                 NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.target.stack",
	                           "no allowed move from \"gb300-r580-95\": gb300-r580-95 -> "
	                           "gb300-r580-173 is listed as blocked"));
	api_errors_init(&e);
	assert_int_equal(
	        api_rack_upgrade_check_matrix(u, m, from_old, 1, MATRIX_PLAN_MULTI_HOP, &e), NV_OK);
	const char *from_bad[] = {"gb300-r123", NULL};
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from_bad, 2, 0, &e),
	                 NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.target.stack",
	                           "the rack runs stack \"gb300-r123\", which is not in"));
	assert_true(api_errors_has(&e, "spec.target.stack", "runs no stack of the matrix"));
	api_errors_init(&e);
	snprintf(u->target_stack, sizeof(u->target_stack), "gb300-r580-999");
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from_ok, 1, 0, &e),
	                 NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(
	        &e, "spec.target.stack",
	        "stack \"gb300-r580-999\" is not in CompatibilityMatrix \"gb300-2026.10\""));
	api_errors_init(&e);
	snprintf(u->target_matrix, sizeof(u->target_matrix), "gb300-2026.07");
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from_ok, 1, 0, &e),
	                 NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.target.matrix", "does not exist"));
	api_rack_upgrade_free(u);
	matrix_free(m);
}

static void test_api_rack_upgrade_check_matrix_cves(void **state)
{
	(void)state;
	struct matrix *m = matrix_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-nvidia-5821.json");
	struct api_errors e;
	api_errors_init(&e);
	const char *from[] = {"gb300-r580-95"};
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from, 1, 0, &e), NV_OK);
	snprintf(u->cves[1], sizeof(u->cves[1]), "CVE-2026-99999");
	u->ncves = 2;
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from, 1, 0, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.cves[1]",
	                           "CVE-2026-99999 is not fixed by stack \"gb300-r580-159\""));
	assert_int_equal(e.n, 1);
	api_rack_upgrade_free(u);
	matrix_free(m);
}

static void test_api_rack_upgrade_check_matrix_intermediate(void **state)
{
	(void)state;
	struct matrix *m = matrix_load("tests/data/matrix/plan-cases.json");
	struct matrix_transition t;
	memset(&t, 0, sizeof(t));
	t.from = (unsigned)matrix_stack_index(m, "s1");
	t.to = (unsigned)matrix_stack_index(m, "s6");
	t.verdict = MATRIX_SAFE;
	t.nsteps = 2;
	t.steps[0].components = MATRIX_BIT(MATRIX_C_KUBERNETES);
	t.steps[1].components = MATRIX_BIT(MATRIX_C_NVOS) | MATRIX_BIT(MATRIX_C_DRIVER);
	assert_int_equal(matrix_transition_add(m, &t), NV_OK);
	struct api_rack_upgrade *u = calloc(1, sizeof(*u));
	snprintf(u->target_matrix, sizeof(u->target_matrix), "plan-cases");
	snprintf(u->target_stack, sizeof(u->target_stack), "s6");
	const char *from[] = {"s1"};
	struct api_errors e;
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_check_matrix(u, m, from, 1, 0, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(
	        &e, "spec.target.stack",
	        "s1 -> s6: the tuple after step 1 (kubernetes) is not a stack of this matrix"));
	free(u);
	matrix_free(m);
}

static void test_api_upgrade_approval_check_rules(void **state)
{
	(void)state;
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	struct api_upgrade_approval *a =
	        load_approval("tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json");
	struct api_rack_upgrade_status *us = calloc(1, sizeof(*us));
	struct api_errors e;
	api_errors_init(&e);
	us->required_approvals = MATRIX_BIT(MATRIX_L_FABRIC) | MATRIX_BIT(MATRIX_L_NODE);
	assert_int_equal(api_upgrade_approval_check(a, u, us, &e), NV_OK);
	assert_int_equal(api_upgrade_approval_check(a, u, NULL, &e), NV_OK);
	a->layer = MATRIX_L_WORKLOAD;
	us->phase = API_PHASE_COMPLETED;
	assert_int_equal(api_upgrade_approval_check(a, u, us, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.layer", "needs no approval for layer workload"));
	assert_true(api_errors_has(&e, "spec.upgrade", "is already Completed"));
	api_errors_init(&e);
	assert_int_equal(api_upgrade_approval_check(a, NULL, us, &e), NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.upgrade",
	                           "RackUpgrade \"gb300-r07-r580-173\" does not exist"));
	free(us);
	api_upgrade_approval_free(a);
	api_rack_upgrade_free(u);
}

/* An approval as the webhook stamps it: bound to upgrade u, created at
 * created_ms by a member of groups g1 and g2. */
static struct api_upgrade_approval *stamped_approval(const struct api_rack_upgrade *u,
                                                     int64_t created_ms, const char *g1,
                                                     const char *g2)
{
	json_t *j = test_load("tests/data/api/upgradeapproval-gb300-r07-r580-173-fabric.json");
	struct api_upgrade_approval *a = NULL;
	struct api_errors e;
	char ts[TIME_RFC3339_LEN];
	api_errors_init(&e);
	time_format_rfc3339(created_ms, ts);
	test_set(j, "metadata.creationTimestamp", json_string(ts));
	test_set(j, "spec.approvedBy",
	         json_pack("{s:s, s:s, s:[s, s]}", "username", "carol", "uid", "carol-uid",
	                   "groups", g1, g2));
	test_set(j, "spec.upgradeRef",
	         json_pack("{s:s, s:{s:s, s:s}}", "uid", u->meta.uid, "target", "matrix",
	                   u->target_matrix, "stack", u->target_stack));
	enum nv_err rc = api_upgrade_approval_parse(j, &a, &e);
	test_show(&e);
	assert_int_equal(rc, NV_OK);
	json_decref(j);
	return a;
}

#define T0 1795000000000LL /* the upgrade's creationTimestamp */

static bool counts(const struct api_upgrade_approval *a, const struct api_rack_upgrade *u,
                   const struct api_rack *r, const char *want_why)
{
	char why[512] = "";
	bool ok = api_upgrade_approval_counts(a, u, r, why, sizeof(why));
	if (want_why != NULL && strstr(why, want_why) == NULL)
		fail_msg("why \"%s\" lacks \"%s\"", why, want_why);
	return ok;
}

static void test_api_upgrade_approval_counts_owner_only(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	snprintf(u->meta.uid, sizeof(u->meta.uid), "%s", "3b1f6a52-0c1d-4e8f-9a7b-1c2d3e4f5a6b");
	u->meta.created_ms = T0;
	struct api_upgrade_approval *a =
	        stamped_approval(u, T0 + 1000, "system:authenticated", "nvl72:platform");
	assert_int_equal(a->ngroups, 2);
	assert_string_equal(a->upgrade_uid, u->meta.uid);
	assert_string_equal(a->upgrade_stack, "gb300-r580-173");
	assert_int_equal(a->meta.created_ms, T0 + 1000);
	// fabric's windowOwner is nvl72:platform: carol is a member.
	assert_true(counts(a, u, r, NULL));
	// Same second as the upgrade still counts (timestamps are seconds).
	a->meta.created_ms = T0;
	assert_true(counts(a, u, r, NULL));
	snprintf(a->groups[1], sizeof(a->groups[1]), "%s", "nvl72:viewers");
	assert_false(counts(a, u, r, "carol is not in group nvl72:platform"));
	// An empty windowOwner lets nobody through, not everybody.
	snprintf(a->groups[1], sizeof(a->groups[1]), "%s", "nvl72:platform");
	for (unsigned k = 0; k < r->nresp; k++)
		if (r->resp[k].layer == MATRIX_L_FABRIC)
			r->resp[k].window_owner[0] = '\0';
	assert_false(counts(a, u, r, "layer fabric of rack \"gb300-r07\" has no windowOwner"));
	// Nor does a layer without an entry (a manual edge asks for it).
	r->nresp = 0;
	assert_false(counts(a, u, r, "has no windowOwner"));
	assert_false(counts(a, u, NULL, "rack \"gb300-r07\" is unknown"));
	api_upgrade_approval_free(a);
	api_rack_upgrade_free(u);
	api_rack_free(r);
}

static void test_api_upgrade_approval_counts_this_upgrade_only(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	snprintf(u->meta.uid, sizeof(u->meta.uid), "%s", "3b1f6a52-0c1d-4e8f-9a7b-1c2d3e4f5a6b");
	u->meta.created_ms = T0;
	struct api_upgrade_approval *a = stamped_approval(u, T0, "nvl72:platform", "x");
	assert_true(counts(a, u, r, NULL));
	// Recreated under the same name: a new UID, created later.
	snprintf(u->meta.uid, sizeof(u->meta.uid), "%s", "9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4");
	u->meta.created_ms = T0 + 60000;
	assert_false(counts(a, u, r, "it approved an earlier upgrade of that name"));
	// Even stamped with the new UID, an approval older than the upgrade.
	snprintf(a->upgrade_uid, sizeof(a->upgrade_uid), "%s", u->meta.uid);
	assert_false(counts(a, u, r, "it was created before RackUpgrade \"gb300-r07-r580-173\""));
	a->meta.created_ms = T0 + 60000;
	assert_true(counts(a, u, r, NULL));
	// Another target than the one approved.
	snprintf(u->target_stack, sizeof(u->target_stack), "%s", "gb300-r580-95");
	assert_false(counts(a, u, r, "it approved target gb300-2026.10/gb300-r580-173"));
	snprintf(u->target_stack, sizeof(u->target_stack), "%s", "gb300-r580-173");
	// Not stamped by the webhook (created with it bypassed).
	a->upgrade_uid[0] = '\0';
	assert_false(counts(a, u, r, "spec.upgradeRef is missing"));
	snprintf(a->upgrade, sizeof(a->upgrade), "%s", "another");
	assert_false(counts(a, u, r, "it approves RackUpgrade \"another\""));
	api_upgrade_approval_free(a);
	api_rack_upgrade_free(u);
	api_rack_free(r);
}

/* Which layers need an approval, and which of them nobody could give. */
static void test_api_upgrade_required_layers_and_owners(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct matrix *m = matrix_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	struct matrix_plan p;
	const char *from[] = {"gb300-r580-95"};
	struct api_errors e;
	// 95 -> 173 goes over a manual edge: every touched layer approves.
	assert_int_equal(
	        matrix_plan_build(m, "gb300-r580-95", "gb300-r580-173", MATRIX_PLAN_MULTI_HOP, &p),
	        NV_OK);
	assert_int_equal(p.verdict, MATRIX_MANUAL);
	uint32_t touched = api_upgrade_touched_layers(&p);
	assert_true(touched & MATRIX_BIT(MATRIX_L_NODE));
	assert_int_equal(api_upgrade_required_layers(r, API_UPGRADE_ROUTINE, &p), touched);
	assert_int_equal(api_upgrade_required_layers(r, API_UPGRADE_SECURITY, &p), 0);
	// 95 -> 159 is safe: only the touched layers with approvalRequired.
	assert_int_equal(
	        matrix_plan_build(m, "gb300-r580-95", "gb300-r580-159", MATRIX_PLAN_MULTI_HOP, &p),
	        NV_OK);
	assert_int_equal(p.verdict, MATRIX_SAFE);
	uint32_t need = api_upgrade_required_layers(r, API_UPGRADE_ROUTINE, &p);
	assert_false(need & MATRIX_BIT(MATRIX_L_NODE)); // node: approvalRequired false
	assert_true(need & MATRIX_BIT(MATRIX_L_WORKLOAD));
	// Every layer of the fixture rack has an owner.
	assert_int_equal(api_rack_ownerless_layers(r, ~0u), 0);
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_check_owners(u, m, r, from, 1, MATRIX_PLAN_MULTI_HOP, &e),
	                 NV_OK);
	// Without one for node the manual edge cannot be approved.
	r->resp[2].window_owner[0] = '\0';
	assert_int_equal(r->resp[2].layer, MATRIX_L_NODE);
	assert_int_equal(api_rack_ownerless_layers(r, ~0u), MATRIX_BIT(MATRIX_L_NODE));
	assert_int_equal(api_rack_upgrade_check_owners(u, m, r, from, 1, MATRIX_PLAN_MULTI_HOP, &e),
	                 NV_E_INVALID_OBJECT);
	assert_true(
	        api_errors_has(&e, "spec.target.stack",
	                       "the move from \"gb300-r580-95\" needs an approval of layer node, "
	                       "but rack \"gb300-r07\" names no windowOwner for it"));
	// A layer with no entry at all is the same.
	r->nresp = 0;
	assert_int_equal(api_rack_ownerless_layers(r, MATRIX_BIT(MATRIX_L_FABRIC)),
	                 MATRIX_BIT(MATRIX_L_FABRIC));
	// A security upgrade needs none.
	u->cls = API_UPGRADE_SECURITY;
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_check_owners(u, m, r, from, 1, MATRIX_PLAN_MULTI_HOP, &e),
	                 NV_OK);
	api_rack_upgrade_free(u);
	matrix_free(m);
	api_rack_free(r);
}

/* onGateFailure RollBack needs a way back: the forward edges marked
 * reversible and the move back listed and allowed. */
static void test_api_rack_upgrade_check_rollback(void **state)
{
	(void)state;
	struct api_rack *r = rack_load();
	struct matrix *m = matrix_load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json");
	struct api_rack_upgrade *u =
	        load_upgrade("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	const char *from95[] = {"gb300-r580-95"}, *from159[] = {"gb300-r580-159"};
	char why[256];
	struct api_errors e;
	// 95 -> 159 is marked reversible and 159 -> 95 is listed (manual).
	assert_int_equal(api_upgrade_rollback_check(m, "gb300-r580-95", "gb300-r580-159",
	                                            MATRIX_PLAN_MULTI_HOP, why, sizeof(why)),
	                 NV_OK);
	// 159 -> 173 is not marked reversible; 173 -> 159 is blocked anyway.
	assert_int_equal(api_upgrade_rollback_check(m, "gb300-r580-159", "gb300-r580-173",
	                                            MATRIX_PLAN_MULTI_HOP, why, sizeof(why)),
	                 NV_E_UNSUPPORTED);
	assert_non_null(strstr(why, "does not mark the move gb300-r580-159 -> gb300-r580-173 "
	                            "reversible"));
	assert_int_equal(api_upgrade_rollback_check(m, "gb300-r580-95", "nowhere",
	                                            MATRIX_PLAN_MULTI_HOP, why, sizeof(why)),
	                 NV_E_NOT_FOUND);
	// A Rack that holds on a failed gate needs none.
	api_errors_init(&e);
	assert_int_equal(
	        api_rack_upgrade_check_rollback(u, m, r, from159, 1, MATRIX_PLAN_MULTI_HOP, &e),
	        NV_OK);
	r->policy.on_gate_failure = API_ON_GATE_ROLL_BACK;
	assert_int_equal(
	        api_rack_upgrade_check_rollback(u, m, r, from159, 1, MATRIX_PLAN_MULTI_HOP, &e),
	        NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.target.stack",
	                           "rack \"gb300-r07\" rolls a failed canary back "
	                           "(spec.policy.onGateFailure: RollBack), but"));
	snprintf(u->target_stack, sizeof(u->target_stack), "gb300-r580-159");
	api_errors_init(&e);
	assert_int_equal(
	        api_rack_upgrade_check_rollback(u, m, r, from95, 1, MATRIX_PLAN_MULTI_HOP, &e),
	        NV_OK);
	// The move back blocked: refused too.
	for (unsigned i = 0; i < m->ntransitions; i++)
		if (strcmp(m->stacks[m->transitions[i].from].name, "gb300-r580-159") == 0 &&
		    strcmp(m->stacks[m->transitions[i].to].name, "gb300-r580-95") == 0)
			m->transitions[i].verdict = MATRIX_BLOCKED;
	assert_int_equal(
	        api_rack_upgrade_check_rollback(u, m, r, from95, 1, MATRIX_PLAN_MULTI_HOP, &e),
	        NV_E_INVALID_OBJECT);
	assert_true(api_errors_has(&e, "spec.target.stack",
	                           "allows no move back gb300-r580-159 -> gb300-r580-95"));
	api_rack_upgrade_free(u);
	matrix_free(m);
	api_rack_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_api_rack_check_unique_node_in_two_racks),
	        cmocka_unit_test(test_api_rack_check_matrix_stack_and_platform),
	        cmocka_unit_test(test_api_rack_partition_check_overlap),
	        cmocka_unit_test(test_api_rack_upgrade_check_matrix_moves),
	        cmocka_unit_test(test_api_rack_upgrade_check_matrix_cves),
	        cmocka_unit_test(test_api_rack_upgrade_check_matrix_intermediate),
	        cmocka_unit_test(test_api_upgrade_approval_check_rules),
	        cmocka_unit_test(test_api_upgrade_approval_counts_owner_only),
	        cmocka_unit_test(test_api_upgrade_approval_counts_this_upgrade_only),
	        cmocka_unit_test(test_api_upgrade_required_layers_and_owners),
	        cmocka_unit_test(test_api_rack_upgrade_check_rollback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
