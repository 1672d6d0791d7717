// SPDX-License-Identifier: Apache-2.0
// Unit tests for what the Rack controller writes: status and conditions
// (written only when changed, transition times kept), Node label and cordon
// patches (only our keys; never a foreign cordon), tray ownership, and the
// Rack's finalizer.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nvl72/kube_ctrl.h"
#include "op_fixture.h"

static const char *cond(const json_t *obj, const char *type, const char *field)
{
	return jx_str_or(kube_condition_find(obj, type), field, "");
}

static void test_op_rack_status_apply_healthy_then_no_change(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	op_rack_evaluate(o.spec, o.m, o.in, 18, FX_NOW, 120000, &ev);
	json_t *want = json_deep_copy(o.rack);
	jx_set_take(want, "status.upgrade",
	            json_pack("{s:s,s:s}", "name", "u1", "phase", "Notice"));
	jx_set_take(o.rack, "status.upgrade",
	            json_pack("{s:s,s:s}", "name", "u1", "phase", "Notice"));
	op_rack_status_apply(want, &ev, false, FX_NOW);
	assert_string_equal(jx_str_or(want, "status.stack", ""), "s-95");
	assert_int_equal(json_integer_value(jx_path(want, "status.observedGeneration")), 3);
	assert_int_equal(json_integer_value(jx_path(want, "status.capacity.readyTrays")), 18);
	assert_int_equal(json_array_size(jx_path(want, "status.trays")), 18);
	assert_int_equal(json_array_size(jx_path(want, "status.versionSkew")), 0);
	assert_string_equal(jx_str_or(want, "status.fabric.cliques[1].partition", ""), "r07-b");
	assert_string_equal(cond(want, "Ready", "reason"), "CapacityMet");
	assert_string_equal(cond(want, "FabricHealthy", "status"), "True");
	assert_string_equal(cond(want, "VersionsConsistent", "status"), "True");
	assert_string_equal(cond(want, "Degraded", "status"), "False");
	assert_string_equal(cond(want, "UpgradeInProgress", "status"), "True");
	assert_string_equal(cond(want, "UpgradeInProgress", "reason"), "Notice");
	assert_int_equal(json_integer_value(json_object_get(kube_condition_find(want, "Ready"),
	                                                    "observedGeneration")),
	                 3);

	json_t *patch = op_rack_status_patch(o.rack, want);
	assert_non_null(patch);
	assert_string_equal(jx_str_or(patch, "metadata.resourceVersion", ""), "100");
	assert_null(jx_path(patch, "status.upgrade")); /* not ours: untouched */
	json_decref(patch);

	/* The apiserver now holds want; a later pass with the same facts
	 * must produce no patch, even an hour later. */
	json_t *again = json_deep_copy(want);
	op_rack_status_apply(again, &ev, false, FX_NOW + 3600000);
	assert_null(op_rack_status_patch(want, again));
	json_decref(again);
	json_decref(want);
	fx_objs_clear(&o);
}

/* Same stack everywhere, one GPU on another VBIOS: VersionsConsistent
 * False, naming the tray and the GPU; the skew is in status.versionSkew. */
static void test_op_rack_status_vbios_skew(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	json_object_set_new(json_array_get(jx_path(o.trays[10], "status.gpus"), 3), "vbios",
	                    json_string("97.01"));
	op_rack_evaluate(o.spec, o.m, o.in, 18, FX_NOW, 120000, &ev);
	json_t *want = json_deep_copy(o.rack);
	op_rack_status_apply(want, &ev, false, FX_NOW);
	assert_string_equal(jx_str_or(want, "status.stack", ""), "s-95");
	assert_string_equal(cond(want, "VersionsConsistent", "status"), "False");
	assert_string_equal(cond(want, "VersionsConsistent", "reason"), "FirmwareSkew");
	assert_string_equal(cond(want, "VersionsConsistent", "message"),
	                    "every reporting tray runs s-95, but the VBIOS differs: r07-t11 GPU 3 "
	                    "(97.01); the rest run 97.00");
	assert_string_equal(jx_str_or(want, "status.versionSkew[0].component", ""), "gpuFirmware");
	assert_int_equal(json_array_size(jx_path(want, "status.versionSkew[0].versions")), 2);
	json_decref(want);
	fx_objs_clear(&o);
}

static void test_op_rack_status_apply_degraded_message(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	json_t *want = json_deep_copy(o.rack);
	op_rack_evaluate(o.spec, o.m, o.in, 18, FX_NOW, 120000, &ev);
	op_rack_status_apply(want, &ev, false, FX_NOW);
	const char *t0 = cond(want, "Degraded", "lastTransitionTime");
	char first[TIME_RFC3339_LEN];
	snprintf(first, sizeof(first), "%s", t0);
	for (int i = 2; i < 5; i++)
		fx_set_tray(&o, i, fx_tray(i + 1, "580.95.05", 1, FX_NOW - 1000, "False"));
	op_rack_evaluate(o.spec, o.m, o.in, 18, FX_NOW, 120000, &ev);
	op_rack_status_apply(want, &ev, true, FX_NOW + 60000);
	assert_string_equal(cond(want, "Degraded", "status"), "True");
	assert_string_equal(cond(want, "Degraded", "reason"), "TraysUnavailable");
	assert_string_equal(
	        cond(want, "Degraded", "message"),
	        "3 trays unavailable (threshold 2): t03 TrayNotReady, t04 TrayNotReady, "
	        "t05 TrayNotReady; the rack's Nodes are cordoned");
	assert_string_not_equal(cond(want, "Degraded", "lastTransitionTime"), first);
	assert_string_equal(cond(want, "Ready", "status"), "False");
	assert_string_equal(cond(want, "Ready", "reason"), "CapacityBelowMinimum");
	/* Each tray that is not ready says why in status.trays; a ready one
	 * has no reason. */
	json_t *trays = jx_path(want, "status.trays");
	assert_string_equal(jx_str_or(json_array_get(trays, 2), "reason", ""), "TrayNotReady");
	assert_null(json_object_get(json_array_get(trays, 0), "reason"));
	json_decref(want);
	fx_objs_clear(&o);
}

static void test_op_node_labels_patch_only_our_keys(void **state)
{
	(void)state;
	json_t *n = fx_node(3, true);
	json_t *p = op_node_labels_patch(n, "r07", 3, FX_CLUSTER ".1", "r07-a");
	assert_non_null(p);
	json_t *labels = jx_path(p, "metadata.labels");
	assert_int_equal(json_object_size(labels), 4);
	assert_string_equal(json_string_value(json_object_get(labels, OP_LABEL_TRAY_INDEX)), "3");
	assert_null(json_object_get(labels, "team"));
	/* Applied: nothing more to do. */
	json_t *applied = jx_merge_patch_apply(n, p);
	json_decref(p);
	assert_null(op_node_labels_patch(applied, "r07", 3, FX_CLUSTER ".1", "r07-a"));
	/* The clique is lost: that label alone goes. */
	p = op_node_labels_patch(applied, "r07", 3, "", "r07-a");
	assert_int_equal(json_object_size(jx_path(p, "metadata.labels")), 1);
	assert_true(json_is_null(json_object_get(jx_path(p, "metadata.labels"), OP_LABEL_CLIQUE)));
	json_decref(p);
	/* Released from the rack: all four removed, "team" kept. */
	p = op_node_labels_patch(applied, NULL, 0, NULL, NULL);
	assert_int_equal(json_object_size(jx_path(p, "metadata.labels")), 4);
	json_t *gone = jx_merge_patch_apply(applied, p);
	assert_int_equal(json_object_size(jx_path(gone, "metadata.labels")), 1);
	json_decref(gone);
	json_decref(p);
	json_decref(applied);
	json_decref(n);
}

static void test_drain_cordon_patch_rack_owner(void **state)
{
	(void)state;
	json_t *n = fx_node(3, true), *p, *c;
	/* Cordon a schedulable Node: flag, our mark, its resourceVersion. */
	p = drain_cordon_patch(n, "rack/r07", true);
	assert_true(json_is_true(jx_path(p, "spec.unschedulable")));
	assert_string_equal(json_string_value(json_object_get(jx_path(p, "metadata.annotations"),
	                                                      DRAIN_ANN_CORDONED_BY)),
	                    "rack/r07");
	assert_string_equal(jx_str_or(p, "metadata.resourceVersion", ""), "55");
	c = jx_merge_patch_apply(n, p);
	json_decref(p);
	assert_null(drain_cordon_patch(c, "rack/r07", true));    /* already */
	assert_null(drain_cordon_patch(c, "rack/other", false)); /* not the other rack's */
	p = drain_cordon_patch(c, "rack/r07", false);            /* ours: lift it */
	json_t *u = jx_merge_patch_apply(c, p);
	assert_false(json_is_true(jx_path(u, "spec.unschedulable")));
	assert_int_equal(json_object_size(jx_path(u, "metadata.annotations")), 0);
	json_decref(u);
	json_decref(p);
	json_decref(c);
	/* Someone else's cordon: never marked, never lifted. */
	json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
	assert_null(drain_cordon_patch(n, "rack/r07", true));
	assert_null(drain_cordon_patch(n, "rack/r07", false));
	json_decref(n);
}

static void test_op_tray_build_and_check(void **state)
{
	(void)state;
	json_t *rack = fx_rack(2), *patch = NULL;
	json_t *t = op_tray_build(rack, 7, "r07-t07", "580.95.05");
	assert_string_equal(jx_str_or(t, "metadata.name", ""), "r07-t07");
	assert_string_equal(jx_str_or(t, "spec.driver.version", ""), "580.95.05");
	assert_string_equal(jx_str_or(t, "metadata.ownerReferences[0].uid", ""), "uid-r07");
	assert_true(json_is_true(jx_path(t, "metadata.ownerReferences[0].controller")));
	assert_true(json_is_true(jx_path(t, "metadata.ownerReferences[0].blockOwnerDeletion")));
	assert_int_equal(op_tray_check(t, rack, 7, "r07-t07", &patch), OP_TRAY_OK);
	assert_int_equal(op_tray_check(t, rack, 7, "r07-x", &patch), OP_TRAY_RECREATE);

	/* Unowned: adopted, keeping another owner's reference. */
	json_object_set_new(json_object_get(t, "metadata"), "ownerReferences",
	                    json_pack("[{s:s,s:s}]", "kind", "Thing", "uid", "u9"));
	jx_set_str(t, "metadata.resourceVersion", "12");
	assert_int_equal(op_tray_check(t, rack, 7, "r07-t07", &patch), OP_TRAY_PATCH);
	assert_int_equal(json_array_size(jx_path(patch, "metadata.ownerReferences")), 2);
	assert_string_equal(jx_str_or(patch, "metadata.resourceVersion", ""), "12");
	json_decref(patch);

	/* Another controller owns it. */
	json_object_set_new(
	        json_object_get(t, "metadata"), "ownerReferences",
	        json_pack("[{s:s,s:s,s:b}]", "kind", "Rack", "uid", "u-other", "controller", 1));
	assert_int_equal(op_tray_check(t, rack, 7, "r07-t07", &patch), OP_TRAY_FOREIGN);
	json_decref(t);

	char name[64];
	op_tray_name("r07", 3, name);
	assert_string_equal(name, "r07-t03");
	json_decref(rack);
}

static void test_op_finalizer_patch_keeps_others(void **state)
{
	(void)state;
	json_t *rack = fx_rack(2), *p;
	jx_set_str(rack, "metadata.resourceVersion", "41");
	assert_false(op_has_finalizer(rack, OP_FINALIZER_RACK));
	assert_null(op_finalizer_patch(rack, OP_FINALIZER_RACK, false));

	/* Added after another's, with the resourceVersion. */
	jx_set_take(rack, "metadata.finalizers", json_pack("[s]", "example.com/keep"));
	p = op_finalizer_patch(rack, OP_FINALIZER_RACK, true);
	assert_non_null(p);
	assert_string_equal(jx_str_or(p, "metadata.resourceVersion", ""), "41");
	assert_int_equal(json_array_size(jx_path(p, "metadata.finalizers")), 2);
	assert_string_equal(jx_str_or(p, "metadata.finalizers[0]", ""), "example.com/keep");
	assert_string_equal(jx_str_or(p, "metadata.finalizers[1]", ""), OP_FINALIZER_RACK);
	jx_set_take(rack, "metadata.finalizers", json_incref(jx_path(p, "metadata.finalizers")));
	json_decref(p);
	assert_true(op_has_finalizer(rack, OP_FINALIZER_RACK));
	assert_null(op_finalizer_patch(rack, OP_FINALIZER_RACK, true));

	/* Removed: the other stays. */
	p = op_finalizer_patch(rack, OP_FINALIZER_RACK, false);
	assert_non_null(p);
	assert_int_equal(json_array_size(jx_path(p, "metadata.finalizers")), 1);
	assert_string_equal(jx_str_or(p, "metadata.finalizers[0]", ""), "example.com/keep");
	json_decref(p);
	json_decref(rack);
}

static void test_op_tray_owned_by_uid(void **state)
{
	(void)state;
	json_t *rack = fx_rack(2);
	json_t *t = op_tray_build(rack, 4, "r07-t04", "");
	assert_true(op_tray_owned_by(t, rack));

	/* Same name, another incarnation of the Rack: not ours to delete. */
	json_t *other = json_deep_copy(rack);
	jx_set_str(other, "metadata.uid", "uid-r07-new");
	assert_false(op_tray_owned_by(t, other));

	/* A non-controller reference does not count. */
	jx_set_take(t, "metadata.ownerReferences",
	            json_pack("[{s:s,s:s,s:s}]", "kind", "Rack", "name", "r07", "uid", "uid-r07"));
	assert_false(op_tray_owned_by(t, rack));
	json_decref(other);
	json_decref(t);
	json_decref(rack);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_rack_status_apply_healthy_then_no_change),
	        cmocka_unit_test(test_op_rack_status_apply_degraded_message),
	        cmocka_unit_test(test_op_rack_status_vbios_skew),
	        cmocka_unit_test(test_op_node_labels_patch_only_our_keys),
	        cmocka_unit_test(test_drain_cordon_patch_rack_owner),
	        cmocka_unit_test(test_op_tray_build_and_check),
	        cmocka_unit_test(test_op_finalizer_patch_keeps_others),
	        cmocka_unit_test(test_op_tray_owned_by_uid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
