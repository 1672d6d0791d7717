// SPDX-License-Identifier: Apache-2.0
// RackUpgrade and UpgradeApproval: parsing with the CRDs' rules, the status
// record of an upgrade (plan, waves, steps with gate evidence, approvals),
// and the admission checks of an upgrade against its matrix.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/alloc.h"
#include "nvl72/api_upgrade.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/timeutil.h"

static const char *const class_names[] = {"routine", "security"};
static const char *const on_rack_halt_names[] = {"Continue", "Stop"};
static const char *const decision_names[] = {"Approved", "Rejected"};
static const char *const phase_names[] = {
        "Proposed",   "Notice",      "AwaitingApproval", "Scheduled", "Canary",
        "Validating", "RollingOut",  "Completed",        "Halted",    "Paused",
        "Aborted",    "RollingBack", "RolledBack",
};
static const char *const step_phase_names[] = {"Pending", "Running", "Succeeded", "Failed",
                                               "Skipped"};
static const char *const action_names[] = {
        "Cordon",   "Drain", "Apply",    "WaitFabric", "WaitIMEX",
        "Validate", "Soak",  "Uncordon", "RollBack",
};

const char *api_step_action_name(enum api_step_action a)
{
	if ((unsigned)a >= sizeof(action_names) / sizeof(action_names[0]))
		return action_names[0];
	return action_names[a];
}

const char *api_upgrade_phase_name(enum api_upgrade_phase p)
{
	if ((unsigned)p >= sizeof(phase_names) / sizeof(phase_names[0]))
		return "Proposed";
	return phase_names[p];
}

bool api_upgrade_phase_final(enum api_upgrade_phase p)
{
	return p == API_PHASE_COMPLETED || p == API_PHASE_ABORTED || p == API_PHASE_ROLLED_BACK;
}

bool api_upgrade_phase_from_name(const char *name, enum api_upgrade_phase *out)
{
	for (size_t i = 0; name != NULL && i < ARRAY_LEN(phase_names); i++)
		if (strcmp(name, phase_names[i]) == 0) {
			*out = (enum api_upgrade_phase)i;
			return true;
		}
	return false;
}

bool api_upgrade_phase_name_final(const char *phase)
{
	enum api_upgrade_phase p;
	return api_upgrade_phase_from_name(phase, &p) && api_upgrade_phase_final(p);
}

enum nv_err api_upgrade_rollback_check(const struct matrix *m, const char *from, const char *to,
                                       unsigned plan_flags, char *why, size_t cap)
{
	struct matrix_plan fwd, back;
	enum nv_err e = matrix_plan_build(m, from, to, plan_flags, &fwd);
	if (e != NV_OK)
		return e;
	if ((e = matrix_plan_build(m, to, from, plan_flags, &back)) != NV_OK)
		return e;
	if (!fwd.reversible) {
		snprintf(why, cap,
		         "CompatibilityMatrix \"%s\" does not mark the move %s -> %s "
		         "reversible",
		         m->name, from, to);
		return NV_E_UNSUPPORTED;
	}
	if (back.verdict == MATRIX_BLOCKED) {
		snprintf(why, cap, "CompatibilityMatrix \"%s\" allows no move back %s -> %s: %s",
		         m->name, to, from, back.problem);
		return NV_E_UNSUPPORTED;
	}
	return NV_OK;
}

bool api_rack_upgrade_in_flight(const json_t *obj)
{
	const char *phase = json_string_value(jx_path(obj, "status.phase"));
	if (phase == NULL || phase[0] == '\0')
		return true;
	return !api_upgrade_phase_name_final(phase);
}

static int64_t completion_ms(const json_t *obj)
{
	int64_t ms = 0;
	const char *t = json_string_value(jx_path(obj, "status.completionTime"));
	if (t == NULL || time_parse_rfc3339(t, &ms) != NV_OK)
		return 0;
	return ms;
}

const json_t *api_rack_upgrade_latest_completed(const json_t *upgrades, const char *rack)
{
	const json_t *best = NULL, *o;
	int64_t best_ms = 0;
	size_t i;
	if (rack == NULL || rack[0] == '\0')
		return NULL;
	json_array_foreach(upgrades, i, o) {
		if (strcmp(jx_str_or(o, "spec.rack", ""), rack) != 0 ||
		    strcmp(jx_str_or(o, "status.phase", ""), "Completed") != 0)
			continue;
		int64_t ms = completion_ms(o);
		if (best == NULL || ms > best_ms ||
		    (ms == best_ms && strcmp(jx_str_or(o, "metadata.name", ""),
		                             jx_str_or(best, "metadata.name", "")) > 0)) {
			best = o;
			best_ms = ms;
		}
	}
	return best;
}

static void selector_parse(struct api_ctx *c, const json_t *sel, struct api_rack_upgrade *u)
{
	const json_t *ml = NULL;
	const char *key = NULL;
	const json_t *v = NULL;
	if (!api_get_object(c, sel, "matchLabels", true, &ml))
		return;
	size_t old = api_path_push(c, "matchLabels");
	if (json_object_size(ml) > API_SELECTOR_LABELS_MAX)
		api_fail(c, "must have at most %d labels", API_SELECTOR_LABELS_MAX);
	json_object_foreach((json_t *)ml, key, v) {
		if (u->nselector >= API_SELECTOR_LABELS_MAX)
			break;
		struct api_label *l = &u->selector[u->nselector];
		size_t o2 = api_path_push(c, key);
		if (strlen(key) == 0 || strlen(key) >= sizeof(l->key))
			api_fail(c, "label keys must be 1 to 317 characters");
		else if (api_check_string(c, v, 0, 63, API_S_ANY, l->value, sizeof(l->value))) {
			memcpy(l->key, key, strlen(key) + 1);
			u->nselector++;
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void cves_parse(struct api_ctx *c, const json_t *spec, struct api_rack_upgrade *u)
{
	const json_t *arr = NULL;
	if (!api_get_array(c, spec, "cves", false, 0, API_UPGRADE_CVES_MAX, &arr))
		return;
	size_t old = api_path_push(c, "cves");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		char *id = u->cves[u->ncves];
		if (api_check_string(c, json_array_get(arr, i), 1, 31, API_S_CVE, id,
		                     MATRIX_CVE_LEN)) {
			bool dup = false;
			for (unsigned k = 0; k < u->ncves && !dup; k++)
				dup = strcmp(u->cves[k], id) == 0;
			if (dup)
				api_fail(c, "duplicate value \"%s\"", id);
			else
				u->ncves++;
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void target_parse(struct api_ctx *c, const json_t *spec, struct api_rack_upgrade *u)
{
	const json_t *o = NULL;
	if (api_get_object(c, spec, "target", true, &o)) {
		size_t old = api_path_push(c, "target");
		(void)api_get_string(c, o, "matrix", true, 1, 63, API_S_DNS_SUBDOMAIN,
		                     u->target_matrix, sizeof(u->target_matrix));
		(void)api_get_string(c, o, "stack", true, 1, 63, API_S_STACK, u->target_stack,
		                     sizeof(u->target_stack));
		api_path_pop(c, old);
	}
	if (api_get_object(c, spec, "canary", false, &o)) {
		size_t old = api_path_push(c, "canary");
		(void)api_get_string(c, o, "partition", false, 0, 63, API_S_DNS_LABEL,
		                     u->canary_partition, sizeof(u->canary_partition));
		(void)api_get_duration(c, o, "soak", &u->canary_soak_ms);
		api_path_pop(c, old);
	}
}

static void upgrade_spec_parse(struct api_ctx *c, const json_t *spec, struct api_rack_upgrade *u)
{
	const json_t *sel = NULL;
	int64_t v = 0;
	int e = 0;
	(void)api_get_string(c, spec, "rack", false, 1, 58, API_S_DNS_LABEL, u->rack,
	                     sizeof(u->rack));
	bool has_sel = api_get_object(c, spec, "rackSelector", false, &sel);
	if (has_sel) {
		size_t old = api_path_push(c, "rackSelector");
		selector_parse(c, sel, u);
		api_path_pop(c, old);
	}
	const json_t *r = json_object_get(spec, "rack");
	const json_t *rs = json_object_get(spec, "rackSelector");
	if ((r != NULL && !json_is_null(r)) == (rs != NULL && !json_is_null(rs)))
		api_fail_at(c, "rack", "exactly one of rack and rackSelector must be set");
	if (api_get_int(c, spec, "maxParallelRacks", false, 1, API_UPGRADE_RACKS_MAX, &v))
		u->max_parallel_racks = (int)v;
	if (api_get_enum(c, spec, "onRackHalt", false, on_rack_halt_names, 2, &e))
		u->on_rack_halt = (enum api_on_rack_halt)e;
	if (!has_sel && json_object_get(spec, "maxParallelRacks") != NULL)
		api_fail_at(c, "maxParallelRacks",
		            "only a rackSelector upgrade runs racks in parallel");
	if (!has_sel && json_object_get(spec, "onRackHalt") != NULL)
		api_fail_at(c, "onRackHalt", "only a rackSelector upgrade has other racks to stop");
	target_parse(c, spec, u);
	if (has_sel && u->canary_partition[0] != '\0')
		api_fail_at(c, "canary.partition",
		            "a partition belongs to one rack: a rackSelector upgrade lets each "
		            "rack pick its canary");
	if (api_get_enum(c, spec, "class", false, class_names, 2, &e))
		u->cls = (enum api_upgrade_class)e;
	(void)api_get_string(c, spec, "reason", false, 0, 2048, API_S_ANY, u->reason,
	                     sizeof(u->reason));
	cves_parse(c, spec, u);
	(void)api_get_time(c, spec, "earliestStart", false, &u->earliest_start_ms);
	if (api_get_int(c, spec, "waveSize", false, 1, API_COMPUTE_TRAYS, &v))
		u->wave_size = (int)v;
	(void)api_get_bool(c, spec, "paused", &u->paused);
	(void)api_get_bool(c, spec, "abort", &u->abort);
	(void)api_get_bool(c, spec, "force", &u->force);
	if (api_get_int(c, spec, "retry", false, 0, INT32_MAX, &v))
		u->retry = v;
	if (u->cls == API_UPGRADE_SECURITY && u->reason[0] == '\0')
		api_fail_at(c, "reason", "a security upgrade must carry a reason");
	if (u->cls == API_UPGRADE_SECURITY && json_array_size(json_object_get(spec, "cves")) == 0)
		api_fail_at(c, "cves", "a security upgrade must carry at least one CVE id");
	if (u->force && u->cls != API_UPGRADE_SECURITY)
		api_fail_at(c, "force", "force is allowed only for the security class");
}

enum nv_err api_rack_upgrade_parse(const json_t *obj, struct api_rack_upgrade **out,
                                   struct api_errors *errs)
{
	struct api_ctx c;
	struct api_rack_upgrade *u = xcalloc(1, sizeof(*u));
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "RackUpgrade", false, &u->meta, NULL);
	if (spec) {
		size_t old = api_path_push(&c, "spec");
		upgrade_spec_parse(&c, spec, u);
		api_path_pop(&c, old);
	}
	if (api_ctx_failed(&c)) {
		free(u);
		return NV_E_INVALID_OBJECT;
	}
	*out = u;
	return NV_OK;
}

bool api_rack_upgrade_selects(const struct api_rack_upgrade *u, const json_t *rack)
{
	const json_t *labels = jx_path(rack, "metadata.labels");
	for (unsigned i = 0; i < u->nselector; i++) {
		const char *v = json_string_value(json_object_get(labels, u->selector[i].key));
		if (v == NULL || strcmp(v, u->selector[i].value) != 0)
			return false;
	}
	return true;
}

void api_rack_upgrade_free(struct api_rack_upgrade *u)
{
	free(u);
}

/* spec.upgradeRef: the webhook's stamp of the RackUpgrade approved. */
static void approval_stamp_parse(struct api_ctx *c, const json_t *spec,
                                 struct api_upgrade_approval *a)
{
	const json_t *ref = NULL;
	const json_t *t = NULL;
	if (!api_get_object(c, spec, "upgradeRef", false, &ref))
		return;
	size_t old = api_path_push(c, "upgradeRef");
	(void)api_get_string(c, ref, "uid", true, 1, 63, API_S_ANY, a->upgrade_uid,
	                     sizeof(a->upgrade_uid));
	if (api_get_object(c, ref, "target", true, &t)) {
		size_t o2 = api_path_push(c, "target");
		(void)api_get_string(c, t, "matrix", true, 1, 63, API_S_DNS_SUBDOMAIN,
		                     a->upgrade_matrix, sizeof(a->upgrade_matrix));
		(void)api_get_string(c, t, "stack", true, 1, 63, API_S_STACK, a->upgrade_stack,
		                     sizeof(a->upgrade_stack));
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void approval_spec_parse(struct api_ctx *c, const json_t *spec,
                                struct api_upgrade_approval *a)
{
	int e = 0;
	const json_t *by = NULL;
	(void)api_get_string(c, spec, "upgrade", true, 1, 63, API_S_DNS_SUBDOMAIN, a->upgrade,
	                     sizeof(a->upgrade));
	if (api_get_enum(c, spec, "layer", true, api_layer_names, 5, &e))
		a->layer = (enum matrix_layer)e;
	if (api_get_enum(c, spec, "decision", false, decision_names, 2, &e))
		a->rejected = e == 1;
	(void)api_get_string(c, spec, "comment", false, 0, 2048, API_S_ANY, a->comment,
	                     sizeof(a->comment));
	(void)api_get_time(c, spec, "notBefore", false, &a->not_before_ms);
	if (api_get_object(c, spec, "approvedBy", false, &by)) {
		const json_t *groups = NULL;
		size_t old = api_path_push(c, "approvedBy");
		(void)api_get_string(c, by, "username", false, 0, 253, API_S_ANY, a->approved_by,
		                     sizeof(a->approved_by));
		(void)api_get_string(c, by, "uid", false, 0, 128, API_S_ANY, a->approved_by_uid,
		                     sizeof(a->approved_by_uid));
		if (api_get_array(c, by, "groups", false, 0, API_APPROVAL_GROUPS_MAX, &groups)) {
			size_t o2 = api_path_push(c, "groups");
			for (size_t i = 0; i < json_array_size(groups); i++) {
				size_t o3 = api_path_push_index(c, i);
				if (api_check_string(c, json_array_get(groups, i), 0, 253,
				                     API_S_ANY, a->groups[a->ngroups],
				                     sizeof(a->groups[0])))
					a->ngroups++;
				api_path_pop(c, o3);
			}
			api_path_pop(c, o2);
		}
		api_path_pop(c, old);
	}
	approval_stamp_parse(c, spec, a);
	if (a->rejected && a->comment[0] == '\0')
		api_fail_at(c, "comment", "a rejection must carry a comment");
}

enum nv_err api_upgrade_approval_parse(const json_t *obj, struct api_upgrade_approval **out,
                                       struct api_errors *errs)
{
	struct api_ctx c;
	struct api_upgrade_approval *a = xcalloc(1, sizeof(*a));
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "UpgradeApproval", false, &a->meta, NULL);
	if (spec) {
		size_t old = api_path_push(&c, "spec");
		approval_spec_parse(&c, spec, a);
		api_path_pop(&c, old);
	}
	if (api_ctx_failed(&c)) {
		free(a);
		return NV_E_INVALID_OBJECT;
	}
	*out = a;
	return NV_OK;
}

void api_upgrade_approval_free(struct api_upgrade_approval *a)
{
	free(a);
}

/* ---- status ----------------------------------------------------------- */

static json_t *layers_to_json(uint32_t layers)
{
	json_t *arr = json_array();
	for (unsigned l = 0; l < MATRIX_L__COUNT; l++)
		if (layers & MATRIX_BIT(l))
			json_array_append_new(arr, json_string(api_layer_names[l]));
	return arr;
}

// The CRD keeps at most MATRIX_STEPS_MAX steps of a plan; a longer
// (multi-hop) plan is cut there.
static json_t *plan_to_json(const struct matrix_plan *p)
{
	json_t *o = json_object();
	json_t *steps = json_array();
	json_object_set_new(o, "verdict", json_string(matrix_verdict_name(p->verdict)));
	json_object_set_new(o, "reversible", json_boolean(p->reversible));
	for (unsigned i = 0; i < p->nsteps && i < MATRIX_STEPS_MAX; i++) {
		const struct matrix_plan_step *s = &p->steps[i];
		json_t *x = json_object();
		json_object_set_new(x, "components", api_components_to_json(s->components));
		json_object_set_new(x, "requiresDrain", json_boolean(s->drain));
		json_object_set_new(x, "requiresFabricRestart", json_boolean(s->fabric_restart));
		json_object_set_new(x, "requiresReboot", json_boolean(s->reboot));
		json_array_append_new(steps, x);
	}
	json_object_set_new(o, "steps", steps);
	json_object_set_new(o, "layers", layers_to_json(p->layers));
	return o;
}

static json_t *evidence_to_json(const struct api_gate_evidence *e)
{
	json_t *o = json_object();
	api_json_set_str(o, "fabricState", e->fabric_state);
	api_json_set_str(o, "imexDomainState", e->imex_domain_state);
	json_object_set_new(o, "busBandwidthGBps", json_integer(e->busbw_gbps));
	json_object_set_new(o, "floorGBps", json_integer(e->floor_gbps));
	json_object_set_new(o, "tolerancePercent", json_integer(e->tolerance_pct));
	api_json_set_str(o, "transport", e->transport);
	json_object_set_new(o, "passed", json_boolean(e->passed));
	api_json_set_str(o, "report", e->report);
	return o;
}

static json_t *step_to_json(const struct api_upgrade_step *s)
{
	json_t *o = json_object();
	json_object_set_new(o, "index", json_integer(s->index));
	json_object_set_new(o, "wave", json_integer(s->wave));
	json_object_set_new(o, "action", json_string(api_step_action_name(s->action)));
	if (s->components != 0)
		json_object_set_new(o, "components", api_components_to_json(s->components));
	json_object_set_new(o, "trays", api_tray_set_to_json(s->trays));
	json_object_set_new(o, "phase", json_string(step_phase_names[(unsigned)s->phase % 5]));
	api_json_set_time(o, "startTime", s->start_ms);
	api_json_set_time(o, "completionTime", s->completion_ms);
	api_json_set_str(o, "message", s->message);
	if (s->evidence.set)
		json_object_set_new(o, "evidence", evidence_to_json(&s->evidence));
	if (s->nops > 0) {
		json_t *ops = json_array();
		for (unsigned i = 0; i < s->nops && i < API_UPGRADE_STEP_OPS_MAX; i++) {
			const struct api_upgrade_oob_op *x = &s->ops[i];
			json_array_append_new(ops,
			                      json_pack("{s:s,s:s,s:s,s:s}", "component",
			                                api_component_names[(unsigned)x->component %
			                                                    MATRIX_C__COUNT],
			                                "target", x->target, "id", x->id, "phase",
			                                step_phase_names[(unsigned)x->phase % 5]));
		}
		json_object_set_new(o, "operations", ops);
	}
	return o;
}

static json_t *waves_to_json(const struct api_rack_upgrade_status *s)
{
	json_t *arr = json_array();
	for (unsigned i = 0; i < s->nwaves && i < API_UPGRADE_WAVES_MAX; i++) {
		const struct api_upgrade_wave *w = &s->waves[i];
		json_t *o = json_object();
		json_object_set_new(o, "index", json_integer(w->index));
		json_object_set_new(o, "trays", api_tray_set_to_json(w->trays));
		json_object_set_new(o, "phase",
		                    json_string(step_phase_names[(unsigned)w->phase % 5]));
		api_json_set_time(o, "startTime", w->start_ms);
		api_json_set_time(o, "completionTime", w->completion_ms);
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *approvals_to_json(const struct api_rack_upgrade_status *s)
{
	json_t *arr = json_array();
	for (unsigned i = 0; i < s->napprovals && i < 10; i++) {
		const struct api_upgrade_approval_ref *a = &s->approvals[i];
		json_t *o = json_object();
		json_object_set_new(o, "layer", json_string(matrix_layer_name(a->layer)));
		json_object_set_new(o, "name", json_string(a->name));
		api_json_set_str(o, "user", a->user);
		json_object_set_new(o, "decision",
		                    json_string(decision_names[a->rejected ? 1 : 0]));
		api_json_set_time(o, "time", a->time_ms);
		json_array_append_new(arr, o);
	}
	return arr;
}

/* A rack whose child the apiserver refused shows phase Refused: no
 * child runs for it. */
#define RACK_REFUSED "Refused"

static json_t *racks_to_json(const struct api_rack_upgrade_status *s)
{
	json_t *arr = json_array();
	for (unsigned i = 0; i < s->nracks && i < API_UPGRADE_RACKS_MAX; i++) {
		const struct api_upgrade_rack *r = &s->racks[i];
		json_t *o = json_object();
		json_object_set_new(o, "name", json_string(r->name));
		api_json_set_str(o, "upgrade", r->upgrade);
		if (r->refused)
			json_object_set_new(o, "phase", json_string(RACK_REFUSED));
		else if (r->has_phase)
			json_object_set_new(o, "phase",
			                    json_string(api_upgrade_phase_name(r->phase)));
		api_json_set_time(o, "slotTime", r->slot_ms);
		api_json_set_time(o, "time", r->time_ms);
		api_json_set_str(o, "message", r->message);
		json_array_append_new(arr, o);
	}
	return arr;
}

json_t *api_rack_upgrade_status_to_json(const struct api_rack_upgrade_status *s)
{
	json_t *o = json_object();
	json_t *steps = json_array();
	if (s->observed_generation > 0)
		json_object_set_new(o, "observedGeneration", json_integer(s->observed_generation));
	json_object_set_new(o, "phase", json_string(api_upgrade_phase_name(s->phase)));
	api_json_set_time(o, "phaseTime", s->phase_ms);
	api_json_set_str(o, "message", s->message);
	api_json_set_str(o, "fromStack", s->from_stack);
	if (s->has_plan)
		json_object_set_new(o, "plan", plan_to_json(&s->plan));
	api_json_set_time(o, "noticeStartTime", s->notice_start_ms);
	api_json_set_time(o, "noticeEndTime", s->notice_end_ms);
	json_object_set_new(o, "requiredApprovals", layers_to_json(s->required_approvals));
	json_object_set_new(o, "approvals", approvals_to_json(s));
	api_json_set_time(o, "scheduledStart", s->scheduled_start_ms);
	api_json_set_str(o, "window", s->window);
	if (s->canary_partition[0] != '\0' || s->canary_trays != 0) {
		json_t *c = json_object();
		api_json_set_str(c, "partition", s->canary_partition);
		json_object_set_new(c, "trays", api_tray_set_to_json(s->canary_trays));
		json_object_set_new(o, "canary", c);
	}
	json_object_set_new(o, "waves", waves_to_json(s));
	for (unsigned i = 0; i < s->nsteps && i < API_UPGRADE_STEPS_MAX; i++)
		json_array_append_new(steps, step_to_json(&s->steps[i]));
	json_object_set_new(o, "steps", steps);
	api_json_set_time(o, "startTime", s->start_ms);
	api_json_set_time(o, "completionTime", s->completion_ms);
	if (s->retried > 0)
		json_object_set_new(o, "retried", json_integer(s->retried));
	if (s->nracks > 0)
		json_object_set_new(o, "racks", racks_to_json(s));
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}

json_t *api_upgrade_approval_status_to_json(const struct api_upgrade_approval_status *s)
{
	json_t *o = json_object();
	if (s->observed_generation > 0)
		json_object_set_new(o, "observedGeneration", json_integer(s->observed_generation));
	json_object_set_new(o, "counted", json_boolean(s->counted));
	api_json_set_str(o, "message", s->message);
	json_object_set_new(o, "conditions", api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}

/* ---- status parser ---------------------------------------------------- */

/* The status is read back on every pass (it is the upgrade's durable
 * record), so it is checked as strictly as a spec: a status another writer
 * broke is reported field by field instead of being half understood. */

static void plan_step_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	struct matrix_plan *p = arg;
	struct matrix_plan_step *s = &p->steps[i];
	(void)api_get_enum_set(c, item, "components", false, 0, api_component_names,
	                       MATRIX_C__COUNT, &s->components);
	(void)api_get_bool(c, item, "requiresDrain", &s->drain);
	(void)api_get_bool(c, item, "requiresFabricRestart", &s->fabric_restart);
	(void)api_get_bool(c, item, "requiresReboot", &s->reboot);
	p->needs_drain |= s->drain;
	p->needs_fabric_restart |= s->fabric_restart;
	if (i + 1 > p->nsteps)
		p->nsteps = (unsigned)i + 1;
}

static void plan_parse(struct api_ctx *c, const json_t *o, struct matrix_plan *p)
{
	static const char *const verdicts[] = {"blocked", "manual", "safe"};
	const json_t *steps = NULL;
	int e = 0;
	if (api_get_enum(c, o, "verdict", false, verdicts, 3, &e))
		p->verdict = (enum matrix_verdict)e;
	(void)api_get_bool(c, o, "reversible", &p->reversible);
	if (api_get_array(c, o, "steps", false, 0, MATRIX_STEPS_MAX, &steps))
		api_each_object(c, steps, "steps", plan_step_parse, p);
	(void)api_get_enum_set(c, o, "layers", false, 0, api_layer_names, 5, &p->layers);
}

static void evidence_parse(struct api_ctx *c, const json_t *o, struct api_gate_evidence *e)
{
	int64_t v = 0;
	e->set = true;
	(void)api_get_string(c, o, "fabricState", false, 0, 16, API_S_ANY, e->fabric_state,
	                     sizeof(e->fabric_state));
	(void)api_get_string(c, o, "imexDomainState", false, 0, 16, API_S_ANY, e->imex_domain_state,
	                     sizeof(e->imex_domain_state));
	if (api_get_int(c, o, "busBandwidthGBps", false, 0, 100000, &v))
		e->busbw_gbps = (int)v;
	if (api_get_int(c, o, "floorGBps", false, 0, 100000, &v))
		e->floor_gbps = (int)v;
	if (api_get_int(c, o, "tolerancePercent", false, 0, 50, &v))
		e->tolerance_pct = (int)v;
	(void)api_get_string(c, o, "transport", false, 0, 16, API_S_ANY, e->transport,
	                     sizeof(e->transport));
	(void)api_get_bool(c, o, "passed", &e->passed);
	(void)api_get_string(c, o, "report", false, 0, 512, API_S_ANY, e->report,
	                     sizeof(e->report));
}

static void oob_op_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	struct api_upgrade_step *st = arg;
	struct api_upgrade_oob_op *x = &st->ops[i];
	int e = 0;
	if (api_get_enum(c, item, "component", true, api_component_names, MATRIX_C__COUNT, &e))
		x->component = (enum matrix_component)e;
	(void)api_get_string(c, item, "target", true, 1, sizeof(x->target) - 1, API_S_ANY,
	                     x->target, sizeof(x->target));
	(void)api_get_string(c, item, "id", true, 1, sizeof(x->id) - 1, API_S_ANY, x->id,
	                     sizeof(x->id));
	if (api_get_enum(c, item, "phase", true, step_phase_names, 5, &e))
		x->phase = (enum api_step_phase)e;
	if (i + 1 > st->nops)
		st->nops = (unsigned)i + 1;
}

static void step_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	struct api_rack_upgrade_status *s = arg;
	struct api_upgrade_step *st = &s->steps[i];
	const json_t *ev = NULL, *ops = NULL;
	int64_t v = 0;
	int e = 0;
	if (api_get_int(c, item, "index", true, 0, API_UPGRADE_STEPS_MAX - 1, &v))
		st->index = (int)v;
	if (api_get_int(c, item, "wave", false, 0, API_UPGRADE_WAVES_MAX - 1, &v))
		st->wave = (int)v;
	if (api_get_enum(c, item, "action", true, action_names,
	                 sizeof(action_names) / sizeof(action_names[0]), &e))
		st->action = (enum api_step_action)e;
	(void)api_get_enum_set(c, item, "components", false, 0, api_component_names,
	                       MATRIX_C__COUNT, &st->components);
	(void)api_get_tray_set(c, item, "trays", false, 0, &st->trays);
	if (api_get_enum(c, item, "phase", true, step_phase_names, 5, &e))
		st->phase = (enum api_step_phase)e;
	(void)api_get_time(c, item, "startTime", false, &st->start_ms);
	(void)api_get_time(c, item, "completionTime", false, &st->completion_ms);
	(void)api_get_string(c, item, "message", false, 0, sizeof(st->message) - 1, API_S_ANY,
	                     st->message, sizeof(st->message));
	if (api_get_object(c, item, "evidence", false, &ev)) {
		size_t old = api_path_push(c, "evidence");
		evidence_parse(c, ev, &st->evidence);
		api_path_pop(c, old);
	}
	if (api_get_array(c, item, "operations", false, 0, API_UPGRADE_STEP_OPS_MAX, &ops))
		api_each_object(c, ops, "operations", oob_op_parse, st);
	if ((int)i != st->index)
		api_fail_at(c, "index", "must be %zu (steps are kept in index order)", i);
}

static void wave_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	struct api_rack_upgrade_status *s = arg;
	struct api_upgrade_wave *w = &s->waves[i];
	int64_t v = 0;
	int e = 0;
	if (api_get_int(c, item, "index", true, 0, API_UPGRADE_WAVES_MAX - 1, &v))
		w->index = (int)v;
	(void)api_get_tray_set(c, item, "trays", false, 0, &w->trays);
	if (api_get_enum(c, item, "phase", false, step_phase_names, 5, &e))
		w->phase = (enum api_step_phase)e;
	(void)api_get_time(c, item, "startTime", false, &w->start_ms);
	(void)api_get_time(c, item, "completionTime", false, &w->completion_ms);
}

static void approval_ref_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	struct api_rack_upgrade_status *s = arg;
	struct api_upgrade_approval_ref *a = &s->approvals[i];
	int e = 0;
	if (api_get_enum(c, item, "layer", true, api_layer_names, 5, &e))
		a->layer = (enum matrix_layer)e;
	(void)api_get_string(c, item, "name", true, 1, 63, API_S_ANY, a->name, sizeof(a->name));
	(void)api_get_string(c, item, "user", false, 0, 253, API_S_ANY, a->user, sizeof(a->user));
	if (api_get_enum(c, item, "decision", false, decision_names, 2, &e))
		a->rejected = e == 1;
	(void)api_get_time(c, item, "time", false, &a->time_ms);
}

static void rack_ref_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	struct api_upgrade_rack *r = &((struct api_rack_upgrade_status *)arg)->racks[i];
	char phase[21] = "";
	(void)api_get_string(c, item, "name", true, 1, 58, API_S_DNS_LABEL, r->name,
	                     sizeof(r->name));
	(void)api_get_string(c, item, "upgrade", false, 0, 63, API_S_ANY, r->upgrade,
	                     sizeof(r->upgrade));
	if (api_get_string(c, item, "phase", false, 0, 20, API_S_ANY, phase, sizeof(phase)) &&
	    phase[0] != '\0') {
		if (strcmp(phase, RACK_REFUSED) == 0)
			r->refused = true;
		else if (api_upgrade_phase_from_name(phase, &r->phase))
			r->has_phase = true;
		else
			api_fail_at(c, "phase", "unknown phase \"%s\"", phase);
	}
	(void)api_get_time(c, item, "slotTime", false, &r->slot_ms);
	(void)api_get_time(c, item, "time", false, &r->time_ms);
	(void)api_get_string(c, item, "message", false, 0, sizeof(r->message) - 1, API_S_ANY,
	                     r->message, sizeof(r->message));
}

static void condition_parse(struct api_ctx *c, const json_t *item, size_t i, void *arg)
{
	static const char *const st[] = {"Unknown", "True", "False"};
	struct api_condition *cd = &((struct api_condition *)arg)[i];
	int64_t v = 0;
	int e = 0;
	(void)api_get_string(c, item, "type", true, 1, 63, API_S_ANY, cd->type, sizeof(cd->type));
	if (api_get_enum(c, item, "status", true, st, 3, &e))
		cd->status = (enum api_cond_status)e;
	if (api_get_int(c, item, "observedGeneration", false, 0, INT64_MAX, &v))
		cd->observed_generation = v;
	(void)api_get_time(c, item, "lastTransitionTime", false, &cd->last_transition_ms);
	(void)api_get_string(c, item, "reason", false, 0, 63, API_S_ANY, cd->reason,
	                     sizeof(cd->reason));
	(void)api_get_string(c, item, "message", false, 0, sizeof(cd->message) - 1, API_S_ANY,
	                     cd->message, sizeof(cd->message));
}

static void status_lists_parse(struct api_ctx *c, const json_t *st,
                               struct api_rack_upgrade_status *s)
{
	const json_t *arr = NULL;
	if (api_get_array(c, st, "approvals", false, 0, 10, &arr)) {
		s->napprovals = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "approvals", approval_ref_parse, s);
	}
	if (api_get_array(c, st, "waves", false, 0, API_UPGRADE_WAVES_MAX, &arr)) {
		s->nwaves = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "waves", wave_parse, s);
	}
	if (api_get_array(c, st, "steps", false, 0, API_UPGRADE_STEPS_MAX, &arr) &&
	    json_array_size(arr) > 0) {
		s->nsteps = (unsigned)json_array_size(arr);
		s->steps = xcalloc(s->nsteps, sizeof(*s->steps));
		api_each_object(c, arr, "steps", step_parse, s);
	}
	if (api_get_array(c, st, "racks", false, 0, API_UPGRADE_RACKS_MAX, &arr) &&
	    json_array_size(arr) > 0) {
		s->nracks = (unsigned)json_array_size(arr);
		s->racks = xcalloc(s->nracks, sizeof(*s->racks));
		api_each_object(c, arr, "racks", rack_ref_parse, s);
	}
	if (api_get_array(c, st, "conditions", false, 0, API_CONDITIONS_MAX, &arr)) {
		s->nconditions = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "conditions", condition_parse, s->conditions);
	}
}

static void status_parse(struct api_ctx *c, const json_t *st, struct api_rack_upgrade_status *s)
{
	const json_t *o = NULL;
	int64_t v = 0;
	int e = 0;
	if (api_get_int(c, st, "observedGeneration", false, 0, INT64_MAX, &v))
		s->observed_generation = v;
	if (api_get_enum(c, st, "phase", false, phase_names, ARRAY_LEN(phase_names), &e))
		s->phase = (enum api_upgrade_phase)e;
	(void)api_get_time(c, st, "phaseTime", false, &s->phase_ms);
	(void)api_get_string(c, st, "message", false, 0, sizeof(s->message) - 1, API_S_ANY,
	                     s->message, sizeof(s->message));
	(void)api_get_string(c, st, "fromStack", false, 0, 63, API_S_ANY, s->from_stack,
	                     sizeof(s->from_stack));
	if (api_get_object(c, st, "plan", false, &o)) {
		size_t old = api_path_push(c, "plan");
		s->has_plan = true;
		plan_parse(c, o, &s->plan);
		api_path_pop(c, old);
	}
	(void)api_get_time(c, st, "noticeStartTime", false, &s->notice_start_ms);
	(void)api_get_time(c, st, "noticeEndTime", false, &s->notice_end_ms);
	(void)api_get_enum_set(c, st, "requiredApprovals", false, 0, api_layer_names, 5,
	                       &s->required_approvals);
	(void)api_get_time(c, st, "scheduledStart", false, &s->scheduled_start_ms);
	(void)api_get_string(c, st, "window", false, 0, 63, API_S_ANY, s->window,
	                     sizeof(s->window));
	if (api_get_object(c, st, "canary", false, &o)) {
		size_t old = api_path_push(c, "canary");
		(void)api_get_string(c, o, "partition", false, 0, 63, API_S_ANY,
		                     s->canary_partition, sizeof(s->canary_partition));
		(void)api_get_tray_set(c, o, "trays", false, 0, &s->canary_trays);
		api_path_pop(c, old);
	}
	(void)api_get_time(c, st, "startTime", false, &s->start_ms);
	(void)api_get_time(c, st, "completionTime", false, &s->completion_ms);
	if (api_get_int(c, st, "retried", false, 0, INT32_MAX, &v))
		s->retried = v;
	status_lists_parse(c, st, s);
}

enum nv_err api_rack_upgrade_status_parse(const json_t *status, struct api_rack_upgrade_status *out,
                                          struct api_errors *errs)
{
	struct api_ctx c;
	struct api_rack_upgrade_status *s = xcalloc(1, sizeof(*s));
	api_ctx_init(&c, errs);
	if (status != NULL && !json_is_null(status)) {
		size_t old = api_path_push(&c, "status");
		if (!json_is_object(status))
			api_fail(&c, "must be an object");
		else
			status_parse(&c, status, s);
		api_path_pop(&c, old);
	}
	if (api_ctx_failed(&c)) {
		api_rack_upgrade_status_clear(s);
		free(s);
		return NV_E_INVALID_OBJECT;
	}
	*out = *s;
	free(s);
	return NV_OK;
}

void api_rack_upgrade_status_clear(struct api_rack_upgrade_status *s)
{
	if (s == NULL)
		return;
	free(s->steps);
	free(s->racks);
	memset(s, 0, sizeof(*s));
}
