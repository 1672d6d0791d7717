// SPDX-License-Identifier: Apache-2.0
// ComputeTray: the spec the operator writes for one compute tray (driver,
// IMEX configuration, maintenance state, validation runs) as the agent reads
// it, and the validation record the agent writes back. The agent acts on
// nothing that does not pass these checks.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_int.h"
#include "nvl72/alloc.h"
#include "nvl72/api_rack.h"

static const char *const flavour_names[] = {"open", "proprietary"};
static const char *const activation_names[] = {"Reload", "Reboot"};
static const char *const imex_mode_names[] = {"process", "host"};
static const char *const maint_names[] = {"None", "Cordoned", "Draining", "Drained", "Upgrading"};

const char *api_maint_state_name(enum api_maint_state s)
{
	if ((unsigned)s >= sizeof(maint_names) / sizeof(maint_names[0]))
		return "None";
	return maint_names[s];
}

// ^NVreg_[A-Za-z0-9_]{1,64}$
static bool nvreg_key(const char *k)
{
	size_t n = strlen(k);
	if (strncmp(k, "NVreg_", 6) != 0 || n < 7 || n > 70)
		return false;
	for (size_t i = 6; i < n; i++)
		if (!((k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= 'a' && k[i] <= 'z') ||
		      (k[i] >= '0' && k[i] <= '9') || k[i] == '_'))
			return false;
	return true;
}

static void params_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	const char *key = NULL;
	const json_t *v = NULL;
	if (json_object_size(js) > API_DRIVER_PARAMS_MAX) {
		api_fail(c, "must have at most %d parameters", API_DRIVER_PARAMS_MAX);
		return;
	}
	json_object_foreach((json_t *)js, key, v) {
		size_t old = api_path_push(c, key);
		if (!nvreg_key(key)) {
			api_fail(c, "driver.parameters keys must be NVreg_ module parameters");
		} else {
			struct api_driver_param *p = &t->params[t->nparams];
			if (api_check_string(c, v, 0, 128, API_S_PARAM_VALUE, p->value,
			                     sizeof(p->value))) {
				memcpy(p->key, key, strlen(key) + 1);
				t->nparams++;
			}
		}
		api_path_pop(c, old);
	}
}

static void driver_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	char version[17];
	int e = 0;
	const json_t *params = NULL;
	if (api_get_string(c, js, "version", true, 5, 16, API_S_DRIVER, version, sizeof(version))) {
		if (matrix_driver_parse(version, &t->driver) == NV_OK)
			t->has_driver = true;
		else
			api_fail_at(c, "version", "must be a driver version such as 580.173.02");
	}
	if (api_get_enum(c, js, "flavour", false, flavour_names, 2, &e))
		t->flavour = (enum api_flavour)e;
	if (api_get_enum(c, js, "activation", false, activation_names, 2, &e))
		t->activation = (enum api_activation)e;
	if (api_get_object(c, js, "parameters", false, &params)) {
		size_t old = api_path_push(c, "parameters");
		params_parse(c, params, t);
		api_path_pop(c, old);
	}
}

static void peers_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	const json_t *arr = NULL;
	if (!api_get_array(c, js, "peers", true, 1, API_COMPUTE_TRAYS, &arr))
		return;
	size_t old = api_path_push(c, "peers");
	for (size_t i = 0; i < json_array_size(arr); i++) {
		size_t o2 = api_path_push_index(c, i);
		char *p = t->peers[t->npeers];
		if (api_check_string(c, json_array_get(arr, i), 1, 253, API_S_HOST, p,
		                     sizeof(t->peers[0]))) {
			bool dup = false;
			for (unsigned k = 0; k < t->npeers && !dup; k++)
				dup = strcmp(t->peers[k], p) == 0;
			if (dup)
				api_fail(c, "imex.peers must not repeat an address");
			else
				t->npeers++;
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void channels_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	const json_t *ch = NULL;
	const json_t *ids = NULL;
	int64_t v = 0;
	if (!api_get_object(c, js, "channels", false, &ch))
		return;
	int e = 0;
	size_t old = api_path_push(c, "channels");
	if (api_get_enum(c, ch, "allocationMode", false, api_alloc_mode_names, 2, &e))
		t->channel_alloc = (enum api_alloc_mode)e;
	if (api_get_int(c, ch, "count", false, 1, 1048576, &v))
		t->channel_count = (int)v;
	if (api_get_array(c, ch, "ids", false, 0, API_IMEX_CHANNEL_IDS_MAX, &ids)) {
		size_t o2 = api_path_push(c, "ids");
		for (size_t i = 0; i < json_array_size(ids); i++) {
			size_t o3 = api_path_push_index(c, i);
			if (api_check_int(c, json_array_get(ids, i), 0, 1048575, &v)) {
				if (v >= t->channel_count)
					api_fail(c, "imex.channels.ids must be below "
					            "imex.channels.count");
				for (unsigned k = 0; k < t->nchannel_ids; k++)
					if (t->channel_ids[k] == v)
						api_fail(c, "duplicate value %lld", (long long)v);
				t->channel_ids[t->nchannel_ids++] = (int)v;
			}
			api_path_pop(c, o3);
		}
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void imex_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	int e = 0;
	int64_t v = 0;
	t->has_imex = true;
	if (api_get_enum(c, js, "mode", false, imex_mode_names, 2, &e))
		t->imex_mode = (enum api_imex_mode)e;
	(void)api_get_string(c, js, "domain", true, 1, 253, API_S_ANY, t->imex_domain,
	                     sizeof(t->imex_domain));
	(void)api_get_string(c, js, "domainUID", false, 1, 36, API_S_SERIAL, t->imex_domain_uid,
	                     sizeof(t->imex_domain_uid));
	peers_parse(c, js, t);
	if (api_get_int(c, js, "port", false, 1024, 65535, &v))
		t->imex_port = (int)v;
	if (api_get_int(c, js, "commandPort", false, 1024, 65535, &v))
		t->imex_command_port = (int)v;
	if (t->imex_port == t->imex_command_port)
		api_fail_at(c, "commandPort", "imex.commandPort must differ from imex.port");
	channels_parse(c, js, t);
}

static void maintenance_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	int e = 0;
	int64_t v = 0;
	const json_t *up = NULL;
	if (api_get_enum(c, js, "state", false, maint_names, 5, &e))
		t->maint = (enum api_maint_state)e;
	(void)api_get_string(c, js, "reason", false, 0, 512, API_S_ANY, t->maint_reason,
	                     sizeof(t->maint_reason));
	(void)api_get_string(c, js, "requestor", false, 0, 253, API_S_ANY, t->maint_requestor,
	                     sizeof(t->maint_requestor));
	if (api_get_object(c, js, "upgrade", false, &up)) {
		size_t old = api_path_push(c, "upgrade");
		(void)api_get_string(c, up, "name", true, 1, 63, API_S_ANY, t->maint_upgrade,
		                     sizeof(t->maint_upgrade));
		if (api_get_int(c, up, "step", false, 0, 255, &v)) {
			t->has_maint_step = true;
			t->maint_step = (int)v;
		}
		(void)api_get_enum_set(c, up, "components", true, 1, api_component_names,
		                       MATRIX_C__COUNT, &t->maint_components);
		api_path_pop(c, old);
	} else if (t->maint == API_MAINT_UPGRADING) {
		api_fail_at(c, "upgrade", "is required when maintenance.state is Upgrading");
	}
}

static void validation_parse(struct api_ctx *c, const json_t *js, struct api_compute_tray *t)
{
	const json_t *args = NULL;
	int64_t v = 0;
	t->has_validation = true;
	(void)api_get_string(c, js, "id", true, 1, 63, API_S_TENANT, t->validation_id,
	                     sizeof(t->validation_id));
	if (api_get_int(c, js, "timeoutSeconds", false, 10, 86400, &v))
		t->validation_timeout_s = (int)v;
	if (!api_get_array(c, js, "args", false, 0, API_VALIDATION_ARGS_MAX, &args))
		return;
	size_t old = api_path_push(c, "args");
	for (size_t i = 0; i < json_array_size(args); i++) {
		size_t o2 = api_path_push_index(c, i);
		if (api_check_string(c, json_array_get(args, i), 0, 255, API_S_ANY,
		                     t->validation_args[t->nvalidation_args],
		                     sizeof(t->validation_args[0])))
			t->nvalidation_args++;
		api_path_pop(c, o2);
	}
	api_path_pop(c, old);
}

static void spec_parse(struct api_ctx *c, const json_t *spec, struct api_compute_tray *t)
{
	const json_t *o = NULL;
	int64_t v = 0;
	(void)api_get_string(c, spec, "rack", true, 1, 58, API_S_DNS_LABEL, t->rack,
	                     sizeof(t->rack));
	if (api_get_int(c, spec, "index", true, 1, API_COMPUTE_TRAYS, &v))
		t->index = (int)v;
	(void)api_get_string(c, spec, "node", true, 1, 253, API_S_DNS_SUBDOMAIN, t->node,
	                     sizeof(t->node));
	if (api_get_object(c, spec, "driver", false, &o)) {
		size_t old = api_path_push(c, "driver");
		driver_parse(c, o, t);
		api_path_pop(c, old);
	}
	if (api_get_object(c, spec, "imex", false, &o)) {
		size_t old = api_path_push(c, "imex");
		imex_parse(c, o, t);
		api_path_pop(c, old);
	}
	if (api_get_object(c, spec, "maintenance", false, &o)) {
		size_t old = api_path_push(c, "maintenance");
		maintenance_parse(c, o, t);
		api_path_pop(c, old);
	}
	if (api_get_object(c, spec, "validation", false, &o)) {
		size_t old = api_path_push(c, "validation");
		validation_parse(c, o, t);
		api_path_pop(c, old);
	}
}

enum nv_err api_compute_tray_parse(const json_t *obj, struct api_compute_tray **out,
                                   struct api_errors *errs)
{
	struct api_ctx c;
	struct api_compute_tray *t = xcalloc(1, sizeof(*t));
	bool meta_ok;
	t->imex_port = 50000;
	t->imex_command_port = 50005;
	t->channel_count = 2048;
	t->validation_timeout_s = API_VALIDATION_TIMEOUT_DEFAULT_S;
	api_ctx_init(&c, errs);
	const json_t *spec = api_envelope(&c, obj, "ComputeTray", false, &t->meta, &meta_ok);
	if (!spec)
		goto out;
	size_t old = api_path_push(&c, "spec");
	spec_parse(&c, spec, t);
	api_path_pop(&c, old);
	char want[80];
	snprintf(want, sizeof(want), "%s-t%02d", t->rack, t->index);
	if (meta_ok && t->rack[0] != '\0' && t->index > 0 && strcmp(want, t->meta.name) != 0)
		api_fail_at(
		        &c, "metadata.name",
		        "metadata.name must be <spec.rack>-t<two-digit spec.index>, for example %s",
		        want);
out:
	if (api_ctx_failed(&c)) {
		free(t);
		return NV_E_INVALID_OBJECT;
	}
	*out = t;
	return NV_OK;
}

void api_compute_tray_free(struct api_compute_tray *t)
{
	free(t);
}

static const char *const validation_phases[] = {"None", "Running", "Succeeded", "Failed"};

const char *api_validation_phase_name(enum api_validation_phase p)
{
	if ((unsigned)p >= sizeof(validation_phases) / sizeof(validation_phases[0]))
		return "None";
	return validation_phases[p];
}

enum nv_err api_tray_validation_parse(const json_t *tray, struct api_tray_validation *out,
                                      struct api_errors *errs)
{
	struct api_tray_validation v;
	struct api_ctx c;
	const json_t *status = json_object_get(tray, "status");
	const json_t *js = NULL, *bw = NULL;
	int e = 0;

	memset(&v, 0, sizeof(v));
	api_ctx_init(&c, errs);
	if (!json_is_object(status) || json_object_get(status, "validation") == NULL) {
		*out = v;
		return NV_OK;
	}
	size_t old = api_path_push(&c, "status");
	if (api_get_object(&c, status, "validation", true, &js)) {
		size_t o2 = api_path_push(&c, "validation");
		(void)api_get_string(&c, js, "id", true, 1, 63, API_S_ANY, v.id, sizeof(v.id));
		if (api_get_enum(&c, js, "phase", true, validation_phases + 1, 3, &e))
			v.phase = (enum api_validation_phase)(e + 1);
		bw = json_object_get(js, "busBandwidthGbps");
		if (bw != NULL) {
			if (!json_is_number(bw) || json_number_value(bw) < 0 ||
			    json_number_value(bw) > 100000)
				api_fail_at(&c, "busBandwidthGbps",
				            "must be a number from 0 to 100000");
			else {
				v.has_busbw = true;
				v.busbw_gbps = json_number_value(bw);
			}
		}
		(void)api_get_string(&c, js, "transport", false, 0, 31, API_S_ANY, v.transport,
		                     sizeof(v.transport));
		(void)api_get_time(&c, js, "startTime", false, &v.start_ms);
		(void)api_get_time(&c, js, "completionTime", false, &v.completion_ms);
		(void)api_get_string(&c, js, "message", false, 0, 1024, API_S_ANY, v.message,
		                     sizeof(v.message));
		api_path_pop(&c, o2);
	}
	api_path_pop(&c, old);
	if (api_ctx_failed(&c))
		return NV_E_INVALID_OBJECT;
	*out = v;
	return NV_OK;
}
