// SPDX-License-Identifier: Apache-2.0
// Unit tests for tray verdicts and rack aggregation: ready and pending trays,
// the degraded decision and what counts towards it, stacks and skew, fabric
// state, the timer for the next heartbeat expiry, and the policy and
// desired stack as the parsed Rack gives them.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "op_fixture.h"

static void eval(struct fx_rack_objs *o, struct op_rack_eval *ev)
{
	op_rack_evaluate(o->spec, o->m, o->in, 18, FX_NOW, 120000, ev);
}

static void test_op_rack_evaluate_all_healthy(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	eval(&o, &ev);
	assert_int_equal(ev.ready, 18);
	assert_int_equal(ev.unavailable, 0);
	assert_false(ev.degraded);
	assert_string_equal(ev.stack, "s-95");
	assert_string_equal(ev.desired_driver, "580.95.05");
	assert_string_equal(ev.fabric, "Healthy");
	assert_int_equal(ev.ncliques, 2);
	assert_int_equal(ev.healthy_gpus, 72);
	assert_string_equal(ev.cluster_uuid, FX_CLUSTER);
	/* The next look is when the freshest-but-oldest heartbeat expires. */
	assert_int_equal(ev.next_check_ms, FX_NOW - 10000 + 120000 + 1);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_degraded_above_threshold(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	fx_set_tray(&o, 2, fx_tray(3, "580.95.05", 1, FX_NOW - 1000, "False"));
	fx_set_tray(&o, 6, fx_tray(7, "580.95.05", 1, FX_NOW - 1000, "False"));
	eval(&o, &ev);
	assert_int_equal(ev.counted, 2);
	assert_false(ev.degraded); /* two is not more than two */
	assert_string_equal(ev.trays[2].why, "TrayNotReady");
	fx_set_tray(&o, 10, fx_tray(11, "580.95.05", 2, FX_NOW - 3600000, "True"));
	eval(&o, &ev);
	assert_int_equal(ev.counted, 3);
	assert_true(ev.degraded);
	assert_string_equal(ev.trays[10].why, "HeartbeatStale");
	assert_false(ev.trays[10].online);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_lease_keeps_tray_alive(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	fx_set_tray(&o, 0, fx_tray(1, "580.95.05", 1, FX_NOW - 3600000, "True"));
	o.in[0].lease_renew_ms = FX_NOW - 5000;
	eval(&o, &ev);
	assert_true(ev.trays[0].ready);
	assert_int_equal(ev.trays[0].heartbeat_ms, FX_NOW - 5000);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_pending_trays_do_not_degrade(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	char created[TIME_RFC3339_LEN];
	fx_objs_init(&o, 2);
	fx_time(FX_NOW - 1000, created);
	for (int i = 0; i < 18; i++)
		fx_set_tray(&o, i,
		            json_pack("{s:{s:s,s:s},s:{s:s,s:i}}", "metadata", "name", o.names[i],
		                      "creationTimestamp", created, "spec", "rack", "r07", "index",
		                      i + 1));
	eval(&o, &ev);
	assert_int_equal(ev.ready, 0);
	assert_int_equal(ev.unavailable, 18);
	assert_int_equal(ev.counted, 0);
	assert_false(ev.degraded);
	assert_string_equal(ev.trays[0].why, "AwaitingAgent");
	assert_string_equal(ev.fabric, "Unknown");
	assert_string_equal(ev.stack, "");
	/* Past the grace a silent tray is down. */
	op_rack_evaluate(o.spec, o.m, o.in, 18, FX_NOW + 200000, 120000, &ev);
	assert_true(ev.degraded);
	assert_string_equal(ev.trays[0].why, "NoHeartbeat");
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_lease_without_status_is_pending(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	char created[TIME_RFC3339_LEN];
	fx_objs_init(&o, 2);
	fx_time(FX_NOW - 1000, created);
	for (int i = 0; i < 18; i++) {
		fx_set_tray(&o, i,
		            json_pack("{s:{s:s,s:s},s:{s:s,s:i}}", "metadata", "name", o.names[i],
		                      "creationTimestamp", created, "spec", "rack", "r07", "index",
		                      i + 1));
		/* The agent renews its Lease but has written no status yet. */
		o.in[i].lease_renew_ms = FX_NOW - 500;
	}
	eval(&o, &ev);
	assert_int_equal(ev.counted, 0);
	assert_false(ev.degraded);
	assert_string_equal(ev.trays[0].why, "AwaitingAgent");
	/* Past the grace, a heartbeat without a status is down. */
	for (int i = 0; i < 18; i++)
		o.in[i].lease_renew_ms = FX_NOW + 199000;
	op_rack_evaluate(o.spec, o.m, o.in, 18, FX_NOW + 200000, 120000, &ev);
	assert_true(ev.degraded);
	assert_string_equal(ev.trays[0].why, "NoStatus");
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_own_cordon_is_not_unavailable(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	json_t *n = fx_node(4, true);
	json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
	json_object_set_new(json_object_get(n, "metadata"), "annotations",
	                    json_pack("{s:s}", DRAIN_ANN_CORDONED_BY, "rack/r07"));
	fx_set_node(&o, 3, n);
	n = fx_node(5, true);
	json_object_set_new(json_object_get(n, "spec"), "unschedulable", json_true());
	fx_set_node(&o, 4, n);
	eval(&o, &ev);
	assert_true(ev.trays[3].ready);
	assert_true(ev.trays[3].cordoned_by_us);
	assert_false(ev.trays[4].ready);
	assert_string_equal(ev.trays[4].why, "NodeCordoned");
	assert_int_equal(ev.counted, 1);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_node_problems(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	fx_set_node(&o, 0, NULL);
	fx_set_node(&o, 1, fx_node(2, false));
	json_t *t = fx_tray(3, "580.95.05", 1, FX_NOW - 1000, "True");
	json_object_set_new(json_object_get(t, "spec"), "maintenance",
	                    json_pack("{s:s}", "state", "Draining"));
	fx_set_tray(&o, 2, t);
	eval(&o, &ev);
	assert_string_equal(ev.trays[0].why, "NodeNotFound");
	assert_string_equal(ev.trays[1].why, "NodeNotReady");
	assert_string_equal(ev.trays[2].why, "InMaintenance");
	assert_true(ev.degraded);
	fx_objs_clear(&o);
}

/* A Node the agent's node selector leaves out: down at once, even a tray
 * that was never heard from (no start grace) and one still heartbeating
 * (its pod is on the way out), while a NotReady Node keeps its reason. */
static void test_op_rack_evaluate_agent_not_scheduled(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	fx_set_tray(&o, 0, NULL);
	o.in[0].agent_unmet = "nvl72.test/provisioned=true";
	o.in[1].agent_unmet = "nvl72.test/provisioned=true";
	fx_set_node(&o, 2, fx_node(3, false));
	o.in[2].agent_unmet = "nvl72.test/provisioned=true";
	o.in[3].agent_unmet = "";
	eval(&o, &ev);
	assert_string_equal(ev.trays[0].why, "AgentNotScheduled");
	assert_false(ev.trays[0].pending);
	assert_string_equal(ev.trays[1].why, "AgentNotScheduled");
	assert_false(ev.trays[1].ready);
	assert_string_equal(ev.trays[2].why, "NodeNotReady");
	assert_true(ev.trays[3].ready);
	assert_int_equal(ev.counted, 3);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_mixed_stack_and_skew(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	fx_set_tray(&o, 5, fx_tray(6, "580.173.02", 1, FX_NOW - 1000, "True"));
	eval(&o, &ev);
	assert_string_equal(ev.stack, "mixed");
	assert_string_equal(ev.trays[5].stack, "s-173");
	assert_string_equal(ev.skew[0].component, "driver");
	assert_int_equal(ev.skew[0].n, 2);
	assert_int_equal(ev.skew[2].n, 1);
	fx_objs_clear(&o);
}

/* One GPU of tray 5 on another VBIOS: two versions, the GPU named. */
static void test_op_rack_evaluate_vbios_skew_names_gpu(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	eval(&o, &ev);
	assert_int_equal(ev.skew[2].n, 1);
	assert_string_equal(ev.vbios_odd, "");
	json_object_set_new(json_array_get(jx_path(o.trays[4], "status.gpus"), 1), "vbios",
	                    json_string("97.01"));
	eval(&o, &ev);
	assert_string_equal(ev.stack, "s-95");
	assert_string_equal(ev.skew[2].component, "gpuFirmware");
	assert_int_equal(ev.skew[2].n, 2);
	assert_string_equal(ev.vbios_common, "97.00");
	assert_string_equal(ev.vbios_odd, "r07-t05 GPU 1 (97.01)");
	/* Six odd GPUs: four named, the rest counted. */
	for (int t = 6; t <= 7; t++)
		for (int g = 0; g < 3; g++)
			json_object_set_new(
			        json_array_get(jx_path(o.trays[t], "status.gpus"), (size_t)g),
			        "vbios", json_string("97.02"));
	eval(&o, &ev);
	assert_int_equal(ev.skew[2].n, 3);
	assert_string_equal(ev.vbios_common, "97.00");
	assert_string_equal(ev.vbios_odd, "r07-t05 GPU 1 (97.01); r07-t07 GPU 0 (97.02); "
	                                  "r07-t07 GPU 1 (97.02); r07-t07 GPU 2 (97.02); 3 more");
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_fabric_problems(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	/* Tray 4 in partition a reports clique 2. */
	fx_set_tray(&o, 3, fx_tray(4, "580.95.05", 2, FX_NOW - 1000, "True"));
	eval(&o, &ev);
	assert_string_equal(ev.fabric, "Unhealthy");
	assert_string_equal(ev.fabric_reason, "CliqueMismatch");
	fx_set_tray(&o, 3, fx_tray(4, "580.95.05", 1, FX_NOW - 1000, "True"));
	json_t *g = json_array_get(jx_path(o.trays[3], "status.gpus"), 2);
	json_object_set_new(json_object_get(g, "fabric"), "healthSummary",
	                    json_string("Unhealthy"));
	eval(&o, &ev);
	assert_string_equal(ev.fabric, "Degraded");
	assert_string_equal(ev.fabric_msg, "tray 4 GPU 2: Unhealthy");
	assert_int_equal(ev.healthy_gpus, 71);
	jx_set_str(o.trays[3], "status.fabric.state", "InProgress");
	eval(&o, &ev);
	assert_string_equal(ev.fabric_reason, "FabricNotCompleted");
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_policy_defaults(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	json_object_del(json_object_get(o.rack, "spec"), "policy");
	api_rack_free(o.spec);
	o.spec = fx_rack_spec(o.rack);
	eval(&o, &ev);
	assert_int_equal(ev.threshold, 2);
	assert_int_equal(ev.min_healthy, 16);
	assert_true(ev.cordon_policy);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_policy_from_spec(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	jx_set_take(o.rack, "spec.policy",
	            json_pack("{s:i,s:i,s:i,s:b}", "maxUnavailableTrays", 1, "degradedThreshold", 4,
	                      "minHealthyTrays", 12, "cordonWhenDegraded", 0));
	api_rack_free(o.spec);
	o.spec = fx_rack_spec(o.rack);
	for (int i = 0; i < 4; i++)
		fx_set_tray(&o, i, fx_tray(i + 1, "580.95.05", 1, FX_NOW - 1000, "False"));
	eval(&o, &ev);
	assert_int_equal(ev.threshold, 4);
	assert_int_equal(ev.min_healthy, 12);
	assert_false(ev.cordon_policy);
	assert_int_equal(ev.counted, 4);
	assert_false(ev.degraded);
	fx_objs_clear(&o);
}

static void test_op_rack_evaluate_matrix_unknown(void **state)
{
	(void)state;
	struct fx_rack_objs o;
	struct op_rack_eval ev;
	fx_objs_init(&o, 2);
	op_rack_evaluate(o.spec, NULL, o.in, 18, FX_NOW, 120000, &ev);
	assert_string_equal(ev.desired_stack, "s-95");
	assert_string_equal(ev.desired_driver, "");
	assert_string_equal(ev.trays[0].stack, "");
	assert_string_equal(ev.trays[0].driver, "580.95.05");
	assert_int_equal(ev.ready, 18);
	fx_objs_clear(&o);
}

static void test_op_tray_heartbeat_ms_later_wins(void **state)
{
	(void)state;
	json_t *t = fx_tray(1, "580.95.05", 1, FX_NOW - 5000, "True");
	assert_int_equal(op_tray_heartbeat_ms(t, 0), FX_NOW - 5000);
	assert_int_equal(op_tray_heartbeat_ms(t, FX_NOW), FX_NOW);
	assert_int_equal(op_tray_heartbeat_ms(NULL, 0), 0);
	json_decref(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_rack_evaluate_all_healthy),
	        cmocka_unit_test(test_op_rack_evaluate_degraded_above_threshold),
	        cmocka_unit_test(test_op_rack_evaluate_lease_keeps_tray_alive),
	        cmocka_unit_test(test_op_rack_evaluate_pending_trays_do_not_degrade),
	        cmocka_unit_test(test_op_rack_evaluate_lease_without_status_is_pending),
	        cmocka_unit_test(test_op_rack_evaluate_own_cordon_is_not_unavailable),
	        cmocka_unit_test(test_op_rack_evaluate_node_problems),
	        cmocka_unit_test(test_op_rack_evaluate_agent_not_scheduled),
	        cmocka_unit_test(test_op_rack_evaluate_mixed_stack_and_skew),
	        cmocka_unit_test(test_op_rack_evaluate_vbios_skew_names_gpu),
	        cmocka_unit_test(test_op_rack_evaluate_fabric_problems),
	        cmocka_unit_test(test_op_rack_evaluate_policy_defaults),
	        cmocka_unit_test(test_op_rack_evaluate_policy_from_spec),
	        cmocka_unit_test(test_op_rack_evaluate_matrix_unknown),
	        cmocka_unit_test(test_op_tray_heartbeat_ms_later_wins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
