// SPDX-License-Identifier: Apache-2.0
// Unit tests for the one-sentence explanation of a RackUpgrade, one case
// per phase and per kind of wait. Statuses are built with the API's own
// serialiser (api_rack_upgrade_status_to_json), so the field names are the
// ones the upgrade controller writes.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nvl72/api_upgrade.h"
#include "nvl72/cli.h"
#include "nvl72/json.h"

#define NOW 1795000000000LL /* 2026-11-18T11:06:40Z */
#define HOUR 3600000LL

/* A status with the plan's layers needing approval of fabric and
 * workload, and up to 4 steps the test fills in. */
static struct api_rack_upgrade_status *status_new(enum api_upgrade_phase phase)
{
	struct api_rack_upgrade_status *s = calloc(1, sizeof(*s));
	s->phase = phase;
	s->phase_ms = NOW - HOUR;
	(void)snprintf(s->from_stack, sizeof(s->from_stack), "gb300-r580-95");
	s->required_approvals = MATRIX_BIT(MATRIX_L_FABRIC) | MATRIX_BIT(MATRIX_L_WORKLOAD);
	s->steps = calloc(4, sizeof(*s->steps));
	return s;
}

static struct api_upgrade_step *step_add(struct api_rack_upgrade_status *s,
                                         enum api_step_action act, enum api_step_phase phase,
                                         uint32_t trays, int wave, const char *msg)
{
	struct api_upgrade_step *st = &s->steps[s->nsteps];
	st->index = (int)s->nsteps++;
	st->action = act;
	st->phase = phase;
	st->trays = trays;
	st->wave = wave;
	(void)snprintf(st->message, sizeof(st->message), "%s", msg);
	return st;
}

static void approval_add(struct api_rack_upgrade_status *s, enum matrix_layer l, const char *user,
                         bool rejected)
{
	struct api_upgrade_approval_ref *a = &s->approvals[s->napprovals++];
	a->layer = l;
	(void)snprintf(a->name, sizeof(a->name), "r07-up-%s", matrix_layer_name(l));
	(void)snprintf(a->user, sizeof(a->user), "%s", user);
	a->rejected = rejected;
	a->time_ms = NOW - HOUR;
}

/* The RackUpgrade object around a status (NULL: none yet); frees s. */
static json_t *upgrade_obj(struct api_rack_upgrade_status *s, bool paused, bool abort)
{
	json_t *u =
	        json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:{s:s,s:s},s:b,s:b}}", "apiVersion",
	                  "nvl72.io/v1alpha1", "kind", "RackUpgrade", "metadata", "name", "r07-up",
	                  "spec", "rack", "gb300-r07", "target", "matrix", "gb300-2026.10", "stack",
	                  "gb300-r580-173", "paused", paused, "abort", abort);
	if (s != NULL) {
		json_object_set_new(u, "status", api_rack_upgrade_status_to_json(s));
		free(s->steps);
		free(s);
	}
	return u;
}

static json_t *rack_obj(bool in_freeze)
{
	json_t *r = json_pack("{s:{s:s},s:{s:[{s:s,s:s,s:s},{s:s,s:s,s:s}],s:{s:[]}},s:{s:{s:s}}}",
	                      "metadata", "name", "gb300-r07", "spec", "responsibilities", "layer",
	                      "fabric", "owner", "platform-fabric", "windowOwner", "nvl72:platform",
	                      "layer", "workload", "owner", "ml-training", "windowOwner",
	                      "nvl72:training-leads", "maintenance", "freezes", "status",
	                      "maintenance", "nextWindowStart", "2026-11-18T22:00:00Z");
	if (in_freeze)
		json_array_append_new(jx_path(r, "spec.maintenance.freezes"),
		                      json_pack("{s:s,s:s,s:s,s:s}", "name", "year-end", "start",
		                                "2026-11-01T00:00:00Z", "end",
		                                "2027-01-04T00:00:00Z", "reason",
		                                "Year-end change freeze."));
	return r;
}

/* The sentence for u (and rack), checked to be one line ending in ".". */
static char *explain(json_t *u, json_t *rack)
{
	struct buf b;
	buf_init(&b, 1 << 16);
	assert_int_equal(cli_explain(u, rack, NOW, &b), NV_OK);
	char *s = buf_take(&b);
	size_t n = strlen(s);
	assert_true(n > 2);
	assert_string_equal(s + n - 2, ".\n");
	assert_null(strchr(s, '\n') == s + n - 1 ? NULL : s);
	json_decref(u);
	json_decref(rack);
	return s;
}

#define ASSERT_HAS(s, needle)                                                                      \
	do {                                                                                       \
		if (strstr((s), (needle)) == NULL)                                                 \
			fail_msg("\"%s\" lacks \"%s\"", (s), (needle));                            \
	} while (0)

static void test_cli_explain_no_status(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(NULL, false, false), NULL);
	assert_string_equal(s, "r07-up has no status yet: no nvl72-operator has picked it up "
	                       "(is the operator running and leading?).\n");
	free(s);
}

static void test_cli_explain_proposed(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_PROPOSED);
	(void)snprintf(st->message, sizeof(st->message), "waiting for matrix gb300-2026.10.");
	char *s = explain(upgrade_obj(st, false, false), NULL);
	assert_string_equal(s, "r07-up is Proposed: the operator has not planned it yet "
	                       "(waiting for matrix gb300-2026.10).\n");
	free(s);
}

static void test_cli_explain_notice_names_end_and_owners(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_NOTICE);
	st->notice_end_ms = NOW + 50 * HOUR;
	char *s = explain(upgrade_obj(st, false, false), rack_obj(false));
	assert_string_equal(s, "r07-up is serving its notice period until 2026-11-20T13:06:40Z "
	                       "(in 2d2h), and then needs approval of fabric (owner "
	                       "platform-fabric, window owner nvl72:platform) and workload (owner "
	                       "ml-training, window owner nvl72:training-leads).\n");
	free(s);
}

static void test_cli_explain_awaiting_names_only_missing(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_AWAITING_APPROVAL);
	approval_add(st, MATRIX_L_FABRIC, "carol", false);
	char *s = explain(upgrade_obj(st, false, false), rack_obj(false));
	assert_string_equal(s, "r07-up is waiting for approval of workload (owner ml-training, "
	                       "window owner nvl72:training-leads); an owner approves with "
	                       "`kubectl nvl72 approve r07-up --layer LAYER`.\n");
	free(s);
}

static void test_cli_explain_awaiting_without_rack(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(status_new(API_PHASE_AWAITING_APPROVAL), false, false), NULL);
	ASSERT_HAS(s, "waiting for approval of fabric and workload;");
	free(s);
}

static void test_cli_explain_awaiting_rejected(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_AWAITING_APPROVAL);
	approval_add(st, MATRIX_L_WORKLOAD, "dave", true);
	char *s = explain(upgrade_obj(st, false, false), rack_obj(false));
	assert_string_equal(s, "r07-up is blocked: the workload layer's approval was rejected "
	                       "by dave.\n");
	free(s);
}

static void test_cli_explain_scheduled_start_and_window(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_SCHEDULED);
	st->scheduled_start_ms = NOW + 3 * HOUR + 30 * 60000;
	(void)snprintf(st->window, sizeof(st->window), "weekday-night");
	char *s = explain(upgrade_obj(st, false, false), rack_obj(false));
	assert_string_equal(s, "r07-up is scheduled to start at 2026-11-18T14:36:40Z (in 3h30m) "
	                       "in the weekday-night window.\n");
	free(s);
}

static void test_cli_explain_scheduled_in_freeze(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_SCHEDULED);
	st->scheduled_start_ms = NOW + HOUR;
	char *s = explain(upgrade_obj(st, false, false), rack_obj(true));
	assert_string_equal(s, "r07-up is scheduled but rack gb300-r07 is in the year-end freeze "
	                       "until 2027-01-04T00:00:00Z (in 46d12h): Year-end change freeze.\n");
	free(s);
}

static void test_cli_explain_scheduled_next_window(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(status_new(API_PHASE_SCHEDULED), false, false),
	                  rack_obj(false));
	assert_string_equal(s, "r07-up is waiting for the next maintenance window, which opens "
	                       "at 2026-11-18T22:00:00Z (in 10h53m).\n");
	free(s);
}

static void test_cli_explain_canary_pdb_block(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_CANARY);
	(void)snprintf(st->canary_partition, sizeof(st->canary_partition), "gb300-r07-a");
	st->canary_trays = (1u << 1) | (1u << 2);
	step_add(st, API_ACT_CORDON, API_STEP_SUCCEEDED, st->canary_trays, 0, "");
	step_add(st, API_ACT_DRAIN, API_STEP_RUNNING, st->canary_trays, 0,
	         "Cannot evict pod train/worker-3: it would violate the PodDisruptionBudget "
	         "train/workers.");
	step_add(st, API_ACT_APPLY, API_STEP_PENDING, st->canary_trays, 0, "");
	char *s = explain(upgrade_obj(st, false, false), rack_obj(false));
	assert_string_equal(s, "r07-up is running its canary on partition gb300-r07-a: step 2 of "
	                       "3 (Drain, trays 1-2) is blocked by a PodDisruptionBudget: Cannot "
	                       "evict pod train/worker-3: it would violate the PodDisruptionBudget "
	                       "train/workers.\n");
	free(s);
}

static void test_cli_explain_validating_evidence(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_VALIDATING);
	struct api_upgrade_step *v = step_add(st, API_ACT_VALIDATE, API_STEP_RUNNING,
	                                      (1u << 1) | (1u << 2), 0, "all-reduce job running");
	v->evidence.set = true;
	(void)snprintf(v->evidence.fabric_state, sizeof(v->evidence.fabric_state), "Completed");
	(void)snprintf(v->evidence.imex_domain_state, sizeof(v->evidence.imex_domain_state), "UP");
	v->evidence.busbw_gbps = 812;
	v->evidence.floor_gbps = 800;
	v->evidence.tolerance_pct = 5;
	char *s = explain(upgrade_obj(st, false, false), NULL);
	assert_string_equal(s, "r07-up is validating the canary against the matrix's gate: step 1 "
	                       "of 1 (Validate, trays 1-2) is Running: all-reduce job running; "
	                       "evidence so far: fabric Completed, IMEX domain UP, bus bandwidth "
	                       "812 GB/s against a floor of 800 GB/s (5% tolerance).\n");
	free(s);
}

static void test_cli_explain_rolling_out_checkpoint(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_ROLLING_OUT);
	st->nwaves = 3;
	step_add(st, API_ACT_APPLY, API_STEP_SUCCEEDED, 1u << 1, 1, "");
	step_add(st, API_ACT_DRAIN, API_STEP_RUNNING, (1u << 3) | (1u << 4) | (1u << 9), 2,
	         "waiting for 2 pods to acknowledge the checkpoint request (deadline in 40m)");
	char *s = explain(upgrade_obj(st, false, false), NULL);
	assert_string_equal(s, "r07-up is rolling out in waves: step 2 of 2 (Drain, trays 3-4,9, "
	                       "wave 2) is waiting for pods to checkpoint: waiting for 2 pods to "
	                       "acknowledge the checkpoint request (deadline in 40m).\n");
	free(s);
}

static void test_cli_explain_halted_failed_gate(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_HALTED);
	(void)snprintf(st->message, sizeof(st->message), "canary gate failed.");
	step_add(st, API_ACT_APPLY, API_STEP_SUCCEEDED, 1u << 1, 0, "");
	struct api_upgrade_step *v = step_add(st, API_ACT_VALIDATE, API_STEP_FAILED, 1u << 1, 0,
	                                      "bus bandwidth below the floor");
	v->evidence.set = true;
	(void)snprintf(v->evidence.fabric_state, sizeof(v->evidence.fabric_state), "Completed");
	(void)snprintf(v->evidence.imex_domain_state, sizeof(v->evidence.imex_domain_state), "UP");
	v->evidence.busbw_gbps = 612;
	v->evidence.floor_gbps = 800;
	v->evidence.tolerance_pct = 5;
	char *s = explain(upgrade_obj(st, false, false), NULL);
	assert_string_equal(s, "r07-up is halted: canary gate failed; step 2 of 2 (Validate, "
	                       "trays 1) failed with fabric Completed, IMEX domain UP, bus "
	                       "bandwidth 612 GB/s against a floor of 800 GB/s (5% tolerance); it "
	                       "holds with its evidence kept until the cause is fixed or "
	                       "`kubectl nvl72 abort r07-up`.\n");
	free(s);
}

static void test_cli_explain_halted_step_message(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_HALTED);
	step_add(st, API_ACT_WAIT_IMEX, API_STEP_FAILED, 1u << 5, 0,
	         "IMEX domain DEGRADED after 15m");
	char *s = explain(upgrade_obj(st, false, false), NULL);
	ASSERT_HAS(s, "r07-up is halted: step 1 of 1 (WaitIMEX, trays 5) failed: IMEX domain "
	              "DEGRADED after 15m;");
	free(s);
}

static void test_cli_explain_paused(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(status_new(API_PHASE_PAUSED), true, false), NULL);
	assert_string_equal(s, "r07-up is paused by spec.paused and no new step starts until "
	                       "`kubectl nvl72 resume r07-up`.\n");
	free(s);
}

static void test_cli_explain_pausing_not_yet_observed(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(status_new(API_PHASE_CANARY), true, false), NULL);
	assert_string_equal(s, "r07-up is pausing (spec.paused is set) and the operator has not "
	                       "yet recorded it, still in phase Canary.\n");
	free(s);
}

static void test_cli_explain_aborting(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(status_new(API_PHASE_ROLLING_OUT), false, true), NULL);
	ASSERT_HAS(s, "r07-up is being aborted (spec.abort is set)");
	ASSERT_HAS(s, "from phase RollingOut");
	free(s);
}

static void test_cli_explain_completed(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_COMPLETED);
	st->completion_ms = NOW - 2 * HOUR;
	char *s = explain(upgrade_obj(st, false, false), NULL);
	assert_string_equal(s, "r07-up is not waiting: it completed at 2026-11-18T09:06:40Z "
	                       "(2h ago).\n");
	free(s);
}

static void test_cli_explain_aborted(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_ABORTED);
	(void)snprintf(st->message, sizeof(st->message), "aborted by spec.abort; waves 1-2 new");
	char *s = explain(upgrade_obj(st, false, true), NULL);
	assert_string_equal(s, "r07-up is not waiting: it was aborted (aborted by spec.abort; "
	                       "waves 1-2 new).\n");
	free(s);
}

/* Rolling back, the canary's failed gate stays Failed: the sentence names
 * the rollback's next step, not the gate. */
static void test_cli_explain_rolling_back(void **state)
{
	(void)state;
	struct api_rack_upgrade_status *st = status_new(API_PHASE_ROLLING_BACK);
	st->nwaves = 2;
	step_add(st, API_ACT_VALIDATE, API_STEP_FAILED, (1u << 1) | (1u << 2), 0,
	         "gate failed: bus bandwidth 300 GB/s");
	step_add(st, API_ACT_DRAIN, API_STEP_SUCCEEDED, (1u << 1) | (1u << 2), 1, "done");
	step_add(st, API_ACT_ROLL_BACK, API_STEP_PENDING, (1u << 1) | (1u << 2), 1, "");
	char *s = explain(upgrade_obj(st, false, false), NULL);
	ASSERT_HAS(s,
	           "r07-up is moving the canary back to gb300-r580-95: its gate failed and the "
	           "Rack's onGateFailure is RollBack: step 3 of 3 (RollBack, trays 1-2, wave 1)");
	free(s);
}

static void test_cli_explain_rolled_back(void **state)
{
	(void)state;
	char *s = explain(upgrade_obj(status_new(API_PHASE_ROLLED_BACK), false, false), NULL);
	assert_string_equal(s, "r07-up is not waiting: the canary's gate failed and its trays were "
	                       "rolled back to the source stack.\n");
	free(s);
}

static void test_cli_explain_unknown_phase(void **state)
{
	(void)state;
	json_t *u = upgrade_obj(NULL, false, false);
	json_object_set_new(
	        u, "status",
	        json_pack("{s:s,s:s}", "phase", "Rebooting", "message", "tray 4 reboots"));
	char *s = explain(u, NULL);
	assert_string_equal(s, "r07-up is in phase Rebooting, which this version of kubectl-nvl72 "
	                       "does not know: tray 4 reboots.\n");
	free(s);
}

static void test_cli_explain_rejects_non_object(void **state)
{
	(void)state;
	struct buf b;
	json_t *v = json_string("x");
	buf_init(&b, 1024);
	assert_int_equal(cli_explain(v, NULL, NOW, &b), NV_E_INVAL);
	buf_clear(&b);
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cli_explain_no_status),
	        cmocka_unit_test(test_cli_explain_proposed),
	        cmocka_unit_test(test_cli_explain_notice_names_end_and_owners),
	        cmocka_unit_test(test_cli_explain_awaiting_names_only_missing),
	        cmocka_unit_test(test_cli_explain_awaiting_without_rack),
	        cmocka_unit_test(test_cli_explain_awaiting_rejected),
	        cmocka_unit_test(test_cli_explain_scheduled_start_and_window),
	        cmocka_unit_test(test_cli_explain_scheduled_in_freeze),
	        cmocka_unit_test(test_cli_explain_scheduled_next_window),
	        cmocka_unit_test(test_cli_explain_canary_pdb_block),
	        cmocka_unit_test(test_cli_explain_validating_evidence),
	        cmocka_unit_test(test_cli_explain_rolling_out_checkpoint),
	        cmocka_unit_test(test_cli_explain_halted_failed_gate),
	        cmocka_unit_test(test_cli_explain_halted_step_message),
	        cmocka_unit_test(test_cli_explain_paused),
	        cmocka_unit_test(test_cli_explain_pausing_not_yet_observed),
	        cmocka_unit_test(test_cli_explain_aborting),
	        cmocka_unit_test(test_cli_explain_completed),
	        cmocka_unit_test(test_cli_explain_aborted),
	        cmocka_unit_test(test_cli_explain_rolling_back),
	        cmocka_unit_test(test_cli_explain_rolled_back),
	        cmocka_unit_test(test_cli_explain_unknown_phase),
	        cmocka_unit_test(test_cli_explain_rejects_non_object),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
