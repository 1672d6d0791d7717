// SPDX-License-Identifier: Apache-2.0
// The tray's spec as the agent acts on it, and the status it reports: one
// host observation plus what this pass did, turned into the CRD's shape with
// conditions. Pure functions of their inputs, so a status that has not
// changed is built byte for byte the same and is never written again.
#include "nvl72/agent.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvl72/api_rack.h"
#include "nvl72/base.h"
#include "nvl72/json.h"
#include "nvl72/kube_ctrl.h"

#ifndef NVL72_VERSION
#define NVL72_VERSION "0.0.0"
#endif

/* ---- spec ---- */

/* The parts of spec the agent acts on one by one: a part that fails its
 * checks is dropped and the rest is still acted on. */
static const char *const spec_parts[] = {"driver", "imex", "maintenance", "validation"};

/* The part of spec an error path is in, or -1. */
static int spec_part_of(const char *path)
{
	size_t n;

	if (!str_has_prefix(path, "spec."))
		return -1;
	path += 5;
	for (size_t i = 0; i < ARRAY_LEN(spec_parts); i++) {
		n = strlen(spec_parts[i]);
		if (strncmp(path, spec_parts[i], n) == 0 &&
		    (path[n] == '\0' || path[n] == '.' || path[n] == '['))
			return (int)i;
	}
	return -1;
}

/* The parts every error is in (bit i: spec_parts[i]); false when an error
 * is outside them, so that no part can be dropped to keep the rest. */
static bool spec_failed_parts(const struct api_errors *e, unsigned *parts)
{
	*parts = 0;
	if (e->dropped > 0)
		return false;
	for (unsigned i = 0; i < e->n; i++) {
		int part = spec_part_of(e->list[i].path);
		if (part < 0)
			return false;
		*parts |= 1u << part;
	}
	return true;
}

/* A shallow copy of tray whose spec lacks the given parts (new reference). */
static json_t *tray_without(const json_t *tray, unsigned parts)
{
	json_t *t = json_copy((json_t *)tray);
	json_t *spec = json_copy(json_object_get(tray, "spec"));

	for (size_t i = 0; i < ARRAY_LEN(spec_parts); i++)
		if (parts & (1u << i))
			json_object_del(spec, spec_parts[i]);
	json_object_set_new(t, "spec", spec);
	return t;
}

static void imex_from_api(const struct api_compute_tray *t, const char *node_ip,
                          struct agent_spec *s)
{
	struct host_imex_cfg *c = &s->imex;

	c->mode = t->imex_mode == API_IMEX_HOST ? HOST_IMEX_HOST : HOST_IMEX_PROCESS;
	(void)str_copy(c->domain, sizeof(c->domain), t->imex_domain);
	(void)str_copy(s->imex_domain_uid, sizeof(s->imex_domain_uid), t->imex_domain_uid);
	for (unsigned i = 0; i < t->npeers; i++)
		(void)str_copy(c->peers[c->n_peers++], HOST_HOSTNAME_LEN, t->peers[i]);
	(void)str_copy(c->bind_ip, sizeof(c->bind_ip), node_ip ? node_ip : "");
	c->server_port = (unsigned)t->imex_port;
	c->cmd_port = (unsigned)t->imex_command_port;
	c->channels = (unsigned)t->channel_count;
	c->grace_s = -1;
	s->channel_count = (unsigned)t->channel_count;
	s->channels_all = t->channel_alloc == API_ALLOC_ALL;
	for (unsigned i = 0; i < t->nchannel_ids; i++)
		s->channel_ids[s->n_channel_ids++] = (unsigned)t->channel_ids[i];
	s->has_imex = true;
}

static void validation_from_api(const struct api_compute_tray *t, struct agent_spec *s)
{
	struct host_val_request *r = &s->validation;

	(void)str_copy(r->id, sizeof(r->id), t->validation_id);
	r->timeout_ms = (int64_t)t->validation_timeout_s * 1000;
	for (unsigned i = 0; i < t->nvalidation_args; i++)
		(void)str_copy(r->args[r->n_args++], HOST_VALIDATION_ARG_LEN,
		               t->validation_args[i]);
	s->has_validation = true;
}

static void spec_from_api(const struct api_compute_tray *t, const char *node_ip,
                          struct agent_spec *s)
{
	s->generation = t->meta.generation;
	(void)str_copy(s->name, sizeof(s->name), t->meta.name);
	(void)str_copy(s->uid, sizeof(s->uid), t->meta.uid);
	(void)str_copy(s->node, sizeof(s->node), t->node);
	(void)str_copy(s->rack, sizeof(s->rack), t->rack);
	(void)str_copy(s->maint_state, sizeof(s->maint_state), api_maint_state_name(t->maint));
	s->has_upgrade_step = t->has_maint_step;
	s->upgrade_step = t->maint_step;
	if (t->has_driver) {
		s->has_driver = true;
		(void)str_copy(s->driver_version, sizeof(s->driver_version),
		               t->driver.version.text);
		s->activation = t->activation == API_ACTIVATE_REBOOT ? AGENT_ACTIVATE_REBOOT
		                                                     : AGENT_ACTIVATE_RELOAD;
	}
	if (t->has_imex)
		imex_from_api(t, node_ip, s);
	if (t->has_validation)
		validation_from_api(t, s);
}

enum nv_err agent_spec_parse(const json_t *tray, const char *node_ip, struct agent_spec *out,
                             char *err, size_t errsz)
{
	struct api_errors *errs = xcalloc(1, sizeof(*errs));
	struct api_compute_tray *t = NULL;
	struct buf text;
	json_t *rest;
	unsigned parts;
	enum nv_err rc;

	memset(out, 0, sizeof(*out));
	(void)str_copy(out->maint_state, sizeof(out->maint_state), "None");
	err[0] = '\0';
	api_errors_init(errs);
	rc = api_compute_tray_parse(tray, &t, errs);
	if (rc != NV_OK) {
		buf_init(&text, (API_PATH_LEN + API_MSG_LEN + 2) * (API_ERRORS_MAX + 1));
		(void)api_errors_format(errs, &text);
		(void)str_copy(err, errsz, buf_str(&text));
		buf_clear(&text);
		if (spec_failed_parts(errs, &parts)) {
			rest = tray_without(tray, parts);
			api_errors_init(errs);
			if (api_compute_tray_parse(rest, &t, errs) != NV_OK)
				t = NULL;
			json_decref(rest);
		}
	}
	if (t != NULL)
		spec_from_api(t, node_ip, out);
	else /* nothing to act on; the status still names the generation */
		out->generation = json_integer_value(jx_path(tray, "metadata.generation"));
	api_compute_tray_free(t);
	free(errs);
	return rc;
}

/* ---- status parts ---- */

static void set_str(json_t *o, const char *key, const char *v)
{
	if (v != NULL && v[0] != '\0')
		json_object_set_new(o, key, json_string(v));
}

static void set_int(json_t *o, const char *key, json_int_t v)
{
	json_object_set_new(o, key, json_integer(v));
}

static json_t *driver_json(const struct agent_report *r)
{
	const struct host_driver_info *d = &r->obs->driver;
	json_t *o = json_object();
	char buf[32];
	unsigned major;

	json_object_set_new(o, "loaded", json_boolean(d->loaded));
	if (d->loaded && d->version[0] != '\0') {
		set_str(o, "version", d->version);
		if (sscanf(d->version, "%u", &major) == 1) {
			snprintf(buf, sizeof(buf), "R%u", major);
			set_str(o, "branch", buf);
		}
		set_str(o, "flavour", d->open_module ? "open" : "proprietary");
	}
	set_str(o, "onDiskVersion", r->ondisk);
	if (d->cuda_version > 0) {
		snprintf(buf, sizeof(buf), "%d.%d", d->cuda_version / 1000,
		         (d->cuda_version % 1000) / 10);
		set_str(o, "cudaVersion", buf);
	}
	if (d->loaded && r->params != NULL && r->params->n > 0) {
		json_t *p = json_object();
		for (size_t i = 0; i < r->params->n && i < 64; i++)
			json_object_set_new(p, r->params->p[i].name,
			                    json_string(r->params->p[i].value));
		json_object_set_new(o, "parameters", p);
	}
	return o;
}

static const char *nvml_status_name(int st)
{
	static const char *const names[] = {
	        [0] = "Success",          [1] = "Uninitialized",     [2] = "InvalidArgument",
	        [3] = "NotSupported",     [4] = "NoPermission",      [5] = "AlreadyInitialized",
	        [6] = "NotFound",         [7] = "InsufficientSize",  [8] = "InsufficientPower",
	        [9] = "DriverNotLoaded",  [10] = "Timeout",          [11] = "IrqIssue",
	        [12] = "LibraryNotFound", [13] = "FunctionNotFound", [14] = "CorruptedInforom",
	        [15] = "GpuIsLost",
	};
	return st >= 0 && (size_t)st < ARRAY_LEN(names) ? names[st] : "Unknown";
}

static json_t *health_json(const struct host_fabric_health *h)
{
	static const char *const incorrect[] = {"NotSupported",
	                                        "None",
	                                        "SystemGUID",
	                                        "ChassisSerial",
	                                        "NoPartition",
	                                        "InsufficientNVLinks",
	                                        "IncompatibleGPUFirmware",
	                                        "InvalidLocation",
	                                        "GPUStateInvalid"};
	static const char *const partition[] = {"NotSupported", "Assigned", "NotAssigned"};
	json_t *o = json_object();

	json_object_set_new(o, "degradedBandwidth", json_boolean(h->degraded_bw == 1));
	json_object_set_new(o, "routeRecoveryInProgress", json_boolean(h->route_recovery == 1));
	json_object_set_new(o, "routeUnhealthy", json_boolean(h->route_unhealthy == 1));
	json_object_set_new(o, "accessTimeoutRecoveryInProgress",
	                    json_boolean(h->access_timeout == 1));
	if (h->incorrect_config < ARRAY_LEN(incorrect))
		set_str(o, "incorrectConfiguration", incorrect[h->incorrect_config]);
	if (h->partition < ARRAY_LEN(partition))
		set_str(o, "partitionAssigned", partition[h->partition]);
	return o;
}

static json_t *gpu_json(const struct host_gpu *g)
{
	json_t *o = json_object(), *f = json_object();

	set_int(o, "index", g->index);
	set_str(o, "uuid", g->uuid);
	set_str(o, "pciBusId", g->pci_bus_id);
	set_str(o, "vbios", g->vbios);
	set_str(o, "boardPartNumber", g->board_part);
	set_str(o, "serial", g->serial);
	if (g->fabric_state != HOST_FABRIC_UNKNOWN)
		set_str(f, "state", host_fabric_state_name(g->fabric_state));
	if (g->fabric_state == HOST_FABRIC_COMPLETED)
		set_str(f, "status", nvml_status_name(g->fabric_status));
	if (g->has_cluster) {
		set_str(f, "clusterUUID", g->cluster_uuid);
		set_int(f, "cliqueId", g->clique_id);
	}
	if (g->has_health) {
		set_int(f, "healthMask", g->health_mask);
		if (g->health_summary != HOST_HEALTH_UNKNOWN)
			set_str(f, "healthSummary", host_health_summary_name(g->health_summary));
		set_str(f, "healthSource", host_health_source_name(g->health_source));
		json_object_set_new(f, "health", health_json(&g->health));
	}
	json_object_set_new(o, "fabric", f);
	if (g->has_platform) {
		json_t *p = json_object();
		set_str(p, "chassisSerial", g->chassis_serial);
		if (g->slot <= 255)
			set_int(p, "slotNumber", g->slot);
		if (g->tray_index <= 255)
			set_int(p, "trayIndex", g->tray_index);
		if (g->host_id <= 255)
			set_int(p, "hostId", g->host_id);
		if (g->module_id <= 255)
			set_int(p, "moduleId", g->module_id);
		json_object_set_new(o, "platform", p);
	}
	return o;
}

static json_t *fabric_json(const struct host_obs *obs)
{
	json_t *o = json_object();

	if (obs->gpus_part.err != NV_OK)
		return o;
	if (obs->fabric != HOST_FABRIC_UNKNOWN)
		set_str(o, "state", host_fabric_state_name(obs->fabric));
	for (size_t i = 0; i < obs->n_gpus; i++) {
		if (obs->gpus[i].has_cluster) {
			set_str(o, "clusterUUID", obs->gpus[i].cluster_uuid);
			break;
		}
	}
	json_object_set_new(o, "cliqueID", json_string(obs->has_clique ? obs->clique : ""));
	if (obs->health != HOST_HEALTH_UNKNOWN)
		set_str(o, "healthSummary", host_health_summary_name(obs->health));
	set_str(o, "healthSource", host_health_source_name(obs->health_source));
	return o;
}

static const char *daemon_state_name(enum host_imex_daemon d)
{
	static const char *const names[] = {
	        [HOST_IMEXD_UNKNOWN] = "Unknown",
	        [HOST_IMEXD_INITIALIZING] = "Initializing",
	        [HOST_IMEXD_STARTING_AUTH_SERVER] = "StartingAuthServer",
	        [HOST_IMEXD_WAITING_FOR_PEERS] = "WaitingForPeers",
	        [HOST_IMEXD_WAITING_FOR_RECOVERY] = "WaitingForRecovery",
	        [HOST_IMEXD_INIT_GPU] = "InitGPU",
	        [HOST_IMEXD_READY] = "Ready",
	        [HOST_IMEXD_SHUTTING_DOWN] = "ShuttingDown",
	        [HOST_IMEXD_UNAVAILABLE] = "Unavailable",
	        [HOST_IMEXD_NOT_RUNNING] = "NotRunning",
	};
	return (size_t)d < ARRAY_LEN(names) ? names[d] : "Unknown";
}

static const char *domain_state_name(enum host_imex_domain d)
{
	static const char *const names[] = {"Unknown", "Up", "Down", "Degraded"};
	return (size_t)d < ARRAY_LEN(names) ? names[d] : "Unknown";
}

/* This tray's line in the peer list, or -1. */
static int self_index(const struct agent_spec *s, const char *ip)
{
	for (size_t i = 0; ip != NULL && i < s->imex.n_peers; i++)
		if (strcmp(s->imex.peers[i], ip) == 0)
			return (int)i;
	return -1;
}

/* Members this daemon is connected to, itself included when it is Ready. */
static void imex_counts(const struct agent_report *r, unsigned *connected, unsigned *ready)
{
	const struct host_imex_status *st = &r->obs->imex;
	unsigned pr = 0, pc = 0;

	*connected = *ready = 0;
	if (!st->nodes_ok)
		return;
	host_imex_domain_count(&st->dom, r->node_ip ? r->node_ip : "", &pr, &pc);
	*connected = pc + (st->daemon == HOST_IMEXD_READY ? 1u : 0u);
	*ready = pr + (st->daemon == HOST_IMEXD_READY ? 1u : 0u);
}

static json_t *imex_json(const struct agent_report *r)
{
	const struct agent_spec *s = r->spec;
	const struct host_imex_status *st = &r->obs->imex;
	json_t *o = json_object(), *ch, *created;
	unsigned conn, ready;
	int idx;

	set_str(o, "address", r->node_ip);
	if (!s->has_imex)
		return o;
	set_str(o, "mode", s->imex.mode == HOST_IMEX_HOST ? "host" : "process");
	if (r->obs->driver.loaded)
		set_str(o, "version", r->obs->driver.version);
	if (r->obs->imex_read)
		set_str(o, "daemonState", daemon_state_name(st->daemon));
	if (r->obs->imex_read && st->nodes_ok)
		set_str(o, "domainState", domain_state_name(st->dom.domain));
	idx = self_index(s, r->node_ip);
	if (idx >= 0 && idx <= 17)
		set_int(o, "nodeIndex", idx);
	imex_counts(r, &conn, &ready);
	set_int(o, "peersConnected", conn > 18 ? 18 : conn);
	set_int(o, "peersTotal", s->imex.n_peers > 18 ? 18 : (json_int_t)s->imex.n_peers);
	set_str(o, "configHash", r->imex_applied ? r->imex_hash : "");
	ch = json_object();
	set_int(ch, "count", r->obs->imex_channel_count);
	created = json_array();
	for (size_t i = 0; i < r->n_channels_created; i++)
		json_array_append_new(created, json_integer(r->channels_created[i]));
	json_object_set_new(ch, "created", created);
	json_object_set_new(o, "channels", ch);
	return o;
}

/* The state of a host unit as the status names it (hostFabricManager.state
 * and nvidiaDRA.hostIMEXUnit). */
static const char *unit_state_name(const struct host_unit_state *u)
{
	switch (u->active) {
	case HOST_UNIT_NOT_FOUND:
		return "NotInstalled";
	case HOST_UNIT_INACTIVE:
		return "Inactive";
	case HOST_UNIT_ACTIVE:
	case HOST_UNIT_ACTIVATING:
		return "Active";
	case HOST_UNIT_UNKNOWN:
		break;
	}
	return "Unknown";
}

static const char *fm_state_name(const struct agent_report *r)
{
	if (r->obs->fm_part.err != NV_OK && r->obs->fm_part.err != NV_E_STATE)
		return "Unknown";
	return unit_state_name(&r->obs->fm);
}

/* status.nvidiaDRA on an NVIDIA-managed tray; NULL elsewhere. */
static json_t *nvidia_json(const struct agent_report *r)
{
	const struct agent_nvidia_report *n = &r->nvidia;
	json_t *o;

	if (n->state != AGENT_NVIDIA_MANAGED)
		return NULL;
	o = json_object();
	set_str(o, "driver", AGENT_NVIDIA_DRIVER);
	set_str(o, "resourceSlice", n->slice);
	set_str(o, "hostIMEXUnit",
	        n->unit_read && n->unit_err == NV_OK ? unit_state_name(&n->unit) : "Unknown");
	return o;
}

/* ---- conditions ---- */

/* C_HOSTIMEX is reported on NVIDIA-managed trays only. */
enum { C_DRIVER = 0, C_FABRIC, C_HEALTH, C_IMEX, C_FM, C_HOSTIMEX, C_HEARTBEAT, C__N };

struct cond {
	const char *type;
	const char *status; /* NULL: the condition is not reported */
	char reason[64];
	char msg[512];
};

static void cond_set(struct cond *c, const char *status, const char *reason, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void cond_set(struct cond *c, const char *status, const char *reason, const char *fmt, ...)
{
	va_list ap;

	c->status = status;
	str_copy(c->reason, sizeof(c->reason), reason);
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

/* The last driver step failed (it is tried again). */
static bool drv_failed(const struct agent_drv_report *dr)
{
	return dr->phase == HOST_DRV_FAILED || dr->err != NV_OK;
}

void agent_drv_tally(struct agent_drv_tally *t, const char *target, int64_t now_ms,
                     struct agent_drv_report *d)
{
	bool failed = d->active && !d->waiting_maintenance && drv_failed(d);

	if (d->held)
		return;
	if (!failed || strcmp(t->target, target) != 0)
		t->fails = 0;
	d->failures = failed ? t->fails + 1 : 0;
	if (failed) {
		t->fails = d->failures;
		str_copy(t->target, sizeof(t->target), target);
		t->at_ms = now_ms;
		t->last = *d;
	}
}

bool agent_drv_hold(const struct agent_drv_tally *t, const char *target, int64_t now_ms,
                    struct agent_drv_report *d)
{
	if (t->fails == 0 || strcmp(t->target, target) != 0 ||
	    now_ms >= t->at_ms + AGENT_DRIVER_RETRY_MS)
		return false;
	*d = t->last;
	d->held = true;
	return true;
}

static void cond_driver(const struct agent_report *r, struct cond *c)
{
	const struct host_driver_info *d = &r->obs->driver;
	const struct agent_drv_report *dr = &r->drv;

	if (dr->active && dr->waiting_maintenance)
		cond_set(c, "False", "WaitingForMaintenance",
		         "spec.driver.version %s is not loaded (%s); the change starts when "
		         "spec.maintenance.state is Drained or Upgrading",
		         r->spec->driver_version, d->version[0] ? d->version : "none");
	else if (dr->active && dr->phase == HOST_DRV_REBOOT_REQUIRED)
		cond_set(c, "False", "RebootRequired", "%s is installed: %s",
		         r->spec->driver_version, dr->detail);
	else if (dr->active && drv_failed(dr) && dr->failures < AGENT_DRIVER_TRIES)
		cond_set(c, "False", "Retrying",
		         "changing to %s: a step failed (%u of %d in a row), trying again: %s",
		         r->spec->driver_version, dr->failures, AGENT_DRIVER_TRIES,
		         dr->detail[0] ? dr->detail : nv_err_str(dr->err));
	else if (dr->active && drv_failed(dr)) /* the same words at every failure after */
		cond_set(c, "False", "ChangeFailed",
		         "changing to %s: %d steps in a row failed (the agent keeps trying); the "
		         "last: %s",
		         r->spec->driver_version, AGENT_DRIVER_TRIES,
		         dr->detail[0] ? dr->detail : nv_err_str(dr->err));
	else if (dr->active)
		cond_set(c, "False", host_drv_phase_name(dr->phase), "changing to %s: %s",
		         r->spec->driver_version, dr->detail);
	else if (r->obs->driver_part.err != NV_OK)
		cond_set(c, "False", "DriverReadError", "%s", r->obs->driver_part.why);
	else if (!d->loaded)
		cond_set(c, "False", "NotLoaded", "the nvidia kernel module is not loaded");
	else if (r->spec->has_driver)
		cond_set(c, "True", "VersionMatches", "%s loaded", d->version);
	else
		cond_set(c, "True", "Loaded", "%s loaded; spec.driver is not set", d->version);
}

static void cond_fabric(const struct agent_report *r, struct cond *c)
{
	const struct host_obs *o = r->obs;

	if (o->gpus_part.err != NV_OK)
		cond_set(c, "False", "GPUReadError", "%s", o->gpus_part.why);
	else if (o->n_gpus == 0)
		cond_set(c, "False", "NoGPUs", "NVML reports no GPU");
	else if (o->clique_part.err == NV_E_CONFLICT)
		cond_set(c, "False", "CliqueMismatch", "%s", o->clique_part.why);
	else if (o->clique_part.err != NV_OK)
		cond_set(c, "False",
		         o->fabric == HOST_FABRIC_IN_PROGRESS   ? "InProgress"
		         : o->fabric == HOST_FABRIC_NOT_STARTED ? "NotStarted"
		                                                : "RegistrationFailed",
		         "%s", o->clique_part.why);
	else if (!o->has_clique)
		cond_set(c, "False", "NoClique", "no GPU reports an NVLink fabric");
	else
		cond_set(c, "True", "Completed", "%zu GPUs in clique %s", o->n_gpus, o->clique);
}

static void cond_health(const struct agent_report *r, struct cond *c)
{
	const struct host_obs *o = r->obs;
	char msg[512] = "", what[160];
	bool fault = false;

	if (o->gpus_part.err != NV_OK) {
		cond_set(c, "Unknown", "GPUReadError", "%s", o->gpus_part.why);
		return;
	}
	for (size_t i = 0; i < o->n_gpus; i++) {
		const struct host_gpu *g = &o->gpus[i];
		size_t n = strlen(msg);
		bool bad = g->health_summary == HOST_HEALTH_UNHEALTHY ||
		           g->health_summary == HOST_HEALTH_LIMITED_CAPACITY ||
		           (g->has_health && host_health_has_fault(&g->health));
		if (!bad)
			continue;
		fault = true;
		host_health_describe(&g->health, what, sizeof(what));
		snprintf(msg + n, sizeof(msg) - n, "%sGPU %u: %s%s%s%s%s", n ? "; " : "", g->index,
		         host_health_summary_name(g->health_summary),
		         g->health_source == HOST_HEALTH_SRC_MASK ? " from the health mask" : "",
		         what[0] ? " (" : "", what, what[0] ? ")" : "");
	}
	if (o->health == HOST_HEALTH_UNHEALTHY)
		cond_set(c, "False", "Unhealthy", "%s", msg);
	else if (o->health == HOST_HEALTH_LIMITED_CAPACITY)
		cond_set(c, "False", "LimitedCapacity", "%s", msg);
	else if (fault)
		cond_set(c, "False", "HealthMaskFault", "%s", msg);
	else if (o->health == HOST_HEALTH_UNKNOWN)
		cond_set(c, "Unknown", "HealthUnknown", "a GPU's health could not be read");
	else
		cond_set(c, "True", "Healthy", "%s", "");
}

/* "127.0.0.12 (node 5) Unavailable; ..." for the members not Ready. */
static void imex_down_peers(const struct host_imex_domain_status *d, char *out, size_t outsz)
{
	out[0] = '\0';
	for (size_t i = 0; i < d->n_nodes; i++) {
		size_t n = strlen(out);
		if (d->nodes[i].status == HOST_IMEXD_READY)
			continue;
		snprintf(out + n, outsz - n, "%s%s (node %u) %s", n ? "; " : "", d->nodes[i].host,
		         d->nodes[i].index, daemon_state_name(d->nodes[i].status));
	}
}

static void cond_imex(const struct agent_report *r, struct cond *c)
{
	const struct host_imex_status *st = &r->obs->imex;
	char peers[400];
	unsigned conn, ready;

	if (r->nvidia.imex_dropped && r->nvidia.state == AGENT_NVIDIA_MANAGED) {
		cond_set(c, "False", "NVIDIAManaged",
		         "NVIDIA's DRA driver %s runs IMEX on this tray (ResourceSlice %s): "
		         "spec.imex of domain %s is not applied",
		         AGENT_NVIDIA_DRIVER, r->nvidia.slice, r->nvidia.imex_domain);
	} else if (r->nvidia.imex_dropped) {
		cond_set(c, "False", "NVIDIAUnknown",
		         "whether NVIDIA's DRA driver %s manages this tray is not known (%s): "
		         "spec.imex of domain %s is not applied until it is",
		         AGENT_NVIDIA_DRIVER, r->nvidia.why, r->nvidia.imex_domain);
	} else if (!r->spec->has_imex) {
		if (r->spec_error[0] != '\0')
			cond_set(c, "False", "SpecInvalid", "%s", r->spec_error);
		else
			cond_set(c, "True", "NotRequested", "spec.imex is not set");
	} else if (r->drv.active) {
		cond_set(c, "False", "DriverChanging", "IMEX waits for the driver change to end");
	} else if (r->imex_apply_err != NV_OK) {
		cond_set(c, "False",
		         r->imex_apply_err == NV_E_CONFIG ? "ConfigInvalid" : "ApplyFailed", "%s",
		         r->imex_apply_why);
	} else if (r->obs->imex_part.err == NV_E_TIMEOUT) {
		cond_set(c, "False", "StatusTimeout", "%s", st->err);
	} else if (r->obs->imex_part.err != NV_OK) {
		cond_set(c, "False", "StatusError", "%s",
		         st->err[0] ? st->err : r->obs->imex_part.why);
	} else if (st->daemon != HOST_IMEXD_READY) {
		cond_set(c, "False", "DaemonNotReady", "the IMEX daemon is %s",
		         daemon_state_name(st->daemon));
	} else if (!st->nodes_ok) {
		cond_set(c, "False", "StatusError", "%s", st->err);
	} else if (st->dom.domain != HOST_IMEX_DOMAIN_UP) {
		imex_down_peers(&st->dom, peers, sizeof(peers));
		cond_set(c, "False",
		         st->dom.domain == HOST_IMEX_DOMAIN_DEGRADED ? "DomainDegraded"
		         : st->dom.domain == HOST_IMEX_DOMAIN_DOWN   ? "DomainDown"
		                                                     : "DomainUnknown",
		         "%s", peers);
	} else if (r->channels_err != NV_OK) {
		cond_set(c, "False", "ChannelsFailed", "%s", r->channels_why);
	} else {
		imex_counts(r, &conn, &ready);
		cond_set(c, "True", "DomainUp", "%u of %zu peers connected", conn,
		         r->spec->imex.n_peers);
	}
}

static void cond_fm(const struct agent_report *r, struct cond *c)
{
	const char *state = fm_state_name(r);

	if (r->fm_err == NV_E_STATE || r->obs->fm_part.err == NV_E_STATE)
		cond_set(c, "False", "Running", "%s",
		         r->fm_why[0] ? r->fm_why : r->obs->fm_part.why);
	else if (r->obs->fm_part.err != NV_OK)
		cond_set(c, "Unknown", "QueryFailed", "%s", r->obs->fm_part.why);
	else if (strcmp(state, "Active") == 0)
		cond_set(c, "False", "Running", "nvidia-fabricmanager.service is active");
	else
		cond_set(c, "True", r->obs->fm.masked ? "Masked" : state, "%s", "");
}

/* On an NVIDIA-managed tray: the host's IMEX unit must not run beside the
 * driver's daemon. Not reported elsewhere (status NULL). */
static void cond_host_imex(const struct agent_report *r, struct cond *c)
{
	const struct agent_nvidia_report *n = &r->nvidia;

	if (n->state != AGENT_NVIDIA_MANAGED)
		return;
	if (!n->unit_read || n->unit_err != NV_OK)
		cond_set(c, "Unknown", "QueryFailed", "%s: %s", AGENT_HOST_IMEX_UNIT,
		         n->unit_why[0] ? n->unit_why : "not read");
	else if (n->unit.active == HOST_UNIT_ACTIVE || n->unit.active == HOST_UNIT_ACTIVATING)
		cond_set(c, "False", "ConflictsWithNVIDIADRA",
		         "%s is active on a tray whose IMEX NVIDIA's DRA driver %s runs "
		         "(ResourceSlice %s): the host daemon and the driver's daemon cannot hold "
		         "the driver's IMEX session together; mask the unit "
		         "(systemctl mask --now %s), as NVIDIA's prerequisites say",
		         AGENT_HOST_IMEX_UNIT, AGENT_NVIDIA_DRIVER, n->slice, AGENT_HOST_IMEX_UNIT);
	else
		cond_set(c, "True", n->unit.masked ? "Masked" : unit_state_name(&n->unit), "%s",
		         "");
}

static void conds_compute(const struct agent_report *r, struct cond c[C__N])
{
	static const char *const types[C__N] = {
	        "DriverReady",          "FabricReady", "FabricHealthy",   "IMEXReady",
	        "HostFabricManagerOff", "HostIMEXOff", "HeartbeatCurrent"};

	memset(c, 0, sizeof(struct cond) * C__N);
	for (int i = 0; i < C__N; i++)
		c[i].type = types[i];
	cond_driver(r, &c[C_DRIVER]);
	cond_fabric(r, &c[C_FABRIC]);
	cond_health(r, &c[C_HEALTH]);
	cond_imex(r, &c[C_IMEX]);
	cond_fm(r, &c[C_FM]);
	cond_host_imex(r, &c[C_HOSTIMEX]);
	cond_set(&c[C_HEARTBEAT], "True", "LeaseRenewed", "heartbeat Lease %s",
	         r->lease ? r->lease : "");
}

/* Ready: every other condition but the heartbeat is True. */
static void cond_ready(const struct cond c[C__N], struct cond *ready)
{
	static const char *const reasons[C__N] = {
	        "DriverNotReady",           "FabricNotReady",  "FabricUnhealthy", "IMEXNotReady",
	        "HostFabricManagerRunning", "HostIMEXRunning", "NoHeartbeat"};
	const char *reason = NULL;
	char msg[512] = "";

	ready->type = "Ready";
	for (int i = 0; i < C_HEARTBEAT; i++) {
		size_t n = strlen(msg);
		if (c[i].status == NULL || strcmp(c[i].status, "True") == 0)
			continue;
		if (reason == NULL)
			reason = reasons[i];
		snprintf(msg + n, sizeof(msg) - n, "%s%.63s: %.160s", n ? "; " : "", c[i].reason,
		         c[i].msg);
	}
	if (reason == NULL)
		cond_set(ready, "True", "AllReady", "%s", "");
	else
		cond_set(ready, "False", reason, "%s", msg);
}

/* ---- lastError ---- */

static bool last_error(const struct agent_report *r, const char **reason, const char **msg)
{
	const struct host_obs *o = r->obs;

	*reason = NULL;
	if (r->spec_error[0] != '\0')
		*reason = "SpecInvalid", *msg = r->spec_error;
	else if (o->driver_part.err != NV_OK)
		*reason = "DriverReadError", *msg = o->driver_part.why;
	else if (o->gpus_part.err != NV_OK)
		*reason = "NVMLError", *msg = o->gpus_part.why;
	else if (r->drv.active && drv_failed(&r->drv))
		*reason = "DriverChangeFailed", *msg = r->drv.detail;
	else if (r->imex_apply_err != NV_OK)
		*reason = "IMEXConfigFailed", *msg = r->imex_apply_why;
	else if (o->imex_read && o->imex_part.err == NV_E_TIMEOUT)
		*reason = "IMEXStatusTimeout", *msg = o->imex.err;
	else if (o->imex_read && o->imex_part.err != NV_OK)
		*reason = "IMEXStatusError", *msg = o->imex.err;
	else if (r->channels_err != NV_OK)
		*reason = "ChannelsFailed", *msg = r->channels_why;
	else if (r->fm_err != NV_OK || o->fm_part.err != NV_OK)
		*reason = "HostFabricManager", *msg = r->fm_why[0] ? r->fm_why : o->fm_part.why;
	return *reason != NULL;
}

static json_t *last_error_json(const struct agent_report *r, const json_t *old, int64_t now_ms)
{
	const json_t *prev = jx_path(old, "lastError");
	const char *reason, *msg;
	char ts[TIME_RFC3339_LEN];

	if (!last_error(r, &reason, &msg))
		return NULL;
	/* The same error again keeps its time: no write for a standing fault. */
	if (strcmp(jx_str_or(prev, "reason", ""), reason) == 0 &&
	    strcmp(jx_str_or(prev, "message", ""), msg) == 0 && jx_path(prev, "time") != NULL)
		return json_deep_copy(prev);
	time_format_rfc3339(now_ms, ts);
	return json_pack("{s:s,s:s,s:s}", "time", ts, "reason", reason, "message", msg);
}

/* ---- the whole status ---- */

static json_t *conditions_json(const struct agent_report *r, const json_t *old, int64_t now_ms)
{
	struct cond c[C__N], ready;
	json_t *tmp = json_object(), *prev = jx_path(old, "conditions"), *out;

	if (json_is_array(prev))
		jx_set_take(tmp, "status.conditions", json_deep_copy(prev));
	conds_compute(r, c);
	cond_ready(c, &ready);
	kube_condition_set(tmp, ready.type, ready.status, ready.reason, ready.msg,
	                   r->spec->generation, now_ms);
	for (int i = 0; i < C__N; i++) {
		if (c[i].status == NULL) /* not reported: one left from before goes */
			(void)kube_condition_remove(tmp, c[i].type);
		else
			kube_condition_set(tmp, c[i].type, c[i].status, c[i].reason, c[i].msg,
			                   r->spec->generation, now_ms);
	}
	/* The plugin serves workloads, not the tray: it is left out of Ready. */
	if (r->plugin.status[0] != '\0')
		kube_condition_set(tmp, "KubeletPluginReady", r->plugin.status, r->plugin.reason,
		                   r->plugin.message, r->spec->generation, now_ms);
	else
		(void)kube_condition_remove(tmp, "KubeletPluginReady");
	out = json_incref(jx_path(tmp, "status.conditions"));
	json_decref(tmp);
	return out;
}

static json_t *maintenance_json(const struct agent_report *r)
{
	json_t *o = json_object();

	set_str(o, "state", r->spec->maint_state);
	if (r->spec->has_upgrade_step && strcmp(r->spec->maint_state, "Upgrading") == 0 &&
	    !r->drv.active)
		set_int(o, "upgradeStep", r->spec->upgrade_step);
	if (r->drv.active)
		set_str(o, "message",
		        r->drv.detail[0] ? r->drv.detail : host_drv_phase_name(r->drv.phase));
	return o;
}

/* A figure the apiserver hands back as an integer must be built as one, or
 * the stored and the built status would never compare equal. */
static json_t *number_json(double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		return json_integer((json_int_t)v);
	return json_real(v);
}

static json_t *validation_json(const struct host_val_result *v)
{
	json_t *o = json_object();
	char ts[TIME_RFC3339_LEN];

	set_str(o, "id", v->id);
	set_str(o, "phase", host_val_phase_name(v->phase));
	if (v->has_busbw)
		json_object_set_new(o, "busBandwidthGbps", number_json(v->busbw_gbps));
	set_str(o, "transport", v->transport);
	if (v->start_ms > 0) {
		time_format_rfc3339(v->start_ms, ts);
		set_str(o, "startTime", ts);
	}
	if (v->end_ms > 0 && v->phase != HOST_VAL_RUNNING) {
		time_format_rfc3339(v->end_ms, ts);
		set_str(o, "completionTime", ts);
	}
	set_str(o, "message", v->message);
	return o;
}

void agent_validation_from_status(const json_t *status, struct host_val_result *out)
{
	const json_t *v = jx_path(status, "validation");
	const json_t *bw = jx_path(v, "busBandwidthGbps");
	const char *phase = jx_str_or(v, "phase", "");

	memset(out, 0, sizeof(*out));
	if (!json_is_object(v) ||
	    str_copy(out->id, sizeof(out->id), jx_str_or(v, "id", "")) != NV_OK ||
	    out->id[0] == '\0')
		goto none;
	for (int p = HOST_VAL_RUNNING; p <= HOST_VAL_FAILED; p++)
		if (strcmp(phase, host_val_phase_name((enum host_val_phase)p)) == 0)
			out->phase = (enum host_val_phase)p;
	if (out->phase == HOST_VAL_NONE)
		goto none;
	if (json_is_number(bw) && json_number_value(bw) >= 0 &&
	    json_number_value(bw) <= HOST_VALIDATION_BUSBW_MAX) {
		out->has_busbw = true;
		out->busbw_gbps = json_number_value(bw);
	}
	(void)str_copy(out->transport, sizeof(out->transport), jx_str_or(v, "transport", ""));
	(void)time_parse_rfc3339(jx_str_or(v, "startTime", ""), &out->start_ms);
	(void)time_parse_rfc3339(jx_str_or(v, "completionTime", ""), &out->end_ms);
	(void)str_copy(out->message, sizeof(out->message), jx_str_or(v, "message", ""));
	return;
none:
	memset(out, 0, sizeof(*out));
}

json_t *agent_status_build(const struct agent_report *r, const json_t *old, int64_t now_ms)
{
	json_t *o = json_object(), *gpus = json_array(), *fm = json_object(), *le, *nv;

	set_int(o, "observedGeneration", r->spec->generation);
	set_str(o, "agentVersion", NVL72_VERSION);
	json_object_set_new(o, "driver", driver_json(r));
	for (size_t i = 0; i < r->obs->n_gpus && i < 4; i++)
		json_array_append_new(gpus, gpu_json(&r->obs->gpus[i]));
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "fabric", fabric_json(r->obs));
	json_object_set_new(o, "imex", imex_json(r));
	set_str(fm, "state", fm_state_name(r));
	json_object_set_new(o, "hostFabricManager", fm);
	json_object_set_new(o, "maintenance", maintenance_json(r));
	if ((nv = nvidia_json(r)) != NULL)
		json_object_set_new(o, "nvidiaDRA", nv);
	if (r->validation.phase != HOST_VAL_NONE)
		json_object_set_new(o, "validation", validation_json(&r->validation));
	le = last_error_json(r, old, now_ms);
	if (le != NULL)
		json_object_set_new(o, "lastError", le);
	json_object_set_new(o, "conditions", conditions_json(r, old, now_ms));
	return o;
}

bool agent_status_differs(const json_t *a, const json_t *b)
{
	json_t *ca, *cb;
	bool differ;

	if (a == NULL || b == NULL)
		return a != b;
	ca = json_copy((json_t *)a);
	cb = json_copy((json_t *)b);
	json_object_del(ca, "heartbeatTime");
	json_object_del(cb, "heartbeatTime");
	differ = !json_equal(ca, cb);
	json_decref(ca);
	json_decref(cb);
	return differ;
}
