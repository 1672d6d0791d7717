// SPDX-License-Identifier: Apache-2.0
// Unit tests for what a Completed RackUpgrade does about its Rack's
// spec.matrix: apply the target once, record that it did (or why not) in
// the RackStackSet condition, and leave the Rack alone once recorded, also
// after a restart that reads the record back.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../api/api_test.h"
#include "nvl72/json.h"
#include "nvl72/operator_upgrade.h"

#define T_DONE 1794787200000LL /* 2026-11-16T00:00:00Z */

struct fx {
	struct api_rack *rack;
	struct api_rack_upgrade *u;
	struct api_rack_upgrade_status st;
	json_t *ups; /* the cached RackUpgrades */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct api_errors e;
	json_t *j = test_load("tests/data/api/rack-gb300-r07.json");
	api_errors_init(&e);
	assert_int_equal(api_rack_parse(j, &f->rack, &e), NV_OK);
	json_decref(j);
	j = test_load("tests/data/api/rackupgrade-gb300-r07-r580-173.json");
	assert_int_equal(api_rack_upgrade_parse(j, &f->u, &e), NV_OK);
	json_decref(j);
	f->u->meta.generation = 2;
	/* The rack on gb300-r580-95; the upgrade done, as its record says. */
	f->st.phase = API_PHASE_COMPLETED;
	f->st.completion_ms = T_DONE;
	f->ups = json_array();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	api_rack_upgrade_status_clear(&f->st);
	api_rack_free(f->rack);
	api_rack_upgrade_free(f->u);
	json_decref(f->ups);
	free(f);
	return 0;
}

/* A cached RackUpgrade of rack in phase, completed at at (NULL: no time). */
static void cached(struct fx *f, const char *name, const char *rack, const char *phase,
                   const char *at)
{
	json_t *o = json_pack("{s:{s:s}, s:{s:s, s:{s:s, s:s}}, s:{s:s}}", "metadata", "name", name,
	                      "spec", "rack", rack, "target", "matrix", "gb300-2026.10", "stack",
	                      "gb300-r580-159", "status", "phase", phase);
	if (at != NULL)
		json_object_set_new(json_object_get(o, "status"), "completionTime",
		                    json_string(at));
	json_array_append_new(f->ups, o);
}

static struct op_upgrade_stack_out next(struct fx *f)
{
	struct op_upgrade_stack_out o;
	op_upgrade_stack_next(f->u, &f->st, f->rack, f->ups, T_DONE + 5000, &o);
	return o;
}

static void test_op_upgrade_stack_next_applies_once_completed(void **state)
{
	struct fx *f = *state;
	struct op_upgrade_stack_out o = next(f);
	assert_int_equal(o.act, OP_STACK_APPLY);
	assert_string_equal(o.from, "gb300-r580-95");
	assert_string_equal(o.cond.type, OP_UPGRADE_COND_RACK_STACK);
	assert_int_equal(o.cond.status, API_COND_TRUE);
	assert_string_equal(o.cond.reason, "Applied");
	assert_string_equal(o.cond.message, "Rack gb300-r07: spec.matrix.stack moved from "
	                                    "gb300-r580-95 to gb300-r580-173");
	assert_int_equal(o.cond.observed_generation, 2);
	assert_int_equal(o.cond.last_transition_ms, T_DONE + 5000);
	/* Its own cached entry, older than this pass's status, changes
	 * nothing: the pass that writes Completed applies at once. */
	cached(f, f->u->meta.name, "gb300-r07", "RollingOut", NULL);
	assert_int_equal(next(f).act, OP_STACK_APPLY);
}

/* Every phase before Completed, and Aborted, leaves the Rack alone; so
 * does a Rack that does not exist. */
static void test_op_upgrade_stack_next_only_completed(void **state)
{
	struct fx *f = *state;
	for (int p = API_PHASE_PROPOSED; p <= API_PHASE_ABORTED; p++) {
		f->st.phase = (enum api_upgrade_phase)p;
		struct op_upgrade_stack_out o = next(f);
		assert_int_equal(o.act, p == API_PHASE_COMPLETED ? OP_STACK_APPLY : OP_STACK_NONE);
	}
	f->st.phase = API_PHASE_COMPLETED;
	struct op_upgrade_stack_out o;
	op_upgrade_stack_next(f->u, &f->st, NULL, f->ups, T_DONE, &o);
	assert_int_equal(o.act, OP_STACK_NONE);
}

/* A Rack already on the target is only recorded; another matrix of the
 * same stack name is not the target. */
static void test_op_upgrade_stack_next_already_set(void **state)
{
	struct fx *f = *state;
	snprintf(f->rack->matrix_stack, sizeof(f->rack->matrix_stack), "gb300-r580-173");
	struct op_upgrade_stack_out o = next(f);
	assert_int_equal(o.act, OP_STACK_RECORD);
	assert_int_equal(o.cond.status, API_COND_TRUE);
	assert_string_equal(o.cond.reason, "AlreadySet");
	snprintf(f->rack->matrix_name, sizeof(f->rack->matrix_name), "gb300-2025.04");
	o = next(f);
	assert_int_equal(o.act, OP_STACK_APPLY);
	assert_string_equal(o.from, "gb300-r580-173");
}

/* An upgrade of the rack that completed later wins: this one records that
 * it was superseded and never moves the Rack back. Earlier ones, other
 * racks' and unfinished ones do not count; a tie goes to the greater
 * name. */
static void test_op_upgrade_stack_next_superseded(void **state)
{
	struct fx *f = *state;
	cached(f, "a-earlier", "gb300-r07", "Completed", "2026-11-15T00:00:00Z");
	cached(f, "b-other-rack", "gb300-r08", "Completed", "2026-11-17T00:00:00Z");
	cached(f, "c-aborted", "gb300-r07", "Aborted", "2026-11-17T00:00:00Z");
	cached(f, "d-running", "gb300-r07", "RollingOut", NULL);
	cached(f, "a-tie", "gb300-r07", "Completed", "2026-11-16T00:00:00Z");
	assert_int_equal(next(f).act, OP_STACK_APPLY);
	cached(f, "z-tie", "gb300-r07", "Completed", "2026-11-16T00:00:00Z");
	struct op_upgrade_stack_out o = next(f);
	assert_int_equal(o.act, OP_STACK_RECORD);
	assert_int_equal(o.cond.status, API_COND_FALSE);
	assert_string_equal(o.cond.reason, "Superseded");
	assert_non_null(strstr(o.cond.message, "RackUpgrade z-tie completed later"));
	json_array_remove(f->ups, json_array_size(f->ups) - 1);
	cached(f, "later", "gb300-r07", "Completed", "2026-11-16T00:00:01Z");
	assert_int_equal(next(f).act, OP_STACK_RECORD);
}

/* The condition goes into the record and survives it: a restarted
 * operator reads it back and does nothing more, whatever the Rack says
 * now (a person's later change stays). */
static void test_op_upgrade_stack_next_recorded_survives_restart(void **state)
{
	struct fx *f = *state;
	struct op_upgrade_stack_out o = next(f);
	struct api_rack_upgrade_status back;
	struct api_errors e;
	assert_int_equal(o.act, OP_STACK_APPLY);
	op_upgrade_condition_put(&f->st, &o.cond);
	json_t *rec = api_rack_upgrade_status_to_json(&f->st);
	memset(&back, 0, sizeof(back));
	api_errors_init(&e);
	assert_int_equal(api_rack_upgrade_status_parse(rec, &back, &e), NV_OK);
	json_decref(rec);
	api_rack_upgrade_status_clear(&f->st);
	f->st = back;
	assert_int_equal(f->st.nconditions, 1);
	assert_int_equal(next(f).act, OP_STACK_NONE);
	snprintf(f->rack->matrix_stack, sizeof(f->rack->matrix_stack), "gb300-r580-95");
	assert_int_equal(next(f).act, OP_STACK_NONE);
	/* Without it (a crash between Completed and the apply), it applies. */
	f->st.nconditions = 0;
	assert_int_equal(next(f).act, OP_STACK_APPLY);
}

static void test_op_upgrade_condition_put_replaces_or_appends(void **state)
{
	struct fx *f = *state;
	struct api_condition c;
	memset(&c, 0, sizeof(c));
	snprintf(c.type, sizeof(c.type), "Announced");
	op_upgrade_condition_put(&f->st, &c);
	snprintf(c.type, sizeof(c.type), "%s", OP_UPGRADE_COND_RACK_STACK);
	snprintf(c.reason, sizeof(c.reason), "Applied");
	op_upgrade_condition_put(&f->st, &c);
	snprintf(c.reason, sizeof(c.reason), "AlreadySet");
	op_upgrade_condition_put(&f->st, &c);
	assert_int_equal(f->st.nconditions, 2);
	assert_string_equal(f->st.conditions[0].type, "Announced");
	assert_string_equal(f->st.conditions[1].reason, "AlreadySet");
	for (int i = 0; i < API_CONDITIONS_MAX + 2; i++) {
		snprintf(c.type, sizeof(c.type), "Other%d", i);
		op_upgrade_condition_put(&f->st, &c);
	}
	assert_int_equal(f->st.nconditions, API_CONDITIONS_MAX);
	assert_string_equal(f->st.conditions[1].type, OP_UPGRADE_COND_RACK_STACK);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	        T(test_op_upgrade_stack_next_applies_once_completed),
	        T(test_op_upgrade_stack_next_only_completed),
	        T(test_op_upgrade_stack_next_already_set),
	        T(test_op_upgrade_stack_next_superseded),
	        T(test_op_upgrade_stack_next_recorded_survives_restart),
	        T(test_op_upgrade_condition_put_replaces_or_appends),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
