// SPDX-License-Identifier: Apache-2.0
// Unit tests for the RackUpgrade engine on the sample rack and matrix. A
// small world plays the trays, the drain and the agents' answers; every
// pass reads the status back from its JSON, as a restarted operator would,
// so the record alone carries the upgrade.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../api/api_test.h"
#include "nvl72/json.h"
#include "nvl72/oob.h"
#include "nvl72/operator_upgrade.h"
#include "nvl72/parse.h"

#define T0 1794787200000LL /* Monday 2026-11-16T00:00:00Z */
#define SEC 1000LL
#define FROM_DRIVER "580.95.05"
#define TO_DRIVER "580.159.03"

struct world {
	struct api_rack *rack;
	struct matrix *m;
	struct api_rack_upgrade *u;
	struct api_rack_partition *parts[2];
	struct api_upgrade_approval *appr[8];
	unsigned nappr;
	struct op_upgrade_tray trays[18];
	char driver[18][64];
	char vid[18][64];
	int busbw[18];
	json_t *status; /* the record, as stored */
	int64_t now;
	struct op_upgrade_out out;
	int started[256]; /* passes that asked for step i's action */
	uint32_t touched; /* trays any action was asked for */
	unsigned events;
	char last_event[48];
	char seen[2048]; /* every event's reason, each followed by ',' */
	bool gate_failed_event;
	const char *rack_stack;    /* the stack the rack runs */
	struct oob_backend *oob;   /* NULL: no out-of-band backend */
	char oob_dir[64];          /* the sim backend's rack folder */
	unsigned acts;             /* actions asked for so far */
	unsigned first_tray_act;   /* 1 + the action that first touched a tray */
	unsigned oob_acts;         /* out-of-band passes */
	unsigned oob_started;      /* operations started, all passes */
	int drain_fails;           /* Drain passes to end Failed, as at a passed deadline */
	char oob_drivers[18][64];  /* the trays' drivers at the first out-of-band pass */
	unsigned driver_sets;      /* driver changes asked of a tray, all trays */
	const char *nvidia_unread; /* op_upgrade_in.nvidia_unread */
	int apply_fails[18];       /* Apply passes whose driver step fails on tray i */
	bool apply_gave_up[18];    /* ... reported ChangeFailed, else Retrying */
};

static void *load(const char *path, int kind)
{
	struct api_errors e;
	json_t *j = test_load(path);
	void *out = NULL;
	enum nv_err rc = NV_E_INVAL;
	api_errors_init(&e);
	if (kind == 0)
		rc = api_rack_parse(j, (struct api_rack **)&out, &e);
	else if (kind == 1)
		rc = api_matrix_parse(j, (struct matrix **)&out, &e);
	else if (kind == 2)
		rc = api_rack_upgrade_parse(j, (struct api_rack_upgrade **)&out, &e);
	else
		rc = api_rack_partition_parse(j, (struct api_rack_partition **)&out, &e);
	assert_int_equal(rc, NV_OK);
	json_decref(j);
	return out;
}

/* The sample rack on gb300-r580-95, no windows, short notices; the routine
 * upgrade to gb300-r580-159 (a driver patch that drains). */
static struct world *world_new(void)
{
	struct world *w = calloc(1, sizeof(*w));
	w->rack = load("tests/data/api/rack-gb300-r07.json", 0);
	w->m = load("tests/data/matrix/compatibilitymatrix-gb300-2026.10.json", 1);
	w->u = load("tests/data/api/rackupgrade-gb300-r07-r580-173.json", 2);
	w->parts[0] = load("tests/data/api/rackpartition-gb300-r07-a.json", 3);
	w->parts[1] = load("tests/data/api/rackpartition-gb300-r07-b.json", 3);
	w->parts[0]->trays = (1u << 1) | (1u << 2);
	w->parts[1]->trays = 0;
	snprintf(w->u->target_stack, sizeof(w->u->target_stack), "gb300-r580-159");
	w->u->earliest_start_ms = 0;
	w->u->canary_soak_ms = 60 * SEC;
	w->u->wave_size = 0;
	snprintf(w->u->meta.uid, sizeof(w->u->meta.uid), "0a1b2c3d-uid");
	w->u->meta.generation = 1;
	w->rack->nwindows = 0;
	w->rack->nfreezes = 0;
	for (unsigned i = 0; i < w->rack->nresp; i++) {
		w->rack->resp[i].notice_ms = (int64_t)(i + 1) * 10 * SEC;
		w->rack->resp[i].approval_required = w->rack->resp[i].layer == MATRIX_L_WORKLOAD;
	}
	for (int i = 0; i < 18; i++) {
		struct op_upgrade_tray *t = &w->trays[i];
		snprintf(w->driver[i], sizeof(w->driver[i]), FROM_DRIVER);
		w->busbw[i] = 760;
		t->index = i + 1;
		t->node = w->rack->compute[i].node;
		t->present = t->available = t->driver_ready = true;
		t->driver = w->driver[i];
		t->fabric_state = "Completed";
		t->fabric_health = "Healthy";
		t->fabric_source = "summary";
		t->fabric_why = "";
		t->driver_why = "";
		t->imex_domain = "";
		t->maint = "None";
		t->maint_upgrade = "";
		t->validation_id = w->vid[i];
		t->validation_phase = "";
		t->validation_transport = "NVLS";
		t->validation_message = "";
	}
	w->now = T0;
	w->rack_stack = "gb300-r580-95";
	return w;
}

static void approve(struct world *w, enum matrix_layer l, const char *user, bool reject);

/* The sim's out-of-band backend on a fresh rack folder; delay_ms is the
 * time an update stays in progress. */
static void world_oob(struct world *w, long delay_ms)
{
	struct oob_config c;
	struct fabric_status st;
	snprintf(w->oob_dir, sizeof(w->oob_dir), "/tmp/nvl72-upgrade-oob.XXXXXX");
	assert_non_null(mkdtemp(w->oob_dir));
	oob_config_init(&c);
	assert_int_equal(str_copy(c.sim_root, sizeof(c.sim_root), w->oob_dir), NV_OK);
	c.sim_delay_ms = delay_ms;
	assert_int_equal(oob_backend_new(&c, &w->oob, &st), NV_OK);
}

/* The upgrade from gb300-r580-159 to gb300-r580-173: switch trays (NVOS,
 * firmware, NMX) before the driver, a manual edge every layer approves. */
static void world_switch_edge(struct world *w)
{
	w->rack_stack = "gb300-r580-159";
	snprintf(w->u->target_stack, sizeof(w->u->target_stack), "gb300-r580-173");
	for (unsigned l = 0; l < MATRIX_L__COUNT; l++)
		approve(w, (enum matrix_layer)l, "alice", false);
}

/* The count of accepted updates of key ("nvos.switch-3") in oob/state. */
static int oob_count(struct world *w, const char *key)
{
	char p[128], line[256], want[96];
	int n = 0;
	FILE *f;
	snprintf(p, sizeof(p), "%s/oob/state", w->oob_dir);
	snprintf(want, sizeof(want), "n.%s=", key);
	if ((f = fopen(p, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, want, strlen(want)) == 0)
			n = (int)strtol(line + strlen(want), NULL, 10);
	fclose(f);
	return n;
}

static void oob_version_is(struct world *w, enum matrix_component c, unsigned idx, const char *want)
{
	struct oob_target t = {OOB_SWITCH_TRAY, idx};
	struct fabric_status st;
	char have[64] = "";
	assert_int_equal(oob_version(w->oob, c, &t, have, sizeof(have), &st), NV_OK);
	assert_string_equal(have, want);
}

static void world_free(struct world *w)
{
	api_rack_free(w->rack);
	matrix_free(w->m);
	api_rack_upgrade_free(w->u);
	api_rack_partition_free(w->parts[0]);
	api_rack_partition_free(w->parts[1]);
	for (unsigned i = 0; i < w->nappr; i++)
		api_upgrade_approval_free(w->appr[i]);
	json_decref(w->status);
	oob_backend_free(w->oob);
	if (w->oob_dir[0]) {
		static const char *const files[] = {"state", "lock", "fail.nvos.switch-3"};
		char path[160];
		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/oob/%s", w->oob_dir, files[i]);
			unlink(path);
		}
		snprintf(path, sizeof(path), "%s/oob", w->oob_dir);
		rmdir(path);
		rmdir(w->oob_dir);
	}
	free(w);
}

static void approve(struct world *w, enum matrix_layer l, const char *user, bool reject)
{
	struct api_upgrade_approval *a = calloc(1, sizeof(*a));
	snprintf(a->meta.name, sizeof(a->meta.name), "appr-%u", w->nappr);
	snprintf(a->upgrade, sizeof(a->upgrade), "%.63s", w->u->meta.name);
	a->layer = l;
	a->rejected = reject;
	snprintf(a->approved_by, sizeof(a->approved_by), "%s", user);
	snprintf(a->comment, sizeof(a->comment), "not this week");
	w->appr[w->nappr++] = a;
}

/* One pass, as the controller makes it: status read from its JSON, eval,
 * status written back (before the action), then the action. */
static struct api_rack_upgrade_status *pass(struct world *w, struct api_rack_upgrade_status *st)
{
	struct api_errors e;
	api_errors_init(&e);
	memset(st, 0, sizeof(*st));
	assert_int_equal(api_rack_upgrade_status_parse(w->status, st, &e), NV_OK);
	struct op_upgrade_in in = {
	        .u = w->u,
	        .rack = w->rack,
	        .rack_stack = w->rack_stack,
	        .m = w->m,
	        .trays = w->trays,
	        .ntrays = 18,
	        .approvals = (const struct api_upgrade_approval *const *)w->appr,
	        .napprovals = w->nappr,
	        .partitions = (const struct api_rack_partition *const *)w->parts,
	        .npartitions = 2,
	        .oob_backend = w->oob != NULL,
	        .nvidia_unread = w->nvidia_unread,
	        .now_ms = w->now,
	};
	op_upgrade_eval(&in, st, &w->out);
	for (unsigned i = 0; i < w->out.nevents; i++) {
		w->events++;
		snprintf(w->last_event, sizeof(w->last_event), "%s", w->out.events[i].reason);
		size_t n = strlen(w->seen);
		snprintf(w->seen + n, sizeof(w->seen) - n, "%s,", w->out.events[i].reason);
		w->gate_failed_event |= strcmp(w->out.events[i].reason, "GateFailed") == 0;
	}
	if (w->out.act != OP_UPG_NONE) {
		/* Status first: the step acted on is recorded as Running. */
		assert_int_equal(st->steps[w->out.step].phase, API_STEP_RUNNING);
		assert_true(st->steps[w->out.step].start_ms > 0);
		w->started[w->out.step]++;
		w->touched |= w->out.trays;
		w->acts++;
		if (w->out.trays && w->first_tray_act == 0)
			w->first_tray_act = w->acts;
	}
	json_decref(w->status);
	w->status = api_rack_upgrade_status_to_json(st);
	return st;
}

/* The world answers the action: drains and releases finish at once, the
 * agents load the driver and run the validation. */
static void act(struct world *w, struct api_rack_upgrade_status *st)
{
	for (int i = 0; i < 18; i++) {
		if (!(w->out.trays & (1u << (i + 1))))
			continue;
		if (w->out.act == OP_UPG_APPLY && w->apply_fails[i] > 0) {
			/* The agent's step failed; it tries again (Retrying) or
			 * has given up (ChangeFailed). */
			w->apply_fails[i]--;
			w->trays[i].driver_ready = false;
			w->trays[i].driver_failed = w->apply_gave_up[i];
			w->trays[i].driver_why =
			        w->apply_gave_up[i]
			                ? "changing to " TO_DRIVER ": 3 steps in a row failed (the "
			                  "agent keeps trying); the last: installer failed (status "
			                  "1)"
			                : "changing to " TO_DRIVER
			                  ": a step failed (1 of 3 in a row), "
			                  "trying again: systemctl timed out after 1000 ms";
			continue;
		}
		if (w->out.act == OP_UPG_APPLY) {
			w->trays[i].driver_ready = true;
			w->trays[i].driver_failed = false;
			w->trays[i].driver_why = "";
		}
		if (w->out.act == OP_UPG_APPLY && strcmp(w->driver[i], w->out.driver) != 0) {
			snprintf(w->driver[i], sizeof(w->driver[i]), "%s", w->out.driver);
			w->driver_sets++;
		}
		if (w->out.act == OP_UPG_VALIDATE) {
			snprintf(w->vid[i], sizeof(w->vid[i]), "%s", w->out.validation_id);
			w->trays[i].validation_phase = "Succeeded";
			w->trays[i].validation_busbw = w->busbw[i];
		}
	}
	if (w->out.act == OP_UPG_OOB) {
		/* As the controller: poll and start, then end the step. */
		struct op_upgrade_oob_result r;
		if (w->oob_acts == 0)
			memcpy(w->oob_drivers, w->driver, sizeof(w->oob_drivers));
		assert_int_equal(op_upgrade_oob_step(w->oob, &st->steps[w->out.step], &w->out, &r),
		                 NV_OK);
		w->oob_acts++;
		w->oob_started += r.started;
		if (r.failed || r.done)
			op_upgrade_step_finish(st, w->out.step,
			                       r.failed ? API_STEP_FAILED : API_STEP_SUCCEEDED,
			                       r.message, w->now);
		else
			usleep(10 * 1000); /* the controller's poll interval, shortened */
		json_decref(w->status);
		w->status = api_rack_upgrade_status_to_json(st);
	}
	if (w->out.act == OP_UPG_DRAIN && w->drain_fails > 0) {
		/* As the controller at the drain's deadline. */
		w->drain_fails--;
		op_upgrade_step_finish(st, w->out.step, API_STEP_FAILED,
		                       "drain deadline passed (1h0m0s): pod team-a/web-0: eviction "
		                       "refused by a PodDisruptionBudget",
		                       w->now);
		json_decref(w->status);
		w->status = api_rack_upgrade_status_to_json(st);
	} else if (w->out.act == OP_UPG_DRAIN || w->out.act == OP_UPG_RELEASE) {
		op_upgrade_step_finish(st, w->out.step, API_STEP_SUCCEEDED, "done", w->now);
		json_decref(w->status);
		w->status = api_rack_upgrade_status_to_json(st);
	}
}

/* One pass and its action, then the clock to the next wake-up. */
static void run_once(struct world *w)
{
	struct api_rack_upgrade_status st;
	pass(w, &st);
	act(w, &st);
	if (w->out.act == OP_UPG_NONE && w->out.wake_ms > w->now)
		w->now = w->out.wake_ms;
	else
		w->now += SEC;
	api_rack_upgrade_status_clear(&st);
}

/* Passes until the phase is one of stop (or 400 passes), moving the clock
 * to each wake-up. */
static enum api_upgrade_phase run_until(struct world *w, uint32_t stop)
{
	struct api_rack_upgrade_status st;
	enum api_upgrade_phase ph = API_PHASE_PROPOSED;
	for (int i = 0; i < 400; i++) {
		pass(w, &st);
		ph = st.phase;
		if (stop & (1u << ph)) {
			api_rack_upgrade_status_clear(&st);
			return ph;
		}
		act(w, &st);
		if (w->out.act == OP_UPG_NONE && w->out.wake_ms > w->now)
			w->now = w->out.wake_ms;
		else
			w->now += SEC;
		api_rack_upgrade_status_clear(&st);
	}
	return ph;
}

#define P(x) (1u << API_PHASE_##x)

static const char *status_str(struct world *w, const char *path)
{
	return jx_str_or(w->status, path, "");
}

static void test_op_upgrade_eval_happy_path(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;

	pass(w, &st);
	/* The node and workload layers are touched: the longest notice wins
	 * (workload, the 5th responsibility: 50 s) and only workload needs an
	 * approval. */
	assert_int_equal(st.phase, API_PHASE_NOTICE);
	assert_int_equal(st.notice_end_ms - st.notice_start_ms, 50 * SEC);
	assert_int_equal(st.required_approvals, MATRIX_BIT(MATRIX_L_WORKLOAD));
	assert_int_equal(w->out.wake_ms, st.notice_end_ms);
	assert_string_equal(st.from_stack, "gb300-r580-95");
	api_rack_upgrade_status_clear(&st);

	w->now = T0 + 49 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_NOTICE);
	api_rack_upgrade_status_clear(&st);
	w->now = T0 + 50 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_AWAITING_APPROVAL);
	assert_non_null(strstr(st.message, "workload"));
	api_rack_upgrade_status_clear(&st);

	/* An approval for a layer not required does not count. */
	approve(w, MATRIX_L_FABRIC, "mallory", false);
	assert_int_equal(run_until(w, P(AWAITING_APPROVAL)), API_PHASE_AWAITING_APPROVAL);
	approve(w, MATRIX_L_WORKLOAD, "system:serviceaccount:team-a:approver", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);

	for (int i = 0; i < 18; i++)
		assert_string_equal(w->driver[i], TO_DRIVER);
	assert_string_equal(status_str(w, "approvals[0].user"),
	                    "system:serviceaccount:team-a:approver");
	assert_string_equal(status_str(w, "approvals[0].layer"), "workload");
	assert_string_equal(status_str(w, "canary.partition"), "gb300-r07-a");
	/* Canary of 2, then 16 trays two at a time (maxUnavailableTrays 2). */
	assert_int_equal(json_array_size(json_object_get(w->status, "waves")), 9);
	/* Every wave ends Succeeded, with its completion time, though its
	 * last step (Uncordon) is finished by the controller. */
	json_t *wv;
	size_t wi;
	json_array_foreach(json_object_get(w->status, "waves"), wi, wv) {
		assert_string_equal(jx_str_or(wv, "phase", ""), "Succeeded");
		assert_true(jx_str_or(wv, "completionTime", "")[0]);
	}
	json_t *ev = NULL;
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(w->status, "steps"), i, s) {
		const char *ph = jx_str_or(s, "phase", "");
		assert_true(strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Skipped") == 0);
		if (strcmp(jx_str_or(s, "action", ""), "Validate") == 0)
			ev = json_object_get(s, "evidence");
	}
	assert_non_null(ev);
	assert_true(json_is_true(json_object_get(ev, "passed")));
	assert_int_equal(json_integer_value(json_object_get(ev, "busBandwidthGBps")), 760);
	assert_int_equal(json_integer_value(json_object_get(ev, "floorGBps")), 823);
	/* No step's action was asked for after it succeeded: each Drain and
	 * Uncordon once (they finish at once here). */
	json_array_foreach(json_object_get(w->status, "steps"), i, s) {
		const char *a = jx_str_or(s, "action", "");
		if (strcmp(a, "Drain") == 0 || strcmp(a, "Uncordon") == 0)
			assert_int_equal(w->started[i], 1);
	}
	assert_true(w->status != NULL && status_str(w, "completionTime")[0]);
	world_free(w);
}

static void test_op_upgrade_eval_gate_failure(void **state)
{
	(void)state;
	struct world *w = world_new();
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->busbw[1] = 300; /* tray 2: below 823 - 10 % */
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	assert_true(w->gate_failed_event);
	/* Nothing outside the canary was touched. */
	assert_int_equal(w->touched, (1u << 1) | (1u << 2));
	for (int i = 2; i < 18; i++)
		assert_string_equal(w->driver[i], FROM_DRIVER);
	assert_int_equal(json_array_size(json_object_get(w->status, "waves")), 1);
	assert_non_null(strstr(status_str(w, "message"), "Validate"));
	json_t *s;
	size_t i;
	bool found = false;
	json_array_foreach(json_object_get(w->status, "steps"), i, s) {
		if (strcmp(jx_str_or(s, "action", ""), "Validate") != 0)
			continue;
		found = true;
		assert_string_equal(jx_str_or(s, "phase", ""), "Failed");
		assert_false(json_is_true(jx_path(s, "evidence.passed")));
		assert_int_equal(json_integer_value(jx_path(s, "evidence.busBandwidthGBps")), 300);
	}
	assert_true(found);
	/* Halted holds: later passes change nothing and ask for nothing. */
	struct api_rack_upgrade_status st;
	w->now += 3600 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_HALTED);
	assert_false(w->out.changed);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	api_rack_upgrade_status_clear(&st);
	world_free(w);
}

/* A drain past its deadline halts the upgrade naming what held it; the
 * upgrade holds until spec.retry is raised, then the Drain step starts
 * again (once per raise) and the upgrade completes. */
static void test_op_upgrade_eval_drain_deadline_halts_until_retry(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->drain_fails = 1;
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	assert_non_null(strstr(status_str(w, "message"), "Drain"));
	assert_non_null(strstr(status_str(w, "message"), "team-a/web-0"));
	assert_string_equal(w->last_event, "Halted");
	assert_int_equal(w->touched, (1u << 1) | (1u << 2)); /* the canary only */
	for (int i = 0; i < 18; i++)
		assert_string_equal(w->driver[i], FROM_DRIVER);
	/* Held: nothing is asked for, however long it waits. */
	w->now += 3600 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_HALTED);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	api_rack_upgrade_status_clear(&st);
	/* A person raises spec.retry: the Drain step runs again, anew. */
	w->u->retry = 1;
	int64_t at = w->now;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_CANARY);
	assert_int_equal(w->out.act, OP_UPG_DRAIN);
	assert_int_equal(st.steps[w->out.step].start_ms, at);
	assert_int_equal(st.retried, 1);
	assert_int_equal(w->started[w->out.step], 2);
	api_rack_upgrade_status_clear(&st);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	for (int i = 0; i < 18; i++)
		assert_string_equal(w->driver[i], TO_DRIVER);
	world_free(w);
}

/* The wall clock stepped back a day during the canary's soak: the soak
 * starts again from the new now instead of lasting a day more. */
static void test_op_upgrade_eval_soak_clock_back(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->u->canary_soak_ms = 600 * SEC;
	/* Up to the soak: the pass that starts it waits for its end. */
	for (int i = 0; i < 400; i++) {
		pass(w, &st);
		const char *m = st.message;
		bool soaking = strstr(m, "soaking") != NULL;
		api_rack_upgrade_status_clear(&st);
		if (soaking)
			break;
		run_once(w);
	}
	assert_non_null(strstr(status_str(w, "message"), "soaking"));
	w->now -= 86400 * SEC;
	pass(w, &st);
	assert_int_equal(w->out.wake_ms, w->now + 600 * SEC);
	api_rack_upgrade_status_clear(&st);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	world_free(w);
}

/* spec.retry on an upgrade halted by a failed gate retries nothing. */
static void test_op_upgrade_eval_retry_leaves_a_failed_gate(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->busbw[1] = 300;
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	w->u->retry = 1;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_HALTED);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	assert_string_equal(w->last_event, "RetryRefused");
	assert_int_equal(st.retried, 1);
	api_rack_upgrade_status_clear(&st);
	unsigned events = w->events;
	pass(w, &st); /* the same retry is not refused twice */
	assert_int_equal(w->events, events);
	api_rack_upgrade_status_clear(&st);
	world_free(w);
}

/* The message of the first step with action in wave wave. */
static const char *step_msg(struct world *w, const char *action, int wave)
{
	json_t *s;
	size_t i;
	json_array_foreach(json_object_get(w->status, "steps"), i, s) {
		if (strcmp(jx_str_or(s, "action", ""), action) == 0 &&
		    json_integer_value(json_object_get(s, "wave")) == wave)
			return jx_str_or(s, "message", "");
	}
	return "";
}

/* Trays on an R570 stack (NVML API 12) report health decided from the
 * mask: "Healthy" still passes the fabric wait and the gate, and the step
 * says where it came from. */
static void test_op_upgrade_eval_mask_health_passes(void **state)
{
	(void)state;
	struct world *w = world_new();
	for (int i = 0; i < 18; i++)
		w->trays[i].fabric_source = "mask";
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	assert_string_equal(step_msg(w, "WaitFabric", 0),
	                    "fabric Completed and Healthy on 2 trays (2 from the health mask)");
	world_free(w);
}

/* The first step with action in wave wave, from the stored record. */
static const json_t *step_of(struct world *w, const char *action, int wave)
{
	json_t *s;
	size_t i;
	json_array_foreach(json_object_get(w->status, "steps"), i, s) {
		if (strcmp(jx_str_or(s, "action", ""), action) == 0 &&
		    json_integer_value(json_object_get(s, "wave")) == wave)
			return s;
	}
	return NULL;
}

/* onGateFailure RollBack: the canary's failed gate sends its trays back to
 * the source stack (the edge is reversible and the matrix lists the move
 * back), through drain, driver, waits and the source stack's gate, ending
 * RolledBack with the failed gate's evidence kept and nothing else moved. */
static void test_op_upgrade_eval_gate_failure_rolls_back(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	w->rack->policy.on_gate_failure = API_ON_GATE_ROLL_BACK;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->busbw[1] = 300; /* tray 2 on the new driver */
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(ROLLING_BACK)),
	                 API_PHASE_ROLLING_BACK);
	assert_non_null(strstr(w->seen, "GateFailed,RollBackStarted,RollingBack,"));
	w->busbw[1] = 760; /* the old driver is fine */
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(ROLLED_BACK)),
	                 API_PHASE_ROLLED_BACK);
	assert_string_equal(w->last_event, "RolledBack");
	for (int i = 0; i < 18; i++)
		assert_string_equal(w->driver[i], FROM_DRIVER);
	assert_int_equal(w->touched, (1u << 1) | (1u << 2));
	/* The canary's driver went there and back: 2 trays, twice. */
	assert_int_equal(w->driver_sets, 4);
	assert_int_equal(json_array_size(json_object_get(w->status, "waves")), 2);
	assert_string_equal(status_str(w, "waves[0].phase"), "Failed");
	assert_string_equal(status_str(w, "waves[1].phase"), "Succeeded");
	const json_t *gate0 = step_of(w, "Validate", 0), *gate1 = step_of(w, "Validate", 1);
	assert_non_null(gate0);
	assert_non_null(gate1);
	assert_string_equal(jx_str_or(gate0, "phase", ""), "Failed");
	assert_int_equal(json_integer_value(jx_path(gate0, "evidence.busBandwidthGBps")), 300);
	assert_string_equal(jx_str_or(gate1, "phase", ""), "Succeeded");
	assert_true(json_is_true(jx_path(gate1, "evidence.passed")));
	assert_string_equal(jx_str_or(step_of(w, "Soak", 0), "phase", ""), "Skipped");
	assert_string_equal(jx_str_or(step_of(w, "Uncordon", 0), "phase", ""), "Skipped");
	assert_string_equal(jx_str_or(step_of(w, "RollBack", 1), "phase", ""), "Succeeded");
	assert_string_equal(jx_str_or(step_of(w, "Uncordon", 1), "phase", ""), "Succeeded");
	assert_true(status_str(w, "completionTime")[0]);
	assert_non_null(strstr(status_str(w, "message"), "gb300-r580-95"));
	/* Final: later passes change nothing. */
	w->now += 3600 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_ROLLED_BACK);
	assert_false(w->out.changed);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	api_rack_upgrade_status_clear(&st);
	world_free(w);
}

/* The rolled-back canary failing the source stack's gate too holds there:
 * nothing more moves on its own. */
static void test_op_upgrade_eval_rollback_gate_failure_halts(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->rack->policy.on_gate_failure = API_ON_GATE_ROLL_BACK;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->busbw[1] = 300; /* on either driver */
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(ROLLED_BACK)), API_PHASE_HALTED);
	assert_non_null(strstr(w->seen, "RollBackStarted,RollingBack,"));
	assert_int_equal(json_array_size(json_object_get(w->status, "waves")), 2);
	assert_string_equal(jx_str_or(step_of(w, "Validate", 1), "phase", ""), "Failed");
	assert_string_equal(w->driver[1], FROM_DRIVER);
	assert_int_equal(w->touched, (1u << 1) | (1u << 2));
	world_free(w);
}

/* Without a reversible edge there is no way back: the gate failure holds,
 * and an event says why RollBack did not run. */
static void test_op_upgrade_eval_rollback_refused_holds(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->rack->policy.on_gate_failure = API_ON_GATE_ROLL_BACK;
	for (unsigned i = 0; i < w->m->ntransitions; i++)
		w->m->transitions[i].reversible = false;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->busbw[1] = 300;
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(ROLLING_BACK)),
	                 API_PHASE_HALTED);
	assert_non_null(strstr(w->seen, "GateFailed,RollBackRefused,Halted,"));
	assert_int_equal(json_array_size(json_object_get(w->status, "waves")), 1);
	assert_string_equal(w->driver[1], TO_DRIVER);
	world_free(w);
}

/* A fault in a canary GPU's mask on a settled fabric (R570: no summary,
 * health decided from the mask) is a definite Unhealthy: the canary's
 * WaitFabric fails and the upgrade halts, naming the tray and the GPU,
 * with nothing outside the canary touched and no gate run. */
static void test_op_upgrade_eval_mask_fault_halts_naming_gpu(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->trays[1].fabric_source = "mask";
	w->trays[1].fabric_health = "Unhealthy";
	w->trays[1].fabric_why = "GPU 2: Unhealthy from the health mask (routeUnhealthy)";
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	const char *want = "fabric fault on trays 2 (tray 2: GPU 2: Unhealthy from the health "
	                   "mask (routeUnhealthy))";
	assert_string_equal(step_msg(w, "WaitFabric", 0), want);
	assert_string_equal(jx_str_or(step_of(w, "WaitFabric", 0), "phase", ""), "Failed");
	assert_non_null(strstr(status_str(w, "message"), "(WaitFabric, wave 0) failed: "));
	assert_non_null(strstr(status_str(w, "message"), want));
	assert_string_equal(w->last_event, "Halted");
	assert_string_equal(jx_str_or(step_of(w, "Validate", 0), "phase", ""), "Pending");
	assert_int_equal(w->touched & ~((1u << 1) | (1u << 2)), 0);
	for (int i = 2; i < 18; i++)
		assert_string_equal(w->driver[i], FROM_DRIVER);
	world_free(w);
}

/* NVML's own Unhealthy summary, and LimitedCapacity, halt the same way. */
static void test_op_upgrade_eval_summary_fault_halts(void **state)
{
	(void)state;
	static const char *const health[] = {"Unhealthy", "LimitedCapacity"};
	for (size_t k = 0; k < 2; k++) {
		struct world *w = world_new();
		w->trays[0].fabric_health = health[k];
		w->trays[0].fabric_why = "GPU 0: Unhealthy";
		approve(w, MATRIX_L_WORKLOAD, "alice", false);
		assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
		assert_string_equal(step_msg(w, "WaitFabric", 0),
		                    "fabric fault on trays 1 (tray 1: GPU 0: Unhealthy)");
		world_free(w);
	}
}

/* What may still become Healthy keeps WaitFabric waiting: a fabric still
 * training, a health not reported (NotSupported, or none). A settled fault
 * elsewhere waits for those too, then halts; cleared in time, the upgrade
 * completes. */
static void test_op_upgrade_eval_fabric_unknown_waits(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->trays[0].fabric_state = "InProgress";
	w->trays[0].fabric_health = "Unhealthy";
	w->trays[1].fabric_health = "NotSupported";
	w->trays[1].fabric_source = "mask";
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(VALIDATING)), API_PHASE_CANARY);
	assert_non_null(strstr(step_msg(w, "WaitFabric", 0),
	                       "waiting for fabric Completed and Healthy on trays 1,2"));
	w->trays[1].fabric_health = "";
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(VALIDATING)), API_PHASE_CANARY);
	// Tray 2 cleared and tray 1 settled: Healthy, so the canary goes on.
	w->trays[0].fabric_state = "Completed";
	w->trays[0].fabric_health = "Healthy";
	w->trays[1].fabric_health = "Healthy";
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	world_free(w);

	// Tray 1 still training while tray 2 has a settled fault: wait, then halt.
	w = world_new();
	w->trays[0].fabric_state = "InProgress";
	w->trays[1].fabric_health = "Unhealthy";
	w->trays[1].fabric_why = "GPU 1: Unhealthy from the health mask (accessTimeoutRecovery)";
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED) | P(VALIDATING)), API_PHASE_CANARY);
	w->trays[0].fabric_state = "Completed";
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	assert_string_equal(step_msg(w, "WaitFabric", 0),
	                    "fabric fault on trays 2 (tray 2: GPU 1: Unhealthy from the health "
	                    "mask (accessTimeoutRecovery))");
	world_free(w);
}

/* A later wave halts the same way: the tray is never released unhealthy. */
static void test_op_upgrade_eval_fabric_fault_in_wave(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->trays[9].fabric_health = "Unhealthy";
	w->trays[9].fabric_why = "GPU 3: Unhealthy from the health mask (routeRecovery)";
	w->trays[9].fabric_source = "mask";
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	assert_non_null(strstr(status_str(w, "message"), "(tray 10: GPU 3: Unhealthy from the "
	                                                 "health mask (routeRecovery))"));
	assert_non_null(strstr(status_str(w, "message"), "WaitFabric"));
	world_free(w);
}

/* A tray whose agent tries a failed driver step again (DriverReady
 * Retrying: a host tool that timed out once on a busy tray) keeps its
 * wave's Apply waiting, not halted; once the driver loads the upgrade goes
 * on and completes. */
static void test_op_upgrade_eval_driver_retrying_waits(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->apply_fails[2] = 3; /* tray 3, in wave 1 */
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	for (int i = 0; i < 400 && w->apply_fails[2] > 0; i++) {
		run_once(w);
		assert_string_not_equal(status_str(w, "phase"), "Halted");
	}
	assert_int_equal(w->apply_fails[2], 0);
	assert_string_equal(status_str(w, "phase"), "RollingOut");
	assert_string_equal(step_msg(w, "Apply", 1), "waiting for driver " TO_DRIVER " on trays 3");
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	assert_string_equal(jx_str_or(step_of(w, "Apply", 1), "phase", ""), "Succeeded");
	assert_string_equal(w->driver[2], TO_DRIVER);
	world_free(w);
}

/* A driver change the agent reports ChangeFailed (its step failed
 * AGENT_DRIVER_TRIES times in a row) fails the wave's Apply step: the
 * upgrade halts naming the tray and the agent's reason, and no later
 * wave's tray is touched. */
static void test_op_upgrade_eval_driver_change_failed_halts(void **state)
{
	(void)state;
	struct world *w = world_new();
	w->apply_fails[2] = 1;
	w->apply_gave_up[2] = true;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	const char *want =
	        "the driver change to " TO_DRIVER " failed on tray 3: changing to " TO_DRIVER
	        ": 3 steps in a row failed (the agent keeps trying); the last: installer "
	        "failed (status 1)";
	assert_string_equal(step_msg(w, "Apply", 1), want);
	assert_string_equal(jx_str_or(step_of(w, "Apply", 1), "phase", ""), "Failed");
	assert_non_null(strstr(status_str(w, "message"), "(Apply, wave 1) failed: "));
	assert_non_null(strstr(status_str(w, "message"), want));
	assert_string_equal(w->last_event, "Halted");
	assert_int_equal(w->touched & ~((1u << 1) | (1u << 2) | (1u << 3) | (1u << 4)), 0);
	world_free(w);
}

static void test_op_upgrade_eval_rejected(void **state)
{
	(void)state;
	struct world *w = world_new();
	approve(w, MATRIX_L_WORKLOAD, "bob@example.com", true);
	assert_int_equal(run_until(w, P(HALTED) | P(SCHEDULED) | P(CANARY)), API_PHASE_HALTED);
	assert_non_null(strstr(status_str(w, "message"), "bob@example.com"));
	assert_non_null(strstr(status_str(w, "message"), "not this week"));
	assert_string_equal(status_str(w, "approvals[0].decision"), "Rejected");
	assert_int_equal(w->touched, 0);
	world_free(w);
}

static void test_op_upgrade_eval_security(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	w->u->cls = API_UPGRADE_SECURITY;
	w->u->ncves = 1;
	snprintf(w->u->cves[0], sizeof(w->u->cves[0]), "CVE-2026-24187");
	snprintf(w->u->reason, sizeof(w->u->reason), "GPU driver escalation");
	/* A window that is closed now and a freeze: both skipped. */
	w->rack->nwindows = 1;
	w->rack->windows[0] =
	        (struct api_window){.name = "sat", .days = 32, .start_min = 360, .end_min = 1080};
	w->rack->nfreezes = 1;
	w->rack->freezes[0] =
	        (struct api_freeze){.name = "f", .start_ms = T0, .end_ms = T0 + 86400000LL};
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_NOTICE); /* notice honoured */
	assert_int_equal(st.required_approvals, 0);
	assert_non_null(strstr(st.conditions[0].message, "CVE-2026-24187"));
	assert_non_null(strstr(st.conditions[0].message, "GPU driver escalation"));
	api_rack_upgrade_status_clear(&st);
	w->now = T0 + 49 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_NOTICE);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	api_rack_upgrade_status_clear(&st);
	w->now = T0 + 50 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_CANARY); /* no approval, no window */
	assert_int_equal(w->out.act, OP_UPG_DRAIN);
	api_rack_upgrade_status_clear(&st);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	assert_string_equal(status_str(w, "conditions[0].reason"), "SecurityUpgrade");
	world_free(w);
}

static void test_op_upgrade_eval_window_wait(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->rack->nwindows = 1;
	w->rack->windows[0] = (struct api_window){
	        .name = "tue", .days = 2, .start_min = 22 * 60, .end_min = 4 * 60};
	assert_int_equal(run_until(w, P(SCHEDULED)), API_PHASE_SCHEDULED);
	pass(w, &st);
	assert_int_equal(st.scheduled_start_ms, T0 + 86400000LL + 22 * 3600 * SEC);
	assert_int_equal(w->out.wake_ms, st.scheduled_start_ms);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	api_rack_upgrade_status_clear(&st);
	w->now = T0 + 86400000LL + 22 * 3600 * SEC;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_CANARY);
	assert_string_equal(st.window, "tue");
	api_rack_upgrade_status_clear(&st);
	world_free(w);
}

static void test_op_upgrade_eval_capacity(void **state)
{
	(void)state;
	struct world *w = world_new();
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->trays[9].available = false; /* tray 10 is down already */
	assert_int_equal(run_until(w, P(ROLLING_OUT) | P(HALTED)), API_PHASE_ROLLING_OUT);
	/* 1 down + 1 in the wave = maxUnavailableTrays 2; 17 - 1 = 16 healthy. */
	assert_int_equal(json_array_size(jx_path(w->status, "waves[1].trays")), 1);
	/* Another tray down: no room at all until it is back. */
	struct world *w2 = world_new();
	approve(w2, MATRIX_L_WORKLOAD, "alice", false);
	w2->trays[9].available = w2->trays[10].available = false;
	assert_int_equal(run_until(w2, P(ROLLING_OUT) | P(HALTED)), API_PHASE_ROLLING_OUT);
	assert_int_equal(run_until(w2, P(COMPLETED)), API_PHASE_ROLLING_OUT);
	assert_non_null(strstr(status_str(w2, "message"), "waiting for capacity"));
	assert_int_equal(json_array_size(json_object_get(w2->status, "waves")), 1);
	w2->trays[10].available = true;
	assert_int_equal(run_until(w2, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	world_free(w2);
	world_free(w);
}

/* How many times reason was emitted. */
static int seen_count(const struct world *w, const char *reason)
{
	char want[64];
	int n = 0;
	snprintf(want, sizeof(want), "%s,", reason);
	for (const char *p = w->seen; (p = strstr(p, want)) != NULL; p += strlen(want))
		n++;
	return n;
}

/* A wave that reaches a tray an NVIDIA ComputeDomain uses holds before its
 * Drain, naming the domain, until the domain lets the tray go; nothing of
 * the wave is touched meanwhile. */
static void test_op_upgrade_eval_nvidia_domain_holds_wave(void **state)
{
	(void)state;
	struct world *w = world_new();
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->trays[4].nvidia_domain = "team-nv/nv-a"; /* tray 5 */
	w->trays[7].nvidia_domain = "";             /* tray 8: none */
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_ROLLING_OUT);
	/* Waves of two: 1-2 (canary), 3-4, then 5-6 holds. */
	assert_int_equal(json_array_size(json_object_get(w->status, "waves")), 3);
	char want[512];
	snprintf(want, sizeof(want),
	         "wave 2: held: tray 5 (Node %s) is in NVIDIA ComputeDomain team-nv/nv-a; the "
	         "Drain starts once NVIDIA's driver releases it",
	         w->rack->compute[4].node);
	assert_string_equal(status_str(w, "message"), want);
	assert_int_equal(w->touched & ((1u << 5) | (1u << 6)), 0);
	assert_string_equal(w->driver[4], FROM_DRIVER);
	assert_string_equal(w->driver[5], FROM_DRIVER);
	json_t *s;
	size_t i;
	json_array_foreach(json_object_get(w->status, "steps"), i, s) {
		if (json_integer_value(json_object_get(s, "wave")) != 2)
			continue;
		assert_string_equal(jx_str_or(s, "phase", "Pending"), "Pending");
		if (strcmp(jx_str_or(s, "action", ""), "Drain") == 0)
			assert_non_null(strstr(jx_str_or(s, "message", ""), "team-nv/nv-a"));
	}
	/* One event for the hold, not one per pass. */
	assert_int_equal(seen_count(w, OP_UPGRADE_NVIDIA_REASON), 1);
	assert_string_equal(OP_UPGRADE_NVIDIA_REASON, "HeldByNVIDIAComputeDomain");

	/* NVIDIA's driver lets the tray go: the wave runs, and the step's
	 * record no longer says held. */
	w->trays[4].nvidia_domain = "";
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	json_array_foreach(json_object_get(w->status, "steps"), i, s)
		assert_null(strstr(jx_str_or(s, "message", ""), "held:"));
	for (int k = 0; k < 18; k++)
		assert_string_equal(w->driver[k], TO_DRIVER);
	world_free(w);

	/* The canary's own tray: nothing is touched at all. */
	w = world_new();
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->trays[1].nvidia_domain = "team-nv/nv-b";
	w->trays[0].nvidia_domain = "team-nv/nv-c";
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_CANARY);
	assert_int_equal(w->touched, 0);
	assert_non_null(strstr(status_str(w, "message"), "wave 0: held: tray 1"));
	assert_non_null(
	        strstr(status_str(w, "message"),
	               "is in NVIDIA ComputeDomain team-nv/nv-c (trays of the step in NVIDIA "
	               "ComputeDomains: 1,2); the Drain starts once NVIDIA's driver releases "
	               "them"));
	world_free(w);
}

/* NVIDIA's ComputeDomains served but not read: no step that changes a
 * tray starts, and the engine looks again soon. */
static void test_op_upgrade_eval_nvidia_unread_holds(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->nvidia_unread = "NVIDIA's ComputeDomains are not read yet: forbidden";
	assert_int_equal(run_until(w, P(CANARY) | P(HALTED)), API_PHASE_CANARY);
	pass(w, &st);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	assert_int_equal(w->out.wake_ms, w->now + OP_UPGRADE_NVIDIA_RETRY_MS);
	assert_non_null(strstr(st.message, "wave 0: held: NVIDIA's ComputeDomains are served but "
	                                   "not read (NVIDIA's ComputeDomains are not read yet: "
	                                   "forbidden)"));
	api_rack_upgrade_status_clear(&st);
	assert_int_equal(w->touched, 0);
	w->nvidia_unread = NULL;
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	world_free(w);
}

static void test_op_upgrade_eval_pause(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	w->u->paused = true;
	assert_int_equal(run_until(w, P(PAUSED)), API_PHASE_PAUSED);
	assert_int_equal(run_until(w, P(CANARY) | P(COMPLETED)), API_PHASE_PAUSED);
	assert_int_equal(w->touched, 0);
	w->u->paused = false;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_CANARY);
	assert_int_equal(w->out.act, OP_UPG_DRAIN);
	api_rack_upgrade_status_clear(&st);
	/* Paused mid-wave: the running step finishes, no new one starts. */
	w->u->paused = true;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_PAUSED);
	assert_int_equal(w->out.act, OP_UPG_DRAIN);
	act(w, &st);
	api_rack_upgrade_status_clear(&st);
	pass(w, &st);
	assert_int_equal(w->out.act, OP_UPG_NONE);
	assert_int_equal(st.steps[1].phase, API_STEP_PENDING);
	api_rack_upgrade_status_clear(&st);
	w->u->paused = false;
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	world_free(w);
}

static void test_op_upgrade_eval_abort(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(CANARY)), API_PHASE_CANARY);
	pass(w, &st); /* Drain */
	act(w, &st);
	api_rack_upgrade_status_clear(&st);
	pass(w, &st); /* Apply, in flight */
	assert_int_equal(w->out.act, OP_UPG_APPLY);
	api_rack_upgrade_status_clear(&st);
	w->u->abort = true;
	pass(w, &st); /* the in-flight Apply finishes first */
	assert_int_equal(w->out.act, OP_UPG_APPLY);
	assert_int_equal(st.phase, API_PHASE_CANARY);
	act(w, &st);
	api_rack_upgrade_status_clear(&st);
	pass(w, &st); /* then the canary is released */
	assert_int_equal(w->out.act, OP_UPG_RELEASE);
	assert_int_equal(w->out.trays, (1u << 1) | (1u << 2));
	act(w, &st);
	api_rack_upgrade_status_clear(&st);
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_ABORTED);
	for (unsigned i = 0; i < st.nsteps; i++)
		assert_int_not_equal(st.steps[i].phase, API_STEP_PENDING);
	api_rack_upgrade_status_clear(&st);
	/* Canary all-new, the rest all-old. */
	assert_string_equal(w->driver[0], TO_DRIVER);
	assert_string_equal(w->driver[2], FROM_DRIVER);
	world_free(w);
}

static void test_op_upgrade_eval_missing_inputs(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	w->parts[0]->canary_eligible = false;
	snprintf(w->u->canary_partition, sizeof(w->u->canary_partition), "nope");
	approve(w, MATRIX_L_WORKLOAD, "alice", false);
	assert_int_equal(run_until(w, P(CANARY) | P(HALTED)), API_PHASE_SCHEDULED);
	assert_non_null(strstr(status_str(w, "message"), "canary RackPartition nope"));
	w->u->canary_partition[0] = '\0';
	pass(w, &st);
	assert_non_null(strstr(st.message, "no canaryEligible RackPartition"));
	api_rack_upgrade_status_clear(&st);
	/* The first canaryEligible partition is picked when none is named. */
	w->parts[0]->canary_eligible = true;
	pass(w, &st);
	assert_int_equal(st.phase, API_PHASE_CANARY);
	api_rack_upgrade_status_clear(&st);
	world_free(w);
}

static void test_op_upgrade_eval_manual_edge(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	/* 95 -> 159 -> nvos4317 -> 173: a manual hop, so every touched layer
	 * approves, whatever approvalRequired says. */
	snprintf(w->u->target_stack, sizeof(w->u->target_stack), "gb300-r580-173");
	pass(w, &st);
	assert_int_equal(st.plan.verdict, MATRIX_MANUAL);
	assert_int_equal(st.required_approvals, st.plan.layers);
	assert_true(st.required_approvals & MATRIX_BIT(MATRIX_L_FABRIC));
	api_rack_upgrade_status_clear(&st);
	world_free(w);
}

/* A layer the manual edge asks for that has no window owner can never be
 * approved: the upgrade waits and says which layer lacks one. */
static void test_op_upgrade_eval_manual_edge_without_owner(void **state)
{
	(void)state;
	struct world *w = world_new();
	snprintf(w->u->target_stack, sizeof(w->u->target_stack), "gb300-r580-173");
	for (unsigned k = 0; k < w->rack->nresp; k++)
		if (w->rack->resp[k].layer == MATRIX_L_NODE)
			w->rack->resp[k].window_owner[0] = '\0';
	assert_int_equal(run_until(w, P(AWAITING_APPROVAL)), API_PHASE_AWAITING_APPROVAL);
	run_once(w);
	const char *msg = status_str(w, "message");
	if (strstr(msg, "(no windowOwner on rack \"gb300-r07\" for node: none can count") == NULL)
		fail_msg("message: %s", msg);
	world_free(w);
}

/* Switch trays move once for the rack, every one of them, each update
 * once, before the canary's first tray action; then the driver. */
static void test_op_upgrade_eval_oob_switch_before_driver(void **state)
{
	(void)state;
	struct world *w = world_new();
	static const char *const keys[] = {"nvos", "switchTrayFirmware", "nmx"};
	char key[64];
	world_oob(w, 0);
	world_switch_edge(w);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);

	/* Step 0: the rack-wide out-of-band step, no trays, wave 0. */
	json_t *s0 = jx_path(w->status, "steps[0]");
	assert_string_equal(jx_str_or(s0, "action", ""), "Apply");
	assert_string_equal(jx_str_or(s0, "phase", ""), "Succeeded");
	assert_int_equal(json_array_size(json_object_get(s0, "trays")), 0);
	assert_int_equal(json_array_size(json_object_get(s0, "components")), 3);
	assert_int_equal(json_array_size(json_object_get(s0, "operations")), 9);
	assert_string_equal(jx_str_or(s0, "operations[8].target", ""), "switch-9");
	assert_string_equal(jx_str_or(s0, "operations[8].phase", ""), "Succeeded");
	assert_string_equal(jx_str_or(w->status, "steps[1].action", ""), "Drain");
	/* It ran before anything touched a tray: the first tray action came
	 * after the out-of-band passes. */
	assert_true(w->oob_acts >= 1);
	assert_true(w->first_tray_act > w->oob_acts);
	for (unsigned t = 1; t <= 9; t++) {
		oob_version_is(w, MATRIX_C_NVOS, t, "25.02.4317");
		oob_version_is(w, MATRIX_C_SWITCH_TRAY_FIRMWARE, t, "88.0002.1958");
		oob_version_is(w, MATRIX_C_NMX, t, "1.3.0");
		for (size_t k = 0; k < 3; k++) {
			snprintf(key, sizeof(key), "%s.switch-%u", keys[k], t);
			assert_int_equal(oob_count(w, key), 1);
		}
	}
	/* Only once for the rack: no later wave has an out-of-band step. */
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(w->status, "steps"), i, s)
		if (i > 0)
			assert_null(json_object_get(s, "operations"));
	for (int t = 0; t < 18; t++)
		assert_string_equal(w->driver[t], "580.173.02");
	world_free(w);
}

/* A restarted operator polls the operations the status records and starts
 * none again. */
static void test_op_upgrade_eval_oob_restart_polls_recorded_ops(void **state)
{
	(void)state;
	struct world *w = world_new();
	struct api_rack_upgrade_status st;
	struct op_upgrade_oob_result r;
	char ids[9][128];
	world_oob(w, 400);
	world_switch_edge(w);
	/* Until the first out-of-band pass started the nine NVOS updates. */
	for (int i = 0; i < 400 && w->oob_acts == 0; i++)
		run_once(w);
	assert_int_equal(w->oob_started, 9);
	assert_string_equal(jx_str_or(w->status, "steps[0].phase", ""), "Running");
	for (unsigned t = 0; t < 9; t++) {
		json_t *o = json_array_get(jx_path(w->status, "steps[0].operations"), t);
		assert_string_equal(jx_str_or(o, "component", ""), "nvos");
		assert_string_equal(jx_str_or(o, "phase", ""), "Running");
		snprintf(ids[t], sizeof(ids[t]), "%s", jx_str_or(o, "id", ""));
	}

	/* The restart: a new backend, the status read back from its JSON. */
	oob_backend_free(w->oob);
	struct oob_config c;
	struct fabric_status fst;
	oob_config_init(&c);
	assert_int_equal(str_copy(c.sim_root, sizeof(c.sim_root), w->oob_dir), NV_OK);
	c.sim_delay_ms = 400;
	assert_int_equal(oob_backend_new(&c, &w->oob, &fst), NV_OK);
	pass(w, &st);
	assert_int_equal(w->out.act, OP_UPG_OOB);
	assert_int_equal(w->out.step, 0);
	assert_int_equal(op_upgrade_oob_step(w->oob, &st.steps[0], &w->out, &r), NV_OK);
	assert_int_equal(r.started, 0);
	assert_int_equal(r.running, 9);
	assert_false(r.done);
	for (unsigned t = 0; t < 9; t++)
		assert_string_equal(st.steps[0].ops[t].id, ids[t]);
	api_rack_upgrade_status_clear(&st);

	/* Once they complete, the next components start; each update once. */
	usleep(450 * 1000);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);
	assert_int_equal(oob_count(w, "nvos.switch-1"), 1);
	assert_int_equal(oob_count(w, "nvos.switch-9"), 1);
	assert_int_equal(oob_count(w, "nmx.switch-5"), 1);
	world_free(w);
}

/* A failed update halts the upgrade with the backend's message before any
 * tray is touched. */
static void test_op_upgrade_eval_oob_failure_halts(void **state)
{
	(void)state;
	struct world *w = world_new();
	char path[128];
	world_oob(w, 0);
	world_switch_edge(w);
	snprintf(path, sizeof(path), "%s/oob/fail.nvos.switch-3", w->oob_dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	assert_string_equal(jx_str_or(w->status, "steps[0].phase", ""), "Failed");
	const char *msg = status_str(w, "message");
	assert_non_null(strstr(msg, "step 0 (Apply, wave 0) failed: nvos on switch-3 to 25.02.4317 "
	                            "failed: "));
	assert_non_null(strstr(msg, "injected"));
	assert_int_equal(w->touched, 0);
	assert_int_equal(w->first_tray_act, 0);
	assert_string_equal(w->last_event, "Halted");
	world_free(w);
}

/* Without a backend, a plan with out-of-band steps halts at the canary's
 * start, naming the plan step and the component, before any tray is
 * touched. */
static void test_op_upgrade_eval_oob_no_backend_halts(void **state)
{
	(void)state;
	struct world *w = world_new();
	world_switch_edge(w);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	assert_string_equal(jx_str_or(w->status, "steps[0].phase", ""), "Failed");
	assert_string_equal(jx_str_or(w->status, "steps[0].message", ""),
	                    "plan step 1 needs an out-of-band backend (component nvos); none "
	                    "configured");
	assert_non_null(strstr(status_str(w, "message"), "needs an out-of-band backend"));
	assert_int_equal(w->touched, 0);
	assert_string_equal(jx_str_or(w->status, "steps[1].phase", ""), "Pending");
	world_free(w);
}

/* The trays of wave i of the record, as a bit set. */
static uint32_t wave_trays(struct world *w, size_t i)
{
	uint32_t set = 0;
	size_t k;
	json_t *t;
	json_array_foreach(
	        json_object_get(json_array_get(json_object_get(w->status, "waves"), i), "trays"), k,
	        t)
		set |= 1u << json_integer_value(t);
	return set;
}

/* From gb300-r580-95 the plan is the driver (to 159), then the switch
 * trays, then the driver again (to 173). The switch trays move once, after
 * every tray runs 159 and before any runs 173: the plan runs in two
 * stages, the second beginning with a wave of no trays, then the canary's
 * trays with their gate. */
static void test_op_upgrade_eval_stages_switch_between_drivers(void **state)
{
	(void)state;
	struct world *w = world_new();
	const uint32_t all = ((1u << 19) - 1) & ~1u;
	world_oob(w, 0);
	snprintf(w->u->target_stack, sizeof(w->u->target_stack), "gb300-r580-173");
	for (unsigned l = 0; l < MATRIX_L__COUNT; l++)
		approve(w, (enum matrix_layer)l, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_COMPLETED);

	/* Every tray ran 580.159.03 when the switch trays began to move. */
	for (int t = 0; t < 18; t++)
		assert_string_equal(w->oob_drivers[t], TO_DRIVER);
	for (unsigned t = 1; t <= 9; t++) {
		oob_version_is(w, MATRIX_C_NVOS, t, "25.02.4317");
		oob_version_is(w, MATRIX_C_NMX, t, "1.3.0");
		char key[64];
		snprintf(key, sizeof(key), "nvos.switch-%u", t);
		assert_int_equal(oob_count(w, key), 1);
	}
	for (int t = 0; t < 18; t++)
		assert_string_equal(w->driver[t], "580.173.02");
	assert_int_equal(w->driver_sets, 36); /* each tray twice, never more */

	/* The record: stage 1 covers every tray once from the canary; a wave
	 * with no trays holds the one rack-wide step; stage 2 covers every
	 * tray once again, the canary's first, with its own gate. */
	json_t *waves = json_object_get(w->status, "waves");
	size_t n = json_array_size(waves), rackw = 0, i;
	uint32_t before = 0, after = 0;
	for (i = 1; i < n && rackw == 0; i++)
		if (wave_trays(w, i) == 0)
			rackw = i;
	assert_true(rackw > 0);
	for (i = 0; i < n; i++) {
		uint32_t t = wave_trays(w, i);
		uint32_t *set = i < rackw ? &before : &after;
		assert_int_equal(*set & t, 0);
		*set |= t;
	}
	assert_int_equal(before, all);
	assert_int_equal(after, all);
	assert_int_equal(wave_trays(w, 0), (1u << 1) | (1u << 2));
	assert_int_equal(wave_trays(w, rackw + 1), (1u << 1) | (1u << 2));
	size_t k;
	json_t *s;
	int gates = 0, rack_steps = 0;
	json_array_foreach(json_object_get(w->status, "steps"), k, s) {
		size_t wv = (size_t)json_integer_value(json_object_get(s, "wave"));
		const char *action = jx_str_or(s, "action", "");
		assert_string_equal(jx_str_or(s, "phase", ""), "Succeeded");
		if (strcmp(action, "Validate") == 0) {
			gates++;
			assert_true(wv == 0 || wv == rackw + 1);
		}
		if (wv == rackw) {
			rack_steps++;
			assert_string_equal(action, "Apply");
			assert_int_equal(json_array_size(json_object_get(s, "trays")), 0);
			assert_int_equal(json_array_size(json_object_get(s, "operations")), 9);
		}
	}
	assert_int_equal(gates, 2);
	assert_int_equal(rack_steps, 1);
	assert_string_equal(w->last_event, "Completed");
	world_free(w);
}

/* Without an out-of-band backend, a switch-tray step of a later stage
 * halts the upgrade before the canary, not between the stages. */
static void test_op_upgrade_eval_stages_no_backend_halts_first(void **state)
{
	(void)state;
	struct world *w = world_new();
	snprintf(w->u->target_stack, sizeof(w->u->target_stack), "gb300-r580-173");
	for (unsigned l = 0; l < MATRIX_L__COUNT; l++)
		approve(w, (enum matrix_layer)l, "alice", false);
	assert_int_equal(run_until(w, P(COMPLETED) | P(HALTED)), API_PHASE_HALTED);
	const char *msg = status_str(w, "message");
	if (strstr(msg, "plan step 2 (stage 2) needs an out-of-band backend (component ") == NULL)
		fail_msg("message: %s", msg);
	assert_int_equal(w->touched, 0);
	world_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_op_upgrade_eval_happy_path),
	        cmocka_unit_test(test_op_upgrade_eval_gate_failure),
	        cmocka_unit_test(test_op_upgrade_eval_gate_failure_rolls_back),
	        cmocka_unit_test(test_op_upgrade_eval_rollback_gate_failure_halts),
	        cmocka_unit_test(test_op_upgrade_eval_rollback_refused_holds),
	        cmocka_unit_test(test_op_upgrade_eval_drain_deadline_halts_until_retry),
	        cmocka_unit_test(test_op_upgrade_eval_retry_leaves_a_failed_gate),
	        cmocka_unit_test(test_op_upgrade_eval_soak_clock_back),
	        cmocka_unit_test(test_op_upgrade_eval_mask_health_passes),
	        cmocka_unit_test(test_op_upgrade_eval_mask_fault_halts_naming_gpu),
	        cmocka_unit_test(test_op_upgrade_eval_summary_fault_halts),
	        cmocka_unit_test(test_op_upgrade_eval_fabric_unknown_waits),
	        cmocka_unit_test(test_op_upgrade_eval_fabric_fault_in_wave),
	        cmocka_unit_test(test_op_upgrade_eval_driver_retrying_waits),
	        cmocka_unit_test(test_op_upgrade_eval_driver_change_failed_halts),
	        cmocka_unit_test(test_op_upgrade_eval_rejected),
	        cmocka_unit_test(test_op_upgrade_eval_security),
	        cmocka_unit_test(test_op_upgrade_eval_window_wait),
	        cmocka_unit_test(test_op_upgrade_eval_capacity),
	        cmocka_unit_test(test_op_upgrade_eval_nvidia_domain_holds_wave),
	        cmocka_unit_test(test_op_upgrade_eval_nvidia_unread_holds),
	        cmocka_unit_test(test_op_upgrade_eval_pause),
	        cmocka_unit_test(test_op_upgrade_eval_abort),
	        cmocka_unit_test(test_op_upgrade_eval_missing_inputs),
	        cmocka_unit_test(test_op_upgrade_eval_manual_edge),
	        cmocka_unit_test(test_op_upgrade_eval_manual_edge_without_owner),
	        cmocka_unit_test(test_op_upgrade_eval_oob_switch_before_driver),
	        cmocka_unit_test(test_op_upgrade_eval_oob_restart_polls_recorded_ops),
	        cmocka_unit_test(test_op_upgrade_eval_oob_failure_halts),
	        cmocka_unit_test(test_op_upgrade_eval_oob_no_backend_halts),
	        cmocka_unit_test(test_op_upgrade_eval_stages_switch_between_drivers),
	        cmocka_unit_test(test_op_upgrade_eval_stages_no_backend_halts_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
