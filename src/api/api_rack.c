// SPDX-License-Identifier: Apache-2.0
// Rack: inventory (18 compute trays, 9 switch trays), the desired stack,
// the responsibility matrix, maintenance windows and freezes, and policy.
// Parsing applies the CRD's defaults so a struct api_rack is always whole.
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/alloc.h"
#include "nvl72/api_rack.h"

static const char *const day_names[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                        "Friday", "Saturday", "Sunday"};
static const char *const drain_names[] = {"Evict", "Checkpoint"};
static const char *const gate_names[] = {"Hold", "RollBack"};

static void compute_tray_item(struct api_ctx *c, const json_t *js, size_t i, void *arg)
{
	struct api_rack *r = arg;
	struct api_rack_compute_tray *t = &r->compute[i];
	int64_t v = 0;
	if (api_get_int(c, js, "index", true, 1, API_COMPUTE_TRAYS, &v))
		t->index = (int)v;
	(void)api_get_string(c, js, "node", true, 1, 63, API_S_DNS_SUBDOMAIN, t->node,
	                     sizeof(t->node));
	(void)api_get_string(c, js, "serial", false, 0, 64, API_S_SERIAL, t->serial,
	                     sizeof(t->serial));
	for (size_t k = 0; k < i; k++) {
		if (t->index != 0 && r->compute[k].index == t->index)
			api_fail_at(c, "index", "duplicate value %d (also spec.computeTrays[%zu])",
			            t->index, k);
		if (t->node[0] != '\0' && strcmp(r->compute[k].node, t->node) == 0)
			api_fail_at(c, "node",
			            "computeTrays[].node must be unique: a Node runs on one tray "
			            "(also spec.computeTrays[%zu])",
			            k);
	}
}

static void switch_tray_item(struct api_ctx *c, const json_t *js, size_t i, void *arg)
{
	struct api_rack *r = arg;
	struct api_rack_switch_tray *t = &r->switches[i];
	int64_t v = 0;
	if (api_get_int(c, js, "index", true, 1, API_SWITCH_TRAYS, &v))
		t->index = (int)v;
	(void)api_get_string(c, js, "oobAddress", true, 1, 253, API_S_HOST, t->oob_address,
	                     sizeof(t->oob_address));
	(void)api_get_string(c, js, "bmcAddress", false, 0, 253, API_S_HOST, t->bmc_address,
	                     sizeof(t->bmc_address));
	(void)api_get_string(c, js, "serial", false, 0, 64, API_S_SERIAL, t->serial,
	                     sizeof(t->serial));
	for (size_t k = 0; k < i; k++) {
		if (t->index != 0 && r->switches[k].index == t->index)
			api_fail_at(c, "index", "duplicate value %d (also spec.switchTrays[%zu])",
			            t->index, k);
		if (t->oob_address[0] != '\0' &&
		    strcmp(r->switches[k].oob_address, t->oob_address) == 0)
			api_fail_at(c, "oobAddress",
			            "switchTrays[].oobAddress must be unique (also "
			            "spec.switchTrays[%zu])",
			            k);
	}
}

static void resp_item(struct api_ctx *c, const json_t *js, size_t i, void *arg)
{
	struct api_rack *r = arg;
	struct api_responsibility *x = &r->resp[i];
	int layer = 0;
	x->approval_required = true;
	if (api_get_enum(c, js, "layer", true, api_layer_names, 5, &layer)) {
		x->layer = (enum matrix_layer)layer;
		for (size_t k = 0; k < i; k++)
			if (r->resp[k].layer == x->layer)
				api_fail_at(c, "layer", "duplicate value \"%s\"",
				            api_layer_names[layer]);
	}
	(void)api_get_string(c, js, "owner", true, 1, 128, API_S_ANY, x->owner, sizeof(x->owner));
	(void)api_get_string(c, js, "windowOwner", false, 0, 253, API_S_ANY, x->window_owner,
	                     sizeof(x->window_owner));
	(void)api_get_string(c, js, "contact", false, 0, 256, API_S_ANY, x->contact,
	                     sizeof(x->contact));
	(void)api_get_duration(c, js, "noticePeriod", &x->notice_ms);
	(void)api_get_bool(c, js, "approvalRequired", &x->approval_required);
}

static int hhmm_minutes(const char *s)
{
	return ((s[0] - '0') * 10 + (s[1] - '0')) * 60 + (s[3] - '0') * 10 + (s[4] - '0');
}

static void window_item(struct api_ctx *c, const json_t *js, size_t i, void *arg)
{
	struct api_rack *r = arg;
	struct api_window *w = &r->windows[i];
	char start[8] = "";
	char end[8] = "";
	uint32_t days = 0;
	if (api_get_string(c, js, "name", true, 1, 63, API_S_DNS_LABEL, w->name, sizeof(w->name)))
		for (size_t k = 0; k < i; k++)
			if (strcmp(r->windows[k].name, w->name) == 0)
				api_fail_at(c, "name", "duplicate value \"%s\"", w->name);
	if (api_get_enum_set(c, js, "days", true, 1, day_names, 7, &days))
		w->days = (uint8_t)days;
	bool hs = api_get_string(c, js, "start", true, 5, 5, API_S_HHMM, start, sizeof(start));
	bool he = api_get_string(c, js, "end", true, 5, 5, API_S_HHMM, end, sizeof(end));
	(void)api_get_enum_set(c, js, "layers", false, 0, api_layer_names, 5, &w->layers);
	if (hs && he) {
		w->start_min = hhmm_minutes(start);
		w->end_min = hhmm_minutes(end);
		if (w->start_min == w->end_min)
			api_fail_at(c, "end", "window end must differ from start");
	}
}

static void freeze_item(struct api_ctx *c, const json_t *js, size_t i, void *arg)
{
	struct api_rack *r = arg;
	struct api_freeze *f = &r->freezes[i];
	if (api_get_string(c, js, "name", true, 1, 63, API_S_DNS_LABEL, f->name, sizeof(f->name)))
		for (size_t k = 0; k < i; k++)
			if (strcmp(r->freezes[k].name, f->name) == 0)
				api_fail_at(c, "name", "duplicate value \"%s\"", f->name);
	bool hs = api_get_time(c, js, "start", true, &f->start_ms);
	bool he = api_get_time(c, js, "end", true, &f->end_ms);
	(void)api_get_string(c, js, "reason", false, 0, 512, API_S_ANY, f->reason,
	                     sizeof(f->reason));
	if (hs && he && f->end_ms <= f->start_ms)
		api_fail_at(c, "end", "freeze end must be after start");
}

static void policy_parse(struct api_ctx *c, const json_t *spec, struct api_rack_policy *p)
{
	const json_t *js = NULL;
	const json_t *d = NULL;
	int64_t v = 0;
	int e = 0;
	*p = (struct api_rack_policy){
	        2, 16, 2, true, API_DRAIN_EVICT, 30 * 60000, 60 * 60000, API_ON_GATE_HOLD};
	if (!api_get_object(c, spec, "policy", false, &js))
		return;
	size_t old = api_path_push(c, "policy");
	if (api_get_int(c, js, "maxUnavailableTrays", false, 0, 18, &v))
		p->max_unavailable_trays = (int)v;
	if (api_get_int(c, js, "minHealthyTrays", false, 0, 18, &v))
		p->min_healthy_trays = (int)v;
	if (api_get_int(c, js, "degradedThreshold", false, 0, 18, &v))
		p->degraded_threshold = (int)v;
	(void)api_get_bool(c, js, "cordonWhenDegraded", &p->cordon_when_degraded);
	if (api_get_enum(c, js, "onGateFailure", false, gate_names, 2, &e))
		p->on_gate_failure = (enum api_gate_failure)e;
	if (api_get_object(c, js, "drain", false, &d)) {
		size_t o2 = api_path_push(c, "drain");
		if (api_get_enum(c, d, "mode", false, drain_names, 2, &e))
			p->drain_mode = (enum api_drain_mode)e;
		(void)api_get_duration(c, d, "checkpointDeadline", &p->checkpoint_deadline_ms);
		(void)api_get_duration(c, d, "evictionDeadline", &p->eviction_deadline_ms);
		api_path_pop(c, o2);
	}
	if (p->min_healthy_trays + p->max_unavailable_trays > API_COMPUTE_TRAYS)
		api_fail_at(c, "minHealthyTrays",
		            "minHealthyTrays + maxUnavailableTrays must not exceed 18, the number "
		            "of compute trays");
	if (p->max_unavailable_trays > p->degraded_threshold)
		api_fail_at(c, "maxUnavailableTrays",
		            "maxUnavailableTrays must not exceed degradedThreshold, or one upgrade "
		            "wave would degrade the rack");
	api_path_pop(c, old);
}

static void inventory_parse(struct api_ctx *c, const json_t *spec, struct api_rack *r)
{
	const json_t *arr = NULL;
	if (api_get_array(c, spec, "computeTrays", true, API_COMPUTE_TRAYS, API_COMPUTE_TRAYS,
	                  &arr)) {
		r->ncompute = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "computeTrays", compute_tray_item, r);
	}
	if (api_get_array(c, spec, "switchTrays", true, API_SWITCH_TRAYS, API_SWITCH_TRAYS, &arr)) {
		r->nswitch = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "switchTrays", switch_tray_item, r);
	}
	const json_t *o = NULL;
	if (api_get_object(c, spec, "location", false, &o)) {
		size_t old = api_path_push(c, "location");
		(void)api_get_string(c, o, "site", false, 0, 63, API_S_ANY, r->site,
		                     sizeof(r->site));
		(void)api_get_string(c, o, "room", false, 0, 63, API_S_ANY, r->room,
		                     sizeof(r->room));
		(void)api_get_string(c, o, "row", false, 0, 63, API_S_ANY, r->row, sizeof(r->row));
		(void)api_get_string(c, o, "position", false, 0, 63, API_S_ANY, r->position,
		                     sizeof(r->position));
		api_path_pop(c, old);
	}
	if (api_get_object(c, spec, "matrix", true, &o)) {
		size_t old = api_path_push(c, "matrix");
		(void)api_get_string(c, o, "name", true, 1, 63, API_S_DNS_SUBDOMAIN, r->matrix_name,
		                     sizeof(r->matrix_name));
		(void)api_get_string(c, o, "stack", true, 1, 63, API_S_STACK, r->matrix_stack,
		                     sizeof(r->matrix_stack));
		api_path_pop(c, old);
	}
}

static void maintenance_parse(struct api_ctx *c, const json_t *spec, struct api_rack *r)
{
	const json_t *arr = NULL;
	const json_t *o = NULL;
	if (api_get_array(c, spec, "responsibilities", false, 0, MATRIX_L__COUNT, &arr)) {
		r->nresp = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "responsibilities", resp_item, r);
	}
	if (!api_get_object(c, spec, "maintenance", false, &o))
		return;
	size_t old = api_path_push(c, "maintenance");
	if (api_get_array(c, o, "windows", false, 0, API_WINDOWS_MAX, &arr)) {
		r->nwindows = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "windows", window_item, r);
	}
	if (api_get_array(c, o, "freezes", false, 0, API_FREEZES_MAX, &arr)) {
		r->nfreezes = (unsigned)json_array_size(arr);
		api_each_object(c, arr, "freezes", freeze_item, r);
	}
	api_path_pop(c, old);
}

enum nv_err api_rack_parse(const json_t *obj, struct api_rack **out, struct api_errors *errs)
{
	struct api_ctx c;
	struct api_rack *r = xcalloc(1, sizeof(*r));
	int platform = 0;
	bool meta_ok;
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "Rack", false, &r->meta, &meta_ok);
	if (meta_ok &&
	    (strlen(r->meta.name) > 58 || !api_str_matches(API_S_DNS_LABEL, r->meta.name)))
		api_fail_at(&c, "metadata.name",
		            "metadata.name must be a DNS label of at most 58 characters: it is "
		            "used in label values and tray names");
	if (!spec)
		goto out;
	size_t old = api_path_push(&c, "spec");
	if (api_get_enum(&c, spec, "platform", true, api_platform_names, 3, &platform))
		r->platform = (enum matrix_platform)platform;
	(void)api_get_string(&c, spec, "chassisSerial", false, 0, 32, API_S_SERIAL,
	                     r->chassis_serial, sizeof(r->chassis_serial));
	inventory_parse(&c, spec, r);
	maintenance_parse(&c, spec, r);
	policy_parse(&c, spec, &r->policy);
	api_path_pop(&c, old);
out:
	if (api_ctx_failed(&c)) {
		free(r);
		return NV_E_INVALID_OBJECT;
	}
	*out = r;
	return NV_OK;
}

void api_rack_free(struct api_rack *r)
{
	free(r);
}

const struct api_rack_compute_tray *api_rack_tray_by_node(const struct api_rack *r,
                                                          const char *node)
{
	for (unsigned i = 0; node != NULL && i < r->ncompute; i++)
		if (strcmp(r->compute[i].node, node) == 0)
			return &r->compute[i];
	return NULL;
}
