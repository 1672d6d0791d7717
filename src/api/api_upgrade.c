// SPDX-License-Identifier: Apache-2.0
// RackUpgrade and UpgradeApproval: parsing with the CRDs' rules, the status
// record of an upgrade (plan, waves, steps with gate evidence, approvals),
// and the admission checks of an upgrade against its matrix.
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/alloc.h"
#include "nvl72/api_upgrade.h"

static const char *const class_names[] = {"routine", "security"};
static const char *const decision_names[] = {"Approved", "Rejected"};
static const char *const phase_names[] = {
	"Proposed", "Notice",    "AwaitingApproval", "Scheduled",
	"Canary",   "Validating", "RollingOut",      "Completed",
	"Halted",   "Paused",    "Aborted",
};
static const char *const step_phase_names[] = {"Pending", "Running",
					       "Succeeded", "Failed", "Skipped"};
static const char *const action_names[] = {
	"Cordon",   "Drain",   "Apply",    "WaitFabric", "WaitIMEX",
	"Validate", "Soak",    "Uncordon", "RollBack",
};

const char *api_upgrade_phase_name(enum api_upgrade_phase p)
{
	if ((unsigned)p >= sizeof(phase_names) / sizeof(phase_names[0]))
		return "Proposed";
	return phase_names[p];
}

static void selector_parse(struct api_ctx *c, const json_t *sel,
			   struct api_rack_upgrade *u)
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
		else if (api_check_string(c, v, 0, 63, API_S_ANY, l->value,
					  sizeof(l->value))) {
			memcpy(l->key, key, strlen(key) + 1);
			u->nselector++;
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void cves_parse(struct api_ctx *c, const json_t *spec,
		       struct api_rack_upgrade *u)
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

static void target_parse(struct api_ctx *c, const json_t *spec,
			 struct api_rack_upgrade *u)
{
	const json_t *o = NULL;
	if (api_get_object(c, spec, "target", true, &o)) {
		size_t old = api_path_push(c, "target");
		(void)api_get_string(c, o, "matrix", true, 1, 63, API_S_DNS_SUBDOMAIN,
				     u->target_matrix, sizeof(u->target_matrix));
		(void)api_get_string(c, o, "stack", true, 1, 63, API_S_STACK,
				     u->target_stack, sizeof(u->target_stack));
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

static void upgrade_spec_parse(struct api_ctx *c, const json_t *spec,
			       struct api_rack_upgrade *u)
{
	const json_t *sel = NULL;
	int64_t v = 0;
	int e = 0;
	(void)api_get_string(c, spec, "rack", false, 1, 58, API_S_DNS_LABEL,
			     u->rack, sizeof(u->rack));
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
	target_parse(c, spec, u);
	if (api_get_enum(c, spec, "class", false, class_names, 2, &e))
		u->cls = (enum api_upgrade_class)e;
	(void)api_get_string(c, spec, "reason", false, 0, 2048, API_S_ANY,
			     u->reason, sizeof(u->reason));
	cves_parse(c, spec, u);
	(void)api_get_time(c, spec, "earliestStart", false, &u->earliest_start_ms);
	if (api_get_int(c, spec, "waveSize", false, 1, API_COMPUTE_TRAYS, &v))
		u->wave_size = (int)v;
	(void)api_get_bool(c, spec, "paused", &u->paused);
	(void)api_get_bool(c, spec, "abort", &u->abort);
	(void)api_get_bool(c, spec, "force", &u->force);
	if (u->cls == API_UPGRADE_SECURITY && u->reason[0] == '\0')
		api_fail_at(c, "reason", "a security upgrade must carry a reason");
	if (u->cls == API_UPGRADE_SECURITY && json_array_size(json_object_get(spec, "cves")) == 0)
		api_fail_at(c, "cves", "a security upgrade must carry at least one CVE id");
	if (u->force && u->cls != API_UPGRADE_SECURITY)
		api_fail_at(c, "force", "force is allowed only for the security class");
}

enum nv_err api_rack_upgrade_parse(const json_t *obj,
				   struct api_rack_upgrade **out,
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

void api_rack_upgrade_free(struct api_rack_upgrade *u)
{
	free(u);
}

static void approval_spec_parse(struct api_ctx *c, const json_t *spec,
				struct api_upgrade_approval *a)
{
	int e = 0;
	const json_t *by = NULL;
	(void)api_get_string(c, spec, "upgrade", true, 1, 63, API_S_DNS_SUBDOMAIN,
			     a->upgrade, sizeof(a->upgrade));
	if (api_get_enum(c, spec, "layer", true, api_layer_names, 5, &e))
		a->layer = (enum matrix_layer)e;
	if (api_get_enum(c, spec, "decision", false, decision_names, 2, &e))
		a->rejected = e == 1;
	(void)api_get_string(c, spec, "comment", false, 0, 2048, API_S_ANY,
			     a->comment, sizeof(a->comment));
	(void)api_get_time(c, spec, "notBefore", false, &a->not_before_ms);
	if (api_get_object(c, spec, "approvedBy", false, &by)) {
		const json_t *groups = NULL;
		size_t old = api_path_push(c, "approvedBy");
		(void)api_get_string(c, by, "username", false, 0, 253, API_S_ANY,
				     a->approved_by, sizeof(a->approved_by));
		(void)api_get_string(c, by, "uid", false, 0, 128, API_S_ANY,
				     a->approved_by_uid, sizeof(a->approved_by_uid));
		if (api_get_array(c, by, "groups", false, 0, 64, &groups)) {
			size_t o2 = api_path_push(c, "groups");
			for (size_t i = 0; i < json_array_size(groups); i++) {
				char g[254];
				size_t o3 = api_path_push_index(c, i);
				(void)api_check_string(c, json_array_get(groups, i), 0,
						       253, API_S_ANY, g, sizeof(g));
				api_path_pop(c, o3);
			}
			api_path_pop(c, o2);
		}
		api_path_pop(c, old);
	}
	if (a->rejected && a->comment[0] == '\0')
		api_fail_at(c, "comment", "a rejection must carry a comment");
}

enum nv_err api_upgrade_approval_parse(const json_t *obj,
				       struct api_upgrade_approval **out,
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
		json_object_set_new(x, "requiresFabricRestart",
				    json_boolean(s->fabric_restart));
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
	json_object_set_new(o, "action",
			    json_string(action_names[(unsigned)s->action % 9]));
	if (s->components != 0)
		json_object_set_new(o, "components", api_components_to_json(s->components));
	json_object_set_new(o, "trays", api_tray_set_to_json(s->trays));
	json_object_set_new(o, "phase",
			    json_string(step_phase_names[(unsigned)s->phase % 5]));
	api_json_set_time(o, "startTime", s->start_ms);
	api_json_set_time(o, "completionTime", s->completion_ms);
	api_json_set_str(o, "message", s->message);
	if (s->evidence.set)
		json_object_set_new(o, "evidence", evidence_to_json(&s->evidence));
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
		json_object_set_new(o, "layer",
				    json_string(matrix_layer_name(a->layer)));
		json_object_set_new(o, "name", json_string(a->name));
		api_json_set_str(o, "user", a->user);
		json_object_set_new(o, "decision",
				    json_string(decision_names[a->rejected ? 1 : 0]));
		api_json_set_time(o, "time", a->time_ms);
		json_array_append_new(arr, o);
	}
	return arr;
}

json_t *api_rack_upgrade_status_to_json(const struct api_rack_upgrade_status *s)
{
	json_t *o = json_object();
	json_t *steps = json_array();
	if (s->observed_generation > 0)
		json_object_set_new(o, "observedGeneration",
				    json_integer(s->observed_generation));
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
	json_object_set_new(o, "conditions",
			    api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}

json_t *api_upgrade_approval_status_to_json(
	const struct api_upgrade_approval_status *s)
{
	json_t *o = json_object();
	if (s->observed_generation > 0)
		json_object_set_new(o, "observedGeneration",
				    json_integer(s->observed_generation));
	json_object_set_new(o, "counted", json_boolean(s->counted));
	api_json_set_str(o, "message", s->message);
	json_object_set_new(o, "conditions",
			    api_conditions_to_json(s->conditions, s->nconditions));
	return o;
}
