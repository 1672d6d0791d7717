// SPDX-License-Identifier: Apache-2.0
// Unit tests for selector upgrades' pass (op_fleet_eval): the racks picked
// once in name order, children created, slots given only to children
// waiting in Scheduled with their window open and never more than
// maxParallelRacks, a halted rack freeing its slot (Continue) or stopping
// the rest (Stop), abort and pause passed on, a deleted child not made
// again, refusals retried after a minute, and the names of children.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/operator_upgrade.h"

#define T0 1794787200000LL /* 2026-11-16T00:00:00Z */

struct fx {
	struct api_rack_upgrade u;
	struct api_rack_upgrade_status st;
	struct op_fleet_child kids[8];
	char names[8][64];
	const char *racks[8];
	unsigned nracks, nkids;
	struct op_fleet_out out;
	int64_t now;
};

static struct fx *fx_new(int max, unsigned nracks)
{
	static const char *const racks[] = {"gb300-r08", "gb300-r07", "gb300-r09", "gb300-r10"};
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->u.meta.name, sizeof(f->u.meta.name), "fleet-r580-159");
	f->u.max_parallel_racks = max;
	for (unsigned i = 0; i < nracks; i++)
		f->racks[i] = racks[i];
	f->nracks = nracks;
	f->now = T0;
	return f;
}

static void fx_free(struct fx *f)
{
	api_rack_upgrade_status_clear(&f->st);
	free(f);
}

static void pass(struct fx *f)
{
	struct op_fleet_in in = {
	        .u = &f->u,
	        .racks = f->racks,
	        .nracks = f->nracks,
	        .children = f->kids,
	        .nchildren = f->nkids,
	        .now_ms = f->now,
	};
	op_fleet_eval(&in, &f->st, &f->out);
}

/* The acts of the last pass of one kind, as a bit per rack index. */
static unsigned acts(const struct fx *f, enum op_fleet_act_kind kind)
{
	unsigned bits = 0;
	for (unsigned i = 0; i < f->out.nacts; i++)
		if (f->out.acts[i].kind == kind)
			bits |= 1u << f->out.acts[i].rack;
	return bits;
}

/* The children the CREATE acts asked for, made and seen in the cache. */
static void create_all(struct fx *f)
{
	for (unsigned i = 0; i < f->out.nacts; i++) {
		if (f->out.acts[i].kind != OP_FLEET_CREATE)
			continue;
		const struct api_upgrade_rack *r = &f->st.racks[f->out.acts[i].rack];
		struct op_fleet_child *c = &f->kids[f->nkids];
		snprintf(f->names[f->nkids], sizeof(f->names[0]), "%s", r->upgrade);
		c->name = f->names[f->nkids];
		c->rack = r->name;
		c->has_phase = true;
		c->phase = API_PHASE_NOTICE;
		f->nkids++;
	}
}

static struct op_fleet_child *kid(struct fx *f, const char *rack)
{
	for (unsigned i = 0; i < f->nkids; i++)
		if (strcmp(f->kids[i].rack, rack) == 0)
			return &f->kids[i];
	fail_msg("no child for %s", rack);
	return NULL;
}

static void scheduled(struct fx *f, const char *rack)
{
	struct op_fleet_child *c = kid(f, rack);
	c->phase = API_PHASE_SCHEDULED;
	c->scheduled_start_ms = f->now;
}

/* GRANT acts performed: the children carry the annotation. */
static void stamp(struct fx *f)
{
	for (unsigned i = 0; i < f->out.nacts; i++)
		if (f->out.acts[i].kind == OP_FLEET_GRANT)
			kid(f, f->st.racks[f->out.acts[i].rack].name)->granted = true;
}

static void test_fleet_picks_racks_in_order_and_creates_children(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 3);
	pass(f);
	assert_int_equal(f->st.nracks, 3);
	assert_string_equal(f->st.racks[0].name, "gb300-r07");
	assert_string_equal(f->st.racks[1].name, "gb300-r08");
	assert_string_equal(f->st.racks[2].name, "gb300-r09");
	assert_string_equal(f->st.racks[0].upgrade, "fleet-r580-159-gb300-r07");
	assert_int_equal(acts(f, OP_FLEET_CREATE), 7u);
	assert_int_equal(f->st.phase, API_PHASE_ROLLING_OUT);
	assert_non_null(strstr(f->st.message, "0 of 3 racks Completed; waiting: gb300-r07"));
	assert_true(f->out.changed);
	assert_string_equal(f->out.events[0].reason, "RacksPicked");
	create_all(f);
	/* A rack labelled later is not picked: the set is the first pass's. */
	f->racks[f->nracks++] = "gb300-r10";
	pass(f);
	assert_int_equal(f->st.nracks, 3);
	assert_int_equal(f->out.nacts, 0);
	assert_int_equal(f->st.racks[1].phase, API_PHASE_NOTICE);
	fx_free(f);
}

static void test_fleet_no_rack_halts(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 0);
	pass(f);
	assert_int_equal(f->st.phase, API_PHASE_HALTED);
	assert_non_null(strstr(f->st.message, "no Rack has every label"));
	assert_int_equal(f->st.nracks, 0);
	/* Labelled now, the racks are picked. */
	f->racks[0] = "gb300-r07";
	f->nracks = 1;
	pass(f);
	assert_int_equal(f->st.nracks, 1);
	assert_int_equal(acts(f, OP_FLEET_CREATE), 1u);
	assert_int_equal(f->st.phase, API_PHASE_ROLLING_OUT);
	fx_free(f);
}

static void test_fleet_one_slot_at_a_time(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 3);
	pass(f);
	create_all(f);
	/* Nothing waits with its window open: no slot is given. */
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_GRANT), 0u);
	/* r08 and r09 wait in Scheduled; r07 is still in its notice. */
	scheduled(f, "gb300-r08");
	scheduled(f, "gb300-r09");
	kid(f, "gb300-r09")->scheduled_start_ms = f->now + 3600000; /* window not open */
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_GRANT), 2u);
	assert_int_equal(f->st.racks[1].slot_ms, f->now);
	assert_int_equal(f->st.start_ms, f->now);
	/* Read back before the stamp landed: the status holds the slot, so
	 * the same child is stamped again and no other gets one. */
	kid(f, "gb300-r09")->scheduled_start_ms = f->now;
	scheduled(f, "gb300-r07");
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_GRANT), 2u);
	assert_int_equal(f->st.racks[0].slot_ms, 0);
	assert_int_equal(f->st.racks[2].slot_ms, 0);
	stamp(f);
	kid(f, "gb300-r08")->phase = API_PHASE_CANARY;
	pass(f);
	assert_int_equal(f->out.nacts, 0);
	assert_non_null(strstr(f->st.message, "running: gb300-r08; waiting: gb300-r07, gb300-r09"));
	/* r08 completes: r07 (first in name order) gets the slot. */
	kid(f, "gb300-r08")->phase = API_PHASE_COMPLETED;
	f->now += 1000;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_GRANT), 1u);
	assert_int_equal(f->st.racks[0].slot_ms, f->now);
	fx_free(f);
}

static void test_fleet_two_slots(void **state)
{
	(void)state;
	struct fx *f = fx_new(2, 3);
	pass(f);
	create_all(f);
	scheduled(f, "gb300-r07");
	scheduled(f, "gb300-r08");
	scheduled(f, "gb300-r09");
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_GRANT), 3u);
	assert_string_equal(f->out.events[0].reason, "RackStarted");
	assert_non_null(strstr(f->out.events[1].note, "2 of 2 slots"));
	fx_free(f);
}

static void test_fleet_halt_continue_and_stop(void **state)
{
	(void)state;
	for (int stop = 0; stop <= 1; stop++) {
		struct fx *f = fx_new(1, 2);
		f->u.on_rack_halt = stop ? API_ON_RACK_HALT_STOP : API_ON_RACK_HALT_CONTINUE;
		pass(f);
		create_all(f);
		scheduled(f, "gb300-r07");
		scheduled(f, "gb300-r08");
		pass(f);
		stamp(f);
		assert_int_equal(acts(f, OP_FLEET_GRANT), 1u);
		kid(f, "gb300-r07")->phase = API_PHASE_HALTED;
		kid(f, "gb300-r07")->message = "the canary's gate failed";
		pass(f);
		assert_string_equal(f->st.racks[0].message, "the canary's gate failed");
		if (!stop) {
			/* Its slot is free: r08 starts; the parent runs on. */
			assert_int_equal(acts(f, OP_FLEET_GRANT), 2u);
			assert_int_equal(f->st.phase, API_PHASE_ROLLING_OUT);
			stamp(f);
			kid(f, "gb300-r08")->phase = API_PHASE_COMPLETED;
			pass(f);
			assert_int_equal(f->st.phase, API_PHASE_HALTED);
			assert_non_null(
			        strstr(f->st.message,
			               "1 of 2 racks Completed; halted: gb300-r07 (Halted)"));
			assert_true(f->out.events[0].warning);
		} else {
			assert_int_equal(acts(f, OP_FLEET_GRANT), 0u);
			assert_int_equal(f->st.phase, API_PHASE_HALTED);
			assert_non_null(strstr(f->st.message, "onRackHalt is Stop"));
		}
		fx_free(f);
	}
}

static void test_fleet_all_completed(void **state)
{
	(void)state;
	struct fx *f = fx_new(2, 2);
	pass(f);
	create_all(f);
	kid(f, "gb300-r07")->phase = API_PHASE_COMPLETED;
	kid(f, "gb300-r08")->phase = API_PHASE_COMPLETED;
	f->now += 5000;
	pass(f);
	assert_int_equal(f->st.phase, API_PHASE_COMPLETED);
	assert_int_equal(f->st.completion_ms, f->now);
	/* Final: nothing more is done. */
	kid(f, "gb300-r08")->phase = API_PHASE_HALTED;
	pass(f);
	assert_false(f->out.changed);
	assert_int_equal(f->st.phase, API_PHASE_COMPLETED);
	fx_free(f);
}

static void test_fleet_abort_and_pause_passed_on(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 3);
	pass(f);
	create_all(f);
	f->nkids = 2; /* r09's child not made yet */
	kid(f, "gb300-r07")->phase = API_PHASE_COMPLETED;
	f->u.paused = true;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_PAUSE), 2u); /* r07 ended: left alone */
	assert_int_equal(f->st.phase, API_PHASE_PAUSED);
	kid(f, "gb300-r08")->paused = true;
	kid(f, "gb300-r08")->paused_by_parent = true;
	f->u.paused = false;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_RESUME), 2u);
	/* A child a person paused stays paused. */
	kid(f, "gb300-r08")->paused_by_parent = false;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_RESUME), 0u);
	f->u.abort = true;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_ABORT), 2u);
	assert_int_equal(acts(f, OP_FLEET_CREATE), 0u);
	assert_int_equal(f->st.racks[2].phase, API_PHASE_ABORTED);
	assert_int_equal(f->st.phase, API_PHASE_ROLLING_OUT);
	assert_non_null(strstr(f->st.message, "aborting: "));
	kid(f, "gb300-r08")->abort = true;
	kid(f, "gb300-r08")->phase = API_PHASE_ABORTED;
	pass(f);
	assert_int_equal(f->st.phase, API_PHASE_ABORTED);
	fx_free(f);
}

static void test_fleet_deleted_child_not_made_again(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 1);
	pass(f);
	create_all(f);
	pass(f);
	assert_int_equal(f->st.racks[0].phase, API_PHASE_NOTICE);
	f->nkids = 0;
	pass(f);
	assert_int_equal(f->out.nacts, 0);
	assert_int_equal(f->st.racks[0].phase, API_PHASE_ABORTED);
	assert_non_null(strstr(f->st.racks[0].message, "was deleted in phase Notice"));
	assert_int_equal(f->st.phase, API_PHASE_HALTED);
	fx_free(f);
}

static void test_fleet_refused_retried_after_a_minute(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 2);
	pass(f);
	op_fleet_refused(&f->st, 0, "rack \"gb300-r07\" already has an upgrade in flight", f->now);
	json_t *j = api_rack_upgrade_status_to_json(&f->st);
	assert_string_equal(json_string_value(json_object_get(
	                            json_array_get(json_object_get(j, "racks"), 0), "phase")),
	                    "Refused");
	json_decref(j);
	f->nkids = 0;
	f->now += 1000;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_CREATE), 2u);
	assert_int_equal(f->out.wake_ms, f->st.racks[0].time_ms + OP_FLEET_RETRY_MS);
	assert_non_null(strstr(f->st.message, "halted: gb300-r07 (Refused)"));
	f->now += OP_FLEET_RETRY_MS;
	pass(f);
	assert_int_equal(acts(f, OP_FLEET_CREATE), 3u);
	fx_free(f);
}

static void test_fleet_status_round_trip(void **state)
{
	(void)state;
	struct fx *f = fx_new(1, 2);
	struct api_rack_upgrade_status back;
	struct api_errors e;
	pass(f);
	create_all(f);
	scheduled(f, "gb300-r07");
	pass(f);
	json_t *j = api_rack_upgrade_status_to_json(&f->st);
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_status_parse(j, &back, &e), NV_OK);
	json_t *again = api_rack_upgrade_status_to_json(&back);
	assert_true(json_equal(j, again));
	assert_int_equal(back.nracks, 2);
	assert_int_equal(back.racks[0].slot_ms, T0);
	json_decref(again);
	/* An unknown phase names its field. */
	json_object_set_new(json_array_get(json_object_get(j, "racks"), 1), "phase",
	                    json_string("Sideways"));
	api_rack_upgrade_status_clear(&back);
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_status_parse(j, &back, &e), NV_E_INVALID_OBJECT);
	assert_string_equal(e.list[0].path, "status.racks[1].phase");
	json_decref(j);
	fx_free(f);
}

static void test_fleet_child_names(void **state)
{
	(void)state;
	char a[64], b[64];
	op_fleet_child_name("fleet", "gb300-r07", a);
	assert_string_equal(a, "fleet-gb300-r07");
	const char *longp = "quarterly-refresh-of-every-gb300-rack-in-hall-b-r580-173";
	op_fleet_child_name(longp, "gb300-r07", a);
	op_fleet_child_name(longp, "gb300-r08", b);
	assert_true(strlen(a) <= 63);
	assert_string_not_equal(a, b);
	assert_memory_equal(a, "quarterly-refresh-of-every-gb300-r07-", 37);
	/* A cut that ends on '-' loses it. */
	op_fleet_child_name("abcdefghijklmnopqrstuvwxyz-0123456789012345678901234567890",
	                    "gb300-r07", a);
	assert_null(strstr(a, "--"));
	assert_true(strlen(a) <= 63);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_fleet_picks_racks_in_order_and_creates_children),
	        cmocka_unit_test(test_fleet_no_rack_halts),
	        cmocka_unit_test(test_fleet_one_slot_at_a_time),
	        cmocka_unit_test(test_fleet_two_slots),
	        cmocka_unit_test(test_fleet_halt_continue_and_stop),
	        cmocka_unit_test(test_fleet_all_completed),
	        cmocka_unit_test(test_fleet_abort_and_pause_passed_on),
	        cmocka_unit_test(test_fleet_deleted_child_not_made_again),
	        cmocka_unit_test(test_fleet_refused_retried_after_a_minute),
	        cmocka_unit_test(test_fleet_status_round_trip),
	        cmocka_unit_test(test_fleet_child_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
